#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# cli_hfconfig.sh -- ulysses-sim --model reads a HuggingFace config.json
# (sim/hfconfig.c): the shape of each supported architecture, MoE refused by
# name, an unknown architecture refused (exit 2), a head_dim that is not
# hidden / heads modelled (Qwen3), unknown keys and uncounted biases warned
# by name, --seq required; and the parameter counts of the published
# config.json files of Llama-3.1-8B, Llama-3.1-70B, Qwen2.5-7B and Qwen3-32B,
# derived by hand below and held within 0.5 % of their model cards.
set -u
: "${top_builddir:=../..}" "${top_srcdir:=../..}"
SIM="$top_builddir/ulysses-sim"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/p/models" "$tmp/e" "$tmp/Llama-3.1-8B"
# the configs below are listed by 'presets' beside the shipped ones
ULYSSES_SIM_PRESETS="$tmp/p"; export ULYSSES_SIM_PRESETS
fail=0
check() { # description, then a command that must succeed
    d="$1"; shift
    if "$@"; then echo "ok: $d"; else echo "FAIL: $d"; fail=1; fi
}
# refuse "pattern" file [options]: exit 2, the pattern on stderr, nothing on stdout
refuse() {
    pat="$1"; shift
    "$SIM" --gpus 8 --method ulysses --model "$@" > "$tmp/out" 2> "$tmp/err"
    st=$?
    if [ $st -ne 2 ]; then echo "FAIL: $*: exit $st, expected 2"; cat "$tmp/err"; fail=1; return; fi
    if ! grep -q -- "$pat" "$tmp/err"; then echo "FAIL: $*: '$pat' not in: $(cat "$tmp/err")"; fail=1; return; fi
    if [ -s "$tmp/out" ]; then echo "FAIL: $*: wrote to stdout"; fail=1; return; fi
    echo "ok: $* -> $(cat "$tmp/err")"
}

# --- Llama-3.1-8B, the keys of its published config.json
# (https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json)
cat > "$tmp/Llama-3.1-8B/config.json" << 'EOF'
{
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": 128001,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
}
EOF
cp "$tmp/Llama-3.1-8B/config.json" "$tmp/p/models/hf-llama31-8b.json"
# Parameters as usim_model_params counts them (h = 4096, head dim 4096 / 32 =
# 128, KV width 8 x 128 = 1024, F = 14336, V = 128256, untied):
#   attention  h (h + 2 x 1024) + h^2 = 25165824 + 16777216 =  41943040
#   MLP        3 h F                                          = 176160768
#   norms      4 h                                            =     16384
#   one layer                                                   218120192
#   32 layers  6979846144; embeddings 2 V h = 1050673152; final norm 2 h = 8192
#   total      8030527488 = 8.03e9 (Meta's model card: 8.03B; the exact
#   8030261248 has RMSNorm's 2 h per layer and h at the end: 266240 fewer)
"$SIM" presets > "$tmp/list" 2> "$tmp/list.err"
check "presets lists the Llama-3.1-8B config: 8.03B, 32 x 4096, 32 heads (8 KV), ffn 14336, vocab 128256" \
    grep -q "hf-llama31-8b .*8.03B params, 32 layers, hidden 4096, 32 heads (8 KV), ffn 14336, vocab 128256" "$tmp/list"
# llama-3.1-70b (h = 8192, KV width 1024, F = 28672, V = 128256, untied):
#   attention 8192 x 10240 + 8192^2 = 150994944; MLP 3 x 8192 x 28672 = 704643072;
#   norms 32768; one layer 855670784; 80 layers 68453662720; embeddings
#   2 x 128256 x 8192 = 2101346304; final norm 16384; total 70555025408 = 70.56e9
#   (Meta: 70.6B; without the norms' surplus 80 x 16384 + 8192: 70553706496)
check "llama-3.1-70b preset: 70.56B params, 80 x 8192, 64 heads (8 KV), ffn 28672" \
    grep -q "llama-3.1-70b .*70.56B params, 80 layers, hidden 8192, 64 heads (8 KV), ffn 28672, vocab 128256" "$tmp/list"
# within NAME CARD: the count 'presets' prints for NAME is within 0.5 % of the
# model card's CARD (billions)
within() {
    awk -v n="$1" -v c="$2" '$1 == n { v = $2; sub(/B$/, "", v); d = (v - c) / c; if (d < 0) d = -d;
        found = 1; ok = d <= 0.005 } END { exit !(found && ok) }' "$tmp/list"
}
check "Llama-3.1-8B config: 8.03B, within 0.5 % of Meta's 8.03B" within hf-llama31-8b 8.03
# --- Llama-3.1-70B, its published config.json
# (https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json); its
# count is the llama-3.1-70b preset's below: 70555025408
cat > "$tmp/p/models/hf-llama31-70b.json" << 'EOF'
{
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": 128001,
  "hidden_act": "silu",
  "hidden_size": 8192,
  "initializer_range": 0.02,
  "intermediate_size": 28672,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 64,
  "num_hidden_layers": 80,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
}
EOF
# --- Qwen2.5-7B, its published config.json
# (https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json); Qwen2's q/k/v
# projections carry biases (modeling_qwen2.py, Qwen2Attention: bias=True).
# h = 3584, 28 heads of 128, KV width 4 x 128 = 512, F = 18944, V = 152064, untied:
#   attention  h (h + 2 x 512) + h^2 = 16515072 + 12845056 =  29360128
#   MLP        3 h F                                       = 203685888
#   norms 4 h = 14336; q/k/v biases 3584 + 2 x 512 = 4608
#   one layer  233064960; 28 layers 6525818880
#   embeddings 2 V h = 1089994752; final norm 2 h = 7168
#   total      7615820800 = 7.62e9 (the model card: 7.61B, +0.08 %; the exact
#   7615616512 has RMSNorm's h, not 2 h, per norm: 28 x 7168 + 3584 = 204288 fewer)
cat > "$tmp/p/models/hf-qwen25-7b.json" << 'EOF'
{
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151643,
  "hidden_act": "silu",
  "hidden_size": 3584,
  "initializer_range": 0.02,
  "intermediate_size": 18944,
  "max_position_embeddings": 131072,
  "max_window_layers": 28,
  "model_type": "qwen2",
  "num_attention_heads": 28,
  "num_hidden_layers": 28,
  "num_key_value_heads": 4,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 131072,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.1",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 152064
}
EOF
# --- Qwen3-32B, its published config.json
# (https://huggingface.co/Qwen/Qwen3-32B/blob/main/config.json): 64 heads of 128,
# an attention 8192 wide on hidden 5120; q_norm and k_norm of head_dim in every
# layer (modeling_qwen3.py, Qwen3Attention).  h = 5120, hq = 8192, KV width
# 8 x 128 = 1024, F = 25600, V = 151936, untied:
#   attention  h (hq + 2 x 1024) + hq h = 52428800 + 41943040 =  94371840
#   MLP        3 h F                                          = 393216000
#   norms 4 h = 20480; q_norm + k_norm 2 x 128 = 256
#   one layer  487608576; 64 layers 31206948864
#   embeddings 2 V h = 1555824640; final norm 2 h = 10240
#   total      32762783744 = 32.76e9 (the model card: 32.8B, -0.11 %; 31.2B
#   without the embeddings: 31206948864 + 10240 = 31.21e9)
cat > "$tmp/p/models/hf-qwen3-32b.json" << 'EOF'
{
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 5120,
  "initializer_range": 0.02,
  "intermediate_size": 25600,
  "max_position_embeddings": 40960,
  "max_window_layers": 64,
  "model_type": "qwen3",
  "num_attention_heads": 64,
  "num_hidden_layers": 64,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
}
EOF
"$SIM" presets > "$tmp/list" 2> "$tmp/list.err"
check "Llama-3.1-70B config: 70.56B, 80 x 8192, 64 heads (8 KV), ffn 28672" \
    grep -q "hf-llama31-70b .*70.56B params, 80 layers, hidden 8192, 64 heads (8 KV), ffn 28672, vocab 128256" "$tmp/list"
check "Llama-3.1-70B config: within 0.5 % of Meta's 70.6B" within hf-llama31-70b 70.6
check "Qwen2.5-7B config: 7.62B, 28 x 3584, 28 heads (4 KV), ffn 18944, vocab 152064" \
    grep -q "hf-qwen25-7b .*7.62B params, 28 layers, hidden 3584, 28 heads (4 KV), ffn 18944, vocab 152064" "$tmp/list"
check "Qwen2.5-7B config: within 0.5 % of Qwen's 7.61B" within hf-qwen25-7b 7.61
check "Qwen3-32B config: 32.76B, 64 x 5120, 64 heads (8 KV), ffn 25600" \
    grep -q "hf-qwen3-32b .*32.76B params, 64 layers, hidden 5120, 64 heads (8 KV), ffn 25600, vocab 151936" "$tmp/list"
check "Qwen3-32B config: within 0.5 % of Qwen's 32.8B" within hf-qwen3-32b 32.8
ULYSSES_SIM_PRESETS="$top_srcdir/sim/presets" "$SIM" presets > "$tmp/shipped" 2>&1
check "qwen3-32b preset: 32.76B as the config" \
    grep -q "qwen3-32b .*32.76B params, 64 layers, hidden 5120, 64 heads (8 KV), ffn 25600, vocab 151936" "$tmp/shipped"
# the config and the preset are one model: the same run to the last digit
"$SIM" --model "$tmp/p/models/hf-qwen3-32b.json" --seq 32K --global-batch 8 --gpus 64 --platform dgx-h100 \
    --method ulysses --format json > "$tmp/q3cfg" 2> "$tmp/q3cfg.err"
check "Qwen3-32B config runs (head_dim 128, not 5120 / 64)" test $? -eq 0
check "Qwen3-32B config: no warning" test ! -s "$tmp/q3cfg.err"
ULYSSES_SIM_PRESETS="$top_srcdir/sim/presets" "$SIM" --model qwen3-32b --gpus 64 --platform dgx-h100 \
    --method ulysses --format json > "$tmp/q3pre" 2>&1
sed 's/"model": "[^"]*"/"model": ""/' "$tmp/q3cfg" > "$tmp/q3cfg.n"
sed 's/"model": "[^"]*"/"model": ""/' "$tmp/q3pre" > "$tmp/q3pre.n"
check "Qwen3-32B: the config and the qwen3-32b preset give the same results" cmp -s "$tmp/q3cfg.n" "$tmp/q3pre.n"
# the wider attention costs more: the same shape with head_dim 80 (5120 / 64)
# runs a shorter iteration
sed 's/"head_dim": 128/"head_dim": 80/' "$tmp/p/models/hf-qwen3-32b.json" > "$tmp/e/q3-hd80.json"
"$SIM" --model "$tmp/e/q3-hd80.json" --seq 32K --global-batch 8 --gpus 64 --platform dgx-h100 \
    --method ulysses --format json > "$tmp/q3hd80" 2>&1
it() { sed -n 's/.*"iter_s": \([0-9.]*\).*/\1/p' "$1" | head -1; }
check "head_dim 128 takes longer than head_dim 80 ($(it "$tmp/q3cfg") s > $(it "$tmp/q3hd80") s)" \
    awk -v a="$(it "$tmp/q3cfg")" -v b="$(it "$tmp/q3hd80")" 'BEGIN { exit !(a > b && b > 0) }'
# qwen2.5-72b: attention 150994944; MLP 3 x 8192 x 29568 = 726663168; norms 32768;
#   one layer 877690880; 80 layers 70215270400; embeddings 2 x 152064 x 8192 =
#   2491416576; final norm 16384; total 72706703360 = 72.71e9 (Qwen: 72.7B)
check "qwen2.5-72b preset: 72.71B params, ffn 29568, vocab 152064" \
    grep -q "qwen2.5-72b .*72.71B params, 80 layers, hidden 8192, 64 heads (8 KV), ffn 29568, vocab 152064" "$tmp/list"

# a run: the name from the directory of config.json, the dtype, --seq as given
"$SIM" --model "$tmp/Llama-3.1-8B/config.json" --seq 8K --gpus 8 --method ulysses > "$tmp/run" 2> "$tmp/run.err"
check "a run with --seq exits 0" test $? -eq 0
check "the name is the directory's, bf16, 8192 tokens" \
    grep -q "^Llama-3.1-8B on 8 GPUs of dgx-a100-40g, 8192 tokens per sequence, bf16" "$tmp/run"
check "a config of known keys only gives no warning" test ! -s "$tmp/run.err"
check "micro batch 1 and global batch 1 by default" grep -q "global batch 1 sequences (1 micro-steps of 1)" "$tmp/run"
"$SIM" --model "$tmp/Llama-3.1-8B/config.json" --seq 8K --gpus 8 --method ulysses --micro-batch 2 > "$tmp/run2" 2>&1
check "--micro-batch 2: global batch follows it" grep -q "global batch 2 sequences (1 micro-steps of 2)" "$tmp/run2"

# --- a sequence length is a training setting: without --seq, exit 2
refuse "a HuggingFace config has no sequence length: give --seq" "$tmp/Llama-3.1-8B/config.json"
"$SIM" plan --model "$tmp/Llama-3.1-8B/config.json" --gpus 8 > "$tmp/out" 2> "$tmp/err"
check "plan without --seq: exit 2" test $? -eq 2
check "plan without --seq: the message" grep -q "give --seq" "$tmp/err"
"$SIM" sweep --model "$tmp/Llama-3.1-8B/config.json" --gpus 8 --method ulysses > "$tmp/out" 2> "$tmp/err"
check "sweep without --seq: exit 2" test $? -eq 2
"$SIM" sweep --model "$tmp/Llama-3.1-8B/config.json" --gpus 8 --seq-per-gpu 2K --method ulysses > "$tmp/out" 2> "$tmp/err"
check "sweep --seq-per-gpu gives the sequence: exit 0" test $? -eq 0
# infer has its own --prompt: a config needs no --seq there
"$SIM" infer --model "$tmp/Llama-3.1-8B/config.json" --platform dgx-h100 --gpus 8 --tp 8 > "$tmp/out" 2>&1
check "infer reads a config without --seq" grep -q "^Llama-3.1-8B on 8 GPUs of dgx-h100" "$tmp/out"
# the shipped presets keep their seq_tokens
"$SIM" --model gpt-7b --gpus 8 --method ulysses > "$tmp/out" 2>&1
check "a preset without --seq still runs at its seq_tokens" grep -q "131072 tokens per sequence" "$tmp/out"

# --- unknown keys are warned by name, the run goes on
sed 's/"vocab_size": 128256/"vocab_size": 128256, "frobnicate_ratio": 3/' "$tmp/Llama-3.1-8B/config.json" > "$tmp/e/extra.json"
"$SIM" --model "$tmp/e/extra.json" --seq 8K --gpus 8 --method ulysses > "$tmp/out" 2> "$tmp/err"
check "an unknown key: exit 0" test $? -eq 0
check "an unknown key is warned by name" grep -q "warning: .*key 'frobnicate_ratio': not a key of LlamaConfig or PretrainedConfig" "$tmp/err"
check "one warning line" test "$(wc -l < "$tmp/err")" -eq 1

# --- Mistral: GQA default of MistralConfig (8), a sliding window (warned)
cat > "$tmp/p/models/hf-mistral.json" << 'EOF'
{"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 1024,
 "intermediate_size": 3584, "num_hidden_layers": 4, "num_attention_heads": 16, "vocab_size": 32000,
 "hidden_act": "silu", "sliding_window": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
 "tie_word_embeddings": false, "torch_dtype": "float16"}
EOF
# --- Qwen2 (q/k/v biases counted), Qwen3 with head_dim = hidden / heads
cat > "$tmp/p/models/hf-qwen2.json" << 'EOF'
{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
 "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936,
 "hidden_act": "silu", "max_window_layers": 21, "sliding_window": 32768, "use_sliding_window": false,
 "tie_word_embeddings": true, "torch_dtype": "bfloat16", "rope_theta": 1000000.0, "rms_norm_eps": 1e-06}
EOF
cat > "$tmp/p/models/hf-qwen3.json" << 'EOF'
{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096, "intermediate_size": 12288,
 "num_hidden_layers": 2, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
 "vocab_size": 151936, "hidden_act": "silu", "attention_bias": false, "use_sliding_window": false,
 "sliding_window": null, "max_window_layers": 36, "tie_word_embeddings": false, "torch_dtype": "float32"}
EOF
# --- GPT-2 small, as published (https://huggingface.co/openai-community/gpt2/blob/main/config.json):
# no n_inner (4 x n_embd), no tie_word_embeddings (GPT-2 ties), no torch_dtype
cat > "$tmp/p/models/hf-gpt2.json" << 'EOF'
{"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
 "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
 "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12,
 "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1, "summary_activation": null,
 "summary_first_dropout": 0.1, "summary_proj_to_labels": true, "summary_type": "cls_index",
 "summary_use_proj": true, "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}},
 "vocab_size": 50257}
EOF
# --- GPT-NeoX, Pythia-160M's shape (untied, biased projections)
cat > "$tmp/p/models/hf-neox.json" << 'EOF'
{"architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox", "hidden_size": 768,
 "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12, "vocab_size": 50304,
 "hidden_act": "gelu", "rotary_pct": 0.25, "rotary_emb_base": 10000, "use_parallel_residual": true,
 "layer_norm_eps": 1e-05, "max_position_embeddings": 2048, "tie_word_embeddings": false,
 "torch_dtype": "float16", "bos_token_id": 0, "eos_token_id": 0}
EOF
"$SIM" presets > "$tmp/list" 2>&1
check "mistral: 4 x 1024, 16 heads, KV heads 8 (MistralConfig's default), ffn 3584" \
    grep -q "hf-mistral .* 4 layers, hidden 1024, 16 heads (8 KV), ffn 3584, vocab 32000" "$tmp/list"
check "qwen2: 24 x 896, 14 heads (2 KV), ffn 4864" \
    grep -q "hf-qwen2 .* 24 layers, hidden 896, 14 heads (2 KV), ffn 4864, vocab 151936" "$tmp/list"
check "qwen3: head_dim 128 = 4096 / 32 is read" \
    grep -q "hf-qwen3 .* 2 layers, hidden 4096, 32 heads (8 KV), ffn 12288, vocab 151936" "$tmp/list"
check "gpt2: 12 x 768, 12 heads, ffn 4 x 768 = 3072" \
    grep -q "hf-gpt2 .* 12 layers, hidden 768, 12 heads (12 KV), ffn 3072, vocab 50257" "$tmp/list"
check "gpt_neox: 12 x 768, 12 heads, ffn 3072, vocab 50304" \
    grep -q "hf-neox .* 12 layers, hidden 768, 12 heads (12 KV), ffn 3072, vocab 50304" "$tmp/list"
# Tied and untied: GPT-2 small counts 12 x (4 x 768^2 + 2 x 768 x 3072 + 4 x 768) = 84971520,
# one 50257 x 768 = 38597376 embedding and 1536: 123570432 = 0.12B; tied GPT-NeoX
# would be 84971520 + 50304 x 768 + 1536 = 123606528, untied 84971520 + 2 x 38633472 +
# 1536 = 162240000 = 0.16B
check "gpt2 ties its embeddings by default: 0.12B" grep -q "hf-gpt2  *0.12B params" "$tmp/list"
check "gpt_neox tie_word_embeddings false: 0.16B" grep -q "hf-neox  *0.16B params" "$tmp/list"

run_warn() { # file: run it (ring: any head count), stderr into $tmp/err
    "$SIM" --model "$1" --seq 4K --gpus 8 --method ring > "$tmp/out" 2> "$tmp/err"
}
run_warn "$tmp/p/models/hf-mistral.json"
check "mistral runs" test $? -eq 0
check "mistral: torch_dtype float16 is fp16" grep -q "tokens per sequence, fp16" "$tmp/out"
check "mistral: the sliding window is warned" \
    grep -q "key 'sliding_window': 4 of the 4 layers attend over a window of 4096 tokens; sliding-window attention is not modelled" "$tmp/err"
run_warn "$tmp/p/models/hf-qwen2.json"
check "qwen2 runs" test $? -eq 0
# the q/k/v biases (24 x (896 + 2 x 2 x 64) = 27648) are counted: no warning
check "qwen2: the q/k/v biases are counted, not warned" sh -c "! grep -q 'biases' '$tmp/err'"
check "qwen2: use_sliding_window false: no window warned" sh -c "! grep -q sliding_window '$tmp/err'"
run_warn "$tmp/p/models/hf-qwen3.json"
check "qwen3 runs, in fp32" grep -q "tokens per sequence, fp32" "$tmp/out"
run_warn "$tmp/p/models/hf-gpt2.json"
check "gpt2 runs" test $? -eq 0
# GPT-2 small: biases 12 x (5 x 768 + 3072) = 82944 and position embeddings
# 1024 x 768 = 786432 left out: 869376 of 123570432 + 869376 = 124439808 (the
# published 124M; 0.699 %)
check "gpt2: biases and position embeddings warned: 869376 of 1.244e+08" \
    grep -q "GPT2LMHeadModel: .*(869376 parameters, 0.699% of 1.244e+08)" "$tmp/err"
check "gpt2: no torch_dtype: bf16 said" grep -q "no torch_dtype: costed in bf16" "$tmp/err"
check "gpt2: every key of its config is known" sh -c "! grep -q 'not a key of' '$tmp/err'"
run_warn "$tmp/p/models/hf-neox.json"
check "gpt_neox runs" test $? -eq 0
# 12 x (4 x 768 + 3072 + 768) = 12 x 6912 = 82944
check "gpt_neox: the biases (attention_bias default true) warned: 82944" \
    grep -q "GPTNeoXForCausalLM: the biases of the attention and MLP projections (82944 parameters" "$tmp/err"

# --- refused: MoE by name, unknown architectures, shapes the cost model cannot express
cat > "$tmp/e/mixtral.json" << 'EOF'
{"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 4096,
 "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
 "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000, "torch_dtype": "bfloat16"}
EOF
refuse "MixtralForCausalLM is a mixture-of-experts model; MoE is not modelled" "$tmp/e/mixtral.json" --seq 4K
echo '{"model_type": "qwen3_moe", "hidden_size": 2048}' > "$tmp/e/qwen3moe.json"
refuse "model_type 'qwen3_moe' is a mixture-of-experts model" "$tmp/e/qwen3moe.json" --seq 4K
sed 's/"vocab_size": 128256/"vocab_size": 128256, "num_local_experts": 8/' "$tmp/Llama-3.1-8B/config.json" > "$tmp/e/llama-experts.json"
refuse "LlamaForCausalLM is a mixture-of-experts model (num_local_experts experts)" "$tmp/e/llama-experts.json" --seq 4K
echo '{"architectures": ["FalconForCausalLM"], "model_type": "falcon"}' > "$tmp/e/falcon.json"
refuse "architecture 'FalconForCausalLM' is not supported (supported: LlamaForCausalLM (llama), MistralForCausalLM" \
    "$tmp/e/falcon.json" --seq 4K
echo '{"architectures": null, "model_type": null}' > "$tmp/e/nulls.json"
refuse "key 'architectures': null, and no model_type: the architecture is not named" "$tmp/e/nulls.json" --seq 4K
echo '{"architectures": []}' > "$tmp/e/empty.json"
refuse "key 'architectures': expected a non-empty list of class names" "$tmp/e/empty.json" --seq 4K
# Qwen3-32B's shape (https://huggingface.co/Qwen/Qwen3-32B/blob/main/config.json):
# 64 heads of 128 = 8192 wide attention on hidden 5120
cat > "$tmp/e/qwen3-32b.json" << 'EOF'
{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 5120, "intermediate_size": 25600,
 "num_hidden_layers": 64, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128,
 "vocab_size": 151936, "torch_dtype": "bfloat16"}
EOF
run_warn "$tmp/e/qwen3-32b.json"
check "Qwen3-32B's shape (head_dim 128, hidden 5120, 64 heads) runs" test $? -eq 0
# Qwen3Config's head_dim default is 128: absent, the attention is 16 x 128 = 2048 wide on 1024
echo '{"architectures": ["Qwen3ForCausalLM"], "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 2,
 "num_attention_heads": 16, "num_key_value_heads": 8, "vocab_size": 1000}' > "$tmp/e/qwen3-nohd.json"
run_warn "$tmp/e/qwen3-nohd.json"
check "Qwen3 without head_dim (the class's 128, not 1024 / 16) runs" test $? -eq 0
# a hidden size the heads do not divide: refused without head_dim, modelled with it
echo '{"architectures": ["LlamaForCausalLM"], "hidden_size": 1000, "intermediate_size": 3072, "num_hidden_layers": 2,
 "num_attention_heads": 16, "num_key_value_heads": 8, "vocab_size": 1000}' > "$tmp/e/llama-odd.json"
refuse "key 'num_attention_heads': hidden size (1000) must be a multiple of the heads (16) when head_dim is not given" \
    "$tmp/e/llama-odd.json" --seq 4K
sed 's/"vocab_size": 1000}/"vocab_size": 1000, "head_dim": 64}/' "$tmp/e/llama-odd.json" > "$tmp/e/llama-odd-hd.json"
run_warn "$tmp/e/llama-odd-hd.json"
check "hidden 1000 with 16 heads of 64 runs" test $? -eq 0
sed 's/"hidden_act": "silu"/"hidden_act": "frob"/' "$tmp/Llama-3.1-8B/config.json" > "$tmp/e/act.json"
refuse "key 'hidden_act': activation 'frob' is not one the cost model knows" "$tmp/e/act.json" --seq 4K
sed 's/"torch_dtype": "bfloat16"/"torch_dtype": "int8"/' "$tmp/Llama-3.1-8B/config.json" > "$tmp/e/dtype.json"
refuse "key 'torch_dtype': must be \"bfloat16\", \"float16\" or \"float32\" (got \"int8\")" "$tmp/e/dtype.json" --seq 4K
sed 's/"num_hidden_layers": 32,//' "$tmp/Llama-3.1-8B/config.json" > "$tmp/e/nolayers.json"
refuse "key 'num_hidden_layers': missing (required)" "$tmp/e/nolayers.json" --seq 4K
sed 's/"hidden_size": 4096/"hidden_size": "4096"/' "$tmp/Llama-3.1-8B/config.json" > "$tmp/e/type.json"
refuse "key 'hidden_size': expected an integer, got a string" "$tmp/e/type.json" --seq 4K
echo '{"architectures": ["GPT2LMHeadModel"], "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 100,
 "add_cross_attention": true}' > "$tmp/e/cross.json"
refuse "key 'add_cross_attention': true: cross-attention (an encoder-decoder model) is not modelled" "$tmp/e/cross.json" --seq 4K

echo '{"architectures": ["GPT2LMHeadModel"], "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 100,
 "pruned_heads": {"0": [1]}}' > "$tmp/e/pruned.json"
refuse "key 'pruned_heads': pruned heads (a different head count per layer) are not modelled" "$tmp/e/pruned.json" --seq 4K
echo '{"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
 "num_attention_heads": 4, "vocab_size": 100, "is_encoder_decoder": true}' > "$tmp/e/encdec.json"
refuse "key 'is_encoder_decoder': true: cross-attention" "$tmp/e/encdec.json" --seq 4K
# warned, not refused: a model_type that is not the architecture's, quantization
echo '{"architectures": ["LlamaForCausalLM"], "model_type": "mistral", "hidden_size": 64, "intermediate_size": 128,
 "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100, "torch_dtype": "bfloat16",
 "quantization_config": {"quant_method": "awq", "bits": 4}}' > "$tmp/e/mixed.json"
"$SIM" --model "$tmp/e/mixed.json" --seq 1K --gpus 8 --method ring > "$tmp/out" 2> "$tmp/err"
check "model_type mismatch and quantization: exit 0" test $? -eq 0
check "model_type 'mistral' with LlamaForCausalLM is warned" \
    grep -q "key 'model_type': 'mistral' is not LlamaForCausalLM's 'llama'; read as LlamaForCausalLM" "$tmp/err"
check "quantization_config is warned" grep -q "key 'quantization_config': quantized weights are not modelled: costed in bf16" "$tmp/err"

# --- the reader's key lists and doc/simulator.md's tables agree: every key the
# reader knows (its *_read and *_nocost arrays) is named in section 14
awk '/^static const char \*const [a-z0-9_]*_(read|nocost)\[\] = \{/ {on = 1}
     on { while (match($0, /"[^"]*"/)) { print substr($0, RSTART + 1, RLENGTH - 2); $0 = substr($0, RSTART + RLENGTH) } }
     on && /NULL\};/ {on = 0}' "$top_srcdir/sim/hfconfig.c" | sort -u > "$tmp/keys"
sed -n '/^## 14\. HuggingFace configs/,$p' "$top_srcdir/doc/simulator.md" > "$tmp/doc14"
check "the reader knows more than 100 keys" test "$(wc -l < "$tmp/keys")" -gt 100
missing=""
while read -r k; do grep -q "\`$k\`" "$tmp/doc14" || missing="$missing $k"; done < "$tmp/keys"
check "every key of the reader's lists is in doc/simulator.md section 14${missing:+ (missing:$missing)}" test -z "$missing"

exit $fail
