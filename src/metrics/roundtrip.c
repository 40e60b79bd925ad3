/*
** roundtrip.c -- the error of one round trip through a codec (metrics.h,
** sq_roundtrip_stats): relative L2 error, MSE, SNR, cosine similarity,
** the largest and the mean signed error of y against x, for `shardq codec
** stats`.
**
** Why blocks: the sums are taken over fixed blocks of 2^16 elements, in
** parallel, and added up in block order, so the figures do not depend on
** the thread count.
*/
#include "shardq/metrics.h"

#include <math.h>

#define STAT_BLOCK ((uint64_t)1 << 16)
#define STAT_BATCH 256 /* blocks between progress reports */

typedef struct block_sums {
    double sxx, see, sxy, syy, se, maxe;
} block_sums;

static void block_stats(const float *x, const float *y, uint64_t n, block_sums *b)
{
    double sxx = 0, see = 0, sxy = 0, syy = 0, se = 0, maxe = 0;
    for (uint64_t i = 0; i < n; i++) {
        double xi = x[i], yi = y[i], e = yi - xi;
        sxx += xi * xi;
        see += e * e;
        sxy += xi * yi;
        syy += yi * yi;
        se += e;
        if (fabs(e) > maxe) maxe = fabs(e);
    }
    *b = (block_sums){sxx, see, sxy, syy, se, maxe};
}

static void add(block_sums *tot, const block_sums *b)
{
    tot->sxx += b->sxx;
    tot->see += b->see;
    tot->sxy += b->sxy;
    tot->syy += b->syy;
    tot->se += b->se;
    if (b->maxe > tot->maxe) tot->maxe = b->maxe;
}

void sq_roundtrip_stats(const float *x, const float *y, uint64_t n, sq_roundtrip_progress progress,
                        void *ctx, sq_roundtrip *out)
{
    uint64_t nblocks = (n + STAT_BLOCK - 1) / STAT_BLOCK;
    block_sums tot = {0, 0, 0, 0, 0, 0};
    if (progress) progress(ctx, 0, nblocks);
    for (uint64_t b0 = 0; b0 < nblocks; b0 += STAT_BATCH) {
        uint64_t b1 = b0 + STAT_BATCH < nblocks ? b0 + STAT_BATCH : nblocks;
        block_sums part[STAT_BATCH];
#pragma omp parallel for num_threads(sq_get_threads()) schedule(static)
        for (int64_t b = (int64_t)b0; b < (int64_t)b1; b++) {
            uint64_t i0 = (uint64_t)b * STAT_BLOCK;
            uint64_t len = n - i0 < STAT_BLOCK ? n - i0 : STAT_BLOCK;
            block_stats(x + i0, y + i0, len, &part[b - (int64_t)b0]);
        }
        for (uint64_t b = 0; b < b1 - b0; b++) add(&tot, &part[b]);
        if (progress) progress(ctx, b1, nblocks);
    }
    /* The degenerate cases (docs/codecs.md): an exact round
    ** trip has infinite SNR; a zero signal has relative error 0 when exact,
    ** inf otherwise; cosine is 1 when both are zero, 0 when only one is. */
    out->rel_l2 = tot.sxx > 0 ? sqrt(tot.see) / sqrt(tot.sxx) : tot.see > 0 ? INFINITY : 0.0;
    out->mse = n ? tot.see / (double)n : 0.0;
    out->snr_db = tot.see > 0 ? (tot.sxx > 0 ? 10.0 * log10(tot.sxx / tot.see) : -INFINITY)
                              : INFINITY;
    out->cosine = tot.sxx > 0 && tot.syy > 0 ? tot.sxy / (sqrt(tot.sxx) * sqrt(tot.syy))
                  : tot.sxx == 0 && tot.syy == 0 ? 1.0
                                                 : 0.0;
    out->mean_error = n ? tot.se / (double)n : 0.0;
    out->max_abs = tot.maxe;
}
