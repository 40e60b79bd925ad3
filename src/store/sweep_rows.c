/*
** sweep_rows.c -- what the store holds of a sweep (store_rows.h): the keys
** of its finished runs, for a resume to skip, and the runs it left
** 'running', for a restart to report.
*/
#include "cursor_internal.h"

/* A step that fails ends the listing as its end would: a sweep that cannot
** read what is done runs it again, which the store's keys settle. */
int sq_store_sweep_done_keys(sq_store *s, const char *sweep,
                             int (*fn)(void *ctx, const char *key), void *ctx, sq_error *err)
{
    if (!s || !fn) return sq_error_set(err, SQ_ERR_ARG, "no store or no callback");
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(sq_store_db(s),
                           "SELECT key FROM runs WHERE status = 'done' AND sweep = ?1", -1, &st,
                           NULL) != SQLITE_OK)
        return sq_error_set(err, SQ_ERR_FORMAT, "%s: %s", sq_store_path(s),
                            sqlite3_errmsg(sq_store_db(s)));
    sqlite3_bind_text(st, 1, sweep, -1, SQLITE_STATIC);
    while (sqlite3_step(st) == SQLITE_ROW)
        if (fn(ctx, (const char *)sqlite3_column_text(st, 0))) break;
    sqlite3_finalize(st);
    return SQ_OK;
}

int sq_store_sweep_running(sq_store *s, const char *sweep,
                           int (*fn)(void *ctx, const sq_store_running *run), void *ctx,
                           sq_error *err)
{
    if (!s || !fn) return sq_error_set(err, SQ_ERR_ARG, "no store or no callback");
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(sq_store_db(s),
                           "SELECT id, host, pid, pid_start, boot_id, started FROM runs"
                           " WHERE status = 'running' AND sweep = ?1 ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK)
        return sq_error_set(err, SQ_ERR_FORMAT, "%s: %s", sq_store_path(s),
                            sqlite3_errmsg(sq_store_db(s)));
    sqlite3_bind_text(st, 1, sweep, -1, SQLITE_STATIC);
    while (sqlite3_step(st) == SQLITE_ROW) {
        sq_store_running r = {
            .id = sqlite3_column_int64(st, 0),
            .host = (const char *)sqlite3_column_text(st, 1),
            .pid = sqlite3_column_int64(st, 2),
            .pid_start = sqlite3_column_type(st, 3) == SQLITE_NULL ? -1
                                                                   : sqlite3_column_int64(st, 3),
            .boot_id = (const char *)sqlite3_column_text(st, 4),
            .started = (const char *)sqlite3_column_text(st, 5),
        };
        if (fn(ctx, &r)) break;
    }
    sqlite3_finalize(st);
    return SQ_OK;
}
