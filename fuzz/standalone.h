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

/* The whole file in a buffer of exactly its size (NULL and a message on failure). */
static unsigned char *fuzz_read_file(const char *path, size_t *len_out)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap)
            break;
        unsigned char *nb = realloc(buf, cap *= 2);
        if (!nb)
            free(buf);
        buf = nb;
    }
    fclose(f);
    unsigned char *exact = buf ? malloc(len ? len : 1) : NULL;
    if (exact)
        memcpy(exact, buf, len);
    free(buf);
    if (!exact)
        fprintf(stderr, "%s: out of memory\n", path);
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
