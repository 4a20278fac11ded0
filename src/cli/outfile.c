/* SPDX-License-Identifier: Apache-2.0 */
/*
 * outfile.c -- the MPI driver's side of the output files (see drv.h): the
 * rule and the mechanism are src/base/base_out.c; this records their
 * failures in the driver context and writes .npy contents.
 */
#include <stdio.h>

#include "base/base_out.h"
#include "cli.h"
#include "drv.h"

/* base_out's failure, recorded in d. */
static int fail(drv *d, int code)
{
    return drv_fail(d, code, "%s", uly_base_last_error());
}

int drv_out_prepare(drv *d, drv_out *outs, int n, const drv_in *ins, int nin)
{
    int rc = uly_out_prepare(outs, n, ins, nin);
    if (rc)
        return fail(d, rc);
    for (int i = 0; i < n; i++)
        if (outs[i].stale)
            fprintf(stderr, "%s: note: %s %s: removed %d temporary file%s left by an interrupted run\n", d->cmd,
                    outs[i].what, outs[i].path, outs[i].stale, outs[i].stale > 1 ? "s" : "");
    return 0;
}

void drv_out_init(drv_out *outs, int n)
{
    uly_out_init(outs, n);
}

void drv_out_discard(drv_out *outs, int n)
{
    uly_out_discard(outs, n);
}

int drv_out_ready(drv *d, drv_out *o)
{
    int rc = uly_out_ready(o);
    return rc ? fail(d, rc) : 0;
}

int drv_out_close(drv *d, drv_out *o, FILE *f)
{
    int rc = uly_out_close(o, f);
    return rc ? fail(d, rc) : 0;
}

int drv_out_commit(drv *d, drv_out *outs, int n)
{
    int rc = uly_out_commit(outs, n);
    return rc ? fail(d, rc) : 0;
}

int drv_out_npy(drv *d, drv_out *o, uly_dtype t, int ndim, const int64_t *shape, const void *data)
{
    if (!o->tmp || o->fd < 0)
        return drv_fail(d, DRV_RUNTIME, "%s %s: not prepared", o->what, o->path);
    /* The writer opens the temporary by name (same inode as o->fd), which
     * fsync through o->fd then makes durable. */
    int st = uly_npy_write(o->tmp, t, ndim, shape, data);
    if (st) {
        char note[512];
        return drv_fail(d, st == ULY_EIO ? DRV_RUNTIME : exit_status_of(st), "%s %s: cannot write: %s%s", o->what,
                        o->path, uly_last_error(), uly_out_note(o, note, sizeof note));
    }
    return drv_out_ready(d, o);
}
