/*
** select.c -- the runs a command selects (store_query.h,
** sq_store_select_runs): a user's SQL condition on runs (`report --runs`)
** and knob filters KEY=VALUE (`--where` of report, db list, db export).
**
** A filter is never SQL: each is one of three fixed statements, its column
** picked from the fixed table of run columns below, its key and value
** bound. The condition is SQL on purpose; it is checked to be one
** expression and runs on the store's own connection, whose extension
** loading is off. The sets of ids are intersected here.
*/
#include "store/store_query.h"

#include <sqlite3.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The run columns a filter may name (those of an older store that lacks
** one, grid before version 7, are refused by the check below). */
static const char *const run_columns[] = {"id",   "kind", "status", "sweep", "grid",    "preset",
                                          "scheme", "topo", "device", "trace", "seed", "host",
                                          "version", NULL};

/* ------------------------------------------------------------------------ */
/* Sets of run ids                                                          */
/* ------------------------------------------------------------------------ */

/* Ascending run ids. */
typedef struct id_set {
    int64_t *v;
    size_t n, cap;
} id_set;

/* a becomes the ids of both a and b */
static void id_intersect(id_set *a, const id_set *b)
{
    size_t k = 0, j = 0;
    for (size_t i = 0; i < a->n; i++) {
        while (j < b->n && b->v[j] < a->v[i]) j++;
        if (j < b->n && b->v[j] == a->v[i]) a->v[k++] = a->v[i];
    }
    a->n = k;
}

/* "[3,4,17]" (malloc'd), or NULL when out of memory. */
static char *id_json(const id_set *s)
{
    char *p = malloc(s->n * 21 + 3);
    if (!p) return NULL;
    size_t n = 0;
    p[n++] = '[';
    for (size_t i = 0; i < s->n; i++)
        n += (size_t)sprintf(p + n, "%s%lld", i ? "," : "", (long long)s->v[i]);
    p[n++] = ']';
    p[n] = '\0';
    return p;
}

/* The ids of the rows of st, a statement whose first column is a run id in
** ascending order; the statement is finalized. SQLite's code on failure. */
static int read_ids(sqlite3_stmt *st, id_set *out)
{
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (out->n == out->cap) {
            size_t cap = out->cap ? 2 * out->cap : 256;
            int64_t *v = realloc(out->v, cap * sizeof *v);
            if (!v) {
                rc = SQLITE_NOMEM;
                break;
            }
            out->v = v;
            out->cap = cap;
        }
        out->v[out->n++] = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* ------------------------------------------------------------------------ */
/* --runs: a condition                                                      */
/* ------------------------------------------------------------------------ */

/* Why f cannot be put inside "WHERE (...)" as one expression (a ';', a
** comment, an unbalanced parenthesis or quote), or NULL when it can. */
static const char *not_one_condition(const char *f)
{
    int depth = 0;
    for (const char *p = f; *p; p++) {
        /* quoted text: 'string', "identifier", [identifier], `identifier` */
        char close = *p == '\'' ? '\'' : *p == '"' ? '"' : *p == '[' ? ']' : *p == '`' ? '`' : 0;
        if (close) {
            for (p++;; p++) {
                if (!*p) return "a quote is not closed";
                if (*p == close && !(close != ']' && p[1] == close)) break;
                if (*p == close) p++; /* a doubled quote stands for itself */
            }
            continue;
        }
        if (*p == ';') return "it holds ';': give one condition, not statements";
        if ((*p == '-' && p[1] == '-') || (*p == '/' && p[1] == '*'))
            return "it holds a comment";
        if (*p == '(') depth++;
        if (*p == ')' && --depth < 0) return "a ')' closes more than it opened";
    }
    return depth ? "a '(' is not closed" : NULL;
}

/* "SELECT ... FROM runs WHERE (cond\n) ..." prepared (the line break ends a
** comment the checks missed); SQLite's code. */
static int prepare_condition(sqlite3 *db, const char *head, const char *cond, const char *tail,
                             sqlite3_stmt **st)
{
    char *sql = sqlite3_mprintf("%s WHERE (%s\n)%s", head, cond, tail);
    int rc = sql ? sqlite3_prepare_v2(db, sql, -1, st, NULL) : SQLITE_NOMEM;
    sqlite3_free(sql);
    return rc;
}

/* The condition is one expression that SQLite compiles against runs. */
static int check_condition(sq_store *s, const char *cond, sq_error *err)
{
    const char *why = not_one_condition(cond);
    if (why) return sq_error_set(err, SQ_ERR_SPEC, "--runs: '%s': %s", cond, why);
    sqlite3 *db = sq_store_db(s);
    sqlite3_stmt *st = NULL;
    int rc = prepare_condition(db, "SELECT count(*) FROM runs", cond, "", &st);
    sqlite3_finalize(st);
    if (rc != SQLITE_OK)
        return sq_error_set(err, SQ_ERR_SPEC, "--runs: '%s': %s", cond,
                            rc == SQLITE_NOMEM ? "out of memory" : sqlite3_errmsg(db));
    return SQ_OK;
}

/* The runs the condition selects (NULL: every run) into out. */
static int condition_ids(sq_store *s, const char *cond, id_set *out, sq_error *err)
{
    sqlite3 *db = sq_store_db(s);
    sqlite3_stmt *st = NULL;
    int rc = cond ? prepare_condition(db, "SELECT id FROM runs", cond, " ORDER BY id", &st)
                  : sqlite3_prepare_v2(db, "SELECT id FROM runs ORDER BY id", -1, &st, NULL);
    if (rc == SQLITE_OK) rc = read_ids(st, out);
    else sqlite3_finalize(st);
    if (rc == SQLITE_OK) return SQ_OK;
    if (!cond) /* every run */
        return sq_error_set(err, rc == SQLITE_NOMEM ? SQ_ERR_NOMEM : SQ_ERR_IO,
                            "cannot read the runs: %s", sqlite3_errmsg(db));
    if ((rc & 0xff) == SQLITE_INTERRUPT)
        return sq_error_set(err, SQ_ERR_INTERRUPTED, "--runs: '%s': stopped after %g s "
                            "(--query-timeout raises the limit)", cond, sq_store_query_limit(s));
    return sq_error_set(err, SQ_ERR_SPEC, "--runs: '%s': %s", cond,
                        rc == SQLITE_NOMEM ? "out of memory" : sqlite3_errmsg(db));
}

/* ------------------------------------------------------------------------ */
/* --where: KEY=VALUE                                                       */
/* ------------------------------------------------------------------------ */

/* What a filter's key names. */
enum { BY_COLUMN, BY_PARAM, BY_SHORTHAND };

/* A filter once its key is known: the statement that selects its runs. */
typedef struct filter {
    const char *item;   /* KEY=VALUE as given */
    char key[256];
    const char *value;
    int numeric;        /* VALUE is a decimal number */
    int by;
    const char *column; /* BY_COLUMN: of run_columns */
    char glob[600];     /* BY_SHORTHAND: the keys A.*.B */
    int dots;           /* and their dots */
} filter;

/* Whether text is a decimal number (what a knob's numeric value looks like). */
static int numeric(const char *s)
{
    char *end;
    if (!*s) return 0;
    strtod(s, &end);
    return *end == '\0';
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

static int read_failed(sq_store *s, sq_error *err)
{
    return sq_error_set(err, SQ_ERR_IO, "--where: cannot read the store: %s",
                        sqlite3_errmsg(sq_store_db(s)));
}

/* What item names: a column of runs, a stored param or a shorthand of
** stored params; refused otherwise. */
static int parse_filter(sq_store *s, const char *item, filter *f, sq_error *err)
{
    sqlite3 *db = sq_store_db(s);
    memset(f, 0, sizeof *f);
    f->item = item;
    const char *eq = strchr(item, '=');
    if (!eq || eq == item)
        return sq_error_set(err, SQ_ERR_SPEC, "--where: '%s': expected KEY=VALUE (e.g. "
                            "grad.inter.bits=4, preset=sdp4bit)", item);
    size_t kn = (size_t)(eq - item);
    if (kn >= sizeof f->key) kn = sizeof f->key - 1;
    memcpy(f->key, item, kn);
    f->key[kn] = '\0';
    f->value = eq + 1;
    f->numeric = numeric(f->value);
    const char *key = f->key;
    for (const char *const *c = run_columns; *c; c++)
        if (!strcmp(*c, key)) f->column = *c;
    if (f->column) {
        int have = exists(db, "SELECT 1 FROM pragma_table_info('runs') WHERE name = ?1", key);
        if (have < 0) return read_failed(s, err);
        if (!have)
            return sq_error_set(err, SQ_ERR_SPEC, "--where: '%s': this store has no column %s "
                                "(an older schema: 'shardq db init' migrates it)", item, key);
        f->by = BY_COLUMN;
        if (!strcmp(key, "scheme")) {
            /* a preset's name: what the scheme started from; text, not a number */
            if (!strchr(f->value, '=')) f->column = "preset";
            f->numeric = 0;
        }
        return SQ_OK;
    }
    int stored = exists(db, "SELECT 1 FROM params WHERE key = ?1 LIMIT 1", key);
    if (stored < 0) return read_failed(s, err);
    if (stored) {
        f->by = BY_PARAM;
        return SQ_OK;
    }
    /* A.B for the params A.X.B: every one of a run's must match */
    const char *dot = strrchr(key, '.');
    if (dot && dot > key && dot[1] && !strpbrk(key, "*?["))
        snprintf(f->glob, sizeof f->glob, "%.*s.*%s", (int)(dot - key), key, dot);
    int shorthand = *f->glob ? exists(db,
                                      "SELECT 1 FROM params WHERE key GLOB ?1 AND "
                                      "length(key) - length(replace(key, '.', '')) = "
                                      "length(?1) - length(replace(?1, '.', '')) LIMIT 1",
                                      f->glob)
                             : 0;
    if (shorthand < 0) return read_failed(s, err);
    if (!shorthand) {
        char cols[256];
        size_t n = 0;
        for (const char *const *c = run_columns; *c; c++)
            n += (size_t)snprintf(cols + n, sizeof cols - n, "%s%s", c == run_columns ? "" : ", ",
                                  *c);
        return sq_error_set(err, SQ_ERR_SPEC, "--where: '%s': no run has the knob or param %s, "
                            "and it is not a column of runs (%s); 'shardq db show RUN' lists a "
                            "run's params", item, key, cols);
    }
    /* the dots of A.X.B: those of the shorthand plus one */
    f->dots = 1;
    for (const char *p = key; *p; p++) f->dots += *p == '.';
    f->by = BY_SHORTHAND;
    return SQ_OK;
}

/* "v = ?1" for the text column v, numerically when ?2 (VALUE is a number)
** and the stored value is one too (CAST of 'sr' would be 0). */
#define EQUAL(v)                                                                               \
    "(" v " = ?1 OR (?2 AND " v " GLOB '*[0-9]*' AND " v " NOT GLOB '*[^0-9.eE+-]*' AND "      \
    "CAST(" v " AS REAL) = ?1))"

/* The runs the filter selects into out. */
static int filter_ids(sq_store *s, const filter *f, id_set *out, sq_error *err)
{
    sqlite3 *db = sq_store_db(s);
    char column_sql[512];
    const char *sql;
    if (f->by == BY_COLUMN) {
        /* the column's name is one of run_columns: a statement of a fixed few */
        const char *c = f->column;
        snprintf(column_sql, sizeof column_sql,
                 "SELECT id FROM runs WHERE " EQUAL("%s") " ORDER BY id", c, c, c, c);
        sql = column_sql;
    } else if (f->by == BY_PARAM) {
        sql = "SELECT DISTINCT run_id FROM params WHERE key = ?3 AND " EQUAL("value")
              " ORDER BY run_id";
    } else {
        sql = "SELECT run_id FROM params WHERE key GLOB ?3 AND length(key) - "
              "length(replace(key, '.', '')) = ?4 GROUP BY run_id HAVING min(" EQUAL("value")
              ") = 1 ORDER BY run_id";
    }
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, f->value, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 2, f->numeric);
        if (f->by != BY_COLUMN)
            sqlite3_bind_text(st, 3, f->by == BY_PARAM ? f->key : f->glob, -1, SQLITE_STATIC);
        if (f->by == BY_SHORTHAND) sqlite3_bind_int(st, 4, f->dots);
        rc = read_ids(st, out);
    } else {
        sqlite3_finalize(st);
    }
    if (rc == SQLITE_OK) return SQ_OK;
    if ((rc & 0xff) == SQLITE_INTERRUPT)
        return sq_error_set(err, SQ_ERR_INTERRUPTED, "--where: '%s': stopped after %g s "
                            "(--query-timeout raises the limit)", f->item,
                            sq_store_query_limit(s));
    if (rc == SQLITE_NOMEM) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    return read_failed(s, err);
}

/* ------------------------------------------------------------------------ */
/* Both                                                                     */
/* ------------------------------------------------------------------------ */

int sq_store_select_runs(sq_store *s, const char *runs_sql, const char *const *where, int nwhere,
                         char **ids_json, sq_error *err)
{
    *ids_json = NULL;
    if (!s || nwhere < 0 || (nwhere && !where))
        return sq_error_set(err, SQ_ERR_ARG, "sq_store_select_runs: no store or no filters");
    /* every check before any selection: a mistake is said at once */
    int rc = runs_sql ? check_condition(s, runs_sql, err) : SQ_OK;
    filter *f = nwhere ? calloc((size_t)nwhere, sizeof *f) : NULL;
    if (rc == SQ_OK && nwhere && !f) rc = sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    for (int i = 0; rc == SQ_OK && i < nwhere; i++) rc = parse_filter(s, where[i], &f[i], err);
    id_set ids = {0};
    if (rc == SQ_OK) rc = condition_ids(s, runs_sql, &ids, err);
    for (int i = 0; rc == SQ_OK && i < nwhere && ids.n; i++) {
        id_set more = {0};
        rc = filter_ids(s, &f[i], &more, err);
        id_intersect(&ids, &more);
        free(more.v);
    }
    if (rc == SQ_OK && !(*ids_json = id_json(&ids)))
        rc = sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    free(ids.v);
    free(f);
    return rc;
}
