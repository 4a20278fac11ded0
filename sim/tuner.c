/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tuner.c -- which NCCL algorithms and protocols apply to a collective, and
 * NCCL's cost estimate of each (src/graph/tuning.cc, ncclTopoTuneModel and
 * ncclTopoGetAlgoTime: time = latency + bytes / bandwidth, with NCCL's
 * latency structure, protocol factors, LL ceiling and tree factor; the
 * bandwidths are derived from the platform's link rates where NCCL uses
 * per-channel tables measured on NVIDIA's systems).
 *
 * NCCL runs the pair its model predicts fastest.  The simulator applies the
 * same rule with its own model: coll_run.c runs every applicable pair at flow
 * level and keeps the fastest, so the choice and the reported time come from
 * one model (and stay monotone in every bandwidth: a minimum of monotone
 * times).  The estimate is reported beside the simulated time.
 *
 * The names of the collective types, algorithms and protocols are here too,
 * so that the tuner calls nothing in the collective files (they call it).
 *
 * Not here: the transfers of each algorithm (coll_ring.c, coll_tree.c).
 */
#include <math.h>
#include <string.h>
#include <strings.h>

#include "usim.h"
#include "usim_internal.h"

/* NCCL tuning.cc, hwLatencies for the ring algorithm (microseconds per step):
 * NVLink LL 0.6, LL128 1.9, Simple 3.4; network LL 2.7, LL128 4.0, Simple 14.
 * The platform's latency_us is taken as the Simple latency of a step; LL and
 * LL128 scale it by NCCL's ratios. */
static const double lat_ratio[USIM_NPROTO][USIM_NCLASS] = {
    {1, 1},                          /* auto (unused) */
    {0.6 / 3.4, 2.7 / 14.0},         /* LL */
    {1.9 / 3.4, 4.0 / 14.0},         /* LL128 */
    {1, 1},                          /* Simple */
};

/* Tree all-reduce bandwidth factor (tuning.cc: "busBw * .92" for the tree). */
#define TREE_BW_FACTOR 0.92

/* LL's bus bandwidth ceiling (tuning.cc llMaxBws, GB/s): one node 87.7
 * (Ampere) or 141 (Hopper; taken for platforms with NVLS), two nodes 39.0,
 * more 20.4 (Intel hosts).  LL spins on flags in host-visible buffers across
 * nodes, which is what caps it. */
static double ll_max_Bps(const usim_platform *pf, int nodes)
{
    if (nodes <= 1)
        return (pf->nvls ? 141.0 : 87.7) * 1e9;
    return (nodes == 2 ? 39.0 : 20.4) * 1e9;
}

const char *usim_coll_name(usim_coll_type t)
{
    static const char *const names[USIM_NCOLL] = {
        "all-to-all", "all-to-all-pairwise", "all-gather", "reduce-scatter",
        "all-reduce", "ring-shift", "send-recv"};
    return (t >= 0 && t < USIM_NCOLL) ? names[t] : "?";
}

const char *usim_algo_name(usim_algo a)
{
    static const char *const n[USIM_NALGO] = {"auto", "ring", "tree", "nvls"};
    return (a >= 0 && a < USIM_NALGO) ? n[a] : "?";
}

const char *usim_proto_name(usim_proto p)
{
    static const char *const n[USIM_NPROTO] = {"auto", "LL", "LL128", "Simple"};
    return (p >= 0 && p < USIM_NPROTO) ? n[p] : "?";
}

int usim_algo_parse(const char *s, usim_algo *a)
{
    for (int i = 0; i < USIM_NALGO; i++)
        if (strcasecmp(s, usim_algo_name((usim_algo)i)) == 0) {
            *a = (usim_algo)i;
            return USIM_OK;
        }
    return usim_set_error(USIM_EINVAL, "unknown algorithm '%s' (auto, ring, tree, nvls)", s);
}

int usim_proto_parse(const char *s, usim_proto *p)
{
    for (int i = 0; i < USIM_NPROTO; i++)
        if (strcasecmp(s, usim_proto_name((usim_proto)i)) == 0) {
            *p = (usim_proto)i;
            return USIM_OK;
        }
    return usim_set_error(USIM_EINVAL, "unknown protocol '%s' (auto, LL, LL128, Simple)", s);
}

/* LL: 8-byte lines of 4 bytes of data and a 4-byte flag (device.h,
 * ncclLLFifoLine); LL128: 128-byte lines with 120 bytes of data
 * (NCCL_LL128_LINESIZE, NCCL_LL128_DATAELEMS); Simple: the data alone. */
double usim_proto_wire(usim_proto p)
{
    switch (p) {
    case USIM_PROTO_LL: return 2.0;
    case USIM_PROTO_LL128: return 128.0 / 120.0;
    default: return 1.0;
    }
}

double usim_proto_latency(usim_proto p, int cls)
{
    if (p < 0 || p >= USIM_NPROTO || cls < 0 || cls >= USIM_NCLASS)
        return 1;
    return lat_ratio[p][cls];
}

int usim_mesh_ring_channels(int P)
{
    int c = 0;
    for (int s = 1; s < P; s++)
        c += usim_gcd(s, P) == 1;
    return c > 0 ? c : 1;
}

/* Bus bandwidth of NCCL's channel rings on the group (bytes/s): one channel
 * per rail leaves each node through a different NIC, so a multi-node ring
 * moves g NICs' worth; inside the node each GPU forwards g-1 of the g
 * channels over NVLink. */
static double ring_busbw(const usim_platform *pf, const usim_group_shape *s)
{
    /* full-mesh node: the disjoint rings of coll_ring.c, one peer link each */
    if (s->N <= 1 && pf->full_mesh && s->uniform && s->g > 1)
        return usim_mesh_ring_channels(s->g) * usim_mesh_link_Bps(pf);
    if (s->N <= 1)
        return usim_nvl_Bps(pf);
    if (!s->uniform)
        return usim_nic_Bps(pf) < usim_nvl_Bps(pf) ? usim_nic_Bps(pf) : usim_nvl_Bps(pf);
    int nics = pf->nics_per_node > 0 && pf->nics_per_node < s->g ? pf->nics_per_node : s->g;
    double bw = nics * usim_nic_Bps(pf);   /* GPUs sharing a NIC share its channels */
    if (s->g > 1) {
        double nv = usim_nvl_Bps(pf) * s->g / (s->g - 1);
        if (nv < bw)
            bw = nv;
    }
    return bw;
}

static int log2ceil(int n)
{
    int k = 0;
    while ((1 << k) < n)
        k++;
    return k;
}

double usim_tune_estimate(const usim_platform *pf, usim_coll_type t, const usim_group_shape *s,
                          double bytes, usim_algo a, usim_proto p)
{
    int P = s->N * s->g;
    if (!s->uniform)
        P = s->g;   /* irregular: g carries the group size */
    if (t != USIM_ALLGATHER && t != USIM_REDUCE_SCATTER && t != USIM_ALLREDUCE)
        return -1;
    if (P <= 1)
        return 0;
    int ar = t == USIM_ALLREDUCE;
    double w = usim_proto_wire(p);
    double lv = usim_sec(pf->nvl_lat) * usim_proto_latency(p, USIM_CLASS_NVLINK);
    double ln = usim_sec(pf->nic_lat) * usim_proto_latency(p, USIM_CLASS_NIC);
    switch (a) {
    case USIM_ALGO_RING: {
        int steps = (ar ? 2 : 1) * (P - 1);
        int inter = s->N > 1 ? (ar ? 2 : 1) * (s->N - 1) : 0;
        double fac = (ar ? 2.0 : 1.0) * (P - 1) / P;
        double bw = ring_busbw(pf, s) / w;
        if (p == USIM_PROTO_LL && bw > ll_max_Bps(pf, s->N))
            bw = ll_max_Bps(pf, s->N);
        return (steps - inter) * lv + inter * ln + fac * bytes / bw;
    }
    case USIM_ALGO_TREE: {
        if (!ar || s->N < 2 || !s->uniform)
            return -1;
        double lat = 2 * ((s->g - 1) * lv + log2ceil(s->N) * ln);
        double bw = TREE_BW_FACTOR * ring_busbw(pf, s) / w;
        if (p == USIM_PROTO_LL && bw > ll_max_Bps(pf, s->N))
            bw = ll_max_Bps(pf, s->N);
        return lat + 2.0 * (P - 1) / P * bytes / bw;
    }
    case USIM_ALGO_NVLS: {
        if (!pf->nvls || pf->full_mesh || s->N != 1 || p != USIM_PROTO_SIMPLE)
            return -1;
        /* per GPU through its NVLink: all-reduce S (to the switch's reduction)
         * + S/P (its reduced slice, multicast); all-gather and reduce-scatter
         * S one way and S/P the other (see coll_tree.c) */
        double most = ar ? bytes * (1.0 + 1.0 / P) : bytes;
        return lv + most / (usim_nvl_Bps(pf) * pf->nvls_eff);
    }
    default:
        return -1;
    }
}

int usim_tune_candidates(const usim_platform *pf, usim_coll_type t, const usim_group_shape *s,
                         double bytes, usim_algo want_a, usim_proto want_p, usim_algo *as,
                         usim_proto *ps, double *est, int max)
{
    if (want_a == USIM_ALGO_AUTO)
        want_a = t == USIM_ALLREDUCE ? pf->algo_allreduce
               : t == USIM_ALLGATHER ? pf->algo_allgather
               : t == USIM_REDUCE_SCATTER ? pf->algo_reduce_scatter : USIM_ALGO_AUTO;
    if (want_p == USIM_PROTO_AUTO)
        want_p = pf->proto;
    /* Simple first: equal times keep the earlier candidate */
    static const usim_proto order[3] = {USIM_PROTO_SIMPLE, USIM_PROTO_LL128, USIM_PROTO_LL};
    int n = 0;
    for (int ai = USIM_ALGO_RING; ai < USIM_NALGO; ai++) {
        if (want_a != USIM_ALGO_AUTO && ai != (int)want_a)
            continue;
        for (int k = 0; k < 3; k++) {
            usim_proto pi = order[k];
            if (want_p != USIM_PROTO_AUTO && pi != want_p)
                continue;
            double e = usim_tune_estimate(pf, t, s, bytes, (usim_algo)ai, pi);
            if (e >= 0 && n < max) {
                as[n] = (usim_algo)ai;
                ps[n] = pi;
                est[n] = e;
                n++;
            }
        }
    }
    if (n == 0)
        return usim_set_error(USIM_EINVAL,
                              "%s: algorithm %s with protocol %s does not apply to a group of %d GPU(s) "
                              "on %d node(s)%s", usim_coll_name(t), usim_algo_name(want_a),
                              usim_proto_name(want_p), s->uniform ? s->N * s->g : s->g, s->N,
                              want_a == USIM_ALGO_NVLS && !pf->nvls ? " (the platform has no NVLS)" : ""),
               -USIM_EINVAL;
    return n;
}
