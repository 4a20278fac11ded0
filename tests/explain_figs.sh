#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# `ulysses explain` figures and --docs: the SVG is text (<text> elements, no
# glyph outlines) and its mask-grid cells (data-q, data-k, data-rank,
# data-heads, data-step, data-pairs) add up to the text's "Work per rank and
# step" table; the packed-documents example of PyTorch PR #189902 (documents
# of 4 and 12 tokens, 2 ranks, causal) gives the hand-derived work; bad
# --docs exit 2 with one line; figures are byte-identical when redrawn; the
# figure's name goes to stderr.  PNG checks are skipped without cairo.  No MPI.
set -u
: "${top_builddir:=.}"
U="$top_builddir/ulysses"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fails=0
cases=0

. "${top_srcdir:-.}/tests/expect.sh"

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
check() {   # check DESCRIPTION COMMAND...: the command must succeed
    d=$1; shift
    cases=$((cases + 1))
    if "$@"; then echo "ok: $d"; else fail "$d"; fi
}

# ---- --docs: bad input, one line, exit 2
expect 2 "--docs needs a non-empty value" -- "$U" explain --ranks 2 --docs ""
expect 2 "document 1 length '0' is not a positive integer" -- "$U" explain --ranks 2 --docs 0,16
expect 2 "document 2 length 'x' is not a positive integer" -- "$U" explain --ranks 2 --docs 4,x
expect 2 "document 2 length '' is not a positive integer" -- "$U" explain --ranks 2 --docs 4,,12
expect 2 "document 1 length '-4' is not a positive integer" -- "$U" explain --ranks 2 --docs -4,20
expect 2 "document 2 length '' is not a positive integer" -- "$U" explain --ranks 2 --docs 4,
expect 2 "the document lengths sum to 16, not --seq 10" -- "$U" explain --ranks 2 --seq 10 --docs 4,12
many=$(awk 'BEGIN { s = "1"; for (i = 1; i < 4097; i++) s = s ",1"; print s }')
expect 2 "--docs: 4097 documents, at most 4096" -- "$U" explain --ranks 2 --docs "$many"
# N is the sum when --seq is left out; the documents are printed
expect 0 "N = 16 tokens" -- "$U" explain --ranks 2 --docs 4,12 --method ring --causal
expect 0 "docs    2 packed documents of 4, 12 tokens (in every batch row): tokens 0-3, 4-15;" -- \
    "$U" explain --ranks 2 --docs 4,12 --method ring --causal

# ---- PyTorch PR #189902's example: documents of 4 and 12 tokens, CP 2,
# causal, one head.  Ring: r0 holds tokens 0-7, r1 8-15.
#   r0 step 0 (keys 0-7): document 0 (0-3) 4*5/2 = 10, document 1's 4-7
#      4*5/2 = 10: 20; step 1 (keys 8-15, all later): 0.           total 20
#   r1 step 0 (keys 8-15): 8*9/2 = 36; step 1 (keys 0-7): its queries see
#      document 1's keys 4-7: 8 x 4 = 32.                          total 68
# Zigzag: chunks of 4; r0 holds chunks 0 and 3 (0-3, 12-15), r1 1 and 2 (4-11).
#   r0 step 0 (keys 0-3, 12-15): 10 + 4*5/2 = 20; step 1 (keys 4-11): queries
#      12-15 see all 8: 32.                                        total 52
#   r1 step 0 (keys 4-11): 8*9/2 = 36; step 1: keys 0-3 are another document,
#      12-15 later: 0.                                              total 36
# The documents unbalance zigzag too (52 vs 36; 88 in all = 10 + 12*13/2).
pr="--ranks 2 --docs 4,12 --causal --heads 1"
# shellcheck disable=SC2086
expect 0 "  r0           20          0         20" -- "$U" explain $pr --method ring
# shellcheck disable=SC2086
expect 0 "  r1           36         32         68" -- "$U" explain $pr --method ring
# shellcheck disable=SC2086
expect 0 "  r0           20         32         52" -- "$U" explain $pr --method zigzag
# shellcheck disable=SC2086
expect 0 "  r1           36          0         36" -- "$U" explain $pr --method zigzag

# ---- the SVG (written without cairo too)
expect 0 "" -- "$U" explain --ranks 4 --seq 16 --heads 8 --method ring --causal --svg "$W/ring.svg"
cp "$W/out" "$W/ring.txt"
cp "$W/err" "$W/ring.err"
check "the figure's name is on stderr" grep -q "figure written to $W/ring.svg" "$W/ring.err"
check "and not on stdout" sh -c '! grep -q "figure written" "$1"' sh "$W/ring.txt"
check "the SVG has <text> elements" grep -q '<text ' "$W/ring.svg"
check "no glyph outlines" sh -c '! grep -q "glyph" "$1"' sh "$W/ring.svg"
for t in '>r0<' '>r3<' '>step 0<' '>step 3<' '>key tokens<' '>query tokens (down)<' '>work per rank<' \
         '>pairs x heads<'; do
    check "the SVG reads '$t'" grep -q -- "$t" "$W/ring.svg"
done
if command -v python3 >/dev/null 2>&1; then
    check "the SVG is well-formed XML" python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' \
        "$W/ring.svg"
else
    echo "skipped: XML parse (no python3)"
fi

# cells per step and per rank, ring causal P = 4, N = 16: 4 blocks a side;
# rank r computes row r's r + 1 blocks at steps r, r-1, ..., 0; step t has
# 4 - t blocks; 6 blocks above the diagonal are masked.
cells() { grep -o 'class="cell"[^>]*' "$1"; }
cells "$W/ring.svg" > "$W/ring.cells"
check "16 grid cells" test "$(wc -l < "$W/ring.cells")" -eq 16
check "6 masked cells" test "$(grep -c 'data-step="-1"' "$W/ring.cells")" -eq 6
for t in 0 1 2 3; do
    check "step $t: $((4 - t)) cells" test "$(grep -c "data-step=\"$t\"" "$W/ring.cells")" -eq $((4 - t))
done
for r in 0 1 2 3; do
    check "rank $r: $((r + 1)) cells" test "$(grep -c "data-rank=\"$r\"" "$W/ring.cells")" -eq $((r + 1))
done

# The cells' visible pairs x heads, summed per rank and step, against the
# text's "Work per rank and step" (uly_plan_step_pairs x heads).
cell_work() {   # the rows "r<rank> <step 0> ... <step T-1> <total>" from the cells
    awk -v P="$2" -v T="$3" '
        function attr(s, n,   m) { m = match(s, n "=\"[^\"]*\""); return m ? substr(s, RSTART + length(n) + 2, RLENGTH - length(n) - 3) : "" }
        { nr = split(attr($0, "data-rank"), r, " "); split(attr($0, "data-heads"), h, " ")
          t = attr($0, "data-step"); p = attr($0, "data-pairs")
          for (i = 1; i <= nr; i++) w[r[i], t] += p * h[i] }
        END { for (i = 0; i < P; i++) { s = "r" i; tot = 0
                  for (t = 0; t < T; t++) { s = s " " (w[i, t] + 0); tot += w[i, t] }
                  print s " " tot } }' "$1"
}
text_work() {   # the same rows from the text
    awk '/^Work per rank and step/ { on = 1; next } on && /^  r[0-9]/ { $1 = $1; print } on && /^  max/ { exit }' "$1"
}
work_agrees() {   # work_agrees NAME P T ARGS...
    n=$1 p=$2 t=$3
    shift 3
    "$U" explain --ranks "$p" "$@" --svg "$W/$n.svg" > "$W/$n.txt" 2>/dev/null || { fail "$n: explain failed"; return; }
    cells "$W/$n.svg" > "$W/$n.cells"
    cell_work "$W/$n.cells" "$p" "$t" > "$W/$n.fig"
    text_work "$W/$n.txt" > "$W/$n.tab"
    cases=$((cases + 1))
    if [ -s "$W/$n.tab" ] && cmp -s "$W/$n.fig" "$W/$n.tab"; then
        echo "ok: $n: the grid's work per rank and step equals the text's table ($(wc -l < "$W/$n.tab") ranks)"
    else
        fail "$n: the grid's work differs from the text's table"; diff "$W/$n.fig" "$W/$n.tab" | head -n 10
    fi
}
work_agrees ring 4 4 --seq 16 --heads 8 --method ring --causal
work_agrees zigzag 4 4 --seq 16 --heads 8 --method zigzag --causal
work_agrees zigzag-docs 4 4 --docs 4,12 --heads 8 --method zigzag --causal
work_agrees pr-ring 2 2 --docs 4,12 --heads 1 --method ring --causal
work_agrees docs-batch 4 4 --docs 3,9,5 --batch 2 --heads 4 --method ring --causal
work_agrees usp 4 2 --seq 16 --heads 8 --method usp --ulysses-degree 2 --causal
work_agrees window 4 4 --seq 30 --heads 6 --kv-heads 2 --method ring --causal --window 5
work_agrees allgather 4 1 --seq 17 --heads 4 --method allgather --causal
check "pr-ring: r1 68 in the grid" grep -q "^r1 36 32 68$" "$W/pr-ring.fig"
# ulysses: every rank computes every block for its heads: B x H_r x pairs
"$U" explain --ranks 4 --seq 16 --heads 8 --causal --svg "$W/uly.svg" > "$W/uly.txt" 2>/dev/null
cells "$W/uly.svg" > "$W/uly.cells"
cell_work "$W/uly.cells" 4 1 > "$W/uly.fig"
check "ulysses: each cell is computed by all 4 ranks" test "$(grep -c 'data-rank="0 1 2 3"' "$W/uly.cells")" -eq 10
check "ulysses: the grid's work per rank is the text's 'work per rank'" \
    grep -q "r0 $(awk '$1 == "r0" { print $2 }' "$W/uly.fig") r1 $(awk '$1 == "r1" { print $2 }' "$W/uly.fig")" "$W/uly.txt"

# ---- reproducible: the same command draws the same bytes
"$U" explain --ranks 4 --seq 16 --heads 8 --method ring --causal --svg "$W/ring2.svg" >/dev/null 2>&1
check "two SVG renderings are byte-identical" cmp -s "$W/ring.svg" "$W/ring2.svg"
if "$U" explain --ranks 2 --svg "$W/probe.png" >/dev/null 2>&1; then
    for i in 1 2; do
        "$U" explain --ranks 4 --docs 4,12 --method zigzag --causal --svg "$W/z$i.png" >/dev/null 2>&1
    done
    check "a PNG" sh -c 'head -c 4 "$1" | grep -q PNG' sh "$W/z1.png"
    check "two PNG renderings are byte-identical" cmp -s "$W/z1.png" "$W/z2.png"
    expect 0 "figure written to" -- "$U" explain --ranks 8 --heads 16 --method ulysses --svg "$W/u16.pdf"
else
    echo "skipped: PNG and PDF checks (this build has no cairo)"
    expect 2 "no PNG or PDF support" -- "$U" explain --ranks 2 --svg "$W/x.png"
fi

echo "$cases cases, $fails failures"
[ "$fails" -eq 0 ]
