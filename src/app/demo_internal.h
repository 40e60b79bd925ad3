/*
** demo_internal.h -- what the files of `shardq demo` share (app.h): the
** state of one demo, and the steps each file implements. Internal to
** src/app.
*/
#ifndef SQ_APP_DEMO_INTERNAL_H
#define SQ_APP_DEMO_INTERNAL_H

#include "app/app.h"

#include <limits.h>
#include <stdint.h>

/* Run ids, for the queries and the report of one configuration. */
typedef struct sq_app_ids {
    int64_t *v;
    size_t n, cap;
} sq_app_ids;

struct sq_app_demo {
    char out[PATH_MAX];
    char db[PATH_MAX + 16];
    char report[PATH_MAX + 16];
    const char *corpus_src;     /* the text the user gave, or the default */
    char corpus[PATH_MAX + 64]; /* OUT/corpus-HASH.txt: what every run trains on */
    char corpus_name[64];       /* corpus-HASH.txt */
    char corpus_id[64];         /* fnv1a64:HASH:BYTES */
    char trace[PATH_MAX + 64];  /* OUT/trace-ID, one per capture key */
    char trace_name[64];        /* trace-ID */
    char key[2048];             /* the capture run's key */
    int steps, tiny;
    char every[32]; /* a quarter of the steps: evaluations and captured steps */
    double t0;
    int lock;       /* the descriptor that holds OUT/.shardq-demo.lock */
    const sq_app_demo_ui *ui;
    /* the done runs of this configuration, found as each phase ends */
    int64_t capture_run, bench_run, model_run;
    sq_app_ids replays, trains, all;
    /* the three lines that matter and the setup: the report's page opens
    ** with them */
    char lines[3][1536];
    char setup[8][768];
    int nsetup;
};

/* demo_state.c: a line through ui->say (printf-like); the line that begins
** phase k of 6; id kept as a run of this configuration (of ids, when not
** NULL, and of all). */
void sq_app_demo_say(const sq_app_demo *d, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void sq_app_demo_phase(const sq_app_demo *d, int k, const char *what);
int sq_app_ids_add(sq_app_ids *s, int64_t id);
int sq_app_demo_keep(sq_app_demo *d, sq_app_ids *ids, int64_t id, sq_error *err);

/* demo_state.c: data[0 .. len) written to path through the trace writer's
** safe file (a temporary renamed into place: no half file is left). */
int sq_app_demo_write(const char *path, const void *data, size_t len, sq_error *err);

/* demo_corpus.c: the corpus copied into OUT as corpus-HASH.txt (said). */
int sq_app_demo_take_corpus(sq_app_demo *d, sq_error *err);

/* demo_capture.c: the capture run's key and trace (from the options and
** the corpus), then phase 1. */
void sq_app_demo_capture_key(sq_app_demo *d);
int sq_app_demo_capture(sq_app_demo *d, sq_error *err);

/* demo_recipes.c: phases 2 (the replays) and 3 (the training runs). */
int sq_app_demo_replays(sq_app_demo *d, sq_error *err);
int sq_app_demo_training(sq_app_demo *d, sq_error *err);

/* demo_measure.c: phases 4 (bench) and 5 (the cost model). */
int sq_app_demo_bench(sq_app_demo *d, sq_error *err);
int sq_app_demo_predict(sq_app_demo *d, sq_error *err);

/* demo_recipes.c: recipe name ("replays", "train", "seeds") of this
** configuration written into OUT as file (demo-replay.ini ...) and loaded
** into *sw. */
int sq_app_demo_recipe(const sq_app_demo *d, const char *name, const char *file, sq_sweep *sw,
                       sq_error *err);

/* demo_summary.c: the three lines that matter into d->lines, and the
** report's Setup into d->setup. */
int sq_app_demo_summarize(sq_app_demo *d, sq_error *err);
int sq_app_demo_setup(sq_app_demo *d, sq_error *err);

#endif
