/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vexp.h -- the element-wise parts of softmax (2^x, row max, row sum, dS),
 * vectorised with GCC/Clang vector extensions and compiled for three x86-64
 * levels: AVX-512 (16 lanes), AVX2 (8 lanes) and the baseline ISA (8 lanes
 * emulated with SSE2).  src/vexp.c instantiates src/vexp_impl.h once per
 * level and picks one at run time (uly_vops_current); the environment
 * variable ULY_ISA or uly_kernel_set_isa() forces a level.
 *
 * All levels give bit-identical results:
 *   - no contraction into FMA (the kernels are built with -ffp-contract=off)
 *     and every lane performs the same IEEE operations in the same order,
 *     whatever the vector width; the fused multiply-adds of the polynomial
 *     are explicit: the instruction at AVX2 (which requires FMA3) and
 *     AVX-512; at the baseline, SSE2 doubles rounded once on each step's
 *     float grid (vexp_impl.h: exact for the polynomial's inputs, every
 *     one of them checked), and uly_fmaf_exact (below, correctly rounded)
 *     where the build has no SIMD levels (not x86-64);
 *   - the row sum uses 16 accumulators, element j going to accumulator
 *     j mod 16 in increasing j (two vectors at 8 lanes), combined at the end
 *     as s_l = a_l + a_(l+8), then ((s0+s1)+(s2+s3))+((s4+s5)+(s6+s7));
 *   - the row max, exact whatever the order but for the sign of a zero,
 *     uses four chains in the same order at every level (vexp_impl.h).
 *
 * The kernels work in base 2: the scores are computed as log2(e) scale
 * Q K^T, so softmax needs 2^(s - m) and no multiplication by log2(e) or
 * Cody-Waite reduction per score.  2^x: x = n + f with n = round(x) (the
 * 1.5*2^23 trick) and f = x - n exact, |f| <= 1/2; 2^f = 1 + f P(f) with
 * P of degree 5; 2^n built in the exponent bits.  Within 1.15 ulp of
 * exp2 on [-126, 1] (every 61st float checked against libm in double);
 * results below 2^-126 are subnormal, and inputs below -126.5 (including
 * -inf, used for masked scores) give exactly 0.  Inputs must not be NaN
 * (the driver rejects non-finite tensors).
 */
#ifndef ULY_VEXP_H
#define ULY_VEXP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

/* SIMD levels, best last. */
enum { ULY_ISA_BASELINE = 0, ULY_ISA_AVX2 = 1, ULY_ISA_AVX512 = 2, ULY_ISA_COUNT = 3 };

typedef struct uly_vops {
    int isa;
    /* max of x[0..n) (-inf for n = 0) */
    float (*row_max)(const float *x, int64_t n);
    /* x = 2^(x - shift) in place (x - shift clamped to [-127, 127]);
     * returns the sum of the new x */
    float (*exp2_shift_sum)(float *x, int64_t n, float shift);
    /* p = 2^(x - shift), x = +0, for x <= shift (no upper clamp: the
     * forward's shift is the row max); returns the sum of p (the bits of
     * exp2_shift_sum) */
    float (*exp2_shift_sum_to)(float *x, float *p, int64_t n, float shift);
    /* ds = p * (dp - D), written over dp */
    void (*ds_row)(const float *p, float *dp, int64_t n, float D);
    /* exp2_shift_sum's x = 2^(x - shift) (no sum) then ds_row(x, dp, n, D),
     * in one pass: the same bits */
    void (*exp2_ds_row)(float *x, float *dp, int64_t n, float shift, float D);
} uly_vops;

/* The active level: the best the CPU supports unless ULY_ISA or
 * uly_kernel_set_isa() chose one (ULY_EINVAL for a bad ULY_ISA). */
ULY_INTERNAL int uly_vops_current(const uly_vops **out);
/* The operations of one level, or NULL if this build or CPU lacks it. */
ULY_INTERNAL const uly_vops *uly_vops_level(int isa);
/* Name of a level: "avx512", "avx2", "baseline". */
ULY_INTERNAL const char *uly_isa_name(int isa);

/* a b + c rounded once to float, as a fused multiply-add instruction
 * computes it, for CPUs without one (the baseline of builds without SIMD
 * levels).  a b is exact in double (24 + 24 bits), s = a b + c rounds once
 * to 53 bits, and rounding s to float is then
 * the correct rounding of a b + c unless s is exactly halfway between two
 * floats (the low 29 bits of its significand 1 then 28 zeros) or below the
 * normal float range.  Only there is the sum redone: TwoSum gives the exact
 * error e of s, and s rounded to odd (one double ulp toward zero when e has
 * the other sign, then the last bit set) rounds correctly to float (Boldo
 * and Melquiond, "Emulation of FMA and correctly rounded sums: proved
 * algorithms using rounding to odd", IEEE Trans. Computers 57(4), 2008). */
static inline float uly_fmaf_exact(float a, float b, float c)
{
    const double p = (double)a * (double)b;
    double s = p + (double)c;
    uint64_t u;
    memcpy(&u, &s, sizeof u);
    if ((u & 0x1fffffffu) == 0x10000000u || fabs(s) < 0x1p-126) {
        const double bb = s - p, e = (p - (s - bb)) + ((double)c - bb);
        if (e != 0) {
            if ((e < 0) != (s < 0))
                u -= 1;
            u |= 1;
            memcpy(&s, &u, sizeof s);
        }
    }
    return (float)s;
}

/* The 2^f polynomial on f in [-1/2, 1/2], 2^f = 1 + f (C1 + f (C2 + ... +
 * f C6)), evaluated by Horner's rule in fused multiply-adds at every SIMD
 * level (vexp_impl.h; its error against exp2 in doc/kernels.md). */
#define ULY_EXP2_C6 1.5453162945e-4f
#define ULY_EXP2_C5 1.3390863365e-3f
#define ULY_EXP2_C4 9.6180825573e-3f
#define ULY_EXP2_C3 5.5503571142e-2f
#define ULY_EXP2_C2 2.4022650761e-1f
#define ULY_EXP2_C1 6.9314718803e-1f

/* The first float f > 0 where the 2^f polynomial's step p1 = fma(p2, f, c1)
 * reaches 1/4 (the baseline's grids change there: vexp_impl.h; the tests
 * find it again from libm's fmaf). */
#define ULY_EXP2_P1_QUARTER 0x1.5e0292p-3

/* Double precision: the same contracts with libm's exp2 and 8 scalar lanes. */
static inline double uly_row_max_f64(const double *x, int64_t n)
{
    double m = -INFINITY;
    for (int64_t j = 0; j < n; j++)
        m = x[j] > m ? x[j] : m;
    return m;
}

/* The row sum's combination of 16 accumulators (as the float levels). */
static inline double uly_lanes16_sum_f64(const double *a)
{
    double s[8];
    for (int l = 0; l < 8; l++)
        s[l] = a[l] + a[l + 8];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static inline double uly_exp2_shift_sum_f64(double *x, int64_t n, double shift)
{
    double lane[16] = {0};
    for (int64_t j = 0; j < n; j++) {
        x[j] = exp2(x[j] - shift);
        lane[j & 15] += x[j];
    }
    return uly_lanes16_sum_f64(lane);
}

static inline double uly_exp2_shift_sum_to_f64(double *x, double *p, int64_t n, double shift)
{
    double lane[16] = {0};
    for (int64_t j = 0; j < n; j++) {
        p[j] = exp2(x[j] - shift);
        x[j] = 0;
        lane[j & 15] += p[j];
    }
    return uly_lanes16_sum_f64(lane);
}

static inline void uly_ds_row_f64(const double *p, double *dp, int64_t n, double D)
{
    for (int64_t j = 0; j < n; j++)
        dp[j] = p[j] * (dp[j] - D);
}

static inline void uly_exp2_ds_row_f64(double *x, double *dp, int64_t n, double shift, double D)
{
    for (int64_t j = 0; j < n; j++) {
        x[j] = exp2(x[j] - shift);
        dp[j] = x[j] * (dp[j] - D);
    }
}

#endif
