/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files.h -- the output files of ulysses-sim (run --trace, sweep --out and
 * --plot) through the one rule of both programs (src/base/base_out.h): no
 * output is an input (--platform, --model) or another output; each is a
 * temporary created before simulating, written and fsync'ed, and all are
 * renamed together at the end.  One output set per process; its temporaries
 * are removed at exit unless committed (die_usage exits directly).
 */
#ifndef USIM_CLI_FILES_H
#define USIM_CLI_FILES_H

#include <stdio.h>

#include "base/base_out.h"

/* Check and create the temporaries of outs[0..n) (kept by this module until
 * exit): a refused path exits 2 with a one-line message, a failing system 1;
 * a note is printed for each stale temporary removed. */
void files_prepare(uly_out *outs, int n, const uly_in *ins, int nin);
/* A FILE writing into o's temporary (through a dup of its descriptor), or
 * NULL with the message printed. */
FILE *files_open(uly_out *o);
/* Close f (from files_open; NULL: o was written otherwise) and fsync o.  0, or
 * 1 with the message printed. */
int files_ready(uly_out *o, FILE *f);
/* Rename every prepared output into place.  0, or 1 with the message printed. */
int files_commit(void);

#endif
