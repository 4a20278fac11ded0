/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vexp_impl.h -- one SIMD level of the element-wise softmax operations
 * (see vexp.h for the contract).  Included by vexp.c with
 *   VL       lanes per vector (8 or 16)
 *   VSFX(n)  n with the level's suffix
 * inside a `#pragma GCC target` region for the level, with VLEVEL (2:
 * AVX-512, 1: AVX2, 0: the baseline, SSE on x86-64) choosing the max/min
 * and fused multiply-add instructions.  The
 * reductions assign elements to accumulators the same way whatever VL is,
 * so that every level gives the same bits.
 */

typedef float VSFX(vf) __attribute__((vector_size(VL * 4)));
typedef int32_t VSFX(vi) __attribute__((vector_size(VL * 4)));
typedef uint32_t VSFX(vu) __attribute__((vector_size(VL * 4)));
typedef float VSFX(v8) __attribute__((vector_size(32)));
typedef int32_t VSFX(v8i) __attribute__((vector_size(32)));

#define VF VSFX(vf)
#define VI VSFX(vi)
#define VU VSFX(vu)
#define V8 VSFX(v8)
#define V8I VSFX(v8i)

static inline __attribute__((always_inline)) VF VSFX(splat)(float x)
{
    VF v;
    for (int l = 0; l < VL; l++)
        v[l] = x;
    return v;
}

static inline __attribute__((always_inline)) VF VSFX(select)(VI mask, VF a, VF b)
{
    return (VF)(((VI)a & mask) | ((VI)b & ~mask));
}

#if VLEVEL == 0 && defined(ULY_HAVE_LEVELS)
/* The baseline's 8 lanes as two SSE vectors: maxps / minps (max: 1). */
static inline __attribute__((always_inline)) VF VSFX(sse_halves)(VF a, VF b, const int max)
{
    __m128 a4[2], b4[2];
    memcpy(a4, &a, sizeof a4);
    memcpy(b4, &b, sizeof b4);
    for (int h = 0; h < 2; h++)
        a4[h] = max ? _mm_max_ps(a4[h], b4[h]) : _mm_min_ps(a4[h], b4[h]);
    VF r;
    memcpy(&r, a4, sizeof r);
    return r;
}
#endif

/* a > b ? a : b and a < b ? a : b, lane by lane: the semantics of the x86
 * max/min instructions, one instruction where the level has them (the
 * generic form costs a compare and a blend).  Same bits either way. */
static inline __attribute__((always_inline)) VF VSFX(vmax)(VF a, VF b)
{
#if VLEVEL == 2
    return (VF)_mm512_max_ps((__m512)a, (__m512)b);
#elif VLEVEL == 1
    return (VF)_mm256_max_ps((__m256)a, (__m256)b);
#elif defined(ULY_HAVE_LEVELS)
    return VSFX(sse_halves)(a, b, 1);
#else
    return VSFX(select)(a > b, a, b);
#endif
}

static inline __attribute__((always_inline)) VF VSFX(vmin)(VF a, VF b)
{
#if VLEVEL == 2
    return (VF)_mm512_min_ps((__m512)a, (__m512)b);
#elif VLEVEL == 1
    return (VF)_mm256_min_ps((__m256)a, (__m256)b);
#elif defined(ULY_HAVE_LEVELS)
    return VSFX(sse_halves)(a, b, 0);
#else
    return VSFX(select)(a < b, a, b);
#endif
}

/* a b + c rounded once: the FMA instruction where the level has it, the
 * exact emulation of vexp.h otherwise (the same bits). */
static inline __attribute__((always_inline)) VF VSFX(fma)(VF a, VF b, VF c)
{
#if VLEVEL == 2
    return (VF)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif VLEVEL == 1
    return (VF)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else
    VF r;
    for (int l = 0; l < VL; l++)
        r[l] = uly_fmaf_exact(a[l], b[l], c[l]);
    return r;
#endif
}

#if VLEVEL == 0 && defined(ULY_HAVE_LEVELS)
/* 2^f = 1 + f P(f) for the baseline (SSE2): the Horner steps of VSFX(exp2)
 * below, each the correctly rounded p f + c of a fused multiply-add, four
 * lanes as two pairs of doubles.  p f is exact in double (24 + 24 bits).
 * Each step's result lies in one binade [2^e, 2^(e+1)) for every float f
 * in [-1/2, 1/2] (all 2^31 of them enumerated: doc/kernels.md), so adding
 * p f to c + M, M = 1.5 * 2^(e+29) (the sum exact), rounds the exact p f + c
 * once, to the multiples of 2^(e-23), the float grid of that binade, ties
 * to even as the float would; subtracting M (exact) leaves the float, in
 * double.  No double rounding, no correction: the bits of the instruction. */
static inline __attribute__((always_inline)) __m128d uly_vx_fma_grid(__m128d p, __m128d f, double cm, double m)
{
    return _mm_sub_pd(_mm_add_pd(_mm_mul_pd(p, f), _mm_set1_pd(cm)), _mm_set1_pd(m));
}

/* 2^f on two lanes, returned as M + 2^f (the last subtraction left to the
 * caller).  Two steps cross a power of two, where M doubles (1.5 * 2^(e+28)
 * added to both c + M and M): y = fma(p0, f, 1) reaches 1 exactly when
 * f >= 0 (p0 > 0), and p1 = fma(p2, f, c1) reaches 1/4 exactly when
 * f >= ULY_EXP2_P1_QUARTER: for f > 0 every step grows with f (positive
 * coefficients, monotone rounding), and below 1/4 the exact value rounds
 * on the finer grid, from 1/4 up (or within half a finer ulp under it,
 * where both grids give 1/4) on the coarser one.  Both masks come from f,
 * off the chain of dependent operations. */
static inline __attribute__((always_inline)) __m128d uly_vx_poly2(__m128d f)
{
    const __m128d up1 = _mm_and_pd(_mm_cmpge_pd(f, _mm_set1_pd(ULY_EXP2_P1_QUARTER)), _mm_set1_pd(0x1.8p+26));
    const __m128d up0 = _mm_and_pd(_mm_cmpge_pd(f, _mm_setzero_pd()), _mm_set1_pd(0x1.8p+28));
    __m128d p = uly_vx_fma_grid(_mm_set1_pd(ULY_EXP2_C6), f, ULY_EXP2_C5 + 0x1.8p+19, 0x1.8p+19);
    p = uly_vx_fma_grid(p, f, ULY_EXP2_C4 + 0x1.8p+22, 0x1.8p+22);
    p = uly_vx_fma_grid(p, f, ULY_EXP2_C3 + 0x1.8p+24, 0x1.8p+24);
    p = _mm_sub_pd(_mm_add_pd(_mm_mul_pd(p, f), _mm_add_pd(_mm_set1_pd(ULY_EXP2_C2 + 0x1.8p+26), up1)),
                   _mm_add_pd(_mm_set1_pd(0x1.8p+26), up1));
    p = uly_vx_fma_grid(p, f, ULY_EXP2_C1 + 0x1.8p+28, 0x1.8p+28);
    return _mm_add_pd(_mm_mul_pd(p, f), _mm_add_pd(_mm_set1_pd(1.0 + 0x1.8p+28), up0));
}

/* VSFX(exp2) below on four lanes, in SSE2.  y = 2^f is read from the bits
 * of M + y: their low 32 bits are y / 2^-24 (f < 0, M = 1.5 * 2^28) or
 * y / 2^-23 (f >= 0, M = 1.5 * 2^29), an integer k below 2^25, and the
 * float's bits are k + (125 << 23), or k + (126 << 23).  (f is never NaN:
 * a NaN x becomes -127 at the clamp.) */
static inline __attribute__((always_inline)) __m128 uly_vx_exp2_sse2(__m128 x, const int clamp_hi)
{
    __m128 xc = _mm_max_ps(x, _mm_set1_ps(-127.0f));
    if (clamp_hi)
        xc = _mm_min_ps(xc, _mm_set1_ps(127.0f));
    const __m128 tm = _mm_add_ps(xc, _mm_set1_ps(12583039.0f));
    const __m128 f = _mm_sub_ps(xc, _mm_sub_ps(tm, _mm_set1_ps(12583039.0f)));
    const __m128d lo = uly_vx_poly2(_mm_cvtps_pd(f)), hi = uly_vx_poly2(_mm_cvtps_pd(_mm_movehl_ps(f, f)));
    const __m128i k = _mm_castps_si128(_mm_shuffle_ps(_mm_castpd_ps(lo), _mm_castpd_ps(hi), _MM_SHUFFLE(2, 0, 2, 0)));
    const __m128i up = _mm_and_si128(_mm_castps_si128(_mm_cmpge_ps(f, _mm_setzero_ps())), _mm_set1_epi32(1 << 23));
    const __m128 y = _mm_castsi128_ps(_mm_add_epi32(k, _mm_add_epi32(_mm_set1_epi32(125 << 23), up)));
    return _mm_mul_ps(y, _mm_castsi128_ps(_mm_slli_epi32(_mm_castps_si128(tm), 23)));
}
#endif

/* 2^x: clamp below at -127 (and above at 127 when clamp_hi; the forward's
 * x = s - max <= 0 needs no upper clamp, and min(x, 127) = x there, so the
 * two give the same bits); n = round(x) with the 1.5 * 2^23 trick;
 * f = x - n, exact, |f| <= 1/2; 2^f = 1 + f P(f) with P of degree 5
 * (Chebyshev interpolation of (2^f - 1) / f on [-1/2, 1/2]) by Horner's
 * rule in fused multiply-adds; times 2^n
 * built in the exponent bits.  For x <= -126.5 (-inf included) n = -127,
 * whose exponent bits are 0: the product is exactly +0 without a mask. */
static inline __attribute__((always_inline)) VF VSFX(exp2)(VF x, const int clamp_hi)
{
#if VLEVEL == 0 && defined(ULY_HAVE_LEVELS)
    __m128 h[2];
    memcpy(h, &x, sizeof h);
    h[0] = uly_vx_exp2_sse2(h[0], clamp_hi);
    h[1] = uly_vx_exp2_sse2(h[1], clamp_hi);
    VF r;
    memcpy(&r, h, sizeof r);
    return r;
#else
    VF xc = VSFX(vmax)(x, VSFX(splat)(-127.0f));
    if (clamp_hi)
        xc = VSFX(vmin)(xc, VSFX(splat)(127.0f));
    /* tm = 1.5 * 2^23 + 127 + xc, an integer in [2^23, 2^24) whose low
     * mantissa bits hold n + 127 */
    VF tm = xc + VSFX(splat)(12583039.0f);
    VF nf = tm - VSFX(splat)(12583039.0f);
    VF f = xc - nf;
    VF p = VSFX(splat)(ULY_EXP2_C6);
    p = VSFX(fma)(p, f, VSFX(splat)(ULY_EXP2_C5));
    p = VSFX(fma)(p, f, VSFX(splat)(ULY_EXP2_C4));
    p = VSFX(fma)(p, f, VSFX(splat)(ULY_EXP2_C3));
    p = VSFX(fma)(p, f, VSFX(splat)(ULY_EXP2_C2));
    p = VSFX(fma)(p, f, VSFX(splat)(ULY_EXP2_C1));
    VF y = VSFX(fma)(p, f, VSFX(splat)(1.0f));
    /* 2^n: the bits of tm are 0x4b400000 + n + 127 (-127 <= n <= 127);
     * shifted left by 23 only n + 127 stays, in the exponent field (0 for
     * n = -127) */
    VI e = (VI)((VU)tm << 23);
    return y * (VF)e;
#endif
}

/* Whole vectors: plain (unaligned) loads and stores that stay in registers. */
static inline __attribute__((always_inline)) VF VSFX(load)(const float *x)
{
    VF v;
    memcpy(&v, x, sizeof v);
    return v;
}

static inline __attribute__((always_inline)) void VSFX(store)(float *x, VF v)
{
    memcpy(x, &v, sizeof v);
}

/* The last n < VL elements, padded with `fill` (through a buffer, so that
 * the whole-vector loop above never goes through memory). */
static inline __attribute__((always_inline)) VF VSFX(load_tail)(const float *x, int64_t n, float fill)
{
    float buf[VL];
    for (int l = 0; l < VL; l++)
        buf[l] = l < n ? x[l] : fill;
    return VSFX(load)(buf);
}

static inline __attribute__((always_inline)) void VSFX(store_tail)(float *x, int64_t n, VF v)
{
    float buf[VL];
    VSFX(store)(buf, v);
    memcpy(x, buf, (size_t)n * sizeof *x);
}

/* The 8-lane pieces of v, in element order. */
#if VL == 16
#define VSFX_PART(v, i)                                                                                  \
    ((i) == 0 ? __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7)                                      \
              : __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15))
#else
#define VSFX_PART(v, i) (v)
#endif

/* Row max with four independent chains: element j goes to accumulator
 * (j / 8) mod 4, lane j mod 8, in increasing j; then the accumulators are
 * combined as max(max(a0, a1), max(a2, a3)) and the lanes in order.  With
 * 16 lanes a vector holds two accumulators side by side (a0|a1, a2|a3):
 * the same assignment.  max(a, b) is a > b ? a : b everywhere. */
static float VSFX(row_max)(const float *x, int64_t n)
{
#if VL == 16
    VF m01 = VSFX(splat)(-INFINITY), m23 = m01;
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) {
        m01 = VSFX(vmax)(VSFX(load)(x + j), m01);
        m23 = VSFX(vmax)(VSFX(load)(x + j + 16), m23);
    }
    if (j + 16 <= n) {
        m01 = VSFX(vmax)(VSFX(load)(x + j), m01);
        j += 16;
        if (j < n)
            m23 = VSFX(vmax)(VSFX(load_tail)(x + j, n - j, -INFINITY), m23);
    } else if (j < n) {
        m01 = VSFX(vmax)(VSFX(load_tail)(x + j, n - j, -INFINITY), m01);
    }
    V8 a0 = VSFX_PART(m01, 0), a1 = VSFX_PART(m01, 1), a2 = VSFX_PART(m23, 0), a3 = VSFX_PART(m23, 1);
#else
    VF a[4];
    for (int c = 0; c < 4; c++)
        a[c] = VSFX(splat)(-INFINITY);
    int64_t j = 0;
    for (; j + 32 <= n; j += 32)
        for (int c = 0; c < 4; c++)
            a[c] = VSFX(vmax)(VSFX(load)(x + j + 8 * c), a[c]);
    for (int c = 0; j < n; c++, j += 8)
        a[c] = VSFX(vmax)(j + 8 <= n ? VSFX(load)(x + j) : VSFX(load_tail)(x + j, n - j, -INFINITY), a[c]);
    V8 a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
#endif
    V8I g01 = a0 > a1, g23 = a2 > a3;
    V8 m01f = (V8)(((V8I)a0 & g01) | ((V8I)a1 & ~g01));
    V8 m23f = (V8)(((V8I)a2 & g23) | ((V8I)a3 & ~g23));
    V8I g = m01f > m23f;
    V8 m = (V8)(((V8I)m01f & g) | ((V8I)m23f & ~g));
    float r = m[0];
    for (int l = 1; l < 8; l++)
        r = m[l] > r ? m[l] : r;
    return r;
}

/* p = 2^(x - shift) (p == x: in place; else x = +0 afterwards, and
 * x - shift <= 0 is required: no upper clamp), and the sum of p over 16
 * accumulators: element j goes to accumulator j mod 16 in
 * increasing j (two 8-lane vectors at 8 lanes), combined as a_l + a_(l+8)
 * then ((s0+s1)+(s2+s3))+((s4+s5)+(s6+s7)).  Padding lanes hold 2^-inf
 * = +0 and add nothing. */
static inline __attribute__((always_inline)) float VSFX(exp_rows)(float *x, float *p, int64_t n, float shift,
                                                                  const int zero)
{
    const VF s = VSFX(splat)(shift), z = VSFX(splat)(0.0f);
    int64_t j = 0;
#define VSFX_EXP_ONE(v, j)                                                                               \
    do {                                                                                                 \
        v = VSFX(exp2)(VSFX(load)(x + (j)) - s, !zero);                                                      \
        VSFX(store)(p + (j), v);                                                                         \
        if (zero)                                                                                        \
            VSFX(store)(x + (j), z);                                                                     \
    } while (0)
#define VSFX_EXP_TAIL(v, j)                                                                              \
    do {                                                                                                 \
        v = VSFX(exp2)(VSFX(load_tail)(x + (j), n - (j), -INFINITY) - s, !zero);                             \
        VSFX(store_tail)(p + (j), n - (j), v);                                                           \
        if (zero)                                                                                        \
            VSFX(store_tail)(x + (j), n - (j), z);                                                       \
    } while (0)
#if VL == 16
    VF acc = VSFX(splat)(0.0f), v;
    for (; j + 16 <= n; j += 16) {
        VSFX_EXP_ONE(v, j);
        acc += v;
    }
    if (j < n) {
        VSFX_EXP_TAIL(v, j);
        acc += v;
    }
    V8 a8 = VSFX_PART(acc, 0) + VSFX_PART(acc, 1);
#else
    VF a0 = VSFX(splat)(0.0f), a1 = a0, v, w;
    for (; j + 16 <= n; j += 16) {
        VSFX_EXP_ONE(v, j);
        VSFX_EXP_ONE(w, j + 8);
        a0 += v;
        a1 += w;
    }
    if (j + 8 <= n) {
        VSFX_EXP_ONE(v, j);
        a0 += v;
        j += 8;
        if (j < n) {
            VSFX_EXP_TAIL(w, j);
            a1 += w;
        }
    } else if (j < n) {
        VSFX_EXP_TAIL(v, j);
        a0 += v;
    }
    V8 a8 = a0 + a1;
#endif
#undef VSFX_EXP_ONE
#undef VSFX_EXP_TAIL
    return ((a8[0] + a8[1]) + (a8[2] + a8[3])) + ((a8[4] + a8[5]) + (a8[6] + a8[7]));
}

static float VSFX(exp2_shift_sum)(float *x, int64_t n, float shift)
{
    return VSFX(exp_rows)(x, x, n, shift, 0);
}

/* p = 2^(x - shift) and x = +0, for x <= shift (the bits of exp2_shift_sum;
 * the zeros let the next block's S = Q K^T accumulate with beta = 1). */
static float VSFX(exp2_shift_sum_to)(float *x, float *p, int64_t n, float shift)
{
    return VSFX(exp_rows)(x, p, n, shift, 1);
}

static void VSFX(ds_row)(const float *p, float *dp, int64_t n, float D)
{
    const VF Dv = VSFX(splat)(D);
    int64_t j = 0;
    for (; j + VL <= n; j += VL)
        VSFX(store)(dp + j, VSFX(load)(p + j) * (VSFX(load)(dp + j) - Dv));
    if (j < n)
        VSFX(store_tail)(dp + j, n - j, VSFX(load_tail)(p + j, n - j, 0) * (VSFX(load_tail)(dp + j, n - j, 0) - Dv));
}

/* x = 2^(x - shift) in place (the clamps of exp2_shift_sum, no sum) and
 * dp = x (dp - D), the new x kept in registers between the two: the bits
 * of exp2_shift_sum followed by ds_row, one pass over the row. */
static void VSFX(exp2_ds_row)(float *x, float *dp, int64_t n, float shift, float D)
{
    const VF s = VSFX(splat)(shift), Dv = VSFX(splat)(D);
    int64_t j = 0;
    for (; j + VL <= n; j += VL) {
        const VF p = VSFX(exp2)(VSFX(load)(x + j) - s, 1);
        VSFX(store)(x + j, p);
        VSFX(store)(dp + j, p * (VSFX(load)(dp + j) - Dv));
    }
    if (j < n) {
        const VF p = VSFX(exp2)(VSFX(load_tail)(x + j, n - j, -INFINITY) - s, 1);
        VSFX(store_tail)(x + j, n - j, p);
        VSFX(store_tail)(dp + j, n - j, p * (VSFX(load_tail)(dp + j, n - j, 0) - Dv));
    }
}

#undef VSFX_PART
#undef VF
#undef VI
#undef VU
#undef V8
#undef V8I
