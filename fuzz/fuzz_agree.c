/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_agree.c -- libFuzzer harness for the drivers' option agreement
 * (src/cli/agree_table.c: the records every rank sends and the verdict
 * every rank draws from the gathered table; drv_agree in agree.c is the
 * MPI exchange around them).
 *
 * The input describes up to 8 ranks: the option fields (kinds INT, FLAG,
 * CHOICE, STR, REAL), and per rank its command, parse status, values (from
 * small alphabets, so that equal and different values both occur, with
 * -0.0 vs 0.0, NaN, NULL vs "", long strings) and now and then a damaged
 * record.  The verdict must match a plain re-derivation from the values
 * themselves (not from the hashes); the message naming a differing option
 * must name it, list exactly the ranks of each value, and stay inside its
 * buffer whatever the buffer's size.  Built by fuzz/build.sh.
 *
 * With -DULY_FUZZ_STANDALONE the file also builds without libFuzzer: main
 * replays the files named on the command line and prints each verdict.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree_table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#include "check.h"

enum { MAXP = 8, MAXF = 12 };

static const char *const names[MAXF] = {"--f0", "--f1", "--f2", "--f3", "--f4",  "--f5",
                                        "--f6", "--f7", "--f8", "--f9", "--f10", "--f11"};
static const char *const choices[] = {"auto", "pack", "datatype", NULL};
static char longstr[300];
static const char *str_of(unsigned b)
{
    static const char *const s[] = {NULL, "", "a.npy", "b.npy", longstr, "a.npy "};
    return s[b % 6];
}
static double real_of(unsigned b)
{
    const double r[] = {0.0, -0.0, 1.5, 5e-3, INFINITY, NAN, -NAN, 1e300};
    return r[b % 8];
}

typedef struct byte_stream {
    const uint8_t *p;
    size_t n, i;
} byte_stream;

static unsigned next(byte_stream *s)
{
    return s->i < s->n ? s->p[s->i++] : 0;
}

/* The values of field k on two ranks are the same option value. */
static int same_value(const drv_field *a, const drv_field *b)
{
    switch (a->kind) {
    case DRV_F_STR:
        return (!a->s && !b->s) || (a->s && b->s && strcmp(a->s, b->s) == 0);
    case DRV_F_REAL:
        return memcmp(&a->r, &b->r, sizeof a->r) == 0;
    default:
        return a->i == b->i;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!longstr[0])
        memset(longstr, 'x', sizeof longstr - 1);
    byte_stream in = {data, size, 0};
    const int P = 1 + (int)(next(&in) % MAXP);
    const int nf = (int)(next(&in) % (MAXF + 1));
    drv_field_kind kind[MAXF];
    for (int k = 0; k < nf; k++)
        kind[k] = (drv_field_kind)(next(&in) % 5);
    drv_field f[MAXP][MAXF];
    int parse[MAXP], other_cmd[MAXP], damaged[MAXP];
    int64_t tab[MAXP * DRV_REC_LEN];
    char strs[MAXP * DRV_STRLEN];
    for (int r = 0; r < P; r++) {
        unsigned b = next(&in);
        parse[r] = b < 224 ? DRV_PARSE_OK : b < 240 ? DRV_PARSE_HELP : DRV_PARSE_ERROR;
        unsigned c = next(&in);
        other_cmd[r] = c % 32 == 31;
        damaged[r] = c % 32 == 30;
        for (int k = 0; k < nf; k++) {
            unsigned v = next(&in);
            drv_field *x = &f[r][k];
            *x = (drv_field){names[k], kind[k], 0, NULL, 0, NULL};
            switch (kind[k]) {
            case DRV_F_INT: x->i = (int64_t)(v % 3) - (v & 0x80 ? INT64_C(1) << 62 : 0); break;
            case DRV_F_FLAG: x->i = v & 1; break;
            case DRV_F_CHOICE: x->i = (int64_t)(v % 6) - 1; x->choices = choices; break;
            case DRV_F_STR: x->s = str_of(v); break;
            case DRV_F_REAL: x->r = real_of(v); break;
            }
        }
        int64_t *rec = tab + (size_t)r * DRV_REC_LEN;
        drv_agree_record(rec, other_cmd[r] ? "ulysses bench" : "ulysses attn", parse[r], f[r], nf);
        CHECK(rec[DRV_REC_N] == (parse[r] == DRV_PARSE_OK ? nf : 0));
        if (damaged[r])
            rec[DRV_REC_VERSION] ^= 1;
        snprintf(strs + (size_t)r * DRV_STRLEN, DRV_STRLEN, "%s",
                 nf && kind[0] == DRV_F_STR && f[r][0].s ? f[r][0].s : "");
    }
    drv_verdict v;
    drv_agree_verdict(tab, P, &v);

    /* the expected verdict, from the values themselves */
    int cmd_differs = 0, first_err = -1, nerr = 0, nhelp = 0, field = -1;
    for (int r = 0; r < P; r++)
        cmd_differs |= damaged[r] || other_cmd[r] != other_cmd[0];
    for (int r = 0; r < P; r++) {
        if (parse[r] == DRV_PARSE_ERROR && first_err < 0)
            first_err = r;
        nerr += parse[r] == DRV_PARSE_ERROR;
        nhelp += parse[r] == DRV_PARSE_HELP;
    }
    for (int k = 0; k < nf && field < 0; k++)
        for (int r = 1; r < P; r++)
            if (!same_value(&f[r][k], &f[0][k])) {
                field = k;
                break;
            }
    if (cmd_differs) {
        CHECK(v.cmd_differs && v.rc == 2);
        return 0;
    }
    CHECK(!v.cmd_differs);
    CHECK(v.first_err == first_err && v.nerr == nerr);
    if (nerr) {
        CHECK(v.rc == 2);
        return 0;
    }
    CHECK(v.nhelp == nhelp);
    if (nhelp) {
        CHECK(v.rc == (nhelp == P ? DRV_PARSE_HELP : 2));
        return 0;
    }
    CHECK(v.field == field);
    CHECK(v.rc == (field < 0 ? 0 : 2));
    if (field < 0)
        return 0;

    /* the message: the option's name, then each distinct value with exactly its ranks */
    const int col = DRV_REC_HEAD + field;
    char text[1024];
    drv_agree_describe(text, sizeof text, P, &f[0][field], tab, col, field == 0 ? strs : NULL);
    char head[64];
    snprintf(head, sizeof head, "ranks disagree on %s:", names[field]);
    CHECK(strncmp(text, head, strlen(head)) == 0);
    CHECK(strlen(text) < sizeof text);
    for (int r = 0; r < P; r++) {
        char ranks[160];
        drv_agree_ranks(ranks, sizeof ranks, tab, P, col, tab[(size_t)r * DRV_REC_LEN + (size_t)col]);
        /* parse "a-b,c" back: exactly the ranks holding rank r's value */
        int in_list[MAXP] = {0};
        const char *q = ranks;
        while (*q) {
            char *end;
            long a = strtol(q, &end, 10), b = a;
            CHECK(end != q && a >= 0 && a < P);
            if (*end == '-') {
                q = end + 1;
                b = strtol(q, &end, 10);
                CHECK(end != q && b > a && b < P);
            }
            for (long x = a; x <= b; x++)
                in_list[x] = 1;
            q = *end == ',' ? end + 1 : end;
            CHECK(*end == ',' || *end == '\0');
        }
        for (int s = 0; s < P; s++)
            CHECK(in_list[s] == same_value(&f[s][field], &f[r][field]));
    }
    /* any buffer size: NUL-terminated inside it */
    size_t len = 1 + next(&in) % 64;
    char small[65];
    memset(small, 'Z', sizeof small);
    drv_agree_describe(small, len, P, &f[0][field], tab, col, strs);
    CHECK(memchr(small, '\0', len) != NULL && small[len] == 'Z');
    drv_agree_ranks(small, len, tab, P, col, tab[col]);
    CHECK(memchr(small, '\0', len) != NULL && small[len] == 'Z');
    return 0;
}

#ifdef ULY_FUZZ_STANDALONE
static void fuzz_report(const char *name, const unsigned char *data, size_t len)
{
    (void)data;
    printf("%s: %zu bytes replayed\n", name, len);
}
#endif
#include "standalone.h"
