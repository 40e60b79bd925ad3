/*
** app.h -- the application layer: what a command runs once its options
** are read, built from the library's modules (sweep, train, replay,
** bench, cost, store) and the report, and printing nothing itself.
**
**   sq_app_train_run   one training run into the store, as `shardq train`
**                      runs it and `shardq demo` runs its capture (train.c)
**   sq_app_demo_*      `shardq demo`, the whole tour as a pipeline of six
**                      phases (demo.c), its recipes (experiments/demo/,
**                      built in: demo_recipes.c) and its summary, the
**                      three lines that matter (demo_summary.c)
**
** The layer sits above the report and every library module and below the
** command (src/cli), which it never includes: what a phase has to say goes
** to the caller's hooks (sq_app_demo_ui), and a failure comes back as a
** status with a sentence (sq_error).
*/
#ifndef SQ_APP_H
#define SQ_APP_H

#include "shardq/bench.h"
#include "shardq/cost.h"
#include "shardq/sweep.h"

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------ */
/* One training run                                                         */
/* ------------------------------------------------------------------------ */

typedef struct sq_app_train {
    const sq_sweep_config *cfg;
    const char *db;         /* NULL: store nothing */
    const char *key;        /* the run's key, or NULL */
    const char *sweep;      /* the sweep it belongs to, or NULL */
    int busy_ms;
    const char *capture;    /* write a trace of the run here, or NULL */
    uint32_t capture_every;
    const struct sq_transport *transport; /* NULL: every worker in this process */
} sq_app_train;

/* Runs t (measuring the sgemm rate beside it) with hooks into *out:
** sq_sweep_job_run's status, kinds and outcome. */
int sq_app_train_run(const sq_app_train *t, const sq_sweep_hooks *hooks, sq_sweep_outcome *out,
                     sq_error *err);

/* ------------------------------------------------------------------------ */
/* The demo                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct sq_app_demo_opts {
    const char *out;    /* DIR: made when missing, and taken as its real path */
    const char *corpus; /* the training text; NULL: $SHARDQ_CORPUS, else the default */
    int steps;          /* of every training run, >= 4 (a quarter are evaluated) */
    int tiny;           /* the 1-layer, 32-wide model on 1x2 workers and a short sweep */
} sq_app_demo_opts;

/* The cost model's predictions, for the caller to show as a table. */
typedef struct sq_app_demo_model {
    const char *model, *platform;
    const char *const *names; /* the schemes, beside the baseline */
    int nschemes;
    const sq_cost_point *pts;
    int npts;
} sq_app_demo_model;

enum { SQ_APP_SAY_OUT = 0, SQ_APP_SAY_WARN = 1 };

/* What the demo says as it goes. Every hook may be NULL. */
typedef struct sq_app_demo_ui {
    void *ctx;
    /* a line of the tour (OUT), or a fault it goes on after (WARN) */
    void (*say)(void *ctx, int level, const char *line);
    /* the capture's training, in a child process of its own: the hooks of
    ** its progress, then what it ran into, whose return is the child's exit
    ** status (SQ_SWEEP_EXIT_OK, _FAILED, _HELD) */
    void (*capture_hooks)(void *ctx, sq_sweep_hooks *hooks);
    int (*captured)(void *ctx, const sq_app_train *t, int rc, const sq_error *err,
                    const sq_sweep_outcome *out);
    /* every sweep's pool (sq_sweep_pool_opts.event) */
    void (*pool)(void *ctx, const sq_sweep *sw, const sq_sweep_pool_event *e);
    /* the codec kernels' figures as they come (sq_bench_record) */
    sq_bench_progress bench;
    /* the cost model's table */
    void (*model)(void *ctx, const sq_app_demo_model *m);
} sq_app_demo_ui;

typedef struct sq_app_demo sq_app_demo;

/* Takes DIR for this demo: made, resolved, and locked (one demo at a time
** writes into it: SQ_ERR_BUSY, the sentence naming the pid that holds it).
** The corpus is checked to be there. */
int sq_app_demo_open(const sq_app_demo_opts *o, sq_app_demo **d, sq_error *err);
/* DIR as resolved, and its database. */
const char *sq_app_demo_dir(const sq_app_demo *d);
const char *sq_app_demo_db(const sq_app_demo *d);
/* Runs the six phases, each reusing what the database holds of it. On
** failure the sentence is "" when the step that failed said it already
** (the capture's training, through ui->captured). */
int sq_app_demo_run(sq_app_demo *d, const sq_app_demo_ui *ui, sq_error *err);
/* The three lines that matter, once run; the report's directory. */
const char *sq_app_demo_line(const sq_app_demo *d, int i);
const char *sq_app_demo_report_dir(const sq_app_demo *d);
/* Seconds since sq_app_demo_open. */
double sq_app_demo_elapsed(const sq_app_demo *d);
/* Unlocks DIR and frees d. */
void sq_app_demo_close(sq_app_demo *d);

#endif /* SQ_APP_H */
