/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kernel_ref.c -- reference attention in double precision: the oracle.
 *
 * Straightforward row-at-a-time softmax attention with O(N) extra memory.
 * Clarity over speed: every other kernel and every distributed run is judged
 * against these two functions.  No BLAS, no MPI.
 *
 *   S_ij = scale * q_i . k_j           (visible pairs only)
 *   P_ij = exp(S_ij - m_i) / l_i        m_i = max_j S_ij, l_i = sum_j exp(S_ij - m_i)
 *   o_i  = sum_j P_ij v_j               lse_i = m_i + log(l_i)
 * Backward (dP_ij = do_i . v_j, D_i = sum_j P_ij dP_ij):
 *   dS_ij = P_ij (dP_ij - D_i)
 *   dq_i = scale sum_j dS_ij k_j   dk_j += scale dS_ij q_i   dv_j += P_ij do_i
 */
#include <math.h>
#include <string.h>

#include "internal.h"

/* Scores of row i against its visible keys [lo, hi): s[j - lo]; returns the max. */
static double ref_scores(const uly_attn_desc *a, double scale, const double *qi,
                         const double *kbase, int64_t ldk, int64_t lo, int64_t hi, double *s)
{
    const int64_t d = a->head_dim;
    double m = -INFINITY;
    for (int64_t j = lo; j < hi; j++) {
        const double *kj = kbase + j * ldk;
        double acc = 0;
        for (int64_t c = 0; c < d; c++)
            acc += qi[c] * kj[c];
        acc *= scale;
        s[j - lo] = acc;
        if (acc > m)
            m = acc;
    }
    return m;
}

/* Turn scores into normalised probabilities in place; returns lse. */
static double ref_softmax(double *s, int64_t n, double m)
{
    double l = 0;
    for (int64_t j = 0; j < n; j++) {
        s[j] = exp(s[j] - m);
        l += s[j];
    }
    for (int64_t j = 0; j < n; j++)
        s[j] /= l;
    return m + log(l);
}

/* After each row of each (batch, head): the caller's progress hook, if any. */
static void ref_progress(const uly_ref_opts *opts, int64_t done, int64_t total)
{
    if (opts && opts->progress)
        opts->progress(opts->progress_user, done, total);
}

int uly_ref_fwd(const uly_attn_desc *a, const double *q, const double *k,
                const double *v, double *o, double *lse)
{
    return uly_ref_fwd_ex(a, q, k, v, o, lse, NULL);
}

int uly_ref_fwd_ex(const uly_attn_desc *a, const double *q, const double *k,
                   const double *v, double *o, double *lse, const uly_ref_opts *opts)
{
    int rc = uly_attn_desc_check(a);
    if (rc)
        return rc;
    if (!q || !k || !v || !o)
        return uly_set_error(ULY_EINVAL, "reference forward: NULL tensor");
    const int64_t B = a->batch, N = a->seq, H = a->heads, Hk = a->kv_heads, d = a->head_dim;
    const int64_t g = H / Hk;
    const double scale = uly_attn_scale(a);
    double *s = uly_malloc((size_t)N * sizeof *s); // (N) one row of scores
    if (!s)
        return uly_set_error(ULY_ENOMEM, "reference forward: cannot allocate %lld scores", (long long)N);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t kh = h / g;
            const double *kb = k + (b * N * Hk + kh) * d; // rows stride Hk*d
            const double *vb = v + (b * N * Hk + kh) * d;
            for (int64_t i = 0; i < N; i++) {
                int64_t lo, hi;
                uly_visible_range(a, b, i, &lo, &hi);
                const double *qi = q + ((b * N + i) * H + h) * d;
                double m = ref_scores(a, scale, qi, kb, Hk * d, lo, hi, s);
                double L = ref_softmax(s, hi - lo, m);
                double *oi = o + ((b * N + i) * H + h) * d;
                for (int64_t c = 0; c < d; c++)
                    oi[c] = 0;
                for (int64_t j = lo; j < hi; j++) {
                    const double *vj = vb + j * Hk * d;
                    for (int64_t c = 0; c < d; c++)
                        oi[c] += s[j - lo] * vj[c];
                }
                if (lse)
                    lse[(b * H + h) * N + i] = L;
                ref_progress(opts, (b * H + h) * N + i + 1, B * H * N);
            }
        }
    uly_free(s);
    return ULY_OK;
}

int uly_ref_bwd(const uly_attn_desc *a, const double *q, const double *k,
                const double *v, const double *dout, double *dq, double *dk,
                double *dv)
{
    return uly_ref_bwd_ex(a, q, k, v, dout, dq, dk, dv, NULL);
}

int uly_ref_bwd_ex(const uly_attn_desc *a, const double *q, const double *k,
                   const double *v, const double *dout, double *dq, double *dk,
                   double *dv, const uly_ref_opts *opts)
{
    int rc = uly_attn_desc_check(a);
    if (rc)
        return rc;
    if (!q || !k || !v || !dout || !dq || !dk || !dv)
        return uly_set_error(ULY_EINVAL, "reference backward: NULL tensor");
    const int64_t B = a->batch, N = a->seq, H = a->heads, Hk = a->kv_heads, d = a->head_dim;
    const int64_t g = H / Hk;
    const double scale = uly_attn_scale(a);
    double *s = uly_malloc(2 * (size_t)N * sizeof *s); // (2, N): P row, dP row
    if (!s)
        return uly_set_error(ULY_ENOMEM, "reference backward: cannot allocate %lld scores", (long long)N);
    double *dp = s + N;
    memset(dq, 0, (size_t)(B * N * H * d) * sizeof *dq);
    memset(dk, 0, (size_t)(B * N * Hk * d) * sizeof *dk);
    memset(dv, 0, (size_t)(B * N * Hk * d) * sizeof *dv);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t kh = h / g, ldk = Hk * d;
            const double *kb = k + (b * N * Hk + kh) * d;
            const double *vb = v + (b * N * Hk + kh) * d;
            double *dkb = dk + (b * N * Hk + kh) * d;
            double *dvb = dv + (b * N * Hk + kh) * d;
            for (int64_t i = 0; i < N; i++) {
                int64_t lo, hi;
                uly_visible_range(a, b, i, &lo, &hi);
                const double *qi = q + ((b * N + i) * H + h) * d;
                const double *doi = dout + ((b * N + i) * H + h) * d;
                double m = ref_scores(a, scale, qi, kb, ldk, lo, hi, s);
                ref_softmax(s, hi - lo, m);
                double D = 0;
                for (int64_t j = lo; j < hi; j++) {
                    const double *vj = vb + j * ldk;
                    double acc = 0;
                    for (int64_t c = 0; c < d; c++)
                        acc += doi[c] * vj[c];
                    dp[j - lo] = acc;
                    D += s[j - lo] * acc;
                }
                double *dqi = dq + ((b * N + i) * H + h) * d;
                for (int64_t j = lo; j < hi; j++) {
                    double p = s[j - lo], ds = p * (dp[j - lo] - D) * scale;
                    const double *kj = kb + j * ldk;
                    double *dkj = dkb + j * ldk, *dvj = dvb + j * ldk;
                    for (int64_t c = 0; c < d; c++) {
                        dqi[c] += ds * kj[c];
                        dkj[c] += ds * qi[c];
                        dvj[c] += p * doi[c];
                    }
                }
                ref_progress(opts, (b * H + h) * N + i + 1, B * H * N);
            }
        }
    uly_free(s);
    return ULY_OK;
}
