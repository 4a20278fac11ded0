/* SPDX-License-Identifier: Apache-2.0 */
/*
 * docs.c -- `ulysses-sim docs`: the load balance of packed documents under
 * context parallelism.  For document lengths (a list, a text file, or a
 * seeded distribution filling --seq tokens) and a CP degree P, every
 * balancer's per-rank attention work from the plan layer (uly_docbal_work:
 * visible (query, key) pairs under the causal mask within documents, exact
 * integers), the Ulysses head split beside them, and what the busiest rank
 * costs over the mean one, priced with the simulator's attention compute
 * model (compute.c: usim_attn_s, usim_attn_bwd_s).  Equations and the worked
 * example: doc/simulator.md, "Packed documents and load balance".
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base_json.h"
#include "compute.h"
#include "cost.h"
#include "opts.h"
#include "output.h"
#include "ulysses_plan.h"

int cmd_docs(int argc, char **argv);

static const char docs_usage[] =
    "usage: ulysses-sim docs --cp P (--doc-lens L1,L2,... | --doc-file F | --doc-dist DIST --seq N)\n"
    "                        [--seq N] [--seed S] [--balancer NAME|all] [--platform PRESET|FILE]\n"
    "                        [--model PRESET|FILE] [--format table|json] [--json]\n"
    "\n"
    "The attention work each of P context-parallel ranks gets from a packed sequence of\n"
    "documents (causal within documents), under the balancers frameworks use, and what the\n"
    "busiest rank costs over the mean one (doc/simulator.md, \"Packed documents and load\n"
    "balance\").  Work is visible (query, key) pairs per head, exact.\n"
    "\n"
    "  --cp P              context-parallel ranks, 1 .. 65536 (required)\n"
    "  --doc-lens L,...    document lengths in tokens (each >= 1; 4K = 4096)\n"
    "  --doc-file F        a text file of lengths, separated by white space or newlines\n"
    "                      (at most 16M documents)\n"
    "  --doc-dist DIST     uniform:MIN:MAX (integers MIN .. MAX) or lognormal:MEAN:SIGMA\n"
    "                      (MEAN the mean length, SIGMA of the log), drawn until --seq\n"
    "                      tokens; the last document is cut to fill --seq exactly\n"
    "  --seq N             total tokens: required with --doc-dist; with a list or a file\n"
    "                      the lengths must sum to it; at most 2G (2^31)\n"
    "  --seed S            seed of --doc-dist's generator (splitmix64; default 1)\n"
    "  --balancer NAME     contiguous, zigzag, head-tail, head-tail-doc-major, doc-zigzag,\n"
    "                      or all (default); the ulysses row is always printed\n"
    "  --platform P        cluster preset or file (default dgx-a100-40g)\n"
    "  --model M           model preset or file (default gpt-7b): heads, head dim, layers\n"
    "                      and dtype of the priced attention\n"
    "  --format F          table (default) or json; --json is --format json\n";

/* ------------------------------------------------------------ lengths */

typedef struct lens_t {
    int64_t *v;
    int64_t n, cap;
} lens_t;

#define DOCS_MAX ((int64_t)1 << 24) /* documents at most (16M) */

static void lens_push(lens_t *l, int64_t x)
{
    if (l->n >= DOCS_MAX)
        die_usage("docs: more than %lld documents", (long long)DOCS_MAX);
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 64;
        int64_t *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) {
            fprintf(stderr, "ulysses-sim: docs: out of memory for %lld document lengths\n", (long long)cap);
            exit(1);
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}

/* One length: an integer >= 1 (K/M/G suffixes as every count). */
static int64_t one_len(const char *s, const char *where)
{
    int64_t x;
    if (parse_count(s, &x))
        die_usage("docs: %s: '%s' is not a document length (an integer >= 1)", where, s);
    if (x < 1)
        die_usage("docs: %s: document length %lld (every length must be >= 1)", where, (long long)x);
    return x;
}

static void lens_from_list(lens_t *l, const char *s)
{
    char tok[64];
    for (const char *t = s;;) {
        const char *e = strchr(t, ',');
        size_t k = e ? (size_t)(e - t) : strlen(t);
        if (k == 0)
            die_usage("docs: --doc-lens '%s': expected L1,L2,... (an empty length)", s);
        if (k >= sizeof tok)
            die_usage("docs: --doc-lens '%s': a length is too long", s);
        memcpy(tok, t, k);
        tok[k] = 0;
        lens_push(l, one_len(tok, "--doc-lens"));
        if (!e)
            break;
        t = e + 1;
    }
}

static void lens_from_file(lens_t *l, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        die_usage("docs: --doc-file %s: %s", path, strerror(errno));
    char tok[64];
    int64_t line = 1;
    size_t k = 0;
    int c;
    char where[96];
    for (;;) {
        c = getc(f);
        if (c == EOF || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',') {
            if (k) {
                tok[k] = 0;
                snprintf(where, sizeof where, "--doc-file %s line %lld", path, (long long)line);
                lens_push(l, one_len(tok, where));
                k = 0;
            }
            if (c == ',')
                die_usage("docs: --doc-file %s line %lld: lengths are separated by white space, not ','", path,
                          (long long)line);
            if (c == '\n')
                line++;
            if (c == EOF)
                break;
            continue;
        }
        if (k + 1 >= sizeof tok) {
            tok[k] = 0;
            die_usage("docs: --doc-file %s line %lld: '%s...' is not a document length", path, (long long)line, tok);
        }
        tok[k++] = (char)c;
    }
    int err = ferror(f);
    fclose(f);
    if (err)
        die_usage("docs: --doc-file %s: read error", path);
    if (l->n == 0)
        die_usage("docs: --doc-file %s holds no document lengths", path);
}

/* splitmix64 (Steele, Lea, Flood 2014; Vigna's public-domain reference):
 * the whole state is one 64-bit counter, so a seed gives one sequence. */
static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* uniform in [0, 1): the top 53 bits */
static double unit(uint64_t *s)
{
    return (double)(splitmix64(s) >> 11) * 0x1.0p-53;
}

typedef struct dist_t {
    int kind;            /* 0 uniform, 1 lognormal */
    int64_t lo, hi;      /* uniform */
    double mean, sigma;  /* lognormal */
} dist_t;

static void dist_parse(const char *s, dist_t *d)
{
    char kind[32];
    const char *c1 = strchr(s, ':');
    if (!c1 || (size_t)(c1 - s) >= sizeof kind)
        die_usage("docs: --doc-dist '%s': expected uniform:MIN:MAX or lognormal:MEAN:SIGMA", s);
    memcpy(kind, s, (size_t)(c1 - s));
    kind[c1 - s] = 0;
    const char *a = c1 + 1, *c2 = strchr(a, ':');
    if (!c2 || strchr(c2 + 1, ':'))
        die_usage("docs: --doc-dist '%s': expected uniform:MIN:MAX or lognormal:MEAN:SIGMA", s);
    char x[64], y[64];
    if ((size_t)(c2 - a) >= sizeof x || strlen(c2 + 1) >= sizeof y)
        die_usage("docs: --doc-dist '%s': parameter too long", s);
    memcpy(x, a, (size_t)(c2 - a));
    x[c2 - a] = 0;
    strcpy(y, c2 + 1);
    if (!strcmp(kind, "uniform")) {
        d->kind = 0;
        if (parse_count(x, &d->lo) || parse_count(y, &d->hi) || d->lo < 1 || d->hi < d->lo)
            die_usage("docs: --doc-dist '%s': uniform:MIN:MAX needs integers 1 <= MIN <= MAX", s);
    } else if (!strcmp(kind, "lognormal")) {
        d->kind = 1;
        char *e1, *e2;
        errno = 0;
        d->mean = strtod(x, &e1);
        d->sigma = strtod(y, &e2);
        if (errno || *e1 || *e2 || !*x || !*y || !(d->mean >= 1 && d->mean <= 1e12) ||
            !(d->sigma >= 0 && d->sigma <= 10))
            die_usage("docs: --doc-dist '%s': lognormal:MEAN:SIGMA needs 1 <= MEAN <= 1e12 and 0 <= SIGMA <= 10", s);
    } else {
        die_usage("docs: --doc-dist '%s': unknown distribution '%s' (uniform or lognormal)", s, kind);
    }
}

/* One length: uniform: lo + floor(u (hi - lo + 1)); lognormal: round(exp(mu
 * + sigma z)), mu = ln(mean) - sigma^2 / 2 (so that the mean length is MEAN),
 * z standard normal by Box-Muller from two uniforms; at least 1. */
static int64_t dist_draw(const dist_t *d, uint64_t *s, int64_t cap)
{
    double v;
    if (d->kind == 0) {
        v = (double)d->lo + floor(unit(s) * (double)(d->hi - d->lo + 1));
        if (v > (double)d->hi)
            v = (double)d->hi;
    } else {
        double u1 = 1.0 - unit(s), u2 = unit(s); /* u1 in (0, 1] */
        double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        double mu = log(d->mean) - 0.5 * d->sigma * d->sigma;
        v = floor(exp(mu + d->sigma * z) + 0.5);
    }
    if (!(v >= 1))
        v = 1;
    return v > (double)cap ? cap : (int64_t)v;
}

/* ------------------------------------------------------------ pricing */

typedef struct row_t {
    const char *name;
    int ulysses;           /* the head split, not a balancer */
    int64_t *tokens;       /* per rank: query rows of its attention (per head) */
    int64_t *pairs;        /* per rank, per head (balancers) */
    double *hpairs;        /* per rank: (head, query, key) triples (for the prices) */
    int64_t *hexact;       /* the same, exact (-1: beyond int64) */
    int64_t tokens_max;
    double pairs_max, pairs_mean, ratio;   /* per head: triples / H */
    double fwd_max, fwd_mean, bwd_max, bwd_mean; /* seconds per layer */
    double imb_layer, imb_iter;            /* seconds */
} row_t;

typedef struct price_t {
    const usim_platform *p;
    usim_dtype dt;
    double H, d;
    int64_t layers;
} price_t;

/* Forward and backward attention seconds of one rank: heads h, tq query rows,
 * `triples` visible (head, query, key) triples: FLOPs 4 d per triple forward
 * (QK^T and PV), USIM_ATTN_BWD_FACTOR times that backward. */
static void rank_time(const price_t *pr, double heads, double tq, double triples, double *f, double *b)
{
    const double fl = 4.0 * pr->d * triples;
    *f = usim_attn_s(pr->p, pr->dt, fl, 1, heads, tq, pr->d);
    *b = usim_attn_bwd_s(pr->p, pr->dt, USIM_ATTN_BWD_FACTOR * fl, 1, heads, tq, pr->d);
}

static void row_finish(row_t *w, const price_t *pr, int P)
{
    double sum = 0, fs = 0, bs = 0, it_max = 0, it_sum = 0;
    w->tokens_max = 0;
    w->pairs_max = 0;
    w->fwd_max = w->bwd_max = 0;
    for (int r = 0; r < P; r++) {
        double heads, f, b;
        if (w->ulysses) {
            int64_t hb, hc;
            uly_split((int64_t)pr->H, P, r, &hb, &hc);
            heads = (double)hc;
        } else {
            heads = pr->H;
        }
        rank_time(pr, heads, (double)w->tokens[r], w->hpairs[r], &f, &b);
        double per = w->hpairs[r] / pr->H;
        sum += per;
        if (per > w->pairs_max)
            w->pairs_max = per;
        if (w->tokens[r] > w->tokens_max)
            w->tokens_max = w->tokens[r];
        fs += f;
        bs += b;
        if (f > w->fwd_max)
            w->fwd_max = f;
        if (b > w->bwd_max)
            w->bwd_max = b;
        if (f + b > it_max)
            it_max = f + b;
        it_sum += f + b;
    }
    w->pairs_mean = sum / P;
    w->ratio = w->pairs_mean > 0 ? w->pairs_max / w->pairs_mean : 1;
    w->fwd_mean = fs / P;
    w->bwd_mean = bs / P;
    w->imb_layer = w->fwd_max - w->fwd_mean;
    /* per iteration: every layer's forward and backward wait for the busiest rank */
    w->imb_iter = (double)pr->layers * (it_max - it_sum / P);
}

/* a b for a, b >= 0, or -1 beyond int64 */
static int64_t mul_exact(int64_t a, int64_t b)
{
    return a == 0 || b <= INT64_MAX / a ? a * b : -1;
}

/* ------------------------------------------------------------ output */

static void json_ints(json_t *a, const int64_t *v, int n, int *bad)
{
    for (int i = 0; i < n && !*bad; i++)
        *bad |= json_array_append_new(a, json_integer((json_int_t)v[i])) != 0;
}

static int print_json(const usim_platform *p, const usim_model *m, const price_t *pr, const lens_t *l, int64_t N,
                      int P, const char *source, int64_t seed, int64_t cut_from, int64_t total, row_t *rows, int nrows)
{
    json_t *o = json_object(), *a = NULL;
    int bad = !o;
    if (!bad) {
        bad |= uly_json_set_str(o, "platform", p->name);
        bad |= uly_json_set_str(o, "model", m->name);
        bad |= uly_json_set_int(o, "cp", P);
        bad |= uly_json_set_int(o, "seq", N);
        bad |= uly_json_set_int(o, "docs", l->n);
        bad |= uly_json_set_str(o, "doc_source", source);
        if (seed >= 0)
            bad |= uly_json_set_int(o, "seed", seed);
        if (cut_from > 0)
            bad |= uly_json_set_int(o, "last_doc_cut_from", cut_from);
        bad |= !(a = uly_json_add_array(o, "doc_lens"));
        if (!bad)
            json_ints(a, l->v, (int)l->n, &bad);
        bad |= uly_json_set_int(o, "heads", (int64_t)pr->H);
        bad |= uly_json_set_int(o, "head_dim", (int64_t)pr->d);
        bad |= uly_json_set_int(o, "layers", pr->layers);
        bad |= uly_json_set_str(o, "dtype", usim_dtype_name(pr->dt));
        bad |= uly_json_set_int(o, "total_pairs", total);
        bad |= !(a = uly_json_add_array(o, "balancers"));
    }
    for (int i = 0; i < nrows && !bad; i++) {
        row_t *w = &rows[i];
        json_t *x = uly_json_append_object(a), *arr;
        bad |= !x;
        if (bad)
            break;
        bad |= uly_json_set_str(x, "name", w->name);
        bad |= !(arr = uly_json_add_array(x, "tokens"));
        if (!bad)
            json_ints(arr, w->tokens, P, &bad);
        if (!bad && !w->ulysses) {
            bad |= !(arr = uly_json_add_array(x, "pairs"));
            if (!bad)
                json_ints(arr, w->pairs, P, &bad);
        }
        if (!bad) {
            bad |= !(arr = uly_json_add_array(x, "head_pairs"));
            for (int r = 0; r < P && !bad; r++)
                bad |= json_array_append_new(arr, w->hexact[r] >= 0 ? json_integer((json_int_t)w->hexact[r])
                                                                     : json_real(w->hpairs[r])) != 0;
        }
        if (bad)
            break;
        bad |= uly_json_set_int(x, "tokens_max", w->tokens_max);
        bad |= uly_json_set_fixed(x, "pairs_max", w->pairs_max, 3);
        bad |= uly_json_set_fixed(x, "pairs_mean", w->pairs_mean, 3);
        bad |= uly_json_set_fixed(x, "max_over_mean", w->ratio, 6);
        bad |= uly_json_set_fixed(x, "attn_fwd_ms_max", 1e3 * w->fwd_max, 6);
        bad |= uly_json_set_fixed(x, "attn_fwd_ms_mean", 1e3 * w->fwd_mean, 6);
        bad |= uly_json_set_fixed(x, "attn_bwd_ms_max", 1e3 * w->bwd_max, 6);
        bad |= uly_json_set_fixed(x, "attn_bwd_ms_mean", 1e3 * w->bwd_mean, 6);
        bad |= uly_json_set_fixed(x, "imbalance_fwd_ms_per_layer", 1e3 * w->imb_layer, 6);
        bad |= uly_json_set_fixed(x, "imbalance_ms_per_iteration", 1e3 * w->imb_iter, 6);
    }
    if (uly_json_emit(stdout, o, bad, JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(15))) {
        fprintf(stderr, "ulysses-sim: docs: cannot write the JSON output (out of memory or write error)\n");
        return 1;
    }
    return 0;
}

static void print_table(const usim_platform *p, const usim_model *m, const price_t *pr, const lens_t *l, int64_t N,
                        int P, const char *source, int64_t cut_from, int64_t total, row_t *rows, int nrows)
{
    char pn[OUT_SAFE], mn[OUT_SAFE], sn[OUT_SAFE];
    int64_t mn_len = l->v[0], mx_len = l->v[0];
    for (int64_t i = 1; i < l->n; i++) {
        mn_len = l->v[i] < mn_len ? l->v[i] : mn_len;
        mx_len = l->v[i] > mx_len ? l->v[i] : mx_len;
    }
    printf("packed documents: %lld (%s), %lld .. %lld tokens, mean %.1f; %lld tokens, %lld visible pairs per head; "
           "CP %d\n", (long long)l->n, out_safe(source, sn), (long long)mn_len, (long long)mx_len,
           (double)N / (double)l->n, (long long)N, (long long)total, P);
    if (cut_from > 0)
        printf("note: the last document was cut from %lld to %lld tokens to fill --seq %lld\n", (long long)cut_from,
               (long long)l->v[l->n - 1], (long long)N);
    if (P > (int)pr->H)
        printf("note: CP %d > %lld heads: the ulysses row leaves %lld ranks without a head\n", P, (long long)pr->H,
               (long long)(P - (int64_t)pr->H));
    printf("priced: %s on %s, %lld heads of %lld, %lld layers, %s, one packed sequence; forward and backward "
           "per rank by the attention compute model\n\n", out_safe(m->name, mn), out_safe(p->name, pn),
           (long long)pr->H, (long long)pr->d, (long long)pr->layers, usim_dtype_name(pr->dt));
    printf("%-20s %11s %13s %13s %9s %12s %12s %12s %12s\n", "balancer", "tokens max", "pairs max", "pairs mean",
           "max/mean", "fwd ms max", "fwd ms mean", "imb ms/layer", "imb ms/iter");
    for (int i = 0; i < nrows; i++) {
        const row_t *w = &rows[i];
        printf("%-20s %11lld %13.1f %13.1f %9.3f %12.4f %12.4f %12.4f %12.3f\n", w->name, (long long)w->tokens_max,
               w->pairs_max, w->pairs_mean, w->ratio, 1e3 * w->fwd_max, 1e3 * w->fwd_mean, 1e3 * w->imb_layer,
               1e3 * w->imb_iter);
    }
    printf("\npairs per rank (per head):\n");
    for (int i = 0; i < nrows; i++) {
        const row_t *w = &rows[i];
        printf("%-20s", w->name);
        for (int r = 0; r < P; r++) {
            if (w->ulysses)
                printf(" %.6g", w->hpairs[r] / pr->H);
            else
                printf(" %lld", (long long)w->pairs[r]);
        }
        printf("\n");
    }
}

/* ------------------------------------------------------------ command */

int cmd_docs(int argc, char **argv)
{
    opts o;
    opts_defaults(&o);
    const char *list = NULL, *file = NULL, *dist_s = NULL, *bal_s = "all";
    int64_t seq = 0, P = 0, seed = 1;
    int json = 0, seed_given = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(docs_usage, stdout);
            return 0;
        }
        if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        }
        if (!v)
            die_usage("docs: %s needs a value (see ulysses-sim docs --help)", a);
        if (!strcmp(a, "--doc-lens")) {
            list = v;
        } else if (!strcmp(a, "--doc-file")) {
            file = v;
        } else if (!strcmp(a, "--doc-dist")) {
            dist_s = v;
        } else if (!strcmp(a, "--seq")) {
            if (parse_count(v, &seq) || seq < 1 || seq > ULY_DOCS_MAX_TOKENS)
                die_usage("docs: --seq '%s': expected an integer in 1..%lld", v, (long long)ULY_DOCS_MAX_TOKENS);
        } else if (!strcmp(a, "--cp")) {
            if (parse_count(v, &P) || P < 1 || P > 65536)
                die_usage("docs: --cp '%s': expected an integer in 1..65536", v);
        } else if (!strcmp(a, "--seed")) {
            if (parse_count(v, &seed) || seed < 0)
                die_usage("docs: --seed '%s': expected an integer >= 0", v);
            seed_given = 1;
        } else if (!strcmp(a, "--balancer")) {
            bal_s = v;
        } else if (!strcmp(a, "--platform")) {
            o.platform = v;
        } else if (!strcmp(a, "--model")) {
            o.model = v;
        } else if (!strcmp(a, "--format")) {
            if (!strcmp(v, "table")) json = 0;
            else if (!strcmp(v, "json")) json = 1;
            else die_usage("docs: --format '%s': expected table or json", v);
        } else {
            die_usage("docs: unknown option '%s' (see ulysses-sim docs --help)", a);
        }
        i++;
    }
    if (!P)
        die_usage("docs: --cp P is required (the context-parallel ranks)");
    if (!!list + !!file + !!dist_s != 1)
        die_usage("docs: give the documents with exactly one of --doc-lens, --doc-file, --doc-dist");
    int bal = -1;
    if (strcmp(bal_s, "all") && uly_docbal_parse(bal_s, &bal))
        die_usage("docs: --balancer '%s': expected contiguous, zigzag, head-tail, head-tail-doc-major, doc-zigzag "
                  "or all", bal_s);
    if (seed_given && !dist_s)
        die_usage("docs: --seed needs --doc-dist");

    lens_t l = {0};
    int64_t cut_from = 0, N = 0;
    char source[160];
    if (dist_s) {
        dist_t d;
        dist_parse(dist_s, &d);
        if (!seq)
            die_usage("docs: --doc-dist needs --seq N (the tokens to fill)");
        uint64_t s = (uint64_t)seed;
        while (N < seq) {
            int64_t x = dist_draw(&d, &s, seq), left = seq - N;
            if (x > left) {
                cut_from = x;
                x = left;
            }
            lens_push(&l, x);
            N += x;
        }
        snprintf(source, sizeof source, "%s, seed %lld", dist_s, (long long)seed);
    } else {
        if (list)
            lens_from_list(&l, list);
        else
            lens_from_file(&l, file);
        if (uly_docs_check(l.v, l.n, &N))
            die_usage("docs: %s", uly_last_error());
        if (seq && seq != N)
            die_usage("docs: the %lld document lengths sum to %lld tokens, not --seq %lld", (long long)l.n,
                      (long long)N, (long long)seq);
        snprintf(source, sizeof source, "%s", list ? "--doc-lens" : file);
    }
    if (uly_docs_check(l.v, l.n, &N))
        die_usage("docs: %s", uly_last_error());

    usim_platform p;
    usim_model m;
    load_inputs(&o, &p, &m);
    price_t pr = {&p, m.dtype, (double)m.heads, (double)usim_model_head_dim(&m), m.layers};
    if (m.heads < 1 || (!m.head_dim && m.hidden % m.heads))
        die_usage("docs: --model %s: hidden %lld is not a multiple of %lld heads", o.model, (long long)m.hidden,
                  (long long)m.heads);

    const int np = (int)P;
    const int64_t total = uly_docs_pairs_total(l.v, l.n);
    row_t rows[ULY_DOCBAL_COUNT + 1];
    int nrows = 0;
    memset(rows, 0, sizeof rows);
    for (int b = 0; b <= ULY_DOCBAL_COUNT; b++) {
        const int uly = b == ULY_DOCBAL_COUNT;
        if (!uly && bal >= 0 && b != bal)
            continue;
        row_t *w = &rows[nrows++];
        w->name = uly ? "ulysses" : uly_docbal_name(b);
        w->ulysses = uly;
        w->tokens = calloc((size_t)np, sizeof *w->tokens);
        w->pairs = calloc((size_t)np, sizeof *w->pairs);
        w->hpairs = calloc((size_t)np, sizeof *w->hpairs);
        w->hexact = calloc((size_t)np, sizeof *w->hexact);
        if (!w->tokens || !w->pairs || !w->hpairs || !w->hexact) {
            fprintf(stderr, "ulysses-sim: docs: out of memory for %d ranks\n", np);
            return 1;
        }
        if (uly) {
            /* the head split: rank r computes its heads over the whole sequence */
            for (int r = 0; r < np; r++) {
                int64_t hb, hc;
                uly_split(m.heads, np, r, &hb, &hc);
                w->tokens[r] = N;
                w->hpairs[r] = (double)hc * (double)total;
                w->hexact[r] = mul_exact(hc, total);
            }
        } else {
            int st = uly_docbal_work(b, l.v, l.n, np, w->tokens, w->pairs);
            if (st == ULY_EINVAL)
                die_usage("docs: %s", uly_last_error());
            if (st) {
                fprintf(stderr, "ulysses-sim: docs: %s\n", uly_last_error());
                return 1;
            }
            for (int r = 0; r < np; r++) {
                w->hpairs[r] = (double)m.heads * (double)w->pairs[r];
                w->hexact[r] = mul_exact(m.heads, w->pairs[r]);
            }
        }
        row_finish(w, &pr, np);
    }
    int rc = 0;
    if (json)
        rc = print_json(&p, &m, &pr, &l, N, np, source, dist_s ? seed : -1, cut_from, total, rows, nrows);
    else
        print_table(&p, &m, &pr, &l, N, np, source, cut_from, total, rows, nrows);
    for (int i = 0; i < nrows; i++) {
        free(rows[i].tokens);
        free(rows[i].pairs);
        free(rows[i].hpairs);
        free(rows[i].hexact);
    }
    free(l.v);
    if (fflush(stdout)) {
        fprintf(stderr, "ulysses-sim: error writing the output\n");
        return 1;
    }
    return rc;
}
