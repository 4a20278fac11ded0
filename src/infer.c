/* SPDX-License-Identifier: Apache-2.0 */
/*
 * infer.c -- sequence-parallel inference over MPI (ulysses_dist.h): the
 * prefill by any SP method (uly_sp_*), one all-to-allv moving the prompt's
 * K, V from the method's token shards into the KV-cache layout, and the
 * decode steps of dcp and helix (ulysses_infer.h) with the merge of
 * src/infer_impl.h, the same code uly_decode_emulate runs.
 *
 * Everything is allocated at create from one table (infer_bufs), which
 * uly_infer_memory sums: no step allocates, except the decode kernel's
 * per-call workspace, so no rank can fail in the middle of a collective.
 */
#include <string.h>

#include "infer_impl.h"
#include "methods.h"
#include "ulysses_dist.h"

enum { IB_K, IB_V, IB_Q, IB_QBLK, IB_PO, IB_PL, IB_LALL, IB_LTOT, IB_SEND, IB_RECV, IB_MLSE, IB_RUNS, IB_COUNTS,
       IB_KVSEND, IB_KVRECV, IB_N };

struct uly_infer {
    uly_comm *c;
    int rank, P;
    uly_attn_desc a;
    uly_infer_opts o;
    uly_kv_layout L;
    uly_sp_plan plan;      /* the prefill's */
    uly_sp *sp;
    int64_t hb, hc;        /* this rank's query heads */
    int64_t cap_rows;      /* rows of this rank's shard at capacity */
    int64_t max_runs;      /* runs of this rank's shard at capacity */
    int64_t len;           /* tokens per sequence in the cache */
    int prefilled;
    uint64_t steps;
    void *base;
    char *buf[IB_N];
    uly_decode_volume vol;
    uint64_t kv_sent, kv_recv;
    uly_infer_times times;
};

/* ------------------------------------------------------------ checks */

/* The checks of create that need no allocation: the layout into *L, the
 * prefill's plan into *p. */
static int infer_check(const uly_attn_desc *a, const uly_infer_opts *o, int P, uly_kv_layout *L, uly_sp_plan *p)
{
    if (!a)
        return uly_set_error(ULY_EINVAL, "attention description is NULL");
    if (!o)
        return uly_set_error(ULY_EINVAL, "inference options are NULL");
    int rc = uly_attn_desc_check(a);
    if (rc)
        return rc;
    if (!a->causal)
        return uly_set_error(ULY_EINVAL, "inference needs a causal problem (decoding is causal)");
    if (a->doc_offsets || a->docs)
        return uly_set_error(ULY_EINVAL, "inference does not support packed documents");
    if (o->scheme < 0 || o->scheme >= ULY_DECODE_COUNT)
        return uly_set_error(ULY_EINVAL, "unknown decode scheme %d", o->scheme);
    if (o->threads < 0)
        return uly_set_error(ULY_EINVAL, "decode threads must be >= 0 (got %d)", o->threads);
    if (o->capacity < a->seq)
        return uly_set_error(ULY_EINVAL, "KV-cache capacity of %lld tokens is below the prompt's %lld",
                             (long long)o->capacity, (long long)a->seq);
    if ((rc = uly_kv_layout_init(L, o->kv_kind, P, o->kv_block, a->seq)))
        return rc;
    const uly_sp_opts *s = &o->prefill;
    return uly_sp_plan_init(p, s->method, P, s->ulysses_degree, s->placement);
}

/* What create carves, in table order (entries IB_K .. IB_KVRECV). */
static void infer_bufs(const uly_attn_desc *a, const uly_infer_opts *o, const uly_kv_layout *L,
                       const uly_sp_plan *p, int rank, uly_bufs *t)
{
    const int P = L->P;
    const size_t es = uly_dtype_size(a->dtype);
    int64_t hb, hc;
    uly_split(a->heads, P, rank, &hb, &hc);
    const int64_t B = a->batch, H = a->heads, d = a->head_dim, kvd = a->kv_heads * d;
    const int64_t rows = uly_kv_count(L, rank, o->capacity);
    const int64_t runs = uly_kv_segments(L, rank, o->capacity, NULL, NULL, 0);
    const int dcp = o->scheme == ULY_DECODE_DCP;
    const int64_t kv[2] = {B * rows, kvd};
    uly_bufs_add(t, "KV cache K", uly_buf_bytes(es, 2, kv), ULY_BUF_HEAP);
    uly_bufs_add(t, "KV cache V", uly_buf_bytes(es, 2, kv), ULY_BUF_HEAP);
    uly_bufs_add(t, "decode query", dcp ? uly_buf_bytes1(es, B * H * d) : 0, ULY_BUF_HEAP);
    uly_bufs_add(t, "decode query blocks", dcp ? uly_buf_bytes1(es, B * H * d) : 0, ULY_BUF_HEAP);
    uly_bufs_add(t, "decode partial O", uly_buf_bytes1(es, B * H * d), ULY_BUF_HEAP);
    uly_bufs_add(t, "decode partial LSE", uly_buf_bytes1(es, B * H), ULY_BUF_HEAP);
    uly_bufs_add(t, "decode LSE of every rank", dcp ? uly_buf_bytes1(es, P * B * H) : 0, ULY_BUF_HEAP);
    uly_bufs_add(t, "decode total LSE", dcp ? uly_buf_bytes1(sizeof(double), B * H) : 0, ULY_BUF_HEAP);
    uly_bufs_add(t, "decode send", uly_buf_bytes1(es, B * H * (d + !dcp)), ULY_BUF_HEAP);
    uly_bufs_add(t, "decode receive", uly_buf_bytes1(es, P * B * hc * (d + !dcp)), ULY_BUF_HEAP);
    uly_bufs_add(t, "decode merged LSE", dcp ? 0 : uly_buf_bytes1(es, B * hc), ULY_BUF_HEAP);
    uly_bufs_add(t, "decode runs", uly_buf_bytes1(sizeof(int64_t), 2 * (runs > 0 ? runs : 1)), ULY_BUF_HEAP);
    uly_bufs_add(t, "counts", uly_buf_bytes1(sizeof(size_t), 4 * (int64_t)P), ULY_BUF_HEAP);
    uint64_t ks = 0, kr = 0;
    uly_plan_prefill_kv_volume(a, p, L, rank, &ks, &kr);
    uly_bufs_add(t, "prefill KV send", uly_buf_bytes1(1, (int64_t)ks), ULY_BUF_HEAP);
    uly_bufs_add(t, "prefill KV receive", uly_buf_bytes1(1, (int64_t)kr), ULY_BUF_HEAP);
}

int uly_infer_memory(const uly_attn_desc *a, const uly_infer_opts *opts, int P, int rank, uly_bufs *out)
{
    if (!out)
        return uly_set_error(ULY_EINVAL, "buffer table pointer is NULL");
    if (P < 1 || rank < 0 || rank >= P)
        return uly_set_error(ULY_EINVAL, "rank %d of %d is out of range", rank, P);
    uly_kv_layout L;
    uly_sp_plan p;
    int rc = infer_check(a, opts, P, &L, &p);
    if (rc)
        return rc;
    /* in the order uly_infer_create allocates */
    uly_bufs_add(out, "inference context", sizeof(uly_infer), ULY_BUF_HEAP);
    uly_comm_bufs(P, out);
    infer_bufs(a, opts, &L, &p, rank, out);
    return uly_sp_memory(a, &opts->prefill, P, rank, out);
}

/* ------------------------------------------------------------ lifecycle */

void uly_infer_free(uly_infer *s)
{
    if (!s)
        return;
    uly_sp_free(s->sp);
    uly_comm_close(s->c);
    uly_free(s->base);
    uly_free(s);
}

#define INFER_FIELDS(X)                               \
    ULY_DESC_FIELDS(X)                                \
    X(a->docs, "documents per row")                   \
    X(o->scheme, "decode scheme")                     \
    X(o->kv_kind, "KV layout")                        \
    X(o->kv_block, "KV block")                        \
    X(o->capacity, "KV capacity")

enum { NINFCFG = 0 INFER_FIELDS(ULY_FIELD_COUNT) };
static const char *const infer_names[NINFCFG] = {INFER_FIELDS(ULY_FIELD_NAME)};

static void infer_values(const uly_attn_desc *a, const uly_infer_opts *o, int64_t *v)
{
    const int64_t sbits = uly_double_bits(a->scale);
    int i = 0;
    INFER_FIELDS(ULY_FIELD_VALUE)
}

/* Local part of create: checks, the communicator context, the buffers. */
static int infer_local(uly_infer *s, const uly_attn_desc *a, const uly_infer_opts *o)
{
    int rc = infer_check(a, o, s->P, &s->L, &s->plan);
    if (rc)
        return rc;
    s->a = *a;
    s->o = *o;
    uly_split(a->heads, s->P, s->rank, &s->hb, &s->hc);
    s->cap_rows = uly_kv_count(&s->L, s->rank, o->capacity);
    s->max_runs = uly_kv_segments(&s->L, s->rank, o->capacity, NULL, NULL, 0);
    if ((rc = uly_comm_alloc(s->rank, s->P, o->prefill.dist.max_count, &s->c)))
        return rc;
    uly_bufs t;
    memset(&t, 0, sizeof t);
    infer_bufs(a, o, &s->L, &s->plan, s->rank, &t);
    return uly_bufs_carve(&t, 0, 1, "the inference buffers", &s->base, s->buf);
}

int uly_infer_create(MPI_Comm comm, const uly_attn_desc *a, const uly_infer_opts *opts, uly_infer **out)
{
    if (!out)
        return uly_set_error(ULY_EINVAL, "output pointer is NULL");
    *out = NULL;
    int rank, size;
    int rc = uly_comm_info(comm, &rank, &size);
    if (rc)
        return rc;
    int local = ULY_OK;
    int64_t v[NINFCFG];
    memset(v, 0, sizeof v);
    uly_infer *s = uly_calloc(1, sizeof *s);
    if (!s) {
        local = uly_set_error(ULY_ENOMEM, "cannot allocate the inference context");
    } else {
        s->rank = rank;
        s->P = size;
        local = infer_local(s, a, opts);
        if (!local)
            infer_values(a, opts, v);
    }
    /* the options agreed before any other collective */
    rc = uly_comm_agree_on(comm, local, NINFCFG, v, infer_names);
    if (!rc)
        rc = uly_comm_attach(s->c, comm);
    if (!rc)
        rc = uly_sp_create(comm, a, &opts->prefill, &s->sp);
    if (rc) {
        uly_infer_free(s);
        return rc;
    }
    *out = s;
    return ULY_OK;
}

/* ------------------------------------------------------------ prefill */

/* Tokens of [b, b + c) that rank r holds in layout L. */
static int64_t owned_in(const uly_kv_layout *L, int r, int64_t b, int64_t c)
{
    return uly_kv_count(L, r, b + c) - uly_kv_count(L, r, b);
}

int uly_infer_prefill(uly_infer *s, const void *q, const void *k, const void *v, void *o)
{
    if (!s)
        return uly_set_error(ULY_EINVAL, "inference context is NULL");
    int local = s->prefilled ? uly_set_error(ULY_EINVAL, "prefill called twice") : ULY_OK;
    static const char *const names[1] = {"the call (prefill)"};
    const int64_t one = 1;
    int rc = uly_comm_agree(s->c, local, 1, &one, names);
    if (!rc)
        rc = uly_sp_fwd(s->sp, q, k, v, o);
    if (rc)
        return rc;
    const uly_kv_layout *L = &s->L;
    const int P = s->P, me = s->rank;
    const int64_t B = s->a.batch, N = s->a.seq;
    const size_t es = uly_dtype_size(s->a.dtype), kvd = (size_t)(s->a.kv_heads * s->a.head_dim), row = kvd * es;
    size_t *sc = (size_t *)s->buf[IB_COUNTS], *sd = sc + P, *rcn = sd + P, *rd = rcn + P;
    int64_t tb[2], tc[2], xb[2], xc[2];
    const int ns = uly_plan_tokens(&s->plan, N, me, tb, tc);
    const int64_t nr = tc[0] + (ns > 1 ? tc[1] : 0);
    /* counts (elements): K and V of the tokens each pair moves */
    size_t so = 0, ro = 0;
    for (int x = 0; x < P; x++) {
        int64_t to = 0, from = 0;
        for (int i = 0; i < ns; i++)
            to += owned_in(L, x, tb[i], tc[i]);
        const int nx = uly_plan_tokens(&s->plan, N, x, xb, xc);
        for (int i = 0; i < nx; i++)
            from += owned_in(L, me, xb[i], xc[i]);
        sc[x] = x == me ? 0 : (size_t)(2 * B * to) * kvd;
        rcn[x] = x == me ? 0 : (size_t)(2 * B * from) * kvd;
        sd[x] = so;
        rd[x] = ro;
        so += sc[x];
        ro += rcn[x];
    }
    /* pack: per destination, K of every sequence then V, tokens in order */
    char *send = s->buf[IB_KVSEND], *recv = s->buf[IB_KVRECV];
    for (int x = 0; x < P; x++) {
        char *w = send + sd[x] * es;
        for (int kvi = 0; kvi < 2; kvi++)
            for (int64_t b = 0; b < B; b++)
                for (int i = 0, r = 0; i < ns; i++)
                    for (int64_t t = tb[i]; t < tb[i] + tc[i]; t++, r++) {
                        if (uly_kv_owner(L, t) != x)
                            continue;
                        const char *src = (const char *)(kvi ? v : k) + ((size_t)(b * nr + r)) * row;
                        if (x == me) /* mine: straight into the cache */
                            memcpy(s->buf[kvi ? IB_V : IB_K] + ((size_t)(b * s->cap_rows + uly_kv_row(L, t))) * row,
                                   src, row);
                        else {
                            memcpy(w, src, row);
                            w += row;
                        }
                    }
    }
    rc = uly_comm_alltoallv(s->c, send, sc, sd, recv, rcn, rd, es);
    if (rc)
        return rc;
    for (int x = 0; x < P; x++) {
        if (x == me)
            continue;
        s->kv_sent += (uint64_t)sc[x] * es;
        s->kv_recv += (uint64_t)rcn[x] * es;
        const char *rp = recv + rd[x] * es;
        const int nx = uly_plan_tokens(&s->plan, N, x, xb, xc);
        for (int kvi = 0; kvi < 2; kvi++)
            for (int64_t b = 0; b < B; b++)
                for (int i = 0; i < nx; i++)
                    for (int64_t t = xb[i]; t < xb[i] + xc[i]; t++)
                        if (uly_kv_owner(L, t) == me) {
                            memcpy(s->buf[kvi ? IB_V : IB_K] + ((size_t)(b * s->cap_rows + uly_kv_row(L, t))) * row,
                                   rp, row);
                            rp += row;
                        }
    }
    s->len = N;
    s->prefilled = 1;
    return ULY_OK;
}

/* ------------------------------------------------------------ decode */

/* Attention of the new query qf (B, H, d) over this rank's shard of the
 * cache [0, len]: partial O and LSE into IB_PO, IB_PL.  The cache rows are
 * capacity-strided per sequence, so one kernel call per sequence (the bits
 * of an item do not depend on the others). */
static int infer_attend(uly_infer *s, const void *qf)
{
    const uly_attn_desc *a = &s->a;
    const int64_t n = s->len + 1, H = a->heads, d = a->head_dim;
    const size_t es = uly_dtype_size(a->dtype), kvd = (size_t)(a->kv_heads * d);
    int64_t *runs = (int64_t *)s->buf[IB_RUNS], *rc_ = runs + (s->max_runs > 0 ? s->max_runs : 1);
    const int64_t nr = uly_kv_segments(&s->L, s->rank, n, runs, rc_, s->max_runs);
    uly_attn_desc one = *a;
    one.batch = 1;
    for (int64_t b = 0; b < a->batch; b++) {
        int rc = uly_decode_attn(&one, s->len, nr, runs, rc_, (const char *)qf + (size_t)(b * H * d) * es,
                                 s->buf[IB_K] + (size_t)(b * s->cap_rows) * kvd * es,
                                 s->buf[IB_V] + (size_t)(b * s->cap_rows) * kvd * es,
                                 s->buf[IB_PO] + (size_t)(b * H * d) * es, s->buf[IB_PL] + (size_t)(b * H) * es,
                                 s->o.threads);
        if (rc)
            return rc;
    }
    return ULY_OK;
}

/* An all-to-allv of blocks of `per` elements per head row: to rank x the
 * heads it owns (send holds them in rank order), from every rank this
 * rank's; the self block is copied.  Counts bytes into vol[which]. */
static int infer_to_owners(uly_infer *s, int which, int64_t per)
{
    const int P = s->P, me = s->rank;
    const size_t es = uly_dtype_size(s->a.dtype);
    size_t *sc = (size_t *)s->buf[IB_COUNTS], *sd = sc + P, *rcn = sd + P, *rd = rcn + P;
    const size_t mine = (size_t)(s->a.batch * s->hc * per);
    size_t off = 0;
    for (int x = 0; x < P; x++) {
        int64_t hb, hc;
        uly_split(s->a.heads, P, x, &hb, &hc);
        const size_t n = (size_t)(s->a.batch * hc * per);
        sd[x] = off;
        sc[x] = x == me ? 0 : n;
        rd[x] = (size_t)x * mine;
        rcn[x] = x == me ? 0 : mine;
        if (x == me)
            memcpy(s->buf[IB_RECV] + rd[x] * es, s->buf[IB_SEND] + off * es, n * es);
        else {
            s->vol.sent[which] += (uint64_t)n * es;
            s->vol.recv[which] += (uint64_t)mine * es;
        }
        off += n;
    }
    return uly_comm_alltoallv(s->c, s->buf[IB_SEND], sc, sd, s->buf[IB_RECV], rcn, rd, es);
}

/* An all-gather of `n_of(x)` elements of every rank x into rbuf in rank
 * order; counts bytes into vol[which]. */
static int infer_allgather(uly_infer *s, int which, const void *sbuf, void *rbuf, int64_t per_head,
                           int all_heads)
{
    const int P = s->P, me = s->rank;
    const size_t es = uly_dtype_size(s->a.dtype);
    size_t *cnt = (size_t *)s->buf[IB_COUNTS], *dsp = cnt + P, off = 0;
    for (int x = 0; x < P; x++) {
        int64_t hb, hc;
        uly_split(s->a.heads, P, x, &hb, &hc);
        cnt[x] = (size_t)(s->a.batch * (all_heads ? s->a.heads : hc) * per_head);
        dsp[x] = off;
        off += cnt[x];
        if (x != me)
            s->vol.recv[which] += (uint64_t)cnt[x] * es;
    }
    s->vol.sent[which] += (uint64_t)(P - 1) * cnt[me] * es;
    return uly_comm_allgatherv(s->c, sbuf, rbuf, cnt, dsp, es);
}

int uly_infer_decode(uly_infer *s, const void *q, const void *k, const void *v, void *o, void *lse)
{
    if (!s)
        return uly_set_error(ULY_EINVAL, "inference context is NULL");
    const uly_attn_desc *a = &s->a;
    int local = ULY_OK;
    if (!s->prefilled)
        local = uly_set_error(ULY_EINVAL, "decode before the prefill");
    else if (s->len >= s->o.capacity)
        local = uly_set_error(ULY_ERANGE, "the KV cache is full (%lld tokens)", (long long)s->o.capacity);
    else if (!k || !v || ((!q || !o) && (s->o.scheme == ULY_DECODE_HELIX || s->hc > 0)))
        local = uly_set_error(ULY_EINVAL, "decode: NULL tensor on rank %d", s->rank);
    static const char *const names[2] = {"the call (decode)", "the decode step"};
    const int64_t vals[2] = {2, (int64_t)s->steps++};
    int rc = uly_comm_agree(s->c, local, 2, vals, names);
    if (rc)
        return rc;
    memset(&s->times, 0, sizeof s->times);
    const int P = s->P;
    const int64_t B = a->batch, H = a->heads, d = a->head_dim, hc = s->hc, pos = s->len;
    const size_t es = uly_dtype_size(a->dtype), kvd = (size_t)(a->kv_heads * d);
    /* the new token's K, V to its owner's shard */
    if (uly_kv_owner(&s->L, pos) == s->rank) {
        const int64_t r = uly_kv_row(&s->L, pos);
        for (int64_t b = 0; b < B; b++) {
            memcpy(s->buf[IB_K] + ((size_t)(b * s->cap_rows + r)) * kvd * es, (const char *)k + (size_t)b * kvd * es,
                   kvd * es);
            memcpy(s->buf[IB_V] + ((size_t)(b * s->cap_rows + r)) * kvd * es, (const char *)v + (size_t)b * kvd * es,
                   kvd * es);
        }
    }
    double t0 = uly_comm_wtime();
    const void *qf = q;
    if (s->o.scheme == ULY_DECODE_DCP) {
        /* all-gather the query heads: rank blocks (B, H_x, d) -> (B, H, d) */
        rc = infer_allgather(s, ULY_DEC_Q_AG, q, s->buf[IB_QBLK], d, 0);
        if (rc)
            return rc;
        const char *blk = s->buf[IB_QBLK];
        for (int x = 0; x < P; x++) {
            int64_t xb, xc;
            uly_split(H, P, x, &xb, &xc);
            for (int64_t b = 0; b < B; b++)
                memcpy(s->buf[IB_Q] + (size_t)((b * H + xb) * d) * es, blk + (size_t)(b * xc * d) * es,
                       (size_t)(xc * d) * es);
            blk += (size_t)(B * xc * d) * es;
        }
        qf = s->buf[IB_Q];
    }
    double t1 = uly_comm_wtime();
    s->times.q_gather = t1 - t0;
    local = infer_attend(s, qf);
    /* a kernel failure (its workspace) is agreed before the merge's collectives */
    const int64_t step = 3;
    rc = uly_comm_agree(s->c, local, 1, &step, names);
    if (rc)
        return rc;
    double t2 = uly_comm_wtime();
    s->times.attn = t2 - t1;
    double comm = 0, merge = 0;
    if (s->o.scheme == ULY_DECODE_DCP) {
        rc = infer_allgather(s, ULY_DEC_LSE_AG, s->buf[IB_PL], s->buf[IB_LALL], 1, 1);
        if (rc)
            return rc;
        double t3 = uly_comm_wtime();
        double *Lt = (double *)s->buf[IB_LTOT];
        uly_dec_lse_total(a->dtype, P, B * H, s->buf[IB_LALL], Lt);
        char *w = s->buf[IB_SEND];
        for (int x = 0; x < P; x++) {
            int64_t xb, xc;
            uly_split(H, P, x, &xb, &xc);
            uly_dec_scale(a->dtype, B, H, d, xb, xc, s->buf[IB_PO], s->buf[IB_PL], Lt, w);
            w += (size_t)(B * xc * d) * es;
        }
        double t4 = uly_comm_wtime();
        rc = infer_to_owners(s, ULY_DEC_O_RS, d);
        if (rc)
            return rc;
        double t5 = uly_comm_wtime();
        uly_dec_sum(a->dtype, P, B * hc * d, s->buf[IB_RECV], o);
        if (lse)
            for (int64_t b = 0; b < B; b++)
                for (int64_t h = 0; h < hc; h++) {
                    const double x = Lt[b * H + s->hb + h];
                    if (a->dtype == ULY_F32)
                        ((float *)lse)[b * hc + h] = (float)x;
                    else
                        ((double *)lse)[b * hc + h] = x;
                }
        double t6 = uly_comm_wtime();
        comm = (t3 - t2) + (t5 - t4);
        merge = (t4 - t3) + (t6 - t5);
    } else {
        char *w = s->buf[IB_SEND];
        for (int x = 0; x < P; x++) {
            int64_t xb, xc;
            uly_split(H, P, x, &xb, &xc);
            uly_dec_helix_pack(a->dtype, B, H, d, xb, xc, s->buf[IB_PO], s->buf[IB_PL], w);
            w += (size_t)(B * xc * (d + 1)) * es;
        }
        double t3 = uly_comm_wtime();
        rc = infer_to_owners(s, ULY_DEC_OL_A2A, d + 1);
        if (rc)
            return rc;
        double t4 = uly_comm_wtime();
        if (hc)
            rc = uly_dec_helix_merge(a->dtype, P, B, hc, d, s->buf[IB_RECV], o, s->buf[IB_MLSE]);
        if (!rc && lse && hc)
            memcpy(lse, s->buf[IB_MLSE], (size_t)(B * hc) * es);
        double t5 = uly_comm_wtime();
        comm = t4 - t3;
        merge = (t3 - t2) + (t5 - t4);
    }
    s->times.merge_comm = comm;
    s->times.merge = merge;
    if (!rc)
        s->len++;
    return rc;
}

/* ------------------------------------------------------------ queries */

void uly_infer_heads(const uly_infer *s, int64_t *head_begin, int64_t *head_count)
{
    *head_begin = s->hb;
    *head_count = s->hc;
}

int64_t uly_infer_length(const uly_infer *s)
{
    return s->len;
}

void uly_infer_cache(const uly_infer *s, const void **k, const void **v, int64_t *rows)
{
    *k = s->buf[IB_K];
    *v = s->buf[IB_V];
    *rows = uly_kv_count(&s->L, s->rank, s->len);
}

uly_sp *uly_infer_prefill_ctx(const uly_infer *s)
{
    return s->sp;
}

void uly_infer_volume(const uly_infer *s, uly_decode_volume *decode, uint64_t *kv_sent, uint64_t *kv_recv)
{
    if (decode)
        *decode = s->vol;
    if (kv_sent)
        *kv_sent = s->kv_sent;
    if (kv_recv)
        *kv_recv = s->kv_recv;
}

void uly_infer_times_get(const uly_infer *s, uly_infer_times *t)
{
    *t = s->times;
}
