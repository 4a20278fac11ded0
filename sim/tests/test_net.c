/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_net.c -- Check suite of the network: golden cases derivable by hand
 * (one transfer, two transfers sharing a link, ring all-gather on one switch,
 * all-to-all crossing a NIC, an oversubscribed spine), conservation,
 * determinism, ring extrapolation.
 *
 * Platform: 1 GB/s NVLink per direction, 0.1 GB/s NIC, 1 us NVLink and 5 us
 * NIC latency, so bytes/bandwidth are whole picoseconds.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "usim.h"

#define US 1000000LL   /* ps */

#define NS 1000LL   /* ps */

static usim_platform plat(int gpn, double oversub)
{
    usim_platform p;
    memset(&p, 0, sizeof p);
    strcpy(p.name, "golden");
    p.gpus_per_node = gpn;
    p.nvl_peak_Bps = 1e9;
    p.nvl_eff = 1;
    p.nic_peak_Bps = 1e8;
    p.nic_eff = 1;
    p.nvl_lat = 1 * US;
    p.nic_lat = 5 * US;
    p.oversub = oversub;
    return p;
}

static usim_xfer xf(int s, int d, uint64_t bytes)
{
    usim_xfer x = {.src = s, .dst = d, .bytes = bytes, .dep = {-1, -1}, .step = 0};
    return x;
}

START_TEST(test_one_transfer_nvlink)
{
    usim_platform p = plat(8, 1);
    usim_net *n = usim_net_new(&p, 8);
    usim_xfer x = xf(0, 1, 1000000);
    usim_time fin, mk;
    ck_assert_int_eq(usim_net_run(n, &x, 1, &fin, &mk), USIM_OK);
    /* latency + bytes / bandwidth = 1 us + 1e6 B / 1e9 B/s = 1 us + 1 ms */
    ck_assert_int_eq(mk, 1 * US + 1000000000LL);
    ck_assert_int_eq(fin, mk);
    usim_net_free(n);
}
END_TEST

START_TEST(test_one_transfer_nic)
{
    usim_platform p = plat(2, 1);
    usim_net *n = usim_net_new(&p, 4);
    usim_xfer x = xf(1, 2, 123456);
    usim_time mk;
    ck_assert_int_eq(usim_net_run(n, &x, 1, NULL, &mk), USIM_OK);
    /* 123456 B / 1e8 B/s = 1.23456 ms */
    ck_assert_int_eq(mk, 5 * US + 1234560000LL);
    usim_net_free(n);
}
END_TEST

START_TEST(test_two_share_one_link)
{
    usim_platform p = plat(8, 1);
    usim_net *n = usim_net_new(&p, 8);
    /* same uplink (GPU 0), different downlinks: each gets half while both run */
    usim_xfer x[2] = {xf(0, 1, 1000000), xf(0, 2, 3000000)};
    usim_time fin[2], mk;
    ck_assert_int_eq(usim_net_run(n, x, 2, fin, &mk), USIM_OK);
    /* both at 0.5 GB/s until the first (1 MB) ends at 2 ms; the second has 2 MB
     * left at full rate: 2 ms more */
    ck_assert_int_eq(fin[0], 1 * US + 2000000000LL);
    ck_assert_int_eq(fin[1], 1 * US + 4000000000LL);
    /* disjoint links: no sharing */
    usim_xfer y[2] = {xf(0, 1, 1000000), xf(2, 3, 1000000)};
    ck_assert_int_eq(usim_net_run(n, y, 2, fin, &mk), USIM_OK);
    ck_assert_int_eq(fin[0], 1 * US + 1000000000LL);
    ck_assert_int_eq(fin[1], 1 * US + 1000000000LL);
    usim_net_free(n);
}
END_TEST

START_TEST(test_max_min_fairness)
{
    /* flows a: 0->1, b: 0->2, c: 3->2.  Uplink 0 carries a, b; downlink 2
     * carries b, c.  Max-min: every flow 0.5 GB/s (both links bottleneck). */
    usim_platform p = plat(8, 1);
    usim_net *n = usim_net_new(&p, 8);
    usim_xfer x[3] = {xf(0, 1, 500000), xf(0, 2, 500000), xf(3, 2, 500000)};
    usim_time fin[4], mk;
    ck_assert_int_eq(usim_net_run(n, x, 3, fin, &mk), USIM_OK);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(fin[i], 1 * US + 1000000000LL);
    /* a 4th flow 3->4 shares only uplink 3 with c */
    usim_xfer y[4] = {xf(0, 1, 500000), xf(0, 2, 500000), xf(3, 2, 500000), xf(3, 4, 500000)};
    ck_assert_int_eq(usim_net_run(n, y, 4, fin, &mk), USIM_OK);
    ck_assert_int_eq(mk, 1 * US + 1000000000LL);
    ck_assert_int_eq(fin[3], 1 * US + 1000000000LL);
    usim_net_free(n);
}
END_TEST

START_TEST(test_dependencies)
{
    usim_platform p = plat(8, 1);
    usim_net *n = usim_net_new(&p, 8);
    usim_xfer x[3] = {xf(0, 1, 1000), xf(1, 2, 1000), xf(2, 3, 1000)};
    x[1].dep[0] = 0;
    x[2].dep[0] = 1;
    x[2].dep[1] = 0;
    usim_time fin[3], mk;
    ck_assert_int_eq(usim_net_run(n, x, 3, fin, &mk), USIM_OK);
    usim_time one = 1 * US + 1000000;   /* 1000 B at 1 GB/s = 1 us */
    ck_assert_int_eq(fin[0], one);
    ck_assert_int_eq(fin[1], 2 * one);
    ck_assert_int_eq(fin[2], 3 * one);
    x[0].dep[0] = 2;   /* cycle */
    ck_assert_int_eq(usim_net_run(n, x, 3, fin, &mk), USIM_EINVAL);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "cycle"));
    usim_net_free(n);
}
END_TEST

/* A transfer marked nolat (a pipelined slice behind the first, as the
 * tree's slices k >= 1) skips its route latency: three chained 1000 B
 * NVLink transfers (1 us each at 1 GB/s, 1 us latency) end at 2, 3 and 5 us
 * when the second skips it (1 + 1, + 1, + 1 + 1), and a first transfer
 * marked so starts at 0. */
START_TEST(test_nolat)
{
    usim_platform p = plat(8, 1);
    usim_net *n = usim_net_new(&p, 8);
    usim_xfer x[3] = {xf(0, 1, 1000), xf(1, 2, 1000), xf(2, 3, 1000)};
    x[1].dep[0] = 0;
    x[2].dep[0] = 1;
    x[1].nolat = 1;
    usim_time fin[3], mk;
    ck_assert_int_eq(usim_net_run(n, x, 3, fin, &mk), USIM_OK);
    ck_assert_int_eq(fin[0], 2 * US);
    ck_assert_int_eq(fin[1], 3 * US);
    ck_assert_int_eq(fin[2], 5 * US);
    x[0].nolat = 1;
    ck_assert_int_eq(usim_net_run(n, x, 3, fin, &mk), USIM_OK);
    ck_assert_int_eq(fin[0], 1 * US);
    ck_assert_int_eq(mk, 4 * US);
    usim_net_free(n);
}
END_TEST

static int ranks_id[1024];

static void init_ranks(void)
{
    for (int i = 0; i < 1024; i++)
        ranks_id[i] = i;
}

START_TEST(test_ring_allgather_one_switch)
{
    init_ranks();
    usim_platform p = plat(8, 1);
    usim_net *n = usim_net_new(&p, 8);
    for (int P = 2; P <= 8; P++) {
        uint64_t ch[8];
        for (int i = 0; i < P; i++)
            ch[i] = 2000000;
        usim_coll c = {.type = USIM_ALLGATHER, .ngroups = 1, .size = P, .ranks = ranks_id, .pair_bytes = NULL,
                       .chunk_bytes = ch, .bytes = 0};
        usim_coll_result r;
        uint64_t sent[8], recv[8];
        ck_assert_int_eq(usim_coll_run(n, &c, &r, sent, recv), USIM_OK);
        /* P-1 steps on disjoint links: (P-1) (latency + chunk / bandwidth)
         * + NCCL's base latency.  One node, Simple (LL's 2x and LL128's
         * 128/120 / (.92 x 128/120) wire bytes lose at 2 MB): tuning.cc
         * v2.23.4 hwLat[NVLINK][RING][Simple] = 3.4 us per step, baseLat
         * [RING][Simple] = 8.4 us once (the platform's 1 us is for
         * point-to-point transfers only) */
        ck_assert_int_eq(r.duration, (P - 1) * (3400 * NS + 2000000000LL) + 8400 * NS);
        for (int i = 0; i < P; i++) {
            ck_assert_uint_eq(sent[i], (uint64_t)(P - 1) * 2000000);
            ck_assert_uint_eq(recv[i], (uint64_t)(P - 1) * 2000000);
        }
        ck_assert_uint_eq(r.total_sent, r.total_recv);
        ck_assert_uint_eq(r.max_sent[USIM_CLASS_NIC], 0);
        c.type = USIM_REDUCE_SCATTER;
        ck_assert_int_eq(usim_coll_run(n, &c, &r, NULL, NULL), USIM_OK);
        ck_assert_int_eq(r.duration, (P - 1) * (3400 * NS + 2000000000LL) + 8400 * NS);
        c.type = USIM_ALLREDUCE;   /* 2 (P-1) steps, the same latencies (one node: no plateau factor) */
        ck_assert_int_eq(usim_coll_run(n, &c, &r, NULL, NULL), USIM_OK);
        ck_assert_int_eq(r.duration, 2 * (P - 1) * (3400 * NS + 2000000000LL) + 8400 * NS);
    }
    usim_net_free(n);
}
END_TEST

START_TEST(test_a2a_crossing_nic)
{
    init_ranks();
    /* 2 nodes x 2 GPUs.  GPU 0 sends b to GPU 1 (NVLink) and to GPUs 2, 3
     * through its NIC: two flows share NIC_TX[0] at 0.05 GB/s each, so the
     * all-to-all takes NIC latency + 2 b / NIC bandwidth. */
    usim_platform p = plat(2, 1);
    usim_net *n = usim_net_new(&p, 4);
    uint64_t b = 1000000, pb[16];
    for (int i = 0; i < 16; i++)
        pb[i] = (i % 5 == 0) ? 0 : b;
    usim_coll c = {.type = USIM_A2A_DIRECT, .ngroups = 1, .size = 4, .ranks = ranks_id, .pair_bytes = pb,
                   .chunk_bytes = NULL, .bytes = 0};
    usim_coll_result r;
    uint64_t sent[4], recv[4];
    ck_assert_int_eq(usim_coll_run(n, &c, &r, sent, recv), USIM_OK);
    ck_assert_int_eq(r.duration, 5 * US + 20000000000LL);
    ck_assert_uint_eq(r.max_sent[USIM_CLASS_NIC], 2 * b);
    ck_assert_uint_eq(r.max_sent[USIM_CLASS_NVLINK], b);
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(sent[i], 3 * b);
    /* spine oversubscribed 2:1: leaf uplink = 2 NICs / 2 = 1 NIC, shared by
     * the 4 inter-node flows of the node: 4 b / NIC bandwidth */
    usim_platform q = plat(2, 2);
    usim_net *m = usim_net_new(&q, 4);
    ck_assert_int_eq(usim_coll_run(m, &c, &r, NULL, NULL), USIM_OK);
    ck_assert_int_eq(r.duration, 5 * US + 40000000000LL);
    usim_net_free(m);
    usim_net_free(n);
}
END_TEST

START_TEST(test_pairwise_one_switch)
{
    init_ranks();
    usim_platform p = plat(8, 1);
    usim_net *n = usim_net_new(&p, 8);
    uint64_t pb[64];
    for (int i = 0; i < 64; i++)
        pb[i] = 1000000;
    usim_coll c = {.type = USIM_A2A_PAIRWISE, .ngroups = 1, .size = 8, .ranks = ranks_id, .pair_bytes = pb,
                   .chunk_bytes = NULL, .bytes = 0};
    usim_coll_result r;
    ck_assert_int_eq(usim_coll_run(n, &c, &r, NULL, NULL), USIM_OK);
    /* 7 steps; in each, every uplink and downlink carries one flow */
    ck_assert_int_eq(r.duration, 7 * (1 * US + 1000000000LL));
    c.type = USIM_A2A_DIRECT;
    ck_assert_int_eq(usim_coll_run(n, &c, &r, NULL, NULL), USIM_OK);
    /* 7 flows share each uplink: 7 MB at 1 GB/s */
    ck_assert_int_eq(r.duration, 1 * US + 7000000000LL);
    usim_net_free(n);
}
END_TEST

START_TEST(test_conservation_and_determinism)
{
    init_ranks();
    usim_platform p = plat(4, 1.5);
    usim_net *n = usim_net_new(&p, 16);
    uint64_t pb[16 * 16], ch[16];
    for (int i = 0; i < 256; i++)
        pb[i] = 1000 + 37 * (uint64_t)i;
    for (int i = 0; i < 16; i++)
        ch[i] = 5000 + 11 * (uint64_t)i;
    for (int t = 0; t < USIM_NCOLL; t++) {
        int size = t == USIM_SENDRECV ? 2 : 8;
        usim_coll c = {.type = (usim_coll_type)t, .ngroups = 2, .size = size, .ranks = ranks_id,
                       .pair_bytes = pb, .chunk_bytes = ch, .bytes = 4096};
        usim_coll_result r1, r2;
        uint64_t s1[16], v1[16], s2[16], v2[16];
        ck_assert_int_eq(usim_coll_run(n, &c, &r1, s1, v1), USIM_OK);
        ck_assert_int_eq(usim_coll_run(n, &c, &r2, s2, v2), USIM_OK);
        ck_assert(memcmp(&r1, &r2, sizeof r1) == 0);
        ck_assert(memcmp(s1, s2, sizeof s1) == 0);
        uint64_t ts = 0, tr = 0;
        for (int i = 0; i < 16; i++) {
            ts += s1[i];
            tr += v1[i];
        }
        ck_assert_uint_eq(ts, tr);
        ck_assert_uint_eq(ts, r1.total_sent);
        ck_assert_uint_gt(ts, 0);
        ck_assert_int_gt(r1.duration, 0);
    }
    usim_net_free(n);
}
END_TEST

START_TEST(test_ring_extrapolation)
{
    init_ranks();
    usim_platform p = plat(8, 1);
    usim_net *n = usim_net_new(&p, 256);
    uint64_t ch[256];
    for (int i = 0; i < 256; i++)
        ch[i] = 100000;
    usim_coll c = {.type = USIM_ALLGATHER, .ngroups = 1, .size = 256, .ranks = ranks_id, .pair_bytes = NULL,
                   .chunk_bytes = ch, .bytes = 0};
    usim_coll_result full, ext;
    usim_net_set_ring_window(n, 4000);   /* 4000 / 8 channels >= 255 steps */
    ck_assert_int_eq(usim_coll_run(n, &c, &full, NULL, NULL), USIM_OK);
    ck_assert_int_eq(full.extrapolated, 0);
    usim_net_set_ring_window(n, 32);
    ck_assert_int_eq(usim_coll_run(n, &c, &ext, NULL, NULL), USIM_OK);
    ck_assert_int_eq(ext.extrapolated, 255 - 32 / 8);   /* 8 channels: 32 / 8 steps */
    /* the ring is periodic (every step gated by the NIC hop): exact */
    ck_assert_int_eq(ext.duration, full.duration);
    ck_assert_uint_eq(ext.total_sent, full.total_sent);
    /* by hand: 32 nodes of 8, so 8 channel rings, each leaving every node
     * through its own NIC with 1/8 of each chunk (12500 B); NVLink carries 7
     * channels per GPU (7 x 12500 B at 1 GB/s: 87.5 us), the NIC one (12500 B
     * at 0.1 GB/s: 125 us), so every one of the 255 steps lasts the NIC
     * transfer's latency + 125 us.  That latency is NCCL's mean step latency
     * of the ring (tuning.cc v2.23.4, Simple): 255 steps, 31 of them across
     * nodes at hwLat[NET][RING] = 14 us, 224 inside at max(hwLat[NVLINK]
     * [RING] = 3.4, 3 x 1 us net overhead) = 3.4 us: (224 x 3.4 + 31 x 14) /
     * 255 = 1195.6 / 255 us = 4688627 ps (rounded); plus baseLat 8.4 us
     * once.  (Chunks of 100000 B / (8 channels x 256) < 64 B: no plateau
     * factor, and all-gather has none anyway.) */
    ck_assert_int_eq(full.channels, 8);
    ck_assert_int_eq(full.algo, USIM_ALGO_RING);
    ck_assert_int_eq(full.proto, USIM_PROTO_SIMPLE);
    ck_assert_int_eq(full.duration, 255 * (4688627LL + 125000000LL) + 8400 * NS);
    usim_net_free(n);
}
END_TEST

/* Bytes of the steps beyond the window are counted in closed form: they equal
 * a full count, for every ring collective, with uneven chunks. */
START_TEST(test_window_counts)
{
    init_ranks();
    usim_platform p = plat(4, 1);
    usim_net *n = usim_net_new(&p, 64);
    uint64_t ch[64];
    for (int i = 0; i < 64; i++)
        ch[i] = 100000 + 7 * (uint64_t)i * i + (uint64_t)i % 3;
    usim_coll_type types[3] = {USIM_ALLGATHER, USIM_REDUCE_SCATTER, USIM_ALLREDUCE};
    for (int k = 0; k < 3; k++) {
        usim_coll c = {.type = types[k], .ngroups = 1, .size = 64, .ranks = ranks_id, .pair_bytes = NULL,
                       .chunk_bytes = ch, .bytes = 0, .algo = USIM_ALGO_RING, .proto = USIM_PROTO_SIMPLE,
                       .grid = NULL, .chunk_total = 0, .chunk_mult = 0};
        usim_coll_result full, win;
        uint64_t s1[64], r1[64], s2[64], r2[64];
        usim_net_set_ring_window(n, 100000);
        ck_assert_int_eq(usim_coll_run(n, &c, &full, s1, r1), USIM_OK);
        ck_assert_int_eq(full.extrapolated, 0);
        usim_net_set_ring_window(n, 16);
        ck_assert_int_eq(usim_coll_run(n, &c, &win, s2, r2), USIM_OK);
        ck_assert_int_gt(win.extrapolated, 0);
        ck_assert(memcmp(s1, s2, sizeof s1) == 0);
        ck_assert(memcmp(r1, r2, sizeof r1) == 0);
        ck_assert(memcmp(full.max_sent, win.max_sent, sizeof full.max_sent) == 0);
        ck_assert_uint_eq(full.total_sent, win.total_sent);
    }
    usim_net_free(n);
}
END_TEST

START_TEST(test_bad_collectives)
{
    init_ranks();
    usim_platform p = plat(8, 1);
    usim_net *n = usim_net_new(&p, 8);
    usim_coll_result r;
    uint64_t ch[16] = {0};
    usim_coll c = {.type = USIM_ALLGATHER, .ngroups = 2, .size = 8, .ranks = ranks_id, .pair_bytes = NULL,
                   .chunk_bytes = ch, .bytes = 0};
    ck_assert_int_eq(usim_coll_run(n, &c, &r, NULL, NULL), USIM_EINVAL);
    c = (usim_coll){.type = USIM_A2A_DIRECT, .ngroups = 1, .size = 4, .ranks = ranks_id, .pair_bytes = NULL,
                    .chunk_bytes = NULL, .bytes = 0};
    ck_assert_int_eq(usim_coll_run(n, &c, &r, NULL, NULL), USIM_EINVAL);
    c = (usim_coll){.type = USIM_SENDRECV, .ngroups = 1, .size = 3, .ranks = ranks_id, .pair_bytes = NULL,
                    .chunk_bytes = NULL, .bytes = 10};
    ck_assert_int_eq(usim_coll_run(n, &c, &r, NULL, NULL), USIM_EINVAL);
    usim_xfer x = xf(0, 9, 10);
    usim_time mk;
    ck_assert_int_eq(usim_net_run(n, &x, 1, NULL, &mk), USIM_EINVAL);
    ck_assert_ptr_null(usim_net_new(&p, 0));
    usim_net_free(n);
}
END_TEST

static Suite *make_net_suite(void)
{
    Suite *s = suite_create("net");
    TCase *tc = tcase_create("golden");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_one_transfer_nvlink);
    tcase_add_test(tc, test_nolat);
    tcase_add_test(tc, test_one_transfer_nic);
    tcase_add_test(tc, test_two_share_one_link);
    tcase_add_test(tc, test_max_min_fairness);
    tcase_add_test(tc, test_dependencies);
    tcase_add_test(tc, test_ring_allgather_one_switch);
    tcase_add_test(tc, test_a2a_crossing_nic);
    tcase_add_test(tc, test_pairwise_one_switch);
    tcase_add_test(tc, test_conservation_and_determinism);
    tcase_add_test(tc, test_ring_extrapolation);
    tcase_add_test(tc, test_window_counts);
    tcase_add_test(tc, test_bad_collectives);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(make_net_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
