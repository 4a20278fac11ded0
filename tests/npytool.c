/* SPDX-License-Identifier: Apache-2.0 */
/*
 * npytool.c -- test helper: write random .npy tensors and compare two .npy
 * files bit for bit.
 *   npytool write PATH f32|f64 SEED DIM...     uniform [-1, 1) values
 *   npytool scaled PATH f32|f64 SCALE SEED DIM...  the same times SCALE (e.g. 1e20, 1e300)
 *   npytool nan PATH                           a (1, 4, 1, 2) float32 tensor holding a NaN
 *   npytool cmp A B                            exit 0 if shape, dtype and bits agree
 *   npytool i64 PATH ROWS V...                 int64 ('<i8') (ROWS, n/ROWS) of the values
 *                                              (ROWS 0: one dimension)
 * Tensor files of every format and type (uly_tfile; IN is F.npy, F.safetensors
 * or F.safetensors:NAME):
 *   npytool conv IN OUT ELEM [NAME]            IN converted to ELEM (f16 bf16 f32 f64 i32 i64), as
 *                                              .npy or .safetensors (tensor NAME, default "x")
 *   npytool pack OUT NAME=IN[@ELEM]...         one .safetensors file of those tensors
 *   npytool perm IN OUT                        axes 1 and 2 (4-D) or 0 and 1 (3-D) swapped:
 *                                              (B, N, H, d) <-> (B, H, N, d)
 *   npytool mul IN OUT S                       every value times S (f64 arithmetic, then IN's type)
 *   npytool info IN                            "NAME ELEM (SHAPE)" per tensor, then "KEY=VALUE" metadata
 *   npytool same A B                           exit 0 if the element counts and values (as f64, bitwise) agree
 *   npytool close A B ATOL RTOL                exit 0 if |a - b| <= ATOL + RTOL |b| everywhere (finite)
 *   npytool fill PATH VALUE DIM...             a float64 .npy tensor of VALUE (e.g. log(40) as 3.6888794541139363)
 *   npytool sthead PATH LEN JSON NDATA         a .safetensors file by hand: the 8-byte length LEN (0:
 *                                              JSON's), JSON, NDATA zero bytes
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* A whole tensor of a file as doubles (IN: F or F.safetensors:NAME). */
typedef struct tensor {
    char name[256];
    int elem, ndim;
    int64_t shape[ULY_NPY_MAXDIM];
    size_t count;
    double *x;
} tensor;

static int load(const char *spec, tensor *t)
{
    char path[4096];
    const char *name = NULL, *colon = strrchr(spec, ':');
    snprintf(path, sizeof path, "%s", spec);
    if (colon && strstr(spec, ".safetensors:") == colon - 12) {
        path[colon - spec] = '\0';
        name = colon + 1;
    }
    uly_tfile *f;
    if (uly_tfile_open(path, &f)) {
        fprintf(stderr, "npytool: %s\n", uly_last_error());
        return 1;
    }
    int i = name ? uly_tfile_find(f, name) : 0;
    const uly_tinfo *in = uly_tfile_info(f, i);
    if (!in) {
        fprintf(stderr, "npytool: %s: no tensor %s\n", path, name ? name : "");
        uly_tfile_close(f);
        return 1;
    }
    snprintf(t->name, sizeof t->name, "%s", in->name);
    t->elem = in->elem;
    t->ndim = in->ndim;
    memcpy(t->shape, in->shape, sizeof t->shape);
    t->count = in->count;
    t->x = malloc(t->count * sizeof *t->x + 8);
    int rc = !t->x || uly_tfile_read_f64(f, i, 0, t->count, t->x);
    if (rc)
        fprintf(stderr, "npytool: %s: %s\n", spec, uly_last_error());
    uly_tfile_close(f);
    return rc;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Write t (values as doubles) to path as elem. */
static int store(const char *path, const tensor *t, int elem, const char *name)
{
    int rc;
    if (ends_with(path, ".safetensors")) {
        int64_t *v = NULL;
        const void *src = t->x;
        int se = ULY_ELEM_F64;
        if (!uly_elem_is_float(elem)) { /* integers: exactly, through int64 */
            v = malloc(t->count * sizeof *v + 8);
            for (size_t i = 0; i < t->count; i++)
                v[i] = (int64_t)t->x[i];
            src = v;
            se = ULY_ELEM_I64;
        }
        uly_twrite w = {name, elem, se, t->ndim, t->shape, src};
        rc = uly_safetensors_write(path, 1, &w, 0, NULL, NULL);
        free(v);
    } else {
        rc = uly_npy_write_as(path, elem, ULY_F64, t->ndim, t->shape, t->x);
    }
    if (rc)
        fprintf(stderr, "npytool: %s: %s\n", path, uly_last_error());
    return rc ? 1 : 0;
}

static int elem_arg(const char *s, int *e)
{
    if (uly_elem_parse(s, e)) {
        fprintf(stderr, "npytool: %s\n", uly_last_error());
        return 1;
    }
    return 0;
}

static int tensor_tools(int argc, char **argv)
{
    const char *cmd = argv[1];
    tensor a = {0}, b = {0};
    int rc = 2;
    if (argc >= 5 && strcmp(cmd, "conv") == 0) {
        int e;
        rc = elem_arg(argv[4], &e) || load(argv[2], &a) || store(argv[3], &a, e, argc > 5 ? argv[5] : "x");
    } else if (argc >= 4 && strcmp(cmd, "pack") == 0) {
        int n = argc - 3;
        tensor *t = calloc((size_t)n, sizeof *t);
        uly_twrite *w = calloc((size_t)n, sizeof *w);
        char (*names)[256] = calloc((size_t)n, sizeof *names);
        int64_t **iv = calloc((size_t)n, sizeof *iv);
        rc = 0;
        for (int i = 0; i < n && !rc; i++) {
            char spec[4096];
            snprintf(spec, sizeof spec, "%s", argv[3 + i]);
            char *eq = strchr(spec, '='), *at = strrchr(spec, '@');
            if (!eq) {
                fprintf(stderr, "npytool pack: NAME=IN expected, got %s\n", spec);
                rc = 2;
                break;
            }
            *eq = '\0';
            if (at)
                *at = '\0';
            snprintf(names[i], sizeof names[i], "%.255s", spec);
            rc = load(eq + 1, &t[i]);
            int e = t[i].elem;
            if (!rc && at)
                rc = elem_arg(at + 1, &e);
            if (rc)
                break;
            w[i] = (uly_twrite){names[i], e, ULY_ELEM_F64, t[i].ndim, t[i].shape, t[i].x};
            if (!uly_elem_is_float(e)) {
                iv[i] = malloc(t[i].count * sizeof **iv + 8);
                for (size_t k = 0; k < t[i].count; k++)
                    iv[i][k] = (int64_t)t[i].x[k];
                w[i].src = ULY_ELEM_I64;
                w[i].data = iv[i];
            }
        }
        if (!rc && uly_safetensors_write(argv[2], n, w, 0, NULL, NULL)) {
            fprintf(stderr, "npytool: %s\n", uly_last_error());
            rc = 1;
        }
        for (int i = 0; i < n; i++) {
            free(t[i].x);
            free(iv[i]);
        }
        free(t);
        free(w);
        free(names);
        free(iv);
    } else if (argc == 4 && strcmp(cmd, "perm") == 0) {
        rc = load(argv[2], &a);
        if (!rc && a.ndim != 3 && a.ndim != 4) {
            fprintf(stderr, "npytool perm: %s has %d dimensions\n", argv[2], a.ndim);
            rc = 1;
        }
        if (!rc) {
            int o = a.ndim - 3; /* the first swapped axis */
            int64_t B = o ? a.shape[0] : 1, X = a.shape[o], Y = a.shape[o + 1], D = a.shape[o + 2];
            b = a;
            b.x = malloc(a.count * sizeof *b.x + 8);
            for (int64_t i = 0; i < B; i++)
                for (int64_t x = 0; x < X; x++)
                    for (int64_t y = 0; y < Y; y++)
                        memcpy(b.x + ((i * Y + y) * X + x) * D, a.x + ((i * X + x) * Y + y) * D,
                               (size_t)D * sizeof *b.x);
            b.shape[o] = Y;
            b.shape[o + 1] = X;
            rc = store(argv[3], &b, a.elem, a.name);
        }
    } else if (argc == 5 && strcmp(cmd, "mul") == 0) {
        double s = strtod(argv[4], NULL);
        rc = load(argv[2], &a);
        for (size_t i = 0; !rc && i < a.count; i++)
            a.x[i] *= s;
        if (!rc)
            rc = store(argv[3], &a, a.elem, a.name);
    } else if (argc == 3 && strcmp(cmd, "info") == 0) {
        uly_tfile *f;
        if (uly_tfile_open(argv[2], &f)) {
            fprintf(stderr, "npytool: %s\n", uly_last_error());
            return 1;
        }
        for (int i = 0; i < uly_tfile_count(f); i++) {
            const uly_tinfo *t = uly_tfile_info(f, i);
            printf("%s %s (", t->name, uly_elem_name(t->elem));
            for (int k = 0; k < t->ndim; k++)
                printf("%s%lld", k ? ", " : "", (long long)t->shape[k]);
            printf(")\n");
        }
        static const char *const keys[] = {"method", "ranks", "causal", "window", "scale", "layout", "dtype",
                                           "kv_heads", "docs"};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            if (uly_tfile_meta(f, keys[k]))
                printf("%s=%s\n", keys[k], uly_tfile_meta(f, keys[k]));
        uly_tfile_close(f);
        return 0;
    } else if ((argc == 4 && strcmp(cmd, "same") == 0) || (argc == 6 && strcmp(cmd, "close") == 0)) {
        rc = load(argv[2], &a) || load(argv[3], &b);
        if (!rc && a.count != b.count) {
            fprintf(stderr, "npytool: %s has %zu elements, %s %zu\n", argv[2], a.count, argv[3], b.count);
            rc = 1;
        }
        double atol = argc == 6 ? strtod(argv[4], NULL) : 0, rtol = argc == 6 ? strtod(argv[5], NULL) : 0;
        size_t bad = 0, worst = 0;
        double used = 0;
        for (size_t i = 0; !rc && i < a.count; i++) {
            int ok;
            if (argc == 4) {
                ok = memcmp(&a.x[i], &b.x[i], sizeof(double)) == 0;
            } else {
                double dd = a.x[i] - b.x[i], lim = atol + rtol * (b.x[i] < 0 ? -b.x[i] : b.x[i]);
                dd = dd < 0 ? -dd : dd;
                ok = dd <= lim; /* NaN fails */
                if (dd / lim > used || !ok) {
                    used = ok ? dd / lim : used;
                    worst = i;
                }
            }
            if (!ok && bad++ == 0)
                worst = i;
        }
        if (!rc && bad) {
            fprintf(stderr, "npytool: %s and %s differ in %zu elements (first/worst %zu: %.17g vs %.17g)\n", argv[2],
                    argv[3], bad, worst, a.x[worst], b.x[worst]);
            rc = 1;
        } else if (!rc && argc == 6) {
            printf("within tolerance: worst element %zu uses %.3g of it\n", worst, used);
        }
    } else if (argc >= 4 && strcmp(cmd, "fill") == 0) {
        a.ndim = argc - 4;
        a.count = 1;
        for (int i = 0; i < a.ndim && i < ULY_NPY_MAXDIM; i++) {
            a.shape[i] = strtoll(argv[4 + i], NULL, 10);
            a.count *= (size_t)a.shape[i];
        }
        a.x = malloc(a.count * sizeof *a.x + 8);
        for (size_t i = 0; a.x && i < a.count; i++)
            a.x[i] = strtod(argv[3], NULL);
        rc = !a.x || store(argv[2], &a, ULY_ELEM_F64, "x");
    } else if (argc == 6 && strcmp(cmd, "sthead") == 0) {
        unsigned long long L = strtoull(argv[3], NULL, 10);
        size_t hl = strlen(argv[4]), nd = (size_t)strtoull(argv[5], NULL, 10);
        if (!L)
            L = hl;
        FILE *f = fopen(argv[2], "wb");
        if (!f)
            return 1;
        for (int i = 0; i < 8; i++)
            fputc((int)((L >> (8 * i)) & 0xff), f);
        fwrite(argv[4], 1, hl, f);
        for (size_t i = 0; i < nd; i++)
            fputc(0, f);
        return fclose(f) != 0;
    }
    free(a.x);
    if (b.x != a.x)
        free(b.x);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc >= 3) {
        static const char *const tools[] = {"conv", "pack", "perm", "mul", "info", "same", "close", "fill", "sthead"};
        for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++)
            if (strcmp(argv[1], tools[i]) == 0) {
                int rc = tensor_tools(argc, argv);
                if (rc == 2)
                    fprintf(stderr, "npytool %s: wrong arguments\n", argv[1]);
                return rc;
            }
    }
    int scaled = argc >= 6 && strcmp(argv[1], "scaled") == 0;
    if ((argc >= 5 && strcmp(argv[1], "write") == 0) || scaled) {
        uly_dtype t = strcmp(argv[3], "f64") == 0 ? ULY_F64 : ULY_F32;
        double scale = scaled ? strtod(argv[4], NULL) : 1.0;
        uint64_t seed = strtoull(argv[4 + scaled], NULL, 10);
        int nd = argc - 5 - scaled;
        int64_t shape[ULY_NPY_MAXDIM];
        size_t n = 1;
        for (int i = 0; i < nd; i++) {
            shape[i] = strtoll(argv[5 + scaled + i], NULL, 10);
            n *= (size_t)shape[i];
        }
        double *x = malloc(n * sizeof *x + 8);
        void *y = malloc(n * 8 + 8);
        if (!x || !y) {
            fprintf(stderr, "npytool: out of memory\n");
            return 1;
        }
        tu_fill(x, n, seed, -1, 1);
        for (size_t i = 0; i < n; i++)
            x[i] *= scale;
        tu_convert(x, y, n, t);
        int rc = uly_npy_write(argv[2], t, nd, shape, y);
        if (rc)
            fprintf(stderr, "npytool: %s\n", uly_last_error());
        free(x);
        free(y);
        return rc ? 1 : 0;
    }
    if (argc >= 4 && strcmp(argv[1], "i64") == 0) {
        long rows = strtol(argv[3], NULL, 10);
        int n = argc - 4;
        char hdr[128];
        if (rows > 0)
            snprintf(hdr, sizeof hdr, "{'descr': '<i8', 'fortran_order': False, 'shape': (%ld, %ld), }", rows,
                     n / rows);
        else
            snprintf(hdr, sizeof hdr, "{'descr': '<i8', 'fortran_order': False, 'shape': (%d,), }", n);
        size_t hl = strlen(hdr), total = 10 + hl + 1;
        size_t pad = (64 - total % 64) % 64;
        FILE *f = fopen(argv[2], "wb");
        if (!f)
            return 1;
        unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
        pre[8] = (unsigned char)((hl + pad + 1) & 0xff);
        pre[9] = (unsigned char)((hl + pad + 1) >> 8);
        fwrite(pre, 1, 10, f);
        fwrite(hdr, 1, hl, f);
        for (size_t i = 0; i < pad; i++)
            fputc(' ', f);
        fputc('\n', f);
        for (int i = 0; i < n; i++) {
            int64_t v = strtoll(argv[4 + i], NULL, 10);
            unsigned char b[8];
            for (int k = 0; k < 8; k++)
                b[k] = (unsigned char)((uint64_t)v >> (8 * k));
            fwrite(b, 1, 8, f);
        }
        return fclose(f) != 0;
    }
    if (argc == 3 && strcmp(argv[1], "nan") == 0) {
        float x[8] = {0.5f, 0.25f, 0, 0, 0, 0, 0, 0};
        x[5] = strtof("nan", NULL);
        int64_t shape[4] = {1, 4, 1, 2};
        return uly_npy_write(argv[2], ULY_F32, 4, shape, x) ? 1 : 0;
    }
    if (argc == 4 && strcmp(argv[1], "cmp") == 0) {
        uly_npy a, b;
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        if (uly_npy_read(argv[2], &a) || uly_npy_read(argv[3], &b)) {
            fprintf(stderr, "npytool: %s\n", uly_last_error());
            return 1;
        }
        int same = a.dtype == b.dtype && a.ndim == b.ndim &&
                   memcmp(a.shape, b.shape, (size_t)a.ndim * sizeof a.shape[0]) == 0 &&
                   memcmp(a.data, b.data, a.count * uly_dtype_size(a.dtype)) == 0;
        if (!same)
            fprintf(stderr, "npytool: %s and %s differ\n", argv[2], argv[3]);
        uly_npy_free(&a);
        uly_npy_free(&b);
        return same ? 0 : 1;
    }
    fprintf(stderr, "usage: npytool write PATH f32|f64 SEED DIM... | nan PATH | cmp A B\n");
    return 2;
}
