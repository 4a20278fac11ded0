/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_impl.h -- what the checker's two halves share: the reassembled
 * problem (src/check.c) and the hypothesis tests that name a defect
 * (src/check_diag.c).  Not installed.
 */
#ifndef ULY_CHECK_IMPL_H
#define ULY_CHECK_IMPL_H

#include "internal.h"

/* Most token segments of one rank's view (runs of a token map beyond this
 * are merged into spans). */
#define CHK_MAXSEG 16

/* A segment: rows [row0, row0 + rows) of a view; their tokens span
 * [tok_begin, tok_begin + tok_count) (exactly those tokens unless merged). */
typedef struct chk_seg {
    int64_t row0, rows;
    int64_t tok_begin, tok_count;
    int chunk;
} chk_seg;

/* What one rank holds of one tensor: rows (global token of each row) and
 * query heads [hb, hb + hc) (all H except a planned LSE). */
typedef struct chk_view {
    int64_t rows;
    const int64_t *tok;  /* rows entries */
    int nseg;
    chk_seg seg[CHK_MAXSEG];
    int64_t hb, hc;
} chk_view;

typedef struct chk_ctx {
    const uly_check_problem *pb;
    uly_attn_desc a;      /* pb->a, dtype f64 */
    uly_layout L;
    int P, traits;
    int64_t B, N, H, Hkv, d;
    int ngroups;
    int64_t *gb, *gc;     /* head groups: query heads [gb[g], +gc[g]) */
    double *q, *k, *v, *dout;                      /* global, bshd */
    double *ref[ULY_CHK_NT], *got[ULY_CHK_NT];     /* global; LSE (B, H, N) */
    int64_t *tokbuf;      /* the rank token lists, concatenated */
    chk_view *view;       /* P views of the token-major tensors */
    chk_view *lview;      /* P views of the LSE */
    double atol16[ULY_CHK_NT], rtol16[ULY_CHK_NT]; /* bf16's tolerances */
    double *worst16;      /* per cell: worst ratio under bf16's tolerances */
} chk_ctx;

/* Heads of tensor t (KV heads for dK, dV). */
static inline int64_t chk_heads(const chk_ctx *c, int t)
{
    return t == ULY_CHK_DK || t == ULY_CHK_DV ? c->Hkv : c->H;
}
/* Width of one (token, head) row of tensor t: d, or 1 for the LSE. */
static inline int64_t chk_width(const chk_ctx *c, int t)
{
    return t == ULY_CHK_LSE ? 1 : c->d;
}
/* Offset of element e of (batch b, token i, head h) of global tensor t. */
static inline size_t chk_at(const chk_ctx *c, int t, int64_t b, int64_t i, int64_t h)
{
    if (t == ULY_CHK_LSE)
        return (size_t)((b * c->H + h) * c->N + i);
    return (size_t)(((b * c->N + i) * chk_heads(c, t) + h) * c->d);
}
static inline const chk_view *chk_view_of(const chk_ctx *c, int t, int r)
{
    return t == ULY_CHK_LSE ? &c->lview[r] : &c->view[r];
}

/* The ratio |x - ref| / (atol + rtol |ref|) (Inf for a non-finite x). */
static inline double chk_ratio(double x, double r, double atol, double rtol)
{
    if (!(x - x == 0))
        return INFINITY;
    double e = x > r ? x - r : r - x;
    return e / (atol + rtol * (r < 0 ? -r : r));
}

/* The compute types' names ("f16", "bf16", "f32", "f64"; "?" otherwise). */
static inline const char *uly_check_elem_name(int elem)
{
    switch (elem) {
    case ULY_ELEM_F16: return "f16";
    case ULY_ELEM_BF16: return "bf16";
    case ULY_ELEM_F32: return "f32";
    case ULY_ELEM_F64: return "f64";
    }
    return "?";
}

/* Fill rep->defect, where, summary, evidence (src/check_diag.c); rep's
 * cells and present[] are set, at least one cell fails. */
ULY_INTERNAL int uly_check_diagnose(const chk_ctx *c, uly_check_report *rep);
/* "ranks 1-3" / "rank 2" / "ranks 0, 2" from a P-entry flag array. */
ULY_INTERNAL void uly_check_ranks_text(const int *flag, int P, const char *one, const char *many, char *buf,
                                       size_t len);

#endif
