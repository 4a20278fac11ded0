/*
 * coll.c -- collectives as NCCL runs them, decomposed into point-to-point
 * transfers with dependencies on the flow-level network (net.c):
 *   all-gather, reduce-scatter, all-reduce:
 *     ring  C channel rings; across nodes one channel per rail, entering a
 *           node at local GPU c and leaving it from local GPU c-1, so every
 *           NIC carries one channel (NCCL's rings over rail-optimised nodes).
 *           "Node" here is the NVLink domain (an NVL72 rack is one).  Full-mesh
 *           nodes (no switch, one link per GPU pair): inside one node, one
 *           ring per stride s coprime to the group size (order 0, s, 2s, ...),
 *           so the rings use disjoint links; across nodes (even g) channel c
 *           crosses the node along the c-th directed Walecki path (all g
 *           paths together use every link once).
 *     tree  all-reduce only, multi-node: 2g channels, each a chain through
 *           the node's GPUs ending at its head (local GPU c mod g, whose NIC
 *           it uses) and a binary tree over the nodes (NCCL's double binary
 *           tree: odd channels use the mirrored tree), reduce up and
 *           broadcast down, pipelined in slices
 *     nvls  one node with NVLink SHARP: each GPU pushes its data to the
 *           switch, which reduces / multicasts, pipelined in slices
 *   all-to-all: direct (every pair at once) or pairwise (P-1 steps)
 *   ring shift (ring attention hops), send/recv.
 * The algorithm and protocol come from tuner.c; the protocol scales the
 * bytes on the wire and the per-step latency.  Byte counters are exact
 * payload bytes over the full pattern; long rings are simulated for a window
 * of steps and extrapolated.
 *
 * Not here: the links and the flow engine (net.c), the choice of algorithm
 * (tuner.c), which collectives a training job runs (jobcoll.c).
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "usim.h"
#include "usim_internal.h"

const char *usim_coll_name(usim_coll_type t)
{
    static const char *const names[USIM_NCOLL] = {
        "all-to-all", "all-to-all-pairwise", "all-gather", "reduce-scatter",
        "all-reduce", "ring-shift", "send-recv"};
    return (t >= 0 && t < USIM_NCOLL) ? names[t] : "?";
}

/* NCCL moves data in slices of its 4 MiB buffer split in NCCL_STEPS = 8
 * (init.cc DEFAULT_BUFFSIZE, device.h NCCL_STEPS): the pipelined algorithms
 * (tree, nvls) cut each channel's data into slices of this size, at most
 * MAX_SLICES of them. */
#define SLICE_BYTES (512.0 * 1024)
#define MAX_SLICES 64

static int is_ring(usim_coll_type t)
{
    return t == USIM_ALLGATHER || t == USIM_REDUCE_SCATTER || t == USIM_ALLREDUCE;
}

/* Part k of n of a byte count split as evenly as possible. */
static uint64_t part(uint64_t bytes, int k, int n)
{
    return bytes / (uint64_t)n + ((uint64_t)k < bytes % (uint64_t)n);
}

static int slices(uint64_t bytes)
{
    double k = ceil((double)bytes / SLICE_BYTES);
    return k < 1 ? 1 : k > MAX_SLICES ? MAX_SLICES : (int)k;
}

/* ------------------------------------------------------------ group descriptions */

/*
 * A collective's groups given as a grid (usim_coll.grid) are never listed:
 * the class engine needs group 0's ranks, the position of a GPU in its group,
 * and the placement of group 0 on NVLink domains, all of which follow from the
 * digits.  The grid is refined so that every unit size (GPUs per NIC, per
 * node, per NVLink domain) is a digit boundary; each digit then lies below or
 * above each unit size, and every group is placed like group 0 (the same
 * digits vary inside a unit), which is the class condition of analyze.  A
 * grid that cannot be refined, or the full engine, lists the ranks instead.
 */
#define RG_MAX (USIM_GRID_MAXDIM + USIM_NUNIT)
typedef struct rgrid {
    int on;                     /* the grid is used (else: rank arrays) */
    int nd;                     /* digits sorted by stride, refined at the unit sizes */
    int n[RG_MAX], stride[RG_MAX];
    int64_t fw[RG_MAX];         /* weight of the digit in the index g * size + p */
    int64_t M;                  /* GPUs covered: [0, M) */
    int P;
    int dom;                    /* GPUs per NVLink domain (the geometry's node) */
    /* position digits below / above the domain size, by increasing weight */
    int nlo, nhi, lo[RG_MAX], hi[RG_MAX];
    int64_t blo;                /* largest within-domain weight sum */
} rgrid;

/* The chunk of position p of a ring collective. */
static uint64_t chunk_at(const usim_coll *c, int p)
{
    if (c->chunk_bytes)
        return c->chunk_bytes[p];
    int64_t q = c->chunk_total / c->size, r = c->chunk_total % c->size;
    return (uint64_t)(q + (p < r)) * c->chunk_mult;
}

static uint64_t chunk_sum(const usim_coll *c)
{
    if (!c->chunk_bytes)
        return (uint64_t)c->chunk_total * c->chunk_mult;
    uint64_t S = 0;
    for (int p = 0; p < c->size; p++)
        S += c->chunk_bytes[p];
    return S;
}

/* GPU of index i = g * size + p. */
static int grid_rank(const rgrid *R, int64_t i)
{
    int64_t h = 0;
    for (int k = 0; k < R->nd; k++)
        h += (i / R->fw[k]) % R->n[k] * R->stride[k];
    return (int)h;
}

/* Position of GPU h in its group, -1 if in none. */
static int grid_pos(const rgrid *R, int h)
{
    if (h < 0 || h >= R->M)
        return -1;
    int64_t p = 0;
    for (int k = 0; k < R->nd; k++)
        if (R->fw[k] < R->P)
            p += (int64_t)(h / R->stride[k] % R->n[k]) * R->fw[k];
    return (int)p;
}

/* Build R from c->grid on net n.  Returns 1 if usable, 0 if the ranks must
 * be listed (no grid, bad grid, or unit sizes across digits). */
static int grid_make(usim_net *n, const usim_coll *c, rgrid *R)
{
    memset(R, 0, sizeof *R);
    const usim_grid *gd = c->grid;
    if (c->ranks || !gd || gd->ndim < 0 || gd->ndim > USIM_GRID_MAXDIM)
        return 0;
    int64_t fw = 1, G = usim_net_gpus(n), at_p = c->size == 1;
    R->P = c->size;
    for (int k = 0; k < gd->ndim; k++) {
        if (gd->dim[k].n < 1 || gd->dim[k].stride < 1)
            return 0;
        if (gd->dim[k].n > 1) {   /* insertion by stride */
            int j = R->nd++;
            while (j > 0 && R->stride[j - 1] > gd->dim[k].stride) {
                R->n[j] = R->n[j - 1];
                R->stride[j] = R->stride[j - 1];
                R->fw[j] = R->fw[j - 1];
                j--;
            }
            R->n[j] = gd->dim[k].n;
            R->stride[j] = gd->dim[k].stride;
            R->fw[j] = fw;
        }
        fw *= gd->dim[k].n;
        at_p |= fw == c->size;
        if (fw > G)
            return 0;
    }
    if (fw != (int64_t)c->ngroups * c->size || !at_p)
        return 0;
    /* a bijection onto [0, M): strides 1, n0, n0 n1, ... */
    int64_t s = 1;
    for (int k = 0; k < R->nd; k++) {
        if (R->stride[k] != s)
            return 0;
        s *= R->n[k];
    }
    R->M = s;
    for (int kind = 0; kind < USIM_NUNIT; kind++) {
        int first, U;
        usim_net_unit_range(n, kind, 0, &first, &U);
        if (kind == USIM_UNIT_DOMAIN)
            R->dom = U;
        if (U >= R->M)
            continue;
        if (R->M % U)
            return 0;
        for (int k = 0; k < R->nd; k++) {
            int64_t lo = R->stride[k], hi = lo * R->n[k];
            if (U <= lo || U >= hi)
                continue;
            if (U % lo || hi % U || R->nd == RG_MAX)
                return 0;
            int a = (int)(U / lo);
            for (int j = R->nd; j > k + 1; j--) {
                R->n[j] = R->n[j - 1];
                R->stride[j] = R->stride[j - 1];
                R->fw[j] = R->fw[j - 1];
            }
            R->nd++;
            R->n[k + 1] = R->n[k] / a;
            R->stride[k + 1] = U;
            R->fw[k + 1] = R->fw[k] * a;
            R->n[k] = a;
            break;
        }
    }
    for (int k = 0; k < R->nd; k++) {
        if (R->fw[k] >= R->P)
            continue;
        int *list = R->stride[k] < R->dom ? R->lo : R->hi, *cnt = R->stride[k] < R->dom ? &R->nlo : &R->nhi;
        int j = (*cnt)++;
        while (j > 0 && R->fw[list[j - 1]] > R->fw[k]) {
            list[j] = list[j - 1];
            j--;
        }
        list[j] = k;
        if (R->stride[k] < R->dom)
            R->blo += (int64_t)(R->n[k] - 1) * R->fw[k];
    }
    R->on = 1;
    return 1;
}

/* The position of ring index b g + l of group 0's geometry: the b-th NVLink
 * domain in order of first appearance (the above-domain digits, least
 * weighty first), its l-th position in group order. */
static int grid_geo_pos(const rgrid *R, int b, int l)
{
    int64_t p = 0;
    for (int j = 0; j < R->nlo; j++) {
        int k = R->lo[j];
        p += (int64_t)(l % R->n[k]) * R->fw[k];
        l /= R->n[k];
    }
    for (int j = 0; j < R->nhi; j++) {
        int k = R->hi[j];
        p += (int64_t)(b % R->n[k]) * R->fw[k];
        b /= R->n[k];
    }
    return (int)p;
}

/* A copy of c with its ranks listed (*arr to free), for the paths that walk
 * every group. */
static int grid_list(const usim_coll *c, usim_coll *out, int **arr)
{
    *out = *c;
    *arr = NULL;
    const usim_grid *gd = c->grid;
    if (!gd)
        return usim_set_error(USIM_EINVAL, "%s: neither ranks nor a grid", usim_coll_name(c->type));
    size_t tot = (size_t)c->ngroups * (size_t)c->size;
    int64_t fw = 1;
    for (int k = 0; k < gd->ndim && gd->ndim <= USIM_GRID_MAXDIM; k++) {
        if (gd->dim[k].n < 1 || gd->dim[k].stride < 0)
            break;
        fw *= gd->dim[k].n;
    }
    if (gd->ndim < 0 || gd->ndim > USIM_GRID_MAXDIM || fw != (int64_t)tot)
        return usim_set_error(USIM_EINVAL, "%s: the grid does not describe %d groups of %d",
                              usim_coll_name(c->type), c->ngroups, c->size);
    int *a = usim_malloc((tot ? tot : 1) * sizeof *a);
    if (!a)
        return usim_set_error(USIM_ENOMEM, "out of memory");
    /* index i's digits (least significant first) as an odometer: h is
     * sum digit_k * stride_k */
    int dig[USIM_GRID_MAXDIM] = {0};
    int64_t h = 0;
    for (size_t i = 0; i < tot; i++) {
        a[i] = h > INT_MAX ? -1 : (int)h;
        for (int k = 0; k < gd->ndim; k++) {
            if (++dig[k] < gd->dim[k].n) {
                h += gd->dim[k].stride;
                break;
            }
            h -= (int64_t)(gd->dim[k].n - 1) * gd->dim[k].stride;
            dig[k] = 0;
        }
    }
    out->ranks = a;
    out->grid = NULL;
    *arr = a;
    return USIM_OK;
}

int usim_coll_rank(const usim_coll *c, int g, int p)
{
    int64_t i = (int64_t)g * c->size + p;
    if (c->ranks)
        return c->ranks[i];
    int64_t h = 0;
    for (int k = 0; k < c->grid->ndim; k++) {
        h += i % c->grid->dim[k].n * c->grid->dim[k].stride;
        i /= c->grid->dim[k].n;
    }
    return (int)h;
}

/* ------------------------------------------------------------ generation */

struct cls;
typedef struct gen {
    usim_net *net;
    const usim_coll *c;
    const rgrid *rg;    /* the grid of c (rg->on), else ranks are listed */
    int byslot;         /* counters indexed by group position (grid classes), else by GPU */
    int *rk0;           /* group 0's ranks from the grid, listed when the group is small */
    int build;          /* store transfers (else count only) */
    int window;         /* transfers of steps >= window are counted, not stored */
    double wire;        /* bytes on the wire per payload byte */
    usim_xfer *x;
    size_t n, cap;
    uint64_t *sent, *recv, *sent_cls;   /* per GPU, payload bytes over the full pattern */
    int err;
    int nocount;        /* store only (the counters are filled in closed form) */
    /* counters without per-GPU arrays (sent == NULL): maxima and totals */
    uint64_t dmax[USIM_NCLASS], dsent, drecv;
    int skipcount;      /* count nothing (the caller has the counters) */
    /* ring light cone (gen_ring_cone): node block of each stored transfer,
     * and whether a block represents a class (its times count) */
    int cone;
    int *xblk;
    size_t xblk_cap;
    unsigned char *isrep;
    int tree_sym;       /* tree: channel 0 alone stands for all (tree_symmetric) */
} gen;

/* GPU of position x of group gi. */
static inline int rk_at(const gen *g, int gi, int x)
{
    if (g->rk0 && gi == 0)
        return g->rk0[x];
    return g->rg->on ? grid_rank(g->rg, (int64_t)gi * g->c->size + x)
                     : g->c->ranks[(size_t)gi * g->c->size + x];
}

/* Groups up to this size have their geometry and group 0's ranks listed from
 * the grid (a lookup per transfer instead of a decode); larger ones (the
 * ZeRO ring over 65536 GPUs and more) are decoded where used: listing costs
 * O(P) per generation, while the ring's light cone reads a few blocks. */
static int grid_list_max = 4096;
#define GRID_LIST_MAX grid_list_max

int usim_test_grid_list_max(int n)
{
    int old = grid_list_max;
    grid_list_max = n;
    return old;
}

/* Counter index of GPU h: h, or its position when counting by slot. */
static inline int slot_of(const gen *g, int h)
{
    return g->byslot ? grid_pos(g->rg, h) : h;
}

/* Count a transfer of payload bytes src -> dst and, within the window, store
 * it with dependencies d0, d1.  Returns its index, or -1 if not stored. */
static int count_arrays(gen *g)
{
    size_t G = g->byslot ? (size_t)g->c->size : (size_t)usim_net_gpus(g->net);
    g->sent = usim_calloc(G, sizeof *g->sent);
    g->recv = usim_calloc(G, sizeof *g->recv);
    g->sent_cls = usim_calloc(G * USIM_NCLASS, sizeof *g->sent_cls);
    if (!g->sent || !g->recv || !g->sent_cls) {
        free(g->sent); free(g->recv); free(g->sent_cls);
        g->sent = g->recv = g->sent_cls = NULL;
        g->err = USIM_ENOMEM;
        return USIM_ENOMEM;
    }
    return USIM_OK;
}

static void count(gen *g, int src, int dst, uint64_t payload)
{
    if (src == dst || g->err || (!g->sent && count_arrays(g)))
        return;
    if (src >= 0) {
        int cls = usim_net_class(g->net, src, dst), s = slot_of(g, src);
        g->sent[s] += payload;
        g->sent_cls[(size_t)s * USIM_NCLASS + cls] += payload;
    }
    if (dst >= 0)
        g->recv[slot_of(g, dst)] += payload;
}

static int put(gen *g, int src, int dst, uint64_t payload, int d0, int d1, int step)
{
    if (!g->nocount && !g->skipcount)
        count(g, src, dst, payload);
    if (!g->build || step >= g->window || g->err)
        return -1;
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 1024;
        if (cap > (size_t)INT_MAX) {
            g->err = USIM_EINVAL;
            return -1;
        }
        usim_xfer *nx = usim_realloc(g->x, cap * sizeof *nx);
        if (!nx) {
            g->err = USIM_ENOMEM;
            return -1;
        }
        g->x = nx;
        g->cap = cap;
    }
    usim_xfer *t = &g->x[g->n];
    t->src = src;
    t->dst = dst;
    t->bytes = g->wire == 1 ? payload : (uint64_t)ceil((double)payload * g->wire);
    t->dep[0] = d0;
    t->dep[1] = d1;
    t->step = step;
    return (int)g->n++;
}

/* A transfer waiting for every index in deps (-1 entries ignored): extra
 * dependencies are folded into joins (zero-byte transfers at src). */
static int put_all(gen *g, int src, int dst, uint64_t payload, int *deps, int nd)
{
    int k = 0;
    for (int i = 0; i < nd; i++)
        if (deps[i] >= 0)
            deps[k++] = deps[i];
    while (k > 2) {
        int j = put(g, src >= 0 ? src : dst, src >= 0 ? src : dst, 0, deps[k - 2], deps[k - 1], 0);
        deps[k - 2] = j;
        k--;
    }
    return put(g, src, dst, payload, k > 0 ? deps[0] : -1, k > 1 ? deps[1] : -1, 0);
}

/* Placement of one group: N nodes (NVLink domains) of g GPUs each (uniform),
 * pos[n*g + l] = the group position of the l-th GPU (in group order) on the
 * group's n-th domain (in order of first appearance). */
typedef struct geo {
    int N, g, uniform;
    int *pos;            /* NULL: from the grid rg */
    const rgrid *rg;
} geo;

static inline int geo_pos(const geo *G, int i)
{
    return G->pos ? G->pos[i] : grid_geo_pos(G->rg, i / G->g, i % G->g);
}

/* Group gi's placement: from the grid R (any group is placed as group 0), or
 * from its listed ranks. */
static int geometry(usim_net *net, const usim_coll *c, const rgrid *R, int gi, geo *G)
{
    memset(G, 0, sizeof *G);
    int P = c->size;
    if (R->on) {
        G->rg = R;
        G->uniform = 1;
        G->N = G->g = 1;
        for (int j = 0; j < R->nlo; j++)
            G->g *= R->n[R->lo[j]];
        for (int j = 0; j < R->nhi; j++)
            G->N *= R->n[R->hi[j]];
        if (P <= GRID_LIST_MAX) {
            if (!(G->pos = usim_malloc((size_t)P * sizeof *G->pos)))
                return usim_set_error(USIM_ENOMEM, "out of memory");
            for (int i = 0; i < P; i++)
                G->pos[i] = grid_geo_pos(R, i / G->g, i % G->g);
        }
        return USIM_OK;
    }
    const int *ranks = c->ranks + (size_t)gi * P;
    int *node = usim_malloc((size_t)P * sizeof *node), *cnt = usim_calloc((size_t)P, sizeof *cnt);
    int *idx = usim_malloc((size_t)P * sizeof *idx);
    G->pos = usim_malloc((size_t)P * sizeof *G->pos);
    if (!node || !cnt || !idx || !G->pos) {
        free(node); free(cnt); free(idx); free(G->pos);
        G->pos = NULL;
        return usim_set_error(USIM_ENOMEM, "out of memory");
    }
    int N = 0, nn = usim_net_units(net, USIM_UNIT_DOMAIN);
    int *seen = usim_malloc((size_t)nn * sizeof *seen);   /* domain -> index of first appearance */
    if (!seen) {
        free(node); free(cnt); free(idx); free(G->pos);
        G->pos = NULL;
        return usim_set_error(USIM_ENOMEM, "out of memory");
    }
    for (int p = 0; p < P; p++)
        seen[usim_net_domain_of(net, ranks[p])] = -1;
    for (int p = 0; p < P; p++) {
        int nd = usim_net_domain_of(net, ranks[p]), k = seen[nd];
        if (k < 0)
            node[k = seen[nd] = N++] = nd;
        idx[p] = k;
        cnt[k]++;
    }
    free(seen);
    G->N = N;
    G->g = cnt[0];
    G->uniform = 1;
    for (int k = 0; k < N; k++)
        G->uniform &= cnt[k] == G->g;
    if (G->uniform) {
        memset(cnt, 0, (size_t)N * sizeof *cnt);
        for (int p = 0; p < P; p++)
            G->pos[idx[p] * G->g + cnt[idx[p]]++] = p;
    } else {
        G->g = P;    /* the tuner's convention for irregular groups */
        for (int p = 0; p < P; p++)
            G->pos[p] = p;
    }
    free(node); free(cnt); free(idx);
    return USIM_OK;
}

/* Channels of the ring algorithm: one per rail across nodes, else one; on
 * full-mesh nodes as described at the top. */
static int ring_channels(usim_net *net, const geo *G)
{
    if (usim_net_full_mesh(net) && G->uniform && G->g > 1) {
        if (G->N == 1)
            return usim_mesh_ring_channels(G->g);
        if (G->g % 2 == 0)
            return G->g;
    }
    return G->uniform && G->N > 1 && G->g > 1 ? G->g : 1;
}

/* The k-th stride coprime to P (1 <= stride < P). */
static int coprime_stride(int P, int k)
{
    for (int s = 1; s < P; s++)
        if (usim_gcd(s, P) == 1 && k-- == 0)
            return s;
    return 1;
}

/* Position k of directed Walecki path ch on g (even) vertices: paths
 * i = 0 .. g/2-1 run i, i+1, i-1, i+2, i-2, ..., i+g/2 (together they use every
 * edge of the complete graph once); channel ch < g/2 runs path ch forwards,
 * channel ch >= g/2 path ch - g/2 backwards, so channel ch starts at ch. */
static int walecki(int g, int ch, int k)
{
    int i = ch < g / 2 ? ch : ch - g / 2;
    int kk = ch < g / 2 ? k : g - 1 - k;
    int v = kk % 2 ? i + (kk + 1) / 2 : i - kk / 2;
    return ((v % g) + g) % g;
}

/* Sum of a[j] over the cyclic range of len indices starting at j0 (pre:
 * prefix sums of a repeated twice). */
static uint64_t cyc(const uint64_t *pre, int P, int j0, int len)
{
    j0 = ((j0 % P) + P) % P;
    return pre[j0 + len] - pre[j0];
}

/* Local order of channel ch's ring inside a node (the ring index b g + l is
 * position G->pos[b g + perm[l]]): rotation by ch, or on full-mesh nodes
 * across nodes the ch-th directed Walecki path. */
static void ring_perm(usim_net *net, const geo *G, int C, int ch, int *perm)
{
    /* as gen_ring: Walecki paths across nodes only for an even g */
    int gl = G->g, mesh = usim_net_full_mesh(net) && C > 1 && (G->N == 1 || G->g % 2 == 0);
    for (int l = 0; l < gl; l++)
        perm[l] = mesh ? walecki(gl, ch, l) : (ch + l) % gl;
}

/* The chunk size shared by every position of block b (ring indices b gl ..
 * b gl + gl - 1 of G), or -1 if they differ.  From a grid with split chunks
 * in O(digits): block b holds positions A(b) + [0, blo] (A(b) and A(b) + blo
 * among them), and the first chunk_total % size positions are one larger. */
static int64_t block_value(const usim_coll *c, const geo *G, int b, int gl)
{
    uint64_t v;
    if (!G->pos && !c->chunk_bytes && gl == G->g) {
        int64_t q = c->chunk_total / c->size, r = c->chunk_total % c->size;
        uint64_t v1 = (uint64_t)(q + 1) * c->chunk_mult, v0 = (uint64_t)q * c->chunk_mult;
        int64_t a = 0;   /* A(b): the above-domain digits of b */
        for (int j = 0; j < G->rg->nhi; j++) {
            int k = G->rg->hi[j];
            a += (int64_t)(b % G->rg->n[k]) * G->rg->fw[k];
            b /= G->rg->n[k];
        }
        if (a + G->rg->blo < r)
            v = v1;
        else if (a >= r || v0 == v1)
            v = v0;
        else
            return -1;
    } else {
        v = chunk_at(c, geo_pos(G, b * gl));
        for (int l = 1; l < gl; l++)
            if (chunk_at(c, geo_pos(G, b * gl + l)) != v)
                return -1;
    }
    return v > (uint64_t)INT64_MAX ? -1 : (int64_t)v;
}

/* Runs of blocks: blocks [b0, b1) all have block_value v (v < 0: chunks of
 * several sizes, each block alone).  Adjacent runs of one value >= 0 are one
 * run (the first and the last run may still share a value: the ring wraps). */
typedef struct bseg {
    int b0, b1;
    int64_t v;
} bseg;

static int seg_push(bseg **s, int *ns, int *cap, int b0, int b1, int64_t v)
{
    if (*ns > 0 && v >= 0 && (*s)[*ns - 1].v == v && (*s)[*ns - 1].b1 == b0) {
        (*s)[*ns - 1].b1 = b1;
        return USIM_OK;
    }
    if (*ns == *cap) {
        int nc = *cap ? 2 * *cap : 8;
        bseg *t = usim_realloc(*s, (size_t)nc * sizeof *t);
        if (!t)
            return usim_set_error(USIM_ENOMEM, "out of memory");
        *s = t;
        *cap = nc;
    }
    (*s)[(*ns)++] = (bseg){b0, b1, v};
    return USIM_OK;
}

/* The block values of blocks 0 .. nb-1 as runs (*out, freed by the caller):
 * the number of runs, or -status.  From a grid with split chunks in
 * O(log nb + blocks holding both sizes) (two binary searches: block b holds
 * positions A(b) + [0, blo] with A growing in b, so the blocks are a run of
 * larger chunks, the blocks holding position chunk_total % size - 1 and its
 * successor, and a run of smaller chunks; even chunks: one run), else one block_value per block. */
static int block_segs(const usim_coll *c, const geo *G, int gl, int nb, bseg **out)
{
    bseg *s = NULL;
    int ns = 0, cap = 0, rc = USIM_OK;
    if (G->pos || c->chunk_bytes || gl != G->g) {
        for (int b = 0; b < nb && !rc; b++)
            rc = seg_push(&s, &ns, &cap, b, b + 1, block_value(c, G, b, gl));
    } else if (c->chunk_total % c->size == 0) {
        rc = seg_push(&s, &ns, &cap, 0, nb, block_value(c, G, 0, gl));
    } else {
        int64_t r = c->chunk_total % c->size, blo = G->rg->blo;
        int lo = 0, hi = nb;   /* b1: first block with A(b) + blo >= r */
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (grid_geo_pos(G->rg, mid, 0) + blo >= r)
                hi = mid;
            else
                lo = mid + 1;
        }
        int b1 = lo;
        hi = nb;              /* b2: first block with A(b) >= r */
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (grid_geo_pos(G->rg, mid, 0) >= r)
                hi = mid;
            else
                lo = mid + 1;
        }
        int b2 = lo;
        if (b1 > 0)
            rc = seg_push(&s, &ns, &cap, 0, b1, block_value(c, G, 0, gl));
        for (int b = b1; b < b2 && !rc; b++)
            rc = seg_push(&s, &ns, &cap, b, b + 1, block_value(c, G, b, gl));
        if (b2 < nb && !rc)
            rc = seg_push(&s, &ns, &cap, b2, nb, block_value(c, G, b2, gl));
    }
    if (rc) {
        free(s);
        return -rc;
    }
    *out = s;
    return ns;
}

/* The counters of a whole ring (no step simulated), in closed form: over
 * its P - 1 steps, a reduce-scatter position i sends every chunk but chunk
 * i, an all-gather position every chunk but chunk i + 1 (ring order), an
 * all-reduce both: T - A[i], T - A[i+1], 2T - A[i] - A[i+1] per channel, T
 * the channel's share of all chunks.  The same sums as gen_ring's prefix
 * sums, without them.  Maxima and totals only (no per-GPU arrays): a block
 * whose chunks and whose successor's are one size each, the same sizes as
 * the block before, counts what that block did (same bytes, same link
 * classes: NVLink inside the block, NIC to the next), so runs of alike
 * blocks cost one block. */
static int count_ring(gen *g, int gi, const geo *G, int C)
{
    const usim_coll *c = g->c;
    int P = c->size, gl = C == 1 ? 1 : G->g, split = !c->chunk_bytes;
    uint64_t *q = split ? NULL : usim_malloc((size_t)P * sizeof *q);
    uint64_t *T = usim_malloc((size_t)C * sizeof *T);
    unsigned *rm = split ? NULL : usim_malloc((size_t)P * sizeof *rm);
    int *perm = usim_malloc((size_t)C * gl * sizeof *perm);
    uint64_t *acc = usim_calloc((size_t)gl * USIM_NCLASS, sizeof *acc);
    if ((!split && (!q || !rm)) || !T || !perm || !acc) {
        free(q); free(T); free(rm); free(perm); free(acc);
        return usim_set_error(USIM_ENOMEM, "out of memory");
    }
    uint64_t sq = 0;
    for (int p = 0; !split && p < P; p++) {   /* part(x, ch, C) = x / C + (ch < x % C) */
        q[p] = c->chunk_bytes[p] / (uint64_t)C;
        rm[p] = (unsigned)(c->chunk_bytes[p] % (uint64_t)C);
        sq += q[p];
    }
    int64_t sp_q = split ? c->chunk_total / P : 0, sp_r = split ? c->chunk_total % P : 0;
    uint64_t v1 = (uint64_t)(sp_q + 1) * c->chunk_mult, v0 = (uint64_t)sp_q * c->chunk_mult;
    for (int ch = 0; ch < C; ch++) {
        if (split) {
            T[ch] = (uint64_t)sp_r * part(v1, ch, C) + (uint64_t)(P - sp_r) * part(v0, ch, C);
        } else {
            T[ch] = sq;
            for (int p = 0; p < P; p++)
                T[ch] += (unsigned)ch < rm[p];
        }
        if (C == 1)
            perm[0] = 0;
        else
            ring_perm(g->net, G, C, ch, perm + (size_t)ch * gl);
    }
#define AV(p) (split ? part(chunk_at(c, p), ch, C) : q[p] + ((unsigned)ch < rm[p]))
    int rs = c->type == USIM_REDUCE_SCATTER, ag = c->type == USIM_ALLGATHER;
    int direct = !g->sent;   /* maxima and totals only: per block, no per-GPU arrays */
    int nb = P / gl;
    int skip = direct && (C > 1 || (G->uniform && G->N > 1 && G->g == 1));
    int64_t pk0 = -1, pk1 = -1;   /* the last block counted, its sizes and bytes */
    uint64_t psum = 0;
    bseg *u = NULL;
    int nu = skip ? block_segs(c, G, gl, nb, &u) : 0;
    if (nu < 0) {
        free(q); free(T); free(rm); free(perm); free(acc);
        return -nu;
    }
    for (int b = 0, si = 0; b < nb; b++) {
        int64_t k0 = -1, k1 = -1;
        if (u) {
            while (u[si].b1 <= b)
                si++;
            k0 = u[si].v;
            k1 = b + 1 == nb ? u[0].v : b + 1 < u[si].b1 ? k0 : u[si + 1].v;
            if (k0 >= 0 && k1 >= 0 && k0 == pk0 && k1 == pk1) {
                /* so are the blocks up to the run's last but one: the same bytes */
                int e = b + 1 < u[si].b1 ? u[si].b1 - 1 : b + 1;
                if (e <= b)
                    e = b + 1;
                g->dsent += psum * (uint64_t)(e - b);
                g->drecv += psum * (uint64_t)(e - b);
                b = e - 1;
                continue;
            }
        }
        uint64_t bsum = 0;
        for (int ch = 0; ch < C; ch++) {
            const int *pm = perm + (size_t)ch * gl;
            /* ring index i = b gl + l is position pos[b gl + pm[l]] */
            for (int l = 0; l < gl; l++) {
                int i = b * gl + l;
                int pi = geo_pos(G, b * gl + pm[l]);
                int pn = i + 1 == P ? geo_pos(G, pm[0])
                       : l + 1 == gl ? geo_pos(G, (b + 1) * gl + pm[0]) : geo_pos(G, b * gl + pm[l + 1]);
                uint64_t ai = AV(pi), an = AV(pn);
                uint64_t by = rs ? T[ch] - ai : ag ? T[ch] - an : 2 * T[ch] - ai - an;
                int src = rk_at(g, gi, pi), dst = rk_at(g, gi, pn);
                if (src == dst)
                    continue;
                /* inside a block both ends are in one NVLink domain: NVLink */
                int cl = C > 1 && l + 1 < gl ? USIM_CLASS_NVLINK : usim_net_class(g->net, src, dst);
                if (direct) {
                    acc[(size_t)pm[l] * USIM_NCLASS + cl] += by;
                    g->dsent += by;
                    g->drecv += by;
                    bsum += by;
                } else {
                    int s = slot_of(g, src);
                    g->sent[s] += by;
                    g->sent_cls[(size_t)s * USIM_NCLASS + cl] += by;
                    g->recv[slot_of(g, dst)] += by;
                }
            }
        }
#undef AV
        if (direct)   /* block b's GPUs are complete: every channel visited them */
            for (size_t x = 0; x < (size_t)gl * USIM_NCLASS; x++) {
                if (acc[x] > g->dmax[x % USIM_NCLASS])
                    g->dmax[x % USIM_NCLASS] = acc[x];
                acc[x] = 0;
            }
        pk0 = k0;
        pk1 = k1;
        psum = bsum;
    }
    free(q); free(T); free(rm); free(perm); free(acc); free(u);
    return USIM_OK;
}

static int gen_ring(gen *g, int gi, const geo *G, int C)
{
    /* full mesh: strides inside one node, Walecki paths (even g) across nodes */
    int mesh = usim_net_full_mesh(g->net) && C > 1 && (G->N == 1 || G->g % 2 == 0);
    if (g->window == 0 && !g->build && g->skipcount)
        return USIM_OK;
    if (g->window == 0 && !g->build && !(mesh && G->N == 1))   /* not the stride rings */
        return count_ring(g, gi, G, C);
    const usim_coll *c = g->c;
    int P = c->size;
    int *ord = usim_malloc((size_t)C * P * sizeof *ord);
    int *prev = usim_malloc((size_t)C * P * sizeof *prev), *cur = usim_malloc((size_t)C * P * sizeof *cur);
    uint64_t *pre = usim_malloc((size_t)(2 * P + 1) * sizeof *pre);
    if (!ord || !prev || !cur || !pre) {
        free(ord); free(prev); free(cur); free(pre);
        return usim_set_error(USIM_ENOMEM, "out of memory");
    }
    for (int ch = 0; ch < C; ch++) {
        int stride = mesh && G->N == 1 ? coprime_stride(P, ch) : 0;
        for (int i = 0; i < P; i++)
            ord[ch * P + i] = C == 1 ? geo_pos(G, i)
                            : stride ? geo_pos(G, (int)((int64_t)i * stride % P))
                            : mesh ? geo_pos(G, (i / G->g) * G->g + walecki(G->g, ch, i % G->g))
                                   : geo_pos(G, (i / G->g) * G->g + (ch + i % G->g) % G->g);
    }
    for (int i = 0; i < C * P; i++)
        prev[i] = -1;
    int ar = c->type == USIM_ALLREDUCE;
    int steps = (ar ? 2 : 1) * (P - 1), w = g->window < steps ? g->window : steps;
    for (int k = 0; k < w; k++) {
        int rs = c->type == USIM_REDUCE_SCATTER || (ar && k < P - 1);
        int kk = ar && k >= P - 1 ? k - (P - 1) : k;
        for (int ch = 0; ch < C; ch++) {
            const int *o = ord + ch * P;
            for (int i = 0; i < P; i++) {
                int ci = rs ? (((i - kk - 1) % P) + P) % P : (((i - kk) % P) + P) % P;
                uint64_t b = part(chunk_at(c, o[ci]), ch, C);
                /* my previous send, and what I received in the previous step */
                cur[ch * P + i] = put(g, rk_at(g, gi, o[i]), rk_at(g, gi, o[(i + 1) % P]), b, prev[ch * P + i],
                                      prev[ch * P + (i - 1 + P) % P], k);
            }
        }
        int *t = prev; prev = cur; cur = t;
    }
    /* steps beyond the window: counted in closed form.  In reduce-scatter
     * step k, ring index i sends chunk i-k-1; in all-gather step k chunk i-k,
     * so steps [k0, k1) cover a cyclic range of chunks. */
    if (w < steps)
        for (int ch = 0; ch < C; ch++) {
            const int *o = ord + ch * P;
            pre[0] = 0;
            for (int j = 0; j < 2 * P; j++)
                pre[j + 1] = pre[j] + part(chunk_at(c, o[j % P]), ch, C);
            int rs_end = c->type == USIM_REDUCE_SCATTER ? steps : ar ? P - 1 : 0;
            for (int i = 0; i < P; i++) {
                uint64_t b = 0;
                if (w < rs_end)                  /* k in [w, rs_end): chunks i-rs_end .. i-w-1 */
                    b += cyc(pre, P, i - rs_end, rs_end - w);
                int a0 = (w > rs_end ? w : rs_end) - rs_end, a1 = steps - rs_end;
                if (c->type != USIM_REDUCE_SCATTER && a0 < a1)   /* kk in [a0, a1): i-a1+1 .. i-a0 */
                    b += cyc(pre, P, i - a1 + 1, a1 - a0);
                if (!g->skipcount)
                    count(g, rk_at(g, gi, o[i]), rk_at(g, gi, o[(i + 1) % P]), b);
            }
        }
    free(ord); free(prev); free(cur); free(pre);
    return USIM_OK;
}

/*
 * Ring light cone.  A ring over N nodes of g ring positions each (one
 * channel per rail, every channel entering node b at one GPU and leaving it
 * from another) touches only node b's links with the transfers sent from
 * node b's positions (its NVLink links, NICs, spine up, and the receive side
 * of the next node's NIC and spine down, which no other block uses): the
 * blocks of g positions share no link.  They interact only through the
 * dependency of a block's first position on the previous block's last one,
 * one step later.  So over the simulated window of w steps, block b's
 * transfers are a function of the bytes sent by blocks b-w+1 .. b, and two
 * blocks whose windows of chunk sizes are equal have the same times.  Each
 * class of blocks is simulated by one representative with its w-1
 * predecessors (whose earliest steps are exact: block b-j is exact up to
 * step w-1-j, enough for b); the first block of a run has its dependency on
 * an unsimulated block dropped, and only representatives count for the
 * duration.  Byte counters are closed-form sums over every position.
 * Returns 1 when a reduction was made (g holds its transfers), 0 when every
 * block is needed (the caller generates the whole ring), or -status.
 */
static int int_asc(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Classes of keys by hash (open addressing): class q has hash hs[q] and a
 * representative key; same(ctx, q) compares a new key with q's. */
typedef struct ctab {
    int *tab;
    uint64_t *hs;
    size_t tb;
    int n;
} ctab;

static int ctab_init(ctab *t, int max)
{
    t->tb = 16;
    while (t->tb < (size_t)2 * max)
        t->tb *= 2;
    t->n = 0;
    t->tab = usim_malloc(t->tb * sizeof *t->tab);
    t->hs = usim_malloc((size_t)(max > 0 ? max : 1) * sizeof *t->hs);
    if (!t->tab || !t->hs) {
        free(t->tab); free(t->hs);
        return usim_set_error(USIM_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < t->tb; i++)
        t->tab[i] = -1;
    return USIM_OK;
}

/* The class of a key of hash h, or a new one (number t->n - 1, *added). */
static int ctab_class(ctab *t, uint64_t h, int (*same)(const void *ctx, int q), const void *ctx, int *added)
{
    *added = 0;
    for (size_t at = (size_t)h & (t->tb - 1);; at = (at + 1) & (t->tb - 1)) {
        int q = t->tab[at];
        if (q < 0) {
            t->tab[at] = t->n;
            t->hs[t->n] = h;
            *added = 1;
            return t->n++;
        }
        if (t->hs[q] == h && same(ctx, q))
            return q;
    }
}

static void ctab_free(ctab *t)
{
    free(t->tab);
    free(t->hs);
}

/* 64-bit hash of n ints. */
static uint64_t ints_hash(const int *v, size_t n)
{
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)n;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint64_t)(uint32_t)v[i];
        h *= 1099511628211ULL;
        h ^= h >> 29;
    }
    return h;
}

static int cone_run(gen *g, int gi, const geo *G, int C, int w, const int *reps, int nrep);
static int cone_windows(gen *g, int gi, const geo *G, int C, int w, const int *bval, int W);

static int gen_ring_cone(gen *g, int gi, const geo *G, int C, int w, const int *bval)
{
    const usim_coll *c = g->c;
    int N = G->N, gl = G->g;
    if (!G->uniform || N < 2 || w < 1)
        return 0;
    int E = w - 1 + (w + 1 + gl - 1) / gl, W = E + 1;   /* window: nodes b-E .. b */
    if (W >= N)
        return 0;
    if (bval)
        return cone_windows(g, gi, G, C, w, bval, W);
    /* The blocks' chunk sizes as runs (few: O(1) from a grid with split
     * chunks), so that nothing below is O(N). */
    bseg *u = NULL;
    int nu = block_segs(c, G, gl, N, &u);
    if (nu < 0)
        return nu;
    int *reps = NULL, nrep = 0, rc = 0;
    int64_t capr = N / w + 1;   /* nrep * w >= N: no reduction */
    if (!(reps = usim_malloc((size_t)capr * sizeof *reps))) {
        rc = -usim_set_error(USIM_ENOMEM, "out of memory");
        goto out;
    }
    /* classes: block b's window of W blocks (b-E .. b, cyclic) holds one
     * value: one class per value (its first such block represents it), else
     * b alone.  The window holds one value iff b's run, continued backwards
     * over the wrap, has W blocks or more. */
    int64_t vals[16];
    int nv = 0;
    int wrap = nu > 1 && u[0].v >= 0 && u[nu - 1].v == u[0].v;   /* the last run goes on into the first */
    for (int si = 0; si < nu; si++) {
        int64_t v = u[si].v;
        /* blocks b0 + k with k < alone stand alone; the others have uniform windows */
        int64_t before = nu == 1 && v >= 0 ? N : si == 0 && wrap ? u[nu - 1].b1 - u[nu - 1].b0 : 0;
        int64_t alone = v < 0 ? u[si].b1 - u[si].b0 : W - 1 - before;
        if (alone < 0)
            alone = 0;
        if (alone > u[si].b1 - u[si].b0)
            alone = u[si].b1 - u[si].b0;
        for (int b = u[si].b0; b < u[si].b0 + alone; b++) {
            if ((int64_t)(nrep + 1) * w >= N)
                goto out;
            reps[nrep++] = b;
        }
        if (u[si].b0 + alone < u[si].b1) {
            int k;
            for (k = 0; k < nv && vals[k] != v; k++)
                ;
            if (k == nv) {
                if (nv == 16)
                    goto out;   /* too many values: no reduction */
                vals[nv++] = v;
                if ((int64_t)(nrep + 1) * w >= N)
                    goto out;
                reps[nrep++] = u[si].b0 + (int)alone;
            }
        }
    }
    rc = cone_run(g, gi, G, C, w, reps, nrep);
out:
    free(u); free(reps);
    return rc;
}

/* The light cone of representative blocks reps[0 .. nrep - 1] (distinct):
 * each with its w - 1 predecessors.  Returns 1 when generated, 0 when that
 * is no reduction (the whole ring runs), or -status. */
static int cone_run(gen *g, int gi, const geo *G, int C, int w, const int *reps, int nrep)
{
    const usim_coll *c = g->c;
    int P = c->size, N = G->N, gl = G->g;
    int *need = NULL, *nbr = NULL, M = 0, rc = 0;
    /* the needed blocks: every representative with its w - 1 predecessors */
    if (!(need = usim_malloc((size_t)nrep * w * sizeof *need))) {
        rc = -usim_set_error(USIM_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < nrep; i++)
        for (int j = 0; j < w; j++)
            need[M++] = ((reps[i] - j) % N + N) % N;
    qsort(need, (size_t)M, sizeof *need, int_asc);
    {
        int m = 0;
        for (int i = 0; i < M; i++)
            if (m == 0 || need[m - 1] != need[i])
                need[m++] = need[i];
        M = m;
    }
    if (M >= N)
        goto out;
    /* counters: every step of every position in closed form */
    if (!g->skipcount) {
        int b0 = g->build, w0 = g->window;
        g->build = 0;
        g->window = 0;
        rc = gen_ring(g, gi, G, C);
        g->build = b0;
        g->window = w0;
        if (rc) {
            rc = -rc;
            goto out;
        }
    }
    /* per needed block (slot): whether it represents, the slots of its
     * neighbours (-1: not simulated) */
    g->isrep = usim_calloc((size_t)M, 1);
    nbr = usim_malloc((size_t)2 * M * sizeof *nbr);
    int *prev = usim_malloc((size_t)2 * C * M * gl * sizeof *prev);
    if (!g->isrep || !nbr || !prev) {
        free(prev);
        rc = -usim_set_error(USIM_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < nrep; i++) {
        int *f = bsearch(&reps[i], need, (size_t)M, sizeof *need, int_asc);
        g->isrep[f - need] = 1;
    }
    for (int bi = 0; bi < M; bi++)
        for (int z = 0; z < 2; z++) {
            int nb = z ? (need[bi] + 1) % N : (need[bi] - 1 + N) % N;
            int *f = bsearch(&nb, need, (size_t)M, sizeof *need, int_asc);
            nbr[2 * bi + z] = f ? (int)(f - need) : -1;
        }
    int *cur = prev + (size_t)C * M * gl;
    for (size_t i = 0; i < (size_t)C * M * gl; i++)
        prev[i] = -1;
    int ar = c->type == USIM_ALLREDUCE;
    g->nocount = 1;
    g->cone = 1;
    int *perm = usim_malloc((size_t)C * gl * sizeof *perm);
    if (!perm) {
        free(prev < cur ? prev : cur);
        rc = -usim_set_error(USIM_ENOMEM, "out of memory");
        goto out;
    }
    for (int ch = 0; ch < C; ch++)
        if (C == 1)
            for (int l = 0; l < gl; l++)
                perm[l] = l;   /* one channel: ring order is block order */
        else
            ring_perm(g->net, G, C, ch, perm + (size_t)ch * gl);
    /* the GPUs of the needed blocks, looked up instead of decoded per transfer */
    int *brk = usim_malloc((size_t)M * gl * sizeof *brk);
    if (!brk) {
        free(perm);
        free(prev < cur ? prev : cur);
        rc = -usim_set_error(USIM_ENOMEM, "out of memory");
        goto out;
    }
    for (int bi = 0; bi < M; bi++)
        for (int l = 0; l < gl; l++)
            brk[(size_t)bi * gl + l] = rk_at(g, gi, geo_pos(G, need[bi] * gl + l));
#define ORD(ch, j) geo_pos(G, ((j) / gl) * gl + perm[(size_t)(ch) * gl + (j) % gl])
#define RKO(ch, j, s) ((s) >= 0 ? brk[(size_t)(s) * gl + perm[(size_t)(ch) * gl + (j) % gl]] \
                                : rk_at(g, gi, ORD(ch, j)))
    for (int k = 0; k < w && !g->err; k++) {
        int rs = c->type == USIM_REDUCE_SCATTER || (ar && k < P - 1);
        int kk = ar && k >= P - 1 ? k - (P - 1) : k;
        for (int ch = 0; ch < C; ch++)
            for (int bi = 0; bi < M; bi++) {
                int b = need[bi];
                for (int l = 0; l < gl; l++) {
                    int i = b * gl + l;
                    int ci = rs ? (((i - kk - 1) % P) + P) % P : (((i - kk) % P) + P) % P;
                    uint64_t by = part(chunk_at(c, ORD(ch, ci)), ch, C);
                    int im = (i - 1 + P) % P;
                    int sm = l > 0 ? bi : nbr[2 * bi], sn = l + 1 < gl ? bi : nbr[2 * bi + 1];
                    int d0 = prev[((size_t)ch * M + bi) * gl + l];
                    int d1 = sm >= 0 ? prev[((size_t)ch * M + sm) * gl + im % gl] : -1;
                    int x = put(g, RKO(ch, i, bi), RKO(ch, (i + 1) % P, sn), by, d0, d1, k);
                    cur[((size_t)ch * M + bi) * gl + l] = x;
                    if (x >= 0) {
                        if ((size_t)x >= g->xblk_cap) {
                            size_t cap = g->xblk_cap ? 2 * g->xblk_cap : 1024;
                            int *nb = usim_realloc(g->xblk, cap * sizeof *nb);
                            if (!nb) {
                                g->err = USIM_ENOMEM;
                                break;
                            }
                            g->xblk = nb;
                            g->xblk_cap = cap;
                        }
                        g->xblk[x] = bi;   /* its slot: g->isrep is per slot */
                    }
                }
            }
        int *t = prev; prev = cur; cur = t;
    }
#undef ORD
#undef RKO
    free(brk);
    free(perm);
    free(prev < cur ? prev : cur);
    g->nocount = 0;
    rc = 1;
out:
    free(need); free(nbr);
    return rc;
}

/* Classes of blocks by their windows: block b's class is the sequence of
 * block values bval[b - W + 1 .. b] (cyclic), bval an id of everything a
 * block's transfers depend on besides their dependencies (gen_ring_uneven);
 * the first block of each class represents it.  Then the cone of the
 * representatives (cone_run): 1, 0 (no reduction) or -status. */
typedef struct wins {
    const int *bval, *reps;
    int N, W, b;
    int *buf;
} wins;

#define WIN(x, b, j) (x)->bval[(((b) - ((x)->W - 1) + (j)) % (x)->N + (x)->N) % (x)->N]
static int win_same(const void *ctx, int q)
{
    const wins *x = ctx;
    for (int j = 0; j < x->W; j++)
        if (WIN(x, x->reps[q], j) != x->buf[j])
            return 0;
    return 1;
}

static int cone_windows(gen *g, int gi, const geo *G, int C, int w, const int *bval, int W)
{
    int N = G->N, rc = 0;
    ctab t = {NULL, NULL, 0, 0};
    int *reps = usim_malloc((size_t)N * sizeof *reps), *cl = usim_malloc((size_t)N * sizeof *cl);
    int *buf = usim_malloc((size_t)W * sizeof *buf);
    if (!reps || !cl || !buf || ctab_init(&t, N)) {
        free(reps); free(cl); free(buf);
        return -usim_set_error(USIM_ENOMEM, "out of memory");
    }
    wins x = {bval, reps, N, W, 0, buf};
    /* m: an earlier block whose window is b's (checked), or b itself (a new
     * class).  Window(b + 1) is window(b) shifted by one plus bval[b + 1],
     * so it equals window(m + 1) iff bval[b + 1] == bval[m + 1]: along a
     * periodic stretch every block is found in O(1); elsewhere by a hash of
     * its window, compared entry by entry. */
    for (int b = 0, m = -1; b < N; b++) {
        if (m >= 0 && m + 1 < b && bval[b] == bval[m + 1]) {
            m++;
            cl[b] = cl[m];
            continue;
        }
        for (int j = 0; j < W; j++)
            buf[j] = WIN(&x, b, j);
        int added;
        cl[b] = ctab_class(&t, ints_hash(buf, (size_t)W), win_same, &x, &added);
        if (added)
            reps[cl[b]] = b;
        m = reps[cl[b]];
        if ((int64_t)t.n * 2 > N)
            goto out;   /* hardly a reduction: the whole ring */
    }
    rc = cone_run(g, gi, G, C, w, reps, t.n);
out:
    ctab_free(&t);
    free(reps); free(cl); free(buf);
    return rc;
}
#undef WIN

/* One ring (one channel, in position order) over a group placed unevenly on
 * its NVLink domains, such as the ZeRO ring over every GPU when the last
 * domain is partial (65536 GPUs in 72-GPU domains: 910 full, one of 16): by
 * its light cone with one position per block.  Every transfer of the ring
 * has its links to itself (a position sends to its successor only, after
 * its own previous send; checked on the transfers, blocks_local), so what a
 * position's transfer depends on besides its dependencies is its chunk
 * size and its route (NVLink or NIC): the block value.  Blocks whose
 * windows of values are the same sequence have the same times (the cone's
 * argument, with the values in place of the chunk sizes of alike blocks);
 * each class is one representative with its w - 1 predecessors.  Returns 1
 * when generated, 0 when not reduced, or -status. */
static int gen_ring_uneven(gen *g, int gi, const geo *G, int w)
{
    const usim_coll *c = g->c;
    int P = c->size;
    if (!G->pos || P < 4)
        return 0;
    geo S = *G;   /* blocks of one ring position */
    S.N = P;
    S.g = 1;
    S.uniform = 1;
    int *bval = usim_malloc((size_t)P * sizeof *bval), nv = 0, rc;
    uint64_t vals[64];
    int vcls[64];
    if (!bval)
        return -usim_set_error(USIM_ENOMEM, "out of memory");
    for (int i = 0; i < P; i++) {
        int a = rk_at(g, gi, geo_pos(G, i)), b = rk_at(g, gi, geo_pos(G, (i + 1) % P));
        uint64_t v = chunk_at(c, geo_pos(G, i));
        int cl = a == b ? -1 : usim_net_class(g->net, a, b), k;
        for (k = 0; k < nv && !(vals[k] == v && vcls[k] == cl); k++)
            ;
        if (k == nv) {
            if (nv == 64) {
                free(bval);
                return 0;   /* too many values: no reduction */
            }
            vals[nv] = v;
            vcls[nv++] = cl;
        }
        bval[i] = k;
    }
    rc = gen_ring_cone(g, gi, &S, 1, w, bval);
    free(bval);
    return rc;
}

/* Binary tree over N nodes: heap order (tree 0) or mirrored (tree 1). */
static int tree_parent(int n, int N, int t)
{
    if (t)
        n = N - 1 - n;
    int p = n == 0 ? -1 : (n - 1) / 2;
    return p < 0 ? -1 : t ? N - 1 - p : p;
}

static int tree_child(int n, int N, int t, int s)
{
    if (t)
        n = N - 1 - n;
    int ch = 2 * n + 1 + s;
    if (ch >= N)
        return -1;
    return t ? N - 1 - ch : ch;
}

/* The tree all-reduce over C = 2g channels; only channel 0 is generated when
 * g->tree_sym (tree_symmetric: the other channels are its images). */
static int gen_tree(gen *g, int gi, const geo *G)
{
    const usim_coll *c = g->c;
    int N = G->N, gl = G->g, C = 2 * gl, nch = g->tree_sym ? 1 : C;
    uint64_t S = chunk_sum(c);
    int *ord = usim_malloc((size_t)N * sizeof *ord);
    int *st = usim_malloc((size_t)N * (7 + 2 * gl) * sizeof *st);
    if (!ord || !st) {
        free(ord); free(st);
        return usim_set_error(USIM_ENOMEM, "out of memory");
    }
    int *up_prev = st, *up_cur = st + N, *have = st + 2 * N, *dn_recv = st + 3 * N;
    int *dn_prev = st + 4 * N;        /* 2 per node */
    int *cu_prev = st + 6 * N;        /* gl per node (chain reduce edges) */
    int *cd_prev = cu_prev + (size_t)N * gl;
    for (int ch = 0; ch < nch; ch++) {
        int h = ch % gl, t = ch / gl;
        /* top-down order: breadth first from the root */
        int root = t ? N - 1 : 0, no = 0;
        ord[no++] = root;
        for (int i = 0; i < no; i++)
            for (int s = 0; s < 2; s++) {
                int cn = tree_child(ord[i], N, t, s);
                if (cn >= 0)
                    ord[no++] = cn;
            }
        for (size_t i = 0; i < (size_t)N * (7 + 2 * gl); i++)
            st[i] = -1;
        uint64_t cb = part(S, ch, C);
        int K = slices(cb);
#define GPU(n, l) rk_at(g, gi, geo_pos(G, (n) * gl + (((l) % gl) + gl) % gl))
        for (int k = 0; k < K; k++) {
            uint64_t b = part(cb, k, K);
            for (int oi = N - 1; oi >= 0; oi--) {   /* reduce: children before parents */
                int n = ord[oi], x = -1;
                for (int j = 0; j < gl - 1; j++) {   /* chain h+1, h+2, ..., h */
                    int own = cu_prev[n * gl + j];
                    x = put(g, GPU(n, h + 1 + j), GPU(n, h + 2 + j), b, j == 0 ? own : x,
                            j == 0 ? -1 : own, 0);
                    cu_prev[n * gl + j] = x;
                }
                int c0 = tree_child(n, N, t, 0), c1 = tree_child(n, N, t, 1);
                int deps[4] = {x, c0 >= 0 ? up_cur[c0] : -1, c1 >= 0 ? up_cur[c1] : -1, up_prev[n]};
                int par = tree_parent(n, N, t);
                if (par >= 0) {
                    up_cur[n] = up_prev[n] = put_all(g, GPU(n, h), GPU(par, h), b, deps, 4);
                } else {
                    deps[3] = -1;
                    have[n] = put_all(g, GPU(n, h), GPU(n, h), 0, deps, 3);
                }
            }
            for (int oi = 0; oi < N; oi++) {        /* broadcast: parents before children */
                int n = ord[oi];
                if (n != root)
                    have[n] = dn_recv[n];
                for (int s = 0; s < 2; s++) {
                    int cn = tree_child(n, N, t, s);
                    if (cn < 0)
                        continue;
                    dn_recv[cn] = put(g, GPU(n, h), GPU(cn, h), b, have[n], dn_prev[2 * n + s], 0);
                    dn_prev[2 * n + s] = dn_recv[cn];
                }
                int y = have[n];
                for (int j = gl - 2; j >= 0; j--) {   /* chain back: h, h-1, ..., h+1 */
                    y = put(g, GPU(n, h + 2 + j), GPU(n, h + 1 + j), b, y, cd_prev[n * gl + j], 0);
                    cd_prev[n * gl + j] = y;
                }
            }
        }
#undef GPU
    }
    free(ord); free(st);
    return USIM_OK;
}

/*
 * The tree's symmetry.  When one group sits on N nodes, g GPUs on each (NVLink
 * domain = node, one NIC per GPU, switched NVLink; the node's other GPUs idle),
 * and every channel carries the same bytes, the network and the transfers of gen_tree are invariant under
 *   rotation  rho_r: local GPU l -> l + r of every node, channel (t, h) -> (t, h + r)
 *             (the group's GPUs of a node alike behind the NVSwitch, each with
 *             its NIC);
 *   mirror    sigma: node n -> N-1-n, channel (t, h) -> (1-t, h)
 *             (tree 1 is tree 0 mirrored, nodes alike behind the spine).
 * Every channel is the image of channel 0 under one of these 2g maps, so each
 * transfer's 2g copies have the same history and each link is in the state of
 * its image: the g NVLink ups of a node are one link, the g NIC transmitters
 * one, and so on.  Channel 0 alone is simulated on that quotient: a transfer
 * is limited by node b's links of local GPU 0 and loads, once per copy crossing
 * them, node b's and node N-1-b's (the spine links: g copies each).  Exactly
 * the class engine's argument (doc/simulator.md §3) with channels for groups.
 * Returns 1 when the symmetry holds, 0 when not, -1 out of memory.
 */
static int tree_symmetric(usim_net *n, const usim_coll *c, int classes, const rgrid *R, const geo *G)
{
    if (usim_net_engine(n) == USIM_ENGINE_FULL || !classes || c->ngroups != 1 || !G->uniform ||
        G->N < 2 || usim_net_full_mesh(n) || chunk_sum(c) % (uint64_t)(2 * G->g) != 0)
        return 0;
    gen t;   /* rank lookups only */
    memset(&t, 0, sizeof t);
    t.c = c;
    t.rg = R;
    for (int b = 0; b < G->N; b++) {
        int h0 = rk_at(&t, 0, geo_pos(G, b * G->g)), node = usim_net_node_of(n, h0);
        int nf, nc, df, dc;
        usim_net_unit_range(n, USIM_UNIT_NODE, node, &nf, &nc);
        usim_net_unit_range(n, USIM_UNIT_DOMAIN, usim_net_domain_of(n, h0), &df, &dc);
        if (nf != df || nc != dc)
            return 0;   /* the block (an NVLink domain) is not one node behind one spine port */
        for (int l = 0; l < G->g; l++) {
            int h = rk_at(&t, 0, geo_pos(G, b * G->g + l)), first, cnt;
            usim_net_unit_range(n, USIM_UNIT_NIC, usim_net_unit(n, USIM_UNIT_NIC, h), &first, &cnt);
            if (first != h || cnt != 1)
                return 0;   /* a NIC shared with another GPU */
        }
    }
    return 1;
}

/* The loads and limiting links of channel 0's transfers on the quotient
 * (tree_symmetric).  Arrays owned by the caller (ld->off, link, w, route). */
static int tree_loads(usim_net *n, const gen *g, const geo *G, usim_loads *ld)
{
    int nx = (int)g->n, N = G->N, gl = G->g, nodes = usim_net_units(n, USIM_UNIT_NODE);
    int *off = usim_malloc((size_t)(nx + 1) * sizeof *off);
    int *lk = usim_malloc(((size_t)8 * nx + 1) * sizeof *lk);
    int *w = usim_malloc(((size_t)8 * nx + 1) * sizeof *w);
    int *rt = usim_malloc(((size_t)4 * nx + 1) * sizeof *rt);
    int *blk = usim_malloc((size_t)nodes * sizeof *blk);      /* physical node -> tree node */
    int *head = usim_malloc((size_t)N * 2 * sizeof *head);    /* tree node -> local GPUs 0, 1 */
    if (!off || !lk || !w || !rt || !blk || !head) {
        free(off); free(lk); free(w); free(rt); free(blk); free(head);
        return usim_set_error(USIM_ENOMEM, "out of memory for the link loads");
    }
    for (int b = 0; b < N; b++) {
        head[2 * b] = rk_at(g, 0, geo_pos(G, b * gl));
        head[2 * b + 1] = rk_at(g, 0, geo_pos(G, b * gl + (gl > 1)));
        blk[usim_net_node_of(n, head[2 * b])] = b;
    }
    int tot = 0;
    for (int i = 0; i < nx; i++) {
        off[i] = tot;
        const usim_xfer *x = &g->x[i];
        for (int j = 0; j < 4; j++)
            rt[4 * i + j] = -1;
        if (x->src == x->dst)
            continue;
        int b = blk[usim_net_node_of(n, x->src)], e = blk[usim_net_node_of(n, x->dst)], nl;
        int l[4], m[4], cl;
        usim_time lat;
        if (b == e) {   /* a chain hop: node b's NVLink up and down of local GPU 0 */
            usim_net_route(n, head[2 * b], head[2 * b + 1], l, &lat, &cl);
            usim_net_route(n, head[2 * b + 1], head[2 * b], m, &lat, &cl);
            l[1] = m[1];
            int sb = N - 1 - b;
            usim_net_route(n, head[2 * sb], head[2 * sb + 1], m, &lat, &cl);
            int mu = m[0];
            usim_net_route(n, head[2 * sb + 1], head[2 * sb], m, &lat, &cl);
            m[0] = mu;
            nl = 2;
        } else {        /* a tree edge between heads (local GPU 0) */
            nl = usim_net_route(n, x->src, x->dst, l, &lat, &cl);
            usim_net_route(n, head[2 * (N - 1 - b)], head[2 * (N - 1 - e)], m, &lat, &cl);
        }
        for (int j = 0; j < nl; j++) {
            int spine = nl == 4 && (j == 1 || j == 2), cw = spine ? gl : 1;
            rt[4 * i + j] = l[j];
            lk[tot] = l[j];
            w[tot++] = cw;
            if (m[j] == l[j])
                w[tot - 1] += cw;   /* the middle node (N odd) is its own mirror */
        }
        for (int j = 0; j < nl; j++)
            if (m[j] != l[j]) {
                lk[tot] = m[j];
                w[tot++] = nl == 4 && (j == 1 || j == 2) ? gl : 1;
            }
    }
    off[nx] = tot;
    free(blk);
    free(head);
    ld->off = off;
    ld->link = lk;
    ld->w = w;
    ld->route = rt;
    return USIM_OK;
}

static void gen_nvls(gen *g, int gi)
{
    const usim_coll *c = g->c;
    int P = c->size;
    uint64_t S = chunk_sum(c);
    for (int p = 0; p < P; p++) {
        uint64_t mine = chunk_at(c, p), up, dn;
        switch (c->type) {
        case USIM_ALLGATHER: up = mine; dn = S; break;             /* multicast store */
        case USIM_REDUCE_SCATTER: up = S; dn = mine; break;        /* switch-side reduction */
        default: up = S + mine; dn = mine + S; break;              /* both */
        }
        int K = slices(up > dn ? up : dn), pu = -1, pd = -1;
        for (int k = 0; k < K; k++) {
            pu = put(g, rk_at(g, gi, p), USIM_SWITCH, part(up, k, K), pu, -1, 0);
            pd = put(g, USIM_SWITCH, rk_at(g, gi, p), part(dn, k, K), pu, pd, 0);
        }
    }
}

static void gen_p2p(gen *g, int gi)
{
    const usim_coll *c = g->c;
    int P = c->size;
    switch (c->type) {
    case USIM_A2A_DIRECT:
        for (int s = 0; s < P; s++)
            for (int d = 0; d < P; d++)
                if (s != d)
                    put(g, rk_at(g, gi, s), rk_at(g, gi, d), c->pair_bytes[(size_t)s * P + d], -1, -1, 0);
        break;
    case USIM_A2A_PAIRWISE: {
        /* step k: p -> p+k, after my previous send and the send I received */
        int *prev = usim_malloc((size_t)2 * P * sizeof *prev);
        if (!prev) {
            g->err = USIM_ENOMEM;
            return;
        }
        int *cur = prev + P;
        for (int p = 0; p < P; p++)
            prev[p] = -1;
        for (int k = 1; k < P; k++) {
            for (int p = 0; p < P; p++) {
                int d = (p + k) % P;
                cur[p] = put(g, rk_at(g, gi, p), rk_at(g, gi, d), c->pair_bytes[(size_t)p * P + d], prev[p],
                             prev[((p - (k - 1)) % P + P) % P], k - 1);
            }
            memcpy(prev, cur, (size_t)P * sizeof *prev);
        }
        free(prev);
        break;
    }
    case USIM_RING_SHIFT:
        for (int p = 0; p < P; p++)
            put(g, rk_at(g, gi, p), rk_at(g, gi, (p + 1) % P), c->bytes, -1, -1, 0);
        break;
    case USIM_SENDRECV:
        put(g, rk_at(g, gi, 0), rk_at(g, gi, 1), c->bytes, -1, -1, 0);
        break;
    default:
        break;
    }
}

static int validate(usim_net *n, const usim_coll *c)
{
    int P = c->size, NG = c->ngroups, G = usim_net_gpus(n);
    if (c->type < 0 || c->type >= USIM_NCOLL)
        return usim_set_error(USIM_EINVAL, "unknown collective type %d", (int)c->type);
    if (P < 1 || NG < 1 || (size_t)P * NG > (size_t)G)
        return usim_set_error(USIM_EINVAL, "%s: %d groups of %d do not fit on %d GPUs",
                              usim_coll_name(c->type), NG, P, G);
    if (c->type == USIM_SENDRECV && P != 2)
        return usim_set_error(USIM_EINVAL, "send-recv needs groups of 2 (got %d)", P);
    if ((c->type == USIM_A2A_DIRECT || c->type == USIM_A2A_PAIRWISE) && !c->pair_bytes)
        return usim_set_error(USIM_EINVAL, "all-to-all without a byte matrix");
    if (is_ring(c->type) && !c->chunk_bytes && (c->chunk_total < 0 || (c->chunk_total == 0 && c->chunk_mult == 0)))
        return usim_set_error(USIM_EINVAL, "ring collective without chunk sizes");
    if (!c->ranks)
        return USIM_OK;   /* a grid: checked by grid_make */
    if (c->algo < 0 || c->algo >= USIM_NALGO || c->proto < 0 || c->proto >= USIM_NPROTO)
        return usim_set_error(USIM_EINVAL, "%s: bad algorithm or protocol", usim_coll_name(c->type));
    for (size_t i = 0; i < (size_t)P * NG; i++)
        if (c->ranks[i] < 0 || c->ranks[i] >= G)
            return usim_set_error(USIM_EINVAL, "%s: GPU %d out of range", usim_coll_name(c->type),
                                  c->ranks[i]);
    return USIM_OK;
}

/* ------------------------------------------------------------ equivalence classes */

/*
 * The groups of a collective run the same program.  When every group is
 * placed alike -- the same partition of its positions over nodes and NICs,
 * and every node and NIC holding the same multiset of group positions as the
 * corresponding one of group 0 -- every copy of a transfer of group 0 sees
 * links in the same state as the original at every instant (the flow engine
 * computes the same numbers for it), so only group 0 is simulated: each of
 * its transfers loads each link of group 0's routes once per copy crossing it
 * (shared NICs, spine links).  doc/simulator.md section "Engine" gives the
 * argument; anything else runs at full flow level.
 */
typedef struct cls {
    int on;            /* simulate group 0 with loads */
    int nocone;        /* do not reduce a single ring by its light cone */
    int *pos;          /* per GPU: its position in its group, -1 if in none; then
                        * the number of classes and, with several, their tables */
    int borrowed;      /* pos belongs to the network's cache */
    /* classes of groups (analyze_groups): nrep of them (1: every group
     * alike); with several, per GPU its label class * size + position (-1:
     * in no group), per group its class, per class its representative group
     * and its number of groups */
    int nrep;
    const int *lab, *gcls, *rep, *csize;
    geo g0;            /* group 0's placement (N == 0: not computed) */
    rgrid rg;          /* the groups as a grid (rg.on), else listed in c->ranks */
} cls;

/* Position of GPU h in its group (-1: none), from the grid or the analysis. */
static inline int cls_pos(const cls *k, int h)
{
    return k->rg.on ? grid_pos(&k->rg, h) : k->pos[h];
}

/* The class tables stored after pos (analyze_groups), for G GPUs and NG groups. */
static void cls_decode(cls *k, int G, int NG)
{
    k->nrep = 1;
    k->lab = k->gcls = k->rep = k->csize = NULL;
    if (!k->pos || k->pos[G] <= 1)
        return;
    k->nrep = k->pos[G];
    k->lab = k->pos + G + 1;
    k->gcls = k->lab + G;
    k->rep = k->gcls + NG;
    k->csize = k->rep + k->nrep;
}

/* Label of GPU h in the link loads: its position, or with several classes
 * its class and position. */
static inline int cls_lab(const cls *k, int h)
{
    return k->lab ? k->lab[h] : cls_pos(k, h);
}

static void cls_free(cls *k)
{
    free(k->g0.pos);
    k->g0.pos = NULL;
    if (!k->borrowed)
        free(k->pos);
    k->pos = NULL;
    k->on = 0;
    k->g0.N = 0;
    k->nrep = 1;
    k->lab = k->gcls = k->rep = k->csize = NULL;
}

static uint64_t ranks_key(const usim_coll *c)
{
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)c->ngroups ^ ((uint64_t)c->size << 32);
    size_t n = (size_t)c->ngroups * c->size;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint64_t)(uint32_t)c->ranks[i];
        h *= 1099511628211ULL;
        h ^= h >> 29;
    }
    return h;
}

/* Sorted positions of the group members in a unit; returns their number. */
static int unit_sig(usim_net *n, int kind, int u, const int *pos, int *out)
{
    int first, cnt, m = 0;
    usim_net_unit_range(n, kind, u, &first, &cnt);
    for (int h = first; h < first + cnt; h++) {
        if (pos[h] < 0)
            continue;
        int j = m++;
        while (j > 0 && out[j - 1] > pos[h]) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = pos[h];
    }
    return m;
}

static int analyze_groups(usim_net *n, const usim_coll *c, cls *k);

/* Decide whether c's groups are equivalent (k->on).  Returns a status.  The
 * collectives of one job share their groups: the last answer is kept on the
 * network, keyed by the group arrays' contents. */
static int analyze(usim_net *n, const usim_coll *c, cls *k)
{
    memset(k, 0, sizeof *k);
    k->nrep = 1;
    if (usim_net_engine(n) == USIM_ENGINE_FULL)
        return USIM_OK;
    if (grid_make(n, c, &k->rg)) {
        k->on = 1;   /* refined grid: every group placed as group 0 (grid_make) */
        return USIM_OK;
    }
    if (c->ngroups < 2 || c->size < 2) {
        k->on = 1;   /* one group: one class, no copies */
        return USIM_OK;
    }
    uint64_t key = ranks_key(c);
    int on;
    int *pos = usim_net_cls_cache(n, key, c->ngroups, c->size, &on);
    if (pos || on == 0) {
        k->on = on;
        k->pos = pos;
        k->borrowed = 1;
        cls_decode(k, usim_net_gpus(n), c->ngroups);
        return USIM_OK;
    }
    int rc = analyze_groups(n, c, k);
    if (!rc && k->pos && !usim_net_cls_store(n, key, c->ngroups, c->size, k->pos))
        k->borrowed = 1;
    else if (!rc && !k->on)
        usim_net_cls_store(n, key, c->ngroups, c->size, NULL);
    return rc;
}

/* Classes of groups by signature: sig (NG rows of len ints, row gi the
 * signature of group gi) -> gcls[gi], numbered by first appearance (group
 * 0's class is 0).  Returns the number of classes, or -1 out of memory. */
typedef struct sigs {
    const int *sig;
    size_t len;
    const int *rep;
    int gi;
} sigs;

static int sig_same(const void *ctx, int q)
{
    const sigs *x = ctx;
    return memcmp(x->sig + (size_t)x->rep[q] * x->len, x->sig + (size_t)x->gi * x->len,
                  x->len * sizeof *x->sig) == 0;
}

static int sig_classes(const int *sig, size_t len, int NG, int *gcls, int *rep)
{
    ctab t;
    if (ctab_init(&t, NG))
        return -1;
    sigs x = {sig, len, rep, 0};
    for (int gi = 0; gi < NG; gi++) {
        int added;
        x.gi = gi;
        gcls[gi] = ctab_class(&t, ints_hash(sig + (size_t)gi * len, len), sig_same, &x, &added);
        if (added)
            rep[gcls[gi]] = gi;
    }
    int nc = t.n;
    ctab_free(&t);
    return nc;
}

/*
 * Classes of groups (colour refinement): groups start in one class per
 * partition of their positions over NICs, nodes and NVLink domains
 * (condition 2: the same transfers, routes and latencies); a class is then
 * split by the multisets of labels (class, position) that the NIC and node
 * of each of its positions hold, until no class splits.  In the end every
 * group of a class has the same partition as the class's representative,
 * and every unit holding its position p holds the same labels as the unit
 * holding the representative's position p (condition 3 with labels): each
 * copy of a representative's transfer sees its links in the same state, as
 * with one class.  k->on when some groups share a class (fewer classes than
 * groups); one class is the single-class case of analyze.
 */
static int analyze_groups(usim_net *n, const usim_coll *c, cls *k)
{
    int P = c->size, NG = c->ngroups, G = usim_net_gpus(n);
    int nu = usim_net_units(n, USIM_UNIT_NIC);
    int gpn = usim_net_platform(n)->gpus_per_node;
    int *stamp = usim_calloc((size_t)nu, sizeof *stamp), *first = usim_malloc((size_t)nu * sizeof *first);
    int *gcls = usim_malloc((size_t)NG * sizeof *gcls), *rep = usim_malloc((size_t)NG * sizeof *rep);
    int *lab = usim_malloc((size_t)G * sizeof *lab);
    size_t len1 = (size_t)USIM_NUNIT * P, len2 = 1 + (size_t)2 * P * (gpn + 1);
    int *sig = usim_malloc((size_t)NG * (len1 > len2 ? len1 : len2) * sizeof *sig);
    int ok = 1, rc = USIM_OK, nc = 0;
    k->pos = usim_malloc((size_t)(G + 1) * sizeof *k->pos);
    if (!k->pos || !stamp || !first || !gcls || !rep || !lab || !sig) {
        rc = usim_set_error(USIM_ENOMEM, "out of memory");
        ok = 0;
        goto out;
    }
    for (int g = 0; g < G; g++)
        k->pos[g] = lab[g] = -1;
    k->pos[G] = 1;
    for (size_t i = 0; i < (size_t)NG * P && ok; i++) {
        int g = c->ranks[i];
        if (k->pos[g] >= 0)
            ok = 0;   /* a GPU in two groups */
        k->pos[g] = (int)(i % (size_t)P);
    }
    if (!ok)
        goto out;
    /* the partition of each group's positions over units of every kind */
    for (int kind = 0; kind < USIM_NUNIT; kind++) {
        memset(stamp, 0, (size_t)nu * sizeof *stamp);
        for (int gi = 0; gi < NG; gi++) {
            const int *rk = c->ranks + (size_t)gi * P;
            int *s = sig + (size_t)gi * len1 + (size_t)kind * P;
            for (int p = 0; p < P; p++) {
                int u = usim_net_unit(n, kind, rk[p]);
                if (stamp[u] != gi + 1) {
                    stamp[u] = gi + 1;
                    first[u] = p;
                }
                s[p] = first[u];
            }
        }
    }
    if ((nc = sig_classes(sig, len1, NG, gcls, rep)) < 0)
        goto oom;
    /* refine by the labels the NICs and nodes of each position hold */
    for (;;) {
        for (int gi = 0; gi < NG; gi++)
            for (int p = 0; p < P; p++)
                lab[c->ranks[(size_t)gi * P + p]] = gcls[gi] * P + p;
        for (int gi = 0; gi < NG; gi++) {
            const int *rk = c->ranks + (size_t)gi * P;
            int *s = sig + (size_t)gi * len2;
            size_t m = 0;
            s[m++] = gcls[gi];
            for (int kind = 0; kind < USIM_UNIT_DOMAIN; kind++)
                for (int p = 0; p < P; p++) {
                    int cnt = unit_sig(n, kind, usim_net_unit(n, kind, rk[p]), lab, s + m + 1);
                    s[m] = cnt;
                    m += 1 + (size_t)cnt;
                }
            for (; m < len2; m++)
                s[m] = -2;
        }
        int nn = sig_classes(sig, len2, NG, gcls, rep);
        if (nn < 0)
            goto oom;
        if (nn == nc)
            break;
        nc = nn;
    }
    if (nc >= NG) {
        ok = 0;   /* no two groups alike: the full engine */
        goto out;
    }
    if (nc > 1) {
        /* pos, then nc, labels, classes of the groups, representatives, class sizes */
        size_t tot = (size_t)G + 1 + (size_t)G + (size_t)NG + 2 * (size_t)nc;
        int *a = usim_realloc(k->pos, tot * sizeof *a);
        if (!a)
            goto oom;
        k->pos = a;
        a[G] = nc;
        memcpy(a + G + 1, lab, (size_t)G * sizeof *a);
        memcpy(a + 2 * (size_t)G + 1, gcls, (size_t)NG * sizeof *a);
        int *rp = a + 2 * (size_t)G + 1 + NG, *cs = rp + nc;
        memcpy(rp, rep, (size_t)nc * sizeof *a);
        memset(cs, 0, (size_t)nc * sizeof *cs);
        for (int gi = 0; gi < NG; gi++)
            cs[gcls[gi]]++;
    }
    goto out;
oom:
    rc = usim_set_error(USIM_ENOMEM, "out of memory");
    ok = 0;
out:
    free(stamp); free(first); free(gcls); free(rep); free(lab); free(sig);
    if (!ok)
        cls_free(k);
    else {
        k->on = 1;
        cls_decode(k, G, NG);
    }
    return rc;
}

typedef struct load_ent {
    int kind, pos, link, w;
} load_ent;

static int ent_cmp(const void *a, const void *b)
{
    const load_ent *x = a, *y = b;
    if (x->kind != y->kind)
        return (x->kind > y->kind) - (x->kind < y->kind);
    if (x->pos != y->pos)
        return (x->pos > y->pos) - (x->pos < y->pos);
    return (x->link > y->link) - (x->link < y->link);
}

static int int_cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Appends (link, weight) to the two parallel arrays, doubling them when full; -1 when out of memory
 * (the arrays stay valid for the caller to free). */
static int push_load(int **olink, int **ow, size_t *tot, size_t *tcap, int link, int w)
{
    if (*tot == *tcap) {
        size_t cap = *tcap * 2;
        int *a = usim_realloc(*olink, cap * sizeof *a);
        if (!a)
            return -1;
        *olink = a;
        int *b = usim_realloc(*ow, cap * sizeof *b);
        if (!b)
            return -1;
        *ow = b;
        *tcap = cap;
    }
    (*olink)[*tot] = link;
    (*ow)[(*tot)++] = w;
    return 0;
}

/* The loads of group 0's transfers: transfer t loads link L (a link of group
 * 0's routes) once per GPU behind L at t's position on L's side (its copies
 * crossing L).  Fills ld (arrays owned by the caller: free ld->off etc.). */
static int build_loads(usim_net *n, const cls *k, const usim_xfer *x, int nx, usim_loads *ld)
{
    int *links = usim_malloc((size_t)(4 * nx + 1) * sizeof *links), nl = 0;
    int *off = usim_malloc((size_t)(nx + 1) * sizeof *off);
    load_ent *e = NULL;
    int *olink = NULL, *ow = NULL, rc = USIM_OK;
    if (!links || !off)
        goto oom;
    for (int i = 0; i < nx; i++) {
        if (x[i].src == x[i].dst)
            continue;
        usim_time lat;
        int cl;
        nl += usim_net_route(n, x[i].src, x[i].dst, links + nl, &lat, &cl);
    }
    qsort(links, (size_t)nl, sizeof *links, int_cmp);
    int nu = 0;
    for (int i = 0; i < nl; i++)
        if (nu == 0 || links[i] != links[nu - 1])
            links[nu++] = links[i];
    size_t ne = 0, cap = 0;
    for (int i = 0; i < nu; i++) {
        int side, first, cnt, kind = usim_net_link_users(n, links[i], &side, &first, &cnt);
        if (kind == USIM_LINK_MESH)
            continue;   /* one pair's link: its transfers alone */
        for (int h = first; h < first + cnt; h++) {
            int ph = cls_lab(k, h);
            if (ph < 0)
                continue;
            if (ne == cap) {
                cap = cap ? 2 * cap : 256;
                load_ent *nw = usim_realloc(e, cap * sizeof *nw);
                if (!nw)
                    goto oom;
                e = nw;
            }
            e[ne++] = (load_ent){kind, ph, links[i], 1};
        }
    }
    if (ne > 0)   /* none when every link is a mesh link */
        qsort(e, ne, sizeof *e, ent_cmp);
    size_t m = 0;
    for (size_t i = 0; i < ne; i++) {
        if (m > 0 && ent_cmp(&e[m - 1], &e[i]) == 0)
            e[m - 1].w++;
        else
            e[m++] = e[i];
    }
    /* per transfer: the entries of (kind, position) of each of its own links */
    size_t tot = 0, tcap = (size_t)4 * nx + 16;
    olink = usim_malloc(tcap * sizeof *olink);
    ow = usim_malloc(tcap * sizeof *ow);
    if (!olink || !ow)
        goto oom;
    for (int i = 0; i < nx; i++) {
        off[i] = (int)tot;
        if (x[i].src == x[i].dst)
            continue;
        int rl[4], cl;
        usim_time lat;
        int r = usim_net_route(n, x[i].src, x[i].dst, rl, &lat, &cl);
        for (int j = 0; j < r; j++) {
            int side, first, cnt, kind = usim_net_link_users(n, rl[j], &side, &first, &cnt);
            if (kind == USIM_LINK_MESH) {
                if (push_load(&olink, &ow, &tot, &tcap, rl[j], 1))
                    goto oom;
                continue;
            }
            int g = side ? x[i].dst : x[i].src;
            load_ent key = {kind, cls_lab(k, g), -1, 0};
            size_t lo = 0, hi = m;   /* first entry >= key */
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (ent_cmp(&e[mid], &key) < 0)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            for (size_t q = lo; q < m && e[q].kind == kind && e[q].pos == key.pos; q++) {
                if (push_load(&olink, &ow, &tot, &tcap, e[q].link, e[q].w))
                    goto oom;
            }
        }
    }
    if (tot > (size_t)INT_MAX)
        goto oom;
    off[nx] = (int)tot;
    free(links);
    free(e);
    ld->off = off;
    ld->link = olink;
    ld->w = ow;
    return USIM_OK;
oom:
    free(links); free(off); free(e); free(olink); free(ow);
    rc = usim_set_error(USIM_ENOMEM, "out of memory for the link loads");
    return rc;
}

#define MAX_CANDIDATES 8

/* The candidate (algorithm, protocol) pairs of a valid collective; for
 * non-ring types one pair (none, Simple).  Returns the count or -status. */
static int candidates(usim_net *n, const usim_coll *c, const rgrid *R, usim_algo *as, usim_proto *ps,
                      double *est)
{
    if (!is_ring(c->type) || c->size == 1) {
        as[0] = USIM_ALGO_AUTO;
        ps[0] = USIM_PROTO_SIMPLE;
        est[0] = 0;
        return 1;
    }
    geo G0;
    int rc = geometry(n, c, R, 0, &G0);
    if (rc)
        return -rc;
    usim_group_shape sh = {G0.N, G0.g, G0.uniform};
    free(G0.pos);
    uint64_t S = chunk_sum(c);
    int nc = usim_tune_candidates(usim_net_platform(n), c->type, &sh, (double)S, c->algo, c->proto,
                                  as, ps, est, MAX_CANDIDATES);
    if (nc <= 1 || !c->ranks || c->ngroups < 2 || c->algo != USIM_ALGO_AUTO)
        return nc;
    /* Listed groups may be placed differently from group 0: a tree or NVLS
     * that some group cannot run (a tree needs >= 2 domains holding equally
     * many of its GPUs, NVLS one domain) is not a candidate.  (Grids place
     * every group as group 0.) */
    int tree_ok = 1, nvls_ok = 1, any = 0;
    for (int q = 0; q < nc; q++)
        any |= as[q] == USIM_ALGO_TREE || as[q] == USIM_ALGO_NVLS;
    for (int gi = 1; any && gi < c->ngroups && (tree_ok || nvls_ok); gi++) {
        geo Gg;
        int grc = geometry(n, c, R, gi, &Gg);
        if (grc)
            return -grc;
        tree_ok &= Gg.uniform && Gg.N >= 2;
        nvls_ok &= Gg.N == 1;
        free(Gg.pos);
    }
    int m = 0;
    for (int q = 0; q < nc; q++)
        m += (as[q] != USIM_ALGO_TREE || tree_ok) && (as[q] != USIM_ALGO_NVLS || nvls_ok);
    if (m == 0)
        return nc;   /* the platform forces it: refused when generated */
    m = 0;
    for (int q = 0; q < nc; q++)
        if ((as[q] != USIM_ALGO_TREE || tree_ok) && (as[q] != USIM_ALGO_NVLS || nvls_ok)) {
            as[m] = as[q];
            ps[m] = ps[q];
            est[m++] = est[q];
        }
    return m;
}

/* Whether no group lists a GPU twice (a grid is a bijection), so that every
 * ring transfer crosses a link and pays its latency; 1 yes, 0 no, -status. */
static int members_distinct(usim_net *n, const usim_coll *c)
{
    if (!c->ranks)
        return 1;
    int G = usim_net_gpus(n), ok = 1;
    int *tag = usim_calloc((size_t)G, sizeof *tag);
    if (!tag)
        return -usim_set_error(USIM_ENOMEM, "out of memory");
    for (int gi = 0; gi < c->ngroups && ok; gi++)
        for (int p = 0; p < c->size; p++) {
            int h = c->ranks[(size_t)gi * c->size + p];
            if (tag[h] == gi + 1) {
                ok = 0;
                break;
            }
            tag[h] = gi + 1;
        }
    free(tag);
    return ok;
}

/* A lower bound on the duration run_one gives a ring with protocol p, from
 * latency alone: the transfer of ring position i at step k waits for the same
 * position's transfer of step k - 1 (dependency d0 in gen_ring and
 * gen_ring_cone), then for one route latency, so the last transfer of
 * every step ends at least Lmin after the last one of the step before, Lmin
 * the smaller of the two route latencies with p's factors (usim_net_route's
 * arithmetic), and the first step ends at Lmin or later.  Hence the window's
 * makespan is >= w Lmin and its step period >= Lmin, and the extrapolated
 * duration mk + llround(period (steps - w)) >= steps Lmin (every operation
 * monotone, the integers exact in double).  A ring over 10^6 GPUs runs
 * about 2 10^6 dependent steps: this bound, not the link bytes, is what
 * lets the search skip the protocols with the larger latencies. */
static usim_time ring_latency_bound(usim_net *n, const usim_coll *c, usim_proto p)
{
    const usim_platform *pf = usim_net_platform(n);
    usim_time lv = (usim_time)llround((double)pf->nvl_lat * usim_proto_latency(p, USIM_CLASS_NVLINK));
    usim_time ln = (usim_time)llround((double)pf->nic_lat * usim_proto_latency(p, USIM_CLASS_NIC));
    int64_t steps = (int64_t)(c->type == USIM_ALLREDUCE ? 2 : 1) * (c->size - 1);
    return (lv < ln ? lv : ln) * steps;
}

usim_time usim_test_ring_latency_bound(usim_net *n, const usim_coll *c, usim_proto p)
{
    return ring_latency_bound(n, c, p);
}

/* Several groups (their copies load the links): the light cone also needs
 * every block's loads to be alike and inside the block.  For every GPU of
 * group 0 and every unit of GPUs sharing links (NIC, node), the positions of
 * the unit's members relative to the GPU's block must lie in the block and
 * form the same multiset for every block.  Returns 1 if so, 0 if not, or
 * -status. */
static int blocks_alike(usim_net *n, const usim_coll *c, const cls *k, const geo *G)
{
    if (k->rg.on)   /* a refined grid: units are digits below the domain's (grid_make) */
        return G->uniform && G->N >= 2;
    if (!k->pos || !G->uniform || G->N < 2)
        return 0;
    int P = c->size, gl = G->g, ok = 1;
    int gpn = usim_net_platform(n)->gpus_per_node;
    int *ref = usim_malloc((size_t)USIM_NUNIT * gl * (gpn + 1) * sizeof *ref);
    int *cur = usim_malloc((size_t)(gpn + 1) * sizeof *cur);
    int *at = usim_malloc((size_t)P * sizeof *at);   /* position -> index in the ring blocks */
    if (!ref || !cur || !at) {
        free(ref); free(cur); free(at);
        return -usim_set_error(USIM_ENOMEM, "out of memory");
    }
    for (int i = 0; i < P; i++)
        at[G->pos[i]] = i;
    for (int b = 0; b < G->N && ok; b++)
        for (int l = 0; l < gl && ok; l++) {
            int p = G->pos[b * gl + l];
            for (int kind = 0; kind < USIM_NUNIT && ok; kind++) {
                if (kind == USIM_UNIT_DOMAIN)
                    continue;
                int u = usim_net_unit(n, kind, c->ranks[p]), first, cnt, m = 0;
                usim_net_unit_range(n, kind, u, &first, &cnt);
                if (cnt > gpn) {
                    ok = 0;
                    break;
                }
                for (int h = first; h < first + cnt; h++) {
                    int q = k->pos[h];
                    if (q < 0)
                        continue;
                    /* q must be in block b: its place there */
                    int rel = at[q] - b * gl;
                    if (rel < 0 || rel >= gl) {
                        ok = 0;
                        break;
                    }
                    int j = m++;
                    while (j > 0 && cur[j - 1] > rel) {
                        cur[j] = cur[j - 1];
                        j--;
                    }
                    cur[j] = rel;
                }
                if (!ok)
                    break;
                int *r = ref + ((size_t)kind * gl + l) * (gpn + 1);
                if (b == 0) {
                    r[0] = m;
                    memcpy(r + 1, cur, (size_t)m * sizeof *cur);
                } else if (r[0] != m || memcmp(r + 1, cur, (size_t)m * sizeof *cur) != 0) {
                    ok = 0;
                }
            }
        }
    free(ref); free(cur); free(at);
    return ok;
}

/* Generate the transfers of algorithm a with protocol p (count them all, and
 * store the window when build).  *steps gets the ring steps (0: not a ring). */
static int generate(usim_net *n, const usim_coll *c, const cls *k, usim_algo a, usim_proto p,
                    usim_coll_result *r, gen *g, int build, int *steps, int skipcount)
{
    memset(r, 0, sizeof *r);
    *steps = 0;
    /* groups simulated: every one, or one per class (its representative) */
    int P = c->size, NG = k->on ? k->nrep : c->ngroups;
    memset(g, 0, sizeof *g);
    g->net = n;
    g->c = c;
    g->rg = &k->rg;
    g->byslot = k->rg.on && k->on;
    if (k->rg.on && P <= GRID_LIST_MAX) {
        if (!(g->rk0 = usim_malloc((size_t)P * sizeof *g->rk0)))
            return usim_set_error(USIM_ENOMEM, "out of memory for the transfers");
        for (int x = 0; x < P; x++)
            g->rk0[x] = grid_rank(&k->rg, x);
    }
    g->build = build;
    g->window = INT_MAX;
    g->wire = usim_proto_wire(p);
    g->skipcount = skipcount == 1;
    /* 2: arrays only if a count needs them, or to weigh several classes */
    if ((!skipcount || (skipcount == 2 && k->nrep > 1)) && count_arrays(g))
        return usim_set_error(USIM_ENOMEM, "out of memory counting a collective");
    r->algo = a;
    r->proto = p;
    r->channels = 1;
    if (P == 1)
        return USIM_OK;
    int rc = USIM_OK;
    if (!is_ring(c->type)) {
        for (int ri = 0; ri < NG && !g->err; ri++)
            gen_p2p(g, k->rep ? k->rep[ri] : ri);
    } else {
        if (a == USIM_ALGO_NVLS)
            g->wire /= usim_net_platform(n)->nvls_eff;
        for (int ri = 0; ri < NG && !rc && !g->err; ri++) {
            int gi = k->rep ? k->rep[ri] : ri;
            geo Gg;
            int own = !(gi == 0 && k->g0.N);
            if (!own)
                Gg = k->g0;   /* group 0's, computed once per collective */
            else if ((rc = geometry(n, c, &k->rg, gi, &Gg)))
                break;
            if (a == USIM_ALGO_TREE) {
                if (!Gg.uniform || Gg.N < 2)
                    rc = usim_set_error(USIM_EINVAL, "%s: groups are placed differently on the nodes",
                                        usim_coll_name(c->type));
                else {
                    int sym = build && !own ? tree_symmetric(n, c, k->on, &k->rg, &Gg) : 0;
                    if (sym < 0)
                        rc = -sym;
                    g->tree_sym = sym > 0;
                    if (!rc)
                        rc = gen_tree(g, gi, &Gg), r->channels = gi == 0 ? 2 * Gg.g : r->channels;
                }
            } else if (a == USIM_ALGO_NVLS) {
                if (Gg.N != 1)
                    rc = usim_set_error(USIM_EINVAL, "%s: groups are placed differently on the nodes",
                                        usim_coll_name(c->type));
                else
                    gen_nvls(g, gi);
            } else {
                int C = ring_channels(n, &Gg);
                if (gi == 0) {
                    /* the window holds about ring_window steps' worth of
                     * one-channel transfers: C channels simulate ring_window / C
                     * steps (>= 4) */
                    *steps = (c->type == USIM_ALLREDUCE ? 2 : 1) * (P - 1);
                    int w = usim_net_ring_window(n) / C;
                    if (w < 4)
                        w = 4;
                    if (*steps > w)
                        g->window = w;
                    if (!build)
                        g->window = 0;   /* counting only: every step in closed form */
                }
                int done = 0;
                int alike = build && k->on && !k->nocone && k->nrep == 1
                            ? c->ngroups == 1 ? 1 : blocks_alike(n, c, k, &Gg) : 0;
                if (alike < 0)
                    rc = -alike;
                if (alike > 0) {
                    int w = g->window < *steps ? g->window : *steps;
                    done = !Gg.uniform && C == 1 && c->ngroups == 1 ? gen_ring_uneven(g, gi, &Gg, w)
                                                                    : gen_ring_cone(g, gi, &Gg, C, w, NULL);
                    if (done < 0)
                        rc = -done;
                }
                if (!done && !rc)
                    rc = gen_ring(g, gi, &Gg, C);
                if (gi == 0)   /* group 0's (groups placed differently may differ) */
                    r->channels = C;
            }
            if (own)
                free(Gg.pos);
        }
    }
    if (!rc && g->err)
        rc = g->err == USIM_ENOMEM ? usim_set_error(USIM_ENOMEM, "out of memory for the transfers")
                                   : usim_set_error(USIM_EINVAL, "%s: too many transfers",
                                                    usim_coll_name(c->type));
    return rc;
}

/* Whether no link is crossed by transfers of two node blocks (the premise
 * of gen_ring_cone); 1 yes, 0 no, -1 out of memory.  Each link is tagged with
 * the first block seen on it (1 + block), then the tags are cleared. */
static int blocks_local(usim_net *n, const gen *g)
{
    int *tag = usim_net_link_tags(n);
    int *seen = usim_malloc((g->n * 4 + 1) * sizeof *seen);
    if (!tag || !seen) {
        free(seen);
        return -1;
    }
    size_t ns = 0;
    int ok = 1;
    for (size_t i = 0; i < g->n && ok; i++) {
        if (g->x[i].src == g->x[i].dst)
            continue;
        int l[4], cl;
        usim_time lat;
        int r = usim_net_route(n, g->x[i].src, g->x[i].dst, l, &lat, &cl);
        for (int j = 0; j < r; j++) {
            if (tag[l[j]] == 0) {
                tag[l[j]] = g->xblk[i] + 1;
                seen[ns++] = l[j];
            } else if (tag[l[j]] != g->xblk[i] + 1) {
                ok = 0;
            }
        }
    }
    for (size_t i = 0; i < ns; i++)
        tag[seen[i]] = 0;
    free(seen);
    return ok;
}

static void gen_free(gen *g)
{
    free(g->rk0);
    free(g->xblk);
    free(g->isrep);
    free(g->x);
    free(g->sent);
    free(g->recv);
    free(g->sent_cls);
}

/* Totals and maxima of the counters; with classes (only group 0 counted)
 * every group's GPU at position p counts what group 0's does.  sent / recv:
 * per-GPU arrays (may be NULL); one >= 0: *one_sent gets GPU one's bytes. */
static void finish_counts(usim_net *n, const usim_coll *c, const cls *k, const gen *g,
                          usim_coll_result *r, uint64_t *sent, uint64_t *recv, int one,
                          uint64_t *one_sent)
{
    int G = usim_net_gpus(n), S = g->byslot ? c->size : G;
    for (int i = 0; g->sent && i < S; i++) {
        /* several classes: a representative's GPU counts for its class's groups */
        uint64_t mult = k->nrep > 1 ? k->lab[i] < 0 ? 0 : (uint64_t)k->csize[k->lab[i] / c->size] : 1;
        r->total_sent += g->sent[i] * mult;
        r->total_recv += g->recv[i] * mult;
        for (int q = 0; q < USIM_NCLASS; q++)
            if (g->sent_cls[(size_t)i * USIM_NCLASS + q] > r->max_sent[q])
                r->max_sent[q] = g->sent_cls[(size_t)i * USIM_NCLASS + q];
    }
    r->total_sent += g->dsent;
    r->total_recv += g->drecv;
    for (int q = 0; q < USIM_NCLASS; q++)
        if (g->dmax[q] > r->max_sent[q])
            r->max_sent[q] = g->dmax[q];
    if (k->on && k->nrep == 1) {
        r->total_sent *= (uint64_t)c->ngroups;
        r->total_recv *= (uint64_t)c->ngroups;
    }
    int P = c->size;
    if (one >= 0 && one_sent) {
        /* the counter standing for GPU one: its own, or its position's in group 0 */
        int at = one;
        if (g->byslot)
            at = grid_pos(&k->rg, one);
        else if (k->on && k->nrep > 1)
            at = k->lab[one] < 0 ? -1
               : c->ranks[(size_t)k->rep[k->lab[one] / P] * P + k->lab[one] % P];
        else if (k->on && c->ngroups > 1)
            at = k->pos[one] < 0 ? -1 : c->ranks[k->pos[one]];
        *one_sent = g->sent && at >= 0 ? g->sent[at] : 0;
    }
    for (int z = 0; z < 2; z++) {
        uint64_t *out = z ? recv : sent;
        const uint64_t *in = z ? g->recv : g->sent;
        if (!out)
            continue;
        if (!in) {   /* nothing counted per GPU (no transfer) */
            memset(out, 0, (size_t)G * sizeof *out);
            continue;
        }
        if (g->byslot) {
            for (int h = 0; h < G; h++) {
                int p = grid_pos(&k->rg, h);
                out[h] = p >= 0 ? in[p] : 0;
            }
            continue;
        }
        memcpy(out, in, (size_t)G * sizeof *out);
        if (k->on && k->nrep > 1)
            for (size_t i = 0; i < (size_t)c->ngroups * P; i++)
                out[c->ranks[i]] = in[c->ranks[(size_t)k->rep[k->gcls[i / P]] * P + i % P]];
        else if (k->on)
            for (size_t i = (size_t)P; i < (size_t)c->ngroups * P; i++)
                out[c->ranks[i]] = in[c->ranks[i % (size_t)P]];
    }
}

/* Validate c and list its candidate pairs (count, or -status). */
static int prepare(usim_net *n, const usim_coll *c, usim_coll_result *r, usim_algo *as,
                   usim_proto *ps, double *est)
{
    memset(r, 0, sizeof *r);
    int rc = validate(n, c);
    if (rc)
        return -rc;
    rgrid R;
    grid_make(n, c, &R);
    return candidates(n, c, &R, as, ps, est);
}

/* Count algorithm a with protocol p without simulating it. */
static int count_as(usim_net *n, const usim_coll *c, const cls *k, usim_algo a, usim_proto p,
                    usim_coll_result *r, uint64_t *sent, uint64_t *recv, int one, uint64_t *one_sent)
{
    gen g;
    int steps;
    int rc = generate(n, c, k, a, p, r, &g, 0, &steps, sent || recv || one_sent ? 0 : 2);
    if (!rc)
        finish_counts(n, c, k, &g, r, sent, recv, one, one_sent);
    gen_free(&g);
    return rc;
}

/* Simulate algorithm a with protocol p. */
/* Simulate algorithm a with protocol p; counted: the counters of algorithm
 * a (they do not depend on the protocol). */
static int run_one(usim_net *n, const usim_coll *c, const cls *k, usim_algo a, usim_proto p,
                   usim_coll_result *r, const usim_coll_result *counted)
{
    gen g;
    int steps;
    int rc = generate(n, c, k, a, p, r, &g, 1, &steps, 1);
    for (int q = 0; q < USIM_NCLASS; q++)
        r->max_sent[q] = counted->max_sent[q];
    r->total_sent = counted->total_sent;
    r->total_recv = counted->total_recv;
    if (rc || c->size == 1) {
        gen_free(&g);
        return rc;
    }
    if (g.cone) {
        int local = blocks_local(n, &g);
        if (local <= 0) {
            gen_free(&g);
            if (local < 0)
                return usim_set_error(USIM_ENOMEM, "out of memory");
            cls k2 = *k;   /* blocks share links on this network: the whole ring */
            k2.nocone = 1;
            return run_one(n, c, &k2, a, p, r, counted);
        }
    }
    usim_time *fin = usim_malloc((g.n ? g.n : 1) * sizeof *fin);
    usim_loads ld = {NULL, NULL, NULL, NULL};
    int loads = (c->ngroups > 1 && (k->pos || k->rg.on)) || g.tree_sym;   /* copies of group 0 */
    if (!fin || (loads && (g.tree_sym ? tree_loads(n, &g, &k->g0, &ld)
                                      : build_loads(n, k, g.x, (int)g.n, &ld)))) {
        free(fin);
        gen_free(&g);
        return usim_set_error(USIM_ENOMEM, "out of memory for %zu transfers", g.n);
    }
    usim_net_set_latency_scale(n, usim_proto_latency(p, USIM_CLASS_NVLINK),
                               usim_proto_latency(p, USIM_CLASS_NIC));
    usim_time mk;
    rc = usim_net_run_loads(n, g.x, (int)g.n, loads ? &ld : NULL, fin, &mk);
    free((void *)ld.off);
    free((void *)ld.link);
    free((void *)ld.w);
    free((void *)ld.route);
    usim_net_set_latency_scale(n, 1, 1);
    if (rc == USIM_OK && g.cone) {
        /* only the representative blocks stand for the ring (gen_ring_cone) */
        mk = 0;
        for (size_t i = 0; i < g.n; i++)
            if (g.isrep[g.xblk[i]] && fin[i] > mk)
                mk = fin[i];
    }
    if (rc == USIM_OK) {
        r->duration = mk;
        int sim_steps = g.window < steps ? g.window : steps;
        if (sim_steps < steps) {
            /* steady state: average step period over the second half of the window */
            usim_time *end = usim_calloc((size_t)sim_steps, sizeof *end);
            if (!end) {
                rc = usim_set_error(USIM_ENOMEM, "out of memory");
            } else {
                for (size_t i = 0; i < g.n; i++)
                    if (fin[i] > end[g.x[i].step] && (!g.cone || g.isrep[g.xblk[i]]))
                        end[g.x[i].step] = fin[i];
                int w = sim_steps / 2;
                double period = (double)(end[sim_steps - 1] - end[sim_steps - 1 - w]) / w;
                r->duration = mk + (usim_time)llround(period * (steps - sim_steps));
                r->extrapolated = steps - sim_steps;
                free(end);
            }
        }
    }
    free(fin);
    gen_free(&g);
    return rc;
}

/* The per-call cost of an all-to-all (platform a2a_call_us): one fixed time
 * per call on top of its transfers, that of the widest link class the call
 * spans (NIC when any group has members on two nodes).  Measured on our MPI
 * all-to-all by ulysses calibrate (doc/validation.md); 0 in the GPU presets. */
static usim_time a2a_call_cost(usim_net *n, const usim_coll *c, const cls *k)
{
    if (c->type != USIM_A2A_DIRECT && c->type != USIM_A2A_PAIRWISE)
        return 0;
    const usim_platform *pf = usim_net_platform(n);
    /* members on one NVLink domain: the NVLink cost; groups placed alike
     * (classes) have group 0's answer */
    for (int ri = 0; ri < (k->on ? k->nrep : c->ngroups); ri++)
        for (int q = 1, g = k->rep ? k->rep[ri] : ri; q < c->size; q++)
            if (usim_net_domain_of(n, usim_coll_rank(c, g, q)) != usim_net_domain_of(n, usim_coll_rank(c, g, 0)))
                return pf->a2a_call[USIM_CLASS_NIC];
    return pf->a2a_call[USIM_CLASS_NVLINK];
}

/* A collective given by a grid that the class engine does not take (the full
 * engine, or unit sizes across its digits): run with its ranks listed.
 * Returns 1 when done (*rc set), 0 to go on with the grid. */
static int listed(usim_net *n, const usim_coll *c, usim_coll_result *r, uint64_t *sent, uint64_t *recv,
                  int one, uint64_t *one_sent, int count, int *rc)
{
    rgrid R;
    if (c->ranks || (usim_net_engine(n) != USIM_ENGINE_FULL && grid_make(n, c, &R)))
        return 0;
    usim_coll l;
    int *arr;
    if (!(*rc = grid_list(c, &l, &arr)))
        *rc = one_sent ? usim_coll_count_gpu(n, &l, one, r, one_sent)
            : count ? usim_coll_count(n, &l, r, sent, recv) : usim_coll_run(n, &l, r, sent, recv);
    free(arr);
    return 1;
}

int usim_coll_run(usim_net *n, const usim_coll *c, usim_coll_result *r, uint64_t *sent,
                  uint64_t *recv)
{
    int lrc;
    if (listed(n, c, r, sent, recv, -1, NULL, 0, &lrc))
        return lrc;
    usim_algo as[MAX_CANDIDATES];
    usim_proto ps[MAX_CANDIDATES];
    double est[MAX_CANDIDATES];
    int rc = USIM_OK, nc = prepare(n, c, r, as, ps, est);
    if (nc < 0)
        return -nc;
    cls k;
    if ((rc = analyze(n, c, &k)))
        return rc;
    if (is_ring(c->type) && c->size > 1 && (rc = geometry(n, c, &k.rg, 0, &k.g0))) {
        cls_free(&k);
        return rc;
    }
    if (!k.on && usim_net_engine(n) == USIM_ENGINE_CLASSES) {
        cls_free(&k);
        return usim_set_error(USIM_EINVAL,
                              "%s: its %d groups are not placed alike on the nodes and NICs, so the "
                              "class engine cannot represent them; use --engine full or auto",
                              usim_coll_name(c->type), c->ngroups);
    }
    /* Every candidate at flow level; the fastest wins (on ties the one with
     * the smaller estimate: rank[q], the place of q in NCCL's estimate
     * order).  A candidate whose lower bound (its busiest link's wire bytes
     * over that link's bandwidth, and for a ring its steps times its smallest
     * route latency) already reaches the best time is not run: it cannot
     * win, so skipping it does not change the choice.  Candidates are tried
     * in the order of their lower bounds, so that the likely winner runs
     * first and prunes the others (a ring over 16384 GPUs: LL, estimated
     * second, prunes LL128); the choice is still the fastest, ties to the
     * smaller estimate: a candidate ranked before the best so far is skipped
     * only when its bound is strictly above the best time. */
    int order[MAX_CANDIDATES], rank[MAX_CANDIDATES];
    for (int q = 0; q < nc; q++) {
        int j = q;
        while (j > 0 && est[order[j - 1]] > est[q]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = q;
    }
    for (int oi = 0; oi < nc; oi++)
        rank[order[oi]] = oi;
    int best = -1, distinct = -1;
    const usim_platform *pf = usim_net_platform(n);
    usim_coll_result cnt[USIM_NALGO];
    int have_cnt[USIM_NALGO] = {0};
    double lbs[MAX_CANDIDATES];
    for (int q = 0; q < nc && !rc; q++) {
        if (!have_cnt[as[q]]) {   /* counters per algorithm, whatever the protocol */
            if ((rc = count_as(n, c, &k, as[q], ps[q], &cnt[as[q]], NULL, NULL, -1, NULL)))
                break;
            have_cnt[as[q]] = 1;
        }
        double w = usim_proto_wire(ps[q]) / (as[q] == USIM_ALGO_NVLS ? pf->nvls_eff : 1), lb = 0;
        double bw[USIM_NCLASS] = {usim_nvl_Bps(pf), usim_nic_Bps(pf)};
        for (int cl = 0; cl < USIM_NCLASS; cl++) {
            double x = (double)cnt[as[q]].max_sent[cl] * w * 1e12 / bw[cl];
            if (x > lb)
                lb = x;
        }
        if (nc > 1 && as[q] == USIM_ALGO_RING && is_ring(c->type) && c->size > 1) {
            if (distinct < 0 && (distinct = members_distinct(n, c)) < 0) {
                rc = -distinct;
                break;
            }
            double ll = distinct ? (double)ring_latency_bound(n, c, ps[q]) : 0;
            if (ll > lb)
                lb = ll;
        }
        lbs[q] = lb;
    }
    int try[MAX_CANDIDATES];   /* by lower bound, then by estimate */
    for (int oi = 0; oi < nc && !rc; oi++) {
        int q = order[oi], j = oi;
        while (j > 0 && lbs[try[j - 1]] > lbs[q]) {
            try[j] = try[j - 1];
            j--;
        }
        try[j] = q;
    }
    for (int ti = 0; ti < nc && !rc; ti++) {
        int q = try[ti];
        usim_coll_result t = cnt[as[q]];
        if (best >= 0 && (rank[q] > rank[best] ? lbs[q] - 1 >= (double)r->duration
                                               : lbs[q] - 1 > (double)r->duration))
            continue;
        if ((rc = run_one(n, c, &k, as[q], ps[q], &t, &cnt[as[q]])))
            break;
        t.estimate_s = est[q];
        if (best < 0 || t.duration < r->duration || (t.duration == r->duration && rank[q] < rank[best])) {
            *r = t;
            best = q;
        }
    }
    if (!rc && c->size > 1)
        r->duration += a2a_call_cost(n, c, &k);
    if (!rc && (sent || recv)) {   /* the winner's counters */
        usim_coll_result t;
        rc = count_as(n, c, &k, as[best], ps[best], &t, sent, recv, -1, NULL);
    }
    r->classes = k.on ? k.nrep : 0;
    cls_free(&k);
    return rc;
}

/* usim_coll_count for per-GPU arrays (sent, recv) or one GPU's bytes sent
 * (one, *one_sent). */
static int count_coll(usim_net *n, const usim_coll *c, usim_coll_result *r, uint64_t *sent,
                      uint64_t *recv, int one, uint64_t *one_sent)
{
    usim_algo as[MAX_CANDIDATES];
    usim_proto ps[MAX_CANDIDATES];
    double est[MAX_CANDIDATES];
    int rc = USIM_OK, nc = prepare(n, c, r, as, ps, est);
    if (nc < 0)
        return -nc;
    usim_algo a = as[0];
    usim_proto p = ps[0];
    if (nc > 1) {
        /* the pattern depends on the algorithm the run would choose */
        usim_coll_result t;
        if ((rc = usim_coll_run(n, c, &t, NULL, NULL)))
            return rc;
        a = t.algo;
        p = t.proto;
    }
    cls k;
    if ((rc = analyze(n, c, &k)))
        return rc;
    rc = count_as(n, c, &k, a, p, r, sent, recv, one, one_sent);
    cls_free(&k);
    return rc;
}

int usim_coll_count(usim_net *n, const usim_coll *c, usim_coll_result *r, uint64_t *sent,
                    uint64_t *recv)
{
    int lrc;
    if (listed(n, c, r, sent, recv, -1, NULL, 1, &lrc))
        return lrc;
    return count_coll(n, c, r, sent, recv, -1, NULL);
}

int usim_coll_count_gpu(usim_net *n, const usim_coll *c, int gpu, usim_coll_result *r, uint64_t *sent)
{
    int lrc;
    *sent = 0;
    if (gpu < 0 || gpu >= usim_net_gpus(n))
        return usim_set_error(USIM_EINVAL, "GPU %d out of range", gpu);
    if (listed(n, c, r, NULL, NULL, gpu, sent, 1, &lrc))
        return lrc;
    return count_coll(n, c, r, NULL, NULL, gpu, sent);
}
