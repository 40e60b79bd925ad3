/*
** select_tmp.c -- TEMPORARY: sq_store_select_runs (store_rows.h) as a copy
** of src/cli/where.c's rule, so that branch `db` builds before src/store/
** select.c (branch `report`) lands; deleted at that merge.
**
** The filters become one SQL condition on runs with their values quoted
** as literals (a quote doubled), never the user's SQL: a filter selects,
** it cannot run anything.
*/
#include "cursor_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The run columns a filter may name (those of an older store that lacks
** one, grid before version 7, are refused by the check below). */
static const char *const run_columns[] = {"id",   "kind", "status", "sweep", "grid",    "preset",
                                          "scheme", "topo", "device", "trace", "seed", "host",
                                          "version", NULL};

static void add_literal(sqlite3_str *b, const char *s, size_t n)
{
    sqlite3_str_appendf(b, "'%.*q'", (int)n, s);
}

/* Whether text is a decimal number (what a knob's numeric value looks like). */
static int numeric(const char *s)
{
    char *end;
    if (!*s) return 0;
    strtod(s, &end);
    return *end == '\0';
}

/* "value = V" for the text column v, numerically when V is a number and the
** stored value is one too (CAST of 'sr' would be 0). */
static void add_equal(sqlite3_str *b, const char *v, const char *val, size_t n, int num)
{
    sqlite3_str_appendf(b, "(%s = ", v);
    add_literal(b, val, n);
    if (num) {
        sqlite3_str_appendf(b, " OR (%s GLOB '*[0-9]*' AND %s NOT GLOB '*[^0-9.eE+-]*' AND "
                            "CAST(%s AS REAL) = ", v, v, v);
        add_literal(b, val, n);
        sqlite3_str_appendall(b, ")");
    }
    sqlite3_str_appendall(b, ")");
}

/* 1 when the query with text bound to ?1 returns a row, 0 when not, -1 on
** a failure. */
static int exists(sqlite3 *db, const char *sql, const char *text)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return -1;
    sqlite3_bind_text(st, 1, text, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

/* The condition of filter f (KEY=VALUE) appended to b; SQ_OK, or a
** failure in err. */
static int add_filter(sqlite3 *db, sqlite3_str *b, const char *f, sq_error *err)
{
    const char *eq = strchr(f, '=');
    if (!eq || eq == f)
        return sq_error_set(err, SQ_ERR_SPEC, "--where: '%s': expected KEY=VALUE (e.g. "
                            "grad.inter.bits=4, preset=sdp4bit)", f);
    size_t kn = (size_t)(eq - f);
    char key[256];
    if (kn >= sizeof key) kn = sizeof key - 1;
    memcpy(key, f, kn);
    key[kn] = '\0';
    const char *val = eq + 1;
    size_t vn = strlen(val);
    int num = numeric(val);
    int is_col = 0;
    for (const char *const *c = run_columns; *c; c++) is_col |= strcmp(*c, key) == 0;
    if (is_col) {
        int have = exists(db, "SELECT 1 FROM pragma_table_info('runs') WHERE name = ?1", key);
        if (have < 0) goto failed_read;
        if (!have)
            return sq_error_set(err, SQ_ERR_SPEC, "--where: '%s': this store has no column %s "
                                "(an older schema: 'shardq db init' migrates it)", f, key);
        /* scheme=NAME: a preset's name, what the scheme started from */
        const char *col = !strcmp(key, "scheme") && !memchr(val, '=', vn) ? "preset" : key;
        add_equal(b, col, val, vn, num && strcmp(key, "scheme"));
        return SQ_OK;
    }
    int stored = exists(db, "SELECT 1 FROM params WHERE key = ?1 LIMIT 1", key);
    if (stored < 0) goto failed_read;
    if (stored) {
        sqlite3_str_appendall(b, "id IN (SELECT run_id FROM params WHERE key = ");
        add_literal(b, key, strlen(key));
        sqlite3_str_appendall(b, " AND ");
        add_equal(b, "value", val, vn, num);
        sqlite3_str_appendall(b, ")");
        return SQ_OK;
    }
    /* A.B for the params A.X.B: every one of a run's must match */
    const char *dot = strrchr(key, '.');
    char glob[600] = "";
    if (dot && dot > key && dot[1] && !strpbrk(key, "*?["))
        snprintf(glob, sizeof glob, "%.*s.*%s", (int)(dot - key), key, dot);
    int shorthand = *glob ? exists(db,
                                   "SELECT 1 FROM params WHERE key GLOB ?1 AND "
                                   "length(key) - length(replace(key, '.', '')) = "
                                   "length(?1) - length(replace(?1, '.', '')) LIMIT 1",
                                   glob)
                          : 0;
    if (shorthand < 0) goto failed_read;
    if (!shorthand) {
        char cols[256];
        size_t used = 0;
        for (const char *const *c = run_columns; *c; c++)
            used += (size_t)snprintf(cols + used, sizeof cols - used, "%s%s",
                                     c == run_columns ? "" : ", ", *c);
        return sq_error_set(err, SQ_ERR_SPEC, "--where: '%s': no run has the knob or param %s, "
                            "and it is not a column of runs (%s); 'shardq db show RUN' lists a "
                            "run's params", f, key, cols);
    }
    /* the dots of A.X.B: those of the shorthand plus one */
    int dots = 1;
    for (const char *p = key; *p; p++) dots += *p == '.';
    sqlite3_str_appendall(b, "id IN (SELECT run_id FROM params WHERE key GLOB ");
    add_literal(b, glob, strlen(glob));
    sqlite3_str_appendf(b, " AND length(key) - length(replace(key, '.', '')) = %d GROUP BY "
                        "run_id HAVING min(", dots);
    add_equal(b, "value", val, vn, num);
    sqlite3_str_appendall(b, ") = 1)");
    return SQ_OK;
failed_read:
    return sq_error_set(err, SQ_ERR_IO, "--where: cannot read the store: %s", sqlite3_errmsg(db));
}

int sq_store_select_runs(sq_store *s, const char *runs_sql, const char *const *where, int nwhere,
                         char **ids_json, sq_error *err)
{
    if (!s || !ids_json || (nwhere && !where))
        return sq_error_set(err, SQ_ERR_ARG, "no store, filters or result");
    *ids_json = NULL;
    sqlite3 *db = sq_store_db(s);
    sqlite3_str *b = sqlite3_str_new(db);
    sqlite3_str_appendf(b, "SELECT json_group_array(id) FROM (SELECT id FROM runs WHERE (%s)",
                        runs_sql ? runs_sql : "1");
    int rc = SQ_OK;
    for (int i = 0; i < nwhere && !rc; i++) {
        sqlite3_str_appendall(b, " AND ");
        rc = add_filter(db, b, where[i], err);
    }
    sqlite3_str_appendall(b, " ORDER BY id)");
    char *sql = sqlite3_str_finish(b);
    if (rc) {
        sqlite3_free(sql);
        return rc;
    }
    if (!sql) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    sqlite3_stmt *st = NULL;
    rc = sq_store_prepare(s, sql, NULL, 0, &st, err);
    sqlite3_free(sql);
    if (rc) return rc;
    if (sqlite3_step(st) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        *ids_json = strdup(t ? t : "[]");
        rc = *ids_json ? SQ_OK : sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    } else {
        rc = sq_store_read_error(s, err);
    }
    sqlite3_finalize(st);
    return rc;
}
