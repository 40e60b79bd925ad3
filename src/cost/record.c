/*
** record.c -- a study of the cost model (cost.h): several schemes beside
** the baseline at one GPU count or over a sweep of them, and its record in
** the store as a run of kind 'model' (its settings as the config and
** params, one model_results row per scheme and GPU count).
*/
#include "shardq/cost.h"

#include "shardq/store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double sq_cost_speedup(const sq_cost_result *base, const sq_cost_result *c)
{
    return c->iteration > 0 ? base->iteration / c->iteration : NAN;
}

/* Every scheme and the baseline at gpus. */
static int predict(const sq_cost_study *st, int gpus, sq_cost_point *pt, sq_error *err)
{
    sq_cost_parallel par = st->par;
    par.gpus = gpus;
    pt->gpus = gpus;
    /* the baseline is the plain system: ZeRO-3's comparisons are against
    ** ZeRO-3 without hpZ (ZeRO++'s tables) */
    sq_cost_parallel base = par;
    base.hpz = 0;
    int rc = sq_cost_iteration(st->plat, st->model, &base, st->baseline, &pt->base, err);
    for (int i = 0; rc == SQ_OK && i < st->nschemes; i++)
        rc = sq_cost_iteration(st->plat, st->model, &par, &st->schemes[i], &pt->cost[i], err);
    return rc;
}

int sq_cost_study_run(const sq_cost_study *st, sq_cost_point *pts, int *npts, sq_error *err)
{
    *npts = 0;
    if (!st->plat || !st->model || !st->baseline || (st->nschemes && (!st->schemes || !st->names)))
        return sq_error_set(err, SQ_ERR_ARG, "no platform, model, baseline or schemes");
    if (st->nschemes < 0 || st->nschemes > SQ_COST_MAX_SCHEMES)
        return sq_error_set(err, SQ_ERR_ARG, "%d schemes: at most %d", st->nschemes,
                            SQ_COST_MAX_SCHEMES);
    if (st->max_gpus <= 0) {
        int rc = predict(st, st->par.gpus, &pts[0], err);
        if (rc == SQ_OK) *npts = 1;
        return rc;
    }
    /* one node, then doubling: a count the layout cannot use is left out */
    int G = st->plat->gpus_per_node, n = 0;
    for (int g = G; g > 0 && g <= st->max_gpus && n < SQ_COST_MAX_POINTS; g *= 2)
        if (predict(st, g, &pts[n], NULL) == SQ_OK) n++;
    if (!n)
        return sq_error_set(err, SQ_ERR_ARG, "no GPU count from %d to %d fits TP %d x PP %d on "
                            "nodes of %d", G, st->max_gpus, st->par.tp, st->par.pp, G);
    *npts = n;
    return SQ_OK;
}

void sq_cost_study_config(const sq_cost_study *st, char *buf, size_t len)
{
    const sq_cost_platform *p = st->plat;
    const sq_cost_model_shape *m = st->model;
    const sq_cost_parallel *par = &st->par;
    snprintf(buf, len,
             "{\"platform\":\"%s\",\"model\":\"%s\",\"layers\":%d,\"hidden\":%d,\"heads\":%d,"
             "\"vocab\":%d,\"seq\":%d,\"tp\":%d,\"pp\":%d,\"micro_batch\":%d,\"accum\":%d,"
             "\"overlap\":%s,\"system\":\"%s\",\"hpz\":%s,\"gpus_per_node\":%d,"
             "\"achieved_tflops\":%.17g,\"quant_gb_s\":%.17g}",
             p->name, m->name, m->layers, m->hidden, m->heads, m->vocab, m->seq, par->tp, par->pp,
             par->micro_batch, par->accum, par->overlap ? "true" : "false",
             par->system == SQ_COST_ZERO3 ? "zero3" : "megatron", par->hpz ? "true" : "false",
             p->gpus_per_node,
             p->achieved_flops / 1e12, p->quant_bw / 1e9);
}

int sq_cost_study_store(const char *db, int busy_ms, const sq_cost_study *st,
                        const sq_cost_point *pts, int npts, int64_t *run, sq_error *err)
{
    if (run) *run = 0;
    char cfg[2048], tp[16], pp[16], mb[16], ac[16], q[32];
    sq_cost_study_config(st, cfg, sizeof cfg);
    snprintf(tp, sizeof tp, "%d", st->par.tp);
    snprintf(pp, sizeof pp, "%d", st->par.pp);
    snprintf(mb, sizeof mb, "%d", st->par.micro_batch);
    snprintf(ac, sizeof ac, "%d", st->par.accum);
    snprintf(q, sizeof q, "%.6g", st->plat->quant_bw / 1e9);
    sq_store_kv params[] = {{"platform", st->plat->name}, {"model", st->model->name},
                            {"tp", tp}, {"pp", pp}, {"micro_batch", mb}, {"accum", ac},
                            {"overlap", st->par.overlap ? "on" : "off"}, {"quant_gb_s", q}};
    sq_run_info info = {.kind = "model", .config = cfg, .device = st->plat->name};
    sq_store *s = NULL;
    int64_t id;
    int rc = sq_store_open(db, busy_ms, 0, &s, err);
    if (rc) return rc;
    rc = sq_store_run_begin(s, &info, params, sizeof params / sizeof *params, &id);
    if (rc != SQ_STORE_STARTED) {
        /* a run without a key is never found done */
        rc = rc < 0 ? sq_error_set(err, rc, "%s", sq_store_error(s))
                    : sq_error_set(err, SQ_ERR_CONFLICT, "%s: a model run was found done before "
                                   "it began", db);
        sq_store_close(s);
        return rc;
    }
    if (run) *run = id;
    /* the baseline's own row, unless it is one of the schemes */
    int have_base = 0;
    for (int i = 0; i < st->nschemes; i++) have_base |= !strcmp(st->names[i], "baseline");
    sq_model_row *rows = calloc((size_t)npts * (size_t)(st->nschemes + 1), sizeof *rows);
    size_t nr = 0;
    for (int k = 0; rows && k < npts; k++)
        for (int i = -1; i < st->nschemes; i++) {
            if (i < 0 && have_base) continue;
            const sq_cost_result *c = i < 0 ? &pts[k].base : &pts[k].cost[i];
            rows[nr++] = (sq_model_row){
                .scheme = i < 0 ? "baseline" : st->names[i], .gpus = pts[k].gpus,
                .compute_s = c->compute, .tp_s = c->tp, .bubble_s = c->bubble,
                .weight_s = c->weight, .grad_s = c->grad, .quant_s = c->quant,
                .optimizer_s = c->optimizer, .iteration_s = c->iteration, .tflops = c->tflops,
                .speedup = sq_cost_speedup(&pts[k].base, c),
                .inter_bytes_per_node = c->inter_bytes_per_node};
        }
    sq_error e = {0};
    if (!rows) rc = sq_error_set(&e, SQ_ERR_NOMEM, "out of memory");
    else if ((rc = sq_store_add_model(s, id, rows, nr)) != SQ_OK)
        sq_error_set(&e, rc, "%s", sq_store_error(s));
    free(rows);
    int end = sq_store_run_end(s, id, rc ? "failed" : "done", rc ? sq_error_message(&e) : NULL,
                               NULL, 0, NULL, 0);
    if (end && !rc) rc = sq_error_set(&e, end, "%s", sq_store_error(s));
    sq_store_close(s);
    if (rc && err) *err = e;
    return rc;
}

int sq_cost_record(const char *db, int busy_ms, const sq_cost_study *st, sq_cost_point *pts,
                   int *npts, int64_t *run, sq_error *err)
{
    if (run) *run = 0;
    int rc = sq_cost_study_run(st, pts, npts, err);
    return rc ? rc : sq_cost_study_store(db, busy_ms, st, pts, *npts, run, err);
}
