#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# validate.sh -- runs ulysses-sim on every published reference point and
# prints paper value, prediction and error per regime.
#
#   validate.sh [--check] [--doc OLD_DOC]
#     (default)  the validation table (markdown) on stdout
#     --check    exit 1 if a row is outside its stated tolerance (the
#                regression test; prints the offending rows)
#     --doc F    the whole of doc/validation.md on stdout, keeping the
#                delimited local-cluster section of F (if it exists)
#
# Environment: ULYSSES_SIM (the binary, default ./ulysses-sim).
set -u
SIM=${ULYSSES_SIM:-./ulysses-sim}
mode=table
old_doc=
while [ $# -gt 0 ]; do
    case $1 in
    --check) mode=check ;;
    --doc) mode=doc; old_doc=${2:-}; shift ;;
    *) echo "validate.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
    shift
done
[ -x "$SIM" ] || { echo "validate.sh: $SIM not found (build first)" >&2; exit 2; }

# Every row: id|regime|quantity|paper value|tolerance %|fitted (yes/no)|source|command
# The command's CSV output gives the value: column "busbw_GBps" for coll,
# "time_us" for coll rows whose quantity is in [us],
# "iter_s" (x1000, ms) or "tflops_per_gpu" for runs (named in quantity),
# "ttft_s" for `infer` rows (quantity "time to first token"), "max_seq_tokens"
# for rows whose quantity names the "longest sequence" (and the limit that
# binds there, "max_seq_limit", goes to the table), "host_link_s_per_GB" for
# "offload copy time" rows.  A command "A // B" is a ratio row: the
# "tflops_per_gpu" of run A over that of run B (quantity "throughput ratio").
# A tolerance T/B is a target of T % that the row misses: the table says so,
# and the regression check holds it within B % (so a change that makes the
# miss worse fails), until the model reaches the target.
rows() {
cat <<'EOF'
N1|nccl-tests, DGX A100, 1 node|all-reduce busbw 8 GPUs, 4 GiB [GB/s]|232.54|10|yes: intra_node.efficiency|[nccl-tests#175]|coll --op all-reduce --gpus 8 --bytes 4G --platform dgx-a100-40g
N2|nccl-tests, DGX A100, 2 nodes|all-gather busbw 16 GPUs, 256 MiB [GB/s]; published value derived from per-NIC rates|192|10|no|[nccl-tests#175] 24 GB/s per HDR NIC x 8 rails|coll --op all-gather --gpus 16 --bytes 256M --platform dgx-a100-40g
N3|nccl-tests, DGX A100, 2 nodes|all-to-all busbw 16 GPUs, 256 MiB [GB/s]; published value derived from per-NIC rates|48|10|no|[nccl-tests#130] N/(N-1) x 24 GB/s per NIC|coll --op all-to-all --gpus 16 --bytes 256M --platform dgx-a100-40g
N4|nccl-tests, DGX H100, 1 node|all-gather (ring) busbw 8 GPUs, 1 GiB [GB/s]|370|10|no|[nccl-tests#212]|coll --op all-gather --gpus 8 --bytes 1G --platform dgx-h100
N5|nccl-tests, DGX H100, 1 node|all-reduce (NVLS) busbw 8 GPUs, 8 GiB [GB/s]|480|10|no|[nccl-tests#212], 476 in [nccl-tests#290]|coll --op all-reduce --gpus 8 --bytes 8G --platform dgx-h100
N6|nccl-tests, DGX H100, 2 nodes|all-gather busbw 16 GPUs, 1 GiB [GB/s]; published value derived from per-NIC rates|376|10|no|[nccl-tests#290] 46-48 GB/s per NDR NIC x 8 rails|coll --op all-gather --gpus 16 --bytes 1G --platform dgx-h100
L1|nccl-tests, 2 DGX A100 80GB nodes, one GPU each (HDR)|all-reduce time 8 B, 2 GPUs [us]|19.90|20|no|[nccl-tests#150]|coll --op all-reduce --gpus 2 --gpus-per-node 1 --bytes 8 --platform dgx-a100-80g
R1|NVIDIA, DGX A100 (8 HDR NICs)|all-reduce busbw 32 GPUs (4 nodes assumed), 4 GiB [GB/s]|192|10|no; node count chosen|[nccl#812]|coll --op all-reduce --gpus 32 --bytes 4G --platform dgx-a100-40g
D1|DeepSpeed-Ulysses Table 2, GPT-7B 128K|iteration time 64 GPUs [ms]|32432.13|5|yes: gpu.attention_efficiency; SP degree inferred (GPUs / 8 from the global batch of 8)|[Ulysses] Table 2|--method ulysses --gpus 64 --sp 8
D2|DeepSpeed-Ulysses Table 2, GPT-7B 128K|iteration time 128 GPUs [ms]|17052.51|15|no; SP degree inferred (GPUs / 8 from the global batch of 8)|[Ulysses] Table 2|--method ulysses --gpus 128 --sp 16
D3|DeepSpeed-Ulysses Table 2, GPT-7B 128K|iteration time 256 GPUs [ms]|9886.7|15|no; SP degree inferred (GPUs / 8 from the global batch of 8)|[Ulysses] Table 2|--method ulysses --gpus 256 --sp 32
U1|DeepSpeed-Ulysses 1.2B, 8K, short sequence|TFLOP/s per GPU, 8 GPUs|109|15|no; model shape and configuration chosen|[Ulysses] 1.2B figure|--model gpt-1.2b-64h --method ulysses --gpus 8 --sp 8 --seq 8K --global-batch 8
U2|DeepSpeed-Ulysses 1.2B, 8K, short sequence|TFLOP/s per GPU, 16 GPUs|107|15|no; model shape and configuration chosen|[Ulysses] 1.2B figure|--model gpt-1.2b-64h --method ulysses --gpus 16 --sp 8 --seq 8K --global-batch 16
U3|DeepSpeed-Ulysses 1.2B, 8K, short sequence|TFLOP/s per GPU, 32 GPUs|105|15|no; model shape and configuration chosen|[Ulysses] 1.2B figure|--model gpt-1.2b-64h --method ulysses --gpus 32 --sp 8 --seq 8K --global-batch 32
U4|DeepSpeed-Ulysses 1.2B, 8K, short sequence|TFLOP/s per GPU, 64 GPUs|99|15|no; model shape and configuration chosen|[Ulysses] 1.2B figure|--model gpt-1.2b-64h --method ulysses --gpus 64 --sp 8 --seq 8K --global-batch 64
U5|DeepSpeed-Ulysses 1.2B, long sequence|TFLOP/s per GPU, 128K, 64 GPUs|95|15|no; model shape and configuration chosen|[Ulysses] 1.2B figure|--model gpt-1.2b-64h --method ulysses --gpus 64 --sp 64 --seq 128K --global-batch 1
U6|DeepSpeed-Ulysses 1.2B, long sequence|TFLOP/s per GPU, 1M, 64 GPUs|95|15|no; model shape and configuration chosen|[Ulysses] 1.2B figure|--model gpt-1.2b-64h --method ulysses --gpus 64 --sp 64 --seq 1M --global-batch 1
M1|Meta CP inference, Llama 3 405B, 1M-token prefill|time to first token, CP 16 x TP 8, 128 GPUs [s]|77|15|no|[MetaCP] abstract; FP8 linear layers assumed|infer --model llama-3.1-405b --platform dgx-h100 --gpus 128 --tp 8 --prefill-cp 16 --prefill-method ring --prompt 1M --generate 1 --weights fp8
H1|DeepSpeed activation offload, 8x H200|offload copy time [s/GB]|0.108|5|yes: host.link_efficiency|[DS8255]|--model llama-3.1-8b --platform dgx-h200 --gpus 8 --method ulysses --seq 64K --offload activations
A1|ALST, Llama-3.1-8B, 1 H100|longest sequence, ZeRO-3 + optimizer and parameter offload, tiled MLP and loss, checkpoint offload [tokens]|500000|20/40|no|[ALST] abstract; [ALSTrecipes] sp1|--model llama-3.1-8b --platform dgx-h100 --gpus 1 --method ulysses --zero 3 --recompute full --tiled-loss --tiled-mlp auto --offload activations,optimizer,params --max-seq
A2|ALST, Llama-3.1-8B, 8 H100 (1 node)|longest sequence, Ulysses SP 8, ZeRO-3 + optimizer offload, tiled MLP and loss, checkpoint offload [tokens]|3700000|20/40|no|[ALST] abstract; [ALSTrecipes] sp8 (max_length 3.8M)|--model llama-3.1-8b --platform dgx-h100 --gpus 8 --sp 8 --method ulysses --zero 3 --recompute full --tiled-loss --tiled-mlp auto --offload activations,optimizer --max-seq
A3|ALST, Llama-3.1-8B, 32 H100 (4 nodes)|longest sequence (published: a lower bound, "over 15M"), Ulysses SP 32, as A2 [tokens]|15000000|20/35|no|[ALST] abstract; [ALSTrecipes] sp32 (max_length 15.5M)|--model llama-3.1-8b --platform dgx-h100 --gpus 32 --sp 32 --method ulysses --zero 3 --recompute full --tiled-loss --tiled-mlp auto --offload activations,optimizer --max-seq
B1|ALST ablation, 8 H100|longest sequence, no Ulysses (data parallel 8), ZeRO-3 + optimizer offload, tiled loss only [tokens]|160000|20|no|[ALSTrecipes] no-ulysses-yes-liger|--model llama-3.1-8b --platform dgx-h100 --gpus 8 --sp 1 --dp 8 --global-batch 8 --method ulysses --zero 3 --recompute full --tiled-loss --offload optimizer --max-seq
B2|ALST ablation, 8 H100|longest sequence, + Ulysses SP 8 [tokens]|1100000|20/40|no|[ALSTrecipes] no-mlp-no-act-offload|--model llama-3.1-8b --platform dgx-h100 --gpus 8 --sp 8 --method ulysses --zero 3 --recompute full --tiled-loss --offload optimizer --max-seq
B3|ALST ablation, 8 H100|longest sequence, + Ulysses SP 8 + tiled MLP [tokens]|1200000|20/50|no|[ALSTrecipes] yes-mlp (SDPA attention)|--model llama-3.1-8b --platform dgx-h100 --gpus 8 --sp 8 --method ulysses --zero 3 --recompute full --tiled-loss --tiled-mlp auto --offload optimizer --max-seq
B4|ALST ablation, 8 H100|longest sequence, + Ulysses SP 8 + checkpoint offload (no tiled MLP) [tokens]|2400000|20/40|no|[ALSTrecipes] yes-act-offload|--model llama-3.1-8b --platform dgx-h100 --gpus 8 --sp 8 --method ulysses --zero 3 --recompute full --tiled-loss --offload activations,optimizer --max-seq
T1|Megatron-LM Table 1, GPT 1.7B, A100 80GB|TFLOP/s per GPU, TP 1 x PP 1, 32 GPUs|137|15|no|[Megatron] Table 1; [MegatronSC21] run_table_1.sh|--model @V@/megatron-gpt-1.7b.json --platform dgx-a100-80g --method megatron-sp --tp 1 --gpus 32 --zero 0 --recompute full --attn-kernel unfused --attn-dropout
T2|Megatron-LM Table 1, GPT 3.6B, A100 80GB|TFLOP/s per GPU, TP 2 x PP 1, 64 GPUs|138|15|no|[Megatron] Table 1; [MegatronSC21] run_table_1.sh|--model @V@/megatron-gpt-3.6b.json --platform dgx-a100-80g --method megatron-sp --tp 2 --gpus 64 --zero 0 --recompute full --attn-kernel unfused --attn-dropout
T3|Megatron-LM Table 1, GPT 7.5B, A100 80GB|TFLOP/s per GPU, TP 4 x PP 1, 128 GPUs|142|15|no|[Megatron] Table 1; [MegatronSC21] run_table_1.sh|--model @V@/megatron-gpt-7.5b.json --platform dgx-a100-80g --method megatron-sp --tp 4 --gpus 128 --zero 0 --recompute full --attn-kernel unfused --attn-dropout
T4|Megatron-LM Table 1, GPT 18.4B, A100 80GB|TFLOP/s per GPU, TP 8 x PP 1, 256 GPUs|135|15|no|[Megatron] Table 1; [MegatronSC21] run_table_1.sh|--model @V@/megatron-gpt-18b.json --platform dgx-a100-80g --method megatron-sp --tp 8 --gpus 256 --zero 0 --recompute full --attn-kernel unfused --attn-dropout
T5|Megatron-LM Table 1, GPT 39.1B, A100 80GB|TFLOP/s per GPU, TP 8 x PP 2, 1F1B, 512 GPUs|138|15|no|[Megatron] Table 1; [MegatronSC21] run_table_1.sh|--model @V@/megatron-gpt-39b.json --platform dgx-a100-80g --method megatron-sp --tp 8 --pp 2 --gpus 512 --zero 0 --recompute full --attn-kernel unfused --attn-dropout
T6|Megatron-LM Table 1, GPT 76.1B, A100 80GB|TFLOP/s per GPU, TP 8 x PP 4, interleaved V 3, 1024 GPUs|140|15|no|[Megatron] Table 1; [MegatronSC21] run_table_1.sh (--num-layers-per-virtual-pipeline-stage: V 3)|--model @V@/megatron-gpt-76b.json --platform dgx-a100-80g --method megatron-sp --tp 8 --pp 4 --vpp 3 --gpus 1024 --zero 0 --recompute full --attn-kernel unfused --attn-dropout
T7|Megatron-LM Table 1, GPT 145.6B, A100 80GB|TFLOP/s per GPU, TP 8 x PP 8, interleaved V 2, 1536 GPUs|148|15|no|[Megatron] Table 1; [MegatronSC21] run_table_1.sh (--num-layers-per-virtual-pipeline-stage: V 2)|--model @V@/megatron-gpt-145b.json --platform dgx-a100-80g --method megatron-sp --tp 8 --pp 8 --vpp 2 --gpus 1536 --zero 0 --recompute full --attn-kernel unfused --attn-dropout
T8|Megatron-LM Table 1, GPT 310.1B, A100 80GB|TFLOP/s per GPU, TP 8 x PP 16, interleaved V 2, 1920 GPUs|155|15|no|[Megatron] Table 1; [MegatronSC21] run_table_1.sh (--num-layers-per-virtual-pipeline-stage: V 2)|--model @V@/megatron-gpt-310b.json --platform dgx-a100-80g --method megatron-sp --tp 8 --pp 16 --vpp 2 --gpus 1920 --zero 0 --recompute full --attn-kernel unfused --attn-dropout
T9|Megatron-LM Table 1, GPT 529.6B, A100 80GB|TFLOP/s per GPU, TP 8 x PP 35, interleaved V 3, 2520 GPUs|163|15|no|[Megatron] Table 1; [MegatronSC21] run_table_1.sh (--num-layers-per-virtual-pipeline-stage: V 3)|--model @V@/megatron-gpt-530b.json --platform dgx-a100-80g --method megatron-sp --tp 8 --pp 35 --vpp 3 --gpus 2520 --zero 0 --recompute full --attn-kernel unfused --attn-dropout
T10|Megatron-LM Table 1, GPT 1008B, A100 80GB|TFLOP/s per GPU, TP 8 x PP 64, 1F1B, 3072 GPUs|163|15|no|[Megatron] Table 1; [MegatronSC21] run_table_1.sh|--model @V@/megatron-gpt-1t.json --platform dgx-a100-80g --method megatron-sp --tp 8 --pp 64 --gpus 3072 --zero 0 --recompute full --attn-kernel unfused --attn-dropout
I1|Megatron-LM Figure 12, GPT-3 175B, A100 80GB|throughput ratio, interleaved (V 4) / 1F1B, TP 8 x PP 12, 96 GPUs, global batch 12|1.10|10/45|no|[Megatron] abstract ("10+%"), Sec. 1 ("as much as 10%"); Figure 12 gives no numbers in the text; [MegatronSC21] run_figure_12.sh|--model @V@/megatron-gpt-175b.json --platform dgx-a100-80g --method megatron-sp --tp 8 --pp 12 --vpp 4 --gpus 96 --zero 0 --recompute full --attn-kernel unfused --attn-dropout --global-batch 12 // --model @V@/megatron-gpt-175b.json --platform dgx-a100-80g --method megatron-sp --tp 8 --pp 12 --gpus 96 --zero 0 --recompute full --attn-kernel unfused --attn-dropout --global-batch 12
EOF
}

# value OUT_CSV QUANTITY -> the simulated value
value() {
    awk -F, -v q="$2" '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        NR == 2 {
            if (q ~ /longest sequence/) print $col["max_seq_tokens"]
            else if (q ~ /offload copy time/) print $col["host_link_s_per_GB"]
            else if (q ~ /busbw/) print $col["busbw_GBps"]
            else if (q ~ /time to first token/) printf "%.2f\n", $col["ttft_s"]
            else if (q ~ /\[us\]/) printf "%.2f\n", $col["time_us"]
            else if (q ~ /\[ms\]/) printf "%.2f\n", $col["iter_s"] * 1000
            else print $col["tflops_per_gpu"]
        }' "$1"
}

tmp=$(mktemp) || exit 1
trap 'rm -f "$tmp" "$tmp.rows"' EXIT
fail=0
# @V@ in a command: the model files of sim/validation (shown as that path)
vdir=$(dirname "$0")/validation
rows | while IFS='|' read -r id regime quantity paper tol fitted source cmd; do
    run=$(printf '%s' "$cmd" | sed "s|@V@|$vdir|g")
    cmd=$(printf '%s' "$cmd" | sed "s|@V@|sim/validation|g")
    case $run in
    *' // '*)   # a ratio row: TFLOP/s per GPU of the first run over the second's
        runa=${run%% // *}; runb=${run#* // }
        # shellcheck disable=SC2086
        if ! "$SIM" $runb --format csv > "$tmp" 2>&1; then
            echo "$id|$regime|$quantity|$paper|ERROR|ERROR|$tol|$fitted|$source|$cmd"
            continue
        fi
        den=$(value "$tmp" "$quantity")
        run=$runa ;;
    *) den= ;;
    esac
    # shellcheck disable=SC2086
    if ! "$SIM" $run --format csv > "$tmp" 2>&1; then
        echo "$id|$regime|$quantity|$paper|ERROR|ERROR|$tol|$fitted|$source|$cmd"
        continue
    fi
    pred=$(value "$tmp" "$quantity")
    [ -n "$den" ] && pred=$(awk -v a="$pred" -v b="$den" 'BEGIN { printf "%.3f\n", a / b }')
    err=$(awk -v p="$pred" -v r="$paper" 'BEGIN { printf "%+.1f", (p - r) / r * 100 }')
    lim=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
                   NR == 2 { if ("max_seq_limit" in col && $col["max_seq_limit"] != "") print $col["max_seq_limit"]; else print "-" }' "$tmp")
    echo "$id|$regime|$quantity|$paper|$pred|$err|$tol|$fitted|$source|$cmd|$lim"
done > "$tmp.rows"

table() {
    echo "| id | regime | quantity | published | simulated | error | tolerance | fitted | binding limit | source |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    while IFS='|' read -r id regime quantity paper pred err tol fitted source cmd lim; do
        target=${tol%%/*}
        shown="±$target %"
        miss=$(awk -v e="$err" -v t="$target" 'BEGIN { e = e < 0 ? -e : e; print (e > t) ? 1 : 0 }')
        [ "$miss" = 1 ] && shown="±$target % target: MISSED (held within ±${tol#*/} %)"
        echo "| $id | $regime | $quantity | $paper | $pred | $err % | $shown | $fitted | $lim | $source |"
    done < "$tmp.rows"
    echo
    echo "The commands of the rows (\`ulysses-sim\` followed by):"
    echo
    while IFS='|' read -r id regime quantity paper pred err tol fitted source cmd lim; do
        echo "- $id: \`$cmd\`"
    done < "$tmp.rows"
}

case $mode in
check)
    while IFS='|' read -r id regime quantity paper pred err tol fitted source cmd lim; do
        bound=${tol#*/}
        ok=$(awk -v e="$err" -v t="$bound" 'BEGIN { e = e < 0 ? -e : e; print (e <= t) ? 1 : 0 }')
        if [ "$pred" = ERROR ] || [ "$ok" != 1 ]; then
            echo "FAIL $id ($quantity): published $paper, simulated $pred, error $err % > ±$bound %: ulysses-sim $cmd"
            fail=1
        else
            echo "ok   $id: $err % (±$bound %)"
        fi
    done < "$tmp.rows"
    exit $fail
    ;;
table)
    table
    ;;
doc)
    sed -n '1,/^<!-- validation table -->$/p' "$(dirname "$0")/validation.md.in"
    table
    sed -n '/^<!-- validation table -->$/,/^<!-- BEGIN local-cpu-validation/{/^<!-- validation table -->$/d;/^<!-- BEGIN local-cpu-validation/d;p}' "$(dirname "$0")/validation.md.in"
    if [ -n "$old_doc" ] && [ -f "$old_doc" ] && grep -q '^<!-- BEGIN local-cpu-validation' "$old_doc"; then
        sed -n '/^<!-- BEGIN local-cpu-validation/,/^<!-- END local-cpu-validation/p' "$old_doc"
    else
        sed -n '/^<!-- BEGIN local-cpu-validation/,/^<!-- END local-cpu-validation/p' "$(dirname "$0")/validation.md.in"
    fi
    sed -n '/^<!-- END local-cpu-validation/,${/^<!-- END local-cpu-validation/d;p}' "$(dirname "$0")/validation.md.in"
    ;;
esac
