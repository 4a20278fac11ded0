#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# `ulysses explain`: bad shapes exit 2 with one line naming the problem (the
# library's and the simulator's rules); hand-derived volumes appear in the
# output; the closed form agrees with the send matrices and uly_plan_volume
# over a grid of shapes; --svg writes SVG, PNG and PDF (or is refused
# clearly when the build has no cairo).  No MPI.
set -u
: "${top_builddir:=.}"
U="$top_builddir/ulysses"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fails=0
cases=0

. "${top_srcdir:-.}/tests/expect.sh"

expect 0 "usage" -- "$U" explain --help
expect 0 "explain" -- "$U" --help

# bad input
expect 2 "--ranks P is required" -- "$U" explain
expect 2 "must be in" -- "$U" explain --ranks 0
expect 2 "unknown option '--frobnicate'" -- "$U" explain --ranks 2 --frobnicate
expect 2 "must be a multiple of kv-heads" -- "$U" explain --ranks 2 --heads 6 --kv-heads 4
expect 2 "SP degree 16 exceeds the 8 attention heads" -- "$U" explain --ranks 16 --heads 8
expect 2 "does not divide the 8 heads" -- "$U" explain --ranks 3 --method megatron-sp
expect 2 "must be one of" -- "$U" explain --ranks 2 --method nope
expect 2 "must end in .svg, .png or .pdf" -- "$U" explain --ranks 2 --svg "$W/x.txt"
expect 2 "directory" -- "$U" explain --ranks 2 --svg "$W/no/such/dir/x.svg"
expect 2 "expects an integer" -- "$U" explain --ranks 2 --seq 1x

# hand-derived numbers, P = 4, N = 16, H = 8, Hkv = 2, d = 64, f32:
# Q: 4 tokens x 6 other heads x 64 x 4 B = 6144; K: 4 x 3 replicated KV heads x 256 = 3072;
# O: 12 tokens x 2 heads x 256 = 6144 -> forward 18432; backward dO 6144 + dQ 6144 +
# dK, dV per query head 2 x 6144 -> 24576.
expect 0 "r0-r3  forward  256 x \[4 (8 - 2) + 2 x 4 (4 - 1) + (16 - 4) 2\] = 18432" -- \
    "$U" explain --ranks 4 --seq 16 --heads 8 --kv-heads 2
expect 0 "sum of its matrix rows: 18432 + 24576, uly_plan_volume: 18432 + 24576: agree" -- \
    "$U" explain --ranks 4 --seq 16 --heads 8 --kv-heads 2
expect 0 "replicated KV heads: 0 on r0 r1; 1 on r2 r3" -- "$U" explain --ranks 4 --seq 16 --heads 8 --kv-heads 2
# even MHA: the paper's formula applies: (2 x 512 + 2 x 512) x 16/4 x 4 x 3/4 = 24576
expect 0 "applies here (N, H divisible by P, no replication): equals" -- "$U" explain --ranks 4 --seq 16 --heads 8
expect 0 "= 24576" -- "$U" explain --ranks 4 --seq 16 --heads 8
# uneven: N = 10, H = 5 on 3 ranks: rank 0 sends Q 4 x (5 - 2) x 256 = 3072
expect 0 "uneven: rank 0 takes one more" -- "$U" explain --ranks 3 --seq 10 --heads 5
expect 0 "from r0     \[512\]  512   256  |        768       3072" -- "$U" explain --ranks 3 --seq 10 --heads 5
# megatron-sp: 4 (t-1)/t B N h e = 4 x 3/4 x 16 x 512 x 4 = 98304
expect 0 "= 98304" -- "$U" explain --ranks 4 --method megatron-sp

# the three-way check over a grid of shapes (uneven, GQA, MQA, P = 1, N < P)
for P in 1 2 3 4 5 8; do
    for N in 1 3 16 17; do
        for HK in "8 8" "8 2" "8 1" "12 3" "5 5" "9 3"; do
            set -- $HK
            [ "$1" -ge "$P" ] || continue
            expect 0 "check: closed form == sum of the send matrices == uly_plan_volume for every rank: yes" -- \
                "$U" explain --ranks "$P" --seq "$N" --heads "$1" --kv-heads "$2" --batch 2 --head-dim 3
            if [ $(($1 % P)) -eq 0 ]; then
                expect 0 "check: closed form == sum of the send matrices for every rank: yes" -- \
                    "$U" explain --ranks "$P" --seq "$N" --heads "$1" --kv-heads "$2" --method megatron-sp
            fi
        done
    done
done
# ring family: hand-derived causal work on P = 4, N = 16 (chunks of 4 tokens, H = 8):
# a diagonal block has 4*5/2 = 10 pairs, a full one 16; the last rank of a
# contiguous ring does 10 + 3 x 16 = 58 per head (464 with 8 heads), the
# ideal is 136/4 = 34 per head: balance 59%.  Zigzag evens it out.
expect 0 "r3           80        128        128        128        464" -- "$U" explain --ranks 4 --method ring --causal
expect 0 "balance 59%" -- "$U" explain --ranks 4 --method ring --causal
expect 0 "balance 100%" -- "$U" explain --ranks 4 --method zigzag --causal
expect 0 "r0       0-1,14-15           6-9     4-5,10-11     2-3,12-13" -- "$U" explain --ranks 4 --method zigzag --causal
# no mask: each rank forwards R-1 = 3 blocks of K and V: 2 x 3 x 4 tokens x 8 heads x 64 x 4 B
expect 0 "rank 0 sends 49152 in its forward ring hops: equal" -- "$U" explain --ranks 4 --method ring
expect 0 "6 of the 12 hops would carry a block" -- "$U" explain --ranks 4 --method ring --causal
expect 0 "2 (P-1) B (N/P) Hkv d e = 2 x 3 x 1 x (16/4) x 8 x 64 x 4 = 49152" -- "$U" explain --ranks 4 --method allgather
expect 0 "U = 4, the largest divisor of P = 8 not above H = 4" -- "$U" explain --ranks 8 --heads 4 --method usp
expect 0 "ranks 0 4; K, V" -- "$U" explain --ranks 8 --heads 4 --method usp --ulysses-degree 2 --placement ring-inner
expect 2 "usp needs a ulysses degree dividing 8 ranks (got 3)" -- "$U" explain --ranks 8 --method usp --ulysses-degree 3
expect 2 "usp: ulysses degree 8 exceeds the 4 heads" -- "$U" explain --ranks 8 --heads 4 --method usp --ulysses-degree 8
expect 2 "applies to --method usp only" -- "$U" explain --ranks 4 --method ring --ulysses-degree 2
expect 2 "must be one of" -- "$U" explain --ranks 4 --method usp --placement sideways
for m in "ring" "zigzag" "allgather" "usp --ulysses-degree 2" "usp --ulysses-degree 2 --placement ring-inner"; do
    for sh in "--seq 16 --heads 8" "--seq 17 --heads 6 --kv-heads 2 --batch 2" "--seq 5 --heads 4 --kv-heads 1 --causal" \
              "--seq 30 --heads 4 --window 3 --causal"; do
        # shellcheck disable=SC2086
        expect 0 "check: bytes sent == bytes received, summed over all ranks: [0-9]* == [0-9]*: yes" -- \
            "$U" explain --ranks 4 --method $m $sh
    done
done

# large P: tables are abridged, the check still covers every rank
expect 0 "for every rank: yes" -- "$U" explain --ranks 256 --seq 100000 --heads 512 --kv-heads 8

# figures (.svg needs no cairo; .png and .pdf do)
expect 0 "figure written to" -- "$U" explain --ranks 3 --seq 10 --heads 5 --svg "$W/f.svg"
head -c 5 "$W/f.svg" | grep -q '<?xml' || { echo "FAIL: f.svg is not SVG"; fails=$((fails + 1)); }
"$U" explain --ranks 3 --seq 10 --heads 5 --svg "$W/g.svg" >/dev/null 2>&1
cmp -s "$W/f.svg" "$W/g.svg" || { echo "FAIL: two renderings of one figure differ"; fails=$((fails + 1)); }
if "$U" explain --ranks 2 --svg "$W/probe.png" >/dev/null 2>"$W/err"; then
    for ext in png pdf; do
        expect 0 "figure written to" -- "$U" explain --ranks 3 --seq 10 --heads 5 --svg "$W/f.$ext"
    done
    expect 0 "figure written to" -- "$U" explain --ranks 4 --method megatron-sp --svg "$W/m.svg"
    expect 0 "figure written to" -- "$U" explain --ranks 4 --method zigzag --causal --svg "$W/z.png"
    expect 0 "figure written to" -- "$U" explain --ranks 8 --heads 4 --method usp --svg "$W/u.pdf"
    head -c 4 "$W/f.png" | grep -q 'PNG' || { echo "FAIL: f.png is not PNG"; fails=$((fails + 1)); }
    head -c 4 "$W/f.pdf" | grep -q '%PDF' || { echo "FAIL: f.pdf is not PDF"; fails=$((fails + 1)); }
else
    expect 2 "no PNG or PDF support" -- "$U" explain --ranks 2 --svg "$W/x.png"
fi

# ---- bounds: what --help states is served in bounded time and memory
# (--ranks at most 1024; a figure at most 64 ranks: it grew as P^2, 8.2 GB at 1024)
expect 2 "--ranks must be in 1..1024, got 4096" -- "$U" explain --ranks 4096 --heads 4096
expect 2 "a figure draws at most 64 ranks (one band each, P x P matrix cells), not --ranks 1024" -- \
    timeout 10 "$U" explain --ranks 1024 --heads 1024 --svg "$W/big.svg"
expect 2 "not --ranks 65" -- timeout 10 "$U" explain --ranks 65 --heads 65 --method ring --svg "$W/big.png"
cases=$((cases + 1))
if [ -e "$W/big.svg" ] || [ -e "$W/big.png" ]; then echo "FAIL: a refused figure was written"; fails=$((fails + 1)); else echo "ok: no refused figure on disk"; fi
# the largest P in text: every P x P block checked, O(P) memory, seconds
expect 0 "for every rank: yes" -- timeout 120 "$U" explain --ranks 1024 --heads 1024 --seq 4096
expect 0 "[1..1K]" -- "$U" explain --help
seen_help() { grep -q -- "$1" "$W/out" || { echo "FAIL: --help lacks '$1'"; fails=$((fails + 1)); }; }
seen_help "with --svg at most 64"
# the largest figure (SVG: written in every build): bounded in time (timeout) and size
expect 0 "figure written to" -- timeout 60 "$U" explain --ranks 64 --heads 64 --seq 4096 --svg "$W/p64.svg"
cases=$((cases + 1))
sz=$(wc -c < "$W/p64.svg")
if [ "$sz" -le 20000000 ]; then echo "ok: the 64-rank figure is $sz bytes"; else echo "FAIL: the 64-rank figure is $sz bytes"; fails=$((fails + 1)); fi
# a write error on the standard output is a failure (exit 1), not a silent exit 0
if [ -c /dev/full ]; then
    expect 1 "error writing the standard output: No space left on device" -- sh -c '"$0" explain --ranks 2 > /dev/full' "$U"
    expect 1 "error writing the standard output" -- sh -c '"$0" --help > /dev/full' "$U"
else
    echo "skipped: /dev/full cases (no /dev/full)"
fi

echo "$cases cases, $fails failures"
[ "$fails" -eq 0 ]
