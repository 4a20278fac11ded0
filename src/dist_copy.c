/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist_copy.c -- the blocks of the Ulysses all-to-alls and their copies.
 * Every all-to-all is described, per peer, by two strided blocks
 * (comm_block): one on the sequence side, one on the head side
 * (uly_dist_seq_block, uly_dist_head_block, uly_dist_a2a_tables).  Every
 * pack, unpack and self copy is one uly_dist_copy_block() between two such
 * blocks; the shm modes copy row by row across blocks (uly_dist_copy_rows),
 * streamed with non-temporal stores where that pays.  Also the layout of a
 * rank's head-side region.  No MPI.
 */
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "dist_impl.h"

/* Elements of a block. */
size_t uly_dist_block_elems(const comm_block *b)
{
    return b->batches * b->rows * b->len;
}

/* Whether a block is one contiguous run of memory. */
static int block_contiguous(const comm_block *b)
{
    return (b->rows <= 1 || b->stride == b->len) && (b->batches <= 1 || b->bstride == b->rows * b->len);
}

/* Copy block sb of src into block db of dst (same batches x rows x len),
 * each contiguous run with one memcpy. */
void uly_dist_copy_block(char *dst, const comm_block *db, const char *src, const comm_block *sb, size_t es)
{
    if (uly_dist_block_elems(sb) == 0 || (dst == src && db->off == sb->off && db->stride == sb->stride &&
                                 db->bstride == sb->bstride))
        return; /* nothing to move (P = 1 works in place) */
    for (size_t b = 0; b < sb->batches; b++) {
        char *d0 = dst + (db->off + b * db->bstride) * es;
        const char *s0 = src + (sb->off + b * sb->bstride) * es;
        if (db->stride == sb->len && sb->stride == sb->len) {
            memcpy(d0, s0, sb->rows * sb->len * es);
            continue;
        }
        for (size_t t = 0; t < sb->rows; t++)
            memcpy(d0 + t * db->stride * es, s0 + t * sb->stride * es, sb->len * es);
    }
}

/*
 * Copy n bytes with non-temporal stores where the CPU has them (SSE2, every
 * x86-64): the destination lines are written whole without being read into
 * the cache first (no read-for-ownership) and without evicting the cache.
 * For the shm all-to-all's large copies, whose destination is not read
 * again soon: one 1 KiB row at a time, a copy of 64 MiB by rows took 27 ms
 * against 72 ms with memcpy (which streams only single copies above its
 * own threshold) on the Xeon of doc/performance.md, one process alone.
 * Same bytes as memcpy.
 */
static void *copy_stream(void *dst_, const void *src_, size_t n)
{
    char *dst = dst_;
    const char *src = src_;
#if defined(__SSE2__)
    size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
    if (head > n)
        head = n;
    memcpy(dst, src, head);
    dst += head; src += head; n -= head;
    for (; n >= 64; n -= 64, dst += 64, src += 64) {
        const __m128i a = _mm_loadu_si128((const __m128i *)(const void *)src);
        const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(src + 16));
        const __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(src + 32));
        const __m128i d = _mm_loadu_si128((const __m128i *)(const void *)(src + 48));
        _mm_stream_si128((__m128i *)(void *)dst, a);
        _mm_stream_si128((__m128i *)(void *)(dst + 16), b);
        _mm_stream_si128((__m128i *)(void *)(dst + 32), c);
        _mm_stream_si128((__m128i *)(void *)(dst + 48), d);
    }
#endif
    memcpy(dst, src, n);
    return dst_;
}

/* Order the non-temporal stores before what follows (the flag that
 * publishes them). */
static void stream_fence(void)
{
#if defined(__SSE2__)
    _mm_sfence();
#endif
}

/*
 * Copy n blocks that share their batches and rows (every peer's block of
 * one all-to-all: the rank's tokens), row by row across the blocks: row t
 * of block 0, of block 1, ..., then row t + 1.  With the blocks in the
 * order of their heads, the sequence side is walked once in address order
 * (a whole row of H d elements, instead of one peer's H_s d elements of
 * every row per pass, each in a different page when a row is a page), and
 * each block's other side is filled front to back.  Streamed (copy_stream,
 * fenced) or not; same bytes as uly_dist_copy_block of each block.
 */
void uly_dist_copy_rows(const row_copy *x, int n, size_t es, int stream)
{
    if (n <= 0)
        return;
    void *(*cp)(void *, const void *, size_t) = stream ? copy_stream : memcpy;
    const size_t batches = x[0].sb.batches, rows = x[0].sb.rows;
    for (size_t b = 0; b < batches; b++)
        for (size_t t = 0; t < rows; t++)
            for (int k = 0; k < n; k++) {
                const comm_block *db = &x[k].db, *sb = &x[k].sb;
                if (sb->len)
                    cp(x[k].dst + (db->off + b * db->bstride + t * db->stride) * es,
                       x[k].src + (sb->off + b * sb->bstride + t * sb->stride) * es, sb->len * es);
            }
    if (stream)
        stream_fence();
}

/*
 * The two sides of every all-to-all, for peer s.  The sequence side is
 * (B, n_r, Hx, d) and its block for s holds my tokens of s's heads
 * [hbeg[s], +hcnt[s]); the head side is (B, N, c_r, d) and its block for s
 * holds s's tokens of my heads.  Sequence -> heads sends sequence-side blocks
 * and receives head-side ones; heads -> sequence the other way round.
 */
comm_block uly_dist_seq_block(const uly_dist *D, int s, int64_t Hx, const int64_t *hbeg, const int64_t *hcnt)
{
    const int64_t B = D->a.batch, d = D->a.head_dim, n_r = D->part.nc[D->rank];
    return (comm_block){usz(hbeg[s] * d), usz(B), usz(n_r * Hx * d), usz(n_r), usz(hcnt[s] * d), usz(Hx * d)};
}

comm_block uly_dist_head_block(const uly_dist *D, int s, int64_t c_r)
{
    const int64_t B = D->a.batch, N = D->a.seq, d = D->a.head_dim;
    return (comm_block){usz(D->part.nb[s] * c_r * d), usz(B), usz(N * c_r * d), usz(D->part.nc[s]), usz(c_r * d),
                        usz(c_r * d)};
}

/* Both sides' blocks of one all-to-all for every peer (see a2a_move), the
 * byte counters, and the copy of the own block; *send_inplace and
 * *recv_inplace say whether every peer's block of that side is contiguous. */
void uly_dist_a2a_tables(uly_dist *D, int which, int to_heads, int64_t Hx, const int64_t *hbeg, const int64_t *hcnt,
                       comm_block *send, comm_block *recv, int *send_inplace, int *recv_inplace)
{
    const int P = D->P, r = D->rank;
    const size_t es = D->es;
    *send_inplace = *recv_inplace = 1;
    for (int s = 0; s < P; s++) {
        comm_block sq = uly_dist_seq_block(D, s, Hx, hbeg, hcnt), hd = uly_dist_head_block(D, s, hcnt[r]);
        send[s] = to_heads ? sq : hd;
        recv[s] = to_heads ? hd : sq;
        if (s == r)
            continue;
        *send_inplace &= block_contiguous(&send[s]);
        *recv_inplace &= block_contiguous(&recv[s]);
        D->vol.sent[which] += uly_dist_block_elems(&send[s]) * es;
        D->vol.recv[which] += uly_dist_block_elems(&recv[s]) * es;
    }
}

/* The head-side tensors of a rank with h query heads, kv KV heads and kvg
 * heads of KV gradients, in the order of the all-to-all kinds (Q, K, V, O,
 * dO, dQ, dK, dV): byte offsets in its head-side region (off, may be NULL)
 * and entries of t (may be NULL) at `where`; returns the region's size. */
uint64_t uly_dist_head_region(const uly_attn_desc *a, size_t es, int64_t h, int64_t kv, int64_t kvg,
                            size_t off[ULY_A2A_COUNT], uly_bufs *t, int where)
{
    static const char *const names[ULY_A2A_COUNT] = {"Q (head side)", "K (head side)", "V (head side)",
                                                     "O (head side)", "dO (head side)", "dQ (head side)",
                                                     "dK (head side)", "dV (head side)"};
    const int64_t heads[ULY_A2A_COUNT] = {h, kv, kv, h, h, h, kvg, kvg};
    uint64_t total = 0;
    for (int w = 0; w < ULY_A2A_COUNT; w++) {
        const int64_t dims[4] = {a->batch, a->seq, heads[w], a->head_dim};
        const uint64_t b = uly_buf_bytes(es, 4, dims);
        if (off)
            off[w] = (size_t)total;
        if (t)
            uly_bufs_add(t, names[w], b, where);
        total = b > UINT64_MAX - total ? UINT64_MAX : total + b;
    }
    return total;
}

/* The head-side buffers of rank s: byte offsets in its head-side region;
 * returns the region's size.  Every rank computes every rank's layout alike. */
size_t uly_dist_head_layout(const uly_dist *D, int s, size_t off[ULY_A2A_COUNT])
{
    const int64_t h = D->part.hc[s], kv = D->part.kc[s];
    return (size_t)uly_dist_head_region(&D->a, D->es, h, kv, D->part.rep ? h : kv, off, NULL, 0);
}
