#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# ulysses check (doc/check.md): per-rank dumps written by tests/chkdump from
# the float64 reference with the plan layer's shard map -- a correct dump
# passes (exit 0) in both file formats and in bshd and bhsd; planted defects
# exit 1 with their class and rank; bad inputs exit 2 with a one-line message
# naming the file and the tensor (a missing rank file, shard shapes that
# disagree across ranks, duplicated or missing tokens, a layout that does not
# fit the shapes).
set -u
: "${top_builddir:=.}"
U="$top_builddir/ulysses"
C="$top_builddir/tests/chkdump"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fails=0
cases=0

. "${top_srcdir:-.}/tests/expect.sh"

mk() { # mk NAME chkdump-args...
    n=$1; shift
    "$C" "$W/$n" "$@" || { echo "FAIL: chkdump $n $*"; exit 1; }
}

expect 0 "usage" -- "$U" check --help

# correct dumps
mk ok zigzag 4 128 4 2 16 causal bwd lse
expect 0 "verdict: PASS" -- "$U" check "$W/ok" --method zigzag --causal
expect 0 "the zigzag map's own 1.000" -- "$U" check "$W/ok" --method p2p --causal
expect 0 '"verdict": "pass"' -- "$U" check "$W/ok" --method dual-chunk --causal --json
mk npy ulysses 3 61 6 2 8 bwd lse npy bhsd elem=f32
expect 0 "verdict: PASS" -- "$U" check "$W/npy" --method a2a --layout bhsd
expect 0 "compute type f32" -- "$U" check "$W/npy" --method ulysses --layout bhsd
mk tok ring 3 90 4 4 8 causal tokens lse
expect 0 "the ranks' token indices" -- "$U" check "$W/tok" --method ring --causal
mk bf ring 2 64 4 4 16 causal bwd elem=bf16
expect 0 "compute type bf16" -- "$U" check "$W/bf" --method ring --causal
mk thd zigzag 2 96 4 2 8 causal bwd lse thd docs=30,50,16
expect 0 "3 documents; layout thd" -- "$U" check "$W/thd" --method zigzag --causal --layout thd
expect 2 "holds cu_seqlens and --doc-lens gives the documents too" -- \
    "$U" check "$W/thd" --method zigzag --causal --layout thd --doc-lens 40,56
mk usp usp 4 64 4 4 8 causal bwd lse
expect 0 "verdict: PASS" -- "$U" check "$W/usp" --method usp --causal

# planted defects: exit 1, the class and the localisation
mk dk zigzag 4 128 4 2 16 causal bwd lse dk=2
expect 1 "FAIL \[backward-kv\]: rank 2, tokens 32-47 (zigzag chunk 2), 80-95 (zigzag chunk 5)" -- \
    "$U" check "$W/dk" --method zigzag --causal
expect 1 '"defect": "backward-kv"' -- "$U" check "$W/dk" --method zigzag --causal --json
mk zero ring 4 64 4 4 8 bwd zero-o=1
expect 1 "FAIL \[zero-output\]: rank 1, tokens 16-31" -- "$U" check "$W/zero" --method ring
# the right dump under the wrong mask: no hypothesis but a forward defect
expect 1 "FAIL \[" -- "$U" check "$W/ok" --method zigzag

# bad input: exit 2 naming the file and the tensor
mk skip zigzag 4 128 4 2 16 skip=2
expect 2 "rank2.safetensors is missing (rank 3's dump is there)" -- "$U" check "$W/skip" --method zigzag
expect 2 "rank4.safetensors is missing (--ranks 5)" -- "$U" check "$W/ok" --method zigzag --ranks 5
mk ks zigzag 4 128 4 2 16 kshape=2
expect 2 "rank2.safetensors: k has shape (1, 32, 3, 16), rank 0's k has (1, 32, 2, 16)" -- \
    "$U" check "$W/ks" --method zigzag
mk mix ring 2 64 4 4 8 bwd elem=f32 && mk mix1 ring 2 64 4 4 8 bwd && cp "$W/mix1/rank1.safetensors" "$W/mix/"
expect 2 "rank1.safetensors: q is f64, rank 0's q is f32 (the ranks disagree)" -- "$U" check "$W/mix" --method ring
mk dup ring 2 64 4 4 8 tokens dup
expect 2 "token 0 is held twice: by rank 0 (row 0) and rank 1 (row 0)" -- "$U" check "$W/dup" --method ring
mk miss ring 2 64 4 4 8 tokens miss
expect 2 "token 32 is held by no rank" -- "$U" check "$W/miss" --method ring
expect 2 "k has shape (1, 32, 2, 16), q has (1, 32, 4, 16): in bhsd" -- "$U" check "$W/ok" --method zigzag --layout bhsd
expect 2 "q has shape (1, 32, 4, 16), which is not thd's (n, H, d)" -- "$U" check "$W/ok" --method zigzag --layout thd
mk rows ring 3 64 4 4 8
expect 2 "rank 0 has 22 rows; the zigzag shard map of 3 ranks gives it 21 (tokens 0-10 and 54-63)" -- \
    "$U" check "$W/rows" --method zigzag
expect 2 "--method M is required" -- "$U" check "$W/ok"
expect 2 "--method 'spiral': unknown" -- "$U" check "$W/ok" --method spiral
expect 2 "no rank0.safetensors and no rank0/ directory" -- "$U" check "$W"
expect 2 "the dump directory DIR comes first" -- "$U" check --method ring

echo "$cases cases, $fails failures"
[ "$fails" -eq 0 ]
