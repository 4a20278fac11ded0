/*
 * internal.h -- helpers shared by the library's translation units.
 * Not installed; nothing here is part of the API.
 */
#ifndef ULY_INTERNAL_H
#define ULY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
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

/* Keys visible to query i: [*lo, *hi) (an interval under every mask). */
static inline void uly_visible_range(const uly_attn_desc *a, int64_t i, int64_t *lo, int64_t *hi)
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
    *lo = l;
    *hi = h;
}

/* Queries that see key j: [*lo, *hi). */
static inline void uly_seen_by_range(const uly_attn_desc *a, int64_t j, int64_t *lo, int64_t *hi)
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
    *lo = l;
    *hi = h;
}

#endif
