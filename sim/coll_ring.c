/* SPDX-License-Identifier: Apache-2.0 */
/*
 * coll_ring.c -- ring all-gather, reduce-scatter and all-reduce (NCCL channel
 * rings, full-mesh strides and Walecki paths), their closed-form counters,
 * and the light cone that simulates a long ring by representative blocks.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "usim.h"
#include "usim_internal.h"
#include "coll_internal.h"

/* Channels of the ring algorithm: one per rail across nodes, else one; on
 * full-mesh nodes as described at the top. */
int usim_ring_channels(usim_net *net, const geo *G)
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
    /* as usim_ring_gen: Walecki paths across nodes only for an even g */
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
            if (usim_grid_geo_pos(G->rg, mid, 0) + blo >= r)
                hi = mid;
            else
                lo = mid + 1;
        }
        int b1 = lo;
        hi = nb;              /* b2: first block with A(b) >= r */
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (usim_grid_geo_pos(G->rg, mid, 0) >= r)
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
 * the channel's share of all chunks.  The same sums as usim_ring_gen's prefix
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

int usim_ring_gen(gen *g, int gi, const geo *G, int C)
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
                cur[ch * P + i] = usim_gen_put(g, rk_at(g, gi, o[i]), rk_at(g, gi, o[(i + 1) % P]), b, prev[ch * P + i],
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
                    usim_gen_count(g, rk_at(g, gi, o[i]), rk_at(g, gi, o[(i + 1) % P]), b);
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

static int cone_run(gen *g, int gi, const geo *G, int C, int w, const int *reps, int nrep);
static int cone_windows(gen *g, int gi, const geo *G, int C, int w, const int *bval, int W);

int usim_ring_gen_cone(gen *g, int gi, const geo *G, int C, int w, const int *bval)
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
        rc = usim_ring_gen(g, gi, G, C);
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
                    int x = usim_gen_put(g, RKO(ch, i, bi), RKO(ch, (i + 1) % P, sn), by, d0, d1, k);
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
 * block's transfers depend on besides their dependencies (usim_ring_gen_uneven);
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
    if (!reps || !cl || !buf || usim_ctab_init(&t, N)) {
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
        cl[b] = usim_ctab_class(&t, usim_ints_hash(buf, (size_t)W), win_same, &x, &added);
        if (added)
            reps[cl[b]] = b;
        m = reps[cl[b]];
        if ((int64_t)t.n * 2 > N)
            goto out;   /* hardly a reduction: the whole ring */
    }
    rc = cone_run(g, gi, G, C, w, reps, t.n);
out:
    usim_ctab_free(&t);
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
int usim_ring_gen_uneven(gen *g, int gi, const geo *G, int w)
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
    rc = usim_ring_gen_cone(g, gi, &S, 1, w, bval);
    free(bval);
    return rc;
}
