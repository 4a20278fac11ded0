/* SPDX-License-Identifier: Apache-2.0 */
/* test_plan_docs.c -- the plan layer of packed documents (ulysses_plan.h,
 * "packed documents: load balance"): every balancer's per-rank tokens and
 * visible pairs against hand-derived goldens (pytorch PR #189902's example
 * among them), and against a token-by-token count on random lengths. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ulysses.h"

enum { C = ULY_DOCBAL_CONTIGUOUS, Z = ULY_DOCBAL_ZIGZAG, HT = ULY_DOCBAL_HEAD_TAIL,
       DM = ULY_DOCBAL_HEAD_TAIL_DOC_MAJOR, DZ = ULY_DOCBAL_DOC_ZIGZAG };

static void check_work(int bal, const int64_t *lens, int64_t D, int P, const int64_t *want_tok,
                       const int64_t *want_pairs)
{
    int64_t tok[16], pairs[16];
    ck_assert_int_eq(uly_docbal_work(bal, lens, D, P, tok, pairs), ULY_OK);
    for (int r = 0; r < P; r++) {
        ck_assert_msg(tok[r] == want_tok[r], "%s rank %d: %lld tokens, want %lld", uly_docbal_name(bal), r,
                      (long long)tok[r], (long long)want_tok[r]);
        ck_assert_msg(pairs[r] == want_pairs[r], "%s rank %d: %lld pairs, want %lld", uly_docbal_name(bal), r,
                      (long long)pairs[r], (long long)want_pairs[r]);
    }
}

static void check_segs(int bal, const int64_t *lens, int64_t D, int P, int r, int n, const int64_t *want)
{
    int64_t b[64], c[64];
    int64_t got = uly_docbal_segments(bal, lens, D, P, r, b, c, 64);
    ck_assert_msg(got == n, "%s rank %d: %lld segments, want %d", uly_docbal_name(bal), r, (long long)got, n);
    for (int i = 0; i < n; i++)
        ck_assert_msg(b[i] == want[2 * i] && c[i] == want[2 * i + 1], "%s rank %d segment %d: (%lld, %lld), want (%lld, %lld)",
                      uly_docbal_name(bal), r, i, (long long)b[i], (long long)c[i], (long long)want[2 * i],
                      (long long)want[2 * i + 1]);
}

/*
 * pytorch/pytorch PR #189902's example: documents of 4 and 12 tokens (doc 0
 * = tokens 0-3, doc 1 = tokens 4-15), CP 2.  Query q of a document starting
 * at o sees q - o + 1 keys: q0..q3 see 1, 2, 3, 4 (sum 10), q4..q15 see
 * 1 .. 12 (sum 78); 88 pairs in all.
 *   contiguous: rank 0 tokens 0-7: 10 + (1+2+3+4) = 20; rank 1 tokens 8-15:
 *     5+6+...+12 = 68.
 *   zigzag: 4 chunks of 4 (0-3, 4-7, 8-11, 12-15); rank 0 chunks 0 and 3:
 *     10 + (9+10+11+12) = 52; rank 1 chunks 1 and 2: (1+2+3+4) + (5+6+7+8) = 36.
 *   head-tail: doc 0 in 4 chunks of 1: rank 0 q0, q3 (1+4 = 5), rank 1 q1, q2
 *     (2+3 = 5); doc 1 in 4 chunks of 3 (4-6, 7-9, 10-12, 13-15 seeing 1-3,
 *     4-6, 7-9, 10-12): rank 0 chunks 0, 3: 6 + 33 = 39, rank 1 chunks 1, 2:
 *     15 + 24 = 39; so 44 / 44.  Rank 0's segments: token 0, tokens 3-6
 *     (q3 of doc 0 joins doc 1's first chunk), tokens 13-15.
 *   head-tail-doc-major: rearranged q0 q3 | q1 q2 | q4 q5 q6 q13 q14 q15 |
 *     q7 .. q12 (doc 0: rank 0's head and tail, rank 1's; then doc 1), cut in
 *     halves: rank 0 q0 q3 q1 q2 q4 q5 q6 q13: 10 + 6 + 10 = 26; rank 1 q14 q15
 *     q7 .. q12: 11 + 12 + (4+5+6+7+8+9) = 62 -- the imbalance the PR reports:
 *     rank 1 holds doc 1's tail.
 *   doc-zigzag: both lengths divisible by 2P = 4, so head-tail's chunks: 44 / 44.
 */
START_TEST(pr189902_example)
{
    const int64_t lens[2] = {4, 12}, eight[2] = {8, 8};
    ck_assert_int_eq(uly_docs_pairs_total(lens, 2), 88);
    check_work(C, lens, 2, 2, eight, (const int64_t[]){20, 68});
    check_work(Z, lens, 2, 2, eight, (const int64_t[]){52, 36});
    check_work(HT, lens, 2, 2, eight, (const int64_t[]){44, 44});
    check_work(DM, lens, 2, 2, eight, (const int64_t[]){26, 62});
    check_work(DZ, lens, 2, 2, eight, (const int64_t[]){44, 44});
    check_segs(HT, lens, 2, 2, 0, 3, (const int64_t[]){0, 1, 3, 4, 13, 3});
    check_segs(HT, lens, 2, 2, 1, 2, (const int64_t[]){1, 2, 7, 6});
    /* doc-major, in the rank's row order: q0 | q3 | q1 q2 | q4 q5 q6 | q13; q14 q15 | q7 .. q12 */
    check_segs(DM, lens, 2, 2, 0, 5, (const int64_t[]){0, 1, 3, 1, 1, 2, 4, 3, 13, 1});
    check_segs(DM, lens, 2, 2, 1, 2, (const int64_t[]){14, 2, 7, 6});
    check_segs(Z, lens, 2, 2, 0, 2, (const int64_t[]){0, 4, 12, 4});
    check_segs(C, lens, 2, 2, 1, 1, (const int64_t[]){8, 8});
}
END_TEST

/*
 * Uneven lengths: documents of 5 and 3 tokens, CP 2 (N = 8).  Queries see
 * q0..q4: 1..5 (15), q5..q7: 1..3 (6); 21 pairs.
 *   contiguous: 0-3 -> 1+2+3+4 = 10; 4-7 -> 5 + 1+2+3 = 11.
 *   zigzag: uly_split(8, 4) = 4 chunks of 2; rank 0 chunks 0, 3 (q0 q1 q6 q7):
 *     1+2 + 2+3 = 8; rank 1 chunks 1, 2 (q2..q5): 3+4 + 5+1 = 13.
 *   head-tail: doc 0 uly_split(5, 4) = 2,1,1,1: rank 0 q0 q1 q4 (1+2+5 = 8),
 *     rank 1 q2 q3 (7); doc 1 uly_split(3, 4) = 1,1,1,0: rank 0 q5 (1), rank 1
 *     q6 q7 (2+3 = 5).  Tokens 4 / 4, pairs 9 / 12.
 *   doc-zigzag: torch.chunk cuts of ceil(L/4): doc 0 in 2,2,1,0: rank 0 q0 q1
 *     (3), rank 1 q2 q3 q4 (12); doc 1 in 1,1,1,0: rank 0 q5 (1), rank 1 q6 q7
 *     (5).  Tokens 3 / 5, pairs 4 / 17.
 *   head-tail-doc-major: head-tail's chunks rearranged q0 q1 q4 q2 q3 q5 q6 q7
 *     (doc 1's rank-0 tail chunk is empty), halves: rank 0 q0 q1 q4 q2: 1+2+5+3
 *     = 11; rank 1 q3 q5 q6 q7: 4 + 1+2+3 = 10.
 */
START_TEST(uneven_lengths)
{
    const int64_t lens[2] = {5, 3}, four[2] = {4, 4};
    check_work(C, lens, 2, 2, four, (const int64_t[]){10, 11});
    check_work(Z, lens, 2, 2, four, (const int64_t[]){8, 13});
    check_work(HT, lens, 2, 2, four, (const int64_t[]){9, 12});
    check_work(DZ, lens, 2, 2, (const int64_t[]){3, 5}, (const int64_t[]){4, 17});
    check_work(DM, lens, 2, 2, four, (const int64_t[]){11, 10});
    check_segs(DM, lens, 2, 2, 0, 3, (const int64_t[]){0, 2, 4, 1, 2, 1});
    check_segs(DZ, lens, 2, 2, 1, 2, (const int64_t[]){2, 3, 6, 2});
}
END_TEST

/*
 * One document of 7 tokens, CP 3: query q sees q + 1 keys (28 in all).
 *   contiguous uly_split(7, 3) = 3,2,2: 1+2+3 = 6, 4+5 = 9, 6+7 = 13.
 *   zigzag uly_split(7, 6) = 2,1,1,1,1,1 (0-1, 2, 3, 4, 5, 6): rank 0 chunks
 *     0, 5: 1+2+7 = 10; rank 1 chunks 1, 4: 3+6 = 9; rank 2 chunks 2, 3: 4+5 = 9.
 *   head-tail: one document, so the zigzag's chunks: 10, 9, 9.
 *   doc-zigzag: ceil(7/6) = 2: chunks 0-1, 2-3, 4-5, 6, -, -: rank 0 chunks 0,
 *     5: 1+2 = 3 (2 tokens); rank 1 chunks 1, 4: 3+4 = 7 (2); rank 2 chunks 2,
 *     3: 5+6+7 = 18 (3).
 *   head-tail-doc-major: rearranged q0 q1 q6 | q2 q5 | q3 q4 cut 3,2,2: the
 *     same ranks as head-tail, 10, 9, 9.
 */
START_TEST(one_document_three_ranks)
{
    const int64_t lens[1] = {7}, t322[3] = {3, 2, 2};
    check_work(C, lens, 1, 3, t322, (const int64_t[]){6, 9, 13});
    check_work(Z, lens, 1, 3, t322, (const int64_t[]){10, 9, 9});
    check_work(HT, lens, 1, 3, t322, (const int64_t[]){10, 9, 9});
    check_work(DZ, lens, 1, 3, (const int64_t[]){2, 2, 3}, (const int64_t[]){3, 7, 18});
    check_work(DM, lens, 1, 3, t322, (const int64_t[]){10, 9, 9});
}
END_TEST

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

/* Random lengths: every token owned by exactly one rank, the segments of a
 * rank summing to its tokens, its pairs equal to the token-by-token count
 * (query q of a document at o: q - o + 1), and the sum over ranks equal to
 * the total.  The contiguous and zigzag layouts are the ring's and the
 * zigzag ring's shards (uly_plan_tokens). */
START_TEST(random_lengths_properties)
{
    uint64_t seed = 12345;
    for (int trial = 0; trial < 300; trial++) {
        int64_t D = 1 + (int64_t)(lcg(&seed) % 7), lens[8], N = 0;
        for (int64_t i = 0; i < D; i++) {
            lens[i] = 1 + (int64_t)(lcg(&seed) % (trial % 3 == 0 ? 5 : 40));
            N += lens[i];
        }
        const int P = 1 + (int)(lcg(&seed) % 9);
        int64_t *docstart = malloc((size_t)N * sizeof *docstart);
        int *owner = malloc((size_t)N * sizeof *owner);
        ck_assert_ptr_nonnull(docstart);
        ck_assert_ptr_nonnull(owner);
        for (int64_t i = 0, at = 0; i < D; at += lens[i], i++)
            for (int64_t t = at; t < at + lens[i]; t++)
                docstart[t] = at;
        int64_t total = uly_docs_pairs_total(lens, D);
        for (int bal = 0; bal < ULY_DOCBAL_COUNT; bal++) {
            int64_t tok[9], pairs[9], sum = 0, tsum = 0;
            ck_assert_int_eq(uly_docbal_work(bal, lens, D, P, tok, pairs), ULY_OK);
            for (int64_t t = 0; t < N; t++)
                owner[t] = -1;
            const int64_t cap = uly_docbal_max_segments(bal, D, P);
            int64_t *b = malloc((size_t)cap * sizeof *b), *c = malloc((size_t)cap * sizeof *c);
            ck_assert_ptr_nonnull(b);
            ck_assert_ptr_nonnull(c);
            for (int r = 0; r < P; r++) {
                int64_t n = uly_docbal_segments(bal, lens, D, P, r, b, c, cap), toks = 0, brute = 0;
                ck_assert_int_ge(n, 0);
                ck_assert_int_le(n, cap);
                for (int64_t s = 0; s < n; s++) {
                    ck_assert_int_gt(c[s], 0);
                    if (s > 0)
                        ck_assert_int_ne(b[s - 1] + c[s - 1], b[s]);
                    for (int64_t t = b[s]; t < b[s] + c[s]; t++) {
                        ck_assert_int_ge(t, 0);
                        ck_assert_int_lt(t, N);
                        ck_assert_msg(owner[t] < 0, "%s: token %lld owned twice", uly_docbal_name(bal), (long long)t);
                        owner[t] = r;
                        brute += t - docstart[t] + 1;
                    }
                    toks += c[s];
                }
                ck_assert_int_eq(toks, tok[r]);
                ck_assert_int_eq(brute, pairs[r]);
                sum += pairs[r];
                tsum += tok[r];
                if (bal == C || bal == Z) {
                    uly_sp_plan p;
                    ck_assert_int_eq(uly_sp_plan_init(&p, bal == C ? ULY_METHOD_RING : ULY_METHOD_ZIGZAG, P, 0, 0), ULY_OK);
                    int64_t pb[2], pc[2];
                    int ns = uly_plan_tokens(&p, N, r, pb, pc);
                    int64_t k = 0;
                    for (int s = 0; s < ns; s++)
                        if (pc[s] > 0) {
                            ck_assert_int_lt(k, n);
                            ck_assert_int_eq(pb[s], b[k]);
                            ck_assert_int_eq(pc[s], c[k]);
                            k++;
                        }
                    ck_assert_int_eq(k, n);
                }
            }
            for (int64_t t = 0; t < N; t++)
                ck_assert_msg(owner[t] >= 0, "%s: token %lld owned by no rank", uly_docbal_name(bal), (long long)t);
            ck_assert_int_eq(sum, total);
            ck_assert_int_eq(tsum, N);
            free(b);
            free(c);
        }
        free(docstart);
        free(owner);
    }
}
END_TEST

/* When 2P divides every length, doc-zigzag's cut is head-tail's, and
 * head-tail gives every rank the same pairs: in a document of L = 2P m
 * tokens, chunk k holds positions k m .. k m + m - 1, whose queries see
 * j + 1 keys, sum m^2 k + m (m + 1) / 2; chunks r and 2P-1-r together
 * m^2 (2P - 1) + m (m + 1) = m (2P m + 1), whatever r. */
START_TEST(divisible_lengths_balanced)
{
    uint64_t seed = 99;
    for (int trial = 0; trial < 100; trial++) {
        const int P = 1 + (int)(lcg(&seed) % 6);
        int64_t D = 1 + (int64_t)(lcg(&seed) % 5), lens[5];
        for (int64_t i = 0; i < D; i++)
            lens[i] = 2 * P * (1 + (int64_t)(lcg(&seed) % 6));
        int64_t t1[6], p1[6], t2[6], p2[6];
        ck_assert_int_eq(uly_docbal_work(HT, lens, D, P, t1, p1), ULY_OK);
        ck_assert_int_eq(uly_docbal_work(DZ, lens, D, P, t2, p2), ULY_OK);
        int64_t want = 0;
        for (int64_t i = 0; i < D; i++) {
            int64_t m = lens[i] / (2 * P);
            want += m * (2 * P * m + 1);
        }
        for (int r = 0; r < P; r++) {
            ck_assert_int_eq(t1[r], t2[r]);
            ck_assert_int_eq(p1[r], p2[r]);
            ck_assert_int_eq(p1[r], want);
        }
    }
}
END_TEST

START_TEST(names_and_errors)
{
    int b = -1;
    for (int i = 0; i < ULY_DOCBAL_COUNT; i++) {
        ck_assert_int_eq(uly_docbal_parse(uly_docbal_name(i), &b), ULY_OK);
        ck_assert_int_eq(b, i);
    }
    ck_assert_str_eq(uly_docbal_name(DM), "head-tail-doc-major");
    ck_assert_str_eq(uly_docbal_name(99), "?");
    ck_assert_int_eq(uly_docbal_parse("headtail", &b), ULY_EINVAL);
    ck_assert_int_eq(uly_docbal_parse(NULL, &b), ULY_EINVAL);
    const int64_t ok[2] = {3, 4}, zero[2] = {3, 0}, neg[2] = {-1, 4}, huge[2] = {ULY_DOCS_MAX_TOKENS, 1};
    int64_t t[4], p[4], N = 0;
    ck_assert_int_eq(uly_docs_check(ok, 2, &N), ULY_OK);
    ck_assert_int_eq(N, 7);
    ck_assert_int_eq(uly_docs_check(ok, 0, &N), ULY_EINVAL);
    ck_assert_int_eq(uly_docbal_work(HT, zero, 2, 2, t, p), ULY_EINVAL);
    ck_assert_int_eq(uly_docbal_work(HT, neg, 2, 2, t, p), ULY_EINVAL);
    ck_assert_int_eq(uly_docbal_work(HT, huge, 2, 2, t, p), ULY_EINVAL);
    ck_assert_int_eq(uly_docbal_work(HT, ok, 2, 0, t, p), ULY_EINVAL);
    ck_assert_int_eq(uly_docbal_work(ULY_DOCBAL_COUNT, ok, 2, 2, t, p), ULY_EINVAL);
    ck_assert_int_eq(uly_docbal_segments(HT, ok, 2, 2, 2, t, p, 4), -ULY_EINVAL);
    /* too small a buffer: the count comes back, the buffer holds the first ones */
    int64_t sb[1], sc[1];
    ck_assert_int_eq(uly_docbal_segments(HT, ok, 2, 2, 0, sb, sc, 1), 3);
    ck_assert_int_eq(sb[0], 0);
    ck_assert_int_eq(sc[0], 1);
    ck_assert_int_eq(uly_docbal_segments(HT, ok, 2, 2, 0, NULL, NULL, 0), 3);
    /* pairs of a range crossing documents 3 | 4: queries 2..4 see 3, 1, 2 */
    const int64_t off[3] = {0, 3, 7};
    ck_assert_int_eq(uly_docs_pairs_range(off, 2, 2, 3), 6);
    ck_assert_int_eq(uly_docs_pairs_range(off, 2, 0, 7), 16);
    ck_assert_int_eq(uly_docs_pairs_range(off, 2, 5, 0), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plan_docs");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, pr189902_example);
    tcase_add_test(tc, uneven_lengths);
    tcase_add_test(tc, one_document_three_ranks);
    tcase_add_test(tc, random_lengths_properties);
    tcase_add_test(tc, divisible_lengths_balanced);
    tcase_add_test(tc, names_and_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
