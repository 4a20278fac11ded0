/* SPDX-License-Identifier: Apache-2.0 */
/*
 * attnjob.c -- one distributed attention forward + backward (the job
 * `ulysses attn` runs), for comparing the simulator with our own MPI runs.
 *
 * The job is a one-layer Ulysses model on `gpus` GPUs (sp = gpus, dp = 1):
 * its eight all-to-alls come from the same collective descriptors a training
 * job uses (usim_jc_describe, plan-layer volumes), each simulated alone on
 * the idle network and run one after the other, as src/dist.c does; the
 * attention FLOPs come from the same cost model (usim_flops_make) and their
 * time from the same compute model (usim_attn_s, usim_attn_bwd_s).  What it
 * leaves out: GEMMs, layer norms, ZeRO, overlap (the CPU driver does not
 * overlap either).
 */
#include <stdlib.h>
#include <string.h>

#include "compute.h"
#include "cost.h"
#include "job.h"
#include "jobcoll.h"
#include "usim.h"
#include "usim_internal.h"

int usim_attn_simulate(const usim_platform *p, const usim_attn_job *aj, int gpu, usim_attn_result *r)
{
    memset(r, 0, sizeof *r);
    if (aj->batch < 1 || aj->seq < 1 || aj->heads < 1 || aj->kv_heads < 1 || aj->head_dim < 1)
        return usim_set_error(USIM_EINVAL, "batch, seq, heads, kv-heads and head-dim must be >= 1");
    if (aj->heads % aj->kv_heads != 0)
        return usim_set_error(USIM_EINVAL, "heads (%lld) must be a multiple of kv-heads (%lld)",
                              (long long)aj->heads, (long long)aj->kv_heads);
    if (aj->dtype < 0 || aj->dtype >= USIM_NDTYPE)
        return usim_set_error(USIM_EINVAL, "unknown dtype %d", (int)aj->dtype);
    if (gpu < 0 || gpu >= aj->gpus)
        return usim_set_error(USIM_EINVAL, "GPU %d is not one of the job's %d", gpu, aj->gpus);
    usim_model m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "attention");
    m.layers = 1;
    m.hidden = aj->heads * aj->head_dim;
    m.head_dim = aj->head_dim;
    m.heads = aj->heads;
    m.kv_heads = aj->kv_heads;
    m.ffn = 4 * m.hidden;
    m.vocab = 1;
    m.seq = aj->seq;
    m.micro_batch = m.global_batch = aj->batch;
    m.dtype = aj->dtype;
    m.causal = aj->causal;
    usim_job j;
    memset(&j, 0, sizeof j);
    j.method = ULY_METHOD_ULYSSES;
    j.gpus = aj->gpus;
    j.sp = aj->gpus;
    j.dp = 1;
    j.zero = 0;
    j.recompute = USIM_RC_NONE;
    j.a2a = aj->a2a;
    int rc = usim_job_resolve(&m, p, &j);
    if (rc)
        return rc;
    /* every tensor below 2^60 bytes, as for training jobs (simulate.c): the
     * byte counters are uint64 and never saturate */
    double tensor = (double)aj->batch * (double)aj->seq * (double)aj->heads * (double)aj->head_dim *
                    (double)(usim_dtype_bytes(aj->dtype) + 4);
    if (!(tensor < 1152921504606846976.0))
        return usim_set_error(USIM_EINVAL,
                              "sizes cannot be represented: batch %lld x %lld tokens x %lld heads x head-dim "
                              "%lld is a %.3g-byte tensor (limit 2^60); reduce --seq or --batch",
                              (long long)aj->batch, (long long)aj->seq, (long long)aj->heads,
                              (long long)aj->head_dim, tensor);
    usim_shape x;
    usim_shape_make(&m, &j, &x);
    usim_layout l;
    memset(&l, 0, sizeof l);
    usim_jc_buf buf;
    memset(&buf, 0, sizeof buf);
    usim_net *net = NULL;
    uint64_t *sent = NULL, *recv = NULL;
    if ((rc = usim_layout_make(&j, &l)) || (rc = usim_jc_buf_new(&l, &buf)))
        goto out;
    net = usim_net_new(p, aj->gpus);
    sent = calloc((size_t)aj->gpus, sizeof *sent);
    recv = calloc((size_t)aj->gpus, sizeof *recv);
    if (!net || !sent || !recv) {
        rc = usim_set_error(USIM_ENOMEM, "out of memory");
        goto out;
    }
    for (int w = 0; w < ULY_A2A_COUNT && !rc; w++) {
        usim_coll c;
        usim_coll_result cr;
        int runs = usim_jc_describe(&j, &x, &l, USIM_C_A2A0 + w, &buf, &c);
        if (runs < 0) {
            rc = USIM_EINVAL;
            break;
        }
        if (!runs)
            continue;
        if ((rc = usim_coll_run(net, &c, &cr, sent, recv)))
            break;
        if (cr.duration >= USIM_TIME_LIMIT_PS || cr.duration < 0) {
            rc = usim_set_error(USIM_EINVAL, "simulated time cannot be represented: all-to-all %d takes more "
                                "than the %.3g s the simulator keeps in int64 picoseconds; reduce --seq, "
                                "--batch or --heads", w, USIM_TIME_LIMIT_PS * 1e-12);
            break;
        }
        r->a2a_s[w] = usim_sec(cr.duration);
        r->sent[w] = sent[gpu];
        r->recv[w] = recv[gpu];
        /* GPU `gpu`'s bytes by link class: to GPUs of its NVLink domain, and to the others */
        int gpn = usim_platform_domain(p), me = gpu / gpn;
        for (int k = 0; k < c.size; k++)
            if (usim_coll_rank(&c, 0, k) == gpu)
                for (int d = 0; d < c.size; d++)
                    if (d != k)
                        r->sent_class[usim_coll_rank(&c, 0, d) / gpn == me ? USIM_CLASS_NVLINK : USIM_CLASS_NIC] +=
                            (double)usim_coll_pair(&c, k, d);
    }
    if (rc)
        goto out;
    usim_flops f;
    usim_flops_make(&m, &j, &x, aj->causal && p->attn_causal_skip, &f);
    r->phase_s[USIM_PH_FWD_A2A_IN] = r->a2a_s[ULY_A2A_Q] + r->a2a_s[ULY_A2A_K] + r->a2a_s[ULY_A2A_V];
    /* the compute model of training jobs (compute.c): FLOPs over peak x
     * efficiency, with its shape terms when the platform has them */
    r->phase_s[USIM_PH_FWD_ATTN] =
        usim_attn_s(p, aj->dtype, f.attn, (double)x.b, f.attn_heads, f.attn_tq, (double)x.d);
    r->phase_s[USIM_PH_FWD_A2A_OUT] = r->a2a_s[ULY_A2A_O];
    r->phase_s[USIM_PH_BWD_A2A_IN] = r->a2a_s[ULY_A2A_DO];
    r->phase_s[USIM_PH_BWD_ATTN] =
        usim_attn_bwd_s(p, aj->dtype, USIM_ATTN_BWD_FACTOR * f.attn, (double)x.b, f.attn_heads, f.attn_tq, (double)x.d);
    r->phase_s[USIM_PH_BWD_A2A_OUT] = r->a2a_s[ULY_A2A_DQ] + r->a2a_s[ULY_A2A_DK] + r->a2a_s[ULY_A2A_DV];
    r->fwd_s = r->phase_s[0] + r->phase_s[1] + r->phase_s[2];
    r->bwd_s = r->phase_s[3] + r->phase_s[4] + r->phase_s[5];
    r->iter_s = r->fwd_s + r->bwd_s;
    if (!(r->iter_s < USIM_TIME_LIMIT_PS * 1e-12)) {
        rc = usim_set_error(USIM_EINVAL, "simulated time cannot be represented: the attention takes %.3g s, "
                            "more than the %.3g s the simulator keeps in int64 picoseconds; reduce --seq, "
                            "--batch or --heads", r->iter_s, USIM_TIME_LIMIT_PS * 1e-12);
        memset(r, 0, sizeof *r);
    }
out:
    free(sent);
    free(recv);
    usim_net_free(net);
    usim_jc_buf_free(&buf);
    usim_layout_free(&l);
    return rc;
}
