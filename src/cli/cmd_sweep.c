/*
** cmd_sweep.c -- `shardq sweep RECIPE.ini`: every configuration of a recipe
** (sweep.h) run by the sweep module's process pool (sq_sweep_pool_run), or
** under mpirun by the scheduler across ranks (sq_mpi_schedule); this file
** reads the options and prints what they report.
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
** The pool forks its children without exec: libgomp is not fork-safe, so
** this process must never run an OpenMP parallel region before it forks.
** Nothing here does: reading the recipe, the store's bookkeeping and the
** progress lines are serial, and `shardq demo` runs its own training in a
** child of its own for that reason. The children set their thread count
** by call (the environment, OMP_NUM_THREADS and OMP_WAIT_POLICY, was read
** when the program started: export OMP_WAIT_POLICY=passive for runs side
** by side on few cores).
**
** Under mpirun (--transport mpi, or auto with more than one rank) the
** configurations go out to the ranks instead (sq_mpi_schedule in
** libshardq_mpi): rank 0 owns the database and hands them out, the other
** ranks run them in process, one at a time each, and nothing forks.
*/
#define _DEFAULT_SOURCE /* gethostname */
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

#define sweep_usage cli_help("shardq-sweep")

/* ------------------------------------------------------------------------ */
/* What the pool reports                                                    */
/* ------------------------------------------------------------------------ */

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

/* Which runs of the sweep processes that are gone left 'running' (they run
** again), a killed sweep's or a reused pid's: up to ten, then a count. */
static void say_left_running(const sq_sweep_pool_event *e)
{
    for (size_t i = 0; i < e->nstale; i++)
        fprintf(stderr, "shardq sweep: run %lld was left 'running' by pid %lld on %s (since "
                "%s), a process that is gone: it runs again\n",
                (long long)e->stale[i].id, (long long)e->stale[i].pid, e->stale[i].host,
                e->stale[i].started);
    if (e->count > 10) fprintf(stderr, "shardq sweep: ... and %ld more such runs\n", e->count - 10);
}

static void say_waiting(const sq_sweep_config *x, const sq_sweep_pool_event *e)
{
    const sq_run_holder *h = e->holder;
    const char *how = e->again ? "still waiting" : "waiting";
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

static void say_takeover(const sq_sweep_config *x, const sq_sweep_pool_event *e)
{
    const sq_run_holder *h = e->holder;
    char idle[32] = "?";
    if (!isnan(h->idle_s)) snprintf(idle, sizeof idle, "%.0f s", h->idle_s);
    fprintf(stderr, "shardq sweep: taking over %s: run %lld (key %s) of pid %lld on host %s, "
            "under way since %s, last write %s ago (%s)\n", x->label, (long long)h->id, x->key,
            (long long)h->pid, h->host, h->started, idle,
            e->takeover ? "--takeover" : "--stale-after");
}

/* The first 20 lines of what a failed child said. */
static void show_log(const char *log, const char *label)
{
    fprintf(stderr, "shardq sweep: failed: %s\n", label);
    int lines = 0;
    for (const char *p = log; *p && lines < 20; lines++) {
        size_t k = strcspn(p, "\n");
        fprintf(stderr, "  %.*s\n", (int)k, p);
        p += k + (p[k] == '\n');
    }
}

static void say_finished(cli_sweep_printer *c, const sq_sweep *r, const sq_sweep_pool_event *e)
{
    const sq_sweep_config *x = &r->runs[e->run];
    const sq_sweep_pool_counts *n = e->counts;
    if (e->code) {
        sq_progress_pause(c->bar);
        show_log(e->log, x->label);
    }
    if (c->bar) sq_progress_update(c->bar, n->finished);
    else if (!c->quiet)
        fprintf(stderr, "[%zu/%zu] %s %s (%.1f s, elapsed %.0f s, eta %.0f s)\n", n->finished,
                n->todo, e->code == 0 ? "done" : "FAILED", x->label, e->seconds,
                sq_clock_s() - c->t0,
                n->finished < n->todo ? (sq_clock_s() - c->t0) / (double)n->finished *
                                            (double)(n->todo - n->finished)
                                      : 0.0);
}

void cli_sweep_print(void *ctx, const sq_sweep *r, const sq_sweep_pool_event *e)
{
    cli_sweep_printer *c = ctx;
    const sq_sweep_pool_counts *n = e->counts;
    char note[128];
    switch (e->what) {
    case SQ_SWEEP_POOL_LEFT_RUNNING:
        if (!c->quiet) say_left_running(e);
        break;
    case SQ_SWEEP_POOL_BEGIN:
        if (!c->quiet)
            fprintf(stderr, "shardq sweep: %s: %zu configurations, %zu already done, %zu to run, "
                    "%d at a time%s%s\n", r->name, r->nruns, n->already, n->todo, e->jobs,
                    r->ninvalid ? " (some combinations left out: see --list)" : "",
                    dup_note(r, note, sizeof note));
        c->bar = c->quiet ? NULL : sq_progress_start(r->name, n->todo);
        c->t0 = sq_clock_s();
        break;
    case SQ_SWEEP_POOL_FINISHED: say_finished(c, r, e); break;
    case SQ_SWEEP_POOL_WAITING: say_waiting(&r->runs[e->run], e); break;
    case SQ_SWEEP_POOL_TAKEOVER: say_takeover(&r->runs[e->run], e); break;
    case SQ_SWEEP_POOL_NOTE: fprintf(stderr, "shardq sweep: %s\n", e->message); break;
    case SQ_SWEEP_POOL_END:
        sq_progress_finish(c->bar);
        c->bar = NULL;
        if (!c->quiet)
            fprintf(stderr, "shardq sweep: %s: %zu of %zu configurations done (%zu now, %zu "
                    "before%s), %zu failed; see 'shardq db list --sweep %s'\n", r->name, n->done,
                    r->nruns, n->done - n->already, n->already, dup_note(r, note, sizeof note),
                    n->failed, r->name);
        break;
    default: break;
    }
}

int cli_sweep_run(const sq_sweep *r, const sq_sweep_pool_opts *o, cli_sweep_printer *p)
{
    sq_sweep_pool_opts po = *o;
    po.ctx = p;
    po.event = cli_sweep_print;
    sq_sweep_pool_counts n;
    sq_error err = {0};
    int rc = sq_sweep_pool_run(r, &po, &n, &err);
    sq_progress_finish(p->bar);
    p->bar = NULL;
    if (rc) {
        fprintf(stderr, "shardq sweep: %s\n", sq_error_message(&err));
        return CLI_RUNTIME;
    }
    return n.done == r->nruns ? CLI_OK : CLI_RUNTIME;
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


#ifdef SHARDQ_HAVE_MPI
/* ------------------------------------------------------------------------ */
/* Across ranks                                                             */
/* ------------------------------------------------------------------------ */

/* Rank 0's view of a sweep across ranks: the hooks of sq_mpi_schedule. */
typedef struct ranks_ctx {
    const sq_sweep *r;
    sq_sweep_pool_opts po; /* the waits: takeover, stale-after; the printer */
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
        return SQ_MPI_SCHEDULE_SKIP;
    return sq_sweep_pool_may_retry(c->s, c->r, i, &c->po, &c->said[i]) ? SQ_MPI_SCHEDULE_GO
                                                                         : SQ_MPI_SCHEDULE_WAIT;
}

/* One line per finished configuration, as a local sweep prints, with the
** rank that ran it; a failure's sentence first. */
static void ranks_event(void *ctx, const sq_mpi_schedule_event *e)
{
    ranks_ctx *c = ctx;
    const sq_sweep_config *x = &c->r->runs[e->run];
    const char *word = NULL;
    switch (e->what) {
    case SQ_MPI_SCHEDULE_DONE: word = "done"; break;
    case SQ_MPI_SCHEDULE_FAILED:
        word = "FAILED";
        c->failed++;
        sq_progress_pause(c->bar);
        fprintf(stderr, "shardq sweep: failed: %s (rank %d on %s)\n  %s\n", x->label, e->rank,
                e->host, e->error);
        break;
    case SQ_MPI_SCHEDULE_ELSEWHERE: word = "skipped (done by another process)"; break;
    case SQ_MPI_SCHEDULE_HELD:
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
** checks the database and coordinates (sq_mpi_schedule), the others run. */
static int sweep_ranks(const char *recipe, const char *trace, const char *db, int list,
                       int quiet, const sq_sweep_pool_opts *w)
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
    cli_sweep_printer say = {.quiet = quiet};
    ranks_ctx c = {.r = &r, .po = *w, .quiet = quiet};
    c.po.db = db, c.po.ctx = &say, c.po.event = cli_sweep_print;
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
        sq_sweep_pool_left_running(&r, &c.po);
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
    sq_mpi_schedule_opts o = {.db = db, .done = done, .threads = 0, .ctx = &c,
                           .ready = ranks_ready, .event = ranks_event};
    sq_mpi_schedule_counts n;
    if (sq_mpi_schedule(NULL, &r, &o, &n, &err)) {
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
    int list = 0, quiet = 0, ch, transport = CLI_TRANSPORT_AUTO;
    sq_sweep_pool_opts w = {.takeover = 0, .stale_after = -1};
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
    cli_sweep_printer say = {.quiet = quiet};
    w.db = db;
    w.jobs = (int)jobs;
    int rc = cli_sweep_run(&r, &w, &say);
    sq_sweep_free(&r);
    return rc;
}
