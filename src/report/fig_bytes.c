/*
** fig_bytes.c -- the data of analysis/bytes.gp: per scheme (a preset and
** the knobs that change the bytes and vary between its runs), the bits each
** worker sent per parameter per iteration, by collective and link level,
** mean over the scheme's replay and training runs.
*/
#include "report/figdata.h"

/* Past this many schemes, each preset is drawn at its most-run
** configuration, named by the preset alone. */
#define MAX_SCHEMES 14

/* per run: bits per parameter per iteration per worker, by collective and link */
#define BPP(c, l) "avg(CASE WHEN v.collective = '" c "' AND v.link = '" l "' THEN v.bpp END)"

/* The runs drawn with their labels and bits, as d(id, preset, kind, label,
** wi, gi, wx, gx); c(preset, kind, pth, label, n, first), the schemes. */
static void base(report_buf *b)
{
    report_printf(b, "WITH r AS (");
    fig_selwhere(b, "kind IN ('replay', 'train')");
    report_printf(b, " AND id IN (SELECT run_id FROM bytes)), ");
    report_labels_sql(b, "(p.key LIKE 'grad.%' OR p.key LIKE 'weight.%') AND p.key NOT LIKE "
                         "'%.round' AND p.key NOT LIKE '%.hadamard' AND p.key NOT LIKE '%.levels'");
    report_printf(
        b,
        ", sz AS (SELECT u.id, u.kind, CAST(substr(u.topo, 1, instr(u.topo, 'x') - 1) AS REAL) *"
        " CAST(substr(u.topo, instr(u.topo, 'x') + 1) AS REAL) AS n, CASE u.kind WHEN 'train' THEN"
        " (SELECT CAST(value AS REAL) FROM params WHERE run_id = u.id AND key = 'model.params') *"
        " (SELECT count(*) FROM train_steps WHERE run_id = u.id) ELSE (SELECT max(elements) FROM"
        " step_metrics WHERE run_id = u.id) * (SELECT CAST(value AS REAL) FROM params WHERE"
        " run_id = u.id AND key = 'trace.steps') END AS pi FROM runs u WHERE u.id IN r), "
        "v AS (SELECT b.run_id AS id, b.collective, b.link, 8.0 * (b.sent_codes + b.sent_meta) /"
        " (sz.n * sz.pi) AS bpp FROM bytes b JOIN sz ON sz.id = b.run_id WHERE sz.pi > 0), "
        "pt AS (SELECT run_id AS id, CASE value WHEN 'grad' THEN ' (grad only)' WHEN 'weight' THEN"
        " ' (weight only)' ELSE '' END AS t FROM params WHERE run_id IN r AND key = 'paths'), "
        "a AS (SELECT lab.id, lab.preset, sz.kind, coalesce(pt.t, '') AS pth, lab.label ||"
        " coalesce(pt.t, '') || CASE WHEN (SELECT count(DISTINCT kind) FROM"
        " sz) > 1 AND sz.kind = 'train' THEN ' (train)' ELSE '' END AS label, lab.preset ||"
        " coalesce(pt.t, '') || CASE WHEN"
        " (SELECT count(DISTINCT kind) FROM sz) > 1 AND sz.kind = 'train' THEN ' (train)' ELSE '' END"
        " AS short, "
        BPP("weight_allgather", "intra") " AS wi, " BPP("grad_reducescatter", "intra") " AS gi, "
        BPP("weight_allgather", "inter") " AS wx, " BPP("grad_reducescatter", "inter") " AS gx"
        " FROM lab JOIN sz ON sz.id = lab.id JOIN v ON v.id = lab.id LEFT JOIN pt ON pt.id = lab.id"
        " GROUP BY lab.id), "
        "c AS (SELECT preset, kind, pth, label, count(*) AS n, min(id) AS first FROM a GROUP BY label), "
        "m AS (SELECT label FROM c WHERE (SELECT count(*) FROM c) <= %d OR NOT EXISTS (SELECT 1"
        " FROM c AS o WHERE o.preset = c.preset AND o.kind = c.kind AND o.pth = c.pth AND (o.n > c.n OR"
        " (o.n = c.n AND o.first < c.first)))), "
        "d AS (SELECT id, preset, kind, CASE WHEN (SELECT count(*) FROM c) > %d THEN short ELSE"
        " label END AS label, wi, gi, wx, gx FROM a WHERE label IN m) ",
        MAX_SCHEMES, MAX_SCHEMES);
}

int figdata_bytes(fig_data *f)
{
    report_buf q = {0};
    base(&q);
    report_printf(&q, "SELECT id FROM d");
    if (fig_ranges(f, "drawn", &q)) return -1;
    /* the schemes drawn at their most-run configuration */
    base(&q);
    report_printf(&q, "SELECT count(*) > %d FROM c", MAX_SCHEMES);
    if (fig_number(f, "modal", &q, NULL)) return -1;
    base(&q);
    report_printf(&q, "SELECT count(DISTINCT label) FROM d");
    if (fig_number(f, "ncat", &q, NULL)) return -1;
    /* a bar per scheme: its label, then weight and gradient on intra-node
    ** links, then on inter-node links */
    base(&q);
    report_printf(&q, "SELECT label, avg(wi), avg(gi), avg(wx), avg(gx) FROM d GROUP BY label"
                      " ORDER BY min(kind), min(" REPORT_ORDER("preset") "), min(id)");
    return fig_table(f, "table", &q) < 0 ? -1 : 0;
}
