/*
** shardq/metrics.h -- error statistics in fp64 and the measured step.
**
** Part of the public API of libshardq (docs/library.md); every
** declaration below is exported, everything else in the library is hidden.
*/
#ifndef SHARDQ_METRICS_H
#define SHARDQ_METRICS_H

#include "shardq/codec.h"
#include "shardq/world.h"

#include <stdint.h>
#include <stdio.h>

SQ_BEGIN_DECLS

/*
** errstats -- how far a result is from the exact one, in fp64.
**
** An accumulator takes the result in pieces (shard by shard, in a fixed
** order) against the exact fp64 values, and finishes into the statistics
** every report of shardq uses: relative L2 error (the square root of the
** NMSE), MSE, max abs error, SNR in dB, cosine similarity, mean signed
** error (the bias), and the fraction of elements zeroed (exact != 0 but
** result == 0). Sums are plain fp64 in input order, so the figures do not
** depend on threads or backends.
*/
typedef struct sq_erracc {
    uint64_t n, zeroed;
    double sum_e2, sum_x2, sum_y2, sum_xy, sum_e, max_abs;
} sq_erracc;

typedef struct sq_errstats {
    uint64_t n;
    double rel_l2, mse, max_abs, snr_db, cosine, mean_signed, frac_zeroed;
} sq_errstats;

void sq_erracc_init(sq_erracc *a);
/* got[i] against exact[i], i < n */
void sq_erracc_add(sq_erracc *a, const float *got, const double *exact, uint64_t n);
/* Adds what from holds into into, as if its pieces had been added there. */
void sq_erracc_merge(sq_erracc *into, const sq_erracc *from);
/* Finishes; an exact result of all zeros gives rel_l2 = 0 or +Inf (if the
** result is not zero too) and snr_db = +Inf when there is no error. */
sq_errstats sq_erracc_finish(const sq_erracc *a);

/* Elements of x[0..n) that a codec clips: those whose scaled value x * m
** (after the codec's Hadamard, per group) falls outside the code range, so
** that the nearest code is not the nearest level. Host memory. Always 0
** for kind=qsgd, sign, fp8e4m3 and fp8e5m2, whose range holds every x. */
uint64_t sq_count_clipped(const sq_codec *c, const float *x, uint64_t n);

/*
** step -- the measured step: what the collectives of one training step
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

/* Synthetic training on a world that moves data (src/metrics/synthetic.c):
** weights from `seed`, then per step every worker's synthetic gradient of
** kind `data` (sq_synth_kind) reduced, SGD at rate lr on the master shards,
** the weights gathered, and the error of both collectives against fp64. */
typedef struct sq_step_synthetic sq_step_synthetic;

typedef struct sq_step_report {
    uint32_t step;
    int identical;        /* every worker's w-hat is the same */
    sq_errstats grad, weight;
    double grad_clipped, weight_clipped; /* fractions clipped at the first quantization */
    int has_residual;     /* the world keeps error feedback's residuals */
    double ef_residual;   /* their norm relative to the gradient's, after the reduce */
} sq_step_report;

/* SQ_OK with *out; SQ_ERR_NOMEM, or the world's failure. */
int sq_step_synthetic_open(sq_world *w, uint64_t seed, int data, double lr,
                           sq_step_synthetic **out, sq_error *err);
/* One step (step >= 1): SQ_OK with *rep, or the world's failure (its
** sq_world_error in err). */
int sq_step_synthetic_run(sq_step_synthetic *s, uint32_t step, sq_step_report *rep,
                          sq_error *err);
void sq_step_synthetic_close(sq_step_synthetic *s);

/* The error of a round trip y of x (n elements): relative L2 error, MSE,
** SNR in dB, cosine similarity, the mean signed and the largest absolute
** error (src/metrics/roundtrip.c); the same figures on any thread count.
** progress (may be NULL) hears the blocks done of the total as they are. */
typedef struct sq_roundtrip {
    double rel_l2, mse, snr_db, cosine, mean_error, max_abs;
} sq_roundtrip;
typedef void (*sq_roundtrip_progress)(void *ctx, uint64_t done, uint64_t total);
void sq_roundtrip_stats(const float *x, const float *y, uint64_t n, sq_roundtrip_progress progress,
                        void *ctx, sq_roundtrip *out);
/* A round trip's statistics with the input (its path, dtype and shape
** text), the codec, its key and n, as `shardq codec stats` prints them:
** aligned text, or one JSON object (json nonzero), on f (roundtrip_print.c). */
void sq_roundtrip_print(FILE *f, const char *input, const char *dtype, const char *shape,
                        const sq_codec *c, const sq_rng_key *key, uint64_t n,
                        const sq_roundtrip *rt, int json);

SQ_END_DECLS
#endif /* SHARDQ_METRICS_H */
