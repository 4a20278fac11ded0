/* SPDX-License-Identifier: Apache-2.0 */
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


/* --------------------------------------------------------- methods */

/* Offsets of D documents per row, lengths drawn from a fixed pattern. */
static int64_t *make_docs(int64_t B, int64_t N, int64_t D, uint64_t seed)
{
    int64_t *off = malloc((size_t)(B * (D + 1)) * sizeof *off);
    for (int64_t b = 0; b < B; b++) {
        int64_t *o = off + b * (D + 1);
        o[0] = 0;
        for (int64_t i = 1; i < D; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            int64_t step = (int64_t)((seed >> 33) % (uint64_t)(2 * N / D + 1)); /* may be 0: empty doc */
            o[i] = o[i - 1] + step > N ? N : o[i - 1] + step;
        }
        o[D] = N;
    }
    return off;
}

static int brute_visible(const uly_attn_desc *a, int64_t b, int64_t i, int64_t j)
{
    if (a->causal && j > i)
        return 0;
    if (a->window > 0 && (i > j ? i - j : j - i) >= a->window)
        return 0;
    if (a->doc_offsets) {
        const int64_t *o = a->doc_offsets + b * (a->docs + 1);
        int64_t di = -1, dj = -1;
        for (int64_t x = 0; x < a->docs; x++) {
            if (i >= o[x] && i < o[x + 1]) di = x;
            if (j >= o[x] && j < o[x + 1]) dj = x;
        }
        return di == dj;
    }
    return 1;
}

START_TEST(documents_geometry)
{
    const int64_t N = 37, B = 3;
    for (int mask = 0; mask < 4; mask++)
        for (int64_t D = 1; D <= 6; D += 5) {
            int64_t *off = make_docs(B, N, D, 7 + (uint64_t)mask);
            uly_attn_desc a = desc(B, N, 2, 1, 4);
            a.causal = mask & 1;
            a.window = mask & 2 ? 5 : 0;
            a.doc_offsets = off;
            a.docs = D;
            ck_assert_int_eq(uly_attn_desc_check(&a), ULY_OK);
            double total = 0;
            for (int64_t b = 0; b < B; b++) {
                for (int64_t i = 0; i < N; i++)
                    for (int64_t j = 0; j < N; j++)
                        ck_assert_int_eq(uly_attn_visible_row(&a, b, i, j), brute_visible(&a, b, i, j));
                /* pairs and any-visible over ranges, against brute force */
                for (int64_t q0 = 0; q0 < N; q0 += 5)
                    for (int64_t k0 = 0; k0 < N; k0 += 7) {
                        int64_t nq = q0 + 6 > N ? N - q0 : 6, nk = k0 + 9 > N ? N - k0 : 9, cnt = 0;
                        for (int64_t i = q0; i < q0 + nq; i++)
                            for (int64_t j = k0; j < k0 + nk; j++)
                                cnt += brute_visible(&a, b, i, j);
                        ck_assert_int_eq(uly_attn_pairs_range(&a, b, q0, nq, k0, nk), cnt);
                        ck_assert_int_eq(uly_attn_any_visible(&a, b, q0, nq, k0, nk), cnt > 0);
                    }
                total += (double)uly_attn_pairs_range(&a, b, 0, N, 0, N);
            }
            ck_assert_double_eq(uly_attn_pairs(&a) * B, total);
            free(off);
        }
}
END_TEST

START_TEST(documents_rejected)
{
    int64_t off[2][4] = {{0, 3, 2, 8}, {0, 3, 5, 8}};
    uly_attn_desc a = desc(2, 8, 1, 1, 1);
    a.doc_offsets = &off[0][0];
    a.docs = 3;
    ck_assert_int_eq(uly_attn_desc_check(&a), ULY_EINVAL);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "decrease"));
    off[0][2] = 3;
    ck_assert_int_eq(uly_attn_desc_check(&a), ULY_OK);
    off[1][3] = 7;
    ck_assert_int_eq(uly_attn_desc_check(&a), ULY_EINVAL);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "end at the sequence length"));
    off[1][3] = 8;
    off[1][0] = 1;
    ck_assert_int_eq(uly_attn_desc_check(&a), ULY_EINVAL);
    off[1][0] = 0;
    a.docs = 0;
    ck_assert_int_eq(uly_attn_desc_check(&a), ULY_EINVAL);
    a.doc_offsets = NULL;
    a.docs = 2;
    ck_assert_int_eq(uly_attn_desc_check(&a), ULY_EINVAL);
}
END_TEST

START_TEST(method_names_and_init)
{
    int m, pl;
    for (int i = 0; i < ULY_METHOD_COUNT; i++) {
        ck_assert_int_eq(uly_method_parse(uly_method_name(i), &m), ULY_OK);
        ck_assert_int_eq(m, i);
    }
    ck_assert_int_eq(uly_method_parse("rings", &m), ULY_EINVAL);
    ck_assert_int_eq(uly_placement_parse("ring-inner", &pl), ULY_OK);
    ck_assert_int_eq(pl, ULY_PLACE_RING_INNER);
    ck_assert_int_eq(uly_placement_parse("x", &pl), ULY_EINVAL);
    uly_sp_plan p;
    ck_assert_int_eq(uly_sp_plan_init(&p, ULY_METHOD_ULYSSES, 4, 2, 0), ULY_EINVAL);
    ck_assert_int_eq(uly_sp_plan_init(&p, ULY_METHOD_ULYSSES, 4, 0, 0), ULY_OK);
    ck_assert_int_eq(p.U, 4); ck_assert_int_eq(p.R, 1);
    ck_assert_int_eq(uly_sp_plan_init(&p, ULY_METHOD_RING, 4, 2, 0), ULY_EINVAL);
    ck_assert_int_eq(uly_sp_plan_init(&p, ULY_METHOD_USP, 6, 4, 0), ULY_EINVAL);
    ck_assert_int_eq(uly_sp_plan_init(&p, ULY_METHOD_USP, 6, 0, 0), ULY_EINVAL);
    ck_assert_int_eq(uly_sp_plan_init(&p, ULY_METHOD_USP, 6, 3, 1), ULY_OK);
    ck_assert_int_eq(p.R, 2); ck_assert_int_eq(p.zigzag, 1);
    ck_assert_int_eq(uly_sp_plan_init(&p, ULY_METHOD_ZIGZAG, 3, 1, 0), ULY_OK);
    ck_assert_int_eq(p.zigzag, 1);
    ck_assert_int_eq(uly_sp_plan_init(&p, ULY_METHOD_RING, 3, 0, 7), ULY_EINVAL);
    ck_assert_int_eq(uly_plan_usp_degree(4, 8), 4);
    ck_assert_int_eq(uly_plan_usp_degree(7, 8), 4);
    ck_assert_int_eq(uly_plan_usp_degree(8, 8), 8);
    ck_assert_int_eq(uly_plan_usp_degree(1, 6), 1);
    ck_assert_int_eq(uly_plan_usp_degree(5, 6), 3);
}
END_TEST

/* Every token is held by exactly one rank; a group's members hold its chunk. */
START_TEST(method_partitions)
{
    for (int m = 0; m < ULY_METHOD_COUNT; m++)
        for (int P = 1; P <= 8; P++)
            for (int U = 1; U <= P; U++) {
                if (P % U || (m != ULY_METHOD_USP && U != (m == ULY_METHOD_ULYSSES ? P : 1)))
                    continue;
                for (int pl = 0; pl < 2; pl++)
                    for (int64_t N = 0; N <= 40; N += 3) {
                        uly_sp_plan p;
                        ck_assert_int_eq(uly_sp_plan_init(&p, m, P, U, pl), ULY_OK);
                        int *owner = calloc((size_t)N + 1, sizeof *owner);
                        for (int r = 0; r < P; r++) {
                            int u, j;
                            uly_plan_grid(&p, r, &u, &j);
                            ck_assert_int_eq(uly_plan_grid_rank(&p, u, j), r);
                            int64_t b[2], c[2];
                            int ns = uly_plan_tokens(&p, N, r, b, c);
                            for (int s2 = 0; s2 < ns; s2++)
                                for (int64_t t = b[s2]; t < b[s2] + c[s2]; t++)
                                    owner[t]++;
                            /* the rank's tokens lie inside its group's chunk */
                            int64_t cb[2], cc[2];
                            int nc = uly_plan_chunk(&p, N, j, cb, cc);
                            for (int s2 = 0; s2 < ns; s2++)
                                for (int64_t t = b[s2]; t < b[s2] + c[s2]; t++) {
                                    int in = 0;
                                    for (int x = 0; x < nc; x++)
                                        in |= t >= cb[x] && t < cb[x] + cc[x];
                                    ck_assert(in);
                                }
                        }
                        for (int64_t t = 0; t < N; t++)
                            ck_assert_int_eq(owner[t], 1);
                        free(owner);
                    }
            }
    /* zigzag: rank j holds chunks j and 2P-1-j of 2P */
    uly_sp_plan p;
    uly_sp_plan_init(&p, ULY_METHOD_ZIGZAG, 4, 1, 0);
    int64_t b[2], c[2];
    ck_assert_int_eq(uly_plan_tokens(&p, 80, 1, b, c), 2);
    ck_assert_int_eq(b[0], 10); ck_assert_int_eq(c[0], 10);
    ck_assert_int_eq(b[1], 60); ck_assert_int_eq(c[1], 10);
    /* usp 2 x 2, ulysses-inner: ranks 0, 1 share chunks 0 and 3 of 4 */
    uly_sp_plan_init(&p, ULY_METHOD_USP, 4, 2, ULY_PLACE_ULYSSES_INNER);
    ck_assert_int_eq(uly_plan_tokens(&p, 80, 1, b, c), 1);
    ck_assert_int_eq(b[0], 60); ck_assert_int_eq(c[0], 20);
    int64_t hb, hc;
    uly_plan_heads(&p, 7, 1, &hb, &hc);
    ck_assert_int_eq(hb, 4); ck_assert_int_eq(hc, 3);
    uly_sp_plan_init(&p, ULY_METHOD_USP, 4, 2, ULY_PLACE_RING_INNER);
    uly_plan_heads(&p, 7, 1, &hb, &hc); /* rank 1 = (u 0, j 1) */
    ck_assert_int_eq(hb, 0); ck_assert_int_eq(hc, 4);
}
END_TEST

/* Work: the steps of a rank cover its queries against every key exactly once. */
START_TEST(method_step_pairs)
{
    int64_t *off = make_docs(2, 45, 5, 3);
    for (int withdocs = 0; withdocs < 2; withdocs++)
        for (int mask = 0; mask < 4; mask++)
            for (int m = 0; m < ULY_METHOD_COUNT; m++)
                for (int P = 1; P <= 6; P++) {
                    int U = m == ULY_METHOD_USP ? (P % 2 == 0 ? 2 : 1) : 0;
                    uly_sp_plan p;
                    ck_assert_int_eq(uly_sp_plan_init(&p, m, P, U, 0), ULY_OK);
                    uly_attn_desc a = desc(2, 45, 4, 2, 4);
                    a.causal = mask & 1;
                    a.window = mask & 2 ? 6 : 0;
                    if (withdocs) { a.doc_offsets = off; a.docs = 5; }
                    const double all = 2 * uly_attn_pairs(&a);
                    double sum = 0;
                    for (int r = 0; r < P; r++) {
                        int u, j;
                        uly_plan_grid(&p, r, &u, &j);
                        for (int t = 0; t < uly_plan_steps(&p); t++) {
                            double w = uly_plan_step_pairs(&a, &p, r, t);
                            /* only the group's first member counts the group's work once */
                            if (u == 0 || m == ULY_METHOD_ALLGATHER || m == ULY_METHOD_RING ||
                                m == ULY_METHOD_ZIGZAG)
                                sum += w;
                            if (m != ULY_METHOD_ULYSSES && m != ULY_METHOD_ALLGATHER)
                                ck_assert_int_eq(w > 0, uly_plan_ring_need(&a, &p, j, uly_plan_ring_src(&p, j, t)));
                        }
                        ck_assert_double_eq(uly_plan_step_pairs(&a, &p, r, uly_plan_steps(&p)), 0);
                    }
                    ck_assert_double_eq(sum, m == ULY_METHOD_ULYSSES ? all * 1 : all);
                }
    /* zigzag balances the causal work exactly when 2P divides N */
    uly_attn_desc a = desc(1, 64, 1, 1, 1);
    a.causal = 1;
    uly_sp_plan z, r;
    uly_sp_plan_init(&z, ULY_METHOD_ZIGZAG, 4, 1, 0);
    uly_sp_plan_init(&r, ULY_METHOD_RING, 4, 1, 0);
    double wz[4] = {0}, wr[4] = {0};
    for (int k = 0; k < 4; k++)
        for (int t = 0; t < 4; t++) {
            wz[k] += uly_plan_step_pairs(&a, &z, k, t);
            wr[k] += uly_plan_step_pairs(&a, &r, k, t);
        }
    for (int k = 1; k < 4; k++)
        ck_assert_double_eq(wz[k], wz[0]);
    ck_assert_double_eq(wr[0], 16 * 17 / 2);
    ck_assert_double_eq(wr[3], 16 * 17 / 2 + 3 * 256);
    free(off);
}
END_TEST

static void check_method_conservation(const uly_attn_desc *a, const uly_sp_plan *p)
{
    uint64_t s[ULY_VOL_COUNT] = {0}, r[ULY_VOL_COUNT] = {0};
    for (int rank = 0; rank < p->P; rank++) {
        uly_volume v;
        ck_assert_int_eq(uly_plan_method_volume(a, p, rank, &v), ULY_OK);
        for (int w = 0; w < ULY_VOL_COUNT; w++) {
            s[w] += v.sent[w];
            r[w] += v.recv[w];
        }
    }
    for (int w = 0; w < ULY_VOL_COUNT; w++)
        ck_assert_msg(s[w] == r[w], "%s %s P=%d: sent %llu != received %llu", uly_method_name(p->method),
                      uly_vol_name(w), p->P, (unsigned long long)s[w], (unsigned long long)r[w]);
}

START_TEST(method_volume_conserved)
{
    int64_t *off = make_docs(2, 29, 4, 11);
    for (int m = 0; m < ULY_METHOD_COUNT; m++)
        for (int P = 1; P <= 8; P++)
            for (int U = 1; U <= P; U++) {
                if (P % U || (m != ULY_METHOD_USP && U != (m == ULY_METHOD_ULYSSES ? P : 1)))
                    continue;
                for (int mask = 0; mask < 8; mask++) {
                    uly_attn_desc a = desc(2, 29, 6, mask & 4 ? 2 : 6, 4);
                    a.causal = mask & 1;
                    a.window = mask & 2 ? 4 : 0;
                    if (mask >= 4) { a.doc_offsets = off; a.docs = 4; }
                    for (int pl = 0; pl < 2; pl++) {
                        uly_sp_plan p;
                        ck_assert_int_eq(uly_sp_plan_init(&p, m, P, U, pl), ULY_OK);
                        check_method_conservation(&a, &p);
                    }
                }
            }
    free(off);
}
END_TEST

START_TEST(method_volume_formulas)
{
    const int P = 4;
    const int64_t B = 2, N = 64, H = 8, Hkv = 2, d = 4, e = 4;
    const uint64_t shard = (uint64_t)(B * (N / P) * Hkv * d * e);
    uly_attn_desc a = desc(B, N, H, Hkv, d);
    uly_sp_plan p;
    uly_volume v;
    /* full mask: P-1 hops of K, V each way, P hops of dK, dV (the last returns them) */
    uly_sp_plan_init(&p, ULY_METHOD_RING, P, 0, 0);
    for (int r = 0; r < P; r++) {
        ck_assert_int_eq(uly_plan_method_volume(&a, &p, r, &v), ULY_OK);
        ck_assert_uint_eq(v.sent[ULY_RING_K], (P - 1) * shard);
        ck_assert_uint_eq(v.recv[ULY_RING_V], (P - 1) * shard);
        ck_assert_uint_eq(v.sent[ULY_RING_BK], (P - 1) * shard);
        ck_assert_uint_eq(v.sent[ULY_RING_DK], P * shard);
        ck_assert_uint_eq(v.recv[ULY_RING_DV], P * shard);
        ck_assert_uint_eq(v.sent[ULY_A2A_Q], 0);
    }
    /* causal: rank j forwards the shards 0..j that later ranks need; the last sends none */
    a.causal = 1;
    uint64_t hops = 0;
    for (int r = 0; r < P; r++) {
        ck_assert_int_eq(uly_plan_method_volume(&a, &p, r, &v), ULY_OK);
        ck_assert_uint_eq(v.sent[ULY_RING_K], (uint64_t)(r < P - 1 ? r + 1 : 0) * shard);
        hops += v.sent[ULY_RING_K] / shard;
        /* dK of shard j travels to P-1, then comes back directly */
        ck_assert_uint_eq(v.recv[ULY_RING_DK], (r > 0 ? (uint64_t)r : 0) * shard + (r < P - 1 ? shard : 0));
    }
    ck_assert_uint_eq(hops, P * (P - 1) / 2);
    /* documents aligned with the shards: nothing travels */
    int64_t off[2][5] = {{0, 16, 32, 48, 64}, {0, 16, 32, 48, 64}};
    a.doc_offsets = &off[0][0];
    a.docs = 4;
    for (int r = 0; r < P; r++) {
        ck_assert_int_eq(uly_plan_method_volume(&a, &p, r, &v), ULY_OK);
        for (int w = ULY_RING_K; w <= ULY_RING_DV; w++)
            ck_assert_uint_eq(v.sent[w] + v.recv[w], 0);
    }
    a.doc_offsets = NULL;
    a.docs = 0;
    /* a window of 16 = one shard: only the neighbour's shard is needed */
    a.window = 16;
    for (int r = 0; r < P; r++) {
        ck_assert_int_eq(uly_plan_method_volume(&a, &p, r, &v), ULY_OK);
        ck_assert_uint_eq(v.sent[ULY_RING_K], r < P - 1 ? shard : 0);
    }
    a.window = 0;
    a.causal = 0;
    /* all-gather */
    uly_sp_plan_init(&p, ULY_METHOD_ALLGATHER, P, 0, 0);
    ck_assert_int_eq(uly_plan_method_volume(&a, &p, 1, &v), ULY_OK);
    ck_assert_uint_eq(v.sent[ULY_AG_K], (P - 1) * shard);
    ck_assert_uint_eq(v.recv[ULY_AG_V], (P - 1) * shard);
    ck_assert_uint_eq(v.sent[ULY_RS_DK], (P - 1) * shard);
    ck_assert_uint_eq(v.recv[ULY_RS_DV], (P - 1) * shard);
    /* usp with U = P is ulysses; with U = 1 it is zigzag */
    uly_volume w;
    for (int r = 0; r < P; r++) {
        uly_sp_plan_init(&p, ULY_METHOD_USP, P, P, 0);
        uly_plan_method_volume(&a, &p, r, &v);
        uly_plan_volume(&a, P, r, &w);
        ck_assert_mem_eq(&v, &w, sizeof v);
        uly_sp_plan_init(&p, ULY_METHOD_USP, P, 1, 0);
        uly_plan_method_volume(&a, &p, r, &v);
        uly_sp_plan_init(&p, ULY_METHOD_ZIGZAG, P, 1, 0);
        uly_plan_method_volume(&a, &p, r, &w);
        ck_assert_mem_eq(&v, &w, sizeof v);
    }
    /* usp 2 x 2: group all-to-alls over N/2 tokens, ring hops of the group's KV heads */
    uly_sp_plan_init(&p, ULY_METHOD_USP, P, 2, 0);
    ck_assert_int_eq(uly_plan_method_volume(&a, &p, 0, &v), ULY_OK);
    uly_attn_desc g = a;
    g.seq = N / 2;
    uly_plan_volume(&g, 2, 0, &w);
    for (int k = 0; k < ULY_A2A_COUNT; k++)
        ck_assert_uint_eq(v.sent[k], w.sent[k]);
    ck_assert_uint_eq(v.sent[ULY_RING_K], (uint64_t)(B * (N / 2) * 1 * d * e)); /* Hkv/U = 1 head */
}
END_TEST


/* The layout value: every (head, token) of every tensor on exactly one rank
 * after the all-to-all, blocks conserving the group's totals, chunks
 * tiling each member's heads, and the DP x SP grid's inverse. */
START_TEST(layout_partitions_and_blocks)
{
    const int64_t shapes[][5] = {{1, 13, 8, 2, 3}, {2, 17, 6, 3, 2}, {1, 9, 4, 4, 1}, {3, 31, 12, 1, 2},
                                 {1, 40, 9, 3, 2}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int m = 0; m < ULY_METHOD_COUNT; m++)
            for (int P = 1; P <= 8; P++)
                for (int U = 1; U <= P; U++) {
                    if (P % U || (m != ULY_METHOD_USP && U != (m == ULY_METHOD_ULYSSES ? P : 1)))
                        continue;
                    const int64_t *x = shapes[si];
                    uly_attn_desc a = desc(x[0], x[1], x[2], x[3], x[4]);
                    uly_sp_plan p;
                    if (uly_sp_plan_init(&p, m, P, m == ULY_METHOD_USP ? U : 0, ULY_PLACE_ULYSSES_INNER))
                        continue;
                    uly_layout L;
                    ck_assert_int_eq(uly_layout_init(&L, &a, &p), ULY_OK);
                    ck_assert_int_eq(L.rep, uly_plan_kv_replicated(&a, p.U));
                    char *seen = calloc((size_t)(a.seq * a.heads), 1);
                    ck_assert_ptr_nonnull(seen);
                    int64_t tokens = 0;
                    for (int r = 0; r < P; r++) {
                        uly_rank_part rp;
                        uly_layout_part(&L, r, &rp);
                        int64_t b[2], c[2], hb, hc;
                        int ns = uly_plan_tokens(&p, a.seq, r, b, c);
                        ck_assert_int_eq(rp.nseg, ns);
                        for (int i = 0; i < ns; i++) {
                            ck_assert_int_eq(rp.tok_begin[i], b[i]);
                            ck_assert_int_eq(rp.tok_count[i], c[i]);
                        }
                        tokens += rp.tokens;
                        uly_plan_heads(&p, a.heads, r, &hb, &hc);
                        ck_assert_int_eq(rp.head_begin, hb);
                        ck_assert_int_eq(rp.head_count, hc);
                        /* after the all-to-all: the group's chunk, its heads */
                        int64_t cb[2], cc[2];
                        int nc = uly_plan_chunk(&p, a.seq, rp.j, cb, cc);
                        ck_assert_int_eq(rp.group_tokens, cc[0] + (nc > 1 ? cc[1] : 0));
                        for (int i = 0; i < nc; i++)
                            for (int64_t t = cb[i]; t < cb[i] + cc[i]; t++)
                                for (int64_t h = rp.head_begin; h < rp.head_begin + rp.head_count; h++)
                                    seen[t * a.heads + h]++;
                        /* blocks: what a member receives is its heads over the chunk */
                        const int64_t Ng = rp.group_tokens;
                        uint64_t q = 0, k = 0, o = 0, dk = 0;
                        for (int s = 0; s < p.U; s++) {
                            q += uly_layout_a2a_block(&L, Ng, ULY_A2A_Q, s, rp.u);
                            k += uly_layout_a2a_block(&L, Ng, ULY_A2A_K, s, rp.u);
                            o += uly_layout_a2a_block(&L, Ng, ULY_A2A_O, rp.u, s);
                            dk += uly_layout_a2a_block(&L, Ng, ULY_A2A_DK, rp.u, s);
                            if (m == ULY_METHOD_ULYSSES) {
                                uint64_t e;
                                ck_assert_int_eq(uly_plan_a2a_block(&a, P, ULY_A2A_DV, s, rp.u, &e), ULY_OK);
                                ck_assert_uint_eq(e, uly_layout_a2a_block(&L, Ng, ULY_A2A_DV, s, rp.u));
                            }
                        }
                        const uint64_t row = (uint64_t)(a.batch * a.head_dim * Ng);
                        ck_assert_uint_eq(q, row * (uint64_t)rp.head_count);
                        ck_assert_uint_eq(k, row * (uint64_t)rp.kv_count);
                        ck_assert_uint_eq(o, row * (uint64_t)rp.head_count);
                        ck_assert_uint_eq(dk, row * (uint64_t)rp.kvg_count);
                        ck_assert_uint_eq(uly_layout_a2a_block(&L, Ng, ULY_A2A_Q, p.U, 0), 0);
                        /* overlap chunks tile the member's KV heads and query heads */
                        const int K = uly_layout_chunks(&L, 0);
                        ck_assert_int_le(K, ULY_OVERLAP_MAX_CHUNKS);
                        ck_assert(K == 1 || K <= L.kv_min);
                        int64_t qn = rp.head_begin, kn = rp.kv_begin;
                        for (int c2 = 0; K >= 2 && c2 < K; c2++) {
                            int64_t qb, qc, kb, kc;
                            uly_layout_chunk(&L, K, rp.u, c2, &qb, &qc, &kb, &kc);
                            ck_assert_int_eq(qb, qn);
                            ck_assert_int_eq(kb, kn);
                            ck_assert_int_gt(qc, 0);
                            ck_assert_int_gt(kc, 0);
                            qn += qc;
                            kn += kc;
                        }
                        if (K >= 2) {
                            ck_assert_int_eq(qn, rp.head_begin + rp.head_count);
                            ck_assert_int_eq(kn, rp.kv_begin + rp.kv_count);
                        }
                    }
                    ck_assert_int_eq(tokens, a.seq);
                    for (int64_t i = 0; i < a.seq * a.heads; i++)
                        ck_assert_int_eq(seen[i], 1);
                    free(seen);
                }
    uly_attn_desc a = desc(1, 8, 4, 2, 2);
    uly_sp_plan p;
    ck_assert_int_eq(uly_sp_plan_init(&p, ULY_METHOD_ULYSSES, 4, 0, 0), ULY_OK);
    p.R = 3; /* hand-filled and inconsistent */
    uly_layout L;
    ck_assert_int_eq(uly_layout_init(&L, &a, &p), ULY_EINVAL);
}
END_TEST

START_TEST(grid2_owner_inverts_part)
{
    for (int dp = 1; dp <= 5; dp++)
        for (int sp = 1; sp <= 4; sp++)
            for (int64_t batch = dp; batch <= dp + 7; batch++) {
                uly_grid2 g;
                ck_assert_int_eq(uly_grid2_init(&g, dp, sp, batch, 16), ULY_OK);
                int64_t next_row = 0;
                for (int w = 0; w < dp * sp; w++) {
                    int64_t rb, rn, tb, tn;
                    uly_grid2_part(&g, w, &rb, &rn, &tb, &tn);
                    if (w % sp == 0) {
                        ck_assert_int_eq(rb, next_row);
                        next_row = rb + rn;
                    }
                    for (int64_t b = rb; b < rb + rn; b++)
                        ck_assert_int_eq(uly_grid2_owner(&g, b, w % sp), w);
                }
                ck_assert_int_eq(next_row, batch);
            }
    uly_grid2 g;
    ck_assert_int_eq(uly_grid2_init(&g, 4, 1, 3, 8), ULY_EINVAL);
    ck_assert_int_eq(uly_grid2_init(&g, 0, 1, 3, 8), ULY_EINVAL);
}
END_TEST

START_TEST(method_one_vocabulary)
{
    for (int m = 0; m < ULY_METHOD_ALL; m++) {
        int back = -1;
        ck_assert_int_eq(uly_method_parse_any(uly_method_name(m), &back), ULY_OK);
        ck_assert_int_eq(back, m);
        ck_assert_int_eq(uly_method_parse_any(uly_method_sim_name(m), &back), ULY_OK);
        ck_assert_int_eq(back, m);
    }
    int m = -1;
    ck_assert_int_eq(uly_method_parse("megatron-sp", &m), ULY_EINVAL); /* not a library method */
    ck_assert_int_eq(uly_method_parse("ring-zigzag", &m), ULY_OK);
    ck_assert_int_eq(m, ULY_METHOD_ZIGZAG);
    ck_assert_str_eq(uly_method_sim_name(ULY_METHOD_ALLGATHER), "all-gather");
    ck_assert_str_eq(uly_method_name(ULY_METHOD_ALL), "?");
    /* the traits say what each plan does: a ring iff more than one step on
     * 4 ranks (usp of degree 2), all-to-alls iff a Ulysses degree above 1,
     * zigzag chunks iff the plan pairs chunks */
    for (int k = 0; k < ULY_METHOD_COUNT; k++) {
        uly_sp_plan p;
        ck_assert_int_eq(uly_sp_plan_init(&p, k, 4, k == ULY_METHOD_USP ? 2 : 0, 0), ULY_OK);
        const int t = uly_method_traits(k);
        ck_assert_int_eq(!!(t & ULY_TRAIT_RING), uly_plan_steps(&p) > 1);
        ck_assert_int_eq(!!(t & ULY_TRAIT_A2A), p.U > 1);
        ck_assert_int_eq(!!(t & ULY_TRAIT_ZIGZAG), p.zigzag);
        ck_assert_int_eq(!!(t & ULY_TRAIT_GATHER), k == ULY_METHOD_ALLGATHER);
        ck_assert_int_eq(t & ULY_TRAIT_TP, 0);
    }
    ck_assert_int_eq(uly_method_traits(ULY_METHOD_MEGATRON_SP), ULY_TRAIT_TP);
    ck_assert_int_eq(uly_method_traits(ULY_METHOD_ALL), 0);
}
END_TEST


/* The calls of one layer, block by block, add up to the expected volume of
 * every rank, call kind by call kind, for every method (documents and
 * windows included: the ring skips hops nobody needs). */
START_TEST(layout_calls_sum_to_volume)
{
    const int64_t shapes[][5] = {{1, 13, 8, 2, 3}, {2, 17, 6, 3, 2}, {1, 40, 9, 3, 2}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int causal = 0; causal <= 1; causal++)
            for (int m = 0; m < ULY_METHOD_COUNT; m++)
                for (int P = 1; P <= 6; P++)
                    for (int U = 1; U <= P; U++) {
                        const int64_t *x = shapes[si];
                        uly_attn_desc a = desc(x[0], x[1], x[2], x[3], x[4]);
                        a.causal = causal;
                        a.window = causal && si == 2 ? 5 : 0;
                        uly_sp_plan p;
                        if (P % U || uly_sp_plan_init(&p, m, P, m == ULY_METHOD_USP ? U : 0, ULY_PLACE_RING_INNER))
                            continue;
                        if (m != ULY_METHOD_USP && U > 1)
                            continue;
                        uly_layout L;
                        ck_assert_int_eq(uly_layout_init(&L, &a, &p), ULY_OK);
                        uly_call calls[128];
                        const int nc = uly_layout_calls(&L, calls, 128);
                        ck_assert_int_le(nc, 128);
                        ck_assert_int_eq(uly_layout_calls(&L, NULL, 0), nc);
                        for (int r = 0; r < P; r++) {
                            uly_volume v, got;
                            ck_assert_int_eq(uly_plan_method_volume(&a, &p, r, &v), ULY_OK);
                            memset(&got, 0, sizeof got);
                            for (int c = 0; c < nc; c++) {
                                ck_assert_int_eq(calls[c].backward, uly_vol_backward(calls[c].kind));
                                for (int o = 0; o < P; o++) {
                                    got.sent[calls[c].kind] += 4 * uly_layout_call_block(&L, &calls[c], r, o);
                                    got.recv[calls[c].kind] += 4 * uly_layout_call_block(&L, &calls[c], o, r);
                                }
                            }
                            for (int w = 0; w < ULY_VOL_COUNT; w++) {
                                ck_assert_msg(got.sent[w] == v.sent[w] && got.recv[w] == v.recv[w],
                                              "%s P=%d U=%d rank %d %s: calls %llu/%llu, volume %llu/%llu",
                                              uly_method_name(m), P, U, r, uly_vol_name(w),
                                              (unsigned long long)got.sent[w], (unsigned long long)got.recv[w],
                                              (unsigned long long)v.sent[w], (unsigned long long)v.recv[w]);
                            }
                        }
                    }
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
    TCase *tm = tcase_create("methods");
    tcase_set_timeout(tm, 60);
    tcase_add_test(tm, documents_geometry);
    tcase_add_test(tm, documents_rejected);
    tcase_add_test(tm, method_names_and_init);
    tcase_add_test(tm, method_partitions);
    tcase_add_test(tm, method_step_pairs);
    tcase_add_test(tm, method_volume_conserved);
    tcase_add_test(tm, method_volume_formulas);
    tcase_add_test(tm, layout_partitions_and_blocks);
    tcase_add_test(tm, grid2_owner_inverts_part);
    tcase_add_test(tm, layout_calls_sum_to_volume);
    tcase_add_test(tm, method_one_vocabulary);
    suite_add_tcase(s, tm);
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
