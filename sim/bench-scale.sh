#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# sim/bench-scale.sh -- the simulator's cost at cluster scale (make bench-sim, doc/performance.md):
# CPU time (user + sys) of `ulysses-sim --gpus G --method ulysses` at 1024 and 1048576 GPUs,
# medians of REPEAT interleaved runs, and their ratio (target <= 3); then the CPU time of the
# 10 800-configuration sweep (target < 30 s); the same ratio for the pairwise all-to-all on GB200
# NVL72 (groups placed in several ways, a ring over a partial NVLink domain); ZeRO 0 at 1024 GPUs
# (the tree all-reduce).  CPU time, not wall
# clock: the figures hold on a loaded machine.  ULYSSES_SIM: the binary (default ./ulysses-sim);
# REPEAT (default 7).
set -eu
sim=${ULYSSES_SIM:-./ulysses-sim}
repeat=${REPEAT:-7}
case $repeat in ''|*[!0-9]*|0) echo "bench-scale.sh: REPEAT must be a positive integer" >&2; exit 2;; esac
[ -x "$sim" ] || { echo "bench-scale.sh: $sim is not an executable" >&2; exit 2; }
TIMEFORMAT='%3U %3S'
cpu() {   # CPU seconds of one run of the simulator with the given arguments
    local t
    t=$( { time "$sim" "$@" > /dev/null; } 2>&1 ) || { echo "bench-scale.sh: $sim $* failed: $t" >&2; exit 1; }
    echo "$t" | awk '{ printf "%.3f\n", $1 + $2 }'
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
# ratio LABEL ARGS...: medians of REPEAT interleaved runs at 1024 and 1048576 GPUs and their ratio
ratio() {
    local label=$1 small= large= ms ml
    shift
    for _ in $(seq "$repeat"); do
        small="$small $(cpu --gpus 1024 --method ulysses "$@")"
        large="$large $(cpu --gpus 1048576 --method ulysses "$@")"
    done
    ms=$(echo "$small" | median)
    ml=$(echo "$large" | median)
    awk -v a="$ms" -v b="$ml" -v n="$repeat" -v l="$label" 'BEGIN { printf "ulysses-sim --method ulysses%s, CPU time, medians of %d: 1024 GPUs %.1f ms, 1048576 GPUs %.1f ms, ratio %.2f%s\n", l, n, a * 1000, b * 1000, b / a, l == "" ? " (target <= 3)" : "" }'
}
ratio ""
# groups placed in several ways (Ulysses groups of 32 on 72-GPU NVLink domains: classes of groups)
# and the ZeRO ring over a partial last domain (its light cone by windows)
ratio " --a2a pairwise --platform gb200-nvl72" --a2a pairwise --platform gb200-nvl72
# ZeRO 0: the gradient all-reduce runs NCCL's tree over 128 nodes (its 16 channels reduced to one)
nz=$(( repeat < 3 ? repeat : 3 )) z0=
for _ in $(seq "$nz"); do z0="$z0 $(cpu --gpus 1024 --method ulysses --zero 0)"; done
echo "ulysses-sim --gpus 1024 --method ulysses --zero 0 (tree all-reduce), CPU time, median of $nz: $(echo "$z0" | median) s (target < 1 s)"
sw=$(cpu sweep --seq 1K:200K:+1K --gpus 8:2048 --method all)
echo "ulysses-sim sweep --seq 1K:200K:+1K --gpus 8:2048 --method all (10800 configurations): CPU time $sw s (target < 30 s)"
