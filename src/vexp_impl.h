/*
 * vexp_impl.h -- one SIMD level of the element-wise softmax operations
 * (see vexp.h for the contract).  Included by vexp.c with
 *   VL       lanes per vector (8 or 16)
 *   VSFX(n)  n with the level's suffix
 * inside a `#pragma GCC target` region for the level.  Reductions always
 * fold into 8 accumulators in element order, whatever VL is, so that every
 * level gives the same bits.
 */

typedef float VSFX(vf) __attribute__((vector_size(VL * 4)));
typedef int32_t VSFX(vi) __attribute__((vector_size(VL * 4)));
typedef float VSFX(v8) __attribute__((vector_size(32)));
typedef int32_t VSFX(v8i) __attribute__((vector_size(32)));

#define VF VSFX(vf)
#define VI VSFX(vi)
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

static inline __attribute__((always_inline)) VF VSFX(exp)(VF x)
{
    const VF lo = VSFX(splat)(-87.3f), hi = VSFX(splat)(88.0f);
    VI keep = x >= lo;
    VF xc = VSFX(select)(keep, x, lo);
    xc = VSFX(select)(xc > hi, hi, xc);
    VF t = xc * VSFX(splat)(1.44269504088896341f);
    VF nf = (t + VSFX(splat)(12582912.0f)) - VSFX(splat)(12582912.0f);
    VF r = xc - nf * VSFX(splat)(0.693359375f);
    r = r - nf * VSFX(splat)(-2.12194440e-4f);
    VF p = VSFX(splat)(1.9875691500E-4f);
    p = p * r + VSFX(splat)(1.3981999507E-3f);
    p = p * r + VSFX(splat)(8.3334519073E-3f);
    p = p * r + VSFX(splat)(4.1665795894E-2f);
    p = p * r + VSFX(splat)(1.6666665459E-1f);
    p = p * r + VSFX(splat)(5.0000001201E-1f);
    VF y = p * r * r + r + VSFX(splat)(1.0f);
    VI e = (__builtin_convertvector(nf, VI) + 127) << 23;
    y = y * (VF)e;
    return (VF)((VI)y & keep);
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

static inline __attribute__((always_inline)) V8 VSFX(vmax8)(V8 m, V8 h)
{
    V8I gt = h > m;
    return (V8)(((V8I)h & gt) | ((V8I)m & ~gt));
}

static inline __attribute__((always_inline)) V8 VSFX(max_into)(V8 m, VF v)
{
    m = VSFX(vmax8)(m, VSFX_PART(v, 0));
#if VL == 16
    m = VSFX(vmax8)(m, VSFX_PART(v, 1));
#endif
    return m;
}

static float VSFX(row_max)(const float *x, int64_t n)
{
    V8 m;
    for (int l = 0; l < 8; l++)
        m[l] = -INFINITY;
    int64_t j = 0;
    for (; j + VL <= n; j += VL)
        m = VSFX(max_into)(m, VSFX(load)(x + j));
    if (j < n)
        m = VSFX(max_into)(m, VSFX(load_tail)(x + j, n - j, -INFINITY));
    float r = m[0];
    for (int l = 1; l < 8; l++)
        r = m[l] > r ? m[l] : r;
    return r;
}

/* acc += the 8-lane pieces of v, low then high */
static inline __attribute__((always_inline)) V8 VSFX(sum_into)(V8 acc, VF v)
{
    acc += VSFX_PART(v, 0);
#if VL == 16
    acc += VSFX_PART(v, 1);
#endif
    return acc;
}

static float VSFX(exp_shift_sum)(float *x, int64_t n, float shift)
{
    V8 acc = {0, 0, 0, 0, 0, 0, 0, 0};
    const VF s = VSFX(splat)(shift);
    int64_t j = 0;
    for (; j + VL <= n; j += VL) {
        VF v = VSFX(exp)(VSFX(load)(x + j) - s);
        VSFX(store)(x + j, v);
        acc = VSFX(sum_into)(acc, v);
    }
    if (j < n) { /* padding with -inf gives exp = 0: adds +0 */
        VF v = VSFX(exp)(VSFX(load_tail)(x + j, n - j, -INFINITY) - s);
        VSFX(store_tail)(x + j, n - j, v);
        acc = VSFX(sum_into)(acc, v);
    }
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
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

#undef VSFX_PART
#undef VF
#undef VI
#undef V8
#undef V8I
