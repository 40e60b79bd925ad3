/*
** cmd_db.c -- `shardq db`: the runs of the store (store.h), read-only:
** `db list` one line per run, `db show RUN` one run in full, `db export`
** a table or a SELECT as CSV; and `db init`, which creates or migrates a
** store file.
**
** Output is built from queries: the text tables and the JSON objects take
** their column names from the SQL, so what is shown is what the file holds.
*/
#include "cli.h"
#include "shardq/store.h"
#include "sq_protect.h"
#include "store/store_query.h"
#include "trace/wfile.h"

#include <sqlite3.h>

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char db_usage[] =
    "usage: shardq db [--db FILE] SUBCOMMAND [options]\n"
    "\n"
    "The runs in the store, the SQLite file that 'shardq replay' and 'shardq sweep'\n"
    "write. These commands only read it (several may run beside a sweep).\n"
    "\n"
    "subcommands:\n"
    "  list [options]             one line per run, with its mean errors\n"
    "  show RUN [--json]          one run: its row, params, error statistics per\n"
    "                             path, bytes per collective and link, timings\n"
    "  export [--csv] [-o FILE] [QUERY]\n"
    "                             a table, or the rows of a SELECT, as CSV\n"
    "  init                       create the file, or migrate an older one to this\n"
    "                             version of shardq (the only one that writes)\n"
    "\n"
    "options:\n"
    "  --db FILE        the store (default: $SHARDQ_DB if set, else shardq.db)\n"
    "  -h, --help       this text\n"
    "\n"
    "'shardq db SUBCOMMAND --help' shows the options of each.\n";

/* the --where rule (src/cli/where.h), the same in report, list and export */
#define WHERE_HELP                                                                          \
    "  --where KEY=VALUE  only the runs where KEY equals VALUE (repeatable: all\n"          \
    "                   must hold). KEY is a knob or param a run stored\n"                 \
    "                   (grad.inter.bits, weight.mode, train.lr; grad.bits: both\n"        \
    "                   hops), or a column of runs (id, kind, status, sweep,\n"           \
    "                   grid, preset, scheme, topo, device, trace, seed, host,\n"         \
    "                   version; scheme=NAME matches the preset). Numbers compare\n"      \
    "                   as numbers (4 matches 4.0)\n"

#define DB_OPTION_HELP \
    "  --db FILE        the store (default: $SHARDQ_DB if set, else shardq.db)\n"

static const char list_usage[] =
    "usage: shardq db list [--json] [--status S] [--kind K] [--sweep NAME]\n"
    "                      [--where KEY=VALUE]... [--query-timeout SECONDS]\n"
    "\n"
    "One line per run, oldest first: id, status, kind, preset, topology, seed,\n"
    "trace (its last path component), start time (UTC), duration, and the mean\n"
    "relative L2 error over the steps of the gradient and the weight paths ('-'\n"
    "where the run has none).\n"
    "\n"
    "options:\n" DB_OPTION_HELP
    "  --status S       only runs in status S: running, done, failed, or\n"
    "                   interrupted (left 'running' by a process of this host\n"
    "                   that is gone; the next run begun marks it failed)\n"
    "  --kind K         only runs of kind K (replay, train, ...)\n"
    "  --sweep NAME     only the runs of sweep NAME\n"
    WHERE_HELP
    "  --json           a JSON array of objects (full trace path, times in\n"
    "                   ISO 8601, seconds; null for a missing or infinite value)\n"
    "  --query-timeout SECONDS\n"
    "                   stop the listing once its query has run SECONDS (default\n"
    "                   10, 0: no limit)\n"
    "  -h, --help       this text\n";

static const char show_usage[] =
    "usage: shardq db show RUN [--json]\n"
    "\n"
    "Everything the store holds about run RUN (its id, as 'db list' shows it):\n"
    "the run's row (configuration, scheme, host, times, error), its params, per\n"
    "path (grad, weight) the number of steps and the mean and last relative L2\n"
    "error, SNR, cosine, bias and the fractions of zeroed and clipped elements,\n"
    "the bytes of each collective on each link level with bits per element, and\n"
    "the timings with GB/s; for a netbench run, per link level and collective\n"
    "its sizes, the time of the smallest and the busbw of the largest.\n"
    "\n"
    "options:\n" DB_OPTION_HELP
    "  --json           one JSON object (null for a missing or infinite value)\n"
    "  -h, --help       this text\n";

static const char export_usage[] =
    "usage: shardq db export [--csv] [-o FILE] [--where KEY=VALUE]... [--wide]\n"
    "                        [--query-timeout SECONDS] [QUERY]\n"
    "\n"
    "Writes QUERY's rows as CSV (RFC 4180: a header row, CRLF line ends, fields\n"
    "quoted where needed; NULL is an empty field, reals have 17 significant\n"
    "digits). QUERY is a table -- runs (the default), params, step_metrics,\n"
    "tensor_stats, bytes, timings, train_steps, bench_results, model_results,\n"
    "netbench_results --\n"
    "or one read-only SQL statement, e.g.\n"
    "  shardq db export \"SELECT r.preset, m.step, m.rel_l2 FROM runs r\n"
    "                    JOIN step_metrics m ON m.run_id = r.id WHERE m.path = 'grad'\"\n"
    "Statements that would write are refused.\n"
    "\n"
    "options:\n" DB_OPTION_HELP
    "  --csv            CSV (the default, and the only format)\n"
    WHERE_HELP
    "                   (of a table: the rows of those runs; not with a SELECT)\n"
    "  --wide           the runs with one typed column per knob or param (INTEGER,\n"
    "                   REAL or TEXT by the values the runs hold; empty where a run\n"
    "                   has none) and their mean grad_rel_l2 and weight_rel_l2,\n"
    "                   ready for pandas.read_csv or R's read.csv\n"
    "  -o, --output FILE  write to FILE (replaced only once fully written) instead\n"
    "                   of standard output; '-' is standard output. The database\n"
    "                   itself, and its -wal, -shm and -journal, are refused\n"
    "  --query-timeout SECONDS\n"
    "                   stop QUERY once it has run SECONDS, the rows written out\n"
    "                   included (default 10, 0: no limit); a table alone, without\n"
    "                   --where or --wide, has no limit\n"
    "  -h, --help       this text\n";

static const char init_usage[] =
    "usage: shardq db [--db FILE] init\n"
    "\n"
    "Creates the store FILE with the current schema, or migrates an older file\n"
    "to it (each version step in its own transaction), and prints its version.\n"
    "A file of an unknown, newer version is refused. 'shardq replay' and 'shardq\n"
    "sweep' do the same when they open the store; init is for preparing a file\n"
    "(or checking one) beforehand.\n"
    "\n"
    "options:\n" DB_OPTION_HELP "  -h, --help       this text\n";

/* ------------------------------------------------------------------------ */
/* Options                                                                  */
/* ------------------------------------------------------------------------ */

enum {
    O_DB = 1 << 0,
    O_JSON = 1 << 1,
    O_STATUS = 1 << 2,
    O_KIND = 1 << 3,
    O_SWEEP = 1 << 4,
    O_CSV = 1 << 5,
    O_OUTPUT = 1 << 6,
    O_WHERE = 1 << 7,
    O_WIDE = 1 << 8,
    O_TIMEOUT = 1 << 9,
};
/* --query-timeout: the default, and the most it takes (a day) */
#define QUERY_TIMEOUT_S 10.0
#define QUERY_TIMEOUT_MAX 86400.0
#define MAX_WHERE 64

static const struct {
    const char *name;
    int has_arg, flag;
} all_options[] = {
    {"db", required_argument, O_DB},         {"json", no_argument, O_JSON},
    {"status", required_argument, O_STATUS}, {"kind", required_argument, O_KIND},
    {"sweep", required_argument, O_SWEEP},   {"csv", no_argument, O_CSV},
    {"output", required_argument, O_OUTPUT}, {"where", required_argument, O_WHERE},
    {"wide", no_argument, O_WIDE},           {"query-timeout", required_argument, O_TIMEOUT},
};
#define NOPTIONS (sizeof all_options / sizeof all_options[0])

typedef struct db_opts {
    const char *db, *status, *kind, *sweep, *output;
    int json, wide;
    double timeout; /* --query-timeout, seconds (0: none) */
    const char *where[MAX_WHERE];
    int nwhere;
    char **pos;
    int npos;
} db_opts;

/* Parses argv (argv[0] is the subcommand) with the options in `allowed`
** and min_pos..max_pos positional arguments. Returns -1 to go on, or the
** exit status when done (help, usage error). */
static int parse_opts(const char *cmd, int argc, char **argv, int allowed, const char *usage,
                      int min_pos, int max_pos, const char *pos_desc, db_opts *o)
{
    struct option longopts[NOPTIONS + 2];
    const char *names[NOPTIONS + 2];
    size_t k = 0;
    for (size_t i = 0; i < NOPTIONS; i++)
        if (allowed & all_options[i].flag) {
            longopts[k] = (struct option){all_options[i].name, all_options[i].has_arg, NULL,
                                          all_options[i].flag};
            names[k++] = all_options[i].name;
        }
    longopts[k] = (struct option){"help", no_argument, NULL, 'h'};
    names[k++] = "help";
    longopts[k] = (struct option){NULL, 0, NULL, 0};
    names[k] = NULL;

    const char *shorts = allowed & O_OUTPUT ? ":ho:" : ":h";
    opterr = 0;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
        switch (ch) {
        case 'h': fputs(usage, stdout); return CLI_OK;
        case ':':
        case '?': return cli_option_error(cmd, ch, argv, names);
        case O_DB: o->db = optarg; break;
        case O_JSON: o->json = 1; break;
        case O_STATUS:
            if (strcmp(optarg, "running") && strcmp(optarg, "done") && strcmp(optarg, "failed") &&
                strcmp(optarg, "interrupted")) {
                fprintf(stderr, "shardq %s: --status: '%s': expected running, done, failed or "
                        "interrupted\n", cmd, optarg);
                return CLI_USAGE;
            }
            o->status = optarg;
            break;
        case O_KIND: o->kind = optarg; break;
        case O_SWEEP: o->sweep = optarg; break;
        case O_CSV: break;
        case O_WIDE: o->wide = 1; break;
        case O_TIMEOUT:
            if (cli_parse_double(cmd, "--query-timeout", optarg, 0, QUERY_TIMEOUT_MAX, &o->timeout))
                return CLI_USAGE;
            break;
        case O_WHERE:
            if (o->nwhere == MAX_WHERE) {
                fprintf(stderr, "shardq %s: --where: more than %d filters\n", cmd, MAX_WHERE);
                return CLI_USAGE;
            }
            o->where[o->nwhere++] = optarg;
            break;
        case 'o':
        case O_OUTPUT: o->output = optarg; break;
        default: return CLI_USAGE;
        }
    }
    o->pos = argv + optind;
    o->npos = argc - optind;
    if (cli_check_positional(cmd, o->pos, o->npos, min_pos, max_pos, pos_desc))
        return CLI_USAGE;
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Opening the store                                                        */
/* ------------------------------------------------------------------------ */

/* Two helpers for the text output, as SQL functions: the last component of
** a path, and a duration in seconds for people (12.3s, 4m05s, 2h10m). */
static void fn_basename(sqlite3_context *cx, int argc, sqlite3_value **argv)
{
    (void)argc;
    const char *p = (const char *)sqlite3_value_text(argv[0]);
    if (!p) return; /* NULL */
    size_t end = strlen(p);
    while (end > 1 && p[end - 1] == '/') end--; /* "traces/run1/" */
    size_t start = end;
    while (start > 0 && p[start - 1] != '/') start--;
    sqlite3_result_text(cx, p + start, (int)(end - start), SQLITE_TRANSIENT);
}

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

/* The store at path, read-only, with the helper functions; NULL after a
** message. */
static sq_store *open_store(const char *cmd, const char *path)
{
    sq_store *s;
    sq_error err = {0};
    if (sq_store_open(path, 0, 1, &s, &err)) {
        fprintf(stderr, "shardq %s: %s\n", cmd, sq_error_message(&err));
        return NULL;
    }
    if (sq_store_version(s) == 0) {
        fprintf(stderr,
                "shardq %s: %s: not a shardq store (no schema; 'shardq db init' creates one)\n",
                cmd, path);
        sq_store_close(s);
        return NULL;
    }
    sqlite3 *db = sq_store_db(s);
    int flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS;
    sqlite3_create_function(db, "sq_basename", 1, flags, NULL, fn_basename, NULL, NULL);
    sqlite3_create_function(db, "sq_duration", 1, flags, NULL, fn_duration, NULL, NULL);
    /* not deterministic: it asks the system about processes */
    sqlite3_create_function(db, "sq_status", 5, SQLITE_UTF8, NULL, fn_status, NULL, NULL);
    return s;
}

static int query_failed(const char *cmd, sq_store *s)
{
    if (sqlite3_errcode(sq_store_db(s)) == SQLITE_INTERRUPT)
        fprintf(stderr, "shardq %s: %s: a query ran past its time limit (--query-timeout raises "
                "it)\n", cmd, sq_store_path(s));
    else
        fprintf(stderr, "shardq %s: %s: cannot read: %s\n", cmd, sq_store_path(s),
                sqlite3_errmsg(sq_store_db(s)));
    return CLI_RUNTIME;
}

/* After a failed step of the statement that evaluates what the user gave
** (what: "QUERY '...'"): the time limit, said with its value, or the
** failure. */
static int read_failed(const char *cmd, sq_store *s, const char *what, double limit)
{
    if (sqlite3_errcode(sq_store_db(s)) != SQLITE_INTERRUPT) return query_failed(cmd, s);
    fprintf(stderr, "shardq %s: %s: stopped after %g s (--query-timeout raises the limit)\n", cmd,
            what, limit);
    return CLI_RUNTIME;
}

/* Standard output must have been written: a full disk or a closed pipe is
** an error, not a silent truncation. */
static int finish_stdout(const char *cmd)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "shardq %s: standard output: write failed: %s\n", cmd,
                strerror(errno ? errno : EIO));
        return CLI_RUNTIME;
    }
    return CLI_OK;
}

/* ------------------------------------------------------------------------ */
/* Text tables and JSON                                                     */
/* ------------------------------------------------------------------------ */

/* A cell as text: NULL is '-', reals have four significant digits. */
static void cell_text(sqlite3_stmt *st, int i, char *buf, size_t len)
{
    switch (sqlite3_column_type(st, i)) {
    case SQLITE_NULL: snprintf(buf, len, "-"); break;
    case SQLITE_INTEGER: snprintf(buf, len, "%lld", (long long)sqlite3_column_int64(st, i)); break;
    case SQLITE_FLOAT: snprintf(buf, len, "%.4g", sqlite3_column_double(st, i)); break;
    default: snprintf(buf, len, "%s", (const char *)sqlite3_column_text(st, i)); break;
    }
}

#define MAX_COLS 24

/* A text table: its rows are kept until printed, to size the columns. */
typedef struct table {
    int ncols;
    char **cell; /* row-major; row 0 is the header */
    size_t n, cap;
    int numeric[MAX_COLS]; /* every value of the column is a number: align right */
} table;

static int table_add(table *t, const char *text)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        char **c = realloc(t->cell, cap * sizeof *c);
        if (!c) return -1;
        t->cell = c;
        t->cap = cap;
    }
    if (!(t->cell[t->n] = strdup(text))) return -1;
    t->n++;
    return 0;
}

static void table_free(table *t)
{
    for (size_t i = 0; i < t->n; i++) free(t->cell[i]);
    free(t->cell);
}

/* Columns are separated by two blanks; numbers align right, the last
** column carries no trailing blanks. */
static void table_print(const table *t, const char *indent)
{
    size_t w[MAX_COLS] = {0};
    for (size_t i = 0; i < t->n; i++) {
        size_t l = strlen(t->cell[i]);
        if (l > w[i % t->ncols]) w[i % t->ncols] = l;
    }
    for (size_t r = 0; r < t->n / t->ncols; r++) {
        fputs(indent, stdout);
        for (int c = 0; c < t->ncols; c++) {
            const char *v = t->cell[r * t->ncols + c];
            int last = c == t->ncols - 1;
            if (t->numeric[c])
                printf("%*s", (int)w[c], v);
            else
                printf("%-*s", last ? 0 : (int)w[c], v);
            fputs(last ? "\n" : "  ", stdout);
        }
    }
}

/* Runs st and prints its rows as a table under its column names; *rows
** gets the row count. Returns 0, or -1 when sqlite fails. */
static int print_table(sqlite3_stmt *st, const char *indent, int *rows)
{
    table t = {0};
    int ncols = sqlite3_column_count(st), rc, status = -1;
    if (ncols > MAX_COLS) ncols = MAX_COLS;
    t.ncols = ncols;
    for (int c = 0; c < ncols; c++) {
        t.numeric[c] = 1;
        if (table_add(&t, sqlite3_column_name(st, c))) goto done;
    }
    *rows = 0;
    char buf[4096];
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        for (int c = 0; c < ncols; c++) {
            int type = sqlite3_column_type(st, c);
            if (type == SQLITE_TEXT || type == SQLITE_BLOB) t.numeric[c] = 0;
            cell_text(st, c, buf, sizeof buf);
            if (table_add(&t, buf)) goto done;
        }
        (*rows)++;
    }
    if (rc != SQLITE_DONE) goto done;
    if (*rows) table_print(&t, indent);
    status = 0;
done:
    table_free(&t);
    return status;
}

/* A value as JSON: a number, a string, or null (for NULL and +-Inf, which
** JSON cannot say). */
static void json_value(sqlite3_stmt *st, int i)
{
    switch (sqlite3_column_type(st, i)) {
    case SQLITE_INTEGER: printf("%lld", (long long)sqlite3_column_int64(st, i)); break;
    case SQLITE_FLOAT: {
        double v = sqlite3_column_double(st, i);
        if (isfinite(v))
            printf("%.17g", v);
        else
            fputs("null", stdout);
        break;
    }
    case SQLITE_TEXT: cli_json_str((const char *)sqlite3_column_text(st, i)); break;
    default: fputs("null", stdout); break;
    }
}

/* The current row as a JSON object, keyed by the column names. */
static void json_row(sqlite3_stmt *st)
{
    putchar('{');
    for (int c = 0; c < sqlite3_column_count(st); c++) {
        if (c) putchar(',');
        cli_json_str(sqlite3_column_name(st, c));
        putchar(':');
        json_value(st, c);
    }
    putchar('}');
}

/* Runs st and prints its rows as a JSON array of objects. */
static int print_json_rows(sqlite3_stmt *st)
{
    int rc, n = 0;
    putchar('[');
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n++) putchar(',');
        json_row(st);
    }
    putchar(']');
    return rc == SQLITE_DONE ? 0 : -1;
}

/* The ids of the runs the --where filters select (sq_store_select_runs),
** a JSON array to bind to the condition that reads them; NULL with *rc the
** exit status after a message. */
static char *where_ids(const char *cmd, sq_store *s, const db_opts *o, int *rc)
{
    char *ids = NULL;
    sq_error err = {0};
    int st = sq_store_select_runs(s, NULL, o->where, o->nwhere, &ids, &err);
    if (st == SQ_OK) return ids;
    fprintf(stderr, "shardq %s: %s\n", cmd, sq_error_message(&err));
    *rc = st == SQ_ERR_SPEC ? CLI_USAGE : CLI_RUNTIME;
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* db list                                                                  */
/* ------------------------------------------------------------------------ */

#define RUN_FILTER(STATUS)                                                                    \
    " WHERE (?1 IS NULL OR " STATUS " = ?1) AND (?2 IS NULL OR r.kind = ?2)"                  \
    " AND (?3 IS NULL OR r.sweep = ?3) AND (%s) ORDER BY r.id"
/* the status as shown; a store of version 3 or older knows no start times */
#define STATUS_V4 "sq_status(r.status, r.host, r.pid, r.pid_start, r.boot_id)"
#define STATUS_V3 "sq_status(r.status, r.host, r.pid, NULL, NULL)"
/* julianday has ~10 us of resolution this far from its epoch: round to ms */
#define SECONDS "round((julianday(r.ended) - julianday(r.started)) * 86400.0, 3)"
#define MEAN_REL_L2(p) \
    "(SELECT avg(m.rel_l2) FROM step_metrics m WHERE m.run_id = r.id AND m.path = '" p "')"

#define LIST_TEXT_SQL(STATUS)                                                                   \
    "SELECT r.id AS id, " STATUS " AS status, r.kind AS kind, r.preset AS preset,"              \
    " r.topo AS topo, r.seed AS seed, sq_basename(r.trace) AS trace,"                          \
    " replace(substr(r.started, 1, 19), 'T', ' ') AS started,"                                 \
    " sq_duration(" SECONDS ") AS duration,"                                                    \
    " " MEAN_REL_L2("grad") " AS grad_rel_l2, " MEAN_REL_L2("weight") " AS weight_rel_l2"    \
    " FROM runs r" RUN_FILTER(STATUS)

#define LIST_JSON_SQL(STATUS)                                                                   \
    "SELECT r.id AS id, " STATUS " AS status, r.kind AS kind, r.key AS key, r.sweep AS sweep,"  \
    " r.preset AS preset, r.scheme AS scheme, r.topo AS topo, r.device AS device,"             \
    " r.trace AS trace, r.seed AS seed, r.started AS started, r.ended AS ended,"               \
    " " SECONDS " AS seconds, " MEAN_REL_L2("grad") " AS grad_rel_l2,"                         \
    " " MEAN_REL_L2("weight") " AS weight_rel_l2, r.error AS error"                          \
    " FROM runs r" RUN_FILTER(STATUS)

static int db_list(const char *path, int argc, char **argv)
{
    db_opts o = {.db = path, .timeout = QUERY_TIMEOUT_S};
    int rc = parse_opts("db list", argc, argv,
                        O_DB | O_JSON | O_STATUS | O_KIND | O_SWEEP | O_WHERE | O_TIMEOUT,
                        list_usage, 0, 0, "no arguments", &o);
    if (rc >= 0) return rc;
    sq_store *s = open_store("db list", o.db);
    if (!s) return CLI_RUNTIME;
    sq_store_limit_queries(s, o.timeout);
    sqlite3_stmt *st;
    static const char *const sql[2][2] = {{LIST_TEXT_SQL(STATUS_V3), LIST_JSON_SQL(STATUS_V3)},
                                          {LIST_TEXT_SQL(STATUS_V4), LIST_JSON_SQL(STATUS_V4)}};
    char *ids = o.nwhere ? where_ids("db list", s, &o, &rc) : NULL;
    if (o.nwhere && !ids) {
        sq_store_close(s);
        return rc;
    }
    const char *cond = ids ? "r.id IN (SELECT value FROM json_each(?4))" : "1";
    char *text = sqlite3_mprintf(sql[sq_store_version(s) >= 4][o.json], cond);
    if (!text || sqlite3_prepare_v2(sq_store_db(s), text, -1, &st, NULL) != SQLITE_OK) {
        sqlite3_free(text);
        free(ids);
        rc = query_failed("db list", s);
        sq_store_close(s);
        return rc;
    }
    sqlite3_free(text);
    sqlite3_bind_text(st, 1, o.status, -1, SQLITE_STATIC); /* NULL binds NULL */
    sqlite3_bind_text(st, 2, o.kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, o.sweep, -1, SQLITE_STATIC);
    if (ids) sqlite3_bind_text(st, 4, ids, -1, free);
    int rows = 0, bad;
    if (o.json) {
        bad = print_json_rows(st);
        putchar('\n');
    } else {
        bad = print_table(st, "", &rows);
        if (!bad && rows == 0)
            printf("no runs%s in %s\n", o.status || o.kind || o.sweep || o.nwhere ? " match" : "",
                   o.db);
    }
    rc = bad ? read_failed("db list", s, "the query of the runs", o.timeout) : CLI_OK;
    sqlite3_finalize(st);
    sq_store_close(s);
    return rc ? rc : finish_stdout("db list");
}

/* ------------------------------------------------------------------------ */
/* db show                                                                  */
/* ------------------------------------------------------------------------ */

static const char show_run_sql[] =
    "SELECT r.*, " SECONDS " AS seconds FROM runs r WHERE r.id = ?1";
static const char show_params_sql[] =
    "SELECT key, value FROM params WHERE run_id = ?1 ORDER BY key";
static const char show_metrics_sql[] =
    "SELECT m.path AS path, count(*) AS steps, max(m.elements) AS elements,"
    " avg(m.rel_l2) AS mean_rel_l2,"
    " (SELECT l.rel_l2 FROM step_metrics l WHERE l.run_id = m.run_id AND l.path = m.path"
    "  ORDER BY l.step DESC LIMIT 1) AS last_rel_l2,"
    " avg(m.snr_db) AS mean_snr_db, avg(m.cosine) AS mean_cosine, max(m.max_abs) AS max_abs,"
    " avg(m.mean_signed) AS mean_signed, avg(m.frac_zeroed) AS frac_zeroed,"
    " avg(m.frac_clipped) AS frac_clipped, sum(m.seconds) AS seconds"
    " FROM step_metrics m WHERE m.run_id = ?1 GROUP BY m.path ORDER BY m.path";
static const char show_tensors_sql[] =
    "SELECT count(*) AS rows, count(DISTINCT tensor) AS tensors FROM tensor_stats"
    " WHERE run_id = ?1";
static const char show_bytes_sql[] =
    "SELECT collective, link, sent_codes, sent_meta, recv_codes, recv_meta, sent_elems,"
    " messages, bits_per_elem, sent_params, bits_per_param FROM bytes WHERE run_id = ?1"
    " ORDER BY collective, link";
/* A file of schema version 4 or older (read as it is) has no sent_params. */
static const char show_bytes_v4_sql[] =
    "SELECT collective, link, sent_codes, sent_meta, recv_codes, recv_meta, sent_elems,"
    " messages, bits_per_elem FROM bytes WHERE run_id = ?1 ORDER BY collective, link";
static const char show_timings_sql[] =
    "SELECT op, calls, seconds, bytes, gb_per_s FROM timings WHERE run_id = ?1 ORDER BY op";
/* A netbench run (schema version 6): per level and collective, its sizes,
** the busbw of the largest and the time of the smallest (every row is in
** `db export netbench_results`, and in --json). */
static const char show_netbench_count_sql[] =
    "SELECT count(*) FROM netbench_results WHERE run_id = ?1";
static const char show_netbench_sql[] =
    "SELECT level, op, max(ranks) AS ranks, max(comms) AS comms, count(*) AS sizes,"
    " min(bytes) AS min_bytes, max(bytes) AS max_bytes,"
    " (SELECT round(x.seconds * 1e6, 3) FROM netbench_results x WHERE x.run_id = n.run_id"
    "  AND x.level = n.level AND x.op = n.op ORDER BY x.bytes LIMIT 1) AS small_time_us,"
    " (SELECT x.busbw_gb_s FROM netbench_results x WHERE x.run_id = n.run_id"
    "  AND x.level = n.level AND x.op = n.op ORDER BY x.bytes DESC LIMIT 1) AS large_busbw_gb_s"
    " FROM netbench_results n WHERE n.run_id = ?1 GROUP BY level, op"
    " ORDER BY CASE level WHEN 'intra' THEN 0 WHEN 'inter' THEN 1 ELSE 2 END,"
    " CASE op WHEN 'allgather' THEN 0 WHEN 'reducescatter' THEN 1 ELSE 2 END";
static const char show_netbench_rows_sql[] =
    "SELECT op, level, bytes, count, ranks, comms, iters, seconds, algbw_gb_s, busbw_gb_s"
    " FROM netbench_results WHERE run_id = ?1 ORDER BY"
    " CASE level WHEN 'intra' THEN 0 WHEN 'inter' THEN 1 ELSE 2 END,"
    " CASE op WHEN 'allgather' THEN 0 WHEN 'reducescatter' THEN 1 ELSE 2 END, bytes";

static int prepare_run(sq_store *s, const char *sql, int64_t id, sqlite3_stmt **st)
{
    if (sqlite3_prepare_v2(sq_store_db(s), sql, -1, st, NULL) != SQLITE_OK) return -1;
    sqlite3_bind_int64(*st, 1, id);
    return 0;
}

/* The run's row: one "name value" line per column, or an object. */
static int show_run(sq_store *s, int64_t id, int json)
{
    sqlite3_stmt *st;
    if (prepare_run(s, show_run_sql, id, &st)) return -1;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && json) {
        printf("{\"run\":");
        json_row(st);
    } else if (rc == SQLITE_ROW) {
        printf("run %lld in %s\n", (long long)id, sq_store_path(s));
        char buf[64];
        for (int c = 0; c < sqlite3_column_count(st); c++) {
            const char *name = sqlite3_column_name(st, c);
            if (strcmp(name, "seconds") == 0) {
                if (sqlite3_column_type(st, c) == SQLITE_NULL) continue;
                printf("  %-9s %.3f s\n", "duration", sqlite3_column_double(st, c));
            } else if (sqlite3_column_type(st, c) == SQLITE_TEXT) {
                printf("  %-9s %s\n", name, (const char *)sqlite3_column_text(st, c));
            } else {
                cell_text(st, c, buf, sizeof buf);
                printf("  %-9s %s\n", name, buf);
            }
        }
    }
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : -1;
}

/* One section of `db show`: its rows as a table under a title, or as the
** JSON array "key". */
static int show_section(sq_store *s, int64_t id, const char *sql, const char *title,
                        const char *key, int json)
{
    sqlite3_stmt *st;
    if (prepare_run(s, sql, id, &st)) return -1;
    int rows = 0, bad;
    if (json) {
        printf(",\"%s\":", key);
        bad = print_json_rows(st);
    } else {
        printf("\n%s:\n", title);
        bad = print_table(st, "  ", &rows);
        if (!bad && rows == 0) printf("  (none)\n");
    }
    sqlite3_finalize(st);
    return bad;
}

static int show_params_json(sq_store *s, int64_t id)
{
    sqlite3_stmt *st;
    if (prepare_run(s, show_params_sql, id, &st)) return -1;
    int rc, n = 0;
    printf(",\"params\":{");
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n++) putchar(',');
        cli_json_str((const char *)sqlite3_column_text(st, 0));
        putchar(':');
        json_value(st, 1);
    }
    putchar('}');
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

static int show_tensors(sq_store *s, int64_t id, int json)
{
    sqlite3_stmt *st;
    if (prepare_run(s, show_tensors_sql, id, &st)) return -1;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        if (json) {
            printf(",\"tensor_stats\":");
            json_row(st);
        } else if (sqlite3_column_int64(st, 0) > 0) {
            printf("\ntensor stats: %lld rows over %lld tensors (db export tensor_stats)\n",
                   (long long)sqlite3_column_int64(st, 0), (long long)sqlite3_column_int64(st, 1));
        }
    }
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : -1;
}

/* The netbench section, only where the run has netbench rows: other runs
** show what they always showed. */
static int show_netbench(sq_store *s, int64_t id, int json)
{
    if (sq_store_version(s) < 6) return 0;
    sqlite3_stmt *st;
    if (prepare_run(s, show_netbench_count_sql, id, &st)) return -1;
    int rc = sqlite3_step(st);
    int64_t rows = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW) return -1;
    if (!rows) return 0;
    if (json) return show_section(s, id, show_netbench_rows_sql, "", "netbench", 1);
    return show_section(s, id, show_netbench_sql,
                        "netbench per level and collective (every size: db export "
                        "netbench_results)", "netbench", 0);
}

static int db_show(const char *path, int argc, char **argv)
{
    db_opts o = {.db = path};
    int rc = parse_opts("db show", argc, argv, O_DB | O_JSON, show_usage, 1, 1, "RUN", &o);
    if (rc >= 0) return rc;
    uint64_t id;
    if (cli_parse_u64("db show", "RUN", o.pos[0], INT64_MAX, &id)) return CLI_USAGE;
    sq_store *s = open_store("db show", o.db);
    if (!s) return CLI_RUNTIME;
    sqlite3 *db = sq_store_db(s);
    const int64_t run = (int64_t)id;
    /* one read transaction, so every section sees the same state */
    int bad = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK, found = 0;
    if (!bad) {
        sqlite3_stmt *st;
        bad = prepare_run(s, "SELECT 1 FROM runs WHERE id = ?1", run, &st);
        if (!bad) {
            int r = sqlite3_step(st);
            found = r == SQLITE_ROW;
            bad = r != SQLITE_ROW && r != SQLITE_DONE;
            sqlite3_finalize(st);
        }
    }
    if (!bad && !found) {
        fprintf(stderr, "shardq db show: %s: no run %lld (see 'shardq db list')\n", o.db,
                (long long)run);
        sq_store_close(s);
        return CLI_RUNTIME;
    }
    bad = bad || show_run(s, run, o.json);
    if (o.json)
        bad = bad || show_params_json(s, run);
    else
        bad = bad || show_section(s, run, show_params_sql, "params", "params", 0);
    bad = bad || show_section(s, run, show_metrics_sql,
                              "error statistics per path (means over the steps)", "metrics",
                              o.json);
    bad = bad || show_tensors(s, run, o.json);
    bad = bad || show_section(s, run, sq_store_version(s) >= 5 ? show_bytes_sql : show_bytes_v4_sql,
                              "bytes per collective and link (bits_per_elem, bits_per_param: sent)",
                              "bytes",
                              o.json);
    bad = bad || show_section(s, run, show_timings_sql, "timings", "timings", o.json);
    bad = bad || show_netbench(s, run, o.json);
    if (!bad && o.json) printf("}\n");
    rc = bad ? query_failed("db show", s) : CLI_OK;
    sq_store_close(s); /* ends the read transaction */
    return rc ? rc : finish_stdout("db show");
}

/* ------------------------------------------------------------------------ */
/* db export                                                                */
/* ------------------------------------------------------------------------ */



/* Where the CSV goes: a file through the safe writer, or standard output. */
typedef struct sink {
    sq_wfile w;
    int file;
} sink;

static void put(sink *o, const char *p, size_t n)
{
    if (o->file)
        sq_wfile_write(&o->w, p, n);
    else
        fwrite(p, 1, n, stdout);
}

/* One field: quoted when it holds a comma, a quote or a line break, with
** its quotes doubled (RFC 4180). */
static void put_field(sink *o, const char *v, size_t n)
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

static void put_value(sink *o, sqlite3_stmt *st, int i)
{
    char buf[64];
    switch (sqlite3_column_type(st, i)) {
    case SQLITE_NULL: break;
    case SQLITE_INTEGER:
        put(o, buf,
            (size_t)snprintf(buf, sizeof buf, "%lld", (long long)sqlite3_column_int64(st, i)));
        break;
    case SQLITE_FLOAT:
        put(o, buf, (size_t)snprintf(buf, sizeof buf, "%.17g", sqlite3_column_double(st, i)));
        break;
    case SQLITE_BLOB: { /* as hexadecimal digits */
        const unsigned char *b = sqlite3_column_blob(st, i);
        for (int k = 0, n = sqlite3_column_bytes(st, i); k < n; k++)
            put(o, buf, (size_t)snprintf(buf, sizeof buf, "%02x", b[k]));
        break;
    }
    default: {
        const char *t = (const char *)sqlite3_column_text(st, i);
        put_field(o, t, (size_t)sqlite3_column_bytes(st, i));
        break;
    }
    }
}

/* The runs of cond, one column per param ("wide"): each param's values
** typed by what every run holds (all integers: INTEGER, all numbers: REAL,
** else TEXT), after the columns of runs that describe a run and the mean
** relative L2 error of each path, so that a data frame reads it as it is.
** ids: bound to the ?1 of cond. NULL after a message. */
static char *wide_sql(sq_store *s, const char *cond, const char *ids)
{
    sqlite3 *db = sq_store_db(s);
    char *q = sqlite3_mprintf(
        "SELECT key, sum(value IS NOT NULL AND value NOT GLOB '*[^0-9-]*' AND value GLOB "
        "'*[0-9]*' AND value NOT GLOB '?*-*') = count(value), "
        "sum(value IS NOT NULL AND value NOT GLOB '*[^0-9.eE+-]*' AND value GLOB '*[0-9]*') = "
        "count(value) FROM params WHERE run_id IN (SELECT id FROM runs WHERE %s) "
        "GROUP BY key ORDER BY key", cond);
    sqlite3_stmt *st = NULL;
    if (!q || sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK) {
        sqlite3_free(q);
        query_failed("db export", s);
        return NULL;
    }
    sqlite3_free(q);
    if (ids) sqlite3_bind_text(st, 1, ids, -1, SQLITE_STATIC);
    /* the columns of runs that describe a run (those of the process that ran
    ** it, the whole configuration and the recipe's text stay in 'runs') */
    char *cols = sqlite3_mprintf("r.id");
    sqlite3_stmt *ti = NULL;
    if (sqlite3_prepare_v2(db, "SELECT name FROM pragma_table_info('runs') WHERE name NOT IN "
                           "('id', 'key', 'config', 'recipe', 'pid', 'pid_start', 'boot_id', "
                           "'heartbeat') ORDER BY cid", -1, &ti, NULL) == SQLITE_OK)
        while (cols && sqlite3_step(ti) == SQLITE_ROW) {
            char *next = sqlite3_mprintf("%s, r.\"%w\"", cols, sqlite3_column_text(ti, 0));
            sqlite3_free(cols);
            cols = next;
        }
    sqlite3_finalize(ti);
    char *sql = sqlite3_mprintf("SELECT %s, (SELECT avg(m.rel_l2) FROM step_metrics m WHERE "
                                "m.run_id = r.id AND m.path = 'grad') AS grad_rel_l2, (SELECT "
                                "avg(m.rel_l2) FROM step_metrics m WHERE m.run_id = r.id AND "
                                "m.path = 'weight') AS weight_rel_l2", cols);
    sqlite3_free(cols);
    int rc;
    while (sql && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *key = (const char *)sqlite3_column_text(st, 0);
        const char *type = sqlite3_column_int(st, 1) ? "INTEGER" : sqlite3_column_int(st, 2) ? "REAL" : "TEXT";
        char *next = sqlite3_mprintf("%s, max(CASE WHEN p.key = %Q THEN CAST(p.value AS %s) END) "
                                     "AS \"%w\"", sql, key, type, key);
        sqlite3_free(sql);
        sql = next;
    }
    sqlite3_finalize(st);
    char *all = sql ? sqlite3_mprintf("%s FROM runs r LEFT JOIN params p ON p.run_id = r.id WHERE "
                                      "r.id IN (SELECT id FROM runs WHERE %s) GROUP BY r.id "
                                      "ORDER BY r.id", sql, cond)
                    : NULL;
    sqlite3_free(sql);
    if (!all) fprintf(stderr, "shardq db export: out of memory\n");
    return all;
}

/* QUERY as a statement: a table name, or SQL that must read only; ids
** (of the --where filters, NULL: none) selects the rows of a table by their
** run, wide (--wide) spreads the params of the runs into columns. Prints
** why not and returns the exit status, or -1 with *st ready. */
static int export_statement(sq_store *s, const char *query, const char *ids, int wide,
                            sqlite3_stmt **st)
{
    const char *cond = ids ? "id IN (SELECT value FROM json_each(?1))" : NULL;
    char names[512] = "";
    char *sql = NULL;
    const char *text = query;
    size_t ntables, used = 0;
    const sq_store_table *tables = sq_store_tables(&ntables);
    for (size_t i = 0; i < ntables; i++) {
        if (strcmp(query, tables[i].name) == 0) {
            int runs = strcmp(query, "runs") == 0;
            sql = sqlite3_mprintf("SELECT * FROM %s WHERE %s%s%s ORDER BY %s", tables[i].name,
                                  runs ? "" : "run_id IN (SELECT id FROM runs WHERE ",
                                  cond ? cond : "1", runs ? "" : ")", tables[i].order);
            if (!sql) {
                fprintf(stderr, "shardq db export: out of memory\n");
                return CLI_RUNTIME;
            }
            text = sql;
        }
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                                 tables[i].name);
    }
    if (wide && strcmp(query, "runs")) {
        fprintf(stderr, "shardq db export: --wide: exports the runs (one column per param), "
                "not '%s'\n", query);
        sqlite3_free(sql);
        return CLI_USAGE;
    }
    if (cond && !sql) {
        fprintf(stderr, "shardq db export: --where: selects the rows of a table (%s), not of "
                "QUERY '%s': write the condition into the statement\n", names, query);
        return CLI_USAGE;
    }
    if (wide) {
        sqlite3_free(sql);
        char *w = wide_sql(s, cond ? cond : "1", ids);
        if (!w) return CLI_RUNTIME;
        text = sql = w;
    }
    const char *tail = NULL;
    sqlite3 *db = sq_store_db(s);
    if (sqlite3_prepare_v2(db, text, -1, st, &tail) != SQLITE_OK || !*st) {
        /* no statement without an error: the text was empty (or a comment) */
        const char *why = sqlite3_errcode(db) != SQLITE_OK ? sqlite3_errmsg(db) : "it is empty";
        fprintf(stderr,
                "shardq db export: QUERY '%s' is neither a table (%s) nor a valid statement: %s\n",
                query, names, why);
        sqlite3_finalize(*st);
        sqlite3_free(sql);
        return CLI_USAGE;
    }
    while (*tail == ' ' || *tail == '\t' || *tail == '\n' || *tail == '\r' || *tail == ';') tail++;
    const char *why = NULL;
    if (*tail)
        why = "give one statement only";
    else if (!sqlite3_stmt_readonly(*st))
        why = "it would write to the database; only read-only statements are accepted";
    else if (sqlite3_column_count(*st) == 0)
        why = "it returns no rows; use a SELECT";
    sqlite3_free(sql);
    if (why) {
        fprintf(stderr, "shardq db export: QUERY '%s' refused: %s\n", query, why);
        sqlite3_finalize(*st);
        return CLI_USAGE;
    }
    if (ids) sqlite3_bind_text(*st, 1, ids, -1, SQLITE_TRANSIENT);
    return -1;
}

/* Writes the rows of st as CSV; returns 0, or -1 when sqlite fails. */
static int write_csv(sink *o, sqlite3_stmt *st)
{
    int ncols = sqlite3_column_count(st), rc;
    for (int c = 0; c < ncols; c++) {
        const char *name = sqlite3_column_name(st, c);
        if (c) put(o, ",", 1);
        put_field(o, name, strlen(name));
    }
    put(o, "\r\n", 2);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        for (int c = 0; c < ncols; c++) {
            if (c) put(o, ",", 1);
            put_value(o, st, c);
        }
        put(o, "\r\n", 2);
    }
    return rc == SQLITE_DONE ? 0 : -1;
}

static int db_export(const char *path, int argc, char **argv)
{
    db_opts o = {.db = path, .timeout = QUERY_TIMEOUT_S};
    int rc = parse_opts("db export", argc, argv,
                        O_DB | O_CSV | O_OUTPUT | O_WHERE | O_WIDE | O_TIMEOUT, export_usage, 0, 1,
                        "at most one QUERY", &o);
    if (rc >= 0) return rc;
    sq_store *s = open_store("db export", o.db);
    if (!s) return CLI_RUNTIME;
    /* the safe writer would refuse it too, once the query has run: say it
    ** here, with the option */
    char which[1024];
    if (o.output && strcmp(o.output, "-") != 0 &&
        sq_path_is_protected(o.output, which, sizeof which)) {
        fprintf(stderr, "shardq db export: -o %s: is the database being read (%s): refused, it "
                "would be replaced\n", o.output, which);
        sq_store_close(s);
        return CLI_RUNTIME;
    }
    /* what the user wrote runs under the limit; a table alone reads its
    ** rows in order and cannot run away */
    const char *query = o.npos ? o.pos[0] : "runs";
    int table = 0;
    size_t ntables;
    const sq_store_table *tables = sq_store_tables(&ntables);
    for (size_t i = 0; i < ntables; i++) table |= strcmp(query, tables[i].name) == 0;
    if (!table || o.nwhere || o.wide) sq_store_limit_queries(s, o.timeout);
    sqlite3_stmt *st = NULL;
    char *ids = o.nwhere ? where_ids("db export", s, &o, &rc) : NULL;
    if (o.nwhere && !ids) {
        sq_store_close(s);
        return rc;
    }
    rc = export_statement(s, query, ids, o.wide, &st);
    free(ids);
    if (rc >= 0) {
        sq_store_close(s);
        return rc;
    }
    sink out = {.file = o.output && strcmp(o.output, "-") != 0};
    sq_error err = {0};
    if (out.file && sq_wfile_open(&out.w, o.output, &err)) {
        fprintf(stderr, "shardq db export: %s\n", sq_error_message(&err));
        sqlite3_finalize(st);
        sq_store_close(s);
        return CLI_RUNTIME;
    }
    if (write_csv(&out, st)) {
        char what[512];
        snprintf(what, sizeof what, "QUERY '%s'", query);
        rc = read_failed("db export", s, what, o.timeout);
        if (out.file) sq_wfile_abort(&out.w);
    } else if (out.file && sq_wfile_commit(&out.w, &err)) {
        fprintf(stderr, "shardq db export: %s\n", sq_error_message(&err));
        rc = CLI_RUNTIME;
    } else {
        rc = out.file ? CLI_OK : finish_stdout("db export");
    }
    sqlite3_finalize(st);
    sq_store_close(s);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* db init                                                                  */
/* ------------------------------------------------------------------------ */

static int db_init(const char *path, int argc, char **argv)
{
    db_opts o = {.db = path};
    int rc = parse_opts("db init", argc, argv, O_DB, init_usage, 0, 0, "no arguments", &o);
    if (rc >= 0) return rc;
    struct stat sb;
    int existed = stat(o.db, &sb) == 0;
    sq_store *s;
    sq_error err = {0};
    if (sq_store_open(o.db, 0, 0, &s, &err)) {
        fprintf(stderr, "shardq db init: %s\n", sq_error_message(&err));
        return CLI_RUNTIME;
    }
    printf("%s: %s, schema version %d\n", o.db, existed ? "ready" : "created",
           sq_store_version(s));
    sq_store_close(s);
    return finish_stdout("db init");
}

/* ------------------------------------------------------------------------ */
/* Dispatch                                                                 */
/* ------------------------------------------------------------------------ */

int cmd_db(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(const char *, int, char **);
    } subs[] = {{"list", db_list}, {"show", db_show}, {"export", db_export}, {"init", db_init}};
    static const char *const names[] = {"list", "show", "export", "init"};
    const char *path = cli_default_db();

    /* options before the subcommand: --db FILE, --db=FILE, --help */
    int i = 1;
    while (i < argc && argv[i][0] == '-') {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(db_usage, stdout);
            return CLI_OK;
        } else if (strcmp(a, "--db") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr,
                        "shardq db: option '--db' needs a value\nTry 'shardq db --help'.\n");
                return CLI_USAGE;
            }
            path = argv[i + 1];
            i += 2;
        } else if (strncmp(a, "--db=", 5) == 0) {
            path = a + 5;
            i++;
        } else {
            static const char *const top[] = {"db", "help", NULL};
            cli_unknown_option("db", a, top);
            return CLI_USAGE;
        }
    }
    if (i >= argc) {
        fputs(db_usage, stderr);
        return CLI_USAGE;
    }
    const char *sub = argv[i];
    if (strcmp(sub, "help") == 0) {
        fputs(db_usage, stdout);
        return CLI_OK;
    }
    if (!*path) {
        fprintf(stderr, "shardq db: the database file name is empty\n");
        return CLI_USAGE;
    }
    for (size_t k = 0; k < sizeof subs / sizeof *subs; k++)
        if (strcmp(sub, subs[k].name) == 0) return subs[k].fn(path, argc - i, argv + i);
    const char *hint = cli_suggest(sub, names, sizeof names / sizeof *names);
    if (hint)
        fprintf(stderr, "shardq db: unknown subcommand '%s' (did you mean '%s'?)\n", sub, hint);
    else
        fprintf(stderr, "shardq db: unknown subcommand '%s' (list, show, export, init)\n", sub);
    fputs("Try 'shardq db --help'.\n", stderr);
    return CLI_USAGE;
}
