/*
** fig_loss.c -- the data of analysis/loss.gp: the training runs with steps,
** each named by its label (and its seed where its label has several), and
** their curves: the training loss as a moving mean, the validation loss.
*/
#include "report/figdata.h"

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
    if (fig_columns(f, runs, 3, &q)) return -1;
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
