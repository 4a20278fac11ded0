#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# cli_coll.sh -- ulysses-sim coll: formats, size ranges, nccl-tests bus
# bandwidth conventions, algorithm and protocol forcing, bad input.
set -u
: "${top_builddir:=../..}" "${top_srcdir:=../..}"
SIM="$top_builddir/ulysses-sim"
ULYSSES_SIM_PRESETS="$top_srcdir/sim/presets"; export ULYSSES_SIM_PRESETS
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # description, then a command that must succeed
    d="$1"; shift
    if "$@"; then echo "ok: $d"; else echo "FAIL: $d"; fail=1; fi
}
bad() { # description, then arguments that must exit 2 with one line on stderr
    d="$1"; shift
    "$SIM" coll "$@" > "$tmp/out" 2> "$tmp/err"
    rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && [ ! -s "$tmp/out" ]; then
        echo "ok: $d ($(cat "$tmp/err"))"
    else
        echo "FAIL: $d: exit $rc"; cat "$tmp/err"; fail=1
    fi
}

"$SIM" coll --op all-gather --gpus 16 --bytes 1M:1G:x2 --format csv > "$tmp/ag.csv"
check "a range gives one row per size (11)" test "$(tail -n +2 "$tmp/ag.csv" | wc -l)" -eq 11
# busbw = algbw (n-1)/n for all-gather, 2(n-1)/n for all-reduce; algbw = bytes / time
check "all-gather busbw = algbw x 15/16 and algbw = S/t" awk -F, 'NR > 1 {
    if ($11 - $10 * 15 / 16 > 0.002 || $10 * 15 / 16 - $11 > 0.002) exit 1
    if ($5 / ($9 * 1e-6) / 1e9 - $10 > 0.01 * $10 || $10 - $5 / ($9 * 1e-6) / 1e9 > 0.01 * $10) exit 1 }' "$tmp/ag.csv"
check "bus bandwidth grows with the size" awk -F, 'NR > 2 && $11 + 1e-9 < prev { exit 1 } { prev = $11 }' "$tmp/ag.csv"
check "the 1 GiB all-gather uses 8 channel rings (one per rail)" \
    awk -F, 'END { exit !($6 == "ring" && $8 == 8) }' "$tmp/ag.csv"
"$SIM" coll --op all-reduce --gpus 8 --bytes 256M --format json > "$tmp/ar.json"
check "json output parses and has one row" python3 -c "
import json, sys
d = json.load(open('$tmp/ar.json'))
r = d['rows'][0]
assert d['op'] == 'all-reduce' and d['gpus'] == 8 and len(d['rows']) == 1
assert abs(r['busbw_GBps'] - r['algbw_GBps'] * 2 * 7 / 8) < 1e-6 * r['busbw_GBps']
"
"$SIM" coll --op all-reduce --gpus 16 --bytes 64M --algo ring --proto Simple --format csv > "$tmp/f.csv"
check "--algo ring --proto Simple is what runs" awk -F, 'END { exit !($6 == "ring" && $7 == "Simple") }' "$tmp/f.csv"
"$SIM" coll --op all-reduce --gpus 16 --bytes 64M --algo tree --format csv > "$tmp/t.csv"
check "--algo tree runs the tree (16 channels: 2 trees per rail)" \
    awk -F, 'END { exit !($6 == "tree" && $8 == 16) }' "$tmp/t.csv"
"$SIM" coll --op all-to-all --gpus 16 --bytes 256M --format csv > "$tmp/a.csv"
"$SIM" coll --op all-to-all --gpus 16 --bytes 256M --algo pairwise --format csv > "$tmp/p.csv"
check "all-to-all across 2 nodes is NIC-bound: busbw <= 2 x one NIC (24 GB/s)" \
    awk -F, 'END { exit !($11 <= 48.0 && $11 > 40) }' "$tmp/a.csv"
check "pairwise all-to-all is never faster than direct" \
    sh -c "test \"\$(awk -F, 'END{print \$9}' '$tmp/p.csv' | cut -d. -f1)\" -ge \"\$(awk -F, 'END{print \$9}' '$tmp/a.csv' | cut -d. -f1)\""
"$SIM" coll --op all-reduce --gpus 8 --bytes 1G --platform dgx-h100 --format csv > "$tmp/h.csv"
check "H100 all-reduce of 1 GiB uses NVLS" awk -F, 'END { exit !($6 == "nvls") }' "$tmp/h.csv"
"$SIM" coll --op reduce-scatter --gpus 8 --bytes 1M --format table > "$tmp/rs.txt"
check "table output has a header and a row" test "$(wc -l < "$tmp/rs.txt")" -eq 4
"$SIM" coll --help > "$tmp/help" 2>&1
check "--help exits 0 and documents --algo" grep -q -- "--algo" "$tmp/help"

# The latency region: NCCL v2.23.4's tuning.cc model (doc/simulator.md 4.1),
# derived by hand.  8 B on 2 DGX A100 nodes: tree LL, baseLat 6.8 +
# 2 ((8-1) x hwLat[NVLINK][Tree][LL] 0.6 + log2(2) x hwLat[NET][Tree][LL] 5.0)
# = 25.2 us; on 4 nodes 6.8 + 2 (4.2 + 2 x 5.0) = 35.2 us; plus the 8 bytes'
# own time on the links (under 10 ns).
"$SIM" coll --op all-reduce --gpus 16 --bytes 8 --format csv > "$tmp/l16.csv"
check "8 B all-reduce on 2 nodes: tree LL in 25.20 us" \
    awk -F, 'END { exit !($6 == "tree" && $7 == "LL" && $9 >= 25.2 && $9 < 25.21) }' "$tmp/l16.csv"
"$SIM" coll --op all-reduce --gpus 32 --bytes 8 --format csv > "$tmp/l32.csv"
check "8 B all-reduce on 4 nodes: tree LL in 35.20 us" \
    awk -F, 'END { exit !($6 == "tree" && $7 == "LL" && $9 >= 35.2 && $9 < 35.21) }' "$tmp/l32.csv"
# One GPU per node (nccl-tests#150's run): ring LL, baseLat 6.6 + 2 steps x
# the tree's network LL latency 5.0 (ppn = 1) = 16.6 us; the tree LL is
# 6.8 + 2 x 5.0 = 16.8.
"$SIM" coll --op all-reduce --gpus 2 --gpus-per-node 1 --bytes 8 --format csv > "$tmp/l2.csv"
check "8 B all-reduce, 2 nodes x 1 GPU: ring LL in 16.60 us on 2 nodes" \
    awk -F, 'END { exit !($3 == 2 && $6 == "ring" && $7 == "LL" && $9 >= 16.6 && $9 < 16.61) }' "$tmp/l2.csv"
# All-gather of 1 MiB over 8 nodes x 1 GPU: PAT's latency 8 + log2(8) x 14 /
# 3.5 + 2.8 x 8 = 42.4 us against the ring's 8.4 + 7 x 14 = 106.4 us (Simple),
# the data (7/8 MiB through one 24 GB/s NIC, about 38 us; PAT / 0.85) being
# alike: PAT.
"$SIM" coll --op all-gather --gpus 8 --gpus-per-node 1 --bytes 1M --format csv > "$tmp/pat.csv"
check "1 MiB all-gather over 8 nodes x 1 GPU runs PAT" \
    awk -F, 'END { exit !($6 == "pat" && $7 == "Simple" && $9 > 42.4 && $9 < 106.4) }' "$tmp/pat.csv"
"$SIM" coll --op all-reduce --gpus 16 --bytes 8:4G:x2 --format csv > "$tmp/range.csv"
check "8 B to 4 GiB: 30 rows, time non-decreasing with the size, 8 B at NCCL's latency" \
    awk -F, 'NR == 2 && !($9 >= 25.2 && $9 < 25.21) { exit 1 } NR > 2 && $9 + 0 < prev { exit 1 } NR > 1 { prev = $9; n++ }
             END { exit !(n == 30) }' "$tmp/range.csv"
# Beyond two nodes NCCL's tree is bounded by 0.92 x the ring's network rate:
# the ring wins 4 GiB on 4 DGX A100 nodes (about 8 NICs x 24 GB/s).
"$SIM" coll --op all-reduce --gpus 32 --bytes 4G --format csv > "$tmp/big32.csv"
check "4 GiB all-reduce on 4 nodes: the ring, 180-192 GB/s" \
    awk -F, 'END { exit !($6 == "ring" && $11 > 180 && $11 <= 192) }' "$tmp/big32.csv"
check "--help documents --gpus-per-node" grep -q -- "--gpus-per-node" "$tmp/help"
# NVLS-tree on 2 DGX H100 nodes: 8 B in NCCL's 25 + 2 x 14 = 53 us (plus the
# bytes' nanoseconds); auto runs it for large all-reduces there.
"$SIM" coll --op all-reduce --gpus 16 --bytes 8,1G --platform dgx-h100 --algo nvlstree --format csv > "$tmp/nt.csv"
check "NVLS-tree 8 B on 2 H100 nodes: 53 us" awk -F, 'NR == 2 { exit !($6 == "nvlstree" && $9 >= 53 && $9 < 53.01) }' "$tmp/nt.csv"
"$SIM" coll --op all-reduce --gpus 16 --bytes 1G --platform dgx-h100 --format csv > "$tmp/nta.csv"
check "1 GiB all-reduce on 2 H100 nodes runs NVLS-tree" awk -F, 'END { exit !($6 == "nvlstree") }' "$tmp/nta.csv"

bad "missing --op" --gpus 8 --bytes 1M
bad "unknown op" --op broadcast --gpus 8 --bytes 1M
bad "zero bytes" --op all-gather --gpus 8 --bytes 0
bad "malformed range" --op all-gather --gpus 8 --bytes 1M:x2
bad "GPUs not whole nodes" --op all-gather --gpus 12 --bytes 1M
bad "nvls on a platform without it" --op all-reduce --gpus 8 --bytes 1M --algo nvls
bad "tree inside one node" --op all-reduce --gpus 8 --bytes 1M --algo tree
bad "tree for all-gather" --op all-gather --gpus 16 --bytes 1M --algo tree
bad "unknown protocol" --op all-gather --gpus 8 --bytes 1M --proto LL64
bad "unknown option" --op all-gather --gpus 8 --bytes 1M --chunks 4
bad "a2a with a ring algorithm" --op all-to-all --gpus 8 --bytes 1M --algo ring
bad "--gpus-per-node not dividing --gpus" --op all-gather --gpus 8 --gpus-per-node 3 --bytes 1M
bad "--gpus-per-node above the node's GPUs" --op all-gather --gpus 16 --gpus-per-node 16 --bytes 1M
bad "--gpus-per-node 0" --op all-gather --gpus 8 --gpus-per-node 0 --bytes 1M
bad "PAT with 8 GPUs per node" --op all-gather --gpus 16 --bytes 1M --algo pat
bad "PAT for all-reduce" --op all-reduce --gpus 4 --gpus-per-node 1 --bytes 1M --algo pat
bad "NVLS-tree without NVLS" --op all-reduce --gpus 16 --bytes 1M --algo nvlstree
bad "NVLS-tree on one node" --op all-reduce --gpus 8 --bytes 1M --platform dgx-h100 --algo nvlstree
bad "PAT with LL" --op all-gather --gpus 4 --gpus-per-node 1 --bytes 1M --algo pat --proto LL
exit $fail
