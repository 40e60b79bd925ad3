/*
** shardq/replay.h -- a scheme over a captured trace.
**
** Part of the public API of libshardq (docs/library.md); every
** declaration below is exported, everything else in the library is hidden.
*/
#ifndef SHARDQ_REPLAY_H
#define SHARDQ_REPLAY_H

#include "shardq/store.h"
#include "shardq/trace.h"
#include "shardq/world.h"

#include <stddef.h>
#include <stdint.h>

SQ_BEGIN_DECLS

/*
** replay -- what a scheme would have done to a captured trace.
**
** The params of the trace are laid out as the scheme's `layout` knob says
** (shardq/layout.h): flat buckets as Megatron's distributed optimizer
** builds them (the default), or one world per param (ZeRO-3, FSDP). Each
** unit -- a bucket, or a param -- is one emulated world of K x G workers that
** replays every step of the trace in order (docs/replay.md):
**
**   gradient path  worker r gets the gradient of trace worker r mod W (W the
**                  trace's gradient files per step); the reduce-scatter runs;
**                  each worker's partition is compared with the fp64 mean of
**                  the original values.
**   weight path    the first step with weights initialises every replica
**                  from the trace's weights (the full-precision broadcast of
**                  training); every later step with weights puts them in the
**                  master shards and runs the all-gather, so qwd carries w-hat
**                  from weight step to weight step exactly as training with
**                  an all-gather at that cadence would (a trace may hold
**                  weights at some steps only: the steps between have the
**                  gradient path alone); the reconstructed weights are
**                  compared with the trace's, and every replica must hold the
**                  same bytes.
**
** With error feedback (grad.ef) each unit's world keeps its workers'
** residuals from step to step, as training would; a step's row carries the
** residual's norm relative to the gradient's (ef_residual), a tensor's row
** its unit's.
**
** Unit u draws its random numbers from Philox seed seed ^ (key << 40) (key:
** the bucket's index, or the param's index in trace order), so units do not
** share a stream and a one-param trace uses the seed itself. Zero-sized
** params are skipped. Statistics are kept per param (its slice of the
** unit), per step and per run; a param's fraction clipped is its unit's,
** as groups straddle params in a bucket.
**
** A trace of W > 1 gradient files per step on N != W workers is refused
** (SQ_ERR_CONFLICT) unless reuse_workers is set: worker r gets file r mod W,
** so N > W reuses files and N < W leaves files unread; the result says how
** many. A trace with one gradient per step gives it to every worker.
**
** Memory holds one unit at a time: its world, its exact fp64 sums and a few
** fp32 buffers, so peak memory follows the largest bucket (or param) times
** the workers, whatever the number of steps and params.
*/
enum { SQ_REPLAY_GRAD = 1, SQ_REPLAY_WEIGHT = 2 };

typedef struct sq_replay_config {
    sq_topo topo;
    sq_scheme scheme;
    uint64_t seed;
    const char *device;  /* world placement: NULL or "cpu", "cuda", "cuda:0,1" */
    int paths;           /* SQ_REPLAY_GRAD | SQ_REPLAY_WEIGHT (weights only if the trace has them) */
    size_t max_steps;    /* 0: every step of the trace */
    int tensor_rows;     /* 1: a stats row per (step, path, tensor) too */
    int reuse_workers;   /* 1: accept a topology whose worker count differs from the
                         ** trace's gradient files (reusing or dropping files) */
    /* NULL: every worker in this process; else one rank per process
    ** (world.h): every process reads the trace (the exact reference needs
    ** every gradient) and computes the same statistics */
    const struct sq_transport *transport;
} sq_replay_config;

/* Where the results go while the replay runs; every callback may be NULL. */
typedef struct sq_replay_sink {
    void *ctx;
    /* rows of statistics: per tensor as each param finishes, per step at the
    ** end. A non-zero return stops the replay: a negative sq_status kind
    ** with the sink's sentence in err is the replay's error; any other
    ** value stops it as SQ_ERR_INTERRUPTED. */
    int (*rows)(void *ctx, const sq_stat_row *rows, size_t n, sq_error *err);
    /* done of total (param, step) units */
    void (*progress)(void *ctx, size_t done, size_t total);
    /* what the collectives produced, for checks against a training run:
    ** path SQ_REPLAY_GRAD, the reduced gradient of param p at trace step
    ** `step` (the partitions in worker order, n elements); SQ_REPLAY_WEIGHT,
    ** the reconstructed weights w-hat after that step's all-gather (the
    ** first step's: its own weights). A non-zero return stops the replay
    ** (SQ_ERR_INTERRUPTED). */
    int (*tensor)(void *ctx, uint32_t step, size_t p, int path, const float *x, uint64_t n);
} sq_replay_sink;

/* read, grad_reducescatter, weight_allgather, stats. read: the trace's
** reads; where the gradients are staged tile by tile (in process, on CPU
** workers) their reads are timed with the staging pass that holds them
** (the division into the world, the fp64 sum and the clipping count). */
#define SQ_REPLAY_NTIMINGS 4

typedef struct sq_replay_result {
    size_t steps;          /* steps replayed */
    size_t params;         /* params replayed (zero-sized ones left out) */
    uint64_t elements;     /* elements per step (the model's, before padding) */
    uint64_t padded;       /* the same, padded: the elements every world holds */
    int layout;            /* sq_layout_kind it ran in */
    size_t units;          /* worlds: buckets, or params */
    int reused_workers;    /* workers that got a file another worker has too */
    int dropped_workers;   /* gradient files per step left unread */
    uint64_t trace_bytes;  /* bytes of trace data read */
    double seconds;        /* wall time of the whole replay */
    uint64_t peak_rss;     /* bytes, of the process at the end */
    int has_grad, has_weight;
    sq_errstats grad, weight; /* over every step and param together */
    double grad_clipped, weight_clipped; /* fractions clipped at the first quantization */
    int consecutive;       /* the trace's steps are consecutive integers */
    sq_bytes_row bytes[SQ_NCOLL * SQ_NLINK];
    sq_timing_row timings[SQ_REPLAY_NTIMINGS];
    sq_coll_time coll[SQ_NCOLL]; /* the collectives' wall time over every unit (sq_world_times) */
    size_t weight_steps;   /* steps of the weight path (the first initialises); 0 without it */
    /* error feedback (grad.ef; docs/schemes.md): the bytes one worker
    ** keeps for its residuals, summed over the units (what training this
    ** model would add to each worker's memory), and the residual's norm
    ** relative to the gradient's (the step rows' ef_residual) after the last
    ** step and its mean over the steps; 0 and NaN without it */
    uint64_t residual_bytes;
    double ef_residual, ef_residual_mean;
} sq_replay_result;

/* The topology a replay of t uses when none is given: the one the trace
** records, else 1 x W for W > 1 gradient files, else 2 x 4. */
sq_topo sq_replay_default_topo(const sq_trace *t);

/* Replays t: SQ_OK, or the kind of the failure that stopped it, with its
** sentence (naming the file, tensor and element, or the world's error) in
** err. The kind is the one the trace, the world or the sink gave:
** SQ_ERR_NONFINITE for a NaN or Inf in the trace, SQ_ERR_FORMAT or
** SQ_ERR_IO for a file that cannot be read as it should, SQ_ERR_NOMEM,
** SQ_ERR_DEVICE for a failed CUDA call, SQ_ERR_CONFLICT when the replicas
** of the weights differ (a bug), SQ_ERR_INTERRUPTED when a sink stopped it;
** SQ_ERR_NOTFOUND or SQ_ERR_ARG when there is nothing to replay. */
int sq_replay_run(const sq_replay_config *cfg, const sq_trace *t, const sq_replay_sink *sink,
                  sq_replay_result *out, sq_error *err);

SQ_END_DECLS
#endif /* SHARDQ_REPLAY_H */
