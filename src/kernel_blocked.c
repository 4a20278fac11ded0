/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kernel_blocked.c -- blocked ("flash-style") attention on OpenBLAS GEMMs
 * with OpenMP, forward and backward, fp32 and fp64.  The algorithm is in
 * kernel_blocked_impl.h (instantiated twice below); this file validates the
 * arguments, works out the block geometry and dispatches on the dtype.
 *
 * Extra memory: one workspace per thread of 2 bq bk + bq d + 2 bq elements
 * (forward) or 2 bq bk + max(bq, 4 bk) d + bq elements and 64 bytes
 * (backward), independent of N and of the heads.  Nothing N x N is
 * materialised.
 */
#include <cblas.h>
#include <math.h>
#include <stdatomic.h>
#include <limits.h>
#include <string.h>
#include <sched.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "config.h"
#include "internal.h"
#include "vexp.h"

/* Default block sizes (rows of Q and of K/V per block), forward and
 * backward apart, chosen by measurement (doc/performance.md): OpenBLAS
 * packs both operands of every GEMM call, so the K and V blocks are packed
 * once per query block and the Q block once per key block; taller blocks
 * amortise that, up to what stays in the L2 cache.  They depend neither on
 * the thread count nor on the SIMD level, so neither changes the bits. */
#define ULY_FWD_BQ 512
#define ULY_FWD_BK 256
#define ULY_BWD_BQ 256
#define ULY_BWD_BK 512

/* log2(e) and ln(2): the kernels work with scores in base 2 (vexp.h). */
#define BLK_LOG2E 1.44269504088896340736
#define BLK_LN2 0.693147180559945309417

struct blk_geom {
    int64_t bq, bk;        /* block sizes */
    int64_t nqb, nkb;      /* number of query / key blocks */
    int64_t hb, hq;        /* first global query head, query heads held */
    int64_t kvb, hk;       /* first global KV head, KV heads held */
    int64_t g;             /* query heads per KV head (global) */
    int64_t qoff, qrows;   /* query rows held: global positions [qoff, qoff + qrows) */
    int64_t koff, krows;   /* key rows held: global positions [koff, koff + krows) */
    double scale;          /* softmax scale (1/sqrt(d) unless set) */
    double scale2;         /* scale log2(e): the scores in base 2 */
    int threads;
    int expanded;
    int bwd_pass;          /* ULY_BWD_* as requested */
    int split;             /* backward, single pass: work items of one key block (blk_bwd_split) */
    long long split_stride; /* split: steps per unit + 1 (g x nqb + 1) */
    size_t slots_off;      /* backward: bytes into the workspace of the threads' progress slots */
    const uly_vops *vops;  /* SIMD level of the fp32 row operations */
    int fwd_zero_pass;     /* forward: S by beta = 0, P in place (uly_kernel_fwd_zero_pass) */
    size_t ws_per;         /* workspace elements per thread */
    size_t ws_bytes;       /* all threads */
    void (*progress)(void *user); /* uly_kernel_opts.progress */
    void *progress_user;
    void (*rows)(void *user, int event, int64_t end); /* uly_kernel_opts.rows */
    void *rows_user;
    int stream;            /* rows called block by block (one thread, in order) */
    int64_t *rows_seen;    /* (4) the last end given per event */
};

static int blk_thread_id(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Between blocks: the caller's progress hook, on thread 0 only. */
static void blk_progress(const struct blk_geom *G)
{
    if (G->progress && blk_thread_id() == 0)
        G->progress(G->progress_user);
}

/* The caller's rows hook: event `ev` for rows below end, once per larger end. */
static void blk_rows(const struct blk_geom *G, int ev, int64_t end)
{
    if (G->rows && end > G->rows_seen[ev]) {
        G->rows_seen[ev] = end;
        G->rows(G->rows_user, ev, end);
    }
}

/* The rows hook around a whole call: with block-by-block calls off, every
 * row is needed before the work starts (called by the calling thread). */
static void blk_rows_begin(const struct blk_geom *G)
{
    if (G->rows && !G->stream) {
        blk_rows(G, ULY_ROWS_NEED_Q, G->qrows);
        blk_rows(G, ULY_ROWS_NEED_K, G->krows);
    }
}

static void blk_rows_end(const struct blk_geom *G, int fwd)
{
    blk_rows(G, ULY_ROWS_DONE_Q, G->qrows);
    if (!fwd)
        blk_rows(G, ULY_ROWS_DONE_K, G->krows);
}

/* The workspaces of all threads, one allocation (NULL with the message set). */
static void *blk_workspace(const struct blk_geom *G)
{
    void *ws = uly_malloc(G->ws_bytes);
    if (!ws)
        uly_set_error(ULY_ENOMEM, "blocked attention: cannot allocate %zu bytes of workspace", G->ws_bytes);
    return ws;
}

/* The forward's S = scale Q K^T as the BLAS's own beta = 0 zeroing pass
 * followed by P = 2^(S - m) in place (1), or (0, the default) with beta = 1
 * on an S that the exp pass leaves at +0 while it writes P to a buffer of
 * its own.  Same bits; the switch exists so that tests can prove it. */
static atomic_int fwd_zero_pass;

void uly_kernel_fwd_zero_pass(int on)
{
    atomic_store_explicit(&fwd_zero_pass, on ? 1 : 0, memory_order_relaxed);
}

/* Workspace elements per thread.  Forward: S, P (bq x bk each), O_acc (bq x d),
 * m, l (bq each).  Backward: S, dP (bq x bk each), then either dK, dV of
 * this head and folded (4 x bk x d) or dQ_acc (bq x d), then D (bq); the
 * threads' progress slots follow all threads' parts (geom_init). */
static int64_t blk_ws_fwd(int64_t bq, int64_t bk, int64_t d)
{
    return 2 * bq * bk + bq * d + 2 * bq;
}

static int64_t blk_ws_bwd(int64_t bq, int64_t bk, int64_t d)
{
    return 2 * bq * bk + (bq > 4 * bk ? bq : 4 * bk) * d + bq;
}

/* The query heads held, [*h_first, *h_end), that use local KV head kvl. */
static void blk_group_heads(const struct blk_geom *G, int64_t kvl, int64_t *h_first, int64_t *h_end)
{
    const int64_t kvg = G->kvb + kvl;
    *h_first = kvg * G->g;
    *h_end = (kvg + 1) * G->g;
    if (*h_first < G->hb)
        *h_first = G->hb;
    if (*h_end > G->hb + G->hq)
        *h_end = G->hb + G->hq;
}

/* The single pass (5 GEMMs per block pair) unless the two passes are asked
 * for: when its (batch, KV head) items are too few for the threads, their
 * key blocks are shared out instead (blk_bwd_split), so the two passes' 7
 * GEMMs per block pair are never needed for balance. */
static int blk_bwd_single(const struct blk_geom *G, int64_t items)
{
    if (G->bwd_pass != ULY_BWD_AUTO)
        return G->bwd_pass == ULY_BWD_SINGLE;
    return items >= 1;
}

/* Single pass with (batch, KV head, key block) work items instead of whole
 * (batch, KV head) ones: when the whole items would leave the busiest
 * thread more than 5/4 of an even share (e.g. one KV head on two threads).
 * Unit u (item u / nkb, key block u % nkb) runs on thread u mod T.  A key
 * block's dK, dV belong to its unit alone; its dQ updates wait for the
 * previous key block's, block row by block row (the threads' progress
 * slots), so every dQ block receives the same GEMMs in the same order as
 * with whole items: the same bits. */
static int blk_bwd_split(const struct blk_geom *G, int64_t items)
{
    if (G->threads < 2 || items < 1 || G->nkb < 2)
        return 0;
    const int64_t T = G->threads, per = (items + T - 1) / T;
    return 4 * per * T > 5 * items;
}

static int blk_team_size(void)
{
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

/* The progress slots of the split single pass: one atomic_llong per thread,
 * 64 bytes apart (a cache line each: no false sharing between the threads
 * publishing their steps). */
#define BLK_SLOT_BYTES 64
static size_t blk_slot_stride(void)
{
    return BLK_SLOT_BYTES / sizeof(atomic_llong);
}

/* Wait until a progress slot reaches at least `want`: spin briefly, then
 * yield the core (its owner may be descheduled on a loaded machine). */
static void blk_wait_for(atomic_llong *t, long long want)
{
    for (int spins = 0; atomic_load_explicit(t, memory_order_acquire) < want; spins++) {
        if (spins < 256) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        } else {
            sched_yield();
        }
    }
}

/* One step of a split unit (base = unit x stride) that does not touch its
 * dQ block: wait for the previous unit to be past it, then publish it. */
static void blk_step(atomic_llong *prev, atomic_llong *mine, long long base, long long stride, long long step)
{
    if (prev)
        blk_wait_for(prev, base - stride + step + 1);
    atomic_store_explicit(mine, base + step + 1, memory_order_release);
}

#define REAL float
#define GEMM cblas_sgemm
#define ROW_MAX(x, n) G->vops->row_max(x, n)
#define EXP2_SHIFT_SUM(x, n, s) G->vops->exp2_shift_sum(x, n, s)
#define EXP2_SHIFT_SUM_TO(x, p, n, s) G->vops->exp2_shift_sum_to(x, p, n, s)
#define DS_ROW(p, dp, n, D) G->vops->ds_row(p, dp, n, D)
#define EXP2_DS_ROW(x, dp, n, s, D) G->vops->exp2_ds_row(x, dp, n, s, D)
#define SFX(name) name##_f32
#include "kernel_blocked_impl.h"
#undef REAL
#undef GEMM
#undef ROW_MAX
#undef EXP2_SHIFT_SUM
#undef EXP2_SHIFT_SUM_TO
#undef DS_ROW
#undef EXP2_DS_ROW
#undef SFX

#define REAL double
#define GEMM cblas_dgemm
#define ROW_MAX uly_row_max_f64
#define EXP2_SHIFT_SUM uly_exp2_shift_sum_f64
#define EXP2_SHIFT_SUM_TO uly_exp2_shift_sum_to_f64
#define DS_ROW uly_ds_row_f64
#define EXP2_DS_ROW uly_exp2_ds_row_f64
#define SFX(name) name##_f64
#include "kernel_blocked_impl.h"
#undef REAL
#undef GEMM
#undef ROW_MAX
#undef EXP2_SHIFT_SUM
#undef EXP2_SHIFT_SUM_TO
#undef DS_ROW
#undef EXP2_DS_ROW
#undef SFX

/* The geometry of one forward (fwd = 1) or backward (fwd = 0) call. */
static int geom_init(const uly_attn_desc *a, const uly_kernel_opts *opts, int fwd, struct blk_geom *G)
{
    int rc = uly_attn_desc_check(a);
    if (rc)
        return rc;
    uly_kernel_opts def;
    memset(&def, 0, sizeof def);
    if (!opts)
        opts = &def;
    memset(G, 0, sizeof *G);
    G->bq = opts->block_q ? opts->block_q : fwd ? ULY_FWD_BQ : ULY_BWD_BQ;
    G->bk = opts->block_k ? opts->block_k : fwd ? ULY_FWD_BK : ULY_BWD_BK;
    if (G->bq < 1 || G->bk < 1 || G->bq > 65536 || G->bk > 65536)
        return uly_set_error(ULY_EINVAL, "block sizes must be in 1..65536 (got %lld x %lld)",
                             (long long)G->bq, (long long)G->bk);
    G->qoff = opts->q_begin;
    G->qrows = opts->q_count ? opts->q_count : a->seq;
    G->koff = opts->k_begin;
    G->krows = opts->k_count ? opts->k_count : a->seq;
    if (opts->q_count < 0 || G->qoff < 0 || G->qoff > a->seq - G->qrows || (!opts->q_count && G->qoff) ||
        opts->k_count < 0 || G->koff < 0 || G->koff > a->seq - G->krows || (!opts->k_count && G->koff))
        return uly_set_error(ULY_EINVAL,
                             "query rows [%lld, +%lld) or key rows [%lld, +%lld) outside the sequence of %lld",
                             (long long)opts->q_begin, (long long)opts->q_count, (long long)opts->k_begin,
                             (long long)opts->k_count, (long long)a->seq);
    if (G->bq > G->qrows)
        G->bq = G->qrows;
    if (G->bk > G->krows)
        G->bk = G->krows;
    G->g = a->heads / a->kv_heads;
    G->hb = opts->head_begin;
    G->hq = opts->head_count ? opts->head_count : a->heads;
    if (G->hb < 0 || G->hq < 0 || G->hb + G->hq > a->heads)
        return uly_set_error(ULY_EINVAL, "head range [%lld, %lld) is outside 0..%lld",
                             (long long)G->hb, (long long)(G->hb + G->hq), (long long)a->heads);
    uly_kv_range(a, G->hb, G->hq, &G->kvb, &G->hk);
    if (G->hq * a->head_dim > INT_MAX)
        return uly_set_error(ULY_EOVERFLOW, "heads x head_dim = %lld exceeds the BLAS int range",
                             (long long)(G->hq * a->head_dim));
    G->nqb = (G->qrows + G->bq - 1) / G->bq;
    G->nkb = (G->krows + G->bk - 1) / G->bk;
    G->scale = uly_attn_scale(a);
    G->scale2 = G->scale * BLK_LOG2E;
    G->expanded = opts->kv_expanded ? 1 : 0;
    if (opts->bwd_pass < ULY_BWD_AUTO || opts->bwd_pass > ULY_BWD_TWO)
        return uly_set_error(ULY_EINVAL, "unknown backward schedule %d", opts->bwd_pass);
    G->bwd_pass = opts->bwd_pass;
    G->fwd_zero_pass = atomic_load_explicit(&fwd_zero_pass, memory_order_relaxed);
    G->progress = opts->progress;
    G->progress_user = opts->progress_user;
    G->rows = opts->rows;
    G->rows_user = opts->rows_user;
    if (opts->threads < 0)
        return uly_set_error(ULY_EINVAL, "threads must be >= 0 (got %d)", opts->threads);
#ifdef _OPENMP
    G->threads = opts->threads > 0 ? opts->threads : omp_get_max_threads();
#else
    G->threads = 1;
#endif
    /* bq, bk <= 65536 and d <= the BLAS int range: no overflow in int64_t */
    G->ws_per = (size_t)(fwd ? blk_ws_fwd(G->bq, G->bk, a->head_dim) : blk_ws_bwd(G->bq, G->bk, a->head_dim));
    size_t per;
    if (uly_mul_size(G->ws_per, uly_dtype_size(a->dtype), &per) ||
        uly_mul_size(per, (size_t)G->threads, &G->ws_bytes))
        return uly_set_error(ULY_EOVERFLOW, "workspace size overflows");
    if (!fwd) {
        /* after every thread's workspace (rounded up to 64 bytes): one
         * progress slot per thread for the split single pass, whether used
         * or not, so that the size depends on the threads and the blocks
         * only, never on the heads or the sequence */
        size_t sb;
        if (uly_mul_size((size_t)G->threads, BLK_SLOT_BYTES, &sb) || G->ws_bytes > SIZE_MAX - 64 - sb)
            return uly_set_error(ULY_EOVERFLOW, "workspace size overflows");
        G->slots_off = (G->ws_bytes + 63) / 64 * 64;
        G->ws_bytes = G->slots_off + sb;
        const int64_t items = a->batch * G->hk, steps = G->g * G->nqb + 1;
        G->split = blk_bwd_single(G, items) && blk_bwd_split(G, items) &&
                   steps <= LLONG_MAX / 2 / (items * G->nkb); /* unit x stride fits */
        G->split_stride = steps;
    }
    return ULY_OK;
}

/* Our own OpenMP threads call BLAS; keep OpenBLAS single-threaded meanwhile. */
struct blas_threads { int saved; };

static void blas_enter(struct blas_threads *t)
{
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
    t->saved = openblas_get_num_threads();
    if (t->saved != 1)
        openblas_set_num_threads(1);
#else
    t->saved = 1;
#endif
}

static void blas_leave(const struct blas_threads *t)
{
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
    if (t->saved != 1)
        openblas_set_num_threads(t->saved);
#else
    (void)t;
#endif
}

int uly_attn_fwd(const uly_attn_desc *a, const uly_kernel_opts *opts,
                 const void *q, const void *k, const void *v, void *o, void *lse)
{
    struct blk_geom G;
    int rc = geom_init(a, opts, 1, &G);
    if (!rc)
        rc = uly_vops_current(&G.vops);
    if (rc)
        return rc;
    if (!q || !k || !v || !o || !lse)
        return uly_set_error(ULY_EINVAL, "blocked forward: NULL tensor");
    int64_t seen[4] = {0, 0, 0, 0};
    G.rows_seen = seen;
    G.stream = G.rows && G.threads == 1;
    struct blas_threads bt;
    blas_enter(&bt);
    if (a->dtype == ULY_F32)
        rc = fwd_f32(a, &G, q, k, v, o, lse);
    else
        rc = fwd_f64(a, &G, q, k, v, o, lse);
    blas_leave(&bt);
    return rc;
}

int uly_attn_bwd(const uly_attn_desc *a, const uly_kernel_opts *opts,
                 const void *q, const void *k, const void *v, const void *o,
                 const void *lse, const void *dout, void *dq, void *dk, void *dv)
{
    struct blk_geom G;
    int rc = geom_init(a, opts, 0, &G);
    if (!rc)
        rc = uly_vops_current(&G.vops);
    if (rc)
        return rc;
    if (!q || !k || !v || !o || !lse || !dout || !dq || !dk || !dv)
        return uly_set_error(ULY_EINVAL, "blocked backward: NULL tensor");
    int64_t seen[4] = {0, 0, 0, 0};
    G.rows_seen = seen;
    G.stream = G.rows && G.threads == 1 && blk_bwd_single(&G, a->batch * G.hk);
    struct blas_threads bt;
    blas_enter(&bt);
    if (a->dtype == ULY_F32)
        rc = bwd_f32(a, &G, q, k, v, o, lse, dout, dq, dk, dv);
    else
        rc = bwd_f64(a, &G, q, k, v, o, lse, dout, dq, dk, dv);
    blas_leave(&bt);
    return rc;
}

int uly_attn_bwd_schedule(const uly_attn_desc *a, const uly_kernel_opts *opts)
{
    struct blk_geom G;
    int rc = geom_init(a, opts, 0, &G);
    if (rc)
        return -rc;
    return blk_bwd_single(&G, a->batch * G.hk) ? ULY_BWD_SINGLE : ULY_BWD_TWO;
}

int uly_attn_workspace(const uly_attn_desc *a, const uly_kernel_opts *opts, size_t *bytes)
{
    struct blk_geom F, B;
    int rc = geom_init(a, opts, 1, &F);
    if (!rc)
        rc = geom_init(a, opts, 0, &B);
    if (rc)
        return rc;
    if (!bytes)
        return uly_set_error(ULY_EINVAL, "uly_attn_workspace: NULL result");
    *bytes = F.ws_bytes > B.ws_bytes ? F.ws_bytes : B.ws_bytes;
    return ULY_OK;
}

#define FOLD_BODY(T)                                                                    \
    do {                                                                                \
        const T *e = expanded;                                                          \
        T *f = folded;                                                                  \
        for (int64_t t = 0; t < tokens * a->batch; t++)                                 \
            for (int64_t hl = 0; hl < head_count; hl++) {                               \
                int64_t kvl = (head_begin + hl) / g - kvb;                              \
                const T *src = e + (t * head_count + hl) * d;                           \
                T *dst = f + (t * kvc + kvl) * d;                                       \
                if (hl == 0 || (head_begin + hl) / g != (head_begin + hl - 1) / g)      \
                    memcpy(dst, src, (size_t)d * sizeof(T));                            \
                else                                                                    \
                    for (int64_t c = 0; c < d; c++)                                     \
                        dst[c] += src[c];                                               \
            }                                                                           \
    } while (0)

int uly_kv_fold(const uly_attn_desc *a, int64_t head_begin, int64_t head_count,
                int64_t tokens, const void *expanded, void *folded)
{
    int rc = uly_attn_desc_check(a);
    if (rc)
        return rc;
    if (head_begin < 0 || head_count < 1 || head_begin + head_count > a->heads || tokens < 0)
        return uly_set_error(ULY_EINVAL, "kv fold: head range [%lld, %lld) or %lld tokens invalid",
                             (long long)head_begin, (long long)(head_begin + head_count),
                             (long long)tokens);
    const int64_t g = a->heads / a->kv_heads, d = a->head_dim;
    int64_t kvb, kvc;
    uly_kv_range(a, head_begin, head_count, &kvb, &kvc);
    if (a->dtype == ULY_F32)
        FOLD_BODY(float);
    else
        FOLD_BODY(double);
    return ULY_OK;
}
