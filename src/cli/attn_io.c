/* SPDX-License-Identifier: Apache-2.0 */
/*
 * attn_io.c -- the tensor files of `ulysses attn` (attn_io.h).
 *
 * Inputs are read through uly_tfile (.npy or .safetensors, any float
 * element type, converted to double exactly), one shard's rows at a time,
 * as load_file in cmd_attn.c asks for them: bshd and thd rows are
 * contiguous in the file; bhsd rows are read head by head (one head's rows
 * of the shard in a small buffer) and interleaved into (rows, H, d).
 * Outputs are written into the temporaries of drv_out (the rule of
 * base_out.c: all or nothing, never over an input), transposed back to the
 * inputs' layout and converted to the requested element type.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_io.h"
#include "base/base_out.h"
#include "cli.h"

const char *const attn_layout_names[] = {"bshd", "bhsd", "thd", NULL};
const char *const attn_outtype_names[] = {"f16", "bf16", "f32", "f64", "input", NULL};

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

int attn_out_is_st(const char *path)
{
    return path && ends_with(path, ".safetensors");
}

int attn_spec_split(const char *spec, char *path, size_t cap, const char **name)
{
    *name = NULL;
    const char *colon = strrchr(spec, ':');
    size_t n = strlen(spec);
    if (colon && !strchr(colon, '/') && colon[1]) {
        size_t k = (size_t)(colon - spec);
        if (k >= 12 && memcmp(colon - 12, ".safetensors", 12) == 0) {
            n = k;
            *name = colon + 1;
        }
    }
    if (n >= cap)
        return 1;
    memcpy(path, spec, n);
    path[n] = '\0';
    return 0;
}

/* The file and, for a .safetensors file, the tensor: "F" or "F, tensor 'q'"
 * (a .npy file's one tensor has the file's base name without ".npy"). */
static void label(const attn_in *in, const char *path, char *buf, size_t len)
{
    const char *tn = uly_tfile_info(in->f, in->ti)->name, *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t k = strlen(tn);
    int npy = uly_tfile_count(in->f) == 1 && strncmp(base, tn, k) == 0 && (!base[k] || strcmp(base + k, ".npy") == 0);
    if (npy)
        snprintf(buf, len, "%s", path);
    else
        snprintf(buf, len, "%s, tensor '%s'", path, tn);
}

/* "a, b, c" (at most len bytes). */
static void names_list(const uly_tfile *f, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int i = 0; i < uly_tfile_count(f); i++) {
        size_t u = strlen(buf);
        snprintf(buf + u, len - u, "%s%s", i ? ", " : "", uly_tfile_info(f, i)->name);
    }
}

static void dims_text(int nd, const int64_t *s, char *buf, size_t len)
{
    size_t u = (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < nd && u < len; i++)
        u += (size_t)snprintf(buf + u, len - u, "%s%lld", i ? ", " : "", (long long)s[i]);
    if (u < len)
        snprintf(buf + u, len - u, nd == 1 ? ",)" : ")");
}

void attn_in_shape_text(const attn_in *in, char *buf, size_t len)
{
    dims_text(in->ndim, in->fshape, buf, len);
}

void attn_layout_shape_text(int layout, const int64_t s[4], char *buf, size_t len)
{
    int64_t v[4] = {s[0], s[1], s[2], s[3]};
    if (layout == ATTN_BHSD) {
        v[1] = s[2];
        v[2] = s[1];
    }
    if (layout == ATTN_THD)
        dims_text(3, s + 1, buf, len);
    else
        dims_text(4, v, buf, len);
}

int attn_in_open(drv *d, attn_in *in, const char *opt, const char *path, const char *name,
                 const char *const *defaults, int layout)
{
    memset(in, 0, sizeof *in);
    in->layout = layout;
    if (uly_tfile_open(path, &in->f))
        return drv_fail(d, DRV_BADINPUT, "%s %s", opt, uly_last_error());
    const int n = uly_tfile_count(in->f);
    char list[512];
    names_list(in->f, list, sizeof list);
    int ti = -1;
    if (name) {
        ti = uly_tfile_find(in->f, name);
        if (ti < 0)
            return drv_fail(d, DRV_BADINPUT, "%s %s: no tensor '%s' (the file holds: %s)", opt, path, name,
                            n ? list : "no tensors");
    } else if (n == 1) {
        ti = 0;
    } else {
        for (int k = 0; defaults[k] && ti < 0; k++)
            ti = uly_tfile_find(in->f, defaults[k]);
        if (ti < 0)
            return drv_fail(d, DRV_BADINPUT, "%s %s: %d tensors and none named '%s': give %s FILE:NAME (the file "
                            "holds: %s)", opt, path, n, defaults[0], opt, n ? list : "no tensors");
    }
    in->ti = ti;
    const uly_tinfo *t = uly_tfile_info(in->f, ti);
    label(in, path, in->label, sizeof in->label);
    const char *lb = in->label;
    in->elem = t->elem;
    in->ndim = t->ndim;
    memcpy(in->fshape, t->shape, sizeof t->shape);
    if (!uly_elem_is_float(t->elem))
        return drv_fail(d, DRV_BADINPUT, "%s %s: dtype %s (integers) where floats (f16, bf16, f32, f64) are expected",
                        opt, lb, uly_elem_name(t->elem));
    const int64_t *s = t->shape;
    if (layout == ATTN_BSHD) {
        if (t->ndim == 3) {
            in->shp[0] = 1;
            memcpy(in->shp + 1, s, 3 * sizeof *s);
        } else if (t->ndim == 4) {
            memcpy(in->shp, s, 4 * sizeof *s);
        } else {
            return drv_fail(d, DRV_BADINPUT, "%s %s: expected shape (B, N, H, d) or (N, H, d), got %d dimensions",
                            opt, lb, t->ndim);
        }
    } else if (layout == ATTN_BHSD) {
        if (t->ndim == 3) {
            int64_t v[4] = {1, s[1], s[0], s[2]};
            memcpy(in->shp, v, sizeof v);
        } else if (t->ndim == 4) {
            int64_t v[4] = {s[0], s[2], s[1], s[3]};
            memcpy(in->shp, v, sizeof v);
        } else {
            return drv_fail(d, DRV_BADINPUT, "%s %s: --layout bhsd expects shape (B, H, N, d) or (H, N, d), got %d "
                            "dimensions", opt, lb, t->ndim);
        }
    } else {
        if (t->ndim != 3)
            return drv_fail(d, DRV_BADINPUT, "%s %s: --layout thd expects shape (T, H, d), got %d dimensions%s", opt,
                            lb, t->ndim, t->ndim == 4 ? " (a (B, N, H, d) tensor is --layout bshd)" : "");
        int64_t v[4] = {1, s[0], s[1], s[2]};
        memcpy(in->shp, v, sizeof v);
    }
    return 0;
}

int attn_in_read(drv *d, attn_in *in, const char *opt, int64_t b, int64_t t0, int64_t nt, double *dst)
{
    const int64_t N = in->shp[1], H = in->shp[2], dd = in->shp[3];
    int st = ULY_OK;
    if (in->layout != ATTN_BHSD) {
        st = uly_tfile_read_f64(in->f, in->ti, (size_t)((b * N + t0) * H * dd), (size_t)(nt * H * dd), dst);
    } else {
        const size_t need = (size_t)(nt * dd);
        if (need > in->ntmp) {
            drv_free(in->tmp);
            in->ntmp = 0;
            if (!(in->tmp = drv_alloc_n(d, need, sizeof *in->tmp, "reading a (B, H, N, d) input")))
                return d->code;
            in->ntmp = need;
        }
        for (int64_t h = 0; h < H && !st; h++) {
            st = uly_tfile_read_f64(in->f, in->ti, (size_t)(((b * H + h) * N + t0) * dd), need, in->tmp);
            for (int64_t t = 0; t < nt && !st; t++)
                memcpy(dst + (size_t)((t * H + h) * dd), in->tmp + (size_t)(t * dd), (size_t)dd * sizeof *dst);
        }
    }
    if (st)
        drv_lib(d, st, st == ULY_EIO || st == ULY_ENOMEM ? DRV_RUNTIME : DRV_BADINPUT, opt);
    return d->code;
}

void attn_in_close(attn_in *in)
{
    uly_tfile_close(in->f);
    drv_free(in->tmp);
    memset(in, 0, sizeof *in);
}

int attn_cu_seqlens(drv *d, const char *path, const char *name, attn_in *q, int64_t **offsets, int64_t *D)
{
    *offsets = NULL;
    *D = 0;
    uly_tfile *f = NULL;
    const char *opt = path ? "--cu-seqlens" : "--q";
    int ti = -1;
    if (path) {
        if (uly_tfile_open(path, &f))
            return drv_fail(d, DRV_BADINPUT, "--cu-seqlens %s", uly_last_error());
        ti = name ? uly_tfile_find(f, name) : uly_tfile_count(f) == 1 ? 0 : uly_tfile_find(f, "cu_seqlens");
        if (ti < 0) {
            char list[512];
            names_list(f, list, sizeof list);
            uly_tfile_close(f);
            return drv_fail(d, DRV_BADINPUT, "--cu-seqlens %s: no tensor '%s' (the file holds: %s)", path,
                            name ? name : "cu_seqlens", list);
        }
    } else {
        f = q->f;
        ti = uly_tfile_find(f, "cu_seqlens");
        if (ti < 0)
            return 0;
    }
    const uly_tinfo *t = uly_tfile_info(f, ti);
    char shp[256];
    dims_text(t->ndim, t->shape, shp, sizeof shp);
    const char *file = path ? path : "(the --q file)";
    if (uly_elem_is_float(t->elem))
        drv_fail(d, DRV_BADINPUT, "%s %s, tensor '%s': dtype %s where integer offsets (i32, i64) are expected", opt,
                 file, t->name, uly_elem_name(t->elem));
    else if (t->ndim != 1 || t->count < 2)
        drv_fail(d, DRV_BADINPUT, "%s %s, tensor '%s': expected 1-D offsets (D+1,) = 0 ... T with D >= 1 sequences, "
                 "got shape %s", opt, file, t->name, shp);
    else if ((*offsets = drv_alloc_n(d, t->count, sizeof **offsets, "the sequence offsets"))) {
        int st = uly_tfile_read_i64(f, ti, 0, t->count, *offsets);
        if (st)
            drv_lib(d, st, st == ULY_EIO || st == ULY_ENOMEM ? DRV_RUNTIME : DRV_BADINPUT, opt);
        else
            *D = (int64_t)t->count - 1;
    }
    if (path)
        uly_tfile_close(f);
    if (d->code) {
        drv_free(*offsets);
        *offsets = NULL;
        *D = 0;
    }
    return d->code;
}

int attn_out_write(drv *d, drv_out *o, const char *tname, int elem, uly_dtype t, int layout, int tokens, int ndim,
                   const int64_t *shape, const void *data, int nmeta, const char *const *keys,
                   const char *const *vals)
{
    if (!o->tmp || o->fd < 0)
        return drv_fail(d, DRV_RUNTIME, "%s %s: not prepared", o->what, o->path);
    const size_t es = uly_dtype_size(t);
    int64_t fs[4];
    const void *src = data;
    void *tr = NULL;
    if (tokens) {
        const int64_t B = shape[0], N = shape[1], H = shape[2], dd = shape[3];
        if (layout == ATTN_BHSD) {
            /* (B, N, H, d) -> (B, H, N, d) */
            tr = drv_alloc_n(d, (size_t)(B * N * H * dd), es, "an output in layout bhsd");
            if (!tr)
                return d->code;
            for (int64_t b = 0; b < B; b++)
                for (int64_t n = 0; n < N; n++)
                    for (int64_t h = 0; h < H; h++)
                        memcpy((char *)tr + (size_t)(((b * H + h) * N + n) * dd) * es,
                               (const char *)data + (size_t)(((b * N + n) * H + h) * dd) * es, (size_t)dd * es);
            src = tr;
            int64_t v[4] = {B, H, N, dd};
            memcpy(fs, v, sizeof v);
        } else if (layout == ATTN_THD) {
            int64_t v[3] = {N, H, dd};
            memcpy(fs, v, sizeof v);
            ndim = 3;
        } else {
            memcpy(fs, shape, 4 * sizeof *fs);
        }
    } else {
        memcpy(fs, shape, (size_t)ndim * sizeof *fs);
    }
    const int run_elem = t == ULY_F64 ? ULY_ELEM_F64 : ULY_ELEM_F32;
    size_t count = 1;
    for (int i = 0; i < ndim; i++)
        count *= (size_t)fs[i];
    /* finite values the narrower type cannot hold become +-Inf (as numpy's
     * astype): never silently */
    const double lim = elem == ULY_ELEM_F16 ? 65520.0 : elem == ULY_ELEM_BF16 ? 0x1.ffp127 : 0;
    size_t over = 0;
    for (size_t i = 0; lim > 0 && i < count; i++) {
        double v = t == ULY_F64 ? ((const double *)src)[i] : ((const float *)src)[i];
        over += isfinite(v) && fabs(v) >= lim;
    }
    if (over)
        drv_say(d, "note: %s %s: %zu of %zu values are beyond the %s range and are written as +-Inf", o->what, o->path,
                over, count, uly_elem_name(elem));
    int st;
    if (attn_out_is_st(o->path)) {
        uly_twrite w = {tname, elem, run_elem, ndim, fs, src};
        st = uly_safetensors_write(o->tmp, 1, &w, nmeta, keys, vals);
    } else if (elem == run_elem) {
        st = uly_npy_write(o->tmp, t, ndim, fs, src);
    } else {
        st = uly_npy_write_as(o->tmp, elem, t, ndim, fs, src);
    }
    drv_free(tr);
    if (st) {
        char note[512];
        return drv_fail(d, st == ULY_EIO ? DRV_RUNTIME : exit_status_of(st), "%s %s: cannot write: %s%s", o->what,
                        o->path, uly_last_error(), uly_out_note(o, note, sizeof note));
    }
    return drv_out_ready(d, o);
}

int attn_in_mismatch(drv *d, const attn_in *in, const char *opt, const int64_t want[4], int any_h, const char *hint)
{
    const char *spec = in->label;
    char got[256], exp[256];
    if (in->layout == ATTN_BSHD) {
        const int64_t *s = in->shp;
        snprintf(got, sizeof got, "(%lld, %lld, %lld, %lld)", (long long)s[0], (long long)s[1], (long long)s[2],
                 (long long)s[3]);
        if (any_h)
            snprintf(exp, sizeof exp, "(%lld, %lld, Hkv, %lld)", (long long)want[0], (long long)want[1],
                     (long long)want[3]);
        else
            snprintf(exp, sizeof exp, "(%lld, %lld, %lld, %lld)", (long long)want[0], (long long)want[1],
                     (long long)want[2], (long long)want[3]);
        return drv_fail(d, DRV_BADINPUT, "%s %s has shape %s, expected %s%s", opt, spec, got, exp, hint);
    }
    attn_in_shape_text(in, got, sizeof got);
    attn_layout_shape_text(in->layout, want, exp, sizeof exp);
    return drv_fail(d, DRV_BADINPUT, "%s %s has shape %s, expected %s%s (--layout %s)%s", opt, spec, got, exp,
                    any_h ? " with any Hkv" : "", attn_layout_names[in->layout], hint);
}

char *attn_meta_make(drv *d, attn_meta *m, const char *method, int P, const uly_attn_desc *a, int layout,
                     const int64_t *docs, int64_t ndocs)
{
    static const char *const k[ATTN_NMETA] = {"method", "ranks", "causal", "window", "scale", "layout", "dtype",
                                              "kv_heads", "docs"};
    snprintf(m->text[0], 64, "%s", method);
    snprintf(m->text[1], 64, "%d", P);
    snprintf(m->text[2], 64, "%s", a->causal ? "true" : "false");
    snprintf(m->text[3], 64, "%lld", (long long)a->window);
    snprintf(m->text[4], 64, "%.17g", uly_attn_scale(a));
    snprintf(m->text[5], 64, "%s", attn_layout_names[layout]);
    snprintf(m->text[6], 64, "%s", a->dtype == ULY_F64 ? "f64" : "f32");
    snprintf(m->text[7], 64, "%lld", (long long)a->kv_heads);
    m->text[8][0] = '\0';
    const size_t n = ndocs > 0 ? (size_t)a->batch * (size_t)(ndocs + 1) : 0;
    char *text = n ? drv_alloc_n(d, n, 22, "the documents' metadata") : NULL;
    if (text) {
        size_t u = 0;
        text[0] = '\0';
        for (size_t i = 0; i < n; i++)
            u += (size_t)snprintf(text + u, n * 22 - u, "%s%lld", i == 0 ? "" : i % (size_t)(ndocs + 1) ? "," : ";",
                                  (long long)docs[i]);
    }
    for (int i = 0; i < ATTN_NMETA; i++) {
        m->keys[i] = k[i];
        m->vals[i] = i == 8 && text ? text : m->text[i];
    }
    return text;
}
