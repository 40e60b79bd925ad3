/*
** world_util.h -- the world configuration the Check suites open: a preset,
** one optional knob, and DeepSpeed's per-tensor rules resolved for one
** 64 x 96 matrix (a world of its own has no shape of its own to give them).
*/
#ifndef SQ_WORLD_UTIL_H
#define SQ_WORLD_UTIL_H

#include "shardq/world.h"

#include <check.h>
#include <string.h>

static inline sq_world_config sqt_world_config(int K, int G, const char *preset, const char *set,
                                               uint64_t n, uint64_t seed)
{
    sq_world_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.topo.nodes = K;
    cfg.topo.per_node = G;
    sq_error err = {0};
    ck_assert_int_eq(sq_scheme_preset(preset, &cfg.scheme, &err), SQ_OK);
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

#endif
