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

/* ------------------------------------------------------------ generation */

typedef struct gen {
    usim_net *net;
    const usim_coll *c;
    int build;          /* store transfers (else count only) */
    int window;         /* transfers of steps >= window are counted, not stored */
    double wire;        /* bytes on the wire per payload byte */
    usim_xfer *x;
    size_t n, cap;
    uint64_t *sent, *recv, *sent_cls;   /* per GPU, payload bytes over the full pattern */
    int err;
} gen;

/* Count a transfer of payload bytes src -> dst and, within the window, store
 * it with dependencies d0, d1.  Returns its index, or -1 if not stored. */
static void count(gen *g, int src, int dst, uint64_t payload)
{
    if (src == dst)
        return;
    if (src >= 0) {
        int links[4], cls = USIM_CLASS_NVLINK;
        usim_time lat;
        usim_net_route(g->net, src, dst, links, &lat, &cls);
        g->sent[src] += payload;
        g->sent_cls[(size_t)src * USIM_NCLASS + cls] += payload;
    }
    if (dst >= 0)
        g->recv[dst] += payload;
}

static int put(gen *g, int src, int dst, uint64_t payload, int d0, int d1, int step)
{
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
    int *pos;
} geo;

static int geometry(usim_net *net, const int *ranks, int P, geo *G)
{
    memset(G, 0, sizeof *G);
    int *node = usim_malloc((size_t)P * sizeof *node), *cnt = usim_calloc((size_t)P, sizeof *cnt);
    int *idx = usim_malloc((size_t)P * sizeof *idx);
    G->pos = usim_malloc((size_t)P * sizeof *G->pos);
    if (!node || !cnt || !idx || !G->pos) {
        free(node); free(cnt); free(idx); free(G->pos);
        G->pos = NULL;
        return usim_set_error(USIM_ENOMEM, "out of memory");
    }
    int N = 0;
    for (int p = 0; p < P; p++) {
        int nd = usim_net_domain_of(net, ranks[p]), k;
        for (k = N - 1; k >= 0 && node[k] != nd; k--)
            ;
        if (k < 0)
            node[k = N++] = nd;
        idx[p] = k;
        cnt[k]++;
    }
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

static int gen_ring(gen *g, int gi, const geo *G, int C)
{
    int mesh = usim_net_full_mesh(g->net) && C > 1;
    const usim_coll *c = g->c;
    int P = c->size;
    const int *rk = c->ranks + (size_t)gi * P;
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
            ord[ch * P + i] = C == 1 ? G->pos[i]
                            : stride ? G->pos[(int)((int64_t)i * stride % P)]
                            : mesh ? G->pos[(i / G->g) * G->g + walecki(G->g, ch, i % G->g)]
                                   : G->pos[(i / G->g) * G->g + (ch + i % G->g) % G->g];
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
                uint64_t b = part(c->chunk_bytes[o[ci]], ch, C);
                /* my previous send, and what I received in the previous step */
                cur[ch * P + i] = put(g, rk[o[i]], rk[o[(i + 1) % P]], b, prev[ch * P + i],
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
                pre[j + 1] = pre[j] + part(c->chunk_bytes[o[j % P]], ch, C);
            int rs_end = c->type == USIM_REDUCE_SCATTER ? steps : ar ? P - 1 : 0;
            for (int i = 0; i < P; i++) {
                uint64_t b = 0;
                if (w < rs_end)                  /* k in [w, rs_end): chunks i-rs_end .. i-w-1 */
                    b += cyc(pre, P, i - rs_end, rs_end - w);
                int a0 = (w > rs_end ? w : rs_end) - rs_end, a1 = steps - rs_end;
                if (c->type != USIM_REDUCE_SCATTER && a0 < a1)   /* kk in [a0, a1): i-a1+1 .. i-a0 */
                    b += cyc(pre, P, i - a1 + 1, a1 - a0);
                count(g, rk[o[i]], rk[o[(i + 1) % P]], b);
            }
        }
    free(ord); free(prev); free(cur); free(pre);
    return USIM_OK;
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

static int gen_tree(gen *g, int gi, const geo *G)
{
    const usim_coll *c = g->c;
    int P = c->size, N = G->N, gl = G->g, C = 2 * gl;
    const int *rk = c->ranks + (size_t)gi * P;
    uint64_t S = 0;
    for (int p = 0; p < P; p++)
        S += c->chunk_bytes[p];
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
    for (int ch = 0; ch < C; ch++) {
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
#define GPU(n, l) rk[G->pos[(n) * gl + (((l) % gl) + gl) % gl]]
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

static void gen_nvls(gen *g, int gi)
{
    const usim_coll *c = g->c;
    int P = c->size;
    const int *rk = c->ranks + (size_t)gi * P;
    uint64_t S = 0;
    for (int p = 0; p < P; p++)
        S += c->chunk_bytes[p];
    for (int p = 0; p < P; p++) {
        uint64_t mine = c->chunk_bytes[p], up, dn;
        switch (c->type) {
        case USIM_ALLGATHER: up = mine; dn = S; break;             /* multicast store */
        case USIM_REDUCE_SCATTER: up = S; dn = mine; break;        /* switch-side reduction */
        default: up = S + mine; dn = mine + S; break;              /* both */
        }
        int K = slices(up > dn ? up : dn), pu = -1, pd = -1;
        for (int k = 0; k < K; k++) {
            pu = put(g, rk[p], USIM_SWITCH, part(up, k, K), pu, -1, 0);
            pd = put(g, USIM_SWITCH, rk[p], part(dn, k, K), pu, pd, 0);
        }
    }
}

static void gen_p2p(gen *g, int gi)
{
    const usim_coll *c = g->c;
    int P = c->size;
    const int *rk = c->ranks + (size_t)gi * P;
    switch (c->type) {
    case USIM_A2A_DIRECT:
        for (int s = 0; s < P; s++)
            for (int d = 0; d < P; d++)
                if (s != d)
                    put(g, rk[s], rk[d], c->pair_bytes[(size_t)s * P + d], -1, -1, 0);
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
                cur[p] = put(g, rk[p], rk[d], c->pair_bytes[(size_t)p * P + d], prev[p],
                             prev[((p - (k - 1)) % P + P) % P], k - 1);
            }
            memcpy(prev, cur, (size_t)P * sizeof *prev);
        }
        free(prev);
        break;
    }
    case USIM_RING_SHIFT:
        for (int p = 0; p < P; p++)
            put(g, rk[p], rk[(p + 1) % P], c->bytes, -1, -1, 0);
        break;
    case USIM_SENDRECV:
        put(g, rk[0], rk[1], c->bytes, -1, -1, 0);
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
    if (is_ring(c->type) && !c->chunk_bytes)
        return usim_set_error(USIM_EINVAL, "ring collective without chunk sizes");
    if (c->algo < 0 || c->algo >= USIM_NALGO || c->proto < 0 || c->proto >= USIM_NPROTO)
        return usim_set_error(USIM_EINVAL, "%s: bad algorithm or protocol", usim_coll_name(c->type));
    for (size_t i = 0; i < (size_t)P * NG; i++)
        if (c->ranks[i] < 0 || c->ranks[i] >= G)
            return usim_set_error(USIM_EINVAL, "%s: GPU %d out of range", usim_coll_name(c->type),
                                  c->ranks[i]);
    return USIM_OK;
}

#define MAX_CANDIDATES 8

/* The candidate (algorithm, protocol) pairs of a valid collective; for
 * non-ring types one pair (none, Simple).  Returns the count or -status. */
static int candidates(usim_net *n, const usim_coll *c, usim_algo *as, usim_proto *ps, double *est)
{
    if (!is_ring(c->type) || c->size == 1) {
        as[0] = USIM_ALGO_AUTO;
        ps[0] = USIM_PROTO_SIMPLE;
        est[0] = 0;
        return 1;
    }
    geo G0;
    int rc = geometry(n, c->ranks, c->size, &G0);
    if (rc)
        return -rc;
    usim_group_shape sh = {G0.N, G0.g, G0.uniform};
    free(G0.pos);
    uint64_t S = 0;
    for (int p = 0; p < c->size; p++)
        S += c->chunk_bytes[p];
    return usim_tune_candidates(usim_net_platform(n), c->type, &sh, (double)S, c->algo, c->proto,
                                as, ps, est, MAX_CANDIDATES);
}

/* Generate the transfers of algorithm a with protocol p (count them all, and
 * store the window when build).  *steps gets the ring steps (0: not a ring). */
static int generate(usim_net *n, const usim_coll *c, usim_algo a, usim_proto p,
                    usim_coll_result *r, gen *g, int build, int *steps)
{
    memset(r, 0, sizeof *r);
    *steps = 0;
    int P = c->size, NG = c->ngroups, G = usim_net_gpus(n);
    memset(g, 0, sizeof *g);
    g->net = n;
    g->c = c;
    g->build = build;
    g->window = INT_MAX;
    g->wire = usim_proto_wire(p);
    g->sent = usim_calloc((size_t)G, sizeof *g->sent);
    g->recv = usim_calloc((size_t)G, sizeof *g->recv);
    g->sent_cls = usim_calloc((size_t)G * USIM_NCLASS, sizeof *g->sent_cls);
    if (!g->sent || !g->recv || !g->sent_cls)
        return usim_set_error(USIM_ENOMEM, "out of memory counting a collective");
    r->algo = a;
    r->proto = p;
    r->channels = 1;
    if (P == 1)
        return USIM_OK;
    int rc = USIM_OK;
    if (!is_ring(c->type)) {
        for (int gi = 0; gi < NG && !g->err; gi++)
            gen_p2p(g, gi);
    } else {
        if (a == USIM_ALGO_NVLS)
            g->wire /= usim_net_platform(n)->nvls_eff;
        for (int gi = 0; gi < NG && !rc && !g->err; gi++) {
            geo Gg;
            if ((rc = geometry(n, c->ranks + (size_t)gi * P, P, &Gg)))
                break;
            if (a == USIM_ALGO_TREE) {
                if (!Gg.uniform || Gg.N < 2)
                    rc = usim_set_error(USIM_EINVAL, "%s: groups are placed differently on the nodes",
                                        usim_coll_name(c->type));
                else
                    rc = gen_tree(g, gi, &Gg), r->channels = 2 * Gg.g;
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
                }
                rc = gen_ring(g, gi, &Gg, C);
                r->channels = C;
            }
            free(Gg.pos);
        }
    }
    if (!rc && g->err)
        rc = g->err == USIM_ENOMEM ? usim_set_error(USIM_ENOMEM, "out of memory for the transfers")
                                   : usim_set_error(USIM_EINVAL, "%s: too many transfers",
                                                    usim_coll_name(c->type));
    return rc;
}

static void gen_free(gen *g)
{
    free(g->x);
    free(g->sent);
    free(g->recv);
    free(g->sent_cls);
}

static void finish_counts(usim_net *n, const gen *g, usim_coll_result *r, uint64_t *sent,
                          uint64_t *recv)
{
    int G = usim_net_gpus(n);
    for (int i = 0; i < G; i++) {
        r->total_sent += g->sent[i];
        r->total_recv += g->recv[i];
        for (int k = 0; k < USIM_NCLASS; k++)
            if (g->sent_cls[(size_t)i * USIM_NCLASS + k] > r->max_sent[k])
                r->max_sent[k] = g->sent_cls[(size_t)i * USIM_NCLASS + k];
    }
    if (sent)
        memcpy(sent, g->sent, (size_t)G * sizeof *sent);
    if (recv)
        memcpy(recv, g->recv, (size_t)G * sizeof *recv);
}

/* Validate c and list its candidate pairs (count, or -status). */
static int prepare(usim_net *n, const usim_coll *c, usim_coll_result *r, usim_algo *as,
                   usim_proto *ps, double *est)
{
    memset(r, 0, sizeof *r);
    int rc = validate(n, c);
    if (rc)
        return -rc;
    return candidates(n, c, as, ps, est);
}

/* Count algorithm a with protocol p without simulating it. */
static int count_as(usim_net *n, const usim_coll *c, usim_algo a, usim_proto p,
                    usim_coll_result *r, uint64_t *sent, uint64_t *recv)
{
    gen g;
    int steps;
    int rc = generate(n, c, a, p, r, &g, 0, &steps);
    if (!rc)
        finish_counts(n, &g, r, sent, recv);
    gen_free(&g);
    return rc;
}

/* Simulate algorithm a with protocol p. */
static int run_one(usim_net *n, const usim_coll *c, usim_algo a, usim_proto p,
                   usim_coll_result *r, uint64_t *sent, uint64_t *recv)
{
    gen g;
    int steps;
    int rc = generate(n, c, a, p, r, &g, 1, &steps);
    if (rc || c->size == 1) {
        if (!rc)
            finish_counts(n, &g, r, sent, recv);
        gen_free(&g);
        return rc;
    }
    finish_counts(n, &g, r, sent, recv);
    usim_time *fin = usim_malloc((g.n ? g.n : 1) * sizeof *fin);
    if (!fin) {
        gen_free(&g);
        return usim_set_error(USIM_ENOMEM, "out of memory for %zu transfers", g.n);
    }
    usim_net_set_latency_scale(n, usim_proto_latency(p, USIM_CLASS_NVLINK),
                               usim_proto_latency(p, USIM_CLASS_NIC));
    usim_time mk;
    rc = usim_net_run(n, g.x, (int)g.n, fin, &mk);
    usim_net_set_latency_scale(n, 1, 1);
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
                    if (fin[i] > end[g.x[i].step])
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
static usim_time a2a_call_cost(usim_net *n, const usim_coll *c)
{
    if (c->type != USIM_A2A_DIRECT && c->type != USIM_A2A_PAIRWISE)
        return 0;
    const usim_platform *pf = usim_net_platform(n);
    for (int g = 0; g < c->ngroups; g++)   /* members on one NVLink domain: the NVLink cost */
        for (int k = 1; k < c->size; k++)
            if (usim_net_domain_of(n, c->ranks[g * c->size + k]) !=
                usim_net_domain_of(n, c->ranks[g * c->size]))
                return pf->a2a_call[USIM_CLASS_NIC];
    return pf->a2a_call[USIM_CLASS_NVLINK];
}

int usim_coll_run(usim_net *n, const usim_coll *c, usim_coll_result *r, uint64_t *sent,
                  uint64_t *recv)
{
    usim_algo as[MAX_CANDIDATES];
    usim_proto ps[MAX_CANDIDATES];
    double est[MAX_CANDIDATES];
    int rc = USIM_OK, nc = prepare(n, c, r, as, ps, est);
    if (nc < 0)
        return -nc;
    /* Every candidate at flow level; the fastest wins (on ties the one with
     * the smaller estimate).  Candidates are tried in the order of NCCL's
     * estimate, and one whose lower bound (its busiest link's wire bytes over
     * that link's bandwidth) already reaches the best time is not run: it
     * cannot win, so skipping it does not change the choice. */
    int order[MAX_CANDIDATES];
    for (int k = 0; k < nc; k++) {
        int j = k;
        while (j > 0 && est[order[j - 1]] > est[k]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = k;
    }
    int best = -1;
    const usim_platform *pf = usim_net_platform(n);
    for (int oi = 0; oi < nc; oi++) {
        int k = order[oi];
        usim_coll_result t;
        if (best >= 0) {
            if ((rc = count_as(n, c, as[k], ps[k], &t, NULL, NULL)))
                return rc;
            double w = usim_proto_wire(ps[k]) / (as[k] == USIM_ALGO_NVLS ? pf->nvls_eff : 1), lb = 0;
            double bw[USIM_NCLASS] = {pf->nvl_Bps, pf->nic_Bps};
            for (int cl = 0; cl < USIM_NCLASS; cl++) {
                double x = (double)t.max_sent[cl] * w * 1e12 / bw[cl];
                if (x > lb)
                    lb = x;
            }
            if (lb - 1 >= (double)r->duration)
                continue;
        }
        if ((rc = run_one(n, c, as[k], ps[k], &t, NULL, NULL)))
            return rc;
        t.estimate_s = est[k];
        if (best < 0 || t.duration < r->duration) {
            *r = t;
            best = k;
        }
    }
    if (c->size > 1)
        r->duration += a2a_call_cost(n, c);
    if (sent || recv) {   /* the winner's counters */
        usim_coll_result t;
        rc = count_as(n, c, as[best], ps[best], &t, sent, recv);
    }
    return rc;
}

int usim_coll_count(usim_net *n, const usim_coll *c, usim_coll_result *r, uint64_t *sent,
                    uint64_t *recv)
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
    return count_as(n, c, a, p, r, sent, recv);
}
