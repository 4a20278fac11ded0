/* SPDX-License-Identifier: Apache-2.0 */
/* test_infer_plan.c -- the plan layer of inference: KV-cache layouts against
 * a brute-force owner table, the decode volumes and the prefill's KV move. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ulysses.h"
#include "ulysses_infer.h"

static uly_attn_desc desc(int64_t B, int64_t N, int64_t H, int64_t Hkv, int64_t d)
{
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = B; a.seq = N; a.heads = H; a.kv_heads = Hkv; a.head_dim = d;
    a.causal = 1;
    a.dtype = ULY_F32;
    return a;
}

/* The owner of token t by the layout's definition, token by token. */
static int brute_owner(const uly_kv_layout *L, int64_t t)
{
    if (L->kind == ULY_KV_ROUND_ROBIN)
        return (int)((t / L->block) % L->P);
    for (int r = 0; r < L->P; r++) {
        int64_t b, c;
        uly_split(L->prompt, L->P, r, &b, &c);
        if (t >= b && t < b + c)
            return r;
    }
    return L->P - 1;
}

/* Check owner, row, count and segments of L over [0, n) against the brute
 * force. */
static void check_layout(const uly_kv_layout *L, int64_t n)
{
    int64_t cnt[8] = {0};
    int64_t *bg = malloc(sizeof(int64_t) * (size_t)(n + 1)), *ct = malloc(sizeof(int64_t) * (size_t)(n + 1));
    ck_assert(bg && ct);
    for (int64_t t = 0; t < n; t++) {
        const int o = brute_owner(L, t);
        ck_assert_int_eq(uly_kv_owner(L, t), o);
        ck_assert_int_eq(uly_kv_row(L, t), cnt[o]); /* its tokens of [0, t) */
        cnt[o]++;
    }
    int64_t total = 0;
    for (int r = 0; r < L->P; r++) {
        ck_assert_int_eq(uly_kv_count(L, r, n), cnt[r]);
        total += cnt[r];
        const int64_t ns = uly_kv_segments(L, r, n, NULL, NULL, 0);
        ck_assert_int_le(ns, n + 1);
        ck_assert_int_eq(uly_kv_segments(L, r, n, bg, ct, ns), ns);
        /* the runs: maximal, in token order, exactly r's tokens */
        int64_t sum = 0, prev_end = -2;
        for (int64_t i = 0; i < ns; i++) {
            ck_assert_int_gt(ct[i], 0);
            ck_assert_int_gt(bg[i], prev_end); /* ordered and not adjacent: maximal runs */
            for (int64_t t = bg[i]; t < bg[i] + ct[i]; t++)
                ck_assert_int_eq(brute_owner(L, t), r);
            if (bg[i] > 0)
                ck_assert_int_ne(brute_owner(L, bg[i] - 1), r);
            if (bg[i] + ct[i] < n)
                ck_assert_int_ne(brute_owner(L, bg[i] + ct[i]), r);
            prev_end = bg[i] + ct[i];
            sum += ct[i];
        }
        ck_assert_int_eq(sum, cnt[r]);
        /* a short cap writes only cap entries */
        if (ns > 1) {
            int64_t b1[1] = {-7}, c1[1] = {-7};
            ck_assert_int_eq(uly_kv_segments(L, r, n, b1, c1, 1), ns);
            ck_assert_int_eq(b1[0], bg[0]);
        }
    }
    ck_assert_int_eq(total, n);
    free(bg);
    free(ct);
}

START_TEST(kv_layouts_against_brute_force)
{
    uly_kv_layout L;
    for (int P = 1; P <= 7; P++)
        for (int64_t n = 0; n <= 60; n += 1 + n / 7) {
            for (int64_t b = 1; b <= 9; b += 2) {
                ck_assert_int_eq(uly_kv_layout_init(&L, ULY_KV_ROUND_ROBIN, P, b, 0), ULY_OK);
                check_layout(&L, n);
            }
            for (int64_t prompt = 0; prompt <= n; prompt += 1 + prompt / 3) {
                ck_assert_int_eq(uly_kv_layout_init(&L, ULY_KV_CONTIGUOUS, P, 0, prompt), ULY_OK);
                check_layout(&L, n);
            }
        }
    /* long caches: the closed forms at positions no loop visits */
    ck_assert_int_eq(uly_kv_layout_init(&L, ULY_KV_ROUND_ROBIN, 3, 32, 0), ULY_OK);
    const int64_t t = 1000000007;
    ck_assert_int_eq(uly_kv_owner(&L, t), (int)((t / 32) % 3));
    ck_assert_int_eq(uly_kv_row(&L, t), t / 96 * 32 + t % 32);
    ck_assert_int_eq(uly_kv_count(&L, 0, 96 * 1000 + 40), 32 * 1000 + 32);
    ck_assert_int_eq(uly_kv_count(&L, 1, 96 * 1000 + 40), 32 * 1000 + 8);
    ck_assert_int_eq(uly_kv_count(&L, 2, 96 * 1000 + 40), 32 * 1000);
}
END_TEST

START_TEST(kv_layout_names_and_errors)
{
    int kind;
    int64_t b;
    char buf[64];
    uly_kv_layout L;
    ck_assert_int_eq(uly_kv_layout_parse("contiguous", &kind, &b), ULY_OK);
    ck_assert_int_eq(kind, ULY_KV_CONTIGUOUS);
    ck_assert_int_eq(b, 0);
    ck_assert_int_eq(uly_kv_layout_parse("round-robin:32", &kind, &b), ULY_OK);
    ck_assert_int_eq(kind, ULY_KV_ROUND_ROBIN);
    ck_assert_int_eq(b, 32);
    uly_kv_layout_init(&L, kind, 4, b, 0);
    ck_assert_str_eq(uly_kv_layout_name(&L, buf, sizeof buf), "round-robin:32");
    uly_kv_layout_init(&L, ULY_KV_CONTIGUOUS, 4, 0, 10);
    ck_assert_str_eq(uly_kv_layout_name(&L, buf, sizeof buf), "contiguous");
    static const char *const bad[] = {"round-robin:0", "round-robin:", "round-robin:-3", "round-robin:4x",
                                      "round-robin", "Contiguous", "", "round-robin: 4"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_int_eq(uly_kv_layout_parse(bad[i], &kind, &b), ULY_EINVAL);
        ck_assert(strstr(uly_last_error(), bad[i]) != NULL);
    }
    ck_assert_int_eq(uly_kv_layout_init(&L, ULY_KV_ROUND_ROBIN, 0, 4, 0), ULY_EINVAL);
    ck_assert_int_eq(uly_kv_layout_init(&L, ULY_KV_ROUND_ROBIN, 2, 0, 0), ULY_EINVAL);
    ck_assert_int_eq(uly_kv_layout_init(&L, ULY_KV_CONTIGUOUS, 2, 0, -1), ULY_EINVAL);
    ck_assert_int_eq(uly_kv_layout_init(&L, 7, 2, 1, 0), ULY_EINVAL);
    int s;
    ck_assert_int_eq(uly_decode_parse("dcp", &s), ULY_OK);
    ck_assert_int_eq(s, ULY_DECODE_DCP);
    ck_assert_int_eq(uly_decode_parse("helix", &s), ULY_OK);
    ck_assert_int_eq(s, ULY_DECODE_HELIX);
    ck_assert_str_eq(uly_decode_name(ULY_DECODE_HELIX), "helix");
    ck_assert_int_eq(uly_decode_parse("tp", &s), ULY_EINVAL);
    for (int w = 0; w < ULY_DEC_COUNT; w++)
        ck_assert_str_ne(uly_dec_vol_name(w), "?");
    ck_assert_str_eq(uly_dec_vol_name(ULY_DEC_COUNT), "?");
}
END_TEST

/*
 * Hand-derived: B = 2, H = 5, d = 4, f32 (4 bytes), P = 2.  Heads split
 * 3 + 2.  Rank 0 (3 heads):
 *   dcp  q all-gather  sent 1 peer x 2 x 3 x 4 x 4 = 96, recv 2 x 2 x 4 x 4 = 64
 *        lse           sent 1 x 2 x 5 x 4 = 40, recv 40
 *        o             sent 2 x 2 x 4 x 4 = 64 (rank 1's heads), recv 1 x 2 x 3 x 4 x 4 = 96
 *   helix o+lse        sent 2 x 2 x (4 + 1) x 4 = 80, recv 1 x 2 x 3 x 5 x 4 = 120
 */
START_TEST(decode_volume_hand_derived)
{
    uly_attn_desc a = desc(2, 100, 5, 5, 4);
    uly_decode_volume v;
    ck_assert_int_eq(uly_plan_decode_volume(&a, ULY_DECODE_DCP, 2, 0, &v), ULY_OK);
    ck_assert_uint_eq(v.sent[ULY_DEC_Q_AG], 96);
    ck_assert_uint_eq(v.recv[ULY_DEC_Q_AG], 64);
    ck_assert_uint_eq(v.sent[ULY_DEC_LSE_AG], 40);
    ck_assert_uint_eq(v.recv[ULY_DEC_LSE_AG], 40);
    ck_assert_uint_eq(v.sent[ULY_DEC_O_RS], 64);
    ck_assert_uint_eq(v.recv[ULY_DEC_O_RS], 96);
    ck_assert_uint_eq(v.sent[ULY_DEC_OL_A2A], 0);
    ck_assert_int_eq(uly_plan_decode_volume(&a, ULY_DECODE_HELIX, 2, 0, &v), ULY_OK);
    ck_assert_uint_eq(v.sent[ULY_DEC_OL_A2A], 80);
    ck_assert_uint_eq(v.recv[ULY_DEC_OL_A2A], 120);
    ck_assert_uint_eq(v.sent[ULY_DEC_Q_AG] + v.sent[ULY_DEC_LSE_AG] + v.sent[ULY_DEC_O_RS], 0);
    /* one rank sends nothing; bad arguments */
    ck_assert_int_eq(uly_plan_decode_volume(&a, ULY_DECODE_DCP, 1, 0, &v), ULY_OK);
    for (int w = 0; w < ULY_DEC_COUNT; w++)
        ck_assert_uint_eq(v.sent[w] + v.recv[w], 0);
    ck_assert_int_eq(uly_plan_decode_volume(&a, ULY_DECODE_DCP, 2, 2, &v), ULY_EINVAL);
    ck_assert_int_eq(uly_plan_decode_volume(&a, 5, 2, 0, &v), ULY_EINVAL);
}
END_TEST

/* Over all ranks, what is sent equals what is received; and the volume does
 * not depend on the cache length (a->seq). */
START_TEST(decode_volume_conserved)
{
    for (int P = 1; P <= 6; P++)
        for (int64_t H = 1; H <= 9; H++)
            for (int s = 0; s < ULY_DECODE_COUNT; s++) {
                uly_attn_desc a = desc(3, 17, H, 1, 8);
                a.dtype = H % 2 ? ULY_F32 : ULY_F64;
                uint64_t sent[ULY_DEC_COUNT] = {0}, recv[ULY_DEC_COUNT] = {0};
                for (int r = 0; r < P; r++) {
                    uly_decode_volume v, w;
                    ck_assert_int_eq(uly_plan_decode_volume(&a, s, P, r, &v), ULY_OK);
                    a.seq = 1 << 20;
                    ck_assert_int_eq(uly_plan_decode_volume(&a, s, P, r, &w), ULY_OK);
                    a.seq = 17;
                    ck_assert_mem_eq(&v, &w, sizeof v);
                    for (int k = 0; k < ULY_DEC_COUNT; k++) {
                        sent[k] += v.sent[k];
                        recv[k] += v.recv[k];
                    }
                }
                for (int k = 0; k < ULY_DEC_COUNT; k++)
                    ck_assert_uint_eq(sent[k], recv[k]);
            }
}
END_TEST

/* The prefill's KV move against a token-by-token count. */
START_TEST(prefill_kv_volume_brute_force)
{
    static const int methods[] = {ULY_METHOD_ULYSSES, ULY_METHOD_RING, ULY_METHOD_ZIGZAG, ULY_METHOD_ALLGATHER};
    for (int P = 1; P <= 5; P++)
        for (int64_t N = P * 2; N <= 41; N += 13)
            for (size_t m = 0; m < sizeof methods / sizeof *methods; m++)
                for (int kind = 0; kind < 2; kind++) {
                    uly_attn_desc a = desc(2, N, 4, 2, 3);
                    uly_sp_plan p;
                    ck_assert_int_eq(uly_sp_plan_init(&p, methods[m], P, 0, 0), ULY_OK);
                    uly_kv_layout L;
                    ck_assert_int_eq(uly_kv_layout_init(&L, kind, P, kind ? 3 : 0, N), ULY_OK);
                    const uint64_t per = 2 * 2 * 2 * 3 * 4;
                    for (int r = 0; r < P; r++) {
                        uint64_t bs = 0, br = 0;
                        for (int64_t t = 0; t < N; t++) {
                            int holder = -1;
                            for (int x = 0; x < P && holder < 0; x++) {
                                int64_t tb[2], tc[2];
                                const int ns = uly_plan_tokens(&p, N, x, tb, tc);
                                for (int s = 0; s < ns; s++)
                                    if (t >= tb[s] && t < tb[s] + tc[s])
                                        holder = x;
                            }
                            const int owner = uly_kv_owner(&L, t);
                            bs += holder == r && owner != r;
                            br += owner == r && holder != r;
                        }
                        uint64_t s, rv;
                        ck_assert_int_eq(uly_plan_prefill_kv_volume(&a, &p, &L, r, &s, &rv), ULY_OK);
                        ck_assert_uint_eq(s, bs * per);
                        ck_assert_uint_eq(rv, br * per);
                    }
                }
    /* ulysses and contiguous coincide: nothing moves */
    uly_attn_desc a = desc(1, 10, 2, 2, 2);
    uly_sp_plan p;
    uly_kv_layout L;
    uly_sp_plan_init(&p, ULY_METHOD_ULYSSES, 3, 0, 0);
    uly_kv_layout_init(&L, ULY_KV_CONTIGUOUS, 3, 0, 10);
    uint64_t s, r;
    ck_assert_int_eq(uly_plan_prefill_kv_volume(&a, &p, &L, 1, &s, &r), ULY_OK);
    ck_assert_uint_eq(s + r, 0);
    uly_kv_layout_init(&L, ULY_KV_CONTIGUOUS, 2, 0, 10);
    ck_assert_int_eq(uly_plan_prefill_kv_volume(&a, &p, &L, 1, &s, &r), ULY_EINVAL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("infer_plan");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, kv_layouts_against_brute_force);
    tcase_add_test(tc, kv_layout_names_and_errors);
    tcase_add_test(tc, decode_volume_hand_derived);
    tcase_add_test(tc, decode_volume_conserved);
    tcase_add_test(tc, prefill_kv_volume_brute_force);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
