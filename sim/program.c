/* SPDX-License-Identifier: Apache-2.0 */
/*
 * program.c -- per-method layer programs: the operations of one training
 * iteration for Ulysses, Megatron-SP, ring (basic, zigzag) and USP, with
 * ZeRO parameter gathers (prefetched two layers ahead), gradient reductions,
 * full or selective recompute and the optimizer step.  Compute durations are
 * FLOPs over the platform's achieved rates and bytes over HBM bandwidth.
 *
 * Not here: how the operations are scheduled (opsched.c), which collectives
 * exist and how long they take (jobcoll.c), shapes and FLOPs (cost.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compute.h"
#include "program.h"
#include "usim.h"
#include "usim_internal.h"

/* ------------------------------------------------------------ building */

/* Kernel times (compute.c); k: number of memory-bound kernels. */
static usim_time t_gemm(const usim_prog *b, usim_gemm g)
{
    return usim_ps(usim_gemm_s(b->p, b->m->dtype, g));
}
static usim_time t_gemm_bwd(const usim_prog *b, usim_gemm g)
{
    return usim_ps(usim_gemm_bwd_s(b->p, b->m->dtype, g));
}
/* Unfused attention (usim_job.attn_kernel): every (query, key) pair of the
 * rank's heads has its score in HBM, the causal mask applied in the softmax.
 * Selective recompute does not store the scores (cost.c): the backward
 * recomputes the core's forward first. */
static usim_time t_attn_unfused(const usim_prog *b, int bwd)
{
    return usim_ps(usim_attn_unfused_job_s(b->p, b->m, b->j, b->x, bwd));
}
static usim_time t_attn(const usim_prog *b, double fl)
{
    if (b->j->attn_kernel == USIM_ATTN_UNFUSED)
        return t_attn_unfused(b, 0);
    return usim_ps(usim_attn_s(b->p, b->m->dtype, fl, (double)b->x->b, b->f->attn_heads,
                               b->f->attn_tq, (double)b->x->d));
}
static usim_time t_attn_bwd(const usim_prog *b, double fl)
{
    if (b->j->attn_kernel == USIM_ATTN_UNFUSED)
        return t_attn_unfused(b, 1);
    return usim_ps(usim_attn_bwd_s(b->p, b->m->dtype, fl, (double)b->x->b, b->f->attn_heads,
                                   b->f->attn_tq, (double)b->x->d));
}
static usim_time t_mem(const usim_prog *b, double bytes, int k)
{
    return usim_ps(usim_mem_s(b->p, bytes, k));
}
/* the GEMMs of the output projection and the MLP, forward and backward */
static usim_time t_outmlp(const usim_prog *b)
{
    return t_gemm(b, b->f->g_out) + t_gemm(b, b->f->g_fc1) + t_gemm(b, b->f->g_fc2);
}
static usim_time t_outmlp_bwd(const usim_prog *b)
{
    return t_gemm_bwd(b, b->f->g_out) + t_gemm_bwd(b, b->f->g_fc1) + t_gemm_bwd(b, b->f->g_fc2);
}

static int comp(usim_prog *b, usim_time dur, int layer, const char *name, int d0, int d1)
{
    int id = usim_graph_add(&b->g, USIM_ST_COMPUTE, dur, -1, -1, layer, name, d0, d1, -1);
    b->last_c = id;
    return id;
}

/* Isolated utilization of each link class of the busiest GPU during a
 * collective: bytes / (duration x bandwidth), at most 1. */
static void set_util(usim_prog *b, int id, int cid)
{
    if (id < 0)
        return;
    const usim_coll_result *r = &b->jc->r[cid];
    double bw[USIM_NCLASS] = {usim_nvl_Bps(b->p), usim_nic_Bps(b->p)};
    for (int c = 0; c < USIM_NCLASS; c++) {
        double u = r->duration > 0 ? (double)r->max_sent[c] / (usim_sec(r->duration) * bw[c]) : 0;
        b->g.ops[id].u[c] = u > 1 ? 1 : u;
    }
}

static int comm(usim_prog *b, int stream, int kind, int cid, int layer, const char *name, int d0, int d1)
{
    int id = usim_graph_add(&b->g, stream, b->jc->r[cid].duration, kind, cid, layer, name, d0, d1, -1);
    set_util(b, id, cid);
    return id;
}

/* A ring-attention pass of R steps: block 0 (the diagonal) and the chain of
 * R-1 hops start together after `dep`; blocks 1..R-1 form one tail op whose
 * duration is exact for the chained dependencies (see usim_graph_start).  Returns
 * the tail (or block 0 when R == 1); *hops gets the hop chain (-1 if none). */
static int ring_pass(usim_prog *b, int l, int R, double step0, double step, int hop_cid, int dep,
                     const char *name, int *hops)
{
    const int bwd = hop_cid == USIM_C_HOP_B;   /* backward blocks run at the backward rate */
    int b0 = comp(b, bwd ? t_attn_bwd(b, step0) : t_attn(b, step0), l, name, dep, -1);
    *hops = -1;
    if (R < 2)
        return b0;
    usim_time H = b->jc->r[hop_cid].duration;
    int hc = usim_graph_add(&b->g, USIM_ST_SP, (R - 1) * H, USIM_KIND_SP, hop_cid, l, "ring hops", dep, -1, -1);
    if (hc < 0)
        return -1;
    b->g.ops[hc].mult = R - 1;
    set_util(b, hc, hop_cid);
    int t = comp(b, 0, l, name, b0, -1);
    if (t < 0)
        return -1;
    b->g.ops[t].sdep = hc;
    b->g.ops[hc].tail = t;
    b->g.ops[t].tail_R = R;
    b->g.ops[t].tail_B = bwd ? t_attn_bwd(b, step) : t_attn(b, step);
    b->g.ops[t].tail_H = H;
    *hops = hc;
    return t;
}

/* ------------------------------------------------------------ composed tensor parallelism */

/* Megatron tensor parallelism with sequence parallelism around a context-
 * parallel method (x->T > 1): the layernorm regions hold tok = n / T tokens;
 * an all-gather over the tensor group before the QKV and the MLP GEMMs, a
 * reduce-scatter after the output projection and the MLP.  Each returns the
 * op, or -1 when there is no tensor parallelism. */
static int tp_coll(usim_prog *b, int cid, int l, const char *name, int d0, int d1)
{
    if (b->x->T < 2 || b->j->method == ULY_METHOD_MEGATRON_SP)
        return -1;
    int id = comm(b, USIM_ST_SP, USIM_KIND_SP, cid, l, name, d0, d1);
    b->last_sp = id;
    return id;
}

/* Output projection and MLP forward after the attention (dep: its last op). */
static int post_attn_fwd(usim_prog *b, int l, int dep, int recompute)
{
    const usim_flops *f = b->f;
    if (b->x->T < 2)
        return comp(b, t_outmlp(b) + t_mem(b, f->elem_bytes * 0.7, 4), l,
                    recompute ? "recompute: out-proj + MLP" : "out-proj + MLP", dep, -1);
    int c = comp(b, t_gemm(b, f->g_out), l, recompute ? "recompute: out-proj" : "out-proj", dep, -1);
    int a = tp_coll(b, USIM_C_RS, l, "tp reduce-scatter", c, -1);
    a = tp_coll(b, USIM_C_AG, l, "tp all-gather", a, -1);
    c = comp(b, t_gemm(b, f->g_fc1) + t_gemm(b, f->g_fc2) + t_mem(b, f->elem_bytes * 0.7, 4), l,
             recompute ? "recompute: MLP" : "MLP", a, -1);
    tp_coll(b, USIM_C_RS, l, "tp reduce-scatter", c, -1);
    return c;
}

/* MLP and output projection backward before the attention's backward. */
static int pre_attn_bwd(usim_prog *b, int l, int param_dep, double sel)
{
    const usim_flops *f = b->f;
    if (b->x->T < 2)
        return comp(b, t_outmlp_bwd(b) + t_mem(b, 2 * f->elem_bytes * 0.7 + sel, 4), l,
                    "MLP + out-proj backward", param_dep, -1);
    int a = tp_coll(b, USIM_C_AG, l, "tp all-gather dy", b->last_c, param_dep);
    int c = comp(b, t_gemm_bwd(b, f->g_fc1) + t_gemm_bwd(b, f->g_fc2) + t_mem(b, 2 * f->elem_bytes * 0.7 + sel, 4), l, "MLP backward",
                 a, param_dep);
    a = tp_coll(b, USIM_C_RS, l, "tp reduce-scatter dx", c, -1);
    a = tp_coll(b, USIM_C_AG, l, "tp all-gather dy", a, -1);
    return comp(b, t_gemm_bwd(b, f->g_out), l, "out-proj backward", a, -1);
}

/* Forward of one layer (also used for full recompute).  Returns the last op. */
static int layer_fwd(usim_prog *b, int l, int param_dep, int recompute)
{
    const usim_flops *f = b->f;
    const usim_job *j = b->j;
    int prev = b->last_c;
    int c;
    switch (j->method) {
    case ULY_METHOD_ULYSSES: case ULY_METHOD_USP: {
        int g = tp_coll(b, USIM_C_AG, l, "tp all-gather x", prev, param_dep);
        c = comp(b, t_gemm(b, f->g_qkv) + t_mem(b, f->elem_bytes * 0.3, 2), l,
                 recompute ? "recompute: layernorm + QKV" : "layernorm + QKV", g >= 0 ? g : param_dep, prev);
        comm(b, USIM_ST_SP, USIM_KIND_SP, USIM_C_A2A0 + ULY_A2A_Q, l, "all-to-all q", c, -1);
        comm(b, USIM_ST_SP, USIM_KIND_SP, USIM_C_A2A0 + ULY_A2A_K, l, "all-to-all k", c, -1);
        int a = comm(b, USIM_ST_SP, USIM_KIND_SP, USIM_C_A2A0 + ULY_A2A_V, l, "all-to-all v", c, -1);
        if (j->method == ULY_METHOD_ULYSSES) {
            c = comp(b, t_attn(b, f->attn), l, recompute ? "recompute: attention" : "attention", a, -1);
        } else {
            int hops;
            c = ring_pass(b, l, b->x->r, f->attn_step[0], f->attn_step[1], USIM_C_HOP_F, a,
                          "attention blocks", &hops);
        }
        a = comm(b, USIM_ST_SP, USIM_KIND_SP, USIM_C_A2A0 + ULY_A2A_O, l, "all-to-all o", c, -1);
        c = post_attn_fwd(b, l, a, recompute);
        break;
    }
    case ULY_METHOD_MEGATRON_SP: {
        int a = comm(b, USIM_ST_SP, USIM_KIND_SP, USIM_C_AG, l, "all-gather x", prev, param_dep);
        c = comp(b, t_gemm(b, f->g_qkv) + t_mem(b, f->elem_bytes * 0.3, 2), l,
                 recompute ? "recompute: QKV" : "layernorm + QKV", a, param_dep);
        c = comp(b, t_attn(b, f->attn), l, recompute ? "recompute: attention" : "attention", c, -1);
        c = comp(b, t_gemm(b, f->g_out), l, "out-proj", c, -1);
        a = comm(b, USIM_ST_SP, USIM_KIND_SP, USIM_C_RS, l, "reduce-scatter", c, -1);
        a = comm(b, USIM_ST_SP, USIM_KIND_SP, USIM_C_AG, l, "all-gather", a, -1);
        c = comp(b, t_gemm(b, f->g_fc1) + t_gemm(b, f->g_fc2) + t_mem(b, f->elem_bytes * 0.7, 4), l,
                 recompute ? "recompute: MLP" : "MLP", a, -1);
        a = comm(b, USIM_ST_SP, USIM_KIND_SP, USIM_C_RS, l, "reduce-scatter", c, -1);
        b->last_sp = a;
        /* the next layer's all-gather depends on this reduce-scatter (FIFO) */
        c = a;
        break;
    }
    case ULY_METHOD_RING: case ULY_METHOD_ZIGZAG: {
        int g = tp_coll(b, USIM_C_AG, l, "tp all-gather x", prev, param_dep);
        c = comp(b, t_gemm(b, f->g_qkv) + t_mem(b, f->elem_bytes * 0.3, 2), l,
                 recompute ? "recompute: layernorm + QKV" : "layernorm + QKV", g >= 0 ? g : param_dep, prev);
        int hops;
        ring_pass(b, l, b->x->P, f->attn_step[0], f->attn_step[1], USIM_C_HOP_F, c, "attention blocks",
                  &hops);
        c = post_attn_fwd(b, l, -1, recompute);
        break;
    }
    case ULY_METHOD_ALLGATHER: {
        int g = tp_coll(b, USIM_C_AG, l, "tp all-gather x", prev, param_dep);
        c = comp(b, t_gemm(b, f->g_qkv) + t_mem(b, f->elem_bytes * 0.3, 2), l,
                 recompute ? "recompute: layernorm + QKV" : "layernorm + QKV", g >= 0 ? g : param_dep, prev);
        int a = b->jc->have[USIM_C_KV_AG]
                    ? comm(b, USIM_ST_SP, USIM_KIND_SP, USIM_C_KV_AG, l, "all-gather k, v", c, -1)
                    : c;
        c = comp(b, t_attn(b, f->attn), l, recompute ? "recompute: attention" : "attention", a, -1);
        c = post_attn_fwd(b, l, c, recompute);
        break;
    }
    default:
        c = -1;
        break;
    }
    return c;
}

/* Backward of one layer.  Returns the op after which the layer's weight
 * gradients are complete. */
static int layer_bwd(usim_prog *b, int l, int param_dep)
{
    const usim_flops *f = b->f;
    const usim_job *j = b->j;
    int c, a;
    double sel = j->recompute == USIM_RC_SELECTIVE ? f->elem_bytes * 0.5 : 0;
    switch (j->method) {
    case ULY_METHOD_ULYSSES: case ULY_METHOD_USP: {
        c = pre_attn_bwd(b, l, param_dep, sel);
        a = comm(b, USIM_ST_SP, USIM_KIND_SP, USIM_C_A2A0 + ULY_A2A_DO, l, "all-to-all do", c, -1);
        if (j->method == ULY_METHOD_ULYSSES) {
            c = comp(b, t_attn_bwd(b, USIM_ATTN_BWD_FACTOR * f->attn), l, "attention backward", a, -1);
        } else {
            int hops;
            ring_pass(b, l, b->x->r, USIM_ATTN_BWD_FACTOR * f->attn_step[0],
                      USIM_ATTN_BWD_FACTOR * f->attn_step[1], USIM_C_HOP_B, a, "attention blocks backward",
                      &hops);
            if (b->jc->have[USIM_C_HOP_DKV])
                comm(b, USIM_ST_SP, USIM_KIND_SP, USIM_C_HOP_DKV, l, "ring hop dkv home", b->last_c, -1);
            c = b->last_c;
        }
        a = comm(b, USIM_ST_SP, USIM_KIND_SP, USIM_C_A2A0 + ULY_A2A_DQ, l, "all-to-all dq", c, -1);
        comm(b, USIM_ST_SP, USIM_KIND_SP, USIM_C_A2A0 + ULY_A2A_DK, l, "all-to-all dk", c, -1);
        a = comm(b, USIM_ST_SP, USIM_KIND_SP, USIM_C_A2A0 + ULY_A2A_DV, l, "all-to-all dv", c, -1);
        c = comp(b, t_gemm_bwd(b, f->g_qkv) + t_mem(b, 2 * f->elem_bytes * 0.3, 2), l,
                 "QKV + layernorm backward", a, -1);
        tp_coll(b, USIM_C_RS, l, "tp reduce-scatter dx", c, -1);
        break;
    }
    case ULY_METHOD_MEGATRON_SP: {
        a = comm(b, USIM_ST_SP, USIM_KIND_SP, USIM_C_AG, l, "all-gather dy", b->last_c, param_dep);
        c = comp(b, t_gemm_bwd(b, f->g_fc1) + t_gemm_bwd(b, f->g_fc2) + t_mem(b, 2 * f->elem_bytes * 0.7 + sel, 4), l,
                 "MLP backward", a, param_dep);
        a = comm(b, USIM_ST_SP, USIM_KIND_SP, USIM_C_RS, l, "reduce-scatter dx", c, -1);
        a = comm(b, USIM_ST_SP, USIM_KIND_SP, USIM_C_AG, l, "all-gather dy", a, -1);
        c = comp(b, t_gemm_bwd(b, f->g_out), l, "out-proj backward", a, -1);
        c = comp(b, t_attn_bwd(b, USIM_ATTN_BWD_FACTOR * f->attn), l, "attention backward", c, -1);
        c = comp(b, t_gemm_bwd(b, f->g_qkv) + t_mem(b, 2 * f->elem_bytes * 0.3, 2), l,
                 "QKV + layernorm backward", c, -1);
        a = comm(b, USIM_ST_SP, USIM_KIND_SP, USIM_C_RS, l, "reduce-scatter dx", c, -1);
        /* the next (lower) layer's backward needs dx */
        b->last_c = c;
        b->last_sp = a;
        return c;
    }
    case ULY_METHOD_RING: case ULY_METHOD_ZIGZAG: {
        c = pre_attn_bwd(b, l, param_dep, sel);
        int hops;
        ring_pass(b, l, b->x->P, USIM_ATTN_BWD_FACTOR * f->attn_step[0],
                  USIM_ATTN_BWD_FACTOR * f->attn_step[1], USIM_C_HOP_B, c, "attention blocks backward", &hops);
        a = b->jc->have[USIM_C_HOP_DKV]
                ? comm(b, USIM_ST_SP, USIM_KIND_SP, USIM_C_HOP_DKV, l, "ring hop dkv home", b->last_c, -1)
                : b->last_c;
        c = comp(b, t_gemm_bwd(b, f->g_qkv) + t_mem(b, 2 * f->elem_bytes * 0.3, 2), l,
                 "QKV + layernorm backward", a, -1);
        tp_coll(b, USIM_C_RS, l, "tp reduce-scatter dx", c, -1);
        break;
    }
    case ULY_METHOD_ALLGATHER: {
        c = pre_attn_bwd(b, l, param_dep, sel);
        c = comp(b, t_attn_bwd(b, USIM_ATTN_BWD_FACTOR * f->attn), l, "attention backward", c, -1);
        a = b->jc->have[USIM_C_DKV_RS]
                ? comm(b, USIM_ST_SP, USIM_KIND_SP, USIM_C_DKV_RS, l, "reduce-scatter dk, dv", c, -1)
                : c;
        c = comp(b, t_gemm_bwd(b, f->g_qkv) + t_mem(b, 2 * f->elem_bytes * 0.3, 2), l,
                 "QKV + layernorm backward", a, -1);
        tp_coll(b, USIM_C_RS, l, "tp reduce-scatter dx", c, -1);
        break;
    }
    default:
        c = -1;
        break;
    }
    return c;
}

/* ------------------------------------------------------------ long context */

/* The extra MLP forward TiledMLP runs in each layer's backward: K shards of
 * ceil(tokens / K) rows through the MLP's GEMMs (0 without tiling). */
static usim_time t_tiled_mlp(const usim_prog *b)
{
    double M = b->f->g_fc1.M;
    int64_t K = usim_tiled_mlp_shards(b->j, (int64_t)M, b->x->h);
    if (K <= 0)
        return 0;
    usim_gemm g1 = b->f->g_fc1, g2 = b->f->g_fc2;
    g1.M = g2.M = ceil(M / (double)K);
    return (usim_time)K * (t_gemm(b, g1) + t_gemm(b, g2));
}

/* Compute of one layer's forward and backward (with recompute) the host
 * copies of that layer overlap (doc/simulator.md: the copies of a layer run
 * while it computes; what is longer waits). */
static double layer_compute_s(const usim_prog *b, int bwd)
{
    const usim_flops *f = b->f;
    usim_time fwd = t_gemm(b, f->g_qkv) + t_attn(b, f->attn) + t_outmlp(b);
    if (!bwd)
        return usim_sec(fwd);
    usim_time t = t_gemm_bwd(b, f->g_qkv) + t_attn_bwd(b, USIM_ATTN_BWD_FACTOR * f->attn) + t_outmlp_bwd(b) +
                  t_tiled_mlp(b);
    if (b->j->recompute == USIM_RC_FULL)
        t += fwd;
    return usim_sec(t);
}

/* Host-link waits of one layer: activation checkpoint (forward: to the host;
 * backward: the next one back) and the parameter shard (ZeRO-3 offload),
 * against the layer's compute.  Adds the wait op when it is positive. */
static void host_wait(usim_prog *b, int l, int bwd)
{
    const usim_job *j = b->j;
    double link = usim_host_link_Bps(b->p);
    if (!(j->offload & (USIM_OFFLOAD_ACT | USIM_OFFLOAD_PARAMS)) || !(link > 0))
        return;
    double tok = j->method == ULY_METHOD_MEGATRON_SP ? (double)b->x->s / b->x->P : (double)b->x->tok;
    double ckpt = j->offload & USIM_OFFLOAD_ACT ? (double)b->x->b * tok * (double)b->x->h * (double)b->x->e / link : 0;
    double par = j->offload & USIM_OFFLOAD_PARAMS ? 2 * b->x->layer_params / b->x->Z / link : 0;
    double t = layer_compute_s(b, bwd);
    /* forward: checkpoints go out, parameters come in (opposite directions);
     * backward: both come in */
    double off = ckpt > t ? ckpt - t : 0;
    double both = bwd ? ckpt + par : (ckpt > par ? ckpt : par);
    double all = both > t ? both - t : 0;
    b->lc_off_copy_s += ckpt;
    b->lc_off_s += off;
    b->lc_param_s += all - off;
    if (all > 0)
        comp(b, usim_ps(all), l, "offload: wait for the host link", -1, -1);
}

int usim_prog_init(usim_prog *b, const usim_platform *p, const usim_model *m, const usim_job *j,
                   const usim_shape *x, const usim_flops *f, const usim_jobcoll *jc)
{
    memset(b, 0, sizeof *b);
    b->p = p;
    b->m = m;
    b->j = j;
    b->x = x;
    b->f = f;
    b->jc = jc;
    b->layer_last_c = usim_malloc((size_t)m->layers * sizeof(int));
    b->bwd_last_c = usim_malloc((size_t)m->layers * sizeof(int));
    if (!b->layer_last_c || !b->bwd_last_c) {
        usim_prog_free(b);
        return usim_set_error(USIM_ENOMEM, "out of memory");
    }
    return USIM_OK;
}

void usim_prog_free(usim_prog *b)
{
    free(b->layer_last_c);
    free(b->bwd_last_c);
    b->layer_last_c = b->bwd_last_c = NULL;
    usim_graph_free(&b->g);
    memset(&b->g, 0, sizeof b->g);
}

int usim_program_build(usim_prog *b, int micro_steps)
{
    const usim_job *j = b->j;
    const usim_jobcoll *jc = b->jc;
    const usim_flops *f = b->f;
    int pm = b->pp_mode;
    int L = pm ? b->pp_layers : (int)b->x->Ls;   /* the layers of one pipeline stage (or chunk) */
    int has_emb = !pm || b->pp_emb, has_head = !pm || b->pp_head;
    int z3 = j->zero >= 3 && jc->have[USIM_C_Z_AG];
    b->last_c = -1;
    b->last_grad = -1;
    b->last_sp = -1;
    if (pm)
        micro_steps = 1;
    for (int ms = 0; ms < micro_steps; ms++) {
        int last_ms = ms == micro_steps - 1;
        /* pipeline chunks reduce per micro-batch (ZeRO >= 2); the rank's step once (ZeRO < 2) */
        int reduce = pm == USIM_PP_CHUNK ? j->zero >= 2 : pm == USIM_PP_RANK ? j->zero < 2
                                                                               : (j->zero >= 2) || last_ms;
        int emb_grads = reduce && (has_emb || has_head);
        /* forward */
        int emb = -1;
        if (z3 && (has_emb || has_head))   /* the input embedding, or the LM head's (tied) copy */
            emb = comm(b, USIM_ST_PARAM, USIM_KIND_PARAM, USIM_C_E_AG, -1, "gather embedding", -1, -1);
        for (int l = 0; l < L; l++) {
            int pd = -1;
            if (z3) {
                int gate = l >= 2 ? b->layer_last_c[l - 2] : -1;
                pd = comm(b, USIM_ST_PARAM, USIM_KIND_PARAM, USIM_C_Z_AG, l, "gather layer params", gate, -1);
            }
            b->g.pass = USIM_PASS_FWD;
            b->layer_last_c[l] = layer_fwd(b, l, pd, 0);
            b->g.pass = USIM_PASS_OTHER;
            host_wait(b, l, 0);
        }
        if (has_head)
            comp(b, t_gemm(b, f->g_head) + t_mem(b, f->head_bytes / 2, 2), L, "LM head + loss", emb, -1);
        b->fwd_ops = b->g.n;
        /* backward */
        if (has_head)
            comp(b, t_gemm_bwd(b, f->g_head) + t_mem(b, f->head_bytes / 2, 2), L, "LM head backward", -1, -1);
        if (emb_grads && jc->have[USIM_C_E_RS])
            b->last_grad = comm(b, USIM_ST_GRAD, USIM_KIND_GRAD, USIM_C_E_RS, L, "reduce-scatter embedding grads",
                                b->last_c, -1);
        for (int l = L - 1; l >= 0; l--) {
            int pd = -1;
            if (z3) {
                int gate = l + 2 < L ? b->bwd_last_c[l + 2] : -1;
                pd = comm(b, USIM_ST_PARAM, USIM_KIND_PARAM, USIM_C_Z_AG, l, "gather layer params", gate, -1);
            }
            b->g.pass = USIM_PASS_RECOMPUTE;
            if (j->recompute == USIM_RC_FULL)
                layer_fwd(b, l, pd, 1);
            b->g.pass = USIM_PASS_BWD;
            usim_time tm = t_tiled_mlp(b);
            if (tm > 0) {
                comp(b, tm, l, "tiled MLP: forward again", pd, -1);
                b->lc_tiled_s += usim_sec(tm);
            }
            int done = layer_bwd(b, l, pd);
            b->g.pass = USIM_PASS_OTHER;
            host_wait(b, l, 1);
            b->bwd_last_c[l] = done;
            if (reduce) {
                if (jc->have[USIM_C_Z_RS])
                    b->last_grad = comm(b, USIM_ST_GRAD, USIM_KIND_GRAD, USIM_C_Z_RS, l, "reduce-scatter grads",
                                        done, -1);
                else if (jc->have[USIM_C_Z_AR])
                    b->last_grad = comm(b, USIM_ST_GRAD, USIM_KIND_GRAD, USIM_C_Z_AR, l, "all-reduce grads",
                                        done, -1);
            }
        }
        if (emb_grads && jc->have[USIM_C_E_AR])
            b->last_grad = comm(b, USIM_ST_GRAD, USIM_KIND_GRAD, USIM_C_E_AR, -1, "all-reduce embedding grads",
                                b->last_c, -1);
    }
    b->bwd_ops = b->g.n;
    if (pm == USIM_PP_CHUNK)
        return b->g.err;
    /* optimizer step: Adam on the local shard, HBM-bound (~36 bytes per parameter) */
    double held = b->x->gpu_params;
    if (pm)   /* a pipeline rank: its layers, and one embedding-sized matrix at either end */
        held = b->pp_layers * b->x->layer_params +
               (has_emb || has_head ? b->x->emb_params / (b->m->tied_embeddings ? 1 : 2) : 0);
    double local = j->zero >= 1 ? held / b->x->Z : held;
    int opt;
    if (j->offload & USIM_OFFLOAD_OPTIM) {
        /* CPU Adam (DeepSpeed's) on the node's CPUs for the node's GPUs' shards:
         * about 12 FLOPs and 30 bytes (fp32 parameter, gradient, m, v read,
         * three written, the bf16 copy) per parameter; then the updated bf16
         * shard back over the host link */
        int gpn = j->gpus < b->p->gpus_per_node ? j->gpus : b->p->gpus_per_node;
        double node = local * gpn;
        double tf = 12 * node / (b->p->host_flops * b->p->host_cpu_eff);
        double tm = 30 * node / (b->p->host_mem_Bps * b->p->host_cpu_eff);
        double adam = tf > tm ? tf : tm;
        double back = 2 * local / usim_host_link_Bps(b->p);
        b->lc_adam_s += adam;
        b->lc_param_s += back;
        opt = comp(b, usim_ps(adam + back), -1, "optimizer step (CPU Adam, parameters back)", b->last_grad,
                   b->last_sp);
    } else {
        opt = comp(b, t_mem(b, 36 * local, 1), -1, "optimizer step", b->last_grad, b->last_sp);
    }
    if (jc->have[USIM_C_POST_AG])
        comm(b, USIM_ST_PARAM, USIM_KIND_PARAM, USIM_C_POST_AG, -1, "gather updated params", opt, -1);
    return b->g.err;
}