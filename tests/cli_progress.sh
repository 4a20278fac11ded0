#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The progress line of long work (src/base/base_progress.h): drawn on stderr
# when it is a terminal, rewritten in place with \r and blanked at the end;
# never written into a file or a pipe, never with --quiet.  script(1) gives
# the programs a pseudo-terminal; ULYSSES_PROGRESS_INTERVAL=0 redraws on
# every update, so that runs of a second show lines.  Covers ulysses attn
# --check (under mpirun, where rank 0's stdout is a terminal and its stderr a
# pipe, both mpirun's, and without), ulysses train, ulysses-sim sweep and
# plan.  (calibrate's progress lines, and that they go into files too, are
# tests/cli_calibrate.sh's; its --quiet is left out here: seconds of
# measuring.)
set -u
: "${top_builddir:=.}"
: "${MPIRUN:=mpirun}"
U="$top_builddir/ulysses"
S="$top_builddir/ulysses-sim"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 ULYSSES_PROGRESS_INTERVAL=0
command -v script >/dev/null 2>&1 || { echo "no script(1) (util-linux): skipped"; exit 77; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

# tty NAME COMMAND: run COMMAND (a shell line) with a pseudo-terminal as its
# stdin, stdout and stderr; what reached the terminal is in $W/NAME.tty
tty() {
    script -qec "$2" "$W/$1.tty" >/dev/null 2>&1 </dev/null
    rc=$?
    [ "$rc" -eq 0 ] || { bad "$1: exit $rc"; tr '\r' '\n' <"$W/$1.tty" | tail -5; }
}
has() { grep -q -- "$2" "$W/$1" || bad "$3"; }
hasnot() { if grep -q -- "$2" "$W/$1"; then bad "$3"; fi; }
cr() { tr -cd '\r' <"$W/$1" | wc -c; }

A="attn --seq 128 --heads 2 --causal --backward --check"
L="ulysses attn --check: fp64 reference"

# ---- attn --check under mpirun: stderr on the terminal, stdout in a file
tty attn "timeout 120 $MPIRUN --oversubscribe -np 2 $U $A >$W/attn.out"
has attn.tty "$L forward" "attn --check on a terminal: no progress line of the forward reference"
has attn.tty "$L backward, 256 of 256 rows" "attn --check on a terminal: no progress line up to the last backward row"
[ "$(cr attn.tty)" -ge 10 ] || bad "attn --check on a terminal: the line is not rewritten in place (carriage returns)"
# the last line is blanked: \r, spaces only, \r
tr '\r' '\n' <"$W/attn.tty" | grep -q '^ \{40,\}$' || bad "attn --check: the progress line is not blanked at the end"
hasnot attn.out "ulysses attn --check:" "attn --check: the progress line reached stdout"
has attn.out "bitwise equal to one process" "attn --check: the verdict is not on stdout"
[ "$fails" -eq 0 ] && ok "attn --check under mpirun, stderr a terminal: $(cr attn.tty) redraws, blanked at the end, none on stdout"

# ---- with --quiet (one process): nothing
tty attnq "timeout 120 $U $A --quiet >$W/attnq.out"
hasnot attnq.tty "ulysses attn --check:" "attn --check --quiet: a progress line on the terminal"
has attnq.out "bitwise equal to one process" "attn --check --quiet: no verdict"
# ---- stderr in a file (stdout on the terminal): nothing in the file
tty attnf "timeout 120 $MPIRUN --oversubscribe -np 1 $U $A 2>$W/attnf.err"
hasnot attnf.err "ulysses attn --check:" "attn --check, stderr a file: the progress line is in the file"
[ "$(cr attnf.err)" -eq 0 ] || bad "attn --check, stderr a file: a carriage return in it"
hasnot attnf.tty "ulysses attn --check:" "attn --check, stderr a file: a progress line on the terminal"
# ---- one process without mpirun: its own stderr is the terminal
tty attn1 "timeout 120 $U $A >$W/attn1.out"
has attn1.tty "$L backward" "attn --check without mpirun on a terminal: no progress line"
[ "$fails" -eq 0 ] && ok "attn --check: none with --quiet, none in a file; one process on a terminal draws it"

# ---- train: the step lines go to a file, the progress line to the terminal
T="train --layers 2 --channels 16 --heads 4 --kv-heads 2 --seq 30 --batch 2 --steps 3"
tty train "timeout 120 $MPIRUN --oversubscribe -np 1 $U $T >$W/train.out"
has train.tty "ulysses train: step 3 of 3, last loss" "train, stdout a file: no progress line on the terminal"
hasnot train.out "ulysses train: step" "train: the progress line reached stdout"
has train.out "^step     3/3" "train: the step lines are not on stdout"
# both on the terminal: the step lines are the progress; --quiet: none
tty train2 "timeout 120 $MPIRUN --oversubscribe -np 1 $U $T"
hasnot train2.tty "ulysses train: step" "train, stdout a terminal too: a progress line besides the step lines"
tty trainq "timeout 120 $U $T --quiet >$W/trainq.out"
hasnot trainq.tty "ulysses train: step" "train --quiet: a progress line"
[ "$fails" -eq 0 ] && ok "train: progress on the terminal only when the step lines go elsewhere, none with --quiet"

# ---- ulysses-sim sweep (CSV into a file) and plan
SW="sweep --seq 8K:32K --gpus 8:32 --out $W/sw.csv"
tty sweep "$S $SW"
has sweep.tty "ulysses-sim sweep: 45 of 45 configurations" "sweep on a terminal: no progress line up to the last configuration"
tty sweepq "$S $SW --quiet"
hasnot sweepq.tty "ulysses-sim sweep:" "sweep --quiet: a progress line"
"$S" $SW 2>"$W/sweep.err" >/dev/null || bad "sweep: exit $?"
hasnot sweep.err "configurations" "sweep, stderr a file: the progress line is in it"
[ "$(grep -vc "^ulysses-sim: wrote $W/sw.csv (45 rows)\$" "$W/sweep.err")" -eq 0 ] ||
    bad "sweep, stderr a file: more than the line naming the CSV"
tty plan "$S plan --gpus 16 --seq 32K --method ulysses,ring"
has plan.tty "ulysses-sim plan (16 GPUs): simulating candidate" "plan on a terminal: no progress line"
tty planq "$S plan --gpus 16 --seq 32K --method ulysses,ring --quiet"
hasnot planq.tty "ulysses-sim plan (16 GPUs):" "plan --quiet: a progress line"
"$S" plan --gpus 16 --seq 32K --method ulysses,ring 2>"$W/plan.err" >/dev/null || bad "plan: exit $?"
hasnot plan.err "simulating candidate" "plan, stderr a file: the progress line is in it"
[ "$fails" -eq 0 ] && ok "ulysses-sim sweep and plan: progress on a terminal, none with --quiet or in a file"

[ "$fails" -eq 0 ] && echo "PASS: progress lines"
[ "$fails" -eq 0 ]
