#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# `ulysses infer`: bad inputs exit 2 with a message naming the problem; prefill
# and decode with --check on P = 1, 2, 3 (dcp and helix, contiguous and
# round-robin:2, GQA, a window, several prefill methods): every decode step
# bitwise equal to one process, within the fp64 tolerance, the cache as the
# layout places it, the bytes per step equal to the plan; --json parses and
# has its keys.  Input files (--q --k --v, the whole sequences): --check
# passes for dcp and helix on 1 to 3 ranks; --out is bitwise the same for the
# same ranks in the layouts bshd and bhsd; bad files exit 2 with one line.
set -u
: "${top_builddir:=.}"
: "${MPIRUN:=mpirun}"
U="$top_builddir/ulysses"
N="$top_builddir/tests/npytool"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fails=0
cases=0

. "${top_srcdir:-.}/tests/expect.sh"

"$U" infer --help >/dev/null 2>&1 || { echo "ulysses infer: not in this build (no MPI): skipped"; exit 77; }
M="timeout 120 $MPIRUN --oversubscribe"
S="--prompt 13 --generate 5 --heads 4 --head-dim 8 --batch 2"

expect 0 "usage" -- "$U" infer --help

# bad inputs: one line each, exit 2
expect 2 "unknown KV layout 'striped'" -- "$U" infer --kv-layout striped
expect 2 "the block must be a positive integer" -- "$U" infer --kv-layout round-robin:0
expect 2 "must be one of dcp, helix" -- "$U" infer --scheme tp
expect 2 "must be in" -- "$U" infer --generate 0
expect 2 "multiple of kv-heads" -- "$U" infer --heads 6 --kv-heads 4
expect 2 "unknown method 'frob'" -- "$U" infer --method frob
expect 2 "--ulysses-degree applies to --method usp only" -- "$U" infer --method ring --ulysses-degree 2
expect 2 "the cache would hold more than" -- "$U" infer --prompt 1024G --generate 1
expect 2 "not enough memory" -- env ULYSSES_TEST_MEM_AVAILABLE=1M "$U" infer --prompt 64K --heads 32
expect 2 "exceeds the 2 attention heads" -- $M -np 3 "$U" infer --heads 2 --prompt 8 --generate 1

# one run per case; every run's output checked for the same lines
run() { # run NAME COMMAND...: its output in $W/NAME, its status must be 0
    name=$1; shift
    cases=$((cases + 1))
    if "$@" > "$W/$name" 2> "$W/$name.err"; then
        echo "ok: $*"
    else
        echo "FAIL: exit $?: $*"; sed 's/^/  | /' "$W/$name.err" | head -5; fails=$((fails + 1))
    fi
}
run p1dcp "$U" infer $S --check
run p1helix "$U" infer $S --kv-heads 2 --scheme helix --kv-layout round-robin:2 --check
run p2dcp $M -np 2 "$U" infer $S --kv-heads 2 --method zigzag --kv-layout round-robin:2 --check
run p2helix $M -np 2 "$U" infer $S --kv-heads 1 --scheme helix --window 6 --check --json
# P > H: a rank that owns no head still holds a shard and sends its partials
run p3dcp $M -np 3 "$U" infer --prompt 13 --generate 5 --heads 2 --kv-heads 1 --head-dim 8 --batch 2 --method ring \
    --window 7 --check
run p3helix $M -np 3 "$U" infer --prompt 11 --generate 6 --heads 6 --kv-heads 2 --head-dim 8 --method usp \
    --scheme helix --kv-layout round-robin:2 --dtype f64 --check
for r in p1dcp p1helix p2dcp p3dcp p3helix; do
    cases=$((cases + 1))
    if grep -q "^measured == expected on every rank: yes" "$W/$r" &&
       grep -q "^cache K, V as the layout places them on every rank: yes" "$W/$r" &&
       grep -q "^decode bitwise equal to one process and errors vs fp64 reference within .*: yes" "$W/$r" &&
       grep -q "^decode O  *yes " "$W/$r" && grep -q "^decode LSE  *yes " "$W/$r"; then
        echo "ok: $r: bytes == plan, cache == layout, decode bitwise == one process, within the fp64 tolerance"
    else
        echo "FAIL: $r:"; sed 's/^/  | /' "$W/$r"; fails=$((fails + 1))
    fi
done
# the bytes table: measured == expected in every row, as printed
for r in p2dcp p3dcp p3helix; do
    cases=$((cases + 1))
    bad=$(awk '/^call  /{t=1; next} /^measured/ {t=0} t { if ($(NF-3) != $(NF-2) || $(NF-1) != $NF) print }' "$W/$r")
    rows=$(awk '/^call  /{t=1; next} t && /^measured/ {t=0} t' "$W/$r" | wc -l)
    if [ -z "$bad" ] && [ "$rows" -ge 2 ]; then echo "ok: $r: every bytes row equals its plan"
    else echo "FAIL: $r: bytes rows unlike the plan: $bad ($rows rows)"; fails=$((fails + 1)); fi
done
# the decode calls of each scheme
cases=$((cases + 1))
if grep -q "^q all-gather " "$W/p2dcp" && grep -q "^lse all-gather " "$W/p2dcp" && grep -q "^o reduce-scatter " "$W/p2dcp" &&
   grep -q "^o+lse all-to-all " "$W/p3helix" && ! grep -q "all-gather" "$W/p3helix"; then echo "ok: the calls of dcp and helix"
else echo "FAIL: the calls of dcp and helix"; fails=$((fails + 1)); fi
# the cache rows (tokens per sequence each rank holds after the last step), by the layouts' rules:
# contiguous, 13 prompt tokens split 7 6 or 5 4 4, the 5 generated on the last rank; round-robin:2,
# blocks of 2 tokens dealt in turn: 18 tokens over 2 ranks 10 8, 17 over 3 ranks 6 6 5
cases=$((cases + 1))
if grep -q "^cache rows per rank: 18 (" "$W/p1dcp" && grep -q "^cache rows per rank: 5 4 9 (" "$W/p3dcp" &&
   grep -q "^cache rows per rank: 10 8 (" "$W/p2dcp" && grep -q "^cache rows per rank: 6 6 5 (" "$W/p3helix"; then
    echo "ok: the cache rows of contiguous and round-robin:2 on 1, 2, 3 ranks"
else echo "FAIL: cache rows: $(grep '^cache rows' "$W/p1dcp" "$W/p3dcp" "$W/p2dcp" "$W/p3helix")"; fails=$((fails + 1)); fi

# --json: one object with the keys
cases=$((cases + 1))
if command -v python3 >/dev/null 2>&1; then
    if python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))
for k in ("ranks", "method", "scheme", "kv_layout", "prompt", "generate", "prefill", "decode",
          "bytes_per_step_rank0", "kv_move_rank0", "bytes_match_all_ranks", "cache_rows", "check"):
    assert k in o, k
assert o["ranks"] == 2 and o["scheme"] == "helix" and o["kv_layout"] == "contiguous", o
assert o["bytes_match_all_ranks"] is True and o["cache_rows_match_layout"] is True
assert o["cache_rows"] == [7, 11], o["cache_rows"]
c = o["check"]
assert c["pass"] is True and c["decode_bitwise_equal_single_process"] is True and c["cache_equal_layout"] is True
for k in ("prefill_o", "decode_o", "decode_lse"):
    assert c[k]["nonfinite"] == 0 and c[k]["max_abs_err"] >= 0, k
b = o["bytes_per_step_rank0"]["o+lse all-to-all"]
assert b["sent"] == b["expected_sent"] > 0 and b["recv"] == b["expected_recv"] > 0, b
assert set(x["name"] for x in o["decode"]["phases"]) == {"q gather", "attention", "merge comm", "merge"}
assert o["decode"]["token_ms"]["max"] >= o["decode"]["token_ms"]["median"] > 0
' "$W/p2helix"; then echo "ok: --json parses and has its keys"
    else echo "FAIL: --json:"; sed 's/^/  | /' "$W/p2helix" | head -5; fails=$((fails + 1)); fi
else
    echo "ok: --json (no python3: not parsed)"
fi

# input files: q (B, N+T, H, d), k and v (B, N+T, Hkv, d)
"$N" write "$W/q.npy" f32 1 2 18 4 8 && "$N" write "$W/k.npy" f32 2 2 18 2 8 && "$N" write "$W/v.npy" f32 3 2 18 2 8 &&
"$N" write "$W/q64.npy" f64 4 18 4 8 && "$N" write "$W/k64.npy" f64 5 18 1 8 && "$N" write "$W/v64.npy" f64 6 18 1 8 &&
"$N" perm "$W/q.npy" "$W/qp.npy" && "$N" perm "$W/k.npy" "$W/kp.npy" && "$N" perm "$W/v.npy" "$W/vp.npy" &&
"$N" i64 "$W/int.npy" 0 1 2 3 && "$N" write "$W/kbad.npy" f32 2 2 17 2 8 || { echo "FAIL: npytool"; exit 1; }
F="--q $W/q.npy --k $W/k.npy --v $W/v.npy"
expect 2 "--q, --k and --v must be given together (missing: --v)" -- "$U" infer --q "$W/q.npy" --k "$W/k.npy" --prompt 13
expect 2 "--k $W/kbad.npy has shape (2, 17, 2, 8), expected (2, 18, 2, 8)" -- \
    $M -np 2 "$U" infer --q "$W/q.npy" --k "$W/kbad.npy" --v "$W/v.npy" --prompt 13
expect 2 "--v $W/int.npy: dtype i64 (integers) where floats" -- "$U" infer --q "$W/q.npy" --k "$W/k.npy" --v "$W/int.npy" --prompt 3
expect 2 "give --prompt N" -- "$U" infer $F
expect 2 "--prompt 10 + --generate 5 = 15 tokens disagrees with the input files (18 per sequence)" -- \
    "$U" infer $F --prompt 10 --generate 5
expect 2 "--prompt 18 leaves no token to generate" -- "$U" infer $F --prompt 18
expect 2 "--heads 8 disagrees with the input files (4)" -- "$U" infer $F --prompt 13 --heads 8
expect 2 "--seed sets the random inputs" -- "$U" infer $F --prompt 13 --seed 3
expect 2 "--layout applies to the tensor files" -- "$U" infer --layout bhsd
expect 2 "is also an input" -- "$U" infer $F --prompt 13 --out "$W/k.npy"
run f1dcp "$U" infer $F --prompt 13 --check --json
run f2helix $M -np 2 "$U" infer $F --generate 5 --scheme helix --method zigzag --kv-layout round-robin:2 --check
run f3dcp $M -np 3 "$U" infer $F --prompt 13 --kv-layout round-robin:2 --check --out "$W/o3.npy"
run f3dcpbhsd $M -np 3 "$U" infer --q "$W/qp.npy" --k "$W/kp.npy" --v "$W/vp.npy" --layout bhsd --prompt 13 \
    --kv-layout round-robin:2 --out "$W/o3p.npy"
run f3helix64 $M -np 3 "$U" infer --q "$W/q64.npy" --k "$W/k64.npy" --v "$W/v64.npy" --prompt 11 --scheme helix \
    --method ring --window 6 --check
for r in f2helix f3dcp f3helix64; do
    cases=$((cases + 1))
    if grep -q "^  inputs: --q $W/q" "$W/$r" && grep -q "^measured == expected on every rank: yes" "$W/$r" &&
       grep -q "^cache K, V as the layout places them on every rank: yes" "$W/$r" &&
       grep -q "^decode bitwise equal to one process and errors vs fp64 reference within .*: yes" "$W/$r"; then
        echo "ok: $r: files: cache == layout, decode bitwise == one process, within the fp64 tolerance"
    else
        echo "FAIL: $r:"; sed 's/^/  | /' "$W/$r"; fails=$((fails + 1))
    fi
done
cases=$((cases + 1))
if grep -q "dtype=f64" "$W/f3helix64" && grep -q "prompt=11 generate=7" "$W/f3helix64" &&
   grep -q "wrote --out $W/o3.npy: the decode outputs (2, 5, 4, 8) (B, T, H, d)" "$W/f3dcp.err"; then
    echo "ok: f64 files run in f64, the generated tokens are the rows after --prompt, --out named"
else echo "FAIL: dtype, rows or --out: $(head -1 "$W/f3helix64") $(cat "$W/f3dcp.err")"; fails=$((fails + 1)); fi
cases=$((cases + 1))
if "$N" perm "$W/o3p.npy" "$W/o3pp.npy" && "$N" cmp "$W/o3.npy" "$W/o3pp.npy" && "$N" info "$W/o3.npy" | grep -q "f32 (2, 5, 4, 8)"; then
    echo "ok: --out (B, T, H, d), bitwise the same from bshd and bhsd files"
else echo "FAIL: --out of bshd and bhsd files differ"; fails=$((fails + 1)); fi
cases=$((cases + 1))
if command -v python3 >/dev/null 2>&1; then
    if python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))
i = o["inputs"]
assert i == {"source": "files", "q": sys.argv[2] + "/q.npy", "k": sys.argv[2] + "/k.npy", "v": sys.argv[2] + "/v.npy",
             "layout": "bshd"}, i
assert o["prompt"] == 13 and o["generate"] == 5 and o["batch"] == 2 and o["kv_heads"] == 2 and o["check"]["pass"] is True
r = json.load(open(sys.argv[3]))["inputs"]
assert r == {"source": "random", "seed": 1}, r
' "$W/f1dcp" "$W" "$W/p2helix"; then echo "ok: --json names the inputs"
    else echo "FAIL: --json inputs:"; sed 's/^/  | /' "$W/f1dcp" | head -5; fails=$((fails + 1)); fi
else
    echo "ok: --json inputs (no python3: not parsed)"
fi

echo "cli_infer: $cases cases, $fails failures"
[ "$fails" -eq 0 ]
