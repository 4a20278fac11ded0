/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tuner.c -- NCCL's cost model (src/graph/tuning.cc of NCCL v2.23.4-1,
 * ncclTopoTuneModel and ncclTopoGetAlgoTime): which algorithms and protocols
 * apply to a collective (ring, tree, NVLS, PAT), the latencies the
 * simulation uses (baseLat once, hwLat per step and link class, NCCL's
 * per-algorithm formulas), the bandwidth factors it applies (tree .92 and
 * size correction, tree LL 1/3.8, ring LL128 .92, PAT .85), LL's ceiling and
 * NCCL's estimate time = latency + bytes / bandwidth of each pair (the
 * bandwidths derived from the platform's link rates where NCCL uses
 * per-channel tables measured on NVIDIA's systems).  doc/simulator.md 4.1.
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

/*
 * NCCL's cost model, from src/graph/tuning.cc of NCCL v2.23.4-1 (the first
 * release with PAT; github.com/NVIDIA/nccl, tag v2.23.4-1), in µs and GB/s.
 * Columns LL, LL128, Simple.  Rows: the algorithms the simulator runs (NCCL's
 * Tree, Ring, NVLS, NVLSTree, PAT; PAT has no row in baseLat/hwLat: zero).
 */
enum { NT_TREE, NT_RING, NT_NVLS, NT_NVLS_TREE, NT_PAT, NT_N };
static const double base_lat_us[NT_N][3] = {   /* baseLat */
    {6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
/* hwLat[NCCL_HW_NVLINK] and hwLat[NCCL_HW_NET] (NCCL's PCI row is not used:
 * every preset's intra-node fabric is taken as NVLink, see doc/simulator.md) */
static const double hw_lat_us[USIM_NCLASS][NT_N][3] = {
    {{.6, 1.25, 4.0}, {.6, 1.9, 3.4}, {0, 0, 25}, {0, 0, 25}, {0, 0, 0}},     /* NVLINK */
    {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 18}, {0, 0, 14}, {0, 0, 0}},    /* NET */
};
/* getNetOverhead: 1 µs per network post on Intel hosts (2 on AMD), tripled
 * for Simple; a multi-node ring's NVLink steps take at least that. */
#define NET_OVERHEAD_US 1.0
/* ncclTopoGetAlgoTime: "Plateau effect of ring": a multi-node Simple ring
 * all-reduce of >= 64 bytes per channel and rank has 1.4x its latency
 * (compute capability >= 8.0; 1.9 before). */
#define RING_PLATEAU 1.4
/* Bus bandwidth factors of ncclTopoTuneModel: the tree all-reduce .92, the
 * tree LL 1/3.8 (against the ring LL's 1/2), the ring LL128 .92 (against the
 * wire's 120/128), PAT .85. */
#define TREE_BW_FACTOR 0.92
#define TREE_LL_DIV 3.8
#define RING_LL128_FACTOR 0.92
#define PAT_BW_FACTOR 0.85
/* treeCorrectionFactor[proto][log2(bytes / 64)], 64 B to 256 MB: NCCL's
 * measured correction of the tree's bandwidth at medium sizes. */
static const double tree_corr[3][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9},
};

static int nt_of(usim_algo a)
{
    switch (a) {
    case USIM_ALGO_TREE: return NT_TREE;
    case USIM_ALGO_NVLS: return NT_NVLS;
    case USIM_ALGO_PAT: return NT_PAT;
    case USIM_ALGO_NVLS_TREE: return NT_NVLS_TREE;
    default: return NT_RING;
    }
}

static int pi_of(usim_proto p)
{
    return p == USIM_PROTO_LL ? 0 : p == USIM_PROTO_LL128 ? 1 : 2;
}

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

static int log2floor(double x)   /* NCCL's log2i: -1 for 0 */
{
    int k = -1;
    while (x >= 1) {
        x /= 2;
        k++;
    }
    return k;
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
    static const char *const n[USIM_NALGO] = {"auto", "ring", "tree", "nvls", "pat",
                                                "nvlstree"};
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
    return usim_set_error(USIM_EINVAL, "unknown algorithm '%s' (auto, ring, tree, nvls, pat, nvlstree)", s);
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

int usim_nccl_latency(const usim_platform *pf, usim_coll_type t, const usim_group_shape *s,
                      double bytes, usim_algo a, usim_proto p, double step_s[USIM_NCLASS], double *fixed_s)
{
    int N = s->N, P = s->uniform ? s->N * s->g : s->g;
    int ar = t == USIM_ALLREDUCE, na = nt_of(a), pi = pi_of(p);
    double intra = hw_lat_us[USIM_CLASS_NVLINK][na][pi];
    /* "With ppn=1 latencies are fully exposed, use the Tree network latency";
     * graphs[a]->latencyInter is the network plugin's latency, which the IB
     * and socket plugins leave 0 */
    double inter = P == N ? hw_lat_us[USIM_CLASS_NIC][NT_TREE][pi] : hw_lat_us[USIM_CLASS_NIC][na][pi];
    double fixed = base_lat_us[na][pi];
    switch (a) {
    case USIM_ALGO_RING:
        if (N > 1) {
            double ovh = NET_OVERHEAD_US * (p == USIM_PROTO_SIMPLE ? 3 : 1);
            if (intra < ovh)
                intra = ovh;
        }
        if (ar && p == USIM_PROTO_SIMPLE && N > 1 && bytes / ((double)s->g * P) >= 64) {
            fixed *= RING_PLATEAU;
            intra *= RING_PLATEAU;
            inter *= RING_PLATEAU;
        }
        break;
    case USIM_ALGO_TREE:
        break;
    case USIM_ALGO_NVLS:   /* latencies = intraLat (+ interLat across nodes), once */
        fixed = intra;
        intra = inter = 0;
        break;
    case USIM_ALGO_NVLS_TREE:   /* baseLat (0) + intraLat + 2 log2i(nNodes) interLat: the
                                 * switch legs pay nothing, the tree's network hops
                                 * inter (its first slice: coll_tree.c) */
        fixed += intra;
        intra = 0;
        break;
    case USIM_ALGO_PAT:    /* once: 8 + log2i(nNodes) interLat / 3.5 + 2.8 nRanks */
        fixed = 8 + log2floor(N) * hw_lat_us[USIM_CLASS_NIC][NT_TREE][pi] / 3.5 + 2.8 * P;
        intra = inter = 0;
        break;
    default:
        return usim_set_error(USIM_EINVAL, "no latency model for algorithm %s", usim_algo_name(a));
    }
    /* the platform's factors on the table (1 unless calibrated): the NVLink
     * one on the per-call and NVLink terms, the NIC one on the network's */
    double sv = pf->nccl_lat_scale[USIM_CLASS_NVLINK] > 0 ? pf->nccl_lat_scale[USIM_CLASS_NVLINK] : 1;
    double sn = pf->nccl_lat_scale[USIM_CLASS_NIC] > 0 ? pf->nccl_lat_scale[USIM_CLASS_NIC] : 1;
    step_s[USIM_CLASS_NVLINK] = intra * sv * 1e-6;
    step_s[USIM_CLASS_NIC] = inter * sn * 1e-6;
    *fixed_s = fixed * sv * 1e-6;
    return USIM_OK;
}

double usim_nccl_bw_factor(const usim_platform *pf, usim_coll_type t, const usim_group_shape *s,
                           double bytes, usim_algo a, usim_proto p)
{
    double f = 1;
    int pi = pi_of(p);
    switch (a) {
    case USIM_ALGO_RING:
        if (p == USIM_PROTO_LL128)
            f = RING_LL128_FACTOR / (120.0 / 128.0);
        break;
    case USIM_ALGO_TREE: {
        if (t != USIM_ALLREDUCE)
            break;
        f = TREE_BW_FACTOR;
        if (p == USIM_PROTO_LL)
            f *= usim_proto_wire(p) / TREE_LL_DIV;
        int ls = log2floor(bytes / 64);
        if (ls >= 0 && ls < 23)
            f *= tree_corr[pi][ls];
        break;
    }
    case USIM_ALGO_PAT:
        f = PAT_BW_FACTOR;
        break;
    default:
        break;
    }
    (void)pf;
    return f;
}

double usim_nccl_ll_floor(const usim_platform *pf, usim_coll_type t, const usim_group_shape *s,
                          double bytes, usim_algo a, usim_proto p)
{
    int P = s->uniform ? s->N * s->g : s->g;
    if (p != USIM_PROTO_LL || (a != USIM_ALGO_RING && a != USIM_ALGO_TREE) || P <= 1)
        return 0;
    double st[USIM_NCLASS], fixed;
    if (usim_nccl_latency(pf, t, s, bytes, a, p, st, &fixed))
        return 0;
    double fac = (a == USIM_ALGO_TREE || t == USIM_ALLREDUCE ? 2.0 : 1.0) * (P - 1) / P;
    return fixed + fac * bytes / ll_max_Bps(pf, s->N);
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
    /* which (a, p) apply (ncclTopoTuneModel's loops and enables) */
    switch (a) {
    case USIM_ALGO_RING: break;
    case USIM_ALGO_TREE:
        if (!ar || s->N < 2 || !s->uniform)
            return -1;
        break;
    case USIM_ALGO_NVLS:
        if (!pf->nvls || pf->full_mesh || s->N != 1 || p != USIM_PROTO_SIMPLE)
            return -1;
        break;
    case USIM_ALGO_NVLS_TREE:   /* NVLS inside the nodes, a tree across them */
        if (!ar || !pf->nvls || pf->full_mesh || s->N < 2 || !s->uniform || s->g < 2 ||
            p != USIM_PROTO_SIMPLE)
            return -1;
        break;
    case USIM_ALGO_PAT:   /* ncclPatEnable: one GPU per node */
        if (ar || p != USIM_PROTO_SIMPLE || !s->uniform || s->g != 1 || s->N < 2)
            return -1;
        break;
    default:
        return -1;
    }
    double st[USIM_NCLASS], fixed;
    if (usim_nccl_latency(pf, t, s, bytes, a, p, st, &fixed))
        return -1;
    double lv = st[USIM_CLASS_NVLINK], ln = st[USIM_CLASS_NIC];
    double f = usim_nccl_bw_factor(pf, t, s, bytes, a, p);
    double w = usim_proto_wire(p);
    switch (a) {
    case USIM_ALGO_RING:
    case USIM_ALGO_PAT: {
        int steps = (ar ? 2 : 1) * (P - 1);
        int inter = s->N > 1 ? (ar ? 2 : 1) * (s->N - 1) : 0;
        double fac = (ar ? 2.0 : 1.0) * (P - 1) / P;
        double bw = f * ring_busbw(pf, s) / w;
        if (p == USIM_PROTO_LL && bw > ll_max_Bps(pf, s->N))
            bw = ll_max_Bps(pf, s->N);
        return fixed + (steps - inter) * lv + inter * ln + fac * bytes / bw;
    }
    case USIM_ALGO_TREE: {
        /* busBw = nChannels x bw: bw the network's per channel beyond two
         * nodes (graphs[TREE]->bwInter: the ring's network rate), NVLink's
         * on two (bwIntra) */
        double lat = 2 * ((s->g - 1) * lv + log2floor(s->N) * ln);
        double bw = f * (s->N > 2 ? ring_busbw(pf, s) : usim_nvl_Bps(pf)) / w;
        if (p == USIM_PROTO_LL && bw > ll_max_Bps(pf, s->N))
            bw = ll_max_Bps(pf, s->N);
        return fixed + lat + 2.0 * (P - 1) / P * bytes / bw;
    }
    case USIM_ALGO_NVLS_TREE: {
        /* busBw = nChannels x min(bwIntra, bwInter, halved beyond two nodes),
         * algorithm bandwidth 5/6 of it (tuning.cc): here NVLink through the
         * switch and the ring's network rate */
        double net = ring_busbw(pf, s) * (s->N > 2 ? 0.5 : 1.0), nv = usim_nvl_Bps(pf) * pf->nvls_eff;
        double bw = (net < nv ? net : nv) * 5.0 / 6.0;
        return fixed + 2 * log2floor(s->N) * ln + bytes / bw;
    }
    default: {   /* NVLS */
        /* per GPU through its NVLink: all-reduce S (to the switch's reduction)
         * + S/P (its reduced slice, multicast); all-gather and reduce-scatter
         * S one way and S/P the other (see coll_tree.c) */
        double most = ar ? bytes * (1.0 + 1.0 / P) : bytes;
        return fixed + most / (usim_nvl_Bps(pf) * pf->nvls_eff);
    }
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
                              (want_a == USIM_ALGO_NVLS || want_a == USIM_ALGO_NVLS_TREE) && !pf->nvls
                              ? " (the platform has no NVLS)"
                              : want_a == USIM_ALGO_NVLS_TREE ? " (NVLS-tree: all-reduce, Simple, two or more "
                                                                "nodes of two or more GPUs)"
                              : want_a == USIM_ALGO_PAT ? " (PAT: all-gather or reduce-scatter, Simple, "
                                                          "one GPU per node on two or more nodes)" : ""),
               -USIM_EINVAL;
    return n;
}
