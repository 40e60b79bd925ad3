/*
** pool.c -- a sweep's process pool (sweep.h): every configuration not yet
** done run in a child of its own, several at a time, waiting for the keys
** that other processes hold; `shardq sweep` and `shardq demo` run their
** sweeps through it, and say what it reports.
**
** Each configuration carries a key; the job runner skips a key the
** database already holds as done, and replaces one left 'running' by a
** process that is gone. So a pool killed at any moment (SIGKILL included:
** its children die with it, PR_SET_PDEATHSIG) resumes when run again, and
** two pools can share a database.
**
** The children are forks that run their job, not new programs: libgomp is
** not fork-safe, so the calling process must never have run an OpenMP
** parallel region before (sq_sweep_spawn). Nothing here does: the store's
** bookkeeping is serial.
*/
#define _GNU_SOURCE /* mkostemp, O_TMPFILE */
#include "sq_clock.h"
#include "shardq/store.h"
#include "shardq/sweep.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct child {
    pid_t pid;
    size_t run;
    int log; /* its stderr, shown when it fails: a file without a name (-1: none) */
    double started;
} child;

static void say(const sq_sweep *sw, const sq_sweep_pool_opts *o, sq_sweep_pool_event *e)
{
    if (o->event) o->event(o->ctx, sw, e);
}

static void note(const sq_sweep *sw, const sq_sweep_pool_opts *o, const char *message)
{
    sq_sweep_pool_event e = {.what = SQ_SWEEP_POOL_NOTE, .message = message};
    say(sw, o, &e);
}

static int ncores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void sq_sweep_pool_left_running(const sq_sweep *sw, const sq_sweep_pool_opts *o)
{
    sq_sweep_stale st[10];
    long n = sq_sweep_left_running(o->db, sw, st, 10, NULL);
    if (n <= 0) return;
    sq_sweep_pool_event e = {.what = SQ_SWEEP_POOL_LEFT_RUNNING, .stale = st,
                             .nstale = n < 10 ? (size_t)n : 10, .count = n};
    say(sw, o, &e);
}

/* A file for a child's stderr that no exit of the pool can leave behind:
** O_TMPFILE makes one without a name; where the file system cannot, the
** name of a new file is removed at once. Close-on-exec, so that a child
** inherits none but its own (dup2 onto its stderr). -1 when none can be
** made: the child's messages are then lost, not the run. */
static int open_log(void)
{
    const char *tmp = getenv("TMPDIR");
    const char *dir = tmp && *tmp ? tmp : "/tmp";
    int fd = -1;
#ifdef O_TMPFILE
    fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) return fd;
#endif
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/shardq-sweep-XXXXXX", dir) >= (int)sizeof path) return -1;
    fd = mkostemp(path, O_CLOEXEC);
    if (fd >= 0) unlink(path);
    return fd;
}

static void close_log(child *c)
{
    if (c->log >= 0) close(c->log);
    c->log = -1;
}

/* Starts the job of run i in a child; its stdout is discarded, its stderr
** kept. */
static pid_t spawn(const sq_sweep *sw, size_t i, const char *db, int threads, child *c,
                   sq_error *err)
{
    const sq_sweep_config *x = &sw->runs[i];
    c->log = open_log();
    sq_sweep_job job = {.cfg = x, .db = db, .key = x->key, .sweep = sw->name, .tensor_rows = 1,
                        .recipe = sw->text};
    return sq_sweep_spawn(&job, threads, 1, c->log, err);
}

/* ------------------------------------------------------------------------ */
/* Waiting for a configuration that another process holds                   */
/* ------------------------------------------------------------------------ */

static void waiting(const sq_sweep *sw, size_t i, const sq_sweep_pool_opts *o,
                    const sq_run_holder *h, double *said)
{
    double now = sq_clock_s();
    if (*said > 0 && now - *said < SQ_SWEEP_SAY_EVERY_S) return;
    sq_sweep_pool_event e = {.what = SQ_SWEEP_POOL_WAITING, .run = i, .holder = h,
                             .again = *said > 0};
    *said = now;
    say(sw, o, &e);
}

int sq_sweep_pool_may_retry(sq_store *s, const sq_sweep *sw, size_t i,
                            const sq_sweep_pool_opts *o, double *said)
{
    const sq_sweep_config *x = &sw->runs[i];
    sq_run_holder h;
    if (!s || sq_store_key_holder(s, x->key, &h)) return 1;
    if (h.id == 0 || strcmp(h.status, "running") != 0 || h.state == SQ_PROC_GONE) return 1;
    int stale = o->stale_after >= 0 && !isnan(h.idle_s) && h.idle_s >= o->stale_after;
    if (h.state != SQ_PROC_ELSEWHERE || !(o->takeover || stale)) {
        waiting(sw, i, o, &h, said);
        return 0;
    }
    char host[256] = "?", why[768], idle[32] = "?";
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    if (!isnan(h.idle_s)) snprintf(idle, sizeof idle, "%.0f s", h.idle_s);
    /* the sentence the taken run is stored 'failed' with */
    if (o->takeover)
        snprintf(why, sizeof why, "taken over by shardq sweep on %s (pid %lld): --takeover", host,
                 (long long)getpid());
    else
        snprintf(why, sizeof why, "taken over by shardq sweep on %s (pid %lld): no write for %s "
                 "(--stale-after %g)", host, (long long)getpid(), idle, o->stale_after);
    int t = sq_store_run_takeover(s, &h, why);
    if (t < 0) {
        note(sw, o, sq_store_error(s));
    } else if (t == 0) {
        sq_sweep_pool_event e = {.what = SQ_SWEEP_POOL_TAKEOVER, .run = i, .holder = &h,
                                 .takeover = o->takeover};
        say(sw, o, &e);
    }
    return 1;
}

static sq_store *open_store(const sq_sweep *sw, const sq_sweep_pool_opts *o)
{
    sq_store *s = NULL;
    sq_error err = {0};
    if (sq_store_open(o->db, 0, 0, &s, &err)) note(sw, o, sq_error_message(&err));
    return s;
}

/* The first run of those another process held that may start again now,
** or sw->nruns when none. */
static size_t next_held(const sq_sweep *sw, const sq_sweep_pool_opts *o, unsigned char *busy,
                        double *said)
{
    sq_store *s = open_store(sw, o);
    size_t i = sw->nruns;
    for (size_t k = 0; k < sw->nruns && i == sw->nruns; k++)
        if (busy[k] && sq_sweep_pool_may_retry(s, sw, k, o, &said[k])) {
            busy[k] = 0;
            i = k;
        }
    sq_store_close(s);
    return i;
}

/* ------------------------------------------------------------------------ */
/* The pool                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct pool {
    const sq_sweep *sw;
    const sq_sweep_pool_opts *o;
    unsigned char *done, *busy;
    double *said;
    child *kids;
    int jobs, threads, running;
    size_t next;
    sq_sweep_pool_counts n;
} pool;

/* The next run to start: first those never tried, then, when nothing else
** is left, those another process held, as soon as they are free. *i is
** sw->nruns when there is none now; returns 0 when there will be none. */
static int pick(pool *p, size_t *i)
{
    const sq_sweep *sw = p->sw;
    *i = sw->nruns;
    while (p->next < sw->nruns && p->done[p->next]) p->next++;
    if (p->next < sw->nruns) {
        *i = p->next++;
        return 1;
    }
    if (p->running) return 0;
    int waiting = 0;
    for (size_t k = 0; k < sw->nruns; k++) waiting |= p->busy[k];
    if (!waiting) return 0;
    *i = next_held(sw, p->o, p->busy, p->said);
    return 1;
}

/* Fills the free slots. */
static int fill(pool *p, sq_error *err)
{
    while (p->running < p->jobs) {
        size_t i;
        if (!pick(p, &i)) break;
        if (i == p->sw->nruns) {
            struct timespec ts = {0, 500000000};
            nanosleep(&ts, NULL);
            continue;
        }
        int slot = 0;
        while (p->kids[slot].pid) slot++;
        child *c = &p->kids[slot];
        c->run = i;
        c->started = sq_clock_s();
        c->pid = spawn(p->sw, i, p->o->db, p->threads, c, err);
        if (c->pid < 0) {
            c->pid = 0;
            close_log(c);
            return err->status ? err->status : SQ_ERR_IO;
        }
        p->running++;
    }
    return SQ_OK;
}

/* What child c said on its stderr, up to len - 1 bytes. */
static void read_log(const child *c, char *buf, size_t len)
{
    buf[0] = '\0';
    if (c->log < 0) return;
    ssize_t n = pread(c->log, buf, len - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
}

/* Child c ended with status. */
static void reap(pool *p, child *c, int status)
{
    const sq_sweep *sw = p->sw;
    p->running--;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code == SQ_SWEEP_EXIT_HELD) {
        /* say at once what it waits for (or take it over) */
        sq_store *s = open_store(sw, p->o);
        p->busy[c->run] = 1;
        if (sq_sweep_pool_may_retry(s, sw, c->run, p->o, &p->said[c->run])) p->said[c->run] = 0;
        sq_store_close(s);
        return;
    }
    char log[8192] = "";
    p->n.finished++;
    if (code == 0) {
        p->done[c->run] = 1;
        p->n.done++;
    } else {
        p->n.failed++;
        read_log(c, log, sizeof log);
    }
    sq_sweep_pool_event e = {.what = SQ_SWEEP_POOL_FINISHED, .run = c->run, .code = code,
                             .seconds = sq_clock_s() - c->started, .log = log,
                             .counts = &p->n};
    say(sw, p->o, &e);
}

static int run_pool(pool *p, sq_error *err)
{
    for (;;) {
        int rc = fill(p, err);
        if (rc) return rc;
        if (!p->running) return SQ_OK;
        int status;
        pid_t pid = wait(&status);
        if (pid < 0) {
            if (errno == EINTR) continue;
            return sq_error_set(err, SQ_ERR_IO, "wait: %s", strerror(errno));
        }
        int slot = 0;
        while (slot < p->jobs && p->kids[slot].pid != pid) slot++;
        if (slot == p->jobs) continue;
        reap(p, &p->kids[slot], status);
        close_log(&p->kids[slot]);
        p->kids[slot].pid = 0;
    }
}

int sq_sweep_pool_run(const sq_sweep *sw, const sq_sweep_pool_opts *o,
                      sq_sweep_pool_counts *counts, sq_error *e)
{
    sq_error mine = {0};
    sq_error *err = e ? e : &mine;
    pool p = {.sw = sw, .o = o};
    memset(counts, 0, sizeof *counts);
    size_t n = sw->nruns ? sw->nruns : 1;
    p.done = calloc(n, 1), p.busy = calloc(n, 1);
    p.said = calloc(n, sizeof *p.said);
    int rc = SQ_ERR_NOMEM;
    if (!p.done || !p.busy || !p.said) {
        sq_error_set(err, rc, "out of memory");
        goto out;
    }
    if ((rc = sq_sweep_load_done(o->db, sw, p.done, err))) goto out;
    sq_sweep_pool_left_running(sw, o);
    for (size_t i = 0; i < sw->nruns; i++) p.n.already += p.done[i];
    p.n.done = p.n.already;
    p.n.todo = sw->nruns - p.n.already;
    /* a training run keeps every core busy itself */
    p.jobs = o->jobs ? o->jobs : sw->jobs ? sw->jobs : sw->command == SQ_SWEEP_TRAIN ? 1 : ncores();
    p.threads = ncores() / p.jobs > 1 ? ncores() / p.jobs : 1;
    p.kids = calloc((size_t)p.jobs, sizeof *p.kids);
    if (!p.kids) {
        rc = sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int k = 0; k < p.jobs; k++) p.kids[k].log = -1;
    sq_sweep_pool_event begin = {.what = SQ_SWEEP_POOL_BEGIN, .jobs = p.jobs, .counts = &p.n};
    say(sw, o, &begin);
    rc = run_pool(&p, err);
    if (rc == SQ_OK) {
        sq_sweep_pool_event end = {.what = SQ_SWEEP_POOL_END, .counts = &p.n};
        say(sw, o, &end);
    }
out:
    if (p.kids)
        for (int k = 0; k < p.jobs; k++)
            if (p.kids[k].pid) {
                kill(p.kids[k].pid, SIGTERM);
                waitpid(p.kids[k].pid, NULL, 0);
                close_log(&p.kids[k]);
            }
    *counts = p.n;
    free(p.kids), free(p.done), free(p.busy), free(p.said);
    return rc;
}
