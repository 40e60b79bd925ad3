/*
** trainer.h -- training the GPT under emulated sharded data parallelism
** (README, "Training").
**
** One step t, as Megatron's distributed optimizer runs it and SDP4Bit
** quantizes it, on K x G emulated workers:
**
**   1. every worker r reads its reconstructed weights w-hat (the model it
**      holds) and computes the gradient of its own micro-batch (sequences
**      [r B, (r + 1) B) of the step's global batch);
**   2. the scheme's gradient reduce-scatter (Philox step t): worker r gets
**      partition r of the mean gradient;
**   3. the global gradient norm over all partitions is clipped to `clip`,
**      and each worker updates its fp32 master shard and its Adam moments;
**   4. the scheme's weight all-gather (Philox step t + 1): every worker's
**      w-hat becomes the model of step t + 1 (qwd: the quantized difference
**      to the previous w-hat travels).
**
** Each param tensor is sharded on its own (one world per param, as ZeRO-3
** and FSDP shard), param p drawing its random numbers from Philox seed
** seed ^ (p << 40): exactly the worlds of `shardq replay`, so that a
** captured trace replays to the same bytes (replay.h).
**
** Step 0 starts from the model's bf16 initialisation on every worker (the
** masters are its fp32 copy). A capture writes, for every captured step,
** the masters at the start of the step (weights.safetensors) and every
** worker's micro-batch gradient (grads-wWW.safetensors).
*/
#ifndef SQ_TRAIN_TRAINER_H
#define SQ_TRAIN_TRAINER_H

#include "store/store.h"
#include "train/adamw.h"
#include "train/corpus.h"
#include "train/gpt.h"
#include "world/world.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sq_train_config {
    sq_gpt_config model;
    int batch;             /* B: sequences per worker and step */
    int seq;               /* T: tokens per sequence, <= model.context */
    uint32_t steps;
    sq_lr_schedule lr;     /* lr.total is taken from steps */
    sq_adamw adamw;
    float clip;            /* max global gradient norm; 0: no clipping */
    uint32_t eval_every;   /* validation every E steps (and after the last); 0: last only */
    int eval_seqs;         /* validation sequences of T tokens */
    sq_topo topo;
    sq_scheme scheme;
    uint64_t seed;         /* init, data order and every stochastic rounding */
    const char *device;    /* world placement, NULL or "cpu", "cuda", ... */
    const char *capture;   /* trace directory to write, or NULL */
    uint32_t capture_every; /* capture steps t with t % capture_every == 0 */
    const char *capture_model; /* JSON for the manifest's "model", or NULL */
    const char *capture_owner; /* the trace's owner (sq_trace_writer_open_as), or NULL */
} sq_train_config;

/* The defaults of `shardq train`. */
void sq_train_defaults(sq_train_config *c);

/* The settings sq_train_validate checks, for a front end that names them
** its own way (a command-line flag). */
typedef enum sq_train_field {
    SQ_TRAIN_FIELD_NONE = 0,
    SQ_TRAIN_FIELD_MODEL,         /* model: layers, channels, heads, context */
    SQ_TRAIN_FIELD_BATCH,         /* batch */
    SQ_TRAIN_FIELD_SEQ,           /* seq */
    SQ_TRAIN_FIELD_STEPS,         /* steps */
    SQ_TRAIN_FIELD_LR,            /* lr.lr and lr.min_lr */
    SQ_TRAIN_FIELD_ADAMW,         /* adamw */
    SQ_TRAIN_FIELD_CLIP,          /* clip */
    SQ_TRAIN_FIELD_EVAL_SEQS,     /* eval_seqs */
    SQ_TRAIN_FIELD_CAPTURE_EVERY, /* capture_every */
    SQ_TRAIN_FIELD_CORPUS         /* the corpus, too small for seq */
} sq_train_field;

/* The setting's name in sq_train_validate's sentences ("sequence length"). */
const char *sq_train_field_name(sq_train_field f);

/* Shape and setting checks: SQ_OK, or SQ_ERR_SPEC with *bad (may be NULL)
** the field at fault and a sentence in err. The sentence begins with the
** field's name (sq_train_field_name) followed by a space, but for the
** model, whose sentence is sq_gpt_validate's. */
int sq_train_validate(const sq_train_config *c, const sq_corpus *corpus, sq_train_field *bad,
                      sq_error *err);

enum { SQ_TRAIN_REDUCED = 0, SQ_TRAIN_MODEL = 1 };

/* Where results go while training runs; every callback may be NULL. */
typedef struct sq_train_sink {
    void *ctx;
    /* after every step; a non-zero return stops training: a negative sq_status
    ** kind with the sink's sentence in err is the run's error, any other
    ** value stops it as SQ_ERR_INTERRUPTED */
    int (*step)(void *ctx, const sq_train_row *row, sq_error *err);
    void (*progress)(void *ctx, uint32_t done, uint32_t total, double loss);
    /* for tests: the reduced mean gradient of param p at step (its
    ** partitions in worker order: the param's n elements, before clipping),
    ** and the model w-hat the step's gradients were computed at */
    int (*tensor)(void *ctx, uint32_t step, size_t p, int what, const float *x, uint64_t n);
} sq_train_sink;

/* Where the time went. */
enum {
    SQ_TT_COMPUTE = 0,  /* forward + backward of every worker */
    SQ_TT_GRAD = 1,     /* put_grad, the reduce-scatter, the partitions out */
    SQ_TT_OPTIM = 2,    /* clipping and AdamW */
    SQ_TT_WEIGHT = 3,   /* put_master, the all-gather, w-hat out and compared */
    SQ_TT_EVAL = 4,     /* validation */
    SQ_TT_CAPTURE = 5,  /* writing the trace */
    SQ_TT_N = 6
};
extern const char *const sq_train_time_names[SQ_TT_N];

typedef struct sq_train_result {
    uint32_t steps;
    uint64_t tokens;
    uint64_t elements;     /* model params */
    double first_loss, final_loss, final_val;
    double seconds;        /* wall time of the loop */
    double time[SQ_TT_N];
    double flops;          /* of every forward + backward (sq_gpt_flops) */
    uint32_t captured;     /* steps written to the trace */
    sq_bytes_row bytes[SQ_NCOLL * SQ_NLINK];
    uint64_t peak_rss;
} sq_train_result;

/* Trains: SQ_OK, or the kind of the failure with its sentence in err (a
** world's error names the param): SQ_ERR_SPEC for a setting (see
** sq_train_validate), SQ_ERR_NONFINITE when the loss diverged, SQ_ERR_NOMEM,
** SQ_ERR_DEVICE for a failed CUDA call, SQ_ERR_IO or SQ_ERR_BUSY from
** writing the capture, SQ_ERR_INTERRUPTED when a sink stopped it, or the
** sink's own kind. */
int sq_train_run(const sq_train_config *c, const sq_corpus *corpus, const sq_train_sink *sink,
                 sq_train_result *out, sq_error *err);

/* The sgemm rate of this machine in GFLOP/s, on the shape of the model's
** largest product for a batch of rows (B T x 4C x C), timed for about
** `seconds`: the bound that a training run's GFLOP/s is to be read beside. */
double sq_train_sgemm_gflops(const sq_gpt_config *m, int rows, double seconds);

#ifdef __cplusplus
}
#endif
#endif /* SQ_TRAIN_TRAINER_H */
