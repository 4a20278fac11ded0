/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd_explain.c -- `ulysses explain`: what each rank holds before and after
 * every collective of one attention layer (forward and backward), the P x P
 * send matrices, per-rank totals, and the closed-form volume with the
 * numbers substituted, checked against the sums.  No MPI: every number comes
 * from the plan layer (the layout: uly_layout_part, uly_layout_a2a_block;
 * uly_plan_volume, uly_plan_method_volume, uly_attn_pairs), the same functions
 * the library's counters and the simulator use, so the explanation cannot
 * drift from what runs.  --svg draws the same layouts (explain_draw.c).
 *
 * Not here: running anything, timing, MPI.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "base/base_json.h"
#include "base/base_out.h"
#include "explain.h"

#include <fcntl.h>
#include <unistd.h>

static const char *const placement_names[] = {"ulysses-inner", "ring-inner", NULL};
static const char *const dtype_names[] = {"f32", "f64", NULL};

/* Matrices and per-rank lines are printed in full up to these sizes. */
/* RANKS_MAX: the text checks every one of the P x P all-to-all blocks
 * against the formula and the plan's volumes (about 3 s at 1024 ranks, and
 * P^2 beyond); DRAW_MAX_P: a figure gives each rank one band and the send
 * matrices P x P cells, unreadable (and P^2 bytes: 85 MB at 256) beyond. */
enum { MATRIX_MAX_P = 16, TABLE_MAX_P = 64, RANKS_MAX = 1024, DRAW_MAX_P = 64 };
/* --docs: at most DOCS_MAX documents, and B x (D + 1) offsets at most
 * DOC_OFFSETS_MAX (every batch row has the same documents). */
enum { DOCS_MAX = 4096, DOC_OFFSETS_MAX = 1 << 22 };

typedef struct xcfg {
    uly_attn_desc a;
    int P, method;        /* uly_method: the library's five and ULY_METHOD_MEGATRON_SP */
    uly_sp_plan plan;     /* the method's plan; megatron-sp: a ulysses plan of P ranks (its partitions) */
    uly_layout L;         /* what every rank holds (ulysses, megatron-sp), from plan */
    const char *svg;
    int64_t *doc_len;     /* --docs: the D document lengths, or NULL */
    int scheme;           /* --method dcp|helix: ULY_DECODE_*; -1 for the SP methods */
    uly_kv_layout kv;     /* decode: the cache layout (a.seq = the prompt) */
    int64_t generate;     /* decode: tokens generated before the step explained */
} xcfg;

static const char synopsis[] =
    "explain --ranks P [--seq N] [--heads H] [--kv-heads Hkv] [--batch B] [--head-dim d]\n"
    "               [--dtype f32|f64] [--method ulysses|ring|zigzag|allgather|usp|megatron-sp]\n"
    "               [--ulysses-degree U] [--placement ulysses-inner|ring-inner] [--causal] [--window W]\n"
    "               [--docs L1,L2,...] [--svg FILE.svg|.png|.pdf] [--json] [--html FILE.html]\n"
    "       explain --method dcp|helix --ranks P [--prompt N] [--generate T]\n"
    "               [--kv-layout contiguous|round-robin:B] [--heads H] [--kv-heads Hkv] [--batch B] ...\n"
    "Explains one attention layer on P ranks, step by step: what each rank holds before and\n"
    "after every collective (tokens x heads), the P x P send matrices, per-rank totals and the\n"
    "closed-form volume checked against them.  With --method dcp or helix: one decode step over\n"
    "a KV cache sharded by tokens (which tokens each rank holds, what the step sends, the merge;\n"
    "doc/inference.md).  Needs no MPI.  Every term printed is defined in doc/glossary.md.";

/* ------------------------------------------------------------ helpers */

/* "3-7", "5", or "none" for [begin, begin + count) */
/* Room for any rng() ("-9223372036854775808-9223372036854775807") and any
 * segs() (two of them and a comma). */
enum { RNG_LEN = 48, SEGS_LEN = 2 * RNG_LEN + 1 };

static const char *rng(char *buf, size_t len, int64_t begin, int64_t count)
{
    if (count <= 0)
        snprintf(buf, len, "none");
    else if (count == 1)
        snprintf(buf, len, "%" PRId64, begin);
    else
        snprintf(buf, len, "%" PRId64 "-%" PRId64, begin, begin + count - 1);
    return buf;
}

/* 1536 -> "1.5 KiB" (exact byte counts are printed next to it) */
static const char *human(char *buf, size_t len, uint64_t bytes)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)bytes;
    int k = 0;
    while (v >= 1024 && k < 5) {
        v /= 1024;
        k++;
    }
    if (k == 0)
        snprintf(buf, len, "%" PRIu64 " B", bytes);
    else
        snprintf(buf, len, "%.1f %s", v, u[k]);
    return buf;
}

static int show_rank(int r, int P)
{
    return P <= TABLE_MAX_P || r < 4 || r >= P - 4;
}

static void ellipsis(int r, int P)
{
    if (P > TABLE_MAX_P && r == 4)
        printf("  ...   (ranks 4-%d omitted: same pattern)\n", P - 5);
}

static int digits(uint64_t v)
{
    int d = 1;
    while (v >= 10) {
        v /= 10;
        d++;
    }
    return d;
}

/* Print a P x P matrix in elements with row totals (elements and bytes,
 * the diagonal excluded: it stays on the rank). */
static void print_matrix(const uint64_t *m, int P, uint64_t es, const char *indent)
{
    if (P > MATRIX_MAX_P) {
        printf("%s(matrix omitted for P > %d; per-rank totals below)\n", indent, MATRIX_MAX_P);
        return;
    }
    /* at least the header "to rN" and a space */
    int w = P > 10 ? 7 : 6;
    uint64_t rmax = 1, cmax = 1;
    for (int i = 0; i < P * P; i++)
        if (digits(m[i]) + 3 > w)
            w = digits(m[i]) + 3;
    for (int r = 0; r < P; r++) {
        uint64_t row = 0, col = 0;
        for (int s = 0; s < P; s++)
            if (s != r) {
                row += m[r * P + s];
                col += m[s * P + r];
            }
        rmax = row > rmax ? row : rmax;
        cmax = col * es > cmax ? col * es : cmax;
    }
    if (digits(cmax) + 1 > w)
        w = digits(cmax) + 1;
    int wr = digits(rmax * es) + 1;
    if (wr < 11)
        wr = 11;
    printf("%s%-11s", indent, "elements");
    for (int s = 0; s < P; s++) {
        char h[16];
        snprintf(h, sizeof h, "to r%d", s);
        printf("%*s", w, h);
    }
    printf(" |%*s%*s\n", wr, "sent elems", wr, "sent bytes");
    for (int r = 0; r < P; r++) {
        char lab[16];
        snprintf(lab, sizeof lab, "from r%d", r);
        printf("%s%-11s", indent, lab);
        uint64_t row = 0;
        for (int s = 0; s < P; s++) {
            char c[32];
            if (s == r)
                snprintf(c, sizeof c, "[%" PRIu64 "]", m[r * P + s]);
            else
                snprintf(c, sizeof c, "%" PRIu64 " ", m[r * P + s]);
            printf("%*s", w, c);
            if (s != r)
                row += m[r * P + s];
        }
        printf(" |%*" PRIu64 "%*" PRIu64 "\n", wr, row, wr, row * es);
    }
    printf("%s%-11s", indent, "recv bytes");
    for (int s = 0; s < P; s++) {
        uint64_t col = 0;
        for (int r = 0; r < P; r++)
            if (r != s)
                col += m[r * P + s];
        printf("%*" PRIu64 " ", w - 1, col * es);
    }
    printf("\n%s[diagonal] = the rank's own block: copied locally, not sent\n", indent);
}

static int add_block(xp_panel *p, int rank, int src, int64_t t0, int64_t tn, int64_t h0, int64_t hn,
                     int rep, int shade)
{
    xp_block *nb = realloc(p->blocks, (size_t)(p->nblock + 1) * sizeof *nb);
    if (!nb)
        return 1;
    p->blocks = nb;
    p->blocks[p->nblock++] = (xp_block){rank, src, t0, tn, h0, hn, rep, shade};
    return 0;
}

void xp_fig_free(xp_fig *f)
{
    for (int i = 0; i < f->npanel; i++)
        free(f->panel[i].blocks);
    for (int i = 0; i < f->nmatrix; i++)
        free(f->matrix[i].elems);
    for (int i = 0; i < f->nbars; i++) {
        free(f->bars[i].work);
        free(f->bars[i].label);
    }
    xp_grid_free(&f->grid);
    free(f->vol);
    free(f->dvol);
    free(f->strip.run);
    memset(f, 0, sizeof *f);
}

static xp_panel *new_panel_kind(xp_fig *f, int kind, const char *arrow, const char *title, const char *caption,
                                const char *yname, int64_t tokens, int64_t heads)
{
    xp_panel *p = &f->panel[f->npanel];
    memset(p, 0, sizeof *p);
    snprintf(p->title, sizeof p->title, "%s", title);
    snprintf(p->caption, sizeof p->caption, "%s", caption);
    snprintf(p->yname, sizeof p->yname, "%s", yname);
    p->tokens = tokens;
    p->heads = heads;
    snprintf(f->arrow[f->npanel], sizeof f->arrow[0], "%s", arrow ? arrow : "");
    f->arrow_kind[f->npanel] = kind;
    f->npanel++;
    return p;
}

/* A panel reached by a collective named `arrow` (NULL: the first panel). */
static xp_panel *new_panel(xp_fig *f, const char *arrow, const char *title, const char *caption,
                           const char *yname, int64_t tokens, int64_t heads)
{
    return new_panel_kind(f, XP_ARROW_COLLECTIVE, arrow, title, caption, yname, tokens, heads);
}

/* Append a matrix to the figure, taking ownership of *elems. */
static void add_matrix(xp_fig *f, const char *title, int P, uint64_t **elems)
{
    xp_matrix *m = &f->matrix[f->nmatrix++];
    snprintf(m->title, sizeof m->title, "%s", title);
    m->P = P;
    m->elems = *elems;
    *elems = NULL;
}

/* ", causal, window 8, documents 4+12" for the figure titles */
static const char *mask_words(const uly_attn_desc *a, char *buf, size_t n)
{
    int k = snprintf(buf, n, "%s", a->causal ? ", causal" : "");
    if (a->window && k < (int)n)
        k += snprintf(buf + k, n - (size_t)k, ", window %" PRId64, a->window);
    if (a->doc_offsets && k < (int)n) {
        k += snprintf(buf + k, n - (size_t)k, ", documents ");
        for (int64_t i = 0; i < a->docs && k < (int)n - 12; i++)
            k += snprintf(buf + k, n - (size_t)k, "%s%" PRId64, i ? "+" : "", a->doc_offsets[i + 1] - a->doc_offsets[i]);
    }
    return buf;
}

static void shape_line(const xcfg *c)
{
    const uly_attn_desc *a = &c->a;
    printf("shape   P = %d ranks, B = %" PRId64 ", N = %" PRId64 " tokens, H = %" PRId64
           " query heads, Hkv = %" PRId64 " KV heads, d = %" PRId64 ", %s (e = %zu bytes)\n",
           c->P, a->batch, a->seq, a->heads, a->kv_heads, a->head_dim, dtype_names[a->dtype],
           uly_dtype_size(a->dtype));
    int64_t g = a->heads / a->kv_heads;
    if (a->kv_heads == a->heads)
        printf("heads   MHA: every query head has its own KV head (g = H/Hkv = 1)\n");
    else if (a->kv_heads == 1)
        printf("heads   MQA: all %" PRId64 " query heads share one KV head (g = %" PRId64 ")\n", a->heads, g);
    else
        printf("heads   GQA: g = H/Hkv = %" PRId64 " query heads share each KV head; query head h uses KV head h/%" PRId64 "\n",
               g, g);
    if (a->causal && a->window)
        printf("mask    causal sliding window: query i sees keys i-%" PRId64 " < j <= i\n", a->window);
    else if (a->causal)
        printf("mask    causal: query i sees keys j <= i\n");
    else if (a->window)
        printf("mask    window: query i sees keys |i-j| < %" PRId64 "\n", a->window);
    else
        printf("mask    none: every query sees every key\n");
    if (a->doc_offsets) {
        printf("docs    %" PRId64 " packed document%s of", a->docs, a->docs > 1 ? "s" : "");
        for (int64_t i = 0; i < a->docs && i < 16; i++)
            printf("%s %" PRId64, i ? "," : "", a->doc_offsets[i + 1] - a->doc_offsets[i]);
        printf("%s tokens (in every batch row): tokens", a->docs > 16 ? ", ..." : "");
        char b[RNG_LEN];
        for (int64_t i = 0; i < a->docs && i < 16; i++)
            printf("%s %s", i ? "," : "", rng(b, sizeof b, a->doc_offsets[i], a->doc_offsets[i + 1] - a->doc_offsets[i]));
        printf("%s;\n        a query sees only keys of its own document (and the mask above)\n", a->docs > 16 ? ", ..." : "");
    }
}

/* --docs L1,L2,...: the document lengths, positive integers; their count in
 * *n.  0, or a message in err and EXIT_BADINPUT. */
static int parse_docs(const char *s, int64_t **len, int64_t *n, char *err, size_t errlen)
{
    *len = NULL;
    *n = 0;
    if (!*s) {
        snprintf(err, errlen, "--docs: empty list (give the document lengths, e.g. --docs 4,12)");
        return EXIT_BADINPUT;
    }
    int64_t count = 1, sum = 0;
    for (const char *p = s; *p; p++)
        count += *p == ',';
    if (count > DOCS_MAX) {
        snprintf(err, errlen, "--docs: %" PRId64 " documents, at most %d", count, DOCS_MAX);
        return EXIT_BADINPUT;
    }
    int64_t *v = calloc((size_t)count, sizeof *v);
    if (!v) {
        snprintf(err, errlen, "out of memory");
        return 1;
    }
    const char *p = s;
    for (int64_t i = 0; i < count; i++) {
        const char *end = strchr(p, ',');
        size_t l = end ? (size_t)(end - p) : strlen(p);
        char word[32];
        int ok = l > 0 && l < sizeof word;
        int64_t x = 0;
        if (ok) {
            memcpy(word, p, l);
            word[l] = 0;
            for (size_t k = 0; k < l && ok; k++)
                ok = word[k] >= '0' && word[k] <= '9';
            if (ok) {
                errno = 0;
                char *e;
                long long y = strtoll(word, &e, 10);
                ok = !errno && *e == 0 && y > 0 && y <= (1LL << 40);
                x = y;
            }
        }
        if (!ok) {
            snprintf(err, errlen, "--docs: document %" PRId64 " length '%.*s' is not a positive integer (at most 2^40)",
                     i + 1, (int)(l < 32 ? l : 32), p);
            free(v);
            return EXIT_BADINPUT;
        }
        v[i] = x;
        sum += x;
        if (sum > (1LL << 40)) {
            snprintf(err, errlen, "--docs: the lengths sum to more than 2^40 tokens");
            free(v);
            return EXIT_BADINPUT;
        }
        p = end ? end + 1 : p + l;
    }
    *len = v;
    *n = count;
    return 0;
}

/* Print how n items split over P parts (uly_split). */
static void split_note(const char *what, int64_t n, int P)
{
    char b[32];
    if (n % P == 0)
        printf("  %s: %" PRId64 " = %d x %" PRId64 ", even\n", what, n, P, n / P);
    else if (n < P)
        printf("  %s: %" PRId64 " < P = %d: ranks %" PRId64 "-%d hold none\n", what, n, P, n, P - 1);
    else
        printf("  %s: %" PRId64 " = %d x %" PRId64 " + %" PRId64 ", uneven: rank%s %s take%s one more (marked +)\n",
               what, n, P, n / P, n % P, n % P > 1 ? "s" : "", rng(b, sizeof b, 0, n % P), n % P > 1 ? "" : "s");
}

/* ------------------------------------------------------------ ulysses */

/* What rank r holds (uly_layout_part): ulysses and megatron-sp have one
 * token segment per rank, tok_begin[0] and tokens. */
static uly_rank_part part(const uly_layout *L, int r)
{
    uly_rank_part p;
    uly_layout_part(L, r, &p);
    return p;
}

/* Whether KV head k is needed by more than one rank. */
static int kv_shared(const uly_layout *L, int P, int64_t k)
{
    int n = 0;
    for (int r = 0; r < P; r++) {
        const uly_rank_part q = part(L, r);
        n += q.kv_count > 0 && k >= q.kv_begin && k < q.kv_begin + q.kv_count;
    }
    return n > 1;
}

/* Whether ranks r and s hold as many tokens, query heads and KV heads. */
static int same_counts(const uly_layout *L, int r, int s)
{
    const uly_rank_part x = part(L, r), y = part(L, s);
    return x.tokens == y.tokens && x.head_count == y.head_count && x.kv_count == y.kv_count;
}

static const char *const a2a_label[ULY_A2A_COUNT] = {"Q", "K", "V", "O", "dO", "dQ", "dK", "dV"};

static int explain_ulysses(const xcfg *c, xp_fig *fig)
{
    const uly_attn_desc *a = &c->a;
    const int P = c->P;
    const uint64_t es = uly_dtype_size(a->dtype);
    const uint64_t row = (uint64_t)a->batch * (uint64_t)a->head_dim;
    const uly_layout *L = &c->L;
    uint64_t *mat[ULY_A2A_COUNT] = {0};
    uly_volume *vol = calloc((size_t)P, sizeof *vol);
    /* (P, 2): elements each rank sends to the others, forward and backward,
     * summed block by block; the P x P matrices themselves are kept only
     * where they are printed or drawn (O(P) memory for any other P) */
    uint64_t *sent = calloc(2 * (size_t)P, sizeof *sent);
    const int keep = P <= MATRIX_MAX_P || fig;
    int rc = 0;
    if (!vol || !sent) {
        fprintf(stderr, "ulysses explain: out of memory\n");
        rc = 1;
        goto done;
    }
    for (int w = 0; w < ULY_A2A_COUNT; w++) {
        mat[w] = keep ? calloc((size_t)P * (size_t)P, sizeof(uint64_t)) : NULL;
        if (keep && !mat[w]) {
            fprintf(stderr, "ulysses explain: out of memory\n");
            rc = 1;
            goto done;
        }
        for (int r = 0; r < P; r++)
            for (int s = 0; s < P; s++) {
                const uint64_t e = uly_layout_a2a_block(L, a->seq, w, r, s);
                if (keep)
                    mat[w][r * P + s] = e;
                if (s != r)
                    sent[2 * r + (w < ULY_A2A_DO ? 0 : 1)] += e;
            }
    }
    for (int r = 0; r < P; r++)
        if (uly_plan_volume(a, P, r, &vol[r])) {
            fprintf(stderr, "ulysses explain: %s\n", uly_last_error());
            rc = 2;
            goto done;
        }
    const int rep = L->rep;
    char b1[RNG_LEN], b2[RNG_LEN], b3[RNG_LEN], b4[RNG_LEN];

    printf("ulysses explain: DeepSpeed-Ulysses sequence parallelism, one attention layer\n");
    printf("(every term is defined in doc/glossary.md)\n\n");
    shape_line(c);

    /* ---- partitions */
    printf("\nPartitions (uly_split, uly_kv_range)\n");
    printf("  rank  tokens            n_r | query heads   H_r | KV heads needed  KV_r\n");
    for (int r = 0; r < P; r++) {
        if (!show_rank(r, P)) {
            ellipsis(r, P);
            continue;
        }
        const uly_rank_part q = part(L, r);
        int kvrep = 0;
        for (int64_t k = q.kv_begin; k < q.kv_begin + q.kv_count; k++)
            kvrep |= kv_shared(L, P, k);
        printf("  r%-4d %-14s %5" PRId64 "%s| %-12s %4" PRId64 "%s| %-15s %5" PRId64 "%s\n", r,
               rng(b1, sizeof b1, q.tok_begin[0], q.tokens), q.tokens,
               a->seq % P && r < a->seq % P ? "+" : " ", rng(b2, sizeof b2, q.head_begin, q.head_count), q.head_count,
               a->heads % P && r < a->heads % P ? "+" : " ", rng(b3, sizeof b3, q.kv_begin, q.kv_count), q.kv_count,
               kvrep ? " *" : "");
    }
    split_note("tokens", a->seq, P);
    split_note("query heads", a->heads, P);
    int64_t kv_total = 0;
    for (int r = 0; r < P; r++)
        kv_total += part(L, r).kv_count;
    if (rep) {
        printf("  * replicated KV heads:");
        int printed = 0;
        for (int64_t k = 0; k < a->kv_heads && printed < 8; k++) {
            if (!kv_shared(L, P, k))
                continue;
            printf("%s %" PRId64 " on", printed ? ";" : "", k);
            for (int r = 0; r < P; r++) {
                const uly_rank_part q = part(L, r);
                if (q.kv_count > 0 && k >= q.kv_begin && k < q.kv_begin + q.kv_count)
                    printf(" r%d", r);
            }
            printed++;
        }
        printf("%s\n", printed == 8 ? "; ..." : "");
        printf("    A GQA group (the g = %" PRId64 " query heads of one KV head) is cut between ranks, so\n"
               "    each of them receives that whole KV head (%" PRId64 " KV heads in the head layout\n"
               "    instead of Hkv = %" PRId64 "), and dK, dV travel back per query head, summed in head\n"
               "    order on the token owner (bitwise equal to one process).\n",
               a->heads / a->kv_heads, kv_total, a->kv_heads);
    } else if (a->heads != a->kv_heads) {
        printf("  KV heads: every GQA group lies on one rank: no KV head is replicated.\n");
    }
    if (a->heads < P)
        printf("  ranks %" PRId64 "-%d hold no head: they only relay data in the all-to-alls.\n", a->heads, P - 1);

    /* ---- layouts */
    printf("\nLayouts (what each rank holds)\n");
    printf("  sequence layout (layer input and output): rank r holds its n_r tokens of every head\n"
           "      Q, O, dQ, dO (B, n_r, H, d)    K, V, dK, dV (B, n_r, Hkv, d)\n");
    printf("  head layout (inside attention): rank r holds all N tokens of its heads\n"
           "      Q, O, dQ, dO (B, N, H_r, d)    K, V (B, N, KV_r, d)    dK, dV (B, N, %s, d)\n",
           rep ? "H_r" : "KV_r");
    printf("  rank  sequence layout                     head layout\n");
    for (int r = 0; r < P; r++) {
        if (!show_rank(r, P)) {
            ellipsis(r, P);
            continue;
        }
        const uly_rank_part q = part(L, r);
        char s1[4 * RNG_LEN + 32], s2[4 * RNG_LEN + 32];
        snprintf(s1, sizeof s1, "Q t%s x h%s, KV t%s x kv%s", rng(b1, sizeof b1, q.tok_begin[0], q.tokens),
                 rng(b2, sizeof b2, 0, a->heads), rng(b3, sizeof b3, q.tok_begin[0], q.tokens),
                 rng(b4, sizeof b4, 0, a->kv_heads));
        char k1[RNG_LEN];
        snprintf(s2, sizeof s2, "Q t%s x h%s, KV t%s x kv%s%s", rng(b1, sizeof b1, 0, a->seq),
                 rng(b2, sizeof b2, q.head_begin, q.head_count), rng(b3, sizeof b3, 0, a->seq),
                 rng(k1, sizeof k1, q.kv_begin, q.kv_count), rep && q.kv_count ? "*" : "");
        printf("  r%-4d %-35s %s\n", r, s1, s2);
    }

    /* ---- steps */
    static const char *const what[ULY_A2A_COUNT] = {
        "sequence -> head layout: r sends s its n_r tokens of s's H_s heads",
        "sequence -> head layout: r sends s its n_r tokens of the KV_s KV heads s needs",
        NULL,
        "head -> sequence layout: r sends s the n_s tokens of s of its own H_r heads",
        NULL,
        NULL,
        NULL,
        NULL,
    };
    const int same_as[ULY_A2A_COUNT] = {-1, -1, ULY_A2A_K, -1, ULY_A2A_Q, ULY_A2A_O, -1, ULY_A2A_DK};
    printf("\nForward\n");
    int step = 1;
    for (int w = ULY_A2A_Q; w <= ULY_A2A_O; w++) {
        if (w == ULY_A2A_O) {
            double pairs = uly_attn_pairs(a);
            printf("  %d. attention (local, no communication): each rank computes its H_r heads over all\n"
                   "     N tokens: O_r (B, N, H_r, d) and LSE_r (B, H_r, N).  Visible (query, key) pairs per\n"
                   "     head: %.0f; work per rank = B x H_r x pairs:",
                   step++, pairs);
            for (int r = 0; r < P && r < 8; r++)
                printf(" r%d %.0f", r, (double)a->batch * (double)part(L, r).head_count * pairs);
            printf("%s\n", P > 8 ? " ..." : "");
            printf("     (whole sequences per head: the causal mask cannot unbalance the ranks; uneven\n"
                   "     heads can)\n");
        }
        printf("  %d. all-to-all %-3s %s\n", step++, a2a_label[w],
               same_as[w] >= 0 ? "(the same blocks as K)" : what[w]);
        if (same_as[w] < 0)
            print_matrix(mat[w], P, es, "     ");
    }
    printf("\nBackward (the context kept Q_r, K_r, V_r, O_r, LSE_r from the forward)\n");
    for (int w = ULY_A2A_DO; w < ULY_A2A_COUNT; w++) {
        if (w == ULY_A2A_DQ)
            printf("  %d. attention backward (local): dQ_r (B, N, H_r, d), dK_r, dV_r (B, N, %s, d)\n", step++,
                   rep ? "H_r" : "KV_r");
        if (same_as[w] >= 0) {
            printf("  %d. all-to-all %-3s the same blocks as %s (%s)\n", step++, a2a_label[w],
                   a2a_label[same_as[w]],
                   w == ULY_A2A_DO ? "sequence -> head layout"
                                   : "head -> sequence layout");
            continue;
        }
        /* dK */
        printf("  %d. all-to-all %-3s head -> sequence layout: r sends s the n_s tokens of s of %s\n", step++,
               a2a_label[w], rep ? "its H_r per-query-head KV gradients (replicated KV)" : "its KV_r KV heads");
        print_matrix(mat[w], P, es, "     ");
    }

    /* ---- totals */
    printf("\nPer-rank totals: bytes sent to other ranks (received is the same matrix read by column)\n");
    int cw = 3;
    for (int r = 0; r < P; r++)
        for (int w = 0; w < ULY_A2A_COUNT; w++)
            if (digits(vol[r].sent[w]) + 1 > cw)
                cw = digits(vol[r].sent[w]) + 1;
    uint64_t maxfwd = 0, maxall = 0;
    for (int r = 0; r < P; r++) {
        uint64_t f = 0, b = 0;
        for (int w = 0; w < ULY_A2A_COUNT; w++)
            *(w < ULY_A2A_DO ? &f : &b) += vol[r].sent[w];
        maxfwd = f > maxfwd ? f : maxfwd;
        maxall = f + b > maxall ? f + b : maxall;
    }
    int tw = digits(maxall) + 1 > 9 ? digits(maxall) + 1 : 9;
    printf("  rank ");
    for (int w = 0; w < ULY_A2A_COUNT; w++)
        printf("%*s%s", cw, a2a_label[w], w == ULY_A2A_O ? " |" : "");
    printf(" |%*s%*s\n", tw, "forward", tw, "backward");
    for (int r = 0; r < P; r++) {
        uint64_t f = 0, b = 0;
        for (int w = 0; w < ULY_A2A_COUNT; w++)
            *(w < ULY_A2A_DO ? &f : &b) += vol[r].sent[w];
        if (!show_rank(r, P)) {
            ellipsis(r, P);
            continue;
        }
        printf("  r%-3d", r);
        for (int w = 0; w < ULY_A2A_COUNT; w++)
            printf("%*" PRIu64 "%s", cw, vol[r].sent[w], w == ULY_A2A_O ? " |" : "");
        printf(" |%*" PRIu64 "%*" PRIu64 "\n", tw, f, tw, b);
    }
    printf("  busiest rank: %" PRIu64 " bytes (%s) forward, %" PRIu64 " (%s) per layer (forward + backward)\n",
           maxfwd, human(b1, sizeof b1, maxfwd), maxall, human(b2, sizeof b2, maxall));

    /* ---- closed form */
    printf("\nClosed form (rank r, bytes; B d e = %" PRIu64 ", SKV = sum of KV_s over ranks = %" PRId64 ")\n",
           row * es, kv_total);
    printf("  forward  = B d e [ n_r (H - H_r) + 2 n_r (SKV - KV_r) + (N - n_r) H_r ]       (Q, K, V, O)\n");
    printf("  backward = B d e [ n_r (H - H_r) + (N - n_r) H_r + 2 (N - n_r) %s ]       (dO, dQ, dK, dV)\n",
           rep ? "H_r " : "KV_r");
    int all_ok = 1;
    for (int r = 0; r < P; r++) {
        const uly_rank_part q = part(L, r);
        uint64_t n_r = (uint64_t)q.tokens, H = (uint64_t)a->heads, H_r = (uint64_t)q.head_count,
                 K_r = (uint64_t)q.kv_count, N = (uint64_t)a->seq, SK = (uint64_t)kv_total;
        uint64_t qf = n_r * (H - H_r), kf = 2 * n_r * (SK - K_r), of = (N - n_r) * H_r;
        uint64_t dkv = 2 * (N - n_r) * (rep ? H_r : K_r);
        uint64_t fwd = row * es * (qf + kf + of), bwd = row * es * (qf + of + dkv);
        uint64_t mf = sent[2 * r] * es, mb = sent[2 * r + 1] * es, pf = 0, pb = 0;
        for (int w = 0; w < ULY_A2A_COUNT; w++)
            *(w < ULY_A2A_DO ? &pf : &pb) += vol[r].sent[w];
        int ok = fwd == mf && mf == pf && bwd == mb && mb == pb;
        all_ok &= ok;
        int last = r;   /* print once for a run of ranks with the same numbers */
        while (last + 1 < P && same_counts(L, last + 1, r))
            last++;
        if (r > 0 && same_counts(L, r - 1, r))
            continue;
        char who[32];
        if (last > r)
            snprintf(who, sizeof who, "r%d-r%d", r, last);
        else
            snprintf(who, sizeof who, "r%d", r);
        printf("  %-6s forward  %" PRIu64 " x [%" PRIu64 " (%" PRIu64 " - %" PRIu64 ") + 2 x %" PRIu64 " (%" PRIu64
               " - %" PRIu64 ") + (%" PRIu64 " - %" PRIu64 ") %" PRIu64 "] = %" PRIu64 "\n",
               who, row * es, n_r, H, H_r, n_r, SK, K_r, N, n_r, H_r, fwd);
        printf("         backward %" PRIu64 " x [%" PRIu64 " (%" PRIu64 " - %" PRIu64 ") + (%" PRIu64 " - %" PRIu64
               ") %" PRIu64 " + 2 (%" PRIu64 " - %" PRIu64 ") %" PRIu64 "] = %" PRIu64 "\n",
               row * es, n_r, H, H_r, N, n_r, H_r, N, n_r, rep ? H_r : K_r, bwd);
        printf("         sum of its matrix rows: %" PRIu64 " + %" PRIu64 ", uly_plan_volume: %" PRIu64 " + %" PRIu64
               ": %s\n",
               mf, mb, pf, pb, ok ? "agree" : "DISAGREE");
    }
    int even = a->seq % P == 0 && a->heads % P == 0 && !rep;
    uint64_t h = (uint64_t)(a->heads * a->head_dim), hkv = (uint64_t)(a->kv_heads * a->head_dim);
    double paper = (double)(2 * h + 2 * hkv) * (double)a->batch * ((double)a->seq / P) * (double)es * (P - 1) / P;
    printf("  even case, every rank (h = H d = %" PRIu64 ", h_kv = Hkv d = %" PRIu64 "):\n"
           "    forward = (2h + 2h_kv) B (N/P) e (P-1)/P = (2 x %" PRIu64 " + 2 x %" PRIu64 ") x %" PRId64
           " x (%" PRId64 "/%d) x %" PRIu64 " x %d/%d = %.0f\n",
           h, hkv, h, hkv, a->batch, a->seq, P, es, P - 1, P, paper);
    if (even)
        printf("    applies here (N, H divisible by P, no replication): %s the sums above\n",
               (uint64_t)paper == maxfwd ? "equals" : "DIFFERS FROM");
    else
        printf("    does not apply here (%s): the busiest rank sends %" PRIu64 " forward, %+.0f vs the formula\n",
               rep ? "KV heads replicated" : "uneven split", maxfwd, (double)maxfwd - paper);
    printf("  The paper (arXiv 2309.14509, sec. 3.2) rounds this to 4Nh/P per link for MHA: the volume\n"
           "  per rank stays constant when N and P grow together (doc/tutorial.md).\n");
    printf("\ncheck: closed form == sum of the send matrices == uly_plan_volume for every rank: %s\n",
           all_ok ? "yes" : "NO");
    if (!all_ok)
        rc = 1;

    /* ---- figure */
    if (fig) {
        xp_panel *p;
        snprintf(fig->title, sizeof fig->title,
                 "Ulysses: P = %d, N = %" PRId64 ", H = %" PRId64 ", Hkv = %" PRId64 ", B = %" PRId64 "%s", P,
                 a->seq, a->heads, a->kv_heads, a->batch, mask_words(a, b4, sizeof b4));
        snprintf(fig->subtitle, sizeof fig->subtitle,
                 "colour = rank whose tokens these are (local attention: the rank computing); hatched = KV head "
                 "replicated");
        fig->P = P;
        p = new_panel(fig, NULL, "Q, K, V, O: sequence layout", "(B, n_r, H, d): tokens x query heads", "h",
                      a->seq, a->heads);
        for (int r = 0; r < P; r++) {
            const uly_rank_part q = part(L, r);
            if (q.tokens && add_block(p, r, r, q.tok_begin[0], q.tokens, 0, a->heads, 0, 0))
                goto oom;
        }
        p = new_panel(fig, "all-to-all Q, K, V", "Q: head layout", "(B, N, H_r, d)", "h", a->seq, a->heads);
        for (int r = 0; r < P; r++)
            for (int s = 0; s < P; s++) {
                const uly_rank_part q = part(L, r), t = part(L, s);
                if (t.tokens && q.head_count &&
                    add_block(p, r, s, t.tok_begin[0], t.tokens, q.head_begin, q.head_count, 0, 0))
                    goto oom;
            }
        p = new_panel_kind(fig, XP_ARROW_NONE, NULL, "K, V: head layout",
                           rep ? "(B, N, KV_r, d), hatched = replicated" : "(B, N, KV_r, d)", "kv", a->seq,
                           a->kv_heads);
        for (int r = 0; r < P; r++)
            for (int s = 0; s < P; s++) {
                const uly_rank_part q = part(L, r), t = part(L, s);
                for (int64_t k = q.kv_begin; k < q.kv_begin + q.kv_count; k++)
                    if (t.tokens && add_block(p, r, s, t.tok_begin[0], t.tokens, k, 1, kv_shared(L, P, k), 0))
                        goto oom;
            }
        {
            char t[80], cap[80];
            snprintf(t, sizeof t, "local attention");
            snprintf(cap, sizeof cap, "all N tokens x H/P heads: O_r (B, N, H_r, d)");
            p = new_panel_kind(fig, XP_ARROW_LOCAL, "attention", t, cap, "h", a->seq, a->heads);
        }
        for (int r = 0; r < P; r++) {
            const uly_rank_part q = part(L, r);
            if (q.head_count && add_block(p, r, r, 0, a->seq, q.head_begin, q.head_count, 0, 0))
                goto oom;
        }
        p = new_panel(fig, "all-to-all O", "O: sequence layout again", "(B, n_r, H, d)", "h", a->seq, a->heads);
        for (int r = 0; r < P; r++)
            for (int s = 0; s < P; s++) {
                const uly_rank_part q = part(L, r), t = part(L, s);
                if (q.tokens && t.head_count &&
                    add_block(p, r, r, q.tok_begin[0], q.tokens, t.head_begin, t.head_count, 0, 0))
                    goto oom;
            }
        add_matrix(fig, "all-to-all Q, dO: elements sent (row -> column)", P, &mat[ULY_A2A_Q]);
        add_matrix(fig, "all-to-all K, V: elements sent (row -> column)", P, &mat[ULY_A2A_K]);
        fig->vol = vol;
        vol = NULL;
    }
    goto done;
oom:
    fprintf(stderr, "ulysses explain: out of memory\n");
    rc = 1;
done:
    for (int w = 0; w < ULY_A2A_COUNT; w++)
        free(mat[w]);
    free(sent);
    free(vol);
    return rc;
}

/* ------------------------------------------------------------ megatron-sp */

static int explain_megatron(const xcfg *c, xp_fig *fig)
{
    const uly_attn_desc *a = &c->a;
    const int P = c->P;
    const uint64_t es = uly_dtype_size(a->dtype);
    const uint64_t h = (uint64_t)(a->heads * a->head_dim), B = (uint64_t)a->batch, N = (uint64_t)a->seq;
    const uly_layout *L = &c->L;
    uint64_t *ag = calloc((size_t)P * (size_t)P, sizeof *ag), *rs = calloc((size_t)P * (size_t)P, sizeof *rs);
    int rc = 0;
    char b1[RNG_LEN], b2[RNG_LEN], b3[RNG_LEN];
    if (!ag || !rs) {
        fprintf(stderr, "ulysses explain: out of memory\n");
        rc = 1;
        goto done;
    }
    /* Ring all-gather: in step k rank r forwards chunk (r - k) mod P to r+1,
     * k = 0..P-2, i.e. every chunk but that of r+1.  Ring reduce-scatter: in
     * step k rank r sends the partial sum of chunk (r - k - 1) mod P, i.e.
     * every chunk but its own. */
    for (int r = 0; r < P && P > 1; r++) {
        int nx = (r + 1) % P;
        ag[r * P + nx] = (N - (uint64_t)part(L, nx).tokens) * B * h;
        rs[r * P + nx] = (N - (uint64_t)part(L, r).tokens) * B * h;
    }
    printf("ulysses explain: Megatron-LM sequence parallelism (tensor parallelism t = P = %d), one layer\n", P);
    printf("(every term is defined in doc/glossary.md)\n\n");
    shape_line(c);
    printf("hidden  h = H d = %" PRIu64 "\n", h);
    printf("\nPartitions\n");
    printf("  rank  tokens (SP regions)  n_r | heads (TP regions)  H_r | KV heads  KV_r\n");
    for (int r = 0; r < P; r++) {
        if (!show_rank(r, P)) {
            ellipsis(r, P);
            continue;
        }
        const uly_rank_part q = part(L, r);
        printf("  r%-4d %-18s %5" PRId64 "%s| %-18s %4" PRId64 " | %-9s %4" PRId64 "\n", r,
               rng(b1, sizeof b1, q.tok_begin[0], q.tokens), q.tokens, a->seq % P && r < a->seq % P ? "+" : " ",
               rng(b2, sizeof b2, q.head_begin, q.head_count), q.head_count, rng(b3, sizeof b3, q.kv_begin, q.kv_count),
               q.kv_count);
    }
    split_note("tokens", a->seq, P);
    printf("  heads: %" PRId64 " = %d x %" PRId64 " (tensor parallelism needs t | H)\n", a->heads, P, a->heads / P);
    if (L->rep)
        printf("  KV heads: a GQA group is cut, so its KV projection is computed on every rank that needs it.\n");
    printf("\nWhat each rank holds\n"
           "  SP regions (LayerNorm, dropout, residual): X (B, n_r, h), its tokens of the full hidden state\n"
           "  TP regions (attention, MLP): the whole sequence, a 1/t slice of the weights: heads H_r\n"
           "  The collectives move activations (B, ., h); weights never move.\n");
    printf("\nForward (a ring of P ranks: each rank sends only to its successor)\n");
    printf("  1. all-gather X: (B, n_r, h) -> (B, N, h) on every rank; r sends r+1 every chunk but\n"
           "     the one r+1 already holds: (N - n_{r+1}) B h elements\n");
    print_matrix(ag, P, es, "     ");
    printf("  2. attention (local): Q, K, V of heads H_r for all N tokens (column-parallel projection),\n"
           "     then the row-parallel output projection gives a PARTIAL sum Y_r (B, N, h)\n");
    printf("  3. reduce-scatter Y: sum the P partials, rank r keeps its tokens (B, n_r, h); r sends r+1\n"
           "     a partial sum of every chunk but its own: (N - n_r) B h elements\n");
    print_matrix(rs, P, es, "     ");
    printf("  4. all-gather X again before the MLP (as 1)\n");
    printf("  5. MLP (local, a 1/t slice of the FFN columns), partial sums\n");
    printf("  6. reduce-scatter after the MLP (as 3)\n");
    printf("\nBackward: the same four collectives with the roles swapped (the gradient of an\n"
           "all-gather is a reduce-scatter and vice versa): the same bytes.\n");
    printf("\nPer-rank totals (bytes sent, forward = backward)\n");
    printf("  rank %14s %14s %14s\n", "all-gathers", "reduce-scat.", "forward");
    uint64_t maxf = 0;
    int all_ok = 1;
    for (int r = 0; r < P; r++) {
        int nx = (r + 1) % P;
        uint64_t g2 = 2 * ag[r * P + nx] * es, s2 = 2 * rs[r * P + nx] * es;
        uint64_t closed = 2 * ((N - (uint64_t)part(L, nx).tokens) + (N - (uint64_t)part(L, r).tokens)) * B * h * es;
        all_ok &= closed == g2 + s2 || P == 1;
        if (g2 + s2 > maxf)
            maxf = g2 + s2;
        if (!show_rank(r, P)) {
            ellipsis(r, P);
            continue;
        }
        printf("  r%-3d %14" PRIu64 " %14" PRIu64 " %14" PRIu64 "\n", r, g2, s2, g2 + s2);
    }
    printf("  busiest rank: %" PRIu64 " bytes (%s) forward, %" PRIu64 " (%s) per layer (forward + backward)\n", maxf,
           human(b1, sizeof b1, maxf), 2 * maxf, human(b2, sizeof b2, 2 * maxf));
    double even = 4.0 * (P - 1) / P * (double)B * (double)N * (double)h * (double)es;
    printf("\nClosed form: 2 all-gathers + 2 reduce-scatters of B N h per layer forward:\n"
           "  forward = 4 (t-1)/t B N h e = 4 x %d/%d x %" PRIu64 " x %" PRIu64 " x %" PRIu64 " x %" PRIu64
           " = %.0f%s\n",
           P - 1, P, B, N, h, es, even,
           a->seq % P ? " (even split; uneven: 2 B h e [(N - n_{r+1}) + (N - n_r)])" : "");
    printf("  Compare Ulysses: (2h + 2h_kv) B (N/P) e (P-1)/P per rank: Megatron-SP moves P times more for MHA\n"
           "  (try --method ulysses with the same shape).\n");
    printf("\ncheck: closed form == sum of the send matrices for every rank: %s\n", all_ok ? "yes" : "NO");
    if (!all_ok)
        rc = 1;
    if (fig) {
        xp_panel *p;
        snprintf(fig->title, sizeof fig->title,
                 "Megatron-SP: t = P = %d, N = %" PRId64 ", H = %" PRId64 ", B = %" PRId64 "%s", P, a->seq, a->heads,
                 a->batch, mask_words(a, b3, sizeof b3));
        snprintf(fig->subtitle, sizeof fig->subtitle,
                 "colour = rank whose tokens these are; light = partial sums before the reduce-scatter");
        fig->P = P;
        p = new_panel(fig, NULL, "X: sequence-parallel region", "(B, n_r, h): tokens x hidden (in heads)", "h",
                      a->seq, a->heads);
        for (int r = 0; r < P; r++) {
            const uly_rank_part q = part(L, r);
            if (q.tokens && add_block(p, r, r, q.tok_begin[0], q.tokens, 0, a->heads, 0, 0))
                goto oom;
        }
        p = new_panel(fig, "all-gather", "X: all tokens on every rank", "(B, N, h)", "h", a->seq, a->heads);
        for (int r = 0; r < P; r++)
            for (int s = 0; s < P; s++) {
                const uly_rank_part t = part(L, s);
                if (t.tokens && add_block(p, r, s, t.tok_begin[0], t.tokens, 0, a->heads, 0, 0))
                    goto oom;
            }
        p = new_panel_kind(fig, XP_ARROW_LOCAL, "QKV projection", "attention: heads H_r", "(B, N, H_r, d)", "h", a->seq, a->heads);
        for (int r = 0; r < P; r++)
            for (int s = 0; s < P; s++) {
                const uly_rank_part q = part(L, r), t = part(L, s);
                if (t.tokens && q.head_count &&
                    add_block(p, r, s, t.tok_begin[0], t.tokens, q.head_begin, q.head_count, 0, 0))
                    goto oom;
            }
        p = new_panel_kind(fig, XP_ARROW_LOCAL, "out projection", "Y: partial sums", "(B, N, h), summed over ranks", "h", a->seq,
                      a->heads);
        for (int r = 0; r < P; r++)
            for (int s = 0; s < P; s++) {
                const uly_rank_part t = part(L, s);
                if (t.tokens && add_block(p, r, s, t.tok_begin[0], t.tokens, 0, a->heads, 0, 1))
                    goto oom;
            }
        p = new_panel(fig, "reduce-scatter", "Y: sequence-parallel region", "(B, n_r, h)", "h", a->seq, a->heads);
        for (int r = 0; r < P; r++) {
            const uly_rank_part q = part(L, r);
            if (q.tokens && add_block(p, r, r, q.tok_begin[0], q.tokens, 0, a->heads, 0, 0))
                goto oom;
        }
        add_matrix(fig, "all-gather: elements sent (row -> column)", P, &ag);
        add_matrix(fig, "reduce-scatter: elements sent", P, &rs);
    }
    goto done;
oom:
    fprintf(stderr, "ulysses explain: out of memory\n");
    rc = 1;
done:
    free(ag);
    free(rs);
    return rc;
}


/* ------------------------------------------------- ring, zigzag, all-gather, usp */

/* "0-3" or "0-1,14-15" for token segments */
static const char *segs(char *buf, size_t len, int n, const int64_t *b, const int64_t *c)
{
    char x[RNG_LEN], y[RNG_LEN];
    if (n == 2 && c[1] > 0)
        snprintf(buf, len, "%s,%s", rng(x, sizeof x, b[0], c[0]), rng(y, sizeof y, b[1], c[1]));
    else
        snprintf(buf, len, "%s", rng(x, sizeof x, b[0], c[0]));
    return buf;
}

static uint64_t vol_sum(const uly_volume *v, int lo, int hi, int recv)
{
    uint64_t s = 0;
    for (int w = lo; w <= hi; w++)
        s += recv ? v->recv[w] : v->sent[w];
    return s;
}

/* Add to band `rank` of panel p the tokens that rank src holds (input
 * layout, uly_plan_tokens), heads [h0, h0 + hn); 0, or 1 out of memory. */
static int add_tokens(xp_panel *p, const uly_sp_plan *pl, int64_t N, int rank, int src, int64_t h0, int64_t hn)
{
    int64_t tb[2], tc[2];
    int nt = uly_plan_tokens(pl, N, src, tb, tc);
    for (int x = 0; x < nt; x++)
        if (tc[x] && hn && add_block(p, rank, src, tb[x], tc[x], h0, hn, 0, 0))
            return 1;
    return 0;
}

static int explain_ring(const xcfg *c, xp_fig *fig)
{
    const uly_attn_desc *a = &c->a;
    const int P = c->P;
    const uly_sp_plan *pl = &c->plan;
    const int R = pl->R, U = pl->U, T = uly_plan_steps(pl);
    const uint64_t es = uly_dtype_size(a->dtype);
    const int usp = pl->method == ULY_METHOD_USP, ag = pl->method == ULY_METHOD_ALLGATHER;
    char b1[SEGS_LEN], b2[SEGS_LEN], b3[SEGS_LEN];
    int rc = 0;
    uly_volume *vol = calloc((size_t)P, sizeof *vol);
    double *work = calloc((size_t)P * (size_t)T, sizeof *work);
    int *lab = calloc((size_t)P * (size_t)T, sizeof *lab);
    uint64_t *mat = NULL;
    if (!vol || !work || !lab) {
        fprintf(stderr, "ulysses explain: out of memory\n");
        rc = 1;
        goto done;
    }
    for (int r = 0; r < P; r++)
        if (uly_plan_method_volume(a, pl, r, &vol[r])) {
            fprintf(stderr, "ulysses explain: %s\n", uly_last_error());
            rc = 2;
            goto done;
        }
    static const char *const what[] = {
        [ULY_METHOD_RING] = "ring attention: K, V blocks travel around a ring of P ranks",
        [ULY_METHOD_ZIGZAG] = "zigzag ring attention: 2P chunks, rank j holds chunks j and 2P-1-j",
        [ULY_METHOD_ALLGATHER] = "all-gather context parallelism: K, V all-gathered, queries local",
        [ULY_METHOD_USP] = "USP: Ulysses all-to-alls inside groups of U ranks, a zigzag ring across R groups",
    };
    printf("ulysses explain: %s, one attention layer\n", what[pl->method]);
    printf("(every term is defined in doc/glossary.md)\n\n");
    shape_line(c);
    if (usp)
        printf("grid    P = U x R = %d x %d (placement %s: %s)\n", U, R, uly_placement_name(pl->placement),
               pl->placement == ULY_PLACE_ULYSSES_INNER ? "each all-to-all group is U consecutive ranks"
                                                         : "each ring is R consecutive ranks");

    /* ---- partitions */
    printf("\nPartitions (uly_plan_grid, uly_plan_chunk, uly_plan_tokens, uly_plan_heads)\n");
    printf("  rank %s ring pos  chunk of the position   tokens held (input)   query heads\n",
           usp ? " group u" : "");
    for (int r = 0; r < P; r++) {
        if (!show_rank(r, P)) {
            ellipsis(r, P);
            continue;
        }
        int u, j;
        uly_plan_grid(pl, r, &u, &j);
        int64_t cb[2], cc[2], tb[2], tc[2], hb, hc;
        int nc = uly_plan_chunk(pl, a->seq, j, cb, cc), nt = uly_plan_tokens(pl, a->seq, r, tb, tc);
        uly_plan_heads(pl, a->heads, r, &hb, &hc);
        char us[16] = "";
        if (usp)
            snprintf(us, sizeof us, " %7d", u);
        printf("  r%-3d%s %8d  %-22s %-21s %s\n", r, us, j, segs(b1, sizeof b1, nc, cb, cc),
               segs(b2, sizeof b2, nt, tb, tc), rng(b3, sizeof b3, hb, hc));
    }
    if (pl->zigzag)
        printf("  zigzag: the sequence is cut into 2R = %d chunks; position j holds chunks j and %d-j, an early\n"
               "  and a late one, so that every position has the same causal work.\n",
               2 * R, 2 * R - 1);
    else
        printf("  contiguous: position j holds the j-th of R = %d chunks (uly_split).\n", R);
    if (usp && U > 1)
        printf("  Inside each group the U ranks first run the Ulysses all-to-alls on their group's chunk:\n"
               "  afterwards each holds the whole chunk for its H/U heads (--method ulysses explains them).\n");

    /* ---- usp: the group all-to-all */
    if (usp && U > 1) {
        int64_t cb[2], cc[2];
        int nc = uly_plan_chunk(pl, a->seq, 0, cb, cc);
        uly_attn_desc g = *a;
        g.seq = cc[0] + (nc == 2 ? cc[1] : 0);
        mat = calloc((size_t)U * (size_t)U, sizeof *mat);
        if (!mat) {
            fprintf(stderr, "ulysses explain: out of memory\n");
            rc = 1;
            goto done;
        }
        for (int x = 0; x < U; x++)
            for (int y = 0; y < U; y++)
                if (uly_plan_a2a_block(&g, U, ULY_A2A_Q, x, y, &mat[x * U + y])) {
                    fprintf(stderr, "ulysses explain: %s\n", uly_last_error());
                    rc = 2;
                    goto done;
                }
        printf("\nStep 0: all-to-all of Q inside group 0 (its %" PRId64 " tokens over U = %d ranks; rows and columns\n"
               "are the members u = 0..%d, ranks",
               g.seq, U, U - 1);
        for (int x = 0; x < U && x < 16; x++)
            printf(" %d", uly_plan_grid_rank(pl, x, 0));
        printf("%s; K, V and the output's way back follow the pattern of Ulysses)\n", U > 16 ? " ..." : "");
        print_matrix(mat, U, es, "  ");
    }

    /* ---- steps: KV held and causal work */
    for (int r = 0; r < P; r++) {
        int64_t hb, hc;
        uly_plan_heads(pl, a->heads, r, &hb, &hc);
        int u, j;
        uly_plan_grid(pl, r, &u, &j);
        for (int t = 0; t < T; t++) {
            work[r * T + t] = uly_plan_step_pairs(a, pl, r, t) * (double)hc;
            lab[r * T + t] = ag ? -1 : (t == 0 || uly_plan_ring_hold(a, pl, j, t)) ? uly_plan_ring_src(pl, j, t) : -1;
        }
    }
    if (ag) {
        printf("\nForward: one all-gather of K and V (every rank ends with all N tokens of the Hkv KV heads),\n"
               "then each rank's queries attend to every key it may see; the backward reduce-scatters dK, dV.\n");
    } else {
        printf("\nRing steps (uly_plan_ring_src, uly_plan_ring_hold): the K, V block each rank computes with.\n"
               "At step t ring position j holds the block of position (j - t) mod R and, while computing,\n"
               "sends it on to j+1; \"-\" = not needed by this rank or any later one: neither computed nor sent.\n");
        printf("  rank ");
        for (int t = 0; t < T && t < 16; t++)
            printf(" %11s%-2d", "step ", t);
        printf("\n");
        for (int r = 0; r < P; r++) {
            if (!show_rank(r, P)) {
                ellipsis(r, P);
                continue;
            }
            printf("  r%-3d", r);
            for (int t = 0; t < T && t < 16; t++) {
                int src = lab[r * T + t];
                if (src < 0) {
                    printf(" %13s", "-");
                    continue;
                }
                int64_t kb[2], kc[2];
                int nk = uly_plan_chunk(pl, a->seq, src, kb, kc);
                printf(" %13s", segs(b1, sizeof b1, nk, kb, kc));
            }
            printf("\n");
        }
        if (T > 16)
            printf("  (steps 16-%d omitted)\n", T - 1);
    }
    printf("\nWork per rank and step: visible (query, key) pairs x query heads (uly_plan_step_pairs)\n");
    printf("  rank ");
    for (int t = 0; t < T && t < 16; t++)
        printf(" %8s%-2d", "step ", t);
    printf(" %10s\n", "total");
    double total = 0, crit = 0;
    for (int r = 0; r < P; r++) {
        double rs = 0;
        for (int t = 0; t < T; t++)
            rs += work[r * T + t];
        total += rs;
        if (!show_rank(r, P)) {
            ellipsis(r, P);
            continue;
        }
        printf("  r%-3d", r);
        for (int t = 0; t < T && t < 16; t++)
            printf(" %10.0f", work[r * T + t]);
        printf(" %10.0f\n", rs);
    }
    printf("  max ");
    for (int t = 0; t < T; t++) {
        double mx = 0;
        for (int r = 0; r < P; r++)
            mx = work[r * T + t] > mx ? work[r * T + t] : mx;
        crit += mx;
        if (t < 16)
            printf(" %10.0f", mx);
    }
    printf(" %10.0f\n", crit);
    printf("  Each step lasts as long as its busiest rank: the layer takes the sum of the maxima, %.0f,\n"
           "  against %.0f if the work (%.0f in all) were spread evenly: balance %.0f%%.\n",
           crit, total / P, total, crit > 0 ? 100.0 * total / P / crit : 100.0);
    if (pl->method == ULY_METHOD_RING && a->causal)
        printf("  Causal mask, contiguous chunks: rank 0 sees only its own block, the last rank every block;\n"
               "  try --method zigzag.\n");
    if (pl->method == ULY_METHOD_ZIGZAG && a->causal)
        printf("  Zigzag: every rank pairs an early chunk with a late one, so the work per step is even.\n");

    /* ---- volumes */
    printf("\nPer-rank totals (uly_plan_method_volume): bytes sent to other ranks\n");
    if (ag)
        printf("  rank%12s %12s | %12s %12s\n", "ag K", "ag V", "rs dK", "rs dV");
    else
        printf("  rank%s%12s | %12s %12s | %12s %12s\n", usp ? "  a2a (group)" : "", "ring K+V", "ring bK+bV",
               "ring dK+dV", "forward", "backward");
    uint64_t sent_all = 0, recv_all = 0;
    for (int r = 0; r < P; r++) {
        const uly_volume *v = &vol[r];
        sent_all += vol_sum(v, 0, ULY_VOL_COUNT - 1, 0);
        recv_all += vol_sum(v, 0, ULY_VOL_COUNT - 1, 1);
        if (!show_rank(r, P)) {
            ellipsis(r, P);
            continue;
        }
        if (ag) {
            printf("  r%-3d %12" PRIu64 " %12" PRIu64 " | %12" PRIu64 " %12" PRIu64 "\n", r, v->sent[ULY_AG_K],
                   v->sent[ULY_AG_V], v->sent[ULY_RS_DK], v->sent[ULY_RS_DV]);
            continue;
        }
        uint64_t a2a = vol_sum(v, 0, ULY_A2A_COUNT - 1, 0), a2af = vol_sum(v, 0, ULY_A2A_O, 0);
        uint64_t rf = v->sent[ULY_RING_K] + v->sent[ULY_RING_V];
        uint64_t rb = v->sent[ULY_RING_BK] + v->sent[ULY_RING_BV], rd = v->sent[ULY_RING_DK] + v->sent[ULY_RING_DV];
        if (usp)
            printf("  r%-3d %12" PRIu64, r, a2a);
        else
            printf("  r%-3d", r);
        printf("%12" PRIu64 " | %12" PRIu64 " %12" PRIu64 " | %12" PRIu64 " %12" PRIu64 "\n", rf, rb, rd, a2af + rf,
               a2a - a2af + rb + rd);
    }
    /* closed forms without masks, even split */
    const uint64_t B = (uint64_t)a->batch, d = (uint64_t)a->head_dim, N = (uint64_t)a->seq;
    printf("\nClosed form (no mask, N divisible by the chunks):\n");
    int64_t kvh = a->kv_heads, k0;
    if (usp) {
        int64_t hb, hc;
        uly_plan_heads(pl, a->heads, 0, &hb, &hc);
        uly_kv_range(a, hb, hc, &k0, &kvh);
    }
    if (ag) {
        printf("  all-gather of K and V: each rank sends its block to the P-1 others:\n"
               "  2 (P-1) B (N/P) Hkv d e = 2 x %d x %" PRIu64 " x (%" PRIu64 "/%d) x %" PRId64 " x %" PRIu64
               " x %" PRIu64 " = %.0f\n",
               P - 1, B, N, P, a->kv_heads, d, es, 2.0 * (P - 1) * B * ((double)N / P) * a->kv_heads * d * es);
    } else {
        double cf = 2.0 * (R - 1) * B * ((double)N / R) * (double)kvh * d * es;
        printf("  ring forward, K and V: R-1 hops of one block each:\n"
               "  2 (R-1) B (N/R) KV d e = 2 x %d x %" PRIu64 " x (%" PRIu64 "/%d) x %" PRId64 " x %" PRIu64 " x %" PRIu64
               " = %.0f%s\n",
               R - 1, B, N, R, kvh, d, es, cf, usp ? "  (KV = the KV heads of a rank's group share)" : "");
        uint64_t ring0 = vol[0].sent[ULY_RING_K] + vol[0].sent[ULY_RING_V];
        int skipped = 0, hops = 0;
        for (int r = 0; r < P; r++)
            for (int t = 0; t + 1 < R; t++) {
                hops++;
                skipped += !uly_plan_ring_hop(a, pl, r, t, ULY_RING_K);
            }
        if (skipped)
            printf("  with the mask, %d of the %d hops would carry a block that nobody further on can see:\n"
                   "  they are skipped (uly_plan_ring_hold), so ranks send less than the formula.\n",
                   skipped, hops);
        else if (N % (uint64_t)(pl->zigzag ? 2 * R : R) == 0)
            printf("  rank 0 sends %" PRIu64 " in its forward ring hops: %s\n", ring0,
                   (double)ring0 == cf ? "equal" : "DIFFERENT");
        else
            printf("  uneven chunks: each hop carries the block it holds (see the totals above)\n");
    }
    printf("\ncheck: bytes sent == bytes received, summed over all ranks: %" PRIu64 " == %" PRIu64 ": %s\n", sent_all,
           recv_all, sent_all == recv_all ? "yes" : "NO");
    if (sent_all != recv_all)
        rc = 1;

    /* ---- figure */
    if (fig) {
        snprintf(fig->title, sizeof fig->title,
                 "%s: P = %d%s, N = %" PRId64 ", H = %" PRId64 ", Hkv = %" PRId64 "%s", uly_method_name(pl->method), P,
                 usp ? (snprintf(b3, sizeof b3, " (U %d x R %d)", U, R), b3) : "", a->seq, a->heads, a->kv_heads,
                 mask_words(a, b2, sizeof b2));
        snprintf(fig->subtitle, sizeof fig->subtitle, "colour = rank whose tokens these are; below: who computes "
                 "which query x key block%s", ag ? "" : ", and at which ring step");
        fig->P = P;
        xp_panel *p = new_panel(fig, NULL, "Q, K, V: input shards", "tokens held by each rank, every head", "h",
                                a->seq, a->heads);
        for (int r = 0; r < P; r++)
            if (add_tokens(p, pl, a->seq, r, r, 0, a->heads))
                goto oom;
        if (usp && U > 1) {
            p = new_panel(fig, "all-to-all in group", "after the group all-to-all", "group chunk x H/U heads", "h",
                          a->seq, a->heads);
            for (int r = 0; r < P; r++) {
                int u, j;
                uly_plan_grid(pl, r, &u, &j);
                int64_t hb, hc;
                uly_plan_heads(pl, a->heads, r, &hb, &hc);
                for (int uu = 0; uu < U; uu++)
                    if (add_tokens(p, pl, a->seq, r, uly_plan_grid_rank(pl, uu, j), hb, hc))
                        goto oom;
            }
        }
        if (ag) {
            p = new_panel(fig, "all-gather K, V", "K, V after the all-gather", "all N tokens on every rank", "kv",
                          a->seq, a->kv_heads);
            for (int r = 0; r < P; r++)
                for (int s = 0; s < P; s++)
                    if (add_tokens(p, pl, a->seq, r, s, 0, a->kv_heads))
                        goto oom;
            p = new_panel_kind(fig, XP_ARROW_LOCAL, "attention", "local attention",
                               "own queries x all N keys: O_r (B, n_r, H, d)", "h", a->seq, a->heads);
            for (int r = 0; r < P; r++)
                if (add_tokens(p, pl, a->seq, r, r, 0, a->heads))
                    goto oom;
        }
        /* the work per step stays in the model (--json); the figure draws
         * the grid's per-rank totals */
        xp_bars *bar = &fig->bars[fig->nbars++];
        snprintf(bar->title, sizeof bar->title, "work per rank and step (visible pairs x heads)%s",
                 a->causal ? ", causal" : "");
        bar->P = P;
        bar->steps = T;
        bar->work = work;
        bar->label = lab;
        work = NULL;
        lab = NULL;
        if (mat)
            add_matrix(fig, "group 0 all-to-all Q: elements sent", U, &mat);
        fig->vol = vol;
        vol = NULL;
    }
    goto done;
oom:
    fprintf(stderr, "ulysses explain: out of memory\n");
    rc = 1;
done:
    free(vol);
    free(work);
    free(lab);
    free(mat);
    return rc;
}

/* ------------------------------------------------------------ decode: dcp, helix */

/* Runs printed per rank before "..."; room for them in a buffer. */
enum { RUNS_PRINT = 6, RUNS_LEN = RUNS_PRINT * (RNG_LEN + 1) + 48 };

/* "0-3,16-19" for the runs of [0, n) that rank r holds (uly_kv_segments) */
static const char *kv_runs(char *buf, size_t len, const uly_kv_layout *L, int r, int64_t n)
{
    int64_t b[RUNS_PRINT], c[RUNS_PRINT];
    const int64_t k = uly_kv_segments(L, r, n, b, c, RUNS_PRINT);
    size_t o = 0;
    buf[0] = 0;
    if (k == 0)
        snprintf(buf, len, "none");
    for (int64_t i = 0; i < k && i < RUNS_PRINT && o < len; i++) {
        char x[RNG_LEN];
        o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? "," : "", rng(x, sizeof x, b[i], c[i]));
    }
    if (k > RUNS_PRINT && o < len)
        snprintf(buf + o, len - o, ",... (%" PRId64 " runs)", k);
    return buf;
}

/* Elements rank r sends rank s in call `w` of one decode step: the P x P
 * matrices, from the per-rank head split uly_split(H, P, r) alone. */
static uint64_t dec_elems(const uly_attn_desc *a, int w, int P, int r, int s)
{
    int64_t hb, hr, hs;
    uly_split(a->heads, P, r, &hb, &hr);
    uly_split(a->heads, P, s, &hb, &hs);
    const uint64_t B = (uint64_t)a->batch, d = (uint64_t)a->head_dim;
    switch (w) {
    case ULY_DEC_Q_AG:   /* r's query heads, to every rank */
        return B * (uint64_t)hr * d;
    case ULY_DEC_LSE_AG: /* r's partial LSEs of every head, to every rank */
        return B * (uint64_t)a->heads;
    case ULY_DEC_O_RS:   /* r's scaled partials of s's heads */
        return B * (uint64_t)hs * d;
    default:             /* ULY_DEC_OL_A2A: r's partials of s's heads and their LSEs */
        return B * (uint64_t)hs * (d + 1);
    }
}

/* Keys 0..n the new query at position n sees (the causal mask, a window). */
static int key_visible(const uly_attn_desc *a, int64_t n, int64_t j)
{
    return j <= n && (!a->window || n - j < a->window);
}

static int explain_decode(const xcfg *c, xp_fig *fig)
{
    const uly_attn_desc *a = &c->a;
    const int P = c->P, dcp = c->scheme == ULY_DECODE_DCP;
    const uly_kv_layout *L = &c->kv;
    const int64_t N = a->seq, T = c->generate, n = N + T;   /* the new token's position */
    const uint64_t es = uly_dtype_size(a->dtype), B = (uint64_t)a->batch, d = (uint64_t)a->head_dim,
                   H = (uint64_t)a->heads;
    const int first = dcp ? ULY_DEC_Q_AG : ULY_DEC_OL_A2A, last = dcp ? ULY_DEC_O_RS : ULY_DEC_OL_A2A;
    const int keep = P <= MATRIX_MAX_P || fig;
    uly_decode_volume *vol = calloc((size_t)P, sizeof *vol);
    uint64_t *sent = calloc((size_t)P * ULY_DEC_COUNT, sizeof *sent), *recv = calloc((size_t)P * ULY_DEC_COUNT, sizeof *recv);
    uint64_t *mat[ULY_DEC_COUNT] = {0};
    char b1[RUNS_LEN], b2[RUNS_LEN], b3[RNG_LEN];
    int rc = 0;
    if (!vol || !sent || !recv)
        goto oom;
    for (int r = 0; r < P; r++)
        if (uly_plan_decode_volume(a, c->scheme, P, r, &vol[r])) {
            fprintf(stderr, "ulysses explain: %s\n", uly_last_error());
            rc = EXIT_BADINPUT;
            goto done;
        }
    for (int w = first; w <= last; w++) {
        if (keep && !(mat[w] = calloc((size_t)P * (size_t)P, sizeof(uint64_t))))
            goto oom;
        for (int r = 0; r < P; r++)
            for (int s = 0; s < P; s++) {
                const uint64_t e = dec_elems(a, w, P, r, s);
                if (keep)
                    mat[w][r * P + s] = e;
                if (s != r) {
                    sent[r * ULY_DEC_COUNT + w] += e * es;
                    recv[s * ULY_DEC_COUNT + w] += e * es;
                }
            }
    }
    const int64_t g = a->heads / a->kv_heads;
    char lname[48];
    uly_kv_layout_name(L, lname, sizeof lname);

    printf("ulysses explain: %s, one decode step of one attention layer\n",
           dcp ? "DCP (decode context parallelism): the KV cache sharded over the ranks by tokens"
               : "Helix: the KV cache sharded over the ranks by tokens, the heads' outputs by all-to-all");
    printf("(every term is defined in doc/glossary.md)\n\n");
    printf("shape   P = %d ranks, B = %" PRIu64 " sequences, N = %" PRId64 " prompt tokens, T = %" PRId64
           " generated, H = %" PRIu64 " query heads, Hkv = %" PRId64 " KV heads, d = %" PRIu64 ", %s (e = %" PRIu64
           " bytes)\n",
           P, B, N, T, H, a->kv_heads, d, dtype_names[a->dtype], es);
    if (a->kv_heads == a->heads)
        printf("heads   MHA: every query head has its own KV head (g = H/Hkv = 1)\n");
    else if (a->kv_heads == 1)
        printf("heads   MQA: all %" PRIu64 " query heads share one KV head (g = %" PRId64 ")\n", H, g);
    else
        printf("heads   GQA: g = H/Hkv = %" PRId64 " query heads share each KV head\n", g);
    if (a->window)
        printf("mask    causal sliding window: the new token at position n sees keys n-%" PRId64 " < j <= n\n",
               a->window);
    else
        printf("mask    causal: the new token at position n sees every key j <= n (its own included)\n");
    if (L->kind == ULY_KV_ROUND_ROBIN)
        printf("layout  %s: token t on rank (t / %" PRId64 ") mod %d (blocks of b = %" PRId64
               " tokens dealt in turn, prompt and generated alike)\n",
               lname, L->block, P, L->block);
    else
        printf("layout  contiguous: the prompt split as uly_split(N, P, r); every generated token on rank %d\n", P - 1);

    /* ---- the cache */
    printf("\nKV cache (uly_kv_segments, uly_kv_count): the tokens each rank holds, every KV head of a token\n"
           "on one rank, in token order; cache bytes = 2 (K and V) x B x tokens x Hkv x d x e\n");
    printf("  rank  after the prompt (0-%" PRId64 ")%*s n_r | after T = %" PRId64 " generated (0-%" PRId64 ")%*s n_r | cache bytes\n",
           N - 1, 8, "", T, n - 1, 4, "");
    const uint64_t tokbytes = 2 * B * (uint64_t)a->kv_heads * d * es;
    for (int r = 0; r < P; r++) {
        if (!show_rank(r, P)) {
            ellipsis(r, P);
            continue;
        }
        const int64_t np = uly_kv_count(L, r, N), nt = uly_kv_count(L, r, n);
        printf("  r%-4d %-30s %5" PRId64 " | %-33s %5" PRId64 " | %11" PRIu64 "\n", r, kv_runs(b1, sizeof b1, L, r, N), np,
               kv_runs(b2, sizeof b2, L, r, n), nt, (uint64_t)nt * tokbytes);
    }
    if (L->kind == ULY_KV_CONTIGUOUS && T > 0 && P > 1)
        printf("  contiguous: the generated tokens all land on rank %d, whose shard grows while the others stay\n"
               "  (round-robin:B spreads them; try --kv-layout round-robin:%d)\n", P - 1, 4);
    if (L->kind == ULY_KV_ROUND_ROBIN)
        printf("  round-robin: any %" PRId64 " consecutive tokens (P blocks) are spread over all ranks, so the\n"
               "  shards stay within one block of each other as the cache grows\n", (int64_t)P * L->block);

    /* ---- the step */
    const int own = uly_kv_owner(L, n);
    int64_t hb0, hc0;
    printf("\nDecode step %" PRId64 ": the token at position n = %" PRId64 "\n", T + 1, n);
    int step = 1;
    printf("  %d. append (local): every rank computes (or receives with the query) the new token's K, V\n"
           "     (B, Hkv, d); its owner, rank %d (uly_kv_owner), appends them to its shard\n", step++, own);
    if (dcp) {
        printf("  %d. all-gather q: rank r holds the query heads H_r = uly_split(H, P, r) (as a tensor-parallel\n"
               "     projection leaves them); afterwards every rank holds all H heads (B, H, d).\n"
               "     r sends every other rank B H_r d elements\n", step++);
        print_matrix(mat[ULY_DEC_Q_AG], P, es, "     ");
    } else {
        printf("  %d. the query (B, H, d) is replicated on every rank (no communication)\n", step++);
    }
    printf("  %d. attention over the shard (local, uly_decode_attn): rank r attends the query, all H heads,\n"
           "     over the keys it holds, giving a partial O_r (B, H, d) and LSE_r (B, H)\n", step++);
    printf("     rank  keys attended (of 0-%" PRId64 ")%*s count\n", n, 12, "");
    for (int r = 0; r < P; r++) {
        if (!show_rank(r, P)) {
            ellipsis(r, P);
            continue;
        }
        int64_t seen = 0, lo = a->window && n - a->window + 1 > 0 ? n - a->window + 1 : 0;
        seen = uly_kv_count(L, r, n + 1) - uly_kv_count(L, r, lo);
        printf("     r%-4d %-40s %5" PRId64 "%s\n", r, kv_runs(b1, sizeof b1, L, r, n + 1), seen,
               seen ? "" : "  (none visible: O_r = 0, LSE_r = -inf)");
    }
    if (dcp) {
        printf("  %d. all-gather LSE: every rank gets every rank's LSE_s (B, H) and computes, per head,\n"
               "     L = log sum_s exp(LSE_s) in rank order.  r sends every other rank B H elements\n", step++);
        print_matrix(mat[ULY_DEC_LSE_AG], P, es, "     ");
        printf("  %d. reduce-scatter O: rank r scales O_r by exp(LSE_r - L) and sends rank s the heads H_s\n"
               "     (B H_s d elements); s sums the P scaled partials in rank order 0..P-1\n", step++);
        print_matrix(mat[ULY_DEC_O_RS], P, es, "     ");
    } else {
        printf("  %d. all-to-all O, LSE: rank r sends rank s its unscaled partials of the heads H_s with their\n"
               "     LSEs: B H_s (d + 1) elements (the LSE in the element type)\n", step++);
        print_matrix(mat[ULY_DEC_OL_A2A], P, es, "     ");
        printf("  %d. merge (local): rank s merges the P partials of each of its heads in rank order 0..P-1\n", step++);
    }
    printf("  The output O (B, H_r, d) of its heads H_r is then on rank r:");
    for (int r = 0; r < P && r < 8; r++) {
        uly_split(a->heads, P, r, &hb0, &hc0);
        printf(" r%d %s", r, rng(b3, sizeof b3, hb0, hc0));
    }
    printf("%s\n", P > 8 ? " ..." : "");
    if (a->heads < P)
        printf("  ranks %" PRIu64 "-%d own no head: they attend and send partials but return no output\n", H, P - 1);

    /* ---- the merge */
    printf("\nMerge (per sequence and head, on the head's owner, in rank order r = 0, 1, ..., P-1)\n");
    if (dcp)
        printf("  L = m + log sum_r exp(LSE_r - m), m = max_r LSE_r         (from the all-gathered LSEs)\n"
               "  O = sum_r exp(LSE_r - L) O_r                               (scaled on rank r, summed on the owner)\n");
    else
        printf("  (O, L) = (O_0, LSE_0); for r = 1, ..., P-1 (uly_attn_merge's formula):\n"
               "    L' = m + log(exp(L - m) + exp(LSE_r - m)), m = max(L, LSE_r)\n"
               "    O  = exp(L - L') O + exp(LSE_r - L') O_r,  L = L'\n");
    printf("  A rank with no visible key (LSE_r = -inf) has weight exactly 0.  The order is fixed and each\n"
           "  O_r depends only on rank r's tokens, so the result is bitwise what uly_decode_emulate gives in one\n"
           "  process with the same layout and P (doc/inference.md).\n");

    /* ---- totals */
    printf("\nPer-rank totals: bytes of one decode step (uly_plan_decode_volume)\n");
    printf("  rank ");
    for (int w = first; w <= last; w++)
        printf(" %18s", uly_dec_vol_name(w));
    printf(" | %12s %12s\n", "step sent", "step recv");
    int all_ok = 1;
    uint64_t maxs = 0;
    for (int r = 0; r < P; r++) {
        uint64_t ts = 0, tr = 0;
        for (int w = first; w <= last; w++) {
            ts += vol[r].sent[w];
            tr += vol[r].recv[w];
            all_ok &= vol[r].sent[w] == sent[r * ULY_DEC_COUNT + w] && vol[r].recv[w] == recv[r * ULY_DEC_COUNT + w];
        }
        for (int w = 0; w < ULY_DEC_COUNT; w++)
            all_ok &= (w >= first && w <= last) || (!vol[r].sent[w] && !vol[r].recv[w]);
        maxs = ts > maxs ? ts : maxs;
        if (!show_rank(r, P)) {
            ellipsis(r, P);
            continue;
        }
        printf("  r%-4d", r);
        for (int w = first; w <= last; w++)
            printf(" %18" PRIu64, vol[r].sent[w]);
        printf(" | %12" PRIu64 " %12" PRIu64 "\n", ts, tr);
    }
    printf("  busiest rank: %" PRIu64 " bytes (%s) per step and layer\n", maxs, human(b1, sizeof b1, maxs));

    /* ---- closed form */
    printf("\nClosed form (rank r, bytes per step; B e = %" PRIu64 ")\n", B * es);
    if (dcp)
        printf("  sent = B e [ (P-1) H_r d  +  (P-1) H  +  (H - H_r) d ]      (q all-gather, LSE all-gather, O)\n");
    else
        printf("  sent = B e (H - H_r) (d + 1)                                 (O and LSE of the others' heads)\n");
    int cf_ok = 1;
    for (int r = 0; r < P; r++) {
        int64_t hb, hr;
        uly_split(a->heads, P, r, &hb, &hr);
        const uint64_t Hr = (uint64_t)hr, Pm = (uint64_t)(P - 1);
        const uint64_t v = dcp ? B * es * (Pm * Hr * d + Pm * H + (H - Hr) * d) : B * es * (H - Hr) * (d + 1);
        uint64_t ts = 0;
        for (int w = first; w <= last; w++)
            ts += vol[r].sent[w];
        cf_ok &= v == ts;
        /* once for a run of ranks with the same head count */
        int64_t hp = -1, hn = -1, x;
        if (r > 0)
            uly_split(a->heads, P, r - 1, &x, &hp);
        if (hp == hr)
            continue;
        int lastr = r;
        while (lastr + 1 < P && (uly_split(a->heads, P, lastr + 1, &x, &hn), hn == hr))
            lastr++;
        char who[32];
        if (lastr > r)
            snprintf(who, sizeof who, "r%d-r%d", r, lastr);
        else
            snprintf(who, sizeof who, "r%d", r);
        if (dcp)
            printf("  %-7s %" PRIu64 " x [%d x %" PRIu64 " x %" PRIu64 " + %d x %" PRIu64 " + (%" PRIu64 " - %" PRIu64
                   ") x %" PRIu64 "] = %" PRIu64 " (%s)\n",
                   who, B * es, P - 1, Hr, d, P - 1, H, H, Hr, d, v, v == ts ? "= uly_plan_decode_volume" : "DIFFERS");
        else
            printf("  %-7s %" PRIu64 " x (%" PRIu64 " - %" PRIu64 ") x (%" PRIu64 " + 1) = %" PRIu64 " (%s)\n", who,
                   B * es, H, Hr, d, v, v == ts ? "= uly_plan_decode_volume" : "DIFFERS");
    }
    if (dcp)
        printf("  even heads, P dividing H: (P-1) H_r d + (H - H_r) d = 2 (P-1)/P H d, so\n"
               "    sent = B e (P-1) (2 H d / P + H)%s\n",
               a->heads % P ? "  (not the case here: H % P != 0)" : "");
    else
        printf("  even heads, P dividing H: sent = B e H (d + 1) (P-1)/P%s\n",
               a->heads % P ? "  (not the case here: H % P != 0)" : "");
    /* N, T appear nowhere: the plan's bytes for other cache lengths */
    int flat = 1;
    const int64_t lens[3] = {1, n + 1, (int64_t)1 << 30};
    for (int i = 0; i < 3; i++) {
        uly_attn_desc x = *a;
        x.seq = lens[i];
        for (int r = 0; r < P; r++) {
            uly_decode_volume v;
            if (uly_plan_decode_volume(&x, c->scheme, P, r, &v) || memcmp(&v, &vol[r], sizeof v))
                flat = 0;
        }
    }
    printf("  N and T do not appear: each rank pre-merges its shard into one partial per head, so a step\n"
           "  sends queries and partials, never keys.  uly_plan_decode_volume for caches of 1, %" PRId64
           " and 2^30\n  tokens: %s.  (Gathering the cache instead would move each rank's whole shard,\n"
           "  2 B n_r Hkv d e, %" PRIu64 " bytes per cached token, every step.)\n",
           n + 1, flat ? "the same bytes" : "DIFFERENT", tokbytes);
    all_ok &= cf_ok && flat;
    printf("\ncheck: row sums of the send matrices == uly_plan_decode_volume for every rank and call: %s\n",
           all_ok ? "agree" : "DISAGREE");
    if (!all_ok)
        rc = 1;

    /* ---- figure */
    if (fig) {
        xp_panel *p;
        const int64_t axis = n + 1;
        snprintf(fig->title, sizeof fig->title,
                 "%s decode: P = %d, N = %" PRId64 " + T = %" PRId64 ", H = %" PRIu64 ", Hkv = %" PRId64
                 ", B = %" PRIu64 ", %s",
                 dcp ? "DCP" : "Helix", P, N, T, H, a->kv_heads, B, lname);
        snprintf(fig->subtitle, sizeof fig->subtitle,
                 "colour = rank holding the tokens (light = generated); last panel: x = the rank whose partial");
        fig->P = P;
        p = new_panel(fig, NULL, "KV cache after the prompt", "(B, n_r, Hkv, d): tokens x KV heads", "kv", axis,
                      a->kv_heads);
        for (int r = 0; r < P; r++) {
            const int64_t k = uly_kv_segments(L, r, N, NULL, NULL, 0);
            int64_t *sb = malloc(((size_t)k + 1) * sizeof *sb), *sc = malloc(((size_t)k + 1) * sizeof *sc);
            if (!sb || !sc) {
                free(sb);
                free(sc);
                goto oom;
            }
            uly_kv_segments(L, r, N, sb, sc, k);
            for (int64_t i = 0; i < k; i++)
                if (add_block(p, r, r, sb[i], sc[i], 0, a->kv_heads, 0, 0)) {
                    free(sb);
                    free(sc);
                    goto oom;
                }
            free(sb);
            free(sc);
        }
        char t[80];
        snprintf(t, sizeof t, "KV cache with the new token %" PRId64, n);
        p = new_panel_kind(fig, XP_ARROW_LOCAL, T ? "decode, append" : "append", t,
                           "generated tokens light", "kv", axis, a->kv_heads);
        for (int64_t tk = 0; tk <= n; tk++) {
            const int o = uly_kv_owner(L, tk);
            int64_t e = tk + 1;
            while (e <= n && uly_kv_owner(L, e) == o && (tk >= N) == (e >= N))
                e++;
            if (add_block(p, o, o, tk, e - tk, 0, a->kv_heads, 0, tk >= N))
                goto oom;
            tk = e - 1;
        }
        /* the new query's row of the mask grid */
        fig->strip.query = n;
        for (int64_t tk = 0; tk <= n; tk++) {
            const int o = uly_kv_owner(L, tk), vis = key_visible(a, n, tk);
            int64_t e = tk + 1;
            while (e <= n && uly_kv_owner(L, e) == o && key_visible(a, n, e) == vis)
                e++;
            xp_strip_run *nr = realloc(fig->strip.run, (size_t)(fig->strip.nrun + 1) * sizeof *nr);
            if (!nr)
                goto oom;
            fig->strip.run = nr;
            nr[fig->strip.nrun++] = (xp_strip_run){o, tk, e - tk, vis};
            tk = e - 1;
        }
        /* the keys each rank attends: the strip's visible runs, for all H heads */
        p = new_panel_kind(fig, dcp ? XP_ARROW_COLLECTIVE : XP_ARROW_LOCAL, dcp ? "all-gather q" : "q replicated",
                           "attention: keys x query heads", "O_r, LSE_r (B, H, d): partials", "h", axis, a->heads);
        for (int i = 0; i < fig->strip.nrun; i++) {
            const xp_strip_run *x = &fig->strip.run[i];
            if (x->visible && add_block(p, x->rank, x->rank, x->begin, x->count, 0, a->heads, 0, 0))
                goto oom;
        }
        p = new_panel(fig, dcp ? "LSE all-gather, reduce-scatter O" : "all-to-all O, LSE", "O: merged on the owners",
                      "(B, H_r, d): heads x partials", "h", P, a->heads);
        snprintf(p->xname, sizeof p->xname, "partials");
        for (int r = 0; r < P; r++) {
            int64_t hb, hc;
            uly_split(a->heads, P, r, &hb, &hc);
            for (int s = 0; s < P && hc; s++)
                if (add_block(p, r, s, s, 1, hb, hc, 0, 0))
                    goto oom;
        }
        if (dcp) {
            add_matrix(fig, "all-gather q: elements sent (row -> column)", P, &mat[ULY_DEC_Q_AG]);
            add_matrix(fig, "all-gather LSE: elements sent", P, &mat[ULY_DEC_LSE_AG]);
            add_matrix(fig, "reduce-scatter O: elements sent", P, &mat[ULY_DEC_O_RS]);
        } else {
            add_matrix(fig, "all-to-all O, LSE: elements sent (row -> column)", P, &mat[ULY_DEC_OL_A2A]);
        }
        fig->decode = 1;
        fig->scheme = c->scheme;
        fig->kv = *L;
        fig->generate = T;
        fig->dvol = vol;
        vol = NULL;
    }
    goto done;
oom:
    fprintf(stderr, "ulysses explain: out of memory\n");
    rc = 1;
done:
    for (int w = 0; w < ULY_DEC_COUNT; w++)
        free(mat[w]);
    free(vol);
    free(sent);
    free(recv);
    return rc;
}

/* ------------------------------------------------------------ command */

/* The shape rules of the library and the simulator, with their messages. */
static int check_shape(const xcfg *c)
{
    if (uly_attn_desc_check(&c->a)) {
        fprintf(stderr, "ulysses explain: %s\n", uly_last_error());
        return EXIT_BADINPUT;
    }
    switch (c->method) {
    case ULY_METHOD_ULYSSES:
        if (c->a.heads < c->P) {
            fprintf(stderr,
                    "ulysses explain: ulysses: SP degree %d exceeds the %" PRId64
                    " attention heads (ranks without a head would idle; use usp)\n",
                    c->P, c->a.heads);
            return EXIT_BADINPUT;
        }
        break;
    case ULY_METHOD_USP:
        if (c->plan.U > c->a.heads) {
            fprintf(stderr, "ulysses explain: usp: ulysses degree %d exceeds the %" PRId64 " heads\n", c->plan.U,
                    c->a.heads);
            return EXIT_BADINPUT;
        }
        break;
    case ULY_METHOD_MEGATRON_SP:
        if (c->a.heads % c->P) {
            fprintf(stderr, "ulysses explain: megatron-sp: TP degree %d does not divide the %" PRId64 " heads\n",
                    c->P, c->a.heads);
            return EXIT_BADINPUT;
        }
        break;
    }
    return 0;
}

/* --json: the text goes to /dev/null while the figure is filled; returns
 * the saved stdout descriptor (or -1), restored by explain_unmute_stdout. */
static int explain_mute_stdout(void)
{
    fflush(stdout);
    int saved = dup(STDOUT_FILENO), nul = open("/dev/null", O_WRONLY);
    if (saved < 0 || nul < 0 || dup2(nul, STDOUT_FILENO) < 0) {
        if (saved >= 0)
            close(saved);
        if (nul >= 0)
            close(nul);
        return -1;
    }
    close(nul);
    return saved;
}

static int explain_unmute_stdout(int saved)
{
    fflush(stdout);
    int rc = dup2(saved, STDOUT_FILENO) < 0;
    close(saved);
    return rc;
}

/* --json on stdout and/or the --html page into html's temporary (made ready) */
static int explain_json_html(const xp_fig *fig, int json, uly_out *html)
{
    json_t *doc = xp_fig_json(fig);
    if (!doc) {
        fprintf(stderr, "ulysses explain: out of memory\n");
        return ULY_EXIT_RUNTIME;
    }
    int rc = 0;
    if (html->path) {
        FILE *fp = fdopen(dup(html->fd), "w");
        if (!fp || xp_html(fp, doc)) {
            fprintf(stderr, "ulysses explain: --html %s: cannot write: %s\n", html->path, strerror(errno));
            if (fp)
                fclose(fp);
            rc = ULY_EXIT_RUNTIME;
        } else if (uly_out_close(html, fp)) {
            fprintf(stderr, "ulysses explain: %s\n", uly_base_last_error());
            rc = ULY_EXIT_RUNTIME;
        }
    }
    if (!rc && json) {
        if (uly_json_print(stdout, doc)) {
            fprintf(stderr, "ulysses explain: --json: cannot write to stdout\n");
            rc = ULY_EXIT_RUNTIME;
        }
        doc = NULL;   /* uly_json_dump decref'd it */
    }
    json_decref(doc);
    return rc;
}

/* --method dcp|helix: the prompt (--prompt or --seq), the tokens generated,
 * the cache layout; what a decode step refuses.  0, or EXIT_BADINPUT with a
 * message printed. */
static int decode_setup(xcfg *c, int scheme, int seen_seq, int seen_prompt, int64_t prompt, int64_t generate,
                        const char *kvl, const char *docs)
{
    const char *name = uly_decode_name(scheme);
    if (docs) {
        fprintf(stderr, "ulysses explain: --docs: --method %s decodes one sequence per batch row (no packed "
                        "documents)\n", name);
        return EXIT_BADINPUT;
    }
    if (seen_prompt && seen_seq && prompt != c->a.seq) {
        fprintf(stderr, "ulysses explain: --prompt %" PRId64 " and --seq %" PRId64 " disagree (both give the "
                        "prompt's tokens; give one)\n", prompt, c->a.seq);
        return EXIT_BADINPUT;
    }
    if (seen_prompt)
        c->a.seq = prompt;
    if (c->a.seq + generate + 1 > ((int64_t)1 << 40)) {
        fprintf(stderr, "ulysses explain: --generate %" PRId64 ": the cache would pass 2^40 tokens\n", generate);
        return EXIT_BADINPUT;
    }
    int kind = ULY_KV_CONTIGUOUS;
    int64_t block = 0;
    if (kvl && uly_kv_layout_parse(kvl, &kind, &block)) {
        fprintf(stderr, "ulysses explain: --kv-layout '%s': expected contiguous or round-robin:B (B a positive "
                        "integer)\n", kvl);
        return EXIT_BADINPUT;
    }
    c->a.causal = 1;   /* decoding is causal: the mask line says so */
    if (uly_attn_desc_check(&c->a) || uly_kv_layout_init(&c->kv, kind, c->P, block, c->a.seq)) {
        fprintf(stderr, "ulysses explain: %s\n", uly_last_error());
        return EXIT_BADINPUT;
    }
    c->scheme = scheme;
    c->generate = generate;
    return 0;
}

/* The command; *owned collects what it allocated for the problem (the
 * document offsets), freed by cmd_explain on every way out. */
static int explain_command(int argc, char **argv, int64_t **owned)
{
    xcfg c;
    memset(&c, 0, sizeof c);
    int64_t P = 0, batch = 1, seq = 16, heads = 8, kv = 0, dim = 64, window = 0;
    int64_t udeg = 0;
    int causal = 0, dtype = 0, method = 0, placement = 0, seen_ranks = 0, seen_udeg = 0, seen_place = 0;
    const char *svg = NULL, *html = NULL, *docs = NULL;
    int json = 0, seen_seq = 0, seen_prompt = 0, seen_gen = 0;
    int64_t prompt = 0, generate = 0;
    const char *kvl = NULL;
    /* the choices of --method: the one name table (uly_method_name), indexed
     * by uly_method, then the decode schemes (uly_decode_name) after it */
    const char *method_names[ULY_METHOD_ALL + ULY_DECODE_COUNT + 1];
    for (int m = 0; m < ULY_METHOD_ALL; m++)
        method_names[m] = uly_method_name(m);
    for (int s = 0; s < ULY_DECODE_COUNT; s++)
        method_names[ULY_METHOD_ALL + s] = uly_decode_name(s);
    method_names[ULY_METHOD_ALL + ULY_DECODE_COUNT] = NULL;
    const arg_opt opts[] = {
        {"ranks", ARG_INT, &P, 1, RANKS_MAX, "P", "number of ranks (GPUs) P (required; with --svg at most 64)", NULL,
         &seen_ranks},
        {"seq", ARG_INT, &seq, 1, (int64_t)1 << 40, "N", "sequence length N (default 16; with --docs, their sum)", NULL,
         &seen_seq},
        {"heads", ARG_INT, &heads, 1, 1 << 20, "H", "query heads (default 8)", NULL, NULL},
        {"kv-heads", ARG_INT, &kv, 1, 1 << 20, "Hkv", "key/value heads, H % Hkv == 0 (default H)", NULL, NULL},
        {"batch", ARG_INT, &batch, 1, 1 << 20, "B", "batch size (default 1)", NULL, NULL},
        {"head-dim", ARG_INT, &dim, 1, 1 << 16, "d", "head dimension (default 64)", NULL, NULL},
        {"dtype", ARG_CHOICE, &dtype, 0, 0, "T", "element type f32 or f64: bytes per element e (default f32)",
         dtype_names, NULL},
        {"method", ARG_CHOICE, &method, 0, 0, "M",
         "ulysses (default), ring, zigzag, allgather, usp or megatron-sp; dcp or helix: a decode step",
         method_names, NULL},
        {"prompt", ARG_INT, &prompt, 1, (int64_t)1 << 40, "N", "dcp, helix: the prompt's tokens N (the same as --seq)",
         NULL, &seen_prompt},
        {"generate", ARG_INT, &generate, 0, (int64_t)1 << 40, "T",
         "dcp, helix: tokens generated before the step explained (default 0: the first step)", NULL, &seen_gen},
        {"kv-layout", ARG_STR, &kvl, 0, 0, "L",
         "dcp, helix: the KV cache layout, contiguous (default) or round-robin:B (blocks of B tokens)", NULL, NULL},
        {"ulysses-degree", ARG_INT, &udeg, 1, RANKS_MAX, "U",
         "usp: ranks per all-to-all group, dividing P (default: the largest divisor of P not above H)", NULL,
         &seen_udeg},
        {"placement", ARG_CHOICE, &placement, 0, 0, "PL",
         "usp: ulysses-inner (groups are consecutive ranks, the default) or ring-inner", placement_names,
         &seen_place},
        {"causal", ARG_FLAG, &causal, 0, 0, NULL, "causal mask (changes the work, not the volume)", NULL, NULL},
        {"window", ARG_INT, &window, 1, (int64_t)1 << 40, "W", "sliding window (as in ulysses attn)", NULL, NULL},
        {"docs", ARG_STR, &docs, 0, 0, "L1,L2,...",
         "packed documents: their lengths, summing to N (a query sees only its own document's keys)", NULL, NULL},
        {"svg", ARG_STR, &svg, 0, 0, "FILE", "also draw the figure (layouts, mask grid, work): FILE.svg, or .png, .pdf (cairo); P <= 64", NULL, NULL},
        {"json", ARG_FLAG, &json, 0, 0, NULL, "print one JSON object instead of the text (keys in doc/cli.md); P <= 64",
         NULL, NULL},
        {"html", ARG_STR, &html, 0, 0, "FILE",
         "also write a self-contained page: layouts, mask grid, a ring-step slider, matrices, volumes; P <= 64", NULL,
         NULL},
        {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    char msg[1024] = "";
    int prc = args_parse("ulysses explain", argc - 1, argv + 1, opts, msg, sizeof msg);
    if (prc == ARGS_HELP) {
        args_usage(stdout, "ulysses", synopsis, opts);
        return 0;
    }
    if (prc == ARGS_ERROR) {
        fprintf(stderr, "%s\n", msg);
        return EXIT_BADINPUT;
    }
    if (!seen_ranks) {
        fprintf(stderr, "ulysses explain: --ranks P is required (see ulysses explain --help)\n");
        return EXIT_BADINPUT;
    }
    c.P = (int)P;
    c.method = method;
    c.svg = svg;
    c.a.batch = batch;
    c.a.seq = seq;
    c.a.heads = heads;
    c.a.kv_heads = kv ? kv : heads;
    c.a.head_dim = dim;
    c.a.causal = causal;
    c.a.window = window;
    c.a.dtype = dtype == 0 ? ULY_F32 : ULY_F64;
    const int decode = method >= ULY_METHOD_ALL;
    if (!decode && (seen_prompt || seen_gen || kvl)) {
        fprintf(stderr, "ulysses explain: --%s applies to --method dcp or helix only\n",
                seen_prompt ? "prompt" : seen_gen ? "generate" : "kv-layout");
        return EXIT_BADINPUT;
    }
    c.scheme = -1;
    if (decode) {
        int drc = decode_setup(&c, method - ULY_METHOD_ALL, seen_seq, seen_prompt, prompt, generate, kvl, docs);
        if (drc)
            return drc;
    }
    if (docs) {
        int64_t D = 0, sum = 0;
        int drc = parse_docs(docs, &c.doc_len, &D, msg, sizeof msg);
        *owned = c.doc_len;
        if (drc) {
            fprintf(stderr, "ulysses explain: %s\n", msg);
            return drc;
        }
        for (int64_t i = 0; i < D; i++)
            sum += c.doc_len[i];
        if (seen_seq && sum != seq) {
            fprintf(stderr, "ulysses explain: --docs: the document lengths sum to %" PRId64 ", not --seq %" PRId64 "\n",
                    sum, seq);
            return EXIT_BADINPUT;
        }
        if (batch * (D + 1) > DOC_OFFSETS_MAX) {
            fprintf(stderr, "ulysses explain: --docs: %" PRId64 " documents x --batch %" PRId64 " rows: more than %d "
                    "offsets\n", D, batch, DOC_OFFSETS_MAX);
            return EXIT_BADINPUT;
        }
        int64_t *off = calloc((size_t)(batch * (D + 1)), sizeof *off);
        if (!off) {
            fprintf(stderr, "ulysses explain: out of memory\n");
            return ULY_EXIT_RUNTIME;
        }
        /* the same documents in every batch row */
        for (int64_t b = 0; b < batch; b++)
            for (int64_t i = 0; i < D; i++)
                off[b * (D + 1) + i + 1] = off[b * (D + 1) + i] + c.doc_len[i];
        free(c.doc_len);
        c.doc_len = off;
        *owned = off;
        c.a.seq = sum;
        c.a.doc_offsets = off;
        c.a.docs = D;
    }
    int rc = 0;
    if (!decode) {
        if ((seen_udeg || seen_place) && method != ULY_METHOD_USP) {
            fprintf(stderr, "ulysses explain: --%s applies to --method usp only\n",
                    seen_udeg ? "ulysses-degree" : "placement");
            return EXIT_BADINPUT;
        }
        int U = 0;
        if (method == ULY_METHOD_USP) {
            U = (int)udeg;
            if (!seen_udeg) {   /* the library's default, printed: never a silent choice */
                U = uly_plan_usp_degree(c.a.heads, c.P);
                fprintf(json ? stderr : stdout, "note: --ulysses-degree not given: U = %d, the largest divisor of P = %d not above H = %" PRId64
                       "\n\n",
                       U, c.P, c.a.heads);
            }
        }
        /* megatron-sp splits the tokens (its SP regions) and the heads (its TP
         * regions) over the P ranks as a ulysses plan of P ranks does */
        const int plan_method = method == ULY_METHOD_MEGATRON_SP ? ULY_METHOD_ULYSSES : method;
        if (uly_sp_plan_init(&c.plan, plan_method, c.P, U, placement)) {
            fprintf(stderr, "ulysses explain: %s\n", uly_last_error());
            return EXIT_BADINPUT;
        }
        rc = check_shape(&c);
        if (rc)
            return rc;
        int st = uly_layout_init(&c.L, &c.a, &c.plan);
        if (st) {
            fprintf(stderr, "ulysses explain: %s\n", uly_last_error());
            return exit_status_of(st);
        }
    }
    if (svg && c.P > DRAW_MAX_P) {
        fprintf(stderr, "ulysses explain: --svg %s: a figure draws at most %d ranks (one band each, P x P matrix "
                        "cells), not --ranks %d; the text shows every P, leave out --svg\n", svg, DRAW_MAX_P, c.P);
        return EXIT_BADINPUT;
    }
    if ((html || json) && c.P > DRAW_MAX_P) {
        fprintf(stderr, "ulysses explain: --%s: the figure model holds at most %d ranks (P x P matrices, the "
                        "mask grid), not --ranks %d; the text shows every P\n", html ? "html" : "json", DRAW_MAX_P, c.P);
        return EXIT_BADINPUT;
    }
    if (svg) {
        /* refuse a bad path before printing anything */
        const char *dot = strrchr(svg, '.');
        if (!dot || (strcmp(dot, ".svg") && strcmp(dot, ".png") && strcmp(dot, ".pdf"))) {
            fprintf(stderr, "ulysses explain: --svg %s: the file name must end in .svg, .png or .pdf\n", svg);
            return EXIT_BADINPUT;
        }
        if (strcmp(dot, ".svg") && !xp_draw_available()) {
            fprintf(stderr, "ulysses explain: --svg %s: this build has no PNG or PDF support (configure found no "
                            "cairo; Debian: apt-get install libcairo2-dev, then reconfigure); .svg works\n", svg);
            return EXIT_BADINPUT;
        }
    }
    /* the output's checks and its temporary (base_out.h), before computing */
    uly_out outs[2] = {{.path = svg, .what = "--svg"}, {.path = html, .what = "--html"}};
    uly_out *out = &outs[0];
    uly_out_init(outs, 2);
    if (svg || html) {
        int orc = uly_out_prepare(svg ? outs : outs + 1, svg && html ? 2 : 1, NULL, 0);
        if (orc) {
            fprintf(stderr, "ulysses explain: %s\n", uly_base_last_error());
            return orc;
        }
        for (int i = 0; i < 2; i++)
            if (outs[i].stale)
                fprintf(stderr, "ulysses explain: note: %s %s: removed %d temporary file%s left by an interrupted "
                        "run\n", outs[i].what, outs[i].path, outs[i].stale, outs[i].stale > 1 ? "s" : "");
    }
    const int need_fig = svg || html || json;
    xp_fig fig;
    memset(&fig, 0, sizeof fig);
    /* --json: the JSON document replaces the text on stdout */
    int saved_stdout = json ? explain_mute_stdout() : -1;
    if (json && saved_stdout < 0) {
        fprintf(stderr, "ulysses explain: --json: cannot redirect the text: %s\n", strerror(errno));
        uly_out_discard(outs, 2);
        return ULY_EXIT_RUNTIME;
    }
    switch (decode ? -1 : c.method) {
    case -1:
        rc = explain_decode(&c, need_fig ? &fig : NULL);
        break;
    case ULY_METHOD_ULYSSES:
        rc = explain_ulysses(&c, need_fig ? &fig : NULL);
        break;
    case ULY_METHOD_MEGATRON_SP:
        rc = explain_megatron(&c, need_fig ? &fig : NULL);
        break;
    default:
        rc = explain_ring(&c, need_fig ? &fig : NULL);
        break;
    }
    if (json && explain_unmute_stdout(saved_stdout) && !rc) {
        fprintf(stderr, "ulysses explain: --json: cannot restore stdout: %s\n", strerror(errno));
        rc = ULY_EXIT_RUNTIME;
    }
    if (!rc && need_fig && decode) {
        fig.a = c.a;
        fig.method = c.method;
    } else if (!rc && need_fig) {
        fig.a = c.a;
        fig.plan = c.plan;
        fig.method = c.method;
        if (xp_grid_fill(&fig.grid, &c.a, &c.plan, c.method, c.P, &c.L)) {
            fprintf(stderr, "ulysses explain: out of memory\n");
            rc = ULY_EXIT_RUNTIME;
        }
    }
    if (!rc && svg) {
        char err[512];
        rc = xp_draw(&fig, svg, out->tmp, err, sizeof err);
        if (!rc && uly_out_ready(out)) {
            snprintf(err, sizeof err, "%s", uly_base_last_error());
            rc = ULY_EXIT_RUNTIME;
        }
        if (rc)
            fprintf(stderr, "ulysses explain: %s\n", err);
    }
    if (!rc && (html || json))
        rc = explain_json_html(&fig, json, &outs[1]);
    if (!rc && (svg || html) && uly_out_commit(svg ? outs : outs + 1, svg && html ? 2 : 1)) {
        fprintf(stderr, "ulysses explain: %s\n", uly_base_last_error());
        rc = ULY_EXIT_RUNTIME;
    }
    if (!rc && svg)
        fprintf(stderr, "ulysses explain: figure written to %s\n", svg);
    if (!rc && html)
        fprintf(stderr, "ulysses explain: page written to %s\n", html);
    uly_out_discard(outs, 2);
    xp_fig_free(&fig);
    return rc;
}

int cmd_explain(int argc, char **argv)
{
    int64_t *owned = NULL;
    int rc = explain_command(argc, argv, &owned);
    free(owned);
    return rc;
}
