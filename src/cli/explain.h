/* SPDX-License-Identifier: Apache-2.0 */
/*
 * explain.h -- `ulysses explain`: the figure model shared by the text
 * printer (cmd_explain.c) and the renderer (explain_draw.c: SVG directly,
 * PNG and PDF by cairo).
 *
 * A figure is a list of panels.  A panel shows one tensor on every rank as a
 * grid of tokens (x) by heads (y), one band per rank; each block a rank holds
 * is coloured by the rank whose sequence shard its tokens came from, so an
 * all-to-all shows up as stripes of every colour.  Matrices are the P x P
 * send matrices of the collectives.  Everything is filled from the plan
 * layer (uly_split, uly_kv_range, uly_plan_a2a_block, ...); nothing here
 * computes a partition.
 */
#ifndef ULY_CLI_EXPLAIN_H
#define ULY_CLI_EXPLAIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ulysses_infer.h"
#include "ulysses_plan.h"

/* tokens [t0, t0 + tn) x heads [h0, h0 + hn) held by `rank`, tokens from `src` */
typedef struct xp_block {
    int rank, src;
    int64_t t0, tn, h0, hn;
    int replicated;          /* the same heads are also held by another rank */
    int shade;               /* 0 normal; 1 lighter (e.g. partial sums, idle) */
} xp_block;

enum { XP_MAX_PANELS = 8, XP_MAX_MATRICES = 4, XP_MAX_BARS = 2 };

typedef struct xp_panel {
    char title[80];
    char caption[80];        /* under the panel ("(B, N, H_r, d)") */
    char yname[8];           /* "h", "kv", "x" */
    char xname[16];          /* the x axis: "" for tokens, else its name ("partial of rank") */
    int64_t tokens, heads;   /* axes */
    int nblock;
    xp_block *blocks;        /* owned by the figure */
} xp_panel;

typedef struct xp_matrix {
    char title[80];
    int P;
    uint64_t *elems;         /* P x P, [src * P + dst]; owned */
} xp_matrix;

/* Work per rank per step (ring/zigzag): a bar chart. */
typedef struct xp_bars {
    char title[80];
    int P, steps;
    double *work;            /* P x steps; owned */
    int *label;              /* P x steps: the chunk held, or -1; owned (may be NULL) */
} xp_bars;

/*
 * The query x key mask grid (explain_grid.c, from the plan layer): the
 * sequence cut into nb blocks in token order (the method's chunks: the P
 * shards for ulysses, megatron-sp and allgather, the R chunks of the ring,
 * the 2R of zigzag and usp's zigzag), cell [q * nb + k] = queries of block q
 * against keys of block k.  A cell is computed by one group of ranks (a
 * single rank for ring, zigzag and allgather; all P for ulysses and
 * megatron-sp, each for its own heads; the U members of the ring position
 * for usp, each for its heads) at one step; a cell no query of which sees a
 * key of it (pairs == 0) is masked: computed by nobody (group -1, step -1).
 */
enum { XP_FINE_MAX = 256 };  /* token-level mask kept up to this N */

typedef struct xp_cell {
    int group;               /* index into the grid's groups; -1 masked */
    int step;                /* ring step (0 for one-step methods); -1 masked */
    double pairs;            /* visible (query, key) pairs, summed over the batch rows */
} xp_cell;

typedef struct xp_grid {
    int nb;                  /* blocks per axis (0: no grid) */
    int64_t *edge;           /* nb + 1 token boundaries, edge[0] = 0, edge[nb] = N */
    int *owner;              /* nb: the group whose queries (and input K, V) block b is */
    int steps;               /* steps of the method (uly_plan_steps) */
    int ngroup, gsize;       /* groups of gsize ranks */
    int *granks;             /* ngroup x gsize ranks */
    int64_t *gheads;         /* ngroup x gsize: query heads each member computes */
    xp_cell *cell;           /* nb x nb */
    int64_t tokens;          /* N */
    unsigned char *mask;     /* N x N visibility of batch row 0 when N <= XP_FINE_MAX, else NULL */
} xp_grid;

/*
 * A decode step's row of the mask grid (--method dcp|helix): the new query
 * at position `query` against the keys 0..query, as runs of consecutive keys
 * held (and attended) by one rank; a run the mask hides (a window) is not
 * visible.
 */
typedef struct xp_strip_run {
    int rank;
    int64_t begin, count;
    int visible;
} xp_strip_run;

typedef struct xp_strip {
    int64_t query;           /* the new token's position n; -1: no strip */
    int nrun;
    xp_strip_run *run;       /* owned */
} xp_strip;

/* What leads from panel i-1 to panel i: a collective (a solid arrow named by
 * it), local computation (a dashed arrow: no communication), or nothing (the
 * same stage, another tensor). */
enum { XP_ARROW_COLLECTIVE = 0, XP_ARROW_LOCAL = 1, XP_ARROW_NONE = 2 };

typedef struct xp_fig {
    char title[160];
    char subtitle[160];
    int P;
    int npanel, nmatrix, nbars;
    xp_panel panel[XP_MAX_PANELS];
    char arrow[XP_MAX_PANELS][32];   /* label of the arrow into panel i (i >= 1) */
    int arrow_kind[XP_MAX_PANELS];   /* XP_ARROW_*: what leads into panel i */
    xp_matrix matrix[XP_MAX_MATRICES];
    xp_bars bars[XP_MAX_BARS];
    xp_grid grid;
    /* the problem and the method (for --json, --html) */
    uly_attn_desc a;
    uly_sp_plan plan;
    int method;              /* uly_method (ULY_METHOD_MEGATRON_SP included) */
    uly_volume *vol;         /* P per-rank volumes, or NULL (megatron-sp: its matrices); owned */
    /* decode (--method dcp|helix; a.seq = the prompt): the scheme, the cache
     * layout, the tokens generated before the step explained, the per-rank
     * step volumes, the new query's row (no grid) */
    int decode;              /* 1 for a decode figure */
    int scheme;              /* ULY_DECODE_DCP or ULY_DECODE_HELIX */
    uly_kv_layout kv;
    int64_t generate;
    uly_decode_volume *dvol; /* P; owned */
    xp_strip strip;
} xp_fig;

void xp_fig_free(xp_fig *f);

/* Fill f->grid for problem a under plan p of method `method` on P ranks
 * (uly_layout L for ulysses and megatron-sp).  0, or 1 out of memory. */
int xp_grid_fill(xp_grid *g, const uly_attn_desc *a, const uly_sp_plan *p, int method, int P,
                 const uly_layout *L);
void xp_grid_free(xp_grid *g);

/* Render f into the file `file` in the format of path's extension (.svg,
 * .png or .pdf; file is path's temporary, base_out.h).  0 on success; else a
 * message naming path in err and 2 (bad extension) or 1 (drawing failed). */
int xp_draw(const xp_fig *f, const char *path, const char *file, char *err, size_t errlen);

/* The figure as one JSON document (explain_json.c; keys in doc/cli.md), or
 * NULL out of memory.  Needs f->a, f->plan, f->method and f->grid filled. */
struct json_t;
struct json_t *xp_fig_json(const xp_fig *f);
/* The same for a decode figure (f->decode; xp_fig_json calls it). */
struct json_t *xp_decode_json(const xp_fig *f);

/* Write the self-contained page of `ulysses explain --html` to fp: the JSON
 * document doc embedded, rendered by inline script (explain_html.c).  0, or
 * -1 out of memory or a write error. */
int xp_html(FILE *fp, const struct json_t *doc);

/* Whether xp_draw can write .png and .pdf in this build (cairo found by
 * configure); .svg is written without cairo and is always available. */
int xp_draw_available(void);

#endif
