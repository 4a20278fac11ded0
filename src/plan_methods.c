/* SPDX-License-Identifier: Apache-2.0 */
/*
 * plan_methods.c -- the plan layer of every sequence-parallel method:
 * who holds which tokens and heads, which K/V shard each ring position
 * computes at each step, which ring hops are needed at all, the causal work
 * per rank and step, and the expected bytes per call.  Pure integer math on
 * (rank, size, shape); no MPI, no BLAS.  The compose modules (src/ring.c,
 * src/allgather.c, src/usp.c), `ulysses explain` and ulysses-sim all read
 * their partitions and volumes from here.  Equations: doc/methods.md.
 */
#include <string.h>

#include "internal.h"

/* Every method's names: the library's, ulysses-sim's, and other spellings
 * (Megatron-Core's cp_comm_type; its p2p ring is load-balanced: zigzag). */
static const struct {
    const char *name, *sim_name, *alias[2];
    int traits;
} methods[ULY_METHOD_ALL] = {
    [ULY_METHOD_ULYSSES] = {"ulysses", "ulysses", {"a2a", NULL}, ULY_TRAIT_A2A},
    [ULY_METHOD_RING] = {"ring", "ring", {NULL, NULL}, ULY_TRAIT_RING},
    [ULY_METHOD_ZIGZAG] = {"zigzag", "ring-zigzag", {"p2p", NULL}, ULY_TRAIT_RING | ULY_TRAIT_ZIGZAG},
    [ULY_METHOD_ALLGATHER] = {"allgather", "all-gather", {"all_gather", NULL}, ULY_TRAIT_ZIGZAG | ULY_TRAIT_GATHER},
    [ULY_METHOD_USP] = {"usp", "usp", {"a2a+p2p", NULL}, ULY_TRAIT_A2A | ULY_TRAIT_RING | ULY_TRAIT_ZIGZAG},
    [ULY_METHOD_MEGATRON_SP] = {"megatron-sp", "megatron-sp", {NULL, NULL}, ULY_TRAIT_TP},
};

int uly_method_traits(int method)
{
    return method >= 0 && method < ULY_METHOD_ALL ? methods[method].traits : 0;
}
static const char *const placement_names[2] = {"ulysses-inner", "ring-inner"};

const char *uly_method_name(int method)
{
    return method >= 0 && method < ULY_METHOD_ALL ? methods[method].name : "?";
}

const char *uly_method_sim_name(int method)
{
    return method >= 0 && method < ULY_METHOD_ALL ? methods[method].sim_name : "?";
}

/* The method named `name` among the first n, or -1. */
static int method_find(const char *name, int n)
{
    for (int m = 0; name && m < n; m++) {
        if (strcmp(name, methods[m].name) == 0 || strcmp(name, methods[m].sim_name) == 0)
            return m;
        for (int i = 0; i < 2; i++)
            if (methods[m].alias[i] && strcmp(name, methods[m].alias[i]) == 0)
                return m;
    }
    return -1;
}

int uly_method_parse(const char *name, int *method)
{
    int m = method_find(name, ULY_METHOD_COUNT);
    if (m < 0)
        return uly_set_error(ULY_EINVAL, "unknown method '%s' (ulysses, ring, zigzag, allgather, usp; "
                             "Megatron cp_comm_type a2a, p2p, all_gather, a2a+p2p)", name ? name : "(null)");
    *method = m;
    return ULY_OK;
}

int uly_method_parse_any(const char *name, int *method)
{
    int m = method_find(name, ULY_METHOD_ALL);
    if (m < 0)
        return uly_set_error(ULY_EINVAL, "unknown method '%s'", name ? name : "(null)");
    *method = m;
    return ULY_OK;
}

const char *uly_placement_name(int placement)
{
    return placement == 0 || placement == 1 ? placement_names[placement] : "?";
}

int uly_placement_parse(const char *name, int *placement)
{
    for (int m = 0; name && m < 2; m++)
        if (strcmp(name, placement_names[m]) == 0) {
            *placement = m;
            return ULY_OK;
        }
    return uly_set_error(ULY_EINVAL, "unknown placement '%s' (ulysses-inner, ring-inner)",
                         name ? name : "(null)");
}

int uly_sp_plan_init(uly_sp_plan *p, int method, int P, int U, int placement)
{
    if (!p)
        return uly_set_error(ULY_EINVAL, "plan pointer is NULL");
    memset(p, 0, sizeof *p);
    if (method < 0 || method >= ULY_METHOD_COUNT)
        return uly_set_error(ULY_EINVAL, "unknown method %d", method);
    if (P < 1)
        return uly_set_error(ULY_EINVAL, "ranks must be >= 1 (got %d)", P);
    if (placement != ULY_PLACE_ULYSSES_INNER && placement != ULY_PLACE_RING_INNER)
        return uly_set_error(ULY_EINVAL, "unknown placement %d", placement);
    switch (method) {
    case ULY_METHOD_ULYSSES:
        if (U != 0 && U != P)
            return uly_set_error(ULY_EINVAL,
                                 "ulysses runs one all-to-all over all %d ranks (ulysses degree %d given; "
                                 "use usp for a smaller degree)", P, U);
        U = P;
        break;
    case ULY_METHOD_USP:
        if (U < 1 || U > P || P % U != 0)
            return uly_set_error(ULY_EINVAL, "usp needs a ulysses degree dividing %d ranks (got %d)", P, U);
        p->zigzag = 1;
        break;
    default:
        if (U != 0 && U != 1)
            return uly_set_error(ULY_EINVAL, "%s has no all-to-all (ulysses degree %d given; use usp)",
                                 methods[method].name, U);
        U = 1;
        p->zigzag = method != ULY_METHOD_RING;
        break;
    }
    p->method = method;
    p->P = P;
    p->U = U;
    p->R = P / U;
    p->placement = placement;
    return ULY_OK;
}

int uly_plan_usp_degree(int64_t H, int P)
{
    int best = 1;
    for (int U = 1; U <= P; U++)
        if (P % U == 0 && U <= H)
            best = U;
    return best;
}

int uly_plan_lse_layout(const uly_sp_plan *p, int64_t N, int64_t H, int rank, int64_t *head_begin,
                        int64_t *head_count, int64_t begin[2], int64_t count[2])
{
    int u, j;
    uly_plan_heads(p, H, rank, head_begin, head_count);
    switch (p->method) {
    case ULY_METHOD_ULYSSES:
        begin[0] = 0;
        count[0] = N;
        return 1;
    case ULY_METHOD_USP:
        uly_plan_grid(p, rank, &u, &j);
        return uly_plan_chunk(p, N, j, begin, count);
    default:
        return uly_plan_tokens(p, N, rank, begin, count);
    }
}

void uly_plan_grid(const uly_sp_plan *p, int rank, int *u, int *j)
{
    if (p->placement == ULY_PLACE_ULYSSES_INNER) {
        *u = rank % p->U;
        *j = rank / p->U;
    } else {
        *j = rank % p->R;
        *u = rank / p->R;
    }
}

int uly_plan_grid_rank(const uly_sp_plan *p, int u, int j)
{
    return p->placement == ULY_PLACE_ULYSSES_INNER ? j * p->U + u : u * p->R + j;
}

int uly_plan_chunk(const uly_sp_plan *p, int64_t N, int j, int64_t begin[2], int64_t count[2])
{
    if (!p->zigzag) {
        uly_split(N, p->R, j, &begin[0], &count[0]);
        return 1;
    }
    int64_t b1, c1, b2, c2;
    uly_split(N, 2 * p->R, j, &b1, &c1);
    uly_split(N, 2 * p->R, 2 * p->R - 1 - j, &b2, &c2);
    if (c2 == 0 || b1 + c1 == b2) { /* nothing second, or adjacent (R = 1) */
        begin[0] = b1;
        count[0] = c1 + c2;
        return 1;
    }
    if (c1 == 0) {
        begin[0] = b2;
        count[0] = c2;
        return 1;
    }
    begin[0] = b1; count[0] = c1;
    begin[1] = b2; count[1] = c2;
    return 2;
}

static int64_t seg_total(int n, const int64_t *count)
{
    int64_t s = 0;
    for (int i = 0; i < n; i++)
        s += count[i];
    return s;
}

int uly_plan_tokens(const uly_sp_plan *p, int64_t N, int rank, int64_t begin[2], int64_t count[2])
{
    int u, j;
    uly_plan_grid(p, rank, &u, &j);
    int64_t cb[2], cc[2];
    int ns = uly_plan_chunk(p, N, j, cb, cc);
    int64_t ob, oc;
    uly_split(seg_total(ns, cc), p->U, u, &ob, &oc);
    /* rows [ob, ob + oc) of the concatenated chunk, mapped to positions */
    int out = 0;
    int64_t row0 = 0;
    for (int s = 0; s < ns; s++) {
        int64_t lo = ob > row0 ? ob : row0, hi = ob + oc < row0 + cc[s] ? ob + oc : row0 + cc[s];
        if (hi > lo) {
            begin[out] = cb[s] + (lo - row0);
            count[out] = hi - lo;
            out++;
        }
        row0 += cc[s];
    }
    if (out == 0) {
        begin[0] = cb[0];
        count[0] = 0;
        out = 1;
    }
    return out;
}

void uly_plan_heads(const uly_sp_plan *p, int64_t H, int rank, int64_t *begin, int64_t *count)
{
    int u, j;
    switch (p->method) {
    case ULY_METHOD_ULYSSES:
        uly_split(H, p->P, rank, begin, count);
        break;
    case ULY_METHOD_USP:
        uly_plan_grid(p, rank, &u, &j);
        uly_split(H, p->U, u, begin, count);
        break;
    default:
        *begin = 0;
        *count = H;
        break;
    }
}

int uly_plan_ring_src(const uly_sp_plan *p, int j, int t)
{
    return ((j - t) % p->R + p->R) % p->R;
}

int uly_plan_steps(const uly_sp_plan *p)
{
    return uly_method_traits(p->method) & ULY_TRAIT_RING ? p->R : 1;
}

/* Batch rows whose masks differ: all of them with documents, else one. */
static int64_t mask_rows(const uly_attn_desc *a)
{
    return a->doc_offsets ? a->batch : 1;
}

int uly_plan_ring_need(const uly_attn_desc *a, const uly_sp_plan *p, int j, int src)
{
    int64_t qb[2], qc[2], kb[2], kc[2];
    int nq = uly_plan_chunk(p, a->seq, j, qb, qc), nk = uly_plan_chunk(p, a->seq, src, kb, kc);
    for (int64_t b = 0; b < mask_rows(a); b++)
        for (int x = 0; x < nq; x++)
            for (int y = 0; y < nk; y++)
                if (uly_attn_any_visible(a, b, qb[x], qc[x], kb[y], kc[y]))
                    return 1;
    return 0;
}

int uly_plan_ring_hold(const uly_attn_desc *a, const uly_sp_plan *p, int j, int t)
{
    if (t < 0 || t >= p->R)
        return 0;
    if (t == 0)
        return 1;
    const int src = uly_plan_ring_src(p, j, t);
    for (int k = 0; t + k < p->R; k++)
        if (uly_plan_ring_need(a, p, (j + k) % p->R, src))
            return 1;
    return 0;
}

int uly_plan_ring_last(const uly_attn_desc *a, const uly_sp_plan *p, int src)
{
    int t = 0;
    while (t + 1 < p->R && uly_plan_ring_hold(a, p, (src + t + 1) % p->R, t + 1))
        t++;
    return (src + t) % p->R;
}

/* Visible pairs between two segment lists, summed over the batch rows. */
static double seg_pairs(const uly_attn_desc *a, int nq, const int64_t *qb, const int64_t *qc, int nk,
                        const int64_t *kb, const int64_t *kc)
{
    double s = 0;
    for (int64_t b = 0; b < mask_rows(a); b++)
        for (int x = 0; x < nq; x++)
            for (int y = 0; y < nk; y++)
                s += (double)uly_attn_pairs_range(a, b, qb[x], qc[x], kb[y], kc[y]);
    return a->doc_offsets ? s : s * (double)a->batch;
}

double uly_plan_step_pairs(const uly_attn_desc *a, const uly_sp_plan *p, int rank, int t)
{
    if (t < 0 || t >= uly_plan_steps(p) || rank < 0 || rank >= p->P)
        return 0;
    int64_t all_b = 0, all_c = a->seq, qb[2], qc[2], kb[2], kc[2];
    int u, j, nq, nk;
    switch (p->method) {
    case ULY_METHOD_ULYSSES:
        return seg_pairs(a, 1, &all_b, &all_c, 1, &all_b, &all_c);
    case ULY_METHOD_ALLGATHER:
        nq = uly_plan_tokens(p, a->seq, rank, qb, qc);
        return seg_pairs(a, nq, qb, qc, 1, &all_b, &all_c);
    default:
        uly_plan_grid(p, rank, &u, &j);
        nq = uly_plan_chunk(p, a->seq, j, qb, qc);
        nk = uly_plan_chunk(p, a->seq, uly_plan_ring_src(p, j, t), kb, kc);
        return seg_pairs(a, nq, qb, qc, nk, kb, kc);
    }
}

/* KV heads travelling on the ring from a rank, and heads of its dK, dV. */
void uly_plan_ring_heads(const uly_attn_desc *a, const uly_sp_plan *p, int rank, int64_t *kvh, int64_t *dkvh)
{
    if (p->method != ULY_METHOD_USP) {
        *kvh = *dkvh = a->kv_heads;
        return;
    }
    int64_t hb, hc, kb, kc;
    uly_plan_heads(p, a->heads, rank, &hb, &hc);
    uly_kv_range(a, hb, hc, &kb, &kc);
    *kvh = kc;
    /* KV groups cut inside a group: gradients travel per query head so that
     * the all-to-all back can fold them in head order (doc/ulysses.md) */
    *dkvh = uly_plan_kv_replicated(a, p->U) ? hc : kc;
}

int64_t uly_plan_chunk_tokens(const uly_sp_plan *p, int64_t N, int j)
{
    int64_t b[2], c[2];
    int n = uly_plan_chunk(p, N, j, b, c);
    return seg_total(n, c);
}

uint64_t uly_plan_ring_hop_elems(const uly_attn_desc *a, const uly_sp_plan *p, int rank, int t, int which)
{
    if (!(uly_method_traits(p->method) & ULY_TRAIT_RING) || t < 0 || t >= p->R ||
        which < ULY_RING_K || which > ULY_RING_DV)
        return 0;
    int u, j;
    uly_plan_grid(p, rank, &u, &j);
    if (!uly_plan_ring_hold(a, p, j, t))
        return 0;
    const int src = uly_plan_ring_src(p, j, t);
    int64_t kvh, dkvh;
    uly_plan_ring_heads(a, p, rank, &kvh, &dkvh);
    const uint64_t row = (uint64_t)a->batch * (uint64_t)uly_plan_chunk_tokens(p, a->seq, src) *
                         (uint64_t)a->head_dim;
    const int next = uly_plan_ring_hold(a, p, (j + 1) % p->R, t + 1);
    switch (which) {
    case ULY_RING_K: case ULY_RING_V: case ULY_RING_BK: case ULY_RING_BV:
        return next ? row * (uint64_t)kvh : 0;
    default: /* dK, dV: to the successor, or back to the owner from the last holder */
        return next || j != src ? row * (uint64_t)dkvh : 0;
    }
}

uint64_t uly_plan_ring_hop(const uly_attn_desc *a, const uly_sp_plan *p, int rank, int t, int which)
{
    return uly_plan_ring_hop_elems(a, p, rank, t, which) * uly_dtype_size(a->dtype);
}
