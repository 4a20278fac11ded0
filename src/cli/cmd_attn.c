/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd_attn.c -- `ulysses attn`: attention on P MPI ranks (P = 1 without
 * mpirun) by any sequence-parallel method (--method, doc/methods.md).
 * Inputs are random (seeded, independent of P) or read from .npy or
 * .safetensors files (attn_io.c: layouts bshd, bhsd, thd) by rank 0 and
 * scattered; every rank holds its token shard (one or two
 * segments of positions, uly_plan_tokens); the method moves them.  Rank 0
 * prints phase times (min/median/max over ranks and repetitions), bytes per
 * rank measured and expected (uly_plan_method_volume), GFLOP/s, and with
 * --check the error against the fp64 reference and whether the result is
 * bitwise equal to one process (required for ulysses only).
 *
 * The run is a sequence of steps, each returning a status that all ranks
 * then agree on (drv_sync), so that every rank stops at the same step with
 * the same exit status:
 *
 *   parse -> agree (one exchange of every option that matters) -> BLAS
 *   warm-up -> resolve (rank 0 reads the .npy headers) -> plan (shapes,
 *   memory preflight, output files prepared) -> allocate -> create the
 *   distributed context -> load (rank 0 streams the inputs and scatters the
 *   shards) -> run -> finite results -> measure -> trace -> gather -> check -> write
 *   (every output into its temporary, then all renamed together) -> report
 *   -> verdict.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <mpi.h>

#include "args.h"
#include "attn_io.h"
#include "base/base_json.h"
#include "base/base_progress.h"
#include "cli.h"
#include "drv.h"
#include "timing.h"
#include "ulysses_dist.h"

/* ---------------------------------------------------------------- options */

enum { T_Q, T_K, T_V, T_DO, NIN };               /* inputs */
enum { R_O, R_LSE, R_DQ, R_DK, R_DV, NRES };     /* results */
enum { W_O, W_DQ, W_DK, W_DV, NOUT };            /* output tensors */
enum { W_TRACE = NOUT, W_LSE, NFILE };           /* output files: the tensors, --overlap-trace, --lse */
static const char *const in_name[NIN] = {"--q", "--k", "--v", "--dout"};
static const char *const res_name[NRES] = {"O", "LSE", "dQ", "dK", "dV"};

struct attn_cfg {
    int64_t batch, seq, heads, kv_heads, head_dim, window, seed, threads, repeat;
    int64_t block_q, block_k, max_count, warmup;
    int causal, backward, check, json, allow_nonfinite, force, dtype, a2a, overlap;
    int64_t overlap_chunks;
    const char *fin[NIN], *fout[NOUT], *trace;
    int seen_batch, seen_seq, seen_heads, seen_kv, seen_dim, seen_dtype;
    const char *method_s, *doc_lens, *docs;
    int method, placement, bf16, seen_udeg, seen_placement;
    int64_t udeg;
    int layout, out_type, seen_out_type, seen_scale;    /* ATTN_BSHD...; --out-dtype (ATTN_OUT_INPUT or a uly_elem) */
    double scale;                           /* 0: 1/sqrt(d) */
    const char *cu_seqlens, *lse;
    int quiet;                      /* --quiet: no progress line on the terminal */
};

static const char *const dtype_names[] = {"f32", "f64", NULL};
static const char *const method_names[] = {"ulysses", "ring", "zigzag", "allgather", "usp", NULL}; /* = ULY_METHOD_* */
static const char *const placement_names[] = {"ulysses-inner", "ring-inner", NULL}; /* = ULY_PLACE_* */
static const char *const overlap_names[] = {"off", "on", "auto", NULL};                /* = ULY_OVERLAP_* */

static const char synopsis[] =
    "attn [--method M [--ulysses-degree U] [--placement P] [--bf16-partials]]\n"
    "            [--batch B] [--seq N] [--heads H] [--kv-heads Hkv] [--head-dim d]\n"
    "            [--causal] [--window W] [--doc-lens L1,L2,... | --docs F.npy]\n"
    "            [--backward] [--check] [--seed S] [--threads T]\n"
    "            [--repeat R] [--warmup W] [--dtype f32|f64] [--q F.npy --k F.npy --v F.npy] [--out F.npy]\n"
    "            [--dout F.npy --dq F.npy --dk F.npy --dv F.npy] [--allow-nonfinite] [--force] [--json]\n"
    "            [--overlap off|on|auto] [--overlap-chunks K] [--overlap-trace F.csv]\n"
    "            [--layout bshd|bhsd|thd [--cu-seqlens F]] [--scale S] [--lse F] [--out-dtype T]\n"
    "Input and output files are .npy or .safetensors (FILE.safetensors:NAME names a tensor; without :NAME the\n"
    "file's only tensor, else the one named q, k, v, do (or dout) for --q, --k, --v, --dout).  Outputs ending\n"
    "in .safetensors hold one tensor (o, lse, dq, dk, dv) and the run's configuration in __metadata__.\n"
    "Run under 'mpirun -np P' for P ranks; each rank holds a sequence shard (ulysses, ring: contiguous;\n"
    "zigzag, allgather, usp: chunks j and 2R-1-j of 2R).  --check: ulysses must be bitwise equal to one\n"
    "process; every method must be within atol + rtol |ref| of the fp64 reference (doc/methods.md).\n"
    "Exit status: 0 success, 1 run-time failure (I/O, memory, MPI, non-finite results, --check failed),\n"
    "2 bad input (options, files, shapes, not enough memory, ranks started with different options).\n"
    "Every row and column of the output tables (phase, min/median/max, GFLOP/s, measured == expected,\n"
    "bitwise, max abs/rel err) is defined in doc/glossary.md.";

enum { NOPTS = 48 };

static void attn_options(struct attn_cfg *c, arg_opt *o)
{
    const arg_opt t[] = {
        {"method", ARG_STR, &c->method_s, 0, 0, "M", "ulysses (default), ring, zigzag, allgather or usp; Megatron cp_comm_type names a2a, p2p, all_gather, a2a+p2p are aliases (doc/methods.md)", NULL, NULL},
        {"ulysses-degree", ARG_INT, &c->udeg, 1, 1 << 20, "U", "usp: ranks per all-to-all group, dividing P (default: the largest divisor of P that is <= H, printed)", NULL, &c->seen_udeg},
        {"placement", ARG_CHOICE, &c->placement, 0, 0, "P", "usp: ulysses-inner (each all-to-all group is U consecutive ranks, default) or ring-inner", placement_names, &c->seen_placement},
        {"bf16-partials", ARG_FLAG, &c->bf16, 0, 0, NULL, "ring, zigzag, usp: round each step's partial output and the running merge to bfloat16 (emulates partials kept in bf16)", NULL, NULL},
        {"doc-lens", ARG_STR, &c->doc_lens, 0, 0, "L1,L2,...", "packed documents of these lengths in every batch row (summing to N); attention never crosses a document", NULL, NULL},
        {"docs", ARG_STR, &c->docs, 0, 0, "F.npy", "packed documents: int64 cumulative offsets (B, D+1) (or (D+1,) for every row), 0 ... N, non-decreasing; read by rank 0", NULL, NULL},
        {"batch", ARG_INT, &c->batch, 1, 1 << 20, "B", "batch size (default 1)", NULL, &c->seen_batch},
        {"seq", ARG_INT, &c->seq, 1, DRV_SEQ_MAX, "N", "sequence length, K/M/G suffixes allowed (default 1024)", NULL, &c->seen_seq},
        {"heads", ARG_INT, &c->heads, 1, 1 << 20, "H", "query heads (default 8)", NULL, &c->seen_heads},
        {"kv-heads", ARG_INT, &c->kv_heads, 1, 1 << 20, "Hkv", "key/value heads, H % Hkv == 0 (default H)", NULL, &c->seen_kv},
        {"head-dim", ARG_INT, &c->head_dim, 1, 1 << 16, "d", "head dimension (default 64)", NULL, &c->seen_dim},
        {"causal", ARG_FLAG, &c->causal, 0, 0, NULL, "causal mask", NULL, NULL},
        {"window", ARG_INT, &c->window, 1, DRV_SEQ_MAX, "W", "sliding window: |i-j| < W, or the W most recent keys with --causal", NULL, NULL},
        {"backward", ARG_FLAG, &c->backward, 0, 0, NULL, "also run the backward pass", NULL, NULL},
        {"check", ARG_FLAG, &c->check, 0, 0, NULL, "compare with one process (bitwise) and the fp64 reference", NULL, NULL},
        {"quiet", ARG_FLAG, &c->quiet, 0, 0, NULL, "no progress line of --check on stderr (drawn only when it is a terminal)", NULL, NULL},
        {"seed", ARG_INT, &c->seed, 0, INT64_MAX, "S", "seed of the random inputs (default 1)", NULL, NULL},
        {"threads", ARG_INT, &c->threads, 1, 1024, "T", "OpenMP threads per rank (default: OMP_NUM_THREADS, clamped to 4 per usable core and 1024)", NULL, NULL},
        {"repeat", ARG_INT, &c->repeat, 1, 100000, "R", "timed repetitions (default 3)", NULL, NULL},
        {"warmup", ARG_INT, &c->warmup, 0, 1000, "W", "untimed repetitions first (default 1)", NULL, NULL},
        {"dtype", ARG_CHOICE, &c->dtype, 0, 0, "T", "element type of the computation, f32 or f64 (default f32, or f64 for a float64 --q)", dtype_names, &c->seen_dtype},
        {"block-q", ARG_INT, &c->block_q, 1, 65536, "n", "query rows per kernel block", NULL, NULL},
        {"block-k", ARG_INT, &c->block_k, 1, 65536, "n", "key rows per kernel block", NULL, NULL},
        {"a2a", ARG_CHOICE, &c->a2a, 0, 0, "MODE", "all-to-all data movement: auto (default: the first calls of each kind try every mode 3 times; the smallest median is kept, but pack, datatype or pipeline replace shm or cma only when more than 10 % faster), pack, datatype, pipeline, shm (one node: copies straight between the ranks' buffers in shared memory), cma (one node: each rank reads its blocks out of the peers' memory with process_vm_readv; shm where the system forbids it, with a note); where the shared-memory window does not fit (/dev/shm, address space) auto falls back to pack, datatype and pipeline with a note, shm and cma exit 1", a2a_mode_names, NULL},
        {"overlap", ARG_CHOICE, &c->overlap, 0, 0, "MODE", "overlap the all-to-alls with attention, head chunk by head chunk and source rank by source rank: off (default), on, auto (on when every rank has >= 2 KV heads); with on/auto every repetition also runs once without overlap, to report how much communication is hidden", overlap_names, NULL},
        {"overlap-chunks", ARG_INT, &c->overlap_chunks, 1, ULY_OVERLAP_MAX_CHUNKS, "K", "head chunks per rank with --overlap (default: as many as the fewest KV heads of a rank, at most 8)", NULL, NULL},
        {"overlap-trace", ARG_STR, &c->trace, 0, 0, "F.csv", "with --overlap: write every overlapped call's events (waits for input blocks, sends of output blocks, kernel calls, chunk starts and completions) of every rank to F.csv (doc/cli.md)", NULL, NULL},
        {"max-count", ARG_INT, &c->max_count, 1, INT32_MAX, "n", "largest element count per MPI call and peer", NULL, NULL},
        {"q", ARG_STR, &c->fin[T_Q], 0, 0, "F.npy", "queries, f16/bf16/f32/f64 (B, N, H, d) or (N, H, d) (see --layout), .npy or FILE.safetensors[:NAME]; read by rank 0", NULL, NULL},
        {"k", ARG_STR, &c->fin[T_K], 0, 0, "F.npy", "keys (B, N, Hkv, d)", NULL, NULL},
        {"v", ARG_STR, &c->fin[T_V], 0, 0, "F.npy", "values (B, N, Hkv, d)", NULL, NULL},
        {"out", ARG_STR, &c->fout[W_O], 0, 0, "F.npy", "write the output O (B, N, H, d)", NULL, NULL},
        {"dout", ARG_STR, &c->fin[T_DO], 0, 0, "F.npy", "output gradient dO (implies --backward)", NULL, NULL},
        {"dq", ARG_STR, &c->fout[W_DQ], 0, 0, "F.npy", "write dQ", NULL, NULL},
        {"dk", ARG_STR, &c->fout[W_DK], 0, 0, "F.npy", "write dK", NULL, NULL},
        {"dv", ARG_STR, &c->fout[W_DV], 0, 0, "F.npy", "write dV", NULL, NULL},
        {"layout", ARG_CHOICE, &c->layout, 0, 0, "L", "layout of the input and output tensors: bshd (B, N, H, d), default; bhsd (B, H, N, d), PyTorch's; thd (T, H, d), packed sequences with --cu-seqlens (as flash-attn's varlen and TransformerEngine's THD: B = 1, N = T, the offsets as --docs)", attn_layout_names, NULL},
        {"cu-seqlens", ARG_STR, &c->cu_seqlens, 0, 0, "F", "--layout thd: cumulative sequence offsets (D+1,) 0 ... T, int32 or int64 (.npy, or FILE.safetensors[:NAME]; default: the tensor cu_seqlens of the --q file)", NULL, NULL},
        {"scale", ARG_REAL, &c->scale, 0, 0, "S", "softmax scale, > 0 (default 1/sqrt(d))", NULL, &c->seen_scale},
        {"lse", ARG_STR, &c->lse, 0, 0, "F", "write the log-sum-exp (natural log) of each query row: (B, H, N) for bshd and bhsd, (H, T) for thd, in the run's dtype", NULL, NULL},
        {"out-dtype", ARG_CHOICE, &c->out_type, 0, 0, "T", "element type of the output tensors: f16, bf16 (.safetensors outputs only), f32, f64, or input (that of --q); default: the run's --dtype", attn_outtype_names, &c->seen_out_type},
        {"allow-nonfinite", ARG_FLAG, &c->allow_nonfinite, 0, 0, NULL, "accept NaN/Inf in input files and results (they propagate)", NULL, NULL},
        {"force", ARG_FLAG, &c->force, 0, 0, NULL, "run even when the memory preflight says it will not fit", NULL, NULL},
        {"json", ARG_FLAG, &c->json, 0, 0, NULL, "print one JSON object instead of tables", NULL, NULL},
        {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    memcpy(o, t, sizeof t);
}

/* ---------------------------------------------------------------- the job */

/* Phase slots per repetition (uly_sp_times): forward comm in, attention,
 * ring wait, comm out, then the same for the backward.  Each method reports
 * the slots it uses, under its own names (NULL: not used); ulysses keeps the
 * six phases that ulysses-sim attn --compare reads. */
#define NPH 8
static const char *const phase_names[ULY_METHOD_COUNT][NPH] = {
    {"fwd a2a in (q,k,v)", "fwd attention", NULL, "fwd a2a out (o)",
     "bwd a2a in (do)", "bwd attention", NULL, "bwd a2a out (dq,dk,dv)"},
    {NULL, "fwd attention", "fwd ring wait", NULL, NULL, "bwd attention", "bwd ring wait", NULL},
    {NULL, "fwd attention", "fwd ring wait", NULL, NULL, "bwd attention", "bwd ring wait", NULL},
    {"fwd all-gather (k,v)", "fwd attention", NULL, NULL, NULL, "bwd attention", NULL, "bwd reduce-scatter (dk,dv)"},
    {"fwd a2a in (q,k,v)", "fwd ring attention", "fwd ring wait", "fwd a2a out (o)",
     "bwd a2a in (do)", "bwd ring attention", "bwd ring wait", "bwd a2a out (dq,dk,dv)"}};

/* --overlap: per repetition and rank, the accounts (uly_ovl_account) of the
 * overlapped call and of the plain reference call, forward and backward, as
 * NACC doubles each: overlapped forward, backward, plain forward, backward. */
enum { AC_WALL, AC_WALL_CPU, AC_KERNEL, AC_KERNEL_CPU, AC_WAIT, AC_WAIT_CPU, AC_WAIT_READY, AC_WAIT_FIRST,
       AC_WAIT_MAX, AC_SEND, AC_SEND_CPU, AC_TEST, AC_TEST_CPU, AC_WAITS, AC_WAITS_READY, AC_KERNEL_END, AC_END,
       AC_COPY, AC_COPY_CPU, NACC };
#define NOV (4 * NACC)
/* Per phase (forward, backward, both), medians over repetitions of: the
 * slowest rank's overlapped wall and attention alone (plain call's kernel);
 * the means over ranks of the communication alone (plain wall - kernel),
 * the exposed time (overlapped wall - kernel arithmetic) and its parts;
 * hidden = 1 - sum of exposed / sum of communication alone over ranks, and
 * the lowest rank's own hidden fraction. */
enum { OF_WALL, OF_ATTN, OF_COMM, OF_EXPOSED, OF_HIDDEN, OF_WORST, OF_OUTSIDE, OF_WAIT, OF_WAIT_READY,
       OF_WAIT_FIRST, OF_WAIT_MAX, OF_SEND, OF_TEST, OF_EXPOSED_CPU, OF_COMM_CPU, OF_WAITS, OF_WAITS_READY,
       OF_IMB_COMM, OF_IMB_EXPOSED, OF_HIDDEN_NET, OF_WORST_NET, OF_HIDDEN_CPU, OF_COPY_CPU, NOF };
typedef struct ovl_fig {
    double v[NOF];
} ovl_fig;
/* --json names of the OF_* figures, and which are times (printed in ms). */
static const char *const ovl_key[NOF] = {
    "wall_ms", "attention_alone_ms", "comm_alone_ms", "exposed_ms", "hidden", "hidden_worst_rank", "outside_kernel_ms",
    "wait_ms", "wait_arrived_ms", "wait_chunk0_ms", "wait_max_ms", "send_ms", "test_ms", "exposed_cpu_ms",
    "comm_alone_cpu_ms", "waits", "waits_arrived", "comm_alone_imbalance_ms", "exposed_imbalance_ms",
    "hidden_net", "hidden_net_worst_rank", "hidden_cpu", "copy_cpu_ms"};
static const char ovl_ms[NOF] = {1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1};


typedef struct errstat {
    double max_abs, max_ref, worst_tol;
    size_t nonfinite, first_bad; /* non-finite results (or differences) and the first one */
} errstat;

/* Everything a run holds, freed in one place. */
typedef struct attn_job {
    struct attn_cfg c;
    uly_attn_desc a;
    int rank, P;
    uly_sp_plan plan;               /* method, degrees, placement */
    int64_t *docs;                  /* document offsets (B, D+1), every rank; NULL: none */
    int ns;                         /* this rank's token segments */
    int64_t tb[2], tc[2];
    int64_t n;                      /* this rank's tokens (rows) */
    int lns;                        /* this rank's LSE: heads [h0, +hn) of segments lb, lc */
    int64_t h0, hn, lb[2], lc[2], lrows;
    int64_t ndocs;                  /* D, documents per row */
    size_t es, nq, nkv, NQ, NKV, NL;
    attn_in in[NIN];                /* rank 0: open input files */
    char fpath[NIN + 1][4096];      /* the files of --q, --k, --v, --dout, --cu-seqlens */
    const char *fname[NIN + 1];     /* and the tensors they name (NULL: none) */
    void *x[NIN];                   /* shards (B, n_r, H|Hkv, d) */
    void *res[NRES];                /* o, dq, dk, dv shards (LSE lives in the context) */
    void *full_in[NIN];             /* rank 0 with --check: whole inputs */
    void *full[NRES];               /* rank 0: gathered results */
    void *lstage;                   /* rank 0: one rank's LSE on its way */
    double inmax[NIN];              /* max |x| over all ranks */
    drv_out out[NFILE];             /* rank 0: every output, committed together */
    uly_dist_opts dopt;
    drv_lib_mem lib;                /* the library's part of the preflight (uly_sp_memory) */
    uly_sp *S;
    uly_dist *D;                    /* ulysses: the Ulysses context inside S (--overlap) */
    double *times;                  /* (repeat, NPH) this rank */
    int ovl_pair;                   /* --overlap ran chunked: each repetition also ran without */
    int chunks;                     /* head chunks per rank of the overlapped path */
    double *otimes;                 /* (repeat, NOV) this rank: the accounts */
    uly_ovl_event *ev;              /* --overlap-trace: this rank's events, */
    int64_t *ev_rep;                /* the repetition of each, */
    size_t nev, cap_ev;             /* how many (stored), room for how many */
    ovl_fig ovl[3];                 /* forward, backward, forward + backward */
    uly_volume vol, want;
    int vol_bad;
    stats ph[NPH];
    double crit[NPH];               /* critical path of each phase, median over repetitions */
    double fwd_med, tot_med;
    int bitwise[NRES], tol_ok, checked;
    errstat err[NRES];
    double atol, rtol;
    int64_t *pairs;                 /* rank 0, packed documents: per rank (pairs, exact), measured */
} attn_job;

static int need_full(const attn_job *J)
{
    const struct attn_cfg *c = &J->c;
    return c->check || c->fout[W_O] || c->fout[W_DQ] || c->fout[W_DK] || c->fout[W_DV] || c->lse;
}

static int64_t heads_of_input(const attn_job *J, int i)
{
    return (i == T_K || i == T_V) ? J->a.kv_heads : J->a.heads;
}

static void job_free(attn_job *J)
{
    for (int i = 0; i < NIN; i++) {
        attn_in_close(&J->in[i]);
        drv_free(J->x[i]);
        drv_free(J->full_in[i]);
    }
    for (int i = 0; i < NRES; i++) {
        drv_free(J->res[i]);
        drv_free(J->full[i]);
    }
    drv_out_discard(J->out, NFILE);
    drv_free(J->times);
    drv_free(J->otimes);
    drv_free(J->ev);
    drv_free(J->ev_rep);
    drv_free(J->lstage);
    drv_free(J->docs);
    drv_free(J->pairs);
    uly_sp_free(J->S); /* J->D is its Ulysses context, not ours */
}

/* ------------------------------------------------------------------ parse */

/* The options of the tensor files: specs split, layouts, scale, output types. */
static int attn_parse_io(attn_job *J, drv *d)
{
    struct attn_cfg *c = &J->c;
    const char *spec[NIN + 1] = {c->fin[T_Q], c->fin[T_K], c->fin[T_V], c->fin[T_DO], c->cu_seqlens};
    static const char *const opt[NIN + 1] = {"--q", "--k", "--v", "--dout", "--cu-seqlens"};
    for (int i = 0; i <= NIN; i++)
        if (spec[i] && attn_spec_split(spec[i], J->fpath[i], sizeof J->fpath[i], &J->fname[i]))
            return drv_fail(d, DRV_BADINPUT, "%s: the file name is too long", opt[i]);
    const char *outs[NOUT + 1] = {c->fout[W_O], c->fout[W_DQ], c->fout[W_DK], c->fout[W_DV], c->lse};
    static const char *const oname[NOUT + 1] = {"--out", "--dq", "--dk", "--dv", "--lse"};
    if (c->seen_scale && !(c->scale > 0))
        return drv_fail(d, DRV_BADINPUT, "--scale %g: the softmax scale must be > 0", c->scale);
    if (c->cu_seqlens && c->layout != ATTN_THD)
        return drv_fail(d, DRV_BADINPUT, "--cu-seqlens applies to --layout thd (with bshd or bhsd give the "
                        "documents with --docs or --doc-lens)");
    if (c->layout == ATTN_THD && (c->docs || c->doc_lens))
        return drv_fail(d, DRV_BADINPUT, "--layout thd: the sequences are given by --cu-seqlens, not %s",
                        c->docs ? "--docs" : "--doc-lens");
    if (c->layout == ATTN_THD && c->seen_batch && c->batch != 1)
        return drv_fail(d, DRV_BADINPUT, "--layout thd packs every sequence into one row: --batch must be 1, got %lld",
                        (long long)c->batch);
    if (c->layout == ATTN_THD && !c->cu_seqlens && !c->fin[T_Q])
        return drv_fail(d, DRV_BADINPUT, "--layout thd needs --cu-seqlens F (or a tensor cu_seqlens in the --q file)");
    if (c->seen_out_type && c->out_type == ULY_ELEM_BF16)
        for (int i = 0; i < NOUT; i++)
            if (outs[i] && !attn_out_is_st(outs[i]))
                return drv_fail(d, DRV_BADINPUT, "--out-dtype bf16: %s %s is a .npy file, which cannot hold bfloat16 "
                                "(name it F.safetensors)", oname[i], outs[i]);
    return 0;
}

static int attn_parse(attn_job *J, drv *d, int argc, char **argv)
{
    struct attn_cfg *c = &J->c;
    memset(c, 0, sizeof *c);
    c->batch = 1; c->seq = 1024; c->heads = 8; c->head_dim = 64; c->seed = 1; c->repeat = 3; c->warmup = 1;
    arg_opt opts[NOPTS];
    attn_options(c, opts);
    int prc = drv_parse(d, argc, argv, opts);
    if (prc != DRV_PARSE_OK)
        return prc;
    if (c->fin[T_DO])
        c->backward = 1;
    if (!c->seen_kv)
        c->kv_heads = c->heads;
    int nfiles = (c->fin[T_Q] != NULL) + (c->fin[T_K] != NULL) + (c->fin[T_V] != NULL);
    if (nfiles != 0 && nfiles != 3)
        drv_fail(d, DRV_BADINPUT, "--q, --k and --v must be given together");
    else if (c->fin[T_DO] && !c->fin[T_Q])
        drv_fail(d, DRV_BADINPUT, "--dout needs --q, --k and --v");
    else if ((c->fout[W_DQ] || c->fout[W_DK] || c->fout[W_DV]) && !c->backward)
        drv_fail(d, DRV_BADINPUT, "--dq/--dk/--dv need --backward (or --dout)");
    else if (c->method_s && uly_method_parse(c->method_s, &c->method))
        drv_fail(d, DRV_BADINPUT, "--method: %s", uly_last_error());
    else if (c->seen_udeg && c->method != ULY_METHOD_USP)
        drv_fail(d, DRV_BADINPUT, "--ulysses-degree applies to --method usp only (%s has %s)",
                 method_names[c->method], c->method == ULY_METHOD_ULYSSES ? "one all-to-all over all ranks" : "no all-to-all");
    else if (c->seen_placement && c->method != ULY_METHOD_USP)
        drv_fail(d, DRV_BADINPUT, "--placement applies to --method usp only (%s has one dimension)",
                 method_names[c->method]);
    else if (c->bf16 && !(uly_method_traits(c->method) & ULY_TRAIT_RING))
        drv_fail(d, DRV_BADINPUT, "--bf16-partials applies to the ring methods (ring, zigzag, usp): %s merges no "
                 "partial results", method_names[c->method]);
    else if (c->overlap != ULY_OVERLAP_OFF && c->method != ULY_METHOD_ULYSSES)
        drv_fail(d, DRV_BADINPUT, "--overlap applies to --method ulysses only");
    else if (c->trace && c->overlap == ULY_OVERLAP_OFF)
        drv_fail(d, DRV_BADINPUT, "--overlap-trace needs --overlap on or auto");
    else if (c->doc_lens && c->docs)
        drv_fail(d, DRV_BADINPUT, "--doc-lens and --docs both give the documents: use one");
    else if (attn_parse_io(J, d))
        return DRV_PARSE_ERROR;
    else
        return DRV_PARSE_OK;
    return DRV_PARSE_ERROR;
}

/* Every option that changes control flow, collectives or results. */
static int attn_fields(const attn_job *J, drv_field *f)
{
    const struct attn_cfg *c = &J->c;
    int n = 0;
#define FI(nm, v) f[n++] = (drv_field){nm, DRV_F_INT, (int64_t)(v), NULL, 0, NULL}
#define FF(nm, v) f[n++] = (drv_field){nm, DRV_F_FLAG, (int64_t)(v), NULL, 0, NULL}
#define FC(nm, v, ch) f[n++] = (drv_field){nm, DRV_F_CHOICE, (int64_t)(v), NULL, 0, ch}
#define FS(nm, v) f[n++] = (drv_field){nm, DRV_F_STR, 0, v, 0, NULL}
    FI("--batch", c->batch); FI("--seq", c->seq); FI("--heads", c->heads); FI("--kv-heads", c->kv_heads);
    FI("--head-dim", c->head_dim); FF("--causal", c->causal); FI("--window", c->window);
    FF("--backward", c->backward); FF("--check", c->check); FI("--seed", c->seed);
    FI("--repeat", c->repeat); FI("--warmup", c->warmup);
    FC("--dtype", c->seen_dtype ? c->dtype : -1, dtype_names);
    FI("--block-q", c->block_q); FI("--block-k", c->block_k); FC("--a2a", c->a2a, a2a_mode_names);
    FI("--max-count", c->max_count); FC("--overlap", c->overlap, overlap_names);
    FI("--overlap-chunks", c->overlap_chunks); FS("--overlap-trace", c->trace);
    for (int i = 0; i < NIN; i++)
        FS(in_name[i], c->fin[i]);
    FS("--out", c->fout[W_O]); FS("--dq", c->fout[W_DQ]); FS("--dk", c->fout[W_DK]); FS("--dv", c->fout[W_DV]);
    FF("--allow-nonfinite", c->allow_nonfinite); FF("--force", c->force); FF("--json", c->json);
    FC("--method", c->method, method_names); FC("--ulysses-degree", c->seen_udeg ? c->udeg : -1, NULL);
    FC("--placement", c->seen_placement ? c->placement : -1, placement_names); FF("--bf16-partials", c->bf16);
    FS("--doc-lens", c->doc_lens); FS("--docs", c->docs);
    FC("--layout", c->layout, attn_layout_names); FS("--cu-seqlens", c->cu_seqlens); FS("--lse", c->lse);
    f[n++] = (drv_field){"--scale", DRV_F_REAL, 0, NULL, c->scale, NULL};
    FC("--out-dtype", c->seen_out_type ? c->out_type : -1, attn_outtype_names);
#undef FI
#undef FF
#undef FC
#undef FS
    return n;
}

/* ---------------------------------------------------------------- resolve */

/* Rank 0: open the input files (headers only) and take the shape from them. */
static int attn_resolve_files(attn_job *J, drv *d)
{
    struct attn_cfg *c = &J->c;
    if (d->rank != 0 || !c->fin[T_Q])
        return 0;
    int64_t shp[NIN][4];
    static const char *const defaults[NIN][3] = {{"q", NULL}, {"k", NULL}, {"v", NULL}, {"do", "dout", NULL}};
    for (int i = 0; i < NIN; i++) {
        if (!c->fin[i])
            continue;
        if (attn_in_open(d, &J->in[i], in_name[i], J->fpath[i], J->fname[i], defaults[i], c->layout))
            return d->code;
        memcpy(shp[i], J->in[i].shp, sizeof shp[i]);
        for (int k = 0; k < 4; k++)
            if (shp[i][k] < 1)
                return drv_fail(d, DRV_BADINPUT, "%s %s: every dimension must be >= 1 (dimension %d is %lld)",
                                in_name[i], c->fin[i], k, (long long)shp[i][k]);
    }
    /* Tensors in PyTorch's (B, H, N, d) read as (B, N, H, d) only show as a
     * mismatch: the messages then say which option reads them. */
    const char *hint = c->layout == ATTN_BSHD && J->in[T_Q].ndim == 4
                           ? "; if your tensors are (B, H, N, d), use --layout bhsd" : "";
    /* q fixes B, N, H, d; v fixes Hkv; k and dout must match.  One row per
     * option: its name, the option's value, whether it was given, the files'
     * value (checked in this order: the first that differs is named). */
#define FILE_SHAPE(X)                                   \
    X("batch", c->batch, c->seen_batch, shp[T_Q][0])    \
    X("seq", c->seq, c->seen_seq, shp[T_Q][1])          \
    X("heads", c->heads, c->seen_heads, shp[T_Q][2])    \
    X("kv-heads", c->kv_heads, c->seen_kv, shp[T_V][2]) \
    X("head-dim", c->head_dim, c->seen_dim, shp[T_Q][3])
#define X(name, opt, seen, want)                                                                              \
    if ((seen) && (opt) != (want))                                                                            \
        return drv_fail(d, DRV_BADINPUT, "--%s %lld disagrees with the input files (%lld)%s", name, (long long)(opt), \
                        (long long)(want), hint);                                                             \
    (opt) = (want);
    FILE_SHAPE(X)
#undef X
#undef FILE_SHAPE
    for (int i = T_K; i < NIN; i++) {
        if (!c->fin[i] || i == T_V)
            continue;
        int64_t heads = i == T_DO ? c->heads : c->kv_heads;
        const int64_t w[4] = {c->batch, c->seq, heads, c->head_dim};
        if (shp[i][0] != c->batch || shp[i][1] != c->seq || shp[i][2] != heads || shp[i][3] != c->head_dim)
            return attn_in_mismatch(d, &J->in[i], in_name[i], w, 0, hint);
    }
    const int64_t wv[4] = {c->batch, c->seq, shp[T_V][2], c->head_dim};
    if (shp[T_V][0] != c->batch || shp[T_V][1] != c->seq || shp[T_V][3] != c->head_dim)
        return attn_in_mismatch(d, &J->in[T_V], "--v", wv, 1, hint);
    if (!c->seen_dtype)
        c->dtype = J->in[T_Q].elem == ULY_ELEM_F64 ? ULY_F64 : ULY_F32;
    if (c->seen_out_type && c->out_type == ATTN_OUT_INPUT && J->in[T_Q].elem == ULY_ELEM_BF16)
        for (int i = 0; i < NOUT; i++)
            if (c->fout[i] && !attn_out_is_st(c->fout[i]))
                return drv_fail(d, DRV_BADINPUT, "--out-dtype input: --q %s is bf16, which the .npy output %s cannot "
                                "hold (name it F.safetensors, or give --out-dtype f32)", c->fin[T_Q], c->fout[i]);
    return 0;
}

/* Rank 0: the document offsets (B, D+1) of --doc-lens or --docs, checked
 * against the resolved batch and sequence length. */
static int attn_resolve_docs(attn_job *J, drv *d)
{
    struct attn_cfg *c = &J->c;
    if (d->rank == 0 && c->layout == ATTN_THD) {
        /* THD: one row of T tokens, the sequences its documents */
        if (attn_cu_seqlens(d, c->cu_seqlens ? J->fpath[NIN] : NULL, J->fname[NIN], &J->in[T_Q], &J->docs, &J->ndocs))
            return d->code;
        if (!J->docs)
            return drv_fail(d, DRV_BADINPUT, "--layout thd needs --cu-seqlens F: the --q file %s has no tensor "
                            "cu_seqlens", J->fpath[T_Q]);
        uly_attn_desc t = {.batch = 1, .seq = c->seq, .heads = 1, .kv_heads = 1, .head_dim = 1,
                           .doc_offsets = J->docs, .docs = J->ndocs};
        if (uly_attn_desc_check(&t))
            return drv_fail(d, DRV_BADINPUT, "%s %s: %s", c->cu_seqlens ? "--cu-seqlens" : "--q",
                            c->cu_seqlens ? c->cu_seqlens : c->fin[T_Q], uly_last_error());
        return 0;
    }
    if (d->rank != 0 || (!c->doc_lens && !c->docs))
        return 0;
    if (c->doc_lens) {
        char msg[512];
        if (doc_lens_offsets(c->doc_lens, c->batch, c->seq, &J->docs, &J->ndocs, msg, sizeof msg))
            return drv_fail(d, DRV_BADINPUT, "%s", msg);
        return 0;
    }
    int nd;
    int64_t shp[ULY_NPY_MAXDIM], *x = NULL;
    size_t cnt;
    int st = uly_npy_read_i64(c->docs, &nd, shp, &cnt, &x);
    if (st)
        return drv_fail(d, st == ULY_ENOMEM ? DRV_RUNTIME : DRV_BADINPUT, "--docs %s",
                        uly_last_error());
    int64_t D = nd == 2 ? shp[1] - 1 : nd == 1 ? shp[0] - 1 : -1;
    if (!((nd == 2 && shp[0] == c->batch) || nd == 1) || D < 1) {
        char got[64] = "";
        for (int i = 0; i < nd && i < 3; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? ", " : "", (long long)shp[i]);
        uly_free(x);
        return drv_fail(d, DRV_BADINPUT, "--docs %s: expected int64 offsets of shape (B, D+1) = (%lld, D+1) or (D+1,) "
                        "with D >= 1 documents, got (%s%s)", c->docs, (long long)c->batch, got, nd > 3 ? ", ..." : "");
    }
    J->docs = drv_alloc_n(d, (size_t)c->batch * (size_t)(D + 1), sizeof *J->docs, "the document offsets");
    if (J->docs)
        for (int64_t b = 0; b < c->batch; b++)
            memcpy(J->docs + b * (D + 1), x + (nd == 2 ? b * (D + 1) : 0), (size_t)(D + 1) * sizeof *x);
    uly_free(x);
    if (!J->docs)
        return d->code;
    J->ndocs = D;
    uly_attn_desc t = {.batch = c->batch, .seq = c->seq, .heads = 1, .kv_heads = 1, .head_dim = 1,
                       .doc_offsets = J->docs, .docs = D};
    if ((st = uly_attn_desc_check(&t)))
        return drv_fail(d, DRV_BADINPUT, "--docs %s: %s", c->docs, uly_last_error());
    return 0;
}

static int attn_resolve(attn_job *J, drv *d)
{
    if (attn_resolve_files(J, d))
        return d->code;
    return attn_resolve_docs(J, d);
}

/* Collective: rank 0's resolved shape to everyone, then the description. */
static int attn_share_shape(attn_job *J, drv *d)
{
    struct attn_cfg *c = &J->c;
    /* what rank 0 resolved: the field, its name, its type */
#define SHAPE(X)                                                                                          \
    X(c->batch, batch, int64_t) X(c->seq, seq, int64_t) X(c->heads, heads, int64_t)                       \
    X(c->kv_heads, kv_heads, int64_t) X(c->head_dim, head_dim, int64_t) X(c->dtype, dtype, int)           \
    X(J->ndocs, ndocs, int64_t)
    enum {
#define X(field, name, type) SHAPE_##name,
        SHAPE(X)
#undef X
        SHAPE_N
    };
    int64_t v[SHAPE_N] = {
#define X(field, name, type) [SHAPE_##name] = (int64_t)(field),
        SHAPE(X)
#undef X
    };
    if (d->size > 1 && drv_mpi(d, MPI_Bcast(v, SHAPE_N, MPI_INT64_T, 0, d->comm), "MPI_Bcast (shape)"))
        return DRV_RUNTIME;
#define X(field, name, type) (field) = (type)v[SHAPE_##name];
    SHAPE(X)
#undef X
#undef SHAPE
    if (J->ndocs > 0) {
        const size_t nd = (size_t)c->batch * (size_t)(J->ndocs + 1);
        if (!J->docs)
            J->docs = drv_alloc_n(d, nd, sizeof *J->docs, "the document offsets");
        if (drv_sync(d)) /* a rank that cannot hold the offsets stops everyone before the broadcast */
            return d->code ? d->code : DRV_RUNTIME;
        if (d->size > 1 && drv_mpi(d, MPI_Bcast(J->docs, (int)nd, MPI_INT64_T, 0, d->comm), "MPI_Bcast (documents)"))
            return DRV_RUNTIME;
    }
    uly_attn_desc *a = &J->a;
    memset(a, 0, sizeof *a);
    a->batch = c->batch; a->seq = c->seq; a->heads = c->heads; a->kv_heads = c->kv_heads;
    a->head_dim = c->head_dim; a->causal = c->causal; a->window = c->window; a->dtype = (uly_dtype)c->dtype;
    a->doc_offsets = J->ndocs > 0 ? J->docs : NULL;
    a->docs = J->ndocs;
    a->scale = c->scale;
    int st = uly_attn_desc_check(a);
    if (st) {
        drv_lib(d, st, DRV_BADINPUT, NULL); /* identical on every rank */
    } else if (c->method == ULY_METHOD_ULYSSES && d->size > a->heads) {
        /* ranks without heads would idle: refuse, as ulysses-sim and explain do */
        drv_fail(d, DRV_BADINPUT,
                 "ulysses: SP degree %d exceeds the %lld attention heads (use --method usp: Ulysses in groups of "
                 "at most %lld ranks, a ring across the groups)", d->size, (long long)a->heads, (long long)a->heads);
    } else {
        int U = c->method == ULY_METHOD_USP ? (int)c->udeg : 0;
        if (c->method == ULY_METHOD_USP && !c->seen_udeg) {
            U = uly_plan_usp_degree(a->heads, d->size);
            drv_say(d, "usp: ulysses degree %d chosen (the largest divisor of %d ranks that is <= %lld heads), "
                    "ring degree %d", U, d->size, (long long)a->heads, d->size / U);
        }
        if ((st = uly_sp_plan_init(&J->plan, c->method, d->size, U, c->placement)))
            drv_lib(d, st, DRV_BADINPUT, c->method == ULY_METHOD_USP ? "--ulysses-degree" : "--method");
    }
    return d->code;
}

/* ------------------------------------------------------------------- plan */

/* Bytes of a product of sizes, saturating (the description check has
 * already refused overflowing tensors; sums of them may still be large). */
static uint64_t bsum(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* The options of the context (uly_sp_create), from the agreed options and
 * the plan: the create and the preflight use the same. */
static void attn_sp_opts(const attn_job *J, uly_sp_opts *so)
{
    const struct attn_cfg *c = &J->c;
    memset(so, 0, sizeof *so);
    uly_dist_opts *o = &so->dist;
    o->kernel.block_q = c->block_q;
    o->kernel.block_k = c->block_k;
    o->kernel.threads = (int)c->threads;
    o->max_count = (size_t)c->max_count;
    o->a2a_mode = c->a2a; /* a2a_mode_names follows the ULY_A2A_* order */
    o->overlap = c->overlap;
    o->overlap_chunks = (int)c->overlap_chunks;
    so->method = J->plan.method;
    so->ulysses_degree = J->plan.method == ULY_METHOD_USP ? J->plan.U : 0;
    so->placement = J->plan.placement;
    so->bf16_partials = c->bf16;
}

/* Memory this rank will allocate, and where it goes (see doc/reliability.md):
 * the library's context (drv_lib_memory: what uly_sp_create allocates, from
 * the library's own table), and the driver's own: its shards, the kernel
 * workspaces, rank 0's input staging, gathered results and --check's
 * single-process run and fp64 reference.  *mapped: the other ranks' window
 * segments this rank maps (address space, drv_preflight). */
static uint64_t attn_need(attn_job *J, int node_ranks, uint64_t *mapped, char *why, size_t len)
{
    const uly_attn_desc *a = &J->a;
    const struct attn_cfg *c = &J->c;
    const uint64_t es = J->es, B = (uint64_t)a->batch, N = (uint64_t)a->seq, d = (uint64_t)a->head_dim;
    const uint64_t H = (uint64_t)a->heads;
    const int bwd = c->backward;
    uint64_t shards = (uint64_t)(J->nq * 2 + J->nkv * 2) * es;
    if (bwd)
        shards = bsum(shards, (uint64_t)(J->nq * 2 + J->nkv * 2) * es);
    uly_sp_opts so;
    attn_sp_opts(J, &so);
    /* options the create refuses count nothing here: it says why */
    if (drv_lib_memory(a, &so, J->P, J->rank, node_ranks == J->P, &J->lib))
        memset(&J->lib, 0, sizeof J->lib);
    const uint64_t lib = bsum(J->lib.heap, J->lib.window);
    *mapped = J->lib.mapped;
    uly_kernel_opts ko;
    memset(&ko, 0, sizeof ko);
    ko.block_q = c->block_q;
    ko.block_k = c->block_k;
    ko.threads = drv_threads((int)c->threads);
    size_t wsb = 0; /* the kernels' own figure (an invalid shape is refused later, by the kernel) */
    const uint64_t ws = uly_attn_workspace(a, &ko, &wsb) ? 0 : (uint64_t)wsb;
    uint64_t r0 = 0;
    if (J->rank == 0) {
        const uint64_t NQ = J->NQ, NKV = J->NKV, NL = J->NL;
        if (c->fin[T_Q]) /* staging of one rank's shard, file dtype and converted */
            r0 = bsum(r0, 2 * ((B * (N / (uint64_t)J->P + 2) * H * d) * 8));
        if (need_full(J))
            r0 = bsum(r0, (NQ + NL + (bwd ? NQ + 2 * NKV : 0)) * es);
        if (c->check) {
            uint64_t ins = (2 * NQ + 2 * NKV) * es;               /* full inputs */
            uint64_t single = (NQ + NL + (bwd ? NQ + 2 * NKV : 0)) * es;
            uint64_t ref = (NQ + NL + (bwd ? NQ + 2 * NKV : 0)) * 8 + (2 * NQ + 2 * NKV) * 8;
            r0 = bsum(r0, bsum(ins, bsum(single, bsum(ref, ws + B * H * N * es))));
        }
    }
    uint64_t total = bsum(bsum(shards, lib), bsum(ws, r0));
    char s1[32], s2[32], s3[32], s4[32], s5[96] = "";
    if (*mapped)
        snprintf(s5, sizeof s5, ", the shared-memory window's %d other segment%s %s (mapped)",
                 J->lib.mapped_segments, J->lib.mapped_segments > 1 ? "s" : "", drv_bytes(s4, sizeof s4, *mapped));
    snprintf(why, len, "shards %s, the library's buffers %s%s, kernel workspace %s%s%s",
             drv_bytes(s1, sizeof s1, shards), drv_bytes(s2, sizeof s2, lib), s5, drv_bytes(s3, sizeof s3, ws),
             r0 ? ", rank 0 inputs/outputs/--check " : "", r0 ? drv_bytes(s4, sizeof s4, r0) : "");
    return total;
}

static int attn_plan(attn_job *J, drv *d)
{
    const uly_attn_desc *a = &J->a;
    J->rank = d->rank;
    J->P = d->size;
    J->es = uly_dtype_size(a->dtype);
    J->ns = uly_plan_tokens(&J->plan, a->seq, d->rank, J->tb, J->tc);
    J->n = J->tc[0] + (J->ns > 1 ? J->tc[1] : 0);
    J->lns = uly_plan_lse_layout(&J->plan, a->seq, a->heads, d->rank, &J->h0, &J->hn, J->lb, J->lc);
    J->lrows = J->lc[0] + (J->lns > 1 ? J->lc[1] : 0);
    J->nq = (size_t)(a->batch * J->n * a->heads * a->head_dim);
    J->nkv = (size_t)(a->batch * J->n * a->kv_heads * a->head_dim);
    J->NQ = (size_t)(a->batch * a->seq * a->heads * a->head_dim);
    J->NKV = (size_t)(a->batch * a->seq * a->kv_heads * a->head_dim);
    J->NL = (size_t)(a->batch * a->heads * a->seq);
    char why[384];
    int node_ranks = 1;
    if (d->node != MPI_COMM_NULL && MPI_Comm_size(d->node, &node_ranks) != MPI_SUCCESS)
        node_ranks = 1;
    uint64_t mapped = 0;
    uint64_t need = attn_need(J, node_ranks, &mapped, why, sizeof why);
    if (drv_preflight(d, need, mapped, why, J->c.force))
        return d->code;
    if (d->rank == 0) {
        /* every output against every input and each other, before any computing */
        static const char *const what[NFILE] = {"--out", "--dq", "--dk", "--dv", "--overlap-trace", "--lse"};
        for (int i = 0; i < NFILE; i++) {
            J->out[i].path = i == W_TRACE ? J->c.trace : i == W_LSE ? J->c.lse : J->c.fout[i];
            J->out[i].what = what[i];
        }
        drv_in ins[NIN + 2];
        for (int i = 0; i < NIN; i++)
            ins[i] = (drv_in){J->c.fin[i] ? J->fpath[i] : NULL, in_name[i], NULL};
        ins[NIN] = (drv_in){J->c.docs, "--docs", NULL};
        ins[NIN + 1] = (drv_in){J->c.cu_seqlens ? J->fpath[NIN] : NULL, "--cu-seqlens", NULL};
        return drv_out_prepare(d, J->out, NFILE, ins, NIN + 2);
    }
    return 0;
}

/* --------------------------------------------------------------- allocate */

static int attn_alloc(attn_job *J, drv *d)
{
    const struct attn_cfg *c = &J->c;
    const size_t es = J->es;
    const int nin = c->backward ? NIN : T_DO;
    for (int i = 0; i < nin && !d->code; i++)
        J->x[i] = drv_alloc_n(d, i == T_K || i == T_V ? J->nkv : J->nq, es, "an input shard");
    const size_t rn[NRES] = {J->nq, 0, J->nq, J->nkv, J->nkv};
    for (int i = 0; i < NRES && !d->code; i++)
        if (rn[i] && (i == R_O || c->backward))
            J->res[i] = drv_alloc_n(d, rn[i], es, "a result shard");
    if (!d->code)
        J->times = drv_alloc_n(d, (size_t)c->repeat * NPH, sizeof(double), "the phase times");
    if (!d->code)
        J->otimes = drv_alloc_n(d, (size_t)c->repeat * NOV, sizeof(double), "the overlap times");
    if (c->trace && !d->code) { /* per overlapped call: every wait and send, kernel calls, starts, completions */
        const size_t chunks = ULY_OVERLAP_MAX_CHUNKS, P = (size_t)d->size;
        J->cap_ev = (size_t)c->repeat * 2 * (8 * P * chunks + 3 * chunks + 8);
        J->ev = drv_alloc_n(d, J->cap_ev, sizeof *J->ev, "the overlap trace");
        if (J->ev)
            J->ev_rep = drv_alloc_n(d, J->cap_ev, sizeof *J->ev_rep, "the overlap trace");
    }
    if (d->rank == 0 && need_full(J)) {
        const size_t fn[NRES] = {J->NQ, J->NL, J->NQ, J->NKV, J->NKV};
        for (int i = 0; i < NRES && !d->code; i++)
            if (i <= R_LSE || c->backward)
                J->full[i] = drv_alloc_n(d, fn[i], es, "the gathered results");
        if (!d->code)
            J->lstage = drv_alloc_n(d, J->NL, es, "the gathered results");
    }
    if (d->rank == 0 && c->check)
        for (int i = 0; i < nin && !d->code; i++)
            J->full_in[i] = drv_alloc_n(d, i == T_K || i == T_V ? J->NKV : J->NQ, es, "the whole inputs (--check)");
    return d->code;
}

static int attn_create(attn_job *J, drv *d)
{
    const struct attn_cfg *c = &J->c;
    uly_sp_opts so;
    attn_sp_opts(J, &so);
    J->dopt = so.dist;
    drv_sp_create(d, &J->a, &so, &J->lib, &J->S);
    J->D = J->S && J->plan.method == ULY_METHOD_ULYSSES ? uly_sp_dist(J->S) : NULL;
    J->chunks = J->D ? uly_dist_overlap_chunks(J->D) : 1; /* the same on every rank */
    if (J->D && uly_dist_a2a_note(J->D)) /* a mode the system does not allow: never silent */
        drv_say(d, "note: %s", uly_dist_a2a_note(J->D));
    J->ovl_pair = c->overlap != ULY_OVERLAP_OFF && J->chunks >= 2;
    return d->code;
}

/* ------------------------------------------------------------ point to point */

enum { CHUNK = 1 << 30, TAG_LOAD = 11, TAG_GATHER = 12 };

static int send_bytes(drv *d, const void *buf, size_t bytes, int to, int tag)
{
    for (size_t off = 0; off < bytes; off += CHUNK) {
        int cnt = (int)(bytes - off < CHUNK ? bytes - off : CHUNK);
        if (drv_mpi(d, MPI_Send((const char *)buf + off, cnt, MPI_BYTE, to, tag, d->comm), "MPI_Send"))
            return DRV_RUNTIME;
    }
    return 0;
}

static int recv_bytes(drv *d, void *buf, size_t bytes, int from, int tag)
{
    for (size_t off = 0; off < bytes; off += CHUNK) {
        int cnt = (int)(bytes - off < CHUNK ? bytes - off : CHUNK);
        if (drv_mpi(d, MPI_Recv((char *)buf + off, cnt, MPI_BYTE, from, tag, d->comm, MPI_STATUS_IGNORE), "MPI_Recv"))
            return DRV_RUNTIME;
    }
    return 0;
}

/* ------------------------------------------------------------------- load */

/* Convert n elements of file type ft to t, checking that they are finite
 * (unless allowed) and representable; index0 is the element index in the
 * file of src[0] for messages.  Returns 0 or records a failure. */
static int convert_in(drv *d, const attn_job *J, int which, const void *src, uly_dtype ft, void *dst, uly_dtype t,
                      size_t n, size_t index0)
{
    for (size_t e = 0; e < n; e++) {
        double v = ft == ULY_F32 ? ((const float *)src)[e] : ((const double *)src)[e];
        if (!isfinite(v) && !J->c.allow_nonfinite)
            return drv_fail(d, DRV_BADINPUT, "%s %s: element %zu is %s (use --allow-nonfinite to run anyway)",
                            in_name[which], J->c.fin[which], index0 + e, isnan(v) ? "NaN" : "Inf");
        if (t == ULY_F32) {
            if (isfinite(v) && fabs(v) > FLT_MAX)
                return drv_fail(d, DRV_BADINPUT, "%s %s: element %zu is %.17g, beyond the float32 range "
                                "(largest %g); use --dtype f64", in_name[which], J->c.fin[which], index0 + e, v,
                                (double)FLT_MAX);
            ((float *)dst)[e] = (float)v;
        } else {
            ((double *)dst)[e] = v;
        }
    }
    return 0;
}

/* Rank 0 streams input `which` from its file, one rank's shard at a time,
 * and sends every rank its shard (and keeps the whole tensor for --check).
 * A failure on rank 0 is recorded and the sends go on, so that the protocol
 * stays the same on every rank; the step's agreement then stops everyone. */
static int load_file(attn_job *J, drv *d, int which, void *stage, void *conv)
{
    const uly_attn_desc *a = &J->a;
    const int64_t row = heads_of_input(J, which) * a->head_dim;
    const uly_dtype ft = ULY_F64, t = a->dtype; /* every file type reads as double, exactly */
    const size_t fes = uly_dtype_size(ft);
    for (int r = 0; r < d->size; r++) {
        int64_t tb[2], tc[2];
        const int ns = uly_plan_tokens(&J->plan, a->seq, r, tb, tc);
        const size_t per_b = (size_t)((tc[0] + (ns > 1 ? tc[1] : 0)) * row);
        void *dst = r == 0 ? J->x[which] : conv;
        for (int64_t b = 0; b < a->batch; b++) {
            size_t r0 = 0; /* elements of the rank's rows of batch row b done */
            for (int sg = 0; sg < ns; sg++) {
                const size_t first = (size_t)((b * a->seq + tb[sg]) * row), cnt = (size_t)(tc[sg] * row);
                char *sp = (char *)stage + ((size_t)b * per_b + r0) * fes;
                char *dp = (char *)dst + ((size_t)b * per_b + r0) * J->es;
                r0 += cnt;
                if (!d->code)
                    attn_in_read(d, &J->in[which], in_name[which], b, tb[sg], tc[sg], (double *)sp);
                if (!d->code)
                    convert_in(d, J, which, sp, ft, dp, t, cnt, first);
                if (!d->code && J->full_in[which])
                    memcpy((char *)J->full_in[which] + first * J->es, dp, cnt * J->es);
            }
        }
        if (r > 0 && send_bytes(d, conv, (size_t)a->batch * per_b * J->es, r, TAG_LOAD))
            return DRV_RUNTIME;
    }
    return 0;
}

static double max_abs(const void *x, uly_dtype t, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double v = fabs(t == ULY_F32 ? ((const float *)x)[i] : ((const double *)x)[i]);
        if (v > m || v != v)
            m = v;
    }
    return m;
}

static int attn_load(attn_job *J, drv *d)
{
    const uly_attn_desc *a = &J->a;
    const struct attn_cfg *c = &J->c;
    const int nin = c->backward ? NIN : T_DO;
    void *stage = NULL, *conv = NULL;
    int64_t nmax = 0; /* the most tokens a rank holds */
    for (int r = 0; r < d->size; r++) {
        int64_t tb[2], tc[2];
        int ns = uly_plan_tokens(&J->plan, a->seq, r, tb, tc);
        if (tc[0] + (ns > 1 ? tc[1] : 0) > nmax)
            nmax = tc[0] + (ns > 1 ? tc[1] : 0);
    }
    if (d->rank == 0 && c->fin[T_Q]) {
        size_t maxshard = (size_t)(a->batch * (nmax ? nmax : 1) * a->heads * a->head_dim);
        stage = drv_alloc_n(d, maxshard, 8, "staging of the input files");
        conv = stage ? drv_alloc_n(d, maxshard, 8, "staging of the input files") : NULL;
        /* no early return: the other ranks expect the shards */
    }
    for (int i = 0; i < nin; i++) {
        const int64_t Hx = heads_of_input(J, i);
        const size_t cnt = i == T_K || i == T_V ? J->nkv : J->nq;
        if (c->fin[i]) {
            if (d->rank == 0) {
                if (stage && conv) {
                    if (load_file(J, d, i, stage, conv))
                        break;
                } else {
                    /* rank 0 could not stage: send zeros, everyone fails at the sync */
                    for (int r = 1; r < d->size; r++) {
                        int64_t tb[2], tc[2];
                        int ns = uly_plan_tokens(&J->plan, a->seq, r, tb, tc);
                        size_t bytes = (size_t)(a->batch * (tc[0] + (ns > 1 ? tc[1] : 0)) * Hx * a->head_dim) * J->es;
                        for (size_t off = 0; off < bytes; off += J->nq * J->es) {
                            size_t k = bytes - off < J->nq * J->es ? bytes - off : J->nq * J->es;
                            memset(J->x[T_Q], 0, k);
                            if (send_bytes(d, J->x[T_Q], k, r, TAG_LOAD))
                                break;
                        }
                    }
                }
            } else if (recv_bytes(d, J->x[i], cnt * J->es, 0, TAG_LOAD)) {
                break;
            }
        } else {
            /* the rank's rows, segment by segment, from the P-independent values */
            for (int64_t b = 0; b < a->batch; b++) {
                int64_t r0 = 0;
                for (int sg = 0; sg < J->ns; sg++) {
                    fill_shard((char *)J->x[i] + (size_t)((b * J->n + r0) * Hx * a->head_dim) * J->es, a->dtype,
                               (uint64_t)c->seed, i, 1, a->seq, b * a->seq + J->tb[sg], J->tc[sg], Hx, a->head_dim);
                    r0 += J->tc[sg];
                }
            }
            if (J->full_in[i])
                fill_shard(J->full_in[i], a->dtype, (uint64_t)c->seed, i, a->batch, a->seq, 0, a->seq, Hx,
                           a->head_dim);
        }
        J->inmax[i] = max_abs(J->x[i], a->dtype, cnt);
    }
    drv_free(stage);
    drv_free(conv);
    return d->code;
}

/* -------------------------------------------------------------------- run */

/* An account as NACC doubles (AC_*). */
static void acc_flat(const uly_ovl_account *a, double *o)
{
    o[AC_WALL] = a->wall; o[AC_WALL_CPU] = a->wall_cpu; o[AC_KERNEL] = a->kernel; o[AC_KERNEL_CPU] = a->kernel_cpu;
    o[AC_WAIT] = a->wait; o[AC_WAIT_CPU] = a->wait_cpu; o[AC_WAIT_READY] = a->wait_ready;
    o[AC_WAIT_FIRST] = a->wait_first; o[AC_WAIT_MAX] = a->wait_max; o[AC_SEND] = a->send;
    o[AC_SEND_CPU] = a->send_cpu; o[AC_TEST] = a->test; o[AC_TEST_CPU] = a->test_cpu;
    o[AC_WAITS] = a->waits; o[AC_WAITS_READY] = a->waits_ready;
    o[AC_KERNEL_END] = a->kernel_end; o[AC_END] = a->end;
    o[AC_COPY] = a->copy; o[AC_COPY_CPU] = a->copy_cpu;
}

/* One forward (+ backward), overlapped or not; records its times when it >= 0. */
static int run_once(attn_job *J, drv *d, int64_t it, int on)
{
    const struct attn_cfg *c = &J->c;
    if (J->ovl_pair && uly_dist_set_overlap(J->D, on ? c->overlap : ULY_OVERLAP_OFF))
        return ULY_EINVAL;
    const int tracing = J->ev && J->ovl_pair && on && it >= 0;
    if (tracing)
        uly_dist_trace(J->D, J->ev + J->nev, J->cap_ev - J->nev);
    if (d->size > 1 && drv_mpi(d, MPI_Barrier(d->comm), "MPI_Barrier"))
        return -1;
    int st = uly_sp_fwd(J->S, J->x[T_Q], J->x[T_K], J->x[T_V], J->res[R_O]);
    if (!st && c->backward)
        st = uly_sp_bwd(J->S, J->x[T_DO], J->res[R_DQ], J->res[R_DK], J->res[R_DV]);
    if (tracing) {
        size_t n = uly_dist_trace_count(J->D);
        n = n < J->cap_ev - J->nev ? n : J->cap_ev - J->nev;
        for (size_t i = 0; i < n; i++)
            J->ev_rep[J->nev + i] = it;
        J->nev += n;
        uly_dist_trace(J->D, NULL, 0);
    }
    if (st || it < 0)
        return st;
    double *row = J->times + it * NPH;
    if (!J->D) { /* the other methods: their own phases */
        uly_sp_times t;
        uly_sp_times_get(J->S, &t);
        row[0] = t.fwd_in; row[1] = t.fwd_attn; row[2] = t.fwd_wait; row[3] = t.fwd_out;
        row[4] = t.bwd_in; row[5] = t.bwd_attn; row[6] = t.bwd_wait; row[7] = t.bwd_out;
        return st;
    }
    uly_dist_times t;
    uly_dist_times_get(J->D, &t);
    if (J->ovl_pair) {
        double *o = J->otimes + it * NOV + (on ? 0 : 2 * NACC);
        acc_flat(&t.fwd_acc, o);
        if (c->backward)
            acc_flat(&t.bwd_acc, o + NACC);
        else
            memset(o + NACC, 0, NACC * sizeof *o);
        if (!on) /* the plain reference of --overlap */
            return st;
    }
    /* with overlap, "a2a out" holds the rest of the wall: the output
     * all-to-alls and the MPI progress inside the kernel */
    row[0] = t.fwd_a2a_in; row[1] = t.fwd_attn; row[2] = 0; row[3] = t.fwd_wall - t.fwd_a2a_in - t.fwd_attn;
    row[4] = t.bwd_a2a_in; row[5] = t.bwd_attn; row[6] = 0; row[7] = t.bwd_wall - t.bwd_a2a_in - t.bwd_attn;
    if (t.fwd_chunks < 2) { /* the plain path: its own three phases */
        row[3] = t.fwd_a2a_out;
        row[7] = t.bwd_a2a_out;
    }
    return st;
}

static int attn_run(attn_job *J, drv *d)
{
    const struct attn_cfg *c = &J->c;
    int st = 0;
    for (int64_t it = -c->warmup; it < c->repeat && !st; it++) {
        if (it == 0)
            uly_sp_reset_volume(J->S);
        /* --overlap: the overlapped and the plain call interleaved, the
         * order alternating between repetitions */
        for (int k = 0; k < 1 + J->ovl_pair && !st; k++)
            st = run_once(J, d, it, J->ovl_pair ? (k == 0) == ((it & 1) == 0) : 1);
        if (st < 0)
            return DRV_RUNTIME;
    }
    drv_lib(d, st, 0, NULL);
    return d->code;
}

/* --overlap: one repetition's figures (OF_*) of phase f (0 forward, 1
 * backward, 2 both) from every rank's accounts all[r * stride + .]. */
static void ovl_rep_figs(const double *all, int P, size_t stride, int f, double *v)
{
    double sum_exp = 0, sum_comm = 0, sum_exp_net = 0, sum_comm_net = 0, sum_exp_cpu = 0, sum_comm_cpu = 0;
    double last[2][2] = {{0, 0}, {0, 0}}; /* overlapped, plain; forward, backward: the last kernel's end */
    for (int r = 0; r < P; r++)
        for (int i = 0; i < 2; i++)
            for (int ph = 0; ph < 2; ph++)
                last[i][ph] = fmax(last[i][ph], all[(size_t)r * stride + (size_t)(2 * i + ph) * NACC + AC_KERNEL_END]);
    for (int k = 0; k < NOF; k++)
        v[k] = 0;
    v[OF_WORST] = v[OF_WORST_NET] = INFINITY;
    for (int r = 0; r < P; r++) {
        /* imbalance: after its last kernel, the time until the last rank's
         * last kernel ended (at most the rest of the call) */
        double imb[2] = {0, 0};
        for (int i = 0; i < 2; i++)
            for (int ph = 0; ph < 2; ph++)
                if (f == 2 || f == ph) {
                    const double *y = all + (size_t)r * stride + (size_t)(2 * i + ph) * NACC;
                    imb[i] += fmax(0, fmin(last[i][ph] - y[AC_KERNEL_END], y[AC_END] - y[AC_KERNEL_END]));
                }
        double x[2][NACC] = {{0}}; /* overlapped, plain: phase f's account (sums for f = 2) */
        for (int i = 0; i < 2; i++)
            for (int ph = 0; ph < 2; ph++)
                if (f == 2 || f == ph)
                    for (int k = 0; k < NACC; k++) {
                        const double y = all[(size_t)r * stride + (size_t)(2 * i + ph) * NACC + (size_t)k];
                        x[i][k] = k == AC_WAIT_MAX ? fmax(x[i][k], y) : x[i][k] + y;
                    }
        const double *o = x[0], *p = x[1];
        const double hooks = o[AC_WAIT] + o[AC_SEND] + o[AC_TEST];
        const double hooks_cpu = o[AC_WAIT_CPU] + o[AC_SEND_CPU] + o[AC_TEST_CPU];
        const double exposed = o[AC_WALL] - (o[AC_KERNEL] - hooks);
        const double comm = p[AC_WALL] - p[AC_KERNEL];
        v[OF_WALL] = fmax(v[OF_WALL], o[AC_WALL]);
        v[OF_ATTN] = fmax(v[OF_ATTN], p[AC_KERNEL]);
        v[OF_COMM] += comm / P;
        v[OF_EXPOSED] += exposed / P;
        v[OF_OUTSIDE] += (o[AC_WALL] - o[AC_KERNEL]) / P;
        v[OF_WAIT] += o[AC_WAIT] / P;
        v[OF_WAIT_READY] += o[AC_WAIT_READY] / P;
        v[OF_WAIT_FIRST] += o[AC_WAIT_FIRST] / P;
        v[OF_WAIT_MAX] = fmax(v[OF_WAIT_MAX], o[AC_WAIT_MAX]);
        v[OF_SEND] += o[AC_SEND] / P;
        v[OF_TEST] += o[AC_TEST] / P;
        v[OF_EXPOSED_CPU] += (o[AC_WALL_CPU] - (o[AC_KERNEL_CPU] - hooks_cpu)) / P;
        v[OF_COMM_CPU] += (p[AC_WALL_CPU] - p[AC_KERNEL_CPU]) / P;
        v[OF_COPY_CPU] += o[AC_COPY_CPU] / P;
        sum_exp_cpu += o[AC_WALL_CPU] - (o[AC_KERNEL_CPU] - hooks_cpu);
        sum_comm_cpu += p[AC_WALL_CPU] - p[AC_KERNEL_CPU];
        v[OF_WAITS] += o[AC_WAITS] / P;
        v[OF_WAITS_READY] += o[AC_WAITS_READY] / P;
        v[OF_WORST] = fmin(v[OF_WORST], comm > 0 ? 1 - exposed / comm : 0);
        v[OF_IMB_EXPOSED] += imb[0] / P;
        v[OF_IMB_COMM] += imb[1] / P;
        v[OF_WORST_NET] = fmin(v[OF_WORST_NET], comm - imb[1] > 0 ? 1 - (exposed - imb[0]) / (comm - imb[1]) : 0);
        sum_exp += exposed;
        sum_comm += comm;
        sum_exp_net += exposed - imb[0];
        sum_comm_net += comm - imb[1];
    }
    v[OF_HIDDEN] = sum_comm > 0 ? 1 - sum_exp / sum_comm : 0;
    v[OF_HIDDEN_NET] = sum_comm_net > 0 ? 1 - sum_exp_net / sum_comm_net : 0;
    v[OF_HIDDEN_CPU] = sum_comm_cpu > 0 ? 1 - sum_exp_cpu / sum_comm_cpu : 0;
}

/* --overlap-trace: every rank's events to rank 0, one CSV line each. */
enum { EV_REP, EV_FWD, EV_CHUNK, EV_KIND, EV_WHICH, EV_PEER, EV_READY, EV_START, EV_WALL, EV_CPU, NEV };
static int attn_trace(attn_job *J, drv *d)
{
    if (!J->ev)
        return 0;
    static const char *const kind[] = {"wait", "send", "kernel", "start", "finish", "agree"};
    double *mine = drv_alloc_n(d, J->nev * NEV + 1, sizeof(double), "the overlap trace");
    int *cnt = NULL, *dsp = NULL;
    double *all = NULL;
    int n = (int)(J->nev * NEV), total = 0;
    if (d->rank == 0 && mine) {
        cnt = drv_alloc_n(d, (size_t)d->size, sizeof *cnt, "the overlap trace");
        dsp = cnt ? drv_alloc_n(d, (size_t)d->size, sizeof *dsp, "the overlap trace") : NULL;
    }
    if (drv_sync(d))
        goto out;
    for (size_t i = 0; i < J->nev; i++) {
        const uly_ovl_event *e = &J->ev[i];
        double *x = mine + i * NEV;
        x[EV_REP] = (double)J->ev_rep[i]; x[EV_FWD] = e->fwd; x[EV_CHUNK] = e->chunk; x[EV_KIND] = e->kind;
        x[EV_WHICH] = e->which; x[EV_PEER] = e->peer; x[EV_READY] = e->ready;
        x[EV_START] = e->start; x[EV_WALL] = e->wall; x[EV_CPU] = e->cpu;
    }
    if (drv_mpi(d, MPI_Gather(&n, 1, MPI_INT, cnt, 1, MPI_INT, 0, d->comm), "MPI_Gather (trace counts)"))
        goto out;
    if (d->rank == 0) {
        for (int r = 0; r < d->size; r++) {
            dsp[r] = total;
            total += cnt[r];
        }
        all = drv_alloc_n(d, (size_t)total + 1, sizeof(double), "the overlap trace of all ranks");
    }
    if (drv_sync(d) || drv_mpi(d, MPI_Gatherv(mine, n, MPI_DOUBLE, all, cnt, dsp, MPI_DOUBLE, 0, d->comm),
                               "MPI_Gatherv (trace)"))
        goto out;
    if (d->rank == 0) {
        drv_out *o = &J->out[W_TRACE];
        int fd = dup(o->fd);
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (!f) {
            if (fd >= 0)
                close(fd);
            drv_fail(d, DRV_RUNTIME, "--overlap-trace %s: %s", o->path, strerror(errno));
            goto out;
        }
        fprintf(f, "rank,rep,phase,chunk,event,tensor,peer,arrived,start_ms,wall_ms,cpu_ms\n");
        for (int r = 0; r < d->size; r++)
            for (int i = 0; i < cnt[r]; i += NEV) {
                const double *x = all + dsp[r] + i;
                const int which = (int)x[EV_WHICH];
                fprintf(f, "%d,%d,%s,%d,%s,%s,%d,%d,%.4f,%.4f,%.4f\n", r, (int)x[EV_REP],
                        x[EV_FWD] != 0 ? "forward" : "backward", (int)x[EV_CHUNK], kind[(int)x[EV_KIND]],
                        which >= 0 ? uly_vol_name(which) : "", (int)x[EV_PEER], (int)x[EV_READY], 1e3 * x[EV_START],
                        1e3 * x[EV_WALL], 1e3 * x[EV_CPU]);
            }
        drv_out_close(d, o, f);
    }
out:
    drv_free(mine);
    drv_free(cnt);
    drv_free(dsp);
    drv_free(all);
    return d->code;
}

/* --overlap: the figures of every repetition, medians over them. */
static int attn_overlap(attn_job *J, drv *d)
{
    const struct attn_cfg *c = &J->c;
    if (!J->ovl_pair)
        return 0;
    const size_t per = (size_t)c->repeat * NOV;
    double *all = NULL, *x[NOF] = {NULL};
    if (d->rank == 0) {
        all = drv_alloc_n(d, (size_t)d->size * per, sizeof(double), "the overlap times of all ranks");
        for (int i = 0; i < NOF && all; i++)
            if (!(x[i] = drv_alloc_n(d, (size_t)c->repeat, sizeof(double), "the overlap times")))
                break;
    }
    int ok = d->rank != 0 || x[NOF - 1];
    int rc = d->size > 1 ? drv_mpi(d, MPI_Gather(J->otimes, (int)per, MPI_DOUBLE, ok ? all : NULL, (int)per,
                                                 MPI_DOUBLE, 0, d->comm), "MPI_Gather (overlap times)")
                         : 0;
    if (d->size == 1 && ok && all)
        memcpy(all, J->otimes, per * sizeof(double));
    if (!rc && d->rank == 0 && ok)
        for (int f = 0; f < 3; f++) {
            for (int64_t it = 0; it < c->repeat; it++) {
                double v[NOF];
                ovl_rep_figs(all + (size_t)it * NOV, d->size, per, f, v);
                for (int k = 0; k < NOF; k++)
                    x[k][it] = v[k];
            }
            for (int k = 0; k < NOF; k++)
                J->ovl[f].v[k] = stats_of(x[k], (size_t)c->repeat).median;
        }
    drv_free(all);
    for (int i = 0; i < NOF; i++)
        drv_free(x[i]);
    return d->code;
}

/* ------------------------------------------------------------ finite results */

/* First non-finite element of x[0..n), or n. */
static size_t first_nonfinite(const void *x, uly_dtype t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double v = t == ULY_F32 ? ((const float *)x)[i] : ((const double *)x)[i];
        if (!isfinite(v))
            return i;
    }
    return n;
}

/* Global position of row `row` of a rank's rows (segments b, c in order). */
static int64_t seg_pos(int ns, const int64_t *b, const int64_t *c, int64_t row)
{
    for (int s = 0; s < ns - 1 && row >= c[s]; s++) {
        row -= c[s];
        b++;
    }
    return *b + row;
}

static int attn_finite(attn_job *J, drv *d)
{
    const uly_attn_desc *a = &J->a;
    double mx[NIN];
    if (d->size > 1) {
        if (drv_mpi(d, MPI_Allreduce(J->inmax, mx, NIN, MPI_DOUBLE, MPI_MAX, d->comm), "MPI_Allreduce (input range)"))
            return DRV_RUNTIME;
        memcpy(J->inmax, mx, sizeof mx);
    }
    if (J->c.allow_nonfinite)
        return 0;
    /* results in this rank's hands: O, dQ (B, n_r, H, d), dK, dV (B, n_r, Hkv, d), LSE (B, H_r, rows)
     * (uly_plan_lse_layout).  Every query row sees its own key (documents too), so no LSE is -inf. */
    for (int i = 0; i < NRES; i++) {
        const void *x = i == R_LSE ? uly_sp_lse(J->S) : J->res[i];
        if (!x)
            continue;
        const int64_t Hx = (i == R_DK || i == R_DV) ? a->kv_heads : a->heads;
        const size_t n = i == R_LSE ? (size_t)(a->batch * J->hn * J->lrows) : (size_t)(a->batch * J->n * Hx * a->head_dim);
        size_t k = first_nonfinite(x, a->dtype, n);
        if (k == n)
            continue;
        double v = a->dtype == ULY_F32 ? ((const float *)x)[k] : ((const double *)x)[k];
        char where[160];
        if (i == R_LSE) {
            size_t per = (size_t)(J->hn * J->lrows);
            snprintf(where, sizeof where, "(b=%zu, h=%lld, t=%lld)", k / per,
                     (long long)(J->h0 + (int64_t)(k % per / (size_t)J->lrows)),
                     (long long)seg_pos(J->lns, J->lb, J->lc, (int64_t)(k % (size_t)J->lrows)));
        } else {
            size_t rowl = (size_t)(Hx * a->head_dim), per = (size_t)J->n * rowl;
            snprintf(where, sizeof where, "(b=%zu, t=%lld, h=%zu, e=%zu)", k / per,
                     (long long)seg_pos(J->ns, J->tb, J->tc, (int64_t)(k % per / rowl)), k % rowl / (size_t)a->head_dim,
                     k % (size_t)a->head_dim);
        }
        double scores = uly_attn_scale(a) * (double)a->head_dim * J->inmax[T_Q] * J->inmax[T_K];
        const double big = a->dtype == ULY_F32 ? (double)FLT_MAX : DBL_MAX;
        char hint[256];
        if (!(scores <= big))
            snprintf(hint, sizeof hint, "the inputs reach |q| = %.3g and |k| = %.3g, so scores reach %.3g, beyond the "
                     "%s range (%.3g)%s", J->inmax[T_Q], J->inmax[T_K], scores, a->dtype == ULY_F32 ? "float32" : "float64",
                     big, a->dtype == ULY_F32 ? "; use --dtype f64 or scale the inputs down" : "; scale the inputs down");
        else
            snprintf(hint, sizeof hint, "the inputs reach |q| = %.3g, |k| = %.3g, |v| = %.3g%s", J->inmax[T_Q],
                     J->inmax[T_K], J->inmax[T_V], J->c.backward ? " (and |dout| as large)" : "");
        return drv_fail(d, DRV_RUNTIME, "%s is %s at %s, the first non-finite element of this rank's part; %s "
                        "(--allow-nonfinite keeps non-finite results)", res_name[i], isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf",
                        where, hint);
    }
    return 0;
}

/* ---------------------------------------------------------------- measure */

static int attn_measure(attn_job *J, drv *d)
{
    const struct attn_cfg *c = &J->c;
    uly_sp_volume(J->S, &J->vol);
    int bad = uly_plan_method_volume(&J->a, &J->plan, d->rank, &J->want) != ULY_OK, any = 0;
    const uint64_t calls = (uint64_t)c->repeat * (uint64_t)(1 + J->ovl_pair);
    for (int w = 0; w < ULY_VOL_COUNT; w++) {
        if (!c->backward && uly_vol_backward(w)) /* the plan counts forward + backward */
            J->want.sent[w] = J->want.recv[w] = 0;
        if (J->vol.sent[w] != J->want.sent[w] * calls || J->vol.recv[w] != J->want.recv[w] * calls)
            bad = 1;
    }
    if (d->size > 1) {
        if (drv_mpi(d, MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, d->comm), "MPI_Allreduce (volumes)"))
            return DRV_RUNTIME;
    } else {
        any = bad;
    }
    J->vol_bad = any;
    /* phase statistics over ranks x repetitions */
    const size_t per = (size_t)c->repeat * NPH, m = (size_t)d->size * (size_t)c->repeat;
    double *all = NULL, *col = NULL, *fw = NULL, *tt = NULL;
    int ok = 1;
    if (d->rank == 0) {
        all = drv_alloc_n(d, (size_t)d->size * per, sizeof(double), "the phase times of all ranks");
        col = all ? drv_alloc_n(d, m, sizeof(double), "the phase times") : NULL;
        fw = col ? drv_alloc_n(d, (size_t)c->repeat, sizeof(double), "the phase times") : NULL;
        tt = fw ? drv_alloc_n(d, (size_t)c->repeat, sizeof(double), "the phase times") : NULL;
        ok = tt != NULL;
    }
    /* the gather goes ahead even when rank 0 failed (it then receives into a
     * scratch of its own row only), so that no rank waits */
    int rc = 0;
    if (d->size > 1)
        rc = drv_mpi(d, MPI_Gather(J->times, (int)per, MPI_DOUBLE, ok ? all : NULL, (int)per, MPI_DOUBLE, 0, d->comm),
                     "MPI_Gather (phase times)");
    else if (ok)
        memcpy(all, J->times, per * sizeof(double));
    if (!rc && d->rank == 0 && ok) {
        for (int p = 0; p < NPH; p++) {
            for (size_t i = 0; i < m; i++)
                col[i] = all[i * NPH + (size_t)p];
            J->ph[p] = stats_of(col, m);
        }
        /* per repetition, the slowest rank's total is the step time */
        for (int64_t it = 0; it < c->repeat; it++) {
            fw[it] = tt[it] = 0;
            for (int r = 0; r < d->size; r++) {
                const double *row = all + ((size_t)r * (size_t)c->repeat + (size_t)it) * NPH;
                double f = row[0] + row[1] + row[2] + row[3], b = row[4] + row[5] + row[6] + row[7];
                if (f > fw[it]) fw[it] = f;
                if (f + b > tt[it]) tt[it] = f + b;
            }
        }
        J->fwd_med = stats_of(fw, (size_t)c->repeat).median;
        J->tot_med = stats_of(tt, (size_t)c->repeat).median;
        /* the critical path of each phase per repetition: a collective as the
         * last rank to arrive sees it (the others also wait for it), the
         * attention and ring wait of the slowest rank; median over repetitions */
        for (int p = 0; p < NPH; p++) {
            const int compute = p == 1 || p == 2 || p == 5 || p == 6;
            for (int64_t it = 0; it < c->repeat; it++) {
                fw[it] = compute ? 0 : INFINITY;
                for (int r = 0; r < d->size; r++) {
                    double x = all[((size_t)r * (size_t)c->repeat + (size_t)it) * NPH + (size_t)p];
                    fw[it] = compute ? fmax(fw[it], x) : fmin(fw[it], x);
                }
            }
            J->crit[p] = stats_of(fw, (size_t)c->repeat).median;
        }
    }
    drv_free(all); drv_free(col); drv_free(fw); drv_free(tt);
    return d->code;
}

/* ----------------------------------------------------------------- gather */

/* Gather to rank 0 a token-sharded tensor (B, N, row): rank r holds
 * (B, n_r, row), its rows being the segments of uly_plan_tokens in order;
 * rows of `row` bytes (Hx*d elements).  One message per batch row and
 * segment, contiguous on both sides. */
static int gather_tokens(attn_job *J, drv *d, const void *mine, void *full, int64_t Hx)
{
    const int64_t B = J->a.batch, N = J->a.seq;
    const size_t row = (size_t)(Hx * J->a.head_dim) * J->es;
    for (int r = 0; r < d->size; r++) {
        if (d->rank != 0 && d->rank != r)
            continue;
        int64_t tb[2], tc[2];
        const int ns = uly_plan_tokens(&J->plan, N, r, tb, tc);
        const int64_t n = tc[0] + (ns > 1 ? tc[1] : 0);
        for (int64_t b = 0; b < B; b++) {
            int64_t r0 = 0;
            for (int sg = 0; sg < ns; sg++) {
                const size_t bytes = (size_t)tc[sg] * row;
                const char *src = (const char *)mine + (size_t)(b * n + r0) * row;
                char *dst = full ? (char *)full + (size_t)(b * N + tb[sg]) * row : NULL;
                r0 += tc[sg];
                if (bytes == 0)
                    continue;
                if (r == 0 && d->rank == 0)
                    memcpy(dst, src, bytes);
                else if (d->rank == r && send_bytes(d, src, bytes, 0, TAG_GATHER))
                    return DRV_RUNTIME;
                else if (d->rank == 0 && r != 0 && recv_bytes(d, dst, bytes, r, TAG_GATHER))
                    return DRV_RUNTIME;
            }
        }
    }
    return 0;
}

/* Gather to rank 0 the LSE (B, H, N): rank r holds heads [h0, +hn) of its
 * segments (uly_plan_lse_layout) as (B, hn, rows); one message per rank into
 * a staging buffer on rank 0 (the whole LSE is small next to O). */
static int gather_lse(attn_job *J, drv *d, const void *mine, void *full)
{
    const int64_t B = J->a.batch, N = J->a.seq, H = J->a.heads;
    const size_t es = J->es;
    char *stage = J->lstage;
    for (int r = 0; r < d->size; r++) {
        if (d->rank != 0 && d->rank != r)
            continue;
        int64_t h0, hn, lb[2], lc[2];
        const int ns = uly_plan_lse_layout(&J->plan, N, H, r, &h0, &hn, lb, lc);
        const int64_t rows = lc[0] + (ns > 1 ? lc[1] : 0);
        const size_t bytes = (size_t)(B * hn * rows) * es;
        if (bytes == 0)
            continue;
        if (d->rank == r && r != 0) {
            if (send_bytes(d, mine, bytes, 0, TAG_GATHER))
                return DRV_RUNTIME;
            continue;
        }
        if (r == 0)
            memcpy(stage, mine, bytes);
        else if (recv_bytes(d, stage, bytes, r, TAG_GATHER))
            return DRV_RUNTIME;
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < hn; h++) {
                int64_t r0 = 0;
                for (int sg = 0; sg < ns; sg++) {
                    memcpy((char *)full + (size_t)((b * H + h0 + h) * N + lb[sg]) * es,
                           stage + (size_t)((b * hn + h) * rows + r0) * es, (size_t)lc[sg] * es);
                    r0 += lc[sg];
                }
            }
    }
    return 0;
}

static int attn_gather(attn_job *J, drv *d)
{
    if (!need_full(J))
        return 0;
    const uly_attn_desc *a = &J->a;
    if (gather_tokens(J, d, J->res[R_O], J->full[R_O], a->heads) || gather_lse(J, d, uly_sp_lse(J->S), J->full[R_LSE]))
        return DRV_RUNTIME;
    if (J->c.backward && (gather_tokens(J, d, J->res[R_DQ], J->full[R_DQ], a->heads) ||
                          gather_tokens(J, d, J->res[R_DK], J->full[R_DK], a->kv_heads) ||
                          gather_tokens(J, d, J->res[R_DV], J->full[R_DV], a->kv_heads)))
        return DRV_RUNTIME;
    return d->code;
}

/* ------------------------------------------------------------------ check */

/* Errors of got against ref: NaN or Inf anywhere in either (or a difference
 * that is not finite) is counted, never lost, and fails the verdict. */
static errstat compare_ref(const double *ref, const void *got, uly_dtype t, size_t n, double atol, double rtol)
{
    errstat e = {0, 0, 0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        double g = t == ULY_F32 ? ((const float *)got)[i] : ((const double *)got)[i];
        double d = fabs(g - ref[i]);
        if (!isfinite(g) || !isfinite(ref[i]) || !isfinite(d)) {
            if (e.nonfinite++ == 0)
                e.first_bad = i;
            continue;
        }
        if (d > e.max_abs)
            e.max_abs = d;
        if (fabs(ref[i]) > e.max_ref)
            e.max_ref = fabs(ref[i]);
        double used = d / (atol + rtol * fabs(ref[i]));
        if (used > e.worst_tol)
            e.worst_tol = used;
    }
    return e;
}

static double *to_double(drv *d, const void *x, uly_dtype t, size_t n)
{
    double *y = x ? drv_alloc_n(d, n, sizeof *y, "the fp64 reference (--check)") : NULL;
    if (!y)
        return NULL;
    for (size_t i = 0; i < n; i++)
        y[i] = t == ULY_F32 ? ((const float *)x)[i] : ((const double *)x)[i];
    return y;
}

/* --check's progress line (rank 0, stderr a terminal, not --quiet): the
 * single-process run, then the fp64 reference row by row, a backward row
 * counted as CHECK_BWD_COST forward rows. */
#define CHECK_BWD_COST 3.0
typedef struct check_progress {
    uly_progress line;
    double base, weight, all;   /* work before this stage, per row of it, in all [forward rows] */
    const char *stage;
} check_progress;

static void check_progress_row(void *user, int64_t done, int64_t total)
{
    check_progress *cp = user;
    uly_progress_show(&cp->line, cp->base + cp->weight * (double)done, cp->all, "%s, %lld of %lld rows", cp->stage,
                      (long long)done, (long long)total);
}

/* Rank 0: the same problem in one process (bitwise) and the fp64 reference. */
static int attn_check(attn_job *J, drv *d)
{
    if (!J->c.check || d->rank != 0)
        return 0;
    const uly_attn_desc *a = &J->a;
    const size_t es = J->es, ns[NRES] = {J->NQ, J->NL, J->NQ, J->NKV, J->NKV};
    const int nt = J->c.backward ? NRES : 2;
    J->atol = a->dtype == ULY_F32 ? 2e-5 : 1e-10;
    J->rtol = a->dtype == ULY_F32 ? 2e-4 : 1e-8;
    void *single[NRES] = {NULL};
    double *ref[NRES] = {NULL}, *in64[NIN] = {NULL};
    for (int i = 0; i < nt && !d->code; i++)
        single[i] = drv_alloc_n(d, ns[i], es, "the single-process run (--check)");
    for (int i = 0; i < nt && !d->code; i++)
        ref[i] = drv_alloc_n(d, ns[i], sizeof(double), "the fp64 reference (--check)");
    for (int i = 0; i < (J->c.backward ? NIN : T_DO) && !d->code; i++)
        in64[i] = to_double(d, J->full_in[i], a->dtype, i == T_K || i == T_V ? J->NKV : J->NQ);
    check_progress cp = {.weight = 1, .all = (double)(a->batch * a->heads * a->seq) *
                                              (1 + (J->c.backward ? CHECK_BWD_COST : 0))};
    uly_progress_begin(&cp.line, !J->c.quiet, "ulysses attn --check");
    uly_ref_opts ro = {check_progress_row, &cp};
    if (!d->code) {
        uly_progress_show(&cp.line, 0, cp.all, "the single-process run");
        uly_kernel_opts ko = J->dopt.kernel;
        int st = uly_attn_fwd(a, &ko, J->full_in[T_Q], J->full_in[T_K], J->full_in[T_V], single[R_O], single[R_LSE]);
        if (!st && J->c.backward)
            st = uly_attn_bwd(a, &ko, J->full_in[T_Q], J->full_in[T_K], J->full_in[T_V], single[R_O], single[R_LSE],
                              J->full_in[T_DO], single[R_DQ], single[R_DK], single[R_DV]);
        uly_attn_desc a64 = *a;
        a64.dtype = ULY_F64;
        cp.stage = "fp64 reference forward";
        if (!st)
            st = uly_ref_fwd_ex(&a64, in64[T_Q], in64[T_K], in64[T_V], ref[R_O], ref[R_LSE], &ro);
        cp.stage = "fp64 reference backward";
        cp.base = (double)(a->batch * a->heads * a->seq);
        cp.weight = CHECK_BWD_COST;
        if (!st && J->c.backward)
            st = uly_ref_bwd_ex(&a64, in64[T_Q], in64[T_K], in64[T_V], in64[T_DO], ref[R_DQ], ref[R_DK], ref[R_DV],
                                &ro);
        drv_lib(d, st, DRV_RUNTIME, "--check");
    }
    uly_progress_clear(&cp.line);
    if (!d->code) {
        J->checked = 1;
        J->tol_ok = 1;
        for (int i = 0; i < nt; i++) {
            J->bitwise[i] = memcmp(single[i], J->full[i], ns[i] * es) == 0;
            double q = i < 2 ? 0.25 : 1.0;
            J->err[i] = compare_ref(ref[i], J->full[i], a->dtype, ns[i], q * J->atol, q * J->rtol);
            /* ulysses moves data only: bitwise; the other methods merge in an
             * order that depends on P: the fp64 tolerance alone */
            if ((J->plan.method == ULY_METHOD_ULYSSES && !J->bitwise[i]) || J->err[i].nonfinite ||
                !(J->err[i].worst_tol <= 1))
                J->tol_ok = 0;
        }
    }
    for (int i = 0; i < NRES; i++) {
        drv_free(single[i]);
        drv_free(ref[i]);
    }
    for (int i = 0; i < NIN; i++)
        drv_free(in64[i]);
    return d->code;
}

/* ------------------------------------------------------------------ write */

/* Rank 0: every tensor written and fsync'ed into its temporary (a full disk
 * fails here, before anything is replaced), then every output (the trace
 * included) renamed into place together. */
static int attn_write(attn_job *J, drv *d)
{
    if (d->rank != 0)
        return 0;
    const uly_attn_desc *a = &J->a;
    const struct attn_cfg *c = &J->c;
    const int res_of[NOUT] = {R_O, R_DQ, R_DK, R_DV};
    static const char *const tname[NOUT] = {"o", "dq", "dk", "dv"};
    const int run_elem = a->dtype == ULY_F64 ? ULY_ELEM_F64 : ULY_ELEM_F32;
    const int oe = !c->seen_out_type ? run_elem
                 : c->out_type == ATTN_OUT_INPUT ? (c->fin[T_Q] ? J->in[T_Q].elem : run_elem) : c->out_type;
    attn_meta m;
    char *docs = attn_meta_make(d, &m, method_names[J->plan.method], J->P, a, c->layout, J->docs, J->ndocs);
    for (int i = 0; i < NOUT && !d->code; i++) {
        if (!J->out[i].path)
            continue;
        int64_t Hx = i == W_DK || i == W_DV ? a->kv_heads : a->heads;
        int64_t shape[4] = {a->batch, a->seq, Hx, a->head_dim};
        attn_out_write(d, &J->out[i], tname[i], oe, a->dtype, c->layout, 1, 4, shape, J->full[res_of[i]], ATTN_NMETA, m.keys,
                       m.vals);
    }
    if (!d->code && c->lse) {
        /* (B, H, N); thd: (H, T) */
        int64_t shape[3] = {a->batch, a->heads, a->seq};
        int thd = c->layout == ATTN_THD;
        attn_out_write(d, &J->out[W_LSE], "lse", run_elem, a->dtype, c->layout, 0, thd ? 2 : 3, shape + thd,
                       J->full[R_LSE], ATTN_NMETA, m.keys, m.vals);
    }
    drv_free(docs);
    if (!d->code)
        drv_out_commit(d, J->out, NFILE);
    return d->code;
}

/* ------------------------------------------------------------------ pairs */

/* Packed documents: the attention work each rank's kernels did, measured.
 * One more forward after everything else ran, with q = k = 0: every score
 * is 0, so the log-sum-exp of a query row the rank holds is log(the keys its
 * kernels merged into that row), masked keys contributing exp(-inf) = 0.
 * The rank's work is the sum of exp(LSE) over its rows (batch, heads it
 * holds, queries): (head, query, key) triples, an integer when every row
 * rounds to within 1/4 of one (exact below about 2^20 keys a row in f32). */
static int attn_pairs_prep(attn_job *J, drv *d)
{
    if (J->ndocs > 0 && d->rank == 0)
        J->pairs = drv_alloc_n(d, 2 * (size_t)J->P, sizeof *J->pairs, "the pairs per rank");
    return d->code;
}

static int attn_pairs(attn_job *J, drv *d)
{
    if (J->ndocs == 0)
        return 0;
    const uly_attn_desc *a = &J->a;
    memset(J->x[T_Q], 0, J->nq * J->es);
    memset(J->x[T_K], 0, J->nkv * J->es);
    int st = uly_sp_fwd(J->S, J->x[T_Q], J->x[T_K], J->x[T_V], J->res[R_O]);
    if (drv_lib(d, st, 0, "the forward counting pairs (q = k = 0)"))
        return d->code;
    const void *lse = uly_sp_lse(J->S);
    const size_t n = (size_t)(a->batch * J->hn * J->lrows);
    int64_t mine[2] = {0, 1};
    for (size_t k = 0; k < n; k++) {
        double v = exp(a->dtype == ULY_F32 ? (double)((const float *)lse)[k] : ((const double *)lse)[k]);
        double r = floor(v + 0.5);
        if (!(fabs(v - r) <= 0.25))
            mine[1] = 0;
        mine[0] += (int64_t)r;
    }
    if (d->size > 1) {
        if (drv_mpi(d, MPI_Gather(mine, 2, MPI_INT64_T, J->pairs, 2, MPI_INT64_T, 0, d->comm), "MPI_Gather (pairs)"))
            return d->code;
    } else {
        memcpy(J->pairs, mine, sizeof mine);
    }
    return 0;
}

/* ----------------------------------------------------------------- report */

static const char *mask_name(const uly_attn_desc *a)
{
    return a->causal ? (a->window ? "causal+window" : "causal") : (a->window ? "window" : "none");
}

/* The phase slots this run reports, and the call kinds of its bytes table. */
static const char *phase_name(const attn_job *J, int p)
{
    return p < 4 || J->c.backward ? phase_names[J->plan.method][p] : NULL;
}

static int kind_shown(const attn_job *J, int w)
{
    if (!J->c.backward && uly_vol_backward(w))
        return 0;
    if (J->plan.method == ULY_METHOD_ULYSSES)
        return w < ULY_A2A_COUNT;
    return J->want.sent[w] || J->want.recv[w] || J->vol.sent[w] || J->vol.recv[w];
}

static int report_json(attn_job *J, double ffl, double tfl)
{
    const uly_attn_desc *a = &J->a;
    const struct attn_cfg *c = &J->c;
    json_t *o = json_object();
    if (!o)
        return 1;
    int e = 0;
    e |= uly_json_set_int(o, "ranks", J->P);
    e |= uly_json_set_str(o, "method", uly_method_name(J->plan.method));
    e |= uly_json_set_int(o, "ulysses_degree", J->plan.U);
    e |= uly_json_set_int(o, "ring_degree", J->plan.R);
    e |= uly_json_set_str(o, "placement", uly_placement_name(J->plan.placement));
    e |= uly_json_set_bool(o, "bf16_partials", c->bf16);
    e |= uly_json_set_int(o, "docs", J->ndocs);
    e |= uly_json_set_int(o, "batch", a->batch);
    e |= uly_json_set_int(o, "seq", a->seq);
    e |= uly_json_set_int(o, "heads", a->heads);
    e |= uly_json_set_int(o, "kv_heads", a->kv_heads);
    e |= uly_json_set_int(o, "head_dim", a->head_dim);
    e |= uly_json_set_str(o, "mask", mask_name(a));
    e |= uly_json_set_int(o, "window", a->window);
    e |= uly_json_set_str(o, "dtype", dtype_names[a->dtype]);
    e |= uly_json_set_int(o, "repeat", c->repeat);
    e |= uly_json_set_bool(o, "backward", c->backward);
    for (int p = 0, k = 0; p < NPH && !e; p++) {
        if (!phase_name(J, p))
            continue;
        char key[32];
        snprintf(key, sizeof key, "phase_%d_ms", k++);
        json_t *ph = uly_json_add_object(o, key);
        e |= !ph || uly_json_set_str(ph, "name", phase_name(J, p)) || uly_json_set_real(ph, "min", 1e3 * J->ph[p].min) ||
             uly_json_set_real(ph, "median", 1e3 * J->ph[p].median) || uly_json_set_real(ph, "max", 1e3 * J->ph[p].max) ||
             uly_json_set_real(ph, "critical", 1e3 * J->crit[p]);
    }
    e |= uly_json_set_real(o, "forward_ms", 1e3 * J->fwd_med);
    if (c->backward)
        e |= uly_json_set_real(o, "iteration_ms", 1e3 * J->tot_med);
    e |= uly_json_set_real(o, "fwd_gflops", ffl / J->fwd_med * 1e-9);
    if (c->backward)
        e |= uly_json_set_real(o, "fwdbwd_gflops", tfl / J->tot_med * 1e-9);
    json_t *by = uly_json_add_object(o, "bytes_rank0");
    e |= !by;
    const uint64_t calls = (uint64_t)c->repeat * (uint64_t)(1 + J->ovl_pair);
    for (int w = 0; w < ULY_VOL_COUNT && !e; w++) {
        /* ulysses: all eight all-to-alls (zeros for the backward's without --backward) */
        if (!kind_shown(J, w) && !(J->plan.method == ULY_METHOD_ULYSSES && w < ULY_A2A_COUNT))
            continue;
        json_t *x = uly_json_add_object(by, uly_vol_name(w));
        e |= !x || uly_json_set_int(x, "sent", (int64_t)(J->vol.sent[w] / calls)) ||
             uly_json_set_int(x, "expected_sent", (int64_t)J->want.sent[w]) ||
             uly_json_set_int(x, "recv", (int64_t)(J->vol.recv[w] / calls)) ||
             uly_json_set_int(x, "expected_recv", (int64_t)J->want.recv[w]);
    }
    e |= uly_json_set_bool(o, "bytes_match_all_ranks", !J->vol_bad);
    if (J->pairs && !e) {
        json_t *pr = uly_json_add_array(o, "pairs_per_rank");
        int exact = 1;
        e |= !pr;
        for (int r = 0; r < J->P && !e; r++) {
            e |= json_array_append_new(pr, json_integer((json_int_t)J->pairs[2 * r])) != 0;
            exact &= J->pairs[2 * r + 1] != 0;
        }
        e |= uly_json_set_bool(o, "pairs_exact", exact);
    }
    e |= uly_json_set_str(o, "overlap", overlap_names[c->overlap]);
    e |= uly_json_set_int(o, "overlap_chunks", J->chunks);
    if (J->ovl_pair && !e) {
        static const char *const fkey[3] = {"overlap_forward", "overlap_backward", "overlap_iteration"};
        for (int f = 0; f < (c->backward ? 3 : 1) && !e; f++) {
            const double *g = J->ovl[f].v;
            json_t *x = uly_json_add_object(o, fkey[f]);
            e |= !x;
            for (int k = 0; k < NOF && !e; k++)
                e |= uly_json_set_real(x, ovl_key[k], ovl_ms[k] ? 1e3 * g[k] : g[k]);
            e |= !e && uly_json_set_real(x, "wall_over_attention", g[OF_ATTN] > 0 ? g[OF_WALL] / g[OF_ATTN] : 0.0);
        }
    }
    if (J->checked && !e) {
        json_t *ck = uly_json_add_object(o, "check");
        e |= !ck;
        for (int i = 0; i < (c->backward ? NRES : 2) && !e; i++) {
            const errstat *s = &J->err[i];
            json_t *x = uly_json_add_object(ck, res_name[i]);
            e |= !x || uly_json_set_bool(x, "bitwise_equal_single_process", J->bitwise[i]) ||
                 uly_json_set_real(x, "max_abs_err", s->nonfinite ? NAN : s->max_abs) ||
                 uly_json_set_real(x, "max_rel_err", s->nonfinite ? NAN : s->max_ref > 0 ? s->max_abs / s->max_ref : 0.0) ||
                 uly_json_set_int(x, "nonfinite", (int64_t)s->nonfinite);
        }
        if (!e)
            e |= uly_json_set_bool(ck, "pass", J->tol_ok);
    }
    if (e) {
        json_decref(o);
        return 1;
    }
    return uly_json_print(stdout, o) ? 1 : 0;
}

static void report_text(attn_job *J, double ffl, double tfl)
{
    const uly_attn_desc *a = &J->a;
    const struct attn_cfg *c = &J->c;
    printf("ulysses attn: %d rank%s, method %s (U=%d x R=%d%s%s%s), B=%lld N=%lld H=%lld Hkv=%lld d=%lld mask=%s "
           "dtype=%s, %lld repetition%s%s\n",
           J->P, J->P > 1 ? "s" : "", uly_method_name(J->plan.method), J->plan.U, J->plan.R,
           J->plan.U > 1 && J->plan.R > 1 ? ", " : "",
           J->plan.U > 1 && J->plan.R > 1 ? uly_placement_name(J->plan.placement) : "", c->bf16 ? ", bf16 partials" : "",
           (long long)a->batch, (long long)a->seq, (long long)a->heads, (long long)a->kv_heads,
           (long long)a->head_dim, mask_name(a), dtype_names[a->dtype], (long long)c->repeat,
           c->repeat > 1 ? "s" : "", c->backward ? ", forward + backward" : ", forward");
    if (a->window)
        printf("  window W=%lld\n", (long long)a->window);
    if (J->ndocs)
        printf("  %lld packed documents per batch row (%s)\n", (long long)J->ndocs, c->docs ? c->docs : c->doc_lens);
    printf("\n%-26s %12s %12s %12s   (over ranks x repetitions)\n", "phase", "min ms", "median ms", "max ms");
    for (int p = 0; p < NPH; p++)
        if (phase_name(J, p))
            printf("%-26s %12.3f %12.3f %12.3f\n", phase_name(J, p), 1e3 * J->ph[p].min, 1e3 * J->ph[p].median,
                   1e3 * J->ph[p].max);
    printf("\nthroughput: forward %.2f GFLOP/s", ffl / J->fwd_med * 1e-9);
    if (c->backward)
        printf(", forward+backward %.2f GFLOP/s", tfl / J->tot_med * 1e-9);
    printf(" (all ranks; 4*pairs*d per head forward, 2.5x backward)\n");
    if (J->pairs) {
        int exact = 1;
        printf("pairs per rank:");
        for (int r = 0; r < J->P; r++) {
            printf(" %lld", (long long)J->pairs[2 * r]);
            exact &= J->pairs[2 * r + 1] != 0;
        }
        printf(" (visible (head, query, key) triples each rank's kernels merged, counted by a forward with "
               "q = k = 0%s)\n", exact ? "" : "; NOT exact: some row's count is beyond the log-sum-exp's resolution");
    }
    if (J->ovl_pair) {
        static const char *const fname[3] = {"forward", "backward", "fwd+bwd"};
        const int nf = c->backward ? 3 : 1;
        printf("\noverlap: %d head chunks per rank; each repetition ran the overlapped and the plain call "
               "(interleaved), medians over repetitions\n"
               "%-10s %10s %13s %10s   (slowest rank; attention alone: the plain call's kernel)\n",
               J->chunks, "phase", "wall ms", "attention ms", "wall/attn");
        for (int f = 0; f < nf; f++) {
            const double *g = J->ovl[f].v;
            printf("%-10s %10.3f %13.3f %10.3f\n", fname[f], 1e3 * g[OF_WALL], 1e3 * g[OF_ATTN],
                   g[OF_ATTN] > 0 ? g[OF_WALL] / g[OF_ATTN] : 0.0);
        }
        printf("\nexposed communication, every rank in the same run (means over ranks):\n"
               "  comm alone = plain call's wall - its kernel; exposed = overlapped call's wall - its kernel's "
               "arithmetic\n"
               "  (time in the kernel - time in its hooks); hidden = 1 - sum exposed / sum comm alone; "
               "cpu: the same in CPU time\n"
               "%-10s %10s %10s %7s %7s | %9s %9s %7s %7s | %8s %8s %8s %8s %8s %8s | %8s %8s %7s %8s\n", "phase",
               "comm ms", "exposed ms", "hidden", "worst", "imb. comm", "imb. exp.", "hidden", "worst", "outside",
               "waits", "arrived", "chunk 0", "sends", "tests", "cpu comm", "cpu exp.", "hidden", "copies");
        for (int f = 0; f < nf; f++) {
            const double *g = J->ovl[f].v;
            printf("%-10s %10.3f %10.3f %6.1f%% %6.1f%% | %9.3f %9.3f %6.1f%% %6.1f%% | %8.3f %8.3f %8.3f %8.3f %8.3f "
                   "%8.3f | %8.3f %8.3f %6.1f%% %8.3f\n",
                   fname[f], 1e3 * g[OF_COMM], 1e3 * g[OF_EXPOSED], 100 * g[OF_HIDDEN], 100 * g[OF_WORST],
                   1e3 * g[OF_IMB_COMM], 1e3 * g[OF_IMB_EXPOSED], 100 * g[OF_HIDDEN_NET], 100 * g[OF_WORST_NET],
                   1e3 * g[OF_OUTSIDE], 1e3 * g[OF_WAIT], 1e3 * g[OF_WAIT_READY], 1e3 * g[OF_WAIT_FIRST],
                   1e3 * g[OF_SEND], 1e3 * g[OF_TEST], 1e3 * g[OF_COMM_CPU], 1e3 * g[OF_EXPOSED_CPU],
                   100 * g[OF_HIDDEN_CPU], 1e3 * g[OF_COPY_CPU]);
        }
        printf("  worst: the lowest rank's own hidden fraction.  imb.: of comm alone / exposed, the wait after a rank's "
               "last kernel\n  for the last rank's (load imbalance); the second hidden, worst exclude it from both.  "
               "outside: wall time\n  outside the kernel; waits: for input blocks inside the kernel, %.1f per rank, %.1f "
               "of them already\n  arrived, longest %.3f ms; sends, tests: inside the kernel; copies: CPU time of the "
               "block copies\n  of the overlapped call (one node: straight into / out of the peers' window; the "
               "floor) (doc/performance.md)\n",
               J->ovl[nf - 1].v[OF_WAITS], J->ovl[nf - 1].v[OF_WAITS_READY], 1e3 * J->ovl[nf - 1].v[OF_WAIT_MAX]);
    }
    const int uly = J->plan.method == ULY_METHOD_ULYSSES, cw = uly ? 6 : 8;
    const uint64_t calls = (uint64_t)c->repeat * (uint64_t)(1 + J->ovl_pair);
    printf("\n%-*s %16s %16s %16s %16s   (rank 0, bytes per %s)\n", cw, uly ? "a2a" : "call", "sent", "expected sent",
           "received", "expected recv", uly ? "call" : "layer");
    for (int w = 0; w < ULY_VOL_COUNT; w++)
        if (kind_shown(J, w))
            printf("%-*s %16llu %16llu %16llu %16llu\n", cw, uly_vol_name(w), (unsigned long long)(J->vol.sent[w] / calls),
               (unsigned long long)J->want.sent[w], (unsigned long long)(J->vol.recv[w] / calls),
               (unsigned long long)J->want.recv[w]);
    printf("measured == expected on every rank: %s\n", J->vol_bad ? "NO" : "yes");
    if (J->checked) {
        /* the non-finite column only when there is something to count */
        size_t bad = 0;
        for (int i = 0; i < (c->backward ? NRES : 2); i++)
            bad += J->err[i].nonfinite;
        printf("\n%-4s %26s %16s %16s%s\n", "", "bitwise == one process", "max abs err", "max rel err",
               bad ? "   non-finite" : "");
        for (int i = 0; i < (c->backward ? NRES : 2); i++) {
            const errstat *s = &J->err[i];
            printf("%-4s %26s %16.3e %16.3e", res_name[i], J->bitwise[i] ? "yes" : "NO", s->nonfinite ? NAN : s->max_abs,
                   s->nonfinite ? NAN : s->max_ref > 0 ? s->max_abs / s->max_ref : 0.0);
            if (bad)
                printf(" %12zu", s->nonfinite);
            printf("\n");
        }
        if (J->plan.method == ULY_METHOD_ULYSSES)
            printf("bitwise equal to one process and errors vs fp64 reference within atol %.0e + rtol %.0e |ref| "
                   "(O, LSE: a quarter of it): %s\n", J->atol, J->rtol, J->tol_ok ? "yes" : "NO");
        else
            printf("errors vs fp64 reference within atol %.0e + rtol %.0e |ref| (O, LSE: a quarter of it): %s\n"
                   "(%s combines partial results in an order that depends on P: bitwise equality is not expected)\n",
                   J->atol, J->rtol, J->tol_ok ? "yes" : "NO", uly_method_name(J->plan.method));
    }
}

static int attn_report(attn_job *J, drv *d)
{
    if (d->rank != 0)
        return 0;
    const uly_attn_desc *a = &J->a;
    const double ffl = 4.0 * uly_attn_pairs(a) * (double)a->head_dim * (double)(a->batch * a->heads);
    const double tfl = J->c.backward ? 3.5 * ffl : ffl;
    if (J->c.json) {
        uly_json_use_hooks();
        if (report_json(J, ffl, tfl))
            drv_fail(d, DRV_RUNTIME, "out of memory: cannot build the JSON report");
    } else {
        report_text(J, ffl, tfl);
    }
    if (fflush(stdout) != 0)
        drv_fail(d, DRV_RUNTIME, "cannot write the report to standard output");
    return d->code;
}

/* The run's own verdict: --check and the byte counters. */
static int attn_verdict(attn_job *J, drv *d)
{
    if (d->rank != 0)
        return 0;
    if (J->vol_bad)
        return drv_fail(d, DRV_RUNTIME, "the bytes moved differ from the plan on some rank (see the table)");
    if (J->checked && !J->tol_ok) {
        for (int i = 0; i < (J->c.backward ? NRES : 2); i++) {
            const errstat *s = &J->err[i];
            if (s->nonfinite)
                return drv_fail(d, DRV_RUNTIME, "--check failed: %s has %zu non-finite element%s (the first at index %zu) "
                                "in the result or the reference", res_name[i], s->nonfinite, s->nonfinite > 1 ? "s" : "",
                                s->first_bad);
            if (J->plan.method == ULY_METHOD_ULYSSES && !J->bitwise[i])
                return drv_fail(d, DRV_RUNTIME, "--check failed: %s is not bitwise equal to the single-process result",
                                res_name[i]);
            if (!(s->worst_tol <= 1))
                return drv_fail(d, DRV_RUNTIME, "--check failed: %s differs from the fp64 reference by %.3e, %.2f times "
                                "the tolerance", res_name[i], s->max_abs, s->worst_tol);
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- main */

static int attn_main(attn_job *J, drv *d, int argc, char **argv)
{
    int ps = attn_parse(J, d, argc, argv);
    drv_field f[DRV_AGREE_MAX];
    int nf = ps == DRV_PARSE_OK ? attn_fields(J, f) : 0;
    int rc = drv_agree(d, ps, f, nf);
    if (rc == DRV_AGREE_HELP) {
        arg_opt opts[NOPTS];
        attn_options(&J->c, opts);
        drv_usage(d, synopsis, opts);
        return 0;
    }
    if (rc)
        return rc;
#define STEP(call) DRV_STEP(d, call)
    STEP(drv_blas_warmup(d, (int)J->c.threads));
    STEP(attn_resolve(J, d));
    STEP(attn_share_shape(J, d));
    STEP(attn_plan(J, d));
    STEP(attn_alloc(J, d));
    STEP(attn_create(J, d));
    STEP(attn_load(J, d));
    STEP(attn_run(J, d));
    STEP(attn_finite(J, d));
    STEP(attn_measure(J, d));
    STEP(attn_overlap(J, d));
    STEP(attn_trace(J, d));
    STEP(attn_gather(J, d));
    STEP(attn_check(J, d));
    STEP(attn_write(J, d));
    STEP(attn_pairs_prep(J, d));
    STEP(attn_pairs(J, d));
    STEP(attn_report(J, d));
    STEP(attn_verdict(J, d));
#undef STEP
    return 0;
}

int cmd_attn(int argc, char **argv)
{
    drv d;
    if (drv_open(&d, "ulysses attn"))
        return DRV_RUNTIME;
    attn_job J;
    memset(&J, 0, sizeof J);
    drv_out_init(J.out, NFILE);
    int code = attn_main(&J, &d, argc, argv);
    job_free(&J);
    return drv_close(&d, code);
}
