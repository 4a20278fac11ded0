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

double usim_model_params(const usim_model *m)
{
    double h = (double)m->hidden, d = h / m->heads, hkv = d * m->kv_heads, F = (double)m->ffn;
    double attn = h * (h + 2 * hkv) + h * h;
    double mlp = (m->gated_mlp ? 3 : 2) * h * F;
    double norms = 4 * h;
    double emb = (double)m->vocab * h * (m->tied_embeddings ? 1 : 2);
    return m->layers * (attn + mlp + norms) + emb + 2 * h;
}
