#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The memory preflight of `ulysses attn` and `ulysses bench methods` counts,
# for the library's part, exactly what the library allocates: with
# ULYSSES_MEMORY_REPORT=1 every rank prints the heap bytes and the window
# segment its preflight took from uly_sp_memory, and the bytes the
# allocation hooks counted during uly_sp_create and the segment it made.
# Every rank must report, and on every rank both pairs must be equal: every
# method, the all-to-all modes pack, shm and auto, overlap, documents, 1 to 4
# ranks, uneven tokens and heads, a GQA group cut between ranks.
set -u
: "${top_builddir:=.}"
: "${MPIRUN:=mpirun}"
U="$top_builddir/ulysses"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fails=0
cases=0

# uneven: 37 tokens, 6 query heads on up to 4 ranks; 2 KV heads (groups of 3 cut between ranks)
SHAPE="--seq 37 --heads 6 --kv-heads 2 --head-dim 8 --repeat 1 --warmup 0"

# run P CMD ARGS...: on P ranks, every rank's report equal
run() {
    P=$1; shift
    cases=$((cases + 1))
    ULYSSES_MEMORY_REPORT=1 timeout 120 "$MPIRUN" --oversubscribe -x ULYSSES_MEMORY_REPORT -np "$P" "$U" "$@" \
        >"$W/out" 2>"$W/err"
    rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "FAIL: exit $rc: P=$P $*"; sed 's/^/  | /' "$W/err" | head -5
        fails=$((fails + 1)); return
    fi
    grep 'memory report: library heap: preflight' "$W/err" >"$W/rep"
    n=$(wc -l <"$W/rep")
    bad=$(sed -n 's/.*rank \([0-9]*\): memory report: library heap: preflight \([0-9]*\), created \([0-9]*\); window: preflight \([0-9]*\), created \([0-9]*\)$/\1 \2 \3 \4 \5/p' \
          "$W/rep" | awk '$2 != $3 || $4 != $5 || $2 == 0 { print "rank " $1 ": heap " $2 " vs " $3 ", window " $4 " vs " $5 }')
    if [ "$n" -ne "$P" ] || [ -n "$bad" ]; then
        echo "FAIL: P=$P $*: $n reports of $P; $bad"; sed 's/^/  | /' "$W/rep" | head -5
        fails=$((fails + 1)); return
    fi
    win=$(awk '{ s += $NF } END { print s + 0 }' "$W/rep")
    echo "ok: P=$P $*: preflight == allocated on every rank (window bytes created: $win)"
}

# every method on 1 to 4 ranks, pack and shm where there is an all-to-all (a cross-product
# would take minutes under the sanitizers: each method and mode meets several rank counts)
run 1 attn $SHAPE --method ulysses --a2a pack
run 1 attn $SHAPE --method ring
run 2 attn $SHAPE --method ulysses --a2a shm
run 2 attn $SHAPE --method usp --a2a pack
run 2 attn $SHAPE --method zigzag
run 2 attn $SHAPE --method allgather
run 3 attn $SHAPE --method ulysses --a2a pack
run 3 attn $SHAPE --method usp --a2a shm
run 3 attn $SHAPE --method ring --causal
run 3 attn $SHAPE --method allgather --causal
run 4 attn $SHAPE --method ulysses --a2a shm
run 4 attn $SHAPE --method ulysses                      # auto: its window and the cross-memory probe
run 4 attn $SHAPE --method usp --ulysses-degree 2 --placement ring-inner --a2a shm
run 4 attn $SHAPE --method usp --ulysses-degree 2 --a2a pack
run 4 attn $SHAPE --method zigzag
# the overlapped all-to-alls' chunk tables and staging; documents
run 3 attn --seq 48 --heads 6 --kv-heads 3 --head-dim 8 --repeat 1 --warmup 0 --overlap on --a2a pack
run 2 attn --seq 48 --heads 6 --kv-heads 3 --head-dim 8 --repeat 1 --warmup 0 --overlap on --a2a shm
run 3 attn $SHAPE --method zigzag --doc-lens 10,20,7 --causal
# bench methods takes the same figure
run 3 bench methods --method ulysses --seq 37 --heads 6 --kv-heads 2 --head-dim 8 --repeat 1
run 4 bench methods --method usp --ulysses-degree 2 --seq 37 --heads 6 --kv-heads 2 --head-dim 8 --repeat 1

# a report must be able to fail: without the variable nothing is printed
cases=$((cases + 1))
timeout 60 "$U" attn $SHAPE >"$W/out" 2>"$W/err"
if grep -q "memory report" "$W/err"; then echo "FAIL: a memory report without ULYSSES_MEMORY_REPORT"; fails=$((fails + 1))
else echo "ok: no report without ULYSSES_MEMORY_REPORT"; fi

echo "$cases cases, $fails failed"
[ "$fails" -eq 0 ]
