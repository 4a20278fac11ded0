/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist_ovl.c -- overlap of communication with computation over messages
 * (ulysses_dist.h): each rank's heads in K chunks, the chunk all-to-alls
 * as per-peer non-blocking messages, waited for and sent source by source
 * from the kernel's rows hook, MPI progressed from its progress hook.  Also
 * what the path through the window (dist_ovs.c) shares: the accounting and
 * trace, the chunk kernels, the replicated-KV fold at the end.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist_impl.h"

/* The least time (s) between two MPI tests of the kernel's progress hook
 * (none within a node with cross-memory attach; see ovl_progress). */
#define OVL_TEST_EVERY 0.02

/* ------------------------------------------------------------ overlap */

/* Tags of the chunk all-to-alls: one per tensor kind and chunk parity, so
 * that the input all-to-alls of two chunks, or the output ones, in flight
 * at once and an input and an output one never match each other's messages
 * (two of the same kind and parity are never in flight together). */
#define OVL_TAG(which, c) (ULY_COMM_TAG_A2A + 1 + (which) + ULY_A2A_COUNT * ((c) & 1))
#define OVL_IN(D, c) (&(D)->ovl.op[(c) & 1])
#define OVL_OUT(D, c) (&(D)->ovl.op[2 + ((c) & 1)])

/* Send the block of tensor pt for peer s (packed unless its side is
 * contiguous), or copy the own block; once. */
static int ovl_send(uly_dist *D, ovl_op *o, ovl_part *pt, int s)
{
    const size_t es = D->es;
    if (pt->sent[s])
        return ULY_OK;
    pt->sent[s] = 1;
    if (s == D->rank) {
        if (D->part.nc[s] > 0)
            uly_dist_copy_block(pt->out, &pt->recv[s], pt->in, &pt->send[s], es);
        return ULY_OK;
    }
    const comm_block *b = &pt->send[s];
    const size_t n = uly_dist_block_elems(b);
    const char *buf = pt->in + b->off * es;
    if (n && pt->sstage) {
        comm_block packed = {pt->soff[s], b->batches, b->rows * b->len, b->rows, b->len, b->len};
        uly_dist_copy_block(pt->sstage, &packed, pt->in, b, es);
        buf = pt->sstage + pt->soff[s] * es;
    }
    return uly_comm_nb_post(D->c, &o->q, 0, (void *)buf, n, es, s, pt->tag);
}

/* Wait for source s's block of tensor pt and unpack it; once. */
static int ovl_recv(uly_dist *D, ovl_op *o, ovl_part *pt, int s)
{
    if (pt->got[s])
        return ULY_OK;
    int rc = uly_comm_nb_wait_some(&o->q, pt->rfirst[s], pt->rn[s]);
    if (rc)
        return rc;
    pt->got[s] = 1;
    const comm_block *b = &pt->recv[s];
    if (pt->rstage && uly_dist_block_elems(b)) {
        comm_block packed = {pt->roff[s], b->batches, b->rows * b->len, b->rows, b->len, b->len};
        uly_dist_copy_block(pt->out, b, pt->rstage, &packed, D->es);
    }
    return ULY_OK;
}

/* Add one tensor of chunk c's all-to-all to op `o` (see a2a_move for the
 * two sides): every receive is posted; with send_now every block is sent
 * (the own one copied) at once, otherwise by ovl_send when it is ready. */
static int ovl_start(uly_dist *D, ovl_op *o, int c, int which, int to_heads, const char *in, int64_t Hx,
                     const int64_t *hbeg, const int64_t *hcnt, char *out, int send_now)
{
    const int P = D->P, r = D->rank;
    const size_t es = D->es;
    ovl_part *pt = &o->part[o->n];
    char *seqst = D->ovl.ostage + (size_t)((o - D->ovl.op) * 3 + o->n) * (D->ovl.ost_seq + D->ovl.ost_head) * es;
    char *headst = seqst + D->ovl.ost_seq * es;
    int send_inplace, recv_inplace;
    o->n++;
    uly_dist_a2a_tables(D, which, to_heads, Hx, hbeg, hcnt, pt->send, pt->recv, &send_inplace, &recv_inplace);
    pt->tag = OVL_TAG(which, c);
    pt->which = which;
    pt->in = in;
    pt->out = out;
    pt->sstage = send_inplace ? NULL : to_heads ? seqst : headst;
    pt->rstage = recv_inplace ? NULL : to_heads ? headst : seqst;
    int rc = ULY_OK;
    size_t roff = 0, soff = 0;
    for (int s = 0; s < P; s++) {
        pt->sent[s] = 0;
        pt->got[s] = s == r;
        pt->rfirst[s] = pt->rn[s] = 0;
    }
    for (int i = 1; i < P && !rc; i++) { /* every receive first */
        const int s = (r - i + P) % P;
        const size_t n = uly_dist_block_elems(&pt->recv[s]);
        pt->roff[s] = roff;
        pt->rfirst[s] = o->q.n;
        rc = uly_comm_nb_post(D->c, &o->q, 1, pt->rstage ? pt->rstage + roff * es : out + pt->recv[s].off * es, n,
                              es, s, pt->tag);
        pt->rn[s] = o->q.n - pt->rfirst[s];
        roff += n;
    }
    for (int i = 1; i < P; i++) {
        const int s = (r + i) % P;
        pt->soff[s] = soff;
        soff += pt->sstage ? uly_dist_block_elems(&pt->send[s]) : 0;
    }
    for (int i = 0; i < P && send_now && !rc; i++)
        rc = ovl_send(D, o, pt, (r + i) % P);
    return rc;
}

/* Complete op `o`: send what is not sent yet, wait for every message,
 * unpack what came through a stage and was not unpacked yet. */
static int ovl_finish(uly_dist *D, ovl_op *o)
{
    const int P = D->P;
    int rc = ULY_OK;
    for (int t = 0; t < o->n && !rc; t++)
        for (int s = 0; s < P && !rc; s++)
            rc = ovl_send(D, o, &o->part[t], s);
    if (!rc)
        rc = uly_comm_nb_wait(&o->q);
    for (int t = 0; t < o->n && !rc; t++)
        for (int s = 0; s < P && !rc; s++)
            rc = ovl_recv(D, o, &o->part[t], s); /* the requests are complete: unpacks only */
    o->n = 0;
    return rc;
}

/* CPU time of the calling thread (seconds). */
double uly_dist_thread_cpu(void)
{
    struct timespec t;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0)
        return 0;
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Record one event of the running call in the trace, if any. */
void uly_dist_ovl_event(uly_dist *D, int kind, int which, int peer, int ready, double t0, double wall, double cpu)
{
    if (!D->ovl.tr)
        return;
    if (D->ovl.tr_n < D->ovl.tr_cap)
        D->ovl.tr[D->ovl.tr_n] = (uly_ovl_event){t0 - D->ovl.t_call, wall, cpu, D->ovl.fwd,
                                         kind == ULY_OVL_EV_AGREE ? -1 : D->ovl.c, kind, which, peer, ready};
    D->ovl.tr_n++;
}

/* CLOCK_MONOTONIC (seconds): one clock for every process of a node. */
double uly_dist_mono_now(void)
{
    struct timespec t;
    if (clock_gettime(CLOCK_MONOTONIC, &t) != 0)
        return 0;
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/*
 * The kernel's progress hook: let MPI move the messages in flight, at most
 * every OVL_TEST_EVERY, and not at all when every rank is on one node and
 * can read every other's memory (D->shm.cma, probed at creation): there Open
 * MPI's receiver copies a large message with cross-memory attach when it
 * waits for it, so a test only moves that copy
 * earlier on the same core, while with more ranks than cores every test
 * that finds nothing to do yields the core (Open MPI's
 * mpi_yield_when_idle).  Measured with 4 ranks on 2 cores, N = 8192
 * (doc/performance.md, overlap "Round four"): tests after every block
 * 400-870 ms of wall time per rank and iteration, at most every 20 ms
 * 300-870 ms, none 0 ms, with the waits for input blocks unchanged.  The
 * wall and CPU time of the tests are both accounted.
 */
static void ovl_progress(void *user)
{
    uly_dist *D = user;
    if (D->shm.cma)
        return;
    const double t0 = uly_comm_wtime();
    if (t0 - D->ovl.t_test < OVL_TEST_EVERY)
        return;
    D->ovl.t_test = t0;
    const double c0 = uly_dist_thread_cpu();
    for (int i = 0; i < 4; i++) {
        int done;
        if (D->ovl.op[i].q.n && !D->ovl.err)
            D->ovl.err = uly_comm_nb_test(&D->ovl.op[i].q, &done);
    }
    D->ovl.acc->test += uly_comm_wtime() - t0;
    D->ovl.acc->test_cpu += uly_dist_thread_cpu() - c0;
}

/* Account a wait of the kernel's hooks for source s's block of tensor
 * `which`, started at t0 (wall) and c0 (CPU); ready: it had arrived. */
void uly_dist_ovl_waited(uly_dist *D, int which, int s, int ready, double t0, double c0)
{
    uly_ovl_account *A = D->ovl.acc;
    const double w = uly_comm_wtime() - t0, u = uly_dist_thread_cpu() - c0;
    A->wait += w;
    A->wait_cpu += u;
    A->waits++;
    if (ready) {
        A->wait_ready += w;
        A->waits_ready++;
    }
    if (D->ovl.c == 0)
        A->wait_first += w;
    if (w > A->wait_max)
        A->wait_max = w;
    uly_dist_ovl_event(D, ULY_OVL_EV_WAIT, which, s, ready, t0, w, u);
}

/* Hook: wait for source s's block of input tensor pt and unpack it, accounted. */
static int ovl_need(uly_dist *D, ovl_op *o, ovl_part *pt, int s)
{
    if (pt->got[s])
        return ULY_OK;
    const double t0 = uly_comm_wtime(), c0 = uly_dist_thread_cpu();
    int ready = 0;
    int rc = uly_comm_nb_test_some(&o->q, pt->rfirst[s], pt->rn[s], &ready);
    if (!rc)
        rc = ovl_recv(D, o, pt, s);
    uly_dist_ovl_waited(D, pt->which, s, ready, t0, c0);
    return rc;
}

/* Hook: pack and post the block of output tensor pt for peer s, accounted. */
static int ovl_done(uly_dist *D, ovl_op *o, ovl_part *pt, int s)
{
    if (pt->sent[s])
        return ULY_OK;
    const double t0 = uly_comm_wtime(), c0 = uly_dist_thread_cpu();
    const int rc = ovl_send(D, o, pt, s);
    const double w = uly_comm_wtime() - t0, u = uly_dist_thread_cpu() - c0;
    D->ovl.acc->send += w;
    D->ovl.acc->send_cpu += u;
    uly_dist_ovl_event(D, ULY_OVL_EV_SEND, pt->which, s, 0, t0, w, u);
    return rc;
}

/*
 * The kernel's rows hook for chunk D->ovl.c: a source's block of an input
 * tensor is waited for when the kernel first reaches its rows (sources in
 * sequence order, the kernel's fixed order), and an output block is sent as
 * soon as the kernel says its rows are final.  Which tensors: the input op
 * holds K, V, Q (forward) or dO; the output op O or dQ, dK, dV.
 */
static void ovl_rows(void *user, int ev, int64_t end)
{
    uly_dist *D = user;
    const int P = D->P, c = D->ovl.c, fwd = D->ovl.fwd;
    int t0_, t1_, need = ev == ULY_ROWS_NEED_Q || ev == ULY_ROWS_NEED_K;
    ovl_op *o = need ? OVL_IN(D, c) : OVL_OUT(D, c);
    switch (ev) {
    case ULY_ROWS_NEED_Q: t0_ = fwd ? 2 : 0; t1_ = t0_ + 1; break;
    case ULY_ROWS_NEED_K: t0_ = 0; t1_ = fwd ? 2 : 0; break;
    case ULY_ROWS_DONE_Q: t0_ = 0; t1_ = 1; break;
    default: t0_ = 1; t1_ = fwd ? 1 : 3; break;
    }
    for (int s = 0; s < P && !D->ovl.err; s++) {
        if (need ? D->part.nb[s] >= end : D->part.nb[s] + D->part.nc[s] > end)
            break;
        for (int t = t0_; t < t1_ && !D->ovl.err; t++)
            D->ovl.err = need ? ovl_need(D, o, &o->part[t], s) : ovl_done(D, o, &o->part[t], s);
    }
}

/* Element offset of this rank's chunk c in a head-side buffer of x heads per
 * chunk offset (B, N, ., d) chunk-major. */
size_t uly_dist_ovl_off(const uly_dist *D, int64_t heads_before)
{
    return usz(D->a.batch * D->a.seq * D->a.head_dim * heads_before) * D->es;
}

int uly_dist_ovl_use(const uly_dist *D)
{
    return D->P > 1 && D->ovl.K >= 2 && D->ovl.mode != ULY_OVERLAP_OFF;
}

/* Kernel options of this rank's chunk c, with the progress and rows hooks. */
static uly_kernel_opts ovl_kopts(uly_dist *D, int c)
{
    uly_kernel_opts k = D->o.kernel;
    k.head_begin = D->ovl.cqb[c * D->P + D->rank];
    k.head_count = D->ovl.cqc[c * D->P + D->rank];
    k.kv_expanded = D->part.rep;
    k.progress = D->ovl.hook_progress;
    k.progress_user = D;
    k.rows = D->ovl.hook_rows;
    k.rows_user = D;
    return k;
}

/* Start the input all-to-all of chunk c: K, V, then Q (forward; in that
 * order, since every query row needs the keys) or dO. */
static int ovl_start_in(uly_dist *D, int c, int fwd, const char *q, const char *k, const char *v)
{
    const int P = D->P;
    ovl_op *o = OVL_IN(D, c);
    const int64_t *qb = D->ovl.cqb + c * P, *qc = D->ovl.cqc + c * P, *kb = D->ovl.ckb + c * P, *kc = D->ovl.ckc + c * P;
    if (!fwd)
        return ovl_start(D, o, c, ULY_A2A_DO, 1, q, D->a.heads, qb, qc, (char *)D->doh + uly_dist_ovl_off(D, D->ovl.cqo[c]), 1);
    int rc = ovl_start(D, o, c, ULY_A2A_K, 1, k, D->a.kv_heads, kb, kc, (char *)D->kh + uly_dist_ovl_off(D, D->ovl.cko[c]), 0);
    if (!rc)
        rc = ovl_start(D, o, c, ULY_A2A_V, 1, v, D->a.kv_heads, kb, kc, (char *)D->vh + uly_dist_ovl_off(D, D->ovl.cko[c]), 0);
    if (!rc)
        rc = ovl_start(D, o, c, ULY_A2A_Q, 1, q, D->a.heads, qb, qc, (char *)D->qh + uly_dist_ovl_off(D, D->ovl.cqo[c]), 0);
    /* every peer's first query block needs all of K and V: those go out
     * first, to every peer, then Q; the own blocks are copied last */
    for (int i = 1; i < P && !rc; i++) {
        rc = ovl_send(D, o, &o->part[0], (D->rank + i) % P);
        if (!rc)
            rc = ovl_send(D, o, &o->part[1], (D->rank + i) % P);
    }
    for (int i = 1; i < P && !rc; i++)
        rc = ovl_send(D, o, &o->part[2], (D->rank + i) % P);
    for (int x = 0; x < 3 && !rc; x++)
        rc = ovl_send(D, o, &o->part[x], D->rank);
    return rc;
}

/* Post the receives of chunk c's output all-to-all, O (forward) or dQ, dK,
 * dV; the blocks go out as the kernel finishes their rows (ovl_rows). */
static int ovl_start_out(uly_dist *D, int c, int fwd, char *y0, char *dk, char *dv)
{
    const int P = D->P;
    ovl_op *o = OVL_OUT(D, c);
    const int64_t *qb = D->ovl.cqb + c * P, *qc = D->ovl.cqc + c * P, *kb = D->ovl.ckb + c * P, *kc = D->ovl.ckc + c * P;
    if (fwd)
        return ovl_start(D, o, c, ULY_A2A_O, 0, (char *)D->oh + uly_dist_ovl_off(D, D->ovl.cqo[c]), D->a.heads, qb, qc, y0, 0);
    int rc = ovl_start(D, o, c, ULY_A2A_DQ, 0, (char *)D->dqh + uly_dist_ovl_off(D, D->ovl.cqo[c]), D->a.heads, qb, qc, y0, 0);
    if (D->part.rep) { /* per query head into the expanded buffers; folded at the end */
        if (!rc)
            rc = ovl_start(D, o, c, ULY_A2A_DK, 0, (char *)D->dkh + uly_dist_ovl_off(D, D->ovl.cqo[c]), D->a.heads, qb, qc,
                           D->expanded, 0);
        if (!rc)
            rc = ovl_start(D, o, c, ULY_A2A_DV, 0, (char *)D->dvh + uly_dist_ovl_off(D, D->ovl.cqo[c]), D->a.heads, qb, qc,
                           D->ovl.expanded2, 0);
    } else {
        if (!rc)
            rc = ovl_start(D, o, c, ULY_A2A_DK, 0, (char *)D->dkh + uly_dist_ovl_off(D, D->ovl.cko[c]), D->a.kv_heads, kb, kc, dk,
                           0);
        if (!rc)
            rc = ovl_start(D, o, c, ULY_A2A_DV, 0, (char *)D->dvh + uly_dist_ovl_off(D, D->ovl.cko[c]), D->a.kv_heads, kb, kc, dv,
                           0);
    }
    return rc;
}

/* LSE of chunk c: (B, cqc, N) at the chunk's offset. */
static char *ovl_lse(const uly_dist *D, int c)
{
    const size_t off = usz(D->a.batch * D->a.seq * D->ovl.cqo[c]) * D->es;
    return (D->a.batch > 1 ? (char *)D->ovl.lse_ch : (char *)D->lse) + off;
}

/* Chunk c's kernel (forward or backward) on this rank's chunk buffers, with
 * the hooks (a plug-in gets the progress hook only: it may read its inputs
 * in any order, so they are all there before it runs). */
static int ovl_kernel(uly_dist *D, int c, int fwd)
{
    uly_kernel_opts ko = ovl_kopts(D, c);
    if (D->o.attn)
        ko.rows = NULL;
    const size_t qo = uly_dist_ovl_off(D, D->ovl.cqo[c]), ko_ = uly_dist_ovl_off(D, D->ovl.cko[c]);
    const size_t go = D->part.rep ? qo : ko_; /* KV gradients: per query head when replicated */
    char *qh = (char *)D->qh + qo, *kh = (char *)D->kh + ko_, *vh = (char *)D->vh + ko_;
    char *oh = (char *)D->oh + qo, *lse = ovl_lse(D, c);
    if (fwd)
        return D->o.attn ? D->o.attn->fwd(D->o.attn->user, &D->a, &ko, qh, kh, vh, oh, lse)
                         : uly_attn_fwd(&D->a, &ko, qh, kh, vh, oh, lse);
    char *doh = (char *)D->doh + qo, *dqh = (char *)D->dqh + qo;
    char *dkh = (char *)D->dkh + go, *dvh = (char *)D->dvh + go;
    return D->o.attn ? D->o.attn->bwd(D->o.attn->user, &D->a, &ko, qh, kh, vh, oh, lse, doh, dqh, dkh, dvh)
                     : uly_attn_bwd(&D->a, &ko, qh, kh, vh, oh, lse, doh, dqh, dkh, dvh);
}

/* After the last chunk: fold the replicated KV gradients (backward), put the
 * LSE in (B, H_r, N) for uly_dist_lse (forward, B > 1). */
int uly_dist_ovl_tail(uly_dist *D, int fwd, void *y1, void *y2)
{
    const int K = D->ovl.K, P = D->P, r = D->rank;
    int rc = ULY_OK;
    if (!fwd && D->part.rep && D->part.nc[r] > 0) {
        uly_attn_desc one = D->a;
        one.batch = 1;
        rc = uly_kv_fold(&one, 0, D->a.heads, D->a.batch * D->part.nc[r], D->expanded, y1);
        if (!rc)
            rc = uly_kv_fold(&one, 0, D->a.heads, D->a.batch * D->part.nc[r], D->ovl.expanded2, y2);
    }
    if (!rc && fwd && D->a.batch > 1) {
        const int64_t B = D->a.batch, N = D->a.seq, h_r = D->part.hc[r];
        for (int c = 0; c < K; c++) {
            const int64_t cc = D->ovl.cqc[c * P + r];
            for (int64_t b = 0; b < B; b++)
                memcpy((char *)D->lse + usz((b * h_r + D->ovl.cqo[c]) * N) * D->es,
                       ovl_lse(D, c) + usz(b * cc * N) * D->es, usz(cc * N) * D->es);
        }
    }
    return rc;
}

/* Chunk c's kernel, accounted (wall and CPU time, end stamp, trace event)
 * from *t, *u, which it advances to its end; a failure goes to *lrc. */
void uly_dist_ovl_timed_kernel(uly_dist *D, int c, int fwd, int *lrc, double *t, double *u)
{
    uly_ovl_account *A = D->ovl.acc;
    const int k = ovl_kernel(D, c, fwd);
    if (k && !*lrc)
        *lrc = k;
    const double t1 = uly_comm_wtime(), u1 = uly_dist_thread_cpu();
    A->kernel += t1 - *t;
    A->kernel_cpu += u1 - *u;
    A->kernel_end = uly_dist_mono_now();
    uly_dist_ovl_event(D, ULY_OVL_EV_KERNEL, -1, -1, 0, *t, t1 - *t, u1 - *u);
    *t = t1;
    *u = u1;
}

/*
 * Forward (fwd = 1) or backward of the chunked path:
 *   start in(0)
 *   for c: start in(c+1); post the receives of out(c) |
 *          attention(c): waits for each source's block of in(c) when it
 *          reaches its rows, sends each block of out(c) when its rows are
 *          final, progresses everything in flight between blocks |
 *          finish in(c); send the rest of out(c); finish out(c-1)
 *   finish out(K-1)
 * A failed kernel does not stop the schedule (every rank makes the same
 * calls); its status is returned in *lrc for the caller's agreement.
 */
int uly_dist_ovl_run(uly_dist *D, int fwd, const void *x0, const void *x1, const void *x2, void *y0, void *y1,
                   void *y2, int *lrc, double *t_in, double *t_attn, double *t_out)
{
    const int K = D->ovl.K, P = D->P;
    uly_ovl_account *A = D->ovl.acc;
    double tin = 0, tout = 0;
    D->ovl.hook_progress = ovl_progress;
    D->ovl.hook_rows = ovl_rows;
    D->ovl.err = ULY_OK;
    D->ovl.fwd = fwd;
    D->ovl.c = 0;
    double t = uly_comm_wtime(), u = uly_dist_thread_cpu();
    int rc = ovl_start_in(D, 0, fwd, x0, x1, x2);
    tin += uly_comm_wtime() - t;
    for (int c = 0; c < K && !rc; c++) {
        D->ovl.c = c;
        if (c + 1 < K)
            rc = ovl_start_in(D, c + 1, fwd, x0, x1, x2);
        double t1 = uly_comm_wtime();
        tin += t1 - t;
        if (!rc)
            rc = ovl_start_out(D, c, fwd, y0, y1, y2);
        if (!rc && D->o.attn) /* a plug-in may ignore the rows hook: all of in(c) first */
            rc = ovl_finish(D, OVL_IN(D, c));
        const double t2 = uly_comm_wtime();
        uly_dist_ovl_event(D, ULY_OVL_EV_START, -1, -1, 0, t, t2 - t, uly_dist_thread_cpu() - u);
        tout += t2 - t1;
        if (rc)
            break;
        t = uly_comm_wtime();
        u = uly_dist_thread_cpu();
        uly_dist_ovl_timed_kernel(D, c, fwd, lrc, &t, &u);
        rc = D->ovl.err;
        if (!rc)
            rc = ovl_finish(D, OVL_IN(D, c));
        t1 = uly_comm_wtime();
        tin += t1 - t;
        for (int x = 0; x < OVL_OUT(D, c)->n && !rc; x++) /* what the kernel did not send */
            for (int s = 0; s < P && !rc; s++)
                rc = ovl_send(D, OVL_OUT(D, c), &OVL_OUT(D, c)->part[x], s);
        if (!rc && c > 0)
            rc = ovl_finish(D, OVL_OUT(D, c - 1));
        tout += uly_comm_wtime() - t1;
        uly_dist_ovl_event(D, ULY_OVL_EV_FINISH, -1, -1, 0, t, uly_comm_wtime() - t, uly_dist_thread_cpu() - u);
        t = uly_comm_wtime();
        u = uly_dist_thread_cpu();
    }
    t = uly_comm_wtime();
    u = uly_dist_thread_cpu();
    if (!rc)
        rc = ovl_finish(D, OVL_OUT(D, K - 1));
    if (!rc)
        rc = uly_dist_ovl_tail(D, fwd, y1, y2);
    tout += uly_comm_wtime() - t;
    uly_dist_ovl_event(D, ULY_OVL_EV_FINISH, -1, -1, 0, t, uly_comm_wtime() - t, uly_dist_thread_cpu() - u);
    if (rc) /* leave nothing in flight */
        for (int i = 0; i < 4; i++) {
            uly_comm_nb_free(&D->ovl.op[i].q);
            D->ovl.op[i].n = 0;
        }
    D->ovl.t_prog = A->wait + A->send + A->test;
    *t_in = tin;
    *t_attn = A->kernel - D->ovl.t_prog;
    *t_out = tout;
    return rc;
}

int uly_dist_trace(uly_dist *D, uly_ovl_event *ev, size_t cap)
{
    if (!D)
        return uly_set_error(ULY_EINVAL, "distributed context is NULL");
    D->ovl.tr = ev;
    D->ovl.tr_cap = ev ? cap : 0;
    D->ovl.tr_n = 0;
    return ULY_OK;
}

size_t uly_dist_trace_count(const uly_dist *D)
{
    return D ? D->ovl.tr_n : 0;
}
