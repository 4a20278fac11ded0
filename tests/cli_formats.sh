#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# `ulysses attn` with the field's tensor formats and layouts: .npy in f16,
# .safetensors of every float type (FILE:NAME, default names), --layout bhsd
# (bitwise the bshd run on transposed tensors, on 1 and 2 ranks), --layout thd
# with --cu-seqlens (bitwise --docs), --lse (the fp64 run's within the fp32
# tolerance), --scale (a power of two: bitwise a prescaled q), --out-dtype and
# .safetensors outputs with their configuration, and the bad inputs of these
# options (exit 2, one line naming the option, the file and the tensor).
set -u
: "${top_builddir:=.}"
: "${MPIRUN:=mpirun}"
U="$top_builddir/ulysses"
T="$top_builddir/tests/npytool"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fails=0
cases=0

. "${top_srcdir:-.}/tests/expect.sh"

# assert NAME -- command...: the command must succeed
assert() {
    what=$1; shift 2
    cases=$((cases + 1))
    if "$@" >"$W/aout" 2>&1; then echo "ok: $what"; else
        echo "FAIL: $what: $*"; sed 's/^/  | /' "$W/aout" | head -5; fails=$((fails + 1)); fi
}
# refute NAME -- command...: the command must fail (the files differ)
refute() {
    what=$1; shift 2
    cases=$((cases + 1))
    if "$@" >"$W/aout" 2>&1; then echo "FAIL: $what: $*"; fails=$((fails + 1)); else echo "ok: $what"; fi
}
# info FILE: npytool's description in one line
info() { "$T" info "$1" | tr '\n' ' '; }

R="--repeat 1 --warmup 0"
# (B, N, H, d) = (2, 40, 4, 16), Hkv = 2; d = 16: the default scale is 1/4
"$T" write "$W/q.npy" f32 1 2 40 4 16 && "$T" write "$W/k.npy" f32 2 2 40 2 16 &&
"$T" write "$W/v.npy" f32 3 2 40 2 16 && "$T" write "$W/do.npy" f32 4 2 40 4 16 || { echo "FAIL: npytool"; exit 1; }
Q="--q $W/q.npy --k $W/k.npy --v $W/v.npy"
expect 0 "" -- "$U" attn $Q --dout "$W/do.npy" --out "$W/o.npy" --dq "$W/dq.npy" --dk "$W/dk.npy" --dv "$W/dv.npy" \
    --lse "$W/lse.npy" $R

# ---- f16 .npy: read exactly (bitwise the run on the same values in f32), written as '<f2'
for x in q k v do; do "$T" conv "$W/$x.npy" "$W/${x}16.npy" f16 && "$T" conv "$W/${x}16.npy" "$W/${x}16w.npy" f32; done
expect 0 "" -- "$U" attn --q "$W/q16.npy" --k "$W/k16.npy" --v "$W/v16.npy" --out "$W/o16.npy" --out-dtype f16 $R
expect 0 "" -- "$U" attn --q "$W/q16w.npy" --k "$W/k16w.npy" --v "$W/v16w.npy" --out "$W/o16w.npy" $R
assert "f16 output is '<f2' (B, N, H, d)" -- sh -c "'$T' info '$W/o16.npy' | grep -qx 'o16 f16 (2, 40, 4, 16)'"
"$T" conv "$W/o16w.npy" "$W/o16r.npy" f16
assert "f16 inputs read exactly: O bitwise the f32 run's on the same values, rounded to f16 as npytool does" -- \
    "$T" same "$W/o16.npy" "$W/o16r.npy"
"$T" mul "$W/v.npy" "$W/vbig.npy" 1e7
expect 0 "note: --out $W/obig.npy: 4800 of 5120 values are beyond the f16 range and are written as +-Inf" -- \
    "$U" attn --q "$W/q.npy" --k "$W/k.npy" --v "$W/vbig.npy" --out "$W/obig.npy" --out-dtype f16 $R
assert "f16 round trip .npy -> .safetensors -> .npy keeps every bit" -- sh -c \
    "'$T' conv '$W/q16.npy' '$W/q16.safetensors' f16 q && '$T' conv '$W/q16.safetensors' '$W/q16b.npy' f16 &&
     cmp '$W/q16.npy' '$W/q16b.npy'"

# ---- safetensors: one file of q, k, v, do (default names) and FILE:NAME
"$T" pack "$W/all.safetensors" q="$W/q.npy" k="$W/k.npy" v="$W/v.npy" do="$W/do.npy"
S="$W/all.safetensors"
expect 0 "" -- "$U" attn --q "$S" --k "$S" --v "$S" --dout "$S" --out "$W/o_st.npy" --dq "$W/dq_st.npy" $R
assert "safetensors inputs (default names q, k, v, do): O bitwise the .npy run's" -- "$T" cmp "$W/o_st.npy" "$W/o.npy"
assert "safetensors inputs: dQ bitwise the .npy run's" -- "$T" cmp "$W/dq_st.npy" "$W/dq.npy"
"$T" pack "$W/named.safetensors" query="$W/q.npy" key="$W/k.npy" value="$W/v.npy"
N="$W/named.safetensors"
expect 0 "" -- "$U" attn --q "$N:query" --k "$N:key" --v "$N:value" --out "$W/o_named.safetensors" $R
assert "FILE:NAME inputs; a .safetensors output holds tensor o and the configuration" -- sh -c \
    "'$T' info '$W/o_named.safetensors' | tr '\n' ' ' | grep -q 'o f32 (2, 40, 4, 16) method=ulysses ranks=1 causal=false window=0 scale=0.25 layout=bshd dtype=f32 kv_heads=2 docs='"
assert "the .safetensors output's values are the .npy output's" -- "$T" same "$W/o_named.safetensors" "$W/o.npy"

# ---- bf16: inputs from .safetensors, outputs in bf16 (--out-dtype bf16 and input)
for x in q k v; do "$T" conv "$W/$x.npy" "$W/${x}b.safetensors" bf16 "$x" && "$T" conv "$W/${x}b.safetensors" "$W/${x}bw.npy" f32; done
expect 0 "" -- "$U" attn --q "$W/qb.safetensors" --k "$W/kb.safetensors" --v "$W/vb.safetensors" \
    --out "$W/ob.safetensors" --out-dtype input --causal $R
expect 0 "" -- "$U" attn --q "$W/qbw.npy" --k "$W/kbw.npy" --v "$W/vbw.npy" --out "$W/obw.npy" --causal $R
"$T" conv "$W/obw.npy" "$W/obr.safetensors" bf16 o
assert "bf16 inputs read exactly; --out-dtype input writes bf16, rounded as npytool rounds" -- \
    "$T" same "$W/ob.safetensors" "$W/obr.safetensors"
assert "bf16 output: tensor o, bf16, causal=true in the metadata" -- sh -c \
    "'$T' info '$W/ob.safetensors' | tr '\n' ' ' | grep -q '^o bf16 (2, 40, 4, 16) method=ulysses ranks=1 causal=true'"
assert "bf16 round trip .safetensors -> f32 .npy -> .safetensors keeps every bit" -- sh -c \
    "'$T' conv '$W/ob.safetensors' '$W/obf.npy' f32 && '$T' conv '$W/obf.npy' '$W/ob2.safetensors' bf16 o &&
     '$T' info '$W/ob2.safetensors' | grep -qx 'o bf16 (2, 40, 4, 16)' && '$T' same '$W/ob.safetensors' '$W/ob2.safetensors'"
expect 2 "--out-dtype bf16: --out $W/ob.npy is a .npy file, which cannot hold bfloat16" -- \
    "$U" attn $Q --out "$W/ob.npy" --out-dtype bf16
expect 2 "--out-dtype input: --q $W/qb.safetensors is bf16, which the .npy output $W/ob.npy cannot hold" -- \
    "$U" attn --q "$W/qb.safetensors" --k "$W/kb.safetensors" --v "$W/vb.safetensors" --out "$W/ob.npy" --out-dtype input
assert "no output was left by the refused runs" -- test ! -e "$W/ob.npy"

# ---- --layout bhsd: PyTorch's (B, H, N, d), transposed on load and on write
for x in q k v do; do "$T" perm "$W/$x.npy" "$W/${x}T.npy"; done
QT="--q $W/qT.npy --k $W/kT.npy --v $W/vT.npy --dout $W/doT.npy"
expect 2 "--k $W/kT.npy has shape (2, 2, 40, 16), expected (2, 4, 40, 16); if your tensors are (B, H, N, d), use --layout bhsd" -- \
    "$U" attn $QT
expect 0 "" -- "$U" attn --layout bhsd $QT --out "$W/oT.npy" --dq "$W/dqT.npy" --dk "$W/dkT.npy" --lse "$W/lseT.npy" $R
assert "bhsd output is (B, H, N, d)" -- sh -c "'$T' info '$W/oT.npy' | grep -qx 'oT f32 (2, 4, 40, 16)'"
for x in o dq dk; do "$T" perm "$W/${x}T.npy" "$W/${x}TT.npy"; done
assert "--layout bhsd: O bitwise the bshd run's, transposed" -- "$T" cmp "$W/oTT.npy" "$W/o.npy"
assert "--layout bhsd: dQ bitwise" -- "$T" cmp "$W/dqTT.npy" "$W/dq.npy"
assert "--layout bhsd: dK bitwise" -- "$T" cmp "$W/dkTT.npy" "$W/dk.npy"
assert "--layout bhsd: LSE (B, H, N) bitwise the bshd run's" -- "$T" cmp "$W/lseT.npy" "$W/lse.npy"
expect 0 "" -- "$MPIRUN" --oversubscribe -np 2 "$U" attn --layout bhsd --method zigzag $QT --out "$W/oT2.npy" --dq "$W/dqT2.npy" $R
expect 0 "" -- "$MPIRUN" --oversubscribe -np 2 "$U" attn --method zigzag $Q --dout "$W/do.npy" --out "$W/oZ.npy" --dq "$W/dqZ.npy" $R
"$T" perm "$W/oT2.npy" "$W/oT2T.npy"; "$T" perm "$W/dqT2.npy" "$W/dqT2T.npy"
assert "--layout bhsd on 2 ranks (zigzag shards streamed head by head): O bitwise the bshd run's" -- \
    "$T" cmp "$W/oT2T.npy" "$W/oZ.npy"
assert "--layout bhsd on 2 ranks: dQ bitwise" -- "$T" cmp "$W/dqT2T.npy" "$W/dqZ.npy"

# ---- --layout thd with --cu-seqlens: bitwise --docs on the same (1, T, H, d) tensors
"$T" write "$W/q1.npy" f32 5 40 4 16 && "$T" write "$W/k1.npy" f32 6 40 2 16 && "$T" write "$W/v1.npy" f32 7 40 2 16
"$T" i64 "$W/cu.npy" 0 0 7 25 40 && "$T" conv "$W/cu.npy" "$W/cu32.npy" i32
Q1="--q $W/q1.npy --k $W/k1.npy --v $W/v1.npy"
expect 0 "" -- "$U" attn $Q1 --docs "$W/cu.npy" --causal --out "$W/o_docs.npy" --lse "$W/lse_docs.npy" $R
expect 0 "" -- "$U" attn $Q1 --layout thd --cu-seqlens "$W/cu32.npy" --causal --out "$W/o_thd.npy" --lse "$W/lse_thd.npy" $R
assert "thd output is (T, H, d), its LSE (H, T)" -- sh -c \
    "'$T' info '$W/o_thd.npy' | grep -qx 'o_thd f32 (40, 4, 16)' && '$T' info '$W/lse_thd.npy' | grep -qx 'lse_thd f32 (4, 40)'"
assert "--layout thd + int32 --cu-seqlens: O bitwise --docs (bshd, B = 1)" -- "$T" same "$W/o_thd.npy" "$W/o_docs.npy"
assert "--layout thd: LSE bitwise --docs" -- "$T" same "$W/lse_thd.npy" "$W/lse_docs.npy"
"$T" pack "$W/thd.safetensors" q="$W/q1.npy" k="$W/k1.npy" v="$W/v1.npy" cu_seqlens="$W/cu.npy"
P1="$W/thd.safetensors"
expect 0 "" -- "$U" attn --layout thd --q "$P1" --k "$P1" --v "$P1" --causal --out "$W/o_thd2.safetensors" $R
assert "thd with the tensor cu_seqlens of the --q file: bitwise --docs; the docs in the metadata" -- sh -c \
    "'$T' same '$W/o_thd2.safetensors' '$W/o_docs.npy' && '$T' info '$W/o_thd2.safetensors' | grep -qx 'docs=0,7,25,40'"
expect 2 "--q $W/q.npy: --layout thd expects shape (T, H, d), got 4 dimensions (a (B, N, H, d) tensor is --layout bshd)" -- \
    "$U" attn $Q --layout thd --cu-seqlens "$W/cu.npy"
expect 2 "--layout thd needs --cu-seqlens F: the --q file $W/q1.npy has no tensor cu_seqlens" -- "$U" attn $Q1 --layout thd
expect 2 "--cu-seqlens applies to --layout thd" -- "$U" attn $Q1 --cu-seqlens "$W/cu.npy"
"$T" i64 "$W/cu_bad.npy" 0 0 7 30
expect 2 "--cu-seqlens $W/cu_bad.npy: " -- "$U" attn $Q1 --layout thd --cu-seqlens "$W/cu_bad.npy"
expect 2 "--cu-seqlens $W/q1.npy, tensor 'q1': dtype f32 where integer offsets (i32, i64) are expected" -- \
    "$U" attn $Q1 --layout thd --cu-seqlens "$W/q1.npy"

# ---- --lse: the f32 run's within the fp32 tolerance of the fp64 run's (that of --check for the LSE)
expect 0 "" -- "$U" attn $Q --dtype f64 --lse "$W/lse64.npy" $R
assert "--lse (B, H, N) f32 within atol 5e-6 + rtol 5e-5 of the f64 run's" -- "$T" close "$W/lse.npy" "$W/lse64.npy" 5e-6 5e-5
# q = 0: every score is 0, so every row's LSE is the natural log of its 40 keys
"$T" mul "$W/q.npy" "$W/q0.npy" 0 && "$T" fill "$W/ln40.npy" 3.6888794541139363 2 4 40
expect 0 "" -- "$U" attn --q "$W/q0.npy" --k "$W/k.npy" --v "$W/v.npy" --dtype f64 --lse "$W/lse0.npy" $R
assert "--lse is the natural log: q = 0 gives log(40) in every row (within 1e-15 relative)" -- \
    "$T" close "$W/lse0.npy" "$W/ln40.npy" 0 1e-15

# ---- --scale: the default 1/sqrt(16) = 1/4; a power of two commutes exactly with the dot products
expect 0 "" -- "$U" attn $Q --scale 0.25 --out "$W/o_s25.npy" $R
assert "--scale 0.25 (= 1/sqrt(d)) is bitwise the default" -- "$T" cmp "$W/o_s25.npy" "$W/o.npy"
expect 0 "" -- "$U" attn $Q --scale 0.5 --out "$W/o_s5.npy" --lse "$W/lse_s5.npy" $R
refute "--scale 0.5 changes O" -- "$T" same "$W/o_s5.npy" "$W/o.npy"
"$T" mul "$W/q.npy" "$W/q2.npy" 2
expect 0 "" -- "$U" attn --q "$W/q2.npy" --k "$W/k.npy" --v "$W/v.npy" --out "$W/o_q2.npy" --lse "$W/lse_q2.npy" $R
assert "--scale 0.5 is bitwise the default scale on 2 q" -- "$T" cmp "$W/o_s5.npy" "$W/o_q2.npy"
assert "--scale 0.5: LSE bitwise too" -- "$T" cmp "$W/lse_s5.npy" "$W/lse_q2.npy"
refute "the LSE comparison can fail: --scale 0.5's LSE is not within the tolerance of the default's" -- \
    "$T" close "$W/lse_s5.npy" "$W/lse64.npy" 5e-6 5e-5
expect 0 "scale=0.5" -- sh -c "'$U' attn $Q --scale 0.5 --out '$W/o_s5.safetensors' $R >/dev/null && '$T' info '$W/o_s5.safetensors'"
expect 2 "--scale 0: the softmax scale must be > 0" -- "$U" attn --seq 32 --scale 0
expect 2 "--scale expects a finite number" -- "$U" attn --seq 32 --scale nan

# ---- bad tensor files: exit 2, naming the option, the file and the tensor
head -c 40 "$S" > "$W/trunc.safetensors"
expect 2 "--q $W/trunc.safetensors: truncated safetensors header: it declares" -- \
    "$U" attn --q "$W/trunc.safetensors" --k "$S" --v "$S"
"$T" sthead "$W/long.safetensors" 1099511627776 '{"q":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}' 4
expect 2 "--q $W/long.safetensors: safetensors header length 1099511627776 is beyond the file" -- \
    "$U" attn --q "$W/long.safetensors" --k "$S" --v "$S"
"$T" sthead "$W/bool.safetensors" 0 '{"q":{"dtype":"BOOL","shape":[1,40,4,16],"data_offsets":[0,2560]}}' 2560
expect 2 "--q $W/bool.safetensors: tensor 'q': unsupported dtype 'BOOL'" -- "$U" attn --q "$W/bool.safetensors" --k "$S" --v "$S"
"$T" sthead "$W/over.safetensors" 0 '{"q":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"k":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}' 12
expect 2 "--k $W/over.safetensors: tensors 'q' (bytes .0, 8)) and 'k' (bytes .4, 12)) overlap" -- \
    "$U" attn --q "$S" --k "$W/over.safetensors" --v "$S"
expect 2 "--q $N: 3 tensors and none named 'q': give --q FILE:NAME (the file holds: query, key, value)" -- \
    "$U" attn --q "$N" --k "$N:key" --v "$N:value"
expect 2 "--v $N: no tensor 'val' (the file holds: query, key, value)" -- "$U" attn --q "$N:query" --k "$N:key" --v "$N:val"
expect 2 "--q $P1, tensor 'cu_seqlens': dtype i64 (integers) where floats (f16, bf16, f32, f64) are expected" -- \
    "$U" attn --q "$P1:cu_seqlens" --k "$P1" --v "$P1"
expect 2 "--k $S, tensor 'k' has shape (2, 40, 2, 16), expected (2, 40, 4, 16) (--layout bhsd)" -- \
    "$U" attn --layout bhsd --q "$S" --k "$S" --v "$S"
expect 2 "--dout $W/kT.npy has shape (2, 2, 40, 16), expected (2, 4, 40, 16) (--layout bhsd)" -- \
    "$U" attn --layout bhsd --q "$W/qT.npy" --k "$W/kT.npy" --v "$W/vT.npy" --dout "$W/kT.npy"

echo "$cases cases, $fails failed"
[ "$fails" -eq 0 ]
