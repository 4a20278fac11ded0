/* SPDX-License-Identifier: Apache-2.0 */
/*
 * explain_draw.c -- draws an xp_fig (explain.h) with cairo: SVG, PNG or PDF
 * by the file's extension.  Ranks are rows; each panel is a tokens (x) by
 * heads (y) grid per rank, blocks coloured by the rank the tokens came from;
 * arrows between panels name the collective; send matrices are heat maps;
 * per-step work (ring methods) is a bar chart.
 *
 * Without cairo (configure did not find it) xp_draw_available() is 0 and
 * the command refuses --svg with a message.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "explain.h"

#ifndef HAVE_CAIRO

int xp_draw_available(void) { return 0; }

int xp_draw(const xp_fig *f, const char *path, const char *file, char *err, size_t errlen)
{
    (void)f;
    (void)file;
    snprintf(err, errlen, "%s: this build has no drawing support (no cairo)", path);
    return 2;
}

#else

#include <cairo.h>
#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

int xp_draw_available(void) { return 1; }

/* Colour-blind-safe qualitative palette (Okabe-Ito, then Tableau). */
static const double palette[][3] = {
    {0.902, 0.624, 0.000}, {0.337, 0.706, 0.914}, {0.000, 0.620, 0.451}, {0.941, 0.894, 0.259},
    {0.000, 0.447, 0.698}, {0.835, 0.369, 0.000}, {0.800, 0.475, 0.655}, {0.600, 0.600, 0.600},
    {0.549, 0.337, 0.294}, {0.737, 0.741, 0.133}, {0.090, 0.745, 0.812}, {0.580, 0.404, 0.741},
};
enum { NPAL = sizeof palette / sizeof palette[0] };

static const char *font = "DejaVu Sans";

/* geometry */
enum { MARGIN = 20, LABEL_W = 36, PANEL_W = 190, GAP_W = 74, BAND_GAP = 8, TITLE_H = 58,
       PTITLE_H = 34, CAPTION_H = 26, MAT_MAX = 210, BAR_H = 90 };

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

static void text(cairo_t *cr, double x, double y, double size, int bold, int align, const char *s)
{
    cairo_select_font_face(cr, font, CAIRO_FONT_SLANT_NORMAL, bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    double dx = align == 0 ? 0 : align == 1 ? -e.x_advance / 2 : -e.x_advance;
    cairo_move_to(cr, x + dx, y);
    cairo_show_text(cr, s);
}

static void set_colour(cairo_t *cr, int src, double lighten)
{
    const double *c = palette[(src < 0 ? 0 : src) % NPAL];
    cairo_set_source_rgb(cr, c[0] + (1 - c[0]) * lighten, c[1] + (1 - c[1]) * lighten, c[2] + (1 - c[2]) * lighten);
}

static void hatch(cairo_t *cr, double x, double y, double w, double h)
{
    cairo_save(cr);
    cairo_rectangle(cr, x, y, w, h);
    cairo_clip(cr);
    cairo_set_source_rgba(cr, 0, 0, 0, 0.55);
    cairo_set_line_width(cr, 0.8);
    for (double t = -h; t < w; t += 5) {
        cairo_move_to(cr, x + t, y + h);
        cairo_line_to(cr, x + t + h, y);
    }
    cairo_stroke(cr);
    cairo_restore(cr);
}

static void draw_panel(cairo_t *cr, const xp_fig *f, const xp_panel *p, double x0, double y0, double bh)
{
    text(cr, x0 + PANEL_W / 2.0, y0 - 12, 11, 1, 1, p->title);
    double sx = (double)PANEL_W / (double)p->tokens, sy = bh / (double)p->heads;
    for (int r = 0; r < f->P; r++) {
        double y = y0 + r * (bh + BAND_GAP);
        cairo_set_source_rgb(cr, 0.97, 0.97, 0.97);
        cairo_rectangle(cr, x0, y, PANEL_W, bh);
        cairo_fill(cr);
    }
    for (int i = 0; i < p->nblock; i++) {
        const xp_block *b = &p->blocks[i];
        double x = x0 + (double)b->t0 * sx, y = y0 + b->rank * (bh + BAND_GAP) + (double)b->h0 * sy;
        double w = (double)b->tn * sx, h = (double)b->hn * sy;
        set_colour(cr, b->src, b->shade ? 0.6 : 0);
        cairo_rectangle(cr, x, y, w, h);
        cairo_fill(cr);
        if (b->replicated)
            hatch(cr, x, y, w, h);
    }
    /* grid: token and head boundaries when they are wide enough to see */
    cairo_set_line_width(cr, 0.5);
    cairo_set_source_rgba(cr, 1, 1, 1, 0.8);
    for (int r = 0; r < f->P; r++) {
        double y = y0 + r * (bh + BAND_GAP);
        if (sx >= 4)
            for (int64_t t = 1; t < p->tokens; t++) {
                cairo_move_to(cr, x0 + (double)t * sx, y);
                cairo_line_to(cr, x0 + (double)t * sx, y + bh);
            }
        if (sy >= 3)
            for (int64_t hh = 1; hh < p->heads; hh++) {
                cairo_move_to(cr, x0, y + (double)hh * sy);
                cairo_line_to(cr, x0 + PANEL_W, y + (double)hh * sy);
            }
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
        cairo_rectangle(cr, x0, y, PANEL_W, bh);
        cairo_stroke(cr);
        cairo_set_source_rgba(cr, 1, 1, 1, 0.8);
    }
    double yb = y0 + f->P * (bh + BAND_GAP) - BAND_GAP;
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    char buf[96];
    snprintf(buf, sizeof buf, "tokens 0..%lld  x  %s 0..%lld (down)", (long long)(p->tokens - 1), p->yname,
             (long long)(p->heads - 1));
    text(cr, x0 + PANEL_W / 2.0, yb + 13, 8.5, 0, 1, buf);
    text(cr, x0 + PANEL_W / 2.0, yb + 24, 9, 0, 1, p->caption);
}

static void draw_arrow(cairo_t *cr, double x0, double x1, double y, const char *label)
{
    cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
    cairo_set_line_width(cr, 1.6);
    cairo_move_to(cr, x0, y);
    cairo_line_to(cr, x1 - 6, y);
    cairo_stroke(cr);
    cairo_move_to(cr, x1, y);
    cairo_line_to(cr, x1 - 8, y - 4.5);
    cairo_line_to(cr, x1 - 8, y + 4.5);
    cairo_close_path(cr);
    cairo_fill(cr);
    /* label: up to two words per line */
    char a[32], b[32] = "";
    snprintf(a, sizeof a, "%s", label);
    char *sp = strchr(a, ' ');
    if (sp && strlen(a) > 11) {
        *sp = 0;
        snprintf(b, sizeof b, "%s", sp + 1);
    }
    text(cr, (x0 + x1) / 2, y - (b[0] ? 20 : 8), 9.5, 1, 1, a);
    if (b[0])
        text(cr, (x0 + x1) / 2, y - 8, 9.5, 1, 1, b);
}

/* Draws one matrix (cr NULL: only measures); returns its height. */
static double draw_matrix(cairo_t *cr, const xp_matrix *m, double x0, double y0)
{
    double cs = (double)MAT_MAX / m->P;
    if (cs > 34)
        cs = 34;
    if (!cr)
        return 14 + m->P * cs + 30;
    uint64_t mx = 1;
    for (int i = 0; i < m->P * m->P; i++)
        if (i / m->P != i % m->P && m->elems[i] > mx)
            mx = m->elems[i];
    text(cr, x0, y0 - 8, 10, 1, 0, m->title);
    for (int r = 0; r < m->P; r++)
        for (int s = 0; s < m->P; s++) {
            double x = x0 + 24 + s * cs, y = y0 + 14 + r * cs;
            uint64_t v = m->elems[r * m->P + s];
            double t = r == s ? 0 : (double)v / (double)mx;
            if (r == s)
                cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
            else
                cairo_set_source_rgb(cr, 1 - 0.75 * t, 1 - 0.55 * t, 1 - 0.2 * t);
            cairo_rectangle(cr, x, y, cs, cs);
            cairo_fill_preserve(cr);
            cairo_set_source_rgb(cr, 0.6, 0.6, 0.6);
            cairo_set_line_width(cr, 0.5);
            cairo_stroke(cr);
            if (m->P <= 8) {
                char buf[32];
                snprintf(buf, sizeof buf, r == s ? "(%llu)" : "%llu", (unsigned long long)v);
                cairo_set_source_rgb(cr, t > 0.6 ? 1 : 0.1, t > 0.6 ? 1 : 0.1, t > 0.6 ? 1 : 0.1);
                text(cr, x + cs / 2, y + cs / 2 + 3, cs > 30 ? 8 : 6.5, 0, 1, buf);
            }
        }
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    if (m->P <= 16)
        for (int r = 0; r < m->P; r++) {
            char buf[16];
            snprintf(buf, sizeof buf, "r%d", r);
            text(cr, x0 + 20, y0 + 14 + r * cs + cs / 2 + 3, 8, 0, 2, buf);
            text(cr, x0 + 24 + r * cs + cs / 2, y0 + 11, 8, 0, 1, buf);
        }
    return 14 + m->P * cs + 30;
}

static double draw_bars(cairo_t *cr, const xp_bars *b, double x0, double y0, double width)
{
    double mx = 0;
    for (int i = 0; i < b->P * b->steps; i++)
        if (b->work[i] > mx)
            mx = b->work[i];
    if (mx <= 0)
        mx = 1;
    text(cr, x0, y0 - 8, 10, 1, 0, b->title);
    double gw = (width - 30) / b->steps, bw = (gw - 6) / b->P;
    for (int k = 0; k < b->steps; k++) {
        char buf[32];
        snprintf(buf, sizeof buf, "step %d", k);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        text(cr, x0 + 30 + k * gw + gw / 2, y0 + BAR_H + 12, 8, 0, 1, buf);
        for (int r = 0; r < b->P; r++) {
            double v = b->work[r * b->steps + k], h = v / mx * BAR_H;
            double x = x0 + 30 + k * gw + r * bw;
            set_colour(cr, r, 0);
            cairo_rectangle(cr, x, y0 + BAR_H - h, bw - 1, h);
            cairo_fill(cr);
            if (b->label && b->P * b->steps <= 64 && bw >= 9) {
                int lb = b->label[r * b->steps + k];
                if (lb < 0)
                    snprintf(buf, sizeof buf, "-");   /* holds no block: idle */
                else
                    snprintf(buf, sizeof buf, "%d", lb);
                cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
                text(cr, x + bw / 2, y0 + BAR_H - h - 2, 6.5, 0, 1, buf);
            }
        }
    }
    cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
    cairo_set_line_width(cr, 0.8);
    cairo_move_to(cr, x0 + 28, y0);
    cairo_line_to(cr, x0 + 28, y0 + BAR_H);
    cairo_line_to(cr, x0 + width, y0 + BAR_H);
    cairo_stroke(cr);
    return BAR_H + 40;
}

/* Matrices side by side, wrapping at width W (cr NULL: only measures);
 * returns the height used. */
static double draw_matrices(cairo_t *cr, const xp_fig *f, double W, double y0)
{
    double x = MARGIN + LABEL_W, y = y0, rowh = 0;
    for (int i = 0; i < f->nmatrix; i++) {
        double h = draw_matrix(cr, &f->matrix[i], x, y);
        if (h > rowh)
            rowh = h;
        x += MAT_MAX + 80;
        if (x + MAT_MAX > W) {
            x = MARGIN + LABEL_W;
            y += rowh;
            rowh = 0;
        }
    }
    return y + rowh - y0;
}

static void draw_all(cairo_t *cr, const xp_fig *f, double W, double bh)
{
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text(cr, MARGIN, MARGIN + 14, 15, 1, 0, f->title);
    cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
    text(cr, MARGIN, MARGIN + 32, 10, 0, 0, f->subtitle);
    double y0 = MARGIN + TITLE_H + PTITLE_H;
    /* rank labels */
    for (int r = 0; r < f->P; r++) {
        if (f->P > 16 && r % 8 && r != f->P - 1)
            continue;
        char buf[16];
        snprintf(buf, sizeof buf, "r%d", r);
        set_colour(cr, r, 0);
        cairo_rectangle(cr, MARGIN, y0 + r * (bh + BAND_GAP) + bh / 2 - 4, 8, 8);
        cairo_fill(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        text(cr, MARGIN + 11, y0 + r * (bh + BAND_GAP) + bh / 2 + 4, 10, 1, 0, buf);
    }
    for (int i = 0; i < f->npanel; i++) {
        double x = MARGIN + LABEL_W + i * (PANEL_W + GAP_W);
        draw_panel(cr, f, &f->panel[i], x, y0, bh);
        if (i > 0)
            draw_arrow(cr, x - GAP_W + 6, x - 6, y0 + (f->P * (bh + BAND_GAP)) / 2, f->arrow[i]);
    }
    double y = y0 + f->P * (bh + BAND_GAP) + CAPTION_H + 24;
    y += draw_matrices(cr, f, W, y);
    for (int i = 0; i < f->nbars; i++)
        y += draw_bars(cr, &f->bars[i], MARGIN + LABEL_W, y + 10, W - 2 * MARGIN - LABEL_W) + 10;
}

static void fig_size(const xp_fig *f, double bh, double *W, double *H)
{
    int np = f->npanel > 0 ? f->npanel : 1;
    double w = 2 * MARGIN + LABEL_W + np * PANEL_W + (np - 1) * GAP_W;
    double minw = 2 * MARGIN + LABEL_W + (f->nmatrix > 1 ? 2 * MAT_MAX + 80 : MAT_MAX + 40);
    if (w < minw)
        w = minw;
    if (w < 560)
        w = 560;
    double h = MARGIN + TITLE_H + PTITLE_H + f->P * (bh + BAND_GAP) + CAPTION_H + 24;
    h += draw_matrices(NULL, f, w, 0) + f->nbars * (BAR_H + 50) + MARGIN;
    *W = ceil(w);
    *H = ceil(h);
}

int xp_draw(const xp_fig *f, const char *path, const char *file, char *err, size_t errlen)
{
    const char *dot = strrchr(path, '.');
    int kind = !dot ? -1 : !strcmp(dot, ".svg") ? 0 : !strcmp(dot, ".png") ? 1 : !strcmp(dot, ".pdf") ? 2 : -1;
    if (kind < 0) {
        snprintf(err, errlen, "--svg %s: the file name must end in .svg, .png or .pdf", path);
        return 2;
    }
    double bh = band_height(f), W, H;
    fig_size(f, bh, &W, &H);
    cairo_surface_t *s;
    if (kind == 0) {
        s = cairo_svg_surface_create(file, W, H);
    } else if (kind == 2) {
        s = cairo_pdf_surface_create(file, W, H);
        /* reproducible output: no creation date */
        if (cairo_surface_status(s) == CAIRO_STATUS_SUCCESS)
            cairo_pdf_surface_set_metadata(s, CAIRO_PDF_METADATA_CREATOR, "ulysses explain");
    } else {
        s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, (int)(W * 2), (int)(H * 2));
    }
    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
        snprintf(err, errlen, "--svg %s: cannot create the drawing: %s", path,
                 cairo_status_to_string(cairo_surface_status(s)));
        cairo_surface_destroy(s);
        return 1;
    }
    cairo_t *cr = cairo_create(s);
    if (kind == 1)
        cairo_scale(cr, 2, 2);   /* PNG at twice the resolution */
    draw_all(cr, f, W, bh);
    cairo_status_t st = cairo_status(cr);
    cairo_destroy(cr);
    if (st == CAIRO_STATUS_SUCCESS && kind == 1)
        st = cairo_surface_write_to_png(s, file);
    cairo_surface_finish(s);
    if (st == CAIRO_STATUS_SUCCESS)
        st = cairo_surface_status(s);
    cairo_surface_destroy(s);
    if (st != CAIRO_STATUS_SUCCESS) {
        snprintf(err, errlen, "--svg %s: %s", path, cairo_status_to_string(st));
        return 1;
    }
    return 0;
}

#endif
