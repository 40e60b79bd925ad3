/*
** export.c -- the rows `db export` writes (store_rows.h): a table of the
** schema, the runs with one column per param ("wide"), or one read-only
** statement a user gives.
**
** A table's name is one of sq_store_tables, and the wide export's column
** names come from the schema and from the params' keys, quoted as
** identifiers (they cannot be bound); every value is a bound parameter.
*/
#include "cursor_internal.h"

#include <stdio.h>
#include <string.h>

/* "run_id IN the ids", or every run when ?1 is NULL */
#define BY_IDS(col) "(?1 IS NULL OR " col " IN (SELECT value FROM json_each(?1)))"

/* Prepares sql as the one read-only statement that returns rows that an
** export runs into *st: SQ_ERR_SPEC, with the sentences of
** sq_store_export_sql, when it is not. */
static int prepare_statement(sq_store *s, const char *sql, sqlite3_stmt **st_out, sq_error *err)
{
    char names[512] = "";
    size_t ntables, used = 0;
    const sq_store_table *tables = sq_store_tables(&ntables);
    for (size_t i = 0; i < ntables && used < sizeof names; i++)
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                                 tables[i].name);
    sqlite3 *db = sq_store_db(s);
    sqlite3_stmt *st = NULL;
    const char *tail = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, &tail) != SQLITE_OK || !st) {
        /* no statement without an error: the text was empty (or a comment) */
        int rc = sqlite3_errcode(db) == SQLITE_NOMEM
                     ? sq_error_set(err, SQ_ERR_NOMEM, "out of memory")
                     : sq_error_set(err, SQ_ERR_SPEC,
                                    "is neither a table (%s) nor a valid statement: %s", names,
                                    sqlite3_errcode(db) != SQLITE_OK ? sqlite3_errmsg(db)
                                                                     : "it is empty");
        sqlite3_finalize(st);
        return rc;
    }
    while (*tail == ' ' || *tail == '\t' || *tail == '\n' || *tail == '\r' || *tail == ';') tail++;
    const char *why = NULL;
    if (*tail)
        why = "give one statement only";
    else if (!sqlite3_stmt_readonly(st))
        why = "it would write to the database; only read-only statements are accepted";
    else if (sqlite3_column_count(st) == 0)
        why = "it returns no rows; use a SELECT";
    if (why) {
        sqlite3_finalize(st);
        return sq_error_set(err, SQ_ERR_SPEC, "refused: %s", why);
    }
    *st_out = st;
    return SQ_OK;
}

int sq_store_export_table(sq_store *s, const char *table, const char *ids,
                          sq_store_cursor **out, sq_error *err)
{
    if (!s || !table || !out) return sq_error_set(err, SQ_ERR_ARG, "no store, table or cursor");
    size_t ntables;
    const sq_store_table *tables = sq_store_tables(&ntables);
    for (size_t i = 0; i < ntables; i++) {
        if (strcmp(table, tables[i].name)) continue;
        char *sql = sqlite3_mprintf("SELECT * FROM %s WHERE " BY_IDS("%s") " ORDER BY %s",
                                    tables[i].name, strcmp(table, "runs") ? "run_id" : "id",
                                    tables[i].order);
        if (!sql) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
        sqlite3_stmt *st;
        int rc = prepare_statement(s, sql, &st, err);
        sqlite3_free(sql);
        if (rc) return rc;
        sqlite3_bind_text(st, 1, ids, -1, SQLITE_TRANSIENT);
        return sq_store_cursor_wrap(s, st, out, err);
    }
    return sq_error_set(err, SQ_ERR_NOTFOUND, "%s: no table '%s'", sq_store_path(s), table);
}

/* The text of the wide export of the runs of ?1 into *out (sqlite3_malloc'd),
** its params' keys bound to ?2.. in the order in which *keys (prepared
** here, the caller finalizes it) lists them. */
static int wide_sql(sq_store *s, sqlite3_stmt **keys, const char *ids, char **out, sq_error *err)
{
    *out = NULL;
    sqlite3 *db = sq_store_db(s);
    sq_store_value v = {.type = SQ_STORE_TEXT, .text = ids};
    /* each key typed by every value a run holds of it */
    int rc = sq_store_prepare(s,
                         "SELECT key, sum(value IS NOT NULL AND value NOT GLOB '*[^0-9-]*' AND"
                         " value GLOB '*[0-9]*' AND value NOT GLOB '?*-*') = count(value),"
                         " sum(value IS NOT NULL AND value NOT GLOB '*[^0-9.eE+-]*' AND"
                         " value GLOB '*[0-9]*') = count(value) FROM params"
                         " WHERE " BY_IDS("run_id") " GROUP BY key ORDER BY key",
                         &v, 1, keys, err);
    if (rc) return rc;
    /* the columns of runs that describe a run (those of the process that ran
    ** it, the whole configuration and the recipe's text stay in 'runs') */
    sqlite3_str *q = sqlite3_str_new(db);
    sqlite3_str_appendall(q, "SELECT r.id");
    sqlite3_stmt *ti = NULL;
    if (sqlite3_prepare_v2(db, "SELECT name FROM pragma_table_info('runs') WHERE name NOT IN "
                           "('id', 'key', 'config', 'recipe', 'pid', 'pid_start', 'boot_id', "
                           "'heartbeat') ORDER BY cid", -1, &ti, NULL) == SQLITE_OK)
        while (sqlite3_step(ti) == SQLITE_ROW)
            sqlite3_str_appendf(q, ", r.\"%w\"", sqlite3_column_text(ti, 0));
    sqlite3_finalize(ti);
    sqlite3_str_appendall(q, ", (SELECT avg(m.rel_l2) FROM step_metrics m WHERE m.run_id = r.id"
                             " AND m.path = 'grad') AS grad_rel_l2, (SELECT avg(m.rel_l2) FROM"
                             " step_metrics m WHERE m.run_id = r.id AND m.path = 'weight') AS"
                             " weight_rel_l2");
    int k = 2;
    while ((rc = sqlite3_step(*keys)) == SQLITE_ROW) {
        const char *key = (const char *)sqlite3_column_text(*keys, 0);
        const char *type = sqlite3_column_int(*keys, 1)   ? "INTEGER"
                           : sqlite3_column_int(*keys, 2) ? "REAL"
                                                          : "TEXT";
        sqlite3_str_appendf(q, ", max(CASE WHEN p.key = ?%d THEN CAST(p.value AS %s) END)"
                               " AS \"%w\"", k++, type, key);
    }
    if (rc != SQLITE_DONE) {
        sqlite3_free(sqlite3_str_finish(q));
        return sq_store_read_error(s, err);
    }
    sqlite3_str_appendall(q, " FROM runs r LEFT JOIN params p ON p.run_id = r.id WHERE "
                             BY_IDS("r.id") " GROUP BY r.id ORDER BY r.id");
    *out = sqlite3_str_finish(q);
    return *out ? SQ_OK : sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
}

int sq_store_export_wide(sq_store *s, const char *ids, sq_store_cursor **out, sq_error *err)
{
    if (!s || !out) return sq_error_set(err, SQ_ERR_ARG, "no store or cursor");
    sqlite3_stmt *keys = NULL, *st = NULL;
    char *sql;
    int rc = wide_sql(s, &keys, ids, &sql, err);
    if (rc) {
        sqlite3_finalize(keys);
        return rc;
    }
    rc = prepare_statement(s, sql, &st, err);
    if (!rc) {
        /* the keys again, in the same order, for their ?2.. */
        sqlite3_bind_text(st, 1, ids, -1, SQLITE_TRANSIENT);
        sqlite3_reset(keys);
        for (int k = 2; sqlite3_step(keys) == SQLITE_ROW; k++)
            sqlite3_bind_text(st, k, (const char *)sqlite3_column_text(keys, 0), -1,
                              SQLITE_TRANSIENT);
    }
    sqlite3_free(sql);
    sqlite3_finalize(keys);
    if (rc) {
        sqlite3_finalize(st);
        return rc;
    }
    return sq_store_cursor_wrap(s, st, out, err);
}


int sq_store_export_sql(sq_store *s, const char *sql, sq_store_cursor **out, sq_error *err)
{
    if (!s || !sql || !out) return sq_error_set(err, SQ_ERR_ARG, "no store, statement or cursor");
    sqlite3_stmt *st;
    int rc = prepare_statement(s, sql, &st, err);
    return rc ? rc : sq_store_cursor_wrap(s, st, out, err);
}
