/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_longctx.c -- golden cases of the long-context techniques (tiled loss,
 * TiledMLP, activation / optimizer / parameter offload, head chunks): the
 * memory terms of doc/simulator.md ("Long context") on a small model with
 * round numbers, every expected byte count derived by hand below and
 * compared exactly; the binding limit; the extra MLP forward, the checkpoint
 * copies and the CPU Adam step in picoseconds; the bad combinations.
 *
 * The model (all cases): 4 layers, hidden h = 64, 4 heads of d = 16, 4 KV
 * heads, SwiGLU F = 128, vocab V = 256, untied embeddings, bf16 (e = 2), one
 * sequence of 1024 tokens; Ulysses on 2 GPUs of one node (sp 2, dp 1),
 * ZeRO-3, full recompute.  Rank 0 holds n = 512 tokens in the sequence
 * layout and 2 of the 4 heads (2 KV heads) over all 1024 tokens in the
 * attention layout.
 *
 *   A   = n h e          = 512 x 64 x 2           = 65536  (one hidden state)
 *   Q   = S hq_l d e     = 1024 x 2 x 16 x 2      = 65536  (q, o, dO, dQ; = K, V)
 *   lse = S hq_l 4       = 1024 x 2 x 4           = 8192
 *   saved attention = 2Q + 2KV + lse              = 270336
 *   attention backward peak = 5A (x, ln1, out, dy, d h1) + saved
 *       + dO + dQ + dK + dV + FA2's fp32 dQ accumulator 2Q + softmax_d (lse)
 *       + dO's all-to-all original (Ulysses, u = 2 > 1) + no GQA expansion
 *     = 327680 + 270336 + 7 x 65536 + 8192         = 1064960
 *   MLP backward peak = 7A + saved + MLP of one shard (4 F-wide tensors of
 *       ns tokens: gate, up, the down input, its gradient)
 *     untiled (ns = 512): 458752 + 270336 + 512 x 128 x 2 x 4 = 1253376
 *     4 shards (ns = 128): 458752 + 270336 + 131072           = 860160
 *   loss = 3A + LM head and its gradient 2 V h e + logits x (e + 4)
 *     untiled (512 tokens): 196608 + 65536 + 512 x 256 x 6    = 1048576
 *     tiled: ceil(512 / 64) = 8 chunks of 64 tokens: 196608 + 65536 + 98304 = 360448
 *   parameters: per layer 64 (64 + 128) + 64 x 64 + 3 x 64 x 128 + 4 x 64 = 41216;
 *     GPU: 4 x 41216 + 256 x 64 x 2 = 197632; ZeRO group Z = 2
 *     params 2 x 197632 / 2 = 197632, grads 197632, optimizer 12 x 197632 / 2 = 1185792
 *   buffers: current + prefetched layer 4 x 41216, one gradient bucket 2 x 41216 = 247296
 *     (the Ulysses communication buffers are inside the working set)
 *   checkpoints: 4 layers x A = 262144; resident without offload 3A = 196608
 *     (the layer's own one is in its working set), with offload A = 65536 (the prefetched one)
 *   host per GPU: optimizer 16 x 197632 / 2 = 1581056, parameters 2 x 197632 / 2 = 197632,
 *     checkpoints 262144; per node (2 GPUs) twice that.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "usim.h"

/* 1 TFLOP/s, 1 TB/s HBM, 1 GB/s NVLink, no shape terms; a host of 1 GB/s per
 * GPU per direction, 1 TFLOP/s and 0.3 TB/s. */
static usim_platform round_platform(void)
{
    usim_platform p;
    memset(&p, 0, sizeof p);
    strcpy(p.name, "round");
    p.gpus_per_node = 2;
    for (int t = 0; t < USIM_NDTYPE; t++)
        p.peak_flops[t] = 1e12;
    p.gemm_eff = p.attn_eff = p.attn_bwd_eff = 1;
    p.attn_causal_skip = 1;
    p.hbm_bytes = 1e12;
    p.hbm_Bps = 1e12;
    p.nvl_peak_Bps = 1e9;
    p.nvl_eff = 1;
    p.nic_peak_Bps = 1e8;
    p.nic_eff = 1;
    p.nvl_lat = 1000000;
    p.nic_lat = 5000000;
    p.oversub = 1;
    p.nvls_eff = 1;
    p.host_bytes = 1e12;
    p.host_link_peak_Bps = 1e9;
    p.host_link_eff = 1;
    p.host_cores = 8;
    p.host_flops = 1e12;
    p.host_cpu_eff = 1;
    p.host_mem_Bps = 3e11;
    return p;
}

static usim_model small_model(void)
{
    usim_model m;
    memset(&m, 0, sizeof m);
    strcpy(m.name, "small");
    m.layers = 4;
    m.hidden = 64;
    m.heads = 4;
    m.kv_heads = 4;
    m.ffn = 128;
    m.vocab = 256;
    m.seq = 1024;
    m.micro_batch = 1;
    m.global_batch = 1;
    m.dtype = USIM_BF16;
    m.gated_mlp = 1;
    m.tied_embeddings = 0;
    m.causal = 1;
    return m;
}

static usim_job lc_job(void)
{
    usim_job j;
    memset(&j, 0, sizeof j);
    j.method = ULY_METHOD_ULYSSES;
    j.gpus = 2;
    j.sp = 2;
    j.zero = 3;
    j.recompute = USIM_RC_FULL;
    j.a2a = USIM_A2A_DIRECT;
    return j;
}

/* Every term of the model, exactly (the values are integers in doubles). */
#define EQ(a, b) ck_assert_msg((a) == (b), "%s = %.17g, expected %.17g", #a, (double)(a), (double)(b))

START_TEST(test_all_offloaded_tiled)
{
    usim_platform p = round_platform();
    usim_model m = small_model();
    usim_job j = lc_job();
    j.tiled_loss = 1;
    j.tiled_mlp = 4;
    j.offload = USIM_OFFLOAD_ACT | USIM_OFFLOAD_OPTIM | USIM_OFFLOAD_PARAMS;
    usim_memory mem;
    int fits;
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j, &mem, &fits), USIM_OK);
    EQ(mem.params, 0);
    EQ(mem.grads, 0);
    EQ(mem.optim, 0);
    EQ(mem.buffers, 247296);
    EQ(mem.layer_ws, 1064960);   /* the attention peak: 4 shards keep the MLP's at 860160 */
    EQ(mem.loss_ws, 360448);
    EQ(mem.resident, 65536);
    /* total: resident + buffers + the larger working set */
    EQ(mem.total, 65536 + 247296 + 1064960);
    EQ(mem.host_node, 2 * (1581056 + 197632 + 262144));
    ck_assert_int_eq(mem.bind, USIM_BIND_NONE);
    ck_assert(fits);
    /* the binding limit: one byte less of host memory than is used */
    p.host_bytes = mem.host_node - 1;
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j, &mem, &fits), USIM_OK);
    ck_assert_int_eq(mem.bind, USIM_BIND_HOST);
    ck_assert(!fits);
    ck_assert_str_eq(usim_bind_name(mem.bind), "host memory");
    /* and HBM too */
    p.hbm_bytes = mem.total - 1;
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j, &mem, &fits), USIM_OK);
    ck_assert_int_eq(mem.bind, USIM_BIND_HBM | USIM_BIND_HOST);
    ck_assert_str_eq(usim_bind_name(mem.bind), "HBM + host memory");
    p.host_bytes = 1e12;
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j, &mem, &fits), USIM_OK);
    ck_assert_str_eq(usim_bind_name(mem.bind), "HBM");
    /* exactly at capacity it fits (<=) */
    p.hbm_bytes = mem.total;
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j, &mem, &fits), USIM_OK);
    ck_assert(fits);
    ck_assert_str_eq(usim_bind_name(mem.bind), "none");
}
END_TEST

START_TEST(test_tiled_loss_only)
{
    usim_platform p = round_platform();
    usim_model m = small_model();
    usim_job j = lc_job();
    j.tiled_loss = 1;
    usim_memory mem;
    int fits;
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j, &mem, &fits), USIM_OK);
    EQ(mem.params, 197632);
    EQ(mem.grads, 197632);
    EQ(mem.optim, 1185792);
    EQ(mem.layer_ws, 1253376);   /* the untiled MLP's backward is the peak */
    EQ(mem.loss_ws, 360448);
    EQ(mem.resident, 196608);
    EQ(mem.total, 197632 + 197632 + 1185792 + 196608 + 247296 + 1253376);
    EQ(mem.host_node, 0);
    /* untiled loss: the full logits, 512 x 256 x (2 + 4) */
    j.tiled_loss = 0;
    j.tiled_mlp = 4;   /* still long-context accounting */
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j, &mem, &fits), USIM_OK);
    EQ(mem.loss_ws, 1048576);
    EQ(mem.layer_ws, 1064960);
    EQ(mem.total, 197632 + 197632 + 1185792 + 196608 + 247296 + 1064960);
}
END_TEST

/* Head chunks K = 2 with 4 shards and the tiled loss: every attention-layout
 * term halves (Q = KV = 32768, lse = 4096, saved 135168):
 *   attention peak 327680 + 135168 + 7 x 32768 + 4096 = 696320
 *   MLP peak       458752 + 135168 + 131072           = 724992 (now the larger) */
START_TEST(test_head_chunks)
{
    usim_platform p = round_platform();
    usim_model m = small_model();
    usim_job j = lc_job();
    j.tiled_loss = 1;
    j.tiled_mlp = 4;
    j.head_chunks = 2;
    usim_memory mem;
    int fits;
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j, &mem, &fits), USIM_OK);
    EQ(mem.layer_ws, 724992);
    EQ(mem.total, 197632 + 197632 + 1185792 + 196608 + 247296 + 724992);
    /* TiledMLP auto: ceil(512 / 64) = 8 shards */
    ck_assert_int_eq(usim_tiled_mlp_shards(&(usim_job){.tiled_mlp = USIM_TILED_MLP_AUTO}, 512, 64), 8);
    ck_assert_int_eq(usim_tiled_mlp_shards(&(usim_job){.tiled_mlp = USIM_TILED_MLP_AUTO}, 513, 64), 9);
    ck_assert_int_eq(usim_tiled_mlp_shards(&(usim_job){.tiled_mlp = 0}, 512, 64), 0);
}
END_TEST

/*
 * Times (round platform: FLOPs / 1e12 and bytes / 1e12 are picoseconds, a
 * GEMM takes max(2 M N K, (M K + K N + M N) e) ps):
 *   TiledMLP, 4 shards of 128 rows: fc1 (128 x 256 x 64): 4194304 ps (its
 *   memory, 114688 ps, is less); fc2 (128 x 64 x 128): 2097152 ps; per layer
 *   4 x 6291456 = 25165824 ps; 4 layers: 100663296 ps.
 *   Checkpoint copies: A = 65536 B at 1 GB/s = 65536 ns each, one out in the
 *   forward and one back in the backward per layer: 8 x 65536 ns = 524288 ns.
 *   CPU Adam: the node's 2 x 98816 = 197632 parameters: 12 FLOPs each at
 *   1 TFLOP/s = 2371584 ps, 30 bytes each at 0.3 TB/s = 19763200 ps: the
 *   memory bound, 19763200 ps.
 */
START_TEST(test_times)
{
    usim_platform p = round_platform();
    usim_model m = small_model();
    usim_job j = lc_job();
    j.tiled_loss = 1;
    j.tiled_mlp = 4;
    j.offload = USIM_OFFLOAD_ACT | USIM_OFFLOAD_OPTIM;
    usim_sim *s = usim_sim_new(&p, 2);
    usim_result r;
    ck_assert_int_eq(usim_simulate(s, &m, &j, NULL, &r), USIM_OK);
    ck_assert_int_eq(llround(r.lc.tiled_mlp_s * 1e12), 100663296LL);
    ck_assert_int_eq(llround(r.lc.offload_copy_s * 1e12), 524288000LL);
    ck_assert_int_eq(llround(r.lc.cpu_adam_s * 1e12), 19763200LL);
    ck_assert_int_eq(r.lc.mlp_shards, 4);
    /* the same job without TiledMLP costs no extra forward */
    j.tiled_mlp = 0;
    ck_assert_int_eq(usim_simulate(s, &m, &j, NULL, &r), USIM_OK);
    ck_assert(r.lc.tiled_mlp_s == 0);
    usim_sim_free(s);
}
END_TEST

/* The longest sequence is bound by what grows first: with the checkpoints on
 * a small host and a huge HBM, host memory. */
START_TEST(test_max_seq_binds_on_host)
{
    usim_platform p = round_platform();
    usim_model m = small_model();
    usim_job j = lc_job();
    j.tiled_loss = 1;
    j.tiled_mlp = USIM_TILED_MLP_AUTO;
    j.offload = USIM_OFFLOAD_ACT | USIM_OFFLOAD_OPTIM;
    p.hbm_bytes = 1e15;
    p.host_bytes = 1e8;
    int64_t seq;
    int bind;
    ck_assert_int_eq(usim_max_seq_ex(&p, &m, &j, &seq, &bind), USIM_OK);
    ck_assert_int_eq(bind, USIM_BIND_HOST);
    ck_assert(seq > 0);
    usim_memory mem;
    int fits;
    m.seq = seq;
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j, &mem, &fits), USIM_OK);
    ck_assert(fits);
    m.seq = seq + 2;   /* one granule (sp) more */
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j, &mem, &fits), USIM_OK);
    ck_assert(!fits && mem.bind == USIM_BIND_HOST);
    /* with no host limit in reach, HBM binds */
    p.hbm_bytes = 1e8;
    p.host_bytes = 1e15;
    ck_assert_int_eq(usim_max_seq_ex(&p, &m, &j, &seq, &bind), USIM_OK);
    ck_assert_int_eq(bind, USIM_BIND_HBM);
}
END_TEST

/* Ring on the same 2 GPUs keeps its in-flight K, V blocks and dK, dV: 4 KV
 * with KV = n hkv_l d e = 512 x 4 x 16 x 2 = 65536 -> 262144, plus the ZeRO
 * buffers 247296; Ulysses has none of its own (its staging is inside the
 * working set). */
START_TEST(test_ring_buffers)
{
    usim_platform p = round_platform();
    usim_model m = small_model();
    usim_job j = lc_job();
    j.method = ULY_METHOD_RING;
    j.tiled_loss = 1;
    usim_memory mem;
    int fits;
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j, &mem, &fits), USIM_OK);
    EQ(mem.buffers, 262144 + 247296);
    j.method = ULY_METHOD_ULYSSES;
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j, &mem, &fits), USIM_OK);
    EQ(mem.buffers, 247296);
}
END_TEST

START_TEST(test_bad_combinations)
{
    usim_platform p = round_platform();
    usim_model m = small_model();
    usim_memory mem;
    int fits;
    usim_job j = lc_job();
    j.method = ULY_METHOD_RING;
    j.head_chunks = 2;   /* ring holds every head */
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j, &mem, &fits), USIM_EINVAL);
    ck_assert(strstr(usim_last_error(), "head chunks apply to ulysses and usp") != NULL);
    j = lc_job();
    j.recompute = USIM_RC_SELECTIVE;
    j.offload = USIM_OFFLOAD_ACT;
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j, &mem, &fits), USIM_EINVAL);
    j = lc_job();
    j.zero = 2;
    j.offload = USIM_OFFLOAD_OPTIM | USIM_OFFLOAD_PARAMS;
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j, &mem, &fits), USIM_EINVAL);
    j = lc_job();
    j.offload = USIM_OFFLOAD_PARAMS;   /* without the optimizer */
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j, &mem, &fits), USIM_EINVAL);
    j = lc_job();
    j.offload = USIM_OFFLOAD_ACT;
    p.host_bytes = 0;   /* no host described */
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j, &mem, &fits), USIM_EINVAL);
    ck_assert(strstr(usim_last_error(), "describes no host") != NULL);
    /* a job without any technique is unchanged by the host: none used */
    j = lc_job();
    ck_assert_int_eq(usim_memory_estimate(&p, &m, &j, &mem, &fits), USIM_OK);
    EQ(mem.host_node, 0);
}
END_TEST

static Suite *make_longctx_suite(void)
{
    Suite *s = suite_create("longctx");
    TCase *tc = tcase_create("golden");
    tcase_add_test(tc, test_all_offloaded_tiled);
    tcase_add_test(tc, test_tiled_loss_only);
    tcase_add_test(tc, test_head_chunks);
    tcase_add_test(tc, test_times);
    tcase_add_test(tc, test_max_seq_binds_on_host);
    tcase_add_test(tc, test_ring_buffers);
    tcase_add_test(tc, test_bad_combinations);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(make_longctx_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
