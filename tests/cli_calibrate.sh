#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# `ulysses calibrate` and the loop to the simulator:
#   - a quick calibration on 2 ranks writes a platform file (progress on
#     stderr; every platform number with its method and spread) that
#     ulysses-sim loads, both for a training run and for `ulysses-sim attn`;
#   - bad options (a --name that is not UTF-8 included) and an unwritable
#     --out exit 2 before measuring;
#   - the bytes `ulysses attn` measures on rank 0 equal, call by call, the
#     bytes `ulysses-sim attn` simulates for the same job (even, uneven and GQA
#     shapes on 2 and 3 ranks; `ulysses attn` itself checks every rank against
#     the plan, and the simulator's test suite checks every rank of the
#     simulator against the plan).
set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
: "${MPIRUN:=mpirun}"
U="$top_builddir/ulysses"
S="$top_builddir/ulysses-sim"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# ------------------------------------------------------------ calibrate
timeout 300 "$MPIRUN" --oversubscribe -np 2 "$U" calibrate --quick --seq 256 --repeat 2 --name cal-test \
    --out "$W/p.json" >"$W/out" 2>"$W/err"
rc=$?
cat "$W/out"
[ "$rc" -eq 0 ] || { bad "calibrate exited $rc"; sed 's/^/  | /' "$W/err" | tail -5; }
[ -s "$W/p.json" ] || bad "no platform file written"
for t in "$W"/p.json.tmp*; do
    if [ -e "$t" ]; then bad "a temporary file was left: $t"; fi
done
[ "$(grep -c '^calibrate \[' "$W/err")" -ge 5 ] || bad "no progress lines on stderr"
grep -q '"gpus_per_node": 2' "$W/p.json" || bad "gpus_per_node is not the 2 ranks of the node"
# the measured backward rate and the all-to-all call cost reach the platform
# keys the simulator reads (not only the calibration notes)
grep -q '^    "attention_bwd_efficiency": [0-9]' "$W/p.json" || bad "gpu.attention_bwd_efficiency is not in the gpu block"
[ "$(grep -c '^    "a2a_call_us": [0-9]' "$W/p.json")" -eq 2 ] ||
    bad "intra_node.a2a_call_us and inter_node.a2a_call_us are not both written"
n=$(tr -d ' \n' <"$W/p.json" | grep -o '"key":"[^"]*","value":[^,]*,"unit":"[^"]*","method":"[^"]*","spread":{"median"' |
    wc -l)
[ "$n" -ge 6 ] || bad "only $n platform numbers carry a method and a spread (want >= 6)"
"$S" attn --platform "$W/p.json" --gpus 2 --seq 512 --heads 4 >"$W/sim.out" 2>&1 ||
    { bad "ulysses-sim attn does not accept the calibrated platform"; cat "$W/sim.out"; }
"$S" --platform "$W/p.json" --gpus 2 --model gpt-1.2b --seq 4096 --method ulysses >"$W/sim2.out" 2>&1 ||
    { bad "ulysses-sim does not accept the calibrated platform"; cat "$W/sim2.out"; }
grep -q 'cal-test' "$W/sim2.out" || bad "ulysses-sim does not name the calibrated platform"
grep -q 'uly_dist_a2a, mode auto,' "$W/p.json" || bad "the all-to-all's method does not name the mode (auto)"
# --a2a: the mode the jobs to predict use is the one measured
timeout 300 "$MPIRUN" --oversubscribe -np 2 "$U" calibrate --quick --seq 256 --repeat 2 --a2a shm \
    --out "$W/shm.json" >"$W/out" 2>"$W/err" || { bad "calibrate --a2a shm exited $?"; tail -5 "$W/err"; }
grep -q 'uly_dist_a2a, mode shm,' "$W/shm.json" || bad "calibrate --a2a shm: the method does not name mode shm"

# ------------------------------------------------------------ bad input
for args in "--quick" "--out $W/x.json --repeat 0" "--out $W/x.json --bogus" \
            "--out $W/no/such/dir/x.json --quick" "--out $W/x.json --quick --name $(printf 'a\377b')" \
            "--out $W/x.json --quick --a2a bogus"; do
    # shellcheck disable=SC2086
    timeout 120 "$MPIRUN" --oversubscribe -np 2 "$U" calibrate $args >"$W/out" 2>"$W/err"
    rc=$?
    [ "$rc" -eq 2 ] || bad "calibrate $args: exit $rc, want 2"
    grep -q 'ulysses calibrate' "$W/err" || bad "calibrate $args: no message"
    grep -q '^calibrate \[' "$W/err" && bad "calibrate $args: measured before refusing"
done

# ------------------------------------------------------------ bytes: run == simulator
# bytes NAME FILE: "sent recv" of all-to-all NAME from either JSON
bytes() {
    tr -d '\n' <"$2" | grep -o "\"$1\": {\"sent\": [0-9]*[^}]*}" | head -n 1 |
        sed 's/.*"sent": \([0-9]*\).*"recv": \([0-9]*\).*/\1 \2/'
}
for shape in "2 1024 8 8 16" "3 1000 6 2 8" "3 999 7 7 4"; do
    # shellcheck disable=SC2086
    set -- $shape
    P=$1 N=$2 H=$3 KV=$4 D=$5
    timeout 120 "$MPIRUN" --oversubscribe -np "$P" "$U" attn --seq "$N" --heads "$H" --kv-heads "$KV" \
        --head-dim "$D" --backward --repeat 1 --warmup 0 --json >"$W/run.json" 2>"$W/err" ||
        { bad "attn P=$P N=$N H=$H Hkv=$KV d=$D failed (exit $?)"; cat "$W/err" "$W/run.json"; continue; }
    grep -q '"bytes_match_all_ranks": true' "$W/run.json" || bad "attn: bytes differ from the plan on some rank"
    "$S" attn --platform dgx-a100-40g --gpus "$P" --seq "$N" --heads "$H" \
        --kv-heads "$KV" --head-dim "$D" --format json >"$W/sim.json" 2>"$W/err" ||
        { bad "ulysses-sim attn P=$P failed"; cat "$W/err"; continue; }
    for a in q k v o "do" dq dk dv; do
        run=$(bytes "$a" "$W/run.json") sim=$(bytes "$a" "$W/sim.json")
        if [ -z "$run" ] || [ "$run" != "$sim" ]; then
            bad "P=$P N=$N H=$H Hkv=$KV d=$D all-to-all $a: run sent/recv '$run', simulator '$sim'"
        fi
    done
    echo "P=$P N=$N H=$H Hkv=$KV d=$D: bytes of the run == bytes of the simulator, all 8 all-to-alls"
done

[ "$fails" -eq 0 ] && echo "PASS: calibrate"
exit "$fails"
