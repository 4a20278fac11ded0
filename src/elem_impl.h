/* SPDX-License-Identifier: Apache-2.0 */
/*
 * elem_impl.h -- the library's element conversions one value at a time
 * and between buffers (src/elem.c).  Not installed.
 */
#ifndef ULY_ELEM_IMPL_H
#define ULY_ELEM_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* One value, rounded to nearest even (NaN stays NaN, beyond the range Inf). */
ULY_INTERNAL uint16_t uly_f16_from_f64(double x);
ULY_INTERNAL uint16_t uly_bf16_from_f64(double x);
ULY_INTERNAL float uly_f32_from_f64(double x);
/* One value, exactly. */
ULY_INTERNAL double uly_f16_to_f64(uint16_t h);
ULY_INTERNAL double uly_bf16_to_f64(uint16_t h);
/* n elements of type `from` at src to type `to` at dst (host byte order);
 * src and dst may be the same buffer (sized for the larger type).  Floats
 * round as uly_elem_from_f64; integers convert exactly or are refused. */
ULY_INTERNAL int uly_elem_convert(int from, const void *src, size_t n, int to, void *dst);

/* Byte order of the files (.npy, .safetensors: little-endian) against the
 * host's: whether the host is little-endian, and the bytes of each of the
 * count elements of es bytes at p reversed. */
ULY_INTERNAL int uly_host_little_endian(void);
ULY_INTERNAL void uly_swap_bytes(unsigned char *p, size_t count, size_t es);

#endif /* ULY_ELEM_IMPL_H */
