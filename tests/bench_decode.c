/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_decode.c -- the decode kernel (uly_decode_attn) against this
 * machine's memory bandwidth, measured in the same run (`make bench`,
 * doc/kernels.md).  A decode step reads every key and value of the shard
 * once, so its bandwidth is (K + V bytes) / time.  The reference is a
 * STREAM-style copy (c = a: 2 x 8 bytes per element, read and write) and
 * triad (a = b + s c: 3 x 8 bytes) over arrays of 1 GiB each, far beyond
 * the last-level cache, with the kernel's thread count and static
 * scheduling.  Medians of --repeat runs (default 5).  Not a test; `make
 * bench-decode` names the CPU.
 *
 *   bench_decode [--repeat R] [--tokens N[,N...]] [--heads H] [--kv-heads Hkv] [--head-dim d]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "ulysses.h"
#include "ulysses_infer.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

static int threads_now(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* STREAM arrays: n doubles each, first touched by the threads that stream them. */
typedef struct streams {
    double *a, *b, *c;
    long n;
    int rounds;
} streams;

static void stream_init(streams *S, long n)
{
    S->n = n;
    S->rounds = 0;
    S->a = malloc((size_t)n * sizeof(double));
    S->b = malloc((size_t)n * sizeof(double));
    S->c = malloc((size_t)n * sizeof(double));
    if (!S->a || !S->b || !S->c) {
        fprintf(stderr, "bench_decode: cannot allocate the STREAM arrays (3 x %ld MiB)\n", n * 8 >> 20);
        exit(2);
    }
    double *a = S->a, *b = S->b, *c = S->c;
    long i;
#pragma omp parallel for schedule(static)
    for (i = 0; i < n; i++) {
        a[i] = 1.0;
        b[i] = 2.0;
        c[i] = 0.0;
    }
}

/* One round: the seconds of copy (c = a) and triad (a = b + 3 c). */
static void stream_round(streams *S, double *tcopy, double *ttriad)
{
    double *a = S->a, *b = S->b, *c = S->c;
    const long n = S->n;
    long i;
    double t0 = now();
#pragma omp parallel for schedule(static)
    for (i = 0; i < n; i++)
        c[i] = a[i];
    double t1 = now();
#pragma omp parallel for schedule(static)
    for (i = 0; i < n; i++)
        a[i] = b[i] + 3.0 * c[i];
    *tcopy = t1 - t0;
    *ttriad = now() - t1;
    S->rounds++;
}

/* The arrays hold what the rounds computed; then free them. */
static int stream_free(streams *S)
{
    double x = 1.0;
    for (int r = 0; r < S->rounds; r++)
        x = 2.0 + 3.0 * x;
    const int ok = S->a[S->n / 2] == x && S->c[S->n - 1] == (x - 2.0) / 3.0;
    free(S->a); free(S->b); free(S->c);
    return ok;
}

int main(int argc, char **argv)
{
    int repeat = 5;
    int64_t H = 32, Hkv = 8, d = 128, tokens[8] = {131072, 262144};
    int ntok = 2;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(argv[i], "--repeat") && v) {
            repeat = (int)strtol(v, &end, 10);
        } else if (!strcmp(argv[i], "--heads") && v) {
            H = strtoll(v, &end, 10);
        } else if (!strcmp(argv[i], "--kv-heads") && v) {
            Hkv = strtoll(v, &end, 10);
        } else if (!strcmp(argv[i], "--head-dim") && v) {
            d = strtoll(v, &end, 10);
        } else if (!strcmp(argv[i], "--tokens") && v) {
            ntok = 0;
            const char *p = v;
            while (ntok < 8) {
                tokens[ntok] = strtoll(p, &end, 10);
                if (end == p || tokens[ntok] < 1)
                    break;
                ntok++;
                if (*end != ',')
                    break;
                p = end + 1;
            }
        } else {
            fprintf(stderr, "bench_decode: unknown or incomplete option '%s'\n", argv[i]);
            return 2;
        }
        if (!end || *end || repeat < 1 || H < 1 || Hkv < 1 || d < 1 || H % Hkv || ntok < 1) {
            fprintf(stderr, "bench_decode: bad value '%s' for %s\n", v, argv[i]);
            return 2;
        }
        i++;
    }
    FILE *la = fopen("/proc/loadavg", "r");
    double load = -1;
    if (la) {
        if (fscanf(la, "%lf", &load) != 1)
            load = -1;
        fclose(la);
    }
    const int T = threads_now();
    printf("decode kernel vs memory bandwidth: %d thread(s), load average %.2f\n", T, load);
    /* one shard of the most tokens; the shorter ones are its first rows */
    int64_t nmax = 0;
    for (int x = 0; x < ntok; x++)
        nmax = tokens[x] > nmax ? tokens[x] : nmax;
    const size_t nkv = (size_t)(nmax * Hkv * d);
    float *k = malloc(nkv * sizeof *k), *v = malloc(nkv * sizeof *v), *q = malloc((size_t)(H * d) * sizeof *q);
    float *o = malloc((size_t)(H * d) * sizeof *o), *lse = malloc((size_t)H * sizeof *lse);
    double *tc = malloc((size_t)repeat * sizeof *tc), *tt = malloc((size_t)repeat * sizeof *tt);
    double *tk = malloc((size_t)(repeat * ntok) * sizeof *tk);
    if (!k || !v || !q || !o || !lse || !tc || !tt || !tk) {
        fprintf(stderr, "bench_decode: cannot allocate a shard of %lld tokens\n", (long long)nmax);
        return 2;
    }
    uint64_t s = 88172645463325252ull;
    for (size_t i = 0; i < nkv; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        k[i] = (float)((double)(s >> 11) * 0x1p-53 * 2 - 1);
        v[i] = (float)((double)(s >> 12) * 0x1p-52 * 2 - 1);
    }
    for (int64_t i = 0; i < H * d; i++)
        q[i] = (float)(i % 7) / 7.0f - 0.5f;
    streams S;
    stream_init(&S, 1L << 27); /* 3 arrays of 1 GiB */
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = 1; a.heads = H; a.kv_heads = Hkv; a.head_dim = d; a.causal = 1; a.dtype = ULY_F32; a.seq = 1;
    int status = 0;
    /* interleaved: every round streams, then decodes every length, so that
     * both see the same load */
    for (int r = 0; r < repeat; r++) {
        stream_round(&S, &tc[r], &tt[r]);
        for (int x = 0; x < ntok; x++) {
            const int64_t sb = 0, sc = tokens[x];
            double t0 = now();
            int rc = uly_decode_attn(&a, tokens[x] - 1, 1, &sb, &sc, q, k, v, o, lse, T);
            tk[x * repeat + r] = now() - t0;
            if (rc) {
                fprintf(stderr, "bench_decode: %s\n", uly_last_error());
                status = 1;
            }
        }
    }
    if (!stream_free(&S)) {
        fprintf(stderr, "bench_decode: the STREAM arrays hold wrong values\n");
        status = 1;
    }
    const double copy = 2.0 * 8.0 * (double)(1L << 27) / median(tc, repeat) / 1e9;
    const double triad = 3.0 * 8.0 * (double)(1L << 27) / median(tt, repeat) / 1e9;
    printf("  stream copy %.2f GB/s, triad %.2f GB/s (3 arrays of 1 GiB, medians of %d, interleaved with the "
           "decodes)\n", copy, triad, repeat);
    printf("  %10s %10s %10s %10s %14s\n", "tokens", "K+V MiB", "time ms", "GB/s", "ratio to copy");
    for (int x = 0; x < ntok; x++) {
        const double bytes = 2.0 * (double)(tokens[x] * Hkv * d) * sizeof(float);
        const double med = median(tk + x * repeat, repeat);
        printf("  %10lld %10.0f %10.2f %10.2f %14.2f\n", (long long)tokens[x], bytes / 1048576.0, med * 1e3,
               bytes / med / 1e9, bytes / med / 1e9 / copy);
    }
    free(k); free(v); free(q); free(o); free(lse); free(tc); free(tt); free(tk);
    return status;
}
