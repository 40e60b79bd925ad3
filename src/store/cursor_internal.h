/*
** cursor_internal.h -- what the files of src/store that read share: the
** cursor over one prepared statement (store_rows.h) and the sentence of a
** failed read.
*/
#ifndef SQ_STORE_CURSOR_INTERNAL_H
#define SQ_STORE_CURSOR_INTERNAL_H

#include "shardq/store_rows.h"

#include <sqlite3.h>

struct sq_store_cursor {
    sq_store *s;
    sqlite3_stmt *st;
};

/* The failure of the last call on s's connection as a kind and a sentence
** naming the file: SQ_ERR_INTERRUPTED for a statement stopped by the time
** limit, SQ_ERR_NOMEM, else SQ_ERR_IO ("PATH: cannot read: WHY"). */
int sq_store_read_error(sq_store *s, sq_error *err);

/* Prepares sql on s and binds args[0..nargs) to ?1..?nargs. */
int sq_store_prepare(sq_store *s, const char *sql, const sq_store_value *args, int nargs,
                     sqlite3_stmt **st, sq_error *err);

/* A cursor over st, which it then owns (finalized on failure too). */
int sq_store_cursor_wrap(sq_store *s, sqlite3_stmt *st, sq_store_cursor **out, sq_error *err);

#endif
