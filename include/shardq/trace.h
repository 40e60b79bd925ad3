/*
** shardq/trace.h -- traces and their files: safetensors, .npy, trace directories, the codec container.
**
** Part of the public API of libshardq (docs/library.md); every
** declaration below is exported, everything else in the library is hidden.
*/
#ifndef SHARDQ_TRACE_H
#define SHARDQ_TRACE_H

#include "shardq/codec.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

SQ_BEGIN_DECLS

/*
** safetensors -- a writer and a validating reader of safetensors files.
**
** Layout: 8 bytes little-endian N, N bytes of JSON, then the data section.
** The JSON object maps each tensor name to
**   {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}
** with offsets relative to the start of the data section, and may hold one
** "__metadata__" object of string values. The writer puts tensors in the
** order given, back to back, and pads the JSON with spaces to a multiple of 8
** bytes. The reader checks everything: header length against the file size,
** the JSON, every dtype, shape and offset, that shape and dtype account for
** exactly end - begin bytes, and that the tensors cover the data section
** without overlap or gap.
**
** The reader maps a regular file (read-only, private) instead of copying it:
** tensor data points into the mapping, pages come in as they are touched,
** and sq_st_release drops a tensor's pages again, so a file larger than
** memory can be streamed tensor by tensor. Only standard input ("-") may be
** a pipe (input.h); it is read into memory, no further than the header's
** tensors reach.
** sq_st_parse validates an image that is already in memory (the fuzzers
** call it); the file reader runs the same code on its mapping.
**
** Errors: SQ_OK or a negative kind (shardq.h), with a sentence naming the
** file, the tensor and the field in err (when it is not NULL), e.g.
**   "x.safetensors: tensor 'codes': field 'data_offsets': end 100 beyond the
**    data section (96 bytes)"
** The reader's kinds: SQ_ERR_FORMAT for a malformed, truncated or lying
** file, SQ_ERR_NOTFOUND for a file that does not exist, SQ_ERR_IO for any
** other failed open or read, SQ_ERR_NOMEM, SQ_ERR_UNSUPPORTED for more than
** SQ_INPUT_STREAM_MAX bytes from a pipe. The writer's: SQ_ERR_ARG for
** tensors or metadata it refuses (and puts that do not add up), SQ_ERR_IO
** for a failed write, SQ_ERR_NOMEM.
** Writes go through a temporary file renamed over the target (wfile.h).
*/
#define SQ_ST_MAXDIM 64
/* The largest JSON header the reader accepts (the Rust reference's limit). */
#define SQ_ST_HEADER_MAX ((uint64_t)100000000)

typedef enum sq_st_dtype {
    SQ_ST_BOOL, SQ_ST_U8, SQ_ST_I8, SQ_ST_F8_E5M2, SQ_ST_F8_E4M3,
    SQ_ST_I16, SQ_ST_U16, SQ_ST_F16, SQ_ST_BF16,
    SQ_ST_I32, SQ_ST_U32, SQ_ST_F32,
    SQ_ST_I64, SQ_ST_U64, SQ_ST_F64,
    SQ_ST_NDTYPES
} sq_st_dtype;

/* "F32", ... ; NULL for an out-of-range value. */
const char *sq_st_dtype_name(sq_st_dtype d);
/* Bytes per element (1, 2, 4 or 8); 0 for an out-of-range value. */
size_t sq_st_dtype_size(sq_st_dtype d);
/* The dtype of a name ("F32"), or SQ_ST_DTYPE_NONE (-1) when unknown. */
#define SQ_ST_DTYPE_NONE (-1)
int sq_st_dtype_parse(const char *name);
/* 1 for the floating-point dtypes the codecs take (F32, F16, BF16, F64),
** else 0. */
int sq_st_dtype_is_float(sq_st_dtype d);

/* One tensor to write: product(shape) * itemsize bytes at data (which may be
** NULL when that is 0), little-endian. */
typedef struct sq_st_tensor {
    const char *name;
    sq_st_dtype dtype;
    int ndim;
    uint64_t shape[SQ_ST_MAXDIM];
    const void *data;
} sq_st_tensor;

/* One __metadata__ entry (both strings, any UTF-8). */
typedef struct sq_st_kv {
    const char *key;
    const char *value;
} sq_st_kv;

/* Writes the tensors t[0..nt) in that order with the metadata m[0..nm)
** (no "__metadata__" object when nm = 0). Names must be unique, non-empty
** and not "__metadata__". */
int sq_st_write(const char *path, const sq_st_tensor *t, size_t nt, const sq_st_kv *m, size_t nm,
                sq_error *err);

/* The streaming writer, for files that need not be in memory at once.
** sq_st_writer_open checks the tensors and metadata as sq_st_write does
** (t[i].data is ignored) and writes the header; sq_st_writer_put appends the
** data of the tensors, in their order, in pieces of any size;
** sq_st_writer_commit checks that exactly the promised bytes were put and
** renames the file into place. After open succeeds, exactly one of commit
** or abort must be called: both free the writer, whatever the outcome. A
** failed put is remembered and makes commit fail too; the target is never
** left half-written (wfile.h). */
typedef struct sq_st_writer sq_st_writer;

int sq_st_writer_open(sq_st_writer **w, const char *path, const sq_st_tensor *t, size_t nt,
                      const sq_st_kv *m, size_t nm, sq_error *err);
int sq_st_writer_put(sq_st_writer *w, const void *data, uint64_t bytes, sq_error *err);
int sq_st_writer_commit(sq_st_writer *w, sq_error *err);
void sq_st_writer_abort(sq_st_writer *w);

/* A tensor of a file that was read. */
typedef struct sq_st_entry {
    char *name;
    sq_st_dtype dtype;
    int ndim;
    uint64_t shape[SQ_ST_MAXDIM];
    uint64_t nelem;        /* product of shape */
    uint64_t begin, end;   /* byte offsets into the data section */
    const unsigned char *data; /* = file->data + begin; not aligned: memcpy it out */
} sq_st_entry;

typedef struct sq_st_file {
    sq_st_entry *tensors;  /* in file order of their offsets */
    size_t ntensors;
    sq_st_kv *meta;        /* __metadata__, strings owned by the struct */
    size_t nmeta;
    const unsigned char *data; /* the whole data section: in the mapping, the
                                  caller's buffer or a private copy */
    uint64_t data_len;
    uint64_t header_len;   /* N */
    char *name;            /* the file name, for messages */
    /* Private to the reader: what sq_st_free gives back. */
    void *map;             /* the mapping of the whole file, or NULL */
    size_t map_len;
    void *copy;            /* the image read from a pipe (malloc'd), or NULL */
    const sq_st_entry **byname; /* the tensors sorted by name: sq_st_find's index */
} sq_st_file;

/* Opens and validates a whole file into *out (which sq_st_free releases). A
** regular file is mapped read-only; a pipe on standard input ("-" or
** /dev/stdin) is read into memory; anything else that is not a regular
** file (a FIFO, a device) is refused, naming it. */
int sq_st_open(const char *path, sq_st_file *out, sq_error *err);
/* The same as sq_st_open (its older name). */
int sq_st_read(const char *path, sq_st_file *out, sq_error *err);
/* Validates the file image buf[0..len) (all of a file) into *out. Nothing is
** copied: the tensors' data point into buf, which must outlive *out. name
** is the file name for messages. */
int sq_st_parse(const char *name, const void *buf, size_t len, sq_st_file *out, sq_error *err);
/* Unmaps or frees everything and zeroes *f; safe on a zeroed struct. */
void sq_st_free(sq_st_file *f);

/* Drops the pages of e's data from the resident set (e NULL: the whole
** file), so that streaming a large file tensor by tensor keeps memory
** bounded. The data stay readable: touched again, they are read back from
** the file. A no-op for a file held in memory. */
void sq_st_release(const sq_st_file *f, const sq_st_entry *e);
/* The same for the elements [first, first + len) of e, keeping the pages
** they share with the elements around them (which a reader going piece by
** piece may still need). */
void sq_st_release_part(const sq_st_file *f, const sq_st_entry *e, uint64_t first, uint64_t len);

/* Converts e's nelem values (of a float dtype, unaligned, little-endian) to
** fp32 in out[0..nelem): F32 is copied, F16 and BF16 widen exactly, F64
** rounds to nearest even. Fails, naming the file, the tensor and the first
** offending element, on a dtype that is not a float, on NaN or +-Inf, and
** on an F64 value beyond fp32's range:
**   "x.st: tensor 'w': element 123 is NaN"          (SQ_ERR_NONFINITE)
**   "x.st: tensor 'w': element 5: 1e+300 overflows fp32" (SQ_ERR_RANGE)
** and SQ_ERR_FORMAT for a dtype that is not a float. out is undefined
** after a failure. */
int sq_st_to_f32(const sq_st_file *f, const sq_st_entry *e, float *out, sq_error *err);
/* The same checks (so both accept the same tensors), converting exactly to
** double: the fp64 reference of the values. */
int sq_st_to_f64(const sq_st_file *f, const sq_st_entry *e, double *out, sq_error *err);
/* sq_st_to_f32 of the elements [first, first + len) of e alone, into
** out[0..len), on the caller's thread and without a message: SQ_OK, or
** SQ_ERR_NONFINITE / SQ_ERR_RANGE for a value sq_st_to_f32 refuses (its
** message names the element), SQ_ERR_ARG for a range outside the tensor or
** a tensor that is not a float one of this file. For a reader that works
** piece by piece on several threads. */
int sq_st_to_f32_part(const sq_st_file *f, const sq_st_entry *e, uint64_t first, uint64_t len,
                      float *out);

/* The tensor called name, or NULL (a binary search: a file of many tensors
** is checked name by name against a manifest in n log n). */
const sq_st_entry *sq_st_find(const sq_st_file *f, const char *name);
/* The value of metadata key, or NULL. */
const char *sq_st_meta_get(const sq_st_file *f, const char *key);

/*
** npy -- NumPy .npy files (and raw little-endian float32) in and out.
**
** The reader takes format versions 1.0, 2.0 and 3.0, C order only, dtypes
** '<f4', '<f8' and '<f2', and hands back float32 (wider or narrower data is
** converted: '<f8' rounds to nearest, values beyond float32 become +-Inf).
** The header dictionary is parsed strictly: exactly the keys 'descr',
** 'fortran_order' and 'shape', the file size must equal header + n * itemsize.
** The writer writes version 1.0 '<f4'.
**
** Errors: every function returns SQ_OK or a negative kind (shardq.h), and
** writes a sentence naming the file and the field at fault into err (when
** it is not NULL), e.g.
**   "x.npy: header field 'shape': product overflows"
**   "x.npy: data truncated: header promises 4000 bytes of <f4, file has 3990"
** The kinds: SQ_ERR_FORMAT for a malformed, truncated or lying file,
** SQ_ERR_NOTFOUND for a file that does not exist, SQ_ERR_IO for any other
** failed open, read or write, SQ_ERR_NONFINITE for NaN or Inf
** (sq_npy_check_finite), SQ_ERR_NOMEM, SQ_ERR_ARG for a bad argument, and
** SQ_ERR_UNSUPPORTED for more than SQ_INPUT_STREAM_MAX bytes from a pipe.
**
** Writes go through sq_wfile (wfile.h): a failed write never leaves a
** half-written file behind nor damages an existing one.
*/
/* The most dimensions a file may have (NumPy 2 allows 64). */
#define SQ_NPY_MAXDIM 64

/* The element type a file held before conversion to float32. */
typedef enum sq_npy_dtype {
    SQ_NPY_F4 = 0,    /* '<f4' */
    SQ_NPY_F8 = 1,    /* '<f8' */
    SQ_NPY_F2 = 2,    /* '<f2' */
    SQ_NPY_RAW_F4 = 3 /* a raw little-endian float32 file (no header) */
} sq_npy_dtype;

/* "<f4", "<f8", "<f2" or "raw-f32". */
const char *sq_npy_dtype_name(sq_npy_dtype d);

typedef struct sq_npy {
    float *data;     /* n values in C order (malloc'd; not NULL on success, even for n = 0) */
    uint64_t n;      /* number of elements: the product of shape (1 for ndim = 0) */
    int ndim;        /* 0 for a scalar */
    uint64_t shape[SQ_NPY_MAXDIM];
    sq_npy_dtype dtype; /* what the file held */
    int version;     /* format major version 1, 2 or 3; 0 for raw */
} sq_npy;

/* Reads a .npy file into *out (which sq_npy_free releases). Values are
** left as they are: NaN and Inf are read like any other (see
** sq_npy_check_finite). path must be a regular file, or standard input
** ("-", /dev/stdin), which may be a pipe (input.h): then no more than the
** header promises is read, at most SQ_INPUT_STREAM_MAX bytes. */
int sq_npy_read(const char *path, sq_npy *out, sq_error *err);

/* The same for a whole .npy image buf[0..len) already in memory, with the
** same checks (the fuzzer calls it); name is the file name for messages.
** out->data is a new allocation: buf may go once this returns. */
int sq_npy_parse(const char *name, const void *buf, size_t len, sq_npy *out, sq_error *err);

/* SQ_OK when all of a's values are finite; otherwise SQ_ERR_NONFINITE with
** "NAME: element 17 is NaN" ("+Inf", "-Inf") for the first that is not. */
int sq_npy_check_finite(const char *name, const sq_npy *a, sq_error *err);

/* Reads a raw little-endian float32 file (its size must be a multiple of 4)
** into *out as a 1-d array; from a pipe on standard input, at most
** SQ_INPUT_STREAM_MAX bytes. */
int sq_npy_read_raw(const char *path, sq_npy *out, sq_error *err);

/* Frees out->data and zeroes *out; safe on a zeroed struct. */
void sq_npy_free(sq_npy *a);

/* Writes x (product of shape[0..ndim) values; ndim 0 is a scalar) as a
** version 1.0 '<f4' file whose header is padded with spaces to a multiple of
** 64 bytes and ends in a newline. x may be NULL when the product is 0. */
int sq_npy_write_f32(const char *path, const float *x, const uint64_t *shape, int ndim,
                     sq_error *err);

/* Formats a shape as "[1024, 3]" ("[]" for a scalar) into buf, like snprintf. */
int sq_npy_shape_str(const uint64_t *shape, int ndim, char *buf, size_t len);

/*
** tracedir -- traces: what a training job captured, step by step.
**
** A trace is a directory (docs/traces.md):
**
**   manifest.json                     format, version, workers, steps, params
**   step-000010/weights.safetensors   the full model weights of step 10 (every
**                                     step, none, or the manifest's list)
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
    int has_weights;       /* 1 when some step has weights.safetensors: every step
                              (nweights = nsteps) or those of the manifest's list */
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
    /* The weight cadence: weights may come at a subset of the steps (every
    ** gradient file is at every step). weighted[i] is 1 when steps[i] has
    ** weights.safetensors; NULL when no step has. */
    size_t nweights;       /* steps with weights */
    unsigned char *weighted;
} sq_trace;

int sq_trace_open(const char *path, sq_trace *t, sq_error *err);
void sq_trace_close(sq_trace *t);
/* The index of the param called name, or SQ_TRACE_NO_PARAM (-1) (a binary
** search). */
#define SQ_TRACE_NO_PARAM (-1)
int sq_trace_param_index(const sq_trace *t, const char *name);
/* The largest param's n. */
uint64_t sq_trace_max_param(const sq_trace *t);
/* 1 when the step of index i (in t->steps) has weights.safetensors. */
int sq_trace_step_has_weights(const sq_trace *t, size_t index);

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

/* Opens the weights (when weights is 1 and the step has them) and the
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
/* sq_trace_load's fp32 values of the elements [first, first + len) of the
** same tensor alone (sq_st_to_f32_part: no message, no fp64, no dropping
** of pages: sq_trace_release after the last part). SQ_ERR_UNSUPPORTED for
** an .npy trace, SQ_ERR_ARG for a file not opened; sq_trace_load of the
** whole tensor names a bad element. */
int sq_trace_load_part(sq_trace_step *s, int worker, size_t p, uint64_t first, uint64_t len,
                       float *out32);
/* Drops the pages of param p of that file from memory (what sq_trace_load
** does after loading); _part those of its elements [first, first + len)
** (sq_st_release_part). */
void sq_trace_release(sq_trace_step *s, int worker, size_t p);
void sq_trace_release_part(sq_trace_step *s, int worker, size_t p, uint64_t first, uint64_t len);
/* The file that holds it, for messages. */
const char *sq_trace_file_name(const sq_trace_step *s, int worker);
/* The bytes of trace that reading param p of that file covers: its data in
** the file (4 per element for an .npy trace's one array). */
uint64_t sq_trace_tensor_bytes(const sq_trace_step *s, int worker, size_t p);

/* The reader alone, the bound a replay's GB/s is measured against: the
** seconds to read, as fp32 and doing nothing else with the values, what a
** replay of the first nsteps steps reads: at every step the gradients of
** workers 0 .. min(ngrads, workers) - 1 and, when weights is 1, the weights
** where the step has them. Each tensor is read in tiles over the library's
** threads (sq_get_threads), into a buffer per thread, its pages dropped
** behind, as the replay's staging reads; an .npy file is read whole.
** *bytes: the data bytes read, counted as the replay counts them. A value
** that cannot be converted fails with the file, tensor and element named. */
int sq_trace_time_reader(const sq_trace *t, size_t nsteps, int weights, int ngrads,
                         double *seconds, uint64_t *bytes, sq_error *err);

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
** grads-wWW.safetensors. Then put every param in order, then end. Every
** step has every gradient file; weights may come at every step, at none or
** at some (a weight cadence of its own): the manifest records which. */
int sq_trace_file_begin(sq_trace_writer *w, uint32_t step, int worker, sq_error *err);
int sq_trace_file_put(sq_trace_writer *w, const float *x, sq_error *err);
int sq_trace_file_end(sq_trace_writer *w, sq_error *err);
/* Writes manifest.json (last, so that a trace cut short by a crash has
** none and is refused) listing the steps of which every file was written,
** and frees w. abort frees w and leaves what was written, without manifest.
** A joined writer (below) writes no manifest: its close checks that its
** last step's file was ended, and frees it. */
int sq_trace_writer_close(sq_trace_writer *w, sq_error *err);
void sq_trace_writer_abort(sq_trace_writer *w);

/* The trace's id (32 hexadecimal digits, the manifest's "id"), valid while
** w lives: what the other processes of a capture join with. */
const char *sq_trace_writer_id(const sq_trace_writer *w);

/* A trace written by several processes: each rank of a data-parallel job
** writes its own gradient, so no gradient travels to one writer.
**
** The trace's own writer is opened as above (sq_trace_writer_open[_as]) by
** one process, which takes the directory; it passes its id to the others,
** which join it after that: sq_trace_writer_join opens a writer of worker
** `worker`'s gradient files alone, with the same workers, params and dtype,
** for the directory dir (which every process must see: a shared file
** system on several hosts). A joined writer takes no lock, but the owner's
** must be held (SQ_ERR_NOTFOUND otherwise: the owner opens first), and
** writes with begin, put and end, step by step (steps strictly increase),
** the file of its worker only: no weights, no manifest.
**
** sq_trace_file_adopt then records, in the owner's writer, worker's file of
** step as if the owner had written it, in the same order (weights, then
** workers 0, 1, ...: written and adopted files interleave in worker order):
** once every process has ended the step's file (a barrier of the job), the
** owner adopts them. It checks the file's header as the reader will, and
** that it is this trace's file of that step: a file that is missing
** (SQ_ERR_NOTFOUND), of another trace (SQ_ERR_CONFLICT, its trace_id), of
** another step, dtype, param or shape (SQ_ERR_FORMAT) is refused, naming
** the file and the field. */
int sq_trace_writer_join(sq_trace_writer **w, const char *dir, const char *id, int worker,
                         int workers, const sq_trace_param *p, size_t np, sq_st_dtype dtype,
                         sq_error *err);
int sq_trace_file_adopt(sq_trace_writer *w, uint32_t step, int worker, sq_error *err);

/*
** container -- the shardq.codec/1 container: one quantized array in a
** safetensors file (docs/conventions.md).
**
** The file holds the tensors "codes" (U8), "scales" and, for min-max codecs,
** "offsets" (F32, BF16 or F16 as the codec's scale dtype), and __metadata__
** with everything a decoder needs: "format" (shardq.codec/1), the canonical
** "codec", "n" and the original "shape", then the random-number key ("seed",
** "step", "worker", "site") and "shardq_version".
**
** The reader checks every field against the others (the codec against the
** tensors' dtypes and sizes, the shape against n) and that the scales and
** offsets are finite, so a damaged or hand-edited file is refused before it
** is decoded. Errors name the file and the field:
**   SQ_ERR_FORMAT     malformed, truncated or lying: a missing or bad
**                     __metadata__ value, a tensor missing, unexpected or of
**                     the wrong dtype or size (and what sq_st_open refuses)
**   SQ_ERR_NONFINITE  a scale or offset that is NaN or infinite
**   SQ_ERR_NOTFOUND   no such file; SQ_ERR_IO, a failed open, read or write
**   SQ_ERR_NOMEM      no memory for the decoded buffers
*/
#define SQ_CONTAINER_FORMAT "shardq.codec/1"

/* One encoded array: what is written, or what was read. */
typedef struct sq_container {
    sq_codec codec;
    uint64_t n; /* values encoded: the product of shape */
    int ndim;   /* 0 for a scalar */
    uint64_t shape[SQ_NPY_MAXDIM];
    sq_rng_key key; /* the key of stochastic rounding */
    sq_qbuf q;      /* codes, scales and offsets of n values */
} sq_container;

/* Writes c (its q holding the encoding of c->n values under c->codec) to
** path, safely replaced (wfile.h); "-" is not special here: name
** /dev/stdout to write to standard output. */
int sq_container_write(const char *path, const sq_container *c, sq_error *err);

/* Reads and validates path (standard input as "-" or /dev/stdin, which may
** be a pipe) into *out, whose q is then allocated: sq_container_free
** releases it. On failure *out holds nothing to free. The key is read when
** the file records it (a file without one reads as key 0). */
int sq_container_read(const char *path, sq_container *out, sq_error *err);

/* Frees out->q and zeroes *out; safe on a zeroed struct. */
void sq_container_free(sq_container *c);

/* ---- info (info.c) ----------------------------------------------------- */

/* Reads every value of every file of t, step by step (memory: one step's
** mapping and the largest tensor), with replay's own loader, so that what
** it accepts replay accepts: SQ_OK, *files the number of files read. */
int sq_trace_check_values(const sq_trace *t, size_t *files, sq_error *err);
/* What t holds, as `shardq trace info` prints it: aligned text, or one JSON
** object (json nonzero); checked: the files sq_trace_check_values read, or
** -1 when the values were not checked. */
void sq_trace_print_info(FILE *f, const sq_trace *t, int json, long long checked);

SQ_END_DECLS
#endif /* SHARDQ_TRACE_H */
