#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# minicluster.sh -- a K-node cluster on one machine: network namespaces joined
# by a bridge, each node's link shaped with tc, Open MPI across them.
#
#   minicluster.sh [options] -- PROGRAM [ARGS...]
#       mpirun -np K*R PROGRAM ARGS... with R ranks on each of the K nodes
#   minicluster.sh [options] --exec -- COMMAND [ARGS...]
#       run COMMAND inside node0 with $MC_MPIRUN set to the mpirun command
#       prefix (append -np N PROGRAM...), for scripts that run several jobs
#       on one cluster
#
# options:
#   --nodes K        nodes, 1..64 (default 2)
#   --ppn R          ranks per node (default 2)
#   --rate RATE      each node's link rate in both directions, tc syntax
#                    (100mbit, 1gbit; default 1gbit; "none": unshaped)
#   --delay D        one-way latency added between nodes (tc netem: 500us,
#                    2ms; default none)
#   --timeout S      kill the job after S seconds (default 300)
#   --quiet          do not print the cluster layout and the mpirun line
#
# Layout (all of it in namespaces this script creates; nothing is attached to
# the root namespace or any outside interface):
#   PREFIX-br      a bridge br0 with ports p0..p(K-1); no address
#   PREFIX-nodeI   eth0 = 198.18.0.(I+1)/24 (RFC 2544 benchmarking range), the
#                  other end of port pI; lo; no default route
# Shaping: a tbf qdisc of RATE on eth0 (node -> bridge) and on pI (bridge ->
# node), so each node has one RATE link per direction, shared by its ranks;
# with --delay, a netem qdisc on eth0 adds D.
#
# Launch: mpirun runs inside node0 (hostname node0 in its own UTS namespace);
# the hostfile names node0..node(K-1); plm_rsh_agent is mc-agent.sh, which
# enters the node's namespace instead of ssh.  The daemons reach mpirun over
# TCP on 198.18.0.0/15 (oob_tcp_if_include), ranks on different nodes talk
# over btl tcp (btl_tcp_if_include; eager up to 4 MiB), ranks on one node
# over shared memory (btl vader).
#
# Teardown on every exit path (normal, error, signal): every process left in
# the namespaces is killed, the namespaces are deleted (their veth pairs and
# the bridge go with them).
#
# Exit status: that of the job; 2 bad options; 77 when this machine cannot
# run it (not root, no network namespaces, no tc/tbf, no mpirun), with the
# reason on stderr.
set -u

here=$(cd "$(dirname "$0")" && pwd)
nodes=2 ppn=2 rate=1gbit delay="" timeout_s=300 quiet=0 mode="run"

die() { echo "minicluster.sh: $*" >&2; exit 2; }
skip() { echo "minicluster.sh: SKIP: $*" >&2; exit 77; }

while [ $# -gt 0 ]; do
    case "$1" in
        --nodes) [ $# -ge 2 ] || die "--nodes needs a value"; nodes=$2; shift 2 ;;
        --ppn) [ $# -ge 2 ] || die "--ppn needs a value"; ppn=$2; shift 2 ;;
        --rate) [ $# -ge 2 ] || die "--rate needs a value"; rate=$2; shift 2 ;;
        --delay) [ $# -ge 2 ] || die "--delay needs a value"; delay=$2; shift 2 ;;
        --timeout) [ $# -ge 2 ] || die "--timeout needs a value"; timeout_s=$2; shift 2 ;;
        --quiet) quiet=1; shift ;;
        --exec) mode="exec"; shift ;;
        --) shift; break ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
done
[ $# -ge 1 ] || die "nothing to run: give -- PROGRAM [ARGS...]"
case "$nodes" in ''|*[!0-9]*) die "--nodes '$nodes': not a number" ;; esac
case "$ppn" in ''|*[!0-9]*) die "--ppn '$ppn': not a number" ;; esac
case "$timeout_s" in ''|*[!0-9]*) die "--timeout '$timeout_s': not a number of seconds" ;; esac
if [ "$nodes" -lt 1 ] || [ "$nodes" -gt 64 ]; then die "--nodes $nodes: must be 1..64"; fi
if [ "$ppn" -lt 1 ] || [ "$ppn" -gt 256 ]; then die "--ppn $ppn: must be 1..256"; fi
if [ "$rate" != none ]; then
    echo "$rate" | grep -Eq '^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit)$' ||
        die "--rate '$rate': expected a number with bit, kbit, mbit or gbit (e.g. 100mbit), or none"
fi
if [ -n "$delay" ]; then
    echo "$delay" | grep -Eq '^[0-9]+(\.[0-9]+)?(us|ms)$' || die "--delay '$delay': expected e.g. 500us or 2ms"
fi

# ---------------------------------------------------------------- can we?
[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces and tc)"
for t in ip tc unshare timeout mpirun; do
    command -v "$t" >/dev/null 2>&1 || skip "'$t' not found (Debian: iproute2, util-linux, coreutils, openmpi-bin)"
done

prefix="uly$$"
ns_all=""
cleanup() {
    trap - EXIT INT TERM HUP
    for ns in $ns_all; do
        pids=$(ip netns pids "$ns" 2>/dev/null)
        # shellcheck disable=SC2086 # one pid per word
        [ -n "$pids" ] && kill -TERM $pids 2>/dev/null
    done
    for ns in $ns_all; do
        for i in 1 2 3 4 5 6 7 8 9 10; do
            [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break
            sleep 0.2
        done
        pids=$(ip netns pids "$ns" 2>/dev/null)
        # shellcheck disable=SC2086 # one pid per word
        [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
        ip netns del "$ns" 2>/dev/null
    done
    rm -rf "$workdir"
    left=$(ip netns list 2>/dev/null | grep -c "^$prefix-") || true
    if [ "$left" -ne 0 ]; then
        echo "minicluster.sh: teardown left $left namespace(s) named $prefix-*" >&2
        return 1
    fi
    [ "$quiet" -eq 1 ] || echo "minicluster: torn down ($prefix: namespaces, links and processes removed)" >&2
}
workdir=$(mktemp -d "${TMPDIR:-/tmp}/minicluster.XXXXXX") || exit 1
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM
trap 'cleanup; exit 129' HUP
# shellcheck disable=SC2154 # st is assigned inside the trap
trap 'st=$?; cleanup || st=1; exit $st' EXIT

mkns() {
    ip netns add "$1" 2>"$workdir/err" || { cat "$workdir/err" >&2; skip "cannot create network namespaces"; }
    ns_all="$ns_all $1"
    ip -n "$1" link set lo up
}

# bits/s of a tc rate, for the token bucket size
rate_bps() {
    echo "$1" | awk '{ n = $0 + 0; u = $0; sub(/^[0-9.]+/, "", u);
        m = (u == "kbit") ? 1e3 : (u == "mbit") ? 1e6 : (u == "gbit") ? 1e9 : 1; printf "%.0f\n", n * m }'
}

# shape DEVICE in NAMESPACE: tbf of $rate (bucket: 1 ms of traffic, >= 2 MTU);
# netem delay first on node egress when asked
shape() {
    ns=$1 dev=$2 with_delay=$3
    parent="root"
    if [ -n "$delay" ] && [ "$with_delay" -eq 1 ]; then
        ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: netem delay "$delay" 2>"$workdir/err" || {
            cat "$workdir/err" >&2
            skip "tc netem is not available in this kernel (needed by --delay)"
        }
        parent="parent 1:1"
    fi
    [ "$rate" = none ] && return 0
    bps=$(rate_bps "$rate")
    burst=$(( bps / 8 / 1000 ))
    [ "$burst" -ge 3100 ] || burst=3100
    # shellcheck disable=SC2086
    ip netns exec "$ns" tc qdisc add dev "$dev" $parent handle 10: tbf rate "$rate" burst "$burst" \
        latency 200ms 2>"$workdir/err" || { cat "$workdir/err" >&2; skip "tc tbf is not available"; }
}

# ---------------------------------------------------------------- build
br="$prefix-br"
mkns "$br"
ip -n "$br" link add br0 type bridge || skip "cannot create a bridge in a namespace"
ip -n "$br" link set br0 up
: >"$workdir/hostfile"
i=0
while [ "$i" -lt "$nodes" ]; do
    ns="$prefix-node$i"
    mkns "$ns"
    ip -n "$br" link add "p$i" type veth peer name eth0 netns "$ns" || skip "cannot create veth pairs"
    ip -n "$br" link set "p$i" master br0
    ip -n "$br" link set "p$i" up
    ip -n "$ns" addr add "198.18.0.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    shape "$ns" eth0 1
    shape "$br" "p$i" 0
    echo "node$i slots=$ppn" >>"$workdir/hostfile"
    i=$((i + 1))
done

# ---------------------------------------------------------------- run
MC_PREFIX=$prefix
export MC_PREFIX
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
: "${OMP_NUM_THREADS:=1}" "${OPENBLAS_NUM_THREADS:=1}"
export OMP_NUM_THREADS OPENBLAS_NUM_THREADS
np=$((nodes * ppn))
# TCP messages up to 4 MiB (+ headers) go eagerly: with the default 64 KiB,
# a larger message waits for a rendezvous reply that the peer queues behind
# its own bulk data on the pair's one TCP connection, and an exchange in both
# directions runs at half the link rate (doc/minicluster.md).
eager=4195328
mpirun_cmd="mpirun --hostfile $workdir/hostfile --map-by slot --oversubscribe \
--mca plm_rsh_agent $here/mc-agent.sh --mca plm_rsh_no_tree_spawn 1 --mca routed direct \
--mca mpi_yield_when_idle 1 --mca oob_tcp_if_include 198.18.0.0/15 --mca btl self,vader,tcp --mca btl_tcp_if_include 198.18.0.0/15 \
--mca btl_tcp_eager_limit $eager --mca btl_tcp_rndv_eager_limit $eager --mca btl_tcp_max_send_size $eager \
-x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS"
if [ "$quiet" -eq 0 ]; then
    {
        echo "minicluster: $nodes node(s) x $ppn rank(s), link $rate per direction per node${delay:+, +$delay one way}"
        echo "  namespaces: $ns_all"
        i=0
        while [ "$i" -lt "$nodes" ]; do
            echo "  node$i: $(ip -n "$prefix-node$i" -4 -o addr show dev eth0 | awk '{print $4}')," \
                "$(ip netns exec "$prefix-node$i" tc qdisc show dev eth0 | head -n 1)"
            i=$((i + 1))
        done
        echo "  hostfile: $(tr '\n' ';' <"$workdir/hostfile")"
    } >&2
fi
if [ "$mode" = exec ]; then
    MC_MPIRUN=$mpirun_cmd MC_NODES=$nodes MC_PPN=$ppn MC_HOSTFILE=$workdir/hostfile MC_RATE=$rate
    export MC_MPIRUN MC_NODES MC_PPN MC_HOSTFILE MC_RATE
    [ "$quiet" -eq 1 ] || echo "  exec in node0: $*" >&2
    timeout "$timeout_s" ip netns exec "$prefix-node0" unshare --uts \
        sh -c 'hostname node0; exec "$@"' minicluster "$@"
else
    [ "$quiet" -eq 1 ] || echo "  $mpirun_cmd -np $np $*" >&2
    # shellcheck disable=SC2086
    timeout "$timeout_s" ip netns exec "$prefix-node0" unshare --uts \
        sh -c 'hostname node0; exec "$@"' minicluster $mpirun_cmd -np "$np" "$@"
fi
