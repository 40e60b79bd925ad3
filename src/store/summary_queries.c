/*
** summary_queries.c -- the queries behind `shardq demo`'s summary
** (summary_queries.h): the runs a phase reuses and the figures of its
** three lines and of the report's Setup.
**
** A set of runs comes as an array of ids, bound as one JSON array and
** read back with json_each: the SQL text is fixed, whatever the set.
*/
#include "store/summary_queries.h"

#include <sqlite3.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The runs among the ids bound as ?1. */
#define IN_IDS "r.id IN (SELECT value FROM json_each(?1))"

/* Replays that ran both paths: the figures of one path compare like with like. */
#define BOTH_PATHS "r.key LIKE '%paths=grad,weight%'"

static int fail(sq_store *s, sqlite3_stmt *st, sq_error *err)
{
    sqlite3_finalize(st);
    return sq_error_set(err, SQ_ERR_FORMAT, "%s: %s", sq_store_path(s),
                        sqlite3_errmsg(sq_store_db(s)));
}

static int prepare(sq_store *s, const char *sql, sqlite3_stmt **st, sq_error *err)
{
    *st = NULL;
    if (sqlite3_prepare_v2(sq_store_db(s), sql, -1, st, NULL) != SQLITE_OK)
        return fail(s, *st, err);
    return SQ_OK;
}

/* ids as the JSON array "[1,2,3]" bound to parameter k. */
static int bind_ids(sq_store *s, sqlite3_stmt *st, int k, const int64_t *ids, size_t n,
                    sq_error *err)
{
    char *json = malloc(n * 21 + 3);
    if (!json) {
        sqlite3_finalize(st);
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory for %zu run ids",
                            sq_store_path(s), n);
    }
    size_t len = 0;
    json[len++] = '[';
    for (size_t i = 0; i < n; i++)
        len += (size_t)sprintf(json + len, "%s%lld", i ? "," : "", (long long)ids[i]);
    json[len++] = ']';
    if (sqlite3_bind_text(st, k, json, (int)len, free) != SQLITE_OK) return fail(s, st, err);
    return SQ_OK;
}

/* The first column of the statement's first row as a number (NaN: no row,
** or NULL); the statement is finalized. */
static int one_double(sq_store *s, sqlite3_stmt *st, double *v, sq_error *err)
{
    *v = NAN;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
        *v = sqlite3_column_double(st, 0);
    else if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return fail(s, st, err);
    sqlite3_finalize(st);
    return SQ_OK;
}

static int one_id(sq_store *s, sqlite3_stmt *st, int64_t *id, sq_error *err)
{
    double v;
    int rc = one_double(s, st, &v, err);
    *id = rc == SQ_OK && !isnan(v) ? (int64_t)v : 0;
    return rc;
}

/* The same as text into buf ("?": no row, or NULL). */
static int one_text(sq_store *s, sqlite3_stmt *st, char *buf, size_t len, sq_error *err)
{
    snprintf(buf, len, "?");
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_text(st, 0))
        snprintf(buf, len, "%s", (const char *)sqlite3_column_text(st, 0));
    else if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return fail(s, st, err);
    sqlite3_finalize(st);
    return SQ_OK;
}

int sq_store_done_run_by_key(sq_store *s, const char *key, int64_t *id, sq_error *err)
{
    sqlite3_stmt *st;
    *id = 0;
    int rc = prepare(s, "SELECT id FROM runs WHERE key = ?1 AND status = 'done'", &st, err);
    if (rc) return rc;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    return one_id(s, st, id, err);
}

/* ------------------------------------------------------------------------ */
/* The runs of a phase that carry no key                                    */
/* ------------------------------------------------------------------------ */

#define BENCH_SQL                                                                          \
    "SELECT max(id) FROM runs WHERE kind = 'bench' AND status = 'done' AND "                    \
    "json_extract(config, '$.device') = 'cpu' AND json_extract(config, '$.codec') IS NULL AND " \
    "json_extract(config, '$.sizes_mb') = ?1 AND json_extract(config, '$.ops') = ?2 AND "       \
    "json_extract(config, '$.min_time') = ?3 AND id IN (SELECT run_id FROM bench_results)"
/* a figure that stayed noisy: b is the bench_results row */
#define BENCH_NOISY_ROW                                                                    \
    "(b.gb_per_s_std > 0.25 * b.gb_per_s OR (b.threads > 1 AND b.gb_per_s < 0.5 * "        \
    "(SELECT o.gb_per_s FROM bench_results o WHERE o.run_id = b.run_id AND o.op = b.op AND " \
    "o.elements = b.elements AND o.threads = 1)))"

int sq_store_find_bench_run(sq_store *s, const char *sizes_json, const char *ops_json,
                            double min_time, int steady, int64_t *id, sq_error *err)
{
    static const char any[] = BENCH_SQL;
    static const char calm[] = BENCH_SQL " AND NOT EXISTS (SELECT 1 FROM bench_results b WHERE "
                                         "b.run_id = runs.id AND " BENCH_NOISY_ROW ")";
    sqlite3_stmt *st;
    *id = 0;
    int rc = prepare(s, steady ? calm : any, &st, err);
    if (rc) return rc;
    sqlite3_bind_text(st, 1, sizes_json, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, ops_json, -1, SQLITE_STATIC);
    if (min_time > 0) sqlite3_bind_double(st, 3, min_time);
    return one_id(s, st, id, err);
}

int sq_store_find_model_run(sq_store *s, const char *platform, const char *model,
                            const char *const *schemes, size_t n, int64_t *id, sq_error *err)
{
    sqlite3_stmt *st;
    *id = 0;
    int rc = prepare(s,
                     "SELECT max(id) FROM runs WHERE kind = 'model' AND status = 'done' AND "
                     "json_extract(config, '$.platform') = ?1 AND "
                     "json_extract(config, '$.model') = ?2 AND "
                     "(SELECT count(DISTINCT gpus) FROM model_results WHERE run_id = runs.id) > 1 "
                     "AND (SELECT count(DISTINCT scheme) FROM model_results WHERE run_id = runs.id "
                     "AND scheme IN (SELECT value FROM json_each(?3))) = ?4",
                     &st, err);
    if (rc) return rc;
    /* the schemes as a JSON array of strings: names are [a-z0-9]+, checked */
    size_t cap = 3, len = 0;
    for (size_t i = 0; i < n; i++) cap += strlen(schemes[i]) + 3;
    char *json = malloc(cap);
    if (!json) {
        sqlite3_finalize(st);
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", sq_store_path(s));
    }
    json[len++] = '[';
    for (size_t i = 0; i < n; i++) {
        if (strpbrk(schemes[i], "\"\\")) {
            free(json);
            sqlite3_finalize(st);
            return sq_error_set(err, SQ_ERR_ARG, "%s: scheme '%s': not a preset's name",
                                sq_store_path(s), schemes[i]);
        }
        len += (size_t)sprintf(json + len, "%s\"%s\"", i ? "," : "", schemes[i]);
    }
    json[len++] = ']';
    sqlite3_bind_text(st, 1, platform, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, model, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, json, (int)len, free);
    sqlite3_bind_int64(st, 4, (sqlite3_int64)n);
    return one_id(s, st, id, err);
}

/* ------------------------------------------------------------------------ */
/* The figures of the three lines                                           */
/* ------------------------------------------------------------------------ */

/* sql over the ids bound as ?1 and the texts t2, t3, t4 (NULL: not bound)
** as ?2 .. ?4: its first value. */
static int ids_double(sq_store *s, const char *sql, const int64_t *ids, size_t n,
                      const char *t2, const char *t3, const char *t4, double *v, sq_error *err)
{
    sqlite3_stmt *st;
    *v = NAN;
    int rc = prepare(s, sql, &st, err);
    if (rc || (rc = bind_ids(s, st, 1, ids, n, err))) return rc;
    const char *t[3] = {t2, t3, t4};
    for (int k = 0; k < 3; k++)
        if (t[k]) sqlite3_bind_text(st, k + 2, t[k], -1, SQLITE_STATIC);
    return one_double(s, st, v, err);
}

int sq_store_summary_replay_error(sq_store *s, const int64_t *ids, size_t n, const char *preset,
                                  const char *path, double *v, sq_error *err)
{
    return ids_double(s,
                      "SELECT avg(m.rel_l2) FROM runs r JOIN step_metrics m ON m.run_id = r.id "
                      "WHERE " IN_IDS " AND r.preset = ?2 AND m.path = ?3 AND " BOTH_PATHS,
                      ids, n, preset, path, NULL, v, err);
}

int sq_store_summary_replay_bits(sq_store *s, const int64_t *ids, size_t n, const char *preset,
                                 const char *collective, const char *link, double *v,
                                 sq_error *err)
{
    return ids_double(s,
                      "SELECT 8.0 * sum(b.sent_codes + b.sent_meta) / sum(b.sent_params) "
                      "FROM runs r JOIN bytes b ON b.run_id = r.id WHERE " IN_IDS " AND "
                      "r.preset = ?2 AND " BOTH_PATHS " AND b.collective = ?3 AND b.link = ?4 "
                      "AND b.sent_elems > 0",
                      ids, n, preset, collective, link, v, err);
}

int sq_store_summary_final_val(sq_store *s, const int64_t *ids, size_t n, const char *preset,
                               double *v, sq_error *err)
{
    return ids_double(s,
                      "SELECT t.val_loss FROM runs r JOIN train_steps t ON t.run_id = r.id "
                      "WHERE " IN_IDS " AND r.preset = ?2 AND t.val_loss IS NOT NULL "
                      "ORDER BY t.step DESC LIMIT 1",
                      ids, n, preset, NULL, NULL, v, err);
}

int sq_store_summary_final_vals(sq_store *s, const int64_t *ids, size_t n, const char *preset,
                                double *vals, size_t max, size_t *count, sq_error *err)
{
    sqlite3_stmt *st;
    *count = 0;
    int rc = prepare(s,
                     "SELECT t.val_loss FROM runs r JOIN train_steps t ON t.run_id = r.id "
                     "WHERE " IN_IDS " AND r.preset = ?2 AND t.step = (SELECT max(step) FROM "
                     "train_steps WHERE run_id = r.id AND val_loss IS NOT NULL)",
                     &st, err);
    if (rc || (rc = bind_ids(s, st, 1, ids, n, err))) return rc;
    sqlite3_bind_text(st, 2, preset, -1, SQLITE_STATIC);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*count < max) vals[*count] = sqlite3_column_double(st, 0);
        (*count)++;
    }
    if (rc != SQLITE_DONE) return fail(s, st, err);
    sqlite3_finalize(st);
    return SQ_OK;
}

int sq_store_summary_speedup(sq_store *s, int64_t run, const char *scheme, int gpus, double *v,
                             sq_error *err)
{
    sqlite3_stmt *st;
    *v = NAN;
    int rc = prepare(s,
                     "SELECT speedup FROM model_results WHERE run_id = ?1 AND scheme = ?2 AND "
                     "gpus = CASE WHEN ?3 > 0 THEN ?3 ELSE (SELECT max(gpus) FROM model_results "
                     "WHERE run_id = ?1) END",
                     &st, err);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_text(st, 2, scheme, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, gpus);
    return one_double(s, st, v, err);
}

int sq_store_summary_max_gpus(sq_store *s, int64_t run, int *gpus, sq_error *err)
{
    sqlite3_stmt *st;
    double v;
    *gpus = 0;
    int rc = prepare(s, "SELECT max(gpus) FROM model_results WHERE run_id = ?1", &st, err);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, run);
    rc = one_double(s, st, &v, err);
    if (rc == SQ_OK && !isnan(v)) *gpus = (int)v;
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The Setup                                                                */
/* ------------------------------------------------------------------------ */

int sq_store_run_param_text(sq_store *s, int64_t run, const char *key, char *buf, size_t len,
                            sq_error *err)
{
    sqlite3_stmt *st;
    snprintf(buf, len, "?");
    int rc = prepare(s, "SELECT value FROM params WHERE run_id = ?1 AND key = ?2", &st, err);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    return one_text(s, st, buf, len, err);
}

int sq_store_run_host(sq_store *s, int64_t run, char *buf, size_t len, sq_error *err)
{
    sqlite3_stmt *st;
    snprintf(buf, len, "?");
    int rc = prepare(s, "SELECT host FROM runs WHERE id = ?1", &st, err);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, run);
    return one_text(s, st, buf, len, err);
}

int sq_store_summary_seeds(sq_store *s, const int64_t *ids, size_t n, char *buf, size_t len,
                           sq_error *err)
{
    sqlite3_stmt *st;
    snprintf(buf, len, "?");
    int rc = prepare(s,
                     "SELECT group_concat(seed, ', ') FROM (SELECT DISTINCT seed FROM runs r "
                     "WHERE " IN_IDS " ORDER BY seed)",
                     &st, err);
    if (rc || (rc = bind_ids(s, st, 1, ids, n, err))) return rc;
    return one_text(s, st, buf, len, err);
}
