/*
** adamw.h -- the optimizer of a worker's shard: AdamW and the learning-rate
** schedule (README, "Training").
**
** As in Megatron's distributed optimizer, every worker updates only its own
** shard of the fp32 master weights with its own shard of the Adam moments,
** from its partition of the reduced gradient.
*/
#ifndef SQ_TRAIN_ADAMW_H
#define SQ_TRAIN_ADAMW_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sq_adamw {
    float beta1, beta2, eps;
    float weight_decay; /* decoupled: w -= lr * wd * w, on params with decay */
} sq_adamw;

/* One AdamW step t (1-based, for the bias corrections) on n elements:
** g is scaled by gscale first (gradient clipping), then
**   m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2,
**   w -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + lr wd w  (decay only).
** Element by element in fp32, so the bytes do not depend on the split. */
void sq_adamw_step(const sq_adamw *a, float lr, uint32_t t, int decay, float gscale,
                   const float *g, float *w, float *m, float *v, size_t n);

typedef struct sq_lr_schedule {
    float lr;        /* peak */
    float min_lr;    /* the floor of the cosine */
    uint32_t warmup; /* steps of linear warm-up */
    uint32_t total;  /* steps of the run: the cosine reaches min_lr at the last */
} sq_lr_schedule;

/* The learning rate of step (0-based): lr (step + 1) / warmup during the
** warm-up, then a cosine from lr down to min_lr at step total - 1. */
float sq_lr_at(const sq_lr_schedule *s, uint32_t step);

#ifdef __cplusplus
}
#endif
#endif /* SQ_TRAIN_ADAMW_H */
