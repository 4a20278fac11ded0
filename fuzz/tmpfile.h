/*
 * tmpfile.h -- one temporary file per harness process, for targets that
 * take a path (the simulator's JSON loaders, the streaming .npy reader):
 * created on first use in $TMPDIR (default /tmp), rewritten for each input,
 * removed at exit.  Included by the harnesses that need it.
 */
#ifndef ULY_FUZZ_TMPFILE_H
#define ULY_FUZZ_TMPFILE_H

/* needs _POSIX_C_SOURCE >= 200809L before the first system header */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

static char tmp_path[256];
static int tmp_fd = -1;

static void tmp_remove(void)
{
    if (tmp_fd >= 0) {
        close(tmp_fd);
        unlink(tmp_path);
        tmp_fd = -1;
    }
}

/* Replace the temporary file's contents with text[0..len); its path is tmp_path. */
static void tmp_write(const char *tag, const uint8_t *text, size_t len)
{
    if (tmp_fd < 0) {
        const char *dir = getenv("TMPDIR");
        if (!dir || !*dir)
            dir = "/tmp";
        snprintf(tmp_path, sizeof tmp_path, "%s/fuzz_%s.XXXXXX", dir, tag);
        tmp_fd = mkstemp(tmp_path);
        if (tmp_fd < 0) {
            perror(tmp_path);
            abort();
        }
        atexit(tmp_remove);
    }
    if (ftruncate(tmp_fd, 0) != 0) {
        perror(tmp_path);
        abort();
    }
    size_t done = 0;
    while (done < len) {
        ssize_t w = pwrite(tmp_fd, text + done, len - done, (off_t)done);
        if (w <= 0) {
            perror(tmp_path);
            abort();
        }
        done += (size_t)w;
    }
}

#endif
