/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base_progress.h -- the progress line of long work on stderr, for both
 * programs (`ulysses attn --check`, `train`, `ulysses-sim sweep`, `plan`).
 *
 * One line, rewritten in place with '\r' at most every 0.25 s: what is
 * being done, how far, the time spent and, once a second has passed, the
 * time left at the rate so far.  Drawn only when stderr is a terminal and
 * the caller enables it (not --quiet, rank 0 only), so that nothing of it
 * ever reaches a pipe or a file.  Finished lines are blanked, leaving the
 * terminal as it would be without them.
 *
 * Under Open MPI's mpirun a rank's stderr is a pipe to mpirun: there the
 * line is drawn when mpirun's own stderr is a terminal (Linux).
 *
 * ULYSSES_PROGRESS_INTERVAL=S (seconds, 0 ... 60) replaces the 0.25 s
 * between redraws; the tests use 0 to see a line on a short run.
 *
 * Not installed; nothing here is public API (hidden, uly_-prefixed).
 */
#ifndef ULY_BASE_PROGRESS_H
#define ULY_BASE_PROGRESS_H

#include "base.h"

typedef struct uly_progress {
    int on;            /* enabled and stderr is a terminal */
    int open;          /* a line is on the terminal, unfinished */
    int len;           /* its length, to blank it or a shorter successor */
    double t0;         /* uly_progress_begin's time [s] */
    double next;       /* the earliest time of the next redraw [s] */
    double interval;   /* between redraws [s] */
    int f1_set;        /* f1, t1 hold the first fraction above 0 and its time */
    double f1, t1;
    char what[128];    /* "ulysses attn --check": the start of the line */
} uly_progress;

/* Whether fd (1 or 2) ends on a terminal: isatty(fd), or, in a rank
 * started by Open MPI's mpirun (whose stdout is a terminal and stderr a
 * pipe, both mpirun's), whether mpirun's own fd is one. */
ULY_BASE_API int uly_progress_terminal_fd(int fd);
/* Start a progress line named what; drawn only if enabled and stderr is a
 * terminal (p->on says which). */
ULY_BASE_API void uly_progress_begin(uly_progress *p, int enabled, const char *what);
/* Redraw, unless the last redraw is less than the interval ago: done of
 * total (total <= 0: no percentage, no estimate), then the text of fmt
 * (may be NULL).  Cheap when nothing is drawn. */
ULY_BASE_API void uly_progress_show(uly_progress *p, double done, double total, const char *fmt, ...)
    ULY_BASE_PRINTF(4, 5);
/* Blank the line (before another message, or at the end); the next
 * uly_progress_show draws again at once. */
ULY_BASE_API void uly_progress_clear(uly_progress *p);

#endif
