/*
** cursor.c -- rows of a query one at a time (store_query.h), for callers
** that never see SQLite: the column names, and each field's type and value.
*/
#include "store/report_sql.h"

#include <sqlite3.h>

#include <stdlib.h>

struct sq_cursor {
    sq_store *s;
    sqlite3_stmt *st;
};

/* The kind and sentence of SQLite's failure rc on s's connection. */
static int failed(sq_store *s, int rc, sq_error *err)
{
    int kind = (rc & 0xff) == SQLITE_INTERRUPT ? SQ_ERR_INTERRUPTED
               : (rc & 0xff) == SQLITE_NOMEM   ? SQ_ERR_NOMEM
                                               : SQ_ERR_IO;
    return sq_error_set(err, kind, "%s", sqlite3_errmsg(sq_store_db(s)));
}

int sq_cursor_prepare(sq_store *s, sq_sql *sql, const char *ids, const int64_t *ints, int nints,
                      sq_cursor **out, sq_error *err)
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
    sq_cursor *c = rc == SQLITE_OK ? malloc(sizeof *c) : NULL;
    if (!c) {
        if (rc == SQLITE_OK) rc = SQLITE_NOMEM;
        int kind = failed(s, rc, err);
        if (rc == SQLITE_NOMEM) sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
        sqlite3_finalize(st);
        return kind;
    }
    c->s = s;
    c->st = st;
    *out = c;
    return SQ_OK;
}

int sq_cursor_step(sq_cursor *c, sq_error *err)
{
    int rc = sqlite3_step(c->st);
    if (rc == SQLITE_ROW) return 1;
    if (rc == SQLITE_DONE) return 0;
    return failed(c->s, rc, err);
}

int sq_cursor_columns(const sq_cursor *c) { return sqlite3_column_count(c->st); }

const char *sq_cursor_name(const sq_cursor *c, int i) { return sqlite3_column_name(c->st, i); }

int sq_cursor_type(const sq_cursor *c, int i)
{
    switch (sqlite3_column_type(c->st, i)) {
    case SQLITE_NULL: return SQ_VALUE_NULL;
    case SQLITE_INTEGER: return SQ_VALUE_INTEGER;
    case SQLITE_FLOAT: return SQ_VALUE_REAL;
    default: return SQ_VALUE_TEXT; /* a blob is read as its text */
    }
}

int64_t sq_cursor_int(const sq_cursor *c, int i) { return sqlite3_column_int64(c->st, i); }

double sq_cursor_real(const sq_cursor *c, int i) { return sqlite3_column_double(c->st, i); }

const char *sq_cursor_text(const sq_cursor *c, int i)
{
    return (const char *)sqlite3_column_text(c->st, i);
}

void sq_cursor_close(sq_cursor *c)
{
    if (!c) return;
    sqlite3_finalize(c->st);
    free(c);
}
