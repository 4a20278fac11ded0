/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pipeline.c -- pipeline-parallel schedules: the layers of each rank, the
 * chunk forwards a rank keeps in flight, and the run of Megatron-Core's
 * schedules (megatron/core/pipeline_parallel/schedules.py:
 * forward_backward_pipelining_without_interleaving, 1F1B with
 * pp - rank - 1 warm-up forwards, and _with_interleaving, warm-up
 * 2 (pp - rank - 1) + (V - 1) pp chunk forwards, chunks taken in groups of pp
 * micro-batches, get_schedule_table) on every rank.
 *
 * Not here: the forward and backward time of a chunk (simulate.c runs the
 * chunk's operation graph, program.c), the memory they imply (cost.c).
 */
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"
#include "usim.h"
#include "usim_internal.h"

static int64_t micro_batches(const usim_model *m, const usim_job *j)
{
    int64_t per_step = (int64_t)(j->dp > 0 ? j->dp : 1) * m->micro_batch;
    int64_t micro = m->global_batch / per_step + (m->global_batch % per_step != 0);
    return micro < 1 ? 1 : micro;
}

int64_t usim_pp_rank_layers(const usim_model *m, const usim_job *j, int r)
{
    int pp = j->pp > 0 ? j->pp : 1;
    if (pp < 2)
        return m->layers;
    int64_t first = j->pp_first_layers, last = j->pp_last_layers;
    if (r == 0 && first > 0)
        return first;
    if (r == pp - 1 && last > 0)
        return last;
    int nmid = pp - (first > 0) - (last > 0);
    int64_t rest = m->layers - (first > 0 ? first : 0) - (last > 0 ? last : 0);
    return nmid > 0 ? rest / nmid : 0;
}

int usim_pp_check(const usim_model *m, const usim_job *j)
{
    int pp = j->pp > 0 ? j->pp : 1;
    if (j->vpp < 0 || j->pp_first_layers < 0 || j->pp_last_layers < 0)
        return usim_set_error(USIM_EINVAL, "--vpp, --pp-first-layers and --pp-last-layers must be positive");
    if (pp < 2 && (j->vpp > 1 || j->pp_first_layers || j->pp_last_layers))
        return usim_set_error(USIM_EINVAL, "%s needs pipeline parallelism (--pp 2 or more)",
                              j->vpp > 1 ? "--vpp" : j->pp_first_layers ? "--pp-first-layers" : "--pp-last-layers");
    if (pp < 2)
        return USIM_OK;
    if (j->offload)
        return usim_set_error(USIM_EINVAL, "--offload with pipeline parallelism (--pp %d) is not modelled", pp);
    int V = usim_pp_vchunks(j);
    int64_t first = j->pp_first_layers, last = j->pp_last_layers;
    int nmid = pp - (first > 0) - (last > 0);
    int64_t rest = m->layers - first - last;
    if (first || last) {
        if (rest < 0 || (nmid == 0 && rest != 0))
            return usim_set_error(USIM_EINVAL,
                                  "--pp-first-layers %lld and --pp-last-layers %lld leave %lld of the %lld "
                                  "layers for %d other pipeline stages", (long long)first, (long long)last,
                                  (long long)rest, (long long)m->layers, nmid);
        if (nmid > 0 && (rest < nmid || rest % nmid != 0))
            return usim_set_error(USIM_EINVAL,
                                  "the %lld layers left by --pp-first-layers / --pp-last-layers do not "
                                  "divide evenly over the %d other pipeline stages", (long long)rest, nmid);
    } else if (m->layers % pp != 0)
        return usim_set_error(USIM_EINVAL, "--pp %d does not divide the %lld layers", pp, (long long)m->layers);
    for (int r = 0; r < pp; r++) {
        int64_t n = usim_pp_rank_layers(m, j, r);
        if (n < V || n % V != 0) {
            if (!first && !last)
                return usim_set_error(USIM_EINVAL,
                                      "--pp %d x --vpp %d does not divide the %lld layers (Megatron-Core "
                                      "needs layers divisible by pp x vpp unless uneven stages are given)",
                                      pp, V, (long long)m->layers);
            return usim_set_error(USIM_EINVAL,
                                  "pipeline stage %d holds %lld layers: not a positive multiple of --vpp %d",
                                  r, (long long)n, V);
        }
    }
    int64_t micro = micro_batches(m, j);
    if (V > 1 && micro % pp != 0)
        return usim_set_error(USIM_EINVAL,
                              "the interleaved schedule (--vpp %d) needs the micro-batches per step (%lld = "
                              "global batch %lld / (data-parallel %d x micro-batch %lld)) to be a multiple of "
                              "--pp %d, as Megatron-Core does", V, (long long)micro, (long long)m->global_batch,
                              j->dp, (long long)m->micro_batch, pp);
    return USIM_OK;
}

static int warmup(int pp, int V, int total, int r)
{
    int w = V > 1 ? 2 * (pp - r - 1) + (V - 1) * pp : pp - r - 1;
    return w < total ? w : total;
}

int usim_pp_inflight_chunks(int pp, int V, int micro, int r)
{
    if (pp < 2)
        return 1;
    int total = micro * (V > 1 ? V : 1);
    int w = warmup(pp, V > 1 ? V : 1, total, r) + 1;
    return w < total ? w : total;
}

/* The k-th action of rank r: *bwd (0 forward, 1 backward), *mb, *chunk. */
static void action(int pp, int V, int m, int r, int k, int *bwd, int *mb, int *chunk)
{
    int total = m * V, w = warmup(pp, V, total, r), steady = total - w, idx;
    if (k < w) {
        *bwd = 0;
        idx = k;
    } else if (k - w < 2 * steady) {
        int i = k - w;
        *bwd = i % 2;
        idx = *bwd ? i / 2 : w + i / 2;
    } else {
        *bwd = 1;
        idx = steady + (k - w - 2 * steady);
    }
    if (V == 1) {
        *mb = idx;
        *chunk = 0;
        return;
    }
    /* get_schedule_table with groups of pp micro-batches (m % pp == 0):
     * virtual micro-batch idx -> (micro-batch, chunk); backward chunks reversed */
    int group = idx / (pp * V), in = idx % (pp * V);
    *mb = group * pp + in % pp;
    *chunk = in / pp;
    if (*bwd)
        *chunk = V - 1 - *chunk;
}

int usim_pp_run(const usim_pp_in *in, usim_pp_out *out)
{
    int pp = in->pp, V = in->V < 1 ? 1 : in->V, m = in->m, S = pp * V;
    if (pp < 1 || m < 1 || (V > 1 && m % pp != 0))
        return usim_set_error(USIM_EINVAL, "pipeline schedule: pp %d, V %d, %d micro-batches", pp, V, m);
    size_t cells = (size_t)m * (size_t)S;
    usim_time *fe = usim_malloc(cells * sizeof *fe), *be = usim_malloc(cells * sizeof *be);
    usim_time *tfree = usim_calloc((size_t)pp, sizeof *tfree);
    int *ptr = usim_calloc((size_t)pp, sizeof *ptr), *held = usim_calloc((size_t)pp, sizeof *held);
    int rc = USIM_OK;
    if (!fe || !be || !tfree || !ptr || !held) {
        rc = usim_set_error(USIM_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < cells; i++)
        fe[i] = be[i] = -1;
    if (out->inflight)
        memset(out->inflight, 0, (size_t)pp * sizeof *out->inflight);
    int nact = 2 * m * V;
    long left = (long)pp * nact;
    while (left > 0) {
        long before = left;
        for (int r = 0; r < pp; r++) {
            while (ptr[r] < nact) {
                int bwd, mb, c;
                action(pp, V, m, r, ptr[r], &bwd, &mb, &c);
                int vs = c * pp + r;
                usim_time ready;
                if (!bwd) {
                    if (vs == 0)
                        ready = 0;
                    else if (fe[(size_t)mb * S + vs - 1] < 0)
                        break;
                    else
                        ready = fe[(size_t)mb * S + vs - 1] + (in->pf ? in->pf[vs - 1] : 0);
                } else if (vs == S - 1) {
                    if (fe[(size_t)mb * S + vs] < 0)
                        break;
                    ready = fe[(size_t)mb * S + vs];
                } else {
                    if (be[(size_t)mb * S + vs + 1] < 0)
                        break;
                    ready = be[(size_t)mb * S + vs + 1] + (in->pb ? in->pb[vs] : 0);
                }
                usim_time start = ready > tfree[r] ? ready : tfree[r];
                usim_time end = start + (bwd ? in->B : in->F)[r * V + c];
                tfree[r] = end;
                (bwd ? be : fe)[(size_t)mb * S + vs] = end;
                held[r] += bwd ? -1 : 1;
                if (out->inflight && held[r] > out->inflight[r])
                    out->inflight[r] = held[r];
                ptr[r]++;
                left--;
            }
        }
        if (left == before) {
            rc = usim_set_error(USIM_EINVAL, "pipeline schedule: no rank can proceed (pp %d, V %d, m %d)",
                                pp, V, m);
            goto out;
        }
    }
    out->makespan = 0;
    for (int r = 0; r < pp; r++) {
        if (out->rank_end)
            out->rank_end[r] = tfree[r];
        if (tfree[r] > out->makespan)
            out->makespan = tfree[r];
    }
out:
    free(fe);
    free(be);
    free(tfree);
    free(ptr);
    free(held);
    return rc;
}
