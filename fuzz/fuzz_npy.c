/*
 * fuzz_npy.c -- libFuzzer harness for the .npy parser (uly_npy_parse).
 *
 * Each input is a whole .npy image.  The parser must return a status for
 * every input without reading outside it, leaking, crashing or hanging; on
 * success the result must be self-consistent.  Built by fuzz/build.sh.
 *
 * With -DULY_FUZZ_STANDALONE the file also builds without libFuzzer: main
 * replays the files named on the command line through the same entry point
 * (for reproducing a crash under gdb or valgrind, or as a corpus check).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
