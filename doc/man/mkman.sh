#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# mkman.sh HELP2MAN PROGRAM NAME DESCRIPTION INCLUDE OUT
#
# Writes the man page OUT of PROGRAM (a built binary, shown as NAME) with
# help2man, from its --help and --version, plus one subsection per
# subcommand holding that subcommand's --help text verbatim: the page is
# generated from the same text the program prints, so the two cannot
# disagree.  Subcommands are found in the program's own help: the lines
# under "commands:" ("  name   what it does") and usage lines of the form
# "NAME sub [...]"; a subcommand whose usage shows "<a|b|c>" has its own
# subcommands a, b, c.  INCLUDE is a help2man include file (extra sections:
# SEE ALSO, FILES, ...).
set -eu
[ $# -eq 6 ] || { echo "usage: $0 HELP2MAN PROGRAM NAME DESCRIPTION INCLUDE OUT" >&2; exit 2; }
h2m=$1 prog=$2 name=$3 desc=$4 include=$5 out=$6
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# In a sanitizer build the leak report of a program's --help (MPI's own
# allocations) must not make its text look like a failure.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS

"$prog" --help > "$tmp/help"
subs=$( { sed -n '/^commands:/,/^$/s/^  \([a-z][a-z0-9-]*\)  .*/\1/p' "$tmp/help"
          sed -n "s/^\(usage:\)\{0,1\} *$name \([a-z][a-z0-9-]*\) .*/\2/p" "$tmp/help"; } | awk '!seen[$0]++')

# roff-escape verbatim text: backslashes, and lines starting with . or '
esc() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }

section() {  # section "TITLE" command...
    title=$1; shift
    "$@" --help > "$tmp/sub" 2>&1 || return 1
    printf '.SS "%s"\n.nf\n' "$title"
    esc < "$tmp/sub"
    printf '.fi\n'
}

{
    printf '[COMMANDS]\n'
    printf 'Each command prints the text below with \\fB--help\\fR.\n'
    for s in $subs; do
        [ "$s" = version ] && continue
        section "$name $s" "$prog" "$s" || continue
        inner=$(sed -n '1s/.*<\([a-z0-9|-]*\)>.*/\1/p' "$tmp/sub" | tr '|' ' ')
        for t in $inner; do
            section "$name $s $t" "$prog" "$s" "$t" || true
        done
    done
    cat "$include"
} > "$tmp/include"

# help2man names the page after the program file; run it through a link
# called NAME so that a libtool wrapper or a build path does not show.
ln -s "$(cd "$(dirname "$prog")" && pwd)/$(basename "$prog")" "$tmp/$name"
# The version from the first line of --version (the lines after it say what
# this build was built with, which is no part of the page); the license has
# its section in INCLUDE.
ver=$("$prog" --version | sed -n '1s/^[^ ]* //p')
"$h2m" --no-info --version-string="$ver" --name="$desc" --include="$tmp/include" --output="$tmp/page" "$tmp/$name"
mv "$tmp/page" "$out"
