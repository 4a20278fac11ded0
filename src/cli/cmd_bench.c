/* SPDX-License-Identifier: Apache-2.0 */
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
 *           MPI_Alltoall of the same byte count (every all-to-all mode), and the ring methods' hop
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
#include "base/base_json.h"
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
        args_usage(stdout, "ulysses", syn, opts);
        return 0;
    }
    if (rc == ARGS_ERROR) {
        fprintf(stderr, "%s\n", msg);
        return ULY_EXIT_BADINPUT;
    }
    return -1;
}

/* ------------------------------------------------------------------ kernel */

/* "model name" of /proc/cpuinfo (or "unknown"). */
static void cpu_model(char *out, size_t n)
{
    snprintf(out, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && c) {
            c++;
            while (*c == ' ' || *c == '\t')
                c++;
            c[strcspn(c, "\n")] = '\0';
            snprintf(out, n, "%s", c);
            break;
        }
    }
    fclose(f);
}

static const char *blas_core(void)
{
#ifdef HAVE_OPENBLAS_GET_CORENAME
    return openblas_get_corename();
#else
    return "unknown";
#endif
}

static const char *bwd_name(int s)
{
    return s == ULY_BWD_SINGLE ? "single pass (5 GEMMs per block pair)" : "two passes (7 GEMMs per block pair)";
}

/* One timed configuration of the attention kernels. */
typedef struct kvariant {
    char label[64];
    const char *isa;   /* SIMD level to force, NULL: the default */
    int bwd;           /* ULY_BWD_* */
    int threads;
    int64_t bq, bk;    /* block sizes, 0: as given (or the kernel's defaults) */
    int fwd_only;      /* time the forward only */
    double *tf, *tb;   /* GFLOP/s per repetition: forward, forward+backward */
} kvariant;

static int bench_kernel(int argc, char **argv)
{
    int64_t seq = 8192, d = 128, heads = 1, batch = 1, threads = 1, repeat = 5, gemm = 2048, bq = 0, bk = 0;
    int64_t threads2 = 0;
    int causal = 0, json = 0, no_bwd = 0, compare = 0, cpu_time = 0;
    int isa_i = 0, bwd_pass = ULY_BWD_AUTO; /* choice indices: isa_choices, ULY_BWD_* */
    static const char *const isa_choices[] = {"default", "auto", "avx512", "avx2", "baseline", NULL};
    static const char *const bwd_choices[] = {"auto", "single", "two", NULL};
    const arg_opt opts[] = {
        {"seq", ARG_INT, &seq, 1, 1 << 24, "N", "sequence length (default 8192)", NULL, NULL},
        {"head-dim", ARG_INT, &d, 1, 4096, "d", "head dimension (default 128)", NULL, NULL},
        {"heads", ARG_INT, &heads, 1, 4096, "H", "heads (default 1)", NULL, NULL},
        {"batch", ARG_INT, &batch, 1, 4096, "B", "batch (default 1)", NULL, NULL},
        {"threads", ARG_INT, &threads, 1, 1024, "T", "threads for attention and sgemm (default 1)", NULL, NULL},
        {"repeat", ARG_INT, &repeat, 1, 1000, "R", "repetitions, medians reported (default 5)", NULL, NULL},
        {"scale-threads", ARG_INT, &threads2, 1, 1024, "T2", "also time attention with T2 threads and print the speedup over T", NULL, NULL},
        {"gemm-size", ARG_INT, &gemm, 64, 8192, "n", "sgemm reference size n x n x n (default 2048)", NULL, NULL},
        {"block-q", ARG_INT, &bq, 1, 65536, "n", "query block rows", NULL, NULL},
        {"block-k", ARG_INT, &bk, 1, 65536, "n", "key block rows", NULL, NULL},
        {"causal", ARG_FLAG, &causal, 0, 0, NULL, "causal mask (FLOPs count the visible half)", NULL, NULL},
        {"forward-only", ARG_FLAG, &no_bwd, 0, 0, NULL, "skip forward+backward", NULL, NULL},
        {"isa", ARG_CHOICE, &isa_i, 0, 0, "L", "SIMD level of exp and the row operations: auto (the best), avx512, avx2 or baseline (default: ULY_ISA, else the best)", isa_choices, NULL},
        {"bwd", ARG_CHOICE, &bwd_pass, 0, 0, "S", "backward schedule: auto, single (5 GEMMs per block pair) or two (7) (default auto)", bwd_choices, NULL},
        {"compare", ARG_FLAG, &compare, 0, 0, NULL, "also time, in the same run, the other backward schedule, every other SIMD level this CPU runs and (without --block-q/-k) the blocks of 128 x 256 used before the per-direction defaults", NULL, NULL},
        {"cpu-time", ARG_FLAG, &cpu_time, 0, 0, NULL, "time every call by the process's CPU time instead of the wall clock (on a loaded machine; 1 thread only)", NULL, NULL},
        {"json", ARG_FLAG, &json, 0, 0, NULL, "one JSON object per run", NULL, NULL},
        {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    int rc = parse_or_help("ulysses bench kernel", "bench kernel [options]", argc, argv, opts);
    if (rc >= 0)
        return rc;
    if (cpu_time && (threads != 1 || threads2 > 0)) { /* CPU time adds up the threads */
        fprintf(stderr, "ulysses bench kernel: --cpu-time needs --threads 1 and no --scale-threads\n");
        return ULY_EXIT_BADINPUT;
    }
    double (*const clk)(void) = cpu_time ? cpu_seconds : now_seconds;
    if (isa_i > 0 && (rc = uly_kernel_set_isa(isa_choices[isa_i]))) {
        fprintf(stderr, "ulysses bench kernel: --isa: %s\n", uly_last_error());
        return ULY_EXIT_BADINPUT;
    }
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = batch; a.seq = seq; a.heads = heads; a.kv_heads = heads; a.head_dim = d; a.causal = causal;
    a.dtype = ULY_F32;
    if ((rc = uly_attn_desc_check(&a))) {
        fprintf(stderr, "ulysses bench kernel: %s\n", uly_last_error());
        return exit_status_of(rc);
    }
    uly_kernel_opts ko;
    memset(&ko, 0, sizeof ko);
    ko.threads = (int)threads;
    ko.block_q = bq;
    ko.block_k = bk;
    ko.bwd_pass = bwd_pass;
    const int sched = uly_attn_bwd_schedule(&a, &ko);
    if (sched < 0) {
        fprintf(stderr, "ulysses bench kernel: %s\n", uly_last_error());
        return exit_status_of(-sched);
    }
    const char *isa0 = uly_kernel_isa();
    /* the variants, timed interleaved with sgemm: [0] is the configuration asked for */
    enum { MAXV = 8 };
    kvariant var[MAXV];
    int nv = 0;
    memset(var, 0, sizeof var);
    snprintf(var[nv].label, sizeof var[nv].label, "attention");
    var[nv].bwd = bwd_pass; var[nv].threads = (int)threads; nv++;
    if (threads2 > 0) {
        snprintf(var[nv].label, sizeof var[nv].label, "T2 = %lld threads", (long long)threads2);
        var[nv].bwd = bwd_pass; var[nv].threads = (int)threads2; nv++;
    }
    if (compare && !no_bwd) {
        const int other = sched == ULY_BWD_SINGLE ? ULY_BWD_TWO : ULY_BWD_SINGLE;
        snprintf(var[nv].label, sizeof var[nv].label, "bwd %s", other == ULY_BWD_SINGLE ? "single pass" : "two passes");
        var[nv].bwd = other; var[nv].threads = (int)threads; nv++;
    }
    static const char *const levels[3] = {"avx512", "avx2", "baseline"};
    for (int l = 0; l < 3 && compare; l++) {
        if (!strcmp(levels[l], isa0) || uly_kernel_set_isa(levels[l]) != ULY_OK)
            continue;
        snprintf(var[nv].label, sizeof var[nv].label, "simd %s", levels[l]);
        var[nv].isa = levels[l]; var[nv].bwd = bwd_pass; var[nv].threads = (int)threads; nv++;
    }
    uly_kernel_set_isa(isa0);
    if (compare && !bq && !bk) { /* the previous default blocks, both directions */
        snprintf(var[nv].label, sizeof var[nv].label, "blocks 128 x 256");
        var[nv].bwd = bwd_pass; var[nv].threads = (int)threads; var[nv].bq = 128; var[nv].bk = 256; nv++;
    }
    const size_t nq = (size_t)(batch * seq * heads * d), nl = (size_t)(batch * heads * seq);
    const size_t ng = (size_t)(gemm * gemm);
    /* every buffer in one table: allocated through the library's hooks,
     * checked, and freed in one place whatever happens */
    enum { BQ, BK, BV, BO, BL, BDO, BDQ, BDK, BDV, BGA, BGB, BGC, BTG, BT0, NBUF = BT0 + 2 * MAXV };
    size_t bytes[NBUF] = {nq * 4, nq * 4, nq * 4, nq * 4, nl * 4, nq * 4, nq * 4, nq * 4, nq * 4,
                          ng * 4, ng * 4, ng * 4, (size_t)repeat * 8};
    for (int i = BT0; i < NBUF; i++)
        bytes[i] = i < BT0 + 2 * nv ? (size_t)repeat * 8 : 1;
    /* the memory preflight (one process: no agreement): refused before any allocation */
    uint64_t total = 0;
    for (int i = 0; i < NBUF; i++)
        total = total > UINT64_MAX - bytes[i] ? UINT64_MAX : total + bytes[i];
    drv_mem mem;
    drv_mem_probe(&mem);
    if (total > mem.avail) {
        char sn[32], sa[32];
        fprintf(stderr, "ulysses bench kernel: not enough memory: the tensors need about %s but the process can get "
                "%s (%s); use smaller --seq, --heads, --batch, --head-dim or --gemm-size\n",
                drv_bytes(sn, sizeof sn, total), drv_bytes(sa, sizeof sa, mem.avail), mem.limit);
        return ULY_EXIT_BADINPUT;
    }
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
    double *tg = buf[BTG];
    for (int i = 0; i < nv; i++) {
        var[i].tf = buf[BT0 + 2 * i];
        var[i].tb = buf[BT0 + 2 * i + 1];
    }
    fill_shard(q, ULY_F32, 1, 0, batch, seq, 0, seq, heads, d);
    fill_shard(k, ULY_F32, 1, 1, batch, seq, 0, seq, heads, d);
    fill_shard(v, ULY_F32, 1, 2, batch, seq, 0, seq, heads, d);
    fill_shard(dout, ULY_F32, 1, 3, batch, seq, 0, seq, heads, d);
    fill_shard(ga, ULY_F32, 2, 0, 1, gemm, 0, gemm, 1, gemm);
    fill_shard(gb, ULY_F32, 2, 1, 1, gemm, 0, gemm, 1, gemm);
    const double ffl = 4.0 * uly_attn_pairs(&a) * (double)d * (double)(batch * heads);
    const double bfl = 2.5 * ffl, gfl = 2.0 * (double)gemm * (double)gemm * (double)gemm;
    /* warm-up of each, then interleaved repetitions */
    for (int64_t it = -1; it < repeat && !rc; it++) {
        set_blas_threads((int)threads);
        double t0 = clk();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)gemm, (int)gemm, (int)gemm, 1, ga, (int)gemm,
                    gb, (int)gemm, 0, gc, (int)gemm);
        double t1 = clk();
        if (it >= 0)
            tg[it] = gfl / (t1 - t0) * 1e-9;
        for (int i = 0; i < nv && !rc; i++) {
            uly_kernel_opts kv = ko;
            kv.threads = var[i].threads;
            kv.bwd_pass = var[i].bwd;
            if (var[i].bq)
                kv.block_q = var[i].bq;
            if (var[i].bk)
                kv.block_k = var[i].bk;
            uly_kernel_set_isa(var[i].isa ? var[i].isa : isa0);
            t1 = clk();
            rc = uly_attn_fwd(&a, &kv, q, k, v, o, lse);
            double t2 = clk();
            if (!rc && !no_bwd)
                rc = uly_attn_bwd(&a, &kv, q, k, v, o, lse, dout, dq, dk, dv);
            double t3 = clk();
            if (rc)
                break;
            if (it >= 0) {
                var[i].tf[it] = ffl / (t2 - t1) * 1e-9;
                var[i].tb[it] = (ffl + bfl) / (t3 - t1) * 1e-9;
            }
        }
    }
    uly_kernel_set_isa(isa0);
    if (rc) {
        fprintf(stderr, "ulysses bench kernel: %s\n", uly_last_error());
        for (int i = 0; i < NBUF; i++)
            uly_free(buf[i]);
        return exit_status_of(rc);
    }
    stats sg = stats_of(tg, (size_t)repeat);
    stats sf[MAXV], sb[MAXV];
    for (int i = 0; i < nv; i++) {
        sf[i] = stats_of(var[i].tf, (size_t)repeat);
        sb[i] = stats_of(var[i].tb, (size_t)repeat);
    }
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    int report_failed = 0;
    if (json) {
        /* through jansson (src/base/base_json.h): a ratio that is not finite is null plus a flag */
        json_t *root = json_object(), *x;
        int bad = !root;
        if (!bad) {
            bad |= uly_json_set_str(root, "bench", "kernel");
            bad |= uly_json_set_int(root, "batch", batch) | uly_json_set_int(root, "seq", seq);
            bad |= uly_json_set_int(root, "heads", heads) | uly_json_set_int(root, "head_dim", d);
            bad |= uly_json_set_bool(root, "causal", causal);
            bad |= uly_json_set_int(root, "threads", threads) | uly_json_set_int(root, "repeat", repeat);
            bad |= uly_json_set_str(root, "clock", cpu_time ? "cpu" : "wall");
            bad |= uly_json_set_str(root, "cpu", cpu) | uly_json_set_str(root, "blas_core", blas_core());
            bad |= uly_json_set_str(root, "simd", isa0);
            bad |= uly_json_set_str(root, "bwd_schedule", sched == ULY_BWD_SINGLE ? "single" : "two");
            const stats *st[3] = {&sg, &sf[0], no_bwd ? NULL : &sb[0]};
            static const char *const key[3] = {"sgemm_gflops", "fwd_gflops", "fwdbwd_gflops"};
            for (int s = 0; s < 3 && !bad; s++) {
                if (!st[s])
                    continue;
                bad |= !(x = uly_json_add_object(root, key[s]));
                if (!bad)
                    bad |= uly_json_set_fixed(x, "median", st[s]->median, 3) |
                           uly_json_set_fixed(x, "min", st[s]->min, 3) | uly_json_set_fixed(x, "max", st[s]->max, 3);
            }
        }
        if (!bad) {
            bad |= uly_json_set_fixed(root, "fwd_over_sgemm", sf[0].median / sg.median, 4);
            if (!no_bwd)
                bad |= uly_json_set_fixed(root, "fwdbwd_over_sgemm", sb[0].median / sg.median, 4);
            if (threads2 > 0) {
                bad |= uly_json_set_int(root, "threads2", threads2);
                bad |= uly_json_set_fixed(root, "fwd_gflops_threads2", sf[1].median, 3);
                bad |= uly_json_set_fixed(root, "fwd_speedup", sf[1].median / sf[0].median, 4);
                if (!no_bwd) {
                    bad |= uly_json_set_fixed(root, "fwdbwd_gflops_threads2", sb[1].median, 3);
                    bad |= uly_json_set_fixed(root, "fwdbwd_speedup", sb[1].median / sb[0].median, 4);
                }
            }
        }
        json_t *vs = !bad && nv > 1 ? uly_json_add_array(root, "variants") : NULL;
        bad |= nv > 1 && !vs;
        for (int i = 1; i < nv && !bad; i++) {
            bad |= !(x = uly_json_append_object(vs));
            if (bad)
                break;
            bad |= uly_json_set_str(x, "label", var[i].label) | uly_json_set_int(x, "threads", var[i].threads);
            bad |= uly_json_set_fixed(x, "fwd_gflops", sf[i].median, 3);
            bad |= uly_json_set_fixed(x, "fwd_over_default", sf[i].median / sf[0].median, 4);
            if (!no_bwd) {
                bad |= uly_json_set_fixed(x, "fwdbwd_gflops", sb[i].median, 3);
                bad |= uly_json_set_fixed(x, "fwdbwd_over_default", sb[i].median / sb[0].median, 4);
            }
        }
        if (uly_json_emit(stdout, root, bad, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15))) {
            fprintf(stderr, "ulysses bench kernel: cannot write the JSON report (out of memory or write error)\n");
            report_failed = 1;
        }
    } else {
        printf("bench kernel: B=%lld N=%lld H=%lld d=%lld %s, %lld thread%s, %lld repetitions (interleaved), %s\n",
               (long long)batch, (long long)seq, (long long)heads, (long long)d, causal ? "causal" : "no mask",
               (long long)threads, threads > 1 ? "s" : "", (long long)repeat,
               cpu_time ? "process CPU time" : "wall clock");
        printf("cpu: %s; OpenBLAS core %s; kernels: simd %s, backward %s\n", cpu, blas_core(), isa0, bwd_name(sched));
        printf("%-26s %12s %12s %12s %10s\n", "GFLOP/s", "median", "min", "max", "/ sgemm");
        printf("%-26s %12.2f %12.2f %12.2f %10s\n", "sgemm (reference)", sg.median, sg.min, sg.max, "1.000");
        printf("%-26s %12.2f %12.2f %12.2f %10.3f\n", "attention forward", sf[0].median, sf[0].min, sf[0].max,
               sf[0].median / sg.median);
        if (!no_bwd)
            printf("%-26s %12.2f %12.2f %12.2f %10.3f\n", "attention fwd+bwd", sb[0].median, sb[0].min, sb[0].max,
                   sb[0].median / sg.median);
        for (int i = 1; i < nv; i++) {
            char l1[96], l2[96];
            snprintf(l1, sizeof l1, "forward, %s", var[i].label);
            snprintf(l2, sizeof l2, "fwd+bwd, %s", var[i].label);
            if (!var[i].isa && !var[i].bq && var[i].threads == (int)threads) /* the other backward schedule: fwd is the same */
                goto fwdbwd;
            printf("%-26s %12.2f %12.2f %12.2f %10.3f   x %.3f of the first row\n", l1, sf[i].median, sf[i].min,
                   sf[i].max, sf[i].median / sg.median, sf[i].median / sf[0].median);
        fwdbwd:
            if (!no_bwd)
                printf("%-26s %12.2f %12.2f %12.2f %10.3f   x %.3f of the first row\n", l2, sb[i].median, sb[i].min,
                       sb[i].max, sb[i].median / sg.median, sb[i].median / sb[0].median);
        }
        printf("(sgemm %lld^3 with %lld thread%s; attention FLOPs 4*pairs*d forward, 2.5x that backward)\n",
               (long long)gemm, (long long)threads, threads > 1 ? "s" : "");
    }
    for (int i = 0; i < NBUF; i++)
        uly_free(buf[i]);
    return report_failed;
}

/* ------------------------------------------------------------------ memory */

static int bench_memory(int argc, char **argv)
{
    int64_t seq = 65536, heads = 8, d = 64, threads = 2;
    int json = 0, full = 0;
    const arg_opt opts[] = {
        {"seq", ARG_INT, &seq, 1, DRV_SEQ_MAX, "N", "sequence length (default 65536)", NULL, NULL},
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
        /* the child's bad input (its memory preflight, say) stays bad input, its one-line message said why */
        if (WIFEXITED(wst) && WEXITSTATUS(wst) == ULY_EXIT_BADINPUT)
            return ULY_EXIT_BADINPUT;
        fprintf(stderr, "ulysses bench memory: the child run failed\n");
        return ULY_EXIT_RUNTIME;
    }
    double secs = now_seconds() - t0;
    /* the bound: q, k, v, dout, o, dq, dk, dv (B,N,H,d) + lse (B,H,N), fp32,
     * plus the kernel workspace per thread (independent of N) */
    const double tensor = (double)seq * (double)heads * (double)d * 4.0;
    const double tensors = 8 * tensor + (double)seq * (double)heads * 4.0;
    uly_attn_desc wa;
    memset(&wa, 0, sizeof wa);
    wa.batch = 1; wa.seq = seq; wa.heads = heads; wa.kv_heads = heads; wa.head_dim = d; wa.causal = !full;
    wa.dtype = ULY_F32;
    uly_kernel_opts wo;
    memset(&wo, 0, sizeof wo);
    wo.threads = (int)threads;
    size_t wsb = 0; /* the child's attention ran with this shape: it is valid */
    const double ws = uly_attn_workspace(&wa, &wo, &wsb) ? 0 : (double)wsb;
    const double bound = tensors + ws, rss = (double)ru.ru_maxrss * 1024.0;
    if (json) {
        json_t *o = json_object();
        int bad = !o;
        if (!bad) {
            bad |= uly_json_set_str(o, "bench", "memory") | uly_json_set_int(o, "seq", seq);
            bad |= uly_json_set_int(o, "heads", heads) | uly_json_set_int(o, "head_dim", d);
            bad |= uly_json_set_int(o, "threads", threads);
            bad |= uly_json_set_fixed(o, "tensor_bytes", tensors, 0) | uly_json_set_fixed(o, "workspace_bytes", ws, 0);
            bad |= uly_json_set_fixed(o, "max_rss_bytes", rss, 0);
            bad |= uly_json_set_fixed(o, "rss_over_bound", rss / bound, 4) | uly_json_set_fixed(o, "seconds", secs, 1);
        }
        if (uly_json_emit(stdout, o, bad, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15))) {
            fprintf(stderr, "ulysses bench memory: cannot write the JSON report (out of memory or write error)\n");
            return 1;
        }
    }
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

/* One size: Ulysses all-to-alls in every mode next to a raw MPI_Alltoall,
 * the ring hop next to a raw MPI_Sendrecv.  Each Ulysses all-to-all runs
 * the way the forward runs it: sequence -> heads from the caller's sequence
 * shard into the context's own head-side Q buffer, heads -> sequence from its
 * own O buffer into the caller's shard (uly_dist_head_buffer; the copy Q -> O
 * between the two stands for the attention and is not timed).  The shm mode
 * (every rank on one node only, shm = 1) writes and reads those buffers in
 * the peers directly; the cma mode (also one node) reads the peers' sequence
 * shards or head-side buffers with process_vm_readv, its column n/a where
 * the system forbids it (a note says why); both n/a, with a note, where
 * the shared-memory window cannot be had (/dev/shm too small, address
 * space: ULY_EUNAVAIL, the same on every rank).  Local failures are recorded in d; every step that can
 * fail on one rank is agreed (drv_sync). */
/* --min/--max: 4 GiB per rank keeps every count of the raw MPI_Alltoall in an int. */
enum { A2A_MAX_BYTES_LOG2 = 32 };
#define A2A_MAX_BYTES ((int64_t)1 << A2A_MAX_BYTES_LOG2)

static int a2a_size(drv *d, int64_t bytes, int64_t minb, int64_t repeat, int json, int shm)
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
    /* columns: raw, per mode seq->heads and heads->seq, sendrecv, ring hop */
    enum { NM = 6, NC = 3 + 2 * NM, SHM = 3, CMA = 4 };
    static const int modes[NM] = {ULY_A2A_PACK, ULY_A2A_DATATYPE, ULY_A2A_PIPELINE, ULY_A2A_SHM, ULY_A2A_CMA,
                                  ULY_A2A_AUTO};
    float *in = drv_alloc_n(d, elems, 4, "the a2a buffers");
    float *out = in ? drv_alloc_n(d, elems, 4, "the a2a buffers") : NULL;
    float *mid = out ? drv_alloc_n(d, elems, 4, "the a2a buffers") : NULL;
    double *tm = mid ? drv_alloc_n(d, (size_t)repeat * NC, sizeof(double), "the timings") : NULL;
    uly_dist *D[NM] = {NULL};
    uly_sp *ring = NULL;
    int rc = drv_sync(d);
    for (int c = 0; tm && c < NC * repeat; c++)
        tm[c] = NAN;
    int cma_off = 0; /* the cma column left out: the system forbids it (auto's note says the same) */
    for (int m = 0; m < NM && !rc; m++) {
        if ((m == SHM || m == CMA) && !shm)
            continue;
        uly_dist_opts dopt;
        memset(&dopt, 0, sizeof dopt);
        dopt.a2a_mode = modes[m];
        int st = uly_dist_create(d->comm, &a, &dopt, &D[m]);
        if (st == ULY_EUNAVAIL && (m == SHM || m == CMA)) {
            /* no shared-memory window (the same on every rank): the column is n/a, said once */
            static int said;
            if (!said++)
                drv_say(d, "note: %s: the shm and cma columns are n/a where it cannot be made", uly_last_error());
            continue;
        }
        drv_lib(d, st, 0, NULL);
        rc = drv_sync(d);
        if (!rc && m == CMA && uly_dist_a2a_note(D[m])) { /* running as shm: not a cma column */
            if (bytes == minb)
                drv_say(d, "note: %s", uly_dist_a2a_note(D[m]));
            uly_dist_free(D[m]);
            D[m] = NULL;
            cma_off = 1;
        }
        if (!rc && m == NM - 1 && !cma_off && uly_dist_a2a_note(D[m])) { /* auto without its window */
            static int said;
            if (!said++)
                drv_say(d, "note: %s", uly_dist_a2a_note(D[m]));
        }
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
    /* the automatic mode measures its first calls of each kind: let it decide first */
    for (int c = 0; !rc && c < (ULY_A2A_MODES - 1) * ULY_A2A_AUTO_SAMPLES; c++) {
        float *hq = uly_dist_head_buffer(D[NM - 1], ULY_A2A_Q), *ho = uly_dist_head_buffer(D[NM - 1], ULY_A2A_O);
        int st = uly_dist_a2a(D[NM - 1], ULY_A2A_Q, in, hq);
        if (!st)
            st = uly_dist_a2a(D[NM - 1], ULY_A2A_O, ho, out);
        drv_lib(d, st, 0, NULL);
        rc = drv_sync(d);
    }
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
        loc[NC - 2] = MPI_Wtime() - t0;
        if (!d->code)
            drv_mpi(d, MPI_Barrier(d->comm), "MPI_Barrier");
        t0 = MPI_Wtime();
        if (!d->code)
            st = uly_sp_ring_shift(ring, in, mid, elems * 4);
        loc[NC - 1] = MPI_Wtime() - t0;
        drv_lib(d, st, 0, NULL);
        if (!d->code && memcmp(out, mid, elems * 4) != 0)
            drv_fail(d, DRV_RUNTIME, "rank %d: the ring hop and MPI_Sendrecv disagree", rank);
        for (int m = 0; m < NM && !st && !d->code; m++) {
            loc[1 + 2 * m] = loc[2 + 2 * m] = NAN;
            if (!D[m])
                continue;
            float *hq = uly_dist_head_buffer(D[m], ULY_A2A_Q), *ho = uly_dist_head_buffer(D[m], ULY_A2A_O);
            memset(out, 0, elems * 4);
            drv_mpi(d, MPI_Barrier(d->comm), "MPI_Barrier");
            t0 = MPI_Wtime();
            st = uly_dist_a2a(D[m], ULY_A2A_Q, in, hq);
            loc[1 + 2 * m] = MPI_Wtime() - t0;
            if (!st) /* B = 1, H_r = H / P: the head side holds elems elements too */
                memcpy(ho, hq, elems * 4);
            drv_mpi(d, MPI_Barrier(d->comm), "MPI_Barrier");
            t0 = MPI_Wtime();
            if (!st)
                st = uly_dist_a2a(D[m], ULY_A2A_O, ho, out);
            loc[2 + 2 * m] = MPI_Wtime() - t0;
            drv_lib(d, st, 0, NULL);
            if (!st && memcmp(in, out, elems * 4) != 0)
                drv_fail(d, DRV_RUNTIME, "rank %d: the %s round trip did not restore the input", rank,
                         uly_a2a_mode_name(modes[m]));
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
                                            "datatype_seq_to_heads", "datatype_heads_to_seq",
                                            "pipeline_seq_to_heads", "pipeline_heads_to_seq",
                                            "shm_seq_to_heads", "shm_heads_to_seq",
                                            "cma_seq_to_heads", "cma_heads_to_seq",
                                            "auto_seq_to_heads", "auto_heads_to_seq", "sendrecv", "ring_hop"};
        const char *chose_in = uly_a2a_mode_name(uly_dist_a2a_mode(D[NM - 1], ULY_A2A_Q));
        const char *chose_out = uly_a2a_mode_name(uly_dist_a2a_mode(D[NM - 1], ULY_A2A_O));
        if (json) { /* through jansson: a ratio that is not finite is null plus a flag */
            json_t *root = json_object(), *x;
            int bad = !root;
            char k[64];
            if (!bad)
                bad |= uly_json_set_str(root, "bench", "a2a") | uly_json_set_int(root, "ranks", P) |
                       uly_json_set_int(root, "bytes_per_rank", (int64_t)(elems * 4));
            for (int c = 0; c < NC && !bad; c++) {
                if (c >= 1 && c < 1 + 2 * NM && !D[(c - 1) / 2])
                    continue; /* ranks on several nodes: no shm or cma mode; cma not allowed here */
                snprintf(k, sizeof k, "%s_ms", key[c]);
                bad |= !(x = uly_json_add_object(root, k));
                if (!bad)
                    bad |= uly_json_set_fixed(x, "median", 1e3 * st[c].median, 4) |
                           uly_json_set_fixed(x, "min", 1e3 * st[c].min, 4) |
                           uly_json_set_fixed(x, "max", 1e3 * st[c].max, 4);
            }
            for (int c = 1; c < 1 + 2 * NM && !bad; c++) {
                if (!D[(c - 1) / 2])
                    continue;
                snprintf(k, sizeof k, "%s_over_raw", key[c]);
                bad |= uly_json_set_fixed(root, k, st[c].median / st[0].median, 4);
            }
            if (!bad)
                bad |= uly_json_set_fixed(root, "ring_hop_over_sendrecv", st[NC - 1].median / st[NC - 2].median, 4) |
                       uly_json_set_str(root, "auto_chose_seq_to_heads", chose_in) |
                       uly_json_set_str(root, "auto_chose_heads_to_seq", chose_out);
            if (uly_json_emit(stdout, root, bad, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15)))
                drv_fail(d, DRV_RUNTIME, "cannot write the JSON report (out of memory or write error)");
        } else {
            printf("%10zu %8.3f |", elems * 4, 1e3 * st[0].median);
            for (int m = 0; m < NM; m++)
                if (D[m])
                    printf(" %5.3f %5.3f |", st[1 + 2 * m].median / st[0].median,
                           st[2 + 2 * m].median / st[0].median);
                else
                    printf(" %5s %5s |", "n/a", "n/a");
            printf(" %8.3f %10.3f | %s, %s\n", 1e3 * st[NC - 2].median, st[NC - 1].median / st[NC - 2].median,
                   chose_in, chose_out);
        }
        fflush(stdout);
    }
    if (!rc)
        rc = drv_sync(d); /* rank 0's report */
    uly_sp_free(ring);
    for (int m = 0; m < NM; m++)
        uly_dist_free(D[m]);
    drv_free(in); drv_free(out); drv_free(mid); drv_free(tm);
    return rc;
}

/* What a2a_size holds at `bytes` per rank on P ranks, in multiples of its
 * buffer (elems x 4 bytes, see a2a_size): *touched, the memory written
 * (the three rank buffers, the head-side Q and O and the staging of each
 * context), compared with the node's memory; *reserved, the address space
 * (every head-side tensor of the six contexts, forward and backward, and
 * the shared windows of shm, cma and auto, each mapping all P ranks'
 * segments), compared with ulimit -v.  Measured on 2 ranks: 20.5 x touched
 * (peak RSS), 83 x reserved (VmPeak). */
static void a2a_need(int P, int64_t bytes, uint64_t *touched, uint64_t *reserved)
{
    const int64_t H = 2 * P, hd = 128;
    int64_t n_r = bytes / (H * hd * 4);
    if (n_r < 1)
        n_r = 1;
    const uint64_t buf = (uint64_t)(n_r * H * hd) * 4, base = 64u << 20; /* MPI, OpenBLAS, tables */
    const uint64_t t = 24, r = 35 + 24 * (uint64_t)P;
    *touched = buf > (UINT64_MAX - base) / t ? UINT64_MAX : base + t * buf;
    *reserved = buf > (UINT64_MAX - base) / r ? UINT64_MAX : base + r * buf;
}

static int bench_a2a_mpi(drv *d, int argc, char **argv)
{
    int64_t minb = 1 << 20, maxb = 256 << 20, repeat = 5;
    int json = 0, force = 0;
    const arg_opt opts[] = {
        {"min", ARG_INT, &minb, 1024, A2A_MAX_BYTES, "BYTES", "smallest bytes per rank (default 1M)", NULL, NULL},
        {"max", ARG_INT, &maxb, 1024, A2A_MAX_BYTES, "BYTES",
         "largest bytes per rank, at least --min; sizes go --min x 4^k (default 256M; the memory preflight "
         "refuses sizes the node cannot hold: about 24 x BYTES per rank)", NULL, NULL},
        {"repeat", ARG_INT, &repeat, 1, 1000, "R", "repetitions per size (default 5)", NULL, NULL},
        {"json", ARG_FLAG, &json, 0, 0, NULL, "one JSON object per size", NULL, NULL},
        {"force", ARG_FLAG, &force, 0, 0, NULL, "run even when the memory preflight says it will not fit", NULL, NULL},
        {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    int rc, ps = drv_parse(d, argc, argv, opts);
    const drv_field f[] = {
        {"--min", DRV_F_INT, minb, NULL, 0, NULL}, {"--max", DRV_F_INT, maxb, NULL, 0, NULL},
        {"--repeat", DRV_F_INT, repeat, NULL, 0, NULL}, {"--json", DRV_F_FLAG, json, NULL, 0, NULL},
        {"--force", DRV_F_FLAG, force, NULL, 0, NULL},
    };
    rc = drv_agree(d, ps, f, (int)(sizeof f / sizeof f[0]));
    if (rc == DRV_AGREE_HELP) {
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
    if (minb > maxb) { /* agreed options: the same verdict on every rank */
        char a[32], b[32];
        drv_say(d, "--min %s is larger than --max %s: no size to measure", drv_bytes(a, sizeof a, (uint64_t)minb),
                drv_bytes(b, sizeof b, (uint64_t)maxb));
        return DRV_BADINPUT;
    }
    /* the memory preflight at the largest size measured (agreed over the ranks) */
    int64_t top = minb;
    while (top <= maxb / 4)
        top *= 4;
    uint64_t touched, reserved;
    a2a_need(d->size, top, &touched, &reserved);
    char why[160], sb[32], tb[32], rb[32];
    snprintf(why, sizeof why, "bench a2a at %s per rank: %s written, %s of address space",
             drv_bytes(sb, sizeof sb, (uint64_t)top), drv_bytes(tb, sizeof tb, touched),
             drv_bytes(rb, sizeof rb, reserved));
    /* the address space beyond what is written counts against the rlimits only */
    drv_preflight(d, touched, reserved > touched ? reserved - touched : 0, why, force);
    if ((rc = drv_sync(d)))
        return rc;
    /* the shm mode needs every rank on one node (the same answer on every rank) */
    MPI_Comm node = MPI_COMM_NULL;
    int nn = 0;
    if (drv_mpi(d, MPI_Comm_split_type(d->comm, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &node),
                "MPI_Comm_split_type") == 0 && drv_mpi(d, MPI_Comm_size(node, &nn), "MPI_Comm_size") == 0)
        MPI_Comm_free(&node);
    rc = drv_sync(d);
    const int shm = nn == d->size;
    if (rc)
        return rc;
    if (!json && d->rank == 0) {
        printf("bench a2a: %d ranks; Ulysses all-to-all (with packing) vs raw MPI_Alltoall of the same bytes, "
               "ring hop vs raw MPI_Sendrecv, %lld repetitions, medians of the slowest rank; ratio = mode / raw\n",
               d->size, (long long)repeat);
        printf("  modes: pack = our copy + MPI_Alltoallv, dtype = derived datatypes + MPI_Alltoallw, "
               "pipe = per-peer Isend/Irecv with pack/unpack overlapped, shm = direct copies between the ranks' "
               "buffers in a shared-memory window (%s), cma = each rank reads its blocks out of the peers' memory "
               "with process_vm_readv (one node, where allowed), auto = measured choice (shown)\n",
               shm ? "all ranks on one node" : "n/a: the ranks are not on one node");
        printf("  timed as in the forward: sequence shard -> the context's head-side Q buffer (s->h), "
               "its O buffer -> sequence shard (h->s)\n");
        printf("%10s %8s |", "bytes/rank", "raw ms");
        static const char *const h[6] = {"pack", "dtype", "pipe", "shm", "cma", "auto"};
        for (int m = 0; m < 6; m++)
            printf(" %-11s |", h[m]);
        printf(" %-19s | auto chose\n%19s |", "ring: to rank+1", "");
        for (int m = 0; m < 6; m++)
            printf(" %5s %5s |", "s->h", "h->s");
        printf(" %8s %10s | s->h, h->s\n", "sendrecv", "hop ratio");
    }
    for (int64_t bytes = minb; bytes <= maxb && !rc; bytes *= 4)
        rc = a2a_size(d, bytes, minb, repeat, json, shm);
    return rc;
}

static int bench_a2a(int argc, char **argv)
{
    drv d;
    if (drv_open(&d, "ulysses bench a2a"))
        return DRV_RUNTIME;
    return drv_close(&d, bench_a2a_mpi(&d, argc, argv));
}


/* ------------------------------------------------------------------ methods */

/* Rows of token segments of a (B, N, row) double tensor, into (B, n, row). */
static void take_rows(const double *full, double *out, int64_t B, int64_t N, int64_t row, int ns,
                      const int64_t *tb, const int64_t *tc)
{
    int64_t n = 0;
    for (int s = 0; s < ns; s++)
        n += tc[s];
    for (int64_t b = 0; b < B; b++) {
        int64_t r0 = 0;
        for (int s = 0; s < ns; s++) {
            memcpy(out + (b * n + r0) * row, full + (b * N + tb[s]) * row, (size_t)(tc[s] * row) * sizeof *out);
            r0 += tc[s];
        }
    }
}

/* The --check part of bench methods, local to a rank: its rows against the
 * fp64 reference (err[i] = max abs, max rel over |ref| >= 1e-3) and against
 * the single-process blocked kernel (bitwise).  Allocation failures are
 * recorded in d. */
static void methods_check(drv *d, const uly_attn_desc *a, int64_t seed, int threads, int backward, int ns,
                          const int64_t *tb, const int64_t *tc, void *const *res, double err[4][2], int *bitwise)
{
    const int64_t B = a->batch, N = a->seq, H = a->heads, Hkv = a->kv_heads, hd = a->head_dim;
    const int64_t n = tc[0] + (ns > 1 ? tc[1] : 0);
    const size_t es = uly_dtype_size(a->dtype), NQ = (size_t)(B * N * H * hd), NK = (size_t)(B * N * Hkv * hd);
    double *full[4] = {NULL}, *ref[4] = {NULL}, *mref = NULL;
    void *one[5] = {NULL}, *in1[4] = {NULL};
    char *m1 = NULL;
    for (int i = 0; i < 4 && !d->code; i++) {
        size_t cnt = i == 1 || i == 2 ? NK : NQ;
        full[i] = drv_alloc_n(d, cnt, sizeof(double), "the fp64 inputs (--check)");
        ref[i] = full[i] ? drv_alloc_n(d, i >= 2 ? NK : NQ, sizeof(double), "the fp64 reference (--check)") : NULL;
        in1[i] = ref[i] ? drv_alloc_n(d, cnt, es, "the single-process inputs (--check)") : NULL;
        one[i] = in1[i] ? drv_alloc_n(d, i >= 2 ? NK : NQ, es, "the single-process results (--check)") : NULL;
    }
    if (!d->code)
        one[4] = drv_alloc_n(d, (size_t)(B * H * N), es, "the single-process LSE (--check)");
    if (!d->code)
        mref = drv_alloc_n(d, (size_t)(B * n * H * hd) + 1, sizeof(double), "the reference rows (--check)");
    if (!d->code)
        m1 = drv_alloc_n(d, (size_t)(B * n * H * hd) + 1, es, "the single-process rows (--check)");
    if (!d->code) {
        for (int i = 0; i < 4; i++) {
            size_t cnt = i == 1 || i == 2 ? NK : NQ;
            for (size_t e = 0; e < cnt; e++) {
                double v = input_value((uint64_t)seed, i, e);
                full[i][e] = a->dtype == ULY_F32 ? (double)(float)v : v;
                if (a->dtype == ULY_F32)
                    ((float *)in1[i])[e] = (float)v;
                else
                    ((double *)in1[i])[e] = v;
            }
        }
        uly_attn_desc a64 = *a;
        a64.dtype = ULY_F64;
        uly_kernel_opts ko;
        memset(&ko, 0, sizeof ko);
        ko.threads = threads;
        int st = uly_ref_fwd(&a64, full[0], full[1], full[2], ref[0], NULL);
        if (!st && backward)
            st = uly_ref_bwd(&a64, full[0], full[1], full[2], full[3], ref[1], ref[2], ref[3]);
        if (!st)
            st = uly_attn_fwd(a, &ko, in1[0], in1[1], in1[2], one[0], one[4]);
        if (!st && backward)
            st = uly_attn_bwd(a, &ko, in1[0], in1[1], in1[2], one[0], one[4], in1[3], one[1], one[2], one[3]);
        drv_lib(d, st, DRV_RUNTIME, "--check");
    }
    for (int i = 0; i < (backward ? 4 : 1) && !d->code; i++) {
        const int64_t Hx = i >= 2 ? Hkv : H;
        const size_t cnt = (size_t)(B * n * Hx * hd);
        take_rows(ref[i], mref, B, N, Hx * hd, ns, tb, tc);
        for (int64_t b = 0; b < B; b++) { /* the same rows of the one-process result */
            int64_t r0 = 0;
            for (int sg = 0; sg < ns; sg++) {
                memcpy(m1 + (size_t)((b * n + r0) * Hx * hd) * es,
                       (char *)one[i] + (size_t)((b * N + tb[sg]) * Hx * hd) * es, (size_t)(tc[sg] * Hx * hd) * es);
                r0 += tc[sg];
            }
        }
        *bitwise &= memcmp(m1, res[i], cnt * es) == 0;
        for (size_t e = 0; e < cnt; e++) {
            double g = a->dtype == ULY_F32 ? ((float *)res[i])[e] : ((double *)res[i])[e];
            double ae = fabs(g - mref[e]), re = ae / (fabs(mref[e]) > 1e-3 ? fabs(mref[e]) : 1e-3);
            if (!(ae <= err[i][0]))
                err[i][0] = ae;
            if (!(re <= err[i][1]))
                err[i][1] = re;
        }
    }
    for (int i = 0; i < 4; i++) {
        drv_free(full[i]); drv_free(ref[i]); drv_free(in1[i]); drv_free(one[i]);
    }
    drv_free(one[4]);
    drv_free(mref);
    drv_free(m1);
}

/* Bytes bench methods needs on a rank: the library's context (lib, from
 * drv_lib_memory: what uly_sp_create allocates), and the driver's own, an
 * upper estimate: the input and result shards and the --check tensors. */
static uint64_t methods_need(const uly_attn_desc *a, int P, int check, const drv_lib_mem *lib, char *why, size_t len)
{
    const double B = (double)a->batch, N = (double)a->seq, H = (double)a->heads, Hkv = (double)a->kv_heads,
                 d = (double)a->head_dim, es = (double)uly_dtype_size(a->dtype);
    const double n = ceil(N / P) + 2;
    const double shards = 2 * B * n * (2 * H + 2 * Hkv) * d * es;
    const double libb = (double)lib->heap + (double)lib->window;
    double chk = 0;
    if (check) {
        const double NQ = B * N * H * d, NK = B * N * Hkv * d;
        chk = (2 * NQ + 2 * NK) * 8 * 2 + (2 * NQ + 2 * NK) * es * 2 + B * H * N * es + B * n * H * d * (8 + es);
    }
    const double total = shards + libb + chk;
    char s1[32], s2[32], s3[32];
    snprintf(why, len, "shards %s, method buffers %s, --check %s",
             drv_bytes(s1, sizeof s1, shards >= 1.8e19 ? UINT64_MAX : (uint64_t)shards),
             drv_bytes(s2, sizeof s2, libb >= 1.8e19 ? UINT64_MAX : (uint64_t)libb),
             drv_bytes(s3, sizeof s3, chk >= 1.8e19 ? UINT64_MAX : (uint64_t)chk));
    return total >= 1.8e19 ? UINT64_MAX : (uint64_t)total;
}

/* Everything bench methods holds, freed in one place. */
typedef struct methods_run {
    int64_t *off;
    uly_sp *S;
    void *x[4], *res[4];
    double *tm;
} methods_run;

/* The phase times of a repetition (uly_sp_times), reduced over the ranks and
 * reported in this order, each by its field's name: the forward four, then
 * the backward four. */
#define SP_PHASES(X) X(fwd_in) X(fwd_attn) X(fwd_wait) X(fwd_out) X(bwd_in) X(bwd_attn) X(bwd_wait) X(bwd_out)
enum {
#define X(field) PH_##field,
    SP_PHASES(X)
#undef X
    NPHASE
};
static const char *const phase_key[NPHASE] = {
#define X(field) [PH_##field] = #field,
    SP_PHASES(X)
#undef X
};

static int bench_methods_run(drv *dr, methods_run *M, int argc, char **argv)
{
    int64_t batch = 1, seq = 4096, heads = 8, kv = 0, d = 64, window = 0, repeat = 3, threads = 1, seed = 1,
            udeg = 0;
    int method = 0, placement = 0, causal = 0, backward = 0, check = 0, json = 0, bf16 = 0, dtype = 0,
        seen_udeg = 0, seen_placement = 0, force = 0;
    const char *doc_lens = NULL, *method_s = NULL;
    static const char *const mnames[] = {"ulysses", "ring", "zigzag", "allgather", "usp", NULL};
    static const char *const pnames[] = {"ulysses-inner", "ring-inner", NULL};
    static const char *const dnames[] = {"f32", "f64", NULL};
    const arg_opt opts[] = {
        {"method", ARG_STR, &method_s, 0, 0, "M", "ulysses, ring, zigzag, allgather or usp (required; Megatron cp_comm_type names a2a, p2p, all_gather, a2a+p2p are aliases)", NULL, NULL},
        {"ulysses-degree", ARG_INT, &udeg, 1, 1 << 20, "U", "usp: ranks per all-to-all group (default: the largest divisor of P <= H)", NULL, &seen_udeg},
        {"placement", ARG_CHOICE, &placement, 0, 0, "P", "usp: ulysses-inner (groups are consecutive ranks, default) or ring-inner", pnames, &seen_placement},
        {"bf16-partials", ARG_FLAG, &bf16, 0, 0, NULL, "ring methods: keep the per-step partial outputs in bf16 (emulated)", NULL, NULL},
        {"batch", ARG_INT, &batch, 1, 1 << 20, "B", "batch (default 1)", NULL, NULL},
        {"seq", ARG_INT, &seq, 1, DRV_SEQ_MAX, "N", "sequence length (default 4096)", NULL, NULL},
        {"heads", ARG_INT, &heads, 1, 1 << 20, "H", "query heads (default 8)", NULL, NULL},
        {"kv-heads", ARG_INT, &kv, 1, 1 << 20, "Hkv", "key/value heads (default H)", NULL, NULL},
        {"head-dim", ARG_INT, &d, 1, 1 << 16, "d", "head dimension (default 64)", NULL, NULL},
        {"causal", ARG_FLAG, &causal, 0, 0, NULL, "causal mask", NULL, NULL},
        {"window", ARG_INT, &window, 1, DRV_SEQ_MAX, "W", "sliding window", NULL, NULL},
        {"doc-lens", ARG_STR, &doc_lens, 0, 0, "L1,L2,...", "packed documents of these lengths (every batch row; sum N)", NULL, NULL},
        {"dtype", ARG_CHOICE, &dtype, 0, 0, "T", "f32 (default) or f64", dnames, NULL},
        {"backward", ARG_FLAG, &backward, 0, 0, NULL, "also time the backward", NULL, NULL},
        {"check", ARG_FLAG, &check, 0, 0, NULL, "error vs the fp64 reference (and bitwise vs one process)", NULL, NULL},
        {"repeat", ARG_INT, &repeat, 1, 1000, "R", "timed repetitions after one warm-up (default 3)", NULL, NULL},
        {"threads", ARG_INT, &threads, 1, 1024, "T", "OpenMP threads per rank (default 1)", NULL, NULL},
        {"seed", ARG_INT, &seed, 0, INT64_MAX, "S", "seed of the random inputs (default 1)", NULL, NULL},
        {"json", ARG_FLAG, &json, 0, 0, NULL, "one JSON object", NULL, NULL},
        {"force", ARG_FLAG, &force, 0, 0, NULL, "run even when the memory preflight says it will not fit", NULL, NULL},
        {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    char msg[512] = "";
    int rc, ps = drv_parse(dr, argc, argv, opts);
    if (ps != DRV_PARSE_OK) {
        /* help or a parse error: recorded by drv_parse */
    } else if (!method_s) {
        drv_fail(dr, DRV_BADINPUT, "--method is required");
        ps = DRV_PARSE_ERROR;
    } else if (uly_method_parse(method_s, &method)) {
        drv_fail(dr, DRV_BADINPUT, "--method: %s", uly_last_error());
        ps = DRV_PARSE_ERROR;
    } else if ((seen_udeg || seen_placement) && method != ULY_METHOD_USP) {
        drv_fail(dr, DRV_BADINPUT, "%s applies to --method usp only", seen_udeg ? "--ulysses-degree" : "--placement");
        ps = DRV_PARSE_ERROR;
    }
    if (!kv)
        kv = heads;
    const drv_field f[] = {
        {"--method", DRV_F_CHOICE, method, NULL, 0, mnames}, {"--ulysses-degree", DRV_F_CHOICE, seen_udeg ? udeg : -1, NULL, 0, NULL},
        {"--placement", DRV_F_CHOICE, placement, NULL, 0, pnames}, {"--bf16-partials", DRV_F_FLAG, bf16, NULL, 0, NULL},
        {"--batch", DRV_F_INT, batch, NULL, 0, NULL}, {"--seq", DRV_F_INT, seq, NULL, 0, NULL},
        {"--heads", DRV_F_INT, heads, NULL, 0, NULL}, {"--kv-heads", DRV_F_INT, kv, NULL, 0, NULL},
        {"--head-dim", DRV_F_INT, d, NULL, 0, NULL}, {"--causal", DRV_F_FLAG, causal, NULL, 0, NULL},
        {"--window", DRV_F_INT, window, NULL, 0, NULL}, {"--doc-lens", DRV_F_STR, 0, doc_lens, 0, NULL},
        {"--dtype", DRV_F_CHOICE, dtype, NULL, 0, dnames}, {"--backward", DRV_F_FLAG, backward, NULL, 0, NULL},
        {"--check", DRV_F_FLAG, check, NULL, 0, NULL}, {"--repeat", DRV_F_INT, repeat, NULL, 0, NULL},
        {"--threads", DRV_F_INT, threads, NULL, 0, NULL}, {"--seed", DRV_F_INT, seed, NULL, 0, NULL},
        {"--json", DRV_F_FLAG, json, NULL, 0, NULL}, {"--force", DRV_F_FLAG, force, NULL, 0, NULL},
    };
    rc = drv_agree(dr, ps, f, (int)(sizeof f / sizeof f[0]));
    if (rc == DRV_AGREE_HELP) {
        if (dr->rank == 0)
            args_usage(stdout, "ulysses", "bench methods --method M [options]   (under mpirun -np P)", opts);
        return 0;
    }
    if (rc)
        return rc;
    const int rank = dr->rank, P = dr->size;
    int64_t docs = 0;
    if (doc_lens && doc_lens_offsets(doc_lens, batch, seq, &M->off, &docs, msg, sizeof msg))
        drv_fail(dr, DRV_BADINPUT, "%s", msg); /* the same text on every rank: the same verdict */
    if ((rc = drv_sync(dr)))
        return rc;
    if (method == ULY_METHOD_USP && !udeg) {
        udeg = uly_plan_usp_degree(heads, P);
        if (rank == 0 && !json)
            printf("usp: ulysses degree %lld chosen (largest divisor of %d ranks <= %lld heads)\n", (long long)udeg, P,
                   (long long)heads);
    }
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = batch; a.seq = seq; a.heads = heads; a.kv_heads = kv; a.head_dim = d;
    a.causal = causal; a.window = window; a.dtype = dtype ? ULY_F64 : ULY_F32;
    a.doc_offsets = M->off; a.docs = docs;
    uly_sp_opts so;
    memset(&so, 0, sizeof so);
    so.method = method;
    so.ulysses_degree = (int)udeg;
    so.placement = placement;
    so.bf16_partials = bf16;
    so.dist.kernel.threads = (int)threads;
    char why[160];
    int node_ranks = 1;
    if (dr->node != MPI_COMM_NULL)
        drv_mpi(dr, MPI_Comm_size(dr->node, &node_ranks), "MPI_Comm_size (node)");
    drv_lib_mem lib;
    /* options the create refuses count nothing here: it says why */
    if (drv_lib_memory(&a, &so, P, rank, node_ranks == P, &lib))
        memset(&lib, 0, sizeof lib);
    const uint64_t need = methods_need(&a, P, check, &lib, why, sizeof why);
    drv_preflight(dr, need, lib.mapped, why, force);
    if ((rc = drv_sync(dr)))
        return rc;
    drv_sp_create(dr, &a, &so, &lib, &M->S); /* collective, agreed inside */
    if ((rc = drv_sync(dr)))
        return rc;
    uly_sp_plan plan;
    uly_sp_get_plan(M->S, &plan);
    int64_t tb[2], tc[2];
    int ns = uly_sp_tokens(M->S, tb, tc);
    const int64_t n = tc[0] + (ns > 1 ? tc[1] : 0);
    const size_t es = uly_dtype_size(a.dtype), nq = (size_t)(batch * n * heads * d), nk = (size_t)(batch * n * kv * d);
    for (int i = 0; i < 4 && !dr->code; i++) {
        M->x[i] = drv_alloc_n(dr, (i == 1 || i == 2 ? nk : nq) + 1, es, "an input shard");
        M->res[i] = M->x[i] ? drv_alloc_n(dr, (i >= 2 ? nk : nq) + 1, es, "a result shard") : NULL;
        if (!M->res[i])
            break;
        /* the rank's rows, segment by segment, from the P-independent inputs */
        const int64_t Hx = i == 1 || i == 2 ? kv : heads;
        for (int64_t b = 0; b < batch; b++) {
            int64_t r0 = 0;
            for (int sgi = 0; sgi < ns; sgi++) {
                fill_shard((char *)M->x[i] + (size_t)((b * n + r0) * Hx * d) * es, a.dtype, (uint64_t)seed, i, 1, seq,
                           b * seq + tb[sgi], tc[sgi], Hx, d);
                r0 += tc[sgi];
            }
        }
    }
    if (!dr->code)
        M->tm = drv_alloc_n(dr, (size_t)repeat * NPHASE, sizeof *M->tm, "the phase times");
    if ((rc = drv_sync(dr)))
        return rc;
    /* phases: fwd in, attn, wait, out; bwd in, attn, wait, out */
    double att[2] = {0, 0};
    int lst = 0;
    for (int64_t it = -1; it < repeat && !lst; it++) {
        if (drv_mpi(dr, MPI_Barrier(dr->comm), "MPI_Barrier"))
            return drv_sync(dr);
        uly_sp_reset_volume(M->S);
        lst = uly_sp_fwd(M->S, M->x[0], M->x[1], M->x[2], M->res[0]);
        if (!lst && backward)
            lst = uly_sp_bwd(M->S, M->x[3], M->res[1], M->res[2], M->res[3]);
        if (lst) /* the library agreed on the failure: every rank leaves here */
            break;
        uly_sp_times t;
        uly_sp_times_get(M->S, &t);
        double loc[NPHASE] = {
#define X(field) [PH_##field] = t.field,
            SP_PHASES(X)
#undef X
        }, mx[NPHASE];
        if (drv_mpi(dr, MPI_Allreduce(loc, mx, NPHASE, MPI_DOUBLE, MPI_MAX, dr->comm), "MPI_Allreduce (times)"))
            return drv_sync(dr);
        if (it >= 0) {
            for (int c = 0; c < NPHASE; c++)
                M->tm[(size_t)c * (size_t)repeat + (size_t)it] = mx[c];
            att[0] += t.fwd_attn;
            att[1] += t.bwd_attn;
        }
    }
    drv_lib(dr, lst, 0, NULL);
    if ((rc = drv_sync(dr)))
        return rc;
    /* bytes of the last repetition vs the plan, every rank */
    uly_volume got, want;
    uly_sp_volume(M->S, &got);
    uly_plan_method_volume(&a, &plan, rank, &want);
    if (!backward) /* the plan counts forward + backward */
        for (int w = 0; w < ULY_VOL_COUNT; w++)
            if (uly_vol_backward(w))
                want.sent[w] = want.recv[w] = 0;
    int bytes_ok = memcmp(&got, &want, sizeof got) == 0, all_ok = 0;
    uint64_t sums[2][ULY_VOL_COUNT], gsum[2][ULY_VOL_COUNT];
    for (int w = 0; w < ULY_VOL_COUNT; w++) {
        sums[0][w] = got.sent[w];
        sums[1][w] = want.sent[w];
    }
    /* causal work per rank from the plan: this method and the two ring layouts */
    double work[3] = {0, 0, 0};
    uly_sp_plan alt[2];
    uly_sp_plan_init(&alt[0], ULY_METHOD_RING, P, 0, 0);
    uly_sp_plan_init(&alt[1], ULY_METHOD_ZIGZAG, P, 0, 0);
    int64_t hb, hc;
    uly_plan_heads(&plan, heads, rank, &hb, &hc);
    for (int t = 0; t < uly_plan_steps(&plan); t++)
        work[0] += uly_plan_step_pairs(&a, &plan, rank, t) * (double)hc;
    for (int k = 0; k < 2; k++)
        for (int t = 0; t < P; t++)
            work[1 + k] += uly_plan_step_pairs(&a, &alt[k], rank, t);
    double wmax[3], wsum[3], amax[2], asum[2];
    if (drv_mpi(dr, MPI_Allreduce(&bytes_ok, &all_ok, 1, MPI_INT, MPI_MIN, dr->comm), "MPI_Allreduce (bytes)") ||
        drv_mpi(dr, MPI_Reduce(sums, gsum, 2 * ULY_VOL_COUNT, MPI_UINT64_T, MPI_MAX, 0, dr->comm), "MPI_Reduce (bytes)") ||
        drv_mpi(dr, MPI_Allreduce(work, wmax, 3, MPI_DOUBLE, MPI_MAX, dr->comm), "MPI_Allreduce (work)") ||
        drv_mpi(dr, MPI_Allreduce(work, wsum, 3, MPI_DOUBLE, MPI_SUM, dr->comm), "MPI_Allreduce (work)") ||
        drv_mpi(dr, MPI_Allreduce(att, amax, 2, MPI_DOUBLE, MPI_MAX, dr->comm), "MPI_Allreduce (times)") ||
        drv_mpi(dr, MPI_Allreduce(att, asum, 2, MPI_DOUBLE, MPI_SUM, dr->comm), "MPI_Allreduce (times)"))
        return drv_sync(dr);
    /* --check: every rank compares its rows with the fp64 reference (and with
     * the single-process blocked kernel, bitwise) */
    double err[4][2] = {{0}}, gerr[4][2];
    int bitwise = 1, gbit = 1;
    if (check)
        methods_check(dr, &a, seed, (int)threads, backward, ns, tb, tc, M->res, err, &bitwise);
    if ((rc = drv_sync(dr)))
        return rc;
    if (drv_mpi(dr, MPI_Reduce(err, gerr, 8, MPI_DOUBLE, MPI_MAX, 0, dr->comm), "MPI_Reduce (errors)") ||
        drv_mpi(dr, MPI_Allreduce(&bitwise, &gbit, 1, MPI_INT, MPI_MIN, dr->comm), "MPI_Allreduce (bitwise)"))
        return drv_sync(dr);
    if (rank == 0) {
        stats st[NPHASE];
        for (int c = 0; c < NPHASE; c++)
            st[c] = stats_of(M->tm + (size_t)c * (size_t)repeat, (size_t)repeat);
        static const char *const ph[PH_bwd_in] = {"comm in", "attention", "ring wait", "comm out"}; /* = PH_fwd_* */
        const double imb = wmax[0] / (wsum[0] / P), imb_ring = wmax[1] / (wsum[1] / P),
                     imb_zz = wmax[2] / (wsum[2] / P);
        if (json) { /* through jansson: a number that is not finite is null plus a flag */
            json_t *root = json_object();
            int bad = !root;
            char k[64];
            if (!bad) {
                bad |= uly_json_set_str(root, "bench", "methods") | uly_json_set_str(root, "method", uly_method_name(method));
                bad |= uly_json_set_int(root, "ranks", P) | uly_json_set_int(root, "ulysses_degree", plan.U) |
                       uly_json_set_int(root, "ring_degree", plan.R);
                bad |= uly_json_set_str(root, "placement", uly_placement_name(plan.placement));
                bad |= uly_json_set_int(root, "batch", batch) | uly_json_set_int(root, "seq", seq) |
                       uly_json_set_int(root, "heads", heads) | uly_json_set_int(root, "kv_heads", kv) |
                       uly_json_set_int(root, "head_dim", d);
                bad |= uly_json_set_int(root, "causal", causal) | uly_json_set_int(root, "window", window) |
                       uly_json_set_int(root, "docs", docs) | uly_json_set_int(root, "bf16_partials", bf16);
            }
            for (int c = 0; c < (backward ? NPHASE : PH_bwd_in) && !bad; c++) {
                snprintf(k, sizeof k, "%s_ms", phase_key[c]);
                bad |= uly_json_set_fixed(root, k, 1e3 * st[c].median, 4);
            }
            if (!bad)
                bad |= uly_json_set_fixed(root, "work_imbalance", imb, 4) |
                       uly_json_set_fixed(root, "ring_work_imbalance", imb_ring, 4) |
                       uly_json_set_fixed(root, "zigzag_work_imbalance", imb_zz, 4) |
                       uly_json_set_bool(root, "bytes_match_plan", all_ok);
            for (int w = 0; w < ULY_VOL_COUNT && !bad; w++)
                if (gsum[1][w] || gsum[0][w]) {
                    snprintf(k, sizeof k, "%s_bytes_max_rank", uly_vol_name(w));
                    bad |= uly_json_set_int(root, k, (int64_t)gsum[0][w]);
                }
            if (check) {
                static const char *const rn[4] = {"o", "dq", "dk", "dv"};
                for (int i = 0; i < (backward ? 4 : 1) && !bad; i++) {
                    snprintf(k, sizeof k, "%s_max_abs_err", rn[i]);
                    bad |= uly_json_set_real(root, k, gerr[i][0]);
                    snprintf(k, sizeof k, "%s_max_rel_err", rn[i]);
                    bad |= uly_json_set_real(root, k, gerr[i][1]);
                }
                if (!bad)
                    bad |= uly_json_set_bool(root, "bitwise_one_process", gbit);
            }
            if (uly_json_emit(stdout, root, bad, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15)))
                drv_fail(dr, DRV_RUNTIME, "cannot write the JSON report (out of memory or write error)");
        } else {
            printf("bench methods: %s on %d ranks (U=%d x R=%d%s%s), B=%lld N=%lld H=%lld Hkv=%lld d=%lld%s%s",
                   uly_method_name(method), P, plan.U, plan.R, plan.U > 1 && plan.R > 1 ? ", " : "",
                   plan.U > 1 && plan.R > 1 ? uly_placement_name(plan.placement) : "", (long long)batch, (long long)seq,
                   (long long)heads, (long long)kv, (long long)d, causal ? " causal" : "", window ? " window" : "");
            if (docs)
                printf(" %lld documents", (long long)docs);
            printf(", %s%s, %lld repetitions (medians of the slowest rank per phase)\n", dtype ? "f64" : "f32",
                   bf16 ? ", bf16 partials" : "", (long long)repeat);
            printf("%-10s %10s %10s\n", "phase", "fwd ms", backward ? "bwd ms" : "");
            for (int c = PH_fwd_in; c < PH_bwd_in; c++) {
                printf("%-10s %10.3f", ph[c], 1e3 * st[c].median);
                if (backward)
                    printf(" %10.3f", 1e3 * st[PH_bwd_in + c].median);
                printf("\n");
            }
            printf("attention time per rank, max/mean: fwd %.3f%s", amax[0] / (asum[0] / P), backward ? "" : "\n");
            if (backward)
                printf(", bwd %.3f\n", amax[1] / (asum[1] / P));
            printf("causal work per rank (plan), max/mean: %.3f; the ring layouts: contiguous %.3f, zigzag %.3f\n", imb,
                   imb_ring, imb_zz);
            printf("bytes (largest rank)  %-8s %14s %14s\n", "call", "measured", "plan");
            for (int w = 0; w < ULY_VOL_COUNT; w++)
                if (gsum[1][w] || gsum[0][w])
                    printf("%21s %-8s %14llu %14llu\n", "", uly_vol_name(w), (unsigned long long)gsum[0][w],
                           (unsigned long long)gsum[1][w]);
            printf("measured bytes == plan on every rank and call: %s\n", all_ok ? "yes" : "NO");
            if (check) {
                static const char *const rn[4] = {"O", "dQ", "dK", "dV"};
                printf("vs fp64 reference, max |err| (max rel, |ref| >= 1e-3):");
                for (int i = 0; i < (backward ? 4 : 1); i++)
                    printf(" %s %.3g (%.3g)", rn[i], gerr[i][0], gerr[i][1]);
                printf("\nbitwise equal to one process: %s%s\n", gbit ? "yes" : "no",
                       gbit || (method != ULY_METHOD_ULYSSES && plan.R > 1) ? "" : "  <-- expected for this method");
            }
        }
        fflush(stdout);
    }
    if (!all_ok)
        drv_fail(dr, DRV_RUNTIME, "the bytes moved differ from the plan on some rank (see the table)");
    else if (check && method == ULY_METHOD_ULYSSES && !gbit)
        drv_fail(dr, DRV_RUNTIME, "ulysses is not bitwise equal to one process");
    return drv_sync(dr);
}

static int bench_methods(int argc, char **argv)
{
    drv d;
    if (drv_open(&d, "ulysses bench methods"))
        return DRV_RUNTIME;
    methods_run M;
    memset(&M, 0, sizeof M);
    int code = bench_methods_run(&d, &M, argc, argv);
    for (int i = 0; i < 4; i++) {
        drv_free(M.x[i]);
        drv_free(M.res[i]);
    }
    drv_free(M.tm);
    uly_sp_free(M.S);
    uly_free(M.off);
    return drv_close(&d, code);
}

int cmd_bench(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        FILE *f = argc < 2 ? stderr : stdout;
        fprintf(f, "usage: ulysses bench <kernel|memory|a2a|methods> [options]\n"
                   "  kernel   attention forward and fwd+bwd GFLOP/s next to sgemm GFLOP/s (same run)\n"
                   "  memory   peak resident size of an attention run next to its tensor bytes\n"
                   "  a2a      Ulysses all-to-all next to raw MPI_Alltoall, ring hop next to MPI_Sendrecv (mpirun)\n"
                   "  methods  one method (--method ulysses|ring|zigzag|allgather|usp): time per phase, bytes vs plan,\n"
                   "           causal imbalance, --check errors vs fp64 (run under mpirun)\n"
                   "Each takes --json and --help.  The columns of their tables are defined in\n"
                   "doc/glossary.md and doc/performance.md.\n");
        return argc < 2 ? ULY_EXIT_BADINPUT : 0;
    }
    if (strcmp(argv[1], "kernel") == 0)
        return bench_kernel(argc - 1, argv + 1);
    if (strcmp(argv[1], "memory") == 0)
        return bench_memory(argc - 1, argv + 1);
    if (strcmp(argv[1], "a2a") == 0)
        return bench_a2a(argc - 1, argv + 1);
    if (strcmp(argv[1], "methods") == 0)
        return bench_methods(argc - 1, argv + 1);
    fprintf(stderr, "ulysses bench: unknown benchmark '%s' (kernel, memory, a2a or methods)\n", argv[1]);
    return ULY_EXIT_BADINPUT;
}
