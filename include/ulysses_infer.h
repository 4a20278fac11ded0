/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ulysses_infer.h -- sequence-parallel inference without MPI: the KV-cache
 * layouts and the decode schemes' volumes (plan layer), and the decode
 * attention kernel with its single-process emulation of the distributed
 * merge (kernel layer).  The distributed calls (prefill, decode) are in
 * ulysses_dist.h; doc/inference.md explains the algorithms.
 *
 * Decode: B sequences, each with a KV cache of n tokens at global positions
 * 0..n-1, and one new token per sequence at position n.  The cache is
 * sharded over P ranks by tokens (every KV head of a token on one rank):
 *   contiguous       the prompt's tokens split as uly_split(prompt, P, r);
 *                    every later (generated) token goes to rank P-1
 *   round-robin:b    token t on rank (t / b) mod P: blocks of b tokens dealt
 *                    in turn (vLLM's DCP interleave, TensorRT-LLM's Helix
 *                    with b = 32)
 * A rank's shard holds its tokens in token order.
 *
 * One decode step: every rank attends the new query (all H heads) over its
 * shard (the new token's K, V already appended to its owner), giving a
 * partial output O_r (B, H, d) and log-sum-exp L_r (B, H); the partials are
 * merged per head, in rank order 0, 1, ..., P-1, with uly_attn_merge's
 * formula, on the rank that owns the head (uly_split(H, P, r)).  The schemes
 * differ in what they send:
 *   dcp    (vLLM decode context parallelism) the query arrives head-sharded
 *          (rank r holds heads uly_split(H, P, r), as a TP projection gives
 *          them) and is all-gathered; the LSEs are all-gathered; each rank
 *          scales its partial by exp(L_r - L) and the scaled partials go to
 *          the heads' owners (a reduce-scatter, summed in rank order);
 *   helix  (TensorRT-LLM Helix) the query is replicated on every rank; the
 *          unscaled partials and their LSEs go to the heads' owners in one
 *          all-to-all, and the owner merges them in rank order.
 * Exactness: the kernel's result for a shard depends only on the shard's
 * tokens, and the merge order is fixed, so the distributed decode is bitwise
 * equal to uly_decode_emulate (one process, the same layout and P) for every
 * thread count; against float64 it is within the kernels' tolerance.  Both
 * schemes send per step a volume that does not depend on n.
 */
#ifndef ULYSSES_INFER_H
#define ULYSSES_INFER_H

#include "ulysses_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------ plan: KV layout */

enum { ULY_KV_CONTIGUOUS = 0, ULY_KV_ROUND_ROBIN = 1 };

typedef struct uly_kv_layout {
    int kind;         /* ULY_KV_CONTIGUOUS or ULY_KV_ROUND_ROBIN */
    int P;            /* ranks holding the cache */
    int64_t block;    /* round-robin: tokens per block b >= 1; contiguous: 0 */
    int64_t prompt;   /* contiguous: tokens of the prompt (split over the ranks) */
} uly_kv_layout;

/* Fill a layout (ULY_EINVAL for P < 1, a round-robin block < 1, a negative
 * prompt). */
int uly_kv_layout_init(uly_kv_layout *L, int kind, int P, int64_t block, int64_t prompt);
/* "contiguous" or "round-robin:B" (B a positive integer) -> kind, block
 * (0 for contiguous); ULY_EINVAL with a message naming the text otherwise. */
int uly_kv_layout_parse(const char *text, int *kind, int64_t *block);
/* "contiguous" or "round-robin:32" into buf. */
const char *uly_kv_layout_name(const uly_kv_layout *L, char *buf, size_t len);
/* The rank holding token t (t >= 0). */
int uly_kv_owner(const uly_kv_layout *L, int64_t t);
/* Tokens of [0, n) that rank `rank` holds. */
int64_t uly_kv_count(const uly_kv_layout *L, int rank, int64_t n);
/* Row of token t in its owner's shard (its tokens of [0, t) counted). */
int64_t uly_kv_row(const uly_kv_layout *L, int64_t t);
/* The runs of consecutive tokens rank `rank` holds of [0, n), in token
 * order: writes at most cap of them to begin/count and returns how many
 * there are (call with cap 0 to count). */
int64_t uly_kv_segments(const uly_kv_layout *L, int rank, int64_t n, int64_t *begin, int64_t *count,
                        int64_t cap);

/* ------------------------------------------------ plan: decode volumes */

enum { ULY_DECODE_DCP = 0, ULY_DECODE_HELIX = 1, ULY_DECODE_COUNT };
const char *uly_decode_name(int scheme);          /* "dcp", "helix" */
int uly_decode_parse(const char *name, int *scheme);

/* What one decode step sends, by call. */
enum {
    ULY_DEC_Q_AG = 0,   /* dcp: all-gather of the query heads */
    ULY_DEC_LSE_AG,     /* dcp: all-gather of the partial LSEs (B, H) */
    ULY_DEC_O_RS,       /* dcp: the scaled partial outputs to the heads' owners */
    ULY_DEC_OL_A2A,     /* helix: partial outputs and LSEs to the heads' owners */
    ULY_DEC_COUNT
};
const char *uly_dec_vol_name(int which);          /* "q all-gather", ... */
typedef struct uly_decode_volume {
    uint64_t sent[ULY_DEC_COUNT];
    uint64_t recv[ULY_DEC_COUNT];
} uly_decode_volume;
/* Bytes rank `rank` of P sends and receives in one decode step of scheme
 * `scheme` for a->batch sequences of a->heads query heads (a->head_dim,
 * a->dtype; LSEs travel in the element type).  Independent of the cache
 * length.  The library's counters measure the same. */
int uly_plan_decode_volume(const uly_attn_desc *a, int scheme, int P, int rank, uly_decode_volume *out);
/* Bytes rank `rank` sends (and receives) to move the prompt's K and V from
 * the prefill method's token shards (uly_plan_tokens of p) into the cache
 * layout L (a->seq = the prompt's tokens); 0 where they coincide. */
int uly_plan_prefill_kv_volume(const uly_attn_desc *a, const uly_sp_plan *p, const uly_kv_layout *L, int rank,
                               uint64_t *sent, uint64_t *recv);

/* -------------------------------------------------- kernel: decode */

/* One new query per sequence against a KV shard: q (B, H, d) all query
 * heads; k, v (B, rows, Hkv, d), the shard's tokens in token order, which
 * are the runs [seg_begin[i], seg_begin[i] + seg_count[i]) (global
 * positions, rows = their sum); the query sits at global position qpos and
 * sees the keys the mask of a allows (a->causal and a->window as in
 * uly_attn_desc; documents are refused).  Writes o (B, H, d) and lse (B, H);
 * a query that sees no key of the shard gets O = 0, LSE = -inf.  Element
 * type a->dtype; a->seq is ignored.  Deterministic: keys in a fixed order of
 * fixed blocks, threads over (batch, KV head) only, so the bits do not
 * depend on the thread count (threads 0: the OpenMP default). */
int uly_decode_attn(const uly_attn_desc *a, int64_t qpos, int64_t nseg, const int64_t *seg_begin,
                    const int64_t *seg_count, const void *q, const void *k, const void *v, void *o, void *lse,
                    int threads);
/* The distributed decode step in one process: the cache of every sequence
 * whole, k, v (B, n, Hkv, d) in token order (n = qpos + 1, the new token's
 * row included), q (B, H, d); the partial of every rank of layout L with
 * uly_decode_attn over that rank's shard, then the merge of the distributed
 * step in rank order (dcp: scaled by exp(L_r - L) and summed; helix:
 * uly_attn_merge's running merge).  o (B, H, d), lse (B, H) may be NULL.
 * Bitwise what uly_infer_decode returns on P ranks. */
int uly_decode_emulate(const uly_attn_desc *a, int scheme, const uly_kv_layout *L, int64_t qpos, const void *q,
                       const void *k, const void *v, void *o, void *lse, int threads);

#ifdef __cplusplus
}
#endif

#endif /* ULYSSES_INFER_H */
