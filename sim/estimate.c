/* SPDX-License-Identifier: Apache-2.0 */
/*
 * estimate.c -- a closed-form estimate of one iteration, used by `plan` to
 * rank thousands of configurations before simulating the best of them.
 *
 * Compute is counted exactly as the layer programs count it (same FLOPs, same
 * rates, same HBM terms); sequence-parallel communication is the closed-form
 * per-GPU volume (usim_analytic_sp_bytes) at the bandwidth of the link class
 * its group crosses, counted as exposed except ring hops, which hide behind
 * the attention blocks they feed; the pipeline bubble is (pp-1) micro-steps,
 * (pp-1)/V of them with V virtual stages per rank (interleaved 1F1B: Narayanan
 * et al. 2021, arXiv 2104.04473 section 2.2.2); pipeline p2p is not counted
 * (nor the V-fold transfers of interleaving: the simulation prices them).
 * Parameter gathers and gradient reductions are taken as hidden.  It is a
 * ranking device, not a prediction: `plan` reports simulated times only.
 *
 * Not here: the simulation (simulate.c).
 */
#include <math.h>
#include <string.h>

#include "compute.h"
#include "cost.h"
#include "usim.h"
#include "usim_internal.h"

int usim_estimate(const usim_platform *p, const usim_model *m, const usim_job *jin, double *seconds)
{
    usim_job j = *jin;
    int rc = usim_job_resolve(m, p, &j);
    if (rc)
        return rc;
    usim_shape x;
    usim_shape_make(m, &j, &x);
    usim_flops f;
    usim_flops_make(m, &j, &x, m->causal && p->attn_causal_skip, &f);
    double gemm = p->peak_flops[m->dtype] * p->gemm_eff, attn = p->peak_flops[m->dtype] * p->attn_eff;
    double hbm = p->hbm_Bps;
    double gemm_fwd = (f.qkv + f.out + f.mlp) / gemm, attn_fwd = f.attn / attn;
    double attn_bwd = USIM_ATTN_BWD_FACTOR * attn_fwd;
    if (j.attn_kernel == USIM_ATTN_UNFUSED) {   /* the program's own kernel times */
        attn_fwd = usim_attn_unfused_job_s(p, m, &j, &x, 0);
        attn_bwd = usim_attn_unfused_job_s(p, m, &j, &x, 1);
    }
    double fwd = gemm_fwd + attn_fwd + f.elem_bytes / hbm;
    double bwd = 2 * gemm_fwd + attn_bwd + 2 * f.elem_bytes / hbm;
    double extra = j.recompute == USIM_RC_FULL ? fwd
                 : j.recompute == USIM_RC_SELECTIVE ? 0.5 * f.elem_bytes / hbm : 0;
    double head = 3 * f.head / gemm + f.head_bytes / hbm;
    /* sequence-parallel traffic of a layer: forward, backward (and the recomputed forward) */
    double sent[2];
    if ((rc = usim_analytic_sp_bytes(m, &j, 0, sent)))
        return rc;
    double bytes = sent[0] + sent[1] + (j.recompute == USIM_RC_FULL ? sent[0] : 0);
    int T = j.method == ULY_METHOD_MEGATRON_SP ? 1 : j.tp;
    int C = j.method == ULY_METHOD_MEGATRON_SP ? j.sp : j.sp;
    int inner = j.method == ULY_METHOD_USP ? j.ulysses : C;
    int dom = usim_platform_domain(p);
    double nvl = usim_nvl_Bps(p);
    if (p->full_mesh)   /* an all-to-all of `inner` GPUs uses inner - 1 of the peer links */
        nvl = (inner > 2 ? inner - 1 : 1) * usim_mesh_link_Bps(p);
    double bw = (int64_t)T * inner <= dom ? nvl : usim_nic_Bps(p);
    if ((int64_t)T * C > dom && j.method == ULY_METHOD_USP)
        bw = usim_nic_Bps(p);   /* the ring part crosses nodes (its share dominates the estimate) */
    double comm = bytes / bw;
    int ring = (uly_method_traits(j.method) & ULY_TRAIT_RING) != 0;
    if (ring) {
        /* hops overlap the attention blocks of the pass they feed */
        double hidden = attn_fwd * (1 + USIM_ATTN_BWD_FACTOR + (j.recompute == USIM_RC_FULL));
        comm = comm > hidden ? comm - hidden : 0;
    }
    int64_t per_step = (int64_t)j.dp * m->micro_batch;
    double micro = ceil((double)m->global_batch / (double)per_step);
    double stage = micro * ((double)x.Ls * (fwd + bwd + extra + comm) + head);
    *seconds = stage * usim_estimate_bubble_factor(&j, micro);
    return USIM_OK;
}

double usim_estimate_bubble_factor(const usim_job *j, double micro)
{
    /* 1F1B idles (pp - 1) micro-step times per step; the interleaved schedule
     * (pp - 1) / V, its chunks being 1/V of a stage (arXiv 2104.04473 eq. in
     * section 2.2.2: bubble fraction (p - 1) / (v m)) */
    double pp = j->pp > 1 ? j->pp : 1, V = j->vpp > 1 ? j->vpp : 1;
    return 1 + (pp - 1) / (V * (micro > 1 ? micro : 1));
}
