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
** Every phase calls its module directly: the training job (the capture,
** demo_capture.c), the sweep's process pool over the recipes of
** experiments/demo/ (built in: demo_recipes.c), sq_bench_record and
** sq_cost_record (demo_measure.c), and the report (here). Every
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
#define _GNU_SOURCE /* realpath */
#include "app/demo_internal.h"
#include "report/report.h"
#include "sq_clock.h"
#include "shardq/train.h"
#include "trace/wfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* The report says its own progress and the faults of each figure as they
** happen; a failure it returns with an empty sentence is one it has said. */
static int write_report(const sq_app_demo *d, const report_options *o, sq_error *err)
{
    return report_write_opts(d->db, d->report, o, err);
}

/* The report of this configuration's runs only: one database may hold
** several (another --steps, --tiny or corpus). */
static int step_report(sq_app_demo *d, sq_error *err)
{
    sq_app_demo_phase(d, 6, "writing the report");
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
    int rc = sq_app_demo_take_corpus(d, err);
    if (rc) return rc;
    sq_app_demo_capture_key(d);
    sq_app_demo_say(d, SQ_APP_SAY_OUT, "configuration: %s", d->key);
    if (!(rc = sq_app_demo_capture(d, err)) && !(rc = sq_app_demo_replays(d, err)) &&
        !(rc = sq_app_demo_training(d, err)) && !(rc = sq_app_demo_bench(d, err)) &&
        !(rc = sq_app_demo_predict(d, err)))
        rc = step_report(d, err);
    return rc;
}

