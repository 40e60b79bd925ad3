/*
** cmd_db.c -- `shardq db`: the runs of the store (store.h), read-only:
** `db list` one line per run, `db show RUN` one run in full, `db export`
** a table or a SELECT as CSV; and `db init`, which creates or migrates a
** store file.
**
** The store's readers (store_rows.h) give the rows: the runs of `db list`
** and a run's params and netbench rows as structs, the other sections of
** `db show` and every export through cursors whose column names are the
** queries', so that what is shown is what the file holds. This file only
** parses, calls and prints.
*/
#include "cli.h"
#include "shardq/store_rows.h"
#include "sq_protect.h"
#include "trace/wfile.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define db_usage cli_help("shardq-db")

/* the --where rule (src/cli/where.h), the same in report, list and export */


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
    return rc == SQ_ERR_SPEC ? CLI_USAGE : CLI_RUNTIME;
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

static int out_of_memory(sq_error *err) { return sq_error_set(err, SQ_ERR_NOMEM, "out of memory"); }

/* A cell of a text table (store_rows.h); nonzero when out of memory. */
static int table_add(sq_text_table *t, const char *text) { return sq_text_table_add(t, text, NULL); }

/* ------------------------------------------------------------------------ */
/* db list                                                                  */
/* ------------------------------------------------------------------------ */

/* A text or real cell of the list: '-' where the run has none, a text
** making its column align left. */
static int add_text(sq_text_table *t, int col, const char *v)
{
    if (v) t->numeric[col] = 0;
    return table_add(t, v ? v : "-");
}

static int add_real(sq_text_table *t, double v)
{
    char buf[64];
    if (isnan(v)) return table_add(t, "-");
    snprintf(buf, sizeof buf, "%.4g", v);
    return table_add(t, buf);
}

static int add_run(sq_text_table *t, const sq_run_summary *r)
{
    char id[24], seed[24];
    snprintf(id, sizeof id, "%lld", (long long)r->id);
    snprintf(seed, sizeof seed, "%lld", (long long)r->seed);
    return table_add(t, id) || add_text(t, 1, r->status) || add_text(t, 2, r->kind) ||
           add_text(t, 3, r->preset) || add_text(t, 4, r->topo) || table_add(t, seed) ||
           add_text(t, 6, r->trace_name) || add_text(t, 7, r->started_text) ||
           add_text(t, 8, r->duration) || add_real(t, r->grad_rel_l2) ||
           add_real(t, r->weight_rel_l2);
}

/* The runs as a table, one line each; *rows gets their count. */
static int list_table(sq_store_cursor *c, int *rows, sq_error *err)
{
    static const char *const head[] = {"id",      "status",  "kind",     "preset",
                                       "topo",    "seed",    "trace",    "started",
                                       "duration", "grad_rel_l2", "weight_rel_l2"};
    sq_text_table t = {.ncols = 11};
    int rc = SQ_OK;
    for (int i = 0; i < t.ncols && !rc; i++) {
        t.numeric[i] = 1;
        if (table_add(&t, head[i])) rc = out_of_memory(err);
    }
    sq_run_summary r;
    *rows = 0;
    while (!rc && (rc = sq_store_runs_next(c, &r, err)) == 1) {
        rc = add_run(&t, &r) ? out_of_memory(err) : SQ_OK;
        (*rows)++;
    }
    if (!rc && *rows) sq_text_table_print(&t, stdout, "");
    sq_text_table_free(&t);
    return rc;
}

/* A string member of a JSON object ("key":value or null). */
static void json_text(const char *key, const char *v, int first)
{
    printf("%s\"%s\":", first ? "" : ",", key);
    if (v)
        cli_json_str(v);
    else
        fputs("null", stdout);
}

static void json_number(const char *key, double v)
{
    printf(",\"%s\":", key);
    sq_store_json_real(stdout, v);
}

/* The runs as a JSON array of objects. */
static int list_json(sq_store_cursor *c, sq_error *err)
{
    sq_run_summary r;
    int rc, n = 0;
    putchar('[');
    while ((rc = sq_store_runs_next(c, &r, err)) == 1) {
        printf("%s{\"id\":%lld", n++ ? "," : "", (long long)r.id);
        json_text("status", r.status, 0);
        json_text("kind", r.kind, 0);
        json_text("key", r.key, 0);
        json_text("sweep", r.sweep, 0);
        json_text("preset", r.preset, 0);
        json_text("scheme", r.scheme, 0);
        json_text("topo", r.topo, 0);
        json_text("device", r.device, 0);
        json_text("trace", r.trace, 0);
        printf(",\"seed\":%lld", (long long)r.seed);
        json_text("started", r.started, 0);
        json_text("ended", r.ended, 0);
        json_number("seconds", r.seconds);
        json_number("grad_rel_l2", r.grad_rel_l2);
        json_number("weight_rel_l2", r.weight_rel_l2);
        json_text("error", r.error, 0);
        putchar('}');
    }
    putchar(']');
    return rc;
}

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
        rc = list_json(c, &err);
        putchar('\n');
    } else {
        rc = list_table(c, &rows, &err);
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

/* The named query of one run (store_rows.h) into *c. */
static int open_run_query(sq_store *s, const char *name, int64_t id, sq_store_cursor **c,
                          sq_error *err)
{
    const sq_store_value run = {.type = SQ_STORE_INTEGER, .i = id};
    return sq_store_query(s, name, &run, 1, c, err);
}

/* The run's row: one "name value" line per column, or an object. */
static int show_run(sq_store *s, int64_t id, int json, sq_error *err)
{
    sq_store_cursor *c;
    int rc = open_run_query(s, "run", id, &c, err);
    if (rc) return rc;
    rc = sq_store_cursor_step(c, err);
    if (rc == 1 && json) {
        printf("{\"run\":");
        sq_store_cursor_write_json_row(c, stdout);
    } else if (rc == 1) {
        printf("run %lld in %s\n", (long long)id, sq_store_path(s));
        char buf[64];
        for (int i = 0; i < sq_store_cursor_columns(c); i++) {
            const char *name = sq_store_cursor_name(c, i);
            int type = sq_store_cursor_type(c, i);
            if (strcmp(name, "seconds") == 0) {
                if (type == SQ_STORE_NULL) continue;
                printf("  %-9s %.3f s\n", "duration", sq_store_cursor_double(c, i));
            } else if (type == SQ_STORE_TEXT) {
                printf("  %-9s %s\n", name, sq_store_cursor_text(c, i, NULL));
            } else {
                sq_store_cursor_cell(c, i, buf, sizeof buf);
                printf("  %-9s %s\n", name, buf);
            }
        }
    } else if (rc == 0) {
        rc = sq_error_set(err, SQ_ERR_NOTFOUND, "%s: no run %lld", sq_store_path(s),
                          (long long)id);
    }
    sq_store_cursor_close(c);
    return rc == 1 ? SQ_OK : rc;
}

/* One section of `db show`: the rows of the named query as a table under
** a title, or as the JSON array "key". */
static int show_section(sq_store *s, int64_t id, const char *query, const char *title,
                        const char *key, int json, sq_error *err)
{
    sq_store_cursor *c;
    int rc = open_run_query(s, query, id, &c, err), rows = 0;
    if (rc) return rc;
    if (json) {
        printf(",\"%s\":", key);
        rc = sq_store_cursor_write_json(c, stdout, err);
    } else {
        printf("\n%s:\n", title);
        rc = sq_store_cursor_write_table(c, stdout, "  ", &rows, err);
        if (!rc && rows == 0) printf("  (none)\n");
    }
    sq_store_cursor_close(c);
    return rc;
}

/* The params: a table of key and value, or one JSON object. */
static int show_params(sq_store *s, int64_t id, int json, sq_error *err)
{
    sq_store_param *p;
    size_t n;
    int rc = sq_store_run_params(s, id, &p, &n, err);
    if (rc) return rc;
    if (json) {
        printf(",\"params\":{");
        for (size_t i = 0; i < n; i++) {
            if (i) putchar(',');
            cli_json_str(p[i].key);
            putchar(':');
            if (p[i].value)
                cli_json_str(p[i].value);
            else
                fputs("null", stdout);
        }
        putchar('}');
    } else {
        printf("\nparams:\n");
        sq_text_table t = {.ncols = 2, .numeric = {0, 1}};
        int bad = table_add(&t, "key") || table_add(&t, "value");
        for (size_t i = 0; i < n && !bad; i++) {
            if (p[i].value) t.numeric[1] = 0; /* a NULL alone stays a number */
            bad = table_add(&t, p[i].key) || table_add(&t, p[i].value ? p[i].value : "-");
        }
        if (bad)
            rc = out_of_memory(err);
        else if (n)
            sq_text_table_print(&t, stdout, "  ");
        else
            printf("  (none)\n");
        sq_text_table_free(&t);
    }
    sq_store_params_free(p, n);
    return rc;
}

static int show_tensors(sq_store *s, int64_t id, int json, sq_error *err)
{
    sq_store_tensor_count t;
    int rc = sq_store_run_tensor_count(s, id, &t, err);
    if (rc) return rc;
    if (json)
        printf(",\"tensor_stats\":{\"rows\":%lld,\"tensors\":%lld}", (long long)t.rows,
               (long long)t.tensors);
    else if (t.rows > 0)
        printf("\ntensor stats: %lld rows over %lld tensors (db export tensor_stats)\n",
               (long long)t.rows, (long long)t.tensors);
    return SQ_OK;
}

/* The netbench section, only where the run has netbench rows: other runs
** show what they always showed. */
static int show_netbench(sq_store *s, int64_t id, int json, sq_error *err)
{
    sq_netbench_row *r;
    size_t n;
    int rc = sq_store_run_netbench(s, id, &r, &n, err);
    if (rc || !n) return rc;
    if (json) {
        printf(",\"netbench\":[");
        for (size_t i = 0; i < n; i++) {
            printf("%s{\"op\":", i ? "," : "");
            cli_json_str(r[i].op);
            printf(",\"level\":");
            cli_json_str(r[i].level);
            printf(",\"bytes\":%llu,\"count\":%llu,\"ranks\":%d,\"comms\":%d,\"iters\":%d,"
                   "\"seconds\":", (unsigned long long)r[i].bytes,
                   (unsigned long long)r[i].count, r[i].ranks, r[i].comms, r[i].iters);
            sq_store_json_real(stdout, r[i].seconds);
            printf(",\"algbw_gb_s\":");
            sq_store_json_real(stdout, r[i].algbw_gb_s);
            printf(",\"busbw_gb_s\":");
            sq_store_json_real(stdout, r[i].busbw_gb_s);
            putchar('}');
        }
        putchar(']');
    } else {
        rc = show_section(s, id, "run.netbench",
                          "netbench per level and collective (every size: db export "
                          "netbench_results)", "netbench", 0, err);
    }
    sq_store_netbench_free(r, n);
    return rc;
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
    if (!rc) rc = show_run(s, run, o.json, &err);
    if (!rc) rc = show_params(s, run, o.json, &err);
    if (!rc)
        rc = show_section(s, run, "run.metrics", "error statistics per path (means over the steps)",
                          "metrics", o.json, &err);
    if (!rc) rc = show_tensors(s, run, o.json, &err);
    if (!rc)
        rc = show_section(s, run, "run.bytes",
                          "bytes per collective and link (bits_per_elem, bits_per_param: sent)",
                          "bytes", o.json, &err);
    if (!rc) rc = show_section(s, run, "run.timings", "timings", "timings", o.json, &err);
    if (!rc) rc = show_netbench(s, run, o.json, &err);
    if (!rc && o.json) printf("}\n");
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
