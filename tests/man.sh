#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The man pages agree with the programs: every option printed by a
# command's --help (and by each subcommand's) appears in the rendered page,
# every function of the public headers is in libulysses(3), and `man -l`
# renders them from the build tree.
set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
command -v man >/dev/null 2>&1 || { echo "man not installed: skipped"; exit 77; }
[ -f "$top_builddir/ulysses.1" ] || { echo "no man pages in this build (no help2man): skipped"; exit 77; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fails=0
render() { LC_ALL=C MANWIDTH=250 man -l "$1" 2>"$W/err" | col -b; }

# options of PROG [SUB...] --help must all be on PAGE
check_opts() {
    page=$1; shift
    "$@" --help > "$W/help" 2>&1 || return 0
    for o in $(grep -o -- '--[a-z][a-z0-9-]*' "$W/help" | sort -u); do
        grep -q -- "$o" "$W/page.txt" || { echo "FAIL: $page lacks $o (from $* --help)"; fails=$((fails + 1)); }
    done
}

for prog in ulysses ulysses-sim; do
    render "$top_builddir/$prog.1" > "$W/page.txt"
    [ -s "$W/page.txt" ] || { echo "FAIL: man -l $prog.1 rendered nothing"; cat "$W/err"; fails=$((fails + 1)); continue; }
    grep -q "^NAME" "$W/page.txt" || { echo "FAIL: $prog.1 has no NAME section"; fails=$((fails + 1)); }
    check_opts "$prog.1" "$top_builddir/$prog"
    subs=$(sed -n 's/^   \('"$prog"' [a-z].*\)$/\1/p' "$W/page.txt")
    [ -n "$subs" ] || { echo "FAIL: $prog.1 has no subcommand sections"; fails=$((fails + 1)); }
    oldifs=$IFS
    IFS='
'
    for line in $subs; do
        IFS=$oldifs
        # shellcheck disable=SC2086
        set -- ${line#"$prog"}
        check_opts "$prog.1" "$top_builddir/$prog" "$@"
    done
    IFS=$oldifs
    echo "ok: $prog.1 ($(echo "$subs" | wc -l) subcommand sections)"
done
# every subcommand listed by ulysses --help has its section
render "$top_builddir/ulysses.1" > "$W/page.txt"
for s in $("$top_builddir/ulysses" --help | sed -n '/^commands:/,/^$/s/^  \([a-z][a-z0-9-]*\)  .*/\1/p'); do
    [ "$s" = version ] && continue
    grep -q "^   ulysses $s\$" "$W/page.txt" || { echo "FAIL: ulysses.1 has no section for '$s'"; fails=$((fails + 1)); }
done

if [ -f "$top_builddir/libulysses.3" ]; then
    render "$top_builddir/libulysses.3" > "$W/lib.txt"
    n=0
    for f in $(grep -ho '\buly_[a-z0-9_]*(' "$top_srcdir"/include/*.h | tr -d '(' | sort -u); do
        n=$((n + 1))
        grep -q "\b$f(" "$W/lib.txt" || { echo "FAIL: libulysses.3 lacks $f"; fails=$((fails + 1)); }
    done
    echo "ok: libulysses.3 describes $n functions"
fi
[ "$fails" -eq 0 ]
