/*
 * ulysses_npy.h -- the .npy reader and writer of libulysses (whole files,
 * in-memory images and streaming reads).  ulysses.h includes it.
 */
#ifndef ULYSSES_NPY_H
#define ULYSSES_NPY_H

#include "ulysses_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ----------------------------------------------------------------- .npy */

#define ULY_NPY_MAXDIM 8

typedef struct uly_npy {
    uly_dtype dtype;                  /* float32 ('<f4') or float64 ('<f8') */
    int ndim;
    int64_t shape[ULY_NPY_MAXDIM];
    size_t count;                     /* elements */
    void *data;                       /* count elements, C order, owned */
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
/* Release what uly_npy_parse / uly_npy_read allocated; safe on a zeroed struct. */
void uly_npy_free(uly_npy *n);

#ifdef __cplusplus
}
#endif

#endif /* ULYSSES_NPY_H */
