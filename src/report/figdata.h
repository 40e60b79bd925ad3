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
** Every query is the store's (store_query.h, sq_store_figure_query), bound
** to the selection: the JSON array of the run ids the report's filter
** selected, or NULL for every run. What is here turns its rows into files.
*/
#ifndef SQ_REPORT_FIGDATA_H
#define SQ_REPORT_FIGDATA_H

#include "report/report.h"

#include <stddef.h>

typedef struct fig_data {
    sq_store *store;
    const char *ids;  /* JSON array of the selected run ids, NULL: every run */
    const char *dir;  /* the data directory */
    const char *name; /* the figure */
    report_buf vars;  /* the text of NAME.vars */
    report_buf text;  /* the text of NAME-text.tsv */
    long ntext;       /* its lines */
    int failed;       /* a query or a write failed (said on stderr) */
} fig_data;

/* Each of these reads the rows of the store's query q (knobs k, NULL:
** none) over the selection. fig_table: the rows into DIR/NAME-part.tsv. Returns the number of rows, or -1
** (said, and f->failed set). */
long fig_table(fig_data *f, const char *part, sq_figure_query q, const sq_figure_knobs *k);
/* The first column of the first row (text, '' for none or NULL) as the
** gnuplot string var. Returns 0, or -1 (said). */
int fig_text(fig_data *f, const char *var, sq_figure_query q, const sq_figure_knobs *k);
/* The same as a number (0 for none or NULL), also into *value (unless NULL). */
int fig_number(fig_data *f, const char *var, sq_figure_query q, const sq_figure_knobs *k,
               double *value);
/* The ids of the first column as ranges, "3-17, 20" ('' for none). */
int fig_ranges(fig_data *f, const char *var, sq_figure_query q, const sq_figure_knobs *k);
/* The first column of every row as the gnuplot array var, and its length
** as var_n (an array of at least one element: gnuplot has no empty
** arrays). */
int fig_texts(fig_data *f, const char *var, sq_figure_query q, const sq_figure_knobs *k);
/* The first nvar columns of every row as the arrays var[0..nvar-1] (in
** step, row by row), and their length as var[0]_n. */
#define FIG_MAX_COLUMNS 4
int fig_columns(fig_data *f, const char *const *var, int nvar, sq_figure_query q,
                const sq_figure_knobs *k);
/* A string var of the caller's. */
void fig_set(fig_data *f, const char *var, const char *text);
void fig_set_number(fig_data *f, const char *var, double v);

/* Writes DIR/NAME.vars; 0, or -1 (said). */
int fig_write_vars(fig_data *f);

/* Each figure's data (src/report/fig_NAME.c): which of its queries fills
** which variable or file. They fill f and return 0, or -1 when a query
** failed (said). */
int figdata_error_bits(fig_data *f);
int figdata_error_group(fig_data *f);
int figdata_hadamard(fig_data *f);
int figdata_bias(fig_data *f);
int figdata_bytes(fig_data *f);
int figdata_loss(fig_data *f);
int figdata_bench(fig_data *f);
int figdata_speedup(fig_data *f);

#endif
