/* SPDX-License-Identifier: Apache-2.0 */
/*
 * standalone.h -- the replay main shared by the harnesses.  Built with
 * -DULY_FUZZ_STANDALONE (no libFuzzer), a harness replays the files named on
 * its command line: each is read whole into an exact-size buffer (so that a
 * sanitizer sees any read past the end), given to LLVMFuzzerTestOneInput, and
 * described by the harness's fuzz_report().  Include it last, after
 * LLVMFuzzerTestOneInput and fuzz_report are defined.
 */
#ifdef ULY_FUZZ_STANDALONE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

/* The whole file (uly_read_file of the base library) in a buffer of exactly
 * its size (NULL and a message on failure). */
static unsigned char *fuzz_read_file(const char *path, size_t *len_out)
{
    char *text = NULL;
    size_t len = 0;
    if (uly_read_file(path, SIZE_MAX / 2, &text, &len)) {
        fprintf(stderr, "%s\n", uly_base_last_error());
        return NULL;
    }
    unsigned char *exact = malloc(len ? len : 1);
    if (exact)
        memcpy(exact, text, len);
    else
        fprintf(stderr, "%s: out of memory\n", path);
    uly_base_free(text);
    *len_out = len;
    return exact;
}

int main(int argc, char **argv)
{
    int bad = 0;
    for (int i = 1; i < argc; i++) {
        size_t len;
        unsigned char *data = fuzz_read_file(argv[i], &len);
        if (!data) {
            bad = 1;
            continue;
        }
        LLVMFuzzerTestOneInput(data, len);
        fuzz_report(argv[i], data, len);
        free(data);
    }
    return bad;
}
#endif
