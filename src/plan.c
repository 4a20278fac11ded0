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

/* Elements of the block src hands dst in all-to-all `which`, from the
 * partitions alone; rep: whether KV groups are cut (uly_plan_kv_replicated). */
static uint64_t a2a_block(const uly_attn_desc *a, int P, int rep, int which, int src, int dst)
{
    int64_t tmp, n_src, n_dst, h_src, h_dst, hb, kv_src, kv_dst;
    uly_split(a->seq, P, src, &tmp, &n_src);
    uly_split(a->seq, P, dst, &tmp, &n_dst);
    uly_split(a->heads, P, src, &hb, &h_src);
    uly_kv_range(a, hb, h_src, &tmp, &kv_src);
    uly_split(a->heads, P, dst, &hb, &h_dst);
    uly_kv_range(a, hb, h_dst, &tmp, &kv_dst);
    const uint64_t row = (uint64_t)a->batch * (uint64_t)a->head_dim;
    switch (which) {
    /* sequence -> heads: src's tokens of dst's heads */
    case ULY_A2A_Q: case ULY_A2A_DO:
        return row * (uint64_t)n_src * (uint64_t)h_dst;
    case ULY_A2A_K: case ULY_A2A_V:
        return row * (uint64_t)n_src * (uint64_t)kv_dst;
    /* heads -> sequence: dst's tokens of src's heads (per query head when replicated) */
    case ULY_A2A_O: case ULY_A2A_DQ:
        return row * (uint64_t)n_dst * (uint64_t)h_src;
    case ULY_A2A_DK: case ULY_A2A_DV:
        return row * (uint64_t)n_dst * (uint64_t)(rep ? h_src : kv_src);
    }
    return 0;
}

int uly_plan_a2a_block(const uly_attn_desc *a, int P, int which, int src, int dst, uint64_t *elems)
{
    int rc = uly_attn_desc_check(a);
    if (rc)
        return rc;
    if (P < 1 || src < 0 || src >= P || dst < 0 || dst >= P)
        return uly_set_error(ULY_EINVAL, "ranks %d -> %d of %d are out of range", src, dst, P);
    if (which < 0 || which >= ULY_A2A_COUNT)
        return uly_set_error(ULY_EINVAL, "unknown all-to-all %d", which);
    *elems = a2a_block(a, P, uly_plan_kv_replicated(a, P), which, src, dst);
    return ULY_OK;
}

int uly_plan_volume(const uly_attn_desc *a, int P, int rank, uly_volume *out)
{
    int rc = uly_attn_desc_check(a);
    if (rc)
        return rc;
    if (P < 1 || rank < 0 || rank >= P)
        return uly_set_error(ULY_EINVAL, "rank %d of %d is out of range", rank, P);
    memset(out, 0, sizeof *out);
    const uint64_t es = uly_dtype_size(a->dtype);
    const int rep = uly_plan_kv_replicated(a, P);
    for (int s = 0; s < P; s++) {
        if (s == rank)
            continue;
        for (int w = 0; w < ULY_A2A_COUNT; w++) {
            out->sent[w] += es * a2a_block(a, P, rep, w, rank, s);
            out->recv[w] += es * a2a_block(a, P, rep, w, s, rank);
        }
    }
    return ULY_OK;
}
