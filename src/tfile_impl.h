/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tfile_impl.h -- what the readers of tensor files share (src/npy.c,
 * src/safetensors.c, src/tfile.c).  Not installed.
 */
#ifndef ULY_TFILE_IMPL_H
#define ULY_TFILE_IMPL_H

#include <stddef.h>

#include "internal.h"

/* Open path read-only, without waiting on a FIFO, and check that it is a
 * regular file ("is a directory, not a WHAT file") of a size this machine
 * can address: *fd, *total. */
ULY_INTERNAL int uly_tensor_open(const char *path, const char *what, int *fd, size_t *total);
/* Exactly n bytes at offset off: 0, -1 (errno) or 1 (the file ends first;
 * *got bytes were read). */
ULY_INTERNAL int uly_tensor_read_at(int fd, void *dst, size_t n, size_t off, size_t *got);

/* A .npy reader of every element type of the format ('<f2', '<f4', '<f8',
 * '<i4', '<i8') on the open file fd of total bytes, which it owns (closed
 * on failure too). */
ULY_INTERNAL int uly_npy_open_fd(int fd, const char *path, size_t total, uly_npy *header, uly_npy_reader **r);
/* Elements [first, first + count) as the file holds them (header->elem),
 * in host byte order. */
ULY_INTERNAL int uly_npy_reader_raw(uly_npy_reader *r, size_t first, size_t count, void *dst);

/* An open .safetensors file: the checks of ulysses_npy.h, on the open file
 * fd of total bytes, which it owns (closed on failure too). */
typedef struct uly_st uly_st;
ULY_INTERNAL int uly_st_open_fd(int fd, const char *path, size_t total, uly_st **st);
ULY_INTERNAL int uly_st_count(const uly_st *st);
ULY_INTERNAL const uly_tinfo *uly_st_info(const uly_st *st, int i);
ULY_INTERNAL const char *uly_st_meta(const uly_st *st, const char *key);
/* Elements of tensor i as the file holds them, in host byte order. */
ULY_INTERNAL int uly_st_raw(uly_st *st, int i, size_t first, size_t count, void *dst);
ULY_INTERNAL void uly_st_close(uly_st *st);

#endif /* ULY_TFILE_IMPL_H */
