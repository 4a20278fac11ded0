#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# cli_infer.sh -- ulysses-sim infer: csv and json parse, the time per output
# token grows with the context, Helix's and DCP's merge bytes do not depend
# on it, the DCP rule and other bad input exit 2 with one line.
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
    "$SIM" infer "$@" > "$tmp/out" 2> "$tmp/err"
    rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && [ ! -s "$tmp/out" ]; then
        echo "ok: $d ($(cat "$tmp/err"))"
    else
        echo "FAIL: $d: exit $rc"; cat "$tmp/err"; fail=1
    fi
}

H="--model llama-3-8b --scheme helix --tp 4 --dcp 4 --gpus 16"
for n in 4K 64K 1M; do
    "$SIM" infer $H --prompt $n --generate 64 --format json > "$tmp/h$n.json" || fail=1
done
check "json parses; TPOT grows with the context; helix all-to-all bytes do not" python3 -c "
import json
a, b, c = (json.load(open('$tmp/h%s.json' % n)) for n in ('4K', '64K', '1M'))
t = [x['decode']['tpot_ps'] for x in (a, b, c)]
assert t[0] < t[1] < t[2], t
v = [x['decode']['ol_alltoall_bytes'] for x in (a, b, c)]
assert v[0] == v[1] == v[2] > 0, v
assert a['decode']['q_allgather_bytes'] == 0
kv = [x['decode']['kv_read_bytes'] for x in (a, b, c)]
assert kv[0] < kv[1] < kv[2], kv
"
D="--model llama-3-8b --scheme tp-dcp --tp 16 --dcp 2 --concurrency 1,4,16,64"
"$SIM" infer $D --prompt 8K --format csv > "$tmp/d8.csv" || fail=1
"$SIM" infer $D --prompt 128K --format csv > "$tmp/d128.csv" || fail=1
check "csv: one row per concurrency, tokens/s per GPU grows with it" python3 -c "
import csv
r = list(csv.DictReader(open('$tmp/d8.csv')))
assert [int(x['concurrency']) for x in r] == [1, 4, 16, 64], r
tps = [float(x['tokens_per_s_gpu']) for x in r]
assert all(a < b for a, b in zip(tps, tps[1:])), tps
r2 = list(csv.DictReader(open('$tmp/d128.csv')))
assert all(float(y['tpot_ms']) > float(x['tpot_ms']) for x, y in zip(r, r2))
"
"$SIM" infer $D --prompt 8K --format json > "$tmp/d8.json" || fail=1
"$SIM" infer $D --prompt 128K --format json > "$tmp/d128.json" || fail=1
check "dcp merge bytes (q, LSE all-gathers, reduce-scatter) do not depend on the context" python3 -c "
import json
a, b = json.load(open('$tmp/d8.json')), json.load(open('$tmp/d128.json'))
for k in ('q_allgather_bytes', 'lse_allgather_bytes', 'o_reduce_scatter_bytes'):
    assert a['decode'][k] == b['decode'][k] > 0, k
assert len(a['concurrency']) == 4
"
"$SIM" infer --model llama-3-8b --tp 8 --prompt 8K --batch 1024 --format json > "$tmp/big.json" || fail=1
check "a batch over the KV capacity does not fit: binding limit HBM capacity" python3 -c "
import json
d = json.load(open('$tmp/big.json'))
assert d['memory']['fits'] is False and d['decode']['limit'] == 'HBM capacity'
assert d['memory']['max_context'] * 1024 <= d['memory']['kv_capacity_tokens']
"
"$SIM" infer --model llama-3-8b --tp 2 > "$tmp/t.txt" || fail=1
check "table names the binding limits" grep -q "time per output token: .*binding limit: " "$tmp/t.txt"

bad "the DCP rule" --model llama-3-8b --scheme tp-dcp --tp 8 --dcp 2
bad "helix tp must divide the KV heads" --model llama-3-8b --scheme helix --tp 16 --dcp 2
bad "--dcp without a DCP scheme" --model llama-3-8b --tp 8 --dcp 2
bad "unknown scheme" --scheme pp
bad "unknown prefill method" --prefill-method zigzag
bad "ulysses prefill over more ranks than heads" --model llama-3-8b --tp 8 --prefill-cp 8 --prefill-method ulysses
bad "gpus not a multiple of the instance" --tp 8 --gpus 12
bad "zero prompt" --prompt 0
bad "unknown option" --seq 8K
bad "bad format" --format xml
bad "a value missing" --tp
exit $fail
