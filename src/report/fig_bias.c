/*
** fig_bias.c -- the data of analysis/bias.gp: per path, the schemes (a
** preset and the knobs that vary between its runs) and every replay run's
** mean signed error and mean squared error over its steps.
*/
#include "report/figdata.h"

#include <stdio.h>

/* Past this many schemes in a panel, the runs of a preset that differ only
** in bits and group size are pooled. */
#define MAX_SERIES 20

/* The runs of path p with their labels, as d(id, preset, label, ms, mse). */
static void base(report_buf *b, const char *p, int pool)
{
    char cond[160];
    snprintf(cond, sizeof cond, "p.key LIKE '%s.%%'%s", p,
             pool ? " AND p.key NOT LIKE '%.bits' AND p.key NOT LIKE '%.group'" : "");
    report_printf(b, "WITH r AS (");
    fig_sel(b, "replay");
    report_printf(b, "), ");
    report_labels_sql(b, cond);
    report_printf(b,
                  ", e AS (SELECT run_id AS id, avg(mean_signed) AS ms, avg(mse) AS mse FROM "
                  "step_metrics WHERE run_id IN r AND path = '%s' AND mse > 0 GROUP BY run_id), "
                  "d AS (SELECT e.id, lab.preset, lab.label, e.ms, e.mse FROM e JOIN lab ON "
                  "lab.id = e.id) ",
                  p);
}

static int path(fig_data *f, const char *p)
{
    report_buf q = {0};
    base(&q, p, 0);
    report_printf(&q, "SELECT count(DISTINCT label) > %d FROM d", MAX_SERIES);
    char var[32];
    snprintf(var, sizeof var, "%s_pool", p);
    double pool;
    if (fig_number(f, var, &q, &pool)) return -1;
    base(&q, p, pool != 0);
    report_printf(&q, "SELECT label FROM (SELECT label, min(" REPORT_ORDER("preset")
                      ") AS o, min(id) AS i FROM d GROUP BY label) ORDER BY o, i");
    if (fig_texts(f, p, &q)) return -1;
    base(&q, p, pool != 0);
    report_printf(&q, "SELECT label, ms, mse FROM d ORDER BY label, id");
    return fig_table(f, p, &q) < 0 ? -1 : 0;
}

int figdata_bias(fig_data *f)
{
    if (path(f, "grad") || path(f, "weight")) return -1;
    report_buf q = {0};
    base(&q, "grad", 0);
    report_printf(&q, "SELECT id FROM d UNION ");
    /* the second path's CTEs nest as a subquery */
    report_printf(&q, "SELECT id FROM (");
    base(&q, "weight", 0);
    report_printf(&q, "SELECT id FROM d) ORDER BY id");
    return fig_ranges(f, "drawn", &q);
}
