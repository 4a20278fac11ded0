#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The `ulysses` command line: help, the catalogue of bad inputs (each must
# exit 2 with a message naming the problem), and .npy interchange (outputs on
# 1 and 3 ranks are bitwise identical); every sequence-parallel method
# (--method) through the same interface, with documents (--doc-lens, --docs).
set -u
: "${top_builddir:=.}"
: "${MPIRUN:=mpirun}"
U="$top_builddir/ulysses"
T="$top_builddir/tests/npytool"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fails=0
cases=0

. "${top_srcdir:-.}/tests/expect.sh"

# help
expect 0 "usage" -- "$U" --help
expect 0 "usage" -- "$U" attn --help
expect 0 "usage" -- "$U" bench --help
expect 0 "usage" -- "$U" bench kernel --help
expect 0 "usage" -- "$U" bench memory --help
expect 0 "usage" -- "$U" bench a2a --help
expect 0 "ulysses" -- "$U" version

# bad command lines
expect 2 "usage" -- "$U"
expect 2 "unknown command" -- "$U" frobnicate
expect 2 "unknown option '--frobnicate'" -- "$U" attn --frobnicate
# an option's value left out: the next word is an option, not a file name or a value
expect 2 "option --out needs a value (F.npy); the next word, --json, is an option" -- "$U" attn --out --json
expect 2 "option --seq needs a value (N); the next word, --ranks, is an option" -- "$U" explain --seq --ranks 4
expect 0 "usage: ulysses check --data DIR" -- "$U" check --data --help
expect 2 "expects an integer, got 'abc'" -- "$U" attn --seq abc
expect 2 "expects an integer, got '12x'" -- "$U" attn --seq 12x
expect 2 "expects an integer" -- "$U" attn --seq 99999999999999999999999
expect 2 "must be in" -- "$U" attn --seq 0
expect 2 "must be in" -- "$U" attn --seq -5
expect 2 "must be in" -- "$U" attn --heads 0
expect 2 "must be in" -- "$U" attn --head-dim 0
expect 2 "must be in" -- "$U" attn --batch 0
expect 2 "must be in" -- "$U" attn --window 0
expect 2 "must be in" -- "$U" attn --threads 0
expect 2 "must be in" -- "$U" attn --repeat 0
expect 2 "multiple of kv-heads" -- "$U" attn --heads 6 --kv-heads 4
expect 2 "multiple of kv-heads" -- "$U" attn --heads 4 --kv-heads 8
expect 2 "needs a value" -- "$U" attn --seq
expect 2 "takes no value" -- "$U" attn --causal=1
expect 2 "must be one of f32, f64" -- "$U" attn --dtype f16
expect 2 "unexpected argument" -- "$U" attn 128
expect 2 "overflows" -- "$U" attn --batch 1048576 --seq 1G --heads 1048576 --head-dim 65536
expect 2 "need --backward" -- "$U" attn --dq "$W/x.npy"
expect 2 "unknown method 'frob'" -- "$U" attn --method frob
expect 2 "--ulysses-degree applies to --method usp only" -- "$U" attn --method ring --ulysses-degree 2
expect 2 "--placement applies to --method usp only" -- "$U" attn --placement ring-inner
expect 2 "--bf16-partials applies to the ring methods" -- "$U" attn --method allgather --bf16-partials
expect 2 "unknown benchmark" -- "$U" bench frobnicate
expect 2 "must be in" -- "$U" bench kernel --repeat 0
expect 2 "needs --threads 1" -- "$U" bench kernel --cpu-time --threads 2
expect 2 "needs --threads 1" -- "$U" bench kernel --cpu-time --scale-threads 2
expect 2 "unknown option" -- "$U" bench memory --frobnicate
expect 2 "at least 2 ranks" -- "$U" bench a2a

# .npy inputs
"$T" write "$W/q.npy" f32 1 2 33 4 8 && "$T" write "$W/k.npy" f32 2 2 33 2 8 &&
"$T" write "$W/v.npy" f32 3 2 33 2 8 && "$T" write "$W/do.npy" f32 4 2 33 4 8 &&
"$T" write "$W/k3.npy" f32 2 33 2 8 && "$T" write "$W/kbad.npy" f32 2 2 33 3 8 &&
"$T" write "$W/q2d.npy" f32 5 33 32 && "$T" write "$W/q64.npy" f64 1 2 33 4 8 && "$T" nan "$W/nan.npy" ||
    { echo "FAIL: npytool"; exit 1; }
head -c 100 "$W/q.npy" > "$W/trunc_header.npy"
head -c 1000 "$W/q.npy" > "$W/trunc_data.npy"
printf '\223NUMPY\001\000v\000{'"'"'descr'"'"': '"'"'<i4'"'"', '"'"'fortran_order'"'"': False, '"'"'shape'"'"': (1, 2, 1, 2), }%52s\n' "" > "$W/int.npy"
head -c 16 /dev/zero >> "$W/int.npy"
printf 'not a numpy file at all' > "$W/garbage.npy"
Q="--q $W/q.npy --k $W/k.npy --v $W/v.npy"
expect 2 "must be given together" -- "$U" attn --q "$W/q.npy"
expect 2 "No such file" -- "$U" attn --q "$W/missing.npy" --k "$W/k.npy" --v "$W/v.npy"
expect 2 "--q" -- "$U" attn --q "$W/trunc_header.npy" --k "$W/k.npy" --v "$W/v.npy"
expect 2 "--q" -- "$U" attn --q "$W/trunc_data.npy" --k "$W/k.npy" --v "$W/v.npy"
expect 2 "dtype" -- "$U" attn --q "$W/int.npy" --k "$W/k.npy" --v "$W/v.npy"
expect 2 "--q" -- "$U" attn --q "$W/garbage.npy" --k "$W/k.npy" --v "$W/v.npy"
expect 2 "expected shape (B, N, H, d) or (N, H, d)" -- "$U" attn --q "$W/q2d.npy" --k "$W/k.npy" --v "$W/v.npy"
expect 2 "has shape (1, 33, 2, 8), expected (2, 33, 2, 8)" -- "$U" attn --q "$W/q.npy" --k "$W/k3.npy" --v "$W/v.npy"
expect 2 "multiple of kv-heads" -- "$U" attn --q "$W/q.npy" --k "$W/kbad.npy" --v "$W/kbad.npy"
expect 2 "--seq 40 disagrees with the input files (33)" -- "$U" attn $Q --seq 40
expect 2 "is NaN" -- "$U" attn --q "$W/nan.npy" --k "$W/nan.npy" --v "$W/nan.npy"
expect 0 "" -- "$U" attn --q "$W/nan.npy" --k "$W/nan.npy" --v "$W/nan.npy" --allow-nonfinite
expect 2 "/nonexistent/dir/o.npy" -- "$U" attn $Q --out /nonexistent/dir/o.npy
expect 2 "--dout needs" -- "$U" attn --dout "$W/do.npy"
expect 2 "has shape" -- "$U" attn $Q --dout "$W/k.npy"

# interchange: 1 rank and 3 ranks write bitwise identical outputs
expect 0 "bitwise == one process" -- "$U" attn $Q --causal --check --out "$W/o1.npy" --dout "$W/do.npy" --dq "$W/dq1.npy" --dk "$W/dk1.npy" --dv "$W/dv1.npy"
expect 0 "measured == expected on every rank: yes" -- "$MPIRUN" --oversubscribe -np 3 "$U" attn $Q --causal --out "$W/o3.npy" --dout "$W/do.npy" --dq "$W/dq3.npy" --dk "$W/dk3.npy" --dv "$W/dv3.npy"
for x in o dq dk dv; do
    expect 0 "" -- "$T" cmp "$W/${x}1.npy" "$W/${x}3.npy"
done
expect 0 "measured == expected on every rank: yes" -- "$MPIRUN" --oversubscribe -np 3 "$U" attn $Q --causal --a2a pack --out "$W/o3d.npy"
expect 0 "" -- "$T" cmp "$W/o1.npy" "$W/o3d.npy"
expect 2 "must be one of auto, pack, datatype" -- "$U" attn --a2a fast
# overlap: chunked on 2 ranks (2 KV heads each), bitwise equal to one process (--check fails with exit 1 otherwise)
expect 0 "overlap: 2 head chunks per rank" -- "$MPIRUN" --oversubscribe -np 2 "$U" attn --seq 96 --heads 4 --kv-heads 4 --causal --backward --overlap on --check --repeat 2
expect 0 "\"overlap_iteration\"" -- "$MPIRUN" --oversubscribe -np 2 "$U" attn --seq 64 --heads 4 --backward --overlap auto --json --repeat 1
expect 2 "must be one of off, on, auto" -- "$U" attn --overlap yes
# the overlap's exposed-time table and its event trace (every rank's waits, sends, kernel calls)
expect 0 "exposed communication, every rank in the same run" -- "$MPIRUN" --oversubscribe -np 2 "$U" attn --seq 64 --heads 4 --backward --overlap on --repeat 2 --overlap-trace "$W/trace.csv"
cases=$((cases + 1))
if ! head -n 1 "$W/trace.csv" | grep -q "^rank,rep,phase,chunk,event,tensor,peer,arrived,start_ms,wall_ms,cpu_ms$" ||
   [ "$(grep -c '^[01],[01],forward,[01],wait,[qkv],[01],' "$W/trace.csv")" -ne 24 ] ||
   [ "$(grep -c '^[01],[01],backward,[01],wait,do,[01],' "$W/trace.csv")" -ne 8 ] ||
   [ "$(grep -c ',kernel,' "$W/trace.csv")" -ne 16 ] ||
   [ "$(grep -c '^[01],[01],[a-z]*,1,start,' "$W/trace.csv")" -ne 8 ]; then
    echo "FAIL: --overlap-trace: expected 24 forward and 8 backward waits (2 ranks, 2 repetitions, 2 chunks), 16 kernel calls, 8 starts of chunk 1"; fails=$((fails + 1))
    cat "$W/trace.csv"
fi
expect 2 "--overlap-trace needs --overlap" -- "$U" attn --overlap-trace "$W/t.csv"
expect 2 "--overlap-trace $W/no/t.csv: directory $W/no: No such file or directory" -- "$MPIRUN" --oversubscribe -np 2 "$U" attn --seq 64 --heads 4 --overlap on --repeat 1 --overlap-trace "$W/no/t.csv"
expect 2 "--overlap-chunks" -- "$U" attn --overlap on --overlap-chunks 9
expect 0 "\"dtype\": \"f64\"" -- "$U" attn --q "$W/q64.npy" --k "$W/k.npy" --v "$W/v.npy" --json --repeat 1

# ranks called with different configurations: every rank stops, exit 2
expect 2 "ranks disagree on --seq: 100 on rank 0; 101 on rank 1" -- "$MPIRUN" --oversubscribe -np 1 "$U" attn --seq 100 : -np 1 "$U" attn --seq 101
expect 2 "ranks disagree on --causal: given on rank 0; not given on ranks 1-2" -- "$MPIRUN" --oversubscribe -np 1 "$U" attn --seq 100 --causal : -np 2 "$U" attn --seq 100
expect 2 "ranks disagree on --dtype: f64 on rank 0; not given on rank 1" -- "$MPIRUN" --oversubscribe -np 1 "$U" attn --dtype f64 : -np 1 "$U" attn

# every option that changes control flow, collectives or results is agreed
# before any other collective: one rank with a different value stops all
# ranks with exit 2 (under timeout: a hang fails the test)
M="timeout 60 $MPIRUN --oversubscribe"
for opt in "--backward" "--repeat 2" "--warmup 0" "--check" "--seed 7" "--window 3" "--heads 4" \
           "--block-q 16" "--a2a pack" "--overlap on" "--overlap-chunks 2" "--json" "--force" "--allow-nonfinite" "--out $W/mm.npy"; do
    expect 2 "ranks disagree on ${opt%% *}:" -- $M -np 1 "$U" attn --seq 64 : -np 1 "$U" attn --seq 64 $opt
done
expect 2 "ranks disagree on --help: given on rank 1, not on rank 0" -- $M -np 1 "$U" attn : -np 1 "$U" attn --help
expect 2 "unknown option '--frobnicate' (see ulysses attn --help) (on rank 1; 1 of 2 ranks" -- \
    $M -np 1 "$U" attn : -np 1 "$U" attn --frobnicate
expect 2 "ranks run different commands" -- $M -np 1 "$U" attn : -np 1 "$U" bench a2a
expect 2 "ranks disagree on --max: 4194304 on rank 0; 16777216 on rank 1" -- \
    $M -np 1 "$U" bench a2a --max 4M : -np 1 "$U" bench a2a --max 16M
expect 0 "usage" -- $M -np 2 "$U" attn --help
# more ranks than heads would leave ranks idle: refused on every rank, as ulysses-sim and explain do
expect 2 "SP degree 4 exceeds the 2 attention heads (use --method usp" -- $M -np 4 "$U" attn --seq 64 --heads 2 --kv-heads 1
# ... which usp runs out of the box (U chosen and printed)
expect 0 "usp: ulysses degree 2 chosen" -- $M -np 4 "$U" attn --method usp --seq 64 --heads 2 --kv-heads 1 --causal --backward --check --repeat 1 --warmup 0

# every method through `ulysses attn`: forward + backward against the fp64
# reference (exit 0 also asserts measured bytes == plan on every rank);
# uneven N and heads, GQA, causal; usp as a 2 x 2 grid both ways round
OK="|ref| (O, LSE: a quarter of it): yes"
for m in "ring" "zigzag" "allgather" "usp --ulysses-degree 2" "usp --ulysses-degree 2 --placement ring-inner"; do
    np=3; case "$m" in usp*) np=4 ;; esac
    expect 0 "$OK" -- $M -np $np "$U" attn --method $m --batch 2 --seq 37 --heads 6 --kv-heads 2 --causal --backward --check --repeat 1 --warmup 0
done
# Megatron's cp_comm_type names
expect 0 "method zigzag (U=1 x R=2)" -- $M -np 2 "$U" attn --method p2p --seq 40 --repeat 1 --warmup 0
expect 0 "method usp (U=2 x R=1)" -- $M -np 2 "$U" attn --method a2a+p2p --seq 40 --repeat 1 --warmup 0
# .npy inputs and outputs through a two-segment layout (zigzag on 3 ranks):
# the written files are the gathered results --check compares
expect 0 "$OK" -- $M -np 3 "$U" attn $Q --method zigzag --causal --check --out "$W/oz.npy" --dout "$W/do.npy" --dq "$W/dqz.npy" --dk "$W/dkz.npy" --dv "$W/dvz.npy"
for x in oz dqz dkz dvz; do
    test -s "$W/$x.npy" || { echo "FAIL: $x.npy not written"; fails=$((fails + 1)); }
done
expect 0 "\"method\": \"allgather\"" -- $M -np 2 "$U" attn $Q --method allgather --json --repeat 1
# bf16 partials: the drift is reported, and fails the fp32 tolerance
expect 1 "--check failed: O differs from the fp64 reference" -- $M -np 2 "$U" attn --method ring --bf16-partials --seq 64 --heads 2 --check --repeat 1 --warmup 0
# the method and its degrees are agreed before any collective
expect 2 "ranks disagree on --method: ring on rank 0; zigzag on rank 1" -- $M -np 1 "$U" attn --seq 64 --method ring : -np 1 "$U" attn --seq 64 --method zigzag
expect 2 "ranks disagree on --method: ulysses on rank 0; usp on rank 1" -- $M -np 1 "$U" attn --seq 64 --method a2a : -np 1 "$U" attn --seq 64 --method a2a+p2p
expect 2 "ranks disagree on --ulysses-degree: not given on rank 0; 1 on rank 1" -- $M -np 1 "$U" attn --seq 64 --method usp : -np 1 "$U" attn --seq 64 --method usp --ulysses-degree 1
for opt in "--bf16-partials" "--doc-lens 32,32" "--docs $W/docs.npy"; do
    expect 2 "ranks disagree on ${opt%% *}:" -- $M -np 1 "$U" attn --seq 64 --method ring : -np 1 "$U" attn --seq 64 --method ring $opt
done
expect 2 "usp needs a ulysses degree dividing 2 ranks (got 4)" -- $M -np 2 "$U" attn --seq 64 --method usp --ulysses-degree 4

# documents: attention never crosses one; offsets from --doc-lens or an
# int64 .npy (B, D+1), checked
"$T" i64 "$W/docs.npy" 2 0 10 10 37 0 30 31 37 && "$T" i64 "$W/docs1.npy" 0 0 5 37 &&
"$T" i64 "$W/dbad0.npy" 2 1 10 10 37 0 30 31 37 && "$T" i64 "$W/dbaddec.npy" 2 0 10 9 37 0 30 31 37 &&
"$T" i64 "$W/dbadend.npy" 2 0 10 10 36 0 30 31 37 && "$T" i64 "$W/dbadshape.npy" 3 0 37 0 37 0 37 ||
    { echo "FAIL: npytool i64"; exit 1; }
expect 0 "3 packed documents per batch row" -- $M -np 3 "$U" attn --method zigzag --batch 2 --seq 37 --heads 2 --docs "$W/docs.npy" --causal --backward --check --repeat 1 --warmup 0
expect 0 "$OK" -- $M -np 4 "$U" attn --method usp --ulysses-degree 2 --batch 2 --seq 37 --heads 2 --docs "$W/docs1.npy" --backward --check --repeat 1 --warmup 0
expect 0 "$OK" -- $M -np 2 "$U" attn --method allgather --seq 37 --heads 2 --doc-lens 5,0,20,12 --causal --backward --check --repeat 1 --warmup 0
expect 2 "must start at 0 (got 1)" -- "$U" attn --batch 2 --seq 37 --docs "$W/dbad0.npy"
expect 2 "decrease at entry 2 (9 < 10)" -- "$U" attn --batch 2 --seq 37 --docs "$W/dbaddec.npy"
expect 2 "must end at the sequence length 37 (got 36)" -- "$U" attn --batch 2 --seq 37 --docs "$W/dbadend.npy"
expect 2 "expected int64 offsets of shape (B, D+1) = (2, D+1)" -- "$U" attn --batch 2 --seq 37 --docs "$W/dbadshape.npy"
expect 2 "where 64-bit integers ('<i8') are expected" -- "$U" attn --seq 37 --docs "$W/q.npy"
expect 2 "No such file" -- "$U" attn --seq 37 --docs "$W/missing.npy"
expect 2 "sums to 30, not --seq 37" -- "$U" attn --seq 37 --doc-lens 10,20
expect 2 "--doc-lens and --docs" -- "$U" attn --seq 37 --doc-lens 37 --docs "$W/docs1.npy"
test ! -e "$W/mm.npy" || { echo "FAIL: an output was written by a run that stopped"; fails=$((fails + 1)); }

echo "$cases cases, $fails failed"
[ "$fails" -eq 0 ]
