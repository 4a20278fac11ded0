/*
 * dist.c -- DeepSpeed-Ulysses attention: sequence-sharded Q, K, V are
 * re-sharded by heads with one all-to-all each, every rank runs attention
 * over the full sequence for its heads, and one all-to-all brings the output
 * back to sequence shards.  Backward mirrors it.  All MPI calls go through
 * comm.c; this file does the partition bookkeeping and the block copies.
 *
 * Block copies: every all-to-all is described, per peer, by two strided
 * blocks (comm_block): one on the sequence side, one on the head side.  Every
 * pack, unpack and self copy is one copy_block() between two such blocks.
 * With B = 1 the head side is contiguous and is handed to MPI directly (no
 * copy): the receive of sequence -> heads and the send of heads -> sequence.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "comm.h"
#include "internal.h"
#include "methods.h"
#include "ulysses_dist.h"

/* The least time (s) between two MPI tests of the kernel's progress hook
 * (none within a node with cross-memory attach; see ovl_progress). */
#define OVL_TEST_EVERY 0.02

/* One tensor of a chunk's non-blocking all-to-all, source by source: the
 * receives are posted at its start, each peer's block is sent (and the own
 * one copied) when its rows are ready, and each source's block is waited for
 * (and unpacked) when its rows are needed. */
typedef struct ovl_part {
    int tag, which;
    const char *in;           /* source tensor */
    char *out;                /* destination tensor */
    comm_block *send, *recv;  /* (P) blocks of in / out, by peer */
    size_t *soff, *roff;      /* (P) offset of each peer's block in sstage / rstage */
    int *rfirst, *rn;         /* (P) each source's receive requests in the op's queue */
    unsigned char *got;       /* (P) the source's block is in out */
    unsigned char *sent;      /* (P) the block for that peer is sent (own: copied) */
    char *sstage;             /* NULL: sent in place */
    char *rstage;             /* NULL: received in place */
} ovl_part;

/* A chunk's all-to-all in flight: up to three tensors (Q, K, V or dQ, dK, dV). */
typedef struct ovl_op {
    int n;
    ovl_part part[3];
    uly_comm_nb q;
} ovl_op;

/* Every rank's share of the problem (from the layout, uly_layout_part). */
typedef struct dist_part {
    int rep;                   /* KV groups cut between ranks: replicated KV */
    int64_t *nb, *nc;          /* (P) token begin / count per rank */
    int64_t *hb, *hc;          /* (P) query head begin / count per rank */
    int64_t *kb, *kc;          /* (P) KV head begin / count per rank */
    void *owned;               /* the allocation behind these tables and the scratch of a2a and shm */
} dist_part;

/* The all-to-alls: the mode, the scratch, auto's measurements (dist_a2a.c). */
typedef struct dist_a2a {
    int mode;                  /* ULY_A2A_* as asked for */
    char note[768];            /* why the mode asked for is not used (empty: it is) */
    size_t *sc, *sd, *rc, *rd; /* (P) element counts / displacements scratch */
    comm_block *sbk, *rbk;     /* (P) strided blocks scratch (datatype mode) */
    void *sstage, *rstage;     /* pack / unpack staging */
    int ncand, cand[ULY_A2A_MODES - 1]; /* the modes ULY_A2A_AUTO measures */
    /* ULY_A2A_AUTO: per all-to-all kind, the calls measured so far, their
     * times (slowest rank after the decision) and the mode chosen (0: none yet) */
    int auto_calls[ULY_A2A_COUNT];
    double auto_t[ULY_A2A_COUNT][ULY_A2A_MODES - 1][ULY_A2A_AUTO_SAMPLES];
    int auto_mode[ULY_A2A_COUNT];
} dist_a2a;

/* The shared-memory window and cross-memory attach (dist_shm.c). */
typedef struct dist_shm {
    int on;                    /* the head-side buffers are in a shared-memory window */
    int cma;                   /* cross-memory attach works between every pair of ranks */
    char **peer;               /* (P) every rank's head-side region (this process's mapping) */
    unsigned char *state;      /* (P) a2a_shm's per-peer progress */
    struct row_copy *rows;     /* (P) a2a_shm's copies of one pass */
    void *heads_owned;         /* the head-side region when it is not in a window */
} dist_shm;

/* Overlap of communication with computation (see ulysses_dist.h), over
 * messages (dist_ovl.c) or through the window (dist_ovs.c). */
typedef struct dist_ovl {
    int mode;                  /* ULY_OVERLAP_* for the next forward */
    int K;                     /* head chunks per rank (1: the chunked path cannot run) */
    int64_t *cqb, *cqc;        /* (K*P) chunk c of rank s: query heads [cqb, +cqc), at c*P + s */
    int64_t *ckb, *ckc;        /* (K*P) the KV heads of that chunk */
    int64_t *cqo, *cko;        /* (K) this rank's chunk c: head offset in its head-side buffers */
    void *chunk_owned;         /* the allocation behind the chunk tables */
    size_t ost_seq, ost_head;  /* staging elements per tensor: sequence side, head side */
    char *ostage;              /* (2 ops x 3 tensors x (ost_seq + ost_head)) */
    void *lse_ch;              /* B > 1: the LSE chunk by chunk, (B, cqc, N) each */
    void *expanded2;           /* replicated KV: dV's per-query-head gradients */
    void *owned;               /* the allocation behind the overlap buffers */
    void *tab;                 /* the allocation behind the ops' per-peer tables */
    ovl_op op[4];              /* input all-to-alls of even / odd chunks, then output ones */
    int c, fwd;                /* the chunk the kernel runs, and in which direction */
    int err;                   /* first error of the kernel's hooks */
    void (*hook_progress)(void *user);                 /* the kernel's hooks of the running path: */
    void (*hook_rows)(void *user, int ev, int64_t end); /* ovl_run's (messages) or ovs_run's (window) */
    double t_prog;             /* time inside the kernel's hooks */
    uly_ovl_account *acc;      /* the running call's account */
    double t_call;             /* the running call's start (uly_comm_wtime) */
    double t_test;             /* the progress hook's last MPI test */
    uly_ovl_event *tr;         /* event trace (uly_dist_trace), or NULL */
    size_t tr_cap, tr_n;
    int fwd_chunked;           /* the last forward ran chunked: its backward does too */
} dist_ovl;

/* The overlapped path through the window (every rank on one node, K >= 2):
 * senders copy straight into the peers' chunk buffers, receivers copy
 * straight out of them; per-chunk flags in each rank's flag area. */
typedef struct dist_ovs {
    int on;                    /* this path runs (else per-peer MPI messages) */
    uint64_t seq;              /* overlapped calls so far (the same on every rank) */
    char **area;               /* (P) every rank's flag area (this process's mapping) */
    uint64_t *seen;            /* (P x 4) the last input flag value waited for, by source and step */
    unsigned char *got;        /* (K x 2 x P) output block of (chunk, kind, source) copied out */
    uint64_t pub[2];           /* the done flags of the running chunk last published */
    char *y[3];                /* the running call's sequence-side outputs */
    void *tab;                 /* the allocation behind the tables above */
} dist_ovs;

struct uly_dist {
    uly_comm *c;
    int P, rank;
    uly_attn_desc a;
    uly_dist_opts o;
    size_t es;                 /* bytes per element */
    int64_t *docs;             /* own copy of the document offsets, or NULL */
    dist_part part;
    dist_a2a a2a;
    dist_shm shm;
    /* head-sharded tensors of this rank (aliases of the caller's for P = 1) */
    void *qh, *kh, *vh, *oh;   /* (B,N,H_r,d) (B,N,Hkv_r,d) x2 (B,N,H_r,d) */
    void *lse;                 /* (B,H_r,N) */
    void *doh, *dqh, *dkh, *dvh; /* (B,N,H_r,d) x2, (B,N,Hkv_r|H_r,d) x2 */
    void *expanded;            /* (B,n_r,H,d): per-query-head KV grads before the fold */
    void *owned;               /* the allocation behind lse, the staging and expanded */
    dist_ovl ovl;
    dist_ovs ovs;
    int have_fwd;
    uint64_t calls;
    uly_volume vol;
    uly_dist_times times;
};

static size_t usz(int64_t x) { return (size_t)x; }

/* The shm heads -> sequence all-to-all streams its copies (non-temporal
 * stores) from this many bytes copied by a rank in one call. */
#define ULY_SHM_STREAM_BYTES ((size_t)8 << 20)
/* Sequence -> heads streams its stores into the peers' buffers from this
 * many bytes written by a rank in one call (doc/performance.md, all-to-all
 * "Round five": measured faster streamed from 1 MiB per rank, 768 KiB
 * written, up to 64 MiB; below this, blocks small enough to stay in the
 * cache for their reader are left to plain stores). */
#define ULY_SHM_STREAM_TO_HEADS_BYTES ((size_t)256 << 10)

/* Elements of a block. */
static size_t block_elems(const comm_block *b)
{
    return b->batches * b->rows * b->len;
}

/* Whether a block is one contiguous run of memory. */
static int block_contiguous(const comm_block *b)
{
    return (b->rows <= 1 || b->stride == b->len) && (b->batches <= 1 || b->bstride == b->rows * b->len);
}

/* Copy block sb of src into block db of dst (same batches x rows x len),
 * each contiguous run with one memcpy. */
static void copy_block(char *dst, const comm_block *db, const char *src, const comm_block *sb, size_t es)
{
    if (block_elems(sb) == 0 || (dst == src && db->off == sb->off && db->stride == sb->stride &&
                                 db->bstride == sb->bstride))
        return; /* nothing to move (P = 1 works in place) */
    for (size_t b = 0; b < sb->batches; b++) {
        char *d0 = dst + (db->off + b * db->bstride) * es;
        const char *s0 = src + (sb->off + b * sb->bstride) * es;
        if (db->stride == sb->len && sb->stride == sb->len) {
            memcpy(d0, s0, sb->rows * sb->len * es);
            continue;
        }
        for (size_t t = 0; t < sb->rows; t++)
            memcpy(d0 + t * db->stride * es, s0 + t * sb->stride * es, sb->len * es);
    }
}

/*
 * Copy n bytes with non-temporal stores where the CPU has them (SSE2, every
 * x86-64): the destination lines are written whole without being read into
 * the cache first (no read-for-ownership) and without evicting the cache.
 * For the shm all-to-all's large copies, whose destination is not read
 * again soon: one 1 KiB row at a time, a copy of 64 MiB by rows took 27 ms
 * against 72 ms with memcpy (which streams only single copies above its
 * own threshold) on the Xeon of doc/performance.md, one process alone.
 * Same bytes as memcpy.
 */
static void *copy_stream(void *dst_, const void *src_, size_t n)
{
    char *dst = dst_;
    const char *src = src_;
#if defined(__SSE2__)
    size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
    if (head > n)
        head = n;
    memcpy(dst, src, head);
    dst += head; src += head; n -= head;
    for (; n >= 64; n -= 64, dst += 64, src += 64) {
        const __m128i a = _mm_loadu_si128((const __m128i *)(const void *)src);
        const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(src + 16));
        const __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(src + 32));
        const __m128i d = _mm_loadu_si128((const __m128i *)(const void *)(src + 48));
        _mm_stream_si128((__m128i *)(void *)dst, a);
        _mm_stream_si128((__m128i *)(void *)(dst + 16), b);
        _mm_stream_si128((__m128i *)(void *)(dst + 32), c);
        _mm_stream_si128((__m128i *)(void *)(dst + 48), d);
    }
#endif
    memcpy(dst, src, n);
    return dst_;
}

/* Order the non-temporal stores before what follows (the flag that
 * publishes them). */
static void stream_fence(void)
{
#if defined(__SSE2__)
    _mm_sfence();
#endif
}

/* One block of a row-interleaved copy (copy_rows). */
typedef struct row_copy {
    char *dst;
    const char *src;
    comm_block db, sb;
} row_copy;

/*
 * Copy n blocks that share their batches and rows (every peer's block of
 * one all-to-all: the rank's tokens), row by row across the blocks: row t
 * of block 0, of block 1, ..., then row t + 1.  With the blocks in the
 * order of their heads, the sequence side is walked once in address order
 * (a whole row of H d elements, instead of one peer's H_s d elements of
 * every row per pass, each in a different page when a row is a page), and
 * each block's other side is filled front to back.  Streamed (copy_stream,
 * fenced) or not; same bytes as copy_block of each block.
 */
static void copy_rows(const row_copy *x, int n, size_t es, int stream)
{
    if (n <= 0)
        return;
    void *(*cp)(void *, const void *, size_t) = stream ? copy_stream : memcpy;
    const size_t batches = x[0].sb.batches, rows = x[0].sb.rows;
    for (size_t b = 0; b < batches; b++)
        for (size_t t = 0; t < rows; t++)
            for (int k = 0; k < n; k++) {
                const comm_block *db = &x[k].db, *sb = &x[k].sb;
                if (sb->len)
                    cp(x[k].dst + (db->off + b * db->bstride + t * db->stride) * es,
                       x[k].src + (sb->off + b * sb->bstride + t * sb->stride) * es, sb->len * es);
            }
    if (stream)
        stream_fence();
}

/*
 * The two sides of every all-to-all, for peer s.  The sequence side is
 * (B, n_r, Hx, d) and its block for s holds my tokens of s's heads
 * [hbeg[s], +hcnt[s]); the head side is (B, N, c_r, d) and its block for s
 * holds s's tokens of my heads.  Sequence -> heads sends sequence-side blocks
 * and receives head-side ones; heads -> sequence the other way round.
 */
static comm_block seq_block(const uly_dist *D, int s, int64_t Hx, const int64_t *hbeg, const int64_t *hcnt)
{
    const int64_t B = D->a.batch, d = D->a.head_dim, n_r = D->part.nc[D->rank];
    return (comm_block){usz(hbeg[s] * d), usz(B), usz(n_r * Hx * d), usz(n_r), usz(hcnt[s] * d), usz(Hx * d)};
}

static comm_block head_block(const uly_dist *D, int s, int64_t c_r)
{
    const int64_t B = D->a.batch, N = D->a.seq, d = D->a.head_dim;
    return (comm_block){usz(D->part.nb[s] * c_r * d), usz(B), usz(N * c_r * d), usz(D->part.nc[s]), usz(c_r * d),
                        usz(c_r * d)};
}

/*
 * One all-to-all.  to_heads: in is the sequence side (B, n_r, Hx, d), out the
 * head side (B, N, hcnt[r], d); otherwise the reverse.  The own block is
 * copied directly.  Datatype mode hands the strided blocks to MPI; pack mode
 * passes a side in place when all its blocks are contiguous (B = 1: the
 * head side), and otherwise goes through the staging buffers.
 */
/* Pack / unpack of one peer's block for the pipelined mode. */
typedef struct pipe_ctx {
    const uly_dist *D;
    const char *in;
    char *out;
    const comm_block *send, *recv;
    int send_inplace, recv_inplace;
} pipe_ctx;

static void pipe_pack(void *user, int s)
{
    const pipe_ctx *x = user;
    const uly_dist *D = x->D;
    comm_block packed = {D->a2a.sd[s], x->send[s].batches, x->send[s].rows * x->send[s].len, x->send[s].rows,
                         x->send[s].len, x->send[s].len};
    copy_block(D->a2a.sstage, &packed, x->in, &x->send[s], D->es);
}

static void pipe_unpack(void *user, int s)
{
    const pipe_ctx *x = user;
    const uly_dist *D = x->D;
    comm_block packed = {D->a2a.rd[s], x->recv[s].batches, x->recv[s].rows * x->recv[s].len, x->recv[s].rows,
                         x->recv[s].len, x->recv[s].len};
    copy_block(x->out, &x->recv[s], D->a2a.rstage, &packed, D->es);
}

/* The mode of this call of kind `which`: the fixed one, or under
 * ULY_A2A_AUTO the next mode to measure or the measured choice. */
static int call_mode(const uly_dist *D, int which)
{
    if (D->a2a.mode != ULY_A2A_AUTO)
        return D->a2a.mode;
    if (D->a2a.auto_mode[which])
        return D->a2a.auto_mode[which];
    return D->a2a.cand[D->a2a.auto_calls[which] % D->a2a.ncand];
}

/* Median of n values (n <= ULY_A2A_AUTO_SAMPLES; the upper one for even n). */
static double median_of(const double *x, int n)
{
    double v[ULY_A2A_AUTO_SAMPLES];
    for (int i = 0; i < n; i++) { /* insertion sort */
        int j = i;
        for (; j > 0 && v[j - 1] > x[i]; j--)
            v[j] = v[j - 1];
        v[j] = x[i];
    }
    return v[n / 2];
}

/* The mode auto keeps, from the slowest rank's time of every measured call
 * (t[m][k]: call k of candidate cand[m]): the smallest median; but a mode
 * that copies each byte twice (pack, datatype, pipeline) replaces the best
 * single-copy mode (shm, cma) only when its median is below that mode's by
 * more than ULY_A2A_AUTO_MARGIN: one lucky sample of a two-copy mode (or an
 * unlucky one of shm) must not decide (doc/performance.md, all-to-all
 * "Round five").  Every rank computes the same from the same times. */
static int auto_pick(const int *cand, int ncand, const double t[][ULY_A2A_AUTO_SAMPLES])
{
    int best = 0, single = 0;
    double tbest = 0, tsingle = 0;
    for (int m = 0; m < ncand; m++) {
        const double t_m = median_of(t[m], ULY_A2A_AUTO_SAMPLES);
        if (!best || t_m < tbest)
            best = cand[m], tbest = t_m;
        if ((cand[m] == ULY_A2A_SHM || cand[m] == ULY_A2A_CMA) && (!single || t_m < tsingle))
            single = cand[m], tsingle = t_m;
    }
    if (single && best != single && tbest >= tsingle * (1 - ULY_A2A_AUTO_MARGIN))
        best = single;
    return best;
}

/* Test hook (tests/test_dist.c): auto_pick. */
int uly_test_auto_pick(const int *cand, int ncand, const double t[][ULY_A2A_AUTO_SAMPLES]);
int uly_test_auto_pick(const int *cand, int ncand, const double t[][ULY_A2A_AUTO_SAMPLES])
{
    return auto_pick(cand, ncand, t);
}

/* After a measured call: record its time; once every mode has its samples,
 * take the slowest rank's times (one allreduce, at the same call on every
 * rank since all ranks make the same calls) and keep auto_pick's
 * mode. */
static int auto_record(uly_dist *D, int which, int mode, double secs)
{
    const int n = D->a2a.auto_calls[which]++;
    (void)mode; /* = D->a2a.cand[n % D->a2a.ncand] */
    D->a2a.auto_t[which][n % D->a2a.ncand][n / D->a2a.ncand] = secs;
    if (D->a2a.auto_calls[which] < D->a2a.ncand * ULY_A2A_AUTO_SAMPLES)
        return ULY_OK;
    int rc = uly_comm_max_over_ranks(D->c, &D->a2a.auto_t[which][0][0], (ULY_A2A_MODES - 1) * ULY_A2A_AUTO_SAMPLES);
    if (rc)
        return rc;
    D->a2a.auto_mode[which] = auto_pick(D->a2a.cand, D->a2a.ncand, (const double(*)[ULY_A2A_AUTO_SAMPLES])D->a2a.auto_t[which]);
    return ULY_OK;
}

/* Both sides' blocks of one all-to-all for every peer (see a2a_move), the
 * byte counters, and the copy of the own block; *send_inplace and
 * *recv_inplace say whether every peer's block of that side is contiguous. */
static void a2a_tables(uly_dist *D, int which, int to_heads, int64_t Hx, const int64_t *hbeg, const int64_t *hcnt,
                       comm_block *send, comm_block *recv, int *send_inplace, int *recv_inplace)
{
    const int P = D->P, r = D->rank;
    const size_t es = D->es;
    *send_inplace = *recv_inplace = 1;
    for (int s = 0; s < P; s++) {
        comm_block sq = seq_block(D, s, Hx, hbeg, hcnt), hd = head_block(D, s, hcnt[r]);
        send[s] = to_heads ? sq : hd;
        recv[s] = to_heads ? hd : sq;
        if (s == r)
            continue;
        *send_inplace &= block_contiguous(&send[s]);
        *recv_inplace &= block_contiguous(&recv[s]);
        D->vol.sent[which] += block_elems(&send[s]) * es;
        D->vol.recv[which] += block_elems(&recv[s]) * es;
    }
}

static void a2a_blocks(uly_dist *D, int which, int to_heads, const char *in, int64_t Hx, const int64_t *hbeg,
                       const int64_t *hcnt, char *out, comm_block *send, comm_block *recv, int *send_inplace,
                       int *recv_inplace)
{
    const int r = D->rank;
    a2a_tables(D, which, to_heads, Hx, hbeg, hcnt, send, recv, send_inplace, recv_inplace);
    if (D->part.nc[r] > 0)
        copy_block(out, &recv[r], in, &send[r], D->es);
}

/* The head-side tensors of a rank with h query heads, kv KV heads and kvg
 * heads of KV gradients, in the order of the all-to-all kinds (Q, K, V, O,
 * dO, dQ, dK, dV): byte offsets in its head-side region (off, may be NULL)
 * and entries of t (may be NULL) at `where`; returns the region's size. */
static uint64_t head_region(const uly_attn_desc *a, size_t es, int64_t h, int64_t kv, int64_t kvg,
                            size_t off[ULY_A2A_COUNT], uly_bufs *t, int where)
{
    static const char *const names[ULY_A2A_COUNT] = {"Q (head side)", "K (head side)", "V (head side)",
                                                     "O (head side)", "dO (head side)", "dQ (head side)",
                                                     "dK (head side)", "dV (head side)"};
    const int64_t heads[ULY_A2A_COUNT] = {h, kv, kv, h, h, h, kvg, kvg};
    uint64_t total = 0;
    for (int w = 0; w < ULY_A2A_COUNT; w++) {
        const int64_t dims[4] = {a->batch, a->seq, heads[w], a->head_dim};
        const uint64_t b = uly_buf_bytes(es, 4, dims);
        if (off)
            off[w] = (size_t)total;
        if (t)
            uly_bufs_add(t, names[w], b, where);
        total = b > UINT64_MAX - total ? UINT64_MAX : total + b;
    }
    return total;
}

/* The head-side buffers of rank s: byte offsets in its head-side region;
 * returns the region's size.  Every rank computes every rank's layout alike. */
static size_t head_layout(const uly_dist *D, int s, size_t off[ULY_A2A_COUNT])
{
    const int64_t h = D->part.hc[s], kv = D->part.kc[s];
    return (size_t)head_region(&D->a, D->es, h, kv, D->part.rep ? h : kv, off, NULL, 0);
}

/*
 * The shared-memory all-to-all (ULY_A2A_SHM).  Every rank's head-side
 * buffer of kind `which` is in the window, at head_layout's offset in that
 * rank's segment.  Sequence -> heads: each rank copies its rows for peer s
 * (strided, its sequence side) straight into s's buffer (contiguous rows of
 * its tokens); heads -> sequence: each rank copies its tokens of s's heads
 * out of s's buffer into its own sequence side.  One copy per byte, by the
 * rank that owns the sequence side.
 *
 * Synchronisation: per peer, through the flags of the window's control
 * blocks (comm.h), never a barrier.  Each call is one operation v:
 *   1. this rank says its buffer is ready for v (after copying a head-side
 *      tensor of the caller's into it, for heads -> sequence);
 *   2. it looks at its peers again and again; the ones ready for v (and
 *      agreed: uly_comm_agree_peer, for the first exchange after an
 *      agreement) are copied together, row by row (copy_rows: the sequence
 *      side is read once in address order), with the own block if not yet
 *      copied, and it says it is done with each of their buffers; while
 *      nobody new is there it copies its own block or yields the core;
 *   3. it waits until every peer is done with its own buffer.
 * Sequence -> heads: after 3, every peer's rows are in this rank's buffer
 * (its kernel or its copy out may read them).  Heads -> sequence: after 3,
 * no peer reads this rank's buffer any more, so the next write into it (the
 * kernel of the next forward, a copy in) cannot race with a late reader.
 * A peer is ready for v only once it has finished everything it did with
 * its buffers before (including waiting, in its step 3, for this rank's
 * earlier copies), so a write never lands in a buffer its owner still reads
 * and a read never sees a buffer its owner still writes.  Flags hold
 * increasing values and are never reset; a flag of a later operation also
 * says "ready" for an earlier one, which is only possible when the earlier
 * exchange with that peer is already done.
 * The call's agreement (call_agree_open) is published before step 1 and
 * settled after step 3: a rank that failed locally returns before touching
 * any buffer, its peers leave it out of the exchange (uly_comm_agree_peer)
 * and every rank returns the agreement's error.
 */
static int a2a_shm(uly_dist *D, int which, int to_heads, const char *in, int64_t Hx, const int64_t *hbeg,
                   const int64_t *hcnt, char *out, int cma)
{
    const int P = D->P, r = D->rank;
    const size_t es = D->es;
    uly_comm *c = D->c;
    size_t off[ULY_A2A_COUNT];
    head_layout(D, r, off);
    char *win = D->shm.peer[r] + off[which];
    const size_t head_bytes = usz(D->a.batch * D->a.seq * hcnt[r] * D->a.head_dim) * es;
    const uint64_t v = uly_comm_shm_op(c);
    /* what this rank's peers access: its window buffer (shm), or the
     * tensor they read with cross-memory attach (cma: the sequence shard,
     * or the head-side tensor, wherever it is) */
    const char *src = in;
    char *dst = out;
    if (!cma && !to_heads && in && in != win && head_bytes)
        memcpy(win, in, head_bytes); /* no peer reads it: they were done with it (step 3 of the last call) */
    if (!cma || !in)
        src = to_heads ? in : win;
    if (!cma || !out)
        dst = to_heads ? win : out;
    comm_block *send = D->a2a.sbk, *recv = D->a2a.rbk;
    int send_inplace, recv_inplace;
    a2a_tables(D, which, to_heads, Hx, hbeg, hcnt, send, recv, &send_inplace, &recv_inplace);
    uly_comm_shm_ready_at(c, v, src);
    /* the own block is copied while no peer is ready (below), never before
     * saying ready: the peers need not wait for it (it touches other rows
     * of this rank's buffers than theirs, and only reads the shared one) */
    int own = D->part.nc[r] > 0;
    /* Stores streamed past the cache (copy_stream): sequence -> heads from
     * ULY_SHM_STREAM_TO_HEADS_BYTES written per call (into the peers'
     * buffers, whose lines their owners read last: a plain store first
     * fetches each line from the owner's cache, a streamed one writes it
     * whole), heads -> sequence from ULY_SHM_STREAM_BYTES (into this rank's
     * shard, not read again before the cache has turned over); measured in
     * doc/performance.md, all-to-all "Round three" and "Round five". */
    size_t mine_bytes = 0; /* what this rank copies to or from its peers */
    for (int s = 0; s < P && !cma; s++)
        mine_bytes += s == r ? 0 : block_elems(to_heads ? &send[s] : &recv[s]) * es;
    const int stream = mine_bytes >= (to_heads ? ULY_SHM_STREAM_TO_HEADS_BYTES : ULY_SHM_STREAM_BYTES);
    unsigned char *st = D->shm.state; /* per peer: 0 to visit, 1 copied, 2 left out, 3 in this pass */
    memset(st, 0, usz(P));
    int failed = ULY_OK; /* cma: this rank's first failed read */
    char why[512] = "";
    for (int left = P - 1; left > 0;) {
        int moved = 0;
        if (!cma) {
            /* shm: every peer ready now (and the own block, if not yet
             * copied), copied together row by row in the order of their
             * heads (copy_rows) */
            row_copy *x = D->shm.rows;
            int n = 0, peers = 0;
            for (int s = 0; s < P; s++) {
                if (s == r) {
                    if (own)
                        x[n++] = (row_copy){dst, src, recv[r], send[r]};
                    continue;
                }
                if (st[s])
                    continue;
                const int ok = uly_comm_agree_peer(c, s);
                if (ok < 0 || (ok && !uly_comm_shm_is_ready(c, s, v)))
                    continue;
                if (!ok) { /* left out: it failed or disagreed */
                    st[s] = 2;
                    left--;
                    moved = 1;
                    continue;
                }
                head_layout(D, s, off);
                char *theirs = D->shm.peer[s] + off[which];
                const comm_block mine = head_block(D, r, hcnt[s]); /* my tokens of s's heads, in s's buffer */
                x[n++] = to_heads ? (row_copy){theirs, in, mine, send[s]} : (row_copy){out, theirs, recv[s], mine};
                st[s] = 3; /* copied in this pass */
                peers++;
            }
            if (peers) {
                copy_rows(x, n, es, stream);
                own = 0;
                for (int s = 0; s < P; s++) /* after copy_rows' fence: the flag publishes the copies */
                    if (st[s] == 3) {
                        uly_comm_shm_done(c, s, v);
                        st[s] = 1;
                    }
                left -= peers;
                moved = 1;
            }
        }
        for (int i = 1; i < P && cma; i++) {
            const int s = (r + i) % P;
            if (st[s])
                continue;
            const int ok = uly_comm_agree_peer(c, s);
            if (ok < 0 || (ok && !uly_comm_shm_is_ready(c, s, v)))
                continue;
            if (ok && !failed) {
                /* cma, pull: s's block for this rank, from s's memory into this rank's own */
                const comm_block theirs =
                    to_heads ? (comm_block){usz(hbeg[r] * D->a.head_dim), usz(D->a.batch),
                                            usz(D->part.nc[s] * Hx * D->a.head_dim), usz(D->part.nc[s]),
                                            usz(hcnt[r] * D->a.head_dim), usz(Hx * D->a.head_dim)}
                             : head_block(D, r, hcnt[s]);
                if ((failed = uly_comm_cma_read(c, s, dst, &recv[s], uly_comm_shm_peer_addr(c, s), &theirs, es)))
                    snprintf(why, sizeof why, "%s", uly_last_error());
            }
            st[s] = ok ? 1 : 2;
            left--;
            moved = 1;
        }
        if (!moved && own) {
            copy_block(dst, &recv[r], src, &send[r], es);
            own = 0;
        } else if (!moved) {
            uly_comm_shm_pause();
        }
    }
    if (own)
        copy_block(dst, &recv[r], src, &send[r], es);
    /* cma: done with every peer only now, with this rank's status, so that
     * every rank learns from its readers whether any of them failed */
    for (int i = 1; i < P && cma; i++)
        if (st[(r + i) % P] == 1)
            uly_comm_shm_done_failed(c, (r + i) % P, v, failed ? why : NULL);
    for (int i = 1; i < P; i++) {
        const int s = (r + i) % P;
        while (st[s] == 1 && !uly_comm_shm_is_done(c, s, v))
            uly_comm_shm_pause();
    }
    int rc = uly_comm_agree_end(c);
    if (!rc)
        rc = uly_comm_shm_error(c);
    if (!rc && failed)
        rc = uly_set_error(failed, "%s", why);
    for (int i = 1; i < P && !rc && cma; i++)
        if (st[(r + i) % P] == 1)
            rc = uly_comm_shm_peer_failed(c, (r + i) % P, v);
    if (!rc && !cma && to_heads && out && out != win && head_bytes)
        memcpy(out, win, head_bytes);
    return rc;
}

static int a2a_move(uly_dist *D, int which, int to_heads, const char *in, int64_t Hx, const int64_t *hbeg,
                    const int64_t *hcnt, char *out)
{
    const int P = D->P, r = D->rank;
    const size_t es = D->es;
    const int mode = P > 1 ? call_mode(D, which) : ULY_A2A_PACK;
    const double t0 = uly_comm_wtime(); /* every mode: the whole call, own block included */
    if (mode == ULY_A2A_SHM || mode == ULY_A2A_CMA) {
        int rc = a2a_shm(D, which, to_heads, in, Hx, hbeg, hcnt, out, mode == ULY_A2A_CMA);
        if (!rc && D->a2a.mode == ULY_A2A_AUTO && !D->a2a.auto_mode[which])
            rc = auto_record(D, which, mode, uly_comm_wtime() - t0);
        return rc;
    }
    int rc = uly_comm_agree_end(D->c); /* the call's agreement, before any MPI call */
    if (rc)
        return rc;
    comm_block *send = D->a2a.sbk, *recv = D->a2a.rbk;
    int send_inplace, recv_inplace;
    a2a_blocks(D, which, to_heads, in, Hx, hbeg, hcnt, out, send, recv, &send_inplace, &recv_inplace);
    comm_block self_s = send[r], self_r = recv[r];
    send[r].rows = recv[r].rows = 0; /* the own block does not go through MPI */
    if (mode == ULY_A2A_DATATYPE) {
        rc = uly_comm_alltoallw_blocks(D->c, in, send, out, recv, es);
    } else if (mode == ULY_A2A_PIPELINE) {
        size_t soff = 0, roff = 0;
        for (int s = 0; s < P; s++) {
            D->a2a.sc[s] = block_elems(&send[s]);
            D->a2a.rc[s] = block_elems(&recv[s]);
            D->a2a.sd[s] = send_inplace ? send[s].off : soff;
            D->a2a.rd[s] = recv_inplace ? recv[s].off : roff;
            soff += D->a2a.sc[s];
            roff += D->a2a.rc[s];
        }
        pipe_ctx x = {D, in, out, send, recv, send_inplace, recv_inplace};
        rc = uly_comm_alltoall_pipelined(D->c, send_inplace ? in : D->a2a.sstage, D->a2a.sc, D->a2a.sd,
                                         recv_inplace ? out : D->a2a.rstage, D->a2a.rc, D->a2a.rd, es,
                                         send_inplace ? NULL : pipe_pack, recv_inplace ? NULL : pipe_unpack, &x);
    } else {
        size_t soff = 0, roff = 0;
        for (int s = 0; s < P; s++) {
            D->a2a.sc[s] = block_elems(&send[s]);
            D->a2a.rc[s] = block_elems(&recv[s]);
            D->a2a.sd[s] = send_inplace ? send[s].off : soff;
            D->a2a.rd[s] = recv_inplace ? recv[s].off : roff;
            if (!send_inplace && D->a2a.sc[s]) {
                comm_block packed = {soff, send[s].batches, send[s].rows * send[s].len, send[s].rows,
                                     send[s].len, send[s].len};
                copy_block(D->a2a.sstage, &packed, in, &send[s], es);
            }
            soff += D->a2a.sc[s];
            roff += D->a2a.rc[s];
        }
        rc = uly_comm_alltoallv(D->c, send_inplace ? in : D->a2a.sstage, D->a2a.sc, D->a2a.sd,
                            recv_inplace ? out : D->a2a.rstage, D->a2a.rc, D->a2a.rd, es);
        for (int s = 0; s < P && !rc && !recv_inplace; s++) {
            comm_block packed = {D->a2a.rd[s], recv[s].batches, recv[s].rows * recv[s].len, recv[s].rows,
                                 recv[s].len, recv[s].len};
            if (D->a2a.rc[s])
                copy_block(out, &recv[s], D->a2a.rstage, &packed, es);
        }
    }
    send[r] = self_s;
    recv[r] = self_r;
    if (!rc && P > 1 && D->a2a.mode == ULY_A2A_AUTO && !D->a2a.auto_mode[which])
        rc = auto_record(D, which, mode, uly_comm_wtime() - t0);
    return rc;
}

void *uly_dist_head_buffer(uly_dist *D, int which)
{
    if (!D || D->P == 1 || which < 0 || which >= ULY_A2A_COUNT)
        return NULL;
    void *const buf[ULY_A2A_COUNT] = {D->qh, D->kh, D->vh, D->oh, D->doh, D->dqh, D->dkh, D->dvh};
    return buf[which];
}

int uly_dist_a2a_mode(const uly_dist *D, int which)
{
    if (!D || which < 0 || which >= ULY_A2A_COUNT)
        return ULY_A2A_AUTO;
    if (D->a2a.mode != ULY_A2A_AUTO)
        return D->a2a.mode;
    return D->a2a.auto_mode[which];
}

const char *uly_dist_a2a_note(const uly_dist *D)
{
    return D && D->a2a.note[0] ? D->a2a.note : NULL;
}

const char *uly_a2a_mode_name(int mode)
{
    static const char *const names[ULY_A2A_MODES] = {"auto", "pack", "datatype", "pipeline", "shm", "cma"};
    return mode >= 0 && mode < ULY_A2A_MODES ? names[mode] : "unknown";
}

static int a2a_seq_to_heads(uly_dist *D, int which, const char *in, int64_t Hin, const int64_t *hbeg,
                            const int64_t *hcnt, char *out)
{
    return a2a_move(D, which, 1, in, Hin, hbeg, hcnt, out);
}

static int a2a_heads_to_seq(uly_dist *D, int which, const char *in, int64_t Hout, const int64_t *hbeg,
                            const int64_t *hcnt, char *out)
{
    return a2a_move(D, which, 0, in, Hout, hbeg, hcnt, out);
}

static int call_agree(uly_dist *D, int kind, int local);
static int call_agree_open(uly_dist *D, int kind, int local);

/* KV gradients back to sequence shards: per KV head, or per query head then folded. */
static int a2a_kv_grad(uly_dist *D, int which, const char *in, char *out)
{
    if (!D->part.rep)
        return a2a_heads_to_seq(D, which, in, D->a.kv_heads, D->part.kb, D->part.kc, out);
    int rc = a2a_heads_to_seq(D, which, in, D->a.heads, D->part.hb, D->part.hc, D->expanded);
    if (rc)
        return rc;
    if (D->part.nc[D->rank] == 0)
        return ULY_OK;
    /* tokens of all batches are consecutive rows here: fold B * n_r rows */
    uly_attn_desc one = D->a;
    one.batch = 1;
    return uly_kv_fold(&one, 0, D->a.heads, D->a.batch * D->part.nc[D->rank], D->expanded, out);
}

int uly_dist_a2a(uly_dist *D, int which, const void *in, void *out)
{
    if (!D)
        return uly_set_error(ULY_EINVAL, "distributed context is NULL");
    int local = ULY_OK;
    if (which < 0 || which >= ULY_A2A_COUNT)
        local = uly_set_error(ULY_EINVAL, "unknown all-to-all %d", which);
    else if ((!in || !out) && D->part.nc[D->rank] > 0)
        local = uly_set_error(ULY_EINVAL, "all-to-all %s: NULL buffer", uly_a2a_name(which));
    int rc = call_agree_open(D, 100 + which, local);
    if (rc)
        return rc;
    switch (which) {
    case ULY_A2A_Q:
    case ULY_A2A_DO:
        return a2a_seq_to_heads(D, which, in, D->a.heads, D->part.hb, D->part.hc, out);
    case ULY_A2A_K:
    case ULY_A2A_V:
        return a2a_seq_to_heads(D, which, in, D->a.kv_heads, D->part.kb, D->part.kc, out);
    case ULY_A2A_O:
    case ULY_A2A_DQ:
        return a2a_heads_to_seq(D, which, in, D->a.heads, D->part.hb, D->part.hc, out);
    default:
        return a2a_kv_grad(D, which, in, out);
    }
}

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
enum { TAB_NBUF = 6 };
static void dist_table_bufs(const dist_sizes *z, uly_bufs *t)
{
    const uint64_t P = (uint64_t)z->P;
    uly_bufs_add(t, "partition tables", uly_buf_bytes1(sizeof(int64_t), (int64_t)(6 * P)), ULY_BUF_HEAP);
    uly_bufs_add(t, "count scratch", uly_buf_bytes1(sizeof(size_t), (int64_t)(4 * P)), ULY_BUF_HEAP);
    uly_bufs_add(t, "block scratch", uly_buf_bytes1(sizeof(comm_block), (int64_t)(2 * P)), ULY_BUF_HEAP);
    uly_bufs_add(t, "peer regions", uly_buf_bytes1(sizeof(char *), (int64_t)P), ULY_BUF_HEAP);
    uly_bufs_add(t, "shm progress", uly_buf_bytes1(1, (int64_t)P), ULY_BUF_HEAP);
    uly_bufs_add(t, "shm row copies", uly_buf_bytes1(sizeof(row_copy), (int64_t)P), ULY_BUF_HEAP);
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
    return head_region(a, z->es, z->h_r, z->kv_r, z->rep ? z->h_r : z->kv_r, NULL, t, where);
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

/* Bytes of a rank's flag area for the overlapped path through the window
 * (after its head-side buffers): one cache line per flag, input flags and
 * release flags per peer, done flags per chunk and kind (OVS_IN, ...). */
enum { OVS_LINE = 64 };
#define OVS_IN(D, s) (s)
#define OVS_REL(D, s) ((D)->P + (s))
#define OVS_DONE(D, c, kind) (2 * (D)->P + 2 * (c) + (kind))
static uint64_t ovs_flag_bytes(int P, int K)
{
    return (uint64_t)(2 * P + 2 * K) * OVS_LINE;
}

static size_t ovs_bytes(const uly_dist *D)
{
    return D->ovl.K >= 2 && D->ovs.tab ? (size_t)ovs_flag_bytes(D->P, D->ovl.K) : 0;
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
    /* the tables of the path through the window (used if heads_place makes one) */
    t.n = 0;
    ovs_tab_bufs(z, &t);
    if (!rc && !(rc = uly_bufs_carve(&t, 0, 1, "overlap flag tables", &D->ovs.tab, ptr))) {
        D->ovs.area = (char **)(void *)ptr[0];
        D->ovs.seen = (uint64_t *)(void *)ptr[1];
        D->ovs.got = (unsigned char *)ptr[2];
    }
    return rc;
}

/* After the window is allocated: every rank's flag area, the own zeroed. */
static void ovs_place(uly_dist *D)
{
    if (!ovs_bytes(D))
        return;
    size_t lay[ULY_A2A_COUNT];
    for (int s = 0; s < D->P; s++)
        D->ovs.area[s] = D->shm.peer[s] + head_layout(D, s, lay);
    for (int i = 0; i < 2 * D->P + 2 * D->ovl.K; i++)
        uly_comm_shm_flag_init(D->ovs.area[D->rank] + (size_t)i * OVS_LINE);
    D->ovs.on = 1;
}

/* Whether the head-side buffers may go into a shared-memory window. */
static int heads_shared(const uly_dist *D)
{
    return D->P > 1 && (D->a2a.mode == ULY_A2A_SHM || D->a2a.mode == ULY_A2A_CMA || D->a2a.mode == ULY_A2A_AUTO);
}

static void heads_set(uly_dist *D, char *region);

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
     * and placed by heads_place() (or alias the caller's with P = 1) */
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
    if (P > 1 && !heads_shared(D)) { /* private head-side buffers, allocated now */
        if (!(D->shm.heads_owned = uly_malloc((size_t)hbytes)))
            return uly_set_error(ULY_ENOMEM, "cannot allocate %zu bytes of head-sharded buffers", (size_t)hbytes);
        heads_set(D, D->shm.heads_owned);
    }
    return ovl_alloc(D, &z);
}

/* This rank's head-side buffers in its region at head_layout's offsets. */
static void heads_set(uly_dist *D, char *region)
{
    size_t off[ULY_A2A_COUNT];
    head_layout(D, D->rank, off);
    void **slot[ULY_A2A_COUNT] = {&D->qh, &D->kh, &D->vh, &D->oh, &D->doh, &D->dqh, &D->dkh, &D->dvh};
    for (int w = 0; w < ULY_A2A_COUNT; w++)
        *slot[w] = region + off[w];
    D->shm.peer[D->rank] = region;
}

/* Address space the context still needs beside its window: the kernels'
 * workspace of one call (a local-attention plug-in's own is not known),
 * and ULY_WINDOW_SLACK for MPI and the threads. */
#define ULY_WINDOW_SLACK ((size_t)32 << 20)
static uly_kernel_opts local_opts(const uly_dist *D);
static size_t heads_reserve(const uly_dist *D)
{
    size_t ws = 0;
    if (!D->o.attn && D->part.hc[D->rank] > 0) {
        uly_kernel_opts ko = local_opts(D);
        if (uly_attn_workspace(&D->a, &ko, &ws))
            ws = 0;
    }
    return ws > SIZE_MAX - ULY_WINDOW_SLACK ? SIZE_MAX : ws + ULY_WINDOW_SLACK;
}

/* Back to private head-side buffers after a window that not every rank
 * could have (collective: the window, where it exists, is freed). */
static void heads_unshare(uly_dist *D)
{
    uly_comm_shm_free(D->c);
    D->shm.on = 0;
    D->ovs.on = 0;
    D->a2a.ncand = 3;
    for (int s = 0; s < D->P; s++)
        D->shm.peer[s] = NULL;
    if (D->ovs.area)
        for (int s = 0; s < D->P; s++)
            D->ovs.area[s] = NULL;
}

/*
 * Where the head-side buffers go (collective, after the communicator is
 * attached).  With ULY_A2A_SHM or ULY_A2A_AUTO on P > 1 ranks that all share
 * one node: a shared-memory window, every rank's segment mapped in every
 * rank (auto then measures the shm mode too); ULY_A2A_SHM across nodes is
 * refused; ULY_A2A_AUTO across nodes allocates them privately.  A window
 * that not every rank can afford (/dev/shm space, address space; checked
 * before it is made, see uly_comm_shm_alloc) is ULY_EUNAVAIL for
 * ULY_A2A_SHM and ULY_A2A_CMA, the same message on every rank; ULY_A2A_AUTO
 * then allocates privately and says why (uly_dist_a2a_note).  The outcome
 * is agreed, so every rank returns the same status.
 */
static int heads_place(uly_dist *D)
{
    if (!heads_shared(D))
        return ULY_OK; /* allocated in dist_alloc (or aliases with P = 1) */
    static const char *const names[1] = {"all ranks on one node (MPI_COMM_TYPE_SHARED)"};
    int one = 0;
    int local = uly_comm_one_node(D->c, &one);
    int64_t v = one;
    int rc = uly_comm_agree(D->c, local, 1, &v, names);
    if (rc)
        return rc;
    size_t lay[ULY_A2A_COUNT];
    const size_t hbytes = head_layout(D, D->rank, lay);
    int private = !one;
    if (one) {
        local = uly_comm_shm_alloc(D->c, hbytes + ovs_bytes(D), heads_reserve(D), D->shm.peer);
        if (!local) {
            D->shm.on = 1;
            D->a2a.ncand = 4; /* auto measures the shm mode too */
            heads_set(D, D->shm.peer[D->rank]);
            ovs_place(D);
        }
        int who = -1;
        const int st = uly_comm_agree_status(D->c, local, &who); /* the same on every rank */
        if (st == ULY_EUNAVAIL && D->a2a.mode == ULY_A2A_AUTO) {
            snprintf(D->a2a.note, sizeof D->a2a.note, "all-to-all: no shared-memory window (%s): auto falls back to pack, "
                     "datatype and pipeline", uly_last_error());
            heads_unshare(D);
            private = 1;
        } else if (st == ULY_EUNAVAIL) {
            char why[512];
            snprintf(why, sizeof why, "%s", uly_last_error());
            return uly_set_error(ULY_EUNAVAIL, "all-to-all mode %s: %s", uly_a2a_mode_name(D->a2a.mode), why);
        } else if (st) {
            char why[512];
            snprintf(why, sizeof why, "%s", uly_last_error());
            return who == D->rank ? uly_set_error(st, "%s", why)
                                  : uly_set_error(ULY_EPEER, "rank %d failed: %s", who, why);
        }
        local = ULY_OK;
    } else if (D->a2a.mode == ULY_A2A_SHM || D->a2a.mode == ULY_A2A_CMA) {
        local = uly_set_error(ULY_EINVAL, "all-to-all mode %s needs every rank on one node (%d ranks do not "
                              "all share memory); use pack, datatype, pipeline or auto",
                              uly_a2a_mode_name(D->a2a.mode), D->P);
        private = 0;
    }
    if (private) {
        if (!(D->shm.heads_owned = uly_malloc(hbytes)))
            local = uly_set_error(ULY_ENOMEM, "cannot allocate %zu bytes of head-sharded buffers", hbytes);
        else
            heads_set(D, D->shm.heads_owned);
    }
    rc = uly_comm_agree(D->c, local, 0, NULL, NULL);
    if (!rc && D->shm.on && D->a2a.mode != ULY_A2A_SHM) {
        /* cma (asked for, or measured by auto) if every rank can read every
         * other's memory; the outcome is agreed, so a failure anywhere
         * (EPERM under a ptrace policy, ENOSYS) makes every rank use shm */
        int usable = 0;
        rc = uly_comm_cma_probe(D->c, &usable);
        if (rc)
            return rc;
        if (usable) {
            D->shm.cma = 1;
            D->a2a.ncand = 5;
        } else {
            snprintf(D->a2a.note, sizeof D->a2a.note, "all-to-all mode cma unavailable (%s): %s", uly_last_error(),
                     D->a2a.mode == ULY_A2A_CMA ? "using shm" : "auto measures the others");
            if (D->a2a.mode == ULY_A2A_CMA)
                D->a2a.mode = ULY_A2A_SHM;
        }
    }
    if (!rc && D->shm.on) /* every rank has its window: agreements and flags through it from now on */
        uly_comm_shm_start(D->c);
    return rc;
}

/* The configuration every rank must share: one line per field, its value
 * (from a, o and sbits, the scale's bits) and its name in the messages. */
#define CFG_FIELDS(X)                                          \
    X(a->batch, "batch")                                       \
    X(a->seq, "sequence length")                               \
    X(a->heads, "heads")                                       \
    X(a->kv_heads, "kv-heads")                                 \
    X(a->head_dim, "head dim")                                 \
    X(a->causal, "causal")                                     \
    X(a->window, "window")                                     \
    X(a->dtype, "dtype")                                       \
    X(sbits, "scale")                                          \
    X(o->kernel.block_q, "block_q")                            \
    X(o->kernel.block_k, "block_k")                            \
    X((int64_t)o->max_count, "max_count")                      \
    X(o->attn != NULL, "local attention")                      \
    X(o->a2a_mode, "all-to-all mode")                          \
    X(a->docs, "documents per row")                            \
    X(uly_doc_hash(a), "document offsets (content hash)")      \
    X(o->overlap, "overlap")                                   \
    X(o->overlap_chunks, "overlap chunks")

#define CFG_COUNT(value, name) +1
#define CFG_NAME(value, name) name,
#define CFG_VALUE(value, name) v[i++] = (int64_t)(value);
enum { NCFG = 0 CFG_FIELDS(CFG_COUNT) };
static const char *const cfg_names[NCFG] = {CFG_FIELDS(CFG_NAME)};

static void cfg_values(const uly_attn_desc *a, const uly_dist_opts *o, int64_t *v)
{
    double sc = a->scale;
    int64_t sbits;
    memcpy(&sbits, &sc, sizeof sbits);
    int i = 0;
    CFG_FIELDS(CFG_VALUE)
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
        rc = heads_place(D);
    if (rc) {
        uly_dist_free(D);
        return rc;
    }
    *out = D;
    return ULY_OK;
}

/* Every call starts with an agreement on (kind, call number, local status). */
static const char *const call_names[3] = {"the operation (forward, backward or a2a kind)", "the call sequence",
                                          "the overlap mode (uly_dist_set_overlap)"};

static int call_agree(uly_dist *D, int kind, int local)
{
    int64_t v[3] = {kind, (int64_t)D->calls++, D->ovl.mode};
    return uly_comm_agree(D->c, local, 3, v, call_names);
}

/* The same agreement, left open when the window's flags carry it: the next
 * all-to-all settles it (a2a_shm after exchanging with the peers already
 * there, any other mode before its first MPI call), and so does every other
 * path before anything collective (uly_comm_agree_end).  A local failure is
 * settled at once and returned. */
static int call_agree_open(uly_dist *D, int kind, int local)
{
    int64_t v[3] = {kind, (int64_t)D->calls++, D->ovl.mode};
    return uly_comm_agree_begin(D->c, local, 3, v, call_names);
}

static uly_kernel_opts local_opts(const uly_dist *D)
{
    uly_kernel_opts k = D->o.kernel;
    k.head_begin = D->part.hb[D->rank];
    k.head_count = D->part.hc[D->rank];
    k.kv_expanded = D->part.rep;
    return k;
}

/* ------------------------------------------------------------ overlap */

/* Tags of the chunk all-to-alls: one per tensor kind and chunk parity, so
 * that the input all-to-alls of two chunks, or the output ones, in flight
 * at once and an input and an output one never match each other's messages
 * (two of the same kind and parity are never in flight together). */
#define OVL_TAG(which, c) (ULY_COMM_TAG_A2A + 1 + (which) + ULY_A2A_COUNT * ((c) & 1))
#define OVL_IN(D, c) (&(D)->ovl.op[(c) & 1])
#define OVL_OUT(D, c) (&(D)->ovl.op[2 + ((c) & 1)])

/* Send the block of tensor pt for peer s (packed unless its side is
 * contiguous), or copy the own block; once. */
static int ovl_send(uly_dist *D, ovl_op *o, ovl_part *pt, int s)
{
    const size_t es = D->es;
    if (pt->sent[s])
        return ULY_OK;
    pt->sent[s] = 1;
    if (s == D->rank) {
        if (D->part.nc[s] > 0)
            copy_block(pt->out, &pt->recv[s], pt->in, &pt->send[s], es);
        return ULY_OK;
    }
    const comm_block *b = &pt->send[s];
    const size_t n = block_elems(b);
    const char *buf = pt->in + b->off * es;
    if (n && pt->sstage) {
        comm_block packed = {pt->soff[s], b->batches, b->rows * b->len, b->rows, b->len, b->len};
        copy_block(pt->sstage, &packed, pt->in, b, es);
        buf = pt->sstage + pt->soff[s] * es;
    }
    return uly_comm_nb_post(D->c, &o->q, 0, (void *)buf, n, es, s, pt->tag);
}

/* Wait for source s's block of tensor pt and unpack it; once. */
static int ovl_recv(uly_dist *D, ovl_op *o, ovl_part *pt, int s)
{
    if (pt->got[s])
        return ULY_OK;
    int rc = uly_comm_nb_wait_some(&o->q, pt->rfirst[s], pt->rn[s]);
    if (rc)
        return rc;
    pt->got[s] = 1;
    const comm_block *b = &pt->recv[s];
    if (pt->rstage && block_elems(b)) {
        comm_block packed = {pt->roff[s], b->batches, b->rows * b->len, b->rows, b->len, b->len};
        copy_block(pt->out, b, pt->rstage, &packed, D->es);
    }
    return ULY_OK;
}

/* Add one tensor of chunk c's all-to-all to op `o` (see a2a_move for the
 * two sides): every receive is posted; with send_now every block is sent
 * (the own one copied) at once, otherwise by ovl_send when it is ready. */
static int ovl_start(uly_dist *D, ovl_op *o, int c, int which, int to_heads, const char *in, int64_t Hx,
                     const int64_t *hbeg, const int64_t *hcnt, char *out, int send_now)
{
    const int P = D->P, r = D->rank;
    const size_t es = D->es;
    ovl_part *pt = &o->part[o->n];
    char *seqst = D->ovl.ostage + (size_t)((o - D->ovl.op) * 3 + o->n) * (D->ovl.ost_seq + D->ovl.ost_head) * es;
    char *headst = seqst + D->ovl.ost_seq * es;
    int send_inplace, recv_inplace;
    o->n++;
    a2a_tables(D, which, to_heads, Hx, hbeg, hcnt, pt->send, pt->recv, &send_inplace, &recv_inplace);
    pt->tag = OVL_TAG(which, c);
    pt->which = which;
    pt->in = in;
    pt->out = out;
    pt->sstage = send_inplace ? NULL : to_heads ? seqst : headst;
    pt->rstage = recv_inplace ? NULL : to_heads ? headst : seqst;
    int rc = ULY_OK;
    size_t roff = 0, soff = 0;
    for (int s = 0; s < P; s++) {
        pt->sent[s] = 0;
        pt->got[s] = s == r;
        pt->rfirst[s] = pt->rn[s] = 0;
    }
    for (int i = 1; i < P && !rc; i++) { /* every receive first */
        const int s = (r - i + P) % P;
        const size_t n = block_elems(&pt->recv[s]);
        pt->roff[s] = roff;
        pt->rfirst[s] = o->q.n;
        rc = uly_comm_nb_post(D->c, &o->q, 1, pt->rstage ? pt->rstage + roff * es : out + pt->recv[s].off * es, n,
                              es, s, pt->tag);
        pt->rn[s] = o->q.n - pt->rfirst[s];
        roff += n;
    }
    for (int i = 1; i < P; i++) {
        const int s = (r + i) % P;
        pt->soff[s] = soff;
        soff += pt->sstage ? block_elems(&pt->send[s]) : 0;
    }
    for (int i = 0; i < P && send_now && !rc; i++)
        rc = ovl_send(D, o, pt, (r + i) % P);
    return rc;
}

/* Complete op `o`: send what is not sent yet, wait for every message,
 * unpack what came through a stage and was not unpacked yet. */
static int ovl_finish(uly_dist *D, ovl_op *o)
{
    const int P = D->P;
    int rc = ULY_OK;
    for (int t = 0; t < o->n && !rc; t++)
        for (int s = 0; s < P && !rc; s++)
            rc = ovl_send(D, o, &o->part[t], s);
    if (!rc)
        rc = uly_comm_nb_wait(&o->q);
    for (int t = 0; t < o->n && !rc; t++)
        for (int s = 0; s < P && !rc; s++)
            rc = ovl_recv(D, o, &o->part[t], s); /* the requests are complete: unpacks only */
    o->n = 0;
    return rc;
}

/* CPU time of the calling thread (seconds). */
static double thread_cpu(void)
{
    struct timespec t;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0)
        return 0;
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Record one event of the running call in the trace, if any. */
static void ovl_event(uly_dist *D, int kind, int which, int peer, int ready, double t0, double wall, double cpu)
{
    if (!D->ovl.tr)
        return;
    if (D->ovl.tr_n < D->ovl.tr_cap)
        D->ovl.tr[D->ovl.tr_n] = (uly_ovl_event){t0 - D->ovl.t_call, wall, cpu, D->ovl.fwd,
                                         kind == ULY_OVL_EV_AGREE ? -1 : D->ovl.c, kind, which, peer, ready};
    D->ovl.tr_n++;
}

/* CLOCK_MONOTONIC (seconds): one clock for every process of a node. */
static double mono_now(void)
{
    struct timespec t;
    if (clock_gettime(CLOCK_MONOTONIC, &t) != 0)
        return 0;
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/*
 * The kernel's progress hook: let MPI move the messages in flight, at most
 * every OVL_TEST_EVERY, and not at all when every rank is on one node and
 * can read every other's memory (D->shm.cma, probed at creation): there Open
 * MPI's receiver copies a large message with cross-memory attach when it
 * waits for it, so a test only moves that copy
 * earlier on the same core, while with more ranks than cores every test
 * that finds nothing to do yields the core (Open MPI's
 * mpi_yield_when_idle).  Measured with 4 ranks on 2 cores, N = 8192
 * (doc/performance.md, overlap "Round four"): tests after every block
 * 400-870 ms of wall time per rank and iteration, at most every 20 ms
 * 300-870 ms, none 0 ms, with the waits for input blocks unchanged.  The
 * wall and CPU time of the tests are both accounted.
 */
static void ovl_progress(void *user)
{
    uly_dist *D = user;
    if (D->shm.cma)
        return;
    const double t0 = uly_comm_wtime();
    if (t0 - D->ovl.t_test < OVL_TEST_EVERY)
        return;
    D->ovl.t_test = t0;
    const double c0 = thread_cpu();
    for (int i = 0; i < 4; i++) {
        int done;
        if (D->ovl.op[i].q.n && !D->ovl.err)
            D->ovl.err = uly_comm_nb_test(&D->ovl.op[i].q, &done);
    }
    D->ovl.acc->test += uly_comm_wtime() - t0;
    D->ovl.acc->test_cpu += thread_cpu() - c0;
}

/* Account a wait of the kernel's hooks for source s's block of tensor
 * `which`, started at t0 (wall) and c0 (CPU); ready: it had arrived. */
static void ovl_waited(uly_dist *D, int which, int s, int ready, double t0, double c0)
{
    uly_ovl_account *A = D->ovl.acc;
    const double w = uly_comm_wtime() - t0, u = thread_cpu() - c0;
    A->wait += w;
    A->wait_cpu += u;
    A->waits++;
    if (ready) {
        A->wait_ready += w;
        A->waits_ready++;
    }
    if (D->ovl.c == 0)
        A->wait_first += w;
    if (w > A->wait_max)
        A->wait_max = w;
    ovl_event(D, ULY_OVL_EV_WAIT, which, s, ready, t0, w, u);
}

/* Hook: wait for source s's block of input tensor pt and unpack it, accounted. */
static int ovl_need(uly_dist *D, ovl_op *o, ovl_part *pt, int s)
{
    if (pt->got[s])
        return ULY_OK;
    const double t0 = uly_comm_wtime(), c0 = thread_cpu();
    int ready = 0;
    int rc = uly_comm_nb_test_some(&o->q, pt->rfirst[s], pt->rn[s], &ready);
    if (!rc)
        rc = ovl_recv(D, o, pt, s);
    ovl_waited(D, pt->which, s, ready, t0, c0);
    return rc;
}

/* Hook: pack and post the block of output tensor pt for peer s, accounted. */
static int ovl_done(uly_dist *D, ovl_op *o, ovl_part *pt, int s)
{
    if (pt->sent[s])
        return ULY_OK;
    const double t0 = uly_comm_wtime(), c0 = thread_cpu();
    const int rc = ovl_send(D, o, pt, s);
    const double w = uly_comm_wtime() - t0, u = thread_cpu() - c0;
    D->ovl.acc->send += w;
    D->ovl.acc->send_cpu += u;
    ovl_event(D, ULY_OVL_EV_SEND, pt->which, s, 0, t0, w, u);
    return rc;
}

/*
 * The kernel's rows hook for chunk D->ovl.c: a source's block of an input
 * tensor is waited for when the kernel first reaches its rows (sources in
 * sequence order, the kernel's fixed order), and an output block is sent as
 * soon as the kernel says its rows are final.  Which tensors: the input op
 * holds K, V, Q (forward) or dO; the output op O or dQ, dK, dV.
 */
static void ovl_rows(void *user, int ev, int64_t end)
{
    uly_dist *D = user;
    const int P = D->P, c = D->ovl.c, fwd = D->ovl.fwd;
    int t0_, t1_, need = ev == ULY_ROWS_NEED_Q || ev == ULY_ROWS_NEED_K;
    ovl_op *o = need ? OVL_IN(D, c) : OVL_OUT(D, c);
    switch (ev) {
    case ULY_ROWS_NEED_Q: t0_ = fwd ? 2 : 0; t1_ = t0_ + 1; break;
    case ULY_ROWS_NEED_K: t0_ = 0; t1_ = fwd ? 2 : 0; break;
    case ULY_ROWS_DONE_Q: t0_ = 0; t1_ = 1; break;
    default: t0_ = 1; t1_ = fwd ? 1 : 3; break;
    }
    for (int s = 0; s < P && !D->ovl.err; s++) {
        if (need ? D->part.nb[s] >= end : D->part.nb[s] + D->part.nc[s] > end)
            break;
        for (int t = t0_; t < t1_ && !D->ovl.err; t++)
            D->ovl.err = need ? ovl_need(D, o, &o->part[t], s) : ovl_done(D, o, &o->part[t], s);
    }
}

/* Element offset of this rank's chunk c in a head-side buffer of x heads per
 * chunk offset (B, N, ., d) chunk-major. */
static size_t ovl_off(const uly_dist *D, int64_t heads_before)
{
    return usz(D->a.batch * D->a.seq * D->a.head_dim * heads_before) * D->es;
}

static int ovl_use(const uly_dist *D)
{
    return D->P > 1 && D->ovl.K >= 2 && D->ovl.mode != ULY_OVERLAP_OFF;
}

/* Kernel options of this rank's chunk c, with the progress and rows hooks. */
static uly_kernel_opts ovl_kopts(uly_dist *D, int c)
{
    uly_kernel_opts k = D->o.kernel;
    k.head_begin = D->ovl.cqb[c * D->P + D->rank];
    k.head_count = D->ovl.cqc[c * D->P + D->rank];
    k.kv_expanded = D->part.rep;
    k.progress = D->ovl.hook_progress;
    k.progress_user = D;
    k.rows = D->ovl.hook_rows;
    k.rows_user = D;
    return k;
}

/* Start the input all-to-all of chunk c: K, V, then Q (forward; in that
 * order, since every query row needs the keys) or dO. */
static int ovl_start_in(uly_dist *D, int c, int fwd, const char *q, const char *k, const char *v)
{
    const int P = D->P;
    ovl_op *o = OVL_IN(D, c);
    const int64_t *qb = D->ovl.cqb + c * P, *qc = D->ovl.cqc + c * P, *kb = D->ovl.ckb + c * P, *kc = D->ovl.ckc + c * P;
    if (!fwd)
        return ovl_start(D, o, c, ULY_A2A_DO, 1, q, D->a.heads, qb, qc, (char *)D->doh + ovl_off(D, D->ovl.cqo[c]), 1);
    int rc = ovl_start(D, o, c, ULY_A2A_K, 1, k, D->a.kv_heads, kb, kc, (char *)D->kh + ovl_off(D, D->ovl.cko[c]), 0);
    if (!rc)
        rc = ovl_start(D, o, c, ULY_A2A_V, 1, v, D->a.kv_heads, kb, kc, (char *)D->vh + ovl_off(D, D->ovl.cko[c]), 0);
    if (!rc)
        rc = ovl_start(D, o, c, ULY_A2A_Q, 1, q, D->a.heads, qb, qc, (char *)D->qh + ovl_off(D, D->ovl.cqo[c]), 0);
    /* every peer's first query block needs all of K and V: those go out
     * first, to every peer, then Q; the own blocks are copied last */
    for (int i = 1; i < P && !rc; i++) {
        rc = ovl_send(D, o, &o->part[0], (D->rank + i) % P);
        if (!rc)
            rc = ovl_send(D, o, &o->part[1], (D->rank + i) % P);
    }
    for (int i = 1; i < P && !rc; i++)
        rc = ovl_send(D, o, &o->part[2], (D->rank + i) % P);
    for (int x = 0; x < 3 && !rc; x++)
        rc = ovl_send(D, o, &o->part[x], D->rank);
    return rc;
}

/* Post the receives of chunk c's output all-to-all, O (forward) or dQ, dK,
 * dV; the blocks go out as the kernel finishes their rows (ovl_rows). */
static int ovl_start_out(uly_dist *D, int c, int fwd, char *y0, char *dk, char *dv)
{
    const int P = D->P;
    ovl_op *o = OVL_OUT(D, c);
    const int64_t *qb = D->ovl.cqb + c * P, *qc = D->ovl.cqc + c * P, *kb = D->ovl.ckb + c * P, *kc = D->ovl.ckc + c * P;
    if (fwd)
        return ovl_start(D, o, c, ULY_A2A_O, 0, (char *)D->oh + ovl_off(D, D->ovl.cqo[c]), D->a.heads, qb, qc, y0, 0);
    int rc = ovl_start(D, o, c, ULY_A2A_DQ, 0, (char *)D->dqh + ovl_off(D, D->ovl.cqo[c]), D->a.heads, qb, qc, y0, 0);
    if (D->part.rep) { /* per query head into the expanded buffers; folded at the end */
        if (!rc)
            rc = ovl_start(D, o, c, ULY_A2A_DK, 0, (char *)D->dkh + ovl_off(D, D->ovl.cqo[c]), D->a.heads, qb, qc,
                           D->expanded, 0);
        if (!rc)
            rc = ovl_start(D, o, c, ULY_A2A_DV, 0, (char *)D->dvh + ovl_off(D, D->ovl.cqo[c]), D->a.heads, qb, qc,
                           D->ovl.expanded2, 0);
    } else {
        if (!rc)
            rc = ovl_start(D, o, c, ULY_A2A_DK, 0, (char *)D->dkh + ovl_off(D, D->ovl.cko[c]), D->a.kv_heads, kb, kc, dk,
                           0);
        if (!rc)
            rc = ovl_start(D, o, c, ULY_A2A_DV, 0, (char *)D->dvh + ovl_off(D, D->ovl.cko[c]), D->a.kv_heads, kb, kc, dv,
                           0);
    }
    return rc;
}

/* LSE of chunk c: (B, cqc, N) at the chunk's offset. */
static char *ovl_lse(const uly_dist *D, int c)
{
    const size_t off = usz(D->a.batch * D->a.seq * D->ovl.cqo[c]) * D->es;
    return (D->a.batch > 1 ? (char *)D->ovl.lse_ch : (char *)D->lse) + off;
}

/* Chunk c's kernel (forward or backward) on this rank's chunk buffers, with
 * the hooks (a plug-in gets the progress hook only: it may read its inputs
 * in any order, so they are all there before it runs). */
static int ovl_kernel(uly_dist *D, int c, int fwd)
{
    uly_kernel_opts ko = ovl_kopts(D, c);
    if (D->o.attn)
        ko.rows = NULL;
    const size_t qo = ovl_off(D, D->ovl.cqo[c]), ko_ = ovl_off(D, D->ovl.cko[c]);
    const size_t go = D->part.rep ? qo : ko_; /* KV gradients: per query head when replicated */
    char *qh = (char *)D->qh + qo, *kh = (char *)D->kh + ko_, *vh = (char *)D->vh + ko_;
    char *oh = (char *)D->oh + qo, *lse = ovl_lse(D, c);
    if (fwd)
        return D->o.attn ? D->o.attn->fwd(D->o.attn->user, &D->a, &ko, qh, kh, vh, oh, lse)
                         : uly_attn_fwd(&D->a, &ko, qh, kh, vh, oh, lse);
    char *doh = (char *)D->doh + qo, *dqh = (char *)D->dqh + qo;
    char *dkh = (char *)D->dkh + go, *dvh = (char *)D->dvh + go;
    return D->o.attn ? D->o.attn->bwd(D->o.attn->user, &D->a, &ko, qh, kh, vh, oh, lse, doh, dqh, dkh, dvh)
                     : uly_attn_bwd(&D->a, &ko, qh, kh, vh, oh, lse, doh, dqh, dkh, dvh);
}

/* After the last chunk: fold the replicated KV gradients (backward), put the
 * LSE in (B, H_r, N) for uly_dist_lse (forward, B > 1). */
static int ovl_tail(uly_dist *D, int fwd, void *y1, void *y2)
{
    const int K = D->ovl.K, P = D->P, r = D->rank;
    int rc = ULY_OK;
    if (!fwd && D->part.rep && D->part.nc[r] > 0) {
        uly_attn_desc one = D->a;
        one.batch = 1;
        rc = uly_kv_fold(&one, 0, D->a.heads, D->a.batch * D->part.nc[r], D->expanded, y1);
        if (!rc)
            rc = uly_kv_fold(&one, 0, D->a.heads, D->a.batch * D->part.nc[r], D->ovl.expanded2, y2);
    }
    if (!rc && fwd && D->a.batch > 1) {
        const int64_t B = D->a.batch, N = D->a.seq, h_r = D->part.hc[r];
        for (int c = 0; c < K; c++) {
            const int64_t cc = D->ovl.cqc[c * P + r];
            for (int64_t b = 0; b < B; b++)
                memcpy((char *)D->lse + usz((b * h_r + D->ovl.cqo[c]) * N) * D->es,
                       ovl_lse(D, c) + usz(b * cc * N) * D->es, usz(cc * N) * D->es);
        }
    }
    return rc;
}

/*
 * The overlapped path through the window (every rank on one node): one copy
 * per byte, as in the plain shm mode, chunk by chunk.
 *   in:  each rank copies its rows of chunk c straight into every peer's
 *        chunk buffer (qh, kh, vh or doh, at the peer's chunk offset) and
 *        raises its input flag in that peer's flag area: K (step 1), V (2),
 *        then Q or dO (step 3); the peer's kernel waits for a source's flag when
 *        it first reaches that source's rows (ovs_rows);
 *   out: the kernel raises the done flag of (chunk, kind) in its own area
 *        as output rows become final (kind 0: O or dQ, kind 1: dK and dV),
 *        valued by how many sources' rows are final; each rank copies its
 *        rows out of a peer's chunk buffer once that peer's flag covers it,
 *        between kernel blocks (ovs_progress), after each chunk, and at the
 *        end (waiting);
 *   end: each rank raises a release flag in every peer's area once it has
 *        copied everything out of it, and returns only when every peer's
 *        inputs have arrived and every peer has released its buffers.
 * So no peer touches a rank's buffers after its call returns, and every
 * rank is in the call (the agreement before it is settled) before anything
 * is written into its buffers: the invariants of the shm all-to-all, whose
 * calls can come before and after.  Flag values grow with every call
 * (ovs_seq, the same on every rank): in = seq * 64 + 3 c + step, done =
 * seq << 24 | sources final, release = seq.  Nothing here can fail: a
 * failed kernel still raises its done flags, its status goes to the
 * agreement after the call, so no rank waits for one that returned.
 */
static void *ovs_flag(const uly_dist *D, int s, int i)
{
    return D->ovs.area[s] + (size_t)i * OVS_LINE;
}

static uint64_t ovs_in_value(const uly_dist *D, int c, int step)
{
    return D->ovs.seq * 64 + (uint64_t)(3 * c + step);
}

static uint64_t ovs_done_value(const uly_dist *D, int n)
{
    return (D->ovs.seq << 24) | (uint64_t)n;
}

/* Heads of rank s's chunks before chunk c, per query head (q) or KV head. */
static int64_t ovs_before(const uly_dist *D, int q, int c, int s)
{
    const int64_t *cnt = q ? D->ovl.cqc : D->ovl.ckc;
    int64_t h = 0;
    for (int i = 0; i < c; i++)
        h += cnt[i * D->P + s];
    return h;
}

/* Whether tensor `which` has a block per query head (KV gradients: when
 * the KV heads are replicated), else per KV head. */
static int ovs_per_query(const uly_dist *D, int which)
{
    return which == ULY_A2A_Q || which == ULY_A2A_DO || which == ULY_A2A_O || which == ULY_A2A_DQ ||
           (D->part.rep && (which == ULY_A2A_DK || which == ULY_A2A_DV));
}

/* The byte counters of one overlapped call, as the plain path counts them. */
static void ovs_count(uly_dist *D, int fwd)
{
    static const int wf[4] = {ULY_A2A_Q, ULY_A2A_K, ULY_A2A_V, ULY_A2A_O};
    static const int wb[4] = {ULY_A2A_DO, ULY_A2A_DQ, ULY_A2A_DK, ULY_A2A_DV};
    const int P = D->P;
    int x, y;
    for (int c = 0; c < D->ovl.K; c++)
        for (int i = 0; i < 4; i++) {
            const int w = fwd ? wf[i] : wb[i], q = ovs_per_query(D, w);
            a2a_tables(D, w, w != ULY_A2A_O && w != ULY_A2A_DQ && w != ULY_A2A_DK && w != ULY_A2A_DV,
                       q ? D->a.heads : D->a.kv_heads, (q ? D->ovl.cqb : D->ovl.ckb) + c * P, (q ? D->ovl.cqc : D->ovl.ckc) + c * P,
                       D->a2a.sbk, D->a2a.rbk, &x, &y);
        }
}

/* Rank s's chunk c of head-side tensor `which` (this process's mapping). */
static char *ovs_chunk(const uly_dist *D, int s, int c, int which)
{
    size_t off[ULY_A2A_COUNT];
    head_layout(D, s, off);
    return D->shm.peer[s] + off[which] + ovl_off(D, ovs_before(D, ovs_per_query(D, which), c, s));
}

/* Account a copy of wall time w and CPU time u. */
static void ovs_copied(uly_dist *D, double w, double u)
{
    D->ovl.acc->copy += w;
    D->ovl.acc->copy_cpu += u;
}

/* Chunk c's input all-to-all: this rank's rows of every input tensor straight
 * into every peer's chunk buffers (K and V to every peer first: every peer's
 * first query block needs them), a flag after each step; the own rows last. */
static void ovs_start_in(uly_dist *D, int c, int fwd, const char *x0, const char *x1, const char *x2)
{
    const int P = D->P, r = D->rank;
    const double t0 = uly_comm_wtime(), c0 = thread_cpu();
    for (int step = fwd ? 2 : 3; step <= 3; step++) /* K and V, then Q (dO) */
        for (int i = 1; i <= P; i++) {
            const int s = (r + i) % P;
            const int ws[3] = {step == 3 ? (fwd ? ULY_A2A_Q : ULY_A2A_DO) : ULY_A2A_K, ULY_A2A_V, -1};
            const char *xs[2] = {step == 3 ? x0 : x1, x2};
            for (int j = 0; j < (step == 3 ? 1 : 2); j++) {
                const int w = ws[j], q = ovs_per_query(D, w);
                const int64_t *hb = (q ? D->ovl.cqb : D->ovl.ckb) + c * P, *hc = (q ? D->ovl.cqc : D->ovl.ckc) + c * P;
                const comm_block src = seq_block(D, s, q ? D->a.heads : D->a.kv_heads, hb, hc);
                const comm_block dst = head_block(D, r, hc[s]);
                copy_block(ovs_chunk(D, s, c, w), &dst, xs[j], &src, D->es);
                if (s != r) /* step 1: K, 2: V, 3: Q or dO */
                    uly_comm_shm_flag_set(D->c, ovs_flag(D, s, OVS_IN(D, r)), ovs_in_value(D, c, step == 3 ? 3 : 1 + j));
            }
        }
    ovs_copied(D, uly_comm_wtime() - t0, thread_cpu() - c0);
}

/* Wait until source s's input flag reaches v; returns whether it had. */
static int ovs_wait_flag(uly_dist *D, const void *flag, uint64_t v)
{
    if (uly_comm_shm_flag_reached(D->c, flag, v))
        return 1;
    while (!uly_comm_shm_flag_reached(D->c, flag, v))
        uly_comm_shm_pause();
    return 0;
}

/* Wait for input step `step` of the running chunk from the sources whose rows
 * start below end (sequence order), accounted as the kernel's waits when
 * acct (inside the kernel's hooks). */
static void ovs_need(uly_dist *D, int step, int64_t end, int acct)
{
    const int P = D->P, r = D->rank;
    const uint64_t v = ovs_in_value(D, D->ovl.c, step);
    for (int s = 0; s < P && D->part.nb[s] < end; s++) {
        if (s == r || D->ovs.seen[4 * s + step] >= v)
            continue;
        const double t0 = uly_comm_wtime(), c0 = thread_cpu();
        const int ready = ovs_wait_flag(D, ovs_flag(D, r, OVS_IN(D, s)), v);
        D->ovs.seen[4 * s + step] = v;
        if (acct)
            ovl_waited(D, step == 3 ? (D->ovl.fwd ? ULY_A2A_Q : ULY_A2A_DO) : step == 2 ? ULY_A2A_V : ULY_A2A_K, s,
                       ready, t0, c0);
    }
}

/* Raise the done flag of the running chunk's output kind: the rows of the
 * first n sources are final. */
static void ovs_publish(uly_dist *D, int kind, int n)
{
    const uint64_t v = ovs_done_value(D, n);
    if (v <= D->ovs.pub[kind])
        return;
    D->ovs.pub[kind] = v;
    uly_comm_shm_flag_set(D->c, ovs_flag(D, D->rank, OVS_DONE(D, D->ovl.c, kind)), v);
}

/* Copy this rank's rows of output kind `kind` of chunk c out of rank s's
 * chunk buffers into the call's outputs (replicated KV: the per-query-head
 * buffers the tail folds). */
static void ovs_pull(uly_dist *D, int c, int kind, int s)
{
    const int P = D->P, r = D->rank;
    const int ws[2] = {kind ? ULY_A2A_DK : D->ovl.fwd ? ULY_A2A_O : ULY_A2A_DQ, kind ? ULY_A2A_DV : -1};
    for (int j = 0; j < 2 && ws[j] >= 0; j++) {
        const int w = ws[j], q = ovs_per_query(D, w);
        const int64_t *hb = (q ? D->ovl.cqb : D->ovl.ckb) + c * P, *hc = (q ? D->ovl.cqc : D->ovl.ckc) + c * P;
        char *out = !kind ? D->ovs.y[0] : D->part.rep ? (j ? D->ovl.expanded2 : D->expanded) : D->ovs.y[1 + j];
        const comm_block dst = seq_block(D, s, q ? D->a.heads : D->a.kv_heads, hb, hc);
        const comm_block src = head_block(D, r, hc[s]);
        copy_block(out, &dst, ovs_chunk(D, s, c, w), &src, D->es);
    }
}

/* Copy out every output block of chunks up to `upto` whose rows are final
 * (wait: waiting for each), accounted as the kernel's sends when acct. */
static void ovs_collect(uly_dist *D, int upto, int wait, int acct)
{
    const int P = D->P, r = D->rank, kinds = D->ovl.fwd ? 1 : 2;
    const uint64_t v = ovs_done_value(D, r + 1);
    for (int c = 0; c <= upto; c++)
        for (int kind = 0; kind < kinds; kind++)
            for (int i = 1; i <= P; i++) {
                const int s = (r + i) % P;
                unsigned char *got = &D->ovs.got[(c * 2 + kind) * P + s];
                if (*got)
                    continue;
                const void *f = ovs_flag(D, s, OVS_DONE(D, c, kind));
                if (D->part.nc[r] > 0 && !uly_comm_shm_flag_reached(D->c, f, v)) {
                    if (!wait)
                        continue;
                    ovs_wait_flag(D, f, v);
                }
                *got = 1;
                const double t0 = uly_comm_wtime(), c0 = thread_cpu();
                ovs_pull(D, c, kind, s);
                const double w = uly_comm_wtime() - t0, u = thread_cpu() - c0;
                ovs_copied(D, w, u);
                if (acct) {
                    D->ovl.acc->send += w;
                    D->ovl.acc->send_cpu += u;
                    ovl_event(D, ULY_OVL_EV_SEND, kind ? ULY_A2A_DK : D->ovl.fwd ? ULY_A2A_O : ULY_A2A_DQ, s, 0, t0,
                              w, u);
                }
            }
}

/* The kernel's progress hook: copy out what the peers have finished. */
static void ovs_progress(void *user)
{
    uly_dist *D = user;
    ovs_collect(D, D->ovl.c, 0, 1);
}

/* The kernel's rows hook: wait for the sources' inputs (NEED), raise the
 * done flags (DONE). */
static void ovs_rows(void *user, int ev, int64_t end)
{
    uly_dist *D = user;
    if (ev == ULY_ROWS_NEED_Q || ev == ULY_ROWS_NEED_K) {
        if (ev == ULY_ROWS_NEED_Q) {
            ovs_need(D, 3, end, 1);
        } else if (D->ovl.fwd) { /* the backward's K, V are there since the forward */
            ovs_need(D, 1, end, 1);
            ovs_need(D, 2, end, 1);
        }
        return;
    }
    int n = 0;
    while (n < D->P && D->part.nb[n] + D->part.nc[n] <= end)
        n++;
    ovs_publish(D, ev == ULY_ROWS_DONE_Q ? 0 : 1, n);
}

/* Chunk c's kernel, accounted (wall and CPU time, end stamp, trace event)
 * from *t, *u, which it advances to its end; a failure goes to *lrc. */
static void ovl_timed_kernel(uly_dist *D, int c, int fwd, int *lrc, double *t, double *u)
{
    uly_ovl_account *A = D->ovl.acc;
    const int k = ovl_kernel(D, c, fwd);
    if (k && !*lrc)
        *lrc = k;
    const double t1 = uly_comm_wtime(), u1 = thread_cpu();
    A->kernel += t1 - *t;
    A->kernel_cpu += u1 - *u;
    A->kernel_end = mono_now();
    ovl_event(D, ULY_OVL_EV_KERNEL, -1, -1, 0, *t, t1 - *t, u1 - *u);
    *t = t1;
    *u = u1;
}

/* ovl_run through the window (see above). */
static int ovs_run(uly_dist *D, int fwd, const void *x0, const void *x1, const void *x2, void *y0, void *y1,
                   void *y2, int *lrc, double *t_in, double *t_attn, double *t_out)
{
    const int K = D->ovl.K, P = D->P, r = D->rank;
    uly_ovl_account *A = D->ovl.acc;
    double tin = 0, tout = 0;
    D->ovs.seq++;
    D->ovl.hook_progress = ovs_progress;
    D->ovl.hook_rows = ovs_rows;
    D->ovl.err = ULY_OK;
    D->ovl.fwd = fwd;
    D->ovl.c = 0;
    D->ovs.y[0] = y0;
    D->ovs.y[1] = y1;
    D->ovs.y[2] = y2;
    memset(D->ovs.got, 0, 2 * (size_t)(K * P));
    ovs_count(D, fwd);
    double t = uly_comm_wtime(), u = thread_cpu();
    ovs_start_in(D, 0, fwd, x0, x1, x2);
    for (int c = 0; c < K; c++) {
        D->ovl.c = c;
        D->ovs.pub[0] = D->ovs.pub[1] = 0;
        if (c + 1 < K)
            ovs_start_in(D, c + 1, fwd, x0, x1, x2);
        if (D->o.attn) { /* a plug-in gets all of its inputs first */
            ovs_need(D, 2, D->a.seq, 0);
            ovs_need(D, 3, D->a.seq, 0);
        }
        double t1 = uly_comm_wtime();
        ovl_event(D, ULY_OVL_EV_START, -1, -1, 0, t, t1 - t, thread_cpu() - u);
        tin += t1 - t;
        t = t1;
        u = thread_cpu();
        ovl_timed_kernel(D, c, fwd, lrc, &t, &u);
        /* every output row of the chunk is final now (also after a failed
         * kernel or a plug-in that does not announce rows) */
        ovs_publish(D, 0, P);
        if (!fwd)
            ovs_publish(D, 1, P);
        ovs_need(D, 3, D->a.seq, 0); /* what a failed kernel did not wait for */
        ovs_collect(D, c, 0, 0);
        tout += uly_comm_wtime() - t;
        ovl_event(D, ULY_OVL_EV_FINISH, -1, -1, 0, t, uly_comm_wtime() - t, thread_cpu() - u);
        t = uly_comm_wtime();
        u = thread_cpu();
    }
    ovs_collect(D, K - 1, 1, 0);
    for (int i = 1; i < P; i++) /* done with every peer's buffers */
        uly_comm_shm_flag_set(D->c, ovs_flag(D, (r + i) % P, OVS_REL(D, r)), D->ovs.seq);
    for (int i = 1; i < P; i++) /* and every peer with this rank's */
        ovs_wait_flag(D, ovs_flag(D, r, OVS_REL(D, (r + i) % P)), D->ovs.seq);
    const int rc = ovl_tail(D, fwd, y1, y2);
    if (rc && !*lrc)
        *lrc = rc;
    tout += uly_comm_wtime() - t;
    ovl_event(D, ULY_OVL_EV_FINISH, -1, -1, 0, t, uly_comm_wtime() - t, thread_cpu() - u);
    D->ovl.t_prog = A->wait + A->send + A->test;
    *t_in = tin;
    *t_attn = A->kernel - D->ovl.t_prog;
    *t_out = tout;
    return ULY_OK;
}

/*
 * Forward (fwd = 1) or backward of the chunked path:
 *   start in(0)
 *   for c: start in(c+1); post the receives of out(c) |
 *          attention(c): waits for each source's block of in(c) when it
 *          reaches its rows, sends each block of out(c) when its rows are
 *          final, progresses everything in flight between blocks |
 *          finish in(c); send the rest of out(c); finish out(c-1)
 *   finish out(K-1)
 * A failed kernel does not stop the schedule (every rank makes the same
 * calls); its status is returned in *lrc for the caller's agreement.
 */
static int ovl_run(uly_dist *D, int fwd, const void *x0, const void *x1, const void *x2, void *y0, void *y1,
                   void *y2, int *lrc, double *t_in, double *t_attn, double *t_out)
{
    const int K = D->ovl.K, P = D->P;
    uly_ovl_account *A = D->ovl.acc;
    double tin = 0, tout = 0;
    D->ovl.hook_progress = ovl_progress;
    D->ovl.hook_rows = ovl_rows;
    D->ovl.err = ULY_OK;
    D->ovl.fwd = fwd;
    D->ovl.c = 0;
    double t = uly_comm_wtime(), u = thread_cpu();
    int rc = ovl_start_in(D, 0, fwd, x0, x1, x2);
    tin += uly_comm_wtime() - t;
    for (int c = 0; c < K && !rc; c++) {
        D->ovl.c = c;
        if (c + 1 < K)
            rc = ovl_start_in(D, c + 1, fwd, x0, x1, x2);
        double t1 = uly_comm_wtime();
        tin += t1 - t;
        if (!rc)
            rc = ovl_start_out(D, c, fwd, y0, y1, y2);
        if (!rc && D->o.attn) /* a plug-in may ignore the rows hook: all of in(c) first */
            rc = ovl_finish(D, OVL_IN(D, c));
        const double t2 = uly_comm_wtime();
        ovl_event(D, ULY_OVL_EV_START, -1, -1, 0, t, t2 - t, thread_cpu() - u);
        tout += t2 - t1;
        if (rc)
            break;
        t = uly_comm_wtime();
        u = thread_cpu();
        ovl_timed_kernel(D, c, fwd, lrc, &t, &u);
        rc = D->ovl.err;
        if (!rc)
            rc = ovl_finish(D, OVL_IN(D, c));
        t1 = uly_comm_wtime();
        tin += t1 - t;
        for (int x = 0; x < OVL_OUT(D, c)->n && !rc; x++) /* what the kernel did not send */
            for (int s = 0; s < P && !rc; s++)
                rc = ovl_send(D, OVL_OUT(D, c), &OVL_OUT(D, c)->part[x], s);
        if (!rc && c > 0)
            rc = ovl_finish(D, OVL_OUT(D, c - 1));
        tout += uly_comm_wtime() - t1;
        ovl_event(D, ULY_OVL_EV_FINISH, -1, -1, 0, t, uly_comm_wtime() - t, thread_cpu() - u);
        t = uly_comm_wtime();
        u = thread_cpu();
    }
    t = uly_comm_wtime();
    u = thread_cpu();
    if (!rc)
        rc = ovl_finish(D, OVL_OUT(D, K - 1));
    if (!rc)
        rc = ovl_tail(D, fwd, y1, y2);
    tout += uly_comm_wtime() - t;
    ovl_event(D, ULY_OVL_EV_FINISH, -1, -1, 0, t, uly_comm_wtime() - t, thread_cpu() - u);
    if (rc) /* leave nothing in flight */
        for (int i = 0; i < 4; i++) {
            uly_comm_nb_free(&D->ovl.op[i].q);
            D->ovl.op[i].n = 0;
        }
    D->ovl.t_prog = A->wait + A->send + A->test;
    *t_in = tin;
    *t_attn = A->kernel - D->ovl.t_prog;
    *t_out = tout;
    return rc;
}

/* The chunked forward (fwd = 1) or backward as a whole: ovl_run, the
 * agreement on the kernels' status, and the phase times. */
static int ovl_call(uly_dist *D, int fwd, const void *x0, const void *x1, const void *x2, void *y0, void *y1,
                    void *y2)
{
    uly_dist_times *T = &D->times;
    uly_ovl_account *A = D->ovl.acc = fwd ? &T->fwd_acc : &T->bwd_acc;
    memset(A, 0, sizeof *A);
    int lrc = ULY_OK;
    const double t0 = D->ovl.t_call = uly_comm_wtime(), c0 = thread_cpu();
    int rc = (D->ovs.on ? ovs_run : ovl_run)(D, fwd, x0, x1, x2, y0, y1, y2, &lrc,
                                          fwd ? &T->fwd_a2a_in : &T->bwd_a2a_in, fwd ? &T->fwd_attn : &T->bwd_attn,
                                          fwd ? &T->fwd_a2a_out : &T->bwd_a2a_out);
    if (rc)
        return rc;
    const double t1 = uly_comm_wtime(), c1 = thread_cpu();
    rc = call_agree(D, fwd ? 11 : 12, lrc);
    const double t2 = uly_comm_wtime(), c2 = thread_cpu();
    ovl_event(D, ULY_OVL_EV_AGREE, -1, -1, 0, t1, t2 - t1, c2 - c1);
    A->wall = t2 - t0;
    A->wall_cpu = c2 - c0;
    A->end = mono_now();
    *(fwd ? &T->fwd_wall : &T->bwd_wall) = A->wall;
    *(fwd ? &T->fwd_progress : &T->bwd_progress) = D->ovl.t_prog;
    *(fwd ? &T->fwd_chunks : &T->bwd_chunks) = D->ovl.K;
    return rc;
}

int uly_dist_trace(uly_dist *D, uly_ovl_event *ev, size_t cap)
{
    if (!D)
        return uly_set_error(ULY_EINVAL, "distributed context is NULL");
    D->ovl.tr = ev;
    D->ovl.tr_cap = ev ? cap : 0;
    D->ovl.tr_n = 0;
    return ULY_OK;
}

size_t uly_dist_trace_count(const uly_dist *D)
{
    return D ? D->ovl.tr_n : 0;
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
    A->end = mono_now();
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
    int rc = call_agree_open(D, 1, local);
    if (rc)
        return rc;
    const int r = D->rank;
    if (ovl_use(D) && (rc = uly_comm_agree_end(D->c)))
        return rc;
    if (D->P == 1) { /* no communication: work on the caller's tensors */
        D->qh = (void *)q; D->kh = (void *)k; D->vh = (void *)v; D->oh = o;
    }
    D->ovl.fwd_chunked = ovl_use(D);
    if (D->ovl.fwd_chunked) {
        rc = ovl_call(D, 1, q, k, v, o, NULL, NULL);
        D->have_fwd = rc == ULY_OK;
        return rc;
    }
    double t0 = uly_comm_wtime(), c0 = thread_cpu();
    rc = a2a_seq_to_heads(D, ULY_A2A_Q, q, D->a.heads, D->part.hb, D->part.hc, D->qh);
    if (!rc)
        rc = a2a_seq_to_heads(D, ULY_A2A_K, k, D->a.kv_heads, D->part.kb, D->part.kc, D->kh);
    if (!rc)
        rc = a2a_seq_to_heads(D, ULY_A2A_V, v, D->a.kv_heads, D->part.kb, D->part.kc, D->vh);
    double t1 = uly_comm_wtime(), c1 = thread_cpu();
    int lrc = ULY_OK;
    if (!rc && D->part.hc[r] > 0) {
        uly_kernel_opts ko = local_opts(D);
        lrc = D->o.attn ? D->o.attn->fwd(D->o.attn->user, &D->a, &ko, D->qh, D->kh, D->vh, D->oh, D->lse)
                        : uly_attn_fwd(&D->a, &ko, D->qh, D->kh, D->vh, D->oh, D->lse);
    }
    if (rc)
        return rc;
    double t2 = uly_comm_wtime(), c2 = thread_cpu(), k2 = mono_now();
    rc = call_agree_open(D, 11, lrc); /* a failed local kernel stops every rank here */
    if (!rc)
        rc = a2a_heads_to_seq(D, ULY_A2A_O, D->oh, D->a.heads, D->part.hb, D->part.hc, o);
    double t3 = uly_comm_wtime();
    plain_account(&D->times.fwd_acc, t3 - t0, thread_cpu() - c0, t2 - t1, c2 - c1, k2);
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
    int rc = call_agree_open(D, 2, local);
    if (rc)
        return rc;
    const int r = D->rank;
    if (D->P == 1) {
        D->doh = (void *)dout; D->dqh = dq; D->dkh = dk; D->dvh = dv;
    }
    if (D->ovl.fwd_chunked) /* the head-side buffers are chunk by chunk */
        return (rc = uly_comm_agree_end(D->c)) ? rc : ovl_call(D, 0, dout, NULL, NULL, dq, dk, dv);
    double t0 = uly_comm_wtime(), c0 = thread_cpu();
    rc = a2a_seq_to_heads(D, ULY_A2A_DO, dout, D->a.heads, D->part.hb, D->part.hc, D->doh);
    double t1 = uly_comm_wtime(), c1 = thread_cpu();
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
    double t2 = uly_comm_wtime(), c2 = thread_cpu(), k2 = mono_now();
    rc = call_agree_open(D, 12, lrc);
    if (!rc)
        rc = a2a_heads_to_seq(D, ULY_A2A_DQ, D->dqh, D->a.heads, D->part.hb, D->part.hc, dq);
    if (!rc)
        rc = a2a_kv_grad(D, ULY_A2A_DK, D->dkh, dk);
    if (!rc)
        rc = a2a_kv_grad(D, ULY_A2A_DV, D->dvh, dv);
    double t3 = uly_comm_wtime();
    plain_account(&D->times.bwd_acc, t3 - t0, thread_cpu() - c0, t2 - t1, c2 - c1, k2);
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
