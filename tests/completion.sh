#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The bash completion of ulysses and ulysses-sim (completion/, generated from
# their --help at build time): sourced in bash, each completion function is
# called with COMP_WORDS / COMP_CWORD as bash sets them and COMPREPLY is
# compared with what the programs print: the commands after "ulysses ", a
# command's commands (ulysses bench), a prefix of a command ("ulysses-sim pl"
# -> plan) and of an option ("ulysses attn --met" -> --method), the words of
# an option's value, file names, and every option that every command's --help
# prints (the program's own options: those of its --help outside the lines
# that show a command; text between backquotes is an example command).
[ -n "${BASH_VERSION:-}" ] || { command -v bash >/dev/null 2>&1 || { echo "bash not installed: skipped"; exit 77; }
                                 exec bash "$0" "$@"; }
set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
for p in ulysses ulysses-sim; do
    [ -f "$top_builddir/completion/$p" ] || { echo "FAIL: $top_builddir/completion/$p was not built"; exit 1; }
done
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
# a sanitizer build's leak report of --help (MPI's own allocations) is no part of the text
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fails=0 checked=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# shellcheck disable=SC1090,SC1091
. "$top_builddir/completion/ulysses"
# shellcheck disable=SC1090,SC1091
. "$top_builddir/completion/ulysses-sim"
complete -p ulysses >/dev/null 2>&1 || fail "sourcing completion/ulysses registers no completion for ulysses"
complete -p ulysses-sim >/dev/null 2>&1 || fail "sourcing completion/ulysses-sim registers no completion for ulysses-sim"

# comp WORD... : the completions bash would offer for the last word (sorted, one a line)
comp() {
    local fn
    fn=$(complete -p "$1" | sed -n 's/.*-F \([^ ]*\) .*/\1/p')
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
    COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    COMPREPLY=()
    "$fn" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    [ "${#COMPREPLY[@]}" -eq 0 ] || printf '%s\n' "${COMPREPLY[@]}" | sort -u
}
# expect "WANTED (lines)" WORD...
expect() {
    local want=$1 got; shift
    checked=$((checked + 1))
    got=$(comp "$@")
    [ "$got" = "$want" ] || fail "'$*<TAB>' completes to [$(echo $got)], want [$(echo $want)]"
}

# help PROG WORD...: PROG WORD... --help, run once
helpfile() { echo "$W/help.$(printf '%s_' "$@" | tr -c 'A-Za-z0-9_\n' '_')"; }
help() {
    local f
    f=$(helpfile "$@")
    [ -f "$f" ] || "$@" --help > "$f" 2> "$f.err" || : > "$f.failed"
    cat "$f"
}
# the commands of PROG, as its --help shows them (the man pages' rule, doc/man/mkman.sh)
commands() {
    { help "$1" | sed -n '/^commands:/,/^$/s/^  \([a-z][a-z0-9-]*\)  .*/\1/p'
      help "$1" | sed -n "s/^\(usage:\)\{0,1\} *$2 \([a-z][a-z0-9-]*\) .*/\2/p"; } | sort -u
}
# every --help at once (most of their time is MPI's start, spent waiting);
# one that printed nothing runs again alone, as Open MPI's singletons started
# together can fail to create their session directory
prefetch() {  # prefetch PROG NAME
    local s t
    help "$1" > /dev/null
    for s in $(commands "$1" "$2"); do help "$1" "$s" > /dev/null & done
    wait
    for s in $(commands "$1" "$2"); do
        for t in $(help "$1" "$s" | sed -n '1s/.*<\([a-z0-9|-]*\)>.*/\1/p' | tr '|' ' '); do
            help "$1" "$s" "$t" > /dev/null &
        done
    done
    wait
    for f in "$W"/help.*; do
        case $f in *.err | *.failed) continue ;; esac
        [ -s "$f" ] || rm -f "$f" "$f.err" "$f.failed"
    done
}
prefetch "$top_builddir/ulysses" ulysses
prefetch "$top_builddir/ulysses-sim" ulysses-sim
optsof() { sed 's/`[^`]*`//g' | grep -o -- '--[a-z][a-z0-9-]*' | sort -u; }

expect "$(commands "$top_builddir/ulysses" ulysses)" ulysses ""
expect "$(commands "$top_builddir/ulysses-sim" ulysses-sim)" ulysses-sim ""
expect "plan" ulysses-sim pl
expect "--version" ulysses --vers
expect "--version" ulysses-sim --vers
if grep -q '^#define HAVE_MPI 1' "$top_builddir/config.h"; then   # the commands that need MPI
    expect "--method" ulysses attn --met
    expect "$(printf 'a2a\nkernel\nmemory\nmethods')" ulysses bench ""
    expect "" ulysses attn --nosuch
fi
expect "ring" ulysses explain --method ri
expect "ring-inner" ulysses explain --method ring --placement ring
expect "$(printf 'csv\njson\ntable')" ulysses-sim sweep --format ""
mkdir "$W/d" && : > "$W/d/out-one.svg" && : > "$W/d/out-two.svg"
expect "$(printf '%s\n' "$W/d/out-one.svg" "$W/d/out-two.svg")" ulysses explain --ranks 4 --svg "$W/d/out-"

# every option of every command's --help is completed after that command
every() {  # every PROG NAME WORD... : the options of PROG WORD... --help, all completed
    local prog=$1 name=$2; shift 2
    local o got n=0
    help "$prog" "$@" > "$W/help"
    if [ ! -s "$W/help" ]; then
        # a build configured --without-mpi lists the commands that need MPI, which refuse
        if grep -q "needs MPI" "$(helpfile "$prog" "$@").err" 2>/dev/null && ! grep -q '^#define HAVE_MPI 1' "$top_builddir/config.h"; then
            echo "skip: $name $* (needs MPI, which this build has not)"; return
        fi
        fail "$name $* --help printed nothing (stderr: $(head -n 3 "$(helpfile "$prog" "$@").err" | tr '\n' ' '))"; return
    fi
    if [ $# -eq 0 ]; then grep -v "^\(usage:\)\{0,1\} *$name [a-z]" "$W/help"
    else grep -v "^\(usage:\)\{0,1\} *$name -" "$W/help"; fi | optsof > "$W/want"
    # a command pointing to the options of one of its modes ("NAME sub --flag --help")
    for f in $(sed -n "s/.*$name ${1:-} \(--[a-z][a-z0-9-]*\) --help.*/\1/p" "$W/help" | sort -u); do
        { "$prog" "$@" "$f" --help 2>/dev/null || "$prog" "$@" --help "$f"; } | optsof >> "$W/want"
    done
    got=$(comp "$name" "$@" --)
    for o in $(sort -u "$W/want"); do
        n=$((n + 1))
        [[ $'\n'$got$'\n' == *$'\n'"$o"$'\n'* ]] || fail "'$name $* --<TAB>' does not offer $o (from $name $* --help)"
    done
    checked=$((checked + n))
    echo "ok: $name${1:+ }$*: $n options"
}
for name in ulysses ulysses-sim; do
    prog=$top_builddir/$name
    every "$prog" "$name"
    for s in $(commands "$prog" "$name"); do
        inner=$(help "$prog" "$s" | sed -n '1s/.*<\([a-z0-9|-]*\)>.*/\1/p' | tr '|' ' ')
        if [ -z "$inner" ]; then every "$prog" "$name" "$s"; continue; fi
        for t in $inner; do every "$prog" "$name" "$s" "$t"; done
    done
done
echo "$checked completions checked"
[ "$fails" -eq 0 ]
