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

/* Load up to VL elements, padding with `fill`. */
static inline __attribute__((always_inline)) VF VSFX(load)(const float *x, int64_t n, float fill)
{
    VF v;
    if (n >= VL) {
        memcpy(&v, x, sizeof v);
        return v;
    }
    v = VSFX(splat)(fill);
    for (int64_t l = 0; l < n; l++)
        v[l] = x[l];
    return v;
}

static inline __attribute__((always_inline)) void VSFX(store)(float *x, int64_t n, VF v)
{
    if (n >= VL) {
        memcpy(x, &v, sizeof v);
        return;
    }
    for (int64_t l = 0; l < n; l++)
        x[l] = v[l];
}

/* The 8-lane pieces of v, in element order. */
static inline __attribute__((always_inline)) V8 VSFX(part)(VF v, int i)
{
    V8 h;
    memcpy(&h, (const char *)&v + 32 * i, sizeof h);
    return h;
}

static float VSFX(row_max)(const float *x, int64_t n)
{
    V8 m;
    for (int l = 0; l < 8; l++)
        m[l] = -INFINITY;
    for (int64_t j = 0; j < n; j += VL) {
        VF v = VSFX(load)(x + j, n - j, -INFINITY);
        for (int i = 0; i < VL / 8; i++) {
            V8 h = VSFX(part)(v, i);
            V8I gt = h > m;
            m = (V8)(((V8I)h & gt) | ((V8I)m & ~gt));
        }
    }
    float r = m[0];
    for (int l = 1; l < 8; l++)
        r = m[l] > r ? m[l] : r;
    return r;
}

static float VSFX(exp_shift_sum)(float *x, int64_t n, float shift)
{
    V8 acc = {0, 0, 0, 0, 0, 0, 0, 0};
    const VF s = VSFX(splat)(shift);
    for (int64_t j = 0; j < n; j += VL) {
        VF v = VSFX(exp)(VSFX(load)(x + j, n - j, -INFINITY) - s);
        VSFX(store)(x + j, n - j, v);
        for (int i = 0; i < VL / 8; i++)
            acc += VSFX(part)(v, i);
    }
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

static void VSFX(ds_row)(const float *p, float *dp, int64_t n, float D)
{
    const VF Dv = VSFX(splat)(D);
    for (int64_t j = 0; j < n; j += VL) {
        VF a = VSFX(load)(p + j, n - j, 0), b = VSFX(load)(dp + j, n - j, 0);
        VSFX(store)(dp + j, n - j, a * (b - Dv));
    }
}

#undef VF
#undef VI
#undef V8
#undef V8I
