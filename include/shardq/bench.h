/*
** shardq/bench.h -- the benchmark method: operations, timing, bytes, the copy bound.
**
** Part of the public API of libshardq (docs/library.md); every
** declaration below is exported, everything else in the library is hidden.
*/
#ifndef SHARDQ_BENCH_H
#define SHARDQ_BENCH_H

#include "shardq/backend.h"
#include "shardq/codec.h"
#include "shardq/store.h"

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

SQ_BEGIN_DECLS

/*
** bench -- the benchmark method of the codec operations: which operations
** are measured with which codecs, how they are timed, and how their bytes
** are counted, so that a throughput means the same in every run and on
** every device.
**
** A throughput figure means little alone: a quantizer at 5 GB/s is fast on a
** laptop and slow on a server. So every figure comes with a plain copy of
** the same number of bytes on the same device, measured in the same run
** (memcpy with the same thread count on the CPU, a device-to-device copy on
** a GPU), and the ratio is the figure to compare across machines. Bytes are
** read + written by one call, metadata included, exactly as the codec sizes
** them (sq_codec_bytes).
**
** Timing: a warm-up call, one timed call to size the batches, then batches
** of calls enqueued back to back (so a GPU never waits for the host between
** them) of about a tenth of the minimum time each, on the backend's clock
** (sq_clock_s on the CPU, CUDA events on a GPU); at least three batches and
** the minimum time in all. A figure is the median GB/s of the batches, with
** their standard deviation beside it.
*/
/* Chunks (workers of a node) that the reduce-scatter hops sum. */
#define SQ_BENCH_CHUNKS 4

/* One measured operation. */
typedef struct sq_bench_op {
    const char *name;      /* "quantize", "dequantize-8-nh", ... */
    const char *codec;     /* the codec of its input; NULL: none (hadamard, rng) */
    const char *codec_out; /* sum-requant: the codec of its output; else NULL */
    int cpu_only;          /* measured on the CPU only */
    const char *twin;      /* the same kernel without the Hadamard transform, or NULL */
    const char *what;      /* one line that says what it does */
} sq_bench_op;

/* The op table, in its fixed order. */
size_t sq_bench_nops(void);
const sq_bench_op *sq_bench_op_at(size_t i);
/* The index of the op called name: SQ_OK, or SQ_ERR_NOTFOUND. */
int sq_bench_find_op(const char *name, size_t *index);
/* The ops measured when none are named: every op a GPU runs, or the CPU's
** usual set. Writes at most max indices into index[]; returns their count. */
size_t sq_bench_default_ops(int gpu, size_t *index, size_t max);

/* Bytes read + written by one call of op on n elements whose input codec is
** c and (sum-requant) output codec c_out; c and c_out may be NULL for the
** ops that have none. A copy of n elements moves 8 n bytes. */
double sq_bench_op_bytes(const sq_bench_op *op, const sq_codec *c, const sq_codec *c_out,
                         uint64_t n);
double sq_bench_copy_bytes(uint64_t n);

/* What one run measures. */
typedef struct sq_bench_config {
    const int *sizes_mb;  /* input sizes in MiB of fp32 */
    int nsizes;
    const int *threads;   /* CPU thread counts, one pass each; a GPU makes one pass
                          ** and its rows carry threads[0] (0: not applicable) */
    int nthreads;
    const size_t *ops;    /* indices into the op table */
    int nops;
    const char *codec;    /* NULL, or a spec that replaces every op's input codec
                          ** (sum-requant keeps its own) */
    double min_time;      /* seconds each figure is timed over at least */
} sq_bench_config;

/* One figure: an op at one size and thread count. */
typedef struct sq_bench_result {
    const sq_bench_op *op; /* NULL: not measured (a failure came first) */
    int size_mb, threads;
    uint64_t elements;     /* fp32 input elements of one call */
    double bytes;          /* read + written by one call */
    double gbs, gbs_std;   /* median and standard deviation over the batches */
    double copy_gbs, copy_std; /* the copy of the same size in the same run */
    double twin_ratio;     /* gbs over the twin's, when it was measured before; < 0: none */
    char codec[SQ_CODEC_STRLEN]; /* the input codec's canonical spec, "-" when none */
    int noisy;             /* 0: steady; else SQ_BENCH_NOISY_SPREAD and/or
                           ** SQ_BENCH_NOISY_THREADS, the reasons it stayed noisy */
    int copy_noisy;        /* the same for the copy */
} sq_bench_result;

/* A figure whose batches spread (standard deviation) over this share of
** their median is measured again, up to SQ_BENCH_TRIES times in all, and the
** steadiest try kept; one still over it is noisy (a busy machine). The store
** keeps the spread, so a reader applies the same rule: std > 0.25 median. */
#define SQ_BENCH_NOISY 0.25
#define SQ_BENCH_TRIES 3

/* A figure can also be slow in every batch alike (a busy machine for the
** whole measurement), which no spread shows. More threads should never copy
** or compute several times slower than one, so a figure at more than one
** thread below SQ_BENCH_SLOW of the same op's (or copy's) figure at the same
** size on 1 thread, measured earlier in the same run, is measured again (up
** to SQ_BENCH_TRIES tries in all, the fastest kept) and noisy if it stays
** so. The store keeps every thread count's figure, so a reader applies the
** same rule: gb_per_s < 0.5 x the same run, op and size's 1-thread figure. */
#define SQ_BENCH_SLOW 0.5
#define SQ_BENCH_NOISY_SPREAD 1  /* the spread rule above */
#define SQ_BENCH_NOISY_THREADS 2 /* the 1-thread rule */

/* Whether a figure of gbs GB/s at threads threads is noisy by the 1-thread
** rule beside gbs_one, the same op and size's figure on 1 thread (<= 0:
** none measured): 1 or 0. */
int sq_bench_slow_vs_one(double gbs, int threads, double gbs_one);

/* What a run reports as it goes. */
typedef enum sq_bench_event_kind {
    SQ_BENCH_COPY, /* the copy of a size was measured */
    SQ_BENCH_ROW,  /* an op was measured: row */
    SQ_BENCH_SIZE, /* a size is done (or failed after its copy): rows[0..nrows), one
                   ** per op of the config, op NULL where not measured */
    SQ_BENCH_PASS  /* a thread count is done, every figure measured: rows[0..nrows)
                   ** are nsizes x nops, size-major */
} sq_bench_event_kind;

typedef struct sq_bench_event {
    sq_bench_event_kind kind;
    size_t done, total;           /* measurements finished, of all (copies included) */
    const sq_bench_result *row;   /* ROW */
    const sq_bench_result *rows;  /* SIZE, PASS */
    int nrows;
    int size_mb, threads;         /* COPY, ROW, SIZE */
    uint64_t elements;            /* COPY, ROW, SIZE */
    double copy_gbs, copy_std;    /* COPY, ROW, SIZE */
    int64_t run;                  /* the stored run (sq_bench_record); 0: not stored */
} sq_bench_event;

/* Called for each event; a non-zero return stops the run. */
typedef int (*sq_bench_progress)(void *user, const sq_bench_event *ev);

/* Measures every op of cfg at every size and thread count on be, calling
** progress (may be NULL) as figures come. *out (if out is not NULL) gets the
** malloc'd results, nthreads x nsizes x nops in that order (a GPU: one
** pass), *nout their count; free() them. Returns SQ_OK; SQ_ERR_ARG or
** SQ_ERR_SPEC for a bad config; the kind of an operation's failure, with a
** sentence naming the op, the size and the backend's message;
** SQ_ERR_INTERRUPTED when progress stopped it. What was measured before a
** failure is in *out and was reported. */
int sq_bench_run(sq_backend *be, const sq_bench_config *cfg, sq_bench_progress progress,
                 void *user, sq_bench_result **out, size_t *nout, sq_error *err);

/* Runs cfg on be as sq_bench_run does (progress and user likewise; every
** event carries the run's id) and records it in the store at db (opened
** with busy_ms the busy timeout) as a run of kind 'bench': its config the
** device, the device's description, the sizes, thread counts, ops, codec
** and minimum time; one bench_results row per figure and the copy of each
** size as op "copy", stored as each size ends; the run ended 'done', or
** 'failed' with the failure's sentence. The run begins before anything is
** measured, and *run (may be NULL) is its id from then on, also after a
** failure (0 when it did not begin). Returns SQ_OK; SQ_ERR_ARG when the
** config lists a size, thread count or op twice (the store keeps one row of
** each); the store's kind when it cannot be opened or written; or
** sq_bench_run's kind. */
int sq_bench_record(const char *db, int busy_ms, sq_backend *be, const sq_bench_config *cfg,
                    sq_bench_progress progress, void *user, int64_t *run, sq_error *err);

/* A line that names the device a backend measures: the GPU's description,
** or the CPU's model name. */
void sq_bench_device_text(const sq_backend *be, char *buf, size_t len);

/* The quantization throughput a stored bench run measured: the mean GB/s of
** its quantize and dequantize rows at its largest size and thread count, in
** the newest finished run that has them. SQ_OK; SQ_ERR_NOTFOUND when the
** store has no such run; SQ_ERR_IO when the store cannot be read;
** SQ_ERR_FORMAT when its figure is not positive. */
typedef struct sq_bench_quant {
    int64_t run;        /* the run's id */
    double gb_per_s;
    uint64_t elements;  /* the size the figure is from */
    int threads;        /* 0 on a GPU */
    char device[128];   /* the run's device, "?" when it has none */
} sq_bench_quant;

struct sq_store;
int sq_bench_stored_quant(struct sq_store *s, sq_bench_quant *out, sq_error *err);

/* The PyTorch peer (`shardq bench --peer torch`): PyTorch's versions of
** the default codec's rows, timed by a script the library carries, run by
** `python` (a path). Whether the peer measures this bench op: */
int sq_bench_peer_has_op(const char *op);

/* Whether python runs and imports torch: SQ_OK; SQ_ERR_NOTFOUND (no such
** program), SQ_ERR_UNSUPPORTED (no torch), SQ_ERR_IO (it could not run). */
int sq_bench_peer_check(const char *python, sq_error *err);

/* The median seconds of one call of op on n fp32 elements with `threads`
** threads: as usually written (*plain) and cache-chunked (*chunked).
** SQ_OK; SQ_ERR_IO when the peer could not run or failed, SQ_ERR_FORMAT
** when it printed no timings. */
int sq_bench_peer_time(const char *python, const char *op, uint64_t n, int threads,
                       double min_time, double *plain, double *chunked, sq_error *err);

/* ---- printing (print.c): what `shardq bench` prints, to a stream ---- */

/* The text table's header: where it runs (threads: those available on a
** CPU), what GB/s and copy mean, the column names. */
void sq_bench_print_header(FILE *f, int gpu, const char *where, int threads);
/* One figure: a text row, or a JSON line (run > 0: its stored run). */
void sq_bench_print_row(FILE *f, const sq_bench_result *r, const char *device, int json,
                        int64_t run);
/* SDP4Bit's Table 5 form of one pass (rows: nsizes x nops), for each bit
** width whose four rows ran at every size. */
void sq_bench_print_table5(FILE *f, const sq_bench_result *rows, int nsizes, int nops,
                           const int *sizes);
/* The torch peer's two rows after shardq's row r, timed by python:
** SQ_OK, or sq_bench_peer_time's failure (err says why). */
int sq_bench_print_peer(FILE *f, const sq_bench_result *r, const char *python, double min_time,
                        int json, sq_error *err);

SQ_END_DECLS
#endif /* SHARDQ_BENCH_H */
