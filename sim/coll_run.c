/* SPDX-License-Identifier: Apache-2.0 */
/*
 * coll_run.c -- collectives as NCCL runs them, decomposed into point-to-point
 * transfers with dependencies on the flow-level network (net.c):
 *   all-gather, reduce-scatter, all-reduce:
 *     ring  C channel rings; across nodes one channel per rail, entering a
 *           node at local GPU c and leaving it from local GPU c-1, so every
 *           NIC carries one channel (NCCL's rings over rail-optimised nodes).
 *           "Node" here is the NVLink domain (an NVL72 rack is one).  Full-mesh
 *           nodes (no switch, one link per GPU pair): inside one node, one
 *           ring per stride s coprime to the group size (order 0, s, 2s, ...),
 *           so the rings use disjoint links; across nodes (even g) channel c
 *           crosses the node along the c-th directed Walecki path (all g
 *           paths together use every link once).
 *     tree  all-reduce only, multi-node: 2g channels, each a chain through
 *           the node's GPUs ending at its head (local GPU c mod g, whose NIC
 *           it uses) and a binary tree over the nodes (NCCL's double binary
 *           tree: odd channels use the mirrored tree), reduce up and
 *           broadcast down, pipelined in slices
 *     nvls  one node with NVLink SHARP: each GPU pushes its data to the
 *           switch, which reduces / multicasts, pipelined in slices
 *   all-to-all: direct (every pair at once) or pairwise (P-1 steps)
 *   ring shift (ring attention hops), send/recv.
 * The algorithm and protocol come from tuner.c; the protocol scales the
 * bytes on the wire and the per-step latency.  Byte counters are exact
 * payload bytes over the full pattern; long rings are simulated for a window
 * of steps and extrapolated.
 *
 * This file validates a collective, lists its candidates, generates each
 * algorithm (coll_ring.c, coll_tree.c) on the groups the class engine keeps
 * (coll_class.c) and runs it; groups are described in coll_group.c.
 *
 * Not here: the links and the flow engine (net.c), the choice of algorithm
 * (tuner.c), which collectives a training job runs (jobcoll.c).
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "usim.h"
#include "usim_internal.h"
#include "coll_internal.h"

static int validate(usim_net *n, const usim_coll *c)
{
    int P = c->size, NG = c->ngroups, G = usim_net_gpus(n);
    if (c->type < 0 || c->type >= USIM_NCOLL)
        return usim_set_error(USIM_EINVAL, "unknown collective type %d", (int)c->type);
    if (P < 1 || NG < 1 || (size_t)P * NG > (size_t)G)
        return usim_set_error(USIM_EINVAL, "%s: %d groups of %d do not fit on %d GPUs",
                              usim_coll_name(c->type), NG, P, G);
    if (c->type == USIM_SENDRECV && P != 2)
        return usim_set_error(USIM_EINVAL, "send-recv needs groups of 2 (got %d)", P);
    if ((c->type == USIM_A2A_DIRECT || c->type == USIM_A2A_PAIRWISE) && !c->pair_bytes && !c->pairs)
        return usim_set_error(USIM_EINVAL, "all-to-all without a byte matrix");
    if (is_ring(c->type) && !c->chunk_bytes && (c->chunk_total < 0 || (c->chunk_total == 0 && c->chunk_mult == 0)))
        return usim_set_error(USIM_EINVAL, "ring collective without chunk sizes");
    if (!c->ranks)
        return USIM_OK;   /* a grid: checked by usim_grid_make */
    if (c->algo < 0 || c->algo >= USIM_NALGO || c->proto < 0 || c->proto >= USIM_NPROTO)
        return usim_set_error(USIM_EINVAL, "%s: bad algorithm or protocol", usim_coll_name(c->type));
    for (size_t i = 0; i < (size_t)P * NG; i++)
        if (c->ranks[i] < 0 || c->ranks[i] >= G)
            return usim_set_error(USIM_EINVAL, "%s: GPU %d out of range", usim_coll_name(c->type),
                                  c->ranks[i]);
    return USIM_OK;
}

#define MAX_CANDIDATES 8

/* The candidate (algorithm, protocol) pairs of a valid collective; for
 * non-ring types one pair (none, Simple).  Returns the count or -status. */
static int candidates(usim_net *n, const usim_coll *c, const rgrid *R, usim_algo *as, usim_proto *ps,
                      double *est)
{
    if (!is_ring(c->type) || c->size == 1) {
        as[0] = USIM_ALGO_AUTO;
        ps[0] = USIM_PROTO_SIMPLE;
        est[0] = 0;
        return 1;
    }
    geo G0;
    int rc = usim_geometry(n, c, R, 0, &G0);
    if (rc)
        return -rc;
    usim_group_shape sh = {G0.N, G0.g, G0.uniform};
    free(G0.pos);
    uint64_t S = chunk_sum(c);
    int nc = usim_tune_candidates(usim_net_platform(n), c->type, &sh, (double)S, c->algo, c->proto,
                                  as, ps, est, MAX_CANDIDATES);
    if (nc <= 1 || !c->ranks || c->ngroups < 2 || c->algo != USIM_ALGO_AUTO)
        return nc;
    /* Listed groups may be placed differently from group 0: a tree or NVLS
     * that some group cannot run (a tree needs >= 2 domains holding equally
     * many of its GPUs, NVLS one domain) is not a candidate.  (Grids place
     * every group as group 0.) */
    int tree_ok = 1, nvls_ok = 1, any = 0;
    for (int q = 0; q < nc; q++)
        any |= as[q] == USIM_ALGO_TREE || as[q] == USIM_ALGO_NVLS_TREE || as[q] == USIM_ALGO_NVLS;
    for (int gi = 1; any && gi < c->ngroups && (tree_ok || nvls_ok); gi++) {
        geo Gg;
        int grc = usim_geometry(n, c, R, gi, &Gg);
        if (grc)
            return -grc;
        tree_ok &= Gg.uniform && Gg.N >= 2;
        nvls_ok &= Gg.N == 1;
        free(Gg.pos);
    }
    int m = 0;
    for (int q = 0; q < nc; q++)
        m += ((as[q] != USIM_ALGO_TREE && as[q] != USIM_ALGO_NVLS_TREE) || tree_ok) &&
             (as[q] != USIM_ALGO_NVLS || nvls_ok);
    if (m == 0)
        return nc;   /* the platform forces it: refused when generated */
    m = 0;
    for (int q = 0; q < nc; q++)
        if (((as[q] != USIM_ALGO_TREE && as[q] != USIM_ALGO_NVLS_TREE) || tree_ok) &&
            (as[q] != USIM_ALGO_NVLS || nvls_ok)) {
            as[m] = as[q];
            ps[m] = ps[q];
            est[m++] = est[q];
        }
    return m;
}

/* Whether no group lists a GPU twice (a grid is a bijection), so that every
 * ring transfer crosses a link and pays its latency; 1 yes, 0 no, -status. */
static int members_distinct(usim_net *n, const usim_coll *c)
{
    if (!c->ranks)
        return 1;
    int G = usim_net_gpus(n), ok = 1;
    int *tag = usim_calloc((size_t)G, sizeof *tag);
    if (!tag)
        return -usim_set_error(USIM_ENOMEM, "out of memory");
    for (int gi = 0; gi < c->ngroups && ok; gi++)
        for (int p = 0; p < c->size; p++) {
            int h = c->ranks[(size_t)gi * c->size + p];
            if (tag[h] == gi + 1) {
                ok = 0;
                break;
            }
            tag[h] = gi + 1;
        }
    free(tag);
    return ok;
}

/* A lower bound on the duration run_one gives a ring with protocol p, from
 * latency alone: the transfer of ring position i at step k waits for the same
 * position's transfer of step k - 1 (dependency d0 in usim_ring_gen and
 * usim_ring_gen_cone), then for one route latency, so the last transfer of
 * every step ends at least Lmin after the last one of the step before, Lmin
 * the smaller of the two route latencies with p's factors (usim_net_route's
 * arithmetic), and the first step ends at Lmin or later.  Hence the window's
 * makespan is >= w Lmin and its step period >= Lmin, and the extrapolated
 * duration mk + llround(period (steps - w)) >= steps Lmin (every operation
 * monotone, the integers exact in double).  A ring over 10^6 GPUs runs
 * about 2 10^6 dependent steps: this bound, not the link bytes, is what
 * lets the search skip the protocols with the larger latencies. */
static usim_time ring_latency_bound(usim_net *n, const usim_coll *c, const usim_group_shape *sh,
                                    usim_proto p)
{
    double st[USIM_NCLASS], fixed;
    if (usim_nccl_latency(usim_net_platform(n), c->type, sh, (double)chunk_sum(c), USIM_ALGO_RING, p, st,
                          &fixed))
        return 0;
    usim_time lv = (usim_time)llround(st[USIM_CLASS_NVLINK] * 1e12);
    usim_time ln = (usim_time)llround(st[USIM_CLASS_NIC] * 1e12);
    int64_t steps = (int64_t)(c->type == USIM_ALLREDUCE ? 2 : 1) * (c->size - 1);
    return (usim_time)llround(fixed * 1e12) + (lv < ln ? lv : ln) * steps;
}

usim_time usim_test_ring_latency_bound(usim_net *n, const usim_coll *c, usim_proto p)
{
    rgrid R = {0};
    if (!c->ranks && !usim_grid_make(n, c, &R))
        return -1;
    geo G;
    if (usim_geometry(n, c, &R, 0, &G))
        return -1;
    usim_group_shape sh = {G.N, G.g, G.uniform};
    free(G.pos);
    return ring_latency_bound(n, c, &sh, p);
}

/* Several groups (their copies load the links): the light cone also needs
 * every block's loads to be alike and inside the block.  For every GPU of
 * group 0 and every unit of GPUs sharing links (NIC, node), the positions of
 * the unit's members relative to the GPU's block must lie in the block and
 * form the same multiset for every block.  Returns 1 if so, 0 if not, or
 * -status. */
static int blocks_alike(usim_net *n, const usim_coll *c, const cls *k, const geo *G)
{
    if (k->rg.on)   /* a refined grid: units are digits below the domain's (usim_grid_make) */
        return G->uniform && G->N >= 2;
    if (!k->pos || !G->uniform || G->N < 2)
        return 0;
    int P = c->size, gl = G->g, ok = 1;
    int gpn = usim_net_platform(n)->gpus_per_node;
    int *ref = usim_malloc((size_t)USIM_NUNIT * gl * (gpn + 1) * sizeof *ref);
    int *cur = usim_malloc((size_t)(gpn + 1) * sizeof *cur);
    int *at = usim_malloc((size_t)P * sizeof *at);   /* position -> index in the ring blocks */
    if (!ref || !cur || !at) {
        free(ref); free(cur); free(at);
        return -usim_set_error(USIM_ENOMEM, "out of memory");
    }
    for (int i = 0; i < P; i++)
        at[G->pos[i]] = i;
    for (int b = 0; b < G->N && ok; b++)
        for (int l = 0; l < gl && ok; l++) {
            int p = G->pos[b * gl + l];
            for (int kind = 0; kind < USIM_NUNIT && ok; kind++) {
                if (kind == USIM_UNIT_DOMAIN)
                    continue;
                int u = usim_net_unit(n, kind, c->ranks[p]), first, cnt, m = 0;
                usim_net_unit_range(n, kind, u, &first, &cnt);
                if (cnt > gpn) {
                    ok = 0;
                    break;
                }
                for (int h = first; h < first + cnt; h++) {
                    int q = k->pos[h];
                    if (q < 0)
                        continue;
                    /* q must be in block b: its place there */
                    int rel = at[q] - b * gl;
                    if (rel < 0 || rel >= gl) {
                        ok = 0;
                        break;
                    }
                    int j = m++;
                    while (j > 0 && cur[j - 1] > rel) {
                        cur[j] = cur[j - 1];
                        j--;
                    }
                    cur[j] = rel;
                }
                if (!ok)
                    break;
                int *r = ref + ((size_t)kind * gl + l) * (gpn + 1);
                if (b == 0) {
                    r[0] = m;
                    memcpy(r + 1, cur, (size_t)m * sizeof *cur);
                } else if (r[0] != m || memcmp(r + 1, cur, (size_t)m * sizeof *cur) != 0) {
                    ok = 0;
                }
            }
        }
    free(ref); free(cur); free(at);
    return ok;
}

/* Generate the transfers of algorithm a with protocol p (count them all, and
 * store the window when build).  *steps gets the ring steps (0: not a ring). */
static int generate(usim_net *n, const usim_coll *c, const cls *k, usim_algo a, usim_proto p,
                    usim_coll_result *r, gen *g, int build, int *steps, int skipcount)
{
    memset(r, 0, sizeof *r);
    *steps = 0;
    /* groups simulated: every one, or one per class (its representative) */
    int P = c->size, NG = k->on ? k->nrep : c->ngroups;
    memset(g, 0, sizeof *g);
    g->net = n;
    g->c = c;
    g->rg = &k->rg;
    g->byslot = k->rg.on && k->on;
    if (k->rg.on && P <= GRID_LIST_MAX) {
        if (!(g->rk0 = usim_malloc((size_t)P * sizeof *g->rk0)))
            return usim_set_error(USIM_ENOMEM, "out of memory for the transfers");
        for (int x = 0; x < P; x++)
            g->rk0[x] = usim_grid_rank(&k->rg, x);
    }
    g->build = build;
    g->window = INT_MAX;
    g->wire = usim_proto_wire(p);
    g->skipcount = skipcount == 1;
    /* 2: arrays only if a count needs them, or to weigh several classes */
    if ((!skipcount || (skipcount == 2 && k->nrep > 1)) && usim_gen_count_arrays(g))
        return usim_set_error(USIM_ENOMEM, "out of memory counting a collective");
    r->algo = a;
    r->proto = p;
    r->channels = 1;
    if (P == 1)
        return USIM_OK;
    int rc = USIM_OK;
    if (!is_ring(c->type)) {
        for (int ri = 0; ri < NG && !g->err; ri++)
            usim_p2p_gen(g, k->rep ? k->rep[ri] : ri);
    } else {
        if (a == USIM_ALGO_NVLS)
            g->wire /= usim_net_platform(n)->nvls_eff;
        for (int ri = 0; ri < NG && !rc && !g->err; ri++) {
            int gi = k->rep ? k->rep[ri] : ri;
            geo Gg;
            int own = !(gi == 0 && k->g0.N);
            if (!own)
                Gg = k->g0;   /* group 0's, computed once per collective */
            else if ((rc = usim_geometry(n, c, &k->rg, gi, &Gg)))
                break;
            if (ri == 0) {   /* NCCL's bandwidth factors of (a, p) on the first group's shape */
                usim_group_shape sh = {Gg.N, Gg.g, Gg.uniform};
                g->wire /= usim_nccl_bw_factor(usim_net_platform(n), c->type, &sh, (double)chunk_sum(c), a, p);
            }
            if (a == USIM_ALGO_TREE) {
                if (!Gg.uniform || Gg.N < 2)
                    rc = usim_set_error(USIM_EINVAL, "%s: groups are placed differently on the nodes",
                                        usim_coll_name(c->type));
                else {
                    int sym = build && !own ? usim_tree_symmetric(n, c, k->on, &k->rg, &Gg) : 0;
                    if (sym < 0)
                        rc = -sym;
                    g->tree_sym = sym > 0;
                    if (!rc)
                        rc = usim_tree_gen(g, gi, &Gg), r->channels = gi == 0 ? 2 * Gg.g : r->channels;
                }
            } else if (a == USIM_ALGO_NVLS_TREE) {
                if (!Gg.uniform || Gg.N < 2)
                    rc = usim_set_error(USIM_EINVAL, "%s: groups are placed differently on the nodes",
                                        usim_coll_name(c->type));
                else
                    rc = usim_nvlstree_gen(g, gi, &Gg), r->channels = gi == 0 ? 2 * Gg.g : r->channels;
            } else if (a == USIM_ALGO_NVLS) {
                if (Gg.N != 1)
                    rc = usim_set_error(USIM_EINVAL, "%s: groups are placed differently on the nodes",
                                        usim_coll_name(c->type));
                else
                    usim_nvls_gen(g, gi);
            } else {
                int C = usim_ring_channels(n, &Gg);
                if (gi == 0) {
                    /* the window holds about ring_window steps' worth of
                     * one-channel transfers: C channels simulate ring_window / C
                     * steps (>= 4) */
                    *steps = (c->type == USIM_ALLREDUCE ? 2 : 1) * (P - 1);
                    int w = usim_coll_engine_ring_window(usim_net_coll_engine(n)) / C;
                    if (w < 4)
                        w = 4;
                    if (*steps > w)
                        g->window = w;
                    if (!build)
                        g->window = 0;   /* counting only: every step in closed form */
                }
                int done = 0;
                int alike = build && k->on && !k->nocone && k->nrep == 1
                            ? c->ngroups == 1 ? 1 : blocks_alike(n, c, k, &Gg) : 0;
                if (alike < 0)
                    rc = -alike;
                if (alike > 0) {
                    int w = g->window < *steps ? g->window : *steps;
                    done = !Gg.uniform && C == 1 && c->ngroups == 1 ? usim_ring_gen_uneven(g, gi, &Gg, w)
                                                                    : usim_ring_gen_cone(g, gi, &Gg, C, w, NULL);
                    if (done < 0)
                        rc = -done;
                }
                if (!done && !rc)
                    rc = usim_ring_gen(g, gi, &Gg, C);
                if (gi == 0)   /* group 0's (groups placed differently may differ) */
                    r->channels = C;
            }
            if (own)
                free(Gg.pos);
        }
    }
    if (!rc && g->err)
        rc = g->err == USIM_ENOMEM ? usim_set_error(USIM_ENOMEM, "out of memory for the transfers")
                                   : usim_set_error(USIM_EINVAL, "%s: too many transfers",
                                                    usim_coll_name(c->type));
    return rc;
}

/* Whether no link is crossed by transfers of two node blocks (the premise
 * of usim_ring_gen_cone); 1 yes, 0 no, -1 out of memory.  Each link is tagged with
 * the first block seen on it (1 + block), then the tags are cleared. */
static int blocks_local(usim_net *n, const gen *g)
{
    int *tag = usim_coll_engine_link_tags(usim_net_coll_engine(n), usim_net_links(n));
    int *seen = usim_malloc((g->n * 4 + 1) * sizeof *seen);
    if (!tag || !seen) {
        free(seen);
        return -1;
    }
    size_t ns = 0;
    int ok = 1;
    for (size_t i = 0; i < g->n && ok; i++) {
        if (g->x[i].src == g->x[i].dst)
            continue;
        int l[4], cl;
        usim_time lat;
        int r = usim_net_route(n, g->x[i].src, g->x[i].dst, l, &lat, &cl);
        for (int j = 0; j < r; j++) {
            if (tag[l[j]] == 0) {
                tag[l[j]] = g->xblk[i] + 1;
                seen[ns++] = l[j];
            } else if (tag[l[j]] != g->xblk[i] + 1) {
                ok = 0;
            }
        }
    }
    for (size_t i = 0; i < ns; i++)
        tag[seen[i]] = 0;
    free(seen);
    return ok;
}

/* Totals and maxima of the counters; with classes (only group 0 counted)
 * every group's GPU at position p counts what group 0's does.  sent / recv:
 * per-GPU arrays (may be NULL); one >= 0: *one_sent gets GPU one's bytes. */
static void finish_counts(usim_net *n, const usim_coll *c, const cls *k, const gen *g,
                          usim_coll_result *r, uint64_t *sent, uint64_t *recv, int one,
                          uint64_t *one_sent)
{
    int G = usim_net_gpus(n), S = g->byslot ? c->size : G;
    for (int i = 0; g->sent && i < S; i++) {
        /* several classes: a representative's GPU counts for its class's groups */
        uint64_t mult = k->nrep > 1 ? k->lab[i] < 0 ? 0 : (uint64_t)k->csize[k->lab[i] / c->size] : 1;
        r->total_sent += g->sent[i] * mult;
        r->total_recv += g->recv[i] * mult;
        for (int q = 0; q < USIM_NCLASS; q++)
            if (g->sent_cls[(size_t)i * USIM_NCLASS + q] > r->max_sent[q])
                r->max_sent[q] = g->sent_cls[(size_t)i * USIM_NCLASS + q];
    }
    r->total_sent += g->dsent;
    r->total_recv += g->drecv;
    for (int q = 0; q < USIM_NCLASS; q++)
        if (g->dmax[q] > r->max_sent[q])
            r->max_sent[q] = g->dmax[q];
    if (k->on && k->nrep == 1) {
        r->total_sent *= (uint64_t)c->ngroups;
        r->total_recv *= (uint64_t)c->ngroups;
    }
    int P = c->size;
    if (one >= 0 && one_sent) {
        /* the counter standing for GPU one: its own, or its position's in group 0 */
        int at = one;
        if (g->byslot)
            at = usim_grid_pos(&k->rg, one);
        else if (k->on && k->nrep > 1)
            at = k->lab[one] < 0 ? -1
               : c->ranks[(size_t)k->rep[k->lab[one] / P] * P + k->lab[one] % P];
        else if (k->on && c->ngroups > 1)
            at = k->pos[one] < 0 ? -1 : c->ranks[k->pos[one]];
        *one_sent = g->sent && at >= 0 ? g->sent[at] : 0;
    }
    for (int z = 0; z < 2; z++) {
        uint64_t *out = z ? recv : sent;
        const uint64_t *in = z ? g->recv : g->sent;
        if (!out)
            continue;
        if (!in) {   /* nothing counted per GPU (no transfer) */
            memset(out, 0, (size_t)G * sizeof *out);
            continue;
        }
        if (g->byslot) {
            for (int h = 0; h < G; h++) {
                int p = usim_grid_pos(&k->rg, h);
                out[h] = p >= 0 ? in[p] : 0;
            }
            continue;
        }
        memcpy(out, in, (size_t)G * sizeof *out);
        if (k->on && k->nrep > 1)
            for (size_t i = 0; i < (size_t)c->ngroups * P; i++)
                out[c->ranks[i]] = in[c->ranks[(size_t)k->rep[k->gcls[i / P]] * P + i % P]];
        else if (k->on)
            for (size_t i = (size_t)P; i < (size_t)c->ngroups * P; i++)
                out[c->ranks[i]] = in[c->ranks[i % (size_t)P]];
    }
}

/* Validate c and list its candidate pairs (count, or -status). */
static int prepare(usim_net *n, const usim_coll *c, usim_coll_result *r, usim_algo *as,
                   usim_proto *ps, double *est)
{
    memset(r, 0, sizeof *r);
    int rc = validate(n, c);
    if (rc)
        return -rc;
    rgrid R;
    usim_grid_make(n, c, &R);
    return candidates(n, c, &R, as, ps, est);
}

/* Count algorithm a with protocol p without simulating it. */
static int count_as(usim_net *n, const usim_coll *c, const cls *k, usim_algo a, usim_proto p,
                    usim_coll_result *r, uint64_t *sent, uint64_t *recv, int one, uint64_t *one_sent)
{
    gen g;
    int steps;
    int rc = generate(n, c, k, a, p, r, &g, 0, &steps, sent || recv || one_sent ? 0 : 2);
    if (!rc)
        finish_counts(n, c, k, &g, r, sent, recv, one, one_sent);
    usim_gen_free(&g);
    return rc;
}

/* Simulate algorithm a with protocol p. */
/* Simulate algorithm a with protocol p; counted: the counters of algorithm
 * a (they do not depend on the protocol). */
static int run_one(usim_net *n, const usim_coll *c, const cls *k, usim_algo a, usim_proto p,
                   usim_coll_result *r, const usim_coll_result *counted)
{
    gen g;
    int steps;
    int rc = generate(n, c, k, a, p, r, &g, 1, &steps, 1);
    for (int q = 0; q < USIM_NCLASS; q++)
        r->max_sent[q] = counted->max_sent[q];
    r->total_sent = counted->total_sent;
    r->total_recv = counted->total_recv;
    if (rc || c->size == 1) {
        usim_gen_free(&g);
        return rc;
    }
    if (g.cone) {
        int local = blocks_local(n, &g);
        if (local <= 0) {
            usim_gen_free(&g);
            if (local < 0)
                return usim_set_error(USIM_ENOMEM, "out of memory");
            cls k2 = *k;   /* blocks share links on this network: the whole ring */
            k2.nocone = 1;
            return run_one(n, c, &k2, a, p, r, counted);
        }
    }
    usim_time *fin = usim_malloc((g.n ? g.n : 1) * sizeof *fin);
    usim_loads ld = {NULL, NULL, NULL, NULL};
    int loads = (c->ngroups > 1 && (k->pos || k->rg.on)) || g.tree_sym;   /* copies of group 0 */
    if (!fin || (loads && (g.tree_sym ? usim_tree_loads(n, &g, &k->g0, &ld)
                                      : usim_cls_build_loads(n, k, g.x, (int)g.n, &ld)))) {
        free(fin);
        usim_gen_free(&g);
        return usim_set_error(USIM_ENOMEM, "out of memory for %zu transfers", g.n);
    }
    /* ring, tree, NVLS, PAT: NCCL's step latencies and its fixed latency
     * (tuner.c); point-to-point types: the platform's latency_us */
    usim_time lat[USIM_NCLASS], fixed = 0;
    int nccl = is_ring(c->type) && k->g0.N > 0;
    if (nccl) {
        usim_group_shape sh = {k->g0.N, k->g0.g, k->g0.uniform};
        double st[USIM_NCLASS], fx;
        if ((rc = usim_nccl_latency(usim_net_platform(n), c->type, &sh, (double)chunk_sum(c), a, p, st, &fx))) {
            free(fin);
            free((void *)ld.off);
            free((void *)ld.link);
            free((void *)ld.w);
            free((void *)ld.route);
            usim_gen_free(&g);
            return rc;
        }
        if (a == USIM_ALGO_RING && sh.N > 1) {
            /* NCCL's ring pays (steps - inter) intra-node and inter
             * inter-node step latencies.  Here a position sends its steps in
             * order, so the position that sends across the node boundary
             * pays one latency per step: its transfers take the mean step
             * latency, and that chain totals NCCL's (every other chain has
             * no more: no step latency is below the NVLink one). */
            int P = sh.uniform ? sh.N * sh.g : sh.g, ar = c->type == USIM_ALLREDUCE;
            double nst = (ar ? 2.0 : 1.0) * (P - 1), inter = (ar ? 2.0 : 1.0) * (sh.N - 1);
            double mean = ((nst - inter) * st[USIM_CLASS_NVLINK] + inter * st[USIM_CLASS_NIC]) / nst;
            st[USIM_CLASS_NIC] = mean > st[USIM_CLASS_NVLINK] ? mean : st[USIM_CLASS_NVLINK];
        }
        for (int q = 0; q < USIM_NCLASS; q++)
            lat[q] = (usim_time)llround(st[q] * 1e12);
        fixed = (usim_time)llround(fx * 1e12);
    }
    usim_time mk;
    rc = usim_net_run_loads(n, g.x, (int)g.n, loads ? &ld : NULL, nccl ? lat : NULL, fin, &mk);
    free((void *)ld.off);
    free((void *)ld.link);
    free((void *)ld.w);
    free((void *)ld.route);
    if (rc == USIM_OK && g.cone) {
        /* only the representative blocks stand for the ring (usim_ring_gen_cone) */
        mk = 0;
        for (size_t i = 0; i < g.n; i++)
            if (g.isrep[g.xblk[i]] && fin[i] > mk)
                mk = fin[i];
    }
    if (rc == USIM_OK) {
        r->duration = mk;
        int sim_steps = g.window < steps ? g.window : steps;
        if (sim_steps < steps) {
            /* steady state: average step period over the second half of the window */
            usim_time *end = usim_calloc((size_t)sim_steps, sizeof *end);
            if (!end) {
                rc = usim_set_error(USIM_ENOMEM, "out of memory");
            } else {
                for (size_t i = 0; i < g.n; i++)
                    if (fin[i] > end[g.x[i].step] && (!g.cone || g.isrep[g.xblk[i]]))
                        end[g.x[i].step] = fin[i];
                int w = sim_steps / 2;
                double period = (double)(end[sim_steps - 1] - end[sim_steps - 1 - w]) / w;
                r->duration = mk + (usim_time)llround(period * (steps - sim_steps));
                r->extrapolated = steps - sim_steps;
                free(end);
            }
        }
        r->duration += fixed;
        if (a == USIM_ALGO_TREE && nccl) {
            /* NCCL's tree is slower than its links allow: its model's time
             * (tuner.c: bus bandwidth .92 x the ring's, beyond two nodes the
             * ring's network rate, times the size correction) bounds it */
            usim_group_shape sh = {k->g0.N, k->g0.g, k->g0.uniform};
            double e = usim_tune_estimate(usim_net_platform(n), c->type, &sh, (double)chunk_sum(c), a, p);
            usim_time floor_t = (usim_time)llround(e * 1e12);
            if (e > 0 && floor_t > r->duration)
                r->duration = floor_t;
        }
        if (p == USIM_PROTO_LL && nccl) {   /* LL's ceiling (tuner.c) */
            usim_group_shape sh = {k->g0.N, k->g0.g, k->g0.uniform};
            usim_time floor_t = (usim_time)llround(
                usim_nccl_ll_floor(usim_net_platform(n), c->type, &sh, (double)chunk_sum(c), a, p) * 1e12);
            if (floor_t > r->duration)
                r->duration = floor_t;
        }
    }
    free(fin);
    usim_gen_free(&g);
    return rc;
}

/* The per-call cost of an all-to-all (platform a2a_call_us): one fixed time
 * per call on top of its transfers, that of the widest link class the call
 * spans (NIC when any group has members on two nodes).  Measured on our MPI
 * all-to-all by ulysses calibrate (doc/validation.md); 0 in the GPU presets. */
static usim_time a2a_call_cost(usim_net *n, const usim_coll *c, const cls *k)
{
    if (c->type != USIM_A2A_DIRECT && c->type != USIM_A2A_PAIRWISE)
        return 0;
    const usim_platform *pf = usim_net_platform(n);
    /* members on one NVLink domain: the NVLink cost; groups placed alike
     * (classes) have group 0's answer */
    for (int ri = 0; ri < (k->on ? k->nrep : c->ngroups); ri++)
        for (int q = 1, g = k->rep ? k->rep[ri] : ri; q < c->size; q++)
            if (usim_net_domain_of(n, usim_coll_rank(c, g, q)) != usim_net_domain_of(n, usim_coll_rank(c, g, 0)))
                return pf->a2a_call[USIM_CLASS_NIC];
    return pf->a2a_call[USIM_CLASS_NVLINK];
}

/* A collective given by a grid that the class engine does not take (the full
 * engine, or unit sizes across its digits): run with its ranks listed.
 * Returns 1 when done (*rc set), 0 to go on with the grid. */
static int listed(usim_net *n, const usim_coll *c, usim_coll_result *r, uint64_t *sent, uint64_t *recv,
                  int one, uint64_t *one_sent, int count, int *rc)
{
    rgrid R;
    if (c->ranks || (usim_coll_engine_mode(usim_net_coll_engine(n)) != USIM_ENGINE_FULL &&
                     usim_grid_make(n, c, &R)))
        return 0;
    usim_coll l;
    int *arr;
    if (!(*rc = usim_grid_list(c, &l, &arr)))
        *rc = one_sent ? usim_coll_count_gpu(n, &l, one, r, one_sent)
            : count ? usim_coll_count(n, &l, r, sent, recv) : usim_coll_run(n, &l, r, sent, recv);
    free(arr);
    return 1;
}

int usim_coll_run(usim_net *n, const usim_coll *c, usim_coll_result *r, uint64_t *sent,
                  uint64_t *recv)
{
    int lrc;
    if (listed(n, c, r, sent, recv, -1, NULL, 0, &lrc))
        return lrc;
    usim_algo as[MAX_CANDIDATES];
    usim_proto ps[MAX_CANDIDATES];
    double est[MAX_CANDIDATES];
    int rc = USIM_OK, nc = prepare(n, c, r, as, ps, est);
    if (nc < 0)
        return -nc;
    cls k;
    if ((rc = usim_cls_analyze(n, c, &k)))
        return rc;
    if (is_ring(c->type) && c->size > 1 && (rc = usim_geometry(n, c, &k.rg, 0, &k.g0))) {
        usim_cls_free(&k);
        return rc;
    }
    if (!k.on && k.mode == USIM_ENGINE_CLASSES) {
        usim_cls_free(&k);
        return usim_set_error(USIM_EINVAL,
                              "%s: its %d groups are not placed alike on the nodes and NICs, so the "
                              "class engine cannot represent them; use --engine full or auto",
                              usim_coll_name(c->type), c->ngroups);
    }
    /* Every candidate at flow level; the fastest wins (on ties the one with
     * the smaller estimate: rank[q], the place of q in NCCL's estimate
     * order).  A candidate whose lower bound (its busiest link's wire bytes
     * over that link's bandwidth, and for a ring its steps times its smallest
     * route latency) already reaches the best time is not run: it cannot
     * win, so skipping it does not change the choice.  Candidates are tried
     * in the order of their lower bounds, so that the likely winner runs
     * first and prunes the others (a ring over 16384 GPUs: LL, estimated
     * second, prunes LL128); the choice is still the fastest, ties to the
     * smaller estimate: a candidate ranked before the best so far is skipped
     * only when its bound is strictly above the best time. */
    int order[MAX_CANDIDATES], rank[MAX_CANDIDATES];
    for (int q = 0; q < nc; q++) {
        int j = q;
        while (j > 0 && est[order[j - 1]] > est[q]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = q;
    }
    for (int oi = 0; oi < nc; oi++)
        rank[order[oi]] = oi;
    int best = -1, distinct = -1;
    const usim_platform *pf = usim_net_platform(n);
    usim_coll_result cnt[USIM_NALGO];
    int have_cnt[USIM_NALGO] = {0};
    double lbs[MAX_CANDIDATES];
    for (int q = 0; q < nc && !rc; q++) {
        if (!have_cnt[as[q]]) {   /* counters per algorithm, whatever the protocol */
            if ((rc = count_as(n, c, &k, as[q], ps[q], &cnt[as[q]], NULL, NULL, -1, NULL)))
                break;
            have_cnt[as[q]] = 1;
        }
        usim_group_shape sh0 = {k.g0.N, k.g0.g, k.g0.uniform};
        double w = usim_proto_wire(ps[q]) / (as[q] == USIM_ALGO_NVLS ? pf->nvls_eff : 1), lb = 0;
        if (is_ring(c->type) && c->size > 1)
            w /= usim_nccl_bw_factor(pf, c->type, &sh0, (double)chunk_sum(c), as[q], ps[q]);
        double bw[USIM_NCLASS] = {usim_nvl_Bps(pf), usim_nic_Bps(pf)};
        for (int cl = 0; cl < USIM_NCLASS; cl++) {
            double x = (double)cnt[as[q]].max_sent[cl] * w * 1e12 / bw[cl];
            if (x > lb)
                lb = x;
        }
        if (nc > 1 && as[q] == USIM_ALGO_RING && is_ring(c->type) && c->size > 1) {
            if (distinct < 0 && (distinct = members_distinct(n, c)) < 0) {
                rc = -distinct;
                break;
            }
            double ll = distinct ? (double)ring_latency_bound(n, c, &sh0, ps[q]) : 0;
            if (ll > lb)
                lb = ll;
        }
        lbs[q] = lb;
    }
    int try[MAX_CANDIDATES];   /* by lower bound, then by estimate */
    for (int oi = 0; oi < nc && !rc; oi++) {
        int q = order[oi], j = oi;
        while (j > 0 && lbs[try[j - 1]] > lbs[q]) {
            try[j] = try[j - 1];
            j--;
        }
        try[j] = q;
    }
    for (int ti = 0; ti < nc && !rc; ti++) {
        int q = try[ti];
        usim_coll_result t = cnt[as[q]];
        if (best >= 0 && (rank[q] > rank[best] ? lbs[q] - 1 >= (double)r->duration
                                               : lbs[q] - 1 > (double)r->duration))
            continue;
        if ((rc = run_one(n, c, &k, as[q], ps[q], &t, &cnt[as[q]])))
            break;
        t.estimate_s = est[q];
        if (best < 0 || t.duration < r->duration || (t.duration == r->duration && rank[q] < rank[best])) {
            *r = t;
            best = q;
        }
    }
    if (!rc && c->size > 1)
        r->duration += a2a_call_cost(n, c, &k);
    if (!rc && (sent || recv)) {   /* the winner's counters */
        usim_coll_result t;
        rc = count_as(n, c, &k, as[best], ps[best], &t, sent, recv, -1, NULL);
    }
    r->classes = k.on ? k.nrep : 0;
    usim_cls_free(&k);
    return rc;
}

/* usim_coll_count for per-GPU arrays (sent, recv) or one GPU's bytes sent
 * (one, *one_sent). */
static int count_coll(usim_net *n, const usim_coll *c, usim_coll_result *r, uint64_t *sent,
                      uint64_t *recv, int one, uint64_t *one_sent)
{
    usim_algo as[MAX_CANDIDATES];
    usim_proto ps[MAX_CANDIDATES];
    double est[MAX_CANDIDATES];
    int rc = USIM_OK, nc = prepare(n, c, r, as, ps, est);
    if (nc < 0)
        return -nc;
    usim_algo a = as[0];
    usim_proto p = ps[0];
    if (nc > 1) {
        /* the pattern depends on the algorithm the run would choose */
        usim_coll_result t;
        if ((rc = usim_coll_run(n, c, &t, NULL, NULL)))
            return rc;
        a = t.algo;
        p = t.proto;
    }
    cls k;
    if ((rc = usim_cls_analyze(n, c, &k)))
        return rc;
    rc = count_as(n, c, &k, a, p, r, sent, recv, one, one_sent);
    usim_cls_free(&k);
    return rc;
}

int usim_coll_count(usim_net *n, const usim_coll *c, usim_coll_result *r, uint64_t *sent,
                    uint64_t *recv)
{
    int lrc;
    if (listed(n, c, r, sent, recv, -1, NULL, 1, &lrc))
        return lrc;
    return count_coll(n, c, r, sent, recv, -1, NULL);
}

int usim_coll_count_gpu(usim_net *n, const usim_coll *c, int gpu, usim_coll_result *r, uint64_t *sent)
{
    int lrc;
    *sent = 0;
    if (gpu < 0 || gpu >= usim_net_gpus(n))
        return usim_set_error(USIM_EINVAL, "GPU %d out of range", gpu);
    if (listed(n, c, r, NULL, NULL, gpu, sent, 1, &lrc))
        return lrc;
    return count_coll(n, c, r, NULL, NULL, gpu, sent);
}
