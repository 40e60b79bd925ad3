/*
** figure_replay.c -- the queries of the report's replay figures
** (report_sql.h, sq_fig_replay_sql): error-bits, error-group, hadamard and
** bias, over the done replay runs among the ids bound to ?1. Each figure
** builds its CTEs (base) and ends them with the SELECT of one query.
*/
#include "store/report_sql.h"

#include <stdio.h>

#define STR_(x) #x
#define STR(x) STR_(x)

/* The labels of d in the order of their presets, then of their first run. */
#define SERIES_IN_ORDER                                                                        \
    "SELECT label FROM (SELECT label, min(" SQ_PRESET_ORDER("preset")                          \
    ") AS o, min(id) AS i FROM d GROUP BY label) ORDER BY o, i"

/* ------------------------------------------------------------------------ */
/* error-bits                                                               */
/* ------------------------------------------------------------------------ */

/* Per path, the schemes (a preset and the knobs other than bits and group
** that vary between its runs), every configuration of a scheme (its mean
** error over its seeds at its bits per real parameter, with the 95%
** interval of that mean) and the front of those no other configuration of
** the scheme beats with as few bits or fewer. */

/* Per run of path p: its label, bits per real parameter (x; per element sent
** for a run stored before bits_per_param, old = 1) and mean error, as
** d(id, preset, label, x, old, err). */
static void bits_base(sq_sql *b, int p)
{
    sq_fig_replay_hops(b, p);
    sq_sql_add(b,
               "x AS (SELECT b.run_id AS id, coalesce(b.bits_per_param, b.bits_per_elem) AS x, "
               "b.bits_per_param IS NULL AS old FROM bytes b JOIN lk ON lk.id = b.run_id AND "
               "lk.link = b.link WHERE b.collective = '%s' AND b.bits_per_elem < 16), "
               "e AS (SELECT run_id AS id, avg(rel_l2) AS err FROM step_metrics WHERE run_id "
               "IN r AND path = '%s' AND rel_l2 > 0 GROUP BY run_id), ",
               sq_fig_collective(p), sq_fig_path(p));
    sq_fig_labels_but_size(b, p);
    sq_sql_add(b, ", d AS (SELECT e.id, lab.preset, lab.label, x.x, x.old, e.err FROM e JOIN "
                  "x ON x.id = e.id JOIN lab ON lab.id = e.id) ");
}

/* Every configuration of a series (mean over its seeds) as a(label, gx, x,
** err), and its spread h(label, gx, hw): the half width of the 95% interval
** of the mean over every step of every seed behind the point. */
static void bits_points(sq_sql *b, int p)
{
    bits_base(b, p);
    sq_sql_add(b,
               ", a AS (SELECT label, round(x, 3) AS gx, avg(x) AS x, avg(err) AS err FROM d "
               "GROUP BY label, round(x, 3)), s AS (SELECT d.label, round(d.x, 3) AS gx, "
               "count(*) - 1 AS df, avg(m.rel_l2) AS mu, avg(m.rel_l2 * m.rel_l2) AS m2 FROM "
               "d JOIN step_metrics m ON m.run_id = d.id AND m.path = '%s' AND m.rel_l2 > 0 "
               "GROUP BY d.label, round(d.x, 3)), h AS (SELECT label, gx, CASE WHEN df > 0 "
               "THEN (" SQ_T975 ") * sqrt(max(m2 - mu * mu, 0) / df) ELSE 0 END AS hw FROM s) ",
               sq_fig_path(p));
}

/* The ids of d of both paths (where: a condition on d, or ""). */
static void bits_runs(sq_sql *q, const char *where)
{
    sq_sql_add(q, "SELECT id FROM (");
    bits_base(q, SQ_FIG_GRAD);
    sq_sql_add(q, "SELECT id FROM d%s) UNION SELECT id FROM (", where);
    bits_base(q, SQ_FIG_WEIGHT);
    sq_sql_add(q, "SELECT id FROM d%s) ORDER BY id", where);
}

static void error_bits(sq_sql *q, sq_figure_query which, int p)
{
    switch (which) {
    case SQ_FIG_ERROR_BITS_SERIES:
        bits_base(q, p);
        sq_sql_add(q, SERIES_IN_ORDER);
        break;
    case SQ_FIG_ERROR_BITS_EVERY:
        bits_points(q, p);
        sq_sql_add(q, "SELECT a.label, a.x, a.err, max(a.err - coalesce(h.hw, 0), a.err / 100), "
                      "a.err + coalesce(h.hw, 0) FROM a LEFT JOIN h ON h.label = a.label AND "
                      "h.gx = a.gx ORDER BY a.label, a.x");
        break;
    case SQ_FIG_ERROR_BITS_FRONT:
        bits_points(q, p);
        sq_sql_add(q, "SELECT label, x, err FROM a WHERE NOT EXISTS (SELECT 1 FROM a AS b WHERE "
                      "b.label = a.label AND b.x <= a.x AND b.err < a.err) ORDER BY label, x");
        break;
    case SQ_FIG_ERROR_BITS_DRAWN: bits_runs(q, ""); break;
    default: bits_runs(q, " WHERE old"); /* stored before bits_per_param */
    }
}

/* ------------------------------------------------------------------------ */
/* error-group                                                              */
/* ------------------------------------------------------------------------ */

/* Per path, the lines (a scheme and a bit width) replayed at two group
** sizes or more, and every point of them: the mean error at a group size
** with the 95% interval of that mean and the bits per real parameter the
** hop cost. */

/* The prefix of the keys of path p's bits and group: of the hop a gradient
** run's bytes were measured on. */
static const char *knob(int p)
{
    return p == SQ_FIG_GRAD ? "'grad.' || lk.link || '.'" : "'weight.'";
}

/* Per run of path p: its label with the bit width, group size, mean error
** and bits per real parameter of the hop, as d(id, preset, label, bits, grp,
** err, bp); lines with a single group size left out. */
static void group_base(sq_sql *b, int p)
{
    sq_fig_replay_hops(b, p);
    sq_sql_add(b,
               "kb AS (SELECT lk.id, CAST(b.value AS INTEGER) AS bits, CAST(g.value AS "
               "INTEGER) AS grp FROM lk JOIN params b ON b.run_id = lk.id AND b.key = %s || "
               "'bits' JOIN params g ON g.run_id = lk.id AND g.key = %s || 'group'), "
               "bp AS (SELECT lk.id, coalesce(b.bits_per_param, b.bits_per_elem) AS bp FROM "
               "lk JOIN bytes b ON b.run_id = lk.id AND b.link = lk.link AND b.collective = "
               "'%s'), "
               "e AS (SELECT run_id AS id, avg(rel_l2) AS err FROM step_metrics WHERE run_id "
               "IN r AND path = '%s' AND rel_l2 > 0 GROUP BY run_id), ",
               knob(p), knob(p), sq_fig_collective(p), sq_fig_path(p));
    sq_fig_labels_but_size(b, p);
    sq_sql_add(b,
               ", a AS (SELECT e.id, lab.preset, lab.label || ' ' || kb.bits || '-bit' AS "
               "label, kb.bits, kb.grp, e.err, bp.bp FROM e JOIN kb ON kb.id = e.id JOIN lab "
               "ON lab.id = e.id LEFT JOIN bp ON bp.id = e.id WHERE kb.bits < 16), "
               "d AS (SELECT * FROM a WHERE label IN (SELECT label FROM a GROUP BY label "
               "HAVING count(DISTINCT grp) > 1)) ");
}

/* the scheme of a line: its label without the bit width */
#define LINE_SCHEME "substr(label, 1, length(label) - length(bits || '-bit') - 1)"

/* The first column of every line of path p in the order of its lines. */
static void group_lines(sq_sql *q, int p, const char *col)
{
    group_base(q, p);
    sq_sql_add(q, "SELECT %s FROM (SELECT DISTINCT label, " SQ_PRESET_ORDER("preset")
                  " AS o, bits FROM d) ORDER BY o, label, bits", col);
}

static void error_group(sq_sql *q, sq_figure_query which, int p)
{
    switch (which) {
    case SQ_FIG_ERROR_GROUP_LINES: group_lines(q, p, "label"); break;
    case SQ_FIG_ERROR_GROUP_LINE_BITS: group_lines(q, p, "bits"); break;
    case SQ_FIG_ERROR_GROUP_LINE_SCHEMES: group_lines(q, p, LINE_SCHEME); break;
    case SQ_FIG_ERROR_GROUP_BITS:
        group_base(q, p);
        sq_sql_add(q, "SELECT bits FROM (SELECT DISTINCT bits FROM d) ORDER BY bits");
        break;
    case SQ_FIG_ERROR_GROUP_SCHEMES:
        group_base(q, p);
        sq_sql_add(q, "SELECT s FROM (SELECT " LINE_SCHEME " AS s, min(" SQ_PRESET_ORDER("preset")
                      ") AS o FROM d GROUP BY s) ORDER BY o, s");
        break;
    case SQ_FIG_ERROR_GROUP_POINTS:
        /* a point's spread, as in error-bits: the 95% interval of the mean
        ** over every step of every seed behind it, none where one value
        ** stands behind it; its low end kept above a hundredth of the point
        ** on the log scale */
        group_base(q, p);
        sq_sql_add(q,
                   ", s AS (SELECT d.label, d.grp, count(*) - 1 AS df, avg(m.rel_l2) AS mu, "
                   "avg(m.rel_l2 * m.rel_l2) AS m2 FROM d JOIN step_metrics m ON m.run_id = d.id "
                   "AND m.path = '%s' AND m.rel_l2 > 0 GROUP BY d.label, d.grp), h AS (SELECT "
                   "label, grp, CASE WHEN df > 0 THEN (" SQ_T975 ") * sqrt(max(m2 - mu * mu, 0) / df) "
                   "ELSE 0 END AS hw FROM s), pt AS (SELECT label, grp, avg(err) AS err, avg(bp) "
                   "AS bp, grp = max(grp) OVER (PARTITION BY label) AS last FROM d GROUP BY "
                   "label, grp) SELECT pt.label, pt.grp, pt.err, pt.bp, pt.last, max(pt.err - "
                   "coalesce(h.hw, 0), pt.err / 100), pt.err + coalesce(h.hw, 0) FROM pt LEFT "
                   "JOIN h ON h.label = pt.label AND h.grp = pt.grp ORDER BY pt.label, pt.grp",
                   sq_fig_path(p));
        break;
    default:
        sq_sql_add(q, "SELECT id FROM (");
        group_base(q, SQ_FIG_GRAD);
        sq_sql_add(q, "SELECT id FROM d) UNION SELECT id FROM (");
        group_base(q, SQ_FIG_WEIGHT);
        sq_sql_add(q, "SELECT id FROM d) ORDER BY id");
    }
}

/* ------------------------------------------------------------------------ */
/* hadamard                                                                 */
/* ------------------------------------------------------------------------ */

/* Every gradient configuration (bits per hop, group size, rounding)
** replayed both without and with a Hadamard transform, its mean relative
** L2 error each way with a 95% interval and the change it brings per
** series (bits and rounding) against the group size. */

/* (SELECT value FROM params WHERE run_id = lk.id AND key = k) */
static void pk(sq_sql *b, const char *k)
{
    sq_sql_add(b, "(SELECT value FROM params WHERE run_id = lk.id AND key = %s)", k);
}

/* Per run: its gradient configuration, whether a Hadamard ran, its error;
** d(id, cfg, xb, g, ib, rnd, h, err) the runs of the configurations
** replayed both with and without one. */
static void hadamard_base(sq_sql *b)
{
    sq_fig_replay_hops(b, SQ_FIG_GRAD);
    sq_sql_add(b, "kn AS (SELECT lk.id, lk.hops, CAST(");
    pk(b, "'grad.intra.bits'");
    sq_sql_add(b, " AS INTEGER) AS ib, CAST(");
    pk(b, "'grad.' || lk.link || '.bits'");
    sq_sql_add(b, " AS INTEGER) AS xb, ");
    pk(b, "'grad.' || lk.link || '.group'");
    sq_sql_add(b, " AS grp, upper(");
    pk(b, "'grad.' || lk.link || '.round'");
    sq_sql_add(b, ") AS rnd, max(CAST(");
    pk(b, "'grad.intra.hadamard'");
    sq_sql_add(b, " AS INTEGER), CAST(");
    pk(b, "'grad.inter.hadamard'");
    sq_sql_add(b, " AS INTEGER)) AS h FROM lk), ");
    sq_sql_add(b, "e AS (SELECT run_id AS id, avg(rel_l2) AS err FROM step_metrics WHERE "
                  "run_id IN r AND path = 'grad' AND rel_l2 > 0 GROUP BY run_id), ");
    sq_sql_add(b, "c AS (SELECT e.id, CASE WHEN kn.hops > 1 THEN kn.ib || '/' || kn.xb ELSE "
                  "kn.xb END || '-bit, g' || kn.grp || ', ' || kn.rnd AS cfg, kn.xb, "
                  "CAST(kn.grp AS INTEGER) AS g, kn.ib, kn.rnd, kn.h, e.err FROM e JOIN kn "
                  "ON kn.id = e.id WHERE kn.xb < 16), ");
    sq_sql_add(b, "p AS (SELECT cfg FROM c GROUP BY cfg HAVING min(h) = 0 AND max(h) > 0), ");
    sq_sql_add(b, "d AS (SELECT * FROM c WHERE cfg IN p) ");
}

/* A bar's spread, as in error-bits: the 95% interval (Student's t) of the
** mean over every step of every run behind it, none where one value
** stands behind it. st(cfg, on_, err, hw): per configuration and Hadamard
** off (on_ = 0) or on, the mean of its runs' errors and that half-width. */
static void hadamard_spread(sq_sql *b)
{
    hadamard_base(b);
    sq_sql_add(b, ", s AS (SELECT d.cfg, d.h > 0 AS on_, count(*) - 1 AS df, avg(m.rel_l2) "
                  "AS mu, avg(m.rel_l2 * m.rel_l2) AS m2 FROM d JOIN step_metrics m ON "
                  "m.run_id = d.id AND m.path = 'grad' AND m.rel_l2 > 0 GROUP BY d.cfg, d.h "
                  "> 0), st AS (SELECT d.cfg, d.h > 0 AS on_, avg(d.err) AS err, "
                  "coalesce(max(CASE WHEN s.df > 0 THEN (" SQ_T975 ") * sqrt(max(s.m2 - s.mu * "
                  "s.mu, 0) / s.df) END), 0) AS hw FROM d LEFT JOIN s ON s.cfg = d.cfg AND "
                  "s.on_ = (d.h > 0) GROUP BY d.cfg, d.h > 0) ");
}

/* The low end of an interval of st e, kept above a hundredth of the bar on
** the log scale. */
#define LOW(e) "max(" e ".err - " e ".hw, " e ".err / 100)"

/* The series of the many-configurations figure: bits and rounding. */
#define SERIES "substr(cfg, 1, instr(cfg, ', g') - 1) || ', ' || rnd"

static void hadamard(sq_sql *q, sq_figure_query which)
{
    switch (which) {
    case SQ_FIG_HADAMARD_DRAWN:
        hadamard_base(q);
        sq_sql_add(q, "SELECT id FROM d ORDER BY id");
        break;
    case SQ_FIG_HADAMARD_SIZES:
        hadamard_base(q);
        sq_sql_add(q, "SELECT group_concat(h, '/') FROM (SELECT DISTINCT h FROM d WHERE h > 0 "
                      "ORDER BY h)");
        break;
    case SQ_FIG_HADAMARD_CONFIGS:
        hadamard_base(q);
        sq_sql_add(q, "SELECT count(DISTINCT cfg) FROM d");
        break;
    case SQ_FIG_HADAMARD_TABLE:
        /* one row per configuration: name, error without, error with, and
        ** the ends of their intervals (without low, high, with low, high) */
        hadamard_spread(q);
        sq_sql_add(q, "SELECT f.cfg, f.err, n.err, " LOW("f") ", f.err + f.hw, " LOW("n")
                      ", n.err + n.hw FROM st f JOIN st n ON n.cfg = f.cfg AND n.on_ AND NOT "
                      "f.on_ JOIN (SELECT cfg, min(xb) AS xb, min(g) AS g, min(ib) AS ib, "
                      "min(rnd) AS rnd FROM d GROUP BY cfg) o ON o.cfg = f.cfg ORDER BY o.xb, "
                      "o.g, o.ib, o.rnd");
        break;
    case SQ_FIG_HADAMARD_CHANGE:
        /* the change r = B/A - 1 of the means A (without) and B (with); its
        ** interval from theirs (first order: the relative half-widths add
        ** in quadrature), none where one value stands behind each; one row
        ** per point, the series first */
        hadamard_spread(q);
        sq_sql_add(q, ", ch AS (SELECT s, g, max(CASE WHEN on_ THEN err END) AS b, max(CASE "
                      "WHEN NOT on_ THEN err END) AS a, max(CASE WHEN on_ THEN hw END) AS hb, "
                      "max(CASE WHEN NOT on_ THEN hw END) AS ha FROM st JOIN (SELECT DISTINCT "
                      "cfg, g, " SERIES " AS s FROM d) k ON k.cfg = st.cfg GROUP BY s, g), v AS "
                      "(SELECT s, g, 100 * (b / a - 1) AS r, 100 * b / a * sqrt((ha / a) * (ha / "
                      "a) + (hb / b) * (hb / b)) AS hr FROM ch) SELECT s, g, r, r - hr, r + hr "
                      "FROM v ORDER BY s, g");
        break;
    default:
        hadamard_base(q);
        sq_sql_add(q, "SELECT s FROM (SELECT " SERIES " AS s, min(xb) AS xb, min(ib) AS ib FROM "
                      "d GROUP BY s) ORDER BY xb, ib, s");
    }
}

/* ------------------------------------------------------------------------ */
/* bias                                                                     */
/* ------------------------------------------------------------------------ */

/* Per path, the schemes (a preset and the knobs that vary between its
** runs) and every replay run's mean signed error and mean squared error
** over its steps. */

/* Past this many schemes in a panel, the runs of a preset that differ only
** in bits and group size are pooled. */
#define MAX_SERIES 20

/* The runs of path p with their labels, as d(id, preset, label, ms, mse). */
static void bias_base(sq_sql *b, int p, int pool)
{
    char cond[160];
    snprintf(cond, sizeof cond, "p.key LIKE '%s.%%'%s", sq_fig_path(p),
             pool ? " AND p.key NOT LIKE '%.bits' AND p.key NOT LIKE '%.group'" : "");
    sq_sql_add(b, "WITH r AS (");
    sq_fig_sel(b, "replay");
    sq_sql_add(b, "), ");
    sq_sql_labels(b, cond);
    sq_sql_add(b,
               ", e AS (SELECT run_id AS id, avg(mean_signed) AS ms, avg(mse) AS mse FROM "
               "step_metrics WHERE run_id IN r AND path = '%s' AND mse > 0 GROUP BY run_id), "
               "d AS (SELECT e.id, lab.preset, lab.label, e.ms, e.mse FROM e JOIN lab ON "
               "lab.id = e.id) ",
               sq_fig_path(p));
}

static void bias(sq_sql *q, sq_figure_query which, int p, int pool)
{
    switch (which) {
    case SQ_FIG_BIAS_POOL:
        bias_base(q, p, 0);
        sq_sql_add(q, "SELECT count(DISTINCT label) > " STR(MAX_SERIES) " FROM d");
        break;
    case SQ_FIG_BIAS_SERIES:
        bias_base(q, p, pool);
        sq_sql_add(q, SERIES_IN_ORDER);
        break;
    case SQ_FIG_BIAS_ROWS:
        bias_base(q, p, pool);
        sq_sql_add(q, "SELECT label, ms, mse FROM d ORDER BY label, id");
        break;
    default:
        bias_base(q, SQ_FIG_GRAD, 0);
        sq_sql_add(q, "SELECT id FROM d UNION ");
        /* the second path's CTEs nest as a subquery */
        sq_sql_add(q, "SELECT id FROM (");
        bias_base(q, SQ_FIG_WEIGHT, 0);
        sq_sql_add(q, "SELECT id FROM d) ORDER BY id");
    }
}

int sq_fig_replay_sql(sq_sql *b, sq_figure_query q, const sq_figure_knobs *k)
{
    if (q <= SQ_FIG_ERROR_BITS_OLD)
        error_bits(b, q, k->path);
    else if (q <= SQ_FIG_ERROR_GROUP_DRAWN)
        error_group(b, q, k->path);
    else if (q <= SQ_FIG_HADAMARD_SERIES)
        hadamard(b, q);
    else if (q <= SQ_FIG_BIAS_DRAWN)
        bias(b, q, k->path, k->pool != 0);
    else
        return 0;
    return 1;
}
