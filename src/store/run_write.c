/*
** run_write.c -- the runs and one run written as `shardq db list` and
** `shardq db show` print them (store_rows.h): a table of the runs' summary
** rows or a JSON array of them, and a run in full, its row, params and
** sections (error statistics, tensor stats, bytes, timings, netbench), as
** text under titles or as one JSON object.
**
** The sections come from the named queries of the store (sq_store_query)
** and are written by cursor_write.c, so that what is shown is what the
** file holds.
*/
#include "shardq/store_rows.h"
#include "sq_json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int out_of_memory(sq_error *err) { return sq_error_set(err, SQ_ERR_NOMEM, "out of memory"); }

/* A cell of a text table; nonzero when out of memory. */
static int table_add(sq_text_table *t, const char *text) { return sq_text_table_add(t, text, NULL); }

/* ------------------------------------------------------------------------ */
/* The runs                                                                 */
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

int sq_store_runs_write_table(sq_store_cursor *c, FILE *f, int *rows, sq_error *err)
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
    if (!rc && *rows) sq_text_table_print(&t, f, "");
    sq_text_table_free(&t);
    return rc;
}

/* A string member of a JSON object ("key":value or null). */
static void json_text(FILE *f, const char *key, const char *v, int first)
{
    fprintf(f, "%s\"%s\":", first ? "" : ",", key);
    if (v)
        sq_json_str(f, v);
    else
        fputs("null", f);
}

static void json_number(FILE *f, const char *key, double v)
{
    fprintf(f, ",\"%s\":", key);
    sq_store_json_real(f, v);
}

int sq_store_runs_write_json(sq_store_cursor *c, FILE *f, sq_error *err)
{
    sq_run_summary r;
    int rc, n = 0;
    putc('[', f);
    while ((rc = sq_store_runs_next(c, &r, err)) == 1) {
        fprintf(f, "%s{\"id\":%lld", n++ ? "," : "", (long long)r.id);
        json_text(f, "status", r.status, 0);
        json_text(f, "kind", r.kind, 0);
        json_text(f, "key", r.key, 0);
        json_text(f, "sweep", r.sweep, 0);
        json_text(f, "preset", r.preset, 0);
        json_text(f, "scheme", r.scheme, 0);
        json_text(f, "topo", r.topo, 0);
        json_text(f, "device", r.device, 0);
        json_text(f, "trace", r.trace, 0);
        fprintf(f, ",\"seed\":%lld", (long long)r.seed);
        json_text(f, "started", r.started, 0);
        json_text(f, "ended", r.ended, 0);
        json_number(f, "seconds", r.seconds);
        json_number(f, "grad_rel_l2", r.grad_rel_l2);
        json_number(f, "weight_rel_l2", r.weight_rel_l2);
        json_text(f, "error", r.error, 0);
        putc('}', f);
    }
    putc(']', f);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* One run                                                                  */
/* ------------------------------------------------------------------------ */

/* The named query of one run (store_rows.h) into *c. */
static int open_run_query(sq_store *s, const char *name, int64_t id, sq_store_cursor **c,
                          sq_error *err)
{
    const sq_store_value run = {.type = SQ_STORE_INTEGER, .i = id};
    return sq_store_query(s, name, &run, 1, c, err);
}

/* The run's row: one "name value" line per column, or an object. */
static int show_run(sq_store *s, int64_t id, int json, FILE *f, sq_error *err)
{
    sq_store_cursor *c;
    int rc = open_run_query(s, "run", id, &c, err);
    if (rc) return rc;
    rc = sq_store_cursor_step(c, err);
    if (rc == 1 && json) {
        fprintf(f, "{\"run\":");
        sq_store_cursor_write_json_row(c, f);
    } else if (rc == 1) {
        fprintf(f, "run %lld in %s\n", (long long)id, sq_store_path(s));
        char buf[64];
        for (int i = 0; i < sq_store_cursor_columns(c); i++) {
            const char *name = sq_store_cursor_name(c, i);
            int type = sq_store_cursor_type(c, i);
            if (strcmp(name, "seconds") == 0) {
                if (type == SQ_STORE_NULL) continue;
                fprintf(f, "  %-9s %.3f s\n", "duration", sq_store_cursor_double(c, i));
            } else if (type == SQ_STORE_TEXT) {
                fprintf(f, "  %-9s %s\n", name, sq_store_cursor_text(c, i, NULL));
            } else {
                sq_store_cursor_cell(c, i, buf, sizeof buf);
                fprintf(f, "  %-9s %s\n", name, buf);
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
                        const char *key, int json, FILE *f, sq_error *err)
{
    sq_store_cursor *c;
    int rc = open_run_query(s, query, id, &c, err), rows = 0;
    if (rc) return rc;
    if (json) {
        fprintf(f, ",\"%s\":", key);
        rc = sq_store_cursor_write_json(c, f, err);
    } else {
        fprintf(f, "\n%s:\n", title);
        rc = sq_store_cursor_write_table(c, f, "  ", &rows, err);
        if (!rc && rows == 0) fprintf(f, "  (none)\n");
    }
    sq_store_cursor_close(c);
    return rc;
}

/* The params: a table of key and value, or one JSON object. */
static int show_params(sq_store *s, int64_t id, int json, FILE *f, sq_error *err)
{
    sq_store_param *p;
    size_t n;
    int rc = sq_store_run_params(s, id, &p, &n, err);
    if (rc) return rc;
    if (json) {
        fprintf(f, ",\"params\":{");
        for (size_t i = 0; i < n; i++) {
            if (i) putc(',', f);
            sq_json_str(f, p[i].key);
            putc(':', f);
            if (p[i].value)
                sq_json_str(f, p[i].value);
            else
                fputs("null", f);
        }
        putc('}', f);
    } else {
        fprintf(f, "\nparams:\n");
        sq_text_table t = {.ncols = 2, .numeric = {0, 1}};
        int bad = table_add(&t, "key") || table_add(&t, "value");
        for (size_t i = 0; i < n && !bad; i++) {
            if (p[i].value) t.numeric[1] = 0; /* a NULL alone stays a number */
            bad = table_add(&t, p[i].key) || table_add(&t, p[i].value ? p[i].value : "-");
        }
        if (bad)
            rc = out_of_memory(err);
        else if (n)
            sq_text_table_print(&t, f, "  ");
        else
            fprintf(f, "  (none)\n");
        sq_text_table_free(&t);
    }
    sq_store_params_free(p, n);
    return rc;
}

static int show_tensors(sq_store *s, int64_t id, int json, FILE *f, sq_error *err)
{
    sq_store_tensor_count t;
    int rc = sq_store_run_tensor_count(s, id, &t, err);
    if (rc) return rc;
    if (json)
        fprintf(f, ",\"tensor_stats\":{\"rows\":%lld,\"tensors\":%lld}", (long long)t.rows,
               (long long)t.tensors);
    else if (t.rows > 0)
        fprintf(f, "\ntensor stats: %lld rows over %lld tensors (db export tensor_stats)\n",
               (long long)t.rows, (long long)t.tensors);
    return SQ_OK;
}

/* The netbench section, only where the run has netbench rows: other runs
** show what they always showed. */
static int show_netbench(sq_store *s, int64_t id, int json, FILE *f, sq_error *err)
{
    sq_netbench_row *r;
    size_t n;
    int rc = sq_store_run_netbench(s, id, &r, &n, err);
    if (rc || !n) return rc;
    if (json) {
        fprintf(f, ",\"netbench\":[");
        for (size_t i = 0; i < n; i++) {
            fprintf(f, "%s{\"op\":", i ? "," : "");
            sq_json_str(f, r[i].op);
            fprintf(f, ",\"level\":");
            sq_json_str(f, r[i].level);
            fprintf(f, ",\"bytes\":%llu,\"count\":%llu,\"ranks\":%d,\"comms\":%d,\"iters\":%d,"
                   "\"seconds\":", (unsigned long long)r[i].bytes,
                   (unsigned long long)r[i].count, r[i].ranks, r[i].comms, r[i].iters);
            sq_store_json_real(f, r[i].seconds);
            fprintf(f, ",\"algbw_gb_s\":");
            sq_store_json_real(f, r[i].algbw_gb_s);
            fprintf(f, ",\"busbw_gb_s\":");
            sq_store_json_real(f, r[i].busbw_gb_s);
            putc('}', f);
        }
        putc(']', f);
    } else {
        rc = show_section(s, id, "run.netbench",
                          "netbench per level and collective (every size: db export "
                          "netbench_results)", "netbench", 0, f, err);
    }
    sq_store_netbench_free(r, n);
    return rc;
}
int sq_store_run_write(sq_store *s, int64_t id, int json, FILE *f, sq_error *err)
{
    int rc = show_run(s, id, json, f, err);
    if (!rc) rc = show_params(s, id, json, f, err);
    if (!rc)
        rc = show_section(s, id, "run.metrics", "error statistics per path (means over the steps)",
                          "metrics", json, f, err);
    if (!rc) rc = show_tensors(s, id, json, f, err);
    if (!rc)
        rc = show_section(s, id, "run.bytes",
                          "bytes per collective and link (bits_per_elem, bits_per_param: sent)",
                          "bytes", json, f, err);
    if (!rc) rc = show_section(s, id, "run.timings", "timings", "timings", json, f, err);
    if (!rc) rc = show_netbench(s, id, json, f, err);
    if (!rc && json) fprintf(f, "}\n");
    return rc;
}
