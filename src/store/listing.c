/*
** listing.c -- the queries of `db list` and `db show` (store_rows.h): the
** runs one line each, and one run's row and sections, as named cursors
** whose columns are those shown, and a run's params, tensor count and
** netbench rows as structs.
*/
#include "cursor_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RUN_FILTER(STATUS)                                                                    \
    " WHERE (?1 IS NULL OR " STATUS " = ?1) AND (?2 IS NULL OR r.kind = ?2)"                  \
    " AND (?3 IS NULL OR r.sweep = ?3)"                                                        \
    " AND (?4 IS NULL OR r.id IN (SELECT value FROM json_each(?4))) ORDER BY r.id"
/* the status as shown; a store of version 3 or older knows no start times */
#define STATUS_V4 "sq_status(r.status, r.host, r.pid, r.pid_start, r.boot_id)"
#define STATUS_V3 "sq_status(r.status, r.host, r.pid, NULL, NULL)"
/* julianday has ~10 us of resolution this far from its epoch: round to ms */
#define SECONDS "round((julianday(r.ended) - julianday(r.started)) * 86400.0, 3)"
#define MEAN_REL_L2(p) \
    "(SELECT avg(m.rel_l2) FROM step_metrics m WHERE m.run_id = r.id AND m.path = '" p "')"

/* the columns of sq_run_summary, in its order */
#define SUMMARY_SQL(STATUS)                                                                     \
    "SELECT r.id, " STATUS ", r.kind, r.key, r.sweep, r.preset, r.scheme, r.topo, r.device,"   \
    " r.trace, sq_basename(r.trace), r.seed, r.started,"                                       \
    " replace(substr(r.started, 1, 19), 'T', ' '), r.ended, " SECONDS ","                      \
    " sq_duration(" SECONDS "), " MEAN_REL_L2("grad") ", " MEAN_REL_L2("weight") ", r.error"  \
    " FROM runs r" RUN_FILTER(STATUS)

#define NETBENCH_ORDER                                                                         \
    " CASE level WHEN 'intra' THEN 0 WHEN 'inter' THEN 1 ELSE 2 END,"                          \
    " CASE op WHEN 'allgather' THEN 0 WHEN 'reducescatter' THEN 1 ELSE 2 END"

/* The named queries; a name's entries go newest schema first, and the
** first whose version the file has is the one run. */
static const struct {
    const char *name;
    int min_version;
    const char *sql;
} queries[] = {
    {"run", 0, "SELECT r.*, " SECONDS " AS seconds FROM runs r WHERE r.id = ?1"},
    {"run.metrics", 0,
     "SELECT m.path AS path, count(*) AS steps, max(m.elements) AS elements,"
     " avg(m.rel_l2) AS mean_rel_l2,"
     " (SELECT l.rel_l2 FROM step_metrics l WHERE l.run_id = m.run_id AND l.path = m.path"
     "  ORDER BY l.step DESC LIMIT 1) AS last_rel_l2,"
     " avg(m.snr_db) AS mean_snr_db, avg(m.cosine) AS mean_cosine, max(m.max_abs) AS max_abs,"
     " avg(m.mean_signed) AS mean_signed, avg(m.frac_zeroed) AS frac_zeroed,"
     " avg(m.frac_clipped) AS frac_clipped, sum(m.seconds) AS seconds"
     " FROM step_metrics m WHERE m.run_id = ?1 GROUP BY m.path ORDER BY m.path"},
    {"run.bytes", 5,
     "SELECT collective, link, sent_codes, sent_meta, recv_codes, recv_meta, sent_elems,"
     " messages, bits_per_elem, sent_params, bits_per_param FROM bytes WHERE run_id = ?1"
     " ORDER BY collective, link"},
    /* a file of schema version 4 or older (read as it is) has no sent_params */
    {"run.bytes", 0,
     "SELECT collective, link, sent_codes, sent_meta, recv_codes, recv_meta, sent_elems,"
     " messages, bits_per_elem FROM bytes WHERE run_id = ?1 ORDER BY collective, link"},
    {"run.timings", 0,
     "SELECT op, calls, seconds, bytes, gb_per_s FROM timings WHERE run_id = ?1 ORDER BY op"},
    {"run.netbench", 6,
     "SELECT level, op, max(ranks) AS ranks, max(comms) AS comms, count(*) AS sizes,"
     " min(bytes) AS min_bytes, max(bytes) AS max_bytes,"
     " (SELECT round(x.seconds * 1e6, 3) FROM netbench_results x WHERE x.run_id = n.run_id"
     "  AND x.level = n.level AND x.op = n.op ORDER BY x.bytes LIMIT 1) AS small_time_us,"
     " (SELECT x.busbw_gb_s FROM netbench_results x WHERE x.run_id = n.run_id"
     "  AND x.level = n.level AND x.op = n.op ORDER BY x.bytes DESC LIMIT 1) AS large_busbw_gb_s"
     " FROM netbench_results n WHERE n.run_id = ?1 GROUP BY level, op ORDER BY" NETBENCH_ORDER},
};

int sq_store_query(sq_store *s, const char *name, const sq_store_value *args, int nargs,
                   sq_store_cursor **out, sq_error *err)
{
    if (!s || !name || !out || (nargs && !args))
        return sq_error_set(err, SQ_ERR_ARG, "no store, query name or cursor");
    int known = 0;
    for (size_t i = 0; i < sizeof queries / sizeof queries[0]; i++) {
        if (strcmp(queries[i].name, name)) continue;
        known = 1;
        if (sq_store_version(s) < queries[i].min_version) continue;
        sqlite3_stmt *st;
        int rc = sq_store_prepare(s, queries[i].sql, args, nargs, &st, err);
        return rc ? rc : sq_store_cursor_wrap(s, st, out, err);
    }
    if (known)
        return sq_error_set(err, SQ_ERR_NOTFOUND, "%s: schema version %d has no '%s'",
                            sq_store_path(s), sq_store_version(s), name);
    return sq_error_set(err, SQ_ERR_ARG, "no query named '%s'", name);
}

int sq_store_runs_open(sq_store *s, const sq_run_filter *f, sq_store_cursor **out,
                       sq_error *err)
{
    if (!s || !out) return sq_error_set(err, SQ_ERR_ARG, "no store or cursor");
    static const sq_run_filter all = {0};
    if (!f) f = &all;
    const sq_store_value args[] = {{.type = SQ_STORE_TEXT, .text = f->status},
                                   {.type = SQ_STORE_TEXT, .text = f->kind},
                                   {.type = SQ_STORE_TEXT, .text = f->sweep},
                                   {.type = SQ_STORE_TEXT, .text = f->ids}};
    sqlite3_stmt *st;
    int rc = sq_store_prepare(s, sq_store_version(s) >= 4 ? SUMMARY_SQL(STATUS_V4)
                                                          : SUMMARY_SQL(STATUS_V3),
                              args, 4, &st, err);
    return rc ? rc : sq_store_cursor_wrap(s, st, out, err);
}

static const char *text_at(sqlite3_stmt *st, int i)
{
    return (const char *)sqlite3_column_text(st, i);
}

static double real_at(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

int sq_store_runs_next(sq_store_cursor *c, sq_run_summary *row, sq_error *err)
{
    if (!row) return sq_error_set(err, SQ_ERR_ARG, "no row");
    int rc = sq_store_cursor_step(c, err);
    if (rc != 1) return rc;
    sqlite3_stmt *st = c->st;
    *row = (sq_run_summary){
        .id = sqlite3_column_int64(st, 0),
        .status = text_at(st, 1),
        .kind = text_at(st, 2),
        .key = text_at(st, 3),
        .sweep = text_at(st, 4),
        .preset = text_at(st, 5),
        .scheme = text_at(st, 6),
        .topo = text_at(st, 7),
        .device = text_at(st, 8),
        .trace = text_at(st, 9),
        .trace_name = text_at(st, 10),
        .seed = sqlite3_column_int64(st, 11),
        .started = text_at(st, 12),
        .started_text = text_at(st, 13),
        .ended = text_at(st, 14),
        .seconds = real_at(st, 15),
        .duration = text_at(st, 16),
        .grad_rel_l2 = real_at(st, 17),
        .weight_rel_l2 = real_at(st, 18),
        .error = text_at(st, 19),
    };
    return 1;
}

/* Runs sql with the run's id bound to ?1 up to its first row: 1 with *st
** on it, 0 without one (*st finalized), or a negative kind. */
static int first_row(sq_store *s, const char *sql, int64_t run, sqlite3_stmt **st, sq_error *err)
{
    sq_store_value id = {.type = SQ_STORE_INTEGER, .i = run};
    int rc = sq_store_prepare(s, sql, &id, 1, st, err);
    if (rc) return rc;
    rc = sqlite3_step(*st);
    if (rc == SQLITE_ROW) return 1;
    rc = rc == SQLITE_DONE ? 0 : sq_store_read_error(s, err);
    sqlite3_finalize(*st);
    *st = NULL;
    return rc;
}

int sq_store_run_exists(sq_store *s, int64_t run, int *found, sq_error *err)
{
    if (!s || !found) return sq_error_set(err, SQ_ERR_ARG, "no store or no result");
    sqlite3_stmt *st;
    int rc = first_row(s, "SELECT 1 FROM runs WHERE id = ?1", run, &st, err);
    if (rc < 0) return rc;
    *found = rc;
    sqlite3_finalize(st);
    return SQ_OK;
}

int sq_store_run_tensor_count(sq_store *s, int64_t run, sq_store_tensor_count *out,
                              sq_error *err)
{
    if (!s || !out) return sq_error_set(err, SQ_ERR_ARG, "no store or no result");
    sqlite3_stmt *st;
    int rc = first_row(s, "SELECT count(*), count(DISTINCT tensor) FROM tensor_stats"
                          " WHERE run_id = ?1", run, &st, err);
    if (rc < 0) return rc;
    out->rows = rc ? sqlite3_column_int64(st, 0) : 0;
    out->tensors = rc ? sqlite3_column_int64(st, 1) : 0;
    sqlite3_finalize(st);
    return SQ_OK;
}

static char *dup_text(sqlite3_stmt *st, int i, int *oom)
{
    const char *t = (const char *)sqlite3_column_text(st, i);
    if (!t) return NULL;
    char *d = strdup(t);
    if (!d) *oom = 1;
    return d;
}

/* Appends one element of size `size` to *v (count *n, capacity *cap);
** returns the new element, zeroed, or NULL when out of memory. */
static void *grow(void **v, size_t *n, size_t *cap, size_t size)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 16;
        void *p = realloc(*v, c * size);
        if (!p) return NULL;
        *v = p;
        *cap = c;
    }
    void *e = (char *)*v + (*n)++ * size;
    memset(e, 0, size);
    return e;
}

/* After the loop that read st's rows into an array (rc its last step; oom:
** an allocation failed, or the loop stopped on a row): the status, st
** finalized. */
static int rows_end(sq_store *s, sqlite3_stmt *st, int rc, int oom, sq_error *err)
{
    if (oom || rc == SQLITE_ROW)
        rc = sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    else
        rc = rc == SQLITE_DONE ? SQ_OK : sq_store_read_error(s, err);
    sqlite3_finalize(st);
    return rc;
}

int sq_store_run_params(sq_store *s, int64_t run, sq_store_param **out, size_t *n,
                        sq_error *err)
{
    if (!s || !out || !n) return sq_error_set(err, SQ_ERR_ARG, "no store or no result");
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st;
    sq_store_value id = {.type = SQ_STORE_INTEGER, .i = run};
    int rc = sq_store_prepare(s, "SELECT key, value FROM params WHERE run_id = ?1 ORDER BY key",
                              &id, 1, &st, err);
    if (rc) return rc;
    size_t cap = 0;
    int oom = 0;
    while (!oom && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        sq_store_param *p = grow((void **)out, n, &cap, sizeof *p);
        if (!p) break;
        p->key = dup_text(st, 0, &oom);
        p->value = dup_text(st, 1, &oom);
        oom |= !p->key;
    }
    rc = rows_end(s, st, rc, oom, err);
    if (rc) {
        sq_store_params_free(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

void sq_store_params_free(sq_store_param *p, size_t n)
{
    for (size_t i = 0; p && i < n; i++) {
        free(p[i].key);
        free(p[i].value);
    }
    free(p);
}

int sq_store_run_netbench(sq_store *s, int64_t run, sq_netbench_row **out, size_t *n,
                          sq_error *err)
{
    if (!s || !out || !n) return sq_error_set(err, SQ_ERR_ARG, "no store or no result");
    *out = NULL;
    *n = 0;
    if (sq_store_version(s) < 6) return SQ_OK; /* no netbench_results yet */
    sqlite3_stmt *st;
    sq_store_value id = {.type = SQ_STORE_INTEGER, .i = run};
    int rc = sq_store_prepare(s,
                              "SELECT op, level, bytes, count, ranks, comms, iters, seconds,"
                              " algbw_gb_s, busbw_gb_s FROM netbench_results WHERE run_id = ?1"
                              " ORDER BY" NETBENCH_ORDER ", bytes",
                              &id, 1, &st, err);
    if (rc) return rc;
    size_t cap = 0;
    int oom = 0;
    while (!oom && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        sq_netbench_row *r = grow((void **)out, n, &cap, sizeof *r);
        if (!r) break;
        r->op = dup_text(st, 0, &oom);
        r->level = dup_text(st, 1, &oom);
        r->bytes = (uint64_t)sqlite3_column_int64(st, 2);
        r->count = (uint64_t)sqlite3_column_int64(st, 3);
        r->ranks = sqlite3_column_int(st, 4);
        r->comms = sqlite3_column_int(st, 5);
        r->iters = sqlite3_column_int(st, 6);
        r->seconds = sqlite3_column_double(st, 7);
        r->algbw_gb_s = sqlite3_column_double(st, 8);
        r->busbw_gb_s = sqlite3_column_double(st, 9);
        oom |= !r->op || !r->level;
    }
    rc = rows_end(s, st, rc, oom, err);
    if (rc) {
        sq_store_netbench_free(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

void sq_store_netbench_free(sq_netbench_row *rows, size_t n)
{
    for (size_t i = 0; rows && i < n; i++) {
        free((char *)rows[i].op);
        free((char *)rows[i].level);
    }
    free(rows);
}
