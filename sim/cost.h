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
void usim_shape_make(const usim_model *m, const usim_job *j, usim_shape *x);
/* causal: whether the kernels exploit the causal mask (skip masked blocks). */
void usim_flops_make(const usim_model *m, const usim_job *j, const usim_shape *x, int causal,
                     usim_flops *f);
void usim_memory_model(const usim_platform *p, const usim_model *m, const usim_job *j,
                       const usim_shape *x, usim_memory *mem);

#endif
