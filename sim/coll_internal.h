/* SPDX-License-Identifier: Apache-2.0 */
/*
 * coll_internal.h -- the types shared by the collective files (not API):
 * groups as grids (rgrid) and their placement (geo), the transfer buffer of
 * a generation (gen), and the equivalence classes of groups (cls).
 *
 *   coll_group.c  group descriptions: grids, ranks, placement on domains
 *   coll_gen.c    the transfer buffer: counting and storing transfers
 *   coll_ring.c   ring all-gather / reduce-scatter / all-reduce, light cone
 *   coll_tree.c   tree all-reduce, NVLS, all-to-all, ring shift, send/recv
 *   coll_class.c  the class engine's analysis: classes of groups, link loads
 *   coll_run.c    validation, candidates, generation and the runs (API)
 */
#ifndef USIM_COLL_INTERNAL_H
#define USIM_COLL_INTERNAL_H

#include <stdint.h>
#include <stddef.h>
#include "usim.h"
#include "usim_internal.h"
#include "coll_engine.h"

static inline int is_ring(usim_coll_type t)
{
    return t == USIM_ALLGATHER || t == USIM_REDUCE_SCATTER || t == USIM_ALLREDUCE;
}

/* Part k of n of a byte count split as evenly as possible. */
static inline uint64_t part(uint64_t bytes, int k, int n)
{
    return bytes / (uint64_t)n + ((uint64_t)k < bytes % (uint64_t)n);
}

/* ------------------------------------------------------------ group descriptions */

/*
 * A collective's groups given as a grid (usim_coll.grid) are never listed:
 * the class engine needs group 0's ranks, the position of a GPU in its group,
 * and the placement of group 0 on NVLink domains, all of which follow from the
 * digits.  The grid is refined so that every unit size (GPUs per NIC, per
 * node, per NVLink domain) is a digit boundary; each digit then lies below or
 * above each unit size, and every group is placed like group 0 (the same
 * digits vary inside a unit), which is the class condition of analyze.  A
 * grid that cannot be refined, or the full engine, lists the ranks instead.
 */
#define RG_MAX (USIM_GRID_MAXDIM + USIM_NUNIT)
typedef struct rgrid {
    int on;                     /* the grid is used (else: rank arrays) */
    int nd;                     /* digits sorted by stride, refined at the unit sizes */
    int n[RG_MAX], stride[RG_MAX];
    int64_t fw[RG_MAX];         /* weight of the digit in the index g * size + p */
    int64_t M;                  /* GPUs covered: [0, M) */
    int P;
    int dom;                    /* GPUs per NVLink domain (the geometry's node) */
    /* position digits below / above the domain size, by increasing weight */
    int nlo, nhi, lo[RG_MAX], hi[RG_MAX];
    int64_t blo;                /* largest within-domain weight sum */
} rgrid;

/* The chunk of position p of a ring collective. */
static inline uint64_t chunk_at(const usim_coll *c, int p)
{
    if (c->chunk_bytes)
        return c->chunk_bytes[p];
    int64_t q = c->chunk_total / c->size, r = c->chunk_total % c->size;
    return (uint64_t)(q + (p < r)) * c->chunk_mult;
}

static inline uint64_t chunk_sum(const usim_coll *c)
{
    if (!c->chunk_bytes)
        return (uint64_t)c->chunk_total * c->chunk_mult;
    uint64_t S = 0;
    for (int p = 0; p < c->size; p++)
        S += c->chunk_bytes[p];
    return S;
}

/* GPU of index i = g * size + p of the grid. */
int usim_grid_rank(const rgrid *R, int64_t i);
/* Position of GPU h in its group, -1 if in none. */
int usim_grid_pos(const rgrid *R, int h);
/* Build R from c->grid on net n.  Returns 1 if usable, 0 if the ranks must
 * be listed (no grid, bad grid, or unit sizes across digits). */
int usim_grid_make(usim_net *n, const usim_coll *c, rgrid *R);
/* The position of ring index b g + l of group 0's geometry. */
int usim_grid_geo_pos(const rgrid *R, int b, int l);
/* A copy of c with its ranks listed (*arr to free). */
int usim_grid_list(const usim_coll *c, usim_coll *out, int **arr);
/* Groups up to this size have their geometry and group 0's ranks listed
 * from the grid (usim_test_grid_list_max changes it). */
int usim_grid_list_max(void);
#define GRID_LIST_MAX usim_grid_list_max()

/* ------------------------------------------------------------ generation */

struct cls;
typedef struct gen {
    usim_net *net;
    const usim_coll *c;
    const rgrid *rg;    /* the grid of c (rg->on), else ranks are listed */
    int byslot;         /* counters indexed by group position (grid classes), else by GPU */
    int *rk0;           /* group 0's ranks from the grid, listed when the group is small */
    int build;          /* store transfers (else count only) */
    int window;         /* transfers of steps >= window are counted, not stored */
    double wire;        /* bytes on the wire per payload byte */
    usim_xfer *x;
    size_t n, cap;
    uint64_t *sent, *recv, *sent_cls;   /* per GPU, payload bytes over the full pattern */
    int err;
    int nocount;        /* store only (the counters are filled in closed form) */
    /* counters without per-GPU arrays (sent == NULL): maxima and totals */
    uint64_t dmax[USIM_NCLASS], dsent, drecv;
    int skipcount;      /* count nothing (the caller has the counters) */
    /* ring light cone (usim_ring_gen_cone): node block of each stored transfer,
     * and whether a block represents a class (its times count) */
    int cone;
    int *xblk;
    size_t xblk_cap;
    unsigned char *isrep;
    int tree_sym;       /* tree: channel 0 alone stands for all (usim_tree_symmetric) */
    int nolat;          /* transfers stored now skip the route latency (usim_xfer.nolat) */
} gen;

/* GPU of position x of group gi. */
static inline int rk_at(const gen *g, int gi, int x)
{
    if (g->rk0 && gi == 0)
        return g->rk0[x];
    return g->rg->on ? usim_grid_rank(g->rg, (int64_t)gi * g->c->size + x)
                     : g->c->ranks[(size_t)gi * g->c->size + x];
}

/* Counter index of GPU h: h, or its position when counting by slot. */
static inline int slot_of(const gen *g, int h)
{
    return g->byslot ? usim_grid_pos(g->rg, h) : h;
}

/* Placement of one group: N nodes (NVLink domains) of g GPUs each (uniform),
 * pos[n*g + l] = the group position of the l-th GPU (in group order) on the
 * group's n-th domain (in order of first appearance). */
typedef struct geo {
    int N, g, uniform;
    int *pos;            /* NULL: from the grid rg */
    const rgrid *rg;
} geo;

static inline int geo_pos(const geo *G, int i)
{
    return G->pos ? G->pos[i] : usim_grid_geo_pos(G->rg, i / G->g, i % G->g);
}

/* Group gi's placement: from the grid R (any group is placed as group 0), or
 * from its listed ranks (coll_group.c). */
int usim_geometry(usim_net *net, const usim_coll *c, const rgrid *R, int gi, geo *G);

/* The transfer buffer (coll_gen.c): per-GPU counter arrays; count a transfer;
 * count it and, within the window, store it with dependencies d0, d1 (its
 * index, or -1 if not stored); a transfer waiting for every index in deps;
 * free the buffer. */
int usim_gen_count_arrays(gen *g);
void usim_gen_count(gen *g, int src, int dst, uint64_t payload);
int usim_gen_put(gen *g, int src, int dst, uint64_t payload, int d0, int d1, int step);
int usim_gen_put_all(gen *g, int src, int dst, uint64_t payload, int *deps, int nd);
void usim_gen_free(gen *g);

/* ------------------------------------------------------------ rings (coll_ring.c) */

/* Channels of the ring algorithm on group placement G. */
int usim_ring_channels(usim_net *net, const geo *G);
/* Group gi's ring over C channels: the window's steps stored, every step counted. */
int usim_ring_gen(gen *g, int gi, const geo *G, int C);
/* The ring by its light cone (bval NULL: blocks by chunk sizes; else block
 * values, one position per block): 1 generated, 0 not reduced, -status. */
int usim_ring_gen_cone(gen *g, int gi, const geo *G, int C, int w, const int *bval);
/* One ring over a group placed unevenly on its domains, by its light cone:
 * 1 generated, 0 not reduced, -status. */
int usim_ring_gen_uneven(gen *g, int gi, const geo *G, int w);

/* ------------------------------------------------------------ tree, NVLS, point-to-point (coll_tree.c) */

/* The tree all-reduce over 2g channels (only channel 0 when g->tree_sym). */
int usim_tree_gen(gen *g, int gi, const geo *G);
/* Whether the tree's channels are images of channel 0 (1), not (0), or -1. */
int usim_tree_symmetric(usim_net *n, const usim_coll *c, int classes, const rgrid *R, const geo *G);
/* The loads and limiting links of channel 0's transfers on the quotient. */
int usim_tree_loads(usim_net *n, const gen *g, const geo *G, usim_loads *ld);
void usim_nvls_gen(gen *g, int gi);
/* The NVLS-tree all-reduce: NVLS inside the nodes, two trees across them. */
int usim_nvlstree_gen(gen *g, int gi, const geo *G);
void usim_p2p_gen(gen *g, int gi);

/* ------------------------------------------------------------ equivalence classes (coll_class.c) */

/*
 * The groups of a collective run the same program.  When every group is
 * placed alike -- the same partition of its positions over nodes and NICs,
 * and every node and NIC holding the same multiset of group positions as the
 * corresponding one of group 0 -- every copy of a transfer of group 0 sees
 * links in the same state as the original at every instant (the flow engine
 * computes the same numbers for it), so only group 0 is simulated: each of
 * its transfers loads each link of group 0's routes once per copy crossing it
 * (shared NICs, spine links).  doc/simulator.md section "Engine" gives the
 * argument; anything else runs at full flow level.
 */
typedef struct cls {
    int mode;          /* the engine (USIM_ENGINE_*) of the network's collective state */
    int on;            /* simulate group 0 with loads */
    int nocone;        /* do not reduce a single ring by its light cone */
    int *pos;          /* per GPU: its position in its group, -1 if in none; then
                        * the number of classes and, with several, their tables */
    int borrowed;      /* pos belongs to the network's cache */
    /* classes of groups (analyze_groups): nrep of them (1: every group
     * alike); with several, per GPU its label class * size + position (-1:
     * in no group), per group its class, per class its representative group
     * and its number of groups */
    int nrep;
    const int *lab, *gcls, *rep, *csize;
    geo g0;            /* group 0's placement (N == 0: not computed) */
    rgrid rg;          /* the groups as a grid (rg.on), else listed in c->ranks */
} cls;

/* Position of GPU h in its group (-1: none), from the grid or the analysis. */
static inline int cls_pos(const cls *k, int h)
{
    return k->rg.on ? usim_grid_pos(&k->rg, h) : k->pos[h];
}

/* Label of GPU h in the link loads: its position, or with several classes
 * its class and position. */
static inline int cls_lab(const cls *k, int h)
{
    return k->lab ? k->lab[h] : cls_pos(k, h);
}

/* Whether c's groups are equivalent (k->on), with their classes; a status. */
int usim_cls_analyze(usim_net *n, const usim_coll *c, cls *k);
void usim_cls_free(cls *k);
/* The loads of group 0's transfers (arrays owned by the caller). */
int usim_cls_build_loads(usim_net *n, const cls *k, const usim_xfer *x, int nx, usim_loads *ld);

/* Classes of keys by hash (open addressing): class q has hash hs[q] and a
 * representative key; same(ctx, q) compares a new key with q's. */
typedef struct ctab {
    int *tab;
    uint64_t *hs;
    size_t tb;
    int n;
} ctab;

int usim_ctab_init(ctab *t, int max);
/* The class of a key of hash h, or a new one (number t->n - 1, *added). */
int usim_ctab_class(ctab *t, uint64_t h, int (*same)(const void *ctx, int q), const void *ctx, int *added);
void usim_ctab_free(ctab *t);
/* 64-bit hash of n ints. */
uint64_t usim_ints_hash(const int *v, size_t n);

#endif
