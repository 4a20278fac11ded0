/* SPDX-License-Identifier: Apache-2.0 */
/*
 * error.c -- status strings of libulysses, and its names for the base
 * library's last-error message and allocation hooks (src/base/base.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char *const status_text[ULY_NSTATUS] = {
    [ULY_OK] = "success",
    [ULY_EINVAL] = "invalid argument",
    [ULY_EOVERFLOW] = "size overflow",
    [ULY_ENOMEM] = "out of memory",
    [ULY_EIO] = "input/output error",
    [ULY_EFORMAT] = "malformed file",
    [ULY_EMISMATCH] = "ranks disagree on the configuration",
    [ULY_EMPI] = "MPI error",
    [ULY_ENONFINITE] = "non-finite input",
    [ULY_EPEER] = "another rank failed",
    [ULY_EUNAVAIL] = "resource not available",
    [ULY_ERANGE] = "capacity exhausted",
};

const char *uly_strerror(int status)
{
    if (status < 0 || status >= ULY_NSTATUS)
        return "unknown status";
    return status_text[status];
}

/* The message, the allocation hooks and the checked arithmetic are the base
 * library's (src/base), shared with the simulator. */

const char *uly_last_error(void)
{
    return uly_base_last_error();
}

void uly_clear_error(void)
{
    uly_base_clear_error();
}

int uly_set_error(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    uly_base_vset_error(status, fmt, ap);
    va_end(ap);
    return status;
}

/* ------------------------------------------------------- allocation hooks */

/* Fault injection for tests: when k > 0, the k-th allocation from now fails
 * (counting from 1).  Exported with the uly_ prefix but not in the public
 * header. */
void uly_test_fail_alloc_at(long k);
long uly_test_alloc_count(void);
/* The library's uly_base_alloc_bytes (its own copy of the base library). */
uint64_t uly_test_alloc_bytes(void);

void uly_test_fail_alloc_at(long k)
{
    uly_base_fail_alloc_at(k);
}

long uly_test_alloc_count(void)
{
    return uly_base_alloc_count();
}

uint64_t uly_test_alloc_bytes(void)
{
    return uly_base_alloc_bytes();
}

void *uly_malloc(size_t n)
{
    return uly_base_malloc(n);
}

void *uly_calloc(size_t n, size_t size)
{
    return uly_base_calloc(n, size);
}

void uly_free(void *p)
{
    uly_base_free(p);
}

int uly_heap_usage(uint64_t *live, uint64_t *peak)
{
    return uly_base_heap_usage(live, peak) ? ULY_OK : ULY_EUNAVAIL;
}

void uly_heap_reset_peak(void)
{
    uly_base_heap_reset_peak();
}
