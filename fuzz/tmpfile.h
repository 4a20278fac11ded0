/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tmpfile.h -- temporary files for harnesses whose targets take a path (the
 * streaming .npy reader, the simulator's JSON loaders): up to two per
 * process, created on first use under $TMPDIR (default /tmp), rewritten for
 * every input, removed at exit.
 */
#ifndef ULY_FUZZ_TMPFILE_H
#define ULY_FUZZ_TMPFILE_H

/* needs _POSIX_C_SOURCE >= 200809L before the first system header */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

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
