# SPDX-License-Identifier: Apache-2.0
# expect.sh -- sourced by the command-line tests.  Needs $W (a scratch
# directory) and counts into $cases and $fails.
#
# expect STATUS SUBSTRING -- command...
#   the command must exit with STATUS and print SUBSTRING (stdout or stderr;
#   empty: anything); a bad-input exit (2) must come with a one-line message,
#   except under mpirun (it adds its own banner; also when the command is
#   `timeout ... mpirun ...`) and for usage text.
expect() {
    want=$1; pat=$2; shift 3
    cases=$((cases + 1))
    "$@" >"$W/out" 2>"$W/err"
    got=$?
    if [ "$got" -ne "$want" ]; then
        echo "FAIL: exit $got (want $want): $*"; sed 's/^/  | /' "$W/err" | head -5
        fails=$((fails + 1)); return
    fi
    if [ -n "$pat" ] && ! grep -q -- "$pat" "$W/out" "$W/err"; then
        echo "FAIL: output lacks '$pat': $*"; sed 's/^/  | /' "$W/err" "$W/out" | head -5
        fails=$((fails + 1)); return
    fi
    case "$*" in *"${MPIRUN:-mpirun}"*) mpi=1 ;; *) mpi=0 ;; esac
    if [ "$want" -eq 2 ] && [ "$mpi" -eq 0 ] && [ "$pat" != "usage" ] &&
        [ "$(wc -l < "$W/err")" -ne 1 ]; then
        echo "FAIL: want a one-line message: $*"; sed 's/^/  | /' "$W/err" | head -5
        fails=$((fails + 1)); return
    fi
    echo "ok: $*"
}
