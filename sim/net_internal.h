/* SPDX-License-Identifier: Apache-2.0 */
/*
 * net_internal.h -- the network object, shared by its two halves (private
 * to libusim): topo.c (the links of the topology, routes, units of GPUs)
 * and net.c (flows sharing links with max-min fairness, the runs).
 */
#ifndef USIM_NET_INTERNAL_H
#define USIM_NET_INTERNAL_H

#include <stdint.h>
#include "usim.h"
#include "usim_internal.h"
#include "coll_engine.h"

struct flow;
struct linkq;

struct usim_net {
    /* topology (topo.c) */
    usim_platform p;
    int gpus, gpn, dom, nodes, nlinks;
    int mesh_base;      /* first MESH link (full-mesh nodes), else -1 */
    double bw_kind[4];  /* bytes/s of NVLink, NIC, spine and mesh links (link_bw) */
    /* flow solver (net.c) */
    struct linkq *lq;          /* mostly untouched: a class simulation loads few links */
    int *lq_used, nused, capused;   /* links whose queue was allocated (freed at the end) */
    usim_engine *eng;
    usim_coll_engine *coll;          /* the collectives' state (opaque: coll_engine.h) */
    /* per run */
    usim_time lat[USIM_NCLASS];      /* route latency per link class (the platform's between runs) */
    const usim_xfer *x;
    int count;
    struct flow *fl;
    int *dep_off, *dep_list;
    usim_time *finish;
    int *dirty, ndirty;
    int *ld_link, *ld_w, *ld_flow, *ld_pos;   /* load entries of the run */
    unsigned char *link_dirty;
    int reshare_pending;
    int err;
    /* work budget (usim_net_set_work_limit): flow and link visits of the
     * rate recomputations; over the limit, the run stops with USIM_ELIMIT */
    uint64_t work, work_limit;
    /* scratch for recomputation */
    int *comp, *lstack, ncomp, nls;
    uint32_t *fmark, *lmark, epoch;
    double *cap;
    int *cnt;
    unsigned char *frozen;
    uint64_t last_events;
};

/* Bandwidth of link l from its kind (no per-link array: a network of 10^6
 * GPUs has 4 x 10^6 links, of which a simulation touches a few thousand). */
static inline double usim_link_bw(const usim_net *n, int l)
{
    int G = n->gpus;
    return l < 2 * G ? n->bw_kind[0] : l < 4 * G ? n->bw_kind[1]
         : l < 4 * G + 2 * n->nodes ? n->bw_kind[2] : n->bw_kind[3];
}
/* Fill the topology of n (n->p, gpus, links, bandwidths) from platform p and
 * gpus >= 1; USIM_EINVAL with a message for a platform whose NVLink domain
 * or full mesh does not fit its nodes. */
int usim_net_topo_init(usim_net *n, const usim_platform *p, int gpus);

#endif
