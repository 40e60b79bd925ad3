/*
** shardq/train.h -- training a byte-level GPT under a scheme: the model, the corpus, AdamW, the loop.
**
** Part of the public API of libshardq (docs/library.md); every
** declaration below is exported, everything else in the library is hidden.
*/
#ifndef SHARDQ_TRAIN_H
#define SHARDQ_TRAIN_H

#include "shardq/codec.h"
#include "shardq/store.h"
#include "shardq/world.h"

#include <stddef.h>
#include <stdint.h>

SQ_BEGIN_DECLS

/*
** adamw -- the optimizer of a worker's shard: AdamW and the learning-rate
** schedule (docs/training.md).
**
** As in Megatron's distributed optimizer, every worker updates only its own
** shard of the fp32 master weights with its own shard of the Adam moments,
** from its partition of the reduced gradient.
*/
typedef struct sq_adamw {
    float beta1, beta2, eps;
    float weight_decay; /* decoupled: w -= lr * wd * w, on params with decay */
} sq_adamw;

/* One AdamW step t (1-based, for the bias corrections) on n elements:
** g is scaled by gscale first (gradient clipping), then
**   m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2,
**   w -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + lr wd w  (decay only).
** Element by element in fp32, so the bytes do not depend on the split. */
void sq_adamw_step(const sq_adamw *a, float lr, uint32_t t, int decay, float gscale,
                   const float *g, float *w, float *m, float *v, size_t n);

typedef struct sq_lr_schedule {
    float lr;        /* peak */
    float min_lr;    /* the floor of the cosine */
    uint32_t warmup; /* steps of linear warm-up */
    uint32_t total;  /* steps of the run: the cosine reaches min_lr at the last */
} sq_lr_schedule;

/* The learning rate of step (0-based): lr (step + 1) / warmup during the
** warm-up, then a cosine from lr down to min_lr at step total - 1. */
float sq_lr_at(const sq_lr_schedule *s, uint32_t step);

/*
** corpus -- the text a model trains on, as bytes, split once into a
** training and a validation part (docs/training.md).
**
** A corpus is a text file or a directory of them. A directory is walked in
** name order (subdirectories too); symbolic links inside it and files that
** hold a NUL byte (binary, such as the .dat indexes of fortune files) are
** left out, so the bytes -- and so every batch -- depend only on the files'
** contents, never on the order the file system lists them.
**
** The split is fixed by the bytes alone, whatever the seed: the corpus is cut
** into blocks of SQ_CORPUS_BLOCK bytes and every tenth block (index % 10 ==
** 9) is validation. Blocks, not a tail, so that the validation text comes
** from every file of a directory.
**
** Batches: sequence j of training step t starts at a position drawn by
** Philox from (seed, t, j) alone, so a worker that takes sequences
** [r B, (r + 1) B) of a step sees the same bytes as one worker that takes all
** N B of them, and every scheme of a seed sees the same data in the same
** order.
*/
#define SQ_CORPUS_BLOCK 4096
/* The default corpus: the text of Debian's `fortunes` package. */
#define SQ_CORPUS_DEFAULT "/usr/share/games/fortunes"
#define SQ_CORPUS_DATA_SITE 0xf1 /* Philox site of batch positions */

typedef struct sq_corpus {
    char *path;
    uint8_t *train, *val;
    size_t ntrain, nval;
    size_t files;   /* text files read */
    size_t skipped; /* binary files and links left out */
} sq_corpus;

/* Reads path: SQ_OK, or SQ_ERR_NOTFOUND (no such file), SQ_ERR_IO (a
** refused open or read), SQ_ERR_FORMAT (not a file or directory, or too
** little text) or SQ_ERR_NOMEM, with a sentence naming the path. */
int sq_corpus_load(const char *path, sq_corpus *c, sq_error *err);
void sq_corpus_free(sq_corpus *c);

/* The bytes of sequences first .. first + count - 1 of training step
** `step`: inputs[k T + t] and targets[k T + t] = the next byte. */
void sq_corpus_train_batch(const sq_corpus *c, uint64_t seed, uint32_t step, uint64_t first,
                           int count, int T, uint8_t *inputs, uint8_t *targets);

/* Validation sequence k of `total` (k < total): windows of T + 1 bytes spread
** evenly over the validation text, the same for every run. */
void sq_corpus_val_seq(const sq_corpus *c, int k, int total, int T, uint8_t *inputs,
                       uint8_t *targets);

/*
** gpt -- a byte-level GPT-2-style language model, forward and backward
** written out in C (docs/training.md).
**
**   tokens (bytes) -> token embedding wte + position embedding wpe
**   L blocks, each:  x += proj(attention(ln1(x)))   causal, `heads` heads
**                    x += fc2(gelu(fc1(ln2(x))))    4C hidden
**   ln_f, then logits = x . wte^T (the output head is tied to wte)
**   loss = mean cross-entropy of the next byte over the B x T positions
**
** The params are separate arrays, one per tensor, in the order of
** sq_gpt_params(): the unit that the sharded world shards and that a trace
** stores. Every matrix product is a single-threaded CBLAS sgemm on a block
** of rows fixed by the shapes, blocks side by side under OpenMP; the other
** layers are parallel loops whose every sum runs in a fixed order. So a
** run's bytes depend on its inputs alone, not on the thread counts (OpenBLAS
** picks its kernels by CPU, so another CPU type may round differently).
**
** Errors: functions returning int give SQ_OK, or SQ_ERR_SPEC for a shape
** out of range and SQ_ERR_NOMEM when memory runs out, with a sentence in
** err (which may be NULL).
*/
#define SQ_GPT_VOCAB 256    /* bytes */
#define SQ_GPT_NAMELEN 32

typedef struct sq_gpt_config {
    int layers;   /* L >= 1 */
    int channels; /* C >= 1, a multiple of heads */
    int heads;    /* NH >= 1 */
    int context;  /* T max: rows of wpe */
} sq_gpt_config;

/* The shape checks (C % heads, sizes that overflow, ...). */
int sq_gpt_validate(const sq_gpt_config *c, sq_error *err);

/* One param tensor: "wte", "wpe", "h.0.ln1.w", ... "lnf.b". */
typedef struct sq_gpt_param {
    char name[SQ_GPT_NAMELEN];
    int ndim;          /* 1 or 2 */
    uint64_t shape[2]; /* row-major */
    uint64_t n;
    int decay;         /* 1: weight decay applies (matrices and embeddings) */
} sq_gpt_param;

/* Params per model: 4 + 12 L. */
size_t sq_gpt_nparams(const sq_gpt_config *c);
/* Fills p[0 .. sq_gpt_nparams) in model order. */
void sq_gpt_params(const sq_gpt_config *c, sq_gpt_param *p);
/* Total elements of all params. */
uint64_t sq_gpt_elements(const sq_gpt_config *c);

/* GPT-2 initialisation, a function of seed alone: matrices and embeddings
** N(0, 0.02) (the two projections into the residual stream scaled by
** 1/sqrt(2 L)), biases 0, LayerNorm gains 1. Every value is rounded to bf16,
** so that the bf16 weights every worker starts from equal the fp32 masters
** (Megatron clones the masters from the bf16 model). The normals come from
** Philox keyed by the seed (site SQ_GPT_INIT_SITE), so the bytes do not
** depend on the machine. params[p] holds p's n floats. */
#define SQ_GPT_INIT_SITE 0xf0
void sq_gpt_init(const sq_gpt_config *c, uint64_t seed, float *const *params);

/* Activations and scratch for batches of at most B sequences of at most T
** <= context tokens. */
typedef struct sq_gpt_workspace sq_gpt_workspace;
int sq_gpt_workspace_new(const sq_gpt_config *c, int B, int T, sq_gpt_workspace **out,
                         sq_error *err);
void sq_gpt_workspace_free(sq_gpt_workspace *ws);
/* Bytes the workspace holds. */
uint64_t sq_gpt_workspace_bytes(const sq_gpt_workspace *ws);

/* Forward over B x T tokens (b * T + t): the mean next-byte loss against
** targets (cross-entropy in nats, accumulated in double). The activations
** stay in ws for sq_gpt_backward. */
double sq_gpt_forward(sq_gpt_workspace *ws, const float *const *params, const uint8_t *inputs,
                      const uint8_t *targets, int B, int T);
/* Backward of the last forward: the gradient of its mean loss with respect
** to every param, written (not accumulated) into grads[p]. */
void sq_gpt_backward(sq_gpt_workspace *ws, const float *const *params, float *const *grads);

/* Floating-point operations of one forward + backward over B x T tokens,
** counted from the model's products (2 per multiply-add; the matrix
** products, attention scores and values, and the output head), i.e. the
** work that GFLOP/s figures are quoted in. */
double sq_gpt_flops(const sq_gpt_config *c, int B, int T);

/*
** trainer -- training the GPT under emulated sharded data parallelism
** (docs/training.md).
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
** every worker's micro-batch gradient (grads-wWW.safetensors) and, at the
** steps of its weight cadence (capture_weights_every), the masters at the
** start of the step (weights.safetensors).
*/
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
    /* NULL: every worker in this process; else one rank per process
    ** (world.h): this process computes its own worker's micro-batch and the
    ** others' gradients reach it only inside the collectives and the error
    ** statistics; the other results are the in-process run's. */
    const struct sq_transport *transport;
    /* the capture's weight cadence: weights at the captured steps t with
    ** t % capture_weights_every == 0, a multiple of capture_every (a trace
    ** holds weights at some steps only: tracedir.h); 0: at every captured
    ** step. Last in the struct: the layout before it is unchanged. */
    uint32_t capture_weights_every;
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
    SQ_TRAIN_FIELD_CORPUS,        /* the corpus, too small for seq */
    SQ_TRAIN_FIELD_CAPTURE_WEIGHTS_EVERY /* capture_weights_every */
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
    uint64_t padded;       /* the same, padded: the elements every world holds */
    int layout;            /* sq_layout_kind it ran in (the scheme's layout knob) */
    size_t units;          /* worlds: buckets, or params */
    double first_loss, final_loss, final_val;
    double seconds;        /* wall time of the loop */
    double time[SQ_TT_N];
    double flops;          /* of every forward + backward this process ran (sq_gpt_flops):
                           ** every worker's, or on real ranks its own worker's */
    uint32_t captured;     /* steps written to the trace */
    sq_bytes_row bytes[SQ_NCOLL * SQ_NLINK];
    uint64_t peak_rss;
    /* the collectives' wall time over every unit (sq_world_times: the
    ** slowest rank's, measured on real ranks, the emulation's in process) */
    sq_coll_time coll[SQ_NCOLL];
    /* error feedback (grad.ef): the bytes one worker keeps for its residuals
    ** over every unit, and the last step's ef_residual (NaN without it) */
    uint64_t residual_bytes;
    double ef_residual;
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

SQ_END_DECLS
#endif /* SHARDQ_TRAIN_H */
