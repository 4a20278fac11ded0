#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# cli_docs.sh -- ulysses-sim docs: pytorch PR #189902's example through the
# command line (documents of 4 and 12 tokens, CP 2; the per-rank pairs are
# derived by hand in tests/test_plan_docs.c: contiguous 20/68, zigzag 52/36,
# head-tail 44/44, head-tail-doc-major 26/62, doc-zigzag 44/44), its price on
# a hand-derivable platform, the JSON keys, the three inputs (list, file,
# distribution), and bad input exiting 2 with one line.
set -u
: "${top_builddir:=../..}" "${top_srcdir:=../..}"
SIM="$top_builddir/ulysses-sim"
ULYSSES_SIM_PRESETS="$top_srcdir/sim/presets"; export ULYSSES_SIM_PRESETS
DATA="$top_srcdir/sim/tests/data"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # description, then a command that must succeed
    d="$1"; shift
    if "$@"; then echo "ok: $d"; else echo "FAIL: $d"; fail=1; fi
}
bad() { # description, then arguments that must exit 2 with one line on stderr
    d="$1"; shift
    "$SIM" docs "$@" > "$tmp/out" 2> "$tmp/err"
    rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && [ ! -s "$tmp/out" ]; then
        echo "ok: $d ($(cat "$tmp/err"))"
    else
        echo "FAIL: $d: exit $rc"; cat "$tmp/err"; fail=1
    fi
}

# gpt-1.2b: 16 heads of 128, 24 layers; cpu-2x2: 1 TFLOP/s, attention at 0.5
# forward and 0.25 backward, no launch cost and no shape terms.
G="--cp 2 --model gpt-1.2b --platform $DATA/cpu-2x2.json"
"$SIM" docs $G --doc-lens 4,12 --json > "$tmp/pr.json" || fail=1
check "PR #189902 golden: every balancer's pairs per rank, exact" python3 -c "
import json
o = json.load(open('$tmp/pr.json'))
want = {'contiguous': [20, 68], 'zigzag': [52, 36], 'head-tail': [44, 44],
        'head-tail-doc-major': [26, 62], 'doc-zigzag': [44, 44]}
rows = {b['name']: b for b in o['balancers']}
assert list(rows) == list(want) + ['ulysses'], list(rows)
for n, w in want.items():
    assert rows[n]['pairs'] == w, (n, rows[n]['pairs'])
    assert rows[n]['head_pairs'] == [16 * x for x in w], n
    assert rows[n]['tokens'] == [8, 8], n
# Ulysses: 8 heads each over all 16 tokens, 88 pairs per head
assert rows['ulysses']['head_pairs'] == [8 * 88, 8 * 88]
assert rows['ulysses']['tokens'] == [16, 16]
assert 'pairs' not in rows['ulysses']
assert o['total_pairs'] == 88 and o['seq'] == 16 and o['docs'] == 2 and o['doc_lens'] == [4, 12]
assert rows['contiguous']['pairs_max'] == 68 and rows['contiguous']['pairs_mean'] == 44
assert abs(rows['contiguous']['max_over_mean'] - 68 / 44) < 1e-6
"
# The price, by hand: 4 d = 512 FLOPs per (head, query, key), 16 heads.
# contiguous rank 1: 68 x 16 x 512 = 557056 FLOPs, forward at 0.5 TFLOP/s
# 1.114112 us; the mean rank 44 x 8192 / 5e11 = 0.720896 us; imbalance
# 24 x 8192 / 5e11 = 0.393216 us per layer.  Per iteration: 24 layers x
# (forward + backward at 2.5x the FLOPs and 0.25 TFLOP/s) =
# 24 x 24 x 8192 x (1/5e11 + 2.5/2.5e11) s = 56.623104 us.  head-tail: equal
# ranks, no imbalance.
check "imbalance priced by the compute model (hand-derived)" python3 -c "
import json
o = json.load(open('$tmp/pr.json'))
r = {b['name']: b for b in o['balancers']}
c = r['contiguous']
def near(x, y): return abs(x - y) <= 1e-6
assert near(c['attn_fwd_ms_max'], 0.001114112), c
assert near(c['attn_fwd_ms_mean'], 0.000720896), c
assert near(c['imbalance_fwd_ms_per_layer'], 0.000393216), c
assert near(c['imbalance_ms_per_iteration'], 0.056623104), c
assert near(c['attn_bwd_ms_max'], 0.00557056), c
for n in ('head-tail', 'doc-zigzag', 'ulysses'):
    assert r[n]['imbalance_fwd_ms_per_layer'] == 0 and r[n]['imbalance_ms_per_iteration'] == 0, n
assert o['heads'] == 16 and o['head_dim'] == 128 and o['layers'] == 24 and o['cp'] == 2
"
"$SIM" docs $G --doc-lens 4,12 > "$tmp/pr.txt" || fail=1
check "text: the per-rank pairs lines" sh -c "grep -q '^contiguous  *20 68\$' '$tmp/pr.txt' && grep -q '^head-tail-doc-major  *26 62\$' '$tmp/pr.txt' && grep -q '^ulysses  *44 44\$' '$tmp/pr.txt'"
"$SIM" docs $G --doc-lens 4,12 --balancer head-tail-doc-major --json > "$tmp/one.json" || fail=1
check "--balancer NAME: that row and the ulysses row" python3 -c "
import json
o = json.load(open('$tmp/one.json'))
assert [b['name'] for b in o['balancers']] == ['head-tail-doc-major', 'ulysses']
assert o['balancers'][0]['pairs'] == [26, 62]
"

# a file: lengths over lines and spaces; uneven lengths 5 and 3 (hand-derived
# in tests/test_plan_docs.c: head-tail 9/12, doc-zigzag 4/17)
printf '5\n  3\n' > "$tmp/lens.txt"
"$SIM" docs $G --doc-file "$tmp/lens.txt" --seq 8 --json > "$tmp/f.json" || fail=1
check "--doc-file: uneven lengths" python3 -c "
import json
r = {b['name']: b for b in json.load(open('$tmp/f.json'))['balancers']}
assert r['head-tail']['pairs'] == [9, 12] and r['doc-zigzag']['pairs'] == [4, 17], r
assert r['doc-zigzag']['tokens'] == [3, 5]
"

# a distribution: deterministic for a seed, --seq filled exactly, the cut printed
"$SIM" docs --cp 4 --doc-dist lognormal:1000:0.5 --seq 1M --seed 7 --json > "$tmp/d1.json" || fail=1
"$SIM" docs --cp 4 --doc-dist lognormal:1000:0.5 --seq 1M --seed 7 --json > "$tmp/d2.json" || fail=1
"$SIM" docs --cp 4 --doc-dist lognormal:1000:0.5 --seq 1M --seed 8 --json > "$tmp/d3.json" || fail=1
check "--doc-dist: same seed same lengths, another seed others; sums to --seq; mean near MEAN" python3 -c "
import json
a, b, c = (json.load(open('$tmp/d%d.json' % i)) for i in (1, 2, 3))
assert a == b
assert a['doc_lens'] != c['doc_lens']
L = a['doc_lens']
assert sum(L) == 1048576 and a['seq'] == 1048576 and min(L) >= 1
# about 1000 documents of standard deviation 1000 sqrt(e^0.25 - 1) = 533:
# the sample mean is within 5 % of 1000 far beyond 3 standard errors (1.7 %)
m = sum(L[:-1]) / (len(L) - 1)
assert abs(m - 1000) < 50, m
assert a['last_doc_cut_from'] >= L[-1]
tot = a['total_pairs']
assert tot == sum(x * (x + 1) // 2 for x in L)
for r in a['balancers']:
    assert sum(r['head_pairs']) == 32 * tot, r['name']
    assert sum(r['tokens']) == (4 * 1048576 if r['name'] == 'ulysses' else 1048576)
"
"$SIM" docs --cp 2 --doc-dist uniform:3:3 --seq 10 > "$tmp/u.txt" || fail=1
check "uniform:3:3 over 10 tokens: 3 3 3 and a cut 1, said" grep -q 'last document was cut from 3 to 1 tokens' "$tmp/u.txt"

bad "--cp 0" --cp 0 --doc-lens 4
bad "no --cp" --doc-lens 4
bad "zero length" --cp 2 --doc-lens 4,0
bad "negative length" --cp 2 --doc-lens 4,-3
bad "empty length" --cp 2 --doc-lens 4,,3
bad "lengths not summing to --seq" --cp 2 --doc-lens 4,12 --seq 15
bad "unknown balancer" --cp 2 --doc-lens 4,12 --balancer headtail
bad "unknown distribution" --cp 2 --doc-dist gamma:2:1 --seq 100
bad "--doc-dist without --seq" --cp 2 --doc-dist uniform:1:9
bad "uniform MIN > MAX" --cp 2 --doc-dist uniform:9:1 --seq 100
bad "lognormal SIGMA < 0" --cp 2 --doc-dist lognormal:100:-1 --seq 100
bad "two document sources" --cp 2 --doc-lens 4 --doc-dist uniform:1:9 --seq 100
bad "no document source" --cp 2
bad "missing file" --cp 2 --doc-file "$tmp/none.txt"
printf '4 x 5\n' > "$tmp/badlens.txt"
bad "a word in the file" --cp 2 --doc-file "$tmp/badlens.txt"
: > "$tmp/empty.txt"
bad "an empty file" --cp 2 --doc-file "$tmp/empty.txt"
bad "unknown option" --cp 2 --doc-lens 4 --docs 4
bad "--seed without --doc-dist" --cp 2 --doc-lens 4 --seed 3
exit $fail
