#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# docs_balance.sh -- measured == simulated: the attention work each rank of
# `ulysses attn` with packed documents evaluates (its "pairs per rank",
# counted from the kernels' own log-sum-exp in a forward with q = k = 0) is
# the work `ulysses-sim docs` prices for the balancer with that layout:
#   --method ring    = contiguous   (contiguous shards)
#   --method zigzag  = zigzag       (2P chunks, rank r: r and 2P-1-r)
#   --method ulysses = ulysses      (every rank: its heads over all tokens)
# on several document sets (uneven lengths, a 6-head model whose heads do not
# split evenly over 4 ranks) and on 2, 3 and 4 ranks, through --doc-lens and
# through --docs offsets (.npy).  Prints the table it compares.
set -u
: "${top_builddir:=.}" "${top_srcdir:=.}"
: "${MPIRUN:=mpirun}"
U="$top_builddir/ulysses"
S="$top_builddir/ulysses-sim"
T="$top_builddir/tests/npytool"
export ULYSSES_SIM_PRESETS="$top_srcdir/sim/presets"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
"$U" attn --help > /dev/null 2>&1 || { echo "docs_balance: no ulysses attn in this build"; exit 77; }
command -v "${MPIRUN%% *}" > /dev/null 2>&1 || { echo "docs_balance: no $MPIRUN"; exit 77; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fails=0

# a model of 6 heads of dimension 2 (the attention shape ulysses attn runs)
cat > "$W/h6.json" <<'JSON'
{ "name": "heads-6", "description": "6 heads of 2 for docs_balance.sh", "layers": 2, "hidden": 12,
  "heads": 6, "ffn_hidden": 48, "vocab": 64, "mlp": "gelu", "seq_tokens": 16, "micro_batch": 1,
  "global_batch": 1 }
JSON
# documents 5, 3, 11 as offsets 0 5 8 19 (--docs)
"$T" i64 "$W/d5311.npy" 0 0 5 8 19 || { echo "FAIL: npytool i64"; exit 1; }

printf '%-12s %-3s %-8s %-20s %-28s %-28s %s\n' "documents" "P" "method" "balancer" "measured" "simulated" "equal"
# documents  P  model  heads  how  (--doc-lens or a .npy)
while read -r lens P model H how; do
    N=$(echo "$lens" | tr ',' '\n' | awk '{ s += $1 } END { print s }')
    m="$model"; [ "$model" = h6 ] && m="$W/h6.json"
    "$S" docs --cp "$P" --doc-lens "$lens" --model "$m" --json > "$W/sim.json" || { echo "FAIL: ulysses-sim docs $lens"; fails=$((fails + 1)); continue; }
    for pair in ring:contiguous zigzag:zigzag ulysses:ulysses; do
        meth=${pair%%:*} bal=${pair#*:}
        if [ "$how" = lens ]; then docs="--doc-lens $lens"; else docs="--docs $W/$how"; fi
        timeout 60 $MPIRUN --oversubscribe -np "$P" "$U" attn --method "$meth" --seq "$N" --heads "$H" --head-dim 2 \
            $docs --causal --repeat 1 --warmup 0 --json < /dev/null > "$W/run.json" 2> "$W/err" ||
            { echo "FAIL: ulysses attn --method $meth $lens on $P ranks"; cat "$W/err"; fails=$((fails + 1)); continue; }
        line=$(python3 - "$W/run.json" "$W/sim.json" "$bal" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
sim = {b['name']: b for b in json.load(open(sys.argv[2]))['balancers']}
meas, want = run.get('pairs_per_rank'), sim[sys.argv[3]]['head_pairs']
ok = meas == want and run.get('pairs_exact') is True and run['docs'] >= 1
print('%s %s %s' % (' '.join(map(str, meas or [])), ' '.join(map(str, want)), 'yes' if ok else 'NO'))
PY
)
        meas=$(echo "$line" | awk -v p="$P" '{ s = ""; for (i = 1; i <= p; i++) s = s (i > 1 ? "/" : "") $i; print s }')
        simv=$(echo "$line" | awk -v p="$P" '{ s = ""; for (i = p + 1; i <= 2 * p; i++) s = s (i > p + 1 ? "/" : "") $i; print s }')
        ok=$(echo "$line" | awk '{ print $NF }')
        printf '%-12s %-3s %-8s %-20s %-28s %-28s %s\n' "$lens" "$P" "$meth" "$bal" "$meas" "$simv" "$ok"
        [ "$ok" = yes ] || fails=$((fails + 1))
    done
done <<EOF
4,12 2 gpt-1.2b 16 lens
5,3,11 4 gpt-1.2b 16 d5311.npy
7,1,9,2,13 4 h6 6 lens
3,10,2,6 3 h6 6 lens
EOF
[ $fails -eq 0 ] && echo "docs_balance: measured == simulated in every row" || echo "docs_balance: $fails FAILED"
exit $((fails > 0))
