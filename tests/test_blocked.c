/* SPDX-License-Identifier: Apache-2.0 */
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
#include <cblas.h>
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"
#include "vexp.h"

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
    /* default blocks over several forward and backward blocks (forward 512 x 256, backward 256 x 512) */
    {1, 1100, 2, 1, 32, 1, 0, 0, 0},
    {1, 1100, 2, 2, 16, 0, 300, 0, 0},
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

/* Every thread count gives the same bits; so does every head subset.  With
 * given small blocks, and with the default blocks (forward and backward
 * differ) over a sequence of several of them. */
START_TEST(deterministic_threads_and_subsets)
{
    static const shape shp[2] = {{2, 97, 6, 2, 16, 1, 0, 16, 32}, {1, 1100, 6, 2, 8, 1, 0, 0, 0}};
    const shape s = shp[_i / 2];
    const uly_dtype t = _i % 2 ? ULY_F64 : ULY_F32;
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

/* The split single pass (one (batch, KV head) item shared out by key block
 * between the threads, dQ blocks updated in key-block order through turn
 * counters): the same bits as one thread, for masks that leave many block
 * pairs unvisited (causal, a window narrower than a block, both) and a KV
 * group of 3 query heads; the workspace's counters show the split is used
 * (B x H x nqb of 4 bytes after D's states). */
START_TEST(split_single_pass_same_bits)
{
    static const shape shp[4] = {{1, 301, 3, 1, 16, 1, 0, 24, 20},
                                 {1, 301, 3, 1, 16, 0, 13, 24, 20},
                                 {1, 301, 3, 1, 16, 1, 50, 16, 40},
                                 {1, 257, 1, 1, 32, 0, 0, 32, 16}};
    const shape s = shp[_i / 2];
    const uly_dtype t = _i % 2 ? ULY_F64 : ULY_F32;
    uly_attn_desc a = desc_of(&s, t);
    tu_problem p;
    tu_problem_init(&p, &a, 11);
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
    opts.bwd_pass = ULY_BWD_SINGLE;
    run base;
    run_blocked(&p, t, &opts, &base, q, k, v, dout);
    for (int th = 2; th <= 4; th++)
        for (int sched = ULY_BWD_AUTO; sched <= ULY_BWD_SINGLE; sched++) {
            opts.threads = th;
            opts.bwd_pass = sched;
            ck_assert_int_eq(uly_attn_bwd_schedule(&a, &opts), ULY_BWD_SINGLE);
            run r;
            run_blocked(&p, t, &opts, &r, q, k, v, dout);
            ck_assert_msg(same_bits(base.dq, r.dq, p.nq * es), "case %d: dQ differs with %d threads", _i, th);
            ck_assert_msg(same_bits(base.dk, r.dk, p.nkv * es), "case %d: dK differs with %d threads", _i, th);
            ck_assert_msg(same_bits(base.dv, r.dv, p.nkv * es), "case %d: dV differs with %d threads", _i, th);
            run_free(&r);
        }
    run_free(&base);
    free(q); free(k); free(v); free(dout);
    tu_problem_free(&p);
}
END_TEST

/* uly_attn_workspace: the larger of the forward's and the backward's
 * per-thread workspace (kernel_blocked.c's layouts), times the threads. */
START_TEST(workspace_size)
{
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = 1; a.seq = 1000; a.heads = 2; a.kv_heads = 2; a.head_dim = 64; a.dtype = ULY_F32;
    uly_kernel_opts o;
    memset(&o, 0, sizeof o);
    o.threads = 3;
    size_t b = 0;
    /* default blocks: forward 512 x 256: 2*512*256 + 512*64 + 2*512 per
     * thread; backward 256 x 512: 2*256*512 + 4*512*64 + 256 per thread (the
     * larger), the threads' parts rounded up to 64 bytes, then one 64-byte
     * progress slot per thread (used by the split single pass: 2 (batch, KV
     * head) items on 3 threads; there whether used or not) */
    const size_t f32_bwd = 2 * 256 * 512 + 4 * 512 * 64 + 256;
    ck_assert_int_eq(uly_attn_workspace(&a, &o, &b), ULY_OK);
    ck_assert_uint_eq(b, ((size_t)3 * 4 * f32_bwd + 63) / 64 * 64 + 3 * 64);
    o.bwd_pass = ULY_BWD_TWO; /* the same size */
    ck_assert_int_eq(uly_attn_workspace(&a, &o, &b), ULY_OK);
    ck_assert_uint_eq(b, ((size_t)3 * 4 * f32_bwd + 63) / 64 * 64 + 3 * 64);
    o.bwd_pass = ULY_BWD_AUTO;
    o.head_count = 1; /* independent of the heads */
    ck_assert_int_eq(uly_attn_workspace(&a, &o, &b), ULY_OK);
    ck_assert_uint_eq(b, ((size_t)3 * 4 * f32_bwd + 63) / 64 * 64 + 3 * 64);
    o.head_count = 0;
    /* given blocks, clamped to the sequence; fp64, 1 thread: forward 100 x 1000,
     * backward 2*100*1000 + 4*1000*64 + 100 (the larger, 3648800 bytes, rounded
     * up to 64) + one slot */
    o.block_q = 100; o.block_k = 4000; o.threads = 1;
    a.dtype = ULY_F64;
    ck_assert_int_eq(uly_attn_workspace(&a, &o, &b), ULY_OK);
    const size_t fwd = 2 * 100 * 1000 + 100 * 64 + 200, bwd = 2 * 100 * 1000 + 4 * 1000 * 64 + 100;
    ck_assert_uint_eq(b, fwd > bwd ? 8 * fwd : (8 * bwd + 63) / 64 * 64 + 64);
    a.seq = 64; /* forward 64 x 64 (+ 128), backward 2*64*64 + 4*64*64 + 64 */
    ck_assert_int_eq(uly_attn_workspace(&a, NULL, &b), ULY_OK);
    ck_assert_uint_eq(b % 8, 0);
    o.block_q = 0; o.block_k = 0; o.threads = 2;
    ck_assert_int_eq(uly_attn_workspace(&a, &o, &b), ULY_OK);
    ck_assert_uint_eq(b, ((size_t)2 * 8 * (2 * 64 * 64 + 4 * 64 * 64 + 64) + 63) / 64 * 64 + 2 * 64);
    o.block_q = -1;
    ck_assert_int_eq(uly_attn_workspace(&a, &o, &b), ULY_EINVAL);
    o.block_q = 0;
    ck_assert_int_eq(uly_attn_workspace(&a, &o, NULL), ULY_EINVAL);
}
END_TEST

/* ------------------------------------------------ documents and tiles */

/* Rows [t0, t0 + n) of every batch row (or only row b0 when b0 >= 0) of a
 * (B, N, X) tensor of es-byte elements, into a new (B' , n, X) buffer. */
static void *rows_of(const void *full, int64_t B, int64_t N, int64_t X, size_t es, int64_t b0, int64_t t0,
                     int64_t n)
{
    int64_t nb = b0 >= 0 ? 1 : B;
    char *out = malloc((size_t)(nb * n * X) * es + 1);
    for (int64_t b = 0; b < nb; b++)
        memcpy(out + (size_t)(b * n * X) * es,
               (const char *)full + (size_t)(((b0 >= 0 ? b0 : b) * N + t0) * X) * es, (size_t)(n * X) * es);
    return out;
}

/* LSE (B, H, N): columns [t0, t0 + n) of every (b, h) row into (B', H, n). */
static void *lse_cols(const void *full, int64_t B, int64_t H, int64_t N, size_t es, int64_t b0, int64_t t0,
                      int64_t n)
{
    int64_t nb = b0 >= 0 ? 1 : B;
    char *out = malloc((size_t)(nb * H * n) * es + 1);
    for (int64_t b = 0; b < nb; b++)
        for (int64_t h = 0; h < H; h++)
            memcpy(out + (size_t)((b * H + h) * n) * es,
                   (const char *)full + (size_t)((((b0 >= 0 ? b0 : b) * H + h) * N) + t0) * es, (size_t)n * es);
    return out;
}


/* A problem in dtype t (the doubles of p rounded to t, so that the reference
 * sees exactly the kernel's inputs) and its fp64 reference results. */
typedef struct prepared {
    void *q, *k, *v, *dout;
    double *o, *lse, *dq, *dk, *dv;
} prepared;

static void prep(tu_problem *p, uly_dtype t, prepared *x)
{
    const size_t es = uly_dtype_size(t);
    x->q = malloc(p->nq * es); x->k = malloc(p->nkv * es);
    x->v = malloc(p->nkv * es); x->dout = malloc(p->nq * es);
    tu_convert(p->q, x->q, p->nq, t); tu_convert(p->k, x->k, p->nkv, t);
    tu_convert(p->v, x->v, p->nkv, t); tu_convert(p->dout, x->dout, p->nq, t);
    for (size_t i = 0; i < p->nq; i++) { p->q[i] = tu_get(x->q, i, t); p->dout[i] = tu_get(x->dout, i, t); }
    for (size_t i = 0; i < p->nkv; i++) { p->k[i] = tu_get(x->k, i, t); p->v[i] = tu_get(x->v, i, t); }
    x->o = malloc(p->nq * 8); x->lse = malloc(p->nlse * 8); x->dq = malloc(p->nq * 8);
    x->dk = malloc(p->nkv * 8); x->dv = malloc(p->nkv * 8);
    ck_assert_int_eq(uly_ref_fwd(&p->a, p->q, p->k, p->v, x->o, x->lse), ULY_OK);
    ck_assert_int_eq(uly_ref_bwd(&p->a, p->q, p->k, p->v, p->dout, x->dq, x->dk, x->dv), ULY_OK);
}

static void prep_free(prepared *x)
{
    free(x->q); free(x->k); free(x->v); free(x->dout);
    free(x->o); free(x->lse); free(x->dq); free(x->dk); free(x->dv);
}

/* O, LSE, dQ, dK, dV of dtype t within the tolerances of the reference. */
static void check_five(const prepared *x, const tu_problem *p, uly_dtype t, const void *const gots[5],
                       const char *what)
{
    static const char *const names[5] = {"O", "LSE", "dQ", "dK", "dV"};
    const double *refs[5] = {x->o, x->lse, x->dq, x->dk, x->dv};
    const size_t ns[5] = {p->nq, p->nlse, p->nq, p->nkv, p->nkv};
    const int f = t == ULY_F32;
    char msg[512];
    for (int i = 0; i < 5; i++)
        ck_assert_msg(!tu_close(refs[i], gots[i], t, ns[i], i < 2 ? (f ? F32_ATOL : F64_ATOL) : (f ? F32_GATOL : F64_ATOL),
                                i < 2 ? (f ? F32_RTOL : F64_RTOL) : (f ? F32_GRTOL : F64_RTOL), msg, sizeof msg),
                      "%s %s %s: %s", f ? "fp32" : "fp64", what, names[i], msg);
}

/* Packed documents against running each document alone: the reference is
 * bitwise equal, the blocked kernels within their tolerance of it. */
START_TEST(documents_vs_alone)
{
    const uly_dtype t = _i % 2 ? ULY_F64 : ULY_F32;
    const int mask = _i / 2;
    const int64_t B = 2, N = 61, H = 4, Hkv = 2, d = 8, D = 5;
    /* row 0: an empty document in the middle and at the end; row 1: a one-token document */
    int64_t off[2][6] = {{0, 11, 30, 30, 61, 61}, {0, 1, 20, 33, 47, 61}};
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = B; a.seq = N; a.heads = H; a.kv_heads = Hkv; a.head_dim = d; a.dtype = t;
    a.causal = mask & 1; a.window = mask & 2 ? 7 : 0;
    a.doc_offsets = &off[0][0];
    a.docs = D;
    tu_problem p;
    tu_problem_init(&p, &a, 99 + (uint64_t)mask);
    prepared x;
    prep(&p, t, &x);
    double *ro = x.o, *rl = x.lse, *rq = x.dq, *rk = x.dk, *rv = x.dv;
    uly_kernel_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.block_q = 8;
    opts.block_k = 16;
    run r;
    run_blocked(&p, t, &opts, &r, x.q, x.k, x.v, x.dout);
    const void *const gots[5] = {r.o, r.lse, r.dq, r.dk, r.dv};
    check_five(&x, &p, t, gots, mask & 1 ? "documents, causal" : "documents");
    /* each document alone, through the reference: bitwise the packed reference */
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < D; i++) {
            const int64_t t0 = off[b][i], n = off[b][i + 1] - t0;
            if (n == 0)
                continue;
            uly_attn_desc one = a;
            one.batch = 1; one.seq = n; one.doc_offsets = NULL; one.docs = 0;
            double *sq = rows_of(p.q, B, N, H * d, 8, b, t0, n), *sd = rows_of(p.dout, B, N, H * d, 8, b, t0, n);
            double *sk = rows_of(p.k, B, N, Hkv * d, 8, b, t0, n), *sv = rows_of(p.v, B, N, Hkv * d, 8, b, t0, n);
            double *oo = malloc((size_t)(n * H * d) * 8), *ol = malloc((size_t)(H * n) * 8);
            double *oq = malloc((size_t)(n * H * d) * 8), *ok = malloc((size_t)(n * Hkv * d) * 8);
            double *ov = malloc((size_t)(n * Hkv * d) * 8);
            ck_assert_int_eq(uly_ref_fwd(&one, sq, sk, sv, oo, ol), ULY_OK);
            ck_assert_int_eq(uly_ref_bwd(&one, sq, sk, sv, sd, oq, ok, ov), ULY_OK);
            double *po = rows_of(ro, B, N, H * d, 8, b, t0, n), *pl = lse_cols(rl, B, H, N, 8, b, t0, n);
            double *pq = rows_of(rq, B, N, H * d, 8, b, t0, n), *pk = rows_of(rk, B, N, Hkv * d, 8, b, t0, n);
            double *pv = rows_of(rv, B, N, Hkv * d, 8, b, t0, n);
            ck_assert_msg(same_bits(oo, po, (size_t)(n * H * d) * 8), "O of document %lld of row %lld", (long long)i, (long long)b);
            ck_assert(same_bits(ol, pl, (size_t)(H * n) * 8));
            ck_assert(same_bits(oq, pq, (size_t)(n * H * d) * 8));
            ck_assert(same_bits(ok, pk, (size_t)(n * Hkv * d) * 8));
            ck_assert(same_bits(ov, pv, (size_t)(n * Hkv * d) * 8));
            free(sq); free(sd); free(sk); free(sv); free(oo); free(ol); free(oq); free(ok); free(ov);
            free(po); free(pl); free(pq); free(pk); free(pv);
        }
    run_free(&r);
    prep_free(&x);
    tu_problem_free(&p);
}
END_TEST

/* Tiles: query ranges x key ranges merged with uly_attn_merge equal the
 * whole attention (within tolerance of the reference), in the forward and,
 * from the merged O and LSE, in the backward.  Tiles that see nothing give
 * O = 0, LSE = -inf and zero gradients. */
START_TEST(tiles_merge)
{
    const uly_dtype t = _i % 2 ? ULY_F64 : ULY_F32;
    const int withdocs = _i / 2;
    const int64_t B = 2, N = 50, H = 4, Hkv = 2, d = 8;
    int64_t off[2][4] = {{0, 13, 13, 50}, {0, 25, 40, 50}};
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = B; a.seq = N; a.heads = H; a.kv_heads = Hkv; a.head_dim = d; a.dtype = t;
    a.causal = 1;
    if (withdocs) { a.doc_offsets = &off[0][0]; a.docs = 3; }
    tu_problem p;
    tu_problem_init(&p, &a, 5);
    const size_t es = uly_dtype_size(t);
    prepared x;
    prep(&p, t, &x);
    const void *q = x.q, *k = x.k, *v = x.v, *dout = x.dout;
    const int64_t qt[3] = {0, 17, 50}, kt[4] = {0, 10, 30, 50};
    /* results assembled from tiles, in dtype t */
    char *O = malloc(p.nq * es), *L = malloc(p.nlse * es), *dQ = calloc(p.nq, es);
    char *dK = calloc(p.nkv, es), *dV = calloc(p.nkv, es);
    for (int qi = 0; qi < 2; qi++) {
        const int64_t q0 = qt[qi], nq = qt[qi + 1] - q0;
        void *tq = rows_of(q, B, N, H * d, es, -1, q0, nq), *tdo = rows_of(dout, B, N, H * d, es, -1, q0, nq);
        char *acc_o = calloc((size_t)(B * nq * H * d), es), *acc_l = malloc((size_t)(B * H * nq) * es);
        for (int64_t z = 0; z < B * H * nq; z++) {
            if (t == ULY_F32) ((float *)acc_l)[z] = -INFINITY; else ((double *)acc_l)[z] = -INFINITY;
        }
        char *to = malloc((size_t)(B * nq * H * d) * es), *tl = malloc((size_t)(B * H * nq) * es);
        for (int y = 0; y < 3; y++) {
            const int64_t k0 = kt[y], nk = kt[y + 1] - k0;
            void *tk = rows_of(k, B, N, Hkv * d, es, -1, k0, nk), *tv = rows_of(v, B, N, Hkv * d, es, -1, k0, nk);
            uly_kernel_opts o;
            memset(&o, 0, sizeof o);
            o.block_q = 8; o.block_k = 4;
            o.q_begin = q0; o.q_count = nq; o.k_begin = k0; o.k_count = nk;
            ck_assert_int_eq(uly_attn_fwd(&a, &o, tq, tk, tv, to, tl), ULY_OK);
            if (!withdocs && k0 > q0 + nq - 1) { /* strictly above the diagonal: nothing visible */
                for (int64_t z = 0; z < B * H * nq; z++)
                    ck_assert(tu_get(tl, (size_t)z, t) == -INFINITY);
                for (int64_t z = 0; z < B * nq * H * d; z++)
                    ck_assert(tu_get(to, (size_t)z, t) == 0);
            }
            ck_assert_int_eq(uly_attn_merge(t, B, nq, H, d, acc_o, acc_l, to, tl, 0), ULY_OK);
            free(tk); free(tv);
        }
        for (int64_t b = 0; b < B; b++) {
            memcpy(O + (size_t)((b * N + q0) * H * d) * es, acc_o + (size_t)(b * nq * H * d) * es, (size_t)(nq * H * d) * es);
            for (int64_t h = 0; h < H; h++)
                memcpy(L + (size_t)((b * H + h) * N + q0) * es, acc_l + (size_t)((b * H + h) * nq) * es, (size_t)nq * es);
        }
        /* backward of the tiles from the merged O and LSE */
        char *tdq = malloc((size_t)(B * nq * H * d) * es);
        for (int y = 0; y < 3; y++) {
            const int64_t k0 = kt[y], nk = kt[y + 1] - k0;
            void *tk = rows_of(k, B, N, Hkv * d, es, -1, k0, nk), *tv = rows_of(v, B, N, Hkv * d, es, -1, k0, nk);
            char *tdk = malloc((size_t)(B * nk * Hkv * d) * es), *tdv = malloc((size_t)(B * nk * Hkv * d) * es);
            uly_kernel_opts o;
            memset(&o, 0, sizeof o);
            o.block_q = 4; o.block_k = 8;
            o.q_begin = q0; o.q_count = nq; o.k_begin = k0; o.k_count = nk;
            ck_assert_int_eq(uly_attn_bwd(&a, &o, tq, tk, tv, acc_o, acc_l, tdo, tdq, tdk, tdv), ULY_OK);
            for (int64_t b = 0; b < B; b++)
                for (int64_t z = 0; z < nq * H * d; z++) {
                    size_t dst = (size_t)((b * N + q0) * H * d + z), src = (size_t)(b * nq * H * d + z);
                    if (t == ULY_F32) ((float *)dQ)[dst] += ((float *)tdq)[src]; else ((double *)dQ)[dst] += ((double *)tdq)[src];
                }
            for (int64_t b = 0; b < B; b++)
                for (int64_t z = 0; z < nk * Hkv * d; z++) {
                    size_t dst = (size_t)((b * N + k0) * Hkv * d + z), src = (size_t)(b * nk * Hkv * d + z);
                    if (t == ULY_F32) {
                        ((float *)dK)[dst] += ((float *)tdk)[src];
                        ((float *)dV)[dst] += ((float *)tdv)[src];
                    } else {
                        ((double *)dK)[dst] += ((double *)tdk)[src];
                        ((double *)dV)[dst] += ((double *)tdv)[src];
                    }
                }
            free(tk); free(tv); free(tdk); free(tdv);
        }
        free(tdq); free(tq); free(tdo); free(acc_o); free(acc_l); free(to); free(tl);
    }
    const void *const gots[5] = {O, L, dQ, dK, dV};
    check_five(&x, &p, t, gots, withdocs ? "tiles, documents" : "tiles");
    free(O); free(L); free(dQ); free(dK); free(dV);
    prep_free(&x);
    tu_problem_free(&p);
}
END_TEST

/* A tile where no query sees any key: O = 0, LSE = -inf, zero gradients, no NaN. */
START_TEST(tile_all_masked)
{
    const uly_dtype t = _i ? ULY_F64 : ULY_F32;
    const int64_t N = 20, H = 2, d = 4, nq = 5, nk = 6;
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = 1; a.seq = N; a.heads = H; a.kv_heads = 1; a.head_dim = d; a.dtype = t; a.causal = 1;
    const size_t es = uly_dtype_size(t);
    char *q = calloc((size_t)(nq * H * d), es), *k = calloc((size_t)(nk * d), es), *v = calloc((size_t)(nk * d), es);
    for (size_t i = 0; i < (size_t)(nq * H * d); i++)
        if (t == ULY_F32) ((float *)q)[i] = 0.5f; else ((double *)q)[i] = 0.5;
    char *o = malloc((size_t)(nq * H * d) * es), *l = malloc((size_t)(H * nq) * es);
    char *dq = malloc((size_t)(nq * H * d) * es), *dk = malloc((size_t)(nk * d) * es), *dv = malloc((size_t)(nk * d) * es);
    uly_kernel_opts op;
    memset(&op, 0, sizeof op);
    op.q_begin = 2; op.q_count = nq; op.k_begin = 10; op.k_count = nk; /* keys after every query */
    ck_assert_int_eq(uly_attn_fwd(&a, &op, q, k, v, o, l), ULY_OK);
    for (int64_t i = 0; i < H * nq; i++)
        ck_assert(tu_get(l, (size_t)i, t) == -INFINITY);
    for (int64_t i = 0; i < nq * H * d; i++)
        ck_assert(tu_get(o, (size_t)i, t) == 0);
    ck_assert_int_eq(uly_attn_bwd(&a, &op, q, k, v, o, l, q, dq, dk, dv), ULY_OK);
    for (int64_t i = 0; i < nq * H * d; i++)
        ck_assert(tu_get(dq, (size_t)i, t) == 0);
    for (int64_t i = 0; i < nk * d; i++)
        ck_assert(tu_get(dk, (size_t)i, t) == 0 && tu_get(dv, (size_t)i, t) == 0);
    /* merging -inf partials keeps O = 0 and LSE = -inf */
    char *o2 = calloc((size_t)(nq * H * d), es), *l2 = malloc((size_t)(H * nq) * es);
    memcpy(l2, l, (size_t)(H * nq) * es);
    ck_assert_int_eq(uly_attn_merge(t, 1, nq, H, d, o2, l2, o, l, 1), ULY_OK);
    for (int64_t i = 0; i < H * nq; i++)
        ck_assert(tu_get(l2, (size_t)i, t) == -INFINITY);
    for (int64_t i = 0; i < nq * H * d; i++)
        ck_assert(tu_get(o2, (size_t)i, t) == 0);
    /* and a tile outside the sequence is refused */
    op.k_begin = 15;
    ck_assert_int_eq(uly_attn_fwd(&a, &op, q, k, v, o, l), ULY_EINVAL);
    free(q); free(k); free(v); free(o); free(l); free(dq); free(dk); free(dv); free(o2); free(l2);
}
END_TEST

START_TEST(merge_and_bf16)
{
    /* one row, two partials: (O_a, L_a) = (1, log 1), (O_b, L_b) = (3, log 3): O = (1 + 9) / 4 */
    double o[1] = {1}, l[1] = {0}, ob[1] = {3}, lb[1] = {log(3.0)};
    ck_assert_int_eq(uly_attn_merge(ULY_F64, 1, 1, 1, 1, o, l, ob, lb, 0), ULY_OK);
    ck_assert_double_eq_tol(o[0], 2.5, 1e-15);
    ck_assert_double_eq_tol(l[0], log(4.0), 1e-15);
    float x[4] = {1.0f, 1.00390625f, 1.01171875f, -3.14159265f};
    uly_round_bf16(ULY_F32, x, 4);
    ck_assert(x[0] == 1.0f);
    ck_assert(x[1] == 1.0f);        /* 1 + 2^-8: a tie, to even */
    ck_assert(x[2] == 1.015625f);   /* 1 + 3 * 2^-8: a tie, to even (up) */
    ck_assert(x[3] == -3.140625f);
}
END_TEST


/* ---------------------------------------------------------------------
 * Code paths that must give the same bits: the SIMD levels of the
 * element-wise operations (each one forced) and the two backward schedules
 * (single KV-outer pass with 5 GEMMs, KV pass + Q pass with 7).
 */

/* The row operations of every level this CPU runs, bitwise, on rows of
 * every length 0..70 (all tails) holding normal values, values near the
 * clamps of 2^x, zeros of both signs and -inf. */
START_TEST(vops_levels_same_bits)
{
    const uly_vops *base = uly_vops_level(ULY_ISA_BASELINE);
    ck_assert_ptr_nonnull(base);
    enum { NMAX = 70 };
    float x[NMAX], y0[NMAX], y1[NMAX], p[NMAX], d0[NMAX], d1[NMAX];
    int tested = 0;
    for (int isa = ULY_ISA_BASELINE + 1; isa < ULY_ISA_COUNT; isa++) {
        const uly_vops *v = uly_vops_level(isa);
        if (!v) {
            printf("vops: level %s not supported here, not tested\n", uly_isa_name(isa));
            continue;
        }
        tested++;
        for (int n = 0; n <= NMAX; n++) {
            uint64_t st = 12345 + (uint64_t)n;
            for (int j = 0; j < n; j++) {
                st = st * 6364136223846793005ULL + 1442695040888963407ULL;
                double u = (double)(st >> 11) / 9007199254740992.0; /* [0, 1) */
                const float special[8] = {-INFINITY, -0.0f, 0.0f, -126.4f, -126.6f, 126.9f, -200.0f, 1e-30f};
                x[j] = j % 9 == 8 ? special[(j / 9) % 8] : (float)(u * 90.0 - 60.0);
                p[j] = (float)u;
                d0[j] = d1[j] = (float)(u * 3.0 - 1.5);
            }
            float m0 = base->row_max(x, n), m1 = v->row_max(x, n);
            ck_assert_msg(memcmp(&m0, &m1, 4) == 0, "%s row_max n=%d: %a vs %a", uly_isa_name(isa), n, m0, m1);
            const float shift = n ? m0 : 0.0f;
            memcpy(y0, x, sizeof x);
            memcpy(y1, x, sizeof x);
            float s0 = base->exp2_shift_sum(y0, n, shift == -INFINITY ? 0.0f : shift);
            float s1 = v->exp2_shift_sum(y1, n, shift == -INFINITY ? 0.0f : shift);
            ck_assert_msg(memcmp(&s0, &s1, 4) == 0, "%s exp sum n=%d: %a vs %a", uly_isa_name(isa), n, s0, s1);
            ck_assert_msg(memcmp(y0, y1, (size_t)n * 4) == 0, "%s exp n=%d differs", uly_isa_name(isa), n);
            /* in place with x - shift up to ~280: the upper clamp, the same at every level */
            float z0[NMAX], z1[NMAX];
            memcpy(z0, x, sizeof x);
            memcpy(z1, x, sizeof x);
            float t0 = base->exp2_shift_sum(z0, n, -150.0f), t1 = v->exp2_shift_sum(z1, n, -150.0f);
            ck_assert_msg(memcmp(&t0, &t1, 4) == 0, "%s exp sum, clamped, n=%d: %a vs %a", uly_isa_name(isa), n, t0,
                          t1);
            ck_assert_msg(memcmp(z0, z1, (size_t)n * 4) == 0, "%s exp, clamped, n=%d differs", uly_isa_name(isa), n);
            /* exp2_shift_sum_to (x <= shift: the row max): the same bits
             * into p, +0 left in x */
            float xs[NMAX], pt[NMAX];
            memcpy(xs, x, sizeof x);
            float s2 = v->exp2_shift_sum_to(xs, pt, n, shift == -INFINITY ? 0.0f : shift);
            ck_assert_msg(memcmp(&s0, &s2, 4) == 0, "%s exp sum to n=%d: %a vs %a", uly_isa_name(isa), n, s0, s2);
            ck_assert_msg(memcmp(y0, pt, (size_t)n * 4) == 0, "%s exp to n=%d differs", uly_isa_name(isa), n);
            for (int j = 0; j < n; j++)
                ck_assert_msg(memcmp(&xs[j], &(float){0.0f}, 4) == 0, "%s exp to n=%d: x[%d] = %a, not +0",
                              uly_isa_name(isa), n, j, xs[j]);
            base->ds_row(p, d0, n, 0.375f);
            v->ds_row(p, d1, n, 0.375f);
            ck_assert_msg(memcmp(d0, d1, (size_t)n * 4) == 0, "%s dS n=%d differs", uly_isa_name(isa), n);
            /* exp2_ds_row, at this level and the baseline: the bits of
             * exp2_shift_sum followed by ds_row (the baseline's), with the
             * row max as shift and with -150 (the upper clamp) */
            for (int c = 0; c < 2; c++) {
                const float sh = c ? -150.0f : shift == -INFINITY ? 0.0f : shift;
                float ra[NMAX], rb[NMAX], da[NMAX], db[NMAX], dc[NMAX];
                memcpy(ra, x, sizeof x);
                memcpy(rb, x, sizeof x);
                memcpy(da, d1, sizeof d1);
                memcpy(db, d1, sizeof d1);
                memcpy(dc, d1, sizeof d1);
                base->exp2_shift_sum(ra, n, sh);
                base->ds_row(ra, da, n, -0.625f);
                v->exp2_ds_row(rb, db, n, sh, -0.625f);
                ck_assert_msg(memcmp(ra, rb, (size_t)n * 4) == 0 && memcmp(da, db, (size_t)n * 4) == 0,
                              "%s exp2_ds_row n=%d shift %a differs from exp then dS", uly_isa_name(isa), n, sh);
                memcpy(rb, x, sizeof x);
                base->exp2_ds_row(rb, dc, n, sh, -0.625f);
                ck_assert_msg(memcmp(ra, rb, (size_t)n * 4) == 0 && memcmp(da, dc, (size_t)n * 4) == 0,
                              "baseline exp2_ds_row n=%d shift %a differs from exp then dS", n, sh);
            }
        }
    }
    printf("vops: %d level(s) beyond the baseline compared bitwise\n", tested);
    /* 2^x itself: within 2 ulp of libm's exp2 on [-126, 127] (1.15 measured) */
    float e[1];
    for (double t = -126.0; t <= 127.0; t += 0.0137) {
        e[0] = (float)t;
        base->exp2_shift_sum(e, 1, 0.0f);
        double ref = exp2((double)(float)t);
        ck_assert_msg(fabs(e[0] - ref) <= 2 * ref * 0x1p-23, "2^%g = %a, libm %a", t, e[0], ref);
    }
    /* exact at the integers; above 127 clamped to 2^127 (in place only) */
    const float pow_in[4] = {-3.0f, 0.0f, 10.0f, 1000.0f}, pow_out[4] = {0.125f, 1.0f, 1024.0f, 0x1p127f};
    for (int i = 0; i < 4; i++) {
        e[0] = pow_in[i];
        base->exp2_shift_sum(e, 1, 0.0f);
        ck_assert_msg(e[0] == pow_out[i], "2^%g = %a", pow_in[i], e[0]);
    }
    /* below -126.5 exactly +0 (n = -127), -inf included; subnormal above */
    const float zero_in[4] = {-126.6f, -127.0f, -1000.0f, -INFINITY};
    for (int i = 0; i < 4; i++) {
        e[0] = zero_in[i];
        base->exp2_shift_sum(e, 1, 0.0f);
        ck_assert_msg(memcmp(&e[0], &(float){0.0f}, 4) == 0, "2^%g = %a, not +0", zero_in[i], e[0]);
    }
    e[0] = -126.4f;
    base->exp2_shift_sum(e, 1, 0.0f);
    ck_assert_msg(e[0] > 0 && e[0] < 0x1p-126f && fabs(e[0] - exp2((double)-126.4f)) <= 0x1p-148, "2^-126.4 = %a",
                  e[0]);
}
END_TEST

/* 2^x for |x| <= 1/2 is the polynomial alone (n = 0; +-1 at x = +-1/2,
 * ties to even): at every level it must be the Horner chain of libm's fmaf,
 * bit for bit.  The baseline rounds each step on the float grid of the
 * binade its result lies in (vexp_impl.h), which is exact only if the
 * result stays where the code assumes: swept here on every 509th float of
 * [-1/2, 1/2], on every float around the point where p1 reaches 1/4 (which
 * must be ULY_EXP2_P1_QUARTER), densely next to f = 0 (y next to 1), at
 * the ends of the range and on subnormal f. */
static float exp2_poly_fmaf(float f)
{
    static const float c[6] = {ULY_EXP2_C5, ULY_EXP2_C4, ULY_EXP2_C3,
                               ULY_EXP2_C2, ULY_EXP2_C1, 1.0f};
    float p = ULY_EXP2_C6;
    for (int k = 0; k < 6; k++)
        p = fmaf(p, f, c[k]);
    return p;
}

static void poly_check_range(uint32_t lo, uint32_t hi, uint32_t step, long *checked)
{
    enum { NB = 4096 };
    static float x[NB], y[NB], ref[NB];
    for (int sg = 0; sg < 2; sg++) {
        uint32_t u = lo;
        while (u <= hi) {
            int n = 0;
            for (; n < NB && u <= hi; n++, u = u + step < u ? hi + 1 : u + step) {
                uint32_t bits = u | (sg ? 0x80000000u : 0u);
                memcpy(&x[n], &bits, 4);
                /* n = round(x) ties to even, as the kernels do: +-1 at +-1/2 */
                const float nf = (x[n] + 12583039.0f) - 12583039.0f;
                ref[n] = ldexpf(exp2_poly_fmaf(x[n] - nf), (int)nf);
            }
            for (int isa = 0; isa < ULY_ISA_COUNT; isa++) {
                const uly_vops *v = uly_vops_level(isa);
                if (!v)
                    continue;
                memcpy(y, x, (size_t)n * 4);
                v->exp2_shift_sum(y, n, 0.0f);
                if (memcmp(y, ref, (size_t)n * 4))
                    for (int j = 0; j < n; j++)
                        ck_assert_msg(memcmp(&y[j], &ref[j], 4) == 0, "%s: 2^%a = %a, fmaf chain %a",
                                      uly_isa_name(isa), x[j], y[j], ref[j]);
                *checked += n;
            }
        }
    }
}

START_TEST(exp2_poly_is_fmaf_chain)
{
    /* ULY_TEST_EXP2_ALL=1: every float of [-1/2, 1/2] (2^31 values, minutes) */
    const char *all = getenv("ULY_TEST_EXP2_ALL");
    const uint32_t step = all && !strcmp(all, "1") ? 1 : 509;
    long checked = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    poly_check_range(0, 0x3f000000u, step, &checked); /* [0, 1/2], both signs */
    /* p1 = fma(p2, f, c3) crosses 1/4: find the first f > 0 where it does */
    uint32_t cross = 0x3e000000u; /* 0.125 */
    for (; cross < 0x3e800000u; cross++) {
        float f, p = ULY_EXP2_C6;
        memcpy(&f, &cross, 4);
        p = fmaf(fmaf(fmaf(fmaf(p, f, ULY_EXP2_C5), f, ULY_EXP2_C4), f, ULY_EXP2_C3), f,
                 ULY_EXP2_C2);
        if (p >= 0.25f)
            break;
    }
    ck_assert_uint_lt(cross, 0x3e800000u);
    float fq;
    memcpy(&fq, &cross, 4);
    ck_assert_msg(fq == (float)ULY_EXP2_P1_QUARTER, "p1 reaches 1/4 at f = %a, not %a", fq, ULY_EXP2_P1_QUARTER);
    poly_check_range(cross - 30000, cross + 30000, 1, &checked);
    poly_check_range(0x32000000u, 0x35000000u, 61, &checked); /* |f| near 2^-27..2^-21: y next to 1 */
    poly_check_range(0x3effff00u, 0x3f000000u, 1, &checked);   /* |f| up to 1/2 */
    poly_check_range(0, 0x00001000u, 1, &checked);             /* subnormal f */
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    printf("2^f: %ld values compared with the fmaf chain (%.2f s of CPU)\n", checked,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
}
END_TEST

/* The baseline level's fused multiply-add: correctly rounded, i.e. equal to
 * libm's fmaf, on random triples and on the cases where rounding a b + c
 * to double first lands exactly halfway between two floats (a b = 2^-24 -
 * j^2 2^-70 beside c = 1 + 2^-23 or 1 + 2^-22: the plain double sum would
 * round the tie to even, the exact value lies below it), on both signs, and
 * on results below the normal float range. */
START_TEST(fmaf_exact_rounding)
{
    uint64_t st = 99;
    for (int i = 0; i < 2000000; i++) {
        float v[3];
        for (int k = 0; k < 3; k++) {
            st = st * 6364136223846793005ULL + 1442695040888963407ULL;
            uint32_t bits = (uint32_t)(st >> 32);
            /* exponents near one another most of the time, so that a b and c overlap */
            if (i % 4)
                bits = (bits & 0x807fffffu) | ((uint32_t)(120 + (st >> 20) % 16) << 23);
            memcpy(&v[k], &bits, 4);
        }
        if (isnan(v[0]) || isnan(v[1]) || isnan(v[2]))
            continue;
        float r = uly_fmaf_exact(v[0], v[1], v[2]), ref = fmaf(v[0], v[1], v[2]);
        ck_assert_msg(memcmp(&r, &ref, 4) == 0 || (isnan(r) && isnan(ref)), "fma(%a, %a, %a) = %a, libm %a", v[0],
                      v[1], v[2], r, ref);
    }
    int ties = 0;
    for (int j = 1; j <= 4000; j++)
        for (int sg = 0; sg < 4; sg++) {
            const float a = 1.0f - (float)j * 0x1p-23f, b = 0x1p-24f * (1.0f + (float)j * 0x1p-23f);
            const float c = sg & 1 ? 1.0f + 0x1p-22f : 1.0f + 0x1p-23f, m = sg & 2 ? -1.0f : 1.0f;
            const double s = (double)a * (double)b + (double)c;
            ties += (float)s != fmaf(a, b, c);
            float r = uly_fmaf_exact(m * a, b, m * c), ref = fmaf(m * a, b, m * c);
            ck_assert_msg(memcmp(&r, &ref, 4) == 0, "fma(%a, %a, %a) = %a, libm %a", m * a, b, m * c, r, ref);
        }
    ck_assert_msg(ties > 0, "no double-rounding case was constructed");
    for (int j = 1; j < 1000; j++) { /* subnormal results */
        const float a = 0x1p-70f * (1.0f + (float)j * 0x1p-20f), b = 0x1p-70f * (1.0f - (float)j * 0x1p-21f);
        const float c = -0x1p-140f * (float)(j % 7);
        float r = uly_fmaf_exact(a, b, c), ref = fmaf(a, b, c);
        ck_assert_msg(memcmp(&r, &ref, 4) == 0, "fma(%a, %a, %a) = %a, libm %a", a, b, c, r, ref);
    }
}
END_TEST

typedef struct path_case {
    const char *name;
    int64_t B, N, H, Hkv, d;
    int causal;
    int64_t window;
    int docs;                 /* use the document offsets below */
    int64_t hb, hc;           /* head subset (hc = 0: all) */
    int64_t qb, qc, kb, kc;   /* tile (qc = 0: whole) */
} path_case;

static const path_case path_cases[] = {
    {"no mask, GQA", 2, 61, 4, 2, 24, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"causal, GQA", 2, 61, 4, 2, 24, 1, 0, 0, 0, 0, 0, 0, 0, 0},
    {"window", 2, 61, 4, 2, 24, 0, 7, 0, 0, 0, 0, 0, 0, 0},
    {"causal window", 2, 61, 4, 2, 24, 1, 7, 0, 0, 0, 0, 0, 0, 0},
    {"documents", 2, 61, 4, 2, 24, 0, 0, 1, 0, 0, 0, 0, 0, 0},
    {"documents, causal", 2, 61, 4, 2, 24, 1, 0, 1, 0, 0, 0, 0, 0, 0},
    {"documents, causal window", 2, 61, 4, 2, 24, 1, 7, 1, 0, 0, 0, 0, 0, 0},
    {"MQA, causal", 1, 75, 3, 1, 40, 1, 0, 0, 0, 0, 0, 0, 0, 0},
    {"head subset cutting a KV group", 2, 61, 4, 2, 24, 1, 0, 1, 1, 2, 0, 0, 0, 0},
    {"tile with documents", 2, 61, 4, 2, 24, 1, 0, 1, 0, 0, 20, 30, 5, 40},
};
#define NPATHS (int)(sizeof path_cases / sizeof path_cases[0])

/* The problem of a path case (B = 2 rows of 5 documents when it has them). */
static uly_attn_desc path_desc(const path_case *c, uly_dtype t)
{
    static const int64_t off[2][6] = {{0, 11, 30, 30, 61, 61}, {0, 1, 20, 33, 47, 61}};
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = c->B; a.seq = c->N; a.heads = c->H; a.kv_heads = c->Hkv; a.head_dim = c->d; a.dtype = t;
    a.causal = c->causal; a.window = c->window;
    if (c->docs) {
        a.doc_offsets = &off[0][0];
        a.docs = 5;
    }
    return a;
}

/* A path case's head, query and key ranges, in small blocks (8 x 16). */
static uly_kernel_opts path_opts(const path_case *c)
{
    uly_kernel_opts o;
    memset(&o, 0, sizeof o);
    o.block_q = 8;
    o.block_k = 16;
    o.head_begin = c->hb;
    o.head_count = c->hc;
    o.kv_expanded = c->hc != 0;
    o.q_begin = c->qb; o.q_count = c->qc; o.k_begin = c->kb; o.k_count = c->kc;
    return o;
}

/* The next uniform value in [-1, 1) of the generator *st (64-bit LCG). */
static double lcg_sym(uint64_t *st)
{
    *st = *st * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*st >> 11) / 4503599627370496.0 - 1.0;
}

/* n values of lcg_sym in dtype t. */
static void fill_sym(void *x, size_t n, uly_dtype t, uint64_t *st)
{
    for (size_t i = 0; i < n; i++) {
        const double u = lcg_sym(st);
        if (t == ULY_F32)
            ((float *)x)[i] = (float)u;
        else
            ((double *)x)[i] = u;
    }
}

START_TEST(paths_same_bits)
{
    const path_case *c = &path_cases[_i / 2];
    const uly_dtype t = _i % 2 ? ULY_F64 : ULY_F32;
    const size_t es = uly_dtype_size(t);
    const uly_attn_desc a = path_desc(c, t);
    const int64_t hq = c->hc ? c->hc : c->H, nq = c->qc ? c->qc : c->N, nk = c->kc ? c->kc : c->N;
    int64_t kvb, kvc;
    uly_kv_range(&a, c->hb, hq, &kvb, &kvc);
    const int64_t hk = c->hc ? kvc : c->Hkv, hg = c->hc ? hq : hk; /* KV heads held / of the gradients */
    const size_t n_q = (size_t)(c->B * nq * hq * c->d), n_k = (size_t)(c->B * nk * hk * c->d);
    const size_t n_g = (size_t)(c->B * nk * hg * c->d), n_l = (size_t)(c->B * hq * nq);
    uint64_t st = 777 + (uint64_t)_i;
    void *in[4];
    const size_t nin[4] = {n_q, n_k, n_k, n_q};
    for (int x = 0; x < 4; x++) {
        in[x] = malloc(nin[x] * es);
        fill_sym(in[x], nin[x], t, &st);
    }
    uly_kernel_opts o = path_opts(c);
    const size_t ns[5] = {n_q, n_l, n_q, n_g, n_g};
    void *ref[5] = {NULL}, *got[5];
    for (int x = 0; x < 5; x++)
        got[x] = malloc(ns[x] * es);
    int runs = 0;
    const int nisa = t == ULY_F32 ? ULY_ISA_COUNT : 1;
    for (int isa = 0; isa < nisa; isa++) {
        if (t == ULY_F32) {
            if (!uly_vops_level(isa))
                continue;
            ck_assert_int_eq(uly_kernel_set_isa(uly_isa_name(isa)), ULY_OK);
            ck_assert_str_eq(uly_kernel_isa(), uly_isa_name(isa));
        }
        for (int sched = ULY_BWD_AUTO; sched <= ULY_BWD_TWO; sched++)
            for (int th = 1; th <= 3; th += 2) {
                o.bwd_pass = sched;
                o.threads = th;
                for (int x = 0; x < 5; x++)
                    memset(got[x], 0x5a, ns[x] * es); /* every element must be written */
                ck_assert_int_eq(uly_attn_fwd(&a, &o, in[0], in[1], in[2], got[0], got[1]), ULY_OK);
                ck_assert_int_eq(uly_attn_bwd(&a, &o, in[0], in[1], in[2], got[0], got[1], in[3], got[2], got[3],
                                              got[4]), ULY_OK);
                runs++;
                if (!ref[0]) {
                    for (int x = 0; x < 5; x++) {
                        ref[x] = malloc(ns[x] * es);
                        memcpy(ref[x], got[x], ns[x] * es);
                    }
                    continue;
                }
                static const char *const names[5] = {"O", "LSE", "dQ", "dK", "dV"};
                for (int x = 0; x < 5; x++)
                    ck_assert_msg(same_bits(ref[x], got[x], ns[x] * es), "%s %s: %s differs with %s, %s, %d threads",
                                  t == ULY_F32 ? "fp32" : "fp64", c->name, names[x],
                                  t == ULY_F32 ? uly_isa_name(isa) : "fp64",
                                  sched == ULY_BWD_SINGLE ? "single pass" : sched == ULY_BWD_TWO ? "two passes" : "auto",
                                  th);
            }
    }
    ck_assert_int_eq(uly_kernel_set_isa("auto"), ULY_OK);
    ck_assert_int_ge(runs, 6);
    for (int x = 0; x < 5; x++) {
        free(ref[x]);
        free(got[x]);
    }
    for (int x = 0; x < 4; x++)
        free(in[x]);
}
END_TEST

/* The rows hook: a tensor whose rows are handed over only when the kernel
 * asks for them (poisoned with NaN until then), or snapshotted when the
 * kernel says they are final.  lse = 1: (B*H, N) rows are columns. */
typedef struct lazy_t {
    const char *src;
    char *dst;
    int64_t B, N, W; /* (B, N, W) or, lse, (B*W, N) */
    int lse;
} lazy_t;

static void lazy_rows(const lazy_t *x, size_t es, int64_t from, int64_t to)
{
    if (x->lse) {
        for (int64_t r = 0; r < x->B * x->W; r++)
            memcpy(x->dst + (size_t)(r * x->N + from) * es, x->src + (size_t)(r * x->N + from) * es,
                   (size_t)(to - from) * es);
        return;
    }
    for (int64_t b = 0; b < x->B; b++)
        memcpy(x->dst + (size_t)((b * x->N + from) * x->W) * es, x->src + (size_t)((b * x->N + from) * x->W) * es,
               (size_t)((to - from) * x->W) * es);
}

typedef struct lazy {
    size_t es;
    lazy_t side[4][4]; /* per event: the tensors it moves */
    int n[4];
    int64_t end[4];
    int calls[4];
    int bad;
} lazy;

static void lazy_hook(void *user, int ev, int64_t end)
{
    lazy *L = user;
    if (ev < 0 || ev > 3 || end <= L->end[ev]) {
        L->bad = 1;
        return;
    }
    for (int x = 0; x < L->n[ev]; x++)
        lazy_rows(&L->side[ev][x], L->es, L->end[ev], end);
    L->end[ev] = end;
    L->calls[ev]++;
}

static lazy_t lazy_of(const void *src, void *dst, int64_t B, int64_t N, int64_t W, int lse)
{
    return (lazy_t){src, dst, B, N, W, lse};
}

/* With the rows hook, inputs arrive only when asked for and outputs are
 * taken when announced final: the results are the bits of a call without
 * it, every input row is asked for before use (a row not yet handed over is
 * NaN), and no output row changes after it was announced. */
START_TEST(rows_hook_lazy)
{
    const path_case *c = &path_cases[_i / 2];
    const uly_dtype t = _i % 2 ? ULY_F64 : ULY_F32;
    const size_t es = uly_dtype_size(t);
    const uly_attn_desc a = path_desc(c, t);
    const int64_t B = c->B, d = c->d, hq = c->hc ? c->hc : c->H, nq = c->qc ? c->qc : c->N;
    const int64_t nk = c->kc ? c->kc : c->N;
    int64_t kvb, kvc;
    uly_kv_range(&a, c->hb, hq, &kvb, &kvc);
    const int64_t hk = c->hc ? kvc : c->Hkv, hg = c->hc ? hq : hk;
    const size_t n_q = (size_t)(B * nq * hq * d), n_k = (size_t)(B * nk * hk * d);
    const size_t n_g = (size_t)(B * nk * hg * d), n_l = (size_t)(B * hq * nq);
    const size_t ns[9] = {n_q, n_k, n_k, n_q, n_q, n_l, n_q, n_g, n_g}; /* Q K V dO | O LSE dQ dK dV */
    void *ref[9], *got[9], *lz[6], *snap[5];
    uint64_t st = 4242 + (uint64_t)_i;
    for (int x = 0; x < 9; x++) {
        ref[x] = malloc(ns[x] * es);
        got[x] = malloc(ns[x] * es);
    }
    for (int x = 0; x < 4; x++)
        fill_sym(ref[x], ns[x], t, &st);
    for (int x = 0; x < 6; x++) /* lazy copies of Q K V dO O LSE */
        lz[x] = malloc(ns[x] * es);
    for (int x = 0; x < 5; x++)
        snap[x] = malloc(ns[4 + x] * es);
    uly_kernel_opts o = path_opts(c);
    o.threads = 1;
    ck_assert_int_eq(uly_attn_fwd(&a, &o, ref[0], ref[1], ref[2], ref[4], ref[5]), ULY_OK);
    ck_assert_int_eq(uly_attn_bwd(&a, &o, ref[0], ref[1], ref[2], ref[4], ref[5], ref[3], ref[6], ref[7], ref[8]),
                     ULY_OK);
    static const char *const names[9] = {"Q", "K", "V", "dO", "O", "LSE", "dQ", "dK", "dV"};
    for (int sched = ULY_BWD_AUTO; sched <= ULY_BWD_TWO; sched++)
        for (int th = 1; th <= 3; th += 2) {
            o.bwd_pass = sched;
            o.threads = th;
            for (int x = 0; x < 6; x++)
                memset(lz[x], 0xff, ns[x] * es); /* NaN until handed over */
            for (int x = 4; x < 9; x++)
                memset(got[x], 0x5a, ns[x] * es);
            for (int x = 0; x < 5; x++)
                memset(snap[x], 0x33, ns[4 + x] * es);
            lazy L;
            memset(&L, 0, sizeof L);
            L.es = es;
            L.n[ULY_ROWS_NEED_Q] = 1;
            L.side[ULY_ROWS_NEED_Q][0] = lazy_of(ref[0], lz[0], B, nq, hq * d, 0);
            L.n[ULY_ROWS_NEED_K] = 2;
            L.side[ULY_ROWS_NEED_K][0] = lazy_of(ref[1], lz[1], B, nk, hk * d, 0);
            L.side[ULY_ROWS_NEED_K][1] = lazy_of(ref[2], lz[2], B, nk, hk * d, 0);
            L.n[ULY_ROWS_DONE_Q] = 2;
            L.side[ULY_ROWS_DONE_Q][0] = lazy_of(got[4], snap[0], B, nq, hq * d, 0);
            L.side[ULY_ROWS_DONE_Q][1] = lazy_of(got[5], snap[1], B, nq, hq, 1);
            o.rows = lazy_hook;
            o.rows_user = &L;
            ck_assert_int_eq(uly_attn_fwd(&a, &o, lz[0], lz[1], lz[2], got[4], got[5]), ULY_OK);
            ck_assert_msg(!L.bad, "forward: an event's end did not grow");
            ck_assert_int_eq(L.end[ULY_ROWS_NEED_Q], nq);
            ck_assert_int_eq(L.end[ULY_ROWS_DONE_Q], nq);
            if (th == 1 && nk > o.block_k)
                ck_assert_int_gt(L.calls[ULY_ROWS_NEED_K], 1); /* one thread: block by block */
            ck_assert_msg(same_bits(snap[0], got[4], ns[4] * es) && same_bits(snap[1], got[5], ns[5] * es),
                          "%s: O or LSE changed after its rows were announced final", c->name);
            /* backward: Q, dO, O, LSE on the query side; the forward's O, LSE */
            for (int x = 0; x < 4; x++)
                memset(lz[x], 0xff, ns[x] * es);
            memset(&L, 0, sizeof L);
            L.es = es;
            L.n[ULY_ROWS_NEED_Q] = 4;
            L.side[ULY_ROWS_NEED_Q][0] = lazy_of(ref[0], lz[0], B, nq, hq * d, 0);
            L.side[ULY_ROWS_NEED_Q][1] = lazy_of(ref[3], lz[3], B, nq, hq * d, 0);
            L.side[ULY_ROWS_NEED_Q][2] = lazy_of(ref[4], lz[4], B, nq, hq * d, 0);
            L.side[ULY_ROWS_NEED_Q][3] = lazy_of(ref[5], lz[5], B, nq, hq, 1);
            L.n[ULY_ROWS_NEED_K] = 2;
            L.side[ULY_ROWS_NEED_K][0] = lazy_of(ref[1], lz[1], B, nk, hk * d, 0);
            L.side[ULY_ROWS_NEED_K][1] = lazy_of(ref[2], lz[2], B, nk, hk * d, 0);
            L.n[ULY_ROWS_DONE_Q] = 1;
            L.side[ULY_ROWS_DONE_Q][0] = lazy_of(got[6], snap[2], B, nq, hq * d, 0);
            L.n[ULY_ROWS_DONE_K] = 2;
            L.side[ULY_ROWS_DONE_K][0] = lazy_of(got[7], snap[3], B, nk, hg * d, 0);
            L.side[ULY_ROWS_DONE_K][1] = lazy_of(got[8], snap[4], B, nk, hg * d, 0);
            ck_assert_int_eq(uly_attn_bwd(&a, &o, lz[0], lz[1], lz[2], lz[4], lz[5], lz[3], got[6], got[7], got[8]),
                             ULY_OK);
            ck_assert_msg(!L.bad, "backward: an event's end did not grow");
            ck_assert_int_eq(L.end[ULY_ROWS_DONE_Q], nq);
            ck_assert_int_eq(L.end[ULY_ROWS_DONE_K], nk);
            if (th == 1 && uly_attn_bwd_schedule(&a, &o) == ULY_BWD_SINGLE && nk > o.block_k)
                ck_assert_int_gt(L.calls[ULY_ROWS_DONE_K], 1);
            for (int x = 4; x < 9; x++)
                ck_assert_msg(same_bits(ref[x], got[x], ns[x] * es), "%s %s: %s differs with the rows hook (%s, %d threads)",
                              t == ULY_F32 ? "fp32" : "fp64", c->name, names[x],
                              sched == ULY_BWD_SINGLE ? "single pass" : sched == ULY_BWD_TWO ? "two passes" : "auto", th);
            for (int x = 2; x < 5; x++)
                ck_assert_msg(same_bits(snap[x], got[4 + x], ns[4 + x] * es),
                              "%s: %s changed after its rows were announced final", c->name, names[4 + x]);
        }
    for (int x = 0; x < 9; x++) {
        free(ref[x]);
        free(got[x]);
    }
    for (int x = 0; x < 6; x++)
        free(lz[x]);
    for (int x = 0; x < 5; x++)
        free(snap[x]);
}
END_TEST

/* ---------------------------------------------------------------------
 * The forward computes S = scale Q K^T with beta = 1 into a buffer its exp
 * pass leaves at +0, instead of beta = 0 (OpenBLAS then zeroes C in a pass
 * of its own, GEMM_BETA, before the same kernel accumulates alpha A B into
 * C: driver/level3/level3.c).  Values mixing -0.0, large, tiny and
 * subnormal numbers, so that some products and sums are exact zeros of
 * either sign, underflow or are huge. */
static float special_value(uint64_t *st, int i)
{
    const double u = lcg_sym(st);
    switch (i % 11) {
    case 3: return -0.0f;
    case 5: return (float)(u * 1e30);
    case 7: return (float)(u * 1e-30);
    case 9: return (float)(u * 1e-40); /* subnormal */
    default: return (float)(u * 4.0);
    }
}

/* cblas_sgemm(alpha, beta = 1) on C = +0 gives the bits of beta = 0 on any
 * C above OpenBLAS's small-matrix bound (M N K > 100^3, where every call
 * goes through GEMM_BETA + the blocked kernel).  Below it the AVX-512 cores
 * have small kernels in a beta = 0 variant storing alpha r and a general
 * one storing alpha r + beta C: the same values, but where alpha r
 * underflows to -0 the general one gives +0, so there only the sign of a
 * zero may differ; fwd_beta_one_same_bits shows that the sign of a zero in
 * S never reaches O or LSE. */
START_TEST(sgemm_beta_one_on_zeros)
{
    static const int shp[][3] = {{512, 256, 128}, {300, 200, 40}, {129, 77, 128}, {33, 7, 64}, {8, 16, 5}};
    const int sh = _i;
    const int M = shp[sh][0], Nn = shp[sh][1], K = shp[sh][2];
    const int large = (double)M * Nn * K > 1e6;
    uint64_t st = 99 + (uint64_t)sh;
    float *A = malloc((size_t)M * K * 4), *B = malloc((size_t)Nn * K * 4);
    float *C0 = malloc((size_t)M * Nn * 4), *C1 = malloc((size_t)M * Nn * 4);
    for (int i = 0; i < M * K; i++)
        A[i] = special_value(&st, i);
    for (int i = 0; i < Nn * K; i++)
        B[i] = special_value(&st, i + 5);
    for (int c = 0; c < K; c++) { /* A row 1 all -0, B row 2 positive: products -0, C[1][2] = 0 */
        A[1 * K + c] = -0.0f;
        B[2 * K + c] = 1.0f + (float)c;
    }
    int zeros = 0;
    for (int rep = 0; rep < 2; rep++) {
        const float alpha = rep ? 0.08838834764831845f : 1.0f;
        for (int i = 0; i < M * Nn; i++) {
            C0[i] = NAN; /* beta = 0 must not read C */
            C1[i] = 0.0f;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, Nn, K, alpha, A, K, B, K, 0, C0, Nn);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, Nn, K, alpha, A, K, B, K, 1, C1, Nn);
        for (int i = 0; i < M * Nn; i++) {
            zeros += C0[i] == 0;
            if (large || C0[i] != 0)
                ck_assert_msg(memcmp(&C0[i], &C1[i], 4) == 0, "%dx%dx%d alpha %g: C[%d] %a (beta 0) vs %a (beta 1)",
                              M, Nn, K, alpha, i, C0[i], C1[i]);
            else
                ck_assert_msg(C1[i] == 0, "%dx%dx%d: C[%d] 0 (beta 0) vs %a (beta 1)", M, Nn, K, i, C1[i]);
        }
    }
    ck_assert_int_gt(zeros, 0); /* exact zeros do occur (row 1 of A) */
    free(A); free(B); free(C0); free(C1);
}
END_TEST

/* The forward with beta = 1 on zeros gives the bits of the forward with
 * the BLAS's zeroing pass, at every SIMD level and in fp64: tails, small
 * blocks (small-matrix GEMMs), masks that leave blocks and whole rows
 * invisible, windows, and inputs with -0 rows, large and tiny values. */
START_TEST(fwd_beta_one_same_bits)
{
    static const struct { int64_t B, N, H, Hkv, d; int causal; int64_t window, bq, bk; } cs[] = {
        {1, 300, 2, 1, 16, 1, 0, 32, 48},   /* small GEMMs, causal */
        {2, 257, 2, 2, 40, 0, 33, 64, 40},  /* window: rows with nothing visible in early blocks */
        {1, 700, 1, 1, 64, 1, 0, 0, 0},     /* default blocks, tails */
        {1, 1100, 2, 1, 128, 0, 0, 0, 0},   /* default blocks, several key blocks */
    };
    const int c = _i / 2;
    const uly_dtype t = _i % 2 ? ULY_F64 : ULY_F32;
    const size_t es = uly_dtype_size(t);
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = cs[c].B; a.seq = cs[c].N; a.heads = cs[c].H; a.kv_heads = cs[c].Hkv; a.head_dim = cs[c].d;
    a.causal = cs[c].causal; a.window = cs[c].window; a.dtype = t;
    const int64_t d = a.head_dim;
    const size_t nq = (size_t)(a.batch * a.seq * a.heads * d), nk = (size_t)(a.batch * a.seq * a.kv_heads * d);
    const size_t nl = (size_t)(a.batch * a.heads * a.seq);
    void *in[3] = {malloc(nq * es), malloc(nk * es), malloc(nk * es)};
    const size_t nin[3] = {nq, nk, nk};
    uint64_t st = 4242 + (uint64_t)_i;
    for (int x = 0; x < 3; x++)
        for (size_t i = 0; i < nin[x]; i++) {
            /* scores from 1e30-sized entries overflow: keep q and k to +-4 and tiny/-0 */
            float f = special_value(&st, (int)(i % 1000003));
            if (x < 2 && fabsf(f) > 4)
                f = f > 0 ? 30.0f : -30.0f; /* large scores: exp underflows to 0 */
            if (t == ULY_F32)
                ((float *)in[x])[i] = f;
            else
                ((double *)in[x])[i] = f;
        }
    for (size_t r = 0; r < nq / (size_t)d; r += 7) /* whole -0 query rows: S rows of exact zeros */
        for (int64_t c2 = 0; c2 < d; c2++) {
            if (t == ULY_F32)
                ((float *)in[0])[r * (size_t)d + (size_t)c2] = -0.0f;
            else
                ((double *)in[0])[r * (size_t)d + (size_t)c2] = -0.0;
        }
    void *o0 = malloc(nq * es), *l0 = malloc(nl * es), *o1 = malloc(nq * es), *l1 = malloc(nl * es);
    uly_kernel_opts op;
    memset(&op, 0, sizeof op);
    op.block_q = cs[c].bq;
    op.block_k = cs[c].bk;
    int runs = 0;
    const int nisa = t == ULY_F32 ? ULY_ISA_COUNT : 1;
    for (int isa = 0; isa < nisa; isa++) {
        if (t == ULY_F32) {
            if (!uly_vops_level(isa))
                continue;
            ck_assert_int_eq(uly_kernel_set_isa(uly_isa_name(isa)), ULY_OK);
        }
        for (int th = 1; th <= 2; th++) {
            op.threads = th;
            uly_kernel_fwd_zero_pass(1);
            ck_assert_int_eq(uly_attn_fwd(&a, &op, in[0], in[1], in[2], o0, l0), ULY_OK);
            uly_kernel_fwd_zero_pass(0);
            memset(o1, 0x5a, nq * es);
            memset(l1, 0x5a, nl * es);
            ck_assert_int_eq(uly_attn_fwd(&a, &op, in[0], in[1], in[2], o1, l1), ULY_OK);
            ck_assert_msg(same_bits(o0, o1, nq * es) && same_bits(l0, l1, nl * es),
                          "case %d %s %s, %d threads: beta = 1 on zeros differs from the zeroing pass", c,
                          t == ULY_F32 ? "fp32" : "fp64", t == ULY_F32 ? uly_isa_name(isa) : "", th);
            runs++;
        }
    }
    ck_assert_int_eq(uly_kernel_set_isa("auto"), ULY_OK);
    ck_assert_int_ge(runs, 2);
    for (int x = 0; x < 3; x++)
        free(in[x]);
    free(o0); free(l0); free(o1); free(l1);
}
END_TEST

START_TEST(isa_and_schedule_arguments)
{
    ck_assert_int_eq(uly_kernel_set_isa("sse9"), ULY_EINVAL);
    ck_assert_int_eq(uly_kernel_set_isa(NULL), ULY_EINVAL);
    ck_assert_int_eq(uly_kernel_set_isa("baseline"), ULY_OK);
    ck_assert_str_eq(uly_kernel_isa(), "baseline");
    ck_assert_int_eq(uly_kernel_set_isa("auto"), ULY_OK);
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = 1; a.seq = 4; a.heads = 1; a.kv_heads = 1; a.head_dim = 2; a.dtype = ULY_F32;
    float x[8] = {0}, o[8], l[4], g[3][8];
    uly_kernel_opts op;
    memset(&op, 0, sizeof op);
    op.bwd_pass = 3;
    ck_assert_int_eq(uly_attn_bwd(&a, &op, x, x, x, o, l, x, g[0], g[1], g[2]), ULY_EINVAL);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "backward schedule"));
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
    tcase_add_loop_test(td, deterministic_threads_and_subsets, 0, 4);
    tcase_add_loop_test(td, split_single_pass_same_bits, 0, 8);
    tcase_add_test(td, workspace_size);
    tcase_add_test(td, rejects_bad_arguments);
    suite_add_tcase(s, td);
    TCase *tt = tcase_create("documents_tiles");
    tcase_set_timeout(tt, 120);
    tcase_add_loop_test(tt, documents_vs_alone, 0, 8);
    tcase_add_loop_test(tt, tiles_merge, 0, 4);
    tcase_add_loop_test(tt, tile_all_masked, 0, 2);
    tcase_add_test(tt, merge_and_bf16);
    suite_add_tcase(s, tt);
    TCase *tp = tcase_create("code_paths");
    tcase_set_timeout(tp, 120);
    tcase_add_test(tp, vops_levels_same_bits);
    tcase_add_test(tp, fmaf_exact_rounding);
    tcase_add_test(tp, exp2_poly_is_fmaf_chain);
    tcase_add_loop_test(tp, paths_same_bits, 0, 2 * NPATHS);
    tcase_add_loop_test(tp, rows_hook_lazy, 0, 2 * NPATHS);
    tcase_add_test(tp, isa_and_schedule_arguments);
    tcase_add_loop_test(tp, sgemm_beta_one_on_zeros, 0, 5);
    tcase_add_loop_test(tp, fwd_beta_one_same_bits, 0, 8);
    suite_add_tcase(s, tp);
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
