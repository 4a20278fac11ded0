/* SPDX-License-Identifier: Apache-2.0 */
/*
 * plan_kv.c -- the plan layer of inference (ulysses_infer.h): where the
 * tokens of a sharded KV cache live (contiguous, round-robin blocks), and
 * what one decode step of each scheme (dcp, helix) and the prefill's move
 * of K, V into the cache send.  Closed forms in (rank, P, n): every query
 * is O(1) except the segment list, which is as long as its answer.  No
 * MPI, no BLAS: ulysses-sim links it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "ulysses_infer.h"

/* ------------------------------------------------------------ layout */

int uly_kv_layout_init(uly_kv_layout *L, int kind, int P, int64_t block, int64_t prompt)
{
    if (!L)
        return uly_set_error(ULY_EINVAL, "KV layout pointer is NULL");
    memset(L, 0, sizeof *L);
    if (P < 1)
        return uly_set_error(ULY_EINVAL, "KV layout over %d ranks (need at least 1)", P);
    if (prompt < 0)
        return uly_set_error(ULY_EINVAL, "KV layout: negative prompt length %lld", (long long)prompt);
    if (kind == ULY_KV_ROUND_ROBIN) {
        if (block < 1)
            return uly_set_error(ULY_EINVAL, "KV layout round-robin: block of %lld tokens (need at least 1)",
                                 (long long)block);
    } else if (kind == ULY_KV_CONTIGUOUS) {
        block = 0;
    } else {
        return uly_set_error(ULY_EINVAL, "unknown KV layout kind %d", kind);
    }
    L->kind = kind;
    L->P = P;
    L->block = block;
    L->prompt = prompt;
    return ULY_OK;
}

int uly_kv_layout_parse(const char *text, int *kind, int64_t *block)
{
    if (!text || !kind || !block)
        return uly_set_error(ULY_EINVAL, "KV layout parse: NULL argument");
    if (!strcmp(text, "contiguous")) {
        *kind = ULY_KV_CONTIGUOUS;
        *block = 0;
        return ULY_OK;
    }
    static const char rr[] = "round-robin:";
    if (!strncmp(text, rr, sizeof rr - 1)) {
        const char *s = text + sizeof rr - 1;
        char *end = NULL;
        errno = 0;
        long long b = (*s >= '0' && *s <= '9') ? strtoll(s, &end, 10) : 0;
        if (end && *end == '\0' && errno == 0 && b >= 1) {
            *kind = ULY_KV_ROUND_ROBIN;
            *block = (int64_t)b;
            return ULY_OK;
        }
        return uly_set_error(ULY_EINVAL, "KV layout '%s': the block must be a positive integer (round-robin:B)",
                             text);
    }
    return uly_set_error(ULY_EINVAL, "unknown KV layout '%s' (contiguous or round-robin:B)", text);
}

const char *uly_kv_layout_name(const uly_kv_layout *L, char *buf, size_t len)
{
    if (!buf || !len)
        return "";
    if (!L)
        snprintf(buf, len, "?");
    else if (L->kind == ULY_KV_ROUND_ROBIN)
        snprintf(buf, len, "round-robin:%" PRId64, L->block);
    else
        snprintf(buf, len, "contiguous");
    return buf;
}

/* Contiguous: the rank whose prompt part holds prompt token t < prompt
 * (the inverse of uly_split). */
static int contig_owner(const uly_kv_layout *L, int64_t t)
{
    const int64_t q = L->prompt / L->P, rem = L->prompt % L->P;
    if (t < (q + 1) * rem)
        return (int)(t / (q + 1));
    return (int)(rem + (t - (q + 1) * rem) / q); /* t < prompt: q >= 1 here */
}

int uly_kv_owner(const uly_kv_layout *L, int64_t t)
{
    if (L->kind == ULY_KV_ROUND_ROBIN)
        return (int)((t / L->block) % L->P);
    if (t >= L->prompt)
        return L->P - 1;
    return contig_owner(L, t);
}

static int64_t clamp64(int64_t x, int64_t lo, int64_t hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

int64_t uly_kv_count(const uly_kv_layout *L, int rank, int64_t n)
{
    if (n <= 0 || rank < 0 || rank >= L->P)
        return 0;
    if (L->kind == ULY_KV_ROUND_ROBIN) {
        const int64_t b = L->block, cyc = b * L->P;
        return n / cyc * b + clamp64(n % cyc - (int64_t)rank * b, 0, b);
    }
    int64_t pb, pc;
    uly_split(L->prompt, L->P, rank, &pb, &pc);
    const int64_t end = rank == L->P - 1 ? n : (n < pb + pc ? n : pb + pc);
    return end > pb ? end - pb : 0;
}

int64_t uly_kv_row(const uly_kv_layout *L, int64_t t)
{
    if (L->kind == ULY_KV_ROUND_ROBIN) {
        const int64_t blk = t / L->block;
        return blk / L->P * L->block + t % L->block;
    }
    int64_t pb, pc;
    uly_split(L->prompt, L->P, uly_kv_owner(L, t), &pb, &pc);
    return t - pb; /* rank P-1's prompt part ends at the prompt: generated tokens follow it */
}

int64_t uly_kv_segments(const uly_kv_layout *L, int rank, int64_t n, int64_t *begin, int64_t *count,
                        int64_t cap)
{
    if (n <= 0 || rank < 0 || rank >= L->P)
        return 0;
    if (L->kind == ULY_KV_CONTIGUOUS || L->P == 1) {
        /* one run: the prompt part (and the generated tokens on rank P-1);
         * round-robin on one rank holds every token */
        int64_t pb = 0, c = n;
        if (L->kind == ULY_KV_CONTIGUOUS) {
            int64_t pc;
            uly_split(L->prompt, L->P, rank, &pb, &pc);
            c = uly_kv_count(L, rank, n);
        }
        if (c == 0)
            return 0;
        if (cap > 0) {
            begin[0] = pb;
            count[0] = c;
        }
        return 1;
    }
    /* round-robin: blocks rank, rank + P, ... below ceil(n / b) */
    const int64_t b = L->block, nblk = (n - 1) / b + 1;
    if (nblk <= rank)
        return 0;
    const int64_t nseg = (nblk - 1 - rank) / L->P + 1;
    for (int64_t i = 0; i < nseg && i < cap; i++) {
        const int64_t s = ((int64_t)rank + i * L->P) * b;
        begin[i] = s;
        count[i] = n - s < b ? n - s : b;
    }
    return nseg;
}

/* ------------------------------------------------------------ volumes */

static const char *const decode_names[ULY_DECODE_COUNT] = {"dcp", "helix"};

const char *uly_decode_name(int scheme)
{
    return scheme >= 0 && scheme < ULY_DECODE_COUNT ? decode_names[scheme] : "?";
}

int uly_decode_parse(const char *name, int *scheme)
{
    if (!name || !scheme)
        return uly_set_error(ULY_EINVAL, "decode scheme parse: NULL argument");
    for (int i = 0; i < ULY_DECODE_COUNT; i++)
        if (!strcmp(name, decode_names[i])) {
            *scheme = i;
            return ULY_OK;
        }
    return uly_set_error(ULY_EINVAL, "unknown decode scheme '%s' (dcp or helix)", name);
}

static const char *const dec_vol_names[ULY_DEC_COUNT] = {"q all-gather", "lse all-gather", "o reduce-scatter",
                                                         "o+lse all-to-all"};

const char *uly_dec_vol_name(int which)
{
    return which >= 0 && which < ULY_DEC_COUNT ? dec_vol_names[which] : "?";
}

int uly_plan_decode_volume(const uly_attn_desc *a, int scheme, int P, int rank, uly_decode_volume *out)
{
    if (!a || !out)
        return uly_set_error(ULY_EINVAL, "decode volume: NULL argument");
    memset(out, 0, sizeof *out);
    if (P < 1 || rank < 0 || rank >= P)
        return uly_set_error(ULY_EINVAL, "rank %d of %d is out of range", rank, P);
    if (scheme < 0 || scheme >= ULY_DECODE_COUNT)
        return uly_set_error(ULY_EINVAL, "unknown decode scheme %d", scheme);
    const uint64_t es = uly_dtype_size(a->dtype);
    if (!es || a->batch < 1 || a->heads < 1 || a->head_dim < 1)
        return uly_set_error(ULY_EINVAL, "decode volume: batch, heads and head dim must be positive");
    int64_t hb, hr;
    uly_split(a->heads, P, rank, &hb, &hr);
    const uint64_t B = (uint64_t)a->batch, H = (uint64_t)a->heads, d = (uint64_t)a->head_dim;
    const uint64_t others = (uint64_t)(P - 1), mine = (uint64_t)hr, theirs = H - mine;
    if (scheme == ULY_DECODE_DCP) {
        /* the query: my heads to every other rank, theirs to me */
        out->sent[ULY_DEC_Q_AG] = others * B * mine * d * es;
        out->recv[ULY_DEC_Q_AG] = B * theirs * d * es;
        /* my partial LSE (B, H) to every other rank, and theirs to me */
        out->sent[ULY_DEC_LSE_AG] = others * B * H * es;
        out->recv[ULY_DEC_LSE_AG] = others * B * H * es;
        /* my scaled partial of their heads out, every other rank's of mine in */
        out->sent[ULY_DEC_O_RS] = B * theirs * d * es;
        out->recv[ULY_DEC_O_RS] = others * B * mine * d * es;
    } else {
        out->sent[ULY_DEC_OL_A2A] = B * theirs * (d + 1) * es;
        out->recv[ULY_DEC_OL_A2A] = others * B * mine * (d + 1) * es;
    }
    return ULY_OK;
}

int uly_plan_prefill_kv_volume(const uly_attn_desc *a, const uly_sp_plan *p, const uly_kv_layout *L, int rank,
                               uint64_t *sent, uint64_t *recv)
{
    if (!a || !p || !L || !sent || !recv)
        return uly_set_error(ULY_EINVAL, "prefill KV volume: NULL argument");
    *sent = *recv = 0;
    if (p->P != L->P)
        return uly_set_error(ULY_EINVAL, "prefill on %d ranks, KV cache over %d", p->P, L->P);
    if (rank < 0 || rank >= p->P)
        return uly_set_error(ULY_EINVAL, "rank %d of %d is out of range", rank, p->P);
    const uint64_t es = uly_dtype_size(a->dtype);
    if (!es)
        return uly_set_error(ULY_EINVAL, "unknown dtype %d", (int)a->dtype);
    int64_t tb[2], tc[2];
    const int ns = uly_plan_tokens(p, a->seq, rank, tb, tc);
    int64_t held = 0, kept = 0;
    for (int s = 0; s < ns; s++) {
        held += tc[s];
        kept += uly_kv_count(L, rank, tb[s] + tc[s]) - uly_kv_count(L, rank, tb[s]);
    }
    const int64_t owned = uly_kv_count(L, rank, a->seq);
    /* K and V: B x Hkv x d elements per token each */
    const uint64_t per = 2 * (uint64_t)a->batch * (uint64_t)a->kv_heads * (uint64_t)a->head_dim * es;
    *sent = (uint64_t)(held - kept) * per;
    *recv = (uint64_t)(owned - kept) * per;
    return ULY_OK;
}
