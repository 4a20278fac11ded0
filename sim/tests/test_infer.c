/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_infer.c -- golden cases of the inference model (sim/infer.c): one
 * prefill and one decode step on a platform of round numbers, every time
 * derived by hand below and compared exactly (integer picoseconds).
 *
 * Platform: 2 GPUs in one node; 1 TFLOP/s (a FLOP is a picosecond), GEMM and
 * attention efficiency 1, no shape terms (no SMs, K or head-dimension terms,
 * no launch cost); HBM 100 GB/s (a byte is 10 ps); NVLink 10 GB/s per
 * direction (a byte is 100 ps) with 1 us latency; ring algorithms, Simple
 * protocol.  Model: 2 layers, h = 64, H = 4 heads of d = 16, F = 128 (GeLU:
 * two matrices), V = 256, bf16 (e = 2), causal, untied embeddings.
 */
#include <check.h>
#include <string.h>

#include "infer.h"
#include "ulysses_infer.h"
#include "usim.h"

#define US 1000000LL   /* ps */

static usim_platform tiny_platform(void)
{
    usim_platform p;
    memset(&p, 0, sizeof p);
    strcpy(p.name, "tiny");
    p.gpus_per_node = 2;
    for (int t = 0; t < USIM_NDTYPE; t++)
        p.peak_flops[t] = 1e12;
    p.gemm_eff = p.attn_eff = 1;
    p.attn_causal_skip = 1;
    p.hbm_bytes = 1e12;
    p.hbm_Bps = 100e9;
    p.nvl_peak_Bps = 10e9;
    p.nvl_eff = 1;
    p.nvl_lat = 1 * US;
    p.nic_peak_Bps = 1e9;
    p.nic_eff = 1;
    p.nic_lat = 1 * US;
    p.oversub = 1;
    p.nvls_eff = 1;
    p.algo_allreduce = p.algo_allgather = p.algo_reduce_scatter = USIM_ALGO_RING;
    p.proto = USIM_PROTO_SIMPLE;
    return p;
}

static usim_model tiny_model(int64_t kv_heads)
{
    usim_model m;
    memset(&m, 0, sizeof m);
    strcpy(m.name, "tiny");
    m.layers = 2;
    m.hidden = 64;
    m.heads = 4;
    m.kv_heads = kv_heads;
    m.ffn = 128;
    m.vocab = 256;
    m.seq = 64;
    m.micro_batch = m.global_batch = 1;
    m.dtype = USIM_BF16;
    m.causal = 1;
    return m;
}

/*
 * Prefill of S = 64 tokens, ring CP over C = 2 GPUs (TP 1), 2 KV heads:
 * n = 32 tokens per GPU, every GEMM compute-bound (FLOPs > bytes x 10):
 *   QKV  (32, (4 + 2*2)*16 = 128, 64): 2*32*128*64 = 524288 (bytes 28672 -> 286720)
 *   out  (32, 64, 64):                 262144 (16384 B -> 163840)
 *   fc1  (32, 128, 64):                524288 (28672 B -> 286720)
 *   fc2  (32, 64, 128):                524288 (28672 B -> 286720)
 *   GEMMs per layer                    1835008 ps
 * Attention, zigzag chunks of c = 16: the diagonal step 2c^2 + c = 528
 * pairs, the other step 2c^2 = 512, 4 d = 64 FLOPs per pair and head, 4 heads:
 *   B0 = 64*4*528 = 135168, B1 = 64*4*512 = 131072.
 * One ring hop: K and V of 32 tokens x 2 KV heads x 16 x 2 B = 4096 B:
 *   H = 1 us + 4096 B / 10 GB/s = 1409600 ps.
 * Ring: max(B0 + B1, H + B1, H + B1) = 1540672: attention 266240 and
 * exposed CP 1274432.  Layer = 1835008 + 1540672 = 3375680.
 * LM head of the last token, (1, 256, 64): 32768 FLOPs, but
 * (64 + 16384 + 256) * 2 = 33408 B -> 334080 ps (memory-bound).
 * TTFT = 2 * 3375680 + 334080 = 7085440 ps.
 */
START_TEST(test_prefill_ring)
{
    usim_platform p = tiny_platform();
    usim_model m = tiny_model(2);
    usim_infer_job j = {.scheme = USIM_INF_TP, .tp = 1, .dcp = 1, .prefill_cp = 2, .prefill_method = USIM_PF_RING,
                        .prompt = 64, .output = 2, .batch = 1, .gpus = 2};
    usim_infer_result r;
    ck_assert_int_eq(usim_infer_simulate(&p, &m, &j, &r), USIM_OK);
    ck_assert_int_eq(r.pf_gemm, 1835008);
    ck_assert_int_eq(r.pf_attn, 266240);
    ck_assert_int_eq(r.pf_cp, 1274432);
    ck_assert_int_eq(r.pf_ar, 0);
    ck_assert_int_eq(r.pf_layer, 3375680);
    ck_assert_int_eq(r.pf_head, 334080);
    ck_assert_int_eq(r.ttft, 7085440);
    ck_assert_uint_eq(r.pf_cp_bytes, 4096);
    ck_assert_int_eq(r.pf_limit, USIM_LIM_COMPUTE);
}
END_TEST

/*
 * One decode step, TP 2 x DCP 2 on the 2 GPUs, 1 KV head (copied on both TP
 * ranks, so the two copies shard the tokens), batch B = 2, prompt 100,
 * generate 8: the step priced is at context 100 + 8/2 = 104, 52 tokens per
 * GPU.  Heads: 2 query heads per GPU, 4 after the q all-gather.
 * GEMMs (M = B = 2), every one HBM-bound:
 *   QKV (2, (2 + 2*1)*16 = 64, 64): (128 + 4096 + 128) * 2 = 8704 B -> 87040
 *   out (2, 64, 32):  (64 + 2048 + 128) * 2 = 4480 B                -> 44800
 *   fc1 (2, 64, 64), fc2 (2, 64, 64): 87040 each
 *   GEMMs per layer 305920 ps
 * Attention: KV read 2 * 52 * 2 * 1 * 16 * 2 = 6656 B -> 66560 ps
 * (its 4*2*4*52*16 = 26624 FLOPs take less).
 * Merge over the DCP pair (ring, Simple, one step each).  Ring collectives
 * take NCCL's latencies (tuning.cc v2.23.4, one node, Simple): baseLat
 * 8.4 us once + hwLat[NVLINK][RING] 3.4 us per step (the platform's 1 us is
 * for point-to-point transfers such as the prefill's ring hops):
 *   q all-gather:    chunk B * 2 heads * 16 * 2 = 128 B: 11.8 us + 12800 = 11812800
 *   LSE all-gather:  chunk B * 4 heads * 2 = 16 B:        11.8 us + 1600 = 11801600
 *   O reduce-scatter: chunk 128 B:                                     11812800
 * TP all-reduces (2 per layer) of B * 64 * 2 = 256 B: 2 steps of 128 B,
 * 8.4 + 2 x 3.4 = 15.2 us + 2 x 12800: 15225600 each, 30451200.
 * Layer = 305920 + 66560 + 11812800 + 11801600 + 11812800 + 30451200 = 66250880.
 * LM head (2, 128, 64): (128 + 8192 + 256) * 2 = 17152 B -> 171520 ps.
 * TPOT = 2 * 66250880 + 171520 = 132673280 ps.
 * Memory: weights per layer 64 * (64 + 32) + 2 * 64 * 64 = 14336, embedding
 * and head 2 * 128 * 64 = 16384: (2 * 14336 + 16384) * 2 B = 90112 B; one
 * token of context: 2 layers x K, V x 16 x 2 B over 2 GPUs = 64 B per GPU.
 */
START_TEST(test_decode_dcp)
{
    usim_platform p = tiny_platform();
    usim_model m = tiny_model(1);
    usim_infer_job j = {.scheme = USIM_INF_TP_DCP, .tp = 2, .dcp = 2, .prefill_cp = 1,
                        .prefill_method = USIM_PF_RING, .prompt = 100, .output = 8, .batch = 2, .gpus = 2};
    usim_infer_result r;
    ck_assert_int_eq(usim_infer_simulate(&p, &m, &j, &r), USIM_OK);
    ck_assert_int_eq(r.context, 104);
    ck_assert_int_eq(r.dec_gemm, 305920);
    ck_assert_int_eq(r.dec_attn, 66560);
    ck_assert_int_eq(r.dec_merge[USIM_MG_Q_AG], 11812800);
    ck_assert_int_eq(r.dec_merge[USIM_MG_LSE_AG], 11801600);
    ck_assert_int_eq(r.dec_merge[USIM_MG_O_RS], 11812800);
    ck_assert_int_eq(r.dec_merge[USIM_MG_OL_A2A], 0);
    ck_assert_uint_eq(r.dec_merge_bytes[USIM_MG_Q_AG], 128);
    ck_assert_uint_eq(r.dec_merge_bytes[USIM_MG_LSE_AG], 16);
    ck_assert_uint_eq(r.dec_merge_bytes[USIM_MG_O_RS], 128);
    ck_assert_int_eq(r.dec_ar, 30451200);
    ck_assert_uint_eq(r.dec_ar_bytes, 512);
    ck_assert_int_eq(r.dec_layer, 66250880);
    ck_assert_int_eq(r.dec_head, 171520);
    ck_assert_int_eq(r.tpot, 132673280);
    ck_assert_int_eq(r.dec_limit, USIM_LIM_NETWORK);
    ck_assert(r.weights == 90112.0);
    ck_assert(r.kv_bytes_per_token == 64.0);
}
END_TEST

/* The rule of vLLM's DCP, (tp // kv_heads) % dcp == 0, is refused with a
 * message naming it; Helix's attention TP must divide the KV heads. */
START_TEST(test_rules)
{
    usim_platform p = tiny_platform();
    usim_model m = tiny_model(2);
    usim_infer_job j = {.scheme = USIM_INF_TP_DCP, .tp = 2, .dcp = 2, .prefill_cp = 1,
                        .prefill_method = USIM_PF_RING, .prompt = 16, .output = 1, .batch = 1, .gpus = 2};
    usim_infer_result r;
    ck_assert_int_eq(usim_infer_simulate(&p, &m, &j, &r), USIM_EINVAL);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "(tp // kv_heads) % dcp == 0"));
    j.scheme = USIM_INF_HELIX;
    j.tp = 4;
    j.dcp = 1;
    ck_assert_int_eq(usim_infer_simulate(&p, &m, &j, &r), USIM_EINVAL);
}
END_TEST

/* The merge bytes the simulator's collectives send are the plan layer's
 * decode volumes, the bytes the library's decode sends
 * (uly_plan_decode_volume): DCP over the pair of the golden case above (its
 * group's 4 query heads; f32 on both sides), and Helix (attention TP 1 x KV-parallel 2, 4 heads)
 * at two context lengths. */
START_TEST(test_bytes_are_the_plans)
{
    usim_platform p = tiny_platform();
    usim_model m = tiny_model(1);
    m.dtype = USIM_FP32;   /* the plan layer's element types: f32, f64 */
    usim_infer_job j = {.scheme = USIM_INF_TP_DCP, .tp = 2, .dcp = 2, .prefill_cp = 1,
                        .prefill_method = USIM_PF_RING, .prompt = 100, .output = 8, .batch = 2, .gpus = 2};
    usim_infer_result r;
    ck_assert_int_eq(usim_infer_simulate(&p, &m, &j, &r), USIM_OK);
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = 2;
    a.seq = 104;
    a.heads = 4;
    a.kv_heads = 1;
    a.head_dim = 16;
    a.dtype = ULY_F32;
    uly_decode_volume v;
    for (int rank = 0; rank < 2; rank++) {
        ck_assert_int_eq(uly_plan_decode_volume(&a, ULY_DECODE_DCP, 2, rank, &v), ULY_OK);
        ck_assert_uint_eq(r.dec_merge_bytes[USIM_MG_Q_AG], v.sent[ULY_DEC_Q_AG]);
        ck_assert_uint_eq(r.dec_merge_bytes[USIM_MG_LSE_AG], v.sent[ULY_DEC_LSE_AG]);
        ck_assert_uint_eq(r.dec_merge_bytes[USIM_MG_O_RS], v.sent[ULY_DEC_O_RS]);
    }
    j.scheme = USIM_INF_HELIX;
    j.tp = 1;
    for (int64_t prompt = 16; prompt <= 4096; prompt *= 16) {
        j.prompt = prompt;
        ck_assert_int_eq(usim_infer_simulate(&p, &m, &j, &r), USIM_OK);
        ck_assert_int_eq(uly_plan_decode_volume(&a, ULY_DECODE_HELIX, 2, 0, &v), ULY_OK);
        ck_assert_uint_gt(v.sent[ULY_DEC_OL_A2A], 0);
        ck_assert_uint_eq(r.dec_merge_bytes[USIM_MG_OL_A2A], v.sent[ULY_DEC_OL_A2A]);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("infer");
    TCase *t = tcase_create("golden");
    tcase_add_test(t, test_prefill_ring);
    tcase_add_test(t, test_decode_dcp);
    tcase_add_test(t, test_rules);
    tcase_add_test(t, test_bytes_are_the_plans);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
