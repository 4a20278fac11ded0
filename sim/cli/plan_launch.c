/* SPDX-License-Identifier: Apache-2.0 */
/*
 * plan_launch.c -- what to run for a composition `plan` prints: the
 * Megatron-LM command-line flags and a DeepSpeed configuration fragment, or,
 * where the framework cannot run the composition, why not (never an invented
 * flag).  Flag and key names, and the constraints checked, are those of
 * Megatron-LM's megatron/training/arguments.py (NVIDIA/Megatron-LM commit
 * 000c4ac24f61, November 2025) and DeepSpeed's docs/_pages/config-json.md and
 * docs/_tutorials/ulysses-alst-sequence-parallelism.md (deepspeedai/DeepSpeed
 * commit edaa7221267); doc/planning.md section 2.3 lists them with lines.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "plan_launch.h"

static void app(char *buf, size_t n, const char *fmt, ...) ULY_BASE_PRINTF(3, 4);
static void app(char *buf, size_t n, const char *fmt, ...)
{
    size_t l = strlen(buf);
    if (l + 1 >= n)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + l, n - l, fmt, ap);
    va_end(ap);
}

int plan_megatron_flags(const usim_model *m, const usim_job *j, int64_t micro_batch, int64_t global_batch,
                        int vpp, char *flags, size_t nf, char *note, size_t nn)
{
    flags[0] = note[0] = 0;
    int mg = j->method == ULY_METHOD_MEGATRON_SP;
    int T = mg ? j->sp : j->tp, C = mg ? 1 : j->sp;
    int kv_per_tp = (int)(m->kv_heads / T > 0 ? m->kv_heads / T : 1);
    if (C > 1 && m->seq % (2 * (int64_t)C) != 0) {
        /* arguments.py: assert args.seq_length % (args.context_parallel_size * 2) == 0 */
        snprintf(note, nn, "--seq-length %lld is not a multiple of 2 x CP = %d "
                 "(arguments.py requires it whenever --context-parallel-size > 1)", (long long)m->seq, 2 * C);
        return 1;
    }
    if (j->method == ULY_METHOD_ULYSSES && C > kv_per_tp) {
        snprintf(note, nn, "its a2a needs the CP degree (%d) not above the KV heads per "
                 "tensor rank (%d); the simulator replicates KV heads as DeepSpeed does", C, kv_per_tp);
        return 1;
    }
    /* the long-context techniques Megatron-LM has no flag for: TiledMLP,
     * tiled logits and loss (its vocab-parallel cross-entropy materialises the
     * logits), head-chunked attention, checkpoint offload with full recompute
     * (transformer_config.py: cpu_offloading excludes recompute_granularity),
     * parameter offload */
    const char *no = j->tiled_mlp ? "TiledMLP (--tiled-mlp)" :
                     j->tiled_loss ? "tiled loss (--tiled-loss): its cross-entropy takes the whole logits" :
                     j->head_chunks > 1 ? "head-chunked attention (--head-chunks)" :
                     (j->offload & USIM_OFFLOAD_ACT) ? "checkpoint offload with full recompute "
                                                       "(its --cpu-offloading excludes recompute)" :
                     (j->offload & USIM_OFFLOAD_PARAMS) ? "parameter offload (--offload params)" : NULL;
    if (no) {
        snprintf(note, nn, "it has no %s", no);
        return 1;
    }
    app(flags, nf, "--tensor-model-parallel-size %d", T);
    if (T > 1)
        app(flags, nf, " --sequence-parallel");
    if (!mg) {
        const char *ct = "p2p";
        switch (j->method) {
        case ULY_METHOD_ULYSSES: ct = "a2a"; break;
        case ULY_METHOD_ALLGATHER: ct = "allgather"; break;
        case ULY_METHOD_USP: ct = "a2a+p2p"; break;
        default: ct = "p2p"; break;
        }
        app(flags, nf, " --context-parallel-size %d --cp-comm-type %s", C, ct);
        if (j->method == ULY_METHOD_USP)
            app(flags, nf, " --hierarchical-context-parallel-sizes %d %d", j->ulysses, C / j->ulysses);
        if (j->method == ULY_METHOD_RING && m->causal)
            snprintf(note, nn, "Megatron-LM's p2p always cuts a causal sequence into 2 x CP zigzag chunks: it runs "
                     "this row as ring-zigzag (same traffic, balanced work)");
    }
    app(flags, nf, " --pipeline-model-parallel-size %d", j->pp > 0 ? j->pp : 1);
    if (vpp > 1)   /* arguments.py has no --virtual-pipeline-model-parallel-size flag: this one sets it
                    * (commit d98e8a64: the flag line 3116; line 977: args.virtual_pipeline_model_parallel_size =
                    * args.num_virtual_stages_per_pipeline_rank) */
        app(flags, nf, " --num-virtual-stages-per-pipeline-rank %d", vpp);
    if (j->recompute == USIM_RC_SELECTIVE)
        app(flags, nf, " --recompute-granularity selective");
    else if (j->recompute == USIM_RC_FULL)
        app(flags, nf, " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1");
    if (j->attn_kernel == USIM_ATTN_UNFUSED)   /* megatron/core/transformer/enums.py: AttnBackend.unfused */
        app(flags, nf, " --attention-backend unfused --attention-dropout %s", j->attn_dropout ? "0.1" : "0");
    if (j->zero >= 1)
        app(flags, nf, " --use-distributed-optimizer");
    if (j->offload & USIM_OFFLOAD_OPTIM)   /* optimizer_config.py: optimizer_cpu_offload; arguments.py
                                             * requires the precision-aware optimizer with it */
        app(flags, nf, " --optimizer-cpu-offload --use-precision-aware-optimizer");
    if (j->zero >= 2)   /* Megatron FSDP: ZeRO-2 shards gradients too, ZeRO-3 parameters too */
        app(flags, nf, " --use-megatron-fsdp --data-parallel-sharding-strategy %s --no-gradient-accumulation-fusion",
            j->zero >= 3 ? "optim_grads_params" : "optim_grads");
    app(flags, nf, " --micro-batch-size %lld --global-batch-size %lld --seq-length %lld", (long long)micro_batch,
        (long long)global_batch, (long long)m->seq);
    if (m->dtype == USIM_BF16)
        app(flags, nf, " --bf16");
    else if (m->dtype == USIM_FP16)
        app(flags, nf, " --fp16");
    return 0;
}

json_t *plan_deepspeed_config(const usim_model *m, const usim_job *j, int64_t micro_batch, int micro_steps,
                              int64_t global_batch, char *note, size_t nn)
{
    note[0] = 0;
    int mg = j->method == ULY_METHOD_MEGATRON_SP;
    if (mg) {
        snprintf(note, nn, "Megatron tensor + sequence parallelism is not a DeepSpeed config "
                 "option (AutoTP's tensor_parallel shards GEMMs without sequence parallelism)");
        return NULL;
    }
    if (j->method != ULY_METHOD_ULYSSES) {
        snprintf(note, nn, "its sequence parallelism is Ulysses all-to-all only "
                 "(sequence_parallel_size); it has no %s context parallelism", uly_method_sim_name(j->method));
        return NULL;
    }
    if (j->tp > 1) {
        snprintf(note, nn, "tensor parallelism with Ulysses sequence_parallel_size is not "
                 "a documented combination");
        return NULL;
    }
    if (j->pp > 1) {
        snprintf(note, nn, "pipeline stages come from a PipelineModule in "
                 "the model code, not from the config");
        return NULL;
    }
    if (j->recompute == USIM_RC_SELECTIVE) {
        snprintf(note, nn, "selective recompute is a Megatron-LM option; with DeepSpeed "
                 "choose recompute none or full");
        return NULL;
    }
    if (j->head_chunks > 1) {
        snprintf(note, nn, "it has no head-chunked attention (--head-chunks; UPipe, arXiv 2602.21196)");
        return NULL;
    }
    json_t *o = json_object();
    if (!o)
        return NULL;
    int bad = 0;
    /* train_batch_size = micro-batch x steps x data-parallel ranks: with sequence_parallel_size
     * DeepSpeed counts world size / sequence_parallel_size ranks (runtime/config.py) */
    bad |= uly_json_set_int(o, "train_batch_size", global_batch);
    bad |= uly_json_set_int(o, "train_micro_batch_size_per_gpu", micro_batch);
    bad |= uly_json_set_int(o, "gradient_accumulation_steps", micro_steps);
    json_t *z = uly_json_add_object(o, "zero_optimization");
    bad |= !z || uly_json_set_int(z, "stage", j->zero);
    if (z && (j->offload & USIM_OFFLOAD_OPTIM)) {
        json_t *d = uly_json_add_object(z, "offload_optimizer");
        bad |= !d || uly_json_set_str(d, "device", "cpu");
    }
    if (z && (j->offload & USIM_OFFLOAD_PARAMS)) {
        json_t *d = uly_json_add_object(z, "offload_param");
        bad |= !d || uly_json_set_str(d, "device", "cpu");
    }
    if (m->dtype == USIM_BF16 || m->dtype == USIM_FP16) {
        json_t *b = uly_json_add_object(o, m->dtype == USIM_BF16 ? "bf16" : "fp16");
        bad |= !b || uly_json_set_bool(b, "enabled", 1);
    }
    bad |= uly_json_set_int(o, "sequence_parallel_size", j->sp);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    if (j->recompute == USIM_RC_FULL)
        snprintf(note, nn, "full recompute: enable activation checkpointing of every layer in the model "
                 "(Hugging Face: model.gradient_checkpointing_enable()); it is not a config key");
    /* the ALST pieces are code, not config keys (DeepSpeed's
     * ulysses-alst-sequence-parallelism tutorial; ArcticTraining's recipes
     * name them tiled_mlp_compute and activation_checkpoint_cpu_offload) */
    if (j->tiled_mlp)
        app(note, nn, "%sTiledMLP: deepspeed.runtime.sequence_parallel.ulysses_sp.TiledMLP around the MLP "
            "forward (ArcticTraining: tiled_mlp_compute: true)", note[0] ? "; " : "");
    if (j->tiled_loss)
        app(note, nn, "%stiled loss: ulysses_sp.TiledFusedLogitsLoss or Liger's fused linear cross-entropy",
            note[0] ? "; " : "");
    if (j->offload & USIM_OFFLOAD_ACT)
        app(note, nn, "%scheckpoint offload: deepspeed.runtime.activation_checkpointing.offload_activations."
            "get_checkpoint_hidden_states_offloading_ctx_manager() around each step (ArcticTraining: "
            "activation_checkpoint_cpu_offload: true)", note[0] ? "; " : "");
    if (j->attn_kernel == USIM_ATTN_UNFUSED)
        app(note, nn, "%sunfused attention: Hugging Face attn_implementation=\"eager\" (attention_dropout %s in "
            "the model config)", note[0] ? "; " : "", j->attn_dropout ? "> 0" : "0");
    return o;
}
