/*
** report.h -- `shardq report`, an application module beside the command
** (it is not part of libshardq): the writer of a report (write.c), the gnuplot
** scripts built into the binary, and a document written as Markdown and as
** HTML side by side.
**
** It sits above the store and below the command: every row it shows or
** draws comes from the store's queries (src/store/store_query.h: the run
** selection, the tables, the figures' queries, read through a cursor), and
** it writes them out as text itself. It holds no SQL and knows nothing of
** the command line; `shardq report` (src/cli/cmd_report.c) turns its
** status into the exit status.
**
** The scripts are analysis/NAME.gp, turned into C strings at build time
** (Makefile.am, src/report/scripts.c): the binary needs no installed data file to
** find, and the report writes the very scripts it ran into OUT/scripts/, so
** that a report directory says how every figure was drawn.
*/
#ifndef SQ_REPORT_H
#define SQ_REPORT_H

#include "shardq/codec.h"
#include "store/store_query.h"

#include <stddef.h>
#include <stdint.h>

/* What `shardq report` is given besides the database and the directory. */
typedef struct report_options {
    const char *filter;        /* --runs: SQL on runs (NULL: none) */
    const char *const *where;  /* --where KEY=VALUE filters (store_query.h) */
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

/* Writes the report of the store db into the directory out (created when
** missing): the figures as out/NAME.png and .svg, their scripts in
** out/scripts/, out/report.md and out/index.html, of the done runs that
** match o->filter and o->where (store_query.h, sq_store_select_runs; none:
** every done run). Progress goes to stdout unless o->quiet. Returns SQ_OK
** (figures without data are skipped, and the report says why), or:
**   SQ_ERR_SPEC  an option that cannot be used (--format, --style, a
**                --runs that is not one condition, a --where that names
**                nothing), the sentence naming it ("--runs: 'x': ...");
**   another kind for what failed (the store, gnuplot missing, a directory
**                or file that cannot be written), the sentence naming it.
** A figure or table that fails does not stop the others: each is said on
** stderr as it happens ("shardq report: NAME: ..."), and the report ends
** SQ_ERR_IO with an empty sentence, nothing more to say. `shardq report`
** is this; `shardq demo` calls it in-process. */
int report_write_opts(const char *db, const char *out, const report_options *o, sq_error *err);
/* The default of --query-timeout: a filter is a condition, not a program. */
#define REPORT_QUERY_TIMEOUT 10.0

/* Writes data[0 .. n) as the file path, whole or not at all (trace/wfile.h:
** a failed write leaves no half-written file, nor damages the one it would
** replace); SQ_ERR_IO naming the file. */
int report_write_file(const char *path, const void *data, size_t n, sq_error *err);

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

/* "3-17, 20" from a comma-separated list of run ids in any order (the
** group_concat of a query). */
void report_ranges(report_buf *out, const char *ids);

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
/* A table of the rows of the cursor c (column names its headings; a
** column named "runs" holds comma-separated run ids, shown as ranges).
** Returns the number of rows (0: nothing written but the caption's "none"
** line when none is not NULL), or the kind of the failed read (its
** sentence in err). */
int report_table(report_doc *d, sq_store_cursor *c, const char *caption, const char *none,
                 sq_error *err);
void report_end(report_doc *d);
void report_doc_free(report_doc *d);

#endif
