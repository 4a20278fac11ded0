#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# cli_plan_maxseq.sh -- ulysses-sim plan --max-seq: the longest sequence over
# every composition, the binding resource, text / CSV / JSON.
#
# The hand-checkable case: Llama-3-8B on 8 H100 (80 GiB), every method with
# tp 1, pp 1, cp 8, dp 1, ZeRO-3, full recompute.  The parameter state
# (weights, gradients, optimizer, sharded over the same 8 GPUs by ZeRO-3), the
# ZeRO buffers and the reserved memory do not depend on the method; every
# other term (activations, logits, the attention layout's buffers: flash
# attention keeps no s x s matrix) grows linearly with the sequence.  So the
# per-GPU memory is F + k s with the same F for every method, the longest
# sequence is (80 GiB - F) / k, and the winner is the composition with the
# least per-GPU memory per token k.  The test measures F and k of each method
# from single runs (`ulysses-sim --seq S`, JSON mem_GiB) at 64K, 128K and
# 192K tokens -- another path through the program than plan's search --
# checks that memory is linear (the 64K steps agree), that F agrees between
# methods, that plan's winner has the least k and that its order is the order
# of k, and that each longest sequence is (80 - F) / k within 0.1 % (the
# search returns a multiple of the method's granularity, 8 or 16 tokens, and
# mem_GiB carries 3 decimals).
set -u
: "${top_builddir:=../..}" "${top_srcdir:=../..}"
SIM="$top_builddir/ulysses-sim"
ULYSSES_SIM_PRESETS="$top_srcdir/sim/presets"; export ULYSSES_SIM_PRESETS
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # description, then a command that must succeed
    d="$1"; shift
    if "$@"; then echo "ok: $d"; else echo "FAIL: $d"; fail=1; fi
}
J="--platform dgx-h100 --model llama-3-8b --gpus 8 --sp 8 --tp 1 --pp 1 --zero 3 --recompute full"
# the compositions as they are (the technique search is tested at the end)
NT="--techniques none"

"$SIM" plan --max-seq $J $NT --top 10 --format csv > "$tmp/m.csv" 2> "$tmp/m.err"
check "plan --max-seq csv: exit 0" test $? -eq 0
check "plan --max-seq csv: header" grep -q "^rank,method,platform,model,gpus,tp,cp,ulysses_degree,ring_degree,pp,dp,zero,recompute,micro_batch,max_seq_tokens,mem_GiB,hbm_budget_GiB,limit,techniques,host_GiB_per_node,placement$" "$tmp/m.csv"
# ring, ring-zigzag, ulysses, usp 2x4, usp 4x2, all-gather
check "plan --max-seq csv: six compositions" test "$(($(wc -l < "$tmp/m.csv") - 1))" -eq 6
check "plan --max-seq csv: every row binds on HBM" test "$(cut -d, -f18 "$tmp/m.csv" | sed 1d | sort -u)" = HBM
# per-GPU memory of each composition at three sequence lengths, by single runs
for row in $(sed 1d "$tmp/m.csv" | cut -d, -f2,8); do
    meth=${row%,*}; u=${row#*,}
    extra=""
    [ "$meth" = usp ] && extra="--ulysses $u"
    for s in 65536 131072 196608; do
        "$SIM" $J --method "$meth" $extra --micro-batch 1 --seq $s --format json |
            sed -n 's/.*"mem_GiB": \([0-9.]*\),.*/\1/p' | head -1 > "$tmp/mem.$meth.$u.$s"
    done
    printf '%s %s %s %s %s\n' "$meth" "$u" "$(cat "$tmp/mem.$meth.$u.65536")" \
        "$(cat "$tmp/mem.$meth.$u.131072")" "$(cat "$tmp/mem.$meth.$u.196608")" >> "$tmp/fit.txt"
done
check "single runs gave every memory" test "$(awk 'NF == 5' "$tmp/fit.txt" | wc -l)" -eq 6
# k = GiB per 64K tokens, F = memory at 0 tokens
check "memory is linear in the sequence (the two 64K steps agree within 0.002 GiB)" \
    awk '{ d1 = $4 - $3; d2 = $5 - $4; if (d1 - d2 > 0.002 || d2 - d1 > 0.002) bad = 1 } END { exit bad }' "$tmp/fit.txt"
check "the fixed memory F is the same for every method (within 0.003 GiB)" \
    awk '{ F = $3 - ($4 - $3); if (NR == 1) f0 = F; else if (F - f0 > 0.003 || f0 - F > 0.003) bad = 1 } END { exit bad }' "$tmp/fit.txt"
# plan's order is the order of k (the least per-GPU memory per token first)
sed 1d "$tmp/m.csv" | cut -d, -f2,8,15 > "$tmp/plan.txt"
check "the winner has the least memory per token, and the order is that of k" awk -F'[ ,]' '
    NR == FNR { k[$1 "," $2] = $4 - $3; next }
    { kk = k[$1 "," $2]; if (kk == "") bad = 1; if (FNR > 1 && kk < prev - 1e-9) bad = 1; prev = kk }
    END { exit bad }' "$tmp/fit.txt" "$tmp/plan.txt"
check "each longest sequence is (80 GiB - F) / k within 0.1 %" awk -F'[ ,]' '
    NR == FNR { F = $3 - ($4 - $3); pred[$1 "," $2] = (80 - F) / ($4 - $3) * 65536; next }
    { p = pred[$1 "," $2]; r = $3 / p; if (r < 0.999 || r > 1.001) { print $0, p; bad = 1 } }
    END { exit bad }' "$tmp/fit.txt" "$tmp/plan.txt"
# the single run's --max-seq gives the same longest sequence for the winner
win=$(sed -n 2p "$tmp/m.csv" | cut -d, -f2)
wseq=$(sed -n 2p "$tmp/m.csv" | cut -d, -f15)
one=$("$SIM" $J --method "$win" --micro-batch 1 --seq 64K --max-seq --format csv | sed -n 2p | cut -d, -f27)
check "the winner's longest sequence equals the single run's --max-seq ($wseq)" test "$one" = "$wseq"

# text and JSON
"$SIM" plan --max-seq $J $NT > "$tmp/m.txt"
check "text: the longest sequence line names the composition and the limit" \
    grep -q "^longest sequence: $wseq tokens with $win tp 1 cp 8 pp 1 dp 1, ZeRO-3, recompute full (.*); binding limit: HBM (" "$tmp/m.txt"
check "text: launch flags of the winner" grep -q "^launch #1, Megatron-LM: --tensor-model-parallel-size 1 --context-parallel-size 8 " "$tmp/m.txt"
"$SIM" plan --max-seq $J $NT --format json > "$tmp/m.json"
check "json: mode and limit" sh -c "grep -q '\"mode\": \"max_seq\"' '$tmp/m.json' && grep -q '\"limit\": \"HBM\"' '$tmp/m.json'"
check "json: the winner's max_seq_tokens" grep -q "\"max_seq_tokens\": $wseq," "$tmp/m.json"
# the headroom shortens every composition
"$SIM" plan --max-seq $J $NT --mem-headroom 10 --format csv | sed -n 2p | cut -d, -f15,17 > "$tmp/h.txt"
check "--mem-headroom 10: budget 72 GiB and a shorter longest sequence" \
    awk -F, -v w="$wseq" '{ exit !($2 == "72.000" && $1 < w) }' "$tmp/h.txt"
# nothing fits: exit 2 with a reason
"$SIM" plan --max-seq --platform dgx-a100-40g --model llama-3.1-405b --gpus 8 > /dev/null 2> "$tmp/n.err"
check "405B on 8 A100-40GB: exit 2" test $? -eq 2
check "405B on 8 A100-40GB: message" grep -q "plan --max-seq: no composition of llama-3.1-405b on 8 GPUs fits any sequence" "$tmp/n.err"
"$SIM" plan --max-seq --exhaustive > /dev/null 2> "$tmp/x.err"
check "--max-seq --exhaustive: exit 2" test $? -eq 2
# ---- the long-context techniques (doc/planning.md, "Long-context techniques")
# ALST's configuration given (validation row A2: Llama-3.1-8B on 8 H100,
# Ulysses SP 8, ZeRO-3 with the optimizer on the host, TiledMLP, tiled loss,
# checkpoint offload): plan --max-seq's ulysses row must be the single run's
# --max-seq of the same job, and its limit the single run's.
A="--platform dgx-h100 --model llama-3.1-8b --gpus 8 --tiled-loss --tiled-mlp auto --offload activations,optimizer"
"$SIM" plan --max-seq $A --method ulysses --sp 8 --tp 1 --zero 3 --recompute full --format csv > "$tmp/a.csv"
check "ALST set: plan --max-seq exit 0" test $? -eq 0
aseq=$(sed -n 2p "$tmp/a.csv" | cut -d, -f15)
alim=$(sed -n 2p "$tmp/a.csv" | cut -d, -f18)
check "ALST set: the row names the techniques as given" \
    test "$(sed -n 2p "$tmp/a.csv" | cut -d, -f19)" = "tiled-loss tiled-mlp offload:activations+optimizer"
"$SIM" $A --method ulysses --sp 8 --zero 3 --recompute full --max-seq --format json > "$tmp/a1.json"
one=$(sed -n 's/.*"max_seq_tokens": \([0-9]*\).*/\1/p' "$tmp/a1.json" | head -1)
olim=$(sed -n 's/.*"max_seq_limit": "\([^"]*\)".*/\1/p' "$tmp/a1.json" | head -1)
check "ALST set: plan's longest sequence ($aseq) is the single run's ($one)" test "$aseq" = "$one"
check "ALST set: plan's limit ($alim) is the single run's ($olim)" test "$alim" = "$olim"
# Searched: every level is allowed, so the longest sequence is at least the
# ALST set's (that set is one of the levels) and at least the plain one's.
"$SIM" plan --max-seq --platform dgx-h100 --model llama-3.1-8b --gpus 8 --method ulysses --sp 8 --tp 1 \
    --zero 3 --recompute full --format csv > "$tmp/s.csv"
"$SIM" plan --max-seq --platform dgx-h100 --model llama-3.1-8b --gpus 8 --method ulysses --sp 8 --tp 1 \
    --zero 3 --recompute full $NT --format csv > "$tmp/n.csv"
sseq=$(sed -n 2p "$tmp/s.csv" | cut -d, -f15)
nseq=$(sed -n 2p "$tmp/n.csv" | cut -d, -f15)
check "searched ($sseq) >= the ALST set ($aseq) > none ($nseq)" test "$sseq" -ge "$aseq" -a "$aseq" -gt "$nseq"
check "none: the row says none" test "$(sed -n 2p "$tmp/n.csv" | cut -d, -f19)" = none
# the searched row's techniques, given back as options, reproduce its length
st=$(sed -n 2p "$tmp/s.csv" | cut -d, -f19)
flags=""
case "$st" in *tiled-loss*) flags="$flags --tiled-loss" ;; esac
case "$st" in *tiled-mlp*) flags="$flags --tiled-mlp auto" ;; esac
hc=$(printf '%s\n' "$st" | sed -n 's/.*head-chunks:\([0-9]*\).*/\1/p')
[ -n "$hc" ] && flags="$flags --head-chunks $hc"
off=$(printf '%s\n' "$st" | sed -n 's/.*offload:\([a-z+]*\).*/\1/p' | tr + ,)
[ -n "$off" ] && flags="$flags --offload $off"
"$SIM" --platform dgx-h100 --model llama-3.1-8b --gpus 8 --method ulysses --sp 8 --zero 3 --recompute full \
    $flags --max-seq --format json > "$tmp/s1.json"
check "searched: its techniques ($st) as options give its length ($sseq)" \
    grep -q "\"max_seq_tokens\": $sseq," "$tmp/s1.json"
# a host too small for the offloaded checkpoints binds on host memory: the
# same platform with 256 GiB of host memory per node (the optimizer on the
# host takes 16 bytes x 8.03e9 parameters = 120 GiB of it)
sed 's/"memory_GiB": [0-9.]*/"memory_GiB": 256/' "$top_srcdir/sim/presets/platforms/dgx-h100.json" > "$tmp/small-host.json"
"$SIM" plan --max-seq --platform "$tmp/small-host.json" --model llama-3.1-8b --gpus 8 --method ulysses --sp 8 \
    --tp 1 --zero 3 --recompute full --offload activations,optimizer --tiled-loss --tiled-mlp auto \
    --format csv > "$tmp/h256.csv"
check "256 GiB host: the ALST set binds on host memory" test "$(sed -n 2p "$tmp/h256.csv" | cut -d, -f18)" = "host memory"
check "256 GiB host: shorter than on 2 TiB" test "$(sed -n 2p "$tmp/h256.csv" | cut -d, -f15)" -lt "$aseq"
# throughput search at 1M tokens: nothing fits plain (--techniques none
# exits 2), the searched plan's rows all carry a technique, and the launch
# flags follow them
"$SIM" plan --platform dgx-h100 --model llama-3.1-8b --gpus 8 --seq 1M $NT > /dev/null 2> "$tmp/t0.err"
check "1M tokens, --techniques none: nothing fits (exit 2)" test $? -eq 2
"$SIM" plan --platform dgx-h100 --model llama-3.1-8b --gpus 8 --seq 1M --time-limit 0 --format json > "$tmp/t.json"
check "1M tokens, searched: exit 0" test $? -eq 0
check "1M tokens: every row has the tiled loss at least" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["results"]
sys.exit(not (r and all(x["tiled_loss"] or x["offload"] != "none" or x["tiled_mlp_shards"] > 0 for x in r)))' "$tmp/t.json"
"$SIM" plan --platform dgx-h100 --model llama-3.1-8b --gpus 8 --seq 1M --method ulysses --sp 8 --tp 1 \
    --zero 3 --recompute full --tiled-loss --tiled-mlp auto --offload optimizer --time-limit 0 > "$tmp/t.txt"
check "tiled MLP: Megatron-LM refuses by name" grep -q "^launch #1, Megatron-LM: cannot run it: it has no TiledMLP" "$tmp/t.txt"
check "optimizer offload: DeepSpeed's offload_optimizer" grep -q '"offload_optimizer":{"device":"cpu"}' "$tmp/t.txt"
check "DeepSpeed note names TiledMLP" grep -q "ulysses_sp.TiledMLP" "$tmp/t.txt"
# bad input
"$SIM" plan --platform dgx-h100 --model llama-3.1-8b --gpus 8 --seq 64K --techniques some > /dev/null 2>&1
check "--techniques some: exit 2" test $? -eq 2
"$SIM" plan --platform dgx-h100 --model llama-3.1-8b --gpus 8 --seq 64K --techniques none --tiled-loss > /dev/null 2>&1
check "--techniques none with --tiled-loss: exit 2" test $? -eq 2
"$SIM" plan --platform dgx-h100 --model llama-3.1-8b --gpus 8 --seq 64K --method ring --head-chunks 4 > /dev/null 2> "$tmp/hc.err"
check "--head-chunks with ring only: exit 2" test $? -eq 2
exit $fail
