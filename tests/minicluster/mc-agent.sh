#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# mc-agent.sh -- Open MPI launch agent of the mini-cluster (plm_rsh_agent).
#
# mpirun calls its rsh agent as `AGENT [options] HOST COMMAND...` to start an
# orted daemon on HOST.  Instead of ssh, this agent enters the network
# namespace of HOST (MC_PREFIX-HOST, created by minicluster.sh) and gives the
# daemon its own UTS namespace with hostname HOST, so that Open MPI sees K
# distinct hosts (separate session directories, node-local shared memory only
# inside a namespace).  The environment (PATH, LD_LIBRARY_PATH, OMPI_*) is
# inherited, as with a shared home directory on a real cluster.
set -eu
: "${MC_PREFIX:?mc-agent.sh: MC_PREFIX is not set (run through minicluster.sh)}"
while [ $# -gt 0 ]; do
    case "$1" in
        -*) shift ;;          # ssh-style options Open MPI may add
        *) break ;;
    esac
done
[ $# -ge 2 ] || { echo "mc-agent.sh: usage: mc-agent.sh HOST COMMAND..." >&2; exit 2; }
host=$1
shift
case "$host" in
    node[0-9]*) ;;
    *) echo "mc-agent.sh: unknown host '$host' (expected node0, node1, ...)" >&2; exit 2 ;;
esac
ns="$MC_PREFIX-$host"
[ -e "/var/run/netns/$ns" ] || { echo "mc-agent.sh: no namespace $ns for host $host" >&2; exit 2; }
# The command arrives as words of a remote shell command line: run it with sh.
# shellcheck disable=SC2016 # expanded by the inner sh
exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$1"; shift; exec sh -c "$*"' mc-agent "$host" "$@"
