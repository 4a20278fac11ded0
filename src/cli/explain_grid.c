/* SPDX-License-Identifier: Apache-2.0 */
/*
 * explain_grid.c -- the query x key mask grid of `ulysses explain`
 * (explain.h): which ranks compute which (query block, key block) and at
 * which step, from the plan layer only (uly_layout_part, uly_plan_chunk,
 * uly_plan_tokens, uly_plan_ring_src, uly_plan_heads, uly_attn_pairs_range).
 * The drawing (explain_draw.c) and --json / --html read it; nothing there
 * computes a partition.
 */
#include <stdlib.h>
#include <string.h>

#include "explain.h"

void xp_grid_free(xp_grid *g)
{
    free(g->edge);
    free(g->owner);
    free(g->granks);
    free(g->gheads);
    free(g->cell);
    free(g->mask);
    memset(g, 0, sizeof *g);
}

typedef struct seg {
    int64_t begin, count;
    int owner;
} seg;

static int seg_cmp(const void *x, const void *y)
{
    const seg *a = x, *b = y;
    return a->begin < b->begin ? -1 : a->begin > b->begin;
}

static double pairs_all_rows(const uly_attn_desc *a, int64_t q0, int64_t nq, int64_t k0, int64_t nk)
{
    double s = 0;
    if (!a->doc_offsets)
        return (double)a->batch * (double)uly_attn_pairs_range(a, 0, q0, nq, k0, nk);
    for (int64_t b = 0; b < a->batch; b++)
        s += (double)uly_attn_pairs_range(a, b, q0, nq, k0, nk);
    return s;
}

int xp_grid_fill(xp_grid *g, const uly_attn_desc *a, const uly_sp_plan *p, int method, int P,
                 const uly_layout *L)
{
    memset(g, 0, sizeof *g);
    const int64_t N = a->seq;
    const int one_step = method == ULY_METHOD_ULYSSES || method == ULY_METHOD_MEGATRON_SP ||
                         method == ULY_METHOD_ALLGATHER;
    const int R = one_step ? 1 : p->R, U = one_step ? 1 : p->U;
    /* the blocks: token segments with the group whose queries they are */
    seg *sg = calloc((size_t)2 * (size_t)P + 2, sizeof *sg);
    if (!sg)
        return 1;
    int ns = 0;
    if (method == ULY_METHOD_ULYSSES || method == ULY_METHOD_MEGATRON_SP) {
        for (int r = 0; r < P; r++) {
            uly_rank_part q;
            uly_layout_part(L, r, &q);
            if (q.tokens > 0)
                sg[ns++] = (seg){q.tok_begin[0], q.tokens, 0};
        }
        g->ngroup = 1;
        g->gsize = P;
    } else if (method == ULY_METHOD_ALLGATHER) {
        for (int r = 0; r < P; r++) {
            int64_t tb[2], tc[2];
            int nt = uly_plan_tokens(p, N, r, tb, tc);
            for (int x = 0; x < nt; x++)
                if (tc[x] > 0)
                    sg[ns++] = (seg){tb[x], tc[x], r};
        }
        g->ngroup = P;
        g->gsize = 1;
    } else {
        for (int j = 0; j < R; j++) {
            int64_t cb[2], cc[2];
            int nc = uly_plan_chunk(p, N, j, cb, cc);
            for (int x = 0; x < nc; x++)
                if (cc[x] > 0)
                    sg[ns++] = (seg){cb[x], cc[x], j};
        }
        g->ngroup = R;
        g->gsize = U;
    }
    /* zigzag: a position's two chunks may touch (positions R-1 and R); cut
     * at the 2R chunk boundaries so the grid shows every chunk */
    if (p->zigzag && method != ULY_METHOD_ULYSSES && method != ULY_METHOD_MEGATRON_SP) {
        const int C = 2 * p->R;
        seg *cut = calloc((size_t)ns * (size_t)C + 1, sizeof *cut);
        if (!cut) {
            free(sg);
            return 1;
        }
        int nc = 0;
        for (int i = 0; i < ns; i++)
            for (int c = 0; c < C; c++) {
                int64_t cb, cc;
                uly_split(N, C, c, &cb, &cc);
                int64_t lo = cb > sg[i].begin ? cb : sg[i].begin;
                int64_t hi = cb + cc < sg[i].begin + sg[i].count ? cb + cc : sg[i].begin + sg[i].count;
                if (hi > lo)
                    cut[nc++] = (seg){lo, hi - lo, sg[i].owner};
            }
        free(sg);
        sg = cut;
        ns = nc;
    }
    qsort(sg, (size_t)ns, sizeof *sg, seg_cmp);
    const int nb = ns;
    g->nb = nb;
    g->tokens = N;
    g->steps = uly_plan_steps(p);
    if (method == ULY_METHOD_MEGATRON_SP)
        g->steps = 1;
    g->edge = calloc((size_t)nb + 1, sizeof *g->edge);
    g->owner = calloc((size_t)nb + 1, sizeof *g->owner);
    g->granks = calloc((size_t)g->ngroup * (size_t)g->gsize, sizeof *g->granks);
    g->gheads = calloc((size_t)g->ngroup * (size_t)g->gsize, sizeof *g->gheads);
    g->cell = calloc((size_t)nb * (size_t)nb + 1, sizeof *g->cell);
    if (N <= XP_FINE_MAX)
        g->mask = calloc((size_t)N * (size_t)N, 1);
    if (!g->edge || !g->owner || !g->granks || !g->gheads || !g->cell || (N <= XP_FINE_MAX && !g->mask)) {
        free(sg);
        xp_grid_free(g);
        return 1;
    }
    for (int b = 0; b < nb; b++) {
        g->edge[b] = sg[b].begin;
        g->owner[b] = sg[b].owner;
    }
    g->edge[nb] = N;
    /* the groups and the heads of their members */
    for (int k = 0; k < g->ngroup; k++)
        for (int u = 0; u < g->gsize; u++) {
            int r;
            int64_t hb, hc;
            if (method == ULY_METHOD_ULYSSES || method == ULY_METHOD_MEGATRON_SP) {
                uly_rank_part q;
                r = u;
                uly_layout_part(L, r, &q);
                hc = q.head_count;
            } else {
                r = method == ULY_METHOD_ALLGATHER ? k : uly_plan_grid_rank(p, u, k);
                uly_plan_heads(p, a->heads, r, &hb, &hc);
            }
            g->granks[k * g->gsize + u] = r;
            g->gheads[k * g->gsize + u] = hc;
        }
    /* the cells */
    for (int qb = 0; qb < nb; qb++)
        for (int kb = 0; kb < nb; kb++) {
            xp_cell *c = &g->cell[qb * nb + kb];
            c->pairs = pairs_all_rows(a, sg[qb].begin, sg[qb].count, sg[kb].begin, sg[kb].count);
            c->group = -1;
            c->step = -1;
            if (c->pairs <= 0)
                continue;
            c->group = sg[qb].owner;
            if (one_step) {
                c->step = 0;
                continue;
            }
            for (int t = 0; t < g->steps; t++)
                if (uly_plan_ring_src(p, sg[qb].owner, t) == sg[kb].owner) {
                    c->step = t;
                    break;
                }
        }
    if (g->mask)
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < N; j++)
                g->mask[i * N + j] = (unsigned char)uly_attn_visible(a, i, j);
    free(sg);
    return 0;
}
