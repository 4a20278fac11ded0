/* SPDX-License-Identifier: Apache-2.0 */
/*
 * attn_io.h -- the tensor files of `ulysses attn` (src/cli/attn_io.c):
 * inputs in .npy or .safetensors (FILE.safetensors:NAME), in the layouts
 * bshd, bhsd and thd, streamed shard by shard; the document offsets of
 * --cu-seqlens; outputs in a chosen element type, as .npy or .safetensors
 * with the run's configuration in __metadata__.
 */
#ifndef ULY_CLI_ATTN_IO_H
#define ULY_CLI_ATTN_IO_H

#include <stddef.h>
#include <stdint.h>

#include "drv.h"

/* --layout: (B, N, H, d), (B, H, N, d), (T, H, d) */
enum { ATTN_BSHD, ATTN_BHSD, ATTN_THD };
extern const char *const attn_layout_names[];  /* "bshd", "bhsd", "thd", NULL */
/* --out-dtype: the uly_elem float types (f16, bf16, f32, f64), then "input" */
enum { ATTN_OUT_INPUT = 4 };
extern const char *const attn_outtype_names[];

/* A spec "FILE.safetensors:NAME" (the part after the last ':' naming no
 * directory, the part before ending in .safetensors): the file into path
 * (cap bytes) and *name the tensor; otherwise the whole spec is the file and
 * *name is NULL.  Returns 1 when the file part does not fit in cap. */
int attn_spec_split(const char *spec, char *path, size_t cap, const char **name);

/* One input tensor, open on rank 0. */
typedef struct attn_in {
    uly_tfile *f;
    int ti;                           /* the tensor in f */
    int layout;
    int64_t shp[4];                   /* (B, N, H, d) as the run sees it */
    int ndim;                         /* the file's dimensions */
    int64_t fshape[ULY_NPY_MAXDIM];
    int elem;                         /* the file's element type */
    char label[1100];                 /* "F", or "F, tensor 'NAME'" for .safetensors: for messages */
    double *tmp;                      /* bhsd: one head's rows of a shard */
    size_t ntmp;
} attn_in;

/* Open input `opt` (e.g. "--q") of the spec (path, name: attn_spec_split):
 * the tensor `name`, else the only one, else the first of the NULL-terminated
 * defaults present; a float tensor of a shape that fits the layout.
 * Failures are recorded in d (exit 2, naming the option, file and tensor). */
int attn_in_open(drv *d, attn_in *in, const char *opt, const char *path, const char *name,
                 const char *const *defaults, int layout);
/* The file's shape as text, e.g. "(2, 8, 300, 32)". */
void attn_in_shape_text(const attn_in *in, char *buf, size_t len);
/* A shape (B, N, H, d) in the layout's order, as text. */
void attn_layout_shape_text(int layout, const int64_t s[4], char *buf, size_t len);
/* Record "OPT FILE has shape (...), expected (...)" for an input whose
 * shape is not want (B, N, H, d); any_h: the heads are free ("Hkv"). bshd
 * keeps the (B, N, H, d) form of 3-D inputs; hint ends the message. */
int attn_in_mismatch(drv *d, const attn_in *in, const char *opt, const int64_t want[4], int any_h, const char *hint);
/* Rows [t0, t0 + nt) of batch row b, as (nt, H, d) doubles. */
int attn_in_read(drv *d, attn_in *in, const char *opt, int64_t b, int64_t t0, int64_t nt, double *dst);
void attn_in_close(attn_in *in);

/* The offsets of --cu-seqlens (spec path, name) or, when path is NULL, the
 * tensor "cu_seqlens" of the open input q (none: *D = 0): 1-D integers
 * 0 ... T, as *offsets (D + 1, drv_free) and *D. */
int attn_cu_seqlens(drv *d, const char *path, const char *name, attn_in *q, int64_t **offsets, int64_t *D);

/* Write an output tensor into o's temporary: .safetensors when o->path ends
 * so (one tensor, tname, with the metadata), else .npy; data of type t in
 * the run's (B, N, H, d) order (bhsd: transposed to (B, H, N, d) here),
 * converted to elem.  tokens: whether it is a token tensor (O, dQ, dK, dV)
 * that follows the layout. */
int attn_out_write(drv *d, drv_out *o, const char *tname, int elem, uly_dtype t, int layout, int tokens, int ndim,
                   const int64_t *shape, const void *data, int nmeta, const char *const *keys,
                   const char *const *vals);
/* The __metadata__ of .safetensors outputs: the configuration that
 * determines the results (method, ranks, causal, window, scale, layout,
 * dtype, kv_heads, docs: each batch row's offsets "0,100,300", rows
 * separated by ';').  Returns the documents' text to drv_free, or NULL. */
enum { ATTN_NMETA = 9 };
typedef struct attn_meta {
    char text[ATTN_NMETA][64];
    const char *keys[ATTN_NMETA], *vals[ATTN_NMETA];
} attn_meta;
char *attn_meta_make(drv *d, attn_meta *m, const char *method, int P, const uly_attn_desc *a, int layout,
                     const int64_t *docs, int64_t ndocs);
/* Whether an output path is written as .safetensors. */
int attn_out_is_st(const char *path);

#endif
