/*
** shardq/store_rows.h -- reading the store: typed rows and cursors.
**
** What `shardq db`, the bench's cost figures and the sweep's resume read
** from a store (store.h), so that no caller writes SQL or includes
** sqlite3.h: rows of a fixed shape come as structs, rows whose columns
** vary (a table, a user's SELECT, `db export --wide`) through a cursor
** that gives each value with its type.
**
** Every query binds its values as parameters; a table or column name that
** a caller chooses is looked up in a fixed table of the store's names.
** Functions return SQ_OK (or, for a step, 1 for a row) or a negative
** sq_status with a sentence in err that names the file: SQ_ERR_IO for a
** failed read ("shardq.db: cannot read: ..."), SQ_ERR_INTERRUPTED for a
** statement stopped by sq_store_limit_queries ("shardq.db: a query ran
** past its time limit"), SQ_ERR_NOMEM, SQ_ERR_ARG for a NULL or unknown
** argument.
*/
#ifndef SHARDQ_STORE_ROWS_H
#define SHARDQ_STORE_ROWS_H

#include "shardq/store.h"

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

SQ_BEGIN_DECLS

/* ------------------------------------------------------------------------ */
/* Opening a store to read                                                  */
/* ------------------------------------------------------------------------ */

/* Opens path read-only (sq_store_open with readonly = 1) and refuses, with
** SQ_ERR_FORMAT, a file without shardq's schema ("PATH: not a shardq store
** (no schema; 'shardq db init' creates one)"). The connection gets three
** SQL functions that queries of the store and a user's SELECT may call:
** sq_basename(path) (its last component), sq_duration(seconds) ("12.3s",
** "4m05s", "2h10m"; "?" for a negative or infinite one) and sq_status(status,
** host, pid, pid_start, boot_id) (the status, or 'interrupted' for a
** 'running' run whose process on this host is gone). */
int sq_store_open_reader(const char *path, sq_store **out, sq_error *err);

/* Begins a read transaction that lasts until sq_store_close: every query
** after it sees the same state of the file. */
int sq_store_read_begin(sq_store *s, sq_error *err);

/* ------------------------------------------------------------------------ */
/* Cursors                                                                  */
/* ------------------------------------------------------------------------ */

/* The type of a value, as SQLite stores it. */
enum {
    SQ_STORE_NULL = 0,
    SQ_STORE_INTEGER = 1,
    SQ_STORE_REAL = 2,
    SQ_STORE_TEXT = 3,
    SQ_STORE_BLOB = 4
};

/* A value bound to a query's parameter: type SQ_STORE_NULL, _INTEGER (i),
** _REAL (d) or _TEXT (text; NULL binds NULL). */
typedef struct sq_store_value {
    int type;
    int64_t i;
    double d;
    const char *text;
} sq_store_value;

typedef struct sq_store_cursor sq_store_cursor;

/* Opens the named query of the store with args[0..nargs) bound to its
** parameters ?1..?nargs. The names, each with a run id as its argument,
** and the columns shown of a run by `db show`:
**   run             the run's row and its seconds
**   run.metrics     per path the error statistics of its steps
**   run.bytes       its bytes per collective and link
**   run.timings     its timings
**   run.netbench    per link level and collective its sizes, the time of
**                   the smallest and the busbw of the largest
** Each query is the one of the file's schema version. An unknown name, or
** nargs that is not the query's count, is SQ_ERR_ARG. */
int sq_store_query(sq_store *s, const char *name, const sq_store_value *args, int nargs,
                   sq_store_cursor **out, sq_error *err);

/* The next row: 1 when there is one, 0 at the end, a negative kind on a
** failure (the cursor must then be closed). */
int sq_store_cursor_step(sq_store_cursor *c, sq_error *err);
int sq_store_cursor_columns(const sq_store_cursor *c);
/* Column i's name (from the query, valid until the cursor is closed). */
const char *sq_store_cursor_name(const sq_store_cursor *c, int i);
/* Of the current row: column i's type (SQ_STORE_*) and value. text gives
** any value as text (NULL for NULL; a blob's bytes as they are), with its
** length in bytes in *n when n is not NULL; blob gives its bytes. What
** they return is valid until the next step. */
int sq_store_cursor_type(const sq_store_cursor *c, int i);
int64_t sq_store_cursor_int(const sq_store_cursor *c, int i);
double sq_store_cursor_double(const sq_store_cursor *c, int i);
const char *sq_store_cursor_text(const sq_store_cursor *c, int i, size_t *n);
const void *sq_store_cursor_blob(const sq_store_cursor *c, int i, size_t *n);
/* Ends the query (NULL: nothing). */
void sq_store_cursor_close(sq_store_cursor *c);

/* ------------------------------------------------------------------------ */
/* The runs, one summary row each                                           */
/* ------------------------------------------------------------------------ */

/* Which runs: those whose status as shown (sq_status: 'interrupted'
** included), kind and sweep equal these (NULL: any) and, when ids is not
** NULL, whose id is in that JSON array of run ids. */
typedef struct sq_run_filter {
    const char *status, *kind, *sweep;
    const char *ids;
} sq_run_filter;

/* One run as `db list` shows it. Strings are NULL where the run has none
** and are valid until the next step; reals are NaN where stored NULL. */
typedef struct sq_run_summary {
    int64_t id;
    const char *status;       /* as shown: 'interrupted' for a run whose process is gone */
    const char *kind, *key, *sweep, *preset, *scheme, *topo, *device;
    const char *trace;        /* the path */
    const char *trace_name;   /* its last component */
    int64_t seed;
    const char *started;      /* UTC ISO 8601 */
    const char *started_text; /* "YYYY-MM-DD HH:MM:SS" */
    const char *ended;
    double seconds;           /* ended - started, to the millisecond */
    const char *duration;     /* seconds for people (sq_duration) */
    double grad_rel_l2;       /* the mean relative L2 error of the steps of a path */
    double weight_rel_l2;
    const char *error;
} sq_run_summary;

/* The runs of f (NULL: all) in the order of their ids, into *out; each
** sq_store_runs_next gives the next: 1 with *row filled, 0 at the end, a
** negative kind on a failure. Close the cursor with sq_store_cursor_close. */
int sq_store_runs_open(sq_store *s, const sq_run_filter *f, sq_store_cursor **out,
                       sq_error *err);
int sq_store_runs_next(sq_store_cursor *c, sq_run_summary *row, sq_error *err);

/* ------------------------------------------------------------------------ */
/* A run's rows of a fixed shape                                            */
/* ------------------------------------------------------------------------ */

/* Whether run exists (*found 1 or 0). */
int sq_store_run_exists(sq_store *s, int64_t run, int *found, sq_error *err);

/* One param of a run (the params table); value NULL where stored NULL. */
typedef struct sq_store_param {
    char *key;
    char *value;
} sq_store_param;
/* The run's params ordered by key, malloc'd into *out (*n of them; NULL
** when none); sq_store_params_free frees them. */
int sq_store_run_params(sq_store *s, int64_t run, sq_store_param **out, size_t *n,
                        sq_error *err);
void sq_store_params_free(sq_store_param *p, size_t n);

/* How many tensor_stats rows the run has, and over how many tensors. */
typedef struct sq_store_tensor_count {
    int64_t rows;
    int64_t tensors;
} sq_store_tensor_count;
int sq_store_run_tensor_count(sq_store *s, int64_t run, sq_store_tensor_count *out,
                              sq_error *err);

/* The run's netbench rows (store.h, sq_netbench_row) ordered by level
** (intra, inter, all), collective (allgather, reducescatter, then others)
** and size, malloc'd into *out (*n; none in a file older than schema
** version 6); sq_store_netbench_free frees them with their strings. */
int sq_store_run_netbench(sq_store *s, int64_t run, sq_netbench_row **out, size_t *n,
                          sq_error *err);
void sq_store_netbench_free(sq_netbench_row *rows, size_t n);

/* ------------------------------------------------------------------------ */
/* Exports                                                                  */
/* ------------------------------------------------------------------------ */

/* The rows of table (a name of sq_store_tables, else SQ_ERR_NOTFOUND) in
** the order of its primary key; ids (a JSON array of run ids, NULL: all)
** keeps those of the runs it names. */
int sq_store_export_table(sq_store *s, const char *table, const char *ids,
                          sq_store_cursor **out, sq_error *err);
/* The runs of ids (NULL: all) with one column per param ("wide"): after
** the columns of runs that describe a run (not key, config, recipe, pid,
** pid_start, boot_id, heartbeat) and their mean grad_rel_l2 and
** weight_rel_l2, each param's values cast to INTEGER, REAL or TEXT by what
** every run holds (all integers, all numbers, else), so that a data frame
** reads them as they are. */
int sq_store_export_wide(sq_store *s, const char *ids, sq_store_cursor **out, sq_error *err);
/* The rows of one read-only SQL statement a user gives. SQ_ERR_SPEC when
** it is not one, with a sentence that follows the statement's text in a
** message: "is neither a table (runs, params, ...) nor a valid statement:
** WHY" (an invalid or empty statement) or "refused: WHY" (more than one
** statement, one that would write, one that returns no rows). */
int sq_store_export_sql(sq_store *s, const char *sql, sq_store_cursor **out, sq_error *err);

/* ------------------------------------------------------------------------ */
/* Selecting runs                                                           */
/* ------------------------------------------------------------------------ */

/* The ids of the runs that match runs_sql and every filter of where[0 ..
** nwhere), as a JSON array in ascending order ("[3,4,17]", "[]" for none)
** into *ids_json (malloc'd; the caller frees it).
**
** runs_sql is the user's condition on the runs table (`report --runs`;
** NULL: every run): it must be one expression (no ';', no comment,
** balanced parentheses and quotes) that SQLite compiles against runs, and
** it runs on the store's own connection (extension loading off). A filter
** is KEY=VALUE:
**   - KEY a column of runs (id, kind, status, sweep, grid, preset, scheme,
**     topo, device, trace, seed, host, version): that column equals VALUE;
**     scheme=NAME without '=' in NAME matches the preset the scheme started
**     from (scheme=sdp4bit), scheme=TEXT with knobs the canonical text;
**   - KEY a param a run stored (every scheme knob, grad.inter.bits, ...;
**     trace.*, model.*, train.*, paths): that param equals VALUE;
**   - KEY a shorthand A.B of params A.X.B (grad.bits for grad.intra.bits
**     and grad.inter.bits, as a recipe writes it): every one of them
**     equals VALUE.
** Numbers compare as numbers (grad.bits=4 matches "4" and "4.0"), other
** values as exact text. Each filter is a fixed statement with its key and
** value bound; the sets are intersected here.
**
** Statements run under the caller's sq_store_limit_queries, if any.
** SQ_ERR_SPEC: runs_sql is not one condition or fails ("--runs: 'TEXT':
** ..."), a filter is not KEY=VALUE or names nothing the store holds
** ("--where: 'ITEM': ..."); SQ_ERR_INTERRUPTED: past the time limit
** ("... stopped after N s (--query-timeout raises the limit)");
** SQ_ERR_IO: a failed read; SQ_ERR_NOMEM. The sentences carry no
** "shardq CMD: " prefix: the caller adds it. */
int sq_store_select_runs(sq_store *s, const char *runs_sql, const char *const *where, int nwhere,
                         char **ids_json, sq_error *err);


/* ------------------------------------------------------------------------ */
/* Bench figures and sweep runs                                             */
/* ------------------------------------------------------------------------ */

/* The quantization figure of the newest finished bench run with quantize
** or dequantize rows: their mean GB/s at its largest size and, there, its
** largest thread count. SQ_ERR_NOTFOUND when there is none (or the file is
** older than schema version 3). */
typedef struct sq_store_quant_figure {
    int64_t run;
    double gb_per_s;
    uint64_t elements;
    int threads;
    char device[128];  /* the run's device, "?" when it has none */
} sq_store_quant_figure;
int sq_store_bench_quant_figure(sq_store *s, sq_store_quant_figure *out, sq_error *err);

/* Calls fn with the key of every 'done' run of sweep (until fn returns
** nonzero). SQ_ERR_FORMAT when the query cannot be read. */
int sq_store_sweep_done_keys(sq_store *s, const char *sweep,
                             int (*fn)(void *ctx, const char *key), void *ctx, sq_error *err);

/* A run left 'running' (the runs table), valid during the call to fn. */
typedef struct sq_store_running {
    int64_t id;
    const char *host;     /* NULL when unknown */
    int64_t pid;
    int64_t pid_start;    /* < 0: unknown */
    const char *boot_id;  /* NULL when unknown */
    const char *started;  /* NULL when unknown */
} sq_store_running;
/* Calls fn with every run of sweep whose status is 'running', by id (until
** fn returns nonzero). SQ_ERR_FORMAT when the query cannot be read. */
int sq_store_sweep_running(sq_store *s, const char *sweep,
                           int (*fn)(void *ctx, const sq_store_running *run), void *ctx,
                           sq_error *err);

/* ------------------------------------------------------------------------ */
/* Writing a cursor's rows (cursor_write.c)                                 */
/* ------------------------------------------------------------------------ */

/* The rows of c from its next one on, under its column names. Each
** returns SQ_OK or the failure of a step in err (SQ_ERR_NOMEM for a
** table that cannot grow); a failed write to f is the caller's to see
** (ferror). */

/* As CSV (RFC 4180): lines end in CRLF, a field holding a comma, a quote
** or a line break is quoted with its quotes doubled, NULL is empty, a
** real has 17 significant digits, a blob is hexadecimal digits. _to gives
** the bytes to fn(ctx, bytes, n) instead of a stream. */
typedef void sq_store_put_fn(void *ctx, const void *bytes, size_t n);
int sq_store_cursor_write_csv(sq_store_cursor *c, FILE *f, sq_error *err);
int sq_store_cursor_write_csv_to(sq_store_cursor *c, sq_store_put_fn *fn, void *ctx,
                                 sq_error *err);

/* As a JSON array of objects keyed by the column names: an integer, a
** real (%.17g; null for +-Inf and NaN), a string (sq_json_str), or null
** for NULL and a blob. _row writes the current row alone. */
int sq_store_cursor_write_json(sq_store_cursor *c, FILE *f, sq_error *err);
void sq_store_cursor_write_json_row(const sq_store_cursor *c, FILE *f);
/* A real as those rows write it. */
void sq_store_json_real(FILE *f, double v);

/* As an aligned text table (sq_text_table_print), each line after indent,
** printed only when there is a row; *rows gets their count. */
int sq_store_cursor_write_table(sq_store_cursor *c, FILE *f, const char *indent, int *rows,
                                sq_error *err);
/* Column i of the current row as a table shows it: '-' for NULL, reals
** with four significant digits, text and blobs as they are. */
void sq_store_cursor_cell(const sq_store_cursor *c, int i, char *buf, size_t len);

/* A text table whose rows are kept until printed, to size the columns:
** cells row-major, row 0 the header; a column whose numeric[] is set
** aligns right. Zero-initialise it and set ncols (<= SQ_TEXT_TABLE_COLS);
** _add appends the next cell (SQ_ERR_NOMEM), _print separates columns by
** two blanks with no trailing blanks after the last, _free frees the cells. */
#define SQ_TEXT_TABLE_COLS 24
typedef struct sq_text_table {
    int ncols;
    char **cell;
    size_t n, cap;
    int numeric[SQ_TEXT_TABLE_COLS];
} sq_text_table;
int sq_text_table_add(sq_text_table *t, const char *text, sq_error *err);
void sq_text_table_print(const sq_text_table *t, FILE *f, const char *indent);
void sq_text_table_free(sq_text_table *t);

/* ------------------------------------------------------------------------ */
/* The runs and one run as `db list` and `db show` print them (run_write.c) */
/* ------------------------------------------------------------------------ */

/* The runs of c (sq_store_runs_open) from the next on: a table with one
** line each under a header (id, status, kind, preset, topo, seed, trace,
** started, duration, grad_rel_l2, weight_rel_l2), printed only when there
** is a run, *rows getting their count; or a JSON array of objects with
** every member of sq_run_summary but trace_name, started_text and
** duration. SQ_OK or the failure in err. */
int sq_store_runs_write_table(sq_store_cursor *c, FILE *f, int *rows, sq_error *err);
int sq_store_runs_write_json(sq_store_cursor *c, FILE *f, sq_error *err);

/* Run id (it must exist: sq_store_run_exists) in full: its row, params,
** error statistics, tensor stats, bytes, timings and, where it has any,
** netbench rows, as sections of text or one JSON object with its line
** break. Call it inside sq_store_read_begin so that every section sees the
** same state. SQ_ERR_NOTFOUND when there is no such run. */
int sq_store_run_write(sq_store *s, int64_t id, int json, FILE *f, sq_error *err);

SQ_END_DECLS
#endif /* SHARDQ_STORE_ROWS_H */
