/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist.c -- DeepSpeed-Ulysses attention: sequence-sharded Q, K, V are
 * re-sharded by heads with one all-to-all each, every rank runs attention
 * over the full sequence for its heads, and one all-to-all brings the output
 * back to sequence shards.  Backward mirrors it.  All MPI calls go through
 * comm.c.  This file is the context's life: its buffers (carved from named
 * tables that uly_dist_memory sums too), create and its agreement, forward
 * and backward, the getters.  The all-to-alls are in dist_a2a.c (blocks and
 * copies: dist_copy.c), the window in dist_shm.c, the overlapped paths in
 * dist_ovl.c and dist_ovs.c (dist_impl.h).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "dist_impl.h"

/* ------------------------------------------------------------ lifecycle */

void uly_dist_free(uly_dist *D)
{
    if (!D)
        return;
    for (int i = 0; i < 4; i++)
        uly_comm_nb_free(&D->ovl.op[i].q); /* before the communicator goes */
    uly_free(D->ovl.chunk_owned);
    uly_free(D->ovs.tab);
    uly_free(D->ovl.owned);
    uly_free(D->ovl.tab);
    uly_comm_close(D->c); /* and the window */
    uly_free(D->part.owned);
    uly_free(D->owned);
    uly_free(D->shm.heads_owned);
    uly_free(D->docs);
    uly_free(D);
}

/* ------------------------------------------------------------ buffers */

/*
 * What a context allocates on rank r of P, from the layout alone (no MPI):
 * dist_alloc and ovl_alloc carve their buffers from the tables below, and
 * uly_dist_memory sums the same tables.
 */
typedef struct dist_sizes {
    uly_layout L;              /* the Ulysses layout of the P ranks */
    int P, r;
    size_t es;
    int rep;                   /* KV groups cut between ranks: replicated KV */
    int stg;                   /* pack / unpack staging (not needed by shm, cma) */
    int shared;                /* the head-side buffers may go into a shared-memory window */
    int64_t n_r, h_r, kv_r;    /* this rank's tokens, query heads, KV heads */
    int K;                     /* overlap head chunks (1: no overlap tables) */
    size_t ost_seq, ost_head;  /* overlap staging elements per tensor: sequence side, head side */
    int64_t cap;               /* overlap: messages per chunk all-to-all */
    int64_t pipe_cap;          /* pipelined mode (asked for, or measured by auto): messages per all-to-all */
} dist_sizes;

/* Chunk c of K of rank s: query heads *qc, KV heads *kc. */
static void chunk_counts(const uly_layout *L, int K, int s, int c, int64_t *qc, int64_t *kc)
{
    int64_t qb, kb;
    uly_layout_chunk(L, K, s, c, &qb, qc, &kb, kc);
}

/* a has been checked (uly_attn_desc_check), o too (dist_opts_check). */
static int dist_sizes_init(const uly_attn_desc *a, const uly_dist_opts *o, int P, int r, dist_sizes *z)
{
    memset(z, 0, sizeof *z);
    uly_sp_plan p;
    int rc = uly_sp_plan_init(&p, ULY_METHOD_ULYSSES, P, 0, ULY_PLACE_ULYSSES_INNER);
    if (rc || (rc = uly_layout_init(&z->L, a, &p)))
        return rc;
    uly_rank_part me;
    uly_layout_part(&z->L, r, &me);
    z->P = P;
    z->r = r;
    z->es = uly_dtype_size(a->dtype);
    z->rep = z->L.rep;
    z->n_r = me.tokens;
    z->h_r = me.head_count;
    z->kv_r = me.kv_count;
    const int mode = o->a2a_mode;
    z->stg = P > 1 && mode != ULY_A2A_SHM && mode != ULY_A2A_CMA;
    z->shared = P > 1 && (mode == ULY_A2A_SHM || mode == ULY_A2A_CMA || mode == ULY_A2A_AUTO);
    if (P > 1 && (mode == ULY_A2A_PIPELINE || mode == ULY_A2A_AUTO)) {
        /* no block is larger than rank 0's tokens times rank 0's query heads
         * (the first ranks hold the extra token and head; KV and per-query-head
         * KV gradient blocks are no larger) */
        uly_rank_part p0;
        uly_layout_part(&z->L, 0, &p0);
        const uint64_t blk = uly_buf_bytes(1, 4, (const int64_t[4]){a->batch, p0.tokens, p0.head_count, a->head_dim});
        const size_t n = blk > SIZE_MAX ? SIZE_MAX
                                        : uly_comm_pipe_requests(P, (size_t)blk, uly_comm_count_limit(o->max_count));
        if (n > (size_t)INT_MAX / 2)
            return uly_set_error(ULY_EOVERFLOW, "pipelined all-to-all: too many messages per call (%zu)", n);
        z->pipe_cap = (int64_t)n;
    }
    z->K = o->overlap != ULY_OVERLAP_OFF && P > 1 ? uly_layout_chunks(&z->L, o->overlap_chunks) : 1;
    if (z->K < 2)
        return ULY_OK; /* nothing to chunk: the plain path runs */
    /* staging per tensor: the sequence side (packed blocks of every peer's
     * chunk heads) and, when B > 1, the head side (other ranks' tokens) */
    const int K = z->K;
    const int64_t B = a->batch, N = a->seq, d = a->head_dim, n_r = z->n_r;
    int64_t seq = 0, head = 0, big = 0;
    for (int c = 0; c < K; c++)
        for (int x = 0; x < 2; x++) {
            int64_t others = 0, own = 0;
            for (int s = 0; s < P; s++) {
                int64_t qc, kc;
                chunk_counts(&z->L, K, s, c, &qc, &kc);
                const int64_t v = x ? kc : qc;
                if (s == r)
                    own = v;
                else
                    others += v;
            }
            int64_t sq = B * n_r * d * others, hd = B * (N - n_r) * d * own;
            seq = sq > seq ? sq : seq;
            head = hd > head ? hd : head;
            big = B * N * d * own > big ? B * N * d * own : big;
        }
    big = seq > big ? seq : big;
    z->ost_seq = usz(seq);
    z->ost_head = B > 1 ? usz(head) : 0;
    const size_t lim = uly_comm_count_limit(o->max_count);
    const size_t pieces = (usz(big) + lim - 1) / lim;
    z->cap = 3 * 2 * (int64_t)(P - 1) * (int64_t)(pieces ? pieces : 1);
    if (z->cap > INT_MAX / 2)
        return uly_set_error(ULY_EOVERFLOW, "overlap: too many messages per all-to-all (%lld)", (long long)z->cap);
    return ULY_OK;
}

/* The partition and scratch tables (one zeroed allocation). */
enum { TAB_NBUF = 9 };
static void dist_table_bufs(const dist_sizes *z, uly_bufs *t)
{
    const uint64_t P = (uint64_t)z->P;
    uly_bufs_add(t, "partition tables", uly_buf_bytes1(sizeof(int64_t), (int64_t)(6 * P)), ULY_BUF_HEAP);
    uly_bufs_add(t, "count scratch", uly_buf_bytes1(sizeof(size_t), (int64_t)(4 * P)), ULY_BUF_HEAP);
    uly_bufs_add(t, "block scratch", uly_buf_bytes1(sizeof(comm_block), (int64_t)(2 * P)), ULY_BUF_HEAP);
    uly_bufs_add(t, "peer regions", uly_buf_bytes1(sizeof(char *), (int64_t)P), ULY_BUF_HEAP);
    uly_bufs_add(t, "shm progress", uly_buf_bytes1(1, (int64_t)P), ULY_BUF_HEAP);
    uly_bufs_add(t, "shm row copies", uly_buf_bytes1(sizeof(row_copy), (int64_t)P), ULY_BUF_HEAP);
    uly_bufs_add(t, "pipeline requests", uly_buf_bytes1(sizeof(MPI_Request), z->pipe_cap), ULY_BUF_HEAP);
    uly_bufs_add(t, "pipeline request owners", uly_buf_bytes1(sizeof(int), z->pipe_cap), ULY_BUF_HEAP);
    uly_bufs_add(t, "pipeline pieces left", uly_buf_bytes1(sizeof(int), z->pipe_cap ? (int64_t)P : 0), ULY_BUF_HEAP);
}

/* The context's own buffers beside the head-side ones (one allocation):
 * the entries present, and for each which of lse, sstage, rstage, expanded
 * (0..3) it is.  P = 1 aliases the caller's tensors. */
static int dist_main_bufs(const uly_attn_desc *a, const dist_sizes *z, uly_bufs *t, int ids[4])
{
    const int64_t B = a->batch, N = a->seq, H = a->heads, d = a->head_dim;
    /* staging: seq->heads sends B*n_r*H*d at most and receives B*N*h_r*d;
     * heads->seq the reverse.  Use the larger of the two for each stage. */
    const int64_t x = B * z->n_r * H * d, y = B * N * z->h_r * d, stage = x > y ? x : y;
    const int64_t lse[3] = {B, z->h_r, N}, exp[4] = {B, z->n_r, H, d};
    int n = 0;
    uly_bufs_add(t, "LSE", uly_buf_bytes(z->es, 3, lse), ULY_BUF_HEAP);
    ids[n++] = 0;
    if (z->stg) {
        uly_bufs_add(t, "send staging", uly_buf_bytes1(z->es, stage), ULY_BUF_HEAP);
        ids[n++] = 1;
        uly_bufs_add(t, "receive staging", uly_buf_bytes1(z->es, stage), ULY_BUF_HEAP);
        ids[n++] = 2;
    }
    if (z->rep) {
        uly_bufs_add(t, "KV gradients per query head", uly_buf_bytes(z->es, 4, exp), ULY_BUF_HEAP);
        ids[n++] = 3;
    }
    return n;
}

/* This rank's head-side region (entries of t at `where`); its size. */
static uint64_t dist_head_bufs(const uly_attn_desc *a, const dist_sizes *z, uly_bufs *t, int where)
{
    return uly_dist_head_region(a, z->es, z->h_r, z->kv_r, z->rep ? z->h_r : z->kv_r, NULL, t, where);
}

/* The overlap chunk tables (one zeroed allocation): cqb, cqc, ckb, ckc (K*P), cqo, cko (K). */
enum { CHUNK_NBUF = 6 };
static void ovl_chunk_bufs(const dist_sizes *z, uly_bufs *t)
{
    static const char *const names[CHUNK_NBUF] = {"chunk query heads", "chunk query head counts",
                                                  "chunk KV heads", "chunk KV head counts",
                                                  "chunk query head offsets", "chunk KV head offsets"};
    const int64_t KP = (int64_t)z->K * z->P;
    for (int i = 0; i < CHUNK_NBUF; i++)
        uly_bufs_add(t, names[i], uly_buf_bytes1(sizeof(int64_t), i < 4 ? KP : z->K), ULY_BUF_HEAP);
}

/* The overlap staging (one allocation): 2 ops x 3 tensors x (sequence +
 * head side), the LSE chunk by chunk (B > 1), dV's per-query-head
 * gradients (replicated KV).  Absent ones have 0 bytes. */
enum { STAGE_NBUF = 3 };
static void ovl_stage_bufs(const uly_attn_desc *a, const dist_sizes *z, uly_bufs *t)
{
    const int64_t B = a->batch, N = a->seq;
    const int64_t stage = 12 * (int64_t)(z->ost_seq + z->ost_head);
    const int64_t lse[3] = {B, z->h_r, N}, exp[4] = {B, z->n_r, a->heads, a->head_dim};
    uly_bufs_add(t, "overlap staging", uly_buf_bytes1(z->es, stage), ULY_BUF_HEAP);
    uly_bufs_add(t, "overlap LSE chunks", B > 1 ? uly_buf_bytes(z->es, 3, lse) : 0, ULY_BUF_HEAP);
    uly_bufs_add(t, "overlap dV per query head", z->rep ? uly_buf_bytes(z->es, 4, exp) : 0, ULY_BUF_HEAP);
}

/* The ops' per-peer tables (one zeroed allocation): per op (4) and tensor
 * (3), send and receive blocks, offsets, request indices and flags. */
enum { PEER_NBUF = 4 };
static void ovl_peer_bufs(const dist_sizes *z, uly_bufs *t)
{
    const int64_t np = 2 * 12 * (int64_t)z->P;
    uly_bufs_add(t, "overlap blocks", uly_buf_bytes1(sizeof(comm_block), np), ULY_BUF_HEAP);
    uly_bufs_add(t, "overlap offsets", uly_buf_bytes1(sizeof(size_t), np), ULY_BUF_HEAP);
    uly_bufs_add(t, "overlap request indices", uly_buf_bytes1(sizeof(int), np), ULY_BUF_HEAP);
    uly_bufs_add(t, "overlap block flags", uly_buf_bytes1(1, np), ULY_BUF_HEAP);
}

/* The tables of the path through the window (one zeroed allocation):
 * every rank's flag area, the input flags seen (P x 4), the output blocks
 * copied (K x 2 x P). */
enum { OVS_NBUF = 3 };
static void ovs_tab_bufs(const dist_sizes *z, uly_bufs *t)
{
    const int64_t P = z->P;
    uly_bufs_add(t, "window flag areas", uly_buf_bytes1(sizeof(char *), P), ULY_BUF_HEAP);
    uly_bufs_add(t, "window flags seen", uly_buf_bytes1(sizeof(uint64_t), 4 * P), ULY_BUF_HEAP);
    uly_bufs_add(t, "window blocks copied", uly_buf_bytes1(1, 2 * (int64_t)z->K * P), ULY_BUF_HEAP);
}

/*
 * The chunk tables and buffers of the overlapped path, from the layout
 * (uly_layout_chunks, uly_layout_chunk): chunk c of rank s takes KV heads
 * uly_split(kc[s], K, c) of its own and the query heads of [hb[s], +hc[s])
 * that use them; K is the smallest KV-head count over the ranks (capped by
 * the option), so every chunk of every rank is non-empty.
 */
static int ovl_alloc(uly_dist *D, const dist_sizes *z)
{
    const int P = D->P, r = D->rank;
    D->ovl.K = z->K;
    if (D->ovl.K < 2)
        return ULY_OK; /* nothing to chunk: the plain path runs */
    const int K = D->ovl.K;
    uly_bufs t = {0};
    char *ptr[ULY_BUFS_MAX];
    ovl_chunk_bufs(z, &t);
    int rc = uly_bufs_carve(&t, 0, 1, "overlap chunk tables", &D->ovl.chunk_owned, ptr);
    if (rc)
        return rc;
    D->ovl.cqb = (int64_t *)(void *)ptr[0]; D->ovl.cqc = (int64_t *)(void *)ptr[1];
    D->ovl.ckb = (int64_t *)(void *)ptr[2]; D->ovl.ckc = (int64_t *)(void *)ptr[3];
    D->ovl.cqo = (int64_t *)(void *)ptr[4]; D->ovl.cko = (int64_t *)(void *)ptr[5];
    for (int s = 0; s < P; s++)
        for (int c = 0; c < K; c++)
            uly_layout_chunk(&z->L, K, s, c, &D->ovl.cqb[c * P + s], &D->ovl.cqc[c * P + s], &D->ovl.ckb[c * P + s],
                             &D->ovl.ckc[c * P + s]);
    for (int c = 1; c < K; c++) {
        D->ovl.cqo[c] = D->ovl.cqo[c - 1] + D->ovl.cqc[(c - 1) * P + r];
        D->ovl.cko[c] = D->ovl.cko[c - 1] + D->ovl.ckc[(c - 1) * P + r];
    }
    D->ovl.ost_seq = z->ost_seq;
    D->ovl.ost_head = z->ost_head;
    t.n = 0;
    ovl_stage_bufs(&D->a, z, &t);
    if ((rc = uly_bufs_carve(&t, 0, 0, "overlap staging", &D->ovl.owned, ptr)))
        return rc;
    D->ovl.ostage = ptr[0];
    D->ovl.lse_ch = t.b[1].bytes ? ptr[1] : NULL;
    D->ovl.expanded2 = t.b[2].bytes ? ptr[2] : NULL;
    /* per op and tensor: the per-peer tables of ovl_part */
    t.n = 0;
    ovl_peer_bufs(z, &t);
    if ((rc = uly_bufs_carve(&t, 0, 1, "overlap block tables", &D->ovl.tab, ptr)))
        return rc;
    comm_block *blk = (comm_block *)(void *)ptr[0];
    size_t *off = (size_t *)(void *)ptr[1];
    int *idx = (int *)(void *)ptr[2];
    unsigned char *flag = (unsigned char *)ptr[3];
    for (int i = 0; i < 4; i++)
        for (int u = 0; u < 3; u++) {
            const size_t x = (size_t)(i * 3 + u) * 2 * (size_t)P;
            ovl_part *pt = &D->ovl.op[i].part[u];
            pt->send = blk + x; pt->recv = blk + x + P;
            pt->soff = off + x; pt->roff = off + x + P;
            pt->rfirst = idx + x; pt->rn = idx + x + P;
            pt->sent = flag + x; pt->got = flag + x + P;
        }
    for (int i = 0; i < 4 && !rc; i++)
        rc = uly_comm_nb_init(&D->ovl.op[i].q, (int)z->cap);
    /* the tables of the path through the window (used if uly_dist_heads_place makes one) */
    t.n = 0;
    ovs_tab_bufs(z, &t);
    if (!rc && !(rc = uly_bufs_carve(&t, 0, 1, "overlap flag tables", &D->ovs.tab, ptr))) {
        D->ovs.area = (char **)(void *)ptr[0];
        D->ovs.seen = (uint64_t *)(void *)ptr[1];
        D->ovs.got = (unsigned char *)ptr[2];
    }
    return rc;
}

/* Carve the buffers of a context out of its tables. */
static int dist_alloc(uly_dist *D)
{
    const int P = D->P, r = D->rank;
    dist_sizes z;
    int rc = dist_sizes_init(&D->a, &D->o, P, r, &z);
    if (rc)
        return rc;
    uly_bufs t = {0};
    char *ptr[ULY_BUFS_MAX];
    dist_table_bufs(&z, &t);
    if (uly_bufs_carve(&t, 0, 1, "partition tables", &D->part.owned, ptr))
        return uly_set_error(ULY_ENOMEM, "cannot allocate partition tables for %d ranks", P);
    D->part.nb = (int64_t *)(void *)ptr[0];
    D->a2a.sc = (size_t *)(void *)ptr[1];
    D->a2a.sbk = (comm_block *)(void *)ptr[2];
    D->shm.peer = (char **)(void *)ptr[3];
    D->shm.state = (unsigned char *)ptr[4];
    D->shm.rows = (row_copy *)(void *)ptr[5];
    D->a2a.pipe.req = (MPI_Request *)(void *)ptr[6];
    D->a2a.pipe.owner = (int *)(void *)ptr[7];
    D->a2a.pipe.left = (int *)(void *)ptr[8];
    D->a2a.pipe.cap = (size_t)z.pipe_cap;
    D->part.nc = D->part.nb + P; D->part.hb = D->part.nc + P; D->part.hc = D->part.hb + P; D->part.kb = D->part.hc + P; D->part.kc = D->part.kb + P;
    D->a2a.sd = D->a2a.sc + P; D->a2a.rc = D->a2a.sd + P; D->a2a.rd = D->a2a.rc + P;
    D->a2a.rbk = D->a2a.sbk + P;
    D->a2a.mode = D->o.a2a_mode;
    /* every rank's tokens, query heads and KV heads, and rep, from the layout */
    for (int s = 0; s < P; s++) {
        uly_rank_part pt;
        uly_layout_part(&z.L, s, &pt);
        D->part.nb[s] = pt.tok_begin[0];
        D->part.nc[s] = pt.tokens;
        D->part.hb[s] = pt.head_begin;
        D->part.hc[s] = pt.head_count;
        D->part.kb[s] = pt.kv_begin;
        D->part.kc[s] = pt.kv_count;
    }
    D->part.rep = z.rep;
    /* the head-side buffers (qh ... dvh) are sized here (overflow checks)
     * and placed by uly_dist_heads_place() (or alias the caller's with P = 1) */
    t.n = 0;
    const uint64_t hbytes = dist_head_bufs(&D->a, &z, &t, ULY_BUF_HEAP);
    for (int w = 0; w < t.n && P > 1; w++)
        if (t.b[w].bytes == UINT64_MAX || t.b[w].bytes > SIZE_MAX / 2)
            return uly_set_error(ULY_EOVERFLOW, "buffer sizes overflow size_t");
    if (P > 1 && hbytes > SIZE_MAX)
        return uly_set_error(ULY_EOVERFLOW, "buffer sizes overflow size_t");
    t.n = 0;
    int ids[4];
    const int n = dist_main_bufs(&D->a, &z, &t, ids);
    if ((rc = uly_bufs_carve(&t, 0, 0, "head-sharded buffers", &D->owned, ptr)))
        return rc;
    void **slots[4] = {&D->lse, &D->a2a.sstage, &D->a2a.rstage, &D->expanded};
    for (int i = 0; i < n; i++)
        *slots[ids[i]] = ptr[i];
    D->ovl.K = 1;
    D->ovl.mode = D->o.overlap;
    D->a2a.ncand = 3;
    D->a2a.cand[0] = ULY_A2A_PACK; D->a2a.cand[1] = ULY_A2A_DATATYPE; D->a2a.cand[2] = ULY_A2A_PIPELINE;
    D->a2a.cand[3] = ULY_A2A_SHM;
    D->a2a.cand[4] = ULY_A2A_CMA;
    if (P > 1 && !uly_dist_heads_shared(D)) { /* private head-side buffers, allocated now */
        if (!(D->shm.heads_owned = uly_malloc((size_t)hbytes)))
            return uly_set_error(ULY_ENOMEM, "cannot allocate %zu bytes of head-sharded buffers", (size_t)hbytes);
        uly_dist_heads_set(D, D->shm.heads_owned);
    }
    return ovl_alloc(D, &z);
}

/* The configuration every rank must share: one line per field, its value
 * (from a, o and sbits, the scale's bits) and its name in the messages. */
#define CFG_FIELDS(X)                                          \
    ULY_DESC_FIELDS(X)                                         \
    X(o->kernel.block_q, "block_q")                            \
    X(o->kernel.block_k, "block_k")                            \
    X((int64_t)o->max_count, "max_count")                      \
    X(o->attn != NULL, "local attention")                      \
    X(o->a2a_mode, "all-to-all mode")                          \
    X(a->docs, "documents per row")                            \
    X(uly_doc_hash(a), "document offsets (content hash)")      \
    X(o->overlap, "overlap")                                   \
    X(o->overlap_chunks, "overlap chunks")

enum { NCFG = 0 CFG_FIELDS(ULY_FIELD_COUNT) };
static const char *const cfg_names[NCFG] = {CFG_FIELDS(ULY_FIELD_NAME)};

static void cfg_values(const uly_attn_desc *a, const uly_dist_opts *o, int64_t *v)
{
    const int64_t sbits = uly_double_bits(a->scale);
    int i = 0;
    CFG_FIELDS(ULY_FIELD_VALUE)
}

/* The options' own validity (local). */
static int dist_opts_check(const uly_dist_opts *o)
{
    if (o->attn && (!o->attn->fwd || !o->attn->bwd))
        return uly_set_error(ULY_EINVAL, "local attention plug-in lacks fwd or bwd");
    if (o->a2a_mode < ULY_A2A_AUTO || o->a2a_mode >= ULY_A2A_MODES)
        return uly_set_error(ULY_EINVAL, "unknown all-to-all mode %d", o->a2a_mode);
    if (o->overlap < ULY_OVERLAP_OFF || o->overlap >= ULY_OVERLAP_MODES)
        return uly_set_error(ULY_EINVAL, "unknown overlap mode %d", o->overlap);
    if (o->overlap_chunks < 0 || o->overlap_chunks > ULY_OVERLAP_MAX_CHUNKS)
        return uly_set_error(ULY_EINVAL, "overlap chunks must be 0 (automatic) or 1..%d (got %d)",
                             ULY_OVERLAP_MAX_CHUNKS, o->overlap_chunks);
    return ULY_OK;
}

int uly_dist_memory(const uly_attn_desc *a, const uly_dist_opts *opts, int P, int rank, uly_bufs *out)
{
    if (!out)
        return uly_set_error(ULY_EINVAL, "buffer table pointer is NULL");
    if (!a)
        return uly_set_error(ULY_EINVAL, "attention description is NULL");
    uly_dist_opts o;
    memset(&o, 0, sizeof o);
    if (opts)
        o = *opts;
    int rc = uly_attn_desc_check(a);
    if (rc || (rc = dist_opts_check(&o)))
        return rc;
    if (P < 1 || rank < 0 || rank >= P)
        return uly_set_error(ULY_EINVAL, "rank %d of %d is out of range", rank, P);
    dist_sizes z;
    if ((rc = dist_sizes_init(a, &o, P, rank, &z)))
        return rc;
    /* in the order uly_dist_create allocates */
    uly_bufs_add(out, "Ulysses context", sizeof(uly_dist), ULY_BUF_HEAP);
    uly_comm_bufs(P, out);
    dist_table_bufs(&z, out);
    int ids[4];
    dist_main_bufs(a, &z, out, ids);
    if (P > 1 && !z.shared)
        dist_head_bufs(a, &z, out, ULY_BUF_HEAP);
    if (z.K >= 2) {
        ovl_chunk_bufs(&z, out);
        ovl_stage_bufs(a, &z, out);
        ovl_peer_bufs(&z, out);
        uly_bufs_add(out, "overlap request queues", 4 * uly_comm_nb_bytes((int)z.cap), ULY_BUF_HEAP);
        ovs_tab_bufs(&z, out);
    }
    if (a->doc_offsets)
        uly_bufs_add(out, "document offsets", (uint64_t)(a->batch * (a->docs + 1)) * sizeof(int64_t), ULY_BUF_HEAP);
    if (z.shared) { /* every rank on one node: the window */
        dist_head_bufs(a, &z, out, ULY_BUF_WINDOW);
        if (z.K >= 2)
            uly_bufs_add(out, "window overlap flags", ovs_flag_bytes(P, z.K), ULY_BUF_WINDOW);
        uly_bufs_add(out, "window control block", uly_comm_shm_extra(P), ULY_BUF_WINDOW);
        if (o.a2a_mode != ULY_A2A_SHM)
            uly_comm_cma_bufs(P, out);
    }
    return ULY_OK;
}

/* Tests: bytes of this rank's window segment (0: no window).  Exported
 * with the uly_ prefix but not in the public header. */
uint64_t uly_test_dist_window(const uly_dist *D);
uint64_t uly_test_dist_window(const uly_dist *D)
{
    return D && D->shm.on ? uly_comm_shm_segment(D->c) : 0;
}

int uly_dist_create(MPI_Comm comm, const uly_attn_desc *a, const uly_dist_opts *opts,
                    uly_dist **out)
{
    if (!out)
        return uly_set_error(ULY_EINVAL, "output pointer is NULL");
    *out = NULL;
    int rank, size;
    int rc = uly_comm_info(comm, &rank, &size);
    if (rc)
        return rc; /* MPI unusable: nothing collective can follow */
    uly_dist_opts def;
    memset(&def, 0, sizeof def);
    /* everything local first: validation and every allocation */
    int local = ULY_OK;
    uly_dist *D = uly_calloc(1, sizeof *D);
    if (!D)
        local = uly_set_error(ULY_ENOMEM, "cannot allocate the distributed context");
    else {
        D->P = size;
        D->rank = rank;
        D->o = opts ? *opts : def;
        if (a)
            D->a = *a;
        if (!a)
            local = uly_set_error(ULY_EINVAL, "attention description is NULL");
        else if ((local = uly_attn_desc_check(a)) == ULY_OK) {
            D->es = uly_dtype_size(a->dtype);
            if ((local = dist_opts_check(&D->o)) == ULY_OK &&
                (local = uly_comm_alloc(rank, size, D->o.max_count, &D->c)) == ULY_OK &&
                     (local = dist_alloc(D)) == ULY_OK && a->doc_offsets) {
                /* the context keeps its own copy of the document offsets */
                const size_t n = (size_t)(a->batch * (a->docs + 1));
                if (!(D->docs = uly_malloc(n * sizeof *D->docs)))
                    local = uly_set_error(ULY_ENOMEM, "cannot allocate %zu document offsets", n);
                else {
                    memcpy(D->docs, a->doc_offsets, n * sizeof *D->docs);
                    D->a.doc_offsets = D->docs;
                }
            }
        }
    }
    /* then one agreement on the caller's communicator: configuration and success */
    int64_t v[NCFG];
    memset(v, 0, sizeof v);
    if (D && local) { /* never hash offsets that failed validation */
        D->a.doc_offsets = NULL;
        D->a.docs = 0;
    }
    if (D)
        cfg_values(&D->a, &D->o, v);
    rc = uly_comm_agree_on(comm, local, NCFG, v, cfg_names);
    if (!rc)
        rc = uly_comm_attach(D->c, comm); /* collective on every rank, or on none */
    if (!rc)
        rc = uly_dist_heads_place(D);
    if (rc) {
        uly_dist_free(D);
        return rc;
    }
    *out = D;
    return ULY_OK;
}

/* The chunked forward (fwd = 1) or backward as a whole: uly_dist_ovl_run, the
 * agreement on the kernels' status, and the phase times. */
static int ovl_call(uly_dist *D, int fwd, const void *x0, const void *x1, const void *x2, void *y0, void *y1,
                    void *y2)
{
    uly_dist_times *T = &D->times;
    uly_ovl_account *A = D->ovl.acc = fwd ? &T->fwd_acc : &T->bwd_acc;
    memset(A, 0, sizeof *A);
    int lrc = ULY_OK;
    const double t0 = D->ovl.t_call = uly_comm_wtime(), c0 = uly_dist_thread_cpu();
    int rc = (D->ovs.on ? uly_dist_ovs_run : uly_dist_ovl_run)(D, fwd, x0, x1, x2, y0, y1, y2, &lrc,
                                          fwd ? &T->fwd_a2a_in : &T->bwd_a2a_in, fwd ? &T->fwd_attn : &T->bwd_attn,
                                          fwd ? &T->fwd_a2a_out : &T->bwd_a2a_out);
    if (rc)
        return rc;
    const double t1 = uly_comm_wtime(), c1 = uly_dist_thread_cpu();
    rc = uly_dist_call_agree(D, fwd ? 11 : 12, lrc);
    const double t2 = uly_comm_wtime(), c2 = uly_dist_thread_cpu();
    uly_dist_ovl_event(D, ULY_OVL_EV_AGREE, -1, -1, 0, t1, t2 - t1, c2 - c1);
    A->wall = t2 - t0;
    A->wall_cpu = c2 - c0;
    A->end = uly_dist_mono_now();
    *(fwd ? &T->fwd_wall : &T->bwd_wall) = A->wall;
    *(fwd ? &T->fwd_progress : &T->bwd_progress) = D->ovl.t_prog;
    *(fwd ? &T->fwd_chunks : &T->bwd_chunks) = D->ovl.K;
    return rc;
}

int uly_dist_set_overlap(uly_dist *D, int mode)
{
    if (!D)
        return uly_set_error(ULY_EINVAL, "distributed context is NULL");
    if (D->o.overlap == ULY_OVERLAP_OFF)
        return uly_set_error(ULY_EINVAL, "the context was created with overlap off");
    if (mode != ULY_OVERLAP_OFF && mode != D->o.overlap)
        return uly_set_error(ULY_EINVAL, "overlap mode %d: only off (%d) or the mode of creation (%d)", mode,
                             ULY_OVERLAP_OFF, D->o.overlap);
    D->ovl.mode = mode;
    return ULY_OK;
}

int uly_dist_overlap_chunks(const uly_dist *D)
{
    return D && D->P > 1 ? D->ovl.K : 1;
}

/* The account of a plain call: its wall and the kernel's, no hooks. */
static void plain_account(uly_ovl_account *A, double wall, double wall_cpu, double kernel, double kernel_cpu,
                          double kernel_end)
{
    memset(A, 0, sizeof *A);
    A->kernel_end = kernel_end;
    A->end = uly_dist_mono_now();
    A->wall = wall;
    A->wall_cpu = wall_cpu;
    A->kernel = kernel;
    A->kernel_cpu = kernel_cpu;
}

int uly_dist_fwd(uly_dist *D, const void *q, const void *k, const void *v, void *o)
{
    if (!D)
        return uly_set_error(ULY_EINVAL, "distributed context is NULL");
    int local = ULY_OK;
    if ((!q || !k || !v || !o) && D->part.nc[D->rank] > 0)
        local = uly_set_error(ULY_EINVAL, "forward: NULL tensor on rank %d", D->rank);
    D->have_fwd = 0; /* a failed forward leaves none (peers may write the head-side buffers before
                      * the agreement below settles) */
    int rc = uly_dist_call_agree_open(D, 1, local);
    if (rc)
        return rc;
    const int r = D->rank;
    if (uly_dist_ovl_use(D) && (rc = uly_comm_agree_end(D->c)))
        return rc;
    if (D->P == 1) { /* no communication: work on the caller's tensors */
        D->qh = (void *)q; D->kh = (void *)k; D->vh = (void *)v; D->oh = o;
    }
    D->ovl.fwd_chunked = uly_dist_ovl_use(D);
    if (D->ovl.fwd_chunked) {
        rc = ovl_call(D, 1, q, k, v, o, NULL, NULL);
        D->have_fwd = rc == ULY_OK;
        return rc;
    }
    double t0 = uly_comm_wtime(), c0 = uly_dist_thread_cpu();
    rc = uly_dist_a2a_seq_to_heads(D, ULY_A2A_Q, q, D->a.heads, D->part.hb, D->part.hc, D->qh);
    if (!rc)
        rc = uly_dist_a2a_seq_to_heads(D, ULY_A2A_K, k, D->a.kv_heads, D->part.kb, D->part.kc, D->kh);
    if (!rc)
        rc = uly_dist_a2a_seq_to_heads(D, ULY_A2A_V, v, D->a.kv_heads, D->part.kb, D->part.kc, D->vh);
    double t1 = uly_comm_wtime(), c1 = uly_dist_thread_cpu();
    int lrc = ULY_OK;
    if (!rc && D->part.hc[r] > 0) {
        uly_kernel_opts ko = local_opts(D);
        lrc = D->o.attn ? D->o.attn->fwd(D->o.attn->user, &D->a, &ko, D->qh, D->kh, D->vh, D->oh, D->lse)
                        : uly_attn_fwd(&D->a, &ko, D->qh, D->kh, D->vh, D->oh, D->lse);
    }
    if (rc)
        return rc;
    double t2 = uly_comm_wtime(), c2 = uly_dist_thread_cpu(), k2 = uly_dist_mono_now();
    rc = uly_dist_call_agree_open(D, 11, lrc); /* a failed local kernel stops every rank here */
    if (!rc)
        rc = uly_dist_a2a_heads_to_seq(D, ULY_A2A_O, D->oh, D->a.heads, D->part.hb, D->part.hc, o);
    double t3 = uly_comm_wtime();
    plain_account(&D->times.fwd_acc, t3 - t0, uly_dist_thread_cpu() - c0, t2 - t1, c2 - c1, k2);
    D->times.fwd_a2a_in = t1 - t0;
    D->times.fwd_attn = t2 - t1;
    D->times.fwd_a2a_out = t3 - t2;
    D->times.fwd_wall = t3 - t0;
    D->times.fwd_progress = 0;
    D->times.fwd_chunks = 1;
    D->have_fwd = rc == ULY_OK;
    return rc;
}

int uly_dist_bwd(uly_dist *D, const void *dout, void *dq, void *dk, void *dv)
{
    if (!D)
        return uly_set_error(ULY_EINVAL, "distributed context is NULL");
    int local = ULY_OK;
    if (!D->have_fwd)
        local = uly_set_error(ULY_EINVAL, "backward called without a successful forward");
    else if ((!dout || !dq || !dk || !dv) && D->part.nc[D->rank] > 0)
        local = uly_set_error(ULY_EINVAL, "backward: NULL tensor on rank %d", D->rank);
    int rc = uly_dist_call_agree_open(D, 2, local);
    if (rc)
        return rc;
    const int r = D->rank;
    if (D->P == 1) {
        D->doh = (void *)dout; D->dqh = dq; D->dkh = dk; D->dvh = dv;
    }
    if (D->ovl.fwd_chunked) /* the head-side buffers are chunk by chunk */
        return (rc = uly_comm_agree_end(D->c)) ? rc : ovl_call(D, 0, dout, NULL, NULL, dq, dk, dv);
    double t0 = uly_comm_wtime(), c0 = uly_dist_thread_cpu();
    rc = uly_dist_a2a_seq_to_heads(D, ULY_A2A_DO, dout, D->a.heads, D->part.hb, D->part.hc, D->doh);
    double t1 = uly_comm_wtime(), c1 = uly_dist_thread_cpu();
    int lrc = ULY_OK;
    if (!rc && D->part.hc[r] > 0) {
        uly_kernel_opts ko = local_opts(D);
        lrc = D->o.attn ? D->o.attn->bwd(D->o.attn->user, &D->a, &ko, D->qh, D->kh, D->vh, D->oh,
                                         D->lse, D->doh, D->dqh, D->dkh, D->dvh)
                        : uly_attn_bwd(&D->a, &ko, D->qh, D->kh, D->vh, D->oh, D->lse, D->doh,
                                       D->dqh, D->dkh, D->dvh);
    }
    if (rc)
        return rc;
    double t2 = uly_comm_wtime(), c2 = uly_dist_thread_cpu(), k2 = uly_dist_mono_now();
    rc = uly_dist_call_agree_open(D, 12, lrc);
    if (!rc)
        rc = uly_dist_a2a_heads_to_seq(D, ULY_A2A_DQ, D->dqh, D->a.heads, D->part.hb, D->part.hc, dq);
    if (!rc)
        rc = uly_dist_a2a_kv_grad(D, ULY_A2A_DK, D->dkh, dk);
    if (!rc)
        rc = uly_dist_a2a_kv_grad(D, ULY_A2A_DV, D->dvh, dv);
    double t3 = uly_comm_wtime();
    plain_account(&D->times.bwd_acc, t3 - t0, uly_dist_thread_cpu() - c0, t2 - t1, c2 - c1, k2);
    D->times.bwd_a2a_in = t1 - t0;
    D->times.bwd_attn = t2 - t1;
    D->times.bwd_a2a_out = t3 - t2;
    D->times.bwd_wall = t3 - t0;
    D->times.bwd_progress = 0;
    D->times.bwd_chunks = 1;
    return rc;
}

const void *uly_dist_lse(const uly_dist *D)
{
    return D && D->have_fwd ? D->lse : NULL;
}

void uly_dist_shard(const uly_dist *D, int64_t *token_begin, int64_t *token_count)
{
    *token_begin = D->part.nb[D->rank];
    *token_count = D->part.nc[D->rank];
}

void uly_dist_heads(const uly_dist *D, int64_t *head_begin, int64_t *head_count)
{
    *head_begin = D->part.hb[D->rank];
    *head_count = D->part.hc[D->rank];
}

void uly_dist_volume(const uly_dist *D, uly_volume *measured)
{
    *measured = D->vol;
}

void uly_dist_reset_volume(uly_dist *D)
{
    memset(&D->vol, 0, sizeof D->vol);
}

void uly_dist_times_get(const uly_dist *D, uly_dist_times *t)
{
    *t = D->times;
}
