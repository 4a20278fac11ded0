/* SPDX-License-Identifier: Apache-2.0 */
/* test_train.c -- run a few training steps of a tiny GPT on a DP x SP grid
 * and print, from rank 0, every step's loss as a hexadecimal float and a
 * checksum of every parameter after the last step.  tests/test_train.sh
 * runs it on several grids and requires identical output (bitwise
 * invariance), and checks resume, all-ignored shards and the fast mode.
 *
 * usage: test_train DP SP BATCH N V L C H HKV STEPS MODE
 *   MODE: exact | fast | resume (steps/2, checkpoint, new trainer, rest)
 *         | ignored (the first half of every row has no loss) | none (no loss)
 *         | docs (every row packed with 3 documents, one of them possibly empty)
 *         | packcmp (row 0 packs documents A and B; rows 1 and 2 hold A and B alone,
 *           padded: the per-token losses must agree to fp32 rounding)
 *         | gradcheck (gradients of the whole model against finite differences
 *           of the loss, a sample of elements of every parameter tensor)
 *
 * TEST_TRAIN_TILE=loss | mlp:K | both:K trains with the tiled loss, the
 * tiled MLP in K shards, or both (tests/test_train.sh requires the output of
 * the untiled run: bitwise the same losses and parameters).
 *
 * Every run first checks, in both reduction modes and in the exact mode
 * with each tiling (loss, MLP in 2 shards, both with 3, MLP in more shards
 * than segments), that the heap bytes uly_train_create asks the allocation
 * hooks for on each rank are exactly the ULY_BUF_HEAP entries of
 * uly_train_memory_table, and that uly_train_memory is that table's total
 * (TEST_TRAIN_MEMORY=1: rank 0 prints its table and the count); and that
 * the heap peak measured by uly_heap_usage over the create is those bytes
 * plus at most the allocator's rounding (below), and a training step
 * raises it by at most the document offsets it allocates.
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

/* The library's count of bytes asked of its allocation hooks since the
 * previous call (exported for tests, not in the public header). */
uint64_t uly_test_alloc_bytes(void);

long uly_test_alloc_count(void);
void uly_test_fail_alloc_at(long k);

/* What glibc adds to a block (malloc_usable_size - the bytes asked for):
 * below 24 bytes from its heap (16-byte granules, 8 bytes of header), below
 * a 4 KiB page for a block it maps; 4096 + 16 bounds both. */
#define ROUNDING 4112u

/* One step of the model on seeded tokens (all labelled but token 0 of a row). */
static int one_step(uly_train *T, const uly_gpt_config *c, const int64_t *docs, int64_t ndocs)
{
    int64_t rb, rows, tb, toks;
    uly_train_shard(T, &rb, &rows, &tb, &toks);
    size_t n = (size_t)(rows * toks) + 1;
    int32_t *tok = malloc(n * sizeof *tok), *tgt = malloc(n * sizeof *tgt), *pos = malloc(n * sizeof *pos);
    for (int64_t i = 0; i < rows * toks; i++) {
        tok[i] = (int32_t)(mix((uint64_t)i) % (uint64_t)c->vocab);
        tgt[i] = (int32_t)(mix((uint64_t)i + 99) % (uint64_t)c->vocab);
        pos[i] = (int32_t)(tb + i % toks);
    }
    uly_train_stats st;
    int rc = uly_train_step(T, tok, tgt, pos, docs, ndocs, 1, &st);
    free(tok);
    free(tgt);
    free(pos);
    return rc;
}

/* Preflight == allocated, for the exact and the fast reduction, and the
 * exact one with every tiling. */
static void check_memory(const uly_gpt_config *c, const uly_train_opts *o0, int rank, int size)
{
    /* fast, tiled loss, tiled MLP shards (0: untiled; 1000: more than any rank's segments) */
    static const int variants[6][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, 0, 2}, {0, 1, 3}, {0, 0, 1000}};
    for (int vi = 0; vi < 6; vi++) {
        const int fast = variants[vi][0];
        uly_train_opts o = *o0;
        o.fast = fast;
        o.tiled_loss = variants[vi][1];
        o.tiled_mlp = variants[vi][2] > c->seq ? (int)c->seq : variants[vi][2];
        uly_bufs t = {0};
        uint64_t total = 0;
        if (uly_train_memory_table(c, &o, rank, size, &t) || uly_train_memory(c, &o, rank, size, &total))
            fail("uly_train_memory_table");
        const uint64_t want = uly_bufs_sum(&t, ULY_BUF_HEAP);
        uly_train *T;
        uint64_t live0 = 0, peak = 0, live1 = 0;
        const int measured = uly_heap_usage(&live0, NULL) == ULY_OK;
        uly_heap_reset_peak();
        (void)uly_test_alloc_bytes(); /* reset the counts */
        uly_test_fail_alloc_at(0);
        if (uly_train_create(MPI_COMM_WORLD, c, &o, &T))
            fail("create (memory check)");
        const uint64_t got = uly_test_alloc_bytes();
        const long nalloc = uly_test_alloc_count();
        uly_heap_usage(&live1, &peak);
        const char *note = uly_train_a2a_note(T);
        char what[64];
        snprintf(what, sizeof what, "%s%s%s", fast ? "fast" : "exact", o.tiled_loss ? ", tiled loss" : "",
                 o.tiled_mlp ? ", tiled MLP" : "");
        int bad = total != t.total ? 2 : !note && got != want, any = 0, noted = note != NULL, anynote = 0;
        if (bad)
            fprintf(stderr, "test_train: rank %d (dp %d x sp %d, %s): create asked the hooks for %llu heap bytes, "
                    "the table lists %llu (total %llu, uly_train_memory %llu)\n", rank, o.dp, o.sp,
                    what, (unsigned long long)got, (unsigned long long)want,
                    (unsigned long long)t.total, (unsigned long long)total);
        /* the measured peak: at most what was asked for plus the rounding of each block; at least
         * that less the cross-memory probe table (2 x size int64), which the create frees */
        if (!bad && measured && !note &&
            (peak - live0 + 16 * (uint64_t)size < want || peak - live0 > want + (uint64_t)nalloc * ROUNDING)) {
            fprintf(stderr, "test_train: rank %d (dp %d x sp %d, %s): heap peak over the create %llu bytes, the "
                    "table %llu (+ at most %ld x %u rounding), live after it %llu\n", rank, o.dp, o.sp, what,
                    (unsigned long long)(peak - live0), (unsigned long long)want, nalloc, ROUNDING,
                    (unsigned long long)(live1 - live0));
            bad = 3;
        }
        if (!bad && measured) {
            /* a step (no documents) holds nothing more afterwards, and its peak is the
             * kernel workspace (the table's transient entry) on top, within one block's rounding */
            const uint64_t ws = uly_bufs_sum(&t, ULY_BUF_TRANSIENT);
            uly_heap_reset_peak();
            if (one_step(T, c, NULL, 0))
                fail("step (memory check)");
            uint64_t live2, peak2;
            uly_heap_usage(&live2, &peak2);
            if (live2 != live1 || peak2 - live1 < ws || peak2 - live1 > ws + ROUNDING) {
                fprintf(stderr, "test_train: rank %d (%s): a step took the heap from %llu to a peak of %llu bytes "
                        "and left %llu; the kernel workspace is %llu\n", rank, what, (unsigned long long)live1,
                        (unsigned long long)peak2, (unsigned long long)live2, (unsigned long long)ws);
                bad = 4;
            }
        }
        if (rank == 0 && getenv("TEST_TRAIN_MEMORY")) {
            printf("memory dp %d x sp %d %s rank 0: %d entries\n", o.dp, o.sp, what, t.n);
            for (int i = 0; i < t.n; i++)
                printf("  %-36s %12llu %s\n", t.b[i].name, (unsigned long long)t.b[i].bytes,
                       t.b[i].where == ULY_BUF_HEAP ? "heap" : t.b[i].where == ULY_BUF_WINDOW ? "window" : "transient");
            printf("  heap: table %llu, counted during create %llu (%ld blocks, measured peak %llu); window %llu; "
                   "total %llu\n", (unsigned long long)want, (unsigned long long)got, nalloc,
                   (unsigned long long)(peak - live0), (unsigned long long)uly_bufs_sum(&t, ULY_BUF_WINDOW),
                   (unsigned long long)t.total);
        }
        uly_train_free(T);
        MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        MPI_Allreduce(&noted, &anynote, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (any) {
            if (rank == 0)
                fprintf(stderr, "test_train: preflight != allocated\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (anynote && rank == 0 && fast == 0) /* no window: the table assumes one */
            fprintf(stderr, "test_train: memory check skipped where the attention contexts made no shared-memory "
                    "window (%s)\n", note ? note : "another rank");
    }
}

/* Document offsets of every row of step `step` (batch, 4): 3 documents. */
static void make_docs(int64_t batch, int64_t N, int64_t step, int64_t *off)
{
    for (int64_t g = 0; g < batch; g++) {
        int64_t *r = off + g * 4, a = (int64_t)(mix((uint64_t)(step * 31 + g)) % (uint64_t)(N + 1)),
                b = (int64_t)(mix((uint64_t)(step * 37 + g + 1000)) % (uint64_t)(N + 1));
        r[0] = 0;
        r[1] = a < b ? a : b;
        r[2] = a < b ? b : a;
        r[3] = N;
    }
}

/* The shard of one step: row g of step s is a seeded random sequence. */
static void make_batch(uly_train *T, int64_t N, int64_t V, int64_t step, const char *mode, const int64_t *docs,
                       int32_t *tok, int32_t *tgt, int32_t *pos)
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
        const int64_t *d = docs ? docs + (rb + b) * 4 : NULL;
        uly_shard_labels(row, nl, N, d, docs ? 3 : 0, tb, toks, tok + b * toks, tgt + b * toks, pos + b * toks);
    }
    free(row);
    free(nl);
}

/* packcmp: rows 0 = [A | B], 1 = [A | pad], 2 = [B | pad] with 2 documents per row. */
static int pack_compare(uly_train *T, int64_t N, int64_t V, int rank)
{
    int64_t rb, rows, tb, toks;
    uly_train_shard(T, &rb, &rows, &tb, &toks);
    const int64_t la = N / 3 + 1, lb = N - la;
    int64_t off[3 * 3] = {0, la, N, 0, la, N, 0, lb, N};
    int32_t *grow = malloc((size_t)(3 * (N + 1)) * sizeof *grow);
    uint8_t *nl = calloc((size_t)(3 * N), 1);
    for (int64_t i = 0; i <= N; i++) /* packed */
        grow[i] = (int32_t)(1 + mix((uint64_t)i * 77) % (uint64_t)(V - 1));
    for (int64_t i = 0; i <= N; i++) {
        grow[(N + 1) + i] = i < la ? grow[i] : 0;          /* A, then padding */
        grow[2 * (N + 1) + i] = i < lb ? grow[la + i] : 0; /* B, then padding */
    }
    for (int64_t i = 0; i < N; i++) { /* padding has no loss */
        nl[N + i] = i >= la;
        nl[2 * N + i] = i >= lb;
    }
    size_t n = (size_t)(rows * toks);
    int32_t *tok = malloc(n * sizeof *tok), *tgt = malloc(n * sizeof *tgt), *pos = malloc(n * sizeof *pos);
    for (int64_t b = 0; b < rows; b++) {
        int64_t g = rb + b;
        uly_shard_labels(grow + g * (N + 1), nl + g * N, N, off + g * 3, 2, tb, toks, tok + b * toks,
                         tgt + b * toks, pos + b * toks);
    }
    uly_train_stats st;
    if (uly_train_step(T, tok, tgt, pos, off, 2, 0, &st))
        return fail("step");
    double *L = malloc((size_t)(3 * N) * sizeof *L);
    if (uly_train_token_losses(T, L))
        return fail("token losses");
    double worst = 0;
    int bad = 0, labelled = 0;
    for (int64_t i = 0; i < N; i++) {
        double ref = i < la ? L[N + i] : L[2 * N + (i - la)], got = L[i];
        double err = fabs(got - ref);
        labelled += got != 0;
        if (!(err <= 1e-5 + 1e-5 * fabs(ref)))
            bad++;
        if (getenv("TEST_TRAIN_VERBOSE") && rank == 0)
            printf("  token %lld: packed %.9g alone %.9g\n", (long long)i, got, ref);
        if (err > worst)
            worst = err;
    }
    if (rank == 0)
        printf("packcmp: %d labelled tokens, %d outside tolerance, largest difference %.3g\n", labelled, bad, worst);
    free(L);
    free(grow);
    free(nl);
    free(tok);
    free(tgt);
    free(pos);
    return bad || labelled < N - 3;
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
    uly_gpt_config c = {.vocab = atoll(argv[5]), .seq = atoll(argv[4]), .layers = atoll(argv[6]),
                        .channels = atoll(argv[7]), .heads = atoll(argv[8]), .kv_heads = atoll(argv[9])};
    int steps = atoi(argv[10]);
    const char *mode = argv[11];
    o.fast = strcmp(mode, "fast") == 0;
    o.lr = 1e-2;
    o.seed = 7;
    const char *tile = getenv("TEST_TRAIN_TILE");
    if (tile && *tile) {
        o.tiled_loss = strncmp(tile, "loss", 4) == 0 || strncmp(tile, "both", 4) == 0;
        o.tiled_mlp = strncmp(tile, "mlp:", 4) == 0 || strncmp(tile, "both:", 5) == 0 ? atoi(strchr(tile, ':') + 1) : 0;
        if (!o.tiled_loss && !o.tiled_mlp) {
            if (rank == 0)
                fprintf(stderr, "test_train: TEST_TRAIN_TILE=%s: want loss, mlp:K or both:K\n", tile);
            MPI_Finalize();
            return 2;
        }
    }
    {
        int size;
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        check_memory(&c, &o, rank, size);
    }
    {   /* tilings the library refuses by name: with the fast mode, K > seq, a flag not 0/1 */
        int size;
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        uly_train_opts b = o;
        uint64_t m;
        b.fast = 1;
        b.tiled_loss = 1;
        if (uly_train_memory(&c, &b, rank, size, &m) != ULY_EINVAL || !strstr(uly_last_error(), "exact mode only"))
            return fail("tiled loss with the fast mode was accepted");
        b = o;
        b.tiled_mlp = (int)c.seq + 1;
        if (uly_train_memory(&c, &b, rank, size, &m) != ULY_EINVAL || !strstr(uly_last_error(), "shards for rows"))
            return fail("more MLP shards than tokens were accepted");
        b = o;
        b.tiled_loss = 2;
        if (uly_train_memory(&c, &b, rank, size, &m) != ULY_EINVAL)
            return fail("tiled_loss 2 was accepted");
    }
    uly_train *T;
    if (uly_train_create(MPI_COMM_WORLD, &c, &o, &T))
        return fail("create");
    {   /* what a tiling does not keep is refused, the rest is there */
        const float *p;
        int64_t w;
        if ((uly_train_activation(T, "logits", 0, &p, &w) == ULY_OK) == (o.tiled_loss != 0) ||
            (uly_train_activation(T, "fch", 0, &p, &w) == ULY_OK) == (uly_train_mlp_shards(T) > 0) ||
            uly_train_activation(T, "ln2", 0, &p, &w) != ULY_OK)
            return fail("activations of a tiled run");
    }
    int64_t rb, rows, tb, toks;
    uly_train_shard(T, &rb, &rows, &tb, &toks);
    {   /* the memory estimate covers at least the 4 parameter-sized vectors and the activations'
           logits and refuses nonsense */
        int size;
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        uint64_t mem = 0, bad_mem = 0;
        const uint64_t floor = 16 * (uint64_t)uly_train_nparams(T) +
                               (o.tiled_loss ? 0 : 8 * (uint64_t)(rows * toks * c.vocab));
        if (uly_train_memory(&c, &o, rank, size, &mem) || mem < floor || mem > 64 * floor)
            return fail("uly_train_memory out of its bounds");
        if (uly_train_memory(&c, &o, size, size, &bad_mem) != ULY_EINVAL)
            return fail("uly_train_memory accepted a rank out of range");
    }
    size_t n = (size_t)(rows * toks);
    int32_t *tok = malloc((n + 1) * sizeof *tok), *tgt = malloc((n + 1) * sizeof *tgt),
            *pos = malloc((n + 1) * sizeof *pos);
    int64_t *docs = strcmp(mode, "docs") == 0 ? malloc((size_t)o.batch * 4 * sizeof *docs) : NULL;
    if (strcmp(mode, "packcmp") == 0) {
        int bad = pack_compare(T, c.seq, c.vocab, rank);
        free(tok);
        free(tgt);
        free(pos);
        uly_train_free(T);
        MPI_Finalize();
        return bad;
    }
    if (strcmp(mode, "gradcheck") == 0) {
        /* fp32 model, fp64 loss: a large step h and a loose tolerance still
         * catch any wrong or missing term (they are O(1) wrong) */
        int64_t *gd = getenv("TEST_TRAIN_DOCS") ? malloc((size_t)o.batch * 4 * sizeof *gd) : NULL;
        if (gd)
            make_docs(o.batch, c.seq, 0, gd);
        make_batch(T, c.seq, c.vocab, 0, mode, gd, tok, tgt, pos);
        uly_train_stats st;
        if (uly_train_step(T, tok, tgt, pos, gd, gd ? 3 : 0, 0, &st))
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
                    if (uly_train_step(T, tok, tgt, pos, gd, gd ? 3 : 0, 0, &st))
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
        free(gd);
        free(tok);
        free(tgt);
        free(pos);
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
            if (uly_train_create(MPI_COMM_WORLD, &c, &o, &T))
                return fail("create after checkpoint");
            /* the checkpoint, not the initialisation, must decide the parameters */
            memset(uly_train_params(T), 0, (size_t)uly_train_nparams(T) * sizeof(float));
            ((unsigned char *)img)[len - 20] ^= 1; /* a damaged image is refused */
            if (uly_train_checkpoint_read(T, img, len) != ULY_EFORMAT)
                return fail("damaged checkpoint was accepted");
            ((unsigned char *)img)[len - 20] ^= 1;
            if (uly_train_checkpoint_read(T, img, len))
                return fail("restore");
            free(img);
        }
        if (docs)
            make_docs(o.batch, c.seq, s, docs);
        make_batch(T, c.seq, c.vocab, s, mode, docs, tok, tgt, pos);
        uly_train_stats st;
        if (uly_train_step(T, tok, tgt, pos, docs, docs ? 3 : 0, 1, &st))
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
    free(docs);
    uly_train_free(T);
    MPI_Finalize();
    return 0;
}
