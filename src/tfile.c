/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tfile.c -- one streaming reader over .npy and .safetensors files
 * (uly_tfile, ulysses_npy.h), converting elements as they are read.
 *
 * The format is chosen by the first bytes: the .npy magic, else
 * safetensors -- except that a file whose name ends in ".npy" without the
 * magic gets the .npy reader's message, which says what is missing.
 * Conversions happen in the caller's buffer (it holds count elements of the
 * wider type), so reading allocates nothing of the data's size.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "elem_impl.h"
#include "internal.h"
#include "tfile_impl.h"

struct uly_tfile {
    uly_npy_reader *npy;      /* one of the two */
    uly_st *st;
    uly_tinfo info;           /* .npy: the one tensor */
    char *name;               /* its name */
    char *path;
};

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

int uly_tfile_open(const char *path, uly_tfile **out)
{
    if (!path || !out)
        return uly_set_error(ULY_EINVAL, "uly_tfile_open: NULL argument");
    *out = NULL;
    int fd;
    size_t total;
    int rc = uly_tensor_open(path, ends_with(path, ".safetensors") ? ".safetensors" : ".npy", &fd, &total);
    if (rc)
        return rc;
    unsigned char magic[6] = { 0 };
    size_t got;
    int k = uly_tensor_read_at(fd, magic, total < 6 ? total : 6, 0, &got);
    if (k) {
        close(fd);
        return uly_set_error(k < 0 ? ULY_EIO : ULY_EFORMAT, "%s: cannot read the file's first bytes", path);
    }
    uly_tfile *f = uly_calloc(1, sizeof *f);
    size_t plen = strlen(path) + 1;
    f ? (void)(f->path = uly_malloc(plen)) : (void)0;
    if (!f || !f->path) {
        close(fd);
        uly_free(f);
        return uly_set_error(ULY_ENOMEM, "%s: out of memory opening the file", path);
    }
    memcpy(f->path, path, plen);
    int is_npy = memcmp(magic, "\x93NUMPY", got < 6 ? got : 6) == 0 && got > 0;
    if (is_npy || ends_with(path, ".npy")) {
        uly_npy h;
        rc = uly_npy_open_fd(fd, path, total, &h, &f->npy);
        if (!rc) {
            /* the name: the base name without ".npy" */
            const char *b = strrchr(path, '/');
            b = b ? b + 1 : path;
            size_t n = strlen(b);
            if (ends_with(b, ".npy"))
                n -= 4;
            f->name = uly_malloc(n + 1);
            if (!f->name)
                rc = uly_set_error(ULY_ENOMEM, "%s: out of memory opening the file", path);
            else {
                memcpy(f->name, b, n);
                f->name[n] = '\0';
                f->info.name = f->name;
                f->info.elem = h.elem;
                f->info.ndim = h.ndim;
                memcpy(f->info.shape, h.shape, sizeof h.shape);
                f->info.count = h.count;
            }
        }
    } else
        rc = uly_st_open_fd(fd, path, total, &f->st);
    if (rc) {
        uly_tfile_close(f);
        return rc;
    }
    *out = f;
    return ULY_OK;
}

int uly_tfile_count(const uly_tfile *f)
{
    return !f ? 0 : f->st ? uly_st_count(f->st) : 1;
}

const uly_tinfo *uly_tfile_info(const uly_tfile *f, int i)
{
    if (!f)
        return NULL;
    if (f->st)
        return uly_st_info(f->st, i);
    return i == 0 ? &f->info : NULL;
}

int uly_tfile_find(const uly_tfile *f, const char *name)
{
    int n = uly_tfile_count(f);
    for (int i = 0; name && i < n; i++)
        if (strcmp(uly_tfile_info(f, i)->name, name) == 0)
            return i;
    return -1;
}

const char *uly_tfile_meta(const uly_tfile *f, const char *key)
{
    return f && f->st ? uly_st_meta(f->st, key) : NULL;
}

/* Tensor i's elements [first, first + count) into dst, converted to type
 * `to` (dst holds count elements of the larger of the two types). */
static int tfile_read(uly_tfile *f, int i, size_t first, size_t count, void *dst, int to, const char *fn)
{
    if (!f || (count && !dst))
        return uly_set_error(ULY_EINVAL, "%s: NULL argument", fn);
    const uly_tinfo *t = uly_tfile_info(f, i);
    if (!t)
        return uly_set_error(ULY_EINVAL, "%s: %s: no tensor %d", fn, f->path, i);
    if (first > t->count || count > t->count - first)
        return uly_set_error(ULY_EINVAL, "%s: tensor '%s': elements [%zu, %zu + %zu) are outside its %zu", f->path,
                             t->name, first, first, count, t->count);
    if (to != ULY_ELEM_F64 && uly_elem_is_float(t->elem) != uly_elem_is_float(to))
        return uly_set_error(ULY_EINVAL, "%s: tensor '%s' holds %s, where %s are expected", f->path, t->name,
                             uly_elem_name(t->elem), uly_elem_is_float(to) ? "floats" : "integers");
    int rc = f->st ? uly_st_raw(f->st, i, first, count, dst) : uly_npy_reader_raw(f->npy, first, count, dst);
    if (rc)
        return rc;
    rc = uly_elem_convert(t->elem, dst, count, to, dst);
    if (rc)
        return uly_set_error(rc, "%s: tensor '%s': element %zu and following: not exactly %s", f->path, t->name,
                             first, uly_elem_name(to));
    return ULY_OK;
}

int uly_tfile_read_f64(uly_tfile *f, int i, size_t first, size_t count, double *dst)
{
    return tfile_read(f, i, first, count, dst, ULY_ELEM_F64, "uly_tfile_read_f64");
}

int uly_tfile_read_f32(uly_tfile *f, int i, size_t first, size_t count, float *dst)
{
    /* an f64 tensor is read into a float buffer half its size: through a
     * small buffer, rounded to nearest */
    const uly_tinfo *t = uly_tfile_info(f, i);
    if (t && t->elem == ULY_ELEM_F64 && count) {
        double tmp[512];
        for (size_t j = 0; j < count; j += 512) {
            size_t k = count - j < 512 ? count - j : 512;
            int rc = tfile_read(f, i, first + j, k, tmp, ULY_ELEM_F64, "uly_tfile_read_f32");
            if (rc)
                return rc;
            for (size_t m = 0; m < k; m++)
                dst[j + m] = uly_f32_from_f64(tmp[m]);
        }
        return ULY_OK;
    }
    return tfile_read(f, i, first, count, dst, ULY_ELEM_F32, "uly_tfile_read_f32");
}

int uly_tfile_read_i64(uly_tfile *f, int i, size_t first, size_t count, int64_t *dst)
{
    return tfile_read(f, i, first, count, dst, ULY_ELEM_I64, "uly_tfile_read_i64");
}

void uly_tfile_close(uly_tfile *f)
{
    if (!f)
        return;
    uly_npy_reader_close(f->npy);
    uly_st_close(f->st);
    uly_free(f->name);
    uly_free(f->path);
    uly_free(f);
}
