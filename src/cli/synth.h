/*
** synth.h -- synthetic weights and gradients from Philox, for `shardq world
** --run` and `shardq trace synth`: the same seed gives the same values on
** every machine.
*/
#ifndef SQ_SYNTH_H
#define SQ_SYNTH_H

#include <stdint.h>

/* What the gradients look like. */
enum { SYNTH_NORMAL = 0, SYNTH_HEAVY = 1, SYNTH_OUTLIERS = 2 };

/* "normal", "heavy" or "outliers"; -1 for anything else. */
int synth_parse_kind(const char *name);
const char *synth_kind_name(int kind);

/* Initial weights: n values 0.02 x N(0, 1). u is scratch of 2n floats. */
void synth_weights(uint64_t seed, float *w, uint64_t n, float *u);

/* Worker r's gradient at a step: 1e-3 x (a component shared by all workers
** plus its own noise), so the mean is not zero; heavy tails (Student-t, 6
** degrees of freedom) or outliers (1 in 1000 elements x100) on top. tmp is
** scratch of n floats, u of 3n floats. stream separates the tensors of one
** step (0 for the first). */
void synth_grad(uint64_t seed, uint32_t step, int r, int kind, uint64_t n, float *g, float *tmp,
                float *u);
void synth_grad_stream(uint64_t seed, uint32_t stream, uint32_t step, int r, int kind,
                       uint64_t n, float *g, float *tmp, float *u);

#endif
