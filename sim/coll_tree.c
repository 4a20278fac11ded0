/* SPDX-License-Identifier: Apache-2.0 */
/*
 * coll_tree.c -- the tree all-reduce (double binary tree over nodes, chains inside
 * them) with its channel symmetry, NVLS through the NVSwitch, and the
 * point-to-point patterns (all-to-all direct and pairwise, ring shift,
 * send/recv).
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "usim.h"
#include "usim_internal.h"
#include "coll_internal.h"

/* NCCL moves data in slices of its 4 MiB buffer split in NCCL_STEPS = 8
 * (init.cc DEFAULT_BUFFSIZE, device.h NCCL_STEPS): the pipelined algorithms
 * (tree, nvls) cut each channel's data into slices of this size, at most
 * MAX_SLICES of them. */
#define SLICE_BYTES (512.0 * 1024)
#define MAX_SLICES 64

static int slices(uint64_t bytes)
{
    double k = ceil((double)bytes / SLICE_BYTES);
    return k < 1 ? 1 : k > MAX_SLICES ? MAX_SLICES : (int)k;
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
 * g->tree_sym (usim_tree_symmetric: the other channels are its images). */
/* Breadth-first order of tree t's N nodes from its root (ord[0]); the root. */
static int tree_order(int N, int t, int *ord)
{
    int root = t ? N - 1 : 0, no = 0;
    ord[no++] = root;
    for (int i = 0; i < no; i++)
        for (int s = 0; s < 2; s++) {
            int cn = tree_child(ord[i], N, t, s);
            if (cn >= 0)
                ord[no++] = cn;
        }
    return root;
}

/* Tree t's reduce step at node n for a slice of b bytes between the nodes'
 * GPUs at rank gh[node]: the node's own part (transfer x, -1: none) and its
 * children's go up to the parent (up_cur, up_prev: the last push of each
 * node), or at the root join into have[n]. */
static void tree_up(gen *g, const int *gh, int N, int t, int n, uint64_t b, int x, int *up_cur, int *up_prev,
                    int *have)
{
    int c0 = tree_child(n, N, t, 0), c1 = tree_child(n, N, t, 1);
    int deps[4] = {x, c0 >= 0 ? up_cur[c0] : -1, c1 >= 0 ? up_cur[c1] : -1, up_prev[n]};
    int par = tree_parent(n, N, t);
    if (par >= 0) {
        up_cur[n] = up_prev[n] = usim_gen_put_all(g, gh[n], gh[par], b, deps, 4);
    } else {
        deps[3] = -1;
        have[n] = usim_gen_put_all(g, gh[n], gh[n], 0, deps, 3);
    }
}

int usim_tree_gen(gen *g, int gi, const geo *G)
{
    const usim_coll *c = g->c;
    int N = G->N, gl = G->g, C = 2 * gl, nch = g->tree_sym ? 1 : C;
    uint64_t S = chunk_sum(c);
    int *ord = usim_malloc((size_t)N * 2 * sizeof *ord), *gh = ord + N;   /* gh: node's GPU at h */
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
        int root = tree_order(N, t, ord);   /* top-down order: breadth first from the root */
        for (int n = 0; n < N; n++)
            gh[n] = rk_at(g, gi, geo_pos(G, n * gl + h));
        for (size_t i = 0; i < (size_t)N * (7 + 2 * gl); i++)
            st[i] = -1;
        uint64_t cb = part(S, ch, C);
        int K = slices(cb);
#define GPU(n, l) rk_at(g, gi, geo_pos(G, (n) * gl + (((l) % gl) + gl) % gl))
        for (int k = 0; k < K; k++) {
            uint64_t b = part(cb, k, K);
            /* NCCL's tree latency is per call (tuning.cc: 2 ((ppn-1) intra +
             * log2 N inter)), its slices pipelined behind the first: only
             * slice 0's transfers pay the route latency */
            g->nolat = k > 0;
            for (int oi = N - 1; oi >= 0; oi--) {   /* reduce: children before parents */
                int n = ord[oi], x = -1;
                for (int j = 0; j < gl - 1; j++) {   /* chain h+1, h+2, ..., h */
                    int own = cu_prev[n * gl + j];
                    x = usim_gen_put(g, GPU(n, h + 1 + j), GPU(n, h + 2 + j), b, j == 0 ? own : x,
                            j == 0 ? -1 : own, 0);
                    cu_prev[n * gl + j] = x;
                }
                tree_up(g, gh, N, t, n, b, x, up_cur, up_prev, have);
            }
            for (int oi = 0; oi < N; oi++) {        /* broadcast: parents before children */
                int n = ord[oi];
                if (n != root)
                    have[n] = dn_recv[n];
                for (int s = 0; s < 2; s++) {
                    int cn = tree_child(n, N, t, s);
                    if (cn < 0)
                        continue;
                    dn_recv[cn] = usim_gen_put(g, GPU(n, h), GPU(cn, h), b, have[n], dn_prev[2 * n + s], 0);
                    dn_prev[2 * n + s] = dn_recv[cn];
                }
                int y = have[n];
                for (int j = gl - 2; j >= 0; j--) {   /* chain back: h, h-1, ..., h+1 */
                    y = usim_gen_put(g, GPU(n, h + 2 + j), GPU(n, h + 1 + j), b, y, cd_prev[n * gl + j], 0);
                    cd_prev[n * gl + j] = y;
                }
            }
        }
#undef GPU
    }
    g->nolat = 0;
    free(ord); free(st);
    return USIM_OK;
}

/*
 * The tree's symmetry.  When one group sits on N nodes, g GPUs on each (NVLink
 * domain = node, one NIC per GPU, switched NVLink; the node's other GPUs idle),
 * and every channel carries the same bytes, the network and the transfers of usim_tree_gen are invariant under
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
int usim_tree_symmetric(usim_net *n, const usim_coll *c, int classes, const rgrid *R, const geo *G)
{
    /* classes: k->on, 0 under the full engine (usim_cls_analyze) */
    if (!classes || c->ngroups != 1 || !G->uniform ||
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
 * (usim_tree_symmetric).  Arrays owned by the caller (ld->off, link, w, route). */
int usim_tree_loads(usim_net *n, const gen *g, const geo *G, usim_loads *ld)
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

/* NVLS-tree all-reduce (NCCL's NVLS_TREE): local GPU h of every node owns
 * shard h (S/g) and carries it over two binary trees across the nodes (the
 * double binary tree, half each, through GPU h's NIC), in slices.  Per
 * slice: every GPU of a node pushes it to the NVSwitch, which reduces it
 * into GPU h (up 1, down 1 / g of S per GPU); the trees reduce it up and
 * broadcast it down between the nodes' GPUs h; GPU h pushes the result to
 * the switch, which multicasts it to the node's GPUs (up 1 / g, down 1).
 * Switch legs carry bytes / nvls_efficiency on the wire. */
int usim_nvlstree_gen(gen *g, int gi, const geo *G)
{
    const usim_coll *c = g->c;
    int N = G->N, gl = G->g;
    uint64_t S = chunk_sum(c);
    double w_net = g->wire, w_sw = g->wire / usim_net_platform(g->net)->nvls_eff;
    int *ord = usim_malloc((size_t)N * 2 * sizeof *ord), *gh = ord + N;   /* gh: node's GPU at h */
    int *st = usim_malloc((size_t)N * (6 + 4 * gl) * sizeof *st);
    int *a = usim_malloc((size_t)gl * sizeof *a);
    if (!ord || !st || !a) {
        free(ord); free(st); free(a);
        return usim_set_error(USIM_ENOMEM, "out of memory");
    }
    int *up_prev = st, *up_cur = st + N, *have = st + 2 * N, *dn_recv = st + 3 * N;
    int *dn_prev = st + 4 * N;        /* 2 per node */
    /* per GPU and channel: its last reduce push to the switch, reduced slice
     * from it, multicast push and multicast receipt (the channels run side by
     * side, each pipelined in order) */
    int *pu = st + 6 * N, *pd = pu + (size_t)N * gl, *pc = pd + (size_t)N * gl, *pm = pc + (size_t)N * gl;
#define GPU(n, l) rk_at(g, gi, geo_pos(G, (n) * gl + (l)))
    for (int h = 0; h < gl; h++)
        for (int t = 0; t < 2; t++) {
            int root = tree_order(N, t, ord);
            for (int n = 0; n < N; n++)
                gh[n] = GPU(n, h);
            for (size_t i = 0; i < (size_t)N * (6 + 4 * gl); i++)
                st[i] = -1;
            uint64_t cb = part(part(S, h, gl), t, 2);
            int K = slices(cb);
            for (int k = 0; k < K; k++) {
                uint64_t b = part(cb, k, K);
                g->nolat = k > 0;   /* the trees' latency is paid by the first slice */
                int *dA = dn_recv;  /* reused below: the switch's reduced slice at GPU h */
                g->wire = w_sw;
                for (int n = 0; n < N; n++) {
                    for (int l = 0; l < gl; l++)
                        a[l] = pu[n * gl + l] = usim_gen_put(g, GPU(n, l), USIM_SWITCH, b, pu[n * gl + l], -1, 0);
                    int j = usim_gen_put_all(g, GPU(n, h), GPU(n, h), 0, a, gl);
                    dA[n] = pd[n * gl + h] = usim_gen_put(g, USIM_SWITCH, GPU(n, h), b, j, pd[n * gl + h], 0);
                }
                g->wire = w_net;
                for (int oi = N - 1; oi >= 0; oi--) {   /* reduce: children before parents */
                    int n = ord[oi];
                    tree_up(g, gh, N, t, n, b, dA[n], up_cur, up_prev, have);
                }
                for (int oi = 0; oi < N; oi++) {        /* broadcast: parents before children */
                    int n = ord[oi];
                    if (n != root)
                        have[n] = dn_recv[n];
                    for (int sd = 0; sd < 2; sd++) {
                        int cn = tree_child(n, N, t, sd);
                        if (cn < 0)
                            continue;
                        dn_recv[cn] = usim_gen_put(g, GPU(n, h), GPU(cn, h), b, have[n], dn_prev[2 * n + sd], 0);
                        dn_prev[2 * n + sd] = dn_recv[cn];
                    }
                }
                g->wire = w_sw;
                for (int n = 0; n < N; n++) {       /* multicast inside the node */
                    int cu = pc[n * gl + h] = usim_gen_put(g, GPU(n, h), USIM_SWITCH, b, have[n], pc[n * gl + h], 0);
                    for (int l = 0; l < gl; l++)
                        pm[n * gl + l] = usim_gen_put(g, USIM_SWITCH, GPU(n, l), b, cu, pm[n * gl + l], 0);
                }
            }
        }
#undef GPU
    g->nolat = 0;
    g->wire = w_net;
    free(ord); free(st); free(a);
    return USIM_OK;
}

void usim_nvls_gen(gen *g, int gi)
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
            pu = usim_gen_put(g, rk_at(g, gi, p), USIM_SWITCH, part(up, k, K), pu, -1, 0);
            pd = usim_gen_put(g, USIM_SWITCH, rk_at(g, gi, p), part(dn, k, K), pu, pd, 0);
        }
    }
}

void usim_p2p_gen(gen *g, int gi)
{
    const usim_coll *c = g->c;
    int P = c->size;
    switch (c->type) {
    case USIM_A2A_DIRECT:
        for (int s = 0; s < P; s++)
            for (int d = 0; d < P; d++)
                if (s != d)
                    usim_gen_put(g, rk_at(g, gi, s), rk_at(g, gi, d), usim_coll_pair(c, s, d), -1, -1, 0);
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
                cur[p] = usim_gen_put(g, rk_at(g, gi, p), rk_at(g, gi, d), usim_coll_pair(c, p, d), prev[p],
                             prev[((p - (k - 1)) % P + P) % P], k - 1);
            }
            memcpy(prev, cur, (size_t)P * sizeof *prev);
        }
        free(prev);
        break;
    }
    case USIM_RING_SHIFT:
        for (int p = 0; p < P; p++)
            usim_gen_put(g, rk_at(g, gi, p), rk_at(g, gi, (p + 1) % P), c->bytes, -1, -1, 0);
        break;
    case USIM_SENDRECV:
        usim_gen_put(g, rk_at(g, gi, 0), rk_at(g, gi, 1), c->bytes, -1, -1, 0);
        break;
    default:
        break;
    }
}
