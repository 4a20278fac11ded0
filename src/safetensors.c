/* SPDX-License-Identifier: Apache-2.0 */
/*
 * safetensors.c -- reader and writer of .safetensors files (the format of
 * Hugging Face's safetensors library) for the element types of elem.c.
 *
 * Layout of a file:
 *   bytes 0..7   L, the header length: uint64 little-endian
 *   bytes 8..    L bytes of JSON: an object, tensor name ->
 *                  {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}
 *                and an optional "__metadata__": {"key": "value", ...}
 *                (the reference writer pads it with spaces to a multiple of 8)
 *   then         the data; offsets count from the byte after the header.
 *
 * The reader streams: it reads the 8-byte length, checks it against the
 * file's size, reads and parses the header (jansson) and checks every entry
 * (ulysses_npy.h lists the checks) before anything of the data's size is
 * read or allocated; tensors are then read in whatever slices the caller
 * asks for.  Every message names the file and, where there is one, the
 * tensor.  The writer lays the data out in the order given, contiguous, as
 * the reference reader requires.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elem_impl.h"
#include "internal.h"
#include "tfile_impl.h"

/* The reference implementation refuses larger headers (HeaderTooLarge). */
#define ST_MAX_HEADER 100000000u
#define ST_ALIGN 8

static const char *const st_dtype[ULY_ELEM_COUNT] = { "F16", "BF16", "F32", "F64", "I32", "I64" };

typedef struct st_tensor {
    uly_tinfo info;
    size_t begin, end;    /* byte offsets in the data */
} st_tensor;

struct uly_st {
    int fd;
    char *path;
    size_t data_off;      /* 8 + L */
    int n;
    st_tensor *t;         /* n, in ascending data offset */
    int nmeta;
    char **mkey, **mval;
};

static int st_fail(const char *path, int status, const char *fmt, ...) ULY_PRINTF(3, 4);

static int st_fail(const char *path, int status, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return uly_set_error(status, "%s: %s", path, msg);
}

/* A tensor name (untrusted) made safe to print. */
static void name_text(char *dst, size_t cap, const char *s)
{
    size_t n = strlen(s), keep = n < cap - 1 ? n : cap - 4, i;
    for (i = 0; i < keep; i++)
        dst[i] = ((unsigned char)s[i] >= 0x20 && (unsigned char)s[i] < 0x7f) ? s[i] : '?';
    if (keep < n) {
        memcpy(dst + keep, "...", 3);
        keep += 3;
    }
    dst[keep] = '\0';
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = uly_malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

void uly_st_close(uly_st *st)
{
    if (!st)
        return;
    if (st->fd >= 0)
        close(st->fd);
    for (int i = 0; i < st->n; i++)
        uly_free((char *)st->t[i].info.name);
    for (int i = 0; i < st->nmeta; i++) {
        uly_free(st->mkey[i]);
        uly_free(st->mval[i]);
    }
    uly_free(st->t);
    uly_free(st->mkey);
    uly_free(st->mval);
    uly_free(st->path);
    uly_free(st);
}

/* One entry of the header: name -> {"dtype", "shape", "data_offsets"}. */
static int parse_entry(const uly_st *st, const char *key, json_t *v, size_t dsize, st_tensor *t)
{
    char nm[96];
    name_text(nm, sizeof nm, key);
    const char *p = st->path;
    if (!json_is_object(v))
        return st_fail(p, ULY_EFORMAT, "tensor '%s': the entry is %s, not an object", nm, json_kind(v));
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x) {
        if (strcmp(k, "dtype") && strcmp(k, "shape") && strcmp(k, "data_offsets")) {
            char kn[64];
            name_text(kn, sizeof kn, k);
            return st_fail(p, ULY_EFORMAT, "tensor '%s': unexpected key '%s' (expected dtype, shape, data_offsets)",
                           nm, kn);
        }
    }
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
           *off = json_object_get(v, "data_offsets");
    if (!dt || !sh || !off)
        return st_fail(p, ULY_EFORMAT, "tensor '%s': no '%s' key", nm, !dt ? "dtype" : !sh ? "shape" : "data_offsets");
    if (!json_is_string(dt))
        return st_fail(p, ULY_EFORMAT, "tensor '%s': 'dtype' is %s, not a string", nm, json_kind(dt));
    int elem = -1;
    for (int e = 0; e < ULY_ELEM_COUNT; e++)
        if (strcmp(json_string_value(dt), st_dtype[e]) == 0)
            elem = e;
    if (elem < 0) {
        char dn[40];
        name_text(dn, sizeof dn, json_string_value(dt));
        return st_fail(p, ULY_EFORMAT, "tensor '%s': unsupported dtype '%s' (F16, BF16, F32, F64, I32, I64 are supported)",
                       nm, dn);
    }
    if (!json_is_array(sh))
        return st_fail(p, ULY_EFORMAT, "tensor '%s': 'shape' is %s, not an array", nm, json_kind(sh));
    size_t nd = json_array_size(sh);
    if (nd > ULY_NPY_MAXDIM)
        return st_fail(p, ULY_EFORMAT, "tensor '%s': 'shape' has %zu dimensions, more than %d", nm, nd, ULY_NPY_MAXDIM);
    memset(&t->info, 0, sizeof t->info);
    size_t count = 1, bytes;
    for (size_t i = 0; i < nd; i++) {
        json_t *d = json_array_get(sh, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return st_fail(p, ULY_EFORMAT, "tensor '%s': dimension %zu of 'shape' is not a non-negative integer", nm, i);
        t->info.shape[i] = (int64_t)json_integer_value(d);
        if ((uint64_t)t->info.shape[i] > SIZE_MAX || uly_mul_size(count, (size_t)t->info.shape[i], &count))
            return st_fail(p, ULY_EOVERFLOW, "tensor '%s': its shape's element count overflows size_t", nm);
    }
    if (uly_mul_size(count, uly_elem_size(elem), &bytes))
        return st_fail(p, ULY_EOVERFLOW, "tensor '%s': its size in bytes overflows size_t", nm);
    if (!json_is_array(off) || json_array_size(off) != 2 || !json_is_integer(json_array_get(off, 0)) ||
        !json_is_integer(json_array_get(off, 1)))
        return st_fail(p, ULY_EFORMAT, "tensor '%s': 'data_offsets' is not an array of two integers", nm);
    json_int_t b = json_integer_value(json_array_get(off, 0)), e = json_integer_value(json_array_get(off, 1));
    if (b < 0 || e < b)
        return st_fail(p, ULY_EFORMAT, "tensor '%s': data_offsets [%" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT
                       "] are not an interval", nm, b, e);
    if ((uint64_t)e > dsize)
        return st_fail(p, ULY_EFORMAT, "tensor '%s': data_offsets [%" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT
                       "] lie outside the data (%zu bytes)", nm, b, e, dsize);
    if ((uint64_t)(e - b) != bytes) {
        char shp[ULY_NPY_MAXDIM * 22 + 4];
        size_t n = (size_t)snprintf(shp, sizeof shp, "[");
        for (size_t i = 0; i < nd; i++)
            n += (size_t)snprintf(shp + n, sizeof shp - n, "%s%" PRId64, i ? ", " : "", t->info.shape[i]);
        snprintf(shp + n, sizeof shp - n, "]");
        return st_fail(p, ULY_EFORMAT, "tensor '%s': data_offsets [%" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT
                       "] hold %" JSON_INTEGER_FORMAT " bytes, shape %s of %s needs %zu", nm, b, e, e - b, shp,
                       st_dtype[elem], bytes);
    }
    t->info.elem = elem;
    t->info.ndim = (int)nd;
    t->info.count = count;
    t->begin = (size_t)b;
    t->end = (size_t)e;
    return ULY_OK;
}

static int cmp_tensor(const void *a, const void *b)
{
    const st_tensor *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return strcmp(x->info.name, y->info.name);
}

/* The parsed header root (an object) into st. */
static int parse_root(uly_st *st, json_t *root, size_t dsize)
{
    const char *p = st->path;
    size_t n = json_object_size(root);
    json_t *meta = json_object_get(root, "__metadata__");
    size_t nt = n - (meta ? 1 : 0);
    if (meta) {
        if (!json_is_object(meta))
            return st_fail(p, ULY_EFORMAT, "'__metadata__' is %s, not an object of strings", json_kind(meta));
        size_t nm = json_object_size(meta);
        st->mkey = uly_calloc(nm ? nm : 1, sizeof *st->mkey);
        st->mval = uly_calloc(nm ? nm : 1, sizeof *st->mval);
        if (!st->mkey || !st->mval)
            return st_fail(p, ULY_ENOMEM, "out of memory reading the header");
        const char *k;
        json_t *v;
        json_object_foreach(meta, k, v) {
            if (!json_is_string(v)) {
                char kn[64];
                name_text(kn, sizeof kn, k);
                return st_fail(p, ULY_EFORMAT, "'__metadata__' value of '%s' is %s, not a string", kn, json_kind(v));
            }
            st->mkey[st->nmeta] = dup_str(k);
            st->mval[st->nmeta] = dup_str(json_string_value(v));
            st->nmeta++;
            if (!st->mkey[st->nmeta - 1] || !st->mval[st->nmeta - 1])
                return st_fail(p, ULY_ENOMEM, "out of memory reading the header");
        }
    }
    if (nt > (size_t)INT32_MAX)
        return st_fail(p, ULY_EFORMAT, "too many tensors (%zu)", nt);
    st->t = uly_calloc(nt ? nt : 1, sizeof *st->t);
    if (!st->t)
        return st_fail(p, ULY_ENOMEM, "out of memory reading the header");
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        if (strcmp(k, "__metadata__") == 0)
            continue;
        st_tensor *t = &st->t[st->n];
        int rc = parse_entry(st, k, v, dsize, t);
        if (rc)
            return rc;
        t->info.name = dup_str(k);
        if (!t->info.name)
            return st_fail(p, ULY_ENOMEM, "out of memory reading the header");
        st->n++;
    }
    qsort(st->t, (size_t)st->n, sizeof *st->t, cmp_tensor);
    /* sorted by begin: a tensor overlaps another one iff it overlaps the
     * furthest-reaching one before it */
    int far = -1;
    for (int i = 0; i < st->n; i++) {
        if (far >= 0 && st->t[far].end > st->t[i].begin && st->t[i].end > st->t[i].begin) {
            char a[96], b[96];
            name_text(a, sizeof a, st->t[far].info.name);
            name_text(b, sizeof b, st->t[i].info.name);
            return st_fail(p, ULY_EFORMAT, "tensors '%s' (bytes [%zu, %zu)) and '%s' (bytes [%zu, %zu)) overlap", a,
                           st->t[far].begin, st->t[far].end, b, st->t[i].begin, st->t[i].end);
        }
        if (far < 0 || st->t[i].end > st->t[far].end)
            far = i;
    }
    return ULY_OK;
}

int uly_st_open_fd(int fd, const char *path, size_t total, uly_st **out)
{
    *out = NULL;
    uly_st *st = uly_calloc(1, sizeof *st);
    char *pcopy = st ? dup_str(path) : NULL;
    if (!pcopy) {
        close(fd);
        uly_free(st);
        return st_fail(path, ULY_ENOMEM, "out of memory opening the file");
    }
    st->fd = fd;
    st->path = pcopy;
    unsigned char lb[8], peek = 0;
    size_t got;
    int rc = ULY_OK;
    if (total < 8)
        rc = st_fail(path, ULY_EFORMAT, "truncated safetensors header: the file has %zu bytes, the header length "
                     "alone needs 8", total);
    int k = rc ? 0 : uly_tensor_read_at(fd, lb, 8, 0, &got);
    if (!rc && k)
        rc = k < 0 ? st_fail(path, ULY_EIO, "read error: %s", strerror(errno))
                   : st_fail(path, ULY_EFORMAT, "the file shrank while it was read");
    uint64_t L = 0;
    for (int i = 7; i >= 0 && !rc; i--)
        L = L << 8 | lb[i];
    if (!rc && total > 8) {
        k = uly_tensor_read_at(fd, &peek, 1, 8, &got);
        if (k)
            rc = k < 0 ? st_fail(path, ULY_EIO, "read error: %s", strerror(errno))
                       : st_fail(path, ULY_EFORMAT, "the file shrank while it was read");
    }
    if (!rc && L > total - 8) {
        /* A header the file cut short starts as one ('{') and declares a
         * length a header can have; anything else is a length beyond the file. */
        if (L <= ST_MAX_HEADER && (total == 8 || peek == '{'))
            rc = st_fail(path, ULY_EFORMAT, "truncated safetensors header: it declares %" PRIu64 " bytes of JSON, "
                         "the file holds %zu after the 8-byte length", L, total - 8);
        else
            rc = st_fail(path, ULY_EFORMAT, "safetensors header length %" PRIu64 " is beyond the file (%zu bytes)%s",
                         L, total, peek == '{' ? "" : " (is it a .safetensors file?)");
    }
    if (!rc && L < 2)
        rc = st_fail(path, ULY_EFORMAT, "safetensors header length %" PRIu64 " is too small for a JSON object", L);
    if (!rc && L > ST_MAX_HEADER)
        rc = st_fail(path, ULY_EFORMAT, "safetensors header of %" PRIu64 " bytes: headers larger than %u bytes are "
                     "refused", L, ST_MAX_HEADER);
    char *hdr = NULL;
    if (!rc && !(hdr = uly_malloc((size_t)L)))
        rc = st_fail(path, ULY_ENOMEM, "out of memory: cannot allocate %" PRIu64 " bytes for the header", L);
    if (!rc) {
        k = uly_tensor_read_at(fd, hdr, (size_t)L, 8, &got);
        if (k)
            rc = k < 0 ? st_fail(path, ULY_EIO, "read error in the header: %s", strerror(errno))
                       : st_fail(path, ULY_EFORMAT, "the file shrank while it was read");
    }
    json_t *root = NULL;
    if (!rc) {
        json_error_t err;
        root = json_loadb(hdr, (size_t)L, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &err);
        if (!root)
            rc = st_fail(path, ULY_EFORMAT, "safetensors header is not valid JSON: %s (line %d, column %d)", err.text,
                         err.line, err.column);
        else if (!json_is_object(root))
            rc = st_fail(path, ULY_EFORMAT, "safetensors header is %s, not a JSON object", json_kind(root));
    }
    uly_free(hdr);
    st->data_off = 8 + (size_t)L;
    if (!rc)
        rc = parse_root(st, root, total - st->data_off);
    json_decref(root);
    if (rc) {
        uly_st_close(st);
        return rc;
    }
    *out = st;
    return ULY_OK;
}

int uly_st_count(const uly_st *st)
{
    return st->n;
}

const uly_tinfo *uly_st_info(const uly_st *st, int i)
{
    return i >= 0 && i < st->n ? &st->t[i].info : NULL;
}

const char *uly_st_meta(const uly_st *st, const char *key)
{
    for (int i = 0; key && i < st->nmeta; i++)
        if (strcmp(st->mkey[i], key) == 0)
            return st->mval[i];
    return NULL;
}

int uly_st_raw(uly_st *st, int i, size_t first, size_t count, void *dst)
{
    const st_tensor *t = &st->t[i];
    size_t es = uly_elem_size(t->info.elem);
    if (count == 0)
        return ULY_OK;
    size_t off = st->data_off + t->begin + first * es, got;
    int k = uly_tensor_read_at(st->fd, dst, count * es, off, &got);
    if (k < 0)
        return st_fail(st->path, ULY_EIO, "read error at byte %zu: %s", off + got, strerror(errno));
    if (k > 0)
        return st_fail(st->path, ULY_EFORMAT, "the file shrank while it was read (it ends at byte %zu)", off + got);
    if (!uly_host_little_endian())
        uly_swap_bytes(dst, count, es);
    return ULY_OK;
}

/* ---------------------------------------------------------------- writer */

int uly_safetensors_write(const char *path, int n, const uly_twrite *t, int nmeta, const char *const *keys,
                          const char *const *values)
{
    if (!path || n < 0 || (n && !t) || nmeta < 0 || (nmeta && (!keys || !values)))
        return uly_set_error(ULY_EINVAL, "uly_safetensors_write: NULL or negative argument");
    json_t *root = json_object();
    json_t *meta = nmeta ? json_object() : NULL;
    int rc = root && (meta || !nmeta) ? ULY_OK : uly_set_error(ULY_ENOMEM, "%s: out of memory", path);
    if (meta && !rc) {
        for (int i = 0; i < nmeta && !rc; i++)
            if (!keys[i] || !values[i] || json_object_set_new(meta, keys[i], json_string(values[i])))
                rc = uly_set_error(ULY_EINVAL, "uly_safetensors_write: %s: metadata %d is not a valid UTF-8 string pair",
                                   path, i);
        if (!rc && json_object_set(root, "__metadata__", meta))
            rc = uly_set_error(ULY_ENOMEM, "%s: out of memory", path);
    }
    size_t off = 0;
    size_t *bytes = rc ? NULL : uly_calloc(n ? (size_t)n : 1, sizeof *bytes);
    if (!rc && !bytes)
        rc = uly_set_error(ULY_ENOMEM, "%s: out of memory", path);
    for (int i = 0; i < n && !rc; i++) {
        const uly_twrite *w = &t[i];
        size_t es = uly_elem_size(w->elem), count = 1;
        if (!w->name || strcmp(w->name, "__metadata__") == 0 || json_object_get(root, w->name))
            rc = uly_set_error(ULY_EINVAL, "uly_safetensors_write: %s: tensor %d's name is missing, repeated or "
                               "'__metadata__'", path, i);
        else if (!es || (w->src != ULY_ELEM_F32 && w->src != ULY_ELEM_F64 && w->src != ULY_ELEM_I32 &&
                         w->src != ULY_ELEM_I64))
            rc = uly_set_error(ULY_EINVAL, "uly_safetensors_write: %s: tensor '%s': element types %d -> %d", path,
                               w->name, w->src, w->elem);
        else if (w->ndim < 0 || w->ndim > ULY_NPY_MAXDIM || (w->ndim && !w->shape))
            rc = uly_set_error(ULY_EINVAL, "uly_safetensors_write: %s: tensor '%s': ndim %d", path, w->name, w->ndim);
        json_t *shape = rc ? NULL : json_array();
        for (int d = 0; d < w->ndim && !rc; d++) {
            if (w->shape[d] < 0 || uly_mul_size(count, (size_t)w->shape[d], &count))
                rc = uly_set_error(ULY_EINVAL, "uly_safetensors_write: %s: tensor '%s': bad dimension %d", path,
                                   w->name, d);
            else
                json_array_append_new(shape, json_integer(w->shape[d]));
        }
        if (!rc && (uly_mul_size(count, es, &bytes[i]) || (count && !w->data)))
            rc = uly_set_error(ULY_EINVAL, "uly_safetensors_write: %s: tensor '%s': too large or no data", path,
                               w->name);
        if (!rc) {
            json_t *e = json_pack("{s:s, s:O, s:[I, I]}", "dtype", st_dtype[w->elem], "shape", shape, "data_offsets",
                                  (json_int_t)off, (json_int_t)(off + bytes[i]));
            if (!e || json_object_set_new(root, w->name, e))
                rc = uly_set_error(ULY_EINVAL, "uly_safetensors_write: %s: tensor %d's name is not valid UTF-8",
                                   path, i);
            off += bytes[i];
        }
        json_decref(shape);
    }
    /* a conversion to an integer type can fail: checked before the file is touched */
    unsigned char tmp[4096];
    const size_t chunk = sizeof tmp / 8;
    for (int i = 0; i < n && !rc; i++) {
        const uly_twrite *w = &t[i];
        size_t ss = uly_elem_size(w->src), count = bytes[i] / uly_elem_size(w->elem);
        if (w->src != w->elem && !uly_elem_is_float(w->elem))
            for (size_t j = 0; j < count && !rc; j += chunk) {
                size_t k = count - j < chunk ? count - j : chunk;
                if (uly_elem_convert(w->src, (const unsigned char *)w->data + j * ss, k, w->elem, tmp))
                    rc = uly_set_error(ULY_EINVAL, "uly_safetensors_write: %s: tensor '%s': %s", path, w->name,
                                       "an element is not representable in its type");
            }
    }
    char *text = rc ? NULL : json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!rc && !text)
        rc = uly_set_error(ULY_ENOMEM, "%s: out of memory", path);
    json_decref(meta);
    json_decref(root);
    FILE *f = NULL;
    if (!rc && !(f = fopen(path, "wb")))
        rc = st_fail(path, ULY_EIO, "cannot open for writing: %s", strerror(errno));
    int e = 0;
    if (!rc) {
        size_t L = strlen(text), pad = (ST_ALIGN - (8 + L) % ST_ALIGN) % ST_ALIGN;
        unsigned char lb[8];
        for (int i = 0; i < 8; i++)
            lb[i] = (unsigned char)((uint64_t)(L + pad) >> (8 * i));
        errno = 0;
        if (fwrite(lb, 1, 8, f) != 8 || fwrite(text, 1, L, f) != L)
            e = errno ? errno : EIO;
        for (size_t i = 0; i < pad && !e; i++)
            if (fputc(' ', f) == EOF)
                e = errno ? errno : EIO;
        for (int i = 0; i < n && !e; i++) {
            const uly_twrite *w = &t[i];
            size_t ss = uly_elem_size(w->src), es = uly_elem_size(w->elem), count = bytes[i] / es;
            for (size_t j = 0; j < count && !e; j += chunk) {
                size_t k = count - j < chunk ? count - j : chunk;
                uly_elem_convert(w->src, (const unsigned char *)w->data + j * ss, k, w->elem, tmp);
                if (!uly_host_little_endian())
                    uly_swap_bytes(tmp, k, es);
                if (fwrite(tmp, 1, k * es, f) != k * es)
                    e = errno ? errno : EIO;
            }
        }
        if (!e && fflush(f) != 0)
            e = errno ? errno : EIO;
        if (fclose(f) != 0 && !e)
            e = errno ? errno : EIO;
        if (e)
            rc = st_fail(path, ULY_EIO, "write error: %s", strerror(e));
    }
    free(text);
    uly_free(bytes);
    return rc;
}
