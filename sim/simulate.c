/*
 * simulate.c -- orchestration: a simulation context (platform, network,
 * memo of collectives) and one training iteration end to end: resolve the
 * job, derive shapes and FLOPs (cost.c), place the groups (job.c), simulate
 * the job's collectives (jobcoll.c), build the layer programs (program.c),
 * schedule them (sched.c), and collect the results; the per-layer byte check
 * counts the operations of the same programs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "job.h"
#include "jobcoll.h"
#include "program.h"
#include "sched.h"
#include "trace.h"
#include "usim.h"
#include "usim_internal.h"

struct usim_sim {
    usim_platform p;
    int gpus;
    usim_net *net;
    usim_collmemo memo;
    int contention;
    uint64_t *scratch_sent;
};

void usim_sim_set_contention(usim_sim *s, int on)
{
    s->contention = on != 0;
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
    s->scratch_sent = usim_calloc((size_t)gpus, sizeof *s->scratch_sent);
    if (!s->net || !s->scratch_sent) {
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
    free(s->scratch_sent);
    free(s);
}

static int micro_steps(const usim_model *m, const usim_job *j)
{
    int64_t per_step = (int64_t)j->dp * m->micro_batch;
    int micro = (int)((m->global_batch + per_step - 1) / per_step);
    return micro < 1 ? 1 : micro;
}

int usim_simulate(usim_sim *sim, const usim_model *m, const usim_job *jin, FILE *trace,
                  usim_result *r)
{
    memset(r, 0, sizeof *r);
    usim_job j = *jin;
    if (j.gpus != sim->gpus)
        return usim_set_error(USIM_EINVAL, "job has %d GPUs, simulation context %d", j.gpus, sim->gpus);
    int rc = usim_job_resolve(m, &sim->p, &j);
    if (rc)
        return rc;
    const usim_platform *p = &sim->p;
    usim_shape x;
    usim_shape_make(m, &j, &x);
    usim_flops f;
    usim_flops_make(m, &j, &x, m->causal && p->attn_causal_skip, &f);
    usim_layout lay;
    if ((rc = usim_layout_make(&j, &lay)))
        return rc;
    usim_jobcoll jc;
    int before = sim->memo.simulated;
    rc = usim_jc_run(&sim->memo, sim->net, &j, &x, &lay, &jc);
    usim_layout_free(&lay);
    if (rc)
        return rc;
    int micro = micro_steps(m, &j);
    int64_t per_step = (int64_t)j.dp * m->micro_batch;
    usim_prog b;
    if ((rc = usim_prog_init(&b, p, m, &j, &x, &f, &jc)))
        return rc;
    b.g.eng = usim_engine_new();
    b.g.contention = sim->contention;
    if (!b.g.eng) {
        rc = usim_set_error(USIM_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = usim_program_build(&b, micro))) {
        rc = usim_set_error(USIM_ENOMEM, "out of memory building the operation graph");
        goto out;
    }
    if (usim_graph_run(&b.g)) {
        rc = usim_set_error(USIM_ENOMEM, "out of memory running the operation graph");
        goto out;
    }
    usim_time end = 0, busy = 0, tail_wait = 0;
    for (int i = 0; i < b.g.n; i++) {
        const usim_op *o = &b.g.ops[i];
        USIM_CHECK(o->done && o->end >= o->start);
        if (o->end > end)
            end = o->end;
        if (o->stream == USIM_ST_COMPUTE && o->tail_R > 1) {
            /* a ring tail: R-1 blocks of compute, the rest waits for hops */
            usim_time work = (o->tail_R - 1) * o->tail_B;
            busy += work;
            tail_wait += o->dur - work;
        } else if (o->stream == USIM_ST_COMPUTE)
            busy += o->dur;
        else {
            r->comm_s[o->kind] += usim_sec(o->dur);
            for (int k = 0; k < USIM_NCLASS; k++)
                r->sent_bytes[k] += (double)jc.r[o->coll].max_sent[k] * o->mult;
        }
    }
    if ((rc = usim_graph_exposed(&b.g, end, r->exposed_s)))
        goto out;
    r->exposed_s[USIM_KIND_SP] += usim_sec(tail_wait);
    r->job = j;
    r->seq = m->seq;
    r->micro_steps = micro;
    r->global_batch = (int64_t)micro * per_step;
    r->iter_s = usim_sec(end);
    r->compute_s = usim_sec(busy);
    r->events = usim_engine_events(b.g.eng);
    r->collectives_simulated = sim->memo.simulated - before;
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
    r->fits = r->mem.total <= p->hbm_bytes;
    if (trace) {
        char title[200];
        snprintf(title, sizeof title, "%s, %s, %d GPUs, %lld tokens", usim_method_name(j.method),
                 m->name, j.gpus, (long long)m->seq);
        usim_trace_write(trace, &b.g, &jc, title);
        if (ferror(trace))
            rc = usim_set_error(USIM_EIO, "error writing the trace");
    }
out:
    usim_prog_free(&b);
    return rc;
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
    usim_jc_buf buf = {NULL, NULL};
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
            USIM_CHECK(usim_jc_describe(&j, &x, &l, o->coll, &buf, &c));
            if ((rc = usim_coll_count(sim->net, &c, &res, sim->scratch_sent, NULL)))
                break;
            gpu_bytes[o->coll] = (double)sim->scratch_sent[gpu];
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
