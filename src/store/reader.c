/*
** reader.c -- a store opened to be read (store_rows.h): the check that it
** is shardq's, one read transaction, and the SQL functions that its
** queries, and the SELECTs a user gives `db export`, may call.
*/
#include "cursor_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The last component of a path ("traces/run1/" is "run1"). */
static void fn_basename(sqlite3_context *cx, int argc, sqlite3_value **argv)
{
    (void)argc;
    const char *p = (const char *)sqlite3_value_text(argv[0]);
    if (!p) return; /* NULL */
    size_t end = strlen(p);
    while (end > 1 && p[end - 1] == '/') end--;
    size_t start = end;
    while (start > 0 && p[start - 1] != '/') start--;
    sqlite3_result_text(cx, p + start, (int)(end - start), SQLITE_TRANSIENT);
}

/* A duration in seconds for people: 12.3s, 4m05s, 2h10m. */
static void fn_duration(sqlite3_context *cx, int argc, sqlite3_value **argv)
{
    (void)argc;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return;
    double s = sqlite3_value_double(argv[0]);
    char buf[48];
    if (!isfinite(s) || s < 0)
        snprintf(buf, sizeof buf, "?");
    else if (s < 60)
        snprintf(buf, sizeof buf, "%.1fs", s);
    else if (s < 3600)
        snprintf(buf, sizeof buf, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else
        snprintf(buf, sizeof buf, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    sqlite3_result_text(cx, buf, -1, SQLITE_TRANSIENT);
}

/* A run's status as shown: 'interrupted' for a 'running' run whose
** process, on this host, is gone (status, host, pid, pid_start, boot_id). */
static void fn_status(sqlite3_context *cx, int argc, sqlite3_value **argv)
{
    (void)argc;
    const char *status = (const char *)sqlite3_value_text(argv[0]);
    if (!status) return;
    int64_t start = sqlite3_value_type(argv[3]) == SQLITE_NULL ? -1 : sqlite3_value_int64(argv[3]);
    if (strcmp(status, "running") == 0 &&
        sq_store_proc_state((const char *)sqlite3_value_text(argv[1]), sqlite3_value_int64(argv[2]),
                            start, (const char *)sqlite3_value_text(argv[4])) == SQ_PROC_GONE)
        status = "interrupted";
    sqlite3_result_text(cx, status, -1, SQLITE_TRANSIENT);
}

int sq_store_open_reader(const char *path, sq_store **out, sq_error *err)
{
    if (!out) return sq_error_set(err, SQ_ERR_ARG, "no store handle");
    sq_store *s;
    int rc = sq_store_open(path, 0, 1, &s, err);
    if (rc) return rc;
    if (sq_store_version(s) == 0) {
        sq_store_close(s);
        return sq_error_set(err, SQ_ERR_FORMAT,
                            "%s: not a shardq store (no schema; 'shardq db init' creates one)",
                            path);
    }
    sqlite3 *db = sq_store_db(s);
    int flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS;
    sqlite3_create_function(db, "sq_basename", 1, flags, NULL, fn_basename, NULL, NULL);
    sqlite3_create_function(db, "sq_duration", 1, flags, NULL, fn_duration, NULL, NULL);
    /* not deterministic: it asks the system about processes */
    sqlite3_create_function(db, "sq_status", 5, SQLITE_UTF8, NULL, fn_status, NULL, NULL);
    *out = s;
    return SQ_OK;
}

int sq_store_read_begin(sq_store *s, sq_error *err)
{
    if (!s) return sq_error_set(err, SQ_ERR_ARG, "no store");
    if (sqlite3_exec(sq_store_db(s), "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
        return sq_store_read_error(s, err);
    return SQ_OK;
}
