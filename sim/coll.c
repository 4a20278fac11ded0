/*
 * coll.c -- collectives decomposed into point-to-point transfers with
 * dependencies, run on the flow-level network (net.c): all-to-all (direct,
 * pairwise), ring all-gather / reduce-scatter / all-reduce, ring shift,
 * send/recv.  Exact per-GPU byte counters over the full pattern; long rings
 * are simulated for a window of steps and extrapolated.
 *
 * Not here: the links and the flow engine (net.c), which collectives a
 * training job runs (jobcoll.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "usim.h"
#include "usim_internal.h"

const char *usim_coll_name(usim_coll_type t)
{
    static const char *const names[USIM_NCOLL] = {
        "all-to-all", "all-to-all-pairwise", "all-gather", "reduce-scatter",
        "all-reduce", "ring-shift", "send-recv"};
    return (t >= 0 && t < USIM_NCOLL) ? names[t] : "?";
}

/* Steps of a collective on a group of P. */
static int coll_steps(const usim_coll *c)
{
    int P = c->size;
    switch (c->type) {
    case USIM_A2A_DIRECT: case USIM_RING_SHIFT: case USIM_SENDRECV: return 1;
    case USIM_A2A_PAIRWISE: case USIM_ALLGATHER: case USIM_REDUCE_SCATTER: return P - 1;
    case USIM_ALLREDUCE: return 2 * (P - 1);
    default: return 0;
    }
}

static int is_ring(usim_coll_type t)
{
    return t == USIM_ALLGATHER || t == USIM_REDUCE_SCATTER || t == USIM_ALLREDUCE;
}

/* Transfers of one step of the pattern, for one group.  emit(src_pos, dst_pos,
 * bytes) in a fixed order: position p = 0..P-1 (for direct all-to-all, all
 * pairs in row order).  Returns the count emitted. */
typedef void (*emit_fn)(void *ctx, int g, int step, int sp, int dp, uint64_t bytes);

static void pattern(const usim_coll *c, int g, int step, emit_fn emit, void *ctx)
{
    int P = c->size;
    switch (c->type) {
    case USIM_A2A_DIRECT:
        for (int s = 0; s < P; s++)
            for (int d = 0; d < P; d++)
                if (s != d)
                    emit(ctx, g, step, s, d, c->pair_bytes[(size_t)s * P + d]);
        break;
    case USIM_A2A_PAIRWISE: {
        int k = step + 1;
        for (int p = 0; p < P; p++) {
            int d = (p + k) % P;
            emit(ctx, g, step, p, d, c->pair_bytes[(size_t)p * P + d]);
        }
        break;
    }
    case USIM_ALLGATHER: case USIM_REDUCE_SCATTER: case USIM_ALLREDUCE: {
        int rs = c->type == USIM_REDUCE_SCATTER || (c->type == USIM_ALLREDUCE && step < P - 1);
        int k = c->type == USIM_ALLREDUCE && step >= P - 1 ? step - (P - 1) : step;
        for (int p = 0; p < P; p++) {
            int chunk = rs ? (((p - k - 1) % P) + P) % P : (((p - k) % P) + P) % P;
            emit(ctx, g, step, p, (p + 1) % P, c->chunk_bytes[chunk]);
        }
        break;
    }
    case USIM_RING_SHIFT:
        for (int p = 0; p < P; p++)
            emit(ctx, g, step, p, (p + 1) % P, c->bytes);
        break;
    case USIM_SENDRECV:
        emit(ctx, g, step, 0, 1, c->bytes);
        break;
    default:
        break;
    }
}

typedef struct build_ctx {
    const usim_coll *c;
    usim_net *net;
    usim_xfer *x;
    int n;
    int per_step;          /* transfers per step (all groups) */
    int per_group_step;
    /* counting */
    uint64_t *sent, *recv;
    uint64_t *sent_cls;    /* gpus x NCLASS */
} build_ctx;

static void emit_build(void *vctx, int g, int step, int sp, int dp, uint64_t bytes)
{
    build_ctx *b = vctx;
    const usim_coll *c = b->c;
    int P = c->size;
    usim_xfer *t = &b->x[b->n];
    t->src = c->ranks[(size_t)g * P + sp];
    t->dst = c->ranks[(size_t)g * P + dp];
    t->bytes = bytes;
    t->step = step;
    t->dep[0] = t->dep[1] = -1;
    if (step > 0 && c->type != USIM_A2A_DIRECT) {
        /* previous step of this group starts at base; transfer of position q is base + q */
        int base = (step - 1) * b->per_step + g * b->per_group_step;
        if (c->type == USIM_A2A_PAIRWISE) {
            t->dep[0] = base + sp;                       /* my previous send */
            t->dep[1] = base + (((sp - step) % P) + P) % P;  /* the send I received last step */
        } else {
            t->dep[0] = base + sp;                       /* my previous send */
            t->dep[1] = base + (sp - 1 + P) % P;         /* what I received last step */
        }
    }
    b->n++;
}

static void emit_count(void *vctx, int g, int step, int sp, int dp, uint64_t bytes)
{
    build_ctx *b = vctx;
    const usim_coll *c = b->c;
    int P = c->size;
    int src = c->ranks[(size_t)g * P + sp], dst = c->ranks[(size_t)g * P + dp];
    b->sent[src] += bytes;
    b->recv[dst] += bytes;
    int links[4], cls;
    usim_time lat;
    usim_net_route(b->net, src, dst, links, &lat, &cls);
    b->sent_cls[(size_t)src * USIM_NCLASS + cls] += bytes;
}

int usim_coll_count(usim_net *n, const usim_coll *c, usim_coll_result *r, uint64_t *sent,
                    uint64_t *recv)
{
    memset(r, 0, sizeof *r);
    int P = c->size, G = c->ngroups;
    if (P < 1 || G < 1 || (size_t)P * G > (size_t)usim_net_gpus(n))
        return usim_set_error(USIM_EINVAL, "%s: %d groups of %d do not fit on %d GPUs",
                              usim_coll_name(c->type), G, P, usim_net_gpus(n));
    if (c->type == USIM_SENDRECV && P != 2)
        return usim_set_error(USIM_EINVAL, "send-recv needs groups of 2 (got %d)", P);
    if ((c->type == USIM_A2A_DIRECT || c->type == USIM_A2A_PAIRWISE) && !c->pair_bytes)
        return usim_set_error(USIM_EINVAL, "all-to-all without a byte matrix");
    if (is_ring(c->type) && !c->chunk_bytes)
        return usim_set_error(USIM_EINVAL, "ring collective without chunk sizes");
    for (size_t i = 0; i < (size_t)P * G; i++)
        if (c->ranks[i] < 0 || c->ranks[i] >= usim_net_gpus(n))
            return usim_set_error(USIM_EINVAL, "%s: GPU %d out of range", usim_coll_name(c->type),
                                  c->ranks[i]);
    if (P == 1) {
        if (sent)
            memset(sent, 0, (size_t)usim_net_gpus(n) * sizeof *sent);
        if (recv)
            memset(recv, 0, (size_t)usim_net_gpus(n) * sizeof *recv);
        return USIM_OK;
    }
    int steps = coll_steps(c);
    /* exact byte counts over the full pattern */
    build_ctx b = {.c = c, .net = n};
    b.sent = usim_calloc((size_t)usim_net_gpus(n), sizeof *b.sent);
    b.recv = usim_calloc((size_t)usim_net_gpus(n), sizeof *b.recv);
    b.sent_cls = usim_calloc((size_t)usim_net_gpus(n) * USIM_NCLASS, sizeof *b.sent_cls);
    if (!b.sent || !b.recv || !b.sent_cls) {
        free(b.sent); free(b.recv); free(b.sent_cls);
        return usim_set_error(USIM_ENOMEM, "out of memory counting a collective");
    }
    for (int s = 0; s < steps; s++)
        for (int g = 0; g < G; g++)
            pattern(c, g, s, emit_count, &b);
    for (int i = 0; i < usim_net_gpus(n); i++) {
        r->total_sent += b.sent[i];
        r->total_recv += b.recv[i];
        for (int k = 0; k < USIM_NCLASS; k++)
            if (b.sent_cls[(size_t)i * USIM_NCLASS + k] > r->max_sent[k])
                r->max_sent[k] = b.sent_cls[(size_t)i * USIM_NCLASS + k];
    }
    if (sent)
        memcpy(sent, b.sent, (size_t)usim_net_gpus(n) * sizeof *sent);
    if (recv)
        memcpy(recv, b.recv, (size_t)usim_net_gpus(n) * sizeof *recv);
    free(b.sent); free(b.recv); free(b.sent_cls);

    return USIM_OK;
}

int usim_coll_run(usim_net *n, const usim_coll *c, usim_coll_result *r, uint64_t *sent,
                  uint64_t *recv)
{
    int rc = usim_coll_count(n, c, r, sent, recv);
    if (rc || c->size == 1)
        return rc;
    int P = c->size, G = c->ngroups;
    int steps = coll_steps(c);
    build_ctx b = {.c = c, .net = n};
    /* simulate (ring collectives: a window of steps, then extrapolate) */
    int sim_steps = steps;
    if (is_ring(c->type) && steps > usim_net_ring_window(n))
        sim_steps = usim_net_ring_window(n);
    b.per_group_step = c->type == USIM_A2A_DIRECT ? P * (P - 1) : c->type == USIM_SENDRECV ? 1 : P;
    b.per_step = b.per_group_step * G;
    size_t total = (size_t)b.per_step * sim_steps;
    if (total > (size_t)INT32_MAX)
        return usim_set_error(USIM_EINVAL, "%s: too many transfers (%zu)", usim_coll_name(c->type), total);
    b.x = usim_malloc(total * sizeof *b.x);
    usim_time *fin = usim_malloc(total * sizeof *fin);
    if (!b.x || !fin) {
        free(b.x); free(fin);
        return usim_set_error(USIM_ENOMEM, "out of memory for %zu transfers", total);
    }
    for (int s = 0; s < sim_steps; s++)
        for (int g = 0; g < G; g++)
            pattern(c, g, s, emit_build, &b);
    USIM_CHECK((size_t)b.n == total);
    usim_time mk;
    rc = usim_net_run(n, b.x, b.n, fin, &mk);
    if (rc == USIM_OK) {
        r->duration = mk;
        if (sim_steps < steps) {
            /* steady state: average step period over the second half of the window */
            usim_time *end = usim_calloc((size_t)sim_steps, sizeof *end);
            if (!end) {
                rc = usim_set_error(USIM_ENOMEM, "out of memory");
            } else {
                for (int i = 0; i < b.n; i++)
                    if (fin[i] > end[b.x[i].step])
                        end[b.x[i].step] = fin[i];
                int w = sim_steps / 2;
                double period = (double)(end[sim_steps - 1] - end[sim_steps - 1 - w]) / w;
                r->duration = mk + (usim_time)llround(period * (steps - sim_steps));
                r->extrapolated = steps - sim_steps;
                free(end);
            }
        }
    }
    free(b.x);
    free(fin);
    return rc;
}
