/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agree_table.h -- the decision part of the drivers' option agreement
 * (drv_agree in agree.c), without MPI, so that a fuzz harness can drive it
 * with arbitrary ranks' records: what each rank sends (a fixed-size record
 * of int64), and what every rank concludes from the gathered table.
 */
#ifndef ULY_CLI_AGREE_TABLE_H
#define ULY_CLI_AGREE_TABLE_H

#include <stddef.h>
#include <stdint.h>

typedef enum { DRV_F_INT, DRV_F_FLAG, DRV_F_CHOICE, DRV_F_STR, DRV_F_REAL } drv_field_kind;

/* One option every rank must share: its name as the user types it
 * ("--repeat"), its kind and value (strings are compared by a hash of their
 * text; NULL means "not given"). */
typedef struct drv_field {
    const char *name;
    drv_field_kind kind;
    int64_t i;                    /* INT, FLAG, CHOICE */
    const char *s;                /* STR */
    double r;                     /* REAL (compared bitwise) */
    const char *const *choices;   /* CHOICE: names, NULL-terminated (NULL: an optional number, -1 when not given) */
} drv_field;

enum { DRV_AGREE_MAX = 60 };
enum { DRV_PARSE_OK = 0, DRV_PARSE_HELP = 1, DRV_PARSE_ERROR = 2 };

/* Record layout: [magic, command hash, parse status, number of fields, fields...]. */
enum { DRV_REC_VERSION, DRV_REC_CMD, DRV_REC_PARSE, DRV_REC_N, DRV_REC_HEAD, DRV_REC_LEN = DRV_REC_HEAD + DRV_AGREE_MAX };
#define DRV_REC_MAGIC INT64_C(0x756c7973001)
/* Bytes of each rank's string in a mismatch message. */
enum { DRV_STRLEN = 256 };

/* 64-bit FNV-1a hash of a string (0 for NULL, never 0 otherwise). */
uint64_t drv_hash(const char *s);

/* This rank's record (n is clamped to [0, DRV_AGREE_MAX]; fields are only
 * recorded when parse is DRV_PARSE_OK). */
void drv_agree_record(int64_t rec[DRV_REC_LEN], const char *cmd, int parse, const drv_field *f, int n);

/* What every rank concludes from the table of P records (P x DRV_REC_LEN). */
typedef struct drv_verdict {
    int rc;          /* 0 agreed; DRV_PARSE_HELP (1) all asked for --help; 2 refused */
    int cmd_differs; /* some rank runs another command (or sent a malformed record: magic,
                        a field count out of range or unlike the others') */
    int first_err;   /* lowest rank with a parse error, -1 when none */
    int nerr, nhelp; /* ranks with a parse error, with --help */
    int field;       /* first field that differs, -1 when none */
} drv_verdict;
void drv_agree_verdict(const int64_t *tab, int P, drv_verdict *v);

/* "0-2,5": the ranks whose column col equals v. */
void drv_agree_ranks(char *buf, size_t len, const int64_t *tab, int P, int col, int64_t v);
/* "ranks disagree on --x: 3 on ranks 0-1; 4 on rank 2" for field f (column
 * DRV_REC_HEAD + index); strs: every rank's string of a STR field
 * (P x DRV_STRLEN, each NUL-terminated) or NULL. */
void drv_agree_describe(char *out, size_t len, int P, const drv_field *f, const int64_t *tab, int col,
                        const char *strs);

#endif
