/* SPDX-License-Identifier: Apache-2.0 */
/* test_model.c -- the GPT-2 layers: every backward against central finite
 * differences in fp64, the fp32 versions against the fp64 ones, AdamW
 * against its closed form after one step, and the labels/positions of
 * sequence shards (shift across shard boundaries, documents). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "ulysses_model.h"

/* ------------------------------------------------ finite-difference check */

typedef struct var {
    const char *name;
    double *x;        /* the input, perturbed in place */
    const double *g;  /* analytic gradient of L = sum(dy * y) */
    size_t n;
} var;

typedef void (*fwd_fn)(void *ctx, double *y);

/* For every element of every variable: (L(x+h) - L(x-h)) / 2h against g. */
static void fd_check(fwd_fn fwd, void *ctx, const double *dy, size_t m, const var *v, int nv)
{
    const double h = 1e-6, atol = 1e-8, rtol = 1e-6;
    double *y = malloc(m * sizeof *y);
    ck_assert_ptr_nonnull(y);
    for (int i = 0; i < nv; i++)
        for (size_t e = 0; e < v[i].n; e++) {
            double save = v[i].x[e], lp = 0, lm = 0;
            v[i].x[e] = save + h;
            fwd(ctx, y);
            for (size_t j = 0; j < m; j++)
                lp += dy[j] * y[j];
            v[i].x[e] = save - h;
            fwd(ctx, y);
            for (size_t j = 0; j < m; j++)
                lm += dy[j] * y[j];
            v[i].x[e] = save;
            double num = (lp - lm) / (2 * h), got = v[i].g[e];
            ck_assert_msg(isfinite(got) && fabs(got - num) <= atol + rtol * fabs(num),
                          "d/d%s[%zu]: backward %.12g, finite difference %.12g", v[i].name, e, got, num);
        }
    free(y);
}

/* ------------------------------------------------------------ LayerNorm */

typedef struct ln_ctx {
    int64_t n, C;
    double *x, *w, *b, *mean, *rstd;
} ln_ctx;

static void ln_fwd(void *p, double *y)
{
    ln_ctx *c = p;
    uly_layernorm_fwd_f64(y, c->mean, c->rstd, c->x, c->w, c->b, c->n, c->C);
}

START_TEST(layernorm_grad)
{
    enum { n = 3, C = 8 };
    double x[n * C], w[C], b[C], mean[n], rstd[n], y[n * C], dy[n * C], dx[n * C], dw[C], db[C];
    tu_fill(x, n * C, 1, -2, 2);
    tu_fill(w, C, 2, 0.5, 1.5);
    tu_fill(b, C, 3, -1, 1);
    tu_fill(dy, n * C, 4, -1, 1);
    ln_ctx c = {n, C, x, w, b, mean, rstd};
    ln_fwd(&c, y);
    for (int i = 0; i < n * C; i++)
        dx[i] = 0.25; /* the backward accumulates: start from a known value */
    memset(dw, 0, sizeof dw);
    memset(db, 0, sizeof db);
    uly_layernorm_bwd_f64(dx, dw, db, dy, x, w, mean, rstd, n, C);
    for (int i = 0; i < n * C; i++)
        dx[i] -= 0.25;
    var v[3] = {{"x", x, dx, n * C}, {"w", w, dw, C}, {"b", b, db, C}};
    fd_check(ln_fwd, &c, dy, n * C, v, 3);
    /* normalised rows: mean 0, variance 1 - eps-ish with w = 1, b = 0 */
    for (int i = 0; i < C; i++) {
        w[i] = 1;
        b[i] = 0;
    }
    ln_fwd(&c, y);
    for (int t = 0; t < n; t++) {
        double s = 0, s2 = 0;
        for (int i = 0; i < C; i++) {
            s += y[t * C + i];
            s2 += y[t * C + i] * y[t * C + i];
        }
        ck_assert_double_eq_tol(s / C, 0, 1e-12);
        ck_assert_double_eq_tol(s2 / C, 1, 1e-3);
    }
}
END_TEST

/* --------------------------------------------------------------- linear */

typedef struct lin_ctx {
    int64_t n, IC, OC;
    double *x, *w, *b;
} lin_ctx;

static void lin_fwd(void *p, double *y)
{
    lin_ctx *c = p;
    uly_linear_fwd_f64(y, c->x, c->w, c->b, c->n, c->IC, c->OC);
}

START_TEST(linear_grad)
{
    enum { n = 4, IC = 5, OC = 3 };
    double x[n * IC], w[OC * IC], b[OC], dy[n * OC], dx[n * IC], dw[OC * IC], db[OC];
    tu_fill(x, n * IC, 5, -1, 1);
    tu_fill(w, OC * IC, 6, -1, 1);
    tu_fill(b, OC, 7, -1, 1);
    tu_fill(dy, n * OC, 8, -1, 1);
    lin_ctx c = {n, IC, OC, x, w, b};
    memset(db, 0, sizeof db);
    uly_linear_bwd_f64(dx, 0, dw, 0, db, dy, x, w, n, IC, OC);
    var v[3] = {{"x", x, dx, n * IC}, {"w", w, dw, OC * IC}, {"b", b, db, OC}};
    fd_check(lin_fwd, &c, dy, n * OC, v, 3);
    /* accumulate flags add to what is there */
    double dx2[n * IC], dw2[OC * IC];
    for (int i = 0; i < n * IC; i++)
        dx2[i] = 1;
    for (int i = 0; i < OC * IC; i++)
        dw2[i] = -1;
    uly_linear_bwd_f64(dx2, 1, dw2, 1, NULL, dy, x, w, n, IC, OC);
    for (int i = 0; i < n * IC; i++)
        ck_assert_double_eq_tol(dx2[i], dx[i] + 1, 1e-14);
    for (int i = 0; i < OC * IC; i++)
        ck_assert_double_eq_tol(dw2[i], dw[i] - 1, 1e-14);
    /* no tokens: dw is zeroed, not left alone */
    uly_linear_bwd_f64(NULL, 0, dw2, 0, NULL, dy, x, w, 0, IC, OC);
    for (int i = 0; i < OC * IC; i++)
        ck_assert(dw2[i] == 0);
}
END_TEST

/* ----------------------------------------------------------------- GELU */

typedef struct gelu_ctx {
    int64_t m;
    double *x;
} gelu_ctx;

static void gelu_fwd(void *p, double *y)
{
    gelu_ctx *c = p;
    uly_gelu_fwd_f64(y, c->x, c->m);
}

START_TEST(gelu_grad)
{
    enum { m = 40 };
    double x[m], dy[m], dx[m], y[m];
    tu_fill(x, m, 9, -5, 5);
    tu_fill(dy, m, 10, -1, 1);
    gelu_ctx c = {m, x};
    uly_gelu_bwd_f64(dx, x, dy, m);
    var v[1] = {{"x", x, dx, m}};
    fd_check(gelu_fwd, &c, dy, m, v, 1);
    /* reference values of the tanh approximation */
    double xs[3] = {0, 1, -2}, ys[3];
    uly_gelu_fwd_f64(ys, xs, 3);
    ck_assert(ys[0] == 0);
    ck_assert_double_eq_tol(ys[1], 0.8411919906082768, 1e-13);
    ck_assert_double_eq_tol(ys[2], -0.04540230591222494, 1e-13);
    (void)y;
}
END_TEST

/* ------------------------------------------------------------ embedding */

typedef struct emb_ctx {
    int64_t n, C;
    const int32_t *tok, *pos;
    double *wte, *wpe;
} emb_ctx;

static void emb_fwd(void *p, double *y)
{
    emb_ctx *c = p;
    uly_embed_fwd_f64(y, c->tok, c->pos, c->wte, c->wpe, c->n, c->C);
}

START_TEST(embed_grad)
{
    enum { n = 6, C = 3, V = 4, T = 5 };
    const int32_t tok[n] = {1, 3, 1, 0, 3, 3}, pos[n] = {0, 1, 2, 0, 1, 4};
    double wte[V * C], wpe[T * C], dy[n * C], dwte[V * C], dwpe[T * C];
    tu_fill(wte, V * C, 11, -1, 1);
    tu_fill(wpe, T * C, 12, -1, 1);
    tu_fill(dy, n * C, 13, -1, 1);
    memset(dwte, 0, sizeof dwte);
    memset(dwpe, 0, sizeof dwpe);
    uly_embed_bwd_f64(dwte, dwpe, dy, tok, pos, n, C);
    emb_ctx c = {n, C, tok, pos, wte, wpe};
    var v[2] = {{"wte", wte, dwte, V * C}, {"wpe", wpe, dwpe, T * C}};
    fd_check(emb_fwd, &c, dy, n * C, v, 2);
}
END_TEST

/* -------------------------------------------------------- cross-entropy */

typedef struct xent_ctx {
    int64_t n, V;
    double *logits;
    const int32_t *y;
} xent_ctx;

static void xent_fwd(void *p, double *loss)
{
    xent_ctx *c = p;
    uly_xent_f64(loss, NULL, c->logits, c->y, c->n, c->V, 1);
}

START_TEST(xent_grad)
{
    enum { n = 5, V = 7 };
    const int32_t y[n] = {1, -1, 6, 0, -1};
    double logits[n * V], loss[n], dl[n * V], dy[n];
    tu_fill(logits, n * V, 14, -3, 3);
    const double s = 1.0 / 3;
    for (int t = 0; t < n; t++)
        dy[t] = s; /* L = sum of losses / count */
    ck_assert_int_eq(uly_xent_f64(loss, dl, logits, y, n, V, s), 3);
    ck_assert(loss[1] == 0 && loss[4] == 0);
    for (int i = 0; i < V; i++)
        ck_assert(dl[1 * V + i] == 0 && dl[4 * V + i] == 0);
    /* loss of token 0 by hand */
    double mx = -INFINITY, se = 0;
    for (int i = 0; i < V; i++)
        mx = fmax(mx, logits[i]);
    for (int i = 0; i < V; i++)
        se += exp(logits[i] - mx);
    ck_assert_double_eq_tol(loss[0], mx + log(se) - logits[1], 1e-13);
    xent_ctx c = {n, V, logits, y};
    var v[1] = {{"logits", logits, dl, n * V}};
    fd_check(xent_fwd, &c, dy, n, v, 1);
    /* all ignored: no NaN anywhere, count 0 */
    const int32_t none[n] = {-1, -1, -1, -1, -1};
    ck_assert_int_eq(uly_xent_f64(loss, dl, logits, none, n, V, 0), 0);
    for (int i = 0; i < n * V; i++)
        ck_assert(dl[i] == 0);
    for (int t = 0; t < n; t++)
        ck_assert(loss[t] == 0);
}
END_TEST

/* ------------------------------------------------- fp32 matches fp64 */

START_TEST(f32_matches_f64)
{
    enum { n = 7, C = 16, OC = 9 };
    double x[n * C], w[OC * C], b[OC], lw[C], lb[C], y[n * OC], ly[n * C], m64[n], r64[n];
    float xf[n * C], wf[OC * C], bf[OC], lwf[C], lbf[C], yf[n * OC], lyf[n * C], m32[n], r32[n];
    tu_fill(x, n * C, 15, -2, 2);
    tu_fill(w, OC * C, 16, -1, 1);
    tu_fill(b, OC, 17, -1, 1);
    tu_fill(lw, C, 18, 0.5, 1.5);
    tu_fill(lb, C, 19, -1, 1);
    tu_convert(x, xf, n * C, ULY_F32);
    tu_convert(w, wf, OC * C, ULY_F32);
    tu_convert(b, bf, OC, ULY_F32);
    tu_convert(lw, lwf, C, ULY_F32);
    tu_convert(lb, lbf, C, ULY_F32);
    /* the fp64 reference on the fp32-rounded inputs */
    for (int i = 0; i < n * C; i++) x[i] = xf[i];
    for (int i = 0; i < OC * C; i++) w[i] = wf[i];
    for (int i = 0; i < OC; i++) b[i] = bf[i];
    for (int i = 0; i < C; i++) { lw[i] = lwf[i]; lb[i] = lbf[i]; }
    char msg[512];
    uly_linear_fwd_f64(y, x, w, b, n, C, OC);
    uly_linear_fwd_f32(yf, xf, wf, bf, n, C, OC);
    ck_assert_msg(tu_close(y, yf, ULY_F32, n * OC, 1e-5, 1e-5, msg, sizeof msg) == 0, "linear: %s", msg);
    uly_layernorm_fwd_f64(ly, m64, r64, x, lw, lb, n, C);
    uly_layernorm_fwd_f32(lyf, m32, r32, xf, lwf, lbf, n, C);
    ck_assert_msg(tu_close(ly, lyf, ULY_F32, n * C, 1e-5, 1e-5, msg, sizeof msg) == 0, "layernorm: %s", msg);
    uly_gelu_fwd_f64(ly, x, n * C);
    uly_gelu_fwd_f32(lyf, xf, n * C);
    ck_assert_msg(tu_close(ly, lyf, ULY_F32, n * C, 1e-6, 1e-5, msg, sizeof msg) == 0, "gelu: %s", msg);
}
END_TEST

/* ---------------------------------------------------------------- AdamW */

START_TEST(adamw_first_steps)
{
    double p[3] = {1.0, -2.0, 0.5}, m1[3] = {0}, m2[3] = {0}, g[3] = {0.1, -0.3, 0};
    const double lr = 0.01, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
    double p0[3];
    memcpy(p0, p, sizeof p);
    uly_adamw_f64(p, m1, m2, g, 3, lr, b1, b2, eps, wd, 1);
    for (int i = 0; i < 3; i++) {
        /* step 1: bias-corrected moments are g and g^2 */
        double want = p0[i] - lr * (g[i] / (fabs(g[i]) + eps) + wd * p0[i]);
        ck_assert_double_eq_tol(p[i], want, 1e-15);
        ck_assert_double_eq_tol(m1[i], (1 - b1) * g[i], 1e-17);
        ck_assert_double_eq_tol(m2[i], (1 - b2) * g[i] * g[i], 1e-17);
    }
    /* step 2 with the same gradient: moments are still g and g^2 after correction */
    memcpy(p0, p, sizeof p);
    uly_adamw_f64(p, m1, m2, g, 3, lr, b1, b2, eps, wd, 2);
    for (int i = 0; i < 3; i++) {
        double want = p0[i] - lr * (g[i] / (fabs(g[i]) + eps) + wd * p0[i]);
        ck_assert_double_eq_tol(p[i], want, 1e-12);
    }
}
END_TEST

/* --------------------------------------------------------------- labels */

START_TEST(labels_shift_across_shards)
{
    enum { N = 11 };
    int32_t row[N + 1];
    for (int i = 0; i <= N; i++)
        row[i] = 100 + i;
    uint8_t no_loss[N] = {0};
    no_loss[4] = 1;
    for (int P = 1; P <= 4; P++) {
        int32_t tok[N], tgt[N], pos[N];
        for (int r = 0; r < P; r++) {
            int64_t b, c;
            uly_split(N, P, r, &b, &c);
            ck_assert_int_eq(uly_shard_labels(row, no_loss, N, NULL, 0, b, c, tok + b, tgt + b, pos + b), 0);
            if (r + 1 < P) /* the last token of shard r predicts the first token of shard r + 1 */
                ck_assert_int_eq(tgt[b + c - 1], row[b + c]);
        }
        for (int t = 0; t < N; t++) {
            ck_assert_int_eq(tok[t], row[t]);
            ck_assert_int_eq(tgt[t], t == 4 ? -1 : row[t + 1]);
            ck_assert_int_eq(pos[t], t);
        }
    }
}
END_TEST

START_TEST(labels_documents)
{
    enum { N = 10 };
    int32_t row[N + 1], tok[N], tgt[N], pos[N];
    for (int i = 0; i <= N; i++)
        row[i] = i;
    const int64_t off[5] = {0, 3, 3, 7, 10}; /* documents of 3, 0, 4 and 3 tokens */
    for (int P = 1; P <= 4; P++) {
        for (int r = 0; r < P; r++) {
            int64_t b, c;
            uly_split(N, P, r, &b, &c);
            ck_assert_int_eq(uly_shard_labels(row, NULL, N, off, 4, b, c, tok + b, tgt + b, pos + b), 0);
        }
        const int32_t want_pos[N] = {0, 1, 2, 0, 1, 2, 3, 0, 1, 2};
        const int32_t want_tgt[N] = {1, 2, -1, 4, 5, 6, -1, 8, 9, -1};
        for (int t = 0; t < N; t++) {
            ck_assert_int_eq(pos[t], want_pos[t]);
            ck_assert_int_eq(tgt[t], want_tgt[t]);
        }
    }
    const int64_t bad1[3] = {0, 5, 9}, bad2[3] = {0, 6, 4};
    ck_assert_int_eq(uly_shard_labels(row, NULL, N, bad1, 2, 0, N, tok, tgt, pos), -1);
    ck_assert_int_eq(uly_shard_labels(row, NULL, N, bad2, 2, 0, N, tok, tgt, pos), -1);
    ck_assert_int_eq(uly_shard_labels(row, NULL, N, NULL, 0, 5, 6, tok, tgt, pos), -1);
}
END_TEST

static Suite *make_model_suite(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("layers");
    tcase_add_test(tc, layernorm_grad);
    tcase_add_test(tc, linear_grad);
    tcase_add_test(tc, gelu_grad);
    tcase_add_test(tc, embed_grad);
    tcase_add_test(tc, xent_grad);
    tcase_add_test(tc, f32_matches_f64);
    tcase_add_test(tc, adamw_first_steps);
    tcase_add_test(tc, labels_shift_across_shards);
    tcase_add_test(tc, labels_documents);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(make_model_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
