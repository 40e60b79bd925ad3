/*
** shardq/cost.h -- the cost model: platforms, model shapes, iteration times, validation tables.
**
** Part of the public API of libshardq (docs/library.md); every
** declaration below is exported, everything else in the library is hidden.
*/
#ifndef SHARDQ_COST_H
#define SHARDQ_COST_H

#include "shardq/codec.h"
#include "shardq/world.h"

#include <stddef.h>
#include <stdint.h>

SQ_BEGIN_DECLS

/*
** cost -- the cost model: one training iteration of sharded data-parallel training at
** cluster scale: how long it takes under each quantization scheme, phase by
** phase, from the model's FLOPs, the platform's rates and the bytes the
** emulated world counts (docs/cost-model.md, explains every formula).
**
** A platform is a handful of hardware figures (GPUs per node, link
** bandwidths and latencies, the achieved FLOP/s of one GPU, the
** quantization kernels' throughput), each with its source (a datasheet, a
** measurement, an assumption, or a fit to end-to-end results that
** `shardq model --calibrate` makes and --validate reports), a model is its shape,
** and the bytes of each collective come from a dry sq_world of the data-
** parallel group's real topology, so the model and the harness can never
** disagree about what a scheme sends.
**
** Ranks are laid out as Megatron lays them out: tensor-parallel ranks
** innermost (consecutive GPUs of a node), then data-parallel, then pipeline
** stages. So a node holds k = min(TP, G) data-parallel groups with g = G/k
** GPUs each, and those k groups share the node's network cards.
*/
/* Where one figure of a platform comes from. A figure FITTED to the rows
** of a validation table predicts those rows by construction: `shardq model
** --validate` reports such rows apart from the others. */
typedef enum sq_cost_source_kind {
    SQ_COST_SRC_UNSTATED = 0, /* the file does not say */
    SQ_COST_SRC_DATASHEET,    /* a vendor's figure or a hardware fact */
    SQ_COST_SRC_MEASURED,     /* a measurement of one part of the machine */
    SQ_COST_SRC_ASSUMED,      /* carried over from elsewhere, to be replaced */
    SQ_COST_SRC_FITTED        /* fitted to end-to-end results (fitted_to) */
} sq_cost_source_kind;

/* The figures of a platform, in the order of its file. */
typedef enum sq_cost_figure {
    SQ_COST_FIG_ACHIEVED_TFLOPS = 0,
    SQ_COST_FIG_HBM,
    SQ_COST_FIG_QUANT,
    SQ_COST_FIG_INTRA_BW,
    SQ_COST_FIG_INTRA_LATENCY,
    SQ_COST_FIG_NICS,
    SQ_COST_FIG_NIC_BW,
    SQ_COST_FIG_EFFICIENCY,
    SQ_COST_FIG_COMMUNICATOR,
    SQ_COST_FIG_INTER_LATENCY,
    SQ_COST_NFIGURES
} sq_cost_figure;

/* "[sources]" key of figure f ("achieved_tflops", "inter.nic_gb_s", ...). */
const char *sq_cost_figure_key(sq_cost_figure f);

typedef struct sq_cost_source {
    sq_cost_source_kind kind;
    char fitted_to[64]; /* FITTED: the validation table whose rows gave it */
    char rows[256];     /* FITTED: the labels of those rows, comma-separated;
                        ** empty: the whole table (or the paper behind it) */
    char note[256];     /* the rest of the line: where exactly, how */
} sq_cost_source;

/* A cluster. Bandwidths in bytes/s per direction, latencies in seconds. */
typedef struct sq_cost_platform {
    char name[64];
    int nodes;             /* the cluster's size when no GPU count is given */
    int gpus_per_node;     /* G */
    double achieved_flops; /* FLOP/s one GPU reaches on the model's matrix products */
    double hbm_bw;         /* device memory bandwidth (the optimizer step) */
    double quant_bw;       /* quantization kernels, bytes read + written per second */
    double intra_bw;       /* one GPU's NVLink/NVSwitch bandwidth as a collective sees it */
    double intra_latency;  /* per step of an intra-node collective */
    int nics_per_node;
    double nic_bw;          /* line rate of one network card */
    double net_efficiency;  /* the fraction of the line rate all cards of a node reach together */
    double communicator_bw; /* the most one communicator moves through one node's cards; 0: no cap */
    double inter_latency;   /* per step of a collective across nodes */
    sq_cost_source source[SQ_COST_NFIGURES]; /* where each figure comes from */
} sq_cost_platform;

/* 1 if figure f of p was fitted to row `label` of validation table `table`
** (a fit to the whole table counts for every row). */
int sq_cost_fitted_to(const sq_cost_platform *p, sq_cost_figure f, const char *table,
                      const char *label);

/* A GPT-style decoder (Megatron's FLOP and parameter accounting). */
typedef struct sq_cost_model_shape {
    char name[64];
    int layers, hidden, heads, vocab, seq;
} sq_cost_model_shape;

typedef struct sq_cost_parallel {
    int gpus;        /* every GPU of the job */
    int tp, pp;      /* tensor and pipeline parallel degrees */
    int micro_batch; /* sequences per micro-batch per data-parallel rank */
    int accum;       /* micro-batches per iteration (gradient accumulation) */
    int overlap;     /* 1: collectives and their quantization kernels overlap compute
                     ** as `system` schedules them; 0: they run after it */
    int system;      /* sq_cost_system: how often the weights are gathered */
    int hpz;         /* ZeRO-3 only: ZeRO++'s hpZ, the backward all-gather from a
                     ** secondary bf16 partition inside the node */
} sq_cost_parallel;

/* The training system, which fixes how many collectives a step runs and
** what can hide behind what (docs/cost-model.md). */
typedef enum sq_cost_system {
    SQ_COST_MEGATRON = 0, /* Megatron's distributed optimizer: one weight all-gather
                          ** after the optimizer step, one gradient reduce-scatter
                          ** after the last micro-batch's backward */
    SQ_COST_ZERO3 = 1     /* DeepSpeed ZeRO-3 (and ZeRO++): per micro-batch, the weights
                          ** gathered for the forward and again for the backward, the
                          ** gradients reduce-scattered in the backward */
} sq_cost_system;

/* The quantization kernels one GPU runs in one collective of a data-
** parallel group (the busiest GPU; every GPU runs the same): elements
** quantized, elements dequantized (a sum of k chunks dequantizes k), and
** the bytes those kernels read and write. Only what a GPU executes: the
** chunks a ring passes along are moved, never decoded and re-encoded. */
typedef struct sq_cost_kernels {
    uint64_t encoded[2];  /* per collective, SQ_COLL_WEIGHT and SQ_COLL_GRAD */
    uint64_t decoded[2];
    double bytes[2];
} sq_cost_kernels;

/* The kernels of scheme s (per-tensor rules already resolved) on topology
** topo for `elements` parameters, from the per-scheme counts of
** docs/cost-model.md. SQ_OK, or the plan layout's kind and sentence. */
int sq_cost_quant_kernels(const sq_topo *topo, const sq_scheme *s, uint64_t elements,
                          sq_cost_kernels *out, sq_error *err);

/* One iteration, seconds per phase. compute + tp + bubble is the forward
** and backward pass; weight, grad and quant are the exposed times of the
** collectives and of the quantization kernels (all of their time without
** overlap); iteration is the sum of all. */
typedef struct sq_cost_result {
    double compute, tp, bubble, weight, grad, quant, optimizer, iteration;
    double weight_comm, grad_comm; /* collective time of the step before overlap
                                   ** (ZeRO-3: every micro-batch's gathers) */
    double quant_weight, quant_grad; /* the kernels' time of each path before overlap */
    uint64_t weight_inter_bytes_per_node; /* one step's weight gathers, the busiest node */
    uint64_t weight_intra_bytes_per_gpu;  /* the same over NVLink, the busiest GPU */
    double tflops;                 /* model TFLOP/s per GPU (Megatron's throughput metric) */
    double model_flops;            /* FLOPs of one iteration's global batch */
    uint64_t params;               /* of the whole model */
    uint64_t params_per_rank;      /* the largest pipeline stage's share of one TP rank */
    int dp, dp_nodes, dp_per_node, groups_per_node;
    uint64_t inter_bytes_per_node; /* both collectives, sent through one node's cards */
    uint64_t intra_bytes_per_gpu;  /* both collectives, sent by the busiest GPU over NVLink */
    uint64_t quant_bytes_per_gpu;  /* read + written by the quantization kernels */
    sq_grad_mode grad_path;        /* what the gradient collective really ran */
} sq_cost_result;

/* Parameters of the model (vocabulary padded as Megatron pads it, to a
** multiple of 128 x tp) and of the largest stage's tensor-parallel rank. */
uint64_t sq_cost_model_params(const sq_cost_model_shape *m, int tp);
uint64_t sq_cost_model_params_per_rank(const sq_cost_model_shape *m, int tp, int pp);
/* Model FLOPs of one sequence, forward and backward (Megatron's formula). */
double sq_cost_model_flops_per_seq(const sq_cost_model_shape *m);

/* The figures a platform and a model must hold: SQ_OK, or SQ_ERR_ARG with
** the field at fault named in err. */
int sq_cost_platform_validate(const sq_cost_platform *p, sq_error *err);
int sq_cost_model_shape_validate(const sq_cost_model_shape *m, sq_error *err);

/* Predicts one iteration of m on p with par under scheme s. SQ_OK, or
** SQ_ERR_ARG with a sentence in err (a layout that does not divide, tensor
** parallelism across nodes), or the kind of the dry world's failure. */
int sq_cost_iteration(const sq_cost_platform *p, const sq_cost_model_shape *m,
                      const sq_cost_parallel *par, const sq_scheme *s, sq_cost_result *out,
                      sq_error *err);

/* ------------------------------------------------------------------------ */
/* Studies: schemes beside the baseline, over GPU counts, and their record  */
/* ------------------------------------------------------------------------ */

#define SQ_COST_MAX_SCHEMES 32
#define SQ_COST_MAX_POINTS 32

/* Several schemes beside the baseline on one platform and model: at one
** GPU count, or over a sweep of them. */
typedef struct sq_cost_study {
    const sq_cost_platform *plat;
    const sq_cost_model_shape *model;
    sq_cost_parallel par;      /* par.gpus: the one count predicted when max_gpus is 0 */
    int max_gpus;              /* > 0: a sweep: one node, then doubling up to max_gpus
                               ** (the counts the layout cannot use are left out) */
    const sq_scheme *baseline; /* what every speedup is over (predicted without
                               ** par.hpz: ZeRO++ is compared with plain ZeRO-3) */
    const sq_scheme *schemes;  /* nschemes, at most SQ_COST_MAX_SCHEMES */
    const char *const *names;  /* their names, as stored ("baseline" among them
                               ** stands for the baseline's own row) */
    int nschemes;
} sq_cost_study;

/* The predictions at one GPU count: the baseline's and each scheme's. */
typedef struct sq_cost_point {
    int gpus;
    sq_cost_result base;
    sq_cost_result cost[SQ_COST_MAX_SCHEMES];
} sq_cost_point;

/* The speedup of c over base (base's iteration over c's); NaN when c has
** no positive iteration time. */
double sq_cost_speedup(const sq_cost_result *base, const sq_cost_result *c);

/* Predicts st into pts[0..*npts) (room for SQ_COST_MAX_POINTS). SQ_OK;
** SQ_ERR_ARG for a bad study, or when no count of a sweep fits the layout
** (the sentence says which counts, TP, PP and node size); at one count,
** sq_cost_iteration's kind and sentence. */
int sq_cost_study_run(const sq_cost_study *st, sq_cost_point *pts, int *npts, sq_error *err);

/* The study's settings as one JSON object (the platform and the model by
** name and shape, the layout, the achieved TFLOP/s and the quantization
** GB/s): the config of its stored run. */
void sq_cost_study_config(const sq_cost_study *st, char *buf, size_t len);

/* Records pts[0..npts) of st in the store at db (opened with busy_ms the
** busy timeout) as a run of kind 'model': its config sq_cost_study_config,
** its params the platform, model, tp, pp, micro_batch, accum, overlap and
** quant_gb_s, one model_results row per scheme and GPU count (the baseline
** too), the run ended 'done' ('failed' with the sentence when a row cannot
** be written). *run (may be NULL) gets its id, 0 when it did not begin.
** SQ_OK, or the store's kind (SQ_ERR_IO, SQ_ERR_BUSY, ...) and sentence. */
int sq_cost_study_store(const char *db, int busy_ms, const sq_cost_study *st,
                        const sq_cost_point *pts, int npts, int64_t *run, sq_error *err);

/* sq_cost_study_run, then sq_cost_study_store of its points: computes and
** records. The store is not opened when the prediction fails (*npts 0);
** when the store fails, pts[0..*npts) still hold the predictions. */
int sq_cost_record(const char *db, int busy_ms, const sq_cost_study *st, sq_cost_point *pts,
                   int *npts, int64_t *run, sq_error *err);

/* ------------------------------------------------------------------------ */
/* The files: platforms, model shapes, validation tables                    */
/* ------------------------------------------------------------------------ */
/*
** INI files (experiments/platforms/NAME.ini, experiments/models/NAME.ini,
** experiments/validation/NAME.ini in the source tree). Every one of those is
** also built into the library, so a file is named either by a path (it
** contains '/' or ends in ".ini") or by the bare NAME of a built-in one.
**
** Every key is known and every number checked: SQ_ERR_IO when a file cannot
** be opened or read, SQ_ERR_FORMAT for a bad line, an unknown, repeated or
** missing key or a bad value (the sentence names the file, the section, the
** key and the line), SQ_ERR_NOTFOUND for an unknown built-in name,
** SQ_ERR_NOMEM. Messages name a built-in file by its source path.
*/
typedef enum sq_cost_file_kind {
    SQ_COST_PLATFORM = 0,
    SQ_COST_MODEL = 1,
    SQ_COST_VALIDATION = 2
} sq_cost_file_kind;

int sq_cost_platform_read(const char *what, sq_cost_platform *p, sq_error *err);
int sq_cost_model_read(const char *what, sq_cost_model_shape *m, sq_error *err);

/* A validation table: the common settings and one row per published
** result. */
#define SQ_COST_VALIDATION_MAX_ROWS 64
typedef struct sq_cost_validation_row {
    char label[64];
    char model[256];  /* a built-in model or a model file */
    int tp, pp;
    double baseline_tflops, scheme_tflops, speedup; /* published; NaN when absent */
} sq_cost_validation_row;

typedef struct sq_cost_validation {
    char platform[256]; /* a built-in platform or a platform file */
    char scheme[32];    /* the quantized preset the rows report */
    int gpus, micro_batch, accum, overlap;
    double tolerance;   /* the largest relative speedup error accepted */
    sq_cost_validation_row rows[SQ_COST_VALIDATION_MAX_ROWS];
    int nrows;
} sq_cost_validation;

int sq_cost_validation_read(const char *what, sq_cost_validation *v, sq_error *err);

/* One row of a validation table as the model predicts it. */
typedef struct sq_cost_validated_row {
    sq_cost_result base, scheme; /* the baseline's iteration and the scheme's */
    double speedup;              /* base over scheme */
    double error;                /* the speedup's relative error to the published one */
    int out_of_tolerance;        /* |error| above the table's tolerance */
    char fitted[256];            /* the platform's figures fitted to this row, or "" */
} sq_cost_validated_row;

/* How many rows, how many out of tolerance, the largest |error|. */
typedef struct sq_cost_tally {
    int rows, out;
    double worst;
} sq_cost_tally;

typedef struct sq_cost_validation_report {
    char table_name[128]; /* what a fitted figure's source calls the table */
    int nrows;            /* rows predicted: all, or those before the one that failed */
    sq_cost_validated_row rows[SQ_COST_VALIDATION_MAX_ROWS];
    sq_cost_tally predicted; /* rows that used no figure fitted to themselves */
    sq_cost_tally self;      /* rows that did: they match by construction */
} sq_cost_validation_report;

/* The name a figure's source calls a table by: a built-in table's name, a
** file's name without its directory and ".ini". */
void sq_cost_table_name(const char *table, char *out, size_t len);

/* Predicts every row of v (read from `table`) on platform p, the baseline
** against scheme s. SQ_OK; a row's model that does not read or run gives
** that failure's status and message, rep->nrows the rows done before it. */
int sq_cost_validate(const sq_cost_validation *v, const char *table, const sq_cost_platform *p,
                     const sq_scheme *baseline, const sq_scheme *s,
                     sq_cost_validation_report *rep, sq_error *err);

/* The text of p as a platform file (sq_cost_platform_read reads it back
** to the same figures and sources), `comment` (may be NULL; lines without
** their '#') at its head: *text is malloc'd, free() it. SQ_OK, SQ_ERR_ARG
** for a platform that does not validate, SQ_ERR_NOMEM. */
int sq_cost_platform_format(const sq_cost_platform *p, const char *comment, char **text,
                            sq_error *err);

/* Measured runs of the baseline on one cluster, for calibration: a file of
** "[row LABEL]" sections, each with model, tp, pp, gpus, micro_batch,
** global_batch and either iteration_ms or tflops (model TFLOP/s per GPU,
** Megatron's metric), overlap optional (off); and an optional
** "[measurements]" section whose `table` names the validation table the
** rows are taken from (so that a figure fitted to them says so). */
typedef struct sq_cost_measured {
    char label[64];
    char model[256];
    int tp, pp, gpus, micro_batch, global_batch, overlap;
    double iteration_s; /* NaN when the row gives tflops */
    double tflops;      /* NaN when the row gives iteration_ms */
} sq_cost_measured;

typedef struct sq_cost_measurements {
    char table[64]; /* empty when not given */
    sq_cost_measured rows[SQ_COST_VALIDATION_MAX_ROWS];
    int nrows;
} sq_cost_measurements;

/* Reads a measurements file (a path; there are no built-in ones). Errors as
** the other files': SQ_ERR_FORMAT names the file, the row and the key. */
int sq_cost_measurements_read(const char *path, sq_cost_measurements *m, sq_error *err);

/* A calibration (sq_cost_calibrate): the platform fitted to measured
** baseline rows, and how well it predicts each of them. */
typedef struct sq_cost_calibration {
    sq_cost_platform start;    /* the platform the fit started from */
    sq_cost_platform platform; /* the calibrated one: named, its figures sourced */
    char comment[1024];        /* the head of its file (sq_cost_platform_format) */
    int nrows;
    int nparams;        /* 1: the network's rate alone; 2: and the compute rate */
    int iterations;     /* Gauss-Newton steps */
    double inter_bw;    /* the fitted rate through a node's network, bytes/s */
    double achieved_flops; /* the fitted (or, with one row, the platform's) FLOP/s */
    double line_rate;   /* the platform's cards together, bytes/s */
    double measured_s[SQ_COST_VALIDATION_MAX_ROWS]; /* each row's iteration */
    double fitted_s[SQ_COST_VALIDATION_MAX_ROWS];   /* and the calibrated model's */
} sq_cost_calibration;

/* Fits the network's rate (one row), or that and the achieved compute rate
** (two rows or more), of platform p0 to the measured rows of ms (read from
** `file`, which messages name) under `base`, the baseline as `system` runs
** it; the calibrated platform is named after `out`, the path its file is
** to be written to. SQ_OK; a row's model that does not read or run gives
** that failure's status (the message names the file and the row);
** SQ_ERR_CONFLICT for rows faster than the hardware allows or rows that
** cannot tell the figures apart; SQ_ERR_RANGE when the fit fails
** numerically; SQ_ERR_NOMEM. */
int sq_cost_calibrate(const sq_cost_measurements *ms, const char *file,
                      const sq_cost_platform *p0, const sq_scheme *base, int system,
                      const char *out, sq_cost_calibration *cal, sq_error *err);

/* Writes the name of the i-th built-in file of a kind (in the order of the
** build) into name[0..len): SQ_OK, SQ_ERR_NOTFOUND past the last,
** SQ_ERR_RANGE when len is too short. */
int sq_cost_builtin_name(sq_cost_file_kind kind, size_t i, char *name, size_t len);

SQ_END_DECLS
/* ------------------------------------------------------------------------ */
/* Writers of the results (print.c): what `shardq model` prints.           */
/* ------------------------------------------------------------------------ */

#include <stdio.h>

/* One prediction as a table, a sweep as speedups by GPU count, or either as
** JSON; quant names where the quantization throughput came from. */
void sq_cost_print_point(FILE *f, const sq_cost_study *st, const char *quant,
                         const sq_cost_point *pt);
void sq_cost_print_sweep(FILE *f, const sq_cost_study *st, const char *quant,
                         const sq_cost_point *pts, int n);
void sq_cost_print_json(FILE *f, const sq_cost_study *st, const char *quant,
                        const sq_cost_point *pts, int n);

/* A validation: its head, its rows beside the published ones, its tally. */
void sq_cost_print_validation_head(FILE *f, const char *table, const sq_cost_validation *v,
                                   const sq_cost_platform *p, int json);
void sq_cost_print_validation_rows(FILE *f, const sq_cost_validation *v,
                                   const sq_cost_validation_report *rep, int json);
void sq_cost_print_validation_tail(FILE *f, const sq_cost_validation_report *rep,
                                   const sq_cost_platform *p, int json);

/* A calibration from the measurements in file, written to out. */
void sq_cost_print_calibration(FILE *f, const sq_cost_calibration *cal,
                               const sq_cost_measurements *ms, const char *file,
                               const char *out);
void sq_cost_print_calibration_json(FILE *f, const sq_cost_calibration *cal,
                                    const sq_cost_measurements *ms, const char *out);

/* The built-in platforms and models, one line each. */
void sq_cost_print_builtins(FILE *f);

#endif /* SHARDQ_COST_H */
