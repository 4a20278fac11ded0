/* SPDX-License-Identifier: Apache-2.0 */
/*
 * opsched.c -- the operation-graph scheduler: operations run in program order
 * on their stream (compute, SP communication, parameter gathers, gradient
 * reductions) once their dependencies are done, on the event engine.
 * Communications that overlap share the representative GPU's link classes
 * (processor sharing, versioned completions); ring-attention tails end at a
 * closed-form time.  Also the exposed-communication accounting.
 *
 * Not here: what the operations are (program.c), how long a collective takes
 * in isolation (jobcoll.c, coll_run.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "opsched.h"
#include "usim.h"
#include "usim_internal.h"

const char *usim_stream_name(int stream)
{
    static const char *const n[USIM_NSTREAM] = {"compute", "comm: sequence parallel",
                                                 "comm: parameter gather", "comm: gradient reduce"};
    return stream >= 0 && stream < USIM_NSTREAM ? n[stream] : "?";
}

/* ------------------------------------------------------------ op graph */

int usim_graph_add(usim_graph *g, int stream, usim_time dur, int kind, int coll_id, int layer,
                 const char *name, int d0, int d1, int d2)
{
    if (g->err)
        return -1;
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 1024;
        usim_op *no = usim_realloc(g->ops, (size_t)cap * sizeof *no);
        if (!no) {
            g->err = USIM_ENOMEM;
            return -1;
        }
        g->ops = no;
        g->cap = cap;
    }
    if (g->nsq[stream] == g->capsq[stream]) {
        int cap = g->capsq[stream] ? 2 * g->capsq[stream] : 1024;
        int *ns = usim_realloc(g->sq[stream], (size_t)cap * sizeof *ns);
        if (!ns) {
            g->err = USIM_ENOMEM;
            return -1;
        }
        g->sq[stream] = ns;
        g->capsq[stream] = cap;
    }
    int id = g->n++;
    usim_op *o = &g->ops[id];
    memset(o, 0, sizeof *o);
    o->dur = dur;
    o->stream = stream;
    o->kind = kind;
    o->coll = coll_id;
    o->layer = layer;
    o->name = name;
    o->dep[0] = d0;
    o->dep[1] = d1;
    o->dep[2] = d2;
    o->start = o->end = -1;
    o->mult = 1;
    o->pass = g->pass;
    o->sdep = -1;
    o->tail = -1;
    g->sq[stream][g->nsq[stream]++] = id;
    return id;
}

void usim_graph_free(usim_graph *g)
{
    free(g->ops);
    for (int s = 0; s < USIM_NSTREAM; s++)
        free(g->sq[s]);
    usim_engine_free(g->eng);
}

static void on_op_done(usim_engine *e, void *ctx, int64_t arg);

static void g_at(usim_graph *g, usim_time t, int id)
{
    int64_t a = (int64_t)(((uint64_t)g->ops[id].ver << 32) | (uint32_t)id);
    if (usim_engine_at(g->eng, t, on_op_done, g, a))
        g->err = USIM_ENOMEM;
}

/* Contention between communications that overlap in time (at most one per
 * communication stream): on each link class of the representative GPU, the
 * running operations' isolated utilizations u add up; an operation using a
 * class loaded above 1 is slowed by that load (processor sharing).  Rates are
 * recomputed whenever a communication starts or ends. */
static void g_reshare(usim_graph *g, usim_time now)
{
    double load[USIM_NCLASS] = {0};
    for (int i = 0; i < g->nactive; i++) {
        usim_op *o = &g->ops[g->active[i]];
        o->rem -= o->rate * (double)(now - o->t_last);
        if (o->rem < 0)
            o->rem = 0;
        o->t_last = now;
        for (int c = 0; c < USIM_NCLASS; c++)
            load[c] += o->u[c];
    }
    for (int i = 0; i < g->nactive; i++) {
        int id = g->active[i];
        usim_op *o = &g->ops[id];
        double s = 1;
        if (g->contention)
            for (int c = 0; c < USIM_NCLASS; c++)
                if (o->u[c] > 0 && load[c] > s)
                    s = load[c];
        double rate = 1 / s;
        if (rate == o->rate && o->ver > 0)
            continue;   /* unchanged: keep the scheduled completion */
        o->rate = rate;
        o->ver++;
        double left = o->rem / rate;
        usim_time dt = (usim_time)ceil(left - USIM_TOL_PS_ABS);
        g_at(g, now + (dt > 0 ? dt : 0), id);
    }
}

static void graph_start(usim_graph *g)
{
    usim_time now = usim_engine_now(g->eng);
    int started_comm = 0;
    for (int s = 0; s < USIM_NSTREAM; s++) {
        if (g->busy[s] || g->head[s] >= g->nsq[s])
            continue;
        int id = g->sq[s][g->head[s]];
        usim_op *o = &g->ops[id];
        int ready = 1;
        for (int k = 0; k < 3; k++)
            if (o->dep[k] >= 0 && !g->ops[o->dep[k]].done)
                ready = 0;
        if (o->sdep >= 0 && g->ops[o->sdep].start < 0)
            ready = 0;
        if (!ready)
            continue;
        g->busy[s] = 1;
        g->head[s]++;
        o->start = now;
        if (o->stream != USIM_ST_COMPUTE) {
            o->rem = (double)o->dur;
            o->rate = 0;
            o->t_last = now;
            g->active[g->nactive++] = id;
            started_comm = 1;
            continue;
        }
        if (o->tail_R > 1) {
            /* Blocks 1..R-1 of a ring pass: block k needs hop k-1, which ends at
             * h + k H (h: start of the hop chain); blocks run back to back.  The
             * recurrence e_k = max(e_{k-1}, h + k H) + B has the closed form
             * max(now + (R-1) B, h + H + (R-1) B, end of the hop chain + B)
             * (the max of a linear function of k is at an end point); the last
             * term is known when the chain ends (it may be slowed by contention). */
            usim_time h = g->ops[o->sdep].start, B = o->tail_B, H = o->tail_H;
            int64_t R = o->tail_R;
            usim_time e = now + (R - 1) * B;
            if (h + H + (R - 1) * B > e)
                e = h + H + (R - 1) * B;
            o->tail_e1 = e;
            const usim_op *chain = &g->ops[o->sdep];
            if (chain->done) {
                if (chain->end + B > e)
                    e = chain->end + B;
                g_at(g, e, id);
            }
            continue;   /* else scheduled when the chain ends */
        }
        g_at(g, now + o->dur, id);
    }
    if (started_comm)
        g_reshare(g, now);
}

static void on_op_done(usim_engine *e, void *ctx, int64_t arg)
{
    usim_graph *g = ctx;
    if (g->err)
        return;   /* a failed run drains its queue */
    int id = (int)(arg & 0xffffffff);
    uint32_t ver = (uint32_t)((uint64_t)arg >> 32);
    usim_op *o = &g->ops[id];
    if (o->ver != ver || o->done)
        return;   /* superseded by a rate change */
    usim_time now = usim_engine_now(e);
    o->end = now;
    o->done = 1;
    g->busy[o->stream] = 0;
    if (o->stream != USIM_ST_COMPUTE) {
        for (int i = 0; i < g->nactive; i++)
            if (g->active[i] == id) {
                g->active[i] = g->active[--g->nactive];
                break;
            }
        o->dur = o->end - o->start;
        g_reshare(g, now);
        if (o->tail >= 0) {
            usim_op *t = &g->ops[o->tail];
            if (t->start >= 0 && !t->done) {
                usim_time end = now + t->tail_B > t->tail_e1 ? now + t->tail_B : t->tail_e1;
                g_at(g, end, o->tail);
            }
        }
    } else if (o->tail_R > 1) {
        o->dur = o->end - o->start;
    }
    graph_start(g);
}

int usim_graph_run(usim_graph *g)
{
    graph_start(g);
    usim_engine_run(g->eng);
    return g->err;
}

/* ------------------------------------------------------------ results */

static int cmp_time(const void *a, const void *b)
{
    usim_time x = *(const usim_time *)a, y = *(const usim_time *)b;
    return (x > y) - (x < y);
}

int usim_graph_exposed(const usim_graph *g, usim_time end, double out[USIM_NKIND])
{
    return usim_graph_exposed_from(g, 0, end, out);
}

int usim_graph_exposed_from(const usim_graph *g, usim_time from, usim_time end, double out[USIM_NKIND])
{
    int n = g->n;
    usim_time *pts = usim_malloc((size_t)(2 * n + 2) * sizeof *pts);
    if (!pts)
        return usim_set_error(USIM_ENOMEM, "out of memory");
    int np = 0;
    /* The instants in order: each stream runs its operations one after
     * another, so its (start, end) sequence is already sorted and a merge of
     * the streams replaces a sort (the same list). */
    int at[USIM_NSTREAM] = {0}, sorted = 1;
    for (int st = 0; st < USIM_NSTREAM; st++)
        for (int k = 0; k + 1 < 2 * g->nsq[st] && sorted; k++) {
            const usim_op *a = &g->ops[g->sq[st][k / 2]], *b = &g->ops[g->sq[st][(k + 1) / 2]];
            sorted = (k % 2 ? b->start >= a->end : a->end >= a->start);
        }
    if (sorted) {
        pts[np++] = 0;
        for (;;) {
            int best = -1;
            usim_time bt = 0;
            for (int st = 0; st < USIM_NSTREAM; st++) {
                if (at[st] >= 2 * g->nsq[st])
                    continue;
                const usim_op *o = &g->ops[g->sq[st][at[st] / 2]];
                usim_time t = at[st] % 2 ? o->end : o->start;
                if (best < 0 || t < bt) {
                    best = st;
                    bt = t;
                }
            }
            if (best < 0)
                break;
            pts[np++] = bt;
            at[best]++;
        }
        pts[np++] = end;
        for (int i = np - 1; i > 0 && pts[i] < pts[i - 1]; i--) {   /* end in its place */
            usim_time t = pts[i];
            pts[i] = pts[i - 1];
            pts[i - 1] = t;
        }
    } else {
        for (int i = 0; i < n; i++) {
            pts[np++] = g->ops[i].start;
            pts[np++] = g->ops[i].end;
        }
        pts[np++] = 0;
        pts[np++] = end;
        qsort(pts, (size_t)np, sizeof *pts, cmp_time);
    }
    int u = 0;
    for (int i = 0; i < np; i++)
        if (u == 0 || pts[i] != pts[u - 1])
            pts[u++] = pts[i];
    int idx[USIM_NSTREAM] = {0};
    usim_time acc[USIM_NKIND] = {0};
    for (int i = 0; i + 1 < u; i++) {
        usim_time t0 = pts[i], t1 = pts[i + 1];
        if (t1 <= from)
            continue;
        int active[USIM_NSTREAM];
        for (int s = 0; s < USIM_NSTREAM; s++) {
            /* ops on a stream are in order and do not overlap */
            while (idx[s] < g->nsq[s] && g->ops[g->sq[s][idx[s]]].end <= t0)
                idx[s]++;
            active[s] = idx[s] < g->nsq[s] && g->ops[g->sq[s][idx[s]]].start <= t0 &&
                        g->ops[g->sq[s][idx[s]]].end >= t1 && g->ops[g->sq[s][idx[s]]].end > t0;
        }
        if (active[USIM_ST_COMPUTE])
            continue;   /* busy, or a ring tail: accounted for by the caller */
        if (t0 < from)
            t0 = from;
        if (active[USIM_ST_SP])
            acc[USIM_KIND_SP] += t1 - t0;
        else if (active[USIM_ST_PARAM])
            acc[USIM_KIND_PARAM] += t1 - t0;
        else if (active[USIM_ST_GRAD])
            acc[USIM_KIND_GRAD] += t1 - t0;
    }
    for (int k = 0; k < USIM_NKIND; k++)
        out[k] = usim_sec(acc[k]);
    free(pts);
    return USIM_OK;
}