#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The reliability catalogue as one table (doc/reliability.md): every failure
# class of the driver, run once, with the exact command, the exit status of
# every rank, the wall time and what rank 0 prints.  Every run is under
# `timeout` (a hang shows as status 124).  Not part of `make check` (the
# assertions are in tests/cli_reliability.sh, cli_attn.sh and cli_train.sh);
# `make reliability-table` runs it.
#
#   top_builddir=BUILD sh tests/reliability_table.sh
set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
: "${MPIRUN:=mpirun}"
U="$top_builddir/ulysses"
S="$top_builddir/ulysses-sim"
T="$top_builddir/tests/npytool"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
W=$(mktemp -d)
MNT=""
cleanup() {
    [ -n "$MNT" ] && umount "$MNT" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT
MPI="timeout 120 $MPIRUN --oversubscribe"

# The message: the first line that is not Open MPI's banner (one line per run).
say() {
    grep -v '^--\|^ \|^Primary job\|^a non-zero\|^mpirun \|^$\|^  Process\|^  Exit\|^the job\|^Per user' "$1" |
        head -n 1 | cut -c1-260 | sed 's/|/\\|/g'
}

# The scratch directory shown as $W, the build directory left out.
pretty() {
    printf '%s\n' "$1" | awk -v w="$W" -v b="$top_builddir/" '{
        while ((i = index($0, w)) > 0) $0 = substr($0, 1, i - 1) "$W" substr($0, i + length(w))
        if (b != "./") while ((i = index($0, b)) > 0) $0 = substr($0, 1, i - 1) substr($0, i + length(b))
        print }'
}

row() { # row CLASS COMMAND STATUSES SECONDS
    printf '| %s | `%s` | %s | %s | %s |\n' "$1" "$(pretty "$2")" "$3" "$4" "$(pretty "$(say "$W/err")")"
}

# one CLASS -- command...: one process (or one mpirun whose ranks run the same command)
one() {
    class=$1; shift 2
    t0=$(date +%s.%N)
    timeout 120 "$@" >"$W/out" 2>"$W/err"
    rc=$?
    t1=$(date +%s.%N)
    row "$class" "$*" "$rc" "$(echo "$t1 - $t0" | bc | cut -c1-5)"
}

# mpmd CLASS PRE0 POST0 PRE1 POST1 -- command...: 2 ranks (MPMD); rank r runs
# PREr command POSTr (PRE: a wrapper such as `env X=1` or `ulimit.sh N`, or
# `set -- other command;` to run another command; POST: extra options).
# Each rank writes its own exit status; both are shown.
mpmd() {
    class=$1 b0=$2 a0=$3 b1=$4 a1=$5; shift 6
    rm -f "$W"/rc.*
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    $MPI -np 1 sh -c "$b0"' "$@"; echo $? > "'"$W"'/rc.$OMPI_COMM_WORLD_RANK"' sh "$@" $a0 : \
        -np 1 sh -c "$b1"' "$@"; echo $? > "'"$W"'/rc.$OMPI_COMM_WORLD_RANK"' sh "$@" $a1 >"$W/out" 2>"$W/err"
    mrc=$?
    t1=$(date +%s.%N)
    st="$(cat "$W/rc.0" 2>/dev/null || echo -) $(cat "$W/rc.1" 2>/dev/null || echo -)"
    [ "$mrc" -eq 124 ] && st="$st (timeout)"
    cmd="mpirun -np 1 ${b0:+$b0 }$*${a0:+ $a0} : -np 1 ${b1:+$b1 }$*${a1:+ $a1}"
    row "$class" "$cmd" "$st" "$(echo "$t1 - $t0" | bc | cut -c1-5)"
}
mm() { c=$1 o0=$2 o1=$3; shift 4; mpmd "$c" "" "$o0" "" "$o1" -- "$@"; }
two() { c=$1 p0=$2 p1=$3; shift 4; mpmd "$c" "$p0" "" "$p1" "" -- "$@"; }

"$T" write "$W/q.npy" f32 1 1 48 4 16 && "$T" write "$W/k.npy" f32 2 1 48 4 16 &&
"$T" write "$W/v.npy" f32 3 1 48 4 16 && "$T" scaled "$W/big.npy" f32 1e20 4 1 48 4 16 &&
"$T" scaled "$W/huge64.npy" f64 1e300 5 1 48 4 16 || { echo "npytool failed" >&2; exit 1; }
Q="--q $W/q.npy --k $W/k.npy --v $W/v.npy"
A="$U attn --seq 64 --heads 4 --repeat 1"
cp "${top_srcdir:-.}/tests/ulimit.sh" "$W/ulimit.sh" && chmod +x "$W/ulimit.sh"

echo "| failure class | command | exit status (per rank) | seconds | rank 0 prints |"
echo "|---|---|---|---|---|"
# ---- options that differ between 2 ranks (MPMD), one row per option
for o in "--backward" "--repeat 2" "--warmup 0" "--check" "--out $W/mm.npy" "--seed 7" "--dtype f64" \
         "--causal" "--window 8" "--heads 8" "--seq 128" "--block-q 16" "--a2a pack" "--json" "--force" \
         "--allow-nonfinite" "--max-count 1000"; do
    mm "option mismatch ${o%% *}" "" "$o" -- $A
done
mm "--threads differs (per rank, not agreed: results are bitwise the same)" "" "--threads 2" -- $A
mm "option mismatch --k (file)" "--k $W/k.npy" "--k $W/v.npy" -- $U attn --q "$W/q.npy" --v "$W/v.npy" --repeat 1
mm "--help on one rank" "" "--help" -- $A
mm "bad option on one rank" "" "--bogus" -- $A
mm "bad value on one rank" "" "--seq 0" -- $A
two "different subcommands (attn, train)" "" "set -- $U train --steps 1 --quiet;" -- $U attn --seq 64
mm "train option mismatch --lr" "" "--lr 0.01" -- $U train --layers 1 --channels 16 --heads 4 --seq 16 --steps 1 --quiet
mm "train bad option on one rank" "" "--bogus" -- $U train --layers 1 --channels 16 --heads 4 --seq 16 --steps 1 --quiet
# ---- memory
if "$W/ulimit.sh" 1500000 "$U" version >/dev/null 2>&1; then
    two "rank 1 under ulimit -v 1.5 GiB (preflight)" "" "$W/ulimit.sh 1500000" -- $U attn --seq 128K --heads 8 --repeat 1
    two "rank 1 under ulimit -v 400 MB (OpenBLAS warm-up)" "" "env ULYSSES_BLAS_WARMUP_SECONDS=3 $W/ulimit.sh 400000" -- $A
else
    echo "| ulimit -v cases | - | skipped: the program cannot start under an address-space limit (sanitizer build?) | | |"
fi
two "allocation failure on rank 1 (5th allocation)" "" "env ULYSSES_TEST_FAIL_ALLOC=5" -- $U attn --seq 48 --heads 4 --check
one "--seq 3G (overcommit would OOM-kill at 24 GB)" -- $U attn --seq 3G
TM="train --fast --layers 2 --channels 256 --heads 4 --seq 8 --batch 2 --steps 1 --quiet"
need=$(ULYSSES_TEST_MEM_AVAILABLE=1 "$U" $TM 2>&1 | sed -n 's/.*this run needs about \([0-9.]*\) MiB on rank 0.*/\1/p')
if [ -n "$need" ]; then
    avail=$(awk -v m="$need" 'BEGIN { printf "%d", m * 1.5 * 1048576 }')
    one "node memory: 1 rank fits" -- env ULYSSES_TEST_MEM_AVAILABLE=$avail $U $TM
    one "node memory: 2 ranks on the node do not" -- $MPI -x ULYSSES_TEST_MEM_AVAILABLE=$avail -np 2 $U $TM --dp 2
fi
# ---- non-finite results and inputs
one "fp32 overflow (finite inputs near 1e20), 2 ranks" -- $MPI -np 2 $U attn --q "$W/big.npy" --k "$W/big.npy" --v "$W/v.npy"
one "float64 1e300 read with --dtype f32" -- $U attn --q "$W/huge64.npy" --k "$W/k.npy" --v "$W/v.npy" --dtype f32
"$T" nan "$W/nan.npy"
one "NaN inputs, --check --json (JSON has no nan)" -- $U attn --q "$W/nan.npy" --k "$W/nan.npy" --v "$W/nan.npy" --allow-nonfinite --check --json
echo "| (the JSON above) | | | | $(grep -o '"max_abs_err": [^,]*, "max_abs_err_nonfinite": "[a-z-]*"' "$W/out" | head -n 1) |"
# ---- inputs
mkdir "$W/dir"
mkfifo "$W/fifo"
one "--q /dev/zero" -- $U attn --q /dev/zero --k "$W/k.npy" --v "$W/v.npy"
one "--q a FIFO (no writer)" -- $U attn --q "$W/fifo" --k "$W/k.npy" --v "$W/v.npy"
one "--q a directory" -- $U attn --q "$W/dir" --k "$W/k.npy" --v "$W/v.npy"
head -c 3000000 /dev/zero > "$W/zeros.npy"
one "--q 3 MB of zeros" -- $U attn --q "$W/zeros.npy" --k "$W/k.npy" --v "$W/v.npy"
one "train --data /dev/zero" -- $U train --data /dev/zero
# ---- outputs
one "output == input" -- $U attn $Q --out "$W/q.npy"
ln "$W/k.npy" "$W/hard.npy"
one "output a hard link to an input" -- $U attn $Q --backward --dq "$W/hard.npy"
one "same output twice" -- $U attn --seq 32 --backward --out "$W/x.npy" --dq "$W/dir/../x.npy"
one "output a directory" -- $U attn --seq 32 --out "$W/dir"
one "output a FIFO" -- $U attn --seq 32 --out "$W/fifo"
one "output in a missing directory" -- $U attn --seq 32 --out /nonexistent/dir/o.npy
one "train --log == --checkpoint" -- $U train --steps 1 --log "$W/same" --checkpoint "$W/same"
one "--overlap-trace == --q" -- $U attn $Q --overlap on --overlap-trace "$W/q.npy"
$U train --steps 1 --quiet --checkpoint "$W/ck.bin" >/dev/null 2>&1
one "train --log == --resume" -- $U train --steps 2 --resume "$W/ck.bin" --log "$W/ck.bin"
cp "$top_srcdir/sim/presets/platforms/dgx-a100-40g.json" "$W/plat.json" 2>/dev/null
one "ulysses-sim --trace == --platform" -- $S --platform "$W/plat.json" --method ulysses --trace "$W/plat.json"
one "ulysses-sim sweep --out == --plot" -- $S sweep --seq 8K --out "$W/p.svg" --plot "$W/p.svg"
one "ulysses-sim sweep --plot in a missing directory" -- $S sweep --seq 8K:1M --plot /nonexistent/dir/p.svg
# racing writers: A stopped between its checks and its commit, B writes the path, A continues
timeout 120 "$U" attn --seq 256 --repeat 300 --out "$W/race.npy" >/dev/null 2>"$W/race_a" &
pid=$!
i=0
while ! ls "$W"/.race.npy.tmp* >/dev/null 2>&1 && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
kill -STOP $pid
one "racing writers: B (while A is stopped)" -- $U attn --seq 64 --repeat 1 --out "$W/race.npy"
kill -CONT $pid
wait $pid
echo "| racing writers: A (continued) | \`ulysses attn --seq 256 --repeat 300 --out \$W/race.npy\` | $? | | $(pretty "$(head -n 1 "$W/race_a")") |"
rm -f "$W"/.race.npy.tmp*
# ---- a full disk and a read-only file system
mkdir "$W/mnt"
if mount -t tmpfs -o size=64k tmpfs "$W/mnt" 2>/dev/null; then
    MNT="$W/mnt"
    printf 'previous' > "$MNT/o.npy"
    one "disk full (64 KiB tmpfs), 2 ranks" -- $MPI -np 2 $U attn --seq 1024 --repeat 1 --out "$MNT/o.npy"
    echo "| (the previous file) | \`cat \$W/mnt/o.npy\` | | | $(cat "$MNT/o.npy"); temporaries left: $(ls -a "$MNT" | grep -c tmp) |"
    mount -o remount,ro "$MNT"
    one "read-only file system" -- $U attn --seq 64 --out "$MNT/o.npy"
    one "train --checkpoint on a read-only file system" -- $U train --steps 1 --quiet --checkpoint "$MNT/ck"
    umount "$MNT"
    MNT=""
else
    echo "| disk full, read-only | - | skipped: cannot mount a tmpfs here | | |"
fi
# ---- the simulator's JSON: a measured time of 0 gives a NaN error
"$U" attn --seq 64 --heads 4 --backward --repeat 1 --json > "$W/run.json" 2>/dev/null &&
sed 's/"phase_1_ms": {\([^}]*\)"critical": [-0-9.e+]*/"phase_1_ms": {\1"critical": 0/' "$W/run.json" > "$W/run0.json"
one "ulysses-sim attn --compare, measured 0 ms" -- $S attn --platform dgx-h100 --compare "$W/run0.json" --format json
echo "| (its JSON) | | | | $(grep -o '"error_pct": null, "error_pct_nonfinite": "[a-z]*"' "$W/out" | head -n 1) |"
