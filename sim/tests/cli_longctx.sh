#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# cli_longctx.sh -- the long-context options of ulysses-sim: bad combinations
# exit 2 with a reason; every output names the limit that binds (a 70B-like
# model on 32 GPUs with its parameters offloaded binds on a small host); the
# technique costs appear in the table, the CSV and the JSON.
set -u
: "${top_builddir:=../..}" "${top_srcdir:=../..}"
SIM="$top_builddir/ulysses-sim"
ULYSSES_SIM_PRESETS="$top_srcdir/sim/presets"; export ULYSSES_SIM_PRESETS
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {
    name="$1"; shift
    if "$@"; then echo "ok: $name"; else echo "FAIL: $name"; fail=1; fi
}
# expect "pattern" args...: exit 2, one line on stderr matching pattern, nothing on stdout
expect() {
    pat="$1"; shift
    "$SIM" "$@" > "$tmp/out" 2> "$tmp/err"
    st=$?
    if [ $st -ne 2 ]; then echo "FAIL: $*: exit $st, expected 2"; fail=1; return; fi
    if [ "$(wc -l < "$tmp/err")" -ne 1 ]; then echo "FAIL: $*: message is not one line:"; cat "$tmp/err"; fail=1; return; fi
    if ! grep -q -- "$pat" "$tmp/err"; then echo "FAIL: $*: '$pat' not in: $(cat "$tmp/err")"; fail=1; return; fi
    if [ -s "$tmp/out" ]; then echo "FAIL: $*: wrote to stdout"; fail=1; return; fi
    echo "ok: $* -> $(cat "$tmp/err")"
}

L="--model llama-3.1-8b --platform dgx-h100 --gpus 8 --seq 64K"
expect "head chunks apply to ulysses and usp" $L --method ring --head-chunks 2
expect "head chunks apply to ulysses and usp" $L --method all-gather --head-chunks 4
expect "needs --recompute full" $L --method ulysses --offload activations --recompute selective
expect "needs ZeRO stage 3" $L --method ulysses --offload optimizer,params --zero 2
expect "needs ZeRO stage 1 or more" $L --method ulysses --offload optimizer --zero 0
expect "needs --offload optimizer too" $L --method ulysses --offload params
expect "unknown item 'gradients'" $L --method ulysses --offload activations,gradients
expect "'optimizer' listed twice" $L --method ulysses --offload optimizer,optimizer
expect "--tiled-mlp: expected auto or a shard count" $L --method ulysses --tiled-mlp 0
expect "--tiled-mlp: expected auto or a shard count" $L --method ulysses --tiled-mlp=x
expect "--head-chunks: expected an integer" $L --method ulysses --head-chunks 0
# plan takes them (doc/planning.md 2.5; sim/tests/cli_plan_maxseq.sh tests the search):
# a set that applies to no composition is refused, never ignored
expect "no valid configuration of gpt-7b on 8 GPUs (e.g. --head-chunks 2: ring holds every head" plan --gpus 8 --seq 64K --method ring --head-chunks 2
expect "contradicts the technique options" plan --gpus 8 --seq 64K --techniques none --tiled-loss
# a platform without a host cannot offload
expect "describes no host" --model llama-3.1-8b --platform "$top_srcdir/sim/tests/data/tiny-platform.json" --gpus 8 --method ulysses --offload activations
# an unknown key in the host object is an error naming it
sed 's/"memory_GiB"/"memory_GB"/' "$top_srcdir/sim/presets/platforms/dgx-h100.json" > "$tmp/badkey.json"
expect "memory_GB" --platform "$tmp/badkey.json" --gpus 8 --method ulysses
sed 's/"link_efficiency": 0.147/"link_efficiency": 1.5/' "$top_srcdir/sim/presets/platforms/dgx-h100.json" > "$tmp/badeff.json"
expect "link_efficiency" --platform "$tmp/badeff.json" --gpus 8 --method ulysses
sed '/"link_bw_GBps_per_dir": 63.0,/d' "$top_srcdir/sim/presets/platforms/dgx-h100.json" > "$tmp/nolink.json"
expect "link_bw_GBps_per_dir" --platform "$tmp/nolink.json" --gpus 8 --method ulysses

# --tiled-mlp with no value is auto; the next option is not swallowed
"$SIM" $L --method ulysses --tiled-mlp --tiled-loss --format csv > "$tmp/auto.csv"
check "--tiled-mlp alone: auto, ceil(8192 / 4096) = 2 shards of GPU 0's 8192 tokens" \
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } { exit !($c["tiled_mlp_shards"] == 2 && $c["tiled_loss"] == 1) }' "$tmp/auto.csv"

# host memory binds: a 70B-like model (Llama 3 70B shape) on 32 GPUs, ZeRO-3 with
# optimizer and parameters on a 256 GiB host.  Per node: 8 GPUs x 18 bytes x
# 70.6e9 / 32 parameters = 318 GB > 275 GB (256 GiB), whatever the sequence.
cat > "$tmp/m70.json" <<'J'
{"name": "llama-70b-like", "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "ffn_hidden": 28672,
 "vocab": 128256, "mlp": "swiglu", "tied_embeddings": false, "seq_tokens": 65536}
J
sed 's/"memory_GiB": 2048/"memory_GiB": 256/' "$top_srcdir/sim/presets/platforms/dgx-h100.json" > "$tmp/smallhost.json"
H="--model $tmp/m70.json --platform $tmp/smallhost.json --gpus 32 --sp 32 --method ulysses --zero 3 --tiled-loss --tiled-mlp --offload activations,optimizer,params"
"$SIM" $H --max-seq > "$tmp/h.txt"
check "table: binding memory limit is host memory" grep -q "^binding memory limit  *host memory$" "$tmp/h.txt"
check "table: does not fit" grep -q "NO (OOM)" "$tmp/h.txt"
check "table: nothing fits, bound by host memory" grep -q "^limit at the longest sequence  *host memory$" "$tmp/h.txt"
check "table: host memory per node" grep -q "^host memory per node \[GiB\]" "$tmp/h.txt"
"$SIM" $H --format json > "$tmp/h.json"
check "json: mem_limit" grep -q '"mem_limit": "host memory"' "$tmp/h.json"
check "json: offload named" grep -q '"offload": "activations+optimizer+params"' "$tmp/h.json"
"$SIM" $H --format csv > "$tmp/h.csv"
check "csv: mem_limit column" awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } { exit !($c["mem_limit"] == "host memory" && $c["fits"] == 0) }' "$tmp/h.csv"
# the same on the 2 TiB host of a DGX H100: the run fits, and the longest
# sequence is bound by host memory still (80 layers of offloaded checkpoints
# per GPU), as the ALST recipes report for 70B on 32 GPUs
"$SIM" $(echo "$H" | sed "s|$tmp/smallhost.json|dgx-h100|") --max-seq --format csv > "$tmp/h2.csv"
check "csv: on the 2 TiB host 64K fits and the longest sequence is bound by host memory" awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } { exit !($c["fits"] == 1 && $c["mem_limit"] == "none" && $c["max_seq_limit"] == "host memory" && $c["max_seq_tokens"] > 65536) }' "$tmp/h2.csv"

# the technique costs: TiledMLP adds time; offload of activations adds copy time
A="--model llama-3.1-8b --platform dgx-h100 --gpus 8 --sp 8 --method ulysses --seq 256K --zero 3 --tiled-loss"
"$SIM" $A --format csv > "$tmp/a0.csv"
"$SIM" $A --tiled-mlp --offload activations,optimizer --format csv > "$tmp/a1.csv"
col() { awk -F, -v k="$2" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } { print $c[k] }' "$1"; }
check "tiled MLP costs an extra forward" awk -v t="$(col "$tmp/a1.csv" tiled_mlp_s)" 'BEGIN { exit !(t > 0) }'
check "no tiled MLP, no extra forward" test "$(col "$tmp/a0.csv" tiled_mlp_s)" = "0.000000"
check "checkpoint copies: 2 x 32 layers x 32768 tokens x 4096 x 2 B at 63 GB/s x 0.147" \
    awk -v t="$(col "$tmp/a1.csv" offload_copy_s)" 'BEGIN { want = 64 * 32768 * 4096 * 2 / (63e9 * 0.147); d = t - want; exit !(d < 1e-5 && d > -1e-5) }'
check "CPU Adam step timed" awk -v t="$(col "$tmp/a1.csv" cpu_adam_s)" 'BEGIN { exit !(t > 0) }'
check "offload and tiling lower the memory" awk -v a="$(col "$tmp/a0.csv" mem_GiB)" -v b="$(col "$tmp/a1.csv" mem_GiB)" 'BEGIN { exit !(b < a) }'
# at 2M tokens the layer's backward (not the loss) is the peak: head chunks shrink it
B="--model llama-3.1-8b --platform dgx-h100 --gpus 8 --sp 8 --method ulysses --seq 2M --zero 3 --tiled-loss --tiled-mlp --offload activations,optimizer"
"$SIM" $B --head-chunks 4 --format csv > "$tmp/a2.csv"
"$SIM" $B --format csv > "$tmp/a3.csv"
check "head chunks 4 hold less than 1" awk -v a="$(col "$tmp/a3.csv" mem_GiB)" -v b="$(col "$tmp/a2.csv" mem_GiB)" 'BEGIN { exit !(b < a) }'
# sweep takes them too (shared options): one row per point, the costs in its columns
"$SIM" sweep --gpus 8 --seq 64K,128K --method ulysses --model llama-3.1-8b --platform dgx-h100 --tiled-loss --tiled-mlp --offload activations,optimizer --max-seq > "$tmp/s.csv"
check "sweep: TiledMLP shards double with the sequence (2, then 4)" test "$(col "$tmp/s.csv" tiled_mlp_shards | tr '\n' ' ')" = "2 4 "
check "sweep: the longest sequence's limit" test "$(col "$tmp/s.csv" max_seq_limit | sort -u)" = "HBM"
exit $fail
