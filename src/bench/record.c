/*
** record.c -- a benchmark run recorded in the store (bench.h): the run of
** kind 'bench' begins before anything is measured, so that a database that
** cannot be written fails at once, not after minutes of measuring; the
** figures of each size go in as that size ends, so that a run stopped
** half-way keeps what it measured; and the run ends done or failed.
*/
#include "shardq/bench.h"

#include "shardq/store.h"

#include <cjson/cJSON.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The run's configuration: what was asked for, so that two bench runs can
** be told apart (the runs table's config). */
static char *bench_config(const sq_backend *be, const char *where, const sq_bench_config *cfg)
{
    cJSON *o = cJSON_CreateObject(), *a;
    cJSON_AddStringToObject(o, "command", "bench");
    cJSON_AddStringToObject(o, "device", sq_backend_name(be));
    cJSON_AddStringToObject(o, "description", where);
    cJSON_AddItemToObject(o, "sizes_mb", a = cJSON_CreateArray());
    for (int i = 0; i < cfg->nsizes; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(cfg->sizes_mb[i]));
    cJSON_AddItemToObject(o, "threads", a = cJSON_CreateArray());
    for (int i = 0; i < cfg->nthreads; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(cfg->threads[i]));
    cJSON_AddItemToObject(o, "ops", a = cJSON_CreateArray());
    for (int i = 0; i < cfg->nops; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(sq_bench_op_at(cfg->ops[i])->name));
    if (cfg->codec)
        cJSON_AddStringToObject(o, "codec", cfg->codec);
    else
        cJSON_AddNullToObject(o, "codec");
    cJSON_AddNumberToObject(o, "min_time", cfg->min_time);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* The store keeps one row per (op, threads, size): a value listed twice
** would collide, so it is refused before the run begins, not at the first
** insert after minutes of measuring. */
static int check_unique(const sq_bench_config *cfg, sq_error *err)
{
    static const char why[] = "the store keeps one row per operation, thread count and size";
    if (cfg->nops < 0 || (size_t)cfg->nops > sq_bench_nops())
        return sq_error_set(err, SQ_ERR_ARG, "%d operations: the op table has %zu", cfg->nops,
                            sq_bench_nops());
    for (int i = 0; i < cfg->nops; i++) {
        if (cfg->ops[i] >= sq_bench_nops())
            return sq_error_set(err, SQ_ERR_ARG, "operation %zu is not in the op table",
                                cfg->ops[i]);
        for (int j = 0; j < i; j++)
            if (cfg->ops[i] == cfg->ops[j])
                return sq_error_set(err, SQ_ERR_ARG, "the operation '%s' is listed twice (%s)",
                                    sq_bench_op_at(cfg->ops[i])->name, why);
    }
    for (int i = 0; i < cfg->nsizes; i++)
        for (int j = 0; j < i; j++)
            if (cfg->sizes_mb[i] == cfg->sizes_mb[j])
                return sq_error_set(err, SQ_ERR_ARG, "the size %d MB is listed twice (%s)",
                                    cfg->sizes_mb[i], why);
    for (int i = 0; i < cfg->nthreads; i++)
        for (int j = 0; j < i; j++)
            if (cfg->threads[i] == cfg->threads[j])
                return sq_error_set(err, SQ_ERR_ARG, "the thread count %d is listed twice (%s)",
                                    cfg->threads[i], why);
    return SQ_OK;
}

typedef struct recorder {
    sq_store *s;
    int64_t run;
    sq_bench_progress progress;
    void *user;
    int store_rc; /* a failed insert: its kind (the sentence is the store's) */
} recorder;

/* The figures of one size at one thread count: the copy as op "copy",
** then every op measured, in one transaction. */
static int store_size(recorder *r, const sq_bench_event *ev)
{
    sq_bench_row *b = calloc((size_t)ev->nrows + 1, sizeof *b);
    if (!b) return SQ_ERR_NOMEM;
    size_t k = 0;
    b[k++] = (sq_bench_row){.op = "copy", .threads = ev->threads, .elements = ev->elements,
                            .bytes = (uint64_t)sq_bench_copy_bytes(ev->elements),
                            .gb_per_s = ev->copy_gbs, .gb_per_s_std = ev->copy_std,
                            .copy_gb_per_s = ev->copy_gbs};
    for (int oi = 0; oi < ev->nrows; oi++) {
        const sq_bench_result *x = &ev->rows[oi];
        if (!x->op) continue;
        b[k++] = (sq_bench_row){.op = x->op->name, .threads = ev->threads,
                                .elements = ev->elements, .bytes = (uint64_t)x->bytes,
                                .gb_per_s = x->gbs, .gb_per_s_std = x->gbs_std,
                                .copy_gb_per_s = x->copy_gbs};
    }
    int rc = sq_store_add_bench(r->s, r->run, b, k);
    free(b);
    return rc;
}

static int on_event(void *user, const sq_bench_event *ev)
{
    recorder *r = user;
    if (ev->kind == SQ_BENCH_SIZE && (r->store_rc = store_size(r, ev)) != SQ_OK) return 1;
    if (!r->progress) return 0;
    sq_bench_event e = *ev;
    e.run = r->run;
    return r->progress(r->user, &e);
}

int sq_bench_record(const char *db, int busy_ms, sq_backend *be, const sq_bench_config *cfg,
                    sq_bench_progress progress, void *user, int64_t *run, sq_error *err)
{
    if (run) *run = 0;
    if (!db || !be || !cfg) return sq_error_set(err, SQ_ERR_ARG, "no database, backend or config");
    int rc = check_unique(cfg, err);
    if (rc) return rc;
    char where[320];
    sq_bench_device_text(be, where, sizeof where);
    char *config = bench_config(be, where, cfg);
    if (!config) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    recorder r = {.progress = progress, .user = user};
    rc = sq_store_open(db, busy_ms, 0, &r.s, err);
    if (rc) {
        free(config);
        return rc;
    }
    sq_run_info info = {.kind = "bench", .config = config, .device = sq_backend_name(be)};
    rc = sq_store_run_begin(r.s, &info, NULL, 0, &r.run);
    free(config);
    if (rc != SQ_STORE_STARTED) {
        /* a run without a key is never found done */
        rc = rc < 0 ? sq_error_set(err, rc, "%s", sq_store_error(r.s))
                    : sq_error_set(err, SQ_ERR_CONFLICT, "%s: a bench run was found done before "
                                   "it began", db);
        sq_store_close(r.s);
        return rc;
    }
    if (run) *run = r.run;

    sq_error e = {0};
    rc = sq_bench_run(be, cfg, on_event, &r, NULL, NULL, &e);
    if (r.store_rc) {
        rc = r.store_rc;
        if (rc == SQ_ERR_NOMEM) sq_error_set(&e, rc, "out of memory");
        else sq_error_set(&e, rc, "%s", sq_store_error(r.s));
    }
    int end = sq_store_run_end(r.s, r.run, rc ? "failed" : "done",
                               rc ? sq_error_message(&e) : NULL, NULL, 0, NULL, 0);
    if (end && !rc) rc = sq_error_set(&e, end, "%s", sq_store_error(r.s));
    sq_store_close(r.s);
    if (rc && err) *err = e;
    return rc;
}
