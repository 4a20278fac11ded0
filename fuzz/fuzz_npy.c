/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_npy.c -- libFuzzer harness for the .npy parser (uly_npy_parse) and
 * the streaming file reader (uly_npy_reader_*, through uly_npy_read).
 *
 * Each input is a whole .npy image.  The parser must return a status for
 * every input without reading outside it, leaking, crashing or hanging; on
 * success the result must be self-consistent.  The same bytes written to a
 * file (fuzz/tmpfile.h) must give the streaming reader the same verdict and,
 * on success, the same array bit for bit.  Built by fuzz/build.sh.
 *
 * With -DULY_FUZZ_STANDALONE the file also builds without libFuzzer: main
 * replays the files named on the command line through the same entry point
 * (for reproducing a crash under gdb or valgrind, or as a corpus check).
 */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tmpfile.h"
#include "ulysses.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uly_npy n;
    int st = uly_npy_parse(data, size, &n);
    if (st == ULY_OK) {
        /* count is the product of the shape; data holds count elements. */
        size_t count = 1;
        for (int i = 0; i < n.ndim; i++)
            count *= (size_t)n.shape[i];
        size_t es = n.dtype == ULY_F32 ? 4 : 8;
        if (n.ndim < 0 || n.ndim > ULY_NPY_MAXDIM || count != n.count || !n.data ||
            (n.dtype != ULY_F32 && n.dtype != ULY_F64) || count * es > size)
            abort();
        if (count > 0) {
            /* Touch the first and last byte so ASan checks the allocation. */
            volatile unsigned char sink = ((unsigned char *)n.data)[0];
            sink = ((unsigned char *)n.data)[count * es - 1];
            (void)sink;
        }
    } else {
        /* A failure leaves out zeroed and says why. */
        uly_npy z;
        memset(&z, 0, sizeof z);
        if (memcmp(&n, &z, sizeof z) != 0 || uly_last_error()[0] == '\0')
            abort();
    }
    /* the streaming reader on the same bytes as a file */
    const char *tmp_path = fuzz_tmp_write(0, "fuzz_npy", data, size);
    uly_npy f;
    int fst = uly_npy_read(tmp_path, &f);
    /* (the reader alone refuses headers above 1 MiB) */
    if ((fst == ULY_OK) != (st == ULY_OK) && !(st == ULY_OK && strstr(uly_last_error(), "headers larger than")))
        abort();
    if (fst == ULY_OK) {
        size_t es = f.dtype == ULY_F32 ? 4 : 8;
        if (f.dtype != n.dtype || f.ndim != n.ndim || f.count != n.count ||
            memcmp(f.shape, n.shape, sizeof f.shape) != 0 || (f.count && memcmp(f.data, n.data, f.count * es) != 0))
            abort();
    } else if (!strstr(uly_last_error(), tmp_path)) {
        abort(); /* a file's message names the file */
    }
    uly_npy_free(&f);
    uly_npy_free(&n);
    return 0;
}

#ifdef ULY_FUZZ_STANDALONE
static void fuzz_report(const char *name, const unsigned char *data, size_t len)
{
    uly_npy n;
    int st = uly_npy_parse(data, len, &n);
    printf("%s: %s\n", name, st ? uly_last_error() : "ok");
    uly_npy_free(&n);
}
#endif
#include "standalone.h"
