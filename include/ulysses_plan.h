/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ulysses_plan.h -- the plan layer of libulysses: status codes, the attention
 * problem description, mask geometry, sequence and head partitions, the
 * sequence-parallel methods and their expected communication.  Pure integer
 * math on (rank, size): no MPI, no BLAS.  Shared with ulysses-sim, which
 * includes this header alone.  ulysses.h includes it.
 */
#ifndef ULYSSES_PLAN_H
#define ULYSSES_PLAN_H

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
    ULY_ERANGE,     /* out of room: the KV cache holds its capacity (uly_infer_decode) */
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
/* Heap bytes live through these hooks (everything the library and the
 * `ulysses` driver allocate) and the most there were at once since the
 * start of the process or the last uly_heap_reset_peak.  A block counts as
 * the allocator sizes it (glibc's malloc_usable_size): the bytes asked for
 * plus less than 24 bytes, or less than a 4 KiB page for a block glibc maps
 * (128 KiB and more by default).  Thread-safe.  Returns ULY_OK, or
 * ULY_EUNAVAIL (both 0) where the C library cannot tell a block's size. */
int uly_heap_usage(uint64_t *live, uint64_t *peak);
void uly_heap_reset_peak(void);

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
    ULY_METHOD_USP,
    ULY_METHOD_COUNT,                          /* the methods the library runs */
    /* Megatron-LM's sequence parallelism (the activations around tensor
     * parallelism, all-gather and reduce-scatter per layer): priced by
     * ulysses-sim and drawn by explain, not a library method. */
    ULY_METHOD_MEGATRON_SP = ULY_METHOD_COUNT,
    ULY_METHOD_ALL                             /* every method */
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
/* The one name table, every method (megatron-sp included): the name
 * ulysses-sim prints ("ulysses", "ring", "ring-zigzag", "all-gather", "usp",
 * "megatron-sp"), and a parser that takes both vocabularies and the
 * cp_comm_type names.  Unknown: "?" / ULY_EINVAL. */
const char *uly_method_sim_name(int method);
int uly_method_parse_any(const char *name, int *method);
/* What a method does, from the same table, so that callers ask about a
 * property instead of listing methods: all-to-alls between group members
 * (ulysses, usp), a ring of K, V shards (ring, zigzag, usp), zigzag chunk
 * pairs (zigzag, usp, allgather), K, V all-gathered (allgather), Megatron's
 * tensor-parallel activations (megatron-sp).  0 for an unknown method. */
enum { ULY_TRAIT_A2A = 1, ULY_TRAIT_RING = 2, ULY_TRAIT_ZIGZAG = 4, ULY_TRAIT_GATHER = 8, ULY_TRAIT_TP = 16 };
int uly_method_traits(int method);
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

/* ------------------------------------------------------------- layout */

/*
 * The layout of one problem under one plan: what every rank holds and what
 * every rank hands every other in each all-to-all, from one place.  The
 * library's contexts, the drivers' preflights and explain, and ulysses-sim
 * all read it; nothing else recomputes the partitions.  Built once (O(P)
 * for the KV-replication and overlap-chunk facts), then every query is
 * O(1): no P x P table, so a simulator may ask about groups of thousands.
 *
 * The all-to-all group of a rank is the U ranks of its ring position
 * (uly_plan_grid); its all-to-alls run over the tokens of that position's
 * chunk (the whole sequence for ulysses).  Group members are numbered
 * u = 0..U-1 in the blocks below.
 */
/* Most head chunks the overlapped all-to-alls split into (ulysses_dist.h). */
#define ULY_OVERLAP_MAX_CHUNKS 8

typedef struct uly_layout {
    uly_attn_desc a;  /* the problem (document offsets borrowed, not copied) */
    uly_sp_plan p;
    int rep;          /* KV groups cut across the U group members: KV gradients per query head */
    int64_t kv_min;   /* fewest KV heads of any group member (bounds the overlap chunks) */
} uly_layout;

/* Everything rank `rank` holds. */
typedef struct uly_rank_part {
    int u, j;                  /* group member and ring position (uly_plan_grid) */
    int nseg;                  /* token segments of its sequence shard (1 or 2) */
    int64_t tok_begin[2], tok_count[2];
    int64_t tokens;            /* n_r: rows of its sequence shard */
    int64_t group_tokens;      /* N_g: rows of its group's chunk (the all-to-alls' sequence) */
    int64_t head_begin, head_count; /* query heads after the all-to-all (all H for U = 1) */
    int64_t kv_begin, kv_count;     /* their KV heads */
    int64_t kvg_count;         /* heads of the KV gradients it returns (head_count when rep) */
} uly_rank_part;

/* Check a and p (uly_attn_desc_check, uly_sp_plan_init's rules) and fill L. */
int uly_layout_init(uly_layout *L, const uly_attn_desc *a, const uly_sp_plan *p);
/* What rank `rank` (0..P-1) holds. */
void uly_layout_part(const uly_layout *L, int rank, uly_rank_part *out);
/* Tokens of group member u's shard within its group's chunk of N_g rows
 * (rows [*begin, +*count) of the chunk, in segment order). */
void uly_layout_member_rows(const uly_layout *L, int64_t Ng, int u, int64_t *begin, int64_t *count);
/* Elements (not bytes) group member src hands member dst in all-to-all
 * `which` (ULY_A2A_Q..ULY_A2A_DV) over a chunk of Ng rows (uly_rank_part's
 * group_tokens; the sequence for ulysses); src == dst is the block that
 * stays local.  0 for an unknown kind or member. */
uint64_t uly_layout_a2a_block(const uly_layout *L, int64_t Ng, int which, int src, int dst);
/* Overlap chunks: the head chunks one group's all-to-alls split into when
 * `asked` are asked for (0: ULY_OVERLAP_MAX_CHUNKS), at most kv_min; 1
 * means the chunked path cannot run. */
int uly_layout_chunks(const uly_layout *L, int asked);
/* Chunk c of K of group member s: KV heads [*kv_begin, +*kv_count) of its
 * own, and the query heads [*q_begin, +*q_count) of its range that use them. */
void uly_layout_chunk(const uly_layout *L, int K, int s, int c, int64_t *q_begin, int64_t *q_count,
                      int64_t *kv_begin, int64_t *kv_count);

/* The calls of one forward then one backward, in the library's order:
 * ulysses Q K V O | dO dQ dK dV; ring, zigzag: the hops of K, V after each
 * step t | the hops of K, V, dK, dV after each step; allgather: all-gather
 * K V | reduce-scatter dK dV; usp: Q K V, the ring, O | dO, the ring, dQ dK
 * dV.  Writes min(count, cap) calls and returns count. */
typedef struct uly_call {
    int kind;     /* ULY_A2A_Q .. ULY_RS_DV (uly_vol_name) */
    int step;     /* ring hops: after step t (0..R-1); else 0 */
    int backward; /* uly_vol_backward(kind) */
} uly_call;
int uly_layout_calls(const uly_layout *L, uly_call *calls, int cap);
/* Elements world rank src hands world rank dst in call c (0 when it hands
 * it nothing, src == dst included): all-to-alls between members of one group,
 * ring hops to the successor (dK, dV also back to their owner), all-gather
 * and reduce-scatter between all ranks. */
uint64_t uly_layout_call_block(const uly_layout *L, const uly_call *c, int src, int dst);

/* The data-parallel x sequence-parallel grid of training, one level up:
 * world rank w = dp_rank * sp + sp_rank; global batch rows split over the dp
 * replicas, the sequence over the sp ranks (uly_split both). */
typedef struct uly_grid2 {
    int dp, sp;
    int64_t batch, seq;
} uly_grid2;
int uly_grid2_init(uly_grid2 *g, int dp, int sp, int64_t batch, int64_t seq);
/* Rows [*row_begin, +*rows) and tokens [*tok_begin, +*toks) of world rank w. */
void uly_grid2_part(const uly_grid2 *g, int w, int64_t *row_begin, int64_t *rows, int64_t *tok_begin,
                    int64_t *toks);
/* The world rank holding global row b and SP rank s (the inverse). */
int uly_grid2_owner(const uly_grid2 *g, int64_t b, int s);

/* ------------------------------------------------------- named buffers */

/* What a compose module allocates, buffer by buffer: the library carves its
 * buffers from such a table, and the drivers' preflights and the memory
 * functions (uly_sp_memory, uly_train_memory) sum the same tables. */
typedef enum uly_buf_where {
    ULY_BUF_HEAP = 0,  /* through the allocation hooks (uly_malloc) */
    ULY_BUF_WINDOW = 1, /* this rank's segment of a shared-memory window (MPI's) */
    ULY_BUF_TRANSIENT = 2 /* through the hooks during a call and freed before it returns (a
                             kernel's workspace): in the peak, not held between calls */
} uly_buf_where;
typedef struct uly_buf {
    const char *name;  /* static text: "qh", "ring K/V", ... */
    uint64_t bytes;
    int where;         /* uly_buf_where */
} uly_buf;
#define ULY_BUFS_MAX 96
typedef struct uly_bufs {
    int n;
    uint64_t total;    /* sum of bytes, saturating at UINT64_MAX */
    uly_buf b[ULY_BUFS_MAX];
} uly_bufs;
/* Append a buffer (total saturates; past ULY_BUFS_MAX entries the bytes
 * join the last entry, never dropped). */
void uly_bufs_add(uly_bufs *t, const char *name, uint64_t bytes, int where);
/* Sum of the entries of one kind (ULY_BUF_HEAP / ULY_BUF_WINDOW / ULY_BUF_TRANSIENT). */
uint64_t uly_bufs_sum(const uly_bufs *t, int where);

/* Expected bytes sent / received by rank `rank` in one forward + backward,
 * per call kind, for every method (uneven N and H, GQA, KV replication and
 * documents included).  The library's counters measure the same quantities. */
int uly_plan_method_volume(const uly_attn_desc *a, const uly_sp_plan *p, int rank, uly_volume *out);
/* Bytes rank `rank` sends to its successor after step t for ring call kind
 * `which` (ULY_RING_K .. ULY_RING_DV; the final return of dK, dV to their
 * owner is counted at t = R-1). */
uint64_t uly_plan_ring_hop(const uly_attn_desc *a, const uly_sp_plan *p, int rank, int t, int which);
/* The same hop in elements (bytes = elements x the element size), for a
 * consumer that prices another element size (ulysses-sim). */
uint64_t uly_plan_ring_hop_elems(const uly_attn_desc *a, const uly_sp_plan *p, int rank, int t, int which);


/* -------------------------------------- packed documents: load balance */

/*
 * How context-parallel frameworks hand the tokens of a packed sequence of
 * documents (lengths L_0 .. L_{D-1}, N = their sum, document i at offset
 * o_i) to P ranks, and the attention work each rank then has under the
 * causal mask within documents (query q sees key k iff both lie in the same
 * document and k <= q).  Chunk c of C chunks of n tokens is always
 * uly_split(n, C, c) (the first n mod C chunks one token longer) unless
 * said otherwise, so every balancer is defined for every length
 * (doc/simulator.md, "Packed documents and load balance"):
 *   contiguous           rank r: tokens uly_split(N, P, r) (the ring's shards)
 *   zigzag               the sequence in 2P chunks, rank r: chunks r and
 *                        2P-1-r (the zigzag ring's shards, uly_plan_chunk)
 *   head-tail            every document in 2P chunks, rank r: chunks r and
 *                        2P-1-r of every document (rank-major: its chunks
 *                        of document 0, then of document 1, ...), the layout
 *                        of PyTorch's per-document head-tail balancer after
 *                        pytorch/pytorch PR #189902
 *   head-tail-doc-major  the same chunks laid out document-major (document
 *                        0's chunks of rank 0 head, tail, rank 1 head, tail,
 *                        ..., then document 1's), and the rearranged sequence
 *                        cut contiguously: rank r gets rearranged positions
 *                        uly_split(N, P, r) -- the form PR #189902 replaced,
 *                        which can hand one rank a document's whole tail
 *   doc-zigzag           every document in 2P chunks of ceil(L / 2P) tokens
 *                        (the last chunks shorter or empty, torch.chunk's
 *                        cut), rank r: chunks r and 2P-1-r; equal to
 *                        head-tail when 2P divides every length
 * Lengths are >= 1 and N <= 2^31 (so every pair count fits in int64).
 */
typedef enum uly_docbal {
    ULY_DOCBAL_CONTIGUOUS = 0, ULY_DOCBAL_ZIGZAG, ULY_DOCBAL_HEAD_TAIL, ULY_DOCBAL_HEAD_TAIL_DOC_MAJOR,
    ULY_DOCBAL_DOC_ZIGZAG, ULY_DOCBAL_COUNT
} uly_docbal;
#define ULY_DOCS_MAX_TOKENS ((int64_t)1 << 31)

/* "contiguous", "zigzag", "head-tail", "head-tail-doc-major", "doc-zigzag"
 * ("?" for an unknown one); the parser returns ULY_EINVAL for an unknown name. */
const char *uly_docbal_name(int bal);
int uly_docbal_parse(const char *name, int *bal);
/* Check document lengths: D >= 1, every length >= 1, N <= ULY_DOCS_MAX_TOKENS;
 * *total (may be NULL) gets N. */
int uly_docs_check(const int64_t *lens, int64_t D, int64_t *total);
/* Most token segments one rank can hold under a balancer of D documents
 * over P ranks (a bound for the buffers of uly_docbal_segments): 1
 * (contiguous), 2 (zigzag), 2 D (head-tail, doc-zigzag), 2 D P
 * (head-tail-doc-major); 0 for an unknown balancer. */
int64_t uly_docbal_max_segments(int bal, int64_t D, int P);
/* The tokens of rank r (0 <= r < P): segments [begin[i], begin[i] + count[i])
 * of the packed sequence, in the order the rank holds them, none empty and
 * none adjacent to the one before it.  Writes at most cap segments and
 * returns their number (>= 0; more than cap when cap was too small), or a
 * negative uly_status. */
int64_t uly_docbal_segments(int bal, const int64_t *lens, int64_t D, int P, int r, int64_t *begin,
                            int64_t *count, int64_t cap);
/* Visible (query, key) pairs of the queries [q0, q0 + n) under the causal
 * mask within documents (per head; keys wherever they are): for the part
 * of the segment in document i, sum over q of (q - o_i + 1).  off: the D + 1
 * cumulative offsets (off[0] = 0, off[D] = N). */
int64_t uly_docs_pairs_range(const int64_t *off, int64_t D, int64_t q0, int64_t n);
/* All visible pairs: sum of L_i (L_i + 1) / 2. */
int64_t uly_docs_pairs_total(const int64_t *lens, int64_t D);
/* Per-rank work of a balancer: tokens[r] the tokens rank r holds, pairs[r]
 * the visible (query, key) pairs of its queries (per head; the sum over
 * ranks is uly_docs_pairs_total).  Exact integers.  ULY_OK or a status
 * (ULY_EINVAL: bad lengths, P < 1 or an unknown balancer; ULY_ENOMEM). */
int uly_docbal_work(int bal, const int64_t *lens, int64_t D, int P, int64_t *tokens, int64_t *pairs);

#ifdef __cplusplus
}
#endif

#endif /* ULYSSES_PLAN_H */
