/* SPDX-License-Identifier: Apache-2.0 */
/*
 * elem.c -- the element types of tensor files (f16, bf16, f32, f64, i32,
 * i64) and their exact conversions to and from double.
 *
 * What this is for: reading and writing the tensors frameworks dump
 * (.npy, .safetensors) without a conversion error of its own: every type
 * converts to double exactly, and a double converts to a float type with
 * one rounding, to nearest with ties to even, as numpy's astype and
 * torch's .to() do.  What it is not: a vectorised converter (the files are
 * read once; the kernels run far longer).
 *
 * The float types are one routine with the type's exponent and mantissa
 * widths: a value is scaled by a power of two (exact) so that its quantum
 * (the spacing of the type's values at its magnitude, the subnormal
 * spacing below the smallest normal) is 1, rounded with rint (the default
 * rounding mode: to nearest, ties to even), and the integer is the encoding
 * less the implicit bit -- a carry out of the mantissa moves into the
 * exponent, and a carry out of the largest exponent gives Inf.
 *
 * Independent of config.h: the C standard library and internal.h.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "elem_impl.h"
#include "internal.h"

static const struct {
    const char *name, *numpy;
    size_t size;
    int is_float;
} elem_table[ULY_ELEM_COUNT] = {
    [ULY_ELEM_F16] = { "f16", "float16", 2, 1 },  [ULY_ELEM_BF16] = { "bf16", "bfloat16", 2, 1 },
    [ULY_ELEM_F32] = { "f32", "float32", 4, 1 },  [ULY_ELEM_F64] = { "f64", "float64", 8, 1 },
    [ULY_ELEM_I32] = { "i32", "int32", 4, 0 },    [ULY_ELEM_I64] = { "i64", "int64", 8, 0 },
};

static int elem_ok(int elem)
{
    return elem >= 0 && elem < ULY_ELEM_COUNT;
}

const char *uly_elem_name(int elem)
{
    return elem_ok(elem) ? elem_table[elem].name : "?";
}

int uly_elem_parse(const char *name, int *elem)
{
    if (!name || !elem)
        return uly_set_error(ULY_EINVAL, "uly_elem_parse: NULL argument");
    for (int e = 0; e < ULY_ELEM_COUNT; e++)
        if (strcmp(name, elem_table[e].name) == 0 || strcmp(name, elem_table[e].numpy) == 0) {
            *elem = e;
            return ULY_OK;
        }
    return uly_set_error(ULY_EINVAL, "unknown element type '%s' (f16, bf16, f32, f64, i32, i64)", name);
}

size_t uly_elem_size(int elem)
{
    return elem_ok(elem) ? elem_table[elem].size : 0;
}

int uly_elem_is_float(int elem)
{
    return elem_ok(elem) && elem_table[elem].is_float;
}

/* ------------------------------------------------------ the float types */

/* The encoding (sign, ebits exponent bits, mbits mantissa bits) of x
 * rounded to nearest even; NaN becomes the quiet NaN of the sign. */
static uint64_t float_bits(double x, int ebits, int mbits)
{
    const int bias = (1 << (ebits - 1)) - 1, emin = 1 - bias;
    const uint64_t sign = (uint64_t)(signbit(x) ? 1 : 0) << (ebits + mbits);
    const uint64_t inf = (((uint64_t)1 << ebits) - 1) << mbits;
    if (isnan(x))
        return sign | inf | (uint64_t)1 << (mbits - 1);
    double a = fabs(x);
    if (isinf(a))
        return sign | inf;
    if (a == 0)
        return sign;
    int e;
    (void)frexp(a, &e);          /* a = m 2^e, m in [0.5, 1): a's exponent is e - 1 */
    int E = e - 1;
    if (E > bias)
        return sign | inf;
    int Eq = E < emin ? emin : E;  /* below the normals the quantum is the subnormal one */
    double q = rint(ldexp(a, mbits - Eq));
    uint64_t n = (uint64_t)q;    /* q <= 2^(mbits + 1) */
    if (E < emin)
        return sign | n;         /* subnormal; n == 2^mbits is the smallest normal's encoding */
    return sign | ((((uint64_t)(Eq + bias)) << mbits) + n - ((uint64_t)1 << mbits));
}

/* The value of a float encoding. */
static double float_value(uint64_t bits, int ebits, int mbits)
{
    const int bias = (1 << (ebits - 1)) - 1;
    const uint64_t emask = ((uint64_t)1 << ebits) - 1, mmask = ((uint64_t)1 << mbits) - 1;
    int neg = (int)((bits >> (ebits + mbits)) & 1);
    uint64_t ex = (bits >> mbits) & emask, m = bits & mmask;
    double v;
    if (ex == emask)
        v = m ? NAN : INFINITY;
    else if (ex == 0)
        v = ldexp((double)m, 1 - bias - mbits);
    else
        v = ldexp((double)(m | ((uint64_t)1 << mbits)), (int)ex - bias - mbits);
    return neg ? -v : v;
}

uint16_t uly_f16_from_f64(double x)
{
    return (uint16_t)float_bits(x, 5, 10);
}

uint16_t uly_bf16_from_f64(double x)
{
    return (uint16_t)float_bits(x, 8, 7);
}

float uly_f32_from_f64(double x)
{
    uint32_t b = (uint32_t)float_bits(x, 8, 23);
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

double uly_f16_to_f64(uint16_t h)
{
    return float_value(h, 5, 10);
}

double uly_bf16_to_f64(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* ------------------------------------------------------------ public API */

int uly_elem_to_f64(int elem, const void *src, size_t n, double *dst)
{
    if (!elem_ok(elem))
        return uly_set_error(ULY_EINVAL, "uly_elem_to_f64: unknown element type %d", elem);
    if (n && (!src || !dst))
        return uly_set_error(ULY_EINVAL, "uly_elem_to_f64: NULL argument");
    const unsigned char *s = src;
    const size_t es = elem_table[elem].size;
    for (size_t i = 0; i < n; i++, s += es) {
        switch (elem) {
        case ULY_ELEM_F16: {
            uint16_t h;
            memcpy(&h, s, 2);
            dst[i] = uly_f16_to_f64(h);
            break;
        }
        case ULY_ELEM_BF16: {
            uint16_t h;
            memcpy(&h, s, 2);
            dst[i] = uly_bf16_to_f64(h);
            break;
        }
        case ULY_ELEM_F32: {
            float f;
            memcpy(&f, s, 4);
            dst[i] = f;
            break;
        }
        case ULY_ELEM_F64:
            memcpy(&dst[i], s, 8);
            break;
        case ULY_ELEM_I32: {
            int32_t v;
            memcpy(&v, s, 4);
            dst[i] = v;
            break;
        }
        default: {
            int64_t v;
            memcpy(&v, s, 8);
            if (v > ((int64_t)1 << 53) || v < -((int64_t)1 << 53))
                return uly_set_error(ULY_EINVAL, "element %zu (%" PRId64 ") is beyond 2^53: not exact as a double",
                                     i, v);
            dst[i] = (double)v;
            break;
        }
        }
    }
    return ULY_OK;
}

int uly_elem_from_f64(int elem, const double *src, size_t n, void *dst)
{
    if (!elem_ok(elem))
        return uly_set_error(ULY_EINVAL, "uly_elem_from_f64: unknown element type %d", elem);
    if (n && (!src || !dst))
        return uly_set_error(ULY_EINVAL, "uly_elem_from_f64: NULL argument");
    unsigned char *d = dst;
    const size_t es = elem_table[elem].size;
    for (size_t i = 0; i < n; i++, d += es) {
        const double x = src[i];
        switch (elem) {
        case ULY_ELEM_F16: {
            uint16_t h = uly_f16_from_f64(x);
            memcpy(d, &h, 2);
            break;
        }
        case ULY_ELEM_BF16: {
            uint16_t h = uly_bf16_from_f64(x);
            memcpy(d, &h, 2);
            break;
        }
        case ULY_ELEM_F32: {
            float f = uly_f32_from_f64(x);
            memcpy(d, &f, 4);
            break;
        }
        case ULY_ELEM_F64:
            memcpy(d, &x, 8);
            break;
        case ULY_ELEM_I32: {
            if (!(x >= -2147483648.0 && x <= 2147483647.0) || x != floor(x))
                return uly_set_error(ULY_EINVAL, "element %zu (%.17g) is not an int32", i, x);
            int32_t v = (int32_t)x;
            memcpy(d, &v, 4);
            break;
        }
        default: {
            if (!(x >= -9223372036854775808.0 && x < 9223372036854775808.0) || x != floor(x))
                return uly_set_error(ULY_EINVAL, "element %zu (%.17g) is not an int64", i, x);
            int64_t v = (int64_t)x;
            memcpy(d, &v, 8);
            break;
        }
        }
    }
    return ULY_OK;
}

int uly_elem_convert(int from, const void *src, size_t n, int to, void *dst)
{
    if (!elem_ok(from) || !elem_ok(to))
        return uly_set_error(ULY_EINVAL, "uly_elem_convert: unknown element type");
    if (from == to) {
        if (n)
            memmove(dst, src, n * elem_table[from].size);
        return ULY_OK;
    }
    const unsigned char *s = src;
    unsigned char *d = dst;
    const size_t ss = elem_table[from].size, ds = elem_table[to].size;
    /* Element by element, so that src and dst may be the same buffer: forward
     * when the elements shrink (or keep their size), backward when they grow. */
    int back = ds > ss;
    for (size_t k = 0; k < n; k++) {
        size_t i = back ? n - 1 - k : k;
        if (!uly_elem_is_float(from) && !uly_elem_is_float(to)) {
            /* i32 <-> i64, exactly or refused */
            int64_t v;
            if (from == ULY_ELEM_I32) {
                int32_t w;
                memcpy(&w, s + i * ss, 4);
                v = w;
            } else
                memcpy(&v, s + i * ss, 8);
            if (to == ULY_ELEM_I32) {
                if (v < INT32_MIN || v > INT32_MAX)
                    return uly_set_error(ULY_EINVAL, "element %zu (%" PRId64 ") is not an int32", i, v);
                int32_t w = (int32_t)v;
                memcpy(d + i * ds, &w, 4);
            } else
                memcpy(d + i * ds, &v, 8);
            continue;
        }
        double x = 0;
        int st = uly_elem_to_f64(from, s + i * ss, 1, &x);
        if (!st)
            st = uly_elem_from_f64(to, &x, 1, d + i * ds);
        if (st)
            return uly_set_error(st, "element %zu (%.17g) cannot be converted exactly from %s to %s", i, x,
                                 elem_table[from].name, elem_table[to].name);
    }
    return ULY_OK;
}

int uly_host_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

void uly_swap_bytes(unsigned char *p, size_t count, size_t es)
{
    for (size_t i = 0; i < count; i++, p += es)
        for (size_t a = 0, b = es - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}
