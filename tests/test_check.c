/* SPDX-License-Identifier: Apache-2.0 */
/* test_check.c -- the independent checker (ulysses_check.h): correct shards
 * of every method pass; planted defects get their class and localisation;
 * bad inputs are refused naming the rank and the tensor. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "ulysses.h"

#define MAXP 8

/* Fault injection hooks of src/error.c (exported for tests, not in the API). */
void uly_test_fail_alloc_at(long k);
long uly_test_alloc_count(void);

/* One problem, its global tensors (inputs, then what the ranks "computed":
 * the reference unless a test plants a defect) and the ranks' shards. */
typedef struct fx {
    uly_check_problem pb;
    tu_problem in;
    double *o, *lse, *dq, *dk, *dv;   /* global results, bshd; lse (B, H, N) */
    int64_t *tok[MAXP];               /* each rank's tokens */
    int64_t rows[MAXP];
    double *sh[MAXP][10];             /* q k v o lse do dq dk dv */
    uly_check_rank rk[MAXP];
    int use_tokens, lse_plan;
    int64_t offs[64];
} fx;

static uly_attn_desc desc(int64_t B, int64_t N, int64_t H, int64_t Hkv, int64_t d, int causal)
{
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = B; a.seq = N; a.heads = H; a.kv_heads = Hkv; a.head_dim = d;
    a.causal = causal;
    a.dtype = ULY_F64;
    return a;
}

static void fx_init(fx *f, const uly_attn_desc *a, int method, int P, int U, int elem, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    f->pb.a = *a;
    ck_assert_int_eq(uly_sp_plan_init(&f->pb.plan, method, P, U, ULY_PLACE_ULYSSES_INNER), ULY_OK);
    f->pb.elem = elem;
    tu_problem_init(&f->in, a, seed);
    f->o = malloc(f->in.nq * sizeof(double));
    f->lse = malloc(f->in.nlse * sizeof(double));
    f->dq = malloc(f->in.nq * sizeof(double));
    f->dk = malloc(f->in.nkv * sizeof(double));
    f->dv = malloc(f->in.nkv * sizeof(double));
    ck_assert_int_eq(uly_ref_fwd(a, f->in.q, f->in.k, f->in.v, f->o, f->lse), ULY_OK);
    ck_assert_int_eq(uly_ref_bwd(a, f->in.q, f->in.k, f->in.v, f->in.dout, f->dq, f->dk, f->dv), ULY_OK);
    /* the method's map */
    uly_layout L;
    ck_assert_int_eq(uly_layout_init(&L, a, &f->pb.plan), ULY_OK);
    for (int r = 0; r < P; r++) {
        uly_rank_part part;
        uly_layout_part(&L, r, &part);
        f->rows[r] = part.tokens;
        f->tok[r] = malloc((size_t)(part.tokens + 1) * sizeof(int64_t));
        int64_t n = 0;
        for (int s = 0; s < part.nseg; s++)
            for (int64_t i = 0; i < part.tok_count[s]; i++)
                f->tok[r][n++] = part.tok_begin[s] + i;
    }
}

/* Give rank r the tokens tok[0..n) (a framework's own map). */
static void fx_tokens(fx *f, int r, const int64_t *tok, int64_t n)
{
    int64_t *t = malloc((size_t)(n + 1) * sizeof(int64_t));
    memcpy(t, tok, (size_t)n * sizeof(int64_t));
    free(f->tok[r]);
    f->tok[r] = t;
    f->rows[r] = n;
    f->use_tokens = 1;
}

/* Rows tok of a (B, N, Hx, d) tensor: (B, n, Hx, d). */
static double *slice(const fx *f, const double *g, int64_t Hx, const int64_t *tok, int64_t n)
{
    const int64_t B = f->pb.a.batch, N = f->pb.a.seq, w = Hx * f->pb.a.head_dim;
    double *x = malloc((size_t)(B * n * w + 1) * sizeof(double));
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < n; i++)
            memcpy(x + (b * n + i) * w, g + (b * N + tok[i]) * w, (size_t)w * sizeof(double));
    return x;
}

/* Slice every rank's shards from the global tensors; mask: 1 o, 2 lse, 4 backward. */
static void fx_build(fx *f, int mask)
{
    const uly_attn_desc *a = &f->pb.a;
    const int64_t B = a->batch, N = a->seq, H = a->heads, Hkv = a->kv_heads;
    for (int r = 0; r < f->pb.plan.P; r++) {
        const int64_t n = f->rows[r];
        uly_check_rank *R = &f->rk[r];
        memset(R, 0, sizeof *R);
        R->rows = n;
        R->tokens = f->use_tokens ? f->tok[r] : NULL;
        f->sh[r][0] = slice(f, f->in.q, H, f->tok[r], n);
        f->sh[r][1] = slice(f, f->in.k, Hkv, f->tok[r], n);
        f->sh[r][2] = slice(f, f->in.v, Hkv, f->tok[r], n);
        R->q = f->sh[r][0];
        R->k = f->sh[r][1];
        R->v = f->sh[r][2];
        if (mask & 1)
            R->o = f->sh[r][3] = slice(f, f->o, H, f->tok[r], n);
        if (mask & 2) {
            if (f->lse_plan) {
                int64_t hb, hc, sb[2], sc[2];
                int ns = uly_plan_lse_layout(&f->pb.plan, N, H, r, &hb, &hc, sb, sc);
                int64_t rows = 0;
                for (int s = 0; s < ns; s++)
                    rows += sc[s];
                double *l = malloc((size_t)(B * hc * rows + 1) * sizeof(double));
                for (int64_t b = 0; b < B; b++)
                    for (int64_t h = 0; h < hc; h++) {
                        int64_t i = 0;
                        for (int s = 0; s < ns; s++)
                            for (int64_t t = sb[s]; t < sb[s] + sc[s]; t++)
                                l[(b * hc + h) * rows + i++] = f->lse[(b * H + hb + h) * N + t];
                    }
                R->lse = f->sh[r][4] = l;
                R->lse_plan = 1;
            } else {
                double *l = malloc((size_t)(B * H * n + 1) * sizeof(double));
                for (int64_t b = 0; b < B; b++)
                    for (int64_t h = 0; h < H; h++)
                        for (int64_t i = 0; i < n; i++)
                            l[(b * H + h) * n + i] = f->lse[(b * H + h) * N + f->tok[r][i]];
                R->lse = f->sh[r][4] = l;
            }
        }
        if (mask & 4) {
            R->dout = f->sh[r][5] = slice(f, f->in.dout, H, f->tok[r], n);
            R->dq = f->sh[r][6] = slice(f, f->dq, H, f->tok[r], n);
            R->dk = f->sh[r][7] = slice(f, f->dk, Hkv, f->tok[r], n);
            R->dv = f->sh[r][8] = slice(f, f->dv, Hkv, f->tok[r], n);
        }
    }
}

static void fx_free(fx *f)
{
    for (int r = 0; r < MAXP; r++) {
        free(f->tok[r]);
        for (int i = 0; i < 10; i++)
            free(f->sh[r][i]);
    }
    free(f->o);
    free(f->lse);
    free(f->dq);
    free(f->dk);
    free(f->dv);
    tu_problem_free(&f->in);
}

static int run(fx *f, uly_check_report *rep)
{
    int rc = uly_check_run(&f->pb, f->rk, rep);
    if (rc == ULY_OK && !rep->pass)
        printf("  [%s] %s\n    evidence: %s\n", uly_defect_name(rep->defect), rep->summary, rep->evidence);
    return rc;
}

static void expect_pass(fx *f)
{
    uly_check_report rep;
    ck_assert_int_eq(run(f, &rep), ULY_OK);
    ck_assert_msg(rep.pass, "expected a pass: %s", rep.summary);
    ck_assert_int_eq(rep.defect, ULY_DEFECT_NONE);
    ck_assert_double_le(rep.imbalance, rep.imbalance_bound);
    char *js = uly_check_report_json(&f->pb, &rep);
    ck_assert_ptr_nonnull(js);
    ck_assert_ptr_nonnull(strstr(js, "\"verdict\": \"pass\""));
    uly_free(js);
    uly_check_report_free(&rep);
}

/* The class, and the localisation's words. */
static void expect_defect(fx *f, int defect, const char *w1, const char *w2, const char *w3)
{
    uly_check_report rep;
    ck_assert_int_eq(run(f, &rep), ULY_OK);
    ck_assert_msg(!rep.pass, "expected a failure");
    ck_assert_msg(rep.defect == defect, "expected %s, got %s: %s", uly_defect_name(defect),
                  uly_defect_name(rep.defect), rep.summary);
    const char *w[3] = {w1, w2, w3};
    for (int i = 0; i < 3; i++)
        if (w[i])
            ck_assert_msg(strstr(rep.summary, w[i]), "summary lacks '%s': %s", w[i], rep.summary);
    char *js = uly_check_report_json(&f->pb, &rep);
    ck_assert_ptr_nonnull(js);
    char want[64];
    snprintf(want, sizeof want, "\"defect\": \"%s\"", uly_defect_name(defect));
    ck_assert_ptr_nonnull(strstr(js, want));
    uly_free(js);
    uly_check_report_free(&rep);
}

static void expect_einval(fx *f, const char *w1, const char *w2)
{
    uly_check_report rep;
    ck_assert_int_eq(uly_check_run(&f->pb, f->rk, &rep), ULY_EINVAL);
    const char *m = uly_last_error();
    ck_assert_msg(!w1 || strstr(m, w1), "message lacks '%s': %s", w1, m);
    ck_assert_msg(!w2 || strstr(m, w2), "message lacks '%s': %s", w2, m);
    uly_check_report_free(&rep);
}

/* ------------------------------------------------------- correct shards */

START_TEST(pass_every_method)
{
    static const struct { int method, P, U; int64_t N, H, Hkv; int causal, window; } cs[] = {
        {ULY_METHOD_ULYSSES, 4, 0, 64, 8, 8, 1, 0},   {ULY_METHOD_ULYSSES, 3, 0, 101, 6, 2, 0, 0},
        {ULY_METHOD_RING, 3, 0, 101, 4, 4, 1, 0},     {ULY_METHOD_ZIGZAG, 4, 0, 130, 4, 2, 1, 0},
        {ULY_METHOD_ALLGATHER, 2, 0, 77, 4, 1, 1, 9}, {ULY_METHOD_USP, 4, 2, 96, 4, 2, 1, 0},
        {ULY_METHOD_ZIGZAG, 1, 0, 40, 2, 2, 0, 0},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        uly_attn_desc a = desc(2, cs[i].N, cs[i].H, cs[i].Hkv, 8, cs[i].causal);
        a.window = cs[i].window;
        fx f;
        fx_init(&f, &a, cs[i].method, cs[i].P, cs[i].U, ULY_ELEM_F32, 11 + i);
        fx_build(&f, 7);
        expect_pass(&f);
        fx_free(&f);
        /* the method's LSE layout */
        fx_init(&f, &a, cs[i].method, cs[i].P, cs[i].U, ULY_ELEM_F64, 11 + i);
        f.lse_plan = 1;
        fx_build(&f, 3);
        expect_pass(&f);
        fx_free(&f);
    }
}
END_TEST

START_TEST(pass_documents_and_token_map)
{
    uly_attn_desc a = desc(1, 120, 4, 2, 8, 1);
    int64_t off[4] = {0, 50, 90, 120};
    a.doc_offsets = off;
    a.docs = 3;
    fx f;
    fx_init(&f, &a, ULY_METHOD_ZIGZAG, 3, 0, ULY_ELEM_F32, 5);
    fx_build(&f, 7);
    expect_pass(&f);
    fx_free(&f);
    /* the zigzag map given as token indices, rows reversed: the same work */
    fx_init(&f, &a, ULY_METHOD_ZIGZAG, 3, 0, ULY_ELEM_F32, 5);
    for (int r = 0; r < 3; r++) {
        int64_t t[120];
        for (int64_t i = 0; i < f.rows[r]; i++)
            t[i] = f.tok[r][f.rows[r] - 1 - i];
        fx_tokens(&f, r, t, f.rows[r]);
    }
    fx_build(&f, 7);
    uly_check_report rep;
    ck_assert_int_eq(run(&f, &rep), ULY_OK);
    ck_assert(rep.pass);
    ck_assert_double_eq_tol(rep.imbalance, rep.imbalance_ref, 1e-12);
    uly_check_report_free(&rep);
    fx_free(&f);
}
END_TEST

/* ------------------------------------------------------ planted defects */

START_TEST(zero_output_one_rank)
{
    uly_attn_desc a = desc(1, 96, 4, 4, 8, 1);
    fx f;
    fx_init(&f, &a, ULY_METHOD_RING, 3, 0, ULY_ELEM_F32, 21);
    fx_build(&f, 7);
    memset(f.sh[1][3], 0, (size_t)(f.rows[1] * 4 * 8) * sizeof(double));
    expect_defect(&f, ULY_DEFECT_ZERO_OUTPUT, "rank 1, tokens 32-63", "O", "zero");
    fx_free(&f);
}
END_TEST

START_TEST(dk_wrong_on_one_zigzag_chunk)
{
    /* stale K/V in the ring backward: dK of chunk 5 (rank 2's second) wrong */
    uly_attn_desc a = desc(1, 256, 8, 8, 8, 1);
    fx f;
    fx_init(&f, &a, ULY_METHOD_ZIGZAG, 4, 0, ULY_ELEM_F32, 22);
    for (int64_t i = 160; i < 192; i++)
        for (int64_t e = 4 * 8; e < 8 * 8; e++) /* heads 4-7 */
            f.dk[i * 64 + e] *= 1.25;
    fx_build(&f, 7);
    expect_defect(&f, ULY_DEFECT_BACKWARD_KV, "rank 2, tokens 160-191 (zigzag chunk 5), heads 4-7",
                  "dK wrong, O, LSE, dQ and dV right", "backward-only defect in the K/V path");
    fx_free(&f);
}
END_TEST

START_TEST(swapped_chunk)
{
    uly_attn_desc a = desc(1, 128, 4, 2, 8, 1);
    fx f;
    fx_init(&f, &a, ULY_METHOD_ZIGZAG, 4, 0, ULY_ELEM_F32, 23);
    /* rank 1 holds chunks 1 and 6 (tokens 16-31, 96-111), rank 2 chunks 2 and 5 */
    for (int64_t i = 0; i < 16; i++)
        for (int64_t e = 0; e < 32; e++) {
            double t = f.o[(16 + i) * 32 + e];
            f.o[(16 + i) * 32 + e] = f.o[(80 + i) * 32 + e];
            f.o[(80 + i) * 32 + e] = t;
        }
    fx_build(&f, 1);
    expect_defect(&f, ULY_DEFECT_CHUNK_SWAP, "tokens 16-31 (zigzag chunk 1)", "tokens 80-95 (zigzag chunk 5)",
                  "swapped");
    fx_free(&f);
}
END_TEST

START_TEST(local_only_attention)
{
    /* a layer without SP: each rank attends its own contiguous shard */
    uly_attn_desc a = desc(2, 90, 4, 2, 8, 1);
    fx f;
    fx_init(&f, &a, ULY_METHOD_RING, 3, 0, ULY_ELEM_F32, 24);
    fx_build(&f, 3);
    for (int r = 0; r < 3; r++) {
        uly_attn_desc l = a;
        l.seq = f.rows[r];
        ck_assert_int_eq(uly_ref_fwd(&l, f.sh[r][0], f.sh[r][1], f.sh[r][2], f.sh[r][3], NULL), ULY_OK);
    }
    expect_defect(&f, ULY_DEFECT_NO_SP, "ranks 1-2", "own tokens", "without sequence parallelism");
    fx_free(&f);
}
END_TEST

START_TEST(wrong_kv_head)
{
    /* query head 5 reads KV head 1 instead of 2 (H 8, Hkv 4) */
    uly_attn_desc a = desc(1, 64, 8, 4, 8, 1);
    fx f;
    fx_init(&f, &a, ULY_METHOD_ULYSSES, 4, 0, ULY_ELEM_F32, 25);
    uly_attn_desc x = a;
    x.kv_heads = 8;
    double *kx = malloc((size_t)(64 * 8 * 8) * sizeof(double)), *vx = malloc((size_t)(64 * 8 * 8) * sizeof(double));
    double *ox = malloc((size_t)(64 * 8 * 8) * sizeof(double));
    for (int64_t i = 0; i < 64; i++)
        for (int64_t h = 0; h < 8; h++) {
            int64_t kv = h == 5 ? 1 : h / 2;
            memcpy(kx + (i * 8 + h) * 8, f.in.k + (i * 4 + kv) * 8, 8 * sizeof(double));
            memcpy(vx + (i * 8 + h) * 8, f.in.v + (i * 4 + kv) * 8, 8 * sizeof(double));
        }
    ck_assert_int_eq(uly_ref_fwd(&x, f.in.q, kx, vx, ox, NULL), ULY_OK);
    memcpy(f.o, ox, (size_t)(64 * 8 * 8) * sizeof(double));
    fx_build(&f, 1);
    expect_defect(&f, ULY_DEFECT_KV_HEAD, "every rank", "head 5", "query head 5 attended KV head 1, expected KV head 2");
    free(kx);
    free(vx);
    free(ox);
    fx_free(&f);
}
END_TEST

START_TEST(documents_ignored)
{
    uly_attn_desc a = desc(1, 96, 4, 4, 8, 1);
    int64_t off[3] = {0, 40, 96};
    a.doc_offsets = off;
    a.docs = 2;
    fx f;
    fx_init(&f, &a, ULY_METHOD_ZIGZAG, 2, 0, ULY_ELEM_F32, 26);
    uly_attn_desc nd = a;
    nd.doc_offsets = NULL;
    nd.docs = 0;
    ck_assert_int_eq(uly_ref_fwd(&nd, f.in.q, f.in.k, f.in.v, f.o, NULL), ULY_OK);
    fx_build(&f, 1);
    expect_defect(&f, ULY_DEFECT_DOC_MASK, "tokens", "document", NULL);
    fx_free(&f);
}
END_TEST

START_TEST(bf16_rounded_output)
{
    uly_attn_desc a = desc(1, 64, 4, 4, 8, 0);
    fx f;
    fx_init(&f, &a, ULY_METHOD_RING, 2, 0, ULY_ELEM_F32, 27);
    uly_round_bf16(ULY_F64, f.o, f.in.nq);
    fx_build(&f, 7);
    expect_defect(&f, ULY_DEFECT_PRECISION, "every rank", "O wrong", "bf16 level");
    fx_free(&f);
}
END_TEST

START_TEST(head_split_some_heads_wrong)
{
    /* heads 9-11 of 12 never computed right (a [4,4,4,0]-like split) */
    uly_attn_desc a = desc(1, 64, 12, 12, 8, 1);
    fx f;
    fx_init(&f, &a, ULY_METHOD_ULYSSES, 4, 0, ULY_ELEM_F32, 28);
    for (int64_t i = 0; i < 64; i++)
        for (int64_t e = 9 * 8; e < 12 * 8; e++)
            f.o[i * 96 + e] = 0.5 * f.o[i * 96 + e] + 0.01;
    fx_build(&f, 1);
    expect_defect(&f, ULY_DEFECT_HEAD_SPLIT, "every rank", "heads 9-11", "head partition");
    fx_free(&f);
}
END_TEST

START_TEST(causal_tail_imbalance)
{
    /* a token map that is right but contiguous: the last rank gets the causal tail */
    uly_attn_desc a = desc(1, 128, 4, 4, 8, 1);
    fx f;
    fx_init(&f, &a, ULY_METHOD_ZIGZAG, 4, 0, ULY_ELEM_F32, 29);
    for (int r = 0; r < 4; r++) {
        int64_t t[32];
        for (int64_t i = 0; i < 32; i++)
            t[i] = r * 32 + i;
        fx_tokens(&f, r, t, 32);
    }
    fx_build(&f, 7);
    uly_check_report rep;
    ck_assert_int_eq(run(&f, &rep), ULY_OK);
    ck_assert(!rep.pass);
    ck_assert_int_eq(rep.defect, ULY_DEFECT_IMBALANCE);
    ck_assert_str_eq(rep.where, "rank 3");
    ck_assert_double_gt(rep.imbalance, 1.5);
    ck_assert_double_lt(rep.imbalance_ref, 1.1);
    for (int i = 0; i < rep.ncells; i++)
        ck_assert_int_eq(rep.cells[i].bad, 0);
    uly_check_report_free(&rep);
    fx_free(&f);
}
END_TEST

/* ------------------------------------------------------- bf16 emulation */

static double bf(double x)
{
    uly_round_bf16(ULY_F64, &x, 1);
    return x;
}

/* Flash-style attention as a bf16 GPU kernel computes it: bf16 inputs, P
 * rounded to bf16 before PV, dS and P before the backward products, fp32-or-
 * better accumulation, outputs rounded to bf16 (LSE kept in fp32). */
static void emulate_bf16(const uly_attn_desc *a, const double *q, const double *k, const double *v,
                         const double *dout, double *o, double *lse, double *dq, double *dk, double *dv)
{
    const int64_t N = a->seq, H = a->heads, Hk = a->kv_heads, d = a->head_dim, g = H / Hk;
    const double sc = uly_attn_scale(a);
    double *s = malloc((size_t)N * sizeof(double));
    memset(dq, 0, (size_t)(N * H * d) * sizeof(double));
    memset(dk, 0, (size_t)(N * Hk * d) * sizeof(double));
    memset(dv, 0, (size_t)(N * Hk * d) * sizeof(double));
    for (int64_t h = 0; h < H; h++) {
        const int64_t kh = h / g;
        for (int64_t i = 0; i < N; i++) {
            double m = -INFINITY, l = 0;
            for (int64_t j = 0; j < N; j++) {
                s[j] = NAN;
                if (!uly_attn_visible(a, i, j))
                    continue;
                double acc = 0;
                for (int64_t c = 0; c < d; c++)
                    acc += q[(i * H + h) * d + c] * k[(j * Hk + kh) * d + c];
                s[j] = (float)(acc * sc);
                m = fmax(m, s[j]);
            }
            double *oi = o + (i * H + h) * d;
            for (int64_t c = 0; c < d; c++)
                oi[c] = 0;
            for (int64_t j = 0; j < N; j++) {
                if (s[j] != s[j])
                    continue;
                double p = (float)exp(s[j] - m);
                l += p;
                for (int64_t c = 0; c < d; c++)
                    oi[c] += bf(p) * v[(j * Hk + kh) * d + c];
            }
            for (int64_t c = 0; c < d; c++)
                oi[c] = bf(oi[c] / l);
            lse[h * N + i] = (float)(m + log(l));
        }
    }
    for (int64_t h = 0; h < H; h++) {
        const int64_t kh = h / g;
        for (int64_t i = 0; i < N; i++) {
            const double *doi = dout + (i * H + h) * d, *oi = o + (i * H + h) * d;
            double D = 0;
            for (int64_t c = 0; c < d; c++)
                D += doi[c] * oi[c];
            for (int64_t j = 0; j < N; j++) {
                if (!uly_attn_visible(a, i, j))
                    continue;
                double acc = 0, dp = 0;
                for (int64_t c = 0; c < d; c++) {
                    acc += q[(i * H + h) * d + c] * k[(j * Hk + kh) * d + c];
                    dp += doi[c] * v[(j * Hk + kh) * d + c];
                }
                const double p = (float)exp((float)(acc * sc) - lse[h * N + i]);
                const double ds = bf(p * (dp - D)), pb = bf(p);
                for (int64_t c = 0; c < d; c++) {
                    dq[(i * H + h) * d + c] += sc * ds * k[(j * Hk + kh) * d + c];
                    dk[(j * Hk + kh) * d + c] += sc * ds * q[(i * H + h) * d + c];
                    dv[(j * Hk + kh) * d + c] += pb * doi[c];
                }
            }
        }
    }
    uly_round_bf16(ULY_F64, dq, (size_t)(N * H * d));
    uly_round_bf16(ULY_F64, dk, (size_t)(N * Hk * d));
    uly_round_bf16(ULY_F64, dv, (size_t)(N * Hk * d));
    free(s);
}

START_TEST(bf16_emulation_passes_with_margin)
{
    static const int causal[2] = {1, 0};
    for (int c = 0; c < 2; c++) {
        uly_attn_desc a = desc(1, 256, 4, 2, 32, causal[c]);
        fx f;
        fx_init(&f, &a, ULY_METHOD_ZIGZAG, 4, 0, ULY_ELEM_BF16, 30 + c);
        uly_round_bf16(ULY_F64, f.in.q, f.in.nq);
        uly_round_bf16(ULY_F64, f.in.k, f.in.nkv);
        uly_round_bf16(ULY_F64, f.in.v, f.in.nkv);
        uly_round_bf16(ULY_F64, f.in.dout, f.in.nq);
        emulate_bf16(&a, f.in.q, f.in.k, f.in.v, f.in.dout, f.o, f.lse, f.dq, f.dk, f.dv);
        fx_build(&f, 7);
        uly_check_report rep;
        ck_assert_int_eq(run(&f, &rep), ULY_OK);
        ck_assert_msg(rep.pass, "a correct bf16 kernel fails: %s", rep.summary);
        double worst[ULY_CHK_NT] = {0};
        for (int i = 0; i < rep.ncells; i++)
            worst[rep.cells[i].tensor] = fmax(worst[rep.cells[i].tensor], rep.cells[i].worst);
        printf("bf16 emulation (%s): worst error / tolerance O %.3f LSE %.3f dQ %.3f dK %.3f dV %.3f\n",
               causal[c] ? "causal" : "full", worst[0], worst[1], worst[2], worst[3], worst[4]);
        fflush(stdout);
        for (int t = 0; t < ULY_CHK_NT; t++)
            ck_assert_double_lt(worst[t], 0.5);
        uly_check_report_free(&rep);
        /* the same kernel losing half of one chunk's dV (a ring step's
         * contribution dropped) fails */
        for (int64_t i = 160; i < 192; i++)
            for (int64_t e = 0; e < 64; e++)
                f.sh[2][8][(i - 160 + 32) * 64 + e] *= 0.5;
        expect_defect(&f, ULY_DEFECT_BACKWARD_KV, "rank 2, tokens 160-191 (zigzag chunk 5)", "dV wrong", NULL);
        fx_free(&f);
    }
}
END_TEST

START_TEST(tolerances_per_type)
{
    double at, rt;
    ck_assert_int_eq(uly_check_tolerance(ULY_ELEM_F32, ULY_CHK_O, &at, &rt), ULY_OK);
    ck_assert_double_eq(at, 3e-6);
    ck_assert_double_eq(rt, 3e-5);
    ck_assert_int_eq(uly_check_tolerance(ULY_ELEM_F32, ULY_CHK_DK, &at, &rt), ULY_OK);
    ck_assert_double_eq(at, 2e-5);
    ck_assert_double_eq(rt, 2e-4);
    ck_assert_int_eq(uly_check_tolerance(ULY_ELEM_F64, ULY_CHK_DQ, &at, &rt), ULY_OK);
    ck_assert_double_eq(at, 1e-11);
    ck_assert_int_eq(uly_check_tolerance(ULY_ELEM_BF16, ULY_CHK_O, &at, &rt), ULY_OK);
    ck_assert_double_eq(at, 2.0 / 256);
    ck_assert_int_eq(uly_check_tolerance(ULY_ELEM_F16, ULY_CHK_DV, &at, &rt), ULY_OK);
    ck_assert_double_eq(at, 4.0 / 2048);
    ck_assert_double_eq(rt, 2.0 / 2048);
    ck_assert_int_eq(uly_check_tolerance(ULY_ELEM_I32, ULY_CHK_O, &at, &rt), ULY_EINVAL);
    ck_assert_int_eq(uly_check_tolerance(ULY_ELEM_F32, ULY_CHK_NT, &at, &rt), ULY_EINVAL);
}
END_TEST

START_TEST(layouts_round_trip)
{
    double x[2 * 3 * 4 * 5], y[2 * 3 * 4 * 5], z[2 * 3 * 4 * 5];
    for (int i = 0; i < 120; i++)
        x[i] = i;
    uly_tlayout_to_bshd(ULY_TL_BHSD, 2, 3, 4, 5, x, y); /* x as (2, 4, 3, 5) */
    ck_assert_double_eq(y[((1 * 3 + 2) * 4 + 3) * 5 + 4], x[((1 * 4 + 3) * 3 + 2) * 5 + 4]);
    uly_tlayout_from_bshd(ULY_TL_BHSD, 2, 3, 4, 5, y, z);
    ck_assert_mem_eq(x, z, sizeof x);
    uly_tlayout_to_bshd(ULY_TL_THD, 1, 6, 4, 5, x, y);
    ck_assert_mem_eq(x, y, sizeof x);
    int l;
    ck_assert_int_eq(uly_tlayout_parse("bhsd", &l), ULY_OK);
    ck_assert_int_eq(l, ULY_TL_BHSD);
    ck_assert_str_eq(uly_tlayout_name(ULY_TL_THD), "thd");
    ck_assert_int_eq(uly_tlayout_parse("sbhd", &l), ULY_EINVAL);
    ck_assert_str_eq(uly_defect_name(ULY_DEFECT_BACKWARD_KV), "backward-kv");
    ck_assert_str_eq(uly_check_tensor_name(ULY_CHK_DV), "dv");
}
END_TEST

/* ------------------------------------------------------------ bad input */

START_TEST(bad_inputs)
{
    uly_attn_desc a = desc(1, 64, 4, 4, 8, 1);
    fx f;
    /* a duplicated token */
    fx_init(&f, &a, ULY_METHOD_RING, 2, 0, ULY_ELEM_F32, 40);
    for (int r = 0; r < 2; r++)
        fx_tokens(&f, r, f.tok[r], f.rows[r]);
    f.tok[1][5] = 3;
    fx_build(&f, 1);
    expect_einval(&f, "token 3 is held twice", "rank 1 (row 5)");
    fx_free(&f);
    /* a missing token (rank 1 gives one row fewer) */
    fx_init(&f, &a, ULY_METHOD_RING, 2, 0, ULY_ELEM_F32, 40);
    for (int r = 0; r < 2; r++)
        fx_tokens(&f, r, f.tok[r], f.rows[r] - (r == 1));
    fx_build(&f, 1);
    expect_einval(&f, "token 63 is held by no rank", NULL);
    fx_free(&f);
    /* a row count that does not fit the shard map */
    fx_init(&f, &a, ULY_METHOD_ZIGZAG, 2, 0, ULY_ELEM_F32, 40);
    f.rows[1]--;
    fx_build(&f, 1);
    expect_einval(&f, "rank 1 has 31 rows", "gives it 32");
    fx_free(&f);
    /* a tensor on some ranks only */
    fx_init(&f, &a, ULY_METHOD_RING, 2, 0, ULY_ELEM_F32, 40);
    fx_build(&f, 7);
    f.rk[1].dk = NULL;
    expect_einval(&f, "rank 1 has no dk", "rank 0 has one");
    f.rk[1].dk = f.sh[1][7];
    f.rk[0].o = NULL;
    expect_einval(&f, "rank 1 has o", "rank 0 has none");
    f.rk[0].o = f.sh[0][3];
    f.rk[0].q = NULL;
    expect_einval(&f, "rank 0", "q is missing");
    f.rk[0].q = f.sh[0][0];
    f.sh[1][1][7] = NAN;
    expect_einval(&f, "rank 1", "k has a non-finite value");
    fx_free(&f);
}
END_TEST

/* Every allocation of a check (reassembly, cells, balance, diagnosis) failing
 * in turn gives ULY_ENOMEM with a message, never another verdict. */
START_TEST(every_allocation_fails)
{
    uly_attn_desc a = desc(1, 48, 4, 2, 8, 1);
    int64_t off[3] = {0, 20, 48};
    a.doc_offsets = off;
    a.docs = 2;
    fx f;
    fx_init(&f, &a, ULY_METHOD_RING, 3, 0, ULY_ELEM_F32, 50);
    for (int r = 0; r < 3; r++) /* token indices too */
        fx_tokens(&f, r, f.tok[r], f.rows[r]);
    /* documents ignored on rank 2: the diagnosis runs every test up to document-mask */
    uly_attn_desc nd = a;
    nd.doc_offsets = NULL;
    nd.docs = 0;
    double *o = malloc(f.in.nq * sizeof(double));
    ck_assert_int_eq(uly_ref_fwd(&nd, f.in.q, f.in.k, f.in.v, o, NULL), ULY_OK);
    memcpy(f.o + 32 * 4 * 8, o + 32 * 4 * 8, 16 * 4 * 8 * sizeof(double));
    free(o);
    fx_build(&f, 7);
    uly_check_report rep;
    uly_test_fail_alloc_at(0);
    ck_assert_int_eq(uly_check_run(&f.pb, f.rk, &rep), ULY_OK);
    ck_assert_int_eq(rep.defect, ULY_DEFECT_DOC_MASK);
    uly_check_report_free(&rep);
    long n = uly_test_alloc_count();
    ck_assert_int_gt(n, 5);
    for (long k = 1; k <= n; k++) {
        uly_test_fail_alloc_at(k);
        int rc = uly_check_run(&f.pb, f.rk, &rep);
        uly_test_fail_alloc_at(0);
        ck_assert_msg(rc == ULY_ENOMEM, "allocation %ld of %ld failed, the check returned %d", k, n, rc);
        ck_assert_ptr_null(rep.cells);
        ck_assert(strlen(uly_last_error()) > 0);
    }
    ck_assert_int_eq(uly_check_run(&f.pb, f.rk, &rep), ULY_OK);
    ck_assert_int_eq(rep.defect, ULY_DEFECT_DOC_MASK);
    uly_check_report_free(&rep);
    fx_free(&f);
}
END_TEST

static Suite *make_check_suite(void)
{
    Suite *s = suite_create("check");
    TCase *tc = tcase_create("check");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, pass_every_method);
    tcase_add_test(tc, pass_documents_and_token_map);
    tcase_add_test(tc, zero_output_one_rank);
    tcase_add_test(tc, dk_wrong_on_one_zigzag_chunk);
    tcase_add_test(tc, swapped_chunk);
    tcase_add_test(tc, local_only_attention);
    tcase_add_test(tc, wrong_kv_head);
    tcase_add_test(tc, documents_ignored);
    tcase_add_test(tc, bf16_rounded_output);
    tcase_add_test(tc, head_split_some_heads_wrong);
    tcase_add_test(tc, causal_tail_imbalance);
    tcase_add_test(tc, bf16_emulation_passes_with_margin);
    tcase_add_test(tc, tolerances_per_type);
    tcase_add_test(tc, layouts_round_trip);
    tcase_add_test(tc, bad_inputs);
    tcase_add_test(tc, every_allocation_fails);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(make_check_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
