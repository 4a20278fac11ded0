/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kernel_decode.c -- decode attention (one new query per sequence) over a
 * shard of the KV cache, the merge of the ranks' partials, and the
 * one-process emulation of the distributed decode (ulysses_infer.h).
 *
 * Decode is memory-bound: every key and value of the shard is read once
 * per step, for g = H / Hkv query heads.  So one work item is a (sequence,
 * KV head): its g query heads form a (g, d) matrix multiplied against the
 * KV head's keys in blocks of ULY_DECODE_BK rows (one GEMM for the scores,
 * one for P V), with the online softmax of the blocked kernel between them
 * (base-2 scores, vexp.h's row operations).  The blocks start at the first
 * visible row of the shard and follow in row order; threads take whole
 * items, so the bits do not depend on the thread count.
 */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "config.h"
#include "infer_impl.h"
#include "vexp.h"

#define DEC_LOG2E 1.44269504088896340736
#define DEC_LN2 0.693147180559945309417

/* ------------------------------------------------------------ kernel */

/* Workspace elements per item: scores (g, BK), accumulator (g, d), m and l
 * (g each). */
#define DEC_PER(g, d) ((g) * (ULY_DECODE_BK + (d) + 2))

struct dec_geom {
    int64_t B, H, Hkv, g, d;
    int64_t rows;          /* rows of the shard */
    int64_t r0, r1;        /* visible rows [r0, r1) */
    double scale2;         /* scale log2(e) */
    const uly_vops *vops;
    int threads;
};

/* One thread's items [i0, i1), in lockstep: key block j of every item, then
 * block j + 1, so that the thread sweeps its part of the shard's memory one
 * block of rows at a time (64 rows of Hkv d elements: 256 KiB for Hkv 8,
 * d 128, f32) instead of a 4 KiB-strided sweep over the whole shard per KV
 * head, which defeats the hardware prefetchers (they stop at pages);
 * each item prefetches its rows of the next block before its GEMMs.  An
 * item's arithmetic is the same whatever its neighbours: state per item
 * in ws. */
#define DEC_ITEMS(REAL, GEMM, ROW_MAX, EXP2_SHIFT_SUM, SFX)                                                  \
    static void dec_items_##SFX(const struct dec_geom *G, int64_t i0, int64_t i1, const REAL *q,            \
                                const REAL *k, const REAL *v, REAL *o, REAL *lse, REAL *ws)                  \
    {                                                                                                        \
        const int64_t g = G->g, d = G->d, per = DEC_PER(g, d), ld = G->Hkv * d;                                          \
        for (int64_t it = i0; it < i1; it++) {                                                               \
            REAL *acc = ws + (it - i0) * per + g * ULY_DECODE_BK, *m = acc + g * d, *l = m + g;              \
            for (int64_t i = 0; i < g; i++) {                                                                \
                m[i] = -INFINITY;                                                                            \
                l[i] = 0;                                                                                    \
            }                                                                                                \
            memset(acc, 0, (size_t)(g * d) * sizeof *acc);                                                   \
        }                                                                                                    \
        for (int64_t j0 = G->r0; j0 < G->r1; j0 += ULY_DECODE_BK) {                                          \
            const int64_t nk = G->r1 - j0 < ULY_DECODE_BK ? G->r1 - j0 : ULY_DECODE_BK;                      \
            const int64_t n1 = G->r1 - j0 - nk < ULY_DECODE_BK ? G->r1 - j0 - nk : ULY_DECODE_BK;            \
            (void)n1;                                                                                        \
            for (int64_t it = i0; it < i1; it++) {                                                           \
                const int64_t b = it / G->Hkv, kvh = it % G->Hkv;                                            \
                const REAL *qp = q + (b * G->H + kvh * g) * d;                                               \
                REAL *S = ws + (it - i0) * per, *acc = S + g * ULY_DECODE_BK, *m = acc + g * d, *l = m + g;  \
                const REAL *kp = k + (b * G->rows * G->Hkv + kvh) * d + j0 * ld;                             \
                const REAL *vp = v + (b * G->rows * G->Hkv + kvh) * d + j0 * ld;                             \
                for (int64_t j = nk; j < nk + n1; j++) /* the next block's rows of this item */              \
                    for (int64_t c = 0; c < d; c += 64 / (int64_t)sizeof(REAL)) {                            \
                        __builtin_prefetch(kp + j * ld + c);                                                 \
                        __builtin_prefetch(vp + j * ld + c);                                                 \
                    }                                                                                        \
                GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)g, (int)nk, (int)d, (REAL)G->scale2, qp,  \
                     (int)d, kp, (int)ld, 0, S, (int)nk);                                                    \
                for (int64_t i = 0; i < g; i++) {                                                            \
                    REAL *row = S + i * nk;                                                                  \
                    const REAL mx = ROW_MAX(row, nk), mnew = mx > m[i] ? mx : m[i];                          \
                    const REAL rs = EXP2_SHIFT_SUM(row, nk, mnew);                                           \
                    const REAL corr =                                                                        \
                        m[i] == -INFINITY ? 0 : m[i] == mnew ? 1 : (REAL)exp2((double)m[i] - (double)mnew);  \
                    l[i] = l[i] * corr + rs;                                                                 \
                    m[i] = mnew;                                                                             \
                    if (corr != 1) {                                                                         \
                        REAL *ai = acc + i * d;                                                              \
                        for (int64_t c = 0; c < d; c++)                                                      \
                            ai[c] *= corr;                                                                   \
                    }                                                                                        \
                }                                                                                            \
                GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g, (int)d, (int)nk, 1, S, (int)nk, vp,  \
                     (int)ld, 1, acc, (int)d);                                                               \
            }                                                                                                \
        }                                                                                                    \
        for (int64_t it = i0; it < i1; it++) {                                                               \
            const int64_t b = it / G->Hkv, kvh = it % G->Hkv;                                                \
            const REAL *acc = ws + (it - i0) * per + g * ULY_DECODE_BK, *m = acc + g * d, *l = m + g;        \
            for (int64_t i = 0; i < g; i++) {                                                                \
                REAL *oi = o + (b * G->H + kvh * g + i) * d;                                                 \
                REAL *li = lse + b * G->H + kvh * g + i;                                                     \
                if (l[i] == 0) { /* no visible key in the shard */                                           \
                    memset(oi, 0, (size_t)d * sizeof *oi);                                                   \
                    *li = -INFINITY;                                                                         \
                    continue;                                                                                \
                }                                                                                            \
                const REAL inv = 1 / l[i];                                                                   \
                for (int64_t c = 0; c < d; c++)                                                              \
                    oi[c] = acc[i * d + c] * inv;                                                            \
                *li = (REAL)((double)m[i] * DEC_LN2 + log((double)l[i]));                                    \
            }                                                                                                \
        }                                                                                                    \
    }

#define VOPS_ROW_MAX(x, n) G->vops->row_max(x, n)
#define VOPS_EXP2_SHIFT_SUM(x, n, s) G->vops->exp2_shift_sum(x, n, s)
DEC_ITEMS(float, cblas_sgemm, VOPS_ROW_MAX, VOPS_EXP2_SHIFT_SUM, f32)
DEC_ITEMS(double, cblas_dgemm, uly_row_max_f64, uly_exp2_shift_sum_f64, f64)

/* Rows of the shard at global positions below x (the runs in order). */
static int64_t rows_below(int64_t nseg, const int64_t *sb, const int64_t *sc, int64_t x)
{
    int64_t r = 0;
    for (int64_t i = 0; i < nseg && sb[i] < x; i++)
        r += x - sb[i] < sc[i] ? x - sb[i] : sc[i];
    return r;
}

int uly_decode_attn(const uly_attn_desc *a, int64_t qpos, int64_t nseg, const int64_t *seg_begin,
                    const int64_t *seg_count, const void *q, const void *k, const void *v, void *o, void *lse,
                    int threads)
{
    if (!a)
        return uly_set_error(ULY_EINVAL, "decode: attention description is NULL");
    if (a->doc_offsets || a->docs)
        return uly_set_error(ULY_EINVAL, "decode: documents are not supported");
    uly_attn_desc c = *a;
    c.seq = 1; /* ignored here */
    int rc = uly_attn_desc_check(&c);
    if (rc)
        return rc;
    if (qpos < 0 || nseg < 0 || threads < 0 || (nseg && (!seg_begin || !seg_count)))
        return uly_set_error(ULY_EINVAL, "decode: negative query position, run count or threads");
    int64_t rows = 0, prev = 0;
    for (int64_t i = 0; i < nseg; i++) {
        if (seg_count[i] < 0 || seg_begin[i] < prev)
            return uly_set_error(ULY_EINVAL, "decode: run %lld [%lld, +%lld) is not after the previous one",
                                 (long long)i, (long long)seg_begin[i], (long long)seg_count[i]);
        prev = seg_begin[i] + seg_count[i];
        rows += seg_count[i];
    }
    if (!q || !o || !lse || (rows && (!k || !v)))
        return uly_set_error(ULY_EINVAL, "decode: NULL tensor");
    if (a->kv_heads * a->head_dim > INT_MAX)
        return uly_set_error(ULY_EOVERFLOW, "decode: kv_heads x head_dim exceeds the BLAS int range");
    struct dec_geom G = {a->batch, a->heads, a->kv_heads, a->heads / a->kv_heads, a->head_dim, rows, 0, 0,
                         uly_attn_scale(a) * DEC_LOG2E, NULL, 1};
    /* the visible keys: one interval of positions, so one range of rows */
    int64_t lo = 0, hi = INT64_MAX;
    if (a->causal)
        hi = qpos + 1;
    if (a->window > 0) {
        if (qpos - a->window + 1 > lo)
            lo = qpos - a->window + 1;
        if (!a->causal)
            hi = qpos + a->window;
    }
    G.r0 = rows_below(nseg, seg_begin, seg_count, lo);
    G.r1 = rows_below(nseg, seg_begin, seg_count, hi);
    if ((rc = uly_vops_current(&G.vops)))
        return rc;
#ifdef _OPENMP
    G.threads = threads > 0 ? threads : omp_get_max_threads();
#endif
    const int64_t items = G.B * G.Hkv;
    if (G.threads > items)
        G.threads = (int)items;
    /* items split into contiguous ranges, one per thread (the bits of an
     * item do not depend on the split) */
    const int64_t chunk = (items + G.threads - 1) / G.threads;
    const size_t es = uly_dtype_size(a->dtype), per = (size_t)DEC_PER(G.g, G.d);
    void *ws = uly_malloc(per * es * (size_t)items);
    if (!ws)
        return uly_set_error(ULY_ENOMEM, "decode: cannot allocate the workspace of %lld items", (long long)items);
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
    const int saved = openblas_get_num_threads();
    if (saved != 1)
        openblas_set_num_threads(1);
#endif
#pragma omp parallel for schedule(static, 1) num_threads(G.threads)
    for (int tn = 0; tn < G.threads; tn++) {
        const int64_t i0 = tn * chunk, i1 = i0 + chunk < items ? i0 + chunk : items;
        if (i0 >= i1)
            continue;
        if (a->dtype == ULY_F32)
            dec_items_f32(&G, i0, i1, q, k, v, o, lse, (float *)ws + per * (size_t)i0);
        else
            dec_items_f64(&G, i0, i1, q, k, v, o, lse, (double *)ws + per * (size_t)i0);
    }
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
    if (saved != 1)
        openblas_set_num_threads(saved);
#endif
    uly_free(ws);
    return ULY_OK;
}

/* ------------------------------------------------------------ merge */

#define ELEM(t, p, i) ((t) == ULY_F32 ? (double)((const float *)(p))[i] : ((const double *)(p))[i])

static void put(uly_dtype t, void *p, int64_t i, double x)
{
    if (t == ULY_F32)
        ((float *)p)[i] = (float)x;
    else
        ((double *)p)[i] = x;
}

void uly_dec_lse_total(uly_dtype t, int P, int64_t n, const void *lse, double *L)
{
    for (int64_t x = 0; x < n; x++) {
        double m = -INFINITY;
        for (int s = 0; s < P; s++) {
            const double l = ELEM(t, lse, s * n + x);
            m = l > m ? l : m;
        }
        if (m == -INFINITY) {
            L[x] = -INFINITY;
            continue;
        }
        double sum = 0;
        for (int s = 0; s < P; s++) {
            const double l = ELEM(t, lse, s * n + x);
            sum += l == -INFINITY ? 0 : exp(l - m);
        }
        L[x] = m + log(sum);
    }
}

void uly_dec_scale(uly_dtype t, int64_t B, int64_t H, int64_t d, int64_t hb, int64_t hc, const void *o,
                   const void *lse, const double *L, void *out)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < hc; h++) {
            const int64_t x = b * H + hb + h;
            const double l = ELEM(t, lse, x);
            const double w = l == -INFINITY ? 0 : exp(l - L[x]);
            for (int64_t c = 0; c < d; c++)
                put(t, out, (b * hc + h) * d + c, w * ELEM(t, o, x * d + c));
        }
}

void uly_dec_sum(uly_dtype t, int P, int64_t n, const void *part, void *out)
{
    for (int64_t i = 0; i < n; i++) {
        double s = 0;
        for (int r = 0; r < P; r++)
            s += ELEM(t, part, r * n + i);
        put(t, out, i, s);
    }
}

void uly_dec_helix_pack(uly_dtype t, int64_t B, int64_t H, int64_t d, int64_t hb, int64_t hc, const void *o,
                        const void *lse, void *out)
{
    const size_t es = uly_dtype_size(t);
    char *w = out, *wl = w + (size_t)(B * hc * d) * es;
    for (int64_t b = 0; b < B; b++) {
        memcpy(w + (size_t)(b * hc * d) * es, (const char *)o + (size_t)((b * H + hb) * d) * es, (size_t)(hc * d) * es);
        memcpy(wl + (size_t)(b * hc) * es, (const char *)lse + (size_t)(b * H + hb) * es, (size_t)hc * es);
    }
}

int uly_dec_helix_merge(uly_dtype t, int P, int64_t B, int64_t hc, int64_t d, const void *parts, void *o,
                        void *lse)
{
    const size_t es = uly_dtype_size(t), no = (size_t)(B * hc * d), nl = (size_t)(B * hc);
    const char *p = parts;
    memcpy(o, p, no * es);
    memcpy(lse, p + no * es, nl * es);
    for (int s = 1; s < P; s++) {
        const char *x = p + (size_t)s * (no + nl) * es;
        int rc = uly_attn_merge(t, B, 1, hc, d, o, lse, x, x + no * es, 0);
        if (rc)
            return rc;
    }
    return ULY_OK;
}

void uly_dec_gather_rows(const void *src, void *dst, int64_t B, int64_t n, int64_t nseg, const int64_t *seg_begin,
                         const int64_t *seg_count, size_t row_bytes)
{
    char *d = dst;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < nseg; i++) {
            const size_t len = (size_t)seg_count[i] * row_bytes;
            memcpy(d, (const char *)src + ((size_t)(b * n + seg_begin[i])) * row_bytes, len);
            d += len;
        }
}

/* ------------------------------------------------------------ emulation */

int uly_decode_emulate(const uly_attn_desc *a, int scheme, const uly_kv_layout *L, int64_t qpos, const void *q,
                       const void *k, const void *v, void *o, void *lse, int threads)
{
    if (!a || !L || !q || !k || !v)
        return uly_set_error(ULY_EINVAL, "decode emulation: NULL argument");
    if (scheme < 0 || scheme >= ULY_DECODE_COUNT)
        return uly_set_error(ULY_EINVAL, "unknown decode scheme %d", scheme);
    if (L->P < 1 || qpos < 0)
        return uly_set_error(ULY_EINVAL, "decode emulation: %d ranks, query position %lld", L->P,
                             (long long)qpos);
    const int P = L->P;
    const int64_t n = qpos + 1, B = a->batch, H = a->heads, d = a->head_dim;
    const size_t es = uly_dtype_size(a->dtype);
    if (!es || B < 1 || H < 1 || d < 1 || a->kv_heads < 1)
        return uly_set_error(ULY_EINVAL, "decode emulation: bad sizes or dtype");
    const size_t row = (size_t)(a->kv_heads * d) * es, nh = (size_t)(B * H);
    int64_t maxseg = 0, maxrows = 0;
    for (int r = 0; r < P; r++) {
        const int64_t s = uly_kv_segments(L, r, n, NULL, NULL, 0), c = uly_kv_count(L, r, n);
        maxseg = s > maxseg ? s : maxseg;
        maxrows = c > maxrows ? c : maxrows;
    }
    /* every rank's partial (P, B, H, d) and LSE (P, B, H); one shard at a time */
    char *po = uly_malloc((size_t)P * nh * (size_t)d * es), *pl = uly_malloc((size_t)P * nh * es);
    int64_t *sb = uly_malloc(sizeof(int64_t) * (size_t)(2 * maxseg + 1)), *sc = sb ? sb + maxseg : NULL;
    char *kr = uly_malloc((size_t)B * (size_t)maxrows * row + 1), *vr = uly_malloc((size_t)B * (size_t)maxrows * row + 1);
    double *Lt = uly_malloc(nh * sizeof *Lt);
    /* the owner's side: P parts of its heads (dcp: scaled O; helix: O, LSE), its result */
    char *wo = uly_malloc((size_t)P * nh * (size_t)(d + 1) * es);
    char *ro = uly_malloc(nh * (size_t)d * es), *rl = uly_malloc(nh * es);
    int rc = ULY_OK;
    if (!po || !pl || !sb || !kr || !vr || !Lt || !wo || !ro || !rl)
        rc = uly_set_error(ULY_ENOMEM, "decode emulation: cannot allocate the partials of %d ranks", P);
    for (int r = 0; !rc && r < P; r++) {
        const int64_t ns = uly_kv_segments(L, r, n, sb, sc, maxseg);
        uly_dec_gather_rows(k, kr, B, n, ns, sb, sc, row);
        uly_dec_gather_rows(v, vr, B, n, ns, sb, sc, row);
        rc = uly_decode_attn(a, qpos, ns, sb, sc, q, kr, vr, po + (size_t)r * nh * (size_t)d * es,
                             pl + (size_t)r * nh * es, threads);
    }
    if (!rc && scheme == ULY_DECODE_DCP)
        uly_dec_lse_total(a->dtype, P, (int64_t)nh, pl, Lt);
    /* each rank as the owner of its heads: what it receives, then its merge */
    for (int s = 0; !rc && s < P; s++) {
        int64_t hb, hc;
        uly_split(H, P, s, &hb, &hc);
        if (!hc)
            continue;
        const size_t bo = (size_t)(B * hc * d) * es, bl = (size_t)(B * hc) * es;
        for (int r = 0; r < P; r++) {
            const char *orr = po + (size_t)r * nh * (size_t)d * es, *lr = pl + (size_t)r * nh * es;
            if (scheme == ULY_DECODE_DCP)
                uly_dec_scale(a->dtype, B, H, d, hb, hc, orr, lr, Lt, wo + (size_t)r * bo);
            else
                uly_dec_helix_pack(a->dtype, B, H, d, hb, hc, orr, lr, wo + (size_t)r * (bo + bl));
        }
        if (scheme == ULY_DECODE_DCP) {
            uly_dec_sum(a->dtype, P, B * hc * d, wo, ro);
            for (int64_t b = 0; b < B; b++)
                for (int64_t h = 0; h < hc; h++)
                    put(a->dtype, rl, b * hc + h, Lt[b * H + hb + h]);
        } else {
            rc = uly_dec_helix_merge(a->dtype, P, B, hc, d, wo, ro, rl);
        }
        for (int64_t b = 0; !rc && b < B; b++) {
            if (o)
                memcpy((char *)o + (size_t)((b * H + hb) * d) * es, ro + (size_t)(b * hc * d) * es,
                       (size_t)(hc * d) * es);
            if (lse)
                memcpy((char *)lse + (size_t)(b * H + hb) * es, rl + (size_t)(b * hc) * es, (size_t)hc * es);
        }
    }
    uly_free(po);
    uly_free(pl);
    uly_free(sb);
    uly_free(kr);
    uly_free(vr);
    uly_free(Lt);
    uly_free(wo);
    uly_free(ro);
    uly_free(rl);
    return rc;
}
