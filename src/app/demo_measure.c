/*
** demo_measure.c -- phases 4 and 5 of `shardq demo` (demo_internal.h): the
** codec kernels measured beside the copy bandwidth (sq_bench_record), and
** the speedup at cluster scale predicted (sq_cost_record). Their runs carry
** no key: a run of the demo's own options is found and reused, a bench run
** only when none of its figures stayed noisy.
*/
#define _DEFAULT_SOURCE /* PATH_MAX */
#include "app/demo_internal.h"
#include "shardq/store.h"
#include "store/summary_queries.h"

#include <stdio.h>
#include <stdlib.h>

/* The schemes the cost model compares with the baseline: the paper's
** weight and gradient halves and their steps, SDP4Bit itself and ZeRO++. */
static const char *const model_schemes[] = {"qw", "qwd", "ulq", "tlq", "tlqhs", "sdp4bit",
                                            "zeropp"};
#define NSCHEMES (sizeof model_schemes / sizeof *model_schemes)

static const char *const bench_ops[] = {"quantize", "quantize-nh", "dequantize", "quantize-8",
                                        "sum-requant"};
static const char bench_ops_json[] =
    "[\"quantize\",\"quantize-nh\",\"dequantize\",\"quantize-8\",\"sum-requant\"]";

/* The newest done bench run of the demo's own options (bench runs carry
** no key); steady: one none of whose figures stayed noisy. */
static int find_bench(const sq_app_demo *d, int steady, int64_t *id, sq_error *err)
{
    sq_store *s;
    int rc = sq_store_open(d->db, SQ_STORE_BUSY_MS, 0, &s, err);
    if (rc) return rc;
    rc = sq_store_find_bench_run(s, d->tiny ? "[1,4]" : "[1,4,16,64]", bench_ops_json,
                                 d->tiny ? 0.01 : 0.05, steady, id, err);
    sq_store_close(s);
    return rc;
}

/* What `shardq bench --db DB --sizes SIZES --min-time MIN --ops OPS` runs
** and stores: the C reference, on one thread and on every core. */
static int bench_record(const sq_app_demo *d, int64_t *run, sq_error *err)
{
    static const int tiny[] = {1, 4}, full[] = {1, 4, 16, 64};
    int all = sq_get_threads();
    int threads[2] = {1, all}, nthreads = all > 1 ? 2 : 1;
    size_t ops[8];
    int nops = 0;
    for (size_t i = 0; i < sizeof bench_ops / sizeof *bench_ops; i++)
        if (sq_bench_find_op(bench_ops[i], &ops[nops]) == SQ_OK) nops++;
    sq_bench_config cfg = {.sizes_mb = (int *)(d->tiny ? tiny : full), .nsizes = d->tiny ? 2 : 4,
                           .threads = threads, .nthreads = nthreads, .ops = ops, .nops = nops,
                           .codec = NULL, .min_time = d->tiny ? 0.01 : 0.05};
    sq_backend *be = NULL;
    int rc = sq_backend_open("cpu", &be, err);
    if (rc) return rc;
    rc = sq_bench_record(d->db, SQ_STORE_BUSY_MS, be, &cfg, d->ui ? d->ui->bench : NULL,
                         d->ui ? d->ui->ctx : NULL, run, err);
    sq_backend_close(be);
    if (!rc) sq_app_demo_say(d, SQ_APP_SAY_OUT, "stored as run %lld in %s", (long long)*run, d->db);
    return rc;
}

int sq_app_demo_bench(sq_app_demo *d, sq_error *err)
{
    sq_app_demo_phase(d, 4, "measuring the codec kernels beside the copy bandwidth");
    int64_t id, noisy, run = 0, steady;
    int rc = find_bench(d, 1, &id, err);
    if (rc) return rc;
    if (id > 0) {
        sq_app_demo_say(d, SQ_APP_SAY_OUT, "reusing bench run %lld (same sizes, operations and "
                        "time)", (long long)id);
    } else {
        if ((rc = find_bench(d, 0, &noisy, err))) return rc;
        if (noisy > 0)
            sq_app_demo_say(d, SQ_APP_SAY_OUT, "bench run %lld has figures that stayed noisy (a "
                            "busy machine): measuring again", (long long)noisy);
        if ((rc = bench_record(d, &run, err)) || (rc = find_bench(d, 0, &id, err))) return rc;
        if (id <= 0) return sq_error_set(err, SQ_ERR_NOTFOUND, "the bench run is not in %s", d->db);
        if ((rc = find_bench(d, 1, &steady, err))) return rc;
        if (steady != id)
            sq_app_demo_say(d, SQ_APP_SAY_OUT, "some figures of bench run %lld stayed noisy after "
                            "%d tries: the report marks them, and the next demo measures again",
                            (long long)id, SQ_BENCH_TRIES);
    }
    d->bench_run = id;
    return sq_app_demo_keep(d, NULL, id, err);
}

static int find_model(const sq_app_demo *d, int64_t *id, sq_error *err)
{
    sq_store *s;
    int rc = sq_store_open(d->db, SQ_STORE_BUSY_MS, 0, &s, err);
    if (rc) return rc;
    rc = sq_store_find_model_run(s, "a100-slingshot10", "GPT-1.3B", model_schemes, NSCHEMES, id,
                                 err);
    sq_store_close(s);
    return rc;
}

/* What `shardq model --sweep-gpus --scheme qw,qwd,ulq,tlq,tlqhs,sdp4bit,zeropp
** --db DB` predicts and stores: GPT-1.3B on the SDP4Bit A100 cluster from
** one node up to 1024 GPUs, shown as a table of speedups. */
static int model_record(const sq_app_demo *d, sq_error *err)
{
    sq_cost_platform plat;
    sq_cost_model_shape model;
    sq_scheme base, schemes[NSCHEMES];
    int rc;
    if ((rc = sq_cost_platform_read("a100-slingshot10", &plat, err)) ||
        (rc = sq_cost_model_read("gpt-1.3b", &model, err)) ||
        (rc = sq_scheme_preset("baseline", &base, err)))
        return rc;
    for (size_t i = 0; i < NSCHEMES; i++)
        if ((rc = sq_scheme_preset(model_schemes[i], &schemes[i], err))) return rc;
    sq_cost_study st = {.plat = &plat, .model = &model,
                        .par = {.tp = 1, .pp = 1, .micro_batch = 1, .accum = 1},
                        .max_gpus = 1024, .baseline = &base, .schemes = schemes,
                        .names = model_schemes, .nschemes = NSCHEMES};
    sq_cost_point *pts = calloc(SQ_COST_MAX_POINTS, sizeof *pts);
    int n = 0;
    int64_t run = 0;
    rc = pts ? sq_cost_record(d->db, SQ_STORE_BUSY_MS, &st, pts, &n, &run, err)
             : sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    if (rc == SQ_OK) {
        sq_app_demo_model m = {.model = model.name, .platform = plat.name,
                               .names = model_schemes, .nschemes = NSCHEMES, .pts = pts,
                               .npts = n};
        if (d->ui && d->ui->model) d->ui->model(d->ui->ctx, &m);
        sq_app_demo_say(d, SQ_APP_SAY_OUT, "stored as run %lld in %s", (long long)run, d->db);
    }
    free(pts);
    return rc;
}

int sq_app_demo_predict(sq_app_demo *d, sq_error *err)
{
    sq_app_demo_phase(d, 5, "predicting the speedup on the SDP4Bit A100 cluster (cost model)");
    int64_t id;
    int rc = find_model(d, &id, err);
    if (rc) return rc;
    if (id > 0) {
        sq_app_demo_say(d, SQ_APP_SAY_OUT, "reusing model run %lld (same platform, model and "
                        "schemes)", (long long)id);
    } else {
        if ((rc = model_record(d, err)) || (rc = find_model(d, &id, err))) return rc;
        if (id <= 0) return sq_error_set(err, SQ_ERR_NOTFOUND, "the model run is not in %s", d->db);
    }
    d->model_run = id;
    return sq_app_demo_keep(d, NULL, id, err);
}

