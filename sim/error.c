/*
 * error.c -- status strings and the per-thread "last error" message of libusim.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "usim.h"
#include "usim_internal.h"

static _Thread_local char last_error[512];

const char *usim_strerror(int status)
{
    static const char *const text[USIM_NSTATUS] = {
        "success", "invalid argument", "out of memory", "input/output error",
        "malformed input", "not found"};
    if (status < 0 || status >= USIM_NSTATUS)
        return "unknown error";
    return text[status];
}

const char *usim_last_error(void)
{
    return last_error;
}

int usim_set_error(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

/* Allocation counter for failure-injection tests (one thread at a time). */
static long alloc_count, alloc_fail_at;

long usim_test_fail_alloc_at(long n)
{
    long c = alloc_count;
    alloc_count = 0;
    alloc_fail_at = n;
    return c;
}

static int alloc_ok(void)
{
    alloc_count++;
    return !(alloc_fail_at > 0 && alloc_count == alloc_fail_at);
}

void *usim_malloc(size_t n)
{
    return alloc_ok() ? malloc(n) : NULL;
}

void *usim_calloc(size_t n, size_t size)
{
    return alloc_ok() ? calloc(n, size) : NULL;
}

void *usim_realloc(void *p, size_t n)
{
    return alloc_ok() ? realloc(p, n) : NULL;
}

void usim_invariant_failed(const char *expr, const char *file, int line)
{
    fprintf(stderr, "usim: invariant violated: %s (%s:%d)\n", expr, file, line);
    abort();
}
