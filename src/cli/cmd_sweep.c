/*
** cmd_sweep.c -- `shardq sweep RECIPE.ini`: every configuration of a recipe
** (recipe.h) as one `shardq replay` (or `shardq train`) process, several at
** a time.
**
** Each configuration carries a key; `shardq replay --key` skips a key the
** database already holds as done, and replaces one left 'running' by a
** process that is gone. So a sweep killed at any moment (SIGKILL included:
** its replays die with it, PR_SET_PDEATHSIG) resumes by running the same
** command again, and two sweeps can share a database.
*/
#define _GNU_SOURCE /* PR_SET_PDEATHSIG is Linux's */
#include "cli.h"
#include "progress.h"
#include "recipe.h"
#include "store/store.h"

#include <sqlite3.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char sweep_usage[] =
    "usage: shardq sweep [options] RECIPE.ini\n"
    "\n"
    "Runs every configuration of a recipe's grid (README, \"Sweeps\") as a\n"
    "'shardq replay' (or, with command = train, a 'shardq train'), several at\n"
    "once, every result into the database. A\n"
    "configuration already done there is skipped, so a sweep that was\n"
    "interrupted (even by SIGKILL) completes by running the same command again,\n"
    "and only what is missing runs.\n"
    "\n"
    "options:\n"
    "  --db FILE        the database (default $SHARDQ_DB, else shardq.db)\n"
    "  --jobs N         runs at once (default: the recipe's jobs, else one\n"
    "                   per core for replays, 1 for training)\n"
    "  --trace PATH     replay this trace instead of the recipe's\n"
    "  --list           print the configurations and exit\n"
    "  -q, --quiet      no progress lines\n"
    "  -h, --help       this text\n"
    "\n"
    "On a terminal a progress bar with the ETA shows; otherwise one line per\n"
    "finished configuration. Exit status: 0 when every configuration is done,\n"
    "1 when some failed (their errors are printed), 2 on a bad recipe.\n";

typedef struct child {
    pid_t pid;
    size_t run;
    char log[PATH_MAX]; /* its stderr, shown when it fails */
    double started;
} child;

static int ncores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* The keys of the sweep's runs already done, to skip them without a process. */
static int load_done(const char *db, const recipe *r, unsigned char *done, char *err,
                     size_t errlen)
{
    sq_store *s;
    /* opened for writing: this creates or migrates the file once, up front,
    ** and a database that cannot be written stops the sweep here */
    if (sq_store_open(db, 0, 0, &s, err, errlen)) return -1;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(sq_store_db(s),
                                "SELECT key FROM runs WHERE status = 'done' AND sweep = ?1", -1,
                                &st, NULL);
    if (rc == SQLITE_OK) sqlite3_bind_text(st, 1, r->name, -1, SQLITE_STATIC);
    while (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
        const char *k = (const char *)sqlite3_column_text(st, 0);
        for (size_t i = 0; k && i < r->nruns; i++)
            if (!done[i] && !strcmp(k, r->runs[i].key)) done[i] = 1;
    }
    if (rc != SQLITE_OK) snprintf(err, errlen, "%s: %s", db, sqlite3_errmsg(sq_store_db(s)));
    sqlite3_finalize(st);
    sq_store_close(s);
    return rc == SQLITE_OK ? 0 : -1;
}

/* Starts `shardq replay` (or `train`) for run i; its stdout is discarded, its
** stderr kept. */
static pid_t spawn(const char *self, const recipe *r, size_t i, const char *db, int threads,
                   child *c)
{
    const recipe_run *x = &r->runs[i];
    const char *tmp = getenv("TMPDIR");
    snprintf(c->log, sizeof c->log, "%s/shardq-sweep-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int logfd = mkstemp(c->log);
    if (logfd < 0) c->log[0] = '\0';
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0) {
        if (logfd >= 0) close(logfd);
        return pid;
    }
    /* the child: die with the sweep, so that a killed sweep leaves no replay behind */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) dup2(devnull, STDOUT_FILENO), dup2(devnull, STDIN_FILENO);
    if (logfd >= 0) dup2(logfd, STDERR_FILENO);
    char th[16];
    snprintf(th, sizeof th, "%d", threads);
    setenv("OMP_NUM_THREADS", th, 1);
    setenv("SHARDQ_PROGRESS", "0", 1);
    char seed[32], steps[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)x->seed);
    snprintf(steps, sizeof steps, "%llu", (unsigned long long)x->steps);
    setenv("OPENBLAS_NUM_THREADS", th, 1);
    /* runs side by side: threads that spin at their barriers would take the
    ** cores of the other runs */
    if (threads < ncores() && !getenv("OMP_WAIT_POLICY")) setenv("OMP_WAIT_POLICY", "passive", 1);
    const char **argv = calloc((size_t)(2 * x->nsets + x->nopts + 32), sizeof *argv);
    if (!argv) _exit(127);
    int a = 0;
    argv[a++] = self;
    argv[a++] = r->train ? "train" : "replay";
    argv[a++] = "--quiet";
    argv[a++] = "--db", argv[a++] = db;
    argv[a++] = "--key", argv[a++] = x->key;
    argv[a++] = "--sweep", argv[a++] = r->name;
    argv[a++] = "--scheme", argv[a++] = x->preset;
    for (int k = 0; k < x->nsets; k++) argv[a++] = "--set", argv[a++] = x->sets[k];
    if (x->workers) argv[a++] = "--workers", argv[a++] = x->workers;
    argv[a++] = "--seed", argv[a++] = seed;
    argv[a++] = "--device", argv[a++] = x->device;
    if (x->steps) argv[a++] = "--steps", argv[a++] = steps;
    if (r->train) {
        if (x->corpus) argv[a++] = "--corpus", argv[a++] = x->corpus;
        for (int k = 0; k < x->nopts; k++) argv[a++] = x->opts[k];
    } else {
        argv[a++] = "--paths", argv[a++] = x->paths;
        argv[a++] = x->trace;
    }
    argv[a] = NULL;
    execv(self, (char *const *)argv);
    fprintf(stderr, "shardq sweep: cannot run %s: %s\n", self, strerror(errno));
    _exit(127);
}

static void show_log(const child *c, const char *label)
{
    fprintf(stderr, "shardq sweep: failed: %s\n", label);
    FILE *f = c->log[0] ? fopen(c->log, "r") : NULL;
    if (!f) return;
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f) && n++ < 20) fprintf(stderr, "  %s", line);
    fclose(f);
}

int cmd_sweep(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"db", required_argument, NULL, 'b'},   {"jobs", required_argument, NULL, 'j'},
        {"trace", required_argument, NULL, 't'}, {"list", no_argument, NULL, 'l'},
        {"quiet", no_argument, NULL, 'q'},      {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *db = cli_default_db(), *trace = NULL;
    uint64_t jobs = 0;
    int list = 0, quiet = 0, ch, J = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "hq", longopts, NULL)) != -1) {
        switch (ch) {
        case 'b': db = optarg; break;
        case 'j':
            if (cli_parse_u64("sweep", "--jobs", optarg, 1024, &jobs)) return CLI_USAGE;
            break;
        case 't': trace = optarg; break;
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
    recipe r;
    char err[2048];
    if (recipe_load(argv[optind], trace, &r, err, sizeof err)) {
        fprintf(stderr, "shardq sweep: %s\n", err);
        return CLI_USAGE;
    }
    if (list) {
        for (size_t i = 0; i < r.nruns; i++) {
            const recipe_run *x = &r.runs[i];
            printf("%zu\t%s\t%s", i + 1, x->label,
                   x->trace ? x->trace : x->corpus ? x->corpus : "(default corpus)");
            for (int k = 0; k < x->nopts; k++) printf(" %s", x->opts[k]);
            printf("\n");
        }
        if (r.ninvalid)
            printf("# %zu combinations left out, e.g.: %s\n", r.ninvalid, r.first_invalid);
        recipe_free(&r);
        return CLI_OK;
    }
    int rc = CLI_RUNTIME;
    unsigned char *done = calloc(r.nruns, 1), *busy = calloc(r.nruns, 1);
    child *kids = NULL;
    char *self = realpath("/proc/self/exe", NULL);
    if (!done || !busy || !self) {
        fprintf(stderr, "shardq sweep: cannot find its own executable or out of memory\n");
        goto out;
    }
    if (load_done(db, &r, done, err, sizeof err)) {
        fprintf(stderr, "shardq sweep: %s\n", err);
        goto out;
    }
    size_t already = 0;
    for (size_t i = 0; i < r.nruns; i++) already += done[i];
    /* a training run keeps every core busy itself */
    J = jobs ? (int)jobs : r.jobs ? r.jobs : r.train ? 1 : ncores();
    int threads = ncores() / J > 1 ? ncores() / J : 1;
    kids = calloc((size_t)J, sizeof *kids);
    if (!kids) goto out;
    size_t todo = r.nruns - already;
    if (!quiet)
        fprintf(stderr, "shardq sweep: %s: %zu configurations, %zu already done, %zu to run, "
                "%d at a time%s\n", r.name, r.nruns, already, todo, J,
                r.ninvalid ? " (some combinations left out: see --list)" : "");
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
                /* every run started once: retry the ones another process held,
                ** after a pause, when nothing else is left */
                if (running) break;
                for (size_t k = 0; k < r.nruns; k++)
                    if (busy[k]) {
                        i = k;
                        busy[k] = 0;
                        break;
                    }
                if (i == r.nruns) break;
                struct timespec ts = {0, 200000000};
                nanosleep(&ts, NULL);
            }
            int slot = 0;
            while (kids[slot].pid) slot++;
            kids[slot].run = i;
            kids[slot].started = sq_clock_s();
            kids[slot].pid = spawn(self, &r, i, db, threads, &kids[slot]);
            if (kids[slot].pid < 0) {
                fprintf(stderr, "shardq sweep: fork: %s\n", strerror(errno));
                kids[slot].pid = 0;
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
        const recipe_run *x = &r.runs[c->run];
        if (code == CLI_BUSY) {
            busy[c->run] = 1;
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
        if (c->log[0]) unlink(c->log);
        c->pid = 0;
    }
    sq_progress_finish(bar);
    size_t ndone = 0;
    for (size_t i = 0; i < r.nruns; i++) ndone += done[i];
    if (!quiet)
        fprintf(stderr, "shardq sweep: %s: %zu of %zu configurations done (%zu now, %zu before)"
                "%s%zu failed; see 'shardq db list --sweep %s'\n", r.name, ndone, r.nruns,
                ndone - already, already, failed ? ", " : ", ", failed, r.name);
    rc = ndone == r.nruns ? CLI_OK : CLI_RUNTIME;
out:
    if (kids)
        for (int k = 0; k < J; k++)
            if (kids[k].pid) {
                kill(kids[k].pid, SIGTERM);
                waitpid(kids[k].pid, NULL, 0);
                if (kids[k].log[0]) unlink(kids[k].log);
            }
    free(kids), free(done), free(busy), free(self);
    recipe_free(&r);
    return rc;
}
