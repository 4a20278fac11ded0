#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# `ulysses explain --html`: the page is self-contained (no http:// or https://
# URL), reruns are byte-identical, its output is refused where it must be (a
# missing directory, the same path as --svg); then, in headless Chromium, the
# page's #walk moves the step slider through every step (setting its value and
# dispatching `input`, as a user does) and writes what the page displays into
# the DOM, and tests/explain_html_check.py compares every number of it with
# `ulysses explain --json` (ring, zigzag, usp, ulysses with GQA, all-gather).
# No MPI.  Skips (77) without chromium or python3.
set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
U="$top_builddir/ulysses"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fails=0
cases=0
pages=0

. "$top_srcdir/tests/expect.sh"

# the cases: NAME ARGS...
cat > "$W/list" <<EOF
ring      --ranks 4 --seq 32 --heads 4 --method ring --causal
zigzag    --ranks 4 --seq 32 --heads 4 --method zigzag --causal
usp       --ranks 8 --seq 64 --heads 4 --method usp --ulysses-degree 2 --causal
ulysses   --ranks 4 --seq 16 --heads 8 --kv-heads 2
allgather --ranks 4 --seq 32 --heads 4 --method allgather --causal
EOF

# bad outputs
expect 2 "directory" -- "$U" explain --ranks 2 --html "$W/no/such/dir/p.html"
expect 2 "the same file" -- "$U" explain --ranks 2 --svg "$W/same.svg" --html "$W/same.svg"
expect 2 "at most 64 ranks" -- "$U" explain --ranks 128 --heads 128 --html "$W/big.html"
expect 2 "at most 64 ranks" -- "$U" explain --ranks 128 --heads 128 --json

# each case: the JSON (also from a run with --html: the same document) and the page, twice
while read -r name args; do
    # shellcheck disable=SC2086
    "$U" explain $args --json > "$W/$name.json" 2> "$W/$name.err" || {
        echo "FAIL: $name: explain --json exit $?"; sed 's/^/  | /' "$W/$name.err"; fails=$((fails + 1)); continue; }
    # shellcheck disable=SC2086
    "$U" explain $args --json --html "$W/$name.html" > "$W/$name.json2" 2> "$W/$name.err" || {
        echo "FAIL: $name: explain --html exit $?"; sed 's/^/  | /' "$W/$name.err"; fails=$((fails + 1)); continue; }
    pages=$((pages + 1))
    grep -q "page written to $W/$name.html" "$W/$name.err" || {
        echo "FAIL: $name: the page is not named on stderr"; fails=$((fails + 1)); }
    cmp -s "$W/$name.json" "$W/$name.json2" || { echo "FAIL: $name: --json differs with --html"; fails=$((fails + 1)); }
    # shellcheck disable=SC2086
    "$U" explain $args --html "$W/$name.again.html" > /dev/null 2>&1
    cmp -s "$W/$name.html" "$W/$name.again.html" || {
        echo "FAIL: $name: a rerun wrote a different page"; fails=$((fails + 1)); }
    if grep -q -i -E 'https?://' "$W/$name.html"; then
        echo "FAIL: $name: the page names a URL:"; grep -o -i -E 'https?://[^ "]*' "$W/$name.html" | head -3
        fails=$((fails + 1))
    fi
    grep -q '<script type="application/json" id="explain-data">' "$W/$name.html" || {
        echo "FAIL: $name: no embedded JSON document"; fails=$((fails + 1)); }
done < "$W/list"
echo "explain --html: $pages pages written, checked for URLs and byte-identical reruns"

CHROMIUM=""
for c in chromium chromium-browser; do
    command -v "$c" > /dev/null 2>&1 && { CHROMIUM=$c; break; }
done
PY=""
for p in python3 /usr/bin/python3; do
    command -v "$p" > /dev/null 2>&1 && { PY=$p; break; }
done
if [ -z "$CHROMIUM" ] || [ -z "$PY" ]; then
    [ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
    if [ -z "$CHROMIUM" ]; then echo "SKIP: chromium not found"; else echo "SKIP: python3 not found"; fi
    exit 77
fi

# the browser: all pages at once, each with a profile of its own
while read -r name args; do
    [ -f "$W/$name.html" ] || continue
    mkdir -p "$W/profile.$name"
    ( timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$W/profile.$name" \
        --dump-dom "file://$W/$name.html#walk" > "$W/$name.dom" 2> "$W/$name.chromium.err"
      echo $? > "$W/$name.rc" ) &
done < "$W/list"
wait
while read -r name args; do
    [ -f "$W/$name.html" ] || continue
    rc=$(cat "$W/$name.rc")
    if [ "$rc" -ne 0 ]; then
        echo "FAIL: $name: chromium exit $rc"; grep -v dbus "$W/$name.chromium.err" | head -5; fails=$((fails + 1)); continue
    fi
    "$PY" "$top_srcdir/tests/explain_html_check.py" "$W/$name.dom" "$W/$name.json" "$name" || fails=$((fails + 1))
done < "$W/list"

if [ "$fails" -ne 0 ]; then
    echo "$fails failure(s)"
    exit 1
fi
echo "all explain --html checks passed"
