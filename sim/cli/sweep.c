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
    int gpus, sp, tp, pp;         /* as swept (sp 0: chosen by the simulator) */
    int64_t seq;
    uly_method method;
    int ok, fits;
    double y;
    int rsp, rdp;                 /* the degrees that ran (ok points) */
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
    /* the height (pixels; inches for the PDF) grows with the legend */
    if (strcmp(dot, ".svg") == 0)
        return "svg size 1000,%d dynamic font 'sans,12'";
    if (strcmp(dot, ".png") == 0)
        return "pngcairo size 1000,%d font 'sans,11'";
    if (strcmp(dot, ".pdf") == 0)
        return "pdfcairo size 10in,%.2fin font 'sans,11'";
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

/* A value of axis ax with its unit: "64 GPUs", "128K tokens", "tp 2". */
static int axis_value_label(int ax, int64_t v, char *buf, size_t n)
{
    static const char *const pre[AX_N] = {"", "", "sp ", "tp ", "pp "};
    char lab[32];
    tick_label(v, lab, sizeof lab);
    return snprintf(buf, n, "%s%s%s", pre[ax], lab, ax == AX_SEQ ? " tokens" : ax == AX_GPUS ? " GPUs" : "");
}

/* Tokens of the sequence each SP rank holds at an ok point. */
static int64_t per_rank(const point *p) { return p->rsp > 0 ? p->seq / p->rsp : p->seq; }

/* The distinct x values of the points in ascending order (vals: room for n). */
static int x_values(const point *pts, int n, int ax, int64_t *vals)
{
    int nv = 0;
    for (int i = 0; i < n; i++) {
        int64_t v = ax_value(&pts[i], ax);
        int k = 0;
        while (k < nv && vals[k] < v)
            k++;
        if (k < nv && vals[k] == v)
            continue;
        memmove(vals + k + 1, vals + k, (size_t)(nv - k) * sizeof *vals);
        vals[k] = v;
        nv++;
    }
    return nv;
}

/* Colour-blind-safe colours (Okabe-Ito, then Tol's), point types (filled
 * circle, square, triangles, diamond, pentagon) and dash types: series differ
 * in colour first; where there are more than the colours, in dashes too. */
static const char *const palette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9",
                                      "#000000", "#882255", "#999933", "#6A3D9A", "#B15928", "#44AA99"};
#define NPAL ((int)(sizeof palette / sizeof palette[0]))
static const int ptypes[] = {7, 5, 9, 11, 13, 15};   /* minus 1: the same, open */
#define NPT ((int)(sizeof ptypes / sizeof ptypes[0]))

/* What a sweep plot shows beyond the points: the title (one or two lines)
 * and, for weak scaling, labels of a top axis at the x values. */
typedef struct plot_info {
    const char *title, *title2;
    int tied_seq;                 /* the sequence follows the x axis (weak scaling) */
    const char *x2label;
    int nx2;
    int64_t x2at[64];
    char x2lab[64][48];
} plot_info;

/* Series: one per method and combination of the other swept values that vary
 * (the sequence of weak scaling follows the GPUs: not a series of its own),
 * in order of first appearance; sid[i] the series of point i, rep[s] the
 * first point of series s (both with room for n).  Returns the count. */
static int group_series(const point *pts, int n, int ax, int tied_seq, int *sid, int *rep)
{
    int nseries = 0;
    for (int i = 0; i < n; i++) {
        sid[i] = -1;
        for (int s = 0; s < nseries && sid[i] < 0; s++) {
            const point *q = &pts[rep[s]];
            int same = q->method == pts[i].method;
            for (int a = 0; a < AX_N && same; a++)
                if (a != ax && !(a == AX_SEQ && tied_seq) && ax_value(q, a) != ax_value(&pts[i], a))
                    same = 0;
            if (same)
                sid[i] = s;
        }
        if (sid[i] < 0) {
            rep[nseries] = i;
            sid[i] = nseries++;
        }
    }
    return nseries;
}

/* The legend entry of series s (its first point q): the method as the CSV
 * names it, the other varying values, and the x values missing from its line. */
static void series_title(const point *pts, int n, const int *sid, const int *rep, int s, int ax, int tied_seq,
                         char *t, size_t size)
{
    const point *q = &pts[rep[s]];
    int len = snprintf(t, size, "%s", uly_method_sim_name(q->method));
    for (int a = 0; a < AX_N && len < (int)size; a++) {
        if (a == ax || (a == AX_SEQ && tied_seq))
            continue;
        int varies = 0;
        for (int i = 0; i < n; i++)
            varies |= ax_value(&pts[i], a) != ax_value(q, a);
        if (!varies)
            continue;
        len += snprintf(t + len, size - (size_t)len, ", ");
        if (len < (int)size)
            len += axis_value_label(a, ax_value(q, a), t + len, size - (size_t)len);
    }
    /* the gaps: cannot run (no value), does not fit in HBM (a cross) */
    for (int kind = 0; kind < 2 && len < (int)size; kind++) {
        int shown = 0, more = 0;
        for (int i = 0; i < n; i++) {
            if (sid[i] != s || (kind == 0 ? pts[i].ok : !pts[i].ok || pts[i].fits))
                continue;
            if (shown == 4) {
                more++;
                continue;
            }
            char lab[48];
            if (ax == AX_GPUS || ax == AX_SEQ)
                tick_label(ax_value(&pts[i], ax), lab, sizeof lab);
            else
                axis_value_label(ax, ax_value(&pts[i], ax), lab, sizeof lab);
            len += snprintf(t + len, size - (size_t)len, "%s%s", shown ? ", " : kind == 0 ?
                            " (no line: cannot run at " : " (no line: does not fit at ", lab);
            shown++;
            if (len >= (int)size)
                break;
        }
        if (shown && len < (int)size) {
            char m[32] = "";
            if (more)
                snprintf(m, sizeof m, " and %d more", more);
            len += snprintf(t + len, size - (size_t)len, "%s%s)", m,
                            ax == AX_GPUS ? " GPUs" : ax == AX_SEQ ? " tokens" : "");
        }
    }
    if (len >= (int)size && size > 4)
        memcpy(t + size - 4, "...", 4);
}

/* A point of a series, to sort by series, then x. */
typedef struct series_pt {
    int sid;
    int64_t x;
    int i;
} series_pt;

static int cmp_series_pt(const void *a, const void *b)
{
    const series_pt *p = a, *q = b;
    if (p->sid != q->sid)
        return p->sid < q->sid ? -1 : 1;
    if (p->x != q->x)
        return p->x < q->x ? -1 : 1;
    return p->i < q->i ? -1 : p->i > q->i;
}

/* Whether the k-th of the nv sorted x values gets a tick: all up to 16, then
 * the powers of 2 on a log axis, every (nv / 16)-th on a linear one. */
static int is_tick(const int64_t *vals, int nv, int logx, int k)
{
    if (nv <= 16)
        return 1;
    if (logx)
        return (vals[k] & (vals[k] - 1)) == 0;
    return k % ((nv + 15) / 16) == 0;
}

/* The gnuplot script of the plot into g.  sid, rep: group_series; vals,
 * order: room for n; flag: for nseries, zeroed. */
static void plot_script(FILE *g, const char *term, const plot_info *pi, const point *pts, int n, int ax,
                        int metric, const int *sid, const int *rep, int nseries, int64_t *vals, series_pt *order,
                        unsigned char *flag)
{
    static const char *const ylabel[] = {"iteration time [s]", "throughput, Megatron formula [TFLOP/s/GPU]",
                                         "exposed communication [s]", "memory per GPU [GiB]"};
    /* styles: colour (and point type) by method where there are several,
     * the other varying values by dash type; otherwise colour by series */
    int methods[ULY_METHOD_ALL + 1], nmeth = 0;
    for (int s = 0; s < nseries; s++) {
        int first = rep[s];
        int k = 0;
        while (k < nmeth && methods[k] != (int)pts[first].method)
            k++;
        if (k == nmeth && nmeth <= ULY_METHOD_ALL)
            methods[nmeth++] = (int)pts[first].method;
    }
    /* the points by series and x; flag[s]: 1 a point to join, 2 one that does not fit */
    for (int i = 0; i < n; i++) {
        order[i] = (series_pt){sid[i], ax_value(&pts[i], ax), i};
        flag[sid[i]] |= (pts[i].ok && pts[i].fits ? 1 : 0) | (pts[i].ok && !pts[i].fits ? 2 : 0);
    }
    qsort(order, (size_t)n, sizeof *order, cmp_series_pt);
    int any_oom = 0;
    for (int s = 0; s < nseries; s++)
        any_oom |= flag[s] & 2;
    /* the legend below the plot, in as many columns as its longest entry
     * leaves room for, and a bottom margin that holds its rows */
    size_t longest = any_oom ? 50 : 0;
    for (int s = 0; s < nseries; s++) {
        char t[200];
        series_title(pts, n, sid, rep, s, ax, pi->tied_seq, t, sizeof t);
        longest = strlen(t) > longest ? strlen(t) : longest;
    }
    int nentries = nseries + any_oom;
    int cols = (int)(120 / (longest + 8));
    cols = cols < 1 ? 1 : cols > nentries ? nentries : cols;
    int rows = (nentries + cols - 1) / cols;
    int height = 620 + 20 * rows;
    height = height < 700 ? 700 : height;
    fprintf(g, "set terminal ");
    if (strncmp(term, "pdf", 3) == 0)
        fprintf(g, term, height / 100.0);
    else
        fprintf(g, term, height);
    fprintf(g, "\nset output\n");
    fprintf(g, "set title ");
    uly_fput_quoted(g, pi->title, '\'', 1);
    if (pi->title2) {
        fprintf(g, " . \"\\n\" . ");
        uly_fput_quoted(g, pi->title2, '\'', 1);
    }
    fprintf(g, " noenhanced\nset grid\n");
    fprintf(g, "set xlabel '%s'\nset ylabel '%s'\n", ax_label[ax], ylabel[metric]);
    if (metric == PLOT_TIME)
        fprintf(g, "set logscale y\n");
    /* ticks at the swept values, 8K, 128K, 1M ...; above 16 values the powers
     * of 2 among them on a log axis, every step-th on a linear one */
    int nv = x_values(pts, n, ax, vals), step = (nv + 15) / 16;
    int64_t lo = vals[0], hi = vals[nv - 1];
    int logx = hi >= 4 * lo;
    if (logx)
        fprintf(g, "set logscale x 2\n");
    fprintf(g, "set xtics (");
    for (int k = 0, shown = 0; k < nv; k++)
        if (is_tick(vals, nv, logx, k)) {
            char lab[32];
            tick_label(vals[k], lab, sizeof lab);
            fprintf(g, "%s\"%s\" %lld", shown++ ? ", " : "", lab, (long long)vals[k]);
        }
    double xlo = lo == hi ? lo * 0.5 : (logx ? lo / 1.3 : lo - 0.05 * (hi - lo));
    double xhi = lo == hi ? hi * 1.5 : (logx ? hi * 1.3 : hi + 0.05 * (hi - lo));
    fprintf(g, ")\nset xrange [%g:%g]\n", xlo, xhi);
    if (pi->nx2) {
        /* the top axis: the same scale, labelled with what ran at each x */
        if (logx)
            fprintf(g, "set logscale x2 2\n");
        fprintf(g, "set x2range [%g:%g]\nset x2tics nomirror (", xlo, xhi);
        for (int k = 0, shown = 0; k < pi->nx2; k++) {
            int tick = 0;
            for (int v = 0; v < nv && !tick; v++)
                tick = vals[v] == pi->x2at[k] && is_tick(vals, nv, logx, v);
            if (!tick)
                continue;
            fprintf(g, "%s", shown++ ? ", " : "");
            uly_fput_quoted(g, pi->x2lab[k], '\'', 1);
            fprintf(g, " %lld", (long long)pi->x2at[k]);
        }
        fprintf(g, ")\nset xtics nomirror\nset x2label ");
        uly_fput_quoted(g, pi->x2label, '\'', 1);
        fprintf(g, " noenhanced\n");
    }
    fprintf(g, "set key at screen 0.5, screen 0.03 center bottom horizontal Left reverse noenhanced box "
               "maxcols %d maxrows %d\nset bmargin %d\n", cols, rows, 5 + (3 * rows + 1) / 2);
    fprintf(g, "plot ");
    int per_method[ULY_METHOD_ALL + 1] = {0};
    for (int s = 0; s < nseries; s++) {
        int first = rep[s];
        int c, pt, dt;
        if (nmeth > 1) {
            int mo = 0;
            while (methods[mo] != (int)pts[first].method)
                mo++;
            int oo = per_method[mo]++;
            c = mo % NPAL;
            /* every other method dashed (equal lines stay visible); past 5 dashes, open points */
            pt = ptypes[mo % NPT] - (oo / 5) % 2;
            dt = 1 + (2 * oo + mo % 2) % 5;
        } else {
            c = s % NPAL;
            pt = ptypes[s % NPT] - (s / NPAL) % 2;
            dt = 1 + (s / NPAL) % 5;
        }
        char t[200];
        series_title(pts, n, sid, rep, s, ax, pi->tied_seq, t, sizeof t);
        /* a series with nothing to draw keeps its legend entry (NaN: no data) */
        fprintf(g, "%s%s with linespoints lw 2 ps 1.2 lc rgb '%s' pt %d pi %d dt %d title ", s ? ", " : "",
                flag[s] & 1 ? "'-' using 1:2" : "NaN", palette[c], pt, step, dt);
        uly_fput_quoted(g, t, '\'', 1);
        if (flag[s] & 2)  /* this series' points that do not fit, as crosses of its colour */
            fprintf(g, ", '-' using 1:2 with points pt 2 ps 2 lw 2 lc rgb '%s' notitle", palette[c]);
    }
    if (any_oom)
        fprintf(g, ", NaN with points pt 2 ps 2 lw 2 lc rgb 'black' "
                   "title 'x: does not fit in HBM (left out of the lines)'");
    fprintf(g, "\n");
    /* each series in x order; a point that cannot run or does not fit is a
     * blank line: the line stops there */
    for (int k = 0, s = 0; s < nseries; s++) {
        int b = k;
        for (; k < n && order[k].sid == s; k++)
            if (flag[s] & 1) {
                const point *q = &pts[order[k].i];
                if (q->ok && q->fits)
                    fprintf(g, "%lld %.9g\n", (long long)order[k].x, q->y);
                else
                    fprintf(g, "\n");
            }
        if (flag[s] & 1)
            fprintf(g, "e\n");
        if (flag[s] & 2) {
            for (int i = b; i < k; i++)
                if (pts[order[i].i].ok && !pts[order[i].i].fits)
                    fprintf(g, "%lld %.9g\n", (long long)order[i].x, pts[order[i].i].y);
            fprintf(g, "e\n");
        }
    }
}

/* Draw into fd, the plot's temporary (file names the format); *nlines: the
 * lines drawn (series). */
static int plot(const char *file, int fd, const plot_info *pi, const point *pts, int n, int ax, int metric,
                int *nlines)
{
    const char *term = plot_terminal(file);
#ifndef GNUPLOT_PATH
    (void)term;
    (void)fd;
    (void)pi;
    (void)pts;
    (void)n;
    (void)ax;
    (void)metric;
    (void)nlines;
    (void)plot_script;   /* the script is for gnuplot only */
    (void)group_series;
    fprintf(stderr, "ulysses-sim: --plot %s: gnuplot was not found when ulysses-sim was configured; "
                    "install gnuplot and re-run configure\n", file);
    return 1;
#else
    int *sid = calloc((size_t)n, sizeof *sid);
    int64_t *vals = calloc((size_t)n, sizeof *vals);
    series_pt *order = calloc((size_t)n, sizeof *order);
    unsigned char *flag = calloc((size_t)n, 1);
    int *rep = calloc((size_t)n, sizeof *rep);
    if (!sid || !vals || !order || !flag || !rep) {
        free(rep);
        free(sid);
        free(vals);
        free(order);
        free(flag);
        fprintf(stderr, "ulysses-sim: out of memory\n");
        return 1;
    }
    *nlines = group_series(pts, n, ax, pi->tied_seq, sid, rep);
    int pfd[2] = {-1, -1};
    pid_t pid = -1;
    FILE *g = NULL;
    fflush(NULL);
    if (pipe(pfd) != 0 || (pid = fork()) < 0) {
        fprintf(stderr, "ulysses-sim: --plot: %s: %s\n", pfd[0] < 0 ? "pipe" : "fork", strerror(errno));
        goto fail;
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
    pfd[0] = -1;
    if (!(g = fdopen(pfd[1], "w")))
        goto fail;
    pfd[1] = -1;
    plot_script(g, term, pi, pts, n, ax, metric, sid, rep, *nlines, vals, order, flag);
    free(sid);
    free(vals);
    free(order);
    free(flag);
    free(rep);
    int bad = fclose(g) != 0;
    int st;
    if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || bad) {
        fprintf(stderr, "ulysses-sim: --plot: gnuplot failed (status %d)\n",
                WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return 1;
    }
    return 0;
fail:
    for (int k = 0; k < 2; k++)
        if (pfd[k] >= 0)
            close(pfd[k]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    free(sid);
    free(vals);
    free(order);
    free(flag);
    free(rep);
    return 1;
#endif
}

/* What --plot-metric draws, as "wrote FILE (plot of ...)" names it. */
static const char *const metric_what[] = {"iteration time", "throughput", "exposed communication",
                                          "memory per GPU"};

/* Weak scaling (--seq-per-gpu N, sequence = N x GPUs): each SP rank holds
 * sequence / SP degree tokens, N only where the SP degree is the GPU count.
 * Every GPU count where the degrees that ran give another number gets a note
 * on stderr (degrees, why, tokens per SP rank; the methods when not all of
 * them); pi gets a top axis with the tokens per SP rank at each GPU count and
 * title2 a second title line.  Returns whether any point ran at another
 * number than N. */
static int weak_report(const opts *o, int64_t heads, const point *pts, int n, plot_info *pi, char *title2,
                       size_t size)
{
    int64_t N = o->seq_per_gpu, lo = 0, hi = 0;
    int from = 0, capped = 1;
    char nl[32];
    tick_label(N, nl, sizeof nl);
    pi->x2label = "tokens per SP rank that ran (sequence / SP degree)";
    for (int gi = 0; gi < o->ngpus && gi < 64; gi++) {
        int gpus = (int)o->gpus[gi];
        char *lab = pi->x2lab[pi->nx2];
        size_t ll = 0;
        lab[0] = 0;
        for (int i = 0; i < n; i++) {
            const point *p = &pts[i];
            if (p->gpus != gpus || !p->ok)
                continue;
            int64_t t = per_rank(p);
            lo = lo && lo < t ? lo : t;
            hi = hi > t ? hi : t;
            /* the first point of these degrees at this GPU count: one label, one note */
            int seen = 0;
            for (int k = 0; k < i && !seen; k++)
                seen = pts[k].gpus == gpus && pts[k].ok && per_rank(&pts[k]) == t;
            char tl[32];
            tick_label(t, tl, sizeof tl);
            if (!seen && ll < sizeof pi->x2lab[0])
                ll += (size_t)snprintf(lab + ll, sizeof pi->x2lab[0] - ll, "%s%s", ll ? "/" : "", tl);
            if (t == N)
                continue;
            seen = 0;
            for (int k = 0; k < i && !seen; k++)
                seen = pts[k].gpus == gpus && pts[k].ok && pts[k].rsp == p->rsp && pts[k].rdp == p->rdp &&
                       pts[k].tp == p->tp && pts[k].pp == p->pp;
            if (seen)
                continue;
            /* why the SP degree is below the GPU count */
            char why[160], with[200] = "", sl[32];
            int meg = p->method == ULY_METHOD_MEGATRON_SP, tp = meg || p->tp < 1 ? 1 : p->tp;
            int pp = p->pp < 1 ? 1 : p->pp, slot = gpus / tp / pp, len = 0;
            int heads_cap = p->sp == 0 && o->dp == 0 && !(meg && p->tp) && p->rsp < slot;
            if (meg && p->tp)
                len = snprintf(why, sizeof why, "megatron-sp's SP degree is --tp %d; ", p->tp);
            else if (p->sp)
                len = snprintf(why, sizeof why, "--sp %d; ", p->sp);
            else if (o->dp)
                len = snprintf(why, sizeof why, "--dp %d; ", o->dp);
            else if (heads_cap && tp == 1)
                len = snprintf(why, sizeof why, "capped at the %lld heads; ", (long long)heads);
            else if (heads_cap)
                len = snprintf(why, sizeof why, "capped at the %lld heads per TP rank; ", (long long)(heads / tp));
            capped &= heads_cap && tp == 1 && pp == 1;
            if (tp > 1 && len < (int)sizeof why)
                len += snprintf(why + len, sizeof why - (size_t)len, "tp %d, ", tp);
            if (pp > 1 && len < (int)sizeof why)
                len += snprintf(why + len, sizeof why - (size_t)len, "pp %d, ", pp);
            if (len < (int)sizeof why)
                snprintf(why + len, sizeof why - (size_t)len, "dp %d", p->rdp);
            /* the methods that ran with these degrees, when not all that ran */
            int nm = 0, all = 0;
            size_t wl = 0;
            for (int k = 0; k < n; k++) {
                if (pts[k].gpus != gpus || !pts[k].ok || pts[k].tp != p->tp || pts[k].pp != p->pp ||
                    pts[k].sp != p->sp)
                    continue;
                all++;
                if (pts[k].rsp == p->rsp && pts[k].rdp == p->rdp && wl < sizeof with) {
                    wl += (size_t)snprintf(with + wl, sizeof with - wl, "%s%s", nm ? ", " : " (",
                                           uly_method_sim_name(pts[k].method));
                    nm++;
                }
            }
            if (nm == all)
                with[0] = 0;
            else if (wl < sizeof with - 1)
                strcat(with, ")");
            tick_label(p->seq, sl, sizeof sl);
            fprintf(stderr, "ulysses-sim: note: --seq-per-gpu %s at %d GPUs: the %s-token sequence runs over SP "
                            "degree %d (%s), so each SP rank holds %s tokens, not %s%s\n", nl, gpus, sl, p->rsp,
                    why, tl, nl, with);
            from = from ? from : gpus;
        }
        if (ll)
            pi->x2at[pi->nx2++] = gpus;
    }
    if (!from) {
        pi->nx2 = 0;
        return 0;
    }
    char lol[32], hil[32];
    tick_label(lo, lol, sizeof lol);
    tick_label(hi, hil, sizeof hil);
    if (capped)
        snprintf(title2, size, "sequence = %s x GPUs; the SP degree is capped at the %lld heads from %d GPUs: "
                 "%s to %s tokens per SP rank ran (top axis)", nl, (long long)heads, from, lol, hil);
    else
        snprintf(title2, size, "sequence = %s x GPUs; the SP degree is below the GPU count from %d GPUs: "
                 "%s to %s tokens per SP rank ran (top axis)", nl, from, lol, hil);
    return 1;
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
                                if (o.max_seq && usim_max_seq_ex(&p, &m, &j, &w.max_seq, &w.max_bind) == USIM_OK)
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
                                                w.ok, w.r.fits, w.ok ? metric_of(&w.r, o.plot_metric) : 0,
                                                w.ok ? w.r.job.sp : 0, w.ok ? w.r.job.dp : 0};
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
    /* weak scaling: what ran where the SP degree is below the GPU count */
    plot_info pi;
    memset(&pi, 0, sizeof pi);
    char title2[300] = "";
    int differs = o.seq_per_gpu ? weak_report(&o, base.heads, pts, total, &pi, title2, sizeof title2) : 0;
    int rc = 0, nlines = 0;
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
            if (differs)
                snprintf(title, sizeof title, "%s on %s: %s (weak scaling)", bn, pn, methods);
            else
                snprintf(title, sizeof title, "%s on %s: %s (weak scaling, %s tokens per GPU: sequence = %s x "
                         "GPUs, SP degree = GPUs)", bn, pn, methods, lab, lab);
        } else {
            snprintf(title, sizeof title, "%s on %s: %s", bn, pn, methods);
        }
        pi.title = title;
        pi.title2 = differs ? title2 : NULL;
        pi.tied_seq = o.seq_per_gpu != 0;
        rc = plot(o.plot, files[F_PLOT].fd, &pi, pts, total, ax, o.plot_metric, &nlines);
        if (!rc)
            rc = files_ready(&files[F_PLOT], NULL);
    }
    free(pts);
    if (!rc)
        rc = files_commit();
    if (!rc && o.out)   /* every output written, by name */
        fprintf(stderr, "ulysses-sim: wrote %s (%d row%s)\n", o.out, total, total == 1 ? "" : "s");
    if (!rc && o.plot)
        fprintf(stderr, "ulysses-sim: wrote %s (plot of %s: %d line%s)\n", o.plot, metric_what[o.plot_metric],
                nlines, nlines == 1 ? "" : "s");
    return rc;
fail: /* the outputs' temporaries are removed at exit (files.h) */
    if (out != stdout)
        fclose(out);
    free(pts);
    return 1;
}
