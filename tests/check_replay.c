/*
** check_replay.c -- sq_replay_run (src/replay) on traces written here with
** the trace writer: its statistics against an fp64 computation written out
** in this file (the baseline scheme, whose results are known element by
** element) or against the codec's error bound (4-bit weights), the kinds of
** its failures (a NaN in the trace, a file cut short), the rows it gives
** per tensor and per step, a sink that stops it, and the gradient staging
** tile by tile against the whole path, byte for byte.
*/
/* RTLD_NEXT, for the count of threads started (below) */
#define _GNU_SOURCE 1
#include "shardq/replay.h"
#include "shardq/layout.h"
#include "shardq/trace.h"
#include "shardq/world.h"
#include "replay/replay_internal.h"

#include "check_util.h"

#include <check.h>
#include <dlfcn.h>
#include <pthread.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

enum { STEPS = 3, WORKERS = 2, NP = 2, FIRST_STEP = 5 };
static const uint64_t NEL[NP] = {200, 1000};
static const char *const NAMES[NP] = {"a", "b"};

/* What the trace holds: weights WT[s][p] and gradients GR[s][r][p]. */
static float WT[STEPS][NP][1000], GR[STEPS][WORKERS][NP][1000];
static void make_values(void)
{
    sqt_rng r = {42};
    for (int s = 0; s < STEPS; s++)
        for (int p = 0; p < NP; p++) {
            for (uint64_t i = 0; i < NEL[p]; i++) WT[s][p][i] = sqt_bell(&r, 0.5f);
            for (int w = 0; w < WORKERS; w++)
                for (uint64_t i = 0; i < NEL[p]; i++)
                    GR[s][w][p][i] = sqt_bell(&r, 1e-3f * (float)(w + 1));
        }
}

/* The trace of WT and GR, written with the trace writer. */
static void write_trace(const char *dir)
{
    sq_trace_param p[NP] = {{.name = "a", .ndim = 2, .shape = {20, 10}},
                            {.name = "b", .ndim = 1, .shape = {1000}}};
    sq_trace_writer *w;
    sq_error err = {0};
    ck_assert_msg(sq_trace_writer_open(&w, dir, WORKERS, p, NP, SQ_ST_F32, "1x2", NULL, &err) == 0,
                  "%s", err.msg);
    for (int s = 0; s < STEPS; s++)
        for (int r = -1; r < WORKERS; r++) {
            ck_assert_msg(sq_trace_file_begin(w, FIRST_STEP + (uint32_t)s, r, &err) == 0, "%s",
                          err.msg);
            for (int q = 0; q < NP; q++)
                ck_assert_msg(sq_trace_file_put(w, r < 0 ? WT[s][q] : GR[s][r][q], &err) == 0,
                              "%s", err.msg);
            ck_assert_msg(sq_trace_file_end(w, &err) == 0, "%s", err.msg);
        }
    ck_assert_msg(sq_trace_writer_close(w, &err) == 0, "%s", err.msg);
}

static void open_trace(const char *dir, sq_trace *t)
{
    sq_error err = {0};
    ck_assert_msg(sq_trace_open(dir, t, &err) == 0, "%s", err.msg);
}

static sq_replay_config config(const char *preset)
{
    sq_replay_config c = {.topo = {1, 2}, .seed = 5, .paths = SQ_REPLAY_GRAD | SQ_REPLAY_WEIGHT,
                          .tensor_rows = 1};
    sq_error err = {0};
    ck_assert_msg(sq_scheme_preset(preset, &c.scheme, &err) == 0, "%s", err.msg);
    return c;
}

/* ------------------------------------------------------------------------ */
/* A sink that keeps the rows                                               */
/* ------------------------------------------------------------------------ */

typedef struct rows_kept {
    sq_stat_row r[64];
    char names[64][8];
    size_t n, calls;
    int stop;          /* 1: stop at the first call; 2: fail with a kind */
} rows_kept;

static int keep(void *ctx, const sq_stat_row *rows, size_t n, sq_error *err)
{
    rows_kept *k = ctx;
    k->calls++;
    if (k->stop == 1) return 1;
    if (k->stop == 2) return sq_error_set(err, SQ_ERR_IO, "rows.db: cannot write: disk full");
    for (size_t i = 0; i < n && k->n < 64; i++, k->n++) {
        k->r[k->n] = rows[i];
        snprintf(k->names[k->n], sizeof k->names[k->n], "%s", rows[i].tensor ? rows[i].tensor : "");
        k->r[k->n].tensor = rows[i].tensor ? k->names[k->n] : NULL;
    }
    return 0;
}

static const sq_stat_row *find(const rows_kept *k, uint64_t step, const char *path,
                               const char *tensor)
{
    for (size_t i = 0; i < k->n; i++) {
        const sq_stat_row *r = &k->r[i];
        if (r->step == step && !strcmp(r->path, path) &&
            (tensor ? r->tensor && !strcmp(r->tensor, tensor) : !r->tensor))
            return r;
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* The figures by hand                                                      */
/* ------------------------------------------------------------------------ */

typedef struct sums {
    uint64_t n, zeroed;
    double e2, x2, y2, xy, e, max;
} sums;

static void add(sums *s, float y, double x)
{
    double d = (double)y - x;
    s->e2 += d * d, s->x2 += x * x, s->y2 += (double)y * y, s->xy += x * y, s->e += d;
    if (fabs(d) > s->max) s->max = fabs(d);
    if (y == 0 && x != 0) s->zeroed++;
    s->n++;
}

/* Each figure as its definition reads (docs/replay.md, the error statistics). */
static void expect_row(const sq_stat_row *r, const sums *s, const char *what)
{
    ck_assert_msg(r != NULL, "%s: no row", what);
    ck_assert_uint_eq(r->st.n, s->n);
    ck_assert_msg(r->st.mse == s->e2 / (double)s->n, "%s: mse %.17g, by hand %.17g", what,
                  r->st.mse, s->e2 / (double)s->n);
    ck_assert_msg(r->st.rel_l2 == sqrt(s->e2 / s->x2), "%s: rel_l2", what);
    ck_assert_msg(r->st.max_abs == s->max, "%s: max_abs", what);
    ck_assert_msg(r->st.cosine == s->xy / (sqrt(s->x2) * sqrt(s->y2)), "%s: cosine", what);
    ck_assert_msg(r->st.mean_signed == s->e / (double)s->n, "%s: mean_signed", what);
    ck_assert_msg(r->st.frac_zeroed == (double)s->zeroed / (double)s->n, "%s: zeroed", what);
}

/* bf16 of x, rounded to nearest even (x finite) */
static float bf16(float x)
{
    uint32_t u = sqt_bits(x);
    u += 0x7fffu + ((u >> 16) & 1u);
    return sqt_float(u & 0xffff0000u);
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                    */
/* ------------------------------------------------------------------------ */

/* Baseline on 1 x 2: the fp32 ring adds the two halves, so partition
** element i is g0/2 + g1/2 in fp32 against the fp64 mean; the bf16 weight
** all-gather gives every worker bf16(w) against w. */
START_TEST(test_baseline_exact)
{
    write_trace(sqt_tpath("t"));
    sq_trace t;
    open_trace(sqt_tpath("t"), &t);
    sq_replay_config cfg = config("baseline");
    rows_kept k = {.n = 0};
    sq_replay_sink sink = {.ctx = &k, .rows = keep};
    sq_replay_result res;
    sq_error e = {0};
    ck_assert_msg(sq_replay_run(&cfg, &t, &sink, &res, &e) == SQ_OK, "%s", e.msg);
    ck_assert_uint_eq(res.steps, STEPS);
    ck_assert_uint_eq(res.params, NP);
    ck_assert_uint_eq(res.elements, NEL[0] + NEL[1]);
    /* per tensor: STEPS grad rows and STEPS - 1 weight rows; per step the same */
    ck_assert_uint_eq(k.n, NP * (2 * STEPS - 1) + (2 * STEPS - 1));
    sums total = {0};
    for (int s = 0; s < STEPS; s++) {
        sums step = {0};
        for (int p = 0; p < NP; p++) {
            sums g = {0};
            for (uint64_t i = 0; i < NEL[p]; i++) {
                float a = GR[s][0][p][i], b = GR[s][1][p][i];
                add(&g, a / 2.0f + b / 2.0f, ((double)a + (double)b) / 2.0);
            }
            char what[64];
            snprintf(what, sizeof what, "grad, step %d, %s", s, NAMES[p]);
            const sq_stat_row *r = find(&k, FIRST_STEP + (uint64_t)s, "grad", NAMES[p]);
            expect_row(r, &g, what);
            ck_assert(r->frac_clipped == 0); /* fp32 on the wire: nothing clipped */
            step.n += g.n, step.e2 += g.e2, step.x2 += g.x2;
            total.n += g.n, total.e2 += g.e2, total.x2 += g.x2;
            if (s == 0) continue;
            sums w = {0};
            for (uint64_t i = 0; i < NEL[p]; i++) add(&w, bf16(WT[s][p][i]), WT[s][p][i]);
            snprintf(what, sizeof what, "weight, step %d, %s", s, NAMES[p]);
            expect_row(find(&k, FIRST_STEP + (uint64_t)s, "weight", NAMES[p]), &w, what);
        }
        /* the step's row: both params, merged */
        const sq_stat_row *r = find(&k, FIRST_STEP + (uint64_t)s, "grad", NULL);
        ck_assert_ptr_nonnull(r);
        ck_assert_uint_eq(r->st.n, step.n);
        ck_assert_double_eq_tol(r->st.mse, step.e2 / (double)step.n, 1e-12 * r->st.mse);
        ck_assert_double_eq_tol(r->st.rel_l2, sqrt(step.e2 / step.x2), 1e-12 * r->st.rel_l2);
    }
    ck_assert_uint_eq(res.grad.n, total.n);
    ck_assert_double_eq_tol(res.grad.mse, total.e2 / (double)total.n, 1e-12 * res.grad.mse);
    ck_assert(res.grad.mse > 0 && res.weight.mse > 0);
    ck_assert_uint_eq(res.weight.n, (STEPS - 1) * (NEL[0] + NEL[1]));
    ck_assert(res.grad_clipped == 0 && res.weight_clipped == 0);
    sq_trace_close(&t);
}
END_TEST

/* 4-bit weights (qw: symmetric, 7 levels a side, stochastic rounding): each
** element lands on one of the two levels around it, so no error reaches a
** step, absmax / 7, of its group (at most the tensor's absmax). */
START_TEST(test_4bit_within_bound)
{
    write_trace(sqt_tpath("t"));
    sq_trace t;
    open_trace(sqt_tpath("t"), &t);
    sq_replay_config cfg = config("qw");
    cfg.paths = SQ_REPLAY_WEIGHT;
    /* the bound is per param: each param's own groups */
    cfg.scheme.layout = SQ_LAYOUT_PARAM;
    rows_kept k = {.n = 0};
    sq_replay_sink sink = {.ctx = &k, .rows = keep};
    sq_replay_result res;
    sq_error e = {0};
    ck_assert_msg(sq_replay_run(&cfg, &t, &sink, &res, &e) == SQ_OK, "%s", e.msg);
    ck_assert(!res.has_grad && res.has_weight);
    for (int s = 1; s < STEPS; s++)
        for (int p = 0; p < NP; p++) {
            float amax = 0;
            for (uint64_t i = 0; i < NEL[p]; i++)
                amax = fabsf(WT[s][p][i]) > amax ? fabsf(WT[s][p][i]) : amax;
            const sq_stat_row *r = find(&k, FIRST_STEP + (uint64_t)s, "weight", NAMES[p]);
            ck_assert_ptr_nonnull(r);
            ck_assert_uint_eq(r->st.n, NEL[p]);
            double bound = (double)amax / 7.0 * (1 + 1e-6);
            ck_assert_msg(r->st.max_abs > 0 && r->st.max_abs < bound,
                          "step %d, %s: max error %g, bound %g", s, NAMES[p], r->st.max_abs,
                          bound);
            /* the mean square error of SR is at most a quarter step squared */
            ck_assert(r->st.mse <= bound * bound / 4);
            ck_assert(r->st.cosine > 0.9);
            ck_assert(r->frac_clipped == 0); /* SDP4Bit's levels never clip */
        }
    sq_trace_close(&t);
}
END_TEST

/* A NaN in a gradient: the replay stops with SQ_ERR_NONFINITE, naming the
** file and the tensor. */
START_TEST(test_nan_is_nonfinite)
{
    GR[1][1][1][7] = NAN;
    write_trace(sqt_tpath("nan"));
    make_values();
    sq_trace t;
    open_trace(sqt_tpath("nan"), &t);
    sq_replay_config cfg = config("baseline");
    sq_replay_result res;
    sq_error e = {0};
    ck_assert_int_eq(sq_replay_run(&cfg, &t, NULL, &res, &e), SQ_ERR_NONFINITE);
    ck_assert_int_eq(e.status, SQ_ERR_NONFINITE);
    ck_assert_msg(strstr(e.msg, "grads-w01") && strstr(e.msg, "'b'") && strstr(e.msg, "NaN"),
                  "%s", e.msg);
    sq_trace_close(&t);
}
END_TEST

/* A file cut short after the trace was opened: a malformed or unreadable
** file, never a success or a crash. */
START_TEST(test_truncated_file)
{
    write_trace(sqt_tpath("cut"));
    sq_trace t;
    open_trace(sqt_tpath("cut"), &t);
    char file[800];
    snprintf(file, sizeof file, "%s/step-%06u/grads-w00.safetensors", sqt_tpath("cut"),
             (unsigned)FIRST_STEP + 1);
    struct stat st;
    ck_assert_int_eq(stat(file, &st), 0);
    ck_assert_int_eq(truncate(file, st.st_size / 2), 0);
    sq_replay_config cfg = config("baseline");
    sq_replay_result res;
    sq_error e = {0};
    int rc = sq_replay_run(&cfg, &t, NULL, &res, &e);
    ck_assert_msg(rc == SQ_ERR_FORMAT || rc == SQ_ERR_IO, "%d: %s", rc, e.msg);
    ck_assert_int_eq(e.status, rc);
    ck_assert_msg(strstr(e.msg, "grads-w00"), "%s", e.msg);
    sq_trace_close(&t);
}
END_TEST

static int stop_tensor(void *ctx, uint32_t step, size_t p, int path, const float *x, uint64_t n)
{
    int *calls = ctx;
    (void)step, (void)p, (void)path, (void)x, (void)n;
    return ++*calls == 2;
}

/* A sink that stops the replay: with a kind of its own, that kind and its
** sentence; with any other value, SQ_ERR_INTERRUPTED. */
START_TEST(test_sink_stops)
{
    write_trace(sqt_tpath("t"));
    sq_trace t;
    open_trace(sqt_tpath("t"), &t);
    sq_replay_config cfg = config("qwd");
    sq_replay_result res;
    sq_error e = {0};
    rows_kept k = {.stop = 1};
    sq_replay_sink sink = {.ctx = &k, .rows = keep};
    ck_assert_int_eq(sq_replay_run(&cfg, &t, &sink, &res, &e), SQ_ERR_INTERRUPTED);
    ck_assert_uint_eq(k.calls, 1); /* the first param's rows, then no more */
    k = (rows_kept){.stop = 2};
    ck_assert_int_eq(sq_replay_run(&cfg, &t, &sink, &res, &e), SQ_ERR_IO);
    ck_assert_msg(strstr(e.msg, "disk full"), "%s", e.msg);
    ck_assert_uint_eq(k.calls, 1);
    /* without tensor rows the rows come once, per step, at the end */
    cfg.tensor_rows = 0;
    k = (rows_kept){.n = 0};
    ck_assert_int_eq(sq_replay_run(&cfg, &t, &sink, &res, &e), SQ_OK);
    ck_assert_uint_eq(k.calls, 1);
    ck_assert_uint_eq(k.n, 2 * STEPS - 1);
    /* the tensor callback stops it too, at its second tensor */
    int calls = 0;
    sq_replay_sink ts = {.ctx = &calls, .tensor = stop_tensor};
    ck_assert_int_eq(sq_replay_run(&cfg, &t, &ts, &res, &e), SQ_ERR_INTERRUPTED);
    ck_assert_int_eq(calls, 2);
    ck_assert_msg(strstr(e.msg, "stopped by the caller"), "%s", e.msg);
    sq_trace_close(&t);
}
END_TEST

START_TEST(test_nothing_to_replay)
{
    write_trace(sqt_tpath("t"));
    sq_trace t;
    open_trace(sqt_tpath("t"), &t);
    sq_replay_config cfg = config("baseline");
    sq_replay_result res;
    sq_error e = {0};
    cfg.paths = 0;
    ck_assert_int_eq(sq_replay_run(&cfg, &t, NULL, &res, &e), SQ_ERR_ARG);
    ck_assert_msg(strstr(e.msg, "no path chosen"), "%s", e.msg);
    /* the weight path compares a step with the one before: one step is not enough */
    cfg.paths = SQ_REPLAY_WEIGHT;
    cfg.max_steps = 1;
    ck_assert_int_eq(sq_replay_run(&cfg, &t, NULL, &res, &e), SQ_ERR_NOTFOUND);
    ck_assert_msg(strstr(e.msg, "at least two steps"), "%s", e.msg);
    sq_trace_close(&t);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The tiled staging against the whole path                                 */
/* ------------------------------------------------------------------------ */

/* Params of sizes that straddle the staging's tiles (16384 elements) and
** the groups (a slot boundary inside a tile, a param of 7): W gradient
** files per step, 3 steps with weights, stored as dtype. */
enum { BIG_STEPS = 3, BIG_NP = 3 };
static const uint64_t BIG_N[BIG_NP] = {33000, 20001, 7};

static void write_big(const char *dir, int W, sq_st_dtype dtype)
{
    sq_trace_param p[BIG_NP] = {{.name = "a", .ndim = 2, .shape = {330, 100}},
                                {.name = "b", .ndim = 1, .shape = {20001}},
                                {.name = "c", .ndim = 1, .shape = {7}}};
    static float x[33000];
    sqt_rng r = {7};
    sq_trace_writer *w;
    sq_error err = {0};
    ck_assert_msg(sq_trace_writer_open(&w, dir, W, p, BIG_NP, dtype, NULL, NULL, &err) == 0, "%s",
                  err.msg);
    for (int s = 0; s < BIG_STEPS; s++)
        for (int k = -1; k < W; k++) {
            ck_assert_msg(sq_trace_file_begin(w, 1 + (uint32_t)s, k, &err) == 0, "%s", err.msg);
            for (int q = 0; q < BIG_NP; q++) {
                for (uint64_t i = 0; i < BIG_N[q]; i++)
                    x[i] = k < 0 ? sqt_bell(&r, 0.5f) : sqt_bell(&r, 1e-3f * (float)(k + 1 + q));
                if (k >= 0 && q == 1) x[5] = 0.0f; /* a zero, and an outlier that clips */
                if (k == 0 && q == 0) x[17000] = 3.0f;
                ck_assert_msg(sq_trace_file_put(w, x, &err) == 0, "%s", err.msg);
            }
            ck_assert_msg(sq_trace_file_end(w, &err) == 0, "%s", err.msg);
        }
    ck_assert_msg(sq_trace_writer_close(w, &err) == 0, "%s", err.msg);
}

/* One replay, staged by tiles or not; the rows it gave. */
static int replay_staged(const sq_trace *t, const char *preset, sq_topo topo, int tiles,
                         rows_kept *k, sq_replay_result *res, sq_error *e)
{
    /* "sdp4bit+ds": at DeepSpeed's levels, whose top level is one short, so
    ** that every group's largest positive element clips */
    const int ds = !strcmp(preset, "sdp4bit+ds");
    sq_replay_config cfg = config(ds ? "sdp4bit" : preset);
    cfg.topo = topo;
    if (ds)
        ck_assert(sq_scheme_set(&cfg.scheme, "grad.intra.levels=deepspeed", e) == SQ_OK &&
                  sq_scheme_set(&cfg.scheme, "grad.inter.levels=deepspeed", e) == SQ_OK);
    cfg.reuse_workers = 1;
    memset(k, 0, sizeof *k);
    sq_replay_sink sink = {.ctx = k, .rows = keep};
    sq_replay_tiles = tiles;
    int rc = sq_replay_run(&cfg, t, &sink, res, e);
    sq_replay_tiles = 1;
    return rc;
}

static void expect_same_stats(const sq_errstats *a, const sq_errstats *b, const char *what)
{
    ck_assert_msg(memcmp(a, b, sizeof *a) == 0, "%s: rel_l2 %.17g vs %.17g, n %llu vs %llu", what,
                  a->rel_l2, b->rel_l2, (unsigned long long)a->n, (unsigned long long)b->n);
}

/* Every figure of the replay, row by row, the same whether the gradients
** were staged tile by tile (read, put into the world, counted for clipping
** and summed in fp64 a tile at a time) or worker by worker: the schemes of
** every gradient path that takes its input whole, F32, BF16 and F16
** files; as many workers as the 3 files (3 terms in each sum, so that the
** order of the sum shows), twice as many (each file reused), fewer (a file
** left unread), and one. */
START_TEST(test_tiles_same_bytes)
{
    static const char *const presets[] = {"sdp4bit", "sdp4bit+ds", "baseline", "qsdp", "qgz",
                                          "ulq", "topk", "powersgd"};
    static const sq_st_dtype dtypes[] = {SQ_ST_F32, SQ_ST_BF16, SQ_ST_F16};
    static const sq_topo topos[] = {{1, 3}, {2, 3}, {1, 2}, {1, 1}};
    for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++) {
        char dir[64];
        snprintf(dir, sizeof dir, "big%zu", d);
        write_big(sqt_tpath(dir), 3, dtypes[d]);
        sq_trace t;
        open_trace(sqt_tpath(dir), &t);
        for (size_t p = 0; p < sizeof presets / sizeof *presets; p++)
            for (size_t o = 0; o < sizeof topos / sizeof *topos; o++) {
                char what[128];
                snprintf(what, sizeof what, "%s, dtype %zu, %dx%d", presets[p], d, topos[o].nodes,
                         topos[o].per_node);
                static rows_kept kt, kw;
                sq_replay_result rt, rw;
                sq_error et = {0}, ew = {0};
                unsigned long before = sq_replay_tiled_steps;
                ck_assert_msg(replay_staged(&t, presets[p], topos[o], 1, &kt, &rt, &et) == SQ_OK,
                              "%s: %s", what, et.msg);
                /* every unit of every step went through the tiles */
                ck_assert_msg(sq_replay_tiled_steps - before == rt.units * BIG_STEPS,
                              "%s: %lu tiled passes for %zu units", what,
                              sq_replay_tiled_steps - before, rt.units);
                before = sq_replay_tiled_steps;
                ck_assert_msg(replay_staged(&t, presets[p], topos[o], 0, &kw, &rw, &ew) == SQ_OK,
                              "%s: %s", what, ew.msg);
                ck_assert_msg(sq_replay_tiled_steps == before, "%s: tiles when told not to", what);
                expect_same_stats(&rt.grad, &rw.grad, what);
                expect_same_stats(&rt.weight, &rw.weight, what);
                ck_assert_msg(rt.grad_clipped == rw.grad_clipped, "%s: clipped %.17g vs %.17g",
                              what, rt.grad_clipped, rw.grad_clipped);
                ck_assert(rt.weight_clipped == rw.weight_clipped);
                ck_assert(rt.trace_bytes == rw.trace_bytes);
                ck_assert(memcmp(&rt.timings[0].bytes, &rw.timings[0].bytes, sizeof(uint64_t)) == 0);
                ck_assert(rt.timings[0].calls == rw.timings[0].calls);
                ck_assert(isnan(rt.ef_residual) ? isnan(rw.ef_residual)
                                                : rt.ef_residual == rw.ef_residual);
                ck_assert_uint_eq(kt.n, kw.n);
                for (size_t i = 0; i < kt.n; i++) {
                    ck_assert(kt.r[i].step == kw.r[i].step && !strcmp(kt.r[i].path, kw.r[i].path));
                    expect_same_stats(&kt.r[i].st, &kw.r[i].st, what);
                    ck_assert(kt.r[i].frac_clipped == kw.r[i].frac_clipped ||
                              (isnan(kt.r[i].frac_clipped) && isnan(kw.r[i].frac_clipped)));
                }
                /* clipping counted tile by tile adds up */
                if (!strcmp(presets[p], "sdp4bit+ds") && sq_topo_workers(&topos[o]) > 1)
                    ck_assert_msg(rt.grad_clipped > 0.001, "%s: clipped %g", what, rt.grad_clipped);
            }
        sq_trace_close(&t);
    }
}
END_TEST

/* Writes a NaN over element i of tensor name in the F32 gradient file of
** worker k at step `step` of the trace in dir. */
static void put_nan(const char *dir, unsigned step, int k, const char *name, long i)
{
    char file[800];
    snprintf(file, sizeof file, "%s/step-%06u/grads-w%02d.safetensors", dir, step, k);
    sq_st_file f;
    sq_error err = {0};
    ck_assert_msg(sq_st_open(file, &f, &err) == 0, "%s", err.msg);
    const sq_st_entry *e = sq_st_find(&f, name);
    ck_assert_ptr_nonnull(e);
    long off = (long)(e->data - (const unsigned char *)f.map) + 4L * i;
    sq_st_free(&f);
    FILE *fp = fopen(file, "r+b");
    ck_assert_ptr_nonnull(fp);
    float nan = NAN;
    ck_assert(fseek(fp, off, SEEK_SET) == 0 && fwrite(&nan, 4, 1, fp) == 1);
    fclose(fp);
}

/* A NaN in the second worker's file, at a tile before the one where the
** first worker's file has one: the tiled pass gives up and the whole path
** names the first worker's, as it always did. */
START_TEST(test_tiles_bad_value_named)
{
    write_big(sqt_tpath("bad"), 2, SQ_ST_F32);
    /* patch the values in place: worker 1's 'a'[10] and worker 0's 'b'[3] */
    put_nan(sqt_tpath("bad"), 2, 1, "a", 10);
    put_nan(sqt_tpath("bad"), 2, 0, "b", 3);
    sq_trace t;
    open_trace(sqt_tpath("bad"), &t);
    sq_replay_config cfg = config("sdp4bit");
    sq_replay_result res;
    sq_error e = {0};
    ck_assert_int_eq(sq_replay_run(&cfg, &t, NULL, &res, &e), SQ_ERR_NONFINITE);
    ck_assert_msg(strstr(e.msg, "grads-w00") && strstr(e.msg, "'b'") && strstr(e.msg, "element 3"),
                  "%s", e.msg);
    sq_trace_close(&t);
}
END_TEST

/* The reader alone (sq_trace_time_reader, replay --bound) reads what the
** replay read: the same bytes for both paths, the gradients alone, fewer
** workers than files (one left unread), more (files reused), fewer steps;
** and it reads every tile of every file: a NaN in the last element of the
** last file read is found and named, one in a file the replay leaves
** unread is not. */
START_TEST(test_reader_bound)
{
    write_big(sqt_tpath("rb"), 3, SQ_ST_F32);
    sq_trace t;
    open_trace(sqt_tpath("rb"), &t);
    static const struct {
        sq_topo topo;
        int paths;
        size_t steps;
    } cases[] = {{{1, 3}, SQ_REPLAY_GRAD | SQ_REPLAY_WEIGHT, 0}, {{1, 3}, SQ_REPLAY_GRAD, 0},
                 {{1, 3}, SQ_REPLAY_WEIGHT, 0}, {{1, 2}, SQ_REPLAY_GRAD | SQ_REPLAY_WEIGHT, 0},
                 {{2, 3}, SQ_REPLAY_GRAD | SQ_REPLAY_WEIGHT, 0},
                 {{1, 3}, SQ_REPLAY_GRAD | SQ_REPLAY_WEIGHT, 2}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        sq_replay_config cfg = config("sdp4bit");
        cfg.topo = cases[c].topo;
        cfg.paths = cases[c].paths;
        cfg.max_steps = cases[c].steps;
        cfg.reuse_workers = 1;
        sq_replay_result res;
        sq_error e = {0};
        ck_assert_msg(sq_replay_run(&cfg, &t, NULL, &res, &e) == SQ_OK, "%s", e.msg);
        double secs;
        uint64_t bytes;
        const int N = res.has_grad ? sq_topo_workers(&cfg.topo) : 0;
        ck_assert_msg(sq_trace_time_reader(&t, res.steps, res.has_weight, N, &secs, &bytes, &e) ==
                          SQ_OK, "%s", e.msg);
        ck_assert_msg(bytes == res.trace_bytes && bytes > 0, "case %zu: %llu bytes, replay %llu", c,
                      (unsigned long long)bytes, (unsigned long long)res.trace_bytes);
        ck_assert(secs > 0);
    }
    sq_trace_close(&t);
    /* the last element of 'a' (its last tile) in the last gradient file read */
    put_nan(sqt_tpath("rb"), 3, 2, "a", 32999);
    open_trace(sqt_tpath("rb"), &t);
    double secs;
    uint64_t bytes;
    sq_error e = {0};
    ck_assert_int_eq(sq_trace_time_reader(&t, 3, 1, 3, &secs, &bytes, &e), SQ_ERR_NONFINITE);
    ck_assert_msg(strstr(e.msg, "grads-w02") && strstr(e.msg, "'a'") && strstr(e.msg, "32999"),
                  "%s", e.msg);
    /* left unread with two workers, or at two steps */
    ck_assert_msg(sq_trace_time_reader(&t, 3, 1, 2, &secs, &bytes, &e) == SQ_OK, "%s", e.msg);
    ck_assert_msg(sq_trace_time_reader(&t, 2, 1, 3, &secs, &bytes, &e) == SQ_OK, "%s", e.msg);
    sq_trace_close(&t);
}
END_TEST

/* Every thread this process starts goes through here (the executable's
** definition comes first in the dynamic lookup, libgomp's calls included),
** counted, then to the real pthread_create. */
static int threads_started;
typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*f)(void *), void *arg)
{
    static create_fn real;
    if (!real) {
        void *p = dlsym(RTLD_NEXT, "pthread_create");
        memcpy(&real, &p, sizeof real);
    }
    __atomic_fetch_add(&threads_started, 1, __ATOMIC_RELAXED);
    return real(t, a, f, arg);
}

/* Told to use one thread (a sweep's job: sq_set_threads(1) while OpenMP's
** own default is more), a replay starts no thread at all: every parallel
** region asks sq_get_threads, the tiled staging's inner ones included (a
** region that did not once started a team per tile and per worker, and
** made the demo's sweep of small groups 100 times slower). */
START_TEST(test_one_thread_starts_none)
{
#ifdef _OPENMP
    omp_set_num_threads(4);
#endif
    sq_set_threads(1);
    write_big(sqt_tpath("one"), 3, SQ_ST_F32);
    sq_trace t;
    open_trace(sqt_tpath("one"), &t);
    const int before = __atomic_load_n(&threads_started, __ATOMIC_RELAXED);
    static rows_kept k;
    sq_replay_result res;
    sq_error e = {0};
    unsigned long tiled = sq_replay_tiled_steps;
    static const char *const presets[] = {"sdp4bit", "sdp4bit+ds", "qsdp", "qgz"};
    for (size_t p = 0; p < sizeof presets / sizeof *presets; p++)
        ck_assert_msg(replay_staged(&t, presets[p], (sq_topo){2, 3}, 1, &k, &res, &e) == SQ_OK,
                      "%s", e.msg);
    ck_assert(sq_replay_tiled_steps > tiled);
    double secs; /* and the reader alone, as replay --bound times it */
    uint64_t bytes;
    ck_assert_msg(sq_trace_time_reader(&t, BIG_STEPS, 1, 3, &secs, &bytes, &e) == SQ_OK, "%s",
                  e.msg);
    const int started = __atomic_load_n(&threads_started, __ATOMIC_RELAXED) - before;
    ck_assert_msg(started == 0, "%d threads started by replays on one thread", started);
#ifdef _OPENMP
    /* and the count sees libgomp's threads: a region of its default size */
    int team = 0;
#pragma omp parallel
    team = omp_get_num_threads();
    ck_assert_msg(team < 2 || __atomic_load_n(&threads_started, __ATOMIC_RELAXED) > 0,
                  "a team of %d, no thread counted", team);
#endif
    sq_trace_close(&t);
    sq_set_threads(0);
}
END_TEST

static void setup(void)
{
    ck_assert_int_eq(sqt_scratch_begin("check_replay"), 0);
    make_values();
}

static void teardown(void)
{
    sqt_rm_tree(sqt_tmpdir);
}

int main(void)
{
    Suite *s = suite_create("replay");
    TCase *tc = tcase_create("replay");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_baseline_exact);
    tcase_add_test(tc, test_4bit_within_bound);
    tcase_add_test(tc, test_nan_is_nonfinite);
    tcase_add_test(tc, test_truncated_file);
    tcase_add_test(tc, test_sink_stops);
    tcase_add_test(tc, test_nothing_to_replay);
    tcase_add_test(tc, test_tiles_same_bytes);
    tcase_add_test(tc, test_tiles_bad_value_named);
    tcase_add_test(tc, test_one_thread_starts_none);
    tcase_add_test(tc, test_reader_bound);
    suite_add_tcase(s, tc);
    return sqt_run(s);
}
