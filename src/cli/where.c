/*
** where.c -- `--where KEY=VALUE` as one SQL condition on runs (where.h).
**
** The values are written into the SQL as quoted literals (a quote doubled),
** never as the user's SQL: a filter selects, it cannot run anything.
*/
#include "where.h"

#include "report/report.h"

#include <sqlite3.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The run columns a filter may name (those of an older store that lacks
** one, grid before version 7, are refused by the check below). */
static const char *const run_columns[] = {"id",   "kind", "status", "sweep", "grid",    "preset",
                                          "scheme", "topo", "device", "trace", "seed", "host",
                                          "version", NULL};

static void add_literal(report_buf *b, const char *s, size_t n)
{
    report_printf(b, "'");
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\'')
            report_printf(b, "''");
        else
            report_printf(b, "%c", s[i]);
    }
    report_printf(b, "'");
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
static void add_equal(report_buf *b, const char *v, const char *val, size_t n, int num)
{
    report_printf(b, "(%s = ", v);
    add_literal(b, val, n);
    if (num) {
        report_printf(b, " OR (%s GLOB '*[0-9]*' AND %s NOT GLOB '*[^0-9.eE+-]*' AND CAST(%s AS REAL) = ", v,
            v, v);
        add_literal(b, val, n);
        report_printf(b, ")");
    }
    report_printf(b, ")");
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

char *cli_where_sql(sqlite3 *db, const char *cmd, const char *const *f, int n, const char *col,
                    int *usage)
{
    report_buf b = {0};
    *usage = 0;
    report_printf(&b, n ? "(" : "1");
    for (int i = 0; i < n; i++) {
        const char *eq = strchr(f[i], '=');
        if (!eq || eq == f[i]) {
            fprintf(stderr, "shardq %s: --where: '%s': expected KEY=VALUE (e.g. "
                    "grad.inter.bits=4, preset=sdp4bit)\n", cmd, f[i]);
            *usage = 1;
            goto fail;
        }
        size_t kn = (size_t)(eq - f[i]);
        char key[256];
        if (kn >= sizeof key) kn = sizeof key - 1;
        memcpy(key, f[i], kn);
        key[kn] = '\0';
        const char *val = eq + 1;
        size_t vn = strlen(val);
        int num = numeric(val);
        if (i) report_printf(&b, " AND ");
        int is_col = 0;
        for (const char *const *c = run_columns; *c; c++) is_col |= strcmp(*c, key) == 0;
        if (is_col) {
            int have = exists(db, "SELECT 1 FROM pragma_table_info('runs') WHERE name = ?1", key);
            if (have < 0) goto failed_read;
            if (!have) {
                fprintf(stderr, "shardq %s: --where: '%s': this store has no column %s (an "
                        "older schema: 'shardq db init' migrates it)\n", cmd, f[i], key);
                *usage = 1;
                goto fail;
            }
            char qual[300];
            snprintf(qual, sizeof qual, "%s%s", col, key);
            if (!strcmp(key, "scheme") && !memchr(val, '=', vn)) {
                /* a preset's name: what the scheme started from */
                snprintf(qual, sizeof qual, "%spreset", col);
            }
            add_equal(&b, qual, val, vn, num && strcmp(key, "scheme"));
            continue;
        }
        int stored = exists(db, "SELECT 1 FROM params WHERE key = ?1 LIMIT 1", key);
        if (stored < 0) goto failed_read;
        if (stored) {
            report_printf(&b, "%sid IN (SELECT run_id FROM params WHERE key = ", col);
            add_literal(&b, key, strlen(key));
            report_printf(&b, " AND ");
            add_equal(&b, "value", val, vn, num);
            report_printf(&b, ")");
            continue;
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
            fprintf(stderr, "shardq %s: --where: '%s': no run has the knob or param %s, and it "
                    "is not a column of runs (", cmd, f[i], key);
            for (const char *const *c = run_columns; *c; c++)
                fprintf(stderr, "%s%s", c == run_columns ? "" : ", ", *c);
            fprintf(stderr, "); 'shardq db show RUN' lists a run's params\n");
            *usage = 1;
            goto fail;
        }
        /* the dots of A.X.B: those of the shorthand plus one */
        int dots = 1;
        for (const char *p = key; *p; p++) dots += *p == '.';
        report_printf(&b, "%sid IN (SELECT run_id FROM params WHERE key GLOB ", col);
        add_literal(&b, glob, strlen(glob));
        report_printf(&b, " AND length(key) - length(replace(key, '.', '')) = %d GROUP BY run_id "
                "HAVING min(", dots);
        add_equal(&b, "value", val, vn, num);
        report_printf(&b, ") = 1)");
    }
    if (n) report_printf(&b, ")");
    if (b.oom) {
        fprintf(stderr, "shardq %s: out of memory\n", cmd);
        goto fail;
    }
    return b.p;
failed_read:
    fprintf(stderr, "shardq %s: --where: cannot read the store: %s\n", cmd, sqlite3_errmsg(db));
fail:
    free(b.p);
    return NULL;
}
