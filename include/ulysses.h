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
} uly_attn_desc;

/* Validate a description: positive sizes, H % Hkv == 0, window >= 0, scale
 * finite, and every tensor size (in bytes) representable in size_t. */
int uly_attn_desc_check(const uly_attn_desc *a);
/* The scale actually used (a->scale, or 1/sqrt(d) when it is 0). */
double uly_attn_scale(const uly_attn_desc *a);
/* Whether query i may attend to key j under the mask of a. */
int uly_attn_visible(const uly_attn_desc *a, int64_t i, int64_t j);
/* Number of visible (query, key) pairs per (batch, head): the FLOP base. */
double uly_attn_pairs(const uly_attn_desc *a);

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

/* Bytes one rank sends to / receives from other ranks (itself excluded). */
typedef struct uly_volume {
    uint64_t sent[ULY_A2A_COUNT];
    uint64_t recv[ULY_A2A_COUNT];
} uly_volume;

/* Expected per-rank volume of the Ulysses all-to-alls for rank `rank` of P,
 * from the shape alone (uneven heads, uneven sequence and GQA included). */
int uly_plan_volume(const uly_attn_desc *a, int P, int rank, uly_volume *out);

/* --------------------------------------------------------------- kernels */

/* Options of the blocked kernel; a NULL pointer means all defaults. */
typedef struct uly_kernel_opts {
    int64_t block_q;     /* query rows per block (0: default) */
    int64_t block_k;     /* key rows per block (0: default) */
    int threads;         /* OpenMP threads (0: the OpenMP default) */
    int64_t head_begin;  /* the tensors hold query heads [head_begin, head_begin + head_count) */
    int64_t head_count;  /* 0: all H heads (head_begin must be 0) */
    int kv_expanded;     /* backward: dK, dV per query head, (B, N, Hq, d), unsummed */
} uly_kernel_opts;

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
/* Write a .npy file (format 1.0, C order, little-endian). */
int uly_npy_write(const char *path, uly_dtype dtype, int ndim,
                  const int64_t *shape, const void *data);
/* Release what uly_npy_parse / uly_npy_read allocated; safe on a zeroed struct. */
void uly_npy_free(uly_npy *n);

#ifdef __cplusplus
}
#endif

#endif /* ULYSSES_H */
