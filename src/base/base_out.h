/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base_out.h -- the output files of both programs (`ulysses`, `ulysses-sim`),
 * under one rule:
 *
 *   - an output may not be an input or another output: compared by device
 *     and inode for files that exist, by canonical path (the directory's
 *     realpath + the name) for files not yet created; directories, special
 *     files and symbolic links (a rename would replace the link, not the file
 *     it names) are refused;
 *   - every output of a run is a temporary file in its own directory,
 *     "<dir>/.<name>.tmpXXXXXX", created before any computing (so that a
 *     missing or unwritable directory is found first) and locked (flock)
 *     while its run lives;
 *   - the contents are written and fsync'ed into the temporaries first, and
 *     only then are all of them renamed over their destinations, one after
 *     the other, and the directories fsync'ed: a failure while writing (a
 *     full disk) replaces nothing; a failure during the renames says which
 *     outputs were committed and which were not;
 *   - a destination replaced or created by another process during the run is
 *     detected before it is overwritten (nothing is then renamed);
 *   - a killed run cannot remove its temporaries: the next run with the same
 *     output removes the temporaries of that output that no live process
 *     holds locked (and says so in uly_out.stale); another live run's
 *     temporaries are left alone.
 *
 * Functions return ULY_EXIT_OK (0), ULY_EXIT_BADINPUT (2: a refused path) or
 * ULY_EXIT_RUNTIME (1: the system failed: no space, read-only, I/O), with a
 * message naming the option and the file in uly_base_last_error().  They
 * never print.  The MPI driver wraps them in src/cli/outfile.c (drv_out_*).
 *
 * Not for: inputs (uly_read_file), directories of outputs (train --dump).
 */
#ifndef ULY_BASE_OUT_H
#define ULY_BASE_OUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base.h"

typedef struct uly_out {
    const char *path;     /* destination; NULL: the slot is unused */
    const char *what;     /* its option, for messages ("--out") */
    /* set by uly_out_prepare: */
    char *tmp;            /* the temporary file, NULL when none */
    int fd;               /* open on tmp (and holding its lock), -1 when none */
    int ready;            /* its content is complete and fsync'ed */
    int committed;        /* renamed over the destination */
    int existed;          /* the destination existed when it was prepared */
    uint64_t dev, ino;    /* its identity then */
    int64_t mtime_ns, size;
    int stale;            /* temporaries of killed runs removed by prepare */
    struct uly_out *set;  /* the array this output was prepared in */
    int nset;
} uly_out;

/* An input of the run: no output may be this file, except the output whose
 * option is replaced_by (train --checkpoint over its --resume: read whole
 * before, replaced atomically after). */
typedef struct uly_in {
    const char *path;         /* NULL: unused */
    const char *what;         /* its option ("--q") */
    const char *replaced_by;  /* NULL, or the `what` of the one output allowed to be this file */
} uly_in;

/* Mark outputs as holding nothing (so that uly_out_discard is safe). */
ULY_BASE_API void uly_out_init(uly_out *outs, int n);

/* The checks alone (no file is created or removed). */
ULY_BASE_API int uly_out_check(uly_out *outs, int n, const uly_in *ins, int nin);

/* uly_out_check, then for each output: remove the stale temporaries of that
 * output (o->stale counts them), create and lock its temporary.  On failure
 * nothing is left behind. */
ULY_BASE_API int uly_out_prepare(uly_out *outs, int n, const uly_in *ins, int nin);

/* The content of o is complete (written through o->fd, a dup of it, or
 * o->tmp by name, and closed there): fsync it. */
ULY_BASE_API int uly_out_ready(uly_out *o);
/* Flush and close f (a FILE the caller wrote o's content through; NULL: o
 * was written otherwise), then uly_out_ready: a write error of the FILE is
 * exit 1 "WHAT PATH: cannot write: ERROR" with uly_out_note's note. */
ULY_BASE_API int uly_out_close(uly_out *o, FILE *f);

/* Rename every prepared output of outs[0..n) over its destination (each must
 * be ready), then fsync their directories.  First the destinations are
 * checked (none replaced or created by another process, else nothing is
 * renamed and the temporary of that output is kept, named in the message).
 * A failure midway names the outputs committed and those not. */
ULY_BASE_API int uly_out_commit(uly_out *outs, int n);

/* Close and remove the temporary of every output not committed. */
ULY_BASE_API void uly_out_discard(uly_out *outs, int n);

/* What became of the outputs of o's set, for a failure message:
 * " (no output was replaced: --out, --dq keep their previous content)" when
 * o's set has other outputs and none was committed; "" otherwise. */
ULY_BASE_API const char *uly_out_note(const uly_out *o, char *buf, size_t len);

#endif
