/*
** demo.c -- `shardq demo` as a pipeline (app.h): the main job on its
** built-in defaults, a tour of the whole harness in a few minutes:
**
**   1. train the byte-level GPT under the baseline while capturing a trace
**      of its weights and per-worker gradients;
**   2. sweep bits x group sizes x Hadamard, and every preset over three
**      seeds, on that trace (replays);
**   3. train the same model under the main presets (same data, same seed);
**   4. measure the codec kernels beside the copy bandwidth;
**   5. run the cost model for the speedup at cluster scale;
**   6. write the report, with the lines that matter most.
**
** Every phase calls its module directly: the training job (train.c), the
** sweep's process pool over the recipes of experiments/demo/ (built in:
** demo_recipes.c), sq_bench_record, sq_cost_record and the report. Every
** result goes to one database in the output directory, and each run
** carries a key: a demo interrupted at any point completes by running it
** again, and a finished one reruns in seconds.
**
** A configuration (the options and the corpus's bytes) is named by the
** capture run's key, which holds all of them: another --steps, --tiny or
** corpus is another capture into its own trace directory, so the keys of
** the sweeps after it (which hold the trace's and the corpus's paths) are
** new too, and the lines and the report read that configuration's runs
** only. The corpus is read from a copy named by its hash in the output
** directory, which the recipes can name safely (libinih cannot quote). One
** demo at a time holds the directory (a lock file).
*/
#define _GNU_SOURCE /* realpath, PR_SET_PDEATHSIG */
#include "app/demo_internal.h"
#include "report/report.h"
#include "sq_clock.h"
#include "shardq/store.h"
#include "shardq/trace.h"
#include "shardq/train.h"
#include "store/summary_queries.h"
#include "trace/input.h"
#include "trace/wfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The presets compared by training: the baseline, the paper's weight and
** gradient halves, SDP4Bit itself and ZeRO++ at 4 bits. */
static const char *const model_schemes[] = {"qw", "qwd", "ulq", "tlq", "tlqhs", "sdp4bit",
                                            "zeropp"};
#define NSCHEMES (sizeof model_schemes / sizeof *model_schemes)

void sq_app_demo_say(const sq_app_demo *d, int level, const char *fmt, ...)
{
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (d->ui && d->ui->say) d->ui->say(d->ui->ctx, level, line);
}

static void phase(const sq_app_demo *d, int k, const char *what)
{
    sq_app_demo_say(d, SQ_APP_SAY_OUT, "\n[%d/6 %5.0f s] %s", k, sq_clock_s() - d->t0, what);
}

int sq_app_ids_add(sq_app_ids *s, int64_t id)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        int64_t *v = realloc(s->v, cap * sizeof *v);
        if (!v) return SQ_ERR_NOMEM;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = id;
    return SQ_OK;
}

/* id as one of the configuration's runs (of ids, and of all). */
static int keep_run(sq_app_demo *d, sq_app_ids *ids, int64_t id, sq_error *err)
{
    if ((ids && sq_app_ids_add(ids, id)) || sq_app_ids_add(&d->all, id))
        return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    return SQ_OK;
}

/* ------------------------------------------------------------------------ */
/* The output directory, one writer at a time                               */
/* ------------------------------------------------------------------------ */

static int make_dir(const char *path, sq_error *err)
{
    if (mkdir(path, 0777) == 0 || errno == EEXIST) {
        struct stat sb;
        if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return SQ_OK;
        return sq_error_set(err, SQ_ERR_IO, "--out %s: not a directory", path);
    }
    return sq_error_set(err, SQ_ERR_IO, "--out %s: cannot create: %s", path, strerror(errno));
}

/* Locks OUT/.shardq-demo.lock for the life of this demo: two demos in one
** directory would delete each other's figures and mix their runs. */
static int lock_out(sq_app_demo *d, sq_error *err)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/.shardq-demo.lock", d->out);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return sq_error_set(err, SQ_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char buf[64] = "", who[48] = "";
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        long pid = 0;
        if (n > 0) buf[n] = '\0', sscanf(buf, "pid %ld", &pid);
        close(fd);
        if (e != EWOULDBLOCK)
            return sq_error_set(err, SQ_ERR_IO, "%s: cannot lock: %s", path, strerror(e));
        if (pid > 0) snprintf(who, sizeof who, " (pid %ld)", pid);
        return sq_error_set(err, SQ_ERR_BUSY, "--out %s: another demo%s is writing into this "
                            "directory; wait for it to finish, or give another --out", d->out,
                            who);
    }
    char text[32];
    int len = snprintf(text, sizeof text, "pid %ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)len, 0) != len) {
        int rc = sq_error_set(err, SQ_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
        close(fd);
        return rc;
    }
    d->lock = fd;
    return SQ_OK;
}

/* The corpus of every run: --corpus, else $SHARDQ_CORPUS, else the
** default, as `shardq train` takes it. */
static int find_corpus(sq_app_demo *d, const char *given, sq_error *err)
{
    if (given) {
        if (access(given, R_OK) != 0)
            return sq_error_set(err, SQ_ERR_IO, "--corpus %s: %s", given, strerror(errno));
        d->corpus_src = given;
        return SQ_OK;
    }
    const char *env = getenv("SHARDQ_CORPUS");
    d->corpus_src = env && *env ? env : SQ_CORPUS_DEFAULT;
    if (access(d->corpus_src, R_OK) != 0)
        return sq_error_set(err, SQ_ERR_NOTFOUND, "the default corpus %s is missing: install the "
                            "Debian package fortunes (./bootstrap --deps does), or give a text "
                            "file or directory with --corpus PATH", d->corpus_src);
    return SQ_OK;
}

int sq_app_demo_open(const sq_app_demo_opts *o, sq_app_demo **out, sq_error *err)
{
    sq_app_demo *d = calloc(1, sizeof *d);
    *out = NULL;
    if (!d) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    d->steps = o->steps, d->tiny = o->tiny, d->lock = -1;
    int rc = find_corpus(d, o->corpus, err);
    if (!rc) rc = make_dir(o->out, err);
    /* absolute, so that the recipes written into it are read from anywhere */
    if (!rc && !realpath(o->out, d->out))
        rc = sq_error_set(err, SQ_ERR_IO, "--out %s: %s", o->out, strerror(errno));
    if (!rc) rc = lock_out(d, err);
    if (rc) {
        free(d);
        return rc;
    }
    snprintf(d->db, sizeof d->db, "%s/shardq.db", d->out);
    snprintf(d->report, sizeof d->report, "%s/report", d->out);
    snprintf(d->every, sizeof d->every, "%d", d->steps / 4);
    d->t0 = sq_clock_s();
    *out = d;
    return SQ_OK;
}

const char *sq_app_demo_dir(const sq_app_demo *d) { return d->out; }
const char *sq_app_demo_db(const sq_app_demo *d) { return d->db; }
const char *sq_app_demo_report_dir(const sq_app_demo *d) { return d->report; }
const char *sq_app_demo_line(const sq_app_demo *d, int i) { return d->lines[i]; }
double sq_app_demo_elapsed(const sq_app_demo *d) { return sq_clock_s() - d->t0; }

void sq_app_demo_close(sq_app_demo *d)
{
    if (!d) return;
    free(d->replays.v), free(d->trains.v), free(d->all.v);
    if (d->lock >= 0) close(d->lock);
    free(d);
}

/* ------------------------------------------------------------------------ */
/* The corpus                                                               */
/* ------------------------------------------------------------------------ */

/* The corpus's bytes in the order it was read: the loader deals them into
** training and validation blocks (corpus.h), and this deals them back. */
static void join_blocks(const sq_corpus *c, uint8_t *all)
{
    size_t len = c->ntrain + c->nval, at = 0, ti = 0, vi = 0;
    size_t block = len >= 10 * (size_t)SQ_CORPUS_BLOCK ? SQ_CORPUS_BLOCK : len / 10;
    for (size_t k = 0; at < len; k++) {
        size_t n = len - at < block ? len - at : block;
        if (k % 10 == 9) memcpy(all + at, c->val + vi, n), vi += n;
        else memcpy(all + at, c->train + ti, n), ti += n;
        at += n;
    }
}

/* Whether the file at path holds exactly data[0..len). */
static int holds(const char *path, const uint8_t *data, size_t len)
{
    /* a regular file, opened without blocking (a FIFO put there would hang
    ** fopen); anything else is not the copy, and writing it says why */
    sq_input in;
    FILE *f = sq_input_fopen(path, 0, &in, NULL);
    if (!f) return 0;
    uint8_t buf[65536];
    size_t at = 0, n;
    int same = 1;
    while (same && (n = fread(buf, 1, sizeof buf, f)) > 0) {
        same = at + n <= len && memcmp(buf, data + at, n) == 0;
        at += n;
    }
    fclose(f);
    return same && at == len;
}

int sq_app_demo_write(const char *path, const void *data, size_t len, sq_error *err)
{
    sq_wfile w;
    int rc = sq_wfile_open(&w, path, err);
    if (rc) return rc;
    sq_wfile_write(&w, data, len);
    return sq_wfile_commit(&w, err);
}

/* The copy at d->corpus must train exactly like the original c. */
static int check_copy(const sq_app_demo *d, const sq_corpus *c, sq_error *err)
{
    sq_corpus copy;
    int rc = sq_corpus_load(d->corpus, &copy, err);
    if (rc) return rc;
    if (copy.ntrain != c->ntrain || copy.nval != c->nval ||
        memcmp(copy.train, c->train, c->ntrain) || memcmp(copy.val, c->val, c->nval))
        rc = sq_error_set(err, SQ_ERR_CONFLICT, "%s: the copy of --corpus %s does not read as the "
                          "same text", d->corpus, d->corpus_src);
    sq_corpus_free(&copy);
    return rc;
}

/* Every run trains on OUT/corpus-HASH.txt, a copy of the corpus's bytes
** named by their hash: the recipes refer to it by that name (a path as
** written by the user could hold what the recipe reader takes for a
** comment, or be longer than its lines), and the keys of the runs, which
** hold its real path, change when the text does. */
static int take_corpus(sq_app_demo *d, sq_error *err)
{
    sq_corpus c;
    sq_error e = {0};
    if (sq_corpus_load(d->corpus_src, &c, &e))
        return sq_error_set(err, e.status, "--corpus: %s", sq_error_message(&e));
    size_t len = c.ntrain + c.nval;
    uint8_t *all = malloc(len);
    if (!all) {
        sq_corpus_free(&c);
        return sq_error_set(err, SQ_ERR_NOMEM, "--corpus %s: out of memory for %zu bytes",
                            d->corpus_src, len);
    }
    join_blocks(&c, all);
    uint64_t h = sq_fnv1a64(all, len, SQ_FNV1A64_BASIS);
    snprintf(d->corpus_name, sizeof d->corpus_name, "corpus-%016llx.txt", (unsigned long long)h);
    snprintf(d->corpus_id, sizeof d->corpus_id, "fnv1a64:%016llx:%zu", (unsigned long long)h,
             len);
    snprintf(d->corpus, sizeof d->corpus, "%s/%s", d->out, d->corpus_name);
    int rc = holds(d->corpus, all, len) ? SQ_OK : sq_app_demo_write(d->corpus, all, len, err);
    if (!rc) rc = check_copy(d, &c, err);
    if (!rc)
        sq_app_demo_say(d, SQ_APP_SAY_OUT, "corpus: %s, %zu bytes in %zu file%s, trained on as %s",
                        d->corpus_src, len, c.files, c.files == 1 ? "" : "s", d->corpus_name);
    free(all);
    sq_corpus_free(&c);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Phase 1: the capture                                                     */
/* ------------------------------------------------------------------------ */

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
static void capture_key(sq_app_demo *d)
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

static int step_capture(sq_app_demo *d, sq_error *err)
{
    phase(d, 1, "training the GPT under the baseline, capturing a trace of its weights and "
                "gradients");
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
    if ((rc = keep_run(d, &d->trains, d->capture_run, err))) return rc;
    link_trace(d);
    return SQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Phases 2 and 3: the sweeps                                               */
/* ------------------------------------------------------------------------ */

/* The done runs of every configuration of sw, into *ids (and d->all): a
** phase is done only when all of them are. */
static int recipe_runs(sq_app_demo *d, const sq_sweep *sw, sq_app_ids *ids, sq_error *err)
{
    sq_store *s;
    int rc = sq_store_open(d->db, SQ_STORE_BUSY_MS, 0, &s, err);
    if (rc) return rc;
    size_t missing = 0;
    for (size_t i = 0; i < sw->nruns && !rc; i++) {
        int64_t id;
        rc = sq_store_done_run_by_key(s, sw->runs[i].key, &id, err);
        if (!rc && id <= 0) missing++;
        else if (!rc) rc = keep_run(d, ids, id, err);
    }
    sq_store_close(s);
    if (!rc && missing)
        rc = sq_error_set(err, SQ_ERR_NOTFOUND, "%s: %zu of its %zu runs are not done in %s",
                          sw->path, missing, sw->nruns, d->db);
    return rc;
}

/* Recipe name, written into OUT as file, run through the sweep's pool
** (in this process: the demo's sweeps are its own, even under an MPI
** launcher), its runs added to ids. */
static int run_recipe(sq_app_demo *d, const char *name, const char *file, sq_app_ids *ids,
                      sq_error *err)
{
    sq_sweep sw;
    int rc = sq_app_demo_recipe(d, name, file, &sw, err);
    if (rc) return rc;
    fflush(stdout);
    sq_sweep_pool_opts o = {.db = d->db, .stale_after = -1, .ctx = d->ui ? d->ui->ctx : NULL,
                            .event = d->ui ? d->ui->pool : NULL};
    sq_sweep_pool_counts n;
    rc = sq_sweep_pool_run(&sw, &o, &n, err);
    /* the failures were said as they came (ui->pool) */
    if (!rc && n.done < sw.nruns) rc = sq_error_set(err, SQ_ERR_IO, "%s", "");
    if (!rc) rc = recipe_runs(d, &sw, ids, err);
    sq_sweep_free(&sw);
    return rc;
}

static int step_replays(sq_app_demo *d, sq_error *err)
{
    phase(d, 2, "sweeping bits x group sizes x Hadamard, and every preset over 3 seeds, on the "
                "trace");
    return run_recipe(d, "replays", "demo-replay.ini", &d->replays, err);
}

/* The main presets, then the baseline and sdp4bit again under seeds 2 and
** 3, so that the convergence line compares their difference with the
** spread of seeds (seed 1 is the capture run and the main sweep's). Two
** presets, not all: each run is a whole training, the demo's largest cost. */
static int step_training(sq_app_demo *d, sq_error *err)
{
    phase(d, 3, "training the same model under the main presets (same data, same seed)");
    int rc = run_recipe(d, "train", "demo-train.ini", &d->trains, err);
    if (rc) return rc;
    sq_app_demo_say(d, SQ_APP_SAY_OUT,
                    "\nthe baseline and sdp4bit under seeds 2 and 3, for the seeds' spread:");
    return run_recipe(d, "seeds", "demo-seeds.ini", &d->trains, err);
}

/* ------------------------------------------------------------------------ */
/* Phases 4 and 5: bench and model                                          */
/* ------------------------------------------------------------------------ */

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

static int step_bench(sq_app_demo *d, sq_error *err)
{
    phase(d, 4, "measuring the codec kernels beside the copy bandwidth");
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
    return keep_run(d, NULL, id, err);
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

static int step_model(sq_app_demo *d, sq_error *err)
{
    phase(d, 5, "predicting the speedup on the SDP4Bit A100 cluster (cost model)");
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
    return keep_run(d, NULL, id, err);
}

/* ------------------------------------------------------------------------ */
/* Phase 6: the report                                                      */
/* ------------------------------------------------------------------------ */

static int cmp_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* "id BETWEEN 1 AND 43 OR id IN (45, 49)": the runs of s as the report's
** filter, which reads well in the report (malloc'd). The report takes its
** filter as SQL, of ids only, which this writes as numbers. */
static char *id_condition(sq_app_ids *s)
{
    char *p = malloc(s->n * 48 + 16);
    if (!p) return NULL;
    qsort(s->v, s->n, sizeof *s->v, cmp_id);
    size_t len = 0, nsingle = 0;
    p[0] = '\0';
    for (size_t i = 0, j; i < s->n; i = j) {
        for (j = i + 1; j < s->n && s->v[j] == s->v[j - 1] + 1;) j++;
        if (j - i >= 3)
            len += (size_t)sprintf(p + len, "%sid BETWEEN %lld AND %lld", len ? " OR " : "",
                                   (long long)s->v[i], (long long)s->v[j - 1]);
        else
            nsingle += j - i;
    }
    if (nsingle) {
        len += (size_t)sprintf(p + len, "%sid IN (", len ? " OR " : "");
        size_t k = 0;
        for (size_t i = 0, j; i < s->n; i = j) {
            for (j = i + 1; j < s->n && s->v[j] == s->v[j - 1] + 1;) j++;
            if (j - i < 3)
                for (size_t m = i; m < j; m++)
                    len += (size_t)sprintf(p + len, "%s%lld", k++ ? ", " : "", (long long)s->v[m]);
        }
        sprintf(p + len, ")");
    }
    if (!s->n) sprintf(p, "id IN (0)");
    return p;
}

/* The report through report_write_opts, which says its own progress and
** faults and returns the command's exit status (0 done): the one call of
** it, to adapt when it returns a status and a sentence. */
static int write_report(const sq_app_demo *d, const report_options *o, sq_error *err)
{
    int code = report_write_opts(d->db, d->report, o);
    return code == 0 ? SQ_OK : sq_error_set(err, SQ_ERR_IO, "%s", "");
}

/* The report of this configuration's runs only: one database may hold
** several (another --steps, --tiny or corpus). */
static int step_report(sq_app_demo *d, sq_error *err)
{
    phase(d, 6, "writing the report");
    char *filter = id_condition(&d->all);
    if (!filter) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    int rc = sq_app_demo_summarize(d, err);
    if (!rc) rc = sq_app_demo_setup(d, err);
    if (!rc) {
        const char *summary[3] = {d->lines[0], d->lines[1], d->lines[2]};
        const char *setup[8];
        for (int i = 0; i < d->nsetup; i++) setup[i] = d->setup[i];
        report_options o = {.filter = filter, .summary = summary, .nsummary = 3,
                            .setup = setup, .nsetup = d->nsetup};
        rc = write_report(d, &o, err);
    }
    free(filter);
    return rc;
}

/* ------------------------------------------------------------------------ */

int sq_app_demo_run(sq_app_demo *d, const sq_app_demo_ui *ui, sq_error *err)
{
    d->ui = ui;
    int rc = take_corpus(d, err);
    if (rc) return rc;
    capture_key(d);
    sq_app_demo_say(d, SQ_APP_SAY_OUT, "configuration: %s", d->key);
    if (!(rc = step_capture(d, err)) && !(rc = step_replays(d, err)) &&
        !(rc = step_training(d, err)) && !(rc = step_bench(d, err)) &&
        !(rc = step_model(d, err)))
        rc = step_report(d, err);
    return rc;
}
