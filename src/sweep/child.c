/*
** child.c -- a sweep's jobs in processes of their own (sweep.h), and what
** the database already holds of a sweep.
**
** A child is a fork that runs the job and exits: it needs no executable to
** find and no argument list to build, and a crash or a kill of one job
** takes no other with it. It dies with its parent (PR_SET_PDEATHSIG), so a
** killed sweep leaves no job behind.
*/
#define _GNU_SOURCE /* PR_SET_PDEATHSIG is Linux's */
#include "shardq/sweep.h"

#include "shardq/store_rows.h"

#ifdef _OPENMP
#include <omp.h>
#endif
#include <cblas.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

void sq_sweep_child_close_fds(int keep)
{
    /* /proc/self/fd lists what is open; closing while reading it would
    ** disturb the listing, so the numbers are collected first */
    DIR *dir = opendir("/proc/self/fd");
    int fds[1024], n = 0;
    if (dir) {
        struct dirent *e;
        while ((e = readdir(dir)) && n < (int)(sizeof fds / sizeof fds[0])) {
            int fd = atoi(e->d_name);
            if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && fd > STDERR_FILENO && fd != keep &&
                fd != dirfd(dir))
                fds[n++] = fd;
        }
        closedir(dir);
    }
    for (int i = 0; i < n; i++) {
        int flags = fcntl(fds[i], F_GETFD);
        if (flags >= 0 && (flags & FD_CLOEXEC)) close(fds[i]);
    }
}

pid_t sq_sweep_spawn(const sq_sweep_job *job, int threads, int quiet, int log_fd, sq_error *err)
{
    pid_t parent = getpid();
    /* what the parent has buffered must not be written twice */
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return sq_error_set(err, SQ_ERR_NOMEM, "fork: %s", strerror(errno));
    if (pid > 0) return pid;
    /* the child: die with the sweep, so that a killed sweep leaves no job behind */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    sq_sweep_child_close_fds(log_fd);
    if (quiet) {
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) dup2(devnull, STDOUT_FILENO), dup2(devnull, STDIN_FILENO);
    }
    if (log_fd >= 0) dup2(log_fd, STDERR_FILENO);
    if (threads > 0) {
        /* the environment (OMP_NUM_THREADS) was read when the program
        ** started: these calls are what a child can still change */
        sq_set_threads(threads);
        openblas_set_num_threads(threads);
    }
    sq_sweep_outcome *out = calloc(1, sizeof *out);
    sq_error e = {0};
    int rc = out ? sq_sweep_job_run(job, out, &e) : sq_error_set(&e, SQ_ERR_NOMEM, "out of memory");
    const char *cmd = job->cfg->command == SQ_SWEEP_TRAIN ? "train" : "replay";
    int code = SQ_SWEEP_EXIT_OK;
    if (out && out->status == SQ_SWEEP_HELD) {
        code = SQ_SWEEP_EXIT_HELD;
    } else if (rc) {
        fprintf(stderr, "shardq %s: %s\n", cmd, sq_error_message(&e));
        if (out && out->end_error[0]) fprintf(stderr, "shardq %s: %s\n", cmd, out->end_error);
        code = SQ_SWEEP_EXIT_FAILED;
    } else if (out && out->notice[0]) {
        fprintf(stderr, "shardq %s: %s\n", cmd, out->notice);
    }
    fflush(stdout);
    fflush(stderr);
    /* _exit: the parent's atexit handlers and stdio buffers are not ours */
    _exit(code);
}

/* Marks done[i] for the run whose key a finished run of the store holds. */
typedef struct done_marks {
    const sq_sweep *sw;
    unsigned char *done;
} done_marks;

static int mark_done(void *ctx, const char *key)
{
    done_marks *m = ctx;
    for (size_t i = 0; key && i < m->sw->nruns; i++)
        if (!m->done[i] && !strcmp(key, m->sw->runs[i].key)) m->done[i] = 1;
    return 0;
}

int sq_sweep_load_done(const char *db, const sq_sweep *sw, unsigned char *done, sq_error *err)
{
    sq_store *s;
    int rc = sq_store_open(db, 0, 0, &s, err);
    if (rc) return rc;
    done_marks m = {sw, done};
    rc = sq_store_sweep_done_keys(s, sw->name, mark_done, &m, err);
    sq_store_close(s);
    return rc;
}

/* Collects the runs left 'running' whose process is gone. */
typedef struct stale_list {
    sq_sweep_stale *out;
    size_t max;
    long n;
} stale_list;

static int add_stale(void *ctx, const sq_store_running *r)
{
    stale_list *l = ctx;
    if (sq_store_proc_state(r->host, r->pid, r->pid_start, r->boot_id) != SQ_PROC_GONE) return 0;
    if ((size_t)l->n < l->max) {
        sq_sweep_stale *x = &l->out[l->n];
        x->id = r->id;
        x->pid = r->pid;
        snprintf(x->host, sizeof x->host, "%s", r->host ? r->host : "?");
        snprintf(x->started, sizeof x->started, "%s", r->started ? r->started : "");
    }
    l->n++;
    return 0;
}

long sq_sweep_left_running(const char *db, const sq_sweep *sw, sq_sweep_stale *out, size_t max,
                           sq_error *err)
{
    sq_store *s;
    int rc = sq_store_open(db, 0, 1, &s, err);
    if (rc) return rc;
    stale_list l = {out, max, 0};
    rc = sq_store_sweep_running(s, sw->name, add_stale, &l, err);
    sq_store_close(s);
    return rc ? rc : l.n;
}
