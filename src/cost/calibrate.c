/*
** calibrate.c -- the calibration of a platform (cost.h, sq_cost_calibrate):
** its effective inter-node bandwidth (one measured row), or that and the
** achieved compute rate (two rows or more), fitted by least squares to
** measured baseline runs (docs/cost-model.md); `shardq model --calibrate`
** prints the fit and writes the calibrated platform file.
**
** Why a fit at all: a cluster rarely delivers its cards' line rate to one
** training job's collectives, and a model fed the datasheet over-predicts
** the baseline several times over. What the model needs is the rate the
** network reaches for this job's traffic, and a measured iteration of the
** baseline holds exactly that.
**
** The unknowns are v = 1/E (seconds per byte through a node's network) and
** u = 1/F (seconds per FLOP of one GPU). The iteration time is piecewise
** linear in them (compute and bubble scale with u, a network-bound
** collective with v), so Gauss-Newton on the linearised model, solved as a
** weighted linear least-squares problem by GSL, lands on the minimum in a
** few steps; the weights make the residuals relative, so a long run does
** not outweigh a short one.
*/
#include "shardq/cost.h"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct fit_row {
    const sq_cost_measured *meas;
    sq_cost_model_shape model;
    sq_cost_parallel par;
    double t;     /* the measured iteration, seconds */
    double flops; /* model FLOPs of its global batch */
} fit_row;

/* What one fit works on: the rows, the platform it starts from, and GSL's
** matrices of one Gauss-Newton step. */
typedef struct fit {
    const char *file;
    const sq_cost_platform *p0;
    const sq_scheme *base;
    fit_row *rows;
    int n, np;   /* rows; parameters (bandwidth, and compute from two rows on) */
    double line; /* the cards' datasheet rate */
    gsl_matrix *X, *cov;
    gsl_vector *y, *w, *c;
    gsl_multifit_linear_workspace *work;
} fit;

/* The platform at (v, u): the network one card of rate 1/v with no cap;
** u = 0 keeps the platform's compute. */
static sq_cost_platform at(const sq_cost_platform *p, double v, double u)
{
    sq_cost_platform q = *p;
    q.nics_per_node = 1;
    q.nic_bw = 1 / v;
    q.net_efficiency = 1;
    q.communicator_bw = 0;
    if (u > 0) q.achieved_flops = 1 / u;
    return q;
}

static int predict(const sq_cost_platform *p, const fit_row *r, const sq_scheme *base, double *t,
                   sq_error *err)
{
    sq_cost_result c;
    int rc = sq_cost_iteration(p, &r->model, &r->par, base, &c, err);
    *t = c.iteration;
    return rc;
}

/* predict() while fitting: a model that fails at a point of the fit is the
** fit's failure (SQ_ERR_RANGE), not the rows'. */
static int predict_fit(const fit *f, const sq_cost_platform *p, int i, double *t, sq_error *err)
{
    int rc = predict(p, &f->rows[i], f->base, t, err);
    if (rc == SQ_OK) return SQ_OK;
    if (err) err->status = SQ_ERR_RANGE;
    return SQ_ERR_RANGE;
}

/* The measured figure as the row gave it, for messages. */
static const char *field(const fit_row *r) { return isnan(r->meas->tflops) ? "iteration_ms" : "tflops"; }
static double given(const fit_row *r)
{
    return isnan(r->meas->tflops) ? 1e3 * r->t : r->meas->tflops;
}

/* Each row's model, parallelism and measured time, checked by one
** prediction on the starting platform. */
static int rows_read(fit *f, const sq_cost_measurements *ms, int system, sq_error *err)
{
    sq_error e = {0};
    for (int i = 0; i < f->n; i++) {
        const sq_cost_measured *m = &ms->rows[i];
        fit_row *r = &f->rows[i];
        r->meas = m;
        int rc = sq_cost_model_read(m->model, &r->model, &e);
        if (rc != SQ_OK)
            return sq_error_set(err, rc, "%s: [row %s] model: %s", f->file, m->label,
                                sq_error_message(&e));
        int dp = m->gpus / (m->tp * m->pp);
        r->par = (sq_cost_parallel){.gpus = m->gpus, .tp = m->tp, .pp = m->pp,
                                    .micro_batch = m->micro_batch,
                                    .accum = m->global_batch / (m->micro_batch * dp),
                                    .overlap = m->overlap, .system = system};
        r->flops = sq_cost_model_flops_per_seq(&r->model) * m->global_batch;
        r->t = isnan(m->tflops) ? m->iteration_s : r->flops / (m->tflops * 1e12 * m->gpus);
        double t;
        if ((rc = predict(f->p0, r, f->base, &t, &e)) != SQ_OK)
            return sq_error_set(err, rc, "%s: [row %s]: %s", f->file, m->label,
                                sq_error_message(&e));
    }
    return SQ_OK;
}

/* A single row faster than the platform allows with an unlimited network
** (at its own compute rate) cannot be fitted by a bandwidth: refuse it. */
static int row_reachable(const fit *f, sq_error *err)
{
    sq_cost_platform inf = at(f->p0, 1e-30, 0);
    const fit_row *r = &f->rows[0];
    double t;
    int rc = predict(&inf, r, f->base, &t, err);
    if (rc != SQ_OK) return rc;
    if (r->t < t)
        return sq_error_set(err, SQ_ERR_CONFLICT, "%s: [row %s] %s: %.6g is faster than the "
                            "platform %s allows: an iteration takes %.1f ms there with an "
                            "unlimited network (compute at %g TFLOP/s, NVLink and the optimizer "
                            "alone)", f->file, r->meas->label, field(r), given(r), f->p0->name,
                            1e3 * t, f->p0->achieved_flops / 1e12);
    return SQ_OK;
}

/* One Gauss-Newton step from x: the linearised model's weighted least
** squares, x moved by its solution; *converged when it hardly moved. */
static int gauss_newton_step(fit *f, double x[2], int *converged, sq_error *err)
{
    const int np = f->np;
    for (int i = 0; i < f->n; i++) {
        double t0, tj;
        sq_cost_platform q = at(f->p0, x[0], np == 2 ? x[1] : 0);
        if (predict_fit(f, &q, i, &t0, err) != SQ_OK) return SQ_ERR_RANGE;
        for (int j = 0; j < np; j++) {
            /* forward differences: the model is linear between its kinks */
            double xs[2] = {x[0], x[1]}, h = 1e-6 * x[j];
            xs[j] += h;
            q = at(f->p0, xs[0], np == 2 ? xs[1] : 0);
            if (predict_fit(f, &q, i, &tj, err) != SQ_OK) return SQ_ERR_RANGE;
            gsl_matrix_set(f->X, (size_t)i, (size_t)j, (tj - t0) / h);
        }
        gsl_vector_set(f->y, (size_t)i, f->rows[i].t - t0);
        gsl_vector_set(f->w, (size_t)i, 1 / (f->rows[i].t * f->rows[i].t));
    }
    size_t rank;
    double chisq = 0;
    int st = gsl_multifit_wlinear_tsvd(f->X, f->w, f->y, 1e-12, f->c, f->cov, &chisq, &rank,
                                       f->work);
    if (st)
        return sq_error_set(err, SQ_ERR_RANGE, "the least-squares fit failed: %s",
                            gsl_strerror(st));
    if (rank < (size_t)np)
        return sq_error_set(err, SQ_ERR_CONFLICT, "%s: the rows cannot tell %s: %s", f->file,
                            np == 1 ? "the network's rate"
                                    : "the network's rate from the compute rate",
                            np == 1 ? "the network is not what limits this run on this platform "
                                      "(its NVLink or compute is), so no bandwidth changes its "
                                      "time"
                                    : "they scale alike (give rows of other models, GPU counts "
                                      "or batches), or the network limits none of them");
    *converged = 1;
    for (int j = 0; j < np; j++) {
        double d = gsl_vector_get(f->c, (size_t)j), nx = x[j] + d;
        /* a step past zero means a rate beyond any bound: move towards
        ** it, and let the checks below judge where it ends */
        if (nx <= 0) nx = x[j] / 16;
        if (fabs(nx - x[j]) > 1e-12 * x[j]) *converged = 0;
        x[j] = nx;
    }
    return SQ_OK;
}

/* A fit above the cards' line rate, or compute beyond reason, means some
** row is faster than the hardware allows: name the row that asks most. */
static int fit_too_fast(const fit *f, const double x[2], int converged, double E, sq_error *err)
{
    sq_cost_platform cap = at(f->p0, 1 / f->line, f->np == 2 ? x[1] : 0);
    int worst = 0;
    double most = -INFINITY;
    for (int i = 0; i < f->n; i++) {
        double t;
        if (predict_fit(f, &cap, i, &t, err) != SQ_OK) return SQ_ERR_RANGE;
        double ask = (t - f->rows[i].t) / f->rows[i].t;
        if (ask > most) most = ask, worst = i;
    }
    const fit_row *r = &f->rows[worst];
    return sq_error_set(err, SQ_ERR_CONFLICT, "%s: [row %s] %s: %.6g is faster than the hardware "
                        "allows: the fit needs %.4g GB/s through a node's network, more than the "
                        "%.4g GB/s line rate of %s's %d x %.4g GB/s cards ([inter] nics_per_node "
                        "x nic_gb_s); at that rate the row takes %.1f ms%s", f->file,
                        r->meas->label, field(r), given(r), E / 1e9, f->line / 1e9, f->p0->name,
                        f->p0->nics_per_node, f->p0->nic_bw / 1e9, 1e3 * r->t * (1 + most),
                        converged ? "" : " (the fit did not converge)");
}

/* The calibrated platform's name, its figures' sources and its file's
** comment. */
static void describe(sq_cost_calibration *cal, const sq_cost_measurements *ms, const char *file,
                     const char *out)
{
    const sq_cost_platform *p0 = &cal->start;
    sq_cost_platform *p = &cal->platform;
    /* named as the file is, so that a built-in copy loads by that name */
    const char *obase = strrchr(out, '/');
    obase = obase ? obase + 1 : out;
    size_t bl = strlen(obase);
    if (bl > 4 && !strcmp(obase + bl - 4, ".ini")) bl -= 4;
    if (bl > sizeof p->name - 1) bl = sizeof p->name - 1;
    if (bl == 0) snprintf(p->name, sizeof p->name, "%.52s-calibrated", p0->name);
    else snprintf(p->name, sizeof p->name, "%.*s", (int)bl, obase);
    char labels[256] = "", when[32];
    for (int i = 0; i < cal->nrows; i++) {
        size_t len = strlen(labels);
        snprintf(labels + len, sizeof labels - len, "%s%s", i ? "," : "", ms->rows[i].label);
    }
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%d", gmtime(&now));
    const char *table = ms->table[0] ? ms->table : file;
    sq_cost_source *src = p->source;
    src[SQ_COST_FIG_NIC_BW] = (sq_cost_source){.kind = SQ_COST_SRC_FITTED};
    snprintf(src[SQ_COST_FIG_NIC_BW].fitted_to, sizeof src->fitted_to, "%s", table);
    snprintf(src[SQ_COST_FIG_NIC_BW].rows, sizeof src->rows, "%s", labels);
    snprintf(src[SQ_COST_FIG_NIC_BW].note, sizeof src->note,
             "a node's effective network rate, least squares (%s)", when);
    if (cal->nparams == 2) {
        src[SQ_COST_FIG_ACHIEVED_TFLOPS] = src[SQ_COST_FIG_NIC_BW];
        snprintf(src[SQ_COST_FIG_ACHIEVED_TFLOPS].note, sizeof src->note,
                 "fitted with the network rate (%s)", when);
    }
    static const sq_cost_figure folded[] = {SQ_COST_FIG_NICS, SQ_COST_FIG_EFFICIENCY,
                                            SQ_COST_FIG_COMMUNICATOR};
    for (size_t k = 0; k < 3; k++) {
        src[folded[k]] = (sq_cost_source){.kind = SQ_COST_SRC_ASSUMED};
        snprintf(src[folded[k]].note, sizeof src->note,
                 "folded into inter.nic_gb_s by the calibration");
    }
    snprintf(cal->comment, sizeof cal->comment,
             "%s -- %s calibrated by shardq model --calibrate %s (%s):\n"
             "the network%s fitted to %d measured baseline row%s (%s); every other figure is "
             "%s's.", p->name, p0->name, file, when, cal->nparams == 2 ? " and the compute rate" : "",
             cal->nrows, cal->nrows == 1 ? "" : "s", labels, p0->name);
}

/* Gauss-Newton from the datasheet to the fitted (v, u), then the checks and
** each row's time at the fit. */
static int solve(fit *f, sq_cost_calibration *cal, sq_error *err)
{
    const int n = f->n, np = f->np;
    gsl_set_error_handler_off();
    f->X = gsl_matrix_alloc((size_t)n, (size_t)np);
    f->cov = gsl_matrix_alloc((size_t)np, (size_t)np);
    f->y = gsl_vector_alloc((size_t)n), f->w = gsl_vector_alloc((size_t)n);
    f->c = gsl_vector_alloc((size_t)np);
    f->work = gsl_multifit_linear_alloc((size_t)n, (size_t)np);
    if (!f->X || !f->cov || !f->y || !f->w || !f->c || !f->work)
        return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    /* x[0] = v, x[1] = u, started at the datasheet */
    double x[2] = {1 / (f->p0->net_efficiency * f->line), 1 / f->p0->achieved_flops};
    int converged = 0, iters = 0, rc;
    for (; iters < 100 && !converged; iters++)
        if ((rc = gauss_newton_step(f, x, &converged, err)) != SQ_OK) return rc;
    double E = 1 / x[0], F = np == 2 ? 1 / x[1] : f->p0->achieved_flops;
    cal->platform = at(f->p0, x[0], np == 2 ? x[1] : 0);
    for (int i = 0; i < n; i++) {
        cal->measured_s[i] = f->rows[i].t;
        if (predict_fit(f, &cal->platform, i, &cal->fitted_s[i], err) != SQ_OK)
            return SQ_ERR_RANGE;
    }
    if (!converged || E > f->line * (1 + 1e-9) || !(F > 0))
        return fit_too_fast(f, x, converged, E, err);
    cal->iterations = iters;
    cal->inter_bw = E;
    cal->achieved_flops = F;
    return SQ_OK;
}

int sq_cost_calibrate(const sq_cost_measurements *ms, const char *file,
                      const sq_cost_platform *p0, const sq_scheme *base, int system,
                      const char *out, sq_cost_calibration *cal, sq_error *err)
{
    if (!ms || !file || !p0 || !base || !out || !cal)
        return sq_error_set(err, SQ_ERR_ARG, "sq_cost_calibrate: a NULL argument");
    memset(cal, 0, sizeof *cal);
    fit f = {.file = file, .p0 = p0, .base = base, .n = ms->nrows};
    f.np = f.n >= 2 ? 2 : 1;
    f.line = p0->nics_per_node * p0->nic_bw;
    cal->start = *p0;
    cal->nrows = f.n;
    cal->nparams = f.np;
    cal->line_rate = f.line;
    int rc = SQ_OK;
    if (!(f.rows = calloc(SQ_COST_VALIDATION_MAX_ROWS, sizeof *f.rows)))
        return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    if ((rc = rows_read(&f, ms, system, err)) == SQ_OK &&
        (f.np == 2 || (rc = row_reachable(&f, err)) == SQ_OK) &&
        (rc = solve(&f, cal, err)) == SQ_OK)
        describe(cal, ms, file, out);
    if (f.work) gsl_multifit_linear_free(f.work);
    if (f.X) gsl_matrix_free(f.X);
    if (f.cov) gsl_matrix_free(f.cov);
    if (f.y) gsl_vector_free(f.y);
    if (f.w) gsl_vector_free(f.w);
    if (f.c) gsl_vector_free(f.c);
    free(f.rows);
    return rc;
}
