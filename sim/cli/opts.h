/* SPDX-License-Identifier: Apache-2.0 */
/*
 * opts.h -- command-line parsing for ulysses-sim: options shared by the run
 * and sweep modes, number and list syntax, and the exit-status convention.
 */
#ifndef USIM_CLI_OPTS_H
#define USIM_CLI_OPTS_H

#include <stdint.h>
#include "usim.h"
#include "base/base.h"
#include "base/base_out.h"

enum { EXIT_BADINPUT = ULY_EXIT_BADINPUT };
enum { FMT_TABLE = 0, FMT_CSV, FMT_JSON };
enum { PLOT_TIME = 0, PLOT_TFLOPS, PLOT_EXPOSED, PLOT_MEMORY };

#define MAX_LIST 4096

typedef struct opts {
    const char *platform, *model;
    int64_t gpus[MAX_LIST];
    int ngpus;
    int64_t seqs[MAX_LIST];
    int nseqs;
    uly_method methods[ULY_METHOD_ALL];
    int nmethods;
    int methods_explicit;
    int sp, tp, pp, dp, ulysses, zero;
    int vpp, pp_first_layers, pp_last_layers;   /* pipeline schedule (usim_job) */
    usim_recompute recompute;
    usim_coll_type a2a;
    int64_t micro_batch, global_batch, layers;
    int format;
    const char *trace;
    /* --trace-ranks: GPUs traced (sorted, distinct; checked against the GPU
     * count by the run), or all of them (trace_ranks_all) */
    int trace_ranks[USIM_TRACE_MAX_GPUS];
    int ntrace_ranks;             /* 0: not given (GPU 0) */
    int trace_ranks_all;
    int max_seq;
    int engine;                   /* USIM_ENGINE_* */
    /* sweep: --sp/--tp/--pp lists (the run fields hold the first value) */
    int64_t sps[64], tps[64], pps[64];
    int nsps, ntps, npps;
    int64_t seq_per_gpu;          /* weak scaling: sequence = this x GPUs */
    const char *out, *plot;
    int plot_metric;              /* PLOT_* */
    int no_progress;
    /* plan */
    int top;
    double mem_headroom;           /* fraction of HBM a plan must leave free (--mem-headroom) */
    int zero_set, recompute_set;   /* given on the command line (plan searches them otherwise) */
    /* long-context techniques (usim_job fields of the same names; 0: off) */
    int tiled_loss, tiled_mlp, offload, head_chunks;
    int attn_kernel, attn_dropout;  /* usim_job fields of the same names */
} opts;

/* Modes of opts_parse: which subcommand's options are accepted. */
enum { OPTS_RUN = 0, OPTS_SWEEP = 1, OPTS_PLAN = 2 };

void opts_defaults(opts *o);
/* Parse argv[first..argc).  sweep: OPTS_RUN, OPTS_SWEEP (lists allowed for
 * --gpus/--seq; --out, --plot) or OPTS_PLAN (--top).  Returns 0
 * (*help set for --help), or EXIT_BADINPUT with a one-line reason in
 * opts_error(); it neither prints nor exits. */
int opts_parse(opts *o, int argc, char **argv, int first, int sweep, int *help);
/* The message of the last failed opts_parse. */
const char *opts_error(void);
/* "131072", "128K", "1M" (K = 1024): uly_parse_int of src/base, the syntax of
 * both programs; a negative value parses and fails the callers' range checks. */
int parse_count(const char *s, int64_t *out);
/* "a,b,c" or "a:b" (doubling) or "a:b:xF" (factor) or "a:b:+S" (step). */
int parse_list(const char *s, int64_t *out, int max, int *n);

/* Load platform/model (preset name or file) with one-line errors. */
int load_inputs(const opts *o, usim_platform *p, usim_model *m);
/* The same, and the files read (for the outputs' checks, base_out.h):
 * ins[0] --platform, ins[1] --model. */
int load_inputs_files(const opts *o, usim_platform *p, usim_model *m, uly_in ins[2]);
/* Apply --micro-batch/--global-batch/--layers and the sequence to a model. */
int apply_model_overrides(const opts *o, usim_model *m, int64_t seq);
usim_job make_job(const opts *o, uly_method m, int gpus);

void die_usage(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;

#endif
