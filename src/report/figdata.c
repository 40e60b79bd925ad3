/*
** figdata.c -- the data files a figure's script reads (figdata.h): the rows
** of the store's queries over the selection and their text written as
** tab-separated data, their numbers and the commands that read the text as
** NAME.vars.
*/
#include "report/figdata.h"
#include "shardq/codec.h"
#include "trace/wfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A text field of a .tsv file: nothing in it may end the field, the line
** or start a quoted field (figdata.h). */
static void tsv_text(report_buf *b, const unsigned char *s)
{
    for (; *s; s++) {
        if (*s == '"')
            report_printf(b, "''");
        else if (*s < 0x20 || *s == 0x7f)
            report_printf(b, " ");
        else
            report_printf(b, "%c", *s);
    }
}

static void tsv_value(report_buf *b, const sq_store_cursor *c, int i)
{
    switch (sq_store_cursor_type(c, i)) {
    case SQ_STORE_NULL: break;
    case SQ_STORE_INTEGER: report_printf(b, "%lld", (long long)sq_store_cursor_int(c, i)); break;
    case SQ_STORE_REAL: report_printf(b, "%.17g", sq_store_cursor_double(c, i)); break;
    default: {
        const char *t = sq_store_cursor_text(c, i, NULL);
        if (t) tsv_text(b, (const unsigned char *)t);
        else b->oom = 1;
    }
    }
}

static void query_error(fig_data *f, const char *what, const sq_error *err)
{
    if (err->status == SQ_ERR_NOMEM)
        fprintf(stderr, "shardq report: out of memory\n");
    else
        fprintf(stderr, "shardq report: %s: the query of %s failed: %s\n", f->name, what,
                err->status == SQ_ERR_INTERRUPTED ? "interrupted (it ran past the query time limit)"
                                                  : sq_error_message(err));
    f->failed = 1;
}

/* The rows of query q over the selection, or NULL (said). */
static sq_store_cursor *query(fig_data *f, const char *what, sq_figure_query q,
                        const sq_figure_knobs *k)
{
    sq_store_cursor *c;
    sq_error err = {0};
    if (sq_store_figure_query(f->store, q, f->ids, k, &c, &err)) {
        query_error(f, what, &err);
        return NULL;
    }
    return c;
}

/* Closes c after its last step, whose outcome was rc (0: the end of the
** rows); 0, or -1 (said). */
static int end_of_rows(fig_data *f, const char *what, sq_store_cursor *c, int rc, const sq_error *err)
{
    sq_store_cursor_close(c);
    if (rc == 0) return 0;
    query_error(f, what, err);
    return -1;
}

int report_write_file(const char *path, const void *data, size_t n, sq_error *err)
{
    sq_wfile w;
    int rc = sq_wfile_open(&w, path, err);
    if (rc) return rc;
    sq_wfile_write(&w, data, n);
    return sq_wfile_commit(&w, err);
}

static int write_file(fig_data *f, const char *file, const report_buf *text)
{
    if (text->oom) {
        fprintf(stderr, "shardq report: out of memory\n");
        f->failed = 1;
        return -1;
    }
    char path[8192];
    if (snprintf(path, sizeof path, "%s/%s", f->dir, file) >= (int)sizeof path) {
        fprintf(stderr, "shardq report: %s/%s: the path is too long\n", f->dir, file);
        f->failed = 1;
        return -1;
    }
    sq_error err = {0};
    if (report_write_file(path, text->p ? text->p : "", text->n, &err) == SQ_OK) return 0;
    fprintf(stderr, "shardq report: %s\n", sq_error_message(&err));
    f->failed = 1;
    return -1;
}

long fig_table(fig_data *f, const char *part, sq_figure_query q, const sq_figure_knobs *k)
{
    sq_store_cursor *c = query(f, part, q, k);
    if (!c) return -1;
    report_buf rows = {0};
    long n = 0;
    int rc, nc = sq_store_cursor_columns(c);
    sq_error err = {0};
    while ((rc = sq_store_cursor_step(c, &err)) == 1) {
        for (int i = 0; i < nc; i++) {
            if (i) report_printf(&rows, "\t");
            tsv_value(&rows, c, i);
        }
        report_printf(&rows, "\n");
        n++;
    }
    if (end_of_rows(f, part, c, rc, &err)) {
        report_buf_free(&rows);
        return -1;
    }
    char file[512];
    snprintf(file, sizeof file, "%s-%s.tsv", f->name, part);
    int bad = write_file(f, file, &rows);
    report_buf_free(&rows);
    return bad ? -1 : n;
}

/* The first column of the first row as text into out ('' for none or
** NULL); with every, that of every row, comma-separated, as ids. */
static int first_column(fig_data *f, const char *what, sq_figure_query q,
                        const sq_figure_knobs *k, int every, report_buf *out)
{
    sq_store_cursor *c = query(f, what, q, k);
    if (!c) return -1;
    int rc;
    long n = 0;
    sq_error err = {0};
    while ((rc = sq_store_cursor_step(c, &err)) == 1) {
        if (every) {
            report_printf(out, "%s%lld", n ? "," : "", (long long)sq_store_cursor_int(c, 0));
        } else if (n == 0) {
            const char *t = sq_store_cursor_text(c, 0, NULL);
            report_printf(out, "%s", t ? t : "");
        }
        n++;
    }
    return end_of_rows(f, what, c, rc, &err);
}

/* Text reaches gnuplot only as data: each value is a line of NAME-text.tsv
** ("=" first, so that an empty value is a line too), and NAME.vars reads it
** into its variable with stats, whose `using` assigns strcol(1) without the
** "=". gnuplot's parser never sees the text, so neither a quote nor a
** backquote nor an @macro in it can mean anything. */
static void text_line(fig_data *f, const char *text)
{
    report_printf(&f->text, "=");
    tsv_text(&f->text, (const unsigned char *)text);
    report_printf(&f->text, "\n");
    f->ntext++;
}

#define READ_TEXT "stats data.\"/\".name.\"-text.tsv\" every ::%ld::%ld using "

void fig_set(fig_data *f, const char *var, const char *text)
{
    report_printf(&f->vars, READ_TEXT "(%s = strcol(1)[2:], 0) nooutput\n", f->ntext, f->ntext,
                  var);
    text_line(f, text);
}

void fig_set_number(fig_data *f, const char *var, double v)
{
    report_printf(&f->vars, "%s = %.17g\n", var, v);
}

int fig_text(fig_data *f, const char *var, sq_figure_query q, const sq_figure_knobs *k)
{
    report_buf v = {0};
    int rc = first_column(f, var, q, k, 0, &v);
    if (rc == 0) fig_set(f, var, v.p ? v.p : "");
    report_buf_free(&v);
    return rc;
}

int fig_number(fig_data *f, const char *var, sq_figure_query q, const sq_figure_knobs *k,
               double *value)
{
    report_buf v = {0};
    int rc = first_column(f, var, q, k, 0, &v);
    double x = rc == 0 && v.p ? strtod(v.p, NULL) : 0;
    if (rc == 0) fig_set_number(f, var, x);
    if (value) *value = x;
    report_buf_free(&v);
    return rc;
}

int fig_ranges(fig_data *f, const char *var, sq_figure_query q, const sq_figure_knobs *k)
{
    report_buf ids = {0}, r = {0};
    int rc = first_column(f, var, q, k, 1, &ids);
    if (rc == 0 && ids.p) report_ranges(&r, ids.p);
    if (rc == 0) fig_set(f, var, r.p ? r.p : "");
    report_buf_free(&ids);
    report_buf_free(&r);
    return rc;
}

int fig_columns(fig_data *f, const char *const *var, int nvar, sq_figure_query q,
                const sq_figure_knobs *k)
{
    sq_store_cursor *c = query(f, var[0], q, k);
    if (!c) return -1;
    if (nvar > FIG_MAX_COLUMNS || sq_store_cursor_columns(c) < nvar) {
        fprintf(stderr, "shardq report: %s: the query of %s has fewer columns than arrays\n",
                f->name, var[0]);
        sq_store_cursor_close(c);
        f->failed = 1;
        return -1;
    }
    /* a column's values are consecutive lines of NAME-text.tsv */
    report_buf col[FIG_MAX_COLUMNS] = {{0}};
    long n = 0;
    int rc;
    sq_error err = {0};
    while ((rc = sq_store_cursor_step(c, &err)) == 1) {
        for (int i = 0; i < nvar; i++) {
            const char *t = sq_store_cursor_text(c, i, NULL);
            report_printf(&col[i], "=");
            tsv_text(&col[i], (const unsigned char *)(t ? t : ""));
            report_printf(&col[i], "\n");
        }
        n++;
    }
    end_of_rows(f, var[0], c, rc, &err);
    for (int i = 0; i < nvar; i++) {
        if (rc == 0) {
            /* gnuplot has no empty arrays: one empty element then */
            report_printf(&f->vars, "array %s[%ld]\n", var[i], n ? n : 1);
            if (n)
                report_printf(&f->vars,
                              READ_TEXT "(%s[int($0) + 1] = strcol(1)[2:], 0) nooutput\n",
                              f->ntext, f->ntext + n - 1, var[i]);
            else
                report_printf(&f->vars, "%s[1] = \"\"\n", var[i]);
            report_printf(&f->text, "%s", col[i].p ? col[i].p : "");
            if (col[i].oom) f->text.oom = 1;
            f->ntext += n;
        }
        report_buf_free(&col[i]);
    }
    if (rc != 0) return -1;
    report_printf(&f->vars, "%s_n = %ld\n", var[0], n);
    return 0;
}

int fig_texts(fig_data *f, const char *var, sq_figure_query q, const sq_figure_knobs *k)
{
    return fig_columns(f, &var, 1, q, k);
}

int fig_write_vars(fig_data *f)
{
    char file[512];
    snprintf(file, sizeof file, "%s-text.tsv", f->name);
    if (write_file(f, file, &f->text)) return -1;
    snprintf(file, sizeof file, "%s.vars", f->name);
    return write_file(f, file, &f->vars);
}
