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

enum { USIM_PP_NONE = 0, USIM_PP_CHUNK, USIM_PP_RANK };

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
    /* Pipeline (simulate.c): what one build holds; all 0 for a whole iteration
     * (every layer of x->Ls, the embedding and LM head, micro_steps micro-steps,
     * the reductions and the optimizer).  USIM_PP_CHUNK: one micro-batch through
     * pp_layers layers, gradients reduced only per micro-batch (ZeRO >= 2), no
     * optimizer; USIM_PP_RANK: one micro-batch through pp_layers layers, the
     * step's gradient reduction (ZeRO < 2) and the optimizer step. */
    int pp_mode, pp_layers, pp_emb, pp_head;
    int fwd_ops, bwd_ops;        /* ops built before the backward; before the optimizer */
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
