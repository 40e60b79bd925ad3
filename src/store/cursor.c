/*
** cursor.c -- the rows of one query, value by value with their types
** (store_rows.h), so that callers read the store without sqlite3.h.
*/
#include "cursor_internal.h"
#include "store/report_sql.h"

#include <stdlib.h>

int sq_store_read_error(sq_store *s, sq_error *err)
{
    sqlite3 *db = sq_store_db(s);
    switch (sqlite3_errcode(db)) {
    case SQLITE_INTERRUPT:
        return sq_error_set(err, SQ_ERR_INTERRUPTED, "%s: a query ran past its time limit",
                            sq_store_path(s));
    case SQLITE_NOMEM: return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    default:
        return sq_error_set(err, SQ_ERR_IO, "%s: cannot read: %s", sq_store_path(s),
                            sqlite3_errmsg(db));
    }
}

int sq_store_prepare(sq_store *s, const char *sql, const sq_store_value *args, int nargs,
                     sqlite3_stmt **st, sq_error *err)
{
    *st = NULL;
    if (sqlite3_prepare_v2(sq_store_db(s), sql, -1, st, NULL) != SQLITE_OK)
        return sq_store_read_error(s, err);
    int want = sqlite3_bind_parameter_count(*st);
    if (want != nargs) {
        sqlite3_finalize(*st);
        *st = NULL;
        return sq_error_set(err, SQ_ERR_ARG, "%s: a query of %d parameters given %d values",
                            sq_store_path(s), want, nargs);
    }
    for (int i = 0; i < nargs; i++) {
        const sq_store_value *v = &args[i];
        int rc;
        if (v->type == SQ_STORE_INTEGER)
            rc = sqlite3_bind_int64(*st, i + 1, v->i);
        else if (v->type == SQ_STORE_REAL)
            rc = sqlite3_bind_double(*st, i + 1, v->d);
        else if (v->type == SQ_STORE_TEXT && v->text)
            rc = sqlite3_bind_text(*st, i + 1, v->text, -1, SQLITE_TRANSIENT);
        else
            rc = sqlite3_bind_null(*st, i + 1);
        if (rc != SQLITE_OK) {
            rc = sq_store_read_error(s, err);
            sqlite3_finalize(*st);
            *st = NULL;
            return rc;
        }
    }
    return SQ_OK;
}

int sq_store_cursor_wrap(sq_store *s, sqlite3_stmt *st, sq_store_cursor **out, sq_error *err)
{
    sq_store_cursor *c = malloc(sizeof *c);
    if (!c) {
        sqlite3_finalize(st);
        return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    }
    c->s = s;
    c->st = st;
    *out = c;
    return SQ_OK;
}

int sq_store_cursor_step(sq_store_cursor *c, sq_error *err)
{
    if (!c) return sq_error_set(err, SQ_ERR_ARG, "no cursor");
    int rc = sqlite3_step(c->st);
    if (rc == SQLITE_ROW) return 1;
    if (rc == SQLITE_DONE) return 0;
    return sq_store_read_error(c->s, err);
}

int sq_store_cursor_columns(const sq_store_cursor *c) { return sqlite3_column_count(c->st); }

const char *sq_store_cursor_name(const sq_store_cursor *c, int i)
{
    return sqlite3_column_name(c->st, i);
}

int sq_store_cursor_type(const sq_store_cursor *c, int i)
{
    switch (sqlite3_column_type(c->st, i)) {
    case SQLITE_INTEGER: return SQ_STORE_INTEGER;
    case SQLITE_FLOAT: return SQ_STORE_REAL;
    case SQLITE_TEXT: return SQ_STORE_TEXT;
    case SQLITE_BLOB: return SQ_STORE_BLOB;
    default: return SQ_STORE_NULL;
    }
}

int64_t sq_store_cursor_int(const sq_store_cursor *c, int i)
{
    return sqlite3_column_int64(c->st, i);
}

double sq_store_cursor_double(const sq_store_cursor *c, int i)
{
    return sqlite3_column_double(c->st, i);
}

const char *sq_store_cursor_text(const sq_store_cursor *c, int i, size_t *n)
{
    /* the text first, then its length: the order sqlite3_column_bytes needs */
    const char *t = (const char *)sqlite3_column_text(c->st, i);
    if (n) *n = (size_t)sqlite3_column_bytes(c->st, i);
    return t;
}

const void *sq_store_cursor_blob(const sq_store_cursor *c, int i, size_t *n)
{
    const void *b = sqlite3_column_blob(c->st, i);
    if (n) *n = (size_t)sqlite3_column_bytes(c->st, i);
    return b;
}

void sq_store_cursor_close(sq_store_cursor *c)
{
    if (!c) return;
    sqlite3_finalize(c->st);
    free(c);
}

/* The kind and sentence of SQLite's failure rc on s's connection, as the
** report's queries say it (SQLite's own words: "no such table: x"). */
static int report_failed(sq_store *s, int rc, sq_error *err)
{
    int kind = (rc & 0xff) == SQLITE_INTERRUPT ? SQ_ERR_INTERRUPTED
               : (rc & 0xff) == SQLITE_NOMEM   ? SQ_ERR_NOMEM
                                               : SQ_ERR_IO;
    return sq_error_set(err, kind, "%s", sqlite3_errmsg(sq_store_db(s)));
}

int sq_store_cursor_prepare_sql(sq_store *s, sq_sql *sql, const char *ids, const int64_t *ints,
                                int nints, sq_store_cursor **out, sq_error *err)
{
    *out = NULL;
    if (sql->oom) {
        sq_sql_free(sql);
        return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    }
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(sq_store_db(s), sql->p, -1, &st, NULL);
    sq_sql_free(sql);
    if (rc == SQLITE_OK && sqlite3_bind_parameter_count(st) >= 1)
        rc = ids ? sqlite3_bind_text(st, 1, ids, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, 1);
    for (int i = 0; rc == SQLITE_OK && i < nints; i++)
        rc = sqlite3_bind_int64(st, 2 + i, ints[i]);
    if (rc != SQLITE_OK) {
        int kind = report_failed(s, rc, err);
        sqlite3_finalize(st);
        return kind;
    }
    return sq_store_cursor_wrap(s, st, out, err);
}
