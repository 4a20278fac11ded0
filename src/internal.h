/*
 * internal.h -- helpers shared by the library's translation units.
 * Not installed; nothing here is part of the API.
 */
#ifndef ULY_INTERNAL_H
#define ULY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "ulysses.h"

#if defined(__GNUC__)
#define ULY_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define ULY_PRINTF(a, b)
#endif

/* Record a detailed message for uly_last_error() and return status. */
int uly_set_error(int status, const char *fmt, ...) ULY_PRINTF(2, 3);
/* Forget the last message of this thread. */
void uly_clear_error(void);

/* Checked size arithmetic: return 0 and set *out, or 1 on overflow. */
static inline int uly_mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a)
        return 1;
    *out = a * b;
    return 0;
}

/* *out = product of n non-negative int64 values (as size_t); 1 on overflow or negative. */
int uly_mul_sizes(size_t *out, int n, const int64_t *v);

/* Allocation hooks: every library allocation goes through these so that a
 * test can make the k-th allocation fail (see uly_test_fail_alloc_at). */
void *uly_malloc(size_t n);
void *uly_calloc(size_t n, size_t size);
void uly_free(void *p);

#endif
