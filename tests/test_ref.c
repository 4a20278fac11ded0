/* SPDX-License-Identifier: Apache-2.0 */
/* test_ref.c -- the fp64 reference kernel: hand-computed cases, invariants,
 * and central finite differences for the backward. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static uly_attn_desc desc(int64_t B, int64_t N, int64_t H, int64_t Hkv, int64_t d, int causal,
                          int64_t window)
{
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = B; a.seq = N; a.heads = H; a.kv_heads = Hkv; a.head_dim = d;
    a.causal = causal; a.window = window; a.dtype = ULY_F64;
    return a;
}

START_TEST(hand_two_tokens)
{
    /* d = 1, scale 1: q = [1, 1], k = [0, ln 3], v = [1, 5].
     * Full: weights 1 and 3, o = (1 + 15) / 4 = 4, lse = ln 4.
     * Causal: row 0 sees only key 0, o = 1, lse = 0; row 1 as full. */
    uly_attn_desc a = desc(1, 2, 1, 1, 1, 0, 0);
    a.scale = 1;
    double q[2] = {1, 1}, k[2] = {0, log(3.0)}, v[2] = {1, 5}, o[2], lse[2];
    ck_assert_int_eq(uly_ref_fwd(&a, q, k, v, o, lse), ULY_OK);
    ck_assert_double_eq_tol(o[0], 4, 1e-14);
    ck_assert_double_eq_tol(o[1], 4, 1e-14);
    ck_assert_double_eq_tol(lse[0], log(4.0), 1e-14);
    a.causal = 1;
    ck_assert_int_eq(uly_ref_fwd(&a, q, k, v, o, lse), ULY_OK);
    ck_assert_double_eq(o[0], 1);
    ck_assert_double_eq(lse[0], 0);
    ck_assert_double_eq_tol(o[1], 4, 1e-14);
}
END_TEST

START_TEST(equal_scores_give_mean)
{
    /* q = 0: every visible score is 0, o is the mean of the visible v. */
    const int64_t N = 7, d = 3;
    uly_attn_desc a = desc(1, N, 1, 1, d, 0, 0);
    double q[N * d], k[N * d], v[N * d], o[N * d], lse[N];
    memset(q, 0, sizeof q);
    tu_fill(k, N * d, 1, -1, 1);
    tu_fill(v, N * d, 2, -1, 1);
    for (int mask = 0; mask < 4; mask++) {
        a.causal = mask & 1;
        a.window = (mask & 2) ? 2 : 0;
        ck_assert_int_eq(uly_ref_fwd(&a, q, k, v, o, lse), ULY_OK);
        for (int64_t i = 0; i < N; i++) {
            double cnt = 0, mean[3] = {0, 0, 0};
            for (int64_t j = 0; j < N; j++)
                if (uly_attn_visible(&a, i, j)) {
                    cnt++;
                    for (int c = 0; c < d; c++)
                        mean[c] += v[j * d + c];
                }
            for (int c = 0; c < d; c++)
                ck_assert_double_eq_tol(o[i * d + c], mean[c] / cnt, 1e-14);
            ck_assert_double_eq_tol(lse[i], log(cnt), 1e-14);
        }
    }
}
END_TEST

START_TEST(causal_row0_and_window1)
{
    const int64_t N = 5, H = 2, d = 4;
    uly_attn_desc a = desc(1, N, H, 1, d, 1, 0);
    double q[N * H * d], k[N * d], v[N * d], o[N * H * d];
    tu_fill(q, N * H * d, 3, -2, 2);
    tu_fill(k, N * d, 4, -2, 2);
    tu_fill(v, N * d, 5, -2, 2);
    ck_assert_int_eq(uly_ref_fwd(&a, q, k, v, o, NULL), ULY_OK);
    for (int64_t h = 0; h < H; h++)
        for (int c = 0; c < d; c++)
            ck_assert_double_eq(o[h * d + c], v[c]); /* causal row 0 -> V[0] exactly */
    a.causal = 0;
    a.window = 1; /* each query sees only itself */
    ck_assert_int_eq(uly_ref_fwd(&a, q, k, v, o, NULL), ULY_OK);
    for (int64_t i = 0; i < N; i++)
        for (int64_t h = 0; h < H; h++)
            for (int c = 0; c < d; c++)
                ck_assert_double_eq(o[(i * H + h) * d + c], v[i * d + c]);
}
END_TEST

START_TEST(gqa_shares_kv)
{
    /* Two query heads with identical q on one KV head give identical output. */
    const int64_t N = 6, d = 3;
    uly_attn_desc a = desc(1, N, 2, 1, d, 0, 0);
    double q[N * 2 * d], k[N * d], v[N * d], o[N * 2 * d];
    tu_fill(k, N * d, 6, -1, 1);
    tu_fill(v, N * d, 7, -1, 1);
    tu_fill(q, N * 2 * d, 8, -1, 1);
    for (int64_t i = 0; i < N; i++)
        memcpy(q + (i * 2 + 1) * d, q + i * 2 * d, d * sizeof(double));
    ck_assert_int_eq(uly_ref_fwd(&a, q, k, v, o, NULL), ULY_OK);
    for (int64_t i = 0; i < N; i++)
        for (int c = 0; c < d; c++)
            ck_assert_double_eq(o[(i * 2) * d + c], o[(i * 2 + 1) * d + c]);
}
END_TEST

/* L = sum(O * dO); dL/dx by central differences against the analytic backward. */
static double loss(const uly_attn_desc *a, const double *q, const double *k, const double *v,
                   const double *dout, double *o, size_t nq)
{
    ck_assert_int_eq(uly_ref_fwd(a, q, k, v, o, NULL), ULY_OK);
    double s = 0;
    for (size_t i = 0; i < nq; i++)
        s += o[i] * dout[i];
    return s;
}

static void check_fd(const uly_attn_desc *a)
{
    tu_problem p;
    tu_problem_init(&p, a, 42);
    double *o = malloc(p.nq * sizeof(double));
    double *dq = malloc(p.nq * sizeof(double)), *dk = malloc(p.nkv * sizeof(double));
    double *dv = malloc(p.nkv * sizeof(double));
    ck_assert_int_eq(uly_ref_bwd(a, p.q, p.k, p.v, p.dout, dq, dk, dv), ULY_OK);
    double *xs[3] = {p.q, p.k, p.v}, *gs[3] = {dq, dk, dv};
    size_t ns[3] = {p.nq, p.nkv, p.nkv};
    const double h = 1e-5;
    for (int t = 0; t < 3; t++) {
        double gmax = 0;
        for (size_t i = 0; i < ns[t]; i++)
            gmax = fmax(gmax, fabs(gs[t][i]));
        ck_assert(gmax > 0);
        for (size_t i = 0; i < ns[t]; i++) {
            double x0 = xs[t][i];
            xs[t][i] = x0 + h;
            double lp = loss(a, p.q, p.k, p.v, p.dout, o, p.nq);
            xs[t][i] = x0 - h;
            double lm = loss(a, p.q, p.k, p.v, p.dout, o, p.nq);
            xs[t][i] = x0;
            double fd = (lp - lm) / (2 * h);
            ck_assert_msg(fabs(fd - gs[t][i]) <= 1e-6 * gmax,
                          "tensor %d element %zu: finite difference %.12g, analytic %.12g (rel %.3g)",
                          t, i, fd, gs[t][i], fabs(fd - gs[t][i]) / gmax);
        }
    }
    free(o); free(dq); free(dk); free(dv);
    tu_problem_free(&p);
}

START_TEST(finite_differences)
{
    const int masks[4][2] = {{0, 0}, {1, 0}, {0, 2}, {1, 3}};
    for (int m = 0; m < 4; m++) {
        uly_attn_desc a = desc(2, 5, 2, 1, 3, masks[m][0], masks[m][1]);
        check_fd(&a);
        uly_attn_desc b = desc(1, 4, 3, 3, 2, masks[m][0], masks[m][1]);
        check_fd(&b);
    }
}
END_TEST

START_TEST(rejects_bad_shapes)
{
    uly_attn_desc a = desc(1, 4, 3, 2, 2, 0, 0);
    double x[64] = {0}, o[64];
    ck_assert_int_eq(uly_ref_fwd(&a, x, x, x, o, NULL), ULY_EINVAL);
    a = desc(1, 4, 2, 2, 2, 0, 0);
    ck_assert_int_eq(uly_ref_fwd(&a, NULL, x, x, o, NULL), ULY_EINVAL);
}
END_TEST

static Suite *make_ref_suite(void)
{
    Suite *s = suite_create("reference");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, hand_two_tokens);
    tcase_add_test(tc, equal_scores_give_mean);
    tcase_add_test(tc, causal_row0_and_window1);
    tcase_add_test(tc, gqa_shares_kv);
    tcase_add_test(tc, finite_differences);
    tcase_add_test(tc, rejects_bad_shapes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(make_ref_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
