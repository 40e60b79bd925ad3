/*
** fig_error_group.c -- the data of analysis/error-group.gp: per path, the
** lines (a scheme and a bit width) replayed at two group sizes or more, and
** every point of them: the mean error at a group size with the 95% interval
** of that mean and the bits per real parameter the hop cost.
*/
#include "report/figdata.h"

#include <stdio.h>

/* The prefix of the keys of path p's bits and group: of the hop a gradient
** run's bytes were measured on. */
static const char *knob(const char *p)
{
    return p[0] == 'g' ? "'grad.' || lk.link || '.'" : "'weight.'";
}

/* Per run of path p: its label with the bit width, group size, mean error
** and bits per real parameter of the hop, as d(id, preset, label, bits, grp,
** err, bp); lines with a single group size left out. */
static void base(report_buf *b, const char *p)
{
    fig_replay_hops(b, p);
    report_printf(b,
                  "kb AS (SELECT lk.id, CAST(b.value AS INTEGER) AS bits, CAST(g.value AS "
                  "INTEGER) AS grp FROM lk JOIN params b ON b.run_id = lk.id AND b.key = %s || "
                  "'bits' JOIN params g ON g.run_id = lk.id AND g.key = %s || 'group'), "
                  "bp AS (SELECT lk.id, coalesce(b.bits_per_param, b.bits_per_elem) AS bp FROM "
                  "lk JOIN bytes b ON b.run_id = lk.id AND b.link = lk.link AND b.collective = "
                  "'%s'), "
                  "e AS (SELECT run_id AS id, avg(rel_l2) AS err FROM step_metrics WHERE run_id "
                  "IN r AND path = '%s' AND rel_l2 > 0 GROUP BY run_id), ",
                  knob(p), knob(p), fig_collective(p), p);
    fig_labels_but_size(b, p);
    report_printf(b,
                  ", a AS (SELECT e.id, lab.preset, lab.label || ' ' || kb.bits || '-bit' AS "
                  "label, kb.bits, kb.grp, e.err, bp.bp FROM e JOIN kb ON kb.id = e.id JOIN lab "
                  "ON lab.id = e.id LEFT JOIN bp ON bp.id = e.id WHERE kb.bits < 16), "
                  "d AS (SELECT * FROM a WHERE label IN (SELECT label FROM a GROUP BY label "
                  "HAVING count(DISTINCT grp) > 1)) ");
}

/* The first column of every line of path p in the order of its series: the
** label, its bit width, its scheme (the label without the bit width). */
static int series(fig_data *f, const char *p, const char *var, const char *col)
{
    report_buf q = {0};
    base(&q, p);
    report_printf(&q, "SELECT %s FROM (SELECT DISTINCT label, " REPORT_ORDER("preset")
                      " AS o, bits FROM d) ORDER BY o, label, bits", col);
    return fig_texts(f, var, &q);
}

/* Path p's lines and their points (tsv(p)), its bit widths (b) and schemes
** (k) for the key. */
static int path(fig_data *f, const char *p, const char *b, const char *k)
{
    char var[32];
    /* the scheme as schemelist below has it */
    const char *scheme = "substr(label, 1, length(label) - length(bits || '-bit') - 1)";
    if (series(f, p, p, "label")) return -1;
    snprintf(var, sizeof var, "%s_bits", p);
    if (series(f, p, var, "bits")) return -1;
    snprintf(var, sizeof var, "%s_scheme", p);
    if (series(f, p, var, scheme)) return -1;
    report_buf q = {0};
    base(&q, p);
    report_printf(&q, "SELECT bits FROM (SELECT DISTINCT bits FROM d) ORDER BY bits");
    if (fig_texts(f, b, &q)) return -1;
    base(&q, p);
    report_printf(&q, "SELECT s FROM (SELECT %s AS s, min(" REPORT_ORDER("preset")
                      ") AS o FROM d GROUP BY s) ORDER BY o, s", scheme);
    if (fig_texts(f, k, &q)) return -1;
    /* a point's spread, as in error-bits: the 95% interval of the mean over
    ** every step of every seed behind it, none where one value stands behind
    ** it; its low end kept above a hundredth of the point on the log scale */
    base(&q, p);
    report_printf(&q,
                  ", s AS (SELECT d.label, d.grp, count(*) - 1 AS df, avg(m.rel_l2) AS mu, "
                  "avg(m.rel_l2 * m.rel_l2) AS m2 FROM d JOIN step_metrics m ON m.run_id = d.id "
                  "AND m.path = '%s' AND m.rel_l2 > 0 GROUP BY d.label, d.grp), h AS (SELECT "
                  "label, grp, CASE WHEN df > 0 THEN (" FIG_T975 ") * sqrt(max(m2 - mu * mu, 0) / df) "
                  "ELSE 0 END AS hw FROM s), pt AS (SELECT label, grp, avg(err) AS err, avg(bp) "
                  "AS bp, grp = max(grp) OVER (PARTITION BY label) AS last FROM d GROUP BY "
                  "label, grp) SELECT pt.label, pt.grp, pt.err, pt.bp, pt.last, max(pt.err - "
                  "coalesce(h.hw, 0), pt.err / 100), pt.err + coalesce(h.hw, 0) FROM pt LEFT "
                  "JOIN h ON h.label = pt.label AND h.grp = pt.grp ORDER BY pt.label, pt.grp",
                  p);
    return fig_table(f, p, &q) < 0 ? -1 : 0;
}

int figdata_error_group(fig_data *f)
{
    if (path(f, "grad", "gb", "gk") || path(f, "weight", "wb", "wk")) return -1;
    report_buf q = {0};
    report_printf(&q, "SELECT id FROM (");
    base(&q, "grad");
    report_printf(&q, "SELECT id FROM d) UNION SELECT id FROM (");
    base(&q, "weight");
    report_printf(&q, "SELECT id FROM d) ORDER BY id");
    return fig_ranges(f, "drawn", &q);
}
