/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ulysses_npy.h -- the tensor files of libulysses: .npy (whole files,
 * in-memory images and streaming reads) and .safetensors, the element types
 * of the field (f16, bf16, f32, f64, i32, i64) and their exact conversions,
 * and one reader over both formats (uly_tfile).  ulysses.h includes it.
 */
#ifndef ULYSSES_NPY_H
#define ULYSSES_NPY_H

#include "ulysses_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------- element types */

/* The element types of tensor files.  f16 is IEEE binary16, bf16 the upper
 * half of a binary32 (bfloat16). */
typedef enum uly_elem {
    ULY_ELEM_F16 = 0, ULY_ELEM_BF16, ULY_ELEM_F32, ULY_ELEM_F64, ULY_ELEM_I32, ULY_ELEM_I64,
    ULY_ELEM_COUNT
} uly_elem;
/* "f16", "bf16", "f32", "f64", "i32", "i64"; "?" for an unknown value. */
const char *uly_elem_name(int elem);
/* The inverse (also takes numpy's "float16", "bfloat16", "float32", "float64",
 * "int32", "int64"); ULY_EINVAL for an unknown name. */
int uly_elem_parse(const char *name, int *elem);
/* Bytes per element (2, 2, 4, 8, 4, 8; 0 for an unknown value). */
size_t uly_elem_size(int elem);
/* Whether the type is a floating-point one. */
int uly_elem_is_float(int elem);
/* Convert n elements (host byte order) of type elem to double: exact for
 * every type (i64 beyond 2^53 is refused, ULY_EINVAL, naming the index). */
int uly_elem_to_f64(int elem, const void *src, size_t n, double *dst);
/* Convert n doubles to type elem, rounding to nearest even (f16, bf16,
 * f32); a finite value beyond the type's range becomes +-Inf for the float
 * types (as numpy's astype does) and is refused for the integer types
 * (ULY_EINVAL), as is a non-integral value. */
int uly_elem_from_f64(int elem, const double *src, size_t n, void *dst);

/* ----------------------------------------------------------------- .npy */

#define ULY_NPY_MAXDIM 8

typedef struct uly_npy {
    uly_dtype dtype;                  /* float32 ('<f4', and '<f2' converted on read) or float64 ('<f8') */
    int ndim;
    int64_t shape[ULY_NPY_MAXDIM];
    size_t count;                     /* elements */
    void *data;                       /* count elements, C order, owned */
    int elem;                         /* the file's element type (uly_elem): a '<f2' file reads as
                                         float32 (exact), elem ULY_ELEM_F16 */
} uly_npy;

/* Parse a complete .npy image held in memory (never reads past len). */
int uly_npy_parse(const void *buf, size_t len, uly_npy *out);
/* Read a whole .npy file (the streaming reader below, all elements). */
int uly_npy_read(const char *path, uly_npy *out);
/* Streaming read of a .npy file.  open checks that path is a regular file
 * (directories, FIFOs, devices and sockets are refused, ULY_EFORMAT, naming
 * the type), reads and checks the preamble and header and compares the data
 * size the header declares with the file's size, all before reading or
 * allocating anything of the data's size.  *header gets dtype, ndim, shape
 * and count (data NULL).  read copies elements [first, first + count) into
 * dst (host byte order).  A file that shrinks meanwhile gives ULY_EFORMAT. */
typedef struct uly_npy_reader uly_npy_reader;
int uly_npy_reader_open(const char *path, uly_npy *header, uly_npy_reader **r);
int uly_npy_reader_read(uly_npy_reader *r, size_t first, size_t count, void *dst);
void uly_npy_reader_close(uly_npy_reader *r);
/* Read a whole .npy file of 64-bit signed integers ('<i8'; e.g. document
 * offsets), with the checks of the streaming reader: *ndim, shape, *count
 * and *data (count elements, free with uly_free).  A float file is refused
 * (ULY_EFORMAT), as the float readers refuse '<i8'. */
int uly_npy_read_i64(const char *path, int *ndim, int64_t shape[ULY_NPY_MAXDIM], size_t *count,
                     int64_t **data);
/* Write a .npy file (format 1.0, C order, little-endian). */
int uly_npy_write(const char *path, uly_dtype dtype, int ndim,
                  const int64_t *shape, const void *data);
/* The same, with the elements (of type dtype) converted to file type elem
 * ('<f2', '<f4', '<f8', '<i4', '<i8'; bf16, which .npy cannot hold, is
 * ULY_EINVAL) as uly_elem_from_f64 does. */
int uly_npy_write_as(const char *path, int elem, uly_dtype dtype, int ndim, const int64_t *shape,
                     const void *data);
/* Release what uly_npy_parse / uly_npy_read allocated; safe on a zeroed struct. */
void uly_npy_free(uly_npy *n);

/* ----------------------------------------------------------- .safetensors */

/*
 * A .safetensors file: an 8-byte little-endian header length L, L bytes of
 * JSON (an object: tensor name -> {"dtype": "F16"|"BF16"|"F32"|"F64"|"I32"|
 * "I64", "shape": [...], "data_offsets": [begin, end]}, and an optional
 * "__metadata__" object of strings), then the data (offsets relative to the
 * byte after the header).  The reader checks, before reading or allocating
 * anything of the data's size: a regular file; L >= 2 and 8 + L <= the
 * file's size (a "header length beyond the file" and a "truncated header"
 * are named as such); the header parses (jansson) as an object; every entry
 * has exactly those keys, a known dtype, at most ULY_NPY_MAXDIM
 * non-negative dimensions, end - begin == the element count x the element
 * size, and lies inside the data; no two tensors overlap.  Every failure is
 * ULY_EFORMAT (ULY_EIO for a read error) with a message naming the file and
 * the tensor.  Other dtypes (BOOL, U8, F8_*...) are refused by name.
 */

/* ------------------------------------------------------- tensor files */

/* One tensor of a file: its name (a .npy file's one tensor is named by the
 * file's base name without ".npy"), element type, shape and element count. */
typedef struct uly_tinfo {
    const char *name;
    int elem;                         /* uly_elem */
    int ndim;
    int64_t shape[ULY_NPY_MAXDIM];
    size_t count;
} uly_tinfo;

/* An open .npy or .safetensors file (chosen by the first bytes: the .npy
 * magic, else safetensors), streamed: nothing of the data's size is read or
 * allocated by open.  The checks of uly_npy_reader_open and of the
 * safetensors reader above. */
typedef struct uly_tfile uly_tfile;
int uly_tfile_open(const char *path, uly_tfile **f);
/* Tensors in the file (1 for .npy), in the file's order (safetensors:
 * ascending data offset). */
int uly_tfile_count(const uly_tfile *f);
const uly_tinfo *uly_tfile_info(const uly_tfile *f, int i);
/* Index of the tensor named `name`, or -1. */
int uly_tfile_find(const uly_tfile *f, const char *name);
/* A "__metadata__" value (safetensors), or NULL. */
const char *uly_tfile_meta(const uly_tfile *f, const char *key);
/* Read elements [first, first + count) of tensor i (C order), converted:
 * _f64 exactly from every type; _f32 from f16, bf16, f32 exactly and from
 * f64 rounded to nearest (ULY_EINVAL for integer tensors); _i64 from i32 and
 * i64 (ULY_EINVAL for float tensors).  A file that shrank gives ULY_EFORMAT. */
int uly_tfile_read_f64(uly_tfile *f, int i, size_t first, size_t count, double *dst);
int uly_tfile_read_f32(uly_tfile *f, int i, size_t first, size_t count, float *dst);
int uly_tfile_read_i64(uly_tfile *f, int i, size_t first, size_t count, int64_t *dst);
void uly_tfile_close(uly_tfile *f);

/* One tensor to write: data holds count elements of type src (ULY_ELEM_F32,
 * F64, I32 or I64), written as type elem (converted as uly_elem_from_f64). */
typedef struct uly_twrite {
    const char *name;
    int elem;
    int src;
    int ndim;
    const int64_t *shape;
    const void *data;
} uly_twrite;
/* Write a .safetensors file of n tensors (names unique, not "__metadata__")
 * with the metadata (nmeta key/value string pairs; keys[i], values[i]),
 * data in the given order, aligned to 8 bytes (the header padded with
 * spaces, as the reference writer does). */
int uly_safetensors_write(const char *path, int n, const uly_twrite *t, int nmeta, const char *const *keys,
                          const char *const *values);

#ifdef __cplusplus
}
#endif

#endif /* ULYSSES_NPY_H */
