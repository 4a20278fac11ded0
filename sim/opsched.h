/* SPDX-License-Identifier: Apache-2.0 */
/*
 * opsched.h -- the operation-graph scheduler (private to libusim).  Operations
 * (compute kernels, collectives) run in program order on their stream once
 * their dependencies are done; communications that overlap in time share the
 * representative GPU's link classes (processor sharing); ring-attention tails
 * have a closed-form end.  The graph is executed on the event engine.
 */
#ifndef USIM_OPSCHED_H
#define USIM_OPSCHED_H

#include "usim.h"

#define USIM_NSTREAM 4
enum { USIM_ST_COMPUTE = 0, USIM_ST_SP, USIM_ST_PARAM, USIM_ST_GRAD };
const char *usim_stream_name(int stream);

/* Which part of the iteration an operation belongs to (labels for accounting). */
enum { USIM_PASS_OTHER = 0, USIM_PASS_FWD, USIM_PASS_BWD, USIM_PASS_RECOMPUTE };

typedef struct usim_op {
    usim_time dur, start, end;
    int stream, kind;      /* kind: USIM_KIND_* for communication, -1 compute */
    int dep[3];
    int coll;              /* USIM_C_* or -1 */
    int layer;
    int pass;              /* USIM_PASS_* */
    const char *name;
    int done;
    int mult;              /* collective instances this op stands for */
    int sdep;              /* op that must have started (ring tails), or -1 */
    usim_time tail_B, tail_H;  /* ring tail: block and hop durations */
    int tail_R;            /* ring tail: ring size (0: not a tail) */
    usim_time tail_e1;     /* ring tail: end bound from compute and the first hop */
    int tail;              /* hop chain: its ring tail op, or -1 */
    /* communication under contention: rem is isolated-time work left (ps) */
    double rem, rate, u[USIM_NCLASS];
    usim_time t_last;
    uint32_t ver;
} usim_op;

typedef struct usim_graph {
    usim_op *ops;
    int n, cap;
    int *sq[USIM_NSTREAM];
    int nsq[USIM_NSTREAM], capsq[USIM_NSTREAM], head[USIM_NSTREAM];
    int busy[USIM_NSTREAM];
    int err;
    int contention;        /* share link classes between overlapping communications */
    int pass;              /* USIM_PASS_* given to operations added from now on */
    int active[USIM_NSTREAM], nactive;
    usim_engine *eng;      /* NULL while only building (byte counts) */
} usim_graph;

/* Append an operation to stream's program; d0..d2: ops it waits for (-1: none).
 * Returns its id, or -1 with g->err set. */
int usim_graph_add(usim_graph *g, int stream, usim_time dur, int kind, int coll_id, int layer,
                   const char *name, int d0, int d1, int d2);
void usim_graph_free(usim_graph *g);
/* Execute the graph on g->eng until every operation is done. */
int usim_graph_run(usim_graph *g);
/* Exposed communication: instants when the compute stream is idle while some
 * communication runs, attributed to the first active kind in the order sp,
 * param, grad (seconds). */
int usim_graph_exposed(const usim_graph *g, usim_time end, double out[USIM_NKIND]);
/* The same from instant `from` on (the part of an iteration after a mark). */
int usim_graph_exposed_from(const usim_graph *g, usim_time from, usim_time end, double out[USIM_NKIND]);

#endif
