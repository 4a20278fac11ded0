/* SPDX-License-Identifier: Apache-2.0 */
/*
 * explain_canvas.c -- the drawing backends of explain_canvas.h: SVG written
 * directly (text stays text), PNG (twice the resolution) and PDF by cairo.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "explain_canvas.h"

#ifdef HAVE_CAIRO
#include <cairo.h>
#include <cairo-pdf.h>
#endif

static const char *font = "DejaVu Sans";

/* "#rrggbb" */
static void hex(char *buf, cv_rgb c)
{
    int r = (int)(c.r * 255 + 0.5), g = (int)(c.g * 255 + 0.5), b = (int)(c.b * 255 + 0.5);
    r = r < 0 ? 0 : r > 255 ? 255 : r;
    g = g < 0 ? 0 : g > 255 ? 255 : g;
    b = b < 0 ? 0 : b > 255 ? 255 : b;
    snprintf(buf, 8, "#%02x%02x%02x", r, g, b);
}

/* XML text with & < > " escaped */
static void esc(FILE *f, const char *s)
{
    for (; *s; s++)
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
}

/* "<polyline points=\"x,y x,y ...\"" (the element left open) */
static void svg_points(FILE *f, const char *elem, const double *xy, int n)
{
    fprintf(f, "<%s points=\"", elem);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%.2f,%.2f", i ? " " : "", xy[2 * i], xy[2 * i + 1]);
}

int cv_open(cv *c, int kind, const char *file, double W, double H, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->file = file;
    if (kind == CV_NONE)
        return 0;
    if (kind == CV_SVG) {
        c->svg = fopen(file, "w");
        if (!c->svg) {
            snprintf(err, errlen, "cannot write %s: %s", file, strerror(errno));
            return 1;
        }
        fprintf(c->svg,
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                "font-family=\"DejaVu Sans, Verdana, sans-serif\">\n"
                "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n",
                W, H, W, H, W, H);
        return 0;
    }
#ifdef HAVE_CAIRO
    cairo_surface_t *s;
    if (kind == CV_PDF) {
        s = cairo_pdf_surface_create(file, W, H);
        /* reproducible output: no creation date */
        if (cairo_surface_status(s) == CAIRO_STATUS_SUCCESS)
            cairo_pdf_surface_set_metadata(s, CAIRO_PDF_METADATA_CREATOR, "ulysses explain");
    } else {
        s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, (int)(W * 2), (int)(H * 2));
    }
    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
        snprintf(err, errlen, "cannot create the drawing: %s", cairo_status_to_string(cairo_surface_status(s)));
        cairo_surface_destroy(s);
        return 1;
    }
    cairo_t *cr = cairo_create(s);
    if (kind == CV_PNG)
        cairo_scale(cr, 2, 2);   /* PNG at twice the resolution */
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    c->cr = cr;
    c->surf = s;
    return 0;
#else
    snprintf(err, errlen, "this build has no PNG or PDF support (no cairo); .svg works");
    return 1;
#endif
}

int cv_close(cv *c, char *err, size_t errlen)
{
    if (c->kind == CV_NONE)
        return 0;
    if (c->kind == CV_SVG) {
        fputs("</svg>\n", c->svg);
        int bad = ferror(c->svg);
        if (fclose(c->svg) || bad) {
            snprintf(err, errlen, "error writing %s: %s", c->file, strerror(errno));
            return 1;
        }
        return 0;
    }
#ifdef HAVE_CAIRO
    cairo_t *cr = c->cr;
    cairo_surface_t *s = c->surf;
    cairo_status_t st = cairo_status(cr);
    cairo_destroy(cr);
    if (st == CAIRO_STATUS_SUCCESS && c->kind == CV_PNG)
        st = cairo_surface_write_to_png(s, c->file);
    cairo_surface_finish(s);
    if (st == CAIRO_STATUS_SUCCESS)
        st = cairo_surface_status(s);
    cairo_surface_destroy(s);
    if (st != CAIRO_STATUS_SUCCESS) {
        snprintf(err, errlen, "%s", cairo_status_to_string(st));
        return 1;
    }
#endif
    (void)err;
    (void)errlen;
    return 0;
}

void cv_rect(cv *c, double x, double y, double w, double h, const cv_rgb *fill, const cv_rgb *stroke, double lw,
             const char *attrs, const char *title)
{
    if (c->kind == CV_NONE)
        return;
    if (c->kind == CV_SVG) {
        char fc[8] = "none", sc[8] = "none";
        if (fill)
            hex(fc, *fill);
        if (stroke)
            hex(sc, *stroke);
        fprintf(c->svg, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"", x, y, w, h, fc);
        if (stroke)
            fprintf(c->svg, " stroke=\"%s\" stroke-width=\"%.2f\"", sc, lw);
        if (attrs)
            fprintf(c->svg, " %s", attrs);
        if (title) {
            fputs("><title>", c->svg);
            esc(c->svg, title);
            fputs("</title></rect>\n", c->svg);
        } else {
            fputs("/>\n", c->svg);
        }
        return;
    }
#ifdef HAVE_CAIRO
    cairo_t *cr = c->cr;
    cairo_rectangle(cr, x, y, w, h);
    if (fill) {
        cairo_set_source_rgb(cr, fill->r, fill->g, fill->b);
        if (stroke)
            cairo_fill_preserve(cr);
        else
            cairo_fill(cr);
    }
    if (stroke) {
        cairo_set_source_rgb(cr, stroke->r, stroke->g, stroke->b);
        cairo_set_line_width(cr, lw);
        cairo_stroke(cr);
    }
    if (!fill && !stroke)
        cairo_new_path(cr);
#endif
}

void cv_line(cv *c, const double *xy, int n, cv_rgb col, double lw, double dash)
{
    if (c->kind == CV_NONE)
        return;
    if (n < 2)
        return;
    if (c->kind == CV_SVG) {
        char sc[8];
        hex(sc, col);
        svg_points(c->svg, "polyline", xy, n);
        fprintf(c->svg, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"%.2f\"", sc, lw);
        if (dash > 0)
            fprintf(c->svg, " stroke-dasharray=\"%.1f %.1f\"", dash, dash);
        fputs("/>\n", c->svg);
        return;
    }
#ifdef HAVE_CAIRO
    cairo_t *cr = c->cr;
    cairo_set_source_rgb(cr, col.r, col.g, col.b);
    cairo_set_line_width(cr, lw);
    if (dash > 0)
        cairo_set_dash(cr, &dash, 1, 0);
    cairo_move_to(cr, xy[0], xy[1]);
    for (int i = 1; i < n; i++)
        cairo_line_to(cr, xy[2 * i], xy[2 * i + 1]);
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
#endif
}

void cv_poly(cv *c, const double *xy, int n, cv_rgb fill)
{
    if (c->kind == CV_NONE)
        return;
    if (n < 3)
        return;
    if (c->kind == CV_SVG) {
        char fc[8];
        hex(fc, fill);
        svg_points(c->svg, "polygon", xy, n);
        fprintf(c->svg, "\" fill=\"%s\"/>\n", fc);
        return;
    }
#ifdef HAVE_CAIRO
    cairo_t *cr = c->cr;
    cairo_set_source_rgb(cr, fill.r, fill.g, fill.b);
    cairo_move_to(cr, xy[0], xy[1]);
    for (int i = 1; i < n; i++)
        cairo_line_to(cr, xy[2 * i], xy[2 * i + 1]);
    cairo_close_path(cr);
    cairo_fill(cr);
#endif
}

void cv_text(cv *c, double x, double y, double size, int bold, int align, int rot, cv_rgb col, const char *s)
{
    if (c->kind == CV_NONE)
        return;
    if (c->kind == CV_SVG) {
        static const char *const anchor[] = {"start", "middle", "end"};
        char fc[8];
        hex(fc, col);
        fprintf(c->svg, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"%.1f\"", x, y, size);
        if (bold)
            fputs(" font-weight=\"bold\"", c->svg);
        if (align)
            fprintf(c->svg, " text-anchor=\"%s\"", anchor[align]);
        if (rot)
            fprintf(c->svg, " transform=\"rotate(-90 %.2f %.2f)\"", x, y);
        fprintf(c->svg, " fill=\"%s\">", fc);
        esc(c->svg, s);
        fputs("</text>\n", c->svg);
        return;
    }
#ifdef HAVE_CAIRO
    cairo_t *cr = c->cr;
    cairo_save(cr);
    cairo_select_font_face(cr, font, CAIRO_FONT_SLANT_NORMAL, bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    double dx = align == CV_LEFT ? 0 : align == CV_CENTRE ? -e.x_advance / 2 : -e.x_advance;
    cairo_translate(cr, x, y);
    if (rot)
        cairo_rotate(cr, -1.5707963267948966);
    cairo_move_to(cr, dx, 0);
    cairo_set_source_rgb(cr, col.r, col.g, col.b);
    cairo_show_text(cr, s);
    cairo_restore(cr);
#else
    (void)font;
#endif
}
