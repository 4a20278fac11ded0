/* SPDX-License-Identifier: Apache-2.0 */
/*
 * coll_gen.c -- the transfer buffer of one generation: per-GPU (or per-position)
 * byte counters and the stored transfers of the simulated window, with
 * their dependencies.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "usim.h"
#include "usim_internal.h"
#include "coll_internal.h"

/* Count a transfer of payload bytes src -> dst and, within the window, store
 * it with dependencies d0, d1.  Returns its index, or -1 if not stored. */
int usim_gen_count_arrays(gen *g)
{
    size_t G = g->byslot ? (size_t)g->c->size : (size_t)usim_net_gpus(g->net);
    g->sent = usim_calloc(G, sizeof *g->sent);
    g->recv = usim_calloc(G, sizeof *g->recv);
    g->sent_cls = usim_calloc(G * USIM_NCLASS, sizeof *g->sent_cls);
    if (!g->sent || !g->recv || !g->sent_cls) {
        free(g->sent); free(g->recv); free(g->sent_cls);
        g->sent = g->recv = g->sent_cls = NULL;
        g->err = USIM_ENOMEM;
        return USIM_ENOMEM;
    }
    return USIM_OK;
}

void usim_gen_count(gen *g, int src, int dst, uint64_t payload)
{
    if (src == dst || g->err || (!g->sent && usim_gen_count_arrays(g)))
        return;
    if (src >= 0) {
        int cl = usim_net_class(g->net, src, dst), s = slot_of(g, src);
        g->sent[s] += payload;
        g->sent_cls[(size_t)s * USIM_NCLASS + cl] += payload;
    }
    if (dst >= 0)
        g->recv[slot_of(g, dst)] += payload;
}

int usim_gen_put(gen *g, int src, int dst, uint64_t payload, int d0, int d1, int step)
{
    if (!g->nocount && !g->skipcount)
        usim_gen_count(g, src, dst, payload);
    if (!g->build || step >= g->window || g->err)
        return -1;
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 1024;
        if (cap > (size_t)INT_MAX) {
            g->err = USIM_EINVAL;
            return -1;
        }
        usim_xfer *nx = usim_realloc(g->x, cap * sizeof *nx);
        if (!nx) {
            g->err = USIM_ENOMEM;
            return -1;
        }
        g->x = nx;
        g->cap = cap;
    }
    usim_xfer *t = &g->x[g->n];
    t->src = src;
    t->dst = dst;
    t->bytes = g->wire == 1 ? payload : (uint64_t)ceil((double)payload * g->wire);
    t->dep[0] = d0;
    t->dep[1] = d1;
    t->step = step;
    t->nolat = g->nolat;
    return (int)g->n++;
}

/* A transfer waiting for every index in deps (-1 entries ignored): extra
 * dependencies are folded into joins (zero-byte transfers at src). */
int usim_gen_put_all(gen *g, int src, int dst, uint64_t payload, int *deps, int nd)
{
    int k = 0;
    for (int i = 0; i < nd; i++)
        if (deps[i] >= 0)
            deps[k++] = deps[i];
    while (k > 2) {
        int j = usim_gen_put(g, src >= 0 ? src : dst, src >= 0 ? src : dst, 0, deps[k - 2], deps[k - 1], 0);
        deps[k - 2] = j;
        k--;
    }
    return usim_gen_put(g, src, dst, payload, k > 0 ? deps[0] : -1, k > 1 ? deps[1] : -1, 0);
}

void usim_gen_free(gen *g)
{
    free(g->rk0);
    free(g->xblk);
    free(g->isrep);
    free(g->x);
    free(g->sent);
    free(g->recv);
    free(g->sent_cls);
}
