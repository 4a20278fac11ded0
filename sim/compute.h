/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compute.h -- the compute model (private to libusim): the time of one GPU
 * kernel from its shape and the platform's rates.  GEMMs: roofline with tile
 * and wave quantisation over the SMs and an efficiency that grows with the
 * reduction length K; attention: FLOPs over a rate that depends on the head
 * dimension and on how many thread blocks fill the SMs; memory-bound kernels:
 * bytes over HBM bandwidth; every kernel pays a launch overhead.
 * doc/simulator.md, section "Compute", gives the equations and sources.
 */
#ifndef USIM_COMPUTE_H
#define USIM_COMPUTE_H

#include "cost.h"
#include "usim.h"

/* Seconds of one forward GEMM (M, N, K) in dtype t. */
double usim_gemm_s(const usim_platform *p, usim_dtype t, usim_gemm g);
/* Backward of that GEMM: data gradient (M, K, N) + weight gradient (K, N, M). */
double usim_gemm_bwd_s(const usim_platform *p, usim_dtype t, usim_gemm g);
/* Seconds of an attention kernel of `flops` over batch x heads x tq query
 * rows of head dimension d (one launch). */
double usim_attn_s(const usim_platform *p, usim_dtype t, double flops, double batch,
                   double heads, double tq, double d);
/* The same for an attention backward kernel (rate from attention_bwd_efficiency). */
double usim_attn_bwd_s(const usim_platform *p, usim_dtype t, double flops, double batch,
                       double heads, double tq, double d);
/* Seconds of unfused attention (doc/simulator.md, "Unfused attention") over
 * E = batch x heads x tq x tk score elements of head dimension d: the forward
 * (bwd 0) or the backward (bwd 1), with the dropout kernel when dropout. */
double usim_attn_unfused_s(const usim_platform *p, usim_dtype t, double E, double d, double tq, double tk,
                           int bwd, int dropout);
/* Seconds to move bytes through HBM (memory-bound kernels), one launch each
 * for `kernels` kernels. */
double usim_mem_s(const usim_platform *p, double bytes, int kernels);

#endif
