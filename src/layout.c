/*
 * layout.c -- one layout value per (problem, plan): every rank's token
 * segments, query heads, KV heads and overlap chunks, and the block each
 * group member hands each other in every all-to-all, O(1) per query.  The
 * library's contexts, the drivers and ulysses-sim read partitions from here
 * (and from the uly_plan_* functions it is built on) instead of keeping
 * copies.  Also the DP x SP grid of training.  Pure integer math.
 */
#include <string.h>

#include "internal.h"

int uly_layout_init(uly_layout *L, const uly_attn_desc *a, const uly_sp_plan *p)
{
    if (!L || !p)
        return uly_set_error(ULY_EINVAL, "layout or plan pointer is NULL");
    int rc = uly_attn_desc_check(a);
    if (rc)
        return rc;
    uly_sp_plan q;
    if ((rc = uly_sp_plan_init(&q, p->method, p->P, p->U, p->placement)))
        return rc;
    if (q.R != p->R || q.zigzag != p->zigzag)
        return uly_set_error(ULY_EINVAL, "plan fields are inconsistent (use uly_sp_plan_init)");
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
