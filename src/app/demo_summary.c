/*
** demo_summary.c -- what `shardq demo` ends with: the three lines that
** matter (the error of the codecs on the captured gradients and weights,
** the convergence under sdp4bit beside the spread of seeds, the predicted
** speedup at scale) and the Setup the report opens with, read from this
** configuration's runs (store/summary_queries.h).
**
** The convergence line compares the difference of two means with its 95%
** interval (Welch's, with the smaller df: a cautious width), through GSL's
** statistics and Student t quantile.
*/
#define _DEFAULT_SOURCE /* PATH_MAX, gmtime_r */
#include "app/demo_internal.h"
#include "store/summary_queries.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_statistics_double.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The figures of the three lines. */
typedef struct figures {
    double g_sdp, g_ulq, w_qw, w_qwd;     /* relative L2 error */
    double b_sdp, b_ulq, b_qw, b_qwd;     /* bits per real parameter */
    const char *lg, *lw;                  /* the hop of those bits */
    double v_base, v_sdp, var_base, var_sdp, v_qw;
    size_t n_base, n_sdp;
    double s64, smax;
    int gmax;
} figures;

/* The bits of collective on the inter-node hop, or on the intra-node one
** when the world has a single node (NaN on the other); *link says which. */
static int replay_bits(sq_store *s, const sq_app_ids *ids, const char *preset,
                       const char *collective, double *v, const char **link, sq_error *err)
{
    static const char *const links[2] = {"inter", "intra"};
    *v = NAN;
    for (int k = 0; k < 2 && !isfinite(*v); k++) {
        int rc = sq_store_summary_replay_bits(s, ids->v, ids->n, preset, collective, links[k], v,
                                              err);
        if (rc) return rc;
        *link = links[k];
    }
    return SQ_OK;
}

/* The last validation loss of every run of preset among ids: their mean,
** variance (0 for one run) and number. */
static int final_vals(sq_store *s, const sq_app_ids *ids, const char *preset, double *mean,
                      double *var, size_t *n, sq_error *err)
{
    double vals[64];
    *mean = NAN, *var = 0;
    int rc = sq_store_summary_final_vals(s, ids->v, ids->n, preset, vals, 64, n, err);
    if (rc) return rc;
    if (*n > 64) *n = 64;
    if (*n > 0) *mean = gsl_stats_mean(vals, 1, *n);
    if (*n > 1) *var = gsl_stats_variance(vals, 1, *n);
    return SQ_OK;
}

static int read_figures(sq_store *s, const sq_app_demo *d, figures *f, sq_error *err)
{
    const sq_app_ids *reps = &d->replays, *trains = &d->trains;
    const char *l2;
    int rc;
    f->lg = f->lw = "inter";
    if ((rc = sq_store_summary_replay_error(s, reps->v, reps->n, "sdp4bit", "grad", &f->g_sdp,
                                            err)) ||
        (rc = sq_store_summary_replay_error(s, reps->v, reps->n, "ulq", "grad", &f->g_ulq, err)) ||
        (rc = sq_store_summary_replay_error(s, reps->v, reps->n, "qw", "weight", &f->w_qw, err)) ||
        (rc = sq_store_summary_replay_error(s, reps->v, reps->n, "qwd", "weight", &f->w_qwd,
                                            err)) ||
        (rc = replay_bits(s, reps, "sdp4bit", "grad_reducescatter", &f->b_sdp, &f->lg, err)) ||
        (rc = replay_bits(s, reps, "ulq", "grad_reducescatter", &f->b_ulq, &l2, err)) ||
        (rc = replay_bits(s, reps, "qw", "weight_allgather", &f->b_qw, &f->lw, err)) ||
        (rc = replay_bits(s, reps, "qwd", "weight_allgather", &f->b_qwd, &l2, err)) ||
        (rc = final_vals(s, trains, "baseline", &f->v_base, &f->var_base, &f->n_base, err)) ||
        (rc = final_vals(s, trains, "sdp4bit", &f->v_sdp, &f->var_sdp, &f->n_sdp, err)) ||
        (rc = sq_store_summary_final_val(s, trains->v, trains->n, "qw", &f->v_qw, err)) ||
        (rc = sq_store_summary_speedup(s, d->model_run, "sdp4bit", 64, &f->s64, err)) ||
        (rc = sq_store_summary_speedup(s, d->model_run, "sdp4bit", 0, &f->smax, err)) ||
        (rc = sq_store_summary_max_gpus(s, d->model_run, &f->gmax, err)))
        return rc;
    return SQ_OK;
}

static void write_lines(sq_app_demo *d, const figures *f)
{
    /* bits per real parameter: the padding of every tensor paid for */
    snprintf(d->lines[0], sizeof d->lines[0],
             "error:       on the captured gradients sdp4bit (8/4-bit, Hadamard) adds %.3g "
             "relative L2 error at %.3f bits/param on the %s-node hop, ulq (4/4-bit) %.3g at "
             "%.3f; 4-bit weight differences (qwd) %.3g at %.3f bits/param on the %s-node hop "
             "against 4-bit weights (qw) %.3g at %.3f", f->g_sdp, f->b_sdp, f->lg, f->g_ulq,
             f->b_ulq, f->w_qwd, f->b_qwd, f->lw, f->w_qw, f->b_qw);
    /* the difference of the means and its 95% interval; qw against the same */
    double diff = f->v_sdp - f->v_base, half = NAN;
    if (f->n_base > 1 && f->n_sdp > 1) {
        size_t df = (f->n_base < f->n_sdp ? f->n_base : f->n_sdp) - 1;
        half = gsl_cdf_tdist_Pinv(0.975, (double)df) *
               sqrt(f->var_base / (double)f->n_base + f->var_sdp / (double)f->n_sdp);
    }
    char verdict[256] = "one seed each: no spread to compare with";
    if (isfinite(half))
        snprintf(verdict, sizeof verdict, "%s the 95%% interval of seeds (+/-%.4f)",
                 fabs(diff) <= half ? "within" : "beyond", half);
    snprintf(d->lines[1], sizeof d->lines[1],
             "convergence: after %d steps the validation loss is %.4f under the baseline and "
             "%.4f under sdp4bit (means of %zu and %zu seeds), a difference of %+.4f (%+.2f%%), "
             "%s; %.4f (%+.2f%%, seed 1) under qw", d->steps, f->v_base, f->v_sdp, f->n_base,
             f->n_sdp, diff, 100 * (f->v_sdp / f->v_base - 1), verdict, f->v_qw,
             100 * (f->v_qw / f->v_base - 1));
    snprintf(d->lines[2], sizeof d->lines[2],
             "scale:       sdp4bit is predicted %.2fx faster than the baseline for GPT-1.3B on "
             "64 A100 (SDP4Bit measured 2.39x), %.2fx on %d", f->s64, f->smax, f->gmax);
}

int sq_app_demo_summarize(sq_app_demo *d, sq_error *err)
{
    sq_store *s;
    figures f;
    int rc = sq_store_open(d->db, SQ_STORE_BUSY_MS, 0, &s, err);
    if (rc) return rc;
    rc = read_figures(s, d, &f, err);
    sq_store_close(s);
    if (rc == SQ_OK) write_lines(d, &f);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The Setup                                                                */
/* ------------------------------------------------------------------------ */

/* The processor's name from /proc/cpuinfo ("model name"), else "". */
static void cpu_name(char *v, size_t n)
{
    char line[512];
    v[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            const char *p = strchr(line, ':') + 1;
            p += strspn(p, " \t");
            snprintf(v, n, "%.*s", (int)strcspn(p, "\n"), p);
            break;
        }
    fclose(f);
}

/* The capture run's settings, and the seeds of the training runs. */
typedef struct stored {
    char layers[32], ch[32], heads[32], params[32], seq[32], batch[32], lr[32];
    char host[256], seeds[128];
} stored;

static int read_stored(sq_store *s, const sq_app_demo *d, stored *t, sq_error *err)
{
    const struct {
        const char *key;
        char *buf;
    } params[] = {{"model.layers", t->layers}, {"model.channels", t->ch},
                  {"model.heads", t->heads},   {"model.params", t->params},
                  {"train.seq", t->seq},       {"train.batch", t->batch},
                  {"train.lr", t->lr}};
    int rc;
    for (size_t i = 0; i < sizeof params / sizeof *params; i++)
        if ((rc = sq_store_run_param_text(s, d->capture_run, params[i].key, params[i].buf, 32,
                                          err)))
            return rc;
    if ((rc = sq_store_run_host(s, d->capture_run, t->host, sizeof t->host, err))) return rc;
    return sq_store_summary_seeds(s, d->trains.v, d->trains.n, t->seeds, sizeof t->seeds, err);
}

int sq_app_demo_setup(sq_app_demo *d, sq_error *err)
{
    sq_store *s;
    stored t;
    d->nsetup = 0;
    int rc = sq_store_open(d->db, SQ_STORE_BUSY_MS, 0, &s, err);
    if (rc) return rc;
    rc = read_stored(s, d, &t, err);
    sq_store_close(s);
    if (rc) return rc;
    const char *bytes = strrchr(d->corpus_id, ':');
    char cpu[256], when[64] = "?";
    cpu_name(cpu, sizeof cpu);
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    double np = strtod(t.params, NULL);
    char (*u)[768] = d->setup;
    int n = 0;
    snprintf(u[n++], sizeof *u, "model: a byte-level GPT, %s layer%s, %s channels, %s heads, "
             "context %s bytes (%.3g M parameters), batch %s sequences per worker, learning "
             "rate %.3g", t.layers, strcmp(t.layers, "1") ? "s" : "", t.ch, t.heads, t.seq,
             np / 1e6, t.batch, strtod(t.lr, NULL));
    snprintf(u[n++], sizeof *u, "corpus: %s (%s bytes, copied as %s)", d->corpus_src,
             bytes ? bytes + 1 : "?", d->corpus_name);
    snprintf(u[n++], sizeof *u, "topology: %s workers (nodes x workers per node), sharded data "
             "parallel, collectives emulated in one process", d->tiny ? "1 x 2" : "2 x 4");
    snprintf(u[n++], sizeof *u, "steps: %d per training run, every %s-th evaluated on held-out "
             "text and its weights and gradients captured for the replays", d->steps, d->every);
    snprintf(u[n++], sizeof *u, "seeds: %s (training); the replays as their recipe says", t.seeds);
    snprintf(u[n++], sizeof *u, "version: shardq %s", SHARDQ_VERSION_STRING);
    snprintf(u[n++], sizeof *u, "machine: %s, %s%s%ld cores", t.host, cpu, cpu[0] ? ", " : "",
             cores);
    snprintf(u[n++], sizeof *u, "date: %s", when);
    d->nsetup = n;
    return SQ_OK;
}
