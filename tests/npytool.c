/*
 * npytool.c -- test helper: write random .npy tensors and compare two .npy
 * files bit for bit.
 *   npytool write PATH f32|f64 SEED DIM...     uniform [-1, 1) values
 *   npytool scaled PATH f32|f64 SCALE SEED DIM...  the same times SCALE (e.g. 1e20, 1e300)
 *   npytool nan PATH                           a (1, 4, 1, 2) float32 tensor holding a NaN
 *   npytool cmp A B                            exit 0 if shape, dtype and bits agree
 *   npytool i64 PATH ROWS V...                 int64 ('<i8') (ROWS, n/ROWS) of the values
 *                                              (ROWS 0: one dimension)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

int main(int argc, char **argv)
{
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
