/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cost.c -- the analytic cost of a job: the shapes rank 0 (the most loaded
 * rank) holds in the sequence and attention layouts, FLOPs and HBM traffic
 * per layer, the Megatron and model FLOPs of an iteration, memory per GPU and
 * the longest sequence that fits, and the closed-form sequence-parallel
 * volumes the byte check compares against.
 *
 * Not here: time (the compute model turns FLOPs into durations in program.c),
 * collectives (jobcoll.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "ulysses_plan.h"
#include "usim.h"
#include "usim_internal.h"

/* ------------------------------------------------------------ shapes */

void usim_attn_desc(const usim_shape *x, int64_t seq, uly_attn_desc *a)
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

int usim_a2a_layout(const usim_shape *x, int64_t seq, int U, uly_layout *L)
{
    uly_attn_desc a;
    uly_sp_plan p;
    usim_attn_desc(x, seq, &a);
    if (uly_sp_plan_init(&p, ULY_METHOD_ULYSSES, U, 0, ULY_PLACE_ULYSSES_INNER) || uly_layout_init(L, &a, &p))
        return usim_set_error(USIM_EINVAL, "the all-to-all layout of %lld tokens over %d GPUs: %s",
                              (long long)seq, U, uly_last_error());
    return USIM_OK;
}

uint64_t usim_ring_hop_elems(const usim_shape *x, uly_method m, int U, int R, int hop)
{
    uly_sp_plan p;
    if (!(uly_method_traits(m) & ULY_TRAIT_RING) || R < 2 ||
        uly_sp_plan_init(&p, m, U * R, m == ULY_METHOD_USP ? U : 0, ULY_PLACE_ULYSSES_INNER))
        return 0;
    uly_attn_desc a = {.batch = x->b, .seq = x->s, .heads = x->H, .kv_heads = x->Hkv, .head_dim = x->d,
                       .dtype = ULY_F32};
    uint64_t most = 0;
    for (int u = 0; u < U; u++) { /* the busiest ring: the group member with the most KV heads */
        uint64_t n = 0;
        if (hop == USIM_HOP_DKV_HOME) { /* position R-1 holds shard 0 last and sends its dK, dV home */
            int last = uly_plan_grid_rank(&p, u, R - 1);
            n = uly_plan_ring_hop_elems(&a, &p, last, R - 1, ULY_RING_DK) +
                uly_plan_ring_hop_elems(&a, &p, last, R - 1, ULY_RING_DV);
        } else {
            int w0 = hop == USIM_HOP_KV ? ULY_RING_K : ULY_RING_BK, w1 = hop == USIM_HOP_KV ? ULY_RING_V : ULY_RING_DV;
            for (int w = w0; w <= w1; w++)
                n += uly_plan_ring_hop_elems(&a, &p, uly_plan_grid_rank(&p, u, 0), 0, w);
        }
        if (n > most)
            most = n;
    }
    return most;
}

void usim_shape_make(const usim_model *m, const usim_job *j, usim_shape *x)
{
    memset(x, 0, sizeof *x);
    int T = j->method == ULY_METHOD_MEGATRON_SP ? 1 : (j->tp > 0 ? j->tp : 1);
    x->T = T;
    x->b = m->micro_batch;
    x->s = m->seq;
    x->h = m->hidden;
    x->H = m->heads / T;
    x->Hkv = m->kv_heads >= T ? m->kv_heads / T : 1;   /* KV heads replicated when fewer than T */
    x->d = m->hidden / m->heads;
    x->hkv = m->kv_heads * x->d;                        /* the model's KV width (weights, GEMMs) */
    x->F = m->ffn;
    x->V = m->vocab;
    x->e = usim_dtype_bytes(m->dtype);
    x->L = m->layers;
    x->Ls = m->layers / (j->pp > 0 ? j->pp : 1);
    x->P = j->sp;
    x->u = j->ulysses;
    x->r = j->sp / j->ulysses;
    int64_t beg;
    uly_split(x->s, x->P, 0, &beg, &x->n);
    uly_split(x->n, T, 0, &beg, &x->tok);
    double h = (double)x->h;
    double lp = h * (h + 2.0 * x->hkv) + h * h + (m->gated_mlp ? 3.0 : 2.0) * h * x->F + 4 * h;
    x->emb_params = (double)x->V * h * (m->tied_embeddings ? 1 : 2);
    if (j->method == ULY_METHOD_MEGATRON_SP) {
        x->layer_params = lp / j->tp;
        x->emb_params /= j->tp;
        x->Z = j->dp;
    } else {
        x->layer_params = lp / T;
        x->emb_params /= T;
        x->Z = j->dp * j->sp;
    }
    /* pipeline: a GPU holds its stage's layers (and, conservatively, the
     * embedding and LM head: the first and last stages hold one each) */
    x->gpu_params = x->Ls * x->layer_params + x->emb_params;
    uly_attn_desc a;
    switch (j->method) {
    case ULY_METHOD_ULYSSES:
        uly_split(x->H, x->P, 0, &beg, &x->hq_l);
        usim_attn_desc(x, x->s, &a);
        uly_kv_range(&a, beg, x->hq_l, &beg, &x->kv_l);
        x->tq = x->tk = x->s;
        break;
    case ULY_METHOD_MEGATRON_SP:
        x->hq_l = x->H / x->P;
        x->kv_l = x->Hkv >= x->P ? x->Hkv / x->P : 1;
        x->tq = x->tk = x->s;
        break;
    case ULY_METHOD_RING: case ULY_METHOD_ZIGZAG:
        x->hq_l = x->H;
        x->kv_l = x->Hkv;
        x->tq = x->tk = x->n;
        break;
    case ULY_METHOD_ALLGATHER:
        /* local queries against every key: K and V gathered (and kept for the backward) */
        x->hq_l = x->H;
        x->kv_l = x->Hkv;
        x->tq = x->n;
        x->tk = x->s;
        break;
    case ULY_METHOD_USP: {
        int64_t sl;
        uly_split(x->s, x->r, 0, &beg, &sl);
        uly_split(x->H, x->u, 0, &beg, &x->hq_l);
        usim_attn_desc(x, sl, &a);
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

void usim_flops_make(const usim_model *m, const usim_job *j, const usim_shape *x, int causal, usim_flops *f)
{
    memset(f, 0, sizeof *f);
    double b = (double)x->b, h = (double)x->h, hkv = (double)x->hkv, F = (double)x->F;
    double tok = j->method == ULY_METHOD_MEGATRON_SP ? (double)x->s / x->P : (double)x->tok;
    f->qkv = 2 * b * tok * h * (h + 2 * hkv);
    f->out = 2 * b * tok * h * h;
    f->mlp = (m->gated_mlp ? 6 : 4) * b * tok * h * F;
    f->head = 2 * b * tok * h * x->V;
    f->elem_bytes = b * tok * (10 * h + (m->gated_mlp ? 3 : 2) * F) * x->e;
    f->head_bytes = b * tok * x->V * (x->e + 4) * 2;
    {
        /* megatron-sp: GEMMs over the gathered sequence with weights split t
         * ways; composed tensor parallelism: over the context shard's n
         * tokens (gathered in the tensor group) with weights split T ways */
        int t = j->method == ULY_METHOD_MEGATRON_SP ? x->P : x->T;
        double M = j->method == ULY_METHOD_MEGATRON_SP ? b * (double)x->s
                 : x->T > 1 ? b * (double)x->n : b * tok;
        f->g_qkv = (usim_gemm){M, (h + 2 * hkv) / t, h};
        f->g_out = (usim_gemm){M, h, h / t};
        f->g_fc1 = (usim_gemm){M, (m->gated_mlp ? 2 : 1) * F / t, h};
        f->g_fc2 = (usim_gemm){M, h, F / t};
        f->g_head = (usim_gemm){M, (double)x->V / t, h};
    }
    f->attn_heads = (double)x->hq_l;
    f->attn_tq = (double)x->tq;
    double per_pair = 4 * b * x->d;   /* QK^T and PV: 2 FLOPs each per (pair, dim) */
    switch (j->method) {
    case ULY_METHOD_ULYSSES: case ULY_METHOD_MEGATRON_SP: {
        double S = (double)x->s;
        double pairs = causal ? pairs_causal_diag(S) : pairs_full(S, S);
        f->attn = per_pair * x->hq_l * pairs;
        break;
    }
    case ULY_METHOD_RING: {
        double n = (double)x->n;
        /* rank P-1 is the most loaded under the causal mask: it needs every block */
        f->attn_step[0] = per_pair * x->H * (causal ? pairs_causal_diag(n) : n * n);
        f->attn_step[1] = per_pair * x->H * n * n;
        f->attn = f->attn_step[0] + (x->P - 1) * f->attn_step[1];
        break;
    }
    case ULY_METHOD_ZIGZAG: case ULY_METHOD_USP: {
        int R = j->method == ULY_METHOD_USP ? x->r : x->P;
        double n = (double)(j->method == ULY_METHOD_USP ? x->tq : x->n);
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
    case ULY_METHOD_ALLGATHER: {
        /* the busiest rank's visible pairs (zigzag shards) from the plan layer */
        double pairs = 0;
        if (causal) {
            uly_attn_desc a;
            usim_attn_desc(x, x->s, &a);
            uly_sp_plan pl;
            if (uly_sp_plan_init(&pl, ULY_METHOD_ALLGATHER, x->P, 0, ULY_PLACE_ULYSSES_INNER) == 0)
                for (int r = 0; r < x->P; r++) {
                    double pr = uly_plan_step_pairs(&a, &pl, r, 0);
                    if (pr > pairs)
                        pairs = pr;
                }
            pairs /= b;   /* per batch row: per_pair carries b */
        } else {
            pairs = (double)x->n * (double)x->s;
        }
        f->attn = per_pair * x->hq_l * pairs;
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

void usim_memory_model(const usim_platform *p, const usim_model *m, const usim_job *j, const usim_shape *x,
                   usim_memory *mem)
{
    memset(mem, 0, sizeof *mem);
    double e = (double)x->e, b = (double)x->b, h = (double)x->h, F = (double)x->F;
    double Z = x->Z, Psi = x->gpu_params;
    mem->params = j->zero >= 3 ? 2 * Psi / Z : 2 * Psi;
    mem->grads = j->zero >= 2 ? 2 * Psi / Z : 2 * Psi;
    mem->optim = j->zero >= 1 ? 12 * Psi / Z : 12 * Psi;
    double tok = j->method == ULY_METHOD_MEGATRON_SP ? (double)x->s / x->P : (double)x->tok;
    /* sequence-layout tensors per layer (bytes) */
    double x_in = b * tok * h * e, ln1 = x_in, ln2_in = x_in, ln2 = x_in;
    double fc1 = b * tok * F * e * (m->gated_mlp ? 2 : 1), act = b * tok * F * e;
    double o_seq = uly_method_traits(j->method) & ULY_TRAIT_A2A ? x_in : 0;
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
    /* Pipeline (1F1B): the first stage holds L/pp layers for min(pp, micro-steps)
     * micro-batches in flight, i.e. up to L layers' activations. */
    int pp = j->pp > 0 ? j->pp : 1;
    double inflight = pp;
    if (pp > 1) {
        int64_t per_step = (int64_t)j->dp * m->micro_batch;
        double micro = ceil((double)m->global_batch / (double)per_step);
        if (micro < inflight)
            inflight = micro;
    }
    mem->activations = (double)x->Ls * inflight * per_layer + (j->recompute == USIM_RC_FULL ? full : 0);
    mem->logits = b * tok * (double)x->V * (e + 4);
    /* communication and working buffers */
    double buf = 0;
    switch (j->method) {
    case ULY_METHOD_ULYSSES: buf = 2 * b * (double)x->tok * (h + 2 * (double)x->hkv) * e; break;
    case ULY_METHOD_MEGATRON_SP: buf = b * (double)x->s * h * e; break;   /* the all-gathered input */
    case ULY_METHOD_RING: case ULY_METHOD_ZIGZAG: buf = 4 * kv; break;
    case ULY_METHOD_USP: buf = 2 * b * (double)x->tok * (h + 2 * (double)x->hkv) * e + 4 * kv; break;
    case ULY_METHOD_ALLGATHER: buf = 2 * kv; break;   /* gathered dK, dV before the reduce-scatter */
    default: break;
    }
    if (x->T > 1)
        buf += b * (double)x->n * h * e;   /* the tensor-parallel all-gathered input */
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
    usim_shape x;
    usim_shape_make(m, &jj, &x);
    usim_memory_model(p, m, &jj, &x, mem);
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
    int two = (uly_method_traits(jj.method) & ULY_TRAIT_ZIGZAG) != 0;
    int64_t g = (int64_t)jj.sp * (two ? 2 : 1) * (jj.method == ULY_METHOD_MEGATRON_SP ? 1 : jj.tp);
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

/* ------------------------------------------------------------ closed-form SP volumes */

/* Bytes of one ring hop in the model's element size. */
static double hop_bytes(const usim_shape *x, uly_method m, int U, int R, int hop)
{
    return (double)(usim_ring_hop_elems(x, m, U, R, hop) * (uint64_t)x->e);
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
    usim_shape x;   /* the heads and element size of a tensor-parallel rank */
    usim_shape_make(m, &j, &x);
    double b = (double)m->micro_batch, e = usim_dtype_bytes(m->dtype), h = (double)m->hidden;
    double d = h / m->heads, hkv = d * m->kv_heads, N = (double)m->seq;
    int P = j.sp;
    /* composed tensor parallelism: rank = t + T c + ...; heads per tensor rank */
    int T = j.method == ULY_METHOD_MEGATRON_SP ? 1 : j.tp;
    int rank = j.method == ULY_METHOD_MEGATRON_SP ? gpu % P : (gpu / T) % P;
    usim_model mt = *m;
    mt.heads = m->heads / T;
    mt.hidden = m->hidden / T;   /* keeps the head dimension */
    mt.kv_heads = m->kv_heads >= T ? m->kv_heads / T : 1;
    hkv = d * mt.kv_heads;
    m = &mt;
    if (T > 1) {
        /* Megatron sequence parallelism on the context shard (rank 0's n tokens, as simulated):
         * 2 all-gathers and 2 reduce-scatters per pass over the tensor group, ring algorithm */
        int64_t bg, n0, c_next, c_me;
        uly_split(m->seq, P, 0, &bg, &n0);
        int t = gpu % T;
        uly_split(n0, T, (t + 1) % T, &bg, &c_next);
        uly_split(n0, T, t, &bg, &c_me);
        double row = b * h * e;
        sent[0] = sent[1] = 2 * (double)(n0 - c_next) * row + 2 * (double)(n0 - c_me) * row;
    }
    switch (j.method) {
    case ULY_METHOD_ULYSSES: case ULY_METHOD_USP: {
        int u = j.ulysses, r = P / u;
        int64_t seq = m->seq, b0;
        if (j.method == ULY_METHOD_USP)
            uly_split(m->seq, r, 0, &b0, &seq);
        uly_layout L;
        if ((rc = usim_a2a_layout(&x, seq, u, &L)))
            return rc;
        for (int w = 0; w < ULY_A2A_COUNT; w++) {
            uint64_t n = 0;   /* elements this group member hands the others */
            for (int s = 0; s < u; s++)
                if (s != rank % u)
                    n += uly_layout_a2a_block(&L, seq, w, rank % u, s);
            sent[w >= ULY_A2A_DO] += (double)n * e;
        }
        if (j.method == ULY_METHOD_USP && r > 1) { /* the ring across the groups: the plan layer's hops */
            sent[0] += (r - 1) * hop_bytes(&x, ULY_METHOD_USP, u, r, USIM_HOP_KV);
            sent[1] += (r - 1) * hop_bytes(&x, ULY_METHOD_USP, u, r, USIM_HOP_BWD) +
                       hop_bytes(&x, ULY_METHOD_USP, u, r, USIM_HOP_DKV_HOME);
        }
        break;
    }
    case ULY_METHOD_MEGATRON_SP: {
        /* ring all-gather: every chunk but the next rank's; reduce-scatter: every chunk but mine */
        int64_t bg, c_next, c_me;
        uly_split(m->seq, P, (rank + 1) % P, &bg, &c_next);
        uly_split(m->seq, P, rank, &bg, &c_me);
        double row = b * h * e;
        sent[0] = 2 * (N - c_next) * row + 2 * (N - c_me) * row;
        sent[1] = sent[0];
        break;
    }
    case ULY_METHOD_RING: case ULY_METHOD_ZIGZAG: { /* P - 1 hops of the plan layer's size, and the return */
        sent[0] += (P - 1) * hop_bytes(&x, j.method, 1, P, USIM_HOP_KV);
        sent[1] += (P - 1) * hop_bytes(&x, j.method, 1, P, USIM_HOP_BWD) +
                   hop_bytes(&x, j.method, 1, P, USIM_HOP_DKV_HOME);
        break;
    }
    case ULY_METHOD_ALLGATHER: {
        /* ring all-gather of K, V (every shard but the next rank's) forward; ring
         * reduce-scatter of dK, dV (every shard but mine) backward; shards from the plan layer */
        uly_sp_plan pl;
        if (uly_sp_plan_init(&pl, ULY_METHOD_ALLGATHER, P, 0, ULY_PLACE_ULYSSES_INNER))
            return usim_set_error(USIM_EINVAL, "uly_sp_plan_init: %s", uly_last_error());
        double total = 0, next = 0, mine = 0;
        for (int r = 0; r < P; r++) {
            int64_t bgn[2], cnt[2];
            int nseg = uly_plan_tokens(&pl, m->seq, r, bgn, cnt);
            double tk = (double)cnt[0] + (nseg > 1 ? (double)cnt[1] : 0);
            total += tk;
            if (r == (rank + 1) % P)
                next = tk;
            if (r == rank)
                mine = tk;
        }
        double row = 2 * b * hkv * e;   /* K and V */
        sent[0] += (total - next) * row;
        sent[1] += (total - mine) * row;
        break;
    }
    default:
        break;
    }
    return USIM_OK;
}
