/* SPDX-License-Identifier: Apache-2.0 */
/*
 * datagen.c -- test helper: the per-rank dumps of a sequence-parallel data
 * pipeline for `ulysses check --data` (tests/cli_check_data.sh), correct or
 * with one planted defect.  The shard map is the plan layer's
 * (uly_layout_part), as a framework following the method would hold it.
 *
 *   datagen DIR METHOD P [--batch B] [--seq N] [--udeg U] [--doc-lens L1,L2,...]
 *           [--npy] [--i32] [--tokens] [--no-pos] [--no-loss] [--loss-elem f32|bf16|f16|f64]
 *           [--plant roll-labels|unshifted|local-positions|contiguous-positions|
 *                    mean-of-means|rank-mean|nan-loss|missing-token|dup-token]
 *
 * Token ids are distinct (3 + (b N + t) x 2654435761 mod 1000003), labels
 * the next token's id (ignore_index -100 at a document's end and the last
 * token), positions the position within the document, per-token losses in
 * (1, 2) and four times that on rank 0 (so that a mean of per-rank means
 * differs from the token-weighted mean), loss_reduced the token-weighted
 * mean over all ranks.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ulysses.h"

#define IGN (-100)

static int die(const char *m)
{
    fprintf(stderr, "datagen: %s\n", m);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return die("usage: datagen DIR METHOD P [options] (see the file's comment)");
    const char *dir = argv[1], *plant = "", *doc_lens = NULL, *loss_elem_s = "f32";
    int method, P = atoi(argv[3]), U = 0, npy = 0, i32 = 0, want_tokens = 0, no_pos = 0, no_loss = 0;
    int64_t B = 1, N = 256;
    if (uly_method_parse(argv[2], &method))
        return die("unknown method");
    for (int i = 4; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--batch")) B = atoll(v), i++;
        else if (!strcmp(a, "--seq")) N = atoll(v), i++;
        else if (!strcmp(a, "--udeg")) U = atoi(v), i++;
        else if (!strcmp(a, "--doc-lens")) doc_lens = v, i++;
        else if (!strcmp(a, "--plant")) plant = v, i++;
        else if (!strcmp(a, "--loss-elem")) loss_elem_s = v, i++;
        else if (!strcmp(a, "--npy")) npy = 1;
        else if (!strcmp(a, "--i32")) i32 = 1;
        else if (!strcmp(a, "--tokens")) want_tokens = 1;
        else if (!strcmp(a, "--no-pos")) no_pos = 1;
        else if (!strcmp(a, "--no-loss")) no_loss = 1;
        else return die("unknown option");
    }
    int loss_elem;
    if (uly_elem_parse(loss_elem_s, &loss_elem))
        return die("unknown --loss-elem");
    if ((!strcmp(plant, "missing-token") || !strcmp(plant, "dup-token")) && !want_tokens)
        return die("--plant missing-token and dup-token need --tokens");
    /* document starts per token (every row alike) */
    int64_t *dstart = malloc((size_t)N * sizeof *dstart);
    if (!dstart)
        return die("out of memory");
    int64_t start = 0, end = N;
    const char *c = doc_lens;
    for (int64_t t = 0; t < N; t++) {
        if (t == 0 || t >= end) { /* the next document: its length from the list (the rest of N when none) */
            start = t;
            end = N;
            if (c && *c) {
                end = t + strtoll(c, (char **)&c, 10);
                if (*c == ',')
                    c++;
            }
            while (end == t && c && *c) { /* empty documents */
                end = t + strtoll(c, (char **)&c, 10);
                if (*c == ',')
                    c++;
            }
        }
        dstart[t] = start;
    }
    uly_attn_desc a = {.batch = B, .seq = N, .heads = P, .kv_heads = P, .head_dim = 1};
    uly_sp_plan plan;
    uly_layout L;
    if (uly_sp_plan_init(&plan, method, P, U, ULY_PLACE_ULYSSES_INNER) || uly_layout_init(&L, &a, &plan))
        return die(uly_last_error());
    /* global arrays (B, N) */
    int64_t *ids = malloc((size_t)(B * N) * sizeof *ids), *lab = malloc((size_t)(B * N) * sizeof *lab);
    int *owner = malloc((size_t)N * sizeof *owner);
    if (!ids || !lab || !owner)
        return die("out of memory");
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < N; t++)
            ids[b * N + t] = 3 + (int64_t)(((uint64_t)(b * N + t) * 2654435761u) % 1000003u);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < N; t++)
            lab[b * N + t] = t == N - 1 || dstart[t + 1] == t + 1 ? IGN : ids[b * N + t + 1];
    int64_t **rt = calloc((size_t)P, sizeof *rt), *rn = calloc((size_t)P, sizeof *rn);
    if (!rt || !rn)
        return die("out of memory");
    for (int r = 0; r < P; r++) {
        uly_rank_part part;
        uly_layout_part(&L, r, &part);
        rt[r] = malloc((size_t)(part.tokens + 2) * sizeof **rt);
        if (!rt[r])
            return die("out of memory");
        for (int s = 0; s < part.nseg; s++)
            for (int64_t k = 0; k < part.tok_count[s]; k++) {
                rt[r][rn[r]++] = part.tok_begin[s] + k;
                owner[part.tok_begin[s] + k] = r;
            }
    }
    if (!strcmp(plant, "missing-token") && P > 1 && rn[1] > 0) { /* drop rank 1's middle row */
        int64_t m = rn[1] / 2;
        memmove(rt[1] + m, rt[1] + m + 1, (size_t)(rn[1] - m - 1) * sizeof **rt);
        rn[1]--;
    }
    if (!strcmp(plant, "dup-token") && P > 1) /* rank 1 also holds rank 0's first token */
        rt[1][rn[1]++] = rt[0][0];
    /* the loss each token contributes, and the reductions */
    double sum = 0, mom = 0;
    int64_t cnt = 0;
    double *rmean = calloc((size_t)P, sizeof *rmean);
    for (int r = 0; r < P; r++) {
        double s = 0;
        int64_t n = 0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < rn[r]; i++) {
                int64_t t = rt[r][i];
                if (lab[b * N + t] == IGN)
                    continue;
                double l = (1 + (double)(((uint64_t)(b * N + t) * 7919u) % 1000u) / 1000.0) * (owner[t] == 0 ? 4 : 1);
                double q;
                uly_elem_from_f64(loss_elem, &l, 1, &q); /* the stored value: what the framework summed */
                uly_elem_to_f64(loss_elem, &q, 1, &l);
                s += l;
                n++;
            }
        sum += s;
        cnt += n;
        rmean[r] = n ? s / (double)n : 0;
        mom += rmean[r] / P;
    }
    const double weighted = sum / (double)cnt;
    mkdir(dir, 0755);
    for (int r = 0; r < P; r++) {
        const int64_t n = rn[r];
        double *v[6];
        for (int k = 0; k < 6; k++) {
            v[k] = calloc((size_t)(B * n + 1), sizeof **v);
            if (!v[k])
                return die("out of memory");
        }
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < n; i++) {
                const int64_t t = rt[r][i], e = b * n + i;
                v[0][e] = (double)ids[b * N + t];
                v[1][e] = (double)lab[b * N + t];
                v[2][e] = (double)(t - dstart[t]);
                double l = lab[b * N + t] == IGN ? 0
                           : (1 + (double)(((uint64_t)(b * N + t) * 7919u) % 1000u) / 1000.0) * (owner[t] == 0 ? 4 : 1);
                v[3][e] = l;
                if (b == 0)
                    v[5][i] = (double)t;
            }
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < n; i++) {
                const int64_t e = b * n + i, t = rt[r][i];
                if (!strcmp(plant, "roll-labels") && lab[b * N + t] != IGN)
                    v[1][e] = v[0][b * n + (i + 1) % n];         /* torch.roll on the local shard */
                if (!strcmp(plant, "unshifted"))
                    v[1][e] = v[0][e];
                if (!strcmp(plant, "local-positions")) {
                    static int64_t run;
                    if (i == 0 || dstart[t] == t)
                        run = 0;
                    v[2][e] = (double)run++;
                }
                if (!strcmp(plant, "contiguous-positions")) {
                    int64_t cb, cc;
                    uly_split(N, P, r, &cb, &cc);
                    v[2][e] = (double)(cb + i - dstart[cb + i]);
                }
            }
        if (!strcmp(plant, "nan-loss") && r == P - 1 && n > 1)
            v[3][0] = lab[rt[r][0]] == IGN ? v[3][0] : NAN;
        double red = weighted;
        if (!strcmp(plant, "mean-of-means"))
            red = mom;
        if (!strcmp(plant, "rank-mean"))
            red = rmean[r];
        v[4][0] = red;
        const int64_t sh2[2] = {B, n}, sh1[1] = {n}, sh0[1] = {1};
        const int ie = i32 ? ULY_ELEM_I32 : ULY_ELEM_I64;
        const char *names[6] = {"input_ids", "labels", "position_ids", "loss", "loss_reduced", "tokens"};
        const int elem[6] = {ie, ie, ie, loss_elem, loss_elem, ULY_ELEM_I64};
        const int ndim[6] = {2, 2, 2, 2, 0, 1};
        const int64_t *shp[6] = {sh2, sh2, sh2, sh2, sh0, sh1};
        int use[6] = {1, 1, !no_pos, !no_loss, !no_loss, want_tokens};
        char path[4096];
        if (npy) {
            snprintf(path, sizeof path, "%s/rank%d", dir, r);
            mkdir(path, 0755);
            for (int k = 0; k < 6; k++) {
                if (!use[k])
                    continue;
                snprintf(path, sizeof path, "%s/rank%d/%s.npy", dir, r, names[k]);
                if (uly_npy_write_as(path, elem[k], ULY_F64, ndim[k] ? ndim[k] : 1, shp[k], v[k]))
                    return die(uly_last_error());
            }
        } else {
            uly_twrite tw[6];
            int nt = 0;
            for (int k = 0; k < 6; k++)
                if (use[k])
                    tw[nt++] = (uly_twrite){.name = names[k], .elem = elem[k], .src = ULY_ELEM_F64,
                                            .ndim = ndim[k], .shape = shp[k], .data = v[k]};
            snprintf(path, sizeof path, "%s/rank%d.safetensors", dir, r);
            const char *keys[1] = {"format"}, *vals[1] = {"pt"};
            if (uly_safetensors_write(path, nt, tw, 1, keys, vals))
                return die(uly_last_error());
        }
        for (int k = 0; k < 6; k++)
            free(v[k]);
    }
    for (int r = 0; r < P; r++)
        free(rt[r]);
    free(rt);
    free(rn);
    free(rmean);
    free(ids);
    free(lab);
    free(owner);
    free(dstart);
    return 0;
}
