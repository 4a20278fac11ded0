#!/bin/sh
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

# plot
if grep -q "define GNUPLOT_PATH" "$top_builddir/config.h" 2>/dev/null; then
    "$SIM" sweep --seq 32K:128K --method ulysses,megatron-sp --out "$tmp/p.csv" --plot "$tmp/p.svg"
    check "plot exits 0" test $? -eq 0
    check "svg written" grep -q "<svg" "$tmp/p.svg"
else
    "$SIM" sweep --seq 32K --method ulysses --out "$tmp/p.csv" --plot "$tmp/p.svg" 2> "$tmp/p.err"
    check "plot without gnuplot fails" test $? -ne 0
    check "plot without gnuplot explains" grep -q "gnuplot was not found" "$tmp/p.err"
    check "csv still written" test -s "$tmp/p.csv"
fi
exit $fail
