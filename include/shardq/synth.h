/*
** shardq/synth.h -- synthetic weights, gradients and traces from Philox.
**
** Part of the public API of libshardq (docs/library.md); every
** declaration below is exported, everything else in the library is hidden.
*/
#ifndef SHARDQ_SYNTH_H
#define SHARDQ_SYNTH_H

#include "shardq/codec.h"
#include "shardq/trace.h"

#include <stddef.h>
#include <stdint.h>

SQ_BEGIN_DECLS

/*
** synth -- synthetic weights, gradients and traces from Philox, for
** `shardq world --run` and `shardq trace synth`: the same seed gives the
** same values on every machine.
*/
/* What the gradients look like. */
typedef enum sq_synth_kind {
    SQ_SYNTH_NORMAL = 0,
    SQ_SYNTH_HEAVY = 1,
    SQ_SYNTH_OUTLIERS = 2
} sq_synth_kind;

/* "normal", "heavy" or "outliers" as an sq_synth_kind; SQ_ERR_SPEC
** (negative) for anything else. */
int sq_synth_parse_kind(const char *name);
const char *sq_synth_kind_name(int kind);

/* Initial weights: n values 0.02 x N(0, 1). u is scratch of 2n floats. */
void sq_synth_weights(uint64_t seed, float *w, uint64_t n, float *u);

/* Worker r's gradient at a step: 1e-3 x (a component shared by all workers
** plus its own noise), so the mean is not zero; heavy tails (Student-t, 6
** degrees of freedom) or outliers (1 in 1000 elements x100) on top. tmp is
** scratch of n floats, u of 3n floats. stream separates the tensors of one
** step (0 for the first). */
void sq_synth_grad(uint64_t seed, uint32_t step, int r, int kind, uint64_t n, float *g, float *tmp,
                   float *u);
void sq_synth_grad_stream(uint64_t seed, uint32_t stream, uint32_t step, int r, int kind,
                          uint64_t n, float *g, float *tmp, float *u);

/* ------------------------------------------------------------------------ */
/* A synthetic trace                                                        */
/* ------------------------------------------------------------------------ */

/* What a synthetic trace holds: weights start as sq_synth_weights (seeded
** per tensor); at every step each worker's gradient of tensor p is
** sq_synth_grad_stream(seed, p, step, r, kind), and the next step's weights
** are w - lr x mean(gradients). */
typedef struct sq_synth_trace {
    const sq_trace_param *params; /* the tensors, in file order */
    size_t nparams;
    uint64_t steps;    /* steps to write, at least 1 */
    uint32_t first;    /* number of the first step */
    int workers;       /* gradient files per step */
    const char *topo;  /* "KxG" to record, or NULL */
    sq_st_dtype dtype; /* F32, BF16, F16 or F64 */
    int kind;          /* an sq_synth_kind */
    int weights;       /* 0: no weights; k >= 1: weights.safetensors at every
                          k-th step from the first (1: every step) */
    double lr;
    uint64_t seed;
} sq_synth_trace;

/* Called after every file written, with the count so far (of
** steps x workers + the steps with weights). */
typedef void (*sq_synth_progress)(void *ctx, size_t files);

/* Writes the trace s describes into dir, as the trace writer of owner
** (tracedir.h: the same owner takes up its own unfinished trace). Errors
** are the writer's (SQ_ERR_BUSY, SQ_ERR_CONFLICT, SQ_ERR_IO, ...) and
** SQ_ERR_NOMEM for the buffers. progress may be NULL. */
int sq_synth_trace_write(const char *dir, const sq_synth_trace *s, const char *owner,
                         sq_synth_progress progress, void *ctx, sq_error *err);

/* The owner text of st (params: its --params text) into buf: every option
** that decides the trace's bytes, as a command line, so that the same
** command run again takes up its unfinished trace (owner.c). */
void sq_synth_trace_owner(const sq_synth_trace *st, const char *params, char *buf, size_t len);

SQ_END_DECLS
#endif /* SHARDQ_SYNTH_H */
