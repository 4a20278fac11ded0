#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Every column header, row label, "label:" and JSON key or CSV column that the
# documented outputs of `ulysses` and `ulysses-sim` print is defined in
# doc/glossary.md (as **bold** or `code` there).  The terms are extracted
# mechanically (tests/glossary_terms.awk says by which rules, and how a value
# is told from a term); the check is tests/glossary_check.awk.
#
# The outputs are the commands listed below, one a line:
#   KIND  COMMAND...
# KIND is text, json or csv (what the command prints on stdout), or csvfile (the
# command writes the CSV file $CSV and prints text).  COMMAND starts with $U
# (ulysses), $S (ulysses-sim), $MPI2 (mpirun -np 2) or $CHK (tests/chkdump, which
# writes the dumps `ulysses check` reads); $D is a directory of the line's own.
# A line naming $MPI2, $CHK or a ulysses command is skipped in a build without
# them.  To cover a new command's outputs, add its lines.
set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
: "${MPIRUN:=mpirun}"
U="$top_builddir/ulysses"
S="$top_builddir/ulysses-sim"
CHK="$top_builddir/tests/chkdump"
T="$top_srcdir/tests"
G="$top_srcdir/doc/glossary.md"
export ULYSSES_SIM_PRESETS="${ULYSSES_SIM_PRESETS:-$top_srcdir/sim/presets}"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# In a sanitizer build: this test reads what the commands print; their leaks are
# the business of each command's own tests, and LeakSanitizer's exit scan (with
# the slow unwinding its suppressions need) would triple the time of every MPI
# run here.  Address and undefined-behaviour checks stay on.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
MPI2="timeout 120 $MPIRUN --oversubscribe -np 2"
havempi=0
"$U" attn --help >/dev/null 2>&1 && command -v "${MPIRUN%% *}" >/dev/null 2>&1 && havempi=1

A="--seq 64 --heads 4 --head-dim 16 --repeat 1 --warmup 0"
I="--prompt 13 --generate 3 --heads 4 --head-dim 8"
cat > "$W/list" <<EOF
text    \$U attn $A --check --backward
text    \$MPI2 \$U attn $A --check --backward --overlap on
json    \$MPI2 \$U attn $A --check --backward --overlap on --json
text    \$MPI2 \$U attn $A --method usp --ulysses-degree 1 --causal --backward --check
text    \$U infer $I --check
text    \$MPI2 \$U infer $I --method zigzag --scheme helix --kv-layout round-robin:2 --check
json    \$MPI2 \$U infer $I --window 5 --check --json
text    \$U explain --ranks 2 --seq 8 --heads 4
text    \$U explain --ranks 4 --seq 10 --heads 8 --kv-heads 2 --causal
text    \$U explain --ranks 2 --seq 8 --heads 4 --method ring --causal
text    \$U explain --ranks 2 --seq 8 --heads 4 --method zigzag --causal
text    \$U explain --ranks 2 --seq 8 --heads 4 --method allgather --causal
text    \$U explain --ranks 4 --seq 8 --heads 4 --method usp --ulysses-degree 2 --causal
text    \$U explain --ranks 2 --seq 8 --heads 4 --method megatron-sp
json    \$U explain --ranks 4 --seq 8 --heads 4 --method usp --ulysses-degree 2 --causal --json
json    \$U explain --ranks 2 --seq 8 --heads 4 --method megatron-sp --json
text    \$U explain --ranks 2 --docs 3,5 --heads 4 --method zigzag --causal
text    \$U explain --ranks 4 --method dcp --prompt 16 --generate 4 --heads 8 --kv-heads 2 --kv-layout round-robin:4
text    \$U explain --ranks 3 --method helix --prompt 10 --generate 2 --window 4
json    \$U explain --ranks 2 --method dcp --prompt 8 --generate 2 --json
text    \$U bench kernel --seq 64 --heads 2 --head-dim 16 --gemm-size 64 --repeat 1
json    \$U bench kernel --seq 64 --heads 2 --head-dim 16 --gemm-size 64 --repeat 1 --json
text    \$U bench memory --seq 256 --heads 2 --head-dim 16 --threads 1
json    \$U bench memory --seq 256 --heads 2 --head-dim 16 --threads 1 --json
text    \$MPI2 \$U bench a2a --min 1K --max 1K --repeat 1
json    \$MPI2 \$U bench a2a --min 1K --max 1K --repeat 1 --json
text    \$MPI2 \$U bench methods --method ring --seq 64 --heads 4 --head-dim 16 --repeat 1 --causal --check
json    \$MPI2 \$U bench methods --method ring --seq 64 --heads 4 --head-dim 16 --repeat 1 --causal --check --json
csvfile \$MPI2 \$U train --layers 1 --channels 16 --heads 2 --seq 16 --steps 2 --batch 2 --log \$CSV
text    \$MPI2 \$U train --layers 1 --channels 16 --heads 2 --seq 16 --steps 2 --batch 2 --tiled-loss --tiled-mlp 2
json    \$MPI2 \$U train --layers 1 --channels 16 --heads 2 --seq 16 --steps 2 --batch 2 --tiled-loss --tiled-mlp 2 --json
text    \$S --gpus 16 --seq 32K
csv     \$S --gpus 16 --seq 32K --format csv
json    \$S --gpus 16 --seq 32K --format json --max-seq
text    \$S --model llama-3.1-8b --platform dgx-h100 --gpus 8 --method ulysses --seq 1M --tiled-loss --tiled-mlp --offload activations,optimizer --head-chunks 2 --max-seq
csv     \$S --model llama-3.1-8b --platform dgx-h100 --gpus 8 --method ulysses --seq 1M --tiled-loss --tiled-mlp --offload activations,optimizer --max-seq --format csv
json    \$S --model llama-3.1-8b --platform dgx-h100 --gpus 8 --method ulysses --seq 1M --tiled-loss --tiled-mlp --offload activations,optimizer --max-seq --format json
text    \$S --gpus 16 --seq 32K --pp 2 --method ulysses,ring
csv     \$S sweep --gpus 8,16 --seq 32K --method ulysses,ring
text    \$S plan --platform dgx-a100-40g --model gpt-7b --gpus 16 --seq 32K --top 3
csv     \$S plan --platform dgx-a100-40g --model gpt-7b --gpus 16 --seq 32K --top 3 --format csv
json    \$S plan --platform dgx-a100-40g --model gpt-7b --gpus 16 --seq 32K --top 3 --format json
text    \$S plan --platform dgx-h100 --model llama-3-8b --gpus 16 --seq 64K --top 3 --launch deepspeed --time-limit 0
text    \$S plan --platform dgx-h100 --model llama-3-8b --gpus 16 --seq 64K --top 3 --method megatron-sp --tp 16 --launch megatron
text    \$S plan --max-seq --platform dgx-h100 --model llama-3-8b --gpus 16 --top 3
csv     \$S plan --max-seq --platform dgx-h100 --model llama-3-8b --gpus 16 --top 3 --format csv
json    \$S plan --max-seq --platform dgx-h100 --model llama-3-8b --gpus 16 --top 3 --format json
text    \$S plan --platform dgx-h100 --model llama-3.1-8b --gpus 8 --seq 1M --top 3 --time-limit 0
text    \$S plan --max-seq --platform dgx-h100 --model llama-3.1-8b --gpus 8 --method ulysses --top 3
text    \$S coll --op all-reduce --gpus 16 --bytes 1M,64M
csv     \$S coll --op all-reduce --gpus 16 --bytes 1M --format csv
json    \$S coll --op all-to-all --gpus 8 --bytes 1M --format json
text    \$S calibrate --platform dgx-a100-40g --nccl-tests $top_srcdir/sim/tests/data/nccl-allreduce-2x8-mpi.txt $top_srcdir/sim/tests/data/nccl-alltoall-g8-nohash.txt --coll all-reduce,all-to-all
json    \$S calibrate --platform dgx-h100 --nccl-tests $top_srcdir/sim/tests/data/nccl-alltoall-g8-nohash.txt --coll all-to-all --json
text    \$CHK \$D zigzag 2 64 4 2 16 causal bwd lse && \$U check \$D --method zigzag --causal
json    \$CHK \$D zigzag 2 64 4 2 16 causal bwd lse && \$U check \$D --method zigzag --causal --json
text    \$S attn --platform dgx-h100 --gpus 2 --seq 1K
json    \$S attn --platform dgx-h100 --gpus 2 --seq 1K --format json
text    \$S infer --model llama-3-8b --scheme tp-dcp --tp 16 --dcp 2 --prefill-cp 2 --concurrency 1,64
text    \$S infer --model llama-3-8b --scheme helix --tp 4 --dcp 4 --batch 4096
csv     \$S infer --model llama-3-8b --scheme helix --tp 4 --dcp 2 --concurrency 1,8 --format csv
json    \$S infer --model llama-3-8b --scheme tp-dcp --tp 16 --dcp 2 --prefill-cp 2 --concurrency 1,8 --weights fp8 --format json
text    \$S docs --cp 4 --doc-dist lognormal:300:1 --seq 4K
json    \$S docs --cp 4 --doc-dist lognormal:300:1 --seq 4K --json
text    \$S docs --cp 2 --doc-lens 4,12 --balancer head-tail-doc-major
text    \$MPI2 \$U attn $A --doc-lens 20,44 --causal
json    \$MPI2 \$U attn $A --doc-lens 20,44 --causal --json
EOF

# run the commands, four at a time (most of their time is start-up), then
# extract the terms of each in list order
fails=0
n=0
while read -r kind cmd; do
    n=$((n + 1))
    case "$cmd" in
        *'$MPI2'*) [ "$havempi" = 1 ] || { echo "glossary: skipped (no MPI in this build): $cmd"; continue; } ;;
    esac
    case "$cmd" in
        *'$CHK'*) [ -x "$CHK" ] || { echo "glossary: skipped (no $CHK in this build): $cmd"; continue; } ;;
    esac
    # a build without MPI has `ulysses explain` alone
    sub=$(printf '%s\n' "$cmd" | sed -n 's/.*\$U \([a-z]*\).*/\1/p')
    if [ -n "$sub" ] && ! "$U" "$sub" --help > /dev/null 2>&1; then
        echo "glossary: skipped (no ulysses $sub in this build): $cmd"; continue
    fi
    ( CSV="$W/csv.$n"; D="$W/d.$n"; eval "$cmd" < /dev/null > "$W/out.$n" 2> "$W/err.$n"; echo $? > "$W/rc.$n" ) &
    [ $((n % 4)) -ne 0 ] || wait
done < "$W/list"
wait
: > "$W/terms"
n=0
while read -r kind cmd; do
    n=$((n + 1))
    [ -f "$W/rc.$n" ] || continue
    rc=$(cat "$W/rc.$n")
    if [ "$rc" -ne 0 ]; then
        echo "FAIL: exit $rc: $cmd"; sed 's/^/  /' "$W/err.$n" | head -5; fails=$((fails + 1)); continue
    fi
    if [ "$kind" = csvfile ]; then
        awk -v kind=text -f "$T/glossary_terms.awk" "$W/out.$n" > "$W/these"
        awk -v kind=csv -f "$T/glossary_terms.awk" "$W/csv.$n" >> "$W/these"
    else
        awk -v kind="$kind" -f "$T/glossary_terms.awk" "$W/out.$n" > "$W/these"
    fi
    if [ ! -s "$W/these" ]; then
        echo "FAIL: no terms extracted from: $cmd"; fails=$((fails + 1)); continue
    fi
    # the command each term first came from, for the message
    awk -v c="$cmd" '{ print $0 "\t" c }' "$W/these" >> "$W/terms"
done < "$W/list"

awk -F '\t' '!($1 in s) { s[$1] = $2; print $1 }' "$W/terms" > "$W/uniq"
[ -z "${GLOSSARY_TERMS:-}" ] || cp "$W/uniq" "$GLOSSARY_TERMS"
awk -f "$T/glossary_terms.awk" -f "$T/glossary_check.awk" "$G" "$W/uniq" > "$W/missing"
n=$(sed -n 's/^checked //p' "$W/missing")
sed -i '/^checked /d' "$W/missing"
if [ -s "$W/missing" ]; then
    while IFS= read -r t; do
        c=$(awk -F '\t' -v t="$t" '$1 == t { print $2; exit }' "$W/terms")
        echo "FAIL: not in doc/glossary.md: '$t'  (printed by: $c)"
        fails=$((fails + 1))
    done < "$W/missing"
fi
# the checker itself: a made-up term is missing, a defined one is not, a
# term inside a longer word is not found ("abs" of "max abs err" is a word,
# "ax" is not)
printf 'frobnicated widget\nmax abs err\nax\n' > "$W/probe"
got=$(awk -f "$T/glossary_terms.awk" -f "$T/glossary_check.awk" "$G" "$W/probe" | tr '\n' '|')
if [ "$got" != "frobnicated widget|ax|checked 3|" ]; then
    echo "FAIL: the glossary check on three probes printed '$got'"; fails=$((fails + 1))
fi
# a bold term split over two lines would not be seen: every line pairs its **
if awk '{ n = gsub(/\*\*/, "&"); if (n % 2) { print "FAIL: doc/glossary.md:" FNR ": a ** without its pair"; bad = 1 } }
        END { exit bad }' "$G"; then :; else fails=$((fails + 1)); fi
if [ "$fails" -ne 0 ]; then
    echo "glossary: $n terms checked, $fails failures"; exit 1
fi
echo "glossary: $n terms checked, all defined"
