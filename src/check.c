/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check.c -- the independent checker of sequence-parallel attention
 * (include/ulysses_check.h, doc/check.md): reassemble what P ranks of any
 * framework computed with the method's shard map (the plan layer's layout:
 * uly_layout_part, never a partition of its own) or with the ranks' own
 * token indices, compute the float64 reference (uly_ref_fwd, uly_ref_bwd),
 * compare per tensor x rank x token segment x head group, weigh the work of
 * every rank, and hand a failure to the hypothesis tests of check_diag.c.
 * Also the tensor layouts of the field (bshd, bhsd, thd) and the report as
 * JSON.  No MPI.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "check_impl.h"

/* ------------------------------------------------------------- names */

static const char *const tensor_names[ULY_CHK_NT] = {"o", "lse", "dq", "dk", "dv"};

const char *uly_check_tensor_name(int t)
{
    return t >= 0 && t < ULY_CHK_NT ? tensor_names[t] : "?";
}

static const char *const defect_names[ULY_DEFECT_COUNT] = {
    "none", "zero-output", "no-sequence-parallelism", "chunk-swap", "document-mask", "kv-head",
    "head-split", "backward-kv", "backward", "precision", "forward", "imbalance"};

const char *uly_defect_name(int defect)
{
    return defect >= 0 && defect < ULY_DEFECT_COUNT ? defect_names[defect] : "?";
}

static const char *const tlayout_names[ULY_TL_COUNT] = {"bshd", "bhsd", "thd"};

const char *uly_tlayout_name(int layout)
{
    return layout >= 0 && layout < ULY_TL_COUNT ? tlayout_names[layout] : "?";
}

int uly_tlayout_parse(const char *name, int *layout)
{
    for (int i = 0; name && i < ULY_TL_COUNT; i++)
        if (strcmp(name, tlayout_names[i]) == 0) {
            *layout = i;
            return ULY_OK;
        }
    return uly_set_error(ULY_EINVAL, "unknown tensor layout '%s' (bshd, bhsd or thd)", name ? name : "");
}

/* bhsd (B, Hx, n, d) <-> bshd (B, n, Hx, d); thd is bshd with B = 1. */
static void tlayout_copy(int layout, int to_bshd, int64_t B, int64_t n, int64_t Hx, int64_t d,
                         const double *src, double *dst)
{
    const size_t all = (size_t)(B * n * Hx * d);
    if (layout != ULY_TL_BHSD) {
        memcpy(dst, src, all * sizeof *dst);
        return;
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < n; i++)
            for (int64_t h = 0; h < Hx; h++) {
                const size_t s = (size_t)(((b * n + i) * Hx + h) * d); /* bshd */
                const size_t t = (size_t)(((b * Hx + h) * n + i) * d); /* bhsd */
                if (to_bshd)
                    memcpy(dst + s, src + t, (size_t)d * sizeof *dst);
                else
                    memcpy(dst + t, src + s, (size_t)d * sizeof *dst);
            }
}

void uly_tlayout_to_bshd(int layout, int64_t B, int64_t n, int64_t Hx, int64_t d, const double *src,
                         double *dst)
{
    tlayout_copy(layout, 1, B, n, Hx, d, src, dst);
}

void uly_tlayout_from_bshd(int layout, int64_t B, int64_t n, int64_t Hx, int64_t d, const double *src,
                           double *dst)
{
    tlayout_copy(layout, 0, B, n, Hx, d, src, dst);
}

/* -------------------------------------------------------- tolerances */

/*
 * f32 and f64: doc/kernels.md's error bounds.  bf16 and f16 from the unit
 * roundoff u (2^-8, 2^-11); doc/check.md "Tolerances" derives them:
 * forward 2u + 2u |ref| (the probabilities rounded to the type before the
 * PV product, the normaliser from the unrounded ones, the output rounded
 * once; fp32 accumulation is below u), backward 4u + 2u |ref| (P and dS
 * rounded before the dV, dK and dQ products: twice the forward's rounding
 * terms; the sums over the queries of a key add fp32 roundings only).
 */
int uly_check_tolerance(int elem, int tensor, double *atol, double *rtol)
{
    if (tensor < 0 || tensor >= ULY_CHK_NT || !atol || !rtol)
        return uly_set_error(ULY_EINVAL, "check tolerance: unknown tensor %d", tensor);
    const int fwd = tensor == ULY_CHK_O || tensor == ULY_CHK_LSE;
    double u;
    switch (elem) {
    case ULY_ELEM_F64:
        *atol = 1e-11;
        *rtol = 1e-9;
        return ULY_OK;
    case ULY_ELEM_F32:
        *atol = fwd ? 3e-6 : 2e-5;
        *rtol = fwd ? 3e-5 : 2e-4;
        return ULY_OK;
    case ULY_ELEM_BF16:
        u = ldexp(1.0, -8);
        break;
    case ULY_ELEM_F16:
        u = ldexp(1.0, -11);
        break;
    default:
        return uly_set_error(ULY_EINVAL, "check tolerance: compute type '%s' has none (f32, bf16, f16 or f64)",
                             uly_check_elem_name(elem));
    }
    *atol = fwd ? 2 * u : 4 * u;
    *rtol = fwd ? 2 * u : 2 * u;
    return ULY_OK;
}

/* ---------------------------------------------------------- shard maps */

/* The method's chunk holding tokens [tb, tb + tc): zigzag chunks 0..2R-1,
 * ring chunks 0..R-1; -1 without a ring or across chunks. */
static int chunk_of(const chk_ctx *c, int64_t tb, int64_t tc)
{
    const uly_sp_plan *p = &c->pb->plan;
    if (p->R <= 1 || tc <= 0)
        return -1;
    const int pieces = p->zigzag ? 2 * p->R : p->R;
    for (int k = 0; k < pieces; k++) {
        int64_t b, n;
        uly_split(c->N, pieces, k, &b, &n);
        if (tb >= b && tb + tc <= b + n)
            return k;
    }
    return -1;
}

/* Segments of a view from its token list: maximal runs of consecutive
 * tokens, merged into at most CHK_MAXSEG spans. */
static void view_segments(const chk_ctx *c, chk_view *v)
{
    int64_t runs = 0;
    for (int64_t i = 0; i < v->rows; i++)
        if (i == 0 || v->tok[i] != v->tok[i - 1] + 1)
            runs++;
    v->nseg = 0;
    if (v->rows == 0) {
        v->nseg = 1;
        v->seg[0] = (chk_seg){.row0 = 0, .rows = 0, .tok_begin = 0, .tok_count = 0, .chunk = -1};
        return;
    }
    const int nseg = runs < CHK_MAXSEG ? (int)runs : CHK_MAXSEG;
    int64_t lo[CHK_MAXSEG], hi[CHK_MAXSEG], run = -1, rb = 0, rc = 0;
    int s = -1;
    for (int64_t row = 0; row < v->rows; row++) {
        if (row == 0 || v->tok[row] != v->tok[row - 1] + 1)
            run++;
        while (s < 0 || run >= rb + rc) { /* runs [rb, rb + rc) make segment s */
            s++;
            uly_split(runs, nseg, s, &rb, &rc);
            v->seg[s].row0 = row;
            v->seg[s].rows = 0;
            lo[s] = INT64_MAX;
            hi[s] = -1;
        }
        v->seg[s].rows++;
        if (v->tok[row] < lo[s])
            lo[s] = v->tok[row];
        if (v->tok[row] > hi[s])
            hi[s] = v->tok[row];
    }
    v->nseg = nseg;
    for (s = 0; s < nseg; s++) {
        v->seg[s].tok_begin = lo[s];
        v->seg[s].tok_count = hi[s] - lo[s] + 1;
        v->seg[s].chunk = chunk_of(c, lo[s], hi[s] - lo[s] + 1);
    }
}

/* The view of planned segments begin/count (n of them), each cut at the
 * method's chunk boundaries (the last zigzag position's two chunks are
 * adjacent and come as one segment). */
static void view_from_segments(const chk_ctx *c, chk_view *v, int n, const int64_t *begin, const int64_t *count,
                               int64_t *tok)
{
    const uly_sp_plan *p = &c->pb->plan;
    const int pieces = p->R > 1 ? (p->zigzag ? 2 * p->R : p->R) : 1;
    v->tok = tok;
    v->rows = 0;
    v->nseg = 0;
    for (int s = 0; s < n; s++) {
        int64_t t = begin[s];
        const int64_t end = begin[s] + count[s];
        do {
            int64_t stop = end;
            for (int k = 0; k < pieces && v->nseg < CHK_MAXSEG - 1; k++) {
                int64_t pb, pc;
                uly_split(c->N, pieces, k, &pb, &pc);
                if (pb > t && pb < stop)
                    stop = pb;
            }
            v->seg[v->nseg++] = (chk_seg){.row0 = v->rows, .rows = stop - t, .tok_begin = t, .tok_count = stop - t,
                                          .chunk = chunk_of(c, t, stop - t)};
            for (; t < stop; t++)
                tok[v->rows++] = t;
        } while (t < end);
    }
}

/* ------------------------------------------------------------- checks */

static const char *const opt_names[6] = {"o", "lse", "do", "dq", "dk", "dv"};

static void rank_opts(const uly_check_rank *r, const double *x[6])
{
    x[0] = r->o;
    x[1] = r->lse;
    x[2] = r->dout;
    x[3] = r->dq;
    x[4] = r->dk;
    x[5] = r->dv;
}

static int check_presence(const chk_ctx *c, const uly_check_rank *ranks)
{
    const double *x0[6];
    rank_opts(&ranks[0], x0);
    for (int r = 0; r < c->P; r++) {
        const uly_check_rank *R = &ranks[r];
        if (!R->q || !R->k || !R->v)
            return uly_set_error(ULY_EINVAL, "rank %d: %s is missing (q, k and v are required)", r,
                                 !R->q ? "q" : !R->k ? "k" : "v");
        if (R->rows < 0 || R->rows > c->N)
            return uly_set_error(ULY_EINVAL, "rank %d has %lld rows; the sequence has %lld tokens", r,
                                 (long long)R->rows, (long long)c->N);
        const double *x[6];
        rank_opts(R, x);
        for (int i = 0; i < 6; i++)
            if (!x[i] != !x0[i])
                return uly_set_error(ULY_EINVAL, "rank %d %s %s, rank 0 %s", r, x[i] ? "has" : "has no",
                                     opt_names[i], x[i] ? "has none" : "has one");
        if (!R->tokens != !ranks[0].tokens)
            return uly_set_error(ULY_EINVAL, "rank %d %s token indices (tokens), rank 0 %s", r,
                                 R->tokens ? "gives" : "gives no", R->tokens ? "gives none" : "does");
        if (R->lse && !R->lse_plan != !ranks[0].lse_plan)
            return uly_set_error(ULY_EINVAL, "rank %d's lse is %s, rank 0's %s", r,
                                 R->lse_plan ? "in the method's layout (lse_plan)" : "over its own tokens",
                                 R->lse_plan ? "over its own tokens" : "in the method's layout (lse_plan)");
    }
    const uly_check_rank *R = &ranks[0];
    if ((R->dq || R->dk || R->dv) && !R->dout)
        return uly_set_error(ULY_EINVAL, "rank 0: dq, dk and dv need do (the output gradient), which is missing");
    if (R->dout && !R->dq && !R->dk && !R->dv)
        return uly_set_error(ULY_EINVAL, "rank 0: do is given without dq, dk or dv");
    if (R->tokens && R->lse && R->lse_plan && (c->traits & ULY_TRAIT_A2A))
        return uly_set_error(ULY_EINVAL,
                             "rank 0: an lse in the method's layout (lse_plan) needs the method's shard map, "
                             "not token indices");
    return ULY_OK;
}

/* Token lists of every rank: the method's map (rows checked against it) or
 * the ranks' own (every token exactly once). */
static int build_views(chk_ctx *c, const uly_check_rank *ranks)
{
    const int P = c->P;
    int64_t total = 0;
    for (int r = 0; r < P; r++)
        total += ranks[r].rows;
    int64_t lse_total = 0;
    if (ranks[0].lse && ranks[0].lse_plan && !ranks[0].tokens)
        for (int r = 0; r < P; r++) {
            int64_t hb, hc, b[2], n[2];
            int ns = uly_plan_lse_layout(&c->pb->plan, c->N, c->H, r, &hb, &hc, b, n);
            for (int s = 0; s < ns; s++)
                lse_total += n[s];
        }
    c->tokbuf = uly_malloc((size_t)(total + lse_total + 1) * sizeof *c->tokbuf);
    c->view = uly_calloc((size_t)P, sizeof *c->view);
    c->lview = uly_calloc((size_t)P, sizeof *c->lview);
    if (!c->tokbuf || !c->view || !c->lview)
        return uly_set_error(ULY_ENOMEM, "check: cannot allocate the token maps of %d ranks", P);
    int64_t *t = c->tokbuf;
    if (!ranks[0].tokens) {
        for (int r = 0; r < P; r++) {
            uly_rank_part part;
            uly_layout_part(&c->L, r, &part);
            if (ranks[r].rows != part.tokens) {
                char segs[96];
                if (part.nseg > 1)
                    snprintf(segs, sizeof segs, "tokens %lld-%lld and %lld-%lld", (long long)part.tok_begin[0],
                             (long long)(part.tok_begin[0] + part.tok_count[0] - 1), (long long)part.tok_begin[1],
                             (long long)(part.tok_begin[1] + part.tok_count[1] - 1));
                else
                    snprintf(segs, sizeof segs, "tokens %lld-%lld", (long long)part.tok_begin[0],
                             (long long)(part.tok_begin[0] + part.tok_count[0] - 1));
                return uly_set_error(ULY_EINVAL, "rank %d has %lld rows; the %s shard map of %d ranks gives it %lld (%s)",
                                     r, (long long)ranks[r].rows, uly_method_name(c->pb->plan.method), P,
                                     (long long)part.tokens, segs);
            }
            view_from_segments(c, &c->view[r], part.nseg, part.tok_begin, part.tok_count, t);
            c->view[r].hb = 0;
            c->view[r].hc = c->H;
            t += part.tokens;
        }
    } else {
        int64_t *owner = uly_malloc((size_t)c->N * 2 * sizeof *owner); /* (N, 2): rank, row */
        if (!owner)
            return uly_set_error(ULY_ENOMEM, "check: cannot allocate the token owners");
        for (int64_t i = 0; i < 2 * c->N; i++)
            owner[i] = -1;
        int rc = ULY_OK;
        for (int r = 0; r < P && !rc; r++) {
            chk_view *v = &c->view[r];
            v->tok = t;
            v->rows = ranks[r].rows;
            v->hb = 0;
            v->hc = c->H;
            for (int64_t i = 0; i < v->rows && !rc; i++) {
                const int64_t x = ranks[r].tokens[i];
                if (x < 0 || x >= c->N)
                    rc = uly_set_error(ULY_EINVAL, "rank %d: tokens[%lld] = %lld is outside 0..%lld", r,
                                       (long long)i, (long long)x, (long long)(c->N - 1));
                else if (owner[2 * x] >= 0)
                    rc = uly_set_error(ULY_EINVAL,
                                       "token %lld is held twice: by rank %lld (row %lld) and rank %d (row %lld)",
                                       (long long)x, (long long)owner[2 * x], (long long)owner[2 * x + 1], r,
                                       (long long)i);
                else {
                    owner[2 * x] = r;
                    owner[2 * x + 1] = i;
                }
                t[i] = x;
            }
            t += v->rows;
        }
        for (int64_t x = 0; x < c->N && !rc; x++)
            if (owner[2 * x] < 0) {
                /* the ranks around it, to say where it was expected */
                long long before = -1, after = -1;
                for (int64_t y = x - 1; y >= 0 && before < 0; y--)
                    before = owner[2 * y];
                for (int64_t y = x + 1; y < c->N && after < 0; y++)
                    after = owner[2 * y];
                rc = uly_set_error(ULY_EINVAL,
                                   "token %lld is held by no rank (the ranks hold %lld rows for %lld tokens; "
                                   "the token before it is on rank %lld, the one after on rank %lld)",
                                   (long long)x, (long long)total, (long long)c->N, before, after);
            }
        uly_free(owner);
        if (rc)
            return rc;
        for (int r = 0; r < P; r++)
            view_segments(c, &c->view[r]);
    }
    for (int r = 0; r < P; r++) {
        if (ranks[0].lse && ranks[0].lse_plan && !ranks[0].tokens) {
            int64_t hb, hc, b[2], n[2];
            int ns = uly_plan_lse_layout(&c->pb->plan, c->N, c->H, r, &hb, &hc, b, n);
            view_from_segments(c, &c->lview[r], ns, b, n, t);
            c->lview[r].hb = hb;
            c->lview[r].hc = hc;
            t += c->lview[r].rows;
        } else
            c->lview[r] = c->view[r];
    }
    return ULY_OK;
}

/* Copy rank r's rows of a token-major tensor (B, rows, Hx, d) into the
 * global one; a non-finite input is refused. */
static int gather(const chk_ctx *c, int r, const chk_view *v, const double *src, int64_t Hx, double *dst,
                  const char *name, int input)
{
    const int64_t w = Hx * c->d;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t i = 0; i < v->rows; i++) {
            const double *s = src + (size_t)((b * v->rows + i) * w);
            if (input)
                for (int64_t e = 0; e < w; e++)
                    if (!(s[e] - s[e] == 0))
                        return uly_set_error(ULY_EINVAL,
                                             "rank %d: %s has a non-finite value (batch %lld, row %lld, head %lld)",
                                             r, name, (long long)b, (long long)i, (long long)(e / c->d));
            memcpy(dst + (size_t)((b * c->N + v->tok[i]) * w), s, (size_t)w * sizeof *dst);
        }
    return ULY_OK;
}

static int reassemble(chk_ctx *c, const uly_check_rank *ranks, const int *present)
{
    const size_t nq = (size_t)(c->B * c->N * c->H * c->d), nk = (size_t)(c->B * c->N * c->Hkv * c->d);
    const size_t nl = (size_t)(c->B * c->H * c->N);
    const int bwd = ranks[0].dout != NULL;
    c->q = uly_malloc(nq * sizeof(double));
    c->k = uly_malloc(nk * sizeof(double));
    c->v = uly_malloc(nk * sizeof(double));
    c->dout = bwd ? uly_malloc(nq * sizeof(double)) : NULL;
    const size_t n_of[ULY_CHK_NT] = {nq, nl, nq, nk, nk};
    int fail = !c->q || !c->k || !c->v || (bwd && !c->dout);
    for (int t = 0; t < ULY_CHK_NT; t++) {
        if (t <= ULY_CHK_LSE || bwd)
            fail |= !(c->ref[t] = uly_malloc(n_of[t] * sizeof(double)));
        if (present[t])
            fail |= !(c->got[t] = uly_malloc(n_of[t] * sizeof(double)));
    }
    if (fail)
        return uly_set_error(ULY_ENOMEM, "check: cannot allocate the global tensors (B %lld, N %lld, H %lld, d %lld)",
                             (long long)c->B, (long long)c->N, (long long)c->H, (long long)c->d);
    for (int r = 0; r < c->P; r++) {
        const uly_check_rank *R = &ranks[r];
        const chk_view *v = &c->view[r];
        int rc = gather(c, r, v, R->q, c->H, c->q, "q", 1);
        if (!rc)
            rc = gather(c, r, v, R->k, c->Hkv, c->k, "k", 1);
        if (!rc)
            rc = gather(c, r, v, R->v, c->Hkv, c->v, "v", 1);
        if (!rc && bwd)
            rc = gather(c, r, v, R->dout, c->H, c->dout, "do", 1);
        if (!rc && R->o)
            rc = gather(c, r, v, R->o, c->H, c->got[ULY_CHK_O], "o", 0);
        if (!rc && R->dq)
            rc = gather(c, r, v, R->dq, c->H, c->got[ULY_CHK_DQ], "dq", 0);
        if (!rc && R->dk)
            rc = gather(c, r, v, R->dk, c->Hkv, c->got[ULY_CHK_DK], "dk", 0);
        if (!rc && R->dv)
            rc = gather(c, r, v, R->dv, c->Hkv, c->got[ULY_CHK_DV], "dv", 0);
        if (rc)
            return rc;
        if (R->lse) {
            const chk_view *l = &c->lview[r];
            for (int64_t b = 0; b < c->B; b++)
                for (int64_t h = 0; h < l->hc; h++)
                    for (int64_t i = 0; i < l->rows; i++)
                        c->got[ULY_CHK_LSE][(size_t)((b * c->H + l->hb + h) * c->N + l->tok[i])] =
                            R->lse[(size_t)((b * l->hc + h) * l->rows + i)];
        }
    }
    int rc = uly_ref_fwd(&c->a, c->q, c->k, c->v, c->ref[ULY_CHK_O], c->ref[ULY_CHK_LSE]);
    if (!rc && bwd)
        rc = uly_ref_bwd(&c->a, c->q, c->k, c->v, c->dout, c->ref[ULY_CHK_DQ], c->ref[ULY_CHK_DK],
                         c->ref[ULY_CHK_DV]);
    return rc;
}

/* ------------------------------------------------------------- cells */

/* Heads of group g for tensor t, intersected with view heads. */
static void cell_heads(const chk_ctx *c, int t, int g, const chk_view *v, int64_t *hb, int64_t *hc)
{
    int64_t b = c->gb[g], n = c->gc[g];
    if (t == ULY_CHK_DK || t == ULY_CHK_DV) {
        uly_kv_range(&c->a, b, n, hb, hc);
        return;
    }
    int64_t lo = b > v->hb ? b : v->hb, hi = b + n < v->hb + v->hc ? b + n : v->hb + v->hc;
    *hb = lo;
    *hc = hi > lo ? hi - lo : 0;
}

static void cell_eval(const chk_ctx *c, const uly_check_report *rep, const chk_view *v, uly_check_cell *cell,
                      double *w16)
{
    const int t = cell->tensor;
    const chk_seg *s = &v->seg[cell->seg];
    const double *x = c->got[t], *y = c->ref[t];
    const double at = rep->atol[t], rt = rep->rtol[t], at16 = c->atol16[t], rt16 = c->rtol16[t];
    const int64_t w = chk_width(c, t);
    double worst16 = 0;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t i = s->row0; i < s->row0 + s->rows; i++)
            for (int64_t h = cell->head_begin; h < cell->head_begin + cell->head_count; h++) {
                const size_t o = chk_at(c, t, b, v->tok[i], h);
                for (int64_t e = 0; e < w; e++) {
                    const double xv = x[o + e], yv = y[o + e];
                    const double ratio = chk_ratio(xv, yv, at, rt);
                    cell->n++;
                    if (!(xv - xv == 0))
                        cell->nonfinite++;
                    if (!(ratio <= 1))
                        cell->bad++;
                    const double err = fabs(xv - yv);
                    if (err > cell->max_err || (!(err == err) && cell->max_err == cell->max_err)) {
                        cell->max_err = err == err ? err : INFINITY;
                        cell->ref_at_max = fabs(yv);
                    }
                    if (ratio > cell->worst)
                        cell->worst = ratio;
                    const double r16 = chk_ratio(xv, yv, at16, rt16);
                    if (r16 > worst16)
                        worst16 = r16;
                }
            }
    *w16 = worst16;
}

static int make_cells(chk_ctx *c, uly_check_report *rep)
{
    int n = 0;
    for (int pass = 0; pass < 2; pass++) {
        n = 0;
        for (int t = 0; t < ULY_CHK_NT; t++) {
            if (!rep->present[t])
                continue;
            for (int r = 0; r < c->P; r++) {
                const chk_view *v = chk_view_of(c, t, r);
                for (int s = 0; s < v->nseg; s++) {
                    if (v->seg[s].rows == 0 && v->rows > 0)
                        continue;
                    for (int g = 0; g < c->ngroups; g++) {
                        int64_t hb, hc;
                        cell_heads(c, t, g, v, &hb, &hc);
                        if (hc == 0)
                            continue;
                        if (pass == 1) {
                            uly_check_cell *cell = &rep->cells[n];
                            memset(cell, 0, sizeof *cell);
                            cell->tensor = t;
                            cell->rank = r;
                            cell->seg = s;
                            cell->chunk = v->seg[s].chunk;
                            cell->tok_begin = v->seg[s].tok_begin;
                            cell->tok_count = v->seg[s].tok_count;
                            cell->head_begin = hb;
                            cell->head_count = hc;
                            cell_eval(c, rep, v, cell, &c->worst16[n]);
                        }
                        n++;
                    }
                }
            }
        }
        if (pass == 0) {
            rep->cells = uly_calloc((size_t)n + 1, sizeof *rep->cells);
            c->worst16 = uly_calloc((size_t)n + 1, sizeof *c->worst16);
            if (!rep->cells || !c->worst16)
                return uly_set_error(ULY_ENOMEM, "check: cannot allocate %d report cells", n);
        }
    }
    rep->ncells = n;
    return ULY_OK;
}

/* ----------------------------------------------------------- balance */

/* Visible (query, key) pairs of the tokens in tok[0..n) against every key,
 * over the batch rows, run by run. */
static double token_pairs(const chk_ctx *c, const int64_t *tok, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n;) {
        int64_t j = i + 1;
        while (j < n && tok[j] == tok[j - 1] + 1)
            j++;
        for (int64_t b = 0; b < c->B; b++)
            s += (double)uly_attn_pairs_range(&c->a, b, tok[i], j - i, 0, c->N);
        i = j;
    }
    return s;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

static double max_over_mean(const double *w, int P)
{
    double m = 0, s = 0;
    for (int r = 0; r < P; r++) {
        s += w[r];
        if (w[r] > m)
            m = w[r];
    }
    return s > 0 ? m / (s / P) : 1;
}

static int balance(const chk_ctx *c, const uly_check_rank *ranks, uly_check_report *rep)
{
    const int P = c->P;
    const uly_sp_plan *p = &c->pb->plan;
    rep->P = P;
    rep->work = uly_calloc((size_t)P, sizeof *rep->work);
    double *own = uly_calloc((size_t)P, sizeof *own);
    if (!rep->work || !own) {
        uly_free(own);
        return uly_set_error(ULY_ENOMEM, "check: cannot allocate the balance of %d ranks", P);
    }
    for (int r = 0; r < P; r++) {
        uly_rank_part part;
        uly_layout_part(&c->L, r, &part);
        for (int t = 0; t < uly_plan_steps(p); t++)
            own[r] += uly_plan_step_pairs(&c->a, p, r, t) * (double)part.head_count;
        rep->work[r] = own[r];
    }
    if (ranks[0].tokens && p->method != ULY_METHOD_ULYSSES) {
        if (c->traits & ULY_TRAIT_A2A) {
            /* usp: a rank computes its heads over its group's tokens */
            int64_t *gt = uly_malloc((size_t)c->N * sizeof *gt);
            if (!gt) {
                uly_free(own);
                return uly_set_error(ULY_ENOMEM, "check: cannot allocate a group's tokens");
            }
            for (int r = 0; r < P; r++) {
                uly_rank_part part;
                uly_layout_part(&c->L, r, &part);
                int64_t n = 0;
                for (int s = 0; s < P; s++) {
                    int us, js;
                    uly_plan_grid(p, s, &us, &js);
                    if (js != part.j)
                        continue;
                    memcpy(gt + n, c->view[s].tok, (size_t)c->view[s].rows * sizeof *gt);
                    n += c->view[s].rows;
                }
                qsort(gt, (size_t)n, sizeof *gt, cmp_i64);
                rep->work[r] = token_pairs(c, gt, n) * (double)part.head_count;
            }
            uly_free(gt);
        } else {
            for (int r = 0; r < P; r++) {
                /* the runs of its tokens, sorted (the order of rows does not change the work) */
                int64_t *st = uly_malloc((size_t)(c->view[r].rows + 1) * sizeof *st);
                if (!st) {
                    uly_free(own);
                    return uly_set_error(ULY_ENOMEM, "check: cannot allocate a rank's tokens");
                }
                memcpy(st, c->view[r].tok, (size_t)c->view[r].rows * sizeof *st);
                qsort(st, (size_t)c->view[r].rows, sizeof *st, cmp_i64);
                rep->work[r] = token_pairs(c, st, c->view[r].rows) * (double)c->H;
                uly_free(st);
            }
        }
    }
    rep->imbalance = max_over_mean(rep->work, P);
    rep->imbalance_ref = max_over_mean(own, P);
    uly_free(own);
    rep->imbalance_bound = c->pb->max_imbalance > 0 ? c->pb->max_imbalance
                                                    : fmax(1.10, 1.05 * rep->imbalance_ref);
    return ULY_OK;
}

/* ---------------------------------------------------------------- run */

static void ctx_free(chk_ctx *c)
{
    uly_free(c->gb);
    uly_free(c->q);
    uly_free(c->k);
    uly_free(c->v);
    uly_free(c->dout);
    for (int t = 0; t < ULY_CHK_NT; t++) {
        uly_free(c->ref[t]);
        uly_free(c->got[t]);
    }
    uly_free(c->tokbuf);
    uly_free(c->view);
    uly_free(c->lview);
    uly_free(c->worst16);
}

static int check_run(chk_ctx *c, const uly_check_problem *pb, const uly_check_rank *ranks, uly_check_report *rep)
{
    c->pb = pb;
    c->a = pb->a;
    c->a.dtype = ULY_F64;
    int rc = uly_layout_init(&c->L, &c->a, &pb->plan);
    if (rc)
        return rc;
    c->P = pb->plan.P;
    c->traits = uly_method_traits(pb->plan.method);
    c->B = c->a.batch;
    c->N = c->a.seq;
    c->H = c->a.heads;
    c->Hkv = c->a.kv_heads;
    c->d = c->a.head_dim;
    if (!(pb->max_imbalance >= 0) || !(pb->atol_scale >= 0) || !isfinite(pb->max_imbalance) ||
        !isfinite(pb->atol_scale))
        return uly_set_error(ULY_EINVAL, "check: max_imbalance and atol_scale must be finite and >= 0");
    if (pb->max_imbalance > 0 && pb->max_imbalance < 1)
        return uly_set_error(ULY_EINVAL, "check: max_imbalance %g is below 1 (max / mean is at least 1)",
                             pb->max_imbalance);
    const double scale = pb->atol_scale > 0 ? pb->atol_scale : 1;
    for (int t = 0; t < ULY_CHK_NT; t++) {
        if ((rc = uly_check_tolerance(pb->elem, t, &rep->atol[t], &rep->rtol[t])))
            return rc;
        uly_check_tolerance(ULY_ELEM_BF16, t, &c->atol16[t], &c->rtol16[t]);
        rep->atol[t] *= scale;
        rep->rtol[t] *= scale;
        c->atol16[t] *= scale;
        c->rtol16[t] *= scale;
    }
    if ((rc = check_presence(c, ranks)))
        return rc;
    rep->present[ULY_CHK_O] = ranks[0].o != NULL;
    rep->present[ULY_CHK_LSE] = ranks[0].lse != NULL;
    rep->present[ULY_CHK_DQ] = ranks[0].dq != NULL;
    rep->present[ULY_CHK_DK] = ranks[0].dk != NULL;
    rep->present[ULY_CHK_DV] = ranks[0].dv != NULL;
    /* head groups */
    if (c->Hkv < c->H) {
        c->ngroups = (int)c->Hkv;
    } else {
        c->ngroups = c->P < c->H ? c->P : (int)c->H;
    }
    c->gb = uly_malloc(2 * (size_t)c->ngroups * sizeof *c->gb);
    if (!c->gb)
        return uly_set_error(ULY_ENOMEM, "check: cannot allocate %d head groups", c->ngroups);
    c->gc = c->gb + c->ngroups;
    for (int g = 0; g < c->ngroups; g++) {
        if (c->Hkv < c->H) {
            c->gc[g] = c->H / c->Hkv;
            c->gb[g] = g * c->gc[g];
        } else
            uly_split(c->H, c->ngroups, g, &c->gb[g], &c->gc[g]);
    }
    if ((rc = build_views(c, ranks)) || (rc = reassemble(c, ranks, rep->present)) || (rc = make_cells(c, rep)) ||
        (rc = balance(c, ranks, rep)))
        return rc;
    int bad = 0;
    for (int i = 0; i < rep->ncells; i++)
        bad |= rep->cells[i].bad > 0;
    if (bad) {
        rep->pass = 0;
        return uly_check_diagnose(c, rep);
    }
    if (rep->imbalance > rep->imbalance_bound * (1 + 1e-12)) {
        int worst = 0;
        for (int r = 1; r < c->P; r++)
            if (rep->work[r] > rep->work[worst])
                worst = r;
        double mean = 0;
        for (int r = 0; r < c->P; r++)
            mean += rep->work[r] / c->P;
        rep->pass = 0;
        rep->defect = ULY_DEFECT_IMBALANCE;
        snprintf(rep->where, sizeof rep->where, "rank %d", worst);
        snprintf(rep->summary, sizeof rep->summary,
                 "rank %d: every tensor right, but it computes %.3gx the mean work (max / mean %.3f, bound %.3f; the "
                 "%s map's own %.3f): the shard map is imbalanced",
                 worst, rep->work[worst] / mean, rep->imbalance, rep->imbalance_bound,
                 uly_method_name(pb->plan.method), rep->imbalance_ref);
        snprintf(rep->evidence, sizeof rep->evidence,
                 "unmasked (head, query, key) triples: rank %d %.0f, mean %.0f over %d ranks", worst,
                 rep->work[worst], mean, c->P);
        return ULY_OK;
    }
    rep->pass = 1;
    rep->defect = ULY_DEFECT_NONE;
    snprintf(rep->summary, sizeof rep->summary,
             "every tensor within tolerance on every rank; work max / mean %.3f within the bound %.3f",
             rep->imbalance, rep->imbalance_bound);
    return ULY_OK;
}

int uly_check_run(const uly_check_problem *pb, const uly_check_rank *ranks, uly_check_report *rep)
{
    if (!rep)
        return uly_set_error(ULY_EINVAL, "check: report pointer is NULL");
    memset(rep, 0, sizeof *rep);
    if (!pb || !ranks)
        return uly_set_error(ULY_EINVAL, "check: %s pointer is NULL", !pb ? "problem" : "ranks");
    chk_ctx c;
    memset(&c, 0, sizeof c);
    int rc = check_run(&c, pb, ranks, rep);
    ctx_free(&c);
    if (rc)
        uly_check_report_free(rep);
    return rc;
}

void uly_check_report_free(uly_check_report *rep)
{
    if (!rep)
        return;
    uly_free(rep->cells);
    uly_free(rep->work);
    rep->cells = NULL;
    rep->work = NULL;
    rep->ncells = 0;
}

/* --------------------------------------------------------------- JSON */

/* Cells listed in full up to this many; beyond it only the failing ones. */
#define CHK_JSON_ALL_CELLS 4096

static json_t *json_num(double x)
{
    return isfinite(x) ? json_real(x) : json_string(x > 0 ? "inf" : x < 0 ? "-inf" : "nan");
}

static json_t *cell_json(const uly_check_cell *c, double atol, double rtol)
{
    json_t *o = json_object();
    json_object_set_new(o, "tensor", json_string(uly_check_tensor_name(c->tensor)));
    json_object_set_new(o, "rank", json_integer(c->rank));
    json_object_set_new(o, "seg", json_integer(c->seg));
    json_object_set_new(o, "chunk", json_integer(c->chunk));
    json_object_set_new(o, "tok_begin", json_integer(c->tok_begin));
    json_object_set_new(o, "tok_count", json_integer(c->tok_count));
    json_object_set_new(o, "head_begin", json_integer(c->head_begin));
    json_object_set_new(o, "head_count", json_integer(c->head_count));
    json_object_set_new(o, "n", json_integer((json_int_t)c->n));
    json_object_set_new(o, "bad", json_integer((json_int_t)c->bad));
    json_object_set_new(o, "nonfinite", json_integer((json_int_t)c->nonfinite));
    json_object_set_new(o, "max_err", json_num(c->max_err));
    json_object_set_new(o, "ref_at_max", json_num(c->ref_at_max));
    json_object_set_new(o, "worst", json_num(c->worst));
    json_object_set_new(o, "tolerance", json_num(atol + rtol * c->ref_at_max));
    json_object_set_new(o, "pass", json_boolean(c->bad == 0));
    return o;
}

char *uly_check_report_json(const uly_check_problem *pb, const uly_check_report *rep)
{
    if (!pb || !rep)
        return NULL;
    json_t *root = json_object();
    json_t *prob = json_object();
    const uly_attn_desc *a = &pb->a;
    json_object_set_new(prob, "batch", json_integer(a->batch));
    json_object_set_new(prob, "seq", json_integer(a->seq));
    json_object_set_new(prob, "heads", json_integer(a->heads));
    json_object_set_new(prob, "kv_heads", json_integer(a->kv_heads));
    json_object_set_new(prob, "head_dim", json_integer(a->head_dim));
    json_object_set_new(prob, "causal", json_boolean(a->causal));
    json_object_set_new(prob, "window", json_integer(a->window));
    json_object_set_new(prob, "scale", json_real(uly_attn_scale(a)));
    json_object_set_new(prob, "docs", json_integer(a->doc_offsets ? a->docs : 0));
    json_object_set_new(prob, "method", json_string(uly_method_name(pb->plan.method)));
    json_object_set_new(prob, "ranks", json_integer(pb->plan.P));
    json_object_set_new(prob, "ulysses_degree", json_integer(pb->plan.U));
    json_object_set_new(prob, "ring_degree", json_integer(pb->plan.R));
    json_object_set_new(prob, "placement", json_string(uly_placement_name(pb->plan.placement)));
    json_object_set_new(prob, "dtype", json_string(uly_check_elem_name(pb->elem)));
    json_object_set_new(root, "problem", prob);

    json_t *tol = json_object(), *sums = json_object();
    for (int t = 0; t < ULY_CHK_NT; t++) {
        if (!rep->present[t])
            continue;
        json_t *o = json_object();
        json_object_set_new(o, "atol", json_real(rep->atol[t]));
        json_object_set_new(o, "rtol", json_real(rep->rtol[t]));
        json_object_set_new(tol, uly_check_tensor_name(t), o);
        uint64_t n = 0, bad = 0, nf = 0;
        double worst = 0, maxe = 0;
        int cells = 0, badcells = 0;
        for (int i = 0; i < rep->ncells; i++) {
            const uly_check_cell *c = &rep->cells[i];
            if (c->tensor != t)
                continue;
            cells++;
            badcells += c->bad > 0;
            n += c->n;
            bad += c->bad;
            nf += c->nonfinite;
            if (c->worst > worst)
                worst = c->worst;
            if (c->max_err > maxe)
                maxe = c->max_err;
        }
        json_t *s = json_object();
        json_object_set_new(s, "cells", json_integer(cells));
        json_object_set_new(s, "failing_cells", json_integer(badcells));
        json_object_set_new(s, "n", json_integer((json_int_t)n));
        json_object_set_new(s, "bad", json_integer((json_int_t)bad));
        json_object_set_new(s, "nonfinite", json_integer((json_int_t)nf));
        json_object_set_new(s, "max_err", json_num(maxe));
        json_object_set_new(s, "worst", json_num(worst));
        json_object_set_new(s, "pass", json_boolean(bad == 0));
        json_object_set_new(sums, uly_check_tensor_name(t), s);
    }
    json_object_set_new(root, "tolerances", tol);
    json_object_set_new(root, "tensors", sums);
    const int all = rep->ncells <= CHK_JSON_ALL_CELLS;
    json_t *cells = json_array();
    for (int i = 0; i < rep->ncells; i++)
        if (all || rep->cells[i].bad)
            json_array_append_new(cells, cell_json(&rep->cells[i], rep->atol[rep->cells[i].tensor],
                                                   rep->rtol[rep->cells[i].tensor]));
    json_object_set_new(root, "ncells", json_integer(rep->ncells));
    json_object_set_new(root, "cells_listed", json_string(all ? "all" : "failing"));
    json_object_set_new(root, "cells", cells);
    json_object_set_new(root, "verdict", json_string(rep->pass ? "pass" : "fail"));
    json_object_set_new(root, "defect", json_string(uly_defect_name(rep->defect)));
    json_object_set_new(root, "where", json_string(rep->where));
    json_object_set_new(root, "summary", json_string(rep->summary));
    json_object_set_new(root, "evidence", json_string(rep->evidence));
    json_t *bal = json_object(), *work = json_array();
    for (int r = 0; r < rep->P && rep->work; r++)
        json_array_append_new(work, json_real(rep->work[r]));
    json_object_set_new(bal, "work", work);
    json_object_set_new(bal, "imbalance", json_real(rep->imbalance));
    json_object_set_new(bal, "imbalance_ref", json_real(rep->imbalance_ref));
    json_object_set_new(bal, "bound", json_real(rep->imbalance_bound));
    json_object_set_new(root, "balance", bal);
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!text)
        return NULL;
    const size_t n = strlen(text) + 1;
    char *out = uly_malloc(n);
    if (out)
        memcpy(out, text, n);
    free(text);
    return out;
}
