/*
** gpt.h -- a byte-level GPT-2-style language model, forward and backward
** written out in C (README, "Training").
**
**   tokens (bytes) -> token embedding wte + position embedding wpe
**   L blocks, each:  x += proj(attention(ln1(x)))   causal, `heads` heads
**                    x += fc2(gelu(fc1(ln2(x))))    4C hidden
**   ln_f, then logits = x . wte^T (the output head is tied to wte)
**   loss = mean cross-entropy of the next byte over the B x T positions
**
** The params are separate arrays, one per tensor, in the order of
** sq_gpt_params(): the unit that the sharded world shards and that a trace
** stores. Every matrix product is a single-threaded CBLAS sgemm on a block
** of rows fixed by the shapes, blocks side by side under OpenMP; the other
** layers are parallel loops whose every sum runs in a fixed order. So a
** run's bytes depend on its inputs alone, not on the thread counts (OpenBLAS
** picks its kernels by CPU, so another CPU type may round differently).
**
** Errors: functions returning int give SQ_OK, or SQ_ERR_SPEC for a shape
** out of range and SQ_ERR_NOMEM when memory runs out, with a sentence in
** err (which may be NULL).
*/
#ifndef SQ_TRAIN_GPT_H
#define SQ_TRAIN_GPT_H

#include "shardq.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SQ_GPT_VOCAB 256    /* bytes */
#define SQ_GPT_NAMELEN 32

typedef struct sq_gpt_config {
    int layers;   /* L >= 1 */
    int channels; /* C >= 1, a multiple of heads */
    int heads;    /* NH >= 1 */
    int context;  /* T max: rows of wpe */
} sq_gpt_config;

/* The shape checks (C % heads, sizes that overflow, ...). */
int sq_gpt_validate(const sq_gpt_config *c, sq_error *err);

/* One param tensor: "wte", "wpe", "h.0.ln1.w", ... "lnf.b". */
typedef struct sq_gpt_param {
    char name[SQ_GPT_NAMELEN];
    int ndim;          /* 1 or 2 */
    uint64_t shape[2]; /* row-major */
    uint64_t n;
    int decay;         /* 1: weight decay applies (matrices and embeddings) */
} sq_gpt_param;

/* Params per model: 4 + 12 L. */
size_t sq_gpt_nparams(const sq_gpt_config *c);
/* Fills p[0 .. sq_gpt_nparams) in model order. */
void sq_gpt_params(const sq_gpt_config *c, sq_gpt_param *p);
/* Total elements of all params. */
uint64_t sq_gpt_elements(const sq_gpt_config *c);

/* GPT-2 initialisation, a function of seed alone: matrices and embeddings
** N(0, 0.02) (the two projections into the residual stream scaled by
** 1/sqrt(2 L)), biases 0, LayerNorm gains 1. Every value is rounded to bf16,
** so that the bf16 weights every worker starts from equal the fp32 masters
** (Megatron clones the masters from the bf16 model). The normals come from
** Philox keyed by the seed (site SQ_GPT_INIT_SITE), so the bytes do not
** depend on the machine. params[p] holds p's n floats. */
#define SQ_GPT_INIT_SITE 0xf0
void sq_gpt_init(const sq_gpt_config *c, uint64_t seed, float *const *params);

/* Activations and scratch for batches of at most B sequences of at most T
** <= context tokens. */
typedef struct sq_gpt_workspace sq_gpt_workspace;
int sq_gpt_workspace_new(const sq_gpt_config *c, int B, int T, sq_gpt_workspace **out,
                         sq_error *err);
void sq_gpt_workspace_free(sq_gpt_workspace *ws);
/* Bytes the workspace holds. */
uint64_t sq_gpt_workspace_bytes(const sq_gpt_workspace *ws);

/* Forward over B x T tokens (b * T + t): the mean next-byte loss against
** targets (cross-entropy in nats, accumulated in double). The activations
** stay in ws for sq_gpt_backward. */
double sq_gpt_forward(sq_gpt_workspace *ws, const float *const *params, const uint8_t *inputs,
                      const uint8_t *targets, int B, int T);
/* Backward of the last forward: the gradient of its mean loss with respect
** to every param, written (not accumulated) into grads[p]. */
void sq_gpt_backward(sq_gpt_workspace *ws, const float *const *params, float *const *grads);

/* Floating-point operations of one forward + backward over B x T tokens,
** counted from the model's products (2 per multiply-add; the matrix
** products, attention scores and values, and the output head), i.e. the
** work that GFLOP/s figures are quoted in. */
double sq_gpt_flops(const sq_gpt_config *c, int B, int T);

#ifdef __cplusplus
}
#endif
#endif /* SQ_TRAIN_GPT_H */
