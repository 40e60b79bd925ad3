/*
** demo_capture.c -- phase 1 of `shardq demo` (demo_internal.h): the GPT
** trained under the baseline while a trace of its weights and gradients is
** captured, in a child process of its own, under a key that names the
** whole configuration.
*/
#define _GNU_SOURCE /* PR_SET_PDEATHSIG */
#include "app/demo_internal.h"
#include "shardq/store.h"
#include "shardq/train.h"
#include "store/summary_queries.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The model options of every training run, as `shardq train` would take
** them, but the corpus: name, value, name, value, ..., NULL. */
static int model_args(const sq_app_demo *d, const char **a, char *steps, size_t len)
{
    static const char *const tiny[] = {"layers", "1", "channels", "32", "heads", "2",
                                       "context", "32", "seq", "32", "eval-seqs", "8",
                                       "workers", "1x2"};
    int n = 0;
    snprintf(steps, len, "%d", d->steps);
    a[n++] = "steps", a[n++] = steps;
    a[n++] = "eval-every", a[n++] = d->every;
    if (d->tiny)
        for (size_t i = 0; i < sizeof tiny / sizeof *tiny; i++) a[n++] = tiny[i];
    else
        a[n++] = "workers", a[n++] = "2x4";
    a[n] = NULL;
    return n;
}

/* The capture run's key: every option of the run and the corpus's hash,
** so that another --steps, --tiny or text is another run, with its own
** trace directory (named by the key's hash), never the old one reused. */
void sq_app_demo_capture_key(sq_app_demo *d)
{
    const char *a[32];
    char steps[32];
    int n = model_args(d, a, steps, sizeof steps);
    size_t len = (size_t)snprintf(d->key, sizeof d->key, "demo/capture;scheme=baseline;"
                                  "capture-every=%s", d->every);
    for (int i = 0; i + 1 < n; i += 2)
        len += (size_t)snprintf(d->key + len, sizeof d->key - len, ";%s=%s", a[i], a[i + 1]);
    snprintf(d->key + len, sizeof d->key - len, ";corpus=%s", d->corpus_id);
    snprintf(d->trace_name, sizeof d->trace_name, "trace-%016llx",
             (unsigned long long)sq_fnv1a64(d->key, strlen(d->key), SQ_FNV1A64_BASIS));
    snprintf(d->trace, sizeof d->trace, "%s/%s", d->out, d->trace_name);
}

/* OUT/trace: a link to the trace of the configuration run last. A trace
** directory of that name (from an older demo) is left alone. */
static void link_trace(const sq_app_demo *d)
{
    char link[PATH_MAX + 16], tmp[PATH_MAX + 48];
    struct stat st;
    snprintf(link, sizeof link, "%s/trace", d->out);
    if (lstat(link, &st) == 0 && !S_ISLNK(st.st_mode)) {
        sq_app_demo_say(d, SQ_APP_SAY_OUT, "%s is not a link: left as it is (this trace is %s)",
                        link, d->trace);
        return;
    }
    snprintf(tmp, sizeof tmp, "%s/.trace.%ld", d->out, (long)getpid());
    unlink(tmp);
    if (symlink(d->trace_name, tmp) != 0 || rename(tmp, link) != 0) {
        sq_app_demo_say(d, SQ_APP_SAY_WARN, "%s: cannot link it to %s: %s", link, d->trace_name,
                        strerror(errno));
        unlink(tmp);
    }
}

/* The capture run: the options of model_args as a training configuration
** (the same as `shardq train` makes of them), under the baseline. */
static int capture_config(const sq_app_demo *d, sq_sweep_config *c, sq_error *err)
{
    sq_sweep_config_defaults(c, SQ_SWEEP_TRAIN);
    sq_train_config *t = &c->train;
    t->steps = (uint32_t)d->steps;
    t->eval_every = (uint32_t)strtoul(d->every, NULL, 10);
    const char *workers = "2x4";
    if (d->tiny) {
        t->model.layers = 1, t->model.channels = 32, t->model.heads = 2, t->model.context = 32;
        t->seq = 32, t->eval_seqs = 8;
        workers = "1x2";
    }
    t->lr.min_lr = t->lr.lr / 10;
    t->lr.warmup = t->steps / 10;
    int rc = sq_scheme_preset("baseline", &c->scheme, err);
    if (!rc) rc = sq_topo_parse(workers, &c->topo, err);
    if (rc) return rc;
    c->has_topo = 1;
    c->preset = (char *)"baseline";
    c->device = (char *)"cpu";
    c->corpus = (char *)d->corpus;
    t->scheme = c->scheme;
    t->topo = c->topo;
    t->seed = c->seed;
    t->device = c->device;
    c->steps = t->steps;
    return SQ_OK;
}

/* The child's side of the capture: the training, and what the caller
** makes of it, as its exit status. */
static int capture_child(const sq_app_demo *d, const sq_sweep_config *c)
{
    const sq_app_demo_ui *ui = d->ui;
    sq_app_train t = {.cfg = c, .db = d->db, .key = d->key, .sweep = "demo-train",
                      .busy_ms = SQ_STORE_BUSY_MS, .capture = d->trace,
                      .capture_every = c->train.eval_every};
    sq_sweep_hooks hooks = {0};
    if (ui && ui->capture_hooks) ui->capture_hooks(ui->ctx, &hooks);
    sq_sweep_outcome *out = calloc(1, sizeof *out);
    sq_error e = {0};
    int rc = out ? sq_app_train_run(&t, &hooks, out, &e)
                 : sq_error_set(&e, SQ_ERR_NOMEM, "out of memory");
    if (out && ui && ui->captured) return ui->captured(ui->ctx, &t, rc, &e, out);
    return rc ? SQ_SWEEP_EXIT_FAILED : SQ_SWEEP_EXIT_OK;
}

/* Trains the capture run c in a child process. A child, because libgomp
** is not fork-safe: the sweeps that follow fork their jobs, and this
** process must not have run an OpenMP parallel region (the training's)
** before they do. The child says what went wrong itself: the sentence
** here is "" then. */
static int run_capture(const sq_app_demo *d, const sq_sweep_config *c, sq_error *err)
{
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) return sq_error_set(err, SQ_ERR_IO, "fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a killed demo leaves no training behind */
        if (getppid() != parent) _exit(SQ_SWEEP_EXIT_FAILED);
        sq_sweep_child_close_fds(-1); /* the lock of --out stays the demo's */
        int code = capture_child(d, c);
        fflush(stdout);
        fflush(stderr);
        _exit(code);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return sq_error_set(err, SQ_ERR_IO, "wait: %s", strerror(errno));
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : SQ_SWEEP_EXIT_FAILED;
    if (code == SQ_SWEEP_EXIT_OK) return SQ_OK;
    return sq_error_set(err, code == SQ_SWEEP_EXIT_HELD ? SQ_ERR_BUSY : SQ_ERR_IO, "%s", "");
}

/* The done run of key in the database, into *id (0: none). */
static int run_by_key(const sq_app_demo *d, const char *key, int64_t *id, sq_error *err)
{
    sq_store *s;
    int rc = sq_store_open(d->db, SQ_STORE_BUSY_MS, 0, &s, err);
    if (rc) return rc;
    rc = sq_store_done_run_by_key(s, key, id, err);
    sq_store_close(s);
    return rc;
}

int sq_app_demo_capture(sq_app_demo *d, sq_error *err)
{
    sq_app_demo_phase(d, 1, "training the GPT under the baseline, capturing a trace of its "
                            "weights and gradients");
    int64_t id;
    int rc = run_by_key(d, d->key, &id, err);
    if (rc) return rc;
    if (id > 0)
        sq_app_demo_say(d, SQ_APP_SAY_OUT, "reusing capture run %lld (same options, same corpus) "
                        "and its trace %s", (long long)id, d->trace_name);
    /* a trace cut short by a kill carries this key: the training takes it up */
    sq_sweep_config c;
    if ((rc = capture_config(d, &c, err)) || (rc = run_capture(d, &c, err)) ||
        (rc = run_by_key(d, d->key, &d->capture_run, err)))
        return rc;
    if (d->capture_run <= 0)
        return sq_error_set(err, SQ_ERR_NOTFOUND, "the capture run is not done in %s", d->db);
    if ((rc = sq_app_demo_keep(d, &d->trains, d->capture_run, err))) return rc;
    link_trace(d);
    return SQ_OK;
}

