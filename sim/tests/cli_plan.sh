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

"$SIM" plan --platform dgx-h100 --model llama-3-8b --gpus 32 --seq 128K --top 4 > "$tmp/p.txt" 2> "$tmp/p.err"
check "plan exits 0" test $? -eq 0
check "plan is quiet on stderr" test ! -s "$tmp/p.err"
check "plan header" grep -q "^plan: llama-3-8b on 32 GPUs of dgx-h100, 131072 tokens" "$tmp/p.txt"
check "plan prints 4 ranked rows" test "$(grep -c '^[1-4] ' "$tmp/p.txt")" -eq 4
check "#1 has a placement" grep -q "^#1 [a-z-]*: .*\(inside a node\|across nodes\)" "$tmp/p.txt"
check "#2 says why it lost or ties" grep -q "^#2 .*; \(-[0-9.]*% tokens/s: \|ties with #1\)" "$tmp/p.txt"
check "losers section" grep -q "^why the others lost:" "$tmp/p.txt"
check "memory losers counted" grep -q "^  memory: [0-9]* do not fit at any ZeRO stage; the closest" "$tmp/p.txt"
# ranked by simulated tokens/s: the Mtok/s column never increases down the table
check "ranked by throughput" awk '/^[1-9] /{ if (prev != "" && $(NF-4) > prev) bad = 1; prev = $(NF-4) } END { exit bad }' "$tmp/p.txt"

# restricting the search: only the given method and TP degree appear
"$SIM" plan --platform dgx-h100 --model llama-3-8b --gpus 32 --seq 128K --method a2a --tp 2 --format csv > "$tmp/p.csv"
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
"$SIM" plan --platform dgx-h100 --model llama-3-8b --gpus 32 --seq 128K --global-batch 64 --mem-headroom 10% > "$tmp/h.txt"
check "headroom: budget line" grep -q "^memory budget: 72.0 GiB of 80 (--mem-headroom 10%)" "$tmp/h.txt"
check "micro-batch searched" grep -q "micro-batch searched (divisors up to 64)" "$tmp/h.txt"
check "headroom: every row within the budget" awk '/^[1-9] /{ if ($(NF-1) > 72.0) bad = 1 } END { exit bad }' "$tmp/h.txt"
# every divisor is tried, not only powers of two: with 12 sequences on 8 GPUs a micro-batch of 3
# (dp 1: 12 = 4 x 3) or 6 is among the simulated rows
"$SIM" plan --platform dgx-h100 --model llama-3-8b --gpus 8 --seq 32K --global-batch 12 --top 10 > "$tmp/d.txt"
check "micro-batch 3 or 6 searched" sh -c "awk '/^[1-9]/{ print \$(NF-8) }' '$tmp/d.txt' | grep -qx '[36]'"
"$SIM" plan --platform dgx-h100 --model llama-3-8b --gpus 32 --seq 128K --micro-batch 2 --global-batch 64 > "$tmp/m.txt"
check "--micro-batch 2: every row has mb 2" test "$(awk '/^[1-9] /{ print $(NF-8) }' "$tmp/m.txt" | sort -u)" = 2
"$SIM" plan --gpus 16 --seq 128K --mem-headroom 95 > /dev/null 2> "$tmp/h.err"
check "--mem-headroom 95: exit 2" test $? -eq 2
check "--mem-headroom 95: message" grep -q "mem-headroom: expected a percentage of HBM in \[0, 90)" "$tmp/h.err"
"$SIM" --mem-headroom 10 > /dev/null 2> "$tmp/h2.err"
check "--mem-headroom outside plan: exit 2" test $? -eq 2
# zigzag needs 2 x CP equal chunks: refused as a single run, counted as a loser by plan
"$SIM" --method ring-zigzag --gpus 16 --seq 131000 > /dev/null 2> "$tmp/z.err"
check "zigzag odd sequence: exit 2" test $? -eq 2
check "zigzag odd sequence: message" grep -q "ring-zigzag: sequence 131000 is not a multiple of 2 x CP = 32 .*nearest valid: 130976 or 131008" "$tmp/z.err"
"$SIM" plan --gpus 16 --seq 131000 --method p2p,a2a > "$tmp/z.txt"
check "plan with an odd sequence: zigzag layouts counted as losers" grep -q "^  sequence length vs the degree .*not a multiple of 2 x CP" "$tmp/z.txt"
# NVLink domains larger than a node: TP and CP placed inside the domain, no NIC traffic
"$SIM" plan --platform gb200-nvl72 --model llama-3-8b --gpus 64 --seq 128K --top 3 > "$tmp/n.txt"
check "nvl72: placement inside an NVLink domain" grep -q "^#1 [a-z-]*: .* inside an NVLink domain" "$tmp/n.txt"
"$SIM" --platform gb200-nvl72 --model llama-3-8b --gpus 64 --seq 128K --method ulysses --format json > "$tmp/n.json"
check "nvl72: 64 GPUs of one rack send nothing over NICs" grep -q '"nic_sent_GB": 0\.0,' "$tmp/n.json"
"$SIM" --platform mi300x-8 --model llama-3-8b --gpus 8 --seq 64K --method ulysses,ring-zigzag > /dev/null
check "mi300x full mesh runs" test $? -eq 0
exit $fail
