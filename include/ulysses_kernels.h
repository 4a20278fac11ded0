/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ulysses_kernels.h -- the attention kernels of libulysses: the fp64
 * reference (the oracle), the blocked ("flash-style") kernel in fp32 and
 * fp64, tile merging and the KV-gradient fold.  No MPI.  ulysses.h includes it.
 */
#ifndef ULYSSES_KERNELS_H
#define ULYSSES_KERNELS_H

#include "ulysses_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

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
    /* Backward schedule (same bits either way): ULY_BWD_AUTO takes the
     * single pass, see doc/kernels.md. */
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

enum { ULY_BWD_AUTO = 0,   /* the single pass (its key blocks shared out when its items are too few) */
       ULY_BWD_SINGLE = 1, /* one KV-outer pass per (batch, KV head), or per (batch, KV head, key
                              block) with dQ ordered by key block: 5 GEMMs per block pair */
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
/* Options of the reference: opts may be NULL (none).  progress, if set, is
 * called after every row of every (batch, head) with the rows done and the
 * rows in all (B*H*N), from the calling thread; it must not call the
 * reference.  The results are the same with or without it. */
typedef struct uly_ref_opts {
    void (*progress)(void *user, int64_t done, int64_t total);
    void *progress_user;
} uly_ref_opts;
int uly_ref_fwd_ex(const uly_attn_desc *a, const double *q, const double *k,
                   const double *v, double *o, double *lse, const uly_ref_opts *opts);
int uly_ref_bwd_ex(const uly_attn_desc *a, const double *q, const double *k,
                   const double *v, const double *dout, double *dq, double *dk,
                   double *dv, const uly_ref_opts *opts);

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

#ifdef __cplusplus
}
#endif

#endif /* ULYSSES_KERNELS_H */
