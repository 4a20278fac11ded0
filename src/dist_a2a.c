/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist_a2a.c -- the all-to-alls of a Ulysses context: the modes (pack,
 * datatype, pipeline through comm.c; shm and cma through the window or
 * the peers' memory), auto's measurements and choice, the kinds (sequence ->
 * heads for Q, K, V, dO; heads -> sequence for O, dQ, dK, dV, with the
 * replicated-KV fold), uly_dist_a2a, and the agreement every call starts
 * with.  With B = 1 the head side is contiguous and is handed to MPI
 * directly (no copy): the receive of sequence -> heads and the send of
 * heads -> sequence.  Where the buffers live is dist_shm.c's business.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "dist_impl.h"

/* The shm heads -> sequence all-to-all streams its copies (non-temporal
 * stores) from this many bytes copied by a rank in one call. */
#define ULY_SHM_STREAM_BYTES ((size_t)8 << 20)
/* Sequence -> heads streams its stores into the peers' buffers from this
 * many bytes written by a rank in one call (doc/performance.md, all-to-all
 * "Round five": measured faster streamed from 1 MiB per rank, 768 KiB
 * written, up to 64 MiB; below this, blocks small enough to stay in the
 * cache for their reader are left to plain stores). */
#define ULY_SHM_STREAM_TO_HEADS_BYTES ((size_t)256 << 10)

/*
 * One all-to-all.  to_heads: in is the sequence side (B, n_r, Hx, d), out the
 * head side (B, N, hcnt[r], d); otherwise the reverse.  The own block is
 * copied directly.  Datatype mode hands the strided blocks to MPI; pack mode
 * passes a side in place when all its blocks are contiguous (B = 1: the
 * head side), and otherwise goes through the staging buffers.
 */
/* Pack / unpack of one peer's block for the pipelined mode. */
typedef struct pipe_ctx {
    const uly_dist *D;
    const char *in;
    char *out;
    const comm_block *send, *recv;
    int send_inplace, recv_inplace;
} pipe_ctx;

static void pipe_pack(void *user, int s)
{
    const pipe_ctx *x = user;
    const uly_dist *D = x->D;
    comm_block packed = {D->a2a.sd[s], x->send[s].batches, x->send[s].rows * x->send[s].len, x->send[s].rows,
                         x->send[s].len, x->send[s].len};
    uly_dist_copy_block(D->a2a.sstage, &packed, x->in, &x->send[s], D->es);
}

static void pipe_unpack(void *user, int s)
{
    const pipe_ctx *x = user;
    const uly_dist *D = x->D;
    comm_block packed = {D->a2a.rd[s], x->recv[s].batches, x->recv[s].rows * x->recv[s].len, x->recv[s].rows,
                         x->recv[s].len, x->recv[s].len};
    uly_dist_copy_block(x->out, &x->recv[s], D->a2a.rstage, &packed, D->es);
}

/* The mode of this call of kind `which`: the fixed one, or under
 * ULY_A2A_AUTO the next mode to measure or the measured choice. */
static int call_mode(const uly_dist *D, int which)
{
    if (D->a2a.mode != ULY_A2A_AUTO)
        return D->a2a.mode;
    if (D->a2a.auto_mode[which])
        return D->a2a.auto_mode[which];
    return D->a2a.cand[D->a2a.auto_calls[which] % D->a2a.ncand];
}

/* Median of n values (n <= ULY_A2A_AUTO_SAMPLES; the upper one for even n). */
static double median_of(const double *x, int n)
{
    double v[ULY_A2A_AUTO_SAMPLES];
    for (int i = 0; i < n; i++) { /* insertion sort */
        int j = i;
        for (; j > 0 && v[j - 1] > x[i]; j--)
            v[j] = v[j - 1];
        v[j] = x[i];
    }
    return v[n / 2];
}

/* The mode auto keeps, from the slowest rank's time of every measured call
 * (t[m][k]: call k of candidate cand[m], each started by all ranks together):
 * the smallest median; but a mode that copies each byte twice (pack,
 * datatype, pipeline) replaces the best single-copy mode (shm, cma) only
 * when the measurement is decisive: every one of its calls (its slowest)
 * below that mode's median by more than ULY_A2A_AUTO_MARGIN.  One lucky
 * sample of a two-copy mode, or an unlucky one of shm, must not decide; nor
 * two of three (doc/performance.md, all-to-all "Round five" and "Round
 * three: backward, auto, threads").  Every rank computes the same from the
 * same times. */
static int auto_pick(const int *cand, int ncand, const double t[][ULY_A2A_AUTO_SAMPLES])
{
    int best = 0, single = 0;
    double tbest = 0, tsingle = 0, best_worst = 0;
    for (int m = 0; m < ncand; m++) {
        const double t_m = median_of(t[m], ULY_A2A_AUTO_SAMPLES);
        if (!best || t_m < tbest) {
            best = cand[m], tbest = t_m;
            best_worst = t[m][0];
            for (int k = 1; k < ULY_A2A_AUTO_SAMPLES; k++)
                best_worst = t[m][k] > best_worst ? t[m][k] : best_worst;
        }
        if ((cand[m] == ULY_A2A_SHM || cand[m] == ULY_A2A_CMA) && (!single || t_m < tsingle))
            single = cand[m], tsingle = t_m;
    }
    if (single && best != single && best_worst >= tsingle * (1 - ULY_A2A_AUTO_MARGIN))
        best = single;
    return best;
}

/* Test hook (tests/test_dist.c): auto_pick. */
int uly_test_auto_pick(const int *cand, int ncand, const double t[][ULY_A2A_AUTO_SAMPLES]);
int uly_test_auto_pick(const int *cand, int ncand, const double t[][ULY_A2A_AUTO_SAMPLES])
{
    return auto_pick(cand, ncand, t);
}

/* After a measured call: record its time; once every mode has its samples,
 * take the slowest rank's times (one allreduce, at the same call on every
 * rank since all ranks make the same calls) and keep auto_pick's
 * mode. */
static int auto_record(uly_dist *D, int which, int mode, double secs)
{
    const int n = D->a2a.auto_calls[which]++;
    (void)mode; /* = D->a2a.cand[n % D->a2a.ncand] */
    D->a2a.auto_t[which][n % D->a2a.ncand][n / D->a2a.ncand] = secs;
    if (D->a2a.auto_calls[which] < D->a2a.ncand * ULY_A2A_AUTO_SAMPLES)
        return ULY_OK;
    int rc = uly_comm_max_over_ranks(D->c, &D->a2a.auto_t[which][0][0], (ULY_A2A_MODES - 1) * ULY_A2A_AUTO_SAMPLES);
    if (rc)
        return rc;
    D->a2a.auto_mode[which] = auto_pick(D->a2a.cand, D->a2a.ncand, (const double(*)[ULY_A2A_AUTO_SAMPLES])D->a2a.auto_t[which]);
    return ULY_OK;
}

static void a2a_blocks(uly_dist *D, int which, int to_heads, const char *in, int64_t Hx, const int64_t *hbeg,
                       const int64_t *hcnt, char *out, comm_block *send, comm_block *recv, int *send_inplace,
                       int *recv_inplace)
{
    const int r = D->rank;
    uly_dist_a2a_tables(D, which, to_heads, Hx, hbeg, hcnt, send, recv, send_inplace, recv_inplace);
    if (D->part.nc[r] > 0)
        uly_dist_copy_block(out, &recv[r], in, &send[r], D->es);
}

/*
 * The shared-memory all-to-all (ULY_A2A_SHM).  Every rank's head-side
 * buffer of kind `which` is in the window, at uly_dist_head_layout's offset in that
 * rank's segment.  Sequence -> heads: each rank copies its rows for peer s
 * (strided, its sequence side) straight into s's buffer (contiguous rows of
 * its tokens); heads -> sequence: each rank copies its tokens of s's heads
 * out of s's buffer into its own sequence side.  One copy per byte, by the
 * rank that owns the sequence side.
 *
 * Synchronisation: per peer, through the flags of the window's control
 * blocks (comm.h), never a barrier.  Each call is one operation v:
 *   1. this rank says its buffer is ready for v (after copying a head-side
 *      tensor of the caller's into it, for heads -> sequence);
 *   2. it looks at its peers again and again; the ones ready for v (and
 *      agreed: uly_comm_agree_peer, for the first exchange after an
 *      agreement) are copied together, row by row (uly_dist_copy_rows: the sequence
 *      side is read once in address order), with the own block if not yet
 *      copied, and it says it is done with each of their buffers; while
 *      nobody new is there it copies its own block or yields the core;
 *   3. it waits until every peer is done with its own buffer.
 * Sequence -> heads: after 3, every peer's rows are in this rank's buffer
 * (its kernel or its copy out may read them).  Heads -> sequence: after 3,
 * no peer reads this rank's buffer any more, so the next write into it (the
 * kernel of the next forward, a copy in) cannot race with a late reader.
 * A peer is ready for v only once it has finished everything it did with
 * its buffers before (including waiting, in its step 3, for this rank's
 * earlier copies), so a write never lands in a buffer its owner still reads
 * and a read never sees a buffer its owner still writes.  Flags hold
 * increasing values and are never reset; a flag of a later operation also
 * says "ready" for an earlier one, which is only possible when the earlier
 * exchange with that peer is already done.
 * The call's agreement (uly_dist_call_agree_open) is published before step 1 and
 * settled after step 3: a rank that failed locally returns before touching
 * any buffer, its peers leave it out of the exchange (uly_comm_agree_peer)
 * and every rank returns the agreement's error.
 */
static int a2a_shm(uly_dist *D, int which, int to_heads, const char *in, int64_t Hx, const int64_t *hbeg,
                   const int64_t *hcnt, char *out, int cma)
{
    const int P = D->P, r = D->rank;
    const size_t es = D->es;
    uly_comm *c = D->c;
    size_t off[ULY_A2A_COUNT];
    uly_dist_head_layout(D, r, off);
    char *win = D->shm.peer[r] + off[which];
    const size_t head_bytes = usz(D->a.batch * D->a.seq * hcnt[r] * D->a.head_dim) * es;
    const uint64_t v = uly_comm_shm_op(c);
    /* what this rank's peers access: its window buffer (shm), or the
     * tensor they read with cross-memory attach (cma: the sequence shard,
     * or the head-side tensor, wherever it is) */
    const char *src = in;
    char *dst = out;
    if (!cma && !to_heads && in && in != win && head_bytes)
        memcpy(win, in, head_bytes); /* no peer reads it: they were done with it (step 3 of the last call) */
    if (!cma || !in)
        src = to_heads ? in : win;
    if (!cma || !out)
        dst = to_heads ? win : out;
    comm_block *send = D->a2a.sbk, *recv = D->a2a.rbk;
    int send_inplace, recv_inplace;
    uly_dist_a2a_tables(D, which, to_heads, Hx, hbeg, hcnt, send, recv, &send_inplace, &recv_inplace);
    uly_comm_shm_ready_at(c, v, src);
    /* the own block is copied while no peer is ready (below), never before
     * saying ready: the peers need not wait for it (it touches other rows
     * of this rank's buffers than theirs, and only reads the shared one) */
    int own = D->part.nc[r] > 0;
    /* Stores streamed past the cache (copy_stream): sequence -> heads from
     * ULY_SHM_STREAM_TO_HEADS_BYTES written per call (into the peers'
     * buffers, whose lines their owners read last: a plain store first
     * fetches each line from the owner's cache, a streamed one writes it
     * whole), heads -> sequence from ULY_SHM_STREAM_BYTES (into this rank's
     * shard, not read again before the cache has turned over); measured in
     * doc/performance.md, all-to-all "Round three" and "Round five". */
    size_t mine_bytes = 0; /* what this rank copies to or from its peers */
    for (int s = 0; s < P && !cma; s++)
        mine_bytes += s == r ? 0 : uly_dist_block_elems(to_heads ? &send[s] : &recv[s]) * es;
    const int stream = mine_bytes >= (to_heads ? ULY_SHM_STREAM_TO_HEADS_BYTES : ULY_SHM_STREAM_BYTES);
    unsigned char *st = D->shm.state; /* per peer: 0 to visit, 1 copied, 2 left out, 3 in this pass */
    memset(st, 0, usz(P));
    int failed = ULY_OK; /* cma: this rank's first failed read */
    char why[512] = "";
    for (int left = P - 1; left > 0;) {
        int moved = 0;
        if (!cma) {
            /* shm: every peer ready now (and the own block, if not yet
             * copied), copied together row by row in the order of their
             * heads (uly_dist_copy_rows) */
            row_copy *x = D->shm.rows;
            int n = 0, peers = 0;
            for (int s = 0; s < P; s++) {
                if (s == r) {
                    if (own)
                        x[n++] = (row_copy){dst, src, recv[r], send[r]};
                    continue;
                }
                if (st[s])
                    continue;
                const int ok = uly_comm_agree_peer(c, s);
                if (ok < 0 || (ok && !uly_comm_shm_is_ready(c, s, v)))
                    continue;
                if (!ok) { /* left out: it failed or disagreed */
                    st[s] = 2;
                    left--;
                    moved = 1;
                    continue;
                }
                uly_dist_head_layout(D, s, off);
                char *theirs = D->shm.peer[s] + off[which];
                const comm_block mine = uly_dist_head_block(D, r, hcnt[s]); /* my tokens of s's heads, in s's buffer */
                x[n++] = to_heads ? (row_copy){theirs, in, mine, send[s]} : (row_copy){out, theirs, recv[s], mine};
                st[s] = 3; /* copied in this pass */
                peers++;
            }
            if (peers) {
                uly_dist_copy_rows(x, n, es, stream);
                own = 0;
                for (int s = 0; s < P; s++) /* after uly_dist_copy_rows' fence: the flag publishes the copies */
                    if (st[s] == 3) {
                        uly_comm_shm_done(c, s, v);
                        st[s] = 1;
                    }
                left -= peers;
                moved = 1;
            }
        }
        for (int i = 1; i < P && cma; i++) {
            const int s = (r + i) % P;
            if (st[s])
                continue;
            const int ok = uly_comm_agree_peer(c, s);
            if (ok < 0 || (ok && !uly_comm_shm_is_ready(c, s, v)))
                continue;
            if (ok && !failed) {
                /* cma, pull: s's block for this rank, from s's memory into this rank's own */
                const comm_block theirs =
                    to_heads ? (comm_block){usz(hbeg[r] * D->a.head_dim), usz(D->a.batch),
                                            usz(D->part.nc[s] * Hx * D->a.head_dim), usz(D->part.nc[s]),
                                            usz(hcnt[r] * D->a.head_dim), usz(Hx * D->a.head_dim)}
                             : uly_dist_head_block(D, r, hcnt[s]);
                if ((failed = uly_comm_cma_read(c, s, dst, &recv[s], uly_comm_shm_peer_addr(c, s), &theirs, es)))
                    snprintf(why, sizeof why, "%s", uly_last_error());
            }
            st[s] = ok ? 1 : 2;
            left--;
            moved = 1;
        }
        if (!moved && own) {
            uly_dist_copy_block(dst, &recv[r], src, &send[r], es);
            own = 0;
        } else if (!moved) {
            uly_comm_shm_pause();
        }
    }
    if (own)
        uly_dist_copy_block(dst, &recv[r], src, &send[r], es);
    /* cma: done with every peer only now, with this rank's status, so that
     * every rank learns from its readers whether any of them failed */
    for (int i = 1; i < P && cma; i++)
        if (st[(r + i) % P] == 1)
            uly_comm_shm_done_failed(c, (r + i) % P, v, failed ? why : NULL);
    for (int i = 1; i < P; i++) {
        const int s = (r + i) % P;
        while (st[s] == 1 && !uly_comm_shm_is_done(c, s, v))
            uly_comm_shm_pause();
    }
    int rc = uly_comm_agree_end(c);
    if (!rc)
        rc = uly_comm_shm_error(c);
    if (!rc && failed)
        rc = uly_set_error(failed, "%s", why);
    for (int i = 1; i < P && !rc && cma; i++)
        if (st[(r + i) % P] == 1)
            rc = uly_comm_shm_peer_failed(c, (r + i) % P, v);
    if (!rc && !cma && to_heads && out && out != win && head_bytes)
        memcpy(out, win, head_bytes);
    return rc;
}

static int a2a_move(uly_dist *D, int which, int to_heads, const char *in, int64_t Hx, const int64_t *hbeg,
                    const int64_t *hcnt, char *out)
{
    const int P = D->P, r = D->rank;
    const size_t es = D->es;
    const int mode = P > 1 ? call_mode(D, which) : ULY_A2A_PACK;
    if (P > 1 && D->a2a.mode == ULY_A2A_AUTO && !D->a2a.auto_mode[which]) {
        /* a measured call starts on all ranks together: the call's agreement
         * settled first (it waits for every rank; left open, a rank arriving
         * late would add its lateness to the mode measured) */
        int rc = uly_comm_agree_end(D->c);
        if (rc)
            return rc;
    }
    const double t0 = uly_comm_wtime(); /* every mode: the whole call, own block included */
    if (mode == ULY_A2A_SHM || mode == ULY_A2A_CMA) {
        int rc = a2a_shm(D, which, to_heads, in, Hx, hbeg, hcnt, out, mode == ULY_A2A_CMA);
        if (!rc && D->a2a.mode == ULY_A2A_AUTO && !D->a2a.auto_mode[which])
            rc = auto_record(D, which, mode, uly_comm_wtime() - t0);
        return rc;
    }
    int rc = uly_comm_agree_end(D->c); /* the call's agreement, before any MPI call */
    if (rc)
        return rc;
    comm_block *send = D->a2a.sbk, *recv = D->a2a.rbk;
    int send_inplace, recv_inplace;
    a2a_blocks(D, which, to_heads, in, Hx, hbeg, hcnt, out, send, recv, &send_inplace, &recv_inplace);
    comm_block self_s = send[r], self_r = recv[r];
    send[r].rows = recv[r].rows = 0; /* the own block does not go through MPI */
    if (mode == ULY_A2A_DATATYPE) {
        rc = uly_comm_alltoallw_blocks(D->c, in, send, out, recv, es);
    } else if (mode == ULY_A2A_PIPELINE) {
        size_t soff = 0, roff = 0;
        for (int s = 0; s < P; s++) {
            D->a2a.sc[s] = uly_dist_block_elems(&send[s]);
            D->a2a.rc[s] = uly_dist_block_elems(&recv[s]);
            D->a2a.sd[s] = send_inplace ? send[s].off : soff;
            D->a2a.rd[s] = recv_inplace ? recv[s].off : roff;
            soff += D->a2a.sc[s];
            roff += D->a2a.rc[s];
        }
        pipe_ctx x = {D, in, out, send, recv, send_inplace, recv_inplace};
        rc = uly_comm_alltoall_pipelined(D->c, send_inplace ? in : D->a2a.sstage, D->a2a.sc, D->a2a.sd,
                                         recv_inplace ? out : D->a2a.rstage, D->a2a.rc, D->a2a.rd, es,
                                         send_inplace ? NULL : pipe_pack, recv_inplace ? NULL : pipe_unpack, &x,
                                         &D->a2a.pipe);
    } else {
        size_t soff = 0, roff = 0;
        for (int s = 0; s < P; s++) {
            D->a2a.sc[s] = uly_dist_block_elems(&send[s]);
            D->a2a.rc[s] = uly_dist_block_elems(&recv[s]);
            D->a2a.sd[s] = send_inplace ? send[s].off : soff;
            D->a2a.rd[s] = recv_inplace ? recv[s].off : roff;
            if (!send_inplace && D->a2a.sc[s]) {
                comm_block packed = {soff, send[s].batches, send[s].rows * send[s].len, send[s].rows,
                                     send[s].len, send[s].len};
                uly_dist_copy_block(D->a2a.sstage, &packed, in, &send[s], es);
            }
            soff += D->a2a.sc[s];
            roff += D->a2a.rc[s];
        }
        rc = uly_comm_alltoallv(D->c, send_inplace ? in : D->a2a.sstage, D->a2a.sc, D->a2a.sd,
                            recv_inplace ? out : D->a2a.rstage, D->a2a.rc, D->a2a.rd, es);
        for (int s = 0; s < P && !rc && !recv_inplace; s++) {
            comm_block packed = {D->a2a.rd[s], recv[s].batches, recv[s].rows * recv[s].len, recv[s].rows,
                                 recv[s].len, recv[s].len};
            if (D->a2a.rc[s])
                uly_dist_copy_block(out, &recv[s], D->a2a.rstage, &packed, es);
        }
    }
    send[r] = self_s;
    recv[r] = self_r;
    if (!rc && P > 1 && D->a2a.mode == ULY_A2A_AUTO && !D->a2a.auto_mode[which])
        rc = auto_record(D, which, mode, uly_comm_wtime() - t0);
    return rc;
}

void *uly_dist_head_buffer(uly_dist *D, int which)
{
    if (!D || D->P == 1 || which < 0 || which >= ULY_A2A_COUNT)
        return NULL;
    void *const buf[ULY_A2A_COUNT] = {D->qh, D->kh, D->vh, D->oh, D->doh, D->dqh, D->dkh, D->dvh};
    return buf[which];
}

int uly_dist_a2a_mode(const uly_dist *D, int which)
{
    if (!D || which < 0 || which >= ULY_A2A_COUNT)
        return ULY_A2A_AUTO;
    if (D->a2a.mode != ULY_A2A_AUTO)
        return D->a2a.mode;
    return D->a2a.auto_mode[which];
}

const char *uly_dist_a2a_note(const uly_dist *D)
{
    return D && D->a2a.note[0] ? D->a2a.note : NULL;
}

const char *uly_a2a_mode_name(int mode)
{
    static const char *const names[ULY_A2A_MODES] = {"auto", "pack", "datatype", "pipeline", "shm", "cma"};
    return mode >= 0 && mode < ULY_A2A_MODES ? names[mode] : "unknown";
}

int uly_dist_a2a_seq_to_heads(uly_dist *D, int which, const char *in, int64_t Hin, const int64_t *hbeg,
                            const int64_t *hcnt, char *out)
{
    return a2a_move(D, which, 1, in, Hin, hbeg, hcnt, out);
}

int uly_dist_a2a_heads_to_seq(uly_dist *D, int which, const char *in, int64_t Hout, const int64_t *hbeg,
                            const int64_t *hcnt, char *out)
{
    return a2a_move(D, which, 0, in, Hout, hbeg, hcnt, out);
}

/* KV gradients back to sequence shards: per KV head, or per query head then folded. */
int uly_dist_a2a_kv_grad(uly_dist *D, int which, const char *in, char *out)
{
    if (!D->part.rep)
        return uly_dist_a2a_heads_to_seq(D, which, in, D->a.kv_heads, D->part.kb, D->part.kc, out);
    int rc = uly_dist_a2a_heads_to_seq(D, which, in, D->a.heads, D->part.hb, D->part.hc, D->expanded);
    if (rc)
        return rc;
    if (D->part.nc[D->rank] == 0)
        return ULY_OK;
    /* tokens of all batches are consecutive rows here: fold B * n_r rows */
    uly_attn_desc one = D->a;
    one.batch = 1;
    return uly_kv_fold(&one, 0, D->a.heads, D->a.batch * D->part.nc[D->rank], D->expanded, out);
}

int uly_dist_a2a(uly_dist *D, int which, const void *in, void *out)
{
    if (!D)
        return uly_set_error(ULY_EINVAL, "distributed context is NULL");
    int local = ULY_OK;
    if (which < 0 || which >= ULY_A2A_COUNT)
        local = uly_set_error(ULY_EINVAL, "unknown all-to-all %d", which);
    else if ((!in || !out) && D->part.nc[D->rank] > 0)
        local = uly_set_error(ULY_EINVAL, "all-to-all %s: NULL buffer", uly_a2a_name(which));
    int rc = uly_dist_call_agree_open(D, 100 + which, local);
    if (rc)
        return rc;
    switch (which) {
    case ULY_A2A_Q:
    case ULY_A2A_DO:
        return uly_dist_a2a_seq_to_heads(D, which, in, D->a.heads, D->part.hb, D->part.hc, out);
    case ULY_A2A_K:
    case ULY_A2A_V:
        return uly_dist_a2a_seq_to_heads(D, which, in, D->a.kv_heads, D->part.kb, D->part.kc, out);
    case ULY_A2A_O:
    case ULY_A2A_DQ:
        return uly_dist_a2a_heads_to_seq(D, which, in, D->a.heads, D->part.hb, D->part.hc, out);
    default:
        return uly_dist_a2a_kv_grad(D, which, in, out);
    }
}

/* Every call starts with an agreement on (kind, call number, local status). */
static const char *const call_names[3] = {"the operation (forward, backward or a2a kind)", "the call sequence",
                                          "the overlap mode (uly_dist_set_overlap)"};

int uly_dist_call_agree(uly_dist *D, int kind, int local)
{
    int64_t v[3] = {kind, (int64_t)D->calls++, D->ovl.mode};
    return uly_comm_agree(D->c, local, 3, v, call_names);
}

/* The same agreement, left open when the window's flags carry it: the next
 * all-to-all settles it (a2a_shm after exchanging with the peers already
 * there, any other mode before its first MPI call), and so does every other
 * path before anything collective (uly_comm_agree_end).  A local failure is
 * settled at once and returned. */
int uly_dist_call_agree_open(uly_dist *D, int kind, int local)
{
    int64_t v[3] = {kind, (int64_t)D->calls++, D->ovl.mode};
    return uly_comm_agree_begin(D->c, local, 3, v, call_names);
}
