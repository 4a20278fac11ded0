#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# cli_basic.sh -- ulysses-sim command line: default run, formats, trace,
# presets, --max-seq, --help.
set -u
: "${top_builddir:=../..}" "${top_srcdir:=../..}"
SIM="$top_builddir/ulysses-sim"
ULYSSES_SIM_PRESETS="$top_srcdir/sim/presets"; export ULYSSES_SIM_PRESETS
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
quiet() { "$@" > /dev/null; }
check() { # description, then a command that must succeed
    d="$1"; shift
    if "$@"; then echo "ok: $d"; else echo "FAIL: $d"; fail=1; fi
}

"$SIM" > "$tmp/default.txt" 2> "$tmp/default.err"
check "default run exits 0" test $? -eq 0
check "default run is quiet on stderr" test ! -s "$tmp/default.err"
for m in ulysses megatron-sp ring ring-zigzag usp; do
    check "default run shows $m" grep -q " $m" "$tmp/default.txt"
done
check "default: GPT-7B on 64 GPUs at 131072 tokens" grep -q "gpt-7b on 64 GPUs of dgx-a100-40g, 131072 tokens" "$tmp/default.txt"
for row in "iteration time \[s\]" "compute time \[s\]" "exposed comm: sequence parallel \[s\]" \
           "sent over NVLink \[GB/GPU/iter\]" "sent over NIC \[GB/GPU/iter\]" \
           "Megatron formula \[TFLOP/s/GPU\]" "MFU .*\[%\]" "memory per GPU \[GiB\]" "fits in 40 GiB"; do
    check "table row '$row'" grep -q "$row" "$tmp/default.txt"
done

# determinism: same input, same output, bit for bit
"$SIM" > "$tmp/again.txt"
check "default run is deterministic" cmp -s "$tmp/default.txt" "$tmp/again.txt"

# CSV: a header with units and one row per method
"$SIM" --format csv --method ulysses,ring > "$tmp/out.csv"
check "csv exits 0" test $? -eq 0
check "csv header has units" grep -q "^method,.*,iter_s,compute_s,.*,nvlink_sent_GB,nic_sent_GB,tflops_per_gpu,mfu_pct,mem_GiB" "$tmp/out.csv"
check "csv has 3 lines" test "$(wc -l < "$tmp/out.csv")" -eq 3

# JSON
"$SIM" --format json --method usp --gpus 128 --seq 256K > "$tmp/out.json"
check "json exits 0" test $? -eq 0
check "json has iter_s" grep -q '"iter_s":' "$tmp/out.json"
check "json has usp" grep -q '"method": "usp"' "$tmp/out.json"
check "json reports 262144 tokens" grep -q '"seq_tokens": 262144' "$tmp/out.json"

# trace: one method -> the file itself; several -> one file per method
"$SIM" --method ulysses --trace "$tmp/t.json" > /dev/null
check "trace written" test -s "$tmp/t.json"
check "trace is Chrome trace JSON" grep -q '"traceEvents"' "$tmp/t.json"
check "trace has a compute track" grep -q '"name":"compute"' "$tmp/t.json"
check "trace has a NIC track" grep -q '"name":"NIC"' "$tmp/t.json"
"$SIM" --method ring,megatron-sp --trace "$tmp/tr.json" > /dev/null
check "per-method trace files" test -s "$tmp/tr.ring.json" -a -s "$tmp/tr.megatron-sp.json"

# --max-seq
"$SIM" --method ulysses --max-seq > "$tmp/max.txt"
check "--max-seq row" grep -q "longest sequence that fits \[tokens\]" "$tmp/max.txt"

# sizes with suffixes, other presets and options
check "--seq 1M on h100" "$SIM" --platform dgx-h100 --model llama-3-8b --gpus 256 --seq 1M --method usp,ring-zigzag --zero 1 --recompute selective > /dev/null
check "pairwise all-to-all" "$SIM" --method ulysses --a2a pairwise --gpus 16 > /dev/null
check "platform from a file" "$SIM" --platform "$top_srcdir/sim/tests/data/tiny-platform.json" --model gpt-1.2b --gpus 8 --seq 16K > /dev/null
check "single node preset" "$SIM" --platform a100-pcie-4 --gpus 4 --model gpt-1.2b --seq 32K --method ulysses > /dev/null

# no silent adjustment: a global batch rounded up to the data-parallel degree is
# reported in every format (table line, csv column, json field)
"$SIM" --model llama-3-8b --gpus 256 --sp 8 --global-batch 8 --method ulysses > "$tmp/w.txt"
check "batch inflation: table warning" grep -q "^warning: ulysses: global batch 8 rounded up to 32 (data-parallel degree 32" "$tmp/w.txt"
"$SIM" --model llama-3-8b --gpus 256 --sp 8 --global-batch 8 --method ulysses --format csv > "$tmp/w.csv"
check "batch inflation: csv warnings column" grep -q ',"global batch 8 rounded up to 32 ' "$tmp/w.csv"
check "csv header: warnings and the composition, then the long-context, pipeline and attention-kernel columns" grep -q ',error,warnings,pp,bubble_s,placement,engine,mem_limit,host_GiB_per_node,tiled_loss,tiled_mlp_shards,offload,head_chunks,tiled_mlp_s,offload_exposed_s,offload_copy_s,cpu_adam_s,param_fetch_s,max_seq_limit,host_link_s_per_GB,vpp,bubble_frac,pp_inflight,attn_kernel$' "$tmp/w.csv"
"$SIM" --model llama-3-8b --gpus 256 --sp 8 --global-batch 8 --method ulysses --format json > "$tmp/w.json"
check "batch inflation: json field" grep -q '"requested_global_batch_seqs": 8, "warnings": \["global batch 8 rounded up to 32' "$tmp/w.json"
"$SIM" --model llama-3-8b --gpus 256 --sp 8 --global-batch 32 --method ulysses > "$tmp/nw.txt"
check "no warning when the batch fits" test "$(grep -c warning "$tmp/nw.txt")" -eq 0
# head imbalance: 40 heads on an all-to-all of 32 is warned with its cost
"$SIM" --model "$top_srcdir/sim/tests/data/model-40-heads.json" --gpus 32 --method ulysses > "$tmp/h.txt"
check "head imbalance warning with cost" grep -q "^warning: ulysses: head imbalance: 40 heads over an all-to-all degree of 32: the busiest GPU holds 2 heads against 1.25 on average, so attention takes 1.60x" "$tmp/h.txt"
"$SIM" --model llama-3-8b --gpus 32 --method ulysses > "$tmp/kv.txt"
check "KV replication warned" grep -q "^warning: ulysses: 8 KV heads over an all-to-all degree of 32: KV heads are replicated" "$tmp/kv.txt"
"$SIM" --model llama-3-8b --gpus 32 --method ulysses --tp 4 --sp 8 > "$tmp/kv4.txt"
check "KV replication warned per tensor rank (8 KV heads / TP 4 = 2 < a2a 8)" grep -q "2 KV heads per tensor-parallel rank (TP 4) over an all-to-all degree of 8" "$tmp/kv4.txt"
"$SIM" --model llama-3-8b --gpus 32 --method ulysses --tp 2 --sp 4 > "$tmp/kv2.txt"
check "no warning at tp 2 x cp 4 (4 KV heads per tensor rank)" test "$(grep -c warning "$tmp/kv2.txt")" -eq 0
"$SIM" --model "$top_srcdir/sim/tests/data/model-40-heads.json" --gpus 32 --sp 8 --method ulysses > "$tmp/h8.txt"
check "no head warning at a dividing degree" test "$(grep -c 'head imbalance' "$tmp/h8.txt")" -eq 0

# composition: TP x CP with Megatron cp_comm_type names; placement printed in every format
"$SIM" --platform dgx-h100 --model llama-3-8b --gpus 32 --method a2a --tp 2 --cp 4 > "$tmp/c.txt"
check "tp x cp: degrees row" grep -q "^degrees tp x sp x pp x dp  *2x4x1x4" "$tmp/c.txt"
check "tp x cp: placement line" grep -q "^placement: ulysses: tp 2 x cp 4 inside a node; dp 4 across nodes" "$tmp/c.txt"
"$SIM" --platform dgx-h100 --model llama-3-8b --gpus 32 --method a2a+p2p --cp 16 --ulysses 8 --format json > "$tmp/c.json"
check "a2a+p2p is usp, placement in json" grep -q '"method": "usp", "pp": 1, "bubble_s": 0.0, "placement": "cp a2a 8 inside a node; cp p2p 2 x dp 2 across nodes"' "$tmp/c.json"
"$SIM" --method all_gather,p2p --tp 2 --pp 2 --gpus 64 --format csv > "$tmp/c.csv"
check "all_gather and p2p with tp 2 and pp 2 (csv)" test "$(grep -c '^\(all-gather\|ring-zigzag\),dgx-a100-40g,gpt-7b,64,16,2,1,.*,2,[0-9.]*,tp 2 inside a node; cp 16 (4 per node) x pp 2 across nodes,classes,none,0.000,0,0,none,1,' "$tmp/c.csv")" -eq 2

# presets and help
"$SIM" presets > "$tmp/presets.txt"
check "presets exits 0" test $? -eq 0
for p in dgx-a100-40g dgx-a100-80g dgx-h100 dgx-h200 l40s-pcie-8 gpt-1.2b gpt-7b gpt-30b llama-3-8b; do
    check "presets lists $p" grep -q "  $p " "$tmp/presets.txt"
done
"$SIM" presets llama-3-8b > "$tmp/llama.txt" 2> /dev/null
check "presets NAME prints the JSON" grep -q '"kv_heads": 8' "$tmp/llama.txt"
# presets NAME output is the preset file itself: valid JSON that loads back
for p in dgx-a100-40g dgx-a100-80g dgx-h100 dgx-h100-2to1 a100-pcie-4 dgx-h200 l40s-pcie-8; do
    "$SIM" presets $p > "$tmp/p.json" 2> /dev/null
    check "presets $p round-trips as a platform file" quiet "$SIM" --platform "$tmp/p.json" --gpus 4 --method ulysses --layers 2 --seq 8K
done
for p in gpt-1.2b gpt-7b gpt-30b llama-3-8b; do
    "$SIM" presets $p > "$tmp/m.json" 2> /dev/null
    check "presets $p round-trips as a model file" quiet "$SIM" --model "$tmp/m.json" --gpus 8 --method ulysses --layers 2 --seq 8K
done
check "--help" "$SIM" --help > /dev/null
check "sweep --help" "$SIM" sweep --help > /dev/null
check "presets --help" "$SIM" presets --help > /dev/null
exit $fail
