/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_train.c -- `make bench-train`: tokens/s and GFLOP/s of a whole
 * training step (forward, backward, exact gradient sums, clipping, AdamW)
 * next to sgemm's GFLOP/s measured in the same run (doc/performance.md,
 * "Training step, round three").  Run it under mpirun: every rank times
 * its own sgemm at the same moment, so the reference is what the same
 * processes on the same cores get from OpenBLAS.
 *
 *   bench_train [--layers L] [--channels C] [--heads H] [--seq N] [--vocab V]
 *               [--batch B] [--dp D] [--steps K] [--repeat R] [--gemm-size n]
 *               [--threads T]
 *
 * Each of R repetitions times one sgemm of n^3 then K steps; medians over
 * the repetitions.  Times are wall
 * clock (the slowest rank) and, beside them, this process's CPU time
 * (rank 0), which a loaded machine disturbs less.
 *
 * FLOPs per step (the model shape, T = B N tokens, d = C / H, Cq = C + 2 Ckv):
 *   dense   3 * 2 T C (Cq + C + 4C + 4C) L   QKV, projection, MLP up and down;
 *                                            forward 1x, backward 2x (dx, dW)
 *   head    3 * 2 T C V                      the tied LM head
 *   attn    3.5 * 4 d H B N (N + 1) / 2 L     causal pairs, 4 pairs d forward
 *                                            and 2.5x that backward (as
 *                                            `ulysses bench kernel` counts)
 *   optim   12 P                             norm, clipping and AdamW per
 *                                            parameter (a nominal count)
 * Element-wise work (layer norm, GELU, softmax's exponentials, the loss) is
 * not counted.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <cblas.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "ulysses.h"
#include "ulysses_train.h"

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static const char *blas_core(void)
{
#ifdef HAVE_OPENBLAS_GET_CORENAME
    return openblas_get_corename();
#else
    return "unknown";
#endif
}

static int usage(int rank, const char *msg)
{
    if (rank == 0)
        fprintf(stderr,
                "bench_train: %s\nusage: bench_train [--layers L] [--channels C] [--heads H] [--seq N] [--vocab V] "
                "[--batch B] [--dp D] [--steps K] [--repeat R] [--gemm-size n] [--threads T]\n",
                msg);
    MPI_Finalize();
    return 2;
}

/* K steps of T on the synthetic batch; wall (slowest rank) and CPU seconds. */
static int steps(uly_train *T, int64_t K, const int32_t *tok, const int32_t *tgt, const int32_t *pos, double *wall,
                 double *cpu, double *t_reduce)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double w0 = MPI_Wtime(), c0 = cpu_now(), red = 0;
    for (int64_t k = 0; k < K; k++) {
        uly_train_stats st;
        int rc = uly_train_step(T, tok, tgt, pos, NULL, 0, 1, &st);
        if (rc)
            return rc;
        red += st.t_reduce;
    }
    double w = MPI_Wtime() - w0;
    *cpu = cpu_now() - c0;
    MPI_Allreduce(&w, wall, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&red, t_reduce, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return ULY_OK;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, W;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &W);
    int64_t L = 4, C = 256, H = 8, N = 1024, V = 256, B = 4, dp = 1, K = 2, R = 3, n = 1024, thr = 1;
    struct { const char *name; int64_t *v, lo, hi; } o[] = {
        {"--layers", &L, 1, 1024},  {"--channels", &C, 1, 65536}, {"--heads", &H, 1, 4096},
        {"--seq", &N, 4, 1 << 24},  {"--vocab", &V, 2, 1 << 24},  {"--batch", &B, 1, 1 << 20},
        {"--dp", &dp, 1, 1 << 20},  {"--steps", &K, 1, 1000},     {"--repeat", &R, 1, 99},
        {"--gemm-size", &n, 64, 8192}, {"--threads", &thr, 1, 1024}};
    for (int i = 1; i < argc; i++) {
        size_t j = 0;
        while (j < sizeof o / sizeof o[0] && strcmp(argv[i], o[j].name) != 0)
            j++;
        if (j == sizeof o / sizeof o[0])
            return usage(rank, "unknown option");
        char *end = NULL;
        long long x = i + 1 < argc ? strtoll(argv[i + 1], &end, 10) : 0;
        if (i + 1 >= argc || !end || *end || x < o[j].lo || x > o[j].hi)
            return usage(rank, "an option's value is missing or out of range");
        *o[j].v = x;
        i++;
    }
    if (W % dp)
        return usage(rank, "--dp does not divide the ranks");
    uly_gpt_config cfg = {V, N, L, C, H, H};
    uly_train_opts to;
    uly_train_opts_default(&to);
    to.dp = (int)dp;
    to.sp = (int)(W / dp);
    to.batch = B;
    to.kernel.threads = (int)thr; /* the attention kernel's; OpenBLAS and the layers: the environment's */
    uly_train *T = NULL;
    int rc = uly_train_create(MPI_COMM_WORLD, &cfg, &to, &T);
    if (rc) {
        if (rank == 0)
            fprintf(stderr, "bench_train: %s\n", uly_last_error());
        MPI_Finalize();
        return rc == ULY_EINVAL ? 2 : 1;
    }
    int64_t rb, rows, tb, toks;
    uly_train_shard(T, &rb, &rows, &tb, &toks);
    const int64_t Tn = rows * toks;
    int32_t *row = malloc((size_t)(N + 1) * sizeof(int32_t));
    int32_t *tok = malloc((size_t)(Tn ? Tn : 1) * 3 * sizeof(int32_t)), *tgt = tok + (Tn ? Tn : 1),
            *pos = tgt + (Tn ? Tn : 1);
    float *ga = malloc((size_t)(n * n) * 3 * sizeof(float));
    if (!row || !tok || !ga) {
        fprintf(stderr, "bench_train: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int64_t b = 0; b < rows; b++) { /* a fixed pseudo-random token stream per row */
        uint64_t z = 0x9e3779b97f4a7c15ULL * (uint64_t)(rb + b + 1);
        for (int64_t t = 0; t <= N; t++) { /* N + 1 tokens: the last one is the last target */
            z ^= z << 13, z ^= z >> 7, z ^= z << 17;
            row[t] = (int32_t)(z % (uint64_t)V);
        }
        uly_shard_labels(row, NULL, N, NULL, 0, tb, toks, tok + b * toks, tgt + b * toks, pos + b * toks);
    }
    for (int64_t i = 0; i < 3 * n * n; i++)
        ga[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
    const double Td = (double)B * (double)N, Cd = (double)C, Cq = 3.0 * Cd, d = Cd / (double)H;
    const double flops = 3 * 2 * Td * Cd * (Cq + 9 * Cd) * (double)L + 3 * 2 * Td * Cd * (double)V +
                         3.5 * 4 * d * (double)H * (double)B * (double)N * (double)(N + 1) / 2 * (double)L +
                         12.0 * (double)uly_train_nparams(T);
    const double gflop = 2.0 * (double)n * (double)n * (double)n;
    double *m = calloc((size_t)R * 8, sizeof(double)); /* per repetition: sgemm wall, cpu; step wall, cpu, t_reduce */
    /* warm-up: one step each (first-touch of the buffers) */
    double w, c, r;
    rc = steps(T, 1, tok, tgt, pos, &w, &c, &r);
    for (int64_t i = 0; i < R && !rc; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double w0 = MPI_Wtime(), c0 = cpu_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1, ga, (int)n, ga + n * n,
                    (int)n, 0, ga + 2 * n * n, (int)n);
        double ws = MPI_Wtime() - w0, cs = cpu_now() - c0;
        MPI_Allreduce(&ws, &m[i * 8 + 0], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        m[i * 8 + 1] = cs;
        rc = steps(T, K, tok, tgt, pos, &m[i * 8 + 2], &m[i * 8 + 3], &m[i * 8 + 4]);
    }
    if (rc) {
        if (rank == 0)
            fprintf(stderr, "bench_train: %s\n", uly_last_error());
        MPI_Finalize();
        return 1;
    }
    double col[5];
    for (int j = 0; j < 5; j++) {
        double *v = malloc((size_t)R * sizeof(double));
        for (int64_t i = 0; i < R; i++)
            v[i] = m[i * 8 + j];
        col[j] = median(v, (int)R);
        free(v);
    }
    if (rank == 0) {
        double la[3] = {0, 0, 0};
        FILE *f = fopen("/proc/loadavg", "r");
        if (f) {
            if (fscanf(f, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3)
                la[0] = la[1] = la[2] = 0;
            fclose(f);
        }
        /* sgemm: every rank ran one at the same time, so the machine's rate is W of them over the slowest */
        const double sg_w = W * gflop / col[0] / 1e9, sg_c = gflop / col[1] / 1e9;
        const double st_w = K * flops / col[2] / 1e9, st_c = K * flops / col[3] / 1e9 / W;
        const char *ot = getenv("OPENBLAS_NUM_THREADS");
        printf("bench train: L=%lld C=%lld H=%lld N=%lld V=%lld B=%lld, %d rank%s (dp %lld x sp %lld), %lld steps x %lld "
               "repetitions (interleaved with sgemm %lld^3), attention threads %lld, OPENBLAS_NUM_THREADS %s, "
               "OpenBLAS core %s, load average %.2f %.2f %.2f\n",
               (long long)L, (long long)C, (long long)H, (long long)N, (long long)V, (long long)B, W, W > 1 ? "s" : "",
               (long long)dp, (long long)(W / dp), (long long)K, (long long)R, (long long)n, (long long)thr,
               ot ? ot : "unset", blas_core(), la[0], la[1], la[2]);
        printf("step FLOPs %.4g (formula: tests/bench_train.c), %lld parameters\n", flops,
               (long long)uly_train_nparams(T));
        printf("%-34s %12s %12s %12s %10s\n", "medians", "tokens/s", "GFLOP/s", "t_reduce s", "/ sgemm");
        printf("%-34s %12s %12.2f %12s %10s\n", "sgemm (reference, wall)", "", sg_w, "", "1.000");
        printf("%-34s %12.1f %12.2f %12.4f %10.3f\n", "step (wall)", K * Td / col[2], st_w, col[4] / K, st_w / sg_w);
        printf("%-34s %12s %12.2f %12s %10s\n", "sgemm (reference, rank-0 CPU)", "", sg_c, "", "1.000");
        printf("%-34s %12.1f %12.2f %12s %10.3f\n", "step (rank-0 CPU, per rank)", K * Td / col[3] / W, st_c, "",
               st_c / sg_c);
    }
    free(m);
    free(ga);
    free(tok);
    free(row);
    uly_train_free(T);
    MPI_Finalize();
    return 0;
}
