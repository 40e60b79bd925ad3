/*
** gpt_layers.h -- the layers of the byte-level GPT (src/train/gpt.c), each a
** forward and a backward over rows of a batch (BT = B * T rows, row b * T + t).
** Internal to libshardq; tests/check_gpt.c checks every backward against
** finite differences of its forward.
**
** Conventions:
**   - Row-major float arrays; a weight matrix W of a Linear layer is stored
**     [OC, C] and applied as x . W^T + b.
**   - Backward functions OVERWRITE what they write (input and parameter
**     gradients), except gl_encoder_bwd, which ADDS into dwte and dwpe (the
**     output head has already written its share of the tied dwte), and
**     gl_residual_bwd, which ADDS (the residual stream's gradient flows on).
**   - Matrix products go through cblas_sgemm, called from inside OpenMP
**     parallel loops on blocks of the output fixed by the shapes, with
**     OpenBLAS's own threads turned off meanwhile (gl_blas_serial_begin).
**     The other loops are OpenMP parallel loops too (sq_get_threads()
**     threads) in which every sum runs in a fixed order that does not depend
**     on the thread count: a sum over rows (a bias or gain gradient, the
**     embedding backward) runs in one thread, row after row; threads split
**     the channels. So the bytes depend on neither thread count.
**   - No function allocates memory (OpenBLAS keeps its own buffers): the
**     scratch comes from the caller.
*/
#ifndef SQ_TRAIN_GPT_LAYERS_H
#define SQ_TRAIN_GPT_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#define GL_LN_EPS 1e-5f

/* Turns OpenBLAS's own threads off (when it has a pthreads pool) until the
** matching end; returns what end needs. Nests. */
int gl_blas_serial_begin(void);
void gl_blas_serial_end(int saved);

/* out[b,t,:] = wte[tok[b,t],:] + wpe[t,:]; tok has B*T entries. */
void gl_encoder_fwd(float *out, const uint8_t *tok, const float *wte, const float *wpe, int B,
                    int T, int C);
/* dwte[tok[b,t],:] += dout[b,t,:]; dwpe[t,:] += dout[b,t,:] (either may be
** NULL). Each element's sum runs over b, t in row order. */
void gl_encoder_bwd(float *dwte, float *dwpe, const float *dout, const uint8_t *tok, int B, int T,
                    int C);

/* out = (x - mean) * rstd * w + b per row, rstd = 1/sqrt(var + eps), the
** biased variance; mean[r], rstd[r] are kept for the backward. */
void gl_layernorm_fwd(float *out, float *mean, float *rstd, const float *x, const float *w,
                      const float *b, size_t rows, int C);
/* dx, dw, db from dout (any of dx, dw, db may be NULL). */
void gl_layernorm_bwd(float *dx, float *dw, float *db, const float *dout, const float *x,
                      const float *w, const float *mean, const float *rstd, size_t rows, int C);

/* out[rows, OC] = x[rows, C] . W[OC, C]^T + bias (bias may be NULL). */
void gl_matmul_fwd(float *out, const float *x, const float *W, const float *bias, int rows, int C,
                   int OC);
/* dx = dout . W, dW = dout^T . x, dbias = column sums of dout (dbias may be
** NULL). */
void gl_matmul_bwd(float *dx, float *dW, float *dbias, const float *dout, const float *x,
                   const float *W, int rows, int C, int OC);

/* Causal multi-head attention. qkv[b,t,:] = [q | k | v], each C = NH * hs
** wide, head h in columns h*hs .. h*hs+hs-1 of each. att[b,h,t,t2] keeps the
** softmax of (q_t . k_t2) / sqrt(hs) over t2 <= t (0 above the diagonal);
** out[b,t,h*hs + i] = sum_{t2 <= t} att[b,h,t,t2] v[b,t2,h*hs + i].
*/
void gl_attention_fwd(float *out, float *att, const float *qkv, int B, int T, int C, int NH);
/* dqkv (overwritten) from dout, qkv and att of the forward. scratch:
** B*NH*T*T floats. */
void gl_attention_bwd(float *dqkv, const float *dout, const float *qkv, const float *att,
                      float *scratch, int B, int T, int C, int NH);

/* GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
void gl_gelu_fwd(float *out, const float *x, size_t n);
/* dx = dout * gelu'(x); dx may be dout (in place). */
void gl_gelu_bwd(float *dx, const float *x, const float *dout, size_t n);

/* out = a + b; out may be a or b. */
void gl_residual_fwd(float *out, const float *a, const float *b, size_t n);
/* da += dout, db += dout (either may be NULL). */
void gl_residual_bwd(float *da, float *db, const float *dout, size_t n);

/* The tied output head with softmax and cross-entropy: logits[r, :] = x[r, :]
** . wte^T (V = 256 columns), probs = softmax(logits) (written into probs),
** and losses[r] = -log probs[r, targets[r]], computed as logsumexp - logit
** in double. Returns the mean of losses, summed in row order in double. */
double gl_head_fwd(float *probs, float *losses, const float *x, const float *wte,
                   const uint8_t *targets, int rows, int C);
/* Backward of the mean loss: dlogits = (probs - onehot(targets)) / rows
** (written into dlogits), dx = dlogits . wte, dwte = dlogits^T . x (dwte
** overwritten, dx and dwte may be NULL). */
void gl_head_bwd(float *dx, float *dwte, float *dlogits, const float *probs,
                 const uint8_t *targets, const float *x, const float *wte, int rows, int C);

#endif /* SQ_TRAIN_GPT_LAYERS_H */
