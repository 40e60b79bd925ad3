/*
** report_tables.c -- the tables of `shardq report` (store_query.h): per
** kind the done runs, per scheme the quantization error, the bits sent and
** the final losses, and the latest bench and model runs, over the runs the
** report selected. Each run is labelled as in the figures (sq_sql_labels).
*/
#include "store/report_sql.h"

#include <sqlite3.h>

#include <math.h>

/* report_sqrt(x): the square root, NULL for NULL or a negative x (the
** bias of a run whose mean squared error is not there). */
static void fn_sqrt(sqlite3_context *cx, int argc, sqlite3_value **argv)
{
    (void)argc;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return;
    double v = sqlite3_value_double(argv[0]);
    if (v >= 0) sqlite3_result_double(cx, sqrt(v));
}

static int exec(sq_store *s, const char *sql, sq_error *err)
{
    sqlite3 *db = sq_store_db(s);
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK) return SQ_OK;
    return sq_error_set(err, SQ_ERR_IO, "%s: %s", sq_store_path(s), sqlite3_errmsg(db));
}

int sq_store_report_begin(sq_store *s, sq_error *err)
{
    if (sqlite3_create_function(sq_store_db(s), "report_sqrt", 1,
                                SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, fn_sqrt, NULL,
                                NULL) != SQLITE_OK)
        return sq_error_set(err, SQ_ERR_IO, "%s: %s", sq_store_path(s),
                            sqlite3_errmsg(sq_store_db(s)));
    return exec(s, "BEGIN", err);
}

int sq_store_report_end(sq_store *s, sq_error *err) { return exec(s, "COMMIT", err); }

/* "WITH r AS (the selected done runs of kinds), " */
static void runs_cte(sq_sql *b, const char *kinds, const char *extra)
{
    sq_sql_add(b, "WITH r AS (SELECT id FROM runs WHERE status = 'done' AND kind IN (%s) AND "
                  SQ_WITHIN "%s), ",
               kinds, extra ? extra : "");
}

static void table_runs(sq_sql *s)
{
    sq_sql_add(s, "SELECT kind, count(*) AS \"done runs\", group_concat(id) AS runs FROM runs "
                  "WHERE status = 'done' AND " SQ_WITHIN " GROUP BY kind ORDER BY min(id)");
}

static void table_errors(sq_sql *s)
{
    runs_cte(s, "'replay'", NULL);
    sq_sql_labels(s, "p.key LIKE 'grad.%' OR p.key LIKE 'weight.%'");
    sq_sql_add(
        s,
        ", e AS (SELECT run_id AS id, path, avg(rel_l2) AS err, avg(snr_db) AS snr, "
        "avg(mean_signed) / report_sqrt(avg(mse)) AS bias FROM step_metrics WHERE run_id IN r "
        "GROUP BY run_id, path), x AS (SELECT lab.id, lab.preset, lab.label, u.seed, "
        "max(CASE WHEN e.path = 'grad' THEN e.err END) AS ge, "
        "max(CASE WHEN e.path = 'grad' THEN e.snr END) AS gs, "
        "max(CASE WHEN e.path = 'grad' THEN e.bias END) AS gb, "
        "max(CASE WHEN e.path = 'weight' THEN e.err END) AS we, "
        "max(CASE WHEN e.path = 'weight' THEN e.snr END) AS ws, "
        "max(CASE WHEN e.path = 'weight' THEN e.bias END) AS wb "
        "FROM lab JOIN runs u ON u.id = lab.id JOIN e ON e.id = lab.id GROUP BY lab.id) "
        "SELECT label AS scheme, group_concat(id) AS runs, count(DISTINCT seed) AS seeds, "
        "avg(ge) AS \"grad rel. L2\", avg(gs) AS \"grad SNR dB\", "
        "100 * avg(gb) AS \"grad bias %% of RMS\", avg(we) AS \"weight rel. L2\", "
        "avg(ws) AS \"weight SNR dB\", 100 * avg(wb) AS \"weight bias %% of RMS\" "
        "FROM x GROUP BY label ORDER BY min(" SQ_PRESET_ORDER("preset") "), min(id)");
}

/* per run: the mean bits of a collective on a link level, per element sent
** (e) or per real parameter (p) */
#define BITS(c, l, per) \
    "avg(CASE WHEN collective = '" c "' AND link = '" l "' THEN bits_per_" per " END)"

static void table_bits(sq_sql *s)
{
    runs_cte(s, "'replay', 'train'", " AND id IN (SELECT run_id FROM bytes)");
    sq_sql_labels(s, "p.key LIKE 'grad.%' OR p.key LIKE 'weight.%'");
    sq_sql_add(
        s,
        ", b AS (SELECT run_id AS id, "
        BITS("weight_allgather", "intra", "elem") " AS wi, "
        BITS("weight_allgather", "inter", "elem") " AS wx, "
        BITS("grad_reducescatter", "intra", "elem") " AS gi, "
        BITS("grad_reducescatter", "inter", "elem") " AS gx, "
        BITS("weight_allgather", "intra", "param") " AS pwi, "
        BITS("weight_allgather", "inter", "param") " AS pwx, "
        BITS("grad_reducescatter", "intra", "param") " AS pgi, "
        BITS("grad_reducescatter", "inter", "param") " AS pgx "
        "FROM bytes WHERE run_id IN r GROUP BY run_id) "
        "SELECT lab.label AS scheme, u.kind AS kind, coalesce(pa.value, 'grad,weight') AS paths, "
        "group_concat(lab.id) AS runs, avg(b.wi) AS \"weight intra\", avg(b.wx) AS \"weight inter\", "
        "avg(b.gi) AS \"grad intra\", avg(b.gx) AS \"grad inter\", "
        "avg(b.pwi) AS \"weight intra /param\", avg(b.pwx) AS \"weight inter /param\", "
        "avg(b.pgi) AS \"grad intra /param\", avg(b.pgx) AS \"grad inter /param\" "
        "FROM lab JOIN runs u ON u.id = lab.id JOIN b ON b.id = lab.id LEFT JOIN params pa ON "
        "pa.run_id = lab.id AND pa.key = 'paths' GROUP BY u.kind, lab.label, pa.value "
        "ORDER BY u.kind, min(" SQ_PRESET_ORDER("lab.preset") "), min(lab.id)");
}

static void table_losses(sq_sql *s)
{
    runs_cte(s, "'train'", " AND id IN (SELECT run_id FROM train_steps)");
    sq_sql_labels(s, "p.key LIKE 'grad.%' OR p.key LIKE 'weight.%' OR p.key LIKE 'model.%' "
                     "OR p.key LIKE 'train.%'");
    sq_sql_add(
        s,
        ", f AS (SELECT run_id AS id, max(step) + 1 AS steps, "
        "(SELECT loss FROM train_steps l WHERE l.run_id = t.run_id ORDER BY step DESC LIMIT 1) AS loss, "
        "(SELECT val_loss FROM train_steps v WHERE v.run_id = t.run_id AND val_loss IS NOT NULL "
        "ORDER BY step DESC LIMIT 1) AS val FROM train_steps t WHERE run_id IN r GROUP BY run_id) "
        "SELECT lab.label AS scheme, group_concat(lab.id) AS runs, max(f.steps) AS steps, "
        "avg(f.loss) AS \"final training loss\", avg(f.val) AS \"final validation loss\", "
        "min(f.val) AS \"best seed\", max(f.val) AS \"worst seed\" "
        "FROM lab JOIN f ON f.id = lab.id GROUP BY lab.label "
        "ORDER BY min(" SQ_PRESET_ORDER("lab.preset") "), min(lab.id)");
}

static void table_bench(sq_sql *s)
{
    runs_cte(s, "'bench'", " AND id IN (SELECT run_id FROM bench_results)");
    sq_sql_add(
        s,
        "b AS (SELECT max(id) AS id FROM r), th AS (SELECT max(threads) AS n FROM bench_results "
        "WHERE run_id = (SELECT id FROM b)), sz AS (SELECT max(elements) AS n FROM bench_results "
        "WHERE run_id = (SELECT id FROM b) AND threads = (SELECT n FROM th)) "
        "SELECT op, run_id AS run, threads, elements * 4 / 1048576 AS \"size MB\", "
        "gb_per_s AS \"GB/s\", gb_per_s_std AS \"std GB/s\", copy_gb_per_s AS \"copy GB/s\", "
        "100 * gb_per_s / copy_gb_per_s AS \"%% of copy\" FROM bench_results "
        "WHERE run_id = (SELECT id FROM b) AND threads = (SELECT n FROM th) AND "
        "elements = (SELECT n FROM sz) ORDER BY op = 'copy' DESC, gb_per_s DESC");
}

static void table_model(sq_sql *s)
{
    runs_cte(s, "'model'", " AND id IN (SELECT run_id FROM model_results)");
    sq_sql_add(
        s,
        "m AS (SELECT max(id) AS id FROM r), g AS (SELECT scheme, max(gpus) AS gpus FROM "
        "model_results WHERE run_id = (SELECT id FROM m) GROUP BY scheme) "
        "SELECT x.scheme AS scheme, x.run_id AS run, x.gpus AS GPUs, x.iteration_s AS "
        "\"iteration s\", x.tflops AS \"TFLOP/s per GPU\", x.speedup AS speedup, "
        "x.inter_bytes_per_node / 1e9 AS \"inter-node GB per node\" FROM model_results x "
        "JOIN g ON g.scheme = x.scheme AND g.gpus = x.gpus WHERE x.run_id = (SELECT id FROM m) "
        "ORDER BY " SQ_PRESET_ORDER("x.scheme") ", x.scheme");
}

int sq_store_report_table(sq_store *s, sq_report_table t, const char *ids, sq_store_cursor **out,
                          sq_error *err)
{
    static void (*const build[])(sq_sql *) = {table_runs,   table_errors, table_bits,
                                              table_losses, table_bench,  table_model};
    *out = NULL;
    if ((unsigned)t >= sizeof build / sizeof build[0])
        return sq_error_set(err, SQ_ERR_ARG, "no report table %d", (int)t);
    sq_sql sql = {0};
    build[t](&sql);
    return sq_store_cursor_prepare_sql(s, &sql, ids, NULL, 0, out, err);
}
