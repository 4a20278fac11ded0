/* SPDX-License-Identifier: Apache-2.0 */
/*
 * explain_json.c -- `ulysses explain --json`: the figure model (explain.h)
 * as one JSON document, the one --html embeds and renders.  Everything comes
 * from the figure (panels, matrices, volumes, grid) or from the plan layer
 * the figure was filled from (uly_layout_part, uly_plan_chunk,
 * uly_plan_ring_src, uly_plan_ring_hold, uly_plan_step_pairs); nothing here
 * computes a partition.  The keys are listed in doc/cli.md (explain).
 */
#include <stdlib.h>
#include <string.h>

#include "base/base_json.h"
#include "explain.h"

static const char *const dtype_name[] = {"f32", "f64"};

static const char *mask_name(const uly_attn_desc *a)
{
    if (a->causal && a->window)
        return "causal-window";
    if (a->causal)
        return "causal";
    if (a->window)
        return "window";
    return "none";
}

/* [[begin, count], ...] of n segments (empty ones left out) */
static json_t *segments(int n, const int64_t *b, const int64_t *c)
{
    json_t *s = json_array();
    for (int x = 0; s && x < n; x++)
        if (c[x] > 0 && json_array_append_new(s, json_pack("[II]", (json_int_t)b[x], (json_int_t)c[x])))
            return json_decref(s), NULL;
    return s;
}

static int set_new(json_t *o, const char *key, json_t *v)
{
    return v ? json_object_set_new(o, key, v) : -1;
}

static int problem(json_t *root, const xp_fig *f)
{
    const uly_attn_desc *a = &f->a;
    json_t *o = uly_json_add_object(root, "problem");
    if (!o)
        return -1;
    int e = uly_json_set_int(o, "ranks", f->plan.P);
    e |= uly_json_set_str(o, "method", uly_method_name(f->method));
    e |= uly_json_set_int(o, "batch", a->batch);
    e |= uly_json_set_int(o, "seq", a->seq);
    e |= uly_json_set_int(o, "heads", a->heads);
    e |= uly_json_set_int(o, "kv_heads", a->kv_heads);
    e |= uly_json_set_int(o, "head_dim", a->head_dim);
    e |= uly_json_set_str(o, "dtype", dtype_name[a->dtype == ULY_F64]);
    e |= uly_json_set_int(o, "element_bytes", (int64_t)uly_dtype_size(a->dtype));
    e |= uly_json_set_str(o, "mask", mask_name(a));
    e |= uly_json_set_bool(o, "causal", a->causal);
    e |= uly_json_set_int(o, "window", a->window);
    e |= uly_json_set_int(o, "docs", a->doc_offsets ? a->docs : 0);
    json_t *p = uly_json_add_object(root, "plan");
    if (!p)
        return -1;
    e |= uly_json_set_int(p, "ulysses_degree", f->plan.U);
    e |= uly_json_set_int(p, "ring_degree", f->plan.R);
    e |= uly_json_set_str(p, "placement", uly_placement_name(f->plan.placement));
    e |= uly_json_set_bool(p, "zigzag", f->plan.zigzag);
    e |= uly_json_set_int(p, "steps", f->grid.steps);
    return e;
}

/* per rank: tokens held (its sequence shard), query heads, KV heads */
static int ranks(json_t *root, const xp_fig *f, const uly_layout *L)
{
    json_t *arr = uly_json_add_array(root, "ranks");
    if (!arr)
        return -1;
    int e = 0;
    for (int r = 0; r < f->plan.P && !e; r++) {
        uly_rank_part q;
        uly_layout_part(L, r, &q);
        json_t *o = uly_json_append_object(arr);
        if (!o)
            return -1;
        e |= uly_json_set_int(o, "rank", r);
        e |= set_new(o, "segments", segments(q.nseg, q.tok_begin, q.tok_count));
        e |= uly_json_set_int(o, "tokens", q.tokens);
        e |= uly_json_set_int(o, "head_begin", q.head_begin);
        e |= uly_json_set_int(o, "head_count", q.head_count);
        e |= uly_json_set_int(o, "kv_begin", q.kv_begin);
        e |= uly_json_set_int(o, "kv_count", q.kv_count);
    }
    return e;
}

static int panels(json_t *root, const xp_fig *f)
{
    json_t *arr = uly_json_add_array(root, "panels");
    if (!arr)
        return -1;
    int e = 0;
    for (int i = 0; i < f->npanel && !e; i++) {
        const xp_panel *p = &f->panel[i];
        json_t *o = uly_json_append_object(arr), *bl;
        if (!o)
            return -1;
        e |= uly_json_set_str(o, "title", p->title);
        e |= uly_json_set_str(o, "caption", p->caption);
        e |= uly_json_set_str(o, "arrow", f->arrow[i]);
        e |= uly_json_set_str(o, "axis", p->yname);
        e |= uly_json_set_int(o, "tokens", p->tokens);
        e |= uly_json_set_int(o, "heads", p->heads);
        if (!(bl = uly_json_add_array(o, "blocks")))
            return -1;
        for (int b = 0; b < p->nblock && !e; b++) {
            const xp_block *x = &p->blocks[b];
            json_t *k = uly_json_append_object(bl);
            if (!k)
                return -1;
            e |= uly_json_set_int(k, "rank", x->rank);
            e |= uly_json_set_int(k, "src", x->src);
            e |= uly_json_set_int(k, "tok_begin", x->t0);
            e |= uly_json_set_int(k, "tok_count", x->tn);
            e |= uly_json_set_int(k, "head_begin", x->h0);
            e |= uly_json_set_int(k, "head_count", x->hn);
            e |= uly_json_set_bool(k, "replicated", x->replicated);
            e |= uly_json_set_bool(k, "light", x->shade);
        }
    }
    return e;
}

static int matrices(json_t *root, const xp_fig *f)
{
    json_t *arr = uly_json_add_array(root, "matrices");
    if (!arr)
        return -1;
    int e = 0;
    for (int i = 0; i < f->nmatrix && !e; i++) {
        const xp_matrix *m = &f->matrix[i];
        json_t *o = uly_json_append_object(arr), *el;
        if (!o)
            return -1;
        e |= uly_json_set_str(o, "title", m->title);
        e |= uly_json_set_int(o, "size", m->P);
        if (!(el = uly_json_add_array(o, "elements")))
            return -1;
        for (int r = 0; r < m->P && !e; r++) {
            json_t *row = json_array();
            for (int s = 0; row && s < m->P; s++)
                if (json_array_append_new(row, json_integer((json_int_t)m->elems[r * m->P + s])))
                    e = -1;
            e |= row ? json_array_append_new(el, row) : -1;
        }
    }
    return e;
}

/* per rank, per call kind that moves bytes on some rank: sent and received;
 * megatron-sp (no uly_volume): its two collectives from the send matrices,
 * each run twice per forward (before attention and before the MLP) */
static int volumes(json_t *root, const xp_fig *f)
{
    const int P = f->plan.P;
    const uint64_t es = uly_dtype_size(f->a.dtype);
    json_t *arr = uly_json_add_array(root, "volumes");
    if (!arr)
        return -1;
    int used[ULY_VOL_COUNT] = {0};
    for (int r = 0; f->vol && r < P; r++)
        for (int w = 0; w < ULY_VOL_COUNT; w++)
            used[w] |= f->vol[r].sent[w] || f->vol[r].recv[w];
    int e = 0;
    for (int r = 0; r < P && !e; r++) {
        json_t *o = uly_json_append_object(arr), *calls;
        if (!o || !(calls = uly_json_add_array(o, "calls")))
            return -1;
        e |= uly_json_set_int(o, "rank", r);
        uint64_t fwd = 0, bwd = 0;
        if (f->vol) {
            for (int w = 0; w < ULY_VOL_COUNT && !e; w++) {
                if (!used[w])
                    continue;
                json_t *c = uly_json_append_object(calls);
                if (!c)
                    return -1;
                e |= uly_json_set_str(c, "call", uly_vol_name(w));
                e |= uly_json_set_int(c, "sent", (int64_t)f->vol[r].sent[w]);
                e |= uly_json_set_int(c, "recv", (int64_t)f->vol[r].recv[w]);
                *(uly_vol_backward(w) ? &bwd : &fwd) += f->vol[r].sent[w];
            }
        } else {
            static const char *const mname[] = {"all-gathers", "reduce-scatters"};
            for (int i = 0; i < f->nmatrix && i < 2 && !e; i++) {
                const xp_matrix *m = &f->matrix[i];
                uint64_t s = 0, v = 0;
                for (int x = 0; x < m->P; x++)
                    if (x != r) {
                        s += m->elems[r * m->P + x];
                        v += m->elems[x * m->P + r];
                    }
                json_t *c = uly_json_append_object(calls);
                if (!c)
                    return -1;
                e |= uly_json_set_str(c, "call", mname[i]);
                e |= uly_json_set_int(c, "sent", (int64_t)(2 * s * es));
                e |= uly_json_set_int(c, "recv", (int64_t)(2 * v * es));
                fwd += 2 * s * es;
            }
            bwd = fwd;   /* the same collectives with the roles swapped */
        }
        e |= uly_json_set_int(o, "forward", (int64_t)fwd);
        e |= uly_json_set_int(o, "backward", (int64_t)bwd);
    }
    return e;
}

/* The closed form the text prints (no mask, an even split), with its value
 * and whether it applies to this shape. */
static int closed_form(json_t *root, const xp_fig *f, const uly_layout *L)
{
    const uly_attn_desc *a = &f->a;
    const int P = f->plan.P, R = f->plan.R;
    const double B = (double)a->batch, N = (double)a->seq, d = (double)a->head_dim,
                 es = (double)uly_dtype_size(a->dtype);
    const char *formula;
    double v;
    int applies;
    switch (f->method) {
    case ULY_METHOD_ULYSSES: {
        formula = "forward = (2h + 2h_kv) B (N/P) e (P-1)/P";
        v = (2.0 * (double)a->heads * d + 2.0 * (double)a->kv_heads * d) * B * (N / P) * es * (P - 1) / P;
        applies = a->seq % P == 0 && a->heads % P == 0 && !L->rep;
        break;
    }
    case ULY_METHOD_MEGATRON_SP:
        formula = "forward = 4 (t-1)/t B N h e";
        v = 4.0 * (P - 1) / P * B * N * (double)a->heads * d * es;
        applies = a->seq % P == 0;
        break;
    case ULY_METHOD_ALLGATHER:
        formula = "all-gather K, V = 2 (P-1) B (N/P) Hkv d e";
        v = 2.0 * (P - 1) * B * (N / P) * (double)a->kv_heads * d * es;
        applies = a->seq % (2 * P) == 0;
        break;
    default: {
        int64_t kvh = a->kv_heads, k0, hb, hc;
        if (f->method == ULY_METHOD_USP) {
            uly_plan_heads(&f->plan, a->heads, 0, &hb, &hc);
            uly_kv_range(a, hb, hc, &k0, &kvh);
        }
        formula = "ring forward K, V = 2 (R-1) B (N/R) KV d e";
        v = 2.0 * (R - 1) * B * (N / R) * (double)kvh * d * es;
        /* as the text decides: an even split and every hop carrying its block
         * (a mask may make some unnecessary: uly_plan_ring_hold) */
        applies = a->seq % (f->plan.zigzag ? 2 * R : R) == 0;
        for (int r = 0; r < P && applies; r++)
            for (int t = 0; t + 1 < R; t++)
                if (!uly_plan_ring_hop(a, &f->plan, r, t, ULY_RING_K))
                    applies = 0;
        break;
    }
    }
    json_t *o = uly_json_add_object(root, "closed_form");
    if (!o)
        return -1;
    int e = uly_json_set_str(o, "formula", formula);
    e |= uly_json_set_fixed(o, "bytes", v, 0);
    e |= uly_json_set_bool(o, "applies", applies);
    return e;
}

static int grid(json_t *root, const xp_grid *g)
{
    json_t *o = uly_json_add_object(root, "grid"), *x;
    if (!o)
        return -1;
    int e = uly_json_set_int(o, "blocks", g->nb);
    if (!(x = uly_json_add_array(o, "edges")))
        return -1;
    for (int b = 0; b <= g->nb && g->nb; b++)
        e |= json_array_append_new(x, json_integer((json_int_t)g->edge[b]));
    if (!(x = uly_json_add_array(o, "owner")))
        return -1;
    for (int b = 0; b < g->nb; b++)
        e |= json_array_append_new(x, json_integer(g->owner[b]));
    if (!(x = uly_json_add_array(o, "groups")))
        return -1;
    for (int k = 0; k < g->ngroup && !e; k++) {
        json_t *go = uly_json_append_object(x), *rk, *hd;
        if (!go || !(rk = uly_json_add_array(go, "ranks")) || !(hd = uly_json_add_array(go, "heads")))
            return -1;
        for (int u = 0; u < g->gsize; u++) {
            e |= json_array_append_new(rk, json_integer(g->granks[k * g->gsize + u]));
            e |= json_array_append_new(hd, json_integer((json_int_t)g->gheads[k * g->gsize + u]));
        }
    }
    /* cells: nb rows (query blocks) of nb (key blocks) */
    if (!(x = uly_json_add_array(o, "cells")))
        return -1;
    for (int q = 0; q < g->nb && !e; q++) {
        json_t *row = json_array();
        if (!row || json_array_append_new(x, row))
            return -1;
        for (int k = 0; k < g->nb && !e; k++) {
            const xp_cell *c = &g->cell[q * g->nb + k];
            json_t *co = uly_json_append_object(row);
            if (!co)
                return -1;
            e |= set_new(co, "group", c->group < 0 ? json_null() : json_integer(c->group));
            e |= set_new(co, "step", c->step < 0 ? json_null() : json_integer(c->step));
            e |= uly_json_set_fixed(co, "pairs", c->pairs, 0);
        }
    }
    return e;
}

static int in_group(const xp_grid *g, int k, int r)
{
    for (int u = 0; u < g->gsize; u++)
        if (g->granks[k * g->gsize + u] == r)
            return 1;
    return 0;
}

/* Per step per rank: the K, V block held (ring methods), the grid cells
 * computed and the work (visible pairs x the rank's query heads). */
static int steps(json_t *root, const xp_fig *f)
{
    const uly_sp_plan *pl = &f->plan;
    const uly_attn_desc *a = &f->a;
    const xp_grid *g = &f->grid;
    const int ring = (uly_method_traits(f->method) & ULY_TRAIT_RING) != 0;
    json_t *arr = uly_json_add_array(root, "steps");
    if (!arr)
        return -1;
    int e = 0;
    for (int t = 0; t < g->steps && !e; t++) {
        json_t *so = uly_json_append_object(arr), *rk;
        if (!so || !(rk = uly_json_add_array(so, "ranks")))
            return -1;
        e |= uly_json_set_int(so, "step", t);
        for (int r = 0; r < pl->P && !e; r++) {
            json_t *o = uly_json_append_object(rk), *cells;
            if (!o)
                return -1;
            int u, j;
            uly_plan_grid(pl, r, &u, &j);
            int64_t hb, hc;
            uly_plan_heads(pl, a->heads, r, &hb, &hc);
            e |= uly_json_set_int(o, "rank", r);
            if (ring) {
                e |= uly_json_set_int(o, "ring_pos", j);
                if (t == 0 || uly_plan_ring_hold(a, pl, j, t)) {
                    int src = uly_plan_ring_src(pl, j, t);
                    int64_t kb[2], kc[2];
                    int nk = uly_plan_chunk(pl, a->seq, src, kb, kc);
                    e |= uly_json_set_int(o, "holds", src);
                    e |= set_new(o, "kv_segments", segments(nk, kb, kc));
                } else {
                    e |= set_new(o, "holds", json_null());
                    e |= set_new(o, "kv_segments", json_array());
                }
            }
            if (!(cells = uly_json_add_array(o, "cells")))
                return -1;
            for (int q = 0; q < g->nb; q++)
                for (int k = 0; k < g->nb; k++) {
                    const xp_cell *c = &g->cell[q * g->nb + k];
                    if (c->step == t && c->group >= 0 && in_group(g, c->group, r))
                        e |= json_array_append_new(cells, json_pack("[ii]", q, k));
                }
            e |= uly_json_set_fixed(o, "work", uly_plan_step_pairs(a, pl, r, t) * (double)hc, 0);
        }
    }
    return e;
}

/* ------------------------------------------------------------ decode */

/* [[begin, count], ...] of rank r's runs of [0, n) (uly_kv_segments) */
static json_t *kv_segments(const uly_kv_layout *L, int r, int64_t n)
{
    const int64_t k = uly_kv_segments(L, r, n, NULL, NULL, 0);
    int64_t *b = malloc(((size_t)k + 1) * sizeof *b), *c = malloc(((size_t)k + 1) * sizeof *c);
    json_t *s = b && c ? json_array() : NULL;
    if (s)
        uly_kv_segments(L, r, n, b, c, k);
    for (int64_t x = 0; s && x < k; x++)
        if (json_array_append_new(s, json_pack("[II]", (json_int_t)b[x], (json_int_t)c[x])))
            s = (json_decref(s), NULL);
    free(b);
    free(c);
    return s;
}

json_t *xp_decode_json(const xp_fig *f)
{
    const uly_attn_desc *a = &f->a;
    const int P = f->P, dcp = f->scheme == ULY_DECODE_DCP;
    const int64_t N = a->seq, n = N + f->generate;
    const uint64_t es = uly_dtype_size(a->dtype);
    char lname[48];
    json_t *root = json_object(), *o, *arr;
    if (!root)
        return NULL;
    int e = uly_json_set_str(root, "title", f->title);
    e |= uly_json_set_str(root, "subtitle", f->subtitle);
    if (!(o = uly_json_add_object(root, "problem")))
        goto fail;
    e |= uly_json_set_int(o, "ranks", P);
    e |= uly_json_set_str(o, "method", uly_decode_name(f->scheme));
    e |= uly_json_set_int(o, "batch", a->batch);
    e |= uly_json_set_int(o, "prompt", N);
    e |= uly_json_set_int(o, "generate", f->generate);
    e |= uly_json_set_int(o, "position", n);
    e |= uly_json_set_int(o, "heads", a->heads);
    e |= uly_json_set_int(o, "kv_heads", a->kv_heads);
    e |= uly_json_set_int(o, "head_dim", a->head_dim);
    e |= uly_json_set_str(o, "dtype", dtype_name[a->dtype == ULY_F64]);
    e |= uly_json_set_int(o, "element_bytes", (int64_t)es);
    e |= uly_json_set_str(o, "mask", mask_name(a));
    e |= uly_json_set_int(o, "window", a->window);
    e |= uly_json_set_str(o, "kv_layout", uly_kv_layout_name(&f->kv, lname, sizeof lname));
    /* the cache: what each rank holds after the prompt and with the new token */
    if (e || !(arr = uly_json_add_array(root, "cache")))
        goto fail;
    for (int r = 0; r < P && !e; r++) {
        json_t *x = uly_json_append_object(arr);
        int64_t hb, hc;
        uly_split(a->heads, P, r, &hb, &hc);
        if (!x)
            goto fail;
        e |= uly_json_set_int(x, "rank", r);
        e |= set_new(x, "prompt_segments", kv_segments(&f->kv, r, N));
        e |= uly_json_set_int(x, "prompt_tokens", uly_kv_count(&f->kv, r, N));
        e |= set_new(x, "segments", kv_segments(&f->kv, r, n + 1));
        e |= uly_json_set_int(x, "tokens", uly_kv_count(&f->kv, r, n + 1));
        e |= uly_json_set_int(x, "cache_bytes", uly_kv_count(&f->kv, r, n + 1) * 2 * a->batch * a->kv_heads *
                                                    a->head_dim * (int64_t)es);
        e |= uly_json_set_int(x, "head_begin", hb);
        e |= uly_json_set_int(x, "head_count", hc);
    }
    /* the new query's row of the mask grid */
    if (e || !(o = uly_json_add_object(root, "strip")) || !(arr = uly_json_add_array(o, "runs")))
        goto fail;
    e |= uly_json_set_int(o, "query", f->strip.query);
    for (int i = 0; i < f->strip.nrun && !e; i++) {
        const xp_strip_run *r = &f->strip.run[i];
        json_t *x = uly_json_append_object(arr);
        if (!x)
            goto fail;
        e |= uly_json_set_int(x, "rank", r->rank);
        e |= uly_json_set_int(x, "begin", r->begin);
        e |= uly_json_set_int(x, "count", r->count);
        e |= uly_json_set_bool(x, "visible", r->visible);
    }
    if (!e)
        e |= panels(root, f);
    if (!e)
        e |= matrices(root, f);
    /* per rank: the step's calls (uly_plan_decode_volume) */
    if (e || !(arr = uly_json_add_array(root, "volumes")))
        goto fail;
    for (int r = 0; r < P && !e; r++) {
        json_t *x = uly_json_append_object(arr), *calls;
        if (!x || !(calls = uly_json_add_array(x, "calls")))
            goto fail;
        e |= uly_json_set_int(x, "rank", r);
        uint64_t s = 0, v = 0;
        for (int w = dcp ? ULY_DEC_Q_AG : ULY_DEC_OL_A2A; w <= (dcp ? ULY_DEC_O_RS : ULY_DEC_OL_A2A) && !e; w++) {
            json_t *cl = uly_json_append_object(calls);
            if (!cl)
                goto fail;
            e |= uly_json_set_str(cl, "call", uly_dec_vol_name(w));
            e |= uly_json_set_int(cl, "sent", (int64_t)f->dvol[r].sent[w]);
            e |= uly_json_set_int(cl, "recv", (int64_t)f->dvol[r].recv[w]);
            s += f->dvol[r].sent[w];
            v += f->dvol[r].recv[w];
        }
        e |= uly_json_set_int(x, "step_sent", (int64_t)s);
        e |= uly_json_set_int(x, "step_recv", (int64_t)v);
    }
    if (e || !(o = uly_json_add_object(root, "closed_form")))
        goto fail;
    {
        const double B = (double)a->batch, H = (double)a->heads, d = (double)a->head_dim;
        e |= uly_json_set_str(o, "formula", dcp ? "sent = B e (P-1) (2 H d / P + H)" : "sent = B e H (d + 1) (P-1)/P");
        e |= uly_json_set_fixed(o, "bytes", dcp ? B * (double)es * (P - 1) * (2 * H * d / P + H)
                                                : B * (double)es * H * (d + 1) * (P - 1) / P, 0);
        e |= uly_json_set_bool(o, "applies", a->heads % P == 0);
        e |= uly_json_set_str(o, "merge", dcp ? "O = sum_r exp(LSE_r - L) O_r, L = log sum_r exp(LSE_r), rank order"
                                              : "running merge of (O_r, LSE_r) in rank order (uly_attn_merge)");
    }
    if (e)
        goto fail;
    return root;
fail:
    json_decref(root);
    return NULL;
}

json_t *xp_fig_json(const xp_fig *f)
{
    if (f->decode)
        return xp_decode_json(f);
    uly_layout L;
    if (uly_layout_init(&L, &f->a, &f->plan))
        return NULL;
    json_t *root = json_object();
    if (!root)
        return NULL;
    int e = uly_json_set_str(root, "title", f->title);
    e |= uly_json_set_str(root, "subtitle", f->subtitle);
    if (!e)
        e |= problem(root, f);
    if (!e)
        e |= ranks(root, f, &L);
    if (!e)
        e |= panels(root, f);
    if (!e)
        e |= matrices(root, f);
    if (!e)
        e |= volumes(root, f);
    if (!e)
        e |= closed_form(root, f, &L);
    if (!e)
        e |= grid(root, &f->grid);
    if (!e)
        e |= steps(root, f);
    if (e) {
        json_decref(root);
        return NULL;
    }
    return root;
}
