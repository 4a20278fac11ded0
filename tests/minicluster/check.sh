#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# check.sh -- `make check-minicluster`: the mini-cluster works and cleans up.
#
#   1. ulysses attn --backward --check on 2 nodes x 2 ranks over a 100 Mbit/s
#      shaped link: bitwise equal to one process, byte counters as planned,
#      and the traffic really crossed node0's shaped link: the tbf qdisc sent
#      at least the plan's bytes from node0's ranks to node1's, and throttled
#      (overlimits > 0).
#      The same job with --json, compared with ulysses-sim attn --compare:
#      the bytes of the 2-node run equal the simulator's, all 8 all-to-alls.
#      ulysses calibrate --quick on the same 2 x 2 nodes: the platform has 2
#      GPUs per node and 2 nodes, and the link rate it measures with the
#      all-to-all across the nodes is the shaped 100 Mbit/s within 30 %
#      (a node-pair exchange under Open MPI's default TCP rendezvous measured
#      48 Mbit/s; doc/minicluster.md).
#   2. Teardown after success, after a failing job (exit status passed
#      through) and after a job killed by the timeout: no namespace of the run
#      is left and no process of the job survives.
#   3. Bad options: exit status 2.
# Exit 77 (skip) where namespaces, tc or mpirun are unavailable.
set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
mc="$top_srcdir/tests/minicluster/minicluster.sh"
uly="$top_builddir/ulysses"
[ -x "$uly" ] || { echo "SKIP: $uly not built (configured --without-mpi?)"; exit 77; }
fail=0
bad() { echo "FAIL: $*"; fail=1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mccheck.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# prefix of a run, from its teardown line; then nothing of it may remain
check_gone() {
    prefix=$(sed -n 's/^minicluster: torn down (\(uly[0-9]*\):.*/\1/p' "$1")
    if [ -z "$prefix" ]; then
        bad "$2: no teardown line in the output"
        return
    fi
    if ip netns list | grep -q "^$prefix-"; then
        bad "$2: namespaces $prefix-* left behind"
    fi
}

# ---------------------------------------------------------------- 1. a job
# B=1 N=1024 H=4 d=64 f32 on P=4: every pair moves n_r * H_r * d * 4 =
# 256 * 1 * 64 * 4 = 65536 bytes per tensor; 8 tensors per forward+backward;
# node0 (ranks 0, 1) -> node1 (ranks 2, 3): 4 pairs; 1 warm-up + 3 timed
# iterations.  --check then gathers to rank 0 (node1 -> node0: not counted).
want=$((65536 * 8 * 4 * 4))
sh "$mc" --nodes 2 --ppn 2 --rate 100mbit --timeout 180 --exec -- sh -c \
    '$MC_MPIRUN -np 4 "$0" attn --seq 1024 --heads 4 --head-dim 64 --backward --check --repeat 3 --warmup 1 \
     && tc -s qdisc show dev eth0 \
     && $MC_MPIRUN -np 4 "$0" attn --seq 1024 --heads 4 --head-dim 64 --backward --repeat 1 --warmup 0 --json >"$1" \
     && $MC_MPIRUN -np 4 "$0" calibrate --quick --seq 256 --repeat 2 --out "$2" >"$2.out" 2>&1 \
     && { $MC_MPIRUN -np 4 "$0" calibrate --quick --a2a shm --out "$2.shm" >"$2.shm.out" 2>&1; echo $? >"$2.shm.rc"; }' \
    "$uly" "$tmp/run.json" "$tmp/cal.json" >"$tmp/run.out" 2>"$tmp/run.err"
rc=$?
if [ "$rc" -eq 77 ]; then
    cat "$tmp/run.err"
    echo "SKIP: the mini-cluster cannot run here"
    exit 77
fi
cat "$tmp/run.err" "$tmp/run.out"
[ "$rc" -eq 0 ] || bad "attn on the mini-cluster exited $rc"
grep -q '^measured == expected on every rank: yes' "$tmp/run.out" || bad "byte counters differ from the plan"
[ "$(grep -cE '^(O|LSE|dQ|dK|dV) +yes ' "$tmp/run.out")" -eq 5 ] || bad "not bitwise equal to one process"
sent=$(sed -n 's/^ *Sent \([0-9]*\) bytes.*/\1/p' "$tmp/run.out" | head -n 1)
over=$(sed -n 's/.*overlimits \([0-9]*\).*/\1/p' "$tmp/run.out" | head -n 1)
echo "node0 eth0 tbf: sent ${sent:-?} bytes (plan: >= $want between nodes), overlimits ${over:-?}"
if [ -z "$sent" ] || [ "$sent" -lt "$want" ]; then
    bad "node0's shaped link sent ${sent:-nothing}, less than the $want bytes the plan sends to node1"
elif [ "$sent" -gt $((want + want / 4 + 262144)) ]; then
    bad "node0's shaped link sent $sent bytes, far more than the $want planned (other traffic?)"
fi
if [ -z "$over" ] || [ "$over" -eq 0 ]; then bad "the 100mbit shaper never throttled (overlimits ${over:-?})"; fi
# the bytes of the 2-node run against the simulator's for the same job (2
# GPUs per node, as the hostfile): sim/tests/data/cpu-2x2.json
"$top_builddir/ulysses-sim" attn --platform "$top_srcdir/sim/tests/data/cpu-2x2.json" --compare "$tmp/run.json" \
    >"$tmp/cmp.out" 2>&1 || { cat "$tmp/cmp.out"; bad "ulysses-sim attn --compare failed on the 2-node run"; }
if grep -q 'all-to-alls: run == simulator' "$tmp/cmp.out"; then
    grep 'all-to-alls: run == simulator' "$tmp/cmp.out"
else
    cat "$tmp/cmp.out"; bad "the bytes of the 2-node run differ from the simulator's"
fi
# the calibrated platform of the 2 x 2 mini-cluster
cat "$tmp/cal.json.out" 2>/dev/null
nic=$(sed -n 's/^ *"nic_bw_Gbps": \([0-9.e+-]*\),*$/\1/p' "$tmp/cal.json" 2>/dev/null | head -n 1)
if [ -z "$nic" ]; then
    bad "calibrate on the mini-cluster wrote no inter_node.nic_bw_Gbps"
else
    echo "calibrated inter-node link: $nic Gbit/s per direction (shaped: 0.1)"
    awk -v x="$nic" 'BEGIN { exit !(x >= 0.07 && x <= 0.13) }' ||
        bad "calibrated link $nic Gbit/s, not the shaped 0.1 Gbit/s within 30 %"
fi
grep -q '"gpus_per_node": 2,' "$tmp/cal.json" 2>/dev/null && grep -q '"max_nodes": 2,' "$tmp/cal.json" ||
    bad "the calibrated platform is not 2 nodes x 2 GPUs"
# a one-node all-to-all mode is refused across nodes, before measuring
[ "$(cat "$tmp/cal.json.shm.rc" 2>/dev/null)" = 2 ] && grep -q 'needs every rank on one node' "$tmp/cal.json.shm.out" ||
    { bad "calibrate --a2a shm on 2 nodes: want exit 2 naming the one-node rule"; cat "$tmp/cal.json.shm.out" 2>/dev/null; }
check_gone "$tmp/run.err" "after success"

# ---------------------------------------------------------------- 2. failures
sh "$mc" --nodes 2 --ppn 1 --rate 1gbit --timeout 60 -- "$uly" attn --seq 0 >"$tmp/bad.out" 2>"$tmp/bad.err"
rc=$?
[ "$rc" -eq 2 ] || { cat "$tmp/bad.err"; bad "a job with bad input: exit $rc, expected its 2 passed through"; }
check_gone "$tmp/bad.err" "after a failing job"

marker="61.$$"
sh "$mc" --nodes 2 --ppn 1 --rate 1gbit --timeout 3 -- sleep "$marker" >"$tmp/hang.out" 2>"$tmp/hang.err"
rc=$?
[ "$rc" -eq 124 ] || { cat "$tmp/hang.err"; bad "a job killed by --timeout: exit $rc, expected 124"; }
check_gone "$tmp/hang.err" "after a timeout"
sleep 0.5
if pgrep -f "sleep $marker" >/dev/null 2>&1; then
    bad "processes of the timed-out job survived: $(pgrep -f "sleep $marker" | tr '\n' ' ')"
fi

# ---------------------------------------------------------------- 3. options
for args in "--nodes 0" "--rate fast" "--delay soon" "--bogus"; do
    # shellcheck disable=SC2086
    sh "$mc" $args -- true >/dev/null 2>"$tmp/opt.err"
    rc=$?
    [ "$rc" -eq 2 ] || bad "minicluster.sh $args: exit $rc, expected 2"
    grep -q "minicluster.sh: " "$tmp/opt.err" || bad "minicluster.sh $args: no message"
done

[ "$fail" -eq 0 ] && echo "PASS: mini-cluster"
exit "$fail"
