#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# --version of both programs: the first line is "NAME VERSION" with the
# package's version (that of configure, of ulysses.pc and of the man pages),
# the second what the build was built with (MPI exactly when this build has
# it), the last the license; `ulysses version` prints the same; an extra
# argument is bad input (exit 2, one line naming it, nothing on stdout).
set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ver=$(sed -n 's/^PACKAGE_VERSION = //p' "$top_builddir/Makefile")
[ -n "$ver" ] || { echo "FAIL: no PACKAGE_VERSION in $top_builddir/Makefile"; exit 1; }
have_mpi=no
grep -q '^#define HAVE_MPI 1' "$top_builddir/config.h" && have_mpi=yes

for name in ulysses ulysses-sim; do
    prog=$top_builddir/$name
    "$prog" --version > "$W/out" 2> "$W/err"; rc=$?
    [ "$rc" -eq 0 ] || fail "$name --version exits $rc"
    [ -s "$W/err" ] && fail "$name --version writes to stderr: $(head -n 1 "$W/err")"
    first=$(sed -n 1p "$W/out")
    [ "$first" = "$name $ver" ] || fail "$name --version's first line is '$first', want '$name $ver'"
    [ "$(wc -l < "$W/out")" -eq 3 ] || fail "$name --version prints $(wc -l < "$W/out") lines, want 3"
    sed -n 3p "$W/out" | grep -q '^License: Apache-2.0 ' || fail "$name --version's last line names no Apache-2.0 license: $(sed -n 3p "$W/out")"
    [ -f "$top_srcdir/LICENSE" ] && grep -q 'Apache License' "$top_srcdir/LICENSE" && grep -q 'Version 2.0, January 2004' "$top_srcdir/LICENSE" ||
        fail "$top_srcdir/LICENSE is not the Apache License 2.0"
    "$prog" --version extra > "$W/out2" 2> "$W/err2"; rc=$?
    [ "$rc" -eq 2 ] || fail "$name --version extra exits $rc, want 2"
    [ -s "$W/out2" ] && fail "$name --version extra prints on stdout"
    { [ "$(wc -l < "$W/err2")" -eq 1 ] && grep -q "'extra'" "$W/err2"; } || fail "$name --version extra: want one line naming 'extra', got: $(cat "$W/err2")"
    [ "$name" = ulysses ] || continue
    "$prog" version > "$W/out3" 2>&1 || fail "ulysses version exits $?"
    cmp -s "$W/out" "$W/out3" || fail "ulysses version and ulysses --version print different text"
    second=$(sed -n 2p "$W/out")
    case "$have_mpi:$second" in
    yes:"libulysses $ver: MPI "[0-9]*) ;;
    no:"libulysses $ver: no MPI"*) ;;
    *) fail "ulysses --version's second line '$second' does not say libulysses $ver and MPI ($have_mpi)" ;;
    esac
done
sed -n 2p "$W/out" | grep -q "^libusim $ver: jansson [0-9]" || fail "ulysses-sim --version's second line: $(sed -n 2p "$W/out")"
if [ "$have_mpi" = yes ] && command -v pkg-config >/dev/null 2>&1; then
    pcv=$(PKG_CONFIG_PATH="$top_builddir" pkg-config --modversion ulysses 2>/dev/null)
    [ "$pcv" = "$ver" ] || fail "ulysses.pc says version '$pcv', the programs $ver"
fi
for name in ulysses ulysses-sim; do
    [ -f "$top_builddir/$name.1" ] || continue
    grep -q "\"$name $ver\"" "$top_builddir/$name.1" || fail "$name.1 does not carry the version $ver in its header"
done
[ "$fails" -eq 0 ] && echo "ok: ulysses and ulysses-sim $ver"
[ "$fails" -eq 0 ]
