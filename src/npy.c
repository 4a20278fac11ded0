/* SPDX-License-Identifier: Apache-2.0 */
/*
 * npy.c -- reader and writer of NumPy .npy files for float16 / float32 /
 * float64 (and int32 / int64) arrays in C order.
 *
 * What this is for: moving test tensors (Q, K, V, reference outputs)
 * between numpy and the library.  What it is not: a general .npy library.
 * Only little-endian '<f2', '<f4' and '<f8' (the float readers; '<f2' is
 * converted to float32 on read, exactly), '<i8' (uly_npy_read_i64), and
 * '<i4' too through uly_tfile; C order, at most ULY_NPY_MAXDIM
 * dimensions; everything else is rejected with a message that says why.
 *
 * Layout of a .npy file (numpy.lib.format):
 *   bytes 0..5   "\x93NUMPY"
 *   bytes 6, 7   major, minor version (1.0, 2.0 or 3.0)
 *   then         header length: uint16 LE (1.0) or uint32 LE (2.0, 3.0)
 *   then         header: a Python dict literal such as
 *                  {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 *                padded with spaces and ended by '\n'
 *   then         the data, count * elemsize bytes, nothing after it.
 *
 * The parser never reads outside [buf, buf + len), allocates only after the
 * file size has been checked against the shape (so a header cannot ask for
 * more memory than the file holds), does not recurse and runs in time linear
 * in len.  It is the target of fuzz/fuzz_npy.c.
 *
 * Files are read by streaming (uly_npy_reader_*): the type of the open file
 * is checked first (a directory, FIFO, device or socket is refused by name,
 * and opening a FIFO does not wait for a writer), then the 10- or 12-byte
 * preamble, then the header (at most NPY_MAX_HEADER bytes, and never more
 * than the file holds), then the data size the shape declares against the
 * file size -- all before any allocation of the data's size.  The data is
 * then read in whatever slices the caller asks for.  uly_npy_read is that
 * reader reading everything.
 *
 * Independent of config.h: POSIX I/O, the C standard library and internal.h.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elem_impl.h"
#include "internal.h"
#include "tfile_impl.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_ALIGN 64
/* numpy leaves room for shape[0] to grow to this many digits (np.save since
 * numpy 1.24); the writer does the same so its files match np.save's. */
#define NPY_GROWTH_DIGITS 21
/* The streaming reader refuses larger headers (numpy's own np.load refuses
 * headers above 10000 bytes unless told otherwise). */
#define NPY_MAX_HEADER (1 << 20)

/* ------------------------------------------------------------ small helpers */

/* 64-bit signed integers ('<i8'): a dtype of this file only, which the
 * float readers refuse and uly_npy_read_i64 requires; and 32-bit ones
 * ('<i4'), which only uly_tfile reads. */
#define NPY_I64 ((uly_dtype)2)
#define NPY_I32 ((uly_dtype)3)

/* What a reader accepts: floats ('<f2', '<f4', '<f8'), 64-bit integers
 * ('<i8'), or every type of the file (uly_tfile). */
enum { NPY_FLOATS, NPY_INTS, NPY_ANY };

static size_t elem_size(uly_dtype t)
{
    return t == ULY_F32 || t == NPY_I32 ? 4 : t == ULY_F64 || t == NPY_I64 ? 8 : 0;
}

/* The descr of a file element type ('<f2' ... '<i8'; NULL for bf16). */
static const char *elem_descr(int elem)
{
    static const char *const d[ULY_ELEM_COUNT] = { "<f2", NULL, "<f4", "<f8", "<i4", "<i8" };
    return elem >= 0 && elem < ULY_ELEM_COUNT ? d[elem] : NULL;
}

/* Copy n bytes of untrusted text into dst (capacity cap >= 4) so that it is
 * safe to print: non-printable bytes become '?', long text ends in "...". */
static void printable(char *dst, size_t cap, const unsigned char *s, size_t n)
{
    size_t keep = n < cap - 1 ? n : cap - 4;
    for (size_t i = 0; i < keep; i++)
        dst[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? (char)s[i] : '?';
    if (keep < n) {
        memcpy(dst + keep, "...", 3);
        keep += 3;
    }
    dst[keep] = '\0';
}

/* "(2, 3)", "(3,)" or "()" as numpy's repr writes a shape tuple. */
static void shape_text(char *dst, size_t cap, int ndim, const int64_t *shape)
{
    size_t n = 0;
    n += (size_t)snprintf(dst, cap, "(");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(dst + n, cap - n, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (n < cap)
        snprintf(dst + n, cap - n, ndim == 1 ? ",)" : ")");
}

/* Record an error for uly_last_error(), prefixed with "src: " when src (the
 * file name) is not NULL, and return status. */
static int npy_fail(const char *src, int status, const char *fmt, ...) ULY_PRINTF(3, 4);

static int npy_fail(const char *src, int status, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (src)
        return uly_set_error(status, "%s: %s", src, msg);
    return uly_set_error(status, "%s", msg);
}

/* Number of elements of a shape and its size in bytes.  Like numpy, a zero
 * dimension gives count 0 but the other dimensions must still multiply
 * without overflow.  Returns 0, or 1 on overflow. */
static int shape_size(int ndim, const int64_t *shape, size_t es, size_t *count, size_t *nbytes)
{
    size_t p = 1, bytes;
    int zero = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 0) {
            zero = 1;
            continue;
        }
        if ((uint64_t)shape[i] > SIZE_MAX || uly_mul_size(p, (size_t)shape[i], &p))
            return 1;
    }
    if (uly_mul_size(p, es, &bytes))
        return 1;
    *count = zero ? 0 : p;
    *nbytes = zero ? 0 : bytes;
    return 0;
}

/* ----------------------------------------------------------- header parser */

/* The header text [p, end); base is the file offset of the header's first
 * byte so that messages can name the byte where parsing stopped. */
typedef struct cursor {
    const unsigned char *p, *begin, *end;
    size_t base;
    const char *src;
    const char *want;   /* the dtypes the caller accepts, for messages */
    int mode;           /* NPY_FLOATS, NPY_INTS, NPY_ANY */
} cursor;

enum { KEY_DESCR, KEY_FORTRAN, KEY_SHAPE, NKEYS };
static const char *const key_name[NKEYS] = { "descr", "fortran_order", "shape" };

static size_t cur_pos(const cursor *c)
{
    return c->base + (size_t)(c->p - c->begin);
}

static int cur_fail(const cursor *c, const char *what)
{
    return npy_fail(c->src, ULY_EFORMAT, "malformed .npy header at byte %zu: %s", cur_pos(c), what);
}

/* Python whitespace inside a bracketed expression. */
static int is_space(unsigned char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v';
}

static int is_digit(unsigned char ch)
{
    return ch >= '0' && ch <= '9';
}

static int is_ident(unsigned char ch)
{
    return is_digit(ch) || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch >= 0x80;
}

static void skip_space(cursor *c)
{
    while (c->p < c->end && is_space(*c->p))
        c->p++;
}

static int at(const cursor *c, unsigned char ch)
{
    return c->p < c->end && *c->p == ch;
}

/* A quoted string without escapes: '...' or "...".  *s, *n: its contents. */
static int parse_string(cursor *c, const unsigned char **s, size_t *n, const char *what)
{
    char msg[128];
    if (!at(c, '\'') && !at(c, '"')) {
        snprintf(msg, sizeof msg, "expected %s (a quoted string)", what);
        return cur_fail(c, msg);
    }
    unsigned char q = *c->p++;
    const unsigned char *start = c->p;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\')
            return cur_fail(c, "escape sequences in strings are not supported");
        if (*c->p == '\n' || *c->p == '\r')
            return cur_fail(c, "unterminated string");
        c->p++;
    }
    if (c->p == c->end)
        return cur_fail(c, "unterminated string");
    *s = start;
    *n = (size_t)(c->p - start);
    c->p++;
    return ULY_OK;
}

static int parse_key(cursor *c, int *key)
{
    const unsigned char *s;
    size_t n;
    const unsigned char *at_key = c->p;
    int st = parse_string(c, &s, &n, "a key or '}'");
    if (st)
        return st;
    for (int k = 0; k < NKEYS; k++)
        if (n == strlen(key_name[k]) && memcmp(s, key_name[k], n) == 0) {
            *key = k;
            return ULY_OK;
        }
    char name[40];
    printable(name, sizeof name, s, n);
    c->p = at_key;
    return npy_fail(c->src, ULY_EFORMAT,
                    "malformed .npy header at byte %zu: unexpected key '%s' "
                    "(expected 'descr', 'fortran_order', 'shape')", cur_pos(c), name);
}

/* *dtype: the type the data reads as (ULY_F32 for '<f2'), *elem: the
 * file's element type. */
static int parse_descr(cursor *c, uly_dtype *dtype, int *elem)
{
    const unsigned char *s;
    size_t n;
    if (!at(c, '\'') && !at(c, '"'))
        return cur_fail(c, "'descr' must be a string such as '<f4' (structured dtypes are not supported)");
    int st = parse_string(c, &s, &n, "the value of 'descr'");
    if (st)
        return st;
    /* the 64-bit integer reader knows the float types only to name them */
    static const struct {
        const char *descr;
        uly_dtype dtype;
        int elem, ints_knows;
    } known[] = { { "<f4", ULY_F32, ULY_ELEM_F32, 1 }, { "<f8", ULY_F64, ULY_ELEM_F64, 1 },
                  { "<i8", NPY_I64, ULY_ELEM_I64, 1 }, { "<f2", ULY_F32, ULY_ELEM_F16, 0 },
                  { "<i4", NPY_I32, ULY_ELEM_I32, 0 } };
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) {
        if (n != 3 || memcmp(s, known[k].descr, 3) != 0)
            continue;
        if ((c->mode == NPY_INTS && !known[k].ints_knows) || (c->mode == NPY_FLOATS && known[k].elem == ULY_ELEM_I32))
            break;
        *dtype = known[k].dtype;
        *elem = known[k].elem;
        return ULY_OK;
    }
    char name[40];
    printable(name, sizeof name, s, n);
    if (n > 0 && s[0] == '>')
        return npy_fail(c->src, ULY_EFORMAT, "big-endian dtype '%s' is not supported (%s)", name, c->want);
    return npy_fail(c->src, ULY_EFORMAT, "unsupported dtype '%s' (%s)", name, c->want);
}

static int parse_bool(cursor *c, int *value)
{
    const unsigned char *s = c->p;
    while (c->p < c->end && is_ident(*c->p))
        c->p++;
    size_t n = (size_t)(c->p - s);
    if (n == 4 && memcmp(s, "True", 4) == 0)
        *value = 1;
    else if (n == 5 && memcmp(s, "False", 5) == 0)
        *value = 0;
    else {
        c->p = s;
        return cur_fail(c, "'fortran_order' must be True or False");
    }
    return ULY_OK;
}

/* One dimension: a decimal integer (an 'L' suffix, as Python 2 wrote it, is
 * accepted).  Negative values and values beyond int64 are rejected. */
static int parse_dim(cursor *c, int index, int64_t *dim)
{
    int neg = 0, big = 0;
    uint64_t v = 0;
    const unsigned char *start = c->p;
    if (at(c, '-')) {
        neg = 1;
        c->p++;
    }
    if (c->p >= c->end || !is_digit(*c->p))
        return cur_fail(c, "expected a dimension (a non-negative integer) in 'shape'");
    if (*c->p == '0' && c->p + 1 < c->end && is_digit(c->p[1]))
        return cur_fail(c, "leading zeros in a dimension of 'shape'");
    while (c->p < c->end && is_digit(*c->p)) {
        unsigned d = (unsigned)(*c->p - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10)
            big = 1;
        else
            v = v * 10 + d;
        c->p++;
    }
    if (at(c, 'L'))
        c->p++;
    if (neg && (v != 0 || big)) {
        char text[32];
        printable(text, sizeof text, start, (size_t)(c->p - start));
        return npy_fail(c->src, ULY_EFORMAT, "negative dimension %s in 'shape' (dimension %d)",
                        text, index);
    }
    if (big) {
        char text[32];
        printable(text, sizeof text, start, (size_t)(c->p - start));
        return npy_fail(c->src, ULY_EOVERFLOW, "dimension %d of 'shape' (%s) does not fit in int64",
                        index, text);
    }
    *dim = (int64_t)v;
    return ULY_OK;
}

/* A tuple of dimensions: "()", "(3,)", "(2, 3)", "(2, 3,)". */
static int parse_shape(cursor *c, int *ndim, int64_t *shape)
{
    int st;
    *ndim = 0;
    if (!at(c, '('))
        return cur_fail(c, "'shape' must be a tuple such as (2, 3)");
    c->p++;
    skip_space(c);
    if (at(c, ')')) {
        c->p++;
        return ULY_OK;
    }
    for (;;) {
        int64_t d = 0;
        if ((st = parse_dim(c, *ndim, &d)))
            return st;
        if (*ndim == ULY_NPY_MAXDIM)
            return npy_fail(c->src, ULY_EFORMAT, "'shape' has more than %d dimensions",
                            ULY_NPY_MAXDIM);
        shape[(*ndim)++] = d;
        skip_space(c);
        if (at(c, ',')) {
            c->p++;
            skip_space(c);
            if (at(c, ')')) {
                c->p++;
                return ULY_OK;
            }
            continue;
        }
        if (at(c, ')')) {
            if (*ndim == 1)
                return cur_fail(c, "'shape' (n) is not a tuple; a 1-D shape is written (n,)");
            c->p++;
            return ULY_OK;
        }
        return cur_fail(c, "expected ',' or ')' in 'shape'");
    }
}

/* Parse the whole dict.  On success fills dtype, ndim and shape. */
static int parse_header(cursor *c, uly_dtype *dtype, int *elem, int *ndim, int64_t *shape)
{
    int seen[NKEYS] = { 0 };
    int fortran = 0, st;

    skip_space(c);
    if (!at(c, '{'))
        return cur_fail(c, "expected '{' (the header is a Python dict)");
    c->p++;
    for (;;) {
        skip_space(c);
        if (at(c, '}')) {
            c->p++;
            break;
        }
        int key = 0;
        const unsigned char *key_at = c->p;
        if ((st = parse_key(c, &key)))
            return st;
        if (seen[key]) {
            c->p = key_at;
            return npy_fail(c->src, ULY_EFORMAT, "malformed .npy header at byte %zu: duplicate key '%s'",
                            cur_pos(c), key_name[key]);
        }
        seen[key] = 1;
        skip_space(c);
        if (!at(c, ':'))
            return cur_fail(c, "expected ':' after a key");
        c->p++;
        skip_space(c);
        switch (key) {
        case KEY_DESCR:
            st = parse_descr(c, dtype, elem);
            break;
        case KEY_FORTRAN:
            st = parse_bool(c, &fortran);
            if (!st && fortran)
                st = npy_fail(c->src, ULY_EFORMAT,
                              "fortran_order True is not supported (only C order)");
            break;
        default:
            st = parse_shape(c, ndim, shape);
            break;
        }
        if (st)
            return st;
        skip_space(c);
        if (at(c, ',')) {
            c->p++;
            continue;
        }
        if (at(c, '}')) {
            c->p++;
            break;
        }
        return cur_fail(c, "expected ',' or '}' after a value");
    }
    skip_space(c);
    if (c->p != c->end)
        return cur_fail(c, "unexpected text after the header dict");
    for (int k = 0; k < NKEYS; k++)
        if (!seen[k])
            return npy_fail(c->src, ULY_EFORMAT, "the .npy header has no '%s' key", key_name[k]);
    return ULY_OK;
}

/* -------------------------------------------------------------- the parser */

/* What the preamble and header say. */
typedef struct npy_head {
    uly_npy n;            /* dtype, ndim, shape, count; data NULL */
    size_t es, nbytes;    /* the file's element size, data size declared by the shape */
    size_t data_off;      /* file offset of the data */
} npy_head;

/* Preamble: magic, version, header length.  buf holds the first avail bytes
 * of a file of total bytes (avail >= min(total, 12)).  Sets *pre (preamble
 * length) and *hlen, checked against total. */
static int parse_preamble(const unsigned char *buf, size_t avail, size_t total, const char *src, size_t *pre,
                          size_t *hlen)
{
    size_t mlen = avail < NPY_MAGIC_LEN ? avail : NPY_MAGIC_LEN;
    if (memcmp(buf, NPY_MAGIC, mlen) != 0)
        return npy_fail(src, ULY_EFORMAT, "not a .npy file (the magic string \\x93NUMPY is missing)");
    if (total < NPY_MAGIC_LEN + 2)
        return npy_fail(src, ULY_EFORMAT, "truncated .npy file: %zu bytes, the preamble alone needs 10", total);
    unsigned major = buf[6], minor = buf[7];
    if (minor != 0 || major < 1 || major > 3)
        return npy_fail(src, ULY_EFORMAT, "unsupported .npy format version %u.%u (1.0, 2.0, 3.0 are supported)",
                        major, minor);
    *pre = major == 1 ? 10 : 12;
    if (total < *pre)
        return npy_fail(src, ULY_EFORMAT, "truncated .npy file: %zu bytes, the version %u.0 preamble needs %zu",
                        total, major, *pre);
    *hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
    if (major > 1)
        *hlen |= (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
    if (*hlen > total - *pre)
        return npy_fail(src, ULY_EFORMAT, "truncated .npy header: it declares %zu bytes, only %zu follow the preamble",
                        *hlen, total - *pre);
    return ULY_OK;
}

/* Header text [hdr, hdr + hlen) at file offset pre, then the data size
 * against the total bytes of the file. */
static int parse_head(const unsigned char *hdr, size_t pre, size_t hlen, size_t total, const char *src,
                      int mode, npy_head *h)
{
    int st;
    memset(h, 0, sizeof *h);
    h->data_off = pre + hlen;
    static const char *const want[] = { "only '<f2', '<f4' and '<f8'", "64-bit integers ('<i8') are expected",
                                        "'<f2', '<f4', '<f8', '<i4' and '<i8' are supported" };
    cursor c = { hdr, hdr, hdr + hlen, pre, src, want[mode], mode };
    if ((st = parse_header(&c, &h->n.dtype, &h->n.elem, &h->n.ndim, h->n.shape)))
        return st;
    const char *descr = elem_descr(h->n.elem);
    /* NPY_INTS: the caller wants 64-bit integers ('<i8'); NPY_FLOATS: floats */
    if (mode == NPY_INTS && h->n.dtype != NPY_I64)
        return npy_fail(src, ULY_EFORMAT, "dtype '%s' where 64-bit integers ('<i8') are expected", descr);
    if (mode == NPY_FLOATS && h->n.dtype == NPY_I64)
        return npy_fail(src, ULY_EFORMAT,
                        "dtype '<i8' (integers) where floats are expected (only '<f2', '<f4' and '<f8')");
    h->es = uly_elem_size(h->n.elem);
    char shp[ULY_NPY_MAXDIM * 22 + 4];
    shape_text(shp, sizeof shp, h->n.ndim, h->n.shape);
    if (shape_size(h->n.ndim, h->n.shape, h->es, &h->n.count, &h->nbytes))
        return npy_fail(src, ULY_EOVERFLOW, "shape %s of '%s' is too large: its size in bytes overflows size_t",
                        shp, descr);
    /* Data: exactly nbytes must follow the header. */
    size_t avail = total - h->data_off;
    if (avail < h->nbytes)
        return npy_fail(src, ULY_EFORMAT, "truncated .npy data: shape %s of '%s' needs %zu bytes, the file has %zu",
                        shp, descr, h->nbytes, avail);
    if (avail > h->nbytes)
        return npy_fail(src, ULY_EFORMAT, "%zu extra bytes after the .npy data (shape %s of '%s' needs %zu bytes)",
                        avail - h->nbytes, shp, descr, h->nbytes);
    return ULY_OK;
}

/* Parse buf[0 .. len) into out (src names the file in messages, NULL for a
 * memory image). */
static int parse_image(const unsigned char *buf, size_t len, uly_npy *out, const char *src)
{
    size_t pre = 0, hlen = 0;
    npy_head h;
    int st = parse_preamble(buf, len, len, src, &pre, &hlen);
    if (!st)
        st = parse_head(buf + pre, pre, hlen, len, src, NPY_FLOATS, &h);
    if (st)
        return st;
    /* '<f2' data is read as float32: twice the file's bytes */
    size_t bytes = h.n.count * elem_size(h.n.dtype);
    h.n.data = uly_malloc(bytes);
    if (!h.n.data)
        return npy_fail(src, ULY_ENOMEM, "out of memory: cannot allocate %zu bytes for the .npy data", bytes);
    if (h.nbytes)
        memcpy(h.n.data, buf + h.data_off, h.nbytes);
    if (!uly_host_little_endian())
        uly_swap_bytes(h.n.data, h.n.count, h.es);
    if (h.n.elem == ULY_ELEM_F16)
        uly_elem_convert(ULY_ELEM_F16, h.n.data, h.n.count, ULY_ELEM_F32, h.n.data);
    *out = h.n;
    return ULY_OK;
}

/* -------------------------------------------------------------- public API */

int uly_npy_parse(const void *buf, size_t len, uly_npy *out)
{
    if (!out)
        return uly_set_error(ULY_EINVAL, "uly_npy_parse: out is NULL");
    memset(out, 0, sizeof *out);
    if (!buf && len > 0)
        return uly_set_error(ULY_EINVAL, "uly_npy_parse: buf is NULL but len is %zu", len);
    static const unsigned char empty[1];
    return parse_image(buf ? buf : empty, len, out, NULL);
}

/* ------------------------------------------------------- streaming reader */

struct uly_npy_reader {
    int fd;
    char *path;
    npy_head h;
};

/* Exactly n bytes at offset off (retrying short reads and EINTR): 0, or -1
 * with errno set, or 1 when the file ends first (*got: bytes read). */
int uly_tensor_read_at(int fd, void *dst, size_t n, size_t off, size_t *got)
{
    *got = 0;
    while (*got < n) {
        size_t want = n - *got;
        if (want > ((size_t)1 << 30))
            want = (size_t)1 << 30;
        ssize_t k = pread(fd, (char *)dst + *got, want, (off_t)(off + *got));
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (k == 0)
            return 1;
        *got += (size_t)k;
    }
    return 0;
}

#define read_at uly_tensor_read_at

int uly_tensor_open(const char *path, const char *what, int *fdp, size_t *total)
{
    *fdp = -1;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; the type is
     * checked on the descriptor itself, so nothing can swap the file. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return npy_fail(path, ULY_EIO, "cannot open for reading: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return npy_fail(path, ULY_EIO, "cannot stat: %s", strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return npy_fail(path, ULY_EFORMAT, "is %s, not a %s file", uly_file_kind(st.st_mode), what);
    }
    if ((uintmax_t)st.st_size > SIZE_MAX / 2) {
        close(fd);
        return npy_fail(path, ULY_EOVERFLOW, "file of %jd bytes is too large for this machine", (intmax_t)st.st_size);
    }
    *fdp = fd;
    *total = (size_t)st.st_size;
    return ULY_OK;
}

/* The reader of the open regular file fd (of total bytes), which it owns
 * from here on, closing it on failure. */
static int reader_from_fd(int fd, const char *path, size_t total, int mode, uly_npy *header, uly_npy_reader **out)
{
    uly_npy_reader *r = uly_calloc(1, sizeof *r);
    size_t plen = strlen(path) + 1;
    char *pcopy = r ? uly_malloc(plen) : NULL;
    if (!pcopy) {
        close(fd);
        uly_free(r);
        return npy_fail(path, ULY_ENOMEM, "out of memory opening the file");
    }
    memcpy(pcopy, path, plen);
    r->fd = fd;
    r->path = pcopy;
    /* The preamble: at most 12 bytes, read before anything is allocated. */
    unsigned char pre_buf[12];
    size_t want = total < sizeof pre_buf ? total : sizeof pre_buf, got;
    int k = read_at(fd, pre_buf, want, 0, &got);
    int rc = k < 0 ? npy_fail(path, ULY_EIO, "read error: %s", strerror(errno))
           : k > 0 ? npy_fail(path, ULY_EFORMAT, "the file shrank while it was read") : ULY_OK;
    size_t pre = 0, hlen = 0;
    if (!rc)
        rc = parse_preamble(pre_buf, got, total, path, &pre, &hlen);
    if (!rc && hlen > NPY_MAX_HEADER)
        rc = npy_fail(path, ULY_EFORMAT, "the .npy header declares %zu bytes; headers larger than %d bytes are refused",
                      hlen, NPY_MAX_HEADER);
    unsigned char *hdr = NULL;
    if (!rc) {
        hdr = uly_malloc(hlen ? hlen : 1);
        if (!hdr)
            rc = npy_fail(path, ULY_ENOMEM, "out of memory: cannot allocate %zu bytes for the header", hlen);
    }
    if (!rc) {
        k = read_at(fd, hdr, hlen, pre, &got);
        if (k)
            rc = k < 0 ? npy_fail(path, ULY_EIO, "read error in the header: %s", strerror(errno))
                       : npy_fail(path, ULY_EFORMAT, "the file shrank while it was read");
    }
    if (!rc)
        rc = parse_head(hdr, pre, hlen, total, path, mode, &r->h);
    uly_free(hdr);
    if (rc) {
        uly_npy_reader_close(r);
        return rc;
    }
    *header = r->h.n;
    *out = r;
    return ULY_OK;
}

static int reader_open(const char *path, int mode, uly_npy *header, uly_npy_reader **out)
{
    if (!out || !header || !path)
        return uly_set_error(ULY_EINVAL, "uly_npy_reader_open: NULL argument");
    *out = NULL;
    memset(header, 0, sizeof *header);
    int fd;
    size_t total;
    int rc = uly_tensor_open(path, ".npy", &fd, &total);
    return rc ? rc : reader_from_fd(fd, path, total, mode, header, out);
}

int uly_npy_reader_open(const char *path, uly_npy *header, uly_npy_reader **out)
{
    return reader_open(path, NPY_FLOATS, header, out);
}

int uly_npy_open_fd(int fd, const char *path, size_t total, uly_npy *header, uly_npy_reader **out)
{
    *out = NULL;
    memset(header, 0, sizeof *header);
    return reader_from_fd(fd, path, total, NPY_ANY, header, out);
}

/* Elements [first, first + count) as the file holds them, in host byte order. */
int uly_npy_reader_raw(uly_npy_reader *r, size_t first, size_t count, void *dst)
{
    if (!r || (!dst && count))
        return uly_set_error(ULY_EINVAL, "uly_npy_reader_read: NULL argument");
    if (first > r->h.n.count || count > r->h.n.count - first)
        return npy_fail(r->path, ULY_EINVAL, "elements [%zu, %zu + %zu) are outside the %zu of the array", first,
                        first, count, r->h.n.count);
    if (count == 0)
        return ULY_OK;
    size_t off = r->h.data_off + first * r->h.es, bytes = count * r->h.es, got;
    int k = read_at(r->fd, dst, bytes, off, &got);
    if (k < 0)
        return npy_fail(r->path, ULY_EIO, "read error at byte %zu: %s", off + got, strerror(errno));
    if (k > 0)
        return npy_fail(r->path, ULY_EFORMAT, "the file shrank while it was read (it ends at byte %zu)", off + got);
    if (!uly_host_little_endian())
        uly_swap_bytes(dst, count, r->h.es);
    return ULY_OK;
}

int uly_npy_reader_read(uly_npy_reader *r, size_t first, size_t count, void *dst)
{
    int st = uly_npy_reader_raw(r, first, count, dst);
    /* '<f2' reads as float32: widened in place (dst holds count floats) */
    if (!st && r->h.n.elem == ULY_ELEM_F16)
        st = uly_elem_convert(ULY_ELEM_F16, dst, count, ULY_ELEM_F32, dst);
    return st;
}

void uly_npy_reader_close(uly_npy_reader *r)
{
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd); /* read-only: a close error loses nothing */
    uly_free(r->path);
    uly_free(r);
}

int uly_npy_read(const char *path, uly_npy *out)
{
    if (!out)
        return uly_set_error(ULY_EINVAL, "uly_npy_read: out is NULL");
    memset(out, 0, sizeof *out);
    if (!path)
        return uly_set_error(ULY_EINVAL, "uly_npy_read: path is NULL");
    uly_npy_reader *r;
    uly_npy h;
    int st = uly_npy_reader_open(path, &h, &r);
    if (st)
        return st;
    size_t nbytes = h.count * elem_size(h.dtype);
    h.data = uly_malloc(nbytes ? nbytes : 1);
    if (!h.data)
        st = npy_fail(path, ULY_ENOMEM, "out of memory: cannot allocate %zu bytes for the .npy data", nbytes);
    if (!st)
        st = uly_npy_reader_read(r, 0, h.count, h.data);
    uly_npy_reader_close(r);
    if (st) {
        uly_free(h.data);
        return st;
    }
    *out = h;
    return ULY_OK;
}

int uly_npy_read_i64(const char *path, int *ndim, int64_t shape[ULY_NPY_MAXDIM], size_t *count,
                     int64_t **data)
{
    if (!path || !ndim || !shape || !count || !data)
        return uly_set_error(ULY_EINVAL, "uly_npy_read_i64: NULL argument");
    *data = NULL;
    uly_npy_reader *r;
    uly_npy h;
    int st = reader_open(path, NPY_INTS, &h, &r);
    if (st)
        return st;
    int64_t *x = uly_malloc(h.count ? h.count * sizeof *x : 1);
    if (!x)
        st = npy_fail(path, ULY_ENOMEM, "out of memory: cannot allocate %zu integers", h.count);
    if (!st)
        st = uly_npy_reader_read(r, 0, h.count, x);
    uly_npy_reader_close(r);
    if (st) {
        uly_free(x);
        return st;
    }
    *ndim = h.ndim;
    memcpy(shape, h.shape, sizeof h.shape);
    *count = h.count;
    *data = x;
    return ULY_OK;
}

/* The element type of a dtype of this file (-1 for an unknown one). */
static int dtype_elem(uly_dtype t)
{
    return t == ULY_F32 ? ULY_ELEM_F32 : t == ULY_F64 ? ULY_ELEM_F64 : t == NPY_I64 ? ULY_ELEM_I64
         : t == NPY_I32 ? ULY_ELEM_I32 : -1;
}

/* Write the data, count elements of type src, as type elem (descr). */
static int npy_write_impl(const char *path, const char *fn, int src, int elem, int ndim, const int64_t *shape,
                          const void *data)
{
    if (!path)
        return uly_set_error(ULY_EINVAL, "%s: path is NULL", fn);
    const char *descr = elem_descr(elem);
    size_t es = uly_elem_size(elem), ss = uly_elem_size(src);
    if (src < 0 || !descr)
        return uly_set_error(ULY_EINVAL, "%s: %s: unknown dtype %d", fn, path, src < 0 ? src : elem);
    if (ndim < 0 || ndim > ULY_NPY_MAXDIM)
        return uly_set_error(ULY_EINVAL, "%s: %s: ndim %d is outside [0, %d]", fn, path, ndim, ULY_NPY_MAXDIM);
    if (ndim > 0 && !shape)
        return uly_set_error(ULY_EINVAL, "%s: %s: shape is NULL", fn, path);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return uly_set_error(ULY_EINVAL, "%s: %s: negative dimension %" PRId64 " (dimension %d)", fn, path,
                                 shape[i], i);
    size_t count, nbytes, sbytes;
    if (shape_size(ndim, shape, es, &count, &nbytes) || shape_size(ndim, shape, ss, &count, &sbytes))
        return uly_set_error(ULY_EOVERFLOW, "%s: %s: the array size in bytes overflows size_t", fn, path);
    if (nbytes > 0 && !data)
        return uly_set_error(ULY_EINVAL, "%s: %s: data is NULL", fn, path);
    /* A conversion to an integer type can fail: checked before the file is touched. */
    unsigned char tmp[4096];
    const size_t chunk = sizeof tmp / 8;
    if (src != elem && !uly_elem_is_float(elem))
        for (size_t i = 0; i < count; i += chunk) {
            size_t k = count - i < chunk ? count - i : chunk;
            int st = uly_elem_convert(src, (const unsigned char *)data + i * ss, k, elem, tmp);
            if (st)
                return uly_set_error(st, "%s: %s: element %zu: not representable as '%s'", fn, path, i, descr);
        }

    /* Preamble and header, laid out as np.save does it:
     *   "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
     * then NPY_GROWTH_DIGITS - digits(shape[0]) spaces, then padding to a
     * multiple of 64 bytes, the last byte a '\n'. */
    char shp[ULY_NPY_MAXDIM * 22 + 4];
    shape_text(shp, sizeof shp, ndim, shape);
    unsigned char head[512];
    int n = snprintf((char *)head + 10, sizeof head - 10,
                     "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shp);
    size_t h = 10 + (size_t)n;
    if (ndim > 0) {
        char d0[24];
        int nd = snprintf(d0, sizeof d0, "%" PRId64, shape[0]);
        for (int i = nd; i < NPY_GROWTH_DIGITS; i++)
            head[h++] = ' ';
    }
    size_t pad = NPY_ALIGN - (h + 1) % NPY_ALIGN;
    memset(head + h, ' ', pad);
    h += pad;
    head[h++] = '\n';
    memcpy(head, NPY_MAGIC, NPY_MAGIC_LEN);
    head[6] = 1;
    head[7] = 0;
    head[8] = (unsigned char)((h - 10) & 0xff);
    head[9] = (unsigned char)((h - 10) >> 8);

    FILE *f = fopen(path, "wb");
    if (!f)
        return npy_fail(path, ULY_EIO, "cannot open for writing: %s", strerror(errno));
    int e = 0;
    errno = 0;
    if (fwrite(head, 1, h, f) != h)
        e = errno ? errno : EIO;
    if (!e && nbytes > 0 && src != elem) {
        /* Convert through the small buffer, chunk elements at a time. */
        for (size_t i = 0; i < count && !e; i += chunk) {
            size_t k = count - i < chunk ? count - i : chunk;
            uly_elem_convert(src, (const unsigned char *)data + i * ss, k, elem, tmp);
            if (!uly_host_little_endian())
                uly_swap_bytes(tmp, k, es);
            if (fwrite(tmp, 1, k * es, f) != k * es)
                e = errno ? errno : EIO;
        }
    } else if (!e && nbytes > 0) {
        if (uly_host_little_endian()) {
            if (fwrite(data, 1, nbytes, f) != nbytes)
                e = errno ? errno : EIO;
        } else {
            /* Convert through a small buffer; the caller's data is const. */
            const unsigned char *sp = data;
            for (size_t off = 0; off < nbytes && !e; off += sizeof tmp) {
                size_t k = nbytes - off < sizeof tmp ? nbytes - off : sizeof tmp;
                memcpy(tmp, sp + off, k);
                uly_swap_bytes(tmp, k / es, es);
                if (fwrite(tmp, 1, k, f) != k)
                    e = errno ? errno : EIO;
            }
        }
    }
    if (!e && fflush(f) != 0)
        e = errno ? errno : EIO;
    if (fclose(f) != 0 && !e)
        e = errno ? errno : EIO;
    if (e)  /* the partial file stays: removing it could remove what path named before */
        return npy_fail(path, ULY_EIO, "write error: %s", strerror(e));
    return ULY_OK;
}

int uly_npy_write(const char *path, uly_dtype dtype, int ndim, const int64_t *shape, const void *data)
{
    int el = dtype_elem(dtype);
    if (path && el < 0)
        return uly_set_error(ULY_EINVAL, "uly_npy_write: %s: unknown dtype %d", path, (int)dtype);
    return npy_write_impl(path, "uly_npy_write", el, el, ndim, shape, data);
}

int uly_npy_write_as(const char *path, int elem, uly_dtype dtype, int ndim, const int64_t *shape,
                     const void *data)
{
    if (dtype != ULY_F32 && dtype != ULY_F64)
        return uly_set_error(ULY_EINVAL, "uly_npy_write_as: %s: unknown dtype %d", path ? path : "(null)",
                             (int)dtype);
    if (elem == ULY_ELEM_BF16)
        return uly_set_error(ULY_EINVAL, "uly_npy_write_as: %s: bf16 cannot be written to a .npy file "
                             "(numpy has no bfloat16; use .safetensors)", path ? path : "(null)");
    return npy_write_impl(path, "uly_npy_write_as", dtype_elem(dtype), elem, ndim, shape, data);
}

void uly_npy_free(uly_npy *n)
{
    if (!n)
        return;
    uly_free(n->data);
    memset(n, 0, sizeof *n);
}
