/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_data.c -- `ulysses check --data DIR`: the training-level checks of a
 * sequence-parallel data pipeline, from what its ranks dump
 * (DIR/rank{r}.safetensors or DIR/rank{r}/NAME.npy): token ids, labels,
 * position ids, per-token losses and the loss each rank reports.
 *
 *   coverage   every global token is held by exactly one rank (the ranks'
 *              `tokens` tensors, else the method's shard map from the plan
 *              layer: uly_layout_part, the map the library uses);
 *   labels     reassembled globally, labels[t] == input_ids[t + 1], and
 *              ignore_index where a document ends and at the last token;
 *              "labels rolled per shard" (torch.roll on each rank's local
 *              shard) is recognised and named;
 *   positions  position_ids == the position within the document; "local
 *              positions" (restarting at the shard start) and positions of
 *              a contiguous shard on a zigzag map are named;
 *   loss       the reported loss == the token-weighted mean over all ranks
 *              of the per-token losses at non-ignored labels; "mean of
 *              per-rank means" and "the rank's own mean" are named.
 *
 * Exit 0 every check passed, 1 a defect found, 2 bad input (files, shapes,
 * a token missing or held twice).  No MPI: one process reads every rank.
 * Not here: the attention tensors (cmd_check.c), any arithmetic of a
 * partition (the plan layer).
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "cli.h"
#include "base/base_json.h"

#define CMD "ulysses check --data"

enum { RANKS_MAX = 4096, PATH_LEN = 4096, MSG_LEN = 1024 };

/* The tensors a rank may dump. */
enum { T_IDS = 0, T_LABELS, T_POS, T_LOSS, T_REDUCED, T_TOKENS, T_N };
static const char *const tname[T_N] = {"input_ids", "labels", "position_ids", "loss", "loss_reduced", "tokens"};

typedef struct drank {
    char src[PATH_LEN];        /* the file (safetensors) or directory (npy) */
    int npy;                   /* DIR/rank{r}/NAME.npy */
    int64_t B, n;              /* rows, tokens of the shard */
    int64_t *ids, *labels, *pos, *tokens;   /* (B, n); tokens (n,) */
    double *loss;              /* (B, n) */
    double reduced;
    int has[T_N];
    int elem[T_N];             /* uly_elem of each present tensor */
    int nseg;                  /* the segments of the token map (shard map), else 0 */
    int64_t seg_begin[2], seg_count[2];
} drank;

typedef struct dcfg {
    const char *dir, *method_s, *doc_lens, *docs_f, *cu_f;
    int64_t P, U, ign, seq;
    int placement, json, masked;
    int seen_ranks, seen_udeg, seen_place, seen_seq;
} dcfg;

/* One check's outcome. */
enum { V_OK = 0, V_DEFECT, V_SKIP };
static const char *const vname[] = {"ok", "defect", "skipped"};
typedef struct dcheck {
    const char *name;
    int verdict;
    const char *defect;        /* static: "rolled-per-shard", ... or NULL */
    int rank;                  /* -1: none */
    int64_t token, row;        /* -1: none */
    char msg[MSG_LEN];
} dcheck;

typedef struct djob {
    dcfg c;
    int P;
    drank *r;
    int64_t B, N, D;           /* D documents per row (0: one per row) */
    int64_t *off;              /* (B, D + 1) or NULL */
    int have_tokens, method, have_method;
    uly_sp_plan plan;
    int *owner;                /* (N,) the rank holding token t */
    int64_t *local;            /* (N,) its row within that rank's shard */
    int64_t *dstart;           /* (B, N) the first token of t's document */
    char map_desc[256];
} djob;

static const char synopsis[] =
    "check --data DIR [--ranks P] [--method M] [--ulysses-degree U] [--placement PL]\n"
    "               [--doc-lens L1,L2,... | --docs F | --cu-seqlens F] [--ignore-index I]\n"
    "               [--masked-labels] [--seq N] [--json]\n"
    "Training-level checks of a sequence-parallel data pipeline.  DIR holds each rank's dump,\n"
    "rank{r}.safetensors or rank{r}/NAME.npy, with tensors input_ids (B, n_r) and labels (B, n_r)\n"
    "(integers), and optionally position_ids (B, n_r), loss (B, n_r) (per-token losses),\n"
    "loss_reduced (a scalar or (1,): the loss the rank reports) and tokens (n_r,) (the global\n"
    "index of each row; else the shard map of --method on P ranks, that of the library).\n"
    "Checks: coverage (every token on exactly one rank), labels (the global next token, not a\n"
    "shift within each shard; ignore_index where a document ends and at the last token),\n"
    "positions (restart at each document, follow the shard map's chunks), loss (token-weighted\n"
    "over all ranks at non-ignored labels, not a mean of per-rank means; tolerance from the\n"
    "element types: 8 u + n 2^-24, u the unit roundoff of the coarser of loss and loss_reduced,\n"
    "n the tokens counted; n 2^-53 for f64).\n"
    "Exit status: 0 every check passed, 1 a defect found, 2 bad input (a missing or\n"
    "malformed file, shapes that disagree, a token missing or held twice).  doc/check.md.";

/* ------------------------------------------------------------ messages */

static int bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, CMD ": ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return EXIT_BADINPUT;
}

static void setmsg(dcheck *k, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->msg, sizeof k->msg, fmt, ap);
    va_end(ap);
}

static void shape_text(char *buf, size_t len, const uly_tinfo *t)
{
    size_t u = 0;
    u += (size_t)snprintf(buf + u, len - u, "(");
    for (int i = 0; i < t->ndim && u < len; i++)
        u += (size_t)snprintf(buf + u, len - u, "%s%" PRId64, i ? ", " : "", t->shape[i]);
    if (u < len)
        snprintf(buf + u, len - u, t->ndim == 1 ? ",)" : ")");
}

/* ------------------------------------------------------------ reading */

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* Where rank r's dump is: 1 a safetensors file, 2 a directory of .npy, 0
 * none, -1 both (a message printed). */
static int rank_source(const char *dir, int r, char *st_path, char *npy_dir)
{
    snprintf(st_path, PATH_LEN, "%s/rank%d.safetensors", dir, r);
    snprintf(npy_dir, PATH_LEN, "%s/rank%d", dir, r);
    int a = exists(st_path), b = is_dir(npy_dir);
    if (a && b) {
        bad("both %s and %s/ exist: rank %d's dump must be one of them", st_path, npy_dir, r);
        return -1;
    }
    return a ? 1 : b ? 2 : 0;
}

static int known_name(const char *s)
{
    for (int t = 0; t < T_N; t++)
        if (strcmp(s, tname[t]) == 0)
            return t;
    return -1;
}

/* Read tensor t of rank R (an open safetensors file f, or R->src/NAME.npy).
 * 0 read (or absent: R->has[t] stays 0), else the exit status. */
static int read_tensor(drank *R, int r, uly_tfile *f, int t)
{
    char path[PATH_LEN + 64];
    uly_tfile *g = f;
    int idx;
    if (R->npy) {
        snprintf(path, sizeof path, "%s/%s.npy", R->src, tname[t]);
        if (!exists(path))
            return 0;
        if (uly_tfile_open(path, &g))
            return bad("%s", uly_last_error());
        idx = 0;
    } else {
        snprintf(path, sizeof path, "%s, tensor %s", R->src, tname[t]);
        idx = uly_tfile_find(f, tname[t]);
        if (idx < 0)
            return 0;
    }
    const uly_tinfo *ti = uly_tfile_info(g, idx);
    char shp[256];
    shape_text(shp, sizeof shp, ti);
    int rc = 0, isf = uly_elem_is_float(ti->elem);
    int want_float = t == T_LOSS || t == T_REDUCED;
    int64_t B = ti->ndim == 2 ? ti->shape[0] : 1, n = ti->ndim >= 1 ? ti->shape[ti->ndim - 1] : 1;
    if (isf != want_float) {
        rc = bad("%s: element type %s, expected %s", path, uly_elem_name(ti->elem),
                 want_float ? "a float type (f16, bf16, f32, f64)" : "integers (i32, i64)");
    } else if (t == T_REDUCED) {
        if (ti->count != 1 || ti->ndim > 1)
            rc = bad("%s: shape %s, expected a scalar () or (1,)", path, shp);
    } else if (t == T_TOKENS) {
        if (ti->ndim != 1 || (R->has[T_IDS] && ti->shape[0] != R->n))
            rc = bad("%s: shape %s, expected (n_r,) = (%" PRId64 ",): one global index per row of input_ids",
                     path, shp, R->n);
    } else if (ti->ndim < 1 || ti->ndim > 2) {
        rc = bad("%s: shape %s, expected (B, n_r) or (n_r,)", path, shp);
    } else if (t != T_IDS && (B != R->B || n != R->n)) {
        rc = bad("%s: shape %s, expected input_ids' (%" PRId64 ", %" PRId64 ")", path, shp, R->B, R->n);
    }
    if (!rc) {
        size_t cnt = ti->count ? ti->count : 1;
        void *dst = uly_malloc(cnt * 8);
        if (!dst) {
            rc = bad("%s: out of memory for %zu elements", path, cnt);
        } else {
            int st = want_float ? uly_tfile_read_f64(g, idx, 0, ti->count, dst)
                                : uly_tfile_read_i64(g, idx, 0, ti->count, dst);
            if (st) {
                uly_free(dst);
                rc = bad("%s", uly_last_error());
            } else {
                if (t == T_IDS) {
                    R->B = B;
                    R->n = n;
                }
                R->has[t] = 1;
                R->elem[t] = ti->elem;
                switch (t) {
                case T_IDS: R->ids = dst; break;
                case T_LABELS: R->labels = dst; break;
                case T_POS: R->pos = dst; break;
                case T_TOKENS: R->tokens = dst; break;
                case T_LOSS: R->loss = dst; break;
                default: R->reduced = *(double *)dst; uly_free(dst); break;
                }
            }
        }
    }
    (void)r;
    if (R->npy)
        uly_tfile_close(g);
    return rc;
}

/* Names in a dump that are none of ours: printed, never silently dropped. */
static void note_unknown(drank *R, uly_tfile *f, int r)
{
    char list[512] = "";
    size_t u = 0;
    int k = 0;
    if (!R->npy) {
        for (int i = 0; i < uly_tfile_count(f); i++) {
            const char *s = uly_tfile_info(f, i)->name;
            if (known_name(s) < 0 && u < sizeof list)
                u += (size_t)snprintf(list + u, sizeof list - u, "%s%s", k++ ? ", " : "", s);
        }
    } else {
        DIR *d = opendir(R->src);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            size_t L = strlen(e->d_name);
            if (L > 4 && strcmp(e->d_name + L - 4, ".npy") == 0) {
                char base[256];
                snprintf(base, sizeof base, "%.*s", (int)(L - 4), e->d_name);
                if (known_name(base) < 0 && u < sizeof list)
                    u += (size_t)snprintf(list + u, sizeof list - u, "%s%s", k++ ? ", " : "", base);
            }
        }
        if (d)
            closedir(d);
    }
    if (k)
        fprintf(stderr, CMD ": note: rank %d: tensor%s not used by the data checks: %s\n", r, k > 1 ? "s" : "",
                list);
}

static int read_rank(djob *J, int r)
{
    drank *R = &J->r[r];
    char st_path[PATH_LEN], npy_dir[PATH_LEN];
    int kind = rank_source(J->c.dir, r, st_path, npy_dir);
    if (kind < 0)
        return EXIT_BADINPUT;
    if (kind == 0)
        return bad("rank %d of %d: neither %s nor %s/ exists", r, J->P, st_path, npy_dir);
    R->npy = kind == 2;
    snprintf(R->src, sizeof R->src, "%s", R->npy ? npy_dir : st_path);
    uly_tfile *f = NULL;
    if (!R->npy && uly_tfile_open(R->src, &f))
        return bad("%s", uly_last_error());
    int rc = read_tensor(R, r, f, T_IDS);
    if (!rc && !R->has[T_IDS])
        rc = bad("%s: no tensor input_ids (the token ids, (B, n_r))", R->src);
    for (int t = T_IDS + 1; t < T_N && !rc; t++)
        rc = read_tensor(R, r, f, t);
    if (!rc && !R->has[T_LABELS])
        rc = bad("%s: no tensor labels ((B, n_r), ignore_index where no loss is taken)", R->src);
    if (!rc)
        note_unknown(R, f, r);
    if (f)
        uly_tfile_close(f);
    return rc;
}

static void free_job(djob *J)
{
    if (J->r)
        for (int r = 0; r < J->P; r++) {
            uly_free(J->r[r].ids);
            uly_free(J->r[r].labels);
            uly_free(J->r[r].pos);
            uly_free(J->r[r].tokens);
            uly_free(J->r[r].loss);
        }
    free(J->r);
    uly_free(J->off);
    free(J->owner);
    free(J->local);
    free(J->dstart);
}

/* ------------------------------------------------------------ documents */

/* --doc-lens, --docs F ((B, D+1) or (D+1,)) or --cu-seqlens F ((D+1,)):
 * offsets (B, D+1), checked as the library checks them. */
static int read_docs(djob *J)
{
    const dcfg *c = &J->c;
    int given = !!c->doc_lens + !!c->docs_f + !!c->cu_f;
    if (given > 1)
        return bad("--doc-lens, --docs and --cu-seqlens each give the documents: use one");
    if (!given)
        return 0;
    if (c->doc_lens) {
        char msg[512];
        if (doc_lens_offsets(c->doc_lens, J->B, J->N, &J->off, &J->D, msg, sizeof msg))
            return bad("%s (N: the tokens of the dump)", msg);
        return 0;
    }
    const char *opt = c->docs_f ? "--docs" : "--cu-seqlens", *path = c->docs_f ? c->docs_f : c->cu_f;
    uly_tfile *f;
    if (uly_tfile_open(path, &f))
        return bad("%s %s", opt, uly_last_error());
    const int nt = uly_tfile_count(f);
    int idx = nt == 1 ? 0 : uly_tfile_find(f, "cu_seqlens");
    if (idx < 0) {
        uly_tfile_close(f);
        return bad("%s %s: %d tensors and none named cu_seqlens", opt, path, nt);
    }
    const uly_tinfo *ti = uly_tfile_info(f, idx);
    int nd = ti->ndim;
    int64_t D = nd >= 1 ? ti->shape[nd - 1] - 1 : -1;
    char shp[256];
    shape_text(shp, sizeof shp, ti);
    if (uly_elem_is_float(ti->elem) || D < 1 || !(nd == 1 || (nd == 2 && c->docs_f && ti->shape[0] == J->B))) {
        uly_tfile_close(f);
        return bad("%s %s: %s %s, expected integer offsets of shape %s with D >= 1 documents", opt, path,
                   uly_elem_name(ti->elem), shp, c->docs_f ? "(B, D+1) or (D+1,)" : "(D+1,)");
    }
    int64_t *x = uly_malloc(ti->count * sizeof *x);
    J->off = uly_malloc((size_t)J->B * (size_t)(D + 1) * sizeof *J->off);
    int st = x && J->off ? uly_tfile_read_i64(f, idx, 0, ti->count, x) : ULY_ENOMEM;
    uly_tfile_close(f);
    if (st) {
        uly_free(x);
        return bad("%s %s: %s", opt, path, st == ULY_ENOMEM ? "out of memory" : uly_last_error());
    }
    for (int64_t b = 0; b < J->B; b++)
        memcpy(J->off + b * (D + 1), x + (nd == 2 ? b * (D + 1) : 0), (size_t)(D + 1) * sizeof *x);
    uly_free(x);
    J->D = D;
    uly_attn_desc t = {.batch = J->B, .seq = J->N, .heads = 1, .kv_heads = 1, .head_dim = 1,
                       .doc_offsets = J->off, .docs = D};
    if (uly_attn_desc_check(&t))
        return bad("%s %s: %s (N = %" PRId64 " tokens in the dump)", opt, path, uly_last_error(), J->N);
    return 0;
}

/* ------------------------------------------------------------ token map */

static int build_map(djob *J)
{
    const int P = J->P;
    const int64_t N = J->N;
    J->owner = malloc((size_t)(N ? N : 1) * sizeof *J->owner);
    J->local = malloc((size_t)(N ? N : 1) * sizeof *J->local);
    if (!J->owner || !J->local)
        return bad("out of memory for the token map of %" PRId64 " tokens", N);
    for (int64_t t = 0; t < N; t++)
        J->owner[t] = -1;
    if (J->have_tokens) {
        /* the ranks' own map: every token once, named when not */
        int64_t dup = -1, dup_r0 = 0, dup_r1 = 0, dup_i0 = 0, dup_i1 = 0, ndup = 0;
        for (int r = 0; r < P; r++)
            for (int64_t i = 0; i < J->r[r].n; i++) {
                int64_t t = J->r[r].tokens[i];
                if (t < 0 || t >= N)
                    return bad("%s, tensor tokens: row %" PRId64 " holds token %" PRId64 ", outside 0..%" PRId64
                               " (N = %" PRId64 "%s)", J->r[r].src, i, t, N - 1, N,
                               J->c.seen_seq ? ", --seq" : ": the largest index + 1");
                if (J->owner[t] >= 0) {
                    if (!ndup++) {
                        dup = t;
                        dup_r0 = J->owner[t];
                        dup_i0 = J->local[t];
                        dup_r1 = r;
                        dup_i1 = i;
                    }
                    continue;
                }
                J->owner[t] = r;
                J->local[t] = i;
            }
        int64_t miss = -1, nmiss = 0;
        for (int64_t t = 0; t < N; t++)
            if (J->owner[t] < 0 && !nmiss++)
                miss = t;
        if (ndup)
            return bad("coverage: token %" PRId64 " is held twice: by rank %" PRId64 " (row %" PRId64
                       ") and rank %" PRId64 " (row %" PRId64 ") -- %" PRId64 " duplicate%s, %" PRId64
                       " missing token%s in all",
                       dup, dup_r0, dup_i0, dup_r1, dup_i1, ndup, ndup > 1 ? "s" : "", nmiss, nmiss == 1 ? "" : "s");
        if (nmiss)
            return bad("coverage: token %" PRId64 " is on no rank -- %" PRId64 " missing token%s of N = %" PRId64
                       " (the ranks' tokens tensors)", miss, nmiss, nmiss > 1 ? "s" : "", N);
        snprintf(J->map_desc, sizeof J->map_desc, "the ranks' tokens tensors");
    } else {
        uly_attn_desc a = {.batch = J->B, .seq = N, .heads = P, .kv_heads = P, .head_dim = 1,
                           .doc_offsets = J->off, .docs = J->D};
        uly_layout L;
        if (uly_layout_init(&L, &a, &J->plan))
            return bad("--method %s on %d ranks: %s", uly_method_name(J->method), P, uly_last_error());
        for (int r = 0; r < P; r++) {
            uly_rank_part part;
            uly_layout_part(&L, r, &part);
            drank *R = &J->r[r];
            if (part.tokens != R->n)
                return bad("%s: %" PRId64 " tokens, but the %s shard map of N = %" PRId64 " on %d ranks gives "
                           "rank %d %" PRId64 " (wrong --method or --ranks? or dump a tokens tensor)",
                           R->src, R->n, uly_method_name(J->method), N, P, r, part.tokens);
            R->nseg = part.nseg;
            int64_t i = 0;
            for (int s = 0; s < part.nseg; s++) {
                R->seg_begin[s] = part.tok_begin[s];
                R->seg_count[s] = part.tok_count[s];
                for (int64_t k = 0; k < part.tok_count[s]; k++, i++) {
                    J->owner[part.tok_begin[s] + k] = r;
                    J->local[part.tok_begin[s] + k] = i;
                }
            }
        }
        /* the plan layer covers every token once; trust, but verify */
        for (int64_t t = 0; t < N; t++)
            if (J->owner[t] < 0)
                return bad("internal: the %s shard map misses token %" PRId64, uly_method_name(J->method), t);
        snprintf(J->map_desc, sizeof J->map_desc, "the %s shard map", uly_method_name(J->method));
    }
    return 0;
}

/* global (b, t) of an array held per rank */
#define G(J, field, b, t) ((J)->r[(J)->owner[t]].field[(b) * (J)->r[(J)->owner[t]].n + (J)->local[t]])

/* Whether token t + 1 of row b starts a document (t + 1 < N). */
static int doc_starts(const djob *J, int64_t b, int64_t t)
{
    return J->dstart[b * J->N + t] == t;
}

/* ------------------------------------------------------------ checks */

static void check_coverage(const djob *J, dcheck *k)
{
    k->verdict = V_OK;
    setmsg(k, "%" PRId64 " tokens, each on exactly one rank (%s)", J->N, J->map_desc);
}

static void check_labels(const djob *J, dcheck *k)
{
    const int64_t N = J->N, ign = J->c.ign;
    enum { C_ROLL = 0, C_UNSHIFTED, C_IGNORED, C_OTHER, C_N };
    static const char *const cname[C_N] = {"rolled-per-shard", "unshifted", "unexpected-ignore", "wrong-label"};
    int64_t cnt[C_N] = {0}, first_b[C_N], first_t[C_N];
    int nranks[C_N] = {0};
    int *seen = calloc((size_t)J->P * C_N, sizeof *seen);
    int64_t checked = 0, ignored = 0;
    for (int64_t b = 0; b < J->B; b++)
        for (int64_t t = 0; t < N; t++) {
            const int r = J->owner[t];
            const drank *R = &J->r[r];
            const int64_t lab = G(J, labels, b, t);
            const int end = t == N - 1 || (J->off && doc_starts(J, b, t + 1));
            const int64_t want = end ? ign : G(J, ids, b, t + 1);
            checked++;
            if (lab == ign)
                ignored++;
            if (lab == want || (J->c.masked && lab == ign))
                continue;
            int cls = C_OTHER;
            const int64_t i = J->local[t];
            if (R->n > 0 && lab == R->ids[b * R->n + (i + 1) % R->n])
                cls = C_ROLL;
            else if (lab == G(J, ids, b, t))
                cls = C_UNSHIFTED;
            else if (lab == ign)
                cls = C_IGNORED;
            if (!cnt[cls]++) {
                first_b[cls] = b;
                first_t[cls] = t;
            }
            if (seen && !seen[r * C_N + cls]) {
                seen[r * C_N + cls] = 1;
                nranks[cls]++;
            }
        }
    free(seen);
    int64_t total = 0;
    for (int i = 0; i < C_N; i++)
        total += cnt[i];
    if (!total) {
        k->verdict = V_OK;
        setmsg(k, "%" PRId64 " labels are the global next token (%" PRId64 " ignore_index %" PRId64
               "%s: the last token%s)", checked, ignored, ign, J->c.masked ? ", accepted anywhere" : "",
               J->off ? " and document ends" : "");
        return;
    }
    int cls = C_OTHER;
    for (int i = C_N - 1; i >= 0; i--)
        if (cnt[i])
            cls = i;
    const int64_t b = first_b[cls], t = first_t[cls];
    const int r = J->owner[t];
    const drank *R = &J->r[r];
    const int64_t i = J->local[t], lab = G(J, labels, b, t);
    const int end = t == N - 1 || (J->off && doc_starts(J, b, t + 1));
    char want[160], row[32] = "";
    if (J->B > 1)
        snprintf(row, sizeof row, "row %" PRId64 ", ", b);
    if (end)
        snprintf(want, sizeof want, "ignore_index %" PRId64 " (%s)", ign,
                 t == N - 1 ? "the last token" : "its document ends");
    else
        snprintf(want, sizeof want, "token %" PRId64 "'s id %" PRId64 " (on rank %d)", t + 1, G(J, ids, b, t + 1),
                 J->owner[t + 1]);
    char others[160] = "";
    if (total > cnt[cls])
        snprintf(others, sizeof others, "; %" PRId64 " other wrong label%s", total - cnt[cls],
                 total - cnt[cls] > 1 ? "s" : "");
    k->verdict = V_DEFECT;
    k->defect = cname[cls];
    k->rank = r;
    k->token = t;
    k->row = b;
    if (cls == C_ROLL) {
        const int64_t nx = (i + 1) % R->n;
        int64_t tn = 0;
        if (J->have_tokens)
            tn = R->tokens[nx];
        else
            for (int s = 0, acc = 0; s < R->nseg; acc += (int)R->seg_count[s], s++)
                if (nx < acc + R->seg_count[s]) {
                    tn = R->seg_begin[s] + (nx - acc);
                    break;
                }
        setmsg(k, "labels rolled per shard: rank %d, %stoken %" PRId64 " (row %" PRId64 " of its shard): label %"
               PRId64 " is the id of token %" PRId64 ", %s (a shift within the local shard, torch.roll), expected %s; "
               "%" PRId64 " label%s on %d rank%s%s",
               r, row, t, i, lab, tn, nx == 0 ? "its shard's own first token" : "the next row of its own shard",
               want, cnt[cls], cnt[cls] > 1 ? "s" : "", nranks[cls], nranks[cls] > 1 ? "s" : "", others);
    } else if (cls == C_UNSHIFTED) {
        setmsg(k, "labels not shifted: rank %d, %stoken %" PRId64 ": label %" PRId64 " is the token's own id, "
               "expected %s; %" PRId64 " label%s on %d rank%s%s",
               r, row, t, lab, want, cnt[cls], cnt[cls] > 1 ? "s" : "", nranks[cls], nranks[cls] > 1 ? "s" : "",
               others);
    } else if (cls == C_IGNORED) {
        setmsg(k, "label ignore_index %" PRId64 " where no document ends: rank %d, %stoken %" PRId64 ", expected %s; "
               "%" PRId64 " label%s on %d rank%s%s (packed documents: --doc-lens, --docs or --cu-seqlens; prompt "
               "masking: --masked-labels)", ign, r, row, t, want, cnt[cls], cnt[cls] > 1 ? "s" : "", nranks[cls],
               nranks[cls] > 1 ? "s" : "", others);
    } else {
        setmsg(k, "wrong label: rank %d, %stoken %" PRId64 " (row %" PRId64 " of its shard): label %" PRId64
               ", expected %s; %" PRId64 " label%s on %d rank%s",
               r, row, t, i, lab, want, cnt[cls], cnt[cls] > 1 ? "s" : "", nranks[cls], nranks[cls] > 1 ? "s" : "");
    }
}

/* Expected position of token t of row b. */
static int64_t want_pos(const djob *J, int64_t b, int64_t t)
{
    return t - J->dstart[b * J->N + t];
}

static void check_positions(const djob *J, dcheck *k)
{
    int have = 0;
    for (int r = 0; r < J->P; r++)
        have += J->r[r].has[T_POS];
    if (!have) {
        k->verdict = V_SKIP;
        setmsg(k, "no position_ids in the dump");
        return;
    }
    /* rank by rank in its own row order: the first wrong rank is named with
     * the hypothesis that fits all its rows */
    int nbad = 0, first = -1, all_local = 1, all_contig = 1, first_local = 0, first_contig = 0;
    const char *hyp = NULL;
    int64_t fb = 0, fi = 0;
    for (int r = 0; r < J->P; r++) {
        const drank *R = &J->r[r];
        int ok = 1, local = 1, contig = 1;
        int64_t cb = 0, ci = -1;
        int64_t cbeg, ccnt;
        uly_split(J->N, J->P, r, &cbeg, &ccnt);
        if (ccnt != R->n)
            contig = 0;
        for (int64_t b = 0; b < R->B; b++) {
            int64_t run = 0;
            for (int64_t i = 0; i < R->n; i++) {
                const int64_t t = J->have_tokens ? R->tokens[i] : -1;
                int64_t tg = t;
                if (tg < 0) { /* from the segments */
                    int64_t acc = 0;
                    for (int s = 0; s < R->nseg; acc += R->seg_count[s], s++)
                        if (i < acc + R->seg_count[s]) {
                            tg = R->seg_begin[s] + (i - acc);
                            break;
                        }
                }
                const int64_t p = R->pos[b * R->n + i];
                if (i > 0 && J->dstart[b * J->N + tg] == tg)
                    run = 0;
                if (p != run)
                    local = 0;
                run++;
                if (contig && p != want_pos(J, b, cbeg + i))
                    contig = 0;
                if (p != want_pos(J, b, tg) && ok) {
                    ok = 0;
                    cb = b;
                    ci = i;
                }
            }
        }
        if (!ok) {
            all_local &= local;
            all_contig &= contig;
            if (!nbad++) {
                first = r;
                fb = cb;
                fi = ci;
                first_local = local;
                first_contig = contig;
            }
        }
    }
    /* the hypothesis that fits every wrong rank (rank 0 of a contiguous map
     * fits both), else the first wrong rank's */
    if (nbad)
        hyp = all_local && !all_contig ? "local-positions"
              : all_contig && !all_local ? "contiguous-positions"
              : all_local ? "local-positions"
              : first_local ? "local-positions" : first_contig ? "contiguous-positions" : "wrong-positions";
    if (!nbad) {
        k->verdict = V_OK;
        setmsg(k, "every position_ids is the position within its document%s", J->off ? "" : " (one per row)");
        return;
    }
    const drank *R = &J->r[first];
    int64_t t = -1;
    if (J->have_tokens)
        t = R->tokens[fi];
    else
        for (int s = 0, acc = 0; s < R->nseg; acc += (int)R->seg_count[s], s++)
            if (fi < acc + R->seg_count[s]) {
                t = R->seg_begin[s] + (fi - acc);
                break;
            }
    const int64_t p = R->pos[fb * R->n + fi], w = want_pos(J, fb, t);
    char row[32] = "", more[96] = "";
    if (J->B > 1)
        snprintf(row, sizeof row, "row %" PRId64 ", ", fb);
    if (nbad > 1)
        snprintf(more, sizeof more, "; %d ranks wrong in all", nbad);
    k->verdict = V_DEFECT;
    k->defect = hyp;
    k->rank = first;
    k->token = t;
    k->row = fb;
    if (strcmp(hyp, "local-positions") == 0)
        setmsg(k, "local positions: rank %d restarts its positions at 0 at its shard start: %stoken %" PRId64
               " (row %" PRId64 " of its shard) has position %" PRId64 ", expected %" PRId64 "%s%s",
               first, row, t, fi, p, w, J->off ? " (the position within its document)" : "", more);
    else if (strcmp(hyp, "contiguous-positions") == 0)
        setmsg(k, "positions do not follow the chunks of %s: rank %d's positions are those of a contiguous "
               "shard; %stoken %" PRId64 " (row %" PRId64 " of its shard) has position %" PRId64 ", expected %"
               PRId64 "%s", J->map_desc, first, row, t, fi, p, w, more);
    else
        setmsg(k, "wrong positions: rank %d, %stoken %" PRId64 " (row %" PRId64 " of its shard) has position %"
               PRId64 ", expected %" PRId64 "%s%s", first, row, t, fi, p, w,
               J->off ? " (the position within its document)" : "", more);
}

/* Unit roundoff of a float type. */
static double unit_roundoff(int elem)
{
    switch (elem) {
    case ULY_ELEM_F16: return ldexp(1, -11);
    case ULY_ELEM_BF16: return ldexp(1, -8);
    case ULY_ELEM_F32: return ldexp(1, -24);
    default: return ldexp(1, -53);
    }
}

static void check_loss(const djob *J, dcheck *k, double *tol_out, double *g_out)
{
    int nloss = 0, nred = 0;
    for (int r = 0; r < J->P; r++) {
        nloss += J->r[r].has[T_LOSS];
        nred += J->r[r].has[T_REDUCED];
    }
    k->verdict = V_SKIP;
    if (!nloss || !nred) {
        setmsg(k, "%s in the dump", !nloss && !nred ? "no loss or loss_reduced"
                                                   : !nloss ? "no per-token loss" : "no loss_reduced");
        return;
    }
    if (nloss != J->P) {
        setmsg(k, "per-token loss on %d of %d ranks only", nloss, J->P);
        return;
    }
    /* token-weighted over all ranks; per-rank means */
    double sum = 0, u = 0, mean_of_means = 0;
    int64_t n = 0;
    int ranks_with = 0;
    double *rmean = calloc((size_t)J->P, sizeof *rmean);
    if (!rmean) {
        setmsg(k, "out of memory");
        return;
    }
    for (int r = 0; r < J->P; r++) {
        const drank *R = &J->r[r];
        double s = 0;
        int64_t c = 0;
        if (unit_roundoff(R->elem[T_LOSS]) > u)
            u = unit_roundoff(R->elem[T_LOSS]);
        if (R->has[T_REDUCED] && unit_roundoff(R->elem[T_REDUCED]) > u)
            u = unit_roundoff(R->elem[T_REDUCED]);
        for (int64_t e = 0; e < R->B * R->n; e++) {
            if (R->labels[e] == J->c.ign)
                continue;
            if (!isfinite(R->loss[e])) {
                k->verdict = V_DEFECT;
                k->defect = "nonfinite-loss";
                k->rank = r;
                k->row = e / (R->n ? R->n : 1);
                const int64_t i = e % (R->n ? R->n : 1);
                k->token = J->have_tokens ? R->tokens[i] : -1;
                setmsg(k, "non-finite per-token loss %g on rank %d, row %" PRId64 " of its shard (a label that "
                       "counts)", R->loss[e], r, i);
                free(rmean);
                return;
            }
            s += R->loss[e];
            c++;
        }
        sum += s;
        n += c;
        rmean[r] = c ? s / (double)c : NAN;
        if (c) {
            mean_of_means += rmean[r];
            ranks_with++;
        }
    }
    if (!n) {
        free(rmean);
        setmsg(k, "every label is ignore_index %" PRId64 ": no token counts", J->c.ign);
        return;
    }
    mean_of_means /= ranks_with;
    const double g = sum / (double)n;
    const double rtol = u > ldexp(1, -30) ? 8 * u + (double)n * ldexp(1, -24) : (double)(n + 8) * ldexp(1, -53);
    const double tol = rtol * fabs(g) + ldexp(1, -60);
    *tol_out = tol;
    *g_out = g;
    int bad_r = -1, nbadr = 0, kind = 0; /* 1 mean of means, 2 own mean, 3 other */
    double bad_v = 0;
    for (int r = 0; r < J->P; r++) {
        const drank *R = &J->r[r];
        if (!R->has[T_REDUCED])
            continue;
        const double v = R->reduced;
        if (isfinite(v) && fabs(v - g) <= tol)
            continue;
        if (!nbadr++) {
            bad_r = r;
            bad_v = v;
            kind = isfinite(v) && fabs(v - mean_of_means) <= tol ? 1
                   : isfinite(v) && isfinite(rmean[r]) && fabs(v - rmean[r]) <= tol ? 2 : 3;
        }
    }
    if (!nbadr) {
        k->verdict = V_OK;
        setmsg(k, "loss_reduced on %d rank%s equals the token-weighted mean %.9g over %" PRId64
               " counted tokens on %d ranks (tolerance %.3g)", nred, nred > 1 ? "s" : "", g, n, J->P, tol);
        free(rmean);
        return;
    }
    k->verdict = V_DEFECT;
    k->rank = bad_r;
    const double diff = fabs(bad_v - g);
    char more[64] = "";
    if (nbadr > 1)
        snprintf(more, sizeof more, "; %d ranks report it", nbadr);
    if (kind == 1) {
        k->defect = "mean-of-rank-means";
        setmsg(k, "mean of per-rank means, not token-weighted: rank %d reports %.9g, the mean of the %d per-rank "
               "means %.9g; the token-weighted mean over all ranks is %.9g (%" PRId64 " counted tokens): off by %.3g "
               "(%.3g%%), tolerance %.3g%s", bad_r, bad_v, ranks_with, mean_of_means, g, n, diff,
               100 * diff / fabs(g), tol, more);
    } else if (kind == 2) {
        k->defect = "rank-local-mean";
        setmsg(k, "the rank's own mean, not reduced across ranks: rank %d reports %.9g, the mean over its own "
               "tokens; the token-weighted mean over all ranks is %.9g (%" PRId64 " counted tokens): off by %.3g, "
               "tolerance %.3g%s", bad_r, bad_v, g, n, diff, tol, more);
    } else {
        k->defect = "wrong-loss";
        setmsg(k, "wrong reported loss: rank %d reports %.9g; the token-weighted mean over all ranks is %.9g (%"
               PRId64 " counted tokens), the mean of per-rank means %.9g: off by %.3g, tolerance %.3g%s",
               bad_r, bad_v, g, n, mean_of_means, diff, tol, more);
    }
    free(rmean);
}

/* ------------------------------------------------------------ driver */

static int parse(int argc, char **argv, dcfg *c)
{
    memset(c, 0, sizeof *c);
    c->ign = -100;
    const char *const placement_names[] = {"ulysses-inner", "ring-inner", NULL};
    const arg_opt opts[] = {
        {"data", ARG_STR, &c->dir, 0, 0, "DIR", "the ranks' dumps: DIR/rank{r}.safetensors or DIR/rank{r}/NAME.npy",
         NULL, NULL},
        {"ranks", ARG_INT, &c->P, 1, RANKS_MAX, "P", "ranks (default: rank0, rank1, ... as found in DIR)", NULL,
         &c->seen_ranks},
        {"method", ARG_STR, &c->method_s, 0, 0, "M",
         "the shard map when the dump has no tokens tensors: ulysses (default), ring, zigzag, allgather, usp "
         "(Megatron's cp_comm_type names a2a, p2p, all_gather, a2a+p2p too)", NULL, NULL},
        {"ulysses-degree", ARG_INT, &c->U, 1, RANKS_MAX, "U", "usp: ranks per all-to-all group, dividing P "
         "(required for usp)", NULL, &c->seen_udeg},
        {"placement", ARG_CHOICE, &c->placement, 0, 0, "PL",
         "usp: ulysses-inner (groups are consecutive ranks, the default) or ring-inner", placement_names,
         &c->seen_place},
        {"doc-lens", ARG_STR, &c->doc_lens, 0, 0, "L1,L2,...",
         "packed documents of these lengths in every row (summing to N): positions restart and a document's last "
         "label is ignore_index", NULL, NULL},
        {"docs", ARG_STR, &c->docs_f, 0, 0, "F", "packed documents: integer cumulative offsets (B, D+1) or (D+1,), "
         "0 ... N (.npy or .safetensors)", NULL, NULL},
        {"cu-seqlens", ARG_STR, &c->cu_f, 0, 0, "F", "packed documents as flash-attn's cu_seqlens (D+1,) (.npy, or "
         "a .safetensors tensor cu_seqlens)", NULL, NULL},
        {"ignore-index", ARG_INT, &c->ign, INT32_MIN, INT32_MAX, "I",
         "the label of a token without loss (default -100, PyTorch's)", NULL, NULL},
        {"masked-labels", ARG_FLAG, &c->masked, 0, 0, NULL,
         "accept ignore_index at any label (prompt masking); the others must still be the next token", NULL, NULL},
        {"seq", ARG_INT, &c->seq, 1, (int64_t)1 << 40, "N", "the global sequence length (default: from the dump)",
         NULL, &c->seen_seq},
        {"json", ARG_FLAG, &c->json, 0, 0, NULL, "print one JSON object instead of text", NULL, NULL},
        {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    char msg[1024] = "";
    int prc = args_parse("ulysses check", argc - 1, argv + 1, opts, msg, sizeof msg);
    if (prc == ARGS_HELP) {
        args_usage(stdout, "ulysses", synopsis, opts);
        return -1;
    }
    if (prc == ARGS_ERROR) {
        fprintf(stderr, "%s\n", msg);
        return EXIT_BADINPUT;
    }
    if (!c->dir)
        return bad("--data DIR is required (see ulysses check --data --help)");
    if (!is_dir(c->dir))
        return bad("--data %s: %s", c->dir, exists(c->dir) ? "not a directory" : strerror(ENOENT));
    return 0;
}

static int resolve_method(djob *J)
{
    dcfg *c = &J->c;
    J->method = ULY_METHOD_ULYSSES;
    if (c->method_s) {
        if (uly_method_parse_any(c->method_s, &J->method) || J->method >= ULY_METHOD_COUNT)
            return bad("--method '%s': expected ulysses, ring, zigzag, allgather or usp (or a2a, p2p, all_gather, "
                       "a2a+p2p)", c->method_s);
        J->have_method = 1;
    }
    if ((c->seen_udeg || c->seen_place) && J->method != ULY_METHOD_USP)
        return bad("--%s applies to --method usp only", c->seen_udeg ? "ulysses-degree" : "placement");
    if (J->method == ULY_METHOD_USP && !c->seen_udeg)
        return bad("--method usp needs --ulysses-degree U: the data has no heads to choose it from");
    if (uly_sp_plan_init(&J->plan, J->method, J->P, J->method == ULY_METHOD_USP ? (int)c->U : 0, c->placement))
        return bad("--method %s on %d ranks: %s", uly_method_name(J->method), J->P, uly_last_error());
    return 0;
}

static int find_ranks(djob *J)
{
    char a[PATH_LEN], b[PATH_LEN];
    if (J->c.seen_ranks) {
        J->P = (int)J->c.P;
        int k = rank_source(J->c.dir, J->P, a, b);
        if (k < 0)
            return EXIT_BADINPUT;
        if (k)
            return bad("--ranks %d, but %s exists too: give the number of ranks the dump has", J->P,
                       k == 1 ? a : b);
        return 0;
    }
    int P = 0;
    for (;; P++) {
        int k = rank_source(J->c.dir, P, a, b);
        if (k < 0)
            return EXIT_BADINPUT;
        if (!k || P >= RANKS_MAX)
            break;
    }
    if (!P)
        return bad("--data %s: no rank0.safetensors or rank0/ (the dump of rank 0)", J->c.dir);
    J->P = P;
    return 0;
}

static int load(djob *J)
{
    int rc = find_ranks(J);
    if (rc)
        return rc;
    J->r = calloc((size_t)J->P, sizeof *J->r);
    if (!J->r)
        return bad("out of memory");
    for (int r = 0; r < J->P; r++)
        if ((rc = read_rank(J, r)))
            return rc;
    /* the same set and batch on every rank */
    J->B = J->r[0].B;
    int64_t sum = 0, tmax = -1;
    J->have_tokens = J->r[0].has[T_TOKENS];
    for (int r = 0; r < J->P; r++) {
        const drank *R = &J->r[r];
        if (R->B != J->B)
            return bad("%s: input_ids has %" PRId64 " rows, rank 0's %" PRId64 ": every rank holds the same batch "
                       "rows", R->src, R->B, J->B);
        for (int t = T_POS; t < T_N; t++)
            if (t != T_REDUCED && R->has[t] != J->r[0].has[t])
                return bad("%s: tensor %s is %s, but %s on rank 0: every rank dumps the same tensors", R->src,
                           tname[t], R->has[t] ? "present" : "absent", R->has[t] ? "absent" : "present");
        sum += R->n;
        if (R->has[T_TOKENS])
            for (int64_t i = 0; i < R->n; i++)
                if (R->tokens[i] > tmax)
                    tmax = R->tokens[i];
    }
    J->N = J->have_tokens ? tmax + 1 : sum;
    if (J->c.seen_seq) {
        if (!J->have_tokens && J->c.seq != sum)
            return bad("--seq %" PRId64 ", but the ranks hold %" PRId64 " tokens", J->c.seq, sum);
        J->N = J->c.seq;
    }
    if (J->N < 1)
        return bad("--data %s: the ranks hold no token", J->c.dir);
    if ((rc = resolve_method(J)) || (rc = read_docs(J)) || (rc = build_map(J)))
        return rc;
    J->dstart = malloc((size_t)(J->B * J->N) * sizeof *J->dstart);
    if (!J->dstart)
        return bad("out of memory");
    for (int64_t b = 0; b < J->B; b++) {
        int64_t d = 0;
        for (int64_t t = 0; t < J->N; t++) {
            while (J->off && d < J->D && J->off[b * (J->D + 1) + d + 1] <= t)
                d++;
            J->dstart[b * J->N + t] = J->off ? J->off[b * (J->D + 1) + d] : 0;
        }
    }
    return 0;
}

/* A note when the ranks' own map differs from the --method asked for. */
static void note_map(const djob *J)
{
    if (!J->have_method && !J->have_tokens)
        fprintf(stderr, CMD ": note: no --method and no tokens tensors: the ulysses shard map (contiguous "
                "shards)\n");
    if (!J->have_tokens || !J->have_method)
        return;
    uly_attn_desc a = {.batch = J->B, .seq = J->N, .heads = J->P, .kv_heads = J->P, .head_dim = 1};
    uly_layout L;
    if (uly_layout_init(&L, &a, &J->plan))
        return;
    for (int r = 0; r < J->P; r++) {
        uly_rank_part part;
        uly_layout_part(&L, r, &part);
        int same = part.tokens == J->r[r].n;
        for (int64_t i = 0, s = 0, acc = 0; same && i < J->r[r].n; i++) {
            while (i >= acc + part.tok_count[s])
                acc += part.tok_count[s++];
            same = J->r[r].tokens[i] == part.tok_begin[s] + (i - acc);
        }
        if (!same) {
            fprintf(stderr, CMD ": note: rank %d's tokens tensor differs from the %s shard map; the checks use the "
                    "tokens tensors\n", r, uly_method_name(J->method));
            return;
        }
    }
}

static int report(const djob *J, dcheck *k, int nk, double tol, double g)
{
    int defects = 0;
    for (int i = 0; i < nk; i++)
        defects += k[i].verdict == V_DEFECT;
    const int rc = defects ? ULY_EXIT_RUNTIME : 0;
    if (J->c.json) {
        json_t *o = json_object();
        int e = !o;
        e |= uly_json_set_str(o, "command", "check --data") | uly_json_set_str(o, "data", J->c.dir);
        e |= uly_json_set_int(o, "ranks", J->P) | uly_json_set_int(o, "batch", J->B) |
             uly_json_set_int(o, "seq", J->N) | uly_json_set_int(o, "docs", J->D);
        e |= uly_json_set_str(o, "token_map", J->map_desc) | uly_json_set_int(o, "ignore_index", J->c.ign);
        if (J->have_method || !J->have_tokens)
            e |= uly_json_set_str(o, "method", uly_method_name(J->method));
        json_t *a = e ? NULL : uly_json_add_array(o, "checks");
        e |= !a;
        for (int i = 0; i < nk && !e; i++) {
            json_t *c = uly_json_append_object(a);
            e |= !c;
            if (e)
                break;
            e |= uly_json_set_str(c, "check", k[i].name) | uly_json_set_str(c, "verdict", vname[k[i].verdict]);
            if (k[i].defect)
                e |= uly_json_set_str(c, "defect", k[i].defect);
            if (k[i].rank >= 0)
                e |= uly_json_set_int(c, "rank", k[i].rank);
            if (k[i].token >= 0)
                e |= uly_json_set_int(c, "token", k[i].token);
            if (k[i].row >= 0)
                e |= uly_json_set_int(c, "row", k[i].row);
            if (strcmp(k[i].name, "loss") == 0 && tol > 0)
                e |= uly_json_set_real(c, "token_weighted_mean", g) | uly_json_set_real(c, "tolerance", tol);
            e |= uly_json_set_str(c, "message", k[i].msg);
        }
        e |= uly_json_set_bool(o, "pass", !defects) | uly_json_set_int(o, "exit", rc);
        if (uly_json_emit(stdout, o, e, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10)))
            return bad("out of memory writing the JSON report");
        return rc;
    }
    printf("ulysses check --data %s: %d rank%s, B = %" PRId64 ", N = %" PRId64 ", %s", J->c.dir, J->P,
           J->P > 1 ? "s" : "", J->B, J->N, J->map_desc);
    if (J->off)
        printf(", %" PRId64 " documents per row", J->D);
    printf(", ignore_index %" PRId64 "\n", J->c.ign);
    for (int i = 0; i < nk; i++)
        printf("  %-10s %-8s %s\n", k[i].name, vname[k[i].verdict], k[i].msg);
    if (defects) {
        printf("verdict: DEFECT:");
        for (int i = 0; i < nk; i++)
            if (k[i].verdict == V_DEFECT)
                printf(" %s (%s)", k[i].name, k[i].defect);
        printf("\n");
    } else {
        printf("verdict: ok\n");
    }
    return rc;
}

int check_data_main(int argc, char **argv)
{
    djob J;
    memset(&J, 0, sizeof J);
    int rc = parse(argc, argv, &J.c);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!(rc = load(&J))) {
        note_map(&J);
        dcheck k[4];
        memset(k, 0, sizeof k);
        const char *names[4] = {"coverage", "labels", "positions", "loss"};
        for (int i = 0; i < 4; i++) {
            k[i].name = names[i];
            k[i].rank = -1;
            k[i].token = k[i].row = -1;
        }
        double tol = 0, g = 0;
        check_coverage(&J, &k[0]);
        check_labels(&J, &k[1]);
        check_positions(&J, &k[2]);
        check_loss(&J, &k[3], &tol, &g);
        rc = report(&J, k, 4, tol, g);
    }
    free_job(&J);
    return rc;
}
