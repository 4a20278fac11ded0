/* SPDX-License-Identifier: Apache-2.0 */
/*
 * args.h -- a small declarative command-line parser for the drivers.
 * Options are "--name value", "--name=value" or "--flag".  Integers accept
 * a K/M/G suffix (powers of 1024; uly_parse_int of src/base).  Every problem gives a one-line message.
 */
#ifndef ULY_CLI_ARGS_H
#define ULY_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum { ARG_FLAG, ARG_INT, ARG_REAL, ARG_STR, ARG_CHOICE } arg_kind;

typedef struct arg_opt {
    const char *name;             /* without the leading "--" */
    arg_kind kind;
    void *dst;                    /* int*, int64_t*, double*, const char**, int* (choice index) */
    int64_t min, max;             /* ARG_INT range; ARG_REAL uses them when min < max */
    const char *metavar;
    const char *help;
    const char *const *choices;   /* ARG_CHOICE: NULL-terminated */
    int *seen;                    /* optional: set to 1 when given */
} arg_opt;

enum { ARGS_OK = 0, ARGS_HELP = 1, ARGS_ERROR = 2 };

/* Parse argv[0..argc) (argv[0] is the first option, not the program). */
int args_parse(const char *cmd, int argc, char **argv, const arg_opt *opts, char *err, size_t errlen);
/* Print "usage: ..." with every option and its help. */
void args_usage(FILE *f, const char *cmd, const char *synopsis, const arg_opt *opts);

#endif
