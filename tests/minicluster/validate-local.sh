#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# validate-local.sh -- `make validate-local`: ulysses-sim, calibrated on this
# machine, against our own MPI runs of `ulysses attn` (doc/validation.md).
#
#   validate-local.sh [--rounds R] [--doc FILE] [--only LABEL-SUBSTRING] [--keep DIR]
#   validate-local.sh --insert SECTION.md --doc FILE
#
# Configurations: 1 node x 2 ranks, 1 node x 4 ranks, 2 nodes x 1 rank and
# 2 nodes x 2 ranks, each at 1 Gbit/s and at 100 Mbit/s (mini-cluster,
# tests/minicluster/minicluster.sh; skipped with a message where it cannot
# run).  1 x 2 and 2 x 1 have at most one rank per core of this 2-core
# machine; 1 x 4 and 2 x 2 put 4 ranks on 2 cores.  For each, R rounds (default
# 3) of: `ulysses calibrate` on the configuration's ranks and nodes, then
# `ulysses attn --backward --json` on the same ranks, then
# `ulysses-sim attn --compare` with that round's platform file.  The table
# reports, per phase, the median over rounds of the measured and of the
# predicted times and the error of the medians; every round's bytes must
# equal the simulator's (exit 1 otherwise).  --doc FILE replaces the section
# between the "BEGIN local-cpu-validation" and "END local-cpu-validation"
# markers of FILE with the table, the job, the machine and its load, and
# tests/minicluster/validate-local-notes.md.  --keep DIR keeps every round's
# platform file, run and comparison, and the section (section.md).
# --insert puts a section kept earlier into FILE without running anything.
set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
U="$top_builddir/ulysses"
S="$top_builddir/ulysses-sim"
MC="$top_srcdir/tests/minicluster/minicluster.sh"
rounds=3 doc="" only="" keep="" insert=""
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds=$2; shift 2 ;;
        --doc) doc=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        --keep) keep=$2; shift 2 ;;
        --insert) insert=$2; shift 2 ;;
        *) echo "validate-local.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
case "$rounds" in ''|*[!0-9]*|0) echo "validate-local.sh: --rounds must be a positive integer" >&2; exit 2 ;; esac
if [ ! -x "$U" ] || [ ! -x "$S" ]; then
    echo "validate-local.sh: build ulysses and ulysses-sim first" >&2
    exit 2
fi
if [ -n "$doc" ] && ! grep -q '^<!-- BEGIN local-cpu-validation' "$doc" 2>/dev/null; then
    echo "validate-local.sh: $doc has no '<!-- BEGIN local-cpu-validation' marker" >&2
    exit 2
fi
# put_section SECTION DOC: replace the marked section of DOC
put_section() {
    awk -v sec="$1" '
        /^<!-- BEGIN local-cpu-validation/ { print; while ((getline l < sec) > 0) print l; skip = 1; next }
        /^<!-- END local-cpu-validation/ { skip = 0 }
        !skip { print }' "$2" >"$2.new.$$" && cat "$2.new.$$" >"$2" && rm -f "$2.new.$$"
    echo "updated the local-cpu-validation section of $2" >&2
}
if [ -n "$insert" ]; then
    if [ -z "$doc" ] || [ ! -s "$insert" ]; then
        echo "validate-local.sh: --insert needs a section file and --doc" >&2
        exit 2
    fi
    put_section "$insert" "$doc"
    exit 0
fi
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
W=$(mktemp -d "${TMPDIR:-/tmp}/validate-local.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT

# Everything inside the loop reads /dev/null: mpirun would otherwise eat the
# configuration lines from its standard input.
# The job: non-causal (the kernels' causal rate depends on the diagonal
# blocks' share, a second shape-dependence), f32, 5 timed repetitions after
# 15 untimed ones: the all-to-alls' default mode (auto) spends the first
# calls of each kind trying its modes (ULY_A2A_AUTO_SAMPLES = 3 calls each:
# 3 modes across nodes, 5 with shm and cma on one node), and `ulysses
# calibrate` times the mode it then keeps.
JOB="--seq 2048 --heads 8 --head-dim 64 --backward --repeat 5 --warmup 15 --json"
CAL="--seq 2048 --head-dim 64 --quick"

configs() {
    cat <<'EOF'
1 node x 2 ranks|1|2|-
1 node x 4 ranks|1|4|-
2 nodes x 1 rank, 1 Gbit/s|2|1|1gbit
2 nodes x 1 rank, 100 Mbit/s|2|1|100mbit
2 nodes x 2 ranks, 1 Gbit/s|2|2|1gbit
2 nodes x 2 ranks, 100 Mbit/s|2|2|100mbit
EOF
}

: >"$W/rows.jsonl"
: >"$W/skipped"
: >"$W/loads"
start=$(date +%s)
load0=$(cut -d' ' -f1-3 /proc/loadavg)
bytes_bad=0
configs | while IFS='|' read -r label nodes ppn rate; do
    if [ -n "$only" ]; then
        case "$label" in *"$only"*) ;; *) continue ;; esac
    fi
    np=$((nodes * ppn))
    r=1
    while [ "$r" -le "$rounds" ]; do
        cal="$W/cal.json" run="$W/run.json"
        rm -f "$cal" "$run"
        l1=$(cut -d' ' -f1 /proc/loadavg)
        echo "== $label, round $r/$rounds (load $l1)" >&2
        if [ "$nodes" -eq 1 ]; then
            # shellcheck disable=SC2086
            timeout 900 mpirun --oversubscribe -np "$np" "$U" calibrate $CAL --out "$cal" \
                </dev/null >"$W/cal.out" 2>"$W/cal.err" &&
                timeout 900 mpirun --oversubscribe -np "$np" "$U" attn $JOB </dev/null >"$run" 2>"$W/run.err"
            rc=$?
        else
            sh "$MC" --quiet --nodes "$nodes" --ppn "$ppn" --rate "$rate" --timeout 1800 --exec -- sh -c \
                '$MC_MPIRUN -np "$1" "$2" calibrate $3 --out "$4" >"$6/cal.out" 2>"$6/cal.err" &&
                 $MC_MPIRUN -np "$1" "$2" attn $5 >"$6/run.json" 2>"$6/run.err"' \
                mc "$np" "$U" "$CAL" "$cal" "$JOB" "$W" </dev/null
            rc=$?
        fi
        if [ "$rc" -eq 77 ]; then
            echo "$label: skipped (the mini-cluster cannot run here: not root, or no namespaces/tc)" >>"$W/skipped"
            break
        fi
        if [ "$rc" -ne 0 ]; then
            echo "validate-local.sh: $label round $r failed (exit $rc):" >&2
            cat "$W/cal.err" "$W/run.err" >&2 2>/dev/null
            exit 1
        fi
        grep -h "calibrated" "$W/cal.out" >&2
        if [ -n "$keep" ]; then
            mkdir -p "$keep" && tag=$(echo "$label-$r" | tr -c 'A-Za-z0-9\n' '-')
            cp "$cal" "$keep/platform-$tag.json" && cp "$run" "$keep/run-$tag.json"
        fi
        echo "$label|$l1 $(cut -d' ' -f1 /proc/loadavg)" >>"$W/loads"
        "$S" attn --platform "$cal" --compare "$run" </dev/null >&2
        "$S" attn --platform "$cal" --compare "$run" --format json --label "$label" </dev/null >>"$W/rows.jsonl" ||
            echo "bytes differ: $label round $r" >>"$W/bytes_bad"
        r=$((r + 1))
    done
done || exit 1
[ -s "$W/bytes_bad" ] && { cat "$W/bytes_bad" >&2; bytes_bad=1; }
end=$(date +%s)
load1=$(cut -d' ' -f1-3 /proc/loadavg)

# medians over rounds per (label, row): measured, predicted, error of the medians
awk '
function median(s,   n, a, i, j, t) {
    n = split(s, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
    match($0, /"label": "[^"]*"/); label = substr($0, RSTART + 10, RLENGTH - 11)
    if (!(label in seen)) { seen[label] = 1; order[++nl] = label }
    rest = $0
    while (match(rest, /\{"name": "[^"]*", "measured_ms": [-0-9.e+]*, "predicted_ms": [-0-9.e+]*/)) {
        item = substr(rest, RSTART, RLENGTH); rest = substr(rest, RSTART + RLENGTH)
        match(item, /"name": "[^"]*"/); name = substr(item, RSTART + 9, RLENGTH - 10)
        match(item, /"measured_ms": [-0-9.e+]*/); m = substr(item, RSTART + 15, RLENGTH - 15)
        match(item, /"predicted_ms": [-0-9.e+]*/); p = substr(item, RSTART + 16, RLENGTH - 16)
        k = label SUBSEP name
        if (!(k in meas)) { rows[label, ++nr[label]] = name }
        meas[k] = meas[k] " " m; pred[k] = pred[k] " " p; cnt[k]++
    }
}
END {
    print "| configuration | phase | measured [ms] | predicted [ms] | error | rounds |"
    print "|---|---|---|---|---|---|"
    for (i = 1; i <= nl; i++) {
        l = order[i]
        for (j = 1; j <= nr[l]; j++) {
            n = rows[l, j]; k = l SUBSEP n
            mm = median(meas[k]); pp = median(pred[k])
            printf "| %s | %s | %.1f | %.1f | %+.1f %% |%s |\n", l, n, mm, pp, 100 * (pp - mm) / mm, meas[k]
        }
    }
}' "$W/rows.jsonl" >"$W/table.md"

{
    echo "Job: \`ulysses attn $JOB\` (B = 1, non-causal, f32, 1 thread per rank); platform from"
    echo "\`ulysses calibrate $CAL\` on the same ranks and nodes just before each round;"
    echo "prediction: \`ulysses-sim attn --platform <that file> --compare <the run>\`."
    echo "Measured phases: medians over the 5 repetitions of the critical path (all-to-alls: the"
    echo "last rank to arrive, attention: the slowest rank); forward and iteration: the slowest rank's"
    echo "sum per repetition.  Each row gives the median over $rounds round(s) (last column: every round's"
    echo "measurement).  The bytes of every run equal the simulator's: $([ "$bytes_bad" -eq 0 ] && echo yes || echo NO)."
    echo "Machine: $(getconf _NPROCESSORS_ONLN) CPUs shared with other users, load average $load0 before and $load1 after;"
    echo "$(date -u +%Y-%m-%d), $((end - start)) s."
    echo
    cat "$W/table.md"
    echo
    echo "Load average (1 min) at the start and end of each round:"
    awk -F'|' '{ if (!($1 in l)) o[++n] = $1; l[$1] = l[$1] (l[$1] == "" ? "" : ", ") $2 }
        END { for (i = 1; i <= n; i++) printf "- %s: %s\n", o[i], l[o[i]] }' "$W/loads"
    if [ -s "$W/skipped" ]; then echo; sed 's/^/- /' "$W/skipped"; fi
    cat "$top_srcdir/tests/minicluster/validate-local-notes.md"
} >"$W/section.md"
[ -n "$keep" ] && cp "$W/section.md" "$keep/section.md"
cat "$W/section.md"

[ -n "$doc" ] && put_section "$W/section.md" "$doc"
exit "$bytes_bad"
