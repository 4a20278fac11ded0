/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_pipeline.c -- pipeline schedules (sim/pipeline.c) on hand-derived
 * cases: Megatron-Core's 1F1B and interleaved 1F1B orders run on given
 * forward / backward / transfer times (iteration time, each rank's end, the
 * chunk forwards held in flight), the textbook bubble (p - 1) / (V m)
 * (Narayanan et al., arXiv 2104.04473, Sec. 2.2.1-2.2.2), the stage
 * partition and its errors, and one whole iteration of a 2-stage pipeline
 * on the round-number platform of test_golden.c, derived by hand.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"
#include "usim.h"

static long long ps_of(double s)
{
    return llround(s * 1e12);
}

/* Run pp x V chunks of forward f and backward b (time units), transfer t. */
static usim_time run(int pp, int V, int m, usim_time f, usim_time b, usim_time t, usim_time *end, int *held)
{
    usim_time F[64], B[64], P[64];
    for (int i = 0; i < pp * V; i++) {
        F[i] = f;
        B[i] = b;
        P[i] = t;
    }
    usim_pp_in in = {.pp = pp, .V = V, .m = m, .F = F, .B = B, .pf = P, .pb = P};
    usim_pp_out out = {.rank_end = end, .inflight = held};
    ck_assert_int_eq(usim_pp_run(&in, &out), USIM_OK);
    return out.makespan;
}

/*
 * 1F1B, 4 stages, 8 micro-batches, forward 1 and backward 2, no transfer
 * time.  The last rank (no warm-up) starts F0 at 3 (F0 went through ranks
 * 0-2, one unit each) and then alternates F(k) B(k) without waiting (each F(k)
 * left rank 2 in time: rank 2 runs F(k) right after B(k-2)): it ends at
 * 3 + 8 x 3 = 27.  B7 then walks back through ranks 2, 1, 0 at 2 each: rank r
 * ends at 27 + 2 (3 - r); rank 0 at 33 = (m + p - 1)(f + b).  Work per rank is
 * m (f + b) = 24, so the bubble is 9 / 24 = 3/8 = (p - 1) / m.  In flight:
 * rank r runs pp - r - 1 warm-up forwards and one more before its first
 * backward: rank 0 holds 4 micro-batches, rank 3 one.
 */
START_TEST(test_1f1b_textbook)
{
    usim_time end[4];
    int held[4];
    ck_assert_int_eq(run(4, 1, 8, 1, 2, 0, end, held), 33);
    for (int r = 0; r < 4; r++) {
        ck_assert_int_eq(end[r], 27 + 2 * (3 - r));
        ck_assert_int_eq(held[r], 4 - r);
        ck_assert_int_eq(usim_pp_inflight_chunks(4, 1, 8, r), 4 - r);
    }
    ck_assert(fabs((33.0 - 24.0) / 24.0 - 3.0 / 8.0) < 1e-15);
}
END_TEST

/*
 * Interleaved, 4 ranks, V = 2 chunks each, 8 micro-batches, a chunk's forward
 * 1 and backward 2 (the stage's 2 and 4 split in two), no transfer time.
 * Narayanan et al. (arXiv 2104.04473, Sec. 2.2.2): the bubble is
 * (p - 1)(t_f + t_b) / V = 3 x 6 / 2 = 9 for stage times t_f = 2, t_b = 4,
 * against m (t_f + t_b) = 48 of work: 57, fraction 9 / 48 = 3/16 = (p-1)/(V m).
 * In flight (Megatron-Core's warm-up 2 (p - r - 1) + (V - 1) p, plus the
 * first steady forward): rank 0 2 x 3 + 4 + 1 = 11 chunks, rank 3 5.
 */
START_TEST(test_interleaved_textbook)
{
    usim_time end[4];
    int held[4];
    ck_assert_int_eq(run(4, 2, 8, 1, 2, 0, end, held), 57);
    ck_assert_int_eq(end[0], 57);
    ck_assert_int_eq(held[0], 11);
    ck_assert_int_eq(held[3], 5);
    for (int r = 0; r < 4; r++)
        ck_assert_int_eq(usim_pp_inflight_chunks(4, 2, 8, r), held[r]);
    /* V = 4 (chunk forward 1, backward 2: stage times 4 and 8): bubble
     * 3 x 12 / 4 = 9 against 8 x 12 = 96 */
    ck_assert_int_eq(run(4, 4, 8, 1, 2, 0, end, held), 105);
}
END_TEST

/*
 * 1F1B, 2 stages, 2 micro-batches, forward 1, backward 2, transfer 1 each
 * way.  Rank 0: F0 [0,1], F1 [1,2]; rank 1: F0 arrives 1 + 1 = 2: [2,3], B0
 * [3,5], F1 (arrived at 3) [5,6], B1 [6,8].  Rank 0: B0's gradient arrives 5 +
 * 1 = 6: [6,8]; B1's 8 + 1 = 9: [9,11].  Rank ends 11 and 8.
 */
START_TEST(test_1f1b_transfer)
{
    usim_time end[2];
    int held[2];
    ck_assert_int_eq(run(2, 1, 2, 1, 2, 1, end, held), 11);
    ck_assert_int_eq(end[0], 11);
    ck_assert_int_eq(end[1], 8);
    ck_assert_int_eq(held[0], 2);
    ck_assert_int_eq(held[1], 1);
}
END_TEST

/*
 * Interleaved, 2 ranks, V = 2, 2 micro-batches, chunk forward 1, backward 1,
 * transfer 1.  Virtual stages: vs0 = rank 0 chunk 0, vs1 = rank 1 chunk 0, vs2
 * = rank 0 chunk 1, vs3 = rank 1 chunk 1.  Warm-up: rank 0 min(2 + 2, 4) = 4
 * (every forward first), rank 1 2.  Order (get_schedule_table, groups of 2):
 * forwards (mb0,c0) (mb1,c0) (mb0,c1) (mb1,c1), backwards with chunks reversed.
 *   rank 0: F mb0 vs0 [0,1], F mb1 vs0 [1,2]
 *   rank 1: F mb0 vs1 (1+1) [2,3], F mb1 vs1 (2+1) [3,4]
 *   rank 0: F mb0 vs2 (3+1) [4,5], F mb1 vs2 (4+1) [5,6]
 *   rank 1: F mb0 vs3 (5+1) [6,7], B mb0 vs3 [7,8], F mb1 vs3 (6+1, free 8)
 *           [8,9], B mb1 vs3 [9,10]
 *   rank 0: B mb0 vs2 (8+1) [9,10], B mb1 vs2 (10+1) [11,12]
 *   rank 1: B mb0 vs1 (10+1) [11,12], B mb1 vs1 (12+1) [13,14]
 *   rank 0: B mb0 vs0 (12+1) [13,14], B mb1 vs0 (14+1) [15,16]
 * Without transfer time: m V (f + b) + (p - 1)(f + b) = 8 + 2 = 10.
 */
START_TEST(test_interleaved_transfer)
{
    usim_time end[2];
    int held[2];
    ck_assert_int_eq(run(2, 2, 2, 1, 1, 1, end, held), 16);
    ck_assert_int_eq(end[0], 16);
    ck_assert_int_eq(end[1], 14);
    ck_assert_int_eq(held[0], 4);
    ck_assert_int_eq(held[1], 3);
    ck_assert_int_eq(run(2, 2, 2, 1, 1, 0, end, held), 10);
}
END_TEST

static usim_model small_model(int64_t layers, int64_t gbatch)
{
    usim_model m;
    memset(&m, 0, sizeof m);
    strcpy(m.name, "golden");
    m.layers = layers;
    m.hidden = 64;
    m.heads = m.kv_heads = 2;
    m.ffn = 320;
    m.vocab = 128;
    m.seq = 16;
    m.micro_batch = 1;
    m.global_batch = gbatch;
    m.dtype = USIM_BF16;
    m.causal = 1;
    m.tied_embeddings = 1;
    return m;
}

/* Megatron-Core's partition: first and last as given, the rest even. */
START_TEST(test_partition)
{
    usim_model m = small_model(30, 8);
    usim_job j;
    memset(&j, 0, sizeof j);
    j.pp = 4;
    j.dp = 1;
    j.pp_first_layers = 6;
    j.pp_last_layers = 8;
    ck_assert_int_eq(usim_pp_check(&m, &j), USIM_OK);
    ck_assert_int_eq(usim_pp_rank_layers(&m, &j, 0), 6);
    ck_assert_int_eq(usim_pp_rank_layers(&m, &j, 1), 8);
    ck_assert_int_eq(usim_pp_rank_layers(&m, &j, 2), 8);
    ck_assert_int_eq(usim_pp_rank_layers(&m, &j, 3), 8);
    j.vpp = 2;   /* 6, 8, 8, 8 all even; 8 micro-batches, a multiple of 4 */
    ck_assert_int_eq(usim_pp_check(&m, &j), USIM_OK);
    j.vpp = 3;   /* 8 layers are not 3 chunks */
    ck_assert_int_eq(usim_pp_check(&m, &j), USIM_EINVAL);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "not a positive multiple of --vpp 3"));
    j.vpp = 2;
    m.global_batch = 6;   /* 6 micro-batches: not a multiple of pp 4 */
    ck_assert_int_eq(usim_pp_check(&m, &j), USIM_EINVAL);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "multiple of --pp 4"));
    m.global_batch = 8;
    j.pp_last_layers = 9;   /* 15 left for 2 stages */
    ck_assert_int_eq(usim_pp_check(&m, &j), USIM_EINVAL);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "do not divide evenly over the 2 other"));
    j.pp_first_layers = j.pp_last_layers = 0;   /* even: 30 layers are not 4 stages */
    ck_assert_int_eq(usim_pp_check(&m, &j), USIM_EINVAL);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "--pp 4 does not divide the 30 layers"));
    m.layers = 24;   /* 6 per stage, not 4 chunks */
    j.vpp = 4;
    ck_assert_int_eq(usim_pp_check(&m, &j), USIM_EINVAL);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "--pp 4 x --vpp 4 does not divide the 24 layers"));
    j.pp = 1;
    ck_assert_int_eq(usim_pp_check(&m, &j), USIM_EINVAL);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "--vpp needs pipeline parallelism"));
}
END_TEST

/* test_golden.c's round-number platform: 1 TFLOP/s, 1 TB/s HBM, NVLink 1 GB/s, latency 0. */
static usim_platform round_platform(void)
{
    usim_platform p;
    memset(&p, 0, sizeof p);
    strcpy(p.name, "round");
    p.gpus_per_node = 2;
    for (int t = 0; t < USIM_NDTYPE; t++)
        p.peak_flops[t] = 1e12;
    p.gemm_eff = p.attn_eff = 1;
    p.attn_causal_skip = 1;
    p.hbm_bytes = 1e12;
    p.hbm_Bps = 1e12;
    p.nvl_peak_Bps = 1e9;
    p.nvl_eff = 1;
    p.nic_peak_Bps = 1e8;
    p.nic_eff = 1;
    p.oversub = 1;
    p.nvls_eff = 1;
    return p;
}

/*
 * One iteration, 2 GPUs of one node as 2 pipeline stages (sp 1, dp 1),
 * ZeRO-0, no recompute, 2 micro-batches; the model and platform of
 * test_golden.c's two-GPU iteration (1 TFLOP/s, 1 TB/s, NVLink 1 GB/s,
 * latency 0), with 2 layers and all 16 tokens on each GPU:
 *   QKV        2*16*64*192 = 393216 + 0.3 x 40960 elementwise B      ->  405504
 *   attention  4 x 32 x 2 heads x 136 pairs                          ->   34816
 *   out + MLP  2*16*64*64 + 2 * 2*16*64*320 = 1441792 + 28672        -> 1470464
 *   layer forward 1910784; backward 2 x 1441792 + 57344 + 2.5 x 34816
 *   + 2 x 393216 + 24576 = 3838976
 *   LM head    2*16*64*128 + 16*128*6 = 274432; backward 536576
 * Stage 0 (layer 0, the embedding): f0 = 1910784, b0 = 3838976.
 * Stage 1 (layer 1, LM head + loss): f1 = 2185216, b1 = 4375552.
 * Transfer: 16 tokens x 64 x 2 B = 2048 B over NVLink: t = 2048000.
 * 1F1B as in test_1f1b_transfer: rank 0 ends at f0 + 2t + 2 f1 + 2 b1 + b0
 * = 22967296, rank 1 at f0 + t + 2 f1 + 2 b1 = 17080320.
 * Tail: no gradient collective (dp 1); the optimizer, 36 B x (57600 layer +
 * 8192 embedding parameters) = 2368512, on each rank.
 * Iteration: 22967296 + 2368512 = 25335808 (rank 0); compute 2 (f0 + b0) +
 * 2368512 = 13868032; bubble 11467776; bubble fraction (22967296 - 11499520)
 * / 11499520; rank 0 holds 2 micro-batches; it sends 2 activations (2 x 2048 B).
 */
START_TEST(test_iteration_two_stages)
{
    usim_platform p = round_platform();
    usim_model m = small_model(2, 2);
    usim_job j;
    memset(&j, 0, sizeof j);
    j.method = ULY_METHOD_ULYSSES;
    j.gpus = 2;
    j.pp = 2;
    j.zero = 0;
    j.recompute = USIM_RC_NONE;
    usim_sim *s = usim_sim_new(&p, 2);
    usim_result r;
    ck_assert_int_eq(usim_simulate(s, &m, &j, NULL, &r), USIM_OK);
    ck_assert_int_eq(r.micro_steps, 2);
    ck_assert_int_eq(r.pp_critical, 0);
    ck_assert_int_eq(ps_of(r.iter_s), 25335808);
    ck_assert_int_eq(ps_of(r.compute_s), 13868032);
    ck_assert_int_eq(ps_of(r.bubble_s), 11467776);
    ck_assert_int_eq(ps_of(r.pp_p2p_s), 2048000);
    ck_assert(fabs(r.bubble_frac - 11467776.0 / 11499520.0) < 1e-12);
    ck_assert_int_eq(r.pp_inflight, 2);
    ck_assert(r.sent_bytes[USIM_CLASS_NVLINK] == 4096);
    for (int k = 0; k < USIM_NKIND; k++)
        ck_assert_int_eq(ps_of(r.exposed_s[k]), 0);
    usim_sim_free(s);
}
END_TEST

/*
 * The same 2 GPUs, model and platform with 4 layers, --vpp 2 (chunks of one
 * layer: vs0 and vs2 on rank 0, vs1 and vs3 on rank 1), 2 micro-batches.
 * Chunk times: f = 1910784, b = 3838976 (one layer); the last chunk fh =
 * 2185216, bh = 4375552 (with the LM head); t = 2048000.  The order of
 * test_interleaved_transfer:
 *   rank 0: F(0,vs0) [0,f], F(1,vs0) [f,2f]
 *   rank 1: F(0,vs1) [f+t, 2f+t], F(1,vs1) [2f+t, 3f+t]
 *   rank 0: F(0,vs2) [2f+2t, 3f+2t], F(1,vs2) [3f+2t, 4f+2t]
 *   rank 1: F(0,vs3) from 3f+3t, B(0,vs3) ends 3f+3t+fh+bh, F(1,vs3) (arrived
 *           at 4f+3t, earlier) and B(1,vs3) end 3f+3t+2fh+2bh
 *   rank 0: B(0,vs2) ends 3f+4t+fh+bh+b; B(1,vs2) waits for 3f+4t+2fh+2bh
 *           (fh+bh > b), ends 3f+4t+2fh+2bh+b
 *   rank 1: B(0,vs1) waits for 3f+5t+fh+bh+b (2t+b > fh+bh), ends +b;
 *           B(1,vs1) waits for 3f+5t+2fh+2bh+b, ends 3f+5t+2fh+2bh+2b = 36771840
 *   rank 0: B(0,vs0) ends 3f+6t+fh+bh+3b, B(1,vs0) 3f+6t+2fh+2bh+3b = 42658816
 * Tail: the optimizer on 2 x 57600 + 8192 parameters, 36 B each: 4442112.
 * Iteration 47100928; compute 2 x 2 (f + b) + 4442112 = 27441152; bubble
 * 19659776; rank 0 holds all 4 chunk forwards before its first backward.
 */
START_TEST(test_iteration_interleaved)
{
    usim_platform p = round_platform();
    usim_model m = small_model(4, 2);
    usim_job j;
    memset(&j, 0, sizeof j);
    j.method = ULY_METHOD_ULYSSES;
    j.gpus = 2;
    j.pp = 2;
    j.vpp = 2;
    j.zero = 0;
    j.recompute = USIM_RC_NONE;
    usim_sim *s = usim_sim_new(&p, 2);
    usim_result r;
    ck_assert_int_eq(usim_simulate(s, &m, &j, NULL, &r), USIM_OK);
    ck_assert_int_eq(r.pp_critical, 0);
    ck_assert_int_eq(ps_of(r.iter_s), 47100928);
    ck_assert_int_eq(ps_of(r.compute_s), 27441152);
    ck_assert_int_eq(ps_of(r.bubble_s), 19659776);
    ck_assert_int_eq(r.pp_inflight, 4);
    ck_assert_int_eq(r.job.vpp, 2);
    /* rank 0 sends: vs0 forward, vs2 forward and backward, 2 micro-batches */
    ck_assert(r.sent_bytes[USIM_CLASS_NVLINK] == 3 * 2 * 2048);
    usim_sim_free(s);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("pipeline");
    TCase *tc = tcase_create("pipeline");
    tcase_add_test(tc, test_1f1b_textbook);
    tcase_add_test(tc, test_interleaved_textbook);
    tcase_add_test(tc, test_1f1b_transfer);
    tcase_add_test(tc, test_interleaved_transfer);
    tcase_add_test(tc, test_partition);
    tcase_add_test(tc, test_iteration_two_stages);
    tcase_add_test(tc, test_iteration_interleaved);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(make_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
