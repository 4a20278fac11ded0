/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd_calibrate.c -- `ulysses calibrate --out platform.json`: measure this
 * machine (or mini-cluster) the way ulysses-sim describes a cluster and write
 * a platform file it loads: every MPI rank is one "GPU", the ranks sharing
 * memory are one node.
 *
 * What is measured (all ranks at once where the job runs all ranks at once,
 * so that ranks sharing cores see the rate they will get):
 *   gemm       sgemm GFLOP/s for square shapes                 -> peak FLOP/s
 *   attention  blocked attention forward and backward GFLOP/s by
 *              (sequence, head dim, mask)                       -> attention efficiencies
 *   memory     triad a = b + s c over arrays larger than the caches -> "HBM" bandwidth
 *   p2p        ping-pong, intra-node and inter-node            -> latencies
 *   a2a        the all-to-all of `ulysses attn` (uly_dist_a2a) by size,
 *              on each node's ranks                             -> intra-node bandwidth
 *              and on all ranks across the nodes                -> per-node link bandwidth
 *              (raw MPI_Alltoall and a node-pair MPI_Sendrecv exchange
 *              are measured too, for the notes)
 *
 * What it is not: a benchmark suite (see `ulysses bench`), nor a model: the
 * mapping of measurements to platform keys is written down in
 * doc/validation.md, and every number in the file carries its method and its
 * spread (min / median / max over ranks x repetitions) under "calibration".
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "args.h"
#include "base/base_json.h"
#include "base/base_progress.h"
#include "cli.h"
#include "config.h"
#include "drv.h"
#include "timing.h"
#include "ulysses.h"
#include "ulysses_dist.h"

/* ---------------------------------------------------------------- context */

typedef struct cal {
    drv *d;                          /* the driver context (drv.h): messages, agreement, exit status */
    drv_out *out;                    /* rank 0: the platform file being written */
    MPI_Comm world, node;            /* the driver's communicators (drv.h): all ranks, this node's ranks */
    int rank, size, node_rank, g, nodes, node_id;
    int quick;
    int a2a;                         /* --a2a: the all-to-all mode measured (ULY_A2A_*) */
    int a2a_fell_back;               /* rank 0: cma not allowed (uly_dist_a2a_note, said once): cma ran as
                                        shm, auto left it out */
    int64_t repeat, threads, seq, head_dim;
    int tty;                         /* rank 0's stderr is a terminal */
    int quiet;                       /* --quiet: no progress lines */
    int step, steps;
    double t_start;
} cal;

static void progress(cal *c, const char *fmt, ...)
{
    if (c->rank != 0 || c->quiet)
        return;
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    c->step++;
    fprintf(stderr, "%scalibrate [%d/%d %5.1fs] %-70s%s", c->tty ? "\r" : "", c->step, c->steps,
            now_seconds() - c->t_start, line, c->tty ? "" : "\n");
    fflush(stderr);
    c->d->line_open = c->tty;   /* a message from drv_sync ends the line first */
}

/* The measurements below are steps of the driver (drv.h): allocations go
 * through drv_alloc_n, every MPI call through drv_mpi, library calls
 * through drv_lib, and each step ends with drv_sync, so that a failure on
 * one rank stops every rank with its message and exit status.  Until that
 * drv_sync every rank makes the same collective calls, failed or not. */

/* Gather every rank's samples to rank 0 and reduce them to min/median/max
 * (on rank 0; zeros elsewhere).  Returns the agreed exit status. */
static int gather_stats(cal *c, const double *x, int n, stats *s)
{
    drv *d = c->d;
    double *all = c->rank == 0 ? drv_alloc_n(d, (size_t)c->size * (size_t)n, sizeof *all, "the samples of every rank")
                               : NULL;
    int rc = drv_sync(d);
    if (!rc) {
        drv_mpi(d, MPI_Gather(x, n, MPI_DOUBLE, all, n, MPI_DOUBLE, 0, c->world), "MPI_Gather (samples)");
        rc = drv_sync(d);
    }
    stats z = {0, 0, 0};
    *s = z;
    if (!rc && c->rank == 0)
        *s = stats_of(all, (size_t)c->size * (size_t)n);
    drv_free(all);
    return rc;
}

/* The barrier before a timed region. */
static void barrier(cal *c)
{
    drv_mpi(c->d, MPI_Barrier(c->world), "MPI_Barrier");
}

static void set_blas_threads(int t)
{
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
    openblas_set_num_threads(t);
#else
    (void)t;
#endif
}

/* o[name] = {"median", "min", "max"} of s times scale; 0 or -1 (the
 * helpers' failures, o NULL included). */
static int js_stats(json_t *o, const char *name, stats s, double scale)
{
    json_t *x = uly_json_add_object(o, name);
    if (!x)
        return -1;
    return uly_json_set_real(x, "median", s.median * scale) | uly_json_set_real(x, "min", s.min * scale) |
           uly_json_set_real(x, "max", s.max * scale);
}

/* ---------------------------------------------------------------- compute */

typedef struct gemm_res { int64_t n; stats gflops; } gemm_res;

static int measure_gemm(cal *c, int64_t n, gemm_res *out)
{
    drv *d = c->d;
    const size_t nn = (size_t)(n * n);
    float *a = drv_alloc_n(d, nn, 4, "the sgemm matrices"), *b = drv_alloc_n(d, nn, 4, "the sgemm matrices");
    float *cc = drv_alloc_n(d, nn, 4, "the sgemm matrices");
    double *g = drv_alloc_n(d, (size_t)c->repeat, sizeof *g, "the sgemm samples");
    int rc = drv_sync(d);
    if (!rc) {
        fill_shard(a, ULY_F32, 11, 0, 1, n, 0, n, 1, n);
        fill_shard(b, ULY_F32, 11, 1, 1, n, 0, n, 1, n);
        set_blas_threads((int)c->threads);
        for (int64_t it = -1; it < c->repeat; it++) {
            barrier(c);
            double t0 = now_seconds();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, a, (int)n, b,
                        (int)n, 0.0f, cc, (int)n);
            double t = now_seconds() - t0;
            if (it >= 0)
                g[it] = 2.0 * (double)n * (double)n * (double)n / t * 1e-9;
        }
        rc = drv_sync(d);
    }
    if (!rc) {
        out->n = n;
        rc = gather_stats(c, g, (int)c->repeat, &out->gflops);
    }
    drv_free(a); drv_free(b); drv_free(cc); drv_free(g);
    return rc;
}

typedef struct attn_res { int64_t seq, d; int causal; stats fwd, bwd; } attn_res;

static int measure_attn(cal *c, int64_t seq, int64_t d, int causal, attn_res *out)
{
    drv *dr = c->d;
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = 1; a.seq = seq; a.heads = 1; a.kv_heads = 1; a.head_dim = d; a.causal = causal; a.dtype = ULY_F32;
    const size_t nq = (size_t)(seq * d);
    const char *what = "the attention tensors";
    float *q = drv_alloc_n(dr, nq, 4, what), *k = drv_alloc_n(dr, nq, 4, what), *v = drv_alloc_n(dr, nq, 4, what);
    float *o = drv_alloc_n(dr, nq, 4, what), *lse = drv_alloc_n(dr, (size_t)seq, 4, what);
    float *dout = drv_alloc_n(dr, nq, 4, what), *dq = drv_alloc_n(dr, nq, 4, what), *dk = drv_alloc_n(dr, nq, 4, what);
    float *dv = drv_alloc_n(dr, nq, 4, what);
    double *tf = drv_alloc_n(dr, (size_t)c->repeat, sizeof *tf, "the attention samples");
    double *tb = drv_alloc_n(dr, (size_t)c->repeat, sizeof *tb, "the attention samples");
    int rc = drv_sync(dr);
    if (!rc) {
        fill_shard(q, ULY_F32, 12, 0, 1, seq, 0, seq, 1, d);
        fill_shard(k, ULY_F32, 12, 1, 1, seq, 0, seq, 1, d);
        fill_shard(v, ULY_F32, 12, 2, 1, seq, 0, seq, 1, d);
        fill_shard(dout, ULY_F32, 12, 3, 1, seq, 0, seq, 1, d);
        uly_kernel_opts ko;
        memset(&ko, 0, sizeof ko);
        ko.threads = (int)c->threads;
        const double ffl = 4.0 * uly_attn_pairs(&a) * (double)d, bfl = 2.5 * ffl;
        for (int64_t it = -1; it < c->repeat && !rc; it++) {
            barrier(c);
            double t0 = now_seconds();
            int lrc = uly_attn_fwd(&a, &ko, q, k, v, o, lse);
            double t1 = now_seconds();
            drv_lib(dr, lrc, DRV_RUNTIME, "attention forward");
            barrier(c);
            double t2 = now_seconds();
            if (!lrc) {
                lrc = uly_attn_bwd(&a, &ko, q, k, v, o, lse, dout, dq, dk, dv);
                drv_lib(dr, lrc, DRV_RUNTIME, "attention backward");
            }
            double t3 = now_seconds();
            rc = drv_sync(dr);
            if (it >= 0) {
                tf[it] = ffl / (t1 - t0) * 1e-9;
                tb[it] = bfl / (t3 - t2) * 1e-9;
            }
        }
        if (!rc) {
            out->seq = seq; out->d = d; out->causal = causal;
            rc = gather_stats(c, tf, (int)c->repeat, &out->fwd);
        }
        if (!rc)
            rc = gather_stats(c, tb, (int)c->repeat, &out->bwd);
    }
    drv_free(q); drv_free(k); drv_free(v); drv_free(o); drv_free(lse); drv_free(dout); drv_free(dq); drv_free(dk);
    drv_free(dv); drv_free(tf); drv_free(tb);
    return rc;
}

/* Triad a = b + s c over three arrays of `bytes` each; GB/s counts 3 x bytes
 * (two reads, one write; write-allocate traffic not counted, as STREAM). */
static int measure_memory(cal *c, size_t bytes, stats *out)
{
    drv *d = c->d;
    const size_t n = bytes / 4;
    float *a = drv_alloc_n(d, n, 4, "the triad arrays"), *b = drv_alloc_n(d, n, 4, "the triad arrays");
    float *cc = drv_alloc_n(d, n, 4, "the triad arrays");
    double *g = drv_alloc_n(d, (size_t)c->repeat, sizeof *g, "the triad samples");
    int rc = drv_sync(d);
    if (!rc) {
        for (size_t i = 0; i < n; i++) {
            a[i] = 0.0f; b[i] = (float)(i & 1023); cc[i] = 1.0f;
        }
        for (int64_t it = -1; it < c->repeat; it++) {
            barrier(c);
            double t0 = now_seconds();
            const float s = 0.5f + (float)it;
            for (size_t i = 0; i < n; i++)
                a[i] = b[i] + s * cc[i];
            double t = now_seconds() - t0;
            if (it >= 0)
                g[it] = 3.0 * (double)bytes / t * 1e-9;
        }
        volatile float sink = a[n / 2];
        (void)sink;
        rc = drv_sync(d);
    }
    if (!rc)
        rc = gather_stats(c, g, (int)c->repeat, out);
    drv_free(a); drv_free(b); drv_free(cc); drv_free(g);
    return rc;
}

/* ---------------------------------------------------------------- network */

/* Ping-pong between world ranks r0 and r1 (others wait): half round trip, s,
 * rank r0's samples reduced on rank 0 (zeros elsewhere). */
static int ping_pong(cal *c, int r0, int r1, size_t bytes, int iters, char *buf, stats *s)
{
    drv *d = c->d;
    stats z = {0, 0, 0};
    *s = z;
    double *t = drv_alloc_n(d, (size_t)c->repeat, sizeof *t, "the ping-pong samples");
    /* rank 0 receives rank r0's samples when it is not r0 itself */
    double *x = c->rank == 0 && r0 != 0 ? drv_alloc_n(d, (size_t)c->repeat, sizeof *x, "the ping-pong samples") : t;
    int rc = drv_sync(d);
    if (rc) {
        if (x != t)
            drv_free(x);
        drv_free(t);
        return rc;
    }
    for (int64_t it = -1; it < c->repeat; it++) {
        barrier(c);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters && !d->code; i++) {
            if (c->rank == r0) {
                drv_mpi(d, MPI_Send(buf, (int)bytes, MPI_BYTE, r1, 1, c->world), "MPI_Send (ping-pong)");
                drv_mpi(d, MPI_Recv(buf, (int)bytes, MPI_BYTE, r1, 1, c->world, MPI_STATUS_IGNORE),
                        "MPI_Recv (ping-pong)");
            } else if (c->rank == r1) {
                drv_mpi(d, MPI_Recv(buf, (int)bytes, MPI_BYTE, r0, 1, c->world, MPI_STATUS_IGNORE),
                        "MPI_Recv (ping-pong)");
                drv_mpi(d, MPI_Send(buf, (int)bytes, MPI_BYTE, r0, 1, c->world), "MPI_Send (ping-pong)");
            }
        }
        if (it >= 0)
            t[it] = (MPI_Wtime() - t0) / (2.0 * iters);
    }
    if ((rc = drv_sync(d)) == 0) {
        if (c->rank == r0 && r0 != 0)
            drv_mpi(d, MPI_Send(t, (int)c->repeat, MPI_DOUBLE, 0, 2, c->world), "MPI_Send (samples)");
        if (c->rank == 0 && r0 != 0)
            drv_mpi(d, MPI_Recv(x, (int)c->repeat, MPI_DOUBLE, r0, 2, c->world, MPI_STATUS_IGNORE),
                    "MPI_Recv (samples)");
        if ((rc = drv_sync(d)) == 0 && c->rank == 0)
            *s = stats_of(x, (size_t)c->repeat);
    }
    if (x != t)
        drv_free(x);
    drv_free(t);
    return rc;
}

/* All-to-alls are short and, on a shared machine, the noisiest numbers:
 * three times the repetitions of the kernels. */
#define A2A_REPS(c) (3 * (c)->repeat)

/* MPI_Alltoall of `per` bytes per pair on comm; the slowest rank's time per
 * repetition, reduced over repetitions on comm's rank 0 (world rank 0 is
 * rank 0 of its node and of world). */
static int alltoall_time(cal *c, MPI_Comm comm, size_t per, char *sb, char *rb, stats *s)
{
    drv *d = c->d;
    stats z = {0, 0, 0};
    *s = z;
    const int64_t reps = A2A_REPS(c);
    double *t = drv_alloc_n(d, (size_t)reps, sizeof *t, "the all-to-all samples");
    int cr = -1;
    drv_mpi(d, MPI_Comm_rank(comm, &cr), "MPI_Comm_rank");
    int rc = drv_sync(d);
    for (int64_t it = -1; it < reps && !rc; it++) {
        barrier(c);
        double t0 = MPI_Wtime();
        drv_mpi(d, MPI_Alltoall(sb, (int)per, MPI_BYTE, rb, (int)per, MPI_BYTE, comm), "MPI_Alltoall");
        double loc = MPI_Wtime() - t0, mx = 0;
        drv_mpi(d, MPI_Allreduce(&loc, &mx, 1, MPI_DOUBLE, MPI_MAX, comm), "MPI_Allreduce (times)");
        if (it >= 0)
            t[it] = mx;
        rc = drv_sync(d);
    }
    if (!rc && cr == 0)
        *s = stats_of(t, (size_t)reps);
    drv_free(t);
    return rc;
}

/* The all-to-all of `ulysses attn` itself, with its strided head blocks, on
 * the P ranks of comm (each node's ranks, or all ranks across the nodes):
 * H = 2P heads of d = 64 fp32, n_r = per / (2 x 64 x 4) tokens per rank, so
 * that every pair moves `per` bytes.  Both directions, as a layer runs four
 * of each: Q (sequence -> heads) and O (heads -> sequence), whose costs
 * differ by mode, either way (2 ranks: datatype O 1.3x Q, pipeline Q 2.8x
 * O; doc/validation.md), each timed after a barrier.  Each time is that of
 * the rank that arrives last, the shortest over ranks, as `ulysses attn`
 * reports an all-to-all's critical path: a time over all ranks would add the
 * barrier's exit skew, which on a loaded machine was 10x the transfer (one
 * rank descheduled).  Per repetition, the mean of the two, returned on
 * comm's rank 0.  A context that cannot be made (e.g. --a2a shm without
 * room for its window in /dev/shm) is the agreed failure "the Ulysses
 * all-to-all: why".
 *
 * As the job sees it: the library's default mode (ULY_A2A_AUTO) after its
 * measuring calls (untimed here, as in a job that has run a few steps), and
 * buffers that are not in this core's caches: in the job the attention runs
 * between two all-to-alls and the input was written long before, while a
 * loop over the same buffers finds them in L2 (measured: 1.3-1.5x faster at
 * 128 KiB-1 MiB per pair, doc/validation.md).  Each repetition therefore
 * uses the next of several buffer sets, A2A_COLD_BYTES per rank in all. */
#define A2A_COLD_BYTES ((size_t)32 << 20)
#define A2A_MAX_SETS 16
static int ulysses_a2a_time(cal *c, MPI_Comm comm, size_t per, stats *s)
{
    drv *d = c->d;
    stats z = {0, 0, 0};
    *s = z;
    int P = 1, cr = -1;
    drv_mpi(d, MPI_Comm_size(comm, &P), "MPI_Comm_size");
    drv_mpi(d, MPI_Comm_rank(comm, &cr), "MPI_Comm_rank");
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    int64_t nr = (int64_t)(per / (2 * 64 * 4));
    if (nr < 1)
        nr = 1;
    a.batch = 1; a.seq = nr * P; a.heads = 2 * P; a.kv_heads = a.heads; a.head_dim = 64; a.dtype = ULY_F32;
    const size_t n = (size_t)(nr * a.heads * 64);
    size_t sets = A2A_COLD_BYTES / (2 * n * 4);
    sets = sets < 2 ? 2 : sets > A2A_MAX_SETS ? A2A_MAX_SETS : sets;
    float *in[A2A_MAX_SETS] = {NULL}, *out[A2A_MAX_SETS] = {NULL};
    /* auto's measuring calls are left out of the timed repetitions */
    const int64_t reps = A2A_REPS(c), settle = c->a2a == ULY_A2A_AUTO ? (ULY_A2A_MODES - 1) * ULY_A2A_AUTO_SAMPLES : 0;
    double *t = drv_alloc_n(d, (size_t)reps, sizeof *t, "the all-to-all samples");
    uly_dist_opts o;
    memset(&o, 0, sizeof o);
    o.a2a_mode = c->a2a;
    uly_dist *D = NULL;
    for (size_t k = 0; k < sets; k++) {
        in[k] = drv_alloc_n(d, n, 4, "the all-to-all buffers");
        out[k] = drv_alloc_n(d, n, 4, "the all-to-all buffers");
    }
    int rc = drv_sync(d);
    if (!rc) {
        drv_lib(d, uly_dist_create(comm, &a, &o, &D), DRV_RUNTIME, "the Ulysses all-to-all");
        rc = drv_sync(d);
        if (!rc && !c->a2a_fell_back && uly_dist_a2a_note(D)) { /* a mode the system does not allow: never silent */
            drv_say(d, "note: %s", uly_dist_a2a_note(D));
            c->a2a_fell_back = 1;
        }
    }
    if (!rc) {
        for (size_t k = 0; k < sets; k++)
            for (size_t i = 0; i < n; i++) {
                in[k][i] = (float)(i & 255);
                out[k][i] = 0.0f;
            }
        for (int64_t it = -settle - 1; it < reps && !rc; it++) {
            const size_t k = (size_t)(it + settle + 1) % sets;
            double loc[2], crit[2] = {0, 0};
            for (int w = 0; w < 2; w++) {   /* Q: sequence -> heads; O: heads -> sequence */
                barrier(c);
                double t0 = MPI_Wtime();
                int st = uly_dist_a2a(D, w ? ULY_A2A_O : ULY_A2A_Q, in[k], out[k]);
                loc[w] = MPI_Wtime() - t0;
                drv_lib(d, st, DRV_RUNTIME, "the Ulysses all-to-all");
            }
            drv_mpi(d, MPI_Allreduce(loc, crit, 2, MPI_DOUBLE, MPI_MIN, comm), "MPI_Allreduce (times)");
            rc = drv_sync(d);
            if (it >= 0)
                t[it] = 0.5 * (crit[0] + crit[1]);
        }
        if (!rc && cr == 0)
            *s = stats_of(t, (size_t)reps);
    }
    uly_dist_free(D);
    for (size_t k = 0; k < sets; k++) {
        drv_free(in[k]);
        drv_free(out[k]);
    }
    drv_free(t);
    return rc;
}

/* Rank i of node 2k exchanges `bytes` with rank i of node 2k+1, both
 * directions at once (MPI_Sendrecv); per-direction bytes per second of one
 * node's link, on rank 0.  A note only: over Open MPI's TCP transport it
 * reaches about half the rate the all-to-all gets on the same link
 * (doc/validation.md). */
static int node_exchange(cal *c, size_t bytes, char *sb, char *rb, stats *s)
{
    drv *d = c->d;
    stats z = {0, 0, 0};
    *s = z;
    double *bw = drv_alloc_n(d, (size_t)c->repeat, sizeof *bw, "the exchange samples");
    int pair_node = c->node_id ^ 1, active = pair_node < c->nodes;
    int peer = pair_node * c->g + c->node_rank;
    int rc = drv_sync(d);
    for (int64_t it = -1; it < c->repeat && !rc; it++) {
        barrier(c);
        double t0 = MPI_Wtime();
        if (active)
            drv_mpi(d, MPI_Sendrecv(sb, (int)bytes, MPI_BYTE, peer, 3, rb, (int)bytes, MPI_BYTE, peer, 3, c->world,
                                    MPI_STATUS_IGNORE), "MPI_Sendrecv (node exchange)");
        double loc = MPI_Wtime() - t0, mx = 0;
        drv_mpi(d, MPI_Allreduce(&loc, &mx, 1, MPI_DOUBLE, MPI_MAX, c->world), "MPI_Allreduce (times)");
        if (it >= 0)
            bw[it] = (double)c->g * (double)bytes / mx;
        rc = drv_sync(d);
    }
    if (!rc && c->rank == 0)
        *s = stats_of(bw, (size_t)c->repeat);
    drv_free(bw);
    return rc;
}

/* ---------------------------------------------------------------- output */

static void load_avg(double l[3])
{
    l[0] = l[1] = l[2] = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf %lf %lf", &l[0], &l[1], &l[2]) != 3)
            l[0] = l[1] = l[2] = -1;
        fclose(f);
    }
}

static void cpu_model(char *out, size_t len)
{
    snprintf(out, len, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *p = strchr(line, ':');
            if (p) {
                p++;
                while (*p == ' ')
                    p++;
                size_t l = strcspn(p, "\n");
                size_t k = 0;
                for (size_t i = 0; i < l && k + 1 < len; i++)
                    if (p[i] != '"' && p[i] != '\\' && (unsigned char)p[i] >= 32)
                        out[k++] = p[i];
                out[k] = '\0';
            }
            break;
        }
    }
    fclose(f);
}

static double mem_total_gib(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (double)pages * (double)psz / 1073741824.0 : 1.0;
}

/* One measured value of the platform, appended to array a: key, value,
 * unit, how, spread (null without samples), samples; 0 or -1. */
static int js_meas(json_t *a, const char *key, double value, const char *unit, const char *method, stats s,
                   double scale, int runs)
{
    json_t *x = uly_json_append_object(a);
    if (!x)
        return -1;
    int bad = uly_json_set_str(x, "key", key) | uly_json_set_real(x, "value", value) | uly_json_set_str(x, "unit", unit) |
              uly_json_set_str(x, "method", method);
    bad |= runs > 0 ? js_stats(x, "spread", s, scale) : json_object_set_new(x, "spread", json_null());
    return bad | uly_json_set_int(x, "samples", runs);
}

/* Bandwidth of the link that bounds an all-to-all: least-squares slope of
 * the median time against the bytes that link carries, t = a + m b / bw for
 * b bytes per pair (m = g - 1 for a rank's own link inside a node of g
 * ranks; m = g x g x (nodes - 1) for a node's NIC when every rank of every
 * node takes part), over every measured size (falls back to the largest
 * size alone when noise makes the slope non-positive). */
static double a2a_fit(double m, const size_t *sizes, const stats *t, int n)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < n; i++) {
        double x = m * (double)sizes[i], y = t[i].median;
        sx += x; sy += y; sxx += x * x; sxy += x * y;
    }
    double den = n * sxx - sx * sx, slope = den > 0 ? (n * sxy - sx * sy) / den : 0;
    if (slope > 0)
        return 1.0 / slope;
    return m * (double)sizes[n - 1] / t[n - 1].median;
}

static int write_platform(cal *c, drv_out *o, const char *out, const char *name,
                          const gemm_res *gr, int ng, const attn_res *ar, int na, stats mem,
                          const stats *pp_lat, const stats *pp_bw, const size_t *sizes,
                          const stats *a2a_node, const size_t *usizes, const stats *uly_node,
                          const stats *a2a_world, const stats *uly_world, int nsz, stats xch, size_t xbytes,
                          size_t mem_bytes, const double *load0, const double *load1, double secs)
{
    /* peak: the best median of sgemm and of the attention kernels (efficiencies <= 1) */
    double peak = 0;
    stats peak_s = {0, 0, 0};
    char peak_what[128] = "";
    for (int i = 0; i < ng; i++)
        if (gr[i].gflops.median > peak) {
            peak = gr[i].gflops.median;
            peak_s = gr[i].gflops;
            snprintf(peak_what, sizeof peak_what, "sgemm %lld^3", (long long)gr[i].n);
        }
    double best_gemm = peak;
    for (int i = 0; i < na; i++)
        for (int b = 0; b < 2; b++) {
            stats x = b ? ar[i].bwd : ar[i].fwd;
            if (x.median > peak) {
                peak = x.median;
                peak_s = x;
                snprintf(peak_what, sizeof peak_what, "attention %s N=%lld d=%lld%s", b ? "backward" : "forward",
                         (long long)ar[i].seq, (long long)ar[i].d, ar[i].causal ? " causal" : "");
            }
        }
    const double attn_f = ar[0].fwd.median / peak, attn_b = ar[0].bwd.median / peak;
    /* intra-node: all-to-all on the node's ranks, t(b) = t(8 B) + (g-1) b / bw */
    double intra_bw = 0, intra_lat = 0, inter_bw = 0, inter_lat = 0, intra_call = 0, inter_call = 0;
    const int big = nsz - 1;
    if (c->g > 1) {
        intra_bw = a2a_fit(c->g - 1, usizes, uly_node, nsz);
        intra_lat = pp_lat[0].median;
        /* the call cost: the smallest all-to-all (512 B per pair) less what
         * the simulator already charges for it, one latency and its bytes.
         * Not the fit's intercept: on a loaded machine the slowest sizes'
         * outliers move the intercept by milliseconds (measured). */
        intra_call = fmax(0.0, uly_node[0].median - intra_lat - (double)(c->g - 1) * (double)usizes[0] / intra_bw);
    } else {
        intra_bw = mem.median * 1e9 / 3.0;   /* one rank per node: a copy at triad speed (unused) */
        intra_lat = 1e-6;
    }
    /* inter-node: the same all-to-all on all ranks; a node's NIC carries
     * g x g x (nodes - 1) blocks each way at once, which is what the
     * simulator's nic_bw_Gbps (per direction, full duplex) carries */
    const double xm = (double)c->g * c->g * (c->nodes - 1);
    if (c->nodes > 1) {
        inter_bw = a2a_fit(xm, usizes, uly_world, nsz);
        inter_lat = pp_lat[1].median;
        /* the smallest one's time beyond one latency and its bytes is the
         * cost of a call across nodes */
        inter_call = fmax(0.0, uly_world[0].median - inter_lat - xm * (double)usizes[0] / inter_bw);
    } else {
        inter_bw = intra_bw;
        inter_lat = intra_lat;
        inter_call = intra_call;
    }
    char host[256] = "localhost", cpu[256], nm[320];
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    cpu_model(cpu, sizeof cpu);
    snprintf(nm, sizeof nm, "%s", name ? name : "");
    if (!name)
        snprintf(nm, sizeof nm, "calibrated-%s", host);
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));

    /* the file through jansson (src/base/base_json.h): keys in this order, a
     * number that is not finite as null plus "<key>_nonfinite" */
    int bad = 0;
    char buf[512];
    json_t *root = json_object(), *x, *a;
    bad |= !root;
    bad |= uly_json_set_str(root, "name", nm);
    snprintf(buf, sizeof buf, "Measured by ulysses calibrate on %s: %d MPI rank(s) per node as GPUs, %d node(s), "
             "%lld thread(s) per rank", host, c->g, c->nodes, (long long)c->threads);
    bad |= uly_json_set_str(root, "description", buf);
    bad |= uly_json_set_int(root, "gpus_per_node", c->g) | uly_json_set_int(root, "max_nodes", c->nodes);
    bad |= !(x = uly_json_add_object(root, "gpu"));
    snprintf(buf, sizeof buf, "one MPI rank (%lld thread) of %s", (long long)c->threads, cpu);
    bad |= uly_json_set_str(x, "model", buf);
    bad |= uly_json_set_real(x, "peak_tflops_bf16", peak * 1e-3) | uly_json_set_real(x, "peak_tflops_fp16", peak * 1e-3) |
           uly_json_set_real(x, "peak_tflops_fp32", peak * 1e-3);
    bad |= uly_json_set_fixed(x, "gemm_efficiency", best_gemm / peak, 4) |
           uly_json_set_fixed(x, "attention_efficiency", attn_f, 4) |
           uly_json_set_fixed(x, "attention_bwd_efficiency", attn_b, 4);
    bad |= uly_json_set_bool(x, "attention_skips_masked_blocks", 1);
    bad |= uly_json_set_fixed(x, "hbm_GiB", mem_total_gib() / c->g, 3) | uly_json_set_real(x, "hbm_bw_GBps", mem.median) |
           uly_json_set_int(x, "reserved_GiB", 0);
    bad |= !(x = uly_json_add_object(root, "intra_node"));
    bad |= uly_json_set_str(x, "fabric", c->g > 1 ? "MPI shared memory between the node's ranks"
                                                   : "none (one rank per node): unused");
    bad |= uly_json_set_real(x, "bw_GBps_per_dir", intra_bw * 1e-9) | uly_json_set_int(x, "efficiency", 1) |
           uly_json_set_real(x, "latency_us", intra_lat * 1e6) | uly_json_set_real(x, "a2a_call_us", intra_call * 1e6);
    bad |= !(x = uly_json_add_object(root, "inter_node"));
    bad |= uly_json_set_str(x, "fabric", c->nodes > 1
                                             ? "MPI over TCP, one link per node shared by its ranks (one NIC per node)"
                                             : "not measured (one node): copies of the intra-node values");
    bad |= uly_json_set_real(x, "nic_bw_Gbps", inter_bw * 8e-9) | uly_json_set_int(x, "nics_per_node", 1) |
           uly_json_set_int(x, "efficiency", 1) | uly_json_set_real(x, "latency_us", inter_lat * 1e6) |
           uly_json_set_real(x, "a2a_call_us", inter_call * 1e6) | uly_json_set_int(x, "spine_oversubscription", 1);
    /* how each number was obtained */
    json_t *notes = uly_json_add_object(root, "calibration");
    bad |= !notes;
    bad |= uly_json_set_str(notes, "tool", "ulysses calibrate " ULY_VERSION_STRING) | uly_json_set_str(notes, "date", date);
    bad |= uly_json_set_fixed(notes, "seconds", secs, 1) | uly_json_set_bool(notes, "quick", c->quick);
    bad |= uly_json_set_int(notes, "ranks", c->size) | uly_json_set_int(notes, "nodes", c->nodes) |
           uly_json_set_int(notes, "ranks_per_node", c->g) | uly_json_set_int(notes, "threads_per_rank", c->threads) |
           uly_json_set_int(notes, "repetitions", c->repeat);
    for (int l = 0; l < 2; l++) {
        const double *ld = l ? load1 : load0;
        bad |= !(a = uly_json_add_array(notes, l ? "loadavg_after" : "loadavg_before"));
        for (int i = 0; i < 3; i++)
            bad |= json_array_append_new(a, isfinite(ld[i]) ? json_real(round(ld[i] * 100.0) / 100.0) : json_null());
    }
    bad |= uly_json_set_int(notes, "online_cpus", sysconf(_SC_NPROCESSORS_ONLN));
    bad |= !(a = uly_json_add_array(notes, "platform"));
    char how[1024];
    snprintf(how, sizeof how, "largest median GFLOP/s of sgemm (%d square shapes) and attention (below), "
             "all %d ranks at once: %s; the same value for bf16 and fp16 (the CPU kernels run fp32)", ng, c->size,
             peak_what);
    stats none = {0, 0, 0};
    js_meas(a, "gpu.peak_tflops_fp32", peak * 1e-3, "TFLOP/s", how, peak_s, 1e-3, (int)(c->repeat * c->size));
    snprintf(how, sizeof how, "best median sgemm GFLOP/s / peak");
    js_meas(a, "gpu.gemm_efficiency", best_gemm / peak, "1", how, none, 0, 0);
    snprintf(how, sizeof how, "blocked attention forward, B=1 H=1 N=%lld d=%lld no mask, 4*N^2*d FLOP, GFLOP/s / peak",
             (long long)ar[0].seq, (long long)ar[0].d);
    js_meas(a, "gpu.attention_efficiency", attn_f, "1", how, ar[0].fwd, 1.0 / peak, (int)(c->repeat * c->size));
    snprintf(how, sizeof how, "blocked attention backward, same shape, 2.5 x forward FLOP, GFLOP/s / peak");
    js_meas(a, "gpu.attention_bwd_efficiency", attn_b, "1", how, ar[0].bwd, 1.0 / peak,
            (int)(c->repeat * c->size));
    snprintf(how, sizeof how, "triad a = b + s*c over 3 x %zu MiB fp32 per rank, all ranks at once, 3 x bytes / time",
             mem_bytes >> 20);
    js_meas(a, "gpu.hbm_bw_GBps", mem.median, "GB/s", how, mem, 1, (int)(c->repeat * c->size));
    if (c->g > 1) {
        stats s = {intra_bw * 1e-9, intra_bw * 1e-9, intra_bw * 1e-9};
        stats lo[6], hi[6];
        for (int i = 0; i < nsz; i++) {
            lo[i].median = uly_node[i].max;   /* slowest repetitions: lowest bandwidth */
            hi[i].median = uly_node[i].min;
        }
        s.min = a2a_fit(c->g - 1, usizes, lo, nsz) * 1e-9;
        s.max = a2a_fit(c->g - 1, usizes, hi, nsz) * 1e-9;
        snprintf(how, sizeof how, "the all-to-all of ulysses attn (uly_dist_a2a, mode %s%s, strided head blocks; per "
                 "repetition the mean of Q, sequence -> heads, and O, heads -> sequence, each the time of the "
                 "rank that arrives last, as ulysses attn's critical path) on each node's %d ranks (all nodes at once), %d sizes %zu B..%zu B per pair: "
                 "1 / least-squares slope of the median time against (g-1) x bytes per pair "
                 "(spread: the same fit to the max and min times); a raw contiguous MPI_Alltoall gives %.4g GB/s "
                 "(alltoall_node below)", a2a_mode_names[c->a2a],
                 c->a2a_fell_back && c->a2a == ULY_A2A_CMA ? " run as shm: not allowed on this system" : "", c->g, nsz, usizes[0], usizes[big], a2a_fit(c->g - 1, sizes, a2a_node, nsz) * 1e-9);
        js_meas(a, "intra_node.bw_GBps_per_dir", intra_bw * 1e-9, "GB/s", how, s, 1, (int)A2A_REPS(c));
        snprintf(how, sizeof how, "MPI ping-pong of 8 B between ranks 0 and 1, half the round trip");
        js_meas(a, "intra_node.latency_us", intra_lat * 1e6, "us", how, pp_lat[0], 1e6, (int)c->repeat);
        snprintf(how, sizeof how, "median time of the same all-to-all at %zu B per pair minus what the simulator "
                 "charges for it (intra_node.latency_us and its bytes at bw_GBps_per_dir); clipped at 0", usizes[0]);
        js_meas(a, "intra_node.a2a_call_us", intra_call * 1e6, "us", how, uly_node[0], 1e6,
                (int)A2A_REPS(c));
    }
    if (c->nodes > 1) {
        stats s = {inter_bw * 8e-9, inter_bw * 8e-9, inter_bw * 8e-9};
        stats lo[6], hi[6];
        for (int i = 0; i < nsz; i++) {
            lo[i].median = uly_world[i].max;
            hi[i].median = uly_world[i].min;
        }
        s.min = a2a_fit(xm, usizes, lo, nsz) * 8e-9;
        s.max = a2a_fit(xm, usizes, hi, nsz) * 8e-9;
        snprintf(how, sizeof how, "the same all-to-all (mean of Q and O) on all %d ranks of the %d nodes, %d "
                 "sizes %zu B..%zu B per pair: 1 / least-squares slope of the median time against "
                 "the bytes a node's link carries each way at once, g x g x (nodes-1) x bytes per pair (spread: the "
                 "same fit to the max and min times); per direction with both directions loaded, as the "
                 "simulator's NIC; a node-pair MPI_Sendrecv exchange of %zu MiB gives %.4g Gbit/s "
                 "(node_exchange below)", c->size, c->nodes, nsz, usizes[0], usizes[big], xbytes >> 20,
                 xch.median * 8e-9);
        js_meas(a, "inter_node.nic_bw_Gbps", inter_bw * 8e-9, "Gbit/s", how, s, 1, (int)A2A_REPS(c));
        snprintf(how, sizeof how, "MPI ping-pong of 8 B between rank 0 and rank %d (node 1), half the round trip", c->g);
        js_meas(a, "inter_node.latency_us", inter_lat * 1e6, "us", how, pp_lat[1], 1e6, (int)c->repeat);
        snprintf(how, sizeof how, "median time of the same all-to-all at %zu B per pair minus what the simulator "
                 "charges for it (inter_node.latency_us and its bytes at nic_bw_Gbps); clipped at 0", usizes[0]);
        js_meas(a, "inter_node.a2a_call_us", inter_call * 1e6, "us", how, uly_world[0], 1e6,
                (int)A2A_REPS(c));
    }
    bad |= !(a = uly_json_add_array(notes, "gemm"));
    for (int i = 0; i < ng; i++) {
        bad |= !(x = uly_json_append_object(a));
        bad |= uly_json_set_int(x, "m", gr[i].n) | uly_json_set_int(x, "n", gr[i].n) | uly_json_set_int(x, "k", gr[i].n);
        bad |= js_stats(x, "gflops", gr[i].gflops, 1);
    }
    bad |= !(a = uly_json_add_array(notes, "attention"));
    for (int i = 0; i < na; i++) {
        bad |= !(x = uly_json_append_object(a));
        bad |= uly_json_set_int(x, "seq", ar[i].seq) | uly_json_set_int(x, "head_dim", ar[i].d) |
               uly_json_set_bool(x, "causal", ar[i].causal);
        bad |= js_stats(x, "fwd_gflops", ar[i].fwd, 1) | js_stats(x, "bwd_gflops", ar[i].bwd, 1);
    }
    /* the node's all-to-alls (g > 1) and the ones across nodes (nodes > 1) */
    for (int l = 0; l < 2; l++) {
        if (l ? c->nodes <= 1 : c->g <= 1)
            continue;
        bad |= !(x = uly_json_add_object(notes, l ? "ping_pong_inter_node" : "ping_pong_intra_node"));
        bad |= js_stats(x, "latency_us", pp_lat[l], 1e6);
        bad |= uly_json_set_real(x, "bw_GBps_4MiB", (double)(4 << 20) / pp_bw[l].median * 1e-9);
        if (l) {
            bad |= !(x = uly_json_add_object(notes, "node_exchange"));
            bad |= uly_json_set_int(x, "bytes_each_way", (int64_t)xbytes) | js_stats(x, "Gbps_per_dir", xch, 8e-9);
        }
        for (int u = 0; u < 2; u++) {
            const char *key = l ? u ? "ulysses_alltoall_all" : "alltoall_all"
                                : u ? "ulysses_alltoall_node" : "alltoall_node";
            const size_t *sz = u ? usizes : sizes;
            const stats *t = l ? u ? uly_world : a2a_world : u ? uly_node : a2a_node;
            bad |= !(a = uly_json_add_array(notes, key));
            for (int i = 0; i < nsz; i++) {
                bad |= !(x = uly_json_append_object(a));
                bad |= uly_json_set_int(x, "ranks", l ? c->size : c->g) | uly_json_set_int(x, "bytes_per_pair", (int64_t)sz[i]);
                bad |= js_stats(x, "ms", t[i], 1e3);
            }
        }
    }
    int fd = dup(o->fd);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        json_decref(root);
        return drv_fail(c->d, DRV_RUNTIME, "--out %s: cannot write: %s", out, strerror(errno));
    }
    if (uly_json_emit(f, root, bad, JSON_PRESERVE_ORDER | JSON_INDENT(2) | JSON_REAL_PRECISION(15))) {
        fclose(f);
        return drv_fail(c->d, DRV_RUNTIME, "--out %s: cannot write the platform file (out of memory or a write "
                        "error)", out);
    }
    int werr = ferror(f);
    if (fclose(f) != 0 || werr)
        return drv_fail(c->d, DRV_RUNTIME, "--out %s: cannot write: %s", out, strerror(errno));
    int rc = drv_out_ready(c->d, o) || drv_out_commit(c->d, o, 1) ? c->d->code : 0;
    if (rc)
        return rc;
    printf("calibrated %d rank(s) on %d node(s) in %.1f s (load average %.2f before, %.2f after; %ld CPUs)\n",
           c->size, c->nodes, secs, load0[0], load1[0], sysconf(_SC_NPROCESSORS_ONLN));
    printf("  peak (per rank)        %10.2f GFLOP/s   (sgemm best %.2f)\n", peak, best_gemm);
    printf("  attention N=%lld d=%lld  fwd %.2f GFLOP/s (eff %.3f), bwd %.2f GFLOP/s (eff %.3f)\n",
           (long long)ar[0].seq, (long long)ar[0].d, ar[0].fwd.median, attn_f, ar[0].bwd.median, attn_b);
    printf("  memory triad           %10.2f GB/s\n", mem.median);
    if (c->g > 1)
        printf("  intra-node             %10.3f GB/s per rank per direction, latency %.2f us, all-to-all call %.1f us\n",
               intra_bw * 1e-9, intra_lat * 1e6, intra_call * 1e6);
    if (c->nodes > 1)
        printf("  inter-node link        %10.3f Gbit/s per node per direction, latency %.2f us, all-to-all call %.1f us\n",
               inter_bw * 8e-9, inter_lat * 1e6, inter_call * 1e6);
    printf("wrote %s\n", out);
    return 0;
}

/* ---------------------------------------------------------------- main */

static const char synopsis[] =
    "calibrate --out FILE.json [--quick] [--name NAME] [--repeat R] [--seq N] [--head-dim d] [--threads T]\n"
    "          [--a2a MODE]\n"
    "Run under mpirun with the ranks per node (and nodes) of the jobs to predict; see doc/validation.md.";

/* Whether s is valid UTF-8, by jansson's own check (json_string refuses
 * anything else), so that what passes here is what the file can hold. */
static int name_is_utf8(const char *s)
{
    json_t *t = json_string(s);
    json_decref(t);
    return t != NULL;
}

static int cal_main(cal *c, int argc, char **argv)
{
    const char *out = NULL, *name = NULL;
    int64_t repeat = 0;
    c->seq = 4096;
    c->head_dim = 64;
    c->threads = 1;
    const arg_opt opts[] = {
        {"out", ARG_STR, &out, 0, 0, "FILE", "platform file to write (required)", NULL, NULL},
        {"quick", ARG_FLAG, &c->quick, 0, 0, NULL, "fewer shapes, sizes and repetitions (seconds, for tests)", NULL, NULL},
        {"quiet", ARG_FLAG, &c->quiet, 0, 0, NULL, "no progress lines on stderr (one per step, rewritten in place when stderr is a terminal)", NULL, NULL},
        {"name", ARG_STR, &name, 0, 0, "NAME", "platform name, UTF-8 (default calibrated-<hostname>)", NULL, NULL},
        {"repeat", ARG_INT, &repeat, 1, 1000, "R", "timed repetitions per measurement (default 5, --quick 3)", NULL, NULL},
        {"seq", ARG_INT, &c->seq, 64, 1 << 15, "N", "reference attention sequence length (default 4096)", NULL, NULL},
        {"head-dim", ARG_INT, &c->head_dim, 1, 4096, "d", "reference attention head dimension (default 64)", NULL, NULL},
        {"threads", ARG_INT, &c->threads, 1, 1024, "T", "OpenMP/BLAS threads per rank (default 1)", NULL, NULL},
        {"a2a", ARG_CHOICE, &c->a2a, 0, 0, "MODE", "the all-to-all mode to measure, as ulysses attn --a2a: auto (default), pack, datatype, pipeline, shm, cma (shm and cma: every rank on one node); calibrate with the mode the jobs to predict use", a2a_mode_names, NULL},
        {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    drv *d = c->d;
    int ps = drv_parse(d, argc, argv, opts);
    if (ps != DRV_PARSE_OK) {
        /* help or a parse error: recorded by drv_parse */
    } else if (!out) {
        drv_fail(d, DRV_BADINPUT, "--out FILE is required");
        ps = DRV_PARSE_ERROR;
    } else if (name && !name_is_utf8(name)) {
        /* the name goes into a JSON string: refuse it before measuring */
        drv_fail(d, DRV_BADINPUT, "--name: not valid UTF-8 (the platform name is a JSON string)");
        ps = DRV_PARSE_ERROR;
    }
    /* one agreement on every option before any other collective */
    const drv_field f[] = {
        {"--out", DRV_F_STR, 0, out, 0, NULL},          {"--quick", DRV_F_FLAG, c->quick, NULL, 0, NULL},
        {"--name", DRV_F_STR, 0, name, 0, NULL},        {"--repeat", DRV_F_INT, repeat, NULL, 0, NULL},
        {"--seq", DRV_F_INT, c->seq, NULL, 0, NULL},    {"--head-dim", DRV_F_INT, c->head_dim, NULL, 0, NULL},
        {"--threads", DRV_F_INT, c->threads, NULL, 0, NULL}, {"--a2a", DRV_F_CHOICE, c->a2a, NULL, 0, a2a_mode_names},
    };
    int rc = drv_agree(d, ps, f, ps == DRV_PARSE_OK ? (int)(sizeof f / sizeof f[0]) : 0);
    if (rc == DRV_AGREE_HELP) {
        if (c->rank == 0)
            args_usage(stdout, "ulysses", synopsis, opts);
        return 0;
    }
    if (rc)
        return rc;
    c->repeat = repeat ? repeat : c->quick ? 3 : 5;

    /* nodes: ranks sharing memory (the driver's node communicator, ranks
     * in world order); equal sizes, node-major numbering */
    c->g = 1;
    drv_mpi(d, MPI_Comm_rank(c->node, &c->node_rank), "MPI_Comm_rank (node)");
    drv_mpi(d, MPI_Comm_size(c->node, &c->g), "MPI_Comm_size (node)");
    int lead = c->node_rank == 0, gmin = 0, gmax = 0;
    drv_mpi(d, MPI_Allreduce(&lead, &c->nodes, 1, MPI_INT, MPI_SUM, c->world), "MPI_Allreduce (nodes)");
    drv_mpi(d, MPI_Allreduce(&c->g, &gmin, 1, MPI_INT, MPI_MIN, c->world), "MPI_Allreduce (ranks per node)");
    drv_mpi(d, MPI_Allreduce(&c->g, &gmax, 1, MPI_INT, MPI_MAX, c->world), "MPI_Allreduce (ranks per node)");
    int first = c->rank;
    drv_mpi(d, MPI_Bcast(&first, 1, MPI_INT, 0, c->node), "MPI_Bcast (node)"); /* lowest world rank of my node if node-major */
    int order_ok = c->g > 0 && first == c->rank - c->node_rank && first % c->g == 0, all_ok = 0;
    drv_mpi(d, MPI_Allreduce(&order_ok, &all_ok, 1, MPI_INT, MPI_MIN, c->world), "MPI_Allreduce (rank order)");
    if ((rc = drv_sync(d)))
        return rc;
    if (gmin != gmax || !all_ok)
        drv_fail(d, DRV_BADINPUT, "%s (a platform has equal nodes numbered node-major: use a hostfile with equal "
                 "slots and --map-by slot)",
                 gmin != gmax ? "nodes hold different numbers of ranks" : "ranks are not numbered node by node");
    else if ((c->a2a == ULY_A2A_SHM || c->a2a == ULY_A2A_CMA) && c->nodes > 1)
        drv_fail(d, DRV_BADINPUT, "--a2a %s needs every rank on one node, and these ranks are on %d nodes "
                 "(calibrate measures the all-to-all across the nodes too): use auto, pack, datatype or pipeline",
                 a2a_mode_names[c->a2a], c->nodes);
    if ((rc = drv_sync(d)))
        return rc;
    c->node_id = c->rank / c->g;

    /* rank 0 writes a temporary file next to the destination, renamed at the
     * end (drv.h): a bad path is reported before measuring, and an
     * interrupted run leaves the previous file intact */
    drv_out *o = c->out;
    o->path = out;
    o->what = "--out";
    o->fd = -1;
    if (c->rank == 0)
        drv_out_prepare(d, o, 1, NULL, 0);
    if ((rc = drv_sync(d)))
        return rc;
    c->t_start = now_seconds();
    double load0[3], load1[3];
    load_avg(load0);
    const int64_t N = c->seq, hd = c->head_dim;
    int64_t gemm_n[4], ng = 0;
    if (c->quick) {
        gemm_n[ng++] = 512; gemm_n[ng++] = 1024;
    } else {
        gemm_n[ng++] = 256; gemm_n[ng++] = 512; gemm_n[ng++] = 1024; gemm_n[ng++] = 2048;
    }
    /* attention shapes: the reference (N, d) first */
    int64_t as[5][3] = {{N, hd, 0}, {N, hd, 1}, {N / 4 >= 64 ? N / 4 : 64, hd, 0}, {N / 4 >= 64 ? N / 4 : 64, hd, 1},
                        {N, 2 * hd, 0}};
    const int na = c->quick ? 2 : 5;
    size_t a2a_sizes[6];
    int nsz = 0;
    a2a_sizes[nsz++] = 8;
    a2a_sizes[nsz++] = 64 << 10;
    if (!c->quick)
        a2a_sizes[nsz++] = 256 << 10;
    a2a_sizes[nsz++] = 1 << 20;
    if (!c->quick)
        a2a_sizes[nsz++] = 4 << 20;
    const size_t big = a2a_sizes[nsz - 1], xbytes = c->quick ? (size_t)1 << 20 : (size_t)4 << 20;
    const size_t mem_bytes = c->quick ? (size_t)32 << 20 : (size_t)64 << 20;
    c->steps = (int)ng + na + 1 + (c->g > 1 ? 1 + 2 * nsz : 0) + (c->nodes > 1 ? 2 + 2 * nsz : 0);

    gemm_res gr[4];
    attn_res ar[5];
    stats mem, pp_lat[2], pp_bw[2], a2a_node[6], uly_node[6], a2a_world[6], uly_world[6], xch = {0, 0, 0};
    size_t uly_sizes[6];
    for (int i = 0; i < nsz; i++)   /* the Ulysses all-to-all needs a whole token per pair */
        uly_sizes[i] = a2a_sizes[i] < 512 ? 512 : a2a_sizes[i];
    memset(pp_lat, 0, sizeof pp_lat);
    memset(pp_bw, 0, sizeof pp_bw);
    rc = 0;
    for (int i = 0; i < ng && !rc; i++) {
        progress(c, "sgemm %lld^3", (long long)gemm_n[i]);
        rc = measure_gemm(c, gemm_n[i], &gr[i]);
    }
    for (int i = 0; i < na && !rc; i++) {
        progress(c, "attention N=%lld d=%lld %s, forward and backward", (long long)as[i][0], (long long)as[i][1],
                 as[i][2] ? "causal" : "no mask");
        rc = measure_attn(c, as[i][0], as[i][1], (int)as[i][2], &ar[i]);
    }
    if (!rc) {
        progress(c, "memory triad, 3 x %zu MiB per rank", mem_bytes >> 20);
        rc = measure_memory(c, mem_bytes, &mem);
    }
    const size_t pp_big = (size_t)4 << 20;   /* ping-pong bandwidth message */
    size_t nbuf = (size_t)c->size * (big > xbytes ? big : xbytes);
    if (nbuf < pp_big)
        nbuf = pp_big;
    char *sb = NULL, *rb = NULL;
    if (!rc) {
        sb = drv_calloc_n(d, nbuf, 1, "the message buffers");
        rb = drv_calloc_n(d, nbuf, 1, "the message buffers");
        rc = drv_sync(d);
    }
    if (!rc && c->g > 1) {
        progress(c, "ping-pong inside node 0 (ranks 0, 1): 8 B and 4 MiB");
        rc = ping_pong(c, 0, 1, 8, c->quick ? 200 : 1000, sb, &pp_lat[0]);
        if (!rc)
            rc = ping_pong(c, 0, 1, pp_big, 3, sb, &pp_bw[0]);
        for (int i = 0; i < nsz && !rc; i++) {
            progress(c, "MPI_Alltoall on each node's %d ranks, %zu B per pair", c->g, a2a_sizes[i]);
            rc = alltoall_time(c, c->node, a2a_sizes[i], sb, rb, &a2a_node[i]);
        }
        for (int i = 0; i < nsz && !rc; i++) {
            progress(c, "Ulysses all-to-all (q and o) on each node's %d ranks, %zu B per pair", c->g, uly_sizes[i]);
            rc = ulysses_a2a_time(c, c->node, uly_sizes[i], &uly_node[i]);
        }
    }
    if (!rc && c->nodes > 1) {
        progress(c, "ping-pong node 0 - node 1 (ranks 0, %d): 8 B and 4 MiB", c->g);
        rc = ping_pong(c, 0, c->g, 8, c->quick ? 100 : 400, sb, &pp_lat[1]);
        if (!rc)
            rc = ping_pong(c, 0, c->g, pp_big, 2, sb, &pp_bw[1]);
        if (!rc) {
            progress(c, "node-pair exchange, %d ranks x %zu MiB each way", c->g, xbytes >> 20);
            rc = node_exchange(c, xbytes, sb, rb, &xch);
        }
        for (int i = 0; i < nsz && !rc; i++) {
            progress(c, "MPI_Alltoall on all %d ranks, %zu B per pair", c->size, a2a_sizes[i]);
            rc = alltoall_time(c, c->world, a2a_sizes[i], sb, rb, &a2a_world[i]);
        }
        for (int i = 0; i < nsz && !rc; i++) {
            progress(c, "Ulysses all-to-all (q and o) on all %d ranks, %zu B per pair", c->size, uly_sizes[i]);
            rc = ulysses_a2a_time(c, c->world, uly_sizes[i], &uly_world[i]);
        }
    }
    drv_free(sb);
    drv_free(rb);
    if (rc)   /* agreed, and printed by rank 0 (after ending its progress line) */
        return rc;
    load_avg(load1);
    const double secs = now_seconds() - c->t_start;
    if (c->rank == 0) {
        if (c->tty && !c->quiet)
            fputc('\n', stderr);
        d->line_open = 0;
        write_platform(c, o, out, name, gr, (int)ng, ar, na, mem, pp_lat, pp_bw, a2a_sizes, a2a_node,
                          uly_sizes, uly_node, a2a_world, uly_world,
                          nsz, xch, xbytes, mem_bytes, load0, load1, secs);
    }
    return drv_sync(d);   /* rank 0's write: every rank ends with its status */
}

int cmd_calibrate(int argc, char **argv)
{
    drv d;
    if (drv_open(&d, "ulysses calibrate"))
        return 1;
    cal c;
    memset(&c, 0, sizeof c);
    drv_out o;
    memset(&o, 0, sizeof o);
    o.fd = -1;
    c.d = &d;
    c.out = &o;
    c.world = d.comm;
    c.node = d.node;
    c.rank = d.rank;
    c.size = d.size;
    c.tty = uly_progress_terminal_fd(2);   /* under mpirun: mpirun's stderr */
    int rc = cal_main(&c, argc, argv);   /* agreed on every rank (drv_agree / drv_sync) */
    drv_out_discard(&o, 1);
    return drv_close(&d, rc);
}
