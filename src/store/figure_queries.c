/*
** figure_queries.c -- the queries of the report's figures (store_query.h):
** the texts of bytes, loss, bench and speedup here, those of the replay
** figures in figure_replay.c, each run with the selected runs bound to ?1.
*/
#include "store/report_sql.h"

#include <string.h>

#define STR_(x) #x
#define STR(x) STR_(x)

/* ------------------------------------------------------------------------ */
/* bytes                                                                    */
/* ------------------------------------------------------------------------ */

/* Past this many schemes, each preset is drawn at its most-run
** configuration, named by the preset alone. */
#define MAX_SCHEMES 14

/* per run: bits per parameter per iteration per worker, by collective and link */
#define BPP(c, l) "avg(CASE WHEN v.collective = '" c "' AND v.link = '" l "' THEN v.bpp END)"

/* Per scheme (a preset and the knobs that change the bytes and vary
** between its runs), the bits each worker sent per parameter per
** iteration, by collective and link level, over its replay and training
** runs: d(id, preset, kind, label, wi, gi, wx, gx); c(preset, kind, pth,
** label, n, first), the schemes. */
static void bytes_base(sq_sql *b)
{
    sq_sql_add(b, "WITH r AS (");
    sq_fig_selwhere(b, "kind IN ('replay', 'train')");
    sq_sql_add(b, " AND id IN (SELECT run_id FROM bytes)), ");
    sq_sql_labels(b, "(p.key LIKE 'grad.%' OR p.key LIKE 'weight.%') AND p.key NOT LIKE "
                     "'%.round' AND p.key NOT LIKE '%.hadamard' AND p.key NOT LIKE '%.levels'");
    sq_sql_add(
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
        "m AS (SELECT label FROM c WHERE (SELECT count(*) FROM c) <= " STR(MAX_SCHEMES) " OR NOT EXISTS (SELECT 1"
        " FROM c AS o WHERE o.preset = c.preset AND o.kind = c.kind AND o.pth = c.pth AND (o.n > c.n OR"
        " (o.n = c.n AND o.first < c.first)))), "
        "d AS (SELECT id, preset, kind, CASE WHEN (SELECT count(*) FROM c) > " STR(MAX_SCHEMES) " THEN short ELSE"
        " label END AS label, wi, gi, wx, gx FROM a WHERE label IN m) ");
}

static void bytes_sql(sq_sql *q, sq_figure_query which)
{
    bytes_base(q);
    switch (which) {
    case SQ_FIG_BYTES_DRAWN: sq_sql_add(q, "SELECT id FROM d"); break;
    case SQ_FIG_BYTES_MODAL: sq_sql_add(q, "SELECT count(*) > " STR(MAX_SCHEMES) " FROM c"); break;
    case SQ_FIG_BYTES_BARS: sq_sql_add(q, "SELECT count(DISTINCT label) FROM d"); break;
    default:
        /* a bar per scheme: its label, then weight and gradient on intra-node
        ** links, then on inter-node links */
        sq_sql_add(q, "SELECT label, avg(wi), avg(gi), avg(wx), avg(gx) FROM d GROUP BY label"
                      " ORDER BY min(kind), min(" SQ_PRESET_ORDER("preset") "), min(id)");
    }
}

/* ------------------------------------------------------------------------ */
/* loss                                                                     */
/* ------------------------------------------------------------------------ */

/* The training runs with steps, each named by its label (and its seed where
** its label has several): d(id, preset, name, seed). */
static void loss_base(sq_sql *b)
{
    sq_sql_add(b, "WITH r AS (");
    sq_fig_sel(b, "train");
    sq_sql_add(b, " AND id IN (SELECT run_id FROM train_steps)), ");
    sq_sql_labels(b, "p.key LIKE 'grad.%' OR p.key LIKE 'weight.%' OR p.key LIKE 'model.%' OR"
                     " p.key LIKE 'train.%'");
    sq_sql_add(b, ", d AS (SELECT lab.id, lab.preset, lab.label || CASE WHEN count(*) OVER "
                  "(PARTITION BY lab.label) > 1 THEN ' seed ' || u.seed ELSE '' END AS name, "
                  "u.seed FROM lab JOIN runs u ON u.id = lab.id) ");
}

/* The curves: the training loss as a moving mean over the last ?2 steps,
** the validation loss, both from step ?3 on (ints: how many it binds). */
static void loss_sql(sq_sql *q, sq_figure_query which, int *ints)
{
    *ints = 0;
    switch (which) {
    case SQ_FIG_LOSS_DRAWN:
        loss_base(q);
        sq_sql_add(q, "SELECT id FROM d");
        break;
    case SQ_FIG_LOSS_RUNS:
        /* the runs in preset order: id, name, preset */
        loss_base(q);
        sq_sql_add(q, "SELECT id, name, preset FROM d ORDER BY " SQ_PRESET_ORDER("preset")
                      ", name");
        break;
    case SQ_FIG_LOSS_MAX_STEP:
        sq_sql_add(q, "SELECT max(step) FROM train_steps WHERE run_id IN (");
        loss_base(q);
        sq_sql_add(q, "SELECT id FROM d)");
        break;
    case SQ_FIG_LOSS_TRAIN:
        /* every run's curve in one query, the run's id first */
        sq_sql_add(q, "SELECT run_id, step, m FROM (SELECT run_id, step, avg(loss) OVER (PARTITION "
                      "BY run_id ORDER BY step ROWS BETWEEN ?2 - 1 PRECEDING AND CURRENT ROW) AS m "
                      "FROM train_steps WHERE run_id IN (");
        loss_base(q);
        sq_sql_add(q, "SELECT id FROM d)) WHERE step >= ?3 ORDER BY run_id, step");
        *ints = 2;
        break;
    default:
        sq_sql_add(q, "SELECT run_id, step, val_loss FROM train_steps WHERE run_id IN (");
        loss_base(q);
        sq_sql_add(q, "SELECT id FROM d) AND val_loss IS NOT NULL AND step >= ?3 ORDER BY "
                      "run_id, step");
        *ints = 2;
    }
}

/* ------------------------------------------------------------------------ */
/* bench, speedup: the latest run within the selection                      */
/* ------------------------------------------------------------------------ */

/* sql into b with {bench} as the selected bench runs, {model} the model
** runs, {run} as the latest bench run with results and {threads} as its
** largest thread count, {mrun} the latest model run with speedups: the
** last three as subqueries, so that no value of the database is written
** into SQL. */
static void expand(sq_sql *b, const char *sql)
{
    static const struct {
        const char *name, *text;
    } part[] = {
        {"{run}", "(SELECT max(id) FROM ({bench}) WHERE id IN (SELECT run_id FROM "
                  "bench_results))"},
        {"{threads}", "(SELECT max(threads) FROM bench_results WHERE run_id = {run})"},
        {"{mrun}", "(SELECT max(id) FROM ({model}) WHERE id IN (SELECT run_id FROM "
                   "model_results WHERE speedup IS NOT NULL))"},
    };
    while (*sql) {
        size_t k = strcspn(sql + 1, "{") + 1;
        int done = 0;
        if (!strncmp(sql, "{bench}", 7) || !strncmp(sql, "{model}", 7)) {
            sq_fig_sel(b, sql[1] == 'b' ? "bench" : "model");
            k = 7;
            done = 1;
        }
        for (size_t i = 0; !done && i < sizeof part / sizeof part[0]; i++)
            if (!strncmp(sql, part[i].name, strlen(part[i].name))) {
                expand(b, part[i].text);
                k = strlen(part[i].name);
                done = 1;
            }
        if (!done) sq_sql_add(b, "%.*s", (int)k, sql);
        sql += k;
    }
}

/* A figure under half of the same op and size's 1-thread figure on more than
** 1 thread (SQ_BENCH_SLOW). */
#define SLOW                                                                                   \
    "(b.threads > 1 AND b.gb_per_s < 0.5 * (SELECT o.gb_per_s FROM bench_results o WHERE "     \
    "o.run_id = b.run_id AND o.op = b.op AND o.elements = b.elements AND o.threads = 1))"

/* json_valid: a config that is not JSON gives '' rather than failing the
** query and the figure */
#define CONFIG(field)                                                                          \
    "SELECT coalesce(CASE WHEN json_valid(config) THEN json_extract(config, '$." field         \
    "') END"

static const char *const latest_sql[] = {
    [SQ_FIG_BENCH_COUNT] = "SELECT count(*) FROM ({bench}) WHERE id IN (SELECT run_id FROM "
                           "bench_results)",
    [SQ_FIG_BENCH_RUN] = "SELECT {run}",
    [SQ_FIG_BENCH_THREADS] = "SELECT {threads}",
    [SQ_FIG_BENCH_WHERE] = CONFIG("description") ", device, '') FROM runs WHERE id = {run}",
    [SQ_FIG_BENCH_OPS] = "SELECT op FROM bench_results WHERE run_id = {run} AND threads = "
                         "{threads} AND op <> 'copy' GROUP BY op ORDER BY max(gb_per_s) DESC",
    [SQ_FIG_BENCH_ROWS] = "SELECT op, elements * 4.0 / 1048576, gb_per_s, coalesce(gb_per_s_std, "
                          "0), coalesce(" SLOW ", 0) FROM bench_results b WHERE run_id = {run} "
                          "AND threads = {threads} ORDER BY op, elements",
    [SQ_FIG_BENCH_NOISY] = "SELECT count(*) FROM bench_results b WHERE run_id = {run} AND "
                           "threads = {threads} AND (gb_per_s_std > 0.25 * gb_per_s OR " SLOW ")",
    [SQ_FIG_BENCH_COPY] = "SELECT elements * 4.0 / 1048576, copy_gb_per_s FROM bench_results "
                          "WHERE run_id = {run} AND threads = {threads} AND op = (SELECT min(op) "
                          "FROM bench_results WHERE run_id = {run}) ORDER BY elements",
    [SQ_FIG_SPEEDUP_COUNT] = "SELECT count(*) FROM ({model}) WHERE id IN (SELECT run_id FROM "
                             "model_results WHERE speedup IS NOT NULL)",
    [SQ_FIG_SPEEDUP_RUN] = "SELECT {mrun}",
    [SQ_FIG_SPEEDUP_SCHEMES] = "SELECT preset FROM (SELECT DISTINCT scheme AS preset FROM "
                               "model_results WHERE run_id = {mrun} AND speedup IS NOT NULL) "
                               "ORDER BY " SQ_PRESET_ORDER("preset") ", preset",
    [SQ_FIG_SPEEDUP_ROWS] = "SELECT scheme, gpus, speedup FROM model_results WHERE run_id = "
                            "{mrun} AND speedup IS NOT NULL ORDER BY scheme, gpus",
    [SQ_FIG_SPEEDUP_MODEL] = CONFIG("model") ", '') FROM runs WHERE id = {mrun}",
    [SQ_FIG_SPEEDUP_PLATFORM] = CONFIG("platform") ", '') FROM runs WHERE id = {mrun}",
};

/* ------------------------------------------------------------------------ */
/* The queries                                                              */
/* ------------------------------------------------------------------------ */

int sq_store_figure_query(sq_store *s, sq_figure_query q, const char *ids,
                          const sq_figure_knobs *k, sq_store_cursor **out, sq_error *err)
{
    static const sq_figure_knobs none = {0};
    if (!k) k = &none;
    *out = NULL;
    if ((unsigned)q > SQ_FIG_SPEEDUP_PLATFORM || (unsigned)k->path > SQ_FIG_WEIGHT)
        return sq_error_set(err, SQ_ERR_ARG, "no figure query %d (path %d)", (int)q, k->path);
    sq_sql sql = {0};
    int nints = 0;
    if (q >= SQ_FIG_BENCH_COUNT)
        expand(&sql, latest_sql[q]);
    else if (q >= SQ_FIG_LOSS_DRAWN)
        loss_sql(&sql, q, &nints);
    else if (q >= SQ_FIG_BYTES_DRAWN)
        bytes_sql(&sql, q);
    else
        sq_fig_replay_sql(&sql, q, k);
    const int64_t ints[2] = {k->window, k->from};
    return sq_store_cursor_prepare_sql(s, &sql, ids, ints, nints, out, err);
}
