/*
** fig_loss.c -- the data of analysis/loss.gp: the training runs with steps,
** each named by its label (and its seed where its label has several), and
** their curves: the training loss as a moving mean, the validation loss.
*/
#include "report/figdata.h"

#include <sqlite3.h>

#include <stdio.h>

/* The training runs with steps and their labels, as d(id, preset, name, seed). */
static void base(report_buf *b)
{
    report_printf(b, "WITH r AS (");
    fig_sel(b, "train");
    report_printf(b, " AND id IN (SELECT run_id FROM train_steps)), ");
    report_labels_sql(b, "p.key LIKE 'grad.%' OR p.key LIKE 'weight.%' OR p.key LIKE 'model.%' OR"
                         " p.key LIKE 'train.%'");
    report_printf(b, ", d AS (SELECT lab.id, lab.preset, lab.label || CASE WHEN count(*) OVER "
                     "(PARTITION BY lab.label) > 1 THEN ' seed ' || u.seed ELSE '' END AS name, "
                     "u.seed FROM lab JOIN runs u ON u.id = lab.id) ");
}

/* A value as a gnuplot string expression: the value fig_quote gives (a
** control character blank, '"' as ''), without a quote inside a literal.
** gnuplot 5.4 misreads a single-quoted literal whose text begins with a
** quote or holds two in a row ('''a', or 'a''''b', which is a"b quoted by
** fig_quote), and a "'" in double quotes would end its reading of the
** single-quoted literals early (backquotes and @macros after it then
** expanded). So each quote is sprintf('%c', 39) and the text between
** quotes a literal of its own, joined by '.': a"b gives
** 'a'.sprintf('%c', 39).sprintf('%c', 39).'b'. A value without a quote
** is written as fig_quote writes it. */
static void loss_quote(report_buf *b, const char *s)
{
    int pieces = 0, open = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        int quotes = *p == '\'' ? 1 : *p == '"' ? 2 : 0;
        if (quotes) {
            if (open) report_printf(b, "'");
            open = 0;
            for (int k = 0; k < quotes; k++)
                report_printf(b, "%ssprintf('%%c', 39)", pieces++ ? "." : "");
            continue;
        }
        if (!open) report_printf(b, "%s'", pieces++ ? "." : "");
        open = 1;
        report_printf(b, "%c", *p < 0x20 || *p == 0x7f ? ' ' : *p);
    }
    if (open) report_printf(b, "'");
    if (!pieces) report_printf(b, "''");
}

enum { MAX_COLUMNS = 4 };

/* The first nvar columns of every row of sql as the gnuplot arrays var[c]
** (each of at least one element: gnuplot has no empty arrays), and their
** length as var[0]_n: fig_texts for several columns of one query, so that
** the arrays stay in step whatever order the query leaves between rows that
** tie. figdata.c has no such helper. Returns 0, or -1 (said, and f->failed
** set). sql is freed. */
static int loss_columns(fig_data *f, const char *const *var, int nvar, report_buf *sql)
{
    int rc = SQLITE_NOMEM;
    sqlite3_stmt *st = NULL;
    report_buf items[MAX_COLUMNS] = {{0}};
    long n = 0;
    if (nvar > MAX_COLUMNS || sql->oom) goto done;
    rc = sqlite3_prepare_v2(f->db, sql->p, -1, &st, NULL);
    if (rc == SQLITE_OK && sqlite3_bind_parameter_count(st) >= 1)
        rc = f->ids ? sqlite3_bind_text(st, 1, f->ids, -1, SQLITE_STATIC)
                    : sqlite3_bind_null(st, 1);
    if (rc != SQLITE_OK) goto done;
    if (sqlite3_column_count(st) < nvar) {
        rc = SQLITE_RANGE;
        goto done;
    }
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        for (int c = 0; c < nvar; c++) {
            const unsigned char *t = sqlite3_column_text(st, c);
            if (n) report_printf(&items[c], ", ");
            loss_quote(&items[c], t ? (const char *)t : "");
        }
        n++;
    }
    if (rc == SQLITE_DONE) rc = SQLITE_OK;
    for (int c = 0; c < nvar; c++)
        if (rc == SQLITE_OK && items[c].oom) rc = SQLITE_NOMEM;
done:
    if (rc != SQLITE_OK) {
        fprintf(stderr, "shardq report: %s: the query of %s failed: %s\n", f->name,
                nvar > 0 ? var[0] : "?",
                rc == SQLITE_INTERRUPT ? "interrupted (it ran past the query time limit)"
                : rc == SQLITE_RANGE   ? "too few columns"
                : rc == SQLITE_NOMEM   ? "out of memory"
                                       : sqlite3_errmsg(f->db));
        f->failed = 1;
    } else {
        for (int c = 0; c < nvar; c++)
            report_printf(&f->vars, "array %s[%ld] = [%s]\n", var[c], n ? n : 1,
                          n && items[c].p ? items[c].p : "''");
        report_printf(&f->vars, "%s_n = %ld\n", var[0], n);
    }
    sqlite3_finalize(st);
    for (int c = 0; c < MAX_COLUMNS; c++) report_buf_free(&items[c]);
    report_buf_free(sql);
    return rc == SQLITE_OK ? 0 : -1;
}

int figdata_loss(fig_data *f)
{
    report_buf q = {0};
    base(&q);
    report_printf(&q, "SELECT id FROM d");
    if (fig_ranges(f, "drawn", &q)) return -1;
    /* the runs in preset order: id, name, preset */
    static const char *const runs[] = {"ids", "names", "presetof"};
    base(&q);
    report_printf(&q, "SELECT id, name, preset FROM d ORDER BY " REPORT_ORDER("preset") ", name");
    if (loss_columns(f, runs, 3, &q)) return -1;
    report_printf(&q, "SELECT max(step) FROM train_steps WHERE run_id IN (");
    base(&q);
    report_printf(&q, "SELECT id FROM d)");
    double max;
    if (fig_number(f, "maxstep", &q, &max)) return -1;
    /* the moving mean's window, and the first fifth of a long run left out
    ** (a multiple of 10 steps from 100 on) */
    long long maxstep = (long long)max;
    long long win = maxstep >= 40 ? maxstep / 10 : 1;
    long long from = maxstep >= 40 ? (maxstep >= 100 ? 10 * (maxstep / 50) : maxstep / 5) : 0;
    fig_set_number(f, "win", (double)win);
    fig_set_number(f, "from", (double)from);
    /* every run's curves in one query each, the run's id first */
    report_printf(&q, "SELECT run_id, step, m FROM (SELECT run_id, step, avg(loss) OVER (PARTITION "
                      "BY run_id ORDER BY step ROWS BETWEEN %lld PRECEDING AND CURRENT ROW) AS m "
                      "FROM train_steps WHERE run_id IN (",
                  win - 1);
    base(&q);
    report_printf(&q, "SELECT id FROM d)) WHERE step >= %lld ORDER BY run_id, step", from);
    if (fig_table(f, "train", &q) < 0) return -1;
    report_printf(&q, "SELECT run_id, step, val_loss FROM train_steps WHERE run_id IN (");
    base(&q);
    report_printf(&q, "SELECT id FROM d) AND val_loss IS NOT NULL AND step >= %lld ORDER BY "
                      "run_id, step",
                  from);
    return fig_table(f, "val", &q) < 0 ? -1 : 0;
}
