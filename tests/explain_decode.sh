#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# `ulysses explain --method dcp|helix`: one decode step over a KV cache
# sharded by tokens.  Hand-derived bytes and cache layouts appear in the text;
# the send matrices' row sums agree with uly_plan_decode_volume (and the
# closed form) over a grid of (P, H, Hkv, layout); the step's bytes are the
# same for every cache length; bad inputs exit 2 with one line; --svg and
# --json write the figure.  No MPI.
set -u
: "${top_builddir:=.}"
U="$top_builddir/ulysses"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fails=0
cases=0

. "${top_srcdir:-.}/tests/expect.sh"

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# ---- bad input: one line, exit 2
expect 2 "--generate applies to --method dcp or helix only" -- "$U" explain --ranks 2 --method ring --generate 4
expect 2 "--kv-layout applies to --method dcp or helix only" -- "$U" explain --ranks 2 --kv-layout contiguous
expect 2 "--prompt applies to --method dcp or helix only" -- "$U" explain --ranks 2 --prompt 8
expect 2 "--kv-layout 'round-robin:0': expected contiguous or round-robin:B" -- \
    "$U" explain --ranks 2 --method dcp --kv-layout round-robin:0
expect 2 "--kv-layout 'diagonal': expected contiguous or round-robin:B" -- \
    "$U" explain --ranks 2 --method helix --kv-layout diagonal
expect 2 "--prompt 8 and --seq 9 disagree" -- "$U" explain --ranks 2 --method dcp --prompt 8 --seq 9
expect 2 "no packed documents" -- "$U" explain --ranks 2 --method helix --docs 4,12
expect 2 "must be in" -- "$U" explain --ranks 2 --method dcp --generate -1
expect 2 "must be a multiple of kv-heads" -- "$U" explain --ranks 2 --method dcp --heads 6 --kv-heads 4
expect 2 "must be one of" -- "$U" explain --ranks 2 --method dcpp
expect 2 "must end in .svg, .png or .pdf" -- "$U" explain --ranks 2 --method dcp --svg "$W/x.txt"

# ---- hand-derived bytes, P = 4, H = 8, Hkv = 2, B = 1, d = 64, f32 (e = 4):
# every rank owns H_r = 2 heads.
# dcp: q all-gather: its 2 heads x 64 x 4 B = 512 to each of 3 ranks = 1536;
#      LSE all-gather: 8 heads x 4 B to each of 3 = 96;
#      reduce-scatter O: the other 6 heads x 64 x 4 = 1536; the step: 3168.
# helix: the other 6 heads' O and LSE, 6 x (64 + 1) x 4 = 1560.
s="--ranks 4 --prompt 40 --generate 8 --heads 8 --kv-heads 2 --kv-layout round-robin:4"
# shellcheck disable=SC2086
"$U" explain --method dcp $s > "$W/dcp" 2>&1 || fail "explain --method dcp $s"
# shellcheck disable=SC2086
"$U" explain --method helix $s > "$W/helix" 2>&1 || fail "explain --method helix $s"
has() {   # has FILE TEXT: FILE contains the line fragment TEXT
    cases=$((cases + 1))
    if grep -qF -- "$2" "$1"; then echo "ok: $(basename "$1"): $2"; else fail "$(basename "$1") lacks '$2'"; sed 's/^/  | /' "$1" | head -3; fi
}
has "$W/dcp" "  r0                  1536                 96               1536 |         3168         3168"
has "$W/dcp" "r0-r3   4 x [3 x 2 x 64 + 3 x 8 + (8 - 2) x 64] = 3168 (= uly_plan_decode_volume)"
has "$W/helix" "r0-r3   4 x (8 - 2) x (64 + 1) = 1560 (= uly_plan_decode_volume)"
# round-robin:4 on 4 ranks: token t on rank (t / 4) mod 4; the prompt 0-39
# gives r2 blocks 8-11, 24-27; the 8 generated tokens 40-47 go to r2 (40-43)
# and r3 (44-47); the new token 48 starts block 12, rank 0's.
has "$W/dcp" "  r2    8-11,24-27                         8 | 8-11,24-27,40-43                     12 |       12288"
has "$W/dcp" "its owner, rank 0 (uly_kv_owner), appends them"
has "$W/dcp" "     r0    0-3,16-19,32-35,48                          13"
for f in dcp helix; do
    has "$W/$f" "tokens: the same bytes."
    has "$W/$f" "check: row sums of the send matrices == uly_plan_decode_volume for every rank and call: agree"
done
# uneven heads, contiguous: P = 3, H = 8 -> H_r = 3, 3, 2; N = 10 -> 4, 3, 3
# tokens; every generated token on the last rank.  helix r2 sends the other
# 6 heads: 6 x 65 x 4 = 1560, r0 and r1 the other 5: 1300.
expect 0 "r2      4 x (8 - 2) x (64 + 1) = 1560" -- "$U" explain --method helix --ranks 3 --prompt 10 --generate 2
expect 0 "r0-r1   4 x (8 - 3) x (64 + 1) = 1300" -- "$U" explain --method helix --ranks 3 --prompt 10 --generate 2
expect 0 "  r2    7-9                                3 | 7-11" -- "$U" explain --method helix --ranks 3 --prompt 10 --generate 2
# a window: the new token 20 sees keys 17-20 only (W = 4)
expect 0 "     r1    4-7,20                                       1" -- \
    "$U" explain --method dcp --ranks 4 --prompt 16 --generate 4 --kv-layout round-robin:4 --window 4

# ---- the agree check over a grid (uneven heads, GQA, MQA, H < P, P = 1)
for P in 1 3 4 8; do
    for HK in "8 8" "8 2" "8 1" "12 3" "5 5" "3 1"; do
        set -- $HK
        for L in contiguous round-robin:3; do
            for M in dcp helix; do
                "$U" explain --method "$M" --ranks "$P" --prompt 13 --generate 5 --heads "$1" --kv-heads "$2" \
                    --batch 2 --head-dim 3 --kv-layout "$L" > "$W/g" 2>&1
                rc=$?
                cases=$((cases + 1))
                if [ "$rc" -ne 0 ] || ! grep -q "for every rank and call: agree" "$W/g"; then
                    fail "exit $rc, no agree: --method $M --ranks $P --heads $1 --kv-heads $2 --kv-layout $L"
                    sed 's/^/  | /' "$W/g" | tail -3
                fi
            done
        done
    done
done
echo "ok: the agree grid"

# ---- the figure: SVG (text, the strip), JSON (the text's numbers), PNG with cairo
expect 0 "figure written to $W/d.svg" -- "$U" explain --method dcp $s --svg "$W/d.svg"
cases=$((cases + 1))
if grep -q "<text[^>]*>decode step: the new query (position 48) x keys 0..48" "$W/d.svg" &&
    grep -q "<text[^>]*>all-gather LSE: elements sent" "$W/d.svg"; then
    echo "ok: the SVG has the strip and the matrices"
else
    fail "the SVG lacks the strip or the LSE matrix"
fi
if command -v python3 > /dev/null 2>&1; then
    # shellcheck disable=SC2086
    "$U" explain --method helix $s --json > "$W/h.json" 2> "$W/h.err" || fail "--json"
    cases=$((cases + 1))
    if python3 - "$W/h.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["problem"]["method"] == "helix" and d["problem"]["position"] == 48, d["problem"]
assert [v["step_sent"] for v in d["volumes"]] == [1560] * 4, d["volumes"]
runs = d["strip"]["runs"]
assert sum(r["count"] for r in runs) == 49 and runs[-1] == {"rank": 0, "begin": 48, "count": 1, "visible": True}, runs
assert [c["tokens"] for c in d["cache"]] == [13, 12, 12, 12], d["cache"]
assert d["matrices"][0]["elements"][0] == [8 * 0 + 2 * 65] * 4, d["matrices"][0]
PY
    then echo "ok: the JSON has the text's numbers"; else fail "the JSON document"; fi
fi
if "$U" explain --method dcp --ranks 2 --svg "$W/p.png" > /dev/null 2>&1; then
    cases=$((cases + 1))
    if [ "$(head -c 4 "$W/p.png" | od -An -c | tr -d ' ')" = "211PNG" ]; then echo "ok: PNG"; else fail "not a PNG"; fi
else
    echo "PNG not checked (no cairo in this build)"
fi

# the --html page in a headless browser: what it shows is the text's numbers
C=""
for c in chromium chromium-browser; do command -v "$c" > /dev/null 2>&1 && { C=$c; break; }; done
if [ -n "$C" ]; then
    # shellcheck disable=SC2086
    "$U" explain --method helix $s --html "$W/h.html" > /dev/null 2>&1 || fail "--html"
    timeout 60 "$C" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$W/profile" \
        --dump-dom "file://$W/h.html#walk" > "$W/h.dom" 2> /dev/null || fail "chromium on the page"
    has "$W/h.dom" "vol r3|1560|1560|1560|1560"
    has "$W/h.dom" "cache r2|8-11,24-27|8|8-11,24-27,40-43|12|12288|4-5"
    has "$W/h.dom" "run 0 48 1 1"
else
    echo "page not checked (no chromium)"
fi

echo "explain_decode: $cases checks, $fails failures"
[ "$fails" -eq 0 ]
