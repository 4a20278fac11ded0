/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_train_gemm.c -- what the trainer's per-segment GEMMs rest on
 * (doc/train.md, "Why the GEMMs stay per segment"): a segment's rows lie at
 * different places of a rank's buffer on different grids, so the GEMM of
 * one segment must give the same bits wherever its operands lie (offsets
 * of 0, 1, 3, 5 and 16 floats: every alignment class of a 64-byte line and
 * an aligned one).  Asserted bitwise for the token-wise products of the
 * model
 *   forward   out (M, OC) = x (M, IC) w^T        (NoTrans, Trans)
 *   backward  dx (M, IC) (+)= dout (M, OC) w     (NoTrans, NoTrans, beta 0 or 1)
 * at the shapes of the model (OC, IC in C, Ckv, 4C, V) for several widths
 * and segment lengths from 1 to 256.
 * Reported, not asserted: how many of these products differ when one GEMM
 * covers all the segments at once (OpenBLAS's bits per element depend on
 * M: small-matrix kernels, tail kernels), which is why the trainer does not
 * merge them.  tests/test_train_gemm.sh runs it under each OpenBLAS core
 * type this CPU can run.  Exit status 0: every offset agrees; 1: one does
 * not (named).
 */
#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

static float val(uint64_t i, uint64_t salt)
{
    uint64_t z = (i + 1) * 0x9e3779b97f4a7c15ULL ^ salt * 0xd1b54a32d192ed03ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (float)((double)(z >> 40) / (double)(1 << 24) - 0.5);
}

static const int pieces[] = {1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 33, 64, 85, 100, 171, 256};
enum { NP = sizeof pieces / sizeof pieces[0] };

static int merged_differ, merged_total; /* products (shape x piece) a merged GEMM changes */

enum { NOFF = 5 };
static const int offs[NOFF] = {0, 1, 3, 5, 16};

/* One shape: out (M, N) (beta)= a (M, K) op(b); op(b) = b^T (b: N x K) when
 * trans, else b (K x N).  Each piece at every offset against offset 0, and
 * the merged GEMM against the pieces (counted). */
static int check(int N, int K, int trans, float beta, const char *what)
{
    int M = 0;
    for (int i = 0; i < NP; i++)
        M += pieces[i];
    const size_t pad = 16;
    float *a = malloc(sizeof(float) * ((size_t)M * (size_t)K + pad)), *b = malloc(sizeof(float) * (size_t)N * (size_t)K);
    float *c0 = malloc(sizeof(float) * (size_t)M * (size_t)N), *c1 = malloc(sizeof(float) * ((size_t)M * (size_t)N + pad));
    float *ref = malloc(sizeof(float) * (size_t)M * (size_t)N);
    if (!a || !b || !c0 || !c1 || !ref) {
        fprintf(stderr, "test_train_gemm: out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < (int64_t)N * K; i++)
        b[i] = val((uint64_t)i, 2);
    for (int64_t i = 0; i < (int64_t)M * N; i++)
        c0[i] = val((uint64_t)i, 3); /* the accumulated output's initial value (beta 1) */
    const CBLAS_TRANSPOSE tb = trans ? CblasTrans : CblasNoTrans;
    const int ldb = trans ? K : N;
    int bad = 0;
    for (int oi = 0; oi < NOFF; oi++) {
        const int o = offs[oi];
        float *ao = a + o, *co = c1 + o;
        for (int64_t i = 0; i < (int64_t)M * K; i++)
            ao[i] = val((uint64_t)i, 1);
        memcpy(co, c0, sizeof(float) * (size_t)M * (size_t)N);
        int off = 0;
        for (int i = 0; i < NP; i++) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, tb, pieces[i], N, K, 1, ao + (int64_t)off * K, K, b, ldb, beta,
                        co + (int64_t)off * N, N);
            off += pieces[i];
        }
        if (o == 0) {
            memcpy(ref, co, sizeof(float) * (size_t)M * (size_t)N);
            continue;
        }
        for (int i = 0, t0 = 0; i < NP; t0 += pieces[i], i++)
            if (memcmp(ref + (int64_t)t0 * N, co + (int64_t)t0 * N, sizeof(float) * (size_t)pieces[i] * (size_t)N)) {
                fprintf(stderr, "test_train_gemm: %s N=%d K=%d beta=%g: the segment of %d rows gives other bits "
                        "with its operands %d floats further\n", what, N, K, (double)beta, pieces[i], o);
                bad = 1;
            }
    }
    /* the merged GEMM over all pieces, operands at offset 0 */
    for (int64_t i = 0; i < (int64_t)M * K; i++)
        a[i] = val((uint64_t)i, 1);
    memcpy(c1, c0, sizeof(float) * (size_t)M * (size_t)N);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, tb, M, N, K, 1, a, K, b, ldb, beta, c1, N);
    for (int i = 0, t0 = 0; i < NP; t0 += pieces[i], i++) {
        merged_total++;
        merged_differ += memcmp(ref + (int64_t)t0 * N, c1 + (int64_t)t0 * N,
                                sizeof(float) * (size_t)pieces[i] * (size_t)N) != 0;
    }
    free(a);
    free(b);
    free(c0);
    free(c1);
    free(ref);
    return bad;
}

int main(void)
{
    /* model widths C (Ckv = C and C / 4), vocabularies V */
    static const int Cs[] = {16, 24, 64, 256};
    static const int Vs[] = {16, 256, 1000};
    int bad = 0;
    for (size_t ci = 0; ci < sizeof Cs / sizeof Cs[0]; ci++) {
        const int C = Cs[ci], Ckv[2] = {C, C / 4};
        for (int j = 0; j < 2; j++) {
            bad |= check(Ckv[j], C, 1, 0, "forward (q, k, v)");
            bad |= check(C, Ckv[j], 0, 1, "dx (k, v; accumulated)");
        }
        bad |= check(C, C, 1, 0, "forward (q, projection)");
        bad |= check(4 * C, C, 1, 0, "forward (MLP up)");
        bad |= check(C, 4 * C, 1, 0, "forward (MLP down)");
        bad |= check(C, C, 0, 0, "dx (q, projection)");
        bad |= check(C, 4 * C, 0, 0, "dx (MLP up)");
        bad |= check(4 * C, C, 0, 0, "dx (MLP down)");
        for (size_t vi = 0; vi < sizeof Vs / sizeof Vs[0]; vi++) {
            bad |= check(Vs[vi], C, 1, 0, "forward (LM head)");
            bad |= check(C, Vs[vi], 0, 0, "dx (LM head)");
        }
    }
#ifdef HAVE_OPENBLAS_GET_CORENAME
    const char *core = openblas_get_corename();
#else
    const char *core = "unknown";
#endif
    printf("test_train_gemm: OpenBLAS core %s: per-segment GEMMs %s at every offset; one merged GEMM would change "
           "%d of %d segment products\n", core, bad ? "DIFFER" : "agree bitwise", merged_differ, merged_total);
    return bad;
}
