/* SPDX-License-Identifier: Apache-2.0 */
/* timing.c -- see timing.h. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <time.h>

#include "timing.h"

double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

stats stats_of(double *x, size_t n)
{
    stats s = {0, 0, 0};
    if (n == 0)
        return s;
    qsort(x, n, sizeof *x, cmp_double);
    s.min = x[0];
    s.max = x[n - 1];
    s.median = n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
    return s;
}
