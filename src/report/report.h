/*
** report.h -- `shardq report`, an application module beside the command
** (it is not part of libshardq): the writer of a report (write.c), the gnuplot
** scripts built into the binary, and a document written as Markdown and as
** HTML side by side, whose tables come straight from SQL.
**
** The scripts are analysis/NAME.gp, turned into C strings at build time
** (Makefile.am, src/report/scripts.c): the binary needs no installed data file to
** find, and the report writes the very scripts it ran into OUT/scripts/, so
** that a report directory says how every figure was drawn.
*/
#ifndef SQ_REPORT_H
#define SQ_REPORT_H

#include <stddef.h>
#include <stdint.h>

struct sqlite3;

/* Writes the report of the store db into the directory out (created when
** missing): the figures as out/NAME.png and .svg, their scripts in
** out/scripts/, out/report.md and out/index.html. filter is an SQL condition
** on the runs table (NULL or "": every run that is done). Progress goes to
** stdout unless quiet, errors to stderr ("shardq report: ..."). Returns
** CLI_OK (figures without data are skipped, and the report says why),
** CLI_USAGE for a filter that is not one condition, CLI_RUNTIME otherwise.
** `shardq report` is this; `shardq demo` calls it in-process. */
int report_write(const char *db, const char *out, const char *filter, int quiet);

/* What `shardq report` adds to report_write's arguments. */
typedef struct report_options {
    const char *filter;        /* --runs: SQL on runs (NULL: none) */
    const char *const *where;  /* --where KEY=VALUE filters (src/cli/where.h) */
    int nwhere;
    const char *formats;       /* --format: "png,svg" (NULL), any of png, svg, pdf */
    const char *style;         /* --style FILE: gnuplot lines loaded after the paper style */
    double query_timeout;      /* seconds a query of the filter may run (0: no limit) */
    int quiet;
    /* What the page opens with (shardq demo): the summary's lines, then the
    ** setup's ("model: ..."), each a list under its heading; none: left out. */
    const char *const *summary;
    int nsummary;
    const char *const *setup;
    int nsetup;
} report_options;
int report_write_opts(const char *db, const char *out, const report_options *o);
/* The default of --query-timeout: a filter is a condition, not a program. */
#define REPORT_QUERY_TIMEOUT 10.0

/* The text of script name, or NULL when no such script was built in. */
const char *report_script(const char *name);

/* A growing string. Allocation failures are remembered (oom) rather than
** checked at every call; the caller tests oom once at the end. */
typedef struct report_buf {
    char *p;
    size_t n, cap;
    int oom;
} report_buf;
void report_printf(report_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void report_buf_free(report_buf *b);

/* Why filter cannot be put inside "WHERE (...)" as one expression (a ';',
** a comment, an unbalanced parenthesis or quote), or NULL when it can. */
const char *report_filter_problem(const char *filter);

/* "3-17, 20" from a comma-separated list of run ids in any order (the
** group_concat of a query). */
void report_ranges(report_buf *out, const char *ids);

/* The SQL common table expressions that label each run as the figures do
** (analysis/NAME.gp, labels()): its preset, then the knobs matching cond whose
** values vary between the selected runs of that preset and kind. Needs a
** CTE r of run ids before it; defines lab(id, preset, label). */
void report_labels_sql(report_buf *sql, const char *cond);
/* An ORDER BY expression for a column of preset names: the order of 'shardq
** schemes' (analysis/NAME.gp, presets), others last. */
#define REPORT_ORDER(col)                                                                  \
    "instr(' baseline qw qwd ulq tlq tlqhs sdp4bit zeropp zeropp8 qsdp ' || " col " || ' ', ' ' || " \
    col " || ' ')"

/* The document, in Markdown and in a self-contained HTML page at once. */
typedef struct report_doc {
    report_buf md, html;
    unsigned formats; /* of the figures: 1 png, 2 svg, 4 pdf (0: png and svg) */
} report_doc;
void report_begin(report_doc *d, const char *title);
void report_heading(report_doc *d, const char *text);
void report_para(report_doc *d, const char *text);
/* A bulleted list of n items. */
void report_list(report_doc *d, const char *const *items, int n);
/* A figure drawn beside the document as NAME.png, .svg and .pdf (those of
** d->formats): the PNG shown (else the SVG), every file linked. */
void report_figure(report_doc *d, const char *name, const char *title, const char *caption);
/* A figure that was not drawn, and why. */
void report_skipped(report_doc *d, const char *title, const char *why);
/* A table of the rows of sql (column names from the SQL; a column named
** "runs" holds comma-separated run ids, shown as ranges). Returns the number
** of rows (0: nothing written but the caption's "none" line when none is
** not NULL), or -1 when sqlite fails (its message in err). */
int report_table(report_doc *d, struct sqlite3 *db, const char *sql, const char *caption,
                 const char *none, char *err, size_t errlen);
void report_end(report_doc *d);
void report_doc_free(report_doc *d);

#endif
