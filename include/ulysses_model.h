/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ulysses_model.h -- the layers of a GPT-2 model as pure functions (no MPI):
 * LayerNorm, linear (through BLAS), tanh-GELU, token + position embedding,
 * cross-entropy with ignore_index -1, AdamW, and the labels/positions of a
 * sequence shard.  Each layer exists in fp32 (_f32, what training uses) and
 * fp64 (_f64, what the gradient checks use); both are the same code.
 *
 * Shapes (row-major, n = tokens of the call):
 *   x, out      (n, C) or (n, IC) / (n, OC)
 *   w           linear weight (OC, IC), i.e. out = x w^T + b
 * Conventions that make training partition independent (doc/train.md):
 *   - every function treats tokens independently, except the parameter
 *     gradients, which are sums over the n tokens of the call in token order
 *     (or one GEMM over them); the caller decides which tokens form a call;
 *   - "accumulate" means +=, else =.
 * Accumulation precision: LayerNorm mean and variance, bias and LayerNorm
 * parameter gradients, and the cross-entropy (max, sum of exponentials,
 * loss) are accumulated in double; GEMMs run in the element type.
 * Nothing here allocates, fails or exits.
 */
#ifndef ULYSSES_MODEL_H
#define ULYSSES_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ULY_LN_EPS 1e-5

/* ---- fp32 (training) */
/* out (n,C) = (x - mean) * rstd * w + b; mean, rstd (n); w, b (C) */
void uly_layernorm_fwd_f32(float *out, float *mean, float *rstd, const float *x, const float *w,
    const float *b, int64_t n, int64_t C);
/* dx (n,C) += dL/dx; dw, db (C) += sums over tokens (double, token order) */
void uly_layernorm_bwd_f32(float *dx, double *dw, double *db, const float *dout, const float *x,
    const float *w, const float *mean, const float *rstd, int64_t n,
    int64_t C);
/* out (n,OC) = x (n,IC) w^T (w: (OC,IC)) then + b (OC, may be NULL) */
void uly_linear_fwd_f32(float *out, const float *x, const float *w, const float *b, int64_t n,
    int64_t IC, int64_t OC);
/* dx (n,IC) (+)= dout w (dx may be NULL); dw (OC,IC) (+)= dout^T x (dw may be NULL);
   db (OC) += column sums of dout (double, token order; may be NULL) */
void uly_linear_bwd_f32(float *dx, int acc_dx, float *dw, int acc_dw, double *db,
    const float *dout, const float *x, const float *w, int64_t n, int64_t IC,
    int64_t OC);
/* tanh GELU: out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), m elements */
void uly_gelu_fwd_f32(float *out, const float *x, int64_t m);
/* dx = dout * gelu'(x) (dx may alias dout) */
void uly_gelu_bwd_f32(float *dx, const float *x, const float *dout, int64_t m);
/* out (n,C) = wte[tok[t]] + wpe[pos[t]]; wte (V,C), wpe (T,C) */
void uly_embed_fwd_f32(float *out, const int32_t *tok, const int32_t *pos, const float *wte,
    const float *wpe, int64_t n, int64_t C);
/* dwte[tok[t]] += dout[t], dwpe[pos[t]] += dout[t], tokens in order (either may be NULL) */
void uly_embed_bwd_f32(float *dwte, float *dwpe, const float *dout, const int32_t *tok,
    const int32_t *pos, int64_t n, int64_t C);
/* Cross-entropy of logits (n,V) against targets (n) (-1: ignored).  loss[t] (double) is
   log-sum-exp - logit[target], 0 when ignored.  dlogits (n,V) (may be NULL) =
   (softmax - onehot) * dscale, 0 for ignored rows.  Returns the non-ignored count. */
int64_t uly_xent_f32(double *loss, float *dlogits, const float *logits, const int32_t *targets,
    int64_t n, int64_t V, double dscale);
/* One AdamW update of m elements: m1 = b1 m1 + (1-b1) g; m2 = b2 m2 + (1-b2) g^2;
   p -= lr (m1/(1-b1^t) / (sqrt(m2/(1-b2^t)) + eps) + wd p); t >= 1 */
void uly_adamw_f32(float *p, float *m1, float *m2, const float *g, int64_t m, double lr, double b1,
    double b2, double eps, double wd, int64_t t);

/* ---- fp64 (gradient checks): the same functions on double */
void uly_layernorm_fwd_f64(double *out, double *mean, double *rstd, const double *x, const double *w,
    const double *b, int64_t n, int64_t C);
void uly_layernorm_bwd_f64(double *dx, double *dw, double *db, const double *dout, const double *x,
    const double *w, const double *mean, const double *rstd, int64_t n,
    int64_t C);
void uly_linear_fwd_f64(double *out, const double *x, const double *w, const double *b, int64_t n,
    int64_t IC, int64_t OC);
void uly_linear_bwd_f64(double *dx, int acc_dx, double *dw, int acc_dw, double *db,
    const double *dout, const double *x, const double *w, int64_t n, int64_t IC,
    int64_t OC);
void uly_gelu_fwd_f64(double *out, const double *x, int64_t m);
void uly_gelu_bwd_f64(double *dx, const double *x, const double *dout, int64_t m);
void uly_embed_fwd_f64(double *out, const int32_t *tok, const int32_t *pos, const double *wte,
    const double *wpe, int64_t n, int64_t C);
void uly_embed_bwd_f64(double *dwte, double *dwpe, const double *dout, const int32_t *tok,
    const int32_t *pos, int64_t n, int64_t C);
int64_t uly_xent_f64(double *loss, double *dlogits, const double *logits, const int32_t *targets,
    int64_t n, int64_t V, double dscale);
void uly_adamw_f64(double *p, double *m1, double *m2, const double *g, int64_t m, double lr, double b1,
    double b2, double eps, double wd, int64_t t);

/*
 * Inputs, labels and positions of tokens [t0, t0 + n) of one row.
 * row (N + 1): the row's tokens followed by the token after it (the label
 * of the last one), all in [0, V).  no_loss (N, may be NULL): nonzero marks
 * a token whose label is ignored.  Documents: doc_off (docs + 1) offsets
 * with doc_off[0] = 0, non-decreasing, doc_off[docs] = N; NULL for one
 * document.  Outputs (n each): tok[t] = row[t0+t]; target[t] = row[t0+t+1],
 * or -1 when no_loss marks the token or it is the last of its document
 * (with doc_off); pos[t] = position of the token inside its document.  The
 * shift is done on the whole row before sharding, so the last token of a
 * shard gets the first token of the next shard as its label.  Returns 0, or
 * -1 on bad arguments.
 */
int uly_shard_labels(const int32_t *row, const uint8_t *no_loss, int64_t N, const int64_t *doc_off,
                     int64_t docs, int64_t t0, int64_t n, int32_t *tok, int32_t *target, int32_t *pos);

#ifdef __cplusplus
}
#endif

#endif /* ULYSSES_MODEL_H */
