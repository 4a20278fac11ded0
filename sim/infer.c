/* SPDX-License-Identifier: Apache-2.0 */
/*
 * infer.c -- the inference cost model: prefill (time to first token) with
 * context parallelism, one decode step (time per output token) under TP,
 * TP x DCP or Helix, memory and KV-cache capacity per GPU.
 *
 * GPUs of one instance: C context-parallel groups (the prefill's CP degree)
 * of W GPUs each, rank = w + W c; W = T (tp, tp-dcp) or T x D (helix, KV-
 * parallel rank inner: w = k + D t).  Kernels are priced by the training
 * model's compute model (sim/compute.c: GEMMs with their tile, wave and K
 * terms, attention at attention_efficiency), every collective by the network
 * simulation on the instance's GPUs (usim_coll_run: NCCL's algorithm and
 * protocol as the tuner chooses them), and the decode attention as a
 * roofline of its KV bytes over the HBM bandwidth and its FLOPs over the
 * attention rate.  The equations are in doc/simulator.md ("Inference").
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compute.h"
#include "infer.h"
#include "usim.h"
#include "usim_internal.h"

static const char *const scheme_names[USIM_INF_NSCHEME] = {"tp", "tp-dcp", "helix"};
static const char *const pf_names[USIM_PF_NMETHOD] = {"ring", "allgather", "ulysses"};
static const char *const limit_names[USIM_NLIMIT] = {"HBM capacity", "HBM bandwidth", "compute", "network"};

/* The index of s in names[0..n), or -1. */
static int name_index(const char *const *names, int n, const char *s)
{
    for (int k = 0; s && k < n; k++)
        if (!strcmp(s, names[k]))
            return k;
    return -1;
}

const char *usim_inf_scheme_name(int s)
{
    return s >= 0 && s < USIM_INF_NSCHEME ? scheme_names[s] : "?";
}

int usim_inf_scheme_parse(const char *s, int *scheme)
{
    int k = name_index(scheme_names, USIM_INF_NSCHEME, s);
    if (k < 0)
        return usim_set_error(USIM_EINVAL, "--scheme '%s': expected tp, tp-dcp or helix", s ? s : "");
    *scheme = k;
    return USIM_OK;
}

const char *usim_pf_method_name(int m)
{
    return m >= 0 && m < USIM_PF_NMETHOD ? pf_names[m] : "?";
}

int usim_pf_method_parse(const char *s, int *m)
{
    int k = s && !strcmp(s, "all-gather") ? USIM_PF_ALLGATHER : name_index(pf_names, USIM_PF_NMETHOD, s);
    if (k < 0)
        return usim_set_error(USIM_EINVAL, "--prefill-method '%s': expected ring, allgather or ulysses", s ? s : "");
    *m = k;
    return USIM_OK;
}

const char *usim_limit_name(int l)
{
    return l >= 0 && l < USIM_NLIMIT ? limit_names[l] : "?";
}

/* ------------------------------------------------------------ collectives */

/* Groups of `size` GPUs: up to three grid dimensions (n, stride), the
 * first the group's own. */
static usim_grid grid3(int n0, int s0, int n1, int s1, int n2, int s2)
{
    usim_grid g;
    memset(&g, 0, sizeof g);
    int k = 0;
    int n[3] = {n0, n1, n2}, s[3] = {s0, s1, s2};
    for (int i = 0; i < 3; i++)
        if (n[i] > 1 || i == 0) {
            g.dim[k].n = n[i];
            g.dim[k].stride = s[i];
            k++;
        }
    g.ndim = k;
    return g;
}

typedef struct coll_ctx {
    usim_net *net;
    uint64_t *sent;
    int gpus;
} coll_ctx;

/* Run collective c; *t its duration, *bytes the most any GPU sent. */
static int run_coll(coll_ctx *cx, usim_coll *c, usim_time *t, uint64_t *bytes)
{
    *t = 0;
    *bytes = 0;
    if (c->size < 2)
        return USIM_OK;
    usim_coll_result cr;
    int rc = usim_coll_run(cx->net, c, &cr, cx->sent, NULL);
    if (rc)
        return rc;
    if (cr.duration >= USIM_TIME_LIMIT_PS || cr.duration < 0)
        return usim_set_error(USIM_EINVAL, "simulated time cannot be represented: a %s takes more than the "
                              "%.3g s the simulator keeps in int64 picoseconds", usim_coll_name(c->type),
                              USIM_TIME_LIMIT_PS * 1e-12);
    *t = cr.duration;
    for (int g = 0; g < cx->gpus; g++)
        if (cx->sent[g] > *bytes)
            *bytes = cx->sent[g];
    return USIM_OK;
}

/* A ring collective (all-gather, reduce-scatter, all-reduce) over the
 * groups of grid g, chunk[pos] bytes per position (all-reduce: its
 * buffer split as chunks). */
static int ring_coll(coll_ctx *cx, usim_coll_type type, const usim_grid *g, int size, const uint64_t *chunk,
                     usim_time *t, uint64_t *bytes)
{
    usim_coll c;
    memset(&c, 0, sizeof c);
    c.type = type;
    c.size = size;
    c.ngroups = cx->gpus / size;
    c.grid = g;
    c.chunk_bytes = chunk;
    return run_coll(cx, &c, t, bytes);
}

/* A direct all-to-all over the groups of grid g, pb[src * size + dst]
 * bytes from position src to position dst. */
static int a2a_coll(coll_ctx *cx, const usim_grid *g, int size, const uint64_t *pb, usim_time *t, uint64_t *bytes)
{
    usim_coll c;
    memset(&c, 0, sizeof c);
    c.type = USIM_A2A_DIRECT;
    c.size = size;
    c.ngroups = cx->gpus / size;
    c.grid = g;
    c.pair_bytes = pb;
    return run_coll(cx, &c, t, bytes);
}

/* All-reduce of `bytes` per GPU over groups of grid g (size members),
 * split into the members' chunks as uly_split does, in elements of e. */
static int allreduce(coll_ctx *cx, const usim_grid *g, int size, uint64_t bytes, int e, usim_time *t,
                     uint64_t *sent)
{
    uint64_t ch[64];
    uint64_t *chunk = size <= 64 ? ch : malloc((size_t)size * sizeof *chunk);
    if (!chunk)
        return usim_set_error(USIM_ENOMEM, "out of memory");
    uint64_t elems = bytes / (uint64_t)e;
    for (int q = 0; q < size; q++)
        chunk[q] = (elems / (uint64_t)size + ((uint64_t)q < elems % (uint64_t)size)) * (uint64_t)e;
    int rc = ring_coll(cx, USIM_ALLREDUCE, g, size, chunk, t, sent);
    if (chunk != ch)
        free(chunk);
    return rc;
}

static int64_t ceil_div64(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* Seconds of the compute model as picoseconds. */
static usim_time ps_of(double s)
{
    return usim_ps(s);
}


/* ----------------------------------------------------------------- model */

static int check_job(const usim_platform *p, const usim_model *m, const usim_infer_job *j, int *W, int *inst)
{
    if (j->scheme < 0 || j->scheme >= USIM_INF_NSCHEME)
        return usim_set_error(USIM_EINVAL, "unknown scheme %d", j->scheme);
    if (j->prefill_method < 0 || j->prefill_method >= USIM_PF_NMETHOD)
        return usim_set_error(USIM_EINVAL, "unknown prefill method %d", j->prefill_method);
    if (j->tp < 1 || j->dcp < 1 || j->prefill_cp < 1)
        return usim_set_error(USIM_EINVAL, "--tp, --dcp and --prefill-cp must be >= 1");
    if (j->prompt < 1 || j->output < 1 || j->batch < 1)
        return usim_set_error(USIM_EINVAL, "--prompt, --output and the batch must be >= 1");
    int64_t H = m->heads, Hkv = m->kv_heads;
    int T = j->tp, D = j->dcp;
    if (H % T)
        return usim_set_error(USIM_EINVAL, "--tp %d must divide the model's %lld query heads", T, (long long)H);
    switch (j->scheme) {
    case USIM_INF_TP:
        if (D != 1)
            return usim_set_error(USIM_EINVAL, "--dcp %d needs --scheme tp-dcp or helix", D);
        if (Hkv % T && T % Hkv)
            return usim_set_error(USIM_EINVAL, "--tp %d: the %lld KV heads must split over it or it over them",
                                  T, (long long)Hkv);
        *W = T;
        break;
    case USIM_INF_TP_DCP:
        /* vLLM: the DCP ranks are TP ranks holding copies of one KV head */
        if (T % Hkv || (T / Hkv) % D)
            return usim_set_error(USIM_EINVAL, "--scheme tp-dcp: (tp // kv_heads) %% dcp == 0 with tp a multiple of "
                                  "kv_heads is required (tp %d, kv_heads %lld, dcp %d): the DCP ranks are the TP "
                                  "ranks that hold copies of one KV head", T, (long long)Hkv, D);
        *W = T;
        break;
    default:
        if (Hkv % T)
            return usim_set_error(USIM_EINVAL, "--scheme helix: --tp %d (the attention's TP) must divide the %lld KV "
                                  "heads", T, (long long)Hkv);
        if (H % ((int64_t)T * D))
            return usim_set_error(USIM_EINVAL, "--scheme helix: tp x dcp = %d must divide the %lld query heads (the "
                                  "output projection's TP)", T * D, (long long)H);
        *W = T * D;
        break;
    }
    if ((int64_t)*W * j->prefill_cp > (1 << 20))
        return usim_set_error(USIM_EINVAL, "an instance of %lld GPUs is more than the 1M simulated",
                              (long long)*W * j->prefill_cp);
    *inst = *W * j->prefill_cp;
    if (H % *W)
        return usim_set_error(USIM_EINVAL, "the prefill's TP degree %d must divide the %lld query heads", *W,
                              (long long)H);
    if (j->prefill_method == USIM_PF_ULYSSES && (H / *W) % j->prefill_cp)
        return usim_set_error(USIM_EINVAL, "--prefill-method ulysses: --prefill-cp %d must divide the %lld query "
                              "heads of a TP rank", j->prefill_cp, (long long)(H / *W));
    int gpus = j->gpus ? j->gpus : *inst;
    if (gpus % *inst)
        return usim_set_error(USIM_EINVAL, "--gpus %d is not a multiple of the instance's %d GPUs (prefill-cp %d x "
                              "%d)", gpus, *inst, j->prefill_cp, *W);
    int rc = usim_platform_check_gpus(p, *inst);
    if (rc)
        return rc;
    /* every tensor below 2^60 bytes: the byte counters are uint64 */
    double big = (double)j->prompt * (double)(m->hidden + m->ffn) * 8.0 * (double)j->batch;
    if (!(big < 1152921504606846976.0) || j->prompt + j->output > ((int64_t)1 << 40))
        return usim_set_error(USIM_EINVAL, "sizes cannot be represented: prompt %lld + output %lld tokens (limit 2^40 "
                              "and 2^60-byte tensors)", (long long)j->prompt, (long long)j->output);
    return USIM_OK;
}

int usim_infer_simulate(const usim_platform *p, const usim_model *m, const usim_infer_job *j,
                        usim_infer_result *r)
{
    memset(r, 0, sizeof *r);
    int W = 0, inst = 0;
    int rc = check_job(p, m, j, &W, &inst);
    if (rc)
        return rc;
    r->job = *j;
    if (!r->job.gpus)
        r->job.gpus = inst;
    const int T = j->tp, D = j->dcp, C = j->prefill_cp;
    const int64_t H = m->heads, Hkv = m->kv_heads, h = m->hidden, d = usim_model_head_dim(m), L = m->layers;
    const double F = (double)m->ffn, V = (double)m->vocab, B = (double)j->batch;
    const usim_dtype dt = m->dtype;
    const int e = usim_dtype_bytes(dt);
    const double ed = e;
    /* the GEMMs' platform: FP8 linear layers run at twice the peak and move
     * one byte per element (as twice the HBM bandwidth at the dtype's size) */
    usim_platform pg = *p;
    if (j->fp8_weights) {
        pg.peak_flops[dt] *= 2;
        pg.hbm_Bps *= 2;
    }
    const double ew = j->fp8_weights ? 1 : ed;   /* bytes per weight */
    r->W = W;
    r->inst_gpus = inst;
    r->replicas = r->job.gpus / inst;
    int kvp_in = j->scheme == USIM_INF_TP ? 1 : D;
    r->kvp = kvp_in * C;
    /* decode heads: query heads attended before any gather, KV heads held */
    int64_t hq_dec = H / T;
    int64_t hkv_dec = j->scheme == USIM_INF_HELIX ? Hkv / T : (Hkv >= T ? Hkv / T : 1);
    int64_t hq_att = j->scheme == USIM_INF_TP_DCP ? hq_dec * D : hq_dec;  /* after the q all-gather */
    int64_t hq_own = j->scheme == USIM_INF_HELIX ? H / W : hq_dec;         /* after the merge */
    r->hq_l = hq_dec;
    r->hkv_l = hkv_dec;
    /* prefill: TP over W, heads H / W, KV heads split (copies beyond Hkv) */
    const int64_t hq_pf = H / W, hkv_pf = Hkv >= W ? ceil_div64(Hkv, W) : 1;
    if (j->scheme == USIM_INF_TP && T > Hkv)
        snprintf(r->warn[r->nwarn++], sizeof r->warn[0], "KV heads replicated: %d TP ranks over %lld KV heads, "
                 "each GPU caches one KV head (%lld copies of each)", T, (long long)Hkv, (long long)(T / Hkv));

    coll_ctx cx = {usim_net_new(p, inst), calloc((size_t)inst, sizeof(uint64_t)), inst};
    if (!cx.net || !cx.sent) {
        rc = usim_set_error(USIM_ENOMEM, "out of memory");
        goto out;
    }
    usim_grid g_tp = grid3(W, 1, C, W, 1, 0);
    usim_grid g_cp = grid3(C, W, W, 1, 1, 0);
    usim_grid g_kv = j->scheme == USIM_INF_HELIX ? grid3(D, 1, T, D, C, W) : grid3(D, 1, T / D, D, C, T);

    /* ------------------------------------------------------------ prefill */
    const double gmul = m->gated_mlp ? 2 : 1;
    int64_t S = j->prompt, n = ceil_div64(S, C);
    {
        double M = (double)n;
        usim_gemm gs[4] = {{M, (double)((hq_pf + 2 * hkv_pf) * d), (double)h}, {M, (double)h, (double)(hq_pf * d)},
                           {M, gmul * F / W, (double)h}, {M, (double)h, F / W}};
        for (int k = 0; k < 4; k++)
            r->pf_gemm += ps_of(usim_gemm_s(&pg, dt, gs[k]));
        double gflops = 2 * M * (double)h * ((double)((hq_pf + 2 * hkv_pf) * d) + (double)(hq_pf * d) +
                                             (gmul + 1) * F / W);
        int skip = m->causal && p->attn_causal_skip;
        double pp = 4.0 * (double)d;   /* FLOPs per (query, key) pair and head */
        double c2 = (double)n / 2, Sd = (double)S;
        double pairs_diag = C == 1 ? (skip ? Sd * (Sd + 1) / 2 : Sd * Sd) : (skip ? 2 * c2 * c2 + c2 : (double)n * n);
        double pairs_off = skip ? 2 * c2 * c2 : (double)n * n;   /* zigzag chunks: every rank alike */
        double attn_flops = 0;
        uint64_t cpb = 0;
        usim_time cp_t = 0;
        switch (j->prefill_method) {
        case USIM_PF_RING: {
            usim_time B0 = ps_of(usim_attn_s(p, dt, pp * hq_pf * pairs_diag, 1, (double)hq_pf, (double)n, (double)d));
            usim_time B1 = C > 1 ? ps_of(usim_attn_s(p, dt, pp * hq_pf * pairs_off, 1, (double)hq_pf, (double)n,
                                                      (double)d)) : 0;
            attn_flops = pp * hq_pf * (pairs_diag + (C - 1) * pairs_off);
            usim_time hop = 0;
            if (C > 1) {
                usim_coll c;
                memset(&c, 0, sizeof c);
                c.type = USIM_RING_SHIFT;
                c.size = C;
                c.ngroups = inst / C;
                c.grid = &g_cp;
                c.bytes = (uint64_t)(2 * n * hkv_pf * d * e);
                if ((rc = run_coll(&cx, &c, &hop, &cpb)))
                    goto out;
                cpb *= (uint64_t)(C - 1);
            }
            /* hop k carries the block of step k + 1 (doc/simulator.md, ring overlap) */
            usim_time a = B0 + (usim_time)(C - 1) * B1, b = hop + (usim_time)(C - 1) * B1,
                      c3 = (usim_time)(C - 1) * hop + B1;
            usim_time tot = a > b ? a : b;
            tot = tot > c3 ? tot : c3;
            r->pf_attn = a;
            cp_t = tot - a;
            break;
        }
        case USIM_PF_ALLGATHER: {
            attn_flops = pp * hq_pf * (pairs_diag + (C - 1) * pairs_off);
            r->pf_attn = ps_of(usim_attn_s(p, dt, attn_flops, 1, (double)hq_pf, (double)n, (double)d));
            if (C > 1) {
                uint64_t *ch = calloc((size_t)C, sizeof *ch);
                if (!ch) {
                    rc = usim_set_error(USIM_ENOMEM, "out of memory");
                    goto out;
                }
                for (int q = 0; q < C; q++) {
                    int64_t b0, cnt;
                    uly_split(S, C, q, &b0, &cnt);
                    ch[q] = (uint64_t)(2 * cnt * hkv_pf * d * e);
                }
                rc = ring_coll(&cx, USIM_ALLGATHER, &g_cp, C, ch, &cp_t, &cpb);
                free(ch);
                if (rc)
                    goto out;
            }
            break;
        }
        default: {   /* ulysses: heads over C, the whole prompt each */
            int64_t hq_u = hq_pf / C, hkv_u = hkv_pf >= C ? ceil_div64(hkv_pf, C) : 1;
            double pairs = skip ? Sd * (Sd + 1) / 2 : Sd * Sd;
            attn_flops = pp * hq_u * pairs;
            r->pf_attn = ps_of(usim_attn_s(p, dt, attn_flops, 1, (double)hq_u, Sd, (double)d));
            if (C > 1) {
                uint64_t *pb = calloc((size_t)C * C, sizeof *pb);
                if (!pb) {
                    rc = usim_set_error(USIM_ENOMEM, "out of memory");
                    goto out;
                }
                usim_time t_in = 0, t_out = 0;
                uint64_t b_in = 0, b_out = 0;
                for (int s = 0; s < C; s++)
                    for (int q = 0; q < C; q++)
                        pb[(size_t)s * C + q] = s == q ? 0 : (uint64_t)(n * (hq_u + 2 * hkv_u) * d * e);
                rc = a2a_coll(&cx, &g_cp, C, pb, &t_in, &b_in);
                for (int s = 0; s < C && !rc; s++)
                    for (int q = 0; q < C; q++)
                        pb[(size_t)s * C + q] = s == q ? 0 : (uint64_t)(n * hq_u * d * e);
                if (!rc)
                    rc = a2a_coll(&cx, &g_cp, C, pb, &t_out, &b_out);
                free(pb);
                if (rc)
                    goto out;
                cp_t = t_in + t_out;
                cpb = b_in + b_out;
            }
            break;
        }
        }
        r->pf_cp = cp_t;
        r->pf_cp_bytes = cpb;
        usim_time ar = 0;
        uint64_t arb = 0;
        if (W > 1 && (rc = allreduce(&cx, &g_tp, W, (uint64_t)(n * h * e), e, &ar, &arb)))
            goto out;
        r->pf_ar = 2 * ar;
        r->pf_ar_bytes = 2 * arb;
        r->pf_layer = r->pf_gemm + r->pf_attn + r->pf_cp + r->pf_ar;
        usim_gemm gh = {1, V / W, (double)h};
        r->pf_head = ps_of(usim_gemm_s(&pg, dt, gh));
        r->ttft = (usim_time)L * r->pf_layer + r->pf_head;
        r->pf_flops = (double)L * (gflops + attn_flops) + 2 * V / W * (double)h;
        r->pf_limit = r->pf_cp + r->pf_ar > r->pf_gemm + r->pf_attn ? USIM_LIM_NETWORK : USIM_LIM_COMPUTE;
    }

    /* ------------------------------------------------------------- decode */
    r->context = j->prompt + j->output / 2;
    int64_t n_loc = ceil_div64(r->context, r->kvp);
    double qkv_n = (double)((hq_dec + 2 * hkv_dec) * d), out_k = (double)(hq_own * d);
    {
        usim_gemm gs[4] = {{B, qkv_n, (double)h}, {B, (double)h, out_k}, {B, gmul * F / W, (double)h},
                           {B, (double)h, F / W}};
        double rate = pg.peak_flops[dt] * pg.gemm_eff;
        double wbytes = 0, flop_s = 0, byte_s = 0;
        for (int k = 0; k < 4; k++) {
            r->dec_gemm += ps_of(usim_gemm_s(&pg, dt, gs[k]));
            wbytes += gs[k].N * gs[k].K * ew;
            flop_s += 2 * gs[k].M * gs[k].N * gs[k].K / rate;
            byte_s += (gs[k].M * gs[k].K + gs[k].K * gs[k].N + gs[k].M * gs[k].N) * ed / pg.hbm_Bps;
        }
        r->dec_gemm_flop_ps = ps_of(flop_s);
        r->dec_gemm_byte_ps = ps_of(byte_s);
        double kvb = B * (double)n_loc * 2.0 * (double)hkv_dec * (double)d * ed;
        double aflops = 4.0 * B * (double)hq_att * (double)n_loc * (double)d;
        double ta = aflops / (p->peak_flops[dt] * p->attn_eff), tb = kvb / p->hbm_Bps;
        r->dec_attn = ps_of((ta > tb ? ta : tb) + p->launch_s);
        /* merges */
        uint64_t Bu = (uint64_t)j->batch;
        if (j->scheme == USIM_INF_TP_DCP && D > 1) {
            uint64_t chq[64], chl[64];
            if (D > 64) {
                rc = usim_set_error(USIM_EINVAL, "--dcp %d: at most 64", D);
                goto out;
            }
            int64_t Hg = hq_att;
            for (int q = 0; q < D; q++) {
                int64_t b0, cnt;
                uly_split(Hg, D, q, &b0, &cnt);
                chq[q] = Bu * (uint64_t)(cnt * d * e);
                chl[q] = Bu * (uint64_t)(Hg * e);
            }
            if ((rc = ring_coll(&cx, USIM_ALLGATHER, &g_kv, D, chq, &r->dec_merge[USIM_MG_Q_AG],
                                &r->dec_merge_bytes[USIM_MG_Q_AG])) ||
                (rc = ring_coll(&cx, USIM_ALLGATHER, &g_kv, D, chl, &r->dec_merge[USIM_MG_LSE_AG],
                                &r->dec_merge_bytes[USIM_MG_LSE_AG])) ||
                (rc = ring_coll(&cx, USIM_REDUCE_SCATTER, &g_kv, D, chq, &r->dec_merge[USIM_MG_O_RS],
                                &r->dec_merge_bytes[USIM_MG_O_RS])))
                goto out;
        } else if (j->scheme == USIM_INF_HELIX && D > 1) {
            uint64_t *pb = calloc((size_t)D * D, sizeof *pb);
            if (!pb) {
                rc = usim_set_error(USIM_ENOMEM, "out of memory");
                goto out;
            }
            for (int s = 0; s < D; s++)
                for (int q = 0; q < D; q++) {
                    int64_t b0, cnt;
                    uly_split(hq_dec, D, q, &b0, &cnt);
                    pb[(size_t)s * D + q] = s == q ? 0 : Bu * (uint64_t)(cnt * (d + 1) * e);
                }
            rc = a2a_coll(&cx, &g_kv, D, pb, &r->dec_merge[USIM_MG_OL_A2A], &r->dec_merge_bytes[USIM_MG_OL_A2A]);
            free(pb);
            if (rc)
                goto out;
        }
        if (C > 1) {   /* the prefill's CP groups each hold a part of the cache: partials gathered */
            uint64_t *ch = calloc((size_t)C, sizeof *ch);
            if (!ch) {
                rc = usim_set_error(USIM_ENOMEM, "out of memory");
                goto out;
            }
            for (int q = 0; q < C; q++)
                ch[q] = Bu * (uint64_t)(hq_own * (d + 1) * e);
            rc = ring_coll(&cx, USIM_ALLGATHER, &g_cp, C, ch, &r->dec_merge[USIM_MG_CP],
                           &r->dec_merge_bytes[USIM_MG_CP]);
            free(ch);
            if (rc)
                goto out;
        }
        usim_time ar = 0;
        uint64_t arb = 0;
        if (W > 1 && (rc = allreduce(&cx, &g_tp, W, Bu * (uint64_t)(h * e), e, &ar, &arb)))
            goto out;
        r->dec_ar = 2 * ar;
        r->dec_ar_bytes = 2 * arb;
        usim_time merge = 0;
        for (int k = 0; k < USIM_NMERGE; k++)
            merge += r->dec_merge[k];
        r->dec_layer = r->dec_gemm + r->dec_attn + merge + r->dec_ar;
        usim_gemm gh = {B, V / W, (double)h};
        r->dec_head = ps_of(usim_gemm_s(&pg, dt, gh));
        r->tpot = (usim_time)L * r->dec_layer + r->dec_head;
        r->dec_weight_bytes = (double)L * wbytes + V / W * (double)h * ew;
        r->dec_kv_bytes = (double)L * kvb;
        /* the largest term of the step: HBM traffic, FLOPs, communication */
        double t_hbm = (double)L * (byte_s + tb), t_fl = (double)L * (flop_s + ta);
        double t_net = (double)L * usim_sec(merge + r->dec_ar);
        r->dec_limit = t_net > t_hbm && t_net > t_fl ? USIM_LIM_NETWORK
                     : t_fl > t_hbm ? USIM_LIM_COMPUTE : USIM_LIM_HBM_BW;
        r->tokens_per_s_gpu = B / usim_sec(r->tpot) / inst;
    }

    /* ------------------------------------------------------------- memory */
    {
        double lp = (double)h * ((double)((hq_dec + 2 * hkv_dec) * d) + (double)(hq_own * d)) +
                    (gmul + 1) * F / W * (double)h;
        double emb = V / W * (double)h * (m->tied_embeddings ? 1 : 2);
        r->weights = ((double)L * lp + emb) * ew;
        double per_tok_pf = 2.0 * (double)h + (double)((hq_pf + 2 * hkv_pf) * d) + (double)(hq_pf * d) +
                            (gmul + 1) * F / W;
        double buf = j->prefill_method == USIM_PF_RING ? 4.0 * (double)n * hkv_pf * d
                   : j->prefill_method == USIM_PF_ALLGATHER ? 2.0 * (double)S * hkv_pf * d
                   : 2.0 * (double)n * (hq_pf + 2 * hkv_pf) * d;
        double act_pf = ((double)n * per_tok_pf + (C > 1 ? buf : 0)) * ed;
        double per_tok_dec = 2.0 * (double)h + qkv_n + 2.0 * (double)(hq_att * d) + (gmul + 1) * F / W;
        double act_dec = B * per_tok_dec * ed + 2.0 * B * (double)(hq_att * (d + 1)) * ed + B * V / W * 4.0;
        r->activations = act_pf > act_dec ? act_pf : act_dec;
        r->reserved = p->reserved_bytes;
        r->hbm = p->hbm_bytes;
        double tok_layer = 2.0 * (double)hkv_dec * (double)d * ed * (double)L;
        r->kv_bytes_per_token = tok_layer / r->kvp;
        r->kv = B * (double)ceil_div64(j->prompt + j->output, r->kvp) * tok_layer;
        r->total = r->weights + r->kv + r->activations + r->reserved;
        r->fits = r->total <= r->hbm;
        double free_b = r->hbm - r->reserved - r->weights - r->activations;
        r->kv_capacity = free_b > 0 ? (int64_t)floor(free_b / r->kv_bytes_per_token) : 0;
        r->max_context = r->kv_capacity / j->batch;
        r->mem_limit = r->kv > r->weights && r->kv > r->activations ? 1 : r->activations > r->weights ? 2 : 0;
        if (!r->fits)
            r->dec_limit = USIM_LIM_HBM_CAP;
    }
    if (!(usim_sec(r->ttft) < USIM_TIME_LIMIT_PS * 1e-12) || !(usim_sec(r->tpot) < USIM_TIME_LIMIT_PS * 1e-12))
        rc = usim_set_error(USIM_EINVAL, "simulated time cannot be represented in int64 picoseconds; reduce "
                            "--prompt or the batch");
out:
    free(cx.sent);
    usim_net_free(cx.net);
    return rc;
}
