#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The status table of doc/reliability.md ("Every command's statuses") is
# true: run each row's example in a scratch directory, with `ulysses` and
# `ulysses-sim` the build tree's programs and `mpirun` the suite's launcher
# (under `timeout`), and compare the exit status with the row's.  In an
# example `A && B`, A is setup: it must succeed, and B's status is compared.
set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
: "${MPIRUN:=mpirun}"
U=$(cd "$top_builddir" && pwd)/ulysses
S=$(cd "$top_builddir" && pwd)/ulysses-sim
DOC="$top_srcdir/doc/reliability.md"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export ULYSSES_SIM_PRESETS="${ULYSSES_SIM_PRESETS:-$(cd "$top_srcdir" && pwd)/sim/presets}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
rows="$W/rows"
# Rows between the markers: "| cmd | situation | status | `example` |".
sed -n '/<!-- status-table begin -->/,/<!-- status-table end -->/p' "$DOC" |
    sed -n 's/^| `[^|]*` | [^|]* | \([0-9]\) | `\(.*\)` |$/\1 \2/p' >"$rows"
total=$(sed -n '/<!-- status-table begin -->/,/<!-- status-table end -->/p' "$DOC" | grep -c '^| `')
n=$(wc -l <"$rows")
if [ "$n" -eq 0 ] || [ "$n" -ne "$total" ]; then
    echo "FAIL: $DOC: $n of $total status-table rows parsed (want every row as | \`cmd\` | situation | status | \`example\` |)"
    exit 1
fi
fails=0
i=0
while read -r want cmd; do
    i=$((i + 1))
    # The programs by their build-tree paths; mpirun as the suite runs it.
    run=$(printf '%s\n' "$cmd" | sed -e "s#ulysses-sim#'$S'#g" -e "s#ulysses \\([a-z-]\\)#'$U' \\1#g" \
        -e "s#^ulysses\$#'$U'#" -e "s#mpirun#timeout 120 $MPIRUN --oversubscribe#g" \
        -e 's#&&#|| exit 99;#g') # a setup step that fails is status 99, never the row's
    mkdir "$W/$i"
    (cd "$W/$i" && timeout 300 sh -c "$run" </dev/null >"$W/out" 2>"$W/err")
    got=$?
    if [ "$got" -ne "$want" ]; then
        echo "FAIL: exit $got (doc/reliability.md says $want): $cmd"
        sed 's/^/  | /' "$W/err" | head -5
        fails=$((fails + 1))
    else
        echo "ok: $want: $cmd"
    fi
done <"$rows"
echo "doc_status: $n rows, $fails failed"
[ "$fails" -eq 0 ]
