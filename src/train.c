/* SPDX-License-Identifier: Apache-2.0 */
/*
 * train.c -- a GPT-2 model trained with DeepSpeed-Ulysses sequence
 * parallelism over a DP x SP grid of ranks (ulysses_train.h).  Layers come
 * from model.c, attention from dist.c (one context per layer, so that each
 * layer's backward has its forward state), collectives from comm.c.
 *
 * Partition independence (doc/train.md).  Work on tokens is cut into
 * segments; every GEMM and every sum over tokens runs per segment.  In exact
 * mode a segment is (row, chunk) where the chunks of a row are the pieces
 * between the shard boundaries of every SP degree 1..canon_sp: each chunk
 * lies inside one shard whatever the SP degree, so the same chunk is always
 * computed by the same code on the same tokens.  Each segment writes its own
 * partial parameter gradient; the partials of the global batch are then
 * added in (row, chunk) order, in double, by the rank that owns each slice
 * of the parameter vector (an all-to-all brings it the partials), and the
 * slices are all-gathered.  The loss is a sum of the per-token losses in
 * (row, token) order.  Fast mode: one segment per rank and MPI_Allreduce.
 *
 * Memory-lean training (exact mode): the tiled loss runs the LM head, the
 * cross-entropy and the LM head's backward one segment at a time (a tile
 * of one segment's logits); the tiled MLP runs each layer's MLP in shards
 * of whole segments and recomputes a shard's hidden in the backward.  Each
 * segment's GEMMs and sums stay what they were, so the bits do too.
 *
 * What this file is not: data, files and printing (src/cli/cmd_train.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "internal.h"
#include "ulysses_dist.h"
#include "ulysses_train.h"

enum { P_WTE, P_WPE, P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_ATTW, P_ATTB, P_LN2W, P_LN2B,
       P_FCW, P_FCB, P_PRJW, P_PRJB, P_LNFW, P_LNFB, NPT };
static const char *const pnames[NPT] = {"wte", "wpe", "ln1_w", "ln1_b", "qkv_w", "qkv_b",
                                        "attproj_w", "attproj_b", "ln2_w", "ln2_b", "fc_w", "fc_b",
                                        "fcproj_w", "fcproj_b", "lnf_w", "lnf_b"};

typedef struct segment {
    int64_t off, len;  /* tokens [off, off + len) of the local (rows, toks) buffer */
    int64_t part;      /* partial gradient index (local) */
} segment;

/* Activations of this rank, (Tn, .) with Tn = rows * toks local tokens. */
typedef struct acts {
    float *enc;                    // (Tn, C) embedding output
    float *ln1, *ln1_m, *ln1_r;    // (L, Tn, C), (L, Tn), (L, Tn)
    float *q, *k, *v;              // (L, Tn, C), (L, Tn, Ckv) x2
    float *atty;                   // (L, Tn, C) attention output
    float *res2;                   // (L, Tn, C) after the attention residual
    float *ln2, *ln2_m, *ln2_r;    // (L, Tn, C), (L, Tn), (L, Tn)
    float *fch, *fchg;             // (L, Tn, 4C) MLP hidden before / after GELU
    float *res3;                   // (L, Tn, C) after the MLP residual
    float *lnf, *lnf_m, *lnf_r;    // (Tn, C), (Tn), (Tn)
    float *logits;                 // (Tn, V); tiled loss: (max_seg, V), one segment's
    /* tiled MLP: fch, fchg, dfch, dfchg are (max_shard, 4C), one shard's */
    /* gradients (scratch, reused by every layer) */
    float *dres;                   // (Tn, C) gradient of the residual stream
    float *dln;                    // (Tn, C)
    float *datty, *dq;             // (Tn, C) each
    float *dk, *dv;                // (Tn, Ckv) each
    float *dfch, *dfchg;           // (Tn, 4C) each
    float *dlogits;                // (Tn, V); tiled loss: (max_seg, V)
    float *tmp;                    // (Tn, C) projection output before the residual add
} acts;

struct uly_train {
    uly_gpt_config c;
    uly_train_opts o;
    uly_comm *w;              /* world */
    MPI_Comm spc;             /* SP group */
    int W, rank;              /* world size and rank */
    uly_grid2 g;              /* the DP x SP grid: every rank's rows and tokens */
    int lead, spr;            /* world rank of SP rank 0 of this replica, SP rank */
    int64_t C, Ckv, Cq, d;    /* channels, KV channels, QKV width, head dim */
    int64_t rb, rows, tb, toks, Tn; /* local rows / tokens */
    /* canonical chunks of a row: [cut[a], cut[a+1]) for a < nchunk */
    int64_t *cut, nchunk;
    segment *seg;
    int64_t nseg, nparts;     /* segments and local partials (equal) */
    int64_t max_seg;          /* tokens of the longest segment (the logits tile with tiled_loss) */
    int64_t mlp_shards;       /* MLP shards of this rank (tiled_mlp), else 0 */
    int64_t max_shard;        /* tokens of the longest MLP shard (the hidden tile) */
    /* parameters */
    int64_t np;
    int64_t poff[NPT], psz[NPT], pshape[NPT][3];
    int pndim[NPT];
    float *params, *grads, *m1, *m2; /* (np) each, one allocation */
    float *partials;          /* (nparts, np); lean: (np), the current segment's */
    int lean;                 /* exact mode on one rank: each segment's partial is added into acc
                                 (np doubles) as soon as it is written (fold_in), in segment order,
                                 which is the fold's (row, chunk) order; only wte's partials,
                                 written at both ends of the backward, are kept, in wparts */
    float *wparts;            /* lean: (nseg, V C) the segments' partial wte gradients */
    float *sendb, *recvb;     /* all-to-all of partials */
    double *acc;              /* (slice) fold accumulator (lean: the whole vector) */
    size_t *a2a[4];           /* (W) counts and displacements */
    int64_t slice_b, slice_n; /* this rank's slice of the parameter vector */
    double *losses;           /* (Tn) */
    double *all_losses;       /* (batch * N) gathered per-token losses */
    double *dacc;             /* (2 * max(Cq, 4C, C)) double accumulators */
    int32_t *tok;             /* (Tn) tokens of the current step (for the backward) */
    const int32_t *pos;
    acts a;                   /* one allocation, from a.enc */
    uly_dist **dist;          /* (L) */
    uly_local_attn plug;      /* the blocked kernel with this step's document offsets */
    int64_t *docs_cur;        /* (rows, ndocs + 1) offsets of this rank's rows, or NULL */
    int64_t ndocs, docs_cap;
    int64_t steps;
};

static size_t usz(int64_t x) { return (size_t)x; }

void uly_train_opts_default(uly_train_opts *o)
{
    memset(o, 0, sizeof *o);
    o->lr = 1e-3;
    o->beta1 = 0.9;
    o->beta2 = 0.95;
    o->eps = 1e-8;
    o->weight_decay = 0.1;
    o->grad_clip = 1.0;
    o->canon_sp = 4;
}

/* ------------------------------------------------------------ partition */

/* Cuts of a row: 0, N and every shard boundary of SP = 1..canon (sorted, unique). */
static int64_t cuts_cap(const uly_train *T)
{
    const int64_t K = T->o.canon_sp;
    return 2 + K * (K + 1) / 2;
}

static int make_cuts(uly_train *T)
{
    const int64_t N = T->c.seq;
    int K = T->o.canon_sp;
    T->cut = uly_calloc(usz(cuts_cap(T)), sizeof(int64_t));
    if (!T->cut)
        return uly_set_error(ULY_ENOMEM, "cannot allocate the chunk table");
    int64_t n = 0;
    T->cut[n++] = 0;
    for (int P = 2; P <= K; P++)
        for (int r = 1; r < P; r++) {
            int64_t b, cnt;
            uly_split(N, P, r, &b, &cnt);
            T->cut[n++] = b;
        }
    T->cut[n++] = N;
    /* insertion sort + unique */
    for (int64_t i = 1; i < n; i++)
        for (int64_t j = i; j > 0 && T->cut[j - 1] > T->cut[j]; j--) {
            int64_t t = T->cut[j];
            T->cut[j] = T->cut[j - 1];
            T->cut[j - 1] = t;
        }
    int64_t u = 1;
    for (int64_t i = 1; i < n; i++)
        if (T->cut[i] != T->cut[u - 1])
            T->cut[u++] = T->cut[i];
    T->nchunk = u - 1;
    return ULY_OK;
}

/* The first chunk that starts at or after token t of a row (nchunk for
 * t = N): a shard [tb, tb + tn) holds the chunks [chunk_at(tb), chunk_at(tb + tn)). */
static int64_t chunk_at(const uly_train *T, int64_t t)
{
    int64_t lo = 0, hi = T->nchunk; /* cut[nchunk] = N >= t */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (T->cut[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Chunks of a row in the shard of world rank w. */
static int64_t chunks_of(const uly_train *T, int w)
{
    int64_t rb, rn, tb, tn;
    uly_grid2_part(&T->g, w, &rb, &rn, &tb, &tn);
    return chunk_at(T, tb + tn) - chunk_at(T, tb);
}

/* How many segments this rank has (and partial gradients): every (row,
 * chunk) of its shard, or one in fast mode. */
static void count_segments(uly_train *T)
{
    int64_t a0 = chunk_at(T, T->tb), a1 = chunk_at(T, T->tb + T->toks);
    T->nseg = T->o.fast ? 1 : T->rows * (a1 - a0);
    if (T->Tn == 0)
        T->nseg = 0;
    T->nparts = T->o.fast ? 1 : T->nseg;
    T->lean = !T->o.fast && T->W == 1;
    /* the tiles: the longest segment and the longest MLP shard (both in
     * tokens), from the segment lengths fill_segments will write */
    const int64_t nch = a1 - a0;
    T->max_seg = 0;
    for (int64_t a = a0; a < a1 && T->nseg && !T->o.fast; a++)
        if (T->cut[a + 1] - T->cut[a] > T->max_seg)
            T->max_seg = T->cut[a + 1] - T->cut[a];
    if (T->o.fast)
        T->max_seg = T->Tn;
    T->mlp_shards = T->o.tiled_mlp > 0 ? (T->o.tiled_mlp < T->nseg ? T->o.tiled_mlp : T->nseg) : 0;
    T->max_shard = 0;
    for (int64_t j = 0; j < T->mlp_shards; j++) {
        int64_t sb, sn, tokens = 0;
        uly_split(T->nseg, (int)T->mlp_shards, (int)j, &sb, &sn);
        for (int64_t k = sb; k < sb + sn; k++)
            tokens += T->cut[a0 + k % nch + 1] - T->cut[a0 + k % nch];
        if (tokens > T->max_shard)
            T->max_shard = tokens;
    }
}

/* Segments [*s0, *s1) of MLP shard j and the offset of its first token
 * (all segments, offset 0, when the MLP is not tiled). */
static void mlp_shard(const uly_train *T, int64_t j, int64_t *s0, int64_t *s1, int64_t *base)
{
    if (!T->mlp_shards) {
        *s0 = 0;
        *s1 = T->nseg;
        *base = 0;
        return;
    }
    int64_t sb, sn;
    uly_split(T->nseg, (int)T->mlp_shards, (int)j, &sb, &sn);
    *s0 = sb;
    *s1 = sb + sn;
    *base = sn ? T->seg[sb].off : 0;
}

int64_t uly_train_mlp_shards(const uly_train *T) { return T ? T->mlp_shards : 0; }

/* The segments, into T->seg (count_segments' number of them). */
static void fill_segments(uly_train *T)
{
    int64_t a0 = chunk_at(T, T->tb), a1 = chunk_at(T, T->tb + T->toks);
    if (T->o.fast) {
        if (T->nseg)
            T->seg[0] = (segment){0, T->Tn, 0};
        return;
    }
    int64_t k = 0;
    for (int64_t b = 0; b < T->rows; b++)
        for (int64_t a = a0; a < a1; a++, k++)
            T->seg[k] = (segment){b * T->toks + (T->cut[a] - T->tb), T->cut[a + 1] - T->cut[a], k};
}

/* ------------------------------------------------------------ parameters */

/* Elements [*b, +*n) of the parameter vector that world rank w sums. */
static void param_slice(const uly_train *T, int w, int64_t *b, int64_t *n)
{
    uly_split(T->np, T->W, w, b, n);
}

static void param_layout(uly_train *T)
{
    const int64_t V = T->c.vocab, N = T->c.seq, L = T->c.layers, C = T->C, Cq = T->Cq;
    int64_t sh[NPT][4] = {
        {2, V, C, 0},     {2, N, C, 0},     {2, L, C, 0},      {2, L, C, 0},
        {3, L, Cq, C},    {2, L, Cq, 0},    {3, L, C, C},      {2, L, C, 0},
        {2, L, C, 0},     {2, L, C, 0},     {3, L, 4 * C, C},  {2, L, 4 * C, 0},
        {3, L, C, 4 * C}, {2, L, C, 0},     {1, C, 0, 0},      {1, C, 0, 0}};
    int64_t off = 0;
    for (int i = 0; i < NPT; i++) {
        T->pndim[i] = (int)sh[i][0];
        int64_t n = 1;
        for (int j = 0; j < T->pndim[i]; j++) {
            T->pshape[i][j] = sh[i][1 + j];
            n *= sh[i][1 + j];
        }
        T->poff[i] = off;
        T->psz[i] = n;
        off += n;
    }
    T->np = off;
}

/* Counter-based N(0, 1): splitmix64 of (seed, index), Box-Muller. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double normal_at(uint64_t seed, uint64_t i)
{
    uint64_t a = mix64(seed * 0x9e3779b97f4a7c15ULL + 2 * i + 1), b = mix64(a ^ (2 * i + 2) * 0xd1b54a32d192ed03ULL);
    double u1 = ((double)(a >> 11) + 0.5) * 0x1.0p-53, u2 = (double)(b >> 11) * 0x1.0p-53;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static void param_init(uly_train *T)
{
    const double std = 0.02, rstd = 0.02 / sqrt(2.0 * (double)T->c.layers);
    for (int i = 0; i < NPT; i++) {
        float *p = T->params + T->poff[i];
        double s = i == P_ATTW || i == P_PRJW ? rstd : std;
        int is_w = i == P_WTE || i == P_WPE || i == P_QKVW || i == P_ATTW || i == P_FCW || i == P_PRJW;
        int is_ln = i == P_LN1W || i == P_LN2W || i == P_LNFW;
        for (int64_t e = 0; e < T->psz[i]; e++)
            p[e] = is_w ? (float)(s * normal_at(T->o.seed, (uint64_t)(T->poff[i] + e))) : is_ln ? 1.0f : 0.0f;
    }
}

int64_t uly_train_nparams(const uly_train *T) { return T->np; }
float *uly_train_params(uly_train *T) { return T->params; }
const float *uly_train_grads(const uly_train *T) { return T->grads; }
int64_t uly_train_steps_done(const uly_train *T) { return T->steps; }
int uly_train_param_count(void) { return NPT; }

int uly_train_param_info(const uly_train *T, int i, const char **name, int *ndim, int64_t shape[3],
                         int64_t *offset)
{
    if (!T || i < 0 || i >= NPT)
        return uly_set_error(ULY_EINVAL, "no parameter tensor %d", i);
    *name = pnames[i];
    *ndim = T->pndim[i];
    for (int j = 0; j < 3; j++)
        shape[j] = j < T->pndim[i] ? T->pshape[i][j] : 1;
    *offset = T->poff[i];
    return ULY_OK;
}

void uly_train_shard(const uly_train *T, int64_t *row_begin, int64_t *rows, int64_t *tok_begin,
                     int64_t *toks)
{
    *row_begin = T->rb;
    *rows = T->rows;
    *tok_begin = T->tb;
    *toks = T->toks;
}

/* ------------------------------------------------------------- lifecycle */

const char *uly_train_a2a_note(const uly_train *T)
{
    for (int64_t l = 0; T && T->dist && l < T->c.layers; l++)
        if (T->dist[l] && uly_dist_a2a_note(T->dist[l]))
            return uly_dist_a2a_note(T->dist[l]);
    return NULL;
}

void uly_train_free(uly_train *T)
{
    if (!T)
        return;
    if (T->dist)
        for (int64_t l = 0; l < T->c.layers; l++)
            uly_dist_free(T->dist[l]);
    uly_free(T->dist);
    uly_comm_free_split(&T->spc);
    uly_comm_close(T->w);
    uly_free(T->cut);
    uly_free(T->seg);
    uly_free(T->params);
    uly_free(T->partials);
    uly_free(T->wparts);
    uly_free(T->sendb);
    uly_free(T->recvb);
    uly_free(T->acc);
    uly_free(T->a2a[0]);
    uly_free(T->losses);
    uly_free(T->all_losses);
    uly_free(T->dacc);
    uly_free(T->tok);
    uly_free(T->a.enc); /* the activations' allocation */
    uly_free(T->docs_cur);
    uly_free(T);
}

static int check_config(const uly_gpt_config *c, uly_train_opts *o, int W)
{
    if (c->vocab < 2 || c->seq < 1 || c->layers < 1 || c->channels < 1 || c->heads < 1 || c->kv_heads < 1)
        return uly_set_error(ULY_EINVAL, "model sizes must be positive (vocab >= 2)");
    if (c->channels % c->heads)
        return uly_set_error(ULY_EINVAL, "channels %lld is not a multiple of heads %lld",
                             (long long)c->channels, (long long)c->heads);
    if (c->heads % c->kv_heads)
        return uly_set_error(ULY_EINVAL, "heads %lld is not a multiple of kv-heads %lld",
                             (long long)c->heads, (long long)c->kv_heads);
    if (c->vocab > INT32_MAX || c->seq > INT32_MAX || c->channels > (1 << 20) || c->layers > (1 << 16))
        return uly_set_error(ULY_EINVAL, "model sizes too large");
    if (o->dp == 0 && o->sp == 0) {
        o->dp = 1;
        o->sp = W;
    }
    if (o->dp < 1 || o->sp < 1 || (int64_t)o->dp * o->sp != W)
        return uly_set_error(ULY_EINVAL, "dp %d x sp %d does not equal the %d ranks", o->dp, o->sp, W);
    if (o->batch == 0)
        o->batch = o->dp;
    if (o->batch < o->dp)
        return uly_set_error(ULY_EINVAL, "batch %lld is smaller than dp %d", (long long)o->batch, o->dp);
    if (c->seq < o->sp)
        return uly_set_error(ULY_EINVAL, "seq %lld is shorter than sp %d", (long long)c->seq, o->sp);
    if (o->canon_sp == 0)
        o->canon_sp = 4;
    if (!o->fast && o->canon_sp < o->sp)
        return uly_set_error(ULY_EINVAL, "canonical chunks for SP <= %d cannot serve sp %d", o->canon_sp, o->sp);
    if (o->canon_sp < 1 || o->canon_sp > 64)
        return uly_set_error(ULY_EINVAL, "canon_sp %d out of [1, 64]", o->canon_sp);
    if (o->tiled_loss != 0 && o->tiled_loss != 1)
        return uly_set_error(ULY_EINVAL, "tiled_loss %d is neither 0 nor 1", o->tiled_loss);
    if (o->tiled_mlp < 0 || o->tiled_mlp > c->seq)
        return uly_set_error(ULY_EINVAL, "tiled MLP: %d shards for rows of %lld tokens (want 1..%lld, or 0: untiled)",
                             o->tiled_mlp, (long long)c->seq, (long long)c->seq);
    if (o->fast && (o->tiled_loss || o->tiled_mlp))
        return uly_set_error(ULY_EINVAL, "tiled loss and tiled MLP work in the exact mode only (their tiles are its "
                             "canonical segments; the fast mode has one segment per rank)");
    if (!(o->lr >= 0) || !(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1) ||
        !(o->eps > 0) || !(o->weight_decay >= 0) || !(o->grad_clip >= 0))
        return uly_set_error(ULY_EINVAL, "optimizer settings out of range");
    return ULY_OK;
}

/* Widths and this rank's shard (c, o, W and rank set, the config checked). */
static void set_dims(uly_train *T)
{
    const uly_gpt_config *c = &T->c;
    T->C = c->channels;
    T->d = c->channels / c->heads;
    T->Ckv = c->kv_heads * T->d;
    T->Cq = T->C + 2 * T->Ckv;
    /* cannot fail: check_config has the grid's conditions */
    (void)uly_grid2_init(&T->g, T->o.dp, T->o.sp, T->o.batch, c->seq);
    uly_grid2_part(&T->g, T->rank, &T->rb, &T->rows, &T->tb, &T->toks);
    T->lead = uly_grid2_owner(&T->g, T->rb, 0);
    T->spr = T->rank - T->lead;
    T->Tn = T->rows * T->toks;
}

/* ------------------------------------------------------------- buffers */

/* Everything the training context allocates is one table of named buffers
 * (uly_bufs), built by train_bufs: uly_train_memory sums it and
 * alloc_all allocates from it, so each size is written once.  A slot says
 * where an entry goes: a pointer of the context, or NULL for what is
 * allocated elsewhere (the context itself, the chunk cuts, the
 * communicator, the attention contexts).  Consecutive entries of one group
 * (grp > 0) are carved, in order, from one allocation, which the group's
 * first pointer holds (uly_train_free frees it through that one). */
typedef struct slot {
    void **p;
    int grp;   /* 0: an allocation of its own */
    int zero;  /* calloc */
} slot;

enum { G_OWN, G_OPTIM, G_ACTS };

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
    return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

/* a * b * c bytes, saturating at UINT64_MAX; negative sizes are 0. */
static uint64_t nbytes(uint64_t es, int64_t a, int64_t b, int64_t c)
{
    const int64_t f[3] = {a, b, c};
    uint64_t r = es;
    for (int i = 0; i < 3; i++) {
        const uint64_t x = f[i] > 0 ? (uint64_t)f[i] : 0;
        r = mul_sat(r, x);
    }
    return r;
}

static void put_buf(uly_bufs *t, slot *sl, const char *name, uint64_t bytes, void *p, int grp, int zero)
{
    if (sl && t->n < ULY_BUFS_MAX)
        sl[t->n] = (slot){p, grp, zero};
    uly_bufs_add(t, name, bytes, ULY_BUF_HEAP);
}

/* Entries [n0, t->n) were added by someone else's table: no slots. */
static void no_slots(const uly_bufs *t, slot *sl, int n0)
{
    for (int i = n0; sl && i < t->n; i++)
        sl[i] = (slot){NULL, G_OWN, 0};
}

/* An activation of n floats, padded to a multiple of 16 floats. */
static uint64_t act_bytes(int64_t L, int64_t Tn, int64_t w)
{
    const uint64_t b = nbytes(sizeof(float), L, Tn, w);
    return b > UINT64_MAX - 63 ? UINT64_MAX : (b + 63) / 64 * 64;
}

/* The activations, in the order they lie in their allocation. */
static void act_bufs(uly_train *T, uly_bufs *t, slot *sl)
{
    const int64_t Tn = T->Tn, C = T->C, Ckv = T->Ckv, L = T->c.layers, V = T->c.vocab;
    acts *A = &T->a;
    /* tokens of the logits and of the MLP hidden (and their gradients);
     * layers of the stored MLP hidden */
    const int tl = T->o.tiled_loss, tm = T->mlp_shards > 0;
    const int64_t Tl = tl ? T->max_seg : Tn, Tm = tm ? T->max_shard : Tn, Lm = tm ? 1 : L;
    const struct { const char *name; float **p; int64_t l, n, w; } a[] = {
        {"activation enc", &A->enc, 1, Tn, C},
        {"activation ln1", &A->ln1, L, Tn, C}, {"activation ln1 mean", &A->ln1_m, L, Tn, 1},
        {"activation ln1 rstd", &A->ln1_r, L, Tn, 1},
        {"activation q", &A->q, L, Tn, C}, {"activation k", &A->k, L, Tn, Ckv}, {"activation v", &A->v, L, Tn, Ckv},
        {"activation atty", &A->atty, L, Tn, C}, {"activation res2", &A->res2, L, Tn, C},
        {"activation ln2", &A->ln2, L, Tn, C}, {"activation ln2 mean", &A->ln2_m, L, Tn, 1},
        {"activation ln2 rstd", &A->ln2_r, L, Tn, 1},
        {tm ? "activation fch (one MLP shard)" : "activation fch", &A->fch, Lm, Tm, 4 * C},
        {tm ? "activation fchg (one MLP shard)" : "activation fchg", &A->fchg, Lm, Tm, 4 * C},
        {"activation res3", &A->res3, L, Tn, C},
        {"activation lnf", &A->lnf, 1, Tn, C}, {"activation lnf mean", &A->lnf_m, 1, Tn, 1},
        {"activation lnf rstd", &A->lnf_r, 1, Tn, 1}, {tl ? "logits (one segment)" : "logits", &A->logits, 1, Tl, V},
        {"gradient dres", &A->dres, 1, Tn, C}, {"gradient dln", &A->dln, 1, Tn, C},
        {"gradient datty", &A->datty, 1, Tn, C}, {"gradient dq", &A->dq, 1, Tn, C},
        {"gradient dk", &A->dk, 1, Tn, Ckv}, {"gradient dv", &A->dv, 1, Tn, Ckv},
        {tm ? "gradient dfch (one MLP shard)" : "gradient dfch", &A->dfch, 1, Tm, 4 * C},
        {tm ? "gradient dfchg (one MLP shard)" : "gradient dfchg", &A->dfchg, 1, Tm, 4 * C},
        {tl ? "gradient dlogits (one segment)" : "gradient dlogits", &A->dlogits, 1, Tl, V},
        {"projection output", &A->tmp, 1, Tn, C},
    };
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
        put_buf(t, sl, a[i].name, act_bytes(a[i].l, a[i].n, a[i].w), a[i].p, G_ACTS, 0);
}

/* The one attention context of every layer (the same for all layers). */
static void layer_attn(uly_train *T, uly_attn_desc *a, uly_dist_opts *dop);

/* The table of this rank (set_dims, make_cuts, count_segments and
 * param_layout done), appended to t; sl (ULY_BUFS_MAX entries) or NULL. */
static int train_bufs(uly_train *T, uly_bufs *t, slot *sl)
{
    const int64_t np = T->np, W = T->W;
    const int64_t nparts = T->nparts ? T->nparts : 1, maxslice = np / W + 1;
    const int64_t total_parts = T->o.fast ? W : T->g.batch * T->nchunk;
    const int64_t dmax = T->Cq > 4 * T->C ? T->Cq : 4 * T->C, Tn1 = T->Tn ? T->Tn : 1;
    put_buf(t, sl, "training context", sizeof(struct uly_train), NULL, G_OWN, 0);
    put_buf(t, sl, "chunk cuts", nbytes(sizeof(int64_t), cuts_cap(T), 1, 1), NULL, G_OWN, 0);
    int n0 = t->n;
    uly_comm_bufs(T->W, t); /* the world communicator (uly_comm_alloc) */
    no_slots(t, sl, n0);
    put_buf(t, sl, "segments", nbytes(sizeof(segment), T->nseg ? T->nseg : 1, 1, 1), &T->seg, G_OWN, 1);
    put_buf(t, sl, "parameters", nbytes(sizeof(float), np, 1, 1), &T->params, G_OPTIM, 1);
    put_buf(t, sl, "gradients", nbytes(sizeof(float), np, 1, 1), &T->grads, G_OPTIM, 1);
    put_buf(t, sl, "AdamW first moments", nbytes(sizeof(float), np, 1, 1), &T->m1, G_OPTIM, 1);
    put_buf(t, sl, "AdamW second moments", nbytes(sizeof(float), np, 1, 1), &T->m2, G_OPTIM, 1);
    if (T->lean) {
        put_buf(t, sl, "partial gradient (one segment's)", nbytes(sizeof(float), np, 1, 1), &T->partials, G_OWN, 1);
        put_buf(t, sl, "partial wte gradients", nbytes(sizeof(float), nparts, T->c.vocab, T->C), &T->wparts, G_OWN,
                1);
    } else
        put_buf(t, sl, "partial gradients", nbytes(sizeof(float), nparts, np, 1), &T->partials, G_OWN, 1);
    if (!T->o.fast && !T->lean) {
        put_buf(t, sl, "partials to send", nbytes(sizeof(float), nparts, np, 1), &T->sendb, G_OWN, 0);
        put_buf(t, sl, "partials received", nbytes(sizeof(float), total_parts, maxslice, 1), &T->recvb, G_OWN, 0);
    }
    put_buf(t, sl, "slice sums", nbytes(sizeof(double), maxslice, 1, 1), &T->acc, G_OWN, 0);
    put_buf(t, sl, "exchange counts", nbytes(sizeof(size_t), 4, W, 1), &T->a2a[0], G_OWN, 1);
    put_buf(t, sl, "token losses", nbytes(sizeof(double), Tn1, 1, 1), &T->losses, G_OWN, 1);
    put_buf(t, sl, "gathered token losses", nbytes(sizeof(double), T->g.batch, T->g.seq, 1), &T->all_losses,
            G_OWN, 1);
    put_buf(t, sl, "bias and norm sums", nbytes(sizeof(double), 2, dmax, 1), &T->dacc, G_OWN, 1);
    put_buf(t, sl, "step tokens", nbytes(sizeof(int32_t), Tn1, 1, 1), &T->tok, G_OWN, 1);
    put_buf(t, sl, "attention contexts (pointers)", nbytes(sizeof(uly_dist *), T->c.layers, 1, 1), &T->dist,
            G_OWN, 1);
    act_bufs(T, t, sl);
    /* every layer's attention context on the SP group, L times one (the
     * layers are alike): its heap and its window segment */
    uly_attn_desc a;
    uly_dist_opts dop;
    layer_attn(T, &a, &dop);
    uly_bufs one = {0};
    int rc = uly_dist_memory(&a, &dop, T->g.sp, T->spr, &one);
    if (rc)
        return rc;
    n0 = t->n;
    uly_bufs_add(t, "attention contexts", mul_sat(uly_bufs_sum(&one, ULY_BUF_HEAP), (uint64_t)T->c.layers),
                 ULY_BUF_HEAP);
    const uint64_t win = uly_bufs_sum(&one, ULY_BUF_WINDOW);
    if (win)
        uly_bufs_add(t, "attention windows (shared memory)", mul_sat(win, (uint64_t)T->c.layers), ULY_BUF_WINDOW);
    /* the blocked kernel's workspace, allocated and freed by every local
     * attention call (the larger of forward and backward; it depends on the
     * block sizes, the head dim and the threads, not on the heads).  With
     * more SP ranks than heads, ranks sp >= heads own no head (the head
     * shards are uly_split(H, min(SP, H), .)) and call no kernel. */
    uly_kernel_opts ko = dop.kernel;
    size_t ws = 0;
    if (T->Tn > 0 && T->spr < T->c.heads && (rc = uly_attn_workspace(&a, &ko, &ws)))
        return rc;
    uly_bufs_add(t, "attention kernel workspace (during a call)", (uint64_t)ws, ULY_BUF_TRANSIENT);
    no_slots(t, sl, n0);
    return t->n < ULY_BUFS_MAX ? ULY_OK
                               : uly_set_error(ULY_EINVAL, "training buffer table: more than %d entries", ULY_BUFS_MAX - 1);
}

int uly_train_memory_table(const uly_gpt_config *c, const uly_train_opts *o, int rank, int size, uly_bufs *out)
{
    if (!c || !o || !out)
        return uly_set_error(ULY_EINVAL, "configuration, options or output pointer is NULL");
    if (size < 1 || rank < 0 || rank >= size)
        return uly_set_error(ULY_EINVAL, "rank %d of %d ranks", rank, size);
    uly_train *T = uly_calloc(1, sizeof *T);
    if (!T)
        return uly_set_error(ULY_ENOMEM, "cannot allocate the trainer");
    T->spc = MPI_COMM_NULL;
    T->c = *c;
    T->o = *o;
    T->W = size;
    T->rank = rank;
    int rc = check_config(&T->c, &T->o, size);
    if (!rc) {
        set_dims(T);
        rc = make_cuts(T);
    }
    if (!rc) {
        count_segments(T);
        param_layout(T);
        rc = train_bufs(T, out, NULL);
    }
    uly_train_free(T);
    return rc;
}

int uly_train_memory(const uly_gpt_config *c, const uly_train_opts *o, int rank, int size, uint64_t *bytes)
{
    if (!bytes)
        return uly_set_error(ULY_EINVAL, "configuration, options or output pointer is NULL");
    uly_bufs t = {0};
    int rc = uly_train_memory_table(c, o, rank, size, &t);
    if (!rc)
        *bytes = t.total;
    return rc;
}

/* Allocate the slots of entries [i, j) (one group, or one entry). */
static int alloc_slots(const uly_bufs *t, const slot *sl, int i, int j)
{
    uint64_t total = 0;
    for (int k = i; k < j; k++)
        total = total > UINT64_MAX - t->b[k].bytes ? UINT64_MAX : total + t->b[k].bytes;
    char *p = NULL;
    if (total <= SIZE_MAX)
        p = sl[i].zero ? uly_calloc(1, (size_t)total) : uly_malloc((size_t)total);
    if (!p) {
        char h[32];
        return uly_set_error(ULY_ENOMEM, "cannot allocate %s of %s%s", uly_fmt_bytes(h, sizeof h, total),
                             sl[i].grp == G_ACTS ? "activations" : t->b[i].name,
                             sl[i].grp == G_OPTIM ? ", gradients and AdamW moments" : "");
    }
    for (int k = i; k < j; k++) { /* a pointer of any object type, stored by its bytes */
        void *q = p;
        memcpy(sl[k].p, &q, sizeof q);
        p += t->b[k].bytes;
    }
    return ULY_OK;
}

static int alloc_all(uly_train *T)
{
    int rc = make_cuts(T);
    if (rc)
        return rc;
    count_segments(T);
    param_layout(T);
    param_slice(T, T->rank, &T->slice_b, &T->slice_n);
    uly_bufs t = {0};
    slot sl[ULY_BUFS_MAX];
    if ((rc = train_bufs(T, &t, sl)))
        return rc;
    for (int i = 0; i < t.n && !rc;) {
        int j = i + 1;
        while (sl[i].p && sl[i].grp != G_OWN && j < t.n && sl[j].grp == sl[i].grp)
            j++;
        if (sl[i].p)
            rc = alloc_slots(&t, sl, i, j);
        i = j;
    }
    if (rc)
        return rc;
    for (int i = 1; i < 4; i++)
        T->a2a[i] = T->a2a[0] + i * T->W;
    fill_segments(T);
    return ULY_OK;
}

/* Local attention of every layer: the blocked kernel, with the document
 * offsets of the current step (the contexts are created once, the packing
 * changes every step). */
static uly_attn_desc with_docs(const uly_train *T, const uly_attn_desc *a)
{
    uly_attn_desc b = *a;
    b.doc_offsets = T->ndocs ? T->docs_cur : NULL;
    b.docs = T->ndocs;
    return b;
}

static int attn_fwd_docs(void *user, const uly_attn_desc *a, const uly_kernel_opts *o, const void *q,
                         const void *k, const void *v, void *out, void *lse)
{
    uly_attn_desc b = with_docs(user, a);
    return uly_attn_fwd(&b, o, q, k, v, out, lse);
}

static int attn_bwd_docs(void *user, const uly_attn_desc *a, const uly_kernel_opts *o, const void *q,
                         const void *k, const void *v, const void *out, const void *lse, const void *dout,
                         void *dq, void *dk, void *dv)
{
    uly_attn_desc b = with_docs(user, a);
    return uly_attn_bwd(&b, o, q, k, v, out, lse, dout, dq, dk, dv);
}

static void layer_attn(uly_train *T, uly_attn_desc *a, uly_dist_opts *dop)
{
    const uly_gpt_config *c = &T->c;
    *a = (uly_attn_desc){T->rows, c->seq, c->heads, c->kv_heads, T->d, 1, 0, 0, ULY_F32, NULL, 0};
    memset(dop, 0, sizeof *dop);
    dop->kernel = T->o.kernel;
    T->plug = (uly_local_attn){attn_fwd_docs, attn_bwd_docs, T};
    dop->attn = &T->plug;
    dop->kernel.head_begin = dop->kernel.head_count = 0;
    dop->kernel.kv_expanded = 0;
}

int uly_train_create(MPI_Comm comm, const uly_gpt_config *c, const uly_train_opts *o, uly_train **out)
{
    if (!out)
        return uly_set_error(ULY_EINVAL, "output pointer is NULL");
    *out = NULL;
    int rank, W;
    int rc = uly_comm_info(comm, &rank, &W);
    if (rc)
        return rc;
    int local = ULY_OK;
    uly_train *T = uly_calloc(1, sizeof *T);
    if (!T)
        local = uly_set_error(ULY_ENOMEM, "cannot allocate the trainer");
    else if (!c || !o)
        local = uly_set_error(ULY_EINVAL, "configuration or options are NULL");
    else {
        T->spc = MPI_COMM_NULL;
        T->c = *c;
        T->o = *o;
        T->W = W;
        T->rank = rank;
        local = check_config(&T->c, &T->o, W);
        if (!local) {
            set_dims(T);
            local = uly_comm_alloc(rank, W, 0, &T->w);
            if (!local)
                local = alloc_all(T);
        }
    }
    int64_t v[14] = {0};
    if (T) {
        double lr = T->o.lr;
        int64_t lrb;
        memcpy(&lrb, &lr, sizeof lrb);
        int64_t vv[14] = {T->c.vocab, T->c.seq, T->c.layers, T->c.channels, T->c.heads, T->c.kv_heads,
                          T->o.dp, T->o.sp, T->o.batch, T->o.fast * 1000 + T->o.canon_sp,
                          (int64_t)T->o.seed, lrb, T->o.tiled_loss, T->o.tiled_mlp};
        memcpy(v, vv, sizeof v);
    }
    static const char *const names[14] = {"vocab", "seq", "layers", "channels", "heads", "kv-heads",
                                          "dp", "sp", "batch", "reduction mode", "seed", "lr",
                                          "tiled loss", "tiled MLP shards"};
    rc = uly_comm_agree_on(comm, local, 14, v, names);
    if (!rc)
        rc = uly_comm_attach(T->w, comm);
    if (!rc)
        rc = uly_comm_split(T->w, T->lead, T->spr, &T->spc); /* one SP group per replica */
    for (int64_t l = 0; !rc && l < c->layers; l++) {
        uly_attn_desc a;
        uly_dist_opts dop;
        layer_attn(T, &a, &dop);
        rc = uly_dist_create(T->spc, &a, &dop, &T->dist[l]);
    }
    if (T && T->w && T->spc != MPI_COMM_NULL) /* every SP group created its contexts */
        rc = uly_comm_agree(T->w, rc, 0, NULL, NULL);
    if (rc) {
        uly_train_free(T);
        return rc;
    }
    param_init(T);
    *out = T;
    return ULY_OK;
}

/* ------------------------------------------------------------- the model */

#define LAYER(base, l, width) ((base) + (int64_t)(l) * T->Tn * (width))
#define PARAM(P, i, l, per) ((P) + T->poff[i] + (int64_t)(l) * (per))

/* Segment g's partial gradient (lean: the one vector all segments reuse)
 * and its wte block. */
static float *part_of(const uly_train *T, const segment *g)
{
    return T->lean ? T->partials : T->partials + g->part * T->np;
}

static float *wte_part(const uly_train *T, const segment *g)
{
    return T->lean ? T->wparts + g->part * T->c.vocab * T->C : part_of(T, g) + T->poff[P_WTE];
}

/* Lean: add elements [p, p + n) of the partial just written (p inside
 * T->partials, which is laid out as the parameter vector) into the fold's
 * double sums, acc[e] += partial[e]: what reduce_exact does with each
 * partial in turn, in the same order. */
static void fold_in(uly_train *T, const float *p, int64_t n)
{
    if (!T->lean)
        return;
    double *restrict acc = T->acc + (p - T->partials);
#ifdef _OPENMP
#pragma omp simd
#endif
    for (int64_t i = 0; i < n; i++)
        acc[i] += (double)p[i];
}

/* out = x w^T (+ b) over the tokens of segments [s0, s1), one GEMM per
 * segment; out and x start at tokens bo and bx of the local buffer.  Not
 * one GEMM over all of them: OpenBLAS's bits per output element depend on
 * the GEMM's M (tests/test_train_gemm.c; doc/train.md, "Why the GEMMs stay
 * per segment"), so a merged GEMM would differ between grids. */
static void lin_fwd_range(const uly_train *T, int64_t s0, int64_t s1, float *out, int64_t bo, const float *x,
                          int64_t bx, const float *w, const float *b, int64_t IC, int64_t OC)
{
    for (int64_t s = s0; s < s1; s++) {
        const segment *g = &T->seg[s];
        uly_linear_fwd_f32(out + (g->off - bo) * OC, x + (g->off - bx) * IC, w, b, g->len, IC, OC);
    }
}

/* dx (+)= dout w over the tokens of segments [s0, s1), one GEMM per segment
 * (as lin_fwd_range); dx and dout start at tokens bdx and bdo. */
static void lin_dx_range(const uly_train *T, int64_t s0, int64_t s1, float *dx, int64_t bdx, int acc,
                         const float *dout, int64_t bdo, const float *w, int64_t IC, int64_t OC)
{
    for (int64_t s = s0; s < s1; s++) {
        const segment *g = &T->seg[s];
        uly_linear_bwd_f32(dx + (g->off - bdx) * IC, acc, NULL, 0, NULL, dout + (g->off - bdo) * OC, NULL, w,
                           g->len, IC, OC);
    }
}

/* out = res + (y + b), token by token: the bias add of uly_linear_fwd and
 * the residual add in one pass (the same two roundings per element). */
static void bias_residual(float *out, const float *res, const float *y, const float *b, int64_t n, int64_t C)
{
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n * C >= 32768)
#endif
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < C; i++)
            out[t * C + i] = res[t * C + i] + (y[t * C + i] + b[i]);
}

/* The MLP hidden of segments [s0, s1) of layer l: fch = ln2 fc_w^T + fc_b
 * per segment, fchg = GELU(fch), into buffers that start at token base of
 * the local buffer (an MLP shard's tile, or the layer's whole activation
 * with base 0).  The same GEMM per segment and the same token-wise GELU in
 * the forward and in the tiled backward's recomputation: the same bits. */
static void mlp_hidden(uly_train *T, int64_t l, int64_t s0, int64_t s1, int64_t base, float *fch, float *fchg)
{
    const int64_t C = T->C;
    const float *P = T->params, *ln2 = LAYER(T->a.ln2, l, C);
    if (s1 <= s0)
        return;
    lin_fwd_range(T, s0, s1, fch, base, ln2, 0, PARAM(P, P_FCW, l, 4 * C * C), PARAM(P, P_FCB, l, 4 * C), C, 4 * C);
    const int64_t n = T->seg[s1 - 1].off + T->seg[s1 - 1].len - base;
    uly_gelu_fwd_f32(fchg, fch, n * 4 * C);
}

/* Tiled loss: segment s's logits, its token losses and dlogits (scaled by
 * dscale), then at once the LM head's backward: dln of its tokens and its
 * partial dwte.  The logits tile holds one segment. */
static void loss_tile(uly_train *T, int64_t s, const int32_t *target, double dscale)
{
    const int64_t C = T->C, V = T->c.vocab;
    const float *P = T->params;
    acts *A = &T->a;
    const segment *g = &T->seg[s];
    uly_linear_fwd_f32(A->logits, A->lnf + g->off * C, P + T->poff[P_WTE], NULL, g->len, C, V);
    uly_xent_f32(T->losses + g->off, A->dlogits, A->logits, target + g->off, g->len, V, dscale);
    uly_linear_bwd_f32(A->dln + g->off * C, 0, wte_part(T, g), 0, NULL, A->dlogits, A->lnf + g->off * C,
                       P + T->poff[P_WTE], g->len, C, V);
}

/* Forward of this rank's tokens up to the logits (untiled loss), or up to
 * the token losses, dlogits and the LM head's backward (tiled loss). */
static int forward(uly_train *T, const int32_t *tok, const int32_t *pos, const int32_t *target, double dscale,
                   double *t_attn, double *t_a2a)
{
    const int64_t Tn = T->Tn, C = T->C, Ckv = T->Ckv, Cq = T->Cq, V = T->c.vocab;
    const float *P = T->params;
    acts *A = &T->a;
    uly_embed_fwd_f32(A->enc, tok, pos, P + T->poff[P_WTE], P + T->poff[P_WPE], Tn, C);
    for (int64_t l = 0; l < T->c.layers; l++) {
        const float *res = l ? LAYER(A->res3, l - 1, C) : A->enc;       // (Tn, C)
        float *ln1 = LAYER(A->ln1, l, C), *q = LAYER(A->q, l, C);      // (Tn, C)
        float *k = LAYER(A->k, l, Ckv), *v = LAYER(A->v, l, Ckv);      // (Tn, Ckv)
        float *atty = LAYER(A->atty, l, C), *res2 = LAYER(A->res2, l, C);
        float *ln2 = LAYER(A->ln2, l, C), *res3 = LAYER(A->res3, l, C);
        const float *qkvw = PARAM(P, P_QKVW, l, Cq * C), *qkvb = PARAM(P, P_QKVB, l, Cq);
        uly_layernorm_fwd_f32(ln1, A->ln1_m + l * Tn, A->ln1_r + l * Tn, res, PARAM(P, P_LN1W, l, C),
                              PARAM(P, P_LN1B, l, C), Tn, C);
        const int64_t S = T->nseg;
        lin_fwd_range(T, 0, S, q, 0, ln1, 0, qkvw, qkvb, C, C);
        lin_fwd_range(T, 0, S, k, 0, ln1, 0, qkvw + C * C, qkvb + C, C, Ckv);
        lin_fwd_range(T, 0, S, v, 0, ln1, 0, qkvw + (C + Ckv) * C, qkvb + C + Ckv, C, Ckv);
        int rc = uly_dist_fwd(T->dist[l], q, k, v, atty);
        if (rc)
            return rc;
        uly_dist_times dt;
        uly_dist_times_get(T->dist[l], &dt);
        *t_attn += dt.fwd_attn;
        *t_a2a += dt.fwd_a2a_in + dt.fwd_a2a_out;
        lin_fwd_range(T, 0, S, A->tmp, 0, atty, 0, PARAM(P, P_ATTW, l, C * C), NULL, C, C);
        bias_residual(res2, res, A->tmp, PARAM(P, P_ATTB, l, C), Tn, C);
        uly_layernorm_fwd_f32(ln2, A->ln2_m + l * Tn, A->ln2_r + l * Tn, res2, PARAM(P, P_LN2W, l, C),
                              PARAM(P, P_LN2B, l, C), Tn, C);
        /* the MLP, shard by shard (untiled: one shard of every segment, kept per layer) */
        const int64_t nsh = T->mlp_shards ? T->mlp_shards : 1;
        float *fch = T->mlp_shards ? A->fch : LAYER(A->fch, l, 4 * C);
        float *fchg = T->mlp_shards ? A->fchg : LAYER(A->fchg, l, 4 * C);
        for (int64_t j = 0; j < nsh; j++) {
            int64_t s0, s1, base;
            mlp_shard(T, j, &s0, &s1, &base);
            mlp_hidden(T, l, s0, s1, base, fch, fchg);
            lin_fwd_range(T, s0, s1, A->tmp, 0, fchg, base, PARAM(P, P_PRJW, l, 4 * C * C), NULL, 4 * C, C);
        }
        bias_residual(res3, res2, A->tmp, PARAM(P, P_PRJB, l, C), Tn, C);
    }
    uly_layernorm_fwd_f32(A->lnf, A->lnf_m, A->lnf_r, LAYER(A->res3, T->c.layers - 1, C), P + T->poff[P_LNFW],
                          P + T->poff[P_LNFB], Tn, C);
    for (int64_t s = 0; s < T->nseg && T->o.tiled_loss; s++)
        loss_tile(T, s, target, dscale);
    if (!T->o.tiled_loss)
        lin_fwd_range(T, 0, T->nseg, A->logits, 0, A->lnf, 0, P + T->poff[P_WTE], NULL, C, V);
    return ULY_OK;
}

/* Store double accumulators as a partial gradient. */
static void put(float *dst, const double *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = (float)src[i];
}

/* LayerNorm backward per segment: dx += into dres, partial dw/db. */
static void ln_bwd_segs(uly_train *T, float *dx, const float *dout, const float *x, const float *mean,
                        const float *rstd, const float *w, int iw, int ib, int64_t l)
{
    const int64_t C = T->C;
    double *dw = T->dacc, *db = T->dacc + C;
    for (int64_t s = 0; s < T->nseg; s++) {
        const segment *g = &T->seg[s];
        float *part = part_of(T, g);
        memset(dw, 0, 2 * usz(C) * sizeof(double));
        uly_layernorm_bwd_f32(dx + g->off * C, dw, db, dout + g->off * C, x + g->off * C, w, mean + g->off,
                              rstd + g->off, g->len, C);
        put(PARAM(part, iw, l, C), dw, C);
        put(PARAM(part, ib, l, C), db, C);
        fold_in(T, PARAM(part, iw, l, C), C);
        fold_in(T, PARAM(part, ib, l, C), C);
    }
}

/* Linear backward of segments [s0, s1): dx = dout w, partial dw = dout^T x,
 * partial db.  The buffers dx, dout and x start at tokens bdx, bdo and bx
 * of the local buffer (0: whole; an MLP shard's first token: its tile). */
static void lin_bwd_range(uly_train *T, int64_t s0, int64_t s1, float *dx, int64_t bdx, const float *dout,
                          int64_t bdo, const float *x, int64_t bx, const float *w, int iw, int ib, int64_t l,
                          int64_t IC, int64_t OC)
{
    double *db = T->dacc;
    lin_dx_range(T, s0, s1, dx, bdx, 0, dout, bdo, w, IC, OC);
    for (int64_t s = s0; s < s1; s++) { /* sums over tokens: per segment */
        const segment *g = &T->seg[s];
        float *part = part_of(T, g);
        memset(db, 0, usz(OC) * sizeof(double));
        uly_linear_bwd_f32(NULL, 0, PARAM(part, iw, l, OC * IC), 0, db, dout + (g->off - bdo) * OC,
                           x + (g->off - bx) * IC, w, g->len, IC, OC);
        put(PARAM(part, ib, l, OC), db, OC);
        fold_in(T, PARAM(part, iw, l, OC * IC), OC * IC);
        fold_in(T, PARAM(part, ib, l, OC), OC);
    }
}

static void lin_bwd_segs(uly_train *T, float *dx, const float *dout, const float *x, const float *w,
                         int iw, int ib, int64_t l, int64_t IC, int64_t OC)
{
    lin_bwd_range(T, 0, T->nseg, dx, 0, dout, 0, x, 0, w, iw, ib, l, IC, OC);
}

static int backward(uly_train *T, const int32_t *tok, const int32_t *pos, double *t_attn, double *t_a2a)
{
    const int64_t Tn = T->Tn, C = T->C, Ckv = T->Ckv, Cq = T->Cq, V = T->c.vocab, L = T->c.layers;
    const float *P = T->params;
    acts *A = &T->a;
    /* every partial element is written once below (GEMMs with beta = 0, the
     * bias and LayerNorm sums by put()), except wpe, which gets scatter-adds */
    for (int64_t p = 0; p < T->nparts && !T->lean; p++)
        memset(T->partials + p * T->np + T->poff[P_WPE], 0, usz(T->psz[P_WPE]) * sizeof(float));
    if (T->lean) /* the fold's sums start at 0, as reduce_exact's */
        memset(T->acc, 0, usz(T->np) * sizeof(double));
    memset(A->dres, 0, usz(Tn * C) * sizeof(float));
    /* LM head (tied): dlnf = dlogits wte; partial dwte = dlogits^T lnf
     * (tiled loss: done segment by segment in the forward) */
    if (!T->o.tiled_loss)
        lin_dx_range(T, 0, T->nseg, A->dln, 0, 0, A->dlogits, 0, P + T->poff[P_WTE], C, V);
    for (int64_t s = 0; s < T->nseg && !T->o.tiled_loss; s++) {
        const segment *g = &T->seg[s];
        uly_linear_bwd_f32(NULL, 0, wte_part(T, g), 0, NULL, A->dlogits + g->off * V, A->lnf + g->off * C,
                           P + T->poff[P_WTE], g->len, C, V);
    }
    ln_bwd_segs(T, A->dres, A->dln, LAYER(A->res3, L - 1, C), A->lnf_m, A->lnf_r, P + T->poff[P_LNFW], P_LNFW,
                P_LNFB, 0);
    for (int64_t l = L - 1; l >= 0; l--) {
        const float *res = l ? LAYER(A->res3, l - 1, C) : A->enc;
        const float *qkvw = PARAM(P, P_QKVW, l, Cq * C);
        /* MLP: dres is the gradient of res3.  Shard by shard (untiled: one
         * shard of every segment, its hidden kept from the forward); a tiled
         * shard first recomputes its hidden.  Every partial element is still
         * written once, by the same GEMM or sum of the same segment. */
        const int64_t nsh = T->mlp_shards ? T->mlp_shards : 1;
        for (int64_t j = 0; j < nsh; j++) {
            int64_t s0, s1, base;
            mlp_shard(T, j, &s0, &s1, &base);
            if (s1 <= s0)
                continue;
            const float *fch = LAYER(A->fch, l, 4 * C), *fchg = LAYER(A->fchg, l, 4 * C);
            if (T->mlp_shards) {
                mlp_hidden(T, l, s0, s1, base, A->fch, A->fchg);
                fch = A->fch;
                fchg = A->fchg;
            }
            const int64_t n = T->seg[s1 - 1].off + T->seg[s1 - 1].len - base;
            lin_bwd_range(T, s0, s1, A->dfchg, base, A->dres, 0, fchg, base, PARAM(P, P_PRJW, l, 4 * C * C),
                          P_PRJW, P_PRJB, l, 4 * C, C);
            uly_gelu_bwd_f32(A->dfch, fch, A->dfchg, n * 4 * C);
            lin_bwd_range(T, s0, s1, A->dln, 0, A->dfch, base, LAYER(A->ln2, l, C), 0,
                          PARAM(P, P_FCW, l, 4 * C * C), P_FCW, P_FCB, l, C, 4 * C);
        }
        ln_bwd_segs(T, A->dres, A->dln, LAYER(A->res2, l, C), A->ln2_m + l * Tn, A->ln2_r + l * Tn,
                    PARAM(P, P_LN2W, l, C), P_LN2W, P_LN2B, l);
        /* attention: dres is now the gradient of res2 */
        lin_bwd_segs(T, A->datty, A->dres, LAYER(A->atty, l, C), PARAM(P, P_ATTW, l, C * C), P_ATTW, P_ATTB,
                     l, C, C);
        int rc = uly_dist_bwd(T->dist[l], A->datty, A->dq, A->dk, A->dv);
        if (rc)
            return rc;
        uly_dist_times dt;
        uly_dist_times_get(T->dist[l], &dt);
        *t_attn += dt.bwd_attn;
        *t_a2a += dt.bwd_a2a_in + dt.bwd_a2a_out;
        double *db = T->dacc;
        /* dln = dq wq + dk wk + dv wv, the three GEMMs in this order for every token */
        lin_dx_range(T, 0, T->nseg, A->dln, 0, 0, A->dq, 0, qkvw, C, C);
        lin_dx_range(T, 0, T->nseg, A->dln, 0, 1, A->dk, 0, qkvw + C * C, C, Ckv);
        lin_dx_range(T, 0, T->nseg, A->dln, 0, 1, A->dv, 0, qkvw + (C + Ckv) * C, C, Ckv);
        for (int64_t s = 0; s < T->nseg; s++) {
            const segment *g = &T->seg[s];
            float *part = part_of(T, g);
            float *dw = PARAM(part, P_QKVW, l, Cq * C);
            const float *x = LAYER(A->ln1, l, C) + g->off * C;
            memset(db, 0, usz(Cq) * sizeof(double));
            uly_linear_bwd_f32(NULL, 0, dw, 0, db, A->dq + g->off * C, x, qkvw, g->len, C, C);
            uly_linear_bwd_f32(NULL, 0, dw + C * C, 0, db + C, A->dk + g->off * Ckv, x, qkvw + C * C, g->len, C,
                               Ckv);
            uly_linear_bwd_f32(NULL, 0, dw + (C + Ckv) * C, 0, db + C + Ckv, A->dv + g->off * Ckv, x,
                               qkvw + (C + Ckv) * C, g->len, C, Ckv);
            put(PARAM(part, P_QKVB, l, Cq), db, Cq);
            fold_in(T, dw, Cq * C);
            fold_in(T, PARAM(part, P_QKVB, l, Cq), Cq);
        }
        ln_bwd_segs(T, A->dres, A->dln, res, A->ln1_m + l * Tn, A->ln1_r + l * Tn, PARAM(P, P_LN1W, l, C),
                    P_LN1W, P_LN1B, l);
    }
    for (int64_t s = 0; s < T->nseg; s++) {
        const segment *g = &T->seg[s];
        float *part = part_of(T, g), *dwpe = part + T->poff[P_WPE];
        if (T->lean)
            memset(dwpe, 0, usz(T->psz[P_WPE]) * sizeof(float));
        uly_embed_bwd_f32(wte_part(T, g), dwpe, A->dres + g->off * C, tok + g->off, pos + g->off, g->len, C);
        if (T->lean) { /* wte and wpe: the last of this segment's partial */
            const float *w = wte_part(T, g);
            double *acc = T->acc + T->poff[P_WTE];
            for (int64_t i = 0; i < T->psz[P_WTE]; i++)
                acc[i] += (double)w[i];
            fold_in(T, dwpe, T->psz[P_WPE]);
        }
    }
    return ULY_OK;
}

/* ------------------------------------------------------------ reductions */

/* Exact: partials of the global batch added in (row, chunk) order per slice. */
static int reduce_exact(uly_train *T)
{
    const int W = T->W;
    if (T->lean) { /* one rank: the backward did the fold */
        for (int64_t e = 0; e < T->np; e++)
            T->grads[e] = (float)T->acc[e];
        return ULY_OK;
    }
    const int64_t np = T->np;
    size_t *sc = T->a2a[0], *sd = T->a2a[1], *rc = T->a2a[2], *rd = T->a2a[3];
    size_t soff = 0, roff = 0;
    for (int w = 0; w < W; w++) {
        int64_t eb, en, rb, rn, tb, tn;
        param_slice(T, w, &eb, &en);
        for (int64_t p = 0; p < T->nparts && w != T->rank; p++) /* own block: folded from partials */
            memcpy(T->sendb + soff + usz(p * en), T->partials + p * np + eb, usz(en) * sizeof(float));
        sc[w] = usz(T->nparts * en);
        sd[w] = soff;
        soff += sc[w];
        /* partials of rank w: its rows times its chunks */
        uly_grid2_part(&T->g, w, &rb, &rn, &tb, &tn);
        rc[w] = usz(rn * chunks_of(T, w) * T->slice_n);
        rd[w] = roff;
        roff += rc[w];
    }
    /* the own block is not sent: the fold reads it from the partials */
    sc[T->rank] = rc[T->rank] = 0;
    int rcode = uly_comm_alltoallv(T->w, T->sendb, sc, sd, T->recvb, rc, rd, sizeof(float));
    if (rcode)
        return rcode;
    const int64_t n = T->slice_n;
    double *acc = T->acc;
    for (int64_t e = 0; e < n; e++)
        acc[e] = 0;
    for (int64_t b = 0; b < T->g.batch; b++)
        for (int s = 0; s < T->g.sp; s++) {
            int w = uly_grid2_owner(&T->g, b, s);
            int64_t rb, rn, tb, tn, nch = chunks_of(T, w);
            uly_grid2_part(&T->g, w, &rb, &rn, &tb, &tn);
            for (int64_t a = 0; a < nch; a++) {
                const float *src = w == T->rank ? T->partials + ((b - rb) * nch + a) * np + T->slice_b
                                                : T->recvb + rd[w] + usz(((b - rb) * nch + a) * n);
                for (int64_t e = 0; e < n; e++)
                    acc[e] += (double)src[e];
            }
        }
    float *mine = T->grads + T->slice_b;
    for (int64_t e = 0; e < n; e++)
        mine[e] = (float)acc[e];
    for (int w = 0; w < W; w++) {
        int64_t eb, en;
        param_slice(T, w, &eb, &en);
        rc[w] = usz(en);
        rd[w] = usz(eb);
    }
    /* all-gather from a copy: MPI forbids overlapping send and receive buffers */
    memcpy(T->sendb, mine, usz(n) * sizeof(float));
    return uly_comm_allgatherv(T->w, T->sendb, T->grads, rc, rd, sizeof(float));
}

static int reduce_fast(uly_train *T)
{
    memcpy(T->grads, T->partials, usz(T->np) * sizeof(float));
    if (T->nparts == 0)
        memset(T->grads, 0, usz(T->np) * sizeof(float));
    return uly_comm_allreduce_sum(T->w, T->grads, usz(T->np), ULY_COMM_F32);
}

/* Loss: exact = per-token losses gathered and summed in (row, token) order. */
static int reduce_loss(uly_train *T, double *sum)
{
    if (T->o.fast) {
        double s = 0;
        for (int64_t t = 0; t < T->Tn; t++)
            s += T->losses[t];
        int rc = uly_comm_allreduce_sum(T->w, &s, 1, ULY_COMM_F64);
        *sum = s;
        return rc;
    }
    size_t *rc = T->a2a[2], *rd = T->a2a[3];
    size_t off = 0;
    for (int w = 0; w < T->W; w++) {
        int64_t rb, rn, tb, tn;
        uly_grid2_part(&T->g, w, &rb, &rn, &tb, &tn);
        rc[w] = usz(rn * tn);
        rd[w] = off;
        off += rc[w];
    }
    int code = uly_comm_allgatherv(T->w, T->losses, T->all_losses, rc, rd, sizeof(double));
    if (code)
        return code;
    double s = 0;
    for (int64_t b = 0; b < T->g.batch; b++)
        for (int sp = 0; sp < T->g.sp; sp++) {
            int w = uly_grid2_owner(&T->g, b, sp);
            int64_t rb, rn, tb, tn;
            uly_grid2_part(&T->g, w, &rb, &rn, &tb, &tn);
            const double *src = T->all_losses + rd[w] + usz((b - rb) * tn);
            for (int64_t t = 0; t < tn; t++)
                s += src[t];
        }
    *sum = s;
    return ULY_OK;
}

int uly_train_activation(const uly_train *T, const char *name, int64_t layer, const float **data,
                         int64_t *width)
{
    if (!T || !name || !data || !width)
        return uly_set_error(ULY_EINVAL, "activation: NULL argument");
    const acts *A = &T->a;
    const int64_t C = T->C, Ckv = T->Ckv;
    struct { const char *n; const float *p; int64_t w; int per_layer; } t[] = {
        {"enc", A->enc, C, 0},       {"ln1", A->ln1, C, 1},   {"q", A->q, C, 1},
        {"k", A->k, Ckv, 1},         {"v", A->v, Ckv, 1},     {"atty", A->atty, C, 1},
        {"res2", A->res2, C, 1},     {"ln2", A->ln2, C, 1},   {"fch", A->fch, 4 * C, 1},
        {"fchg", A->fchg, 4 * C, 1}, {"res3", A->res3, C, 1}, {"lnf", A->lnf, C, 0},
        {"logits", A->logits, T->c.vocab, 0}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (strcmp(name, t[i].n) != 0)
            continue;
        if ((T->o.tiled_loss && strcmp(name, "logits") == 0) ||
            (T->mlp_shards && (strcmp(name, "fch") == 0 || strcmp(name, "fchg") == 0)))
            return uly_set_error(ULY_EINVAL, "activation %s is not kept with the tiled %s", name,
                                 strcmp(name, "logits") == 0 ? "loss" : "MLP");
        if (t[i].per_layer && (layer < 0 || layer >= T->c.layers))
            return uly_set_error(ULY_EINVAL, "activation %s: no layer %lld", name, (long long)layer);
        *data = t[i].p + (t[i].per_layer ? layer * T->Tn * t[i].w : 0);
        *width = t[i].w;
        return ULY_OK;
    }
    return uly_set_error(ULY_EINVAL, "no activation named '%s'", name);
}

int uly_train_token_losses(const uly_train *T, double *out)
{
    if (!T || !out)
        return uly_set_error(ULY_EINVAL, "token losses: NULL argument");
    if (T->o.fast)
        return uly_set_error(ULY_EINVAL, "token losses are gathered in exact mode only");
    size_t off = 0;
    for (int w = 0; w < T->W; w++) {
        int64_t rb, rn, tb, tn;
        uly_grid2_part(&T->g, w, &rb, &rn, &tb, &tn);
        for (int64_t b = 0; b < rn; b++)
            memcpy(out + (rb + b) * T->c.seq + tb, T->all_losses + off + usz(b * tn), usz(tn) * sizeof(double));
        off += usz(rn * tn);
    }
    return ULY_OK;
}

/* ------------------------------------------------------------- one step */

/* Clipping and AdamW in one pass: g = (float)(g scale) (kept: the step's
 * gradients are the clipped ones), then uly_adamw_f32's update, operation
 * for operation (the same bits; each element on its own, so the loop is a
 * SIMD loop with no reassociation). */
static void clip_adamw(float *restrict p, float *restrict m1, float *restrict m2, float *restrict g, int64_t m,
                       double scale, double lr, double b1, double b2, double eps, double wd, int64_t t)
{
    const double c1 = 1.0 - pow(b1, (double)t), c2 = 1.0 - pow(b2, (double)t);
    const int clip = scale != 1.0;
#ifdef _OPENMP
#pragma omp simd
#endif
    for (int64_t i = 0; i < m; i++) {
        float gf = clip ? (float)((double)g[i] * scale) : g[i];
        g[i] = gf;
        double gi = gf;
        float a = (float)(b1 * (double)m1[i] + (1 - b1) * gi);
        float v = (float)(b2 * (double)m2[i] + (1 - b2) * gi * gi);
        m1[i] = a;
        m2[i] = v;
        double upd = ((double)a / c1) / (sqrt((double)v / c2) + eps) + wd * (double)p[i];
        p[i] = (float)((double)p[i] - lr * upd);
    }
}

int uly_train_step(uly_train *T, const int32_t *tok, const int32_t *target, const int32_t *pos,
                   const int64_t *doc_off, int64_t docs, int update, uly_train_stats *st)
{
    if (!T)
        return uly_set_error(ULY_EINVAL, "trainer is NULL");
    double t0 = uly_comm_wtime();
    int local = ULY_OK;
    int64_t count = 0;
    if (T->Tn > 0 && (!tok || !target || !pos))
        local = uly_set_error(ULY_EINVAL, "step: NULL tokens, targets or positions");
    else if ((doc_off == NULL) != (docs == 0) || docs < 0)
        local = uly_set_error(ULY_EINVAL, "step: document offsets and count disagree (docs %lld)", (long long)docs);
    uint64_t dh = 0xcbf29ce484222325ULL; /* digest of the offsets: every rank must pass the same */
    for (int64_t b = 0; !local && doc_off && b < T->o.batch; b++) {
        const int64_t *r = doc_off + b * (docs + 1);
        if (r[0] != 0 || r[docs] != T->c.seq)
            local = uly_set_error(ULY_EINVAL, "row %lld: documents must start at 0 and end at %lld",
                                  (long long)b, (long long)T->c.seq);
        for (int64_t i = 0; !local && i <= docs; i++) {
            if (i < docs && r[i + 1] < r[i])
                local = uly_set_error(ULY_EINVAL, "row %lld: document offsets decrease at %lld", (long long)b,
                                      (long long)i);
            dh = (dh ^ (uint64_t)r[i]) * 0x100000001b3ULL;
        }
    }
    if (!local && docs && T->docs_cap < T->rows * (docs + 1)) {
        uly_free(T->docs_cur);
        T->docs_cap = T->rows * (docs + 1);
        if (!(T->docs_cur = uly_malloc(usz(T->docs_cap) * sizeof(int64_t)))) {
            T->docs_cap = 0;
            local = uly_set_error(ULY_ENOMEM, "cannot allocate %lld document offsets", (long long)T->rows * (docs + 1));
        }
    }
    for (int64_t t = 0; !local && t < T->Tn; t++) {
        if (tok[t] < 0 || tok[t] >= T->c.vocab || target[t] < -1 || target[t] >= T->c.vocab)
            local = uly_set_error(ULY_EINVAL, "token %lld of rank %d: token %d or target %d outside the vocabulary",
                                  (long long)t, T->rank, tok[t], target[t]);
        else if (pos[t] < 0 || pos[t] >= T->c.seq)
            local = uly_set_error(ULY_EINVAL, "token %lld of rank %d: position %d outside [0, %lld)",
                                  (long long)t, T->rank, pos[t], (long long)T->c.seq);
        count += target[t] >= 0;
    }
    static const char *const names[4] = {"step number", "update flag", "documents per row",
                                         "document offsets (digest)"};
    int64_t v[4] = {T->steps, update, docs, (int64_t)(dh >> 1)};
    int rc = uly_comm_agree(T->w, local, 4, v, names);
    if (rc)
        return rc;
    T->ndocs = docs;
    if (docs)
        memcpy(T->docs_cur, doc_off + T->rb * (docs + 1), usz(T->rows * (docs + 1)) * sizeof(int64_t));
    rc = uly_comm_allreduce_sum(T->w, &count, 1, ULY_COMM_I64);
    if (rc)
        return rc;
    memcpy(T->tok, tok, usz(T->Tn) * sizeof(int32_t));
    double t_attn = 0, t_a2a = 0;
    /* the mean over non-ignored tokens of the global batch; no tokens: loss and gradients 0 */
    const double dscale = count ? 1.0 / (double)count : 0.0;
    rc = forward(T, tok, pos, target, dscale, &t_attn, &t_a2a);
    if (rc)
        return rc;
    if (!T->o.tiled_loss) /* tiled: per segment in the forward */
        uly_xent_f32(T->losses, T->a.dlogits, T->a.logits, target, T->Tn, T->c.vocab, dscale);
    rc = backward(T, tok, pos, &t_attn, &t_a2a);
    if (rc)
        return rc;
    double t1 = uly_comm_wtime();
    double lsum = 0;
    rc = T->o.fast ? reduce_fast(T) : reduce_exact(T);
    if (!rc)
        rc = reduce_loss(T, &lsum);
    if (rc)
        return rc;
    double t2 = uly_comm_wtime();
    double norm2 = 0;
    for (int64_t i = 0; i < T->np; i++)
        norm2 += (double)T->grads[i] * (double)T->grads[i];
    double norm = sqrt(norm2);
    if (update) {
        double scale = T->o.grad_clip > 0 && norm > T->o.grad_clip ? T->o.grad_clip / norm : 1.0;
        T->steps++;
        for (int i = 0; i < NPT; i++) {
            int decay = i == P_WTE || i == P_WPE || i == P_QKVW || i == P_ATTW || i == P_FCW || i == P_PRJW;
            const int64_t o = T->poff[i];
            clip_adamw(T->params + o, T->m1 + o, T->m2 + o, T->grads + o, T->psz[i], scale, T->o.lr, T->o.beta1,
                       T->o.beta2, T->o.eps, decay ? T->o.weight_decay : 0.0, T->steps);
        }
    }
    if (st) {
        st->loss = count ? lsum / (double)count : 0.0;
        st->count = count;
        st->grad_norm = norm;
        st->t_total = uly_comm_wtime() - t0;
        st->t_attn = t_attn;
        st->t_a2a = t_a2a;
        st->t_reduce = t2 - t1;
    }
    return ULY_OK;
}

/* ------------------------------------------------------------ checkpoint */

#define CKPT_MAGIC "ULYCKPT\0"
#define CKPT_VERSION 1
enum { CKPT_NHDR = 10 }; /* int64 fields after magic: version, V, N, L, C, H, Hkv, steps, np, seed */

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

size_t uly_train_checkpoint_size(const uly_train *T)
{
    return 8 + CKPT_NHDR * 8 + 3 * usz(T->np) * sizeof(float) + 8;
}

int uly_train_checkpoint_write(const uly_train *T, void *buf, size_t len)
{
    if (!T || !buf || len < uly_train_checkpoint_size(T))
        return uly_set_error(ULY_EINVAL, "checkpoint buffer too small");
    /* a diverged run's state is no checkpoint: refused, so that the caller keeps the previous one */
    const float *const vec[3] = {T->params, T->m1, T->m2};
    static const char *const vname[3] = {"parameter", "AdamW first moment", "AdamW second moment"};
    for (int v = 0; v < 3; v++)
        for (int64_t i = 0; i < T->np; i++)
            if (!isfinite(vec[v][i]))
                return uly_set_error(ULY_ENONFINITE, "checkpoint: %s %lld of %lld is %g (the training diverged); "
                                     "not written", vname[v], (long long)i, (long long)T->np, (double)vec[v][i]);
    unsigned char *p = buf;
    memcpy(p, CKPT_MAGIC, 8);
    int64_t h[CKPT_NHDR] = {CKPT_VERSION, T->c.vocab, T->c.seq, T->c.layers, T->c.channels, T->c.heads,
                            T->c.kv_heads, T->steps, T->np, (int64_t)T->o.seed};
    memcpy(p + 8, h, sizeof h);
    size_t off = 8 + sizeof h, nb = usz(T->np) * sizeof(float);
    memcpy(p + off, T->params, nb);
    memcpy(p + off + nb, T->m1, nb);
    memcpy(p + off + 2 * nb, T->m2, nb);
    off += 3 * nb;
    uint64_t sum = fnv1a(p, off);
    memcpy(p + off, &sum, 8);
    return ULY_OK;
}

int uly_train_checkpoint_read(uly_train *T, const void *buf, size_t len)
{
    if (!T)
        return uly_set_error(ULY_EINVAL, "trainer is NULL");
    const unsigned char *p = buf;
    int local = ULY_OK;
    int64_t h[CKPT_NHDR] = {0};
    size_t need = uly_train_checkpoint_size(T);
    if (!buf || len < 8 + sizeof h)
        local = uly_set_error(ULY_EFORMAT, "checkpoint: truncated (%zu bytes)", len);
    else if (memcmp(p, CKPT_MAGIC, 8) != 0)
        local = uly_set_error(ULY_EFORMAT, "checkpoint: not a ulysses checkpoint (bad magic)");
    else {
        memcpy(h, p + 8, sizeof h);
        int64_t want[CKPT_NHDR] = {CKPT_VERSION, T->c.vocab, T->c.seq, T->c.layers, T->c.channels,
                                   T->c.heads, T->c.kv_heads, h[7], T->np, (int64_t)T->o.seed};
        static const char *const what[CKPT_NHDR] = {"version", "vocab", "seq", "layers", "channels",
                                                     "heads", "kv-heads", "step", "parameter count", "seed"};
        for (int i = 0; i < CKPT_NHDR && !local; i++)
            if (h[i] != want[i])
                local = uly_set_error(ULY_EFORMAT, "checkpoint: %s is %lld, this run has %lld", what[i],
                                      (long long)h[i], (long long)want[i]);
        if (!local && len != need)
            local = uly_set_error(ULY_EFORMAT, "checkpoint: %zu bytes, expected %zu", len, need);
        if (!local && h[7] < 0)
            local = uly_set_error(ULY_EFORMAT, "checkpoint: negative step count");
        if (!local) {
            uint64_t sum;
            memcpy(&sum, p + need - 8, 8);
            if (sum != fnv1a(p, need - 8))
                local = uly_set_error(ULY_EFORMAT, "checkpoint: checksum mismatch (file damaged)");
        }
    }
    static const char *const names[1] = {"checkpoint step"};
    int64_t v[1] = {h[7]};
    int rc = uly_comm_agree(T->w, local, 1, v, names);
    if (rc)
        return rc;
    size_t off = 8 + sizeof h, nb = usz(T->np) * sizeof(float);
    memcpy(T->params, p + off, nb);
    memcpy(T->m1, p + off + nb, nb);
    memcpy(T->m2, p + off + 2 * nb, nb);
    T->steps = h[7];
    return ULY_OK;
}
