/*
** world_util.h -- the world configuration the Check suites open: a preset,
** one optional knob, and DeepSpeed's per-tensor rules resolved for one
** 64 x 96 matrix (a world of its own has no shape of its own to give them).
*/
#ifndef SQ_WORLD_UTIL_H
#define SQ_WORLD_UTIL_H

#include "check_util.h"
#include "shardq/world.h"

#include <check.h>
#include <string.h>

/* K nodes of G workers under preset; every other field zero. */
static inline sq_world_config sqt_world_preset(int K, int G, const char *preset)
{
    sq_world_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.topo.nodes = K;
    cfg.topo.per_node = G;
    sq_error err = {0};
    ck_assert_msg(sq_scheme_preset(preset, &cfg.scheme, &err) == SQ_OK, "%s", err.msg);
    return cfg;
}

static inline sq_world_config sqt_world_config(int K, int G, const char *preset, const char *set,
                                               uint64_t n, uint64_t seed)
{
    sq_world_config cfg = sqt_world_preset(K, G, preset);
    sq_error err = {0};
    if (set) ck_assert_msg(sq_scheme_set(&cfg.scheme, set, &err) == SQ_OK, "%s", err.msg);
    if (sq_scheme_per_tensor(&cfg.scheme)) {
        const uint64_t shape[2] = {64, 96};
        sq_scheme one;
        ck_assert_msg(sq_scheme_for_tensor(&cfg.scheme, &cfg.topo, shape, 2, &one, &err) == SQ_OK,
                      "%s", err.msg);
        cfg.scheme = one;
    }
    cfg.elements = n;
    cfg.seed = seed;
    return cfg;
}

/* `steps` steps of training on w (N workers, n elements), as the GPU suites
** compare them: the weights sqt_fill(seed 1) x 0.01, worker r's gradient of
** step t sqt_fill(seed 100 t + r), SGD at 1e-3 on each master shard. Writes
** from o, per step, the reduced gradient (P elements) then every worker's
** weights (N n); returns o past them. `what` begins a failure's message. */
static inline float *sqt_world_steps(sq_world *w, int N, uint64_t n, int steps, float *o,
                                     const char *what)
{
    const uint64_t S = sq_world_shard(w), P = sq_world_padded(w);
    float *x = (float *)malloc(n * sizeof *x), *m = (float *)calloc(P, sizeof *m);
    ck_assert(x && m);
    sqt_fill(x, n, 1);
    for (uint64_t i = 0; i < n; i++) x[i] *= 0.01f;
    ck_assert_int_eq(sq_world_init_weights(w, x), SQ_OK);
    memcpy(m, x, n * sizeof *m);
    for (int t = 1; t <= steps; t++) {
        for (int r = 0; r < N; r++) {
            sqt_fill(x, n, (uint64_t)(t * 100 + r));
            ck_assert_msg(sq_world_put_grad(w, r, x) == SQ_OK, "%s: %s", what, sq_world_error(w));
        }
        ck_assert_msg(sq_world_reduce_grads(w, (uint32_t)t) == SQ_OK, "%s: %s", what,
                      sq_world_error(w));
        for (int r = 0; r < N; r++) {
            ck_assert_int_eq(sq_world_get_grad_shard(w, r, o + (uint64_t)r * S), SQ_OK);
            for (uint64_t i = 0; i < S && (uint64_t)r * S + i < n; i++)
                m[(uint64_t)r * S + i] -= 1e-3f * o[(uint64_t)r * S + i];
            ck_assert_int_eq(sq_world_put_master(w, r, m + (uint64_t)r * S), SQ_OK);
        }
        o += P;
        ck_assert_msg(sq_world_gather_weights(w, (uint32_t)t) == SQ_OK, "%s: %s", what,
                      sq_world_error(w));
        for (int r = 0; r < N; r++, o += n) ck_assert_int_eq(sq_world_get_weights(w, r, o), SQ_OK);
    }
    free(x), free(m);
    return o;
}

#endif
