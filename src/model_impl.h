/* SPDX-License-Identifier: Apache-2.0 */
/*
 * model_impl.h -- the GPT-2 layers of ulysses_model.h, written once for a
 * real type and included twice by model.c with these macros defined:
 *   REAL  float / double      GEMM  cblas_sgemm / cblas_dgemm
 *   TANH  tanhf / tanh        SFX(name)  name##_f32 / name##_f64
 * Per-token work is parallel over tokens (OpenMP); sums over tokens (the
 * parameter gradients) run in token order on one thread, so results never
 * depend on the thread count.  Calls smaller than PAR_MIN elements stay on
 * one thread (waking a team costs more than the work).
 */

#ifndef PAR_MIN
#define PAR_MIN 32768
#endif

void SFX(uly_layernorm_fwd)(REAL *out, REAL *mean, REAL *rstd, const REAL *x, const REAL *w,
                            const REAL *b, int64_t n, int64_t C)
{
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n * C >= PAR_MIN)
#endif
    for (int64_t t = 0; t < n; t++) {
        const REAL *xt = x + t * C;   // (C)
        REAL *ot = out + t * C;       // (C)
        double s = 0;
        for (int64_t i = 0; i < C; i++)
            s += xt[i];
        double m = s / (double)C, v = 0;
        for (int64_t i = 0; i < C; i++)
            v += ((double)xt[i] - m) * ((double)xt[i] - m);
        v /= (double)C;
        /* the rounded mean and rstd are what the backward sees: use them here too */
        REAL mr = (REAL)m, rs = (REAL)(1.0 / sqrt(v + ULY_LN_EPS));
        for (int64_t i = 0; i < C; i++)
            ot[i] = (xt[i] - mr) * rs * w[i] + b[i];
        mean[t] = mr;
        rstd[t] = rs;
    }
}

void SFX(uly_layernorm_bwd)(REAL *dx, double *dw, double *db, const REAL *dout, const REAL *x,
                            const REAL *w, const REAL *mean, const REAL *rstd, int64_t n, int64_t C)
{
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n * C >= PAR_MIN)
#endif
    for (int64_t t = 0; t < n; t++) {
        const REAL *xt = x + t * C, *gt = dout + t * C;   // (C) each
        REAL *dxt = dx + t * C;                            // (C)
        const REAL mr = mean[t], rs = rstd[t];
        double gm = 0, gxm = 0; /* mean of dnorm and of dnorm * xhat */
        for (int64_t i = 0; i < C; i++) {
            REAL xhat = (xt[i] - mr) * rs;
            double dn = (double)gt[i] * (double)w[i];
            gm += dn;
            gxm += dn * (double)xhat;
        }
        gm /= (double)C;
        gxm /= (double)C;
        for (int64_t i = 0; i < C; i++) {
            REAL xhat = (xt[i] - mr) * rs;
            double dn = (double)gt[i] * (double)w[i];
            dxt[i] += (REAL)((dn - gm - (double)xhat * gxm) * (double)rs);
        }
    }
    if (!dw && !db)
        return;
    for (int64_t t = 0; t < n; t++) { /* parameter gradients: token order */
        const REAL *xt = x + t * C, *gt = dout + t * C;
        const REAL mr = mean[t], rs = rstd[t];
        for (int64_t i = 0; i < C; i++) {
            REAL xhat = (xt[i] - mr) * rs;
            if (dw)
                dw[i] += (double)gt[i] * (double)xhat;
            if (db)
                db[i] += (double)gt[i];
        }
    }
}

void SFX(uly_linear_fwd)(REAL *out, const REAL *x, const REAL *w, const REAL *b, int64_t n, int64_t IC,
                         int64_t OC)
{
    if (n <= 0)
        return;
    // out (n, OC) = x (n, IC) . w^T (IC, OC)
    GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)OC, (int)IC, 1, x, (int)IC, w, (int)IC, 0,
         out, (int)OC);
    if (!b)
        return;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n * OC >= PAR_MIN)
#endif
    for (int64_t t = 0; t < n; t++)
        for (int64_t o = 0; o < OC; o++)
            out[t * OC + o] += b[o];
}

void SFX(uly_linear_bwd)(REAL *dx, int acc_dx, REAL *dw, int acc_dw, double *db, const REAL *dout,
                         const REAL *x, const REAL *w, int64_t n, int64_t IC, int64_t OC)
{
    if (n <= 0) {
        if (dw && !acc_dw)
            memset(dw, 0, (size_t)(OC * IC) * sizeof(REAL));
        return;
    }
    // dx (n, IC) (+)= dout (n, OC) . w (OC, IC)
    if (dx)
        GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)IC, (int)OC, 1, dout, (int)OC, w,
             (int)IC, acc_dx ? 1 : 0, dx, (int)IC);
    // dw (OC, IC) (+)= dout^T (OC, n) . x (n, IC)
    if (dw)
        GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)OC, (int)IC, (int)n, 1, dout, (int)OC, x,
             (int)IC, acc_dw ? 1 : 0, dw, (int)IC);
    if (db)
        for (int64_t t = 0; t < n; t++)
            for (int64_t o = 0; o < OC; o++)
                db[o] += (double)dout[t * OC + o];
}

#define GELU_S ((REAL)0.7978845608028654) /* sqrt(2/pi) */
#define GELU_C ((REAL)0.044715)

#ifdef MODEL_VTANH
/* z = e^(2u) of the GELU's u for a tile of up to GELU_TILE elements, as
 * 2^(2 log2(e) u) by the softmax's vector 2^x (vexp.h: within 1.15 ulp,
 * the same bits at every SIMD level and for every element whatever its
 * place in the tile; 2u log2(e) clamped to [-127, 127]).  With
 * s = z / (1 + z) = (1 + tanh u) / 2 and 1 - s = 1 / (1 + z):
 *   GELU(x) = x s,   GELU'(x) = s + 2 x s (1 - s) S (1 + 3 c x^2)
 * (1 - tanh^2 u = 4 s (1 - s)), with no cancellation where tanh u is near
 * -1.  Element-wise: an element's bits depend on its value only. */
#define GELU_TILE 512
static void gelu_exp_tile(float *z, const float *x, int64_t n, const uly_vops *vo)
{
    for (int64_t i = 0; i < n; i++) {
        float xi = x[i];
        float u = GELU_S * (xi + GELU_C * xi * xi * xi);
        z[i] = 2.8853900817779268f * u; /* 2 log2(e) */
    }
    vo->exp2_shift_sum(z, n, 0.0f);
}
#endif

void SFX(uly_gelu_fwd)(REAL *out, const REAL *x, int64_t m)
{
#ifdef MODEL_VTANH
    const uly_vops *vo = NULL;
    if (uly_vops_current(&vo) == ULY_OK && vo) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (m >= PAR_MIN)
#endif
        for (int64_t b = 0; b < m; b += GELU_TILE) {
            float z[GELU_TILE];
            const int64_t n = m - b < GELU_TILE ? m - b : GELU_TILE;
            gelu_exp_tile(z, x + b, n, vo);
            for (int64_t i = 0; i < n; i++)
                out[b + i] = x[b + i] * (z[i] / (1.0f + z[i]));
        }
        return;
    }
#endif
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (m >= PAR_MIN)
#endif
    for (int64_t i = 0; i < m; i++) {
        REAL xi = x[i];
        REAL u = GELU_S * (xi + GELU_C * xi * xi * xi);
        out[i] = (REAL)0.5 * xi * ((REAL)1 + TANH(u));
    }
}

void SFX(uly_gelu_bwd)(REAL *dx, const REAL *x, const REAL *dout, int64_t m)
{
#ifdef MODEL_VTANH
    const uly_vops *vo = NULL;
    if (uly_vops_current(&vo) == ULY_OK && vo) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (m >= PAR_MIN)
#endif
        for (int64_t b = 0; b < m; b += GELU_TILE) {
            float z[GELU_TILE];
            const int64_t n = m - b < GELU_TILE ? m - b : GELU_TILE;
            gelu_exp_tile(z, x + b, n, vo);
            for (int64_t i = 0; i < n; i++) {
                float xi = x[b + i];
                float r = 1.0f / (1.0f + z[i]), si = z[i] * r; /* 1 - s, s */
                float g = si + 2.0f * xi * si * r * GELU_S * (1.0f + 3.0f * GELU_C * xi * xi);
                dx[b + i] = dout[b + i] * g;
            }
        }
        return;
    }
#endif
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (m >= PAR_MIN)
#endif
    for (int64_t i = 0; i < m; i++) {
        REAL xi = x[i];
        REAL u = GELU_S * (xi + GELU_C * xi * xi * xi);
        REAL th = TANH(u);
        REAL sech2 = (REAL)1 - th * th;
        REAL g = (REAL)0.5 * ((REAL)1 + th) +
                 (REAL)0.5 * xi * sech2 * GELU_S * ((REAL)1 + (REAL)3 * GELU_C * xi * xi);
        dx[i] = dout[i] * g;
    }
}

void SFX(uly_embed_fwd)(REAL *out, const int32_t *tok, const int32_t *pos, const REAL *wte,
                        const REAL *wpe, int64_t n, int64_t C)
{
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n * C >= PAR_MIN)
#endif
    for (int64_t t = 0; t < n; t++) {
        const REAL *we = wte + (int64_t)tok[t] * C, *pe = wpe + (int64_t)pos[t] * C; // (C) each
        for (int64_t i = 0; i < C; i++)
            out[t * C + i] = we[i] + pe[i];
    }
}

void SFX(uly_embed_bwd)(REAL *dwte, REAL *dwpe, const REAL *dout, const int32_t *tok, const int32_t *pos,
                        int64_t n, int64_t C)
{
    for (int64_t t = 0; t < n; t++) { /* token order: rows may repeat */
        const REAL *g = dout + t * C;
        if (dwte) {
            REAL *d = dwte + (int64_t)tok[t] * C;
            for (int64_t i = 0; i < C; i++)
                d[i] += g[i];
        }
        if (dwpe) {
            REAL *d = dwpe + (int64_t)pos[t] * C;
            for (int64_t i = 0; i < C; i++)
                d[i] += g[i];
        }
    }
}

int64_t SFX(uly_xent)(double *loss, REAL *dlogits, const REAL *logits, const int32_t *targets, int64_t n,
                      int64_t V, double dscale)
{
    int64_t count = 0;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) reduction(+ : count) if (n * V >= PAR_MIN)
#endif
    for (int64_t t = 0; t < n; t++) {
        const REAL *lt = logits + t * V;            // (V)
        REAL *dt = dlogits ? dlogits + t * V : NULL; // (V)
        int32_t y = targets[t];
        if (y < 0) {
            loss[t] = 0;
            if (dt)
                for (int64_t i = 0; i < V; i++)
                    dt[i] = 0;
            continue;
        }
        count++;
        double mx = -INFINITY;
        for (int64_t i = 0; i < V; i++)
            if (lt[i] > mx)
                mx = lt[i];
        double s = 0;
        for (int64_t i = 0; i < V; i++)
            s += exp((double)lt[i] - mx);
        double lse = mx + log(s);
        loss[t] = lse - (double)lt[y];
        if (dt)
            for (int64_t i = 0; i < V; i++)
                dt[i] = (REAL)((exp((double)lt[i] - lse) - (i == y ? 1.0 : 0.0)) * dscale);
    }
    return count;
}

void SFX(uly_adamw)(REAL *p, REAL *m1, REAL *m2, const REAL *g, int64_t m, double lr, double b1, double b2,
                    double eps, double wd, int64_t t)
{
    const double c1 = 1.0 - pow(b1, (double)t), c2 = 1.0 - pow(b2, (double)t);
    for (int64_t i = 0; i < m; i++) {
        double gi = g[i];
        double a = b1 * (double)m1[i] + (1 - b1) * gi;
        double v = b2 * (double)m2[i] + (1 - b2) * gi * gi;
        m1[i] = (REAL)a;
        m2[i] = (REAL)v;
        double upd = ((double)m1[i] / c1) / (sqrt((double)m2[i] / c2) + eps) + wd * (double)p[i];
        p[i] = (REAL)((double)p[i] - lr * upd);
    }
}

#undef GELU_S
#undef GELU_C
#undef GELU_TILE
