/*
 * simfile.h -- pieces shared by the simulator harnesses (fuzz_sim_json.c,
 * fuzz_sim_run.c): a CHECK that names the violated promise and the
 * simulator's last message, and temporary description files (the loaders
 * take a path): up to two per process, created on first use under $TMPDIR
 * (default /tmp), rewritten for every input, removed at exit.
 * Include after usim.h.
 */
#ifndef ULY_FUZZ_SIMFILE_H
#define ULY_FUZZ_SIMFILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* A violated promise: say which one (the simulator's message helps too), then abort. */
#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__,   \
                    __LINE__, #cond, usim_last_error());                              \
            abort();                                                                 \
        }                                                                            \
    } while (0)

static struct {
    char path[256];
    int fd;
} fuzz_tmp[2] = {{"", -1}, {"", -1}};

static void fuzz_tmp_remove(void)
{
    for (int k = 0; k < 2; k++)
        if (fuzz_tmp[k].fd >= 0) {
            close(fuzz_tmp[k].fd);
            unlink(fuzz_tmp[k].path);
            fuzz_tmp[k].fd = -1;
        }
}

/* Replace temporary file k's contents with text[0..len); returns its path
 * (stem names the harness in the file name). */
static const char *fuzz_tmp_write(int k, const char *stem, const uint8_t *text, size_t len)
{
    if (fuzz_tmp[k].fd < 0) {
        const char *dir = getenv("TMPDIR");
        if (!dir || !*dir)
            dir = "/tmp";
        snprintf(fuzz_tmp[k].path, sizeof fuzz_tmp[k].path, "%s/%s%d.XXXXXX", dir, stem, k);
        fuzz_tmp[k].fd = mkstemp(fuzz_tmp[k].path);
        if (fuzz_tmp[k].fd < 0) {
            perror(fuzz_tmp[k].path);
            abort();
        }
        if (fuzz_tmp[k ? 0 : 1].fd < 0)
            atexit(fuzz_tmp_remove);
    }
    if (ftruncate(fuzz_tmp[k].fd, 0) != 0) {
        perror(fuzz_tmp[k].path);
        abort();
    }
    size_t done = 0;
    while (done < len) {
        ssize_t w = pwrite(fuzz_tmp[k].fd, text + done, len - done, (off_t)done);
        if (w <= 0) {
            perror(fuzz_tmp[k].path);
            abort();
        }
        done += (size_t)w;
    }
    return fuzz_tmp[k].path;
}

#endif
