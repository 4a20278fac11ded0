/*
 * net.c -- the network: a DGX-style topology of links and point-to-point
 * flows that share links with max-min fairness.  Collectives built on these
 * transfers are in coll.c.
 *
 * Topology (G GPUs, g per node, D per NVLink domain, D a multiple of g):
 *   NVL_UP[gpu], NVL_DOWN[gpu]      GPU <-> NVSwitch, per direction
 *   NIC_TX[gpu], NIC_RX[gpu]        one NIC per GPU (rail-optimised), per direction
 *   SPINE_UP[node], SPINE_DOWN[node]  leaf -> spine, g * NIC / oversubscription
 *   MESH[gpu][peer]                 full-mesh nodes only: one link per ordered
 *                                   GPU pair of a node (g - 1 per GPU)
 * Route inside an NVLink domain: NVL_UP[src], NVL_DOWN[dst] (latency: NVLink);
 *   on a full-mesh node: MESH[src][dst] alone.  The domain is the node unless
 *   the platform's NVLink fabric spans several nodes (an NVL72 rack: D = 72,
 *   g = 4): then GPUs of different nodes of one domain still talk over NVLink
 *   and their traffic never touches a NIC.
 * Route across domains: NIC_TX[src], SPINE_UP, SPINE_DOWN, NIC_RX[dst] (latency: NIC).
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

enum { F_WAIT = 0, F_LAT, F_ACTIVE, F_DONE };

typedef struct flow {
    double rem;         /* bytes left at t_last */
    double rate;        /* bytes/s */
    double old_rate;    /* before the current recomputation */
    usim_time t_last;
    uint32_t ver;
    int nl;
    int link[4];
    int pos[4];         /* index of this flow in link[k]'s active list */
    int state;
    int deps_left;
    int step;           /* priority class: earlier steps are served first */
} flow;

typedef struct linkq {
    int *f;             /* active flows on the link */
    int n, cap;
} linkq;

struct usim_net {
    usim_platform p;
    int gpus, gpn, dom, nodes, nlinks;
    int mesh_base;      /* first MESH link (full-mesh nodes), else -1 */
    double *bw;         /* per link, bytes/s */
    linkq *lq;
    usim_engine *eng;
    int ring_window;
    double lat_scale[USIM_NCLASS];   /* protocol latency factor per link class */
    /* per run */
    const usim_xfer *x;
    int count;
    flow *fl;
    int *dep_off, *dep_list;
    usim_time *finish;
    int *dirty, ndirty;
    unsigned char *link_dirty;
    int reshare_pending;
    int err;
    /* scratch for recomputation */
    int *comp, *lstack, ncomp, nls;
    uint32_t *fmark, *lmark, epoch;
    double *cap;
    int *cnt;
    unsigned char *frozen;
    uint64_t last_events;
};

/* ------------------------------------------------------------ topology */

static int node_of(const usim_net *n, int g) { return g / n->gpn; }
static int domain_of(const usim_net *n, int g) { return g / n->dom; }

int usim_platform_domain(const usim_platform *p)
{
    return p->nvl_domain > p->gpus_per_node ? p->nvl_domain : p->gpus_per_node;
}

/* The GPU whose NIC links GPU g uses: the first of the GPUs sharing its NIC. */
static int nic_of(const usim_net *n, int g)
{
    int nics = n->p.nics_per_node > 0 && n->p.nics_per_node < n->gpn ? n->p.nics_per_node : n->gpn;
    int share = n->gpn / nics;
    return g - (g % n->gpn) % share;
}

/* The full-mesh link src -> dst (same node): GPU src's links to its g - 1
 * peers in local order, skipping itself. */
static int mesh_link(const usim_net *n, int src, int dst)
{
    int ls = src % n->gpn, ld = dst % n->gpn;
    return n->mesh_base + src * (n->gpn - 1) + ld - (ld > ls);
}

int usim_net_route(const usim_net *n, int src, int dst, int *links, usim_time *lat, int *cls)
{
    int G = n->gpus;
    if (src == USIM_SWITCH || dst == USIM_SWITCH) {   /* NVLS: one leg through the NVSwitch */
        links[0] = src == USIM_SWITCH ? USIM_LINK_NVL_DOWN * G + dst : USIM_LINK_NVL_UP * G + src;
        *lat = (usim_time)llround((double)n->p.nvl_lat * n->lat_scale[USIM_CLASS_NVLINK]);
        *cls = USIM_CLASS_NVLINK;
        return 1;
    }
    if (domain_of(n, src) == domain_of(n, dst)) {
        *lat = (usim_time)llround((double)n->p.nvl_lat * n->lat_scale[USIM_CLASS_NVLINK]);
        *cls = USIM_CLASS_NVLINK;
        if (n->mesh_base >= 0) {   /* full mesh: the domain is the node */
            links[0] = mesh_link(n, src, dst);
            return 1;
        }
        links[0] = USIM_LINK_NVL_UP * G + src;
        links[1] = USIM_LINK_NVL_DOWN * G + dst;
        return 2;
    }
    int base = 4 * G;
    links[0] = USIM_LINK_NIC_TX * G + nic_of(n, src);
    links[1] = base + node_of(n, src);
    links[2] = base + n->nodes + node_of(n, dst);
    links[3] = USIM_LINK_NIC_RX * G + nic_of(n, dst);
    *lat = (usim_time)llround((double)n->p.nic_lat * n->lat_scale[USIM_CLASS_NIC]);
    *cls = USIM_CLASS_NIC;
    return 4;
}

usim_net *usim_net_new(const usim_platform *p, int gpus)
{
    if (gpus < 1) {
        usim_set_error(USIM_EINVAL, "GPU count must be >= 1 (got %d)", gpus);
        return NULL;
    }
    usim_net *n = usim_calloc(1, sizeof *n);
    if (!n)
        goto oom;
    n->p = *p;
    n->gpus = gpus;
    if (p->gpus_per_node < 1 || (p->nvl_domain > 0 && p->nvl_domain % p->gpus_per_node != 0) ||
        (p->full_mesh && usim_platform_domain(p) != p->gpus_per_node) ||
        (p->full_mesh && !(p->mesh_link_Bps > 0))) {
        usim_set_error(USIM_EINVAL, "platform %s: the NVLink domain (%d GPUs) must be a multiple of the "
                       "%d GPUs per node, a full-mesh node is its own domain, and its links need a "
                       "positive bandwidth", p->name, p->nvl_domain, p->gpus_per_node);
        usim_net_free(n);
        return NULL;
    }
    n->gpn = p->gpus_per_node < gpus ? p->gpus_per_node : gpus;
    n->dom = usim_platform_domain(p) < gpus ? usim_platform_domain(p) : gpus;
    n->nodes = (gpus + n->gpn - 1) / n->gpn;
    n->nlinks = 4 * gpus + 2 * n->nodes;
    n->mesh_base = -1;
    if (p->full_mesh && n->gpn > 1) {
        n->mesh_base = n->nlinks;
        n->nlinks += gpus * (n->gpn - 1);
    }
    n->ring_window = 64;
    n->lat_scale[USIM_CLASS_NVLINK] = n->lat_scale[USIM_CLASS_NIC] = 1;
    n->bw = usim_malloc((size_t)n->nlinks * sizeof *n->bw);
    n->lq = usim_calloc((size_t)n->nlinks, sizeof *n->lq);
    n->link_dirty = usim_calloc((size_t)n->nlinks, 1);
    n->dirty = usim_malloc((size_t)n->nlinks * sizeof *n->dirty);
    n->lstack = usim_malloc((size_t)n->nlinks * sizeof *n->lstack);
    n->lmark = usim_calloc((size_t)n->nlinks, sizeof *n->lmark);
    n->cap = usim_malloc((size_t)n->nlinks * sizeof *n->cap);
    n->cnt = usim_malloc((size_t)n->nlinks * sizeof *n->cnt);
    n->eng = usim_engine_new();
    if (!n->bw || !n->lq || !n->link_dirty || !n->dirty || !n->lstack || !n->lmark || !n->cap ||
        !n->cnt || !n->eng)
        goto oom;
    for (int g = 0; g < gpus; g++) {
        n->bw[USIM_LINK_NVL_UP * gpus + g] = p->nvl_Bps;
        n->bw[USIM_LINK_NVL_DOWN * gpus + g] = p->nvl_Bps;
        n->bw[USIM_LINK_NIC_TX * gpus + g] = p->nic_Bps;
        n->bw[USIM_LINK_NIC_RX * gpus + g] = p->nic_Bps;
    }
    int nics = p->nics_per_node > 0 && p->nics_per_node < n->gpn ? p->nics_per_node : n->gpn;
    double spine = (double)nics * p->nic_Bps / (p->oversub >= 1 ? p->oversub : 1);
    for (int k = 0; k < 2 * n->nodes; k++)
        n->bw[4 * gpus + k] = spine;
    if (n->mesh_base >= 0)
        for (int l = n->mesh_base; l < n->nlinks; l++)
            n->bw[l] = p->mesh_link_Bps;
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
    if (n->lq)
        for (int l = 0; l < n->nlinks; l++)
            free(n->lq[l].f);
    free(n->lq);
    free(n->bw);
    free(n->link_dirty);
    free(n->dirty);
    free(n->lstack);
    free(n->lmark);
    free(n->cap);
    free(n->cnt);
    usim_engine_free(n->eng);
    free(n);
}

int usim_net_gpus(const usim_net *n) { return n->gpus; }
uint64_t usim_net_last_events(const usim_net *n) { return n->last_events; }
void usim_net_set_ring_window(usim_net *n, int steps) { n->ring_window = steps < 4 ? 4 : steps; }
int usim_net_ring_window(const usim_net *n) { return n->ring_window; }
const usim_platform *usim_net_platform(const usim_net *n) { return &n->p; }
int usim_net_node_of(const usim_net *n, int gpu) { return node_of(n, gpu); }
int usim_net_domain_of(const usim_net *n, int gpu) { return domain_of(n, gpu); }
int usim_net_full_mesh(const usim_net *n) { return n->mesh_base >= 0; }

void usim_net_set_latency_scale(usim_net *n, double nvlink, double nic)
{
    n->lat_scale[USIM_CLASS_NVLINK] = nvlink;
    n->lat_scale[USIM_CLASS_NIC] = nic;
}

/* ------------------------------------------------------------ flow engine */

/* Picoseconds to move rem bytes at rate (bytes/s), rounded up; values within
 * USIM_TOL_PS_* of an integer are that integer (hand-derived cases are exact). */
static usim_time ps_for(double rem, double rate)
{
    return usim_ps_ceil(rem * 1e12 / rate);
}

static int link_add(usim_net *n, int l, int f, int k)
{
    linkq *q = &n->lq[l];
    if (q->n == q->cap) {
        int cap = q->cap ? 2 * q->cap : 8;
        int *nf = usim_realloc(q->f, (size_t)cap * sizeof *nf);
        if (!nf)
            return USIM_ENOMEM;
        q->f = nf;
        q->cap = cap;
    }
    n->fl[f].pos[k] = q->n;
    q->f[q->n++] = f;
    return USIM_OK;
}

static void link_remove(usim_net *n, int l, int f, int k)
{
    linkq *q = &n->lq[l];
    int i = n->fl[f].pos[k];
    int last = q->f[--q->n];
    q->f[i] = last;
    if (last != f) {
        flow *o = &n->fl[last];
        for (int j = 0; j < o->nl; j++)
            if (o->link[j] == l) {
                o->pos[j] = i;
                break;
            }
    }
}

static void mark_dirty(usim_net *n, const flow *f)
{
    for (int k = 0; k < f->nl; k++)
        if (!n->link_dirty[f->link[k]]) {
            n->link_dirty[f->link[k]] = 1;
            n->dirty[n->ndirty++] = f->link[k];
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
    for (int k = 0; k < fl->nl; k++)
        link_remove(n, fl->link[k], f, k);
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
    for (int k = 0; k < fl->nl; k++)
        if (link_add(n, fl->link[k], f, k)) {
            n->err = USIM_ENOMEM;
            return;
        }
    mark_dirty(n, fl);
    request_reshare(n, now);
}

/* Max-min fair rates for the component of flows reachable from dirty links. */
static void on_reshare(usim_engine *e, void *ctx, int64_t arg)
{
    usim_net *n = ctx;
    usim_time now = usim_engine_now(e);
    n->reshare_pending = 0;
    if (n->err)
        return;
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
            int f = n->lq[l].f[j];
            if (n->fmark[f] == n->epoch)
                continue;
            n->fmark[f] = n->epoch;
            n->comp[n->ncomp++] = f;
            flow *fl = &n->fl[f];
            for (int k = 0; k < fl->nl; k++)
                if (n->lmark[fl->link[k]] != n->epoch) {
                    n->lmark[fl->link[k]] = n->epoch;
                    n->lstack[n->nls++] = fl->link[k];
                }
        }
    }
    if (n->ncomp == 0)
        return;
    /* bring the component up to date */
    for (int i = 0; i < n->ncomp; i++) {
        flow *fl = &n->fl[n->comp[i]];
        fl->rem -= fl->rate * usim_sec(now - fl->t_last);
        if (fl->rem < 0)
            fl->rem = 0;
        fl->t_last = now;
        fl->old_rate = fl->rate;
        n->frozen[n->comp[i]] = 0;
    }
    for (int li = 0; li < n->nls; li++)
        n->cap[n->lstack[li]] = n->bw[n->lstack[li]];
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
            for (int k = 0; k < fl->nl; k++)
                n->cnt[fl->link[k]]++;
        }
        while (in_class > 0) {
            double share = INFINITY;
            for (int li = 0; li < n->nls; li++) {
                int l = n->lstack[li];
                if (n->cnt[l] > 0) {
                    double c = n->cap[l] > USIM_TOL_CAP_REL * n->bw[l] ? n->cap[l] : 0;
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
                    double c = n->cap[l] > USIM_TOL_CAP_REL * n->bw[l] ? n->cap[l] : 0;
                    hit = n->cnt[l] > 0 && c / n->cnt[l] <= lim;
                }
                if (!hit)
                    continue;
                n->frozen[f] = 1;
                left--;
                in_class--;
                fl->rate = share;
                for (int k = 0; k < fl->nl; k++) {
                    n->cap[fl->link[k]] -= share;
                    n->cnt[fl->link[k]]--;
                }
            }
        }
    }
    for (int i = 0; i < n->ncomp; i++) {
        int f = n->comp[i];
        flow *fl = &n->fl[f];
        if (fl->ver > 0 && fl->rate == fl->old_rate)
            continue;   /* unchanged: its scheduled completion stands */
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
    int rc = USIM_OK;
    *makespan = 0;
    if (count == 0)
        return USIM_OK;
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
    if (!n->fl || !n->dep_off || !n->dep_list || !n->comp || !n->fmark || !n->frozen || !fin) {
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
        if (fl->deps_left == 0) {
            fl->state = F_LAT;
            if ((rc = usim_engine_at(n->eng, lat, on_activate, n, i)))
                goto out;
        }
    }
    usim_engine_run(n->eng);
    n->last_events = usim_engine_events(n->eng);
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
    for (int l = 0; l < n->nlinks; l++)
        USIM_CHECK(n->lq[l].n == 0);
out:
    if (!finish)
        free(fin);
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
    for (int l = 0; l < n->nlinks; l++)   /* empty after success; cleared after a failure */
        n->lq[l].n = 0;
    for (int i = 0; i < n->ndirty; i++)
        n->link_dirty[n->dirty[i]] = 0;
    n->ndirty = 0;
    return rc;
}
