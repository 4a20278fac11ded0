#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
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
expect "--attn-kernel: expected flash or unfused, got 'fast'" --attn-kernel fast
expect "--attn-dropout applies to --attn-kernel unfused" --method ulysses --attn-dropout
expect "needs a fused kernel" --method ring --attn-kernel unfused
expect "--sp: expected an integer" --sp 1.5
expect "ulysses: SP degree 64 exceeds the 32 attention heads" --method ulysses --sp 64
expect "degrees do not multiply to the GPU count" --method ulysses --sp 16 --dp 2
expect "degrees do not multiply to the GPU count" --method ring --dp 3
expect "ulysses: SP degree 32 exceeds the 16 attention heads per tensor-parallel rank" --method ulysses --tp 2 --sp 32
expect "ulysses: TP degree 3 does not divide the 32 heads" --method ulysses --tp 3 --gpus 48
expect "degrees do not multiply to the GPU count: tp 2 x cp 8 x pp 1 x dp 2 = 32, not 64" --method ring --tp 2 --sp 8 --dp 2
expect "--pp 3 does not divide the 32 layers" --method ring --pp 3 --gpus 48
expect "--vpp needs pipeline parallelism" --method ring --vpp 2
expect "--pp 4 x --vpp 3 does not divide the 32 layers" --method megatron-sp --tp 8 --pp 4 --vpp 3 --seq 2K --global-batch 16
expect "needs the micro-batches per step (6 = global batch 12" --method megatron-sp --tp 8 --pp 4 --vpp 2 --seq 2K --global-batch 12
expect "do not divide evenly over the 2 other pipeline stages" --method megatron-sp --tp 8 --pp 4 --pp-first-layers 5 --pp-last-layers 8 --seq 2K
expect "--vpp: expected an integer in" --method ring --pp 2 --vpp 0
expect "--offload with pipeline parallelism" --method ulysses --pp 2 --zero 3 --offload optimizer --seq 32K
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
# ---------------------------------------------------------------------------
# Bounds, saturation and messages: every accepted size has a limit the program
# serves; a saturated quantity or an empty result is an error, never a result;
# text from files is printed escaped.
# ---------------------------------------------------------------------------
# a sweep whose configuration count overflows an int is refused before anything runs
expect "sweep: 68719476736 configurations (4096 GPU counts x 4096 sequences x 64 sp x 64 tp x 1 pp x 1 methods) is more than the 100000" \
    sweep --seq 1K:4096K:+1K --gpus 8:32768:+8 --sp 1:64:+1 --tp 1:64:+1 --method ulysses --no-progress
expect "sweep: 100400 configurations .* more than the 100000" sweep --seq 1K:400K:+1K --gpus 8:2008:+8 --method ulysses
# plan: refused above its maximum at once; at the maximum it finishes, bounded
expect "plan: --gpus 16385 is more than the 16384 GPUs plan searches" plan --gpus 16385
expect "plan: --gpus 1048576 is more than the 16384 GPUs plan searches" plan --gpus 1048576
if timeout 120 "$SIM" plan --gpus 16384 --method ulysses,usp --no-progress > "$tmp/plan" 2> "$tmp/err" &&
   grep -q "^1 " "$tmp/plan" && [ ! -s "$tmp/err" ]; then
    echo "ok: plan --gpus 16384 --method ulysses,usp finished with a ranking"
else
    echo "FAIL: plan --gpus 16384: exit or time-out, or no ranking:"; cat "$tmp/plan" "$tmp/err"; fail=1
fi
# plan: an empty result is an error saying why, not an empty table
expect "plan: [0-9]* configurations of 64 GPUs fit, but none can be simulated (e.g. .*micro-steps" \
    plan --global-batch 1000000
# saturated sizes and times are refused, never printed
expect "attn: --seq '4611686018427387904': expected an integer in 1..1099511627776" \
    attn --platform dgx-h100 --gpus 8 --seq 4611686018427387904
expect "attn: sizes cannot be represented: .* (limit 2^60)" attn --platform dgx-h100 --gpus 8 --seq 1G --heads 1M --head-dim 1024
expect "attn: simulated time cannot be represented: the attention takes" attn --platform dgx-h100 --gpus 8 --seq 1024G
expect "--seq: 1099511627777 is more than 2^40" --seq 1099511627777
sed 's/"bw_GBps_per_dir": *[0-9.e+]*/"bw_GBps_per_dir": 1e-300/' "$top_srcdir/sim/presets/platforms/dgx-h100.json" > "$tmp/slow.json"
expect "coll: all-to-all of 1073741824 bytes on 8 GPUs takes more than the 4e+06 s" \
    coll --op all-to-all --gpus 8 --bytes 1G --platform "$tmp/slow.json"
expect "coll: --gpus 4096: all-to-all is simulated on at most 2048 GPUs" coll --op all-to-all --gpus 4096 --bytes 1M
# every row of a sweep failed: exit 2 (the rows keep their error column)
"$SIM" sweep --method ulysses --sp 64 --no-progress > "$tmp/out" 2> "$tmp/err"; st=$?
if [ $st -eq 2 ] && grep -q "none of the 1 configurations could run" "$tmp/err" && grep -q "SP degree 64 exceeds" "$tmp/out"; then
    echo "ok: sweep with every row failed -> exit 2: $(cat "$tmp/err")"
else
    echo "FAIL: sweep with every row failed: exit $st"; cat "$tmp/err"; fail=1
fi
# a write error on stdout is a failure with a message, for every command
if [ -w /dev/full ]; then
    for cmd in "presets dgx-h100" "presets" "--method ulysses" "--help" "coll --op all-reduce --gpus 8 --bytes 1M"; do
        # shellcheck disable=SC2086
        "$SIM" $cmd > /dev/full 2> "$tmp/err"; st=$?
        if [ $st -eq 1 ] && grep -q "error writing the output" "$tmp/err"; then
            echo "ok: $cmd > /dev/full -> exit 1: $(tail -1 "$tmp/err")"
        else
            echo "FAIL: $cmd > /dev/full: exit $st, expected 1 with a message"; cat "$tmp/err"; fail=1
        fi
    done
else
    echo "skip: /dev/full is not available"
fi
# description paths that are not regular files are named by kind
expect "--platform: /dev/zero: is a character device, not a regular file" --platform /dev/zero
expect "--platform: /dev/null: is a character device, not a regular file" --platform /dev/null
mkdir "$tmp/dir.json"
expect "--model: $tmp/dir.json: is a directory, not a regular file" --model "$tmp/dir.json"
if mkfifo "$tmp/fifo.json" 2>/dev/null; then
    # a FIFO with no writer: refused by kind at once, never waited on
    st=0; timeout 10 "$SIM" --platform "$tmp/fifo.json" > "$tmp/out" 2> "$tmp/err" || st=$?
    if [ $st -eq 2 ] && grep -q "fifo.json: is a FIFO (named pipe), not a regular file" "$tmp/err"; then
        echo "ok: --platform FIFO -> $(cat "$tmp/err")"
    else
        echo "FAIL: --platform FIFO: exit $st: $(cat "$tmp/err")"; fail=1
    fi
else
    echo "skip: mkfifo is not available"
fi
# an integer key written as a real number is named as such
sed 's/"gpus_per_node": *8/"gpus_per_node": 8e0/' "$top_srcdir/sim/presets/platforms/dgx-h100.json" > "$tmp/real.json"
expect "key 'gpus_per_node': expected an integer written as digits only, got the real number 8 (write 8," --platform "$tmp/real.json"
sed 's/"gpus_per_node": *8/"gpus_per_node": 8.5/' "$top_srcdir/sim/presets/platforms/dgx-h100.json" > "$tmp/frac.json"
expect "key 'gpus_per_node': expected an integer, got the fraction 8.5" --platform "$tmp/frac.json"
# a platform name with ESC, CR, LF and U+202E is printed escaped in every text output
esc=$(printf '\033'); cr=$(printf '\r')
sed "s/\"name\": *\"dgx-h100\"/\"name\": \"evil\\\\u001b[31mred\\\\r\\\\nX\\\\u202Ertl\"/" \
    "$top_srcdir/sim/presets/platforms/dgx-h100.json" > "$tmp/hostile.json"
for cmd in "--method ulysses" "plan --gpus 16 --method ulysses --no-progress" "coll --op all-reduce --gpus 8 --bytes 1M" \
           "attn --gpus 8" "--method ulysses --format csv" "--method ulysses --format json"; do
    # shellcheck disable=SC2086
    "$SIM" $cmd --platform "$tmp/hostile.json" > "$tmp/out" 2> "$tmp/err"; st=$?
    if [ $st -ne 0 ]; then echo "FAIL: hostile name, $cmd: exit $st"; cat "$tmp/err"; fail=1; continue; fi
    if grep -q "$esc" "$tmp/out" || grep -q "$cr" "$tmp/out" || grep -q "$(printf '\342\200\256')" "$tmp/out"; then
        echo "FAIL: hostile name, $cmd: a raw ESC, CR or U+202E reached stdout"; fail=1; continue
    fi
    if ! grep -qi 'evil\(\\x1b\|\\u001b\)\[31mred\\r\\nX\\u202Ertl' "$tmp/out"; then
        echo "FAIL: hostile name, $cmd: the escaped name is not in the output:"; head -3 "$tmp/out"; fail=1; continue
    fi
    echo "ok: hostile platform name escaped: $cmd"
done
# ... and in messages: a key with an ESC is escaped in the error
printf '{"name":"x","bad\\u001b[2Jkey":1}\n' > "$tmp/hostile-key.json"
expect "key 'bad\\\\x1b\[2Jkey': unknown key" --platform "$tmp/hostile-key.json"
if grep -q "$esc" "$tmp/err"; then echo "FAIL: a raw ESC reached stderr"; fail=1; fi

# ---- --trace-ranks (the traces themselves: cli_trace.sh)
expect "--trace-ranks: expected all, or GPUs and ranges like 0,3 or 0-7, got '0,x'" --trace "$tmp/t.json" --trace-ranks 0,x
expect "--trace-ranks: expected all, or GPUs and ranges like 0,3 or 0-7, got ''" --trace "$tmp/t.json" --trace-ranks ""
expect "--trace-ranks: expected all, or GPUs and ranges like 0,3 or 0-7, got '-1'" --trace "$tmp/t.json" --trace-ranks=-1
expect "--trace-ranks: expected all, or GPUs and ranges like 0,3 or 0-7, got '0,'" --trace "$tmp/t.json" --trace-ranks 0,
expect "--trace-ranks: range 3-1 is empty" --trace "$tmp/t.json" --trace-ranks 3-1
expect "--trace-ranks: GPU 2 is listed twice in '0-3,2'" --trace "$tmp/t.json" --trace-ranks 0-3,2
expect "--trace-ranks: '0-64' names more than the 64 GPUs one trace holds" --gpus 128 --trace "$tmp/t.json" --trace-ranks 0-64
expect "--trace-ranks: '99999999999999999999': GPUs are numbered 0 to at most 1048575" --trace "$tmp/t.json" --trace-ranks 99999999999999999999
expect "--trace-ranks: GPU 16 is not one of the 16 GPUs of this run (0-15)" --gpus 16 --method ulysses --trace "$tmp/t.json" --trace-ranks 0,16
expect "--trace-ranks needs --trace FILE" --method ulysses --trace-ranks 0,1
expect "--trace-ranks is for single runs (with --trace)" sweep --trace-ranks 0
expect "--trace-ranks is for single runs (with --trace)" plan --trace-ranks 0
if [ -e "$tmp/t.json" ]; then echo "FAIL: a refused --trace-ranks left $tmp/t.json"; fail=1; fi

exit $fail
