/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jobcoll.h -- the collectives a job runs (private to libusim).  One
 * descriptor per collective id; the simulation (simulate.c, program.c) and
 * the byte check (usim_sp_layer_bytes) both take their collectives from
 * usim_jc_describe, so what is counted is what is run.
 */
#ifndef USIM_JOBCOLL_H
#define USIM_JOBCOLL_H

#include "cost.h"
#include "job.h"
#include "usim.h"

enum { USIM_C_A2A0 = 0,                         /* + ULY_A2A_* (8) */
       USIM_C_AG = 8, USIM_C_RS,                /* tensor parallelism (megatron-sp, or composed) */
       USIM_C_HOP_F, USIM_C_HOP_B, USIM_C_HOP_DKV, /* ring attention hops */
       USIM_C_Z_AG, USIM_C_Z_RS, USIM_C_Z_AR,   /* per-layer ZeRO / DP */
       USIM_C_E_AG, USIM_C_E_RS, USIM_C_E_AR,   /* embedding / LM head parameters */
       USIM_C_POST_AG,                          /* ZeRO-1/2: gather of updated parameters */
       USIM_C_KV_AG, USIM_C_DKV_RS,             /* all-gather CP: K, V gathered; dK, dV scattered */
       USIM_C_PP,                               /* pipeline: activations to the next stage */
       USIM_C_N };

typedef struct usim_jobcoll {
    int have[USIM_C_N];
    usim_coll_result r[USIM_C_N];
} usim_jobcoll;

/* Scratch for one descriptor: the all-to-all's block description and ch
 * (chunks). */
typedef struct usim_jc_buf {
    usim_pairs pairs;
    uint64_t *ch;
} usim_jc_buf;

int usim_jc_buf_new(const usim_layout *l, usim_jc_buf *buf);
void usim_jc_buf_free(usim_jc_buf *buf);

/* The descriptor of collective `id` for this job in *c (pointing into buf and
 * l).  Returns 1 if the job runs it, 0 if not, -1 (error set) when the plan
 * layer refuses its shape. */
int usim_jc_describe(const usim_job *j, const usim_shape *x, const usim_layout *l, int id,
                     usim_jc_buf *buf, usim_coll *c);

/* Memo of simulated collectives, keyed by a hash of (type, groups, bytes).
 * Zero-initialised is empty. */
typedef struct usim_collmemo {
    struct usim_memo_entry *e;
    int n, cap;
    int simulated;          /* distinct collectives run on the network */
} usim_collmemo;
void usim_collmemo_free(usim_collmemo *mc);   /* releases the entries, keeps mc */
/* Simulate c on net, or recall it (same type, groups and bytes). */
int usim_collmemo_run(usim_collmemo *mc, usim_net *net, const usim_coll *c, usim_coll_result *r);

/* Every collective the job uses (have[]): simulated, or recalled from memo,
 * on net when memo is not NULL; else only listed (results zero). */
int usim_jc_run(usim_collmemo *memo, usim_net *net, const usim_job *j, const usim_shape *x,
                const usim_layout *l, usim_jobcoll *jc);

#endif
