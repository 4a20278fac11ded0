/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd_check.c -- `ulysses check DIR`: the independent checker of a
 * framework's sequence-parallel attention (doc/check.md).  Reads what P
 * ranks dumped -- DIR/rank{r}.safetensors or DIR/rank{r}/NAME.npy with the
 * tensors q, k, v and any of o, lse, do, dq, dk, dv, tokens, cu_seqlens --
 * checks that the ranks agree on every shape, converts the framework's
 * layout to the library's, and hands the shards to uly_check_run (the
 * reassembly, the float64 reference, the cells, the diagnosis and the
 * balance are the library's).  Prints the table per tensor, the tolerances,
 * the balance and the verdict, or the report's JSON.  One process, no MPI.
 * `ulysses check --data DIR` is the training-level check (check_data.c).
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "cli.h"

/* The tensors of a dump; NAMES order. */
enum { N_Q = 0, N_K, N_V, N_O, N_LSE, N_DO, N_DQ, N_DK, N_DV, N_TOK, N_CU, N_COUNT };
static const char *const names[N_COUNT] = {"q", "k", "v", "o", "lse", "do", "dq", "dk", "dv", "tokens", "cu_seqlens"};

enum { MAX_RANKS = 4096 };

typedef struct src {
    uly_tfile *f;   /* owned unless shared with the rank's safetensors file */
    int idx;        /* tensor index in f */
    char label[600];/* "rank2.safetensors" or "rank2/k.npy", for messages */
    const uly_tinfo *info;
} src;

typedef struct rank_in {
    uly_tfile *st;  /* the rank's safetensors file, or NULL */
    src t[N_COUNT]; /* t[i].f NULL: absent */
    int64_t rows;
    double *x[N_COUNT];     /* converted, bshd */
    int64_t *tok;
} rank_in;

typedef struct chk_cfg {
    const char *dir;
    int P, method, U, placement, layout, elem, json;
    int seen_ranks, seen_method, seen_udeg, seen_place, seen_dtype;
    int causal;
    int64_t window;
    double scale, max_imbalance;
    const char *doc_lens, *docs, *cu;
} chk_cfg;

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static int fail2(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("ulysses check: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return EXIT_BADINPUT;
}

static int is_dir(const char *p)
{
    struct stat s;
    return stat(p, &s) == 0 && S_ISDIR(s.st_mode);
}

static int exists(const char *p)
{
    struct stat s;
    return stat(p, &s) == 0;
}

static void shape_text(const uly_tinfo *t, char *buf, size_t len)
{
    size_t n = 0;
    n += (size_t)snprintf(buf + n, len - n, "(");
    for (int i = 0; i < t->ndim && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (n < len)
        snprintf(buf + n, len - n, t->ndim == 1 ? ",)" : ")");
}

/* ------------------------------------------------------------- files */

/* How many ranks the directory holds (rank0 .. rank{P-1} contiguous), the
 * format (1: safetensors, 0: npy directories). */
static int find_ranks(chk_cfg *c, int *st)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/rank0.safetensors", c->dir);
    const int has_st = exists(p);
    snprintf(p, sizeof p, "%s/rank0", c->dir);
    const int has_np = is_dir(p);
    if (!is_dir(c->dir))
        return fail2("%s: not a directory (the ranks' dumps: DIR/rank{r}.safetensors or DIR/rank{r}/NAME.npy)", c->dir);
    if (has_st && has_np)
        return fail2("%s holds both rank0.safetensors and rank0/: keep one format", c->dir);
    if (!has_st && !has_np)
        return fail2("%s: no rank0.safetensors and no rank0/ directory (the dump of rank 0)", c->dir);
    *st = has_st;
    int found = 0;
    for (; found < MAX_RANKS; found++) {
        snprintf(p, sizeof p, has_st ? "%s/rank%d.safetensors" : "%s/rank%d", c->dir, found);
        if (!(has_st ? exists(p) : is_dir(p)))
            break;
    }
    /* a gap: a higher rank present */
    int highest = -1;
    DIR *d = opendir(c->dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            int r;
            char tail[32] = "";
            if (sscanf(e->d_name, "rank%d%31s", &r, tail) >= 1 && r > highest &&
                (has_st ? strcmp(tail, ".safetensors") == 0 : tail[0] == 0))
                highest = r;
        }
        closedir(d);
    }
    if (c->seen_ranks) {
        if (c->P > found) {
            snprintf(p, sizeof p, has_st ? "%s/rank%d.safetensors" : "%s/rank%d/", c->dir, found);
            return fail2("%s is missing (--ranks %d)", p, c->P);
        }
        if (highest >= c->P)
            printf("note: %s holds dumps of ranks beyond --ranks %d; only ranks 0-%d are read\n", c->dir, c->P,
                   c->P - 1);
    } else {
        if (highest >= found) {
            snprintf(p, sizeof p, has_st ? "%s/rank%d.safetensors" : "%s/rank%d/", c->dir, found);
            return fail2("%s is missing (rank %d's dump is there)", p, highest);
        }
        c->P = found;
    }
    return 0;
}

static int name_index(const char *n)
{
    for (int i = 0; i < N_COUNT; i++)
        if (strcmp(n, names[i]) == 0)
            return i;
    return -1;
}

static int open_rank(const chk_cfg *c, int r, int st, rank_in *R)
{
    char p[4096];
    if (st) {
        snprintf(p, sizeof p, "%s/rank%d.safetensors", c->dir, r);
        int rc = uly_tfile_open(p, &R->st);
        if (rc)
            return fail2("%s", uly_last_error());
        for (int i = 0; i < uly_tfile_count(R->st); i++) {
            const uly_tinfo *t = uly_tfile_info(R->st, i);
            int k = name_index(t->name);
            if (k < 0)
                return fail2("rank%d.safetensors: tensor '%s' is not one ulysses check reads (q, k, v, o, lse, do, dq, "
                             "dk, dv, tokens, cu_seqlens)", r, t->name);
            R->t[k].f = R->st;
            R->t[k].idx = i;
            R->t[k].info = t;
            snprintf(R->t[k].label, sizeof R->t[k].label, "rank%d.safetensors", r);
        }
        return 0;
    }
    snprintf(p, sizeof p, "%s/rank%d", c->dir, r);
    DIR *d = opendir(p);
    if (!d)
        return fail2("%s: %s", p, strerror(errno));
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d))) {
        const size_t n = strlen(e->d_name);
        if (e->d_name[0] == '.')
            continue;
        if (n < 5 || strcmp(e->d_name + n - 4, ".npy") != 0) {
            rc = fail2("%s/%s: not a .npy file (rank directories hold NAME.npy files)", p, e->d_name);
            break;
        }
        char nm[256];
        snprintf(nm, sizeof nm, "%.*s", (int)(n - 4), e->d_name);
        int k = name_index(nm);
        if (k < 0) {
            rc = fail2("%s/%s: '%s' is not a tensor ulysses check reads (q, k, v, o, lse, do, dq, dk, dv, tokens, "
                       "cu_seqlens)", p, e->d_name, nm);
            break;
        }
        char fp[4400];
        snprintf(fp, sizeof fp, "%s/%s", p, e->d_name);
        if (uly_tfile_open(fp, &R->t[k].f)) {
            rc = fail2("%s", uly_last_error());
            break;
        }
        R->t[k].idx = 0;
        R->t[k].info = uly_tfile_info(R->t[k].f, 0);
        snprintf(R->t[k].label, sizeof R->t[k].label, "rank%d/%s", r, e->d_name);
    }
    closedir(d);
    return rc;
}

static void close_rank(rank_in *R)
{
    for (int i = 0; i < N_COUNT; i++) {
        if (R->t[i].f && R->t[i].f != R->st)
            uly_tfile_close(R->t[i].f);
        uly_free(R->x[i]);
    }
    if (R->st)
        uly_tfile_close(R->st);
    uly_free(R->tok);
}

/* ------------------------------------------------------------- shapes */

/* (B, n, Hx, d) of a token-major tensor in the layout; 0 if it does not fit. */
static int dims_of(int layout, const uly_tinfo *t, int64_t *B, int64_t *n, int64_t *Hx, int64_t *d)
{
    if (layout == ULY_TL_THD) {
        if (t->ndim != 3)
            return 0;
        *B = 1;
        *n = t->shape[0];
        *Hx = t->shape[1];
        *d = t->shape[2];
        return 1;
    }
    if (t->ndim != 4)
        return 0;
    *B = t->shape[0];
    *n = layout == ULY_TL_BSHD ? t->shape[1] : t->shape[2];
    *Hx = layout == ULY_TL_BSHD ? t->shape[2] : t->shape[1];
    *d = t->shape[3];
    return 1;
}

static const char *layout_form(int layout, int kv)
{
    if (layout == ULY_TL_THD)
        return kv ? "(n, Hkv, d)" : "(n, H, d)";
    if (layout == ULY_TL_BHSD)
        return kv ? "(B, Hkv, n, d)" : "(B, H, n, d)";
    return kv ? "(B, n, Hkv, d)" : "(B, n, H, d)";
}

/* A hint when q and k fit another layout. */
static const char *layout_hint(int layout, const rank_in *R)
{
    static char buf[96];
    for (int L = 0; L < ULY_TL_COUNT; L++) {
        if (L == layout)
            continue;
        int64_t B, n, H, d, B2, n2, H2, d2;
        if (dims_of(L, R->t[N_Q].info, &B, &n, &H, &d) && dims_of(L, R->t[N_K].info, &B2, &n2, &H2, &d2) &&
            B == B2 && n == n2 && d == d2 && H2 > 0 && H % H2 == 0) {
            snprintf(buf, sizeof buf, " (the shapes fit --layout %s)", uly_tlayout_name(L));
            return buf;
        }
    }
    return "";
}

/* ------------------------------------------------------------ documents */

static int read_offsets_file(const char *opt, const char *path, uly_tfile *f, int idx, const char *label, int64_t B,
                             int64_t N, int64_t **off, int64_t *D)
{
    uly_tfile *own = NULL;
    if (!f) {
        if (uly_tfile_open(path, &own))
            return fail2("%s %s", opt, uly_last_error());
        f = own;
        idx = 0;
        label = path;
    }
    const uly_tinfo *t = uly_tfile_info(f, idx);
    int rc = 0;
    const int64_t n = t->ndim == 1 ? t->shape[0] : t->ndim == 2 ? t->shape[1] : -1;
    if (!((t->ndim == 2 && t->shape[0] == B) || t->ndim == 1) || n < 2) {
        char s[128];
        shape_text(t, s, sizeof s);
        rc = fail2("%s%s%s: document offsets of shape (B, D+1) = (%lld, D+1) or (D+1,) with D >= 1 expected, got %s",
                   opt, *opt ? " " : "", label, (long long)B, s);
    } else if (uly_elem_is_float(t->elem)) {
        rc = fail2("%s%s%s: document offsets must be integers, got %s", opt, *opt ? " " : "", label,
                   uly_elem_name(t->elem));
    } else {
        int64_t *x = uly_malloc((size_t)t->count * sizeof *x);
        *off = uly_malloc((size_t)B * (size_t)n * sizeof **off);
        if (!x || !*off)
            rc = fail2("cannot allocate the document offsets");
        else if (uly_tfile_read_i64(f, idx, 0, t->count, x))
            rc = fail2("%s", uly_last_error());
        else {
            for (int64_t b = 0; b < B; b++)
                memcpy(*off + b * n, x + (t->ndim == 2 ? b * n : 0), (size_t)n * sizeof *x);
            *D = n - 1;
            uly_attn_desc a = {.batch = B, .seq = N, .heads = 1, .kv_heads = 1, .head_dim = 1, .doc_offsets = *off,
                               .docs = *D};
            if (uly_attn_desc_check(&a))
                rc = fail2("%s%s%s: %s", opt, *opt ? " " : "", label, uly_last_error());
        }
        uly_free(x);
    }
    if (own)
        uly_tfile_close(own);
    return rc;
}

/* ------------------------------------------------------------- output */

static void fmt_tokens(const uly_check_cell *x, char *buf, size_t len)
{
    if (x->tok_count <= 0)
        snprintf(buf, len, "none");
    else
        snprintf(buf, len, "%lld-%lld", (long long)x->tok_begin, (long long)(x->tok_begin + x->tok_count - 1));
}

static void print_table(const uly_check_problem *pb, const uly_check_report *rep)
{
    static const char *const disp[ULY_CHK_NT] = {"O", "LSE", "dQ", "dK", "dV"};
    enum { LIST_ALL = 64, LIST_FAILING = 64 };
    printf("tolerances (|x - ref| <= atol + rtol |ref|, compute type %s):", uly_elem_name(pb->elem));
    for (int t = 0; t < ULY_CHK_NT; t++)
        if (rep->present[t])
            printf(" %s %.3g + %.3g|ref|;", disp[t], rep->atol[t], rep->rtol[t]);
    printf("\n");
    for (int t = 0; t < ULY_CHK_NT; t++) {
        if (!rep->present[t])
            continue;
        int n = 0, nbad = 0;
        for (int i = 0; i < rep->ncells; i++)
            if (rep->cells[i].tensor == t) {
                n++;
                nbad += rep->cells[i].bad > 0;
            }
        const int all = n <= LIST_ALL;
        printf("\n%s: %d cells, %d beyond tolerance%s\n", disp[t], n, nbad,
               all ? "" : nbad ? " (listed; the others are within tolerance)" : " (not listed)");
        if (!all && nbad == 0)
            continue;
        printf("  %4s  %-13s %5s  %-9s %10s %10s  %s\n", "rank", "tokens", "chunk", t >= ULY_CHK_DK ? "kv heads" : "heads",
               "max err", "worst/tol", "verdict");
        int listed = 0;
        for (int i = 0; i < rep->ncells; i++) {
            const uly_check_cell *x = &rep->cells[i];
            if (x->tensor != t || (!all && !x->bad))
                continue;
            if (listed++ >= LIST_FAILING && !all) {
                printf("  ... %d more beyond tolerance\n", nbad - LIST_FAILING);
                break;
            }
            char tok[48], ch[16], hd[48];
            fmt_tokens(x, tok, sizeof tok);
            if (x->chunk >= 0)
                snprintf(ch, sizeof ch, "%d", x->chunk);
            else
                snprintf(ch, sizeof ch, "-");
            snprintf(hd, sizeof hd, x->head_count == 1 ? "%lld" : "%lld-%lld", (long long)x->head_begin,
                     (long long)(x->head_begin + x->head_count - 1));
            char verdict[64];
            if (x->nonfinite)
                snprintf(verdict, sizeof verdict, "WRONG (%llu non-finite)", (unsigned long long)x->nonfinite);
            else if (x->bad)
                snprintf(verdict, sizeof verdict, "WRONG (%llu of %llu)", (unsigned long long)x->bad,
                         (unsigned long long)x->n);
            else
                snprintf(verdict, sizeof verdict, "ok");
            printf("  %4d  %-13s %5s  %-9s %10.3g %10.3g  %s\n", x->rank, tok, ch, hd, x->max_err, x->worst, verdict);
        }
    }
    printf("\nbalance: unmasked (head, query, key) triples per rank:");
    for (int r = 0; r < rep->P && r < 16; r++)
        printf(" %.0f", rep->work[r]);
    printf("%s\n", rep->P > 16 ? " ..." : "");
    printf("balance: max / mean %.3f; the %s map's own %.3f; bound %.3f: %s\n", rep->imbalance,
           uly_method_name(pb->plan.method), rep->imbalance_ref, rep->imbalance_bound,
           rep->imbalance <= rep->imbalance_bound * (1 + 1e-12) ? "ok" : "IMBALANCED");
    if (rep->pass)
        printf("\nverdict: PASS: %s\n", rep->summary);
    else {
        printf("\nverdict: FAIL [%s]: %s\n", uly_defect_name(rep->defect), rep->summary);
        if (rep->evidence[0])
            printf("evidence: %s\n", rep->evidence);
    }
}

/* ---------------------------------------------------------------- main */

static const char synopsis[] =
    "check DIR [--method M] [--ranks P] [--ulysses-degree U] [--placement PL] [--layout bshd|bhsd|thd]\n"
    "               [--causal] [--window W] [--doc-lens L1,L2,... | --docs F | --cu-seqlens F] [--scale S]\n"
    "               [--dtype f32|bf16|f16|f64] [--max-imbalance X] [--json]\n"
    "       check --data DIR ...   (training-level checks: ulysses check --data --help)\n"
    "Checks what the P ranks of a framework's sequence-parallel attention dumped against the\n"
    "float64 reference: DIR/rank{r}.safetensors or DIR/rank{r}/NAME.npy with q, k, v (required),\n"
    "any of o, lse, do, dq, dk, dv, and optionally tokens (the global index of each row) and\n"
    "cu_seqlens (rank 0: the documents).  Reassembles the global tensors with the method's shard\n"
    "map (or the tokens), reports per tensor, rank, chunk and head group the error, the tolerance\n"
    "and a verdict, names the most likely defect and weighs the work of every rank.  Methods:\n"
    "ulysses, ring, zigzag, allgather, usp; Megatron's cp_comm_type a2a, p2p, all_gather, a2a+p2p;\n"
    "the load-balancing names dual-chunk (TransformerEngine) and head-tail (PyTorch) for zigzag\n"
    "and contiguous for ring.  Exit 0: all within tolerance; 1: a defect found; 2: bad input.\n"
    "doc/check.md.";

static int parse_method(const char *s, int *m)
{
    if (strcmp(s, "dual-chunk") == 0 || strcmp(s, "dualchunk") == 0 || strcmp(s, "head-tail") == 0 ||
        strcmp(s, "headtail") == 0) {
        *m = ULY_METHOD_ZIGZAG;
        return 0;
    }
    if (strcmp(s, "contiguous") == 0) {
        *m = ULY_METHOD_RING;
        return 0;
    }
    return uly_method_parse(s, m) ? -1 : 0;
}

static int run_check(chk_cfg *c)
{
    int st = 0, rc = find_ranks(c, &st);
    if (rc)
        return rc;
    const int P = c->P;
    if (P > 1 && !c->seen_method)
        return fail2("%s holds %d ranks' dumps: --method M is required (ulysses, ring, zigzag, allgather, usp, ...)",
                     c->dir, P);
    rank_in *R = uly_calloc((size_t)P, sizeof *R);
    uly_check_rank *ck = uly_calloc((size_t)P, sizeof *ck);
    int64_t *off = NULL, D = 0;
    uly_check_report rep;
    memset(&rep, 0, sizeof rep);
    if (!R || !ck) {
        rc = fail2("cannot allocate %d ranks", P);
        goto done;
    }
    for (int r = 0; r < P && !rc; r++)
        rc = open_rank(c, r, st, &R[r]);
    if (rc)
        goto done;
    /* required tensors, presence on every rank, shapes */
    for (int r = 0; r < P && !rc; r++)
        for (int i = N_Q; i <= N_V && !rc; i++)
            if (!R[r].t[i].f)
                rc = fail2(st ? "%s/rank%d.safetensors: no tensor %s (q, k and v are required)"
                              : "%s/rank%d/: no %s.npy (q, k and v are required)", c->dir, r, names[i]);
    for (int r = 1; r < P && !rc; r++)
        for (int i = N_O; i < N_CU && !rc; i++)
            if (R[r].t[i].f && !R[0].t[i].f)
                rc = fail2("%s: has %s, rank 0's dump has none (every rank dumps the same tensors)", R[r].t[i].label,
                           names[i]);
            else if (!R[r].t[i].f && R[0].t[i].f)
                rc = fail2(st ? "rank%d.safetensors: has no %s, rank 0's dump has one (every rank dumps the same "
                                "tensors)"
                              : "rank%d/: has no %s.npy, rank 0's dump has one (every rank dumps the same tensors)",
                           r, names[i]);
    if (rc)
        goto done;
    int64_t B, n0, H, d, Bk, nk, Hkv, dk;
    const rank_in *R0 = &R[0];
    char s0[128], s1[128];
    shape_text(R0->t[N_Q].info, s0, sizeof s0);
    if (!uly_elem_is_float(R0->t[N_Q].info->elem)) {
        rc = fail2("%s: q is %s; q, k, v are float tensors", R0->t[N_Q].label, uly_elem_name(R0->t[N_Q].info->elem));
        goto done;
    }
    if (!dims_of(c->layout, R0->t[N_Q].info, &B, &n0, &H, &d)) {
        rc = fail2("%s: q has shape %s, which is not %s's %s%s", R0->t[N_Q].label, s0, uly_tlayout_name(c->layout),
                   layout_form(c->layout, 0), c->layout == ULY_TL_THD ? " (packed tokens)" : " (--layout bshd|bhsd|thd)");
        goto done;
    }
    shape_text(R0->t[N_K].info, s1, sizeof s1);
    if (!dims_of(c->layout, R0->t[N_K].info, &Bk, &nk, &Hkv, &dk) || Bk != B || nk != n0 || dk != d || Hkv < 1 ||
        H % Hkv) {
        rc = fail2("%s: k has shape %s, q has %s: in %s, k is %s with q's B, n and d and Hkv dividing H%s",
                   R0->t[N_K].label, s1, s0, uly_tlayout_name(c->layout), layout_form(c->layout, 1),
                   layout_hint(c->layout, R0));
        goto done;
    }
    if (!c->seen_dtype) {
        c->elem = R0->t[N_Q].info->elem;
    }
    int64_t N = 0;
    for (int r = 0; r < P && !rc; r++) {
        rank_in *X = &R[r];
        int64_t b, n, h, dd;
        if (!dims_of(c->layout, X->t[N_Q].info, &b, &n, &h, &dd) || b != B || h != H || dd != d) {
            shape_text(X->t[N_Q].info, s1, sizeof s1);
            rc = fail2("%s: q has shape %s, rank 0's q has %s (in %s: %s; ranks differ only in n)", X->t[N_Q].label, s1,
                       s0, uly_tlayout_name(c->layout), layout_form(c->layout, 0));
            break;
        }
        X->rows = n;
        N += n;
        for (int i = 0; i < N_COUNT && r > 0 && !rc; i++)
            if (X->t[i].f && R0->t[i].f && X->t[i].info->elem != R0->t[i].info->elem)
                rc = fail2("%s: %s is %s, rank 0's %s is %s (the ranks disagree)", X->t[i].label, names[i],
                           uly_elem_name(X->t[i].info->elem), names[i], uly_elem_name(R0->t[i].info->elem));
        if (rc)
            break;
        for (int i = 0; i < N_TOK && !rc; i++) {
            if (!X->t[i].f || i == N_Q)
                continue;
            const uly_tinfo *t = X->t[i].info;
            shape_text(t, s1, sizeof s1);
            char s00[128] = "?";
            if (R0->t[i].info)
                shape_text(R0->t[i].info, s00, sizeof s00);
            if (!uly_elem_is_float(t->elem)) {
                rc = fail2("%s: %s is %s, a float tensor is expected", X->t[i].label, names[i], uly_elem_name(t->elem));
                break;
            }
            if (i == N_LSE) {
                /* (B, H, n) / (H, n) thd; or the method's layout: checked by the library */
                const int nd = c->layout == ULY_TL_THD ? 2 : 3;
                if (t->ndim != nd || (nd == 3 && t->shape[0] != B)) {
                    rc = fail2("%s: lse has shape %s; in %s it is %s%s", X->t[i].label, s1, uly_tlayout_name(c->layout),
                               nd == 3 ? "(B, H, n)" : "(H, n)", " over the rank's tokens (or the heads and chunk "
                               "of the method's layout)");
                    break;
                }
                continue;
            }
            const int kv = i == N_K || i == N_V || i == N_DK || i == N_DV;
            if (!dims_of(c->layout, t, &b, &n, &h, &dd) || b != B || n != X->rows || h != (kv ? Hkv : H) || dd != d) {
                char want[160];
                snprintf(want, sizeof want, "%s with B %lld, n %lld, %s %lld, d %lld", layout_form(c->layout, kv),
                         (long long)B, (long long)X->rows, kv ? "Hkv" : "H", (long long)(kv ? Hkv : H), (long long)d);
                if (r > 0 && R0->t[i].info)
                    rc = fail2("%s: %s has shape %s, rank 0's %s has %s (expected %s)", X->t[i].label, names[i], s1,
                               names[i], s00, want);
                else
                    rc = fail2("%s: %s has shape %s, expected %s%s", X->t[i].label, names[i], s1, want,
                               layout_hint(c->layout, X));
                break;
            }
        }
        if (!rc && X->t[N_TOK].f) {
            const uly_tinfo *t = X->t[N_TOK].info;
            if (uly_elem_is_float(t->elem) || t->ndim != 1 || t->shape[0] != X->rows) {
                shape_text(t, s1, sizeof s1);
                rc = fail2("%s: tokens is %s %s; expected (n,) = (%lld,) integers (the global index of each row of "
                           "q)%s", X->t[N_TOK].label, uly_elem_name(t->elem), s1, (long long)X->rows,
                           layout_hint(c->layout, X));
            }
        }
    }
    if (rc)
        goto done;
    /* with token indices, N is also at least the largest one + 1 (the
     * library then names a token no rank holds) */
    for (int r = 0; r < P && !rc && R0->t[N_TOK].f; r++) {
        const size_t n = (size_t)R[r].rows;
        R[r].tok = uly_malloc((n + 1) * sizeof *R[r].tok);
        if (!R[r].tok || uly_tfile_read_i64(R[r].t[N_TOK].f, R[r].t[N_TOK].idx, 0, n, R[r].tok))
            rc = fail2("%s: tokens: %s", R[r].t[N_TOK].label, R[r].tok ? uly_last_error() : "cannot allocate");
        for (size_t i = 0; i < n && !rc; i++) {
            if (R[r].tok[i] < 0)
                rc = fail2("%s: tokens[%zu] = %lld is negative", R[r].t[N_TOK].label, i, (long long)R[r].tok[i]);
            else if (R[r].tok[i] >= N)
                N = R[r].tok[i] + 1;
        }
    }
    if (rc)
        goto done;
    /* documents */
    {
        const int given = (c->doc_lens != NULL) + (c->docs != NULL) + (c->cu != NULL);
        if (given > 1) {
            rc = fail2("--doc-lens, --docs and --cu-seqlens all give the documents: use one");
            goto done;
        }
        if (given && R0->t[N_CU].f) {
            rc = fail2("%s holds cu_seqlens and %s gives the documents too: use one", R0->t[N_CU].label,
                       c->doc_lens ? "--doc-lens" : c->docs ? "--docs" : "--cu-seqlens");
            goto done;
        }
        char msg[512];
        if (c->doc_lens) {
            if (doc_lens_offsets(c->doc_lens, B, N, &off, &D, msg, sizeof msg)) {
                rc = fail2("%s", msg);
                goto done;
            }
        } else if (c->docs || c->cu) {
            if ((rc = read_offsets_file(c->docs ? "--docs" : "--cu-seqlens", c->docs ? c->docs : c->cu, NULL, 0, NULL,
                                        B, N, &off, &D)))
                goto done;
        } else if (R0->t[N_CU].f) {
            if ((rc = read_offsets_file("", NULL, R0->t[N_CU].f, R0->t[N_CU].idx, R0->t[N_CU].label, B, N, &off, &D)))
                goto done;
        }
    }
    /* the problem */
    uly_check_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.a = (uly_attn_desc){.batch = B, .seq = N, .heads = H, .kv_heads = Hkv, .head_dim = d, .causal = c->causal,
                           .window = c->window, .scale = c->scale, .dtype = ULY_F64, .doc_offsets = off, .docs = D};
    if (uly_attn_desc_check(&pb.a)) {
        rc = fail2("%s: the problem (B %lld, N %lld, H %lld, Hkv %lld, d %lld): %s", c->dir, (long long)B, (long long)N,
                   (long long)H, (long long)Hkv, (long long)d, uly_last_error());
        goto done;
    }
    int U = c->seen_udeg ? c->U : c->method == ULY_METHOD_USP ? uly_plan_usp_degree(H, P) : 0;
    if (uly_sp_plan_init(&pb.plan, c->method, P, U, c->placement)) {
        rc = fail2("--method %s on %d ranks: %s", uly_method_name(c->method), P, uly_last_error());
        goto done;
    }
    pb.elem = c->elem;
    pb.max_imbalance = c->max_imbalance;
    double at, rt;
    if (uly_check_tolerance(pb.elem, 0, &at, &rt)) {
        rc = fail2("%s (--dtype f32, bf16, f16 or f64)", uly_last_error());
        goto done;
    }
    /* the data */
    for (int r = 0; r < P && !rc; r++) {
        rank_in *X = &R[r];
        for (int i = 0; i < N_TOK && !rc; i++) {
            if (!X->t[i].f)
                continue;
            const size_t n = X->t[i].info->count;
            double *raw = uly_malloc((n + 1) * sizeof *raw);
            X->x[i] = uly_malloc((n + 1) * sizeof *raw);
            if (!raw || !X->x[i]) {
                uly_free(raw);
                rc = 1;
                fprintf(stderr, "ulysses check: cannot allocate %s's %s (%zu elements)\n", X->t[i].label, names[i], n);
                break;
            }
            if (uly_tfile_read_f64(X->t[i].f, X->t[i].idx, 0, n, raw)) {
                rc = fail2("%s", uly_last_error());
                uly_free(raw);
                break;
            }
            if (i == N_LSE)
                memcpy(X->x[i], raw, n * sizeof *raw);
            else {
                const int kv = i == N_K || i == N_V || i == N_DK || i == N_DV;
                uly_tlayout_to_bshd(c->layout, B, X->rows, kv ? Hkv : H, d, raw, X->x[i]);
            }
            uly_free(raw);
        }
        if (rc)
            break;
        uly_check_rank *K = &ck[r];
        K->rows = X->rows;
        K->tokens = X->tok;
        K->q = X->x[N_Q];
        K->k = X->x[N_K];
        K->v = X->x[N_V];
        K->o = X->x[N_O];
        K->lse = X->x[N_LSE];
        K->dout = X->x[N_DO];
        K->dq = X->x[N_DQ];
        K->dk = X->x[N_DK];
        K->dv = X->x[N_DV];
        if (K->lse) {
            /* the LSE over the rank's own tokens, or the method's layout (Ulysses, USP: heads x chunk) */
            const uly_tinfo *t = X->t[N_LSE].info;
            const int64_t lh = t->ndim == 3 ? t->shape[1] : t->shape[0], ln = t->shape[t->ndim - 1];
            if (lh == H && ln == X->rows)
                K->lse_plan = 0;
            else {
                int64_t hb, hc, sb[2], sc[2], rows = 0;
                int ns = uly_plan_lse_layout(&pb.plan, N, H, r, &hb, &hc, sb, sc);
                for (int s = 0; s < ns; s++)
                    rows += sc[s];
                if (lh == hc && ln == rows && !X->tok)
                    K->lse_plan = 1;
                else {
                    shape_text(t, s1, sizeof s1);
                    rc = fail2("%s: lse has shape %s: neither the rank's own tokens (B, H, n) = (%lld, %lld, %lld) nor "
                               "the %s layout's (B, heads, chunk) = (%lld, %lld, %lld)", X->t[N_LSE].label, s1,
                               (long long)B, (long long)H, (long long)X->rows, uly_method_name(c->method), (long long)B,
                               (long long)hc, (long long)rows);
                }
            }
        }
    }
    if (rc)
        goto done;
    int st_run = uly_check_run(&pb, ck, &rep);
    if (st_run) {
        if (st_run == ULY_EINVAL)
            rc = fail2("%s: %s", c->dir, uly_last_error());
        else {
            fprintf(stderr, "ulysses check: %s: %s\n", c->dir, uly_last_error());
            rc = exit_status_of(st_run);
        }
        goto done;
    }
    if (c->json) {
        char *js = uly_check_report_json(&pb, &rep);
        if (!js) {
            fprintf(stderr, "ulysses check: cannot allocate the JSON report\n");
            rc = 1;
            goto done;
        }
        printf("%s\n", js);
        uly_free(js);
    } else {
        printf("ulysses check: %s: %d ranks, %s", c->dir, P, uly_method_name(pb.plan.method));
        if (pb.plan.method == ULY_METHOD_USP)
            printf(" (U %d x R %d, %s)", pb.plan.U, pb.plan.R, uly_placement_name(pb.plan.placement));
        printf("; B %lld, N %lld, H %lld, Hkv %lld, d %lld, scale %.6g%s", (long long)B, (long long)N, (long long)H,
               (long long)Hkv, (long long)d, uly_attn_scale(&pb.a), c->causal ? ", causal" : "");
        if (c->window)
            printf(", window %lld", (long long)c->window);
        if (D)
            printf(", %lld documents", (long long)D);
        printf("; layout %s; %s%s\n", uly_tlayout_name(c->layout), ck[0].tokens ? "the ranks' token indices" :
               "the method's shard map", "");
        if (!c->seen_dtype)
            printf("compute type %s: rank 0's q (--dtype to choose)\n", uly_elem_name(pb.elem));
        print_table(&pb, &rep);
    }
    rc = rep.pass ? 0 : 1;
done:
    uly_check_report_free(&rep);
    for (int r = 0; R && r < P; r++)
        close_rank(&R[r]);
    uly_free(R);
    uly_free(ck);
    uly_free(off);
    return rc;
}

int cmd_check(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--data") == 0 || strncmp(argv[i], "--data=", 7) == 0)
            return check_data_main(argc, argv);
    static const char *const placement_names[] = {"ulysses-inner", "ring-inner", NULL};
    static const char *const layout_names[] = {"bshd", "bhsd", "thd", NULL};
    static const char *const dtype_names[] = {"f32", "bf16", "f16", "f64", NULL};
    static const int dtype_elems[] = {ULY_ELEM_F32, ULY_ELEM_BF16, ULY_ELEM_F16, ULY_ELEM_F64};
    chk_cfg c;
    memset(&c, 0, sizeof c);
    int64_t P = 0, U = 0;
    int dtype = 0, placement = 0, layout = 0;
    const char *method = NULL;
    const arg_opt opts[] = {
        {"method", ARG_STR, &method, 0, 0, "M",
         "ulysses, ring, zigzag, allgather, usp (or a2a, p2p, all_gather, a2a+p2p; dual-chunk, head-tail, "
         "contiguous); required for more than one rank", NULL, &c.seen_method},
        {"ranks", ARG_INT, &P, 1, MAX_RANKS, "P", "ranks to read (default: the dumps found, rank0 .. rank{P-1})", NULL,
         &c.seen_ranks},
        {"ulysses-degree", ARG_INT, &U, 1, MAX_RANKS, "U", "usp: ranks per all-to-all group (default: the largest "
         "divisor of P not above H)", NULL, &c.seen_udeg},
        {"placement", ARG_CHOICE, &placement, 0, 0, "PL", "usp: ulysses-inner (default) or ring-inner", placement_names,
         &c.seen_place},
        {"layout", ARG_CHOICE, &layout, 0, 0, "L", "the tensors' layout: bshd (B, n, H, d; default), bhsd (B, H, n, d) "
         "or thd (n, H, d)", layout_names, NULL},
        {"causal", ARG_FLAG, &c.causal, 0, 0, NULL, "causal mask", NULL, NULL},
        {"window", ARG_INT, &c.window, 1, (int64_t)1 << 40, "W", "sliding window (as in ulysses attn)", NULL, NULL},
        {"doc-lens", ARG_STR, &c.doc_lens, 0, 0, "L1,L2,...", "document lengths (the same in every batch row)", NULL,
         NULL},
        {"docs", ARG_STR, &c.docs, 0, 0, "F", "document offsets (B, D+1) or (D+1,), int64 .npy or a one-tensor file",
         NULL, NULL},
        {"cu-seqlens", ARG_STR, &c.cu, 0, 0, "F", "flash-attn's cu_seqlens (the same offsets, thd)", NULL, NULL},
        {"scale", ARG_REAL, &c.scale, 0, 0, "S", "softmax scale (default 1/sqrt(d))", NULL, NULL},
        {"dtype", ARG_CHOICE, &dtype, 0, 0, "T", "the framework's compute type, which sets the tolerances (default: "
         "rank 0's q's element type)", dtype_names, &c.seen_dtype},
        {"max-imbalance", ARG_REAL, &c.max_imbalance, 0, 0, "X", "bound on the work's max / mean (default: "
         "max(1.10, 1.05 x the method's own))", NULL, NULL},
        {"json", ARG_FLAG, &c.json, 0, 0, NULL, "print the report as JSON (doc/check.md)", NULL, NULL},
        {NULL, 0, NULL, 0, 0, NULL, NULL, NULL, NULL},
    };
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        args_usage(stdout, "ulysses", synopsis, opts);
        return 0;
    }
    if (argc < 2 || argv[1][0] == '-')
        return fail2("the dump directory DIR comes first: ulysses check DIR [options] (see ulysses check --help)");
    c.dir = argv[1];
    char msg[1024] = "";
    int prc = args_parse("ulysses check", argc - 2, argv + 2, opts, msg, sizeof msg);
    if (prc == ARGS_HELP) {
        args_usage(stdout, "ulysses", synopsis, opts);
        return 0;
    }
    if (prc == ARGS_ERROR) {
        fprintf(stderr, "%s\n", msg);
        return EXIT_BADINPUT;
    }
    c.P = (int)P;
    c.U = (int)U;
    c.placement = placement;
    c.layout = layout;
    c.elem = dtype_elems[dtype];
    c.method = ULY_METHOD_ULYSSES;
    if (method && parse_method(method, &c.method))
        return fail2("--method '%s': unknown (ulysses, ring, zigzag, allgather, usp; a2a, p2p, all_gather, a2a+p2p; "
                     "dual-chunk, head-tail, contiguous)", method);
    if ((c.seen_udeg || c.seen_place) && c.method != ULY_METHOD_USP)
        return fail2("%s applies to --method usp only", c.seen_udeg ? "--ulysses-degree" : "--placement");
    if (!(c.scale >= 0) || !isfinite(c.scale))
        return fail2("--scale %g: a finite value > 0 (0: 1/sqrt(d))", c.scale);
    if (c.max_imbalance != 0 && !(c.max_imbalance >= 1 && isfinite(c.max_imbalance)))
        return fail2("--max-imbalance %g: a bound on max / mean, at least 1", c.max_imbalance);
    return run_check(&c);
}
