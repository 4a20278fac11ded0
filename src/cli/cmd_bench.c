/*
 * cmd_bench.c -- `ulysses bench kernel|memory|a2a`: the performance figures,
 * each as a ratio measured in the same run (medians of repeated runs, with
 * min and max), so that a shared, noisy machine still gives meaningful
 * numbers.  --json prints one JSON object per run.
 *
 *   kernel  blocked attention forward and forward+backward GFLOP/s next to
 *           the sgemm GFLOP/s of the same machine, interleaved repetitions
 *   memory  peak resident size of a `ulysses attn` child next to the bytes
 *           of its tensors plus workspace
 *   a2a     Ulysses all-to-alls (with their packing) next to a raw
 *           MPI_Alltoall of the same byte count, and the ring methods' hop
 *           next to a raw MPI_Sendrecv of the same bytes, back to back (run
 *           under mpirun)
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <mpi.h>

#include "args.h"
#include "cli.h"
#include "config.h"
#include "drv.h"
#include "timing.h"
#include "ulysses_dist.h"

static void set_blas_threads(int t)
{
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
    openblas_set_num_threads(t);
#else
    (void)t;
#endif
}

static int parse_or_help(const char *cmd, const char *syn, int argc, char **argv, const arg_opt *opts)
{
    char msg[512];
    int rc = args_parse(cmd, argc - 1, argv + 1, opts, msg, sizeof msg);
    if (rc == ARGS_HELP) {
        args_usage(stdout, cmd, syn, opts);
        return 0;
    }
    if (rc == ARGS_ERROR) {
        fprintf(stderr, "%s\n", msg);
        return ULY_EXIT_BADINPUT;
    }
    return -1;
}

/* ------------------------------------------------------------------ kernel */

static int bench_kernel(int argc, char **argv)
{
    int64_t seq = 8192, d = 128, heads = 1, batch = 1, threads = 1, repeat = 5, gemm = 2048, bq = 0, bk = 0;
    int64_t threads2 = 0;
    int causal = 0, json = 0, no_bwd = 0;
    const arg_opt opts[] = {
        {"seq", ARG_INT, &seq, 1, 1 << 24, "N", "sequence length (default 8192)", NULL, NULL},
        {"head-dim", ARG_INT, &d, 1, 4096, "d", "head dimension (default 128)", NULL, NULL},
        {"heads", ARG_INT, &heads, 1, 4096, "H", "heads (default 1)", NULL, NULL},
        {"batch", ARG_INT, &batch, 1, 4096, "B", "batch (default 1)", NULL, NULL},
        {"threads", ARG_INT, &threads, 1, 1024, "T", "threads for attention and sgemm (default 1)", NULL, NULL},
        {"repeat", ARG_INT, &repeat, 1, 1000, "R", "repetitions, medians reported (default 5)", NULL, NULL},
        {"scale-threads", ARG_INT, &threads2, 1, 1024, "T2", "also time attention with T2 threads and print the speedup over T", NULL, NULL},
        {"gemm-size", ARG_INT, &gemm, 64, 16384, "n", "sgemm reference size n x n x n (default 2048)", NULL, NULL},
        {"block-q", ARG_INT, &bq, 1, 65536, "n", "query block rows", NULL, NULL},
        {"block-k", ARG_INT, &bk, 1, 65536, "n", "key block rows", NULL, NULL},
        {"causal", ARG_FLAG, &causal, 0, 0, NULL, "causal mask (FLOPs count the visible half)", NULL, NULL},
        {"forward-only", ARG_FLAG, &no_bwd, 0, 0, NULL, "skip forward+backward", NULL, NULL},
        {"json", ARG_FLAG, &json, 0, 0, NULL, "one JSON object per run", NULL, NULL},
        {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    int rc = parse_or_help("ulysses bench kernel", "bench kernel [options]", argc, argv, opts);
    if (rc >= 0)
        return rc;
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = batch; a.seq = seq; a.heads = heads; a.kv_heads = heads; a.head_dim = d; a.causal = causal;
    a.dtype = ULY_F32;
    if ((rc = uly_attn_desc_check(&a))) {
        fprintf(stderr, "ulysses bench kernel: %s\n", uly_last_error());
        return exit_status_of(rc);
    }
    const size_t nq = (size_t)(batch * seq * heads * d), nl = (size_t)(batch * heads * seq);
    const size_t ng = (size_t)(gemm * gemm);
    /* every buffer in one table: allocated through the library's hooks,
     * checked, and freed in one place whatever happens */
    enum { BQ, BK, BV, BO, BL, BDO, BDQ, BDK, BDV, BGA, BGB, BGC, BTG, BTF, BTB, BTF2, BTB2, NBUF };
    const size_t bytes[NBUF] = {nq * 4, nq * 4, nq * 4, nq * 4, nl * 4, nq * 4, nq * 4, nq * 4, nq * 4,
                                ng * 4, ng * 4, ng * 4, (size_t)repeat * 8, (size_t)repeat * 8, (size_t)repeat * 8,
                                (size_t)repeat * 8, (size_t)repeat * 8};
    void *buf[NBUF] = {NULL};
    int ok = 1;
    for (int i = 0; i < NBUF && ok; i++)
        ok = (buf[i] = uly_calloc(1, bytes[i])) != NULL;
    if (!ok) {
        fprintf(stderr, "ulysses bench kernel: out of memory (tensors of %zu bytes each)\n", nq * 4);
        for (int i = 0; i < NBUF; i++)
            uly_free(buf[i]);
        return ULY_EXIT_RUNTIME;
    }
    float *q = buf[BQ], *k = buf[BK], *v = buf[BV], *o = buf[BO], *lse = buf[BL];
    float *dout = buf[BDO], *dq = buf[BDQ], *dk = buf[BDK], *dv = buf[BDV];
    float *ga = buf[BGA], *gb = buf[BGB], *gc = buf[BGC];
    double *tg = buf[BTG], *tf = buf[BTF], *tb = buf[BTB], *tf2 = buf[BTF2], *tb2 = buf[BTB2];
    fill_shard(q, ULY_F32, 1, 0, batch, seq, 0, seq, heads, d);
    fill_shard(k, ULY_F32, 1, 1, batch, seq, 0, seq, heads, d);
    fill_shard(v, ULY_F32, 1, 2, batch, seq, 0, seq, heads, d);
    fill_shard(dout, ULY_F32, 1, 3, batch, seq, 0, seq, heads, d);
    fill_shard(ga, ULY_F32, 2, 0, 1, gemm, 0, gemm, 1, gemm);
    fill_shard(gb, ULY_F32, 2, 1, 1, gemm, 0, gemm, 1, gemm);
    uly_kernel_opts ko;
    memset(&ko, 0, sizeof ko);
    ko.threads = (int)threads;
    ko.block_q = bq;
    ko.block_k = bk;
    const double ffl = 4.0 * uly_attn_pairs(&a) * (double)d * (double)(batch * heads);
    const double bfl = 2.5 * ffl, gfl = 2.0 * (double)gemm * (double)gemm * (double)gemm;
    uly_kernel_opts ko2 = ko;
    ko2.threads = (int)threads2;
    /* warm-up of each, then interleaved repetitions */
    for (int64_t it = -1; it < repeat; it++) {
        set_blas_threads((int)threads);
        double t0 = now_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)gemm, (int)gemm, (int)gemm, 1, ga, (int)gemm,
                    gb, (int)gemm, 0, gc, (int)gemm);
        double t1 = now_seconds();
        rc = uly_attn_fwd(&a, &ko, q, k, v, o, lse);
        double t2 = now_seconds();
        if (!rc && !no_bwd)
            rc = uly_attn_bwd(&a, &ko, q, k, v, o, lse, dout, dq, dk, dv);
        double t3 = now_seconds();
        if (rc)
            break;
        if (it >= 0) {
            tg[it] = gfl / (t1 - t0) * 1e-9;
            tf[it] = ffl / (t2 - t1) * 1e-9;
            tb[it] = (ffl + bfl) / (t3 - t1) * 1e-9;
        }
        if (threads2 > 0) {
            t1 = now_seconds();
            rc = uly_attn_fwd(&a, &ko2, q, k, v, o, lse);
            t2 = now_seconds();
            if (!rc && !no_bwd)
                rc = uly_attn_bwd(&a, &ko2, q, k, v, o, lse, dout, dq, dk, dv);
            t3 = now_seconds();
            if (rc)
                break;
            if (it >= 0) {
                tf2[it] = ffl / (t2 - t1) * 1e-9;
                tb2[it] = (ffl + bfl) / (t3 - t1) * 1e-9;
            }
        }
    }
    if (rc) {
        fprintf(stderr, "ulysses bench kernel: %s\n", uly_last_error());
        for (int i = 0; i < NBUF; i++)
            uly_free(buf[i]);
        return exit_status_of(rc);
    }
    stats sf2 = stats_of(tf2, (size_t)repeat), sb2 = stats_of(tb2, (size_t)repeat);
    stats sg = stats_of(tg, (size_t)repeat), sf = stats_of(tf, (size_t)repeat), sb = stats_of(tb, (size_t)repeat);
    if (json) {
        printf("{\"bench\": \"kernel\", \"batch\": %lld, \"seq\": %lld, \"heads\": %lld, \"head_dim\": %lld, \"causal\": %s, "
               "\"threads\": %lld, \"repeat\": %lld, \"sgemm_gflops\": {\"median\": %.3f, \"min\": %.3f, \"max\": %.3f}, "
               "\"fwd_gflops\": {\"median\": %.3f, \"min\": %.3f, \"max\": %.3f}",
               (long long)batch, (long long)seq, (long long)heads, (long long)d, causal ? "true" : "false",
               (long long)threads, (long long)repeat, sg.median, sg.min, sg.max, sf.median, sf.min, sf.max);
        if (!no_bwd)
            printf(", \"fwdbwd_gflops\": {\"median\": %.3f, \"min\": %.3f, \"max\": %.3f}", sb.median, sb.min, sb.max);
        printf(", \"fwd_over_sgemm\": %.4f", sf.median / sg.median);
        if (!no_bwd)
            printf(", \"fwdbwd_over_sgemm\": %.4f", sb.median / sg.median);
        if (threads2 > 0) {
            printf(", \"threads2\": %lld, \"fwd_gflops_threads2\": %.3f, \"fwd_speedup\": %.4f", (long long)threads2,
                   sf2.median, sf2.median / sf.median);
            if (!no_bwd)
                printf(", \"fwdbwd_gflops_threads2\": %.3f, \"fwdbwd_speedup\": %.4f", sb2.median, sb2.median / sb.median);
        }
        printf("}\n");
    } else {
        printf("bench kernel: B=%lld N=%lld H=%lld d=%lld %s, %lld thread%s, %lld repetitions (interleaved)\n",
               (long long)batch, (long long)seq, (long long)heads, (long long)d, causal ? "causal" : "no mask",
               (long long)threads, threads > 1 ? "s" : "", (long long)repeat);
        printf("%-26s %12s %12s %12s %10s\n", "GFLOP/s", "median", "min", "max", "/ sgemm");
        printf("%-26s %12.2f %12.2f %12.2f %10s\n", "sgemm (reference)", sg.median, sg.min, sg.max, "1.000");
        printf("%-26s %12.2f %12.2f %12.2f %10.3f\n", "attention forward", sf.median, sf.min, sf.max, sf.median / sg.median);
        if (!no_bwd)
            printf("%-26s %12.2f %12.2f %12.2f %10.3f\n", "attention fwd+bwd", sb.median, sb.min, sb.max,
                   sb.median / sg.median);
        if (threads2 > 0) {
            printf("%-26s %12.2f %12.2f %12.2f %10s   speedup %.3f over %lld thread%s\n", "forward, T2 threads",
                   sf2.median, sf2.min, sf2.max, "", sf2.median / sf.median, (long long)threads, threads > 1 ? "s" : "");
            if (!no_bwd)
                printf("%-26s %12.2f %12.2f %12.2f %10s   speedup %.3f\n", "fwd+bwd, T2 threads", sb2.median, sb2.min,
                       sb2.max, "", sb2.median / sb.median);
        }
        printf("(sgemm %lld^3 with %lld thread%s; attention FLOPs 4*pairs*d forward, 2.5x that backward)\n",
               (long long)gemm, (long long)threads, threads > 1 ? "s" : "");
    }
    for (int i = 0; i < NBUF; i++)
        uly_free(buf[i]);
    return 0;
}

/* ------------------------------------------------------------------ memory */

static int bench_memory(int argc, char **argv)
{
    int64_t seq = 65536, heads = 8, d = 64, threads = 2;
    int json = 0, full = 0;
    const arg_opt opts[] = {
        {"seq", ARG_INT, &seq, 1, INT64_MAX / 2, "N", "sequence length (default 65536)", NULL, NULL},
        {"heads", ARG_INT, &heads, 1, 4096, "H", "heads (default 8)", NULL, NULL},
        {"head-dim", ARG_INT, &d, 1, 4096, "d", "head dimension (default 64)", NULL, NULL},
        {"threads", ARG_INT, &threads, 1, 1024, "T", "threads of the child run (default 2)", NULL, NULL},
        {"no-mask", ARG_FLAG, &full, 0, 0, NULL, "run without the causal mask (twice the time, same memory)", NULL, NULL},
        {"json", ARG_FLAG, &json, 0, 0, NULL, "one JSON object", NULL, NULL},
        {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    int rc = parse_or_help("ulysses bench memory", "bench memory [options]", argc, argv, opts);
    if (rc >= 0)
        return rc;
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) {
        fprintf(stderr, "ulysses bench memory: cannot find my own executable\n");
        return 1;
    }
    exe[len] = '\0';
    char sseq[32], sh[32], sd[32], st[32];
    snprintf(sseq, sizeof sseq, "%lld", (long long)seq);
    snprintf(sh, sizeof sh, "%lld", (long long)heads);
    snprintf(sd, sizeof sd, "%lld", (long long)d);
    snprintf(st, sizeof st, "%lld", (long long)threads);
    char *cargv[] = {exe, "attn", "--seq", sseq, "--heads", sh, "--head-dim", sd, "--threads", st,
                     "--backward", "--repeat", "1", "--warmup", "0", full ? NULL : "--causal", NULL};
    fflush(stdout);
    double t0 = now_seconds();
    pid_t pid = fork();
    if (pid < 0) {
        perror("ulysses bench memory: fork");
        return 1;
    }
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout))
            _exit(127);
        execv(exe, cargv);
        _exit(127);
    }
    int wst = 0;
    struct rusage ru;
    if (waitpid(pid, &wst, 0) < 0 || !WIFEXITED(wst) || WEXITSTATUS(wst) != 0 ||
        getrusage(RUSAGE_CHILDREN, &ru) != 0) {
        fprintf(stderr, "ulysses bench memory: the child run failed\n");
        return 1;
    }
    double secs = now_seconds() - t0;
    /* the bound: q, k, v, dout, o, dq, dk, dv (B,N,H,d) + lse (B,H,N), fp32,
     * plus the kernel workspace per thread (independent of N) */
    const double tensor = (double)seq * (double)heads * (double)d * 4.0;
    const double tensors = 8 * tensor + (double)seq * (double)heads * 4.0;
    const double bq = 128, bk = 256, acc = bq > 4 * bk ? bq : 4 * bk;
    const double ws = (double)threads * (2 * bq * bk + acc * (double)d + 3 * bq) * 4.0;
    const double bound = tensors + ws, rss = (double)ru.ru_maxrss * 1024.0;
    if (json)
        printf("{\"bench\": \"memory\", \"seq\": %lld, \"heads\": %lld, \"head_dim\": %lld, \"threads\": %lld, "
               "\"tensor_bytes\": %.0f, \"workspace_bytes\": %.0f, \"max_rss_bytes\": %.0f, \"rss_over_bound\": %.4f, "
               "\"seconds\": %.1f}\n",
               (long long)seq, (long long)heads, (long long)d, (long long)threads, tensors, ws, rss, rss / bound, secs);
    else {
        printf("bench memory: ulysses attn --seq %lld --heads %lld --head-dim %lld --backward%s, 1 rank, %lld threads\n",
               (long long)seq, (long long)heads, (long long)d, full ? "" : " --causal", (long long)threads);
        printf("  tensors q,k,v,dO,O,dQ,dK,dV + LSE  %10.1f MiB\n", tensors / 1048576);
        printf("  kernel workspace (all threads)     %10.1f MiB\n", ws / 1048576);
        printf("  bound (sum)                        %10.1f MiB\n", bound / 1048576);
        printf("  maximum resident size              %10.1f MiB   (getrusage of the child, as /usr/bin/time -v)\n",
               rss / 1048576);
        printf("  ratio max RSS / bound              %10.3f       (target <= 1.25)\n", rss / bound);
        printf("  run time                           %10.1f s\n", secs);
    }
    return 0;
}

/* ------------------------------------------------------------------ a2a */

/* One size: Ulysses all-to-alls in both modes next to a raw MPI_Alltoall,
 * the ring hop next to a raw MPI_Sendrecv.  Local failures are recorded in
 * d; every step that can fail on one rank is agreed (drv_sync). */
static int a2a_size(drv *d, int64_t bytes, int64_t repeat, int json)
{
    const int P = d->size, rank = d->rank;
    const int64_t H = 2 * P, hd = 128;
    int64_t n_r = bytes / (H * hd * 4);
    if (n_r < 1)
        n_r = 1;
    const size_t elems = (size_t)(n_r * H * hd);
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = 1; a.seq = n_r * P; a.heads = H; a.kv_heads = H; a.head_dim = hd; a.dtype = ULY_F32;
    /* columns: raw, pack in, pack out, datatype in, datatype out, sendrecv, ring hop */
    enum { NC = 7 };
    float *in = drv_alloc_n(d, elems, 4, "the a2a buffers");
    float *out = in ? drv_alloc_n(d, elems, 4, "the a2a buffers") : NULL;
    float *mid = out ? drv_alloc_n(d, elems, 4, "the a2a buffers") : NULL;
    double *tm = mid ? drv_alloc_n(d, (size_t)repeat * NC, sizeof(double), "the timings") : NULL;
    uly_dist *D[2] = {NULL, NULL};
    uly_sp *ring = NULL;
    int rc = drv_sync(d);
    for (int m = 0; m < 2 && !rc; m++) {
        uly_dist_opts dopt;
        memset(&dopt, 0, sizeof dopt);
        dopt.a2a_mode = m ? ULY_A2A_DATATYPE : ULY_A2A_PACK;
        drv_lib(d, uly_dist_create(d->comm, &a, &dopt, &D[m]), 0, NULL);
        rc = drv_sync(d);
    }
    if (!rc) {
        /* the ring exchange: a ring context over the same ranks (its shape
         * only sizes a tiny attention; the hop moves `bytes` bytes) */
        uly_attn_desc ra = a;
        ra.seq = P;
        ra.heads = ra.kv_heads = 1;
        ra.head_dim = 1;
        uly_sp_opts so;
        memset(&so, 0, sizeof so);
        so.method = ULY_METHOD_RING;
        drv_lib(d, uly_sp_create(d->comm, &ra, &so, &ring), 0, NULL);
        rc = drv_sync(d);
    }
    for (size_t i = 0; !rc && i < elems; i++)
        in[i] = (float)i;
    const int per = (int)(elems / (size_t)P);
    for (int64_t it = -1; it < repeat && !rc; it++) {
        double loc[NC], mx[NC];
        int st = 0;
        drv_mpi(d, MPI_Barrier(d->comm), "MPI_Barrier");
        double t0 = MPI_Wtime();
        if (!d->code)
            drv_mpi(d, MPI_Alltoall(in, per, MPI_FLOAT, out, per, MPI_FLOAT, d->comm), "MPI_Alltoall");
        loc[0] = MPI_Wtime() - t0;
        if (!d->code)
            drv_mpi(d, MPI_Barrier(d->comm), "MPI_Barrier");
        t0 = MPI_Wtime();
        if (!d->code)
            drv_mpi(d, MPI_Sendrecv(in, (int)elems, MPI_FLOAT, (rank + 1) % P, 7, out, (int)elems, MPI_FLOAT,
                                    (rank + P - 1) % P, 7, d->comm, MPI_STATUS_IGNORE), "MPI_Sendrecv");
        loc[5] = MPI_Wtime() - t0;
        if (!d->code)
            drv_mpi(d, MPI_Barrier(d->comm), "MPI_Barrier");
        t0 = MPI_Wtime();
        if (!d->code)
            st = uly_sp_ring_shift(ring, in, mid, elems * 4);
        loc[6] = MPI_Wtime() - t0;
        drv_lib(d, st, 0, NULL);
        if (!d->code && memcmp(out, mid, elems * 4) != 0)
            drv_fail(d, DRV_RUNTIME, "rank %d: the ring hop and MPI_Sendrecv disagree", rank);
        for (int m = 0; m < 2 && !st && !d->code; m++) {
            memset(out, 0, elems * 4);
            drv_mpi(d, MPI_Barrier(d->comm), "MPI_Barrier");
            t0 = MPI_Wtime();
            st = uly_dist_a2a(D[m], ULY_A2A_Q, in, mid);
            loc[1 + 2 * m] = MPI_Wtime() - t0;
            drv_mpi(d, MPI_Barrier(d->comm), "MPI_Barrier");
            t0 = MPI_Wtime();
            if (!st)
                st = uly_dist_a2a(D[m], ULY_A2A_O, mid, out);
            loc[2 + 2 * m] = MPI_Wtime() - t0;
            drv_lib(d, st, 0, NULL);
            if (!st && memcmp(in, out, elems * 4) != 0)
                drv_fail(d, DRV_RUNTIME, "rank %d: the round trip did not restore the input", rank);
        }
        if ((rc = drv_sync(d)))
            break;
        if (drv_mpi(d, MPI_Allreduce(loc, mx, NC, MPI_DOUBLE, MPI_MAX, d->comm), "MPI_Allreduce")) /* slowest rank */
            rc = drv_sync(d);
        for (int c = 0; c < NC && it >= 0 && !rc; c++)
            tm[(size_t)c * (size_t)repeat + (size_t)it] = mx[c];
    }
    if (!rc && rank == 0) {
        stats st[NC];
        for (int c = 0; c < NC; c++)
            st[c] = stats_of(tm + (size_t)c * (size_t)repeat, (size_t)repeat);
        static const char *const key[NC] = {"raw", "pack_seq_to_heads", "pack_heads_to_seq",
                                            "datatype_seq_to_heads", "datatype_heads_to_seq", "sendrecv",
                                            "ring_hop"};
        if (json) {
            printf("{\"bench\": \"a2a\", \"ranks\": %d, \"bytes_per_rank\": %zu", P, elems * 4);
            for (int c = 0; c < NC; c++)
                printf(", \"%s_ms\": {\"median\": %.4f, \"min\": %.4f, \"max\": %.4f}", key[c],
                       1e3 * st[c].median, 1e3 * st[c].min, 1e3 * st[c].max);
            for (int c = 1; c < 5; c++)
                printf(", \"%s_over_raw\": %.4f", key[c], st[c].median / st[0].median);
            printf(", \"ring_hop_over_sendrecv\": %.4f}\n", st[6].median / st[5].median);
        } else {
            printf("%12zu %10.3f |", elems * 4, 1e3 * st[0].median);
            for (int c = 1; c < 5; c++)
                printf(" %10.3f %7.3f%s", 1e3 * st[c].median, st[c].median / st[0].median, c == 2 ? " |" : "");
            printf(" | %10.3f %10.3f %7.3f\n", 1e3 * st[5].median, 1e3 * st[6].median, st[6].median / st[5].median);
        }
        fflush(stdout);
    }
    uly_sp_free(ring);
    uly_dist_free(D[0]);
    uly_dist_free(D[1]);
    drv_free(in); drv_free(out); drv_free(mid); drv_free(tm);
    return rc;
}

static int bench_a2a_mpi(drv *d, int argc, char **argv)
{
    int64_t minb = 1 << 20, maxb = 256 << 20, repeat = 5;
    int json = 0;
    const arg_opt opts[] = {
        {"min", ARG_INT, &minb, 1024, INT64_MAX / 4, "BYTES", "smallest bytes per rank (default 1M)", NULL, NULL},
        {"max", ARG_INT, &maxb, 1024, INT64_MAX / 4, "BYTES", "largest bytes per rank (default 256M)", NULL, NULL},
        {"repeat", ARG_INT, &repeat, 1, 1000, "R", "repetitions per size (default 5)", NULL, NULL},
        {"json", ARG_FLAG, &json, 0, 0, NULL, "one JSON object per size", NULL, NULL},
        {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    char msg[512];
    int ps = DRV_PARSE_OK;
    int rc = args_parse(d->cmd, argc - 1, argv + 1, opts, msg, sizeof msg);
    if (rc == ARGS_HELP) {
        ps = DRV_PARSE_HELP;
    } else if (rc == ARGS_ERROR) {
        size_t k = strlen(d->cmd);
        drv_fail(d, DRV_BADINPUT, "%s", strncmp(msg, d->cmd, k) == 0 && msg[k] == ':' ? msg + k + 2 : msg);
        ps = DRV_PARSE_ERROR;
    }
    const drv_field f[] = {
        {"--min", DRV_F_INT, minb, NULL, 0, NULL}, {"--max", DRV_F_INT, maxb, NULL, 0, NULL},
        {"--repeat", DRV_F_INT, repeat, NULL, 0, NULL}, {"--json", DRV_F_FLAG, json, NULL, 0, NULL},
    };
    rc = drv_agree(d, ps, f, 4);
    if (rc == DRV_PARSE_HELP) {
        if (d->rank == 0)
            args_usage(stdout, "ulysses", "bench a2a [options]   (under mpirun -np P)", opts);
        return 0;
    }
    if (rc)
        return rc;
    if (d->size < 2) {
        drv_say(d, "run under mpirun with at least 2 ranks");
        return DRV_BADINPUT;
    }
    if (!json && d->rank == 0) {
        printf("bench a2a: %d ranks; Ulysses all-to-all (with packing) vs raw MPI_Alltoall of the same bytes, "
               "ring hop vs raw MPI_Sendrecv, "
               "%lld repetitions, medians of the slowest rank\n",
               d->size, (long long)repeat);
        printf("%12s %10s | %10s %7s %10s %7s | %10s %7s %10s %7s | %10s %10s %7s\n%23s | %-37s | %-37s | %-30s\n",
               "bytes/rank", "raw ms", "seq->heads", "ratio", "heads->seq", "ratio", "seq->heads", "ratio",
               "heads->seq", "ratio", "sendrecv", "ring hop", "ratio", "",
               "pack + MPI_Alltoallv (auto: > 16M)", "datatypes + MPI_Alltoallw (auto: <= 16M)",
               "ring: same bytes to rank+1");
    }
    for (int64_t bytes = minb; bytes <= maxb && !rc; bytes *= 4)
        rc = a2a_size(d, bytes, repeat, json);
    return rc;
}

static int bench_a2a(int argc, char **argv)
{
    drv d;
    if (drv_open(&d, "ulysses bench a2a"))
        return DRV_RUNTIME;
    return drv_close(&d, bench_a2a_mpi(&d, argc, argv));
}

int cmd_bench(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        FILE *f = argc < 2 ? stderr : stdout;
        fprintf(f, "usage: ulysses bench <kernel|memory|a2a> [options]\n"
                   "  kernel   attention forward and fwd+bwd GFLOP/s next to sgemm GFLOP/s (same run)\n"
                   "  memory   peak resident size of an attention run next to its tensor bytes\n"
                   "  a2a      Ulysses all-to-all next to raw MPI_Alltoall, ring hop next to MPI_Sendrecv (mpirun)\n"
                   "Each takes --json and --help.\n");
        return argc < 2 ? ULY_EXIT_BADINPUT : 0;
    }
    if (strcmp(argv[1], "kernel") == 0)
        return bench_kernel(argc - 1, argv + 1);
    if (strcmp(argv[1], "memory") == 0)
        return bench_memory(argc - 1, argv + 1);
    if (strcmp(argv[1], "a2a") == 0)
        return bench_a2a(argc - 1, argv + 1);
    fprintf(stderr, "ulysses bench: unknown benchmark '%s' (kernel, memory or a2a)\n", argv[1]);
    return ULY_EXIT_BADINPUT;
}
