/*
** scheduler.c -- a sweep scheduled across MPI ranks (shardq/mpi.h, "A sweep across
** ranks"): rank 0 hands the configurations out and imports the results,
** the other ranks run jobs into private database files and ship them.
**
** Why files: a job's rows go through the very store calls a local sweep
** makes (sq_sweep_job_run), so nothing here has to serialise a table, and
** rank 0 imports the whole run in one transaction (sq_store_import_run):
** the main database never holds a run that is half there.
*/
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "shardq/mpi.h"
#include "shardq/store.h"
#include "shardq/sweep.h"

#include <mpi.h>

#include <cblas.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* MPI counts are ints: a file goes in pieces of 1 GiB. */
#define CHUNK ((uint64_t)1 << 30)
/* The longest text a worker sends (an error sentence, two at most). */
#define TEXT_MAX (2 * SQ_ERROR_MSG + 64)
/* How often rank 0 asks again about runs that another process holds. */
#define HELD_POLL_S 0.5

/* Tags, on a duplicate of the caller's communicator (so they meet no
** message of the caller's). Worker to rank 0: ASK (the header; its kind
** says whether a result comes with it), then TEXT and FILE when their
** lengths are not 0. Rank 0 to a worker: WORK (index, key length) then KEY,
** or STOP. */
enum { TAG_ASK = 0x5301, TAG_TEXT, TAG_FILE, TAG_WORK, TAG_KEY, TAG_STOP };
enum { ASK_FIRST = 0, ASK_RESULT = 1, ASK_FATAL = 2 };
/* The header's fields (int64 each). */
enum { H_KIND, H_RUN, H_RC, H_TEMPRUN, H_TEXTLEN, H_FILELEN, H_MICROS, H_N };

/* ------------------------------------------------------------------------ */
/* Small things                                                             */
/* ------------------------------------------------------------------------ */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

typedef char host_name[MPI_MAX_PROCESSOR_NAME];

static int mpi_error(sq_error *err, int code, const char *what, int rank, const char *host)
{
    char why[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(code, why, &len);
    return sq_error_set(err, SQ_ERR_IO, "%s (rank %d, %s): %s", what, rank, host, why);
}

/* ------------------------------------------------------------------------ */
/* The temporary files of this process                                      */
/* ------------------------------------------------------------------------ */

/* A directory of its own (mkdtemp: $TMPDIR/shardq-sweep-HOST-PID-XXXXXX)
** holding one database file at a time, with the files sqlite puts beside
** it. The names are made once, so that a signal handler can remove them
** with unlink and rmdir alone (both async-signal-safe): a rank ended by
** SIGTERM leaves nothing behind. What a SIGKILL leaves, the next sweep on
** the host removes (tmp_reap). */
enum { TMP_DB, TMP_WAL, TMP_SHM, TMP_JOURNAL, TMP_N };
static char tmp_dir[PATH_MAX - 32]; /* room for the names below */
static char tmp_names[TMP_N][PATH_MAX];
static volatile sig_atomic_t tmp_made;
static const int tmp_signals[] = {SIGTERM, SIGINT, SIGHUP};
#define NSIG_TMP (sizeof tmp_signals / sizeof tmp_signals[0])
static struct sigaction tmp_saved[NSIG_TMP];

static void tmp_clear_files(void)
{
    for (int k = 0; k < TMP_N; k++) unlink(tmp_names[k]);
}

static void tmp_on_signal(int sig)
{
    if (tmp_made) {
        tmp_clear_files();
        rmdir(tmp_dir);
    }
    /* then die of the signal, as without the handler */
    signal(sig, SIG_DFL);
    raise(sig);
}

static const char *const tmp_suffix[TMP_N] = {"", "-wal", "-shm", "-journal"};

/* Whether process pid has ended: no such process, or a zombie that whoever
** inherited it has not reaped yet (a rank killed with its launcher). */
static int proc_gone(long pid)
{
    if (kill((pid_t)pid, 0) != 0) return errno == ESRCH;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold anything */
    return p && (p[1] == ' ') && (p[2] == 'Z' || p[2] == 'X');
}

/* Removes the directories that ranks of this host left behind when killed
** (SIGKILL cannot be handled): those whose process is gone. Only the files
** a sweep makes are removed, then the directory if it is empty, so that
** nothing else is ever deleted. The host is in the name because $TMPDIR
** may be shared between hosts, where a pid means nothing. */
static void tmp_reap(const char *base, const char *prefix)
{
    DIR *d = opendir(base);
    if (!d) return;
    const size_t np = strlen(prefix);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, prefix, np) != 0) continue;
        char *end;
        long pid = strtol(e->d_name + np, &end, 10);
        if (end == e->d_name + np || *end != '-' || pid <= 0 || pid > INT_MAX) continue;
        if (!proc_gone(pid)) continue;
        char path[PATH_MAX];
        for (int k = 0; k < TMP_N; k++) {
            if (snprintf(path, sizeof path, "%s/%s/run.db%s", base, e->d_name, tmp_suffix[k]) <
                (int)sizeof path)
                unlink(path);
        }
        if (snprintf(path, sizeof path, "%s/%s", base, e->d_name) < (int)sizeof path) rmdir(path);
    }
    closedir(d);
}

static int tmp_setup(int rank, sq_error *err)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    char host[64] = "", prefix[128];
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    for (char *p = host; *p; p++)
        if (*p == '/' || *p == '.') *p = '_'; /* a name, not a path */
    snprintf(prefix, sizeof prefix, "shardq-sweep-%s-", host);
    tmp_reap(base, prefix);
    if (snprintf(tmp_dir, sizeof tmp_dir, "%s/%s%ld-XXXXXX", base, prefix, (long)getpid()) >=
        (int)sizeof tmp_dir)
        return sq_error_set(err, SQ_ERR_ARG, "TMPDIR %s: name too long", base);
    if (!mkdtemp(tmp_dir))
        return sq_error_set(err, SQ_ERR_IO, "rank %d: cannot make a directory in %s "
                            "(TMPDIR): %s", rank, base, strerror(errno));
    for (int k = 0; k < TMP_N; k++)
        snprintf(tmp_names[k], sizeof tmp_names[k], "%s/run.db%s", tmp_dir, tmp_suffix[k]);
    tmp_made = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = tmp_on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < NSIG_TMP; i++) sigaction(tmp_signals[i], &sa, &tmp_saved[i]);
    return SQ_OK;
}

static void tmp_teardown(void)
{
    if (!tmp_made) return;
    for (size_t i = 0; i < NSIG_TMP; i++) sigaction(tmp_signals[i], &tmp_saved[i], NULL);
    tmp_clear_files();
    rmdir(tmp_dir);
    tmp_made = 0;
}

/* ------------------------------------------------------------------------ */
/* One job into the private file                                            */
/* ------------------------------------------------------------------------ */

typedef struct job_result {
    int rc;           /* the job's kind (SQ_OK: done) */
    int64_t run;      /* its run in the private file (0: none began) */
    double seconds;
    char text[TEXT_MAX];
} job_result;

/* Runs configuration i into tmp_names[TMP_DB], as a local sweep's job does
** into the main database (tensor rows included). */
static void run_job(const sq_sweep *sw, size_t i, job_result *r)
{
    memset(r, 0, sizeof *r);
    tmp_clear_files(); /* the last job's file, if anything kept it */
    const sq_sweep_config *x = &sw->runs[i];
    sq_sweep_job job = {.cfg = x, .db = tmp_names[TMP_DB], .key = x->key, .sweep = sw->name,
                        .tensor_rows = 1, .recipe = sw->text};
    sq_sweep_outcome *out = calloc(1, sizeof *out);
    sq_error e = {0};
    double t0 = now_s();
    r->rc = out ? sq_sweep_job_run(&job, out, &e) : sq_error_set(&e, SQ_ERR_NOMEM, "out of memory");
    r->seconds = now_s() - t0;
    if (out) r->run = out->run;
    if (r->rc)
        snprintf(r->text, sizeof r->text, "%s%s%s", sq_error_message(&e),
                 out && out->end_error[0] ? "; " : "", out && out->end_error[0] ? out->end_error : "");
    else if (out && out->status != SQ_SWEEP_RAN) {
        /* a fresh file holds no key: this cannot be, but must not pass as done */
        r->rc = SQ_ERR_CONFLICT;
        snprintf(r->text, sizeof r->text, "%.900s: the job did not run (status %d)",
                 tmp_names[TMP_DB], out->status);
    }
    free(out);
    /* the job's store is closed, which checkpoints the WAL into the file:
    ** a WAL left with frames would mean a connection still open */
    struct stat sb;
    if (r->run > 0 && stat(tmp_names[TMP_WAL], &sb) == 0 && sb.st_size > 0) {
        r->run = 0;
        r->rc = r->rc ? r->rc : SQ_ERR_IO;
        size_t k = strlen(r->text);
        snprintf(r->text + k, sizeof r->text - k, "%s%s: not checkpointed: the run cannot be "
                 "shipped", k ? "; " : "", tmp_names[TMP_WAL]);
    }
}

static int read_whole(const char *path, char **buf, uint64_t *n, sq_error *err)
{
    *buf = NULL;
    *n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        return sq_error_set(err, SQ_ERR_IO, "%s: cannot read: %s", path, strerror(e));
    }
    char *b = malloc(sb.st_size > 0 ? (size_t)sb.st_size : 1);
    if (!b) {
        close(fd);
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory (%lld bytes)", path,
                            (long long)sb.st_size);
    }
    uint64_t got = 0;
    while (got < (uint64_t)sb.st_size) {
        ssize_t k = read(fd, b + got, (size_t)((uint64_t)sb.st_size - got));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int e = k < 0 ? errno : EIO;
            close(fd);
            free(b);
            return sq_error_set(err, SQ_ERR_IO, "%s: cannot read: %s", path, strerror(e));
        }
        got += (uint64_t)k;
    }
    close(fd);
    *buf = b;
    *n = got;
    return SQ_OK;
}

static int write_whole(const char *path, const char *buf, uint64_t n, sq_error *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return sq_error_set(err, SQ_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    uint64_t put = 0;
    while (put < n) {
        ssize_t k = write(fd, buf + put, (size_t)(n - put));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int e = k < 0 ? errno : EIO;
            close(fd);
            return sq_error_set(err, SQ_ERR_IO, "%s: cannot write: %s", path, strerror(e));
        }
        put += (uint64_t)k;
    }
    if (close(fd) != 0)
        return sq_error_set(err, SQ_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    return SQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Rank 0: the queue and the store                                          */
/* ------------------------------------------------------------------------ */

enum { ST_TODO = 0, ST_OUT, ST_HELD, ST_DONE, ST_FAILED };
enum { PICK_WAIT = -1, PICK_NONE = -2 };

typedef struct coord {
    const sq_sweep *sw;
    const sq_mpi_schedule_opts *o;
    sq_mpi_schedule_counts *c;
    sq_store *store;
    unsigned char *state;
    size_t cursor; /* runs before it were each looked at once */
    size_t held;   /* runs in ST_HELD */
    double polled; /* when the held runs were last asked about */
    host_name *hosts;
} coord;

static void emit(coord *k, int what, size_t run, int rank, double seconds, int64_t id,
                 const char *error)
{
    if (!k->o->event) return;
    sq_mpi_schedule_event e = {.what = what, .run = run, .rank = rank,
                            .host = rank >= 0 && k->hosts ? k->hosts[rank] : "",
                            .seconds = seconds, .id = id, .error = error ? error : ""};
    k->o->event(k->o->ctx, &e);
}

/* Without a hook: what the database says of the key now. */
static int ready_default(coord *k, size_t i)
{
    sq_run_holder h;
    if (sq_store_key_holder(k->store, k->sw->runs[i].key, &h)) return SQ_MPI_SCHEDULE_GO;
    if (h.id && !strcmp(h.status, "done")) return SQ_MPI_SCHEDULE_SKIP;
    if (h.id && !strcmp(h.status, "running") && h.state != SQ_PROC_GONE) return SQ_MPI_SCHEDULE_WAIT;
    return SQ_MPI_SCHEDULE_GO;
}

static int ready(coord *k, size_t i)
{
    return k->o->ready ? k->o->ready(k->o->ctx, i) : ready_default(k, i);
}

static void mark_done_elsewhere(coord *k, size_t i)
{
    k->state[i] = ST_DONE;
    if (k->o->done) k->o->done[i] = 1;
    k->c->elsewhere++;
    emit(k, SQ_MPI_SCHEDULE_ELSEWHERE, i, -1, 0, 0, NULL);
}

/* The next run to hand out: first every run once, in order; then those
** another process held, as soon as it lets go (asked every HELD_POLL_S).
** PICK_WAIT: some are held still; PICK_NONE: nothing is left to hand out. */
static long pick(coord *k)
{
    const size_t n = k->sw->nruns;
    for (; k->cursor < n; k->cursor++) {
        size_t i = k->cursor;
        if (k->state[i] != ST_TODO) continue;
        int r = ready(k, i);
        if (r == SQ_MPI_SCHEDULE_GO) {
            k->cursor++;
            return (long)i;
        }
        if (r == SQ_MPI_SCHEDULE_SKIP) {
            mark_done_elsewhere(k, i);
        } else {
            k->state[i] = ST_HELD;
            k->held++;
            emit(k, SQ_MPI_SCHEDULE_HELD, i, -1, 0, 0, NULL);
        }
    }
    if (!k->held) return PICK_NONE;
    if (now_s() - k->polled < HELD_POLL_S) return PICK_WAIT;
    k->polled = now_s();
    for (size_t i = 0; i < n; i++) {
        if (k->state[i] != ST_HELD) continue;
        int r = ready(k, i);
        if (r == SQ_MPI_SCHEDULE_WAIT) continue;
        k->held--;
        if (r == SQ_MPI_SCHEDULE_SKIP) {
            mark_done_elsewhere(k, i);
            continue;
        }
        return (long)i;
    }
    return k->held ? PICK_WAIT : PICK_NONE;
}

/* Stores the result of run i from the private file `file` (when the job
** began a run there) and says what came of it. */
static void store_result(coord *k, size_t i, int rank, const job_result *r, const char *file)
{
    char why[TEXT_MAX + SQ_ERROR_MSG + 16];
    snprintf(why, sizeof why, "%s", r->text);
    int64_t id = 0;
    if (r->run > 0) {
        int rc = sq_store_import_run(k->store, file, r->run, &id);
        if (rc == SQ_STORE_DONE) {
            mark_done_elsewhere(k, i);
            return;
        }
        if (rc == SQ_ERR_BUSY && id > 0) {
            /* another live process began the key since it was handed out */
            k->state[i] = ST_HELD;
            k->held++;
            emit(k, SQ_MPI_SCHEDULE_HELD, i, rank, r->seconds, id, NULL);
            return;
        }
        if (rc) {
            size_t n = strlen(why);
            snprintf(why + n, sizeof why - n, "%s%s", n ? "; " : "", sq_store_error(k->store));
            id = 0;
        }
    }
    if (!r->rc && id > 0) {
        k->state[i] = ST_DONE;
        if (k->o->done) k->o->done[i] = 1;
        k->c->done++;
        emit(k, SQ_MPI_SCHEDULE_DONE, i, rank, r->seconds, id, NULL);
        return;
    }
    if (!why[0]) snprintf(why, sizeof why, "the job ended without a result");
    k->state[i] = ST_FAILED;
    k->c->failed++;
    emit(k, SQ_MPI_SCHEDULE_FAILED, i, rank, r->seconds, id, why);
}

/* ------------------------------------------------------------------------ */
/* Messages                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct net {
    MPI_Comm comm;
    int rank, size;
    host_name *hosts;
} net;

static const char *host_of(const net *m, int r)
{
    return m->hosts && r >= 0 && r < m->size ? m->hosts[r] : "?";
}

/* Waits, without spinning, for a message of tag (MPI_ANY_TAG) from src. */
static int wait_msg(const net *m, int src, int tag, MPI_Status *st, sq_error *err)
{
    for (double t = 1e-4;; t = t < 5e-3 ? 2 * t : 1e-2) {
        int flag = 0, rc = MPI_Iprobe(src, tag, m->comm, &flag, st);
        if (rc != MPI_SUCCESS) return mpi_error(err, rc, "MPI_Iprobe", m->rank, host_of(m, m->rank));
        if (flag) return SQ_OK;
        nap(t);
    }
}

static int send_file(const net *m, int to, const char *buf, uint64_t n)
{
    for (uint64_t off = 0; off < n; off += CHUNK) {
        int count = (int)(n - off < CHUNK ? n - off : CHUNK);
        int rc = MPI_Send(buf + off, count, MPI_BYTE, to, TAG_FILE, m->comm);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

static int recv_file(const net *m, int from, char *buf, uint64_t n)
{
    for (uint64_t off = 0; off < n; off += CHUNK) {
        int count = (int)(n - off < CHUNK ? n - off : CHUNK);
        int rc = MPI_Recv(buf + off, count, MPI_BYTE, from, TAG_FILE, m->comm, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

/* A worker's ask: its header, then the text and the file when there are. */
static int send_ask(const net *m, int kind, long run, const job_result *r, const char *file,
                    uint64_t nfile, sq_error *err)
{
    int64_t h[H_N] = {0};
    h[H_KIND] = kind;
    h[H_RUN] = run;
    size_t ntext = 0;
    if (r) {
        h[H_RC] = r->rc;
        h[H_TEMPRUN] = nfile ? r->run : 0;
        ntext = strlen(r->text);
        h[H_TEXTLEN] = (int64_t)ntext;
        h[H_FILELEN] = (int64_t)nfile;
        h[H_MICROS] = (int64_t)llround(r->seconds * 1e6);
    }
    int rc = MPI_Send(h, H_N, MPI_INT64_T, 0, TAG_ASK, m->comm);
    if (rc == MPI_SUCCESS && ntext)
        rc = MPI_Send(r->text, (int)ntext, MPI_CHAR, 0, TAG_TEXT, m->comm);
    if (rc == MPI_SUCCESS && nfile) rc = send_file(m, 0, file, nfile);
    if (rc != MPI_SUCCESS) return mpi_error(err, rc, "sending a result to rank 0", m->rank,
                                            host_of(m, m->rank));
    return SQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Workers                                                                  */
/* ------------------------------------------------------------------------ */

/* Says a fault that ends the sweep (msg) to rank 0, which then ends it,
** and returns it here too. */
static int worker_fatal(const net *m, sq_error *err, int kind, long run, const char *msg)
{
    job_result r;
    memset(&r, 0, sizeof r);
    r.rc = kind;
    snprintf(r.text, sizeof r.text, "rank %d (%s): configuration %ld: %s", m->rank,
             host_of(m, m->rank), run, msg);
    sq_error e2 = {0};
    send_ask(m, ASK_FATAL, run, &r, NULL, 0, &e2);
    return sq_error_set(err, kind, "%s", r.text);
}

static int worker(const net *m, const sq_sweep *sw, sq_error *err)
{
    int rc = send_ask(m, ASK_FIRST, -1, NULL, NULL, 0, err);
    char *key = NULL;
    while (!rc) {
        MPI_Status st;
        if ((rc = wait_msg(m, 0, MPI_ANY_TAG, &st, err))) break;
        if (st.MPI_TAG == TAG_STOP) {
            int c = MPI_Recv(NULL, 0, MPI_BYTE, 0, TAG_STOP, m->comm, MPI_STATUS_IGNORE);
            if (c != MPI_SUCCESS) rc = mpi_error(err, c, "MPI_Recv", m->rank, host_of(m, m->rank));
            break;
        }
        int64_t w[2] = {0, 0};
        int c = MPI_Recv(w, 2, MPI_INT64_T, 0, TAG_WORK, m->comm, MPI_STATUS_IGNORE);
        char msg[TEXT_MAX];
        free(key);
        key = NULL;
        if (c == MPI_SUCCESS && (w[1] <= 0 || w[1] > INT_MAX || !(key = malloc((size_t)w[1] + 1)))) {
            snprintf(msg, sizeof msg, "no room for a key of %lld bytes from rank 0",
                     (long long)w[1]);
            rc = worker_fatal(m, err, SQ_ERR_NOMEM, (long)w[0], msg);
            break;
        }
        if (c == MPI_SUCCESS)
            c = MPI_Recv(key, (int)w[1], MPI_CHAR, 0, TAG_KEY, m->comm, MPI_STATUS_IGNORE);
        if (c != MPI_SUCCESS) {
            rc = mpi_error(err, c, "receiving work from rank 0", m->rank, host_of(m, m->rank));
            break;
        }
        key[w[1]] = '\0';
        if (w[0] < 0 || (uint64_t)w[0] >= sw->nruns) {
            snprintf(msg, sizeof msg, "not in this rank's recipe (%zu configurations)",
                     sw->nruns);
            rc = worker_fatal(m, err, SQ_ERR_CONFLICT, (long)w[0], msg);
            break;
        }
        const size_t i = (size_t)w[0];
        if (strcmp(sw->runs[i].key, key) != 0) {
            /* keys are long: show them from a little before where they part */
            const char *mine = sw->runs[i].key;
            size_t at = 0;
            while (mine[at] && mine[at] == key[at]) at++;
            size_t from = at > 40 ? at - 40 : 0;
            snprintf(msg, sizeof msg, "field 'key' differs from character %zu on: '%s%.120s' "
                     "here, '%s%.120s' on rank 0: every rank must read the same recipe and "
                     "trace, at the same paths", at, from ? "..." : "", mine + from,
                     from ? "..." : "", key + from);
            rc = worker_fatal(m, err, SQ_ERR_CONFLICT, (long)i, msg);
            break;
        }
        job_result r;
        run_job(sw, i, &r);
        char *file = NULL;
        uint64_t nfile = 0;
        if (r.run > 0) {
            sq_error fe = {0};
            if (read_whole(tmp_names[TMP_DB], &file, &nfile, &fe)) {
                /* the run cannot go to rank 0: a failure of this configuration */
                size_t k = strlen(r.text);
                snprintf(r.text + k, sizeof r.text - k, "%s%s", k ? "; " : "",
                         sq_error_message(&fe));
                if (!r.rc) r.rc = fe.status;
                r.run = 0;
            }
        }
        tmp_clear_files();
        rc = send_ask(m, ASK_RESULT, (long)i, &r, file, nfile, err);
        free(file);
    }
    free(key);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Rank 0 among workers                                                     */
/* ------------------------------------------------------------------------ */

static int send_work(const net *m, int to, const sq_sweep *sw, size_t i, sq_error *err)
{
    const char *key = sw->runs[i].key;
    int64_t w[2] = {(int64_t)i, (int64_t)strlen(key)};
    int rc = MPI_Send(w, 2, MPI_INT64_T, to, TAG_WORK, m->comm);
    if (rc == MPI_SUCCESS) rc = MPI_Send(key, (int)w[1], MPI_CHAR, to, TAG_KEY, m->comm);
    return rc == MPI_SUCCESS ? SQ_OK : mpi_error(err, rc, "sending work", to, host_of(m, to));
}

/* Takes the ask that st announced: a first ask, a result (stored here),
** or a worker's fatal fault (returned). */
static int take_ask(const net *m, coord *k, const MPI_Status *st, int *had_result,
                    sq_error *err)
{
    const int src = st->MPI_SOURCE;
    int64_t h[H_N];
    *had_result = 0;
    int rc = MPI_Recv(h, H_N, MPI_INT64_T, src, TAG_ASK, m->comm, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_error(err, rc, "receiving from a worker", src, host_of(m, src));
    if (h[H_TEXTLEN] < 0 || h[H_TEXTLEN] >= TEXT_MAX || h[H_FILELEN] < 0)
        return sq_error_set(err, SQ_ERR_FORMAT, "rank %d (%s): a header with text of "
                            "%lld bytes and a file of %lld", src, host_of(m, src),
                            (long long)h[H_TEXTLEN], (long long)h[H_FILELEN]);
    job_result r;
    memset(&r, 0, sizeof r);
    r.rc = (int)h[H_RC];
    r.run = h[H_TEMPRUN];
    r.seconds = (double)h[H_MICROS] * 1e-6;
    if (h[H_TEXTLEN] > 0) {
        rc = MPI_Recv(r.text, (int)h[H_TEXTLEN], MPI_CHAR, src, TAG_TEXT, m->comm,
                      MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return mpi_error(err, rc, "receiving from a worker", src, host_of(m, src));
    }
    int written = 0;
    if (h[H_FILELEN] > 0) {
        char *buf = malloc((size_t)h[H_FILELEN]);
        if (!buf) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory for the %lld "
                                      "bytes of rank %d", (long long)h[H_FILELEN], src);
        rc = recv_file(m, src, buf, (uint64_t)h[H_FILELEN]);
        if (rc != MPI_SUCCESS) {
            free(buf);
            return mpi_error(err, rc, "receiving a run's file", src, host_of(m, src));
        }
        sq_error we = {0};
        tmp_clear_files();
        if (write_whole(tmp_names[TMP_DB], buf, (uint64_t)h[H_FILELEN], &we)) {
            /* rank 0's disk: this configuration fails, as a local job would */
            size_t n = strlen(r.text);
            snprintf(r.text + n, sizeof r.text - n, "%s%s", n ? "; " : "", sq_error_message(&we));
            if (!r.rc) r.rc = we.status;
            r.run = 0;
        } else
            written = 1;
        free(buf);
    }
    if (h[H_KIND] == ASK_FATAL)
        return sq_error_set(err, r.rc ? r.rc : SQ_ERR_IO, "%s", r.text);
    if (h[H_KIND] == ASK_RESULT) {
        if (h[H_RUN] < 0 || (uint64_t)h[H_RUN] >= k->sw->nruns)
            return sq_error_set(err, SQ_ERR_FORMAT, "rank %d (%s): a result for "
                                "configuration %lld, of %zu", src, host_of(m, src),
                                (long long)h[H_RUN], k->sw->nruns);
        if (!written) r.run = 0;
        store_result(k, (size_t)h[H_RUN], src, &r, tmp_names[TMP_DB]);
        tmp_clear_files();
        *had_result = 1;
    }
    return SQ_OK;
}

static int coordinate(const net *m, coord *k, sq_error *err)
{
    const int nworkers = m->size - 1;
    int *idle = calloc((size_t)nworkers, sizeof *idle);
    if (!idle) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    int nidle = 0, busy = 0, stopped = 0, rc = SQ_OK;
    double t = 1e-4;
    while (stopped < nworkers) {
        MPI_Status st;
        int flag = 0, c = MPI_Iprobe(MPI_ANY_SOURCE, TAG_ASK, m->comm, &flag, &st);
        if (c != MPI_SUCCESS) {
            rc = mpi_error(err, c, "MPI_Iprobe", 0, host_of(m, 0));
            break;
        }
        int moved = flag;
        if (flag) {
            int had = 0;
            if ((rc = take_ask(m, k, &st, &had, err))) break;
            busy -= had;
            idle[nidle++] = st.MPI_SOURCE;
        }
        while (nidle > 0 && !rc) {
            long i = pick(k);
            if (i >= 0) {
                int to = idle[--nidle];
                k->state[i] = ST_OUT;
                rc = send_work(m, to, k->sw, (size_t)i, err);
                busy++;
                emit(k, SQ_MPI_SCHEDULE_SENT, (size_t)i, to, 0, 0, NULL);
            } else if (i == PICK_NONE && busy == 0) {
                /* nothing left, and no result to come that could be held */
                int to = idle[--nidle];
                c = MPI_Send(NULL, 0, MPI_BYTE, to, TAG_STOP, m->comm);
                if (c != MPI_SUCCESS) rc = mpi_error(err, c, "sending stop", to, host_of(m, to));
                stopped++;
            } else
                break;
            moved = 1;
        }
        if (rc) break;
        if (moved) t = 1e-4;
        else {
            nap(t);
            t = t < 5e-3 ? 2 * t : 1e-2;
        }
    }
    free(idle);
    return rc;
}

/* With one rank: rank 0 runs every job itself, one at a time. */
static int run_alone(coord *k)
{
    for (;;) {
        long i = pick(k);
        if (i == PICK_NONE) return SQ_OK;
        if (i == PICK_WAIT) {
            nap(0.1);
            continue;
        }
        k->state[i] = ST_OUT;
        emit(k, SQ_MPI_SCHEDULE_SENT, (size_t)i, 0, 0, 0, NULL);
        job_result r;
        run_job(k->sw, (size_t)i, &r);
        store_result(k, (size_t)i, 0, &r, tmp_names[TMP_DB]);
        tmp_clear_files();
    }
}

/* ------------------------------------------------------------------------ */
/* Threads                                                                  */
/* ------------------------------------------------------------------------ */

/* The workers on this rank's host (collective): the ranks that share its
** memory, less rank 0 when it only coordinates. */
static int host_workers(const net *m)
{
    MPI_Comm shm;
    if (MPI_Comm_split_type(m->comm, MPI_COMM_TYPE_SHARED, m->rank, MPI_INFO_NULL, &shm) !=
        MPI_SUCCESS)
        return 1;
    int n = 1, first = 0;
    MPI_Comm_size(shm, &n);
    MPI_Allreduce(&m->rank, &first, 1, MPI_INT, MPI_MIN, shm);
    MPI_Comm_free(&shm);
    if (first == 0 && m->size > 1) n--;
    return n > 0 ? n : 1;
}

static void set_threads(const sq_mpi_schedule_opts *o, int workers)
{
    int n = o->threads;
    if (n == 0) {
        const char *env = getenv("OMP_NUM_THREADS");
        if (env && *env) return;
        cpu_set_t set;
        int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
        if (cpus <= 0) {
            long c = sysconf(_SC_NPROCESSORS_ONLN);
            cpus = c > 0 ? (int)c : 1;
        }
        n = cpus / workers > 1 ? cpus / workers : 1;
    }
    if (n <= 0) return;
    sq_set_threads(n);
    openblas_set_num_threads(n);
}

/* ------------------------------------------------------------------------ */
/* Entry                                                                    */
/* ------------------------------------------------------------------------ */

int sq_mpi_all_ok(const void *comm, int ok, int *all, sq_error *err)
{
    MPI_Comm c = comm ? *(const MPI_Comm *)comm : MPI_COMM_WORLD;
    int mine = ok != 0, every = 0;
    *all = 0;
    MPI_Errhandler saved;
    MPI_Comm_get_errhandler(c, &saved);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    int rc = MPI_Allreduce(&mine, &every, 1, MPI_INT, MPI_MIN, c);
    MPI_Comm_set_errhandler(c, saved);
    MPI_Errhandler_free(&saved);
    if (rc != MPI_SUCCESS) {
        int r = -1;
        MPI_Comm_rank(c, &r);
        return mpi_error(err, rc, "MPI_Allreduce", r, "this host");
    }
    *all = every;
    return SQ_OK;
}

int sq_mpi_schedule(const void *comm, const sq_sweep *sw, const sq_mpi_schedule_opts *o,
                 sq_mpi_schedule_counts *counts, sq_error *err)
{
    sq_mpi_schedule_counts mine;
    sq_mpi_schedule_counts *c = counts ? counts : &mine;
    memset(c, 0, sizeof *c);
    int on = 0;
    MPI_Initialized(&on);
    if (!on) return sq_error_set(err, SQ_ERR_ARG, "MPI is not initialised (sq_mpi_init)");
    if (!sw || !o) return sq_error_set(err, SQ_ERR_ARG, "no sweep or no options");
    net m = {.comm = MPI_COMM_NULL};
    MPI_Comm base = comm ? *(const MPI_Comm *)comm : MPI_COMM_WORLD;
    int rc = MPI_Comm_dup(base, &m.comm);
    if (rc != MPI_SUCCESS) return mpi_error(err, rc, "MPI_Comm_dup", -1, "this host");
    MPI_Comm_set_errhandler(m.comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m.comm, &m.rank);
    MPI_Comm_size(m.comm, &m.size);
    int64_t *nruns = calloc((size_t)m.size, sizeof *nruns);
    m.hosts = calloc((size_t)m.size, sizeof *m.hosts);
    coord k = {.sw = sw, .o = o, .c = c};
    if (!nruns || !m.hosts) {
        rc = sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
        goto out;
    }

    /* every rank's host, and whether every rank expanded the same grid */
    host_name me = "";
    int len = 0;
    MPI_Get_processor_name(me, &len);
    int64_t n = (int64_t)sw->nruns;
    if ((rc = MPI_Allgather(me, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, m.hosts,
                            MPI_MAX_PROCESSOR_NAME, MPI_CHAR, m.comm)) != MPI_SUCCESS ||
        (rc = MPI_Allgather(&n, 1, MPI_INT64_T, nruns, 1, MPI_INT64_T, m.comm)) != MPI_SUCCESS) {
        rc = mpi_error(err, rc, "MPI_Allgather", m.rank, me);
        goto out;
    }
    for (int r = 1; r < m.size; r++)
        if (nruns[r] != nruns[0]) {
            /* every rank sees it: each returns, rank 0 says it */
            c->together = 1;
            c->echo = m.rank != 0;
            rc = sq_error_set(err, SQ_ERR_CONFLICT, "%s: rank %d (%s) expands %lld "
                              "configurations, rank 0 (%s) %lld: every rank must read the same "
                              "recipe", sw->path ? sw->path : "the recipe", r, m.hosts[r],
                              (long long)nruns[r], m.hosts[0], (long long)nruns[0]);
            goto out;
        }
    const int workers = host_workers(&m);
    c->workers = m.size > 1 ? m.size - 1 : 1;

    /* every rank makes its directory; a rank that cannot ends the sweep */
    sq_error te = {0};
    int made = tmp_setup(m.rank, &te) == SQ_OK, all = 0;
    if ((rc = sq_mpi_all_ok(&m.comm, made, &all, err))) goto out;
    if (!all) {
        /* the ranks that failed say why, and rank 0 that some did */
        c->together = 1;
        c->echo = made && m.rank != 0;
        rc = made ? sq_error_set(err, SQ_ERR_IO, "a rank cannot make its temporary "
                                 "directory (see its message)")
                  : sq_error_set(err, te.status, "%s (%s)", sq_error_message(&te), me);
        goto out;
    }

    if (m.rank != 0) {
        set_threads(o, workers);
        rc = worker(&m, sw, err);
        goto out;
    }

    /* rank 0 */
    if (!o->db) {
        rc = sq_error_set(err, SQ_ERR_ARG, "rank 0 needs a database");
    } else if (!(k.state = calloc(sw->nruns ? sw->nruns : 1, 1))) {
        rc = sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    } else {
        rc = sq_store_open(o->db, 0, 0, &k.store, err);
    }
    if (rc) {
        /* the workers wait for work: the caller ends them (sq_mpi_abort) */
        goto out;
    }
    for (size_t i = 0; i < sw->nruns; i++)
        if (o->done && o->done[i]) {
            k.state[i] = ST_DONE;
            c->before++;
        }
    k.hosts = m.hosts;
    rc = m.size > 1 ? coordinate(&m, &k, err) : run_alone(&k);

out:
    tmp_teardown();
    sq_store_close(k.store);
    free(k.state);
    free(nruns);
    free(m.hosts);
    if (m.comm != MPI_COMM_NULL) MPI_Comm_free(&m.comm);
    return rc;
}
