/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_diag.c -- naming the defect of a failed check (doc/check.md
 * "Defect classes").  Each hypothesis is a test against the data, tried in
 * the order of the ULY_DEFECT_* enum, most specific first: the first that
 * fits names the class, the localisation (ranks, tokens, heads), a
 * one-sentence summary and the evidence it measured.  The tests recompute
 * attention rows in float64 the way the defect would have computed them
 * (keys of the rank's own tokens only, no document mask, another KV head)
 * and compare with the tolerances of the check.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "check_impl.h"

static const char *const disp[ULY_CHK_NT] = {"O", "LSE", "dQ", "dK", "dV"};

/* ------------------------------------------------------------- text */

static void appendf(char *buf, size_t len, const char *fmt, ...) ULY_PRINTF(3, 4);
static void appendf(char *buf, size_t len, const char *fmt, ...)
{
    size_t n = strlen(buf);
    if (n + 1 >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, len - n, fmt, ap);
    va_end(ap);
}

/* "4-7" / "1, 5-6" from flags over [0, n). */
static void ranges_text(const int *flag, int64_t n, char *buf, size_t len)
{
    buf[0] = 0;
    int first = 1;
    for (int64_t i = 0; i < n; i++) {
        if (!flag[i])
            continue;
        int64_t j = i;
        while (j + 1 < n && flag[j + 1])
            j++;
        if (j > i)
            appendf(buf, len, "%s%lld-%lld", first ? "" : ", ", (long long)i, (long long)j);
        else
            appendf(buf, len, "%s%lld", first ? "" : ", ", (long long)i);
        first = 0;
        i = j;
    }
}

void uly_check_ranks_text(const int *flag, int P, const char *one, const char *many, char *buf, size_t len)
{
    int n = 0;
    for (int r = 0; r < P; r++)
        n += flag[r] != 0;
    char rs[256];
    ranges_text(flag, P, rs, sizeof rs);
    snprintf(buf, len, "%s %s", n == 1 ? one : many, rs);
}

static int tensor_wrong(const uly_check_report *rep, int t)
{
    for (int i = 0; i < rep->ncells; i++)
        if (rep->cells[i].tensor == t && rep->cells[i].bad)
            return 1;
    return 0;
}

/* "dK and dV wrong, O and dQ right" */
static void wrong_right(const uly_check_report *rep, const int *wrong, char *buf, size_t len)
{
    buf[0] = 0;
    for (int pass = 0; pass < 2; pass++) {
        int n = 0, k = 0;
        for (int t = 0; t < ULY_CHK_NT; t++)
            n += rep->present[t] && (pass ? !wrong[t] : wrong[t]);
        if (n == 0)
            continue;
        if (pass && buf[0])
            appendf(buf, len, ", ");
        for (int t = 0; t < ULY_CHK_NT; t++) {
            if (!rep->present[t] || (pass ? wrong[t] : !wrong[t]))
                continue;
            k++;
            appendf(buf, len, "%s%s", k == 1 ? "" : k == n ? " and " : ", ", disp[t]);
        }
        appendf(buf, len, pass ? " right" : " wrong");
    }
}

/* Whether head h of a cell has an element beyond tolerance. */
static int cell_head_bad(const chk_ctx *c, const uly_check_report *rep, const uly_check_cell *cell, int64_t h)
{
    const int t = cell->tensor;
    const chk_view *v = chk_view_of(c, t, cell->rank);
    const chk_seg *s = &v->seg[cell->seg];
    const int64_t w = chk_width(c, t);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t i = s->row0; i < s->row0 + s->rows; i++) {
            const size_t o = chk_at(c, t, b, v->tok[i], h);
            for (int64_t e = 0; e < w; e++)
                if (!(chk_ratio(c->got[t][o + e], c->ref[t][o + e], rep->atol[t], rep->rtol[t]) <= 1))
                    return 1;
        }
    return 0;
}

/* The localisation of the failing cells of the tensors in tmask (bit t). */
static void where_text(const chk_ctx *c, const uly_check_report *rep, unsigned tmask, char *buf, size_t len)
{
    int rflag[4096] = {0};
    const int P = c->P < 4096 ? c->P : 4096;
    const unsigned qmask = tmask & ((1u << ULY_CHK_O) | (1u << ULY_CHK_LSE) | (1u << ULY_CHK_DQ));
    const unsigned hmask = qmask ? qmask : tmask;
    const int64_t nh = qmask ? c->H : c->Hkv;
    int hflag[1024] = {0};
    /* failing segments (rank, seg) of the token-major tensors, LSE's if only it fails */
    typedef struct { int64_t b, n; int chunk, rank, seg; } tseg;
    tseg segs[8];
    int nsegs = 0, more = 0, nfail_rs = 0, all_rs = 0;
    unsigned smask = tmask & ~(1u << ULY_CHK_LSE) ? tmask & ~(1u << ULY_CHK_LSE) : tmask;
    for (int r = 0; r < c->P; r++) {
        const int lse_only = smask == (1u << ULY_CHK_LSE);
        const chk_view *v = lse_only ? &c->lview[r] : &c->view[r];
        int rank_fails = 0;
        for (int s = 0; s < v->nseg; s++) {
            int fails = 0;
            for (int i = 0; i < rep->ncells; i++) {
                const uly_check_cell *x = &rep->cells[i];
                if (x->bad && x->rank == r && x->seg == s && (smask >> x->tensor & 1u))
                    fails = 1;
            }
            if (!lse_only || v->seg[s].rows)
                all_rs++;
            if (!fails)
                continue;
            rank_fails = 1;
            nfail_rs++;
            if (nsegs < 8)
                segs[nsegs++] = (tseg){v->seg[s].tok_begin, v->seg[s].tok_count, v->seg[s].chunk, r, s};
            else
                more = 1;
        }
        if (r < P)
            rflag[r] = rank_fails;
    }
    int nranks = 0;
    for (int r = 0; r < P; r++)
        nranks += rflag[r];
    /* heads */
    for (int i = 0; i < rep->ncells; i++) {
        const uly_check_cell *x = &rep->cells[i];
        if (!x->bad || !(hmask >> x->tensor & 1u))
            continue;
        for (int64_t h = x->head_begin; h < x->head_begin + x->head_count && h < 1024; h++)
            if (!hflag[h] && cell_head_bad(c, rep, x, h))
                hflag[h] = 1;
    }
    int allh = 1;
    for (int64_t h = 0; h < nh && h < 1024; h++)
        allh &= hflag[h];
    buf[0] = 0;
    if (nranks == c->P && c->P > 1)
        appendf(buf, len, "every rank");
    else {
        char rt[300];
        uly_check_ranks_text(rflag, P, "rank", "ranks", rt, sizeof rt);
        appendf(buf, len, "%s", rt);
    }
    /* tokens: sort the listed segments by position */
    for (int i = 1; i < nsegs; i++)
        for (int j = i; j > 0 && segs[j].b < segs[j - 1].b; j--) {
            tseg t = segs[j];
            segs[j] = segs[j - 1];
            segs[j - 1] = t;
        }
    if (nsegs == 0)
        ; /* nothing to localise in tokens */
    else if (nfail_rs == all_rs && c->P > 1 && nranks == c->P)
        appendf(buf, len, ", all tokens");
    else if (!more && nsegs <= 4) {
        appendf(buf, len, ", tokens ");
        for (int i = 0; i < nsegs; i++) {
            appendf(buf, len, "%s%lld-%lld", i ? ", " : "", (long long)segs[i].b, (long long)(segs[i].b + segs[i].n - 1));
            if (segs[i].chunk >= 0)
                appendf(buf, len, " (%s chunk %d)", c->pb->plan.zigzag ? "zigzag" : "ring", segs[i].chunk);
        }
    } else
        appendf(buf, len, ", tokens in %d segments (from %lld)", nfail_rs, (long long)segs[0].b);
    if (allh)
        appendf(buf, len, ", all %sheads", qmask || c->Hkv == c->H ? "" : "KV ");
    else {
        char ht[400];
        ranges_text(hflag, nh < 1024 ? nh : 1024, ht, sizeof ht);
        int n = 0;
        for (int64_t h = 0; h < nh && h < 1024; h++)
            n += hflag[h];
        appendf(buf, len, ", %s%s %s", qmask || c->Hkv == c->H ? "" : "KV ", n == 1 ? "head" : "heads", ht);
    }
}

/* The failing tensors as a mask, and their flags. */
static unsigned wrong_mask(const uly_check_report *rep, int *wrong)
{
    unsigned m = 0;
    for (int t = 0; t < ULY_CHK_NT; t++) {
        wrong[t] = rep->present[t] && tensor_wrong(rep, t);
        if (wrong[t])
            m |= 1u << t;
    }
    return m;
}

static void set_result(const chk_ctx *c, uly_check_report *rep, int defect, unsigned tmask, const char *phrase)
{
    int wrong[ULY_CHK_NT];
    wrong_mask(rep, wrong);
    rep->defect = defect;
    where_text(c, rep, tmask, rep->where, sizeof rep->where);
    char wr[256];
    wrong_right(rep, wrong, wr, sizeof wr);
    snprintf(rep->summary, sizeof rep->summary, "%s: %s: %s", rep->where, wr, phrase);
}

/* ------------------------------------------------------ row recompute */

typedef struct diag_row {
    const chk_ctx *c;
    uly_attn_desc a;        /* with or without documents */
    double *s;              /* (N) scores */
    const unsigned char *keys; /* (N) allowed keys, or NULL */
} diag_row;

/* O of query (b, i, head h) attending KV head kvh: out (d). */
static void attend(diag_row *D, int64_t b, int64_t i, int64_t h, int64_t kvh, double *out)
{
    const chk_ctx *c = D->c;
    const double scale = uly_attn_scale(&D->a);
    const double *qi = c->q + (size_t)(((b * c->N + i) * c->H + h) * c->d);
    double m = -INFINITY;
    for (int64_t j = 0; j < c->N; j++) {
        D->s[j] = NAN;
        if ((D->keys && !D->keys[j]) || !uly_attn_visible_row(&D->a, b, i, j))
            continue;
        const double *kj = c->k + (size_t)(((b * c->N + j) * c->Hkv + kvh) * c->d);
        double acc = 0;
        for (int64_t e = 0; e < c->d; e++)
            acc += qi[e] * kj[e];
        D->s[j] = acc * scale;
        if (D->s[j] > m)
            m = D->s[j];
    }
    double l = 0;
    for (int64_t e = 0; e < c->d; e++)
        out[e] = 0;
    for (int64_t j = 0; j < c->N; j++) {
        if (D->s[j] != D->s[j])
            continue;
        const double p = exp(D->s[j] - m);
        l += p;
        const double *vj = c->v + (size_t)(((b * c->N + j) * c->Hkv + kvh) * c->d);
        for (int64_t e = 0; e < c->d; e++)
            out[e] += p * vj[e];
    }
    for (int64_t e = 0; l > 0 && e < c->d; e++)
        out[e] /= l;
}

/* Worst ratio of got O row (b, i, h) against alt (d). */
static double row_ratio(const chk_ctx *c, const uly_check_report *rep, int64_t b, int64_t i, int64_t h,
                        const double *alt)
{
    const double *x = c->got[ULY_CHK_O] + chk_at(c, ULY_CHK_O, b, i, h);
    double w = 0;
    for (int64_t e = 0; e < c->d; e++) {
        double r = chk_ratio(x[e], alt[e], rep->atol[ULY_CHK_O], rep->rtol[ULY_CHK_O]);
        if (!(r <= w))
            w = r;
    }
    return w;
}

static int row_bad(const chk_ctx *c, const uly_check_report *rep, int64_t b, int64_t i, int64_t h)
{
    return row_ratio(c, rep, b, i, h, c->ref[ULY_CHK_O] + chk_at(c, ULY_CHK_O, b, i, h)) > 1;
}

/* ---------------------------------------------------------- hypotheses */

/* A test returns 1 when its hypothesis fits, 0 when not, -1 when it could
 * not allocate (the message set): the diagnosis then fails with ENOMEM
 * rather than name another class. */
static int nomem(const char *what)
{
    uly_set_error(ULY_ENOMEM, "check: cannot allocate %s", what);
    return -1;
}

/* Every failing cell of the tensors in tmask exactly zero. */
static int test_zero(const chk_ctx *c, const uly_check_report *rep, unsigned tmask, char *ev, size_t len)
{
    uint64_t n = 0;
    int cells = 0;
    double refmax = 0;
    for (int i = 0; i < rep->ncells; i++) {
        const uly_check_cell *x = &rep->cells[i];
        if (!x->bad || !(tmask >> x->tensor & 1u))
            continue;
        const int t = x->tensor;
        const chk_view *v = chk_view_of(c, t, x->rank);
        const chk_seg *s = &v->seg[x->seg];
        const int64_t w = chk_width(c, t);
        for (int64_t b = 0; b < c->B; b++)
            for (int64_t r = s->row0; r < s->row0 + s->rows; r++)
                for (int64_t h = x->head_begin; h < x->head_begin + x->head_count; h++) {
                    const size_t o = chk_at(c, t, b, v->tok[r], h);
                    for (int64_t e = 0; e < w; e++) {
                        if (c->got[t][o + e] != 0)
                            return 0;
                        if (fabs(c->ref[t][o + e]) > refmax)
                            refmax = fabs(c->ref[t][o + e]);
                    }
                }
        n += x->n;
        cells++;
    }
    snprintf(ev, len, "all %llu elements of the %d failing cells are exactly 0; the reference there reaches |ref| %.3g",
             (unsigned long long)n, cells, refmax);
    return cells > 0;
}

/* O on each failing rank equals attention over that rank's own tokens. */
static int test_no_sp(const chk_ctx *c, const uly_check_report *rep, char *ev, size_t len)
{
    int fails[4096] = {0};
    const int P = c->P < 4096 ? c->P : 4096;
    for (int i = 0; i < rep->ncells; i++)
        if (rep->cells[i].tensor == ULY_CHK_O && rep->cells[i].bad && rep->cells[i].rank < P)
            fails[rep->cells[i].rank] = 1;
    unsigned char *keys = uly_calloc((size_t)c->N, 1);
    double *s = uly_malloc((size_t)(c->N + c->d) * sizeof *s);
    if (!keys || !s) {
        uly_free(keys);
        uly_free(s);
        return nomem("the rows of a hypothesis test");
    }
    int fit = 1;
    double worst = 0, full = 0;
    for (int r = 0; r < P && fit; r++) {
        if (!fails[r])
            continue;
        const chk_view *v = &c->view[r];
        memset(keys, 0, (size_t)c->N);
        for (int64_t i = 0; i < v->rows; i++)
            keys[v->tok[i]] = 1;
        diag_row D = {.c = c, .a = c->a, .s = s, .keys = keys};
        double *out = s + c->N;
        for (int64_t b = 0; b < c->B && fit; b++)
            for (int64_t i = 0; i < v->rows && fit; i++)
                for (int64_t h = 0; h < c->H && fit; h++) {
                    const int64_t T = v->tok[i];
                    attend(&D, b, T, h, h / (c->H / c->Hkv), out);
                    double w = row_ratio(c, rep, b, T, h, out);
                    if (!(w <= 1))
                        fit = 0;
                    if (w > worst)
                        worst = w;
                    const double *ref = c->ref[ULY_CHK_O] + chk_at(c, ULY_CHK_O, b, T, h);
                    for (int64_t e = 0; e < c->d; e++)
                        full = fmax(full, fabs(ref[e] - out[e]));
                }
    }
    uly_free(keys);
    uly_free(s);
    if (fit) {
        char rt[300];
        uly_check_ranks_text(fails, P, "rank", "ranks", rt, sizeof rt);
        snprintf(ev, len,
                 "O equals attention over each rank's own tokens only (worst error / tolerance %.3g) on %s, where "
                 "the full attention differs from it by up to %.3g",
                 worst, rt, full);
    }
    return fit;
}

/* Every failing segment of tensor t holds the reference of another segment's tokens. */
static int test_chunk_swap(const chk_ctx *c, const uly_check_report *rep, int t, char *ev, size_t len,
                           char *phrase, size_t plen)
{
    const int64_t Hx = chk_heads(c, t), d = c->d;
    int found = 0, any = 0;
    ev[0] = 0;
    phrase[0] = 0;
    for (int r = 0; r < c->P; r++) {
        const chk_view *v = &c->view[r];
        for (int s = 0; s < v->nseg; s++) {
            int fails = 0;
            for (int i = 0; i < rep->ncells; i++)
                if (rep->cells[i].tensor == t && rep->cells[i].bad && rep->cells[i].rank == r &&
                    rep->cells[i].seg == s)
                    fails = 1;
            if (!fails)
                continue;
            any = 1;
            const chk_seg *g = &v->seg[s];
            int match = 0;
            for (int r2 = 0; r2 < c->P && !match; r2++) {
                const chk_view *v2 = &c->view[r2];
                for (int s2 = 0; s2 < v2->nseg && !match; s2++) {
                    const chk_seg *g2 = &v2->seg[s2];
                    if ((r2 == r && s2 == s) || g2->rows != g->rows || g->rows == 0)
                        continue;
                    int ok = 1;
                    for (int64_t b = 0; b < c->B && ok; b++)
                        for (int64_t i = 0; i < g->rows && ok; i++) {
                            const size_t ox = chk_at(c, t, b, v->tok[g->row0 + i], 0);
                            const size_t oy = chk_at(c, t, b, v2->tok[g2->row0 + i], 0);
                            for (int64_t e = 0; e < Hx * d && ok; e++)
                                ok = chk_ratio(c->got[t][ox + e], c->ref[t][oy + e], rep->atol[t], rep->rtol[t]) <= 1;
                        }
                    if (!ok)
                        continue;
                    match = 1;
                    if (found < 3) {
                        char lab[64] = "", lab2[64] = "";
                        if (g->chunk >= 0)
                            snprintf(lab, sizeof lab, " (%s chunk %d)", c->pb->plan.zigzag ? "zigzag" : "ring", g->chunk);
                        if (g2->chunk >= 0)
                            snprintf(lab2, sizeof lab2, " (%s chunk %d)", c->pb->plan.zigzag ? "zigzag" : "ring",
                                     g2->chunk);
                        appendf(ev, len, "%s%s of rank %d tokens %lld-%lld%s equals the reference of rank %d's tokens "
                                "%lld-%lld%s", found ? "; " : "", disp[t], r, (long long)g->tok_begin,
                                (long long)(g->tok_begin + g->tok_count - 1), lab, r2, (long long)g2->tok_begin,
                                (long long)(g2->tok_begin + g2->tok_count - 1), lab2);
                        if (!found)
                            snprintf(phrase, plen,
                                     "rank %d's tokens %lld-%lld%s hold the values of tokens %lld-%lld%s: chunks "
                                     "swapped in the shard map", r, (long long)g->tok_begin,
                                     (long long)(g->tok_begin + g->tok_count - 1), lab, (long long)g2->tok_begin,
                                     (long long)(g2->tok_begin + g2->tok_count - 1), lab2);
                    }
                    found++;
                }
            }
            if (!match)
                return 0;
        }
    }
    return any;
}

/* Every failing O row equals attention with another mask built by D. */
static int test_rows(const chk_ctx *c, const uly_check_report *rep, diag_row *D, int64_t *nrows, double *worst)
{
    double *out = D->s + c->N;
    *nrows = 0;
    *worst = 0;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t i = 0; i < c->N; i++)
            for (int64_t h = 0; h < c->H; h++) {
                if (!row_bad(c, rep, b, i, h))
                    continue;
                attend(D, b, i, h, h / (c->H / c->Hkv), out);
                const double w = row_ratio(c, rep, b, i, h, out);
                if (!(w <= 1))
                    return 0;
                if (w > *worst)
                    *worst = w;
                (*nrows)++;
            }
    return *nrows > 0;
}

static int test_doc_mask(const chk_ctx *c, const uly_check_report *rep, char *ev, size_t len)
{
    if (!c->a.doc_offsets || c->a.docs < 2)
        return 0;
    double *s = uly_malloc((size_t)(c->N + c->d) * sizeof *s);
    if (!s)
        return nomem("the rows of a hypothesis test");
    diag_row D = {.c = c, .a = c->a, .s = s, .keys = NULL};
    D.a.doc_offsets = NULL;
    D.a.docs = 0;
    int64_t n;
    double worst;
    int fit = test_rows(c, rep, &D, &n, &worst);
    uly_free(s);
    if (fit)
        snprintf(ev, len,
                 "the %lld failing (token, head) rows of O equal attention without the document mask (worst error / "
                 "tolerance %.3g); the dump has %lld documents per row", (long long)n, worst, (long long)c->a.docs);
    return fit;
}

/* A failing query head's O equals attention with another KV head. */
static int test_kv_head(const chk_ctx *c, const uly_check_report *rep, char *ev, size_t len, char *phrase,
                        size_t plen)
{
    if (c->Hkv < 2)
        return 0;
    enum { MAXROWS = 64 };
    double *s = uly_malloc((size_t)(c->N + c->d) * sizeof *s);
    int64_t *rows = uly_malloc((size_t)c->B * (size_t)c->N * sizeof *rows);
    if (!s || !rows) {
        uly_free(s);
        uly_free(rows);
        return nomem("the rows of a hypothesis test");
    }
    int fit = 1, nheads = 0;
    ev[0] = 0;
    phrase[0] = 0;
    diag_row D = {.c = c, .a = c->a, .s = s, .keys = NULL};
    const int64_t g = c->H / c->Hkv;
    for (int64_t h = 0; h < c->H && fit; h++) {
        int64_t n = 0;
        for (int64_t b = 0; b < c->B; b++)
            for (int64_t i = 0; i < c->N; i++)
                if (row_bad(c, rep, b, i, h))
                    rows[n++] = b * c->N + i;
        if (n == 0)
            continue;
        const int64_t step = n > MAXROWS ? n / MAXROWS : 1;
        int64_t used = -1;
        for (int64_t kv = 0; kv < c->Hkv && used < 0; kv++) {
            if (kv == h / g)
                continue;
            int ok = 1;
            for (int64_t k = 0; k < n && ok; k += step) {
                const int64_t b = rows[k] / c->N, i = rows[k] % c->N;
                attend(&D, b, i, h, kv, s + c->N);
                ok = row_ratio(c, rep, b, i, h, s + c->N) <= 1;
            }
            if (ok)
                used = kv;
        }
        if (used < 0) {
            fit = 0;
            break;
        }
        if (nheads < 4) {
            appendf(phrase, plen, "%squery head %lld attended KV head %lld, expected KV head %lld",
                    nheads ? "; " : "", (long long)h, (long long)used, (long long)(h / g));
            appendf(ev, len, "%shead %lld: its %lld failing rows of O equal attention with KV head %lld",
                    nheads ? "; " : "", (long long)h, (long long)n, (long long)used);
        }
        nheads++;
    }
    uly_free(s);
    uly_free(rows);
    if (fit && nheads) {
        appendf(phrase, plen, " (the GQA ratio %lld/%lld or the head padding)", (long long)c->H, (long long)c->Hkv);
        return 1;
    }
    return 0;
}

/* The head group of a token-major cell. */
static int cell_group(const chk_ctx *c, const uly_check_cell *x)
{
    for (int g = 0; g < c->ngroups; g++) {
        int64_t b = c->gb[g], n = c->gc[g];
        if (x->tensor == ULY_CHK_DK || x->tensor == ULY_CHK_DV)
            uly_kv_range(&c->a, b, n, &b, &n);
        if (x->head_begin == b && x->head_count > 0)
            return g;
    }
    return -1;
}

static int test_head_split(const chk_ctx *c, const uly_check_report *rep, char *ev, size_t len)
{
    if (c->ngroups < 2)
        return 0;
    unsigned char *fails = uly_calloc((size_t)c->ngroups * (size_t)(c->P + 1), 1); /* (groups, P + 1) */
    if (!fails)
        return nomem("the head groups' failures");
    unsigned char *gfail = fails + (size_t)c->ngroups * (size_t)c->P;
    for (int i = 0; i < rep->ncells; i++) {
        const uly_check_cell *x = &rep->cells[i];
        if (!x->bad || x->tensor == ULY_CHK_LSE)
            continue;
        int g = cell_group(c, x);
        if (g < 0)
            continue;
        fails[(size_t)g * (size_t)c->P + (size_t)x->rank] = 1;
        gfail[g] = 1;
    }
    int nfail = 0, every = 1;
    for (int g = 0; g < c->ngroups; g++) {
        if (!gfail[g])
            continue;
        nfail++;
        for (int r = 0; r < c->P; r++)
            every &= fails[(size_t)g * (size_t)c->P + (size_t)r];
    }
    uly_free(fails);
    if (!every || nfail == 0 || nfail == c->ngroups)
        return 0;
    snprintf(ev, len, "%d of %d head groups fail, each on all %d ranks; the other groups are within tolerance on "
             "every rank", nfail, c->ngroups, c->P);
    return 1;
}

/* Worst ratio of the failing cells under bf16's tolerances. */
static int test_precision(const chk_ctx *c, const uly_check_report *rep, char *ev, size_t len)
{
    if (c->pb->elem == ULY_ELEM_BF16)
        return 0;
    double w16 = 0, w = 0;
    for (int i = 0; i < rep->ncells; i++) {
        if (rep->cells[i].nonfinite)
            return 0;
        if (c->worst16[i] > w16)
            w16 = c->worst16[i];
        if (rep->cells[i].worst > w)
            w = rep->cells[i].worst;
    }
    if (!(w16 <= 1))
        return 0;
    snprintf(ev, len, "every error is within bf16's tolerance (worst error / bf16 tolerance %.3g) but up to %.3g "
             "times the %s tolerance", w16, w, uly_check_elem_name(c->pb->elem));
    return 1;
}

/* The worst failing cell in words. */
static void worst_text(const chk_ctx *c, const uly_check_report *rep, char *ev, size_t len)
{
    int k = -1;
    uint64_t bad = 0, n = 0, nf = 0;
    for (int i = 0; i < rep->ncells; i++) {
        const uly_check_cell *x = &rep->cells[i];
        n += x->n;
        bad += x->bad;
        nf += x->nonfinite;
        if (x->bad && (k < 0 || x->worst > rep->cells[k].worst))
            k = i;
    }
    if (k < 0) {
        ev[0] = 0;
        return;
    }
    const uly_check_cell *x = &rep->cells[k];
    const int kv = (x->tensor == ULY_CHK_DK || x->tensor == ULY_CHK_DV) && c->Hkv < c->H;
    char heads[64];
    if (x->head_count == 1)
        snprintf(heads, sizeof heads, "%shead %lld", kv ? "KV " : "", (long long)x->head_begin);
    else
        snprintf(heads, sizeof heads, "%sheads %lld-%lld", kv ? "KV " : "", (long long)x->head_begin,
                 (long long)(x->head_begin + x->head_count - 1));
    snprintf(ev, len,
             "%llu of %llu elements beyond tolerance (%llu non-finite); worst: %s on rank %d, tokens %lld-%lld, "
             "%s: |x - ref| = %.3g at |ref| %.3g, %.3g times the tolerance",
             (unsigned long long)bad, (unsigned long long)n, (unsigned long long)nf, disp[x->tensor], x->rank,
             (long long)x->tok_begin, (long long)(x->tok_begin + x->tok_count - 1), heads, x->max_err,
             x->ref_at_max, x->worst);
}

int uly_check_diagnose(const chk_ctx *c, uly_check_report *rep)
{
    int wrong[ULY_CHK_NT];
    const unsigned all = wrong_mask(rep, wrong);
    const unsigned om = 1u << ULY_CHK_O;
    char ev[1024] = "", phrase[512] = "";
    /* ZERO_OUTPUT */
    const unsigned zm = wrong[ULY_CHK_O] ? om : all;
    if (test_zero(c, rep, zm, ev, sizeof ev)) {
        char p[256];
        int t = 0;
        while (!(zm >> t & 1u))
            t++;
        snprintf(p, sizeof p, "%s is exactly zero where the reference is not: a kernel that returns zeros",
                 zm == om ? "O" : "every wrong tensor");
        (void)t;
        set_result(c, rep, ULY_DEFECT_ZERO_OUTPUT, zm, p);
        snprintf(rep->evidence, sizeof rep->evidence, "%s", ev);
        return ULY_OK;
    }
    int f = wrong[ULY_CHK_O] ? test_no_sp(c, rep, ev, sizeof ev) : 0;
    if (f < 0)
        return ULY_ENOMEM;
    if (f) {
        set_result(c, rep, ULY_DEFECT_NO_SP, om,
                   "attention over each rank's own tokens only: the layer runs without sequence parallelism");
        snprintf(rep->evidence, sizeof rep->evidence, "%s", ev);
        return ULY_OK;
    }
    int ts = -1;
    for (int t = ULY_CHK_O; t < ULY_CHK_NT && ts < 0; t++)
        if (t != ULY_CHK_LSE && wrong[t])
            ts = t;
    if (ts >= 0 && test_chunk_swap(c, rep, ts, ev, sizeof ev, phrase, sizeof phrase)) {
        set_result(c, rep, ULY_DEFECT_CHUNK_SWAP, 1u << ts, phrase);
        snprintf(rep->evidence, sizeof rep->evidence, "%s", ev);
        return ULY_OK;
    }
    f = wrong[ULY_CHK_O] ? test_doc_mask(c, rep, ev, sizeof ev) : 0;
    if (f < 0)
        return ULY_ENOMEM;
    if (f) {
        set_result(c, rep, ULY_DEFECT_DOC_MASK, om,
                   "attention across document boundaries: the documents are not masked");
        snprintf(rep->evidence, sizeof rep->evidence, "%s", ev);
        return ULY_OK;
    }
    f = wrong[ULY_CHK_O] ? test_kv_head(c, rep, ev, sizeof ev, phrase, sizeof phrase) : 0;
    if (f < 0)
        return ULY_ENOMEM;
    if (f) {
        set_result(c, rep, ULY_DEFECT_KV_HEAD, om, phrase);
        snprintf(rep->evidence, sizeof rep->evidence, "%s", ev);
        return ULY_OK;
    }
    if ((f = test_head_split(c, rep, ev, sizeof ev)) < 0)
        return ULY_ENOMEM;
    if (f) {
        set_result(c, rep, ULY_DEFECT_HEAD_SPLIT, all & ~(1u << ULY_CHK_LSE) ? all & ~(1u << ULY_CHK_LSE) : all,
                   "the other heads right on every rank: the head partition");
        snprintf(rep->evidence, sizeof rep->evidence, "%s", ev);
        return ULY_OK;
    }
    const unsigned kvm = (1u << ULY_CHK_DK) | (1u << ULY_CHK_DV);
    if (!wrong[ULY_CHK_O] && !wrong[ULY_CHK_LSE] && !wrong[ULY_CHK_DQ] && (all & kvm)) {
        set_result(c, rep, ULY_DEFECT_BACKWARD_KV, all & kvm, "backward-only defect in the K/V path");
        worst_text(c, rep, rep->evidence, sizeof rep->evidence);
        return ULY_OK;
    }
    if (!wrong[ULY_CHK_O] && wrong[ULY_CHK_DQ]) {
        set_result(c, rep, ULY_DEFECT_BACKWARD, all, "backward-only defect (the forward is right)");
        worst_text(c, rep, rep->evidence, sizeof rep->evidence);
        return ULY_OK;
    }
    if (test_precision(c, rep, ev, sizeof ev)) {
        set_result(c, rep, ULY_DEFECT_PRECISION, all, "errors at the bf16 level: partials or merges kept in bf16");
        snprintf(rep->evidence, sizeof rep->evidence, "%s", ev);
        return ULY_OK;
    }
    int badcells = 0;
    for (int i = 0; i < rep->ncells; i++)
        badcells += rep->cells[i].bad > 0;
    /* nearly everything wrong: as likely a problem description other than the dump's */
    set_result(c, rep, ULY_DEFECT_FORWARD, all & (om | (1u << ULY_CHK_LSE)) ? all & (om | (1u << ULY_CHK_LSE)) : all,
               10 * badcells >= 9 * rep->ncells
                   ? "a forward defect no known pattern fits, or a mask, shard map or layout other than the dump's "
                     "(check --method, --causal, --window, the documents and --layout)"
                   : "a forward defect no known pattern fits");
    worst_text(c, rep, rep->evidence, sizeof rep->evidence);
    return ULY_OK;
}
