/* SPDX-License-Identifier: Apache-2.0 */
/*
 * inputs.c -- what attn, bench and calibrate share below them: the seeded
 * input tensors (the same values whatever the sharding), document lengths
 * (--doc-lens) and the --a2a vocabulary.  No MPI, no printing: see cli.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char *const a2a_mode_names[] = {"auto", "pack", "datatype", "pipeline", "shm", "cma", NULL}; /* = ULY_A2A_* */

double input_value(uint64_t seed, int which, uint64_t index)
{
    uint64_t z = seed * 0x9e3779b97f4a7c15ULL + ((uint64_t)which << 58) + index * 0xd1b54a32d192ed03ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return -1.0 + 2.0 * ((double)(z >> 11) * 0x1.0p-53);
}

void fill_shard(void *x, uly_dtype t, uint64_t seed, int which, int64_t B, int64_t N, int64_t t0,
                int64_t n, int64_t Hx, int64_t d)
{
    const int64_t row = Hx * d;
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (int64_t bt = 0; bt < B * n; bt++) {
        int64_t b = bt / n, tt = bt % n;
        uint64_t g0 = (uint64_t)((b * N + t0 + tt) * row);
        for (int64_t e = 0; e < row; e++) {
            double v = input_value(seed, which, g0 + (uint64_t)e);
            if (t == ULY_F32)
                ((float *)x)[bt * row + e] = (float)v;
            else
                ((double *)x)[bt * row + e] = v;
        }
    }
}

/* Document lengths "100,37,..." (the same for every batch row) -> offsets. */
int doc_lens_offsets(const char *s, int64_t B, int64_t N, int64_t **off, int64_t *docs, char *msg,
                          size_t len)
{
    int64_t D = 1;
    for (const char *c = s; *c; c++)
        D += *c == ',';
    int64_t *o = uly_malloc((size_t)(B * (D + 1)) * sizeof *o);
    if (!o) {
        snprintf(msg, len, "--doc-lens: out of memory");
        return 1;
    }
    o[0] = 0;
    const char *c = s;
    for (int64_t i = 0; i < D; i++) {
        char *end;
        long long v = strtoll(c, &end, 10);
        if (end == c || v < 0 || (*end != ',' && *end != '\0') || o[i] > N - v) {
            snprintf(msg, len, "--doc-lens '%s': entry %lld must be a length >= 0, and the lengths must sum to "
                     "--seq %lld", s, (long long)(i + 1), (long long)N);
            uly_free(o);
            return 1;
        }
        o[i + 1] = o[i] + v;
        c = *end ? end + 1 : end;
    }
    if (o[D] != N) {
        snprintf(msg, len, "--doc-lens '%s' sums to %lld, not --seq %lld", s, (long long)o[D], (long long)N);
        uly_free(o);
        return 1;
    }
    for (int64_t b = 1; b < B; b++)
        memcpy(o + b * (D + 1), o, (size_t)(D + 1) * sizeof *o);
    *off = o;
    *docs = D;
    return 0;
}
