#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# unfused-attention.sh -- the estimate of doc/validation.md (Megatron-LM
# Table 1): what Megatron-LM's 2021 attention, which materialises the
# b x (a/t) x s x s scores of every layer (baddbmm, fused scale-mask-softmax,
# attention dropout, bmm), would add to the simulated T rows.  Not part of
# the simulator: it runs each row, then adds, per GPU,
#   layers/pp x micro-steps x mb x (heads/tp) x s^2 x BYTES / HBM bandwidth
# and scales the row's time by (1 + added / compute time).
# BYTES per score element (fp16): forward 13 (scores written 2, softmax
# read + written 4, dropout read + written + mask 5, read by bmm 2),
# backward 19, the forward twice with full recomputation: 45.
#
#   sh sim/unfused-attention.sh        (from the top of the tree)
# Environment: ULYSSES_SIM (default ./ulysses-sim), ULYSSES_SIM_PRESETS.
set -u
SIM=${ULYSSES_SIM:-./ulysses-sim}
BYTES=45
HBM=2039e9   # dgx-a100-80g hbm_bw_GBps
[ -x "$SIM" ] || { echo "unfused-attention.sh: $SIM not found (build first)" >&2; exit 2; }
tmp=$(mktemp) || exit 1
trap 'rm -f "$tmp"' EXIT
# the model file's integer key K
key() { sed -n "s/.*\"$2\": *\([0-9][0-9]*\).*/\1/p" "$1"; }
opt() { printf '%s\n' "$1" | sed -n "s/.*--$2 \([0-9][0-9]*\).*/\1/p"; }
grep -E '^T[0-9]+\|' "$(dirname "$0")/validate.sh" |
while IFS='|' read -r id _ _ paper _ _ _ cmd; do
    run=$(printf '%s' "$cmd" | sed "s|@V@|$(dirname "$0")/validation|g")
    model=$(printf '%s\n' "$run" | sed 's/.*--model \([^ ]*\).*/\1/')
    tp=$(opt "$run" tp); pp=$(opt "$run" pp); gpus=$(opt "$run" gpus)
    # shellcheck disable=SC2086
    "$SIM" $run --format csv > "$tmp" || exit 1
    awk -F, -v id="$id" -v paper="$paper" -v tp="$tp" -v pp="${pp:-1}" -v gpus="$gpus" \
        -v L="$(key "$model" layers)" -v a="$(key "$model" heads)" -v s="$(key "$model" seq_tokens)" \
        -v mb="$(key "$model" micro_batch)" -v gb="$(key "$model" global_batch)" \
        -v B="$BYTES" -v bw="$HBM" '
        NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        NR == 2 {
            m = gb / (gpus / (tp * pp) * mb)
            bytes = L / pp * m * mb * (a / tp) * s * s * B
            add = bytes / bw; comp = $c["compute_s"]; tf = $c["tflops_per_gpu"]
            tf2 = tf / (1 + add / comp)
            printf "%s: s x s traffic %.0f GB/GPU, +%.3f s (%+.1f %% of compute): %.1f -> %.1f TFLOP/s, error %+.1f %% -> %+.1f %%\n",
                   id, bytes / 1e9, add, 100 * add / comp, tf, tf2, 100 * (tf / paper - 1), 100 * (tf2 / paper - 1)
        }' "$tmp"
done
