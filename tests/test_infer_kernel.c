/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_infer_kernel.c -- the decode kernel and its one-process emulation of
 * the distributed merge, against the float64 reference: the last row of a
 * causal problem of n + 1 tokens.  Tolerances as tests/test_blocked.c
 * (inputs uniform in [-1, 1), |x - ref| <= atol + rtol |ref|, NaN fails):
 * fp32 atol 3e-6, rtol 3e-5; fp64 atol 1e-11, rtol 1e-9.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "ulysses.h"
#include "ulysses_infer.h"

static uly_attn_desc desc(int64_t B, int64_t N, int64_t H, int64_t Hkv, int64_t d, uly_dtype t)
{
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = B; a.seq = N; a.heads = H; a.kv_heads = Hkv; a.head_dim = d;
    a.causal = 1;
    a.dtype = t;
    return a;
}

/* A decode problem: the reference's last row of N tokens. */
typedef struct dproblem {
    uly_attn_desc a;
    tu_problem p;
    double *ro, *rl;     /* reference o (B, H, d), lse (B, H) of the last row */
    void *q, *k, *v;     /* q (B, H, d) of the last row; k, v (B, N, Hkv, d), dtype a.dtype */
    size_t nq;           /* B H d */
} dproblem;

static void dp_init(dproblem *D, const uly_attn_desc *a, uint64_t seed)
{
    D->a = *a;
    tu_problem_init(&D->p, a, seed);
    const int64_t B = a->batch, N = a->seq, H = a->heads, d = a->head_dim;
    const size_t es = uly_dtype_size(a->dtype);
    double *o = malloc(D->p.nq * sizeof *o), *lse = malloc(D->p.nlse * sizeof *lse);
    ck_assert(o && lse);
    ck_assert_int_eq(uly_ref_fwd(a, D->p.q, D->p.k, D->p.v, o, lse), ULY_OK);
    D->nq = (size_t)(B * H * d);
    D->ro = malloc(D->nq * sizeof *D->ro);
    D->rl = malloc((size_t)(B * H) * sizeof *D->rl);
    double *ql = malloc(D->nq * sizeof *ql);
    D->q = malloc(D->nq * es);
    D->k = malloc(D->p.nkv * es);
    D->v = malloc(D->p.nkv * es);
    ck_assert(D->ro && D->rl && ql && D->q && D->k && D->v);
    for (int64_t b = 0; b < B; b++) {
        memcpy(D->ro + b * H * d, o + ((b * N + N - 1) * H) * d, (size_t)(H * d) * sizeof *o);
        memcpy(ql + b * H * d, D->p.q + ((b * N + N - 1) * H) * d, (size_t)(H * d) * sizeof *ql);
        for (int64_t h = 0; h < H; h++)
            D->rl[b * H + h] = lse[(b * H + h) * N + N - 1];
    }
    tu_convert(ql, D->q, D->nq, a->dtype);
    tu_convert(D->p.k, D->k, D->p.nkv, a->dtype);
    tu_convert(D->p.v, D->v, D->p.nkv, a->dtype);
    free(ql);
    free(o);
    free(lse);
}

static void dp_free(dproblem *D)
{
    tu_problem_free(&D->p);
    free(D->ro);
    free(D->rl);
    free(D->q);
    free(D->k);
    free(D->v);
}

static void check_close(const dproblem *D, const void *o, const void *lse)
{
    const int f32 = D->a.dtype == ULY_F32;
    const double atol = f32 ? 3e-6 : 1e-11, rtol = f32 ? 3e-5 : 1e-9;
    char msg[512];
    ck_assert_msg(!tu_close(D->ro, o, D->a.dtype, D->nq, atol, rtol, msg, sizeof msg), "O: %s", msg);
    ck_assert_msg(!tu_close(D->rl, lse, D->a.dtype, (size_t)(D->a.batch * D->a.heads), atol, rtol, msg, sizeof msg),
                  "LSE: %s", msg);
}

/* The whole cache as one shard, and every layout's emulation, against the
 * reference; GQA, MQA and MHA, both dtypes, with and without a window. */
START_TEST(decode_against_reference)
{
    static const int64_t shapes[][3] = {{8, 2, 16}, {4, 1, 8}, {3, 3, 8}}; /* H, Hkv, d: GQA, MQA, MHA */
    for (size_t s = 0; s < 3; s++)
        for (int t = 0; t < 2; t++)
            for (int w = 0; w < 2; w++) {
                uly_attn_desc a = desc(2, 601, shapes[s][0], shapes[s][1], shapes[s][2], t ? ULY_F64 : ULY_F32);
                a.window = w ? 300 : 0; /* the window cuts a key block */
                dproblem D;
                dp_init(&D, &a, 11 + s * 4 + (size_t)t * 2 + (size_t)w);
                const size_t es = uly_dtype_size(a.dtype);
                void *o = malloc(D.nq * es), *lse = malloc((size_t)(a.batch * a.heads) * es);
                int64_t sb = 0, sc = a.seq;
                ck_assert_int_eq(uly_decode_attn(&a, a.seq - 1, 1, &sb, &sc, D.q, D.k, D.v, o, lse, 1), ULY_OK);
                check_close(&D, o, lse);
                for (int P = 1; P <= 4; P++)
                    for (int scheme = 0; scheme < ULY_DECODE_COUNT; scheme++)
                        for (int kind = 0; kind < 2; kind++) {
                            uly_kv_layout L;
                            ck_assert_int_eq(uly_kv_layout_init(&L, kind, P, kind ? 32 : 0, a.seq - 5), ULY_OK);
                            memset(o, 0xff, D.nq * es); /* NaN: every element must be written */
                            ck_assert_int_eq(uly_decode_emulate(&a, scheme, &L, a.seq - 1, D.q, D.k, D.v, o, lse, 0),
                                             ULY_OK);
                            check_close(&D, o, lse);
                        }
                free(o);
                free(lse);
                dp_free(&D);
            }
}
END_TEST

/* The kernel's bits do not depend on the thread count (nor the emulation's). */
START_TEST(decode_thread_independent)
{
    for (int t = 0; t < 2; t++) {
        uly_attn_desc a = desc(3, 700, 8, 2, 16, t ? ULY_F64 : ULY_F32);
        dproblem D;
        dp_init(&D, &a, 5 + (uint64_t)t);
        const size_t es = uly_dtype_size(a.dtype), nl = (size_t)(a.batch * a.heads);
        char *o1 = malloc(D.nq * es), *o2 = malloc(D.nq * es), *l1 = malloc(nl * es), *l2 = malloc(nl * es);
        int64_t sb = 0, sc = a.seq;
        ck_assert_int_eq(uly_decode_attn(&a, a.seq - 1, 1, &sb, &sc, D.q, D.k, D.v, o1, l1, 1), ULY_OK);
        ck_assert_int_eq(uly_decode_attn(&a, a.seq - 1, 1, &sb, &sc, D.q, D.k, D.v, o2, l2, 2), ULY_OK);
        ck_assert_mem_eq(o1, o2, D.nq * es);
        ck_assert_mem_eq(l1, l2, nl * es);
        uly_kv_layout L;
        uly_kv_layout_init(&L, ULY_KV_ROUND_ROBIN, 3, 16, 0);
        for (int scheme = 0; scheme < ULY_DECODE_COUNT; scheme++) {
            ck_assert_int_eq(uly_decode_emulate(&a, scheme, &L, a.seq - 1, D.q, D.k, D.v, o1, l1, 1), ULY_OK);
            ck_assert_int_eq(uly_decode_emulate(&a, scheme, &L, a.seq - 1, D.q, D.k, D.v, o2, l2, 2), ULY_OK);
            ck_assert_mem_eq(o1, o2, D.nq * es);
            ck_assert_mem_eq(l1, l2, nl * es);
        }
        free(o1); free(o2); free(l1); free(l2);
        dp_free(&D);
    }
}
END_TEST

/* A shard of several runs (round-robin blocks of 7 over 3 ranks): the
 * partial is attention over exactly its keys -- the reference of a
 * non-causal problem whose keys are the shard's rows and whose last query
 * is the new one.  A shard the query sees nothing of: O = 0, LSE = -inf. */
START_TEST(decode_shard_of_runs)
{
    const int64_t N = 200, B = 2, H = 4, Hkv = 2, d = 8;
    uly_attn_desc a = desc(B, N, H, Hkv, d, ULY_F64);
    dproblem D;
    dp_init(&D, &a, 77);
    uly_kv_layout L;
    uly_kv_layout_init(&L, ULY_KV_ROUND_ROBIN, 3, 7, 0);
    int64_t sb[64], sc[64];
    const int64_t ns = uly_kv_segments(&L, 1, N, sb, sc, 64), rows = uly_kv_count(&L, 1, N);
    ck_assert_int_gt(ns, 5);
    /* the shard's rows, and the same as a problem of `rows` tokens */
    const size_t row = (size_t)(Hkv * d);
    double *ks = malloc((size_t)(B * rows) * row * sizeof(double)), *vs = malloc((size_t)(B * rows) * row * sizeof(double));
    double *qs = calloc((size_t)(B * rows * H * d), sizeof(double));
    for (int64_t b = 0, r = 0; b < B; b++, r = 0)
        for (int64_t i = 0; i < ns; i++)
            for (int64_t t = sb[i]; t < sb[i] + sc[i]; t++, r++) {
                memcpy(ks + (b * rows + r) * (int64_t)row, D.p.k + (b * N + t) * (int64_t)row, row * sizeof(double));
                memcpy(vs + (b * rows + r) * (int64_t)row, D.p.v + (b * N + t) * (int64_t)row, row * sizeof(double));
            }
    for (int64_t b = 0; b < B; b++)
        memcpy(qs + ((b * rows + rows - 1) * H) * d, (double *)D.q + b * H * d, (size_t)(H * d) * sizeof(double));
    uly_attn_desc s = a;
    s.seq = rows;
    s.causal = 0;
    double *ro = malloc((size_t)(B * rows * H * d) * sizeof(double)), *rl = malloc((size_t)(B * H * rows) * sizeof(double));
    ck_assert_int_eq(uly_ref_fwd(&s, qs, ks, vs, ro, rl), ULY_OK);
    double *o = malloc(D.nq * sizeof(double)), lse[8];
    ck_assert_int_eq(uly_decode_attn(&a, N - 1, ns, sb, sc, D.q, ks, vs, o, lse, 2), ULY_OK);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            ck_assert_double_eq_tol(lse[b * H + h], rl[(b * H + h) * rows + rows - 1], 1e-11);
            for (int64_t c = 0; c < d; c++)
                ck_assert_double_eq_tol(o[(b * H + h) * d + c], ro[((b * rows + rows - 1) * H + h) * d + c], 1e-11);
        }
    /* the query at position 3 sees none of rank 1's tokens (7..13, ...) */
    ck_assert_int_eq(uly_decode_attn(&a, 3, ns, sb, sc, D.q, ks, vs, o, lse, 1), ULY_OK);
    for (int64_t x = 0; x < B * H; x++)
        ck_assert(isinf(lse[x]) && lse[x] < 0);
    for (size_t x = 0; x < D.nq; x++)
        ck_assert(o[x] == 0);
    free(ks); free(vs); free(qs); free(ro); free(rl); free(o);
    dp_free(&D);
}
END_TEST

START_TEST(decode_rejects)
{
    uly_attn_desc a = desc(1, 8, 2, 1, 4, ULY_F32);
    float q[8] = {0}, k[32] = {0}, v[32] = {0}, o[8], l[2];
    int64_t sb = 0, sc = 8;
    const int64_t off[3] = {0, 4, 8};
    uly_attn_desc dd = a;
    dd.doc_offsets = off;
    dd.docs = 2;
    ck_assert_int_eq(uly_decode_attn(&dd, 7, 1, &sb, &sc, q, k, v, o, l, 1), ULY_EINVAL);
    uly_kv_layout L;
    uly_kv_layout_init(&L, ULY_KV_CONTIGUOUS, 2, 0, 8);
    ck_assert_int_eq(uly_decode_emulate(&dd, ULY_DECODE_DCP, &L, 7, q, k, v, o, l, 1), ULY_EINVAL);
    ck_assert_int_eq(uly_decode_emulate(&a, 9, &L, 7, q, k, v, o, l, 1), ULY_EINVAL);
    ck_assert_int_eq(uly_decode_attn(&a, -1, 1, &sb, &sc, q, k, v, o, l, 1), ULY_EINVAL);
    int64_t b2[2] = {4, 0}, c2[2] = {4, 4}; /* runs out of order */
    ck_assert_int_eq(uly_decode_attn(&a, 7, 2, b2, c2, q, k, v, o, l, 1), ULY_EINVAL);
    ck_assert_int_eq(uly_decode_attn(&a, 7, 1, &sb, &sc, q, k, v, NULL, l, 1), ULY_EINVAL);
    a.kv_heads = 3;
    ck_assert_int_eq(uly_decode_attn(&a, 7, 1, &sb, &sc, q, k, v, o, l, 1), ULY_EINVAL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("infer_kernel");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, decode_against_reference);
    tcase_add_test(tc, decode_thread_independent);
    tcase_add_test(tc, decode_shard_of_runs);
    tcase_add_test(tc, decode_rejects);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
