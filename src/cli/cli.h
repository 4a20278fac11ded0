/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cli.h -- the `ulysses` driver: subcommands and what they share.
 * Exit statuses (ULY_EXIT_* of src/base/base.h, the same on every rank):
 * 0 success, 1 failure at run time (or a --check that found a difference),
 * 2 bad input (options, files, shapes, mismatched ranks).
 */
#ifndef ULY_CLI_H
#define ULY_CLI_H

#include <stddef.h>
#include <stdint.h>
#include "ulysses.h"
#include "base/base.h"

enum { EXIT_BADINPUT = ULY_EXIT_BADINPUT };

/* Exit status for a library status: 2 for bad input, 1 otherwise (an I/O
 * error is 1: the caller says 2 where the path itself is the problem).
 * status.c: below every subcommand and the drv_* layer. */
int exit_status_of(int status);

/* Each returns the process exit status.  argv[0] is the subcommand name. */
int cmd_attn(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_infer(int argc, char **argv);
int cmd_explain(int argc, char **argv);   /* no MPI */
/* `ulysses check --data DIR`: the training-level checks of per-rank token ids,
 * labels, positions and losses (check_data.c; no MPI).  argv[0] is the
 * subcommand name; the options follow, --data among them. */
int check_data_main(int argc, char **argv);

/* The independent checker (doc/check.md): one process, no collectives.
 * cmd_check.c: `ulysses check DIR`; `ulysses check --data DIR` goes to
 * check_data_main (check_data.c), argv[0] being "check". */
int cmd_check(int argc, char **argv);
int check_data_main(int argc, char **argv);

/* inputs.c (shared by attn, bench and calibrate, below them): */

/* Names of the all-to-all modes, indexed by ULY_A2A_* (auto, pack, ...),
 * NULL-terminated: the choices of --a2a. */
extern const char *const a2a_mode_names[];

/* Deterministic input value of element `index` of tensor `which` (0 q,
 * 1 k, 2 v, 3 dout) for a seed: uniform in [-1, 1), independent of how the
 * tensor is sharded. */
double input_value(uint64_t seed, int which, uint64_t index);

/* Fill (B, n, Hx, d) holding global tokens [t0, t0 + n) of tensor `which`. */
void fill_shard(void *x, uly_dtype t, uint64_t seed, int which, int64_t B, int64_t N, int64_t t0,
                int64_t n, int64_t Hx, int64_t d);

/* Document lengths "100,37,..." (the same in every batch row, summing to N)
 * -> offsets (B, D+1) allocated with uly_malloc; on bad text returns 1 with
 * a message naming the problem in msg. */
int doc_lens_offsets(const char *s, int64_t B, int64_t N, int64_t **off, int64_t *docs, char *msg, size_t len);

#endif
