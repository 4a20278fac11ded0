/* SPDX-License-Identifier: Apache-2.0 */
/* testutil.c -- see testutil.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

uint64_t tu_rand(uint64_t *state)
{
    /* splitmix64 */
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void tu_fill(double *x, size_t n, uint64_t seed, double lo, double hi)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * ((double)(tu_rand(&s) >> 11) * 0x1.0p-53);
}

void tu_convert(const double *src, void *dst, size_t n, uly_dtype t)
{
    for (size_t i = 0; i < n; i++) {
        if (t == ULY_F32)
            ((float *)dst)[i] = (float)src[i];
        else
            ((double *)dst)[i] = src[i];
    }
}

double tu_get(const void *buf, size_t i, uly_dtype t)
{
    return t == ULY_F32 ? (double)((const float *)buf)[i] : ((const double *)buf)[i];
}

int tu_close(const double *ref, const void *got, uly_dtype t, size_t n, double atol,
             double rtol, char *msg, size_t msglen)
{
    double worst = -1;
    size_t wi = 0;
    for (size_t i = 0; i < n; i++) {
        double g = tu_get(got, i, t), r = ref[i];
        if (!isfinite(g) || !isfinite(r)) {
            snprintf(msg, msglen, "element %zu is not finite: got %g, ref %g", i, g, r);
            return 1;
        }
        double used = fabs(g - r) / (atol + rtol * fabs(r)); /* fraction of tolerance */
        if (used > worst) {
            worst = used;
            wi = i;
        }
    }
    if (worst > 1) {
        snprintf(msg, msglen, "element %zu: got %.9g ref %.9g |err| %.3g uses %.2fx of tolerance (atol %g rtol %g)",
                 wi, tu_get(got, wi, t), ref[wi], fabs(tu_get(got, wi, t) - ref[wi]), worst, atol, rtol);
        return 1;
    }
    return 0;
}

double tu_max_abs_err(const double *ref, const void *got, uly_dtype t, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(tu_get(got, i, t) - ref[i]);
        if (!(e <= m))
            m = e; /* NaN propagates as the max */
    }
    return m;
}

void tu_problem_init(tu_problem *p, const uly_attn_desc *a, uint64_t seed)
{
    p->a = *a;
    p->nq = (size_t)(a->batch * a->seq * a->heads * a->head_dim);
    p->nkv = (size_t)(a->batch * a->seq * a->kv_heads * a->head_dim);
    p->nlse = (size_t)(a->batch * a->heads * a->seq);
    p->q = malloc(p->nq * sizeof(double));
    p->k = malloc(p->nkv * sizeof(double));
    p->v = malloc(p->nkv * sizeof(double));
    p->dout = malloc(p->nq * sizeof(double));
    if (!p->q || !p->k || !p->v || !p->dout) {
        fprintf(stderr, "tu_problem_init: out of memory\n");
        abort();
    }
    tu_fill(p->q, p->nq, seed * 4 + 1, -1, 1);
    tu_fill(p->k, p->nkv, seed * 4 + 2, -1, 1);
    tu_fill(p->v, p->nkv, seed * 4 + 3, -1, 1);
    tu_fill(p->dout, p->nq, seed * 4 + 4, -1, 1);
}

void tu_problem_free(tu_problem *p)
{
    free(p->q);
    free(p->k);
    free(p->v);
    free(p->dout);
    memset(p, 0, sizeof *p);
}
