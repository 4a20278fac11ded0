/* SPDX-License-Identifier: Apache-2.0 */
/*
 * model.c -- what follows from a model's description alone: the element
 * types' names and sizes and the parameter count.  Kept apart from the
 * readers of model files (describe.c, hfconfig.c), which both use it.
 */
#include "usim.h"

const char *usim_dtype_name(usim_dtype t)
{
    static const char *const n[USIM_NDTYPE] = {"bf16", "fp16", "fp32"};
    return (t >= 0 && t < USIM_NDTYPE) ? n[t] : "?";
}

int usim_dtype_bytes(usim_dtype t)
{
    static const int b[USIM_NDTYPE] = {2, 2, 4};
    return (t >= 0 && t < USIM_NDTYPE) ? b[t] : 0;
}

int64_t usim_model_head_dim(const usim_model *m)
{
    return m->head_dim > 0 ? m->head_dim : m->heads > 0 ? m->hidden / m->heads : 0;
}

/* q, k, v: h x (hq + 2 hkv) with hq = heads x head_dim, hkv = kv_heads x
 * head_dim; o: hq x h; the MLP's 2 or 3 matrices; two norms' weight and bias
 * slots (4 h); biases of q, k, v (hq + 2 hkv) and o (h) where the model has
 * them; Qwen3's q_norm and k_norm (head_dim each, shared by the heads). */
double usim_model_layer_params(const usim_model *m)
{
    double h = (double)m->hidden, d = (double)usim_model_head_dim(m), F = (double)m->ffn;
    double hq = d * m->heads, hkv = d * m->kv_heads;
    double attn = h * (hq + 2 * hkv) + hq * h;
    double mlp = (m->gated_mlp ? 3 : 2) * h * F;
    double norms = 4 * h;
    double lp = attn + mlp + norms;
    if (m->qkv_bias)
        lp += hq + 2 * hkv;
    if (m->o_bias)
        lp += h;
    if (m->qk_norm)
        lp += 2 * d;
    return lp;
}

double usim_model_params(const usim_model *m)
{
    double h = (double)m->hidden;
    double emb = (double)m->vocab * h * (m->tied_embeddings ? 1 : 2);
    return m->layers * usim_model_layer_params(m) + emb + 2 * h;
}
