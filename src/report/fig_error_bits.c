/*
** fig_error_bits.c -- the data of analysis/error-bits.gp: per path, the
** schemes (a preset and the knobs other than bits and group that vary
** between its runs), every configuration of a scheme (its mean error over
** its seeds at its bits per real parameter, with the 95% interval of that
** mean) and the front of those no other configuration of the scheme beats
** with as few bits or fewer.
*/
#include "report/figdata.h"

#include <stdio.h>

/* Per run of path p: its label, bits per real parameter (x; per element sent
** for a run stored before bits_per_param, old = 1) and mean error, as
** d(id, preset, label, x, old, err). */
static void base(report_buf *b, const char *p)
{
    fig_replay_hops(b, p);
    report_printf(b,
                  "x AS (SELECT b.run_id AS id, coalesce(b.bits_per_param, b.bits_per_elem) AS x, "
                  "b.bits_per_param IS NULL AS old FROM bytes b JOIN lk ON lk.id = b.run_id AND "
                  "lk.link = b.link WHERE b.collective = '%s' AND b.bits_per_elem < 16), "
                  "e AS (SELECT run_id AS id, avg(rel_l2) AS err FROM step_metrics WHERE run_id "
                  "IN r AND path = '%s' AND rel_l2 > 0 GROUP BY run_id), ",
                  fig_collective(p), p);
    fig_labels_but_size(b, p);
    report_printf(b, ", d AS (SELECT e.id, lab.preset, lab.label, x.x, x.old, e.err FROM e JOIN "
                     "x ON x.id = e.id JOIN lab ON lab.id = e.id) ");
}

/* Every configuration of a series (mean over its seeds) as a(label, gx, x,
** err), and its spread h(label, gx, hw): the half width of the 95% interval
** of the mean over every step of every seed behind the point. */
static void points(report_buf *b, const char *p)
{
    base(b, p);
    report_printf(b,
                  ", a AS (SELECT label, round(x, 3) AS gx, avg(x) AS x, avg(err) AS err FROM d "
                  "GROUP BY label, round(x, 3)), s AS (SELECT d.label, round(d.x, 3) AS gx, "
                  "count(*) - 1 AS df, avg(m.rel_l2) AS mu, avg(m.rel_l2 * m.rel_l2) AS m2 FROM "
                  "d JOIN step_metrics m ON m.run_id = d.id AND m.path = '%s' AND m.rel_l2 > 0 "
                  "GROUP BY d.label, round(d.x, 3)), h AS (SELECT label, gx, CASE WHEN df > 0 "
                  "THEN (" FIG_T975 ") * sqrt(max(m2 - mu * mu, 0) / df) ELSE 0 END AS hw FROM s) ",
                  p);
}

/* The series of path p (arrays p[1..p_n]) and, in tsv(every) and
** tsv(front), the points of all of them, each row its label first. */
static int path(fig_data *f, const char *p, const char *every, const char *front)
{
    report_buf q = {0};
    base(&q, p);
    report_printf(&q, "SELECT label FROM (SELECT label, min(" REPORT_ORDER("preset")
                      ") AS o, min(id) AS i FROM d GROUP BY label) ORDER BY o, i");
    if (fig_texts(f, p, &q)) return -1;
    points(&q, p);
    report_printf(&q, "SELECT a.label, a.x, a.err, max(a.err - coalesce(h.hw, 0), a.err / 100), "
                      "a.err + coalesce(h.hw, 0) FROM a LEFT JOIN h ON h.label = a.label AND "
                      "h.gx = a.gx ORDER BY a.label, a.x");
    if (fig_table(f, every, &q) < 0) return -1;
    points(&q, p);
    report_printf(&q, "SELECT label, x, err FROM a WHERE NOT EXISTS (SELECT 1 FROM a AS b WHERE "
                      "b.label = a.label AND b.x <= a.x AND b.err < a.err) ORDER BY label, x");
    return fig_table(f, front, &q) < 0 ? -1 : 0;
}

/* The ids of d of both paths (where: a condition on d, or "") as ranges. */
static int ids(fig_data *f, const char *var, const char *where)
{
    report_buf q = {0};
    report_printf(&q, "SELECT id FROM (");
    base(&q, "grad");
    report_printf(&q, "SELECT id FROM d%s) UNION SELECT id FROM (", where);
    base(&q, "weight");
    report_printf(&q, "SELECT id FROM d%s) ORDER BY id", where);
    return fig_ranges(f, var, &q);
}

int figdata_error_bits(fig_data *f)
{
    if (path(f, "grad", "gevery", "gfront") || path(f, "weight", "wevery", "wfront")) return -1;
    /* drawn: the runs drawn; old: those stored before bits_per_param */
    return ids(f, "drawn", "") || ids(f, "old", " WHERE old") ? -1 : 0;
}
