/*
 * vexp.h -- exp over arrays, written so that the compiler vectorises it.
 *
 * uly_vexpf: Cephes-style expf.  Range reduction x = n ln2 + r with |r| <=
 * ln2/2 (n rounded with the 1.5*2^23 trick, which is exact IEEE arithmetic
 * and vectorises on plain SSE2), a degree-6 polynomial for exp(r), and 2^n
 * built in the exponent bits.  Maximum error about 2 ulp on [-87, 88].
 * Inputs below -87.3 (including -inf, used for masked scores) give exactly 0.
 * Inputs must not be NaN (the driver rejects non-finite tensors).
 * The same operations in the same order for every element: deterministic.
 */
#ifndef ULY_VEXP_H
#define ULY_VEXP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline void uly_vexpf(float *restrict x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float xi = x[i];
        float xc = xi < -87.3f ? -87.3f : (xi > 88.0f ? 88.0f : xi);
        float t = xc * 1.44269504088896341f;
        float nf = (t + 12582912.0f) - 12582912.0f; /* round to nearest */
        float r = xc - nf * 0.693359375f;
        r = r - nf * -2.12194440e-4f;
        float p = 1.9875691500E-4f;
        p = p * r + 1.3981999507E-3f;
        p = p * r + 8.3334519073E-3f;
        p = p * r + 4.1665795894E-2f;
        p = p * r + 1.6666665459E-1f;
        p = p * r + 5.0000001201E-1f;
        float y = p * r * r + r + 1.0f;
        int32_t e = ((int32_t)nf + 127) << 23;
        float s;
        memcpy(&s, &e, sizeof s);
        y = y * s;
        x[i] = xi < -87.3f ? 0.0f : y;
    }
}

/* Double precision: libm's exp (correctly handles -inf -> 0). */
static inline void uly_vexp(double *restrict x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = exp(x[i]);
}

#endif
