/* SPDX-License-Identifier: Apache-2.0 */
/*
 * coll_engine.c -- the collective engine's state on one network (see
 * coll_engine.h): engine choice, the last class analysis, the ring window
 * and the link tags.
 *
 * Not here: the analysis itself (coll_class.c), the runs (coll_run.c).
 */
#include <stdlib.h>

#include "usim.h"
#include "usim_internal.h"
#include "coll_engine.h"

struct usim_coll_engine {
    int mode;           /* USIM_ENGINE_* for the collectives run on the network */
    int ring_window;
    /* the last class analysis: key of the groups, answer */
    int *pos;
    uint64_t key;
    int ng, p, valid, on;
    int *link_tag, nlinks;
};

usim_coll_engine *usim_coll_engine_new(void)
{
    usim_coll_engine *e = usim_calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->mode = USIM_ENGINE_AUTO;
    e->ring_window = 64;
    return e;
}

void usim_coll_engine_free(usim_coll_engine *e)
{
    if (!e)
        return;
    free(e->pos);
    free(e->link_tag);
    free(e);
}

void usim_coll_engine_set_mode(usim_coll_engine *e, int mode)
{
    e->mode = mode;
    e->valid = 0;
}

int usim_coll_engine_mode(const usim_coll_engine *e) { return e->mode; }

void usim_coll_engine_set_ring_window(usim_coll_engine *e, int steps)
{
    e->ring_window = steps < 4 ? 4 : steps;
}

int usim_coll_engine_ring_window(const usim_coll_engine *e) { return e->ring_window; }

int *usim_coll_engine_lookup(usim_coll_engine *e, uint64_t key, int ng, int p, int *on)
{
    *on = -1;
    if (!e->valid || e->key != key || e->ng != ng || e->p != p)
        return NULL;
    *on = e->on;
    return e->pos;
}

void usim_coll_engine_store(usim_coll_engine *e, uint64_t key, int ng, int p, int *pos)
{
    free(e->pos);
    e->pos = pos;
    e->key = key;
    e->ng = ng;
    e->p = p;
    e->on = pos != NULL;
    e->valid = 1;
}

int *usim_coll_engine_link_tags(usim_coll_engine *e, int nlinks)
{
    if (e->link_tag && e->nlinks != nlinks) {   /* one network owns e: never taken */
        free(e->link_tag);
        e->link_tag = NULL;
    }
    if (!e->link_tag) {
        e->link_tag = usim_calloc((size_t)nlinks, sizeof *e->link_tag);
        e->nlinks = e->link_tag ? nlinks : 0;
    }
    return e->link_tag;
}
