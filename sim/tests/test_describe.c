/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_describe.c -- Check suite of platform and model descriptions: every
 * shipped preset loads with the documented numbers; bad files fail with the
 * file, line, column and key in the message; head_dim, biases and q/k norms
 * in the parameters, FLOPs and sequence-parallel bytes, derived by hand.
 */
#define _POSIX_C_SOURCE 200809L   /* mkdtemp */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "infer.h"
#include "usim.h"

#define DATA USIM_SRC_PRESETS "/../tests/data/"

static void preset(const char *kind, const char *name, char *path)
{
    ck_assert_int_eq(usim_preset_path(kind, name, path, 1024), USIM_OK);
}

START_TEST(test_platform_presets)
{
    static const char *const names[] = {"dgx-a100-40g", "dgx-a100-80g", "dgx-h100",
                                        "dgx-h100-2to1", "a100-pcie-4", "dgx-h200",
                                        "l40s-pcie-8", "gb200-nvl72", "mi300x-8"};
    char path[1024];
    usim_platform p;
    for (int i = 0; i < 9; i++) {
        preset("platforms", names[i], path);
        ck_assert_msg(usim_platform_load(path, &p) == USIM_OK, "%s: %s", names[i], usim_last_error());
        ck_assert_str_eq(p.name, names[i]);
        ck_assert(usim_nvl_Bps(&p) > 0 && usim_nic_Bps(&p) > 0 && p.hbm_bytes > 0);
    }
    preset("platforms", "dgx-a100-40g", path);
    usim_platform_load(path, &p);
    ck_assert_int_eq(p.gpus_per_node, 8);
    ck_assert(fabs(p.peak_flops[USIM_BF16] - 312e12) < 1);
    ck_assert(fabs(usim_nvl_Bps(&p) - 300e9 * 0.77) < 1);
    ck_assert(fabs(usim_nic_Bps(&p) - 25e9 * 0.96) < 1);
    ck_assert(fabs(p.hbm_bytes - 40.0 * 1073741824) < 1);
    ck_assert_int_eq(p.nvl_lat, 3000000);
    preset("platforms", "dgx-h100", path);
    usim_platform_load(path, &p);
    ck_assert(fabs(p.peak_flops[USIM_BF16] - 989e12) < 1);
    ck_assert(fabs(usim_nic_Bps(&p) - 50e9 * 0.96) < 1);
    ck_assert_int_eq(usim_platform_domain(&p), 8);
    ck_assert_int_eq(p.full_mesh, 0);
    /* an NVLink domain of 72 over nodes of 4; a full mesh of 7 peer links */
    preset("platforms", "gb200-nvl72", path);
    ck_assert_msg(usim_platform_load(path, &p) == USIM_OK, "%s", usim_last_error());
    ck_assert_int_eq(p.gpus_per_node, 4);
    ck_assert_int_eq(p.nvl_domain, 72);
    ck_assert_int_eq(usim_platform_domain(&p), 72);
    ck_assert(fabs(usim_nvl_Bps(&p) - 900e9 * 0.8) < 1);
    preset("platforms", "mi300x-8", path);
    ck_assert_msg(usim_platform_load(path, &p) == USIM_OK, "%s", usim_last_error());
    ck_assert_int_eq(p.full_mesh, 1);
    ck_assert(fabs(usim_mesh_link_Bps(&p) - 64e9 * 0.8) < 1);
    ck_assert(fabs(usim_nvl_Bps(&p) - 7 * 64e9 * 0.8) < 1);
    ck_assert_int_eq(usim_platform_domain(&p), 8);
}
END_TEST

START_TEST(test_model_presets)
{
    char path[1024];
    usim_model m;
    preset("models", "gpt-7b", path);
    ck_assert_int_eq(usim_model_load(path, &m), USIM_OK);
    ck_assert_int_eq(m.layers, 32);
    ck_assert_int_eq(m.hidden, 4096);
    ck_assert_int_eq(m.heads, 32);
    ck_assert_int_eq(m.kv_heads, 32);
    double P = usim_model_params(&m);
    ck_assert_msg(P > 6.5e9 && P < 6.9e9, "gpt-7b params %g", P);
    preset("models", "llama-3-8b", path);
    ck_assert_int_eq(usim_model_load(path, &m), USIM_OK);
    ck_assert_int_eq(m.kv_heads, 8);
    ck_assert_int_eq(m.ffn, 14336);
    ck_assert_int_eq(m.vocab, 128256);
    ck_assert_int_eq(m.gated_mlp, 1);
    P = usim_model_params(&m);
    ck_assert_msg(fabs(P - 8.03e9) < 0.02e9, "llama-3-8b params %g", P);
    preset("models", "gpt-1.2b", path);
    ck_assert_int_eq(usim_model_load(path, &m), USIM_OK);
    P = usim_model_params(&m);
    ck_assert_msg(P > 1.1e9 && P < 1.4e9, "gpt-1.2b params %g", P);
    preset("models", "gpt-30b", path);
    ck_assert_int_eq(usim_model_load(path, &m), USIM_OK);
    P = usim_model_params(&m);
    ck_assert_msg(P > 28e9 && P < 31e9, "gpt-30b params %g", P);
}
END_TEST

START_TEST(test_preset_lookup)
{
    char path[1024];
    ck_assert_int_eq(usim_preset_path("platforms", "no-such-thing", path, sizeof path), USIM_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "no-such-thing"));
    ck_assert_int_eq(usim_preset_path("platforms", "/nonexistent/x.json", path, sizeof path),
                     USIM_ENOTFOUND);
    ck_assert_int_eq(usim_preset_path("platforms", DATA "tiny-platform.json", path, sizeof path), USIM_OK);
}
END_TEST

static void expect_error(const char *file, int status, const char *const *needles)
{
    usim_platform p;
    int rc = usim_platform_load(file, &p);
    ck_assert_int_eq(rc, status);
    const char *msg = usim_last_error();
    for (int i = 0; needles[i]; i++)
        ck_assert_msg(strstr(msg, needles[i]) != NULL, "'%s' not in '%s'", needles[i], msg);
}

START_TEST(test_bad_platforms)
{
    expect_error(DATA "bad-syntax.json", USIM_EFORMAT,
                 (const char *[]){"bad-syntax.json:4:", "syntax", NULL});
    expect_error(DATA "missing-key.json", USIM_EFORMAT,
                 (const char *[]){"missing-key.json:15:", "inter_node.nic_bw_Gbps", "missing", NULL});
    expect_error(DATA "wrong-type.json", USIM_EFORMAT,
                 (const char *[]){"wrong-type.json:8:5:", "gpu.hbm_GiB", "expected a number", NULL});
    expect_error(DATA "zero-bw.json", USIM_EFORMAT,
                 (const char *[]){"zero-bw.json:16:5:", "inter_node.nic_bw_Gbps", "> 0", NULL});
    expect_error(DATA "typo-key.json", USIM_EFORMAT,
                 (const char *[]){"typo-key.json:13:", "inter_node.spine_oversubscribtion", "unknown key",
                                  "nearest valid key: 'spine_oversubscription'", NULL});
    expect_error(DATA "no-such-file.json", USIM_ENOTFOUND, (const char *[]){"no-such-file", NULL});
    /* topology keys: a full mesh names its per-link rate, a domain whole nodes */
    expect_error(DATA "mesh-with-bw.json", USIM_EFORMAT,
                 (const char *[]){"mesh-with-bw.json:11:", "intra_node.bw_GBps_per_dir",
                                  "link_bw_GBps_per_dir", NULL});
    expect_error(DATA "bad-domain.json", USIM_EFORMAT,
                 (const char *[]){"bad-domain.json:11:", "intra_node.nvlink_domain_gpus",
                                  "multiple of gpus_per_node (4)", "got 6", NULL});
    expect_error(DATA "bad-topology.json", USIM_EFORMAT,
                 (const char *[]){"intra_node.topology", "\"switch\" or \"full_mesh\"", "fullmesh", NULL});
    expect_error(DATA "mesh-nvls.json", USIM_EFORMAT,
                 (const char *[]){"intra_node.nvls", "no switch", NULL});
}
END_TEST

START_TEST(test_bad_models)
{
    usim_model m;
    ck_assert_int_eq(usim_model_load(DATA "model-bad-heads.json", &m), USIM_EFORMAT);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "model-bad-heads.json:5:3: key 'heads'"));
    /* a platform file is not a model: its first key a model does not know is named */
    ck_assert_int_eq(usim_model_load(DATA "tiny-platform.json", &m), USIM_EFORMAT);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "tiny-platform.json:4:3: key 'gpus_per_node': unknown key"));
    /* a misspelled key: file, line, column, the key and the nearest valid key */
    ck_assert_int_eq(usim_model_load(DATA "model-typo.json", &m), USIM_EFORMAT);
    ck_assert_ptr_nonnull(strstr(usim_last_error(),
                                 "model-typo.json:7:3: key 'kv_head': unknown key (nearest valid key: 'kv_heads'"));
}
END_TEST

/* A file holding text, for the readers (HuggingFace configs) */
static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fputs(text, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
}

/* Parameter counts with head_dim, biases and q/k norms, derived by hand:
 *
 * qwen3-32b preset (h 5120, 64 heads of 128: hq 8192, KV 8 x 128 = 1024,
 * F 25600, V 151936, untied, q_norm/k_norm): one layer 5120 (8192 + 2048) +
 * 8192 x 5120 + 3 x 5120 x 25600 + 4 x 5120 + 2 x 128 = 52428800 + 41943040
 * + 393216000 + 20480 + 256 = 487608576; 64 layers 31206948864; embeddings
 * 2 x 151936 x 5120 = 1555824640; final norm 10240: 32762783744.
 *
 * Qwen2.5-7B config (h 3584, 28 heads of 128, KV 512, F 18944, V 152064,
 * untied, q/k/v biases): one layer 3584 x 4608 + 3584^2 + 3 x 3584 x 18944 +
 * 4 x 3584 + 4608 = 16515072 + 12845056 + 203685888 + 14336 + 4608 =
 * 233064960; 28 layers 6525818880; embeddings 1089994752; final 7168:
 * 7615820800 (the model card: 7.61B).
 *
 * Qwen3 with no head_dim (Qwen3Config's 128) on h 1024, 16 heads, 8 KV, F
 * 3072, V 1000, 2 layers, untied (Qwen3Config's default): hq 2048, hkv 1024;
 * one layer 1024 x 4096 + 2048 x 1024 + 3 x 1024 x 3072 + 4096 + 256 =
 * 4194304 + 2097152 + 9437184 + 4352 = 15732992; 2 layers 31465984;
 * embeddings 2 x 1000 x 1024 = 2048000; final 2048: 33516032.
 *
 * Llama-3.1-8B shape with attention_bias true: 8030527488 (cli_hfconfig.sh)
 * + 32 x (4096 + 2 x 1024 + 4096) = 327680: 8030855168. */
START_TEST(test_head_dim_params)
{
    char path[1024], dir[] = "/tmp/usim-hd-XXXXXX";
    usim_model m;
    preset("models", "qwen3-32b", path);
    ck_assert_int_eq(usim_model_load(path, &m), USIM_OK);
    ck_assert_int_eq(m.head_dim, 128);
    ck_assert_int_eq(usim_model_head_dim(&m), 128);
    ck_assert_int_eq(m.qk_norm, 1);
    ck_assert_int_eq(m.qkv_bias, 0);
    ck_assert(usim_model_params(&m) == 32762783744.0);
    ck_assert(usim_model_layer_params(&m) == 487608576.0);
    /* within 0.5 % of the model card's 32.8B */
    ck_assert(fabs(usim_model_params(&m) / 32.8e9 - 1) < 0.005);

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/config.json", dir);
    write_text(path, "{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", \"hidden_size\": 3584,\n"
               " \"intermediate_size\": 18944, \"num_hidden_layers\": 28, \"num_attention_heads\": 28,\n"
               " \"num_key_value_heads\": 4, \"vocab_size\": 152064, \"hidden_act\": \"silu\",\n"
               " \"tie_word_embeddings\": false, \"use_sliding_window\": false, \"torch_dtype\": \"bfloat16\"}\n");
    ck_assert_int_eq(usim_model_load(path, &m), USIM_OK);
    ck_assert_int_eq(m.qkv_bias, 1);
    ck_assert_int_eq(m.o_bias, 0);
    ck_assert_int_eq(m.qk_norm, 0);
    ck_assert_int_eq(usim_model_head_dim(&m), 128);
    ck_assert(usim_model_params(&m) == 7615820800.0);
    ck_assert(fabs(usim_model_params(&m) / 7.61e9 - 1) < 0.005);

    write_text(path, "{\"architectures\": [\"Qwen3ForCausalLM\"], \"hidden_size\": 1024, \"intermediate_size\": 3072,\n"
               " \"num_hidden_layers\": 2, \"num_attention_heads\": 16, \"num_key_value_heads\": 8, \"vocab_size\": 1000}\n");
    ck_assert_int_eq(usim_model_load(path, &m), USIM_OK);
    ck_assert_int_eq(m.head_dim, 128);
    ck_assert_int_eq(m.qk_norm, 1);
    ck_assert(usim_model_params(&m) == 33516032.0);

    write_text(path, "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 4096, \"intermediate_size\": 14336,\n"
               " \"num_hidden_layers\": 32, \"num_attention_heads\": 32, \"num_key_value_heads\": 8,\n"
               " \"vocab_size\": 128256, \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\",\n"
               " \"attention_bias\": true}\n");
    ck_assert_int_eq(usim_model_load(path, &m), USIM_OK);
    ck_assert_int_eq(m.qkv_bias, 1);
    ck_assert_int_eq(m.o_bias, 1);
    ck_assert(usim_model_params(&m) == 8030855168.0);
    /* head_dim given equal to hidden / heads: the same model as none given */
    usim_model n = m;
    n.head_dim = 0;
    ck_assert(usim_model_params(&n) == usim_model_params(&m));
    remove(path);
    rmdir(dir);
}
END_TEST

/* A test model with a head dimension of its own: 2 layers, h 1024, 16 heads
 * of 128 (hq 2048), KV heads kv, F 3072, V 1000, bf16, causal, SwiGLU. */
static usim_model wide_model(int64_t kv, int64_t seq)
{
    usim_model m;
    memset(&m, 0, sizeof m);
    strcpy(m.name, "wide");
    m.layers = 2;
    m.hidden = 1024;
    m.heads = 16;
    m.kv_heads = kv;
    m.head_dim = 128;
    m.ffn = 3072;
    m.vocab = 1000;
    m.seq = seq;
    m.micro_batch = m.global_batch = 1;
    m.dtype = USIM_BF16;
    m.causal = 1;
    m.gated_mlp = 1;
    return m;
}

/* Model FLOPs (usim_model_flops, doc/simulator.md) with hq = 2048, hkv = 1024
 * (8 KV heads), s = 1024, causal pairs 1024 x 1025 / 2 = 524800:
 *   QKV 2 s h (hq + 2 hkv) = 2 x 1024 x 1024 x 4096  =  8589934592
 *   out 2 s h hq           = 2 x 1024 x 1024 x 2048  =  4294967296
 *   MLP 6 s h F            = 6 x 1024 x 1024 x 3072  = 19327352832
 *   attention 4 d H pairs  = 4 x 128 x 16 x 524800   =  4299161600
 *   one layer 36511416320; 2 layers 73022832640; LM head 2 s h V = 2097152000
 *   x 3 (forward and backward): 225359953920.
 * The same model with head_dim 64 = h / heads: 2 s h (1024 + 1024) +
 * 2 s h 1024 + 19327352832 + 4 x 64 x 16 x 524800 = 4294967296 + 2147483648
 * + 19327352832 + 2149580800 = 27919384576; (2 x 27919384576 + 2097152000) x 3
 * = 173807763456. */
START_TEST(test_head_dim_flops)
{
    usim_model m = wide_model(8, 1024);
    ck_assert(usim_model_flops(&m, 1) == 225359953920.0);
    m.head_dim = 64;
    ck_assert(usim_model_flops(&m, 1) == 173807763456.0);
    m.head_dim = 0;
    ck_assert(usim_model_flops(&m, 1) == 173807763456.0);
}
END_TEST

/* Sequence-parallel bytes with hq = 2048 on h = 1024 (16 KV heads, hkv 2048),
 * N = 65536, P = 8, bf16: Ulysses' all-to-alls hand (P-1)/P of the rank's
 * N/P tokens of q, k, v and o: (2 hq + 2 hkv) N/P e (P-1)/P =
 * 8192 x 8192 x 2 x 7/8 = 117440512 per direction; ring: 2 (P-1) N/P hkv e
 * = 2 x 7 x 8192 x 2048 x 2 = 469762048 forward and (4 (P-1) + 2) N/P hkv e
 * = 30 x 8192 x 4096 = 1006632960 backward.  The simulator's transfers are
 * the closed forms. */
START_TEST(test_head_dim_sp_bytes)
{
    char path[1024];
    usim_platform p;
    preset("platforms", "dgx-a100-40g", path);
    ck_assert_int_eq(usim_platform_load(path, &p), USIM_OK);
    usim_model m = wide_model(16, 65536);
    usim_sim *s = usim_sim_new(&p, 8);
    ck_assert_ptr_nonnull(s);
    usim_job j;
    memset(&j, 0, sizeof j);
    j.gpus = 8;
    j.sp = 8;
    j.zero = 3;
    j.recompute = USIM_RC_FULL;
    double sent[2], ana[2];
    j.method = ULY_METHOD_ULYSSES;
    ck_assert_int_eq(usim_sp_layer_bytes(s, &m, &j, 3, sent), USIM_OK);
    ck_assert_msg(sent[0] == 117440512.0 && sent[1] == 117440512.0, "ulysses %g %g", sent[0], sent[1]);
    ck_assert_int_eq(usim_analytic_sp_bytes(&m, &j, 3, ana), USIM_OK);
    ck_assert(ana[0] == sent[0] && ana[1] == sent[1]);
    j.method = ULY_METHOD_RING;
    ck_assert_int_eq(usim_sp_layer_bytes(s, &m, &j, 0, sent), USIM_OK);
    ck_assert_msg(sent[0] == 469762048.0 && sent[1] == 1006632960.0, "ring %g %g", sent[0], sent[1]);
    ck_assert_int_eq(usim_analytic_sp_bytes(&m, &j, 0, ana), USIM_OK);
    ck_assert(ana[0] == sent[0] && ana[1] == sent[1]);
    usim_sim_free(s);
}
END_TEST

/* Model files: head_dim lets the heads not divide hidden; without it they must. */
START_TEST(test_head_dim_model_file)
{
    char dir[] = "/tmp/usim-hd-XXXXXX", path[1024];
    usim_model m;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/m.json", dir);
    write_text(path, "{\"name\": \"odd\", \"layers\": 2, \"hidden\": 1000, \"heads\": 16, \"kv_heads\": 8,\n"
               " \"head_dim\": 64, \"ffn_hidden\": 4000, \"vocab\": 1000, \"seq_tokens\": 4096,\n"
               " \"qkv_bias\": true, \"o_bias\": true, \"qk_norm\": true}\n");
    ck_assert_int_eq(usim_model_load(path, &m), USIM_OK);
    ck_assert_int_eq(usim_model_head_dim(&m), 64);
    /* one layer: 1000 (1024 + 1024) + 1024 x 1000 + 2 x 1000 x 4000 + 4000
     * + (1024 + 1024) + 1000 + 128 = 2048000 + 1024000 + 8000000 + 4000 +
     * 2048 + 1000 + 128 = 11079176; 2 layers 22158352; tied 1000 x 1000;
     * final 2000: 23160352 */
    ck_assert(usim_model_params(&m) == 23160352.0);
    write_text(path, "{\"name\": \"odd\", \"layers\": 2, \"hidden\": 1000, \"heads\": 16, \"kv_heads\": 8,\n"
               " \"ffn_hidden\": 4000, \"vocab\": 1000, \"seq_tokens\": 4096}\n");
    ck_assert_int_eq(usim_model_load(path, &m), USIM_EFORMAT);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "key 'heads': hidden (1000) must be a multiple of heads (16)"));
    write_text(path, "{\"name\": \"odd\", \"layers\": 2, \"hidden\": 1024, \"heads\": 16, \"head_dim\": 0,\n"
               " \"ffn_hidden\": 4000, \"vocab\": 1000, \"seq_tokens\": 4096}\n");
    ck_assert_int_eq(usim_model_load(path, &m), USIM_EFORMAT);
    ck_assert_ptr_nonnull(strstr(usim_last_error(), "key 'head_dim'"));
    remove(path);
    rmdir(dir);
}
END_TEST

/* Inference of qwen3-32b on TP 8 (infer.c): per GPU 64 / 8 = 8 query heads
 * and 8 / 8 = 1 KV head of head_dim 128.  One token of context: 64 layers x
 * K, V x 1 x 128 x 2 B = 32768 B per GPU (Qwen3-32B's 2 x 8 x 128 x 2 x 64 =
 * 262144 B a token over 8 GPUs); with hidden / heads = 80 it would be 20480.
 * Weights per GPU: a layer 5120 x (8 + 2) x 128 + 8 x 128 x 5120 + 3 x 25600
 * / 8 x 5120 = 6553600 + 5242880 + 49152000 = 60948480; 64 layers
 * 3900702720; embeddings 2 x 151936 / 8 x 5120 = 194478080; x 2 B:
 * 8190361600. */
START_TEST(test_head_dim_infer)
{
    char path[1024];
    usim_platform p;
    usim_model m;
    preset("platforms", "dgx-h100", path);
    ck_assert_int_eq(usim_platform_load(path, &p), USIM_OK);
    preset("models", "qwen3-32b", path);
    ck_assert_int_eq(usim_model_load(path, &m), USIM_OK);
    usim_infer_job j = {.scheme = USIM_INF_TP, .tp = 8, .dcp = 1, .prefill_cp = 1, .prefill_method = USIM_PF_RING,
                        .prompt = 4096, .output = 256, .batch = 1, .gpus = 8};
    usim_infer_result r;
    ck_assert_int_eq(usim_infer_simulate(&p, &m, &j, &r), USIM_OK);
    ck_assert_msg(r.kv_bytes_per_token == 32768.0, "KV bytes per token %g", r.kv_bytes_per_token);
    ck_assert_msg(r.weights == 8190361600.0, "weights %g", r.weights);
}
END_TEST

static Suite *make_describe_suite(void)
{
    Suite *s = suite_create("describe");
    TCase *tc = tcase_create("json");
    tcase_add_test(tc, test_platform_presets);
    tcase_add_test(tc, test_model_presets);
    tcase_add_test(tc, test_preset_lookup);
    tcase_add_test(tc, test_bad_platforms);
    tcase_add_test(tc, test_bad_models);
    tcase_add_test(tc, test_head_dim_params);
    tcase_add_test(tc, test_head_dim_flops);
    tcase_add_test(tc, test_head_dim_sp_bytes);
    tcase_add_test(tc, test_head_dim_model_file);
    tcase_add_test(tc, test_head_dim_infer);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(make_describe_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
