/* SPDX-License-Identifier: Apache-2.0 */
/*
 * buffers.c -- the library's buffers, carved from named tables (uly_bufs,
 * ulysses_plan.h): each compose module (dist.c, ring.c, allgather.c) lists
 * what it allocates in a table, and its create carves one allocation from
 * that table with uly_bufs_carve, while uly_dist_memory / uly_sp_memory sum
 * the same tables.  So a buffer's size is written once.  No MPI.
 */
#include <string.h>

#include "methods.h"

uint64_t uly_buf_bytes(size_t es, int n, const int64_t *dims)
{
    uint64_t b = es;
    for (int i = 0; i < n; i++) {
        if (dims[i] < 0)
            return UINT64_MAX;
        if (dims[i] != 0 && b > UINT64_MAX / (uint64_t)dims[i])
            return UINT64_MAX;
        b *= (uint64_t)dims[i];
    }
    if (b > UINT64_MAX - (ULY_BUF_ALIGN - 1))
        return UINT64_MAX;
    return (b + ULY_BUF_ALIGN - 1) / ULY_BUF_ALIGN * ULY_BUF_ALIGN;
}

uint64_t uly_buf_bytes1(size_t es, int64_t n)
{
    return uly_buf_bytes(es, 1, &n);
}

int uly_bufs_offsets(const uly_bufs *t, int first, size_t *off, size_t *total)
{
    size_t s = 0;
    for (int i = first; i < t->n; i++) {
        const uint64_t b = t->b[i].bytes;
        if (b == UINT64_MAX || b > SIZE_MAX || s > SIZE_MAX - (size_t)b)
            return 1;
        if (off)
            off[i - first] = s;
        s += (size_t)b;
    }
    *total = s;
    return 0;
}

int uly_bufs_carve(const uly_bufs *t, int first, int zero, const char *what, void **base, char **ptr)
{
    *base = NULL;
    if (t->n > ULY_BUFS_MAX - 1 || first < 0 || first > t->n)
        return uly_set_error(ULY_EINVAL, "%s: buffer table of %d entries is full", what, t->n);
    size_t off[ULY_BUFS_MAX], total = 0;
    if (uly_bufs_offsets(t, first, off, &total))
        return uly_set_error(ULY_EOVERFLOW, "%s: buffer sizes overflow size_t", what);
    char *p = zero ? uly_calloc(1, total) : uly_malloc(total);
    if (!p)
        return uly_set_error(ULY_ENOMEM, "cannot allocate %zu bytes of %s", total, what);
    for (int i = first; i < t->n; i++)
        ptr[i - first] = p + off[i - first];
    *base = p;
    return ULY_OK;
}
