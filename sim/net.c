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
    int state;
    int deps_left;
    int step;           /* priority class: earlier steps are served first */
    int l0, nload;      /* its loads: entries l0 .. l0 + nload - 1 of the run's load arrays */
} flow;

/* A flow loads links: in the full simulation each link of its route once; in
 * the class simulation (coll.c) a representative flow also stands for its
 * copies, so it loads a link w times (w copies cross it), and may load links
 * its own route does not use (copies of it elsewhere cross them).  A flow's
 * rate is limited by the links of its own route. */
typedef struct linkq {
    int *f;             /* load entries of the active flows on the link */
    int n, cap;
} linkq;

struct usim_net {
    usim_platform p;
    int gpus, gpn, dom, nodes, nlinks;
    int mesh_base;      /* first MESH link (full-mesh nodes), else -1 */
    double bw_kind[4];  /* bytes/s of NVLink, NIC, spine and mesh links (link_bw) */
    linkq *lq;          /* mostly untouched: a class simulation loads few links */
    int *lq_used, nused, capused;   /* links whose queue was allocated (freed at the end) */
    int *link_tag;      /* usim_net_link_tags: zero between uses */
    usim_engine *eng;
    int ring_window;
    int engine;                      /* USIM_ENGINE_* for the collectives run on it */
    int n_classes, n_full;           /* collectives simulated by each engine */
    /* the last class analysis (coll.c): key of the groups, answer */
    int *cls_pos;
    uint64_t cls_key;
    int cls_ng, cls_p, cls_valid, cls_on;
    double lat_scale[USIM_NCLASS];   /* protocol latency factor per link class */
    /* per run */
    const usim_xfer *x;
    int count;
    flow *fl;
    int *dep_off, *dep_list;
    usim_time *finish;
    int *dirty, ndirty;
    int *ld_link, *ld_w, *ld_flow, *ld_pos;   /* load entries of the run */
    unsigned char *link_dirty;
    int reshare_pending;
    int err;
    /* work budget (usim_net_set_work_limit): flow and link visits of the
     * rate recomputations; over the limit, the run stops with USIM_ELIMIT */
    uint64_t work, work_limit;
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

/* Bandwidth of link l from its kind (no per-link array: a network of 10^6
 * GPUs has 4 x 10^6 links, of which a simulation touches a few thousand). */
static double link_bw(const usim_net *n, int l)
{
    int G = n->gpus;
    return l < 2 * G ? n->bw_kind[0] : l < 4 * G ? n->bw_kind[1]
         : l < 4 * G + 2 * n->nodes ? n->bw_kind[2] : n->bw_kind[3];
}
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

int usim_net_class(const usim_net *n, int src, int dst)
{
    if (src == USIM_SWITCH || dst == USIM_SWITCH || domain_of(n, src) == domain_of(n, dst))
        return USIM_CLASS_NVLINK;
    return USIM_CLASS_NIC;
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
        (p->full_mesh && !(usim_mesh_link_Bps(p) > 0))) {
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
    n->engine = USIM_ENGINE_AUTO;
    n->lat_scale[USIM_CLASS_NVLINK] = n->lat_scale[USIM_CLASS_NIC] = 1;
    n->lq = usim_calloc((size_t)n->nlinks, sizeof *n->lq);
    n->link_dirty = usim_calloc((size_t)n->nlinks, 1);
    n->dirty = usim_malloc((size_t)n->nlinks * sizeof *n->dirty);
    n->lstack = usim_malloc((size_t)n->nlinks * sizeof *n->lstack);
    n->lmark = usim_calloc((size_t)n->nlinks, sizeof *n->lmark);
    n->cap = usim_malloc((size_t)n->nlinks * sizeof *n->cap);
    n->cnt = usim_malloc((size_t)n->nlinks * sizeof *n->cnt);
    n->eng = usim_engine_new();
    if (!n->lq || !n->link_dirty || !n->dirty || !n->lstack || !n->lmark || !n->cap ||
        !n->cnt || !n->eng)
        goto oom;
    n->bw_kind[0] = usim_nvl_Bps(p);
    n->bw_kind[1] = usim_nic_Bps(p);
    int nics = p->nics_per_node > 0 && p->nics_per_node < n->gpn ? p->nics_per_node : n->gpn;
    double spine = (double)nics * usim_nic_Bps(p) / (p->oversub >= 1 ? p->oversub : 1);
    n->bw_kind[2] = spine;
    n->bw_kind[3] = usim_mesh_link_Bps(p);
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
    free(n->link_tag);
    free(n->cls_pos);
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

int *usim_net_link_tags(usim_net *n)
{
    if (!n->link_tag)
        n->link_tag = usim_calloc((size_t)n->nlinks, sizeof *n->link_tag);
    return n->link_tag;
}
uint64_t usim_net_last_events(const usim_net *n) { return n->last_events; }
void usim_net_set_ring_window(usim_net *n, int steps) { n->ring_window = steps < 4 ? 4 : steps; }
int usim_net_ring_window(const usim_net *n) { return n->ring_window; }
const usim_platform *usim_net_platform(const usim_net *n) { return &n->p; }
int usim_net_node_of(const usim_net *n, int gpu) { return node_of(n, gpu); }
int usim_net_domain_of(const usim_net *n, int gpu) { return domain_of(n, gpu); }
int usim_net_full_mesh(const usim_net *n) { return n->mesh_base >= 0; }

void usim_net_set_engine(usim_net *n, int engine)
{
    n->engine = engine;
    n->cls_valid = 0;
}

int *usim_net_cls_cache(usim_net *n, uint64_t key, int ng, int p, int *on)
{
    *on = -1;
    if (!n->cls_valid || n->cls_key != key || n->cls_ng != ng || n->cls_p != p)
        return NULL;
    *on = n->cls_on;
    return n->cls_pos;
}

int usim_net_cls_store(usim_net *n, uint64_t key, int ng, int p, int *pos)
{
    free(n->cls_pos);
    n->cls_pos = pos;
    n->cls_key = key;
    n->cls_ng = ng;
    n->cls_p = p;
    n->cls_on = pos != NULL;
    n->cls_valid = 1;
    return 0;
}
int usim_net_engine(const usim_net *n) { return n->engine; }

void usim_net_engine_count(usim_net *n, int classes, int *n_classes, int *n_full)
{
    if (classes > 0)
        n->n_classes++;
    else if (classes == 0)
        n->n_full++;
    if (n_classes)
        *n_classes = n->n_classes;
    if (n_full)
        *n_full = n->n_full;
}

int usim_net_units(const usim_net *n, int kind)
{
    return kind == USIM_UNIT_NODE ? n->nodes
         : kind == USIM_UNIT_DOMAIN ? (n->gpus + n->dom - 1) / n->dom : n->gpus;
}

int usim_net_unit(const usim_net *n, int kind, int gpu)
{
    return kind == USIM_UNIT_NODE ? node_of(n, gpu) : kind == USIM_UNIT_DOMAIN ? domain_of(n, gpu)
                                                                              : nic_of(n, gpu);
}

void usim_net_unit_range(const usim_net *n, int kind, int unit, int *first, int *count)
{
    int size;
    if (kind == USIM_UNIT_NIC) {
        int nics = n->p.nics_per_node > 0 && n->p.nics_per_node < n->gpn ? n->p.nics_per_node : n->gpn;
        *first = unit;
        size = nic_of(n, unit) == unit ? n->gpn / nics : 0;   /* not a NIC owner: no unit */
    } else {
        size = kind == USIM_UNIT_NODE ? n->gpn : n->dom;
        *first = unit * size;
    }
    *count = *first + size <= n->gpus ? size : n->gpus - *first;
}

int usim_net_link_users(const usim_net *n, int l, int *side, int *first, int *count)
{
    int G = n->gpus;
    if (n->mesh_base >= 0 && l >= n->mesh_base) {   /* one GPU pair's link */
        *side = 0;
        *first = (l - n->mesh_base) / (n->gpn - 1);
        *count = 1;
        return USIM_LINK_MESH;
    }
    int kind = l < 4 * G ? l / G : l < 4 * G + n->nodes ? USIM_LINK_SPINE_UP : USIM_LINK_SPINE_DOWN;
    *side = kind == USIM_LINK_NVL_DOWN || kind == USIM_LINK_NIC_RX || kind == USIM_LINK_SPINE_DOWN;
    switch (kind) {
    case USIM_LINK_NVL_UP: case USIM_LINK_NVL_DOWN:
        *first = l - kind * G;
        *count = 1;
        break;
    case USIM_LINK_NIC_TX: case USIM_LINK_NIC_RX:
        usim_net_unit_range(n, USIM_UNIT_NIC, l - kind * G, first, count);
        break;
    default:
        usim_net_unit_range(n, USIM_UNIT_NODE, (l - 4 * G) % n->nodes, first, count);
        break;
    }
    return kind;
}

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
        n->cap[n->lstack[li]] = link_bw(n, n->lstack[li]);
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
                    double c = n->cap[l] > USIM_TOL_CAP_REL * link_bw(n, l) ? n->cap[l] : 0;
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
                    double c = n->cap[l] > USIM_TOL_CAP_REL * link_bw(n, l) ? n->cap[l] : 0;
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
    return usim_net_run_loads(n, x, count, NULL, finish, makespan);
}

int usim_net_run_loads(usim_net *n, const usim_xfer *x, int count, const usim_loads *ld,
                       usim_time *finish, usim_time *makespan)
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
            if ((rc = usim_engine_at(n->eng, lat, on_activate, n, i)))
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
    return rc;
}
