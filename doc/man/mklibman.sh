#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# mklibman.sh INTRO OUT HEADER...
#
# Writes libulysses(3): the hand-written INTRO (NAME, SYNOPSIS, DESCRIPTION,
# ...) followed by a section per header that lists, in header order, every
# type and function the header declares with the comment that documents it
# there.  The headers are the one source: a function added to them appears
# in the page at the next build.
set -eu
[ $# -ge 3 ] || { echo "usage: $0 INTRO OUT HEADER..." >&2; exit 2; }
intro=$1 out=$2
shift 2
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
cat "$intro" > "$tmp"
for h in "$@"; do
    awk -v hdr="$(basename "$h")" '
    function esc(s) { gsub(/\\/, "\\e", s); if (s ~ /^[.'"'"']/) s = "\\&" s; return s }
    function flush_comment() { if (ncom) { print ".RS"; for (i = 1; i <= ncom; i++) print esc(com[i]); print ".RE" } ncom = 0 }
    function code(s) { print ".PP"; print ".nf"; print ".ft B"; n = split(s, L, "\n"); for (i = 1; i < n; i++) print esc(L[i]); print ".ft R"; print ".fi" }
    BEGIN { print ".SH \"" toupper(hdr) "\""; ncom = 0; incom = 0; depth = 0; buf = "" }
    # a banner: /* ---- title */
    /^\/\* *-+ *[a-z].*\*\/$/ && !incom && depth == 0 {
        t = $0; sub(/^\/\* *-+ */, "", t); sub(/ *\*\/$/, "", t); print ".SS \"" t "\""; ncom = 0; next }
    # comments outside declarations (the file banner is skipped: it opens before any banner)
    !incom && depth == 0 && /^\/\*/ {
        ncom = 0; incom = 1; line = $0; sub(/^\/\* ?/, "", line)
        if (line ~ /\*\/ *$/) { sub(/ *\*\/ *$/, "", line); incom = 0 }
        if (line != "" && line !~ /^\*/) com[++ncom] = line
        if (NR < 5) { ncom = 0; skipfile = 1 }
        next }
    incom {
        line = $0; if (line ~ /^ *\*\/ *$/) line = ""; else sub(/^ *\* ?/, "", line)
        if ($0 ~ /\*\//) { sub(/ *\*\/ *$/, "", line); incom = 0 }
        if (skipfile) { if (!incom) skipfile = 0; next }
        if (line != "") com[++ncom] = line
        next }
    # typedef struct / enum blocks, verbatim
    depth == 0 && /^(typedef )?(struct|enum|union)[^;(]*\{/ {
        buf = $0 "\n"; o = gsub(/\{/, "{"); c = gsub(/\}/, "}"); depth = o - c
        if (depth <= 0) { depth = 0; code(buf); flush_comment(); buf = "" } next }
    depth > 0 {
        buf = buf $0 "\n"
        o = gsub(/\{/, "{"); c = gsub(/\}/, "}"); depth += o - c
        if (depth <= 0 && $0 ~ /;/) { depth = 0; code(buf); flush_comment(); buf = "" }
        next }
    # one-line typedefs
    /^typedef .*;/ { code($0 "\n"); flush_comment(); next }
    # function declarations (possibly over several lines)
    /^[a-z].*[ *]uly_[a-z0-9_]+\(/ { decl = $0 "\n"; while ($0 !~ /;/ && (getline) > 0) decl = decl $0 "\n"
        code(decl); flush_comment(); next }
    /^#define ULY_/ { code($0 "\n"); flush_comment(); next }
    /^ *$/ { ncom = 0 }
    ' "$h" >> "$tmp"
done
mv "$tmp" "$out"
