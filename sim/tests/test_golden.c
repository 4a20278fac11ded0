/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_golden.c -- end-to-end golden cases in the spirit of SimGrid's .tesh
 * files: small platforms with round numbers, every expected value derived by
 * hand in the comments and compared exactly (integer picoseconds, integer
 * bytes).
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "usim.h"

#define US 1000000LL   /* ps */

/* Result seconds back to picoseconds (they were integers before division). */
static long long ps_of(double s)
{
    return llround(s * 1e12);
}
#define NS 1000LL

/* 1 GB/s NVLink, 0.1 GB/s NIC, latencies as given; 1 TFLOP/s and 1 TB/s so
 * that FLOPs and bytes are picoseconds; no shape terms (no SMs, no K or head
 * dimension dependence, no launch cost). */
static usim_platform round_platform(int gpn, double nvl_lat_us, double nic_lat_us)
{
    usim_platform p;
    memset(&p, 0, sizeof p);
    strcpy(p.name, "round");
    p.gpus_per_node = gpn;
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
    p.nvl_lat = (usim_time)(nvl_lat_us * US);
    p.nic_lat = (usim_time)(nic_lat_us * US);
    p.oversub = 1;
    p.nvls_eff = 1;
    return p;
}

/*
 * All-gather over 2 nodes x 2 GPUs, 1 MB per GPU, NVLink latency 1 us, NIC 5 us.
 * Two channels (one per rail): ring orders [0 1 2 3] and [1 0 3 2]; each
 * carries half of every chunk (500000 B).  Channel 0 leaves node 0 from GPU 1
 * (1 -> 2) and node 1 from GPU 3 (3 -> 0); channel 1 from GPU 0 (0 -> 3) and
 * GPU 2 (2 -> 1): every NIC carries one flow, every NVLink one flow, and the
 * spine (2 NICs = 0.2 GB/s per node) two flows of 0.1 GB/s: no sharing.
 * Latencies are NCCL's (tuning.cc v2.23.4, ring, Simple; the platform's 1
 * and 5 us are for point-to-point transfers): 3 steps, 1 across nodes at
 * hwLat[NET][RING] = 14 us, 2 inside at max(hwLat[NVLINK][RING] = 3.4,
 * 3 x 1 us net overhead) = 3.4 us.  A position sends its steps in order, so
 * the NIC transfers carry the mean, (2 x 3.4 + 14) / 3 = 6.933333 us
 * (6933333 ps), and baseLat[RING][Simple] = 8.4 us is paid once:
 *   NVLink hop: 3.4 us + 500000 B / 1 GB/s   = 0.5034 ms
 *   NIC hop:    6933333 ps + 500000 B / 0.1 GB/s
 * Each of the 3 steps waits for the previous step's NIC hop of the ring:
 *   duration = 3 x (6933333 + 5e9) ps + 8.4 us (Simple; LL and LL128 move
 *   more bytes and lose, latency being small).
 * Bytes: every GPU sends 3 steps x 2 channels x 500000 B = 3 MB, half of it
 * (one channel) over its NIC.
 */
START_TEST(test_allgather_two_rails)
{
    usim_platform p = round_platform(2, 1, 5);
    usim_net *n = usim_net_new(&p, 4);
    int ranks[4] = {0, 1, 2, 3};
    uint64_t chunk[4] = {1000000, 1000000, 1000000, 1000000};
    usim_coll c = {.type = USIM_ALLGATHER, .ngroups = 1, .size = 4, .ranks = ranks, .pair_bytes = NULL,
                   .chunk_bytes = chunk, .bytes = 0, .algo = USIM_ALGO_AUTO, .proto = USIM_PROTO_AUTO,
                   .grid = NULL, .chunk_total = 0, .chunk_mult = 0};
    usim_coll_result r;
    uint64_t sent[4];
    ck_assert_int_eq(usim_coll_run(n, &c, &r, sent, NULL), USIM_OK);
    ck_assert_int_eq(r.algo, USIM_ALGO_RING);
    ck_assert_int_eq(r.proto, USIM_PROTO_SIMPLE);
    ck_assert_int_eq(r.channels, 2);
    ck_assert_int_eq(r.duration, 3 * (6933333LL + 5000 * US) + 8400 * NS);
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(sent[i], 3000000);
    ck_assert_uint_eq(r.max_sent[USIM_CLASS_NIC], 1500000);
    ck_assert_uint_eq(r.max_sent[USIM_CLASS_NVLINK], 1500000);
    usim_net_free(n);
}
END_TEST

/*
 * The same all-gather with a forced LL128 protocol.  Bandwidth: NCCL's ring
 * LL128 bus bandwidth is .92 of Simple's (tuning.cc), i.e. 1 / .92 wire
 * bytes per payload byte: 500000 / .92 = 543478.26, 543479 B per hop after
 * rounding up.  Latency (tuning.cc v2.23.4, LL128): inside max(hwLat[NVLINK]
 * [RING] = 1.9, 1 us net overhead) = 1.9 us, across nodes hwLat[NET][RING] =
 * 4.0 us; the NIC transfers carry the mean (2 x 1.9 + 4.0) / 3 = 2.6 us;
 * baseLat[RING][LL128] = 14 us once:
 *   NIC hop = 2600000 ps + 543479 B / 0.1 GB/s = 2600000 + 5434790000 ps
 *   duration = 3 NIC hops + 14 us.
 */
START_TEST(test_allgather_ll128)
{
    usim_platform p = round_platform(2, 1, 5);
    usim_net *n = usim_net_new(&p, 4);
    int ranks[4] = {0, 1, 2, 3};
    uint64_t chunk[4] = {1000000, 1000000, 1000000, 1000000};
    usim_coll c = {.type = USIM_ALLGATHER, .ngroups = 1, .size = 4, .ranks = ranks, .pair_bytes = NULL,
                   .chunk_bytes = chunk, .bytes = 0, .algo = USIM_ALGO_RING, .proto = USIM_PROTO_LL128,
                   .grid = NULL, .chunk_total = 0, .chunk_mult = 0};
    usim_coll_result r;
    ck_assert_int_eq(usim_coll_run(n, &c, &r, NULL, NULL), USIM_OK);
    ck_assert_int_eq(r.proto, USIM_PROTO_LL128);
    ck_assert_int_eq(r.duration, 3 * (2600000LL + 5434790000LL) + 14 * US);
    usim_net_free(n);
}
END_TEST

/*
 * NVLS all-reduce on 4 GPUs of one node, 1 MB per GPU (S = 4 MB), NVLink
 * 1 GB/s, NVLS efficiency 0.5, latency 0: each GPU pushes S + S/4 = 5 MB to
 * the switch and receives 5 MB back, in 10 slices of 500000 B (512 KiB
 * slices: ceil(5e6 / 524288) = 10), on the wire / 0.5 = 1 MB each at
 * 1 GB/s = 1 ms.  The down slice k waits for up slice k: the downs trail the
 * ups by one slice: 10 ms + 1 ms = 11 ms.  NVLS's latency is NCCL's, once
 * (tuning.cc v2.23.4: latencies[NVLS] = hwLat[NVLINK][NVLS][Simple] = 25 us,
 * no per-slice latency): 11.025 ms.
 */
START_TEST(test_nvls_allreduce)
{
    usim_platform p = round_platform(4, 0, 0);
    p.nvls = 1;
    p.nvls_eff = 0.5;
    usim_net *n = usim_net_new(&p, 4);
    int ranks[4] = {0, 1, 2, 3};
    uint64_t chunk[4] = {1000000, 1000000, 1000000, 1000000};
    usim_coll c = {.type = USIM_ALLREDUCE, .ngroups = 1, .size = 4, .ranks = ranks, .pair_bytes = NULL,
                   .chunk_bytes = chunk, .bytes = 0, .algo = USIM_ALGO_NVLS, .proto = USIM_PROTO_AUTO,
                   .grid = NULL, .chunk_total = 0, .chunk_mult = 0};
    usim_coll_result r;
    uint64_t sent[4], recv[4];
    ck_assert_int_eq(usim_coll_run(n, &c, &r, sent, recv), USIM_OK);
    ck_assert_int_eq(r.algo, USIM_ALGO_NVLS);
    ck_assert_int_eq(r.duration, 11 * 1000 * US + 25 * US);
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(sent[i], 5000000);
        ck_assert_uint_eq(recv[i], 5000000);
    }
    usim_net_free(n);
}
END_TEST

/*
 * One training iteration, Ulysses on 2 GPUs of one node (P = 2, DP = 1),
 * ZeRO-0, no recompute.  Model: 1 layer, h = 64, 2 heads of d = 32, F = 320,
 * V = 128, s = 16 (n = 8 tokens per GPU), batch 1, bf16 (e = 2), causal.
 * Platform: 1 TFLOP/s (a FLOP is a picosecond), 1 TB/s HBM (a byte is a
 * picosecond), NVLink 1 GB/s (a byte is a nanosecond), latency 0.
 *
 * Compute (every GEMM is compute-bound: e.g. QKV moves (8*64 + 64*192 + 8*192)
 * * 2 = 28672 B < 196608 FLOPs):
 *   QKV        2*8*64*192 = 196608, + 0.3 of the elementwise bytes
 *              (8 * (10*64 + 2*320) * 2 = 20480 B): 6144        -> 202752
 *   attention  4 b d * 1 head * 16*17/2 pairs = 4*32*136        ->  17408
 *   out + MLP  2*8*64*64 + 2 * 2*8*64*320 = 720896, + 14336     -> 735232
 *   LM head    2*8*64*128 = 131072, + logits bytes 8*128*6 = 6144 -> 137216
 *   backward   LM head 2 * 131072 + 6144 = 268288; MLP + out 2 * 720896 +
 *              28672 = 1470464; attention 2.5 * 17408 = 43520; QKV 2 * 196608
 *              + 12288 = 405504                                   -> 2187776
 *   optimizer  36 B * (57600 layer + 8192 embedding parameters)  -> 2368512
 *   total compute                                              5648896 ps
 * Sequence-parallel all-to-alls: Q, K, V, O forward and dO, dQ, dK, dV
 * backward, each 8 tokens * 1 head * 32 * 2 B = 512 B per direction:
 *   8 x 512 ns = 4096 ns, all exposed (nothing else runs).
 * Gradient all-reduce (ZeRO-0, ring over 2 GPUs of one node, Simple): the
 * layer's 57600 parameters (115200 B) in 2 steps of 57600 B = 115.2 us, then
 * the embedding's 8192 (16384 B) in 2 steps of 8192 B = 16.384 us; each
 * all-reduce pays NCCL's latency (tuning.cc v2.23.4, the platform's 0 us
 * being for point-to-point transfers): baseLat[RING][Simple] 8.4 us + 2
 * steps x hwLat[NVLINK][RING][Simple] 3.4 us = 15.2 us.  Simple wins both:
 * layer LL 2 x 115.2 + 6.6 + 2 x 0.6 = 238.2 us and LL128 2 x 57.6 / .92 +
 * 14 + 2 x 1.9 = 143.0 us against 115.2 + 15.2 = 130.4 us; embedding LL 2 x
 * 16.384 + 7.8 = 40.568 us, LL128 2 x 8.192 / .92 + 17.8 = 35.609 us against
 * 16.384 + 15.2 = 31.584 us.  Total 161.984 us, exposed (the optimizer waits
 * for it).
 * Iteration = 5648896 + 4096000 + 161984000 = 171728896 ps.
 * Bytes sent per GPU over NVLink: 8 x 512 + 115200 + 16384 = 135680.
 */
START_TEST(test_iteration_ulysses_two_gpus)
{
    usim_platform p = round_platform(2, 0, 0);
    usim_model m;
    memset(&m, 0, sizeof m);
    strcpy(m.name, "golden");
    m.layers = 1;
    m.hidden = 64;
    m.heads = m.kv_heads = 2;
    m.ffn = 320;
    m.vocab = 128;
    m.seq = 16;
    m.micro_batch = m.global_batch = 1;
    m.dtype = USIM_BF16;
    m.causal = 1;
    m.tied_embeddings = 1;
    usim_job j;
    memset(&j, 0, sizeof j);
    j.method = ULY_METHOD_ULYSSES;
    j.gpus = 2;
    j.zero = 0;
    j.recompute = USIM_RC_NONE;
    usim_sim *s = usim_sim_new(&p, 2);
    usim_result r;
    ck_assert_int_eq(usim_simulate(s, &m, &j, NULL, &r), USIM_OK);
    ck_assert_int_eq(ps_of(r.compute_s), 5648896);
    ck_assert_int_eq(ps_of(r.exposed_s[USIM_KIND_SP]), 4096000);
    ck_assert_int_eq(ps_of(r.exposed_s[USIM_KIND_GRAD]), 161984000);
    ck_assert_int_eq(ps_of(r.exposed_s[USIM_KIND_PARAM]), 0);
    ck_assert_int_eq(ps_of(r.iter_s), 171728896);
    ck_assert(r.sent_bytes[USIM_CLASS_NVLINK] == 135680);
    ck_assert(r.sent_bytes[USIM_CLASS_NIC] == 0);
    ck_assert(r.sp_bytes_layer_fwd == 2048);
    usim_sim_free(s);
}
END_TEST

/* A direct all-to-all of 1 MB per pair over GPUs 0 .. G-1 (G <= 32). */
static usim_coll_result a2a_1mb(const usim_platform *p, int G)
{
    static int ranks[32];
    static uint64_t pair[32 * 32];
    for (int i = 0; i < G; i++)
        ranks[i] = i;
    for (int i = 0; i < G * G; i++)
        pair[i] = 1000000;
    usim_net *n = usim_net_new(p, G);
    ck_assert_ptr_nonnull(n);
    usim_coll c = {.type = USIM_A2A_DIRECT, .ngroups = 1, .size = G, .ranks = ranks, .pair_bytes = pair,
                   .chunk_bytes = NULL, .bytes = 0, .algo = USIM_ALGO_AUTO, .proto = USIM_PROTO_AUTO,
                   .grid = NULL, .chunk_total = 0, .chunk_mult = 0};
    usim_coll_result r;
    ck_assert_int_eq(usim_coll_run(n, &c, &r, NULL, NULL), USIM_OK);
    usim_net_free(n);
    return r;
}

/*
 * An NVLink domain larger than a node (an NVL72 rack in miniature): 4 GPUs per
 * node, 16 per domain, 16 GPUs (4 nodes, one domain).  Direct all-to-all of
 * 1 MB per pair, NVLink latency 1 us.  Every pair is inside the domain, so
 * every flow is NVL_UP[src] -> NVL_DOWN[dst]: each up link carries 15 flows,
 * each down link 15: max-min gives every flow 1/15 GB/s, and each 1 MB flow
 * takes 15 ms.  Duration = 1 us + 15 ms.  No byte crosses a NIC.
 */
START_TEST(test_a2a_nvlink_domain_spans_nodes)
{
    usim_platform p = round_platform(4, 1, 5);
    p.nvl_domain = 16;
    usim_coll_result r = a2a_1mb(&p, 16);
    ck_assert_int_eq(r.duration, 1 * US + 15000 * US);
    ck_assert_uint_eq(r.max_sent[USIM_CLASS_NIC], 0);
    ck_assert_uint_eq(r.max_sent[USIM_CLASS_NVLINK], 15000000);
    /* the same 16 GPUs as 4 separate 4-GPU nodes: 12 of the 15 peers are
     * behind the NIC (0.1 GB/s per GPU, 12 flows: 1/120 GB/s each; the spine
     * carries 4 x 12 flows on 0.4 GB/s: the same share), so 1 MB takes
     * 120 ms after the 5 us NIC latency; NVLink flows (3 per link) end first */
    p.nvl_domain = 0;
    r = a2a_1mb(&p, 16);
    ck_assert_int_eq(r.duration, 5 * US + 120000 * US);
    ck_assert_uint_eq(r.max_sent[USIM_CLASS_NIC], 12000000);
    ck_assert_uint_eq(r.max_sent[USIM_CLASS_NVLINK], 3000000);
}
END_TEST

/*
 * Two NVLink domains of 16 (32 GPUs, 4 per node, one NIC per GPU at
 * 0.1 GB/s, spine 0.4 GB/s per node).  Direct all-to-all, 1 MB per pair: per
 * GPU 15 NVLink flows (1/15 GB/s: 15 ms) and 16 NIC flows (NIC: 0.1 GB/s / 16;
 * the node's spine link: 0.4 GB/s / 64 -- the same 6.25 MB/s), so the
 * cross-domain flows take 1 MB / 6.25 MB/s = 160 ms after 5 us.
 */
START_TEST(test_a2a_two_nvlink_domains)
{
    usim_platform p = round_platform(4, 1, 5);
    p.nvl_domain = 16;
    usim_coll_result r = a2a_1mb(&p, 32);
    ck_assert_int_eq(r.duration, 5 * US + 160000 * US);
    ck_assert_uint_eq(r.max_sent[USIM_CLASS_NIC], 16000000);
    ck_assert_uint_eq(r.max_sent[USIM_CLASS_NVLINK], 15000000);
}
END_TEST

/* A full-mesh node of 4 GPUs: one 1 GB/s link per ordered pair (the GPU's
 * total, 3 GB/s, is what a switched node with the same usim_nvl_Bps would give). */
static usim_platform mesh_platform(void)
{
    usim_platform p = round_platform(4, 1, 5);
    p.full_mesh = 1;
    p.mesh_link_peak_Bps = 1e9;
    p.nvl_peak_Bps = 3e9;   /* the switched node's rate (the mesh's total is usim_nvl_Bps) */
    return p;
}

/*
 * Direct all-to-all on the full mesh, 1 MB per pair: each of the 12 flows has
 * its own link, all run in parallel at 1 GB/s: 1 us + 1 ms.  A send-recv of
 * 3 MB between two GPUs has one link (1 GB/s): 1 us + 3 ms, where the
 * switched node (3 GB/s up and down) takes 1 us + 1 ms.
 */
START_TEST(test_full_mesh_a2a_and_pair)
{
    usim_platform p = mesh_platform();
    usim_net *n = usim_net_new(&p, 4);
    ck_assert_ptr_nonnull(n);
    int ranks[4] = {0, 1, 2, 3};
    uint64_t pair[16];
    for (int i = 0; i < 16; i++)
        pair[i] = 1000000;
    usim_coll c = {.type = USIM_A2A_DIRECT, .ngroups = 1, .size = 4, .ranks = ranks, .pair_bytes = pair,
                   .chunk_bytes = NULL, .bytes = 0, .algo = USIM_ALGO_AUTO, .proto = USIM_PROTO_AUTO,
                   .grid = NULL, .chunk_total = 0, .chunk_mult = 0};
    usim_coll_result r;
    ck_assert_int_eq(usim_coll_run(n, &c, &r, NULL, NULL), USIM_OK);
    ck_assert_int_eq(r.duration, 1 * US + 1000 * US);
    ck_assert_uint_eq(r.max_sent[USIM_CLASS_NVLINK], 3000000);
    usim_coll sr = {.type = USIM_SENDRECV, .ngroups = 1, .size = 2, .ranks = ranks, .pair_bytes = NULL,
                    .chunk_bytes = NULL, .bytes = 3000000, .algo = USIM_ALGO_AUTO, .proto = USIM_PROTO_AUTO,
                    .grid = NULL, .chunk_total = 0, .chunk_mult = 0};
    ck_assert_int_eq(usim_coll_run(n, &sr, &r, NULL, NULL), USIM_OK);
    ck_assert_int_eq(r.duration, 1 * US + 3000 * US);
    usim_net_free(n);
    p.full_mesh = 0;
    n = usim_net_new(&p, 4);
    ck_assert_int_eq(usim_coll_run(n, &sr, &r, NULL, NULL), USIM_OK);
    ck_assert_int_eq(r.duration, 1 * US + 1000 * US);
    usim_net_free(n);
}
END_TEST

/*
 * Ring all-gather on the 4-GPU full mesh, 1 MB per GPU: two rings, strides 1
 * (0 1 2 3) and 3 (0 3 2 1), on disjoint links, each carrying half of every
 * chunk.  Each of the 3 steps is one hop of 500000 B at 1 GB/s after NCCL's
 * step latency (tuning.cc v2.23.4, one node: hwLat[NVLINK][RING][Simple] =
 * 3.4 us), plus baseLat[RING][Simple] = 8.4 us once: 3 x 503.4 + 8.4 us
 * (Simple; LL128's 1 / .92 bytes and LL's 2x lose).
 */
START_TEST(test_full_mesh_ring_allgather)
{
    usim_platform p = mesh_platform();
    usim_net *n = usim_net_new(&p, 4);
    int ranks[4] = {0, 1, 2, 3};
    uint64_t chunk[4] = {1000000, 1000000, 1000000, 1000000};
    usim_coll c = {.type = USIM_ALLGATHER, .ngroups = 1, .size = 4, .ranks = ranks, .pair_bytes = NULL,
                   .chunk_bytes = chunk, .bytes = 0, .algo = USIM_ALGO_AUTO, .proto = USIM_PROTO_AUTO,
                   .grid = NULL, .chunk_total = 0, .chunk_mult = 0};
    usim_coll_result r;
    uint64_t sent[4];
    ck_assert_int_eq(usim_coll_run(n, &c, &r, sent, NULL), USIM_OK);
    ck_assert_int_eq(r.algo, USIM_ALGO_RING);
    ck_assert_int_eq(r.proto, USIM_PROTO_SIMPLE);
    ck_assert_int_eq(r.channels, 2);
    ck_assert_int_eq(r.duration, 3 * (3400 * NS + 500 * US) + 8400 * NS);
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(sent[i], 3000000);
    usim_net_free(n);
}
END_TEST

/*
 * Ring all-gather over 2 full-mesh nodes of 4 (8 GPUs), 1 MB per GPU, NIC
 * 0.1 GB/s: 4 channels, one per entry GPU; channel c crosses its node along
 * directed Walecki path c (0 1 3 2, 1 2 0 3 and their reverses), so each
 * mesh link carries one channel and each NIC one channel.  Each channel
 * carries a quarter of every chunk (250000 B).  Mesh links are 0.2 GB/s
 * here.  Latencies (tuning.cc v2.23.4, ring, Simple): 7 steps, 1 across
 * nodes at 14 us, 6 inside at max(3.4, 3 x 1 us net overhead) = 3.4 us; the
 * NIC transfers carry the mean (6 x 3.4 + 14) / 7 = 4.9142857 us (4914286
 * ps), and baseLat 8.4 us is paid once.  A mesh hop takes 3.4 us + 1.25 ms,
 * a NIC hop 4914286 ps + 250000 B / 0.1 GB/s, and each position's sends
 * follow one another, so the NIC positions set the pace: 7 NIC hops + 8.4 us.
 * (Had the channels crossed the node in the same order -- c, c+1, ..., c-1,
 * as on a switched node -- three channels would share each link l -> l+1:
 * 3.75 ms per hop.)
 */
START_TEST(test_full_mesh_two_nodes_ring)
{
    usim_platform p = mesh_platform();
    p.mesh_link_peak_Bps = 2e8;
    p.nvl_peak_Bps = 6e8;
    usim_net *n = usim_net_new(&p, 8);
    int ranks[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    uint64_t chunk[8];
    for (int i = 0; i < 8; i++)
        chunk[i] = 1000000;
    usim_coll c = {.type = USIM_ALLGATHER, .ngroups = 1, .size = 8, .ranks = ranks, .pair_bytes = NULL,
                   .chunk_bytes = chunk, .bytes = 0, .algo = USIM_ALGO_RING, .proto = USIM_PROTO_SIMPLE,
                   .grid = NULL, .chunk_total = 0, .chunk_mult = 0};
    usim_coll_result r;
    ck_assert_int_eq(usim_coll_run(n, &c, &r, NULL, NULL), USIM_OK);
    ck_assert_int_eq(r.channels, 4);
    ck_assert_int_eq(r.duration, 7 * (4914286LL + 2500 * US) + 8400 * NS);
    usim_net_free(n);
}
END_TEST

/*
 * PAT all-gather over 4 nodes x 1 GPU, 1 MB per GPU, NIC 0.1 GB/s (NCCL
 * v2.23.4 tuning.cc).  PAT moves the ring's bytes with PAT's bandwidth
 * factor .85: 1e6 / .85 = 1176470.59, 1176471 wire bytes per hop after
 * rounding up, 11764710000 ps at 0.1 GB/s; no per-step latency; PAT's
 * latency once: 8 + log2i(4) x hwLat[NET][Tree][Simple] / 3.5 + 2.8 x 4 =
 * 8 + 2 x 14 / 3.5 + 11.2 = 27.2 us.  One channel (one GPU per node), 3 steps
 * in sequence: 3 x 11764710000 + 27200000 ps.
 * The ring (Simple) is faster and is what auto runs: 3 steps of 1e6 B at
 * 0.1 GB/s = 10 ms each with hwLat[NET][Tree][Simple] = 14 us (ppn = 1) per
 * step, baseLat 8.4 us: 3 x (14 us + 10 ms) + 8.4 us.
 */
START_TEST(test_pat_allgather)
{
    usim_platform p = round_platform(1, 1, 5);
    usim_net *n = usim_net_new(&p, 4);
    int ranks[4] = {0, 1, 2, 3};
    uint64_t chunk[4] = {1000000, 1000000, 1000000, 1000000};
    usim_coll c = {.type = USIM_ALLGATHER, .ngroups = 1, .size = 4, .ranks = ranks, .pair_bytes = NULL,
                   .chunk_bytes = chunk, .bytes = 0, .algo = USIM_ALGO_PAT, .proto = USIM_PROTO_AUTO,
                   .grid = NULL, .chunk_total = 0, .chunk_mult = 0};
    usim_coll_result r;
    ck_assert_int_eq(usim_coll_run(n, &c, &r, NULL, NULL), USIM_OK);
    ck_assert_int_eq(r.algo, USIM_ALGO_PAT);
    ck_assert_int_eq(r.proto, USIM_PROTO_SIMPLE);
    ck_assert_int_eq(r.duration, 3 * 11764710000LL + 27200 * NS);
    c.algo = USIM_ALGO_AUTO;
    ck_assert_int_eq(usim_coll_run(n, &c, &r, NULL, NULL), USIM_OK);
    ck_assert_int_eq(r.algo, USIM_ALGO_RING);
    ck_assert_int_eq(r.proto, USIM_PROTO_SIMPLE);
    ck_assert_int_eq(r.duration, 3 * (14 * US + 10000 * US) + 8400 * NS);
    /* PAT needs one GPU per node: refused on 2 nodes x 2 */
    usim_net_free(n);
    p = round_platform(2, 1, 5);
    n = usim_net_new(&p, 4);
    c.algo = USIM_ALGO_PAT;
    ck_assert_int_eq(usim_coll_run(n, &c, &r, NULL, NULL), USIM_EINVAL);
    usim_net_free(n);
}
END_TEST

/*
 * NCCL's tree bound beyond two nodes: all-reduce over 4 nodes x 2 GPUs,
 * 64 MiB per GPU (S = 512 MiB), forced tree Simple.  NCCL's model (tuning.cc
 * v2.23.4): latency baseLat 8.4 + 2 ((2 - 1) x hwLat[NVLINK][Tree][Simple]
 * 4.0 + log2i(4) x hwLat[NET][Tree][Simple] 14) = 72.4 us; bus bandwidth
 * .92 x the ring's network rate, 2 NICs x 0.1 GB/s = 0.2 GB/s (NVLink's
 * 1 GB/s x 2/1 does not bind), no size correction (log2(S / 64) = 23 is
 * past the table); time = 72.4 us + 2 x 7/8 x S / (.92 x 0.2 GB/s) =
 * 72.4 us + 939524096 / 1.84e8 s = 5.106185 s: the flow-level tree (its
 * links alone) is faster, so the result is the bound.  The double
 * expression is the model's, so the test allows the 1 ps of its rounding.
 */
START_TEST(test_tree_bound)
{
    usim_platform p = round_platform(2, 1, 5);
    usim_net *n = usim_net_new(&p, 8);
    int ranks[8];
    uint64_t chunk[8];
    for (int i = 0; i < 8; i++) {
        ranks[i] = i;
        chunk[i] = 64ull << 20;
    }
    usim_coll c = {.type = USIM_ALLREDUCE, .ngroups = 1, .size = 8, .ranks = ranks, .pair_bytes = NULL,
                   .chunk_bytes = chunk, .bytes = 0, .algo = USIM_ALGO_TREE, .proto = USIM_PROTO_SIMPLE,
                   .grid = NULL, .chunk_total = 0, .chunk_mult = 0};
    usim_coll_result r;
    ck_assert_int_eq(usim_coll_run(n, &c, &r, NULL, NULL), USIM_OK);
    long long want = llround((72.4e-6 + 2.0 * 7 / 8 * 536870912.0 / (0.92 * 0.2e9)) * 1e12);
    ck_assert_msg(llabs(r.duration - want) <= 1, "tree %lld ps, NCCL's bound %lld", (long long)r.duration, want);
    /* the ring: NIC-bound at 0.2 GB/s per node with no .92: faster, chosen */
    c.algo = USIM_ALGO_AUTO;
    c.proto = USIM_PROTO_AUTO;
    ck_assert_int_eq(usim_coll_run(n, &c, &r, NULL, NULL), USIM_OK);
    ck_assert_int_eq(r.algo, USIM_ALGO_RING);
    ck_assert(r.duration < want);
    usim_net_free(n);
}
END_TEST

/*
 * LL's ceiling (tuning.cc llMaxBws, two nodes: 39.0 GB/s): an all-gather of
 * 64 MiB per GPU over 2 nodes x 2 GPUs with 1 TB/s links, forced ring LL.
 * The links alone would take 2 x 3/4 x 256 MiB / 1 TB/s well under a ms; the
 * ceiling bounds the time below by baseLat[Ring][LL] 6.6 us + 3/4 x 256 MiB /
 * 39 GB/s = 6.6 us + 201326592 / 3.9e10 s = 5168.8 us (1 ps of rounding
 * allowed, as above).
 */
START_TEST(test_ll_ceiling)
{
    usim_platform p = round_platform(2, 1, 5);
    p.nvl_peak_Bps = p.nic_peak_Bps = 1e12;
    usim_net *n = usim_net_new(&p, 4);
    int ranks[4] = {0, 1, 2, 3};
    uint64_t chunk[4] = {64ull << 20, 64ull << 20, 64ull << 20, 64ull << 20};
    usim_coll c = {.type = USIM_ALLGATHER, .ngroups = 1, .size = 4, .ranks = ranks, .pair_bytes = NULL,
                   .chunk_bytes = chunk, .bytes = 0, .algo = USIM_ALGO_RING, .proto = USIM_PROTO_LL,
                   .grid = NULL, .chunk_total = 0, .chunk_mult = 0};
    usim_coll_result r;
    ck_assert_int_eq(usim_coll_run(n, &c, &r, NULL, NULL), USIM_OK);
    long long want = llround((6.6e-6 + 0.75 * 268435456.0 / 39.0e9) * 1e12);
    ck_assert_msg(llabs(r.duration - want) <= 1, "LL %lld ps, ceiling %lld", (long long)r.duration, want);
    usim_net_free(n);
}
END_TEST

/*
 * NVLS-tree all-reduce over 2 nodes x 2 GPUs with NVLS, 1 byte per GPU
 * (S = 4 B): shard h (2 B) of local GPU h, 1 B over each of the two trees;
 * one slice each, so 4 channels (h, t).  Latency (tuning.cc v2.23.4):
 * hwLat[NVLINK][NVLSTree][Simple] = 25 us once, hwLat[NET][NVLSTree]
 * [Simple] = 14 us per network hop of the first slice, switch legs none.
 * Data, all channels side by side: every GPU pushes 4 x 1 B to the switch
 * over its 1 GB/s NVLink (4 flows: 4 ns), the switch returns its 2 reduced
 * bytes (2 flows: 2 ns); each tree sends 1 B up and 1 B down between the
 * nodes' GPUs h, each over its own NIC (0.1 GB/s: 10 ns) after 14 us.  The
 * root of a tree has its byte after the reduce (6 + 14010 ns) and
 * multicasts it then, long before the child, which has it after the
 * broadcast too (6 + 2 x 14010 = 28026 ns); at that point each GPU h
 * multicasts one byte (1 ns) and every GPU receives two, one per h (2 ns).
 * Total 28026 + 1 + 2 ns + 25 us = 53029 ns (NCCL's model: 25 + 2 log2(2)
 * x 14 = 53 us).
 */
START_TEST(test_nvlstree_allreduce)
{
    usim_platform p = round_platform(2, 1, 5);
    p.nvls = 1;
    usim_net *n = usim_net_new(&p, 4);
    int ranks[4] = {0, 1, 2, 3};
    uint64_t chunk[4] = {1, 1, 1, 1};
    usim_coll c = {.type = USIM_ALLREDUCE, .ngroups = 1, .size = 4, .ranks = ranks, .pair_bytes = NULL,
                   .chunk_bytes = chunk, .bytes = 0, .algo = USIM_ALGO_NVLS_TREE, .proto = USIM_PROTO_AUTO,
                   .grid = NULL, .chunk_total = 0, .chunk_mult = 0};
    usim_coll_result r;
    ck_assert_int_eq(usim_coll_run(n, &c, &r, NULL, NULL), USIM_OK);
    ck_assert_int_eq(r.algo, USIM_ALGO_NVLS_TREE);
    ck_assert_int_eq(r.channels, 4);
    ck_assert_int_eq(r.duration, 53029 * NS);
    usim_net_free(n);
    /* not on one node, nor without NVLS */
    n = usim_net_new(&p, 2);
    c.size = 2;
    ck_assert_int_eq(usim_coll_run(n, &c, &r, NULL, NULL), USIM_EINVAL);
    usim_net_free(n);
    p.nvls = 0;
    n = usim_net_new(&p, 4);
    c.size = 4;
    ck_assert_int_eq(usim_coll_run(n, &c, &r, NULL, NULL), USIM_EINVAL);
    usim_net_free(n);
}
END_TEST

static Suite *make_golden_suite(void)
{
    Suite *s = suite_create("golden");
    TCase *tc = tcase_create("golden");
    tcase_add_test(tc, test_allgather_two_rails);
    tcase_add_test(tc, test_allgather_ll128);
    tcase_add_test(tc, test_nvls_allreduce);
    tcase_add_test(tc, test_iteration_ulysses_two_gpus);
    tcase_add_test(tc, test_a2a_nvlink_domain_spans_nodes);
    tcase_add_test(tc, test_a2a_two_nvlink_domains);
    tcase_add_test(tc, test_full_mesh_a2a_and_pair);
    tcase_add_test(tc, test_full_mesh_ring_allgather);
    tcase_add_test(tc, test_full_mesh_two_nodes_ring);
    tcase_add_test(tc, test_pat_allgather);
    tcase_add_test(tc, test_tree_bound);
    tcase_add_test(tc, test_ll_ceiling);
    tcase_add_test(tc, test_nvlstree_allreduce);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(make_golden_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
