/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_dist.c -- distributed Ulysses attention under mpirun (P = 1..4).
 *
 *  - each all-to-all alone in every mode (pack, datatype, pipeline, shm, cma),
 *    with integer-encoded elements (batch, token, head, dim) checked bit
 *    for bit, including replicated-KV folds; many shm all-to-alls back to
 *    back (the flags' buffer reuse);
 *  - forward + backward on P ranks bitwise equal to the single-process
 *    kernel (O, LSE, dQ, dK, dV), fp32 and fp64, and fp32 within tolerance
 *    of the fp64 reference;
 *  - measured bytes per rank == uly_plan_volume for every shape;
 *  - the large-count (MPI_Alltoallw) path, a plug-in local attention,
 *    mismatched configurations and a failing rank: every rank returns the
 *    same error, none hangs.
 * Runs with CK_FORK=no (forking after MPI_Init is unsafe); the wrapper
 * tests/test_dist.sh adds a timeout.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "ulysses_dist.h"

static int P, rank;

typedef struct shape {
    int64_t B, N, H, Hkv, d;
    int causal;
    int64_t window;
    int64_t docs;    /* packed documents per batch row (0: none) */
} shape;

static const shape shapes[] = {
    {1, 16, 4, 4, 8, 0, 0, 0},      /* even */
    {2, 1001, 7, 7, 16, 1, 0, 0},   /* H = 7, N = 1001, batch 2, causal */
    {2, 37, 7, 1, 8, 0, 5, 0},      /* MQA, window */
    {1, 50, 8, 2, 8, 1, 9, 0},      /* GQA, causal + window */
    {2, 23, 6, 3, 4, 0, 0, 0},      /* GQA, groups of 2 */
    {1, 3, 5, 5, 4, 1, 0, 0},       /* N < P: empty shards */
    {1, 10, 2, 1, 4, 0, 0, 0},      /* H < P: ranks without heads */
    {3, 19, 12, 4, 4, 1, 4, 0},
    {2, 1001, 7, 1, 8, 1, 0, 5}, /* MQA, causal, 5 packed documents */
    {2, 50, 8, 2, 8, 0, 9, 3},   /* GQA, window, 3 documents (one empty) */
};
#define NSHAPES (int)(sizeof shapes / sizeof shapes[0])

/* Document offsets of a shape: row b's documents get lengths from a fixed
 * pattern (the second one empty when D > 2), the same on every rank. */
static int64_t doc_store[64];

static uly_attn_desc desc_of(const shape *s, uly_dtype t)
{
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = s->B; a.seq = s->N; a.heads = s->H; a.kv_heads = s->Hkv; a.head_dim = s->d;
    a.causal = s->causal; a.window = s->window; a.dtype = t;
    if (s->docs) {
        for (int64_t b = 0; b < s->B; b++) {
            int64_t *o = doc_store + b * (s->docs + 1);
            o[0] = 0;
            for (int64_t i = 1; i < s->docs; i++)
                o[i] = i == 2 ? o[1] : o[i - 1] + (s->N * (2 + (i + b) % 3)) / (3 * s->docs);
            o[s->docs] = s->N;
        }
        a.doc_offsets = doc_store;
        a.docs = s->docs;
    }
    return a;
}

/* Copy tokens [t0, t0+n) of a (B, N, Hx, d) tensor into (B, n, Hx, d). */
static void *slice_tokens(const void *full, const uly_attn_desc *a, int64_t Hx, int64_t t0, int64_t n)
{
    const size_t es = uly_dtype_size(a->dtype), row = (size_t)(Hx * a->head_dim) * es;
    char *out = malloc((size_t)(a->batch * n) * row + 1);
    for (int64_t b = 0; b < a->batch; b++)
        memcpy(out + (size_t)(b * n) * row, (const char *)full + (size_t)(b * a->seq + t0) * row,
               (size_t)n * row);
    return out;
}

static int same_tokens(const void *full, const void *part, const uly_attn_desc *a, int64_t Hx,
                       int64_t t0, int64_t n)
{
    void *s = slice_tokens(full, a, Hx, t0, n);
    const size_t es = uly_dtype_size(a->dtype);
    int same = memcmp(s, part, (size_t)(a->batch * n * Hx * a->head_dim) * es) == 0;
    free(s);
    return same;
}

static double code(const uly_attn_desc *a, int64_t Hx, int64_t b, int64_t t, int64_t h, int64_t c)
{
    return (double)(((b * a->seq + t) * Hx + h) * a->head_dim + c + 1);
}

/* Fill (B, n, Hx, d) with codes of (b, t0 + t, h0 + h, c). */
static double *encoded(const uly_attn_desc *a, int64_t Hcode, int64_t t0, int64_t n, int64_t h0, int64_t hn)
{
    double *x = malloc((size_t)(a->batch * n * hn * a->head_dim) * sizeof(double) + 8);
    for (int64_t b = 0; b < a->batch; b++)
        for (int64_t t = 0; t < n; t++)
            for (int64_t h = 0; h < hn; h++)
                for (int64_t c = 0; c < a->head_dim; c++)
                    x[((b * n + t) * hn + h) * a->head_dim + c] = code(a, Hcode, b, t0 + t, h0 + h, c);
    return x;
}

/* The KV gradient all-to-all's output on this rank's tokens [t0, +n): the
 * sum over each KV head's query heads of their codes when KV is replicated
 * (in was coded per query head), the KV head's own codes otherwise. */
static void check_kv_grad(const uly_attn_desc *a, const double *out, int64_t t0, int64_t n, int rep, const char *what)
{
    const int64_t B = a->batch, d = a->head_dim, H = a->heads, Hkv = a->kv_heads, g = H / Hkv;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < n; t++)
            for (int64_t kh = 0; kh < Hkv; kh++)
                for (int64_t c = 0; c < d; c++) {
                    double want = 0;
                    if (rep)
                        for (int64_t h = kh * g; h < (kh + 1) * g; h++)
                            want += code(a, H, b, t0 + t, h, c);
                    else
                        want = code(a, Hkv, b, t0 + t, kh, c);
                    ck_assert_msg(out[((b * n + t) * Hkv + kh) * d + c] == want,
                                  "rank %d: %s element (%lld,%lld,%lld,%lld) is %g, want %g", rank, what,
                                  (long long)b, (long long)t, (long long)kh, (long long)c,
                                  out[((b * n + t) * Hkv + kh) * d + c], want);
                }
}

/* The all-to-all modes the loop tests go through (_i % NMODES). */
static const int test_modes[] = {ULY_A2A_PACK, ULY_A2A_DATATYPE, ULY_A2A_PIPELINE, ULY_A2A_SHM, ULY_A2A_CMA};
#define NMODES (int)(sizeof test_modes / sizeof test_modes[0])

/* A context over MPI_COMM_WORLD for shape s in fp64 (*a set), all-to-all mode `mode`. */
static uly_dist *dist_f64(const shape *s, int mode, uly_attn_desc *a)
{
    *a = desc_of(s, ULY_F64);
    uly_dist_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.a2a_mode = mode;
    uly_dist *D = NULL;
    ck_assert_int_eq(uly_dist_create(MPI_COMM_WORLD, a, &opts, &D), ULY_OK);
    return D;
}

/* Test hook of the library (comm.c): every cross-memory read of this
 * process fails with errno e (0: they run normally). */
void uly_test_cma_errno(int e);

/* The mode a context asked for `mode` runs: cma falls back to shm (on every
 * rank, with a note) where the system forbids cross-memory attach. */
static int mode_run(const uly_dist *D, int mode)
{
    return mode == ULY_A2A_CMA && uly_dist_a2a_note(D) ? ULY_A2A_SHM : mode;
}

/* This rank's tokens [t0, +n), query heads [h0, +hn) and KV heads [k0, +kn). */
static void ranges_of(const uly_dist *D, const uly_attn_desc *a, int64_t *t0, int64_t *n, int64_t *h0, int64_t *hn,
                      int64_t *k0, int64_t *kn)
{
    uly_dist_shard(D, t0, n);
    uly_dist_heads(D, h0, hn);
    uly_kv_range(a, *h0, *hn, k0, kn);
}

/* The Q all-to-all of shapes[0] in fp64 under one mode (the shm and cma
 * failure tests): the context, this rank's coded sequence shard seq
 * (B, n, H, d), the head side want it must become (B, N, hn, d), and a
 * buffer of each size (head, back). */
typedef struct q_case {
    uly_attn_desc a;
    uly_dist *D;
    size_t seq_bytes, head_bytes;
    double *seq, *want, *head, *back;
} q_case;

static void q_case_open(q_case *x, int mode)
{
    x->D = dist_f64(&shapes[0], mode, &x->a);
    int64_t t0, n, h0, hn, k0, kn;
    ranges_of(x->D, &x->a, &t0, &n, &h0, &hn, &k0, &kn);
    const int64_t B = x->a.batch, N = x->a.seq, d = x->a.head_dim, H = x->a.heads;
    x->seq_bytes = (size_t)(B * n * H * d) * sizeof(double);
    x->head_bytes = (size_t)(B * N * hn * d) * sizeof(double);
    x->seq = encoded(&x->a, H, t0, n, 0, H);
    x->want = encoded(&x->a, H, 0, N, h0, hn);
    x->head = malloc(x->head_bytes + 8);
    x->back = malloc(x->seq_bytes + 8);
    ck_assert(x->seq && x->want && x->head && x->back);
}

static void q_case_close(q_case *x)
{
    free(x->seq); free(x->want); free(x->head); free(x->back);
    uly_dist_free(x->D);
}

START_TEST(a2a_integer_encoded)
{
    /* every shape, in pack, datatype, pipelined and shared-memory mode (_i % NMODES),
     * the head side in buffers of the caller's */
    uly_attn_desc a;
    uly_dist *D = dist_f64(&shapes[_i / NMODES], test_modes[_i % NMODES], &a);
    int64_t t0, n, h0, hn, k0, kn;
    ranges_of(D, &a, &t0, &n, &h0, &hn, &k0, &kn);
    const int64_t B = a.batch, N = a.seq, d = a.head_dim, H = a.heads, Hkv = a.kv_heads;
    const int rep = uly_plan_kv_replicated(&a, P);
    /* sequence -> heads for Q and K */
    for (int w = 0; w < 2; w++) {
        int64_t Hx = w ? Hkv : H, hb = w ? k0 : h0, hc = w ? kn : hn;
        double *in = encoded(&a, Hx, t0, n, 0, Hx);
        double *out = malloc((size_t)(B * N * hc * d) * sizeof(double) + 8);
        ck_assert_int_eq(uly_dist_a2a(D, w ? ULY_A2A_K : ULY_A2A_Q, in, out), ULY_OK);
        double *want = encoded(&a, Hx, 0, N, hb, hc);
        ck_assert_msg(memcmp(out, want, (size_t)(B * N * hc * d) * sizeof(double)) == 0,
                      "rank %d: %s all-to-all misplaced elements", rank, w ? "K" : "Q");
        free(in); free(out); free(want);
    }
    /* heads -> sequence for O */
    {
        double *in = encoded(&a, H, 0, N, h0, hn);
        double *out = malloc((size_t)(B * n * H * d) * sizeof(double) + 8);
        ck_assert_int_eq(uly_dist_a2a(D, ULY_A2A_O, in, out), ULY_OK);
        double *want = encoded(&a, H, t0, n, 0, H);
        ck_assert_msg(memcmp(out, want, (size_t)(B * n * H * d) * sizeof(double)) == 0,
                      "rank %d: O all-to-all misplaced elements", rank);
        free(in); free(out); free(want);
    }
    /* KV gradients: per query head and folded when replicated, per KV head otherwise */
    {
        double *in = rep ? encoded(&a, H, 0, N, h0, hn) : encoded(&a, Hkv, 0, N, k0, kn);
        double *out = malloc((size_t)(B * n * Hkv * d) * sizeof(double) + 8);
        ck_assert_int_eq(uly_dist_a2a(D, ULY_A2A_DK, in, out), ULY_OK);
        check_kv_grad(&a, out, t0, n, rep, "dK");
        free(in); free(out);
    }
    uly_dist_free(D);
}
END_TEST

/* Overlap of the next check_dist calls (ULY_OVERLAP_*) and its chunk count. */
static int g_overlap, g_chunks;

/* Shapes where every rank of 2-4 holds at least two KV heads (chunked overlap). */
static const shape ovl_shapes[] = {
    {2, 203, 17, 17, 8, 1, 0, 0},   /* uneven H and N, causal: 4-5 heads per rank, uneven chunks */
    {1, 77, 16, 8, 8, 0, 13, 0},    /* GQA groups of 2, window; P = 3 cuts a group (replicated KV) */
    {2, 61, 18, 6, 4, 1, 7, 4},     /* GQA groups of 3, causal + window, 4 documents, replicated KV */
    {3, 40, 8, 8, 16, 0, 0, 0},     /* batch 3, no mask */
    {1, 5, 12, 4, 4, 1, 0, 0},      /* N close to P */
    {2, 3, 8, 8, 4, 1, 0, 0},       /* N < P: a source with an empty shard, batch 2 (staged) */
    {1, 130, 8, 8, 8, 0, 0, 3},     /* blocks straddle uneven shards, 3 documents, received in place */
};
#define NOVL (int)(sizeof ovl_shapes / sizeof ovl_shapes[0])

/* The chunk count the overlapped path must use for shape a on P ranks. */
static int expected_chunks(const uly_attn_desc *a)
{
    int64_t K = g_chunks ? g_chunks : ULY_OVERLAP_MAX_CHUNKS;
    for (int s = 0; s < P; s++) {
        int64_t hb, hc, kb, kc;
        uly_split(a->heads, P, s, &hb, &hc);
        uly_kv_range(a, hb, hc, &kb, &kc);
        if (kc < K)
            K = kc;
    }
    return P > 1 && g_overlap != ULY_OVERLAP_OFF && K >= 2 ? (int)K : 1;
}

/* The account of one call (uly_ovl_account): the hooks' times are parts of
 * the kernel's, the kernel's of the call's; at most max_waits waits (one per
 * tensor and source, the own one excepted), none on the plain path; block
 * copies timed only on the chunked path through the shared window (window:
 * the head-side buffers are in one, every rank on one node), where every
 * rank copies (its own rows at least). */
static void check_account(const uly_ovl_account *A, int chunks, int max_waits, int window)
{
    const double eps = 1e-9;
    ck_assert(A->wall >= 0 && A->kernel >= 0 && A->wait >= 0 && A->send >= 0 && A->test >= 0);
    ck_assert(A->wall + eps >= A->kernel);
    ck_assert(A->kernel + eps >= A->wait + A->send + A->test);
    ck_assert(A->wait + eps >= A->wait_ready && A->wait + eps >= A->wait_first && A->wait + eps >= A->wait_max);
    ck_assert_int_le(A->waits_ready, A->waits);
    ck_assert_int_le(A->waits, max_waits);
    ck_assert(A->end >= A->kernel_end);
    if (chunks == 1)
        ck_assert(A->wait == 0 && A->send == 0 && A->test == 0 && A->waits == 0);
    ck_assert(A->copy >= 0 && A->copy_cpu >= 0 && A->wall + eps >= A->copy);
    if (chunks > 1 && window)
        ck_assert_msg(A->copy > 0 && A->test == 0, "rank %d: the chunked path did not go through the window", rank);
    else
        ck_assert_msg(A->copy == 0, "rank %d: block copies timed outside the window's chunked path", rank);
}

/* Forward + backward on P ranks vs the single-process kernel (bitwise) and
 * vs the fp64 reference (fp32, tolerance), and the byte counters.  With
 * g_overlap on, a second forward + backward runs with overlap switched off
 * (uly_dist_set_overlap) and must give the same bits. */
static void check_dist(const shape *s, uly_dtype t, size_t max_count, const uly_local_attn *plug, int mode)
{
    uly_attn_desc a = desc_of(s, t);
    tu_problem p;
    tu_problem_init(&p, &a, (uint64_t)(s->N + 3 * s->H + s->Hkv));
    const size_t es = uly_dtype_size(t);
    void *q = malloc(p.nq * es), *k = malloc(p.nkv * es), *v = malloc(p.nkv * es), *dout = malloc(p.nq * es);
    tu_convert(p.q, q, p.nq, t); tu_convert(p.k, k, p.nkv, t);
    tu_convert(p.v, v, p.nkv, t); tu_convert(p.dout, dout, p.nq, t);
    /* single process, full tensors */
    void *o1 = malloc(p.nq * es), *lse1 = malloc(p.nlse * es), *dq1 = malloc(p.nq * es);
    void *dk1 = malloc(p.nkv * es), *dv1 = malloc(p.nkv * es);
    uly_kernel_opts ko;
    memset(&ko, 0, sizeof ko);
    ko.block_q = 16;
    ko.block_k = 32;
    ck_assert_int_eq(uly_attn_fwd(&a, &ko, q, k, v, o1, lse1), ULY_OK);
    ck_assert_int_eq(uly_attn_bwd(&a, &ko, q, k, v, o1, lse1, dout, dq1, dk1, dv1), ULY_OK);
    /* P ranks */
    uly_dist_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.kernel = ko;
    opts.kernel.threads = 1 + rank % 2; /* thread count must not matter */
    opts.max_count = max_count;
    opts.attn = plug;
    opts.a2a_mode = mode;
    opts.overlap = g_overlap;
    opts.overlap_chunks = g_chunks;
    uly_dist *D;
    ck_assert_int_eq(uly_dist_create(MPI_COMM_WORLD, &a, &opts, &D), ULY_OK);
    ck_assert_int_eq(uly_dist_overlap_chunks(D), expected_chunks(&a));
    int64_t t0, n, h0, hn;
    uly_dist_shard(D, &t0, &n);
    uly_dist_heads(D, &h0, &hn);
    void *qs = slice_tokens(q, &a, a.heads, t0, n), *ks = slice_tokens(k, &a, a.kv_heads, t0, n);
    void *vs = slice_tokens(v, &a, a.kv_heads, t0, n), *ds = slice_tokens(dout, &a, a.heads, t0, n);
    void *o = malloc((size_t)(a.batch * n * a.heads * a.head_dim) * es + 1);
    void *dq = malloc((size_t)(a.batch * n * a.heads * a.head_dim) * es + 1);
    void *dk = malloc((size_t)(a.batch * n * a.kv_heads * a.head_dim) * es + 1);
    void *dv = malloc((size_t)(a.batch * n * a.kv_heads * a.head_dim) * es + 1);
    for (int pass = 0; pass < (g_overlap ? 2 : 1); pass++) {
    if (pass) {
        ck_assert_int_eq(uly_dist_set_overlap(D, ULY_OVERLAP_OFF), ULY_OK);
        uly_dist_reset_volume(D);
        memset(o, 0xff, (size_t)(a.batch * n * a.heads * a.head_dim) * es);
    }
    uly_ovl_event ev[512];
    ck_assert_int_eq(uly_dist_trace(D, ev, 512), ULY_OK);
    ck_assert_int_eq(uly_dist_fwd(D, qs, ks, vs, o), ULY_OK);
    ck_assert_int_eq(uly_dist_bwd(D, ds, dq, dk, dv), ULY_OK);
    {
        uly_dist_times tm;
        uly_dist_times_get(D, &tm);
        const int want = pass ? 1 : expected_chunks(&a);
        ck_assert_int_eq(tm.fwd_chunks, want);
        ck_assert_int_eq(tm.bwd_chunks, want);
        ck_assert(tm.fwd_wall >= tm.fwd_attn && tm.bwd_wall >= tm.bwd_attn);
        const int window = mode == ULY_A2A_SHM || mode == ULY_A2A_CMA || mode == ULY_A2A_AUTO;
        check_account(&tm.fwd_acc, want, want > 1 && !plug ? 3 * (P - 1) * want : 0, window);
        check_account(&tm.bwd_acc, want, want > 1 && !plug ? (P - 1) * want : 0, window);
        /* the trace: one event per wait, one kernel event per chunk, in time order per kind */
        const size_t ne = uly_dist_trace_count(D);
        ck_assert_uint_le(ne, 512);
        int waits = 0, kernels = 0;
        for (size_t i = 0; i < ne; i++) {
            ck_assert(ev[i].wall >= 0 && ev[i].start >= 0 && ev[i].cpu >= 0);
            waits += ev[i].kind == ULY_OVL_EV_WAIT;
            kernels += ev[i].kind == ULY_OVL_EV_KERNEL;
            if (ev[i].kind == ULY_OVL_EV_WAIT)
                ck_assert(ev[i].peer >= 0 && ev[i].peer < P && ev[i].peer != rank && ev[i].chunk >= 0 &&
                          ev[i].chunk < want && (ev[i].fwd ? ev[i].which == ULY_A2A_Q || ev[i].which == ULY_A2A_K ||
                                                                 ev[i].which == ULY_A2A_V
                                                           : ev[i].which == ULY_A2A_DO));
        }
        ck_assert_int_eq(waits, tm.fwd_acc.waits + tm.bwd_acc.waits);
        ck_assert_int_eq(kernels, want > 1 ? 2 * want : 0); /* the plain path records nothing */
        ck_assert_int_eq(uly_dist_trace(D, NULL, 0), ULY_OK);
    }
    const char *tn = t == ULY_F32 ? "fp32" : "fp64";
    ck_assert_msg(same_tokens(o1, o, &a, a.heads, t0, n), "%s rank %d/%d: O not bitwise equal (N=%lld H=%lld Hkv=%lld)",
                  tn, rank, P, (long long)a.seq, (long long)a.heads, (long long)a.kv_heads);
    ck_assert_msg(same_tokens(dq1, dq, &a, a.heads, t0, n), "%s rank %d/%d: dQ not bitwise equal", tn, rank, P);
    ck_assert_msg(same_tokens(dk1, dk, &a, a.kv_heads, t0, n), "%s rank %d/%d: dK not bitwise equal", tn, rank, P);
    ck_assert_msg(same_tokens(dv1, dv, &a, a.kv_heads, t0, n), "%s rank %d/%d: dV not bitwise equal", tn, rank, P);
    const char *lse = uly_dist_lse(D);
    for (int64_t b = 0; b < a.batch && hn > 0; b++)
        ck_assert_msg(memcmp((const char *)lse1 + (size_t)((b * a.heads + h0) * a.seq) * es,
                             lse + (size_t)(b * hn * a.seq) * es, (size_t)(hn * a.seq) * es) == 0,
                      "%s rank %d/%d: LSE not bitwise equal", tn, rank, P);
    /* measured bytes == expected from the shape */
    uly_volume got, want;
    uly_dist_volume(D, &got);
    ck_assert_int_eq(uly_plan_volume(&a, P, rank, &want), ULY_OK);
    for (int w = 0; w < ULY_A2A_COUNT; w++) {
        ck_assert_msg(got.sent[w] == want.sent[w], "rank %d a2a %s: sent %llu bytes, expected %llu", rank,
                      uly_a2a_name(w), (unsigned long long)got.sent[w], (unsigned long long)want.sent[w]);
        ck_assert_msg(got.recv[w] == want.recv[w], "rank %d a2a %s: received %llu bytes, expected %llu",
                      rank, uly_a2a_name(w), (unsigned long long)got.recv[w], (unsigned long long)want.recv[w]);
    }
    /* fp32 within tolerance of the fp64 reference (on this rank's tokens) */
    if (t == ULY_F32 && a.seq <= 64) {
        for (size_t i = 0; i < p.nq; i++) {
            p.q[i] = tu_get(q, i, t);
            p.dout[i] = tu_get(dout, i, t);
        }
        for (size_t i = 0; i < p.nkv; i++) {
            p.k[i] = tu_get(k, i, t);
            p.v[i] = tu_get(v, i, t);
        }
        double *ro = malloc(p.nq * 8), *rdq = malloc(p.nq * 8), *rdk = malloc(p.nkv * 8), *rdv = malloc(p.nkv * 8);
        uly_attn_desc a64 = a;
        a64.dtype = ULY_F64;
        ck_assert_int_eq(uly_ref_fwd(&a64, p.q, p.k, p.v, ro, NULL), ULY_OK);
        ck_assert_int_eq(uly_ref_bwd(&a64, p.q, p.k, p.v, p.dout, rdq, rdk, rdv), ULY_OK);
        double *rs = slice_tokens(ro, &a64, a.heads, t0, n);
        double *rg = slice_tokens(rdq, &a64, a.heads, t0, n);
        char msg[512];
        ck_assert_msg(!tu_close(rs, o, t, (size_t)(a.batch * n * a.heads * a.head_dim), 3e-6, 3e-5, msg, sizeof msg),
                      "O vs reference: %s", msg);
        ck_assert_msg(!tu_close(rg, dq, t, (size_t)(a.batch * n * a.heads * a.head_dim), 2e-5, 2e-4, msg, sizeof msg),
                      "dQ vs reference: %s", msg);
        free(rs); free(rg);
        free(ro); free(rdq); free(rdk); free(rdv);
    }
    }
    uly_dist_free(D);
    free(qs); free(ks); free(vs); free(ds); free(o); free(dq); free(dk); free(dv);
    free(q); free(k); free(v); free(dout); free(o1); free(lse1); free(dq1); free(dk1); free(dv1);
    tu_problem_free(&p);
}

START_TEST(bitwise_f32) { check_dist(&shapes[_i], ULY_F32, 0, NULL, ULY_A2A_PACK); }
END_TEST

START_TEST(bitwise_f64) { check_dist(&shapes[_i], ULY_F64, 0, NULL, ULY_A2A_AUTO); }
END_TEST

START_TEST(datatype_mode)
{
    /* derived datatypes instead of our packing: same bits, same bytes */
    check_dist(&shapes[_i], ULY_F32, 0, NULL, ULY_A2A_DATATYPE);
}
END_TEST

START_TEST(large_count_path)
{
    /* blocks above 7 elements go through MPI_Alltoallw with chunked datatypes */
    check_dist(&shapes[_i], ULY_F32, 7, NULL, ULY_A2A_PACK);
}
END_TEST

/* A count limit that puts every block of shape s in several messages (at
 * least eight for a K/V block, more for Q's, never fewer than 7 elements
 * each; one message only where a block is under 7 elements) without making
 * thousands of them: each pipelined message is a request and a transport
 * fragment, and with N = 1001 and a limit of 7 the 4-rank run posted some
 * 7000 per all-to-all, minutes per test in the sanitizer build on a loaded
 * machine (slow, not stuck: the ranks moved on between stack dumps). */
static size_t several_messages(const shape *s)
{
    const int64_t block = s->B * ((s->N + P - 1) / P) * ((s->Hkv + P - 1) / P) * s->d; /* the smaller side */
    const int64_t lim = block / 8;
    return lim > 7 ? (size_t)lim : 7;
}

START_TEST(pipeline_mode)
{
    /* per-peer non-blocking messages with overlapped pack/unpack: same bits, same bytes;
     * odd _i with a count limit (every block in several messages) */
    const shape *s = &shapes[_i / 2];
    check_dist(s, ULY_F32, _i % 2 ? several_messages(s) : 0, NULL, ULY_A2A_PIPELINE);
}
END_TEST

long uly_test_alloc_count(void);
void uly_test_fail_alloc_at(long k);

/* The pipelined mode's request tables come with the context: an all-to-all
 * allocates nothing, so no rank can fail an allocation after the call's
 * agreement while its peers have posted their messages (a one-rank
 * allocation failure there left the peers waiting for ever).  Every kind,
 * with every block in several messages (several_messages' count limit). */
START_TEST(pipeline_allocates_nothing)
{
    const shape *s = &shapes[_i];
    uly_attn_desc a = desc_of(s, ULY_F32);
    uly_dist_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.a2a_mode = ULY_A2A_PIPELINE;
    opts.max_count = several_messages(s);
    uly_dist *D = NULL;
    ck_assert_int_eq(uly_dist_create(MPI_COMM_WORLD, &a, &opts, &D), ULY_OK);
    const size_t big = (size_t)(a.batch * a.seq * a.heads * a.head_dim) + 1;
    float *in = calloc(big, sizeof *in), *out = calloc(big, sizeof *out);
    ck_assert_ptr_nonnull(in);
    ck_assert_ptr_nonnull(out);
    for (int w = 0; w < ULY_A2A_COUNT; w++) {
        uly_test_fail_alloc_at(0); /* resets the count */
        ck_assert_int_eq(uly_dist_a2a(D, w, in, out), ULY_OK);
        ck_assert_msg(uly_test_alloc_count() == 0, "all-to-all %s allocated %ld times", uly_a2a_name(w),
                      uly_test_alloc_count());
    }
    free(in);
    free(out);
    uly_dist_free(D);
}
END_TEST

/*
 * The shared-memory mode through the context's own head-side buffers (the
 * path of the forward and backward, where peers write and read them
 * directly): every kind, every element in place (integer-encoded), and the
 * bytes counted are the plan's.  Every shape.
 */
START_TEST(shm_head_buffers)
{
    /* _i < NSHAPES: shm; then cma (pulls out of the peers' memory) */
    const int mode = _i < NSHAPES ? ULY_A2A_SHM : ULY_A2A_CMA;
    uly_attn_desc a;
    uly_dist *D = dist_f64(&shapes[_i % NSHAPES], mode, &a);
    if (P == 1) { /* the forward works on the caller's tensors: no buffers of its own */
        ck_assert_ptr_null(uly_dist_head_buffer(D, ULY_A2A_Q));
        uly_dist_free(D);
        return;
    }
    ck_assert_ptr_null(uly_dist_head_buffer(D, ULY_A2A_COUNT));
    int64_t t0, n, h0, hn, k0, kn;
    ranges_of(D, &a, &t0, &n, &h0, &hn, &k0, &kn);
    const int64_t B = a.batch, N = a.seq, d = a.head_dim, H = a.heads, Hkv = a.kv_heads;
    const int rep = uly_plan_kv_replicated(&a, P);
    for (int w = 0; w < ULY_A2A_COUNT; w++) {
        const int to_heads = w == ULY_A2A_Q || w == ULY_A2A_K || w == ULY_A2A_V || w == ULY_A2A_DO;
        const int grad = w == ULY_A2A_DK || w == ULY_A2A_DV;
        const int kv = w == ULY_A2A_K || w == ULY_A2A_V || (grad && !rep);
        const int64_t Hx = kv ? Hkv : H, hb = kv ? k0 : h0, hc = kv ? kn : hn;
        const size_t hbytes = (size_t)(B * N * hc * d) * sizeof(double);
        double *buf = uly_dist_head_buffer(D, w);
        ck_assert_ptr_nonnull(buf);
        if (to_heads) {
            double *in = encoded(&a, Hx, t0, n, 0, Hx), *want = encoded(&a, Hx, 0, N, hb, hc);
            memset(buf, 0, hbytes);
            ck_assert_int_eq(uly_dist_a2a(D, w, in, buf), ULY_OK);
            ck_assert_msg(memcmp(buf, want, hbytes) == 0, "rank %d: %s all-to-all misplaced elements", rank,
                          uly_a2a_name(w));
            free(in); free(want);
        } else {
            double *src = encoded(&a, Hx, 0, N, hb, hc);
            double *out = malloc((size_t)(B * n * (grad ? Hkv : H) * d) * sizeof(double) + 8);
            memcpy(buf, src, hbytes);
            ck_assert_int_eq(uly_dist_a2a(D, w, buf, out), ULY_OK);
            if (grad)
                check_kv_grad(&a, out, t0, n, rep, uly_a2a_name(w));
            else {
                double *want = encoded(&a, H, t0, n, 0, H);
                ck_assert_msg(memcmp(out, want, (size_t)(B * n * H * d) * sizeof(double)) == 0,
                              "rank %d: %s all-to-all misplaced elements", rank, uly_a2a_name(w));
                free(want);
            }
            free(src); free(out);
        }
    }
    uly_volume got, want;
    uly_dist_volume(D, &got);
    ck_assert_int_eq(uly_plan_volume(&a, P, rank, &want), ULY_OK);
    for (int w = 0; w < ULY_A2A_COUNT; w++)
        ck_assert_msg(got.sent[w] == want.sent[w] && got.recv[w] == want.recv[w],
                      "rank %d a2a %s: moved %llu / %llu bytes, the plan says %llu / %llu", rank, uly_a2a_name(w),
                      (unsigned long long)got.sent[w], (unsigned long long)got.recv[w],
                      (unsigned long long)want.sent[w], (unsigned long long)want.recv[w]);
    ck_assert_int_eq(uly_dist_a2a_mode(D, ULY_A2A_Q), mode_run(D, mode));
    ck_assert_str_eq(uly_a2a_mode_name(ULY_A2A_SHM), "shm");
    ck_assert_str_eq(uly_a2a_mode_name(ULY_A2A_CMA), "cma");
    uly_dist_free(D);
}
END_TEST

START_TEST(shm_mode)
{
    /* the shared-memory all-to-all: the same bits as one process in fp32
     * and fp64, every shape up to N = 64 (uneven N and H, N < P, H < P, GQA,
     * MQA, every mask, documents); the N = 1001 shapes' all-to-alls are
     * checked element by element in a2a_integer_encoded and shm_head_buffers */
    const int j = _i % (2 * NSHAPES); /* then the same with cma */
    if (shapes[j / 2].N > 64)
        return;
    check_dist(&shapes[j / 2], j % 2 ? ULY_F64 : ULY_F32, 0, NULL, _i < 2 * NSHAPES ? ULY_A2A_SHM : ULY_A2A_CMA);
}
END_TEST

START_TEST(shm_overlap)
{
    /* shared-memory mode with overlap on: the chunked path copies straight
     * into and out of the peers' chunk buffers in the window, the plain
     * pass runs shm; automatic chunks on even shapes, 2 on odd ones; fp32
     * in shm mode, fp64 in cma mode (the window path too) */
    g_overlap = ULY_OVERLAP_ON;
    g_chunks = _i % 2 ? 2 : 0;
    check_dist(&ovl_shapes[_i % NOVL], _i < NOVL ? ULY_F32 : ULY_F64, 0, NULL, _i < NOVL ? ULY_A2A_SHM : ULY_A2A_CMA);
    g_overlap = g_chunks = 0;
}
END_TEST

/*
 * Many shared-memory all-to-alls back to back, with no synchronisation of
 * the test's own in between: two contexts of different shapes, every kind
 * in a fixed pseudo-random order (the same on every rank), the head side
 * through the context's own buffers (written and read directly, right after
 * the previous call on that buffer returned) or through buffers of the
 * caller's.  Every element carries the call's number, so a peer that copied
 * too early (stale data) or too late (the next call's data, or a write into
 * a buffer its owner still reads) shows up bit for bit.
 */
static double *encoded_at(const uly_attn_desc *a, int64_t Hcode, int64_t t0, int64_t n, int64_t h0, int64_t hn,
                          double tag)
{
    double *x = encoded(a, Hcode, t0, n, h0, hn);
    for (int64_t i = 0; i < a->batch * n * hn * a->head_dim; i++)
        x[i] += tag;
    return x;
}

START_TEST(shm_back_to_back)
{
    if (P == 1)
        return;
    const int mode = _i ? ULY_A2A_CMA : ULY_A2A_SHM; /* cma: peers read the caller's tensors too */
    uly_attn_desc a[2];
    uly_dist *D[2] = {dist_f64(&shapes[1], mode, &a[0]), dist_f64(&shapes[4], mode, &a[1])};
    unsigned seed = 12345u;
    for (int it = 0; it < 120; it++) {
        seed = seed * 1103515245u + 12345u;
        const int x = (int)((seed >> 16) % 2), w = (int)((seed >> 8) % ULY_A2A_COUNT);
        const int own = (int)((seed >> 20) % 4) != 0; /* mostly the context's own buffers */
        const uly_attn_desc *ad = &a[x];
        int64_t t0, n, h0, hn, k0, kn;
        ranges_of(D[x], ad, &t0, &n, &h0, &hn, &k0, &kn);
        const int64_t B = ad->batch, N = ad->seq, d = ad->head_dim, H = ad->heads, Hkv = ad->kv_heads;
        const int rep = uly_plan_kv_replicated(ad, P);
        if ((w == ULY_A2A_DK || w == ULY_A2A_DV) && rep)
            continue; /* folded sums: covered by shm_head_buffers */
        const int to_heads = w == ULY_A2A_Q || w == ULY_A2A_K || w == ULY_A2A_V || w == ULY_A2A_DO;
        const int kv = w == ULY_A2A_K || w == ULY_A2A_V || w == ULY_A2A_DK || w == ULY_A2A_DV;
        const int64_t Hx = kv ? Hkv : H, hb = kv ? k0 : h0, hc = kv ? kn : hn;
        const size_t hbytes = (size_t)(B * N * hc * d) * sizeof(double), sbytes = (size_t)(B * n * Hx * d) * 8;
        const double tag = 1e6 * (it + 1);
        double *head = own ? uly_dist_head_buffer(D[x], w) : malloc(hbytes + 8);
        double *seq = malloc(sbytes + 8);
        if (to_heads) {
            double *in = encoded_at(ad, Hx, t0, n, 0, Hx, tag), *want = encoded_at(ad, Hx, 0, N, hb, hc, tag);
            ck_assert_int_eq(uly_dist_a2a(D[x], w, in, head), ULY_OK);
            ck_assert_msg(memcmp(head, want, hbytes) == 0, "rank %d call %d: %s all-to-all misplaced elements",
                          rank, it, uly_a2a_name(w));
            free(in); free(want);
        } else {
            double *src = encoded_at(ad, Hx, 0, N, hb, hc, tag), *want = encoded_at(ad, Hx, t0, n, 0, Hx, tag);
            memcpy(head, src, hbytes);
            ck_assert_int_eq(uly_dist_a2a(D[x], w, head, seq), ULY_OK);
            ck_assert_msg(memcmp(seq, want, sbytes) == 0, "rank %d call %d: %s all-to-all misplaced elements",
                          rank, it, uly_a2a_name(w));
            free(src); free(want);
        }
        if (!own)
            free(head);
        free(seq);
    }
    uly_dist_free(D[0]);
    uly_dist_free(D[1]);
}
END_TEST

/* Heads -> sequence exchanges large enough for the shm mode's streaming
 * copies (non-temporal stores, from 8 MiB per rank and call), with rows of
 * 129 doubles (not 16-byte multiples): the same bits as memcpy, through the
 * context's own buffer and through one of the caller's. */
START_TEST(shm_stream_copies)
{
    if (P == 1)
        return;
    const shape big = {1, 6001, 6, 6, 129, 0, 0, 0};
    uly_attn_desc a;
    uly_dist *D = dist_f64(&big, ULY_A2A_SHM, &a);
    int64_t t0, n, h0, hn, k0, kn;
    ranges_of(D, &a, &t0, &n, &h0, &hn, &k0, &kn);
    const int64_t N = a.seq, d = a.head_dim, H = a.heads;
    const size_t hbytes = (size_t)(N * hn * d) * sizeof(double), sbytes = (size_t)(n * H * d) * sizeof(double);
    double *want = encoded(&a, H, t0, n, 0, H), *out = malloc(sbytes + 8), *mine = malloc(hbytes + 8);
    /* sequence -> heads (streamed from 256 KiB per rank and call), into the
     * context's buffer and into one of the caller's */
    double *heads = encoded_at(&a, H, 0, N, h0, hn, 0);
    for (int k = 0; k < 2; k++) {
        double *dst = k ? mine : uly_dist_head_buffer(D, ULY_A2A_Q);
        memset(dst, 0xff, hbytes);
        ck_assert_int_eq(uly_dist_a2a(D, ULY_A2A_Q, want, dst), ULY_OK);
        ck_assert_msg(memcmp(dst, heads, hbytes) == 0, "rank %d: streamed Q all-to-all misplaced elements", rank);
    }
    free(heads);
    for (int k = 0; k < 2; k++) {
        const int w = k ? ULY_A2A_DQ : ULY_A2A_O;
        double *src = encoded_at(&a, H, 0, N, h0, hn, 0), *head = k ? mine : uly_dist_head_buffer(D, w);
        memcpy(head, src, hbytes);
        memset(out, 0xff, sbytes);
        ck_assert_int_eq(uly_dist_a2a(D, w, head, out), ULY_OK);
        ck_assert_msg(memcmp(out, want, sbytes) == 0, "rank %d: %s streamed all-to-all misplaced elements", rank,
                      uly_a2a_name(w));
        free(src);
    }
    free(want); free(out); free(mine);
    uly_dist_free(D);
}
END_TEST

/* Shared-memory mode, ranks that disagree on the all-to-all (rank 0 asks
 * for Q, the others for O) or with a NULL buffer on one rank: every rank
 * returns the error, none waits for a peer that will not come, and the
 * context works afterwards. */
START_TEST(shm_disagreement)
{
    if (P == 1)
        return;
    q_case x;
    q_case_open(&x, _i ? ULY_A2A_CMA : ULY_A2A_SHM);
    uly_dist *D = x.D;
    double *head = uly_dist_head_buffer(D, rank == 0 ? ULY_A2A_Q : ULY_A2A_O);
    const double t = MPI_Wtime();
    int rc = rank == 0 ? uly_dist_a2a(D, ULY_A2A_Q, x.seq, head) : uly_dist_a2a(D, ULY_A2A_O, head, x.back);
    ck_assert_int_eq(rc, ULY_EMISMATCH);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "operation"));
    rc = uly_dist_a2a(D, ULY_A2A_Q, rank == P - 1 ? NULL : x.seq, uly_dist_head_buffer(D, ULY_A2A_Q));
    if (x.seq_bytes > 0)
        ck_assert_int_eq(rc, rank == P - 1 ? ULY_EINVAL : ULY_EPEER);
    ck_assert(MPI_Wtime() - t < 10);
    /* and then a correct call */
    double *q = uly_dist_head_buffer(D, ULY_A2A_Q);
    ck_assert_int_eq(uly_dist_a2a(D, ULY_A2A_Q, x.seq, q), ULY_OK);
    ck_assert(memcmp(q, x.want, x.head_bytes) == 0);
    q_case_close(&x);
}
END_TEST

/* Cross-memory attach forbidden on one rank (as under a ptrace policy):
 * every rank runs shm instead, with the same note naming the failure, and
 * moves the right elements; auto leaves cma out the same way. */
START_TEST(cma_fallback)
{
    if (P == 1)
        return;
    for (int k = 0; k < 2; k++) {
        const int mode = k ? ULY_A2A_AUTO : ULY_A2A_CMA;
        if (rank == P - 1)
            uly_test_cma_errno(1); /* EPERM */
        q_case x;
        q_case_open(&x, mode);
        uly_dist *D = x.D;
        uly_test_cma_errno(0);
        const char *note = uly_dist_a2a_note(D);
        ck_assert_ptr_nonnull(note);
        char want_rank[32];
        snprintf(want_rank, sizeof want_rank, "on rank %d", P - 1);
        ck_assert_msg(strstr(note, "process_vm_readv") && strstr(note, want_rank), "rank %d: note '%s'", rank,
                      note);
        for (int c = 0; c < (ULY_A2A_MODES - 1) * ULY_A2A_AUTO_SAMPLES; c++) {
            ck_assert_int_eq(uly_dist_a2a(D, ULY_A2A_Q, x.seq, x.head), ULY_OK);
            ck_assert(memcmp(x.head, x.want, x.head_bytes) == 0);
            if (!k)
                break;
        }
        ck_assert_int_ne(uly_dist_a2a_mode(D, ULY_A2A_Q), ULY_A2A_CMA);
        if (!k)
            ck_assert_int_eq(uly_dist_a2a_mode(D, ULY_A2A_Q), ULY_A2A_SHM);
        q_case_close(&x);
    }
}
END_TEST

/* A cross-memory read failing in the middle of an all-to-all on one rank
 * (after the context found it working): that rank returns the failure,
 * every other rank ULY_EPEER with its message, none hangs, in both
 * directions; the next call works. */
START_TEST(cma_read_failure)
{
    if (P == 1)
        return;
    q_case x;
    q_case_open(&x, ULY_A2A_CMA);
    if (uly_dist_a2a_note(x.D)) { /* not allowed here: nothing to fail */
        q_case_close(&x);
        return;
    }
    uly_dist *D = x.D;
    const double t = MPI_Wtime();
    const int victim = 1 % P;
    for (int dir = 0; dir < 2; dir++) {
        if (rank == victim)
            uly_test_cma_errno(14); /* EFAULT */
        int rc = dir ? uly_dist_a2a(D, ULY_A2A_O, x.want, x.back) : uly_dist_a2a(D, ULY_A2A_Q, x.seq, x.head);
        uly_test_cma_errno(0);
        ck_assert_int_eq(rc, rank == victim ? ULY_EMPI : ULY_EPEER);
        ck_assert_msg(strstr(uly_last_error(), "process_vm_readv"), "rank %d: '%s'", rank, uly_last_error());
    }
    ck_assert(MPI_Wtime() - t < 10);
    ck_assert_int_eq(uly_dist_a2a(D, ULY_A2A_Q, x.seq, x.head), ULY_OK);
    ck_assert(memcmp(x.head, x.want, x.head_bytes) == 0);
    ck_assert_int_eq(uly_dist_a2a(D, ULY_A2A_O, x.head, x.back), ULY_OK);
    ck_assert(memcmp(x.back, x.seq, x.seq_bytes) == 0);
    q_case_close(&x);
}
END_TEST

/* The library's choice from auto's measured times (dist.c). */
int uly_test_auto_pick(const int *cand, int ncand, const double t[][ULY_A2A_AUTO_SAMPLES]);

/* auto's choice: the smallest median; a two-copy mode replaces the best of
 * shm and cma only when all its samples are faster than that mode's median
 * by more than the margin; one fast sample (or one slow sample of shm) does
 * not decide. */
START_TEST(auto_pick_rules)
{
    ck_assert_int_eq(ULY_A2A_AUTO_SAMPLES, 3);
    const int five[5] = {ULY_A2A_PACK, ULY_A2A_DATATYPE, ULY_A2A_PIPELINE, ULY_A2A_SHM, ULY_A2A_CMA};
    const double m = ULY_A2A_AUTO_MARGIN;
    /* pack, datatype, pipeline, shm, cma: medians 3, 1.6, 2, 1, 1.2 */
    double t[5][ULY_A2A_AUTO_SAMPLES] = {{3, 3, 3}, {1.6, 1.6, 1.6}, {2, 2, 2}, {1, 1, 1}, {1.2, 1.2, 1.2}};
    ck_assert_int_eq(uly_test_auto_pick(five, 5, t), ULY_A2A_SHM);
    /* one lucky datatype call, two slow shm calls of three: medians decide (shm) */
    t[1][0] = 0.2; t[3][1] = 5;
    ck_assert_int_eq(uly_test_auto_pick(five, 5, t), ULY_A2A_SHM);
    /* datatype faster, but within the margin: shm stays */
    t[1][0] = t[1][1] = t[1][2] = 1 - m / 2;
    ck_assert_int_eq(uly_test_auto_pick(five, 5, t), ULY_A2A_SHM);
    /* datatype faster by more than the margin: datatype */
    t[1][0] = t[1][1] = t[1][2] = 1 - 2 * m;
    ck_assert_int_eq(uly_test_auto_pick(five, 5, t), ULY_A2A_DATATYPE);
    /* its median decisive but one call of three within the margin (a late
     * rank, a noisy neighbour): not decisive, shm stays */
    t[1][2] = 1 - m / 2;
    ck_assert_int_eq(uly_test_auto_pick(five, 5, t), ULY_A2A_SHM);
    t[1][2] = 1 - 2 * m;
    /* cma the best single-copy mode: the margin is against cma */
    double u[5][ULY_A2A_AUTO_SAMPLES] = {{3, 3, 3}, {0.95, 0.95, 0.95}, {2, 2, 2}, {1.5, 1.5, 1.5}, {1, 1, 1}};
    ck_assert_int_eq(uly_test_auto_pick(five, 5, u), ULY_A2A_CMA);
    u[4][0] = u[4][1] = u[4][2] = 2;
    ck_assert_int_eq(uly_test_auto_pick(five, 5, u), ULY_A2A_DATATYPE);
    /* across nodes (no single-copy mode): the smallest median */
    ck_assert_int_eq(uly_test_auto_pick(five, 3, u), ULY_A2A_DATATYPE);
    u[2][1] = u[2][2] = 0.5;
    ck_assert_int_eq(uly_test_auto_pick(five, 3, u), ULY_A2A_PIPELINE);
}
END_TEST

/* The automatic mode measures every mode on its first calls of each kind,
 * then keeps one: every call moves the right elements, and every rank ends
 * with the same choice. */
START_TEST(auto_mode_calibrates)
{
    uly_attn_desc a;
    uly_dist *D = dist_f64(&shapes[3], ULY_A2A_AUTO, &a);
    int64_t t0, n, h0, hn;
    uly_dist_shard(D, &t0, &n);
    uly_dist_heads(D, &h0, &hn);
    const int64_t B = a.batch, N = a.seq, d = a.head_dim, H = a.heads;
    double *in = encoded(&a, H, t0, n, 0, H), *want = encoded(&a, H, 0, N, h0, hn);
    double *mid = malloc((size_t)(B * N * hn * d) * sizeof(double) + 8);
    double *back = malloc((size_t)(B * n * H * d) * sizeof(double) + 8);
    const int calls = (ULY_A2A_MODES - 1) * ULY_A2A_AUTO_SAMPLES + 2;
    for (int c = 0; c < calls; c++) {
        memset(mid, 0, (size_t)(B * N * hn * d) * sizeof(double));
        memset(back, 0, (size_t)(B * n * H * d) * sizeof(double));
        ck_assert_int_eq(uly_dist_a2a(D, ULY_A2A_Q, in, mid), ULY_OK);
        ck_assert_msg(memcmp(mid, want, (size_t)(B * N * hn * d) * sizeof(double)) == 0,
                      "rank %d call %d: Q all-to-all misplaced elements", rank, c);
        ck_assert_int_eq(uly_dist_a2a(D, ULY_A2A_O, mid, back), ULY_OK);
        ck_assert_msg(memcmp(back, in, (size_t)(B * n * H * d) * sizeof(double)) == 0,
                      "rank %d call %d: O all-to-all misplaced elements", rank, c);
        /* 5 modes measured on one node, 4 where cma is not allowed */
        if (c == (ULY_A2A_MODES - 1 - (uly_dist_a2a_note(D) != NULL)) * ULY_A2A_AUTO_SAMPLES - 2)
            ck_assert_int_eq(uly_dist_a2a_mode(D, ULY_A2A_Q), ULY_A2A_AUTO); /* still measuring */
    }
    int m[2] = {uly_dist_a2a_mode(D, ULY_A2A_Q), uly_dist_a2a_mode(D, ULY_A2A_O)}, lo[2], hi[2];
    if (P > 1) {
        ck_assert(m[0] >= ULY_A2A_PACK && m[0] < ULY_A2A_MODES);
        ck_assert(m[1] >= ULY_A2A_PACK && m[1] < ULY_A2A_MODES);
    }
    MPI_Allreduce(m, lo, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(m, hi, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    ck_assert_msg(lo[0] == hi[0] && lo[1] == hi[1], "ranks chose different all-to-all modes");
    ck_assert_int_eq(uly_dist_a2a_mode(D, ULY_A2A_K), ULY_A2A_AUTO); /* never called: undecided */
    ck_assert_str_eq(uly_a2a_mode_name(ULY_A2A_PIPELINE), "pipeline");
    free(in); free(want); free(mid); free(back);
    uly_dist_free(D);
}
END_TEST

static int plug_calls;
static int plug_fwd(void *user, const uly_attn_desc *a, const uly_kernel_opts *o, const void *q,
                    const void *k, const void *v, void *out, void *lse)
{
    (*(int *)user)++;
    return uly_attn_fwd(a, o, q, k, v, out, lse);
}
static int plug_bwd(void *user, const uly_attn_desc *a, const uly_kernel_opts *o, const void *q,
                    const void *k, const void *v, const void *out, const void *lse, const void *dout,
                    void *dq, void *dk, void *dv)
{
    (*(int *)user)++;
    return uly_attn_bwd(a, o, q, k, v, out, lse, dout, dq, dk, dv);
}

START_TEST(plugin_attention)
{
    uly_local_attn plug = {plug_fwd, plug_bwd, &plug_calls};
    plug_calls = 0;
    check_dist(&shapes[3], ULY_F32, 0, &plug, ULY_A2A_AUTO);
    int64_t hb, hc;
    uly_split(shapes[3].H, P, rank, &hb, &hc);
    ck_assert_int_eq(plug_calls, hc > 0 ? 2 : 0);
}
END_TEST

START_TEST(overlap_bitwise)
{
    /* chunked overlap with per-peer messages (pack mode: no window): the
     * same bits as one process and as the plain path, the same bytes: on
     * with automatic chunks (fp32), on with 2 chunks and a count limit of 7
     * elements (fp64, every message in pieces); then auto overlap in auto
     * mode (the window path on one node) */
    const int sh = _i / 3, var = _i % 3;
    g_overlap = var == 2 ? ULY_OVERLAP_AUTO : ULY_OVERLAP_ON;
    g_chunks = var == 1 ? 2 : 0;
    check_dist(&ovl_shapes[sh], var == 1 ? ULY_F64 : ULY_F32, var == 1 ? 7 : 0, NULL,
               var == 2 ? ULY_A2A_AUTO : ULY_A2A_PACK);
    g_overlap = g_chunks = 0;
}
END_TEST

START_TEST(overlap_every_shape)
{
    /* overlap on for the small shapes of the other tests: chunked where every
     * rank has two KV heads, the plain path otherwise (MQA, H < P, N < P) */
    if (shapes[_i].N > 64)
        return;
    g_overlap = ULY_OVERLAP_ON;
    check_dist(&shapes[_i], ULY_F32, 0, NULL, ULY_A2A_AUTO);
    g_overlap = 0;
}
END_TEST

/*
 * Integer-encoded exactness of the chunked path: a plug-in attention whose
 * results are integer functions of its inputs (fp64, exact), so that every
 * element shows whether it travelled to the right rank, head and token:
 *   O(t, h) = Q(t, h) + 2^20 K(t, kv(h)),  LSE(h, t) = Q(t, h, 0),
 *   dQ = dO + O,  dK(t, j) = sum of dO(t, h) over the query heads h of KV
 *   head j held (per query head with kv_expanded),  dV = 2 dK.
 */
static int enc_fwd(void *user, const uly_attn_desc *a, const uly_kernel_opts *o, const void *q_,
                   const void *k_, const void *v_, void *o_, void *lse_)
{
    (void)user; (void)v_;
    const double *q = q_, *k = k_;
    double *out = o_, *lse = lse_;
    const int64_t N = a->seq, d = a->head_dim, hq = o->head_count, g = a->heads / a->kv_heads;
    int64_t kb, kc;
    uly_kv_range(a, o->head_begin, hq, &kb, &kc);
    for (int64_t b = 0; b < a->batch; b++)
        for (int64_t t = 0; t < N; t++)
            for (int64_t h = 0; h < hq; h++) {
                const int64_t j = (o->head_begin + h) / g - kb;
                for (int64_t c = 0; c < d; c++)
                    out[((b * N + t) * hq + h) * d + c] =
                        q[((b * N + t) * hq + h) * d + c] + 1048576.0 * k[((b * N + t) * kc + j) * d + c];
                lse[(b * hq + h) * N + t] = q[((b * N + t) * hq + h) * d];
            }
    if (o->progress)
        o->progress(o->progress_user);
    return ULY_OK;
}

static int enc_bwd(void *user, const uly_attn_desc *a, const uly_kernel_opts *o, const void *q_,
                   const void *k_, const void *v_, const void *o_, const void *lse_, const void *do_, void *dq_,
                   void *dk_, void *dv_)
{
    (void)user; (void)q_; (void)k_; (void)v_; (void)lse_;
    const double *out = o_, *dout = do_;
    double *dq = dq_, *dk = dk_, *dv = dv_;
    const int64_t N = a->seq, d = a->head_dim, hq = o->head_count, g = a->heads / a->kv_heads;
    int64_t kb, kc;
    uly_kv_range(a, o->head_begin, hq, &kb, &kc);
    const int64_t hk = o->kv_expanded ? hq : kc;
    memset(dk, 0, (size_t)(a->batch * N * hk * d) * sizeof(double));
    for (int64_t b = 0; b < a->batch; b++)
        for (int64_t t = 0; t < N; t++)
            for (int64_t h = 0; h < hq; h++) {
                const int64_t j = o->kv_expanded ? h : (o->head_begin + h) / g - kb;
                for (int64_t c = 0; c < d; c++) {
                    const size_t x = (size_t)(((b * N + t) * hq + h) * d + c);
                    dq[x] = dout[x] + out[x];
                    dk[((b * N + t) * hk + j) * d + c] += dout[x];
                }
            }
    for (int64_t x = 0; x < a->batch * N * hk * d; x++)
        dv[x] = 2 * dk[x];
    return ULY_OK;
}

/* An assertion inside a loop over every element: Check records the location
 * of every passing ck_assert (a write to its message file per call), which
 * made these loops the slowest part of the suite; this asserts the same
 * condition, with the same message, and calls Check only when it fails. */
#define CHECK_EACH(cond, ...)                                                                                       \
    do {                                                                                                           \
        if (!(cond))                                                                                               \
            ck_abort_msg("Assertion '" #cond "' failed: " __VA_ARGS__);                                             \
    } while (0)

START_TEST(overlap_integer_encoded)
{
    /* per-peer messages (pack mode) on even _i / 2, the window (shm) on odd */
    const shape *s = &ovl_shapes[_i / 4];
    uly_attn_desc a = desc_of(s, ULY_F64);
    uly_local_attn plug = {enc_fwd, enc_bwd, NULL};
    uly_dist_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.attn = &plug;
    opts.overlap = ULY_OVERLAP_ON;
    opts.overlap_chunks = _i % 2 ? 2 : 0;
    opts.a2a_mode = (_i / 2) % 2 ? ULY_A2A_SHM : ULY_A2A_PACK;
    uly_dist *D;
    ck_assert_int_eq(uly_dist_create(MPI_COMM_WORLD, &a, &opts, &D), ULY_OK);
    int64_t t0, n, h0, hn;
    uly_dist_shard(D, &t0, &n);
    uly_dist_heads(D, &h0, &hn);
    const int64_t B = a.batch, d = a.head_dim, H = a.heads, Hkv = a.kv_heads, g = H / Hkv;
    double *q = encoded(&a, H, t0, n, 0, H), *k = encoded(&a, Hkv, t0, n, 0, Hkv), *v = encoded(&a, Hkv, t0, n, 0, Hkv);
    double *dout = encoded(&a, H, t0, n, 0, H);
    for (int64_t x = 0; x < B * n * H * d; x++)
        dout[x] += 0.5; /* dO differs from Q */
    double *o = malloc((size_t)(B * n * H * d) * 8 + 8), *dq = malloc((size_t)(B * n * H * d) * 8 + 8);
    double *dk = malloc((size_t)(B * n * Hkv * d) * 8 + 8), *dv = malloc((size_t)(B * n * Hkv * d) * 8 + 8);
    for (int pass = 0; pass < 2; pass++) { /* chunked, then the plain path */
        if (pass)
            ck_assert_int_eq(uly_dist_set_overlap(D, ULY_OVERLAP_OFF), ULY_OK);
        ck_assert_int_eq(uly_dist_fwd(D, q, k, v, o), ULY_OK);
        ck_assert_int_eq(uly_dist_bwd(D, dout, dq, dk, dv), ULY_OK);
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < n; t++)
                for (int64_t h = 0; h < H; h++)
                    for (int64_t c = 0; c < d; c++) {
                        const size_t x = (size_t)(((b * n + t) * H + h) * d + c);
                        const double wo = code(&a, H, b, t0 + t, h, c) + 1048576.0 * code(&a, Hkv, b, t0 + t, h / g, c);
                        CHECK_EACH(o[x] == wo, "pass %d rank %d: O(%lld,%lld,%lld,%lld) = %.17g, want %.17g", pass,
                                   rank, (long long)b, (long long)(t0 + t), (long long)h, (long long)c, o[x], wo);
                        CHECK_EACH(dq[x] == dout[x] + wo, "pass %d rank %d: dQ(%lld,%lld,%lld,%lld) wrong", pass,
                                   rank, (long long)b, (long long)(t0 + t), (long long)h, (long long)c);
                    }
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < n; t++)
                for (int64_t j = 0; j < Hkv; j++)
                    for (int64_t c = 0; c < d; c++) {
                        double w = 0;
                        for (int64_t h = j * g; h < (j + 1) * g; h++)
                            w += dout[((b * n + t) * H + h) * d + c];
                        const size_t x = (size_t)(((b * n + t) * Hkv + j) * d + c);
                        CHECK_EACH(dk[x] == w && dv[x] == 2 * w, "pass %d rank %d: dK/dV(%lld,%lld,%lld,%lld) = %.17g/%.17g, want %.17g",
                                   pass, rank, (long long)b, (long long)(t0 + t), (long long)j, (long long)c, dk[x], dv[x], w);
                    }
        const double *lse = uly_dist_lse(D);
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < hn; h++)
                for (int64_t t = 0; t < a.seq; t++)
                    CHECK_EACH(lse[(b * hn + h) * a.seq + t] == code(&a, H, b, t, h0 + h, 0),
                               "pass %d rank %d: LSE(%lld,%lld,%lld) wrong", pass, rank, (long long)b,
                               (long long)(h0 + h), (long long)t);
    }
    uly_dist_free(D);
    free(q); free(k); free(v); free(dout); free(o); free(dq); free(dk); free(dv);
}
END_TEST

START_TEST(overlap_options)
{
    /* bad options are refused on every rank; set_overlap needs a context
     * created with overlap; ranks that switch differently all get a mismatch */
    uly_attn_desc a = desc_of(&ovl_shapes[0], ULY_F32);
    uly_dist_opts opts;
    memset(&opts, 0, sizeof opts);
    uly_dist *D = NULL;
    opts.overlap = 3;
    ck_assert_int_eq(uly_dist_create(MPI_COMM_WORLD, &a, &opts, &D), ULY_EINVAL);
    opts.overlap = ULY_OVERLAP_ON;
    opts.overlap_chunks = ULY_OVERLAP_MAX_CHUNKS + 1;
    ck_assert_int_eq(uly_dist_create(MPI_COMM_WORLD, &a, &opts, &D), ULY_EINVAL);
    opts.overlap = ULY_OVERLAP_OFF;
    opts.overlap_chunks = 0;
    ck_assert_int_eq(uly_dist_create(MPI_COMM_WORLD, &a, &opts, &D), ULY_OK);
    ck_assert_int_eq(uly_dist_set_overlap(D, ULY_OVERLAP_ON), ULY_EINVAL);
    uly_dist_free(D);
    if (P < 2)
        return;
    opts.overlap = ULY_OVERLAP_ON;
    ck_assert_int_eq(uly_dist_create(MPI_COMM_WORLD, &a, &opts, &D), ULY_OK);
    ck_assert_int_eq(uly_dist_set_overlap(D, rank == 1 ? ULY_OVERLAP_OFF : ULY_OVERLAP_ON), ULY_OK);
    int64_t t0, n;
    uly_dist_shard(D, &t0, &n);
    float *x = calloc((size_t)(a.batch * n * a.heads * a.head_dim) + 1, sizeof(float));
    float *o = calloc((size_t)(a.batch * n * a.heads * a.head_dim) + 1, sizeof(float));
    ck_assert_int_eq(uly_dist_fwd(D, x, x, x, o), ULY_EMISMATCH);
    free(x); free(o);
    uly_dist_free(D);
}
END_TEST

START_TEST(mismatch_all_ranks_error)
{
    if (P == 1)
        return;
    uly_attn_desc a = desc_of(&shapes[0], ULY_F32);
    if (rank == P - 1)
        a.seq += 1;
    uly_dist *D = NULL;
    double t0 = MPI_Wtime();
    int rc = uly_dist_create(MPI_COMM_WORLD, &a, NULL, &D);
    ck_assert_int_eq(rc, ULY_EMISMATCH);
    ck_assert_ptr_null(D);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "sequence length"));
    /* dtype mismatch */
    a = desc_of(&shapes[0], rank == 0 ? ULY_F64 : ULY_F32);
    ck_assert_int_eq(uly_dist_create(MPI_COMM_WORLD, &a, NULL, &D), ULY_EMISMATCH);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "dtype"));
    /* documents whose content differs on one rank */
    {
        int64_t off[2][3] = {{0, 5, 16}, {0, 5, 16}};
        a = desc_of(&shapes[0], ULY_F32);
        a.doc_offsets = &off[0][0];
        a.docs = 2;
        if (rank == P - 1)
            off[0][1] = 6;
        ck_assert_int_eq(uly_dist_create(MPI_COMM_WORLD, &a, NULL, &D), ULY_EMISMATCH);
        ck_assert_ptr_nonnull(strstr(uly_last_error(), "document offsets"));
    }
    /* one rank with an invalid shape: it reports why, the others name it */
    a = desc_of(&shapes[0], ULY_F32);
    if (rank == 1)
        a.kv_heads = 3;
    rc = uly_dist_create(MPI_COMM_WORLD, &a, NULL, &D);
    if (rank == 1) {
        ck_assert_int_eq(rc, ULY_EINVAL);
    } else {
        ck_assert_int_eq(rc, ULY_EPEER);
        ck_assert_ptr_nonnull(strstr(uly_last_error(), "rank 1 failed"));
        ck_assert_ptr_nonnull(strstr(uly_last_error(), "multiple of kv-heads"));
    }
    ck_assert(MPI_Wtime() - t0 < 10);
}
END_TEST

START_TEST(failing_rank_stops_all)
{
    uly_attn_desc a = desc_of(&shapes[0], ULY_F32);
    uly_dist *D;
    ck_assert_int_eq(uly_dist_create(MPI_COMM_WORLD, &a, NULL, &D), ULY_OK);
    int64_t t0, n;
    uly_dist_shard(D, &t0, &n);
    size_t sz = (size_t)(a.batch * n * a.heads * a.head_dim) * sizeof(float) + 4;
    float *x = calloc(1, sz), *o = malloc(sz);
    /* rank 0 passes NULL; everyone returns, nobody enters the all-to-all */
    int rc = uly_dist_fwd(D, rank == 0 ? NULL : x, x, x, o);
    ck_assert_int_eq(rc, rank == 0 ? ULY_EINVAL : ULY_EPEER);
    /* backward without a successful forward is refused on every rank */
    rc = uly_dist_bwd(D, x, o, o, o);
    ck_assert_int_eq(rc, ULY_EINVAL);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "without a successful forward"));
    /* the context is still usable afterwards */
    ck_assert_int_eq(uly_dist_fwd(D, x, x, x, o), ULY_OK);
    free(x); free(o);
    uly_dist_free(D);
}
END_TEST

/* Fault injection hooks of src/error.c (exported for tests, not in the API). */
void uly_test_fail_alloc_at(long k);
long uly_test_alloc_count(void);

/* The last rank fails its k-th allocation in create, for every k: it returns
 * ULY_ENOMEM, every other rank ULY_EPEER naming it; nobody hangs or leaks. */
START_TEST(alloc_failure_stops_all)
{
    const shape *s = &shapes[3];
    uly_attn_desc a = desc_of(s, ULY_F32);
    const int victim = P - 1;
    uly_dist *D = NULL;
    uly_test_fail_alloc_at(0);
    ck_assert_int_eq(uly_dist_create(MPI_COMM_WORLD, &a, NULL, &D), ULY_OK);
    long n = uly_test_alloc_count();
    uly_dist_free(D);
    MPI_Bcast(&n, 1, MPI_LONG, victim, MPI_COMM_WORLD);
    for (long k = 1; k <= n; k++) {
        if (rank == victim)
            uly_test_fail_alloc_at(k);
        int rc = uly_dist_create(MPI_COMM_WORLD, &a, NULL, &D);
        uly_test_fail_alloc_at(0);
        ck_assert_ptr_null(D);
        if (rank == victim)
            ck_assert_msg(rc == ULY_ENOMEM, "allocation %ld: rank %d got %d", k, rank, rc);
        else {
            ck_assert_msg(rc == ULY_EPEER, "allocation %ld: rank %d got %d", k, rank, rc);
            ck_assert_ptr_nonnull(strstr(uly_last_error(), "cannot allocate"));
        }
    }
    /* the kernel's workspace failing inside a forward stops every rank too */
    ck_assert_int_eq(uly_dist_create(MPI_COMM_WORLD, &a, NULL, &D), ULY_OK);
    int64_t t0, nt;
    uly_dist_shard(D, &t0, &nt);
    size_t sz = (size_t)(a.batch * nt * a.heads * a.head_dim) * sizeof(float) + 4;
    float *x = calloc(1, sz), *o = malloc(sz);
    if (rank == victim)
        uly_test_fail_alloc_at(1);
    int rc = uly_dist_fwd(D, x, x, x, o);
    uly_test_fail_alloc_at(0);
    int64_t h0, hn;
    uly_split(a.heads, P, victim, &h0, &hn);
    if (hn > 0) /* the victim runs a kernel, so its allocation fails */
        ck_assert_int_eq(rc, rank == victim ? ULY_ENOMEM : ULY_EPEER);
    ck_assert_int_eq(uly_dist_fwd(D, x, x, x, o), ULY_OK);
    free(x); free(o);
    uly_dist_free(D);
}
END_TEST

/* The chunked path (window and per-peer messages) with the kernel's
 * workspace failing on one rank, in chunk 0 or 1 of the forward or of the
 * backward: that rank returns ULY_ENOMEM, every other ULY_EPEER, none waits
 * for a peer that gave up, and the context works afterwards. */
START_TEST(overlap_failure_stops_all)
{
    if (P == 1)
        return;
    const shape *s = &ovl_shapes[3]; /* 8 heads: 2 chunks on 4 ranks */
    uly_attn_desc a = desc_of(s, ULY_F32);
    uly_dist_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.overlap = ULY_OVERLAP_ON;
    opts.a2a_mode = _i % 2 ? ULY_A2A_PACK : ULY_A2A_SHM;
    uly_dist *D;
    ck_assert_int_eq(uly_dist_create(MPI_COMM_WORLD, &a, &opts, &D), ULY_OK);
    ck_assert_int_ge(uly_dist_overlap_chunks(D), 2);
    int64_t t0, n;
    uly_dist_shard(D, &t0, &n);
    const size_t sz = (size_t)(a.batch * n * a.heads * a.head_dim) * sizeof(float) + 4;
    float *x = calloc(1, sz), *o = malloc(sz), *g1 = malloc(sz), *g2 = malloc(sz), *g3 = malloc(sz);
    const int victim = P - 1, at = 1 + (_i / 2) % 2, bwd = _i >= 4;
    const double t = MPI_Wtime();
    if (bwd)
        ck_assert_int_eq(uly_dist_fwd(D, x, x, x, o), ULY_OK);
    if (rank == victim)
        uly_test_fail_alloc_at(at); /* the kernel of chunk at - 1 */
    int rc = bwd ? uly_dist_bwd(D, x, g1, g2, g3) : uly_dist_fwd(D, x, x, x, o);
    uly_test_fail_alloc_at(0);
    ck_assert_msg(rc == (rank == victim ? ULY_ENOMEM : ULY_EPEER), "rank %d: %s failure in chunk %d gave %d",
                  rank, bwd ? "backward" : "forward", at - 1, rc);
    ck_assert(MPI_Wtime() - t < 30);
    ck_assert_int_eq(uly_dist_fwd(D, x, x, x, o), ULY_OK);
    ck_assert_int_eq(uly_dist_bwd(D, x, g1, g2, g3), ULY_OK);
    free(x); free(o); free(g1); free(g2); free(g3);
    uly_dist_free(D);
}
END_TEST

/* The library's allocation byte counter (src/error.c) and window size (src/dist.c), for tests. */
uint64_t uly_test_alloc_bytes(void);
uint64_t uly_test_dist_window(const uly_dist *D);

/* Shapes of the memory tests: the usual ones with GQA, MQA, uneven N and H,
 * documents, and one whose ranks keep >= 2 KV heads (overlap chunks) with
 * KV groups cut on 3 ranks (replicated KV). */
static const shape mem_shapes[] = {
    {2, 37, 7, 1, 8, 0, 5, 0}, {2, 23, 6, 3, 4, 0, 0, 0}, {1, 10, 2, 1, 4, 0, 0, 0},
    {2, 50, 8, 2, 8, 0, 9, 3}, {2, 29, 16, 8, 4, 1, 0, 0}, {3, 19, 12, 4, 4, 1, 4, 0},
};
#define NMEM (int)(sizeof mem_shapes / sizeof mem_shapes[0])

/* Heap bytes the hooks counted during a create == the table's heap sum, and
 * the window segment == its window entries (0 without a window). */
static void check_memory(const char *what, const uly_bufs *t, uint64_t heap, uint64_t window)
{
    const uint64_t th = uly_bufs_sum(t, ULY_BUF_HEAP), tw = uly_bufs_sum(t, ULY_BUF_WINDOW);
    ck_assert_msg(th == heap, "%s, rank %d of %d: create asked the hooks for %llu bytes, the table says %llu",
                  what, rank, P, (unsigned long long)heap, (unsigned long long)th);
    ck_assert_msg(tw == window, "%s, rank %d of %d: window segment %llu bytes, the table says %llu", what, rank,
                  P, (unsigned long long)window, (unsigned long long)tw);
}

/* uly_dist_memory == what uly_dist_create allocates, every mode, overlap off and on. */
START_TEST(dist_memory_exact)
{
    const shape *s = &mem_shapes[_i];
    const uly_attn_desc a = desc_of(s, ULY_F32);
    static const int modes[] = {ULY_A2A_PACK, ULY_A2A_DATATYPE, ULY_A2A_PIPELINE, ULY_A2A_SHM, ULY_A2A_CMA,
                                ULY_A2A_AUTO};
    for (int m = 0; m < 6; m++)
        for (int ov = 0; ov < 2; ov++) {
            uly_dist_opts o;
            memset(&o, 0, sizeof o);
            o.a2a_mode = modes[m];
            o.overlap = ov ? ULY_OVERLAP_ON : ULY_OVERLAP_OFF;
            char what[96];
            snprintf(what, sizeof what, "shape %d, %s, overlap %d", _i, uly_a2a_mode_name(modes[m]), ov);
            uly_dist *D = NULL;
            uly_test_alloc_bytes();
            int rc = uly_dist_create(MPI_COMM_WORLD, &a, &o, &D);
            const uint64_t heap = uly_test_alloc_bytes();
            if (rc == ULY_EUNAVAIL) { /* no shared-memory window here: the same on every rank */
                if (rank == 0)
                    printf("%s: no shared-memory window (%s): skipped\n", what, uly_last_error());
                continue;
            }
            ck_assert_msg(rc == ULY_OK, "%s: %s", what, uly_last_error());
            const char *note = uly_dist_a2a_note(D);
            if (modes[m] == ULY_A2A_AUTO && note && strstr(note, "no shared-memory window")) {
                if (rank == 0)
                    printf("%s: %s: skipped\n", what, note);
                uly_dist_free(D);
                continue;
            }
            uly_bufs t = {0};
            ck_assert_int_eq(uly_dist_memory(&a, &o, P, rank, &t), ULY_OK);
            check_memory(what, &t, heap, uly_test_dist_window(D));
            ck_assert_int_eq(t.b[0].bytes > 0, 1);
            uly_dist_free(D);
        }
}
END_TEST

/* What glibc adds to a block (malloc_usable_size - the bytes asked for):
 * below 24 bytes from its heap, below a 4 KiB page for a block it maps. */
#define HEAP_ROUNDING 4112u

/* uly_sp_memory == what uly_sp_create allocates, every method (usp: every
 * degree, both placements), pack and shm all-to-alls, overlap off and on;
 * and the heap peak uly_heap_usage measures over the create is the table's
 * heap bytes plus at most the allocator's rounding of each block (less the
 * cross-memory probe table of 2P int64 that the create frees), and the
 * free gives every byte back. */
START_TEST(sp_memory_exact)
{
    const shape *s = &mem_shapes[_i];
    const uly_attn_desc a = desc_of(s, ULY_F32);
    for (int m = 0; m < ULY_METHOD_COUNT; m++)
        for (int U = 1; U <= P; U++) {
            if (m == ULY_METHOD_USP ? P % U != 0 : U > 1)
                continue;
            for (int pl = 0; pl < (m == ULY_METHOD_USP && U > 1 && U < P ? 2 : 1); pl++)
                for (int x = 0; x < 4; x++) {
                    uly_sp_opts o;
                    memset(&o, 0, sizeof o);
                    o.method = m;
                    o.ulysses_degree = m == ULY_METHOD_USP ? U : 0;
                    o.placement = pl;
                    o.dist.a2a_mode = x & 1 ? ULY_A2A_SHM : ULY_A2A_PACK;
                    o.dist.overlap = x & 2 ? ULY_OVERLAP_ON : ULY_OVERLAP_OFF;
                    char what[128];
                    snprintf(what, sizeof what, "shape %d, %s U=%d placement %d, %s, overlap %d", _i,
                             uly_method_name(m), U, pl, uly_a2a_mode_name(o.dist.a2a_mode), x >> 1);
                    uly_sp *S = NULL;
                    uint64_t live0 = 0, live1 = 0, peak = 0;
                    const int measured = uly_heap_usage(&live0, NULL) == ULY_OK;
                    uly_heap_reset_peak();
                    uly_test_alloc_bytes();
                    uly_test_fail_alloc_at(0); /* resets the count */
                    int rc = uly_sp_create(MPI_COMM_WORLD, &a, &o, &S);
                    const uint64_t heap = uly_test_alloc_bytes();
                    const long nalloc = uly_test_alloc_count();
                    uly_heap_usage(NULL, &peak);
                    if (rc == ULY_EUNAVAIL) {
                        if (rank == 0)
                            printf("%s: no shared-memory window (%s): skipped\n", what, uly_last_error());
                        continue;
                    }
                    ck_assert_msg(rc == ULY_OK, "%s: %s", what, uly_last_error());
                    uly_bufs t = {0};
                    ck_assert_int_eq(uly_sp_memory(&a, &o, P, rank, &t), ULY_OK);
                    check_memory(what, &t, heap, uly_test_dist_window(uly_sp_dist(S)));
                    const uint64_t th = uly_bufs_sum(&t, ULY_BUF_HEAP);
                    ck_assert_msg(!measured || (peak - live0 + 16 * (uint64_t)P >= th &&
                                                peak - live0 <= th + (uint64_t)nalloc * HEAP_ROUNDING),
                                  "%s, rank %d: measured heap peak %llu bytes over the create, the table %llu "
                                  "(%ld blocks)", what, rank, (unsigned long long)(peak - live0),
                                  (unsigned long long)th, nalloc);
                    uly_sp_free(S);
                    uly_heap_usage(&live1, NULL);
                    ck_assert_msg(live1 == live0, "%s, rank %d: %lld heap bytes left after the free", what, rank,
                                  (long long)(live1 - live0));
                }
        }
    /* bad arguments are refused by name */
    uly_bufs t = {0};
    uly_sp_opts o;
    memset(&o, 0, sizeof o);
    ck_assert_int_eq(uly_sp_memory(&a, &o, P, P, &t), ULY_EINVAL);
    o.method = ULY_METHOD_USP;
    o.ulysses_degree = P + 1;
    ck_assert_int_eq(uly_sp_memory(&a, &o, P, 0, &t), ULY_EINVAL);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "ulysses degree"));
    ck_assert_int_eq(uly_dist_memory(NULL, NULL, P, 0, &t), ULY_EINVAL);
    ck_assert_int_eq(t.n, 0);
}
END_TEST

static Suite *make_dist_suite(void)
{
    Suite *s = suite_create("dist");
    TCase *tc = tcase_create("a2a");
    tcase_add_loop_test(tc, a2a_integer_encoded, 0, NMODES * NSHAPES);
    tcase_add_loop_test(tc, shm_head_buffers, 0, 2 * NSHAPES);
    tcase_add_loop_test(tc, shm_back_to_back, 0, 2);
    tcase_add_test(tc, shm_stream_copies);
    tcase_add_test(tc, auto_mode_calibrates);
    tcase_add_test(tc, auto_pick_rules);
    tcase_add_loop_test(tc, dist_memory_exact, 0, NMEM);
    tcase_add_loop_test(tc, sp_memory_exact, 0, NMEM);
    suite_add_tcase(s, tc);
    TCase *te = tcase_create("exact");
    tcase_set_timeout(te, 0);
    tcase_add_loop_test(te, bitwise_f32, 0, NSHAPES);
    tcase_add_loop_test(te, bitwise_f64, 0, NSHAPES);
    tcase_add_loop_test(te, large_count_path, 2, 5);
    tcase_add_loop_test(te, datatype_mode, 0, NSHAPES);
    tcase_add_loop_test(te, pipeline_mode, 0, 2 * NSHAPES);
    tcase_add_loop_test(te, pipeline_allocates_nothing, 0, NSHAPES);
    tcase_add_loop_test(te, shm_mode, 0, 4 * NSHAPES);
    tcase_add_loop_test(te, shm_overlap, 0, 2 * NOVL);
    tcase_add_test(te, plugin_attention);
    tcase_add_loop_test(te, overlap_bitwise, 0, 3 * NOVL);
    tcase_add_loop_test(te, overlap_every_shape, 0, NSHAPES);
    tcase_add_loop_test(te, overlap_integer_encoded, 0, 4 * NOVL);
    tcase_add_test(te, overlap_options);
    suite_add_tcase(s, te);
    TCase *tf = tcase_create("failures");
    tcase_add_test(tf, mismatch_all_ranks_error);
    tcase_add_test(tf, failing_rank_stops_all);
    tcase_add_loop_test(tf, shm_disagreement, 0, 2);
    tcase_add_test(tf, cma_fallback);
    tcase_add_test(tf, cma_read_failure);
    tcase_add_test(tf, alloc_failure_stops_all);
    tcase_add_loop_test(tf, overlap_failure_stops_all, 0, 8);
    suite_add_tcase(s, tf);
    return s;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    SRunner *sr = srunner_create(make_dist_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, rank == 0 ? CK_NORMAL : CK_SILENT);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (failed)
        fprintf(stderr, "rank %d: %d failures\n", rank, failed);
    MPI_Finalize();
    return any ? EXIT_FAILURE : EXIT_SUCCESS;
}
