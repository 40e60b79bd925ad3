/*
** figdata.h -- what a figure's gnuplot script draws from, written by
** shardq: the rows of its queries as tab-separated files and its scalars as
** a file of escaped assignments. gnuplot never reads the database and never
** runs a program: every value it sees is data.
**
** A figure NAME gets, in the data directory (OUT/data/ of a report):
**   NAME-PART.tsv   the rows of one query, one line per row, fields
**                   separated by tabs, NULL as an empty field;
**   NAME-text.tsv   its text values, one a line, each after a '=';
**   NAME.vars       what the script loads: `VAR = NUMBER`, `array VAR[N]`
**                   and `stats` commands that read each text value from
**                   NAME-text.tsv into its variable.
** No stored text is ever gnuplot text: gnuplot's parser expands @macros
** and treats quotes in ways no escaping survives for sure, so text reaches
** it only through its data reader. A field there is data, but the reader
** has no escape for '"' (it cuts a field at one) nor for a tab or a line
** break: those become '' and blanks, in every file alike, so that a label
** read from a table and the same label of the vars compare equal. The
** scripts set no comment character, so a field may begin with '#'.
**
** Every query is bound to the selection: ?1 is the JSON array of the run
** ids the report's filter selected, or NULL for every run (FIG_WITHIN).
*/
#ifndef SQ_REPORT_FIGDATA_H
#define SQ_REPORT_FIGDATA_H

#include "report/report.h"

#include <stddef.h>

struct sqlite3;

typedef struct fig_data {
    struct sqlite3 *db;
    const char *ids;  /* JSON array of the selected run ids, NULL: every run */
    const char *dir;  /* the data directory */
    const char *name; /* the figure */
    report_buf vars;  /* the text of NAME.vars */
    report_buf text;  /* the text of NAME-text.tsv */
    long ntext;       /* its lines */
    int failed;       /* a query or a write failed (said on stderr) */
} fig_data;

/* A condition on runs.id: within the runs the report selected. */
#define FIG_WITHIN "(?1 IS NULL OR runs.id IN (SELECT value FROM json_each(?1)))"

/* SQL of the 0.975 quantile of Student's t with df (a column) degrees of
** freedom: exact to df 9, then 1.96 + 2.5/df (within 1%). */
#define FIG_T975                                                                                \
    "CASE WHEN df = 1 THEN 12.71 WHEN df = 2 THEN 4.303 WHEN df = 3 THEN 3.182 WHEN df = 4"     \
    " THEN 2.776 WHEN df = 5 THEN 2.571 WHEN df = 6 THEN 2.447 WHEN df = 7 THEN 2.365 WHEN"    \
    " df = 8 THEN 2.306 WHEN df = 9 THEN 2.262 ELSE 1.96 + 2.5 / df END"

/* The collective of a path, "grad" or "weight", as the bytes table names it. */
const char *fig_collective(const char *path);

/* "WITH r AS (the selected replay runs), lk AS (id, link, hops), ": per run,
** the link level path's collective was measured on (inter when its
** inter-node hop sent anything, else intra) and how many hops sent. */
void fig_replay_hops(report_buf *b, const char *path);
/* report_labels_sql over the knobs of path other than bits and group size
** (the figures that draw against those): needs r, defines lab. */
void fig_labels_but_size(report_buf *b, const char *path);

/* "SELECT id FROM runs WHERE status = 'done' AND (cond) AND FIG_WITHIN":
** the done runs a figure may draw. */
void fig_selwhere(report_buf *b, const char *cond);
/* The same for the runs of one kind (a literal of the caller's). */
void fig_sel(report_buf *b, const char *kind);

/* The rows of sql into DIR/NAME-part.tsv. Returns the number of rows, or
** -1 (said, and f->failed set). sql is freed. */
long fig_table(fig_data *f, const char *part, report_buf *sql);
/* The first column of the first row of sql (text, '' for none or NULL) as
** the gnuplot string var. Returns 0, or -1 (said). sql is freed. */
int fig_text(fig_data *f, const char *var, report_buf *sql);
/* The same as a number (0 for none or NULL), also into *value (unless NULL). */
int fig_number(fig_data *f, const char *var, report_buf *sql, double *value);
/* The ids of the first column of sql as ranges, "3-17, 20" ('' for none). */
int fig_ranges(fig_data *f, const char *var, report_buf *sql);
/* The first column of every row of sql as the gnuplot array var, and its
** length as var_n (an array of at least one element: gnuplot has no empty
** arrays). */
int fig_texts(fig_data *f, const char *var, report_buf *sql);
/* The first nvar columns of every row of sql as the arrays var[0..nvar-1]
** (in step, row by row), and their length as var[0]_n. */
#define FIG_MAX_COLUMNS 4
int fig_columns(fig_data *f, const char *const *var, int nvar, report_buf *sql);
/* A string var of the caller's. */
void fig_set(fig_data *f, const char *var, const char *text);
void fig_set_number(fig_data *f, const char *var, double v);

/* Writes DIR/NAME.vars; 0, or -1 (said). */
int fig_write_vars(fig_data *f);

/* Each figure's queries (src/report/fig_NAME.c): they fill f and return 0,
** or -1 when a query failed (said). */
int figdata_error_bits(fig_data *f);
int figdata_error_group(fig_data *f);
int figdata_hadamard(fig_data *f);
int figdata_bias(fig_data *f);
int figdata_bytes(fig_data *f);
int figdata_loss(fig_data *f);
int figdata_bench(fig_data *f);
int figdata_speedup(fig_data *f);

#endif
