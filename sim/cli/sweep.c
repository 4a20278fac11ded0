/*
 * sweep.c -- ulysses-sim sweep: every combination of GPU counts, sequence
 * lengths and methods, one CSV row each; progress bar on a terminal; optional
 * SVG plot through gnuplot.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "opts.h"
#include "output.h"

int cmd_sweep(int argc, char **argv);

static void progress(int done, int total)
{
    int width = 40, fill = total ? done * width / total : width;
    fprintf(stderr, "\r[");
    for (int i = 0; i < width; i++)
        fputc(i < fill ? '#' : '.', stderr);
    fprintf(stderr, "] %d/%d", done, total);
    if (done == total)
        fputc('\n', stderr);
    fflush(stderr);
}

typedef struct point {
    int gpus;
    int64_t seq;
    usim_method method;
    int ok;
    double iter_s;
} point;

static int plot(const char *file, const point *pts, int n, int x_is_seq)
{
#ifndef GNUPLOT_PATH
    (void)pts;
    (void)n;
    (void)x_is_seq;
    fprintf(stderr, "ulysses-sim: --plot %s: gnuplot was not found when ulysses-sim was configured; "
                    "install gnuplot and re-run configure (the CSV was written)\n", file);
    return 1;
#else
    FILE *g = popen(GNUPLOT_PATH " 2>&1", "w");
    if (!g) {
        fprintf(stderr, "ulysses-sim: --plot: cannot run %s\n", GNUPLOT_PATH);
        return 1;
    }
    fprintf(g, "set terminal svg size 900,600 dynamic\nset output '%s'\n", file);
    fprintf(g, "set logscale x 2\nset logscale y\nset grid\nset key left top\n");
    fprintf(g, "set xlabel '%s'\nset ylabel 'iteration time [s]'\n",
            x_is_seq ? "sequence length [tokens]" : "GPUs");
    /* series: one per (method, other axis value), in order of first appearance */
    int nseries = 0;
    int *sid = calloc((size_t)n, sizeof *sid);
    if (!sid) {
        pclose(g);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        sid[i] = -1;
        for (int k = 0; k < i; k++)
            if (pts[k].method == pts[i].method &&
                (x_is_seq ? pts[k].gpus == pts[i].gpus : pts[k].seq == pts[i].seq)) {
                sid[i] = sid[k];
                break;
            }
        if (sid[i] < 0)
            sid[i] = nseries++;
    }
    fprintf(g, "plot ");
    for (int s = 0; s < nseries; s++) {
        int first = 0;
        while (sid[first] != s)
            first++;
        if (x_is_seq)
            fprintf(g, "%s'-' using 1:2 with linespoints title '%s, %d GPUs'", s ? ", " : "",
                    usim_method_name(pts[first].method), pts[first].gpus);
        else
            fprintf(g, "%s'-' using 1:2 with linespoints title '%s, %lld tokens'", s ? ", " : "",
                    usim_method_name(pts[first].method), (long long)pts[first].seq);
    }
    fprintf(g, "\n");
    for (int s = 0; s < nseries; s++) {
        for (int i = 0; i < n; i++)
            if (sid[i] == s && pts[i].ok)
                fprintf(g, "%lld %.6f\n", x_is_seq ? (long long)pts[i].seq : (long long)pts[i].gpus,
                        pts[i].iter_s);
        fprintf(g, "e\n");
    }
    free(sid);
    int st = pclose(g);
    if (st != 0) {
        fprintf(stderr, "ulysses-sim: --plot: gnuplot failed (status %d)\n", st);
        return 1;
    }
    return 0;
#endif
}

int cmd_sweep(int argc, char **argv)
{
    opts o;
    opts_defaults(&o);
    int help;
    if (opts_parse(&o, argc, argv, 2, OPTS_SWEEP, &help))
        die_usage("%s", opts_error());
    if (o.trace)
        die_usage("sweep: --trace is for single runs");
    if (o.format != FMT_CSV && o.format != FMT_TABLE)
        die_usage("sweep: output is CSV");
    usim_platform p;
    usim_model base;
    load_inputs(&o, &p, &base);
    if (o.ngpus == 0) {
        o.gpus[0] = 64;
        o.ngpus = 1;
    }
    if (o.nseqs == 0) {
        o.seqs[0] = base.seq;
        o.nseqs = 1;
    }
    /* validate GPU counts against the platform before starting */
    for (int i = 0; i < o.ngpus; i++)
        if (usim_platform_check_gpus(&p, (int)o.gpus[i]))
            die_usage("%s", usim_last_error());
    FILE *out = stdout;
    if (o.out && !(out = fopen(o.out, "w")))
        die_usage("--out: cannot write %s", o.out);
    int total = o.ngpus * o.nseqs * o.nmethods, done = 0;
    /* a bar on the terminal, unless the CSV rows are going to that terminal too */
    int bar = !o.no_progress && isatty(2) && (o.out || !isatty(1));
    point *pts = calloc((size_t)total, sizeof *pts);
    if (!pts) {
        fprintf(stderr, "ulysses-sim: out of memory\n");
        return 1;
    }
    out_csv_header(out);
    int failures = 0;
    for (int gi = 0; gi < o.ngpus; gi++) {
        int gpus = (int)o.gpus[gi];
        usim_sim *sim = usim_sim_new(&p, gpus);
        if (!sim) {
            fprintf(stderr, "ulysses-sim: %s\n", usim_last_error());
            return 1;
        }
        for (int si = 0; si < o.nseqs; si++) {
            usim_model m = base;
            apply_model_overrides(&o, &m, o.seqs[si]);
            for (int mi = 0; mi < o.nmethods; mi++) {
                row w;
                memset(&w, 0, sizeof w);
                w.method = o.methods[mi];
                usim_job j = make_job(&o, w.method, gpus);
                int rc = usim_simulate(sim, &m, &j, NULL, &w.r);
                if (rc == USIM_OK) {
                    w.ok = 1;
                    if (o.max_seq && usim_max_seq(&p, &m, &j, &w.max_seq) == USIM_OK)
                        w.has_max = 1;
                } else {
                    if (rc != USIM_EINVAL) {
                        fprintf(stderr, "ulysses-sim: %s\n", usim_last_error());
                        return 1;
                    }
                    snprintf(w.err, sizeof w.err, "%s", usim_last_error());
                    failures++;
                }
                out_csv_row(out, &p, &m, gpus, &w);
                pts[done] = (point){gpus, m.seq, w.method, w.ok, w.r.iter_s};
                done++;
                if (bar)
                    progress(done, total);
            }
        }
        usim_sim_free(sim);
    }
    if (out != stdout ? fclose(out) != 0 : fflush(out) != 0) {
        fprintf(stderr, "ulysses-sim: error writing the CSV\n");
        return 1;
    }
    if (failures)
        fprintf(stderr, "ulysses-sim: %d of %d configurations could not run (see the error column)\n",
                failures, total);
    int rc = 0;
    if (o.plot)
        rc = plot(o.plot, pts, total, o.nseqs > 1 || o.ngpus == 1);
    free(pts);
    return rc;
}
