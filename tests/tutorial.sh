#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs every command of doc/tutorial.md and compares its output.
#
# In the tutorial, a ```console block holds commands (lines starting with
# "$ ", continued by lines starting with "> ") each followed by the output
# it must print; a line "..." matches any number of lines.  Every command
# must exit 0 (a block shows a failure with "; echo exit $?").  All commands
# run in order in one scratch directory with the build directory first on
# PATH.  An HTML comment "<!-- needs: mpi numpy cairo -->" before a block
# skips it when the build or the machine lacks one of them.  Figures the
# tutorial writes (*.png) must be byte-identical to doc/figures/ when the
# renderer (cairo, freetype) is the one that drew those (doc/figures/RENDERER).
set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
B=$(cd "$top_builddir" && pwd)
S=$(cd "$top_srcdir" && pwd)
doc="$S/doc/tutorial.md"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir "$W/run" "$W/cmd"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# what this build and machine have
have=""
"$B/ulysses" attn --help >/dev/null 2>&1 && have="$have mpi"
for py in python3 /usr/bin/python3; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import numpy' 2>/dev/null; then
        mkdir -p "$W/bin" && ln -sf "$(command -v "$py")" "$W/bin/python3"
        have="$have numpy"
        break
    fi
done
"$B/ulysses" explain --ranks 1 --svg "$W/probe.svg" >/dev/null 2>&1 && have="$have cairo"
PATH="$W/bin:$B:$PATH"
export PATH

# split the tutorial into cmd/N (the command), cmd/N.exp (its output), cmd/N.needs
awk -v dir="$W/cmd" '
    /^<!-- needs:/ { needs = $0; sub(/^<!-- needs: */, "", needs); sub(/ *-->.*/, "", needs); next }
    /^```console *$/ { inblock = 1; next }
    inblock && /^```/ { inblock = 0; needs = ""; cur = ""; next }
    inblock && /^\$ / { n++; cur = dir "/" sprintf("%03d", n); sub(/^\$ /, ""); print > cur
                        printf "" > (cur ".exp"); print needs > (cur ".needs"); cont = 1; next }
    inblock && cont && /^> / { sub(/^> /, ""); print >> cur; next }
    inblock && cur != "" { cont = 0; print >> (cur ".exp") }
    !inblock && /^$/ { }
    !inblock && !/^<!--/ && !/^$/ { needs = "" }
' "$doc"

# match OUT against EXP, where an EXP line "..." matches any run of lines
match() {
    awk -v expf="$1" '
        BEGIN { while ((getline l < expf) > 0) { sub(/[ \t]+$/, "", l); e[++ne] = l } }
        { sub(/[ \t]+$/, ""); o[++no] = $0 }
        END {
            while (no > 0 && o[no] == "") no--      # trailing blank lines do not count
            while (ne > 0 && e[ne] == "") ne--
            # segments of EXP between "..." lines must appear in order; the
            # first is anchored at the start unless EXP starts with "...",
            # the last at the end unless EXP ends with "...".
            i = 1; pos = 1; first = 1
            while (i <= ne) {
                if (e[i] == "...") { star = 1; i++; first = 0; continue }
                j = i; while (j <= ne && e[j] != "...") j++
                len = j - i; last = (j > ne)
                found = 0
                for (p = pos; p + len - 1 <= no; p++) {
                    if (!star && p != pos) break
                    if (last && !star && p + len - 1 != no) break
                    ok = 1
                    for (k = 0; k < len; k++) if (o[p + k] != e[i + k]) { ok = 0; break }
                    if (ok && last && p + len - 1 != no) ok = 0
                    if (ok) { found = 1; break }
                }
                if (!found) exit 1
                pos = p + len; i = j; star = 0
            }
            if (!star && pos != no + 1) exit 1
            exit 0
        }' "$2"
}

ran=0 compared=0 skipped=0 fails=0
for c in "$W"/cmd/[0-9][0-9][0-9]; do
    miss=""
    for need in $(cat "$c.needs"); do
        case " $have " in *" $need "*) ;; *) miss="$miss $need" ;; esac
    done
    if [ -n "$miss" ]; then
        echo "skip (needs$miss): $(head -n 1 "$c")"
        skipped=$((skipped + 1))
        continue
    fi
    (cd "$W/run" && timeout 120 sh "$c") > "$c.out" 2>&1
    rc=$?
    ran=$((ran + 1))
    if [ "$rc" -ne 0 ]; then
        echo "FAIL (exit $rc): $(head -n 1 "$c")"; sed 's/^/  | /' "$c.out" | tail -n 10
        fails=$((fails + 1)); continue
    fi
    if [ -s "$c.exp" ]; then
        compared=$((compared + 1))
        if ! match "$c.exp" "$c.out"; then
            echo "FAIL (output differs from doc/tutorial.md): $(head -n 1 "$c")"
            diff "$c.exp" "$c.out" | sed 's/^/  /' | head -n 30
            fails=$((fails + 1)); continue
        fi
    fi
    echo "ok: $(head -n 1 "$c")"
done

# figures written by the tutorial's commands are the checked-in ones
renderer="cairo $(pkg-config --modversion cairo 2>/dev/null) freetype $(pkg-config --modversion freetype2 2>/dev/null)"
for f in "$W"/run/*.png; do
    [ -f "$f" ] || continue
    ref="$S/doc/figures/$(basename "$f")"
    if [ ! -f "$ref" ]; then
        echo "FAIL: the tutorial draws $(basename "$f") but doc/figures/ has no such file"; fails=$((fails + 1))
    elif [ "$renderer" != "$(cat "$S/doc/figures/RENDERER" 2>/dev/null)" ]; then
        echo "not compared: $(basename "$f") (renderer '$renderer' differs from doc/figures/RENDERER)"
    elif ! cmp -s "$f" "$ref"; then
        echo "FAIL: doc/figures/$(basename "$f") differs from what the tool draws now (copy it from a run of the tutorial's command)"
        fails=$((fails + 1))
    else
        echo "ok: doc/figures/$(basename "$f") matches the tool"
    fi
done

echo "tutorial: $ran commands run, $compared outputs compared, $skipped skipped, $fails failures"
[ "$fails" -eq 0 ]
