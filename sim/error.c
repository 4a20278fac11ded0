/* SPDX-License-Identifier: Apache-2.0 */
/*
 * error.c -- status strings of libusim, and its names for the base
 * library's last-error message and allocation hooks (src/base/base.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "usim.h"
#include "usim_internal.h"
#include "base/base.h"

const char *usim_strerror(int status)
{
    static const char *const text[USIM_NSTATUS] = {
        "success", "invalid argument", "out of memory", "input/output error",
        "malformed input", "not found", "over the work budget"};
    if (status < 0 || status >= USIM_NSTATUS)
        return "unknown error";
    return text[status];
}

/* The message and the allocation hooks are the base library's (src/base),
 * shared with libulysses: one implementation, one fault-injection counter. */

const char *usim_last_error(void)
{
    return uly_base_last_error();
}

int usim_set_error(int status, const char *fmt, ...)
{
    /* messages hold names, keys and strings read from files: every one is
     * made safe to print here (uly_sanitize), once for every caller */
    char raw[1024], safe[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    uly_sanitize(safe, sizeof safe, raw);
    uly_base_set_error(status, "%s", safe);
    return status;
}

long usim_test_fail_alloc_at(long n)
{
    return uly_base_fail_alloc_at(n);
}

void *usim_malloc(size_t n)
{
    return uly_base_malloc(n);
}

void *usim_calloc(size_t n, size_t size)
{
    return uly_base_calloc(n, size);
}

void *usim_realloc(void *p, size_t n)
{
    return uly_base_realloc(p, n);
}

void usim_invariant_failed(const char *expr, const char *file, int line)
{
    fprintf(stderr, "usim: invariant violated: %s (%s:%d)\n", expr, file, line);
    abort();
}
