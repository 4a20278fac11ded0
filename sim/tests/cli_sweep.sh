#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# cli_sweep.sh -- ulysses-sim sweep: one CSV row per configuration, no
# progress bar when stderr is not a terminal, invalid points reported in the
# error column, --plot through gnuplot.
set -u
: "${top_builddir:=../..}" "${top_srcdir:=../..}"
SIM="$top_builddir/ulysses-sim"
ULYSSES_SIM_PRESETS="$top_srcdir/sim/presets"; export ULYSSES_SIM_PRESETS
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {
    d="$1"; shift
    if "$@"; then echo "ok: $d"; else echo "FAIL: $d"; fail=1; fi
}

"$SIM" sweep --seq 32K:256K --gpus 16,32 --method ulysses,ring-zigzag > "$tmp/s.csv" 2> "$tmp/s.err"
check "sweep exits 0" test $? -eq 0
check "4 x 2 x 2 rows + header" test "$(wc -l < "$tmp/s.csv")" -eq 17
check "no progress bar off a terminal" test ! -s "$tmp/s.err"
check "rows carry sequence lengths" grep -q "^ulysses,dgx-a100-40g,gpt-7b,32,.*,262144," "$tmp/s.csv"

# an impossible point (ulysses with sp 64 > 32 heads) is a row with an error
"$SIM" sweep --gpus 64 --sp 64 --seq 128K --method ulysses,ring --out "$tmp/e.csv" 2> "$tmp/e.err"
check "sweep with an impossible point exits 0" test $? -eq 0
check "error column filled" grep -q "exceeds the 32 attention heads" "$tmp/e.csv"
check "ring row ran" grep -q "^ring,dgx-a100-40g,gpt-7b,64,64," "$tmp/e.csv"
check "failures summarised on stderr" grep -q "1 of 2 configurations could not run" "$tmp/e.err"

# ranges: step and factor
"$SIM" sweep --seq 8K:24K:+8K --gpus 8:32:x2 --method usp --no-progress > "$tmp/r.csv"
check "3 x 3 rows + header" test "$(wc -l < "$tmp/r.csv")" -eq 10

# sweeps over degrees and weak scaling
"$SIM" sweep --platform dgx-h100 --model llama-3-8b --gpus 32 --seq 64K --tp 1,2,4 --pp 1:2 --method ulysses,p2p > "$tmp/d.csv"
check "tp x pp x methods rows" test "$(wc -l < "$tmp/d.csv")" -eq 13
check "tp 4 pp 2 row" grep -q "^ring-zigzag,dgx-h100,llama-3-8b,32,[0-9]*,4,.*,2,[0-9.]*,tp 4 " "$tmp/d.csv"
"$SIM" sweep --seq-per-gpu 4K --gpus 8:32 --method ulysses > "$tmp/w.csv"
check "weak scaling: sequence = 4K x GPUs" test "$(grep -c '^ulysses,dgx-a100-40g,gpt-7b,\(8,.*,32768\|16,.*,65536\|32,.*,131072\),' "$tmp/w.csv")" -eq 3
"$SIM" sweep --seq 8K --seq-per-gpu 4K > /dev/null 2> "$tmp/x.err"
check "--seq with --seq-per-gpu: exit 2" test $? -eq 2
check "--seq with --seq-per-gpu: message" grep -q "exclusive" "$tmp/x.err"
"$SIM" sweep --seq 8K --plot "$tmp/x.gif" > /dev/null 2> "$tmp/g.err"
check "--plot .gif refused with exit 2" test $? -eq 2
check "--plot .gif: message names the formats" grep -q "the extension must name the format: .svg, .png or .pdf" "$tmp/g.err"
check "--plot .gif: nothing written" test ! -e "$tmp/x.gif"

# plot
if grep -q "define GNUPLOT_PATH" "$top_builddir/config.h" 2>/dev/null; then
    "$SIM" sweep --seq 32K:128K --method ulysses,megatron-sp --out "$tmp/p.csv" --plot "$tmp/p.svg"
    check "plot exits 0" test $? -eq 0
    check "svg written" grep -q "<svg" "$tmp/p.svg"
    check "svg title names model, platform and methods" grep -q "gpt-7b on dgx-a100-40g: ulysses, megatron-sp" "$tmp/p.svg"
    check "readable ticks" grep -q ">128K<" "$tmp/p.svg"
    # a file name with a quote and a command substitution never reaches gnuplot
    (cd "$tmp" && "$SIM" sweep --seq 32K,64K --method ulysses --plot "it's \$(touch pwned)'; system 'touch pwned2.svg" > /dev/null)
    check "quoted file name: plot exits 0" test $? -eq 0
    check "quoted file name: the file has that exact name" test -s "$tmp/it's \$(touch pwned)'; system 'touch pwned2.svg"
    check "quoted file name: nothing ran" test ! -e "$tmp/pwned" -a ! -e "$tmp/pwned2.svg"
    "$SIM" sweep --seq 32K,64K --method ulysses --plot "$tmp/p.png" --plot-metric tflops > /dev/null
    check "png is PNG" sh -c "head -c 4 '$tmp/p.png' | grep -q PNG"
    "$SIM" sweep --seq 32K,64K --method ulysses --plot "$tmp/p.pdf" --plot-metric memory > /dev/null
    check "pdf is PDF" sh -c "head -c 4 '$tmp/p.pdf' | grep -q '%PDF'"
    "$SIM" sweep --seq 1M,4M --gpus 32 --method ulysses --plot "$tmp/oom.svg" > /dev/null
    check "out-of-memory points marked" grep -q "does not fit in HBM" "$tmp/oom.svg"
else
    "$SIM" sweep --seq 32K --method ulysses --out "$tmp/p.csv" --plot "$tmp/p.svg" 2> "$tmp/p.err"
    check "plot without gnuplot fails" test $? -ne 0
    check "plot without gnuplot explains" grep -q "gnuplot was not found" "$tmp/p.err"
    check "csv still written" test -s "$tmp/p.csv"
fi
exit $fail
