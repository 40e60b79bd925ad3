/*
** metrics_internal.h -- what the files of src/metrics share and users do
** not see.
*/
#ifndef SQ_METRICS_INTERNAL_H
#define SQ_METRICS_INTERNAL_H

#include "shardq/codec.h"

#include <stdint.h>

/* sq_count_clipped of x[i] / div (div >= 1: the division the world makes
** before quantizing a mean), without staging the quotients. */
uint64_t sq_count_clipped_div(const sq_codec *c, const float *x, uint64_t n, float div);

#endif
