/* SPDX-License-Identifier: Apache-2.0 */
/*
 * merge.c -- the exact merge of attention partials computed over disjoint
 * key sets (ring attention, doc/methods.md), and bfloat16 rounding used to
 * emulate partials stored in bf16 on GPUs.  Pure functions; no BLAS, no MPI.
 *
 * For one query row with partials (O_a, L_a) over keys A and (O_b, L_b) over
 * keys B (L = log-sum-exp of the scaled scores, O = softmax-weighted values):
 *   L   = m + log(exp(L_a - m) + exp(L_b - m)),   m = max(L_a, L_b)
 *   O   = exp(L_a - L) O_a + exp(L_b - L) O_b
 * which is the attention over A u B.  A side with L = -inf (no visible key)
 * has weight exactly 0, so a row with nothing visible anywhere keeps O = 0
 * and L = -inf; no NaN can arise.
 */
#include <math.h>
#include <string.h>

#include "internal.h"

static float bf16_round_f(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u) /* Inf, NaN: keep (quiet NaN stays NaN) */
        return x;
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even */
    u &= 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

void uly_round_bf16(uly_dtype t, void *x, size_t count)
{
    if (t == ULY_F32) {
        float *f = x;
        for (size_t i = 0; i < count; i++)
            f[i] = bf16_round_f(f[i]);
    } else {
        double *f = x;
        for (size_t i = 0; i < count; i++)
            f[i] = (double)bf16_round_f((float)f[i]);
    }
}

#define MERGE_BODY(T)                                                                   \
    do {                                                                                \
        T *O = o, *L = lse;                                                             \
        const T *Ot = o_t, *Lt = lse_t;                                                 \
        for (int64_t b = 0; b < batch; b++)                                             \
            for (int64_t h = 0; h < heads; h++)                                         \
                for (int64_t i = 0; i < n; i++) {                                       \
                    const int64_t x = (b * heads + h) * n + i;                          \
                    const double la = (double)L[x], lb = (double)Lt[x];                 \
                    const double m = la > lb ? la : lb;                                 \
                    T *orow = O + ((b * n + i) * heads + h) * head_dim;                 \
                    const T *trow = Ot + ((b * n + i) * heads + h) * head_dim;          \
                    if (m == -INFINITY)                                                 \
                        continue; /* nothing visible on either side */                  \
                    double wa = la == -INFINITY ? 0 : exp(la - m);                      \
                    double wb = lb == -INFINITY ? 0 : exp(lb - m);                      \
                    const double s = wa + wb;                                           \
                    wa /= s;                                                            \
                    wb /= s;                                                            \
                    for (int64_t c = 0; c < head_dim; c++)                              \
                        orow[c] = (T)(wa * (double)orow[c] + wb * (double)trow[c]);     \
                    L[x] = (T)(m + log(s));                                             \
                    if (bf16)                                                           \
                        uly_round_bf16(t, orow, (size_t)head_dim);                      \
                }                                                                       \
    } while (0)

int uly_attn_merge(uly_dtype t, int64_t batch, int64_t n, int64_t heads, int64_t head_dim, void *o,
                   void *lse, const void *o_t, const void *lse_t, int bf16)
{
    if (batch < 0 || n < 0 || heads < 0 || head_dim < 0 || (t != ULY_F32 && t != ULY_F64))
        return uly_set_error(ULY_EINVAL, "merge: negative size or unknown dtype");
    if (batch * n * heads == 0)
        return ULY_OK;
    if (!o || !lse || !o_t || !lse_t)
        return uly_set_error(ULY_EINVAL, "merge: NULL tensor");
    if (t == ULY_F32)
        MERGE_BODY(float);
    else
        MERGE_BODY(double);
    return ULY_OK;
}
