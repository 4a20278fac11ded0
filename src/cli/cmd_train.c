/* SPDX-License-Identifier: Apache-2.0 */
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mpi.h>

#include "args.h"
#include "base/base_json.h"
#include "base/base_progress.h"
#include "cli.h"
#include "config.h"
#include "drv.h"
#include "ulysses_train.h"

struct train_cfg {
    int64_t layers, channels, heads, kv_heads, seq, vocab, batch, dp, sp, steps, seed, threads, canon_sp;
    double lr, wd, clip;
    int64_t docs, tiled_mlp;
    const char *data, *log, *checkpoint, *resume, *plot, *dump;
    int fast, quiet, force, text, tiled_loss, json;
    int seen_kv, seen_vocab, seen_dp, seen_sp, seen_batch;
};

static const char synopsis[] =
    "train [--layers L] [--channels C] [--heads H] [--kv-heads Hkv] [--seq N] [--vocab V]\n"
    "             [--batch B] [--dp D] [--sp S] [--steps K] [--lr LR] [--seed S]\n"
    "             [--data synthetic|FILE] [--docs K] [--log F.csv] [--plot F.svg]\n"
    "             [--dump DIR] [--checkpoint F] [--resume F] [--fast] [--force]\n"
    "             [--tiled-loss] [--tiled-mlp K] [--json]\n"
    "Run under 'mpirun -np P': P = dp * sp ranks, each holding a contiguous token shard\n"
    "of dp's rows; the losses are bitwise identical for every dp and sp (doc/train.md).\n"
    "Exit status: 0 success, 1 run-time failure, 2 bad input (doc/reliability.md).";

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

/* Gather (rows, toks, w) blocks of every rank of the grid g into
 * (batch, seq, w) on rank 0. */
static int gather_tokens(drv *d, const uly_grid2 *g, const void *mine, int64_t w, MPI_Datatype t, size_t es,
                         void *out, void *scratch)
{
    const int P = d->size;
    int *cnt = drv_alloc_n(d, (size_t)P * 2, sizeof *cnt, "the gather counts (--dump)");
    if (!cnt)
        return d->code;
    int *dis = cnt + P, total = 0;
    for (int s = 0; s < P; s++) {
        int64_t rb, rn, tb, tn;
        uly_grid2_part(g, s, &rb, &rn, &tb, &tn);
        cnt[s] = (int)(rn * tn * w);
        dis[s] = total;
        total += cnt[s];
    }
    int rc = drv_mpi(d, MPI_Gatherv(mine, cnt[d->rank], t, scratch, cnt, dis, t, 0, d->comm), "MPI_Gatherv (--dump)");
    if (d->rank == 0 && !rc)
        for (int s = 0; s < P; s++) {
            int64_t rb, rn, tb, tn;
            uly_grid2_part(g, s, &rb, &rn, &tb, &tn);
            for (int64_t b = 0; b < rn; b++)
                memcpy((char *)out + (size_t)(((rb + b) * g->seq + tb) * w) * es,
                       (char *)scratch + ((size_t)dis[s] + (size_t)(b * tn * w)) * es, (size_t)(tn * w) * es);
        }
    drv_free(cnt);
    return rc ? d->code : 0;
}

/* The run's inputs (--data, --resume), which no output may be: set by
 * train_outputs, read by dump_npy (rank 0). */
enum { I_DATA, I_RESUME, NIN };
static drv_in train_ins[NIN];

/* One dump file, written atomically (rank 0). */
static int dump_npy(drv *d, const char *dir, const char *name, uly_dtype t, int nd, const int64_t *shape,
                    const void *x)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s.npy", dir, name) >= (int)sizeof path)
        return drv_fail(d, DRV_BADINPUT, "--dump %s: path too long", dir);
    drv_out o = {.path = path, .what = "--dump"};
    if (drv_out_prepare(d, &o, 1, train_ins, NIN) || drv_out_npy(d, &o, t, nd, shape, x) ||
        drv_out_commit(d, &o, 1)) {
        drv_out_discard(&o, 1);
        return d->code;
    }
    return 0;
}

/* Parameters (before the step) or their gradients, one file per tensor. */
static int dump_params(drv *d, uly_train *T, const char *dir, const char *prefix, const float *base)
{
    for (int i = 0; i < uly_train_param_count(); i++) {
        const char *name;
        int nd;
        int64_t shape[3], off;
        char fn[256];
        uly_train_param_info(T, i, &name, &nd, shape, &off);
        snprintf(fn, sizeof fn, "%s%s", prefix, name);
        if (dump_npy(d, dir, fn, ULY_F32, nd, shape, base + off))
            return d->code;
    }
    return 0;
}

/* Inputs, activations, logits, losses and gradients of the step just run
 * (update = 0).  Collective; a failure is recorded in d (drv_sync follows). */
static int dump_step(drv *d, uly_train *T, const struct train_cfg *c, const uly_grid2 *g, const char *dir,
                     const int32_t *tok, const int32_t *tgt, const int32_t *pos, const int64_t *off,
                     const uly_train_stats *st)
{
    const int64_t B = c->batch, N = c->seq, L = c->layers, wmax = c->vocab > 4 * c->channels ? c->vocab : 4 * c->channels;
    const int rank = d->rank;
    float *full = NULL, *scratch = NULL;
    double *dd = NULL;
    int32_t *ibuf = NULL, *iscr = NULL;
    full = drv_alloc_n(d, (size_t)(L * B * N * wmax), sizeof *full, "the gather buffers (--dump)");
    if (full)
        scratch = drv_alloc_n(d, (size_t)(B * N * wmax), sizeof *scratch, "the gather buffers (--dump)");
    if (scratch)
        dd = drv_alloc_n(d, (size_t)(B * N), sizeof *dd, "the gather buffers (--dump)");
    if (dd)
        ibuf = drv_alloc_n(d, (size_t)(B * N), sizeof *ibuf, "the gather buffers (--dump)");
    if (ibuf)
        iscr = drv_alloc_n(d, (size_t)(B * N), sizeof *iscr, "the gather buffers (--dump)");
    if (drv_sync(d))
        goto out;
    const int64_t shape2[2] = {B, N};
    const int32_t *ins[3] = {tok, tgt, pos};
    const char *inames[3] = {"tokens", "targets", "positions"};
    for (int k = 0; k < 3; k++) {
        if (gather_tokens(d, g, ins[k], 1, MPI_INT, sizeof(int32_t), ibuf, iscr))
            goto out;
        if (rank == 0 && !d->code) {
            for (int64_t i = 0; i < B * N; i++)
                dd[i] = ibuf[i];
            dump_npy(d, dir, inames[k], ULY_F64, 2, shape2, dd);
        }
    }
    if (rank == 0 && off && !d->code) {
        const int64_t sh[2] = {B, c->docs + 1};
        double *od = drv_alloc_n(d, (size_t)(B * (c->docs + 1)), sizeof *od, "the document offsets (--dump)");
        for (int64_t i = 0; od && i < B * (c->docs + 1); i++)
            od[i] = (double)off[i];
        if (od)
            dump_npy(d, dir, "doc_offsets", ULY_F64, 2, sh, od);
        drv_free(od);
    }
    const char *acts[13] = {"enc", "ln1", "q", "k", "v", "atty", "res2", "ln2", "fch", "fchg", "res3", "lnf", "logits"};
    for (int k = 0; k < 13; k++) {
        int per_layer = k >= 1 && k <= 10;
        int64_t w = 0;
        for (int64_t l = 0; l < (per_layer ? L : 1); l++) {
            const float *p;
            uly_train_activation(T, acts[k], l, &p, &w);
            if (gather_tokens(d, g, p, w, MPI_FLOAT, sizeof(float), full + l * B * N * w, scratch))
                goto out;
        }
        if (rank == 0 && !d->code) {
            char fn[64];
            snprintf(fn, sizeof fn, "%s%s", k == 12 ? "" : "act_", acts[k]);
            const int64_t sh4[4] = {L, B, N, w}, sh3[3] = {B, N, w};
            if (per_layer)
                dump_npy(d, dir, fn, ULY_F32, 4, sh4, full);
            else
                dump_npy(d, dir, fn, ULY_F32, 3, sh3, full);
        }
    }
    if (rank == 0 && !d->code) {
        const int64_t one = 1;
        if (!c->fast) { /* the fast mode does not gather per-token losses */
            uly_train_token_losses(T, dd);
            dump_npy(d, dir, "token_loss", ULY_F64, 2, shape2, dd);
        }
        if (!d->code)
            dump_npy(d, dir, "loss", ULY_F64, 1, &one, &st->loss);
        if (!d->code)
            dump_params(d, T, dir, "grad_", uly_train_grads(T));
    }
out:
    drv_free(full);
    drv_free(scratch);
    drv_free(dd);
    drv_free(ibuf);
    drv_free(iscr);
    return d->code;
}

/* ----------------------------------------------------------------- files */

/* Rank 0 reads a whole input file (at most max bytes) and broadcasts it:
 * every rank computes on the same bytes.  Collective; on failure *buf is
 * NULL on every rank and the status is agreed (drv_sync's value returned). */
static int read_shared(drv *d, const char *what, const char *path, size_t max, unsigned char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    char *b = NULL;
    size_t n = 0;
    if (d->rank == 0) {
        int e = uly_read_file(path, max, &b, &n);
        if (e)
            drv_fail(d, e == ULY_READ_NOMEM || e == ULY_READ_IO ? DRV_RUNTIME : DRV_BADINPUT, "%s %s", what,
                     uly_base_last_error());
    }
    int rc = drv_sync(d);
    uint64_t n64 = n;
    if (!rc && d->size > 1 && drv_mpi(d, MPI_Bcast(&n64, 1, MPI_UINT64_T, 0, d->comm), "MPI_Bcast (file size)"))
        rc = drv_sync(d);
    if (!rc && d->rank != 0) {
        b = drv_alloc(d, (size_t)n64 + 1, what);
        n = (size_t)n64;
    }
    if (!rc)
        rc = drv_sync(d);
    for (size_t o = 0; !rc && d->size > 1 && o < n;) {
        int cnt = n - o > (size_t)1 << 30 ? 1 << 30 : (int)(n - o);
        drv_mpi(d, MPI_Bcast(b + o, cnt, MPI_BYTE, 0, d->comm), "MPI_Bcast (file content)");
        rc = drv_sync(d);
        o += (size_t)cnt;
    }
    if (rc) {
        drv_free(b);
        return rc;
    }
    *buf = (unsigned char *)b;
    *len = n;
    return 0;
}

/* write(2) the whole buffer to fd; 0 or errno. */
static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t k = write(fd, p, len > ((size_t)1 << 30) ? (size_t)1 << 30 : len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return errno;
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

/* Draw the loss curve into the prepared output o (rank 0). */
static int plot_losses(drv *d, drv_out *o, const double *loss, const int64_t *step, int64_t n)
{
#ifndef GNUPLOT_PATH
    (void)loss;
    (void)step;
    (void)n;
    return drv_fail(d, DRV_BADINPUT, "--plot %s: gnuplot was not found when ulysses was configured; install "
                    "gnuplot and re-run configure", o->path);
#else
    FILE *g = popen(GNUPLOT_PATH " 2>&1", "w");
    if (!g)
        return drv_fail(d, DRV_RUNTIME, "--plot: cannot run %s: %s", GNUPLOT_PATH, strerror(errno));
    fprintf(g, "set terminal svg size 900,600 dynamic\nset output ");
    uly_fput_quoted(g, o->tmp, '\'', 1);
    fprintf(g, "\nset grid\nset xlabel 'step'\nset ylabel 'loss (nats per labelled token)'\n");
    fprintf(g, "plot '-' using 1:2 with lines title 'training loss'\n");
    for (int64_t i = 0; i < n; i++)
        fprintf(g, "%lld %.9g\n", (long long)step[i], loss[i]);
    fprintf(g, "e\nset output\n");
    int st = pclose(g);
    char note[512];
    if (st != 0)
        return drv_fail(d, DRV_RUNTIME, "--plot %s: gnuplot failed (status %d)%s", o->path, st,
                        uly_out_note(o, note, sizeof note));
    return drv_out_ready(d, o);
#endif
}

/* ------------------------------------------------------------------ main */

enum { O_LOG, O_CKPT, O_PLOT, NOUT };
enum { NOPTS = 32 };

static void train_options(struct train_cfg *c, arg_opt *o)
{
    const arg_opt t[] = {
        {"layers", ARG_INT, &c->layers, 1, 1024, "L", "transformer blocks (default 2)", NULL, NULL},
        {"channels", ARG_INT, &c->channels, 1, 1 << 16, "C", "model width, a multiple of --heads (default 128)", NULL, NULL},
        {"heads", ARG_INT, &c->heads, 1, 1 << 12, "H", "query heads (default 4)", NULL, NULL},
        {"kv-heads", ARG_INT, &c->kv_heads, 1, 1 << 12, "Hkv", "key/value heads, H % Hkv == 0 (default H)", NULL, &c->seen_kv},
        {"seq", ARG_INT, &c->seq, 4, 1 << 24, "N", "tokens per row, K/M suffixes allowed (default 128)", NULL, NULL},
        {"vocab", ARG_INT, &c->vocab, 6, 1 << 20, "V", "vocabulary (default 16 synthetic, 256 text)", NULL, &c->seen_vocab},
        {"batch", ARG_INT, &c->batch, 1, 1 << 20, "B", "rows per step, all ranks together (default max(8, dp))", NULL, &c->seen_batch},
        {"dp", ARG_INT, &c->dp, 1, 1 << 20, "D", "data-parallel degree (default 1)", NULL, &c->seen_dp},
        {"sp", ARG_INT, &c->sp, 1, 1 << 20, "S", "sequence-parallel degree (default ranks / dp)", NULL, &c->seen_sp},
        {"steps", ARG_INT, &c->steps, 1, 1 << 24, "K", "train until this many steps are done (default 50)", NULL, NULL},
        {"lr", ARG_REAL, &c->lr, 0, 0, "LR", "AdamW learning rate (default 5e-3)", NULL, NULL},
        {"weight-decay", ARG_REAL, &c->wd, 0, 0, "W", "AdamW decoupled weight decay of the matrices (default 0.1)", NULL, NULL},
        {"clip", ARG_REAL, &c->clip, 0, 0, "G", "clip the gradient norm to G, 0: never (default 1)", NULL, NULL},
        {"seed", ARG_INT, &c->seed, 0, INT64_MAX, "S", "seed of the initial weights and of the data (default 1)", NULL, NULL},
        {"data", ARG_STR, &c->data, 0, 0, "SRC", "'synthetic' (key-value retrieval) or a text file (byte tokens; read by rank 0)", NULL, NULL},
        {"docs", ARG_INT, &c->docs, 1, 1 << 20, "K", "pack K documents of random lengths per row (attention stays inside each)", NULL, NULL},
        {"dump", ARG_STR, &c->dump, 0, 0, "DIR", "write weights, inputs, activations, logits, loss and gradients of the first step as .npy", NULL, NULL},
        {"log", ARG_STR, &c->log, 0, 0, "F.csv", "write step, loss, tokens/s and phase times per step", NULL, NULL},
        {"plot", ARG_STR, &c->plot, 0, 0, "F.svg", "draw the loss curve with gnuplot", NULL, NULL},
        {"checkpoint", ARG_STR, &c->checkpoint, 0, 0, "F", "write parameters and optimizer state at the end (may be the --resume file)", NULL, NULL},
        {"resume", ARG_STR, &c->resume, 0, 0, "F", "start from a checkpoint (its step count included; read by rank 0)", NULL, NULL},
        {"fast", ARG_FLAG, &c->fast, 0, 0, NULL, "reduce gradients with MPI_Allreduce (not bitwise across grids)", NULL, NULL},
        {"tiled-loss", ARG_FLAG, &c->tiled_loss, 0, 0, NULL, "LM head and cross-entropy one canonical segment at a time: the whole logits are never stored (bitwise the same losses)", NULL, NULL},
        {"tiled-mlp", ARG_INT, &c->tiled_mlp, 1, 1 << 24, "K", "MLP in K shards of each rank's canonical segments, its hidden recomputed in the backward (bitwise the same losses)", NULL, NULL},
        {"json", ARG_FLAG, &c->json, 0, 0, NULL, "print one JSON object (losses, memory) at the end instead of the step lines", NULL, NULL},
        {"canon-sp", ARG_INT, &c->canon_sp, 1, 64, "K", "exact sums stay identical for every SP <= K (default max(4, sp))", NULL, NULL},
        {"threads", ARG_INT, &c->threads, 1, 1024, "T", "OpenMP threads of the attention kernel", NULL, NULL},
        {"force", ARG_FLAG, &c->force, 0, 0, NULL, "run even when the memory preflight says it will not fit", NULL, NULL},
        {"quiet", ARG_FLAG, &c->quiet, 0, 0, NULL, "no progress line per step (on stdout, or on stderr when it is a terminal and stdout is not)", NULL, NULL},
        {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    memcpy(o, t, sizeof t);
}

/* Parse and resolve the defaults (local: every rank does the same). */
static int train_parse(struct train_cfg *c, drv *d, int argc, char **argv)
{
    memset(c, 0, sizeof *c);
    c->layers = 2; c->channels = 128; c->heads = 4; c->seq = 128; c->steps = 50; c->seed = 1;
    c->lr = 5e-3; c->wd = 0.1; c->clip = 1.0; c->data = "synthetic";
    arg_opt opts[NOPTS];
    train_options(c, opts);
    int prc = drv_parse(d, argc, argv, opts);
    if (prc != DRV_PARSE_OK)
        return prc;
    const int P = d->size;
    c->text = strcmp(c->data, "synthetic") != 0;
    if (!c->seen_kv)
        c->kv_heads = c->heads;
    if (!c->seen_vocab)
        c->vocab = c->text ? 256 : 16;
    if (!c->seen_dp)
        c->dp = c->seen_sp && c->sp > 0 && P % c->sp == 0 ? P / c->sp : 1;
    if (!c->seen_sp)
        c->sp = P / c->dp;
    if (!c->seen_batch)
        c->batch = c->dp > 8 ? c->dp : 8;
    if (!c->canon_sp)
        c->canon_sp = c->sp > 4 ? (int)c->sp : 4;
    if (c->dp * c->sp != P)
        drv_fail(d, DRV_BADINPUT, "--dp %lld x --sp %lld must equal the %d ranks", (long long)c->dp, (long long)c->sp, P);
    else if (c->channels % c->heads)
        drv_fail(d, DRV_BADINPUT, "--channels %lld is not a multiple of --heads %lld", (long long)c->channels,
                 (long long)c->heads);
    else if (c->heads % c->kv_heads)
        drv_fail(d, DRV_BADINPUT, "--heads %lld is not a multiple of --kv-heads %lld", (long long)c->heads,
                 (long long)c->kv_heads);
    else if (c->text && c->vocab < 256)
        drv_fail(d, DRV_BADINPUT, "--vocab %lld: text data has byte tokens, it needs 256", (long long)c->vocab);
    else if (!c->text && c->vocab < 6)
        drv_fail(d, DRV_BADINPUT, "--vocab %lld: the synthetic task needs at least 6 tokens", (long long)c->vocab);
    else if (c->batch < c->dp)
        drv_fail(d, DRV_BADINPUT, "--batch %lld is smaller than --dp %lld", (long long)c->batch, (long long)c->dp);
    else if (c->docs > c->seq)
        drv_fail(d, DRV_BADINPUT, "--docs %lld: more documents than the %lld tokens of a row", (long long)c->docs,
                 (long long)c->seq);
    else if (c->seq < c->sp)
        drv_fail(d, DRV_BADINPUT, "--seq %lld is shorter than --sp %lld", (long long)c->seq, (long long)c->sp);
    else if ((c->tiled_loss || c->tiled_mlp) && c->fast)
        drv_fail(d, DRV_BADINPUT, "--tiled-loss and --tiled-mlp need the exact sums: their tiles are the canonical "
                 "segments, and --fast has one segment per rank");
    else if ((c->tiled_loss || c->tiled_mlp) && c->dump)
        drv_fail(d, DRV_BADINPUT, "--dump writes the whole logits and MLP hidden, which --tiled-loss and --tiled-mlp "
                 "never keep: run it without them (the values are bitwise the same)");
    else if (c->tiled_mlp > c->seq)
        drv_fail(d, DRV_BADINPUT, "--tiled-mlp %lld: more shards than the %lld tokens of a row", (long long)c->tiled_mlp,
                 (long long)c->seq);
    else if (c->canon_sp < c->sp && !c->fast)
        drv_fail(d, DRV_BADINPUT, "--canon-sp %lld is smaller than --sp %lld", (long long)c->canon_sp, (long long)c->sp);
    else if (!(c->lr >= 0 && c->lr < 10) || !(c->wd >= 0 && c->wd < 10) || !(c->clip >= 0) || !isfinite(c->clip))
        drv_fail(d, DRV_BADINPUT, "--lr, --weight-decay and --clip must be finite, >= 0 (lr, wd < 10)");
#ifndef GNUPLOT_PATH
    else if (c->plot)
        drv_fail(d, DRV_BADINPUT, "--plot: gnuplot was not found when ulysses was configured; install gnuplot and "
                 "re-run configure");
#endif
    else
        return DRV_PARSE_OK;
    return DRV_PARSE_ERROR;
}

/* Every option that changes control flow, collectives or results. */
static int train_fields(const struct train_cfg *c, drv_field *f)
{
    int n = 0;
#define FI(nm, v) f[n++] = (drv_field){nm, DRV_F_INT, (int64_t)(v), NULL, 0, NULL}
#define FF(nm, v) f[n++] = (drv_field){nm, DRV_F_FLAG, (int64_t)(v), NULL, 0, NULL}
#define FR(nm, v) f[n++] = (drv_field){nm, DRV_F_REAL, 0, NULL, v, NULL}
#define FS(nm, v) f[n++] = (drv_field){nm, DRV_F_STR, 0, v, 0, NULL}
    FI("--layers", c->layers); FI("--channels", c->channels); FI("--heads", c->heads); FI("--kv-heads", c->kv_heads);
    FI("--seq", c->seq); FI("--vocab", c->vocab); FI("--batch", c->batch); FI("--dp", c->dp); FI("--sp", c->sp);
    FI("--steps", c->steps); FR("--lr", c->lr); FR("--weight-decay", c->wd); FR("--clip", c->clip);
    FI("--seed", c->seed); FS("--data", c->data); FI("--docs", c->docs); FS("--dump", c->dump); FS("--log", c->log);
    FS("--plot", c->plot); FS("--checkpoint", c->checkpoint); FS("--resume", c->resume); FF("--fast", c->fast);
    FI("--canon-sp", c->canon_sp); FI("--threads", c->threads); FF("--force", c->force); FF("--quiet", c->quiet);
    FF("--tiled-loss", c->tiled_loss); FI("--tiled-mlp", c->tiled_mlp); FF("--json", c->json);
#undef FI
#undef FF
#undef FR
#undef FS
    return n;
}

typedef struct train_job {
    struct train_cfg c;
    uly_grid2 grid;         /* the DP x SP grid: every rank's rows and tokens */
    drv_out out[NOUT];
    text_data td;
    unsigned char *img;     /* --resume image */
    size_t ilen;
    uly_train *T;
    int32_t *row, *tok, *tgt, *pos, *drow;
    uint8_t *nl, *dnl;
    int64_t *off;
    double *losses;
    int64_t *stepno;
    FILE *logf;
    uint64_t preflight, lib_bytes; /* this rank's preflight: everything, the library's table */
} train_job;

static void job_free(train_job *J)
{
    if (J->logf)
        fclose(J->logf);
    drv_out_discard(J->out, NOUT);
    drv_free(J->td.bytes);
    drv_free(J->img);
    uly_train_free(J->T);
    drv_free(J->row); drv_free(J->tok); drv_free(J->tgt); drv_free(J->pos); drv_free(J->drow);
    drv_free(J->nl); drv_free(J->dnl); drv_free(J->off); drv_free(J->losses); drv_free(J->stepno);
}

static void train_gpt(const struct train_cfg *c, uly_gpt_config *gc, uly_train_opts *o)
{
    *gc = (uly_gpt_config){c->vocab, c->seq, c->layers, c->channels, c->heads, c->kv_heads};
    uly_train_opts_default(o);
    o->dp = (int)c->dp;
    o->sp = (int)c->sp;
    o->batch = c->batch;
    o->fast = c->fast;
    o->canon_sp = (int)c->canon_sp;
    o->lr = c->lr;
    o->weight_decay = c->wd;
    o->grad_clip = c->clip;
    o->seed = (uint64_t)c->seed;
    o->kernel.threads = (int)c->threads;
    o->tiled_loss = c->tiled_loss;
    o->tiled_mlp = (int)c->tiled_mlp;
}

/* The k largest entries of t as "name size, name size, ..." into buf. */
static void largest_bufs(const uly_bufs *t, int k, char *buf, size_t len)
{
    int used[ULY_BUFS_MAX] = {0};
    size_t at = 0;
    for (int r = 0; r < k && r < t->n; r++) {
        int best = -1;
        for (int i = 0; i < t->n; i++)
            if (!used[i] && (best < 0 || t->b[i].bytes > t->b[best].bytes))
                best = i;
        used[best] = 1;
        char s[32];
        int w = snprintf(buf + at, len - at, "%s%s %s", r ? ", " : "", t->b[best].name,
                         drv_bytes(s, sizeof s, t->b[best].bytes));
        if (w < 0 || (size_t)w >= len - at)
            return;
        at += (size_t)w;
    }
}

/* Bytes this rank needs (the library's buffers, the batch buffers, the
 * text; rank 0: the checkpoint image, the --dump gather buffers) against
 * what it can get. */
static int train_preflight(train_job *J, drv *d)
{
    const struct train_cfg *c = &J->c;
    uly_gpt_config gc;
    uly_train_opts o;
    train_gpt(c, &gc, &o);
    /* what uly_train_create will allocate, by name; its total is uly_train_memory.
     * No early return: drv_preflight is collective over the node's ranks */
    uly_bufs t = {0};
    drv_lib(d, uly_train_memory_table(&gc, &o, d->rank, d->size, &t), 0, NULL); /* bad configuration 2, out of memory 1 */
    const uint64_t lib = t.total;
    const double N = (double)c->seq, B = (double)c->batch;
    double bufs = 3 * (N + 1) * 4 + 3 * N * 4 * B + 2 * N + (double)c->batch * (double)(c->docs + 1) * 8 +
                  (double)c->steps * 16 + (double)J->td.len;
    if (d->rank == 0) {
        double np = (double)lib / 16; /* upper bound of the parameters: 4 floats each */
        if (c->checkpoint)
            bufs += 3 * np * 4;
        if (c->dump) {
            double w = (double)(c->vocab > 4 * c->channels ? c->vocab : 4 * c->channels);
            bufs += ((double)c->layers + 1) * B * N * w * 4 + B * N * 16;
        }
    }
    uint64_t need = lib;
    need = bufs >= 1.8e19 || (double)need + bufs >= 1.8e19 ? UINT64_MAX : need + (uint64_t)bufs;
    J->preflight = need;
    J->lib_bytes = lib;
    char why[512], big[320] = "", s1[32], s2[32];
    largest_bufs(&t, 3, big, sizeof big);
    snprintf(why, sizeof why, "model, optimizer and activations %s (largest: %s), batch and files %s",
             drv_bytes(s1, sizeof s1, lib), big, drv_bytes(s2, sizeof s2, (uint64_t)bufs));
    return drv_preflight(d, d->code ? 0 : need, 0, why, c->force);
}

/* Rank 0: the output files' temporaries (and so the directories' being
 * writable) and the --dump directory, before any computing. */
static int train_outputs(train_job *J, drv *d)
{
    const struct train_cfg *c = &J->c;
    if (d->rank != 0)
        return 0;
    /* no output may be an input, except that the --checkpoint may be the
     * --resume file: it is read whole first and replaced atomically */
    train_ins[I_DATA] = (drv_in){c->text ? c->data : NULL, "--data", NULL};
    train_ins[I_RESUME] = (drv_in){c->resume, "--resume", "--checkpoint"};
    if (drv_out_prepare(d, J->out, NOUT, train_ins, NIN))
        return d->code;
    if (c->dump) {
        struct stat st;
        if (mkdir(c->dump, 0777) != 0 && errno != EEXIST)
            return drv_fail(d, errno == ENOSPC || errno == EROFS || errno == EIO ? DRV_RUNTIME : DRV_BADINPUT,
                            "--dump %s: %s", c->dump, strerror(errno));
        if (stat(c->dump, &st) != 0 || !S_ISDIR(st.st_mode))
            return drv_fail(d, DRV_BADINPUT, "--dump %s: not a directory", c->dump);
        if (access(c->dump, W_OK | X_OK) != 0)
            return drv_fail(d, errno == EROFS ? DRV_RUNTIME : DRV_BADINPUT, "--dump %s: %s", c->dump,
                            strerror(errno));
    }
    if (J->out[O_LOG].path) {
        int fd = dup(J->out[O_LOG].fd);
        J->logf = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (!J->logf) {
            if (fd >= 0)
                close(fd);
            return drv_fail(d, DRV_RUNTIME, "--log %s: %s", c->log, strerror(errno));
        }
        fprintf(J->logf, "step,loss,tokens,tokens_per_s,t_step,t_attn,t_a2a,t_reduce,t_other\n");
    }
    return 0;
}

static int train_alloc(train_job *J, drv *d)
{
    const struct train_cfg *c = &J->c;
    int64_t rb, rows, tb, toks;
    uly_train_shard(J->T, &rb, &rows, &tb, &toks);
    const size_t n = (size_t)(rows * toks), N = (size_t)c->seq;
    const int64_t nsteps = c->steps > uly_train_steps_done(J->T) ? c->steps - uly_train_steps_done(J->T) : 0;
    if ((J->row = drv_alloc_n(d, N + 1, sizeof *J->row, "the batch buffers")) &&
        (J->drow = drv_alloc_n(d, N + 1, sizeof *J->drow, "the batch buffers")) &&
        (J->tok = drv_alloc_n(d, n ? n : 1, sizeof *J->tok, "the batch buffers")) &&
        (J->tgt = drv_alloc_n(d, n ? n : 1, sizeof *J->tgt, "the batch buffers")) &&
        (J->pos = drv_alloc_n(d, n ? n : 1, sizeof *J->pos, "the batch buffers")) &&
        (J->nl = drv_alloc(d, N, "the batch buffers")) && (J->dnl = drv_alloc(d, N, "the batch buffers")) &&
        (!c->docs || (J->off = drv_alloc_n(d, (size_t)(c->batch * (c->docs + 1)), sizeof *J->off,
                                           "the document offsets"))) &&
        (J->losses = drv_alloc_n(d, (size_t)nsteps + 1, sizeof *J->losses, "the loss history")))
        J->stepno = drv_alloc_n(d, (size_t)nsteps + 1, sizeof *J->stepno, "the loss history");
    return d->code;
}

/* Divergence: the loss smoothed over about TRAIN_SMOOTH steps (an
 * exponential moving average of weight 1 / TRAIN_SMOOTH; one step's loss of
 * a small batch is noisy) that reaches TRAIN_GROWTH x its lowest value of
 * this run so far, and at least TRAIN_GROWTH_NATS above it (a loss near 0
 * may double without anything going wrong), is warned about once. */
#define TRAIN_SMOOTH 8.0
#define TRAIN_GROWTH 4.0
#define TRAIN_GROWTH_NATS 1.0

/* The first non-finite parameter after step `step`'s update, recorded as
 * this rank's failure (exit 1).  Local; drv_sync follows. */
static void check_params(drv *d, uly_train *T, int64_t step)
{
    const float *p = uly_train_params(T);
    const int64_t np = uly_train_nparams(T);
    int64_t i = 0;
    while (i < np && isfinite(p[i]))
        i++;
    if (i == np)
        return;
    const char *name = "?";
    int64_t at = i;
    for (int k = 0; k < uly_train_param_count(); k++) {
        const char *nm;
        int nd;
        int64_t shape[3], off, n = 1;
        uly_train_param_info(T, k, &nm, &nd, shape, &off);
        for (int j = 0; j < nd; j++)
            n *= shape[j];
        if (i >= off && i < off + n) {
            name = nm;
            at = i - off;
        }
    }
    drv_fail(d, DRV_RUNTIME, "step %lld: parameter %s[%lld] is %g after the update: the training diverged; "
             "stopped, no checkpoint written (try a smaller --lr, or --clip)", (long long)step, name, (long long)at,
             (double)p[i]);
}

/* The steps; returns the exit status (agreed).  pg: rank 0's progress line
 * on stderr (drawn only where stdout's step lines are not on the terminal). */
static int train_steps(train_job *J, drv *d, uly_progress *pg)
{
    const struct train_cfg *c = &J->c;
    const int rank = d->rank, P = d->size;
    uly_train *T = J->T;
    const int64_t first = uly_train_steps_done(T);
    int rc, warned = 0;
    double best = 0, smooth = 0, stt_last = 0;
    int64_t best_step = 0;
    if (rank == 0 && !c->quiet && !c->json)
        printf("ulysses train: %lld parameters, %d ranks (dp %lld x sp %lld), %lld x %lld tokens per step%s, %s data, "
               "%s sums; steps %lld..%lld\n", (long long)uly_train_nparams(T), P, (long long)c->dp, (long long)c->sp,
               (long long)c->batch, (long long)c->seq, c->docs ? " (packed documents)" : "",
               c->text ? c->data : "synthetic", c->fast ? "fast" : "exact", (long long)first + 1, (long long)c->steps);
    for (int64_t s = first; s < c->steps; s++) {
        if (J->off)
            make_docs(c, s, J->off);
        make_batch(T, c, c->text ? &J->td : NULL, s, J->off, J->row, J->drow, J->nl, J->dnl, J->tok, J->tgt, J->pos);
        uly_train_stats stt;
        if (c->dump && s == first) { /* the weights this step uses, then its values without the update */
            if (rank == 0)
                dump_params(d, T, c->dump, "", uly_train_params(T));
            if ((rc = drv_sync(d)))
                return rc;
            drv_lib(d, uly_train_step(T, J->tok, J->tgt, J->pos, J->off, c->docs, 0, &stt), 0, "step 1 (--dump)");
            if ((rc = drv_sync(d)))
                return rc;
            dump_step(d, T, c, &J->grid, c->dump, J->tok, J->tgt, J->pos, J->off, &stt);
            if ((rc = drv_sync(d)))
                return rc;
            if (rank == 0)
                printf("ulysses train: --dump %s: step %lld written (doc/train.md lists the files)\n", c->dump,
                       (long long)s + 1);
        }
        if (s > first)
            uly_progress_show(pg, (double)(s - first), (double)(c->steps - first), "step %lld of %lld, last loss %.4f",
                              (long long)s + 1, (long long)c->steps, stt_last);
        else
            uly_progress_show(pg, 0, (double)(c->steps - first), "step %lld of %lld", (long long)s + 1,
                              (long long)c->steps);
        d->line_open = pg->open;   /* a message from drv_sync ends the line first */
        char what[64];
        snprintf(what, sizeof what, "step %lld", (long long)s + 1);
        drv_lib(d, uly_train_step(T, J->tok, J->tgt, J->pos, J->off, c->docs, 1, &stt), 0, what);
        /* every rank has the global loss and the replicated parameters: the
         * same verdict everywhere, agreed by the drv_sync below */
        if (!d->code && !isfinite(stt.loss))
            drv_fail(d, DRV_RUNTIME, "step %lld: the loss is %g: the training diverged; stopped, no checkpoint "
                     "written (try a smaller --lr, or --clip)", (long long)s + 1, stt.loss);
        if (!d->code)
            check_params(d, T, s + 1);
        double tv[4] = {stt.t_total, stt.t_attn, stt.t_a2a, stt.t_reduce}, tm[4] = {0, 0, 0, 0};
        if (!d->code)
            drv_mpi(d, MPI_Allreduce(tv, tm, 4, MPI_DOUBLE, MPI_MAX, d->comm), "MPI_Allreduce (step times)");
        if ((rc = drv_sync(d)))
            return rc;
        double tps = (double)c->batch * (double)c->seq / tm[0];
        double other = tm[0] - tm[1] - tm[2] - tm[3];
        J->losses[s - first] = stt.loss;
        stt_last = stt.loss;
        J->stepno[s - first] = s + 1;
        smooth = s == first ? stt.loss : smooth + (stt.loss - smooth) / TRAIN_SMOOTH;
        if (s == first || smooth < best) {
            best = smooth;
            best_step = s + 1;
        } else if (!warned && smooth >= TRAIN_GROWTH * best && smooth >= best + TRAIN_GROWTH_NATS) {
            warned = 1;
            uly_progress_clear(pg);
            if (rank == 0)
                fprintf(stderr, "%s: warning: step %lld: the loss (%.6g; %.6g averaged over about %.0f steps) has "
                        "grown to %.3g x its lowest average of this run (%.6g at step %lld): the training is "
                        "diverging (try a smaller --lr, or --clip)\n", d->cmd, (long long)s + 1, stt.loss, smooth,
                        TRAIN_SMOOTH, smooth / best, best, (long long)best_step);
        }
        if (rank == 0) {
            if (!c->quiet && !c->json)
                printf("step %5lld/%lld  loss %.6f  %9.0f tok/s  %.3f s (attention %2.0f%%, all-to-all %2.0f%%, "
                       "gradient sums %2.0f%%, rest %2.0f%%)\n", (long long)s + 1, (long long)c->steps, stt.loss, tps,
                       tm[0], 100 * tm[1] / tm[0], 100 * tm[2] / tm[0], 100 * tm[3] / tm[0],
                       100 * (other > 0 ? other : 0) / tm[0]);
            if (J->logf)
                fprintf(J->logf, "%lld,%.9g,%lld,%.1f,%.6f,%.6f,%.6f,%.6f,%.6f\n", (long long)s + 1, stt.loss,
                        (long long)stt.count, tps, tm[0], tm[1], tm[2], tm[3], other);
            fflush(stdout);
        }
    }
    return 0;
}

static int train_run(train_job *J, drv *d)
{
    uly_progress pg;
    uly_progress_begin(&pg, d->rank == 0 && !J->c.quiet && !J->c.json && !uly_progress_terminal_fd(1),
                       "ulysses train");
    int rc = train_steps(J, d, &pg);
    if (!rc)
        uly_progress_clear(&pg);
    d->line_open = 0;
    return rc;
}

/* The memory line (or, with --json, the JSON object): the preflight of
 * the rank that needs most, and the largest heap peak measured through
 * the allocation hooks (uly_heap_usage).  Collective. */
static int train_report(train_job *J, drv *d)
{
    const struct train_cfg *c = &J->c;
    uint64_t live = 0, peak = 0;
    const int measured = uly_heap_usage(&live, &peak) == ULY_OK;
    uint64_t v[3] = {J->preflight, J->lib_bytes, peak}, m[3] = {0, 0, 0};
    drv_mpi(d, MPI_Allreduce(v, m, 3, MPI_UINT64_T, MPI_MAX, d->comm), "MPI_Allreduce (memory)");
    int64_t sh = uly_train_mlp_shards(J->T), shmin = sh;
    if (!d->code)
        drv_mpi(d, MPI_Allreduce(&sh, &shmin, 1, MPI_INT64_T, MPI_MIN, d->comm), "MPI_Allreduce (MLP shards)");
    int rc = drv_sync(d);
    if (rc || d->rank != 0)
        return rc;
    const int64_t nsteps = J->stepno ? c->steps - (J->stepno[0] - 1) : 0;
    char s1[32], s2[32], s3[32];
    if (!c->json) {
        if (!c->quiet) {
            if (measured)
                printf("memory: preflight %s per rank (library buffers %s), measured peak %s (heap through the "
                       "allocation hooks, the largest rank)\n", drv_bytes(s1, sizeof s1, m[0]),
                       drv_bytes(s2, sizeof s2, m[1]), drv_bytes(s3, sizeof s3, m[2]));
            else
                printf("memory: preflight %s per rank (library buffers %s), measured peak not available (the C "
                       "library cannot tell a block's size)\n", drv_bytes(s1, sizeof s1, m[0]),
                       drv_bytes(s2, sizeof s2, m[1]));
        }
        return 0;
    }
    json_t *o = json_object();
    json_t *st = o ? json_array() : NULL;
    int e = !o || !st;
    e |= o && uly_json_set_int(o, "parameters", uly_train_nparams(J->T));
    e |= o && uly_json_set_int(o, "ranks", d->size);
    e |= o && uly_json_set_int(o, "dp", c->dp);
    e |= o && uly_json_set_int(o, "sp", c->sp);
    e |= o && uly_json_set_int(o, "batch", c->batch);
    e |= o && uly_json_set_int(o, "seq", c->seq);
    e |= o && uly_json_set_str(o, "sums", c->fast ? "fast" : "exact");
    e |= o && uly_json_set_bool(o, "tiled_loss", c->tiled_loss);
    e |= o && uly_json_set_int(o, "tiled_mlp", c->tiled_mlp);
    e |= o && uly_json_set_int(o, "mlp_shards_min", shmin);
    e |= o && uly_json_set_int(o, "preflight_bytes", (int64_t)m[0]);
    e |= o && uly_json_set_int(o, "library_bytes", (int64_t)m[1]);
    if (measured)
        e |= o && uly_json_set_int(o, "peak_bytes", (int64_t)m[2]);
    else
        e |= o && json_object_set_new(o, "peak_bytes", json_null());
    for (int64_t i = 0; !e && i < nsteps; i++) {
        json_t *x = uly_json_append_object(st);
        e |= !x || uly_json_set_int(x, "step", J->stepno[i]) || uly_json_set_real(x, "loss", J->losses[i]);
    }
    if (o && st && json_object_set_new(o, "steps", st))
        e = 1;
    if (e) {
        json_decref(o);
        return drv_fail(d, DRV_RUNTIME, "--json: cannot build the JSON object (out of memory)");
    }
    /* 17 significant digits: every loss round-trips to its double (tiled and untiled runs compare bitwise) */
    if (uly_json_dump(stdout, o, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)))
        return drv_fail(d, DRV_RUNTIME, "--json: cannot write the standard output");
    return 0;
}

/* Rank 0: finish the log (the steps done so far): flushed, closed, fsync'ed. */
static int finish_log(train_job *J, drv *d)
{
    if (!J->logf)
        return 0;
    FILE *f = J->logf;
    J->logf = NULL;
    return drv_out_close(d, &J->out[O_LOG], f);
}

/* Rank 0: the log, the checkpoint and the plot written into their
 * temporaries (a full disk fails here, before anything is replaced), then
 * renamed into place together. */
static int train_write(train_job *J, drv *d)
{
    const struct train_cfg *c = &J->c;
    if (d->rank != 0)
        return 0;
    if (finish_log(J, d))
        return d->code;
    if (c->checkpoint) {
        size_t len = uly_train_checkpoint_size(J->T);
        void *img = drv_alloc(d, len, "the checkpoint image");
        if (!img)
            return d->code;
        int e = 0;
        char note[512];
        if (uly_train_checkpoint_write(J->T, img, len))
            drv_fail(d, DRV_RUNTIME, "--checkpoint %s: %s", c->checkpoint, uly_last_error());
        else if ((e = write_all(J->out[O_CKPT].fd, img, len)))
            drv_fail(d, DRV_RUNTIME, "--checkpoint %s: cannot write: %s%s", c->checkpoint, strerror(e),
                     uly_out_note(&J->out[O_CKPT], note, sizeof note));
        else
            drv_out_ready(d, &J->out[O_CKPT]);
        drv_free(img);
        if (d->code)
            return d->code;
    }
    const int64_t nsteps = c->steps - (J->stepno ? J->stepno[0] - 1 : c->steps);
    if (c->plot && nsteps > 0 && J->stepno) {
        if (plot_losses(d, &J->out[O_PLOT], J->losses, J->stepno, nsteps))
            return d->code;
    } else if (c->plot) { /* no step ran: nothing to draw, the previous plot stays */
        drv_out_discard(&J->out[O_PLOT], 1);
        J->out[O_PLOT].path = NULL;
    }
    return drv_out_commit(d, J->out, NOUT);
}

static int train_main(train_job *J, drv *d, int argc, char **argv)
{
    struct train_cfg *c = &J->c;
    int ps = train_parse(c, d, argc, argv);
    drv_field f[DRV_AGREE_MAX];
    int nf = ps == DRV_PARSE_OK ? train_fields(c, f) : 0;
    int rc = drv_agree(d, ps, f, nf);
    if (rc == DRV_AGREE_HELP) {
        arg_opt opts[NOPTS];
        train_options(c, opts);
        drv_usage(d, synopsis, opts);
        return 0;
    }
    if (rc)
        return rc;
    if (d->rank == 0 && !c->seen_batch && !c->json) /* --json: its "batch" */
        printf("ulysses train: --batch not given: %lld rows per step\n", (long long)c->batch);
    static const char *const what[NOUT] = {"--log", "--checkpoint", "--plot"};
    const char *path[NOUT] = {c->log, c->checkpoint, c->plot};
    for (int i = 0; i < NOUT; i++) {
        J->out[i].path = path[i];
        J->out[i].what = what[i];
    }
#define STEP(call) DRV_STEP(d, call)
    drv_lib(d, uly_grid2_init(&J->grid, (int)c->dp, (int)c->sp, c->batch, c->seq), 0, NULL); /* checked: no failure */
    STEP(drv_blas_warmup(d, (int)c->threads));
    if (c->text) {
        if ((rc = read_shared(d, "--data", c->data, (size_t)1 << 40, &J->td.bytes, &J->td.len)))
            return rc;
        if ((int64_t)J->td.len < c->seq + 1)
            drv_fail(d, DRV_BADINPUT, "--data %s: %zu bytes, a row needs --seq + 1 = %lld", c->data, J->td.len,
                     (long long)c->seq + 1);
        STEP(0);
    }
    STEP(train_preflight(J, d));
    STEP(train_outputs(J, d));
    if (c->resume && (rc = read_shared(d, "--resume", c->resume, (size_t)1 << 40, &J->img, &J->ilen)))
        return rc;
    uly_gpt_config gc;
    uly_train_opts o;
    train_gpt(c, &gc, &o);
    STEP(drv_lib(d, uly_train_create(d->comm, &gc, &o, &J->T), 0, NULL));
    if (uly_train_a2a_note(J->T)) /* a mode the system does not allow: never silent */
        drv_say(d, "note: %s", uly_train_a2a_note(J->T));
    if (c->resume) {
        drv_lib(d, uly_train_checkpoint_read(J->T, J->img, J->ilen), 0, "--resume");
        if (d->code && !d->peer) { /* "--resume: ..." -> "--resume F: ..." */
            char m[sizeof d->msg];
            snprintf(m, sizeof m, "--resume %s%s", c->resume, d->msg + strlen("--resume"));
            snprintf(d->msg, sizeof d->msg, "%s", m);
        }
        drv_free(J->img);
        J->img = NULL;
        STEP(0);
    }
    STEP(train_alloc(J, d));
    if (c->tiled_mlp) { /* a rank with fewer segments than shards: one shard per segment */
        int64_t sh = uly_train_mlp_shards(J->T), shmin = sh, shmax = sh;
        drv_mpi(d, MPI_Allreduce(&sh, &shmin, 1, MPI_INT64_T, MPI_MIN, d->comm), "MPI_Allreduce (MLP shards)");
        if (!d->code)
            drv_mpi(d, MPI_Allreduce(&sh, &shmax, 1, MPI_INT64_T, MPI_MAX, d->comm), "MPI_Allreduce (MLP shards)");
        STEP(0);
        if (shmin < c->tiled_mlp)
            drv_say(d, "note: --tiled-mlp %lld: a rank holds only %lld canonical segments (rows x chunks of its "
                    "shard): it uses %lld to %lld shards of whole segments", (long long)c->tiled_mlp, (long long)shmin,
                    (long long)shmin, (long long)shmax);
    }
    if ((rc = train_run(J, d))) {
        if (d->rank == 0 && J->logf) { /* keep the steps done; the failure itself was reported */
            drv d0 = *d;
            d0.code = 0;
            if (finish_log(J, &d0) == 0 && drv_out_commit(&d0, &J->out[O_LOG], 1) == 0)
                fprintf(stderr, "%s: --log %s: the steps done before the failure are kept\n", d->cmd, c->log);
            else
                fprintf(stderr, "%s: %s\n", d->cmd, d0.msg);
        }
        return rc;
    }
    STEP(train_write(J, d));
    STEP(train_report(J, d));
#undef STEP
    return 0;
}

int cmd_train(int argc, char **argv)
{
    drv d;
    if (drv_open(&d, "ulysses train"))
        return DRV_RUNTIME;
    train_job J;
    memset(&J, 0, sizeof J);
    drv_out_init(J.out, NOUT);
    int code = train_main(&J, &d, argc, argv);
    job_free(&J);
    return drv_close(&d, code);
}
