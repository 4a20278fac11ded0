/* SPDX-License-Identifier: Apache-2.0 */
/*
 * trace.c -- the Chrome/Perfetto trace of one simulated iteration.  For each
 * traced GPU g (GPU 0 by default) two processes: "GPU g" with one track per
 * stream and "links of GPU g" with a track per link class (NVLink, NIC)
 * showing each communication that uses it; timestamps in microseconds.
 *
 * The simulator times one representative GPU (usim_graph): every traced GPU
 * shows that schedule.  Communications of different streams overlap in time
 * on a link class, partly as often as not; Perfetto nests the slices of one
 * track by start and end, so a link class gets lanes (sub-tracks): each slice
 * takes the first lane of its class where no slice still runs when it
 * starts, and the slices of a lane are disjoint.  Lane 0 of a class is its
 * track of old (tid class + 1, named "NVLink" or "NIC"); lanes 1, 2, ... are
 * "NVLink 2", "NVLink 3", ... (tid 100 (class + 1) + lane).
 *
 * Every event is a jansson object written with json_dumpf, one per line,
 * inside a header and a closing bracket written here: the trace is never held
 * in memory whole (an iteration has millions of operations at large batches).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "trace.h"
#include "usim.h"
#include "usim_internal.h"

/* One slice on a link class: an operation's [start, end). */
typedef struct link_slice {
    usim_time start, end;
    int op;
} link_slice;

static int by_start(const void *a, const void *b)
{
    const link_slice *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->end != y->end)   /* the longer first */
        return x->end > y->end ? -1 : 1;
    return x->op - y->op;
}

static int uses_class(const usim_op *o, const usim_jobcoll *jc, int k)
{
    return o->coll >= 0 && jc->r[o->coll].max_sent[k] > 0;
}

/* Lanes of class k: lane[i] for each operation i that uses it; the number of
 * lanes in *nlanes.  0, or USIM_ENOMEM. */
static int assign_lanes(const usim_graph *g, const usim_jobcoll *jc, int k, unsigned char *lane,
                        int *nlanes)
{
    *nlanes = 0;
    int n = 0;
    for (int i = 0; i < g->n; i++)
        n += uses_class(&g->ops[i], jc, k);
    if (n == 0)
        return USIM_OK;
    link_slice *s = malloc((size_t)n * sizeof *s);
    if (!s)
        return usim_set_error(USIM_ENOMEM, "out of memory writing the trace");
    n = 0;
    for (int i = 0; i < g->n; i++)
        if (uses_class(&g->ops[i], jc, k))
            s[n++] = (link_slice){g->ops[i].start, g->ops[i].end, i};
    qsort(s, (size_t)n, sizeof *s, by_start);
    /* end of the last slice of each lane; at most one slice per stream runs
     * at a time, so USIM_NSTREAM lanes always suffice */
    usim_time lane_end[USIM_NSTREAM + 1];
    for (int i = 0; i < n; i++) {
        int l = 0;
        while (l < *nlanes && lane_end[l] > s[i].start)
            l++;
        USIM_CHECK(l <= USIM_NSTREAM);
        if (l == *nlanes)
            (*nlanes)++;
        lane_end[l] = s[i].end;
        lane[s[i].op] = (unsigned char)l;
    }
    free(s);
    return USIM_OK;
}

static int lane_tid(int k, int l)
{
    return l == 0 ? k + 1 : 100 * (k + 1) + l;
}

/* Times in µs from picoseconds: ps / 1e6 is the double nearest the exact
 * decimal, and the dump precision keeps its six decimals (see below). */
static double us(usim_time ps)
{
    return (double)ps / 1e6;
}

/* Write ev (stolen) as one event line; *first: no comma before it yet.  A
 * write error is left in t's error indicator for the caller (ferror, and the
 * errno of the final flush: "No space left on device"). */
static int put(FILE *t, json_t *ev, size_t flags, int *first)
{
    if (!ev)
        return usim_set_error(USIM_ENOMEM, "out of memory writing the trace");
    if (!*first)
        fputc(',', t);
    fputc('\n', t);
    *first = 0;
    (void)json_dumpf(ev, t, flags);
    json_decref(ev);
    return USIM_OK;
}

static json_t *meta(const char *what, int pid, int tid, const char *key, json_t *val)
{
    json_t *ev = json_pack("{s:s,s:s,s:i}", "name", what, "ph", "M", "pid", pid);
    if (ev && tid > 0 && json_object_set_new(ev, "tid", json_integer(tid)))
        goto fail;
    if (ev && json_object_set_new(ev, "args", json_pack("{s:o}", key, val)))
        goto fail;
    return ev;
fail:
    json_decref(ev);
    return NULL;
}

/* A title that is not UTF-8 (a model name from the command line) keeps its
 * ASCII and shows '?' for the rest. */
static json_t *title_string(const char *title)
{
    json_t *s = json_string(title);
    if (s)
        return s;
    char buf[256];
    size_t i = 0;
    for (; title[i] && i + 1 < sizeof buf; i++)
        buf[i] = (unsigned char)title[i] < 0x80 ? title[i] : '?';
    buf[i] = 0;
    return json_string(buf);
}

int usim_trace_write(FILE *t, const usim_graph *g, const usim_jobcoll *jc, const char *title,
                     const int *gpus, int ngpus)
{
    static const int gpu0 = 0;
    if (!gpus || ngpus < 1) {
        gpus = &gpu0;
        ngpus = 1;
    }
    /* Precision of the times: the digits of the last end in µs plus six
     * decimals (whole picoseconds), as many as a double holds. */
    usim_time last = 0;
    for (int i = 0; i < g->n; i++)
        if (g->ops[i].end > last)
            last = g->ops[i].end;
    int digits = 6 + 1;
    for (double v = us(last); v >= 10 && digits < 17; v /= 10)
        digits++;
    const size_t flags = JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY | JSON_REAL_PRECISION(digits);

    int rc = USIM_OK;
    unsigned char *lane = calloc((size_t)(g->n ? g->n : 1) * USIM_NCLASS, 1);
    unsigned char *lk[USIM_NCLASS];
    int nlanes[USIM_NCLASS];
    if (!lane)
        return usim_set_error(USIM_ENOMEM, "out of memory writing the trace");
    for (int k = 0; k < USIM_NCLASS && !rc; k++) {
        lk[k] = lane + (size_t)k * (size_t)(g->n ? g->n : 1);
        rc = assign_lanes(g, jc, k, lk[k], &nlanes[k]);
    }
    if (rc)
        goto out;
    static const char *const class_name[USIM_NCLASS] = {"NVLink", "NIC"};

    /* header: {"displayTimeUnit":"ms","otherData":{"title":...},"traceEvents":[ */
    json_t *ts = title_string(title);
    if (!ts) {
        rc = usim_set_error(USIM_ENOMEM, "out of memory writing the trace");
        goto out;
    }
    fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"title\":", t);
    (void)json_dumpf(ts, t, flags);   /* write errors: see put */
    json_decref(ts);
    fputs("},\"traceEvents\":[", t);
    int first = 1;
    char name[64];
    for (int q = 0; q < ngpus && !rc; q++) {
        int pid = 2 * q + 1;
        snprintf(name, sizeof name, "GPU %d", gpus[q]);
        rc = put(t, meta("process_name", pid, 0, "name", json_string(name)), flags, &first);
        snprintf(name, sizeof name, "links of GPU %d", gpus[q]);
        if (!rc)
            rc = put(t, meta("process_name", pid + 1, 0, "name", json_string(name)), flags, &first);
    }
    for (int q = 0; q < ngpus && !rc; q++) {
        int pid = 2 * q + 1;
        for (int s = 0; s < USIM_NSTREAM && !rc; s++)
            rc = put(t, meta("thread_name", pid, s + 1, "name", json_string(usim_stream_name(s))), flags,
                     &first);
        for (int k = 0; k < USIM_NCLASS && !rc; k++)
            rc = put(t, meta("thread_name", pid + 1, k + 1, "name", json_string(class_name[k])), flags, &first);
        for (int k = 0; k < USIM_NCLASS && !rc; k++)
            for (int l = 1; l < nlanes[k] && !rc; l++) {
                snprintf(name, sizeof name, "%s %d", class_name[k], l + 1);
                rc = put(t, meta("thread_name", pid + 1, lane_tid(k, l), "name", json_string(name)), flags,
                         &first);
            }
        /* with lanes, every link track is ordered: a class's lanes together */
        for (int k = 0; k < USIM_NCLASS && !rc && (nlanes[0] > 1 || nlanes[1] > 1); k++)
            for (int l = 0; l < (nlanes[k] > 1 ? nlanes[k] : 1) && !rc; l++)
                rc = put(t, meta("thread_sort_index", pid + 1, lane_tid(k, l), "sort_index",
                                 json_integer(10 * k + l)), flags, &first);
    }
    for (int q = 0; q < ngpus && !rc; q++) {
        int pid = 2 * q + 1;
        for (int i = 0; i < g->n && !rc; i++) {
            const usim_op *o = &g->ops[i];
            double ts_us = us(o->start), dur_us = us(o->end - o->start);
            rc = put(t, json_pack("{s:s,s:s,s:s,s:i,s:i,s:f,s:f,s:{s:i}}", "name", o->name, "cat",
                                  o->kind < 0 ? "compute" : usim_kind_name(o->kind), "ph", "X", "pid", pid,
                                  "tid", o->stream + 1, "ts", ts_us, "dur", dur_us, "args", "layer",
                                  o->layer), flags, &first);
            for (int k = 0; k < USIM_NCLASS && !rc; k++)
                if (uses_class(o, jc, k))
                    rc = put(t, json_pack("{s:s,s:s,s:s,s:i,s:i,s:f,s:f,s:{s:I}}", "name", o->name, "cat",
                                          usim_kind_name(o->kind), "ph", "X", "pid", pid + 1, "tid",
                                          lane_tid(k, lk[k][i]), "ts", ts_us, "dur", dur_us, "args",
                                          "bytes_sent_max_per_gpu", (json_int_t)jc->r[o->coll].max_sent[k]),
                             flags, &first);
        }
    }
    if (!rc)
        fputs("\n]}\n", t);
out:
    free(lane);
    return rc;
}
