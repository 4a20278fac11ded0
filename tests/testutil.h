/* SPDX-License-Identifier: Apache-2.0 */
/*
 * testutil.h -- helpers shared by the Check suites: a seeded RNG, random
 * problems, and the tolerance comparison (|x - ref| <= atol + rtol |ref|,
 * NaN/Inf fail, worst element reported).
 */
#ifndef ULY_TESTUTIL_H
#define ULY_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include "ulysses.h"

uint64_t tu_rand(uint64_t *state);
/* Uniform in [lo, hi). */
void tu_fill(double *x, size_t n, uint64_t seed, double lo, double hi);
/* Copy doubles into a buffer of dtype t. */
void tu_convert(const double *src, void *dst, size_t n, uly_dtype t);
/* Read element i of a buffer of dtype t as double. */
double tu_get(const void *buf, size_t i, uly_dtype t);

/* Compare got (dtype t) with ref; 0 if every element is within tolerance.
 * On failure msg (>= 256 bytes) describes the worst element. */
int tu_close(const double *ref, const void *got, uly_dtype t, size_t n, double atol,
             double rtol, char *msg, size_t msglen);
/* Largest |got - ref| (for reporting). */
double tu_max_abs_err(const double *ref, const void *got, uly_dtype t, size_t n);

/* A random problem: tensors in double, sized from the description. */
typedef struct tu_problem {
    uly_attn_desc a;
    size_t nq, nkv, nlse;   /* element counts */
    double *q, *k, *v, *dout;
} tu_problem;

void tu_problem_init(tu_problem *p, const uly_attn_desc *a, uint64_t seed);
void tu_problem_free(tu_problem *p);

#endif
