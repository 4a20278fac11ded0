/* SPDX-License-Identifier: Apache-2.0 */
/*
 * model.c -- GPT-2 layers (ulysses_model.h): instantiates model_impl.h in
 * fp32 and fp64, plus the labels and positions of a sequence shard.
 * What this file is not: the model (src/train.c composes these layers with
 * the distributed attention) or the training loop (src/cli/cmd_train.c).
 */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "config.h"
#include "ulysses_model.h"
#include "vexp.h"

#define REAL float
#define GEMM cblas_sgemm
#define TANH tanhf
#define SFX(name) name##_f32
#define MODEL_VTANH 1 /* fp32: the GELU's tanh by the vector 2^x (model_impl.h) */
#include "model_impl.h"
#undef MODEL_VTANH
#undef REAL
#undef GEMM
#undef TANH
#undef SFX

#define REAL double
#define GEMM cblas_dgemm
#define TANH tanh
#define SFX(name) name##_f64
#include "model_impl.h"
#undef REAL
#undef GEMM
#undef TANH
#undef SFX

int uly_shard_labels(const int32_t *row, const uint8_t *no_loss, int64_t N, const int64_t *doc_off, int64_t docs, int64_t t0,
                     int64_t n, int32_t *tok, int32_t *target, int32_t *pos)
{
    if (!row || N < 1 || t0 < 0 || n < 0 || t0 + n > N || (n > 0 && (!tok || !target || !pos)))
        return -1;
    if (doc_off) {
        if (docs < 1 || doc_off[0] != 0 || doc_off[docs] != N)
            return -1;
        for (int64_t i = 0; i < docs; i++)
            if (doc_off[i + 1] < doc_off[i])
                return -1;
    }
    int64_t di = 0; /* document of token t0 + t: doc_off[di] <= t0 + t < doc_off[di + 1] */
    for (int64_t t = 0; t < n; t++) {
        int64_t g = t0 + t, start = 0, end = N;
        if (doc_off) {
            while (doc_off[di + 1] <= g)
                di++;
            start = doc_off[di];
            end = doc_off[di + 1];
        }
        tok[t] = row[g];
        target[t] = (doc_off && g + 1 == end) || (no_loss && no_loss[g]) ? -1 : row[g + 1];
        pos[t] = (int32_t)(g - start);
    }
    return 0;
}
