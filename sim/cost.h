/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cost.h -- the analytic side of a job (private to libusim): tensor shapes
 * held by the representative GPU, FLOPs and HBM traffic per layer, memory per
 * GPU.  No simulation here: pure functions of (model, resolved job).
 */
#ifndef USIM_COST_H
#define USIM_COST_H

#include "ulysses_plan.h"
#include "usim.h"

#define USIM_ATTN_BWD_FACTOR 2.5   /* FlashAttention-2 backward: 5 matmuls vs 2 */

typedef struct usim_shape {
    int64_t b, s, h, H, Hkv, d, hkv, F, V, e, L;
    int64_t hq;            /* the model's query width heads x d (h unless head_dim says otherwise) */
    int64_t Ls;            /* layers of one pipeline stage (L / pp) */
    int P, u, r;           /* SP degree; usp: ulysses x ring degrees (ulysses: u = P) */
    int Z;                 /* ZeRO / data-parallel group size */
    int T;                 /* tensor-parallel degree composed with the method (1 for megatron-sp,
                              whose TP is P); H and Hkv below are then per tensor-parallel rank */
    int64_t n;             /* tokens of context-parallel rank 0 (sequence layout) */
    int64_t tok;           /* tokens of GPU 0 in the sequence layout: n split T ways (Megatron
                              sequence parallelism around the attention) */
    int64_t hq_l, kv_l;    /* query / KV heads of rank 0 in the attention layout */
    int64_t tq, tk;        /* query / key tokens of rank 0 in the attention layout */
    double layer_params;   /* parameters of one layer held by a GPU (before ZeRO) */
    double emb_params;
    double gpu_params;     /* all parameters held by a GPU (before ZeRO) */
} usim_shape;

/* One GEMM C (M x N) = A (M x K) B (K x N), forward. */
typedef struct usim_gemm {
    double M, N, K;
} usim_gemm;

typedef struct usim_flops {
    double qkv, out, mlp, head;    /* GEMM FLOPs, forward, per GPU */
    /* the GEMMs behind them (rank 0): QKV, output projection, MLP in (x2 for
     * SwiGLU, as one GEMM of twice the width), MLP out, LM head */
    usim_gemm g_qkv, g_out, g_fc1, g_fc2, g_head;
    double attn_heads, attn_tq;    /* attention kernel: heads held, query tokens per block row
                                      (ring: per step) */
    double attn;                   /* attention FLOPs, forward, per GPU (total over ring steps) */
    double attn_step[2];           /* ring: [0] diagonal step, [1] other steps (forward) */
    double elem_bytes;             /* elementwise HBM traffic per layer forward */
    double head_bytes;
} usim_flops;

/* The plan layer's attention descriptor for the model's heads over seq tokens. */
void usim_attn_desc(const usim_shape *x, int64_t seq, uly_attn_desc *a);
/* The plan layer's layout of one all-to-all group of U members over a chunk
 * of seq tokens (the heads of x): its uly_layout_a2a_block gives the
 * elements each member hands each other. */
int usim_a2a_layout(const usim_shape *x, int64_t seq, int U, uly_layout *L);

/* Ring-attention hops of one GPU (the collectives USIM_C_HOP_F, _B, _DKV). */
enum { USIM_HOP_KV = 0,    /* forward: K and V */
       USIM_HOP_BWD,       /* backward: K, V, dK, dV */
       USIM_HOP_DKV_HOME,  /* dK, dV returned to their owner after the last step */
       USIM_NHOP };
/* Elements one GPU sends in one hop of kind `hop`, from the plan layer's hop
 * function (uly_plan_ring_hop_elems, the volumes the MPI library measures):
 * the hop of ring position 0 (the largest chunk) at step 0, or the return of
 * its shard at the last step, in the busiest ring (usp: the group member
 * whose heads need the most KV heads).  The simulator makes every hop of
 * every pass the same (GPU rings pass every shard: no mask is applied).
 * Heads per tensor-parallel rank from x; m ring, ring-zigzag or usp (U x R);
 * 0 for anything else.  Bytes: times x->e. */
uint64_t usim_ring_hop_elems(const usim_shape *x, uly_method m, int U, int R, int hop);
void usim_shape_make(const usim_model *m, const usim_job *j, usim_shape *x);
/* causal: whether the kernels exploit the causal mask (skip masked blocks). */
void usim_flops_make(const usim_model *m, const usim_job *j, const usim_shape *x, int causal,
                     usim_flops *f);
void usim_memory_model(const usim_platform *p, const usim_model *m, const usim_job *j,
                       const usim_shape *x, usim_memory *mem);
/* Seconds of one layer's unfused attention on rank 0 for job j (compute.c's
 * kernel over x's shape): the forward (bwd 0) or the backward (bwd 1), the
 * latter with the core's recomputation under selective recompute (its scores
 * are not stored).  The program and the estimate both time it so. */
double usim_attn_unfused_job_s(const usim_platform *p, const usim_model *m, const usim_job *j,
                               const usim_shape *x, int bwd);
/* Score elements of one layer's unfused attention on rank 0: b x heads held
 * x tq x tk (every query-key pair; doc/simulator.md, "Unfused attention"). */
static inline double usim_unfused_elems(const usim_shape *x)
{
    return (double)x->b * (double)x->hq_l * (double)x->tq * (double)x->tk;
}

#endif
