#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# No dependency cycles between the files of one library or program: for
# every group of object files below, the graph "a.o calls or reads a symbol
# that b.o defines" (from nm) has no cycle, and neither has the graph of the
# project's #include lines between headers.  A cycle means two files that
# can only be understood (and changed) together; see doc/design.md.
set -u
: "${top_builddir:=.}" "${top_srcdir:=.}"
command -v nm >/dev/null 2>&1 || { echo "nm not found: skipped"; exit 77; }
status=0

# cycle NAME FILE...: edges from nm, cycles by transitive closure (awk).
cycle() {
    name=$1; shift
    set -- $(for f in "$@"; do [ -f "$f" ] && echo "$f"; done)
    if [ $# -lt 2 ]; then echo "$name: not built, skipped"; return 0; fi
    out=$(for f in "$@"; do nm "$f" | sed "s|^|$(basename "$f") |"; done | awk '
        NF == 4 && $3 ~ /^[TDBRC]$/ { def[$4] = $1; next }
        NF == 3 && $2 == "U" { use[++n] = $1 " " $3 }
        END {
            for (i = 1; i <= n; i++) {
                split(use[i], p, " ")
                if ((p[2] in def) && def[p[2]] != p[1]) { e[p[1], def[p[2]]] = 1; node[p[1]]; node[def[p[2]]] }
            }
            for (k in node) for (i in node) if ((i, k) in e) for (j in node) if ((k, j) in e) e[i, j] = 1
            for (i in node) if ((i, i) in e) {
                s = i ":"
                for (j in node) if (j != i && ((i, j) in e) && ((j, i) in e)) s = s " " j
                print s
            }
        }' | sort)
    if [ -n "$out" ]; then
        echo "FAIL: $name: files in a call cycle (file: the others of its cycle):"
        echo "$out" | sed 's/^/    /'
        status=1
    else
        echo "ok: $name: $# files, no call cycle"
    fi
}

b=$top_builddir
cycle base "$b"/src/base/libulybase_la-*.o
cycle plan "$b"/src/libulyplan_la-*.o
cycle kernels "$b"/src/libulykern_la-*.o
cycle libulysses "$b"/src/libulysses_la-*.o
cycle ulysses "$b"/src/cli/ulysses-*.o
cycle libusim "$b"/sim/libusim_la-*.o
cycle ulysses-sim "$b"/sim/cli/ulysses_sim-*.o

# Headers: every "#include "x.h"" between the project's headers, no cycle.
hdrs=$(cd "$top_srcdir" && ls include/*.h src/*.h src/base/*.h src/cli/*.h sim/*.h sim/cli/*.h 2>/dev/null)
out=$(cd "$top_srcdir" && for h in $hdrs; do
          sed -n 's/^#include "\([^"]*\)".*/\1/p' "$h" | sed "s|^|$(basename "$h") |"
      done | awk '
        { e[$1, $2] = 1; node[$1]; node[$2] }
        END {
            for (k in node) for (i in node) if ((i, k) in e) for (j in node) if ((k, j) in e) e[i, j] = 1
            for (i in node) if ((i, i) in e) print i
        }' | sort)
if [ -n "$out" ]; then
    echo "FAIL: headers including themselves through others:"; echo "$out" | sed 's/^/    /'; status=1
else
    echo "ok: $(echo "$hdrs" | wc -w) headers, no include cycle"
fi
exit $status
