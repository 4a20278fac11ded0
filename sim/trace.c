/*
 * trace.c -- the Chrome/Perfetto trace of one simulated iteration: process
 * "GPU 0" with one track per stream, process "links of GPU 0" with an NVLink
 * and a NIC track; timestamps in microseconds.
 */
#include <stdio.h>

#include "trace.h"
#include "usim.h"

void usim_trace_write(FILE *t, const usim_graph *g, const usim_jobcoll *jc, const char *title)
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
    for (int s = 0; s < USIM_NSTREAM; s++)
        fprintf(t, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
                s + 1, usim_stream_name(s));
    fprintf(t, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":2,\"tid\":1,\"args\":{\"name\":\"NVLink\"}}");
    fprintf(t, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":2,\"tid\":2,\"args\":{\"name\":\"NIC\"}}");
    for (int i = 0; i < g->n; i++) {
        const usim_op *o = &g->ops[i];
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