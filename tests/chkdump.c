/* SPDX-License-Identifier: Apache-2.0 */
/*
 * chkdump.c -- test helper of tests/cli_check.sh: write the per-rank dumps a
 * framework would, from the float64 reference of a random problem sharded
 * with the plan layer's map, optionally with one planted defect or one bad
 * input.
 *   chkdump DIR METHOD P N H HKV D [WORD...]
 * Words: causal; bwd (do, dq, dk, dv); lse; tokens; bhsd; npy (DIR/rank{r}/
 * NAME.npy instead of DIR/rank{r}.safetensors); elem=f32|f64|bf16|f16;
 * zero-o=R (rank R's o is 0); dk=R (rank R's dk x 1.5); dup (rank 1's first
 * token is rank 0's); miss (rank P-1 lacks its first row); kshape=R (rank R's
 * k has one KV head more); skip=R (no dump for rank R); thd (packed (n, H, d)
 * tensors); docs=L1,L2,... (documents of those lengths, written as rank 0's
 * cu_seqlens).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"

static int has(int argc, char **argv, const char *w)
{
    for (int i = 8; i < argc; i++)
        if (strcmp(argv[i], w) == 0)
            return 1;
    return 0;
}

static int opt(int argc, char **argv, const char *key, int dflt)
{
    size_t n = strlen(key);
    for (int i = 8; i < argc; i++)
        if (strncmp(argv[i], key, n) == 0 && argv[i][n] == '=')
            return atoi(argv[i] + n + 1);
    return dflt;
}

/* Rows tok of a (B, N, Hx, d) tensor, in the layout. */
static double *shard(const double *g, int64_t B, int64_t N, int64_t Hx, int64_t d, const int64_t *tok, int64_t n,
                     int layout)
{
    double *x = malloc((size_t)(B * n * Hx * d + 1) * sizeof *x), *y = malloc((size_t)(B * n * Hx * d + 1) * sizeof *y);
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < n; i++)
            memcpy(x + (b * n + i) * Hx * d, g + (b * N + tok[i]) * Hx * d, (size_t)(Hx * d) * sizeof *x);
    uly_tlayout_from_bshd(layout, B, n, Hx, d, x, y);
    free(x);
    return y;
}

int main(int argc, char **argv)
{
    if (argc < 8) {
        fprintf(stderr, "usage: chkdump DIR METHOD P N H HKV D [WORD...]\n");
        return 2;
    }
    const char *dir = argv[1];
    int method, P = atoi(argv[3]);
    if (uly_method_parse(argv[2], &method)) {
        fprintf(stderr, "chkdump: %s\n", uly_last_error());
        return 2;
    }
    uly_attn_desc a = {.batch = 1, .seq = atoll(argv[4]), .heads = atoll(argv[5]), .kv_heads = atoll(argv[6]),
                       .head_dim = atoll(argv[7]), .causal = has(argc, argv, "causal"), .dtype = ULY_F64};
    const int bwd = has(argc, argv, "bwd"), lse = has(argc, argv, "lse"), tokens = has(argc, argv, "tokens");
    const int npy = has(argc, argv, "npy"), thd = has(argc, argv, "thd");
    const int layout = has(argc, argv, "bhsd") ? ULY_TL_BHSD : thd ? ULY_TL_THD : ULY_TL_BSHD;
    int64_t cu[64];
    int ncu = 0;
    for (int i = 8; i < argc; i++)
        if (strncmp(argv[i], "docs=", 5) == 0) {
            cu[ncu++] = 0;
            for (char *t = argv[i] + 5; *t && ncu < 63; t++) {
                cu[ncu] = cu[ncu - 1] + strtoll(t, &t, 10);
                ncu++;
                if (!*t)
                    break;
            }
        }
    if (ncu) {
        a.doc_offsets = cu;
        a.docs = ncu - 1;
    }
    const int zero_o = opt(argc, argv, "zero-o", -1), dkr = opt(argc, argv, "dk", -1);
    const int kshape = opt(argc, argv, "kshape", -1), skip = opt(argc, argv, "skip", -1);
    int elem = ULY_ELEM_F64;
    for (int i = 8; i < argc; i++)
        if (strncmp(argv[i], "elem=", 5) == 0 && uly_elem_parse(argv[i] + 5, &elem))
            return 2;
    uly_sp_plan plan;
    uly_layout L;
    if (uly_sp_plan_init(&plan, method, P, method == ULY_METHOD_USP ? uly_plan_usp_degree(a.heads, P) : 0,
                         ULY_PLACE_ULYSSES_INNER) || uly_layout_init(&L, &a, &plan)) {
        fprintf(stderr, "chkdump: %s\n", uly_last_error());
        return 2;
    }
    tu_problem in;
    tu_problem_init(&in, &a, 7);
    if (elem != ULY_ELEM_F64) { /* the inputs as the file holds them */
        void *tmp = malloc(in.nq * 8);
        double *xs[4] = {in.q, in.k, in.v, in.dout};
        size_t ns[4] = {in.nq, in.nkv, in.nkv, in.nq};
        for (int i = 0; i < 4; i++) {
            uly_elem_from_f64(elem, xs[i], ns[i], tmp);
            uly_elem_to_f64(elem, tmp, ns[i], xs[i]);
        }
        free(tmp);
    }
    double *o = malloc(in.nq * sizeof *o), *l = malloc(in.nlse * sizeof *l);
    double *dq = malloc(in.nq * sizeof *o), *dk = malloc(in.nkv * sizeof *o), *dv = malloc(in.nkv * sizeof *o);
    uly_ref_fwd(&a, in.q, in.k, in.v, o, l);
    uly_ref_bwd(&a, in.q, in.k, in.v, in.dout, dq, dk, dv);
    const int64_t N = a.seq, H = a.heads, Hkv = a.kv_heads, d = a.head_dim;
    mkdir(dir, 0755);
    for (int r = 0; r < P; r++) {
        if (r == skip)
            continue;
        uly_rank_part part;
        uly_layout_part(&L, r, &part);
        int64_t tok[4096], n = 0;
        for (int s = 0; s < part.nseg; s++)
            for (int64_t i = 0; i < part.tok_count[s]; i++)
                tok[n++] = part.tok_begin[s] + i;
        if (has(argc, argv, "dup") && r == 1)
            tok[0] = 0;
        if (has(argc, argv, "miss") && r == P - 1) /* its first token on no rank */
            memmove(tok, tok + 1, (size_t)(--n) * sizeof *tok);
        uly_twrite t[12];
        int64_t sh[12][4];
        double *data[12] = {0};
        int nt = 0;
        const char *nm[9] = {"q", "k", "v", "o", "do", "dq", "dk", "dv", "lse"};
        const double *g[8] = {in.q, in.k, in.v, o, in.dout, dq, dk, dv};
        for (int i = 0; i < 8; i++) {
            if (i >= 4 && !bwd)
                break;
            int64_t Hx = (i == 1 || i == 2 || i >= 6) ? Hkv : H;
            if (i == 1 && r == kshape) {
                /* one KV head more: the global tensor widened by a copy of head 0 */
                double *w = malloc((size_t)(N * (Hkv + 1) * d) * sizeof *w);
                for (int64_t j = 0; j < N; j++) {
                    memcpy(w + j * (Hkv + 1) * d, in.k + j * Hkv * d, (size_t)(Hkv * d) * sizeof *w);
                    memcpy(w + (j * (Hkv + 1) + Hkv) * d, in.k + j * Hkv * d, (size_t)d * sizeof *w);
                }
                data[nt] = shard(w, 1, N, Hkv + 1, d, tok, n, layout);
                free(w);
                Hx = Hkv + 1;
            } else
                data[nt] = shard(g[i], 1, N, Hx, d, tok, n, layout);
            if (i == 3 && r == zero_o)
                memset(data[nt], 0, (size_t)(n * H * d) * sizeof(double));
            if (i == 6 && r == dkr)
                for (int64_t e = 0; e < n * Hx * d; e++)
                    data[nt][e] *= 1.5;
            sh[nt][0] = 1;
            sh[nt][1] = layout == ULY_TL_BHSD ? Hx : n;
            sh[nt][2] = layout == ULY_TL_BHSD ? n : Hx;
            sh[nt][3] = d;
            t[nt] = (uly_twrite){.name = nm[i], .elem = elem, .src = ULY_ELEM_F64, .ndim = thd ? 3 : 4,
                                 .shape = thd ? sh[nt] + 1 : sh[nt], .data = data[nt]};
            nt++;
        }
        if (lse) {
            data[nt] = malloc((size_t)(H * n + 1) * sizeof(double));
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = 0; i < n; i++)
                    data[nt][h * n + i] = l[h * N + tok[i]];
            sh[nt][0] = 1;
            sh[nt][1] = H;
            sh[nt][2] = n;
            t[nt] = (uly_twrite){.name = "lse", .elem = elem == ULY_ELEM_F64 ? elem : ULY_ELEM_F32, .src = ULY_ELEM_F64,
                                 .ndim = thd ? 2 : 3, .shape = thd ? sh[nt] + 1 : sh[nt], .data = data[nt]};
            nt++;
        }
        if (tokens) {
            sh[nt][0] = n;
            t[nt] = (uly_twrite){.name = "tokens", .elem = ULY_ELEM_I64, .src = ULY_ELEM_I64, .ndim = 1,
                                 .shape = sh[nt], .data = tok};
            nt++;
        }
        if (ncu && r == 0) {
            sh[nt][0] = ncu;
            t[nt] = (uly_twrite){.name = "cu_seqlens", .elem = ULY_ELEM_I32, .src = ULY_ELEM_I64, .ndim = 1,
                                 .shape = sh[nt], .data = cu};
            nt++;
        }
        char path[4096];
        int rc = 0;
        if (npy) {
            snprintf(path, sizeof path, "%s/rank%d", dir, r);
            mkdir(path, 0755);
            for (int i = 0; i < nt && !rc; i++) {
                snprintf(path, sizeof path, "%s/rank%d/%s.npy", dir, r, t[i].name);
                if (t[i].src == ULY_ELEM_I64) {
                    double *x = malloc((size_t)(n + 1) * sizeof *x);
                    for (int64_t j = 0; j < n; j++)
                        x[j] = (double)tok[j];
                    rc = uly_npy_write_as(path, ULY_ELEM_I64, ULY_F64, 1, t[i].shape, x);
                    free(x);
                } else
                    rc = uly_npy_write_as(path, t[i].elem, ULY_F64, t[i].ndim, t[i].shape, t[i].data);
            }
        } else {
            snprintf(path, sizeof path, "%s/rank%d.safetensors", dir, r);
            rc = uly_safetensors_write(path, nt, t, 0, NULL, NULL);
        }
        for (int i = 0; i < nt; i++)
            free(data[i]);
        if (rc) {
            fprintf(stderr, "chkdump: %s\n", uly_last_error());
            return 1;
        }
    }
    free(o);
    free(l);
    free(dq);
    free(dk);
    free(dv);
    tu_problem_free(&in);
    return 0;
}
