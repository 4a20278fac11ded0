/* SPDX-License-Identifier: Apache-2.0 */
/* args.c -- see args.h. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "base/base.h"

static const arg_opt *find(const arg_opt *opts, const char *name, size_t len)
{
    for (const arg_opt *o = opts; o->name; o++)
        if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
            return o;
    return NULL;
}

int args_parse(const char *cmd, int argc, char **argv, const arg_opt *opts, char *err, size_t errlen)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return ARGS_HELP;
        if (strncmp(a, "--", 2) != 0) {
            snprintf(err, errlen, "%s: unexpected argument '%s' (options start with --)", cmd, a);
            return ARGS_ERROR;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const arg_opt *o = find(opts, name, len);
        if (!o) {
            snprintf(err, errlen, "%s: unknown option '--%.*s' (see %s --help)", cmd, (int)len, name, cmd);
            return ARGS_ERROR;
        }
        if (o->seen)
            *o->seen = 1;
        if (o->kind == ARG_FLAG) {
            if (eq) {
                snprintf(err, errlen, "%s: option --%s takes no value", cmd, o->name);
                return ARGS_ERROR;
            }
            *(int *)o->dst = 1;
            continue;
        }
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!val) {
            snprintf(err, errlen, "%s: option --%s needs a value (%s)", cmd, o->name, o->metavar ? o->metavar : "value");
            return ARGS_ERROR;
        }
        /* the next word is itself an option: the value was left out ("--out
         * --json" must not write a file named --json); --help still asks for help */
        if (!eq && (strcmp(val, "--help") == 0 || strcmp(val, "-h") == 0))
            return ARGS_HELP;
        if (!eq && strncmp(val, "--", 2) == 0) {
            const char *vn = val + 2, *ve = strchr(vn, '=');
            if (find(opts, vn, ve ? (size_t)(ve - vn) : strlen(vn))) {
                snprintf(err, errlen, "%s: option --%s needs a value (%s); the next word, %s, is an option", cmd,
                         o->name, o->metavar ? o->metavar : "value", val);
                return ARGS_ERROR;
            }
        }
        switch (o->kind) {
        case ARG_INT: {
            int64_t v;
            if (uly_parse_int(val, &v)) {
                snprintf(err, errlen, "%s: --%s expects an integer, got '%s'", cmd, o->name, val);
                return ARGS_ERROR;
            }
            if (v < o->min || v > o->max) {
                snprintf(err, errlen, "%s: --%s must be in %lld..%lld, got %lld", cmd, o->name,
                         (long long)o->min, (long long)o->max, (long long)v);
                return ARGS_ERROR;
            }
            *(int64_t *)o->dst = v;
            break;
        }
        case ARG_REAL: {
            char *end;
            errno = 0;
            double v = strtod(val, &end);
            if (errno || end == val || *end || !isfinite(v)) {
                snprintf(err, errlen, "%s: --%s expects a finite number, got '%s'", cmd, o->name, val);
                return ARGS_ERROR;
            }
            if (o->min < o->max && (v < (double)o->min || v > (double)o->max)) {
                snprintf(err, errlen, "%s: --%s must be in %lld..%lld, got %s", cmd, o->name,
                         (long long)o->min, (long long)o->max, val);
                return ARGS_ERROR;
            }
            *(double *)o->dst = v;
            break;
        }
        case ARG_STR:
            if (!*val) {
                snprintf(err, errlen, "%s: --%s needs a non-empty value", cmd, o->name);
                return ARGS_ERROR;
            }
            *(const char **)o->dst = val;
            break;
        case ARG_CHOICE: {
            int k = 0;
            for (; o->choices[k]; k++)
                if (strcmp(o->choices[k], val) == 0)
                    break;
            if (!o->choices[k]) {
                char list[256] = "";
                for (int j = 0; o->choices[j]; j++) {
                    strncat(list, j ? ", " : "", sizeof list - strlen(list) - 1);
                    strncat(list, o->choices[j], sizeof list - strlen(list) - 1);
                }
                snprintf(err, errlen, "%s: --%s must be one of %s, got '%s'", cmd, o->name, list, val);
                return ARGS_ERROR;
            }
            *(int *)o->dst = k;
            break;
        }
        default:
            break;
        }
    }
    return ARGS_OK;
}

/* v with the largest K/M/G suffix that divides it ("64K", "1024G", "1000"). */
static const char *with_suffix(char *buf, size_t len, int64_t v)
{
    static const char sfx[3] = {'G', 'M', 'K'};
    for (int i = 0; i < 3; i++) {
        const int64_t m = (int64_t)1 << (30 - 10 * i);
        if (v >= m && v % m == 0) {
            snprintf(buf, len, "%lld%c", (long long)(v / m), sfx[i]);
            return buf;
        }
    }
    snprintf(buf, len, "%lld", (long long)v);
    return buf;
}

void args_usage(FILE *f, const char *cmd, const char *synopsis, const arg_opt *opts)
{
    fprintf(f, "usage: %s %s\n\noptions:\n", cmd, synopsis);
    int ranges = 0;
    for (const arg_opt *o = opts; o->name; o++) {
        char left[64], lo[24], hi[24], range[64] = "";
        if (o->kind == ARG_FLAG)
            snprintf(left, sizeof left, "--%s", o->name);
        else
            snprintf(left, sizeof left, "--%s %s", o->name, o->metavar ? o->metavar : "X");
        /* every count and size states what it accepts (a seed, up to INT64_MAX, is neither) */
        if (o->kind == ARG_INT && o->max < INT64_MAX) {
            snprintf(range, sizeof range, " [%s..%s]", with_suffix(lo, sizeof lo, o->min),
                     with_suffix(hi, sizeof hi, o->max));
            ranges = 1;
        }
        fprintf(f, "  %-26s %s%s\n", left, o->help, range);
    }
    fprintf(f, "  %-26s %s\n", "--help", "print this help and exit");
    if (ranges)
        fprintf(f, "\n[a..b]: the values an option accepts (K, M, G: x 1024, 1024^2, 1024^3); a run that would "
                   "not fit in memory is refused before it starts (exit 2).\n");
}
