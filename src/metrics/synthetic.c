/*
** synthetic.c -- synthetic training on a world (metrics.h,
** sq_step_synthetic_*): at each step every worker's Gaussian (or heavy-
** tailed, or outlier) gradient is reduced, the master shards take an SGD
** step and the weights are gathered, and the error of both collectives
** against the exact fp64 result is measured; `shardq world --run` prints
** each step.
*/
#include "shardq/metrics.h"

#include "shardq/synth.h"

#include <stdlib.h>

struct sq_step_synthetic {
    sq_world *w;
    uint64_t seed;
    int data;
    double lr;
    /* Shard buffers hold S elements, which can exceed n: a small model on
    ** many workers pads every shard to whole groups. */
    float *g, *tmp, *u, *red, *m, *what, *what0;
    double *exact;
};

void sq_step_synthetic_close(sq_step_synthetic *s)
{
    if (!s) return;
    free(s->g), free(s->tmp), free(s->u), free(s->red), free(s->m), free(s->what);
    free(s->what0), free(s->exact);
    free(s);
}

int sq_step_synthetic_open(sq_world *w, uint64_t seed, int data, double lr,
                           sq_step_synthetic **out, sq_error *err)
{
    const uint64_t n = sq_world_elements(w), S = sq_world_shard(w), Pad = sq_world_padded(w);
    sq_step_synthetic *s = calloc(1, sizeof *s);
    *out = NULL;
    if (s) {
        *s = (sq_step_synthetic){.w = w, .seed = seed, .data = data, .lr = lr};
        s->g = malloc(n * sizeof *s->g), s->tmp = malloc(n * sizeof *s->tmp);
        s->u = malloc(3 * n * sizeof *s->u), s->red = malloc(Pad * sizeof *s->red);
        s->m = malloc(S * sizeof *s->m);
        s->what = malloc(n * sizeof *s->what), s->what0 = malloc(n * sizeof *s->what0);
        s->exact = calloc(Pad, sizeof *s->exact);
    }
    if (!s || !s->g || !s->tmp || !s->u || !s->red || !s->m || !s->what || !s->what0 ||
        !s->exact) {
        sq_step_synthetic_close(s);
        return sq_error_set(err, SQ_ERR_NOMEM, "out of memory for %llu elements",
                            (unsigned long long)n);
    }
    sq_synth_weights(seed, s->g, n, s->u);
    int rc = sq_world_init_weights(w, s->g);
    if (rc) {
        rc = sq_error_set(err, rc, "%s", sq_world_error(w));
        sq_step_synthetic_close(s);
        return rc;
    }
    *out = s;
    return SQ_OK;
}

/* Every worker's gradient into the world and into the exact mean, then
** the reduce; the fraction of elements clipped by the first quantization. */
static int reduce(sq_step_synthetic *s, uint32_t step, uint64_t *clipped)
{
    sq_world *w = s->w;
    const uint64_t n = sq_world_elements(w);
    sq_world_reset_traffic(w);
    sq_step_exact_zero(w, s->exact);
    for (int r = 0; r < sq_world_workers(w); r++) {
        sq_synth_grad(s->seed, step, r, s->data, n, s->g, s->tmp, s->u);
        int rc = sq_world_put_grad(w, r, s->g);
        if (rc) return rc;
        *clipped += sq_step_add_grad(w, s->exact, s->g, NULL, 1, s->tmp);
    }
    sq_step_exact_mean(w, s->exact);
    return sq_world_reduce_grads(w, step);
}

/* SGD on each master shard's model elements at the reduced gradient (its
** padding stays zero); exact becomes the weights w-hat stands for. */
static int sgd(sq_step_synthetic *s, uint64_t *clipped)
{
    sq_world *w = s->w;
    const uint64_t S = sq_world_shard(w);
    for (int r = 0; r < sq_world_workers(w); r++) {
        uint64_t first = (uint64_t)r * S, len = sq_world_shard_len(w, r);
        int rc = sq_world_get_master(w, r, s->m);
        if (rc) return rc;
        for (uint64_t i = 0; i < len; i++) s->m[i] -= (float)s->lr * s->red[first + i];
        *clipped += sq_step_weight_clipped(w, s->m, s->what0 + first, len, s->u);
        for (uint64_t i = 0; i < len; i++) s->exact[first + i] = (double)s->m[i];
        if ((rc = sq_world_put_master(w, r, s->m))) return rc;
    }
    return SQ_OK;
}

int sq_step_synthetic_run(sq_step_synthetic *s, uint32_t step, sq_step_report *rep,
                          sq_error *err)
{
    sq_world *w = s->w;
    const uint64_t n = sq_world_elements(w);
    const int N = sq_world_workers(w);
    uint64_t clipped_g = 0, clipped_w = 0;
    sq_erracc ge, we;
    sq_erracc_init(&ge);
    sq_erracc_init(&we);
    int differs = 0, rc;
    if ((rc = reduce(s, step, &clipped_g)) || (rc = sq_world_get_weights(w, 0, s->what0)) ||
        (rc = sq_step_grad_error(w, s->exact, s->red, NULL, &ge)) ||
        (rc = sgd(s, &clipped_w)) || (rc = sq_world_gather_weights(w, step)) ||
        (rc = sq_step_replicas(w, s->what0, s->what, &differs)))
        return sq_error_set(err, rc < 0 ? rc : SQ_ERR_ARG, "%s", sq_world_error(w));
    sq_erracc_add(&we, s->what0, s->exact, n);
    *rep = (sq_step_report){.step = step, .identical = !differs,
                            .grad = sq_erracc_finish(&ge), .weight = sq_erracc_finish(&we),
                            .grad_clipped = sq_step_frac(clipped_g, n * (uint64_t)N),
                            .weight_clipped = sq_step_frac(clipped_w, n),
                            .has_residual = sq_world_residual_bytes(w) != 0};
    /* error feedback's state after the reduce */
    if (rep->has_residual) rep->ef_residual = sq_world_residual_rel(w);
    return SQ_OK;
}
