/*
 * usim_internal.h -- helpers shared by libusim's translation units (not API).
 */
#ifndef USIM_INTERNAL_H
#define USIM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "usim.h"

#if defined(__GNUC__)
#define USIM_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define USIM_PRINTF(a, b)
#endif

/* Record a message for usim_last_error() and return status. */
int usim_set_error(int status, const char *fmt, ...) USIM_PRINTF(2, 3);

/* Allocation used by the simulation code; tests can make the Nth call fail. */
void *usim_malloc(size_t n);
void *usim_calloc(size_t n, size_t size);
void *usim_realloc(void *p, size_t n);
/* Make allocation number n (1-based, counted from this call) fail; 0: never.
 * Returns the number of allocations made since the previous call. */
long usim_test_fail_alloc_at(long n);

/* Seconds -> picoseconds, rounded to nearest; saturates at INT64_MAX (about
 * 107 days) instead of overflowing the conversion. */
static inline usim_time usim_ps(double seconds)
{
    double ps = seconds * 1e12 + 0.5;
    if (!(ps < 9.2e18))
        return INT64_MAX;
    if (ps < -9.2e18)
        return INT64_MIN;
    return (usim_time)ps;
}

static inline double usim_sec(usim_time t)
{
    return (double)t * 1e-12;
}

#endif
