/*
** store_query.h -- the store's read queries for the programs above it: the
** runs a command selects (select.c), rows read through a cursor
** (cursor.c), and the tables and figures of `shardq report`
** (report_tables.c, figure_queries.c, figure_replay.c).
**
** Internal (src/store, not include/shardq), on purpose: these queries are
** shaped by the report's figures and tables and change with them, which is
** no interface for a user of libshardq to build on, so they stay out of
** libshardq.sym and the Python bindings. The shardq program and the tests
** reach them the way they reach every internal: through the library's
** convenience archive, libshardq_impl.la.
**
** Every statement is the store's own text with its values bound; the one
** text a caller gives, the --runs condition of sq_store_select_runs, is a
** user's SQL on purpose and is checked there. A set of runs travels as a
** JSON array of ids ("[3,4,17]") bound to ?1 and read with json_each; NULL
** stands for every run. Errors follow codec.h: SQ_OK or a negative kind,
** and a sentence in err.
*/
#ifndef SQ_STORE_QUERY_H
#define SQ_STORE_QUERY_H

#include "shardq/store.h"
#include "shardq/store_rows.h"

#include <stdint.h>

SQ_BEGIN_DECLS

/* The time limit sq_store_limit_queries put on s (0: none), to say it. */
double sq_store_query_limit(const sq_store *s);

/* ------------------------------------------------------------------------ */
/* The report's tables                                                      */
/* ------------------------------------------------------------------------ */

typedef enum sq_report_table {
    SQ_REPORT_RUNS,   /* kind, done runs, runs */
    SQ_REPORT_ERRORS, /* per scheme of the replays: error, SNR, bias per path */
    SQ_REPORT_BITS,   /* per scheme: bits sent on each link level */
    SQ_REPORT_LOSSES, /* per scheme of the training runs: final losses */
    SQ_REPORT_BENCH,  /* the latest bench run at its largest size and threads */
    SQ_REPORT_MODEL   /* the latest model run at each scheme's most GPUs */
} sq_report_table;

/* One read transaction for the tables (each sees the same state of the
** file), with the SQL function they use (report_sqrt) defined; end closes
** it. */
int sq_store_report_begin(sq_store *s, sq_error *err);
int sq_store_report_end(sq_store *s, sq_error *err);
/* The rows of table t over the done runs among ids (NULL: every run), the
** names of its columns the table's headings (a column "runs" holds the
** comma-separated ids of a row's runs). */
int sq_store_report_table(sq_store *s, sq_report_table t, const char *ids, sq_store_cursor **out,
                          sq_error *err);

/* ------------------------------------------------------------------------ */
/* The report's figures                                                     */
/* ------------------------------------------------------------------------ */

/* The queries of each figure of analysis/NAME.gp, over the done runs among
** the ids (figure_queries.c, figure_replay.c say what each returns). A
** "per path" query reads the path of its knobs. */
typedef enum sq_figure_query {
    /* error-bits, per path: the series (label), every point (label, x,
    ** err, low, high), the front (label, x, err); both paths: the runs
    ** drawn, those stored before bits_per_param (id) */
    SQ_FIG_ERROR_BITS_SERIES,
    SQ_FIG_ERROR_BITS_EVERY,
    SQ_FIG_ERROR_BITS_FRONT,
    SQ_FIG_ERROR_BITS_DRAWN,
    SQ_FIG_ERROR_BITS_OLD,
    /* error-group, per path: each line's label, bit width and scheme in
    ** the order of the lines; the bit widths; the schemes; the points
    ** (label, group, err, bits, last, low, high); both paths: the runs */
    SQ_FIG_ERROR_GROUP_LINES,
    SQ_FIG_ERROR_GROUP_LINE_BITS,
    SQ_FIG_ERROR_GROUP_LINE_SCHEMES,
    SQ_FIG_ERROR_GROUP_BITS,
    SQ_FIG_ERROR_GROUP_SCHEMES,
    SQ_FIG_ERROR_GROUP_POINTS,
    SQ_FIG_ERROR_GROUP_DRAWN,
    /* hadamard: the runs; the transform sizes ("32/64"); the count of
    ** configurations; per configuration (name, err off, err on, low, high,
    ** low, high); the change per series and group (series, group, change,
    ** low, high); the series */
    SQ_FIG_HADAMARD_DRAWN,
    SQ_FIG_HADAMARD_SIZES,
    SQ_FIG_HADAMARD_CONFIGS,
    SQ_FIG_HADAMARD_TABLE,
    SQ_FIG_HADAMARD_CHANGE,
    SQ_FIG_HADAMARD_SERIES,
    /* bias, per path: whether its schemes are too many (then pooled), the
    ** series, the runs (label, mean signed, mse); both paths: the runs */
    SQ_FIG_BIAS_POOL,
    SQ_FIG_BIAS_SERIES,
    SQ_FIG_BIAS_ROWS,
    SQ_FIG_BIAS_DRAWN,
    /* bytes: the runs; whether each preset is drawn at its most-run
    ** configuration; the count of bars; per bar (label, weight and grad on
    ** intra-node, then on inter-node links) */
    SQ_FIG_BYTES_DRAWN,
    SQ_FIG_BYTES_MODAL,
    SQ_FIG_BYTES_BARS,
    SQ_FIG_BYTES_TABLE,
    /* loss: the runs; per run (id, name, preset); the last step; the
    ** training loss's moving mean (run, step, mean: knobs window and from)
    ** and the validation loss (run, step, loss: knob from) */
    SQ_FIG_LOSS_DRAWN,
    SQ_FIG_LOSS_RUNS,
    SQ_FIG_LOSS_MAX_STEP,
    SQ_FIG_LOSS_TRAIN,
    SQ_FIG_LOSS_VAL,
    /* bench: the count of bench runs with results; the latest (id); its
    ** largest thread count; where it ran; its operations; per op and size
    ** (op, MB, GB/s, std, slow); the count of noisy figures; the copy
    ** (MB, GB/s) */
    SQ_FIG_BENCH_COUNT,
    SQ_FIG_BENCH_RUN,
    SQ_FIG_BENCH_THREADS,
    SQ_FIG_BENCH_WHERE,
    SQ_FIG_BENCH_OPS,
    SQ_FIG_BENCH_ROWS,
    SQ_FIG_BENCH_NOISY,
    SQ_FIG_BENCH_COPY,
    /* speedup: the count of model runs with speedups; the latest (id); its
    ** schemes; per scheme and GPU count (scheme, GPUs, speedup); its model
    ** and platform */
    SQ_FIG_SPEEDUP_COUNT,
    SQ_FIG_SPEEDUP_RUN,
    SQ_FIG_SPEEDUP_SCHEMES,
    SQ_FIG_SPEEDUP_ROWS,
    SQ_FIG_SPEEDUP_MODEL,
    SQ_FIG_SPEEDUP_PLATFORM
} sq_figure_query;

enum { SQ_FIG_GRAD, SQ_FIG_WEIGHT };

/* What a query takes besides the ids (NULL: the defaults, zeros). */
typedef struct sq_figure_knobs {
    int path;       /* SQ_FIG_GRAD or SQ_FIG_WEIGHT, of a per-path query */
    int pool;       /* bias: the runs of a preset that differ only in bits
                    ** and group size pooled into one series */
    int64_t window; /* loss: the moving mean's window, in steps (>= 1) */
    int64_t from;   /* loss: the first step drawn */
} sq_figure_knobs;

/* The rows of query q. SQ_ERR_ARG for a q out of range, else as the
** cursor. */
int sq_store_figure_query(sq_store *s, sq_figure_query q, const char *ids,
                          const sq_figure_knobs *k, sq_store_cursor **out, sq_error *err);

SQ_END_DECLS
#endif /* SQ_STORE_QUERY_H */
