/*
 * plan.c -- the plan layer: problem validation, mask geometry, sequence and
 * head partitions, and the expected all-to-all volumes.  Pure integer math on
 * (rank, size); shared by the library and the simulator.  No MPI, no BLAS.
 */
#include <math.h>
#include <string.h>

#include "internal.h"

size_t uly_dtype_size(uly_dtype t)
{
    switch (t) {
    case ULY_F32: return 4;
    case ULY_F64: return 8;
    }
    return 0;
}

int uly_attn_desc_check(const uly_attn_desc *a)
{
    if (!a)
        return uly_set_error(ULY_EINVAL, "attention description is NULL");
    if (a->batch < 1)
        return uly_set_error(ULY_EINVAL, "batch must be >= 1 (got %lld)", (long long)a->batch);
    if (a->seq < 1)
        return uly_set_error(ULY_EINVAL, "sequence length must be >= 1 (got %lld)", (long long)a->seq);
    if (a->heads < 1)
        return uly_set_error(ULY_EINVAL, "heads must be >= 1 (got %lld)", (long long)a->heads);
    if (a->kv_heads < 1)
        return uly_set_error(ULY_EINVAL, "kv-heads must be >= 1 (got %lld)", (long long)a->kv_heads);
    if (a->head_dim < 1)
        return uly_set_error(ULY_EINVAL, "head dimension must be >= 1 (got %lld)", (long long)a->head_dim);
    if (a->heads % a->kv_heads != 0)
        return uly_set_error(ULY_EINVAL, "heads (%lld) must be a multiple of kv-heads (%lld)",
                             (long long)a->heads, (long long)a->kv_heads);
    if (a->window < 0)
        return uly_set_error(ULY_EINVAL, "window must be >= 1, or 0 for none (got %lld)",
                             (long long)a->window);
    if (a->causal != 0 && a->causal != 1)
        return uly_set_error(ULY_EINVAL, "causal must be 0 or 1 (got %d)", a->causal);
    if (!isfinite(a->scale) || a->scale < 0)
        return uly_set_error(ULY_EINVAL, "scale must be finite and >= 0 (0 = 1/sqrt(d))");
    size_t es = uly_dtype_size(a->dtype);
    if (es == 0)
        return uly_set_error(ULY_EINVAL, "unknown dtype %d", (int)a->dtype);
    /* Largest tensor: (B, N, H, d) elements of 8 bytes (the reference uses
     * double), plus the (B, H, N) LSE.  All must be addressable. */
    int64_t dims[5] = {a->batch, a->seq, a->heads, a->head_dim, 8};
    size_t bytes;
    if (uly_mul_sizes(&bytes, 5, dims) || bytes > (size_t)PTRDIFF_MAX)
        return uly_set_error(ULY_EOVERFLOW,
                             "tensor size B*N*H*d = %lld*%lld*%lld*%lld elements overflows the address space",
                             (long long)a->batch, (long long)a->seq, (long long)a->heads,
                             (long long)a->head_dim);
    return ULY_OK;
}

double uly_attn_scale(const uly_attn_desc *a)
{
    return a->scale > 0 ? a->scale : 1.0 / sqrt((double)a->head_dim);
}

int uly_attn_visible(const uly_attn_desc *a, int64_t i, int64_t j)
{
    if (a->causal && j > i)
        return 0;
    if (a->window > 0) {
        int64_t dist = i > j ? i - j : j - i;
        if (dist >= a->window)
            return 0;
    }
    return 1;
}

double uly_attn_pairs(const uly_attn_desc *a)
{
    double s = 0;
    for (int64_t i = 0; i < a->seq; i++) {
        int64_t lo, hi;
        uly_visible_range(a, i, &lo, &hi);
        s += (double)(hi - lo);
    }
    return s;
}

void uly_split(int64_t n, int parts, int idx, int64_t *begin, int64_t *count)
{
    int64_t base = n / parts, rem = n % parts;
    *count = base + (idx < rem ? 1 : 0);
    *begin = idx * base + (idx < rem ? idx : rem);
}

void uly_kv_range(const uly_attn_desc *a, int64_t head_begin, int64_t head_count,
                  int64_t *kv_begin, int64_t *kv_count)
{
    int64_t g = a->heads / a->kv_heads;
    if (head_count <= 0) {
        *kv_begin = head_begin / g;
        *kv_count = 0;
        return;
    }
    int64_t first = head_begin / g, last = (head_begin + head_count - 1) / g;
    *kv_begin = first;
    *kv_count = last - first + 1;
}

int uly_plan_kv_replicated(const uly_attn_desc *a, int P)
{
    int64_t g = a->heads / a->kv_heads;
    if (g == 1)
        return 0;
    for (int r = 0; r < P; r++) {
        int64_t hb, hc;
        uly_split(a->heads, P, r, &hb, &hc);
        if (hc > 0 && (hb % g != 0 || (hb + hc) % g != 0))
            return 1;
    }
    return 0;
}

const char *uly_a2a_name(int which)
{
    static const char *const names[ULY_A2A_COUNT] = {"q", "k", "v", "o", "do", "dq", "dk", "dv"};
    if (which < 0 || which >= ULY_A2A_COUNT)
        return "?";
    return names[which];
}

int uly_plan_volume(const uly_attn_desc *a, int P, int rank, uly_volume *out)
{
    int rc = uly_attn_desc_check(a);
    if (rc)
        return rc;
    if (P < 1 || rank < 0 || rank >= P)
        return uly_set_error(ULY_EINVAL, "rank %d of %d is out of range", rank, P);
    memset(out, 0, sizeof *out);
    const uint64_t row = (uint64_t)a->batch * (uint64_t)a->head_dim * uly_dtype_size(a->dtype);
    const int rep = uly_plan_kv_replicated(a, P);
    int64_t nb, n_r, hb, h_r, kb, kv_r;
    uly_split(a->seq, P, rank, &nb, &n_r);
    uly_split(a->heads, P, rank, &hb, &h_r);
    uly_kv_range(a, hb, h_r, &kb, &kv_r);
    for (int s = 0; s < P; s++) {
        if (s == rank)
            continue;
        int64_t n_s, h_s, kv_s, tmp;
        uly_split(a->seq, P, s, &tmp, &n_s);
        uly_split(a->heads, P, s, &tmp, &h_s);
        uly_kv_range(a, tmp, h_s, &tmp, &kv_s);
        /* sequence -> heads: my tokens of s's heads out, s's tokens of my heads in */
        uint64_t q_out = row * (uint64_t)(n_r * h_s), q_in = row * (uint64_t)(n_s * h_r);
        uint64_t kv_out = row * (uint64_t)(n_r * kv_s), kv_in = row * (uint64_t)(n_s * kv_r);
        /* heads -> sequence: s's tokens of my heads out, my tokens of s's heads in */
        uint64_t o_out = q_in, o_in = q_out;
        uint64_t dkv_out = rep ? o_out : row * (uint64_t)(n_s * kv_r);
        uint64_t dkv_in = rep ? o_in : row * (uint64_t)(n_r * kv_s);
        out->sent[ULY_A2A_Q] += q_out;   out->recv[ULY_A2A_Q] += q_in;
        out->sent[ULY_A2A_K] += kv_out;  out->recv[ULY_A2A_K] += kv_in;
        out->sent[ULY_A2A_V] += kv_out;  out->recv[ULY_A2A_V] += kv_in;
        out->sent[ULY_A2A_O] += o_out;   out->recv[ULY_A2A_O] += o_in;
        out->sent[ULY_A2A_DO] += q_out;  out->recv[ULY_A2A_DO] += q_in;
        out->sent[ULY_A2A_DQ] += o_out;  out->recv[ULY_A2A_DQ] += o_in;
        out->sent[ULY_A2A_DK] += dkv_out; out->recv[ULY_A2A_DK] += dkv_in;
        out->sent[ULY_A2A_DV] += dkv_out; out->recv[ULY_A2A_DV] += dkv_in;
    }
    return ULY_OK;
}
