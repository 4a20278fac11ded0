/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jsonutil.c -- JSON files with located errors.  jansson reports line and
 * column for syntax errors; for semantic errors (missing key, wrong type, bad
 * value) the key is located in the text: the parent object's key first, then
 * the key after it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "usim.h"
#include "usim_internal.h"
#include "jsonutil.h"
#include "base/base.h"

/* Description files are small; anything larger is not one. */
#define USIM_JSON_MAX_FILE ((size_t)16 << 20)

int usim_json_load(usim_jdoc *d, const char *path)
{
    memset(d, 0, sizeof *d);
    d->file = path;
    /* the base library's reader: a regular file only (a directory, FIFO or
     * device is refused by name), size checked before reading */
    char *buf;
    size_t n;
    int rr = uly_read_file(path, USIM_JSON_MAX_FILE, &buf, &n);
    if (rr) {
        char m[1024]; /* the message is in the buffer usim_set_error writes */
        snprintf(m, sizeof m, "%s", uly_base_last_error());
        return usim_set_error(rr == ULY_READ_NOTFOUND ? USIM_ENOTFOUND : rr == ULY_READ_NOMEM ? USIM_ENOMEM
                              : rr == ULY_READ_IO ? USIM_EIO : USIM_EFORMAT, "%s", m);
    }
    d->text = buf;
    d->len = n;
    json_error_t je;
    d->root = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &je);
    if (!d->root)
        return usim_set_error(USIM_EFORMAT, "%s:%d:%d: JSON syntax error: %s", path, je.line,
                              je.column, je.text);
    if (!json_is_object(d->root))
        return usim_set_error(USIM_EFORMAT, "%s:1:1: the top level must be a JSON object", path);
    return USIM_OK;
}

void usim_json_free(usim_jdoc *d)
{
    json_decref(d->root);
    uly_base_free(d->text);
    memset(d, 0, sizeof *d);
}

/* Offset of "key" followed by ':' at or after from; -1 if absent. */
static long find_key(const char *text, long from, const char *key)
{
    size_t kl = strlen(key);
    const char *p = text + from;
    while ((p = strchr(p, '"')) != NULL) {
        if (strncmp(p + 1, key, kl) == 0 && p[1 + kl] == '"') {
            const char *q = p + 2 + kl;
            while (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n')
                q++;
            if (*q == ':')
                return (long)(p - text);
        }
        p++;
    }
    return -1;
}

static void locate(const usim_jdoc *d, const char *parent, const char *key, int *line, int *col)
{
    long at = 0, off = -1;
    if (parent && *parent) {
        at = find_key(d->text, 0, parent);
        if (at < 0)
            at = 0;
        off = at;
    }
    if (key) {
        long k = find_key(d->text, at, key);
        if (k >= 0)
            off = k;
    }
    *line = 1;
    *col = 1;
    if (off < 0)
        return;
    for (long i = 0; i < off; i++) {
        if (d->text[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

int usim_json_err(usim_jdoc *d, const char *parent, const char *key, const char *fmt, ...)
{
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line, col;
    locate(d, parent, key, &line, &col);
    char full[200];
    if (parent && *parent)
        snprintf(full, sizeof full, "%s.%s", parent, key ? key : "");
    else
        snprintf(full, sizeof full, "%s", key ? key : "");
    return usim_set_error(USIM_EFORMAT, "%s:%d:%d: key '%s': %s", d->file, line, col, full, msg);
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: case JSON_REAL: return "a number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

static int member(usim_jdoc *d, json_t *obj, const char *parent, const char *key, int required,
                  json_t **out)
{
    *out = json_object_get(obj, key);
    if (!*out && required) {
        int line, col;
        locate(d, parent, NULL, &line, &col);
        char full[200];
        if (parent && *parent)
            snprintf(full, sizeof full, "%s.%s", parent, key);
        else
            snprintf(full, sizeof full, "%s", key);
        return usim_set_error(USIM_EFORMAT, "%s:%d:%d: key '%s': missing (required)", d->file,
                              line, col, full);
    }
    return USIM_OK;
}

int usim_json_obj(usim_jdoc *d, json_t *obj, const char *parent, const char *key, json_t **out)
{
    int rc = member(d, obj, parent, key, 1, out);
    if (rc)
        return rc;
    if (!json_is_object(*out))
        return usim_json_err(d, parent, key, "expected an object, got %s", type_name(*out));
    return USIM_OK;
}

int usim_json_num(usim_jdoc *d, json_t *obj, const char *parent, const char *key, int required,
             double lo, int lo_strict, double *out)
{
    json_t *v;
    int rc = member(d, obj, parent, key, required, &v);
    if (rc || !v)
        return rc;
    if (!json_is_number(v))
        return usim_json_err(d, parent, key, "expected a number, got %s", type_name(v));
    double x = json_number_value(v);
    if (!isfinite(x) || (lo_strict ? !(x > lo) : !(x >= lo)))
        return usim_json_err(d, parent, key, "must be %s %g (got %g)", lo_strict ? ">" : ">=", lo, x);
    /* Every quantity in these files is written in units (TFLOP/s, GiB, GB/s,
     * microseconds, ratios) where 1e9 is far beyond any machine; bounding it
     * keeps every conversion to bytes, FLOP/s and picoseconds finite and
     * within int64 (1e9 us = 1e15 ps). */
    if (x > USIM_JSON_NUM_MAX)
        return usim_json_err(d, parent, key, "must be <= %g in the units of the key (got %g)",
                             USIM_JSON_NUM_MAX, x);
    *out = x;
    return USIM_OK;
}

int usim_json_int(usim_jdoc *d, json_t *obj, const char *parent, const char *key, int required,
             int64_t lo, int64_t *out)
{
    json_t *v;
    int rc = member(d, obj, parent, key, required, &v);
    if (rc || !v)
        return rc;
    if (json_is_real(v)) {
        /* JSON has one number type; the integers of these files are written
         * as digits only (8e0 and 8.0 are read as real numbers) */
        double x = json_real_value(v);
        if (x == floor(x) && fabs(x) < 9e15)
            return usim_json_err(d, parent, key, "expected an integer written as digits only, got the real "
                                 "number %.17g (write %.0f, without a decimal point or exponent)", x, x);
        return usim_json_err(d, parent, key, "expected an integer, got the fraction %.17g", x);
    }
    if (!json_is_integer(v))
        return usim_json_err(d, parent, key, "expected an integer, got %s", type_name(v));
    int64_t x = (int64_t)json_integer_value(v);
    if (x < lo)
        return usim_json_err(d, parent, key, "must be >= %lld (got %lld)", (long long)lo, (long long)x);
    *out = x;
    return USIM_OK;
}

int usim_json_bool(usim_jdoc *d, json_t *obj, const char *parent, const char *key, int required, int *out)
{
    json_t *v;
    int rc = member(d, obj, parent, key, required, &v);
    if (rc || !v)
        return rc;
    if (!json_is_boolean(v))
        return usim_json_err(d, parent, key, "expected true or false, got %s", type_name(v));
    *out = json_is_true(v);
    return USIM_OK;
}

int usim_json_str(usim_jdoc *d, json_t *obj, const char *parent, const char *key, int required,
             const char **out)
{
    json_t *v;
    int rc = member(d, obj, parent, key, required, &v);
    if (rc || !v)
        return rc;
    if (!json_is_string(v))
        return usim_json_err(d, parent, key, "expected a string, got %s", type_name(v));
    *out = json_string_value(v);
    return USIM_OK;
}

/* Edit distance between a and b (case-insensitive), capped at 64 characters. */
static int edit_distance(const char *a, const char *b)
{
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 64)
        la = 64;
    if (lb > 64)
        lb = 64;
    int prev[65], cur[65];
    for (int j = 0; j <= lb; j++)
        prev[j] = j;
    for (int i = 1; i <= la; i++) {
        cur[0] = i;
        for (int j = 1; j <= lb; j++) {
            int ca = a[i - 1] >= 'A' && a[i - 1] <= 'Z' ? a[i - 1] + 32 : a[i - 1];
            int cb = b[j - 1] >= 'A' && b[j - 1] <= 'Z' ? b[j - 1] + 32 : b[j - 1];
            int best = prev[j - 1] + (ca != cb);
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            cur[j] = best;
        }
        memcpy(prev, cur, sizeof(int) * (size_t)(lb + 1));
    }
    return prev[lb];
}

const char *usim_json_nearest(const char *key, const char *const *allowed)
{
    const char *best = NULL;
    int bd = 1 << 30;
    for (int i = 0; allowed[i]; i++) {
        int dd = edit_distance(key, allowed[i]);
        if (dd < bd) {
            bd = dd;
            best = allowed[i];
        }
    }
    return best;
}

int usim_json_known_keys(usim_jdoc *d, json_t *obj, const char *parent, const char *const *allowed)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int ok = 0;
        for (int i = 0; allowed[i] && !ok; i++)
            ok = strcmp(key, allowed[i]) == 0;
        if (ok)
            continue;
        const char *near = usim_json_nearest(key, allowed);
        return usim_json_err(d, parent, key, "unknown key (nearest valid key: '%s'; see doc/simulator.md)",
                             near ? near : "");
    }
    return USIM_OK;
}
