/*
** cursor_write.c -- a cursor's rows (store_rows.h) written out: as CSV
** (RFC 4180), as a JSON array of objects, or as an aligned text table,
** so that `shardq db` and any other reader of the store print rows whose
** columns vary one way.
**
** Nothing here knows a query: the column names are the cursor's, and a
** value is written by its type as SQLite stores it.
*/
#include "shardq/store_rows.h"
#include "sq_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Text tables                                                              */
/* ------------------------------------------------------------------------ */

void sq_store_cursor_cell(const sq_store_cursor *c, int i, char *buf, size_t len)
{
    switch (sq_store_cursor_type(c, i)) {
    case SQ_STORE_NULL: snprintf(buf, len, "-"); break;
    case SQ_STORE_INTEGER: snprintf(buf, len, "%lld", (long long)sq_store_cursor_int(c, i)); break;
    case SQ_STORE_REAL: snprintf(buf, len, "%.4g", sq_store_cursor_double(c, i)); break;
    default: snprintf(buf, len, "%s", sq_store_cursor_text(c, i, NULL)); break;
    }
}

static int out_of_memory(sq_error *err) { return sq_error_set(err, SQ_ERR_NOMEM, "out of memory"); }

int sq_text_table_add(sq_text_table *t, const char *text, sq_error *err)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        char **c = realloc(t->cell, cap * sizeof *c);
        if (!c) return out_of_memory(err);
        t->cell = c;
        t->cap = cap;
    }
    if (!(t->cell[t->n] = strdup(text))) return out_of_memory(err);
    t->n++;
    return SQ_OK;
}

void sq_text_table_free(sq_text_table *t)
{
    for (size_t i = 0; i < t->n; i++) free(t->cell[i]);
    free(t->cell);
}

/* Columns are separated by two blanks; numbers align right, the last
** column carries no trailing blanks. */
void sq_text_table_print(const sq_text_table *t, FILE *f, const char *indent)
{
    size_t w[SQ_TEXT_TABLE_COLS] = {0};
    for (size_t i = 0; i < t->n; i++) {
        size_t l = strlen(t->cell[i]);
        if (l > w[i % t->ncols]) w[i % t->ncols] = l;
    }
    for (size_t r = 0; r < t->n / t->ncols; r++) {
        fputs(indent, f);
        for (int c = 0; c < t->ncols; c++) {
            const char *v = t->cell[r * t->ncols + c];
            int last = c == t->ncols - 1;
            if (t->numeric[c])
                fprintf(f, "%*s", (int)w[c], v);
            else
                fprintf(f, "%-*s", last ? 0 : (int)w[c], v);
            fputs(last ? "\n" : "  ", f);
        }
    }
}

int sq_store_cursor_write_table(sq_store_cursor *c, FILE *f, const char *indent, int *rows,
                                sq_error *err)
{
    sq_text_table t = {0};
    int ncols = sq_store_cursor_columns(c), rc = SQ_OK;
    if (ncols > SQ_TEXT_TABLE_COLS) ncols = SQ_TEXT_TABLE_COLS;
    t.ncols = ncols;
    for (int i = 0; i < ncols && !rc; i++) {
        t.numeric[i] = 1;
        rc = sq_text_table_add(&t, sq_store_cursor_name(c, i), err);
    }
    *rows = 0;
    char buf[4096];
    while (!rc && (rc = sq_store_cursor_step(c, err)) == 1) {
        rc = SQ_OK;
        for (int i = 0; i < ncols && !rc; i++) {
            int type = sq_store_cursor_type(c, i);
            if (type == SQ_STORE_TEXT || type == SQ_STORE_BLOB) t.numeric[i] = 0;
            sq_store_cursor_cell(c, i, buf, sizeof buf);
            rc = sq_text_table_add(&t, buf, err);
        }
        (*rows)++;
    }
    if (!rc && *rows) sq_text_table_print(&t, f, indent);
    sq_text_table_free(&t);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* JSON                                                                     */
/* ------------------------------------------------------------------------ */

void sq_store_json_real(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.17g", v);
    else
        fputs("null", f);
}

/* A value as JSON: a number, a string, or null (for NULL and a blob). */
static void json_value(const sq_store_cursor *c, int i, FILE *f)
{
    switch (sq_store_cursor_type(c, i)) {
    case SQ_STORE_INTEGER: fprintf(f, "%lld", (long long)sq_store_cursor_int(c, i)); break;
    case SQ_STORE_REAL: sq_store_json_real(f, sq_store_cursor_double(c, i)); break;
    case SQ_STORE_TEXT: sq_json_str(f, sq_store_cursor_text(c, i, NULL)); break;
    default: fputs("null", f); break;
    }
}

void sq_store_cursor_write_json_row(const sq_store_cursor *c, FILE *f)
{
    putc('{', f);
    for (int i = 0; i < sq_store_cursor_columns(c); i++) {
        if (i) putc(',', f);
        sq_json_str(f, sq_store_cursor_name(c, i));
        putc(':', f);
        json_value(c, i, f);
    }
    putc('}', f);
}

int sq_store_cursor_write_json(sq_store_cursor *c, FILE *f, sq_error *err)
{
    int rc, n = 0;
    putc('[', f);
    while ((rc = sq_store_cursor_step(c, err)) == 1) {
        if (n++) putc(',', f);
        sq_store_cursor_write_json_row(c, f);
    }
    putc(']', f);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* CSV                                                                      */
/* ------------------------------------------------------------------------ */

typedef struct sink {
    sq_store_put_fn *put;
    void *ctx;
} sink;

static void put(const sink *o, const char *p, size_t n) { o->put(o->ctx, p, n); }

/* One field: quoted when it holds a comma, a quote or a line break, with
** its quotes doubled. */
static void put_field(const sink *o, const char *v, size_t n)
{
    if (strcspn(v, ",\"\r\n") >= n) {
        put(o, v, n);
        return;
    }
    put(o, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        if (v[i] == '"') put(o, "\"", 1);
        put(o, v + i, 1);
    }
    put(o, "\"", 1);
}

static void put_value(const sink *o, const sq_store_cursor *c, int i)
{
    char buf[64];
    size_t n;
    switch (sq_store_cursor_type(c, i)) {
    case SQ_STORE_NULL: break;
    case SQ_STORE_INTEGER:
        put(o, buf,
            (size_t)snprintf(buf, sizeof buf, "%lld", (long long)sq_store_cursor_int(c, i)));
        break;
    case SQ_STORE_REAL:
        put(o, buf, (size_t)snprintf(buf, sizeof buf, "%.17g", sq_store_cursor_double(c, i)));
        break;
    case SQ_STORE_BLOB: { /* as hexadecimal digits */
        const unsigned char *b = sq_store_cursor_blob(c, i, &n);
        for (size_t k = 0; k < n; k++)
            put(o, buf, (size_t)snprintf(buf, sizeof buf, "%02x", b[k]));
        break;
    }
    default: {
        const char *t = sq_store_cursor_text(c, i, &n);
        put_field(o, t, n);
        break;
    }
    }
}

int sq_store_cursor_write_csv_to(sq_store_cursor *c, sq_store_put_fn *fn, void *ctx,
                                 sq_error *err)
{
    const sink o = {fn, ctx};
    int ncols = sq_store_cursor_columns(c), rc;
    for (int i = 0; i < ncols; i++) {
        const char *name = sq_store_cursor_name(c, i);
        if (i) put(&o, ",", 1);
        put_field(&o, name, strlen(name));
    }
    put(&o, "\r\n", 2);
    while ((rc = sq_store_cursor_step(c, err)) == 1) {
        for (int i = 0; i < ncols; i++) {
            if (i) put(&o, ",", 1);
            put_value(&o, c, i);
        }
        put(&o, "\r\n", 2);
    }
    return rc;
}

static void put_stream(void *ctx, const void *p, size_t n) { fwrite(p, 1, n, (FILE *)ctx); }

int sq_store_cursor_write_csv(sq_store_cursor *c, FILE *f, sq_error *err)
{
    return sq_store_cursor_write_csv_to(c, put_stream, f, err);
}
