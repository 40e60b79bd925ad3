/*
** cmd_db.c -- `shardq db`: the runs of the store (store.h), read-only:
** `db list` one line per run, `db show RUN` one run in full, `db export`
** a table or a SELECT as CSV; and `db init`, which creates or migrates a
** store file.
**
** The store's readers and writers (store_rows.h) give the rows and print
** them: the runs of `db list` and a run in full (run_write.c), an export's
** cursor as CSV (cursor_write.c), so that what is shown is what the file
** holds. This file only parses options, calls them and says failures.
*/
#include "cli.h"
#include "shardq/store_rows.h"
#include "sq_protect.h"
#include "trace/wfile.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define db_usage cli_help("shardq-db")
#define list_usage cli_help("shardq-db-list")
#define show_usage cli_help("shardq-db-show")
#define export_usage cli_help("shardq-db-export")
#define init_usage cli_help("shardq-db-init")

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
/* Opening the store, and its failures                                      */
/* ------------------------------------------------------------------------ */

/* The store at path, read-only (store_rows.h); NULL after a message. */
static sq_store *open_store(const char *cmd, const char *path)
{
    sq_store *s;
    sq_error err = {0};
    if (sq_store_open_reader(path, &s, &err)) {
        fprintf(stderr, "shardq %s: %s\n", cmd, sq_error_message(&err));
        return NULL;
    }
    return s;
}

/* After a failed read: the time limit said as such, with its value when
** the statement is what the user gave (what: "QUERY '...'", NULL: a query
** of the command's own), else the store's sentence. */
static int read_failed(const char *cmd, sq_store *s, const sq_error *err, const char *what,
                       double limit)
{
    if (err->status != SQ_ERR_INTERRUPTED)
        fprintf(stderr, "shardq %s: %s\n", cmd, sq_error_message(err));
    else if (what)
        fprintf(stderr, "shardq %s: %s: stopped after %g s (--query-timeout raises the limit)\n",
                cmd, what, limit);
    else
        fprintf(stderr, "shardq %s: %s: a query ran past its time limit (--query-timeout raises "
                "it)\n", cmd, sq_store_path(s));
    return CLI_RUNTIME;
}

/* The runs the --where filters select, as a JSON array in *ids (NULL
** without filters). Returns -1 to go on, or the exit status after a
** message. */
static int select_runs(const char *cmd, sq_store *s, const db_opts *o, char **ids)
{
    *ids = NULL;
    if (!o->nwhere) return -1;
    sq_error err = {0};
    int rc = sq_store_select_runs(s, NULL, o->where, o->nwhere, ids, &err);
    if (!rc) return -1;
    fprintf(stderr, "shardq %s: %s\n", cmd, sq_error_message(&err));
    return cli_exit_status(rc);
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
/* db list                                                                  */
/* ------------------------------------------------------------------------ */

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
    char *ids;
    rc = select_runs("db list", s, &o, &ids);
    if (rc >= 0) {
        sq_store_close(s);
        return rc;
    }
    const sq_run_filter f = {.status = o.status, .kind = o.kind, .sweep = o.sweep, .ids = ids};
    sq_store_cursor *c = NULL;
    sq_error err = {0};
    rc = sq_store_runs_open(s, &f, &c, &err);
    free(ids);
    if (rc) {
        rc = read_failed("db list", s, &err, NULL, 0);
        sq_store_close(s);
        return rc;
    }
    int rows = 0;
    if (o.json) {
        rc = sq_store_runs_write_json(c, stdout, &err);
        putchar('\n');
    } else {
        rc = sq_store_runs_write_table(c, stdout, &rows, &err);
        if (!rc && rows == 0)
            printf("no runs%s in %s\n", o.status || o.kind || o.sweep || o.nwhere ? " match" : "",
                   o.db);
    }
    rc = rc ? read_failed("db list", s, &err, "the query of the runs", o.timeout) : CLI_OK;
    sq_store_cursor_close(c);
    sq_store_close(s);
    return rc ? rc : finish_stdout("db list");
}

/* ------------------------------------------------------------------------ */
/* db show                                                                  */
/* ------------------------------------------------------------------------ */

static int db_show(const char *path, int argc, char **argv)
{
    db_opts o = {.db = path};
    int rc = parse_opts("db show", argc, argv, O_DB | O_JSON, show_usage, 1, 1, "RUN", &o);
    if (rc >= 0) return rc;
    uint64_t id;
    if (cli_parse_u64("db show", "RUN", o.pos[0], INT64_MAX, &id)) return CLI_USAGE;
    sq_store *s = open_store("db show", o.db);
    if (!s) return CLI_RUNTIME;
    const int64_t run = (int64_t)id;
    sq_error err = {0};
    /* one read transaction, so every section sees the same state */
    int found = 0;
    rc = sq_store_read_begin(s, &err);
    if (!rc) rc = sq_store_run_exists(s, run, &found, &err);
    if (!rc && !found) {
        fprintf(stderr, "shardq db show: %s: no run %lld (see 'shardq db list')\n", o.db,
                (long long)run);
        sq_store_close(s);
        return CLI_RUNTIME;
    }
    if (!rc) rc = sq_store_run_write(s, run, o.json, stdout, &err);
    rc = rc ? read_failed("db show", s, &err, NULL, 0) : CLI_OK;
    sq_store_close(s); /* ends the read transaction */
    return rc ? rc : finish_stdout("db show");
}

/* ------------------------------------------------------------------------ */
/* db export                                                                */
/* ------------------------------------------------------------------------ */

/* The safe writer as the CSV's sink. */
static void put_wfile(void *w, const void *bytes, size_t n) { sq_wfile_write(w, bytes, n); }

/* Whether name is a table of the schema. */
static int is_table(const char *name)
{
    size_t ntables;
    const sq_store_table *tables = sq_store_tables(&ntables);
    for (size_t i = 0; i < ntables; i++)
        if (strcmp(name, tables[i].name) == 0) return 1;
    return 0;
}

/* QUERY's rows into *c: a table (of the runs ids selects, NULL: all), the
** wide runs (wide), or the user's statement. Returns -1 to go on, or the
** exit status after a message. */
static int export_cursor(sq_store *s, const char *query, const char *ids, int wide,
                         sq_store_cursor **c)
{
    if (wide && strcmp(query, "runs")) {
        fprintf(stderr, "shardq db export: --wide: exports the runs (one column per param), "
                "not '%s'\n", query);
        return CLI_USAGE;
    }
    if (ids && !is_table(query)) {
        size_t ntables;
        const sq_store_table *tables = sq_store_tables(&ntables);
        fprintf(stderr, "shardq db export: --where: selects the rows of a table (");
        for (size_t i = 0; i < ntables; i++) fprintf(stderr, "%s%s", i ? ", " : "", tables[i].name);
        fprintf(stderr, "), not of QUERY '%s': write the condition into the statement\n", query);
        return CLI_USAGE;
    }
    sq_error err = {0};
    int rc = wide             ? sq_store_export_wide(s, ids, c, &err)
             : is_table(query) ? sq_store_export_table(s, query, ids, c, &err)
                               : sq_store_export_sql(s, query, c, &err);
    if (!rc) return -1;
    if (rc == SQ_ERR_SPEC) {
        fprintf(stderr, "shardq db export: QUERY '%s' %s\n", query, sq_error_message(&err));
        return CLI_USAGE;
    }
    return read_failed("db export", s, &err, NULL, 0);
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
    if (!is_table(query) || o.nwhere || o.wide) sq_store_limit_queries(s, o.timeout);
    char *ids;
    sq_store_cursor *c = NULL;
    rc = select_runs("db export", s, &o, &ids);
    if (rc < 0) rc = export_cursor(s, query, ids, o.wide, &c);
    free(ids);
    if (rc >= 0) {
        sq_store_close(s);
        return rc;
    }
    sq_wfile w;
    const int file = o.output && strcmp(o.output, "-") != 0;
    sq_error err = {0};
    if (file && sq_wfile_open(&w, o.output, &err)) {
        fprintf(stderr, "shardq db export: %s\n", sq_error_message(&err));
        sq_store_cursor_close(c);
        sq_store_close(s);
        return CLI_RUNTIME;
    }
    if (file ? sq_store_cursor_write_csv_to(c, put_wfile, &w, &err)
             : sq_store_cursor_write_csv(c, stdout, &err)) {
        char what[512];
        snprintf(what, sizeof what, "QUERY '%s'", query);
        rc = read_failed("db export", s, &err, what, o.timeout);
        if (file) sq_wfile_abort(&w);
    } else if (file && sq_wfile_commit(&w, &err)) {
        fprintf(stderr, "shardq db export: %s\n", sq_error_message(&err));
        rc = CLI_RUNTIME;
    } else {
        rc = file ? CLI_OK : finish_stdout("db export");
    }
    sq_store_cursor_close(c);
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
