/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pipeline.h -- pipeline-parallel schedules (private to libusim): the layers
 * of each pipeline rank (Megatron-Core's uneven first / last stages), the
 * micro-batches a rank keeps in flight, and the run of Megatron-Core's 1F1B
 * and interleaved 1F1B schedules over every rank from per-chunk forward and
 * backward times and the activation transfers between virtual stages.
 */
#ifndef USIM_PIPELINE_H
#define USIM_PIPELINE_H

#include "usim.h"

/* Virtual pipeline chunks per rank of a job (1 when vpp is 0 or 1). */
static inline int usim_pp_vchunks(const usim_job *j)
{
    return j->vpp > 1 ? j->vpp : 1;
}

/* Check the pipeline fields of a job whose pp and dp are resolved (vpp,
 * pp_first_layers, pp_last_layers, micro-batches % pp for interleaving,
 * offload refused with pp > 1); EINVAL with the reason. */
int usim_pp_check(const usim_model *m, const usim_job *j);

/* Layers of pipeline rank r (0 <= r < pp) of a checked job: first / last as
 * given, the rest split evenly over the other ranks (Megatron-Core
 * get_num_layers_to_build); each rank's chunk holds layers / V of them. */
int64_t usim_pp_rank_layers(const usim_model *m, const usim_job *j, int r);

/* Chunk forwards rank r holds before its first backward frees one: 1F1B
 * min(pp - r, m); interleaved min(2 (pp - r - 1) + (V - 1) pp + 1, m V)
 * (Megatron-Core get_pp_rank_microbatches' warm-up count plus the forward of
 * the first steady step).  Each chunk forward stores layers / V layers. */
int usim_pp_inflight_chunks(int pp, int V, int micro, int r);

/* One run of the schedule.  Virtual stage vs = c pp + r is chunk c of rank r
 * (S = pp V stages).  F[r V + c], B[r V + c]: forward and backward time of one
 * micro-batch through chunk c of rank r; pf[vs], pb[vs] (vs < S - 1): the
 * activation transfer vs -> vs + 1 and the gradient transfer vs + 1 -> vs
 * (NULL: none).  Each rank runs its actions in Megatron-Core's order, one at
 * a time; an action starts when the rank is free and its input has arrived. */
typedef struct usim_pp_in {
    int pp, V, m;
    const usim_time *F, *B, *pf, *pb;
} usim_pp_in;

typedef struct usim_pp_out {
    usim_time makespan;          /* last backward of any rank */
    usim_time *rank_end;         /* [pp]: each rank's last backward (caller's array) */
    int *inflight;               /* [pp]: most chunk forwards held at once (caller's; may be NULL) */
} usim_pp_out;

int usim_pp_run(const usim_pp_in *in, usim_pp_out *out);

#endif
