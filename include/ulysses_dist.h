/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ulysses_dist.h -- distributed DeepSpeed-Ulysses attention over MPI.
 *
 * P ranks of a communicator each hold a contiguous shard of the sequence:
 * rank r holds tokens [n_r0, n_r0 + n_r) with n_r = N/P + (r < N % P).
 *   forward:  Q, K, V  (B, n_r, H|Hkv, d)  --a2a-->  (B, N, H_r|Hkv_r, d)
 *             local attention over the full sequence for this rank's heads
 *             O  (B, N, H_r, d)  --a2a-->  (B, n_r, H, d)
 *   backward: dO in by the same a2a as Q; dQ, dK, dV out by the O a2a.
 * Rank r computes query heads [h_r0, h_r0 + H_r), H_r = H/P + (r < H % P),
 * and receives the KV heads those need (replicated when a KV group is cut
 * between ranks; their gradients then come back per query head and are
 * summed in head order, which keeps the result bitwise equal to one process).
 *
 * All calls are collective over the communicator and return a uly_status;
 * every rank returns an error when any rank fails (ULY_EPEER on the others,
 * with the failing rank's message), and ranks called with different
 * configurations all return ULY_EMISMATCH naming the field.
 */
#ifndef ULYSSES_DIST_H
#define ULYSSES_DIST_H

#include <mpi.h>
#include "ulysses.h"
#include "ulysses_infer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A local attention implementation ("attention-agnostic" plug-in).  The
 * contract is that of uly_attn_fwd / uly_attn_bwd: opts carries the head
 * range [head_begin, head_begin + head_count) held in the tensors and
 * kv_expanded (write dK, dV per query head).  Return 0 or a uly_status. */
typedef struct uly_local_attn {
    int (*fwd)(void *user, const uly_attn_desc *a, const uly_kernel_opts *opts,
               const void *q, const void *k, const void *v, void *o, void *lse);
    int (*bwd)(void *user, const uly_attn_desc *a, const uly_kernel_opts *opts,
               const void *q, const void *k, const void *v, const void *o,
               const void *lse, const void *dout, void *dq, void *dk, void *dv);
    void *user;
} uly_local_attn;

/* How the all-to-alls move strided blocks. */
enum { ULY_A2A_AUTO = 0,     /* measured: the first calls of each all-to-all kind try every
                                mode, then the fastest (slowest rank) is kept, see below */
       ULY_A2A_PACK = 1,     /* our strided copy + MPI_Alltoallv; B = 1 moves one side in place */
       ULY_A2A_DATATYPE = 2, /* MPI derived datatypes + MPI_Alltoallw: no pack step of ours */
       ULY_A2A_PIPELINE = 3, /* per-peer MPI_Isend/Irecv; packing peer s+1 overlaps the transfer
                                to peer s, unpacking follows each arrival */
       ULY_A2A_SHM = 4,      /* every rank on one node: the head-side buffers live in an MPI-3
                                shared-memory window; each rank copies its rows straight into
                                (sequence -> heads) or out of (heads -> sequence) the peers'
                                buffers, one copy per byte; refused (ULY_EINVAL) across nodes;
                                auto measures it whenever the ranks share a node */
       ULY_A2A_CMA = 5,      /* every rank on one node: each rank pulls its blocks out of the
                                peers' memory (their sequence shards, or their head-side
                                tensors) with cross-memory attach (process_vm_readv), one
                                kernel copy per byte into its own buffer, like Open MPI's
                                single-copy path; flags as in shm.  Where the system forbids
                                it (ptrace policy: EPERM; no system call: ENOSYS) the context
                                uses shm instead, on every rank, and says why
                                (uly_dist_a2a_note); auto measures it when it works */
       ULY_A2A_MODES = 6 };
/* Calls of each kind (Q, K, ..., dV) that ULY_A2A_AUTO spends measuring:
 * every mode this many times, interleaved, each call started by all ranks
 * together; all modes move the same bits.  The mode kept has the smallest
 * median (of the slowest rank's times), except that a mode copying each byte
 * twice (pack, datatype, pipeline) replaces the faster of shm and cma only
 * if all its calls are faster than that mode's median by more than
 * ULY_A2A_AUTO_MARGIN (a fraction of the single-copy mode's median). */
#define ULY_A2A_AUTO_SAMPLES 3
#define ULY_A2A_AUTO_MARGIN 0.10

typedef struct uly_dist_opts {
    uly_kernel_opts kernel;      /* block sizes and threads (head range is set by the library) */
    const uly_local_attn *attn;  /* NULL: the built-in blocked kernel */
    size_t max_count;            /* largest element count per MPI call and peer; 0: INT_MAX.
                                    Larger blocks go through large-count datatypes. */
    int a2a_mode;                /* ULY_A2A_AUTO, _PACK, _DATATYPE, _PIPELINE, _SHM or _CMA */
    int overlap;                 /* ULY_OVERLAP_OFF (0), _ON or _AUTO, see below */
    int overlap_chunks;          /* head chunks per rank with overlap (0: as many as the KV heads
                                    of the rank with fewest allow, at most ULY_OVERLAP_MAX_CHUNKS) */
} uly_dist_opts;

/*
 * Overlap of communication with computation.  Each rank's heads are split
 * into K chunks along KV-head boundaries (chunk c of rank r: a contiguous
 * range of its KV heads and the query heads among its own that use them;
 * K is at most the smallest KV-head count of any rank, so GQA groups are
 * never split between chunks and no KV head moves twice).  Forward: the
 * input all-to-all of chunk c+1 (non-blocking per-peer messages, K and V
 * before Q) is in flight while attention computes chunk c, and the output
 * all-to-all of chunk c while chunk c+1 computes; the kernel calls a
 * progress hook between blocks so that MPI moves the data meanwhile.
 * Within a chunk the work goes source rank by source rank: the kernel's
 * rows hook (uly_kernel_opts.rows) waits for a source's block of Q, K, V
 * only when the kernel first reaches that source's rows, in its fixed
 * order, and sends each source's block of O as soon as its rows are final.
 * Backward likewise (dO in, waited for per source; dK, dV out per source as
 * their key blocks finish; dQ once the chunk is done); it runs chunked
 * exactly when its forward did.
 * Results are bitwise identical to the non-overlapped path.  With K < 2
 * (a rank with one KV head, or P = 1) the plain path runs.
 */
enum { ULY_OVERLAP_OFF = 0, ULY_OVERLAP_ON = 1,
       ULY_OVERLAP_AUTO = 2, /* on when K >= 2 (see doc/performance.md for when it pays) */
       ULY_OVERLAP_MODES = 3 };

typedef struct uly_dist uly_dist;

/* Create a context (collective).  Checks that all ranks passed the same
 * description and options; allocates the head-sharded buffers (in a
 * shared-memory window with ULY_A2A_SHM, and with ULY_A2A_AUTO when every
 * rank is on one node).  The communicator is duplicated; errors are
 * returned, never fatal.  uly_dist_free is collective too (it frees the
 * communicator and the window). */
int uly_dist_create(MPI_Comm comm, const uly_attn_desc *a, const uly_dist_opts *opts,
                    uly_dist **out);
void uly_dist_free(uly_dist *d);

/* What uly_dist_create allocates on rank `rank` of P, appended to *out by
 * name (uly_bufs, ulysses_plan.h): ULY_BUF_HEAP entries are exactly the
 * bytes the allocation hooks are asked for during the create (temporary
 * tables included), the ULY_BUF_WINDOW entries this rank's segment of the
 * shared-memory window.  Deterministic from the arguments, no MPI: a driver
 * may call it before creating anything.  With ULY_A2A_SHM, ULY_A2A_CMA and
 * ULY_A2A_AUTO it assumes every rank on one node (the window is made, and
 * auto and cma probe cross-memory attach); where auto makes no window
 * (ranks on several nodes, no room for it) the head-side entries are heap
 * instead and the probe's tables are not allocated.  Returns a uly_status
 * (the create's own checks of a and opts). */
int uly_dist_memory(const uly_attn_desc *a, const uly_dist_opts *opts, int P, int rank, uly_bufs *out);

/* Switch overlap between off and the mode the context was created with, for
 * the following forwards (and their backwards).  Local: every rank must make
 * the same switch, or the next forward returns ULY_EMISMATCH on all ranks.
 * ULY_EINVAL if the context was created with overlap off or mode is unknown. */
int uly_dist_set_overlap(uly_dist *d, int mode);
/* Head chunks the overlapped path uses (1: it cannot run, the plain path does). */
int uly_dist_overlap_chunks(const uly_dist *d);

/* This rank's sequence shard and head range. */
void uly_dist_shard(const uly_dist *d, int64_t *token_begin, int64_t *token_count);
void uly_dist_heads(const uly_dist *d, int64_t *head_begin, int64_t *head_count);

/* Forward: q (B, n_r, H, d), k, v (B, n_r, Hkv, d) -> o (B, n_r, H, d).
 * With P = 1 the context keeps pointers to q, k, v and o for the backward:
 * they must stay unchanged until uly_dist_bwd returns. */
int uly_dist_fwd(uly_dist *d, const void *q, const void *k, const void *v, void *o);
/* Backward of the last forward: dout (B, n_r, H, d) -> dq (B, n_r, H, d),
 * dk, dv (B, n_r, Hkv, d). */
int uly_dist_bwd(uly_dist *d, const void *dout, void *dq, void *dk, void *dv);
/* LSE of the last forward for this rank's heads: (B, H_r, N), or NULL. */
const void *uly_dist_lse(const uly_dist *d);

/* One all-to-all alone (which = ULY_A2A_*): sequence -> heads for Q, K, V,
 * dO (in: sequence shard, out: head shard); heads -> sequence for O, dQ, dK,
 * dV (dK, dV: in is per query head (B, N, H_r, d) when KV is replicated, see
 * uly_plan_kv_replicated; out is (B, n_r, Hkv, d), summed in head order). */
int uly_dist_a2a(uly_dist *d, int which, const void *in, void *out);

/* The head-side tensor of all-to-all `which` that uly_dist_fwd and
 * uly_dist_bwd use ((B, N, H_r or Hkv_r, d); dK, dV per query head when KV is
 * replicated), owned by the context; NULL with P = 1.  Passed to
 * uly_dist_a2a as the head side, the all-to-all runs exactly as inside the
 * forward and backward: with ULY_A2A_SHM the peers read and write it
 * directly, while any other head-side buffer costs one local copy more
 * (to or from this one).  Its content changes with every call. */
void *uly_dist_head_buffer(uly_dist *d, int which);

/* The mode all-to-all `which` uses: the one asked for, or with ULY_A2A_AUTO
 * the measured choice (ULY_A2A_AUTO while still measuring).  The same on
 * every rank. */
int uly_dist_a2a_mode(const uly_dist *d, int which);
/* Name of a mode: "auto", "pack", "datatype", "pipeline", "shm", "cma". */
const char *uly_a2a_mode_name(int mode);
/* Why the context does not use every mode it was asked for (ULY_A2A_CMA
 * running as ULY_A2A_SHM, or ULY_A2A_AUTO not measuring cma, when a rank
 * cannot read its peers' memory), or NULL.  The same on every rank. */
const char *uly_dist_a2a_note(const uly_dist *d);

/* Bytes sent / received to / from other ranks since creation (or reset). */
void uly_dist_volume(const uly_dist *d, uly_volume *measured);
void uly_dist_reset_volume(uly_dist *d);

/*
 * Where one forward or backward call's time went, measured on this rank in
 * the call itself: wall time and CPU time of the calling thread (seconds).
 * The kernel's arithmetic is kernel - wait - send - test; everything else of
 * the call's wall time is exposed communication (with overlap: starting and
 * completing the chunk all-to-alls outside the kernel and the time in the
 * kernel's hooks; without: the blocking all-to-alls).  Wall time beyond CPU
 * time is time this rank was not running (waiting for a message, or the OS
 * running another process on its core).
 */
typedef struct uly_ovl_account {
    double wall, wall_cpu;     /* the whole call */
    double kernel, kernel_cpu; /* inside the kernel calls, hooks included */
    double wait, wait_cpu;     /* hooks: waiting for a source's input block and unpacking it */
    double wait_ready;         /* of wait: blocks that had arrived (complete at the first test) */
    double wait_first;         /* of wait: chunk 0's blocks (no earlier chunk to hide behind) */
    double wait_max;           /* the longest single wait */
    double send, send_cpu;     /* hooks: packing and posting output blocks */
    double test, test_cpu;     /* hooks: MPI_Testall between blocks */
    double copy, copy_cpu;     /* every rank on one node: the block copies themselves (in and
                                  out, in the hooks or not; the floor overlap cannot hide) */
    int waits, waits_ready;    /* blocks waited for; of them, complete at the first test */
    double kernel_end, end;    /* CLOCK_MONOTONIC seconds (the same clock on every rank of a
                                  node): the end of the last kernel call, of the call */
} uly_ovl_account;

/* Wall time (seconds) of the phases of the last forward and backward. */
typedef struct uly_dist_times {
    double fwd_a2a_in, fwd_attn, fwd_a2a_out;
    double bwd_a2a_in, bwd_attn, bwd_a2a_out;
    /* Whole call, and with overlap: time inside the kernel's hooks (MPI
     * moving data while attention runs; not counted in *_attn): the wall
     * time of waiting for a source's block, the CPU time of the
     * non-blocking tests and sends (their wall time beyond it is the OS
     * running another process, as during the kernel's own work), and the
     * number of chunks (1: the plain path ran).  With overlap the a2a times
     * are the time spent starting and completing the chunk all-to-alls
     * outside the kernel, so in + attn + out + progress <= wall. */
    double fwd_wall, bwd_wall, fwd_progress, bwd_progress;
    int fwd_chunks, bwd_chunks;
    /* Where the call's time went (forward, backward), plain or overlapped. */
    uly_ovl_account fwd_acc, bwd_acc;
} uly_dist_times;
void uly_dist_times_get(const uly_dist *d, uly_dist_times *t);

/*
 * Event trace of the overlapped calls (uly_dist_trace): every wait for a
 * source's input block and every send of an output block made inside the
 * kernel's hooks, every kernel call, and the starts and completions of the
 * chunk all-to-alls outside the kernel, in the order they happened.
 */
enum {
    ULY_OVL_EV_WAIT,   /* inside the kernel: a source's input block waited for and unpacked */
    ULY_OVL_EV_SEND,   /* inside the kernel: an output block packed and posted (own: copied);
                          through the shared window: this rank's rows copied out of peer's chunk */
    ULY_OVL_EV_KERNEL, /* one chunk's kernel call, hooks included */
    ULY_OVL_EV_START,  /* outside the kernel: chunk all-to-alls started (receives posted, inputs sent) */
    ULY_OVL_EV_FINISH, /* outside the kernel: chunk all-to-alls completed (and the KV fold) */
    ULY_OVL_EV_AGREE   /* the agreement on the kernels' status at the end of the call */
};
typedef struct uly_ovl_event {
    double start;       /* seconds since the call's entry */
    double wall, cpu;   /* wall time and CPU time of this thread (seconds) */
    int fwd;            /* 1 forward, 0 backward */
    int chunk;          /* head chunk (-1: none) */
    int kind;           /* ULY_OVL_EV_* */
    int which;          /* WAIT, SEND: the tensor (ULY_A2A_*); else -1 */
    int peer;           /* WAIT: the source rank; SEND: the destination; else -1 */
    int ready;          /* WAIT: the block had arrived (the first MPI_Testall completed it) */
} uly_ovl_event;
/* Record the overlapped calls' events into ev[0..cap) from now on (ev NULL:
 * stop); events beyond cap are counted but not stored. */
int uly_dist_trace(uly_dist *d, uly_ovl_event *ev, size_t cap);
/* Events recorded since the last uly_dist_trace (may exceed its cap). */
size_t uly_dist_trace_count(const uly_dist *d);

/* ------------------------------------------------------ every method */

/*
 * One attention layer over P ranks by any sequence-parallel method
 * (doc/methods.md): ulysses (uly_dist above), ring, zigzag, allgather, and
 * usp (Ulysses inside groups of U ranks, a zigzag ring across the P / U
 * groups, so P may exceed H).  Rank r's tensors hold the tokens of
 * uly_plan_tokens(plan, N, r): one or two segments of global positions, rows
 * in segment order:
 *   q, o, dout, dq (B, n_r, H, d)    k, v, dk, dv (B, n_r, Hkv, d)
 * Results: ulysses bitwise equal to one process (as uly_dist); the ring
 * methods merge per-step partials, so their rounding depends on P (the
 * errors against the fp64 reference are measured in doc/methods.md).
 */
typedef struct uly_sp_opts {
    uly_dist_opts dist;  /* kernel options (head range set by the library), and the
                            all-to-all options of ulysses and of the usp groups */
    int method;          /* uly_method */
    int ulysses_degree;  /* usp: U, dividing P; 0 for the other methods */
    int placement;       /* usp: uly_placement */
    int bf16_partials;   /* ring, zigzag, usp: round every per-step partial output and the
                            running merge to bfloat16 (emulates partials kept in bf16) */
} uly_sp_opts;

typedef struct uly_sp uly_sp;

/* Create (collective): all ranks agree on the description (documents by
 * content), the method, degrees, placement and options. */
int uly_sp_create(MPI_Comm comm, const uly_attn_desc *a, const uly_sp_opts *opts, uly_sp **out);
void uly_sp_free(uly_sp *s);
/* What uly_sp_create allocates on rank `rank` of P, appended to *out by
 * name, as uly_dist_memory (whose assumptions hold for ulysses and the usp
 * groups); the ring, zigzag and allgather methods make no window. */
int uly_sp_memory(const uly_attn_desc *a, const uly_sp_opts *opts, int P, int rank, uly_bufs *out);
/* The plan in use, and this rank's token segments (returns their number). */
void uly_sp_get_plan(const uly_sp *s, uly_sp_plan *plan);
int uly_sp_tokens(const uly_sp *s, int64_t begin[2], int64_t count[2]);
/* Forward and backward (collective).  The context keeps what the backward
 * needs, except that ulysses on one rank works on the caller's q, k, v and
 * o, which must then stay unchanged until uly_sp_bwd returns (as uly_dist). */
int uly_sp_fwd(uly_sp *s, const void *q, const void *k, const void *v, void *o);
int uly_sp_bwd(uly_sp *s, const void *dout, void *dq, void *dk, void *dv);
/* The Ulysses context inside (ulysses: over all ranks; usp: the group's),
 * owned by s; NULL for ring, zigzag and allgather. */
uly_dist *uly_sp_dist(const uly_sp *s);
/* The log-sum-exp of the last successful forward, laid out as
 * uly_plan_lse_layout says for this rank (NULL before a forward). */
const void *uly_sp_lse(const uly_sp *s);
/* Bytes sent / received since creation (or reset), every call kind. */
void uly_sp_volume(const uly_sp *s, uly_volume *measured);
void uly_sp_reset_volume(uly_sp *s);
/* Wall time (seconds) of the phases of the last forward and backward:
 * comm in (all-to-all / all-gather), attention (kernels and merges), ring
 * wait (hops not hidden behind compute), comm out (all-to-all / reduce-scatter). */
typedef struct uly_sp_times {
    double fwd_in, fwd_attn, fwd_wait, fwd_out;
    double bwd_in, bwd_attn, bwd_wait, bwd_out;
} uly_sp_times;
void uly_sp_times_get(const uly_sp *s, uly_sp_times *t);
/* One ring hop as the ring methods make it (benchmarks): `bytes` bytes from
 * sbuf to the next ring position while receiving as many into rbuf from the
 * previous one (non-blocking send and receive, then wait).  Ring methods
 * only (ring, zigzag, usp); collective over the ring. */
int uly_sp_ring_shift(uly_sp *s, const void *sbuf, void *rbuf, size_t bytes);


/* ------------------------------------------------------------ inference */

/*
 * Sequence-parallel inference over P ranks (ulysses_infer.h for the KV
 * layouts and the decode schemes, doc/inference.md): a prefill of the
 * prompt by any SP method that leaves each rank its shard of the KV cache
 * in the chosen layout, then decode steps of one new token per sequence.
 *
 * The problem a: a->batch sequences, a->seq = the prompt's tokens, the
 * heads, head_dim, dtype, causal (required: decoding is causal) and window
 * of every step; documents are refused.
 */
typedef struct uly_infer_opts {
    uly_sp_opts prefill;  /* the prefill's SP method and options */
    int scheme;           /* ULY_DECODE_DCP or ULY_DECODE_HELIX */
    int kv_kind;          /* ULY_KV_CONTIGUOUS or ULY_KV_ROUND_ROBIN */
    int64_t kv_block;     /* round-robin: tokens per block (>= 1) */
    int64_t capacity;     /* tokens per sequence the cache holds (>= a->seq):
                             the prompt plus the tokens to generate */
    int threads;          /* decode kernel threads (0: the OpenMP default) */
} uly_infer_opts;

typedef struct uly_infer uly_infer;

/* Create (collective): all ranks agree on a and the options; allocates this
 * rank's cache shard for `capacity` tokens (uly_infer_memory says how much). */
int uly_infer_create(MPI_Comm comm, const uly_attn_desc *a, const uly_infer_opts *opts, uly_infer **out);
void uly_infer_free(uly_infer *s);
/* What uly_infer_create allocates on rank `rank` of P (the cache shard, the
 * prefill context's buffers, the decode buffers), by name. */
int uly_infer_memory(const uly_attn_desc *a, const uly_infer_opts *opts, int P, int rank, uly_bufs *out);
/* Prefill (collective): q, k, v, o of this rank's prompt tokens as the
 * prefill method holds them (uly_sp_tokens), (B, n_r, H|Hkv, d); writes o and
 * moves K, V into the cache shards.  Once, before any decode step. */
int uly_infer_prefill(uly_infer *s, const void *q, const void *k, const void *v, void *o);
/* One decode step (collective) for the token at position uly_infer_length:
 * q: dcp: (B, H_r, d), this rank's query heads (uly_infer_heads); helix:
 * (B, H, d), every head, the same on every rank.  k, v (B, Hkv, d): the new
 * token's, the same on every rank (its owner appends them to its shard
 * before attending).  Writes o (B, H_r, d) for this rank's heads and, when
 * lse is not NULL, their LSE (B, H_r).  ULY_ERANGE once the cache is full. */
int uly_infer_decode(uly_infer *s, const void *q, const void *k, const void *v, void *o, void *lse);
/* The query heads whose output this rank returns: uly_split(H, P, rank). */
void uly_infer_heads(const uly_infer *s, int64_t *head_begin, int64_t *head_count);
/* Tokens per sequence in the cache (the prompt after prefill, + 1 per step). */
int64_t uly_infer_length(const uly_infer *s);
/* This rank's cache shard: k, v (B, capacity_r, Hkv, d) with its first
 * *rows rows valid, in token order (tests, checkers); the pointers stay the
 * context's. */
void uly_infer_cache(const uly_infer *s, const void **k, const void **v, int64_t *rows);
/* The prefill context (its volumes, times), owned by s. */
uly_sp *uly_infer_prefill_ctx(const uly_infer *s);
/* Bytes sent / received by the decode steps since creation, by call
 * (uly_plan_decode_volume per step), and by the prefill's KV move. */
void uly_infer_volume(const uly_infer *s, uly_decode_volume *decode, uint64_t *kv_sent, uint64_t *kv_recv);
/* Wall time (seconds) of the last decode step's phases: query gather,
 * attention over the shard, merge collectives, the merge itself. */
typedef struct uly_infer_times {
    double q_gather, attn, merge_comm, merge;
} uly_infer_times;
void uly_infer_times_get(const uly_infer *s, uly_infer_times *t);

#ifdef __cplusplus
}
#endif

#endif /* ULYSSES_DIST_H */
