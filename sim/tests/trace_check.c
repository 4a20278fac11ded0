/* SPDX-License-Identifier: Apache-2.0 */
/*
 * trace_check.c -- reads a trace written by ulysses-sim --trace and checks
 * what Perfetto and chrome://tracing need of it: the file parses as JSON
 * (jansson), it has a traceEvents array, every complete event ("ph":"X") has
 * a pid, a tid, a ts and a non-negative dur, and on every track (pid, tid)
 * any two slices are either disjoint or properly nested (a slice that starts
 * inside another ends inside it too).  It prints one summary line:
 *
 *   trace FILE: N events, T tracks, S slices; GPUs 0 1 (slices 120 120)
 *
 * (the GPUs are those of the "GPU n" process names, with the slices on their
 * processes and on their "links of GPU n" processes).  Exit status 0 when
 * every check holds, 1 with a line naming the first failure.  Not installed:
 * a test tool of sim/tests/cli_trace.sh.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct slice {
    long long pid, tid;
    double ts, end;
    int ev;            /* index in traceEvents */
} slice;

/* two slices touching or overlapping by less than this (µs) are disjoint:
 * the simulator's times are whole picoseconds */
#define EPS_US 5e-7

static int by_track_then_start(const void *a, const void *b)
{
    const slice *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    if (x->end != y->end)   /* the longer first: it is the parent */
        return x->end > y->end ? -1 : 1;
    return x->ev - y->ev;
}

static const char *ev_name(json_t *ev)
{
    const char *s = json_string_value(json_object_get(ev, "name"));
    return s ? s : "(no name)";
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: trace_check TRACE.json\n");
        return 2;
    }
    json_error_t err;
    json_t *root = json_load_file(argv[1], 0, &err);
    if (!root) {
        printf("FAIL: %s:%d:%d: %s\n", argv[1], err.line, err.column, err.text);
        return 1;
    }
    json_t *evs = json_object_get(root, "traceEvents");
    if (!json_is_array(evs)) {
        printf("FAIL: %s: no traceEvents array\n", argv[1]);
        return 1;
    }
    size_t n = json_array_size(evs);
    slice *sl = calloc(n ? n : 1, sizeof *sl);
    /* GPU number of each pid (-1: none); pids are small in these traces */
    enum { MAXPID = 4096 };
    static long long gpu_of[MAXPID];
    static long long count[MAXPID];
    for (int p = 0; p < MAXPID; p++)
        gpu_of[p] = -1;
    size_t ns = 0;
    int bad = 0;
    for (size_t i = 0; i < n && !bad; i++) {
        json_t *ev = json_array_get(evs, i);
        const char *ph = json_string_value(json_object_get(ev, "ph"));
        json_t *pid = json_object_get(ev, "pid");
        if (!ph || !json_is_integer(pid) || json_integer_value(pid) < 0 ||
            json_integer_value(pid) >= MAXPID) {
            printf("FAIL: event %zu (%s): no ph or no pid in 0..%d\n", i, ev_name(ev), MAXPID - 1);
            bad = 1;
            break;
        }
        long long p = json_integer_value(pid);
        const char *pname = json_string_value(json_object_get(json_object_get(ev, "args"), "name"));
        long long g;
        char tail;
        if (strcmp(ph, "M") == 0 && strcmp(ev_name(ev), "process_name") == 0 && pname &&
            (sscanf(pname, "GPU %lld%c", &g, &tail) == 1 || sscanf(pname, "links of GPU %lld%c", &g, &tail) == 1))
            gpu_of[p] = g;
        if (strcmp(ph, "X") != 0)
            continue;
        json_t *tid = json_object_get(ev, "tid"), *ts = json_object_get(ev, "ts"),
               *dur = json_object_get(ev, "dur");
        if (!json_is_integer(tid) || !json_is_number(ts) || !json_is_number(dur) ||
            json_number_value(dur) < 0) {
            printf("FAIL: event %zu (%s): a complete event needs an integer tid, a ts and a dur >= 0\n",
                   i, ev_name(ev));
            bad = 1;
            break;
        }
        sl[ns].pid = p;
        sl[ns].tid = json_integer_value(tid);
        sl[ns].ts = json_number_value(ts);
        sl[ns].end = sl[ns].ts + json_number_value(dur);
        sl[ns].ev = (int)i;
        count[p]++;
        ns++;
    }
    /* proper nesting on each track: a stack of the open slices */
    qsort(sl, ns, sizeof *sl, by_track_then_start);
    size_t *stack = calloc(ns ? ns : 1, sizeof *stack);
    size_t depth = 0, tracks = 0;
    for (size_t i = 0; i < ns && !bad; i++) {
        if (i == 0 || sl[i].pid != sl[i - 1].pid || sl[i].tid != sl[i - 1].tid) {
            depth = 0;
            tracks++;
        }
        while (depth && sl[stack[depth - 1]].end <= sl[i].ts + EPS_US)
            depth--;   /* ended before this one starts */
        if (depth && sl[i].end > sl[stack[depth - 1]].end + EPS_US) {
            const slice *o = &sl[stack[depth - 1]];
            printf("FAIL: pid %lld tid %lld: \"%s\" [%.6f, %.6f] overlaps \"%s\" [%.6f, %.6f] partly "
                   "(neither disjoint nor nested)\n", o->pid, o->tid,
                   ev_name(json_array_get(evs, (size_t)o->ev)), o->ts, o->end,
                   ev_name(json_array_get(evs, (size_t)sl[i].ev)), sl[i].ts, sl[i].end);
            bad = 1;
            break;
        }
        stack[depth++] = i;
    }
    if (!bad) {
        printf("trace %s: %zu events, %zu tracks, %zu slices; GPUs", argv[1], n, tracks, ns);
        long long c[MAXPID];
        int ng = 0;
        for (long long g = 0; g < MAXPID; g++) {
            int seen = 0;
            long long k = 0;
            for (int p = 0; p < MAXPID; p++)
                if (gpu_of[p] == g) {
                    seen = 1;
                    k += count[p];
                }
            if (seen) {
                printf(" %lld", g);
                c[ng++] = k;
            }
        }
        printf(" (slices");
        for (int i = 0; i < ng; i++)
            printf(" %lld", c[i]);
        printf(")\n");
    }
    free(stack);
    free(sl);
    json_decref(root);
    return bad;
}
