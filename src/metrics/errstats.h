/*
** errstats.h -- how far a result is from the exact one, in fp64.
**
** An accumulator takes the result in pieces (shard by shard, in a fixed
** order) against the exact fp64 values, and finishes into the statistics
** every report of shardq uses: relative L2 error (the square root of the
** NMSE), MSE, max abs error, SNR in dB, cosine similarity, mean signed
** error (the bias), and the fraction of elements zeroed (exact != 0 but
** result == 0). Sums are plain fp64 in input order, so the figures do not
** depend on threads or backends.
*/
#ifndef SQ_ERRSTATS_H
#define SQ_ERRSTATS_H

#include "shardq.h"

#include <stdint.h>

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
** that the nearest code is not the nearest level. Host memory. */
uint64_t sq_count_clipped(const sq_codec *c, const float *x, uint64_t n);

#endif
