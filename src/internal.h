/* SPDX-License-Identifier: Apache-2.0 */
/*
 * internal.h -- helpers shared by the library's translation units.
 * Not installed; nothing here is part of the API.
 */
#ifndef ULY_INTERNAL_H
#define ULY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ulysses.h"
#include "base/base.h"

#if defined(__GNUC__)
#define ULY_PRINTF(a, b) __attribute__((format(printf, a, b)))
/* Library-internal functions: uly_-prefixed (for static linking) and not
 * exported from the shared library. */
#define ULY_INTERNAL __attribute__((visibility("hidden")))
#else
#define ULY_PRINTF(a, b)
#define ULY_INTERNAL
#endif

/* Record a detailed message for uly_last_error() and return status. */
ULY_INTERNAL int uly_set_error(int status, const char *fmt, ...) ULY_PRINTF(2, 3);
/* Forget the last message of this thread. */
ULY_INTERNAL void uly_clear_error(void);

/* Checked size arithmetic (uly_mul_size, uly_mul_sizes): base/base.h. */

/* Allocation hooks (declared in ulysses.h): every library allocation goes
 * through uly_malloc / uly_calloc so that a test can make the k-th
 * allocation fail (see uly_test_fail_alloc_at). */

/* Tests: the blocked forward computes S with the BLAS zeroing it (beta = 0)
 * and P in place when on, else (the default) with beta = 1 on the zeros
 * its exp pass leaves behind.  Process-wide; call it outside kernel calls. */
ULY_INTERNAL void uly_kernel_fwd_zero_pass(int on);

/* Agreed configurations as X-macro field lists, X(value, name): the
 * description's fields every context agrees on first (sbits: the scale's
 * bits, uly_double_bits), and the three expansions (count, names, values
 * into v[i++]). */
#define ULY_DESC_FIELDS(X)          \
    X(a->batch, "batch")            \
    X(a->seq, "sequence length")    \
    X(a->heads, "heads")            \
    X(a->kv_heads, "kv-heads")      \
    X(a->head_dim, "head dim")      \
    X(a->causal, "causal")          \
    X(a->window, "window")          \
    X(a->dtype, "dtype")            \
    X(sbits, "scale")
#define ULY_FIELD_COUNT(value, name) +1
#define ULY_FIELD_NAME(value, name) name,
#define ULY_FIELD_VALUE(value, name) v[i++] = (int64_t)(value);
static inline int64_t uly_double_bits(double x)
{
    int64_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

/* Plan layer (src/plan_methods.c): KV heads travelling on a rank's ring
 * (*kvh) and heads of its dK, dV (*dkvh); tokens of ring position j's chunk. */
ULY_INTERNAL void uly_plan_ring_heads(const uly_attn_desc *a, const uly_sp_plan *p, int rank, int64_t *kvh,
                                      int64_t *dkvh);
ULY_INTERNAL int64_t uly_plan_chunk_tokens(const uly_sp_plan *p, int64_t N, int j);

/* A 64-bit FNV-1a hash of the document offsets (0 without documents), so
 * that ranks can agree on their content with one value. */
ULY_INTERNAL int64_t uly_doc_hash(const uly_attn_desc *a);

/* Document of position i in batch row b: [*ds, *de) (the whole row without
 * documents).  Binary search over the row's D + 1 offsets. */
static inline void uly_doc_bounds(const uly_attn_desc *a, int64_t b, int64_t i, int64_t *ds, int64_t *de)
{
    if (!a->doc_offsets) {
        *ds = 0;
        *de = a->seq;
        return;
    }
    const int64_t *off = a->doc_offsets + b * (a->docs + 1);
    /* first k in [1, D] with off[k] > i; off[D] == N > i */
    int64_t lo = 1, hi = a->docs;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (off[mid] > i)
            hi = mid;
        else
            lo = mid + 1;
    }
    *ds = off[lo - 1];
    *de = off[lo];
}

/* Intersect [*l, *h) with the document of position i in batch row b. */
static inline void uly_doc_clamp(const uly_attn_desc *a, int64_t b, int64_t i, int64_t *l, int64_t *h)
{
    if (!a->doc_offsets)
        return;
    int64_t ds, de;
    uly_doc_bounds(a, b, i, &ds, &de);
    if (ds > *l)
        *l = ds;
    if (de < *h)
        *h = de;
}

/* Keys visible to query i of batch row b: [*lo, *hi) (an interval under
 * every mask; both ends non-decreasing in i). */
static inline void uly_visible_range(const uly_attn_desc *a, int64_t b, int64_t i, int64_t *lo, int64_t *hi)
{
    int64_t l = 0, h = a->seq;
    if (a->causal)
        h = i + 1;
    if (a->window > 0) {
        if (i - a->window + 1 > l)
            l = i - a->window + 1;
        if (!a->causal && i + a->window < h)
            h = i + a->window;
    }
    uly_doc_clamp(a, b, i, &l, &h);
    *lo = l;
    *hi = h;
}

/* Queries of batch row b that see key j: [*lo, *hi). */
static inline void uly_seen_by_range(const uly_attn_desc *a, int64_t b, int64_t j, int64_t *lo, int64_t *hi)
{
    int64_t l = 0, h = a->seq;
    if (a->causal)
        l = j;
    if (a->window > 0) {
        if (j + a->window < h)
            h = j + a->window;
        if (!a->causal && j - a->window + 1 > l)
            l = j - a->window + 1;
    }
    uly_doc_clamp(a, b, j, &l, &h);
    *lo = l;
    *hi = h;
}

#endif
