#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# `ulysses check --data DIR`: the training-level checks of a sequence-parallel
# data pipeline on per-rank dumps written by tests/datagen.  A correct dump
# passes (exit 0) for every method, both file formats, documents and batch
# rows; each planted defect is found (exit 1) and named with its rank and
# token; a token missing or held twice is bad input (exit 2).  No MPI.
set -u
: "${top_builddir:=.}"
# tests/datagen links OpenBLAS: no worker threads for a file writer
OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}; export OPENBLAS_NUM_THREADS
U="$top_builddir/ulysses"
GEN="$top_builddir/tests/datagen"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fails=0
cases=0

. "${top_srcdir:-.}/tests/expect.sh"

gen() { # gen NAME METHOD P [datagen options]: a dump in $W/NAME
    d="$W/$1"; shift
    rm -rf "$d"
    "$GEN" "$d" "$@" || { echo "FAIL: datagen $*"; fails=$((fails + 1)); }
}

expect 0 "usage" -- "$U" check --data "$W" --help

# ------------------------------------------------------ correct dumps pass
# zigzag on 4 ranks (chunks r and 7 - r), documents whose ends fall unevenly
# over the ranks, so that the per-rank token counts differ
DL=8,8,8,8,8,8,8,8,100,92
gen ok zigzag 4 --doc-lens $DL
expect 0 "verdict: ok" -- "$U" check --data "$W/ok" --method zigzag --doc-lens $DL
expect 0 "256 tokens, each on exactly one rank (the zigzag shard map)" -- \
    "$U" check --data "$W/ok" --method zigzag --doc-lens $DL
expect 0 "equals the token-weighted mean" -- "$U" check --data "$W/ok" --method zigzag --doc-lens $DL
expect 0 '"pass": true' -- "$U" check --data "$W/ok" --method zigzag --doc-lens $DL --json
# Megatron's cp_comm_type name for zigzag
expect 0 "verdict: ok" -- "$U" check --data "$W/ok" --method p2p --doc-lens $DL
# without the documents the document ends are wrong labels
expect 1 "label ignore_index -100 where no document ends: rank 0, token 7" -- \
    "$U" check --data "$W/ok" --method zigzag
# (prompt masking accepted: the labels pass; the positions restart per document)
expect 1 "labels     ok" -- "$U" check --data "$W/ok" --method zigzag --masked-labels
# the documents as cumulative offsets
"$top_builddir/tests/npytool" i64 "$W/cu.npy" 0 0 8 16 24 32 40 48 56 64 164 256
expect 0 "verdict: ok" -- "$U" check --data "$W/ok" --method zigzag --cu-seqlens "$W/cu.npy"
expect 0 "verdict: ok" -- "$U" check --data "$W/ok" --method zigzag --docs "$W/cu.npy"
# the other methods, .npy directories, i32 ids, two batch rows, uneven N
for m in ulysses ring allgather; do
    gen ok_$m $m 3 --seq 100 --batch 2 --npy --i32
    expect 0 "verdict: ok" -- "$U" check --data "$W/ok_$m" --method $m
done
gen ok_usp usp 4 --udeg 2 --seq 64
expect 0 "verdict: ok" -- "$U" check --data "$W/ok_usp" --method usp --ulysses-degree 2
# the ranks' own tokens tensors as the map (no --method needed); bf16 losses
gen ok_tok zigzag 4 --tokens --loss-elem bf16
expect 0 "the ranks' tokens tensors" -- "$U" check --data "$W/ok_tok"
# the shard map of another method than the dump's: bad input, named
gen ok_ring ring 3 --seq 100
expect 2 "the zigzag shard map of N = 100 on 3 ranks gives rank 0 33" -- \
    "$U" check --data "$W/ok_ring" --method zigzag
# absent optional tensors are skipped, said so
gen nopos ulysses 2 --seq 32 --no-pos --no-loss
expect 0 "positions  skipped  no position_ids in the dump" -- "$U" check --data "$W/nopos"

# ------------------------------------------------------ planted defects
# Labels rolled per shard: torch.roll(input_ids, -1) on each rank's local
# shard, so the label of a shard's last token is its own first token instead
# of the next shard's first token (Megatron-LM #673, NVIDIA-NeMo/Automodel
# PR #3544).  Contiguous shards: rank 0's last token 63 gets token 0's id.
gen roll ulysses 4 --plant roll-labels
expect 1 "labels rolled per shard: rank 0, token 63 (row 63 of its shard): label 3 is the id of token 0, its shard's own first token" -- \
    "$U" check --data "$W/roll" --method ulysses
expect 1 '"defect": "rolled-per-shard"' -- "$U" check --data "$W/roll" --json
# zigzag: rank 0 holds chunks 0 and 7; chunk 0's last token 31 is labelled
# with the next local row, chunk 7's first token 224
gen rollz zigzag 4 --plant roll-labels
expect 1 "labels rolled per shard: rank 0, token 31 (row 31 of its shard): label .* is the id of token 224, the next row of its own shard" -- \
    "$U" check --data "$W/rollz" --method zigzag
# labels not shifted at all
gen unsh ring 2 --seq 64 --plant unshifted
expect 1 "labels not shifted: rank 0, token 0" -- "$U" check --data "$W/unsh" --method ring
# Local positions: each rank restarts position_ids at 0 at its shard start
# instead of the global position (the position ids of a CP shard must be
# global; see Megatron-LM's get_batch_on_this_cp_rank).  Rank 0 of a
# contiguous map is right; rank 1 is the first wrong one.
gen lpos ulysses 4 --plant local-positions
expect 1 "local positions: rank 1 restarts its positions at 0 at its shard start: token 64 (row 0 of its shard) has position 0, expected 64" -- \
    "$U" check --data "$W/lpos" --method ulysses
gen lposz zigzag 4 --plant local-positions --doc-lens $DL
expect 1 "local positions: rank 0" -- "$U" check --data "$W/lposz" --method zigzag --doc-lens $DL
# positions of a contiguous shard on a zigzag map
gen cpos zigzag 4 --plant contiguous-positions
expect 1 "positions do not follow the chunks of the zigzag shard map: rank 0's positions are those of a contiguous shard; token 224 (row 32 of its shard) has position 32, expected 224" -- \
    "$U" check --data "$W/cpos" --method zigzag
# The loss as the mean of per-rank means instead of token-weighted over all
# ranks with ignore_index (the ranks count different tokens here).
gen mom zigzag 4 --plant mean-of-means --doc-lens $DL
expect 1 "mean of per-rank means, not token-weighted: rank 0 reports" -- \
    "$U" check --data "$W/mom" --method zigzag --doc-lens $DL
expect 1 '"defect": "mean-of-rank-means"' -- "$U" check --data "$W/mom" --method zigzag --doc-lens $DL --json
gen rmean ulysses 2 --seq 64 --plant rank-mean
expect 1 "the rank's own mean, not reduced across ranks: rank 0" -- "$U" check --data "$W/rmean"
gen nan ulysses 2 --seq 64 --plant nan-loss
expect 1 "non-finite per-token loss nan on rank 1" -- "$U" check --data "$W/nan"

# ------------------------------------------------------ bad input (exit 2)
# a token on no rank: rank 1 (chunks 1 and 6 of 32 tokens) drops its middle
# row, token 192
gen miss zigzag 4 --tokens --plant missing-token
expect 2 "coverage: token 192 is on no rank -- 1 missing token of N = 256" -- "$U" check --data "$W/miss"
# a token on two ranks: rank 1 also holds rank 0's first token
gen dup zigzag 4 --tokens --plant dup-token
expect 2 "coverage: token 0 is held twice: by rank 0 (row 0) and rank 1 (row 64)" -- "$U" check --data "$W/dup"
expect 2 "no rank0.safetensors or rank0/" -- "$U" check --data "$W/ok_ulysses/rank0"
expect 2 "rank 2 of 3: neither" -- "$U" check --data "$W/nopos" --ranks 3
expect 2 "--ranks 1, but" -- "$U" check --data "$W/nopos" --ranks 1
expect 2 "--method usp needs --ulysses-degree" -- "$U" check --data "$W/ok_usp" --method usp
expect 2 "--method 'nope'" -- "$U" check --data "$W/ok" --method nope
expect 2 "--doc-lens '8,8' sums to 16" -- "$U" check --data "$W/ok" --doc-lens 8,8
expect 2 "not a directory" -- "$U" check --data "$W/cu.npy"
cp "$W/cu.npy" "$W/ok_ulysses/rank1/labels.npy"
expect 2 "rank1/labels.npy: shape (11,), expected input_ids' (2, 33)" -- "$U" check --data "$W/ok_ulysses"

# a float tensor where integers belong, a tensor on some ranks only, a
# truncated safetensors file: each named with its file
gen bad1 ulysses 3 --seq 30 --npy
"$top_builddir/tests/npytool" write "$W/bad1/rank2/position_ids.npy" f32 1 1 10
expect 2 "rank2/position_ids.npy: element type f32, expected integers (i32, i64)" -- "$U" check --data "$W/bad1"
rm "$W/bad1/rank2/position_ids.npy"
expect 2 "rank2: tensor position_ids is absent, but present on rank 0" -- "$U" check --data "$W/bad1"
rm "$W/bad1/rank0/input_ids.npy"
expect 2 "rank0: no tensor input_ids" -- "$U" check --data "$W/bad1"
expect 2 "tensors and none named cu_seqlens" -- "$U" check --data "$W/ok" --cu-seqlens "$W/ok/rank0.safetensors"
gen bad2 ring 2 --seq 16
head -c 20 "$W/bad2/rank1.safetensors" > "$W/bad2/t" && mv "$W/bad2/t" "$W/bad2/rank1.safetensors"
expect 2 "rank1.safetensors" -- "$U" check --data "$W/bad2" --method ring

echo "$cases cases, $fails failures"
[ "$fails" -eq 0 ]
