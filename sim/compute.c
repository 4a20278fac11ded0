/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compute.c -- the compute model: kernel times from shapes.
 *
 *   GEMM (M, N, K):  tiles = ceil(M / tm) ceil(N / tn), waves = ceil(tiles / SMs);
 *                    compute = waves * 2 tm tn K / (rate / SMs) * (1 + k_half / K)
 *                    memory  = (M K + K N + M N) e / HBM bandwidth
 *                    time    = max(compute, memory) + launch
 *                    rate = peak * gemm_efficiency: the achieved rate of a large,
 *                    well-shaped GEMM (a measured rate can be written as peak =
 *                    rate, efficiency = 1)
 *   attention:       rate = peak * attention_efficiency (backward:
 *                    attention_bwd_efficiency) * f(d) / f(128),
 *                    f(d) = d / (d + d_half) (the softmax and rescaling work per
 *                    (query, key) pair is fixed while the matmul work grows with
 *                    d); blocks = batch * heads * ceil(tq / 128) thread blocks
 *                    fill ceil(blocks / SMs) waves, the last one partly:
 *                    time = FLOPs / (rate * blocks / (waves * SMs)) + launch
 *   unfused attention (E = batch x heads x tq x tk score elements, e bytes each):
 *                    forward QK^T, softmax, [dropout], PV; backward dP = dO V^T,
 *                    dV = P^T dO, [dropout], softmax, dQ = dS K, dK = dS^T Q;
 *                    each batched GEMM (2 E d FLOPs) max(2 E d / rate *
 *                    (1 + k_half / K), its bytes / HBM) + launch, no tile
 *                    quantisation; softmax 2 E e forward, 3 E e backward;
 *                    dropout E (2 e + 1) each way (the 1-byte mask)
 *   memory-bound:    bytes / HBM bandwidth + launches
 * A platform without "sms" (0) has no quantisation; without "gemm_k_half" or
 * "attention_head_dim_half" (0) no size dependence; without "launch_us" no
 * launch cost: the model then reduces to FLOPs over peak x efficiency.
 */
#include <math.h>

#include "compute.h"
#include "usim_internal.h"

#define ATTN_BLOCK_ROWS 128   /* FlashAttention-2 query block (Br) on A100/H100 */

static double ceil_div(double a, double b)
{
    return ceil(a / b);
}

double usim_gemm_s(const usim_platform *p, usim_dtype t, usim_gemm g)
{
    if (g.M <= 0 || g.N <= 0 || g.K <= 0)
        return 0;
    double rate = p->peak_flops[t] * p->gemm_eff;
    double kfac = 1 + p->gemm_k_half / g.K;
    double compute;
    if (p->sms > 0) {
        double tiles = ceil_div(g.M, p->gemm_tile_m) * ceil_div(g.N, p->gemm_tile_n);
        double waves = ceil_div(tiles, p->sms);
        compute = waves * 2.0 * p->gemm_tile_m * p->gemm_tile_n * g.K / (rate / p->sms) * kfac;
    } else {
        compute = 2.0 * g.M * g.N * g.K / rate * kfac;
    }
    double memory = (g.M * g.K + g.K * g.N + g.M * g.N) * usim_dtype_bytes(t) / p->hbm_Bps;
    return (compute > memory ? compute : memory) + p->launch_s;
}

double usim_gemm_bwd_s(const usim_platform *p, usim_dtype t, usim_gemm g)
{
    usim_gemm dgrad = {g.M, g.K, g.N}, wgrad = {g.K, g.N, g.M};
    return usim_gemm_s(p, t, dgrad) + usim_gemm_s(p, t, wgrad);
}

static double attn_s(const usim_platform *p, usim_dtype t, double eff, double flops, double batch,
                     double heads, double tq, double d)
{
    if (flops <= 0)
        return 0;
    double rate = p->peak_flops[t] * eff;
    if (p->attn_d_half > 0)
        rate *= (d / (d + p->attn_d_half)) / (128.0 / (128.0 + p->attn_d_half));
    if (p->sms > 0) {
        double blocks = batch * heads * ceil_div(tq, ATTN_BLOCK_ROWS);
        double waves = ceil_div(blocks, p->sms);
        if (blocks > 0)
            rate *= blocks / (waves * p->sms);
    }
    return flops / rate + p->launch_s;
}

double usim_attn_s(const usim_platform *p, usim_dtype t, double flops, double batch,
                   double heads, double tq, double d)
{
    return attn_s(p, t, p->attn_eff, flops, batch, heads, tq, d);
}

double usim_attn_bwd_s(const usim_platform *p, usim_dtype t, double flops, double batch,
                       double heads, double tq, double d)
{
    return attn_s(p, t, p->attn_bwd_eff > 0 ? p->attn_bwd_eff : p->attn_eff, flops, batch, heads, tq,
                  d);
}

/* One batched GEMM of the unfused attention: 2 E d FLOPs with reduction
 * length K, moving `bytes` through HBM. */
static double unfused_gemm_s(const usim_platform *p, usim_dtype t, double flops, double K, double bytes)
{
    double rate = p->peak_flops[t] * p->gemm_eff;
    double compute = flops / rate * (1 + p->gemm_k_half / K);
    double memory = bytes / p->hbm_Bps;
    return (compute > memory ? compute : memory) + p->launch_s;
}

double usim_attn_unfused_s(const usim_platform *p, usim_dtype t, double E, double d, double tq, double tk,
                           int bwd, int dropout)
{
    if (E <= 0 || d <= 0 || tq <= 0 || tk <= 0)
        return 0;
    double e = usim_dtype_bytes(t);
    double fl = 2 * E * d;                   /* one GEMM: 2 FLOPs per (score, dimension) */
    double mats = E / (tq * tk);             /* batch x heads matrices */
    double qo = mats * tq * d * e, kv = mats * tk * d * e;   /* Q or O, K or V, per GEMM operand */
    double S = E * e;                        /* one score-sized tensor */
    double drop = dropout ? usim_mem_s(p, E * (2 * e + 1), 1) : 0;
    if (!bwd)
        return unfused_gemm_s(p, t, fl, d, qo + kv + S)        /* S = Q K^T, written */
             + usim_mem_s(p, 2 * S, 1)                         /* P = softmax(scale S + mask) */
             + drop                                            /* P' = dropout(P), its mask */
             + unfused_gemm_s(p, t, fl, tk, S + kv + qo);      /* O = P' V */
    return unfused_gemm_s(p, t, fl, d, qo + kv + S)            /* dP' = dO V^T, written */
         + unfused_gemm_s(p, t, fl, tq, S + qo + kv)           /* dV = P'^T dO */
         + drop                                                /* dP = dropout backward */
         + usim_mem_s(p, 3 * S, 1)                             /* dS from dP and P */
         + unfused_gemm_s(p, t, fl, tk, S + kv + qo)           /* dQ = dS K */
         + unfused_gemm_s(p, t, fl, tq, S + qo + kv);          /* dK = dS^T Q */
}

double usim_mem_s(const usim_platform *p, double bytes, int kernels)
{
    return bytes / p->hbm_Bps + kernels * p->launch_s;
}
