/* test_blocked.c -- the blocked kernel against the fp64 reference for many
 * shapes and masks (fp32 and fp64), determinism across thread counts and
 * head subsets (bitwise), the expanded-KV-gradient fold, and bad arguments.
 *
 * Tolerances (inputs uniform in [-1, 1), |ref| = O(1)), |x - ref| <= atol + rtol |ref|:
 *   fp32 O, LSE:          atol 3e-6, rtol 3e-5
 *   fp32 dQ, dK, dV:      atol 2e-5, rtol 2e-4  (sums of up to N*g terms of fp32 products)
 *   fp64 everything:      atol 1e-11, rtol 1e-9
 * The worst errors seen are printed at the end of the run.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define F32_ATOL 3e-6
#define F32_RTOL 3e-5
#define F32_GATOL 2e-5
#define F32_GRTOL 2e-4
#define F64_ATOL 1e-11
#define F64_RTOL 1e-9

static double worst_f32_fwd, worst_f32_bwd, worst_f64;

typedef struct shape {
    int64_t B, N, H, Hkv, d;
    int causal;
    int64_t window, bq, bk;
} shape;

static uly_attn_desc desc_of(const shape *s, uly_dtype t)
{
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = s->B; a.seq = s->N; a.heads = s->H; a.kv_heads = s->Hkv; a.head_dim = s->d;
    a.causal = s->causal; a.window = s->window; a.dtype = t;
    return a;
}

typedef struct run {
    void *o, *lse, *dq, *dk, *dv;
} run;

static void run_free(run *r)
{
    free(r->o); free(r->lse); free(r->dq); free(r->dk); free(r->dv);
}

/* Blocked fwd + bwd of problem p in dtype t. */
static void run_blocked(const tu_problem *p, uly_dtype t, const uly_kernel_opts *opts, run *r,
                        void *q, void *k, void *v, void *dout)
{
    const size_t es = uly_dtype_size(t);
    r->o = malloc(p->nq * es); r->lse = malloc(p->nlse * es);
    r->dq = malloc(p->nq * es); r->dk = malloc(p->nkv * es); r->dv = malloc(p->nkv * es);
    ck_assert_int_eq(uly_attn_fwd(&p->a, opts, q, k, v, r->o, r->lse), ULY_OK);
    ck_assert_int_eq(uly_attn_bwd(&p->a, opts, q, k, v, r->o, r->lse, dout, r->dq, r->dk, r->dv), ULY_OK);
}

static void check_shape(const shape *s, uly_dtype t)
{
    uly_attn_desc a = desc_of(s, t);
    tu_problem p;
    tu_problem_init(&p, &a, (uint64_t)(s->N * 131 + s->H * 17 + s->d * 7 + s->causal + s->window));
    const size_t es = uly_dtype_size(t);
    /* the reference sees exactly the values the kernel sees (rounded to t) */
    void *q = malloc(p.nq * es), *k = malloc(p.nkv * es), *v = malloc(p.nkv * es);
    void *dout = malloc(p.nq * es);
    tu_convert(p.q, q, p.nq, t); tu_convert(p.k, k, p.nkv, t);
    tu_convert(p.v, v, p.nkv, t); tu_convert(p.dout, dout, p.nq, t);
    for (size_t i = 0; i < p.nq; i++) {
        p.q[i] = tu_get(q, i, t);
        p.dout[i] = tu_get(dout, i, t);
    }
    for (size_t i = 0; i < p.nkv; i++) {
        p.k[i] = tu_get(k, i, t);
        p.v[i] = tu_get(v, i, t);
    }
    double *o = malloc(p.nq * 8), *lse = malloc(p.nlse * 8), *dq = malloc(p.nq * 8);
    double *dk = malloc(p.nkv * 8), *dv = malloc(p.nkv * 8);
    ck_assert_int_eq(uly_ref_fwd(&a, p.q, p.k, p.v, o, lse), ULY_OK);
    ck_assert_int_eq(uly_ref_bwd(&a, p.q, p.k, p.v, p.dout, dq, dk, dv), ULY_OK);

    uly_kernel_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.block_q = s->bq;
    opts.block_k = s->bk;
    run r;
    run_blocked(&p, t, &opts, &r, q, k, v, dout);
    char msg[512];
    const double at = t == ULY_F32 ? F32_ATOL : F64_ATOL, rt = t == ULY_F32 ? F32_RTOL : F64_RTOL;
    const double gat = t == ULY_F32 ? F32_GATOL : F64_ATOL, grt = t == ULY_F32 ? F32_GRTOL : F64_RTOL;
    const char *names[5] = {"O", "LSE", "dQ", "dK", "dV"};
    const double *refs[5] = {o, lse, dq, dk, dv};
    const void *gots[5] = {r.o, r.lse, r.dq, r.dk, r.dv};
    const size_t ns[5] = {p.nq, p.nlse, p.nq, p.nkv, p.nkv};
    for (int x = 0; x < 5; x++) {
        double ta = x < 2 ? at : gat, tr = x < 2 ? rt : grt;
        int bad = tu_close(refs[x], gots[x], t, ns[x], ta, tr, msg, sizeof msg);
        ck_assert_msg(!bad, "%s %s B=%lld N=%lld H=%lld Hkv=%lld d=%lld causal=%d window=%lld blocks %lldx%lld: %s",
                      t == ULY_F32 ? "fp32" : "fp64", names[x], (long long)s->B, (long long)s->N,
                      (long long)s->H, (long long)s->Hkv, (long long)s->d, s->causal,
                      (long long)s->window, (long long)s->bq, (long long)s->bk, msg);
        double e = tu_max_abs_err(refs[x], gots[x], t, ns[x]);
        double *w = t == ULY_F64 ? &worst_f64 : (x < 2 ? &worst_f32_fwd : &worst_f32_bwd);
        if (e > *w)
            *w = e;
    }
    run_free(&r);
    free(q); free(k); free(v); free(dout);
    free(o); free(lse); free(dq); free(dk); free(dv);
    tu_problem_free(&p);
}

static const shape shapes[] = {
    /* B  N    H  Hkv d    causal window bq  bk */
    {1, 1, 1, 1, 1, 0, 0, 0, 0},
    {1, 1, 2, 1, 16, 1, 0, 0, 0},
    {1, 7, 1, 1, 1, 0, 0, 4, 3},
    {2, 37, 3, 3, 16, 0, 0, 8, 16},
    {2, 37, 3, 3, 16, 1, 0, 8, 16},
    {2, 37, 3, 3, 16, 0, 5, 8, 16},
    {2, 37, 3, 3, 16, 1, 5, 8, 16},
    {1, 100, 4, 2, 64, 0, 0, 32, 32},
    {1, 100, 4, 2, 64, 1, 0, 32, 48},
    {1, 100, 4, 2, 64, 0, 17, 16, 8},
    {1, 100, 4, 2, 64, 1, 17, 24, 40},
    {1, 129, 4, 1, 128, 1, 0, 64, 64},
    {1, 129, 4, 1, 128, 0, 0, 0, 0},
    {2, 70, 6, 2, 32, 1, 1, 16, 16},
    {1, 300, 2, 2, 64, 1, 64, 0, 0},
    {1, 513, 1, 1, 64, 0, 0, 0, 0},
    {1, 65, 8, 1, 16, 0, 200, 16, 16},
};
#define NSHAPES (int)(sizeof shapes / sizeof shapes[0])

START_TEST(vs_reference_f32)
{
    check_shape(&shapes[_i], ULY_F32);
}
END_TEST

START_TEST(vs_reference_f64)
{
    check_shape(&shapes[_i], ULY_F64);
}
END_TEST

static int same_bits(const void *x, const void *y, size_t n)
{
    return memcmp(x, y, n) == 0;
}

/* Every thread count gives the same bits; so does every head subset. */
START_TEST(deterministic_threads_and_subsets)
{
    const shape s = {2, 97, 6, 2, 16, 1, 0, 16, 32};
    const uly_dtype t = _i ? ULY_F64 : ULY_F32;
    uly_attn_desc a = desc_of(&s, t);
    tu_problem p;
    tu_problem_init(&p, &a, 7);
    const size_t es = uly_dtype_size(t);
    void *q = malloc(p.nq * es), *k = malloc(p.nkv * es), *v = malloc(p.nkv * es);
    void *dout = malloc(p.nq * es);
    tu_convert(p.q, q, p.nq, t); tu_convert(p.k, k, p.nkv, t);
    tu_convert(p.v, v, p.nkv, t); tu_convert(p.dout, dout, p.nq, t);
    uly_kernel_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.block_q = s.bq;
    opts.block_k = s.bk;
    opts.threads = 1;
    run base;
    run_blocked(&p, t, &opts, &base, q, k, v, dout);
    for (int th = 2; th <= 5; th++) {
        opts.threads = th;
        run r;
        run_blocked(&p, t, &opts, &r, q, k, v, dout);
        ck_assert_msg(same_bits(base.o, r.o, p.nq * es), "O differs with %d threads", th);
        ck_assert_msg(same_bits(base.lse, r.lse, p.nlse * es), "LSE differs with %d threads", th);
        ck_assert_msg(same_bits(base.dq, r.dq, p.nq * es), "dQ differs with %d threads", th);
        ck_assert_msg(same_bits(base.dk, r.dk, p.nkv * es), "dK differs with %d threads", th);
        ck_assert_msg(same_bits(base.dv, r.dv, p.nkv * es), "dV differs with %d threads", th);
        run_free(&r);
    }
    /* head subsets [hb, hb + hc): slice the inputs, run, compare with the full run.
     * The subset uses expanded KV gradients; folding them must equal the full
     * run's dK/dV whenever the subset holds whole KV groups. */
    const int64_t B = s.B, N = s.N, H = s.H, Hkv = s.Hkv, d = s.d, g = H / Hkv;
    for (int64_t hb = 0; hb < H; hb++)
        for (int64_t hc = 1; hb + hc <= H; hc++) {
            int64_t kvb, kvc;
            uly_kv_range(&a, hb, hc, &kvb, &kvc);
            tu_problem sp = p;
            sp.nq = (size_t)(B * N * hc * d);
            sp.nkv = (size_t)(B * N * kvc * d);
            sp.nlse = (size_t)(B * hc * N);
            char *sq = malloc(sp.nq * es), *sd = malloc(sp.nq * es);
            char *sk = malloc(sp.nkv * es), *sv = malloc(sp.nkv * es);
            for (int64_t r = 0; r < B * N; r++) {
                memcpy(sq + (size_t)(r * hc * d) * es, (char *)q + (size_t)((r * H + hb) * d) * es, (size_t)(hc * d) * es);
                memcpy(sd + (size_t)(r * hc * d) * es, (char *)dout + (size_t)((r * H + hb) * d) * es, (size_t)(hc * d) * es);
                memcpy(sk + (size_t)(r * kvc * d) * es, (char *)k + (size_t)((r * Hkv + kvb) * d) * es, (size_t)(kvc * d) * es);
                memcpy(sv + (size_t)(r * kvc * d) * es, (char *)v + (size_t)((r * Hkv + kvb) * d) * es, (size_t)(kvc * d) * es);
            }
            uly_kernel_opts so = opts;
            so.threads = (int)(1 + (hb + hc) % 3);
            so.head_begin = hb;
            so.head_count = hc;
            so.kv_expanded = 1;
            run r;
            r.o = malloc(sp.nq * es); r.lse = malloc(sp.nlse * es);
            r.dq = malloc(sp.nq * es); r.dk = malloc(sp.nq * es); r.dv = malloc(sp.nq * es);
            ck_assert_int_eq(uly_attn_fwd(&a, &so, sq, sk, sv, r.o, r.lse), ULY_OK);
            ck_assert_int_eq(uly_attn_bwd(&a, &so, sq, sk, sv, r.o, r.lse, sd, r.dq, r.dk, r.dv), ULY_OK);
            for (int64_t row = 0; row < B * N; row++) {
                size_t off = (size_t)((row * H + hb) * d) * es, soff = (size_t)(row * hc * d) * es;
                ck_assert_msg(same_bits((char *)base.o + off, (char *)r.o + soff, (size_t)(hc * d) * es),
                              "O of heads [%lld,%lld) differs", (long long)hb, (long long)(hb + hc));
                ck_assert_msg(same_bits((char *)base.dq + off, (char *)r.dq + soff, (size_t)(hc * d) * es),
                              "dQ of heads [%lld,%lld) differs", (long long)hb, (long long)(hb + hc));
            }
            for (int64_t b = 0; b < B; b++)
                ck_assert(same_bits((char *)base.lse + (size_t)((b * H + hb) * N) * es,
                                    (char *)r.lse + (size_t)(b * hc * N) * es, (size_t)(hc * N) * es));
            if (hb % g == 0 && (hb + hc) % g == 0) {
                char *fk = malloc(sp.nkv * es), *fv = malloc(sp.nkv * es);
                ck_assert_int_eq(uly_kv_fold(&a, hb, hc, N, r.dk, fk), ULY_OK);
                ck_assert_int_eq(uly_kv_fold(&a, hb, hc, N, r.dv, fv), ULY_OK);
                for (int64_t row = 0; row < B * N; row++) {
                    size_t off = (size_t)((row * Hkv + kvb) * d) * es, soff = (size_t)(row * kvc * d) * es;
                    ck_assert_msg(same_bits((char *)base.dk + off, fk + soff, (size_t)(kvc * d) * es),
                                  "folded dK of heads [%lld,%lld) differs", (long long)hb, (long long)(hb + hc));
                    ck_assert(same_bits((char *)base.dv + off, fv + soff, (size_t)(kvc * d) * es));
                }
                free(fk); free(fv);
            }
            run_free(&r);
            free(sq); free(sd); free(sk); free(sv);
        }
    run_free(&base);
    free(q); free(k); free(v); free(dout);
    tu_problem_free(&p);
}
END_TEST

START_TEST(rejects_bad_arguments)
{
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = 1; a.seq = 4; a.heads = 2; a.kv_heads = 1; a.head_dim = 2; a.dtype = ULY_F32;
    float x[64] = {0}, o[64], lse[16];
    uly_kernel_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.head_begin = 1;
    opts.head_count = 2; /* [1, 3) outside 2 heads */
    ck_assert_int_eq(uly_attn_fwd(&a, &opts, x, x, x, o, lse), ULY_EINVAL);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "head range"));
    opts.head_begin = 0;
    opts.head_count = 0;
    opts.block_q = -3;
    ck_assert_int_eq(uly_attn_fwd(&a, &opts, x, x, x, o, lse), ULY_EINVAL);
    ck_assert_int_eq(uly_attn_fwd(&a, NULL, x, NULL, x, o, lse), ULY_EINVAL);
    a.seq = INT64_MAX / 2; /* B*N*H*d*8 overflows */
    ck_assert_int_eq(uly_attn_fwd(&a, NULL, x, x, x, o, lse), ULY_EOVERFLOW);
    a.seq = 4;
    a.kv_heads = 3;
    ck_assert_int_eq(uly_attn_fwd(&a, NULL, x, x, x, o, lse), ULY_EINVAL);
}
END_TEST

static Suite *make_blocked_suite(void)
{
    Suite *s = suite_create("blocked");
    TCase *tc = tcase_create("vs_reference");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, vs_reference_f32, 0, NSHAPES);
    tcase_add_loop_test(tc, vs_reference_f64, 0, NSHAPES);
    suite_add_tcase(s, tc);
    TCase *td = tcase_create("determinism");
    tcase_set_timeout(td, 120);
    tcase_add_loop_test(td, deterministic_threads_and_subsets, 0, 2);
    tcase_add_test(td, rejects_bad_arguments);
    suite_add_tcase(s, td);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(make_blocked_suite());
    srunner_set_fork_status(sr, CK_NOFORK); /* to collect the worst errors */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    printf("worst |err| vs fp64 reference: fp32 O/LSE %.3g, fp32 dQ/dK/dV %.3g, fp64 all %.3g\n",
           worst_f32_fwd, worst_f32_bwd, worst_f64);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
