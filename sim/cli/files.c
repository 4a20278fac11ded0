/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files.c -- see files.h.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files.h"

static uly_out *set;
static int nset;

static void discard_at_exit(void)
{
    if (set)
        uly_out_discard(set, nset);
}

void files_prepare(uly_out *outs, int n, const uly_in *ins, int nin)
{
    int rc = uly_out_prepare(outs, n, ins, nin);
    if (rc) {
        fprintf(stderr, "ulysses-sim: %s\n", uly_base_last_error());
        exit(rc);
    }
    if (!set)
        atexit(discard_at_exit);
    set = outs;
    nset = n;
    for (int i = 0; i < n; i++)
        if (outs[i].stale)
            fprintf(stderr, "ulysses-sim: note: %s %s: removed %d temporary file%s left by an interrupted run\n",
                    outs[i].what, outs[i].path, outs[i].stale, outs[i].stale > 1 ? "s" : "");
}

FILE *files_open(uly_out *o)
{
    int fd = o->fd >= 0 ? dup(o->fd) : -1;
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        fprintf(stderr, "ulysses-sim: %s %s: %s\n", o->what, o->path, strerror(errno));
    }
    return f;
}

int files_ready(uly_out *o, FILE *f)
{
    if (uly_out_close(o, f)) {
        fprintf(stderr, "ulysses-sim: %s\n", uly_base_last_error());
        return 1;
    }
    return 0;
}

int files_commit(void)
{
    if (set && uly_out_commit(set, nset)) {
        fprintf(stderr, "ulysses-sim: %s\n", uly_base_last_error());
        return 1;
    }
    return 0;
}
