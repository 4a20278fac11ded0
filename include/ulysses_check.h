/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ulysses_check.h -- the independent checker of sequence-parallel attention
 * (doc/check.md).  Given what P ranks of any framework computed -- their
 * shards of Q, K, V and any of O, LSE, dO, dQ, dK, dV -- the checker
 * reassembles the global tensors with the shard map of the method (the plan
 * layer's layout, uly_layout_part) or with the ranks' own token indices,
 * computes the float64 reference (uly_ref_fwd, uly_ref_bwd), and reports per
 * tensor, per rank, per token segment (zigzag chunk) and per head group the
 * error, the tolerance used and a verdict.  It then names the most likely
 * defect by testing hypotheses against the data (a zeroed output, attention
 * confined to the rank's own shard, chunks swapped, documents not masked, a
 * query head reading the wrong KV head, a backward-only K/V path, errors at
 * the bf16 level) and reports the balance of the work (unmasked (head,
 * query, key) triples per rank, max / mean).  No MPI; ulysses.h includes it.
 */
#ifndef ULYSSES_CHECK_H
#define ULYSSES_CHECK_H

#include "ulysses_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The tensors compared. */
enum { ULY_CHK_O = 0, ULY_CHK_LSE, ULY_CHK_DQ, ULY_CHK_DK, ULY_CHK_DV, ULY_CHK_NT };
/* "o", "lse", "dq", "dk", "dv" ("?" for an unknown value). */
const char *uly_check_tensor_name(int t);

/* Tensor layouts of the field, per rank shard of n rows:
 *   bshd  (B, n, H, d)     the library's; flash-attn's, DeepSpeed's
 *   bhsd  (B, H, n, d)     PyTorch's scaled_dot_product_attention
 *   thd   (n, H, d)        packed tokens (B = 1; the sequences of a batch
 *                          are documents given by cumulative offsets,
 *                          flash-attn's cu_seqlens, TransformerEngine's THD)
 * The LSE is (B, H, n) in bshd and bhsd, (H, n) in thd. */
enum { ULY_TL_BSHD = 0, ULY_TL_BHSD, ULY_TL_THD, ULY_TL_COUNT };
const char *uly_tlayout_name(int layout);
int uly_tlayout_parse(const char *name, int *layout);
/* Copy a (B, n, Hx, d) tensor from `layout` to bshd (dst must not alias
 * src); thd is bshd with B = 1. */
void uly_tlayout_to_bshd(int layout, int64_t B, int64_t n, int64_t Hx, int64_t d, const double *src,
                         double *dst);
/* And back (for writing outputs in a framework's layout). */
void uly_tlayout_from_bshd(int layout, int64_t B, int64_t n, int64_t Hx, int64_t d, const double *src,
                           double *dst);

/* The problem. */
typedef struct uly_check_problem {
    uly_attn_desc a;       /* global B, N, H, Hkv, d, masks, scale, documents; a.dtype is ignored */
    uly_sp_plan plan;      /* the method, P, U, placement: the shard map (when tokens are not given) */
    int elem;              /* the framework's compute type, which sets the tolerances:
                              ULY_ELEM_F32, ULY_ELEM_BF16, ULY_ELEM_F16 or ULY_ELEM_F64 (ulysses_npy.h) */
    double max_imbalance;  /* the balance bound (max / mean); 0: the default rule (doc/check.md) */
    double atol_scale;     /* multiply every default tolerance (atol and rtol) by this; 0: 1 */
} uly_check_problem;

/*
 * Rank r's tensors, as doubles, in bshd with the rank's rows in its shard
 * order: q, o, dout, dq (B, rows, H, d); k, v, dk, dv (B, rows, Hkv, d).
 * lse: (B, H, rows) over the rank's own tokens, or, with lse_plan, the
 * layout of uly_plan_lse_layout (the heads a Ulysses or USP rank computes,
 * over its group's chunk).  A NULL pointer is an absent tensor; every rank
 * must give the same set; dq, dk, dv need dout, and dout needs at least one
 * of them.  q, k, v are required.
 */
typedef struct uly_check_rank {
    int64_t rows;              /* tokens of the shard */
    const int64_t *tokens;     /* NULL: the method's shard map; else `rows` global token
                                  indices (the same in every batch row) -- the framework's own
                                  map, which must cover 0..N-1 exactly once over the ranks */
    const double *q, *k, *v;
    const double *o, *lse, *dout, *dq, *dk, *dv;
    int lse_plan;
} uly_check_rank;

/* One cell of the report: one tensor on one token segment of one rank and
 * one head group.  Head groups: the query heads of one KV head when
 * Hkv < H, else the Ulysses head shards uly_split(H, min(P, H), g); dK, dV
 * cells cover the KV heads of the group. */
typedef struct uly_check_cell {
    int tensor;                /* ULY_CHK_* */
    int rank, seg;             /* seg: the rank's token segment (0, 1, ...) */
    int chunk;                 /* the method's chunk index of the segment (zigzag: 0..2R-1), or -1 */
    int64_t tok_begin, tok_count;   /* global token positions [begin, begin + count) */
    int64_t head_begin, head_count; /* query heads (KV heads for dK, dV) */
    uint64_t n;                /* elements compared */
    uint64_t bad;              /* elements beyond atol + rtol |ref| (non-finite ones included) */
    uint64_t nonfinite;        /* NaN or Inf elements */
    double max_err;            /* largest |x - ref| */
    double ref_at_max;         /* |ref| there */
    double worst;              /* largest |x - ref| / (atol + rtol |ref|); Inf when non-finite */
} uly_check_cell;

/* Defect classes, most specific first (doc/check.md says what each means
 * and how it is recognised). */
enum {
    ULY_DEFECT_NONE = 0,
    ULY_DEFECT_ZERO_OUTPUT,    /* a tensor is exactly zero where the reference is not */
    ULY_DEFECT_NO_SP,          /* each rank's output is attention over its own shard only */
    ULY_DEFECT_CHUNK_SWAP,     /* a segment holds the right values of other tokens (shard map) */
    ULY_DEFECT_DOC_MASK,       /* the output matches attention that crosses document boundaries */
    ULY_DEFECT_KV_HEAD,        /* a query head attended another KV head (GQA ratio / head padding) */
    ULY_DEFECT_HEAD_SPLIT,     /* some heads wrong on every rank (head partition) */
    ULY_DEFECT_BACKWARD_KV,    /* O (and dQ) right, dK / dV wrong: backward K/V path */
    ULY_DEFECT_BACKWARD,       /* O right, dQ wrong */
    ULY_DEFECT_PRECISION,      /* errors beyond the type's bound but within bf16's: low-precision partials */
    ULY_DEFECT_FORWARD,        /* O wrong, no hypothesis fits */
    ULY_DEFECT_IMBALANCE,      /* numerically right, the work is imbalanced beyond the bound */
    ULY_DEFECT_COUNT
};
/* "none", "zero-output", "no-sequence-parallelism", "chunk-swap",
 * "document-mask", "kv-head", "head-split", "backward-kv", "backward",
 * "precision", "forward", "imbalance". */
const char *uly_defect_name(int defect);

typedef struct uly_check_report {
    int present[ULY_CHK_NT];
    double atol[ULY_CHK_NT], rtol[ULY_CHK_NT];  /* the tolerances used */
    int ncells;
    uly_check_cell *cells;     /* tensor-major, then rank, segment, head group */
    int pass;                  /* every tensor within tolerance and the balance within its bound */
    int defect;                /* ULY_DEFECT_*: the most likely class (NONE when pass) */
    char where[512];           /* the localisation: "rank 2, tokens 640-767 (zigzag chunk 5), heads 4-7" */
    char summary[1024];        /* one sentence: where, which tensors are wrong and right, the class */
    char evidence[1024];       /* what the hypothesis test measured ("O equals attention over each
                                  rank's own shard to 1e-7 on ranks 1-3") */
    int P;
    double *work;              /* P entries: unmasked (head, query, key) triples per rank */
    double imbalance;          /* max / mean of work */
    double imbalance_ref;      /* the same for the method's own shard map */
    double imbalance_bound;    /* the bound applied */
} uly_check_report;

/* The default tolerances for a compute type (doc/check.md derives them from
 * doc/kernels.md's bounds and the type's unit roundoff). */
int uly_check_tolerance(int elem, int tensor, double *atol, double *rtol);

/* Run the check.  Bad input (shapes, a token map that misses or repeats a
 * token, tensors present on some ranks only) is ULY_EINVAL with a message
 * naming the rank and the tensor (uly_last_error).  A defect is not an
 * error: the call returns ULY_OK with rep->pass == 0. */
int uly_check_run(const uly_check_problem *pb, const uly_check_rank *ranks, uly_check_report *rep);
/* The report as one JSON object (doc/check.md lists the keys); allocated
 * with uly_malloc, free with uly_free.  NULL on allocation failure. */
char *uly_check_report_json(const uly_check_problem *pb, const uly_check_report *rep);
/* Release what uly_check_run allocated; safe on a zeroed report. */
void uly_check_report_free(uly_check_report *rep);

#ifdef __cplusplus
}
#endif

#endif /* ULYSSES_CHECK_H */
