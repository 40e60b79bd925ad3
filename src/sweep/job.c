/*
** job.c -- one configuration of a sweep (or one `shardq replay` or `shardq
** train`) run into the store: the run begun under its key, the replay or
** the training with its rows stored as they come, the run ended 'done' or
** 'failed' (sweep.h).
*/
#include "shardq/plugin.h"
#include "shardq/sweep.h"
#include "shardq/trace.h"

#include <cjson/cJSON.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Beginning a run                                                          */
/* ------------------------------------------------------------------------ */

/* The param "plugins" of a scheme whose quantized wires name plug-in
** codecs: "NAME=FILE" for each (its file's real path), so that a stored
** run says which shared object to load to run it again; "" when none. */
static void plugin_param(const sq_scheme *scheme, char *buf, size_t len)
{
    const sq_wire *wires[] = {&scheme->weight, &scheme->grad_intra, &scheme->grad_inter};
    size_t used = 0;
    int seen[3] = {0, 0, 0};
    buf[0] = '\0';
    for (int i = 0; i < 3; i++) {
        const sq_codec *c = &wires[i]->codec;
        seen[i] = !sq_wire_raw(wires[i]) && c->kind == SQ_KIND_PLUGIN ? c->plugin : 0;
        const sq_plugin_codec *d = seen[i] ? sq_plugin_get(seen[i]) : NULL;
        if (!d || (i > 0 && seen[i] == seen[0]) || (i > 1 && seen[i] == seen[1])) continue;
        const char *src = sq_plugin_source(seen[i]);
        int n = snprintf(buf + used, used < len ? len - used : 0, "%s%s=%s", used ? ", " : "",
                         d->name, src ? src : "(registered by the program)");
        used = used + (size_t)n < len ? used + (size_t)n : len;
    }
}

int sq_sweep_run_begin(const char *db, int busy_ms, const sq_run_info *info,
                       const sq_scheme *scheme, const sq_store_kv *extra, size_t nextra,
                       sq_store **store, int64_t *run, int *status, sq_error *err)
{
    *run = 0;
    *status = SQ_SWEEP_RAN;
    int rc = sq_store_open(db, busy_ms, 0, store, err);
    if (rc) return rc;
    size_t nknobs = scheme ? sq_scheme_nknobs : 0, np = nextra + nknobs;
    char plugins[3 * 4096 + 64] = "";
    if (scheme) plugin_param(scheme, plugins, sizeof plugins);
    if (plugins[0]) np++;
    sq_store_kv *all = calloc(np ? np : 1, sizeof *all);
    char(*vals)[64] = calloc(nknobs ? nknobs : 1, sizeof *vals);
    if (!all || !vals) {
        free(all), free(vals);
        rc = sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (nextra) memcpy(all, extra, nextra * sizeof *all);
    np = nextra;
    for (size_t k = 0; k < nknobs; k++) {
        const char *key = sq_scheme_knobs[k].key;
        sq_scheme_get(scheme, key, vals[k], sizeof vals[k]);
        /* a wire's keep (0 unless topk or randk) and PowerSGD's knobs under
        ** another mode are left out, as the scheme's canonical text leaves
        ** them out (error feedback's knobs stay: a grid over them reads
        ** the 0s) */
        size_t kl = strlen(key);
        if (kl > 5 && !strcmp(key + kl - 5, ".keep") && !strcmp(vals[k], "0")) continue;
        if (!strncmp(key, "grad.powersgd.", 14) && scheme->grad_mode != SQ_GRAD_POWERSGD)
            continue;
        all[np].key = key;
        all[np++].value = vals[k];
    }
    if (plugins[0]) all[np++] = (sq_store_kv){"plugins", plugins};
    rc = sq_store_run_begin(*store, info, all, np, run);
    free(all), free(vals);
    if (rc == SQ_STORE_STARTED) return SQ_OK;
    if (rc == SQ_STORE_DONE) {
        *status = SQ_SWEEP_ALREADY_DONE;
        sq_store_close(*store);
        *store = NULL;
        return SQ_OK;
    }
    if (rc == SQ_ERR_BUSY && *run > 0) *status = SQ_SWEEP_HELD;
    sq_error_set(err, rc, "%s", sq_store_error(*store));
fail:
    sq_store_close(*store);
    *store = NULL;
    if (*status != SQ_SWEEP_HELD) *run = 0;
    return rc;
}

/* Begins job's run: its params are extra, then every knob of its scheme,
** so that a report can group runs by any of them. SQ_OK with *store NULL
** when the key is done. */
static int run_begin(const sq_sweep_job *job, const sq_run_info *info, const sq_store_kv *extra,
                     size_t nextra, sq_store **store, sq_sweep_outcome *out, sq_error *err)
{
    int rc = sq_sweep_run_begin(job->db, job->busy_ms, info, &job->cfg->scheme, extra, nextra,
                                store, &out->run, &out->status, err);
    if (!rc && *store && sq_store_notice(*store))
        snprintf(out->notice, sizeof out->notice, "%s", sq_store_notice(*store));
    return rc;
}

/* Ends the run: on failure with the error's sentence; a failure to say so
** goes to out->end_error. */
static int run_end(sq_store *store, sq_sweep_outcome *out, int failed, const sq_error *why,
                   const sq_bytes_row *bytes, size_t nbytes, const sq_timing_row *t, size_t nt,
                   sq_error *err)
{
    if (!store) return SQ_OK;
    int rc = sq_store_run_end(store, out->run, failed ? "failed" : "done",
                              failed ? sq_error_message(why) : NULL, bytes, nbytes, t, nt);
    if (!rc) return SQ_OK;
    if (failed) {
        snprintf(out->end_error, sizeof out->end_error, "%s", sq_store_error(store));
        return rc;
    }
    return sq_error_set(err, rc, "%s", sq_store_error(store));
}

/* ------------------------------------------------------------------------ */
/* Replay                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct replay_ctx {
    const sq_sweep_job *job;
    sq_store *store;
    int64_t run;
} replay_ctx;

static int replay_rows(void *ctx, const sq_stat_row *rows, size_t n, sq_error *err)
{
    replay_ctx *c = ctx;
    if (!c->store) return SQ_OK;
    int rc = sq_store_add_stats(c->store, c->run, rows, n);
    return rc ? sq_error_set(err, rc, "%s", sq_store_error(c->store)) : SQ_OK;
}

static void replay_progress(void *ctx, size_t done, size_t total)
{
    replay_ctx *c = ctx;
    if (c->job->hooks.progress) c->job->hooks.progress(c->job->hooks.ctx, done, total);
}

/* The configuration as a JSON object (the runs table's config column). */
static char *replay_json(const sq_sweep_config *x, const char *scheme, const char *topo)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "command", "replay");
    cJSON_AddStringToObject(o, "trace", x->trace);
    cJSON_AddStringToObject(o, "preset", x->preset);
    cJSON_AddStringToObject(o, "scheme", scheme);
    cJSON_AddStringToObject(o, "workers", topo);
    cJSON_AddNumberToObject(o, "seed", (double)x->seed);
    cJSON_AddStringToObject(o, "device", x->device);
    cJSON_AddStringToObject(o, "paths", sq_sweep_paths_name(x->paths));
    cJSON_AddNumberToObject(o, "steps", (double)x->steps);
    if (x->reuse_workers) cJSON_AddBoolToObject(o, "reuse_workers", 1);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* The collectives' wall time (sq_world_times over a run's worlds) as
** timing rows "collective.NAME" and "collective.NAME.LINK" (the part in the
** transport on that link), after the n rows already in rows[]: the times a
** run on real ranks measured, or the in-process emulation's. */
#define COLL_ROWS (SQ_NCOLL * (1 + SQ_NLINK))
static size_t add_coll_rows(sq_timing_row *rows, size_t n, const sq_coll_time coll[SQ_NCOLL])
{
    static const char *const names[SQ_NCOLL][1 + SQ_NLINK] = {
        {"collective.weight_allgather", "collective.weight_allgather.intra",
         "collective.weight_allgather.inter"},
        {"collective.grad_reducescatter", "collective.grad_reducescatter.intra",
         "collective.grad_reducescatter.inter"}};
    for (int c = 0; c < SQ_NCOLL; c++) {
        rows[n++] = (sq_timing_row){.op = names[c][0], .calls = coll[c].calls,
                                    .seconds = coll[c].seconds};
        for (int l = 0; l < SQ_NLINK; l++)
            rows[n++] = (sq_timing_row){.op = names[c][1 + l], .calls = coll[c].calls,
                                        .seconds = coll[c].link_seconds[l]};
    }
    return n;
}

static int run_replay(const sq_sweep_job *job, sq_sweep_outcome *out, sq_error *err)
{
    const sq_sweep_config *x = job->cfg;
    sq_trace t;
    int rc = sq_trace_open(x->trace, &t, err);
    if (rc) return rc;
    sq_replay_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.scheme = x->scheme;
    cfg.topo = x->has_topo ? x->topo : sq_replay_default_topo(&t);
    cfg.seed = x->seed;
    cfg.device = x->device;
    cfg.paths = x->paths;
    cfg.max_steps = (size_t)x->steps;
    cfg.tensor_rows = job->tensor_rows;
    cfg.reuse_workers = x->reuse_workers;
    cfg.transport = job->transport;
    snprintf(out->topo, sizeof out->topo, "%dx%d", cfg.topo.nodes, cfg.topo.per_node);
    sq_scheme_format(&cfg.scheme, out->scheme, sizeof out->scheme);
    const size_t nsteps = x->steps && x->steps < t.nsteps ? (size_t)x->steps : t.nsteps;
    char *config = replay_json(x, out->scheme, out->topo);
    sq_store *store = NULL;
    if (!config) {
        rc = sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (job->db) {
        sq_run_info info = {.kind = "replay", .key = job->key, .sweep = job->sweep,
                            .config = config, .preset = x->preset, .scheme = out->scheme,
                            .topo = out->topo, .device = x->device, .trace = x->trace,
                            .seed = x->seed, .grid = x->grid, .recipe = job->recipe};
        char tw[16], ts[32];
        snprintf(tw, sizeof tw, "%d", t.workers);
        snprintf(ts, sizeof ts, "%zu", nsteps);
        sq_store_kv params[] = {{"trace.workers", tw}, {"trace.steps", ts},
                                {"paths", sq_sweep_paths_name(x->paths)}};
        rc = run_begin(job, &info, params, 3, &store, out, err);
        if (rc || !store) goto done;
    }
    replay_ctx rctx = {.job = job, .store = store, .run = out->run};
    size_t units = 0;
    for (size_t p = 0; p < t.nparams; p++) units += t.params[p].n ? nsteps : 0;
    if (job->hooks.start) job->hooks.start(job->hooks.ctx, units);
    sq_replay_sink sink = {.ctx = &rctx, .rows = replay_rows, .progress = replay_progress};
    memset(&out->replay, 0, sizeof out->replay);
    rc = sq_replay_run(&cfg, &t, &sink, &out->replay, err);
    if (rc) {
        run_end(store, out, 1, err, NULL, 0, out->replay.timings, SQ_REPLAY_NTIMINGS, err);
        goto done;
    }
    sq_timing_row rows[SQ_REPLAY_NTIMINGS + COLL_ROWS];
    memcpy(rows, out->replay.timings, sizeof out->replay.timings);
    size_t nrows = add_coll_rows(rows, SQ_REPLAY_NTIMINGS, out->replay.coll);
    rc = run_end(store, out, 0, NULL, out->replay.bytes, SQ_NCOLL * SQ_NLINK, rows, nrows, err);
done:
    sq_store_close(store);
    sq_trace_close(&t);
    free(config);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Training                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct train_ctx {
    const sq_sweep_job *job;
    sq_store *store;
    int64_t run;
    sq_train_row rows[32]; /* rows not yet stored */
    size_t nrows;
} train_ctx;

static int flush_rows(train_ctx *c, sq_error *err)
{
    if (!c->store || !c->nrows) return SQ_OK;
    int rc = sq_store_add_train(c->store, c->run, c->rows, c->nrows);
    if (rc) sq_error_set(err, rc, "%s", sq_store_error(c->store));
    c->nrows = 0;
    return rc;
}

static int train_step(void *ctx, const sq_train_row *row, sq_error *err)
{
    train_ctx *c = ctx;
    if (c->store) {
        c->rows[c->nrows++] = *row;
        /* rows go in batches, and at every evaluation */
        int rc = 0;
        if ((c->nrows == sizeof c->rows / sizeof c->rows[0] || !isnan(row->val_loss)) &&
            (rc = flush_rows(c, err)))
            return rc;
    }
    if (c->job->hooks.train_step) c->job->hooks.train_step(c->job->hooks.ctx, row);
    return 0;
}

static void train_progress(void *ctx, uint32_t done, uint32_t total, double loss)
{
    train_ctx *c = ctx;
    (void)loss;
    if (c->job->hooks.progress) c->job->hooks.progress(c->job->hooks.ctx, done, total);
}

/* A float option as the decimal it was given as (0.001, not 0.0010000000474974513). */
static double decimal(float x)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%.7g", (double)x);
    return strtod(buf, NULL);
}

/* The configuration as JSON: the runs table's config, and the trace's model. */
static char *train_json(const sq_train_config *c, const char *corpus, const char *preset,
                        const char *scheme, const char *topo, const char *device, int model_only)
{
    cJSON *o = cJSON_CreateObject();
    if (!model_only) cJSON_AddStringToObject(o, "command", "train");
    cJSON_AddStringToObject(o, "kind", "gpt");
    cJSON_AddNumberToObject(o, "layers", c->model.layers);
    cJSON_AddNumberToObject(o, "channels", c->model.channels);
    cJSON_AddNumberToObject(o, "heads", c->model.heads);
    cJSON_AddNumberToObject(o, "context", c->model.context);
    cJSON_AddNumberToObject(o, "vocab", SQ_GPT_VOCAB);
    cJSON_AddStringToObject(o, "corpus", corpus);
    cJSON_AddNumberToObject(o, "batch", c->batch);
    cJSON_AddNumberToObject(o, "seq", c->seq);
    cJSON_AddNumberToObject(o, "steps", c->steps);
    cJSON_AddNumberToObject(o, "lr", decimal(c->lr.lr));
    cJSON_AddNumberToObject(o, "min_lr", decimal(c->lr.min_lr));
    cJSON_AddNumberToObject(o, "warmup", c->lr.warmup);
    cJSON_AddNumberToObject(o, "beta1", decimal(c->adamw.beta1));
    cJSON_AddNumberToObject(o, "beta2", decimal(c->adamw.beta2));
    cJSON_AddNumberToObject(o, "eps", decimal(c->adamw.eps));
    cJSON_AddNumberToObject(o, "weight_decay", decimal(c->adamw.weight_decay));
    cJSON_AddNumberToObject(o, "clip", decimal(c->clip));
    cJSON_AddStringToObject(o, "preset", preset);
    cJSON_AddStringToObject(o, "scheme", scheme);
    cJSON_AddStringToObject(o, "workers", topo);
    /* a 64-bit seed as text: JSON numbers are doubles */
    char seed[24];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)c->seed);
    cJSON_AddStringToObject(o, "seed", seed);
    if (!model_only) {
        cJSON_AddStringToObject(o, "device", device);
        cJSON_AddNumberToObject(o, "eval_every", c->eval_every);
        cJSON_AddNumberToObject(o, "eval_seqs", c->eval_seqs);
        if (c->capture) {
            cJSON_AddStringToObject(o, "capture", c->capture);
            cJSON_AddNumberToObject(o, "capture_every", c->capture_every);
            /* named only when it differs from capture_every: the keys of
            ** the captures written before it existed stay what they were */
            if (c->capture_weights_every && c->capture_weights_every != c->capture_every)
                cJSON_AddNumberToObject(o, "capture_weights_every", c->capture_weights_every);
        }
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* A run of this key is done and the job asks for a trace: it must be in
** dir, complete and of this key, or the caller would get no trace while
** told the run is done. */
static int check_captured(const char *dir, const char *key, sq_error *err)
{
    sq_trace t;
    char buf[1024], id[SQ_TRACE_ID_MAX];
    sq_trace_id_of(key, id);
    sq_error te = {0};
    int rc = sq_trace_open(dir, &t, &te);
    if (rc) snprintf(buf, sizeof buf, "%s", sq_error_message(&te));
    else {
        if (strcmp(t.id, id) != 0) {
            snprintf(buf, sizeof buf, "%s/manifest.json: field 'id': '%s' is not the id of "
                     "this key's trace", dir, t.id);
            rc = SQ_ERR_CONFLICT;
        }
        sq_trace_close(&t);
    }
    if (!rc) return SQ_OK;
    return sq_error_set(err, rc, "the run of this key is done, but its trace is not there: %s",
                        buf);
}

static int run_train(const sq_sweep_job *job, sq_sweep_outcome *out, sq_error *err)
{
    const sq_sweep_config *x = job->cfg;
    sq_train_config c = x->train;
    int rc;
    if (x->has_topo) c.topo = x->topo;
    else if ((rc = sq_topo_parse("2x4", &c.topo, err)))
        return rc;
    c.scheme = x->scheme;
    c.seed = x->seed;
    c.device = x->device;
    c.transport = job->transport;
    if (job->capture) c.capture = job->capture;
    if (job->capture_every) c.capture_every = job->capture_every;
    if ((rc = sq_train_validate(&c, NULL, &out->field, err))) return rc;
    const char *corpus_path = x->corpus;
    if (!corpus_path) {
        const char *env = getenv("SHARDQ_CORPUS");
        corpus_path = env && *env ? env : SQ_CORPUS_DEFAULT;
        if (access(corpus_path, F_OK) != 0)
            return sq_error_set(err, SQ_ERR_NOTFOUND, "the default corpus %s is missing: install "
                                "the Debian package fortunes (./bootstrap --deps does), or name "
                                "a text file or directory as the corpus", corpus_path);
    }
    snprintf(out->corpus, sizeof out->corpus, "%s", corpus_path);
    sq_corpus corpus;
    if ((rc = sq_corpus_load(corpus_path, &corpus, err))) {
        out->field = SQ_TRAIN_FIELD_CORPUS;
        return rc;
    }
    snprintf(out->topo, sizeof out->topo, "%dx%d", c.topo.nodes, c.topo.per_node);
    sq_scheme_format(&c.scheme, out->scheme, sizeof out->scheme);
    char *config = train_json(&c, corpus_path, x->preset, out->scheme, out->topo, x->device, 0);
    char *model = train_json(&c, corpus_path, x->preset, out->scheme, out->topo, x->device, 1);
    c.capture_model = model;
    /* the trace belongs to the run's key: a rerun of the key resumes it */
    c.capture_owner = job->key;
    sq_store *store = NULL;
    if (!config || !model) {
        rc = sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = sq_train_validate(&c, &corpus, &out->field, err))) goto done;
    if (job->db) {
        sq_run_info info = {.kind = "train", .key = job->key, .sweep = job->sweep,
                            .config = config, .preset = x->preset, .scheme = out->scheme,
                            .topo = out->topo, .device = x->device, .trace = c.capture,
                            .seed = c.seed, .grid = x->grid, .recipe = job->recipe};
        char v[8][32];
        snprintf(v[0], sizeof v[0], "%d", c.model.layers);
        snprintf(v[1], sizeof v[1], "%d", c.model.channels);
        snprintf(v[2], sizeof v[2], "%d", c.model.heads);
        snprintf(v[3], sizeof v[3], "%d", c.seq);
        snprintf(v[4], sizeof v[4], "%d", c.batch);
        snprintf(v[5], sizeof v[5], "%u", c.steps);
        snprintf(v[6], sizeof v[6], "%.9g", (double)c.lr.lr);
        snprintf(v[7], sizeof v[7], "%llu", (unsigned long long)sq_gpt_elements(&c.model));
        sq_store_kv params[] = {{"model.layers", v[0]}, {"model.channels", v[1]},
                                {"model.heads", v[2]},  {"train.seq", v[3]},
                                {"train.batch", v[4]},  {"train.steps", v[5]},
                                {"train.lr", v[6]},     {"model.params", v[7]},
                                {"corpus", corpus_path}};
        rc = run_begin(job, &info, params, sizeof params / sizeof params[0], &store, out, err);
        if (!rc && !store && c.capture) rc = check_captured(c.capture, job->key, err);
        if (rc || !store) goto done;
    }
    train_ctx tctx = {.job = job, .store = store, .run = out->run};
    if (job->hooks.start) job->hooks.start(job->hooks.ctx, c.steps);
    sq_train_sink sink = {.ctx = &tctx, .step = train_step, .progress = train_progress};
    /* the bound beside which the GFLOP/s are read, measured before training
    ** so that both run on the same machine in the same state */
    out->sgemm = job->sgemm ? sq_train_sgemm_gflops(&c.model, c.batch * c.seq, 0.3) : NAN;
    memset(&out->train, 0, sizeof out->train);
    rc = sq_train_run(&c, &corpus, &sink, &out->train, err);
    if (!rc) rc = flush_rows(&tctx, err);
    sq_timing_row timings[SQ_TT_N + COLL_ROWS];
    for (int k = 0; k < SQ_TT_N; k++)
        timings[k] = (sq_timing_row){.op = sq_train_time_names[k], .calls = out->train.steps,
                                     .seconds = out->train.time[k]};
    size_t ntimings = add_coll_rows(timings, SQ_TT_N, out->train.coll);
    if (rc) {
        flush_rows(&tctx, NULL);
        run_end(store, out, 1, err, NULL, 0, timings, SQ_TT_N, err);
        goto done;
    }
    rc = run_end(store, out, 0, NULL, out->train.bytes, SQ_NCOLL * SQ_NLINK, timings, ntimings,
                 err);
done:
    sq_store_close(store);
    sq_corpus_free(&corpus);
    free(config);
    free(model);
    return rc;
}

int sq_sweep_job_run(const sq_sweep_job *job, sq_sweep_outcome *out, sq_error *e)
{
    sq_error mine = {0};
    sq_error *err = e ? e : &mine;
    memset(out, 0, sizeof *out);
    out->sgemm = NAN;
    if (!job || !job->cfg) return sq_error_set(err, SQ_ERR_ARG, "no job");
    const sq_sweep_config *x = job->cfg;
    if (!x->preset || !x->device)
        return sq_error_set(err, SQ_ERR_ARG, "a configuration needs a preset and a device");
    if (x->command == SQ_SWEEP_REPLAY) {
        if (!x->trace) return sq_error_set(err, SQ_ERR_ARG, "a replay needs a trace");
        return run_replay(job, out, err);
    }
    if (x->command == SQ_SWEEP_TRAIN) return run_train(job, out, err);
    return sq_error_set(err, SQ_ERR_ARG, "unknown command %d", x->command);
}
