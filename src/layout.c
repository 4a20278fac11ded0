/* SPDX-License-Identifier: Apache-2.0 */
/*
 * layout.c -- one layout value per (problem, plan): every rank's token
 * segments, query heads, KV heads and overlap chunks, and the block each
 * group member hands each other in every all-to-all, O(1) per query.  The
 * library's contexts, the drivers and ulysses-sim read partitions from here
 * (and from the uly_plan_* functions it is built on) instead of keeping
 * copies.  The expected volumes are sums over it.  Also the DP x SP grid of
 * training.  Pure integer math.
 */
#include <string.h>

#include "internal.h"

static int64_t seg_sum(int n, const int64_t *count)
{
    int64_t s = 0;
    for (int i = 0; i < n; i++)
        s += count[i];
    return s;
}

/* The plan's own consistency (callers may fill the struct by hand). */
static int plan_check(const uly_sp_plan *p)
{
    if (!p)
        return uly_set_error(ULY_EINVAL, "plan pointer is NULL");
    uly_sp_plan q;
    int rc = uly_sp_plan_init(&q, p->method, p->P, p->U, p->placement);
    if (rc)
        return rc;
    if (q.R != p->R || q.zigzag != p->zigzag)
        return uly_set_error(ULY_EINVAL, "plan fields are inconsistent (use uly_sp_plan_init)");
    return ULY_OK;
}

int uly_layout_init(uly_layout *L, const uly_attn_desc *a, const uly_sp_plan *p)
{
    if (!L)
        return uly_set_error(ULY_EINVAL, "layout pointer is NULL");
    int rc = uly_attn_desc_check(a);
    if (rc || (rc = plan_check(p)))
        return rc;
    const uly_sp_plan q = *p;
    memset(L, 0, sizeof *L);
    L->a = *a;
    L->p = q;
    L->rep = uly_plan_kv_replicated(a, q.U);
    L->kv_min = a->kv_heads;
    for (int u = 0; u < q.U; u++) {
        int64_t hb, hc, kb, kc;
        uly_split(a->heads, q.U, u, &hb, &hc);
        uly_kv_range(a, hb, hc, &kb, &kc);
        if (kc < L->kv_min)
            L->kv_min = kc;
    }
    return ULY_OK;
}

void uly_layout_part(const uly_layout *L, int rank, uly_rank_part *out)
{
    memset(out, 0, sizeof *out);
    uly_plan_grid(&L->p, rank, &out->u, &out->j);
    out->nseg = uly_plan_tokens(&L->p, L->a.seq, rank, out->tok_begin, out->tok_count);
    out->tokens = out->tok_count[0] + (out->nseg > 1 ? out->tok_count[1] : 0);
    int64_t cb[2], cc[2];
    int ns = uly_plan_chunk(&L->p, L->a.seq, out->j, cb, cc);
    out->group_tokens = cc[0] + (ns > 1 ? cc[1] : 0);
    uly_plan_heads(&L->p, L->a.heads, rank, &out->head_begin, &out->head_count);
    uly_kv_range(&L->a, out->head_begin, out->head_count, &out->kv_begin, &out->kv_count);
    out->kvg_count = L->rep ? out->head_count : out->kv_count;
}

void uly_layout_member_rows(const uly_layout *L, int64_t Ng, int u, int64_t *begin, int64_t *count)
{
    uly_split(Ng, L->p.U, u, begin, count);
}

uint64_t uly_layout_a2a_block(const uly_layout *L, int64_t Ng, int which, int src, int dst)
{
    const int U = L->p.U;
    if (src < 0 || src >= U || dst < 0 || dst >= U)
        return 0;
    int64_t tmp, n_src, n_dst, h_src, h_dst, hb, kv_src, kv_dst;
    uly_split(Ng, U, src, &tmp, &n_src);
    uly_split(Ng, U, dst, &tmp, &n_dst);
    uly_split(L->a.heads, U, src, &hb, &h_src);
    uly_kv_range(&L->a, hb, h_src, &tmp, &kv_src);
    uly_split(L->a.heads, U, dst, &hb, &h_dst);
    uly_kv_range(&L->a, hb, h_dst, &tmp, &kv_dst);
    const uint64_t row = (uint64_t)L->a.batch * (uint64_t)L->a.head_dim;
    switch (which) {
    /* sequence -> heads: src's tokens of dst's heads */
    case ULY_A2A_Q: case ULY_A2A_DO:
        return row * (uint64_t)n_src * (uint64_t)h_dst;
    case ULY_A2A_K: case ULY_A2A_V:
        return row * (uint64_t)n_src * (uint64_t)kv_dst;
    /* heads -> sequence: dst's tokens of src's heads (per query head when replicated) */
    case ULY_A2A_O: case ULY_A2A_DQ:
        return row * (uint64_t)n_dst * (uint64_t)h_src;
    case ULY_A2A_DK: case ULY_A2A_DV:
        return row * (uint64_t)n_dst * (uint64_t)(L->rep ? h_src : kv_src);
    }
    return 0;
}

int uly_layout_chunks(const uly_layout *L, int asked)
{
    int64_t K = asked > 0 ? asked : ULY_OVERLAP_MAX_CHUNKS;
    if (L->kv_min < K)
        K = L->kv_min;
    return K < 2 ? 1 : (int)K;
}

void uly_layout_chunk(const uly_layout *L, int K, int s, int c, int64_t *q_begin, int64_t *q_count,
                      int64_t *kv_begin, int64_t *kv_count)
{
    const int64_t g = L->a.heads / L->a.kv_heads;
    int64_t hb, hc, kb, kc, ub, uc;
    uly_split(L->a.heads, L->p.U, s, &hb, &hc);
    uly_kv_range(&L->a, hb, hc, &kb, &kc);
    uly_split(kc, K, c, &ub, &uc);
    int64_t k0 = kb + ub, q0 = k0 * g, q1 = (k0 + uc) * g;
    if (q0 < hb)
        q0 = hb;
    if (q1 > hb + hc)
        q1 = hb + hc;
    *kv_begin = k0;
    *kv_count = uc;
    *q_begin = q0;
    *q_count = q1 > q0 ? q1 - q0 : 0;
}

/* ------------------------------------------------------ expected volumes */

/* The layout of a Ulysses layer on P ranks (desc already checked). */
static int ulysses_layout(const uly_attn_desc *a, int P, uly_layout *L)
{
    uly_sp_plan p;
    int rc = uly_sp_plan_init(&p, ULY_METHOD_ULYSSES, P, 0, ULY_PLACE_ULYSSES_INNER);
    return rc ? rc : uly_layout_init(L, a, &p);
}

/* Add group member u's all-to-all bytes over a chunk of Ng rows to *out. */
static void a2a_volume(const uly_layout *L, int64_t Ng, int u, uly_volume *out)
{
    const uint64_t es = uly_dtype_size(L->a.dtype);
    for (int s = 0; s < L->p.U; s++) {
        if (s == u)
            continue;
        for (int w = 0; w < ULY_A2A_COUNT; w++) {
            out->sent[w] += es * uly_layout_a2a_block(L, Ng, w, u, s);
            out->recv[w] += es * uly_layout_a2a_block(L, Ng, w, s, u);
        }
    }
}

int uly_plan_a2a_block(const uly_attn_desc *a, int P, int which, int src, int dst, uint64_t *elems)
{
    int rc = uly_attn_desc_check(a);
    if (rc)
        return rc;
    if (P < 1 || src < 0 || src >= P || dst < 0 || dst >= P)
        return uly_set_error(ULY_EINVAL, "ranks %d -> %d of %d are out of range", src, dst, P);
    if (which < 0 || which >= ULY_A2A_COUNT)
        return uly_set_error(ULY_EINVAL, "unknown all-to-all %d", which);
    uly_layout L;
    if ((rc = ulysses_layout(a, P, &L)))
        return rc;
    *elems = uly_layout_a2a_block(&L, a->seq, which, src, dst);
    return ULY_OK;
}

int uly_plan_volume(const uly_attn_desc *a, int P, int rank, uly_volume *out)
{
    int rc = uly_attn_desc_check(a);
    if (rc)
        return rc;
    if (P < 1 || rank < 0 || rank >= P)
        return uly_set_error(ULY_EINVAL, "rank %d of %d is out of range", rank, P);
    uly_layout L;
    if ((rc = ulysses_layout(a, P, &L)))
        return rc;
    memset(out, 0, sizeof *out);
    a2a_volume(&L, a->seq, rank, out);
    return ULY_OK;
}

int uly_plan_method_volume(const uly_attn_desc *a, const uly_sp_plan *p, int rank, uly_volume *out)
{
    int rc = uly_attn_desc_check(a);
    if (!rc)
        rc = plan_check(p);
    if (rc)
        return rc;
    if (rank < 0 || rank >= p->P)
        return uly_set_error(ULY_EINVAL, "rank %d of %d is out of range", rank, p->P);
    if (!out)
        return uly_set_error(ULY_EINVAL, "volume pointer is NULL");
    memset(out, 0, sizeof *out);
    if (p->method == ULY_METHOD_ULYSSES)
        return uly_plan_volume(a, p->P, rank, out);
    const uint64_t e = uly_dtype_size(a->dtype), B = (uint64_t)a->batch, d = (uint64_t)a->head_dim;
    int u, j;
    uly_plan_grid(p, rank, &u, &j);
    if (p->method == ULY_METHOD_ALLGATHER) {
        int64_t tb[2], tc[2];
        int ns = uly_plan_tokens(p, a->seq, rank, tb, tc);
        const uint64_t kvrow = B * (uint64_t)a->kv_heads * d * e;
        const uint64_t own = kvrow * (uint64_t)seg_sum(ns, tc), total = kvrow * (uint64_t)a->seq;
        const uint64_t others = (uint64_t)(p->P - 1);
        out->sent[ULY_AG_K] = out->sent[ULY_AG_V] = others * own;
        out->recv[ULY_AG_K] = out->recv[ULY_AG_V] = total - own;
        out->sent[ULY_RS_DK] = out->sent[ULY_RS_DV] = total - own;
        out->recv[ULY_RS_DK] = out->recv[ULY_RS_DV] = others * own;
        return ULY_OK;
    }
    if (p->method == ULY_METHOD_USP) {
        /* the all-to-alls of the group: the chunk's tokens over U ranks */
        uly_layout L;
        if ((rc = uly_layout_init(&L, a, p)))
            return rc;
        a2a_volume(&L, uly_plan_chunk_tokens(p, a->seq, j), u, out);
    }
    /* the ring: what this position sends after each step, and receives
     * from its predecessor (plus its own gradients coming back) */
    const int prev = uly_plan_grid_rank(p, u, (j + p->R - 1) % p->R);
    for (int t = 0; t < p->R; t++)
        for (int w = ULY_RING_K; w <= ULY_RING_DV; w++) {
            out->sent[w] += uly_plan_ring_hop(a, p, rank, t, w);
            if (w == ULY_RING_DK || w == ULY_RING_DV) {
                /* from the predecessor only when it forwards (not a return) */
                int pj = (j + p->R - 1) % p->R;
                if (t + 1 < p->R && uly_plan_ring_hold(a, p, j, t + 1) && uly_plan_ring_hold(a, p, pj, t))
                    out->recv[w] += uly_plan_ring_hop(a, p, prev, t, w);
            } else {
                out->recv[w] += uly_plan_ring_hop(a, p, prev, t, w);
            }
        }
    const int last = uly_plan_ring_last(a, p, j);
    if (last != j) {
        int64_t kvh, dkvh;
        uly_plan_ring_heads(a, p, rank, &kvh, &dkvh);
        uint64_t back = B * (uint64_t)uly_plan_chunk_tokens(p, a->seq, j) * (uint64_t)dkvh * d * e;
        out->recv[ULY_RING_DK] += back;
        out->recv[ULY_RING_DV] += back;
    }
    return ULY_OK;
}

/* ------------------------------------------------------------- calls */

static int call_put(uly_call *calls, int cap, int n, int kind, int step)
{
    if (n < cap)
        calls[n] = (uly_call){.kind = kind, .step = step, .backward = uly_vol_backward(kind)};
    return n + 1;
}

/* The ring hops of one direction: forward K, V; backward K, V, dK, dV. */
static int ring_calls(const uly_layout *L, uly_call *calls, int cap, int n, int backward)
{
    if (L->p.R < 2 && L->p.method == ULY_METHOD_USP) /* usp with one ring position: no ring */
        return n;
    for (int t = 0; t < L->p.R; t++)
        for (int w = backward ? ULY_RING_BK : ULY_RING_K; w <= (backward ? ULY_RING_DV : ULY_RING_V); w++)
            n = call_put(calls, cap, n, w, t);
    return n;
}

int uly_layout_calls(const uly_layout *L, uly_call *calls, int cap)
{
    int n = 0;
    switch (L->p.method) {
    case ULY_METHOD_ULYSSES:
        for (int w = ULY_A2A_Q; w <= ULY_A2A_DV; w++)
            n = call_put(calls, cap, n, w, 0);
        return n;
    case ULY_METHOD_ALLGATHER:
        for (int w = ULY_AG_K; w <= ULY_RS_DV; w++)
            n = call_put(calls, cap, n, w, 0);
        return n;
    default: /* the rings, and usp: the group's all-to-alls around its ring */
        for (int w = ULY_A2A_Q; L->p.U > 1 && w <= ULY_A2A_V; w++)
            n = call_put(calls, cap, n, w, 0);
        n = ring_calls(L, calls, cap, n, 0);
        for (int w = ULY_A2A_O; L->p.U > 1 && w <= ULY_A2A_DO; w++)
            n = call_put(calls, cap, n, w, 0);
        n = ring_calls(L, calls, cap, n, 1);
        for (int w = ULY_A2A_DQ; L->p.U > 1 && w <= ULY_A2A_DV; w++)
            n = call_put(calls, cap, n, w, 0);
        return n;
    }
}

uint64_t uly_layout_call_block(const uly_layout *L, const uly_call *c, int src, int dst)
{
    const uly_sp_plan *p = &L->p;
    if (!c || src < 0 || src >= p->P || dst < 0 || dst >= p->P || src == dst)
        return 0;
    int us, js, ud, jd;
    uly_plan_grid(p, src, &us, &js);
    uly_plan_grid(p, dst, &ud, &jd);
    const uint64_t es = uly_dtype_size(L->a.dtype);
    if (c->kind >= ULY_A2A_Q && c->kind < ULY_A2A_COUNT)
        return js == jd ? uly_layout_a2a_block(L, uly_plan_chunk_tokens(p, L->a.seq, js), c->kind, us, ud) : 0;
    if (c->kind >= ULY_RING_K && c->kind <= ULY_RING_DV) {
        const uint64_t bytes = uly_plan_ring_hop(&L->a, p, src, c->step, c->kind);
        if (!bytes || ud != us)
            return 0;
        /* to the successor while a later position needs the shard; dK, dV
         * otherwise go back to their owner (uly_plan_ring_hop) */
        const int next = uly_plan_ring_hold(&L->a, p, (js + 1) % p->R, c->step + 1);
        const int to = next ? (js + 1) % p->R : uly_plan_ring_src(p, js, c->step);
        return jd == to ? bytes / es : 0;
    }
    if (c->kind >= ULY_AG_K && c->kind <= ULY_RS_DV) {
        int64_t b[2], n[2];
        /* all-gather: src's own tokens; reduce-scatter: dst's tokens of src's contribution */
        int ns = uly_plan_tokens(p, L->a.seq, c->kind <= ULY_AG_V ? src : dst, b, n);
        return (uint64_t)L->a.batch * (uint64_t)seg_sum(ns, n) * (uint64_t)L->a.kv_heads *
               (uint64_t)L->a.head_dim;
    }
    return 0;
}

/* ------------------------------------------------------- named buffers */

void uly_bufs_add(uly_bufs *t, const char *name, uint64_t bytes, int where)
{
    t->total = t->total > UINT64_MAX - bytes ? UINT64_MAX : t->total + bytes;
    if (t->n < ULY_BUFS_MAX) {
        t->b[t->n++] = (uly_buf){.name = name, .bytes = bytes, .where = where};
        return;
    }
    uly_buf *last = &t->b[ULY_BUFS_MAX - 1];
    last->bytes = last->bytes > UINT64_MAX - bytes ? UINT64_MAX : last->bytes + bytes;
}

uint64_t uly_bufs_sum(const uly_bufs *t, int where)
{
    uint64_t s = 0;
    for (int i = 0; i < t->n; i++)
        if (t->b[i].where == where)
            s = s > UINT64_MAX - t->b[i].bytes ? UINT64_MAX : s + t->b[i].bytes;
    return s;
}

/* ------------------------------------------------------------ DP x SP */

int uly_grid2_init(uly_grid2 *g, int dp, int sp, int64_t batch, int64_t seq)
{
    if (!g)
        return uly_set_error(ULY_EINVAL, "grid pointer is NULL");
    if (dp < 1 || sp < 1)
        return uly_set_error(ULY_EINVAL, "grid degrees must be >= 1 (dp %d, sp %d)", dp, sp);
    if (batch < dp)
        return uly_set_error(ULY_EINVAL, "batch (%lld) must be at least dp (%d)", (long long)batch, dp);
    if (seq < sp)
        return uly_set_error(ULY_EINVAL, "sequence (%lld) must be at least sp (%d)", (long long)seq, sp);
    *g = (uly_grid2){.dp = dp, .sp = sp, .batch = batch, .seq = seq};
    return ULY_OK;
}

void uly_grid2_part(const uly_grid2 *g, int w, int64_t *row_begin, int64_t *rows, int64_t *tok_begin,
                    int64_t *toks)
{
    uly_split(g->batch, g->dp, w / g->sp, row_begin, rows);
    uly_split(g->seq, g->sp, w % g->sp, tok_begin, toks);
}

int uly_grid2_owner(const uly_grid2 *g, int64_t b, int s)
{
    const int64_t base = g->batch / g->dp, rem = g->batch % g->dp;
    const int64_t dp = b < (base + 1) * rem ? b / (base + 1) : rem + (b - (base + 1) * rem) / base;
    return (int)dp * g->sp + s;
}
