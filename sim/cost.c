/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cost.c -- the analytic cost of a job: the shapes rank 0 (the most loaded
 * rank) holds in the sequence and attention layouts, FLOPs and HBM traffic
 * per layer, the Megatron and model FLOPs of an iteration, memory per GPU and
 * the longest sequence that fits, and the closed-form sequence-parallel
 * volumes the byte check compares against.
 *
 * Not here: time (the compute model turns FLOPs into durations in program.c),
 * collectives (jobcoll.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compute.h"
#include "cost.h"
#include "pipeline.h"
#include "ulysses_plan.h"
#include "usim.h"
#include "usim_internal.h"

/* ------------------------------------------------------------ shapes */

void usim_attn_desc(const usim_shape *x, int64_t seq, uly_attn_desc *a)
{
    memset(a, 0, sizeof *a);
    a->batch = x->b;
    a->seq = seq;
    a->heads = x->H;
    a->kv_heads = x->Hkv;
    a->head_dim = x->d;
    a->causal = 1;
    a->dtype = ULY_F32;
}

int usim_a2a_layout(const usim_shape *x, int64_t seq, int U, uly_layout *L)
{
    uly_attn_desc a;
    uly_sp_plan p;
    usim_attn_desc(x, seq, &a);
    if (uly_sp_plan_init(&p, ULY_METHOD_ULYSSES, U, 0, ULY_PLACE_ULYSSES_INNER) || uly_layout_init(L, &a, &p))
        return usim_set_error(USIM_EINVAL, "the all-to-all layout of %lld tokens over %d GPUs: %s",
                              (long long)seq, U, uly_last_error());
    return USIM_OK;
}

uint64_t usim_ring_hop_elems(const usim_shape *x, uly_method m, int U, int R, int hop)
{
    uly_sp_plan p;
    if (!(uly_method_traits(m) & ULY_TRAIT_RING) || R < 2 ||
        uly_sp_plan_init(&p, m, U * R, m == ULY_METHOD_USP ? U : 0, ULY_PLACE_ULYSSES_INNER))
        return 0;
    uly_attn_desc a = {.batch = x->b, .seq = x->s, .heads = x->H, .kv_heads = x->Hkv, .head_dim = x->d,
                       .dtype = ULY_F32};
    uint64_t most = 0;
    for (int u = 0; u < U; u++) { /* the busiest ring: the group member with the most KV heads */
        uint64_t n = 0;
        if (hop == USIM_HOP_DKV_HOME) { /* position R-1 holds shard 0 last and sends its dK, dV home */
            int last = uly_plan_grid_rank(&p, u, R - 1);
            n = uly_plan_ring_hop_elems(&a, &p, last, R - 1, ULY_RING_DK) +
                uly_plan_ring_hop_elems(&a, &p, last, R - 1, ULY_RING_DV);
        } else {
            int w0 = hop == USIM_HOP_KV ? ULY_RING_K : ULY_RING_BK, w1 = hop == USIM_HOP_KV ? ULY_RING_V : ULY_RING_DV;
            for (int w = w0; w <= w1; w++)
                n += uly_plan_ring_hop_elems(&a, &p, uly_plan_grid_rank(&p, u, 0), 0, w);
        }
        if (n > most)
            most = n;
    }
    return most;
}

void usim_shape_make(const usim_model *m, const usim_job *j, usim_shape *x)
{
    memset(x, 0, sizeof *x);
    int T = j->method == ULY_METHOD_MEGATRON_SP ? 1 : (j->tp > 0 ? j->tp : 1);
    x->T = T;
    x->b = m->micro_batch;
    x->s = m->seq;
    x->h = m->hidden;
    x->H = m->heads / T;
    x->Hkv = m->kv_heads >= T ? m->kv_heads / T : 1;   /* KV heads replicated when fewer than T */
    x->d = usim_model_head_dim(m);
    x->hq = m->heads * x->d;                            /* the model's query width (weights, GEMMs) */
    x->hkv = m->kv_heads * x->d;                        /* the model's KV width (weights, GEMMs) */
    x->F = m->ffn;
    x->V = m->vocab;
    x->e = usim_dtype_bytes(m->dtype);
    x->L = m->layers;
    x->Ls = m->layers / (j->pp > 0 ? j->pp : 1);
    for (int r = 0; j->pp > 1 && r < j->pp; r++) {   /* uneven stages: the largest */
        int64_t n = usim_pp_rank_layers(m, j, r);
        x->Ls = r == 0 || n > x->Ls ? n : x->Ls;
    }
    x->P = j->sp;
    x->u = j->ulysses;
    x->r = j->sp / j->ulysses;
    int64_t beg;
    uly_split(x->s, x->P, 0, &beg, &x->n);
    uly_split(x->n, T, 0, &beg, &x->tok);
    double h = (double)x->h;
    double lp = usim_model_layer_params(m);
    x->emb_params = (double)x->V * h * (m->tied_embeddings ? 1 : 2);
    if (j->method == ULY_METHOD_MEGATRON_SP) {
        x->layer_params = lp / j->tp;
        x->emb_params /= j->tp;
        x->Z = j->dp;
    } else {
        x->layer_params = lp / T;
        x->emb_params /= T;
        x->Z = j->dp * j->sp;
    }
    /* pipeline: a GPU holds its stage's layers; the first stage the input
     * embedding, the last the LM head (tied: a copy of the embedding); the
     * largest rank counts */
    x->gpu_params = x->Ls * x->layer_params + x->emb_params;
    if (j->pp > 1) {
        double end = x->emb_params / (m->tied_embeddings ? 1 : 2), most = 0;
        for (int r = 0; r < j->pp; r++) {
            double n = (double)usim_pp_rank_layers(m, j, r) * x->layer_params + (r == 0 || r == j->pp - 1 ? end : 0);
            most = n > most ? n : most;
        }
        x->gpu_params = most;
    }
    uly_attn_desc a;
    switch (j->method) {
    case ULY_METHOD_ULYSSES:
        uly_split(x->H, x->P, 0, &beg, &x->hq_l);
        usim_attn_desc(x, x->s, &a);
        uly_kv_range(&a, beg, x->hq_l, &beg, &x->kv_l);
        x->tq = x->tk = x->s;
        break;
    case ULY_METHOD_MEGATRON_SP:
        x->hq_l = x->H / x->P;
        x->kv_l = x->Hkv >= x->P ? x->Hkv / x->P : 1;
        x->tq = x->tk = x->s;
        break;
    case ULY_METHOD_RING: case ULY_METHOD_ZIGZAG:
        x->hq_l = x->H;
        x->kv_l = x->Hkv;
        x->tq = x->tk = x->n;
        break;
    case ULY_METHOD_ALLGATHER:
        /* local queries against every key: K and V gathered (and kept for the backward) */
        x->hq_l = x->H;
        x->kv_l = x->Hkv;
        x->tq = x->n;
        x->tk = x->s;
        break;
    case ULY_METHOD_USP: {
        int64_t sl;
        uly_split(x->s, x->r, 0, &beg, &sl);
        uly_split(x->H, x->u, 0, &beg, &x->hq_l);
        usim_attn_desc(x, sl, &a);
        uly_kv_range(&a, beg, x->hq_l, &beg, &x->kv_l);
        x->tq = x->tk = sl;
        break;
    }
    default:
        break;
    }
}

/* ------------------------------------------------------------ FLOPs */

/* Visible (query, key) pairs of one block for rank 0 -- see doc/simulator.md. */
static double pairs_full(double a, double b) { return a * b; }
static double pairs_causal_diag(double n) { return n * (n + 1) / 2; }

void usim_flops_make(const usim_model *m, const usim_job *j, const usim_shape *x, int causal, usim_flops *f)
{
    memset(f, 0, sizeof *f);
    double b = (double)x->b, h = (double)x->h, hq = (double)x->hq, hkv = (double)x->hkv, F = (double)x->F;
    double tok = j->method == ULY_METHOD_MEGATRON_SP ? (double)x->s / x->P : (double)x->tok;
    f->qkv = 2 * b * tok * h * (hq + 2 * hkv);
    f->out = 2 * b * tok * h * hq;
    f->mlp = (m->gated_mlp ? 6 : 4) * b * tok * h * F;
    f->head = 2 * b * tok * h * x->V;
    f->elem_bytes = b * tok * (10 * h + (m->gated_mlp ? 3 : 2) * F) * x->e;
    f->head_bytes = b * tok * x->V * (x->e + 4) * 2;
    {
        /* megatron-sp: GEMMs over the gathered sequence with weights split t
         * ways; composed tensor parallelism: over the context shard's n
         * tokens (gathered in the tensor group) with weights split T ways */
        int t = j->method == ULY_METHOD_MEGATRON_SP ? x->P : x->T;
        double M = j->method == ULY_METHOD_MEGATRON_SP ? b * (double)x->s
                 : x->T > 1 ? b * (double)x->n : b * tok;
        f->g_qkv = (usim_gemm){M, (hq + 2 * hkv) / t, h};
        f->g_out = (usim_gemm){M, h, hq / t};
        f->g_fc1 = (usim_gemm){M, (m->gated_mlp ? 2 : 1) * F / t, h};
        f->g_fc2 = (usim_gemm){M, h, F / t};
        f->g_head = (usim_gemm){M, (double)x->V / t, h};
    }
    f->attn_heads = (double)x->hq_l;
    f->attn_tq = (double)x->tq;
    double per_pair = 4 * b * x->d;   /* QK^T and PV: 2 FLOPs each per (pair, dim) */
    switch (j->method) {
    case ULY_METHOD_ULYSSES: case ULY_METHOD_MEGATRON_SP: {
        double S = (double)x->s;
        double pairs = causal ? pairs_causal_diag(S) : pairs_full(S, S);
        f->attn = per_pair * x->hq_l * pairs;
        break;
    }
    case ULY_METHOD_RING: {
        double n = (double)x->n;
        /* rank P-1 is the most loaded under the causal mask: it needs every block */
        f->attn_step[0] = per_pair * x->H * (causal ? pairs_causal_diag(n) : n * n);
        f->attn_step[1] = per_pair * x->H * n * n;
        f->attn = f->attn_step[0] + (x->P - 1) * f->attn_step[1];
        break;
    }
    case ULY_METHOD_ZIGZAG: case ULY_METHOD_USP: {
        int R = j->method == ULY_METHOD_USP ? x->r : x->P;
        double n = (double)(j->method == ULY_METHOD_USP ? x->tq : x->n);
        double hl = (double)x->hq_l;
        if (causal) {
            double c = n / 2;  /* two chunks of n/2 per rank */
            f->attn_step[0] = per_pair * hl * (2 * c * c + c);
            f->attn_step[1] = per_pair * hl * (2 * c * c);
        } else {
            f->attn_step[0] = f->attn_step[1] = per_pair * hl * n * n;
        }
        f->attn = f->attn_step[0] + (R - 1) * f->attn_step[1];
        break;
    }
    case ULY_METHOD_ALLGATHER: {
        /* the busiest rank's visible pairs (zigzag shards) from the plan layer */
        double pairs = 0;
        if (causal) {
            uly_attn_desc a;
            usim_attn_desc(x, x->s, &a);
            uly_sp_plan pl;
            if (uly_sp_plan_init(&pl, ULY_METHOD_ALLGATHER, x->P, 0, ULY_PLACE_ULYSSES_INNER) == 0)
                for (int r = 0; r < x->P; r++) {
                    double pr = uly_plan_step_pairs(&a, &pl, r, 0);
                    if (pr > pairs)
                        pairs = pr;
                }
            pairs /= b;   /* per batch row: per_pair carries b */
        } else {
            pairs = (double)x->n * (double)x->s;
        }
        f->attn = per_pair * x->hq_l * pairs;
        break;
    }
    default:
        break;
    }
}

double usim_model_flops(const usim_model *m, int64_t global_batch)
{
    double s = (double)m->seq, h = (double)m->hidden, F = (double)m->ffn;
    double d = (double)usim_model_head_dim(m), hq = d * m->heads, hkv = d * m->kv_heads;
    double pairs = m->causal ? s * (s + 1) / 2 : s * s;
    double layer = 2 * s * h * (hq + 2 * hkv) + 2 * s * h * hq + (m->gated_mlp ? 6 : 4) * s * h * F +
                   4 * d * m->heads * pairs;
    return 3 * global_batch * (m->layers * layer + 2 * s * h * m->vocab);
}

double usim_megatron_flops(const usim_model *m, int64_t global_batch, int full_recompute)
{
    double B = (double)global_batch, s = (double)m->seq, L = (double)m->layers,
           h = (double)m->hidden, V = (double)m->vocab;
    return (full_recompute ? 96.0 : 72.0) * B * s * L * h * h *
           (1 + s / (6 * h) + V / (16 * L * h));
}

/* ------------------------------------------------------------ memory */

const char *usim_bind_name(int bind)
{
    switch (bind & (USIM_BIND_HBM | USIM_BIND_HOST)) {
    case USIM_BIND_HBM: return "HBM";
    case USIM_BIND_HOST: return "host memory";
    case USIM_BIND_HBM | USIM_BIND_HOST: return "HBM + host memory";
    default: return "none";
    }
}

int64_t usim_tiled_mlp_shards(const usim_job *j, int64_t tokens, int64_t hidden)
{
    if (j->tiled_mlp == 0)
        return 0;
    if (j->tiled_mlp > 0)
        return j->tiled_mlp;
    /* ALST's TiledMLP: ceil(tokens / hidden) shards of the rank's tokens */
    int64_t k = (tokens + hidden - 1) / hidden;
    return k < 1 ? 1 : k;
}

int usim_job_check_longctx(const usim_platform *p, const usim_model *m, const usim_job *j)
{
    (void)m;
    if (j->tiled_mlp < USIM_TILED_MLP_AUTO)
        return usim_set_error(USIM_EINVAL, "--tiled-mlp: %d shards (expected auto or K >= 1)", j->tiled_mlp);
    if (j->head_chunks < 0)
        return usim_set_error(USIM_EINVAL, "--head-chunks: %d (expected K >= 1)", j->head_chunks);
    if (j->head_chunks > 1 && !(uly_method_traits(j->method) & ULY_TRAIT_A2A))
        return usim_set_error(USIM_EINVAL, "--head-chunks %d: %s holds every head in its attention "
                              "layout; head chunks apply to ulysses and usp (heads split by the all-to-all)",
                              j->head_chunks, uly_method_sim_name(j->method));
    if ((j->offload & USIM_OFFLOAD_ACT) && j->recompute != USIM_RC_FULL)
        return usim_set_error(USIM_EINVAL, "--offload activations needs --recompute full (the layer-boundary "
                              "checkpoints are what is offloaded), not %s", usim_recompute_name(j->recompute));
    if ((j->offload & USIM_OFFLOAD_OPTIM) && j->zero < 1)
        return usim_set_error(USIM_EINVAL, "--offload optimizer needs ZeRO stage 1 or more (--zero), not 0");
    if ((j->offload & USIM_OFFLOAD_PARAMS) && j->zero < 3)
        return usim_set_error(USIM_EINVAL, "--offload params needs ZeRO stage 3 (--zero 3), not %d", j->zero);
    if ((j->offload & USIM_OFFLOAD_PARAMS) && !(j->offload & USIM_OFFLOAD_OPTIM))
        return usim_set_error(USIM_EINVAL, "--offload params needs --offload optimizer too (ZeRO-Offload "
                              "updates the parameters where the optimizer states are)");
    if (j->offload && !(p->host_bytes > 0 && usim_host_link_Bps(p) > 0))
        return usim_set_error(USIM_EINVAL, "--offload: platform '%s' describes no host (a \"host\" object "
                              "with memory_GiB and link_bw_GBps_per_dir)", p->name);
    if ((j->offload & USIM_OFFLOAD_OPTIM) && !(p->host_flops > 0 && p->host_mem_Bps > 0))
        return usim_set_error(USIM_EINVAL, "--offload optimizer: platform '%s' gives no host "
                              "cpu_peak_tflops_fp32 and mem_bw_GBps (the CPU Adam step)", p->name);
    return USIM_OK;
}

double usim_attn_unfused_job_s(const usim_platform *p, const usim_model *m, const usim_job *j,
                               const usim_shape *x, int bwd)
{
    double E = usim_unfused_elems(x), d = (double)x->d, tq = (double)x->tq, tk = (double)x->tk;
    double t = usim_attn_unfused_s(p, m->dtype, E, d, tq, tk, bwd, j->attn_dropout);
    if (bwd && j->recompute == USIM_RC_SELECTIVE)
        t += usim_attn_unfused_s(p, m->dtype, E, d, tq, tk, 0, j->attn_dropout);
    return t;
}

/* Unfused attention's score-sized tensors of one layer (rank 0's heads), in
 * bytes: *saved, what the backward keeps (the softmax output; with dropout
 * also its 1-byte mask and the dropped probabilities); *transient, dP and dS
 * of the backward.  Both 0 for FlashAttention. */
static void unfused_scores(const usim_job *j, const usim_shape *x, double *saved, double *transient)
{
    *saved = *transient = 0;
    if (j->attn_kernel != USIM_ATTN_UNFUSED)
        return;
    double e = (double)x->e, E = usim_unfused_elems(x);
    *saved = E * (j->attn_dropout ? 2 * e + 1 : e);
    *transient = 2 * E * e;
}

/* The long-context working sets of one GPU (doc/simulator.md, "Long
 * context"), bytes: the backward of one layer under full recompute
 * (recomputed forward tensors and the gradients as they are produced, the
 * larger of the MLP-backward and the attention-backward peaks), and the loss.
 * A = n h e is one hidden-state tensor of the rank's n tokens. */
static void lc_working_sets(const usim_model *m, const usim_job *j, const usim_shape *x, double n,
                            double *layer, double *loss)
{
    double e = (double)x->e, h = (double)x->h, F = (double)x->F, A = n * h * e;
    double hc = j->head_chunks > 1 ? (double)j->head_chunks : 1;
    /* attention layout (rank 0), one head chunk at a time */
    double Q = (double)x->b * (double)x->tq * (double)x->hq_l * (double)x->d * e / hc;
    double KV = (double)x->b * (double)x->tk * (double)x->kv_l * (double)x->d * e / hc;
    double lse = (double)x->b * (double)x->tq * (double)x->hq_l * 4 / hc;
    double gqa = x->kv_l < x->hq_l ? 2 * Q : 0;   /* FA2 backward: dK, dV expanded to the query heads */
    double saved_attn = 2 * Q + 2 * KV + lse;     /* q, k, v, o and lse kept by the attention */
    double sc_saved, sc_tmp;                      /* unfused attention: its scores, one head chunk */
    unfused_scores(j, x, &sc_saved, &sc_tmp);
    saved_attn += sc_saved / hc;
    /* the MLP of one shard: SwiGLU as Liger's fused kernel holds it (gate, up,
     * the down projection's input; their gradients written in place, plus the
     * down input's) or GeLU (fc1 output, activation, and one gradient) */
    int64_t K = usim_tiled_mlp_shards(j, (int64_t)n, x->h);
    double ns = K > 0 ? ceil(n / (double)K) : n;
    double mlp = ns * F * e * (m->gated_mlp ? 4 : 3);
    /* MLP backward: x, ln1, attention saved, o (sequence layout), h1, ln2,
     * the layer's output, dy, d ln2, the MLP */
    double peak_mlp = 7 * A + saved_attn + mlp;
    /* attention backward: x, ln1, out, dy, d h1, attention saved, dO, dQ, dK,
     * dV, FA2's fp32 dQ accumulator (2 Q), softmax_d (lse) and GQA expansion */
    double peak_attn = 5 * A + saved_attn + Q + Q + 2 * KV + 2 * Q + lse + gqa + sc_tmp / hc;
    /* DeepSpeed's Ulysses (UlyssesSPAttentionHF): dO arrives from the
     * all-to-all as a permuted view, and FA2 makes its contiguous copy while
     * the original is alive */
    if ((uly_method_traits(j->method) & ULY_TRAIT_A2A) && x->u > 1)
        peak_attn += Q;
    if (j->method == ULY_METHOD_MEGATRON_SP || x->T > 1)
        peak_attn += A;   /* the gathered input of the tensor-parallel region (the legacy buffer) */
    *layer = peak_mlp > peak_attn ? peak_mlp : peak_attn;
    /* loss: final hidden, its norm, the gradient held from the fused forward,
     * the LM head weight gathered (and its gradient), logits */
    double Vh = (double)x->V * h * e / (x->T > 1 ? x->T : 1);
    double logit_tokens = n;
    if (j->tiled_loss) {   /* Liger's chunk: n / ceil(n / h) tokens (about h) */
        double chunks = ceil(n / h);
        logit_tokens = ceil(n / (chunks < 1 ? 1 : chunks));
    }
    *loss = 3 * A + 2 * Vh + logit_tokens * (double)x->V * (e + 4);
}

void usim_memory_model(const usim_platform *p, const usim_model *m, const usim_job *j, const usim_shape *x,
                   usim_memory *mem)
{
    memset(mem, 0, sizeof *mem);
    double e = (double)x->e, b = (double)x->b, h = (double)x->h, F = (double)x->F;
    double Z = x->Z, Psi = x->gpu_params;
    int lc = usim_job_longctx(j);
    mem->params = j->zero >= 3 ? 2 * Psi / Z : 2 * Psi;
    mem->grads = j->zero >= 2 ? 2 * Psi / Z : 2 * Psi;
    mem->optim = j->zero >= 1 ? 12 * Psi / Z : 12 * Psi;
    double tok = j->method == ULY_METHOD_MEGATRON_SP ? (double)x->s / x->P : (double)x->tok;
    /* sequence-layout tensors per layer (bytes) */
    double x_in = b * tok * h * e, ln1 = x_in, ln2_in = x_in, ln2 = x_in;
    double fc1 = b * tok * F * e * (m->gated_mlp ? 2 : 1), act = b * tok * F * e;
    if (j->tiled_mlp)   /* TiledMLP recomputes its intermediates in the backward: none are stored */
        fc1 = act = 0;
    double o_seq = uly_method_traits(j->method) & ULY_TRAIT_A2A ? b * tok * (double)x->hq * e : 0;
    /* attention-layout tensors */
    double qo = b * (double)x->tq * x->hq_l * x->d * e;
    double kv = b * (double)x->tk * x->kv_l * x->d * e;
    double lse = b * (double)x->tq * x->hq_l * 4;
    double scores, scores_tmp;   /* unfused attention's softmax output (and dropout's), dP and dS */
    unfused_scores(j, x, &scores, &scores_tmp);
    double full = x_in + ln1 + 2 * qo + 2 * kv + lse + o_seq + ln2_in + ln2 + fc1 + act + scores;
    double per_layer;
    switch (j->recompute) {
    case USIM_RC_NONE: per_layer = full; break;
    /* selective recomputes the attention core too (Korthikanti et al.): its scores are not stored */
    case USIM_RC_SELECTIVE: per_layer = full - ln1 - ln2 - act - scores; break;
    default: per_layer = x_in; break;
    }
    /* Pipeline: rank r holds its layers' activations for the chunk forwards in
     * flight (usim_pp_inflight_chunks: 1F1B min(pp - r, m) micro-batches;
     * interleaved min(2 (pp - r - 1) + (V - 1) pp + 1, m V) chunks of layers / V
     * layers, for rank 0 pp (1 + (pp - 1) / (pp V)) stages' worth, the factor of
     * Korthikanti et al., arXiv 2205.05198); the largest over ranks counts. */
    int pp = j->pp > 0 ? j->pp : 1;
    double stored = (double)x->Ls * per_layer;   /* every layer's stored activations */
    if (pp > 1) {
        int64_t per_step = (int64_t)j->dp * m->micro_batch;
        int64_t micro = m->global_batch / per_step + (m->global_batch % per_step != 0);
        int V = usim_pp_vchunks(j);
        stored = 0;
        for (int r = 0; r < pp; r++) {
            double chunks = usim_pp_inflight_chunks(pp, V, micro < 1 ? 1 : micro > INT32_MAX ? INT32_MAX : (int)micro, r);
            double s = (double)usim_pp_rank_layers(m, j, r) / V * chunks * per_layer;
            stored = s > stored ? s : stored;
        }
    }
    mem->activations = stored + (j->recompute == USIM_RC_FULL ? full : 0);
    mem->logits = b * tok * (double)x->V * (e + 4);
    /* communication and working buffers */
    double buf = 0;
    switch (j->method) {
    case ULY_METHOD_ULYSSES: buf = 2 * b * (double)x->tok * ((double)x->hq + 2 * (double)x->hkv) * e; break;
    case ULY_METHOD_MEGATRON_SP: buf = b * (double)x->s * h * e; break;   /* the all-gathered input */
    case ULY_METHOD_RING: case ULY_METHOD_ZIGZAG: buf = 4 * kv; break;
    case ULY_METHOD_USP: buf = 2 * b * (double)x->tok * ((double)x->hq + 2 * (double)x->hkv) * e + 4 * kv; break;
    case ULY_METHOD_ALLGATHER: buf = 2 * kv; break;   /* gathered dK, dV before the reduce-scatter */
    default: break;
    }
    if (x->T > 1)
        buf += b * (double)x->n * h * e;   /* the tensor-parallel all-gathered input */
    buf += scores_tmp;                     /* unfused attention backward: dP and dS */
    if (lc && j->recompute == USIM_RC_FULL) {
        /* the working sets name every tensor of the layer's backward: the
         * all-to-all staging is never live at its peak, the gathered input of
         * a tensor-parallel region and all-gather's K, V and dK, dV are in it
         * (doc/simulator.md); what stays is the ring's K, V blocks in flight
         * and their dK, dV, live during the attention backward */
        int ring = j->method == ULY_METHOD_RING || j->method == ULY_METHOD_ZIGZAG ||
                   (j->method == ULY_METHOD_USP && x->r > 1);
        buf = ring ? 4 * kv : 0;
    }
    if (j->zero >= 3)
        buf += 2 * 2 * x->layer_params;           /* current + prefetched layer, bf16 */
    if (j->zero >= 2)
        buf += 2 * x->layer_params;               /* one gradient bucket */
    mem->buffers = buf;
    mem->reserved = p->reserved_bytes;
    /* the host: what is offloaded, per GPU (times the GPUs of a node below) */
    double host = 0;
    if (j->offload & USIM_OFFLOAD_OPTIM) {
        host += 16 * Psi / Z;                     /* fp32 master, Adam m and v, fp32 gradients */
        mem->optim = 0;
        mem->grads = 0;                           /* reduced into the bucket, copied to the host */
    }
    if (j->offload & USIM_OFFLOAD_PARAMS) {
        host += 2 * Psi / Z;                      /* the bf16 shard, fetched layer by layer */
        mem->params = 0;
    }
    if (lc && j->recompute == USIM_RC_FULL) {
        double n = b * tok, layer, loss;
        lc_working_sets(m, j, x, n, &layer, &loss);
        mem->layer_ws = layer;
        mem->loss_ws = loss;
        if (j->offload & USIM_OFFLOAD_ACT) {
            /* every checkpoint on the host; in HBM the one prefetched for the next layer's backward */
            host += stored;
            mem->resident = x_in;
        } else {
            mem->resident = stored - x_in;        /* the layer's own checkpoint is in its working set */
        }
        mem->activations = mem->resident + layer;
        mem->logits = loss;
        mem->total = mem->params + mem->grads + mem->optim + mem->resident + mem->buffers + mem->reserved +
                     (layer > loss ? layer : loss);
    } else {
        if (lc && j->tiled_loss) {                /* one tile of logits, its gradient, the hidden-state gradient */
            double n = b * tok, layer, loss;
            lc_working_sets(m, j, x, n, &layer, &loss);
            mem->logits = loss - 2 * x_in;        /* the final hidden state and its norm are stored already */
        }
        mem->resident = stored;
        mem->layer_ws = mem->activations - stored;
        mem->loss_ws = mem->logits;
        mem->total = mem->params + mem->grads + mem->optim + mem->activations + mem->logits +
                     mem->buffers + mem->reserved;
    }
    int gpn = j->gpus < p->gpus_per_node ? j->gpus : p->gpus_per_node;
    mem->host_node = host * (gpn > 0 ? gpn : 1);
    mem->bind = (mem->total > p->hbm_bytes ? USIM_BIND_HBM : 0) |
                (mem->host_node > 0 && mem->host_node > p->host_bytes ? USIM_BIND_HOST : 0);
}

int usim_memory_estimate(const usim_platform *p, const usim_model *m, const usim_job *j,
                         usim_memory *mem, int *fits)
{
    usim_job jj = *j;
    int rc = usim_job_resolve(m, p, &jj);
    if (rc)
        return rc;
    if ((rc = usim_job_check_longctx(p, m, &jj)))
        return rc;
    usim_shape x;
    usim_shape_make(m, &jj, &x);
    usim_memory_model(p, m, &jj, &x, mem);
    *fits = mem->bind == USIM_BIND_NONE;
    return USIM_OK;
}

int usim_max_seq(const usim_platform *p, const usim_model *m, const usim_job *j, int64_t *seq)
{
    return usim_max_seq_ex(p, m, j, seq, NULL);
}

int usim_max_seq_ex(const usim_platform *p, const usim_model *m, const usim_job *j, int64_t *seq,
                    int *bind)
{
    usim_model mm = *m;
    usim_job jj = *j;
    int rc = usim_job_resolve(m, p, &jj);
    if (rc)
        return rc;
    int two = (uly_method_traits(jj.method) & ULY_TRAIT_ZIGZAG) != 0;
    int64_t g = (int64_t)jj.sp * (two ? 2 : 1) * (jj.method == ULY_METHOD_MEGATRON_SP ? 1 : jj.tp);
    usim_memory mem;
    int fits;
    *seq = 0;
    if (bind)
        *bind = USIM_BIND_NONE;
    int64_t lo = 0, hi = 1;   /* in units of g: lo fits (or is 0), hi does not */
    for (;;) {
        mm.seq = hi * g;
        usim_job t = jj;
        if ((rc = usim_memory_estimate(p, &mm, &t, &mem, &fits)))
            return rc;
        if (!fits) {
            if (bind)
                *bind = mem.bind;
            break;
        }
        lo = hi;
        if (hi > ((int64_t)1 << 40) / g)
            break;
        hi *= 2;
    }
    if (lo == hi) {
        *seq = lo * g;
        return USIM_OK;
    }
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        mm.seq = mid * g;
        usim_job t = jj;
        if ((rc = usim_memory_estimate(p, &mm, &t, &mem, &fits)))
            return rc;
        if (fits) {
            lo = mid;
        } else {
            hi = mid;
            if (bind)
                *bind = mem.bind;
        }
    }
    *seq = lo * g;
    return USIM_OK;
}

/* ------------------------------------------------------------ closed-form SP volumes */

/* Bytes of one ring hop in the model's element size. */
static double hop_bytes(const usim_shape *x, uly_method m, int U, int R, int hop)
{
    return (double)(usim_ring_hop_elems(x, m, U, R, hop) * (uint64_t)x->e);
}

int usim_analytic_sp_bytes(const usim_model *m, const usim_job *jin, int gpu, double sent[2])
{
    sent[0] = sent[1] = 0;
    usim_job j = *jin;
    usim_platform dummy;
    memset(&dummy, 0, sizeof dummy);
    dummy.gpus_per_node = j.gpus;
    int rc = usim_job_resolve(m, &dummy, &j);
    if (rc)
        return rc;
    usim_shape x;   /* the heads and element size of a tensor-parallel rank */
    usim_shape_make(m, &j, &x);
    double b = (double)m->micro_batch, e = usim_dtype_bytes(m->dtype), h = (double)m->hidden;
    double d = (double)usim_model_head_dim(m), hkv = d * m->kv_heads, N = (double)m->seq;
    int P = j.sp;
    /* composed tensor parallelism: rank = t + T c + ...; heads per tensor rank */
    int T = j.method == ULY_METHOD_MEGATRON_SP ? 1 : j.tp;
    int rank = j.method == ULY_METHOD_MEGATRON_SP ? gpu % P : (gpu / T) % P;
    usim_model mt = *m;
    mt.heads = m->heads / T;
    mt.hidden = m->hidden / T;
    mt.head_dim = usim_model_head_dim(m);   /* keeps the head dimension */
    mt.kv_heads = m->kv_heads >= T ? m->kv_heads / T : 1;
    hkv = d * mt.kv_heads;
    m = &mt;
    if (T > 1) {
        /* Megatron sequence parallelism on the context shard (rank 0's n tokens, as simulated):
         * 2 all-gathers and 2 reduce-scatters per pass over the tensor group, ring algorithm */
        int64_t bg, n0, c_next, c_me;
        uly_split(m->seq, P, 0, &bg, &n0);
        int t = gpu % T;
        uly_split(n0, T, (t + 1) % T, &bg, &c_next);
        uly_split(n0, T, t, &bg, &c_me);
        double row = b * h * e;
        sent[0] = sent[1] = 2 * (double)(n0 - c_next) * row + 2 * (double)(n0 - c_me) * row;
    }
    switch (j.method) {
    case ULY_METHOD_ULYSSES: case ULY_METHOD_USP: {
        int u = j.ulysses, r = P / u;
        int64_t seq = m->seq, b0;
        if (j.method == ULY_METHOD_USP)
            uly_split(m->seq, r, 0, &b0, &seq);
        uly_layout L;
        if ((rc = usim_a2a_layout(&x, seq, u, &L)))
            return rc;
        for (int w = 0; w < ULY_A2A_COUNT; w++) {
            uint64_t n = 0;   /* elements this group member hands the others */
            for (int s = 0; s < u; s++)
                if (s != rank % u)
                    n += uly_layout_a2a_block(&L, seq, w, rank % u, s);
            sent[w >= ULY_A2A_DO] += (double)n * e;
        }
        if (j.method == ULY_METHOD_USP && r > 1) { /* the ring across the groups: the plan layer's hops */
            sent[0] += (r - 1) * hop_bytes(&x, ULY_METHOD_USP, u, r, USIM_HOP_KV);
            sent[1] += (r - 1) * hop_bytes(&x, ULY_METHOD_USP, u, r, USIM_HOP_BWD) +
                       hop_bytes(&x, ULY_METHOD_USP, u, r, USIM_HOP_DKV_HOME);
        }
        break;
    }
    case ULY_METHOD_MEGATRON_SP: {
        /* ring all-gather: every chunk but the next rank's; reduce-scatter: every chunk but mine */
        int64_t bg, c_next, c_me;
        uly_split(m->seq, P, (rank + 1) % P, &bg, &c_next);
        uly_split(m->seq, P, rank, &bg, &c_me);
        double row = b * h * e;
        sent[0] = 2 * (N - c_next) * row + 2 * (N - c_me) * row;
        sent[1] = sent[0];
        break;
    }
    case ULY_METHOD_RING: case ULY_METHOD_ZIGZAG: { /* P - 1 hops of the plan layer's size, and the return */
        sent[0] += (P - 1) * hop_bytes(&x, j.method, 1, P, USIM_HOP_KV);
        sent[1] += (P - 1) * hop_bytes(&x, j.method, 1, P, USIM_HOP_BWD) +
                   hop_bytes(&x, j.method, 1, P, USIM_HOP_DKV_HOME);
        break;
    }
    case ULY_METHOD_ALLGATHER: {
        /* ring all-gather of K, V (every shard but the next rank's) forward; ring
         * reduce-scatter of dK, dV (every shard but mine) backward; shards from the plan layer */
        uly_sp_plan pl;
        if (uly_sp_plan_init(&pl, ULY_METHOD_ALLGATHER, P, 0, ULY_PLACE_ULYSSES_INNER))
            return usim_set_error(USIM_EINVAL, "uly_sp_plan_init: %s", uly_last_error());
        double total = 0, next = 0, mine = 0;
        for (int r = 0; r < P; r++) {
            int64_t bgn[2], cnt[2];
            int nseg = uly_plan_tokens(&pl, m->seq, r, bgn, cnt);
            double tk = (double)cnt[0] + (nseg > 1 ? (double)cnt[1] : 0);
            total += tk;
            if (r == (rank + 1) % P)
                next = tk;
            if (r == rank)
                mine = tk;
        }
        double row = 2 * b * hkv * e;   /* K and V */
        sent[0] += (total - next) * row;
        sent[1] += (total - mine) * row;
        break;
    }
    default:
        break;
    }
    return USIM_OK;
}
