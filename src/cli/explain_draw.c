/* SPDX-License-Identifier: Apache-2.0 */
/*
 * explain_draw.c -- draws an xp_fig (explain.h) on a canvas
 * (explain_canvas.h): SVG written directly, PNG and PDF by cairo, one layout.
 *
 * From the top:
 *   - the layouts: ranks are rows; each panel is a tokens (x) by heads (y)
 *     grid per rank, blocks coloured by the rank the tokens came from; a
 *     solid arrow between panels names the collective, a dashed one is
 *     local computation (no communication);
 *   - the query x key mask grid (xp_grid, explain_grid.c): queries down,
 *     keys across, in the method's blocks; each block coloured by the rank
 *     computing it (stripes, one per member, when a group of ranks computes
 *     it, each for its own heads), numbered by its ring step; masked blocks
 *     blank; up to N = 256 the token-level mask inside (pale = masked pairs
 *     of a computed block).  Beside it, the work per rank (visible pairs x
 *     query heads, from the grid's cells and gheads) on a labelled axis;
 *   - ring methods: one small grid per step (the blocks computed at that
 *     step coloured, the others grey, masked blank), with the K, V blocks
 *     each rank holds then;
 *   - decode (--method dcp|helix): the new query's row of the mask grid, keys
 *     coloured by the rank holding and attending them (no grid);
 *   - the send matrices, numbered up to P = 16.
 *
 * Colours: a fixed 32-colour qualitative palette (Okabe-Ito, Tableau,
 * Kelly's colours of maximum contrast, a few ColorBrewer ones), distinct up to 32 ranks; every row
 * of the mask grid and every band is also labelled with its rank number, so
 * that beyond 32 (the palette repeats) the labels tell the ranks apart.
 *
 * Without cairo (configure did not find it) .svg is still written;
 * xp_draw_available() is 0 and .png, .pdf are refused with a message.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "explain.h"
#include "explain_canvas.h"

#ifdef HAVE_CAIRO
int xp_draw_available(void) { return 1; }
#else
int xp_draw_available(void) { return 0; }
#endif

static const cv_rgb palette[] = {
    {0.902, 0.624, 0.000}, {0.337, 0.706, 0.914}, {0.000, 0.620, 0.451}, {0.941, 0.894, 0.259},
    {0.000, 0.447, 0.698}, {0.835, 0.369, 0.000}, {0.800, 0.475, 0.655}, {0.600, 0.600, 0.600},
    {0.549, 0.337, 0.294}, {0.737, 0.741, 0.133}, {0.090, 0.745, 0.812}, {0.580, 0.404, 0.741},
    {0.745, 0.000, 0.196}, {0.792, 0.698, 0.839}, {0.651, 0.463, 0.114}, {0.902, 0.561, 0.675},
    {0.376, 0.306, 0.592}, {0.976, 0.576, 0.475}, {0.533, 0.176, 0.090}, {0.553, 0.714, 0.000},
    {0.169, 0.239, 0.149}, {0.761, 0.698, 0.502}, {0.106, 0.106, 0.561}, {0.702, 0.267, 0.424},
    {0.396, 0.271, 0.133}, {0.698, 0.875, 0.541}, {0.000, 0.400, 0.400}, {1.000, 0.000, 1.000},
    {0.420, 0.557, 0.137}, {0.000, 0.800, 0.400}, {0.439, 0.502, 0.565}, {0.400, 0.000, 0.000},
};
enum { NPAL = sizeof palette / sizeof palette[0] };

static const cv_rgb black = {0, 0, 0}, white = {1, 1, 1}, ink = {0.15, 0.15, 0.15}, mid = {0.35, 0.35, 0.35},
                    faint = {0.6, 0.6, 0.6}, band = {0.97, 0.97, 0.97}, other = {0.80, 0.80, 0.80},
                    pale = {0.93, 0.93, 0.93};

static cv_rgb colour(int r, double lighten)
{
    cv_rgb c = palette[(r < 0 ? 0 : r) % NPAL];
    return (cv_rgb){c.r + (1 - c.r) * lighten, c.g + (1 - c.g) * lighten, c.b + (1 - c.b) * lighten};
}

/* geometry */
enum { MARGIN = 20, LABEL_W = 36, PANEL_W = 190, GAP_W = 80, BAND_GAP = 8, TITLE_H = 58, PTITLE_H = 34,
       CAPTION_H = 26, MAT_MAX = 210, SECTION_GAP = 34 };

static double band_height(const xp_fig *f)
{
    int64_t hmax = 1;
    for (int i = 0; i < f->npanel; i++)
        if (f->panel[i].heads > hmax)
            hmax = f->panel[i].heads;
    double bh = (double)hmax * 7;
    if (bh < 18)
        bh = 18;
    if (bh > 56)
        bh = 56;
    if (f->P > 16)
        bh = 10;
    return bh;
}

static void rect(cv *c, double x, double y, double w, double h, cv_rgb fill)
{
    cv_rect(c, x, y, w, h, &fill, NULL, 0, NULL, NULL);
}

static void line2(cv *c, double x0, double y0, double x1, double y1, cv_rgb col, double lw)
{
    const double xy[4] = {x0, y0, x1, y1};
    cv_line(c, xy, 2, col, lw, 0);
}

static void hatch(cv *c, double x, double y, double w, double h)
{
    /* diagonals clipped to the rectangle by hand (no clipping in the canvas) */
    for (double t = -h + 2.5; t < w; t += 5) {
        double xa = x + t, ya = y + h, xb = x + t + h, yb = y;
        if (xa < x) {
            ya -= x - xa;
            xa = x;
        }
        if (xb > x + w) {
            yb += xb - (x + w);
            xb = x + w;
        }
        if (xb > xa)
            line2(c, xa, ya, xb, yb, (cv_rgb){0.25, 0.25, 0.25}, 0.7);
    }
}

/* ------------------------------------------------------------ layouts */

static void draw_panel(cv *c, const xp_fig *f, const xp_panel *p, double x0, double y0, double bh)
{
    cv_text(c, x0 + PANEL_W / 2.0, y0 - 12, 11, 1, CV_CENTRE, 0, black, p->title);
    double sx = (double)PANEL_W / (double)p->tokens, sy = bh / (double)p->heads;
    for (int r = 0; r < f->P; r++)
        rect(c, x0, y0 + r * (bh + BAND_GAP), PANEL_W, bh, band);
    for (int i = 0; i < p->nblock; i++) {
        const xp_block *b = &p->blocks[i];
        double x = x0 + (double)b->t0 * sx, y = y0 + b->rank * (bh + BAND_GAP) + (double)b->h0 * sy;
        double w = (double)b->tn * sx, h = (double)b->hn * sy;
        rect(c, x, y, w, h, colour(b->src, b->shade ? 0.6 : 0));
        if (b->replicated)
            hatch(c, x, y, w, h);
    }
    /* token and head boundaries when they are wide enough to see */
    const cv_rgb sep = {0.98, 0.98, 0.98};
    for (int r = 0; r < f->P; r++) {
        double y = y0 + r * (bh + BAND_GAP);
        if (sx >= 4)
            for (int64_t t = 1; t < p->tokens; t++)
                line2(c, x0 + (double)t * sx, y, x0 + (double)t * sx, y + bh, sep, 0.5);
        if (sy >= 3)
            for (int64_t hh = 1; hh < p->heads; hh++)
                line2(c, x0, y + (double)hh * sy, x0 + PANEL_W, y + (double)hh * sy, sep, 0.5);
        cv_rect(c, x0, y, PANEL_W, bh, NULL, &mid, 0.5, NULL, NULL);
    }
    double yb = y0 + f->P * (bh + BAND_GAP) - BAND_GAP;
    char buf[96];
    snprintf(buf, sizeof buf, "%s 0..%lld  x  %s 0..%lld (down)", p->xname[0] ? p->xname : "tokens",
             (long long)(p->tokens - 1), p->yname, (long long)(p->heads - 1));
    cv_text(c, x0 + PANEL_W / 2.0, yb + 13, 8.5, 0, CV_CENTRE, 0, ink, buf);
    cv_text(c, x0 + PANEL_W / 2.0, yb + 24, 9, 0, CV_CENTRE, 0, ink, p->caption);
}

/* Two lines of at most ~14 characters: cut at the space nearest the middle. */
static void two_lines(const char *label, char *a, char *b, size_t n)
{
    snprintf(a, n, "%s", label);
    b[0] = 0;
    if (strlen(a) <= 13)
        return;
    size_t half = strlen(a) / 2, best = 0;
    for (size_t i = 1; a[i]; i++)
        if (a[i] == ' ' && (!best || (i > half ? i - half : half - i) < (best > half ? best - half : half - best)))
            best = i;
    if (!best)
        return;
    a[best] = 0;
    snprintf(b, n, "%s", a + best + 1);
}

static void draw_arrow(cv *c, double x0, double x1, double y, const char *label, int kind)
{
    if (kind == XP_ARROW_NONE)
        return;
    const int local = kind == XP_ARROW_LOCAL;
    const double xy[4] = {x0, y, x1 - 6, y};
    cv_line(c, xy, 2, ink, 1.6, local ? 3.5 : 0);
    const double head[6] = {x1, y, x1 - 8, y - 4.5, x1 - 8, y + 4.5};
    cv_poly(c, head, 3, ink);
    char a[40], b[40];
    two_lines(label, a, b, sizeof a);
    double fs = local || strlen(a) > 12 || strlen(b) > 12 ? 8.5 : 9.5;
    cv_text(c, (x0 + x1) / 2, y - (b[0] ? 20 : 8), fs, !local, CV_CENTRE, 0, ink, a);
    if (b[0])
        cv_text(c, (x0 + x1) / 2, y - 8, fs, !local, CV_CENTRE, 0, ink, b);
    cv_text(c, (x0 + x1) / 2, y + 14, 7.5, 0, CV_CENTRE, 0, mid, local ? "(no communication)" : "(collective)");
}

static double layouts_height(const xp_fig *f, double bh)
{
    return f->npanel ? PTITLE_H + f->P * (bh + BAND_GAP) + CAPTION_H : 0;
}

static void draw_layouts(cv *c, const xp_fig *f, double y, double bh)
{
    double y0 = y + PTITLE_H;
    for (int r = 0; r < f->P; r++) {
        if (f->P > 16 && r % 4 && r != f->P - 1)
            continue;
        char buf[16];
        snprintf(buf, sizeof buf, "r%d", r);
        rect(c, MARGIN, y0 + r * (bh + BAND_GAP) + bh / 2 - 4, 8, 8, colour(r, 0));
        cv_text(c, MARGIN + 11, y0 + r * (bh + BAND_GAP) + bh / 2 + 4, f->P > 16 ? 8 : 10, 1, CV_LEFT, 0, black, buf);
    }
    for (int i = 0; i < f->npanel; i++) {
        double x = MARGIN + LABEL_W + i * (PANEL_W + GAP_W);
        draw_panel(c, f, &f->panel[i], x, y0, bh);
        if (i > 0)
            draw_arrow(c, x - GAP_W + 6, x - 6, y0 + (f->P * (bh + BAND_GAP)) / 2, f->arrow[i], f->arrow_kind[i]);
    }
}

/* ------------------------------------------------------------ matrices */

static double mat_cell(const xp_matrix *m, double *cw)
{
    double cs = (double)MAT_MAX / m->P;
    if (cs > 34)
        cs = 34;
    *cw = cs;
    if (m->P <= 16) {
        /* wide enough for the largest number at 7 pt (~4.2 pt a digit) */
        uint64_t mx = 0;
        for (int i = 0; i < m->P * m->P; i++)
            mx = m->elems[i] > mx ? m->elems[i] : mx;
        int d = 1;
        for (uint64_t v = mx; v >= 10; v /= 10)
            d++;
        double need = (d + 2) * 4.3 + 4;
        if (*cw < need)
            *cw = need;
        if (cs < 14)
            cs = 14;
    }
    return cs;
}

static double matrix_width(const xp_matrix *m)
{
    double cw;
    mat_cell(m, &cw);
    return 24 + m->P * cw;
}

/* Draws one matrix; returns its height. */
static double draw_matrix(cv *c, const xp_matrix *m, double x0, double y0)
{
    double cw, cs = mat_cell(m, &cw);
    uint64_t mx = 1;
    for (int i = 0; i < m->P * m->P; i++)
        if (i / m->P != i % m->P && m->elems[i] > mx)
            mx = m->elems[i];
    cv_text(c, x0, y0 - 8, 10, 1, CV_LEFT, 0, black, m->title);
    const double fs = m->P <= 8 ? (cs > 30 ? 8 : 7) : 6.5;
    for (int r = 0; r < m->P; r++)
        for (int s = 0; s < m->P; s++) {
            double x = x0 + 24 + s * cw, y = y0 + 14 + r * cs;
            uint64_t v = m->elems[r * m->P + s];
            double t = r == s ? 0 : (double)v / (double)mx;
            cv_rgb fill = r == s ? (cv_rgb){0.88, 0.88, 0.88} : (cv_rgb){1 - 0.75 * t, 1 - 0.55 * t, 1 - 0.2 * t};
            cv_rect(c, x, y, cw, cs, &fill, &faint, 0.5, NULL, NULL);
            if (m->P <= 16) {
                char buf[32];
                snprintf(buf, sizeof buf, r == s ? "(%llu)" : "%llu", (unsigned long long)v);
                cv_text(c, x + cw / 2, y + cs / 2 + fs * 0.36, fs, 0, CV_CENTRE, 0, t > 0.6 ? white : ink, buf);
            }
        }
    for (int r = 0; r < m->P; r++) {
        if (m->P > 16 && r % 4 && r != m->P - 1)
            continue;
        char buf[16];
        snprintf(buf, sizeof buf, "r%d", r);
        cv_text(c, x0 + 20, y0 + 14 + r * cs + cs / 2 + 3, 7.5, 0, CV_RIGHT, 0, ink, buf);
        cv_text(c, x0 + 24 + r * cw + cw / 2, y0 + 11, 7.5, 0, CV_CENTRE, 0, ink, buf);
    }
    return 14 + m->P * cs + 34;
}

/* Matrices side by side, wrapping at width W; returns the height used. */
static double draw_matrices(cv *c, const xp_fig *f, double W, double y0)
{
    double x = MARGIN + LABEL_W, y = y0, rowh = 0;
    for (int i = 0; i < f->nmatrix; i++) {
        double w = matrix_width(&f->matrix[i]);
        if (x > MARGIN + LABEL_W && x + w > W - MARGIN) {
            x = MARGIN + LABEL_W;
            y += rowh;
            rowh = 0;
        }
        double h = draw_matrix(c, &f->matrix[i], x, y + 14);
        if (h + 14 > rowh)
            rowh = h + 14;
        x += (w > MAT_MAX ? w : MAT_MAX) + 80;
    }
    return y + rowh - y0;
}

/* ------------------------------------------------------------ the mask grid */

static const xp_cell *cell(const xp_grid *g, int q, int k) { return &g->cell[q * g->nb + k]; }

/* "12-15" or "3" for the tokens of blocks [b0, b1) */
static void tok_range(char *buf, size_t n, int64_t a, int64_t b)
{
    if (b - a == 1)
        snprintf(buf, n, "%lld", (long long)a);
    else
        snprintf(buf, n, "%lld-%lld", (long long)a, (long long)(b - 1));
}

/* A group's blocks in one neutral colour when its stripes would be too thin to see. */
static const cv_rgb group_colour = {0.55, 0.66, 0.80};

static int thin_stripes(const xp_grid *g, double S)
{
    if (g->gsize == 1)
        return 0;
    double minw = S;
    for (int b = 0; b < g->nb; b++) {
        double w = (double)(g->edge[b + 1] - g->edge[b]) * S / (double)g->tokens;
        minw = w < minw ? w : minw;
    }
    return minw / g->gsize < 2.5;
}

/* Clip the polygon in[0..n) to the half-plane x + y >= k (ge) or <= k;
 * returns the vertices written to out (at most n + 1). */
static int clip_half(const double *in, int n, double k, int ge, double *out)
{
    int m = 0;
    for (int i = 0; i < n; i++) {
        const double *a = in + 2 * i, *b = in + 2 * ((i + 1) % n);
        double fa = a[0] + a[1] - k, fb = b[0] + b[1] - k;
        if (!ge) {
            fa = -fa;
            fb = -fb;
        }
        if (fa >= 0) {
            out[2 * m] = a[0];
            out[2 * m + 1] = a[1];
            m++;
        }
        if ((fa >= 0) != (fb >= 0)) {
            double t = fa / (fa - fb);
            out[2 * m] = a[0] + t * (b[0] - a[0]);
            out[2 * m + 1] = a[1] + t * (b[1] - a[1]);
            m++;
        }
    }
    return m;
}

/* Fill a block computed by group g: solid, or stripes of its members. */
static void group_fill(cv *c, const xp_grid *g, int grp, double x, double y, double w, double h, double lighten)
{
    if (g->gsize == 1) {
        rect(c, x, y, w, h, colour(g->granks[grp], lighten));
        return;
    }
    if (w / g->gsize < 2.5 && h > 7) {   /* not the holder strip: stripes too thin */
        rect(c, x, y, w, h, group_colour);
        return;
    }
    if (h <= 7) {   /* the holder strip: side by side */
        for (int u = 0; u < g->gsize; u++)
            rect(c, x + u * w / g->gsize, y, w / g->gsize + (u + 1 < g->gsize ? 0.05 : 0), h,
                 colour(g->granks[grp * g->gsize + u], lighten));
        return;
    }
    /* diagonal stripes (they cannot be mistaken for token rows or columns),
     * the members in turn, each at least twice */
    double d = (w + h) / (2.0 * g->gsize);
    if (d > 6)
        d = 6;
    const double box[8] = {x, y, x + w, y, x + w, y + h, x, y + h};
    int i = 0;
    for (double u = 0; u < w + h; u += d, i++) {
        double t[16], poly[16];
        int n = clip_half(box, 4, x + y + u, 1, t);
        n = clip_half(t, n, x + y + u + d + 0.05, 0, poly);
        if (n >= 3)
            cv_poly(c, poly, n, colour(g->granks[grp * g->gsize + i % g->gsize], lighten));
    }
}

/* Pale the masked token pairs inside computed blocks (N <= XP_FINE_MAX). */
static void fine_mask(cv *c, const xp_grid *g, int q, int k, double x0, double y0, double s)
{
    const int64_t N = g->tokens;
    for (int64_t i = g->edge[q]; i < g->edge[q + 1]; i++)
        for (int64_t j = g->edge[k]; j < g->edge[k + 1];) {
            if (g->mask[i * N + j]) {
                j++;
                continue;
            }
            int64_t j1 = j;
            while (j1 < g->edge[k + 1] && !g->mask[i * N + j1])
                j1++;
            /* a hair taller than the row: no seam between rows when anti-aliased */
            double hh = i + 1 < g->edge[q + 1] ? s + 0.3 : s;
            rect(c, x0 + (double)j * s, y0 + (double)i * s, (double)(j1 - j) * s, hh, pale);
            j = j1;
        }
}

static int block_full(const xp_grid *g, const xp_fig *f, int q, int k)
{
    double full = (double)(g->edge[q + 1] - g->edge[q]) * (double)(g->edge[k + 1] - g->edge[k]) * (double)f->a.batch;
    return cell(g, q, k)->pairs >= full;
}

/* The grid of side S at (x0, y0).  step < 0: the whole grid, numbered, with
 * data-* attributes; else only the blocks of that step coloured. */
static void draw_grid(cv *c, const xp_fig *f, double x0, double y0, double S, int step)
{
    const xp_grid *g = &f->grid;
    const int nb = g->nb;
    const double s = S / (double)g->tokens;
    /* every member in data-rank and data-heads: up to 20 + 21 characters each */
    const size_t alen = 256 + (size_t)g->gsize * 48;
    char *attrs = step < 0 ? malloc(alen) : NULL, title[512], who[192], qa[48], ka[48];
    if (step < 0 && !attrs)
        return;
    for (int q = 0; q < nb; q++)
        for (int k = 0; k < nb; k++) {
            const xp_cell *e = cell(g, q, k);
            double x = x0 + (double)g->edge[k] * s, y = y0 + (double)g->edge[q] * s;
            double w = (double)(g->edge[k + 1] - g->edge[k]) * s, h = (double)(g->edge[q + 1] - g->edge[q]) * s;
            if (step >= 0) {
                if (e->group < 0)
                    rect(c, x, y, w, h, white);
                else if (e->step == step)
                    group_fill(c, g, e->group, x, y, w, h, 0);
                else
                    rect(c, x, y, w, h, other);
                if (g->mask && e->group >= 0 && !block_full(g, f, q, k))
                    fine_mask(c, g, q, k, x0, y0, s);
                continue;
            }
            tok_range(qa, sizeof qa, g->edge[q], g->edge[q + 1]);
            tok_range(ka, sizeof ka, g->edge[k], g->edge[k + 1]);
            if (e->group < 0) {
                snprintf(attrs, alen,
                         "class=\"cell\" data-q=\"%d\" data-k=\"%d\" data-rank=\"\" data-heads=\"\" data-step=\"-1\" "
                         "data-pairs=\"0\"",
                         q, k);
                snprintf(title, sizeof title, "queries %s x keys %s: masked (no visible pair)", qa, ka);
                cv_rect(c, x, y, w, h, &white, NULL, 0, attrs, title);
                continue;
            }
            /* data-rank and data-heads: the members, space-separated */
            size_t n = (size_t)snprintf(attrs, alen, "class=\"cell\" data-q=\"%d\" data-k=\"%d\" data-rank=\"", q, k);
            int wn = 0;
            who[0] = 0;
            for (int u = 0; u < g->gsize; u++) {
                n += (size_t)snprintf(attrs + n, alen - n, "%s%d", u ? " " : "", g->granks[e->group * g->gsize + u]);
                if (wn < (int)sizeof who - 24)
                    wn += snprintf(who + wn, sizeof who - (size_t)wn, "%s%d", u ? " " : "",
                                   g->granks[e->group * g->gsize + u]);
                else if (u + 1 == g->gsize)
                    snprintf(who + wn, sizeof who - (size_t)wn, " ... %d", g->granks[e->group * g->gsize + u]);
            }
            n += (size_t)snprintf(attrs + n, alen - n, "\" data-heads=\"");
            for (int u = 0; u < g->gsize; u++)
                n += (size_t)snprintf(attrs + n, alen - n, "%s%lld", u ? " " : "",
                                      (long long)g->gheads[e->group * g->gsize + u]);
            snprintf(attrs + n, alen - n, "\" data-step=\"%d\" data-pairs=\"%.0f\"", e->step, e->pairs);
            snprintf(title, sizeof title, "queries %s x keys %s: rank%s %s%s, step %d, %.0f visible pairs", qa, ka,
                     g->gsize > 1 ? "s" : "", who, g->gsize > 1 ? " (each its heads)" : "", e->step, e->pairs);
            if (g->gsize == 1) {
                cv_rgb fill = colour(g->granks[e->group], 0);
                cv_rect(c, x, y, w, h, &fill, NULL, 0, attrs, title);
            } else {
                group_fill(c, g, e->group, x, y, w, h, 0);
                cv_rect(c, x, y, w, h, NULL, NULL, 0, attrs, title);
            }
        }
    free(attrs);
    if (step < 0 && g->mask)
        for (int q = 0; q < nb; q++)
            for (int k = 0; k < nb; k++)
                if (cell(g, q, k)->group >= 0 && !block_full(g, f, q, k))
                    fine_mask(c, g, q, k, x0, y0, s);
    /* block boundaries and the frame */
    for (int b = 1; b < nb; b++) {
        double t = (double)g->edge[b] * s;
        line2(c, x0 + t, y0, x0 + t, y0 + S, mid, 0.8);
        line2(c, x0, y0 + t, x0 + S, y0 + t, mid, 0.8);
    }
    cv_rect(c, x0, y0, S, S, NULL, &mid, 0.8, NULL, NULL);
    /* the documents (batch row 0's): boxes on the diagonal */
    if (f->a.doc_offsets && f->a.docs > 1)
        for (int64_t d = 0; d < f->a.docs; d++) {
            double a0 = (double)f->a.doc_offsets[d] * s, a1 = (double)f->a.doc_offsets[d + 1] * s;
            if (a1 > a0)
                cv_rect(c, x0 + a0, y0 + a0, a1 - a0, a1 - a0, NULL, &black, step < 0 ? 1.6 : 1.0, NULL, NULL);
        }
    /* ring steps */
    if (step >= 0 || g->steps <= 1)
        return;
    for (int q = 0; q < nb; q++)
        for (int k = 0; k < nb; k++) {
            const xp_cell *e = cell(g, q, k);
            double w = (double)(g->edge[k + 1] - g->edge[k]) * s, h = (double)(g->edge[q + 1] - g->edge[q]) * s;
            if (e->group < 0 || w < 11 || h < 11)
                continue;
            double fs = h < 16 ? 7 : 9;
            char buf[16];
            snprintf(buf, sizeof buf, "%d", e->step);
            double bw = strlen(buf) * fs * 0.62 + 3, bh = fs + 2;
            double cx = x0 + (double)g->edge[k] * s + w / 2, cy = y0 + (double)g->edge[q] * s + h / 2;
            rect(c, cx - bw / 2, cy - bh / 2, bw, bh, white);
            cv_text(c, cx, cy + fs * 0.36, fs, 0, CV_CENTRE, 0, black, buf);
        }
}

/* Token numbers at the block edges, every `every`-th. */
static int label_every(const xp_grid *g, double S)
{
    double minw = S;
    for (int b = 0; b < g->nb; b++) {
        double w = (double)(g->edge[b + 1] - g->edge[b]) * S / (double)g->tokens;
        minw = w < minw ? w : minw;
    }
    int every = 1;
    while (minw * every < 16)
        every++;
    return every;
}

static double grid_side(const xp_grid *g)
{
    double S = g->nb * 30.0;
    if (S < 220)
        S = 220;
    if (S > 640)
        S = 640;
    return S;
}

/* Work per rank: visible pairs x query heads of the grid's cells. */
static void rank_work(const xp_grid *g, int P, double *work)
{
    for (int r = 0; r < P; r++)
        work[r] = 0;
    for (int i = 0; i < g->nb * g->nb; i++) {
        const xp_cell *e = &g->cell[i];
        if (e->group < 0)
            continue;
        for (int u = 0; u < g->gsize; u++) {
            int r = g->granks[e->group * g->gsize + u];
            if (r >= 0 && r < P)
                work[r] += e->pairs * (double)g->gheads[e->group * g->gsize + u];
        }
    }
}

static double nice_step(double mx)
{
    double raw = mx / 4, p = pow(10, floor(log10(raw)));
    double m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10) * p;
}

static void num(char *buf, size_t n, double v)
{
    if (fabs(v) >= 1e7)
        snprintf(buf, n, "%.3g", v);
    else
        snprintf(buf, n, "%.0f", v);
}

/* Bar chart of the work per rank in the box (x0, y0, w, h): axes, ticks,
 * rank names, the even share dashed. */
static void draw_work(cv *c, const xp_fig *f, double x0, double y0, double w, double h)
{
    const int P = f->P;
    double *work = calloc((size_t)P, sizeof *work);
    if (!work)
        return;
    rank_work(&f->grid, P, work);
    double mx = 0, tot = 0;
    for (int r = 0; r < P; r++) {
        mx = work[r] > mx ? work[r] : mx;
        tot += work[r];
    }
    cv_text(c, x0, y0 - 22, 11, 1, CV_LEFT, 0, black, "work per rank");
    cv_text(c, x0, y0 - 9, 8.5, 0, CV_LEFT, 0, mid, "visible (query, key) pairs x query heads, all steps");
    const double ax = x0 + 56, aw = w - 60, ah = h - 34;
    if (mx <= 0)
        mx = 1;
    double st = nice_step(mx), top = ceil(mx / st - 1e-9) * st;
    char buf[48];
    for (double v = 0; v <= top + st / 2; v += st) {
        double y = y0 + ah - v / top * ah;
        line2(c, ax - 4, y, ax, y, mid, 0.8);
        if (v > 0)
            line2(c, ax, y, ax + aw, y, (cv_rgb){0.90, 0.90, 0.90}, 0.5);
        num(buf, sizeof buf, v);
        cv_text(c, ax - 6, y + 3, 7.5, 0, CV_RIGHT, 0, ink, buf);
    }
    cv_text(c, x0 + 8, y0 + ah / 2, 8.5, 0, CV_CENTRE, 1, ink, "pairs x heads");
    double bw = aw / P;
    int every = 1;
    while (bw * every < 16)
        every++;
    for (int r = 0; r < P; r++) {
        double bh = work[r] / top * ah, x = ax + r * bw;
        rect(c, x + bw * 0.12, y0 + ah - bh, bw * 0.76, bh, colour(r, 0));
        if (r % every == 0 || (r == P - 1 && (r % every) * bw >= 16)) {
            snprintf(buf, sizeof buf, "r%d", r);
            cv_text(c, x + bw / 2, y0 + ah + 12, P > 16 ? 7 : 8.5, 0, CV_CENTRE, 0, ink, buf);
        }
        if (bw >= 30) {
            num(buf, sizeof buf, work[r]);
            cv_text(c, x + bw / 2, y0 + ah - bh - 3, 7, 0, CV_CENTRE, 0, ink, buf);
        }
    }
    const double axes[6] = {ax, y0, ax, y0 + ah, ax + aw, y0 + ah};
    cv_line(c, axes, 3, mid, 0.9, 0);
    double ev = tot / P / top * ah;
    const double even[4] = {ax, y0 + ah - ev, ax + aw, y0 + ah - ev};
    cv_line(c, even, 2, black, 0.9, 3);
    cv_text(c, ax + aw / 2, y0 + ah + 26, 8.5, 0, CV_CENTRE, 0, ink, "rank (colour = rank)");
    num(buf, sizeof buf, tot / P);
    char lg[96];
    snprintf(lg, sizeof lg, "dashed: even share, total / P = %s", buf);
    cv_text(c, ax, y0 + h + 6, 8, 0, CV_LEFT, 0, ink, lg);
    free(work);
}

static double work_width(const xp_fig *f)
{
    double w = f->P * 14.0 + 60;
    return w < 300 ? 300 : w;
}

/* The grid section (grid with its axes, legend; work beside); returns its height. */
static double draw_grid_section(cv *c, const xp_fig *f, double y)
{
    const xp_grid *g = &f->grid;
    const double S = grid_side(g), x0 = MARGIN + 64, y0 = y + 62;
    cv_text(c, MARGIN, y + 14, 13, 1, CV_LEFT, 0, black, "Attention mask: query x key blocks");
    cv_text(c, x0 + S / 2, y0 - 26, 9, 0, CV_CENTRE, 0, ink, "key tokens");
    cv_text(c, MARGIN + 12, y0 + S / 2, 9, 0, CV_CENTRE, 1, ink, "query tokens (down)");
    const double s = S / (double)g->tokens;
    int every = label_every(g, S);
    char buf[128];
    for (int b = 0; b <= g->nb; b++) {
        if (b % every && b != g->nb)
            continue;
        if (b != g->nb && b + every > g->nb && (double)(g->tokens - g->edge[b]) * s < 14)
            continue;   /* too close to the final edge's number */
        double t = (double)g->edge[b] * s;
        snprintf(buf, sizeof buf, "%lld", (long long)g->edge[b]);
        line2(c, x0 + t, y0 - 3, x0 + t, y0, mid, 0.7);
        cv_text(c, x0 + t, y0 - 6, 7.5, 0, CV_CENTRE, 0, ink, buf);
        line2(c, x0 - 3, y0 + t, x0, y0 + t, mid, 0.7);
        cv_text(c, x0 - 5, y0 + t + 3, 7.5, 0, CV_RIGHT, 0, ink, buf);
    }
    draw_grid(c, f, x0, y0, S, -1);
    /* rows: the rank (ring position) whose queries they are */
    if (g->ngroup > 1) {
        double minh = S;
        for (int b = 0; b < g->nb; b++) {
            double h = (double)(g->edge[b + 1] - g->edge[b]) * s;
            minh = h < minh ? h : minh;
        }
        int ev = 1;
        while (minh * ev < 9)
            ev++;
        for (int b = 0; b < g->nb; b++) {
            if (b % ev)
                continue;
            int grp = g->owner[b];
            double yc = y0 + ((double)g->edge[b] + (double)(g->edge[b + 1] - g->edge[b]) / 2) * s;
            if (g->gsize == 1)
                snprintf(buf, sizeof buf, "r%d", g->granks[grp]);
            else
                snprintf(buf, sizeof buf, "pos %d", grp);
            rect(c, x0 + S + 4, yc - 3.5, 7, 7, g->gsize == 1 ? colour(g->granks[grp], 0) : other);
            cv_text(c, x0 + S + 14, yc + 3, minh < 12 ? 7 : 8.5, 0, CV_LEFT, 0, ink, buf);
        }
    }
    /* legend */
    double ly = y0 + S + 16;
    if (g->gsize == 1)
        snprintf(buf, sizeof buf, "colour = the rank computing the block (its queries: row label)");
    else if (thin_stripes(g, S))
        snprintf(buf, sizeof buf, "blue = computed by all %d ranks of %s, each for its own heads", g->gsize,
                 g->ngroup == 1 ? "the group" : "a ring position");
    else if (g->ngroup == 1)
        snprintf(buf, sizeof buf, "stripes: every rank computes every block, each for its own heads");
    else
        snprintf(buf, sizeof buf, "stripes: the %d ranks of a ring position, each for its own heads", g->gsize);
    cv_text(c, x0, ly, 8.5, 0, CV_LEFT, 0, ink, buf);
    ly += 12;
    if (g->steps > 1) {
        cv_text(c, x0, ly, 8.5, 0, CV_LEFT, 0, ink, "number = the ring step computing the block");
        ly += 12;
    }
    int masked = 0, partial = 0;
    for (int q = 0; q < g->nb; q++)
        for (int k = 0; k < g->nb; k++) {
            masked |= cell(g, q, k)->group < 0;
            partial |= cell(g, q, k)->group >= 0 && !block_full(g, f, q, k);
        }
    if (masked || (g->mask && partial)) {
        cv_text(c, x0, ly, 8.5, 0, CV_LEFT, 0, ink,
                g->mask && partial ? "white = masked block; pale = masked pairs inside a computed block"
                                   : "white = masked block (no visible pair)");
        ly += 12;
    }
    if (f->a.doc_offsets && f->a.docs > 1) {
        cv_text(c, x0, ly, 8.5, 0, CV_LEFT, 0, ink, "black boxes = the packed documents (queries see their own only)");
        ly += 12;
    }
    if (g->ngroup > 1 && g->gsize > 1) {
        /* the members of each ring position, up to 8 positions */
        for (int grp = 0; grp < g->ngroup && grp < 8; grp++) {
            int n = snprintf(buf, sizeof buf, "pos %d = ranks", grp);
            for (int u = 0; u < g->gsize && n < (int)sizeof buf - 8; u++)
                n += snprintf(buf + n, sizeof buf - (size_t)n, " %d", g->granks[grp * g->gsize + u]);
            cv_text(c, x0, ly, 8.5, 0, CV_LEFT, 0, ink, buf);
            ly += 12;
        }
    }
    /* work beside */
    double wx = x0 + S + 60;
    draw_work(c, f, wx, y0, work_width(f), S);
    double h = ly - y;
    return h > S + 62 + 24 ? h : S + 62 + 24;
}

static double grid_section_width(const xp_fig *f)
{
    return MARGIN + 64 + grid_side(&f->grid) + 60 + work_width(f) + MARGIN;
}

/* ------------------------------------------------------------ steps */

enum { STEP_GAP = 26 };

static double mini_side(const xp_grid *g) { return g->steps > 16 ? 96 : g->steps > 8 ? 110 : g->nb > 8 ? 160 : 130; }

static int lists_ranks(const xp_grid *g) { return g->ngroup <= 8; }

static double step_height(const xp_grid *g)
{
    return 30 + mini_side(g) + 8 + (lists_ranks(g) ? 11.0 * g->ngroup : 0) + STEP_GAP;
}

/* The K, V blocks group grp computes at step t, as token ranges. */
static void held(const xp_grid *g, int grp, int t, char *buf, size_t n)
{
    int len = 0, any = 0;
    buf[0] = 0;
    for (int k = 0; k < g->nb; k++) {
        int used = 0;
        for (int q = 0; q < g->nb && !used; q++)
            used = cell(g, q, k)->group == grp && cell(g, q, k)->step == t;
        if (!used)
            continue;
        int k1 = k;
        /* merge adjacent blocks */
        while (k1 + 1 < g->nb) {
            int u2 = 0;
            for (int q = 0; q < g->nb && !u2; q++)
                u2 = cell(g, q, k1 + 1)->group == grp && cell(g, q, k1 + 1)->step == t;
            if (!u2)
                break;
            k1++;
        }
        char r[48];
        tok_range(r, sizeof r, g->edge[k], g->edge[k1 + 1]);
        if (len < (int)n - 1)
            len += snprintf(buf + len, n - (size_t)len, "%s%s", any ? "," : "", r);
        any = 1;
        k = k1;
    }
    if (!any)
        snprintf(buf, n, "-");
}

static double draw_steps(cv *c, const xp_fig *f, double W, double y)
{
    const xp_grid *g = &f->grid;
    const double m = mini_side(g);
    cv_text(c, MARGIN, y + 14, 13, 1, CV_LEFT, 0, black, "Step by step: the blocks each ring step computes");
    cv_text(c, MARGIN, y + 28, 8.5, 0, CV_LEFT, 0, ink,
            "coloured = computed at this step (colour = rank); grey = at another step; white = masked; "
            "strip above = who holds each K, V block");
    const double cellw = m + 46;
    int perrow = (int)((W - 2 * MARGIN - LABEL_W) / cellw);
    if (perrow < 1)
        perrow = 1;
    const double sh = step_height(g), top = y + 48;
    char buf[160], hb[120];
    for (int t = 0; t < g->steps; t++) {
        double x0 = MARGIN + LABEL_W + (t % perrow) * cellw, y0 = top + (t / perrow) * sh + 30;
        snprintf(buf, sizeof buf, "step %d", t);
        cv_text(c, x0 + m / 2, y0 - 16, 10, 1, CV_CENTRE, 0, black, buf);
        draw_grid(c, f, x0, y0, m, t);
        /* the holder strip: the group computing with each key block now */
        const double s = m / (double)g->tokens;
        for (int k = 0; k < g->nb; k++) {
            int grp = -1;
            for (int q = 0; q < g->nb && grp < 0; q++)
                if (cell(g, q, k)->step == t)
                    grp = cell(g, q, k)->group;
            double x = x0 + (double)g->edge[k] * s, w = (double)(g->edge[k + 1] - g->edge[k]) * s;
            if (grp >= 0)
                group_fill(c, g, grp, x, y0 - 9, w, 6, 0);
        }
        if (!lists_ranks(g))
            continue;
        for (int grp = 0; grp < g->ngroup; grp++) {
            held(g, grp, t, hb, sizeof hb);
            if (g->gsize == 1)
                snprintf(buf, sizeof buf, "r%d: K,V %s", g->granks[grp], hb);
            else
                snprintf(buf, sizeof buf, "pos %d: K,V %s", grp, hb);
            cv_text(c, x0, y0 + m + 12 + 11 * grp, 7.5, 0, CV_LEFT, 0, ink, buf);
        }
    }
    int rows = (g->steps + perrow - 1) / perrow;
    return 48 + rows * sh;
}

/* ------------------------------------------------------------ the decode strip */

enum { STRIP_H = 24, STRIP_SECTION_H = 92 };

/* The new query's row of the mask grid (f->strip): keys 0..n across, each
 * run coloured by the rank that holds and attends it, masked keys blank. */
static double draw_strip(cv *c, const xp_fig *f, double W, double y)
{
    const xp_strip *st = &f->strip;
    const double x0 = MARGIN + LABEL_W, w = W - MARGIN - x0, keys = (double)(st->query + 1);
    char buf[160];
    snprintf(buf, sizeof buf, "decode step: the new query (position %lld) x keys 0..%lld, coloured by the rank "
             "attending them", (long long)st->query, (long long)st->query);
    cv_text(c, MARGIN, y + 12, 11, 1, CV_LEFT, 0, black, buf);
    const double yr = y + 30, sx = w / keys;
    cv_text(c, x0 - 4, yr + STRIP_H / 2.0 + 4, 10, 1, CV_RIGHT, 0, black, "q");
    for (int i = 0; i < st->nrun; i++) {
        const xp_strip_run *r = &st->run[i];
        const double x = x0 + (double)r->begin * sx, rw = (double)r->count * sx;
        if (r->visible)
            rect(c, x, yr, rw, STRIP_H, colour(r->rank, 0));
        if (rw >= 16) {
            snprintf(buf, sizeof buf, "r%d", r->rank);
            cv_text(c, x + rw / 2, yr + STRIP_H / 2.0 + 3.5, 9, 1, CV_CENTRE, 0, r->visible ? black : faint, buf);
        }
        if (i > 0)
            line2(c, x, yr, x, yr + STRIP_H, white, 1);
    }
    cv_rect(c, x0, yr, w, STRIP_H, NULL, &mid, 0.6, NULL, NULL);
    snprintf(buf, sizeof buf, "keys 0..%lld (the cache with the new token); blank = masked", (long long)st->query);
    cv_text(c, x0 + w / 2, yr + STRIP_H + 14, 8.5, 0, CV_CENTRE, 0, ink, buf);
    return STRIP_SECTION_H;
}

/* ------------------------------------------------------------ the figure */

static double draw_all(cv *c, const xp_fig *f, double W, double bh)
{
    cv_text(c, MARGIN, MARGIN + 14, 15, 1, CV_LEFT, 0, black, f->title);
    cv_text(c, MARGIN, MARGIN + 32, 10, 0, CV_LEFT, 0, mid, f->subtitle);
    double y = MARGIN + TITLE_H;
    if (f->npanel) {
        draw_layouts(c, f, y, bh);
        y += layouts_height(f, bh) + SECTION_GAP;
    }
    if (f->decode && f->strip.nrun)
        y += draw_strip(c, f, W, y) + SECTION_GAP;
    if (f->grid.nb > 0) {
        y += draw_grid_section(c, f, y) + SECTION_GAP;
        if (f->grid.steps > 1)
            y += draw_steps(c, f, W, y);
    }
    if (f->nmatrix)
        y += draw_matrices(c, f, W, y) + 10;
    return y + MARGIN;
}

static double fig_width(const xp_fig *f)
{
    int np = f->npanel > 0 ? f->npanel : 1;
    double w = 2 * MARGIN + LABEL_W + np * PANEL_W + (np - 1) * GAP_W;
    double mw = 0;
    for (int i = 0; i < f->nmatrix; i++)
        mw += (matrix_width(&f->matrix[i]) > MAT_MAX ? matrix_width(&f->matrix[i]) : MAT_MAX) + 80;
    double minw = 2 * MARGIN + LABEL_W + (f->nmatrix > 1 && mw < 1400 ? mw - 80 : f->nmatrix ? matrix_width(&f->matrix[0]) : 0);
    if (w < minw)
        w = minw;
    if (f->grid.nb > 0 && w < grid_section_width(f))
        w = grid_section_width(f);
    if (f->grid.steps > 1) {
        /* room for up to 4 steps in a row */
        int n = f->grid.steps < 4 ? f->grid.steps : 4;
        double sw = 2 * MARGIN + LABEL_W + n * (mini_side(&f->grid) + 46);
        if (w < sw)
            w = sw;
    }
    if (w < 560)
        w = 560;
    return ceil(w);
}

int xp_draw(const xp_fig *f, const char *path, const char *file, char *err, size_t errlen)
{
    const char *dot = strrchr(path, '.');
    int kind = !dot ? -1 : !strcmp(dot, ".svg") ? CV_SVG : !strcmp(dot, ".png") ? CV_PNG : !strcmp(dot, ".pdf") ? CV_PDF : -1;
    if (kind < 0) {
        snprintf(err, errlen, "--svg %s: the file name must end in .svg, .png or .pdf", path);
        return 2;
    }
    if (kind != CV_SVG && !xp_draw_available()) {
        snprintf(err, errlen, "--svg %s: this build has no PNG or PDF support (no cairo); .svg works", path);
        return 2;
    }
    double bh = band_height(f), W = fig_width(f);
    cv c;
    char e2[256];
    cv_open(&c, CV_NONE, NULL, 0, 0, e2, sizeof e2);
    double H = ceil(draw_all(&c, f, W, bh));
    if (cv_open(&c, kind, file, W, H, e2, sizeof e2)) {
        snprintf(err, errlen, "--svg %s: %s", path, e2);
        return 1;
    }
    draw_all(&c, f, W, bh);
    if (cv_close(&c, e2, sizeof e2)) {
        snprintf(err, errlen, "--svg %s: %s", path, e2);
        return 1;
    }
    return 0;
}
