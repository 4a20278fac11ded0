/* SPDX-License-Identifier: Apache-2.0 */
/*
 * usim.h -- libusim: a discrete-event cost model of sequence-parallel
 * training on GPU clusters (the library behind ulysses-sim).
 *
 * What is here: status codes; the event engine (integer picoseconds); the
 * platform and model descriptions and their JSON loaders; the network (links,
 * max-min fair flows, collectives decomposed into point-to-point transfers);
 * the workload (per-layer forward/backward graphs of compute and
 * communication, memory model) and its result record.
 *
 * What is not here: argument parsing and printing (sim/cli), MPI, BLAS.
 *
 * Conventions: every function returns a usim_status (0 on success) and never
 * exits; a one-line description of the last failure in the calling thread is
 * available from usim_last_error().  Simulated time is int64 picoseconds.
 * Bytes are uint64_t.  Objects returned by *_new are owned by the caller and
 * released by the matching *_free (which accept NULL).
 */
#ifndef USIM_H
#define USIM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ulysses_plan.h"   /* uly_method */

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ errors */

typedef enum usim_status {
    USIM_OK = 0,
    USIM_EINVAL,   /* invalid argument or configuration */
    USIM_ENOMEM,   /* allocation failed */
    USIM_EIO,      /* a file could not be opened, read or written */
    USIM_EFORMAT,  /* a JSON file is malformed, misses a key or has a wrong type */
    USIM_ENOTFOUND,/* a preset or file does not exist */
    USIM_ELIMIT,   /* a simulation exceeded the work budget it was given */
    USIM_NSTATUS
} usim_status;

const char *usim_strerror(int status);
const char *usim_last_error(void);

/* ------------------------------------------------------------------ engine */

typedef int64_t usim_time;                  /* picoseconds */
/* The largest duration the engine represents (about 46 days): a computed
 * transfer time at or above it is saturated to it, and every command refuses
 * a result that reaches it instead of printing it. */
#define USIM_TIME_LIMIT_PS 4000000000000000000LL
#define USIM_PS_PER_S 1000000000000LL
#define USIM_PS_PER_US 1000000LL

/* Invariant check that NDEBUG does not remove: prints and aborts. */
void usim_invariant_failed(const char *expr, const char *file, int line);
#define USIM_CHECK(cond) \
    ((cond) ? (void)0 : usim_invariant_failed(#cond, __FILE__, __LINE__))

typedef struct usim_engine usim_engine;
typedef void (*usim_handler)(usim_engine *e, void *ctx, int64_t arg);

usim_engine *usim_engine_new(void);
void usim_engine_free(usim_engine *e);
/* Schedule handler(ctx, arg) at absolute time t >= now.  Events at equal times
 * run in the order they were scheduled (a sequence number breaks ties). */
int usim_engine_at(usim_engine *e, usim_time t, usim_handler h, void *ctx, int64_t arg);
/* Run until the queue is empty.  The clock never goes backwards (checked). */
int usim_engine_run(usim_engine *e);
usim_time usim_engine_now(const usim_engine *e);
uint64_t usim_engine_events(const usim_engine *e);  /* events executed so far */
void usim_engine_reset(usim_engine *e);             /* empty queue, clock 0 */

/* ---------------------------------------------------------------- platform */

typedef enum usim_dtype { USIM_BF16 = 0, USIM_FP16, USIM_FP32, USIM_NDTYPE } usim_dtype;
const char *usim_dtype_name(usim_dtype t);
int usim_dtype_bytes(usim_dtype t);

/* NCCL algorithms and protocols (doc/simulator.md section 4). */
typedef enum usim_algo { USIM_ALGO_AUTO = 0, USIM_ALGO_RING, USIM_ALGO_TREE, USIM_ALGO_NVLS,
                         USIM_ALGO_PAT, USIM_ALGO_NVLS_TREE, USIM_NALGO } usim_algo;
typedef enum usim_proto { USIM_PROTO_AUTO = 0, USIM_PROTO_LL, USIM_PROTO_LL128, USIM_PROTO_SIMPLE,
                          USIM_NPROTO } usim_proto;
const char *usim_algo_name(usim_algo a);      /* "auto", "ring", "tree", "nvls", "pat", "nvlstree" */
const char *usim_proto_name(usim_proto p);    /* "auto", "LL", "LL128", "Simple" */
int usim_algo_parse(const char *s, usim_algo *a);
int usim_proto_parse(const char *s, usim_proto *p);   /* case-insensitive */

typedef struct usim_platform {
    char name[64];
    char source[256];           /* file it was read from */
    int gpus_per_node;
    int max_nodes;              /* 0: unlimited */
    double peak_flops[USIM_NDTYPE];  /* FLOP/s, dense */
    double gemm_eff;            /* achieved fraction of peak in large GEMMs */
    double attn_eff;            /* achieved fraction of peak in attention kernels (d = 128) */
    int sms;                    /* streaming multiprocessors (0: no wave quantisation) */
    double gemm_tile_m, gemm_tile_n; /* GEMM output tile per thread block */
    double gemm_k_half;         /* GEMM efficiency is gemm_eff * K / (K + gemm_k_half) */
    double attn_d_half;         /* attention rate scales with d / (d + attn_d_half) */
    double launch_s;            /* per-kernel launch overhead, seconds */
    double attn_bwd_eff;        /* the same for the attention backward (its FLOPs: 2.5x the
                                   forward's); attention_bwd_efficiency, default attn_eff */
    int attn_causal_skip;       /* 1: attention kernels skip fully masked blocks (causal
                                   attention costs half); 0: they compute them */
    double hbm_bytes;           /* HBM capacity, bytes */
    double hbm_Bps;             /* HBM bandwidth, bytes/s */
    double reserved_bytes;      /* context, communicator buffers, fragmentation */
    double nvl_peak_Bps;        /* switched node: per GPU per direction, bytes/s, before nvl_eff
                                   (usim_nvl_Bps: the rate the simulation uses) */
    double nvl_eff;             /* achieved fraction of the NVLink (or full-mesh link) rate */
    usim_time nvl_lat;          /* ps */
    double nic_peak_Bps;        /* per NIC per direction, bytes/s, before nic_eff (usim_nic_Bps) */
    double nic_eff;             /* achieved fraction of the NIC rate */
    usim_time nic_lat;          /* ps */
    double nccl_lat_scale[2];   /* [USIM_CLASS_NVLINK], [USIM_CLASS_NIC]: factors on NCCL's latency
                                   table for collectives (tuner.c: the NVLink one on baseLat and the
                                   NVLink hwLat, the NIC one on the network hwLat); 1 by default,
                                   fitted by `ulysses-sim calibrate` */
    usim_time a2a_call[2];      /* [USIM_CLASS_NVLINK], [USIM_CLASS_NIC]: fixed cost of one all-to-all call (the MPI library's set-up
                                   and synchronisation at the call, measured by ulysses calibrate),
                                   ps, by the widest link class the call spans; 0 by default */
    double oversub;             /* spine oversubscription (>= 1) */
    int nics_per_node;          /* NICs (rails) per node; GPUs gpus_per_node / nics_per_node
                                   consecutive GPUs share one (0: one per GPU) */
    int nvls;                   /* 1: the NVSwitch reduces and multicasts (NVLink SHARP) */
    int nvl_domain;             /* GPUs per NVLink domain, a multiple of gpus_per_node (0:
                                   gpus_per_node): traffic between two GPUs of one domain uses
                                   NVLink only, never a NIC (72 for a GB200 NVL72 rack) */
    int full_mesh;              /* 1: no switch inside the node; every ordered GPU pair of a node
                                   has its own link (MI300X xGMI); usim_nvl_Bps is then the
                                   GPU's total, (gpus_per_node - 1) x usim_mesh_link_Bps */
    double mesh_link_peak_Bps;  /* full_mesh: one peer link per direction, bytes/s, before
                                   nvl_eff */
    double nvls_eff;            /* achieved fraction of the NVLink rate under NVLS */
    /* forced NCCL algorithm per collective (AUTO: the tuner chooses) and protocol */
    usim_algo algo_allreduce, algo_allgather, algo_reduce_scatter;
    usim_proto proto;
    /* The host ("host" object; all 0 when the file has none: no technique
     * that uses the host can then run).  host_bytes: host memory per node;
     * host_link_peak_Bps: host-device link per GPU per direction, before
     * host_link_eff; host_cores, host_flops (fp32 FLOP/s of the node's CPUs,
     * peak, before host_cpu_eff) and host_mem_Bps (the node's memory
     * bandwidth): the CPU Adam step. */
    double host_bytes;
    double host_link_peak_Bps, host_link_eff;
    int host_cores;
    double host_flops, host_cpu_eff, host_mem_Bps;
} usim_platform;

/* The host-device rate the simulation uses: peak x efficiency, bytes/s per
 * GPU per direction (0: no host described). */
static inline double usim_host_link_Bps(const usim_platform *p)
{
    return p->host_link_peak_Bps * p->host_link_eff;
}

/* The link rates the simulation uses, bytes/s per direction: the peak rates
 * times their efficiencies (kept apart in the platform, multiplied here).
 * NVLink per GPU (full mesh: the GPU's total over its gpus_per_node - 1
 * links), one full-mesh peer link, one NIC. */
static inline double usim_mesh_link_Bps(const usim_platform *p)
{
    return p->mesh_link_peak_Bps * p->nvl_eff;
}
static inline double usim_nvl_Bps(const usim_platform *p)
{
    return p->full_mesh ? (double)(p->gpus_per_node - 1) * usim_mesh_link_Bps(p) : p->nvl_peak_Bps * p->nvl_eff;
}
static inline double usim_nic_Bps(const usim_platform *p)
{
    return p->nic_peak_Bps * p->nic_eff;
}

/* GPUs of one NVLink domain (nvl_domain, or gpus_per_node when 0). */
int usim_platform_domain(const usim_platform *p);

/* Load a platform from a JSON file.  Errors name the file, line, column and key. */
int usim_platform_load(const char *path, usim_platform *p);

/* ------------------------------------------------------------------- model */

typedef struct usim_model {
    char name[64];
    char source[256];
    int64_t layers, hidden, heads, kv_heads, ffn, vocab;
    int64_t seq, micro_batch, global_batch;
    usim_dtype dtype;
    int gated_mlp;        /* 1: SwiGLU (3 matrices), 0: GeLU (2) */
    int tied_embeddings;
    int causal;
    int64_t head_dim;     /* per head; 0: hidden / heads.  Query width heads x head_dim,
                             KV width kv_heads x head_dim, o_proj (heads x head_dim) x hidden */
    int qkv_bias;         /* the q, k, v projections carry biases (Qwen2) */
    int o_bias;           /* the o projection carries a bias (Llama's attention_bias) */
    int qk_norm;          /* RMSNorm of head_dim on queries and keys per layer (Qwen3) */
} usim_model;

int usim_model_load(const char *path, usim_model *m);
/* Parameters of the whole model (embeddings included). */
double usim_model_params(const usim_model *m);
/* Parameters of one decoder layer (norms and biases included). */
double usim_model_layer_params(const usim_model *m);
/* The head dimension: head_dim, or hidden / heads when it is 0. */
int64_t usim_model_head_dim(const usim_model *m);

/* Locate a preset: "name" -> <dir>/<name>.json under kind "platforms" or
 * "models" ("" when path-like names are given: returned unchanged).  Search
 * order: $ULYSSES_SIM_PRESETS, the source tree, the installed data dir. */
int usim_preset_path(const char *kind, const char *name, char *out, size_t outlen);
/* The directories searched, in order (NULL-terminated, static storage). */
const char *const *usim_preset_dirs(void);

/* ----------------------------------------------------------------- network */

enum { USIM_LINK_NVL_UP, USIM_LINK_NVL_DOWN, USIM_LINK_NIC_TX, USIM_LINK_NIC_RX,
       USIM_LINK_SPINE_UP, USIM_LINK_SPINE_DOWN, USIM_LINK_MESH, USIM_NLINKKIND };
enum { USIM_CLASS_NVLINK = 0, USIM_CLASS_NIC = 1, USIM_NCLASS };

typedef struct usim_net usim_net;

usim_net *usim_net_new(const usim_platform *p, int gpus);
void usim_net_free(usim_net *n);
int usim_net_gpus(const usim_net *n);

/* One point-to-point transfer; dep[k] >= 0 names a transfer (index in the same
 * program) that must finish before this one starts.  src == dst: a join (no
 * bytes, done when its dependencies are).  USIM_SWITCH as src or dst: the
 * node's NVSwitch (NVLS), so the transfer uses only the GPU's NVLink down or
 * up link. */
#define USIM_SWITCH (-1)
typedef struct usim_xfer {
    int src, dst;
    uint64_t bytes;
    int dep[2];
    int step;             /* step index (for ring extrapolation and traces), >= 0 */
    int nolat;            /* 1: no route latency (a pipelined slice behind the first) */
} usim_xfer;

/* Run transfers on an idle network.  finish[i] (may be NULL) receives each
 * transfer's completion time.  *makespan: time of the last completion. */
int usim_net_run(usim_net *n, const usim_xfer *x, int count, usim_time *finish,
                 usim_time *makespan);
/* Events executed by the last run (for tests and benchmarks). */
uint64_t usim_net_last_events(const usim_net *n);
/* A budget of work (flow and link visits of the max-min rate recomputations,
 * plus one per transfer) for the runs from now on, counted from zero; a run
 * over it fails with USIM_ELIMIT.  0: unlimited (the default). */
void usim_net_set_work_limit(usim_net *n, uint64_t limit);
uint64_t usim_net_work(const usim_net *n);

typedef enum usim_coll_type {
    USIM_A2A_DIRECT = 0,  /* every pair at once */
    USIM_A2A_PAIRWISE,    /* P-1 steps, step k: r -> r+k */
    USIM_ALLGATHER,       /* ring */
    USIM_REDUCE_SCATTER,  /* ring */
    USIM_ALLREDUCE,       /* ring: reduce-scatter then all-gather */
    USIM_RING_SHIFT,      /* every member sends to the next (one ring-attention hop) */
    USIM_SENDRECV,        /* member 0 sends to member 1 */
    USIM_NCOLL
} usim_coll_type;
const char *usim_coll_name(usim_coll_type t);

/*
 * Groups described by strides instead of a rank list: the index i = g * size
 * + p of position p of group g, written in mixed radix with digit k in
 * [0, dim[k].n) (digit 0 least significant), is the GPU
 * sum_k digit_k * dim[k].stride.  The product of the n is ngroups * size.
 * (A job's groups are such grids: rank = t + T (c + C (d + D s)).)
 */
#define USIM_GRID_MAXDIM 8
typedef struct usim_grid {
    int ndim;
    struct { int n, stride; } dim[USIM_GRID_MAXDIM];
} usim_grid;

/* An all-to-all's blocks described instead of listed: position src hands
 * position dst uly_layout_a2a_block(&layout, rows, which, src, dst) elements
 * of elem bytes, O(1) per pair, so no size x size table is built (the
 * simulator's groups reach thousands of GPUs). */
typedef struct usim_pairs {
    uly_layout layout;
    int64_t rows;
    int which;
    int elem;
} usim_pairs;

/*
 * A collective run by ngroups disjoint groups at once.  ranks: ngroups x size
 * GPU ids (row g = group g, position order), or NULL and grid describes them.
 * For all-to-alls, pair_bytes is a size x size matrix [src_pos * size +
 * dst_pos] (diagonal ignored) used by every group, or NULL and pairs
 * describes the blocks (usim_coll_pair reads either); for rings, chunk_bytes[pos]
 * is the chunk of position pos (NULL: chunk_total elements split over the
 * positions as uly_split does, the first chunk_total % size one larger, times
 * chunk_mult bytes); for RING_SHIFT and SENDRECV, bytes is sent by each sender.
 */
typedef struct usim_coll {
    usim_coll_type type;
    int ngroups, size;
    const int *ranks;
    const uint64_t *pair_bytes;
    const uint64_t *chunk_bytes;
    uint64_t bytes;
    usim_algo algo;       /* all-gather, reduce-scatter, all-reduce: AUTO = the platform's
                             forced choice, else the tuner's */
    usim_proto proto;     /* AUTO likewise */
    const usim_grid *grid;          /* when ranks is NULL */
    int64_t chunk_total;            /* when chunk_bytes is NULL */
    uint64_t chunk_mult;
    const usim_pairs *pairs;        /* all-to-alls: when pair_bytes is NULL */
} usim_coll;

/* Bytes position src hands position dst in all-to-all c. */
static inline uint64_t usim_coll_pair(const usim_coll *c, int src, int dst)
{
    if (c->pair_bytes)
        return c->pair_bytes[(size_t)src * (size_t)c->size + (size_t)dst];
    if (src == dst)
        return 0;
    return uly_layout_a2a_block(&c->pairs->layout, c->pairs->rows, c->pairs->which, src, dst) *
           (uint64_t)c->pairs->elem;
}

typedef struct usim_coll_result {
    usim_time duration;                 /* start of the first to end of the last transfer */
    uint64_t max_sent[USIM_NCLASS];     /* max over GPUs of bytes sent on each link class */
    uint64_t total_sent, total_recv;    /* over all GPUs (equal except under NVLS multicast) */
    int extrapolated;                   /* ring steps beyond the simulated window */
    usim_algo algo;                     /* algorithm and protocol run (ring collectives) */
    usim_proto proto;
    int channels;                       /* NCCL channels (rings or trees) of group 0 */
    double estimate_s;                  /* the tuner's estimate for that choice */
    int classes;                        /* simulated by equivalence classes: their number (one
                                           group each), 0 at full flow level */
} usim_coll_result;

/* Simulate a collective.  sent/recv (may be NULL): per-GPU byte counters of
 * length usim_net_gpus(n), overwritten. */
int usim_coll_run(usim_net *n, const usim_coll *c, usim_coll_result *r,
                  uint64_t *sent, uint64_t *recv);
/* Count the bytes of a collective without simulating it (fills everything in
 * *r but duration). */
int usim_coll_count(usim_net *n, const usim_coll *c, usim_coll_result *r,
                    uint64_t *sent, uint64_t *recv);
/* Simulation engine of the collectives: FULL runs every flow of every GPU;
 * CLASSES runs one group per equivalence class of groups (every group of a
 * collective placed alike on the nodes and NICs: its copies' contention on
 * shared links counted with multiplicities; doc/simulator.md), the same
 * result; AUTO (default): CLASSES where the groups are equivalent, else FULL. */
enum { USIM_ENGINE_AUTO = 0, USIM_ENGINE_FULL, USIM_ENGINE_CLASSES };
void usim_net_set_engine(usim_net *n, int engine);
/* Longest ring simulated step by step before extrapolating (default 64). */
void usim_net_set_ring_window(usim_net *n, int steps);

/* ---------------------------------------------------------------- workload */

/* Context/sequence-parallel methods: the plan layer's uly_method
 * (ulysses_plan.h), megatron-sp included; names from its one table
 * (uly_method_sim_name prints "ulysses", "megatron-sp", "ring",
 * "ring-zigzag", "usp", "all-gather"; uly_method_parse_any also takes
 * "zigzag", "allgather" and Megatron's cp_comm_type names: a2a = ulysses,
 * p2p = ring-zigzag, all_gather = all-gather, a2a+p2p = usp). */
/* Every method in the order the simulator lists them (tables, CSV rows,
 * --method all): ulysses, megatron-sp, ring, ring-zigzag, usp, all-gather. */
extern const uly_method usim_method_order[ULY_METHOD_ALL];

typedef enum usim_recompute { USIM_RC_NONE = 0, USIM_RC_SELECTIVE, USIM_RC_FULL } usim_recompute;
const char *usim_recompute_name(usim_recompute r);

typedef struct usim_job {
    uly_method method;
    int gpus;
    int sp;          /* context/sequence-parallel degree (TP degree for megatron-sp); 0: default */
    int tp;          /* tensor-parallel degree (Megatron TP with its sequence parallelism around
                        the attention); megatron-sp: = sp; 0: 1 (megatron-sp: sp) */
    int pp;          /* pipeline stages (1F1B or interleaved, vpp); 0: 1 */
    int dp;          /* 0: gpus / (tp sp pp) */
    int ulysses;     /* usp: all-to-all degree (0: default); ring degree = sp / ulysses */
    int zero;        /* 0..3 */
    usim_recompute recompute;
    usim_coll_type a2a;  /* USIM_A2A_DIRECT or USIM_A2A_PAIRWISE */
    /* Long-context techniques (doc/simulator.md, "Long context: tiling,
     * offload, head chunks"); each 0 = off, so a zeroed job runs without
     * them and a search (plan) enumerates them by setting the field. */
    int tiled_loss;      /* 1: logits and loss in tiles of ~hidden tokens (never tokens x vocab) */
    int tiled_mlp;       /* 0: off; K >= 1 shards; USIM_TILED_MLP_AUTO: ceil(tokens / hidden) */
    int offload;         /* USIM_OFFLOAD_* bits: activation checkpoints, optimizer, parameters */
    int head_chunks;     /* 0 or 1: off; K >= 2: attention of H/K heads at a time (UPipe) */
    /* Pipeline schedule (doc/simulator.md, "Pipeline schedules"): 0 = default. */
    int vpp;             /* 0/1: 1F1B; V >= 2: interleaved 1F1B with V virtual stages per rank
                            (Megatron's --virtual-pipeline-model-parallel-size) */
    int pp_first_layers; /* 0: even; N: layers of the first stage (--decoder-first-pipeline-num-layers) */
    int pp_last_layers;  /* 0: even; N: layers of the last stage (--decoder-last-pipeline-num-layers) */
    /* Attention kernel (doc/simulator.md, "Unfused attention"): 0 = fused
     * (FlashAttention: no score matrix in HBM). */
    int attn_kernel;     /* USIM_ATTN_FLASH or USIM_ATTN_UNFUSED */
    int attn_dropout;    /* unfused only: 1 = attention dropout on the probabilities (its kernel and mask) */
} usim_job;

/* The attention kernel a job's layers run: FlashAttention (fused, the score
 * matrix never in HBM) or the unfused sequence of Megatron-LM's
 * CoreAttention / HF's eager attention: a batched GEMM writing the scores, a
 * (fused scale-mask-)softmax, optionally dropout, a batched GEMM with V. */
enum { USIM_ATTN_FLASH = 0, USIM_ATTN_UNFUSED = 1 };
/* Whether method m can run attention kernel k: the unfused kernel runs with
 * ulysses and megatron-sp only (the others combine blockwise partial results
 * through their log-sum-exp, which needs a fused kernel). */
static inline int usim_attn_kernel_runs(uly_method m, int k)
{
    return k != USIM_ATTN_UNFUSED || m == ULY_METHOD_ULYSSES || m == ULY_METHOD_MEGATRON_SP;
}

#define USIM_TILED_MLP_AUTO (-1)
enum { USIM_OFFLOAD_ACT = 1, USIM_OFFLOAD_OPTIM = 2, USIM_OFFLOAD_PARAMS = 4 };
/* Whether a job uses any long-context technique (the backward-peak memory model applies). */
static inline int usim_job_longctx(const usim_job *j)
{
    return j->tiled_loss || j->tiled_mlp || j->offload || j->head_chunks > 1;
}
/* Shards of TiledMLP over `tokens` tokens of width `hidden` (0: no tiling). */
int64_t usim_tiled_mlp_shards(const usim_job *j, int64_t tokens, int64_t hidden);
/* Check the long-context fields against the method, ZeRO stage, recompute
 * and the platform's host description; EINVAL with the reason. */
int usim_job_check_longctx(const usim_platform *p, const usim_model *m, const usim_job *j);

/* Whether gpus fit the platform (whole nodes, max_nodes). */
int usim_platform_check_gpus(const usim_platform *p, int gpus);

/* Fill defaulted degrees (sp, tp, pp, dp, ulysses) and validate against the
 * model and the GPU count.  Errors are configuration errors (EINVAL). */
int usim_job_resolve(const usim_model *m, const usim_platform *p, usim_job *j);
/* Placement of a resolved job in words: which dimensions are inside a node,
 * e.g. "tp 2 x cp 4 inside a node; dp 4 across nodes". */
void usim_job_placement(const usim_platform *p, const usim_job *j, char *out, size_t outlen);

/* Communication kinds: sequence/tensor parallel; parameter all-gathers (ZeRO);
 * gradient reduce-scatter / all-reduce (data parallel, ZeRO). */
enum { USIM_KIND_SP = 0, USIM_KIND_PARAM, USIM_KIND_GRAD, USIM_NKIND };
const char *usim_kind_name(int kind);

/* The limit that binds a memory estimate. */
enum { USIM_BIND_NONE = 0, USIM_BIND_HBM = 1, USIM_BIND_HOST = 2 };
/* "none", "HBM", "host memory", "HBM + host memory" (bits of USIM_BIND_*). */
const char *usim_bind_name(int bind);

typedef struct usim_memory {
    double params, grads, optim, activations, logits, buffers, reserved, total;
    /* long-context accounting (doc/simulator.md): the layer-boundary
     * checkpoints resident in HBM, the working set of one layer's backward
     * (recomputed forward tensors and their gradients), of the loss; with a
     * long-context technique total counts the larger of the two working sets
     * (they are never live together).  host_node: host memory per node
     * (offloaded checkpoints, optimizer and parameters). */
    double resident, layer_ws, loss_ws;
    double host_node;
    int bind;                     /* USIM_BIND_* bits: what the estimate exceeds */
} usim_memory;

/* Time each long-context technique costs in one iteration (seconds). */
typedef struct usim_lc_cost {
    double tiled_mlp_s;           /* the extra MLP forward of every layer's backward */
    double offload_exposed_s;     /* activation copies not hidden behind compute */
    double offload_copy_s;        /* all activation copies (both directions), hidden or not */
    double cpu_adam_s;            /* the optimizer step on the host CPUs */
    double param_fetch_s;         /* parameter shards over the host link not hidden (and the
                                     updated parameters copied back) */
    int64_t mlp_shards;           /* TiledMLP shards of GPU 0's tokens (0: not tiled) */
} usim_lc_cost;

#define USIM_MAX_WARN 4

typedef struct usim_result {
    usim_job job;                 /* resolved */
    int64_t seq;
    int micro_steps;              /* gradient-accumulation steps per iteration */
    int64_t global_batch;         /* effective: micro_steps * dp * micro_batch */
    double iter_s;                /* one iteration */
    double compute_s;             /* busy time of the compute stream */
    double exposed_s[USIM_NKIND]; /* communication not hidden behind compute, by kind */
    double comm_s[USIM_NKIND];    /* total communication time, by kind */
    double bubble_frac;           /* pipeline: bubble_s over the critical rank's forward and
                                     backward time of all micro-batches ((pp-1)/(V m) for uniform
                                     stages without transfer time); 0 without pipeline */
    int pp_inflight;              /* pipeline: micro-batch chunks the first stage holds at once */
    int pp_critical;              /* pipeline: the rank whose end sets iter_s */
    double pp_p2p_s;              /* pipeline: longest activation transfer between stages */
    double bubble_s;              /* pipeline fill and drain (and waits for transfers): iter_s = compute_s +
                                     exposed_s[*] + bubble_s (+ the host waits of lc:
                                     offload_exposed_s, param_fetch_s, cpu_adam_s) */
    double sent_bytes[USIM_NCLASS];     /* per GPU per iteration (max over GPUs) */
    double sp_bytes_layer_fwd;    /* per GPU, sequence-parallel comm of one layer forward */
    double tflops;                /* Megatron formula, per GPU */
    double mfu;                   /* model FLOPs (no recompute) / (time * peak) */
    usim_memory mem;
    int fits;
    usim_lc_cost lc;
    uint64_t events;              /* engine events of the workload graph */
    int collectives_simulated;    /* distinct collectives run on the network */
    int engine;                   /* USIM_ENGINE_* requested */
    int coll_classes, coll_full;  /* the iteration's collectives simulated (now or from the memo)
                                     by classes (one group per class of equivalent groups), at
                                     full flow level */
    int64_t requested_batch;      /* the model's global batch before rounding to whole steps */
    /* Adjustments the simulation made on its own (global batch rounded up)
     * and costly choices it was given (uneven heads per rank), one line each,
     * each with its cost: every output format shows them. */
    int nwarn;
    char warn[USIM_MAX_WARN][240];
} usim_result;

typedef struct usim_sim usim_sim;

/* A simulation context for one platform and GPU count (memoizes collectives). */
usim_sim *usim_sim_new(const usim_platform *p, int gpus);
void usim_sim_free(usim_sim *s);
/* Whether communications of different streams that overlap in time share the
 * link classes of the GPU (default 1; 0: each runs at its isolated speed). */
void usim_sim_set_contention(usim_sim *s, int on);
/* Which engine ran the collectives of a result: "classes", "full", or both
 * with the count at full flow level.  Returns snprintf's value. */
int usim_engine_desc(const usim_result *r, char *buf, size_t n);
/* Engine of the collectives (USIM_ENGINE_*; default AUTO). */
void usim_sim_set_engine(usim_sim *s, int engine);
/* A network work budget for each usim_simulate from now on (see
 * usim_net_set_work_limit; 0: unlimited, the default): a simulation over it
 * fails with USIM_ELIMIT.  usim_sim_work: the work of the last simulation. */
void usim_sim_set_work_limit(usim_sim *s, uint64_t limit);
uint64_t usim_sim_work(const usim_sim *s);
/* Simulate one training iteration.  trace (may be NULL): a Chrome/Perfetto
 * trace of the iteration is written there. */
int usim_simulate(usim_sim *s, const usim_model *m, const usim_job *j, FILE *trace,
                  usim_result *r);
/* What a trace shows (usim_simulate_ex).  The simulator times one
 * representative GPU (every GPU of the job runs the same program; with a
 * pipeline, the last stage): each GPU listed gets its processes ("GPU g",
 * "links of GPU g") drawn from that schedule. */
#define USIM_TRACE_MAX_GPUS 64
typedef struct usim_trace_opts {
    const int *gpus;      /* GPUs traced, 0 <= g < the GPU count (NULL: GPU 0) */
    int ngpus;            /* 0..USIM_TRACE_MAX_GPUS (0: GPU 0) */
} usim_trace_opts;
/* usim_simulate with trace options (topt may be NULL: GPU 0). */
int usim_simulate_ex(usim_sim *s, const usim_model *m, const usim_job *j, FILE *trace,
                     const usim_trace_opts *topt, usim_result *r);
/* Memory per GPU only (no timing); *fits set. */
int usim_memory_estimate(const usim_platform *p, const usim_model *m, const usim_job *j,
                         usim_memory *mem, int *fits);
/* Longest sequence (a multiple of the method's granularity) that fits in
 * memory (HBM and, with offload, host memory); 0 if none. */
int usim_max_seq(const usim_platform *p, const usim_model *m, const usim_job *j,
                 int64_t *seq);
/* usim_max_seq and the limit (USIM_BIND_*) that stops one granule more
 * (*bind may be NULL). */
int usim_max_seq_ex(const usim_platform *p, const usim_model *m, const usim_job *j,
                    int64_t *seq, int *bind);

/* A closed-form estimate of one iteration's time (compute as simulated,
 * sequence-parallel traffic at its link class's bandwidth, pipeline bubble;
 * see sim/estimate.c): a ranking device for `plan`, not a prediction. */
int usim_estimate(const usim_platform *p, const usim_model *m, const usim_job *j, double *seconds);
/* The pipeline bubble factor of usim_estimate for a resolved job with micro
 * micro-batches per step: 1 + (pp - 1) / (V micro), V the virtual stages per
 * rank (1 for 1F1B).  usim_estimate is the stage's work times it. */
double usim_estimate_bubble_factor(const usim_job *j, double micro);

/* Megatron-LM FLOPs of one iteration: 24 or 32 (full recompute) *
 * B s L h^2 (1 + s/(6h) + V/(16 L h)) * 3 ... see doc/simulator.md. */
double usim_megatron_flops(const usim_model *m, int64_t global_batch, int full_recompute);

/* Model FLOPs of one iteration (forward x 3, no recompute; causal attention
 * counts the visible pairs only): the numerator of MFU. */
double usim_model_flops(const usim_model *m, int64_t global_batch);

/* Per-GPU bytes sent by the sequence-parallel collectives of one layer, for
 * GPU `gpu`: sent[0] forward, sent[1] backward (recompute excluded).
 * usim_sp_layer_bytes counts the transfers the simulator generates (the
 * sequence-parallel operations of layer 0 in the program the simulation
 * runs, with the same collective descriptors);
 * usim_analytic_sp_bytes evaluates the closed-form formulas of doc/simulator.md
 * (Ulysses: uly_plan_volume).  The two must agree. */
int usim_sp_layer_bytes(usim_sim *s, const usim_model *m, const usim_job *j, int gpu,
                        double sent[2]);
int usim_analytic_sp_bytes(const usim_model *m, const usim_job *j, int gpu, double sent[2]);


/* ------------------------------------------------------- attention job */

/*
 * One distributed attention forward + backward as `ulysses attn` runs it on
 * `gpus` ranks (doc/validation.md): Ulysses all-to-alls of q, k, v (one after
 * the other) -> attention of the rank's heads over the whole sequence -> o
 * back; dO in -> attention backward -> dq, dk, dv back.  The collectives are
 * the ones a training job's layer runs (same descriptors, same plan-layer
 * volumes), simulated on the idle cluster; attention time is FLOPs over
 * peak x attention_efficiency (backward: 2.5x the FLOPs at
 * attention_bwd_efficiency).  Times are those of the most loaded rank, 0.
 */
typedef struct usim_attn_job {
    int64_t batch, seq, heads, kv_heads, head_dim;
    int causal;
    usim_dtype dtype;
    int gpus;
    usim_coll_type a2a;   /* USIM_A2A_DIRECT or USIM_A2A_PAIRWISE */
} usim_attn_job;

enum { USIM_PH_FWD_A2A_IN = 0, USIM_PH_FWD_ATTN, USIM_PH_FWD_A2A_OUT,
       USIM_PH_BWD_A2A_IN, USIM_PH_BWD_ATTN, USIM_PH_BWD_A2A_OUT, USIM_NPHASE };

typedef struct usim_attn_result {
    double phase_s[USIM_NPHASE];
    double fwd_s, bwd_s, iter_s;      /* sums of the phases */
    double a2a_s[8];                  /* each all-to-all, ULY_A2A_* order (q k v o do dq dk dv) */
    uint64_t sent[8], recv[8];        /* bytes GPU `gpu` sends / receives in each all-to-all */
    double sent_class[USIM_NCLASS];   /* bytes GPU `gpu` sends per link class, whole job */
} usim_attn_result;

/* Simulate the job; byte counters are those of GPU `gpu` (0 <= gpu < gpus). */
int usim_attn_simulate(const usim_platform *p, const usim_attn_job *j, int gpu, usim_attn_result *r);

#ifdef __cplusplus
}
#endif

#endif /* USIM_H */
