/*
 * vexp.h -- the element-wise parts of softmax, vectorised with GCC/Clang
 * vector extensions (8 lanes of float) and compiled twice (AVX2 and the
 * baseline ISA, chosen at run time by target_clones).  Neither clone uses
 * FMA, and every lane does the same IEEE operations in the same order, so
 * both clones give bit-identical results: the kernels stay deterministic
 * whatever the machine dispatches to.
 *
 * exp: Cephes-style expf.  x = n ln2 + r with |r| <= ln2/2 (n rounded with
 * the 1.5*2^23 trick, exact IEEE arithmetic), a degree-6 polynomial for e^r,
 * and 2^n built in the exponent bits.  About 2 ulp on [-87, 88]; inputs
 * below -87.3 (including -inf, used for masked scores) give exactly 0.
 * Inputs must not be NaN (the driver rejects non-finite tensors).
 *
 * Row reductions use the 8 lanes as 8 independent accumulators, combined at
 * the end as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)): a fixed order.
 */
#ifndef ULY_VEXP_H
#define ULY_VEXP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__)
/* The 32-byte vectors only live in registers of inlined helpers and of the
 * target_clones functions; no vector crosses a non-inlined call. */
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

typedef float uly_v8f __attribute__((vector_size(32)));
typedef int32_t uly_v8i __attribute__((vector_size(32)));

#if defined(__x86_64__) && defined(__GNUC__) && !defined(ULY_NO_CLONES)
#define ULY_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ULY_CLONES
#endif

static inline uly_v8f uly_v8_splat(float x)
{
    return (uly_v8f){x, x, x, x, x, x, x, x};
}

static inline uly_v8f uly_v8_select(uly_v8i mask, uly_v8f a, uly_v8f b)
{
    return (uly_v8f)(((uly_v8i)a & mask) | ((uly_v8i)b & ~mask));
}

static inline uly_v8f uly_v8_exp(uly_v8f x)
{
    const uly_v8f lo = uly_v8_splat(-87.3f), hi = uly_v8_splat(88.0f);
    uly_v8i keep = x >= lo;
    uly_v8f xc = uly_v8_select(keep, x, lo);
    xc = uly_v8_select(xc > hi, hi, xc);
    uly_v8f t = xc * uly_v8_splat(1.44269504088896341f);
    uly_v8f nf = (t + uly_v8_splat(12582912.0f)) - uly_v8_splat(12582912.0f);
    uly_v8f r = xc - nf * uly_v8_splat(0.693359375f);
    r = r - nf * uly_v8_splat(-2.12194440e-4f);
    uly_v8f p = uly_v8_splat(1.9875691500E-4f);
    p = p * r + uly_v8_splat(1.3981999507E-3f);
    p = p * r + uly_v8_splat(8.3334519073E-3f);
    p = p * r + uly_v8_splat(4.1665795894E-2f);
    p = p * r + uly_v8_splat(1.6666665459E-1f);
    p = p * r + uly_v8_splat(5.0000001201E-1f);
    uly_v8f y = p * r * r + r + uly_v8_splat(1.0f);
    uly_v8i e = (__builtin_convertvector(nf, uly_v8i) + 127) << 23;
    y = y * (uly_v8f)e;
    return (uly_v8f)((uly_v8i)y & keep);
}

static inline float uly_v8_hsum(uly_v8f a)
{
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* Load up to 8 elements, padding with `fill`. */
static inline uly_v8f uly_v8_load(const float *x, int64_t n, float fill)
{
    uly_v8f v;
    if (n >= 8) {
        memcpy(&v, x, sizeof v);
        return v;
    }
    v = uly_v8_splat(fill);
    for (int64_t l = 0; l < n; l++)
        v[l] = x[l];
    return v;
}

static inline void uly_v8_store(float *x, int64_t n, uly_v8f v)
{
    if (n >= 8) {
        memcpy(x, &v, sizeof v);
        return;
    }
    for (int64_t l = 0; l < n; l++)
        x[l] = v[l];
}

/* max of x[0..n) (-inf for n = 0) */
ULY_CLONES static float uly_row_max_f32(const float *x, int64_t n)
{
    uly_v8f m = uly_v8_splat(-INFINITY);
    for (int64_t j = 0; j < n; j += 8) {
        uly_v8f v = uly_v8_load(x + j, n - j, -INFINITY);
        m = uly_v8_select(v > m, v, m);
    }
    float r = m[0];
    for (int l = 1; l < 8; l++)
        r = m[l] > r ? m[l] : r;
    return r;
}

/* x = exp(x - shift) in place; returns the sum of the new x. */
ULY_CLONES static float uly_exp_shift_sum_f32(float *x, int64_t n, float shift)
{
    uly_v8f acc = uly_v8_splat(0.0f), s = uly_v8_splat(shift);
    for (int64_t j = 0; j < n; j += 8) {
        uly_v8f v = uly_v8_exp(uly_v8_load(x + j, n - j, -INFINITY) - s);
        uly_v8_store(x + j, n - j, v);
        acc += v;
    }
    return uly_v8_hsum(acc);
}

/* ds = p * (dp - D), written over dp. */
ULY_CLONES static void uly_ds_row_f32(const float *p, float *dp, int64_t n, float D)
{
    uly_v8f Dv = uly_v8_splat(D);
    for (int64_t j = 0; j < n; j += 8) {
        uly_v8f a = uly_v8_load(p + j, n - j, 0), b = uly_v8_load(dp + j, n - j, 0);
        uly_v8_store(dp + j, n - j, a * (b - Dv));
    }
}

/* Double precision: the same contracts with libm's exp and 8 scalar lanes. */
static inline double uly_row_max_f64(const double *x, int64_t n)
{
    double m = -INFINITY;
    for (int64_t j = 0; j < n; j++)
        m = x[j] > m ? x[j] : m;
    return m;
}

static inline double uly_exp_shift_sum_f64(double *x, int64_t n, double shift)
{
    double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t j = 0; j < n; j++) {
        x[j] = exp(x[j] - shift);
        lane[j & 7] += x[j];
    }
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

static inline void uly_ds_row_f64(const double *p, double *dp, int64_t n, double D)
{
    for (int64_t j = 0; j < n; j++)
        dp[j] = p[j] * (dp[j] - D);
}

#endif
