/*
** step.h -- the measured step: what the collectives of one training step
** did, against exact fp64 arithmetic.
**
** `shardq replay` (a captured trace), `shardq world --run` (synthetic data)
** and `shardq train` run the same world calls; these are the measurements
** they take around them, written once so that the three agree to the bit:
**
**   exact      the result the gradient reduce-scatter should give: every
**              worker's gradient summed in fp64, worker by worker
**              (sq_step_add_grad), then divided by N where the scheme
**              averages (sq_step_exact_mean);
**   clipped    how many elements the first quantization of each path clips
**              (sq_count_clipped on what that quantizer is given);
**   error      each worker's partition of the reduced gradient against
**              the exact values of its elements, in worker order
**              (sq_step_grad_error), and the gathered w-hat against the
**              weights it stands for (sq_erracc_add);
**   replicas   every worker's w-hat holds the same bytes as worker 0's
**              (sq_step_replicas).
**
** The world's calls return its sq_status kind, with its sentence in
** sq_world_error(); these functions return that kind unchanged.
*/
#ifndef SQ_METRICS_STEP_H
#define SQ_METRICS_STEP_H

#include "metrics/errstats.h"
#include "world/world.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* exact[0 .. padded) := 0: the sums of a new step. */
void sq_step_exact_zero(const sq_world *w, double *exact);

/* Adds `copies` workers' gradient to exact[0 .. n): exact[i] += copies *
** x[i], from x64 (the gradient's own fp64 values) when given, else from
** x32. Returns the elements that the first quantization of the gradient
** path clips in these copies of x32 (as put_grad hands it on: divided by N
** where the scheme averages); 0 when that path does not quantize.
** tmp: n floats of scratch. */
uint64_t sq_step_add_grad(const sq_world *w, double *exact, const float *x32,
                          const double *x64, uint32_t copies, float *tmp);

/* exact[0 .. n) /= N where the scheme averages the gradients. */
void sq_step_exact_mean(const sq_world *w, double *exact);

/* Every worker's partition of the reduced gradient, in worker order, with
** its error against exact[r S .. r S + len_r) added to e. The partitions
** land in whole[r S ..] (padded elements) when whole is given, else pass
** through shard (S elements). exact and e may be NULL: the partitions
** only. */
int sq_step_grad_error(sq_world *w, const double *exact, float *whole, float *shard,
                       sq_erracc *e);

/* The elements that the first quantization of the weight path clips in
** master[0 .. len), the weights about to be gathered (their difference to
** what, the w-hat of the previous step, in qWD's difference mode); 0 when
** the weights travel unquantized or there is one worker. tmp: len floats. */
uint64_t sq_step_weight_clipped(const sq_world *w, const float *master, const float *what,
                                uint64_t len, float *tmp);

/* Worker 0's w-hat into what (n floats) and every other worker's compared
** with it (through tmp, n floats): *differs is the first worker whose bytes
** differ, 0 when every replica agrees. */
int sq_step_replicas(sq_world *w, float *what, float *tmp, int *differs);

/* The same check over any holder of `workers` replicas of n floats: get
** writes replica r into out and returns an sq_status, which a failure
** passes on. */
typedef int (*sq_step_replica_fn)(void *ctx, int r, float *out);
int sq_step_replicas_of(int workers, uint64_t n, sq_step_replica_fn get, void *ctx, float *what,
                        float *tmp, int *differs);

/* count / of; NaN when of is 0 (no element was measured). */
double sq_step_frac(uint64_t count, uint64_t of);

#ifdef __cplusplus
}
#endif
#endif /* SQ_METRICS_STEP_H */
