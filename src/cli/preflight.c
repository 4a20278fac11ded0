/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preflight.c -- memory checked before it is touched, and OpenBLAS made to
 * allocate its buffers before the first collective (see drv.h).
 *
 * What a process can get is the smallest of:
 *   RLIMIT_AS minus the address space in use (VmSize),
 *   RLIMIT_DATA minus the data segment in use (VmData),
 *   the cgroup v2 memory.max minus memory.current, for this cgroup and every
 *   ancestor (the tightest wins),
 *   MemAvailable of /proc/meminfo.
 * The rlimits are per process; the cgroup and MemAvailable are shared by
 * the ranks of a node (MPI_Comm_split_type SHARED), which are compared with
 * the sum of their needs.
 * Under overcommit every malloc succeeds and the kernel's OOM killer ends the
 * job (or someone else's) later; comparing first turns that into a message.
 */
#define _GNU_SOURCE
#include <cblas.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "base/base.h"
#include "drv.h"

/* A "Key:   123 kB" line of a /proc file, in bytes; 0 when absent. */
/* One number from a cgroup file; "max" or unreadable gives UINT64_MAX. */
static uint64_t cg_value(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return UINT64_MAX;
    char buf[64] = "";
    uint64_t v = UINT64_MAX;
    if (fgets(buf, sizeof buf, f) && strncmp(buf, "max", 3) != 0) {
        unsigned long long x;
        if (sscanf(buf, "%llu", &x) == 1)
            v = (uint64_t)x;
    }
    fclose(f);
    return v;
}

/* Tightest memory.max - memory.current over this cgroup and its ancestors. */
static uint64_t cgroup_left(void)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return UINT64_MAX;
    char line[4096], rel[4096] = "";
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "0::", 3) == 0) {
            snprintf(rel, sizeof rel, "%s", line + 3);
            rel[strcspn(rel, "\n")] = '\0';
            break;
        }
    fclose(f);
    if (!rel[0])
        return UINT64_MAX;
    uint64_t best = UINT64_MAX;
    char dir[4200];
    for (;;) {
        snprintf(dir, sizeof dir, "/sys/fs/cgroup%s", strcmp(rel, "/") == 0 ? "" : rel);
        uint64_t mx = cg_value(dir, "memory.max"), cur = cg_value(dir, "memory.current");
        if (mx != UINT64_MAX) {
            uint64_t left = cur == UINT64_MAX ? mx : (mx > cur ? mx - cur : 0);
            if (left < best)
                best = left;
        }
        char *slash = strrchr(rel, '/');
        if (!slash || strcmp(rel, "/") == 0)
            break;
        if (slash == rel)
            snprintf(rel, sizeof rel, "/");
        else
            *slash = '\0';
    }
    return best;
}

void drv_mem_probe(drv_mem *m)
{
    memset(m, 0, sizeof *m);
    m->as_left = uly_rlimit_left(RLIMIT_AS, uly_proc_kb("/proc/self/status", "VmSize"));
    m->data_left = uly_rlimit_left(RLIMIT_DATA, uly_proc_kb("/proc/self/status", "VmData"));
    m->cgroup_left = cgroup_left();
    uint64_t ma = uly_proc_kb("/proc/meminfo", "MemAvailable");
    /* test aid (doc/reliability.md): pretend the node has this much available */
    const char *fake = getenv("ULYSSES_TEST_MEM_AVAILABLE");
    int64_t fv;
    if (fake && *fake && uly_parse_int(fake, &fv) == 0 && fv > 0)
        ma = (uint64_t)fv;
    m->mem_available = ma ? ma : UINT64_MAX;
    m->avail = UINT64_MAX;
    m->limit = "none";
    const uint64_t v[4] = {m->as_left, m->data_left, m->cgroup_left, m->mem_available};
    static const char *const name[4] = {"RLIMIT_AS (ulimit -v) minus the address space in use",
                                        "RLIMIT_DATA (ulimit -d) minus the data in use",
                                        "cgroup memory.max minus memory.current", "MemAvailable"};
    for (int i = 0; i < 4; i++)
        if (v[i] < m->avail) {
            m->avail = v[i];
            m->limit = name[i];
        }
}

/* Ranks sharing this node's memory and what they need together
 * (collective over d->node; 1 and need when there is no node communicator). */
static int node_need(drv *d, uint64_t need, uint64_t *sum, int *ranks)
{
    *sum = need;
    *ranks = 1;
    if (d->node == MPI_COMM_NULL)
        return 0;
    int e = MPI_Comm_size(d->node, ranks);
    if (e == MPI_SUCCESS && *ranks > 1) {
        /* saturating sum: needs are below 2^64 / ranks in any real run, but a
         * --seq typo must not wrap around */
        uint64_t mine = need > UINT64_MAX / (uint64_t)*ranks ? UINT64_MAX / (uint64_t)*ranks : need;
        e = MPI_Allreduce(&mine, sum, 1, MPI_UINT64_T, MPI_SUM, d->node);
    }
    return drv_mpi(d, e, "summing the memory needs of the ranks on this node");
}

int drv_preflight(drv *d, uint64_t need, uint64_t mapped, const char *breakdown, int force)
{
    uint64_t sum;
    int ranks;
    if (node_need(d, need, &sum, &ranks))
        return d->code;
    drv_mem m;
    drv_mem_probe(&m);
    /* per process: the rlimits (the address space with what it maps of
     * other ranks); per node (shared by its ranks): cgroup and MemAvailable */
    const uint64_t as_need = need > UINT64_MAX - mapped ? UINT64_MAX : need + mapped;
    const int over_as = as_need > m.as_left, over_data = need > m.data_left;
    const uint64_t proc_need = over_as || !over_data ? as_need : need;
    const uint64_t proc_avail = over_as || !over_data ? m.as_left : m.data_left;
    const uint64_t node_avail = m.cgroup_left < m.mem_available ? m.cgroup_left : m.mem_available;
    const char *proc_limit = over_as || !over_data ? "RLIMIT_AS (ulimit -v) minus the address space in use"
                                                   : "RLIMIT_DATA (ulimit -d) minus the data in use";
    const char *node_limit = m.cgroup_left < m.mem_available ? "cgroup memory.max minus memory.current"
                                                             : "MemAvailable";
    char a[32], b[32], c[32];
    drv_bytes(a, sizeof a, need);
    if (over_as || over_data) {
        drv_bytes(a, sizeof a, proc_need);
        drv_bytes(b, sizeof b, proc_avail);
        if (force) {
            fprintf(stderr, "%s: rank %d: warning: this run needs about %s (%s) but the process can get %s (%s); "
                            "continuing because of --force\n", d->cmd, d->rank, a, breakdown, b, proc_limit);
            return 0;
        }
        return drv_fail(d, DRV_BADINPUT,
                        "not enough memory: this run needs about %s on rank %d (%s) but the process can get %s "
                        "(%s); use smaller sizes or more ranks, or --force to try anyway",
                        a, d->rank, breakdown, b, proc_limit);
    }
    drv_bytes(a, sizeof a, need);
    if (sum > node_avail) {
        drv_bytes(b, sizeof b, node_avail);
        drv_bytes(c, sizeof c, sum);
        char who[96];
        if (ranks > 1)
            snprintf(who, sizeof who, "the %d ranks on rank %d's node need about %s together", ranks, d->rank, c);
        else
            snprintf(who, sizeof who, "this run needs about %s on rank %d", c, d->rank);
        if (force) {
            fprintf(stderr, "%s: rank %d: warning: %s (this rank %s: %s) but the node has %s (%s); continuing "
                            "because of --force\n", d->cmd, d->rank, who, a, breakdown, b, node_limit);
            return 0;
        }
        return drv_fail(d, DRV_BADINPUT,
                        "not enough memory: %s (rank %d: %s: %s) but the node has %s (%s); use smaller sizes, "
                        "more nodes, or --force to try anyway",
                        who, d->rank, a, breakdown, b, node_limit);
    }
    return 0;
}

/* ------------------------------------------------ the library's memory */

/* Test hooks of the library (exported, not in the public header): the
 * bytes its allocation hooks were asked for since the last call, and the
 * window segment of a Ulysses context. */
uint64_t uly_test_alloc_bytes(void);
uint64_t uly_test_dist_window(const uly_dist *D);

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

int drv_lib_memory(const uly_attn_desc *a, const uly_sp_opts *o, int P, int rank, int one_node, drv_lib_mem *m)
{
    memset(m, 0, sizeof *m);
    uly_sp_opts x = *o;
    if (!one_node && x.dist.a2a_mode == ULY_A2A_AUTO)
        x.dist.a2a_mode = ULY_A2A_PACK;
    uly_bufs t = {0};
    int st = uly_sp_memory(a, &x, P, rank, &t);
    if (st)
        return st;
    m->heap = uly_bufs_sum(&t, ULY_BUF_HEAP);
    m->window = uly_bufs_sum(&t, ULY_BUF_WINDOW);
    if (!m->window || x.dist.a2a_mode == ULY_A2A_AUTO)
        return ULY_OK;
    /* the window spans this rank's all-to-all group: the U ranks of its ring position */
    uly_sp_plan p;
    if ((st = uly_sp_plan_init(&p, x.method, P, x.method == ULY_METHOD_USP ? x.ulysses_degree : 0, x.placement)))
        return st;
    int u, j;
    uly_plan_grid(&p, rank, &u, &j);
    for (int s = 0; s < p.U; s++) {
        if (s == u)
            continue;
        uly_bufs q = {0};
        if ((st = uly_sp_memory(a, &x, P, uly_plan_grid_rank(&p, s, j), &q)))
            return st;
        m->mapped = sat_add(m->mapped, uly_bufs_sum(&q, ULY_BUF_WINDOW));
        m->mapped_segments++;
    }
    return ULY_OK;
}

int drv_sp_create(drv *d, const uly_attn_desc *a, const uly_sp_opts *o, const drv_lib_mem *m, uly_sp **S)
{
    const char *env = getenv("ULYSSES_MEMORY_REPORT");
    const int report = env && strcmp(env, "1") == 0;
    if (report)
        (void)uly_test_alloc_bytes(); /* reading resets it */
    int st = uly_sp_create(d->comm, a, o, S);
    const uint64_t got = report ? uly_test_alloc_bytes() : 0;
    if (report && st == ULY_OK) {
        const uly_dist *D = uly_sp_dist(*S);
        fprintf(stderr, "%s: rank %d: memory report: library heap: preflight %" PRIu64 ", created %" PRIu64
                        "; window: preflight %" PRIu64 ", created %" PRIu64 "\n",
                d->cmd, d->rank, m->heap, got, m->window, D ? uly_test_dist_window(D) : 0);
    }
    return drv_lib(d, st, 0, NULL);
}

/* ------------------------------------------------------------ BLAS warm-up */

struct warm {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int threads, done;
};

static void *warm_main(void *arg)
{
    struct warm *w = arg;
    enum { n = 64 };
#ifdef _OPENMP
#pragma omp parallel num_threads(w->threads)
#endif
    {
        float a[n * n], b[n * n], c[n * n];
        for (int i = 0; i < n * n; i++) {
            a[i] = (float)(i % 7) * 0.125f;
            b[i] = (float)(i % 5) * 0.25f;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double x[n * n], y[n * n], z[n * n];
        for (int i = 0; i < n * n; i++)
            x[i] = y[i] = (double)a[i];
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0, x, n, y, n, 0.0, z, n);
    }
    pthread_mutex_lock(&w->mu);
    w->done = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int drv_threads(int requested)
{
    int t = requested;
#ifdef _OPENMP
    if (t < 1)
        t = omp_get_max_threads();
#endif
    return t < 1 ? 1 : t;
}

int drv_blas_warmup(drv *d, int threads)
{
    threads = drv_threads(threads);
    /* static: a thread that never returns keeps using it */
    static struct warm w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    w.threads = threads;
    w.done = 0;
    pthread_attr_t at;
    pthread_t th;
    if (pthread_attr_init(&at) != 0)
        return drv_fail(d, DRV_RUNTIME, "cannot start the BLAS warm-up thread");
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 1 << 20);
    int e = pthread_create(&th, &at, warm_main, &w);
    pthread_attr_destroy(&at);
    if (e != 0)
        return drv_fail(d, DRV_RUNTIME, "out of memory: cannot start the BLAS warm-up thread: %s", strerror(e));
    /* ULYSSES_BLAS_WARMUP_SECONDS overrides the patience (slow machines, tests) */
    long secs = DRV_WARMUP_SECONDS;
    const char *env = getenv("ULYSSES_BLAS_WARMUP_SECONDS");
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == '\0' && v >= 1 && v <= 3600)
            secs = v;
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += secs;
    pthread_mutex_lock(&w.mu);
    while (!w.done && e != ETIMEDOUT)
        e = pthread_cond_timedwait(&w.cv, &w.mu, &until);
    int done = w.done;
    pthread_mutex_unlock(&w.mu);
    if (done)
        return 0;
    d->blas_stuck = 1;
    drv_mem m;
    drv_mem_probe(&m);
    char b[32];
    return drv_fail(d, DRV_RUNTIME,
                    "out of memory: OpenBLAS did not finish a 64x64 warm-up GEMM on %d thread%s within %ld s "
                    "(it retries a failed buffer allocation forever); the process can get %s more (%s)",
                    threads, threads > 1 ? "s" : "", secs, drv_bytes(b, sizeof b, m.avail), m.limit);
}
