/*
 * cmd_train.c -- `ulysses train`: train a GPT-2 model with Ulysses sequence
 * parallelism on a DP x SP grid of MPI ranks (doc/train.md).  This file is
 * the driver: options, data (a seeded synthetic key-value retrieval task, or
 * byte-level tokens of a text file), the progress line, the CSV log, the
 * checkpoint files and the loss plot.  The model and its exactness are in
 * the library (src/train.c).
 */
#include <errno.h>
#include <math.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "args.h"
#include "cli.h"
#include "config.h"
#include "ulysses_train.h"

struct train_cfg {
    int64_t layers, channels, heads, kv_heads, seq, vocab, batch, dp, sp, steps, seed, threads, canon_sp;
    double lr, wd, clip;
    int64_t docs;
    const char *data, *log, *checkpoint, *resume, *plot, *dump;
    int fast, quiet;
    int seen_kv, seen_vocab, seen_dp, seen_sp, seen_batch;
};

static const char synopsis[] =
    "train [--layers L] [--channels C] [--heads H] [--kv-heads Hkv] [--seq N] [--vocab V]\n"
    "             [--batch B] [--dp D] [--sp S] [--steps K] [--lr LR] [--seed S]\n"
    "             [--data synthetic|FILE] [--docs K] [--log F.csv] [--plot F.svg]\n"
    "             [--dump DIR] [--checkpoint F] [--resume F] [--fast]\n"
    "Run under 'mpirun -np P': P = dp * sp ranks, each holding a contiguous token shard\n"
    "of dp's rows; the losses are bitwise identical for every dp and sp (doc/train.md).";

/* The lowest failing rank's message, printed once; the common exit status. */
static int agree_fail(int rank, int local_exit, const char *msg)
{
    int enc = local_exit ? rank : 1 << 30, first;
    MPI_Allreduce(&enc, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == 1 << 30)
        return 0;
    int code = local_exit;
    MPI_Bcast(&code, 1, MPI_INT, first, MPI_COMM_WORLD);
    if (rank == first)
        fprintf(stderr, "ulysses train: %s\n", msg);
    return code;
}

/* Every rank must have resolved the same options: compare a digest. */
static int agree_options(int rank, const struct train_cfg *c)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    const int64_t v[] = {c->layers, c->channels, c->heads, c->kv_heads, c->seq, c->vocab, c->batch, c->dp, c->sp,
                         c->steps, c->seed, c->threads, c->canon_sp, c->fast, c->docs};
    const double d[] = {c->lr, c->wd, c->clip};
    const unsigned char *p = (const unsigned char *)v;
    for (size_t i = 0; i < sizeof v; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    p = (const unsigned char *)d;
    for (size_t i = 0; i < sizeof d; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    const char *s[] = {c->data, c->log, c->checkpoint, c->resume, c->plot, c->dump};
    for (int k = 0; k < 6; k++)
        for (const char *q = s[k] ? s[k] : "\001"; *q; q++)
            h = (h ^ (unsigned char)*q) * 0x100000001b3ULL;
    unsigned long long mine = h, mn, mx;
    MPI_Allreduce(&mine, &mn, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&mine, &mx, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (mn != mx) {
        if (rank == 0)
            fprintf(stderr, "ulysses train: ranks were started with different options\n");
        return EXIT_BADINPUT;
    }
    return 0;
}

/* ------------------------------------------------------------------ data */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t draw(uint64_t seed, int64_t step, int64_t row, int64_t i)
{
    return mix64(mix64(seed * 0x9e3779b97f4a7c15ULL + (uint64_t)step) ^ ((uint64_t)row << 32) ^ (uint64_t)i);
}

/* Key-value retrieval: K pairs in the table (at most 8, and a quarter of the row). */
static int64_t synth_pairs(int64_t N, int64_t V)
{
    int64_t K = (V - 2) / 3;
    if (K > 4)
        K = 4;
    if (K > (N + 1) / 4)
        K = (N + 1) / 4;
    return K;
}

/*
 * Synthetic row (N + 1 tokens): a table of K (key, value) pairs at the start
 * (keys 2..K+1 in order, random values from [K+2, V)), then query pairs
 * (random key, its value) up to the end of the row (a last odd token is the
 * filler 0).  Only the values of the queries carry a loss: each needs the
 * table, which sits on the first shard, or an earlier query with the same
 * key: attention across shard boundaries.  A model that ignores the table
 * scores log(V - K - 2) at best; one that uses it approaches 0.
 */
static void synth_row(uint64_t seed, int64_t step, int64_t g, int64_t N, int64_t V, int32_t *row, uint8_t *nl)
{
    const int64_t K = synth_pairs(N, V), nv = V - 2 - K;
    int32_t val[8];
    if (K == 0) { /* too short for a table: filler without loss */
        memset(row, 0, (size_t)(N + 1) * sizeof *row);
        memset(nl, 1, (size_t)N);
        return;
    }
    for (int64_t i = 0; i < K; i++) {
        val[i] = (int32_t)(K + 2 + (int64_t)(draw(seed, step, g, i) % (uint64_t)nv));
        row[2 * i] = (int32_t)(2 + i);
        row[2 * i + 1] = val[i];
    }
    for (int64_t i = 2 * K; i <= N; i++)
        row[i] = 0;
    for (int64_t q = 2 * K; q + 1 <= N; q += 2) {
        int64_t k = (int64_t)(draw(seed, step, g, 1000 + q) % (uint64_t)K);
        row[q] = (int32_t)(2 + k);
        row[q + 1] = val[k];
    }
    for (int64_t i = 0; i < N; i++)
        nl[i] = !(i >= 2 * K && (i - 2 * K) % 2 == 0);
}

typedef struct text_data {
    unsigned char *bytes;
    size_t len;
} text_data;

static int load_text(const char *what, const char *path, int64_t N, text_data *t, char *msg, size_t len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(msg, len, "%s %s: %s", what, path, strerror(errno));
        return EXIT_BADINPUT;
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = malloc(cap);
    while (b) {
        size_t k = fread(b + n, 1, cap - n, f);
        n += k;
        if (n < cap)
            break;
        unsigned char *nb = realloc(b, cap * 2);
        if (!nb) {
            free(b);
            b = NULL;
            break;
        }
        b = nb;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!b || err) {
        free(b);
        snprintf(msg, len, "%s %s: %s", what, path, b ? "read error" : "out of memory");
        return b ? EXIT_BADINPUT : 1;
    }
    if ((int64_t)n < N + 1) {
        free(b);
        snprintf(msg, len, "%s %s: %zu bytes, a row needs --seq + 1 = %lld", what, path, n, (long long)N + 1);
        return EXIT_BADINPUT;
    }
    t->bytes = b;
    t->len = n;
    return 0;
}

/* Document offsets of every row of step `step` (batch, docs + 1): docs - 1
 * random cuts (empty documents happen). */
static void make_docs(const struct train_cfg *c, int64_t step, int64_t *off)
{
    const int64_t D = c->docs, N = c->seq;
    for (int64_t g = 0; g < c->batch; g++) {
        int64_t *r = off + g * (D + 1);
        r[0] = 0;
        r[D] = N;
        for (int64_t i = 1; i < D; i++) { /* insertion into sorted order */
            int64_t x = (int64_t)(draw((uint64_t)c->seed, step, g, 500000 + i) % (uint64_t)(N + 1)), j = i;
            while (j > 1 && r[j - 1] > x) {
                r[j] = r[j - 1];
                j--;
            }
            r[j] = x;
        }
    }
}

/* Tokens [0, n] (n + 1) of one document or row: a synthetic task of its own or a text excerpt. */
static void fill_tokens(const struct train_cfg *c, const text_data *text, int64_t step, int64_t id, int64_t n,
                        int32_t *row, uint8_t *nl)
{
    if (text) {
        size_t start = (size_t)(draw((uint64_t)c->seed, step, id, 0) % (uint64_t)(text->len - (size_t)n));
        for (int64_t i = 0; i <= n; i++)
            row[i] = text->bytes[start + (size_t)i];
        memset(nl, 0, (size_t)n);
    } else {
        synth_row((uint64_t)c->seed, step, id, n, c->vocab, row, nl);
    }
}

/* This rank's shard of step `step`: tok, tgt, pos (rows, toks).  With
 * documents, row g packs docs documents at the offsets off (batch, docs + 1). */
static void make_batch(uly_train *T, const struct train_cfg *c, const text_data *text, int64_t step,
                       const int64_t *off, int32_t *row, int32_t *drow, uint8_t *nl, uint8_t *dnl, int32_t *tok,
                       int32_t *tgt, int32_t *pos)
{
    int64_t rb, rows, tb, toks;
    uly_train_shard(T, &rb, &rows, &tb, &toks);
    const int64_t N = c->seq, D = c->docs;
    for (int64_t b = 0; b < rows; b++) {
        const int64_t g = rb + b;
        if (!off) {
            fill_tokens(c, text, step, g, N, row, nl);
        } else {
            const int64_t *r = off + g * (D + 1);
            for (int64_t i = 0; i < D; i++) {
                int64_t len = r[i + 1] - r[i];
                if (len == 0)
                    continue;
                fill_tokens(c, text, step, g * 65536 + i, len, drow, dnl);
                memcpy(row + r[i], drow, (size_t)len * sizeof *row);
                memcpy(nl + r[i], dnl, (size_t)len);
            }
            row[N] = 0; /* the label of a document's last token is ignored anyway */
        }
        uly_shard_labels(row, nl, N, off ? off + g * (D + 1) : NULL, off ? D : 0, tb, toks, tok + b * toks,
                         tgt + b * toks, pos + b * toks);
    }
}

/* ------------------------------------------------------------------ dump */

/* Gather (rows, toks, w) blocks of every rank into (batch, seq, w) on rank 0. */
static int gather_tokens(const struct train_cfg *c, int rank, int P, const void *mine, int64_t w, MPI_Datatype t,
                         size_t es, void *out, void *scratch)
{
    int *cnt = calloc((size_t)P * 2, sizeof *cnt);
    if (!cnt)
        return 1;
    int *dis = cnt + P, total = 0;
    for (int s = 0; s < P; s++) {
        int64_t rb, rn, tb, tn;
        uly_split(c->batch, (int)c->dp, s / (int)c->sp, &rb, &rn);
        uly_split(c->seq, (int)c->sp, s % (int)c->sp, &tb, &tn);
        cnt[s] = (int)(rn * tn * w);
        dis[s] = total;
        total += cnt[s];
    }
    int rc = MPI_Gatherv(mine, cnt[rank], t, scratch, cnt, dis, t, 0, MPI_COMM_WORLD);
    if (rank == 0)
        for (int s = 0; s < P; s++) {
            int64_t rb, rn, tb, tn;
            uly_split(c->batch, (int)c->dp, s / (int)c->sp, &rb, &rn);
            uly_split(c->seq, (int)c->sp, s % (int)c->sp, &tb, &tn);
            for (int64_t b = 0; b < rn; b++)
                memcpy((char *)out + (size_t)(((rb + b) * c->seq + tb) * w) * es,
                       (char *)scratch + ((size_t)dis[s] + (size_t)(b * tn * w)) * es, (size_t)(tn * w) * es);
        }
    free(cnt);
    return rc != MPI_SUCCESS;
}

static int dump_npy(const char *dir, const char *name, uly_dtype t, int nd, const int64_t *shape, const void *x,
                    char *msg, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    if (uly_npy_write(path, t, nd, shape, x)) {
        snprintf(msg, len, "--dump: %s", uly_last_error());
        return 1;
    }
    return 0;
}

/* Parameters (before the step) or their gradients, one file per tensor. */
static int dump_params(uly_train *T, const char *dir, const char *prefix, const float *base, char *msg, size_t len)
{
    for (int i = 0; i < uly_train_param_count(); i++) {
        const char *name;
        int nd;
        int64_t shape[3], off;
        char fn[256];
        uly_train_param_info(T, i, &name, &nd, shape, &off);
        snprintf(fn, sizeof fn, "%s%s", prefix, name);
        if (dump_npy(dir, fn, ULY_F32, nd, shape, base + off, msg, len))
            return 1;
    }
    return 0;
}

/* Inputs, activations, logits, losses and gradients of the step just run (update = 0). */
static int dump_step(uly_train *T, const struct train_cfg *c, int rank, int P, const char *dir, const int32_t *tok,
                     const int32_t *tgt, const int32_t *pos, const int64_t *off, const uly_train_stats *st, char *msg,
                     size_t len)
{
    const int64_t B = c->batch, N = c->seq, L = c->layers, wmax = c->vocab > 4 * c->channels ? c->vocab : 4 * c->channels;
    int bad = 0;
    float *full = NULL, *scratch = NULL;
    double *d = NULL;
    int32_t *ibuf = NULL, *iscr = NULL;
    full = malloc((size_t)(L * B * N * wmax) * sizeof *full);
    scratch = malloc((size_t)(B * N * wmax) * sizeof *scratch);
    d = malloc((size_t)(B * N) * sizeof *d);
    ibuf = malloc((size_t)(B * N) * sizeof *ibuf);
    iscr = malloc((size_t)(B * N) * sizeof *iscr);
    int nomem = !full || !scratch || !d || !ibuf || !iscr, any;
    MPI_Allreduce(&nomem, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any) {
        snprintf(msg, len, "--dump: cannot allocate the gather buffers");
        bad = 1;
        goto out;
    }
    const int64_t shape2[2] = {B, N};
    const int32_t *ins[3] = {tok, tgt, pos};
    const char *inames[3] = {"tokens", "targets", "positions"};
    for (int k = 0; k < 3 && !bad; k++) {
        bad |= gather_tokens(c, rank, P, ins[k], 1, MPI_INT, sizeof(int32_t), ibuf, iscr);
        if (rank == 0 && !bad) {
            for (int64_t i = 0; i < B * N; i++)
                d[i] = ibuf[i];
            bad |= dump_npy(dir, inames[k], ULY_F64, 2, shape2, d, msg, len);
        }
    }
    if (rank == 0 && off && !bad) {
        const int64_t sh[2] = {B, c->docs + 1};
        double *od = malloc((size_t)(B * (c->docs + 1)) * sizeof *od);
        if (!od)
            bad = 1, snprintf(msg, len, "--dump: out of memory");
        for (int64_t i = 0; od && i < B * (c->docs + 1); i++)
            od[i] = (double)off[i];
        if (od)
            bad |= dump_npy(dir, "doc_offsets", ULY_F64, 2, sh, od, msg, len);
        free(od);
    }
    const char *acts[13] = {"enc", "ln1", "q", "k", "v", "atty", "res2", "ln2", "fch", "fchg", "res3", "lnf", "logits"};
    for (int k = 0; k < 13 && !bad; k++) {
        int per_layer = k >= 1 && k <= 10;
        int64_t w = 0;
        for (int64_t l = 0; l < (per_layer ? L : 1) && !bad; l++) {
            const float *p;
            uly_train_activation(T, acts[k], l, &p, &w);
            bad |= gather_tokens(c, rank, P, p, w, MPI_FLOAT, sizeof(float), full + l * B * N * w, scratch);
        }
        if (rank == 0 && !bad) {
            char fn[64];
            snprintf(fn, sizeof fn, "%s%s", k == 12 ? "" : "act_", acts[k]);
            const int64_t sh4[4] = {L, B, N, w}, sh3[3] = {B, N, w};
            bad |= per_layer ? dump_npy(dir, fn, ULY_F32, 4, sh4, full, msg, len)
                             : dump_npy(dir, fn, ULY_F32, 3, sh3, full, msg, len);
        }
    }
    if (rank == 0 && !bad) {
        const int64_t one = 1;
        if (!c->fast) { /* the fast mode does not gather per-token losses */
            uly_train_token_losses(T, d);
            bad |= dump_npy(dir, "token_loss", ULY_F64, 2, shape2, d, msg, len);
        }
        bad |= dump_npy(dir, "loss", ULY_F64, 1, &one, &st->loss, msg, len);
        bad |= dump_params(T, dir, "grad_", uly_train_grads(T), msg, len);
    }
out:
    free(full);
    free(scratch);
    free(d);
    free(ibuf);
    free(iscr);
    return bad;
}

/* ----------------------------------------------------------------- files */

static int read_file(const char *path, unsigned char **out, size_t *len, char *msg, size_t mlen)
{
    text_data t = {NULL, 0};
    int st = load_text("--resume", path, 0, &t, msg, mlen);
    if (st)
        return st;
    *out = t.bytes;
    *len = t.len;
    return 0;
}

/* Write a whole file through a temporary name and a rename. */
static int write_atomic(const char *path, const void *buf, size_t len, char *msg, size_t mlen)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        snprintf(msg, mlen, "%s: path too long", path);
        return EXIT_BADINPUT;
    }
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(msg, mlen, "%s: %s", path, strerror(errno));
        return 1;
    }
    int bad = fwrite(buf, 1, len, f) != len;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        snprintf(msg, mlen, "%s: cannot write (%s)", path, strerror(errno));
        remove(tmp);
        return 1;
    }
    return 0;
}

static int plot_losses(const char *file, const double *loss, const int64_t *step, int64_t n)
{
#ifndef GNUPLOT_PATH
    (void)loss;
    (void)step;
    (void)n;
    fprintf(stderr, "ulysses train: --plot %s: gnuplot was not found when ulysses was configured; install "
                    "gnuplot and re-run configure\n", file);
    return 1;
#else
    FILE *g = popen(GNUPLOT_PATH " 2>&1", "w");
    if (!g) {
        fprintf(stderr, "ulysses train: --plot: cannot run %s\n", GNUPLOT_PATH);
        return 1;
    }
    fprintf(g, "set terminal svg size 900,600 dynamic\nset output '%s'\nset grid\n", file);
    fprintf(g, "set xlabel 'step'\nset ylabel 'loss (nats per labelled token)'\n");
    fprintf(g, "plot '-' using 1:2 with lines title 'training loss'\n");
    for (int64_t i = 0; i < n; i++)
        fprintf(g, "%lld %.9g\n", (long long)step[i], loss[i]);
    fprintf(g, "e\n");
    int st = pclose(g);
    if (st != 0) {
        fprintf(stderr, "ulysses train: --plot: gnuplot failed (status %d)\n", st);
        return 1;
    }
    return 0;
#endif
}

/* ------------------------------------------------------------------ main */

static int train_mpi(int argc, char **argv, int rank, int P)
{
    struct train_cfg c;
    memset(&c, 0, sizeof c);
    c.layers = 2; c.channels = 128; c.heads = 4; c.seq = 128; c.steps = 50; c.seed = 1;
    c.lr = 5e-3; c.wd = 0.1; c.clip = 1.0; c.data = "synthetic";
    const arg_opt opts[] = {
        {"layers", ARG_INT, &c.layers, 1, 1024, "L", "transformer blocks (default 2)", NULL, NULL},
        {"channels", ARG_INT, &c.channels, 1, 1 << 16, "C", "model width, a multiple of --heads (default 128)", NULL, NULL},
        {"heads", ARG_INT, &c.heads, 1, 1 << 12, "H", "query heads (default 4)", NULL, NULL},
        {"kv-heads", ARG_INT, &c.kv_heads, 1, 1 << 12, "Hkv", "key/value heads, H % Hkv == 0 (default H)", NULL, &c.seen_kv},
        {"seq", ARG_INT, &c.seq, 4, 1 << 24, "N", "tokens per row, K/M suffixes allowed (default 128)", NULL, NULL},
        {"vocab", ARG_INT, &c.vocab, 6, 1 << 20, "V", "vocabulary (default 16 synthetic, 256 text)", NULL, &c.seen_vocab},
        {"batch", ARG_INT, &c.batch, 1, 1 << 20, "B", "rows per step, all ranks together (default max(8, dp))", NULL, &c.seen_batch},
        {"dp", ARG_INT, &c.dp, 1, 1 << 20, "D", "data-parallel degree (default 1)", NULL, &c.seen_dp},
        {"sp", ARG_INT, &c.sp, 1, 1 << 20, "S", "sequence-parallel degree (default ranks / dp)", NULL, &c.seen_sp},
        {"steps", ARG_INT, &c.steps, 1, INT64_MAX / 2, "K", "train until this many steps are done (default 50)", NULL, NULL},
        {"lr", ARG_REAL, &c.lr, 0, 0, "LR", "AdamW learning rate (default 5e-3)", NULL, NULL},
        {"weight-decay", ARG_REAL, &c.wd, 0, 0, "W", "AdamW decoupled weight decay of the matrices (default 0.1)", NULL, NULL},
        {"clip", ARG_REAL, &c.clip, 0, 0, "G", "clip the gradient norm to G, 0: never (default 1)", NULL, NULL},
        {"seed", ARG_INT, &c.seed, 0, INT64_MAX, "S", "seed of the initial weights and of the data (default 1)", NULL, NULL},
        {"data", ARG_STR, &c.data, 0, 0, "SRC", "'synthetic' (key-value retrieval) or a text file (byte tokens)", NULL, NULL},
        {"docs", ARG_INT, &c.docs, 1, 1 << 20, "K", "pack K documents of random lengths per row (attention stays inside each)", NULL, NULL},
        {"dump", ARG_STR, &c.dump, 0, 0, "DIR", "write weights, inputs, activations, logits, loss and gradients of the first step as .npy", NULL, NULL},
        {"log", ARG_STR, &c.log, 0, 0, "F.csv", "write step, loss, tokens/s and phase times per step", NULL, NULL},
        {"plot", ARG_STR, &c.plot, 0, 0, "F.svg", "draw the loss curve with gnuplot", NULL, NULL},
        {"checkpoint", ARG_STR, &c.checkpoint, 0, 0, "F", "write parameters and optimizer state at the end", NULL, NULL},
        {"resume", ARG_STR, &c.resume, 0, 0, "F", "start from a checkpoint (its step count included)", NULL, NULL},
        {"fast", ARG_FLAG, &c.fast, 0, 0, NULL, "reduce gradients with MPI_Allreduce (not bitwise across grids)", NULL, NULL},
        {"canon-sp", ARG_INT, &c.canon_sp, 1, 64, "K", "exact sums stay identical for every SP <= K (default max(4, sp))", NULL, NULL},
        {"threads", ARG_INT, &c.threads, 1, 1024, "T", "OpenMP threads of the attention kernel", NULL, NULL},
        {"quiet", ARG_FLAG, &c.quiet, 0, 0, NULL, "no progress line per step", NULL, NULL},
        {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    char msg[1024] = "";
    int prc = args_parse("ulysses train", argc - 1, argv + 1, opts, msg, sizeof msg);
    if (prc == ARGS_HELP) {
        if (rank == 0)
            args_usage(stdout, "ulysses", synopsis, opts);
        return 0;
    }
    int st = prc == ARGS_ERROR ? EXIT_BADINPUT : 0;
    if ((st = agree_fail(rank, st, msg)))
        return st;
    /* resolve defaults; adjustments are printed */
    int text = strcmp(c.data, "synthetic") != 0;
    if (!c.seen_kv)
        c.kv_heads = c.heads;
    if (!c.seen_vocab)
        c.vocab = text ? 256 : 16;
    if (!c.seen_dp)
        c.dp = c.seen_sp && c.sp > 0 && P % c.sp == 0 ? P / c.sp : 1;
    if (!c.seen_sp)
        c.sp = P / c.dp;
    if (!c.seen_batch)
        c.batch = c.dp > 8 ? c.dp : 8;
    if (!c.canon_sp)
        c.canon_sp = c.sp > 4 ? (int)c.sp : 4;
    if (c.dp * c.sp != P)
        snprintf(msg, sizeof msg, "--dp %lld x --sp %lld must equal the %d ranks", (long long)c.dp, (long long)c.sp, P),
            st = EXIT_BADINPUT;
    else if (c.channels % c.heads)
        snprintf(msg, sizeof msg, "--channels %lld is not a multiple of --heads %lld", (long long)c.channels,
                 (long long)c.heads), st = EXIT_BADINPUT;
    else if (c.heads % c.kv_heads)
        snprintf(msg, sizeof msg, "--heads %lld is not a multiple of --kv-heads %lld", (long long)c.heads,
                 (long long)c.kv_heads), st = EXIT_BADINPUT;
    else if (text && c.vocab < 256)
        snprintf(msg, sizeof msg, "--vocab %lld: text data has byte tokens, it needs 256", (long long)c.vocab),
            st = EXIT_BADINPUT;
    else if (!text && c.vocab < 6)
        snprintf(msg, sizeof msg, "--vocab %lld: the synthetic task needs at least 6 tokens", (long long)c.vocab),
            st = EXIT_BADINPUT;
    else if (c.batch < c.dp)
        snprintf(msg, sizeof msg, "--batch %lld is smaller than --dp %lld", (long long)c.batch, (long long)c.dp),
            st = EXIT_BADINPUT;
    else if (c.docs > c.seq)
        snprintf(msg, sizeof msg, "--docs %lld: more documents than the %lld tokens of a row", (long long)c.docs,
                 (long long)c.seq), st = EXIT_BADINPUT;
    else if (c.seq < c.sp)
        snprintf(msg, sizeof msg, "--seq %lld is shorter than --sp %lld", (long long)c.seq, (long long)c.sp),
            st = EXIT_BADINPUT;
    else if (c.canon_sp < c.sp && !c.fast)
        snprintf(msg, sizeof msg, "--canon-sp %lld is smaller than --sp %lld", (long long)c.canon_sp, (long long)c.sp),
            st = EXIT_BADINPUT;
    else if (!(c.lr >= 0 && c.lr < 10) || !(c.wd >= 0 && c.wd < 10) || !(c.clip >= 0))
        snprintf(msg, sizeof msg, "--lr, --weight-decay and --clip must be finite, >= 0 (lr, wd < 10)"),
            st = EXIT_BADINPUT;
    else if (c.plot && rank == 0) {
#ifndef GNUPLOT_PATH
        snprintf(msg, sizeof msg, "--plot: gnuplot was not found when ulysses was configured"), st = EXIT_BADINPUT;
#endif
    }
    if ((st = agree_fail(rank, st, msg)))
        return st;
    if ((st = agree_options(rank, &c)))
        return st;
    if (rank == 0 && !c.seen_batch)
        printf("ulysses train: --batch not given: %lld rows per step\n", (long long)c.batch);
    /* data */
    text_data td = {NULL, 0};
    if (text)
        st = load_text("--data", c.data, c.seq, &td, msg, sizeof msg);
    if ((st = agree_fail(rank, st, msg))) {
        free(td.bytes);
        return st;
    }
    uly_gpt_config gc = {c.vocab, c.seq, c.layers, c.channels, c.heads, c.kv_heads};
    uly_train_opts o;
    uly_train_opts_default(&o);
    o.dp = (int)c.dp;
    o.sp = (int)c.sp;
    o.batch = c.batch;
    o.fast = c.fast;
    o.canon_sp = (int)c.canon_sp;
    o.lr = c.lr;
    o.weight_decay = c.wd;
    o.grad_clip = c.clip;
    o.seed = (uint64_t)c.seed;
    o.kernel.threads = (int)c.threads;
    uly_train *T = NULL;
    int rc = uly_train_create(MPI_COMM_WORLD, &gc, &o, &T);
    if (rc) {
        if (rank == 0)
            fprintf(stderr, "ulysses train: %s\n", uly_last_error());
        free(td.bytes);
        return exit_status_of(rc);
    }
    if (c.resume) {
        unsigned char *img = NULL;
        size_t ilen = 0;
        st = read_file(c.resume, &img, &ilen, msg, sizeof msg);
        if ((st = agree_fail(rank, st, msg))) {
            uly_train_free(T);
            free(td.bytes);
            return st;
        }
        rc = uly_train_checkpoint_read(T, img, ilen);
        free(img);
        if (rc) {
            if (rank == 0)
                fprintf(stderr, "ulysses train: --resume %s: %s\n", c.resume, uly_last_error());
            uly_train_free(T);
            free(td.bytes);
            return exit_status_of(rc);
        }
    }
    int64_t rb, rows, tb, toks;
    uly_train_shard(T, &rb, &rows, &tb, &toks);
    const int64_t first = uly_train_steps_done(T), n = rows * toks;
    int fail = 0;
    int32_t *row = malloc((size_t)(c.seq + 1) * sizeof *row), *tok = malloc((size_t)n * sizeof *tok),
            *tgt = malloc((size_t)n * sizeof *tgt), *pos = malloc((size_t)n * sizeof *pos);
    uint8_t *nl = malloc((size_t)c.seq), *dnl = malloc((size_t)c.seq);
    int32_t *drow = malloc((size_t)(c.seq + 1) * sizeof *drow);
    int64_t *off = c.docs ? malloc((size_t)(c.batch * (c.docs + 1)) * sizeof *off) : NULL;
    int64_t nsteps = c.steps > first ? c.steps - first : 0;
    double *losses = calloc((size_t)nsteps + 1, sizeof *losses);
    int64_t *stepno = calloc((size_t)nsteps + 1, sizeof *stepno);
    fail = !row || !tok || !tgt || !pos || !nl || !dnl || !drow || (c.docs && !off) || !losses || !stepno;
    if (!fail && c.dump && rank == 0 && mkdir(c.dump, 0777) != 0 && errno != EEXIST)
        snprintf(msg, sizeof msg, "--dump %s: %s", c.dump, strerror(errno)), fail = EXIT_BADINPUT;
    FILE *logf = NULL;
    if (!fail && c.log && rank == 0) {
        logf = fopen(c.log, "w");
        if (!logf)
            snprintf(msg, sizeof msg, "--log %s: %s", c.log, strerror(errno)), fail = EXIT_BADINPUT;
        else
            fprintf(logf, "step,loss,tokens,tokens_per_s,t_step,t_attn,t_a2a,t_reduce,t_other\n");
    } else if (fail)
        snprintf(msg, sizeof msg, "rank %d: cannot allocate the batch buffers", rank);
    if ((st = agree_fail(rank, fail, msg)))
        goto done;
    if (rank == 0 && !c.quiet)
        printf("ulysses train: %lld parameters, %d ranks (dp %lld x sp %lld), %lld x %lld tokens per step%s, %s data, "
               "%s sums; steps %lld..%lld\n", (long long)uly_train_nparams(T), P, (long long)c.dp, (long long)c.sp,
               (long long)c.batch, (long long)c.seq, c.docs ? " (packed documents)" : "", text ? c.data : "synthetic",
               c.fast ? "fast" : "exact", (long long)first + 1, (long long)c.steps);
    for (int64_t s = first; s < c.steps; s++) {
        if (off)
            make_docs(&c, s, off);
        make_batch(T, &c, text ? &td : NULL, s, off, row, drow, nl, dnl, tok, tgt, pos);
        uly_train_stats stt;
        if (c.dump && s == first) { /* the weights this step uses, then its values without the update */
            int dst = rank == 0 ? dump_params(T, c.dump, "", uly_train_params(T), msg, sizeof msg) : 0;
            if ((dst = agree_fail(rank, dst, msg))) {
                st = dst;
                goto done;
            }
            rc = uly_train_step(T, tok, tgt, pos, off, c.docs, 0, &stt);
            if (!rc && (dst = agree_fail(rank, dump_step(T, &c, rank, P, c.dump, tok, tgt, pos, off, &stt, msg,
                                                         sizeof msg), msg))) {
                st = dst;
                goto done;
            }
            if (!rc && rank == 0)
                printf("ulysses train: --dump %s: step %lld written (doc/train.md lists the files)\n", c.dump,
                       (long long)s + 1);
        }
        rc = uly_train_step(T, tok, tgt, pos, off, c.docs, 1, &stt);
        if (rc) {
            if (rank == 0)
                fprintf(stderr, "ulysses train: step %lld: %s\n", (long long)s + 1, uly_last_error());
            st = exit_status_of(rc) == EXIT_BADINPUT ? EXIT_BADINPUT : 1;
            goto done;
        }
        double tv[4] = {stt.t_total, stt.t_attn, stt.t_a2a, stt.t_reduce}, tm[4];
        MPI_Allreduce(tv, tm, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        double tps = (double)c.batch * (double)c.seq / tm[0];
        double other = tm[0] - tm[1] - tm[2] - tm[3];
        losses[s - first] = stt.loss;
        stepno[s - first] = s + 1;
        if (rank == 0) {
            if (!c.quiet)
                printf("step %5lld/%lld  loss %.6f  %9.0f tok/s  %.3f s (attention %2.0f%%, all-to-all %2.0f%%, "
                       "gradient sums %2.0f%%, rest %2.0f%%)\n", (long long)s + 1, (long long)c.steps, stt.loss, tps,
                       tm[0], 100 * tm[1] / tm[0], 100 * tm[2] / tm[0], 100 * tm[3] / tm[0],
                       100 * (other > 0 ? other : 0) / tm[0]);
            if (logf)
                fprintf(logf, "%lld,%.9g,%lld,%.1f,%.6f,%.6f,%.6f,%.6f,%.6f\n", (long long)s + 1, stt.loss,
                        (long long)stt.count, tps, tm[0], tm[1], tm[2], tm[3], other);
            fflush(stdout);
        }
    }
    if (logf) {
        if (fclose(logf) != 0)
            fprintf(stderr, "ulysses train: --log %s: write error\n", c.log), st = 1;
        logf = NULL;
    }
    if (c.checkpoint) {
        int wst = 0;
        if (rank == 0) {
            size_t len = uly_train_checkpoint_size(T);
            void *img = malloc(len);
            if (!img)
                snprintf(msg, sizeof msg, "cannot allocate the checkpoint image"), wst = 1;
            else if (uly_train_checkpoint_write(T, img, len))
                snprintf(msg, sizeof msg, "%s", uly_last_error()), wst = 1;
            else
                wst = write_atomic(c.checkpoint, img, len, msg, sizeof msg);
            free(img);
        }
        if ((wst = agree_fail(rank, wst, msg)))
            st = wst;
    }
    if (c.plot && rank == 0 && nsteps > 0 && plot_losses(c.plot, losses, stepno, nsteps))
        st = 1;
    MPI_Bcast(&st, 1, MPI_INT, 0, MPI_COMM_WORLD);
done:
    if (logf)
        fclose(logf);
    free(row);
    free(tok);
    free(tgt);
    free(pos);
    free(nl);
    free(dnl);
    free(drow);
    free(off);
    free(losses);
    free(stepno);
    free(td.bytes);
    uly_train_free(T);
    return st;
}

int cmd_train(int argc, char **argv)
{
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited)
        MPI_Init(NULL, NULL);
    int rank = 0, P = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    int status = train_mpi(argc, argv, rank, P);
    MPI_Finalize();
    return status;
}
