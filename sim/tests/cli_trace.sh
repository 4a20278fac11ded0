#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# cli_trace.sh -- ulysses-sim --trace and --trace-ranks: every trace parses
# as JSON (jansson, through sim/tests/trace_check), every file written is
# named on stderr, --trace-ranks gives each listed GPU its processes, and on
# every track of a 16-GPU run (two nodes: NVLink and NIC both carry
# concurrent transfers) slices are disjoint or properly nested.  The bad
# values of --trace-ranks are in cli_errors.sh.
set -u
: "${top_builddir:=../..}" "${top_srcdir:=../..}"
SIM="$top_builddir/ulysses-sim"
CHECK="$top_builddir/sim/tests/trace_check"
ULYSSES_SIM_PRESETS="$top_srcdir/sim/presets"; export ULYSSES_SIM_PRESETS
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; fail=1; }

# ---- the checker itself fails on what it must refuse
printf '{"traceEvents":[\n' > "$tmp/cut.json"
if ! "$CHECK" "$tmp/cut.json" > "$tmp/c.out" && grep -q "^FAIL: $tmp/cut.json:2:" "$tmp/c.out"; then
    ok "trace_check refuses a cut-off file: $(cat "$tmp/c.out")"
else
    bad "trace_check accepts a cut-off file: $(cat "$tmp/c.out")"
fi
cat > "$tmp/partial.json" <<'EOF'
{"traceEvents":[
{"name":"process_name","ph":"M","pid":2,"args":{"name":"links of GPU 0"}},
{"name":"gather layer params","ph":"X","pid":2,"tid":1,"ts":10.0,"dur":5.0},
{"name":"all-to-all v","ph":"X","pid":2,"tid":1,"ts":12.0,"dur":5.0},
{"name":"nested","ph":"X","pid":2,"tid":2,"ts":10.0,"dur":5.0},
{"name":"inside","ph":"X","pid":2,"tid":2,"ts":11.0,"dur":2.0}
]}
EOF
if "$CHECK" "$tmp/partial.json" > "$tmp/c.out"; then
    bad "trace_check accepts partly overlapping slices"
elif grep -q '"gather layer params" \[10.000000, 15.000000\] overlaps "all-to-all v"' "$tmp/c.out"; then
    ok "trace_check refuses partly overlapping slices: $(cat "$tmp/c.out")"
else
    bad "trace_check: unexpected message: $(cat "$tmp/c.out")"
fi
sed '/all-to-all v/d' "$tmp/partial.json" > "$tmp/nested.json"
if "$CHECK" "$tmp/nested.json" > "$tmp/c.out"; then
    ok "trace_check accepts properly nested slices: $(cat "$tmp/c.out")"
else
    bad "trace_check refuses nested slices: $(cat "$tmp/c.out")"
fi

# ---- one method: the file named on stderr, valid, GPU 0 only (the default)
"$SIM" --method ring --gpus 16 --trace "$tmp/t.json" > /dev/null 2> "$tmp/err"
st=$?
if [ $st -eq 0 ] && [ "$(cat "$tmp/err")" = "ulysses-sim: wrote $tmp/t.json (trace of ring, GPU 0)" ]; then
    ok "--trace names its file: $(cat "$tmp/err")"
else
    bad "--trace: exit $st, stderr: $(cat "$tmp/err")"
fi
if "$CHECK" "$tmp/t.json" > "$tmp/c.out" && grep -q "; GPUs 0 (slices [1-9][0-9]* *)$" "$tmp/c.out"; then
    ok "16 GPUs, ring: valid JSON, slices nest on every track, GPU 0 only: $(cat "$tmp/c.out")"
else
    bad "16 GPUs, ring: $(cat "$tmp/c.out")"
fi
# the run has concurrent transfers on a link class: they sit on lanes
if grep -q '"args":{"name":"NVLink 2"}' "$tmp/t.json"; then
    ok "concurrent NVLink transfers on a second lane"
else
    bad "16 GPUs, ring: no second NVLink lane (the nesting case is not exercised)"
fi

# ---- several methods: t.METHOD.json each, each named, each valid and nested
"$SIM" --method ulysses,ring-zigzag,usp --gpus 16 --layers 4 --trace "$tmp/m.json" > /dev/null 2> "$tmp/err"
st=$?
[ $st -eq 0 ] || bad "three methods: exit $st: $(cat "$tmp/err")"
for m in ulysses ring-zigzag usp; do
    if grep -qx "ulysses-sim: wrote $tmp/m.$m.json (trace of $m, GPU 0)" "$tmp/err"; then
        ok "stderr names $tmp/m.$m.json"
    else
        bad "stderr does not name $tmp/m.$m.json: $(cat "$tmp/err")"
    fi
    if "$CHECK" "$tmp/m.$m.json" > "$tmp/c.out"; then
        ok "$m at 16 GPUs: $(cat "$tmp/c.out")"
    else
        bad "$m at 16 GPUs: $(cat "$tmp/c.out")"
    fi
done
[ "$(wc -l < "$tmp/err")" -eq 3 ] || bad "three methods: stderr is not three lines: $(cat "$tmp/err")"
if grep -q '"args":{"name":"NVLink 2"}' "$tmp/m.ulysses.json"; then
    ok "ulysses: concurrent NVLink transfers on a second lane"
else
    bad "16 GPUs, ulysses: no second NVLink lane (the nesting case is not exercised)"
fi

# ---- --trace-ranks: each GPU its processes, as many slices as GPU 0
"$SIM" --method ulysses --gpus 16 --layers 4 --trace "$tmp/r.json" --trace-ranks 0,1 > /dev/null 2> "$tmp/err"
st=$?
if [ $st -eq 0 ] && grep -qx "ulysses-sim: wrote $tmp/r.json (trace of ulysses, GPUs 0-1)" "$tmp/err" &&
    "$CHECK" "$tmp/r.json" > "$tmp/c.out" &&
    grep -q "; GPUs 0 1 (slices \([1-9][0-9]*\) \1)$" "$tmp/c.out" &&
    grep -q '"args":{"name":"links of GPU 1"}' "$tmp/r.json"; then
    ok "--trace-ranks 0,1: $(cat "$tmp/c.out")"
else
    bad "--trace-ranks 0,1: exit $st, $(cat "$tmp/err") $(cat "$tmp/c.out")"
fi
"$SIM" --method ring --gpus 16 --layers 4 --trace "$tmp/r2.json" --trace-ranks 8,0-2 > /dev/null 2> "$tmp/err"
if grep -qx "ulysses-sim: wrote $tmp/r2.json (trace of ring, GPUs 0-2,8)" "$tmp/err" &&
    "$CHECK" "$tmp/r2.json" > "$tmp/c.out" && grep -q "; GPUs 0 1 2 8 (slices" "$tmp/c.out"; then
    ok "--trace-ranks 8,0-2: $(cat "$tmp/c.out")"
else
    bad "--trace-ranks 8,0-2: $(cat "$tmp/err") $(cat "$tmp/c.out")"
fi
# all: every GPU up to the 64 a trace holds; more is capped, and said so
"$SIM" --method ulysses --gpus 8 --layers 2 --trace "$tmp/a.json" --trace-ranks all > /dev/null 2> "$tmp/err"
if grep -qx "ulysses-sim: wrote $tmp/a.json (trace of ulysses, GPUs 0-7)" "$tmp/err" &&
    "$CHECK" "$tmp/a.json" > "$tmp/c.out" && grep -q "; GPUs 0 1 2 3 4 5 6 7 (slices" "$tmp/c.out"; then
    ok "--trace-ranks all on 8 GPUs: $(cat "$tmp/c.out")"
else
    bad "--trace-ranks all on 8 GPUs: $(cat "$tmp/err") $(cat "$tmp/c.out")"
fi
"$SIM" --method ulysses --gpus 128 --layers 2 --trace "$tmp/a2.json" --trace-ranks all > /dev/null 2> "$tmp/err"
if grep -qx "ulysses-sim: note: --trace-ranks all: tracing GPUs 0-63 of the 128 (a trace holds at most 64 GPUs)" "$tmp/err" &&
    grep -qx "ulysses-sim: wrote $tmp/a2.json (trace of ulysses, GPUs 0-63)" "$tmp/err" &&
    "$CHECK" "$tmp/a2.json" > "$tmp/c.out" && grep -q " 62 63 (slices" "$tmp/c.out" &&
    ! grep -q '"GPU 64"' "$tmp/a2.json"; then
    ok "--trace-ranks all on 128 GPUs: capped at 64 with a note"
else
    bad "--trace-ranks all on 128 GPUs: $(cat "$tmp/err") $(cat "$tmp/c.out")"
fi

exit $fail
