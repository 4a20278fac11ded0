#!/bin/sh
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
exit $fail
