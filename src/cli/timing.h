/* SPDX-License-Identifier: Apache-2.0 */
/* timing.h -- wall clock and order statistics for the drivers. */
#ifndef ULY_CLI_TIMING_H
#define ULY_CLI_TIMING_H

#include <stddef.h>

double now_seconds(void);
/* CPU time of the process (all its threads), in seconds: what a timed call
 * used of the cores, whatever other processes take from them. */
double cpu_seconds(void);
/* Sort a copy-free array in place and return min / median / max. */
typedef struct stats { double min, median, max; } stats;
stats stats_of(double *x, size_t n);

#endif
