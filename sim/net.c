/* SPDX-License-Identifier: Apache-2.0 */
/*
 * net.c -- the network's flow solver: point-to-point transfers with
 * dependencies become flows on the routes of topo.c and share links with
 * max-min fairness.  Collectives built on these transfers are in coll_*.c;
 * the state they keep between collectives is one opaque member
 * (coll_engine.h) that this file creates and frees only.
 *
 * Flow model: a transfer waits for its dependencies, then for the route's
 * latency, then becomes a flow.  Flows get max-min fair rates (progressive
 * filling), recomputed for the connected component of flows touched whenever
 * a flow starts or finishes; all changes at one instant are batched into one
 * recomputation.  Not here: packetisation, congestion control, adaptive routing.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "usim.h"
#include "usim_internal.h"
#include "coll_engine.h"
#include "net_internal.h"

enum { F_WAIT = 0, F_LAT, F_ACTIVE, F_DONE };

typedef struct flow {
    double rem;         /* bytes left at t_last */
    double rate;        /* bytes/s */
    double old_rate;    /* before the current recomputation */
    usim_time t_last;
    uint32_t ver;
    int nl;
    int link[4];
    int state;
    int deps_left;
    int step;           /* priority class: earlier steps are served first */
    int l0, nload;      /* its loads: entries l0 .. l0 + nload - 1 of the run's load arrays */
} flow;

/* A flow loads links: in the full simulation each link of its route once; in
 * the class simulation (coll_class.c) a representative flow also stands for its
 * copies, so it loads a link w times (w copies cross it), and may load links
 * its own route does not use (copies of it elsewhere cross them).  A flow's
 * rate is limited by the links of its own route. */
typedef struct linkq {
    int *f;             /* load entries of the active flows on the link */
    int n, cap;
} linkq;

usim_net *usim_net_new(const usim_platform *p, int gpus)
{
    if (gpus < 1) {
        usim_set_error(USIM_EINVAL, "GPU count must be >= 1 (got %d)", gpus);
        return NULL;
    }
    usim_net *n = usim_calloc(1, sizeof *n);
    if (!n)
        goto oom;
    if (usim_net_topo_init(n, p, gpus)) {
        usim_net_free(n);
        return NULL;
    }
    n->lat[USIM_CLASS_NVLINK] = p->nvl_lat;
    n->lat[USIM_CLASS_NIC] = p->nic_lat;
    n->lq = usim_calloc((size_t)n->nlinks, sizeof *n->lq);
    n->link_dirty = usim_calloc((size_t)n->nlinks, 1);
    n->dirty = usim_malloc((size_t)n->nlinks * sizeof *n->dirty);
    n->lstack = usim_malloc((size_t)n->nlinks * sizeof *n->lstack);
    n->lmark = usim_calloc((size_t)n->nlinks, sizeof *n->lmark);
    n->cap = usim_malloc((size_t)n->nlinks * sizeof *n->cap);
    n->cnt = usim_malloc((size_t)n->nlinks * sizeof *n->cnt);
    n->eng = usim_engine_new();
    n->coll = usim_coll_engine_new();
    if (!n->lq || !n->link_dirty || !n->dirty || !n->lstack || !n->lmark || !n->cap ||
        !n->cnt || !n->eng || !n->coll)
        goto oom;
    return n;
oom:
    usim_net_free(n);
    usim_set_error(USIM_ENOMEM, "out of memory building a network of %d GPUs", gpus);
    return NULL;
}

void usim_net_free(usim_net *n)
{
    if (!n)
        return;
    for (int i = 0; n->lq && i < n->nused; i++)
        free(n->lq[n->lq_used[i]].f);
    free(n->lq);
    free(n->lq_used);
    usim_coll_engine_free(n->coll);
    free(n->link_dirty);
    free(n->dirty);
    free(n->lstack);
    free(n->lmark);
    free(n->cap);
    free(n->cnt);
    usim_engine_free(n->eng);
    free(n);
}

usim_coll_engine *usim_net_coll_engine(usim_net *n) { return n->coll; }
uint64_t usim_net_last_events(const usim_net *n) { return n->last_events; }
/* The collectives' settings, kept in their state (coll_engine.h). */
void usim_net_set_ring_window(usim_net *n, int steps) { usim_coll_engine_set_ring_window(n->coll, steps); }
void usim_net_set_engine(usim_net *n, int engine) { usim_coll_engine_set_mode(n->coll, engine); }
int usim_net_engine(const usim_net *n) { return usim_coll_engine_mode(n->coll); }

/* ------------------------------------------------------------ flow engine */

/* Picoseconds to move rem bytes at rate (bytes/s), rounded up; values within
 * USIM_TOL_PS_* of an integer are that integer (hand-derived cases are exact). */
static usim_time ps_for(double rem, double rate)
{
    return usim_ps_ceil(rem * 1e12 / rate);
}

static int link_add(usim_net *n, int e)
{
    linkq *q = &n->lq[n->ld_link[e]];
    if (q->cap == 0 && n->nused == n->capused) {
        int cap = n->capused ? 2 * n->capused : 256;
        int *nu = usim_realloc(n->lq_used, (size_t)cap * sizeof *nu);
        if (!nu)
            return USIM_ENOMEM;
        n->lq_used = nu;
        n->capused = cap;
    }
    if (q->n == q->cap) {
        int cap = q->cap ? 2 * q->cap : 8;
        int *nf = usim_realloc(q->f, (size_t)cap * sizeof *nf);
        if (!nf)
            return USIM_ENOMEM;
        if (q->cap == 0)
            n->lq_used[n->nused++] = n->ld_link[e];
        q->f = nf;
        q->cap = cap;
    }
    n->ld_pos[e] = q->n;
    q->f[q->n++] = e;
    return USIM_OK;
}

static void link_remove(usim_net *n, int e)
{
    linkq *q = &n->lq[n->ld_link[e]];
    int i = n->ld_pos[e];
    int last = q->f[--q->n];
    q->f[i] = last;
    n->ld_pos[last] = i;
}

static void mark_dirty(usim_net *n, const flow *f)
{
    for (int k = f->l0; k < f->l0 + f->nload; k++)
        if (!n->link_dirty[n->ld_link[k]]) {
            n->link_dirty[n->ld_link[k]] = 1;
            n->dirty[n->ndirty++] = n->ld_link[k];
        }
}

static void on_reshare(usim_engine *e, void *ctx, int64_t arg);
static void on_activate(usim_engine *e, void *ctx, int64_t arg);

static void request_reshare(usim_net *n, usim_time now)
{
    if (n->reshare_pending)
        return;
    n->reshare_pending = 1;
    if (usim_engine_at(n->eng, now, on_reshare, n, 0))
        n->err = USIM_ENOMEM;
}

static void complete(usim_net *n, int f, usim_time now)
{
    flow *fl = &n->fl[f];
    fl->state = F_DONE;
    n->finish[f] = now;
    for (int i = n->dep_off[f]; i < n->dep_off[f + 1]; i++) {
        int d = n->dep_list[i];
        if (--n->fl[d].deps_left == 0) {
            usim_time lat = 0;
            int links[4], cls;
            if (n->x[d].src != n->x[d].dst)
                usim_net_route(n, n->x[d].src, n->x[d].dst, links, &lat, &cls);
            if (n->x[d].nolat)
                lat = 0;
            n->fl[d].state = F_LAT;
            if (usim_engine_at(n->eng, now + lat, on_activate, n, d))
                n->err = USIM_ENOMEM;
        }
    }
}

static void on_done(usim_engine *e, void *ctx, int64_t arg)
{
    usim_net *n = ctx;
    if (n->err)
        return;   /* a failed run drains its queue */
    int f = (int)(arg & 0xffffffff);
    uint32_t ver = (uint32_t)((uint64_t)arg >> 32);
    flow *fl = &n->fl[f];
    if (fl->state != F_ACTIVE || fl->ver != ver)
        return;  /* superseded by a later rate change */
    usim_time now = usim_engine_now(e);
    for (int k = fl->l0; k < fl->l0 + fl->nload; k++)
        link_remove(n, k);
    mark_dirty(n, fl);
    fl->rem = 0;
    complete(n, f, now);
    request_reshare(n, now);
}

static void on_activate(usim_engine *e, void *ctx, int64_t arg)
{
    usim_net *n = ctx;
    if (n->err)
        return;
    int f = (int)arg;
    flow *fl = &n->fl[f];
    usim_time now = usim_engine_now(e);
    if (fl->rem <= 0 || fl->nl == 0) {
        complete(n, f, now);
        return;
    }
    fl->state = F_ACTIVE;
    fl->t_last = now;
    fl->rate = 0;
    for (int k = fl->l0; k < fl->l0 + fl->nload; k++)
        if (link_add(n, k)) {
            n->err = USIM_ENOMEM;
            return;
        }
    mark_dirty(n, fl);
    request_reshare(n, now);
}

/* Max-min fair rates for the component of flows reachable from dirty links. */
/* Add w to the run's work; over the budget, the run fails (its queue drains). */
static int charge(usim_net *n, uint64_t w)
{
    n->work += w;
    if (n->work_limit && n->work > n->work_limit) {
        n->err = USIM_ELIMIT;
        return 1;
    }
    return 0;
}

void usim_net_set_work_limit(usim_net *n, uint64_t limit)
{
    n->work_limit = limit;
    n->work = 0;
}

uint64_t usim_net_work(const usim_net *n)
{
    return n->work;
}

static void on_reshare(usim_engine *e, void *ctx, int64_t arg)
{
    usim_net *n = ctx;
    usim_time now = usim_engine_now(e);
    if (n->err)
        return;
    if (usim_engine_next_at(e, now)) {
        /* other events of this instant first: the rates are computed once,
         * after every start and end of the instant, whatever their order */
        if (usim_engine_at(e, now, on_reshare, n, 0))
            n->err = USIM_ENOMEM;
        return;
    }
    n->reshare_pending = 0;
    n->epoch++;
    n->ncomp = 0;
    n->nls = 0;
    int nlinks_comp = 0;
    /* BFS over the flow/link graph */
    for (int i = 0; i < n->ndirty; i++) {
        int l = n->dirty[i];
        n->link_dirty[l] = 0;
        if (n->lmark[l] != n->epoch) {
            n->lmark[l] = n->epoch;
            n->lstack[n->nls++] = l;
        }
    }
    n->ndirty = 0;
    for (int li = 0; li < n->nls; li++) {
        int l = n->lstack[li];
        nlinks_comp++;
        for (int j = 0; j < n->lq[l].n; j++) {
            int f = n->ld_flow[n->lq[l].f[j]];
            if (n->fmark[f] == n->epoch)
                continue;
            n->fmark[f] = n->epoch;
            n->comp[n->ncomp++] = f;
            flow *fl = &n->fl[f];
            for (int k = fl->l0; k < fl->l0 + fl->nload; k++)
                if (n->lmark[n->ld_link[k]] != n->epoch) {
                    n->lmark[n->ld_link[k]] = n->epoch;
                    n->lstack[n->nls++] = n->ld_link[k];
                }
        }
    }
    if (n->ncomp == 0)
        return;
    if (charge(n, (uint64_t)n->ncomp + (uint64_t)n->nls))
        return;
    /* remember the rates before the recomputation */
    for (int i = 0; i < n->ncomp; i++) {
        flow *fl = &n->fl[n->comp[i]];
        fl->old_rate = fl->rate;
        n->frozen[n->comp[i]] = 0;
    }
    for (int li = 0; li < n->nls; li++)
        n->cap[n->lstack[li]] = usim_link_bw(n, n->lstack[li]);
    /* Priority classes by step, earliest first: progressive filling among
     * the flows of one step on the capacity the earlier steps left.  Within a
     * step the rates are max-min fair.  (A transfer of a later step -- a
     * rank that ran ahead -- never slows one of an earlier step; with plain
     * fair sharing across steps a faster link could make a collective
     * slower.) */
    int left = n->ncomp;
    while (left > 0) {
        int step = INT32_MAX;
        for (int i = 0; i < n->ncomp; i++)
            if (!n->frozen[n->comp[i]] && n->fl[n->comp[i]].step < step)
                step = n->fl[n->comp[i]].step;
        for (int li = 0; li < n->nls; li++)
            n->cnt[n->lstack[li]] = 0;
        int in_class = 0;
        for (int i = 0; i < n->ncomp; i++) {
            flow *fl = &n->fl[n->comp[i]];
            if (n->frozen[n->comp[i]] || fl->step != step)
                continue;
            in_class++;
            for (int k = fl->l0; k < fl->l0 + fl->nload; k++)
                n->cnt[n->ld_link[k]] += n->ld_w[k];
        }
        while (in_class > 0) {
            if (charge(n, (uint64_t)n->ncomp + (uint64_t)n->nls))
                return;
            double share = INFINITY;
            for (int li = 0; li < n->nls; li++) {
                int l = n->lstack[li];
                if (n->cnt[l] > 0) {
                    double c = n->cap[l] > USIM_TOL_CAP_REL * usim_link_bw(n, l) ? n->cap[l] : 0;
                    double sh = c / n->cnt[l];
                    if (sh < share)
                        share = sh;
                }
            }
            USIM_CHECK(isfinite(share) && share >= 0);
            double lim = share * (1 + USIM_TOL_SHARE_REL);
            for (int i = 0; i < n->ncomp; i++) {
                int f = n->comp[i];
                flow *fl = &n->fl[f];
                if (n->frozen[f] || fl->step != step)
                    continue;
                int hit = 0;
                for (int k = 0; k < fl->nl && !hit; k++) {
                    int l = fl->link[k];
                    double c = n->cap[l] > USIM_TOL_CAP_REL * usim_link_bw(n, l) ? n->cap[l] : 0;
                    hit = n->cnt[l] > 0 && c / n->cnt[l] <= lim;
                }
                if (!hit)
                    continue;
                n->frozen[f] = 1;
                left--;
                in_class--;
                fl->rate = share;
                for (int k = fl->l0; k < fl->l0 + fl->nload; k++) {
                    /* one subtraction per copy: the same operations as
                     * freezing the copies one by one */
                    int l = n->ld_link[k];
                    for (int w = 0; w < n->ld_w[k]; w++)
                        n->cap[l] -= share;
                    n->cnt[l] -= n->ld_w[k];
                }
            }
        }
    }
    for (int i = 0; i < n->ncomp; i++) {
        int f = n->comp[i];
        flow *fl = &n->fl[f];
        if (fl->ver > 0 && fl->rate == fl->old_rate)
            continue;   /* unchanged: its scheduled completion stands */
        /* bytes left: updated only when the rate changes, so a flow's
         * arithmetic depends on its own rate history alone, not on when
         * recomputations of its component happened (the class engine relies
         * on this) */
        fl->rem -= fl->old_rate * usim_sec(now - fl->t_last);
        if (fl->rem < 0)
            fl->rem = 0;
        fl->t_last = now;
        fl->ver++;
        if (fl->rate <= 0)
            continue;   /* starved by earlier steps: rescheduled when they end */
        usim_time t = now + ps_for(fl->rem, fl->rate);
        int64_t a = (int64_t)(((uint64_t)fl->ver << 32) | (uint32_t)f);
        if (usim_engine_at(e, t, on_done, n, a))
            n->err = USIM_ENOMEM;
    }
}

int usim_net_run(usim_net *n, const usim_xfer *x, int count, usim_time *finish,
                 usim_time *makespan)
{
    return usim_net_run_loads(n, x, count, NULL, NULL, finish, makespan);
}

int usim_net_run_loads(usim_net *n, const usim_xfer *x, int count, const usim_loads *ld,
                       const usim_time *cls_lat, usim_time *finish, usim_time *makespan)
{
    int rc = USIM_OK;
    *makespan = 0;
    if (count == 0)
        return USIM_OK;
    if (n->work_limit && (n->work += (uint64_t)count) > n->work_limit)
        return usim_set_error(USIM_ELIMIT, "the network simulation exceeded its work budget of %llu "
                              "flow-rate updates", (unsigned long long)n->work_limit);
    for (int i = 0; i < count; i++) {
        int s_ok = x[i].src >= 0 && x[i].src < n->gpus, d_ok = x[i].dst >= 0 && x[i].dst < n->gpus;
        if (!((s_ok && d_ok) || (s_ok && x[i].dst == USIM_SWITCH) ||
              (d_ok && x[i].src == USIM_SWITCH)))
            return usim_set_error(USIM_EINVAL, "transfer %d: GPU %d -> %d out of range (0..%d)", i,
                                  x[i].src, x[i].dst, n->gpus - 1);
        for (int k = 0; k < 2; k++)
            if (x[i].dep[k] >= count || x[i].dep[k] == i)
                return usim_set_error(USIM_EINVAL, "transfer %d: bad dependency %d", i, x[i].dep[k]);
    }
    n->x = x;
    n->count = count;
    n->fl = usim_calloc((size_t)count, sizeof *n->fl);
    n->dep_off = usim_calloc((size_t)count + 1, sizeof *n->dep_off);
    n->dep_list = usim_malloc((size_t)2 * count * sizeof *n->dep_list + 1);
    n->comp = usim_malloc((size_t)count * sizeof *n->comp);
    n->fmark = usim_calloc((size_t)count, sizeof *n->fmark);
    n->frozen = usim_calloc((size_t)count, 1);
    usim_time *fin = finish ? finish : usim_malloc((size_t)count * sizeof *fin);
    n->finish = fin;
    size_t nld = ld ? (size_t)ld->off[count] : (size_t)4 * count;
    n->ld_link = usim_malloc((nld + 1) * sizeof *n->ld_link);
    n->ld_w = usim_malloc((nld + 1) * sizeof *n->ld_w);
    n->ld_flow = usim_malloc((nld + 1) * sizeof *n->ld_flow);
    n->ld_pos = usim_malloc((nld + 1) * sizeof *n->ld_pos);
    if (!n->fl || !n->dep_off || !n->dep_list || !n->comp || !n->fmark || !n->frozen || !fin ||
        !n->ld_link || !n->ld_w || !n->ld_flow || !n->ld_pos) {
        rc = usim_set_error(USIM_ENOMEM, "out of memory for %d transfers", count);
        goto out;
    }
    /* dependents in CSR form */
    for (int i = 0; i < count; i++)
        for (int k = 0; k < 2; k++)
            if (x[i].dep[k] >= 0)
                n->dep_off[x[i].dep[k] + 1]++;
    for (int i = 0; i < count; i++)
        n->dep_off[i + 1] += n->dep_off[i];
    {
        int *fill = usim_calloc((size_t)count, sizeof *fill);
        if (!fill) {
            rc = usim_set_error(USIM_ENOMEM, "out of memory for %d transfers", count);
            goto out;
        }
        for (int i = 0; i < count; i++)
            for (int k = 0; k < 2; k++)
                if (x[i].dep[k] >= 0) {
                    int d = x[i].dep[k];
                    n->dep_list[n->dep_off[d] + fill[d]++] = i;
                }
        free(fill);
    }
    if (cls_lat) {   /* until the end of the run (out:) */
        n->lat[USIM_CLASS_NVLINK] = cls_lat[USIM_CLASS_NVLINK];
        n->lat[USIM_CLASS_NIC] = cls_lat[USIM_CLASS_NIC];
    }
    usim_engine_reset(n->eng);
    n->ndirty = 0;
    n->reshare_pending = 0;
    n->err = 0;
    for (int i = 0; i < count; i++) {
        flow *fl = &n->fl[i];
        fl->rem = (double)x[i].bytes;
        fl->step = x[i].step;
        fl->deps_left = (x[i].dep[0] >= 0) + (x[i].dep[1] >= 0);
        if (x[i].dep[0] >= 0 && x[i].dep[0] == x[i].dep[1])
            fl->deps_left = 2;  /* listed twice in CSR too */
        fin[i] = -1;
        usim_time lat = 0;
        int cls;
        fl->nl = x[i].src == x[i].dst ? 0 : usim_net_route(n, x[i].src, x[i].dst, fl->link, &lat, &cls);
        if (ld) {
            int l0 = ld->off[i], nload = fl->nl ? ld->off[i + 1] - ld->off[i] : 0;
            for (int k = l0; k < l0 + nload; k++)
                if (ld->link[k] < 0 || ld->link[k] >= n->nlinks || ld->w[k] < 1) {
                    rc = usim_set_error(USIM_EINVAL, "transfer %d: bad link load", i);
                    goto out;
                }
            if (ld->route && fl->nl) {
                int m = 0;
                while (m < 4 && ld->route[4 * i + m] >= 0)
                    m++;
                for (int k = 0; k < m; k++)
                    if (ld->route[4 * i + k] >= n->nlinks) {
                        rc = usim_set_error(USIM_EINVAL, "transfer %d: bad link", i);
                        goto out;
                    }
                memcpy(fl->link, ld->route + 4 * i, (size_t)m * sizeof *fl->link);
                fl->nl = m;
            }
            fl->l0 = l0;
            fl->nload = nload;
            for (int k = fl->l0; k < fl->l0 + fl->nload; k++) {
                n->ld_link[k] = ld->link[k];
                n->ld_w[k] = ld->w[k];
                n->ld_flow[k] = i;
            }
        } else {
            fl->l0 = 4 * i;
            fl->nload = fl->nl;
            for (int k = 0; k < fl->nl; k++) {
                n->ld_link[4 * i + k] = fl->link[k];
                n->ld_w[4 * i + k] = 1;
                n->ld_flow[4 * i + k] = i;
            }
        }
        if (fl->deps_left == 0) {
            fl->state = F_LAT;
            if ((rc = usim_engine_at(n->eng, x[i].nolat ? 0 : lat, on_activate, n, i)))
                goto out;
        }
    }
    usim_engine_run(n->eng);
    n->last_events = usim_engine_events(n->eng);
    if (n->err == USIM_ELIMIT) {
        rc = usim_set_error(USIM_ELIMIT, "the network simulation exceeded its work budget of %llu "
                            "flow-rate updates", (unsigned long long)n->work_limit);
        goto out;
    }
    if (n->err) {
        rc = usim_set_error(USIM_ENOMEM, "out of memory during a network simulation");
        goto out;
    }
    for (int i = 0; i < count; i++) {
        if (fin[i] < 0) {
            rc = usim_set_error(USIM_EINVAL, "transfer %d never ran (dependency cycle)", i);
            goto out;
        }
        if (fin[i] > *makespan)
            *makespan = fin[i];
    }
    for (int i = 0; i < count; i++)   /* every link the run loaded is empty again */
        for (int k = n->fl[i].l0; k < n->fl[i].l0 + n->fl[i].nload; k++)
            USIM_CHECK(n->lq[n->ld_link[k]].n == 0);
out:
    if (!finish)
        free(fin);
    if (n->fl && n->ld_link)   /* empty after success; cleared after a failure */
        for (int i = 0; i < count; i++)
            for (int k = n->fl[i].l0; k < n->fl[i].l0 + n->fl[i].nload; k++)
                n->lq[n->ld_link[k]].n = 0;
    free(n->fl);
    free(n->dep_off);
    free(n->dep_list);
    free(n->comp);
    free(n->fmark);
    free(n->frozen);
    n->fl = NULL;
    n->dep_off = n->dep_list = n->comp = NULL;
    n->fmark = NULL;
    n->frozen = NULL;
    free(n->ld_link);
    free(n->ld_w);
    free(n->ld_flow);
    free(n->ld_pos);
    n->ld_link = n->ld_w = n->ld_flow = n->ld_pos = NULL;
    for (int i = 0; i < n->ndirty; i++)
        n->link_dirty[n->dirty[i]] = 0;
    n->ndirty = 0;
    n->lat[USIM_CLASS_NVLINK] = n->p.nvl_lat;
    n->lat[USIM_CLASS_NIC] = n->p.nic_lat;
    return rc;
}
