#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Every sequence-parallel method on 1, 3, 4 and 8 ranks (oversubscribed;
# 1: one-position rings, bitwise; 3: odd P, uneven chunks; 4: even P, usp
# 2 x 2 in both placements; 8: usp with more ranks than heads, the first two
# shapes), each under a timeout so that a hang fails instead of blocking the
# test run.  Then `ulysses bench methods` started with different options on
# two ranks: every rank must stop with exit 2 naming the option; and --json.
set -u
: "${top_builddir:=.}"
: "${MPIRUN:=mpirun}"
export CK_FORK=no OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
status=0
for np in 1 3 4 8; do
    echo "== $np rank(s)"
    shapes=""
    [ "$np" -gt 4 ] && shapes=2   # 8 ranks on a small machine: the first two shapes
    timeout 600 "$MPIRUN" --oversubscribe --mca mpi_yield_when_idle 1 -np "$np" \
        "$top_builddir/tests/test_methods" $shapes || {
        echo "FAILED on $np rank(s) (exit $?)"
        status=1
    }
done
B="$top_builddir/ulysses bench methods --seq 32 --heads 2 --repeat 1"
check_mismatch() {
    want=$1; shift
    out=$(timeout 120 "$MPIRUN" --oversubscribe "$@" 2>&1)
    rc=$?
    if [ "$rc" -ne 2 ] || ! printf '%s\n' "$out" | grep -q -- "$want"; then
        echo "FAILED: exit $rc (want 2) or no '$want': $*"
        printf '%s\n' "$out" | head -5
        status=1
    else
        echo "ok: $want"
    fi
}
check_mismatch "ranks disagree on --method: ring on rank 0; zigzag on rank 1" \
    -np 1 $B --method ring : -np 1 $B --method zigzag
check_mismatch "ranks disagree on --doc-lens:" -np 1 $B --method ring : -np 1 $B --method ring --doc-lens 16,16
check_mismatch "ranks disagree on --ulysses-degree: 2 on rank 0; not given on rank 1" \
    -np 1 $B --method usp --ulysses-degree 2 : -np 1 $B --method usp
check_mismatch "ranks disagree on --bf16-partials:" -np 1 $B --method ring --bf16-partials : -np 1 $B --method ring
# --json: one object, written through jansson, with the byte verdict
out=$(timeout 120 "$MPIRUN" --oversubscribe -np 2 $B --method zigzag --causal --backward --check --json 2>&1)
rc=$?
if [ "$rc" -ne 0 ] || ! printf '%s\n' "$out" | grep -q '^{"bench": "methods", "method": "zigzag",.*"bytes_match_plan": true.*"bitwise_one_process": false}$'; then
    echo "FAILED: bench methods --json (exit $rc)"
    printf '%s\n' "$out" | head -5
    status=1
else
    echo "ok: bench methods --json"
fi
exit $status
