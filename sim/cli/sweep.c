/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sweep.c -- ulysses-sim sweep: every combination of GPU counts, sequence
 * lengths (or a fixed sequence per GPU: weak scaling), SP/TP/PP degrees and
 * methods, one CSV row each; progress bar on a terminal; optional plot
 * through gnuplot in the format the file's extension names (svg, png, pdf).
 *
 * gnuplot never sees the plot's file name: the plot's temporary (files.h)
 * becomes gnuplot's standard output (`set output` without a name); every
 * other string in the script (titles from preset names) is escaped.  Both
 * outputs are checked and created before the sweep starts and renamed
 * together once the CSV and the plot are complete.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "base/base.h"
#include "base/base_progress.h"
#include "opts.h"
#include "files.h"
#include "output.h"

int cmd_sweep(int argc, char **argv);

/* The most configurations one sweep runs (the product of the list lengths
 * and the methods): a sweep is refused above it before anything runs. */
#define SWEEP_MAX_CONFIGS 100000

typedef struct point {
    int gpus, sp, tp, pp;
    int64_t seq;
    uly_method method;
    int ok, fits;
    double y;
} point;

/* The axis a sweep varies, in this order of preference. */
enum { AX_SEQ = 0, AX_GPUS, AX_SP, AX_TP, AX_PP, AX_N };
static const char *const ax_label[AX_N] = {"sequence length [tokens]", "GPUs", "SP/CP degree",
                                           "TP degree", "PP stages"};

static int64_t ax_value(const point *p, int ax)
{
    switch (ax) {
    case AX_SEQ: return p->seq;
    case AX_GPUS: return p->gpus;
    case AX_SP: return p->sp;
    case AX_TP: return p->tp;
    default: return p->pp;
    }
}

/* Terminal for the extension of file, or NULL (the format is refused). */
static const char *plot_terminal(const char *file)
{
    const char *dot = strrchr(file, '.');
    const char *slash = strrchr(file, '/');
    if (!dot || (slash && dot < slash))
        return NULL;
    if (strcmp(dot, ".svg") == 0)
        return "svg size 1000,650 dynamic font 'sans,12'";
    if (strcmp(dot, ".png") == 0)
        return "pngcairo size 1000,650 font 'sans,11'";
    if (strcmp(dot, ".pdf") == 0)
        return "pdfcairo size 10in,6.5in font 'sans,11'";
    return NULL;
}

/* 131072 -> "128K", 1048576 -> "1M", 1000 -> "1000". */
static void tick_label(int64_t v, char *buf, size_t n)
{
    if (v >= (1 << 20) && v % (1 << 20) == 0)
        snprintf(buf, n, "%lldM", (long long)(v >> 20));
    else if (v >= 1024 && v % 1024 == 0)
        snprintf(buf, n, "%lldK", (long long)(v >> 10));
    else
        snprintf(buf, n, "%lld", (long long)v);
}

/* Draw into fd, the plot's temporary (file names the format). */
static int plot(const char *file, int fd, const char *title, const point *pts, int n, int ax, int metric)
{
    const char *term = plot_terminal(file);
#ifndef GNUPLOT_PATH
    (void)term;
    (void)fd;
    (void)title;
    (void)pts;
    (void)n;
    (void)ax;
    (void)metric;
    fprintf(stderr, "ulysses-sim: --plot %s: gnuplot was not found when ulysses-sim was configured; "
                    "install gnuplot and re-run configure\n", file);
    return 1;
#else
    static const char *const ylabel[] = {"iteration time [s]", "throughput, Megatron formula [TFLOP/s/GPU]",
                                         "exposed communication [s]", "memory per GPU [GiB]"};
    int pfd[2];
    if (pipe(pfd) != 0) {
        fprintf(stderr, "ulysses-sim: --plot: pipe: %s\n", strerror(errno));
        return 1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        fprintf(stderr, "ulysses-sim: --plot: fork: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        /* gnuplot reads the script on stdin and writes the plot to stdout (the file) */
        dup2(pfd[0], 0);
        dup2(fd, 1);
        close(pfd[0]);
        close(pfd[1]);
        execl(GNUPLOT_PATH, "gnuplot", (char *)NULL);
        _exit(127);
    }
    close(pfd[0]);
    FILE *g = fdopen(pfd[1], "w");
    if (!g) {
        close(pfd[1]);
        waitpid(pid, NULL, 0);
        return 1;
    }
    fprintf(g, "set terminal %s\nset output\n", term);
    fprintf(g, "set title ");
    uly_fput_quoted(g, title, '\'', 1);
    fprintf(g, " noenhanced\nset grid\nset key outside right top noenhanced\n");
    fprintf(g, "set xlabel '%s'\nset ylabel '%s'\n", ax_label[ax], ylabel[metric]);
    if (metric == PLOT_TIME)
        fprintf(g, "set logscale y\n");
    /* explicit ticks at the swept values: 8K, 128K, 1M ... */
    int64_t vals[64] = {0};
    int nv = 0;
    for (int i = 0; i < n && nv < 64; i++) {
        int64_t v = ax_value(&pts[i], ax);
        int dup = 0;
        for (int k = 0; k < nv; k++)
            dup |= vals[k] == v;
        if (!dup)
            vals[nv++] = v;
    }
    int64_t lo = vals[0], hi = vals[0];
    for (int k = 1; k < nv; k++) {
        lo = vals[k] < lo ? vals[k] : lo;
        hi = vals[k] > hi ? vals[k] : hi;
    }
    if (hi >= 4 * lo)
        fprintf(g, "set logscale x 2\n");
    fprintf(g, "set xtics (");
    for (int k = 0; k < nv; k++) {
        char lab[32];
        tick_label(vals[k], lab, sizeof lab);
        fprintf(g, "%s\"%s\" %lld", k ? ", " : "", lab, (long long)vals[k]);
    }
    fprintf(g, ")\nset xrange [%g:%g]\n", lo == hi ? lo * 0.5 : (hi >= 4 * lo ? lo / 1.3 : lo - 0.05 * (hi - lo)),
            lo == hi ? hi * 1.5 : (hi >= 4 * lo ? hi * 1.3 : hi + 0.05 * (hi - lo)));
    /* series: one per (method and the other varying values), in order of first appearance */
    int nseries = 0;
    int *sid = calloc((size_t)n, sizeof *sid);
    if (!sid) {
        fclose(g);
        waitpid(pid, NULL, 0);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        sid[i] = -1;
        for (int k = 0; k < i && sid[i] < 0; k++) {
            int same = pts[k].method == pts[i].method;
            for (int a = 0; a < AX_N && same; a++)
                if (a != ax && ax_value(&pts[k], a) != ax_value(&pts[i], a))
                    same = 0;
            if (same)
                sid[i] = sid[k];
        }
        if (sid[i] < 0)
            sid[i] = nseries++;
    }
    int any_oom = 0;
    for (int i = 0; i < n; i++)
        any_oom |= pts[i].ok && !pts[i].fits;
    fprintf(g, "plot ");
    for (int s = 0; s < nseries; s++) {
        int first = 0;
        while (sid[first] != s)
            first++;
        const point *q = &pts[first];
        char t[160];
        int len = snprintf(t, sizeof t, "%s", uly_method_sim_name(q->method));
        for (int a = 0; a < AX_N; a++) {
            static const char *const nm[AX_N] = {"", " GPUs", "sp ", "tp ", "pp "};
            if (a == ax)
                continue;
            int varies = 0;
            for (int i = 0; i < n; i++)
                varies |= ax_value(&pts[i], a) != ax_value(q, a);
            if (!varies)
                continue;
            char lab[32];
            tick_label(ax_value(q, a), lab, sizeof lab);
            if (a == AX_SEQ)
                len += snprintf(t + len, sizeof t - (size_t)len, ", %s tokens", lab);
            else if (a == AX_GPUS)
                len += snprintf(t + len, sizeof t - (size_t)len, ", %s GPUs", lab);
            else
                len += snprintf(t + len, sizeof t - (size_t)len, ", %s%s", nm[a], lab);
            if (len >= (int)sizeof t)
                break;
        }
        fprintf(g, "%s'-' using 1:2 with linespoints lw 2 pt 7 title ", s ? ", " : "");
        uly_fput_quoted(g, t, '\'', 1);
    }
    if (any_oom)
        fprintf(g, ", '-' using 1:2 with points pt 2 ps 3 lw 2 lc rgb 'red' title 'does not fit in HBM'");
    fprintf(g, "\n");
    for (int s = 0; s < nseries; s++) {
        for (int i = 0; i < n; i++)
            if (sid[i] == s && pts[i].ok)
                fprintf(g, "%lld %.9g\n", (long long)ax_value(&pts[i], ax), pts[i].y);
        fprintf(g, "e\n");
    }
    if (any_oom) {
        for (int i = 0; i < n; i++)
            if (pts[i].ok && !pts[i].fits)
                fprintf(g, "%lld %.9g\n", (long long)ax_value(&pts[i], ax), pts[i].y);
        fprintf(g, "e\n");
    }
    free(sid);
    int bad = fclose(g) != 0;
    int st;
    if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || bad) {
        fprintf(stderr, "ulysses-sim: --plot: gnuplot failed (status %d)\n",
                WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return 1;
    }
    return 0;
#endif
}

static double metric_of(const usim_result *r, int metric)
{
    switch (metric) {
    case PLOT_TFLOPS: return r->tflops;
    case PLOT_EXPOSED: return r->exposed_s[0] + r->exposed_s[1] + r->exposed_s[2];
    case PLOT_MEMORY: return r->mem.total / 1073741824.0;
    default: return r->iter_s;
    }
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
    if (o.plot && !plot_terminal(o.plot))
        die_usage("--plot %s: the extension must name the format: .svg, .png or .pdf", o.plot);
#ifndef GNUPLOT_PATH
    if (o.plot)
        die_usage("--plot %s: gnuplot was not found when ulysses-sim was configured; install gnuplot and re-run "
                  "configure", o.plot);
#endif
    if (o.seq_per_gpu && o.nseqs)
        die_usage("sweep: --seq and --seq-per-gpu are exclusive (weak scaling sets the sequence)");
    usim_platform p;
    usim_model base;
    uly_in ins[2];
    load_inputs_files(&o, &p, &base, ins);
    if (o.ngpus == 0) {
        o.gpus[0] = 64;
        o.ngpus = 1;
    }
    if (o.nseqs == 0) {
        o.seqs[0] = base.seq;
        o.nseqs = 1;
    }
    if (o.seq_per_gpu)
        o.nseqs = 1;
    int64_t one0[1] = {0};
    int64_t *sps = o.nsps ? o.sps : one0, *tps = o.ntps ? o.tps : one0, *pps = o.npps ? o.pps : one0;
    int nsp = o.nsps ? o.nsps : 1, ntp = o.ntps ? o.ntps : 1, npp = o.npps ? o.npps : 1;
    /* validate GPU counts against the platform before starting */
    for (int i = 0; i < o.ngpus; i++)
        if (usim_platform_check_gpus(&p, (int)o.gpus[i]))
            die_usage("%s", usim_last_error());
    /* the count in int64: each factor is at most MAX_LIST (4096) */
    int64_t count = (int64_t)o.ngpus * o.nseqs * nsp * ntp * npp * o.nmethods;
    if (count > SWEEP_MAX_CONFIGS)
        die_usage("sweep: %lld configurations (%d GPU counts x %d sequences x %d sp x %d tp x %d pp x %d methods) "
                  "is more than the %d one sweep runs; split the sweep or use fewer values",
                  (long long)count, o.ngpus, o.nseqs, nsp, ntp, npp, o.nmethods, SWEEP_MAX_CONFIGS);
    /* the outputs, checked and created before the sweep (files.h) */
    enum { F_OUT, F_PLOT, NF };
    uly_out files[NF];
    memset(files, 0, sizeof files);
    files[F_OUT] = (uly_out){.path = o.out, .what = "--out"};
    files[F_PLOT] = (uly_out){.path = o.plot, .what = "--plot"};
    if (o.out || o.plot)
        files_prepare(files, NF, ins, 2);
    FILE *out = stdout;
    if (o.out && !(out = files_open(&files[F_OUT])))
        return 1;
    int total = (int)count, done = 0;
    /* a progress line on the terminal, unless the CSV rows are going to that terminal too */
    uly_progress bar;
    uly_progress_begin(&bar, !o.no_progress && (o.out || !isatty(1)), "ulysses-sim sweep");
    point *pts = calloc((size_t)total, sizeof *pts);
    if (!pts) {
        fprintf(stderr, "ulysses-sim: out of memory\n");
        goto fail;
    }
    out_csv_header(out);
    int failures = 0;
    for (int gi = 0; gi < o.ngpus; gi++) {
        int gpus = (int)o.gpus[gi];
        usim_sim *sim = usim_sim_new(&p, gpus);
        if (!sim) {
            uly_progress_clear(&bar);
            fprintf(stderr, "ulysses-sim: %s\n", usim_last_error());
            goto fail;
        }
        usim_sim_set_engine(sim, o.engine);
        for (int si = 0; si < o.nseqs; si++) {
            usim_model m = base;
            apply_model_overrides(&o, &m, o.seq_per_gpu ? o.seq_per_gpu * gpus : o.seqs[si]);
            for (int a = 0; a < nsp; a++)
                for (int b = 0; b < ntp; b++)
                    for (int c = 0; c < npp; c++)
                        for (int mi = 0; mi < o.nmethods; mi++) {
                            row w;
                            memset(&w, 0, sizeof w);
                            w.method = o.methods[mi];
                            usim_job j = make_job(&o, w.method, gpus);
                            j.sp = (int)sps[a];
                            j.tp = (int)tps[b];
                            j.pp = (int)pps[c];
                            int rc = usim_simulate(sim, &m, &j, NULL, &w.r);
                            if (rc == USIM_OK) {
                                w.ok = 1;
                                if (o.max_seq && usim_max_seq(&p, &m, &j, &w.max_seq) == USIM_OK)
                                    w.has_max = 1;
                            } else {
                                if (rc != USIM_EINVAL) {
                                    uly_progress_clear(&bar);
                                    fprintf(stderr, "ulysses-sim: %s\n", usim_last_error());
                                    usim_sim_free(sim);
                                    goto fail;
                                }
                                snprintf(w.err, sizeof w.err, "%s", usim_last_error());
                                failures++;
                            }
                            out_csv_row(out, &p, &m, gpus, &w);
                            pts[done] = (point){gpus, (int)sps[a], (int)tps[b], (int)pps[c], m.seq, w.method,
                                                w.ok, w.r.fits, w.ok ? metric_of(&w.r, o.plot_metric) : 0};
                            done++;
                            uly_progress_show(&bar, done, total, "%d of %d configurations (%d GPUs)", done,
                                              total, gpus);
                        }
        }
        usim_sim_free(sim);
    }
    uly_progress_clear(&bar);
    FILE *csv = out;
    out = stdout; /* closed by files_ready */
    if (csv != stdout ? files_ready(&files[F_OUT], csv) != 0 : fflush(csv) != 0) {
        if (csv == stdout)
            fprintf(stderr, "ulysses-sim: error writing the CSV\n");
        goto fail;
    }
    if (failures == total) {
        /* no row has a result: the inputs admit nothing */
        fprintf(stderr, "ulysses-sim: sweep: none of the %d configurations could run (see the error column)\n",
                total);
        free(pts);
        return EXIT_BADINPUT;
    }
    if (failures)
        fprintf(stderr, "ulysses-sim: %d of %d configurations could not run (see the error column)\n",
                failures, total);
    int rc = 0;
    if (o.plot) {
        /* the x axis: the first of sequence, GPUs, sp, tp, pp that takes several values */
        int nval[AX_N] = {o.seq_per_gpu ? 1 : o.nseqs, o.ngpus, nsp, ntp, npp};
        int ax = AX_SEQ;
        while (ax < AX_N - 1 && nval[ax] < 2)
            ax++;
        if (nval[ax] < 2)
            ax = o.ngpus > 1 ? AX_GPUS : AX_SEQ;
        char title[1300], methods[120] = "", bn[OUT_SAFE], pn[OUT_SAFE];
        out_safe(base.name, bn);
        out_safe(p.name, pn);
        for (int i = 0; i < o.nmethods; i++)
            snprintf(methods + strlen(methods), sizeof methods - strlen(methods), "%s%s", i ? ", " : "",
                     uly_method_sim_name(o.methods[i]));
        if (o.seq_per_gpu) {
            char lab[32];
            tick_label(o.seq_per_gpu, lab, sizeof lab);
            snprintf(title, sizeof title, "%s on %s: %s (weak scaling, %s tokens per GPU)", bn,
                     pn, methods, lab);
        } else {
            snprintf(title, sizeof title, "%s on %s: %s", bn, pn, methods);
        }
        rc = plot(o.plot, files[F_PLOT].fd, title, pts, total, ax, o.plot_metric);
        if (!rc)
            rc = files_ready(&files[F_PLOT], NULL);
    }
    free(pts);
    if (!rc)
        rc = files_commit();
    return rc;
fail: /* the outputs' temporaries are removed at exit (files.h) */
    if (out != stdout)
        fclose(out);
    free(pts);
    return 1;
}
