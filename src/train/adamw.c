/*
** adamw.c -- AdamW on a shard and the learning-rate schedule (adamw.h).
*/
#include "shardq/train.h"

#include <math.h>

void sq_adamw_step(const sq_adamw *a, float lr, uint32_t t, int decay, float gscale,
                   const float *g, float *w, float *m, float *v, size_t n)
{
    const float b1 = a->beta1, b2 = a->beta2, eps = a->eps;
    const float c1 = 1.0f - (float)pow(b1, (double)t);
    const float c2 = 1.0f - (float)pow(b2, (double)t);
    const float wd = decay ? a->weight_decay : 0.0f;
#pragma omp parallel for simd num_threads(sq_get_threads()) schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * gscale;
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * (gi * gi);
        m[i] = mi;
        v[i] = vi;
        float update = (mi / c1) / (sqrtf(vi / c2) + eps);
        w[i] -= lr * (update + wd * w[i]);
    }
}

float sq_lr_at(const sq_lr_schedule *s, uint32_t step)
{
    if (step < s->warmup) return s->lr * (float)(step + 1) / (float)s->warmup;
    uint32_t span = s->total > s->warmup + 1 ? s->total - s->warmup - 1 : 1;
    double progress = (double)(step - s->warmup) / (double)span;
    if (progress > 1.0) progress = 1.0;
    double cosine = 0.5 * (1.0 + cos(3.14159265358979323846 * progress));
    return (float)((double)s->min_lr + cosine * (double)(s->lr - s->min_lr));
}
