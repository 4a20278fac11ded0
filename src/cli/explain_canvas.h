/* SPDX-License-Identifier: Apache-2.0 */
/*
 * explain_canvas.h -- the few drawing operations of `ulysses explain`'s
 * figures (explain_draw.c) with two backends: a direct SVG writer (real
 * <text> elements: searchable, readable aloud; grid cells carry data-*
 * attributes and a <title>) and cairo for PNG and PDF.  One layout for both:
 * nothing measures text, alignment is the backend's (text-anchor, or cairo's
 * extents).  Output is reproducible: fixed number formats, no dates.
 */
#ifndef ULY_CLI_EXPLAIN_CANVAS_H
#define ULY_CLI_EXPLAIN_CANVAS_H

#include <stdio.h>

typedef struct cv_rgb {
    double r, g, b;
} cv_rgb;

/* CV_NONE draws nothing: a pass that only measures the layout */
enum { CV_SVG = 0, CV_PNG = 1, CV_PDF = 2, CV_NONE = 3 };
enum { CV_LEFT = 0, CV_CENTRE = 1, CV_RIGHT = 2 };

typedef struct cv {
    int kind;     /* CV_* */
    FILE *svg;    /* CV_SVG */
    void *cr;     /* cairo_t * (CV_PNG, CV_PDF) */
    void *surf;   /* cairo_surface_t * */
    const char *file;
} cv;

/* Open a canvas of W x H points on `file` (kind CV_*); 0, else a message in
 * err and 1 (cannot write, or no cairo for PNG / PDF). */
int cv_open(cv *c, int kind, const char *file, double W, double H, char *err, size_t errlen);
/* Finish and close; 0, else a message in err and 1. */
int cv_close(cv *c, char *err, size_t errlen);

/* A rectangle: fill (NULL: none), stroke (NULL: none) of width lw; attrs
 * (SVG only, NULL: none) are extra attributes ("data-q=\"1\""), title (SVG
 * only) a <title> child. */
void cv_rect(cv *c, double x, double y, double w, double h, const cv_rgb *fill, const cv_rgb *stroke, double lw,
             const char *attrs, const char *title);
/* A polyline through n points xy[2i], xy[2i+1]; dashed when dash > 0. */
void cv_line(cv *c, const double *xy, int n, cv_rgb col, double lw, double dash);
/* A filled polygon. */
void cv_poly(cv *c, const double *xy, int n, cv_rgb fill);
/* Text at baseline y, aligned CV_LEFT / CV_CENTRE / CV_RIGHT on x; rot:
 * turned a quarter anticlockwise (reads upwards) about (x, y). */
void cv_text(cv *c, double x, double y, double size, int bold, int align, int rot, cv_rgb col, const char *s);

#endif
