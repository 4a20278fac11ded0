/* SPDX-License-Identifier: Apache-2.0 */
/*
 * simulate.c -- orchestration: a simulation context (platform, network,
 * memo of collectives) and one training iteration end to end: resolve the
 * job, derive shapes and FLOPs (cost.c), place the groups (job.c), simulate
 * the job's collectives (jobcoll.c), build the layer programs (program.c),
 * schedule them (opsched.c), and collect the results; the per-layer byte check
 * counts the operations of the same programs.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "job.h"
#include "jobcoll.h"
#include "program.h"
#include "opsched.h"
#include "pipeline.h"
#include "trace.h"
#include "usim.h"
#include "usim_internal.h"

struct usim_sim {
    usim_platform p;
    int gpus;
    usim_net *net;
    usim_collmemo memo;
    int contention;
    uint64_t work_limit;
};

void usim_sim_set_work_limit(usim_sim *s, uint64_t limit)
{
    s->work_limit = limit;
    usim_net_set_work_limit(s->net, limit);
}

uint64_t usim_sim_work(const usim_sim *s)
{
    return usim_net_work(s->net);
}

void usim_sim_set_contention(usim_sim *s, int on)
{
    s->contention = on != 0;
}

void usim_sim_set_engine(usim_sim *s, int engine)
{
    usim_net_set_engine(s->net, engine);
    usim_collmemo_free(&s->memo);   /* results of the other engine are not reused */
}

usim_sim *usim_sim_new(const usim_platform *p, int gpus)
{
    usim_sim *s = usim_calloc(1, sizeof *s);
    if (!s) {
        usim_set_error(USIM_ENOMEM, "out of memory");
        return NULL;
    }
    s->p = *p;
    s->gpus = gpus;
    s->contention = 1;
    s->net = usim_net_new(p, gpus);
    if (!s->net) {
        usim_sim_free(s);
        usim_set_error(USIM_ENOMEM, "out of memory");
        return NULL;
    }
    return s;
}

void usim_sim_free(usim_sim *s)
{
    if (!s)
        return;
    usim_net_free(s->net);
    usim_collmemo_free(&s->memo);
    free(s);
}

static void add_warning(usim_result *r, const char *fmt, ...) USIM_PRINTF(2, 3);
static void add_warning(usim_result *r, const char *fmt, ...)
{
    if (r->nwarn >= USIM_MAX_WARN)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->warn[r->nwarn++], sizeof r->warn[0], fmt, ap);
    va_end(ap);
}

/* Uneven heads per all-to-all rank: the busiest rank's attention takes
 * ceil(H/u) / (H/u) of the balanced time. */
static void warn_heads(usim_result *r, const usim_model *m, const usim_job *j)
{
    if (!(uly_method_traits(j->method) & ULY_TRAIT_A2A))
        return;
    int64_t T = j->tp > 0 ? j->tp : 1;
    int64_t H = m->heads / T, u = j->ulysses;
    int64_t Hkv = m->kv_heads >= T ? m->kv_heads / T : 1;
    if (u < 2)
        return;
    char per[64] = "";
    if (T > 1)
        snprintf(per, sizeof per, " per tensor-parallel rank (TP %lld)", (long long)T);
    if (H % u != 0) {
        int64_t most = (H + u - 1) / u;
        double ratio = (double)most * (double)u / (double)H;
        int64_t good = 1;
        for (int64_t d = u - 1; d >= 1; d--)
            if (H % d == 0 && j->gpus % d == 0) {
                good = d;
                break;
            }
        add_warning(r, "head imbalance: %lld heads%s over an all-to-all degree of %lld: the busiest GPU "
                    "holds %lld heads against %.2f on average, so attention takes %.2fx its balanced "
                    "time (an all-to-all degree of %lld divides the heads)",
                    (long long)H, per, (long long)u, (long long)most, (double)H / (double)u, ratio,
                    (long long)good);
    }
    if (u > Hkv)
        add_warning(r, "%lld KV heads%s over an all-to-all degree of %lld: KV heads are replicated "
                    "(Megatron-Core's a2a requires the CP degree <= KV heads / TP; usp or a larger TP "
                    "avoids it)", (long long)Hkv, per, (long long)u);
}

/* Whether the sizes of one layer are representable: every tensor and
 * collective below 2^60 bytes (uint64 byte counters with headroom). */
static int check_sizes(const usim_model *m, const usim_shape *x)
{
    double b = (double)x->b, s = (double)x->s, e = (double)x->e;
    double widest = (double)x->h;
    if ((double)x->F * 2 > widest)
        widest = (double)x->F * 2;
    if ((double)x->V + 4 > widest)
        widest = (double)x->V + 4;
    double biggest = b * s * widest * (e + 4);
    if (!(biggest < 1152921504606846976.0))
        return usim_set_error(USIM_EINVAL,
                              "sizes cannot be represented: micro-batch %lld x %lld tokens x width %.0f "
                              "is a %.3g-byte tensor (limit 2^60); reduce --seq or --micro-batch",
                              (long long)m->micro_batch, (long long)m->seq, widest, biggest);
    return USIM_OK;
}

/* Limit of simulated time per iteration: the sum of every operation's
 * duration, slowed by contention (at most 3 communication streams share a
 * link class), must stay well inside int64 picoseconds. */
#define USIM_ITER_LIMIT_PS 1e18
/* Largest operation graph built for one iteration (micro-steps x layers):
 * about 30 operations of ~150 bytes each per layer-step. */
#define USIM_MAX_LAYER_STEPS 4e5

static int micro_steps(const usim_model *m, const usim_job *j)
{
    int64_t per_step = (int64_t)j->dp * m->micro_batch;
    int64_t micro = m->global_batch / per_step + (m->global_batch % per_step != 0);
    if (micro > INT32_MAX)
        micro = INT32_MAX;   /* refused by the layer-step limit */
    return micro < 1 ? 1 : (int)micro;
}

/* ------------------------------------------------------------ one graph */

/* What one run of an operation graph gives: its end; the end of the forward
 * (ops built before the backward) and of the backward (before the optimizer);
 * busy compute, exposed communication, communication time and bytes, whole
 * and for the step's tail (ops after the backward, and the gradient stream). */
typedef struct gstat {
    usim_time end, fwd_end, bwd_end;
    double busy, tail_busy;
    double exposed[USIM_NKIND], tail_exposed[USIM_NKIND];
    double comm[USIM_NKIND], tail_comm[USIM_NKIND];
    double sent[USIM_NCLASS], tail_sent[USIM_NCLASS];
    double tiled_s;          /* the tiled MLP's extra forward */
    uint64_t events;
} gstat;

static int run_prog(usim_sim *sim, usim_prog *b, int micro, gstat *st)
{
    const usim_jobcoll *jc = b->jc;
    int rc;
    memset(st, 0, sizeof *st);
    b->g.eng = usim_engine_new();
    b->g.contention = sim->contention;
    if (!b->g.eng)
        return usim_set_error(USIM_ENOMEM, "out of memory");
    if (usim_program_build(b, micro))
        return usim_set_error(USIM_ENOMEM, "out of memory building the operation graph");
    double total = 0;
    for (int i = 0; i < b->g.n; i++)
        total += (double)b->g.ops[i].dur;
    if (b->pp_mode == USIM_PP_CHUNK)
        total *= micro;   /* a chunk's graph stands for every micro-batch */
    if (!(3 * total < USIM_ITER_LIMIT_PS))
        return usim_set_error(USIM_EINVAL,
                              "simulated time cannot be represented: the operations of one iteration "
                              "add up to %.3g s, more than the %.3g s (%.1f days) the simulator "
                              "keeps exact in int64 picoseconds; reduce --seq, --micro-batch, "
                              "--global-batch or --layers",
                              total * 1e-12, USIM_ITER_LIMIT_PS / 3e12, USIM_ITER_LIMIT_PS / 3e12 / 86400);
    if (usim_graph_run(&b->g))
        return usim_set_error(USIM_ENOMEM, "out of memory running the operation graph");
    usim_time end = 0, busy = 0, tail_busy = 0, tail_wait = 0;
    for (int i = 0; i < b->g.n; i++) {
        const usim_op *o = &b->g.ops[i];
        USIM_CHECK(o->done && o->end >= o->start);
        int tail = i >= b->bwd_ops || o->stream == USIM_ST_GRAD;
        if (o->end > end)
            end = o->end;
        if (i < b->fwd_ops && o->end > st->fwd_end)
            st->fwd_end = o->end;
        if (i < b->bwd_ops && o->stream != USIM_ST_GRAD && o->end > st->bwd_end)
            st->bwd_end = o->end;
        if (o->stream == USIM_ST_COMPUTE && o->tail_R > 1) {
            /* a ring tail: R-1 blocks of compute, the rest waits for hops */
            usim_time work = (o->tail_R - 1) * o->tail_B;
            busy += work;
            tail_wait += o->dur - work;
        } else if (o->stream == USIM_ST_COMPUTE) {
            busy += o->dur;
            if (tail)
                tail_busy += o->dur;
        } else {
            st->comm[o->kind] += usim_sec(o->dur);
            if (tail)
                st->tail_comm[o->kind] += usim_sec(o->dur);
            for (int k = 0; k < USIM_NCLASS; k++) {
                double by = (double)jc->r[o->coll].max_sent[k] * o->mult;
                st->sent[k] += by;
                if (tail)
                    st->tail_sent[k] += by;
            }
        }
    }
    st->end = end;
    st->busy = usim_sec(busy);
    st->tail_busy = usim_sec(tail_busy);
    if ((rc = usim_graph_exposed(&b->g, end, st->exposed)))
        return rc;
    st->exposed[USIM_KIND_SP] += usim_sec(tail_wait);
    if ((rc = usim_graph_exposed_from(&b->g, st->bwd_end, end, st->tail_exposed)))
        return rc;
    st->events = usim_engine_events(b->g.eng);
    st->tiled_s = b->lc_tiled_s;
    return USIM_OK;
}

/* ------------------------------------------------------------ pipeline */

/* Whether the activation transfer between pipeline ranks a and b crosses
 * the NVLink domain for some pipeline group (stage s of the group at offset o
 * is GPU o + s G / pp: rank = t + T (c + C (d + D s))). */
static int pp_edge_crosses(const usim_job *j, int dom, int a, int b)
{
    int stride = j->gpus / j->pp;
    for (int o = 0; o < stride; o++)
        if ((o + a * stride) / dom != (o + b * stride) / dom)
            return 1;
    return 0;
}

/* Pipeline parallelism (doc/simulator.md, "Pipeline schedules"): the
 * operation graph of one micro-batch through each distinct chunk (its layers;
 * the embedding on virtual stage 0, the LM head and loss on the last) gives
 * the chunk's forward and backward time; the schedule of every rank runs on
 * them with the activation transfers between virtual stages
 * (pipeline.c); each rank's step then ends with its tail (the graph of one
 * micro-batch through all its layers with the step's gradient reduction
 * overlapping that backward, the optimizer and the parameter gather).  The
 * rank that ends last sets the iteration; its compute and exposed
 * communication are its chunks' times the micro-batches plus its tail, the
 * rest of its time is the bubble. */
static int simulate_pipeline(usim_sim *sim, const usim_model *m, const usim_job *j, const usim_shape *x,
                             const usim_flops *f, const usim_jobcoll *jc, int micro, usim_result *r)
{
    const usim_platform *p = &sim->p;
    int pp = j->pp, V = usim_pp_vchunks(j), S = pp * V, rc = USIM_OK;
    size_t nc = (size_t)S;
    usim_time *F = usim_calloc(nc, sizeof *F), *B = usim_calloc(nc, sizeof *B);
    usim_time *pf = usim_calloc(nc, sizeof *pf), *pend = usim_calloc((size_t)pp, sizeof *pend);
    int *inflight = usim_calloc((size_t)pp, sizeof *inflight), *crossv = usim_calloc(nc, sizeof *crossv);
    /* distinct graphs: (layers, embedding, head, mode) */
    enum { NKEY = 16 };
    struct { int layers, emb, head, mode; gstat st; } cache[NKEY];
    int ncache = 0;
    gstat *cst = usim_calloc(nc, sizeof *cst), *rst = usim_calloc((size_t)pp, sizeof *rst);
    if (!F || !B || !pf || !pend || !inflight || !crossv || !cst || !rst) {
        rc = usim_set_error(USIM_ENOMEM, "out of memory");
        goto out;
    }
    for (int pass = 0; pass < 2; pass++)
        for (int rk = 0; rk < pp; rk++)
            for (int c = 0; c < (pass ? 1 : V); c++) {
                int mode = pass ? USIM_PP_RANK : USIM_PP_CHUNK;
                int layers = (int)(usim_pp_rank_layers(m, j, rk) / (pass ? 1 : V));
                int emb = pass ? rk == 0 : rk == 0 && c == 0;
                int head = pass ? rk == pp - 1 : rk == pp - 1 && c == V - 1;
                int k = 0;
                while (k < ncache && !(cache[k].layers == layers && cache[k].emb == emb &&
                                       cache[k].head == head && cache[k].mode == mode))
                    k++;
                if (k == ncache) {
                    USIM_CHECK(ncache < NKEY);
                    usim_prog b;
                    if ((rc = usim_prog_init(&b, p, m, j, x, f, jc)))
                        goto out;
                    b.pp_mode = mode;
                    b.pp_layers = layers;
                    b.pp_emb = emb;
                    b.pp_head = head;
                    rc = run_prog(sim, &b, micro, &cache[k].st);
                    usim_prog_free(&b);
                    if (rc)
                        goto out;
                    cache[k].layers = layers;
                    cache[k].emb = emb;
                    cache[k].head = head;
                    cache[k].mode = mode;
                    r->events += cache[k].st.events;
                    ncache++;
                }
                if (pass)
                    rst[rk] = cache[k].st;
                else {
                    cst[rk * V + c] = cache[k].st;
                    F[rk * V + c] = cache[k].st.fwd_end;
                    B[rk * V + c] = cache[k].st.end - cache[k].st.fwd_end;
                }
            }
    /* activation (forward) and gradient (backward) transfers: one micro-batch's
     * b x s/cp/tp x h elements, over NVLink inside the domain, else the NIC */
    double bytes = (double)x->b * (double)x->tok * (double)x->h * (double)x->e;
    int dom = usim_platform_domain(p);
    for (int vs = 0; vs + 1 < S; vs++) {
        crossv[vs] = pp_edge_crosses(j, dom, vs % pp, (vs + 1) % pp);
        pf[vs] = crossv[vs] ? p->nic_lat + usim_ps(bytes / usim_nic_Bps(p))
                            : p->nvl_lat + usim_ps(bytes / usim_nvl_Bps(p));
        if (usim_sec(pf[vs]) > r->pp_p2p_s)
            r->pp_p2p_s = usim_sec(pf[vs]);
    }
    usim_pp_in in = {.pp = pp, .V = V, .m = micro, .F = F, .B = B, .pf = pf, .pb = pf};
    usim_pp_out po = {.rank_end = pend, .inflight = inflight};
    if ((rc = usim_pp_run(&in, &po)))
        goto out;
    int crit = 0;
    usim_time best = -1;
    for (int rk = 0; rk < pp; rk++) {
        usim_time e = pend[rk] + (rst[rk].end - rst[rk].bwd_end);
        if (e > best) {
            best = e;
            crit = rk;
        }
    }
    r->pp_critical = crit;
    r->pp_inflight = inflight[0];
    r->iter_s = usim_sec(best);
    const gstat *t = &rst[crit];
    double work = 0;
    r->compute_s = t->tail_busy;
    for (int k = 0; k < USIM_NKIND; k++) {
        r->exposed_s[k] = t->tail_exposed[k];
        r->comm_s[k] = t->tail_comm[k];
    }
    for (int k = 0; k < USIM_NCLASS; k++)
        r->sent_bytes[k] = t->tail_sent[k];
    for (int c = 0; c < V; c++) {
        const gstat *g = &cst[crit * V + c];
        work += usim_sec(g->end) * micro;
        r->compute_s += g->busy * micro;
        r->lc.tiled_mlp_s += g->tiled_s * micro;
        for (int k = 0; k < USIM_NKIND; k++) {
            r->exposed_s[k] += g->exposed[k] * micro;
            r->comm_s[k] += g->comm[k] * micro;
        }
        for (int k = 0; k < USIM_NCLASS; k++)
            r->sent_bytes[k] += g->sent[k] * micro;
        int vs = c * pp + crit;
        if (vs + 1 < S)
            r->sent_bytes[crossv[vs] ? USIM_CLASS_NIC : USIM_CLASS_NVLINK] += bytes * micro;
        if (vs > 0)
            r->sent_bytes[crossv[vs - 1] ? USIM_CLASS_NIC : USIM_CLASS_NVLINK] += bytes * micro;
    }
    double accounted = r->compute_s;
    for (int k = 0; k < USIM_NKIND; k++)
        accounted += r->exposed_s[k];
    r->bubble_s = r->iter_s - accounted;
    if (r->bubble_s < 0)
        r->bubble_s = 0;
    r->bubble_frac = work > 0 ? (usim_sec(pend[crit]) - work) / work : 0;
    if (r->bubble_frac < 0)
        r->bubble_frac = 0;
out:
    free(F);
    free(B);
    free(pf);
    free(pend);
    free(inflight);
    free(crossv);
    free(cst);
    free(rst);
    return rc;
}

int usim_simulate(usim_sim *sim, const usim_model *m, const usim_job *jin, FILE *trace,
                  usim_result *r)
{
    return usim_simulate_ex(sim, m, jin, trace, NULL, r);
}

int usim_simulate_ex(usim_sim *sim, const usim_model *m, const usim_job *jin, FILE *trace,
                     const usim_trace_opts *topt, usim_result *r)
{
    memset(r, 0, sizeof *r);
    if (topt && (topt->ngpus < 0 || topt->ngpus > USIM_TRACE_MAX_GPUS || (topt->ngpus > 0 && !topt->gpus)))
        return usim_set_error(USIM_EINVAL, "a trace holds 1 to %d GPUs, not %d", USIM_TRACE_MAX_GPUS,
                              topt->ngpus);
    for (int q = 0; topt && q < topt->ngpus; q++)
        if (topt->gpus[q] < 0 || topt->gpus[q] >= sim->gpus)
            return usim_set_error(USIM_EINVAL, "trace: GPU %d is not one of the %d GPUs (0-%d)",
                                  topt->gpus[q], sim->gpus, sim->gpus - 1);
    usim_job j = *jin;
    if (j.gpus != sim->gpus)
        return usim_set_error(USIM_EINVAL, "job has %d GPUs, simulation context %d", j.gpus, sim->gpus);
    int rc = usim_job_resolve(m, &sim->p, &j);
    if (rc)
        return rc;
    if ((rc = usim_job_check_longctx(&sim->p, m, &j)))
        return rc;
    const usim_platform *p = &sim->p;
    usim_shape x;
    usim_shape_make(m, &j, &x);
    if ((rc = check_sizes(m, &x)))
        return rc;
    usim_flops f;
    usim_flops_make(m, &j, &x, m->causal && p->attn_causal_skip, &f);
    usim_layout lay;
    if ((rc = usim_layout_make(&j, &lay)))
        return rc;
    usim_jobcoll jc;
    int before = sim->memo.simulated;
    usim_net_set_work_limit(sim->net, sim->work_limit);   /* the budget is per simulation */
    rc = usim_jc_run(&sim->memo, sim->net, &j, &x, &lay, &jc);
    usim_layout_free(&lay);
    if (rc)
        return rc;
    int micro = micro_steps(m, &j);
    int64_t per_step = (int64_t)j.dp * m->micro_batch;
    if ((double)micro * (double)(m->layers + 2) > USIM_MAX_LAYER_STEPS)
        return usim_set_error(USIM_EINVAL,
                              "%d micro-steps (global batch %lld / (data-parallel %d x micro-batch %lld)) "
                              "x %lld layers is more than the %.0f layer-steps one simulated iteration "
                              "holds; raise --micro-batch or lower --global-batch",
                              micro, (long long)m->global_batch, j.dp, (long long)m->micro_batch,
                              (long long)m->layers, USIM_MAX_LAYER_STEPS);
    usim_prog b;
    memset(&b, 0, sizeof b);
    gstat st;
    if (j.pp > 1) {
        if ((rc = simulate_pipeline(sim, m, &j, &x, &f, &jc, micro, r)))
            goto out;
    } else {
        if ((rc = usim_prog_init(&b, p, m, &j, &x, &f, &jc)) || (rc = run_prog(sim, &b, micro, &st)))
            goto out;
        for (int k = 0; k < USIM_NKIND; k++) {
            r->exposed_s[k] = st.exposed[k];
            r->comm_s[k] = st.comm[k];
        }
        for (int k = 0; k < USIM_NCLASS; k++)
            r->sent_bytes[k] = st.sent[k];
        r->iter_s = usim_sec(st.end);
        /* host-link waits and the CPU step are compute-stream ops but not GPU compute */
        r->lc.tiled_mlp_s = b.lc_tiled_s;
        r->lc.offload_exposed_s = b.lc_off_s;
        r->lc.offload_copy_s = b.lc_off_copy_s;
        r->lc.param_fetch_s = b.lc_param_s;
        r->lc.cpu_adam_s = b.lc_adam_s;
        r->compute_s = st.busy - b.lc_off_s - b.lc_param_s - b.lc_adam_s;
        if (r->compute_s < 0)
            r->compute_s = 0;
        r->events = st.events;
    }
    r->job = j;
    r->seq = m->seq;
    r->micro_steps = micro;
    r->global_batch = (int64_t)micro * per_step;
    r->requested_batch = m->global_batch;
    if (r->global_batch != m->global_batch)
        add_warning(r, "global batch %lld rounded up to %lld (data-parallel degree %d x micro-batch %lld "
                    "x %d micro-steps): time and throughput are for %lld sequences",
                    (long long)m->global_batch, (long long)r->global_batch, j.dp,
                    (long long)m->micro_batch, micro, (long long)r->global_batch);
    warn_heads(r, m, &j);
    r->lc.mlp_shards = usim_tiled_mlp_shards(&j, (int64_t)f.g_fc1.M, x.h);
    r->collectives_simulated = sim->memo.simulated - before;
    for (int id = 0; id < USIM_C_N; id++)   /* the collectives this iteration uses */
        if (jc.have[id]) {
            r->coll_classes += jc.r[id].classes != 0;
            r->coll_full += jc.r[id].classes == 0;
        }
    r->engine = usim_net_engine(sim->net);
    {
        double sent[2];
        if ((rc = usim_sp_layer_bytes(sim, m, &j, 0, sent)))
            goto out;
        r->sp_bytes_layer_fwd = sent[0];
    }
    double mf = usim_megatron_flops(m, r->global_batch, j.recompute == USIM_RC_FULL);
    r->tflops = mf / (r->iter_s * j.gpus) / 1e12;
    r->mfu = usim_model_flops(m, r->global_batch) / j.gpus / (r->iter_s * p->peak_flops[m->dtype]);
    usim_memory_model(p, m, &j, &x, &r->mem);
    r->fits = r->mem.bind == USIM_BIND_NONE;
    if (trace && j.pp > 1) {
        /* the critical rank's program of one micro-batch and the step's tail */
        usim_prog_free(&b);
        if ((rc = usim_prog_init(&b, p, m, &j, &x, &f, &jc)))
            goto out;
        b.pp_mode = USIM_PP_RANK;
        b.pp_layers = (int)usim_pp_rank_layers(m, &j, r->pp_critical);
        b.pp_emb = r->pp_critical == 0;
        b.pp_head = r->pp_critical == j.pp - 1;
        if ((rc = run_prog(sim, &b, 1, &st)))
            goto out;
    }
    if (trace) {
        char title[200];
        snprintf(title, sizeof title, "%s, %s, %d GPUs, %lld tokens", uly_method_sim_name(j.method),
                 m->name, j.gpus, (long long)m->seq);
        rc = usim_trace_write(trace, &b.g, &jc, title, topt ? topt->gpus : NULL, topt ? topt->ngpus : 0);
        if (!rc && ferror(trace))
            rc = usim_set_error(USIM_EIO, "error writing the trace");
    }
out:
    usim_prog_free(&b);
    return rc;
}

int usim_engine_desc(const usim_result *r, char *buf, size_t n)
{
    if (r->coll_full == 0)
        return snprintf(buf, n, "classes");
    if (r->coll_classes == 0)
        return snprintf(buf, n, r->engine == USIM_ENGINE_FULL ? "full" : "full (not alike)");
    return snprintf(buf, n, "classes + full (%d of %d full)", r->coll_full,
                    r->coll_full + r->coll_classes);
}

/* ------------------------------------------------------------ byte check */

/* Bytes GPU `gpu` sends in the sequence-parallel operations of layer 0: the
 * program of one micro-step is built (not run) on collectives that are only
 * counted, and every SP operation of layer 0's forward and backward adds its
 * collective's bytes for that GPU times the instances it stands for.  The
 * descriptors are those of usim_jc_describe, as in the simulation. */
int usim_sp_layer_bytes(usim_sim *sim, const usim_model *m, const usim_job *jin, int gpu,
                        double sent[2])
{
    usim_job j = *jin;
    sent[0] = sent[1] = 0;
    int rc = usim_job_resolve(m, &sim->p, &j);
    if (rc)
        return rc;
    if (gpu < 0 || gpu >= sim->gpus)
        return usim_set_error(USIM_EINVAL, "GPU %d out of range", gpu);
    usim_shape x;
    usim_shape_make(m, &j, &x);
    usim_flops f;
    usim_flops_make(m, &j, &x, m->causal && sim->p.attn_causal_skip, &f);
    usim_layout l;
    if ((rc = usim_layout_make(&j, &l)))
        return rc;
    usim_jobcoll jc;
    usim_prog b;
    usim_jc_buf buf = {.ch = NULL};
    memset(&b, 0, sizeof b);
    if ((rc = usim_jc_run(NULL, sim->net, &j, &x, &l, &jc)) ||
        (rc = usim_prog_init(&b, &sim->p, m, &j, &x, &f, &jc)) ||
        (rc = usim_jc_buf_new(&l, &buf)))
        goto out;
    if (usim_program_build(&b, 1)) {
        rc = usim_set_error(USIM_ENOMEM, "out of memory building the operation graph");
        goto out;
    }
    double gpu_bytes[USIM_C_N];
    int counted[USIM_C_N] = {0};
    for (int i = 0; i < b.g.n && !rc; i++) {
        const usim_op *o = &b.g.ops[i];
        if (o->layer != 0 || o->kind != USIM_KIND_SP || o->coll < 0 ||
            (o->pass != USIM_PASS_FWD && o->pass != USIM_PASS_BWD))
            continue;
        if (!counted[o->coll]) {
            usim_coll c;
            usim_coll_result res;
            USIM_CHECK(usim_jc_describe(&j, &x, &l, o->coll, &buf, &c) == 1);
            /* the algorithm the simulation ran (memo) decides the pattern */
            if ((rc = usim_collmemo_run(&sim->memo, sim->net, &c, &res)))
                break;
            if (c.type == USIM_ALLGATHER || c.type == USIM_REDUCE_SCATTER ||
                c.type == USIM_ALLREDUCE) {
                c.algo = res.algo;
                c.proto = res.proto;
            }
            uint64_t one;
            if ((rc = usim_coll_count_gpu(sim->net, &c, gpu, &res, &one)))
                break;
            gpu_bytes[o->coll] = (double)one;
            counted[o->coll] = 1;
        }
        sent[o->pass == USIM_PASS_BWD] += o->mult * gpu_bytes[o->coll];
    }
out:
    usim_jc_buf_free(&buf);
    usim_prog_free(&b);
    usim_layout_free(&l);
    return rc;
}
