/*
 * workload.c -- one training iteration as a graph of compute and
 * communication operations, executed on the event engine.
 *
 * SPMD symmetry: every GPU runs the same program, so the graph is that of one
 * representative GPU (the most loaded rank: rank 0 holds the extra token and
 * the extra head when shapes are uneven).  Its streams are: compute, SP
 * communication, parameter gathers, gradient reductions.  Operations run in
 * program order on their stream and wait for their dependencies.  Each
 * communication operation lasts as long as the flow-level simulation of its
 * collective on the whole cluster (all concurrent groups), memoized per
 * distinct (collective, groups, bytes): the pattern of a layer repeats.
 *
 * Not here: argument parsing and printing (sim/cli), the network (net.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ulysses.h"
#include "usim.h"
#include "usim_internal.h"

#define ATTN_BWD_FACTOR 2.5   /* FlashAttention-2 backward: 5 matmuls vs 2 */
#define NSTREAM 4
enum { ST_COMPUTE = 0, ST_SP, ST_PARAM, ST_GRAD };
static const char *const stream_name[NSTREAM] = {"compute", "comm: sequence parallel",
                                                 "comm: parameter gather", "comm: gradient reduce"};

/* ------------------------------------------------------------ names */

const char *usim_method_name(usim_method m)
{
    static const char *const n[USIM_NMETHOD] = {"ulysses", "megatron-sp", "ring", "ring-zigzag", "usp"};
    return (m >= 0 && m < USIM_NMETHOD) ? n[m] : "?";
}

int usim_method_parse(const char *s, usim_method *m)
{
    for (int i = 0; i < USIM_NMETHOD; i++)
        if (strcmp(s, usim_method_name((usim_method)i)) == 0) {
            *m = (usim_method)i;
            return USIM_OK;
        }
    if (strcmp(s, "zigzag") == 0) {
        *m = USIM_RING_ZIGZAG;
        return USIM_OK;
    }
    return usim_set_error(USIM_EINVAL,
                          "unknown method '%s' (ulysses, megatron-sp, ring, ring-zigzag, usp)", s);
}

const char *usim_recompute_name(usim_recompute r)
{
    static const char *const n[3] = {"none", "selective", "full"};
    return (r >= 0 && r <= USIM_RC_FULL) ? n[r] : "?";
}

const char *usim_kind_name(int kind)
{
    static const char *const n[USIM_NKIND] = {"sp", "param", "grad"};
    return (kind >= 0 && kind < USIM_NKIND) ? n[kind] : "?";
}

/* ------------------------------------------------------------ job */

static int largest_divisor_le(int n, int64_t cap, int64_t must_divide)
{
    for (int d = (int)(cap < n ? cap : n); d >= 1; d--)
        if (n % d == 0 && (must_divide == 0 || must_divide % d == 0))
            return d;
    return 1;
}

int usim_platform_check_gpus(const usim_platform *p, int gpus)
{
    int gpn = p->gpus_per_node;
    if (gpus < 1)
        return usim_set_error(USIM_EINVAL, "--gpus must be >= 1 (got %d)", gpus);
    if (gpus > gpn && gpus % gpn != 0)
        return usim_set_error(USIM_EINVAL,
                              "--gpus %d spans nodes but is not a multiple of %d GPUs per node (%s)",
                              gpus, gpn, p->name);
    int nodes = (gpus + gpn - 1) / gpn;
    if (p->max_nodes > 0 && nodes > p->max_nodes)
        return usim_set_error(USIM_EINVAL, "--gpus %d needs %d nodes; platform %s has at most %d",
                              gpus, nodes, p->name, p->max_nodes);
    return USIM_OK;
}

int usim_job_resolve(const usim_model *m, const usim_platform *p, usim_job *j)
{
    if (j->method < 0 || j->method >= USIM_NMETHOD)
        return usim_set_error(USIM_EINVAL, "unknown method %d", (int)j->method);
    const char *mn = usim_method_name(j->method);
    int rc = usim_platform_check_gpus(p, j->gpus);
    if (rc)
        return rc;
    int gpn = p->gpus_per_node;
    if (j->zero < 0 || j->zero > 3)
        return usim_set_error(USIM_EINVAL, "--zero must be 0, 1, 2 or 3 (got %d)", j->zero);
    if (j->sp < 0 || j->tp < 0 || j->dp < 0 || j->ulysses < 0)
        return usim_set_error(USIM_EINVAL, "parallel degrees must be positive");
    if (j->a2a != USIM_A2A_DIRECT && j->a2a != USIM_A2A_PAIRWISE)
        j->a2a = USIM_A2A_DIRECT;
    if (j->method == USIM_MEGATRON_SP) {
        if (j->tp && j->sp && j->tp != j->sp)
            return usim_set_error(USIM_EINVAL, "megatron-sp: --tp (%d) and --sp (%d) must be equal",
                                  j->tp, j->sp);
        if (j->tp)
            j->sp = j->tp;
    } else if (j->tp > 1) {
        return usim_set_error(USIM_EINVAL, "%s: --tp applies to megatron-sp only (got --tp %d)", mn,
                              j->tp);
    }
    if (j->sp == 0) {
        if (j->dp) {
            if (j->gpus % j->dp != 0)
                return usim_set_error(USIM_EINVAL, "degrees do not multiply to the GPU count: "
                                      "--dp %d does not divide --gpus %d", j->dp, j->gpus);
            j->sp = j->gpus / j->dp;
        } else {
            j->sp = largest_divisor_le(j->gpus, m->heads,
                                       j->method == USIM_MEGATRON_SP ? m->heads : 0);
        }
    }
    if (j->dp == 0)
        j->dp = j->gpus / j->sp;
    if ((int64_t)j->sp * j->dp != j->gpus)
        return usim_set_error(USIM_EINVAL,
                              "degrees do not multiply to the GPU count: sp %d x dp %d = %lld, not %d",
                              j->sp, j->dp, (long long)j->sp * j->dp, j->gpus);
    if (j->method == USIM_MEGATRON_SP)
        j->tp = j->sp;
    else
        j->tp = 1;
    switch (j->method) {
    case USIM_ULYSSES:
        if (j->sp > m->heads)
            return usim_set_error(USIM_EINVAL,
                                  "ulysses: SP degree %d exceeds the %lld attention heads (use usp)",
                                  j->sp, (long long)m->heads);
        j->ulysses = j->sp;
        break;
    case USIM_MEGATRON_SP:
        if (m->heads % j->tp != 0)
            return usim_set_error(USIM_EINVAL,
                                  "megatron-sp: TP degree %d does not divide the %lld heads", j->tp,
                                  (long long)m->heads);
        j->ulysses = 1;
        break;
    case USIM_RING: case USIM_RING_ZIGZAG:
        j->ulysses = 1;
        break;
    case USIM_USP:
        if (j->ulysses == 0) {
            int64_t cap = m->heads < gpn ? m->heads : gpn;
            j->ulysses = largest_divisor_le(j->sp, cap, 0);
        }
        if (j->sp % j->ulysses != 0)
            return usim_set_error(USIM_EINVAL, "usp: ulysses degree %d does not divide SP degree %d",
                                  j->ulysses, j->sp);
        if (j->ulysses > m->heads)
            return usim_set_error(USIM_EINVAL, "usp: ulysses degree %d exceeds the %lld heads",
                                  j->ulysses, (long long)m->heads);
        break;
    default:
        break;
    }
    int gran = j->sp * ((j->method == USIM_RING_ZIGZAG || j->method == USIM_USP) ? 2 : 1);
    if (m->seq < gran)
        return usim_set_error(USIM_EINVAL, "%s: sequence %lld is shorter than %d (%s needs >= %d tokens)",
                              mn, (long long)m->seq, gran, mn, gran);
    return USIM_OK;
}

/* ------------------------------------------------------------ context */

typedef struct cache_entry {
    uint64_t key;
    usim_coll_result r;
} cache_entry;

struct usim_sim {
    usim_platform p;
    int gpus;
    usim_net *net;
    cache_entry *cache;
    int ncache, capcache;
    int simulated;
    int contention;
    uint64_t *scratch_sent, *scratch_recv;
};

void usim_sim_set_contention(usim_sim *s, int on)
{
    s->contention = on != 0;
}

usim_sim *usim_sim_new(const usim_platform *p, int gpus)
{
    usim_sim *s = usim_calloc(1, sizeof *s);
    if (!s) {
        usim_set_error(USIM_ENOMEM, "out of memory");
        return NULL;
    }
    s->p = *p;
    s->gpus = gpus;
    s->contention = 1;
    s->net = usim_net_new(p, gpus);
    s->scratch_sent = usim_calloc((size_t)gpus, sizeof *s->scratch_sent);
    s->scratch_recv = usim_calloc((size_t)gpus, sizeof *s->scratch_recv);
    if (!s->net || !s->scratch_sent || !s->scratch_recv) {
        usim_sim_free(s);
        usim_set_error(USIM_ENOMEM, "out of memory");
        return NULL;
    }
    return s;
}

void usim_sim_free(usim_sim *s)
{
    if (!s)
        return;
    usim_net_free(s->net);
    free(s->cache);
    free(s->scratch_sent);
    free(s->scratch_recv);
    free(s);
}

static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* Run (or recall) a collective. */
static int coll(usim_sim *s, const usim_coll *c, usim_coll_result *r)
{
    uint64_t k = 1469598103934665603ULL;
    k = fnv(k, &c->type, sizeof c->type);
    k = fnv(k, &c->ngroups, sizeof c->ngroups);
    k = fnv(k, &c->size, sizeof c->size);
    k = fnv(k, c->ranks, (size_t)c->ngroups * c->size * sizeof *c->ranks);
    if (c->pair_bytes)
        k = fnv(k, c->pair_bytes, (size_t)c->size * c->size * sizeof *c->pair_bytes);
    if (c->chunk_bytes)
        k = fnv(k, c->chunk_bytes, (size_t)c->size * sizeof *c->chunk_bytes);
    k = fnv(k, &c->bytes, sizeof c->bytes);
    for (int i = 0; i < s->ncache; i++)
        if (s->cache[i].key == k) {
            *r = s->cache[i].r;
            return USIM_OK;
        }
    int rc = usim_coll_run(s->net, c, r, NULL, NULL);
    if (rc)
        return rc;
    s->simulated++;
    if (s->ncache == s->capcache) {
        int cap = s->capcache ? 2 * s->capcache : 16;
        cache_entry *nc = usim_realloc(s->cache, (size_t)cap * sizeof *nc);
        if (!nc)
            return usim_set_error(USIM_ENOMEM, "out of memory");
        s->cache = nc;
        s->capcache = cap;
    }
    s->cache[s->ncache].key = k;
    s->cache[s->ncache].r = *r;
    s->ncache++;
    return USIM_OK;
}

/* ------------------------------------------------------------ shapes */

typedef struct shape {
    int64_t b, s, h, H, Hkv, d, hkv, F, V, e, L;
    int P, u, r;           /* SP degree; usp: ulysses x ring degrees (ulysses: u = P) */
    int Z;                 /* ZeRO / data-parallel group size */
    int64_t n;             /* tokens of rank 0 (sequence layout) */
    int64_t hq_l, kv_l;    /* query / KV heads of rank 0 in the attention layout */
    int64_t tq, tk;        /* query / key tokens of rank 0 in the attention layout */
    double layer_params;   /* parameters of one layer held by a GPU (before ZeRO) */
    double emb_params;
    double gpu_params;     /* all parameters held by a GPU (before ZeRO) */
} shape;

static void attn_desc(const shape *x, int64_t seq, uly_attn_desc *a)
{
    memset(a, 0, sizeof *a);
    a->batch = x->b;
    a->seq = seq;
    a->heads = x->H;
    a->kv_heads = x->Hkv;
    a->head_dim = x->d;
    a->causal = 1;
    a->dtype = ULY_F32;
}

static void make_shape(const usim_model *m, const usim_job *j, shape *x)
{
    memset(x, 0, sizeof *x);
    x->b = m->micro_batch;
    x->s = m->seq;
    x->h = m->hidden;
    x->H = m->heads;
    x->Hkv = m->kv_heads;
    x->d = m->hidden / m->heads;
    x->hkv = x->Hkv * x->d;
    x->F = m->ffn;
    x->V = m->vocab;
    x->e = usim_dtype_bytes(m->dtype);
    x->L = m->layers;
    x->P = j->sp;
    x->u = j->ulysses;
    x->r = j->sp / j->ulysses;
    int64_t beg;
    uly_split(x->s, x->P, 0, &beg, &x->n);
    double h = (double)x->h;
    double lp = h * (h + 2.0 * x->hkv) + h * h + (m->gated_mlp ? 3.0 : 2.0) * h * x->F + 4 * h;
    x->emb_params = (double)x->V * h * (m->tied_embeddings ? 1 : 2);
    if (j->method == USIM_MEGATRON_SP) {
        x->layer_params = lp / j->tp;
        x->emb_params /= j->tp;
        x->Z = j->dp;
    } else {
        x->layer_params = lp;
        x->Z = j->dp * j->sp;
    }
    x->gpu_params = x->L * x->layer_params + x->emb_params;
    uly_attn_desc a;
    switch (j->method) {
    case USIM_ULYSSES:
        uly_split(x->H, x->P, 0, &beg, &x->hq_l);
        attn_desc(x, x->s, &a);
        uly_kv_range(&a, beg, x->hq_l, &beg, &x->kv_l);
        x->tq = x->tk = x->s;
        break;
    case USIM_MEGATRON_SP:
        x->hq_l = x->H / x->P;
        x->kv_l = x->Hkv >= x->P ? x->Hkv / x->P : 1;
        x->tq = x->tk = x->s;
        break;
    case USIM_RING: case USIM_RING_ZIGZAG:
        x->hq_l = x->H;
        x->kv_l = x->Hkv;
        x->tq = x->tk = x->n;
        break;
    case USIM_USP: {
        int64_t sl;
        uly_split(x->s, x->r, 0, &beg, &sl);
        uly_split(x->H, x->u, 0, &beg, &x->hq_l);
        attn_desc(x, sl, &a);
        uly_kv_range(&a, beg, x->hq_l, &beg, &x->kv_l);
        x->tq = x->tk = sl;
        break;
    }
    default:
        break;
    }
}

/* ------------------------------------------------------------ FLOPs */

/* Visible (query, key) pairs of one block for rank 0 -- see doc/simulator.md. */
static double pairs_full(double a, double b) { return a * b; }
static double pairs_causal_diag(double n) { return n * (n + 1) / 2; }

typedef struct flops {
    double qkv, out, mlp, head;    /* GEMM FLOPs, forward, per GPU */
    double attn;                   /* attention FLOPs, forward, per GPU (total over ring steps) */
    double attn_step[2];           /* ring: [0] diagonal step, [1] other steps (forward) */
    double elem_bytes;             /* elementwise HBM traffic per layer forward */
    double head_bytes;
} flops;

/* causal: whether the kernels exploit the causal mask (skip masked blocks). */
static void make_flops(const usim_model *m, const usim_job *j, const shape *x, int causal, flops *f)
{
    memset(f, 0, sizeof *f);
    double b = (double)x->b, h = (double)x->h, hkv = (double)x->hkv, F = (double)x->F;
    double tok = j->method == USIM_MEGATRON_SP ? (double)x->s / x->P : (double)x->n;
    f->qkv = 2 * b * tok * h * (h + 2 * hkv);
    f->out = 2 * b * tok * h * h;
    f->mlp = (m->gated_mlp ? 6 : 4) * b * tok * h * F;
    f->head = 2 * b * tok * h * x->V;
    f->elem_bytes = b * tok * (10 * h + (m->gated_mlp ? 3 : 2) * F) * x->e;
    f->head_bytes = b * tok * x->V * (x->e + 4) * 2;
    double per_pair = 4 * b * x->d;   /* QK^T and PV: 2 FLOPs each per (pair, dim) */
    switch (j->method) {
    case USIM_ULYSSES: case USIM_MEGATRON_SP: {
        double S = (double)x->s;
        double pairs = causal ? pairs_causal_diag(S) : pairs_full(S, S);
        f->attn = per_pair * x->hq_l * pairs;
        break;
    }
    case USIM_RING: {
        double n = (double)x->n;
        /* rank P-1 is the most loaded under the causal mask: it needs every block */
        f->attn_step[0] = per_pair * x->H * (causal ? pairs_causal_diag(n) : n * n);
        f->attn_step[1] = per_pair * x->H * n * n;
        f->attn = f->attn_step[0] + (x->P - 1) * f->attn_step[1];
        break;
    }
    case USIM_RING_ZIGZAG: case USIM_USP: {
        int R = j->method == USIM_USP ? x->r : x->P;
        double n = (double)(j->method == USIM_USP ? x->tq : x->n);
        double hl = (double)x->hq_l;
        if (causal) {
            double c = n / 2;  /* two chunks of n/2 per rank */
            f->attn_step[0] = per_pair * hl * (2 * c * c + c);
            f->attn_step[1] = per_pair * hl * (2 * c * c);
        } else {
            f->attn_step[0] = f->attn_step[1] = per_pair * hl * n * n;
        }
        f->attn = f->attn_step[0] + (R - 1) * f->attn_step[1];
        break;
    }
    default:
        break;
    }
}

double usim_model_flops(const usim_model *m, int64_t global_batch)
{
    double s = (double)m->seq, h = (double)m->hidden, F = (double)m->ffn;
    double hkv = h / m->heads * m->kv_heads;
    double pairs = m->causal ? s * (s + 1) / 2 : s * s;
    double layer = 2 * s * h * (h + 2 * hkv) + 2 * s * h * h + (m->gated_mlp ? 6 : 4) * s * h * F +
                   4 * (h / m->heads) * m->heads * pairs;
    return 3 * global_batch * (m->layers * layer + 2 * s * h * m->vocab);
}

double usim_megatron_flops(const usim_model *m, int64_t global_batch, int full_recompute)
{
    double B = (double)global_batch, s = (double)m->seq, L = (double)m->layers,
           h = (double)m->hidden, V = (double)m->vocab;
    return (full_recompute ? 96.0 : 72.0) * B * s * L * h * h *
           (1 + s / (6 * h) + V / (16 * L * h));
}

/* ------------------------------------------------------------ memory */

static void memory(const usim_platform *p, const usim_model *m, const usim_job *j, const shape *x,
                   usim_memory *mem)
{
    memset(mem, 0, sizeof *mem);
    double e = (double)x->e, b = (double)x->b, h = (double)x->h, F = (double)x->F;
    double Z = x->Z, Psi = x->gpu_params;
    mem->params = j->zero >= 3 ? 2 * Psi / Z : 2 * Psi;
    mem->grads = j->zero >= 2 ? 2 * Psi / Z : 2 * Psi;
    mem->optim = j->zero >= 1 ? 12 * Psi / Z : 12 * Psi;
    double tok = j->method == USIM_MEGATRON_SP ? (double)x->s / x->P : (double)x->n;
    /* sequence-layout tensors per layer (bytes) */
    double x_in = b * tok * h * e, ln1 = x_in, ln2_in = x_in, ln2 = x_in;
    double fc1 = b * tok * F * e * (m->gated_mlp ? 2 : 1), act = b * tok * F * e;
    double o_seq = (j->method == USIM_ULYSSES || j->method == USIM_USP) ? x_in : 0;
    /* attention-layout tensors */
    double qo = b * (double)x->tq * x->hq_l * x->d * e;
    double kv = b * (double)x->tk * x->kv_l * x->d * e;
    double lse = b * (double)x->tq * x->hq_l * 4;
    double full = x_in + ln1 + 2 * qo + 2 * kv + lse + o_seq + ln2_in + ln2 + fc1 + act;
    double per_layer;
    switch (j->recompute) {
    case USIM_RC_NONE: per_layer = full; break;
    case USIM_RC_SELECTIVE: per_layer = full - ln1 - ln2 - act; break;
    default: per_layer = x_in; break;
    }
    mem->activations = x->L * per_layer + (j->recompute == USIM_RC_FULL ? full : 0);
    mem->logits = b * tok * (double)x->V * (e + 4);
    /* communication and working buffers */
    double buf = 0;
    switch (j->method) {
    case USIM_ULYSSES: buf = 2 * b * (double)x->n * (h + 2 * (double)x->hkv) * e; break;
    case USIM_MEGATRON_SP: buf = b * (double)x->s * h * e; break;   /* the all-gathered input */
    case USIM_RING: case USIM_RING_ZIGZAG: buf = 4 * kv; break;
    case USIM_USP: buf = 2 * b * (double)x->n * (h + 2 * (double)x->hkv) * e + 4 * kv; break;
    default: break;
    }
    if (j->zero >= 3)
        buf += 2 * 2 * x->layer_params;           /* current + prefetched layer, bf16 */
    if (j->zero >= 2)
        buf += 2 * x->layer_params;               /* one gradient bucket */
    mem->buffers = buf;
    mem->reserved = p->reserved_bytes;
    mem->total = mem->params + mem->grads + mem->optim + mem->activations + mem->logits +
                 mem->buffers + mem->reserved;
}

int usim_memory_estimate(const usim_platform *p, const usim_model *m, const usim_job *j,
                         usim_memory *mem, int *fits)
{
    usim_job jj = *j;
    int rc = usim_job_resolve(m, p, &jj);
    if (rc)
        return rc;
    shape x;
    make_shape(m, &jj, &x);
    memory(p, m, &jj, &x, mem);
    *fits = mem->total <= p->hbm_bytes;
    return USIM_OK;
}

int usim_max_seq(const usim_platform *p, const usim_model *m, const usim_job *j, int64_t *seq)
{
    usim_model mm = *m;
    usim_job jj = *j;
    int rc = usim_job_resolve(m, p, &jj);
    if (rc)
        return rc;
    int64_t g = (int64_t)jj.sp * ((jj.method == USIM_RING_ZIGZAG || jj.method == USIM_USP) ? 2 : 1);
    usim_memory mem;
    int fits;
    *seq = 0;
    int64_t lo = 0, hi = 1;   /* in units of g: lo fits (or is 0), hi does not */
    for (;;) {
        mm.seq = hi * g;
        usim_job t = jj;
        if ((rc = usim_memory_estimate(p, &mm, &t, &mem, &fits)))
            return rc;
        if (!fits)
            break;
        lo = hi;
        if (hi > ((int64_t)1 << 40) / g)
            break;
        hi *= 2;
    }
    if (lo == hi) {
        *seq = lo * g;
        return USIM_OK;
    }
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        mm.seq = mid * g;
        usim_job t = jj;
        if ((rc = usim_memory_estimate(p, &mm, &t, &mem, &fits)))
            return rc;
        if (fits)
            lo = mid;
        else
            hi = mid;
    }
    *seq = lo * g;
    return USIM_OK;
}

/* ------------------------------------------------------------ collectives of a job */

enum { C_A2A0 = 0,                    /* + ULY_A2A_* (8) */
       C_AG = 8, C_RS,                /* megatron-sp activations */
       C_HOP_F, C_HOP_B, C_HOP_DKV,   /* ring attention hops */
       C_Z_AG, C_Z_RS, C_Z_AR,        /* per-layer ZeRO / DP */
       C_E_AG, C_E_RS, C_E_AR,        /* embedding / LM head parameters */
       C_POST_AG,                     /* ZeRO-1/2: gather of updated parameters */
       C_N };

typedef struct jobcoll {
    int have[C_N];
    usim_coll_result r[C_N];
} jobcoll;

typedef struct layout {
    int *sp_ranks;   /* SP groups (ulysses / megatron / ring), or usp a2a groups */
    int sp_ng, sp_size;
    int *ring_ranks; /* usp ring groups */
    int ring_ng, ring_size;
    int *z_ranks;    /* ZeRO / DP groups */
    int z_ng, z_size;
} layout;

static void layout_free(layout *l)
{
    free(l->sp_ranks);
    free(l->ring_ranks);
    free(l->z_ranks);
}

static int make_layout(const usim_job *j, layout *l)
{
    memset(l, 0, sizeof *l);
    int G = j->gpus, P = j->sp;
    int a2a = j->method == USIM_USP ? j->ulysses : P;
    l->sp_size = a2a;
    l->sp_ng = G / a2a;
    l->sp_ranks = usim_malloc((size_t)G * sizeof *l->sp_ranks);
    l->z_ranks = usim_malloc((size_t)G * sizeof *l->z_ranks);
    l->ring_ranks = usim_malloc((size_t)G * sizeof *l->ring_ranks);
    if (!l->sp_ranks || !l->z_ranks || !l->ring_ranks) {
        layout_free(l);
        return usim_set_error(USIM_ENOMEM, "out of memory");
    }
    for (int i = 0; i < G; i++)
        l->sp_ranks[i] = i;
    /* usp ring groups: within SP group g, ring j holds g*P + p*u + j */
    int u = j->ulysses, r = P / u;
    l->ring_size = r;
    l->ring_ng = G / r;
    int k = 0;
    for (int g = 0; g < G / P; g++)
        for (int jj = 0; jj < u; jj++)
            for (int p = 0; p < r; p++)
                l->ring_ranks[k++] = g * P + p * u + jj;
    if (j->method == USIM_MEGATRON_SP) {
        /* data-parallel groups: stride tp */
        l->z_size = j->dp;
        l->z_ng = j->tp;
        k = 0;
        for (int t = 0; t < j->tp; t++)
            for (int p = 0; p < j->dp; p++)
                l->z_ranks[k++] = p * j->tp + t;
    } else {
        l->z_size = G;
        l->z_ng = 1;
        for (int i = 0; i < G; i++)
            l->z_ranks[i] = i;
    }
    return USIM_OK;
}

/* Ulysses pair matrix of all-to-all `which` on P ranks for a sequence of seq tokens. */
static void a2a_pairs(const shape *x, int64_t seq, int P, int which, uint64_t *pb)
{
    uly_attn_desc a;
    attn_desc(x, seq, &a);
    int rep = uly_plan_kv_replicated(&a, P);
    uint64_t row = (uint64_t)x->b * (uint64_t)x->d * (uint64_t)x->e;
    for (int s = 0; s < P; s++)
        for (int d = 0; d < P; d++) {
            int64_t tmp, ns, nd, hs, hd, kvs, kvd, hbs, hbd;
            uly_split(seq, P, s, &tmp, &ns);
            uly_split(seq, P, d, &tmp, &nd);
            uly_split(x->H, P, s, &hbs, &hs);
            uly_split(x->H, P, d, &hbd, &hd);
            uly_kv_range(&a, hbs, hs, &tmp, &kvs);
            uly_kv_range(&a, hbd, hd, &tmp, &kvd);
            uint64_t v = 0;
            switch (which) {
            case ULY_A2A_Q: case ULY_A2A_DO: v = (uint64_t)(ns * hd); break;
            case ULY_A2A_K: case ULY_A2A_V: v = (uint64_t)(ns * kvd); break;
            case ULY_A2A_O: case ULY_A2A_DQ: v = (uint64_t)(nd * hs); break;
            default: v = rep ? (uint64_t)(nd * hs) : (uint64_t)(nd * kvs); break;
            }
            pb[(size_t)s * P + d] = s == d ? 0 : v * row;
        }
}

static int ring_chunks(int64_t total, int P, uint64_t mult, uint64_t *chunk)
{
    for (int p = 0; p < P; p++) {
        int64_t beg, cnt;
        uly_split(total, P, p, &beg, &cnt);
        chunk[p] = (uint64_t)cnt * mult;
    }
    return USIM_OK;
}

/* Simulate (or recall) every collective the job uses. */
static int job_colls(usim_sim *sim, const usim_model *m, const usim_job *j, const shape *x,
                     const layout *l, jobcoll *jc)
{
    memset(jc, 0, sizeof *jc);
    int rc = USIM_OK;
    int P = l->sp_size, Pmax = P > l->z_size ? P : l->z_size;
    if (l->ring_size > Pmax)
        Pmax = l->ring_size;
    uint64_t *pb = usim_malloc((size_t)P * P * sizeof *pb);
    uint64_t *ch = usim_malloc((size_t)Pmax * sizeof *ch);
    if (!pb || !ch) {
        free(pb);
        free(ch);
        return usim_set_error(USIM_ENOMEM, "out of memory");
    }
    usim_coll c;
    /* sequence parallel */
    if (j->method == USIM_ULYSSES || j->method == USIM_USP) {
        int64_t seq = x->s;
        if (j->method == USIM_USP) {
            int64_t b;
            uly_split(x->s, x->r, 0, &b, &seq);
        }
        for (int w = 0; w < ULY_A2A_COUNT && !rc; w++) {
            a2a_pairs(x, seq, P, w, pb);
            c = (usim_coll){j->a2a, l->sp_ng, P, l->sp_ranks, pb, NULL, 0};
            rc = coll(sim, &c, &jc->r[C_A2A0 + w]);
            jc->have[C_A2A0 + w] = 1;
        }
    }
    if (!rc && j->method == USIM_MEGATRON_SP) {
        ring_chunks(x->s, P, (uint64_t)x->b * x->h * x->e, ch);
        c = (usim_coll){USIM_ALLGATHER, l->sp_ng, P, l->sp_ranks, NULL, ch, 0};
        if (!(rc = coll(sim, &c, &jc->r[C_AG]))) {
            c.type = USIM_REDUCE_SCATTER;
            rc = coll(sim, &c, &jc->r[C_RS]);
        }
        jc->have[C_AG] = jc->have[C_RS] = 1;
    }
    if (!rc && (j->method == USIM_RING || j->method == USIM_RING_ZIGZAG || j->method == USIM_USP)) {
        const int *rk = j->method == USIM_USP ? l->ring_ranks : l->sp_ranks;
        int ng = j->method == USIM_USP ? l->ring_ng : l->sp_ng;
        int R = j->method == USIM_USP ? l->ring_size : P;
        uint64_t kvb = (uint64_t)x->b * (uint64_t)x->tk * (uint64_t)x->kv_l * x->d * x->e;
        if (R > 1) {
            c = (usim_coll){USIM_RING_SHIFT, ng, R, rk, NULL, NULL, 2 * kvb};
            if (!(rc = coll(sim, &c, &jc->r[C_HOP_F]))) {
                c.bytes = 4 * kvb;
                if (!(rc = coll(sim, &c, &jc->r[C_HOP_B]))) {
                    c.bytes = 2 * kvb;
                    rc = coll(sim, &c, &jc->r[C_HOP_DKV]);
                }
            }
            jc->have[C_HOP_F] = jc->have[C_HOP_B] = jc->have[C_HOP_DKV] = 1;
        }
    }
    /* ZeRO / data parallel */
    if (!rc && l->z_size > 1) {
        int Zs = l->z_size;
        ring_chunks((int64_t)llround(x->layer_params), Zs, (uint64_t)x->e, ch);
        c = (usim_coll){USIM_ALLGATHER, l->z_ng, Zs, l->z_ranks, NULL, ch, 0};
        if (j->zero >= 3)
            rc = coll(sim, &c, &jc->r[C_Z_AG]), jc->have[C_Z_AG] = 1;
        c.type = j->zero >= 1 ? USIM_REDUCE_SCATTER : USIM_ALLREDUCE;
        if (!rc)
            rc = coll(sim, &c, &jc->r[j->zero >= 1 ? C_Z_RS : C_Z_AR]),
            jc->have[j->zero >= 1 ? C_Z_RS : C_Z_AR] = 1;
        ring_chunks((int64_t)llround(x->emb_params), Zs, (uint64_t)x->e, ch);
        c.type = USIM_ALLGATHER;
        if (!rc && j->zero >= 3)
            rc = coll(sim, &c, &jc->r[C_E_AG]), jc->have[C_E_AG] = 1;
        c.type = j->zero >= 1 ? USIM_REDUCE_SCATTER : USIM_ALLREDUCE;
        if (!rc)
            rc = coll(sim, &c, &jc->r[j->zero >= 1 ? C_E_RS : C_E_AR]),
            jc->have[j->zero >= 1 ? C_E_RS : C_E_AR] = 1;
        if (!rc && (j->zero == 1 || j->zero == 2)) {
            ring_chunks((int64_t)llround(x->gpu_params), Zs, (uint64_t)x->e, ch);
            c.type = USIM_ALLGATHER;
            rc = coll(sim, &c, &jc->r[C_POST_AG]);
            jc->have[C_POST_AG] = 1;
        }
    }
    free(pb);
    free(ch);
    return rc;
}

/* ------------------------------------------------------------ op graph */

typedef struct op {
    usim_time dur, start, end;
    int stream, kind;      /* kind: USIM_KIND_* for communication, -1 compute */
    int dep[3];
    int coll;              /* C_* or -1 */
    int layer;
    const char *name;
    int done;
    int mult;              /* collective instances this op stands for */
    int sdep;              /* op that must have started (ring tails), or -1 */
    usim_time tail_B, tail_H;  /* ring tail: block and hop durations */
    int tail_R;            /* ring tail: ring size (0: not a tail) */
    usim_time tail_e1;     /* ring tail: end bound from compute and the first hop */
    int tail;              /* hop chain: its ring tail op, or -1 */
    /* communication under contention: rem is isolated-time work left (ps) */
    double rem, rate, u[USIM_NCLASS];
    usim_time t_last;
    uint32_t ver;
} op;

typedef struct graph {
    op *ops;
    int n, cap;
    int *sq[NSTREAM];
    int nsq[NSTREAM], capsq[NSTREAM], head[NSTREAM];
    int busy[NSTREAM];
    int err;
    int contention;        /* share link classes between overlapping communications */
    int active[NSTREAM], nactive;
    usim_engine *eng;
} graph;

static int g_add(graph *g, int stream, usim_time dur, int kind, int coll_id, int layer,
                 const char *name, int d0, int d1, int d2)
{
    if (g->err)
        return -1;
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 1024;
        op *no = usim_realloc(g->ops, (size_t)cap * sizeof *no);
        if (!no) {
            g->err = USIM_ENOMEM;
            return -1;
        }
        g->ops = no;
        g->cap = cap;
    }
    if (g->nsq[stream] == g->capsq[stream]) {
        int cap = g->capsq[stream] ? 2 * g->capsq[stream] : 1024;
        int *ns = usim_realloc(g->sq[stream], (size_t)cap * sizeof *ns);
        if (!ns) {
            g->err = USIM_ENOMEM;
            return -1;
        }
        g->sq[stream] = ns;
        g->capsq[stream] = cap;
    }
    int id = g->n++;
    op *o = &g->ops[id];
    memset(o, 0, sizeof *o);
    o->dur = dur;
    o->stream = stream;
    o->kind = kind;
    o->coll = coll_id;
    o->layer = layer;
    o->name = name;
    o->dep[0] = d0;
    o->dep[1] = d1;
    o->dep[2] = d2;
    o->start = o->end = -1;
    o->mult = 1;
    o->sdep = -1;
    o->tail = -1;
    g->sq[stream][g->nsq[stream]++] = id;
    return id;
}

static void g_free(graph *g)
{
    free(g->ops);
    for (int s = 0; s < NSTREAM; s++)
        free(g->sq[s]);
    usim_engine_free(g->eng);
}

static void on_op_done(usim_engine *e, void *ctx, int64_t arg);

static void g_at(graph *g, usim_time t, int id)
{
    int64_t a = (int64_t)(((uint64_t)g->ops[id].ver << 32) | (uint32_t)id);
    if (usim_engine_at(g->eng, t, on_op_done, g, a))
        g->err = USIM_ENOMEM;
}

/* Contention between communications that overlap in time (at most one per
 * communication stream): on each link class of the representative GPU, the
 * running operations' isolated utilizations u add up; an operation using a
 * class loaded above 1 is slowed by that load (processor sharing).  Rates are
 * recomputed whenever a communication starts or ends. */
static void g_reshare(graph *g, usim_time now)
{
    double load[USIM_NCLASS] = {0};
    for (int i = 0; i < g->nactive; i++) {
        op *o = &g->ops[g->active[i]];
        o->rem -= o->rate * (double)(now - o->t_last);
        if (o->rem < 0)
            o->rem = 0;
        o->t_last = now;
        for (int c = 0; c < USIM_NCLASS; c++)
            load[c] += o->u[c];
    }
    for (int i = 0; i < g->nactive; i++) {
        int id = g->active[i];
        op *o = &g->ops[id];
        double s = 1;
        if (g->contention)
            for (int c = 0; c < USIM_NCLASS; c++)
                if (o->u[c] > 0 && load[c] > s)
                    s = load[c];
        double rate = 1 / s;
        if (rate == o->rate && o->ver > 0)
            continue;   /* unchanged: keep the scheduled completion */
        o->rate = rate;
        o->ver++;
        double left = o->rem / rate;
        usim_time dt = (usim_time)ceil(left - 1e-6);
        g_at(g, now + (dt > 0 ? dt : 0), id);
    }
}

static void g_try_start(graph *g)
{
    usim_time now = usim_engine_now(g->eng);
    int started_comm = 0;
    for (int s = 0; s < NSTREAM; s++) {
        if (g->busy[s] || g->head[s] >= g->nsq[s])
            continue;
        int id = g->sq[s][g->head[s]];
        op *o = &g->ops[id];
        int ready = 1;
        for (int k = 0; k < 3; k++)
            if (o->dep[k] >= 0 && !g->ops[o->dep[k]].done)
                ready = 0;
        if (o->sdep >= 0 && g->ops[o->sdep].start < 0)
            ready = 0;
        if (!ready)
            continue;
        g->busy[s] = 1;
        g->head[s]++;
        o->start = now;
        if (o->stream != ST_COMPUTE) {
            o->rem = (double)o->dur;
            o->rate = 0;
            o->t_last = now;
            g->active[g->nactive++] = id;
            started_comm = 1;
            continue;
        }
        if (o->tail_R > 1) {
            /* Blocks 1..R-1 of a ring pass: block k needs hop k-1, which ends at
             * h + k H (h: start of the hop chain); blocks run back to back.  The
             * recurrence e_k = max(e_{k-1}, h + k H) + B has the closed form
             * max(now + (R-1) B, h + H + (R-1) B, end of the hop chain + B)
             * (the max of a linear function of k is at an end point); the last
             * term is known when the chain ends (it may be slowed by contention). */
            usim_time h = g->ops[o->sdep].start, B = o->tail_B, H = o->tail_H;
            int64_t R = o->tail_R;
            usim_time e = now + (R - 1) * B;
            if (h + H + (R - 1) * B > e)
                e = h + H + (R - 1) * B;
            o->tail_e1 = e;
            const op *chain = &g->ops[o->sdep];
            if (chain->done) {
                if (chain->end + B > e)
                    e = chain->end + B;
                g_at(g, e, id);
            }
            continue;   /* else scheduled when the chain ends */
        }
        g_at(g, now + o->dur, id);
    }
    if (started_comm)
        g_reshare(g, now);
}

static void on_op_done(usim_engine *e, void *ctx, int64_t arg)
{
    graph *g = ctx;
    if (g->err)
        return;   /* a failed run drains its queue */
    int id = (int)(arg & 0xffffffff);
    uint32_t ver = (uint32_t)((uint64_t)arg >> 32);
    op *o = &g->ops[id];
    if (o->ver != ver || o->done)
        return;   /* superseded by a rate change */
    usim_time now = usim_engine_now(e);
    o->end = now;
    o->done = 1;
    g->busy[o->stream] = 0;
    if (o->stream != ST_COMPUTE) {
        for (int i = 0; i < g->nactive; i++)
            if (g->active[i] == id) {
                g->active[i] = g->active[--g->nactive];
                break;
            }
        o->dur = o->end - o->start;
        g_reshare(g, now);
        if (o->tail >= 0) {
            op *t = &g->ops[o->tail];
            if (t->start >= 0 && !t->done) {
                usim_time end = now + t->tail_B > t->tail_e1 ? now + t->tail_B : t->tail_e1;
                g_at(g, end, o->tail);
            }
        }
    } else if (o->tail_R > 1) {
        o->dur = o->end - o->start;
    }
    g_try_start(g);
}

/* ------------------------------------------------------------ building */

typedef struct bld {
    graph g;
    const usim_platform *p;
    const usim_model *m;
    const usim_job *j;
    const shape *x;
    const flops *f;
    const jobcoll *jc;
    double rate_gemm, rate_attn;
    int last_c;                  /* last compute op */
    int *layer_last_c;           /* last compute op of each layer (current pass) */
    int *bwd_last_c;
    int last_grad;
    int last_sp;
} bld;

static usim_time t_gemm(const bld *b, double fl) { return usim_ps(fl / b->rate_gemm); }
static usim_time t_attn(const bld *b, double fl) { return usim_ps(fl / b->rate_attn); }
static usim_time t_mem(const bld *b, double bytes) { return usim_ps(bytes / b->p->hbm_Bps); }

static int comp(bld *b, usim_time dur, int layer, const char *name, int d0, int d1)
{
    int id = g_add(&b->g, ST_COMPUTE, dur, -1, -1, layer, name, d0, d1, -1);
    b->last_c = id;
    return id;
}

/* Isolated utilization of each link class of the busiest GPU during a
 * collective: bytes / (duration x bandwidth), at most 1. */
static void set_util(bld *b, int id, int cid)
{
    if (id < 0)
        return;
    const usim_coll_result *r = &b->jc->r[cid];
    double bw[USIM_NCLASS] = {b->p->nvl_Bps, b->p->nic_Bps};
    for (int c = 0; c < USIM_NCLASS; c++) {
        double u = r->duration > 0 ? (double)r->max_sent[c] / (usim_sec(r->duration) * bw[c]) : 0;
        b->g.ops[id].u[c] = u > 1 ? 1 : u;
    }
}

static int comm(bld *b, int stream, int kind, int cid, int layer, const char *name, int d0, int d1)
{
    int id = g_add(&b->g, stream, b->jc->r[cid].duration, kind, cid, layer, name, d0, d1, -1);
    set_util(b, id, cid);
    return id;
}

/* A ring-attention pass of R steps: block 0 (the diagonal) and the chain of
 * R-1 hops start together after `dep`; blocks 1..R-1 form one tail op whose
 * duration is exact for the chained dependencies (see g_try_start).  Returns
 * the tail (or block 0 when R == 1); *hops gets the hop chain (-1 if none). */
static int ring_pass(bld *b, int l, int R, double step0, double step, int hop_cid, int dep,
                     const char *name, int *hops)
{
    int b0 = comp(b, t_attn(b, step0), l, name, dep, -1);
    *hops = -1;
    if (R < 2)
        return b0;
    usim_time H = b->jc->r[hop_cid].duration;
    int hc = g_add(&b->g, ST_SP, (R - 1) * H, USIM_KIND_SP, hop_cid, l, "ring hops", dep, -1, -1);
    if (hc < 0)
        return -1;
    b->g.ops[hc].mult = R - 1;
    set_util(b, hc, hop_cid);
    int t = comp(b, 0, l, name, b0, -1);
    if (t < 0)
        return -1;
    b->g.ops[t].sdep = hc;
    b->g.ops[hc].tail = t;
    b->g.ops[t].tail_R = R;
    b->g.ops[t].tail_B = t_attn(b, step);
    b->g.ops[t].tail_H = H;
    *hops = hc;
    return t;
}

/* Forward of one layer (also used for full recompute).  Returns the last op. */
static int layer_fwd(bld *b, int l, int param_dep, int recompute)
{
    const flops *f = b->f;
    const usim_job *j = b->j;
    int prev = b->last_c;
    int c;
    switch (j->method) {
    case USIM_ULYSSES: case USIM_USP: {
        c = comp(b, t_gemm(b, f->qkv) + t_mem(b, f->elem_bytes * 0.3), l,
                 recompute ? "recompute: layernorm + QKV" : "layernorm + QKV", param_dep, prev);
        comm(b, ST_SP, USIM_KIND_SP, C_A2A0 + ULY_A2A_Q, l, "all-to-all q", c, -1);
        comm(b, ST_SP, USIM_KIND_SP, C_A2A0 + ULY_A2A_K, l, "all-to-all k", c, -1);
        int a = comm(b, ST_SP, USIM_KIND_SP, C_A2A0 + ULY_A2A_V, l, "all-to-all v", c, -1);
        if (j->method == USIM_ULYSSES) {
            c = comp(b, t_attn(b, f->attn), l, recompute ? "recompute: attention" : "attention", a, -1);
        } else {
            int hops;
            c = ring_pass(b, l, b->x->r, f->attn_step[0], f->attn_step[1], C_HOP_F, a,
                          "attention blocks", &hops);
        }
        a = comm(b, ST_SP, USIM_KIND_SP, C_A2A0 + ULY_A2A_O, l, "all-to-all o", c, -1);
        c = comp(b, t_gemm(b, f->out + f->mlp) + t_mem(b, f->elem_bytes * 0.7), l,
                 recompute ? "recompute: out-proj + MLP" : "out-proj + MLP", a, -1);
        break;
    }
    case USIM_MEGATRON_SP: {
        int a = comm(b, ST_SP, USIM_KIND_SP, C_AG, l, "all-gather x", prev, param_dep);
        c = comp(b, t_gemm(b, f->qkv) + t_mem(b, f->elem_bytes * 0.3), l,
                 recompute ? "recompute: QKV" : "layernorm + QKV", a, param_dep);
        c = comp(b, t_attn(b, f->attn), l, recompute ? "recompute: attention" : "attention", c, -1);
        c = comp(b, t_gemm(b, f->out), l, "out-proj", c, -1);
        a = comm(b, ST_SP, USIM_KIND_SP, C_RS, l, "reduce-scatter", c, -1);
        a = comm(b, ST_SP, USIM_KIND_SP, C_AG, l, "all-gather", a, -1);
        c = comp(b, t_gemm(b, f->mlp) + t_mem(b, f->elem_bytes * 0.7), l,
                 recompute ? "recompute: MLP" : "MLP", a, -1);
        a = comm(b, ST_SP, USIM_KIND_SP, C_RS, l, "reduce-scatter", c, -1);
        b->last_sp = a;
        /* the next layer's all-gather depends on this reduce-scatter (FIFO) */
        c = a;
        break;
    }
    case USIM_RING: case USIM_RING_ZIGZAG: {
        c = comp(b, t_gemm(b, f->qkv) + t_mem(b, f->elem_bytes * 0.3), l,
                 recompute ? "recompute: layernorm + QKV" : "layernorm + QKV", param_dep, prev);
        int hops;
        ring_pass(b, l, b->x->P, f->attn_step[0], f->attn_step[1], C_HOP_F, c, "attention blocks",
                  &hops);
        c = comp(b, t_gemm(b, f->out + f->mlp) + t_mem(b, f->elem_bytes * 0.7), l,
                 recompute ? "recompute: out-proj + MLP" : "out-proj + MLP", -1, -1);
        break;
    }
    default:
        c = -1;
        break;
    }
    return c;
}

/* Backward of one layer.  Returns the op after which the layer's weight
 * gradients are complete. */
static int layer_bwd(bld *b, int l, int param_dep)
{
    const flops *f = b->f;
    const usim_job *j = b->j;
    int c, a;
    double sel = j->recompute == USIM_RC_SELECTIVE ? f->elem_bytes * 0.5 : 0;
    switch (j->method) {
    case USIM_ULYSSES: case USIM_USP: {
        c = comp(b, 2 * t_gemm(b, f->out + f->mlp) + t_mem(b, 2 * f->elem_bytes * 0.7 + sel), l,
                 "MLP + out-proj backward", param_dep, -1);
        a = comm(b, ST_SP, USIM_KIND_SP, C_A2A0 + ULY_A2A_DO, l, "all-to-all do", c, -1);
        if (j->method == USIM_ULYSSES) {
            c = comp(b, t_attn(b, ATTN_BWD_FACTOR * f->attn), l, "attention backward", a, -1);
        } else {
            int hops;
            ring_pass(b, l, b->x->r, ATTN_BWD_FACTOR * f->attn_step[0],
                      ATTN_BWD_FACTOR * f->attn_step[1], C_HOP_B, a, "attention blocks backward",
                      &hops);
            if (b->jc->have[C_HOP_DKV])
                comm(b, ST_SP, USIM_KIND_SP, C_HOP_DKV, l, "ring hop dkv home", b->last_c, -1);
            c = b->last_c;
        }
        a = comm(b, ST_SP, USIM_KIND_SP, C_A2A0 + ULY_A2A_DQ, l, "all-to-all dq", c, -1);
        comm(b, ST_SP, USIM_KIND_SP, C_A2A0 + ULY_A2A_DK, l, "all-to-all dk", c, -1);
        a = comm(b, ST_SP, USIM_KIND_SP, C_A2A0 + ULY_A2A_DV, l, "all-to-all dv", c, -1);
        c = comp(b, 2 * t_gemm(b, f->qkv) + t_mem(b, 2 * f->elem_bytes * 0.3), l,
                 "QKV + layernorm backward", a, -1);
        break;
    }
    case USIM_MEGATRON_SP: {
        a = comm(b, ST_SP, USIM_KIND_SP, C_AG, l, "all-gather dy", b->last_c, param_dep);
        c = comp(b, 2 * t_gemm(b, f->mlp) + t_mem(b, 2 * f->elem_bytes * 0.7 + sel), l,
                 "MLP backward", a, param_dep);
        a = comm(b, ST_SP, USIM_KIND_SP, C_RS, l, "reduce-scatter dx", c, -1);
        a = comm(b, ST_SP, USIM_KIND_SP, C_AG, l, "all-gather dy", a, -1);
        c = comp(b, 2 * t_gemm(b, f->out), l, "out-proj backward", a, -1);
        c = comp(b, t_attn(b, ATTN_BWD_FACTOR * f->attn), l, "attention backward", c, -1);
        c = comp(b, 2 * t_gemm(b, f->qkv) + t_mem(b, 2 * f->elem_bytes * 0.3), l,
                 "QKV + layernorm backward", c, -1);
        a = comm(b, ST_SP, USIM_KIND_SP, C_RS, l, "reduce-scatter dx", c, -1);
        /* the next (lower) layer's backward needs dx */
        b->last_c = c;
        b->last_sp = a;
        return c;
    }
    case USIM_RING: case USIM_RING_ZIGZAG: {
        c = comp(b, 2 * t_gemm(b, f->out + f->mlp) + t_mem(b, 2 * f->elem_bytes * 0.7 + sel), l,
                 "MLP + out-proj backward", param_dep, -1);
        int hops;
        ring_pass(b, l, b->x->P, ATTN_BWD_FACTOR * f->attn_step[0],
                  ATTN_BWD_FACTOR * f->attn_step[1], C_HOP_B, c, "attention blocks backward", &hops);
        a = b->jc->have[C_HOP_DKV]
                ? comm(b, ST_SP, USIM_KIND_SP, C_HOP_DKV, l, "ring hop dkv home", b->last_c, -1)
                : b->last_c;
        c = comp(b, 2 * t_gemm(b, f->qkv) + t_mem(b, 2 * f->elem_bytes * 0.3), l,
                 "QKV + layernorm backward", a, -1);
        break;
    }
    default:
        c = -1;
        break;
    }
    return c;
}

static int build(bld *b, int micro_steps)
{
    const usim_job *j = b->j;
    const jobcoll *jc = b->jc;
    const flops *f = b->f;
    int L = (int)b->x->L;
    int z3 = j->zero >= 3 && jc->have[C_Z_AG];
    b->last_c = -1;
    b->last_grad = -1;
    b->last_sp = -1;
    for (int ms = 0; ms < micro_steps; ms++) {
        int last_ms = ms == micro_steps - 1;
        int reduce = (j->zero >= 2) || last_ms;
        /* forward */
        int emb = -1;
        if (z3)
            emb = comm(b, ST_PARAM, USIM_KIND_PARAM, C_E_AG, -1, "gather embedding", -1, -1);
        for (int l = 0; l < L; l++) {
            int pd = -1;
            if (z3) {
                int gate = l >= 2 ? b->layer_last_c[l - 2] : -1;
                pd = comm(b, ST_PARAM, USIM_KIND_PARAM, C_Z_AG, l, "gather layer params", gate, -1);
            }
            b->layer_last_c[l] = layer_fwd(b, l, pd, 0);
        }
        comp(b, t_gemm(b, f->head) + t_mem(b, f->head_bytes / 2), L, "LM head + loss", emb, -1);
        /* backward */
        comp(b, 2 * t_gemm(b, f->head) + t_mem(b, f->head_bytes / 2), L, "LM head backward", -1, -1);
        if (reduce && jc->have[C_E_RS])
            b->last_grad = comm(b, ST_GRAD, USIM_KIND_GRAD, C_E_RS, L, "reduce-scatter embedding grads",
                                b->last_c, -1);
        for (int l = L - 1; l >= 0; l--) {
            int pd = -1;
            if (z3) {
                int gate = l + 2 < L ? b->bwd_last_c[l + 2] : -1;
                pd = comm(b, ST_PARAM, USIM_KIND_PARAM, C_Z_AG, l, "gather layer params", gate, -1);
            }
            if (j->recompute == USIM_RC_FULL)
                layer_fwd(b, l, pd, 1);
            int done = layer_bwd(b, l, pd);
            b->bwd_last_c[l] = done;
            if (reduce) {
                if (jc->have[C_Z_RS])
                    b->last_grad = comm(b, ST_GRAD, USIM_KIND_GRAD, C_Z_RS, l, "reduce-scatter grads",
                                        done, -1);
                else if (jc->have[C_Z_AR])
                    b->last_grad = comm(b, ST_GRAD, USIM_KIND_GRAD, C_Z_AR, l, "all-reduce grads",
                                        done, -1);
            }
        }
        if (reduce && jc->have[C_E_AR])
            b->last_grad = comm(b, ST_GRAD, USIM_KIND_GRAD, C_E_AR, -1, "all-reduce embedding grads",
                                b->last_c, -1);
    }
    /* optimizer step: Adam on the local shard, HBM-bound (~36 bytes per parameter) */
    double local = j->zero >= 1 ? b->x->gpu_params / b->x->Z : b->x->gpu_params;
    int opt = comp(b, t_mem(b, 36 * local), -1, "optimizer step", b->last_grad, b->last_sp);
    if (jc->have[C_POST_AG])
        comm(b, ST_PARAM, USIM_KIND_PARAM, C_POST_AG, -1, "gather updated params", opt, -1);
    return b->g.err;
}

/* ------------------------------------------------------------ results */

static int cmp_time(const void *a, const void *b)
{
    usim_time x = *(const usim_time *)a, y = *(const usim_time *)b;
    return (x > y) - (x < y);
}

/* Exposed communication: instants when the compute stream is idle while some
 * communication runs, attributed to the first active kind in the order sp,
 * param, grad. */
static int exposed(const graph *g, usim_time end, double out[USIM_NKIND])
{
    int n = g->n;
    usim_time *pts = usim_malloc((size_t)(2 * n + 2) * sizeof *pts);
    if (!pts)
        return usim_set_error(USIM_ENOMEM, "out of memory");
    int np = 0;
    for (int i = 0; i < n; i++) {
        pts[np++] = g->ops[i].start;
        pts[np++] = g->ops[i].end;
    }
    pts[np++] = 0;
    pts[np++] = end;
    qsort(pts, (size_t)np, sizeof *pts, cmp_time);
    int u = 0;
    for (int i = 0; i < np; i++)
        if (u == 0 || pts[i] != pts[u - 1])
            pts[u++] = pts[i];
    int idx[NSTREAM] = {0};
    usim_time acc[USIM_NKIND] = {0};
    for (int i = 0; i + 1 < u; i++) {
        usim_time t0 = pts[i], t1 = pts[i + 1];
        int active[NSTREAM];
        for (int s = 0; s < NSTREAM; s++) {
            /* ops on a stream are in order and do not overlap */
            while (idx[s] < g->nsq[s] && g->ops[g->sq[s][idx[s]]].end <= t0)
                idx[s]++;
            active[s] = idx[s] < g->nsq[s] && g->ops[g->sq[s][idx[s]]].start <= t0 &&
                        g->ops[g->sq[s][idx[s]]].end >= t1 && g->ops[g->sq[s][idx[s]]].end > t0;
        }
        if (active[ST_COMPUTE])
            continue;   /* busy, or a ring tail: accounted for by the caller */
        if (active[ST_SP])
            acc[USIM_KIND_SP] += t1 - t0;
        else if (active[ST_PARAM])
            acc[USIM_KIND_PARAM] += t1 - t0;
        else if (active[ST_GRAD])
            acc[USIM_KIND_GRAD] += t1 - t0;
    }
    for (int k = 0; k < USIM_NKIND; k++)
        out[k] = usim_sec(acc[k]);
    free(pts);
    return USIM_OK;
}

static void trace_write(FILE *t, const graph *g, const jobcoll *jc, const char *title)
{
    /* the title holds user-supplied names: escape it; every other string is a literal */
    fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"title\":\"", t);
    for (const char *c = title; *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(t, "\\%c", *c);
        else if ((unsigned char)*c < 0x20)
            fprintf(t, "\\u%04x", (unsigned)(unsigned char)*c);
        else
            fputc(*c, t);
    }
    fputs("\"},\"traceEvents\":[\n", t);
    fprintf(t, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"GPU 0\"}},\n");
    fprintf(t, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":2,\"args\":{\"name\":\"links of GPU 0\"}}");
    for (int s = 0; s < NSTREAM; s++)
        fprintf(t, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
                s + 1, stream_name[s]);
    fprintf(t, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":2,\"tid\":1,\"args\":{\"name\":\"NVLink\"}}");
    fprintf(t, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":2,\"tid\":2,\"args\":{\"name\":\"NIC\"}}");
    for (int i = 0; i < g->n; i++) {
        const op *o = &g->ops[i];
        double ts = (double)o->start * 1e-6, dur = (double)(o->end - o->start) * 1e-6;
        fprintf(t, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,"
                   "\"ts\":%.6f,\"dur\":%.6f,\"args\":{\"layer\":%d}}",
                o->name, o->kind < 0 ? "compute" : usim_kind_name(o->kind), o->stream + 1, ts, dur,
                o->layer);
        if (o->coll >= 0)
            for (int k = 0; k < USIM_NCLASS; k++)
                if (jc->r[o->coll].max_sent[k] > 0)
                    fprintf(t, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":2,\"tid\":%d,"
                               "\"ts\":%.6f,\"dur\":%.6f,\"args\":{\"bytes_sent_max_per_gpu\":%llu}}",
                            o->name, usim_kind_name(o->kind), k + 1, ts, dur,
                            (unsigned long long)jc->r[o->coll].max_sent[k]);
    }
    fprintf(t, "\n]}\n");
}

int usim_simulate(usim_sim *sim, const usim_model *m, const usim_job *jin, FILE *trace,
                  usim_result *r)
{
    memset(r, 0, sizeof *r);
    usim_job j = *jin;
    if (j.gpus != sim->gpus)
        return usim_set_error(USIM_EINVAL, "job has %d GPUs, simulation context %d", j.gpus, sim->gpus);
    int rc = usim_job_resolve(m, &sim->p, &j);
    if (rc)
        return rc;
    const usim_platform *p = &sim->p;
    shape x;
    make_shape(m, &j, &x);
    flops f;
    make_flops(m, &j, &x, m->causal && p->attn_causal_skip, &f);
    layout lay;
    if ((rc = make_layout(&j, &lay)))
        return rc;
    jobcoll jc;
    int before = sim->simulated;
    rc = job_colls(sim, m, &j, &x, &lay, &jc);
    layout_free(&lay);
    if (rc)
        return rc;
    int64_t per_step = (int64_t)j.dp * m->micro_batch;
    int micro = (int)((m->global_batch + per_step - 1) / per_step);
    if (micro < 1)
        micro = 1;
    bld b;
    memset(&b, 0, sizeof b);
    b.p = p;
    b.m = m;
    b.j = &j;
    b.x = &x;
    b.f = &f;
    b.jc = &jc;
    b.rate_gemm = p->peak_flops[m->dtype] * p->gemm_eff;
    b.rate_attn = p->peak_flops[m->dtype] * p->attn_eff;
    b.layer_last_c = usim_malloc((size_t)m->layers * sizeof(int));
    b.bwd_last_c = usim_malloc((size_t)m->layers * sizeof(int));
    b.g.eng = usim_engine_new();
    b.g.contention = sim->contention;
    if (!b.layer_last_c || !b.bwd_last_c || !b.g.eng) {
        rc = usim_set_error(USIM_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = build(&b, micro))) {
        rc = usim_set_error(USIM_ENOMEM, "out of memory building the operation graph");
        goto out;
    }
    g_try_start(&b.g);
    usim_engine_run(b.g.eng);
    if (b.g.err) {
        rc = usim_set_error(USIM_ENOMEM, "out of memory running the operation graph");
        goto out;
    }
    usim_time end = 0, busy = 0, tail_wait = 0;
    for (int i = 0; i < b.g.n; i++) {
        const op *o = &b.g.ops[i];
        USIM_CHECK(o->done && o->end >= o->start);
        if (o->end > end)
            end = o->end;
        if (o->stream == ST_COMPUTE && o->tail_R > 1) {
            /* a ring tail: R-1 blocks of compute, the rest waits for hops */
            usim_time work = (o->tail_R - 1) * o->tail_B;
            busy += work;
            tail_wait += o->dur - work;
        } else if (o->stream == ST_COMPUTE)
            busy += o->dur;
        else {
            r->comm_s[o->kind] += usim_sec(o->dur);
            for (int k = 0; k < USIM_NCLASS; k++)
                r->sent_bytes[k] += (double)jc.r[o->coll].max_sent[k] * o->mult;
        }
    }
    if ((rc = exposed(&b.g, end, r->exposed_s)))
        goto out;
    r->exposed_s[USIM_KIND_SP] += usim_sec(tail_wait);
    r->job = j;
    r->seq = m->seq;
    r->micro_steps = micro;
    r->global_batch = (int64_t)micro * per_step;
    r->iter_s = usim_sec(end);
    r->compute_s = usim_sec(busy);
    r->events = usim_engine_events(b.g.eng);
    r->collectives_simulated = sim->simulated - before;
    {
        double sent[2];
        if ((rc = usim_sp_layer_bytes(sim, m, &j, 0, sent)))
            goto out;
        r->sp_bytes_layer_fwd = sent[0];
    }
    double mf = usim_megatron_flops(m, r->global_batch, j.recompute == USIM_RC_FULL);
    r->tflops = mf / (r->iter_s * j.gpus) / 1e12;
    r->mfu = usim_model_flops(m, r->global_batch) / j.gpus / (r->iter_s * p->peak_flops[m->dtype]);
    memory(p, m, &j, &x, &r->mem);
    r->fits = r->mem.total <= p->hbm_bytes;
    if (trace) {
        char title[200];
        snprintf(title, sizeof title, "%s, %s, %d GPUs, %lld tokens", usim_method_name(j.method),
                 m->name, j.gpus, (long long)m->seq);
        trace_write(trace, &b.g, &jc, title);
        if (ferror(trace))
            rc = usim_set_error(USIM_EIO, "error writing the trace");
    }
out:
    free(b.layer_last_c);
    free(b.bwd_last_c);
    g_free(&b.g);
    return rc;
}

/* ------------------------------------------------------------ byte checks */

int usim_sp_layer_bytes(usim_sim *sim, const usim_model *m, const usim_job *jin, int gpu,
                        double sent[2])
{
    usim_job j = *jin;
    sent[0] = sent[1] = 0;
    int rc = usim_job_resolve(m, &sim->p, &j);
    if (rc)
        return rc;
    if (gpu < 0 || gpu >= sim->gpus)
        return usim_set_error(USIM_EINVAL, "GPU %d out of range", gpu);
    shape x;
    make_shape(m, &j, &x);
    layout l;
    if ((rc = make_layout(&j, &l)))
        return rc;
    int P = l.sp_size;
    uint64_t *pb = usim_malloc((size_t)P * P * sizeof *pb);
    uint64_t *ch = usim_malloc((size_t)P * sizeof *ch);
    uint64_t *cnt = sim->scratch_sent;
    if (!pb || !ch) {
        rc = usim_set_error(USIM_ENOMEM, "out of memory");
        goto out;
    }
    usim_coll c;
    usim_coll_result res;
    if (j.method == USIM_ULYSSES || j.method == USIM_USP) {
        int64_t seq = x.s, b0;
        if (j.method == USIM_USP)
            uly_split(x.s, x.r, 0, &b0, &seq);
        for (int w = 0; w < ULY_A2A_COUNT && !rc; w++) {
            a2a_pairs(&x, seq, P, w, pb);
            c = (usim_coll){USIM_A2A_DIRECT, l.sp_ng, P, l.sp_ranks, pb, NULL, 0};
            if (!(rc = usim_coll_count(sim->net, &c, &res, cnt, NULL)))
                sent[w >= ULY_A2A_DO] += (double)cnt[gpu];
        }
    }
    if (!rc && j.method == USIM_MEGATRON_SP) {
        ring_chunks(x.s, P, (uint64_t)x.b * x.h * x.e, ch);
        c = (usim_coll){USIM_ALLGATHER, l.sp_ng, P, l.sp_ranks, NULL, ch, 0};
        if (!(rc = usim_coll_count(sim->net, &c, &res, cnt, NULL))) {
            double ag = (double)cnt[gpu];
            c.type = USIM_REDUCE_SCATTER;
            if (!(rc = usim_coll_count(sim->net, &c, &res, cnt, NULL))) {
                sent[0] = 2 * ag + 2 * (double)cnt[gpu];
                sent[1] = sent[0];
            }
        }
    }
    if (!rc && (j.method == USIM_RING || j.method == USIM_RING_ZIGZAG || j.method == USIM_USP)) {
        const int *rk = j.method == USIM_USP ? l.ring_ranks : l.sp_ranks;
        int ng = j.method == USIM_USP ? l.ring_ng : l.sp_ng;
        int R = j.method == USIM_USP ? l.ring_size : P;
        uint64_t kvb = (uint64_t)x.b * (uint64_t)x.tk * (uint64_t)x.kv_l * x.d * x.e;
        if (R > 1) {
            c = (usim_coll){USIM_RING_SHIFT, ng, R, rk, NULL, NULL, 2 * kvb};
            if (!(rc = usim_coll_count(sim->net, &c, &res, cnt, NULL))) {
                sent[0] += (double)(R - 1) * cnt[gpu];
                sent[1] += (double)(R - 1) * 2 * cnt[gpu] + cnt[gpu];
            }
        }
    }
out:
    free(pb);
    free(ch);
    layout_free(&l);
    return rc;
}

int usim_analytic_sp_bytes(const usim_model *m, const usim_job *jin, int gpu, double sent[2])
{
    sent[0] = sent[1] = 0;
    usim_job j = *jin;
    usim_platform dummy;
    memset(&dummy, 0, sizeof dummy);
    dummy.gpus_per_node = j.gpus;
    int rc = usim_job_resolve(m, &dummy, &j);
    if (rc)
        return rc;
    double b = (double)m->micro_batch, e = usim_dtype_bytes(m->dtype), h = (double)m->hidden;
    double d = h / m->heads, hkv = d * m->kv_heads, N = (double)m->seq;
    int P = j.sp;
    int rank = gpu % P;
    switch (j.method) {
    case USIM_ULYSSES: case USIM_USP: {
        int u = j.ulysses, r = P / u;
        int64_t seq = m->seq, b0;
        if (j.method == USIM_USP)
            uly_split(m->seq, r, 0, &b0, &seq);
        uly_attn_desc a = {.batch = m->micro_batch, .seq = seq, .heads = m->heads,
                           .kv_heads = m->kv_heads, .head_dim = m->hidden / m->heads,
                           .causal = 1, .dtype = ULY_F32};
        uly_volume v;
        if (uly_plan_volume(&a, u, rank % u, &v))
            return usim_set_error(USIM_EINVAL, "uly_plan_volume: %s", uly_last_error());
        for (int w = 0; w < ULY_A2A_COUNT; w++)
            sent[w >= ULY_A2A_DO] += (double)v.sent[w] / 4 * e;   /* F32 -> model dtype */
        if (j.method == USIM_USP && r > 1) {
            int64_t hb, hc, kb, kc;
            uly_split(m->heads, u, 0, &hb, &hc);
            uly_kv_range(&a, hb, hc, &kb, &kc);
            double kvb = b * (double)seq * (double)kc * d * e;
            sent[0] += 2.0 * (r - 1) * kvb;
            sent[1] += (4.0 * (r - 1) + 2) * kvb;
        }
        break;
    }
    case USIM_MEGATRON_SP: {
        /* ring all-gather: every chunk but the next rank's; reduce-scatter: every chunk but mine */
        int64_t bg, c_next, c_me;
        uly_split(m->seq, P, (rank + 1) % P, &bg, &c_next);
        uly_split(m->seq, P, rank, &bg, &c_me);
        double row = b * h * e;
        sent[0] = 2 * (N - c_next) * row + 2 * (N - c_me) * row;
        sent[1] = sent[0];
        break;
    }
    case USIM_RING: case USIM_RING_ZIGZAG: {
        int64_t bg, n0;
        uly_split(m->seq, P, 0, &bg, &n0);
        double kvb = b * (double)n0 * hkv * e;
        sent[0] = 2.0 * (P - 1) * kvb;
        sent[1] = (4.0 * (P - 1) + 2) * kvb;
        break;
    }
    default:
        break;
    }
    return USIM_OK;
}
