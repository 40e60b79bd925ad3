/*
** tracedir.h -- traces: what a training job captured, step by step.
**
** A trace is a directory (README, "Traces"):
**
**   manifest.json                     format, version, workers, steps, params
**   step-000010/weights.safetensors   the full model weights of step 10
**   step-000010/grads-w00.safetensors worker 0's micro-batch gradient
**   step-000010/grads-w01.safetensors ...
**
** Every safetensors file of a step holds exactly the params of the manifest,
** by name and shape, in F32, F16, BF16 or F64. A single .safetensors file
** (its floating-point tensors) or .npy file is also a trace: one step, one
** worker's gradient, no weights.
**
** sq_trace_open reads the manifest and the header of every file, so a
** missing step, a missing file or a tensor of the wrong shape is reported
** before any work starts. Data is then read tensor by tensor from mapped
** files (sq_trace_load), so memory stays bounded by the largest tensor, not
** by the trace.
**
** Errors: SQ_OK or a negative kind (shardq.h), with a sentence naming the
** file and the field in err (when it is not NULL). The reader's kinds:
** SQ_ERR_NOTFOUND for a trace, manifest, step file or tensor that is not
** there (a step index past the end too), SQ_ERR_FORMAT for a manifest or
** file that is malformed or disagrees with the manifest, SQ_ERR_CONFLICT
** for a file of another trace (its trace_id), SQ_ERR_NONFINITE (or
** SQ_ERR_RANGE) for values sq_trace_load refuses, SQ_ERR_IO, SQ_ERR_NOMEM.
** The writer's: SQ_ERR_BUSY while another live process writes into the
** directory, SQ_ERR_CONFLICT for a directory that holds something else (a
** trace of another owner, files no trace has), SQ_ERR_ARG for calls out of
** order or params it refuses, SQ_ERR_IO, SQ_ERR_NOMEM.
*/
#ifndef SQ_TRACE_TRACEDIR_H
#define SQ_TRACE_TRACEDIR_H

#include "trace/safetensors.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SQ_TRACE_FORMAT "shardq-trace"
#define SQ_TRACE_VERSION 1
/* Gradient files per step, at most. */
#define SQ_TRACE_MAX_WORKERS 4096
/* Bytes of a trace id with its NUL: 32 hexadecimal digits. */
#define SQ_TRACE_ID_MAX 33

typedef enum sq_trace_kind {
    SQ_TRACE_DIR = 0,         /* a directory with manifest.json */
    SQ_TRACE_SAFETENSORS = 1, /* one .safetensors file: one step, one gradient */
    SQ_TRACE_NPY = 2          /* one .npy file: one step, one gradient */
} sq_trace_kind;

typedef struct sq_trace_param {
    char *name;
    int ndim;
    uint64_t shape[SQ_ST_MAXDIM];
    uint64_t n; /* product of shape */
} sq_trace_param;

typedef struct sq_trace {
    char *path;
    sq_trace_kind kind;
    int workers;           /* gradient files per step */
    int has_weights;       /* 1 when every step has weights.safetensors */
    char topo[32];         /* "KxG" it was captured on, "" when not recorded */
    char *model;           /* the manifest's "model" as JSON text, or NULL */
    char id[SQ_TRACE_ID_MAX]; /* the manifest's "id", "" when it has none */
    size_t nsteps;
    uint32_t *steps;       /* training step numbers, strictly increasing */
    size_t nparams;
    sq_trace_param *params; /* in manifest (or file) order */
    uint64_t elements;     /* sum of the params' n */
    uint64_t bytes;        /* data bytes of every file of every step */
    unsigned dtypes;       /* bit (1 << sq_st_dtype) for each dtype seen */
    size_t nignored;       /* single safetensors file: tensors that are not floats */
    const sq_trace_param **byname; /* private: params sorted by name */
} sq_trace;

int sq_trace_open(const char *path, sq_trace *t, sq_error *err);
void sq_trace_close(sq_trace *t);
/* The index of the param called name, or SQ_TRACE_NO_PARAM (-1) (a binary
** search). */
#define SQ_TRACE_NO_PARAM (-1)
int sq_trace_param_index(const sq_trace *t, const char *name);
/* The largest param's n. */
uint64_t sq_trace_max_param(const sq_trace *t);

/* The files of one step, mapped (the step's index in t->steps). */
typedef struct sq_trace_step {
    const sq_trace *trace;
    size_t index;
    uint32_t step;
    int has_weights;          /* weights.safetensors was opened */
    int ngrads;               /* gradient files opened: workers 0 .. ngrads-1 */
    sq_st_file weights;       /* zeroed when not opened */
    sq_st_file *grads;        /* t->workers slots, the first ngrads opened */
    /* params[i]'s entry in each file (found once, by name) */
    const sq_st_entry **wentry;  /* nparams, NULL when no weights */
    const sq_st_entry **gentry;  /* workers x nparams */
    struct sq_npy *npy;       /* the single .npy file's data, or NULL */
} sq_trace_step;

/* Opens the weights (when weights is 1 and the trace has them) and the
** gradient files of workers 0 .. min(ngrads, workers) - 1: only what a
** caller will load. */
int sq_trace_step_open(const sq_trace *t, size_t index, int weights, int ngrads, sq_trace_step *s,
                       sq_error *err);
void sq_trace_step_close(sq_trace_step *s);

/* Param p of the weights (worker < 0) or of worker w's gradient, as fp32
** into out32 and, when out64 is not NULL, exactly as fp64 into out64. The
** values must be finite (the error names file, tensor and element). The
** tensor's pages are dropped from memory afterwards. The file must have been
** opened by sq_trace_step_open. */
int sq_trace_load(sq_trace_step *s, int worker, size_t p, float *out32, double *out64,
                  sq_error *err);
/* The file that holds it, for messages. */
const char *sq_trace_file_name(const sq_trace_step *s, int worker);

/* ------------------------------------------------------------------------ */
/* Writing a trace                                                          */
/* ------------------------------------------------------------------------ */

typedef struct sq_trace_writer sq_trace_writer;

/* Creates the directory dir (it must not exist, or be empty; missing parents
** are created) for a trace of
** `workers` gradient files per step with the params p[0..np) stored as
** dtype (F32, F16, BF16 or F64). topo ("KxG" or NULL) and model (JSON text
** or NULL) go into the manifest.
**
** The writer holds a lock on dir/.shardq-writer until close or abort: a
** second writer into dir is refused, with the first one's pid. That file
** stays behind a writer that did not finish (a kill, a full disk) and names
** its owner.
**
** sq_trace_writer_open_as gives the writer an owner (the key of a training
** run, the options of a synthetic trace: what determines the trace's bytes).
** The manifest records it, the trace's id is derived from it, and dir may
** then also hold a trace of the same owner, finished or cut short: it is
** removed and written again, which is how a rerun resumes a capture that was
** killed. Without an owner, the id is random. */
int sq_trace_writer_open(sq_trace_writer **w, const char *dir, int workers, const sq_trace_param *p,
                         size_t np, sq_st_dtype dtype, const char *topo, const char *model,
                         sq_error *err);
int sq_trace_writer_open_as(sq_trace_writer **w, const char *dir, const char *owner, int workers,
                            const sq_trace_param *p, size_t np, sq_st_dtype dtype, const char *topo,
                            const char *model, sq_error *err);
/* The id of the traces of owner (32 hexadecimal digits), which the manifest
** ("id") and the metadata of every file ("trace_id") carry. */
void sq_trace_id_of(const char *owner, char id[SQ_TRACE_ID_MAX]);
/* 64-bit FNV-1a of n bytes, continuing from h (SQ_FNV1A64_BASIS to start):
** the identity of a trace's owner, and of a demo's corpus and capture key. */
#define SQ_FNV1A64_BASIS 0xcbf29ce484222325ULL
uint64_t sq_fnv1a64(const void *p, size_t n, uint64_t h);
/* Starts the file of step `step` (steps strictly increase across calls to
** begin with worker -1 or 0 ...): worker -1 is weights.safetensors, else
** grads-wWW.safetensors. Then put every param in order, then end. */
int sq_trace_file_begin(sq_trace_writer *w, uint32_t step, int worker, sq_error *err);
int sq_trace_file_put(sq_trace_writer *w, const float *x, sq_error *err);
int sq_trace_file_end(sq_trace_writer *w, sq_error *err);
/* Writes manifest.json (last, so that a trace cut short by a crash has
** none and is refused) listing the steps of which every file was written,
** and frees w. abort frees w and leaves what was written, without manifest. */
int sq_trace_writer_close(sq_trace_writer *w, sq_error *err);
void sq_trace_writer_abort(sq_trace_writer *w);

#ifdef __cplusplus
}
#endif
#endif /* SQ_TRACE_TRACEDIR_H */
