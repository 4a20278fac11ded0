/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jobcoll.c -- the collectives a training job runs: Ulysses all-to-alls
 * (pair tables from the plan layer's layout), Megatron-SP all-gathers and
 * reduce-scatters, ring-attention hops, ZeRO / data-parallel parameter
 * gathers and gradient reductions.  One descriptor per collective id
 * (usim_jc_describe) serves both the simulation and the byte check; each
 * distinct collective is simulated once on the whole cluster and memoized.
 *
 * Not here: how collectives decompose into transfers (coll_*.c), when they run
 * (program.c, opsched.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jobcoll.h"
#include "ulysses_plan.h"
#include "usim.h"
#include "usim_internal.h"

/* ------------------------------------------------------------ descriptors */

/* the ring hops' collectives, in the order of their kinds */
_Static_assert(USIM_C_HOP_B - USIM_C_HOP_F == USIM_HOP_BWD && USIM_C_HOP_DKV - USIM_C_HOP_F == USIM_HOP_DKV_HOME,
               "USIM_C_HOP_* follow USIM_HOP_*");

/* A collective of type t on groups (ng, P, grid) whose chunks are total
 * elements split over the P positions as uly_split does (the first total % P
 * one larger), mult bytes each: described, not listed. */
static usim_coll ring_coll(usim_coll_type t, int ng, int P, const usim_grid *grid, int64_t total,
                           uint64_t mult)
{
    return (usim_coll){.type = t, .ngroups = ng, .size = P, .grid = grid, .chunk_total = total,
                       .chunk_mult = mult, .algo = USIM_ALGO_AUTO, .proto = USIM_PROTO_AUTO};
}

int usim_jc_buf_new(const usim_layout *l, usim_jc_buf *buf)
{
    int P = l->sp_size, Pmax = P;   /* listed chunks: the all-gather CP's (sp groups) */
    buf->ch = usim_malloc((size_t)Pmax * sizeof *buf->ch);
    if (!buf->ch) {
        usim_jc_buf_free(buf);
        return usim_set_error(USIM_ENOMEM, "out of memory");
    }
    return USIM_OK;
}

void usim_jc_buf_free(usim_jc_buf *buf)
{
    free(buf->ch);
    buf->ch = NULL;
}

int usim_jc_describe(const usim_job *j, const usim_shape *x, const usim_layout *l, int id,
                     usim_jc_buf *buf, usim_coll *c)
{
    memset(c, 0, sizeof *c);
    int P = l->sp_size;
    if (id >= USIM_C_A2A0 && id < USIM_C_A2A0 + ULY_A2A_COUNT) {
        if (!(uly_method_traits(j->method) & ULY_TRAIT_A2A))
            return 0;
        int64_t seq = x->s, b0;
        if (j->method == ULY_METHOD_USP)
            uly_split(x->s, x->r, 0, &b0, &seq);   /* the first (largest) sequence slice */
        /* described, not listed: the plan layer's O(1) blocks (elements)
         * in the model's element size */
        memset(&buf->pairs, 0, sizeof buf->pairs);
        if (usim_a2a_layout(x, seq, P, &buf->pairs.layout))
            return -1;
        buf->pairs.rows = seq;
        buf->pairs.which = id - USIM_C_A2A0;
        buf->pairs.elem = x->e;
        *c = (usim_coll){.type = j->a2a, .ngroups = l->sp_ng, .size = P, .grid = &l->sp, .pairs = &buf->pairs,
                         .algo = USIM_ALGO_AUTO, .proto = USIM_PROTO_AUTO};
        return 1;
    }
    switch (id) {
    case USIM_C_AG: case USIM_C_RS:
        if (j->method == ULY_METHOD_MEGATRON_SP) {
            *c = ring_coll(id == USIM_C_AG ? USIM_ALLGATHER : USIM_REDUCE_SCATTER, l->sp_ng, P, &l->sp, x->s,
                           (uint64_t)x->b * x->h * x->e);
            return 1;
        }
        if (x->T < 2)
            return 0;
        /* composed tensor parallelism: the context shard's tokens over the tensor group */
        *c = ring_coll(id == USIM_C_AG ? USIM_ALLGATHER : USIM_REDUCE_SCATTER, l->tp_ng, l->tp_size, &l->tp,
                       x->n, (uint64_t)x->b * x->h * x->e);
        return 1;
    case USIM_C_KV_AG: case USIM_C_DKV_RS: {
        if (j->method != ULY_METHOD_ALLGATHER || P < 2)
            return 0;
        uly_sp_plan pl;
        if (uly_sp_plan_init(&pl, ULY_METHOD_ALLGATHER, P, 0, ULY_PLACE_ULYSSES_INNER))
            return 0;
        uint64_t row = 2 * (uint64_t)x->b * (uint64_t)x->kv_l * (uint64_t)x->d * (uint64_t)x->e;
        for (int r = 0; r < P; r++) {
            int64_t bgn[2], cnt[2];
            int nseg = uly_plan_tokens(&pl, x->s, r, bgn, cnt);
            buf->ch[r] = (uint64_t)(cnt[0] + (nseg > 1 ? cnt[1] : 0)) * row;
        }
        *c = (usim_coll){.type = id == USIM_C_KV_AG ? USIM_ALLGATHER : USIM_REDUCE_SCATTER, .ngroups = l->sp_ng,
                         .size = P, .grid = &l->sp, .chunk_bytes = buf->ch, .algo = USIM_ALGO_AUTO,
                         .proto = USIM_PROTO_AUTO};
        return 1;
    }
    case USIM_C_PP:
        if (l->pp_size < 2)
            return 0;
        /* one micro-batch's activations (sequence layout of a GPU) to the next stage */
        *c = (usim_coll){.type = USIM_RING_SHIFT, .ngroups = l->pp_ng, .size = l->pp_size, .grid = &l->pp,
                         .bytes = (uint64_t)x->b * (uint64_t)x->tok * (uint64_t)x->h * (uint64_t)x->e,
                         .algo = USIM_ALGO_AUTO, .proto = USIM_PROTO_AUTO};
        return 1;
    case USIM_C_HOP_F: case USIM_C_HOP_B: case USIM_C_HOP_DKV: {
        if (!(uly_method_traits(j->method) & ULY_TRAIT_RING))
            return 0;
        int usp = j->method == ULY_METHOD_USP;
        int R = usp ? l->ring_size : P;
        if (R < 2)
            return 0;
        /* K and V forward; K, V, dK, dV backward; dK, dV home after the last step */
        uint64_t bytes = usim_ring_hop_elems(x, j->method, usp ? x->u : 1, R, id - USIM_C_HOP_F) * (uint64_t)x->e;
        *c = (usim_coll){.type = USIM_RING_SHIFT, .ngroups = usp ? l->ring_ng : l->sp_ng, .size = R,
                         .grid = usp ? &l->ring : &l->sp, .bytes = bytes, .algo = USIM_ALGO_AUTO,
                         .proto = USIM_PROTO_AUTO};
        return 1;
    }
    default:
        break;
    }
    /* ZeRO / data parallel */
    if (l->z_size < 2)
        return 0;
    double count;
    usim_coll_type t;
    switch (id) {
    case USIM_C_Z_AG: case USIM_C_E_AG:
        if (j->zero < 3)
            return 0;
        t = USIM_ALLGATHER;
        break;
    case USIM_C_Z_RS: case USIM_C_E_RS:
        if (j->zero < 1)
            return 0;
        t = USIM_REDUCE_SCATTER;
        break;
    case USIM_C_Z_AR: case USIM_C_E_AR:
        if (j->zero >= 1)
            return 0;
        t = USIM_ALLREDUCE;
        break;
    case USIM_C_POST_AG:
        if (j->zero != 1 && j->zero != 2)
            return 0;
        t = USIM_ALLGATHER;
        break;
    default:
        return 0;
    }
    count = id == USIM_C_POST_AG ? x->gpu_params
          : (id == USIM_C_E_AG || id == USIM_C_E_RS || id == USIM_C_E_AR) ? x->emb_params
          : x->layer_params;
    *c = ring_coll(t, l->z_ng, l->z_size, &l->z, (int64_t)llround(count), (uint64_t)x->e);
    return 1;
}

/* ------------------------------------------------------------ memo */

typedef struct usim_memo_entry {
    uint64_t key;
    usim_coll_result r;
} usim_memo_entry;

void usim_collmemo_free(usim_collmemo *mc)
{
    free(mc->e);
    mc->e = NULL;
    mc->n = mc->cap = 0;
}

/* FNV-1a over 8-byte words, then the remaining bytes (a key, not a digest:
 * only equal inputs must give equal keys). */
static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    const unsigned char *b = data;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h ^= w;
        h *= 1099511628211ULL;
        h ^= h >> 29;
    }
    for (; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* Run (or recall) a collective. */
int usim_collmemo_run(usim_collmemo *mc, usim_net *net, const usim_coll *c, usim_coll_result *r)
{
    uint64_t k = 1469598103934665603ULL;
    k = fnv(k, &c->type, sizeof c->type);
    k = fnv(k, &c->ngroups, sizeof c->ngroups);
    k = fnv(k, &c->size, sizeof c->size);
    /* the groups by their description: a grid's digits, or the listed ranks */
    if (c->ranks)
        k = fnv(k, c->ranks, (size_t)c->ngroups * c->size * sizeof *c->ranks);
    else
        for (int d = 0; d < c->grid->ndim; d++) {
            k = fnv(k, &c->grid->dim[d].n, sizeof c->grid->dim[d].n);
            k = fnv(k, &c->grid->dim[d].stride, sizeof c->grid->dim[d].stride);
        }
    if (c->pair_bytes)
        k = fnv(k, c->pair_bytes, (size_t)c->size * c->size * sizeof *c->pair_bytes);
    else if (c->pairs) { /* what determines every block */
        const uly_layout *L = &c->pairs->layout;
        const int64_t v[9] = {L->a.batch, L->a.seq, L->a.heads, L->a.kv_heads, L->a.head_dim, L->p.U,
                              c->pairs->rows, c->pairs->which, c->pairs->elem};
        k = fnv(k, v, sizeof v);
    }
    if (c->chunk_bytes)
        k = fnv(k, c->chunk_bytes, (size_t)c->size * sizeof *c->chunk_bytes);
    else {
        k = fnv(k, &c->chunk_total, sizeof c->chunk_total);
        k = fnv(k, &c->chunk_mult, sizeof c->chunk_mult);
    }
    k = fnv(k, &c->bytes, sizeof c->bytes);
    for (int i = 0; i < mc->n; i++)
        if (mc->e[i].key == k) {
            *r = mc->e[i].r;
            return USIM_OK;
        }
    int rc = usim_coll_run(net, c, r, NULL, NULL);
    if (rc)
        return rc;
    mc->simulated++;
    if (mc->n == mc->cap) {
        int cap = mc->cap ? 2 * mc->cap : 16;
        usim_memo_entry *ne = usim_realloc(mc->e, (size_t)cap * sizeof *ne);
        if (!ne)
            return usim_set_error(USIM_ENOMEM, "out of memory");
        mc->e = ne;
        mc->cap = cap;
    }
    mc->e[mc->n].key = k;
    mc->e[mc->n].r = *r;
    mc->n++;
    return USIM_OK;
}

/* ------------------------------------------------------------ a job's collectives */

int usim_jc_run(usim_collmemo *memo, usim_net *net, const usim_job *j, const usim_shape *x,
                const usim_layout *l, usim_jobcoll *jc)
{
    memset(jc, 0, sizeof *jc);
    usim_jc_buf buf;
    int rc = usim_jc_buf_new(l, &buf);
    for (int id = 0; id < USIM_C_N && !rc; id++) {
        usim_coll c;
        int runs = usim_jc_describe(j, x, l, id, &buf, &c);
        if (runs < 0)
            rc = USIM_EINVAL;
        if (runs <= 0)
            continue;
        jc->have[id] = 1;
        if (memo)
            rc = usim_collmemo_run(memo, net, &c, &jc->r[id]);
    }
    usim_jc_buf_free(&buf);
    return rc;
}
