#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# cli_plan.sh -- ulysses-sim plan: the search prints the top K by simulated
# throughput, each with its placement and why it lost to #1; bad requests exit 2.
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

"$SIM" plan --time-limit 0 --platform dgx-h100 --model llama-3-8b --gpus 32 --seq 128K --top 4 > "$tmp/p.txt" 2> "$tmp/p.err"
check "plan exits 0" test $? -eq 0
check "plan is quiet on stderr" test ! -s "$tmp/p.err"
check "plan header" grep -q "^plan: llama-3-8b on 32 GPUs of dgx-h100, 131072 tokens" "$tmp/p.txt"
check "plan prints 4 ranked rows" test "$(grep -c '^[1-4] ' "$tmp/p.txt")" -eq 4
check "#1 has a placement" grep -q "^#1 [a-z-]*: .*\(inside a node\|across nodes\)" "$tmp/p.txt"
check "#2 says why it lost or ties" grep -q "^#2 .*; \(-[0-9.]*% tokens/s: \|ties with #1\)" "$tmp/p.txt"
check "losers section" grep -q "^why the others lost:" "$tmp/p.txt"
check "memory losers counted" grep -q "^  memory: [0-9]* do not fit at any ZeRO stage; the closest" "$tmp/p.txt"
# ranked by simulated tokens/s: the Mtok/s column never increases down the table
check "ranked by throughput" awk '/^[1-9] /{ if (prev != "" && $(NF-5) > prev) bad = 1; prev = $(NF-5) } END { exit bad }' "$tmp/p.txt"
check "search line: simulated and pruned counts" grep -q "^search: [0-9]* simulated in [0-9.]* s; [1-9][0-9]* pruned (their compute alone cannot beat #4)" "$tmp/p.txt"
check "pruned line says why" grep -q "^  pruned: [0-9]* fitting configurations whose compute alone .* none of them can rank in the top 4" "$tmp/p.txt"
check "#1 gets Megatron-LM flags" grep -q "^launch #1, Megatron-LM: --tensor-model-parallel-size [0-9]* " "$tmp/p.txt"
check "#1 gets a DeepSpeed config or the reason it has none" grep -q "^launch #1, DeepSpeed: \\({\\|cannot run it: \\)" "$tmp/p.txt"
check "megatron-sp TP over nodes is noted" grep -q "^  note: megatron-sp has no context parallelism, so it was searched with TP over up to 32 GPUs" "$tmp/p.txt"

# restricting the search: only the given method and TP degree appear
"$SIM" plan --time-limit 0 --platform dgx-h100 --model llama-3-8b --gpus 32 --seq 128K --method a2a --tp 2 --format csv > "$tmp/p.csv"
check "restricted plan: csv rows are ulysses with tp 2" test "$(grep -c '^ulysses,dgx-h100,llama-3-8b,32,[0-9]*,2,' "$tmp/p.csv")" -eq "$(($(wc -l < "$tmp/p.csv") - 1))"

# bad requests
"$SIM" plan --model llama-3-8b --gpus 8 --seq 4M > "$tmp/o.txt" 2> "$tmp/o.err"
check "nothing fits: exit 2" test $? -eq 2
check "nothing fits: message" grep -q "plan: no configuration of 8 GPUs fits in 40 GiB (the smallest needs" "$tmp/o.err"
"$SIM" --top 3 > /dev/null 2> "$tmp/t.err"
check "--top outside plan: exit 2" test $? -eq 2
check "--top outside plan: message" grep -q "option '--top' is only valid with 'ulysses-sim plan'" "$tmp/t.err"
"$SIM" plan --top 0 > /dev/null 2> "$tmp/t0.err"
check "--top 0: exit 2" test $? -eq 2
check "plan --help" "$SIM" plan --help > /dev/null

# micro-batch search and memory headroom
"$SIM" plan --time-limit 0 --platform dgx-h100 --model llama-3-8b --gpus 32 --seq 128K --global-batch 64 --mem-headroom 10% > "$tmp/h.txt"
check "headroom: budget line" grep -q "^memory budget: 72.0 GiB of 80 (--mem-headroom 10%)" "$tmp/h.txt"
check "micro-batch searched" grep -q "micro-batch searched (divisors up to 64)" "$tmp/h.txt"
check "headroom: every row within the budget" awk '/^[1-9] /{ if ($(NF-2) > 72.0) bad = 1 } END { exit bad }' "$tmp/h.txt"
# every divisor is tried, not only powers of two: with 12 sequences on 8 GPUs a micro-batch of 3
# (dp 1: 12 = 4 x 3) or 6 is among the simulated rows
"$SIM" plan --platform dgx-h100 --model llama-3-8b --gpus 8 --seq 32K --global-batch 12 --top 10 --time-limit 0 > "$tmp/d.txt"
check "micro-batch 3 or 6 searched" sh -c "awk '/^[1-9]/{ print \$(NF-9) }' '$tmp/d.txt' | grep -qx '[36]'"
"$SIM" plan --time-limit 0 --platform dgx-h100 --model llama-3-8b --gpus 32 --seq 128K --micro-batch 2 --global-batch 64 > "$tmp/m.txt"
check "--micro-batch 2: every row has mb 2" test "$(awk '/^[1-9] /{ print $(NF-9) }' "$tmp/m.txt" | sort -u)" = 2
"$SIM" plan --gpus 16 --seq 128K --mem-headroom 95 > /dev/null 2> "$tmp/h.err"
check "--mem-headroom 95: exit 2" test $? -eq 2
check "--mem-headroom 95: message" grep -q "mem-headroom: expected a percentage of HBM in \[0, 90)" "$tmp/h.err"
"$SIM" --mem-headroom 10 > /dev/null 2> "$tmp/h2.err"
check "--mem-headroom outside plan: exit 2" test $? -eq 2
# zigzag needs 2 x CP equal chunks: refused as a single run, counted as a loser by plan
"$SIM" --method ring-zigzag --gpus 16 --seq 131000 > /dev/null 2> "$tmp/z.err"
check "zigzag odd sequence: exit 2" test $? -eq 2
check "zigzag odd sequence: message" grep -q "ring-zigzag: sequence 131000 is not a multiple of 2 x CP = 32 .*nearest valid: 130976 or 131008" "$tmp/z.err"
"$SIM" plan --time-limit 0 --gpus 16 --seq 131000 --method p2p,a2a > "$tmp/z.txt"
check "plan with an odd sequence: zigzag layouts counted as losers" grep -q "^  sequence length vs the degree .*not a multiple of 2 x CP" "$tmp/z.txt"
# NVLink domains larger than a node: TP and CP placed inside the domain, no NIC traffic
"$SIM" plan --time-limit 0 --platform gb200-nvl72 --model llama-3-8b --gpus 64 --seq 128K --top 3 > "$tmp/n.txt"
check "nvl72: placement inside an NVLink domain" grep -q "^#1 [a-z-]*: .* inside an NVLink domain" "$tmp/n.txt"
"$SIM" --platform gb200-nvl72 --model llama-3-8b --gpus 64 --seq 128K --method ulysses --format json > "$tmp/n.json"
check "nvl72: 64 GPUs of one rack send nothing over NICs" grep -q '"nic_sent_GB": 0\.0,' "$tmp/n.json"
"$SIM" --platform mi300x-8 --model llama-3-8b --gpus 8 --seq 64K --method ulysses,ring-zigzag > /dev/null
check "mi300x full mesh runs" test $? -eq 0

# ---- pruning never drops what the exhaustive search ranks first: the top 5
# (method, degrees, ZeRO, recompute, micro-batch, iteration time) of the pruned
# search equal --exhaustive's on small cases.  The pruned search drops a
# candidate only when 0.97 x its compute lower bound is no faster than the 5th
# simulated time, so the two tables must agree row by row.
top5() { # the identifying columns and the time of the top 5 rows of a CSV (by header name)
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        NR <= 6 { print $1, $c["sp"], $c["tp"], $c["dp"], $c["ulysses_degree"], $c["ring_degree"], $c["zero"],
                  $c["recompute"], $c["iter_s"], $c["pp"], $c["micro_batch"], $c["tiled_loss"],
                  $c["tiled_mlp_shards"], $c["offload"], $c["head_chunks"], $c["vpp"] }' "$1"
}
n=0
while read -r c; do
    n=$((n + 1))
    "$SIM" plan $c --time-limit 0 --format csv > "$tmp/x$n.csv"
    "$SIM" plan $c --exhaustive --format csv > "$tmp/e$n.csv"
    top5 "$tmp/x$n.csv" > "$tmp/x$n.top"
    top5 "$tmp/e$n.csv" > "$tmp/e$n.top"
    check "pruned top 5 = exhaustive top 5: $c" sh -c "test -s '$tmp/x$n.top' && cmp -s '$tmp/x$n.top' '$tmp/e$n.top'"
done <<'CASES'
--platform dgx-h100 --model llama-3-8b --gpus 32 --seq 128K
--model gpt-1.2b --gpus 16 --seq 64K
--platform dgx-h100 --model llama-3-8b --gpus 8 --seq 32K --global-batch 12
--gpus 16 --seq 131000 --method p2p,a2a
--platform dgx-h100 --model llama-3.1-70b --gpus 64 --seq 16K --global-batch 16 --pp 8
CASES
"$SIM" plan --platform dgx-h100 --model llama-3-8b --gpus 32 --seq 128K --time-limit 0 --format json > "$tmp/pj.json"
check "json: the plan's census" sh -c "grep -q '\"pruned_lower_bound\": [1-9]' '$tmp/pj.json' && grep -q '\"exhaustive\": false' '$tmp/pj.json'"
"$SIM" plan --platform dgx-h100 --model llama-3-8b --gpus 32 --seq 128K --exhaustive --format json > "$tmp/ej.json"
check "json --exhaustive: nothing pruned" grep -q '"pruned_lower_bound": 0,' "$tmp/ej.json"

# ---- ties: a row is a tie when #1's tokens/s is at most (1 + PCT/100) times its own;
# tokens/s = global_batch_seqs x seq_tokens / iter_s (CSV columns found by their header names)
for t in 0 1 5 100; do
    "$SIM" plan --time-limit 0 --platform dgx-h100 --model llama-3-8b --gpus 32 --seq 128K --top 10 --tie $t --format csv > "$tmp/t$t.csv"
    check "--tie $t: the tie column follows #1's tokens/s" awk -F, -v t=$t '
        NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        { tps = $c["global_batch_seqs"] * $c["seq_tokens"] / $c["iter_s"] }
        NR == 2 { best = tps; if ($c["tie"] != "best") bad = 1; next }
        { want = (best / tps <= 1 + t / 100) ? "tie" : "no"; if ($c["tie"] != want) bad = 1 }
        END { exit bad }' "$tmp/t$t.csv"
done
tiecol=$(head -1 "$tmp/t100.csv" | tr , '\n' | grep -n '^tie$' | cut -d: -f1)
check "--tie 100: every row after #1 ties" test "$(sed 1,2d "$tmp/t100.csv" | cut -d, -f"$tiecol" | sort -u)" = tie
"$SIM" plan --time-limit 0 --platform dgx-h100 --model llama-3-8b --gpus 32 --seq 128K --top 10 --tie 100 > "$tmp/t100.txt"
check "--tie 100: text says the model cannot rank them" grep -q "^ties: 9 of the rows after #1 are within 100% of its time per token: the model cannot rank them" "$tmp/t100.txt"
"$SIM" plan --time-limit 0 --platform dgx-h100 --model llama-3-8b --gpus 32 --seq 128K --top 10 --tie 100 --format json > "$tmp/t100.json"
check "--tie 100: json ties" sh -c "grep -q '\"ties\": 9,' '$tmp/t100.json' && test \$(grep -o '\"tie\": true' '$tmp/t100.json' | wc -l) -eq 9"

# ---- launch flags, checked against each row's own columns (sp, tp, ulysses_degree,
# ring_degree, zero, recompute, seq_tokens, global_batch_seqs, micro_steps, pp, micro_batch;
# found by their header names: the columns before the flags hold no commas)
"$SIM" plan --gpus 16 --seq 64K --top 60 --time-limit 0 --format csv > "$tmp/l.csv"
check "launch: every row's Megatron-LM flags match its degrees" awk -F, '
    NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    # a row with a technique Megatron-LM has no flag for is refused by name
    $c["tiled_loss"] == 1 || $c["tiled_mlp_shards"] > 0 || $c["head_chunks"] > 1 || $c["offload"] ~ /activations|params/ {
      if (index($0, "cannot run it") == 0 && index($0, "it has no ") == 0) { bad = 1; print "bad row: " $0 }
      next }
    { line = $0; m = $1; T = (m == "megatron-sp") ? $c["sp"] : $c["tp"]; C = (m == "megatron-sp") ? 1 : $c["sp"]
      want = "--tensor-model-parallel-size " T " "
      if (index(line, want) == 0) bad = 1
      if (m != "megatron-sp" && index(line, "--context-parallel-size " C " --cp-comm-type ") == 0) bad = 1
      if (m == "megatron-sp" && (index(line, "--sequence-parallel") == 0 || index(line, "--context-parallel-size") > 0)) bad = 1
      ct = (m == "ulysses") ? "a2a" : (m == "all-gather") ? "allgather" : (m == "usp") ? "a2a+p2p" : "p2p"
      if (m != "megatron-sp" && index(line, "--cp-comm-type " ct " ") == 0) bad = 1
      if (m == "usp" && index(line, "--hierarchical-context-parallel-sizes " $c["ulysses_degree"] " " $c["ring_degree"] " ") == 0) bad = 1
      if (index(line, "--pipeline-model-parallel-size " $c["pp"] " ") == 0) bad = 1
      if (($c["zero"] >= 1) != (index(line, "--use-distributed-optimizer") > 0)) bad = 1
      if (($c["zero"] == 3) != (index(line, "optim_grads_params") > 0)) bad = 1
      if ($c["recompute"] == "none" && index(line, "--recompute-granularity") > 0) bad = 1
      if ($c["recompute"] != "none" && index(line, "--recompute-granularity " $c["recompute"]) == 0) bad = 1
      if (index(line, "--micro-batch-size " $c["micro_batch"] " --global-batch-size " $c["global_batch_seqs"] " --seq-length " $c["seq_tokens"] " --bf16") == 0) bad = 1
      if (index(line, "--virtual-pipeline-model-parallel-size") > 0) bad = 1
      # interleaved rows: arguments.py sets virtual_pipeline_model_parallel_size from this flag
      if ($c["vpp"] > 1 && index(line, "--pipeline-model-parallel-size " $c["pp"] " --num-virtual-stages-per-pipeline-rank " $c["vpp"] " ") == 0) bad = 1
      if ($c["vpp"] == 1 && index(line, "--num-virtual-stages-per-pipeline-rank") > 0) bad = 1
      if (bad && !shown) { print "bad row: " line; shown = 1 } }
    END { exit bad }' "$tmp/l.csv"
check "launch: DeepSpeed configs for Ulysses rows with tp 1 and pp 1 only, with their degrees" awk -F, '
    NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    { line = $0; has = index(line, "\"\"sequence_parallel_size\"\":") > 0
      can = ($1 == "ulysses" && $c["tp"] == 1 && $c["pp"] == 1 && $c["recompute"] != "selective")
      if (has != can) bad = 1
      if (has && index(line, "\"\"sequence_parallel_size\"\":" $c["sp"] "}") == 0) bad = 1
      if (has && index(line, "\"\"train_micro_batch_size_per_gpu\"\":" $c["micro_batch"] ",\"\"gradient_accumulation_steps\"\":" $c["micro_steps"] ",") == 0) bad = 1
      if (has && index(line, "\"\"zero_optimization\"\":{\"\"stage\"\":" $c["zero"] "}") == 0) bad = 1
      if (!has && $1 ~ /ring|all-gather|usp/ && index(line, "it has no " $1 " context parallelism") == 0) bad = 1 }
    END { exit bad }' "$tmp/l.csv"
check "launch: the 60-row plan has a DeepSpeed row and a row without" sh -c "grep -q 'sequence_parallel_size\"\"' '$tmp/l.csv' && grep -q 'it has no ' '$tmp/l.csv'"
check "launch: the 60-row plan has interleaved rows" awk -F, '
    NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } $c["vpp"] > 1 { v = 1 } END { exit !v }' "$tmp/l.csv"
"$SIM" plan --time-limit 0 --gpus 16 --seq 64K --method ring --launch megatron > "$tmp/lr.txt"
check "launch: plain ring runs as Megatron's zigzag p2p, said so" grep -q "^   note: Megatron-LM's p2p always cuts a causal sequence into 2 x CP zigzag chunks" "$tmp/lr.txt"
check "--launch megatron: every row" test "$(grep -c '^launch #[0-9]*, Megatron-LM: ' "$tmp/lr.txt")" -eq 5
"$SIM" plan --time-limit 0 --gpus 16 --seq 64K --method megatron-sp --tp 16 --launch deepspeed > "$tmp/lm.txt"
check "TP across nodes: the row says so" grep -q "^   note: TP 16 crosses nodes (8 GPUs per NVLink domain)" "$tmp/lm.txt"
check "DeepSpeed cannot run megatron-sp: said, no flags" grep -q "^launch #1, DeepSpeed: cannot run it: Megatron tensor + sequence parallelism is not a DeepSpeed config option" "$tmp/lm.txt"
# Megatron-LM refuses a sequence that is not a multiple of 2 x CP (ulysses runs it in the simulator)
"$SIM" plan --time-limit 0 --gpus 16 --seq 131000 --method a2a --sp 8 --launch megatron > "$tmp/lo.txt"
check "launch: Megatron-LM's 2 x CP rule" grep -q "^launch #1, Megatron-LM: cannot run it: --seq-length 131000 is not a multiple of 2 x CP = 16" "$tmp/lo.txt"

# ---- virtual pipeline stages.  Llama-3.1-70B (80 layers) on 64 H100 with pp 8 and
# 16 sequences of micro-batch 1: 16 micro-batches, 10 layers per rank, so V 2 and 5
# are admitted (V | 10, 16 a multiple of 8).  The interleaved bubble is (pp - 1) /
# (V m) of the step against 1F1B's (pp - 1) / m (arXiv 2104.04473 section 2.2.2):
# 7/16 of the step's compute idle with 1F1B, 7/32 or 7/80 interleaved, far more
# than the V-fold p2p of the stage boundaries costs (one 16K x 8192 bf16 activation
# per boundary, about 0.3 GB, against seconds of compute); so plan's #1 is
# interleaved and the same row with V = 1, simulated alone, is slower.
vp="--platform dgx-h100 --model llama-3.1-70b --gpus 64 --seq 16K --global-batch 16"
"$SIM" plan $vp --pp 8 --time-limit 0 --top 3 --format csv > "$tmp/v.csv"
col() { awk -F, -v n="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == n) k = i; next } NR == 2 { print $k }' "$1"; }
V=$(col "$tmp/v.csv" vpp)
check "interleaving wins at pp 8 with 16 micro-batches: #1 has V 2 or 5" sh -c "test '$V' = 2 || test '$V' = 5"
row="--method $(col "$tmp/v.csv" method) --tp $(col "$tmp/v.csv" tp) --sp $(col "$tmp/v.csv" sp) --pp 8 --dp 1
     --zero $(col "$tmp/v.csv" zero) --recompute $(col "$tmp/v.csv" recompute) --micro-batch 1"
case "$(col "$tmp/v.csv" method)" in usp) row="$row --ulysses $(col "$tmp/v.csv" ulysses_degree)";; esac
"$SIM" $vp $row --vpp "$V" --format csv > "$tmp/v1.csv"
"$SIM" $vp $row --vpp 1 --format csv > "$tmp/v0.csv"
tv=$(col "$tmp/v1.csv" iter_s); t1=$(col "$tmp/v0.csv" iter_s); tp=$(col "$tmp/v.csv" iter_s)
check "interleaved #1: its single run gives plan's time ($tp s = $tv s)" test "$tp" = "$tv"
check "interleaved #1: the same row with V = 1 is slower ($t1 s > $tv s)" awk -v a="$t1" -v b="$tv" 'BEGIN { exit !(a > b) }'
"$SIM" plan $vp --pp 8 --time-limit 0 --top 1 --launch megatron > "$tmp/v.txt"
check "interleaved #1: degrees say (V $V)" grep -q "^1  *[a-z-]*  *tp [0-9]* cp [0-9]* .*pp 8 (V $V) dp 1 " "$tmp/v.txt"
check "interleaved #1: Megatron-LM's --num-virtual-stages-per-pipeline-rank $V" \
    grep -q "^launch #1, Megatron-LM: .* --pipeline-model-parallel-size 8 --num-virtual-stages-per-pipeline-rank $V " "$tmp/v.txt"
# --vpp fixes V: 2 everywhere (pipelines only), 1 nowhere interleaved; V 3 divides no
# rank's layers (the pp > 1 dividing both 64 and 80 are 2, 4, 8, 16: 40, 20, 10, 5 layers)
"$SIM" plan $vp --vpp 2 --top 20 --time-limit 0 --format csv > "$tmp/v2.csv"
check "--vpp 2: every row has V 2 and pp > 1" awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    { n++; if ($c["vpp"] != 2 || $c["pp"] < 2) bad = 1 } END { exit bad || !n }' "$tmp/v2.csv"
"$SIM" plan $vp --vpp 1 --top 20 --time-limit 0 --format csv > "$tmp/v1p.csv"
check "--vpp 1: no row interleaved" awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    { n++; if ($c["vpp"] != 1) bad = 1 } END { exit bad || !n }' "$tmp/v1p.csv"
"$SIM" plan $vp --vpp 3 > /dev/null 2> "$tmp/v3.err"
check "--vpp 3 on 80 layers: exit 2" test $? -eq 2
check "--vpp 3 on 80 layers: message" grep -q "plan: no valid configuration .*--vpp 3 does not divide the 80 layers" "$tmp/v3.err"
"$SIM" plan $vp --pp-first-layers 4 > /dev/null 2> "$tmp/vf.err"
check "plan --pp-first-layers: exit 2" test $? -eq 2

# ---- the bound: 16384 GPUs stop at the time limit, which waits for one simulation
# (the enumeration alone takes about a second here, several under a sanitizer)
timeout 120 "$SIM" plan --gpus 16384 --platform dgx-h100 --model llama-3-8b --time-limit 2 > "$tmp/big.txt" 2> "$tmp/big.err"
check "16384 GPUs, --time-limit 2: exit 0" test $? -eq 0
check "16384 GPUs: the search line" grep -q "^search: [1-9][0-9]* simulated" "$tmp/big.txt"
check "16384 GPUs: what was not simulated is printed" grep -q "^  \(not simulated\|could rank higher\|pruned\): " "$tmp/big.txt"
# a limit shorter than the enumeration still gets the first candidate simulated
"$SIM" plan --gpus 64 --time-limit 0.000001 > "$tmp/tl.txt" 2> "$tmp/tl.err"
check "a time limit reached before any simulation: exit 0, one simulated" sh -c "test $? -eq 0 && grep -q '^search: 1 simulated' '$tmp/tl.txt'"
check "a time limit reached before any simulation: the rest counted as left" grep -q "^  not simulated: [0-9]* left when the time limit (1e-06 s from the start) was reached" "$tmp/tl.txt"

# ---- bad plan options
for bad in "--tie 101" "--tie x" "--launch torchtitan" "--time-limit -1" "--tie"; do
    "$SIM" plan --gpus 16 $bad > /dev/null 2> "$tmp/b.err"
    check "plan $bad: exit 2" test $? -eq 2
done
check "--launch torchtitan: message" sh -c "'$SIM' plan --launch torchtitan 2>&1 | grep -q \"launch: expected megatron or deepspeed, got 'torchtitan'\""
"$SIM" --tie 5 > /dev/null 2>&1
check "--tie outside plan: exit 2" test $? -eq 2
exit $fail
