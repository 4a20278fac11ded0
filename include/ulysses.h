/*
 * ulysses.h -- public API of libulysses that does not need MPI.
 *
 * What is here: status codes, the attention problem description, the fp64
 * reference kernel (the oracle), the blocked ("flash-style") kernel in fp32
 * and fp64, the partition/plan math shared with the simulator, and the .npy
 * reader/writer.  The distributed (MPI) calls live in ulysses_dist.h.
 *
 * Tensor conventions (row-major, shapes in comments):
 *   Q, O, dQ, dO  (B, N, Hq, d)    Hq = query heads held by the caller
 *   K, V, dK, dV  (B, N, Hk, d)    Hk = key/value heads held by the caller
 *   LSE           (B, Hq, N)       log-sum-exp of the scaled, masked scores
 * Query head h (global index) uses KV head h / (H / Hkv).
 *
 * Every function returns a uly_status (0 on success).  On failure a one-line
 * description naming the problem is available from uly_last_error() in the
 * calling thread.  Nothing here exits or aborts.
 */
#ifndef ULYSSES_H
#define ULYSSES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ULY_VERSION_STRING "0.1.0"

/* ------------------------------------------------------------------ errors */

typedef enum uly_status {
    ULY_OK = 0,
    ULY_EINVAL,     /* invalid argument or shape */
    ULY_EOVERFLOW,  /* a size product does not fit in size_t / the type used */
    ULY_ENOMEM,     /* allocation failed */
    ULY_EIO,        /* a file could not be opened, read or written */
    ULY_EFORMAT,    /* a file is malformed (bad header, truncated, wrong dtype) */
    ULY_EMISMATCH,  /* ranks were called with different configurations */
    ULY_EMPI,       /* an MPI call failed */
    ULY_ENONFINITE, /* input contains NaN or Inf */
    ULY_EPEER,      /* another rank failed; this rank stopped with it */
    ULY_EUNAVAIL,   /* a resource the requested mode needs is not available (the
                       shared-memory window: /dev/shm space, address space);
                       the same on every rank, nothing of it left behind */
    ULY_NSTATUS
} uly_status;

/* Short fixed text for a status code ("invalid argument", ...). */
const char *uly_strerror(int status);
/* The detailed message of the last failure in this thread ("" if none). */
const char *uly_last_error(void);

/* Allocation through the library's hooks: what the library itself uses, so
 * that its fault injection (a test makes the k-th allocation fail) covers
 * drivers and local-attention plug-ins too.  Free with uly_free. */
void *uly_malloc(size_t n);
void *uly_calloc(size_t n, size_t size);
void uly_free(void *p);

/* ------------------------------------------------------------ description */

typedef enum uly_dtype { ULY_F32 = 0, ULY_F64 = 1 } uly_dtype;

/* Bytes per element of a dtype (4 or 8; 0 for an unknown dtype). */
size_t uly_dtype_size(uly_dtype t);

/*
 * The attention problem.  Masks:
 *   causal = 0, window = 0   every query sees every key
 *   causal = 1, window = 0   query i sees keys j <= i
 *   causal = 0, window = W   query i sees keys with |i - j| < W (local band)
 *   causal = 1, window = W   query i sees the W most recent keys, itself
 *                            included: i - W < j <= i
 */
typedef struct uly_attn_desc {
    int64_t batch;     /* B */
    int64_t seq;       /* N (queries and keys) */
    int64_t heads;     /* H query heads (global) */
    int64_t kv_heads;  /* Hkv key/value heads (global), H % Hkv == 0 */
    int64_t head_dim;  /* d */
    int causal;
    int64_t window;    /* 0: no window; else >= 1 */
    double scale;      /* 0: 1/sqrt(d) */
    uly_dtype dtype;   /* element type of the blocked kernel and of the distributed tensors */
    /* Packed documents.  NULL: one document per batch row.  Else
     * batch * (docs + 1) entries: row b's document i is the tokens
     * [off[b*(docs+1)+i], off[b*(docs+1)+i+1]); off[b*(docs+1)] == 0, the
     * entries are non-decreasing and off[b*(docs+1)+docs] == N.  Empty
     * documents (equal offsets) are allowed.  Query i sees key j only if both
     * are in the same document AND the causal/window mask allows (i, j). */
    const int64_t *doc_offsets;
    int64_t docs;      /* D, documents per row (0 when doc_offsets is NULL) */
} uly_attn_desc;

/* Validate a description: positive sizes, H % Hkv == 0, window >= 0, scale
 * finite, every tensor size (in bytes) representable in size_t, and the
 * document offsets (when given) well formed for every batch row. */
int uly_attn_desc_check(const uly_attn_desc *a);
/* The scale actually used (a->scale, or 1/sqrt(d) when it is 0). */
double uly_attn_scale(const uly_attn_desc *a);
/* Whether query i may attend to key j of batch row 0 under the mask of a. */
int uly_attn_visible(const uly_attn_desc *a, int64_t i, int64_t j);
/* The same for batch row b (documents differ per row). */
int uly_attn_visible_row(const uly_attn_desc *a, int64_t b, int64_t i, int64_t j);
/* Number of visible (query, key) pairs per head, averaged over the batch rows
 * (exact per row without documents): B * H * pairs is the FLOP base. */
double uly_attn_pairs(const uly_attn_desc *a);
/* Keys visible to query i of batch row b: the interval [*lo, *hi) (empty when
 * *lo >= *hi).  Both ends are non-decreasing in i within a row. */
void uly_attn_visible_keys(const uly_attn_desc *a, int64_t b, int64_t i, int64_t *lo, int64_t *hi);
/* Visible pairs of batch row b between queries [q0, q0 + nq) and keys
 * [k0, k0 + nk) (global positions).  O(nq log D). */
int64_t uly_attn_pairs_range(const uly_attn_desc *a, int64_t b, int64_t q0, int64_t nq, int64_t k0,
                             int64_t nk);
/* Whether any query of [q0, q0 + nq) sees any key of [k0, k0 + nk) in batch
 * row b.  O(log nq log D). */
int uly_attn_any_visible(const uly_attn_desc *a, int64_t b, int64_t q0, int64_t nq, int64_t k0,
                         int64_t nk);

/* ------------------------------------------------------- plan (pure math) */

/* Contiguous balanced split of n items into parts: part idx gets
 * n/parts + (idx < n % parts) items, starting at *begin. */
void uly_split(int64_t n, int parts, int idx, int64_t *begin, int64_t *count);

/* KV heads [*kv_begin, *kv_begin + *kv_count) needed by query heads
 * [head_begin, head_begin + head_count).  count 0 gives an empty range. */
void uly_kv_range(const uly_attn_desc *a, int64_t head_begin, int64_t head_count,
                  int64_t *kv_begin, int64_t *kv_count);

/* Whether splitting the H query heads over P ranks cuts some KV group, i.e.
 * some KV head is needed by more than one rank (it is then replicated and its
 * gradient comes back per query head, see doc/ulysses.md). */
int uly_plan_kv_replicated(const uly_attn_desc *a, int P);

/* The eight all-to-alls of one forward + backward, in order. */
enum { ULY_A2A_Q, ULY_A2A_K, ULY_A2A_V, ULY_A2A_O,
       ULY_A2A_DO, ULY_A2A_DQ, ULY_A2A_DK, ULY_A2A_DV, ULY_A2A_COUNT };
/* Name of an all-to-all ("q", "k", ..., "dv"). */
const char *uly_a2a_name(int which);

/* The other communication calls of the sequence-parallel methods (see
 * doc/methods.md); indices follow the eight all-to-alls. */
enum {
    ULY_RING_K = ULY_A2A_COUNT, ULY_RING_V, /* forward ring hops of K and V */
    ULY_RING_BK, ULY_RING_BV,               /* backward ring hops of K and V */
    ULY_RING_DK, ULY_RING_DV,               /* backward: dK, dV travelling with their shard,
                                               then returned to its owner */
    ULY_AG_K, ULY_AG_V,                     /* all-gather of K and V (forward) */
    ULY_RS_DK, ULY_RS_DV,                   /* reduce-scatter of dK and dV (backward) */
    ULY_VOL_COUNT
};
/* Name of any call ("q", ..., "dv", "ring-k", ..., "ag-k", "rs-dv"). */
const char *uly_vol_name(int which);
/* Whether call kind `which` belongs to the backward (dO, dQ, dK, dV
 * all-to-alls, the backward ring hops, the reduce-scatters). */
int uly_vol_backward(int which);

/* Bytes one rank sends to / receives from other ranks (itself excluded), per
 * call kind.  An all-gather counts the rank's block once per other rank
 * (sent) and the other ranks' blocks (received); a reduce-scatter the other
 * ranks' parts of its contribution (sent) and their contributions to its
 * part (received). */
typedef struct uly_volume {
    uint64_t sent[ULY_VOL_COUNT];
    uint64_t recv[ULY_VOL_COUNT];
} uly_volume;

/* Expected per-rank volume of the Ulysses all-to-alls for rank `rank` of P,
 * from the shape alone (uneven heads, uneven sequence and GQA included). */
int uly_plan_volume(const uly_attn_desc *a, int P, int rank, uly_volume *out);

/* Elements (not bytes) of the block rank src hands rank dst in all-to-all
 * `which` (ULY_A2A_Q..ULY_A2A_DV) of a Ulysses layer on P ranks; src == dst
 * gives the block that stays local.  uly_plan_volume sums these (times the
 * element size) over dst != rank, which is what the library's counters
 * measure; `ulysses explain` prints them as the P x P send matrix. */
int uly_plan_a2a_block(const uly_attn_desc *a, int P, int which, int src, int dst,
                       uint64_t *elems);

/* ------------------------------------- sequence-parallel methods (plan) */

/*
 * How P ranks share one attention (doc/methods.md):
 *   ulysses    all-to-all to head shards, whole sequence per head (U = P, R = 1)
 *   ring       contiguous shards; K, V travel around a ring of P (U = 1, R = P)
 *   zigzag     the ring on 2P chunks, rank j holding chunks j and 2P-1-j
 *   allgather  zigzag shards; K, V all-gathered, queries local (Llama 3 CP)
 *   usp        a U x R grid: Ulysses inside each group of U ranks, a zigzag
 *              ring across the R groups (P = U R, so P may exceed H)
 * Ring positions j = 0..R-1; group member u = 0..U-1.  Placement decides
 * which coordinate is contiguous in rank order.
 */
typedef enum uly_method {
    ULY_METHOD_ULYSSES = 0, ULY_METHOD_RING, ULY_METHOD_ZIGZAG, ULY_METHOD_ALLGATHER,
    ULY_METHOD_USP, ULY_METHOD_COUNT
} uly_method;

typedef enum uly_placement {
    ULY_PLACE_ULYSSES_INNER = 0, /* rank = j * U + u: each all-to-all group is U consecutive ranks */
    ULY_PLACE_RING_INNER = 1     /* rank = u * R + j: each ring is R consecutive ranks */
} uly_placement;

typedef struct uly_sp_plan {
    int method;     /* uly_method */
    int P;          /* ranks */
    int U;          /* Ulysses (all-to-all) degree */
    int R;          /* ring degree, P / U */
    int placement;  /* uly_placement (matters only when U > 1 and R > 1) */
    int zigzag;     /* ring chunks are pairs (j, 2R-1-j) of 2R chunks */
} uly_sp_plan;

/* Names: "ulysses", "ring", "zigzag", "allgather", "usp"; "ulysses-inner",
 * "ring-inner".  The parsers return ULY_EINVAL for an unknown name.  The
 * method parser also takes Megatron-Core's cp_comm_type names, as
 * ulysses-sim does: a2a (ulysses), p2p (zigzag), all_gather (allgather),
 * a2a+p2p (usp). */
const char *uly_method_name(int method);
int uly_method_parse(const char *name, int *method);
const char *uly_placement_name(int placement);
int uly_placement_parse(const char *name, int *placement);

/* Fill and validate a plan.  U: the Ulysses degree for usp (1 <= U <= P,
 * P % U == 0); for the other methods 0 or the value the method implies
 * (P for ulysses, 1 otherwise). */
int uly_sp_plan_init(uly_sp_plan *p, int method, int P, int U, int placement);

/* The Ulysses degree usp uses when none is given: the largest divisor of P
 * that is at most H (so every group member has a head). */
int uly_plan_usp_degree(int64_t H, int P);

/* The log-sum-exp a rank holds after the forward (uly_sp_lse): query heads
 * [*head_begin, +*head_count) of the token segments begin/count (returns
 * their number), laid out (B, head_count, rows), rows in segment order.
 * ulysses: its heads, all N tokens; usp: its heads (uly_plan_heads), the
 * tokens of its ring position's chunk; ring, zigzag, allgather: all heads,
 * its own tokens.  Over all ranks every (head, token) appears once. */
int uly_plan_lse_layout(const uly_sp_plan *p, int64_t N, int64_t H, int rank, int64_t *head_begin,
                        int64_t *head_count, int64_t begin[2], int64_t count[2]);

/* Grid coordinates of a rank (group member u, ring position j) and back. */
void uly_plan_grid(const uly_sp_plan *p, int rank, int *u, int *j);
int uly_plan_grid_rank(const uly_sp_plan *p, int u, int j);

/* Token segments (global positions) of ring position j: the sequence its
 * group holds after the all-to-all, rows in segment order.  Returns the
 * number of segments (1 or 2; a segment may be empty only when it is the
 * only one). */
int uly_plan_chunk(const uly_sp_plan *p, int64_t N, int j, int64_t begin[2], int64_t count[2]);
/* Token segments of rank `rank`'s input and output shards (B, n_r, H, d):
 * its group chunk split U ways (contiguously, first ranks one extra token). */
int uly_plan_tokens(const uly_sp_plan *p, int64_t N, int rank, int64_t begin[2], int64_t count[2]);
/* Query heads the rank computes: [*begin, *begin + *count). */
void uly_plan_heads(const uly_sp_plan *p, int64_t H, int rank, int64_t *begin, int64_t *count);

/* Ring: the position whose K, V shard ring position j processes at step t
 * (t = 0..R-1): (j - t) mod R. */
int uly_plan_ring_src(const uly_sp_plan *p, int j, int t);
/* Whether some query of ring position j sees some key of chunk `src` (in any
 * batch row).  Shards nobody needs are neither computed nor sent. */
int uly_plan_ring_need(const uly_attn_desc *a, const uly_sp_plan *p, int j, int src);
/* Whether ring position j holds the shard of step t, (j - t) mod R: its own
 * at t = 0, else when it or a later position on the shard's remaining path
 * needs it.  A hop j -> j+1 after step t happens iff hold(j+1, t+1). */
int uly_plan_ring_hold(const uly_attn_desc *a, const uly_sp_plan *p, int j, int t);
/* The ring position holding chunk src's shard (and its dK, dV) last; the
 * gradients go back from it to src when it is not src itself. */
int uly_plan_ring_last(const uly_attn_desc *a, const uly_sp_plan *p, int src);

/* Causal work of a rank at step t: visible (query, key) pairs between its
 * group's chunk and the keys it holds at that step, summed over the batch
 * rows; multiply by the rank's query heads for (head, query, key) triples.
 * Ulysses: the whole sequence at t = 0; all-gather: its own tokens against
 * every key at t = 0.  0 for steps beyond the method's last. */
double uly_plan_step_pairs(const uly_attn_desc *a, const uly_sp_plan *p, int rank, int t);
/* Steps of the method: R for the rings and usp, 1 otherwise. */
int uly_plan_steps(const uly_sp_plan *p);

/* Expected bytes sent / received by rank `rank` in one forward + backward,
 * per call kind, for every method (uneven N and H, GQA, KV replication and
 * documents included).  The library's counters measure the same quantities. */
int uly_plan_method_volume(const uly_attn_desc *a, const uly_sp_plan *p, int rank, uly_volume *out);
/* Bytes rank `rank` sends to its successor after step t for ring call kind
 * `which` (ULY_RING_K .. ULY_RING_DV; the final return of dK, dV to their
 * owner is counted at t = R-1). */
uint64_t uly_plan_ring_hop(const uly_attn_desc *a, const uly_sp_plan *p, int rank, int t, int which);

/* --------------------------------------------------------------- kernels */

/* Options of the blocked kernel; a NULL pointer means all defaults. */
typedef struct uly_kernel_opts {
    int64_t block_q;     /* query rows per block (0: default) */
    int64_t block_k;     /* key rows per block (0: default) */
    int threads;         /* OpenMP threads (0: the OpenMP default) */
    int64_t head_begin;  /* the tensors hold query heads [head_begin, head_begin + head_count) */
    int64_t head_count;  /* 0: all H heads (head_begin must be 0) */
    int kv_expanded;     /* backward: dK, dV per query head, (B, N, Hq, d), unsummed */
    /* A tile of the attention matrix (ring attention): the tensors hold query
     * rows at global positions [q_begin, q_begin + q_count) and key rows at
     * [k_begin, k_begin + k_count); masks and documents apply at global
     * positions.  Shapes become Q, O, dQ, dO (B, q_count, Hq, d), K, V, dK, dV
     * (B, k_count, Hk|Hq, d), LSE (B, Hq, q_count).  A count of 0 means the
     * whole sequence (its begin must be 0).  A query row that sees no key of
     * the tile gets O = 0, LSE = -inf and dQ = 0; merge tiles with
     * uly_attn_merge. */
    int64_t q_begin, q_count;
    int64_t k_begin, k_count;
    /* Backward schedule (same bits either way): ULY_BWD_AUTO picks by work
     * items vs threads, see doc/kernels.md. */
    int bwd_pass;
    /* Called between blocks of work by the thread that called the kernel
     * (OpenMP thread 0 of the kernel's team), e.g. to progress non-blocking
     * communication while the kernel runs (uly_dist's overlap); NULL: never.
     * It must not touch the kernel's tensors; the results do not depend on it. */
    void (*progress)(void *user);
    void *progress_user;
    /* Rows as they are needed and as they become final (uly_dist's overlap
     * waits for each source rank's piece only when the kernel reaches it):
     * rows(rows_user, ULY_ROWS_NEED_Q, end) before the kernel reads
     * query-side rows (Q, O, dO, LSE; tile-relative) below end for the first
     * time, ULY_ROWS_NEED_K before key-side rows (K, V) below end;
     * ULY_ROWS_DONE_Q once O and LSE (forward) or dQ (backward) rows below
     * end are final for every head, ULY_ROWS_DONE_K once dK, dV rows are.
     * Always called by the thread that called the kernel.  With one thread
     * (and the single-pass backward) the calls come block by block in the
     * kernel's fixed order; otherwise NEED comes once with the full row
     * counts before any work.  Every successful call ends with DONE for the
     * full counts.  Each call of an event has a larger end than the last
     * one of that event in the same kernel call; NULL: never called.
     * The kernel's order and blocks are the same with or without it, so the
     * results do not depend on it. */
    void (*rows)(void *user, int event, int64_t end);
    void *rows_user;
} uly_kernel_opts;

enum { ULY_ROWS_NEED_Q = 0, ULY_ROWS_NEED_K = 1, ULY_ROWS_DONE_Q = 2, ULY_ROWS_DONE_K = 3 };

enum { ULY_BWD_AUTO = 0,   /* single pass when the (batch, KV head) items keep the threads busy */
       ULY_BWD_SINGLE = 1, /* one KV-outer pass per (batch, KV head): 5 GEMMs per block pair */
       ULY_BWD_TWO = 2     /* KV pass + Q pass per block: 7 GEMMs per block pair */ };

/* The schedule uly_attn_bwd runs for these arguments: ULY_BWD_SINGLE or
 * ULY_BWD_TWO (or a negative -status when they are invalid). */
int uly_attn_bwd_schedule(const uly_attn_desc *a, const uly_kernel_opts *opts);

/* Bytes of workspace the blocked kernels allocate per call for these
 * arguments (all threads; the larger of forward and backward). */
int uly_attn_workspace(const uly_attn_desc *a, const uly_kernel_opts *opts, size_t *bytes);

/* The SIMD level of the kernels' element-wise parts (exp, row max and sum,
 * dS): "avx512", "avx2" or "baseline" -- the best this CPU runs, unless the
 * environment variable ULY_ISA or uly_kernel_set_isa chose one.  Every level
 * gives the same bits. */
const char *uly_kernel_isa(void);
/* Select a level by name ("auto": the best; ULY_EINVAL if unknown or not
 * supported by this CPU).  Process-wide; call it outside kernel calls. */
int uly_kernel_set_isa(const char *name);

/* Reference attention in double precision (full heads, O(N) extra memory).
 * q (B,N,H,d)  k,v (B,N,Hkv,d)  o (B,N,H,d)  lse (B,H,N), lse may be NULL. */
int uly_ref_fwd(const uly_attn_desc *a, const double *q, const double *k,
                const double *v, double *o, double *lse);
/* Reference backward: dq (B,N,H,d), dk, dv (B,N,Hkv,d). */
int uly_ref_bwd(const uly_attn_desc *a, const double *q, const double *k,
                const double *v, const double *dout, double *dq, double *dk,
                double *dv);

/* Blocked attention, element type a->dtype.  Pointers are float* or double*.
 * Forward writes o (B,N,Hq,d) and lse (B,Hq,N). */
int uly_attn_fwd(const uly_attn_desc *a, const uly_kernel_opts *opts,
                 const void *q, const void *k, const void *v, void *o, void *lse);
/* Backward from dout; needs o and lse of the forward.  dq (B,N,Hq,d);
 * dk, dv (B,N,Hk,d), or (B,N,Hq,d) with opts->kv_expanded.  Deterministic:
 * bitwise identical for every thread count and every head subset. */
int uly_attn_bwd(const uly_attn_desc *a, const uly_kernel_opts *opts,
                 const void *q, const void *k, const void *v, const void *o,
                 const void *lse, const void *dout, void *dq, void *dk, void *dv);

/* Merge the result of one more key tile into a running (O, LSE) over the
 * same query rows (element type t):
 *   LSE' = log(exp(LSE) + exp(LSE_t)),
 *   O'   = exp(LSE - LSE') O + exp(LSE_t - LSE') O_t
 * computed per row in double from m = max(LSE, LSE_t), so that it is exact
 * for -inf (a side with no visible key contributes nothing; both -inf keeps
 * O = 0, LSE = -inf).  o, o_t: (B, n, Hq, d); lse, lse_t: (B, Hq, n).
 * bf16: round O' to bfloat16 (round to nearest even) after the merge, as a
 * GPU ring storing its partials in bf16 does (LSE stays in full precision). */
int uly_attn_merge(uly_dtype t, int64_t batch, int64_t n, int64_t heads, int64_t head_dim, void *o,
                   void *lse, const void *o_t, const void *lse_t, int bf16);
/* Round every element of x to bfloat16 and back (round to nearest even). */
void uly_round_bf16(uly_dtype t, void *x, size_t count);

/* Sum expanded per-query-head KV gradients (B,N,H_sub,d) into per-KV-head
 * gradients (B,N,Hk,d), adding query heads in increasing order (left fold),
 * exactly as the kernel does it when kv_expanded is 0. */
int uly_kv_fold(const uly_attn_desc *a, int64_t head_begin, int64_t head_count,
                int64_t tokens, const void *expanded, void *folded);

/* ----------------------------------------------------------------- .npy */

#define ULY_NPY_MAXDIM 8

typedef struct uly_npy {
    uly_dtype dtype;                  /* float32 ('<f4') or float64 ('<f8') */
    int ndim;
    int64_t shape[ULY_NPY_MAXDIM];
    size_t count;                     /* elements */
    void *data;                       /* count elements, C order, owned */
} uly_npy;

/* Parse a complete .npy image held in memory (never reads past len). */
int uly_npy_parse(const void *buf, size_t len, uly_npy *out);
/* Read a whole .npy file (the streaming reader below, all elements). */
int uly_npy_read(const char *path, uly_npy *out);
/* Streaming read of a .npy file.  open checks that path is a regular file
 * (directories, FIFOs, devices and sockets are refused, ULY_EFORMAT, naming
 * the type), reads and checks the preamble and header and compares the data
 * size the header declares with the file's size, all before reading or
 * allocating anything of the data's size.  *header gets dtype, ndim, shape
 * and count (data NULL).  read copies elements [first, first + count) into
 * dst (host byte order).  A file that shrinks meanwhile gives ULY_EFORMAT. */
typedef struct uly_npy_reader uly_npy_reader;
int uly_npy_reader_open(const char *path, uly_npy *header, uly_npy_reader **r);
int uly_npy_reader_read(uly_npy_reader *r, size_t first, size_t count, void *dst);
void uly_npy_reader_close(uly_npy_reader *r);
/* Read a whole .npy file of 64-bit signed integers ('<i8'; e.g. document
 * offsets), with the checks of the streaming reader: *ndim, shape, *count
 * and *data (count elements, free with uly_free).  A float file is refused
 * (ULY_EFORMAT), as the float readers refuse '<i8'. */
int uly_npy_read_i64(const char *path, int *ndim, int64_t shape[ULY_NPY_MAXDIM], size_t *count,
                     int64_t **data);
/* Write a .npy file (format 1.0, C order, little-endian). */
int uly_npy_write(const char *path, uly_dtype dtype, int ndim,
                  const int64_t *shape, const void *data);
/* Release what uly_npy_parse / uly_npy_read allocated; safe on a zeroed struct. */
void uly_npy_free(uly_npy *n);

#ifdef __cplusplus
}
#endif

#endif /* ULYSSES_H */
