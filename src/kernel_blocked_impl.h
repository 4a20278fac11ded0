/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kernel_blocked_impl.h -- the blocked attention kernel, written once for a
 * generic element type and instantiated by kernel_blocked.c for float and
 * double.  Included with these macros defined:
 *   REAL   element type        GEMM   cblas_sgemm / cblas_dgemm
 *   ROW_MAX, EXP2_SHIFT_SUM(_TO), DS_ROW   row operations of vexp.h
 *   SFX(name) name with a type suffix
 *
 * Scores are kept in base 2 (vexp.h): S = scale log2(e) Q K^T, so that
 * exp(scale q.k - x) = 2^(S - x log2(e)) needs no multiplication per score.
 *
 * Forward (per work item = batch b, local head h, query block): online
 * softmax over the visible key blocks, two GEMMs per block:
 *   S   = scale log2(e) * Q_blk K_blk^T          (mq x nk, beta = 1 on zeros)
 *   m'  = max(m, rowmax S);  P = 2^(S - m');  c = 2^(m - m')
 *   l   = c l + rowsum P;    O_acc = c O_acc + P V_blk
 * then O = O_acc / l and LSE = m ln 2 + log l (natural log, in double).
 *
 * Backward (FlashAttention-2 recomputation) in two deterministic passes, so
 * that no output element is ever accumulated by two threads:
 *   pass KV, per (b, KV head, key block): for each of its query heads in
 *     increasing order, for each visible query block in increasing order:
 *       P = 2^(S - LSE log2(e)), dP = dO V^T, dS = P (dP - D)   with D = rowsum(dO O)
 *       dV_h += P^T dO,  dK_h += scale dS^T Q
 *     then dK = dK_h0 + dK_h1 + ... (left fold; or stored per head when
 *     kv_expanded), same for dV.
 *   pass Q, per (b, head, query block): dQ = scale sum_blocks dS K.
 * Seven GEMMs per visible block pair in pass KV + Q: 2 (S, dP) are recomputed.
 *
 * Single pass (5 GEMMs), per (b, KV head) for all its key blocks in
 * increasing order: the KV-pass step above, plus dQ += scale dS K_blk
 * straight into dQ (zeroed first).  Each dQ block then receives the same
 * GEMM calls as in pass Q, in the same (increasing key block) order; the
 * pairs that only one of the two enumerations visits have dS = 0 and add
 * exact zeros.  So both schedules give the same bits, and the choice is
 * made per call from the number of work items and threads.
 *
 * Every work item performs the same operations on the same values whatever
 * the thread count, the schedule, or the set of heads held by the caller:
 * results are bitwise reproducible.
 */

/* S = scale * Q K^T for one block (scale: G->scale2, base 2); masked entries set to -inf.  q0, k0 are
 * local rows; the mask is evaluated at global positions (+ qoff, + koff). */
static void SFX(block_scores)(const uly_attn_desc *a, const struct blk_geom *G, int64_t b,
                              const REAL *qp, int64_t ldq, const REAL *kp, int64_t ldk, int64_t q0,
                              int64_t mq, int64_t k0, int64_t nk, REAL scale, REAL beta, REAL *S,
                              int64_t lds)
{
    const int64_t d = a->head_dim, gq0 = G->qoff + q0, gk0 = G->koff + k0;
    GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)mq, (int)nk, (int)d, scale, qp, (int)ldq,
         kp, (int)ldk, beta, S, (int)lds);
    int64_t lo_first, hi_first, lo_last, hi_last;
    uly_visible_range(a, b, gq0, &lo_first, &hi_first);
    uly_visible_range(a, b, gq0 + mq - 1, &lo_last, &hi_last);
    if (lo_last <= gk0 && hi_first >= gk0 + nk)
        return; /* every pair visible */
    /* a row's visible keys are one interval [lo, hi): the masked entries are
     * the two runs outside it, filled without a test per entry */
    for (int64_t i = 0; i < mq; i++) {
        int64_t lo, hi;
        uly_visible_range(a, b, gq0 + i, &lo, &hi);
        REAL *row = S + i * lds;
        int64_t jlo = lo - gk0, jhi = hi - gk0;
        jlo = jlo < 0 ? 0 : jlo > nk ? nk : jlo;
        jhi = jhi < jlo ? jlo : jhi > nk ? nk : jhi;
        for (int64_t j = 0; j < jlo; j++)
            row[j] = -INFINITY;
        for (int64_t j = jhi; j < nk; j++)
            row[j] = -INFINITY;
    }
}

/* [*lo, *hi) clamped to [0, n) and turned into blocks of bs: [*b0, *b1). */
static void SFX(block_span)(int64_t lo, int64_t hi, int64_t n, int64_t bs, int64_t *b0, int64_t *b1)
{
    if (lo < 0)
        lo = 0;
    if (hi > n)
        hi = n;
    if (hi <= lo) {
        *b0 = *b1 = 0;
        return;
    }
    *b0 = lo / bs;
    *b1 = (hi - 1) / bs + 1;
}

/* Key blocks [*kb0, *kb1) that intersect the visible keys of local rows
 * [q0, q0+mq) (the visible intervals' ends are non-decreasing in the row). */
static void SFX(key_blocks)(const uly_attn_desc *a, const struct blk_geom *G, int64_t b, int64_t q0,
                            int64_t mq, int64_t *kb0, int64_t *kb1)
{
    int64_t lo, hi, lo2, hi2;
    uly_visible_range(a, b, G->qoff + q0, &lo, &hi);
    uly_visible_range(a, b, G->qoff + q0 + mq - 1, &lo2, &hi2);
    SFX(block_span)(lo - G->koff, hi2 - G->koff, G->krows, G->bk, kb0, kb1);
}

/* Query blocks [*qb0, *qb1) whose rows see some key of local keys [k0, k0+nk). */
static void SFX(query_blocks)(const uly_attn_desc *a, const struct blk_geom *G, int64_t b, int64_t k0,
                              int64_t nk, int64_t *qb0, int64_t *qb1)
{
    int64_t lo, hi, lo2, hi2;
    uly_seen_by_range(a, b, G->koff + k0, &lo, &hi);
    uly_seen_by_range(a, b, G->koff + k0 + nk - 1, &lo2, &hi2);
    SFX(block_span)(lo - G->qoff, hi2 - G->qoff, G->qrows, G->bq, qb0, qb1);
}

static void SFX(fwd_item)(const uly_attn_desc *a, const struct blk_geom *G, int64_t item,
                          const REAL *q, const REAL *k, const REAL *v, REAL *o, REAL *lse,
                          REAL *ws)
{
    const int64_t Nq = G->qrows, Nk = G->krows, d = a->head_dim, bq = G->bq, bk = G->bk;
    const int64_t qb = item % G->nqb, hl = (item / G->nqb) % G->hq, b = item / G->nqb / G->hq;
    const int64_t q0 = qb * bq, mq = Nq - q0 < bq ? Nq - q0 : bq;
    const int64_t kvl = (G->hb + hl) / G->g - G->kvb;
    const int64_t ldq = G->hq * d, ldk = G->hk * d;
    const REAL *qp = q + ((b * Nq + q0) * G->hq + hl) * d;
    const REAL *kp = k + (b * Nk * G->hk + kvl) * d;
    const REAL *vp = v + (b * Nk * G->hk + kvl) * d;
    const int zp = G->fwd_zero_pass;    // S zeroed by the BLAS (beta = 0), P in place
    REAL *S = ws;                       // (bq, bk): layout of blk_ws_fwd
    REAL *P = zp ? S : ws + bq * bk;    // (bq, bk)
    REAL *acc = ws + 2 * bq * bk;       // (mq, d)
    REAL *m = acc + bq * d;             // (bq)
    REAL *l = m + bq;                   // (bq)
    for (int64_t i = 0; i < mq; i++) {
        m[i] = -INFINITY;
        l[i] = 0;
    }
    memset(acc, 0, (size_t)(mq * d) * sizeof *acc);
    /* S starts at +0 and the exp pass leaves +0 behind while it writes P
     * to its own buffer, so S = scale Q K^T runs with beta = 1: the same
     * bits as beta = 0, which only adds a pass zeroing S before the same
     * accumulation (doc/performance.md, tests/test_blocked.c) */
    if (!zp)
        memset(S, 0, (size_t)(mq * bk) * sizeof *S);
    if (G->stream)
        blk_rows(G, ULY_ROWS_NEED_Q, q0 + mq);
    int64_t kb0, kb1;
    SFX(key_blocks)(a, G, b, q0, mq, &kb0, &kb1);
    for (int64_t kb = kb0; kb < kb1; kb++) {
        const int64_t k0 = kb * bk, nk = Nk - k0 < bk ? Nk - k0 : bk;
        if (G->stream)
            blk_rows(G, ULY_ROWS_NEED_K, k0 + nk);
        SFX(block_scores)(a, G, b, qp, ldq, kp + k0 * ldk, ldk, q0, mq, k0, nk, (REAL)G->scale2, zp ? 0 : 1, S,
                          bk);
        for (int64_t i = 0; i < mq; i++) {
            REAL *row = S + i * bk, *prow = P + i * bk;
            REAL mx = ROW_MAX(row, nk);
            REAL mnew = mx > m[i] ? mx : m[i];
            if (mnew == -INFINITY) { /* nothing visible yet in this row */
                for (int64_t j = 0; j < nk; j++)
                    row[j] = prow[j] = 0;
                continue;
            }
            REAL rs = zp ? EXP2_SHIFT_SUM(row, nk, mnew) : EXP2_SHIFT_SUM_TO(row, prow, nk, mnew);
            /* 2^0 = 1 exactly: no call when the max did not move */
            REAL corr = m[i] == -INFINITY ? 0 : m[i] == mnew ? 1 : (REAL)exp2((double)m[i] - (double)mnew);
            l[i] = l[i] * corr + rs;
            m[i] = mnew;
            if (corr != 1) {
                REAL *ai = acc + i * d;
                for (int64_t c = 0; c < d; c++)
                    ai[c] *= corr;
            }
        }
        GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)mq, (int)d, (int)nk, 1, P, (int)bk,
             vp + k0 * ldk, (int)ldk, 1, acc, (int)d);
    }
    for (int64_t i = 0; i < mq; i++) {
        REAL *oi = o + ((b * Nq + q0 + i) * G->hq + hl) * d;
        if (l[i] == 0) { /* no visible key: O = 0, LSE = -inf */
            memset(oi, 0, (size_t)d * sizeof *oi);
            lse[(b * G->hq + hl) * Nq + q0 + i] = -INFINITY;
            continue;
        }
        REAL inv = 1 / l[i];
        const REAL *ai = acc + i * d;
        for (int64_t c = 0; c < d; c++)
            oi[c] = ai[c] * inv;
        lse[(b * G->hq + hl) * Nq + q0 + i] = (REAL)((double)m[i] * BLK_LN2 + log((double)l[i]));
    }
    if (G->stream && b == a->batch - 1 && hl == G->hq - 1) /* the last (batch, head): rows final */
        blk_rows(G, ULY_ROWS_DONE_Q, q0 + mq);
}

/* D_i = sum_c dO_ic O_ic for the rows of one query block (accumulated in
 * double, in increasing c).  Four rows at a time, each its own chain of
 * additions: the same sums (the same bits) as one row after the other,
 * without waiting for each addition before the next (the chain's latency
 * made this loop 5 % of the backward at d = 64). */
static void SFX(rows_D)(int64_t mq, int64_t d, const REAL *dop, const REAL *op, int64_t ld, REAL *D)
{
    int64_t i = 0;
    for (; i + 4 <= mq; i += 4) {
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        const REAL *a0 = dop + i * ld, *b0 = op + i * ld;
        for (int64_t c = 0; c < d; c++) {
            s0 += (double)a0[c] * (double)b0[c];
            s1 += (double)a0[ld + c] * (double)b0[ld + c];
            s2 += (double)a0[2 * ld + c] * (double)b0[2 * ld + c];
            s3 += (double)a0[3 * ld + c] * (double)b0[3 * ld + c];
        }
        D[i] = (REAL)s0;
        D[i + 1] = (REAL)s1;
        D[i + 2] = (REAL)s2;
        D[i + 3] = (REAL)s3;
    }
    for (; i < mq; i++) {
        double s = 0;
        for (int64_t c = 0; c < d; c++)
            s += (double)dop[i * ld + c] * (double)op[i * ld + c];
        D[i] = (REAL)s;
    }
}

/* dS for one block pair: S holds the scores on entry, P on exit; dP holds dS on exit. */
static void SFX(block_dS)(const uly_attn_desc *a, const struct blk_geom *G, int64_t b, const REAL *qp,
                          const REAL *dop, int64_t ldq, const REAL *kp, const REAL *vp, int64_t ldk,
                          int64_t q0, int64_t mq, int64_t k0, int64_t nk, const REAL *lse_rows,
                          const REAL *D, REAL *S, REAL *dP)
{
    const int64_t d = a->head_dim, bk = G->bk;
    SFX(block_scores)(a, G, b, qp, ldq, kp, ldk, q0, mq, k0, nk, (REAL)G->scale2, 0, S, bk);
    GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)mq, (int)nk, (int)d, 1, dop, (int)ldq, vp,
         (int)ldk, 0, dP, (int)bk);
    /* P = 2^(S - LSE log2(e)) and dS = P (dP - D) in one pass over the
     * block, P kept in registers between the two (the bits of the exp pass
     * followed by the dS pass) */
    for (int64_t i = 0; i < mq; i++) {
        if (lse_rows[i] == -INFINITY) { /* a row that sees nothing: P = 0 */
            memset(S + i * bk, 0, (size_t)nk * sizeof *S);
            DS_ROW(S + i * bk, dP + i * bk, nk, D[i]);
        } else {
            EXP2_DS_ROW(S + i * bk, dP + i * bk, nk, (REAL)((double)lse_rows[i] * BLK_LOG2E), D[i]);
        }
    }
}

/* dK, dV of key block kb of (batch b, local KV head kvl); with dq != NULL
 * also dQ += scale dS K_blk for every query block visited (single pass).
 * With slots (the split single pass: unit u = this key block of its item,
 * run by thread u mod T), the unit's steps, one per (head of the group,
 * query block) in order, each wait until unit u - 1 of the same item (kb > 0)
 * is past the same step, before touching that dQ block (or only passing it
 * on), then publish the step: every dQ block is updated in key-block order. */
static void SFX(bwd_kv_block)(const uly_attn_desc *a, const struct blk_geom *G, int64_t b, int64_t kvl,
                              int64_t kb, const REAL *q, const REAL *k, const REAL *v, const REAL *o,
                              const REAL *lse, const REAL *dout, REAL *dq, REAL *dk, REAL *dv, REAL *ws,
                              atomic_llong *slots, int64_t unit, int nt)
{
    const int64_t Nq = G->qrows, Nk = G->krows, d = a->head_dim, bq = G->bq, bk = G->bk;
    const int64_t k0 = kb * bk, nk = Nk - k0 < bk ? Nk - k0 : bk;
    const int64_t ldq = G->hq * d, ldk = G->hk * d;
    int64_t h_first, h_end;
    blk_group_heads(G, kvl, &h_first, &h_end);
    const REAL *kp = k + ((b * Nk + k0) * G->hk + kvl) * d;
    const REAL *vp = v + ((b * Nk + k0) * G->hk + kvl) * d;
    REAL *S = ws, *dP = ws + bq * bk;
    REAL *dKh = ws + 2 * bq * bk, *dVh = dKh + bk * d; // (nk, d) each: this head
    REAL *dKs = dVh + bk * d, *dVs = dKs + bk * d;     // (nk, d) each: folded
    REAL *D = dKh + (bq > 4 * bk ? bq : 4 * bk) * d; // (bq): layout of blk_ws_bwd
    /* the split pass: this unit's slot and its predecessor's (none for kb = 0) */
    atomic_llong *mine = slots ? slots + blk_slot_stride() * (unit % nt) : NULL;
    atomic_llong *prev = slots && kb > 0 ? slots + blk_slot_stride() * ((unit - 1) % nt) : NULL;
    const long long base = (long long)unit * G->split_stride;
    int64_t qb0, qb1;
    SFX(query_blocks)(a, G, b, k0, nk, &qb0, &qb1);
    if (G->stream)
        blk_rows(G, ULY_ROWS_NEED_K, k0 + nk);
    for (int64_t hg = h_first; hg < h_end; hg++) {
        const int64_t hl = hg - G->hb;
        const long long step0 = (long long)((hg - h_first) * G->nqb);
        memset(dKh, 0, (size_t)(2 * bk * d) * sizeof *dKh);
        for (int64_t qbi = 0; mine && qbi < qb0; qbi++) /* not visited: passed on */
            blk_step(prev, mine, base, G->split_stride, step0 + qbi);
        for (int64_t qbi = qb0; qbi < qb1; qbi++) {
            const int64_t q0 = qbi * bq, mq = Nq - q0 < bq ? Nq - q0 : bq;
            const REAL *qp = q + ((b * Nq + q0) * G->hq + hl) * d;
            const REAL *dop = dout + ((b * Nq + q0) * G->hq + hl) * d;
            const REAL *op = o + ((b * Nq + q0) * G->hq + hl) * d;
            if (G->stream)
                blk_rows(G, ULY_ROWS_NEED_Q, q0 + mq);
            SFX(rows_D)(mq, d, dop, op, ldq, D);
            SFX(block_dS)(a, G, b, qp, dop, ldq, kp, vp, ldk, q0, mq, k0, nk,
                          lse + (b * G->hq + hl) * Nq + q0, D, S, dP);
            GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nk, (int)d, (int)mq, 1, S, (int)bk,
                 dop, (int)ldq, 1, dVh, (int)d);
            GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nk, (int)d, (int)mq, (REAL)G->scale,
                 dP, (int)bk, qp, (int)ldq, 1, dKh, (int)d);
            if (prev)
                blk_wait_for(prev, (unit - 1) * G->split_stride + step0 + qbi + 1);
            if (dq) /* the Q pass's GEMM, into dQ directly */
                GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)mq, (int)d, (int)nk, (REAL)G->scale,
                     dP, (int)bk, kp, (int)ldk, 1, dq + ((b * Nq + q0) * G->hq + hl) * d, (int)ldq);
            if (mine)
                atomic_store_explicit(mine, base + step0 + qbi + 1, memory_order_release);
        }
        for (int64_t qbi = qb1 > qb0 ? qb1 : 0; mine && qbi < G->nqb; qbi++) {
            if (qbi >= qb0 && qbi < qb1)
                continue;
            blk_step(prev, mine, base, G->split_stride, step0 + qbi);
        }
        if (G->expanded) {
            for (int64_t j = 0; j < nk; j++) {
                memcpy(dk + ((b * Nk + k0 + j) * G->hq + hl) * d, dKh + j * d, (size_t)d * sizeof(REAL));
                memcpy(dv + ((b * Nk + k0 + j) * G->hq + hl) * d, dVh + j * d, (size_t)d * sizeof(REAL));
            }
        } else if (hg == h_first) {
            memcpy(dKs, dKh, (size_t)(2 * bk * d) * sizeof(REAL)); /* dKs, dVs follow dKh, dVh */
        } else {
            for (int64_t x = 0; x < 2 * bk * d; x++)
                dKs[x] += dKh[x];
        }
    }
    if (!G->expanded) {
        for (int64_t j = 0; j < nk; j++) {
            REAL *dkj = dk + ((b * Nk + k0 + j) * G->hk + kvl) * d;
            REAL *dvj = dv + ((b * Nk + k0 + j) * G->hk + kvl) * d;
            if (h_first < h_end) {
                memcpy(dkj, dKs + j * d, (size_t)d * sizeof(REAL));
                memcpy(dvj, dVs + j * d, (size_t)d * sizeof(REAL));
            } else {
                memset(dkj, 0, (size_t)d * sizeof(REAL));
                memset(dvj, 0, (size_t)d * sizeof(REAL));
            }
        }
    }
    if (mine) /* every step of this unit done (a partial KV group has fewer) */
        atomic_store_explicit(mine, base + G->split_stride - 1, memory_order_release);
    if (G->stream && b == a->batch - 1 && kvl == G->hk - 1) /* the last (batch, KV head): rows final */
        blk_rows(G, ULY_ROWS_DONE_K, k0 + nk);
    blk_progress(G);
}

static void SFX(bwd_kv_item)(const uly_attn_desc *a, const struct blk_geom *G, int64_t item,
                             const REAL *q, const REAL *k, const REAL *v, const REAL *o,
                             const REAL *lse, const REAL *dout, REAL *dk, REAL *dv, REAL *ws)
{
    const int64_t kb = item % G->nkb, kvl = (item / G->nkb) % G->hk, b = item / G->nkb / G->hk;
    SFX(bwd_kv_block)(a, G, b, kvl, kb, q, k, v, o, lse, dout, NULL, dk, dv, ws, NULL, 0, 1);
}

/* Single pass: zero the dQ rows of item (batch b, local KV head kvl)'s query heads. */
static void SFX(bwd_zero_dq)(const uly_attn_desc *a, const struct blk_geom *G, int64_t item, REAL *dq)
{
    const int64_t kvl = item % G->hk, b = item / G->hk, d = a->head_dim;
    int64_t h_first, h_end;
    blk_group_heads(G, kvl, &h_first, &h_end);
    for (int64_t i = 0; i < G->qrows && h_first < h_end; i++)
        memset(dq + ((b * G->qrows + i) * G->hq + (h_first - G->hb)) * d, 0,
               (size_t)((h_end - h_first) * d) * sizeof(REAL));
}

/* Single pass: work item (batch b, local KV head kvl), every key block. */
static void SFX(bwd_single_item)(const uly_attn_desc *a, const struct blk_geom *G, int64_t item,
                                 const REAL *q, const REAL *k, const REAL *v, const REAL *o,
                                 const REAL *lse, const REAL *dout, REAL *dq, REAL *dk, REAL *dv, REAL *ws)
{
    const int64_t kvl = item % G->hk, b = item / G->hk;
    for (int64_t kb = 0; kb < G->nkb; kb++)
        SFX(bwd_kv_block)(a, G, b, kvl, kb, q, k, v, o, lse, dout, dq, dk, dv, ws, NULL, 0, 1);
}

static void SFX(bwd_q_item)(const uly_attn_desc *a, const struct blk_geom *G, int64_t item,
                            const REAL *q, const REAL *k, const REAL *v, const REAL *o,
                            const REAL *lse, const REAL *dout, REAL *dq, REAL *ws)
{
    const int64_t Nq = G->qrows, Nk = G->krows, d = a->head_dim, bq = G->bq, bk = G->bk;
    const int64_t qb = item % G->nqb, hl = (item / G->nqb) % G->hq, b = item / G->nqb / G->hq;
    const int64_t q0 = qb * bq, mq = Nq - q0 < bq ? Nq - q0 : bq;
    const int64_t kvl = (G->hb + hl) / G->g - G->kvb;
    const int64_t ldq = G->hq * d, ldk = G->hk * d;
    const REAL *qp = q + ((b * Nq + q0) * G->hq + hl) * d;
    const REAL *dop = dout + ((b * Nq + q0) * G->hq + hl) * d;
    const REAL *op = o + ((b * Nq + q0) * G->hq + hl) * d;
    const REAL *kp = k + (b * Nk * G->hk + kvl) * d;
    const REAL *vp = v + (b * Nk * G->hk + kvl) * d;
    REAL *S = ws, *dP = ws + bq * bk, *acc = ws + 2 * bq * bk;
    REAL *D = acc + (bq > 4 * bk ? bq : 4 * bk) * d;
    SFX(rows_D)(mq, d, dop, op, ldq, D);
    memset(acc, 0, (size_t)(mq * d) * sizeof *acc);
    int64_t kb0, kb1;
    SFX(key_blocks)(a, G, b, q0, mq, &kb0, &kb1);
    for (int64_t kbi = kb0; kbi < kb1; kbi++) {
        const int64_t k0 = kbi * bk, nk = Nk - k0 < bk ? Nk - k0 : bk;
        SFX(block_dS)(a, G, b, qp, dop, ldq, kp + k0 * ldk, vp + k0 * ldk, ldk, q0, mq, k0, nk,
                      lse + (b * G->hq + hl) * Nq + q0, D, S, dP);
        GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)mq, (int)d, (int)nk, (REAL)G->scale,
             dP, (int)bk, kp + k0 * ldk, (int)ldk, 1, acc, (int)d);
    }
    for (int64_t i = 0; i < mq; i++)
        memcpy(dq + ((b * Nq + q0 + i) * G->hq + hl) * d, acc + i * d, (size_t)d * sizeof(REAL));
    blk_progress(G);
}

static int SFX(fwd)(const uly_attn_desc *a, const struct blk_geom *G, const REAL *q,
                    const REAL *k, const REAL *v, REAL *o, REAL *lse)
{
    REAL *ws = blk_workspace(G);
    if (!ws)
        return ULY_ENOMEM;
    const int64_t items = a->batch * G->hq * G->nqb;
    const size_t per = G->ws_per;
    blk_rows_begin(G);
#ifdef _OPENMP
#pragma omp parallel num_threads(G->threads)
#endif
    {
        REAL *my = ws + per * (size_t)blk_thread_id();
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
        for (int64_t it = 0; it < items; it++) {
            SFX(fwd_item)(a, G, it, q, k, v, o, lse, my);
            blk_progress(G);
        }
    }
    blk_rows_end(G, 1);
    uly_free(ws);
    return ULY_OK;
}

static int SFX(bwd)(const uly_attn_desc *a, const struct blk_geom *G, const REAL *q,
                    const REAL *k, const REAL *v, const REAL *o, const REAL *lse,
                    const REAL *dout, REAL *dq, REAL *dk, REAL *dv)
{
    REAL *ws = blk_workspace(G);
    if (!ws)
        return ULY_ENOMEM;
    const int64_t kv_items = a->batch * G->hk * G->nkb;
    const int64_t q_items = a->batch * G->hq * G->nqb;
    const int64_t single_items = a->batch * G->hk;
    const size_t per = G->ws_per;
    const int single = blk_bwd_single(G, single_items);
    /* the split single pass: unit u = (item u / nkb, key block u % nkb) runs
     * on thread u mod T, in increasing u; each thread's progress in its slot
     * (after every thread's workspace), -1 before its first unit */
    atomic_llong *slots = G->split ? (atomic_llong *)(void *)((char *)ws + G->slots_off) : NULL;
    for (int t = 0; slots && t < G->threads; t++)
        atomic_init(&slots[blk_slot_stride() * t], -1);
    const int64_t units = single_items * G->nkb;
    blk_rows_begin(G);
#ifdef _OPENMP
#pragma omp parallel num_threads(G->threads)
#endif
    {
        REAL *my = ws + per * (size_t)blk_thread_id();
        if (single) {
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
            for (int64_t it = 0; it < single_items; it++)
                SFX(bwd_zero_dq)(a, G, it, dq); /* the implicit barrier: every dQ row zeroed */
            if (slots) { /* the team may be smaller than asked for: its own size */
                const int nt = blk_team_size();
                for (int64_t u = blk_thread_id(); u < units; u += nt)
                    SFX(bwd_kv_block)(a, G, u / G->nkb / G->hk, u / G->nkb % G->hk, u % G->nkb, q, k, v, o, lse,
                                      dout, dq, dk, dv, my, slots, u, nt);
            } else {
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
                for (int64_t it = 0; it < single_items; it++)
                    SFX(bwd_single_item)(a, G, it, q, k, v, o, lse, dout, dq, dk, dv, my);
            }
        } else {
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
            for (int64_t it = 0; it < kv_items; it++)
                SFX(bwd_kv_item)(a, G, it, q, k, v, o, lse, dout, dk, dv, my);
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
            for (int64_t it = 0; it < q_items; it++)
                SFX(bwd_q_item)(a, G, it, q, k, v, o, lse, dout, dq, my);
        }
    }
    blk_rows_end(G, 0);
    uly_free(ws);
    return ULY_OK;
}
