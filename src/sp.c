/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sp.c -- every sequence-parallel method behind one API (uly_sp_*): the
 * method's plan, the agreement across ranks, and dispatch to the compose
 * modules: uly_dist (ulysses), the ring engine (ring, zigzag), the
 * all-gather module, and usp = uly_dist on each group of U ranks with the
 * ring engine (across the groups) as its local attention.
 */
#include <string.h>

#include "methods.h"
#include "ulysses_dist.h"

struct uly_sp {
    uly_comm *c;               /* all P ranks: agreement; the ring of ring/zigzag; all-gather */
    uly_comm *ringc;           /* usp: the ranks with the same group member u, in ring order */
    int rank, P, u, j;
    uly_sp_plan p;
    uly_attn_desc a;           /* global problem, offsets pointing to `docs` */
    int64_t *docs;
    uly_sp_opts o;
    uly_dist *dist;            /* ulysses: all ranks; usp: the group */
    uly_ring *ring;            /* ring, zigzag, usp */
    uly_ag *ag;                /* allgather */
    uly_local_attn plug;       /* usp: the ring as the group's local attention */
    void *lse;                 /* ring, zigzag, allgather: (B, H, n_r) */
    uly_volume vol;            /* ring / all-gather counters */
    uly_phase_times fph, bph;  /* ring / all-gather phases of the last calls */
    uly_sp_times times;
    uint64_t calls;
    int have_fwd;
};

/* ------------------------------------------------------------ usp plug-in */

static int plug_fwd(void *user, const uly_attn_desc *a, const uly_kernel_opts *opts, const void *q,
                    const void *k, const void *v, void *o, void *lse)
{
    (void)a;
    (void)opts;
    uly_sp *S = user;
    return uly_ring_fwd(S->ring, q, k, v, o, lse, &S->fph);
}

static int plug_bwd(void *user, const uly_attn_desc *a, const uly_kernel_opts *opts, const void *q,
                    const void *k, const void *v, const void *o, const void *lse, const void *dout, void *dq,
                    void *dk, void *dv)
{
    (void)a; (void)opts; (void)q; (void)k; (void)v; (void)o; (void)lse; /* kept by the ring */
    uly_sp *S = user;
    return uly_ring_bwd(S->ring, dout, dq, dk, dv, &S->bph);
}

/* ------------------------------------------------------------ lifecycle */

void uly_sp_free(uly_sp *S)
{
    if (!S)
        return;
    uly_dist_free(S->dist);
    uly_ring_free(S->ring);
    uly_ag_free(S->ag);
    uly_comm_close(S->ringc);
    uly_comm_close(S->c);
    uly_free(S->lse);
    uly_free(S->docs);
    uly_free(S);
}

/* The configuration every rank must share: one line per field, its value
 * (from a, o and sbits, the scale's bits) and its name in the messages. */
#define SP_FIELDS(X)                                          \
    ULY_DESC_FIELDS(X)                                         \
    X(a->docs, "documents per row")                                   \
    X(uly_doc_hash(a), "document offsets (content hash)")             \
    X(o->method, "method")                                            \
    X(o->ulysses_degree, "ulysses degree")                            \
    X(o->placement, "placement")                                      \
    X(o->bf16_partials, "bf16 partials")                              \
    X(o->dist.kernel.block_q, "block_q")                              \
    X(o->dist.kernel.block_k, "block_k")                              \
    X((int64_t)o->dist.max_count, "max_count")                        \
    X(o->dist.a2a_mode, "all-to-all mode")                            \
    X(o->dist.attn != NULL, "local attention")

enum { NSPCFG = 0 SP_FIELDS(ULY_FIELD_COUNT) };
static const char *const sp_names[NSPCFG] = {SP_FIELDS(ULY_FIELD_NAME)};

static void sp_values(const uly_attn_desc *a, const uly_sp_opts *o, int64_t *v)
{
    const int64_t sbits = uly_double_bits(a->scale);
    int i = 0;
    SP_FIELDS(ULY_FIELD_VALUE)
}

/* The checks of create that need no allocation: the plan into *p. */
static int sp_check(const uly_attn_desc *a, const uly_sp_opts *o, int size, uly_sp_plan *p)
{
    int rc = uly_attn_desc_check(a);
    if (rc)
        return rc;
    if ((rc = uly_sp_plan_init(p, o->method, size, o->ulysses_degree, o->placement)))
        return rc;
    if (o->bf16_partials != 0 && o->bf16_partials != 1)
        return uly_set_error(ULY_EINVAL, "bf16_partials must be 0 or 1");
    if (o->dist.attn && o->method != ULY_METHOD_ULYSSES)
        return uly_set_error(ULY_EINVAL, "a local attention plug-in is supported by ulysses only");
    if (p->method == ULY_METHOD_USP)
        for (int x = 0; x < p->R; x++) {
            int64_t b[2], c[2];
            int ns = uly_plan_chunk(p, a->seq, x, b, c);
            if (c[0] + (ns > 1 ? c[1] : 0) == 0)
                return uly_set_error(ULY_EINVAL,
                                     "usp with %d ring positions needs a sequence of at least %d tokens (got %lld)",
                                     p->R, p->R, (long long)a->seq);
        }
    return ULY_OK;
}

/* Local checks and allocations of create (no communication). */
static int sp_local(uly_sp *S, const uly_attn_desc *a, int size)
{
    int rc = sp_check(a, &S->o, size, &S->p);
    if (rc)
        return rc;
    S->a = *a;
    if (a->doc_offsets) {
        const size_t n = (size_t)(a->batch * (a->docs + 1));
        if (!(S->docs = uly_malloc(n * sizeof *S->docs)))
            return uly_set_error(ULY_ENOMEM, "cannot allocate %zu document offsets", n);
        memcpy(S->docs, a->doc_offsets, n * sizeof *S->docs);
        S->a.doc_offsets = S->docs;
    }
    uly_plan_grid(&S->p, S->rank, &S->u, &S->j);
    return uly_comm_alloc(S->rank, size, S->o.dist.max_count, &S->c);
}

/* The group's Ulysses problem of usp on ring position j: a sequence of
 * the chunk's tokens; masks and documents are the ring's business (global
 * positions). */
static uly_attn_desc usp_group_desc(const uly_attn_desc *a, const uly_sp_plan *p, int j)
{
    uly_attn_desc g = *a;
    int64_t b[2], c[2];
    int ns = uly_plan_chunk(p, a->seq, j, b, c);
    g.seq = c[0] + (ns > 1 ? c[1] : 0);
    g.doc_offsets = NULL;
    g.docs = 0;
    g.causal = 0;
    g.window = 0;
    return g;
}

/* Bytes of the LSE of ring, zigzag and allgather (n own tokens). */
static uint64_t sp_lse_bytes(const uly_attn_desc *a, int64_t n)
{
    return (uint64_t)(a->batch * a->heads) * (uint64_t)(n ? n : 1) * uly_dtype_size(a->dtype);
}

/* Method-specific part of create; collective on S->c (and its groups). */
static int sp_build(uly_sp *S, MPI_Comm comm)
{
    const uly_attn_desc *a = &S->a;
    uly_kernel_opts ko = S->o.dist.kernel;
    int local = ULY_OK, rc;
    switch (S->p.method) {
    case ULY_METHOD_ULYSSES:
        return uly_dist_create(comm, a, &S->o.dist, &S->dist);
    case ULY_METHOD_ALLGATHER: case ULY_METHOD_RING: case ULY_METHOD_ZIGZAG: {
        int64_t tb[2], tc[2];
        int ns = uly_plan_tokens(&S->p, a->seq, S->rank, tb, tc);
        size_t n = (size_t)(tc[0] + (ns > 1 ? tc[1] : 0));
        if (S->p.method == ULY_METHOD_ALLGATHER)
            local = uly_ag_create(S->c, a, &S->p, &ko, &S->vol, &S->ag);
        else
            local = uly_ring_create(S->c, a, &S->p, S->j, 0, a->heads, 0, &ko, S->o.bf16_partials, &S->vol,
                                    &S->ring);
        if (!local && !(S->lse = uly_malloc((size_t)sp_lse_bytes(a, (int64_t)n))))
            local = uly_set_error(ULY_ENOMEM, "cannot allocate the LSE of %zu tokens", n);
        return uly_comm_agree(S->c, local, 0, NULL, NULL);
    }
    default: break;
    }
    /* usp: a group communicator (same j, ordered by u) for the all-to-alls
     * and a ring communicator (same u, ordered by j) for the ring */
    MPI_Comm group = MPI_COMM_NULL, ring = MPI_COMM_NULL;
    rc = uly_comm_split(S->c, S->j, S->u, &group);
    if (!rc)
        rc = uly_comm_split(S->c, S->u, S->j, &ring);
    if (!rc)
        local = uly_comm_alloc(S->j, S->p.R, 0, &S->ringc);
    if (!rc)
        rc = uly_comm_agree(S->c, local, 0, NULL, NULL);
    if (!rc)
        rc = uly_comm_attach(S->ringc, ring);
    if (!rc) {
        int64_t hb, hc;
        uly_plan_heads(&S->p, a->heads, S->rank, &hb, &hc);
        local = uly_ring_create(S->ringc, a, &S->p, S->j, hb, hc, uly_plan_kv_replicated(a, S->p.U), &ko,
                                S->o.bf16_partials, &S->vol, &S->ring);
        rc = uly_comm_agree(S->c, local, 0, NULL, NULL);
    }
    if (!rc) {
        const uly_attn_desc g = usp_group_desc(a, &S->p, S->j);
        S->plug = (uly_local_attn){plug_fwd, plug_bwd, S};
        uly_dist_opts d = S->o.dist;
        d.attn = &S->plug;
        local = uly_dist_create(group, &g, &d, &S->dist);
        rc = uly_comm_agree(S->c, local, 0, NULL, NULL);
    }
    uly_comm_free_split(&group);
    uly_comm_free_split(&ring);
    return rc;
}

int uly_sp_memory(const uly_attn_desc *a, const uly_sp_opts *opts, int P, int rank, uly_bufs *out)
{
    if (!out)
        return uly_set_error(ULY_EINVAL, "buffer table pointer is NULL");
    if (!a)
        return uly_set_error(ULY_EINVAL, "attention description is NULL");
    uly_sp_opts o;
    memset(&o, 0, sizeof o);
    if (opts)
        o = *opts;
    if (P < 1 || rank < 0 || rank >= P)
        return uly_set_error(ULY_EINVAL, "rank %d of %d is out of range", rank, P);
    uly_sp_plan p;
    int rc = sp_check(a, &o, P, &p);
    if (rc)
        return rc;
    int u, j;
    uly_plan_grid(&p, rank, &u, &j);
    /* in the order uly_sp_create allocates */
    uly_bufs_add(out, "sequence-parallel context", sizeof(uly_sp), ULY_BUF_HEAP);
    if (a->doc_offsets)
        uly_bufs_add(out, "document offsets", (uint64_t)(a->batch * (a->docs + 1)) * sizeof(int64_t), ULY_BUF_HEAP);
    uly_comm_bufs(P, out);
    int64_t tb[2], tc[2];
    const int ns = uly_plan_tokens(&p, a->seq, rank, tb, tc);
    const int64_t n = tc[0] + (ns > 1 ? tc[1] : 0);
    switch (p.method) {
    case ULY_METHOD_ULYSSES:
        return uly_dist_memory(a, &o.dist, P, rank, out);
    case ULY_METHOD_ALLGATHER:
        uly_ag_bufs(a, &p, rank, out);
        uly_bufs_add(out, "LSE", sp_lse_bytes(a, n), ULY_BUF_HEAP);
        return ULY_OK;
    case ULY_METHOD_RING: case ULY_METHOD_ZIGZAG:
        uly_ring_bufs(a, &p, j, 0, a->heads, 0, out);
        uly_bufs_add(out, "LSE", sp_lse_bytes(a, n), ULY_BUF_HEAP);
        return ULY_OK;
    default: break;
    }
    /* usp: the ring communicator, the ring engine, the group's Ulysses */
    uly_comm_bufs(p.R, out);
    int64_t hb, hc;
    uly_plan_heads(&p, a->heads, rank, &hb, &hc);
    uly_ring_bufs(a, &p, j, hb, hc, uly_plan_kv_replicated(a, p.U), out);
    const uly_attn_desc g = usp_group_desc(a, &p, j);
    static const uly_local_attn plug = {plug_fwd, plug_bwd, NULL};
    uly_dist_opts d = o.dist;
    d.attn = &plug;
    return uly_dist_memory(&g, &d, p.U, u, out);
}

int uly_sp_create(MPI_Comm comm, const uly_attn_desc *a, const uly_sp_opts *opts, uly_sp **out)
{
    if (!out)
        return uly_set_error(ULY_EINVAL, "output pointer is NULL");
    *out = NULL;
    int rank, size;
    int rc = uly_comm_info(comm, &rank, &size);
    if (rc)
        return rc;
    int local = ULY_OK;
    uly_sp *S = uly_calloc(1, sizeof *S);
    int64_t v[NSPCFG];
    memset(v, 0, sizeof v);
    if (!S) {
        local = uly_set_error(ULY_ENOMEM, "cannot allocate the sequence-parallel context");
    } else {
        S->rank = rank;
        S->P = size;
        if (opts)
            S->o = *opts;
        local = a ? sp_local(S, a, size) : uly_set_error(ULY_EINVAL, "attention description is NULL");
        if (!local)
            sp_values(&S->a, &S->o, v);
    }
    rc = uly_comm_agree_on(comm, local, NSPCFG, v, sp_names);
    if (!rc)
        rc = uly_comm_attach(S->c, comm);
    if (!rc)
        rc = sp_build(S, comm);
    if (rc) {
        uly_sp_free(S);
        return rc;
    }
    *out = S;
    return ULY_OK;
}

void uly_sp_get_plan(const uly_sp *S, uly_sp_plan *plan)
{
    *plan = S->p;
}

int uly_sp_tokens(const uly_sp *S, int64_t begin[2], int64_t count[2])
{
    return uly_plan_tokens(&S->p, S->a.seq, S->rank, begin, count);
}

/* ------------------------------------------------------------ calls */

static int sp_agree(uly_sp *S, int kind, int local)
{
    static const char *const names[2] = {"the operation (forward or backward)", "the call sequence"};
    int64_t v[2] = {kind, (int64_t)S->calls++};
    return uly_comm_agree(S->c, local, 2, v, names);
}

static int64_t sp_rows(const uly_sp *S)
{
    int64_t b[2], c[2];
    int ns = uly_sp_tokens(S, b, c);
    return c[0] + (ns > 1 ? c[1] : 0);
}

int uly_sp_fwd(uly_sp *S, const void *q, const void *k, const void *v, void *o)
{
    if (!S)
        return uly_set_error(ULY_EINVAL, "sequence-parallel context is NULL");
    int local = ULY_OK;
    if ((!q || !k || !v || !o) && sp_rows(S) > 0)
        local = uly_set_error(ULY_EINVAL, "forward: NULL tensor on rank %d", S->rank);
    int rc = sp_agree(S, 1, local);
    if (rc)
        return rc;
    S->have_fwd = 0;
    memset(&S->fph, 0, sizeof S->fph);
    uly_dist_times dt;
    memset(&dt, 0, sizeof dt);
    switch (S->p.method) {
    case ULY_METHOD_ULYSSES:
    case ULY_METHOD_USP:
        rc = uly_dist_fwd(S->dist, q, k, v, o);
        uly_dist_times_get(S->dist, &dt);
        if (S->p.method == ULY_METHOD_ULYSSES)
            S->fph.attn = dt.fwd_attn;
        break;
    case ULY_METHOD_ALLGATHER:
        local = uly_ag_fwd(S->ag, q, k, v, o, &S->fph);
        if (!local) {
            int64_t tb[2], tc[2];
            int ns = uly_sp_tokens(S, tb, tc);
            uly_lse_from_segmajor(uly_ag_lse(S->ag), S->lse, S->a.batch, S->a.heads, ns, tc,
                                  uly_dtype_size(S->a.dtype));
        }
        break;
    default:
        local = uly_ring_fwd(S->ring, q, k, v, o, S->lse, &S->fph);
        break;
    }
    if (local == ULY_EMPI)
        return local; /* communication broke: no agreement possible */
    if (!rc)
        rc = sp_agree(S, 11, local); /* every group and ring stops together */
    S->times.fwd_in = dt.fwd_a2a_in + S->fph.comm_in;
    S->times.fwd_attn = S->fph.attn;
    S->times.fwd_wait = S->fph.wait;
    S->times.fwd_out = dt.fwd_a2a_out + S->fph.comm_out;
    S->have_fwd = rc == ULY_OK;
    return rc;
}

int uly_sp_bwd(uly_sp *S, const void *dout, void *dq, void *dk, void *dv)
{
    if (!S)
        return uly_set_error(ULY_EINVAL, "sequence-parallel context is NULL");
    int local = ULY_OK;
    if (!S->have_fwd)
        local = uly_set_error(ULY_EINVAL, "backward called without a successful forward");
    else if ((!dout || !dq || !dk || !dv) && sp_rows(S) > 0)
        local = uly_set_error(ULY_EINVAL, "backward: NULL tensor on rank %d", S->rank);
    int rc = sp_agree(S, 2, local);
    if (rc)
        return rc;
    memset(&S->bph, 0, sizeof S->bph);
    uly_dist_times dt;
    memset(&dt, 0, sizeof dt);
    switch (S->p.method) {
    case ULY_METHOD_ULYSSES:
    case ULY_METHOD_USP:
        rc = uly_dist_bwd(S->dist, dout, dq, dk, dv);
        uly_dist_times_get(S->dist, &dt);
        if (S->p.method == ULY_METHOD_ULYSSES)
            S->bph.attn = dt.bwd_attn;
        break;
    case ULY_METHOD_ALLGATHER:
        local = uly_ag_bwd(S->ag, dout, dq, dk, dv, &S->bph);
        break;
    default:
        local = uly_ring_bwd(S->ring, dout, dq, dk, dv, &S->bph);
        break;
    }
    if (local == ULY_EMPI)
        return local;
    if (!rc)
        rc = sp_agree(S, 12, local);
    S->times.bwd_in = dt.bwd_a2a_in + S->bph.comm_in;
    S->times.bwd_attn = S->bph.attn;
    S->times.bwd_wait = S->bph.wait;
    S->times.bwd_out = dt.bwd_a2a_out + S->bph.comm_out;
    return rc;
}

uly_dist *uly_sp_dist(const uly_sp *S)
{
    return S ? S->dist : NULL;
}

const void *uly_sp_lse(const uly_sp *S)
{
    if (!S || !S->have_fwd)
        return NULL;
    return S->dist ? uly_dist_lse(S->dist) : S->lse;
}

void uly_sp_volume(const uly_sp *S, uly_volume *m)
{
    *m = S->vol;
    if (S->dist) {
        uly_volume d;
        uly_dist_volume(S->dist, &d);
        for (int w = 0; w < ULY_A2A_COUNT; w++) {
            m->sent[w] += d.sent[w];
            m->recv[w] += d.recv[w];
        }
    }
}

void uly_sp_reset_volume(uly_sp *S)
{
    memset(&S->vol, 0, sizeof S->vol);
    if (S->dist)
        uly_dist_reset_volume(S->dist);
}

void uly_sp_times_get(const uly_sp *S, uly_sp_times *t)
{
    *t = S->times;
}

int uly_sp_ring_shift(uly_sp *S, const void *sbuf, void *rbuf, size_t bytes)
{
    if (!S || !S->ring)
        return uly_set_error(ULY_EINVAL, "ring shift needs a ring method (ring, zigzag or usp)");
    if (bytes && (!sbuf || !rbuf))
        return uly_set_error(ULY_EINVAL, "ring shift: NULL buffer");
    uly_comm *c = S->ringc ? S->ringc : S->c;
    const int R = S->p.R, next = (S->j + 1) % R, prev = (S->j + R - 1) % R;
    if (R == 1) {
        memcpy(rbuf, sbuf, bytes);
        return ULY_OK;
    }
    uly_comm_req q = {.n = 0};
    int rc = uly_comm_irecv(c, rbuf, bytes, prev, 99, &q);
    if (!rc)
        rc = uly_comm_isend(c, sbuf, bytes, next, 99, &q);
    int w = uly_comm_wait(&q);
    return rc ? rc : w;
}
