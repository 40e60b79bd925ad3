/*
** metrics_internal.h -- what the files of src/metrics share and users do
** not see.
*/
#ifndef SQ_METRICS_INTERNAL_H
#define SQ_METRICS_INTERNAL_H

#include "shardq/codec.h"
#include "shardq/metrics.h"

#include <stdint.h>

/* sq_count_clipped of x[i] / div (div >= 1: the division the world makes
** before quantizing a mean), without staging the quotients. */
uint64_t sq_count_clipped_div(const sq_codec *c, const float *x, uint64_t n, float div);

/* sq_erracc_add against an fp32 reference (values that fp32 holds
** exactly): the same sums, without an fp64 copy of the reference. */
void sq_erracc_add_f32(sq_erracc *a, const float *got, const float *exact, uint64_t n);

/* sq_step_replicas without the copy where it can: in process (no rank of
** its own) worker 0's w-hat is read where the world holds it in host
** memory; on real ranks every process takes part in worker 0's broadcast
** into what. *w0 is the w-hat read (the world's or what). */
int sq_step_replicas_view(sq_world *w, float *what, float *tmp, const float **w0, int *differs);

/* sq_step_add_grad's clipping count of x32[0..len) without the copies
** factor: the elements that the gradient path's first quantizer clips in
** x32 / N (tmp: len floats, used under grad.dtype=fp16). Counted group by
** group from x32[0], so the counts of parts that begin at multiples of
** sq_step_grad_group add up to the whole's. */
uint64_t sq_step_grad_clipped(const sq_world *w, const float *x32, uint64_t len, float *tmp);
uint64_t sq_step_grad_group(const sq_world *w);

#endif
