/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_attnjob.c -- Check suite of the attention job (usim_attn_simulate, the
 * prediction `make validate-local` compares with `ulysses attn`):
 *   - phase times derived by hand on a platform with round numbers, on one
 *     node and across two nodes whose ranks share one link;
 *   - the bytes of every rank equal the plan layer's uly_plan_volume exactly,
 *     for even, uneven and GQA shapes;
 *   - gpu.attention_bwd_efficiency: loaded, defaulted, bounded;
 *   - the per-call all-to-all cost (a2a_call_us): added once per all-to-all,
 *     the intra-node one inside a node, the inter-node one across nodes.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ulysses_plan.h"
#include "usim.h"

#define DATA USIM_SRC_PRESETS "/../tests/data/"

static usim_platform load(const char *file)
{
    usim_platform p;
    ck_assert_msg(usim_platform_load(file, &p) == USIM_OK, "%s", usim_last_error());
    return p;
}

static usim_attn_job job(int gpus, int64_t seq, int64_t heads, int64_t kv, int64_t d)
{
    usim_attn_job j;
    memset(&j, 0, sizeof j);
    j.batch = 1; j.seq = seq; j.heads = heads; j.kv_heads = kv; j.head_dim = d;
    j.dtype = USIM_FP32; j.gpus = gpus; j.a2a = USIM_A2A_DIRECT;
    return j;
}

#define NEAR(x, want) ck_assert_msg(fabs((double)(x) - (double)(want)) <= 1e-12 + 1e-9 * fabs((double)(want)), "%s = %.12g, want %.12g", #x, (double)(x), (double)(want))

START_TEST(test_one_node)
{
    /* 2 ranks of one node, N = 1000, H = 2, d = 50, fp32: every all-to-all
     * moves 500 tokens x 1 head x 50 x 4 B = 100 000 B each way, one flow per
     * rank on its own 1 GB/s link: 1 us + 100 us.  Attention of rank 0:
     * 4 x 50 x 1 head x 10^6 pairs = 2e8 FLOP at 0.5 TFLOP/s = 400 us; the
     * backward 2.5 x 2e8 at 0.25 TFLOP/s = 2000 us. */
    usim_platform p = load(DATA "cpu-2x2.json");
    usim_attn_job j = job(2, 1000, 2, 2, 50);
    usim_attn_result r;
    ck_assert_int_eq(usim_attn_simulate(&p, &j, 0, &r), USIM_OK);
    for (int w = 0; w < ULY_A2A_COUNT; w++) {
        NEAR(r.a2a_s[w], 101e-6);
        ck_assert_uint_eq(r.sent[w], 100000);
        ck_assert_uint_eq(r.recv[w], 100000);
    }
    NEAR(r.phase_s[USIM_PH_FWD_A2A_IN], 303e-6);
    NEAR(r.phase_s[USIM_PH_FWD_ATTN], 400e-6);
    NEAR(r.phase_s[USIM_PH_FWD_A2A_OUT], 101e-6);
    NEAR(r.phase_s[USIM_PH_BWD_A2A_IN], 101e-6);
    NEAR(r.phase_s[USIM_PH_BWD_ATTN], 2000e-6);
    NEAR(r.phase_s[USIM_PH_BWD_A2A_OUT], 303e-6);
    NEAR(r.fwd_s, 804e-6);
    NEAR(r.bwd_s, 2404e-6);
    NEAR(r.iter_s, 3208e-6);
    NEAR(r.sent_class[USIM_CLASS_NVLINK], 800000);
    NEAR(r.sent_class[USIM_CLASS_NIC], 0);
    /* causal with masked-block skipping: 1000 x 1001 / 2 visible pairs */
    j.causal = 1;
    ck_assert_int_eq(usim_attn_simulate(&p, &j, 0, &r), USIM_OK);
    NEAR(r.phase_s[USIM_PH_FWD_ATTN], 4.0 * 50 * 500500 / 0.5e12);
}
END_TEST

START_TEST(test_two_nodes_shared_link)
{
    /* 2 nodes x 2 ranks, N = 1000, H = 4, d = 50: 250 tokens x 1 head x 50 x
     * 4 B = 50 000 B per pair.  Node 0's four inter-node flows (ranks 0, 1 to
     * ranks 2, 3) share the node's uplink: NIC 1 GB/s per rank behind a spine
     * of 2 x 1 GB/s / oversubscription 2 = 1 GB/s, so 0.25 GB/s each:
     * 2 us + 200 us; the intra-node flow (1 us + 50 us) ends first. */
    usim_platform p = load(DATA "cpu-2x2.json");
    usim_attn_job j = job(4, 1000, 4, 4, 50);
    usim_attn_result r;
    ck_assert_int_eq(usim_attn_simulate(&p, &j, 0, &r), USIM_OK);
    for (int w = 0; w < ULY_A2A_COUNT; w++) {
        NEAR(r.a2a_s[w], 202e-6);
        ck_assert_uint_eq(r.sent[w], 150000);
    }
    NEAR(r.phase_s[USIM_PH_FWD_A2A_IN], 606e-6);
    NEAR(r.phase_s[USIM_PH_FWD_ATTN], 400e-6);
    NEAR(r.sent_class[USIM_CLASS_NVLINK], 8 * 50000.0);
    NEAR(r.sent_class[USIM_CLASS_NIC], 8 * 100000.0);
    /* without the shared uplink (oversubscription 1) each flow gets 0.5 GB/s
     * (two flows per NIC): 2 us + 100 us */
    p.oversub = 1;
    ck_assert_int_eq(usim_attn_simulate(&p, &j, 0, &r), USIM_OK);
    NEAR(r.a2a_s[ULY_A2A_Q], 102e-6);
    /* one NIC per node (what ulysses calibrate writes for the mini-cluster):
     * the node's four inter-node flows share it, 0.25 GB/s each, as with the
     * oversubscribed spine */
    p.nics_per_node = 1;
    ck_assert_int_eq(usim_attn_simulate(&p, &j, 0, &r), USIM_OK);
    NEAR(r.a2a_s[ULY_A2A_Q], 202e-6);
}
END_TEST

START_TEST(test_bytes_equal_plan)
{
    /* every rank, every all-to-all: the simulator's bytes are the plan's */
    static const int64_t shapes[][5] = {
        /* P, N, H, Hkv, d */
        {2, 1024, 8, 8, 64}, {4, 4096, 8, 8, 64}, {3, 1003, 6, 6, 16}, {4, 1000, 6, 2, 8},
        {4, 999, 8, 2, 4}, {3, 64, 7, 7, 2}};
    usim_platform p = load(DATA "cpu-2x2.json");
    p.max_nodes = 0;
    p.gpus_per_node = 4;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        usim_attn_job j = job((int)shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], shapes[s][4]);
        j.batch = 2;
        uly_attn_desc a;
        memset(&a, 0, sizeof a);
        a.batch = j.batch; a.seq = j.seq; a.heads = j.heads; a.kv_heads = j.kv_heads; a.head_dim = j.head_dim;
        a.dtype = ULY_F32;
        for (int g = 0; g < j.gpus; g++) {
            usim_attn_result r;
            uly_volume v;
            ck_assert_int_eq(usim_attn_simulate(&p, &j, g, &r), USIM_OK);
            ck_assert_int_eq(uly_plan_volume(&a, j.gpus, g, &v), 0);
            for (int w = 0; w < ULY_A2A_COUNT; w++) {
                ck_assert_msg(r.sent[w] == v.sent[w] && r.recv[w] == v.recv[w],
                              "shape %zu rank %d a2a %d: sim %llu/%llu, plan %llu/%llu", s, g, w,
                              (unsigned long long)r.sent[w], (unsigned long long)r.recv[w],
                              (unsigned long long)v.sent[w], (unsigned long long)v.recv[w]);
            }
        }
    }
}
END_TEST

START_TEST(test_bwd_efficiency_key)
{
    usim_platform p = load(DATA "cpu-2x2.json");
    NEAR(p.attn_eff, 0.5);
    NEAR(p.attn_bwd_eff, 0.25);
    p = load(DATA "tiny-platform.json");   /* no key: the forward's */
    NEAR(p.attn_bwd_eff, p.attn_eff);
    ck_assert_int_eq(usim_platform_load(DATA "bad-bwd-eff.json", &p), USIM_EFORMAT);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "gpu.attention_bwd_efficiency"));
}
END_TEST

START_TEST(test_a2a_call_cost)
{
    /* the platforms of test_one_node and test_two_nodes_shared_link with
     * intra_node.a2a_call_us 30 and inter_node.a2a_call_us 500: each
     * all-to-all takes its transfers' time plus the call cost, exactly */
    usim_platform p = load(DATA "cpu-2x2-call.json");
    usim_attn_result r;
    usim_attn_job j = job(2, 1000, 2, 2, 50);
    ck_assert_int_eq(usim_attn_simulate(&p, &j, 0, &r), USIM_OK);
    for (int w = 0; w < ULY_A2A_COUNT; w++) {
        NEAR(r.a2a_s[w], 131e-6);
        ck_assert_uint_eq(r.sent[w], 100000);   /* bytes do not change */
    }
    NEAR(r.phase_s[USIM_PH_FWD_A2A_IN], 393e-6);
    NEAR(r.phase_s[USIM_PH_FWD_ATTN], 400e-6);
    NEAR(r.iter_s, 131e-6 * 8 + 2400e-6);
    j = job(4, 1000, 4, 4, 50);
    ck_assert_int_eq(usim_attn_simulate(&p, &j, 0, &r), USIM_OK);
    for (int w = 0; w < ULY_A2A_COUNT; w++)
        NEAR(r.a2a_s[w], 702e-6);
    /* default: no call cost (the GPU presets and older platform files) */
    p = load(DATA "cpu-2x2.json");
    ck_assert_int_eq(p.a2a_call[USIM_CLASS_NVLINK], 0);
    ck_assert_int_eq(p.a2a_call[USIM_CLASS_NIC], 0);
    ck_assert_int_eq(usim_platform_load(DATA "bad-a2a-call.json", &p), USIM_EFORMAT);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "a2a_call_us"));
}
END_TEST

START_TEST(test_bad_jobs)
{
    usim_platform p = load(DATA "cpu-2x2.json");
    usim_attn_result r;
    usim_attn_job j = job(2, 1000, 6, 4, 8);   /* 6 heads, 4 KV heads */
    ck_assert_int_eq(usim_attn_simulate(&p, &j, 0, &r), USIM_EINVAL);
    j = job(8, 1000, 8, 8, 8);                 /* 4 nodes > max_nodes 2 */
    ck_assert_int_eq(usim_attn_simulate(&p, &j, 0, &r), USIM_EINVAL);
    j = job(2, 1000, 8, 8, 8);
    ck_assert_int_eq(usim_attn_simulate(&p, &j, 2, &r), USIM_EINVAL);
    j.seq = 0;
    ck_assert_int_eq(usim_attn_simulate(&p, &j, 0, &r), USIM_EINVAL);
}
END_TEST

static Suite *make_attnjob_suite(void)
{
    Suite *s = suite_create("attnjob");
    TCase *tc = tcase_create("attnjob");
    tcase_add_test(tc, test_one_node);
    tcase_add_test(tc, test_two_nodes_shared_link);
    tcase_add_test(tc, test_bytes_equal_plan);
    tcase_add_test(tc, test_bwd_efficiency_key);
    tcase_add_test(tc, test_a2a_call_cost);
    tcase_add_test(tc, test_bad_jobs);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(make_attnjob_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
