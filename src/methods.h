/* SPDX-License-Identifier: Apache-2.0 */
/*
 * methods.h -- the compose modules beside Ulysses (internal): the ring engine
 * (ring, zigzag, and the ring half of usp) and the all-gather method.  Each
 * works on a uly_comm and the plan layer's geometry; src/sp.c puts them
 * behind the public uly_sp API.  Not installed.
 */
#ifndef ULY_METHODS_H
#define ULY_METHODS_H

#include "comm.h"
#include "internal.h"

/* ------------------------------------------------------- named buffers */

/* Every carved buffer starts on a 64-byte boundary: table entries are sizes
 * rounded up to it, so a table's sum is exactly what its carve allocates. */
#define ULY_BUF_ALIGN 64
/* Bytes of prod(dims[0..n)) elements of es bytes, rounded up to
 * ULY_BUF_ALIGN; UINT64_MAX on overflow or a negative dimension. */
ULY_INTERNAL uint64_t uly_buf_bytes(size_t es, int n, const int64_t *dims);
ULY_INTERNAL uint64_t uly_buf_bytes1(size_t es, int64_t n);
/* Offsets of entries [first, t->n) of t, one after the other, and their
 * total; 1 when an entry or the total does not fit in size_t. */
ULY_INTERNAL int uly_bufs_offsets(const uly_bufs *t, int first, size_t *off, size_t *total);
/* One allocation (zeroed when `zero`) for entries [first, t->n) of t:
 * *base is the allocation, ptr[i - first] the buffer of entry i.  ULY_EOVERFLOW
 * when the sizes do not fit, ULY_ENOMEM naming `what`. */
ULY_INTERNAL int uly_bufs_carve(const uly_bufs *t, int first, int zero, const char *what, void **base,
                                char **ptr);

/* The tables of the compose modules, appended to t: the ring engine (as
 * uly_ring_create's arguments), the all-gather module (rank `rank`). */
ULY_INTERNAL void uly_ring_bufs(const uly_attn_desc *a, const uly_sp_plan *p, int j, int64_t head_begin,
                                int64_t head_count, int expanded, uly_bufs *t);
ULY_INTERNAL void uly_ag_bufs(const uly_attn_desc *a, const uly_sp_plan *p, int rank, uly_bufs *t);

/* Time spent per phase of one call, seconds. */
typedef struct uly_phase_times {
    double comm_in;   /* all-to-all / all-gather before the attention */
    double attn;      /* kernels and merges */
    double wait;      /* ring: waiting for hops not hidden behind compute */
    double comm_out;  /* all-to-all / reduce-scatter after the attention */
} uly_phase_times;

/*
 * The ring engine of ring position j on a communicator of R ranks whose rank
 * order is the ring order.  Holds query heads [head_begin, +head_count) of
 * the group chunk of position j (uly_plan_chunk) and the KV heads they need.
 * a: the global problem (documents included; the offsets must stay valid).
 * expanded: dK, dV per query head (usp with cut KV groups).
 * vol: counters the engine adds its bytes to (ULY_RING_*).
 */
typedef struct uly_ring uly_ring;
ULY_INTERNAL int uly_ring_create(uly_comm *c, const uly_attn_desc *a, const uly_sp_plan *p, int j,
                                 int64_t head_begin, int64_t head_count, int expanded,
                                 const uly_kernel_opts *ko, int bf16, uly_volume *vol, uly_ring **out);
ULY_INTERNAL void uly_ring_free(uly_ring *r);
/* q (B, n_j, Hq, d), k, v (B, n_j, Hk, d), rows = the chunk's segments in
 * order -> o (B, n_j, Hq, d), lse (B, Hq, n_j).  Keeps what the backward
 * needs.  Returns the first local failure after finishing the ring's
 * communication (so peers never wait for a message that will not come), or
 * an MPI error at once. */
ULY_INTERNAL int uly_ring_fwd(uly_ring *r, const void *q, const void *k, const void *v, void *o, void *lse,
                              uly_phase_times *t);
/* dout (B, n_j, Hq, d) -> dq (B, n_j, Hq, d), dk, dv (B, n_j, Hk|Hq, d). */
ULY_INTERNAL int uly_ring_bwd(uly_ring *r, const void *dout, void *dq, void *dk, void *dv,
                              uly_phase_times *t);

/* The all-gather method (Llama 3 context parallelism) on all P ranks. */
typedef struct uly_ag uly_ag;
ULY_INTERNAL int uly_ag_create(uly_comm *c, const uly_attn_desc *a, const uly_sp_plan *p,
                               const uly_kernel_opts *ko, uly_volume *vol, uly_ag **out);
ULY_INTERNAL void uly_ag_free(uly_ag *g);
ULY_INTERNAL int uly_ag_fwd(uly_ag *g, const void *q, const void *k, const void *v, void *o,
                            uly_phase_times *t);
/* The log-sum-exp of the last forward: segment-major (B, H, c[s]) per own segment. */
ULY_INTERNAL const void *uly_ag_lse(const uly_ag *g);
ULY_INTERNAL int uly_ag_bwd(uly_ag *g, const void *dout, void *dq, void *dk, void *dv, uly_phase_times *t);

/* Layout helpers shared by the modules.  A tensor of `rows` rows per batch
 * row whose rows are segments c[0], c[1], ... is "segment-major" when each
 * segment is stored as its own (B, c[s], X) block, one after the other. */
ULY_INTERNAL void uly_to_segmajor(const void *src, void *dst, int64_t B, int nseg, const int64_t *c,
                                  size_t row_bytes);
ULY_INTERNAL void uly_from_segmajor(const void *src, void *dst, int64_t B, int nseg, const int64_t *c,
                                    size_t row_bytes);
/* LSE (B, X, rows) <-> per segment (B, X, c[s]). */
ULY_INTERNAL void uly_lse_to_segmajor(const void *src, void *dst, int64_t B, int64_t X, int nseg,
                                      const int64_t *c, size_t es);
ULY_INTERNAL void uly_lse_from_segmajor(const void *src, void *dst, int64_t B, int64_t X, int nseg,
                                        const int64_t *c, size_t es);
/* y += x, n elements of dtype t. */
ULY_INTERNAL void uly_axpy1(uly_dtype t, void *y, const void *x, size_t n);

#endif
