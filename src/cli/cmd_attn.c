/*
 * cmd_attn.c -- `ulysses attn`: attention on P MPI ranks (P = 1 without
 * mpirun).  Inputs are random (seeded, independent of P) or read from .npy
 * files; every rank holds its sequence shard; the Ulysses all-to-alls move
 * them.  Rank 0 prints phase times (min/median/max over ranks and
 * repetitions), bytes per rank measured and expected, GFLOP/s, and with
 * --check the error against the fp64 reference and whether the result is
 * bitwise equal to one process.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "args.h"
#include "cli.h"
#include "timing.h"
#include "ulysses_dist.h"

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

struct attn_cfg {
    int64_t batch, seq, heads, kv_heads, head_dim, window, seed, threads, repeat;
    int64_t block_q, block_k, max_count, warmup;
    int causal, backward, check, json, allow_nonfinite, dtype, a2a;
    const char *fq, *fk, *fv, *fout, *fdout, *fdq, *fdk, *fdv;
    int seen_batch, seen_seq, seen_heads, seen_kv, seen_dim, seen_dtype;
};

static const char *const dtype_names[] = {"f32", "f64", NULL};
static const char *const a2a_names[] = {"auto", "pack", "datatype", NULL};

static const char synopsis[] =
    "attn [--batch B] [--seq N] [--heads H] [--kv-heads Hkv] [--head-dim d]\n"
    "            [--causal] [--window W] [--backward] [--check] [--seed S] [--threads T]\n"
    "            [--repeat R] [--warmup W] [--dtype f32|f64] [--q F.npy --k F.npy --v F.npy] [--out F.npy]\n"
    "            [--dout F.npy --dq F.npy --dk F.npy --dv F.npy] [--json]\n"
    "Run under 'mpirun -np P' for P ranks; each rank holds a contiguous sequence shard.";

/* Message from the lowest failing rank, printed once; returns the common exit status. */
static int agree_fail(int rank, int local_exit, const char *msg)
{
    int enc = local_exit ? rank : 1 << 30, first;
    MPI_Allreduce(&enc, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == 1 << 30)
        return 0;
    int code = local_exit;
    MPI_Bcast(&code, 1, MPI_INT, first, MPI_COMM_WORLD);
    if (rank == first)
        fprintf(stderr, "ulysses attn: %s\n", msg);
    return code;
}

/* ---------------------------------------------------------------- inputs */

typedef struct tensor_in {
    uly_npy npy;
    int loaded;
} tensor_in;

/* Load one .npy and take (B, N, Hx, d) from its shape. */
static int load_tensor(const char *path, const char *what, tensor_in *t, int64_t shape[4], char *msg,
                       size_t len)
{
    int rc = uly_npy_read(path, &t->npy);
    if (rc) {
        snprintf(msg, len, "--%s %s: %s", what, path, uly_last_error());
        return EXIT_BADINPUT;
    }
    t->loaded = 1;
    if (t->npy.ndim == 3) {
        shape[0] = 1;
        memcpy(shape + 1, t->npy.shape, 3 * sizeof(int64_t));
    } else if (t->npy.ndim == 4) {
        memcpy(shape, t->npy.shape, 4 * sizeof(int64_t));
    } else {
        snprintf(msg, len, "--%s %s: expected shape (B, N, H, d) or (N, H, d), got %d dimensions", what,
                 path, t->npy.ndim);
        return EXIT_BADINPUT;
    }
    for (int i = 0; i < 4; i++)
        if (shape[i] < 1) {
            snprintf(msg, len, "--%s %s: every dimension must be >= 1 (dimension %d is %lld)", what, path,
                     i, (long long)shape[i]);
            return EXIT_BADINPUT;
        }
    return 0;
}

static int check_finite(const tensor_in *t, const char *what, const char *path, char *msg, size_t len)
{
    for (size_t i = 0; i < t->npy.count; i++) {
        double v = t->npy.dtype == ULY_F32 ? ((const float *)t->npy.data)[i] : ((const double *)t->npy.data)[i];
        if (!isfinite(v)) {
            snprintf(msg, len, "--%s %s: element %zu is %s (use --allow-nonfinite to run anyway)", what, path,
                     i, isnan(v) ? "NaN" : "Inf");
            return EXIT_BADINPUT;
        }
    }
    return 0;
}

/* Copy tokens [t0, t0+n) of a loaded (B, N, Hx, d) tensor into a shard of dtype t. */
static void shard_from(const tensor_in *ti, void *dst, uly_dtype t, int64_t B, int64_t N, int64_t t0,
                       int64_t n, int64_t row)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t e = 0; e < n * row; e++) {
            size_t src = (size_t)((b * N + t0) * row + e), di = (size_t)(b * n * row + e);
            double v = ti->npy.dtype == ULY_F32 ? ((const float *)ti->npy.data)[src]
                                                : ((const double *)ti->npy.data)[src];
            if (t == ULY_F32)
                ((float *)dst)[di] = (float)v;
            else
                ((double *)dst)[di] = v;
        }
}

/* ---------------------------------------------------------------- gather */

/* Gather token shards (B, n_r, Hx, d) of every rank into full (B, N, Hx, d) on rank 0. */
static void gather_tokens(const void *shard, void *full, const uly_attn_desc *a, int64_t Hx, int rank, int P)
{
    const size_t es = uly_dtype_size(a->dtype), row = (size_t)(Hx * a->head_dim) * es;
    const size_t chunk = (size_t)1 << 30;
    for (int r = 0; r < P; r++) {
        int64_t t0, n;
        uly_split(a->seq, P, r, &t0, &n);
        for (int64_t b = 0; b < a->batch; b++) {
            size_t bytes = (size_t)n * row;
            const char *src = (const char *)shard + (size_t)(b * n) * row;
            char *dst = full ? (char *)full + (size_t)(b * a->seq + t0) * row : NULL;
            for (size_t off = 0; off < bytes; off += chunk) {
                int cnt = (int)(bytes - off < chunk ? bytes - off : chunk);
                if (r == 0 && rank == 0)
                    memcpy(dst + off, src + off, (size_t)cnt);
                else if (rank == r)
                    MPI_Send(src + off, cnt, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
                else if (rank == 0)
                    MPI_Recv(dst + off, cnt, MPI_BYTE, r, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
        }
    }
}

/* Gather head-sharded LSE (B, H_r, N) of every rank into (B, H, N) on rank 0. */
static void gather_lse(const void *mine, void *full, const uly_attn_desc *a, int rank, int P)
{
    const size_t es = uly_dtype_size(a->dtype), row = (size_t)a->seq * es;
    for (int r = 0; r < P; r++) {
        int64_t h0, hn;
        uly_split(a->heads, P, r, &h0, &hn);
        for (int64_t b = 0; b < a->batch && hn > 0; b++) {
            const char *src = (const char *)mine + (size_t)(b * hn) * row;
            char *dst = full ? (char *)full + (size_t)(b * a->heads + h0) * row : NULL;
            int cnt = (int)((size_t)hn * row);
            if (r == 0 && rank == 0)
                memcpy(dst, src, (size_t)cnt);
            else if (rank == r)
                MPI_Send(src, cnt, MPI_BYTE, 0, 8, MPI_COMM_WORLD);
            else if (rank == 0)
                MPI_Recv(dst, cnt, MPI_BYTE, r, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    }
}

/* ---------------------------------------------------------------- check */

typedef struct errstat { double max_abs, max_ref, worst_tol; } errstat;

static errstat compare_ref(const double *ref, const void *got, uly_dtype t, size_t n, double atol, double rtol)
{
    errstat e = {0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        double g = t == ULY_F32 ? ((const float *)got)[i] : ((const double *)got)[i];
        double d = fabs(g - ref[i]);
        if (!isfinite(g))
            d = INFINITY;
        if (d > e.max_abs)
            e.max_abs = d;
        if (fabs(ref[i]) > e.max_ref)
            e.max_ref = fabs(ref[i]);
        double used = d / (atol + rtol * fabs(ref[i]));
        if (!(used <= e.worst_tol))
            e.worst_tol = used;
    }
    return e;
}

static double *to_double(const void *x, uly_dtype t, size_t n)
{
    double *y = malloc(n * sizeof *y + 8);
    if (!y)
        return NULL;
    for (size_t i = 0; i < n; i++)
        y[i] = t == ULY_F32 ? ((const float *)x)[i] : ((const double *)x)[i];
    return y;
}


#define NPH 6
static const char *const phase_names[NPH] = {
    "fwd a2a in (q,k,v)", "fwd attention", "fwd a2a out (o)",
    "bwd a2a in (do)", "bwd attention", "bwd a2a out (dq,dk,dv)"};

/* Everything a run holds, freed in one place. */
typedef struct attn_run {
    tensor_in in[4];                /* q, k, v, dout from files */
    void *q, *k, *v, *dout;         /* shards (B, n_r, H|Hkv, d) */
    void *o, *dq, *dk, *dv;
    uly_dist *D;
    double *times;                  /* (repeat, NPH) this rank */
} attn_run;

static void run_free(attn_run *r)
{
    for (int i = 0; i < 4; i++)
        uly_npy_free(&r->in[i].npy);
    free(r->q); free(r->k); free(r->v); free(r->dout);
    free(r->o); free(r->dq); free(r->dk); free(r->dv);
    free(r->times);
    uly_dist_free(r->D);
}

/* Shapes from files (if any) merged with the options; message on conflict. */
static int resolve_shape(struct attn_cfg *c, attn_run *R, char *msg, size_t len)
{
    const char *files[4] = {c->fq, c->fk, c->fv, c->fdout};
    const char *names[4] = {"q", "k", "v", "dout"};
    int64_t shp[4][4];
    int nfiles = (c->fq != NULL) + (c->fk != NULL) + (c->fv != NULL);
    if (nfiles != 0 && nfiles != 3) {
        snprintf(msg, len, "--q, --k and --v must be given together");
        return EXIT_BADINPUT;
    }
    if (c->fdout && !c->fq) {
        snprintf(msg, len, "--dout needs --q, --k and --v");
        return EXIT_BADINPUT;
    }
    if ((c->fdq || c->fdk || c->fdv) && !c->backward) {
        snprintf(msg, len, "--dq/--dk/--dv need --backward (or --dout)");
        return EXIT_BADINPUT;
    }
    for (int i = 0; i < 4; i++) {
        if (!files[i])
            continue;
        int rc = load_tensor(files[i], names[i], &R->in[i], shp[i], msg, len);
        if (rc)
            return rc;
        if (!c->allow_nonfinite && (rc = check_finite(&R->in[i], names[i], files[i], msg, len)))
            return rc;
    }
    if (!c->fq)
        return 0;
    /* q fixes B, N, H, d; k and v fix Hkv; dout must match q */
    int64_t want[5] = {shp[0][0], shp[0][1], shp[0][2], shp[2][2], shp[0][3]};
    int64_t *opt[5] = {&c->batch, &c->seq, &c->heads, &c->kv_heads, &c->head_dim};
    int seen[5] = {c->seen_batch, c->seen_seq, c->seen_heads, c->seen_kv, c->seen_dim};
    const char *oname[5] = {"batch", "seq", "heads", "kv-heads", "head-dim"};
    for (int i = 0; i < 5; i++) {
        if (seen[i] && *opt[i] != want[i]) {
            snprintf(msg, len, "--%s %lld disagrees with the input files (%lld)", oname[i], (long long)*opt[i],
                     (long long)want[i]);
            return EXIT_BADINPUT;
        }
        *opt[i] = want[i];
    }
    for (int i = 1; i < 4; i++) {
        if (!files[i])
            continue;
        int64_t heads = i == 3 ? c->heads : c->kv_heads;
        if (shp[i][0] != c->batch || shp[i][1] != c->seq || shp[i][2] != heads || shp[i][3] != c->head_dim) {
            snprintf(msg, len, "--%s %s has shape (%lld, %lld, %lld, %lld), expected (%lld, %lld, %lld, %lld)",
                     names[i], files[i], (long long)shp[i][0], (long long)shp[i][1], (long long)shp[i][2],
                     (long long)shp[i][3], (long long)c->batch, (long long)c->seq, (long long)heads,
                     (long long)c->head_dim);
            return EXIT_BADINPUT;
        }
    }
    if (!c->seen_dtype)
        c->dtype = R->in[0].npy.dtype;
    return 0;
}

static void *alloc_or(size_t n, int *fail)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        *fail = 1;
    return p;
}

static int write_full(const char *path, const void *full, const uly_attn_desc *a, int64_t Hx, char *msg, size_t len)
{
    int64_t shape[4] = {a->batch, a->seq, Hx, a->head_dim};
    if (uly_npy_write(path, a->dtype, 4, shape, full)) {
        snprintf(msg, len, "%s", uly_last_error());
        return EXIT_BADINPUT;
    }
    return 0;
}

static int cmd_attn_mpi(int argc, char **argv, int rank, int P)
{
    struct attn_cfg c;
    memset(&c, 0, sizeof c);
    c.batch = 1; c.seq = 1024; c.heads = 8; c.head_dim = 64; c.seed = 1; c.repeat = 3; c.warmup = 1;
    const arg_opt opts[] = {
        {"batch", ARG_INT, &c.batch, 1, 1 << 20, "B", "batch size (default 1)", NULL, &c.seen_batch},
        {"seq", ARG_INT, &c.seq, 1, INT64_MAX / 2, "N", "sequence length, K/M suffixes allowed (default 1024)", NULL, &c.seen_seq},
        {"heads", ARG_INT, &c.heads, 1, 1 << 20, "H", "query heads (default 8)", NULL, &c.seen_heads},
        {"kv-heads", ARG_INT, &c.kv_heads, 1, 1 << 20, "Hkv", "key/value heads, H % Hkv == 0 (default H)", NULL, &c.seen_kv},
        {"head-dim", ARG_INT, &c.head_dim, 1, 1 << 16, "d", "head dimension (default 64)", NULL, &c.seen_dim},
        {"causal", ARG_FLAG, &c.causal, 0, 0, NULL, "causal mask", NULL, NULL},
        {"window", ARG_INT, &c.window, 1, INT64_MAX / 2, "W", "sliding window: |i-j| < W, or the W most recent keys with --causal", NULL, NULL},
        {"backward", ARG_FLAG, &c.backward, 0, 0, NULL, "also run the backward pass", NULL, NULL},
        {"check", ARG_FLAG, &c.check, 0, 0, NULL, "compare with one process (bitwise) and the fp64 reference", NULL, NULL},
        {"seed", ARG_INT, &c.seed, 0, INT64_MAX, "S", "seed of the random inputs (default 1)", NULL, NULL},
        {"threads", ARG_INT, &c.threads, 1, 1024, "T", "OpenMP threads per rank (default: OMP_NUM_THREADS)", NULL, NULL},
        {"repeat", ARG_INT, &c.repeat, 1, 100000, "R", "timed repetitions (default 3)", NULL, NULL},
        {"warmup", ARG_INT, &c.warmup, 0, 1000, "W", "untimed repetitions first (default 1)", NULL, NULL},
        {"dtype", ARG_CHOICE, &c.dtype, 0, 0, "T", "element type f32 or f64 (default f32, or that of --q)", dtype_names, &c.seen_dtype},
        {"block-q", ARG_INT, &c.block_q, 1, 65536, "n", "query rows per kernel block", NULL, NULL},
        {"block-k", ARG_INT, &c.block_k, 1, 65536, "n", "key rows per kernel block", NULL, NULL},
        {"a2a", ARG_CHOICE, &c.a2a, 0, 0, "MODE", "all-to-all data movement: auto (default: datatype up to 16 MiB per rank, pack above), pack, datatype", a2a_names, NULL},
        {"max-count", ARG_INT, &c.max_count, 1, INT64_MAX, "n", "largest element count per MPI call and peer", NULL, NULL},
        {"q", ARG_STR, &c.fq, 0, 0, "F.npy", "queries, float32/float64 (B, N, H, d) or (N, H, d)", NULL, NULL},
        {"k", ARG_STR, &c.fk, 0, 0, "F.npy", "keys (B, N, Hkv, d)", NULL, NULL},
        {"v", ARG_STR, &c.fv, 0, 0, "F.npy", "values (B, N, Hkv, d)", NULL, NULL},
        {"out", ARG_STR, &c.fout, 0, 0, "F.npy", "write the output O (B, N, H, d)", NULL, NULL},
        {"dout", ARG_STR, &c.fdout, 0, 0, "F.npy", "output gradient dO (implies --backward)", NULL, NULL},
        {"dq", ARG_STR, &c.fdq, 0, 0, "F.npy", "write dQ", NULL, NULL},
        {"dk", ARG_STR, &c.fdk, 0, 0, "F.npy", "write dK", NULL, NULL},
        {"dv", ARG_STR, &c.fdv, 0, 0, "F.npy", "write dV", NULL, NULL},
        {"allow-nonfinite", ARG_FLAG, &c.allow_nonfinite, 0, 0, NULL, "accept NaN/Inf in input files", NULL, NULL},
        {"json", ARG_FLAG, &c.json, 0, 0, NULL, "print one JSON object instead of tables", NULL, NULL},
        {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    char msg[1024] = "";
    int prc = args_parse("ulysses attn", argc - 1, argv + 1, opts, msg, sizeof msg);
    if (prc == ARGS_HELP) {
        if (rank == 0)
            args_usage(stdout, "ulysses", synopsis, opts);
        return 0;
    }
    if (prc == ARGS_ERROR) {
        if (rank == 0)
            fprintf(stderr, "%s\n", msg);
        return EXIT_BADINPUT;
    }
    if (c.fdout)
        c.backward = 1;
    if (!c.seen_kv)
        c.kv_heads = c.heads;
    attn_run R;
    memset(&R, 0, sizeof R);
    int st = resolve_shape(&c, &R, msg, sizeof msg);
    if ((st = agree_fail(rank, st, msg))) {
        run_free(&R);
        return st;
    }
    uly_attn_desc a;
    memset(&a, 0, sizeof a);
    a.batch = c.batch; a.seq = c.seq; a.heads = c.heads; a.kv_heads = c.kv_heads;
    a.head_dim = c.head_dim; a.causal = c.causal; a.window = c.window; a.dtype = (uly_dtype)c.dtype;
    int lrc = uly_attn_desc_check(&a);
    if (lrc)
        snprintf(msg, sizeof msg, "%s", uly_last_error());
    if ((st = agree_fail(rank, lrc ? exit_status_of(lrc) : 0, msg))) {
        run_free(&R);
        return st;
    }
    /* shards */
    const size_t es = uly_dtype_size(a.dtype);
    int64_t t0, n;
    uly_split(a.seq, P, rank, &t0, &n);
    const size_t nq = (size_t)(a.batch * n * a.heads * a.head_dim), nkv = (size_t)(a.batch * n * a.kv_heads * a.head_dim);
    int fail = 0;
    R.q = alloc_or(nq * es, &fail); R.k = alloc_or(nkv * es, &fail); R.v = alloc_or(nkv * es, &fail);
    R.o = alloc_or(nq * es, &fail);
    if (c.backward) {
        R.dout = alloc_or(nq * es, &fail); R.dq = alloc_or(nq * es, &fail);
        R.dk = alloc_or(nkv * es, &fail); R.dv = alloc_or(nkv * es, &fail);
    }
    R.times = alloc_or((size_t)c.repeat * NPH * sizeof(double), &fail);
    if (fail)
        snprintf(msg, sizeof msg, "rank %d: cannot allocate its shard tensors (%zu bytes each)", rank, nq * es);
    if ((st = agree_fail(rank, fail, msg))) {
        run_free(&R);
        return st;
    }
    void *bufs[4] = {R.q, R.k, R.v, R.dout};
    for (int i = 0; i < 4; i++) {
        if (!bufs[i])
            continue;
        int64_t Hx = (i == 1 || i == 2) ? a.kv_heads : a.heads;
        if (R.in[i].loaded)
            shard_from(&R.in[i], bufs[i], a.dtype, a.batch, a.seq, t0, n, Hx * a.head_dim);
        else
            fill_shard(bufs[i], a.dtype, (uint64_t)c.seed, i, a.batch, a.seq, t0, n, Hx, a.head_dim);
    }
    uly_dist_opts dopt;
    memset(&dopt, 0, sizeof dopt);
    dopt.kernel.block_q = c.block_q;
    dopt.kernel.block_k = c.block_k;
    dopt.kernel.threads = (int)c.threads;
    dopt.max_count = (size_t)c.max_count;
    dopt.a2a_mode = c.a2a == 0 ? ULY_A2A_AUTO : c.a2a == 1 ? ULY_A2A_PACK : ULY_A2A_DATATYPE;
    lrc = uly_dist_create(MPI_COMM_WORLD, &a, &dopt, &R.D);
    if (lrc) {
        /* every rank got an error; the failing one prints */
        if (lrc != ULY_EPEER && (rank == 0 || lrc != ULY_EMISMATCH))
            fprintf(stderr, "ulysses attn: rank %d: %s\n", rank, uly_last_error());
        run_free(&R);
        return exit_status_of(lrc == ULY_EPEER ? ULY_EINVAL : lrc);
    }
    /* warm-up, then timed repetitions */
    uly_volume vol;
    for (int64_t it = -c.warmup; it < c.repeat && !lrc; it++) {
        if (it == 0)
            uly_dist_reset_volume(R.D);
        MPI_Barrier(MPI_COMM_WORLD);
        lrc = uly_dist_fwd(R.D, R.q, R.k, R.v, R.o);
        if (!lrc && c.backward)
            lrc = uly_dist_bwd(R.D, R.dout, R.dq, R.dk, R.dv);
        if (it >= 0) {
            uly_dist_times t;
            uly_dist_times_get(R.D, &t);
            double *row = R.times + it * NPH;
            row[0] = t.fwd_a2a_in; row[1] = t.fwd_attn; row[2] = t.fwd_a2a_out;
            row[3] = t.bwd_a2a_in; row[4] = t.bwd_attn; row[5] = t.bwd_a2a_out;
        }
    }
    if (lrc) {
        if (lrc != ULY_EPEER)
            fprintf(stderr, "ulysses attn: rank %d: %s\n", rank, uly_last_error());
        run_free(&R);
        return exit_status_of(lrc == ULY_EPEER ? ULY_EINVAL : lrc);
    }
    uly_dist_volume(R.D, &vol);
    uly_volume want;
    uly_plan_volume(&a, P, rank, &want);
    int vol_bad = 0;
    for (int w = 0; w < ULY_A2A_COUNT; w++) {
        int used = c.backward || w < ULY_A2A_DO;
        uint64_t ws = used ? want.sent[w] * (uint64_t)c.repeat : 0, wr = used ? want.recv[w] * (uint64_t)c.repeat : 0;
        if (vol.sent[w] != ws || vol.recv[w] != wr)
            vol_bad = 1;
    }
    int any_vol_bad = 0;
    MPI_Allreduce(&vol_bad, &any_vol_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    /* phase statistics over ranks x repetitions */
    double *all = rank == 0 ? malloc((size_t)P * (size_t)c.repeat * NPH * sizeof(double)) : NULL;
    MPI_Gather(R.times, (int)(c.repeat * NPH), MPI_DOUBLE, all, (int)(c.repeat * NPH), MPI_DOUBLE, 0, MPI_COMM_WORLD);
    stats ph[NPH];
    double *col = rank == 0 ? malloc((size_t)P * (size_t)c.repeat * sizeof(double)) : NULL;
    double fwd_med = 0, tot_med = 0, crit[NPH] = {0};
    if (rank == 0) {
        size_t m = (size_t)P * (size_t)c.repeat;
        for (int p = 0; p < NPH; p++) {
            for (size_t i = 0; i < m; i++)
                col[i] = all[i * NPH + p];
            ph[p] = stats_of(col, m);
        }
        /* per repetition, the slowest rank's total is the step time */
        double *fw = malloc((size_t)c.repeat * sizeof(double)), *tt = malloc((size_t)c.repeat * sizeof(double));
        for (int64_t it = 0; it < c.repeat; it++) {
            fw[it] = tt[it] = 0;
            for (int r = 0; r < P; r++) {
                const double *row = all + ((size_t)r * (size_t)c.repeat + (size_t)it) * NPH;
                double f = row[0] + row[1] + row[2], b = row[3] + row[4] + row[5];
                if (f > fw[it]) fw[it] = f;
                if (f + b > tt[it]) tt[it] = f + b;
            }
        }
        fwd_med = stats_of(fw, (size_t)c.repeat).median;
        tot_med = stats_of(tt, (size_t)c.repeat).median;
        /* the critical path of each phase per repetition: an all-to-all as the
         * last rank to arrive sees it (the others also wait for it), the
         * attention of the slowest rank; median over repetitions */
        for (int p = 0; p < NPH; p++) {
            const int compute = p == 1 || p == 4;
            for (int64_t it = 0; it < c.repeat; it++) {
                fw[it] = compute ? 0 : INFINITY;
                for (int r = 0; r < P; r++) {
                    double x = all[((size_t)r * (size_t)c.repeat + (size_t)it) * NPH + (size_t)p];
                    fw[it] = compute ? fmax(fw[it], x) : fmin(fw[it], x);
                }
            }
            crit[p] = stats_of(fw, (size_t)c.repeat).median;
        }
        free(fw); free(tt);
    }
    free(all); free(col);
    /* --check and outputs: gather to rank 0 */
    int need_full = c.check || c.fout || c.fdq || c.fdk || c.fdv;
    void *full[5] = {NULL, NULL, NULL, NULL, NULL}; /* o, lse, dq, dk, dv */
    const size_t NQ = (size_t)(a.batch * a.seq * a.heads * a.head_dim), NKV = (size_t)(a.batch * a.seq * a.kv_heads * a.head_dim);
    const size_t NL = (size_t)(a.batch * a.heads * a.seq);
    fail = 0;
    if (need_full && rank == 0) {
        full[0] = alloc_or(NQ * es, &fail); full[1] = alloc_or(NL * es, &fail);
        if (c.backward) {
            full[2] = alloc_or(NQ * es, &fail); full[3] = alloc_or(NKV * es, &fail); full[4] = alloc_or(NKV * es, &fail);
        }
        if (fail)
            snprintf(msg, sizeof msg, "rank 0: cannot allocate the gathered tensors for --check/--out");
    }
    if ((st = agree_fail(rank, fail ? 1 : 0, msg))) {
        for (int i = 0; i < 5; i++)
            free(full[i]);
        run_free(&R);
        return st;
    }
    if (need_full) {
        gather_tokens(R.o, full[0], &a, a.heads, rank, P);
        gather_lse(uly_dist_lse(R.D), full[1], &a, rank, P);
        if (c.backward) {
            gather_tokens(R.dq, full[2], &a, a.heads, rank, P);
            gather_tokens(R.dk, full[3], &a, a.kv_heads, rank, P);
            gather_tokens(R.dv, full[4], &a, a.kv_heads, rank, P);
        }
    }
    int exit_code = 0;
    /* rank 0: single-process run and reference */
    int bitwise[5] = {1, 1, 1, 1, 1};
    errstat err[5];
    memset(err, 0, sizeof err);
    const double atol = a.dtype == ULY_F32 ? 2e-5 : 1e-10, rtol = a.dtype == ULY_F32 ? 2e-4 : 1e-8;
    int tol_ok = 1;
    if (c.check && rank == 0) {
        void *fq = malloc(NQ * es), *fk = malloc(NKV * es), *fv = malloc(NKV * es), *fd = malloc(NQ * es);
        void *so = malloc(NQ * es), *sl = malloc(NL * es), *sdq = malloc(NQ * es), *sdk = malloc(NKV * es), *sdv = malloc(NKV * es);
        double *ro = malloc(NQ * 8), *rl = malloc(NL * 8), *rdq = malloc(NQ * 8), *rdk = malloc(NKV * 8), *rdv = malloc(NKV * 8);
        void *fbufs[4] = {fq, fk, fv, fd};
        for (int i = 0; i < 4; i++) {
            int64_t Hx = (i == 1 || i == 2) ? a.kv_heads : a.heads;
            if (R.in[i].loaded)
                shard_from(&R.in[i], fbufs[i], a.dtype, a.batch, a.seq, 0, a.seq, Hx * a.head_dim);
            else
                fill_shard(fbufs[i], a.dtype, (uint64_t)c.seed, i, a.batch, a.seq, 0, a.seq, Hx, a.head_dim);
        }
        uly_kernel_opts ko = dopt.kernel;
        int rc = uly_attn_fwd(&a, &ko, fq, fk, fv, so, sl);
        if (!rc && c.backward)
            rc = uly_attn_bwd(&a, &ko, fq, fk, fv, so, sl, fd, sdq, sdk, sdv);
        uly_attn_desc a64 = a;
        a64.dtype = ULY_F64;
        double *dq64 = to_double(fq, a.dtype, NQ), *dk64 = to_double(fk, a.dtype, NKV);
        double *dv64 = to_double(fv, a.dtype, NKV), *dd64 = to_double(fd, a.dtype, NQ);
        if (!rc)
            rc = uly_ref_fwd(&a64, dq64, dk64, dv64, ro, rl);
        if (!rc && c.backward)
            rc = uly_ref_bwd(&a64, dq64, dk64, dv64, dd64, rdq, rdk, rdv);
        if (rc) {
            fprintf(stderr, "ulysses attn: --check: %s\n", uly_last_error());
            exit_code = 1;
        } else {
            const void *single[5] = {so, sl, sdq, sdk, sdv};
            const double *refs[5] = {ro, rl, rdq, rdk, rdv};
            const size_t ns[5] = {NQ, NL, NQ, NKV, NKV};
            int nt = c.backward ? 5 : 2;
            for (int i = 0; i < nt; i++) {
                bitwise[i] = memcmp(single[i], full[i], ns[i] * es) == 0;
                err[i] = compare_ref(refs[i], full[i], a.dtype, ns[i], i < 2 ? atol / 4 : atol, i < 2 ? rtol / 4 : rtol);
                if (!bitwise[i] || !(err[i].worst_tol <= 1))
                    tol_ok = 0;
            }
            if (!tol_ok)
                exit_code = 1;
        }
        free(dq64); free(dk64); free(dv64); free(dd64);
        free(fq); free(fk); free(fv); free(fd); free(so); free(sl); free(sdq); free(sdk); free(sdv);
        free(ro); free(rl); free(rdq); free(rdk); free(rdv);
    }
    /* outputs */
    int wrc = 0;
    if (rank == 0) {
        if (!wrc && c.fout) wrc = write_full(c.fout, full[0], &a, a.heads, msg, sizeof msg);
        if (!wrc && c.fdq) wrc = write_full(c.fdq, full[2], &a, a.heads, msg, sizeof msg);
        if (!wrc && c.fdk) wrc = write_full(c.fdk, full[3], &a, a.kv_heads, msg, sizeof msg);
        if (!wrc && c.fdv) wrc = write_full(c.fdv, full[4], &a, a.kv_heads, msg, sizeof msg);
        if (wrc)
            fprintf(stderr, "ulysses attn: %s\n", msg);
    }
    /* report */
    if (rank == 0) {
        const double pairs = uly_attn_pairs(&a);
        const double ffl = 4.0 * pairs * (double)a.head_dim * (double)(a.batch * a.heads);
        const double tfl = c.backward ? 3.5 * ffl : ffl;
        const char *mask = a.causal ? (a.window ? "causal+window" : "causal") : (a.window ? "window" : "none");
        const int nt = c.backward ? 5 : 2;
        static const char *const tn[5] = {"O", "LSE", "dQ", "dK", "dV"};
        if (c.json) {
            printf("{\"ranks\": %d, \"batch\": %lld, \"seq\": %lld, \"heads\": %lld, \"kv_heads\": %lld, \"head_dim\": %lld, "
                   "\"mask\": \"%s\", \"window\": %lld, \"dtype\": \"%s\", \"repeat\": %lld, \"backward\": %s",
                   P, (long long)a.batch, (long long)a.seq, (long long)a.heads, (long long)a.kv_heads, (long long)a.head_dim,
                   mask, (long long)a.window, dtype_names[a.dtype], (long long)c.repeat, c.backward ? "true" : "false");
            for (int p = 0; p < (c.backward ? NPH : 3); p++)
                printf(", \"phase_%d_ms\": {\"name\": \"%s\", \"min\": %.6f, \"median\": %.6f, \"max\": %.6f, "
                       "\"critical\": %.6f}", p, phase_names[p], 1e3 * ph[p].min, 1e3 * ph[p].median, 1e3 * ph[p].max,
                       1e3 * crit[p]);
            printf(", \"forward_ms\": %.6f", 1e3 * fwd_med);
            if (c.backward)
                printf(", \"iteration_ms\": %.6f", 1e3 * tot_med);
            printf(", \"fwd_gflops\": %.3f", ffl / fwd_med * 1e-9);
            if (c.backward)
                printf(", \"fwdbwd_gflops\": %.3f", tfl / tot_med * 1e-9);
            printf(", \"bytes_rank0\": {");
            for (int w = 0; w < ULY_A2A_COUNT; w++)
                printf("%s\"%s\": {\"sent\": %llu, \"expected_sent\": %llu, \"recv\": %llu, \"expected_recv\": %llu}",
                       w ? ", " : "", uly_a2a_name(w), (unsigned long long)(vol.sent[w] / (uint64_t)c.repeat),
                       (unsigned long long)(c.backward || w < ULY_A2A_DO ? want.sent[w] : 0),
                       (unsigned long long)(vol.recv[w] / (uint64_t)c.repeat),
                       (unsigned long long)(c.backward || w < ULY_A2A_DO ? want.recv[w] : 0));
            printf("}, \"bytes_match_all_ranks\": %s", any_vol_bad ? "false" : "true");
            if (c.check) {
                printf(", \"check\": {");
                for (int i = 0; i < nt; i++)
                    printf("%s\"%s\": {\"bitwise_equal_single_process\": %s, \"max_abs_err\": %.3e, \"max_rel_err\": %.3e}",
                           i ? ", " : "", tn[i], bitwise[i] ? "true" : "false", err[i].max_abs,
                           err[i].max_ref > 0 ? err[i].max_abs / err[i].max_ref : 0.0);
                printf(", \"pass\": %s}", tol_ok ? "true" : "false");
            }
            printf("}\n");
        } else {
            printf("ulysses attn: %d rank%s, B=%lld N=%lld H=%lld Hkv=%lld d=%lld mask=%s dtype=%s, %lld repetition%s%s\n",
                   P, P > 1 ? "s" : "", (long long)a.batch, (long long)a.seq, (long long)a.heads, (long long)a.kv_heads,
                   (long long)a.head_dim, mask, dtype_names[a.dtype], (long long)c.repeat,
                   c.repeat > 1 ? "s" : "", c.backward ? ", forward + backward" : ", forward");
            if (a.window)
                printf("  window W=%lld\n", (long long)a.window);
            printf("\n%-26s %12s %12s %12s   (over ranks x repetitions)\n", "phase", "min ms", "median ms", "max ms");
            for (int p = 0; p < (c.backward ? NPH : 3); p++)
                printf("%-26s %12.3f %12.3f %12.3f\n", phase_names[p], 1e3 * ph[p].min, 1e3 * ph[p].median, 1e3 * ph[p].max);
            printf("\nthroughput: forward %.2f GFLOP/s", ffl / fwd_med * 1e-9);
            if (c.backward)
                printf(", forward+backward %.2f GFLOP/s", tfl / tot_med * 1e-9);
            printf(" (all ranks; 4*pairs*d per head forward, 2.5x backward)\n");
            printf("\n%-6s %16s %16s %16s %16s   (rank 0, bytes per call)\n", "a2a", "sent", "expected sent", "received", "expected recv");
            for (int w = 0; w < (c.backward ? ULY_A2A_COUNT : ULY_A2A_DO); w++)
                printf("%-6s %16llu %16llu %16llu %16llu\n", uly_a2a_name(w), (unsigned long long)(vol.sent[w] / (uint64_t)c.repeat),
                       (unsigned long long)want.sent[w], (unsigned long long)(vol.recv[w] / (uint64_t)c.repeat),
                       (unsigned long long)want.recv[w]);
            printf("measured == expected on every rank: %s\n", any_vol_bad ? "NO" : "yes");
            if (c.check) {
                printf("\n%-4s %26s %16s %16s\n", "", "bitwise == one process", "max abs err", "max rel err");
                for (int i = 0; i < nt; i++)
                    printf("%-4s %26s %16.3e %16.3e\n", tn[i], bitwise[i] ? "yes" : "NO", err[i].max_abs,
                           err[i].max_ref > 0 ? err[i].max_abs / err[i].max_ref : 0.0);
                printf("errors vs fp64 reference within atol %.0e + rtol %.0e |ref| (O, LSE: a quarter of it): %s\n",
                       atol, rtol, tol_ok ? "yes" : "NO");
            }
        }
        fflush(stdout);
    }
    for (int i = 0; i < 5; i++)
        free(full[i]);
    run_free(&R);
    int codes[2] = {exit_code, wrc}, out[2];
    MPI_Allreduce(codes, out, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (out[1])
        return out[1];
    return any_vol_bad ? 1 : out[0];
}

/* ---------------------------------------------------------------- main */

int cmd_attn(int argc, char **argv)
{
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited)
        MPI_Init(NULL, NULL);
    int rank = 0, P = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    int status = cmd_attn_mpi(argc, argv, rank, P);
    MPI_Finalize();
    return status;
}
