/* SPDX-License-Identifier: Apache-2.0 */
/*
 * job.h -- a training job's placement on the cluster (private to libusim):
 * which GPUs form each sequence-parallel, ring and ZeRO / data-parallel
 * group.  Degrees are resolved by usim_job_resolve (usim.h); names of
 * methods, recompute policies and communication kinds are in job.c too.
 */
#ifndef USIM_JOB_H
#define USIM_JOB_H

#include "usim.h"

/* Groups of a resolved job: ng groups of size GPUs each, described by
 * strides (usim_grid: no list of G ranks). */
typedef struct usim_layout {
    usim_grid sp;    /* SP groups (ulysses / megatron / ring), or usp a2a groups */
    int sp_ng, sp_size;
    usim_grid ring;  /* usp ring groups */
    int ring_ng, ring_size;
    usim_grid z;     /* ZeRO / DP groups */
    int z_ng, z_size;
    usim_grid tp;    /* tensor-parallel groups (consecutive ranks) */
    int tp_ng, tp_size;
    usim_grid pp;    /* pipeline groups: stage s of group g at index g * pp_size + s */
    int pp_ng, pp_size;
} usim_layout;

int usim_layout_make(const usim_job *j, usim_layout *l);
void usim_layout_free(usim_layout *l);

#endif
