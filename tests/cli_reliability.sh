#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The reliability catalogue of `ulysses attn` (doc/reliability.md): ranks
# started differently, one rank short of memory, a full or read-only disk,
# fp32 overflow, hostile paths, racing writers, allocation failures.  Every
# MPI run is under `timeout`: a hang fails the test.  Exit statuses are
# checked on every rank (each rank records its own in a file).
set -u
: "${top_builddir:=.}"
: "${MPIRUN:=mpirun}"
U="$top_builddir/ulysses"
T="$top_builddir/tests/npytool"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
W=$(mktemp -d)
MNT=""
cleanup() {
    [ -n "$MNT" ] && umount "$MNT" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT
fails=0
cases=0
. "${top_srcdir:-.}/tests/expect.sh"
M="timeout 120 $MPIRUN --oversubscribe"

# seen PATTERN: the stderr of the previous command contains PATTERN
seen() {
    cases=$((cases + 1))
    if grep -q -- "$1" "$W/err"; then
        echo "ok: ... and it says '$1'"
    else
        echo "FAIL: the previous command did not say '$1':"; sed 's/^/  | /' "$W/err" | head -5
        fails=$((fails + 1))
    fi
}

# per_rank STATUS -- command args (run on 2 ranks, the second rank's
# command prefixed by $SECOND): every rank must exit with STATUS.
per_rank() {
    want=$1; shift 2
    cases=$((cases + 1))
    rm -f "$W"/rc.*
    $M -np 1 sh -c '"$@"; echo $? > "'"$W"'/rc.$OMPI_COMM_WORLD_RANK"' sh "$@" : \
        -np 1 sh -c "$SECOND"' "$@"; echo $? > "'"$W"'/rc.$OMPI_COMM_WORLD_RANK"' sh "$@" >"$W/out" 2>"$W/err"
    got="$(cat "$W/rc.0" 2>/dev/null) $(cat "$W/rc.1" 2>/dev/null)"
    if [ "$got" != "$want $want" ]; then
        echo "FAIL: exit statuses '$got' (want $want on both ranks): [$SECOND] $*"
        sed 's/^/  | /' "$W/err" | head -5
        fails=$((fails + 1)); return
    fi
    echo "ok: both ranks exit $want: [$SECOND] $*"
}

"$T" write "$W/q.npy" f32 1 1 48 4 16 && "$T" write "$W/k.npy" f32 2 1 48 4 16 &&
"$T" write "$W/v.npy" f32 3 1 48 4 16 && "$T" scaled "$W/big.npy" f32 1e20 4 1 48 4 16 &&
"$T" scaled "$W/huge64.npy" f64 1e300 5 1 48 4 16 && "$T" nan "$W/nan.npy" ||
    { echo "FAIL: npytool"; exit 1; }
Q="--q $W/q.npy --k $W/k.npy --v $W/v.npy"

# ---- ranks started with different input files: refused, never mixed
expect 2 "ranks disagree on --k: '$W/k.npy' on rank 0; '$W/v.npy' on rank 1" -- \
    $M -np 1 "$U" attn $Q : -np 1 "$U" attn --q "$W/q.npy" --k "$W/v.npy" --v "$W/v.npy"

# ---- memory: the preflight refuses what cannot fit, on the rank that cannot
expect 2 "not enough memory: this run needs about" -- "$U" attn --seq 3G
expect 0 "" -- "$U" attn --seq 64 --repeat 1 --force
# the ranks of a node share its memory (MPI_COMM_TYPE_SHARED): their needs are summed before
# comparing with MemAvailable (ULYSSES_TEST_MEM_AVAILABLE pretends the node has that many bytes).
# `train --fast` keeps a whole model per rank, so 2 ranks need about twice what 1 rank needs.
TM="train --fast --layers 2 --channels 256 --heads 4 --seq 8 --batch 2 --steps 1 --quiet"
one=$(ULYSSES_TEST_MEM_AVAILABLE=1 "$U" $TM 2>&1 | sed -n 's/.*this run needs about \([0-9.]*\) MiB on rank 0.*/\1/p')
if [ -n "$one" ]; then
    avail=$(awk -v m="$one" 'BEGIN { printf "%d", m * 1.5 * 1048576 }')
    expect 0 "" -- env ULYSSES_TEST_MEM_AVAILABLE=$avail "$U" $TM
    expect 2 "not enough memory: the 2 ranks on rank 0's node need about" -- \
        $M -x ULYSSES_TEST_MEM_AVAILABLE=$avail -np 2 "$U" $TM --dp 2
    seen "together (rank 0: "
    seen "(MemAvailable); use smaller sizes, more nodes, or --force"
    expect 0 "" -- $M -x ULYSSES_TEST_MEM_AVAILABLE=$avail -np 2 "$U" $TM --dp 2 --force
    seen "warning: the 2 ranks on rank"
else
    cases=$((cases + 1)); fails=$((fails + 1))
    echo "FAIL: no memory figure from: ULYSSES_TEST_MEM_AVAILABLE=1 ulysses $TM"
fi
cp "${top_srcdir:-.}/tests/ulimit.sh" "$W/ulimit.sh" && chmod +x "$W/ulimit.sh"
# (AddressSanitizer reserves terabytes of address space: under it a process
# cannot start with ulimit -v at all, and these cases are skipped)
if "$W/ulimit.sh" 1500000 "$U" version >/dev/null 2>&1; then
    # rank 1 limited to 1.5 GiB of address space: enough for OpenBLAS, not for the run
    SECOND="$W/ulimit.sh 1500000"
    per_rank 2 -- "$U" attn --seq 128K --heads 8 --head-dim 64 --repeat 1
    seen "rank 1: not enough memory: this run needs about"
    # rank 1 limited so far that OpenBLAS cannot allocate its buffers (it would spin forever)
    SECOND="env ULYSSES_BLAS_WARMUP_SECONDS=3 $W/ulimit.sh 400000"
    per_rank 1 -- "$U" attn --seq 64 --repeat 1
    seen "rank 1: out of memory: OpenBLAS did not finish a 64x64 warm-up GEMM"
    SECOND=""
else
    echo "skipped: ulimit -v cases (the program cannot start under an address-space limit: sanitizer build?)"
fi

# ---- allocation failures anywhere in the driver and the library: exit 1, a message, no crash
# (allocations 1, 2, 3, 4, then about a third further each time, until the run succeeds)
k=1
while [ "$k" -lt 400 ]; do
    cases=$((cases + 1))
    ULYSSES_TEST_FAIL_ALLOC=$k timeout 60 "$U" attn --seq 48 --heads 4 --check --backward --json \
        --out "$W/fa.npy" >"$W/out" 2>"$W/err"
    rc=$?
    [ "$rc" -eq 0 ] && break
    if [ "$rc" -ne 1 ] || [ "$(wc -l < "$W/err")" -ne 1 ] || ! grep -q "allocate\|out of memory" "$W/err"; then
        echo "FAIL: allocation $k failing gives exit $rc:"; sed 's/^/  | /' "$W/err" | head -3
        fails=$((fails + 1))
    fi
    ls "$W"/.fa.npy.tmp* >/dev/null 2>&1 && { echo "FAIL: allocation $k left a temporary file"; fails=$((fails + 1)); }
    last=$k
    k=$((k + 1 + k / 3))
done
echo "ok: allocation failures 1, 2, 3, 4, 6, ..., $last each exit 1 with a message; $k succeeds"
SECOND="env ULYSSES_TEST_FAIL_ALLOC=5"
per_rank 1 -- "$U" attn --seq 48 --heads 4 --check
SECOND=""

# ---- fp32 overflow: finite inputs, non-finite results
expect 1 "the first non-finite element of this rank's part; the inputs reach |q| = 1e+20" -- \
    $M -np 2 "$U" attn --q "$W/big.npy" --k "$W/big.npy" --v "$W/v.npy"
seen "beyond the float32 range (3.4e+38); use --dtype f64"
expect 0 "" -- $M -np 2 "$U" attn --q "$W/big.npy" --k "$W/big.npy" --v "$W/v.npy" --allow-nonfinite
expect 2 "huge64.npy: element 0 is -2.26463908032132" -- "$U" attn --q "$W/huge64.npy" --k "$W/k.npy" --v "$W/v.npy" --dtype f32
seen "e+299, beyond the float32 range (largest 3.40282e+38); use --dtype f64"
# --check: NaN anywhere fails, and JSON carries null plus a flag, never nan/inf
expect 1 "--check failed: O has" -- "$U" attn --q "$W/nan.npy" --k "$W/nan.npy" --v "$W/nan.npy" --allow-nonfinite --check
expect 1 '"max_abs_err": null, "max_abs_err_nonfinite": "nan"' -- \
    "$U" attn --q "$W/nan.npy" --k "$W/nan.npy" --v "$W/nan.npy" --allow-nonfinite --check --json
cases=$((cases + 1))
if grep -qiE '(^|[^_a-z"])(nan|-?inf(inity)?)([^_a-z"]|$)' "$W/out"; then
    echo "FAIL: bare nan/inf in the JSON:"; head -c 300 "$W/out"; fails=$((fails + 1))
else
    echo "ok: no bare nan/inf in the JSON"
fi

# ulysses-sim's JSON goes through jansson too: a measured time of 0 gives an error of NaN,
# written as null plus error_pct_nonfinite
S="$top_builddir/ulysses-sim"
"$U" attn --seq 64 --heads 4 --backward --repeat 1 --json > "$W/run.json" 2>/dev/null &&
sed 's/"phase_1_ms": {\([^}]*\)"critical": [-0-9.e+]*/"phase_1_ms": {\1"critical": 0/' "$W/run.json" > "$W/run0.json"
expect 0 '"error_pct": null, "error_pct_nonfinite": "nan"' -- \
    "$S" attn --platform dgx-h100 --compare "$W/run0.json" --format json
cases=$((cases + 1))
if grep -qiE '(^|[^_a-z"])(nan|-?inf(inity)?)([^_a-z"]|$)' "$W/out"; then
    echo "FAIL: bare nan/inf in ulysses-sim's JSON:"; head -c 300 "$W/out"; fails=$((fails + 1))
else
    echo "ok: no bare nan/inf in ulysses-sim's JSON"
fi

# ---- hostile paths: refused by type before anything is read or computed
mkdir "$W/dir"
mkfifo "$W/fifo"
expect 2 "--q $W/dir: is a directory, not a .npy file" -- "$U" attn --q "$W/dir" --k "$W/k.npy" --v "$W/v.npy"
expect 2 "--q $W/fifo: is a FIFO (named pipe), not a .npy file" -- timeout 60 "$U" attn --q "$W/fifo" --k "$W/k.npy" --v "$W/v.npy"
expect 2 "--q /dev/zero: is a character device, not a .npy file" -- "$U" attn --q /dev/zero --k "$W/k.npy" --v "$W/v.npy"
head -c 3000000 /dev/zero > "$W/zeros.npy"
expect 2 "not a .npy file (the magic string" -- "$U" attn --q "$W/zeros.npy" --k "$W/k.npy" --v "$W/v.npy"
expect 2 "--out $W/dir: is a directory; outputs must be regular files" -- "$U" attn --seq 32 --out "$W/dir"
expect 2 "--out $W/fifo: is a FIFO (named pipe); outputs must be regular files" -- "$U" attn --seq 32 --out "$W/fifo"
expect 2 "--out $W/dir/: is a directory" -- "$U" attn --seq 32 --out "$W/dir/"
expect 2 "--out $W/nodir/: names a directory, not a file" -- "$U" attn --seq 32 --out "$W/nodir/"
expect 2 "--out and --dq name the same file" -- "$U" attn --seq 32 --backward --out "$W/x.npy" --dq "$W/x.npy"
expect 2 "--out and --dq name the same file" -- "$U" attn --seq 32 --backward --out "$W/x.npy" --dq "$W/dir/../x.npy"
expect 2 "--out $W/q.npy is also an input (--q $W/q.npy): writing it would destroy the input" -- "$U" attn $Q --out "$W/q.npy"
ln "$W/k.npy" "$W/hardlink.npy"
expect 2 "--dq $W/hardlink.npy is also an input (--k $W/k.npy)" -- "$U" attn $Q --backward --dq "$W/hardlink.npy"
expect 2 "/nonexistent/dir: No such file or directory" -- "$U" attn --seq 32 --out /nonexistent/dir/o.npy
"$T" cmp "$W/q.npy" "$W/q.npy" || { echo "FAIL: the input was damaged"; fails=$((fails + 1)); }
ls "$W"/.*tmp* >/dev/null 2>&1 && { echo "FAIL: a refused run left a temporary file"; fails=$((fails + 1)); }

# wait_tmp NAME: until the temporary of output NAME exists (its run has
# passed its checks and is computing), at most 60 s
wait_tmp() {
    i=0
    while ! ls "$W"/."$1".tmp* >/dev/null 2>&1 && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
}

# ---- racing writers.  Run A is stopped (SIGSTOP) once its temporary file
# exists, i.e. after its checks and before its commit; run B then writes the
# same path; A, continued, must refuse to overwrite B's file (exit 1).
race() { # race NAME [prepare]: A's stderr in $W/race_a, status in $ra; B's in $rb
    timeout 120 "$U" attn --seq 256 --repeat 300 --out "$W/$1" >/dev/null 2>"$W/race_a" &
    pid=$!
    wait_tmp "$1"
    kill -STOP $pid
    if [ "$2" = replace ]; then
        "$T" write "$W/other.npy" f32 8 2 2 && mv "$W/other.npy" "$W/$1"; rb=$?
    else
        timeout 60 "$U" attn --seq 64 --repeat 1 --out "$W/$1" >/dev/null 2>"$W/race_b"; rb=$?
    fi
    kill -CONT $pid
    wait $pid
    ra=$?
}
cases=$((cases + 1))
race race.npy run
if [ "$rb" -eq 0 ] && [ "$ra" -eq 1 ] && grep -q "was created by another process during this run; not overwritten" "$W/race_a" &&
    "$T" cmp "$W/race.npy" "$W/race.npy"; then
    echo "ok: racing writers: the first to finish exits 0, the other exits 1 without overwriting"
else
    echo "FAIL: racing writers exit $ra and $rb"; sed 's/^/  | /' "$W/race_a" "$W/race_b" | head -4
    fails=$((fails + 1))
fi
cases=$((cases + 1))
"$T" write "$W/rep.npy" f32 9 2 2
race rep.npy replace
if [ "$ra" -eq 1 ] && grep -q "was replaced or removed by another process" "$W/race_a"; then
    echo "ok: an output replaced during the run is not overwritten (exit 1)"
else
    echo "FAIL: replaced output: exit $ra"; sed 's/^/  | /' "$W/race_a" | head -3; fails=$((fails + 1))
fi
rm -f "$W"/.race.npy.tmp* "$W"/.rep.npy.tmp*

# ---- a full disk and a read-only file system (a small tmpfs, when mounting is permitted)
mkdir "$W/mnt"
if mount -t tmpfs -o size=64k tmpfs "$W/mnt" 2>/dev/null; then
    MNT="$W/mnt"
    printf 'previous' > "$MNT/o.npy"
    expect 1 "--out $MNT/o.npy: cannot write" -- $M -np 2 "$U" attn --seq 1024 --repeat 1 --out "$MNT/o.npy"
    seen "No space left on device"
    expect 0 "previous" -- cat "$MNT/o.npy"
    cases=$((cases + 1))
    if ls "$MNT"/.o.npy.tmp* >/dev/null 2>&1; then echo "FAIL: temporary file left on the full disk"; fails=$((fails + 1)); else echo "ok: no temporary left"; fi
    mount -o remount,ro "$MNT"
    expect 1 "cannot create a file in $MNT: Read-only file system" -- "$U" attn --seq 64 --out "$MNT/o.npy"
    umount "$MNT"
    MNT=""
else
    echo "skipped: disk-full and read-only cases (cannot mount a tmpfs here)"
fi

# ---- outputs: one rule for every output of every subcommand (src/base/base_out.h).
# No output may be an input or another output; all outputs of a run are
# written and fsync'ed before any is renamed, so a failure replaces nothing;
# a killed run's temporary is removed by the next run, a live run's is not.

# same FILE COPY: FILE is byte-identical to COPY
same() {
    cases=$((cases + 1))
    if cmp -s "$1" "$2"; then echo "ok: $1 unchanged"; else echo "FAIL: $1 was changed"; fails=$((fails + 1)); fi
}
# ntmp DIR NAME: how many temporaries of output NAME are in DIR
ntmp() {
    ls -a "$1" | grep -c "^\.$2\.tmp"
}
cp "$W/q.npy" "$W/q.keep"
expect 2 "--overlap-trace $W/q.npy is also an input (--q $W/q.npy): writing it would destroy the input" -- \
    "$U" attn $Q --overlap on --overlap-trace "$W/q.npy"
same "$W/q.npy" "$W/q.keep"
cp "$W/q.npy" "$W/do.npy"
cp "$W/do.npy" "$W/do.keep"
expect 2 "--dk $W/do.npy is also an input (--dout $W/do.npy)" -- "$U" attn $Q --dout "$W/do.npy" --dk "$W/do.npy"
same "$W/do.npy" "$W/do.keep"
expect 2 "--out and --overlap-trace name the same file" -- \
    "$U" attn --seq 32 --overlap on --out "$W/ot.npy" --overlap-trace "$W/ot.npy"
expect 0 "" -- "$U" train --steps 1 --quiet --checkpoint "$W/keep.bin"
cp "$W/keep.bin" "$W/keep.copy"
expect 2 "--log $W/keep.bin is also an input (--resume $W/keep.bin): writing it would destroy the input" -- \
    "$U" train --steps 2 --quiet --resume "$W/keep.bin" --log "$W/keep.bin"
same "$W/keep.bin" "$W/keep.copy"
expect 2 "--plot $W/keep.bin is also an input (--resume $W/keep.bin)" -- \
    "$U" train --steps 2 --quiet --resume "$W/keep.bin" --plot "$W/keep.bin"
same "$W/keep.bin" "$W/keep.copy"
head -c 4096 "$top_srcdir/doc/reliability.md" > "$W/text.txt"
cp "$W/text.txt" "$W/text.keep"
expect 2 "--checkpoint $W/text.txt is also an input (--data $W/text.txt)" -- \
    "$U" train --steps 1 --quiet --seq 64 --data "$W/text.txt" --checkpoint "$W/text.txt"
same "$W/text.txt" "$W/text.keep"
expect 0 "" -- "$U" train --steps 2 --quiet --resume "$W/keep.bin" --checkpoint "$W/keep.bin"  # in place: allowed
# an output that is a symbolic link: refused (the rename would replace the link,
# not its file); the file it names and the link unchanged
cp "$W/q.npy" "$W/lt.npy"
ln -s lt.npy "$W/lk.npy"
expect 2 "--out $W/lk.npy: is a symbolic link" -- "$U" attn --seq 32 --out "$W/lk.npy"
same "$W/lt.npy" "$W/q.npy"
cases=$((cases + 1))
if [ -L "$W/lk.npy" ]; then echo "ok: the link is still a link"; else echo "FAIL: the link was replaced"; fails=$((fails + 1)); fi
expect 2 "--svg $W/nodir/x.svg: directory $W/nodir: No such file or directory" -- \
    "$U" explain --ranks 2 --svg "$W/nodir/x.svg"

# two outputs, the second created by another process while the run is
# stopped: nothing is renamed, not even the first
"$U" attn --seq 256 --repeat 30 --backward --out "$W/m_o.npy" --dq "$W/m_dq.npy" >/dev/null 2>"$W/race_a" &
pid=$!
wait_tmp m_dq.npy
kill -STOP $pid
"$T" write "$W/m_dq.npy" f32 8 2 2
cp "$W/m_dq.npy" "$W/m_dq.keep"
kill -CONT $pid
wait $pid
ra=$?
cases=$((cases + 1))
if [ "$ra" -eq 1 ] && grep -q -- "--dq $W/m_dq.npy was created by another process during this run; not overwritten" "$W/race_a" &&
    grep -q "no output was replaced: --out, --dq keep their previous content" "$W/race_a" && [ ! -e "$W/m_o.npy" ]; then
    echo "ok: one output created meanwhile: exit 1, no output renamed"
else
    echo "FAIL: created meanwhile: exit $ra, --out exists: $([ -e "$W/m_o.npy" ] && echo yes || echo no)"
    sed 's/^/  | /' "$W/race_a" | head -3; fails=$((fails + 1))
fi
same "$W/m_dq.npy" "$W/m_dq.keep"
rm -f "$W"/.m_dq.npy.tmp*

# a killed run: stopped once its temporary exists, another run of the same
# output leaves that temporary alone (its owner lives); killed (-9), the
# temporary stays; the next run removes it and says so
"$U" attn --seq 256 --repeat 300 --out "$W/k9.npy" >/dev/null 2>&1 &
pid=$!
wait_tmp k9.npy
kill -STOP $pid
expect 0 "" -- "$U" attn --seq 32 --repeat 1 --out "$W/k9.npy"
cases=$((cases + 1))
if [ "$(ntmp "$W" k9.npy)" -eq 1 ] && ! grep -q removed "$W/err"; then
    echo "ok: a live (stopped) run's temporary is left alone"
else
    echo "FAIL: the stopped run's temporary: $(ntmp "$W" k9.npy) left; $(cat "$W/err")"; fails=$((fails + 1))
fi
kill -9 $pid
wait $pid 2>/dev/null
cases=$((cases + 1))
if [ "$(ntmp "$W" k9.npy)" -eq 1 ]; then echo "ok: kill -9 leaves its temporary"; else
    echo "FAIL: after kill -9: $(ntmp "$W" k9.npy) temporaries"; fails=$((fails + 1)); fi
expect 0 "note: --out $W/k9.npy: removed 1 temporary file left by an interrupted run" -- \
    "$U" attn --seq 32 --repeat 1 --out "$W/k9.npy"
cases=$((cases + 1))
if [ "$(ntmp "$W" k9.npy)" -eq 0 ]; then echo "ok: the next run removed it"; else
    echo "FAIL: $(ntmp "$W" k9.npy) temporaries of k9.npy left"; fails=$((fails + 1)); fi
# SIGTERM (mpirun aborting a job, timeout): the run removes its own temporaries
"$U" attn --seq 256 --repeat 300 --backward --out "$W/tm.npy" --dq "$W/tm_dq.npy" >/dev/null 2>&1 &
pid=$!
wait_tmp tm_dq.npy
kill -TERM $pid
wait $pid 2>/dev/null
cases=$((cases + 1))
if [ "$(ntmp "$W" tm.npy)" -eq 0 ] && [ "$(ntmp "$W" tm_dq.npy)" -eq 0 ]; then
    echo "ok: SIGTERM: no temporary left"
else
    echo "FAIL: SIGTERM left $(ls -a "$W" | grep tmp)"; fails=$((fails + 1))
fi

# a full disk with several outputs: every temporary is written before any
# rename, so the failure on --dq leaves the previous O, dQ, dK, dV
if mount -t tmpfs -o size=150k tmpfs "$W/mnt" 2>/dev/null; then
    MNT="$W/mnt"
    F="--out $MNT/o.npy --dq $MNT/dq.npy --dk $MNT/dk.npy --dv $MNT/dv.npy"
    expect 0 "" -- $M -np 2 "$U" attn --seq 128 --heads 2 --head-dim 16 --backward --repeat 1 $F
    for f in o dq dk dv; do cp "$MNT/$f.npy" "$W/$f.prev"; done
    expect 1 "--dq $MNT/dq.npy: cannot write" -- \
        $M -np 2 "$U" attn --seq 512 --heads 2 --head-dim 16 --backward --repeat 1 $F
    seen "No space left on device (no output was replaced: --out, --dq, --dk, --dv keep their previous content)"
    for f in o dq dk dv; do same "$MNT/$f.npy" "$W/$f.prev"; done
    cases=$((cases + 1))
    if ls -a "$MNT" | grep -q tmp; then echo "FAIL: temporary left on the full disk"; fails=$((fails + 1)); else
        echo "ok: no temporary left"; fi
    umount "$MNT"
    MNT=""
else
    echo "skipped: several outputs on a full disk (cannot mount a tmpfs here)"
fi

# ==== driver bounds: thread counts, bench a2a's memory, the option agreement's own failure
# ---- an allocation failure inside the option agreement: exit 1 on every rank with the
# message, never the usage with exit 0 (its status was taken for --help)
SECOND="env ULYSSES_TEST_FAIL_ALLOC=1"
for c in "attn --seq 256 --heads 4 --json" "train --layers 1 --channels 16 --heads 2 --seq 8 --steps 1" \
         "calibrate --quick --out $W/cal.json" "bench a2a --min 64K --max 64K --repeat 1" \
         "bench methods --method ulysses --seq 64 --repeat 1"; do
    # shellcheck disable=SC2086
    per_rank 1 -- "$U" $c
    seen "rank 1: out of memory: cannot allocate the option agreement table"
    cases=$((cases + 1))
    if grep -q "usage:" "$W/out"; then echo "FAIL: the usage was printed: $c"; fails=$((fails + 1)); else echo "ok: no usage printed"; fi
done
SECOND=""
# ---- OMP_NUM_THREADS beyond 4 per usable core (it crashed libgomp at 10000): clamped, printed
for c in "attn --seq 1K --heads 8 --threads 2 --repeat 1" "attn --seq 1K --heads 8 --repeat 1" \
         "train --layers 1 --channels 16 --heads 2 --seq 8 --steps 1 --quiet" \
         "bench kernel --seq 256 --heads 1 --head-dim 32 --gemm-size 64 --repeat 1"; do
    # shellcheck disable=SC2086
    expect 0 "OMP_NUM_THREADS asks for 10000 threads; using" -- env OMP_NUM_THREADS=10000 timeout 120 "$U" $c
done
expect 0 "per core of the" -- env OMP_NUM_THREADS=10000 $M -x OMP_NUM_THREADS -np 2 "$U" attn --seq 256 --repeat 1
cases=$((cases + 1))
if [ "$(grep -c "OMP_NUM_THREADS asks" "$W/err")" -eq 1 ]; then echo "ok: printed once for 2 ranks"; else echo "FAIL: the clamp note is not printed once"; fails=$((fails + 1)); fi
# ---- bench a2a: the memory preflight (it had none and set off the OOM killer at --max 64G)
expect 2 "--max must be in 1024..4294967296, got 68719476736" -- $M -np 2 "$U" bench a2a --min 1G --max 64G
expect 2 "not enough memory: the 2 ranks on rank 0's node need about" -- \
    $M -x ULYSSES_TEST_MEM_AVAILABLE=1G -np 2 "$U" bench a2a --min 1G --max 4G
seen "bench a2a at 4.00 GiB per rank"
expect 2 "not enough memory" -- $M -x ULYSSES_TEST_MEM_AVAILABLE=256M -np 2 "$U" bench a2a --min 16M --max 16M
expect 0 "" -- $M -x ULYSSES_TEST_MEM_AVAILABLE=2G -np 2 "$U" bench a2a --min 16M --max 16M --repeat 1
expect 2 "--min 4.0 MiB is larger than --max 1.0 MiB: no size to measure" -- $M -np 2 "$U" bench a2a --min 4M --max 1M
expect 2 "not enough memory: the 2 ranks on rank 0's node need about" -- \
    $M -x ULYSSES_TEST_MEM_AVAILABLE=1G -np 2 "$U" bench methods --method ulysses --seq 1G
expect 2 "bench kernel: not enough memory: the tensors need about 64.11 GiB but the process can get 1.00 GiB" -- \
    env ULYSSES_TEST_MEM_AVAILABLE=1G "$U" bench kernel --seq 16M --repeat 1
expect 2 "ulysses attn: not enough memory" -- env ULYSSES_TEST_MEM_AVAILABLE=1G "$U" bench memory --seq 1G
if "$W/ulimit.sh" 1500000 "$U" version >/dev/null 2>&1; then
    # rank 1 limited to 1.5 GiB of address space; 16 MiB per rank needs about 1.4 GiB of it
    SECOND="$W/ulimit.sh 1500000"
    per_rank 2 -- "$U" bench a2a --min 64K --max 16M --repeat 1
    seen "rank 1: not enough memory: this run needs about"
    seen "(RLIMIT_AS (ulimit -v) minus the address space in use)"
    SECOND=""
else
    echo "skipped: bench a2a under ulimit -v (the program cannot start under an address-space limit: sanitizer build?)"
fi
# ---- --docs of the wrong integer type names the type expected
"$T" write "$W/d32.npy" f32 1 3 && LC_ALL=C sed '1s/<f4/<i4/' "$W/d32.npy" > "$W/i32.npy"
expect 2 "unsupported dtype '<i4' (64-bit integers ('<i8') are expected)" -- "$U" attn --seq 64 --docs "$W/i32.npy"
# ---- a write error on the standard output: exit 1, with a message
if [ -c /dev/full ]; then
    expect 1 "error writing the standard output: No space left on device" -- sh -c '"$0" version > /dev/full' "$U"
    expect 1 "error writing the standard output" -- sh -c '"$0" attn --seq 64 --repeat 1 > /dev/full' "$U"
else
    echo "skipped: /dev/full cases (no /dev/full)"
fi

# ==== calibrate: a failure on one rank during the measurements (every allocation and MPI
# call of calibrate is checked and agreed): both ranks exit 1, rank 1's message, no file
SECOND="env ULYSSES_TEST_FAIL_ALLOC=2"
per_rank 1 -- "$U" calibrate --quick --seq 256 --repeat 1 --out "$W/calf.json"
seen "rank 1: out of memory: cannot allocate 1.0 MiB for the sgemm matrices"
cases=$((cases + 1))
if ls -a "$W" | grep -q "calf.json"; then echo "FAIL: calibrate left a file after a failure"; fails=$((fails + 1)); else
    echo "ok: no platform file and no temporary"; fi
# deeper allocations of rank 1 (the library's all-to-all contexts included): the same exit on both ranks
for k in 8 32 128; do
    SECOND="env ULYSSES_TEST_FAIL_ALLOC=$k"
    cases=$((cases + 1))
    rm -f "$W"/rc.*
    $M -np 1 sh -c '"$@"; echo $? > "'"$W"'/rc.$OMPI_COMM_WORLD_RANK"' sh "$U" calibrate --quick --seq 256 --repeat 1 \
        --out "$W/calf.json" : -np 1 sh -c "$SECOND"' "$@"; echo $? > "'"$W"'/rc.$OMPI_COMM_WORLD_RANK"' sh "$U" \
        calibrate --quick --seq 256 --repeat 1 --out "$W/calf.json" >"$W/out" 2>"$W/err"
    got="$(cat "$W/rc.0" 2>/dev/null) $(cat "$W/rc.1" 2>/dev/null)"
    if [ "$got" = "0 0" ] && [ -s "$W/calf.json" ]; then
        echo "ok: calibrate with rank 1's allocation $k failing: succeeds (fewer allocations)"
    elif [ "$got" = "1 1" ] && grep -q "ulysses calibrate: .*allocate" "$W/err"; then
        echo "ok: calibrate with rank 1's allocation $k failing: both ranks exit 1, $(grep "ulysses calibrate:" "$W/err" | head -1)"
    else
        echo "FAIL: calibrate with rank 1's allocation $k failing: exit statuses '$got'"; sed 's/^/  | /' "$W/err" | grep -v "^  | calibrate \[" | head -5
        fails=$((fails + 1))
    fi
done
SECOND=""

echo "$cases cases, $fails failed"
[ "$fails" -eq 0 ]
