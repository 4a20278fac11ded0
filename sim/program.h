/* SPDX-License-Identifier: Apache-2.0 */
/*
 * program.h -- per-method layer programs (private to libusim): the forward,
 * backward and recompute of each layer as compute and communication
 * operations on the scheduler's streams, plus ZeRO gathers, gradient
 * reductions and the optimizer step of one iteration.
 */
#ifndef USIM_PROGRAM_H
#define USIM_PROGRAM_H

#include "cost.h"
#include "jobcoll.h"
#include "opsched.h"
#include "usim.h"

typedef struct usim_prog {
    usim_graph g;
    const usim_platform *p;
    const usim_model *m;
    const usim_job *j;
    const usim_shape *x;
    const usim_flops *f;
    const usim_jobcoll *jc;
    int last_c;                  /* last compute op */
    int *layer_last_c;           /* last compute op of each layer (current pass) */
    int *bwd_last_c;
    int last_grad;
    int last_sp;
    /* long-context costs of the ops built (seconds, summed over the iteration) */
    double lc_tiled_s, lc_off_s, lc_off_copy_s, lc_param_s, lc_adam_s;
} usim_prog;

/* Prepare b for (p, m, j, x, f, jc): rates, per-layer arrays (no engine). */
int usim_prog_init(usim_prog *b, const usim_platform *p, const usim_model *m, const usim_job *j,
                   const usim_shape *x, const usim_flops *f, const usim_jobcoll *jc);
void usim_prog_free(usim_prog *b);
/* Append the operations of one iteration of micro_steps micro-steps. */
int usim_program_build(usim_prog *b, int micro_steps);

#endif
