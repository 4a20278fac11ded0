/*
 * error.c -- status strings, the per-thread last-error message, checked size
 * arithmetic and the allocation hooks used by every allocating library call.
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
};

static _Thread_local char last_error[1024];

const char *uly_strerror(int status)
{
    if (status < 0 || status >= ULY_NSTATUS)
        return "unknown status";
    return status_text[status];
}

const char *uly_last_error(void)
{
    return last_error;
}

void uly_clear_error(void)
{
    last_error[0] = '\0';
}

int uly_set_error(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

int uly_mul_sizes(size_t *out, int n, const int64_t *v)
{
    size_t p = 1;
    for (int i = 0; i < n; i++) {
        if (v[i] < 0 || (uint64_t)v[i] > SIZE_MAX)
            return 1;
        if (uly_mul_size(p, (size_t)v[i], &p))
            return 1;
    }
    *out = p;
    return 0;
}

/* ------------------------------------------------------- allocation hooks */

/* Fault injection for tests: when fail_at > 0, the fail_at-th allocation
 * from now fails (counting from 1).  Not thread-safe by design: tests use it
 * on one thread.  Exported with the uly_ prefix but not in the public header. */
static long alloc_count;
static long fail_at;

void uly_test_fail_alloc_at(long k);
long uly_test_alloc_count(void);

void uly_test_fail_alloc_at(long k)
{
    fail_at = k;
    alloc_count = 0;
}

long uly_test_alloc_count(void)
{
    return alloc_count;
}

static int should_fail(void)
{
    long k = ++alloc_count;
    return fail_at > 0 && k == fail_at;
}

void *uly_malloc(size_t n)
{
    if (should_fail())
        return NULL;
    return malloc(n ? n : 1);
}

void *uly_calloc(size_t n, size_t size)
{
    if (should_fail())
        return NULL;
    if (n == 0 || size == 0)
        return calloc(1, 1);
    return calloc(n, size);
}

void uly_free(void *p)
{
    free(p);
}
