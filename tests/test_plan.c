/* test_plan.c -- the plan layer: partitions, mask geometry, expected volumes. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ulysses.h"

static uly_attn_desc desc(int64_t B, int64_t N, int64_t H, int64_t Hkv, int64_t d)
{
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = B; a.seq = N; a.heads = H; a.kv_heads = Hkv; a.head_dim = d;
    a.dtype = ULY_F32;
    return a;
}

START_TEST(split_covers_balanced)
{
    for (int64_t n = 0; n < 40; n++)
        for (int P = 1; P <= 9; P++) {
            int64_t next = 0;
            for (int r = 0; r < P; r++) {
                int64_t b, c;
                uly_split(n, P, r, &b, &c);
                ck_assert_int_eq(b, next);
                ck_assert_int_eq(c, n / P + (r < n % P));
                next = b + c;
            }
            ck_assert_int_eq(next, n);
        }
}
END_TEST

START_TEST(kv_range_and_replication)
{
    uly_attn_desc a = desc(1, 8, 8, 2, 4); /* g = 4 */
    int64_t b, c;
    uly_kv_range(&a, 0, 4, &b, &c);
    ck_assert_int_eq(b, 0); ck_assert_int_eq(c, 1);
    uly_kv_range(&a, 3, 2, &b, &c);
    ck_assert_int_eq(b, 0); ck_assert_int_eq(c, 2);
    uly_kv_range(&a, 5, 0, &b, &c);
    ck_assert_int_eq(c, 0);
    ck_assert_int_eq(uly_plan_kv_replicated(&a, 1), 0);
    ck_assert_int_eq(uly_plan_kv_replicated(&a, 2), 0); /* 4 + 4 heads: groups intact */
    ck_assert_int_eq(uly_plan_kv_replicated(&a, 4), 1); /* 2 heads each: group of 4 cut */
    ck_assert_int_eq(uly_plan_kv_replicated(&a, 3), 1); /* 3,3,2 */
    uly_attn_desc m = desc(1, 8, 7, 7, 4);              /* MHA never replicates */
    ck_assert_int_eq(uly_plan_kv_replicated(&m, 3), 0);
}
END_TEST

START_TEST(mask_geometry)
{
    uly_attn_desc a = desc(1, 10, 1, 1, 1);
    ck_assert_double_eq(uly_attn_pairs(&a), 100);
    a.causal = 1;
    ck_assert_double_eq(uly_attn_pairs(&a), 55);
    ck_assert(uly_attn_visible(&a, 3, 3));
    ck_assert(!uly_attn_visible(&a, 3, 4));
    a.window = 3; /* i-3 < j <= i */
    ck_assert(uly_attn_visible(&a, 5, 3));
    ck_assert(!uly_attn_visible(&a, 5, 2));
    ck_assert_double_eq(uly_attn_pairs(&a), 1 + 2 + 8 * 3);
    a.causal = 0; /* |i-j| < 3 */
    ck_assert(uly_attn_visible(&a, 5, 7));
    ck_assert(!uly_attn_visible(&a, 5, 8));
    ck_assert_double_eq(uly_attn_pairs(&a), 10 + 2 * (9 + 8));
}
END_TEST

START_TEST(desc_check_rejects)
{
    uly_attn_desc a = desc(1, 8, 6, 4, 4);
    ck_assert_int_eq(uly_attn_desc_check(&a), ULY_EINVAL);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "multiple of kv-heads"));
    a = desc(0, 8, 4, 4, 4);
    ck_assert_int_eq(uly_attn_desc_check(&a), ULY_EINVAL);
    a = desc(1, 8, 4, 4, 4);
    a.window = -1;
    ck_assert_int_eq(uly_attn_desc_check(&a), ULY_EINVAL);
    a = desc(1 << 20, 1 << 20, 1 << 12, 1, 1 << 12); /* 2^64 elements */
    ck_assert_int_eq(uly_attn_desc_check(&a), ULY_EOVERFLOW);
    a = desc(INT64_MAX, 2, 1, 1, 1);
    ck_assert_int_eq(uly_attn_desc_check(&a), ULY_EOVERFLOW);
    a = desc(2, 3, 4, 2, 5);
    ck_assert_int_eq(uly_attn_desc_check(&a), ULY_OK);
}
END_TEST

/* Conservation: what all ranks send equals what all ranks receive, per a2a. */
static void check_conservation(const uly_attn_desc *a, int P)
{
    uint64_t s[ULY_A2A_COUNT] = {0}, r[ULY_A2A_COUNT] = {0};
    for (int rank = 0; rank < P; rank++) {
        uly_volume v;
        ck_assert_int_eq(uly_plan_volume(a, P, rank, &v), ULY_OK);
        for (int w = 0; w < ULY_A2A_COUNT; w++) {
            s[w] += v.sent[w];
            r[w] += v.recv[w];
        }
    }
    for (int w = 0; w < ULY_A2A_COUNT; w++)
        ck_assert_uint_eq(s[w], r[w]);
}

START_TEST(volume_even_matches_formula)
{
    /* (2h + 2h_kv) * b * N/P * e * (P-1)/P per rank in forward */
    const int64_t B = 2, N = 64, H = 8, Hkv = 4, d = 16, P = 4; /* KV groups intact */
    uly_attn_desc a = desc(B, N, H, Hkv, d);
    uly_volume v;
    ck_assert_int_eq(uly_plan_volume(&a, P, 1, &v), ULY_OK);
    uint64_t fwd = v.sent[ULY_A2A_Q] + v.sent[ULY_A2A_K] + v.sent[ULY_A2A_V] + v.sent[ULY_A2A_O];
    uint64_t expect = (uint64_t)((2 * H * d + 2 * Hkv * d) * B * (N / P) * 4 * (P - 1) / P);
    ck_assert_uint_eq(fwd, expect);
    /* backward mirrors forward when no KV group is cut */
    ck_assert_int_eq(uly_plan_volume(&a, P, 2, &v), ULY_OK);
    ck_assert_uint_eq(v.sent[ULY_A2A_DQ] + v.sent[ULY_A2A_DK] + v.sent[ULY_A2A_DV] + v.sent[ULY_A2A_DO],
                      v.sent[ULY_A2A_Q] + v.sent[ULY_A2A_K] + v.sent[ULY_A2A_V] + v.sent[ULY_A2A_O]);
    /* replicated KV (g = 4 cut by 2 heads per rank): each rank receives one
     * whole KV head, and sends back per-query-head gradients */
    uly_attn_desc r = desc(B, N, H, 2, d);
    ck_assert_int_eq(uly_plan_volume(&r, P, 0, &v), ULY_OK);
    ck_assert_uint_eq(v.recv[ULY_A2A_K], (uint64_t)(B * (N - N / P) * 1 * d * 4));
    ck_assert_uint_eq(v.sent[ULY_A2A_DK], v.sent[ULY_A2A_DQ]);
    /* P = 1: no communication */
    ck_assert_int_eq(uly_plan_volume(&a, 1, 0, &v), ULY_OK);
    for (int w = 0; w < ULY_A2A_COUNT; w++)
        ck_assert_uint_eq(v.sent[w], 0);
}
END_TEST

START_TEST(volume_conserved_every_shape)
{
    const int64_t Hs[] = {1, 2, 3, 4, 7, 8, 12};
    for (size_t hi = 0; hi < sizeof Hs / sizeof Hs[0]; hi++)
        for (int64_t Hkv = 1; Hkv <= Hs[hi]; Hkv++) {
            if (Hs[hi] % Hkv)
                continue;
            for (int64_t N = 1; N <= 13; N += 3)
                for (int P = 1; P <= 6; P++) {
                    uly_attn_desc a = desc(2, N, Hs[hi], Hkv, 3);
                    check_conservation(&a, P);
                }
        }
}
END_TEST

START_TEST(a2a_block_pairs)
{
    /* hand-derived: P = 4, N = 16, H = 8, Hkv = 2, d = 1 (KV groups cut) */
    uly_attn_desc a = desc(1, 16, 8, 2, 1);
    uint64_t e;
    ck_assert_int_eq(uly_plan_a2a_block(&a, 4, ULY_A2A_Q, 0, 3, &e), ULY_OK);
    ck_assert_uint_eq(e, 4 * 2);               /* my 4 tokens of its 2 heads */
    ck_assert_int_eq(uly_plan_a2a_block(&a, 4, ULY_A2A_K, 1, 2, &e), ULY_OK);
    ck_assert_uint_eq(e, 4 * 1);               /* one KV head needed by rank 2 */
    ck_assert_int_eq(uly_plan_a2a_block(&a, 4, ULY_A2A_DK, 2, 0, &e), ULY_OK);
    ck_assert_uint_eq(e, 4 * 2);               /* replicated: per query head */
    /* uneven: P = 3, N = 10 (4,3,3), H = 5 (2,2,1), MHA */
    uly_attn_desc u = desc(2, 10, 5, 5, 3);
    ck_assert_int_eq(uly_plan_a2a_block(&u, 3, ULY_A2A_Q, 0, 2, &e), ULY_OK);
    ck_assert_uint_eq(e, 2 * 4 * 1 * 3);
    ck_assert_int_eq(uly_plan_a2a_block(&u, 3, ULY_A2A_O, 2, 0, &e), ULY_OK);
    ck_assert_uint_eq(e, 2 * 4 * 1 * 3);       /* rank 0's tokens of rank 2's head */
    ck_assert_int_eq(uly_plan_a2a_block(&u, 3, ULY_A2A_DV, 0, 1, &e), ULY_OK);
    ck_assert_uint_eq(e, 2 * 3 * 2 * 3);
    /* every query element lands exactly once: the P x P matrix sums to B N H d,
     * column s sums to B N H_s d; and rows minus the diagonal are the volumes */
    for (int P = 1; P <= 7; P++) {
        uint64_t all = 0;
        for (int dst = 0; dst < P; dst++) {
            uint64_t col = 0;
            for (int src = 0; src < P; src++) {
                ck_assert_int_eq(uly_plan_a2a_block(&u, P, ULY_A2A_Q, src, dst, &e), ULY_OK);
                col += e;
            }
            int64_t hb, hc;
            uly_split(5, P, dst, &hb, &hc);
            ck_assert_uint_eq(col, (uint64_t)(2 * 10 * hc * 3));
            all += col;
        }
        ck_assert_uint_eq(all, 2 * 10 * 5 * 3);
        for (int r = 0; r < P; r++) {
            uly_volume v;
            ck_assert_int_eq(uly_plan_volume(&u, P, r, &v), ULY_OK);
            for (int w = 0; w < ULY_A2A_COUNT; w++) {
                uint64_t row = 0;
                for (int s = 0; s < P; s++)
                    if (s != r) {
                        ck_assert_int_eq(uly_plan_a2a_block(&u, P, w, r, s, &e), ULY_OK);
                        row += e * 4;
                    }
                ck_assert_uint_eq(row, v.sent[w]);
            }
        }
    }
    ck_assert_int_eq(uly_plan_a2a_block(&a, 4, ULY_A2A_Q, 0, 4, &e), ULY_EINVAL);
    ck_assert_int_eq(uly_plan_a2a_block(&a, 4, ULY_A2A_COUNT, 0, 1, &e), ULY_EINVAL);
}
END_TEST

START_TEST(volume_rejects_bad_rank)
{
    uly_attn_desc a = desc(1, 8, 4, 4, 4);
    uly_volume v;
    ck_assert_int_eq(uly_plan_volume(&a, 4, 4, &v), ULY_EINVAL);
    ck_assert_int_eq(uly_plan_volume(&a, 0, 0, &v), ULY_EINVAL);
}
END_TEST

static Suite *make_plan_suite(void)
{
    Suite *s = suite_create("plan");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, split_covers_balanced);
    tcase_add_test(tc, kv_range_and_replication);
    tcase_add_test(tc, mask_geometry);
    tcase_add_test(tc, desc_check_rejects);
    tcase_add_test(tc, volume_even_matches_formula);
    tcase_add_test(tc, volume_conserved_every_shape);
    tcase_add_test(tc, volume_rejects_bad_rank);
    tcase_add_test(tc, a2a_block_pairs);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(make_plan_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
