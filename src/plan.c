/* SPDX-License-Identifier: Apache-2.0 */
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

static int uly_doc_check(const uly_attn_desc *a);

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
    return uly_doc_check(a);
}

/* Document offsets: B rows of D + 1 entries, 0 ... N, non-decreasing. */
static int uly_doc_check(const uly_attn_desc *a)
{
    if (!a->doc_offsets) {
        if (a->docs != 0)
            return uly_set_error(ULY_EINVAL, "docs = %lld without document offsets", (long long)a->docs);
        return ULY_OK;
    }
    if (a->docs < 1 || a->docs > INT64_MAX / 2)
        return uly_set_error(ULY_EINVAL, "documents per row must be >= 1 with offsets (got %lld)",
                             (long long)a->docs);
    size_t n;
    int64_t dims[2] = {a->batch, a->docs + 1};
    if (uly_mul_sizes(&n, 2, dims) || n > (size_t)PTRDIFF_MAX / sizeof(int64_t))
        return uly_set_error(ULY_EOVERFLOW, "document offsets: batch x (docs + 1) overflows");
    for (int64_t b = 0; b < a->batch; b++) {
        const int64_t *off = a->doc_offsets + b * (a->docs + 1);
        if (off[0] != 0)
            return uly_set_error(ULY_EINVAL, "document offsets of batch row %lld must start at 0 (got %lld)",
                                 (long long)b, (long long)off[0]);
        for (int64_t i = 1; i <= a->docs; i++)
            if (off[i] < off[i - 1])
                return uly_set_error(ULY_EINVAL,
                                     "document offsets of batch row %lld decrease at entry %lld (%lld < %lld)",
                                     (long long)b, (long long)i, (long long)off[i], (long long)off[i - 1]);
        if (off[a->docs] != a->seq)
            return uly_set_error(ULY_EINVAL,
                                 "document offsets of batch row %lld must end at the sequence length %lld (got %lld)",
                                 (long long)b, (long long)a->seq, (long long)off[a->docs]);
    }
    return ULY_OK;
}

int64_t uly_doc_hash(const uly_attn_desc *a)
{
    if (!a->doc_offsets)
        return 0;
    uint64_t h = 1469598103934665603ull;
    const size_t n = (size_t)(a->batch * (a->docs + 1));
    for (size_t i = 0; i < n; i++) {
        uint64_t x = (uint64_t)a->doc_offsets[i];
        for (int byte = 0; byte < 8; byte++) {
            h ^= (x >> (8 * byte)) & 0xffu;
            h *= 1099511628211ull;
        }
    }
    return (int64_t)(h >> 1); /* non-negative, never INT64_MIN */
}

double uly_attn_scale(const uly_attn_desc *a)
{
    return a->scale > 0 ? a->scale : 1.0 / sqrt((double)a->head_dim);
}

int uly_attn_visible_row(const uly_attn_desc *a, int64_t b, int64_t i, int64_t j)
{
    int64_t lo, hi;
    uly_visible_range(a, b, i, &lo, &hi);
    return j >= lo && j < hi;
}

int uly_attn_visible(const uly_attn_desc *a, int64_t i, int64_t j)
{
    return uly_attn_visible_row(a, 0, i, j);
}

void uly_attn_visible_keys(const uly_attn_desc *a, int64_t b, int64_t i, int64_t *lo, int64_t *hi)
{
    uly_visible_range(a, b, i, lo, hi);
}

int64_t uly_attn_pairs_range(const uly_attn_desc *a, int64_t b, int64_t q0, int64_t nq, int64_t k0,
                             int64_t nk)
{
    int64_t s = 0;
    for (int64_t i = q0; i < q0 + nq; i++) {
        int64_t lo, hi;
        uly_visible_range(a, b, i, &lo, &hi);
        if (lo < k0)
            lo = k0;
        if (hi > k0 + nk)
            hi = k0 + nk;
        if (hi > lo)
            s += hi - lo;
    }
    return s;
}

int uly_attn_any_visible(const uly_attn_desc *a, int64_t b, int64_t q0, int64_t nq, int64_t k0,
                         int64_t nk)
{
    if (nq <= 0 || nk <= 0)
        return 0;
    /* hi(i) is non-decreasing: rows with hi(i) > k0 form a suffix [i1, q0+nq);
     * lo(i) is non-decreasing: rows with lo(i) < k0 + nk form a prefix.  They
     * meet iff row i1 exists and has lo(i1) < k0 + nk. */
    int64_t l = q0, h = q0 + nq;
    while (l < h) {
        int64_t mid = l + (h - l) / 2, lo, hi;
        uly_visible_range(a, b, mid, &lo, &hi);
        if (hi > k0)
            h = mid;
        else
            l = mid + 1;
    }
    if (l == q0 + nq)
        return 0;
    int64_t lo, hi;
    uly_visible_range(a, b, l, &lo, &hi);
    return lo < k0 + nk && hi > lo;
}

double uly_attn_pairs(const uly_attn_desc *a)
{
    const int64_t rows = a->doc_offsets ? a->batch : 1;
    double s = 0;
    for (int64_t b = 0; b < rows; b++)
        s += (double)uly_attn_pairs_range(a, b, 0, a->seq, 0, a->seq);
    return s / (double)rows;
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

const char *uly_vol_name(int which)
{
    static const char *const names[ULY_VOL_COUNT - ULY_A2A_COUNT] = {
        "ring-k", "ring-v", "ring-bk", "ring-bv", "ring-dk", "ring-dv", "ag-k", "ag-v", "rs-dk", "rs-dv"};
    if (which >= ULY_A2A_COUNT && which < ULY_VOL_COUNT)
        return names[which - ULY_A2A_COUNT];
    return uly_a2a_name(which);
}

int uly_vol_backward(int which)
{
    switch (which) {
    case ULY_A2A_DO: case ULY_A2A_DQ: case ULY_A2A_DK: case ULY_A2A_DV:
    case ULY_RING_BK: case ULY_RING_BV: case ULY_RING_DK: case ULY_RING_DV:
    case ULY_RS_DK: case ULY_RS_DV:
        return 1;
    default:
        return 0;
    }
}
