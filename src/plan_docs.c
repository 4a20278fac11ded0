/* SPDX-License-Identifier: Apache-2.0 */
/*
 * plan_docs.c -- the plan layer of packed documents under context
 * parallelism (ulysses_plan.h, "packed documents: load balance"): which
 * tokens of a packed sequence every rank holds under the balancers in use
 * (contiguous, zigzag, per-document head-tail in its rank-major and its
 * document-major form, per-document zigzag), and the attention work that
 * gives each rank: visible (query, key) pairs under the causal mask within
 * documents, in exact int64 arithmetic.  Pure integer math, no MPI:
 * ulysses-sim links it.  Definitions and the worked example of pytorch PR
 * #189902: doc/simulator.md, "Packed documents and load balance".
 */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"
#include "ulysses_plan.h"

static const char *const bal_names[ULY_DOCBAL_COUNT] = {"contiguous", "zigzag", "head-tail",
                                                         "head-tail-doc-major", "doc-zigzag"};

const char *uly_docbal_name(int bal)
{
    return bal >= 0 && bal < ULY_DOCBAL_COUNT ? bal_names[bal] : "?";
}

int uly_docbal_parse(const char *name, int *bal)
{
    for (int i = 0; name && i < ULY_DOCBAL_COUNT; i++)
        if (!strcmp(name, bal_names[i])) {
            *bal = i;
            return ULY_OK;
        }
    return uly_set_error(ULY_EINVAL, "unknown document balancer '%s' (contiguous, zigzag, head-tail, "
                         "head-tail-doc-major or doc-zigzag)", name ? name : "(null)");
}

int uly_docs_check(const int64_t *lens, int64_t D, int64_t *total)
{
    if (!lens || D < 1)
        return uly_set_error(ULY_EINVAL, "no documents (need at least one length)");
    int64_t n = 0;
    for (int64_t i = 0; i < D; i++) {
        if (lens[i] < 1)
            return uly_set_error(ULY_EINVAL, "document %lld has length %lld (every length must be >= 1)",
                                 (long long)i, (long long)lens[i]);
        if (lens[i] > ULY_DOCS_MAX_TOKENS - n)
            return uly_set_error(ULY_EINVAL, "the documents hold more than %lld tokens in all",
                                 (long long)ULY_DOCS_MAX_TOKENS);
        n += lens[i];
    }
    if (total)
        *total = n;
    return ULY_OK;
}

int64_t uly_docbal_max_segments(int bal, int64_t D, int P)
{
    switch (bal) {
    case ULY_DOCBAL_CONTIGUOUS: return 1;
    case ULY_DOCBAL_ZIGZAG: return 2;
    case ULY_DOCBAL_HEAD_TAIL: case ULY_DOCBAL_DOC_ZIGZAG: return 2 * D;
    case ULY_DOCBAL_HEAD_TAIL_DOC_MAJOR: return 2 * D * (int64_t)P;
    default: return 0;
    }
}

/* Pairs of queries [q0, q0 + n): document i covers [off[i], off[i+1]); the
 * queries q of it see the keys off[i] .. q, q - off[i] + 1 of them. */
int64_t uly_docs_pairs_range(const int64_t *off, int64_t D, int64_t q0, int64_t n)
{
    if (n <= 0)
        return 0;
    /* the document holding q0: the last i with off[i] <= q0 */
    int64_t lo = 0, hi = D;
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (off[mid] <= q0)
            lo = mid;
        else
            hi = mid;
    }
    int64_t s = 0, end = q0 + n;
    for (int64_t i = lo; i < D && off[i] < end; i++) {
        int64_t a = q0 > off[i] ? q0 : off[i], b = end < off[i + 1] ? end : off[i + 1];
        if (b <= a)
            continue;
        int64_t c = b - a;
        s += c * (a - off[i] + 1) + c * (c - 1) / 2;
    }
    return s;
}

int64_t uly_docs_pairs_total(const int64_t *lens, int64_t D)
{
    int64_t s = 0;
    for (int64_t i = 0; i < D; i++)
        s += lens[i] * (lens[i] + 1) / 2;
    return s;
}

/* Where the segments of one rank go: stored (begin, count up to cap, the
 * adjacent ones merged), and/or summed (tokens, and pairs when off is set). */
typedef struct segout {
    int64_t *b, *c, cap, n;
    int64_t last_end;       /* end of the last segment (-1: none yet) */
    const int64_t *off;     /* document offsets (D + 1) for the pairs; NULL: no pairs */
    int64_t D;
    int64_t tokens, pairs;
} segout;

/* Segment [b, b + c); doc0 >= 0: it lies in the document starting at doc0
 * (its pairs in closed form), else anywhere (uly_docs_pairs_range). */
static void emit_in(segout *o, int64_t b, int64_t c, int64_t doc0)
{
    if (c <= 0)
        return;
    o->tokens += c;
    if (o->off)
        o->pairs += doc0 >= 0 ? c * (b - doc0 + 1) + c * (c - 1) / 2 : uly_docs_pairs_range(o->off, o->D, b, c);
    if (o->n > 0 && o->last_end == b) {
        if (o->n <= o->cap)
            o->c[o->n - 1] += c;
    } else {
        if (o->n < o->cap) {
            o->b[o->n] = b;
            o->c[o->n] = c;
        }
        o->n++;
    }
    o->last_end = b + c;
}

static void emit(segout *o, int64_t b, int64_t c)
{
    emit_in(o, b, c, -1);
}

/* Chunk k of 2P of a document of length L: the balanced cut (uly_split) or
 * torch.chunk's (ceil(L / 2P) tokens each, the last ones short or empty). */
static void doc_chunk(int64_t L, int P, int k, int torch_cut, int64_t *b, int64_t *c)
{
    if (!torch_cut) {
        uly_split(L, 2 * P, k, b, c);
        return;
    }
    int64_t s = (L + 2 * (int64_t)P - 1) / (2 * (int64_t)P);
    int64_t lo = (int64_t)k * s < L ? (int64_t)k * s : L, hi = ((int64_t)k + 1) * s < L ? ((int64_t)k + 1) * s : L;
    *b = lo;
    *c = hi - lo;
}

/* Tokens of the balanced chunks 0 .. k-1 of a document of L tokens in 2P:
 * k m + min(k, L mod 2P), m = L / 2P (uly_split's sizes). */
static int64_t chunks_before(int64_t L, int P, int64_t k)
{
    const int64_t C = 2 * (int64_t)P, m = L / C, rem = L % C;
    return k * m + (k < rem ? k : rem);
}

/* Document-major block of a document: tokens of ranks 0 .. q-1's head and
 * tail chunks (chunks 0 .. q-1 and 2P-q .. 2P-1). */
static int64_t block_pos(int64_t L, int P, int q)
{
    return chunks_before(L, P, q) + L - chunks_before(L, P, 2 * (int64_t)P - q);
}

static void walk(int bal, const int64_t *lens, int64_t D, int64_t N, int P, int r, segout *o)
{
    int64_t b, c, b2, c2;
    switch (bal) {
    case ULY_DOCBAL_CONTIGUOUS:
        uly_split(N, P, r, &b, &c);
        emit(o, b, c);
        break;
    case ULY_DOCBAL_ZIGZAG:
        uly_split(N, 2 * P, r, &b, &c);
        uly_split(N, 2 * P, 2 * P - 1 - r, &b2, &c2);
        emit(o, b, c);
        emit(o, b2, c2);
        break;
    case ULY_DOCBAL_HEAD_TAIL: case ULY_DOCBAL_DOC_ZIGZAG: {
        const int torch_cut = bal == ULY_DOCBAL_DOC_ZIGZAG;
        int64_t at = 0;
        for (int64_t i = 0; i < D; at += lens[i], i++) {
            doc_chunk(lens[i], P, r, torch_cut, &b, &c);
            doc_chunk(lens[i], P, 2 * P - 1 - r, torch_cut, &b2, &c2);
            emit_in(o, at + b, c, at);
            emit_in(o, at + b2, c2, at);
        }
        break;
    }
    case ULY_DOCBAL_HEAD_TAIL_DOC_MAJOR: {
        /* rank r: positions [a, a + n) of the rearranged sequence, which is,
         * document by document, rank 0's head and tail chunk, rank 1's, ... */
        int64_t a, n;
        uly_split(N, P, r, &a, &n);
        int64_t pos = 0, at = 0, i0 = 0;
        if (o->off) { /* the block of document i starts at off[i]: skip to the one holding a */
            int64_t lo = 0, hi = D;
            while (hi - lo > 1) {
                int64_t mid = lo + (hi - lo) / 2;
                if (o->off[mid] <= a)
                    lo = mid;
                else
                    hi = mid;
            }
            i0 = lo;
            pos = at = o->off[lo];
        }
        for (int64_t i = i0; i < D && pos < a + n; at += lens[i], i++) {
            if (pos + lens[i] <= a) { /* the whole block lies before the slice */
                pos += lens[i];
                continue;
            }
            /* the first rank q of this block whose pieces reach the slice:
             * the block's pieces before rank q's are chunks 0 .. q-1 (heads)
             * and 2P-q .. 2P-1 (tails), block_pos(q) tokens */
            int q0 = 0, q1 = P;
            while (q1 - q0 > 1) {
                int mid = q0 + (q1 - q0) / 2;
                if (pos + block_pos(lens[i], P, mid) <= a)
                    q0 = mid;
                else
                    q1 = mid;
            }
            const int64_t end = pos + lens[i];
            pos += block_pos(lens[i], P, q0);
            for (int q = q0; q < P && pos < a + n; q++) {
                /* a document shorter than 2P: ranks L .. 2P-1-L hold nothing of it */
                if (lens[i] < 2 * (int64_t)P && q >= lens[i] && 2 * (int64_t)P - 1 - q >= lens[i]) {
                    if (2 * (int64_t)P - lens[i] >= P)
                        break;
                    q = (int)(2 * (int64_t)P - lens[i]);
                }
                for (int t = 0; t < 2; t++) {
                    doc_chunk(lens[i], P, t ? 2 * P - 1 - q : q, 0, &b, &c);
                    int64_t lo = pos > a ? pos : a, hi = pos + c < a + n ? pos + c : a + n;
                    if (hi > lo)
                        emit_in(o, at + b + (lo - pos), hi - lo, at);
                    pos += c;
                }
            }
            pos = end;
        }
        break;
    }
    default:
        break;
    }
}

static int check_args(int bal, const int64_t *lens, int64_t D, int P, int64_t *N)
{
    if (bal < 0 || bal >= ULY_DOCBAL_COUNT)
        return uly_set_error(ULY_EINVAL, "unknown document balancer %d", bal);
    if (P < 1 || P > (1 << 20))
        return uly_set_error(ULY_EINVAL, "%d ranks (need 1 .. %d)", P, 1 << 20);
    return uly_docs_check(lens, D, N);
}

int64_t uly_docbal_segments(int bal, const int64_t *lens, int64_t D, int P, int r, int64_t *begin,
                            int64_t *count, int64_t cap)
{
    int64_t N;
    int st = check_args(bal, lens, D, P, &N);
    if (st)
        return -st;
    if (r < 0 || r >= P)
        return -uly_set_error(ULY_EINVAL, "rank %d is not one of the %d ranks", r, P);
    if (cap > 0 && (!begin || !count))
        return -uly_set_error(ULY_EINVAL, "segment buffers are NULL");
    segout o = {begin, count, cap > 0 ? cap : 0, 0, -1, NULL, D, 0, 0};
    walk(bal, lens, D, N, P, r, &o);
    return o.n;
}

int uly_docbal_work(int bal, const int64_t *lens, int64_t D, int P, int64_t *tokens, int64_t *pairs)
{
    int64_t N;
    int st = check_args(bal, lens, D, P, &N);
    if (st)
        return st;
    if (!tokens || !pairs)
        return uly_set_error(ULY_EINVAL, "work buffers are NULL");
    if ((uint64_t)D + 1 > SIZE_MAX / sizeof(int64_t))
        return uly_set_error(ULY_EOVERFLOW, "%lld documents", (long long)D);
    int64_t *off = uly_malloc((size_t)(D + 1) * sizeof *off);
    if (!off)
        return uly_set_error(ULY_ENOMEM, "document offsets (%lld entries)", (long long)D + 1);
    off[0] = 0;
    for (int64_t i = 0; i < D; i++)
        off[i + 1] = off[i] + lens[i];
    for (int r = 0; r < P; r++) {
        segout o = {NULL, NULL, 0, 0, -1, off, D, 0, 0};
        walk(bal, lens, D, N, P, r, &o);
        tokens[r] = o.tokens;
        pairs[r] = o.pairs;
    }
    uly_free(off);
    return ULY_OK;
}
