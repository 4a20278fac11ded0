/* SPDX-License-Identifier: Apache-2.0 */
/*
 * infer_impl.h -- the merge of the decode partials (internal), one code
 * path for the distributed decode (src/infer.c) and its one-process
 * emulation (uly_decode_emulate, src/kernel_decode.c), so that the two
 * cannot drift apart.  Element type t throughout (float or double); a
 * "head row" is one (sequence, head) pair: d elements of O, one LSE.
 *
 * dcp:   every rank computes the total LSE of every head row from all
 *        ranks' partial LSEs (uly_dec_lse_total, rank order, in double),
 *        scales its partial by exp(L_r - L) (uly_dec_scale), and the
 *        heads' owner sums the scaled partials in rank order
 *        (uly_dec_sum).
 * helix: the heads' owner merges the unscaled partials in rank order with
 *        uly_attn_merge (uly_dec_helix_merge).
 */
#ifndef ULY_INFER_IMPL_H
#define ULY_INFER_IMPL_H

#include "internal.h"
#include "ulysses_infer.h"

/* Key rows per block of the decode kernel (doc/kernels.md). */
#define ULY_DECODE_BK 64

/* L[x] = log sum_s exp(lse[s * n + x]) over s = 0..P-1 in that order,
 * computed from m = max_s lse (exactly -inf when every part is -inf). */
ULY_INTERNAL void uly_dec_lse_total(uly_dtype t, int P, int64_t n, const void *lse, double *L);
/* out (B, hc, d) = exp(lse - L) o for the heads [hb, hb + hc) of o (B, H, d),
 * lse (B, H) and L (B, H); weight 0 where lse = -inf. */
ULY_INTERNAL void uly_dec_scale(uly_dtype t, int64_t B, int64_t H, int64_t d, int64_t hb, int64_t hc,
                                const void *o, const void *lse, const double *L, void *out);
/* out[i] = sum_s part[s * n + i] in rank order s = 0..P-1, in double,
 * rounded once to t. */
ULY_INTERNAL void uly_dec_sum(uly_dtype t, int P, int64_t n, const void *part, void *out);
/* Helix's block for the owner of heads [hb, hb + hc): their partial O
 * (B, hc, d) then their LSE (B, hc), from o (B, H, d), lse (B, H). */
ULY_INTERNAL void uly_dec_helix_pack(uly_dtype t, int64_t B, int64_t H, int64_t d, int64_t hb, int64_t hc,
                                     const void *o, const void *lse, void *out);
/* The owner's merge of the P blocks of uly_dec_helix_pack in rank order
 * (parts: P blocks of B hc (d + 1) elements) -> o (B, hc, d), lse (B, hc):
 * rank 0's, then uly_attn_merge with each next rank's. */
ULY_INTERNAL int uly_dec_helix_merge(uly_dtype t, int P, int64_t B, int64_t hc, int64_t d, const void *parts,
                                     void *o, void *lse);
/* Copy the rows of the runs seg_begin/seg_count out of a whole cache
 * src (B, n, X) into dst (B, rows, X) (X elements of es bytes per token). */
ULY_INTERNAL void uly_dec_gather_rows(const void *src, void *dst, int64_t B, int64_t n, int64_t nseg,
                                      const int64_t *seg_begin, const int64_t *seg_count, size_t row_bytes);

#endif
