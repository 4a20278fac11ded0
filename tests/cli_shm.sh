#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The shared-memory all-to-all window where it cannot be had
# (doc/reliability.md): /dev/shm too small for it (Docker's default is
# 64 MiB), or one rank short of address space for the P segments every rank
# maps.  The ranks agree before any of them creates the window, so nothing
# hangs or crashes: --a2a auto (attn, train, bench a2a) falls back to the
# message modes with one note, --a2a shm / cma exit 1 on every rank naming
# /dev/shm and the sizes, and no file is left in /dev/shm.  The runs are in a
# mount namespace (unshare -m) with a 16 MiB tmpfs on /dev/shm; every MPI run
# is under `timeout`, a hang fails the test.  Skipped (77) where mount
# namespaces or tmpfs mounts are not permitted; the address-space cases
# where the program cannot start under ulimit -v (sanitizer builds).
set -u
: "${top_builddir:=.}"
: "${MPIRUN:=mpirun}"
if [ -z "${ULYSSES_SHM_TEST_NS:-}" ]; then
    if ! unshare -m sh -c 'mount -t tmpfs -o size=1M tmpfs /dev/shm' 2>/dev/null; then
        echo "skipped: cannot mount a tmpfs on /dev/shm in a mount namespace (unshare -m) here"
        exit 77
    fi
    # private propagation (unshare's default): the tmpfs is seen by this test only
    ULYSSES_SHM_TEST_NS=1 exec unshare -m --propagation private sh "$0" "$@"
fi
mount -t tmpfs -o size=16M tmpfs /dev/shm || { echo "FAIL: mount in the namespace"; exit 1; }
U="$top_builddir/ulysses"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fails=0
cases=0
M="timeout 120 $MPIRUN --oversubscribe"
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# clean: nothing left in /dev/shm by the previous run (window files, osc_sm.*)
clean() {
    cases=$((cases + 1))
    left=$(ls -A /dev/shm)
    if [ -n "$left" ]; then
        bad "left in /dev/shm: $left"
        rm -rf /dev/shm/* /dev/shm/.[!.]* 2>/dev/null
    else
        echo "ok: /dev/shm empty"
    fi
}

# run WANT [PATTERN...] -- ARGS: ARGS on 2 ranks (the first prefixed by
# $FIRST, the second by $SECOND); every rank must exit WANT, the output
# (stderr or stdout) must hold every PATTERN
run() {
    want=$1; shift
    pats=""
    while [ "$1" != "--" ]; do pats="$pats
$1"; shift; done
    shift
    cases=$((cases + 1))
    rm -f "$W"/rc.*
    $M -np 1 sh -c "${FIRST:-}"' "$@"; echo $? > "'"$W"'/rc.$OMPI_COMM_WORLD_RANK"' sh "$U" "$@" : \
        -np 1 sh -c "${SECOND:-}"' "$@"; echo $? > "'"$W"'/rc.$OMPI_COMM_WORLD_RANK"' sh "$U" "$@" \
        >"$W/out" 2>"$W/err"
    rc=$?
    got="$(cat "$W/rc.0" 2>/dev/null) $(cat "$W/rc.1" 2>/dev/null)"
    if [ "$rc" -eq 124 ]; then
        bad "hang (timeout): [${SECOND:-}] $*"; return
    fi
    if [ "$got" != "$want $want" ]; then
        bad "exit statuses '$got' (want $want on both ranks): [${SECOND:-}] $*"
        sed 's/^/  | /' "$W/err" | head -5; return
    fi
    ok=1
    printf '%s\n' "$pats" | while IFS= read -r p; do
        [ -z "$p" ] && continue
        grep -qF -- "$p" "$W/err" "$W/out" || { echo "FAIL: output lacks '$p': $*"; sed 's/^/  | /' "$W/err" | head -5; exit 1; }
    done || { fails=$((fails + 1)); ok=0; }
    [ "$ok" -eq 1 ] && echo "ok: both ranks exit $want: [${SECOND:-}] $*"
}

# notes: the previous run said PATTERN exactly N times (rank 0, once)
notes() {
    cases=$((cases + 1))
    n=$(grep -cF -- "$2" "$W/err")
    [ "$n" -eq "$1" ] && echo "ok: '$2' said $n time(s)" || bad "'$2' said $n times (want $1)"
}

NOTE="note: all-to-all: no shared-memory window (the shared-memory window needs"
clean

# ---- /dev/shm too small: 8 MiB head-side buffers per rank, a 16 MiB window
A="attn --seq 8K --heads 4 --head-dim 32 --window 4 --repeat 1 --warmup 0 --backward"
run 0 "$NOTE" "in /dev/shm (2 segments, one per rank) but /dev/shm has" \
    "auto falls back to pack, datatype and pipeline" "measured == expected on every rank: yes" -- $A
notes 1 "no shared-memory window"
clean
for m in shm cma; do
    run 1 "all-to-all mode $m: the shared-memory window needs" "MiB in /dev/shm" "but /dev/shm has" -- $A --a2a $m
    clean
done
run 0 "" -- $A --a2a pack
notes 0 "shared-memory window"
clean
# the same results with and without the window: the fallback's bits match pack's
run 0 "" -- attn --seq 8K --heads 4 --head-dim 32 --window 4 --repeat 1 --warmup 0 --out "$W/auto.npy"
run 0 "" -- attn --seq 8K --heads 4 --head-dim 32 --window 4 --repeat 1 --warmup 0 --a2a pack --out "$W/pack.npy"
run 0 "$NOTE" -- attn --seq 8K --heads 4 --head-dim 32 --window 4 --repeat 1 --warmup 0 --overlap on --out "$W/ovl.npy"
for f in auto ovl; do
    cases=$((cases + 1))
    cmp -s "$W/$f.npy" "$W/pack.npy" && echo "ok: fallback output ($f) == pack output" || bad "fallback output ($f) differs from pack"
done
clean

# train: the first layer's window does not fit
run 0 "$NOTE" "auto falls back" -- train --layers 2 --channels 128 --heads 4 --seq 4K --batch 1 --steps 1
notes 1 "no shared-memory window"
clean
# train: the first layer's window fits (its pages taken at creation), the
# second's no longer does: never a SIGBUS on the first touch of a page
run 0 "$NOTE" -- train --layers 2 --channels 128 --heads 4 --seq 2K --batch 1 --steps 1
notes 1 "no shared-memory window"
clean

# Open MPI's osc_sm_backing_directory moves the window's file: the check follows it
mkdir "$W/small" && mount -t tmpfs -o size=4M tmpfs "$W/small" || { echo "FAIL: mount in the namespace"; exit 1; }
umount /dev/shm && mount -t tmpfs -o size=64M tmpfs /dev/shm || { echo "FAIL: remount in the namespace"; exit 1; }
export OMPI_MCA_osc_sm_backing_directory="$W/small"
run 1 "all-to-all mode shm: the shared-memory window needs 32.0 MiB in $W/small" -- $A --a2a shm
unset OMPI_MCA_osc_sm_backing_directory
cases=$((cases + 1))
[ -z "$(ls -A "$W/small")" ] && echo "ok: $W/small empty" || bad "left in $W/small: $(ls -A "$W/small")"
umount "$W/small"
run 0 "" -- $A --a2a shm
clean
umount /dev/shm && mount -t tmpfs -o size=16M tmpfs /dev/shm || { echo "FAIL: remount in the namespace"; exit 1; }

# bench a2a: shm and cma columns n/a, auto falls back, both said once
run 0 "the shm and cma columns are n/a" "$NOTE" -- bench a2a --min 1M --max 1M --repeat 1
notes 1 "the shm and cma columns are n/a"
clean

# ---- one rank short of address space (rank 1 under ulimit -v): every rank
# maps the window's P segments, so the window needs twice a segment more
cp "${top_srcdir:-.}/tests/ulimit.sh" "$W/ulimit.sh" && chmod +x "$W/ulimit.sh"
# a fresh tmpfs with room for the windows (its pages are taken only when written)
umount /dev/shm && mount -t tmpfs -o size=2G tmpfs /dev/shm || { echo "FAIL: remount in the namespace"; exit 1; }
if "$W/ulimit.sh" 4000000 "$U" version >/dev/null 2>&1; then
    # the address space rank 1 has in use at the preflight: 4000000 KiB less what it can get
    # (rank 0 passes: no limit, and the node pretends to have 1 PB)
    FIRST="env ULYSSES_TEST_MEM_AVAILABLE=1000000000000000000"
    SECOND="env ULYSSES_TEST_MEM_AVAILABLE=1000000000000000000 $W/ulimit.sh 4000000"
    run 2 "the process can get" -- attn --seq 1G --heads 2 --head-dim 64 --window 4
    FIRST=""
    got=$(sed -n 's/.*rank 1 .*the process can get \([0-9.]*\) \([MG]\)iB.*/\1 \2/p' "$W/err" | head -1)
    base=$(echo "$got" | awk '{ v = $1 * ($2 == "G" ? 1048576 : 1024); printf "%d", 4000000 - v }')
    # 64K tokens, 2 heads of 64, f32: shards 64 MiB, own segment 128 MiB, staging 32 MiB; pack
    # needs about 224 MiB, the window 256 MiB + the shards and the staging, 385 MiB
    A="attn --seq 64K --heads 2 --head-dim 64 --window 4 --repeat 1 --warmup 0"
    lim=$((base + 300 * 1024))
    SECOND="$W/ulimit.sh $lim"
    run 0 "no shared-memory window (rank 1 can map" "RLIMIT_AS, ulimit -v" "auto falls back" -- $A
    clean
    cases=$((cases + 1))
    if grep -q "no shared-memory window (rank 1 can map" "$W/err"; then echo "ok: auto fell back"; else
        bad "auto did not fall back (base $base KiB)"; fi
    # explicit shm: the preflight counts the P segments (exit 2, before any allocation) ...
    run 2 "not enough memory: this run needs about" "the shared-memory window's 1 other segment 128.0 MiB (mapped)" \
        "RLIMIT_AS (ulimit -v)" -- $A --a2a shm
    clean
    # ... and with --force the library refuses the window on every rank (exit 1)
    run 1 "all-to-all mode shm: rank 1 can map" "every rank maps the whole shared-memory window" -- $A --a2a shm --force
    clean
    run 0 "" -- $A --a2a pack
    SECOND=""
    clean
else
    echo "skipped: ulimit -v cases (the program cannot start under an address-space limit: sanitizer build?)"
fi

echo "$cases cases, $fails failed"
[ "$fails" -eq 0 ]
