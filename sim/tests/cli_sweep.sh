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
# no GPU count beyond the 32 heads: every point ran at 4K tokens per SP rank, no note
"$SIM" sweep --seq-per-gpu 4K --gpus 8:32 --method ulysses --out "$tmp/w.csv" 2> "$tmp/w.err"
check "weak scaling within the heads: only the file named on stderr" \
    test "$(cat "$tmp/w.err")" = "ulysses-sim: wrote $tmp/w.csv (3 rows)"
# beyond the heads the SP degree stops at 32: a note for each GPU count where
# sequence / SP degree (from the CSV) is not 4K, none elsewhere
"$SIM" sweep --seq-per-gpu 4K --gpus 8:256 --out "$tmp/c.csv" 2> "$tmp/c.err"
check "capped weak scaling exits 0" test $? -eq 0
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    $col["seq_tokens"] / $col["sp"] != 4096 { print $col["gpus"] }' "$tmp/c.csv" | sort -un > "$tmp/c.want"
sed -n 's/^ulysses-sim: note: --seq-per-gpu 4K at \([0-9]*\) GPUs: .*/\1/p' "$tmp/c.err" > "$tmp/c.got"
check "capped SP degree: the CSV has such rows" test -s "$tmp/c.want"
check "capped SP degree: one note per GPU count where sequence / sp is not 4K" cmp -s "$tmp/c.want" "$tmp/c.got"
check "capped SP degree: the note says what ran and why" grep -qx "ulysses-sim: note: --seq-per-gpu 4K at 64 GPUs: the 256K-token sequence runs over SP degree 32 (capped at the 32 heads; dp 2), so each SP rank holds 8K tokens, not 4K" "$tmp/c.err"
check "capped weak scaling: the CSV named" grep -qx "ulysses-sim: wrote $tmp/c.csv (30 rows)" "$tmp/c.err"
"$SIM" sweep --seq 8K --seq-per-gpu 4K > /dev/null 2> "$tmp/x.err"
check "--seq with --seq-per-gpu: exit 2" test $? -eq 2
check "--seq with --seq-per-gpu: message" grep -q "exclusive" "$tmp/x.err"
"$SIM" sweep --seq 8K --plot "$tmp/x.gif" > /dev/null 2> "$tmp/g.err"
check "--plot .gif refused with exit 2" test $? -eq 2
check "--plot .gif: message names the formats" grep -q "the extension must name the format: .svg, .png or .pdf" "$tmp/g.err"
check "--plot .gif: nothing written" test ! -e "$tmp/x.gif"

# plot (skipped with a message without gnuplot)
if grep -q "define GNUPLOT_PATH" "$top_builddir/config.h" 2>/dev/null; then
    # the SVG's plots: gnuplot writes <g id="gnuplot_plot_N"><title>legend entry</title> for
    # each; per plot its legend entry, its colour, and the moves (M) and lines (L)
    # of its first path (the legend sample, then the data: one M per joined run)
    plots() {
        awk '/<g id="gnuplot_plot_/ { n++; t = $0; sub(/.*<title>/, "", t); sub(/<\/title>.*/, "", t); title[n] = t }
            n && !(n in col) && match($0, /rgb\([ 0-9,]*\)/) { col[n] = substr($0, RSTART, RLENGTH) }
            n && /<path stroke=.rgb/ && !(n in mv) { s = $0; sub(/.* d=./, "", s); sub(/\047.*/, "", s)
                mv[n] = gsub(/M/, "M", s); ln[n] = gsub(/L/, "L", s) }
            END { for (i = 1; i <= n; i++) printf "%s|%s|%d|%d\n", title[i], col[i], mv[i], ln[i] }' "$1"
    }
    # weak scaling capped at the heads: one joined line per method, methods as the CSV names them
    "$SIM" sweep --seq-per-gpu 4K --gpus 8:256 --out "$tmp/c.csv" --plot "$tmp/c.svg" 2> "$tmp/c.err"
    check "weak plot exits 0" test $? -eq 0
    plots "$tmp/c.svg" > "$tmp/c.plots"
    cut -d, -f1 "$tmp/c.csv" | sed 1d | awk '!seen[$0]++' > "$tmp/c.methods"
    check "weak plot: one plot per method, named as in the CSV" sh -c "cut -d'|' -f1 '$tmp/c.plots' | cmp -s - '$tmp/c.methods'"
    check "weak plot: 5 methods" test "$(wc -l < "$tmp/c.methods")" -eq 5
    check "weak plot: distinct colours" test "$(cut -d'|' -f2 "$tmp/c.plots" | sort -u | grep -c rgb)" -eq 5
    check "weak plot: each line joins its 6 GPU counts" test "$(grep -c '|2|6$' "$tmp/c.plots")" -eq 5
    check "weak plot: the title says what ran" grep -q "sequence = 4K x GPUs; the SP degree is capped at the 32 heads from 64 GPUs: 4K to 32K tokens per SP rank ran (top axis)" "$tmp/c.svg"
    check "weak plot: the top axis labels 32K tokens per SP rank" grep -q ">32K<" "$tmp/c.svg"
    check "weak plot: the note on stderr" grep -q "note: --seq-per-gpu 4K at 256 GPUs: .* holds 32K tokens, not 4K" "$tmp/c.err"
    check "weak plot: both files named" sh -c "grep -qx 'ulysses-sim: wrote $tmp/c.csv (30 rows)' '$tmp/c.err' && grep -qx 'ulysses-sim: wrote $tmp/c.svg (plot of iteration time: 5 lines)' '$tmp/c.err'"
    "$SIM" sweep --seq-per-gpu 4K --gpus 8:32 --method ulysses,ring --plot "$tmp/w.svg" > /dev/null 2> "$tmp/w.err"
    check "uncapped weak plot: the title says 4K tokens per GPU" grep -q "(weak scaling, 4K tokens per GPU: sequence = 4K x GPUs, SP degree = GPUs)" "$tmp/w.svg"
    check "uncapped weak plot: no note" test "$(grep -c note "$tmp/w.err")" -eq 0
    # strong scaling at --sp 64: points that cannot run leave a gap, said in the legend
    "$SIM" sweep --seq 256K --gpus 8:512 --sp 64 --method ulysses,ring,usp --plot "$tmp/g.svg" > /dev/null 2> "$tmp/g.err"
    plots "$tmp/g.svg" > "$tmp/g.plots"
    check "strong plot: three lines, distinct colours" test "$(cut -d'|' -f2 "$tmp/g.plots" | sort -u | grep -c rgb)" -eq 3
    check "strong plot: ulysses cannot run (64 > 32 heads), no line, said" \
        grep -qx "ulysses (no line: cannot run at 8, 16, 32, 64 and 3 more GPUs)|.*|1|1" "$tmp/g.plots"
    check "strong plot: ring from 64 GPUs, joined, the gap said" grep -qx "ring (no line: cannot run at 8, 16, 32 GPUs)|.*|2|4" "$tmp/g.plots"
    check "strong plot: gnuplot quiet" test "$(grep -vc "^ulysses-sim: " "$tmp/g.err")" -eq 0
    # a sweep over lengths at 2 GPU counts: a line per (method, GPUs), colour by method, dashes by GPUs
    "$SIM" sweep --seq 32K:128K --gpus 16,32 --method ulysses,ring --plot "$tmp/q.svg" > /dev/null 2> /dev/null
    plots "$tmp/q.svg" > "$tmp/q.plots"
    check "sequence plot: a line per method and GPU count" test "$(cut -d'|' -f1 "$tmp/q.plots" | tr '\n' ';')" = "ulysses, 16 GPUs;ring, 16 GPUs;ulysses, 32 GPUs;ring, 32 GPUs;"
    check "sequence plot: each joins its 3 lengths" test "$(grep -c '|2|3$' "$tmp/q.plots")" -eq 4
    check "sequence plot: a colour per method" test "$(cut -d'|' -f2 "$tmp/q.plots" | sort -u | grep -c rgb)" -eq 2
    grep -o "stroke-dasharray='[^']*'" "$tmp/q.svg" | sort -u > "$tmp/q.dash"
    check "sequence plot: the GPU counts differ in dashes" test "$(wc -l < "$tmp/q.dash")" -ge 2
    "$SIM" sweep --seq 32K:128K --method ulysses,megatron-sp --out "$tmp/p.csv" --plot "$tmp/p.svg" 2> "$tmp/p.err"
    check "plot exits 0" test $? -eq 0
    check "plot and CSV named on stderr" test "$(cat "$tmp/p.err")" = "ulysses-sim: wrote $tmp/p.csv (6 rows)
ulysses-sim: wrote $tmp/p.svg (plot of iteration time: 2 lines)"
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
    check "out-of-memory points left out of the line, said" grep -q "ulysses (no line: does not fit at 4M tokens)" "$tmp/oom.svg"
else
    echo "skip: the plot checks (gnuplot was not found by configure)"
    "$SIM" sweep --seq 32K --method ulysses --out "$tmp/p.csv" --plot "$tmp/p.svg" 2> "$tmp/p.err"
    check "plot without gnuplot fails" test $? -ne 0
    check "plot without gnuplot explains" grep -q "gnuplot was not found" "$tmp/p.err"
    check "csv still written" test -s "$tmp/p.csv"
fi
exit $fail
