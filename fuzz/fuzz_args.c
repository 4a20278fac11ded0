/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_args.c -- libFuzzer harness for the command-line parsers.
 *
 * The input is split on NUL bytes into an argument vector (each argument in
 * its own exact-size allocation, so that a sanitizer sees reads past its
 * end).  The vector goes through
 *
 *   - args_parse (src/cli/args.c) with an option table like that of
 *     `ulysses attn`: bounded integers (K/M/G suffixes), flags, strings, a
 *     choice and two reals.  Every call must return ARGS_OK, ARGS_HELP or
 *     ARGS_ERROR; OK leaves every value in its declared range; ERROR leaves a
 *     message naming the command.
 *   - the number and list syntax of ulysses-sim (parse_count, parse_list in
 *     sim/cli/opts.c), once per argument: a success gives positive counts
 *     within the list capacity, ranges ascending.
 *
 *   - opts_parse (sim/cli/opts.c), the whole ulysses-sim option parser, in
 *     run mode and in sweep mode: it returns 0 (values in range) or
 *     EXIT_BADINPUT with a message, and never prints or exits.
 * Built by fuzz/build.sh.
 *
 * With -DULY_FUZZ_STANDALONE the file also builds without libFuzzer: main
 * replays the files named on the command line through the same entry point
 * and prints args_parse's verdict for each.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "opts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#include "check.h"

#define MAX_ARGS 64
#define ERRLEN 256
#define CMD "ulysses attn"

/* Destinations, reset before every input to values no option can set. */
static int64_t v_batch, v_seq, v_heads, v_kv, v_dim, v_window, v_seed, v_count, v_warmup, v_neg;
static int f_causal, f_backward, f_check, f_json;
static int c_dtype;
static double r_scale, r_any;
static const char *s_q, *s_out;
static int seen_batch, seen_seq, seen_dtype;

static const char *const dtype_names[] = {"f32", "f64", NULL};

static const arg_opt table[] = {
    {"batch", ARG_INT, &v_batch, 1, 1 << 20, "B", "batch size", NULL, &seen_batch},
    {"seq", ARG_INT, &v_seq, 1, INT64_MAX / 2, "N", "sequence length", NULL, &seen_seq},
    {"heads", ARG_INT, &v_heads, 1, 1 << 20, "H", "query heads", NULL, NULL},
    {"kv-heads", ARG_INT, &v_kv, 1, 1 << 20, "Hkv", "key/value heads", NULL, NULL},
    {"head-dim", ARG_INT, &v_dim, 1, 1 << 16, "d", "head dimension", NULL, NULL},
    {"window", ARG_INT, &v_window, 1, INT64_MAX / 2, "W", "sliding window", NULL, NULL},
    {"seed", ARG_INT, &v_seed, 0, INT64_MAX, "S", "seed", NULL, NULL},
    {"max-count", ARG_INT, &v_count, 1, INT64_MAX, "n", "largest count", NULL, NULL},
    {"warmup", ARG_INT, &v_warmup, 0, 1000, "W", "untimed repetitions", NULL, NULL},
    {"offset", ARG_INT, &v_neg, INT64_MIN, INT64_MAX, "X", "any integer", NULL, NULL},
    {"causal", ARG_FLAG, &f_causal, 0, 0, NULL, "causal mask", NULL, NULL},
    {"backward", ARG_FLAG, &f_backward, 0, 0, NULL, "backward pass", NULL, NULL},
    {"check", ARG_FLAG, &f_check, 0, 0, NULL, "check", NULL, NULL},
    {"json", ARG_FLAG, &f_json, 0, 0, NULL, "JSON output", NULL, NULL},
    {"dtype", ARG_CHOICE, &c_dtype, 0, 0, "T", "f32 or f64", dtype_names, &seen_dtype},
    {"scale", ARG_REAL, &r_scale, 0, 10, "s", "a number in [0, 10]", NULL, NULL},
    {"alpha", ARG_REAL, &r_any, 0, 0, "a", "any finite number", NULL, NULL},
    {"q", ARG_STR, &s_q, 0, 0, "F.npy", "queries", NULL, NULL},
    {"out", ARG_STR, &s_out, 0, 0, "F.npy", "output", NULL, NULL},
    {NULL, ARG_FLAG, NULL, 0, 0, NULL, NULL, NULL, NULL},
};

/* One integer destination left at its sentinel or set within [min, max]. */
static void check_int(const arg_opt *o)
{
    int64_t v = *(const int64_t *)o->dst;
    CHECK(v == INT64_MIN + 7 || (v >= o->min && v <= o->max));
}

/* A string option must point at (the value part of) one of the arguments. */
static void check_str(const char *s, char **argv, int argc)
{
    if (!s)
        return;
    CHECK(*s != 0);
    for (int i = 0; i < argc; i++) {
        size_t len = strlen(argv[i]);
        if (s >= argv[i] && s <= argv[i] + len)
            return;
    }
    CHECK(!"string value points into an argument");
}

static void reset(void)
{
    for (const arg_opt *o = table; o->name; o++)
        if (o->kind == ARG_INT)
            *(int64_t *)o->dst = INT64_MIN + 7;
    f_causal = f_backward = f_check = f_json = 0;
    c_dtype = -1;
    r_scale = r_any = -1e300;
    s_q = s_out = NULL;
    seen_batch = seen_seq = seen_dtype = 0;
}

static int last_rc;
static char last_err[ERRLEN];

static void fuzz_args_parse(char **argv, int argc)
{
    char *err = malloc(ERRLEN);   /* exact size: a sanitizer sees overruns */
    if (!err)
        abort();
    err[0] = 0;
    reset();
    int rc = args_parse(CMD, argc, argv, table, err, ERRLEN);
    last_rc = rc;
    memcpy(last_err, err, ERRLEN);
    if (rc == ARGS_OK) {
        for (const arg_opt *o = table; o->name; o++)
            if (o->kind == ARG_INT)
                check_int(o);
        CHECK(((f_causal | f_backward | f_check | f_json) & ~1) == 0);
        CHECK(c_dtype == -1 || c_dtype == 0 || c_dtype == 1);
        CHECK(seen_dtype == (c_dtype != -1));
        CHECK(r_scale == -1e300 || (r_scale >= 0 && r_scale <= 10));
        CHECK(r_any == -1e300 || isfinite(r_any));
        check_str(s_q, argv, argc);
        check_str(s_out, argv, argc);
    } else if (rc == ARGS_ERROR) {
        CHECK(memchr(err, 0, ERRLEN) != NULL);
        CHECK(strncmp(err, CMD ": ", strlen(CMD) + 2) == 0);
    } else {
        CHECK(rc == ARGS_HELP);
    }
    free(err);
}

/* ulysses-sim's count and list syntax on one argument. */
static void fuzz_sim_numbers(const char *s)
{
    /* one integer syntax for both programs: parse_count and uly_parse_int
     * (behind args_parse) agree on every input, negatives included */
    int64_t v = -1, w = -2;
    int rc = parse_count(s, &v);
    CHECK((rc == 0) == (uly_parse_int(s, &w) == 0));
    CHECK(rc != 0 || v == w);
    /* Lists: single value (run mode) and up to MAX_LIST values (sweep). */
    static int64_t list[MAX_LIST];
    int caps[2] = {1, MAX_LIST};
    for (int k = 0; k < 2; k++) {
        int n = -1;
        if (parse_list(s, list, caps[k], &n) == 0) {
            CHECK(n >= 1 && n <= caps[k]);
            for (int i = 0; i < n; i++)
                CHECK(list[i] >= 1);
            if (strchr(s, ':'))
                for (int i = 1; i < n; i++)
                    CHECK(list[i] > list[i - 1]);
        }
    }
}

/* ulysses-sim's whole option parser, as `ulysses-sim ARGS`, `ulysses-sim sweep ARGS`
 * and `ulysses-sim plan ARGS`. */
static void fuzz_sim_opts(char **argv, int argc)
{
    for (int mode = OPTS_RUN; mode <= OPTS_PLAN; mode++) {
        int sweep = mode == OPTS_SWEEP;
        opts o;
        opts_defaults(&o);
        int help = 0;
        int rc = opts_parse(&o, argc, argv, 0, mode, &help);
        CHECK(rc == 0 || rc == EXIT_BADINPUT);
        if (rc) {
            CHECK(opts_error()[0] != '\0');
            continue;
        }
        CHECK(o.zero >= 0 && o.zero <= 3);
        CHECK(o.ngpus >= 0 && o.ngpus <= (sweep ? MAX_LIST : 1));
        CHECK(o.nseqs >= 0 && o.nseqs <= (sweep ? MAX_LIST : 1));
        for (int i = 0; i < o.ngpus; i++)
            CHECK(o.gpus[i] >= 1 && o.gpus[i] <= 1048576);
        CHECK(o.nmethods >= 0 && o.nmethods <= ULY_METHOD_ALL);
        CHECK(mode == OPTS_PLAN ? o.top == 0 || (o.top >= 1 && o.top <= 1000) : o.top == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    size_t start = 0;
    /* An empty input is an empty command line; otherwise k NULs give k+1 arguments. */
    for (size_t i = 0; size > 0 && i <= size && argc < MAX_ARGS; i++) {
        if (i == size || data[i] == 0) {
            size_t len = i - start;
            char *a = malloc(len + 1);
            if (!a)
                abort();
            memcpy(a, data + start, len);
            a[len] = 0;
            argv[argc++] = a;
            start = i + 1;
        }
    }
    argv[argc] = NULL;
    fuzz_args_parse(argv, argc);
    fuzz_sim_opts(argv, argc);
    for (int i = 0; i < argc; i++)
        fuzz_sim_numbers(argv[i]);
    for (int i = 0; i < argc; i++)
        free(argv[i]);
    return 0;
}

#ifdef ULY_FUZZ_STANDALONE
static void fuzz_report(const char *name, const unsigned char *data, size_t len)
{
    (void)data;
    (void)len;
    printf("%s: %s\n", name, last_rc == ARGS_OK ? "ok" : last_rc == ARGS_HELP ? "help" : last_err);
}
#endif
#include "standalone.h"
