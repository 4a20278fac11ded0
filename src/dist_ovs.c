/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist_ovs.c -- overlap of communication with computation through the
 * shared-memory window (every rank on one node, K >= 2): one copy per byte
 * straight into and out of the peers' chunk buffers, synchronised by flags
 * in each rank's flag area.  The schedule's accounting and kernels are
 * dist_ovl.c's.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "dist_impl.h"

/*
 * The overlapped path through the window (every rank on one node): one copy
 * per byte, as in the plain shm mode, chunk by chunk.
 *   in:  each rank copies its rows of chunk c straight into every peer's
 *        chunk buffer (qh, kh, vh or doh, at the peer's chunk offset) and
 *        raises its input flag in that peer's flag area: K (step 1), V (2),
 *        then Q or dO (step 3); the peer's kernel waits for a source's flag when
 *        it first reaches that source's rows (ovs_rows);
 *   out: the kernel raises the done flag of (chunk, kind) in its own area
 *        as output rows become final (kind 0: O or dQ, kind 1: dK and dV),
 *        valued by how many sources' rows are final; each rank copies its
 *        rows out of a peer's chunk buffer once that peer's flag covers it,
 *        between kernel blocks (ovs_progress), after each chunk, and at the
 *        end (waiting);
 *   end: each rank raises a release flag in every peer's area once it has
 *        copied everything out of it, and returns only when every peer's
 *        inputs have arrived and every peer has released its buffers.
 * So no peer touches a rank's buffers after its call returns, and every
 * rank is in the call (the agreement before it is settled) before anything
 * is written into its buffers: the invariants of the shm all-to-all, whose
 * calls can come before and after.  Flag values grow with every call
 * (ovs_seq, the same on every rank): in = seq * 64 + 3 c + step, done =
 * seq << 24 | sources final, release = seq.  Nothing here can fail: a
 * failed kernel still raises its done flags, its status goes to the
 * agreement after the call, so no rank waits for one that returned.
 */
static void *ovs_flag(const uly_dist *D, int s, int i)
{
    return D->ovs.area[s] + (size_t)i * OVS_LINE;
}

static uint64_t ovs_in_value(const uly_dist *D, int c, int step)
{
    return D->ovs.seq * 64 + (uint64_t)(3 * c + step);
}

static uint64_t ovs_done_value(const uly_dist *D, int n)
{
    return (D->ovs.seq << 24) | (uint64_t)n;
}

/* Heads of rank s's chunks before chunk c, per query head (q) or KV head. */
static int64_t ovs_before(const uly_dist *D, int q, int c, int s)
{
    const int64_t *cnt = q ? D->ovl.cqc : D->ovl.ckc;
    int64_t h = 0;
    for (int i = 0; i < c; i++)
        h += cnt[i * D->P + s];
    return h;
}

/* Whether tensor `which` has a block per query head (KV gradients: when
 * the KV heads are replicated), else per KV head. */
static int ovs_per_query(const uly_dist *D, int which)
{
    return which == ULY_A2A_Q || which == ULY_A2A_DO || which == ULY_A2A_O || which == ULY_A2A_DQ ||
           (D->part.rep && (which == ULY_A2A_DK || which == ULY_A2A_DV));
}

/* The byte counters of one overlapped call, as the plain path counts them. */
static void ovs_count(uly_dist *D, int fwd)
{
    static const int wf[4] = {ULY_A2A_Q, ULY_A2A_K, ULY_A2A_V, ULY_A2A_O};
    static const int wb[4] = {ULY_A2A_DO, ULY_A2A_DQ, ULY_A2A_DK, ULY_A2A_DV};
    const int P = D->P;
    int x, y;
    for (int c = 0; c < D->ovl.K; c++)
        for (int i = 0; i < 4; i++) {
            const int w = fwd ? wf[i] : wb[i], q = ovs_per_query(D, w);
            uly_dist_a2a_tables(D, w, w != ULY_A2A_O && w != ULY_A2A_DQ && w != ULY_A2A_DK && w != ULY_A2A_DV,
                       q ? D->a.heads : D->a.kv_heads, (q ? D->ovl.cqb : D->ovl.ckb) + c * P, (q ? D->ovl.cqc : D->ovl.ckc) + c * P,
                       D->a2a.sbk, D->a2a.rbk, &x, &y);
        }
}

/* Rank s's chunk c of head-side tensor `which` (this process's mapping). */
static char *ovs_chunk(const uly_dist *D, int s, int c, int which)
{
    size_t off[ULY_A2A_COUNT];
    uly_dist_head_layout(D, s, off);
    return D->shm.peer[s] + off[which] + uly_dist_ovl_off(D, ovs_before(D, ovs_per_query(D, which), c, s));
}

/* Account a copy of wall time w and CPU time u. */
static void ovs_copied(uly_dist *D, double w, double u)
{
    D->ovl.acc->copy += w;
    D->ovl.acc->copy_cpu += u;
}

/* Chunk c's input all-to-all: this rank's rows of every input tensor straight
 * into every peer's chunk buffers (K and V to every peer first: every peer's
 * first query block needs them), a flag after each step; the own rows last. */
static void ovs_start_in(uly_dist *D, int c, int fwd, const char *x0, const char *x1, const char *x2)
{
    const int P = D->P, r = D->rank;
    const double t0 = uly_comm_wtime(), c0 = uly_dist_thread_cpu();
    for (int step = fwd ? 2 : 3; step <= 3; step++) /* K and V, then Q (dO) */
        for (int i = 1; i <= P; i++) {
            const int s = (r + i) % P;
            const int ws[3] = {step == 3 ? (fwd ? ULY_A2A_Q : ULY_A2A_DO) : ULY_A2A_K, ULY_A2A_V, -1};
            const char *xs[2] = {step == 3 ? x0 : x1, x2};
            for (int j = 0; j < (step == 3 ? 1 : 2); j++) {
                const int w = ws[j], q = ovs_per_query(D, w);
                const int64_t *hb = (q ? D->ovl.cqb : D->ovl.ckb) + c * P, *hc = (q ? D->ovl.cqc : D->ovl.ckc) + c * P;
                const comm_block src = uly_dist_seq_block(D, s, q ? D->a.heads : D->a.kv_heads, hb, hc);
                const comm_block dst = uly_dist_head_block(D, r, hc[s]);
                uly_dist_copy_block(ovs_chunk(D, s, c, w), &dst, xs[j], &src, D->es);
                if (s != r) /* step 1: K, 2: V, 3: Q or dO */
                    uly_comm_shm_flag_set(D->c, ovs_flag(D, s, OVS_IN(D, r)), ovs_in_value(D, c, step == 3 ? 3 : 1 + j));
            }
        }
    ovs_copied(D, uly_comm_wtime() - t0, uly_dist_thread_cpu() - c0);
}

/* Wait until source s's input flag reaches v; returns whether it had. */
static int ovs_wait_flag(uly_dist *D, const void *flag, uint64_t v)
{
    if (uly_comm_shm_flag_reached(D->c, flag, v))
        return 1;
    while (!uly_comm_shm_flag_reached(D->c, flag, v))
        uly_comm_shm_pause();
    return 0;
}

/* Wait for input step `step` of the running chunk from the sources whose rows
 * start below end (sequence order), accounted as the kernel's waits when
 * acct (inside the kernel's hooks). */
static void ovs_need(uly_dist *D, int step, int64_t end, int acct)
{
    const int P = D->P, r = D->rank;
    const uint64_t v = ovs_in_value(D, D->ovl.c, step);
    for (int s = 0; s < P && D->part.nb[s] < end; s++) {
        if (s == r || D->ovs.seen[4 * s + step] >= v)
            continue;
        const double t0 = uly_comm_wtime(), c0 = uly_dist_thread_cpu();
        const int ready = ovs_wait_flag(D, ovs_flag(D, r, OVS_IN(D, s)), v);
        D->ovs.seen[4 * s + step] = v;
        if (acct)
            uly_dist_ovl_waited(D, step == 3 ? (D->ovl.fwd ? ULY_A2A_Q : ULY_A2A_DO) : step == 2 ? ULY_A2A_V : ULY_A2A_K, s,
                       ready, t0, c0);
    }
}

/* Raise the done flag of the running chunk's output kind: the rows of the
 * first n sources are final. */
static void ovs_publish(uly_dist *D, int kind, int n)
{
    const uint64_t v = ovs_done_value(D, n);
    if (v <= D->ovs.pub[kind])
        return;
    D->ovs.pub[kind] = v;
    uly_comm_shm_flag_set(D->c, ovs_flag(D, D->rank, OVS_DONE(D, D->ovl.c, kind)), v);
}

/* Copy this rank's rows of output kind `kind` of chunk c out of rank s's
 * chunk buffers into the call's outputs (replicated KV: the per-query-head
 * buffers the tail folds). */
static void ovs_pull(uly_dist *D, int c, int kind, int s)
{
    const int P = D->P, r = D->rank;
    const int ws[2] = {kind ? ULY_A2A_DK : D->ovl.fwd ? ULY_A2A_O : ULY_A2A_DQ, kind ? ULY_A2A_DV : -1};
    for (int j = 0; j < 2 && ws[j] >= 0; j++) {
        const int w = ws[j], q = ovs_per_query(D, w);
        const int64_t *hb = (q ? D->ovl.cqb : D->ovl.ckb) + c * P, *hc = (q ? D->ovl.cqc : D->ovl.ckc) + c * P;
        char *out = !kind ? D->ovs.y[0] : D->part.rep ? (j ? D->ovl.expanded2 : D->expanded) : D->ovs.y[1 + j];
        const comm_block dst = uly_dist_seq_block(D, s, q ? D->a.heads : D->a.kv_heads, hb, hc);
        const comm_block src = uly_dist_head_block(D, r, hc[s]);
        uly_dist_copy_block(out, &dst, ovs_chunk(D, s, c, w), &src, D->es);
    }
}

/* Copy out every output block of chunks up to `upto` whose rows are final
 * (wait: waiting for each), accounted as the kernel's sends when acct. */
static void ovs_collect(uly_dist *D, int upto, int wait, int acct)
{
    const int P = D->P, r = D->rank, kinds = D->ovl.fwd ? 1 : 2;
    const uint64_t v = ovs_done_value(D, r + 1);
    for (int c = 0; c <= upto; c++)
        for (int kind = 0; kind < kinds; kind++)
            for (int i = 1; i <= P; i++) {
                const int s = (r + i) % P;
                unsigned char *got = &D->ovs.got[(c * 2 + kind) * P + s];
                if (*got)
                    continue;
                const void *f = ovs_flag(D, s, OVS_DONE(D, c, kind));
                if (D->part.nc[r] > 0 && !uly_comm_shm_flag_reached(D->c, f, v)) {
                    if (!wait)
                        continue;
                    ovs_wait_flag(D, f, v);
                }
                *got = 1;
                const double t0 = uly_comm_wtime(), c0 = uly_dist_thread_cpu();
                ovs_pull(D, c, kind, s);
                const double w = uly_comm_wtime() - t0, u = uly_dist_thread_cpu() - c0;
                ovs_copied(D, w, u);
                if (acct) {
                    D->ovl.acc->send += w;
                    D->ovl.acc->send_cpu += u;
                    uly_dist_ovl_event(D, ULY_OVL_EV_SEND, kind ? ULY_A2A_DK : D->ovl.fwd ? ULY_A2A_O : ULY_A2A_DQ, s, 0, t0,
                              w, u);
                }
            }
}

/* The kernel's progress hook: copy out what the peers have finished. */
static void ovs_progress(void *user)
{
    uly_dist *D = user;
    ovs_collect(D, D->ovl.c, 0, 1);
}

/* The kernel's rows hook: wait for the sources' inputs (NEED), raise the
 * done flags (DONE). */
static void ovs_rows(void *user, int ev, int64_t end)
{
    uly_dist *D = user;
    if (ev == ULY_ROWS_NEED_Q || ev == ULY_ROWS_NEED_K) {
        if (ev == ULY_ROWS_NEED_Q) {
            ovs_need(D, 3, end, 1);
        } else if (D->ovl.fwd) { /* the backward's K, V are there since the forward */
            ovs_need(D, 1, end, 1);
            ovs_need(D, 2, end, 1);
        }
        return;
    }
    int n = 0;
    while (n < D->P && D->part.nb[n] + D->part.nc[n] <= end)
        n++;
    ovs_publish(D, ev == ULY_ROWS_DONE_Q ? 0 : 1, n);
}

/* uly_dist_ovl_run through the window (see above). */
int uly_dist_ovs_run(uly_dist *D, int fwd, const void *x0, const void *x1, const void *x2, void *y0, void *y1,
                   void *y2, int *lrc, double *t_in, double *t_attn, double *t_out)
{
    const int K = D->ovl.K, P = D->P, r = D->rank;
    uly_ovl_account *A = D->ovl.acc;
    double tin = 0, tout = 0;
    D->ovs.seq++;
    D->ovl.hook_progress = ovs_progress;
    D->ovl.hook_rows = ovs_rows;
    D->ovl.err = ULY_OK;
    D->ovl.fwd = fwd;
    D->ovl.c = 0;
    D->ovs.y[0] = y0;
    D->ovs.y[1] = y1;
    D->ovs.y[2] = y2;
    memset(D->ovs.got, 0, 2 * (size_t)(K * P));
    ovs_count(D, fwd);
    double t = uly_comm_wtime(), u = uly_dist_thread_cpu();
    ovs_start_in(D, 0, fwd, x0, x1, x2);
    for (int c = 0; c < K; c++) {
        D->ovl.c = c;
        D->ovs.pub[0] = D->ovs.pub[1] = 0;
        if (c + 1 < K)
            ovs_start_in(D, c + 1, fwd, x0, x1, x2);
        if (D->o.attn) { /* a plug-in gets all of its inputs first */
            ovs_need(D, 2, D->a.seq, 0);
            ovs_need(D, 3, D->a.seq, 0);
        }
        double t1 = uly_comm_wtime();
        uly_dist_ovl_event(D, ULY_OVL_EV_START, -1, -1, 0, t, t1 - t, uly_dist_thread_cpu() - u);
        tin += t1 - t;
        t = t1;
        u = uly_dist_thread_cpu();
        uly_dist_ovl_timed_kernel(D, c, fwd, lrc, &t, &u);
        /* every output row of the chunk is final now (also after a failed
         * kernel or a plug-in that does not announce rows) */
        ovs_publish(D, 0, P);
        if (!fwd)
            ovs_publish(D, 1, P);
        ovs_need(D, 3, D->a.seq, 0); /* what a failed kernel did not wait for */
        ovs_collect(D, c, 0, 0);
        tout += uly_comm_wtime() - t;
        uly_dist_ovl_event(D, ULY_OVL_EV_FINISH, -1, -1, 0, t, uly_comm_wtime() - t, uly_dist_thread_cpu() - u);
        t = uly_comm_wtime();
        u = uly_dist_thread_cpu();
    }
    ovs_collect(D, K - 1, 1, 0);
    for (int i = 1; i < P; i++) /* done with every peer's buffers */
        uly_comm_shm_flag_set(D->c, ovs_flag(D, (r + i) % P, OVS_REL(D, r)), D->ovs.seq);
    for (int i = 1; i < P; i++) /* and every peer with this rank's */
        ovs_wait_flag(D, ovs_flag(D, r, OVS_REL(D, (r + i) % P)), D->ovs.seq);
    const int rc = uly_dist_ovl_tail(D, fwd, y1, y2);
    if (rc && !*lrc)
        *lrc = rc;
    tout += uly_comm_wtime() - t;
    uly_dist_ovl_event(D, ULY_OVL_EV_FINISH, -1, -1, 0, t, uly_comm_wtime() - t, uly_dist_thread_cpu() - u);
    D->ovl.t_prog = A->wait + A->send + A->test;
    *t_in = tin;
    *t_attn = A->kernel - D->ovl.t_prog;
    *t_out = tout;
    return ULY_OK;
}
