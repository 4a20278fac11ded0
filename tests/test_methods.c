/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_methods.c -- every sequence-parallel method under mpirun (uly_sp_*):
 *
 *  - ring, zigzag, allgather and usp (every Ulysses degree dividing P, both
 *    placements) against the fp64 reference: O, dQ, dK, dV within
 *    atol + rtol |ref| (fp32 and fp64), for causal, window, GQA/MQA, uneven
 *    N and H, and packed documents (empty documents included);
 *  - exactness where it holds: ulysses through uly_sp bitwise equal to one
 *    process; one-position rings (P = 1, usp with U = P) too;
 *  - measured bytes per call kind == uly_plan_method_volume on every rank;
 *  - bf16 partials change the result (and stay within a bf16 tolerance);
 *  - mismatched methods or degrees fail on every rank, none hangs.
 * The worst errors per method are printed by rank 0.  CK_FORK=no; the
 * wrapper tests/test_methods.sh runs P = 1..4 and 8 under a timeout.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "ulysses_dist.h"

static int P, rank;

typedef struct shape {
    int64_t B, N, H, Hkv, d;
    int causal;
    int64_t window, docs;
} shape;

static const shape shapes[] = {
    {2, 53, 4, 1, 8, 1, 0, 5},   /* packed documents (one empty), causal, MQA */
    {1, 40, 2, 2, 4, 0, 7, 0},   /* band, H < P for P > 2 */
    {2, 37, 7, 1, 8, 1, 0, 0},   /* MQA, causal, uneven */
    {2, 45, 6, 3, 4, 1, 9, 0},   /* GQA, causal window */
    {1, 30, 4, 4, 4, 0, 0, 3},   /* documents, no causal mask */
};
#define NSHAPES (int)(sizeof shapes / sizeof shapes[0])
static int nshapes = NSHAPES; /* argv[1] may run only the first few (P = 8 under oversubscription) */

static int64_t doc_store[64];

static uly_attn_desc desc_of(const shape *s, uly_dtype t)
{
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = s->B; a.seq = s->N; a.heads = s->H; a.kv_heads = s->Hkv; a.head_dim = s->d;
    a.causal = s->causal; a.window = s->window; a.dtype = t;
    if (s->docs) {
        for (int64_t b = 0; b < s->B; b++) {
            int64_t *o = doc_store + b * (s->docs + 1);
            o[0] = 0;
            for (int64_t i = 1; i < s->docs; i++)
                o[i] = i == 2 ? o[1] : o[i - 1] + (s->N * (2 + (i + b) % 3)) / (3 * s->docs);
            o[s->docs] = s->N;
        }
        a.doc_offsets = doc_store;
        a.docs = s->docs;
    }
    return a;
}

/* Rows of the token segments of a (B, N, X) tensor (es-byte elements) into (B, n, X). */
static void *take(const void *full, int64_t B, int64_t N, size_t row, int ns, const int64_t *tb,
                  const int64_t *tc)
{
    int64_t n = 0;
    for (int s = 0; s < ns; s++)
        n += tc[s];
    char *out = malloc((size_t)(B * n) * row + 1);
    for (int64_t b = 0; b < B; b++) {
        int64_t r0 = 0;
        for (int s = 0; s < ns; s++) {
            memcpy(out + (size_t)(b * n + r0) * row, (const char *)full + (size_t)(b * N + tb[s]) * row,
                   (size_t)tc[s] * row);
            r0 += tc[s];
        }
    }
    return out;
}

static double worst[ULY_METHOD_COUNT][2];

typedef struct result {
    void *o, *dq, *dk, *dv;
    int ns;
    int64_t tb[2], tc[2], n;
} result;

static void result_free(result *r)
{
    free(r->o); free(r->dq); free(r->dk); free(r->dv);
}

/* Run one method on this rank's share of the problem. */
static void run_method(const uly_attn_desc *a, const uly_sp_opts *so, void *const in[4], result *r,
                       uly_volume *vol)
{
    const size_t es = uly_dtype_size(a->dtype);
    const size_t qrow = (size_t)(a->heads * a->head_dim) * es, krow = (size_t)(a->kv_heads * a->head_dim) * es;
    uly_sp *S;
    int rc = uly_sp_create(MPI_COMM_WORLD, a, so, &S);
    ck_assert_msg(rc == ULY_OK, "create %s U=%d: %s", uly_method_name(so->method), so->ulysses_degree,
                  uly_last_error());
    r->ns = uly_sp_tokens(S, r->tb, r->tc);
    r->n = r->tc[0] + (r->ns > 1 ? r->tc[1] : 0);
    void *q = take(in[0], a->batch, a->seq, qrow, r->ns, r->tb, r->tc);
    void *k = take(in[1], a->batch, a->seq, krow, r->ns, r->tb, r->tc);
    void *v = take(in[2], a->batch, a->seq, krow, r->ns, r->tb, r->tc);
    void *dout = take(in[3], a->batch, a->seq, qrow, r->ns, r->tb, r->tc);
    r->o = malloc((size_t)(a->batch * r->n) * qrow + 1);
    r->dq = malloc((size_t)(a->batch * r->n) * qrow + 1);
    r->dk = malloc((size_t)(a->batch * r->n) * krow + 1);
    r->dv = malloc((size_t)(a->batch * r->n) * krow + 1);
    ck_assert_msg(uly_sp_fwd(S, q, k, v, r->o) == ULY_OK, "fwd: %s", uly_last_error());
    ck_assert_msg(uly_sp_bwd(S, dout, r->dq, r->dk, r->dv) == ULY_OK, "bwd: %s", uly_last_error());
    uly_sp_volume(S, vol);
    uly_sp_free(S);
    free(q); free(k); free(v); free(dout);
}

static void check_method(const shape *s, uly_dtype t, int method, int U, int placement)
{
    uly_attn_desc a = desc_of(s, t);
    tu_problem p;
    tu_problem_init(&p, &a, (uint64_t)(s->N * 7 + s->H));
    const size_t es = uly_dtype_size(t);
    void *q = malloc(p.nq * es), *k = malloc(p.nkv * es), *v = malloc(p.nkv * es), *dout = malloc(p.nq * es);
    tu_convert(p.q, q, p.nq, t); tu_convert(p.k, k, p.nkv, t);
    tu_convert(p.v, v, p.nkv, t); tu_convert(p.dout, dout, p.nq, t);
    for (size_t i = 0; i < p.nq; i++) { p.q[i] = tu_get(q, i, t); p.dout[i] = tu_get(dout, i, t); }
    for (size_t i = 0; i < p.nkv; i++) { p.k[i] = tu_get(k, i, t); p.v[i] = tu_get(v, i, t); }
    uly_sp_opts so;
    memset(&so, 0, sizeof so);
    so.method = method;
    so.ulysses_degree = U;
    so.placement = placement;
    so.dist.kernel.block_q = 8;
    so.dist.kernel.block_k = 16;
    so.dist.kernel.threads = 1 + rank % 2;
    void *in[4] = {q, k, v, dout};
    result r;
    uly_volume got, want;
    run_method(&a, &so, in, &r, &got);
    /* bytes */
    uly_sp_plan plan;
    ck_assert_int_eq(uly_sp_plan_init(&plan, method, P, U, placement), ULY_OK);
    ck_assert_int_eq(uly_plan_method_volume(&a, &plan, rank, &want), ULY_OK);
    for (int w = 0; w < ULY_VOL_COUNT; w++)
        ck_assert_msg(got.sent[w] == want.sent[w] && got.recv[w] == want.recv[w],
                      "%s U=%d rank %d/%d %s: sent %llu received %llu, expected %llu and %llu",
                      uly_method_name(method), U, rank, P, uly_vol_name(w), (unsigned long long)got.sent[w],
                      (unsigned long long)got.recv[w], (unsigned long long)want.sent[w],
                      (unsigned long long)want.recv[w]);
    /* vs the fp64 reference on this rank's tokens */
    double *ro = malloc(p.nq * 8), *rq = malloc(p.nq * 8), *rk = malloc(p.nkv * 8), *rv = malloc(p.nkv * 8);
    uly_attn_desc a64 = a;
    a64.dtype = ULY_F64;
    ck_assert_int_eq(uly_ref_fwd(&a64, p.q, p.k, p.v, ro, NULL), ULY_OK);
    ck_assert_int_eq(uly_ref_bwd(&a64, p.q, p.k, p.v, p.dout, rq, rk, rv), ULY_OK);
    const size_t qrow = (size_t)(a.heads * a.head_dim) * 8, krow = (size_t)(a.kv_heads * a.head_dim) * 8;
    double *refs[4] = {take(ro, a.batch, a.seq, qrow, r.ns, r.tb, r.tc), take(rq, a.batch, a.seq, qrow, r.ns, r.tb, r.tc),
                       take(rk, a.batch, a.seq, krow, r.ns, r.tb, r.tc), take(rv, a.batch, a.seq, krow, r.ns, r.tb, r.tc)};
    const void *gots[4] = {r.o, r.dq, r.dk, r.dv};
    const size_t ns[4] = {(size_t)(a.batch * r.n * a.heads * a.head_dim), (size_t)(a.batch * r.n * a.heads * a.head_dim),
                          (size_t)(a.batch * r.n * a.kv_heads * a.head_dim), (size_t)(a.batch * r.n * a.kv_heads * a.head_dim)};
    const char *names[4] = {"O", "dQ", "dK", "dV"};
    char msg[512];
    for (int x = 0; x < 4; x++) {
        double at = t == ULY_F32 ? (x ? 2e-5 : 3e-6) : 1e-11, rt = t == ULY_F32 ? (x ? 2e-4 : 3e-5) : 1e-9;
        ck_assert_msg(!tu_close(refs[x], gots[x], t, ns[x], at, rt, msg, sizeof msg),
                      "%s %s U=%d placement %d rank %d/%d shape N=%lld H=%lld Hkv=%lld docs=%lld: %s: %s",
                      t == ULY_F32 ? "fp32" : "fp64", uly_method_name(method), U, placement, rank, P,
                      (long long)a.seq, (long long)a.heads, (long long)a.kv_heads, (long long)a.docs, names[x], msg);
        double e = tu_max_abs_err(refs[x], gots[x], t, ns[x]);
        if (e > worst[method][t == ULY_F64])
            worst[method][t == ULY_F64] = e;
        free(refs[x]);
    }
    /* exact where the merge order cannot differ: ulysses, one-position rings */
    if (method == ULY_METHOD_ULYSSES || plan.R == 1) {
        void *o1 = malloc(p.nq * es), *l1 = malloc(p.nlse * es), *dq1 = malloc(p.nq * es);
        void *dk1 = malloc(p.nkv * es), *dv1 = malloc(p.nkv * es);
        ck_assert_int_eq(uly_attn_fwd(&a, &so.dist.kernel, q, k, v, o1, l1), ULY_OK);
        ck_assert_int_eq(uly_attn_bwd(&a, &so.dist.kernel, q, k, v, o1, l1, dout, dq1, dk1, dv1), ULY_OK);
        const size_t qr = (size_t)(a.heads * a.head_dim) * es, kr = (size_t)(a.kv_heads * a.head_dim) * es;
        void *one[4] = {take(o1, a.batch, a.seq, qr, r.ns, r.tb, r.tc), take(dq1, a.batch, a.seq, qr, r.ns, r.tb, r.tc),
                        take(dk1, a.batch, a.seq, kr, r.ns, r.tb, r.tc), take(dv1, a.batch, a.seq, kr, r.ns, r.tb, r.tc)};
        for (int x = 0; x < 4; x++) {
            ck_assert_msg(memcmp(one[x], gots[x], ns[x] * es) == 0, "%s U=%d rank %d/%d: %s not bitwise equal to one process",
                          uly_method_name(method), U, rank, P, names[x]);
            free(one[x]);
        }
        free(o1); free(l1); free(dq1); free(dk1); free(dv1);
    }
    result_free(&r);
    free(ro); free(rq); free(rk); free(rv);
    free(q); free(k); free(v); free(dout);
    tu_problem_free(&p);
}

START_TEST(every_method_f32)
{
    const shape *s = &shapes[_i];
    check_method(s, ULY_F32, ULY_METHOD_ULYSSES, 0, 0);
    check_method(s, ULY_F32, ULY_METHOD_RING, 0, 0);
    check_method(s, ULY_F32, ULY_METHOD_ZIGZAG, 0, 0);
    check_method(s, ULY_F32, ULY_METHOD_ALLGATHER, 0, 0);
    for (int U = 1; U <= P; U++)
        if (P % U == 0)
            for (int pl = 0; pl < (U > 1 && U < P ? 2 : 1); pl++)
                check_method(s, ULY_F32, ULY_METHOD_USP, U, pl);
}
END_TEST

START_TEST(every_method_f64)
{
    const shape *s = &shapes[_i];
    for (int m = 1; m < ULY_METHOD_COUNT; m++)
        check_method(s, ULY_F64, m, m == ULY_METHOD_USP ? (P % 2 ? 1 : 2) : 0, ULY_PLACE_RING_INNER);
}
END_TEST

/* bf16 partials: a different, coarser result, still within bf16 precision. */
START_TEST(bf16_partials)
{
    const shape s = {1, 64, 2, 2, 8, 1, 0, 0};
    uly_attn_desc a = desc_of(&s, ULY_F32);
    tu_problem p;
    tu_problem_init(&p, &a, 3);
    void *q = malloc(p.nq * 4), *k = malloc(p.nkv * 4), *v = malloc(p.nkv * 4), *dout = malloc(p.nq * 4);
    tu_convert(p.q, q, p.nq, ULY_F32); tu_convert(p.k, k, p.nkv, ULY_F32);
    tu_convert(p.v, v, p.nkv, ULY_F32); tu_convert(p.dout, dout, p.nq, ULY_F32);
    uly_sp_opts so;
    memset(&so, 0, sizeof so);
    so.method = ULY_METHOD_RING;
    void *in[4] = {q, k, v, dout};
    result r0, r1;
    uly_volume vol;
    run_method(&a, &so, in, &r0, &vol);
    so.bf16_partials = 1;
    run_method(&a, &so, in, &r1, &vol);
    const size_t n = (size_t)(r0.n * a.heads * a.head_dim);
    double maxd = 0;
    for (size_t i = 0; i < n; i++) {
        double x = ((float *)r0.o)[i], y = ((float *)r1.o)[i];
        ck_assert(isfinite(y));
        /* each of the <= 2P roundings moves a value bounded by max|v| <= 1 by <= 2^-9 */
        ck_assert_msg(fabs(x - y) <= (double)P * 3.9e-3, "bf16 partial drifted %g from %g", y, x);
        if (fabs(x - y) > maxd)
            maxd = fabs(x - y);
    }
    if (n > 0)
        ck_assert_msg(maxd > 0, "bf16 partials left the output unchanged");
    result_free(&r0);
    result_free(&r1);
    free(q); free(k); free(v); free(dout);
    tu_problem_free(&p);
}
END_TEST

START_TEST(mismatch_fails_everywhere)
{
    if (P == 1)
        return;
    const shape s = {1, 16, 4, 4, 4, 1, 0, 0};
    uly_attn_desc a = desc_of(&s, ULY_F32);
    uly_sp_opts so;
    memset(&so, 0, sizeof so);
    so.method = rank == 0 ? ULY_METHOD_RING : ULY_METHOD_ZIGZAG;
    uly_sp *S = NULL;
    ck_assert_int_eq(uly_sp_create(MPI_COMM_WORLD, &a, &so, &S), ULY_EMISMATCH);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "method"));
    ck_assert_ptr_null(S);
    /* a degree that does not divide P fails on the rank that has it; the others name it */
    so.method = ULY_METHOD_USP;
    so.ulysses_degree = rank == 1 ? P + 1 : 1;
    int rc = uly_sp_create(MPI_COMM_WORLD, &a, &so, &S);
    ck_assert_int_eq(rc, rank == 1 ? ULY_EINVAL : ULY_EPEER);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "ulysses degree"));
}
END_TEST

static Suite *make_methods_suite(void)
{
    Suite *s = suite_create("methods");
    TCase *tc = tcase_create("vs_reference");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, every_method_f32, 0, nshapes);
    tcase_add_loop_test(tc, every_method_f64, 0, nshapes < 2 ? nshapes : 2);
    tcase_add_test(tc, bf16_partials);
    tcase_add_test(tc, mismatch_fails_everywhere);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc > 1 && atoi(argv[1]) >= 1 && atoi(argv[1]) < NSHAPES)
        nshapes = atoi(argv[1]);
    SRunner *sr = srunner_create(make_methods_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    double w[ULY_METHOD_COUNT][2];
    MPI_Reduce(worst, w, 2 * ULY_METHOD_COUNT, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        for (int m = 0; m < ULY_METHOD_COUNT; m++)
            printf("P=%d %-9s worst |err| vs fp64 reference: fp32 %.3g, fp64 %.3g\n", P, uly_method_name(m),
                   w[m][0], w[m][1]);
    MPI_Finalize();
    return any ? EXIT_FAILURE : EXIT_SUCCESS;
}
