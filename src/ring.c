/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ring.c -- ring attention over MPI point-to-point (ring, zigzag, and the
 * ring half of usp).  Equations and schedule: doc/methods.md.
 *
 * Ring position j keeps the queries of its chunk and passes K/V shards to
 * j+1: at step t it holds the shard of position (j - t) mod R.  Forward:
 * while step t computes, the next shard already travels (double buffer);
 * each key tile's (O_t, LSE_t) is merged into the running (O, LSE) with the
 * exact rule of uly_attn_merge.  Backward (the standard ring backward): K/V
 * travel again; dK/dV of a shard travel with it, each position adding its
 * tiles' contribution after receiving the accumulator, and the last holder
 * returns them to the owner.  Shards no remaining position needs are not
 * sent (uly_plan_ring_hold), tiles with no visible pair are not computed.
 *
 * Every tensor is kept segment-major inside (a zigzag chunk has two
 * segments), so each tile is a plain kernel call on contiguous blocks.
 */
#include <math.h>
#include <string.h>

#include "methods.h"

enum { TAG_KV = 11, TAG_DKV = 12, TAG_RETURN = 13 };

struct uly_ring {
    uly_comm *c;
    uly_attn_desc a;           /* global problem */
    uly_sp_plan p;
    int j, R;
    uly_kernel_opts ko;        /* block sizes, threads, head range */
    int bf16;
    int64_t hq, hk, hd, d, B;  /* query heads, KV heads, heads of dK/dV, head dim, batch */
    size_t es;
    uly_volume *vol;
    int *nseg;                 /* (R) segments per position */
    int64_t (*segb)[2], (*segc)[2], *rows; /* (R) */
    int64_t nmax, cmax;        /* largest chunk, largest segment */
    /* buffers (elements of es bytes), segment-major */
    char *Q, *O, *L, *dO, *dQ; /* (B,n,hq,d) x2, (B,hq,n), (B,n,hq,d) x2 */
    char *KVown;               /* K then V of the own shard (B,n,hk,d) x2 */
    char *KV[2];               /* travelling K then V, (B,nmax,hk,d) x2 each */
    char *D[2], *Dtmp, *Dfin;  /* dK then dV, (B,nmax,hd,d) x2 each; Dfin (B,n,hd,d) x2 */
    char *Ot, *Lt, *dQt, *dKt, *dVt; /* one tile */
    char *owned;
    int have_fwd;
};

/* ------------------------------------------------------------ layouts */

void uly_to_segmajor(const void *src, void *dst, int64_t B, int nseg, const int64_t *c, size_t row_bytes)
{
    int64_t rows = 0;
    for (int s = 0; s < nseg; s++)
        rows += c[s];
    const char *in = src;
    char *out = dst;
    int64_t r0 = 0;
    for (int s = 0; s < nseg; s++) {
        for (int64_t b = 0; b < B; b++)
            memcpy(out + (size_t)(b * c[s]) * row_bytes, in + (size_t)(b * rows + r0) * row_bytes,
                   (size_t)c[s] * row_bytes);
        out += (size_t)(B * c[s]) * row_bytes;
        r0 += c[s];
    }
}

void uly_from_segmajor(const void *src, void *dst, int64_t B, int nseg, const int64_t *c, size_t row_bytes)
{
    int64_t rows = 0;
    for (int s = 0; s < nseg; s++)
        rows += c[s];
    const char *in = src;
    char *out = dst;
    int64_t r0 = 0;
    for (int s = 0; s < nseg; s++) {
        for (int64_t b = 0; b < B; b++)
            memcpy(out + (size_t)(b * rows + r0) * row_bytes, in + (size_t)(b * c[s]) * row_bytes,
                   (size_t)c[s] * row_bytes);
        in += (size_t)(B * c[s]) * row_bytes;
        r0 += c[s];
    }
}

void uly_lse_to_segmajor(const void *src, void *dst, int64_t B, int64_t X, int nseg, const int64_t *c,
                         size_t es)
{
    /* (B, X, rows) is (B*X) batch rows of `rows` one-element rows */
    uly_to_segmajor(src, dst, B * X, nseg, c, es);
}

void uly_lse_from_segmajor(const void *src, void *dst, int64_t B, int64_t X, int nseg, const int64_t *c,
                           size_t es)
{
    uly_from_segmajor(src, dst, B * X, nseg, c, es);
}

void uly_axpy1(uly_dtype t, void *y, const void *x, size_t n)
{
    if (t == ULY_F32) {
        float *fy = y;
        const float *fx = x;
        for (size_t i = 0; i < n; i++)
            fy[i] += fx[i];
    } else {
        double *fy = y;
        const double *fx = x;
        for (size_t i = 0; i < n; i++)
            fy[i] += fx[i];
    }
}

/* ------------------------------------------------------------ lifecycle */

void uly_ring_free(uly_ring *r)
{
    if (!r)
        return;
    uly_free(r->owned);
    uly_free(r->nseg);
    uly_free(r);
}

/* Elements before segment s of a segment-major chunk of X heads. */
static size_t seg_off(const uly_ring *r, int pos, int s, int64_t X)
{
    size_t off = 0;
    for (int i = 0; i < s; i++)
        off += (size_t)(r->B * r->segc[pos][i] * X * r->d);
    return off;
}

/* Query heads, KV heads, heads of dK/dV, own rows, largest chunk and
 * largest segment of the ring engine of position j (uly_ring_create's
 * arguments). */
typedef struct ring_dims {
    int64_t hq, hk, hd, n, nmax, cmax;
} ring_dims;

static void ring_dims_of(const uly_attn_desc *a, const uly_sp_plan *p, int j, int64_t head_begin,
                         int64_t head_count, int expanded, ring_dims *g)
{
    int64_t kb;
    memset(g, 0, sizeof *g);
    g->hq = head_count;
    uly_kv_range(a, head_begin, head_count, &kb, &g->hk);
    g->hd = expanded ? g->hq : g->hk;
    for (int x = 0; x < p->R; x++) {
        int64_t b[2], c[2], rows = 0;
        const int ns = uly_plan_chunk(p, a->seq, x, b, c);
        for (int s = 0; s < ns; s++) {
            rows += c[s];
            g->cmax = c[s] > g->cmax ? c[s] : g->cmax;
        }
        g->nmax = rows > g->nmax ? rows : g->nmax;
        if (x == j)
            g->n = rows;
    }
}

/* The buffers of one allocation, in the order of ring_slots (segment-major,
 * elements of es bytes). */
enum { RING_NBUF = 17 };
static void ring_carve_bufs(const ring_dims *g, int64_t B, int64_t d, size_t es, uly_bufs *t)
{
    const int64_t n = g->n, nm = g->nmax, cm = g->cmax, hq = g->hq, hk = g->hk, hd = g->hd;
    const struct {
        const char *name;
        int64_t dims[5];
    } tab[RING_NBUF] = {
        {"ring Q", {B, n, hq, d, 1}},          {"ring O", {B, n, hq, d, 1}},
        {"ring LSE", {B, hq, n, 1, 1}},        {"ring dO", {B, n, hq, d, 1}},
        {"ring dQ", {B, n, hq, d, 1}},         {"ring own K/V", {2, B, n, hk, d}},
        {"ring K/V (even)", {2, B, nm, hk, d}}, {"ring K/V (odd)", {2, B, nm, hk, d}},
        {"ring dK/dV (even)", {2, B, nm, hd, d}}, {"ring dK/dV (odd)", {2, B, nm, hd, d}},
        {"ring dK/dV (tile sum)", {2, B, nm, hd, d}}, {"ring dK/dV (final)", {2, B, n, hd, d}},
        {"ring tile O", {B, cm, hq, d, 1}},    {"ring tile LSE", {B, hq, cm, 1, 1}},
        {"ring tile dQ", {B, cm, hq, d, 1}},   {"ring tile dK", {B, cm, hd, d, 1}},
        {"ring tile dV", {B, cm, hd, d, 1}}};
    for (int i = 0; i < RING_NBUF; i++)
        uly_bufs_add(t, tab[i].name, uly_buf_bytes(es, 5, tab[i].dims), ULY_BUF_HEAP);
}

static uint64_t ring_geometry_bytes(int R)
{
    return (uint64_t)(R + 1) * (sizeof(int) + 5 * sizeof(int64_t));
}

void uly_ring_bufs(const uly_attn_desc *a, const uly_sp_plan *p, int j, int64_t head_begin, int64_t head_count,
                   int expanded, uly_bufs *t)
{
    ring_dims g;
    ring_dims_of(a, p, j, head_begin, head_count, expanded, &g);
    uly_bufs_add(t, "ring context", sizeof(uly_ring), ULY_BUF_HEAP);
    uly_bufs_add(t, "ring geometry", ring_geometry_bytes(p->R), ULY_BUF_HEAP);
    ring_carve_bufs(&g, a->batch, a->head_dim, uly_dtype_size(a->dtype), t);
}

int uly_ring_create(uly_comm *c, const uly_attn_desc *a, const uly_sp_plan *p, int j, int64_t head_begin,
                    int64_t head_count, int expanded, const uly_kernel_opts *ko, int bf16, uly_volume *vol,
                    uly_ring **out)
{
    *out = NULL;
    uly_ring *r = uly_calloc(1, sizeof *r);
    if (!r)
        return uly_set_error(ULY_ENOMEM, "cannot allocate the ring context");
    r->c = c;
    r->a = *a;
    r->p = *p;
    r->j = j;
    r->R = p->R;
    r->ko = *ko;
    r->ko.head_begin = head_begin;
    r->ko.head_count = head_count;
    r->ko.kv_expanded = expanded;
    r->bf16 = bf16;
    r->vol = vol;
    r->B = a->batch;
    r->d = a->head_dim;
    r->es = uly_dtype_size(a->dtype);
    ring_dims g;
    ring_dims_of(a, p, j, head_begin, head_count, expanded, &g);
    r->hq = g.hq;
    r->hk = g.hk;
    r->hd = g.hd;
    r->nmax = g.nmax;
    r->cmax = g.cmax;
    const int R = r->R;
    r->nseg = uly_calloc(1, (size_t)ring_geometry_bytes(R));
    if (!r->nseg) {
        uly_ring_free(r);
        return uly_set_error(ULY_ENOMEM, "cannot allocate the ring geometry for %d positions", R);
    }
    r->segb = (int64_t (*)[2])(void *)(r->nseg + R + (R & 1)); /* keep 8-byte alignment */
    r->segc = r->segb + R;
    r->rows = (int64_t *)(r->segc + R);
    for (int x = 0; x < R; x++) {
        r->nseg[x] = uly_plan_chunk(p, a->seq, x, r->segb[x], r->segc[x]);
        r->rows[x] = 0;
        for (int s = 0; s < r->nseg[x]; s++)
            r->rows[x] += r->segc[x][s];
    }
    /* one allocation carved into named buffers */
    uly_bufs t = {0};
    ring_carve_bufs(&g, r->B, r->d, r->es, &t);
    char **slots[RING_NBUF] = {&r->Q, &r->O, &r->L, &r->dO, &r->dQ, &r->KVown, &r->KV[0], &r->KV[1],
                               &r->D[0], &r->D[1], &r->Dtmp, &r->Dfin, &r->Ot, &r->Lt, &r->dQt, &r->dKt, &r->dVt};
    char *ptr[RING_NBUF];
    void *base;
    int rc = uly_bufs_carve(&t, 0, 0, "ring buffers", &base, ptr);
    if (rc) {
        uly_ring_free(r);
        return rc;
    }
    r->owned = base;
    for (int i = 0; i < RING_NBUF; i++)
        *slots[i] = ptr[i];
    *out = r;
    return ULY_OK;
}

/* ------------------------------------------------------------ tiles */

/* Whether some query of segment x of position j sees some key of segment y of src. */
static int tile_visible(const uly_ring *r, int x, int src, int y)
{
    const int64_t rows = r->a.doc_offsets ? r->a.batch : 1;
    for (int64_t b = 0; b < rows; b++)
        if (uly_attn_any_visible(&r->a, b, r->segb[r->j][x], r->segc[r->j][x], r->segb[src][y],
                                 r->segc[src][y]))
            return 1;
    return 0;
}

static uly_kernel_opts tile_opts(const uly_ring *r, int x, int src, int y)
{
    uly_kernel_opts o = r->ko;
    o.q_begin = r->segb[r->j][x];
    o.q_count = r->segc[r->j][x];
    o.k_begin = r->segb[src][y];
    o.k_count = r->segc[src][y];
    return o;
}

static size_t shard_elems(const uly_ring *r, int pos, int64_t X)
{
    return (size_t)(r->B * r->rows[pos] * X * r->d);
}

static void count(uly_ring *r, int kind, uint64_t sent, uint64_t recv)
{
    r->vol->sent[kind] += sent;
    r->vol->recv[kind] += recv;
}

/* The K/V hop after step t (forward and backward alike, counted as kinds
 * kk and kk + 1): receive the shard of step t + 1 from the predecessor into
 * KV[cur ^ 1] when this position holds it then, and send the shard of step
 * t on to the successor when the successor holds it then.  Both sides
 * evaluate the same plan function, so sends and receives match. */
static int post_kv_hop(uly_ring *r, int t, int cur, int kk, uly_comm_req *req)
{
    const int j = r->j, R = r->R, next = (j + 1) % R, prev = (j + R - 1) % R;
    const size_t es = r->es;
    int rc = ULY_OK;
    if (t + 1 >= R)
        return rc;
    if (uly_plan_ring_hold(&r->a, &r->p, j, t + 1)) {
        size_t bytes = 2 * shard_elems(r, uly_plan_ring_src(&r->p, j, t + 1), r->hk) * es;
        rc = uly_comm_irecv(r->c, r->KV[cur ^ 1], bytes, prev, TAG_KV, req);
        count(r, kk, 0, bytes / 2);
        count(r, kk + 1, 0, bytes / 2);
    }
    if (!rc && uly_plan_ring_hold(&r->a, &r->p, next, t + 1)) {
        size_t bytes = 2 * shard_elems(r, uly_plan_ring_src(&r->p, j, t), r->hk) * es;
        rc = uly_comm_isend(r->c, r->KV[cur], bytes, next, TAG_KV, req);
        count(r, kk, bytes / 2, 0);
        count(r, kk + 1, bytes / 2, 0);
    }
    return rc;
}

/* Forward tiles of the shard in `kv` (position src) merged into O, L.
 * first[x]: segment x has no tile yet. */
static int fwd_shard(uly_ring *r, int src, const char *kv, int *first)
{
    const int j = r->j;
    const size_t es = r->es;
    const char *K = kv, *V = kv + shard_elems(r, src, r->hk) * es;
    int rc = ULY_OK;
    for (int x = 0; x < r->nseg[j] && !rc; x++) {
        char *Ox = r->O + seg_off(r, j, x, r->hq) * es;
        char *Lx = r->L + seg_off(r, j, x, r->hq) / (size_t)r->d * es; /* (B, hq, c_x) */
        const char *Qx = r->Q + seg_off(r, j, x, r->hq) * es;
        const int64_t cx = r->segc[j][x];
        for (int y = 0; y < r->nseg[src] && !rc; y++) {
            if (!tile_visible(r, x, src, y))
                continue;
            uly_kernel_opts o = tile_opts(r, x, src, y);
            const char *Ky = K + seg_off(r, src, y, r->hk) * es, *Vy = V + seg_off(r, src, y, r->hk) * es;
            if (first[x]) {
                rc = uly_attn_fwd(&r->a, &o, Qx, Ky, Vy, Ox, Lx);
                if (!rc && r->bf16)
                    uly_round_bf16(r->a.dtype, Ox, (size_t)(r->B * cx * r->hq * r->d));
                first[x] = 0;
            } else {
                rc = uly_attn_fwd(&r->a, &o, Qx, Ky, Vy, r->Ot, r->Lt);
                if (!rc && r->bf16)
                    uly_round_bf16(r->a.dtype, r->Ot, (size_t)(r->B * cx * r->hq * r->d));
                if (!rc)
                    rc = uly_attn_merge(r->a.dtype, r->B, cx, r->hq, r->d, Ox, Lx, r->Ot, r->Lt, r->bf16);
            }
        }
    }
    return rc;
}

int uly_ring_fwd(uly_ring *r, const void *q, const void *k, const void *v, void *o, void *lse,
                 uly_phase_times *tm)
{
    const int j = r->j, R = r->R, n = r->nseg[j];
    const size_t es = r->es, qrow = (size_t)(r->hq * r->d) * es, krow = (size_t)(r->hk * r->d) * es;
    r->have_fwd = 0;
    uly_to_segmajor(q, r->Q, r->B, n, r->segc[j], qrow);
    uly_to_segmajor(k, r->KVown, r->B, n, r->segc[j], krow);
    uly_to_segmajor(v, r->KVown + shard_elems(r, j, r->hk) * es, r->B, n, r->segc[j], krow);
    memcpy(r->KV[0], r->KVown, 2 * shard_elems(r, j, r->hk) * es);
    int first[2] = {1, 1};
    int local = ULY_OK, cur = 0;
    for (int t = 0; t < R; t++) {
        const int src = uly_plan_ring_src(&r->p, j, t);
        uly_comm_req req = {.n = 0};
        int rc = post_kv_hop(r, t, cur, ULY_RING_K, &req);
        if (rc) {
            uly_comm_wait(&req);
            return rc;
        }
        double t0 = uly_comm_wtime();
        if (!local && uly_plan_ring_hold(&r->a, &r->p, j, t) && uly_plan_ring_need(&r->a, &r->p, j, src))
            local = fwd_shard(r, src, r->KV[cur], first);
        double t1 = uly_comm_wtime();
        rc = uly_comm_wait(&req);
        tm->attn += t1 - t0;
        tm->wait += uly_comm_wtime() - t1;
        if (rc)
            return rc;
        cur ^= 1;
    }
    /* segments that saw nothing at all (never with whole documents) */
    for (int x = 0; x < n; x++)
        if (first[x]) {
            const size_t cnt = (size_t)(r->B * r->segc[j][x] * r->hq);
            memset(r->O + seg_off(r, j, x, r->hq) * es, 0, cnt * (size_t)r->d * es);
            char *Lx = r->L + seg_off(r, j, x, r->hq) / (size_t)r->d * es;
            for (size_t i = 0; i < cnt; i++) {
                if (r->a.dtype == ULY_F32)
                    ((float *)(void *)Lx)[i] = -INFINITY;
                else
                    ((double *)(void *)Lx)[i] = -INFINITY;
            }
        }
    if (local)
        return local;
    uly_from_segmajor(r->O, o, r->B, n, r->segc[j], qrow);
    uly_lse_from_segmajor(r->L, lse, r->B, r->hq, n, r->segc[j], es);
    r->have_fwd = 1;
    return ULY_OK;
}

/* Backward tiles of the shard in `kv` (position src): dQ accumulates in
 * r->dQ, the shard's dK, dV contributions go to Dtmp (zeroed here). */
static int bwd_shard(uly_ring *r, int src, const char *kv)
{
    const int j = r->j;
    const size_t es = r->es, dsz = shard_elems(r, src, r->hd);
    const char *K = kv, *V = kv + shard_elems(r, src, r->hk) * es;
    memset(r->Dtmp, 0, 2 * dsz * es);
    int rc = ULY_OK;
    for (int x = 0; x < r->nseg[j] && !rc; x++) {
        const size_t qoff = seg_off(r, j, x, r->hq) * es;
        const char *Lx = r->L + seg_off(r, j, x, r->hq) / (size_t)r->d * es;
        const int64_t cx = r->segc[j][x];
        for (int y = 0; y < r->nseg[src] && !rc; y++) {
            if (!tile_visible(r, x, src, y))
                continue;
            uly_kernel_opts o = tile_opts(r, x, src, y);
            const size_t koff = seg_off(r, src, y, r->hk) * es, doff = seg_off(r, src, y, r->hd) * es;
            rc = uly_attn_bwd(&r->a, &o, r->Q + qoff, K + koff, V + koff, r->O + qoff, Lx, r->dO + qoff,
                              r->dQt, r->dKt, r->dVt);
            if (rc)
                break;
            const size_t nk = (size_t)(r->B * r->segc[src][y] * r->hd * r->d);
            uly_axpy1(r->a.dtype, r->dQ + qoff, r->dQt, (size_t)(r->B * cx * r->hq * r->d));
            uly_axpy1(r->a.dtype, r->Dtmp + doff, r->dKt, nk);
            uly_axpy1(r->a.dtype, r->Dtmp + dsz * es + doff, r->dVt, nk);
        }
    }
    return rc;
}

int uly_ring_bwd(uly_ring *r, const void *dout, void *dq, void *dk, void *dv, uly_phase_times *tm)
{
    if (!r->have_fwd)
        return uly_set_error(ULY_EINVAL, "ring backward without a successful forward");
    const int j = r->j, R = r->R, n = r->nseg[j];
    const size_t es = r->es, qrow = (size_t)(r->hq * r->d) * es, drow = (size_t)(r->hd * r->d) * es;
    const int next = (j + 1) % R, prev = (j + R - 1) % R;
    const int last = uly_plan_ring_last(&r->a, &r->p, j);
    const size_t own_d = shard_elems(r, j, r->hd);
    uly_to_segmajor(dout, r->dO, r->B, n, r->segc[j], qrow);
    memset(r->dQ, 0, (size_t)(r->B * r->rows[j] * r->hq * r->d) * es);
    memcpy(r->KV[0], r->KVown, 2 * shard_elems(r, j, r->hk) * es);
    uly_comm_req back = {.n = 0}, dsend = {.n = 0}, drecv = {.n = 0};
    int rc = ULY_OK, local = ULY_OK, cur = 0;
    if (last != j) { /* my shard's gradients come back from its last holder */
        rc = uly_comm_irecv(r->c, r->Dfin, 2 * own_d * es, last, TAG_RETURN, &back);
        count(r, ULY_RING_DK, 0, own_d * es);
        count(r, ULY_RING_DV, 0, own_d * es);
    }
    for (int t = 0; t < R && !rc; t++) {
        const int src = uly_plan_ring_src(&r->p, j, t);
        const int held = uly_plan_ring_hold(&r->a, &r->p, j, t);
        const size_t dsz = shard_elems(r, src, r->hd);
        uly_comm_req req = {.n = 0};
        rc = post_kv_hop(r, t, cur, ULY_RING_BK, &req);
        double t0 = uly_comm_wtime();
        int computed = 0;
        if (!rc && !local && held && uly_plan_ring_need(&r->a, &r->p, j, src)) {
            local = bwd_shard(r, src, r->KV[cur]);
            computed = !local;
        }
        double t1 = uly_comm_wtime();
        tm->attn += t1 - t0;
        if (!rc && held) {
            /* the accumulator of this shard: starts here (t = 0) or arrives from prev */
            if (t == 0) {
                if (computed)
                    memcpy(r->D[cur], r->Dtmp, 2 * dsz * es);
                else
                    memset(r->D[cur], 0, 2 * dsz * es);
            } else {
                rc = uly_comm_wait(&drecv);
                if (!rc && computed)
                    uly_axpy1(r->a.dtype, r->D[cur], r->Dtmp, 2 * dsz);
            }
        }
        if (!rc)
            rc = uly_comm_wait(&dsend); /* D[cur ^ 1] is free again */
        if (!rc && held) {
            if (uly_plan_ring_hold(&r->a, &r->p, next, t + 1)) {
                rc = uly_comm_isend(r->c, r->D[cur], 2 * dsz * es, next, TAG_DKV, &dsend);
                count(r, ULY_RING_DK, dsz * es, 0);
                count(r, ULY_RING_DV, dsz * es, 0);
            } else if (src != j) {
                rc = uly_comm_isend(r->c, r->D[cur], 2 * dsz * es, src, TAG_RETURN, &dsend);
                count(r, ULY_RING_DK, dsz * es, 0);
                count(r, ULY_RING_DV, dsz * es, 0);
            } else {
                memcpy(r->Dfin, r->D[cur], 2 * dsz * es); /* my own shard ends here */
            }
        }
        /* the accumulator of the next step's shard comes from prev (whether or
         * not this position held a shard at this step) */
        if (!rc && uly_plan_ring_hold(&r->a, &r->p, j, t + 1)) {
            const size_t nd = shard_elems(r, uly_plan_ring_src(&r->p, j, t + 1), r->hd);
            rc = uly_comm_irecv(r->c, r->D[cur ^ 1], 2 * nd * es, prev, TAG_DKV, &drecv);
            count(r, ULY_RING_DK, 0, nd * es);
            count(r, ULY_RING_DV, 0, nd * es);
        }
        int wrc = uly_comm_wait(&req);
        tm->wait += uly_comm_wtime() - t1;
        if (!rc)
            rc = wrc;
        cur ^= 1;
    }
    double t2 = uly_comm_wtime();
    int w1 = uly_comm_wait(&dsend), w2 = uly_comm_wait(&drecv), w3 = uly_comm_wait(&back);
    tm->wait += uly_comm_wtime() - t2;
    if (!rc)
        rc = w1 ? w1 : w2 ? w2 : w3;
    if (rc)
        return rc;
    if (local)
        return local;
    uly_from_segmajor(r->dQ, dq, r->B, n, r->segc[j], qrow);
    uly_from_segmajor(r->Dfin, dk, r->B, n, r->segc[j], drow);
    uly_from_segmajor(r->Dfin + own_d * es, dv, r->B, n, r->segc[j], drow);
    return ULY_OK;
}
