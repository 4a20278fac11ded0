/* SPDX-License-Identifier: Apache-2.0 */
/*
 * usim_internal.h -- helpers shared by libusim's translation units (not API).
 */
#ifndef USIM_INTERNAL_H
#define USIM_INTERNAL_H

#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include "usim.h"

#if defined(__GNUC__)
#define USIM_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define USIM_PRINTF(a, b)
#endif

/* Record a message for usim_last_error() and return status. */
int usim_set_error(int status, const char *fmt, ...) USIM_PRINTF(2, 3);

/* Allocation used by the simulation code; tests can make the Nth call fail. */
void *usim_malloc(size_t n);
void *usim_calloc(size_t n, size_t size);
void *usim_realloc(void *p, size_t n);
/* Make allocation number n (1-based, counted from this call) fail; 0: never.
 * Returns the number of allocations made since the previous call. */
long usim_test_fail_alloc_at(long n);

/* Seconds -> picoseconds, rounded to nearest; saturates at INT64_MAX (about
 * 107 days) instead of overflowing the conversion. */
static inline usim_time usim_ps(double seconds)
{
    double ps = seconds * 1e12 + 0.5;
    if (!(ps < 9.2e18))
        return INT64_MAX;
    if (ps < -9.2e18)
        return INT64_MIN;
    return (usim_time)ps;
}

static inline double usim_sec(usim_time t)
{
    return (double)t * 1e-12;
}

/*
 * Floating-point tolerances of the engine.  Every comparison of computed
 * (floating-point) times or rates uses one of these names, so the precision
 * of the simulation is stated in one place.
 *
 * USIM_TOL_PS_REL, USIM_TOL_PS_ABS: a duration x (in picoseconds, computed as
 *   bytes * 1e12 / rate) within USIM_TOL_PS_REL * x + USIM_TOL_PS_ABS of a
 *   whole picosecond is that picosecond; otherwise it is rounded up.  This
 *   keeps hand-derived golden cases exact (1e6 B at 1e9 B/s is 1e9 ps, not
 *   1e9 + 1) while never shortening a real transfer by more than the noise
 *   of a double (relative 1e-16 per operation, a few operations deep).
 * USIM_TOL_SHARE_REL: in max-min progressive filling, every link whose fair
 *   share is within this relative distance of the smallest share saturates
 *   in the same round (so equal shares computed in different orders do not
 *   split into two rounds).
 */
#define USIM_TOL_PS_REL 1e-9
#define USIM_TOL_PS_ABS 1e-6
#define USIM_TOL_SHARE_REL 1e-12
#define USIM_TOL_CAP_REL 1e-9

/* A computed duration of x picoseconds as a whole number of picoseconds:
 * rounded up, except within USIM_TOL_PS_* of an integer. */
static inline usim_time usim_ps_ceil(double x)
{
    if (!(x < (double)USIM_TIME_LIMIT_PS))
        return USIM_TIME_LIMIT_PS;   /* saturate (about 46 days); refused by the callers */
    double r = nearbyint(x);
    if (fabs(x - r) <= USIM_TOL_PS_REL * x + USIM_TOL_PS_ABS)
        return (usim_time)r;
    return (usim_time)ceil(x);
}

static inline int usim_gcd(int a, int b)
{
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* ------------------------------------------------------------ network internals */

/* The route from GPU src to GPU dst: up to 4 link ids into links, the route's
 * latency and link class (USIM_CLASS_*).  Returns the number of links. */
int usim_net_route(const usim_net *n, int src, int dst, int *links, usim_time *lat, int *cls);
/* Link loads of a class simulation (CSR): transfer i loads link[k] w[k] times
 * for k in off[i] .. off[i + 1] - 1 (its own route's links among them). */
typedef struct usim_loads {
    const int *off, *link, *w;
    /* NULL, or 4 entries per transfer: the links that limit its rate in
     * place of its route's (-1 ends the list; a quotient of the network) */
    const int *route;
} usim_loads;
/* usim_net_run with explicit loads (NULL: each route link once) and the
 * route latency of each link class lat[USIM_CLASS_*] during the run (a
 * collective's step latencies; NULL: the platform's latency_us). */
int usim_net_run_loads(usim_net *n, const usim_xfer *x, int count, const usim_loads *ld,
                       const usim_time *lat, usim_time *finish, usim_time *makespan);
/* The engine of the collectives (USIM_ENGINE_*: usim_net_set_engine). */
int usim_net_engine(const usim_net *n);
/* The collectives' state between calls, owned by the network as one opaque
 * member (coll_engine.h); net.c creates and frees it and never looks inside. */
typedef struct usim_coll_engine usim_coll_engine;
usim_coll_engine *usim_net_coll_engine(usim_net *n);
/* Number of links (ids 0 .. usim_net_links - 1). */
int usim_net_links(const usim_net *n);
/* Units of GPUs: the GPUs behind one NIC (unit id: the first of them) and
 * the GPUs of one node share links; the GPUs of one NVLink domain reach each
 * other over NVLink (routes depend on it). */
enum { USIM_UNIT_NIC = 0, USIM_UNIT_NODE, USIM_UNIT_DOMAIN, USIM_NUNIT };
/* Kind of a full-mesh link (one GPU pair, used by that pair alone). */
#define USIM_LINK_MESH USIM_NLINKKIND
int usim_net_units(const usim_net *n, int kind);
int usim_net_unit(const usim_net *n, int kind, int gpu);
void usim_net_unit_range(const usim_net *n, int kind, int unit, int *first, int *count);
/* Link l's kind (USIM_LINK_*, or USIM_LINK_MESH); the GPUs [first, first +
 * count) whose transfers cross it as sources (*side 0) or destinations
 * (*side 1); a mesh link: its source GPU (only transfers to its peer). */
int usim_net_link_users(const usim_net *n, int l, int *side, int *first, int *count);
/* Whether an event is queued at time t (the earliest pending one). */
int usim_engine_next_at(const usim_engine *e, usim_time t);
/* The link class (USIM_CLASS_*) of the route src -> dst (usim_net_route's *cls). */
int usim_net_class(const usim_net *n, int src, int dst);
const usim_platform *usim_net_platform(const usim_net *n);
int usim_net_node_of(const usim_net *n, int gpu);
/* The NVLink domain of a GPU (its node unless the platform's nvl_domain spans
 * several nodes): the unit NCCL treats as one node (intra-domain traffic
 * never uses a NIC). */
int usim_net_domain_of(const usim_net *n, int gpu);
/* 1 if the nodes are full meshes of point-to-point links (no switch). */
int usim_net_full_mesh(const usim_net *n);

/* GPU of position p of group g of a collective (listed ranks or grid). */
int usim_coll_rank(const usim_coll *c, int g, int p);
/* usim_coll_count for one GPU: *sent = the bytes it sends (cost independent
 * of the GPU count when the class engine takes c). */
int usim_coll_count_gpu(usim_net *n, const usim_coll *c, int gpu, usim_coll_result *r, uint64_t *sent);

/* Tests: groups of at most n positions given by a grid have their ranks and
 * placement listed once per collective (default 65536); larger ones are
 * decoded where used.  Returns the previous value. */
int usim_test_grid_list_max(int n);
/* Tests: the latency lower bound the candidate search uses to skip a ring
 * protocol (coll_run.c, ring_latency_bound). */
usim_time usim_test_ring_latency_bound(usim_net *n, const usim_coll *c, usim_proto p);

/* ------------------------------------------------------------ NCCL tuner (tuner.c) */

/* Shape of one group of a collective: N nodes with g of its GPUs each
 * (uniform = 1), or an irregular placement (uniform = 0). */
typedef struct usim_group_shape {
    int N, g, uniform;
} usim_group_shape;

/* The tuner's time estimate (seconds) of collective type t of `bytes` (the
 * nccl-tests size: the output of all-gather, the input of reduce-scatter and
 * all-reduce) with algorithm a and protocol p on group shape s, or a negative
 * value when (a, p) does not apply. */
double usim_tune_estimate(const usim_platform *pf, usim_coll_type t, const usim_group_shape *s,
                          double bytes, usim_algo a, usim_proto p);
/* The (algorithm, protocol) pairs that apply, with their estimates: only the
 * requested ones when not AUTO, else the platform's forced ones, else every
 * applicable pair (Simple before LL128 before LL).  Returns the count (at
 * most max), or -USIM_EINVAL with a message when none applies. */
int usim_tune_candidates(const usim_platform *pf, usim_coll_type t, const usim_group_shape *s,
                         double bytes, usim_algo want_a, usim_proto want_p, usim_algo *as,
                         usim_proto *ps, double *est, int max);
/* Rings NCCL-style rings use inside one full-mesh node of P GPUs: one per
 * stride coprime to P (disjoint links), i.e. Euler's phi(P). */
int usim_mesh_ring_channels(int P);
/* Protocol constant: wire bytes per payload byte. */
double usim_proto_wire(usim_proto p);
/* NCCL's latencies of collective t (a, p) on group shape s (tuning.cc): the
 * latency of one step over each link class and the fixed part paid once
 * (seconds); a status. */
int usim_nccl_latency(const usim_platform *pf, usim_coll_type t, const usim_group_shape *s,
                      double bytes, usim_algo a, usim_proto p, double step_s[USIM_NCLASS], double *fixed_s);
/* NCCL's bus bandwidth of (a, p) as a fraction (<= 1) of the rate its
 * transfer pattern reaches on the links: the protocol and algorithm factors
 * and the tree's size correction (tuning.cc); constants, so that the time
 * stays monotone in every bandwidth. */
double usim_nccl_bw_factor(const usim_platform *pf, usim_coll_type t, const usim_group_shape *s,
                           double bytes, usim_algo a, usim_proto p);
/* LL's bus bandwidth ceiling (tuning.cc llMaxBws) as a lower bound on the
 * time (seconds): the fixed latency + the bytes at the ceiling; 0 when not
 * LL. */
double usim_nccl_ll_floor(const usim_platform *pf, usim_coll_type t, const usim_group_shape *s,
                          double bytes, usim_algo a, usim_proto p);

#endif
