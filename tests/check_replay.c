/*
** check_replay.c -- sq_replay_run (src/replay) on traces written here with
** the trace writer: its statistics against an fp64 computation written out
** in this file (the baseline scheme, whose results are known element by
** element) or against the codec's error bound (4-bit weights), the kinds of
** its failures (a NaN in the trace, a file cut short), the rows it gives
** per tensor and per step, and a sink that stops it.
*/
#include "shardq/replay.h"
#include "shardq/layout.h"
#include "shardq/trace.h"
#include "shardq/world.h"

#include "check_util.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

enum { STEPS = 3, WORKERS = 2, NP = 2, FIRST_STEP = 5 };
static const uint64_t NEL[NP] = {200, 1000};
static const char *const NAMES[NP] = {"a", "b"};

/* What the trace holds: weights WT[s][p] and gradients GR[s][r][p]. */
static float WT[STEPS][NP][1000], GR[STEPS][WORKERS][NP][1000];
static char tmpdir[512];

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

static const char *tpath(const char *name)
{
    static char buf[700];
    snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
    return buf;
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

/* Each figure as its definition reads (README, "Error statistics"). */
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
    write_trace(tpath("t"));
    sq_trace t;
    open_trace(tpath("t"), &t);
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
    write_trace(tpath("t"));
    sq_trace t;
    open_trace(tpath("t"), &t);
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
    write_trace(tpath("nan"));
    make_values();
    sq_trace t;
    open_trace(tpath("nan"), &t);
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
    write_trace(tpath("cut"));
    sq_trace t;
    open_trace(tpath("cut"), &t);
    char file[800];
    snprintf(file, sizeof file, "%s/step-%06u/grads-w00.safetensors", tpath("cut"),
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
    write_trace(tpath("t"));
    sq_trace t;
    open_trace(tpath("t"), &t);
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
    write_trace(tpath("t"));
    sq_trace t;
    open_trace(tpath("t"), &t);
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

static void setup(void)
{
    ck_assert_int_eq(sqt_mkdtemp(tmpdir, sizeof tmpdir, "check_replay"), 0);
    make_values();
}

static void teardown(void)
{
    sqt_rm_tree(tmpdir);
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
    suite_add_tcase(s, tc);
    return sqt_run(s);
}
