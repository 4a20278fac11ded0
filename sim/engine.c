/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine.c -- the discrete-event engine: a binary min-heap of events keyed by
 * (time, sequence number).  Time is int64 picoseconds; events scheduled for
 * the same instant run in the order they were scheduled, so a run is
 * deterministic.  The clock is checked to be monotone with USIM_CHECK, which
 * NDEBUG does not remove.
 */
#include <stdlib.h>

#include "usim.h"
#include "usim_internal.h"

typedef struct event {
    usim_time t;
    uint64_t seq;
    usim_handler h;
    void *ctx;
    int64_t arg;
} event;

struct usim_engine {
    event *heap;      /* heap[0] is the earliest */
    size_t n, cap;
    uint64_t next_seq;
    uint64_t executed;
    usim_time now;
};

static int before(const event *a, const event *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

usim_engine *usim_engine_new(void)
{
    usim_engine *e = usim_calloc(1, sizeof *e);
    if (!e)
        usim_set_error(USIM_ENOMEM, "out of memory allocating the event engine");
    return e;
}

void usim_engine_free(usim_engine *e)
{
    if (!e)
        return;
    free(e->heap);
    free(e);
}

void usim_engine_reset(usim_engine *e)
{
    e->n = 0;
    e->next_seq = 0;
    e->executed = 0;
    e->now = 0;
}

int usim_engine_at(usim_engine *e, usim_time t, usim_handler h, void *ctx, int64_t arg)
{
    if (t < e->now)
        return usim_set_error(USIM_EINVAL, "event scheduled in the past (%lld < %lld ps)",
                              (long long)t, (long long)e->now);
    if (e->n == e->cap) {
        size_t cap = e->cap ? 2 * e->cap : 1024;
        event *nh = usim_realloc(e->heap, cap * sizeof *nh);
        if (!nh)
            return usim_set_error(USIM_ENOMEM, "out of memory growing the event queue");
        e->heap = nh;
        e->cap = cap;
    }
    event ev = {t, e->next_seq++, h, ctx, arg};
    size_t i = e->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(&ev, &e->heap[p]))
            break;
        e->heap[i] = e->heap[p];
        i = p;
    }
    e->heap[i] = ev;
    return USIM_OK;
}

static event pop(usim_engine *e)
{
    event top = e->heap[0];
    event last = e->heap[--e->n];
    size_t i = 0, n = e->n;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const event *best = &last;
        if (l < n && before(&e->heap[l], best)) {
            m = l;
            best = &e->heap[l];
        }
        if (r < n && before(&e->heap[r], best))
            m = r;
        if (m == i)
            break;
        e->heap[i] = e->heap[m];
        i = m;
    }
    if (n > 0)
        e->heap[i] = last;
    return top;
}

int usim_engine_run(usim_engine *e)
{
    while (e->n > 0) {
        event ev = pop(e);
        USIM_CHECK(ev.t >= e->now);
        e->now = ev.t;
        e->executed++;
        ev.h(e, ev.ctx, ev.arg);
    }
    return USIM_OK;
}

int usim_engine_next_at(const usim_engine *e, usim_time t)
{
    return e->n > 0 && e->heap[0].t == t;
}

usim_time usim_engine_now(const usim_engine *e)
{
    return e->now;
}

uint64_t usim_engine_events(const usim_engine *e)
{
    return e->executed;
}
