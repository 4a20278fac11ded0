/* test_train.c -- run a few training steps of a tiny GPT on a DP x SP grid
 * and print, from rank 0, every step's loss as a hexadecimal float and a
 * checksum of every parameter after the last step.  tests/test_train.sh
 * runs it on several grids and requires identical output (bitwise
 * invariance), and checks resume, all-ignored shards and the fast mode.
 *
 * usage: test_train DP SP BATCH N V L C H HKV STEPS MODE
 *   MODE: exact | fast | resume (steps/2, checkpoint, new trainer, rest)
 *         | ignored (the first half of every row has no loss) | none (no loss)
 *         | gradcheck (gradients of the whole model against finite differences
 *           of the loss, a sample of elements of every parameter tensor)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "ulysses_train.h"

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t fnv(const void *p, size_t n)
{
    const unsigned char *c = p;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= c[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static int fail(const char *what)
{
    fprintf(stderr, "test_train: %s: %s\n", what, uly_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
}

/* The shard of one step: row g of step s is a seeded random sequence. */
static void make_batch(uly_train *T, int64_t N, int64_t V, int64_t step, const char *mode, int32_t *tok,
                       int32_t *tgt, int32_t *pos)
{
    int64_t rb, rows, tb, toks;
    uly_train_shard(T, &rb, &rows, &tb, &toks);
    int32_t *row = malloc((size_t)(N + 1) * sizeof *row);
    uint8_t *nl = calloc((size_t)N, 1);
    for (int64_t b = 0; b < rows; b++) {
        for (int64_t i = 0; i <= N; i++)
            row[i] = (int32_t)(mix((uint64_t)(step * 1000003 + (rb + b) * 7919 + i)) % (uint64_t)V);
        for (int64_t i = 0; i < N; i++)
            nl[i] = strcmp(mode, "none") == 0 || (strcmp(mode, "ignored") == 0 && i < N / 2) || row[i] == 0;
        uly_shard_labels(row, nl, N, NULL, 0, tb, toks, tok + b * toks, tgt + b * toks, pos + b * toks);
    }
    free(row);
    free(nl);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc != 12) {
        if (rank == 0)
            fprintf(stderr, "usage: test_train DP SP BATCH N V L C H HKV STEPS MODE\n");
        MPI_Finalize();
        return 2;
    }
    uly_train_opts o;
    uly_train_opts_default(&o);
    o.dp = atoi(argv[1]);
    o.sp = atoi(argv[2]);
    o.batch = atoll(argv[3]);
    uly_gpt_config c = {atoll(argv[5]), atoll(argv[4]), atoll(argv[6]), atoll(argv[7]), atoll(argv[8]),
                        atoll(argv[9])};
    int steps = atoi(argv[10]);
    const char *mode = argv[11];
    o.fast = strcmp(mode, "fast") == 0;
    o.lr = 1e-2;
    o.seed = 7;
    uly_train *T;
    if (uly_train_create(MPI_COMM_WORLD, &c, &o, &T))
        return fail("create");
    int64_t rb, rows, tb, toks;
    uly_train_shard(T, &rb, &rows, &tb, &toks);
    size_t n = (size_t)(rows * toks);
    int32_t *tok = malloc((n + 1) * sizeof *tok), *tgt = malloc((n + 1) * sizeof *tgt),
            *pos = malloc((n + 1) * sizeof *pos);
    if (strcmp(mode, "gradcheck") == 0) {
        /* fp32 model, fp64 loss: a large step h and a loose tolerance still
         * catch any wrong or missing term (they are O(1) wrong) */
        make_batch(T, c.seq, c.vocab, 0, mode, tok, tgt, pos);
        uly_train_stats st;
        if (uly_train_step(T, tok, tgt, pos, NULL, 0, 0, &st))
            return fail("step");
        int64_t np = uly_train_nparams(T);
        float *g = malloc((size_t)np * sizeof *g), *p = uly_train_params(T);
        memcpy(g, uly_train_grads(T), (size_t)np * sizeof *g);
        int bad = 0, checked = 0;
        for (int i = 0; i < uly_train_param_count(); i++) {
            const char *name;
            int nd;
            int64_t shape[3], off, cnt = 1;
            uly_train_param_info(T, i, &name, &nd, shape, &off);
            for (int j = 0; j < nd; j++)
                cnt *= shape[j];
            for (int k = 0; k < 6; k++) {
                int64_t e = off + (int64_t)(mix((uint64_t)(i * 31 + k)) % (uint64_t)cnt);
                const float h = 1e-2f, save = p[e];
                double l[2];
                for (int sgn = 0; sgn < 2; sgn++) {
                    p[e] = save + (sgn ? -h : h);
                    if (uly_train_step(T, tok, tgt, pos, NULL, 0, 0, &st))
                        return fail("step");
                    l[sgn] = st.loss;
                }
                p[e] = save;
                double num = (l[0] - l[1]) / (2.0 * h);
                checked++;
                if (!(fabs(num - g[e]) <= 2e-4 + 2e-2 * fabs(num))) {
                    bad++;
                    if (rank == 0)
                        printf("gradcheck %s[%lld]: backward %.6g finite difference %.6g\n", name,
                               (long long)(e - off), g[e], num);
                }
            }
        }
        if (rank == 0)
            printf("gradcheck: %d of %d elements off\n", bad, checked);
        free(g);
        uly_train_free(T);
        MPI_Finalize();
        return bad ? 1 : 0;
    }
    for (int s = 0; s < steps; s++) {
        if (strcmp(mode, "resume") == 0 && s == steps / 2) {
            /* checkpoint, throw the trainer away, restore into a new one */
            size_t len = uly_train_checkpoint_size(T);
            void *img = malloc(len);
            if (uly_train_checkpoint_write(T, img, len))
                return fail("checkpoint");
            uly_train_free(T);
            o.seed = 99; /* the checkpoint, not the seed, must decide the parameters */
            if (uly_train_create(MPI_COMM_WORLD, &c, &o, &T))
                return fail("create after checkpoint");
            ((unsigned char *)img)[len - 20] ^= 1; /* a damaged image is refused */
            if (uly_train_checkpoint_read(T, img, len) != ULY_EFORMAT)
                return fail("damaged checkpoint was accepted");
            ((unsigned char *)img)[len - 20] ^= 1;
            if (uly_train_checkpoint_read(T, img, len))
                return fail("restore");
            free(img);
        }
        make_batch(T, c.seq, c.vocab, s, mode, tok, tgt, pos);
        uly_train_stats st;
        if (uly_train_step(T, tok, tgt, pos, NULL, 0, 1, &st))
            return fail("step");
        if (!isfinite(st.loss) || !isfinite(st.grad_norm))
            return fail("non-finite loss or gradient norm");
        if (rank == 0)
            printf("step %d loss %a count %lld\n", s, st.loss, (long long)st.count);
    }
    float *p = uly_train_params(T);
    int64_t np = uly_train_nparams(T);
    for (int64_t i = 0; i < np; i++)
        if (!isfinite(p[i]))
            return fail("non-finite parameter");
    if (rank == 0) {
        printf("params %lld fnv %016llx\n", (long long)np, (unsigned long long)fnv(p, (size_t)np * sizeof *p));
        if (getenv("TEST_TRAIN_DUMP")) { /* raw parameters, for measuring the fast mode's deviation */
            FILE *f = fopen(getenv("TEST_TRAIN_DUMP"), "wb");
            if (f) {
                fwrite(p, sizeof *p, (size_t)np, f);
                fclose(f);
            }
        }
    }
    free(tok);
    free(tgt);
    free(pos);
    uly_train_free(T);
    MPI_Finalize();
    return 0;
}
