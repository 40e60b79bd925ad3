/*
** figdata.c -- the data files a figure's script reads (figdata.h): queries
** bound to the selection, their rows and their text written as
** tab-separated data, their numbers and the commands that read the text as
** NAME.vars.
*/
#include "report/figdata.h"
#include "shardq/codec.h"
#include "trace/wfile.h"

#include <sqlite3.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fig_selwhere(report_buf *b, const char *cond)
{
    report_printf(b, "SELECT id FROM runs WHERE status = 'done' AND (%s) AND " FIG_WITHIN, cond);
}

void fig_sel(report_buf *b, const char *kind)
{
    report_printf(b, "SELECT id FROM runs WHERE status = 'done' AND kind = '%s' AND " FIG_WITHIN,
                  kind);
}

const char *fig_collective(const char *path)
{
    return path[0] == 'g' ? "grad_reducescatter" : "weight_allgather";
}

void fig_replay_hops(report_buf *b, const char *path)
{
    report_printf(b, "WITH r AS (");
    fig_sel(b, "replay");
    report_printf(b, "), lk AS (SELECT run_id AS id, coalesce(max(CASE WHEN link = 'inter' AND "
                     "sent_elems > 0 THEN 'inter' END), 'intra') AS link, sum(sent_elems > 0) "
                     "AS hops FROM bytes WHERE run_id IN r AND collective = '%s' GROUP BY "
                     "run_id), ",
                  fig_collective(path));
}

void fig_labels_but_size(report_buf *b, const char *path)
{
    char cond[160];
    snprintf(cond, sizeof cond,
             "p.key LIKE '%s.%%' AND p.key NOT LIKE '%%.bits' AND p.key NOT LIKE '%%.group'",
             path);
    report_labels_sql(b, cond);
}

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

static void tsv_value(report_buf *b, sqlite3_stmt *st, int c)
{
    switch (sqlite3_column_type(st, c)) {
    case SQLITE_NULL: break;
    case SQLITE_INTEGER: report_printf(b, "%lld", (long long)sqlite3_column_int64(st, c)); break;
    case SQLITE_FLOAT: report_printf(b, "%.17g", sqlite3_column_double(st, c)); break;
    default: {
        const unsigned char *t = sqlite3_column_text(st, c);
        if (t) tsv_text(b, t);
        else if (sqlite3_errcode(sqlite3_db_handle(st)) == SQLITE_NOMEM) b->oom = 1;
    }
    }
}

static void query_error(fig_data *f, const char *what, int rc)
{
    fprintf(stderr, "shardq report: %s: the query of %s failed: %s\n", f->name, what,
            (rc & 0xff) == SQLITE_INTERRUPT ? "interrupted (it ran past the query time limit)"
                                   : sqlite3_errmsg(f->db));
    f->failed = 1;
}

/* Prepares sql with the selection bound to ?1 (when it has parameters). */
static sqlite3_stmt *prepare(fig_data *f, const char *what, report_buf *sql)
{
    if (sql->oom) {
        fprintf(stderr, "shardq report: out of memory\n");
        f->failed = 1;
        return NULL;
    }
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(f->db, sql->p, -1, &st, NULL);
    if (rc == SQLITE_OK && sqlite3_bind_parameter_count(st) >= 1)
        rc = f->ids ? sqlite3_bind_text(st, 1, f->ids, -1, SQLITE_STATIC)
                    : sqlite3_bind_null(st, 1);
    if (rc != SQLITE_OK) {
        query_error(f, what, rc);
        sqlite3_finalize(st);
        return NULL;
    }
    return st;
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
    sq_wfile w;
    sq_error err = {0};
    if (sq_wfile_open(&w, path, &err) == 0) {
        sq_wfile_write(&w, text->p ? text->p : "", text->n);
        if (sq_wfile_commit(&w, &err) == 0) return 0;
    }
    fprintf(stderr, "shardq report: %s\n", sq_error_message(&err));
    f->failed = 1;
    return -1;
}

long fig_table(fig_data *f, const char *part, report_buf *sql)
{
    sqlite3_stmt *st = prepare(f, part, sql);
    report_buf_free(sql);
    if (!st) return -1;
    report_buf rows = {0};
    long n = 0;
    int rc, nc = sqlite3_column_count(st);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        for (int c = 0; c < nc; c++) {
            if (c) report_printf(&rows, "\t");
            tsv_value(&rows, st, c);
        }
        report_printf(&rows, "\n");
        n++;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        query_error(f, part, rc);
        report_buf_free(&rows);
        return -1;
    }
    char file[512];
    snprintf(file, sizeof file, "%s-%s.tsv", f->name, part);
    int bad = write_file(f, file, &rows);
    report_buf_free(&rows);
    return bad ? -1 : n;
}

/* Steps st through its rows, calling each(row's first column) */
typedef void (*fig_each)(fig_data *f, report_buf *out, sqlite3_stmt *st, long row);

static int run_rows(fig_data *f, const char *what, report_buf *sql, fig_each each,
                    report_buf *out, long *nrows)
{
    sqlite3_stmt *st = prepare(f, what, sql);
    report_buf_free(sql);
    if (!st) return -1;
    int rc;
    long n = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) each(f, out, st, n++);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        query_error(f, what, rc);
        return -1;
    }
    if (nrows) *nrows = n;
    return 0;
}

static const char *column_text(sqlite3_stmt *st)
{
    const unsigned char *t = sqlite3_column_text(st, 0);
    return t ? (const char *)t : "";
}

static void first_text(fig_data *f, report_buf *out, sqlite3_stmt *st, long row)
{
    (void)f;
    if (row == 0) report_printf(out, "%s", column_text(st));
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

int fig_text(fig_data *f, const char *var, report_buf *sql)
{
    report_buf v = {0};
    int rc = run_rows(f, var, sql, first_text, &v, NULL);
    if (rc == 0) fig_set(f, var, v.p ? v.p : "");
    report_buf_free(&v);
    return rc;
}

int fig_number(fig_data *f, const char *var, report_buf *sql, double *value)
{
    report_buf v = {0};
    int rc = run_rows(f, var, sql, first_text, &v, NULL);
    double x = rc == 0 && v.p ? strtod(v.p, NULL) : 0;
    if (rc == 0) fig_set_number(f, var, x);
    if (value) *value = x;
    report_buf_free(&v);
    return rc;
}

static void every_id(fig_data *f, report_buf *out, sqlite3_stmt *st, long row)
{
    (void)f;
    report_printf(out, "%s%lld", row ? "," : "", (long long)sqlite3_column_int64(st, 0));
}

int fig_ranges(fig_data *f, const char *var, report_buf *sql)
{
    report_buf ids = {0}, r = {0};
    int rc = run_rows(f, var, sql, every_id, &ids, NULL);
    if (rc == 0 && ids.p) report_ranges(&r, ids.p);
    if (rc == 0) fig_set(f, var, r.p ? r.p : "");
    report_buf_free(&ids);
    report_buf_free(&r);
    return rc;
}

int fig_columns(fig_data *f, const char *const *var, int nvar, report_buf *sql)
{
    sqlite3_stmt *st = prepare(f, var[0], sql);
    report_buf_free(sql);
    if (!st) return -1;
    if (nvar > FIG_MAX_COLUMNS || sqlite3_column_count(st) < nvar) {
        fprintf(stderr, "shardq report: %s: the query of %s has fewer columns than arrays\n",
                f->name, var[0]);
        sqlite3_finalize(st);
        f->failed = 1;
        return -1;
    }
    /* a column's values are consecutive lines of NAME-text.tsv */
    report_buf col[FIG_MAX_COLUMNS] = {{0}};
    long n = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        for (int c = 0; c < nvar; c++) {
            const unsigned char *t = sqlite3_column_text(st, c);
            report_printf(&col[c], "=");
            tsv_text(&col[c], t ? t : (const unsigned char *)"");
            report_printf(&col[c], "\n");
        }
        n++;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) query_error(f, var[0], rc);
    for (int c = 0; c < nvar; c++) {
        if (rc == SQLITE_DONE) {
            /* gnuplot has no empty arrays: one empty element then */
            report_printf(&f->vars, "array %s[%ld]\n", var[c], n ? n : 1);
            if (n)
                report_printf(&f->vars,
                              READ_TEXT "(%s[int($0) + 1] = strcol(1)[2:], 0) nooutput\n",
                              f->ntext, f->ntext + n - 1, var[c]);
            else
                report_printf(&f->vars, "%s[1] = \"\"\n", var[c]);
            report_printf(&f->text, "%s", col[c].p ? col[c].p : "");
            if (col[c].oom) f->text.oom = 1;
            f->ntext += n;
        }
        report_buf_free(&col[c]);
    }
    if (rc != SQLITE_DONE) return -1;
    report_printf(&f->vars, "%s_n = %ld\n", var[0], n);
    return 0;
}

int fig_texts(fig_data *f, const char *var, report_buf *sql)
{
    return fig_columns(f, &var, 1, sql);
}

int fig_write_vars(fig_data *f)
{
    char file[512];
    snprintf(file, sizeof file, "%s-text.tsv", f->name);
    if (write_file(f, file, &f->text)) return -1;
    snprintf(file, sizeof file, "%s.vars", f->name);
    return write_file(f, file, &f->vars);
}
