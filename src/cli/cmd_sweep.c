/*
** cmd_sweep.c -- `shardq sweep RECIPE.ini`: every configuration of a recipe
** (sweep.h) run by the sweep library's job runner in a child process of its
** own, several at a time.
**
** Each configuration carries a key; the job runner skips a key the
** database already holds as done, and replaces one left 'running' by a
** process that is gone. So a sweep killed at any moment (SIGKILL included:
** its children die with it, PR_SET_PDEATHSIG) resumes by running the same
** command again, and two sweeps can share a database. A key that another
** live process holds (exit status 75), or a process on another host that
** cannot be checked, is waited for, saying so on stderr; --takeover and
** --stale-after end the wait for the latter.
**
** The children's stderr goes to files that have no name (O_TMPFILE, or
** unlinked as soon as made), so that no kill of the sweep, SIGKILL
** included, leaves one behind.
**
** The children are forks that run their job, not new programs: libgomp is
** not fork-safe, so this process must never run an OpenMP parallel region
** before it forks (its thread pool would not survive into the children,
** whose first parallel region would hang). Nothing here does: reading the
** recipe, the store's bookkeeping and the progress lines are serial, and
** `shardq demo` runs its own training in a child of its own for that
** reason. The children set their thread count by call (the environment,
** OMP_NUM_THREADS and OMP_WAIT_POLICY, was read when the program started:
** export OMP_WAIT_POLICY=passive for runs side by side on few cores).
**
** Under mpirun (--transport mpi, or auto with more than one rank) the
** configurations go out to the ranks instead (sq_mpi_sweep in
** libshardq_mpi): rank 0 owns the database and hands them out, the other
** ranks run them in process, one at a time each, and nothing forks.
*/
#define _GNU_SOURCE /* mkostemp */
#include "cli.h"
#include "progress.h"
#include "ranks.h"
#include "sq_clock.h"
#include "shardq/store.h"
#include "shardq/sweep.h"


#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef SHARDQ_HAVE_MPI
#include "shardq/mpi.h"

#include <sys/prctl.h>
#endif

static const char sweep_usage[] =
    "usage: shardq sweep [options] RECIPE.ini\n"
    "\n"
    "Runs every configuration of a recipe's grid (README, \"Sweeps\") as a\n"
    "'shardq replay' (or, with command = train, a 'shardq train'), several at\n"
    "once, every result into the database. A\n"
    "configuration already done there is skipped, so a sweep that was\n"
    "interrupted (even by SIGKILL) completes by running the same command again,\n"
    "and only what is missing runs. A recipe holds at most 100000\n"
    "configurations, its grids together.\n"
    "\n"
    "options:\n"
    "  --db FILE        the database (default $SHARDQ_DB, else shardq.db)\n"
    "  --jobs N         runs at once (default: the recipe's jobs, else one\n"
    "                   per core for replays, 1 for training)\n"
    "  --trace PATH     replay this trace instead of the recipe's\n"
    "  --takeover       run here a configuration that a process on another\n"
    "                   host left 'running' (that process cannot be checked\n"
    "                   from here: say so only when it is gone)\n"
    "  --stale-after S  the same, once that run has not written for S seconds\n"
    "  --transport T    mpi: hand the configurations out to the ranks of an\n"
    "                   mpirun (rank 0 keeps the database, the others run\n"
    "                   them); inproc: this process runs the sweep; auto\n"
    "                   (default): mpi when started by an MPI launcher with\n"
    "                   more than one rank\n"
    "  --list           print the configurations and exit\n"
    "  -q, --quiet      no progress lines\n"
    "  -h, --help       this text\n"
    "\n"
    "On a terminal a progress bar with the ETA shows; otherwise one line per\n"
    "finished configuration. A configuration that another process is running\n"
    "is waited for, and stderr says which (run, key, host, pid) at once and\n"
    "every minute. Exit status: 0 when every configuration is done,\n"
    "1 when some failed (their errors are printed), 2 on a bad recipe.\n"
    "\n"
    "Across ranks: mpirun -np R shardq sweep RECIPE.ini. Rank 0 only\n"
    "coordinates; ranks 1 .. R-1 run one configuration at a time each (so\n"
    "--jobs does not apply), into private files that rank 0 imports, each run\n"
    "in one transaction. With one rank the sweep is the local one (with\n"
    "--transport mpi, rank 0 runs them itself, one at a time).\n";

typedef struct child {
    pid_t pid;
    size_t run;
    int log; /* its stderr, shown when it fails: a file without a name (-1: none) */
    double started;
} child;

static int ncores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Says which runs of the sweep processes that are gone left 'running' (they
** run again), a killed sweep's or a reused pid's: up to ten, then a count. */
static void say_left_running(const char *db, const sq_sweep *r, int quiet)
{
    sq_sweep_stale st[10];
    if (quiet) return;
    long n = sq_sweep_left_running(db, r, st, 10, NULL);
    for (long i = 0; i < n && i < 10; i++)
        fprintf(stderr, "shardq sweep: run %lld was left 'running' by pid %lld on %s (since "
                "%s), a process that is gone: it runs again\n",
                (long long)st[i].id, (long long)st[i].pid, st[i].host, st[i].started);
    if (n > 10) fprintf(stderr, "shardq sweep: ... and %ld more such runs\n", n - 10);
}

/* A file for a child's stderr that no exit of the sweep can leave behind:
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

/* Starts the job of run i in a child; its stdout is discarded, its stderr
** kept. */
static pid_t spawn(const sq_sweep *r, size_t i, const char *db, int threads, child *c)
{
    const sq_sweep_config *x = &r->runs[i];
    c->log = open_log();
    sq_sweep_job job = {.cfg = x, .db = db, .key = x->key, .sweep = r->name, .tensor_rows = 1,
                        .recipe = r->text};
    sq_error err = {0};
    pid_t pid = sq_sweep_spawn(&job, threads, 1, c->log, &err);
    if (pid < 0) fprintf(stderr, "shardq sweep: %s\n", sq_error_message(&err));
    return pid;
}

/* The first 20 lines of what a failed child said. */
static void show_log(const child *c, const char *label)
{
    fprintf(stderr, "shardq sweep: failed: %s\n", label);
    if (c->log < 0) return;
    char buf[8192];
    ssize_t n = pread(c->log, buf, sizeof buf - 1, 0);
    if (n <= 0) return;
    buf[n] = '\0';
    int lines = 0;
    for (char *p = buf; *p && lines < 20; lines++) {
        size_t k = strcspn(p, "\n");
        fprintf(stderr, "  %.*s\n", (int)k, p);
        p += k + (p[k] == '\n');
    }
}

static void close_log(child *c)
{
    if (c->log >= 0) close(c->log);
    c->log = -1;
}

/* ------------------------------------------------------------------------ */
/* Waiting for a configuration that another process holds                   */
/* ------------------------------------------------------------------------ */

/* Seconds between two "still waiting" lines about one configuration. */
#define SAY_EVERY_S 60.0

typedef struct wait_opts {
    int takeover;       /* --takeover */
    double stale_after; /* --stale-after seconds; < 0: not given */
} wait_opts;

static void say_waiting(const sq_sweep_config *x, const sq_run_holder *h, double *said)
{
    double now = sq_clock_s();
    if (*said > 0 && now - *said < SAY_EVERY_S) return;
    const char *how = *said > 0 ? "still waiting" : "waiting";
    *said = now;
    if (h->state == SQ_PROC_ALIVE) {
        fprintf(stderr, "shardq sweep: %s for %s: run %lld (key %s) is under way in pid %lld on "
                "this host (%s) since %s\n", how, x->label, (long long)h->id, x->key,
                (long long)h->pid, h->host, h->started);
        return;
    }
    char idle[32] = "?";
    if (!isnan(h->idle_s)) snprintf(idle, sizeof idle, "%.0f s", h->idle_s);
    fprintf(stderr, "shardq sweep: %s for %s: run %lld (key %s) is under way on host %s, pid "
            "%lld, since %s, last write %s ago; that host cannot be checked from here: "
            "--takeover runs it here (when that process is gone), --stale-after SECONDS once "
            "it has not written for that long\n",
            how, x->label, (long long)h->id, x->key, h->host, (long long)h->pid, h->started,
            idle);
}

/* Whether run x, which another process held when its child ran, may start
** again: its key is free now (done, failed, or its process gone), or its
** run was on another host and is taken over (--takeover, or no write for
** --stale-after seconds). Otherwise says what it waits for (at once, then
** every SAY_EVERY_S) and returns 0. On an error the child is left to say it. */
static int may_retry(sq_store *s, const sq_sweep_config *x, const wait_opts *w, double *said)
{
    sq_run_holder h;
    if (!s || sq_store_key_holder(s, x->key, &h)) return 1;
    if (h.id == 0 || strcmp(h.status, "running") != 0 || h.state == SQ_PROC_GONE) return 1;
    int stale = w->stale_after >= 0 && !isnan(h.idle_s) && h.idle_s >= w->stale_after;
    if (h.state != SQ_PROC_ELSEWHERE || !(w->takeover || stale)) {
        say_waiting(x, &h, said);
        return 0;
    }
    char host[256] = "?", why[768], idle[32] = "?";
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    if (!isnan(h.idle_s)) snprintf(idle, sizeof idle, "%.0f s", h.idle_s);
    if (w->takeover)
        snprintf(why, sizeof why, "taken over by shardq sweep on %s (pid %lld): --takeover", host,
                 (long long)getpid());
    else
        snprintf(why, sizeof why, "taken over by shardq sweep on %s (pid %lld): no write for %s "
                 "(--stale-after %g)", host, (long long)getpid(), idle, w->stale_after);
    int t = sq_store_run_takeover(s, &h, why);
    if (t < 0)
        fprintf(stderr, "shardq sweep: %s\n", sq_store_error(s));
    else if (t == 0)
        fprintf(stderr, "shardq sweep: taking over %s: run %lld (key %s) of pid %lld on host %s, "
                "under way since %s, last write %s ago (%s)\n", x->label, (long long)h.id, x->key,
                (long long)h.pid, h.host, h.started, idle,
                w->takeover ? "--takeover" : "--stale-after");
    return 1;
}

static sq_store *open_quietly(const char *db)
{
    sq_store *s = NULL;
    sq_error err = {0};
    if (sq_store_open(db, 0, 0, &s, &err))
        fprintf(stderr, "shardq sweep: %s\n", sq_error_message(&err));
    return s;
}

/* The first run of those another process held that may start again now,
** or r->nruns when none. */
static size_t next_held(const char *db, const sq_sweep *r, unsigned char *busy, double *said,
                        const wait_opts *w)
{
    sq_store *s = open_quietly(db);
    size_t i = r->nruns;
    for (size_t k = 0; k < r->nruns && i == r->nruns; k++)
        if (busy[k] && may_retry(s, &r->runs[k], w, &said[k])) {
            busy[k] = 0;
            i = k;
        }
    sq_store_close(s);
    return i;
}

/* A recipe that does not load; `who` prefixes the sentence ("" or "rank
** 2 (host): "). */
static void say_load_error(const sq_error *err, const char *who)
{
    /* the library knows the recipe; the command also has an option for it */
    const char *m = sq_error_message(err);
    size_t len = strlen(m);
    int no_trace = len > 19 && !strcmp(m + len - 19, "(give trace = PATH)");
    fprintf(stderr, "shardq sweep: %s%.*s%s\n", who, (int)(no_trace ? len - 1 : len), m,
            no_trace ? ", or --trace)" : "");
}

static void print_list(const sq_sweep *r)
{
    for (size_t i = 0; i < r->nruns; i++) {
        const sq_sweep_config *x = &r->runs[i];
        printf("%zu\t%s\t%s", i + 1, x->label,
               x->trace ? x->trace : x->corpus ? x->corpus : "(default corpus)");
        for (int k = 0; k < x->noptions; k++) printf(" --%s", x->options[k]);
        printf("\n");
    }
    if (r->ninvalid)
        printf("# %zu combinations left out, e.g.: %s\n", r->ninvalid, r->first_invalid);
    if (r->nduplicate)
        printf("# %zu duplicates (the settings of an earlier configuration: one run), e.g.: %s\n",
               r->nduplicate, r->first_duplicate ? r->first_duplicate : "");
}

/* What the counts leave out, for the first and last lines: configurations
** that repeat another's settings are one run, and said so, so that the
** counts match the runs the database will hold. */
static const char *dup_note(const sq_sweep *r, char *buf, size_t len)
{
    if (!r->nduplicate) return "";
    snprintf(buf, len, "; %zu more %s the settings of one of these: run once (see --list)",
             r->nduplicate, r->nduplicate == 1 ? "repeats" : "repeat");
    return buf;
}

#ifdef SHARDQ_HAVE_MPI
/* ------------------------------------------------------------------------ */
/* Across ranks                                                             */
/* ------------------------------------------------------------------------ */

/* Rank 0's view of a sweep across ranks: the hooks of sq_mpi_sweep. */
typedef struct ranks_ctx {
    const sq_sweep *r;
    const wait_opts *w;
    sq_store *s;         /* for the ready hook: who holds a key */
    double *said;        /* per run: when its wait was last said */
    int quiet;
    sq_progress *bar;
    size_t todo, finished, failed;
    double t0;
} ranks_ctx;

/* Before a configuration goes out: done meanwhile (skip), held by a live
** process (wait, saying so at once and every minute, or take it over
** with --takeover or --stale-after), or free. */
static int ranks_ready(void *ctx, size_t i)
{
    ranks_ctx *c = ctx;
    const sq_sweep_config *x = &c->r->runs[i];
    sq_run_holder h;
    if (c->s && !sq_store_key_holder(c->s, x->key, &h) && h.id && !strcmp(h.status, "done"))
        return SQ_MPI_SWEEP_SKIP;
    return may_retry(c->s, x, c->w, &c->said[i]) ? SQ_MPI_SWEEP_GO : SQ_MPI_SWEEP_WAIT;
}

/* One line per finished configuration, as a local sweep prints, with the
** rank that ran it; a failure's sentence first. */
static void ranks_event(void *ctx, const sq_mpi_sweep_event *e)
{
    ranks_ctx *c = ctx;
    const sq_sweep_config *x = &c->r->runs[e->run];
    const char *word = NULL;
    switch (e->what) {
    case SQ_MPI_SWEEP_DONE: word = "done"; break;
    case SQ_MPI_SWEEP_FAILED:
        word = "FAILED";
        c->failed++;
        sq_progress_pause(c->bar);
        fprintf(stderr, "shardq sweep: failed: %s (rank %d on %s)\n  %s\n", x->label, e->rank,
                e->host, e->error);
        break;
    case SQ_MPI_SWEEP_ELSEWHERE: word = "skipped (done by another process)"; break;
    case SQ_MPI_SWEEP_HELD:
        if (e->rank >= 0 && !c->quiet) {
            /* its result came back after another process began the key */
            sq_progress_pause(c->bar);
            fprintf(stderr, "shardq sweep: %s: another process began it meanwhile (run %lld): "
                    "it runs again once that one ends\n", x->label, (long long)e->id);
        }
        return;
    default: return;
    }
    c->finished++;
    if (c->bar) {
        sq_progress_update(c->bar, c->finished);
        return;
    }
    if (c->quiet) return;
    double el = sq_clock_s() - c->t0;
    char where[320] = "";
    if (e->rank >= 0)
        snprintf(where, sizeof where, "%.1f s on rank %d, %s, ", e->seconds, e->rank, e->host);
    fprintf(stderr, "[%zu/%zu] %s %s (%selapsed %.0f s, eta %.0f s)\n", c->finished, c->todo,
            word, x->label, where, el,
            c->finished < c->todo ? el / (double)c->finished * (double)(c->todo - c->finished)
                                  : 0.0);
}

/* A fault that ends the sweep on this rank: said, then every rank ended,
** since the others may wait for this one. */
static int ranks_fatal(const sq_error *err, int code)
{
    fprintf(stderr, "shardq sweep: %s\n", sq_error_message(err));
    fflush(stdout);
    fflush(stderr);
    sq_mpi_abort(code);
    return code;
}

/* `mpirun -np R shardq sweep RECIPE`: every rank loads the recipe; rank 0
** checks the database and coordinates (sq_mpi_sweep), the others run. */
static int sweep_ranks(const char *recipe, const char *trace, const char *db, int list,
                       int quiet, const wait_opts *w)
{
    int rank = 0, size = 1, all = 0;
    sq_error err = {0};
    if (sq_mpi_init(NULL, NULL, &rank, &size, &err)) {
        fprintf(stderr, "shardq sweep: %s\n", sq_error_message(&err));
        return CLI_RUNTIME;
    }
    /* a rank dies with its launcher, as a local sweep's jobs die with it:
    ** a SIGKILL of mpirun leaves no rank writing on */
    pid_t launcher = getppid();
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher) _exit(CLI_RUNTIME);
    char host[256] = "?", who[320] = "";
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    if (rank) snprintf(who, sizeof who, "rank %d (%s): ", rank, host);

    /* every rank reads the recipe; one message for a fault they share */
    sq_sweep r;
    sq_error lerr = {0};
    int loaded = sq_sweep_load(recipe, trace, &r, &lerr) == SQ_OK, first = 0;
    if (sq_mpi_all_ok(NULL, rank == 0 ? loaded : 1, &first, &err) ||
        sq_mpi_all_ok(NULL, loaded, &all, &err)) {
        if (loaded) sq_sweep_free(&r);
        return ranks_fatal(&err, CLI_RUNTIME);
    }
    if (!all) {
        if (!loaded && (rank == 0 || first)) say_load_error(&lerr, who);
        if (loaded) sq_sweep_free(&r);
        sq_mpi_finalize();
        return CLI_USAGE;
    }
    if (list) {
        if (rank == 0) print_list(&r);
        sq_sweep_free(&r);
        sq_mpi_finalize();
        return CLI_OK;
    }

    int rc = CLI_RUNTIME;
    unsigned char *done = NULL;
    double *said = NULL;
    ranks_ctx c = {.r = &r, .w = w, .quiet = quiet};
    int ready = 1;
    if (rank == 0) {
        /* the database is rank 0's alone: created or migrated here, once */
        done = calloc(r.nruns ? r.nruns : 1, 1);
        said = calloc(r.nruns ? r.nruns : 1, sizeof *said);
        if (!done || !said) {
            fprintf(stderr, "shardq sweep: out of memory\n");
            ready = 0;
        } else if (sq_sweep_load_done(db, &r, done, &err)) {
            fprintf(stderr, "shardq sweep: %s\n", sq_error_message(&err));
            ready = 0;
        } else if (sq_store_open(db, 0, 0, &c.s, &err)) {
            fprintf(stderr, "shardq sweep: %s\n", sq_error_message(&err));
            ready = 0;
        }
    }
    if (sq_mpi_all_ok(NULL, ready, &all, &err)) return ranks_fatal(&err, CLI_RUNTIME);
    if (!all) {
        sq_store_close(c.s);
        free(done), free(said);
        sq_sweep_free(&r);
        sq_mpi_finalize();
        return rank == 0 ? CLI_RUNTIME : CLI_OK;
    }
    size_t already = 0;
    char note[128];
    if (rank == 0) {
        say_left_running(db, &r, quiet);
        for (size_t i = 0; i < r.nruns; i++) already += done[i];
        c.said = said;
        c.todo = r.nruns - already;
        c.t0 = sq_clock_s();
        if (!quiet) {
            if (size > 1)
                fprintf(stderr, "shardq sweep: %s: %zu configurations, %zu already done, %zu to "
                        "run, across %d ranks: rank 0 hands them out and stores the results, "
                        "%d run%s them%s%s\n", r.name, r.nruns, already, c.todo, size, size - 1,
                        size > 2 ? "" : "s", r.ninvalid ? " (some combinations left out: see "
                                                          "--list)" : "",
                        dup_note(&r, note, sizeof note));
            else
                fprintf(stderr, "shardq sweep: %s: %zu configurations, %zu already done, %zu to "
                        "run, on 1 rank: it runs them, one at a time%s%s\n", r.name, r.nruns,
                        already, c.todo, r.ninvalid ? " (some combinations left out: see "
                                                       "--list)" : "",
                        dup_note(&r, note, sizeof note));
        }
        c.bar = quiet ? NULL : sq_progress_start(r.name, c.todo);
    }
    sq_mpi_sweep_opts o = {.db = db, .done = done, .threads = 0, .ctx = &c,
                           .ready = ranks_ready, .event = ranks_event};
    sq_mpi_sweep_counts n;
    if (sq_mpi_sweep(NULL, &r, &o, &n, &err)) {
        sq_progress_finish(c.bar);
        if (!n.together) return ranks_fatal(&err, CLI_RUNTIME);
        /* every rank stopped at the same check: no rank waits for another */
        if (!n.echo) fprintf(stderr, "shardq sweep: %s\n", sq_error_message(&err));
        rc = CLI_RUNTIME;
        goto done;
    }
    if (rank == 0) {
        sq_progress_finish(c.bar);
        size_t ndone = 0;
        for (size_t i = 0; i < r.nruns; i++) ndone += done[i];
        if (!quiet)
            fprintf(stderr, "shardq sweep: %s: %zu of %zu configurations done (%zu now, %zu "
                    "before, %zu by another process%s), %zu failed; see 'shardq db list --sweep "
                    "%s'\n", r.name, ndone, r.nruns, n.done, n.before, n.elsewhere,
                    dup_note(&r, note, sizeof note), n.failed, r.name);
        rc = ndone == r.nruns ? CLI_OK : CLI_RUNTIME;
    } else
        rc = CLI_OK;
done:
    sq_store_close(c.s);
    free(done), free(said);
    sq_sweep_free(&r);
    fflush(stdout);
    fflush(stderr);
    sq_mpi_finalize();
    return rc;
}
#endif

int cmd_sweep(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"db", required_argument, NULL, 'b'},   {"jobs", required_argument, NULL, 'j'},
        {"trace", required_argument, NULL, 't'}, {"list", no_argument, NULL, 'l'},
        {"quiet", no_argument, NULL, 'q'},      {"help", no_argument, NULL, 'h'},
        {"takeover", no_argument, NULL, 'T'},   {"stale-after", required_argument, NULL, 'S'},
        {"transport", required_argument, NULL, 'P'}, {NULL, 0, NULL, 0}};
    const char *db = cli_default_db(), *trace = NULL;
    uint64_t jobs = 0;
    int list = 0, quiet = 0, ch, J = 0, transport = CLI_TRANSPORT_AUTO;
    wait_opts w = {.takeover = 0, .stale_after = -1};
    optind = 1;
    while ((ch = getopt_long(argc, argv, "hq", longopts, NULL)) != -1) {
        switch (ch) {
        case 'b': db = optarg; break;
        case 'j':
            if (cli_parse_u64("sweep", "--jobs", optarg, 1024, &jobs)) return CLI_USAGE;
            break;
        case 't': trace = optarg; break;
        case 'T': w.takeover = 1; break;
        case 'S':
            if (cli_parse_double("sweep", "--stale-after", optarg, 0, 1e9, &w.stale_after))
                return CLI_USAGE;
            break;
        case 'P':
            if (cli_transport_parse("sweep", optarg, &transport)) return CLI_USAGE;
            if (transport == CLI_TRANSPORT_NCCL || transport == CLI_TRANSPORT_NCCL_INPROC) {
                /* a sweep hands out whole runs; each runs in one process */
                fprintf(stderr, "shardq sweep: --transport %s: a sweep runs over inproc, mpi or "
                        "auto\n", optarg);
                return CLI_USAGE;
            }
            break;
        case 'l': list = 1; break;
        case 'q': quiet = 1; break;
        case 'h': fputs(sweep_usage, stdout); return CLI_OK;
        default: fputs("Try 'shardq sweep --help'.\n", stderr); return CLI_USAGE;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "shardq sweep: expected one RECIPE.ini\nTry 'shardq sweep --help'.\n");
        return CLI_USAGE;
    }
    if (transport == CLI_TRANSPORT_AUTO)
        transport = cli_launched_many() ? CLI_TRANSPORT_MPI : CLI_TRANSPORT_INPROC;
    if (transport == CLI_TRANSPORT_MPI) {
        if (jobs) {
            fprintf(stderr, "shardq sweep: --jobs: not across ranks: each rank runs one "
                    "configuration at a time (start more ranks: mpirun -np N)\n");
            return CLI_USAGE;
        }
#ifdef SHARDQ_HAVE_MPI
        return sweep_ranks(argv[optind], trace, db, list, quiet, &w);
#else
        fprintf(stderr, "shardq sweep: --transport mpi: this shardq was built without MPI "
                "(install the Debian packages openmpi-bin and libopenmpi-dev, or run "
                "./bootstrap --deps, then ./configure and make again)\n");
        return CLI_USAGE;
#endif
    }
    sq_sweep r;
    sq_error err = {0};
    if (sq_sweep_load(argv[optind], trace, &r, &err)) {
        say_load_error(&err, "");
        return CLI_USAGE;
    }
    if (list) {
        print_list(&r);
        sq_sweep_free(&r);
        return CLI_OK;
    }
    int rc = CLI_RUNTIME;
    unsigned char *done = calloc(r.nruns, 1), *busy = calloc(r.nruns, 1);
    double *said = calloc(r.nruns, sizeof *said);
    child *kids = NULL;
    if (!done || !busy || !said) {
        fprintf(stderr, "shardq sweep: out of memory\n");
        goto out;
    }
    if (sq_sweep_load_done(db, &r, done, &err)) {
        fprintf(stderr, "shardq sweep: %s\n", sq_error_message(&err));
        goto out;
    }
    say_left_running(db, &r, quiet);
    size_t already = 0;
    char note[128];
    for (size_t i = 0; i < r.nruns; i++) already += done[i];
    /* a training run keeps every core busy itself */
    J = jobs ? (int)jobs : r.jobs ? r.jobs : r.command == SQ_SWEEP_TRAIN ? 1 : ncores();
    int threads = ncores() / J > 1 ? ncores() / J : 1;
    kids = calloc((size_t)J, sizeof *kids);
    if (!kids) goto out;
    for (int k = 0; k < J; k++) kids[k].log = -1;
    size_t todo = r.nruns - already;
    if (!quiet)
        fprintf(stderr, "shardq sweep: %s: %zu configurations, %zu already done, %zu to run, "
                "%d at a time%s%s\n", r.name, r.nruns, already, todo, J,
                r.ninvalid ? " (some combinations left out: see --list)" : "",
                dup_note(&r, note, sizeof note));
    sq_progress *bar = quiet ? NULL : sq_progress_start(r.name, todo);
    size_t next = 0, finished = 0, failed = 0, running = 0;
    double t0 = sq_clock_s();
    for (;;) {
        /* fill the free slots: first the runs never tried, then the busy ones */
        while ((int)running < J) {
            size_t i = r.nruns;
            while (next < r.nruns && done[next]) next++;
            if (next < r.nruns) i = next++;
            else {
                /* every run started once: when nothing else is left, the
                ** ones another process held, as soon as they are free */
                if (running) break;
                int waiting = 0;
                for (size_t k = 0; k < r.nruns; k++) waiting |= busy[k];
                if (!waiting) break;
                i = next_held(db, &r, busy, said, &w);
                if (i == r.nruns) {
                    struct timespec ts = {0, 500000000};
                    nanosleep(&ts, NULL);
                    continue;
                }
            }
            int slot = 0;
            while (kids[slot].pid) slot++;
            kids[slot].run = i;
            kids[slot].started = sq_clock_s();
            kids[slot].pid = spawn(&r, i, db, threads, &kids[slot]);
            if (kids[slot].pid < 0) {
                kids[slot].pid = 0;
                close_log(&kids[slot]);
                goto out;
            }
            running++;
        }
        if (!running) break;
        int status;
        pid_t pid = wait(&status);
        if (pid < 0) {
            if (errno == EINTR) continue;
            fprintf(stderr, "shardq sweep: wait: %s\n", strerror(errno));
            goto out;
        }
        int slot = 0;
        while (slot < J && kids[slot].pid != pid) slot++;
        if (slot == J) continue;
        child *c = &kids[slot];
        running--;
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        const sq_sweep_config *x = &r.runs[c->run];
        if (code == SQ_SWEEP_EXIT_HELD) {
            /* say at once what it waits for (or take it over) */
            sq_store *s = open_quietly(db);
            busy[c->run] = 1;
            if (may_retry(s, x, &w, &said[c->run])) said[c->run] = 0;
            sq_store_close(s);
        } else {
            finished++;
            if (code == 0) done[c->run] = 1;
            else {
                failed++;
                sq_progress_pause(bar);
                show_log(c, x->label);
            }
            if (bar) sq_progress_update(bar, finished);
            else if (!quiet)
                fprintf(stderr, "[%zu/%zu] %s %s (%.1f s, elapsed %.0f s, eta %.0f s)\n",
                        finished, todo, code == 0 ? "done" : "FAILED", x->label,
                        sq_clock_s() - c->started, sq_clock_s() - t0,
                        finished < todo ? (sq_clock_s() - t0) / (double)finished *
                                              (double)(todo - finished)
                                        : 0.0);
        }
        close_log(c);
        c->pid = 0;
    }
    sq_progress_finish(bar);
    size_t ndone = 0;
    for (size_t i = 0; i < r.nruns; i++) ndone += done[i];
    if (!quiet)
        fprintf(stderr, "shardq sweep: %s: %zu of %zu configurations done (%zu now, %zu before%s)"
                "%s%zu failed; see 'shardq db list --sweep %s'\n", r.name, ndone, r.nruns,
                ndone - already, already, dup_note(&r, note, sizeof note), failed ? ", " : ", ",
                failed, r.name);
    rc = ndone == r.nruns ? CLI_OK : CLI_RUNTIME;
out:
    if (kids)
        for (int k = 0; k < J; k++)
            if (kids[k].pid) {
                kill(kids[k].pid, SIGTERM);
                waitpid(kids[k].pid, NULL, 0);
                close_log(&kids[k]);
            }
    free(kids), free(done), free(busy), free(said);
    sq_sweep_free(&r);
    return rc;
}
