/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agree_table.c -- the records and the verdict of the option agreement
 * (see agree_table.h); no MPI.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "agree_table.h"

uint64_t drv_hash(const char *s)
{
    if (!s)
        return 0;
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h ? h : 1;
}

static int64_t field_value(const drv_field *f)
{
    int64_t v;
    switch (f->kind) {
    case DRV_F_STR:
        return (int64_t)drv_hash(f->s);
    case DRV_F_REAL:
        memcpy(&v, &f->r, sizeof v);
        return v;
    default:
        return f->i;
    }
}

void drv_agree_record(int64_t rec[DRV_REC_LEN], const char *cmd, int parse, const drv_field *f, int n)
{
    if (n > DRV_AGREE_MAX)
        n = DRV_AGREE_MAX; /* a programming error; the exchange stays well-formed */
    if (n < 0 || parse != DRV_PARSE_OK)
        n = 0;
    memset(rec, 0, DRV_REC_LEN * sizeof *rec);
    rec[DRV_REC_VERSION] = DRV_REC_MAGIC;
    rec[DRV_REC_CMD] = (int64_t)drv_hash(cmd);
    rec[DRV_REC_PARSE] = parse;
    rec[DRV_REC_N] = n;
    for (int i = 0; i < n; i++)
        rec[DRV_REC_HEAD + i] = field_value(&f[i]);
}

#define AT(tab, r, col) ((tab)[(size_t)(r) * DRV_REC_LEN + (size_t)(col)])

static int count_ranks(const int64_t *tab, int P, int col, int64_t v)
{
    int c = 0;
    for (int r = 0; r < P; r++)
        c += AT(tab, r, col) == v;
    return c;
}

void drv_agree_verdict(const int64_t *tab, int P, drv_verdict *v)
{
    memset(v, 0, sizeof *v);
    v->first_err = -1;
    v->field = -1;
    /* 1. well-formed records of the same command everywhere */
    for (int r = 0; r < P; r++) {
        int64_t n = AT(tab, r, DRV_REC_N);
        if (AT(tab, r, DRV_REC_VERSION) != DRV_REC_MAGIC || AT(tab, r, DRV_REC_CMD) != AT(tab, 0, DRV_REC_CMD) ||
            n < 0 || n > DRV_AGREE_MAX)
            v->cmd_differs = 1;
    }
    if (v->cmd_differs) {
        v->rc = 2;
        return;
    }
    /* 2. parse errors, then --help */
    for (int r = 0; r < P; r++) {
        int64_t ps = AT(tab, r, DRV_REC_PARSE);
        if (ps != DRV_PARSE_OK && ps != DRV_PARSE_HELP) {
            if (v->first_err < 0)
                v->first_err = r;
            v->nerr++;
        }
        v->nhelp += ps == DRV_PARSE_HELP;
    }
    if (v->nerr) {
        v->rc = 2;
        return;
    }
    if (v->nhelp) {
        v->rc = v->nhelp == P ? DRV_PARSE_HELP : 2;
        return;
    }
    /* 3. the same fields, then the same values */
    for (int r = 1; r < P; r++)
        if (AT(tab, r, DRV_REC_N) != AT(tab, 0, DRV_REC_N)) {
            v->cmd_differs = 1;
            v->rc = 2;
            return;
        }
    const int n = (int)AT(tab, 0, DRV_REC_N);
    for (int i = 0; i < n && v->field < 0; i++)
        for (int r = 1; r < P; r++)
            if (AT(tab, r, DRV_REC_HEAD + i) != AT(tab, 0, DRV_REC_HEAD + i)) {
                v->field = i;
                v->rc = 2;
                break;
            }
}

/* snprintf that never moves n past len - 1 */
#define APPEND(buf, len, n, ...)                                           \
    do {                                                                   \
        if ((n) + 1 < (len)) {                                             \
            int k_ = snprintf((buf) + (n), (len) - (n), __VA_ARGS__);      \
            if (k_ > 0)                                                    \
                (n) += (size_t)k_ < (len) - (n) ? (size_t)k_ : (len) - (n) - 1; \
        }                                                                  \
    } while (0)

void drv_agree_ranks(char *buf, size_t len, const int64_t *tab, int P, int col, int64_t v)
{
    size_t n = 0;
    if (len == 0)
        return;
    buf[0] = '\0';
    for (int r = 0; r < P; r++) {
        if (AT(tab, r, col) != v)
            continue;
        int e = r;
        while (e + 1 < P && AT(tab, e + 1, col) == v)
            e++;
        if (e > r)
            APPEND(buf, len, n, "%s%d-%d", n ? "," : "", r, e);
        else
            APPEND(buf, len, n, "%s%d", n ? "," : "", r);
        r = e;
    }
}

/* The text of value v of field f (str: that rank's string, or NULL). */
static void value_text(char *buf, size_t len, const drv_field *f, int64_t v, const char *str)
{
    switch (f->kind) {
    case DRV_F_FLAG:
        snprintf(buf, len, "%s", v ? "given" : "not given");
        break;
    case DRV_F_CHOICE: {
        if (v < 0) {
            snprintf(buf, len, "not given");
            break;
        }
        int64_t k = 0;
        while (f->choices && f->choices[k] && k < v)
            k++;
        if (f->choices && f->choices[k] && k == v)
            snprintf(buf, len, "%s", f->choices[k]);
        else if (!f->choices) /* an optional number: -1 when not given */
            snprintf(buf, len, "%" PRId64, v);
        else
            snprintf(buf, len, "choice %" PRId64, v);
        break;
    }
    case DRV_F_STR:
        if (v == 0)
            snprintf(buf, len, "not given");
        else if (str)
            snprintf(buf, len, "'%.200s'", str);
        else
            snprintf(buf, len, "another value");
        break;
    case DRV_F_REAL: {
        double r;
        memcpy(&r, &v, sizeof r);
        snprintf(buf, len, "%.17g", r);
        break;
    }
    default:
        snprintf(buf, len, "%" PRId64, v);
    }
}

void drv_agree_describe(char *out, size_t len, int P, const drv_field *f, const int64_t *tab, int col,
                        const char *strs)
{
    size_t n = 0;
    if (len == 0)
        return;
    out[0] = '\0';
    APPEND(out, len, n, "ranks disagree on %s:", f->name);
    int groups = 0;
    for (int r = 0; r < P; r++) {
        int64_t v = AT(tab, r, col);
        int seen = 0;
        for (int q = 0; q < r && !seen; q++)
            seen = AT(tab, q, col) == v;
        if (seen)
            continue;
        if (groups == 4) {
            APPEND(out, len, n, "; ...");
            break;
        }
        char ranks[160], val[256];
        drv_agree_ranks(ranks, sizeof ranks, tab, P, col, v);
        value_text(val, sizeof val, f, v, strs ? strs + (size_t)r * DRV_STRLEN : NULL);
        APPEND(out, len, n, "%s %s on rank%s %s", groups ? ";" : "", val, count_ranks(tab, P, col, v) > 1 ? "s" : "",
               ranks);
        groups++;
    }
}
