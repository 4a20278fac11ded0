/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist_impl.h -- the inside of a uly_dist context (src/dist*.c), not
 * installed.  One concern per file, each calling only the ones listed
 * before it here:
 *   dist_copy.c  the blocks of every all-to-all (per peer, sequence side and
 *                head side), the head-side layout, block and streaming copies
 *   dist_a2a.c   the all-to-all modes (pack, datatype, pipeline, shm, cma)
 *                and auto's measurements; uly_dist_a2a; the call agreements
 *   dist_shm.c   where the head-side buffers go: the shared-memory window,
 *                the cross-memory attach probe, the private fallback
 *   dist_ovl.c   the overlapped path over messages, and what both
 *                overlapped paths share (accounting, trace, kernel calls)
 *   dist_ovs.c   the overlapped path through the window
 *   dist.c       the context's life: buffers (from named tables), create,
 *                agreement, forward and backward, getters
 */
#ifndef ULY_DIST_IMPL_H
#define ULY_DIST_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "internal.h"
#include "methods.h"
#include "ulysses_dist.h"

/* One tensor of a chunk's non-blocking all-to-all, source by source: the
 * receives are posted at its start, each peer's block is sent (and the own
 * one copied) when its rows are ready, and each source's block is waited for
 * (and unpacked) when its rows are needed. */
typedef struct ovl_part {
    int tag, which;
    const char *in;           /* source tensor */
    char *out;                /* destination tensor */
    comm_block *send, *recv;  /* (P) blocks of in / out, by peer */
    size_t *soff, *roff;      /* (P) offset of each peer's block in sstage / rstage */
    int *rfirst, *rn;         /* (P) each source's receive requests in the op's queue */
    unsigned char *got;       /* (P) the source's block is in out */
    unsigned char *sent;      /* (P) the block for that peer is sent (own: copied) */
    char *sstage;             /* NULL: sent in place */
    char *rstage;             /* NULL: received in place */
} ovl_part;

/* A chunk's all-to-all in flight: up to three tensors (Q, K, V or dQ, dK, dV). */
typedef struct ovl_op {
    int n;
    ovl_part part[3];
    uly_comm_nb q;
} ovl_op;

/* Every rank's share of the problem (from the layout, uly_layout_part). */
typedef struct dist_part {
    int rep;                   /* KV groups cut between ranks: replicated KV */
    int64_t *nb, *nc;          /* (P) token begin / count per rank */
    int64_t *hb, *hc;          /* (P) query head begin / count per rank */
    int64_t *kb, *kc;          /* (P) KV head begin / count per rank */
    void *owned;               /* the allocation behind these tables and the scratch of a2a and shm */
} dist_part;

/* The all-to-alls: the mode, the scratch, auto's measurements (dist_a2a.c). */
typedef struct dist_a2a {
    int mode;                  /* ULY_A2A_* as asked for */
    char note[768];            /* why the mode asked for is not used (empty: it is) */
    size_t *sc, *sd, *rc, *rd; /* (P) element counts / displacements scratch */
    comm_block *sbk, *rbk;     /* (P) strided blocks scratch (datatype mode) */
    void *sstage, *rstage;     /* pack / unpack staging */
    uly_comm_pipe_ws pipe;     /* the pipelined mode's request tables */
    int ncand, cand[ULY_A2A_MODES - 1]; /* the modes ULY_A2A_AUTO measures */
    /* ULY_A2A_AUTO: per all-to-all kind, the calls measured so far, their
     * times (slowest rank after the decision) and the mode chosen (0: none yet) */
    int auto_calls[ULY_A2A_COUNT];
    double auto_t[ULY_A2A_COUNT][ULY_A2A_MODES - 1][ULY_A2A_AUTO_SAMPLES];
    int auto_mode[ULY_A2A_COUNT];
} dist_a2a;

/* The shared-memory window and cross-memory attach (dist_shm.c). */
typedef struct dist_shm {
    int on;                    /* the head-side buffers are in a shared-memory window */
    int cma;                   /* cross-memory attach works between every pair of ranks */
    char **peer;               /* (P) every rank's head-side region (this process's mapping) */
    unsigned char *state;      /* (P) a2a_shm's per-peer progress */
    struct row_copy *rows;     /* (P) a2a_shm's copies of one pass */
    void *heads_owned;         /* the head-side region when it is not in a window */
} dist_shm;

/* Overlap of communication with computation (see ulysses_dist.h), over
 * messages (dist_ovl.c) or through the window (dist_ovs.c). */
typedef struct dist_ovl {
    int mode;                  /* ULY_OVERLAP_* for the next forward */
    int K;                     /* head chunks per rank (1: the chunked path cannot run) */
    int64_t *cqb, *cqc;        /* (K*P) chunk c of rank s: query heads [cqb, +cqc), at c*P + s */
    int64_t *ckb, *ckc;        /* (K*P) the KV heads of that chunk */
    int64_t *cqo, *cko;        /* (K) this rank's chunk c: head offset in its head-side buffers */
    void *chunk_owned;         /* the allocation behind the chunk tables */
    size_t ost_seq, ost_head;  /* staging elements per tensor: sequence side, head side */
    char *ostage;              /* (2 ops x 3 tensors x (ost_seq + ost_head)) */
    void *lse_ch;              /* B > 1: the LSE chunk by chunk, (B, cqc, N) each */
    void *expanded2;           /* replicated KV: dV's per-query-head gradients */
    void *owned;               /* the allocation behind the overlap buffers */
    void *tab;                 /* the allocation behind the ops' per-peer tables */
    ovl_op op[4];              /* input all-to-alls of even / odd chunks, then output ones */
    int c, fwd;                /* the chunk the kernel runs, and in which direction */
    int err;                   /* first error of the kernel's hooks */
    void (*hook_progress)(void *user);                 /* the kernel's hooks of the running path: */
    void (*hook_rows)(void *user, int ev, int64_t end); /* uly_dist_ovl_run's (messages) or uly_dist_ovs_run's (window) */
    double t_prog;             /* time inside the kernel's hooks */
    uly_ovl_account *acc;      /* the running call's account */
    double t_call;             /* the running call's start (uly_comm_wtime) */
    double t_test;             /* the progress hook's last MPI test */
    uly_ovl_event *tr;         /* event trace (uly_dist_trace), or NULL */
    size_t tr_cap, tr_n;
    int fwd_chunked;           /* the last forward ran chunked: its backward does too */
} dist_ovl;

/* The overlapped path through the window (every rank on one node, K >= 2):
 * senders copy straight into the peers' chunk buffers, receivers copy
 * straight out of them; per-chunk flags in each rank's flag area. */
typedef struct dist_ovs {
    int on;                    /* this path runs (else per-peer MPI messages) */
    uint64_t seq;              /* overlapped calls so far (the same on every rank) */
    char **area;               /* (P) every rank's flag area (this process's mapping) */
    uint64_t *seen;            /* (P x 4) the last input flag value waited for, by source and step */
    unsigned char *got;        /* (K x 2 x P) output block of (chunk, kind, source) copied out */
    uint64_t pub[2];           /* the done flags of the running chunk last published */
    char *y[3];                /* the running call's sequence-side outputs */
    void *tab;                 /* the allocation behind the tables above */
} dist_ovs;

struct uly_dist {
    uly_comm *c;
    int P, rank;
    uly_attn_desc a;
    uly_dist_opts o;
    size_t es;                 /* bytes per element */
    int64_t *docs;             /* own copy of the document offsets, or NULL */
    dist_part part;
    dist_a2a a2a;
    dist_shm shm;
    /* head-sharded tensors of this rank (aliases of the caller's for P = 1) */
    void *qh, *kh, *vh, *oh;   /* (B,N,H_r,d) (B,N,Hkv_r,d) x2 (B,N,H_r,d) */
    void *lse;                 /* (B,H_r,N) */
    void *doh, *dqh, *dkh, *dvh; /* (B,N,H_r,d) x2, (B,N,Hkv_r|H_r,d) x2 */
    void *expanded;            /* (B,n_r,H,d): per-query-head KV grads before the fold */
    void *owned;               /* the allocation behind lse, the staging and expanded */
    dist_ovl ovl;
    dist_ovs ovs;
    int have_fwd;
    uint64_t calls;
    uly_volume vol;
    uly_dist_times times;
};

static inline size_t usz(int64_t x) { return (size_t)x; }

/* One block of a row-interleaved copy (uly_dist_copy_rows). */
typedef struct row_copy {
    char *dst;
    const char *src;
    comm_block db, sb;
} row_copy;

/* Bytes of a rank's flag area for the overlapped path through the window
 * (after its head-side buffers): one cache line per flag, input flags and
 * release flags per peer, done flags per chunk and kind (OVS_IN, ...). */
enum { OVS_LINE = 64 };
#define OVS_IN(D, s) (s)
#define OVS_REL(D, s) ((D)->P + (s))
#define OVS_DONE(D, c, kind) (2 * (D)->P + 2 * (c) + (kind))
static inline uint64_t ovs_flag_bytes(int P, int K)
{
    return (uint64_t)(2 * P + 2 * K) * OVS_LINE;
}

static inline size_t ovs_bytes(const uly_dist *D)
{
    return D->ovl.K >= 2 && D->ovs.tab ? (size_t)ovs_flag_bytes(D->P, D->ovl.K) : 0;
}

static inline uly_kernel_opts local_opts(const uly_dist *D)
{
    uly_kernel_opts k = D->o.kernel;
    k.head_begin = D->part.hb[D->rank];
    k.head_count = D->part.hc[D->rank];
    k.kv_expanded = D->part.rep;
    return k;
}

/* dist_copy.c */
ULY_INTERNAL size_t uly_dist_block_elems(const comm_block *b);
ULY_INTERNAL void uly_dist_copy_block(char *dst, const comm_block *db, const char *src, const comm_block *sb, size_t es);
ULY_INTERNAL void uly_dist_copy_rows(const row_copy *x, int n, size_t es, int stream);
ULY_INTERNAL comm_block uly_dist_seq_block(const uly_dist *D, int s, int64_t Hx, const int64_t *hbeg, const int64_t *hcnt);
ULY_INTERNAL comm_block uly_dist_head_block(const uly_dist *D, int s, int64_t c_r);
ULY_INTERNAL void uly_dist_a2a_tables(uly_dist *D, int which, int to_heads, int64_t Hx, const int64_t *hbeg, const int64_t *hcnt,
    comm_block *send, comm_block *recv, int *send_inplace, int *recv_inplace);
ULY_INTERNAL uint64_t uly_dist_head_region(const uly_attn_desc *a, size_t es, int64_t h, int64_t kv, int64_t kvg,
    size_t off[ULY_A2A_COUNT], uly_bufs *t, int where);
ULY_INTERNAL size_t uly_dist_head_layout(const uly_dist *D, int s, size_t off[ULY_A2A_COUNT]);

/* dist_a2a.c */
ULY_INTERNAL int uly_dist_a2a_seq_to_heads(uly_dist *D, int which, const char *in, int64_t Hin, const int64_t *hbeg,
    const int64_t *hcnt, char *out);
ULY_INTERNAL int uly_dist_a2a_heads_to_seq(uly_dist *D, int which, const char *in, int64_t Hout, const int64_t *hbeg,
    const int64_t *hcnt, char *out);
ULY_INTERNAL int uly_dist_a2a_kv_grad(uly_dist *D, int which, const char *in, char *out);
ULY_INTERNAL int uly_dist_call_agree(uly_dist *D, int kind, int local);
ULY_INTERNAL int uly_dist_call_agree_open(uly_dist *D, int kind, int local);

/* dist_shm.c */
ULY_INTERNAL int uly_dist_heads_shared(const uly_dist *D);
ULY_INTERNAL void uly_dist_heads_set(uly_dist *D, char *region);
ULY_INTERNAL int uly_dist_heads_place(uly_dist *D);

/* dist_ovl.c */
ULY_INTERNAL double uly_dist_thread_cpu(void);
ULY_INTERNAL void uly_dist_ovl_event(uly_dist *D, int kind, int which, int peer, int ready, double t0, double wall, double cpu);
ULY_INTERNAL double uly_dist_mono_now(void);
ULY_INTERNAL void uly_dist_ovl_waited(uly_dist *D, int which, int s, int ready, double t0, double c0);
ULY_INTERNAL size_t uly_dist_ovl_off(const uly_dist *D, int64_t heads_before);
ULY_INTERNAL int uly_dist_ovl_use(const uly_dist *D);
ULY_INTERNAL int uly_dist_ovl_tail(uly_dist *D, int fwd, void *y1, void *y2);
ULY_INTERNAL void uly_dist_ovl_timed_kernel(uly_dist *D, int c, int fwd, int *lrc, double *t, double *u);
ULY_INTERNAL int uly_dist_ovl_run(uly_dist *D, int fwd, const void *x0, const void *x1, const void *x2, void *y0, void *y1,
    void *y2, int *lrc, double *t_in, double *t_attn, double *t_out);

/* dist_ovs.c */
ULY_INTERNAL int uly_dist_ovs_run(uly_dist *D, int fwd, const void *x0, const void *x1, const void *x2, void *y0, void *y1,
    void *y2, int *lrc, double *t_in, double *t_attn, double *t_out);

#endif
