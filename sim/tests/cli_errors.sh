#!/bin/sh
# cli_errors.sh -- bad input gives a one-line message naming the problem and
# exit status 2.
set -u
: "${top_builddir:=../..}" "${top_srcdir:=../..}"
SIM="$top_builddir/ulysses-sim"
DATA="$top_srcdir/sim/tests/data"
ULYSSES_SIM_PRESETS="$top_srcdir/sim/presets"; export ULYSSES_SIM_PRESETS
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0

# expect "pattern" args...: exit 2, one line on stderr matching pattern, nothing on stdout
expect() {
    pat="$1"; shift
    "$SIM" "$@" > "$tmp/out" 2> "$tmp/err"
    st=$?
    if [ $st -ne 2 ]; then echo "FAIL: $*: exit $st, expected 2"; fail=1; return; fi
    if [ "$(wc -l < "$tmp/err")" -ne 1 ]; then echo "FAIL: $*: message is not one line:"; cat "$tmp/err"; fail=1; return; fi
    if ! grep -q -- "$pat" "$tmp/err"; then echo "FAIL: $*: '$pat' not in: $(cat "$tmp/err")"; fail=1; return; fi
    if [ -s "$tmp/out" ]; then echo "FAIL: $*: wrote to stdout"; fail=1; return; fi
    echo "ok: $* -> $(cat "$tmp/err")"
}

expect "unknown option '--bogus'" --bogus
expect "unexpected argument" extra
expect "--gpus: expected a positive integer, got '0'" --gpus 0
expect "--gpus: expected a positive integer, got 'abc'" --gpus abc
expect "--gpus: expected a positive integer" --gpus 64,128
expect "--seq: expected a positive token count" --seq -5
expect "--seq: expected a positive token count" --seq 12x
expect "--seq needs a value" --seq
expect "--method: unknown method 'foo'" --method foo
expect "--method: 'ring' listed twice" --method ring,ring
expect "--zero: expected an integer in \[0, 3\]" --zero 5
expect "--recompute: expected none, selective or full" --recompute some
expect "--format: expected table, csv or json" --format xml
expect "--sp: expected an integer" --sp 1.5
expect "ulysses: SP degree 64 exceeds the 32 attention heads" --method ulysses --sp 64
expect "degrees do not multiply to the GPU count" --method ulysses --sp 16 --dp 2
expect "degrees do not multiply to the GPU count" --method ring --dp 3
expect "ulysses: SP degree 32 exceeds the 16 attention heads per tensor-parallel rank" --method ulysses --tp 2 --sp 32
expect "ulysses: TP degree 3 does not divide the 32 heads" --method ulysses --tp 3 --gpus 48
expect "degrees do not multiply to the GPU count: tp 2 x cp 8 x pp 1 x dp 2 = 32, not 64" --method ring --tp 2 --sp 8 --dp 2
expect "--pp 3 does not divide the 32 layers" --method ring --pp 3 --gpus 48
expect "TP degree 64 does not divide" --method megatron-sp --tp 64
expect "not a multiple of 8 GPUs per node" --gpus 12
expect "usp: ulysses degree 3 does not divide" --method usp --ulysses 3
expect "sequence 16 is shorter" --method ring --seq 16
expect "unknown platform preset 'dgx-z100'" --platform dgx-z100
expect "unknown model preset 'gpt-9t'" --model gpt-9t
expect "no such file" --platform /nonexistent/file.json
expect "bad-syntax.json:4:.*syntax error" --platform "$DATA/bad-syntax.json"
expect "missing-key.json:15:.*key 'inter_node.nic_bw_Gbps': missing" --platform "$DATA/missing-key.json"
expect "wrong-type.json:8:5: key 'gpu.hbm_GiB': expected a number, got a string" --platform "$DATA/wrong-type.json"
expect "zero-bw.json:16:5: key 'inter_node.nic_bw_Gbps': must be > 0" --platform "$DATA/zero-bw.json"
expect "huge-latency.json:1:.*key 'inter_node.latency_us': must be <= 1e+09" --platform "$DATA/huge-latency.json"
expect "huge-flops.json:1:.*key 'gpu.peak_tflops_bf16': must be <= 1e+09" --platform "$DATA/huge-flops.json"
expect "model-bad-heads.json:5:3: key 'heads': hidden (1000) must be a multiple of heads (24)" --model "$DATA/model-bad-heads.json"
expect "--model: .*tiny-platform.json:4:3: key 'gpus_per_node': unknown key" --model "$DATA/tiny-platform.json"
expect "needs 2 nodes; platform a100-pcie-4 has at most 1" --platform a100-pcie-4 --gpus 8
expect "option '--plot' is only valid with 'ulysses-sim sweep'" --plot x.svg
expect "sweep: --trace is for single runs" sweep --trace t.json
expect "--gpus: expected a positive count, a list" sweep --gpus 8:2
expect "presets: no preset named 'nope'" presets nope
# strict inputs: a misspelled or unknown key is an error naming file, line, key and the nearest valid key
expect "typo-key.json:13:.*key 'inter_node.spine_oversubscribtion': unknown key (nearest valid key: 'spine_oversubscription'" --platform "$DATA/typo-key.json"
expect "unknown-key.json:5:3: key 'pxn_routing': unknown key (nearest valid key: " --platform "$DATA/unknown-key.json"
expect "model-typo.json:.*key 'kv_head': unknown key (nearest valid key: 'kv_heads'" --model "$DATA/model-typo.json"
# overflow: numbers the simulation cannot represent are refused, never printed
expect "ring: simulated time cannot be represented: .* more than the 3.33e+05 s" --method ring --micro-batch 1024 --layers 1 --seq 64M
expect "ulysses: 1073741824 micro-steps .* is more than the 400000 layer-steps" --method ulysses --gpus 8 --global-batch 1G
expect "sizes cannot be represented: micro-batch 1048576 x 1099511627776 tokens" --method ring --micro-batch 1M --seq 1099511627776
exit $fail
