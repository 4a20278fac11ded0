/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_npy.c -- Check suite for the .npy reader and writer (src/npy.c), the
 * element types (src/elem.c), .safetensors (src/safetensors.c) and the
 * unified reader (src/tfile.c).
 *
 * Round trips are checked bitwise (NaN payloads, -0, denormals included);
 * headers are built by hand in numpy's exact layout; every rejection checks
 * the status code and a piece of the message.  In-memory images are held in
 * buffers of exactly their length so that a sanitizer build catches any read
 * past the end.  Self-contained: no shared test helpers.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ulysses.h"

/* Fault injection of src/error.c: the k-th allocation from now fails. */
void uly_test_fail_alloc_at(long k);
long uly_test_alloc_count(void);

/* ------------------------------------------------------------------ helpers */

/* A fresh empty file in /tmp; the caller unlinks it. */
static void tmp_path(char *path, size_t cap)
{
    snprintf(path, cap, "/tmp/test_npy_XXXXXX");
    int fd = mkstemp(path);
    ck_assert_msg(fd >= 0, "mkstemp failed");
    close(fd);
}

/* Whole file into a malloc'ed buffer. */
static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    size_t cap = 1024, n = 0;
    unsigned char *b = malloc(cap);
    ck_assert_ptr_nonnull(b);
    for (;;) {
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        cap *= 2;
        b = realloc(b, cap);
        ck_assert_ptr_nonnull(b);
    }
    fclose(f);
    *len = n;
    return b;
}

static void spit(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/*
 * A .npy image of version major.0: preamble, header text as given (no
 * padding added), then nbytes bytes of data (copied from data, or a
 * counting pattern when data is NULL).  Exactly *len bytes are allocated.
 */
static unsigned char *make_npy(int major, const char *header, const void *data, size_t nbytes,
                               size_t *len)
{
    size_t hl = strlen(header), pre = major == 1 ? 10 : 12;
    *len = pre + hl + nbytes;
    unsigned char *b = malloc(*len ? *len : 1);
    ck_assert_ptr_nonnull(b);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = 0;
    b[8] = (unsigned char)(hl & 0xff);
    b[9] = (unsigned char)((hl >> 8) & 0xff);
    if (major != 1) {
        b[10] = (unsigned char)((hl >> 16) & 0xff);
        b[11] = (unsigned char)((hl >> 24) & 0xff);
    }
    memcpy(b + pre, header, hl);
    for (size_t i = 0; i < nbytes; i++)
        b[pre + hl + i] = data ? ((const unsigned char *)data)[i] : (unsigned char)(i * 7 + 1);
    return b;
}

/* header padded the way numpy pads it: spaces, then '\n' ending at a
 * multiple of 64 bytes from the start of the file (preamble pre bytes). */
static void pad_header(char *out, size_t cap, const char *dict, size_t pre)
{
    size_t n = strlen(dict);
    size_t pad = 64 - (pre + n + 1) % 64;
    ck_assert_uint_lt(n + pad + 1, cap);
    memcpy(out, dict, n);
    memset(out + n, ' ', pad);
    out[n + pad] = '\n';
    out[n + pad + 1] = '\0';
}

static void assert_zeroed(const uly_npy *n)
{
    uly_npy z;
    memset(&z, 0, sizeof z);
    ck_assert_msg(memcmp(n, &z, sizeof z) == 0, "out is not zeroed after a failure");
}

/* Parse an image that must fail with status st and a message containing sub. */
static void expect_reject(const unsigned char *b, size_t len, int st, const char *sub, const char *what)
{
    uly_npy n;
    memset(&n, 0xa5, sizeof n);
    int got = uly_npy_parse(b, len, &n);
    ck_assert_msg(got == st, "%s: status %d (%s), expected %d; message: %s", what, got,
                  uly_strerror(got), st, uly_last_error());
    ck_assert_msg(strstr(uly_last_error(), sub) != NULL, "%s: message \"%s\" lacks \"%s\"", what,
                  uly_last_error(), sub);
    assert_zeroed(&n);
}

/* Deterministic bit patterns: NaNs with payloads, infinities, -0, denormals. */
static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s;
}

static void fill_bits(void *data, size_t nbytes, uint64_t seed)
{
    unsigned char *p = data;
    for (size_t i = 0; i < nbytes; i++)
        p[i] = (unsigned char)(lcg(&seed) >> 56);
}

static void put_specials(void *data, uly_dtype t, size_t count)
{
    static const uint32_t s32[] = { 0x7fc00001u, 0xff800000u, 0x80000000u, 0x00000001u, 0x7f7fffffu };
    static const uint64_t s64[] = { 0x7ff8000000000abcULL, 0xfff0000000000000ULL,
                                    0x8000000000000000ULL, 0x0000000000000001ULL, 0x7fefffffffffffffULL };
    for (size_t i = 0; i < count && i < 5; i++) {
        if (t == ULY_F32)
            memcpy((unsigned char *)data + 4 * i, &s32[i], 4);
        else
            memcpy((unsigned char *)data + 8 * i, &s64[i], 8);
    }
}

/* ------------------------------------------------------------- round trips */

static const struct {
    int ndim;
    int64_t shape[4];
} shapes[] = {
    { 0, { 0 } },          /* scalar */
    { 1, { 7 } },
    { 1, { 0 } },          /* empty */
    { 2, { 2, 3 } },
    { 2, { 1, 1 } },
    { 3, { 2, 3, 4 } },
    { 3, { 3, 0, 2 } },    /* empty in the middle */
    { 4, { 1, 2, 3, 5 } },
    { 4, { 2, 2, 2, 2 } },
};

static void roundtrip(uly_dtype t, int which)
{
    size_t es = t == ULY_F32 ? 4 : 8;
    int ndim = shapes[which].ndim;
    const int64_t *shape = shapes[which].shape;
    size_t count = 1;
    for (int i = 0; i < ndim; i++)
        count *= (size_t)shape[i];
    size_t nbytes = count * es;
    void *data = malloc(nbytes ? nbytes : 1);
    ck_assert_ptr_nonnull(data);
    fill_bits(data, nbytes, 1000u + (unsigned)which);
    put_specials(data, t, count);

    char path[64];
    tmp_path(path, sizeof path);
    int st = uly_npy_write(path, t, ndim, ndim ? shape : NULL, data);
    ck_assert_msg(st == ULY_OK, "write: %s", uly_last_error());

    /* Layout: version 1.0, data at a multiple of 64, header ends in '\n'. */
    size_t flen;
    unsigned char *raw = slurp(path, &flen);
    ck_assert_uint_ge(flen, 10);
    ck_assert(memcmp(raw, "\x93NUMPY\x01\x00", 8) == 0);
    size_t hlen = (size_t)raw[8] | (size_t)raw[9] << 8;
    ck_assert_uint_eq((10 + hlen) % 64, 0);
    ck_assert_uint_eq(raw[10 + hlen - 1], '\n');
    ck_assert_uint_eq(flen, 10 + hlen + nbytes);
    ck_assert(memcmp(raw + 10 + hlen, data, nbytes) == 0);  /* little-endian host */
    free(raw);

    uly_npy n;
    st = uly_npy_read(path, &n);
    ck_assert_msg(st == ULY_OK, "read: %s", uly_last_error());
    ck_assert_int_eq(n.dtype, t);
    ck_assert_int_eq(n.ndim, ndim);
    for (int i = 0; i < ndim; i++)
        ck_assert_int_eq(n.shape[i], shape[i]);
    ck_assert_uint_eq(n.count, count);
    ck_assert_ptr_nonnull(n.data);
    ck_assert_msg(memcmp(n.data, data, nbytes) == 0, "data differ after the round trip");
    uly_npy_free(&n);
    assert_zeroed(&n);

    unlink(path);
    free(data);
}

START_TEST(test_roundtrip_f32)
{
    roundtrip(ULY_F32, _i);
}
END_TEST

START_TEST(test_roundtrip_f64)
{
    roundtrip(ULY_F64, _i);
}
END_TEST

/* The writer's header is byte for byte what np.save (numpy >= 1.24) writes. */
START_TEST(test_write_numpy_layout)
{
    static const struct {
        uly_dtype t;
        int ndim;
        int64_t shape[3];
        const char *dict;
        size_t hlen;
    } cases[] = {
        { ULY_F32, 2, { 2, 3 }, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 118 },
        { ULY_F64, 1, { 10 }, "{'descr': '<f8', 'fortran_order': False, 'shape': (10,), }", 118 },
        { ULY_F64, 0, { 0 }, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }", 118 },
        { ULY_F32, 3, { 123456789012, 0, 5 },
          "{'descr': '<f4', 'fortran_order': False, 'shape': (123456789012, 0, 5), }", 118 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char path[64];
        tmp_path(path, sizeof path);
        double buf[16] = { 0 };  /* enough for every case */
        int st = uly_npy_write(path, cases[k].t, cases[k].ndim, cases[k].shape, buf);
        ck_assert_msg(st == ULY_OK, "%s", uly_last_error());
        size_t len;
        unsigned char *raw = slurp(path, &len);
        size_t hlen = (size_t)raw[8] | (size_t)raw[9] << 8;
        ck_assert_uint_eq(hlen, cases[k].hlen);
        /* dict, then 21 - digits(shape[0]) growth spaces (none for a scalar),
         * then spaces to the 64-byte boundary, then '\n'. */
        char expect[256];
        size_t dl = strlen(cases[k].dict);
        memcpy(expect, cases[k].dict, dl);
        memset(expect + dl, ' ', hlen - 1 - dl);
        expect[hlen - 1] = '\n';
        ck_assert_msg(memcmp(raw + 10, expect, hlen) == 0, "case %zu: header is \"%.*s\"", k, (int)hlen,
                      (const char *)raw + 10);
        free(raw);
        unlink(path);
    }
}
END_TEST

/* ------------------------------------------------------ hand-built headers */

static void expect_accept(const unsigned char *b, size_t len, uly_dtype t, int ndim, const int64_t *shape,
                          const char *what)
{
    uly_npy n;
    int st = uly_npy_parse(b, len, &n);
    ck_assert_msg(st == ULY_OK, "%s: %s", what, uly_last_error());
    ck_assert_int_eq(n.dtype, t);
    ck_assert_msg(n.ndim == ndim, "%s: ndim %d, expected %d", what, n.ndim, ndim);
    size_t count = 1;
    for (int i = 0; i < ndim; i++) {
        ck_assert_int_eq(n.shape[i], shape[i]);
        count *= (size_t)shape[i];
    }
    ck_assert_uint_eq(n.count, count);
    ck_assert_ptr_nonnull(n.data);
    uly_npy_free(&n);
}

START_TEST(test_parse_numpy_header)
{
    char hdr[256];
    size_t len;
    float v[6] = { 1, 2, 3, 4, 5, -0.0f };
    for (int major = 1; major <= 3; major++) {
        pad_header(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                   major == 1 ? 10 : 12);
        unsigned char *b = make_npy(major, hdr, v, sizeof v, &len);
        ck_assert_uint_eq((len - sizeof v) % 64, 0);
        uly_npy n;
        int st = uly_npy_parse(b, len, &n);
        ck_assert_msg(st == ULY_OK, "version %d.0: %s", major, uly_last_error());
        ck_assert_int_eq(n.dtype, ULY_F32);
        ck_assert_int_eq(n.ndim, 2);
        ck_assert_int_eq(n.shape[0], 2);
        ck_assert_int_eq(n.shape[1], 3);
        ck_assert_uint_eq(n.count, 6);
        ck_assert(memcmp(n.data, v, sizeof v) == 0);
        uly_npy_free(&n);
        free(b);
    }
}
END_TEST

START_TEST(test_parse_variants)
{
    static const struct {
        const char *hdr;
        uly_dtype t;
        int ndim;
        int64_t shape[ULY_NPY_MAXDIM];
    } cases[] = {
        { "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }\n", ULY_F64, 1, { 3 } },
        { "{'shape': (3,), 'fortran_order': False, 'descr': '<f8'}", ULY_F64, 1, { 3 } },
        { "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 1)}", ULY_F32, 2, { 2, 1 } },
        { "  {  'fortran_order' :False,'shape':( 3 , ),'descr':'<f4' ,}  \n", ULY_F32, 1, { 3 } },
        { "{'descr':'<f4',\n\t'fortran_order':False,\n\t'shape':(\n2,\n3,\n),\n}\n", ULY_F32, 2, { 2, 3 } },
        { "{'descr': '<f8', 'fortran_order': False, 'shape': (), }", ULY_F64, 0, { 0 } },
        { "{'descr': '<f8', 'fortran_order': False, 'shape': ( ), }", ULY_F64, 0, { 0 } },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (0,), }", ULY_F32, 1, { 0 } },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (5, 0, 1000000000000), }", ULY_F32, 3,
          { 5, 0, 1000000000000 } },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", ULY_F32, 2, { 2, 3 } },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 1, 2, 1, 2, 1, 2), }", ULY_F32, 8,
          { 1, 2, 1, 2, 1, 2, 1, 2 } },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (-0, 1), }", ULY_F32, 2, { 0, 1 } },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        size_t count = 1, len;
        for (int i = 0; i < cases[k].ndim; i++)
            count *= (size_t)cases[k].shape[i];
        size_t es = cases[k].t == ULY_F32 ? 4 : 8;
        unsigned char *b = make_npy(1 + (int)(k % 3), cases[k].hdr, NULL, count * es, &len);
        char what[320];
        snprintf(what, sizeof what, "case %zu <%s>", k, cases[k].hdr);
        expect_accept(b, len, cases[k].t, cases[k].ndim, cases[k].shape, what);
        free(b);
    }
}
END_TEST

/* ---------------------------------------------------------------- rejects */

#define H(descr, fo, shape) "{'descr': " descr ", 'fortran_order': " fo ", 'shape': " shape ", }"

static const struct {
    const char *hdr;
    size_t nbytes;  /* data bytes appended */
    int st;
    const char *sub;
} bad_headers[] = {
    /* dtypes */
    { H("'<i4'", "False", "(2,)"), 8, ULY_EFORMAT, "unsupported dtype '<i4'" },
    { H("'<i8'", "False", "(2,)"), 16, ULY_EFORMAT, "'<i8' (integers) where floats are expected" },
    { H("'>f4'", "False", "(2,)"), 8, ULY_EFORMAT, "big-endian dtype '>f4'" },
    { H("'>f8'", "False", "(2,)"), 16, ULY_EFORMAT, "big-endian dtype '>f8'" },
    { H("'|f4'", "False", "(2,)"), 8, ULY_EFORMAT, "unsupported dtype '|f4'" },
    { H("'f4'", "False", "(2,)"), 8, ULY_EFORMAT, "unsupported dtype 'f4'" },
    { H("'=f8'", "False", "(2,)"), 16, ULY_EFORMAT, "unsupported dtype '=f8'" },
    { H("'<u2'", "False", "(2,)"), 4, ULY_EFORMAT, "unsupported dtype '<u2'" },
    { H("'<c8'", "False", "(2,)"), 16, ULY_EFORMAT, "unsupported dtype '<c8'" },
    { H("'|u1'", "False", "(2,)"), 2, ULY_EFORMAT, "unsupported dtype '|u1'" },
    { H("'<f4 '", "False", "(2,)"), 8, ULY_EFORMAT, "unsupported dtype '<f4 '" },
    { H("[('x', '<f4')]", "False", "(2,)"), 8, ULY_EFORMAT, "'descr' must be a string" },
    { H("'\x01\x7f'", "False", "(2,)"), 8, ULY_EFORMAT, "unsupported dtype '?" "?'" },
    /* order */
    { H("'<f4'", "True", "(2, 3)"), 24, ULY_EFORMAT, "fortran_order True is not supported" },
    { H("'<f4'", "1", "(2,)"), 8, ULY_EFORMAT, "'fortran_order' must be True or False" },
    { H("'<f4'", "false", "(2,)"), 8, ULY_EFORMAT, "'fortran_order' must be True or False" },
    { H("'<f4'", "Falsey", "(2,)"), 8, ULY_EFORMAT, "'fortran_order' must be True or False" },
    /* shapes */
    { H("'<f4'", "False", "(1, 1, 1, 1, 1, 1, 1, 1, 1)"), 4, ULY_EFORMAT, "more than 8 dimensions" },
    { H("'<f4'", "False", "(2, -3)"), 0, ULY_EFORMAT, "negative dimension -3" },
    { H("'<f4'", "False", "(-1,)"), 0, ULY_EFORMAT, "negative dimension -1" },
    { H("'<f4'", "False", "(99999999999999999999,)"), 0, ULY_EOVERFLOW, "does not fit in int64" },
    { H("'<f4'", "False", "(9223372036854775808,)"), 0, ULY_EOVERFLOW, "does not fit in int64" },
    { H("'<f4'", "False", "(4294967296, 4294967296, 2)"), 0, ULY_EOVERFLOW, "overflows size_t" },
    { H("'<f4'", "False", "(4294967296, 4294967296, 0)"), 0, ULY_EOVERFLOW, "overflows size_t" },
    { H("'<f4'", "False", "(4611686018427387904,)"), 0, ULY_EOVERFLOW, "overflows size_t" },
    { H("'<f8'", "False", "(9223372036854775807,)"), 0, ULY_EOVERFLOW, "overflows size_t" },
    { H("'<f4'", "False", "(3)"), 12, ULY_EFORMAT, "is not a tuple" },
    { H("'<f4'", "False", "[2, 3]"), 24, ULY_EFORMAT, "'shape' must be a tuple" },
    { H("'<f4'", "False", "3"), 12, ULY_EFORMAT, "'shape' must be a tuple" },
    { H("'<f4'", "False", "(2 3)"), 24, ULY_EFORMAT, "expected ',' or ')' in 'shape'" },
    { H("'<f4'", "False", "(2,, 3)"), 24, ULY_EFORMAT, "expected a dimension" },
    { H("'<f4'", "False", "(,)"), 0, ULY_EFORMAT, "expected a dimension" },
    { H("'<f4'", "False", "(1.5,)"), 4, ULY_EFORMAT, "expected ',' or ')' in 'shape'" },
    { H("'<f4'", "False", "(0x10,)"), 64, ULY_EFORMAT, "expected ',' or ')' in 'shape'" },
    { H("'<f4'", "False", "(007,)"), 28, ULY_EFORMAT, "leading zeros" },
    { H("'<f4'", "False", "(+2,)"), 8, ULY_EFORMAT, "expected a dimension" },
    { H("'<f4'", "False", "((2, 3))"), 24, ULY_EFORMAT, "expected a dimension" },
    { H("'<f4'", "False", "(2, 3"), 24, ULY_EFORMAT, "expected a dimension" },
    /* data size */
    { H("'<f4'", "False", "(2, 3)"), 20, ULY_EFORMAT, "needs 24 bytes, the file has 20" },
    { H("'<f4'", "False", "(2, 3)"), 0, ULY_EFORMAT, "truncated .npy data" },
    { H("'<f4'", "False", "(2, 3)"), 28, ULY_EFORMAT, "4 extra bytes after the .npy data" },
    { H("'<f8'", "False", "()"), 9, ULY_EFORMAT, "1 extra bytes" },
    { H("'<f8'", "False", "(0,)"), 1, ULY_EFORMAT, "1 extra bytes" },
    /* dict syntax */
    { "{'descr': '<f4', 'fortran_order': False}", 0, ULY_EFORMAT, "no 'shape' key" },
    { "{'shape': (1,), 'fortran_order': False}", 4, ULY_EFORMAT, "no 'descr' key" },
    { "{'descr': '<f4', 'shape': (1,)}", 4, ULY_EFORMAT, "no 'fortran_order' key" },
    { "{}", 0, ULY_EFORMAT, "no 'descr' key" },
    { "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", 4, ULY_EFORMAT,
      "duplicate key 'descr'" },
    { H("'<f4'", "False", "(1,)") "x", 4, ULY_EFORMAT, "unexpected text after the header dict" },
    { H("'<f4'", "False", "(1,)") "}", 4, ULY_EFORMAT, "unexpected text after the header dict" },
    { "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 0}", 4, ULY_EFORMAT,
      "unexpected key 'extra'" },
    { "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), "
      "'a_key_much_longer_than_the_message_shows_of_it': 0}", 4, ULY_EFORMAT,
      "unexpected key 'a_key_much_longer_than_the_message_s...'" },
    { "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", 4, ULY_EFORMAT, "expected ',' or '}'" },
    { "{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", 4, ULY_EFORMAT, "expected ',' or '}'" },
    { "{'descr' '<f4', 'fortran_order': False, 'shape': (1,)}", 4, ULY_EFORMAT, "expected ':'" },
    { "{'descr: '<f4', 'fortran_order': False, 'shape': (1,)}", 4, ULY_EFORMAT, "unexpected key" },
    { "{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}", 4, ULY_EFORMAT, "unsupported dtype '<f4, '" },
    { "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x", 4, ULY_EFORMAT, "unterminated string" },
    { "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'a\nb': 1}", 4, ULY_EFORMAT,
      "unterminated string" },
    { "{'de\\x73cr': '<f4', 'fortran_order': False, 'shape': (1,)}", 4, ULY_EFORMAT, "escape sequences" },
    { "{descr: '<f4', 'fortran_order': False, 'shape': (1,)}", 4, ULY_EFORMAT, "expected a key or '}'" },
    { "{, 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", 4, ULY_EFORMAT, "expected a key or '}'" },
    { "{'descr': '<f4',, 'fortran_order': False, 'shape': (1,)}", 4, ULY_EFORMAT, "expected a key or '}'" },
    { "['descr', '<f4']", 4, ULY_EFORMAT, "expected '{'" },
    { "", 0, ULY_EFORMAT, "expected '{'" },
    { "hello", 0, ULY_EFORMAT, "expected '{'" },
};

START_TEST(test_reject_header)
{
    int k = _i;
    size_t len;
    unsigned char *b = make_npy(1, bad_headers[k].hdr, NULL, bad_headers[k].nbytes, &len);
    char what[400];
    snprintf(what, sizeof what, "bad header %d <%s>", k, bad_headers[k].hdr);
    expect_reject(b, len, bad_headers[k].st, bad_headers[k].sub, what);
    free(b);
    /* The same header in a version 2.0 file fails the same way. */
    b = make_npy(2, bad_headers[k].hdr, NULL, bad_headers[k].nbytes, &len);
    expect_reject(b, len, bad_headers[k].st, bad_headers[k].sub, what);
    free(b);
}
END_TEST

START_TEST(test_reject_preamble)
{
    size_t len;
    const char *hdr = H("'<f4'", "False", "(1,)");
    unsigned char *b = make_npy(1, hdr, NULL, 4, &len);

    expect_reject(b, 0, ULY_EFORMAT, "truncated .npy file: 0 bytes", "empty");
    ck_assert_int_eq(uly_npy_parse(NULL, 0, &(uly_npy){ 0 }), ULY_EFORMAT);
    expect_reject(b, 7, ULY_EFORMAT, "truncated .npy file: 7 bytes", "7 bytes");

    b[1] = 'n';
    expect_reject(b, len, ULY_EFORMAT, "not a .npy file", "bad magic");
    expect_reject(b, 3, ULY_EFORMAT, "not a .npy file", "bad magic, short");
    b[1] = 'N';
    b[0] = 0x92;
    expect_reject(b, len, ULY_EFORMAT, "not a .npy file", "bad magic byte 0");
    b[0] = 0x93;

    static const unsigned char versions[][2] = { { 1, 1 }, { 0, 0 }, { 4, 0 }, { 2, 1 }, { 255, 255 } };
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        char sub[64];
        b[6] = versions[i][0];
        b[7] = versions[i][1];
        snprintf(sub, sizeof sub, "unsupported .npy format version %u.%u", versions[i][0], versions[i][1]);
        expect_reject(b, len, ULY_EFORMAT, sub, "version");
    }
    b[6] = 1;
    b[7] = 0;

    /* Header length beyond the end of the file. */
    size_t hl = strlen(hdr);
    b[8] = (unsigned char)((hl + 5) & 0xff);
    expect_reject(b, 10 + hl, ULY_EFORMAT, "truncated .npy header", "header length");
    b[8] = 0xff;
    b[9] = 0xff;
    expect_reject(b, len, ULY_EFORMAT, "it declares 65535 bytes", "header length 65535");
    free(b);

    /* Version 2.0 with a 4-byte length of 4 GiB - 1 and a short file. */
    b = make_npy(2, hdr, NULL, 4, &len);
    b[8] = b[9] = b[10] = b[11] = 0xff;
    expect_reject(b, len, ULY_EFORMAT, "it declares 4294967295 bytes", "v2 header length");
    expect_reject(b, 11, ULY_EFORMAT, "the version 2.0 preamble needs 12", "v2 preamble");
    free(b);

    /* Messages give the file offset where the header stopped making sense,
     * and a NUL byte in the header is text like any other. */
    b = make_npy(1, "hello", NULL, 0, &len);
    expect_reject(b, len, ULY_EFORMAT, "at byte 10: expected '{'", "v1 offset");
    free(b);
    b = make_npy(2, "  hello", NULL, 0, &len);
    expect_reject(b, len, ULY_EFORMAT, "at byte 14: expected '{'", "v2 offset");
    free(b);
    b = make_npy(1, H("'<f4'", "False", "(1,)") "  ", NULL, 4, &len);
    b[10 + strlen(hdr) + 1] = '\0';
    expect_reject(b, len, ULY_EFORMAT, "at byte 68: unexpected text after the header dict", "NUL");
    free(b);
}
END_TEST

START_TEST(test_bad_args)
{
    uly_npy n;
    float x = 1.0f;
    int64_t shape[ULY_NPY_MAXDIM + 1] = { 1, 1, 1, 1, 1, 1, 1, 1, 1 };
    ck_assert_int_eq(uly_npy_parse(NULL, 4, &n), ULY_EINVAL);
    assert_zeroed(&n);
    ck_assert_int_eq(uly_npy_parse(&x, 4, NULL), ULY_EINVAL);
    ck_assert_int_eq(uly_npy_read(NULL, &n), ULY_EINVAL);
    ck_assert_int_eq(uly_npy_read("/tmp/x.npy", NULL), ULY_EINVAL);
    ck_assert_int_eq(uly_npy_write(NULL, ULY_F32, 1, shape, &x), ULY_EINVAL);
    ck_assert_int_eq(uly_npy_write("/tmp/never.npy", (uly_dtype)7, 1, shape, &x), ULY_EINVAL);
    ck_assert_int_eq(uly_npy_write("/tmp/never.npy", ULY_F32, ULY_NPY_MAXDIM + 1, shape, &x), ULY_EINVAL);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "ndim 9"));
    ck_assert_int_eq(uly_npy_write("/tmp/never.npy", ULY_F32, -1, shape, &x), ULY_EINVAL);
    ck_assert_int_eq(uly_npy_write("/tmp/never.npy", ULY_F32, 1, NULL, &x), ULY_EINVAL);
    ck_assert_int_eq(uly_npy_write("/tmp/never.npy", ULY_F32, 1, shape, NULL), ULY_EINVAL);
    int64_t neg[2] = { 2, -1 };
    ck_assert_int_eq(uly_npy_write("/tmp/never.npy", ULY_F32, 2, neg, &x), ULY_EINVAL);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "negative dimension -1"));
    int64_t huge[2] = { INT64_MAX, 4 };
    ck_assert_int_eq(uly_npy_write("/tmp/never.npy", ULY_F32, 2, huge, &x), ULY_EOVERFLOW);
    ck_assert_int_eq(access("/tmp/never.npy", F_OK), -1);

    /* Freeing a zeroed struct, twice, or NULL is safe. */
    memset(&n, 0, sizeof n);
    uly_npy_free(&n);
    uly_npy_free(&n);
    uly_npy_free(NULL);
}
END_TEST

/* ------------------------------------------------------------- robustness */

/* Every proper prefix of a valid image is rejected, never read past. */
START_TEST(test_truncation_every_offset)
{
    for (int major = 1; major <= 3; major++) {
        char hdr[256];
        pad_header(hdr, sizeof hdr, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }",
                   major == 1 ? 10 : 12);
        size_t len;
        unsigned char *b = make_npy(major, hdr, NULL, 48, &len);
        uly_npy n;
        ck_assert_int_eq(uly_npy_parse(b, len, &n), ULY_OK);
        uly_npy_free(&n);
        for (size_t k = 0; k < len; k++) {
            unsigned char *p = malloc(k ? k : 1);
            ck_assert_ptr_nonnull(p);
            memcpy(p, b, k);
            memset(&n, 0x5a, sizeof n);
            int st = uly_npy_parse(k ? p : NULL, k, &n);
            ck_assert_msg(st == ULY_EFORMAT, "prefix of %zu bytes: status %d: %s", k, st, uly_last_error());
            ck_assert_msg(uly_last_error()[0] != '\0', "prefix of %zu bytes: no message", k);
            assert_zeroed(&n);
            free(p);
        }
        free(b);
    }
}
END_TEST

/* Each header byte replaced by characters that matter to the grammar: the
 * parser returns OK with a consistent result or an error, and nothing else. */
START_TEST(test_header_byte_mutations)
{
    static const unsigned char subst[] = { 0, ' ', '\n', '(', ')', ',', '\'', '"', '{', '}', ':',
                                           '0', '9', '-', 'L', '\\', 0x80, 0xff };
    char hdr[256];
    pad_header(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 10);
    size_t len;
    unsigned char *b = make_npy(1, hdr, NULL, 24, &len);
    size_t hend = 10 + strlen(hdr);
    for (size_t pos = 0; pos < hend; pos++) {
        for (size_t s = 0; s < sizeof subst; s++) {
            unsigned char *p = malloc(len);
            ck_assert_ptr_nonnull(p);
            memcpy(p, b, len);
            p[pos] = subst[s];
            uly_npy n;
            int st = uly_npy_parse(p, len, &n);
            if (st == ULY_OK) {
                size_t count = 1;
                for (int i = 0; i < n.ndim; i++)
                    count *= (size_t)n.shape[i];
                ck_assert_uint_eq(n.count, count);
                ck_assert_ptr_nonnull(n.data);
                uly_npy_free(&n);
            } else {
                ck_assert_msg(st == ULY_EFORMAT || st == ULY_EOVERFLOW, "status %d", st);
                assert_zeroed(&n);
            }
            free(p);
        }
    }
    free(b);
}
END_TEST

/* Every allocation of parse and read, made to fail in turn, gives ULY_ENOMEM
 * and a zeroed result; with enough allocations the call succeeds. */
START_TEST(test_alloc_failure)
{
    char path[64];
    tmp_path(path, sizeof path);
    int64_t shape[2] = { 3, 5 };
    double data[15];
    for (int i = 0; i < 15; i++)
        data[i] = i * 0.25;
    ck_assert_int_eq(uly_npy_write(path, ULY_F64, 2, shape, data), ULY_OK);
    size_t len;
    unsigned char *raw = slurp(path, &len);

    for (int which = 0; which < 2; which++) {
        int ok = 0;
        for (long k = 1; k < 10 && !ok; k++) {
            uly_npy n;
            uly_test_fail_alloc_at(k);
            int st = which ? uly_npy_read(path, &n) : uly_npy_parse(raw, len, &n);
            uly_test_fail_alloc_at(0);
            if (st == ULY_OK) {
                ck_assert(memcmp(n.data, data, sizeof data) == 0);
                uly_npy_free(&n);
                ok = 1;
            } else {
                ck_assert_msg(st == ULY_ENOMEM, "k=%ld: %d %s", k, st, uly_last_error());
                ck_assert_ptr_nonnull(strstr(uly_last_error(), "out of memory"));
                assert_zeroed(&n);
            }
        }
        ck_assert_msg(ok, "%s never succeeded", which ? "read" : "parse");
    }
    free(raw);
    unlink(path);
}
END_TEST

/* ------------------------------------------------------------------ files */

START_TEST(test_write_unwritable)
{
    const char *path = "/nonexistent/dir/x.npy";
    float x[2] = { 1, 2 };
    int64_t shape[1] = { 2 };
    int st = uly_npy_write(path, ULY_F32, 1, shape, x);
    ck_assert_int_eq(st, ULY_EIO);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), path));
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "No such file or directory"));
}
END_TEST

/* A device that accepts the open and fails every write (ENOSPC). */
START_TEST(test_write_full_device)
{
    FILE *f = fopen("/dev/full", "wb");
    if (!f)
        return;  /* no /dev/full here */
    fclose(f);
    double x[1024] = { 0 };
    int64_t shape[1] = { 1024 };
    int st = uly_npy_write("/dev/full", ULY_F64, 1, shape, x);
    ck_assert_int_eq(st, ULY_EIO);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "/dev/full"));
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "No space left on device"));
}
END_TEST


/* The streaming reader: a header that claims far more data than the file
 * holds is refused before anything of that size is allocated; slices read
 * back exactly what was written. */
START_TEST(test_stream_reader)
{
    char path[64];
    tmp_path(path, sizeof path);
    /* A 1.0 header claiming 2^40 float32 elements, then 16 bytes. */
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    char hdr[128];
    int hl = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }");
    while ((10 + hl + 1) % 64)
        hdr[hl++] = ' ';
    hdr[hl++] = '\n';
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 0xff), (unsigned char)(hl >> 8)};
    fwrite(pre, 1, 10, f);
    fwrite(hdr, 1, (size_t)hl, f);
    fwrite("0123456789abcdef", 1, 16, f);
    fclose(f);
    uly_npy h;
    uly_npy_reader *r = NULL;
    uly_test_fail_alloc_at(0);
    long before = uly_test_alloc_count();
    ck_assert_int_eq(uly_npy_reader_open(path, &h, &r), ULY_EFORMAT);
    ck_assert_ptr_null(r);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "needs 4398046511104 bytes, the file has 16"));
    /* only the reader, its path and the header were allocated */
    ck_assert_int_le(uly_test_alloc_count() - before, 3);

    float x[24];
    for (int i = 0; i < 24; i++)
        x[i] = (float)i * 0.5f;
    int64_t shape[3] = {2, 3, 4};
    ck_assert_int_eq(uly_npy_write(path, ULY_F32, 3, shape, x), ULY_OK);
    ck_assert_int_eq(uly_npy_reader_open(path, &h, &r), ULY_OK);
    ck_assert_int_eq(h.ndim, 3);
    ck_assert_int_eq((int)h.count, 24);
    ck_assert_ptr_null(h.data);
    float y[7];
    ck_assert_int_eq(uly_npy_reader_read(r, 5, 7, y), ULY_OK);
    ck_assert_int_eq(memcmp(y, x + 5, sizeof y), 0);
    ck_assert_int_eq(uly_npy_reader_read(r, 20, 5, y), ULY_EINVAL);
    /* a file that shrinks under the reader */
    ck_assert_int_eq(truncate(path, 128 + 40), 0);
    ck_assert_int_eq(uly_npy_reader_read(r, 8, 16, y), ULY_EFORMAT);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "shrank"));
    uly_npy_reader_close(r);
    unlink(path);
}
END_TEST

START_TEST(test_read_errors)
{
    uly_npy n;
    const char *missing = "/nonexistent/dir/y.npy";
    ck_assert_int_eq(uly_npy_read(missing, &n), ULY_EIO);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), missing));
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "No such file or directory"));
    assert_zeroed(&n);

    /* Files that are not regular are refused by type, before any read. */
    int st = uly_npy_read("/tmp", &n);
    ck_assert_int_eq(st, ULY_EFORMAT);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "/tmp"));
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "is a directory"));
    assert_zeroed(&n);
    st = uly_npy_read("/dev/zero", &n);
    ck_assert_int_eq(st, ULY_EFORMAT);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "is a character device"));
    assert_zeroed(&n);
    char fifo[64];
    tmp_path(fifo, sizeof fifo);
    unlink(fifo);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    st = uly_npy_read(fifo, &n); /* must not wait for a writer */
    unlink(fifo);
    ck_assert_int_eq(st, ULY_EFORMAT);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "is a FIFO"));
    assert_zeroed(&n);

    /* Format errors in a file name the file. */
    char path[64];
    tmp_path(path, sizeof path);
    float x[4] = { 1, 2, 3, 4 };
    int64_t shape[2] = { 2, 2 };
    ck_assert_int_eq(uly_npy_write(path, ULY_F32, 2, shape, x), ULY_OK);
    FILE *f = fopen(path, "ab");
    ck_assert_ptr_nonnull(f);
    fputs("junk", f);
    fclose(f);
    ck_assert_int_eq(uly_npy_read(path, &n), ULY_EFORMAT);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), path));
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "4 extra bytes"));
    assert_zeroed(&n);

    /* Empty file. */
    spit(path, "", 0);
    ck_assert_int_eq(uly_npy_read(path, &n), ULY_EFORMAT);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "0 bytes"));

    /* A file of a hand-built version 3.0 image reads like the memory image. */
    size_t len;
    char hdr[128];
    pad_header(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", 12);
    unsigned char *b = make_npy(3, hdr, x, sizeof x, &len);
    spit(path, b, len);
    free(b);
    ck_assert_int_eq(uly_npy_read(path, &n), ULY_OK);
    ck_assert_int_eq(n.ndim, 1);
    ck_assert_int_eq(n.shape[0], 4);
    ck_assert(memcmp(n.data, x, sizeof x) == 0);
    uly_npy_free(&n);
    unlink(path);
}
END_TEST

/* A larger file read back exactly (FIFOs are refused: test_read_errors). */
START_TEST(test_read_large)
{
    char path[64];
    tmp_path(path, sizeof path);
    int64_t shape[2] = { 257, 129 };
    size_t count = 257 * 129;
    double *x = malloc(count * sizeof *x);
    ck_assert_ptr_nonnull(x);
    fill_bits(x, count * sizeof *x, 7);
    ck_assert_int_eq(uly_npy_write(path, ULY_F64, 2, shape, x), ULY_OK);
    uly_npy n;
    ck_assert_int_eq(uly_npy_read(path, &n), ULY_OK);
    ck_assert_uint_eq(n.count, count);
    ck_assert(memcmp(n.data, x, count * sizeof *x) == 0);
    uly_npy_free(&n);

    free(x);
    unlink(path);
}
END_TEST

/* 64-bit integers: read exactly by uly_npy_read_i64; a float file is refused
 * there, an integer file by the float reader. */
START_TEST(test_read_i64)
{
    char path[64];
    tmp_path(path, sizeof path);
    const int64_t v[6] = {0, 5, -3, INT64_MAX, INT64_MIN, 1000000000000LL};
    unsigned char img[128 + 48];
    memset(img, ' ', sizeof img);
    const char *h = "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }";
    memcpy(img, "\x93NUMPY\x01\x00", 8);
    img[8] = 118;  /* 10 + 118 = 128 */
    img[9] = 0;
    memcpy(img + 10, h, strlen(h));
    img[127] = '\n';
    for (int i = 0; i < 6; i++)
        for (int k = 0; k < 8; k++)
            img[128 + 8 * i + k] = (unsigned char)((uint64_t)v[i] >> (8 * k));
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(img, 1, sizeof img, f), sizeof img);
    ck_assert_int_eq(fclose(f), 0);
    int ndim;
    int64_t shape[ULY_NPY_MAXDIM], *x = NULL;
    size_t count;
    ck_assert_int_eq(uly_npy_read_i64(path, &ndim, shape, &count, &x), ULY_OK);
    ck_assert_int_eq(ndim, 2);
    ck_assert_int_eq(shape[0], 2);
    ck_assert_int_eq(shape[1], 3);
    ck_assert_uint_eq(count, 6);
    ck_assert(memcmp(x, v, sizeof v) == 0);
    uly_free(x);
    uly_npy n;
    ck_assert_int_eq(uly_npy_read(path, &n), ULY_EFORMAT);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "'<i8' (integers) where floats are expected"));
    /* a float file where integers are expected */
    const int64_t fs[1] = {3};
    const double d[3] = {1, 2, 3};
    ck_assert_int_eq(uly_npy_write(path, ULY_F64, 1, fs, d), ULY_OK);
    x = (int64_t *)path;
    ck_assert_int_eq(uly_npy_read_i64(path, &ndim, shape, &count, &x), ULY_EFORMAT);
    ck_assert_ptr_null(x);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "'<f8' where 64-bit integers ('<i8') are expected"));
    /* truncated data */
    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(img, 1, sizeof img - 8, f), sizeof img - 8);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(uly_npy_read_i64(path, &ndim, shape, &count, &x), ULY_EFORMAT);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "truncated"));
    unlink(path);
}
END_TEST


/* ------------------------------------------- element types (src/elem.c) */

static uint16_t f16_of(double x)
{
    uint16_t h;
    ck_assert_int_eq(uly_elem_from_f64(ULY_ELEM_F16, &x, 1, &h), ULY_OK);
    return h;
}

static uint16_t bf16_of(double x)
{
    uint16_t h;
    ck_assert_int_eq(uly_elem_from_f64(ULY_ELEM_BF16, &x, 1, &h), ULY_OK);
    return h;
}

static double f64_of(int elem, const void *x)
{
    double d;
    ck_assert_int_eq(uly_elem_to_f64(elem, x, 1, &d), ULY_OK);
    return d;
}

/* Every 16-bit encoding of elem to double and back is itself; a NaN stays a NaN. */
static void all_encodings_round_trip(int elem)
{
    static uint16_t h[65536], back[65536];
    static double x[65536];
    for (unsigned b = 0; b < 65536; b++)
        h[b] = (uint16_t)b;
    ck_assert_int_eq(uly_elem_to_f64(elem, h, 65536, x), ULY_OK);
    ck_assert_int_eq(uly_elem_from_f64(elem, x, 65536, back), ULY_OK);
    for (unsigned b = 0; b < 65536; b++) {
        int ok = isnan(x[b]) ? (back[b] & 0x7fff) > (elem == ULY_ELEM_F16 ? 0x7c00 : 0x7f80) : back[b] == h[b];
        if (!ok)
            ck_abort_msg("%s %04x -> %a -> %04x", uly_elem_name(elem), h[b], x[b], back[b]);
    }
}

/* Known encodings of IEEE binary16, both ways where the value is exact. */
START_TEST(test_f16_values)
{
    static const struct {
        double x;
        uint16_t bits;
        int exact;
    } c[] = {
        { 1.0, 0x3c00, 1 },          { -2.0, 0xc000, 1 },          { 65504.0, 0x7bff, 1 },
        { 0x1p-24, 0x0001, 1 },      { 0x3ffp-24, 0x03ff, 1 },      { 0x1p-14, 0x0400, 1 },
        { 0.0, 0x0000, 1 },          { -0.0, 0x8000, 1 },           { 0.333251953125, 0x3555, 1 },
        { 1.0 / 3.0, 0x3555, 0 },    { 0.1, 0x2e66, 0 },
        /* ties go to the even neighbour */
        { 1.0 + 0x1p-11, 0x3c00, 0 }, { 1.0 + 3 * 0x1p-11, 0x3c02, 0 }, { 1.0 + 0x1p-11 + 0x1p-40, 0x3c01, 0 },
        { 0x1p-25, 0x0000, 0 },      { 3 * 0x1p-25, 0x0002, 0 },    { 0x1p-25 + 0x1p-60, 0x0001, 0 },
        { 0x7ffp-25, 0x0400, 0 },    /* the largest subnormal's upper tie rounds to the smallest normal */
        /* overflow: 65520 is the tie between 65504 and 65536, and 65536 is Inf */
        { 65519.99, 0x7bff, 0 },     { 65520.0, 0x7c00, 0 },        { 1e6, 0x7c00, 0 },   { -1e300, 0xfc00, 0 },
        { INFINITY, 0x7c00, 1 },     { -INFINITY, 0xfc00, 1 },      { 1e-300, 0x0000, 0 },
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        ck_assert_msg(f16_of(c[i].x) == c[i].bits, "f16(%a) = %04x, expected %04x", c[i].x, f16_of(c[i].x),
                      c[i].bits);
        if (c[i].exact) {
            double back = f64_of(ULY_ELEM_F16, &c[i].bits);
            ck_assert_msg(back == c[i].x && signbit(back) == signbit(c[i].x), "f16 %04x -> %a, expected %a",
                          c[i].bits, back, c[i].x);
        }
    }
    uint16_t nan = f16_of(NAN);
    ck_assert_msg((nan & 0x7c00) == 0x7c00 && (nan & 0x03ff) != 0, "f16(NaN) = %04x", nan);
    ck_assert(isnan(f64_of(ULY_ELEM_F16, &nan)));
    /* every encoding converts to double and back to itself (NaNs to a NaN) */
    all_encodings_round_trip(ULY_ELEM_F16);
}
END_TEST

START_TEST(test_bf16_values)
{
    static const struct {
        double x;
        uint16_t bits;
    } c[] = {
        { 1.0, 0x3f80 },                    { 3.0, 0x4040 },              { -0.5, 0xbf00 },
        { 1.0 + 0x1p-8, 0x3f80 },           { 1.0 + 3 * 0x1p-8, 0x3f82 },
        /* one rounding from double: through float32 this would tie and give 0x3f80 */
        { 1.0 + 0x1p-8 + 0x1p-30, 0x3f81 },
        { 0x1.fep127, 0x7f7f },             { 0x1.ffp127, 0x7f80 },       { 1e39, 0x7f80 },
        { 0x1p-133, 0x0001 },               { 0x1p-134, 0x0000 },         { 0x1p-126, 0x0080 },
        { -0.0, 0x8000 },                   { -INFINITY, 0xff80 },
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        ck_assert_msg(bf16_of(c[i].x) == c[i].bits, "bf16(%a) = %04x, expected %04x", c[i].x, bf16_of(c[i].x),
                      c[i].bits);
    all_encodings_round_trip(ULY_ELEM_BF16);
    uint16_t nan = bf16_of(-NAN);
    ck_assert(isnan(f64_of(ULY_ELEM_BF16, &nan)));
}
END_TEST

START_TEST(test_f32_and_ints)
{
    double x[4] = { 1.0 + 0x1p-24, 1e39, 0x1.fffffefp127, -0x1p-149 };
    float f[4];
    ck_assert_int_eq(uly_elem_from_f64(ULY_ELEM_F32, x, 4, f), ULY_OK);
    ck_assert(f[0] == 1.0f);
    ck_assert(isinf(f[1]) && f[1] > 0);
    ck_assert(f[2] == 0x1.fffffep127f);
    ck_assert(f[3] == -0x1p-149f);
    int64_t big[3] = { (int64_t)1 << 53, -((int64_t)1 << 53), ((int64_t)1 << 53) + 1 };
    double d[3];
    ck_assert_int_eq(uly_elem_to_f64(ULY_ELEM_I64, big, 2, d), ULY_OK);
    ck_assert(d[0] == 0x1p53 && d[1] == -0x1p53);
    ck_assert_int_eq(uly_elem_to_f64(ULY_ELEM_I64, big, 3, d), ULY_EINVAL);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "element 2"));
    int32_t i32;
    double ok = -2147483648.0, half = 1.5, over = 2147483648.0;
    ck_assert_int_eq(uly_elem_from_f64(ULY_ELEM_I32, &ok, 1, &i32), ULY_OK);
    ck_assert_int_eq(i32, INT32_MIN);
    ck_assert_int_eq(uly_elem_from_f64(ULY_ELEM_I32, &half, 1, &i32), ULY_EINVAL);
    ck_assert_int_eq(uly_elem_from_f64(ULY_ELEM_I32, &over, 1, &i32), ULY_EINVAL);
    double nan = NAN;
    int64_t i64;
    ck_assert_int_eq(uly_elem_from_f64(ULY_ELEM_I64, &nan, 1, &i64), ULY_EINVAL);
    /* names and sizes */
    static const char *const names[] = { "f16", "bf16", "f32", "f64", "i32", "i64" };
    static const char *const numpy[] = { "float16", "bfloat16", "float32", "float64", "int32", "int64" };
    static const size_t sizes[] = { 2, 2, 4, 8, 4, 8 };
    for (int e = 0; e < ULY_ELEM_COUNT; e++) {
        int got = -1;
        ck_assert_str_eq(uly_elem_name(e), names[e]);
        ck_assert_int_eq(uly_elem_parse(names[e], &got), ULY_OK);
        ck_assert_int_eq(got, e);
        ck_assert_int_eq(uly_elem_parse(numpy[e], &got), ULY_OK);
        ck_assert_int_eq(got, e);
        ck_assert_uint_eq(uly_elem_size(e), sizes[e]);
        ck_assert_int_eq(uly_elem_is_float(e), e <= ULY_ELEM_F64);
    }
    int got;
    ck_assert_int_eq(uly_elem_parse("f8", &got), ULY_EINVAL);
    ck_assert_str_eq(uly_elem_name(ULY_ELEM_COUNT), "?");
    ck_assert_uint_eq(uly_elem_size(-1), 0);
}
END_TEST

/* A '<f2' file written by uly_npy_write_as reads back as float32 with the
 * rounded values, through every reader. */
START_TEST(test_npy_f16)
{
    char path[64];
    tmp_path(path, sizeof path);
    float x[6] = { 1.0f, 0.1f, -65504.0f, 70000.0f, 0x1p-24f, -0.0f };
    int64_t shape[2] = { 2, 3 };
    ck_assert_int_eq(uly_npy_write_as(path, ULY_ELEM_F16, ULY_F32, 2, shape, x), ULY_OK);
    size_t len;
    unsigned char *b = slurp(path, &len);
    ck_assert_uint_eq(len, 128 + 12);
    char head[119];
    memcpy(head, b + 10, 118);
    head[118] = '\0';
    ck_assert_ptr_nonnull(strstr(head, "'descr': '<f2'"));
    free(b);
    uly_npy n;
    ck_assert_int_eq(uly_npy_read(path, &n), ULY_OK);
    ck_assert_int_eq(n.dtype, ULY_F32);
    ck_assert_int_eq(n.elem, ULY_ELEM_F16);
    ck_assert_uint_eq(n.count, 6);
    const float *y = n.data;
    for (int i = 0; i < 6; i++) {
        uint16_t h = f16_of(x[i]);
        ck_assert_msg(y[i] == (float)f64_of(ULY_ELEM_F16, &h), "element %d: %a", i, y[i]);
    }
    ck_assert(isinf(y[3]) && signbit(y[5]));
    uly_npy_free(&n);
    /* a slice through the streaming reader */
    uly_npy_reader *r;
    uly_npy h;
    float part[2];
    ck_assert_int_eq(uly_npy_reader_open(path, &h, &r), ULY_OK);
    ck_assert_int_eq(h.elem, ULY_ELEM_F16);
    ck_assert_int_eq(uly_npy_reader_read(r, 1, 2, part), ULY_OK);
    ck_assert(part[1] == -65504.0f);
    uly_npy_reader_close(r);
    /* f32 and f64 files report their element types */
    ck_assert_int_eq(uly_npy_write(path, ULY_F64, 2, shape, (double[6]){ 0 }), ULY_OK);
    ck_assert_int_eq(uly_npy_read(path, &n), ULY_OK);
    ck_assert_int_eq(n.elem, ULY_ELEM_F64);
    uly_npy_free(&n);
    ck_assert_int_eq(uly_npy_write(path, ULY_F32, 2, shape, x), ULY_OK);
    ck_assert_int_eq(uly_npy_read(path, &n), ULY_OK);
    ck_assert_int_eq(n.elem, ULY_ELEM_F32);
    uly_npy_free(&n);
    /* bf16 cannot be a .npy file */
    ck_assert_int_eq(uly_npy_write_as(path, ULY_ELEM_BF16, ULY_F32, 2, shape, x), ULY_EINVAL);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "bf16"));
    /* an integer file of non-integral values is refused before it is written */
    ck_assert_int_eq(uly_npy_write_as(path, ULY_ELEM_I32, ULY_F32, 2, shape, x), ULY_EINVAL);
    unlink(path);
}
END_TEST

/* ------------------------------------------ safetensors (src/safetensors.c) */

/* Every dtype through uly_safetensors_write and uly_tfile. */
START_TEST(test_safetensors_roundtrip)
{
    char path[64];
    tmp_path(path, sizeof path);
    float xf[5] = { 1.0f, 0.1f, -3.5f, 1e-8f, 70000.0f };
    double xd[3] = { 0.1, -1e300, 0x1p-1074 };
    int64_t xi[4] = { 0, -7, 2147483647, -2147483648LL };
    int64_t xl[2] = { ((int64_t)1 << 53) + 1, -5 };
    int64_t s5[1] = { 5 }, s3[2] = { 3, 1 }, s4[2] = { 2, 2 }, s2[1] = { 2 };
    uly_twrite t[6] = {
        { "h", ULY_ELEM_F16, ULY_ELEM_F32, 1, s5, xf },  { "b", ULY_ELEM_BF16, ULY_ELEM_F32, 1, s5, xf },
        { "f", ULY_ELEM_F32, ULY_ELEM_F32, 1, s5, xf },  { "d", ULY_ELEM_F64, ULY_ELEM_F64, 2, s3, xd },
        { "i", ULY_ELEM_I32, ULY_ELEM_I64, 2, s4, xi },  { "l", ULY_ELEM_I64, ULY_ELEM_I64, 1, s2, xl },
    };
    const char *keys[2] = { "method", "scale" }, *vals[2] = { "ulysses", "0.125" };
    ck_assert_int_eq(uly_safetensors_write(path, 6, t, 2, keys, vals), ULY_OK);
    size_t len;
    unsigned char *b = slurp(path, &len);
    uint64_t L = 0;
    for (int i = 7; i >= 0; i--)
        L = L << 8 | b[i];
    ck_assert_uint_eq((8 + L) % 8, 0);
    ck_assert_uint_eq(len, 8 + L + 10 + 10 + 20 + 24 + 16 + 16);
    ck_assert_int_eq(b[8], '{');
    free(b);

    uly_tfile *f;
    ck_assert_int_eq(uly_tfile_open(path, &f), ULY_OK);
    ck_assert_int_eq(uly_tfile_count(f), 6);
    ck_assert_str_eq(uly_tfile_meta(f, "method"), "ulysses");
    ck_assert_str_eq(uly_tfile_meta(f, "scale"), "0.125");
    ck_assert_ptr_null(uly_tfile_meta(f, "causal"));
    static const char order[] = "hbfdil";  /* ascending data offset: the order written */
    for (int i = 0; i < 6; i++) {
        const uly_tinfo *in = uly_tfile_info(f, i);
        ck_assert_int_eq(in->name[0], order[i]);
        ck_assert_int_eq(in->elem, t[i].elem);
        ck_assert_int_eq(in->ndim, t[i].ndim);
        ck_assert_int_eq(uly_tfile_find(f, t[i].name), i);
    }
    ck_assert_int_eq(uly_tfile_find(f, "q"), -1);
    ck_assert_ptr_null(uly_tfile_info(f, 6));
    double d[5];
    float g[5];
    int64_t l[4];
    ck_assert_int_eq(uly_tfile_read_f64(f, 0, 0, 5, d), ULY_OK);
    for (int i = 0; i < 5; i++) {
        uint16_t h = f16_of(xf[i]);
        ck_assert(d[i] == f64_of(ULY_ELEM_F16, &h));
    }
    ck_assert_int_eq(uly_tfile_read_f32(f, 1, 0, 5, g), ULY_OK);
    for (int i = 0; i < 5; i++) {
        uint16_t h = bf16_of(xf[i]);
        ck_assert(g[i] == (float)f64_of(ULY_ELEM_BF16, &h));
    }
    ck_assert_int_eq(uly_tfile_read_f32(f, 2, 1, 4, g), ULY_OK);
    ck_assert(memcmp(g, xf + 1, 4 * sizeof(float)) == 0);
    ck_assert_int_eq(uly_tfile_read_f64(f, 3, 0, 3, d), ULY_OK);
    ck_assert(memcmp(d, xd, sizeof xd) == 0);
    ck_assert_int_eq(uly_tfile_read_f32(f, 3, 0, 3, g), ULY_OK);  /* rounded to nearest */
    ck_assert(g[0] == 0.1f && isinf(g[1]) && g[1] < 0 && g[2] == 0.0f);
    ck_assert_int_eq(uly_tfile_read_i64(f, 4, 0, 4, l), ULY_OK);
    ck_assert(memcmp(l, xi, sizeof xi) == 0);
    ck_assert_int_eq(uly_tfile_read_i64(f, 5, 0, 2, l), ULY_OK);
    ck_assert(memcmp(l, xl, sizeof xl) == 0);
    ck_assert_int_eq(uly_tfile_read_f64(f, 5, 1, 1, d), ULY_OK);
    ck_assert(d[0] == -5.0);
    ck_assert_int_eq(uly_tfile_read_f64(f, 5, 0, 1, d), ULY_EINVAL);  /* 2^53 + 1 */
    ck_assert_int_eq(uly_tfile_read_f32(f, 4, 0, 1, g), ULY_EINVAL);  /* integers as floats */
    ck_assert_int_eq(uly_tfile_read_i64(f, 2, 0, 1, l), ULY_EINVAL);  /* floats as integers */
    ck_assert_int_eq(uly_tfile_read_f64(f, 0, 3, 3, d), ULY_EINVAL);  /* past the end */
    uly_tfile_close(f);

    /* a .npy file through the same reader: one tensor named by the file */
    char npy[80];
    snprintf(npy, sizeof npy, "%s_q.npy", path);
    ck_assert_int_eq(uly_npy_write_as(npy, ULY_ELEM_F16, ULY_F32, 1, s5, xf), ULY_OK);
    ck_assert_int_eq(uly_tfile_open(npy, &f), ULY_OK);
    ck_assert_int_eq(uly_tfile_count(f), 1);
    ck_assert(strstr(uly_tfile_info(f, 0)->name, "_q") != NULL);
    ck_assert_int_eq(uly_tfile_info(f, 0)->elem, ULY_ELEM_F16);
    ck_assert_int_eq(uly_tfile_read_f64(f, 0, 0, 5, d), ULY_OK);
    ck_assert(d[0] == 1.0 && d[2] == -3.5);
    ck_assert_ptr_null(uly_tfile_meta(f, "method"));
    uly_tfile_close(f);
    ck_assert_int_eq(uly_npy_write_as(npy, ULY_ELEM_I32, ULY_F64, 1, s3, (double[3]){ 4, -2, 9 }), ULY_OK);
    ck_assert_int_eq(uly_tfile_open(npy, &f), ULY_OK);
    ck_assert_int_eq(uly_tfile_read_i64(f, 0, 0, 3, l), ULY_OK);
    ck_assert(l[0] == 4 && l[1] == -2 && l[2] == 9);
    uly_tfile_close(f);
    unlink(npy);

    /* writer arguments */
    uly_twrite dup[2] = { t[0], t[0] };
    ck_assert_int_eq(uly_safetensors_write(path, 2, dup, 0, NULL, NULL), ULY_EINVAL);
    uly_twrite meta = t[0];
    meta.name = "__metadata__";
    ck_assert_int_eq(uly_safetensors_write(path, 1, &meta, 0, NULL, NULL), ULY_EINVAL);
    unlink(path);
}
END_TEST

/* A safetensors file of the given header text (8-byte length L, or the
 * text's length when L is 0) and nbytes of data. */
static void make_st(const char *path, const char *header, uint64_t L, size_t nbytes)
{
    size_t hl = strlen(header);
    if (!L)
        L = hl;
    size_t len = 8 + hl + nbytes;
    unsigned char *b = calloc(1, len);
    ck_assert_ptr_nonnull(b);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(L >> (8 * i));
    memcpy(b + 8, header, hl);
    spit(path, b, len);
    free(b);
}

static const struct {
    const char *header;
    uint64_t L;
    size_t nbytes;
    const char *msg;
} bad_st[] = {
    /* the file cut inside the header */
    { "{\"q\":{\"dtype\":\"F32\",\"shape\":[2],\"dat", 60, 0, "truncated safetensors header: it declares 60 bytes" },
    { "", 0, 0, "safetensors header length 0 is too small" },
    /* a length that no header of the file can have */
    { "{\"q\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", (uint64_t)1 << 40, 8,
      "safetensors header length 1099511627776 is beyond the file" },
    { "xxxxxxxx", 9, 0, "safetensors header length 9 is beyond the file" },
    { "{\"q\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[0,2]}}", 0, 2, "tensor 'q': unsupported dtype 'BOOL'" },
    { "{\"q\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", 0, 2, "unsupported dtype 'F8_E4M3'" },
    { "{\"q\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 4,
      "tensor 'q': data_offsets [0, 8] lie outside the data (4 bytes)" },
    { "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 0, 12, "tensors 'a' (bytes [0, 8)) and 'b'" },
    { "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
      "\"b\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[16,18]},"
      "\"c\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[8,12]}}", 0, 18, "tensors 'a' (bytes [0, 16)) and 'c'" },
    { "{\"q\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 0, 24,
      "tensor 'q': data_offsets [0, 20] hold 20 bytes, shape [2, 3] of F32 needs 24" },
    { "[1, 2]", 0, 0, "safetensors header is an array, not a JSON object" },
    { "\"q\"     ", 0, 0, "safetensors header is a string, not a JSON object" },
    { "{\"q\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 0, 8, "tensor 'q': no 'shape' key" },
    { "{\"q\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 8, "tensor 'q': no 'dtype' key" },
    { "{\"q\":{\"dtype\":\"F32\",\"shape\":[2]}}", 0, 8, "tensor 'q': no 'data_offsets' key" },
    { "{\"q\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 0, 8, "unexpected key 'x'" },
    { "{\"q\":[1]}", 0, 0, "tensor 'q': the entry is an array, not an object" },
    { "{\"q\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 0, 8, "dimension 0 of 'shape'" },
    { "{\"q\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 0, 4, "9 dimensions" },
    { "{\"q\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 0, 8, "are not an interval" },
    { "{\"q\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 0, 8, "not an array of two integers" },
    { "{\"q\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"q\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 8, "not valid JSON: duplicate object key" },
    { "{\"__metadata__\":{\"a\":1}}", 0, 0, "'__metadata__' value of 'a' is an integer" },
    { "{\"q\": ", 0, 0, "not valid JSON" },
    { "{", 1, 0, "header length 1 is too small" },
};

START_TEST(test_safetensors_reject)
{
    char path[64];
    tmp_path(path, sizeof path);
    make_st(path, bad_st[_i].header, bad_st[_i].L, bad_st[_i].nbytes);
    uly_tfile *f = (uly_tfile *)&f;
    int st = uly_tfile_open(path, &f);
    ck_assert_msg(st == ULY_EFORMAT, "case %d: status %d (%s)", _i, st, uly_last_error());
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(uly_last_error(), bad_st[_i].msg) != NULL, "case %d: message '%s', expected '%s'", _i,
                  uly_last_error(), bad_st[_i].msg);
    ck_assert_msg(strncmp(uly_last_error(), path, strlen(path)) == 0, "case %d: '%s' does not name the file", _i,
                  uly_last_error());
    unlink(path);
}
END_TEST

/* The file's own cuts: every prefix of a good file is refused, never read. */
START_TEST(test_safetensors_truncation)
{
    char path[64], cut[80];
    tmp_path(path, sizeof path);
    snprintf(cut, sizeof cut, "%s.cut", path);
    float x[4] = { 1, 2, 3, 4 };
    int64_t s4[1] = { 4 };
    uly_twrite t = { "q", ULY_ELEM_F32, ULY_ELEM_F32, 1, s4, x };
    ck_assert_int_eq(uly_safetensors_write(path, 1, &t, 0, NULL, NULL), ULY_OK);
    size_t len;
    unsigned char *b = slurp(path, &len);
    uint64_t L = b[0] | (uint64_t)b[1] << 8;
    for (size_t n = 0; n < len; n++) {
        spit(cut, b, n);
        uly_tfile *f;
        ck_assert_int_eq(uly_tfile_open(cut, &f), ULY_EFORMAT);
        const char *want = n < 8 || n < 8 + L ? "truncated safetensors header" : "lie outside the data";
        ck_assert_msg(strstr(uly_last_error(), want), "%zu bytes: %s", n, uly_last_error());
    }
    /* and the whole file reads */
    uly_tfile *f;
    ck_assert_int_eq(uly_tfile_open(path, &f), ULY_OK);
    uly_tfile_close(f);
    /* a directory is named as such */
    ck_assert_int_eq(uly_tfile_open("/tmp", &f), ULY_EFORMAT);
    ck_assert_ptr_nonnull(strstr(uly_last_error(), "is a directory, not a .npy file"));
    free(b);
    unlink(cut);
    unlink(path);
}
END_TEST

/* ------------------------------------------------------------------ suite */

Suite *make_npy_suite(void);

Suite *make_npy_suite(void)
{
    Suite *s = suite_create("npy");
    int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
    int nbad = (int)(sizeof bad_headers / sizeof bad_headers[0]);

    TCase *tc = tcase_create("roundtrip");
    tcase_add_loop_test(tc, test_roundtrip_f32, 0, nshapes);
    tcase_add_loop_test(tc, test_roundtrip_f64, 0, nshapes);
    tcase_add_test(tc, test_write_numpy_layout);
    tcase_add_test(tc, test_read_large);
    tcase_add_test(tc, test_read_i64);
    suite_add_tcase(s, tc);

    tc = tcase_create("parse");
    tcase_add_test(tc, test_parse_numpy_header);
    tcase_add_test(tc, test_parse_variants);
    tcase_add_loop_test(tc, test_reject_header, 0, nbad);
    tcase_add_test(tc, test_reject_preamble);
    tcase_add_test(tc, test_bad_args);
    suite_add_tcase(s, tc);

    tc = tcase_create("formats");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_f16_values);
    tcase_add_test(tc, test_bf16_values);
    tcase_add_test(tc, test_f32_and_ints);
    tcase_add_test(tc, test_npy_f16);
    tcase_add_test(tc, test_safetensors_roundtrip);
    tcase_add_loop_test(tc, test_safetensors_reject, 0, (int)(sizeof bad_st / sizeof bad_st[0]));
    tcase_add_test(tc, test_safetensors_truncation);
    suite_add_tcase(s, tc);

    tc = tcase_create("robustness");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_truncation_every_offset);
    tcase_add_test(tc, test_header_byte_mutations);
    tcase_add_test(tc, test_alloc_failure);
    suite_add_tcase(s, tc);

    tc = tcase_create("files");
    tcase_add_test(tc, test_write_unwritable);
    tcase_add_test(tc, test_write_full_device);
    tcase_add_test(tc, test_read_errors);
    tcase_add_test(tc, test_stream_reader);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(make_npy_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
