/*
 * trace.h -- the Chrome/Perfetto trace of one simulated iteration (private
 * to libusim).
 */
#ifndef USIM_TRACE_H
#define USIM_TRACE_H

#include <stdio.h>
#include "jobcoll.h"
#include "opsched.h"

void usim_trace_write(FILE *t, const usim_graph *g, const usim_jobcoll *jc, const char *title);

#endif
