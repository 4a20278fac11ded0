/* SPDX-License-Identifier: Apache-2.0 */
/*
 * trace.h -- the Chrome/Perfetto trace of one simulated iteration (private
 * to libusim).
 */
#ifndef USIM_TRACE_H
#define USIM_TRACE_H

#include <stdio.h>
#include "jobcoll.h"
#include "opsched.h"

/* Write the trace of the scheduled graph g to t: the processes of GPUs
 * gpus[0..ngpus) (NULL: GPU 0), each drawn from the representative schedule.
 * 0, or USIM_ENOMEM with the error set; a write error is left in t's
 * error indicator (ferror). */
int usim_trace_write(FILE *t, const usim_graph *g, const usim_jobcoll *jc, const char *title,
                     const int *gpus, int ngpus);

#endif
