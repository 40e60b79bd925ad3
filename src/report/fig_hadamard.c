/*
** fig_hadamard.c -- the data of analysis/hadamard.gp: every gradient
** configuration (bits per hop, group size, rounding) replayed both without
** and with a Hadamard transform, its mean relative L2 error each way with
** a 95% interval and, past 16 configurations, the change it brings per
** series (bits and rounding) against the group size.
*/
#include "report/figdata.h"

/* Up to this many configurations are bars side by side; more are the
** change alone, one line per series. */
#define MAX_BARS 16

/* (SELECT value FROM params WHERE run_id = lk.id AND key = k) */
static void pk(report_buf *b, const char *k)
{
    report_printf(b, "(SELECT value FROM params WHERE run_id = lk.id AND key = %s)", k);
}

/* Per run: its gradient configuration, whether a Hadamard ran, its error;
** d(id, cfg, xb, g, ib, rnd, h, err) the runs of the configurations
** replayed both with and without one. */
static void base(report_buf *b)
{
    fig_replay_hops(b, "grad");
    report_printf(b, "kn AS (SELECT lk.id, lk.hops, CAST(");
    pk(b, "'grad.intra.bits'");
    report_printf(b, " AS INTEGER) AS ib, CAST(");
    pk(b, "'grad.' || lk.link || '.bits'");
    report_printf(b, " AS INTEGER) AS xb, ");
    pk(b, "'grad.' || lk.link || '.group'");
    report_printf(b, " AS grp, upper(");
    pk(b, "'grad.' || lk.link || '.round'");
    report_printf(b, ") AS rnd, max(CAST(");
    pk(b, "'grad.intra.hadamard'");
    report_printf(b, " AS INTEGER), CAST(");
    pk(b, "'grad.inter.hadamard'");
    report_printf(b, " AS INTEGER)) AS h FROM lk), ");
    report_printf(b, "e AS (SELECT run_id AS id, avg(rel_l2) AS err FROM step_metrics WHERE "
                     "run_id IN r AND path = 'grad' AND rel_l2 > 0 GROUP BY run_id), ");
    report_printf(b, "c AS (SELECT e.id, CASE WHEN kn.hops > 1 THEN kn.ib || '/' || kn.xb ELSE "
                     "kn.xb END || '-bit, g' || kn.grp || ', ' || kn.rnd AS cfg, kn.xb, "
                     "CAST(kn.grp AS INTEGER) AS g, kn.ib, kn.rnd, kn.h, e.err FROM e JOIN kn "
                     "ON kn.id = e.id WHERE kn.xb < 16), ");
    report_printf(b, "p AS (SELECT cfg FROM c GROUP BY cfg HAVING min(h) = 0 AND max(h) > 0), ");
    report_printf(b, "d AS (SELECT * FROM c WHERE cfg IN p) ");
}

/* A bar's spread, as in error-bits: the 95% interval (Student's t; the
** 0.975 quantile of t, exact to df 9, then 1.96 + 2.5/df, within 1%) of
** the mean over every step of every run behind it, none where one value
** stands behind it. st(cfg, on_, err, hw): per configuration and Hadamard
** off (on_ = 0) or on, the mean of its runs' errors and that half-width. */
static void spread(report_buf *b)
{
    base(b);
    report_printf(b, ", s AS (SELECT d.cfg, d.h > 0 AS on_, count(*) - 1 AS df, avg(m.rel_l2) "
                     "AS mu, avg(m.rel_l2 * m.rel_l2) AS m2 FROM d JOIN step_metrics m ON "
                     "m.run_id = d.id AND m.path = 'grad' AND m.rel_l2 > 0 GROUP BY d.cfg, d.h "
                     "> 0), st AS (SELECT d.cfg, d.h > 0 AS on_, avg(d.err) AS err, "
                     "coalesce(max(CASE WHEN s.df > 0 THEN (" FIG_T975 ") * sqrt(max(s.m2 - s.mu * "
                     "s.mu, 0) / s.df) END), 0) AS hw FROM d LEFT JOIN s ON s.cfg = d.cfg AND "
                     "s.on_ = (d.h > 0) GROUP BY d.cfg, d.h > 0) ");
}

/* The low end of an interval of st e, kept above a hundredth of the bar on
** the log scale. */
static void lo(report_buf *b, const char *e)
{
    report_printf(b, "max(%s.err - %s.hw, %s.err / 100)", e, e, e);
}

/* The series of the many-configurations figure: bits and rounding. */
#define SERIES "substr(cfg, 1, instr(cfg, ', g') - 1) || ', ' || rnd"

int figdata_hadamard(fig_data *f)
{
    report_buf q = {0};
    base(&q);
    report_printf(&q, "SELECT id FROM d ORDER BY id");
    if (fig_ranges(f, "drawn", &q)) return -1;

    base(&q);
    report_printf(&q, "SELECT group_concat(h, '/') FROM (SELECT DISTINCT h FROM d WHERE h > 0 "
                      "ORDER BY h)");
    if (fig_text(f, "sizes", &q)) return -1;

    double ncfg;
    base(&q);
    report_printf(&q, "SELECT count(DISTINCT cfg) FROM d");
    if (fig_number(f, "ncfg", &q, &ncfg)) return -1;

    /* one row per configuration: name, error without, error with, and the
    ** ends of their intervals (without low, high, with low, high) */
    spread(&q);
    report_printf(&q, "SELECT f.cfg, f.err, n.err, ");
    lo(&q, "f");
    report_printf(&q, ", f.err + f.hw, ");
    lo(&q, "n");
    report_printf(&q, ", n.err + n.hw FROM st f JOIN st n ON n.cfg = f.cfg AND n.on_ AND NOT "
                      "f.on_ JOIN (SELECT cfg, min(xb) AS xb, min(g) AS g, min(ib) AS ib, "
                      "min(rnd) AS rnd FROM d GROUP BY cfg) o ON o.cfg = f.cfg ORDER BY o.xb, "
                      "o.g, o.ib, o.rnd");
    if (fig_table(f, "table", &q) < 0) return -1;

    int many = ncfg > MAX_BARS;
    fig_set_number(f, "many", many);
    if (!many) return 0;
    /* the change r = B/A - 1 of the means A (without) and B (with); its
    ** interval from theirs (first order: the relative half-widths add in
    ** quadrature), none where one value stands behind each; one row per
    ** point, the series first */
    spread(&q);
    report_printf(&q, ", ch AS (SELECT s, g, max(CASE WHEN on_ THEN err END) AS b, max(CASE "
                      "WHEN NOT on_ THEN err END) AS a, max(CASE WHEN on_ THEN hw END) AS hb, "
                      "max(CASE WHEN NOT on_ THEN hw END) AS ha FROM st JOIN (SELECT DISTINCT "
                      "cfg, g, " SERIES " AS s FROM d) k ON k.cfg = st.cfg GROUP BY s, g), v AS "
                      "(SELECT s, g, 100 * (b / a - 1) AS r, 100 * b / a * sqrt((ha / a) * (ha / "
                      "a) + (hb / b) * (hb / b)) AS hr FROM ch) SELECT s, g, r, r - hr, r + hr "
                      "FROM v ORDER BY s, g");
    if (fig_table(f, "change", &q) < 0) return -1;
    base(&q);
    report_printf(&q, "SELECT s FROM (SELECT " SERIES " AS s, min(xb) AS xb, min(ib) AS ib FROM "
                      "d GROUP BY s) ORDER BY xb, ib, s");
    return fig_texts(f, "series", &q);
}
