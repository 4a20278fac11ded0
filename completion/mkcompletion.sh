#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# mkcompletion.sh PROGRAM NAME OUT
#
# Writes OUT, the bash completion of PROGRAM (a built binary, completed as
# NAME), from its own --help texts, so that the completion cannot disagree
# with the program: the commands (the lines under "commands:" and the usage
# lines "NAME sub ..."), a command's own commands ("<a|b|c>" on the first
# line of its --help), and every option each --help prints.  A command whose
# help says "Other options as for NAME" also completes NAME's options; one
# whose help points to "NAME sub --flag --help" also completes the options
# printed there.  After an option, its value is completed from the metavariable
# the help shows: "a|b|c" (lower case) gives the words, F, FILE, DIR, F.ext
# and FILE.ext give file names, any other metavariable nothing; a word that
# is not an option completes as a file name.
set -eu
[ $# -eq 3 ] || { echo "usage: $0 PROGRAM NAME OUT" >&2; exit 2; }
prog=$1 name=$2 out=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# a sanitizer build's leak report of --help (MPI's own allocations) is no part of the text
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS

# hlp WORD...: PROGRAM WORD... --help on stdout; once more when it fails (Open
# MPI's singletons started at the same time, by a parallel make, can fail to
# create their session directory)
hlp() { "$prog" "$@" --help 2>/dev/null || { sleep 1; "$prog" "$@" --help 2>/dev/null; }; }

fn=_$(printf '%s' "$name" | tr -c 'A-Za-z0-9_\n' '_')

# opts FILE: "option kind words" for every option FILE mentions, kind being
# w (the words: "--opt a|b|c", or "--opt M   a | b | c ..." in an option
# list), f (a file name), v (some other value) or - (no value seen)
# (text between backquotes is an example command, not an option of this one)
opts() {
    sed 's/`[^`]*`//g' "$1" > "$1.nq"
    { grep -o -- '--[a-z][a-z0-9-]*\( [^- ],*[^] ,)]*\)\{0,1\}' "$1.nq" | sed 's/^/m /'
      sed -n 's/^ *\(-[a-zA-Z], \)\{0,1\}\(--[a-z][a-z0-9-]*\) [^ ]*  *\([a-z0-9][a-z0-9.+-]*\( | [a-z0-9][a-z0-9.+-]*\)\{1,\}\).*/d \2 \3/p' "$1.nq"
      echo "m --help"; } | awk '
    {
        o = $2; m = $3; k = "-"; w = ""
        if ($1 == "d") { k = "w"; for (i = 3; i <= NF; i++) if ($i != "|") w = w (w ? " " : "") $i }
        else if (m ~ /^-/ || m == "") k = "-"
        else if (m ~ /^[a-z0-9][a-z0-9.+-]*(\|[a-z0-9][a-z0-9.+-]*)+$/) { k = "w"; w = m; gsub(/\|/, " ", w) }
        else if (m ~ /FILE|DIR/ || m == "F" || m ~ /^F\./) k = "f"
        else if (m ~ /^[a-z]$/ || m ~ /^[A-Z]/) k = "v"
        if (!(o in kind)) { order[++n] = o; kind[o] = "-" }
        # the most telling occurrence wins: the words (of every occurrence that
        # lists words: "--method a|b" and "--method c|d" give a b c d), then
        # file names, then a value
        if (k == "w" && kind[o] == "w") {
            nw = split(w, ws, " ")
            for (j = 1; j <= nw; j++) if ((" " words[o] " ") !~ (" " ws[j] " ")) words[o] = words[o] " " ws[j]
        } else if (k == "w" || (k == "f" && kind[o] != "w") || (k == "v" && kind[o] == "-")) { kind[o] = k; words[o] = w }
    }
    END { for (i = 1; i <= n; i++) print order[i], kind[order[i]], words[order[i]] }'
}

hlp > "$tmp/help"
# the program's own options: not those of the lines that show a command ("NAME sub ...")
grep -v "^\(usage:\)\{0,1\} *$name [a-z]" "$tmp/help" > "$tmp/top" || true
subs=$( { sed -n '/^commands:/,/^$/s/^  \([a-z][a-z0-9-]*\)  .*/\1/p' "$tmp/help"
          sed -n "s/^\(usage:\)\{0,1\} *$name \([a-z][a-z0-9-]*\) .*/\2/p" "$tmp/help"; } | awk '!seen[$0]++')
opts "$tmp/top" > "$tmp/opts."
: > "$tmp/paths"
for s in $subs; do
    # a command's options: not those of the lines that show the program alone ("NAME --opt")
    hlp "$s" | grep -v "^\(usage:\)\{0,1\} *$name -" > "$tmp/h.$s" || true
    if grep -q "options as for $name\b" "$tmp/h.$s"; then grep -v -- '--version' "$tmp/top" >> "$tmp/h.$s"; fi
    for f in $(sed -n "s/.*$name $s \(--[a-z][a-z0-9-]*\) --help.*/\1/p" "$tmp/h.$s" | sort -u); do
        "$prog" "$s" "$f" --help > "$tmp/hf" 2>/dev/null || "$prog" "$s" --help "$f" > "$tmp/hf" 2>/dev/null || true
        cat "$tmp/hf" >> "$tmp/h.$s"
    done
    inner=$(sed -n '1s/.*<\([a-z0-9|-]*\)>.*/\1/p' "$tmp/h.$s" | tr '|' ' ')
    # a command of commands takes only --help itself
    if [ -n "$inner" ]; then echo "--help -" > "$tmp/opts.$s"; else opts "$tmp/h.$s" > "$tmp/opts.$s"; fi
    printf '%s\t%s\n' "$s" "$(echo $inner)" >> "$tmp/paths"
    for t in $inner; do
        hlp "$s" "$t" > "$tmp/h.$s.$t" || true
        opts "$tmp/h.$s.$t" > "$tmp/opts.$s.$t"
    done
done

# the options of a path as one line, and its value cases
optline() { awk '{ printf "%s%s", (NR > 1 ? " " : ""), $1 } END { print "" }' "$1"; }
cases() {  # cases PATH FILE
    awk -v p="$1" '
    $2 == "f" { f = f (f ? "|" : "") "\x27" p " " $1 "\x27" }
    $2 == "v" { v = v (v ? "|" : "") "\x27" p " " $1 "\x27" }
    $2 == "w" { w = ""; for (i = 3; i <= NF; i++) w = w (i > 3 ? " " : "") $i
                printf "    \x27%s %s\x27) COMPREPLY=($(compgen -W \x27%s\x27 -- \"$cur\")); return ;;\n", p, $1, w }
    END { if (f) printf "    %s) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n", f
          if (v) printf "    %s) COMPREPLY=(); return ;;\n", v }' "$2"
}

{
    echo "# bash completion of $name: its commands, their commands and every option they print."
    echo "# Generated from the --help texts of $name by completion/mkcompletion.sh; do not edit."
    echo "$fn()"
    echo "{"
    echo '    local cur=${COMP_WORDS[COMP_CWORD]} prev= path= i=1 opts'
    echo "    local subs='$(echo $subs)'"
    echo '    [ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD-1]}'
    echo '    COMPREPLY=()'
    echo '    # the command (and its command) before the word being completed'
    echo '    if [ "$COMP_CWORD" -gt 1 ] && [[ " $subs " == *" ${COMP_WORDS[1]} "* ]]; then'
    echo '        path=${COMP_WORDS[1]}; i=2'
    echo '        local inner='
    echo '        case "$path" in'
    while IFS='	' read -r s inner; do
        [ -n "$inner" ] && printf "        '%s') inner='%s' ;;\n" "$s" "$inner"
    done < "$tmp/paths"
    echo '        esac'
    echo '        if [ -n "$inner" ]; then'
    echo '            if [ "$COMP_CWORD" -eq 2 ] && [[ $cur != -* ]]; then'
    echo '                COMPREPLY=($(compgen -W "$inner" -- "$cur")); return'
    echo '            fi'
    echo '            if [ "$COMP_CWORD" -gt 2 ] && [[ " $inner " == *" ${COMP_WORDS[2]} "* ]]; then'
    echo '                path="$path ${COMP_WORDS[2]}"; i=3'
    echo '            fi'
    echo '        fi'
    echo '    elif [ "$COMP_CWORD" -eq 1 ] && [[ $cur != -* ]]; then'
    echo '        COMPREPLY=($(compgen -W "$subs" -- "$cur")); return'
    echo '    fi'
    echo '    # the value of an option'
    echo '    if [ "$COMP_CWORD" -gt "$i" ] && [[ $prev == --* ]]; then'
    echo '        case "$path $prev" in'
    cases "" "$tmp/opts."
    for s in $subs; do
        cases "$s" "$tmp/opts.$s"
        for t in $(awk -F'	' -v s="$s" '$1 == s { print $2 }' "$tmp/paths"); do
            cases "$s $t" "$tmp/opts.$s.$t"
        done
    done
    echo '        esac'
    echo '    fi'
    echo '    if [[ $cur == -* ]]; then'
    echo '        case "$path" in'
    printf "        '') opts='%s' ;;\n" "$(optline "$tmp/opts.")"
    for s in $subs; do
        printf "        '%s') opts='%s' ;;\n" "$s" "$(optline "$tmp/opts.$s")"
        for t in $(awk -F'	' -v s="$s" '$1 == s { print $2 }' "$tmp/paths"); do
            printf "        '%s %s') opts='%s' ;;\n" "$s" "$t" "$(optline "$tmp/opts.$s.$t")"
        done
    done
    echo "        *) opts= ;;"
    echo '        esac'
    echo '        COMPREPLY=($(compgen -W "$opts" -- "$cur"))'
    echo '    else'
    echo '        COMPREPLY=($(compgen -f -- "$cur"))'
    echo '    fi'
    echo "}"
    echo "complete -o filenames -F $fn $name"
} > "$tmp/out"
mv "$tmp/out" "$out"
