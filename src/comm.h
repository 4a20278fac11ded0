/* SPDX-License-Identifier: Apache-2.0 */
/*
 * comm.h -- the thin MPI layer: a private communicator that returns errors,
 * agreement checks across ranks, and an all-to-all(v) that takes size_t
 * counts.  comm.c is the only file that calls MPI.
 */
#ifndef ULY_COMM_H
#define ULY_COMM_H

#include <stddef.h>
#include <stdint.h>
#include <mpi.h>

#include "internal.h"

typedef struct uly_comm uly_comm;

/* Rank and size of a communicator (ULY_EMPI if MPI is not initialised). */
ULY_INTERNAL int uly_comm_info(MPI_Comm user, int *rank, int *size);
/* Allocate a context for `size` ranks (local, not collective).  max_count:
 * largest element count per peer handed to MPI_Alltoallv (0: INT_MAX). */
ULY_INTERNAL int uly_comm_alloc(int rank, int size, size_t max_count, uly_comm **out);
/* Attach a private duplicate of `user` with MPI_ERRORS_RETURN (collective;
 * call only after all ranks agreed that comm_alloc succeeded). */
ULY_INTERNAL int uly_comm_attach(uly_comm *c, MPI_Comm user);
ULY_INTERNAL void uly_comm_close(uly_comm *c);
ULY_INTERNAL int uly_comm_rank(const uly_comm *c);
ULY_INTERNAL int uly_comm_size(const uly_comm *c);
ULY_INTERNAL double uly_comm_wtime(void);

/* What the communicator layer allocates (comm.c): uly_comm_alloc for P ranks,
 * and uly_comm_cma_probe on a window's P ranks; a non-blocking queue of cap
 * requests (uly_comm_nb_init); the window segment beside the caller's
 * bytes (control block and alignment); the per-call element limit a
 * uly_comm_alloc(max_count) context uses. */
ULY_INTERNAL void uly_comm_bufs(int P, uly_bufs *t);
ULY_INTERNAL void uly_comm_cma_bufs(int P, uly_bufs *t);
ULY_INTERNAL uint64_t uly_comm_nb_bytes(int cap);
ULY_INTERNAL uint64_t uly_comm_shm_extra(int P);
/* Bytes of this rank's window segment (0: no window). */
ULY_INTERNAL uint64_t uly_comm_shm_segment(const uly_comm *c);
ULY_INTERNAL size_t uly_comm_count_limit(size_t max_count);

/*
 * Collective agreement.  Every rank passes its local status (0 = ok; the
 * message is this thread's uly_last_error()) and n values that must be equal
 * on all ranks, with their names.  Returns on every rank:
 *   ULY_OK         all ok and all values equal;
 *   local status   on a rank that failed (its message kept);
 *   ULY_EPEER      on the other ranks, with the lowest failing rank's message;
 *   ULY_EMISMATCH  when values differ, naming the first such field and its
 *                  minimum and maximum over ranks.
 */
ULY_INTERNAL int uly_comm_agree(uly_comm *c, int local_status, int n, const int64_t *vals,
               const char *const *names);
/* An agreement on a status alone that tells every rank the same thing:
 * ULY_OK if no rank failed; otherwise the lowest failing rank (*failed),
 * its status returned and its message set, verbatim, on every rank.  Not
 * through the control blocks: before uly_comm_shm_start only. */
ULY_INTERNAL int uly_comm_agree_status(uly_comm *c, int local_status, int *failed);
/* The same on a communicator of the caller's (before comm_attach). */
ULY_INTERNAL int uly_comm_agree_on(MPI_Comm comm, int local_status, int n, const int64_t *vals,
                  const char *const *names);

/*
 * All-to-all with size_t counts and displacements in elements of elem_size
 * bytes (4 or 8).  The self block must have count 0 (callers copy it
 * locally).  Uses MPI_Alltoallv when every count and displacement fits
 * the configured count limit, and MPI_Alltoallw with large-count derived
 * datatypes (any size, byte offsets as MPI_Aint) otherwise.
 */
ULY_INTERNAL int uly_comm_alltoallv(uly_comm *c, const void *sbuf, const size_t *scount, const size_t *sdispl,
                   void *rbuf, const size_t *rcount, const size_t *rdispl, size_t elem_size);

/* A strided block of one peer: `batches` x `rows` rows of `len` elements;
 * rows `stride` apart, batches `bstride` apart, starting at element `off`. */
typedef struct comm_block {
    size_t off, batches, bstride, rows, len, stride;
} comm_block;

/* All-to-all where MPI reads and writes the strided blocks in place through
 * derived datatypes (no pack step of ours).  Self blocks must be empty. */
ULY_INTERNAL int uly_comm_alltoallw_blocks(uly_comm *c, const void *sbuf, const comm_block *sb, void *rbuf,
                          const comm_block *rb, size_t elem_size);

/* Tag of the point-to-point messages of uly_comm_alltoall_pipelined. */
#define ULY_COMM_TAG_A2A 7301

/* The request tables of a pipelined all-to-all, allocated with the
 * context (uly_dist's buffer table), so that no rank can fail to get them
 * after the call's agreement while its peers have posted their messages:
 * cap request handles and their owners, and P counters. */
typedef struct uly_comm_pipe_ws {
    MPI_Request *req;
    int *owner;
    int *left;
    size_t cap;
} uly_comm_pipe_ws;
/* Requests a pipelined all-to-all of P ranks needs when no block exceeds
 * `block` elements, under the count limit lim (uly_comm_count_limit). */
ULY_INTERNAL size_t uly_comm_pipe_requests(int P, size_t block, size_t lim);

/*
 * Pipelined all-to-all with per-peer non-blocking messages: every receive
 * is posted first; then for each peer in the order r+1, r+2, ... (mod P),
 * pack(user, peer) fills that peer's send block (if pack is not NULL) and
 * its send starts, so packing the next block overlaps the transfer of the
 * previous one; unpack(user, peer) runs as soon as a peer's block has
 * arrived.  Counts and displacements as for uly_comm_alltoallv (self count
 * 0); blocks above the count limit go in several messages.  The request
 * tables are ws's (allocated before the call, see uly_comm_pipe_ws); more
 * messages than ws->cap is ULY_EINVAL on the rank that sees it, before it
 * posts anything (a caller that sized ws with uly_comm_pipe_requests for
 * its largest block never gets it).
 */
ULY_INTERNAL int uly_comm_alltoall_pipelined(uly_comm *c, const void *sbuf, const size_t *scount,
                                             const size_t *sdispl, void *rbuf, const size_t *rcount,
                                             const size_t *rdispl, size_t elem_size,
                                             void (*pack)(void *user, int peer),
                                             void (*unpack)(void *user, int peer), void *user,
                                             const uly_comm_pipe_ws *ws);

/*
 * Non-blocking all-to-all pieces (uly_dist's overlap of communication with
 * computation): a set of outstanding messages with room reserved up front,
 * so that posting never allocates in the middle of a collective exchange.
 */
typedef struct uly_comm_nb {
    MPI_Request *req;
    int n, cap;
} uly_comm_nb;
/* Reserve room for cap messages (local). */
ULY_INTERNAL int uly_comm_nb_init(uly_comm_nb *q, int cap);
/* Release q; messages still outstanding are cancelled first. */
ULY_INTERNAL void uly_comm_nb_free(uly_comm_nb *q);
/* Messages of n elements take this many MPI messages (count limit). */
ULY_INTERNAL size_t uly_comm_nb_pieces(const uly_comm *c, size_t n);
/* Start receiving (recv = 1) or sending n elements of elem_size (4 or 8)
 * bytes at buf from / to peer with tag, in pieces of at most the count
 * limit (same order on both sides).  n = 0 posts nothing. */
ULY_INTERNAL int uly_comm_nb_post(uly_comm *c, uly_comm_nb *q, int recv, void *buf, size_t n, size_t elem_size,
                                  int peer, int tag);
/* Let MPI progress q's messages (MPI_Testall); *done = 1 once all completed
 * (q is then empty). */
ULY_INTERNAL int uly_comm_nb_test(uly_comm_nb *q, int *done);
/* Complete every message of q (q is empty afterwards). */
ULY_INTERNAL int uly_comm_nb_wait(uly_comm_nb *q);
/* Complete the n messages of q posted at positions [first, first + n)
 * (the others stay in flight); nothing if q was emptied since. */
ULY_INTERNAL int uly_comm_nb_wait_some(uly_comm_nb *q, int first, int n);
/* Test the n messages of q at [first, first + n) without waiting: *done = 1
 * when all of them are complete (or q was emptied since). */
ULY_INTERNAL int uly_comm_nb_test_some(uly_comm_nb *q, int first, int n, int *done);

/*
 * Shared memory between the ranks of one node (the all-to-all mode
 * ULY_A2A_SHM).  uly_comm_one_node: whether every rank of the communicator
 * shares memory with every other (MPI_COMM_TYPE_SHARED has all of them;
 * collective, the same answer on every rank).  uly_comm_shm_alloc: allocate
 * `bytes` per rank in an MPI-3 shared-memory window (collective; unified
 * memory model and lock-free 64-bit atomics required) behind a control
 * block per rank, and give every rank's bytes' address in base[0..P) (this
 * process's mapping); the window stays in one lock_all epoch until it is
 * freed.  Before any rank calls MPI_Win_allocate_shared the ranks agree
 * that every one of them can afford it: the window's file fits in the free
 * space of the MPI library's backing directory (/dev/shm) and in every
 * rank's address space (RLIMIT_AS) with `reserve` bytes beside it;
 * otherwise every rank returns ULY_EUNAVAIL with the same message and no
 * window exists anywhere.  After the call each rank takes its own
 * segment's pages (ULY_EUNAVAIL, on that rank, where the file system
 * refuses them): the caller agrees on the outcome, and frees the window
 * (uly_comm_shm_free, collective) when a rank failed.  uly_comm_shm_start: once every rank has agreed (uly_comm_agree)
 * that the allocation succeeded everywhere, agreements and the flags below
 * go through the control blocks instead of MPI.  uly_comm_shm_free
 * (collective) runs from uly_comm_close too.
 *
 * Split agreement (the same outcome as uly_comm_agree, in two steps, so that
 * shared-memory exchanges can start with the peers already there):
 * uly_comm_agree_begin publishes this rank's status and values; with a
 * local failure, or without shm_start, it settles at once and returns the
 * outcome.  uly_comm_agree_peer(s): 1 if peer s has published and it and
 * this rank both succeeded with equal values (they may exchange), 0 if not
 * (they must not), -1 if s has not published yet.  uly_comm_agree_end waits
 * for every rank and returns the outcome (ULY_OK when nothing is pending).
 * Every agreement is a begin and an end on every rank, in the same order.
 *
 * Flags, for one exchange (operation) after an agreement: v =
 * uly_comm_shm_op(c) (the same on every rank, increasing);
 * uly_comm_shm_ready(v): this rank's buffers may be accessed by peers for
 * v; uly_comm_shm_is_ready(s, v): peer s said so; uly_comm_shm_done(s, v):
 * this rank is done with peer s's buffers for v; uly_comm_shm_is_done(s,
 * v): peer s is done with this rank's.  Release / acquire atomics with
 * MPI_Win_sync on both sides: the accesses before a flag happen before the
 * accesses after seeing it.  uly_comm_shm_pause yields the core while
 * waiting.  uly_comm_shm_error: the first MPI_Win_sync failure since the
 * last call (ULY_OK if none).
 */
ULY_INTERNAL int uly_comm_one_node(uly_comm *c, int *one_node);
ULY_INTERNAL int uly_comm_shm_alloc(uly_comm *c, size_t bytes, size_t reserve, char **base);
ULY_INTERNAL void uly_comm_shm_start(uly_comm *c);
ULY_INTERNAL void uly_comm_shm_free(uly_comm *c);
ULY_INTERNAL int uly_comm_agree_begin(uly_comm *c, int local_status, int n, const int64_t *vals,
                                      const char *const *names);
ULY_INTERNAL int uly_comm_agree_peer(uly_comm *c, int s);
ULY_INTERNAL int uly_comm_agree_end(uly_comm *c);
ULY_INTERNAL uint64_t uly_comm_shm_op(uly_comm *c);
ULY_INTERNAL void uly_comm_shm_ready(uly_comm *c, uint64_t v);
ULY_INTERNAL int uly_comm_shm_is_ready(uly_comm *c, int s, uint64_t v);
ULY_INTERNAL void uly_comm_shm_done(uly_comm *c, int s, uint64_t v);
ULY_INTERNAL int uly_comm_shm_is_done(uly_comm *c, int s, uint64_t v);
ULY_INTERNAL void uly_comm_shm_pause(void);
ULY_INTERNAL int uly_comm_shm_error(uly_comm *c);

/*
 * Flags of the window's users (uly_dist's overlapped path): a 64-bit word,
 * 8-byte aligned, in the caller's bytes of some rank's segment, written by
 * one rank only with increasing values, read by any.  uly_comm_shm_flag_init
 * zeroes a flag of this rank's own segment before the agreement that
 * publishes it; uly_comm_shm_flag_set: MPI_Win_sync, then a release store
 * (this rank's accesses before it happen before a peer's after seeing it);
 * uly_comm_shm_flag_reached: 1 once the flag holds at least v (acquire load,
 * then MPI_Win_sync), else 0 at once.
 */
ULY_INTERNAL void uly_comm_shm_flag_init(void *flag);
ULY_INTERNAL void uly_comm_shm_flag_set(uly_comm *c, void *flag, uint64_t v);
ULY_INTERNAL int uly_comm_shm_flag_reached(uly_comm *c, const void *flag, uint64_t v);

/*
 * Cross-memory attach (the all-to-all mode ULY_A2A_CMA): a rank reads a
 * peer's private memory with process_vm_readv, one kernel copy into its own
 * buffer, as Open MPI's single-copy path does.  Flags as above, plus:
 * uly_comm_shm_ready_at(v, addr) says ready for v and publishes the address
 * (in this process) of the buffer the peers will read; uly_comm_shm_peer_addr(s)
 * is peer s's, valid once uly_comm_shm_is_ready(s, v).
 * uly_comm_shm_done_failed(s, v, msg): done with s's buffer for v, and with
 * msg != NULL this rank failed in the exchange (msg kept in its control
 * block); uly_comm_shm_peer_failed(s, v) after uly_comm_shm_is_done(s, v):
 * ULY_EPEER with s's message if s failed for v, else ULY_OK.
 *
 * uly_comm_cma_probe (collective, before uly_comm_shm_start): every rank's
 * process id, and a test read of every peer's memory; *usable = 1 if every
 * rank read every peer's, the same on every rank, else 0 with the first
 * failure's message in uly_last_error() (EPERM under a ptrace policy that
 * forbids it, ENOSYS without the system call).  Returns an error only when
 * its tables cannot be allocated or MPI fails (agreed too).
 * uly_comm_cma_read: copy the rows of block sb of peer s's memory at
 * address src (element offsets from there) into block db of dst (the same
 * number of rows of the same length, in order), with as few vectors as the
 * rows allow and at most IOV_MAX per system call.
 */
ULY_INTERNAL void uly_comm_shm_ready_at(uly_comm *c, uint64_t v, const void *addr);
ULY_INTERNAL uint64_t uly_comm_shm_peer_addr(uly_comm *c, int s);
ULY_INTERNAL void uly_comm_shm_done_failed(uly_comm *c, int s, uint64_t v, const char *msg);
ULY_INTERNAL int uly_comm_shm_peer_failed(uly_comm *c, int s, uint64_t v);
ULY_INTERNAL int uly_comm_cma_probe(uly_comm *c, int *usable);
ULY_INTERNAL int uly_comm_cma_read(uly_comm *c, int s, char *dst, const comm_block *db, uint64_t src,
                                   const comm_block *sb, size_t es);

/* x[0..n) = the maximum over ranks, in place (collective). */
ULY_INTERNAL int uly_comm_max_over_ranks(uly_comm *c, double *x, int n);

/* ---- collectives of the training loop (src/train.c) */

/* A new communicator of the ranks with the same color, ordered by key
 * (MPI_Comm_split of c's communicator); free it with uly_comm_free_split. */
ULY_INTERNAL int uly_comm_split(uly_comm *c, int color, int key, MPI_Comm *out);
ULY_INTERNAL void uly_comm_free_split(MPI_Comm *m);
/* Sum over ranks, in place: n int64 (exact), float or double (MPI's order). */
enum { ULY_COMM_I64 = 0, ULY_COMM_F32 = 1, ULY_COMM_F64 = 2 };
ULY_INTERNAL int uly_comm_allreduce_sum(uly_comm *c, void *buf, size_t n, int type);
/* Every rank's block of rcount[s] elements (elem_size 4 or 8 bytes) placed at
 * rdispl[s] on every rank; this rank sends rcount[rank] elements from sbuf. */
ULY_INTERNAL int uly_comm_allgatherv(uly_comm *c, const void *sbuf, void *rbuf, const size_t *rcount,
                                     const size_t *rdispl, size_t elem_size);
/* Broadcast n bytes from root. */
ULY_INTERNAL int uly_comm_bcast(uly_comm *c, void *buf, size_t n, int root);

/* ---- point-to-point and reduce-scatter (ring and all-gather attention) */

/* Outstanding non-blocking messages; zero-initialise before first use. */
enum { ULY_COMM_MAXREQ = 32 };
typedef struct uly_comm_req {
    MPI_Request r[ULY_COMM_MAXREQ];
    int n;
} uly_comm_req;
/* Start sending / receiving `bytes` bytes to / from rank `peer` with `tag`,
 * adding to q (messages above 1 GiB go as several pieces, same order on both
 * sides).  Complete with uly_comm_wait. */
ULY_INTERNAL int uly_comm_isend(uly_comm *c, const void *buf, size_t bytes, int peer, int tag,
                                uly_comm_req *q);
ULY_INTERNAL int uly_comm_irecv(uly_comm *c, void *buf, size_t bytes, int peer, int tag,
                                uly_comm_req *q);
/* Complete every message of q (q is empty afterwards). */
ULY_INTERNAL int uly_comm_wait(uly_comm_req *q);
/* Sum over ranks then scatter: sbuf holds every rank's part in rank order
 * (rcount[s] elements each, elem_size 4 or 8), rbuf receives this rank's. */
ULY_INTERNAL int uly_comm_reduce_scatter_sum(uly_comm *c, const void *sbuf, void *rbuf, const size_t *rcount,
                                             size_t elem_size);

#endif
