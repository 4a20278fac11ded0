/* SPDX-License-Identifier: Apache-2.0 */
/*
 * allgather.c -- all-gather context parallelism (the Llama 3 recipe): each
 * rank holds zigzag chunks j and 2P-1-j of every head; K and V are
 * all-gathered (MPI_Allgatherv) and put in position order, and each local
 * query chunk attends to all keys in one kernel call (no merge: one softmax
 * per row).  Backward: each rank computes dK, dV of the whole sequence from
 * its queries; a reduce-scatter (MPI_Reduce_scatter, sum) returns every
 * rank its tokens' gradients.  The gathered K, V are kept from the forward.
 * doc/methods.md has the volumes.
 */
#include <string.h>

#include "methods.h"

struct uly_ag {
    uly_comm *c;
    uly_attn_desc a;
    uly_sp_plan p;
    int P, rank;
    uly_kernel_opts ko;
    int64_t B, d, H, Hkv;
    size_t es;
    uly_volume *vol;
    int *nseg;                    /* (P) */
    int64_t (*segb)[2], (*segc)[2];
    size_t *cnt, *dsp;            /* (P) elements per rank block of (B, n_s, Hkv, d), offsets */
    char *Q, *O, *L, *dO, *dQ;    /* own tokens, segment-major */
    char *K, *V;                  /* (B, N, Hkv, d) position order */
    char *dK, *dV, *dKt, *dVt;    /* (B, N, Hkv, d) */
    char *stage;                  /* (B, N, Hkv, d) rank-block order */
    char *owned;
    int have_fwd;
};

void uly_ag_free(uly_ag *g)
{
    if (!g)
        return;
    uly_free(g->owned);
    uly_free(g->nseg);
    uly_free(g);
}

/* Bytes of the per-rank geometry tables of P ranks. */
static uint64_t ag_geometry_bytes(int P)
{
    return (uint64_t)(P + 1) * (sizeof(int) + 4 * sizeof(int64_t) + 2 * sizeof(size_t));
}

/* The buffers of one allocation, in the order of the slots of uly_ag_create:
 * n own tokens of N, elements of es bytes. */
enum { AG_NBUF = 12 };
static void ag_carve_bufs(const uly_attn_desc *a, int64_t n, uly_bufs *t)
{
    const int64_t B = a->batch, N = a->seq, d = a->head_dim, H = a->heads, Hkv = a->kv_heads;
    const size_t es = uly_dtype_size(a->dtype);
    const struct {
        const char *name;
        int64_t dims[4];
    } tab[AG_NBUF] = {
        {"all-gather Q", {B, n, H, d}},  {"all-gather O", {B, n, H, d}},     {"all-gather LSE", {B, H, n, 1}},
        {"all-gather dO", {B, n, H, d}}, {"all-gather dQ", {B, n, H, d}},    {"all-gather K", {B, N, Hkv, d}},
        {"all-gather V", {B, N, Hkv, d}}, {"all-gather dK", {B, N, Hkv, d}}, {"all-gather dV", {B, N, Hkv, d}},
        {"all-gather dK (own)", {B, N, Hkv, d}}, {"all-gather dV (own)", {B, N, Hkv, d}},
        {"all-gather staging", {B, N, Hkv, d}}};
    for (int i = 0; i < AG_NBUF; i++)
        uly_bufs_add(t, tab[i].name, uly_buf_bytes(es, 4, tab[i].dims), ULY_BUF_HEAP);
}

void uly_ag_bufs(const uly_attn_desc *a, const uly_sp_plan *p, int rank, uly_bufs *t)
{
    int64_t b[2], c[2];
    const int ns = uly_plan_tokens(p, a->seq, rank, b, c);
    uly_bufs_add(t, "all-gather context", sizeof(uly_ag), ULY_BUF_HEAP);
    uly_bufs_add(t, "all-gather geometry", ag_geometry_bytes(p->P), ULY_BUF_HEAP);
    ag_carve_bufs(a, c[0] + (ns > 1 ? c[1] : 0), t);
}

int uly_ag_create(uly_comm *c, const uly_attn_desc *a, const uly_sp_plan *p, const uly_kernel_opts *ko,
                  uly_volume *vol, uly_ag **out)
{
    *out = NULL;
    uly_ag *g = uly_calloc(1, sizeof *g);
    if (!g)
        return uly_set_error(ULY_ENOMEM, "cannot allocate the all-gather context");
    g->c = c;
    g->a = *a;
    g->p = *p;
    g->P = p->P;
    g->rank = uly_comm_rank(c);
    g->ko = *ko;
    g->ko.head_begin = 0;
    g->ko.head_count = 0;
    g->ko.kv_expanded = 0;
    g->B = a->batch;
    g->d = a->head_dim;
    g->H = a->heads;
    g->Hkv = a->kv_heads;
    g->es = uly_dtype_size(a->dtype);
    g->vol = vol;
    const int P = g->P;
    g->nseg = uly_calloc(1, (size_t)ag_geometry_bytes(P));
    if (!g->nseg) {
        uly_ag_free(g);
        return uly_set_error(ULY_ENOMEM, "cannot allocate the all-gather geometry for %d ranks", P);
    }
    g->segb = (int64_t (*)[2])(void *)(g->nseg + P + (P & 1));
    g->segc = g->segb + P;
    g->cnt = (size_t *)(void *)(g->segc + P);
    g->dsp = g->cnt + P;
    size_t off = 0;
    const size_t kvrow = (size_t)(g->B * g->Hkv * g->d);
    for (int s = 0; s < P; s++) {
        g->nseg[s] = uly_plan_tokens(p, a->seq, s, g->segb[s], g->segc[s]);
        int64_t n = 0;
        for (int x = 0; x < g->nseg[s]; x++)
            n += g->segc[s][x];
        g->cnt[s] = (size_t)n * kvrow;
        g->dsp[s] = off;
        off += g->cnt[s];
    }
    uly_bufs t = {0};
    ag_carve_bufs(a, (int64_t)(g->cnt[g->rank] / kvrow), &t);
    char **slots[AG_NBUF] = {&g->Q, &g->O, &g->L, &g->dO, &g->dQ, &g->K, &g->V, &g->dK, &g->dV, &g->dKt, &g->dVt,
                             &g->stage};
    char *ptr[AG_NBUF];
    void *base;
    int rc = uly_bufs_carve(&t, 0, 0, "all-gather buffers", &base, ptr);
    if (rc) {
        uly_ag_free(g);
        return rc;
    }
    g->owned = base;
    for (int i = 0; i < AG_NBUF; i++)
        *slots[i] = ptr[i];
    *out = g;
    return ULY_OK;
}

/* Rank blocks (B, n_s, X) in rank order <-> (B, N, X) in position order. */
static void blocks_to_positions(const uly_ag *g, const char *blocks, char *pos, size_t row)
{
    const int64_t N = g->a.seq;
    for (int s = 0; s < g->P; s++) {
        const int64_t n = (int64_t)(g->cnt[s] / (size_t)(g->B * g->Hkv * g->d));
        const char *blk = blocks + g->dsp[s] / (size_t)(g->Hkv * g->d) * row;
        for (int64_t b = 0; b < g->B; b++) {
            int64_t r0 = 0;
            for (int x = 0; x < g->nseg[s]; x++) {
                memcpy(pos + (size_t)(b * N + g->segb[s][x]) * row, blk + (size_t)(b * n + r0) * row,
                       (size_t)g->segc[s][x] * row);
                r0 += g->segc[s][x];
            }
        }
    }
}

static void positions_to_blocks(const uly_ag *g, const char *pos, char *blocks, size_t row)
{
    const int64_t N = g->a.seq;
    for (int s = 0; s < g->P; s++) {
        const int64_t n = (int64_t)(g->cnt[s] / (size_t)(g->B * g->Hkv * g->d));
        char *blk = blocks + g->dsp[s] / (size_t)(g->Hkv * g->d) * row;
        for (int64_t b = 0; b < g->B; b++) {
            int64_t r0 = 0;
            for (int x = 0; x < g->nseg[s]; x++) {
                memcpy(blk + (size_t)(b * n + r0) * row, pos + (size_t)(b * N + g->segb[s][x]) * row,
                       (size_t)g->segc[s][x] * row);
                r0 += g->segc[s][x];
            }
        }
    }
}

/* Elements before segment x of this rank's segment-major tensors of X heads. */
static size_t own_seg_off(const uly_ag *g, int x, int64_t X)
{
    size_t off = 0;
    for (int i = 0; i < x; i++)
        off += (size_t)(g->B * g->segc[g->rank][i] * X * g->d);
    return off;
}

static uly_kernel_opts ag_tile(const uly_ag *g, int x)
{
    uly_kernel_opts o = g->ko;
    o.q_begin = g->segb[g->rank][x];
    o.q_count = g->segc[g->rank][x];
    return o;
}

const void *uly_ag_lse(const uly_ag *g)
{
    return g->have_fwd ? g->L : NULL;
}

int uly_ag_fwd(uly_ag *g, const void *q, const void *k, const void *v, void *o, uly_phase_times *tm)
{
    const int r = g->rank, ns = g->nseg[r];
    const size_t es = g->es, qrow = (size_t)(g->H * g->d) * es, krow = (size_t)(g->Hkv * g->d) * es;
    const uint64_t own = g->cnt[r] * es, total = (uint64_t)(g->B * g->a.seq * g->Hkv * g->d) * es;
    g->have_fwd = 0;
    double t0 = uly_comm_wtime();
    int rc = uly_comm_allgatherv(g->c, k, g->stage, g->cnt, g->dsp, es);
    if (rc)
        return rc;
    blocks_to_positions(g, g->stage, g->K, krow);
    rc = uly_comm_allgatherv(g->c, v, g->stage, g->cnt, g->dsp, es);
    if (rc)
        return rc;
    blocks_to_positions(g, g->stage, g->V, krow);
    for (int w = ULY_AG_K; w <= ULY_AG_V; w++) {
        g->vol->sent[w] += (uint64_t)(g->P - 1) * own;
        g->vol->recv[w] += total - own;
    }
    double t1 = uly_comm_wtime();
    int64_t cs[2] = {g->segc[r][0], ns > 1 ? g->segc[r][1] : 0};
    uly_to_segmajor(q, g->Q, g->B, ns, cs, qrow);
    for (int x = 0; x < ns && !rc; x++) {
        if (cs[x] == 0)
            continue;
        uly_kernel_opts to = ag_tile(g, x);
        size_t qo = own_seg_off(g, x, g->H) * es;
        rc = uly_attn_fwd(&g->a, &to, g->Q + qo, g->K, g->V, g->O + qo, g->L + qo / (size_t)g->d);
    }
    if (!rc) {
        uly_from_segmajor(g->O, o, g->B, ns, cs, qrow);
        g->have_fwd = 1;
    }
    tm->comm_in += t1 - t0;
    tm->attn += uly_comm_wtime() - t1;
    return rc;
}

int uly_ag_bwd(uly_ag *g, const void *dout, void *dq, void *dk, void *dv, uly_phase_times *tm)
{
    if (!g->have_fwd)
        return uly_set_error(ULY_EINVAL, "all-gather backward without a successful forward");
    const int r = g->rank, ns = g->nseg[r];
    const size_t es = g->es, qrow = (size_t)(g->H * g->d) * es, krow = (size_t)(g->Hkv * g->d) * es;
    const size_t nkv = (size_t)(g->B * g->a.seq * g->Hkv * g->d);
    int64_t cs[2] = {g->segc[r][0], ns > 1 ? g->segc[r][1] : 0};
    double t0 = uly_comm_wtime();
    uly_to_segmajor(dout, g->dO, g->B, ns, cs, qrow);
    memset(g->dK, 0, nkv * es);
    memset(g->dV, 0, nkv * es);
    int lrc = ULY_OK;
    for (int x = 0; x < ns && !lrc; x++) {
        if (cs[x] == 0)
            continue;
        uly_kernel_opts to = ag_tile(g, x);
        size_t qo = own_seg_off(g, x, g->H) * es;
        lrc = uly_attn_bwd(&g->a, &to, g->Q + qo, g->K, g->V, g->O + qo, g->L + qo / (size_t)g->d, g->dO + qo,
                           g->dQ + qo, g->dKt, g->dVt);
        if (!lrc) {
            uly_axpy1(g->a.dtype, g->dK, g->dKt, nkv);
            uly_axpy1(g->a.dtype, g->dV, g->dVt, nkv);
        }
    }
    double t1 = uly_comm_wtime();
    /* the reduce-scatter runs on every rank even after a local failure
     * (it is collective); the failure is returned afterwards */
    positions_to_blocks(g, g->dK, g->stage, krow);
    int rc = uly_comm_reduce_scatter_sum(g->c, g->stage, dk, g->cnt, es);
    if (!rc) {
        positions_to_blocks(g, g->dV, g->stage, krow);
        rc = uly_comm_reduce_scatter_sum(g->c, g->stage, dv, g->cnt, es);
    }
    const uint64_t own = g->cnt[r] * es, total = nkv * es;
    for (int w = ULY_RS_DK; w <= ULY_RS_DV; w++) {
        g->vol->sent[w] += total - own;
        g->vol->recv[w] += (uint64_t)(g->P - 1) * own;
    }
    tm->attn += t1 - t0;
    tm->comm_out += uly_comm_wtime() - t1;
    if (rc)
        return rc;
    if (lrc)
        return lrc;
    uly_from_segmajor(g->dQ, dq, g->B, ns, cs, qrow);
    return ULY_OK;
}
