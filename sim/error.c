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

void usim_invariant_failed(const char *expr, const char *file, int line)
{
    fprintf(stderr, "usim: invariant violated: %s (%s:%d)\n", expr, file, line);
    abort();
}
