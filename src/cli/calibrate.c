/*
** calibrate.c -- `shardq model --calibrate FILE`: the platform's effective
** inter-node bandwidth (one measured row), or that and the achieved compute
** rate (two rows or more), fitted by least squares to measured baseline
** runs, and the calibrated platform file (README, "Calibration").
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
#include "cli.h"
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

/* The measured figure as the row gave it, for messages. */
static const char *field(const fit_row *r) { return isnan(r->meas->tflops) ? "iteration_ms" : "tflops"; }
static double given(const fit_row *r)
{
    return isnan(r->meas->tflops) ? 1e3 * r->t : r->meas->tflops;
}

int cli_model_calibrate(const char *file, const char *platform, const char *out, int system,
                        int json)
{
    const char *cmd = "shardq model --calibrate";
    sq_error err = {0};
    sq_cost_measurements *ms = malloc(sizeof *ms);
    fit_row *rows = calloc(SQ_COST_VALIDATION_MAX_ROWS, sizeof *rows);
    sq_cost_platform p0;
    sq_scheme base;
    int rc = CLI_USAGE, n = 0;
    gsl_matrix *X = NULL, *cov = NULL;
    gsl_vector *y = NULL, *w = NULL, *c = NULL;
    gsl_multifit_linear_workspace *work = NULL;
    if (!ms || !rows) {
        fprintf(stderr, "%s: out of memory\n", cmd);
        rc = CLI_RUNTIME;
        goto done;
    }
    if (sq_cost_measurements_read(file, ms, &err) != SQ_OK) {
        fprintf(stderr, "%s: %s\n", cmd, sq_error_message(&err));
        goto done;
    }
    if (sq_cost_platform_read(platform, &p0, &err) != SQ_OK) {
        fprintf(stderr, "%s: %s\n", cmd, sq_error_message(&err));
        goto done;
    }
    /* the baseline as the system runs it (ZeRO-3 reduces bf16 gradients) */
    const char *const zero3_grads[] = {"grad.intra.bits=16", "grad.inter.bits=16"};
    if (cli_scheme("model", "baseline", system == SQ_COST_ZERO3 ? zero3_grads : NULL,
                   system == SQ_COST_ZERO3 ? 2 : 0, &base))
        goto done;
    n = ms->nrows;
    for (int i = 0; i < n; i++) {
        const sq_cost_measured *m = &ms->rows[i];
        fit_row *r = &rows[i];
        r->meas = m;
        if (sq_cost_model_read(m->model, &r->model, &err) != SQ_OK) {
            fprintf(stderr, "%s: %s: [row %s] model: %s\n", cmd, file, m->label,
                    sq_error_message(&err));
            goto done;
        }
        int dp = m->gpus / (m->tp * m->pp);
        r->par = (sq_cost_parallel){.gpus = m->gpus, .tp = m->tp, .pp = m->pp,
                                    .micro_batch = m->micro_batch,
                                    .accum = m->global_batch / (m->micro_batch * dp),
                                    .overlap = m->overlap, .system = system};
        r->flops = sq_cost_model_flops_per_seq(&r->model) * m->global_batch;
        r->t = isnan(m->tflops) ? m->iteration_s : r->flops / (m->tflops * 1e12 * m->gpus);
        double t;
        if (predict(&p0, r, &base, &t, &err) != SQ_OK) {
            fprintf(stderr, "%s: %s: [row %s]: %s\n", cmd, file, m->label,
                    sq_error_message(&err));
            goto done;
        }
    }
    const int np = n >= 2 ? 2 : 1; /* bandwidth, and compute from two rows on */
    const double line = p0.nics_per_node * p0.nic_bw; /* the cards' datasheet rate */
    /* A row faster than the platform allows with an unlimited network (at
    ** its own compute rate) cannot be fitted by a bandwidth: refuse it. */
    if (np == 1) {
        sq_cost_platform inf = at(&p0, 1e-30, 0);
        double t;
        if (predict(&inf, &rows[0], &base, &t, &err) != SQ_OK) {
            fprintf(stderr, "%s: %s\n", cmd, sq_error_message(&err));
            goto done;
        }
        if (rows[0].t < t) {
            fprintf(stderr, "%s: %s: [row %s] %s: %.6g is faster than the platform %s allows: "
                    "an iteration takes %.1f ms there with an unlimited network (compute at "
                    "%g TFLOP/s, NVLink and the optimizer alone)\n", cmd, file,
                    rows[0].meas->label, field(&rows[0]), given(&rows[0]), p0.name, 1e3 * t,
                    p0.achieved_flops / 1e12);
            rc = CLI_RUNTIME;
            goto done;
        }
    }
    gsl_set_error_handler_off();
    X = gsl_matrix_alloc((size_t)n, (size_t)np);
    cov = gsl_matrix_alloc((size_t)np, (size_t)np);
    y = gsl_vector_alloc((size_t)n), w = gsl_vector_alloc((size_t)n);
    c = gsl_vector_alloc((size_t)np);
    work = gsl_multifit_linear_alloc((size_t)n, (size_t)np);
    if (!X || !cov || !y || !w || !c || !work) {
        fprintf(stderr, "%s: out of memory\n", cmd);
        rc = CLI_RUNTIME;
        goto done;
    }
    /* x[0] = v, x[1] = u, started at the datasheet */
    double x[2] = {1 / (p0.net_efficiency * line), 1 / p0.achieved_flops};
    double chisq = 0;
    int converged = 0, iters = 0;
    for (; iters < 100 && !converged; iters++) {
        for (int i = 0; i < n; i++) {
            double t0, tj;
            sq_cost_platform q = at(&p0, x[0], np == 2 ? x[1] : 0);
            if (predict(&q, &rows[i], &base, &t0, &err) != SQ_OK) goto model_failed;
            for (int j = 0; j < np; j++) {
                /* forward differences: the model is linear between its kinks */
                double xs[2] = {x[0], x[1]}, h = 1e-6 * x[j];
                xs[j] += h;
                q = at(&p0, xs[0], np == 2 ? xs[1] : 0);
                if (predict(&q, &rows[i], &base, &tj, &err) != SQ_OK) goto model_failed;
                gsl_matrix_set(X, (size_t)i, (size_t)j, (tj - t0) / h);
            }
            gsl_vector_set(y, (size_t)i, rows[i].t - t0);
            gsl_vector_set(w, (size_t)i, 1 / (rows[i].t * rows[i].t));
        }
        size_t rank;
        int st = gsl_multifit_wlinear_tsvd(X, w, y, 1e-12, c, cov, &chisq, &rank, work);
        if (st) {
            fprintf(stderr, "%s: the least-squares fit failed: %s\n", cmd, gsl_strerror(st));
            rc = CLI_RUNTIME;
            goto done;
        }
        if (rank < (size_t)np) {
            fprintf(stderr, "%s: %s: the rows cannot tell %s: %s\n", cmd, file,
                    np == 1 ? "the network's rate" : "the network's rate from the compute rate",
                    np == 1 ? "the network is not what limits this run on this platform (its "
                              "NVLink or compute is), so no bandwidth changes its time"
                            : "they scale alike (give rows of other models, GPU counts or "
                              "batches), or the network limits none of them");
            rc = CLI_RUNTIME;
            goto done;
        }
        converged = 1;
        for (int j = 0; j < np; j++) {
            double d = gsl_vector_get(c, (size_t)j), nx = x[j] + d;
            /* a step past zero means a rate beyond any bound: move towards
            ** it, and let the checks below judge where it ends */
            if (nx <= 0) nx = x[j] / 16;
            if (fabs(nx - x[j]) > 1e-12 * x[j]) converged = 0;
            x[j] = nx;
        }
    }
    double E = 1 / x[0], F = np == 2 ? 1 / x[1] : p0.achieved_flops;
    /* The fit's own verdict per row, and the checks: a rate above the cards'
    ** line rate, or compute beyond reason, means some row is faster than
    ** the hardware allows; name the row that asks most. */
    sq_cost_platform fit = at(&p0, x[0], np == 2 ? x[1] : 0);
    double tfit[SQ_COST_VALIDATION_MAX_ROWS];
    for (int i = 0; i < n; i++)
        if (predict(&fit, &rows[i], &base, &tfit[i], &err) != SQ_OK) goto model_failed;
    if (!converged || E > line * (1 + 1e-9) || !(F > 0)) {
        sq_cost_platform cap = at(&p0, 1 / line, np == 2 ? x[1] : 0);
        int worst = 0;
        double most = -INFINITY;
        for (int i = 0; i < n; i++) {
            double t;
            if (predict(&cap, &rows[i], &base, &t, &err) != SQ_OK) goto model_failed;
            if ((t - rows[i].t) / rows[i].t > most) most = (t - rows[i].t) / rows[i].t, worst = i;
        }
        fprintf(stderr, "%s: %s: [row %s] %s: %.6g is faster than the hardware allows: the fit "
                "needs %.4g GB/s through a node's network, more than the %.4g GB/s line rate "
                "of %s's %d x %.4g GB/s cards ([inter] nics_per_node x nic_gb_s); at that rate "
                "the row takes %.1f ms%s\n", cmd, file, rows[worst].meas->label,
                field(&rows[worst]), given(&rows[worst]), E / 1e9, line / 1e9, p0.name,
                p0.nics_per_node, p0.nic_bw / 1e9,
                1e3 * rows[worst].t * (1 + most), converged ? "" : " (the fit did not converge)");
        rc = CLI_RUNTIME;
        goto done;
    }

    /* the calibrated platform: its figures and where each comes from */
    sq_cost_platform cal = fit;
    /* named as the file is, so that a built-in copy loads by that name */
    const char *obase = strrchr(out, '/');
    obase = obase ? obase + 1 : out;
    size_t bl = strlen(obase);
    if (bl > 4 && !strcmp(obase + bl - 4, ".ini")) bl -= 4;
    if (bl > sizeof cal.name - 1) bl = sizeof cal.name - 1;
    if (bl == 0) snprintf(cal.name, sizeof cal.name, "%.52s-calibrated", p0.name);
    else snprintf(cal.name, sizeof cal.name, "%.*s", (int)bl, obase);
    char labels[256] = "", when[32];
    for (int i = 0; i < n; i++) {
        size_t len = strlen(labels);
        snprintf(labels + len, sizeof labels - len, "%s%s", i ? "," : "", rows[i].meas->label);
    }
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%d", gmtime(&now));
    const char *table = ms->table[0] ? ms->table : file;
    sq_cost_source *src = cal.source;
    src[SQ_COST_FIG_NIC_BW] = (sq_cost_source){.kind = SQ_COST_SRC_FITTED};
    snprintf(src[SQ_COST_FIG_NIC_BW].fitted_to, sizeof src->fitted_to, "%s", table);
    snprintf(src[SQ_COST_FIG_NIC_BW].rows, sizeof src->rows, "%s", labels);
    snprintf(src[SQ_COST_FIG_NIC_BW].note, sizeof src->note,
             "a node's effective network rate, least squares (%s)", when);
    if (np == 2) {
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
    char comment[1024];
    snprintf(comment, sizeof comment,
             "%s -- %s calibrated by shardq model --calibrate %s (%s):\n"
             "the network%s fitted to %d measured baseline row%s (%s); every other figure is "
             "%s's.", cal.name, p0.name, file, when, np == 2 ? " and the compute rate" : "", n,
             n == 1 ? "" : "s", labels, p0.name);
    char *text = NULL;
    if (sq_cost_platform_format(&cal, comment, &text, &err) != SQ_OK) {
        fprintf(stderr, "%s: %s\n", cmd, sq_error_message(&err));
        rc = CLI_RUNTIME;
        goto done;
    }
    int wrote = cli_write_file("model", out, text, strlen(text));
    free(text);
    if (wrote) {
        rc = CLI_RUNTIME;
        goto done;
    }
    if (json) {
        printf("{\"platform\":");
        cli_json_str(p0.name);
        printf(",\"file\":");
        cli_json_str(out);
        printf(",\"fitted\":{\"inter_gb_s\":");
        cli_json_num(E / 1e9);
        printf(",\"achieved_tflops\":");
        cli_json_num(np == 2 ? F / 1e12 : NAN);
        printf("},\"line_rate_gb_s\":");
        cli_json_num(line / 1e9);
        printf(",\"iterations\":%d,\"rows\":[", iters);
        for (int i = 0; i < n; i++) {
            printf("%s{\"label\":", i ? "," : "");
            cli_json_str(rows[i].meas->label);
            printf(",\"measured_s\":");
            cli_json_num(rows[i].t);
            printf(",\"fitted_s\":");
            cli_json_num(tfit[i]);
            printf(",\"error\":");
            cli_json_num(tfit[i] / rows[i].t - 1);
            printf("}");
        }
        printf("]}\n");
    } else {
        printf("%s: %d measured baseline row%s on %s; fitted by least squares (%d Gauss-Newton "
               "step%s):\n", file, n, n == 1 ? "" : "s", p0.name, iters, iters == 1 ? "" : "s");
        printf("  inter-node bandwidth %.4g GB/s per node (%.0f%% of the %.4g GB/s line rate of "
               "%d x %.4g GB/s cards)\n", E / 1e9, 100 * E / line, line / 1e9, p0.nics_per_node,
               p0.nic_bw / 1e9);
        if (np == 2)
            printf("  achieved compute   %.4g TFLOP/s per GPU (the platform said %.4g)\n",
                   F / 1e12, p0.achieved_flops / 1e12);
        else
            printf("  achieved compute   %.4g TFLOP/s per GPU, the platform's (one row fits the "
                   "bandwidth alone)\n", F / 1e12);
        printf("\n  %-16s %12s %12s %8s\n", "row", "measured ms", "fitted ms", "error");
        for (int i = 0; i < n; i++)
            printf("  %-16s %12.1f %12.1f %+7.1f%%\n", rows[i].meas->label, 1e3 * rows[i].t,
                   1e3 * tfit[i], 100 * (tfit[i] / rows[i].t - 1));
        printf("\nwrote %s (shardq model --platform %s)\n", out, out);
    }
    rc = CLI_OK;
    goto done;
model_failed:
    fprintf(stderr, "%s: %s\n", cmd, sq_error_message(&err));
    rc = CLI_RUNTIME;
done:
    if (work) gsl_multifit_linear_free(work);
    if (X) gsl_matrix_free(X);
    if (cov) gsl_matrix_free(cov);
    if (y) gsl_vector_free(y);
    if (w) gsl_vector_free(w);
    if (c) gsl_vector_free(c);
    free(ms);
    free(rows);
    return rc;
}
