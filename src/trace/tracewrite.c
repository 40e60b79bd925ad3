/*
** tracewrite.c -- writing traces (tracedir.h): each file streamed tensor by
** tensor through the safe writer, manifest.json last.
**
** One writer per directory: the writer holds a lock (flock) on the file
** .shardq-writer in the directory for its whole life, and that file names
** its pid and owner. The lock keeps a second writer out (two writers into
** one directory would mix their files); the file, left behind by a writer
** that was killed, lets a rerun of the same owner recognise the unfinished
** trace as its own and start it again. Every file carries the trace's id in
** its metadata, as the manifest does, so that a file of another trace is
** refused by the reader.
**
** A trace written by several processes (one per rank of a data-parallel
** job) has one writer that takes the directory, as above, and joined
** writers, one per other process: they take no lock (the owner's must be
** held) and write their own worker's gradient files with the owner's id;
** the owner adopts each such file, checking its header as the reader will,
** in the place of the file it would have written, and writes the manifest.
*/
#include "shardq/trace.h"
#include "trace/tracedir_internal.h"
#include "trace/input.h"
#include "trace/wfile.h"
#include "shardq/codec.h"

#include <cjson/cJSON.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* The writer                                                               */
/* ------------------------------------------------------------------------ */

struct sq_trace_writer {
    char *dir;
    char *owner;         /* NULL: none */
    char id[SQ_TRACE_ID_MAX];
    int lock_fd;         /* .shardq-writer, locked; -1 when none */
    int workers;
    int part;            /* a joined writer: the one worker whose files it writes; -1 for the
                            trace's own writer */
    sq_trace_param *params;
    size_t nparams;
    sq_st_dtype dtype;
    char *topo, *model;
    /* steps finished (every file written), and whether each has weights:
    ** weights come at a cadence of their own (every step, none, or some),
    ** which the manifest records */
    uint32_t *steps;
    unsigned char *weighted;
    size_t nsteps, capsteps, nweighted;
    /* the step being written */
    int cur_open;        /* a step is under way */
    uint32_t cur_step;
    int cur_weights;     /* its weights file was written */
    int cur_next_worker; /* gradient files come in worker order */
    /* the file being written */
    sq_st_writer *file;
    int file_worker;
    size_t next_param;
    void *conv;          /* conversion buffer */
};

#define CONV_CHUNK ((size_t)1 << 20)

/* Creates the directories above path that are missing, like mkdir -p; a
** failure shows when path itself cannot be created. */
static void make_parents(const char *path)
{
    char *p = strdup(path);
    if (!p) return;
    for (char *slash = strchr(p + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        mkdir(p, 0777);
        *slash = '/';
    }
    free(p);
}

/* ------------------------------------------------------------------------ */
/* Identity and the writer's lock                                           */
/* ------------------------------------------------------------------------ */

#define WRITER_FILE ".shardq-writer"

uint64_t sq_fnv1a64(const void *p, size_t n, uint64_t h)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

void sq_trace_id_of(const char *owner, char id[SQ_TRACE_ID_MAX])
{
    /* two passes from two bases: 128 bits, so that two owners do not share
    ** an id by accident */
    size_t n = strlen(owner);
    snprintf(id, SQ_TRACE_ID_MAX, "%016llx%016llx",
             (unsigned long long)sq_fnv1a64(owner, n, SQ_FNV1A64_BASIS),
             (unsigned long long)sq_fnv1a64(owner, n, 0x84222325cbf29ce4ULL));
}

/* An id no other writer has: 16 random bytes (the time and the pid where
** there is no /dev/urandom). */
static void random_id(char id[SQ_TRACE_ID_MAX])
{
    unsigned char r[16];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, r, sizeof r) : -1;
    if (fd >= 0) close(fd);
    if (got != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t a = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        uint64_t b = (uint64_t)getpid();
        memcpy(r, &a, 8);
        memcpy(r + 8, &b, 8);
    }
    for (int i = 0; i < 16; i++) snprintf(id + 2 * i, 3, "%02x", r[i]);
}

/* What the writer file says: "pid N\nOWNER\n". *owner is NULL when the file
** is empty (just created), else malloc'd ("" for a writer without owner). */
static void read_marker(int fd, long *pid, char **owner)
{
    char buf[16384];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    *pid = 0;
    *owner = NULL;
    if (n <= 0) return;
    buf[n] = '\0';
    if (sscanf(buf, "pid %ld", pid) != 1) *pid = 0;
    char *nl = strchr(buf, '\n');
    const char *o = nl ? nl + 1 : "";
    size_t len = strlen(o);
    if (len && o[len - 1] == '\n') len--;
    *owner = strndup(o, len);
}

/* The "owner" of dir/manifest.json, malloc'd; NULL when there is no
** manifest, or no owner in it. */
static char *manifest_owner(const char *dir)
{
    char *path = sq_trace_join(dir, "manifest.json"), *text = NULL, *owner = NULL;
    FILE *f = path ? fopen(path, "rb") : NULL;
    struct stat st;
    if (f && fstat(fileno(f), &st) == 0 && st.st_size < (64 << 20) &&
        (text = malloc((size_t)st.st_size + 1)) != NULL) {
        size_t n = fread(text, 1, (size_t)st.st_size, f);
        text[n] = '\0';
        cJSON *root = cJSON_Parse(text);
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "owner");
        if (cJSON_IsString(o)) owner = strdup(o->valuestring);
        cJSON_Delete(root);
    }
    if (f) fclose(f);
    free(text);
    free(path);
    return owner;
}

/* The names a trace writer writes: manifest.json (and its temporary) at the
** top, step-NNNNNN directories, and in them the step's files (and their
** temporaries). */
static int is_step_dir(const char *n)
{
    return !strncmp(n, "step-", 5) && strlen(n + 5) >= 6 && strspn(n + 5, "0123456789") ==
                                                                strlen(n + 5);
}

static int is_step_file(const char *n)
{
    return !strncmp(n, "weights.safetensors", 19) || !strncmp(n, "grads-w", 7);
}

/* Entries of dir besides . .. and the writer file; SQ_ERR_IO (negative, errno
** set) when it cannot be read. */
static long count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return SQ_ERR_IO;
    long n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, WRITER_FILE);
    closedir(d);
    return n;
}

/* Removes the files of a trace from dir (dry: only checks that there is
** nothing else). A file no trace writer writes is never removed: it is
** named as the error. */
static int remove_trace(const char *dir, int dry, sq_error *err)
{
    DIR *d = opendir(dir);
    if (!d) {
        return sq_error_set(err, SQ_ERR_IO, "%s: cannot read: %s", dir, strerror(errno));
    }
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d)) != NULL;) {
        const char *n = e->d_name;
        if (!strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, WRITER_FILE)) continue;
        char *path = sq_trace_join(dir, n);
        if (!path) {
            rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", dir);
        } else if (!strncmp(n, "manifest.json", 13)) {
            if (!dry && unlink(path) != 0) {
                rc = sq_error_set(err, SQ_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
            }
        } else if (is_step_dir(n)) {
            DIR *sd = opendir(path);
            if (!sd) {
                rc = sq_error_set(err, SQ_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
            }
            for (struct dirent *f; rc == 0 && sd && (f = readdir(sd)) != NULL;) {
                if (!strcmp(f->d_name, ".") || !strcmp(f->d_name, "..")) continue;
                char *fp = sq_trace_join(path, f->d_name);
                if (!fp || !is_step_file(f->d_name)) {
                    rc = sq_error_set(err, SQ_ERR_CONFLICT,
                                      "%s/%s: not a file of a trace: not removing it", path,
                                      f->d_name);
                } else if (!dry && unlink(fp) != 0) {
                    rc = sq_error_set(err, SQ_ERR_IO, "%s: cannot remove: %s", fp, strerror(errno));
                }
                free(fp);
            }
            if (sd) closedir(sd);
            if (rc == 0 && !dry && rmdir(path) != 0) {
                rc = sq_error_set(err, SQ_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
            }
        } else {
            rc = sq_error_set(err, SQ_ERR_CONFLICT, "%s: not a file of a trace: not removing it",
                              path);
        }
        free(path);
    }
    closedir(d);
    return rc;
}

/* Whether the directory may be written by this owner, before any lock: it
** is empty, or it has a writer file (decided under the lock), or it holds a
** finished trace of this owner. */
static int may_write(const char *dir, const char *owner)
{
    char *lpath = sq_trace_join(dir, WRITER_FILE);
    int marker = lpath && access(lpath, F_OK) == 0;
    free(lpath);
    if (marker || count_entries(dir) == 0) return 1;
    char *mo = owner ? manifest_owner(dir) : NULL;
    int ours = mo && !strcmp(mo, owner);
    free(mo);
    return ours;
}

/* Takes the directory for one writer: locks dir/.shardq-writer (another
** live writer is refused, named by its pid), checks that the directory is
** empty or holds only a trace of this owner, finished or cut short (which
** is removed: the owner writes it again), and writes this writer's pid and
** owner into the file. The locked descriptor goes into *lock_fd. */
static int take_dir(const char *dir, const char *owner, int *lock_fd, sq_error *err)
{
    int rc;
    *lock_fd = -1;
    if (!may_write(dir, owner)) {
        return sq_error_set(err, SQ_ERR_CONFLICT,
                            "%s: cannot create the trace directory: it exists and is not "
                            "empty",
                            dir);
    }
    char *lpath = sq_trace_join(dir, WRITER_FILE), *prev = NULL;
    int fd = -1, created = 0;
    if (!lpath) {
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", dir);
    }
    for (int tries = 0;; tries++) {
        fd = open(lpath, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0) {
            rc = sq_error_set(err, SQ_ERR_IO, "%s: cannot create: %s", lpath, strerror(errno));
            goto fail;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            long pid;
            read_marker(fd, &pid, &prev);
            if (e == EWOULDBLOCK) {
                char who[64] = "";
                if (pid > 0) snprintf(who, sizeof who, " (pid %ld)", pid);
                rc = sq_error_set(err, SQ_ERR_BUSY,
                                  "%s: another process%s is writing a trace into this "
                                  "directory",
                                  dir, who);
            } else {
                rc = sq_error_set(err, SQ_ERR_IO, "%s: cannot lock: %s", lpath, strerror(e));
            }
            goto fail;
        }
        /* a writer that finished meanwhile removed the file: lock the new one */
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(lpath, &b) == 0 && a.st_ino == b.st_ino &&
            a.st_dev == b.st_dev)
            break;
        close(fd);
        fd = -1;
        if (tries == 10) {
            rc = sq_error_set(err, SQ_ERR_IO, "%s: cannot lock: it keeps being replaced", lpath);
            goto fail;
        }
    }
    long pid;
    read_marker(fd, &pid, &prev);
    /* an empty file is this writer's own, until it names the writer */
    created = !prev;
    long n = count_entries(dir);
    int ours = 0;
    if (owner && prev) {
        ours = !strcmp(prev, owner);
    } else if (owner) {
        char *mo = manifest_owner(dir);
        ours = mo && !strcmp(mo, owner);
        free(mo);
    }
    if (n != 0 && !ours) {
        if (n < 0)
            rc = sq_error_set(err, SQ_ERR_IO, "%s: cannot read: %s", dir, strerror(errno));
        else if (prev)
            rc = sq_error_set(err, SQ_ERR_CONFLICT,
                              "%s: holds the unfinished trace of another writer (pid %ld%s"
                              "%s%s, which stopped before the end): remove the directory, or write "
                              "the trace elsewhere",
                              dir, pid, *prev ? ", '" : "", prev, *prev ? "'" : "");
        else
            rc = sq_error_set(err, SQ_ERR_CONFLICT,
                              "%s: cannot create the trace directory: it exists and is "
                              "not empty",
                              dir);
        goto fail;
    }
    if (n > 0 && (rc = remove_trace(dir, 1, err)) != 0) goto fail;
    char head[32];
    int hl = snprintf(head, sizeof head, "pid %ld\n", (long)getpid());
    const char *o = owner ? owner : "";
    if (ftruncate(fd, 0) != 0 || pwrite(fd, head, (size_t)hl, 0) != hl ||
        pwrite(fd, o, strlen(o), hl) != (ssize_t)strlen(o) ||
        pwrite(fd, "\n", 1, hl + (off_t)strlen(o)) != 1) {
        rc = sq_error_set(err, SQ_ERR_IO, "%s: cannot write: %s", lpath, strerror(errno));
        goto fail;
    }
    /* from here the file names this writer, and stays if it fails */
    created = 0;
    /* the trace of this owner that was there is written again from the start */
    if (n > 0 && (rc = remove_trace(dir, 0, err)) != 0) goto fail;
    free(prev);
    free(lpath);
    *lock_fd = fd;
    return SQ_OK;
fail:
    if (created) unlink(lpath); /* refused: leave nothing behind */
    if (fd >= 0) close(fd);
    free(prev);
    free(lpath);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                  */
/* ------------------------------------------------------------------------ */

int sq_trace_writer_open(sq_trace_writer **out, const char *dir, int workers,
                         const sq_trace_param *p, size_t np, sq_st_dtype dtype, const char *topo,
                         const char *model, sq_error *err)
{
    return sq_trace_writer_open_as(out, dir, NULL, workers, p, np, dtype, topo, model, err);
}

/* The checks every writer makes of its arguments. */
static int check_args(const char *dir, int workers, const sq_trace_param *p, size_t np,
                      sq_st_dtype dtype, const char *topo, sq_error *err)
{
    if (workers < 1 || workers > SQ_TRACE_MAX_WORKERS) {
        return sq_error_set(err, SQ_ERR_ARG, "%s: workers: %d is not from 1 to %d", dir, workers,
                            SQ_TRACE_MAX_WORKERS);
    }
    if (np == 0) {
        return sq_error_set(err, SQ_ERR_ARG, "%s: no params to write", dir);
    }
    if (topo) {
        int k = 0, g = 0, used = 0;
        if (sscanf(topo, "%dx%d%n", &k, &g, &used) != 2 || topo[used] || k < 1 || g < 1 ||
            (long)k * g != workers || strlen(topo) >= sizeof ((sq_trace *)0)->topo) {
            return sq_error_set(err, SQ_ERR_ARG,
                                "%s: field 'topology': '%s' is not \"KxG\" with K * G = "
                                "workers (%d)",
                                dir, topo, workers);
        }
    }
    if (!sq_st_dtype_is_float(dtype)) {
        return sq_error_set(err, SQ_ERR_ARG, "%s: dtype %s: a trace holds F32, F16, BF16 or F64",
                            dir, sq_st_dtype_name(dtype) ? sq_st_dtype_name(dtype) : "?");
    }
    for (size_t i = 0; i < np; i++) {
        uint64_t n;
        if (!p[i].name || !*p[i].name || p[i].ndim < 0 || p[i].ndim > SQ_ST_MAXDIM ||
            sq_trace_shape_product(p[i].shape, p[i].ndim, &n)) {
            return sq_error_set(err, SQ_ERR_ARG, "%s: param %zu: invalid name or shape", dir, i);
        }
    }
    if (np > 1) { /* by sorting: a model of 100k params is no quadratic wait */
        const char **names = malloc(np * sizeof *names);
        int oom = !names;
        const char *dup = NULL;
        if (names) {
            for (size_t i = 0; i < np; i++) names[i] = p[i].name;
            dup = sq_dup_string(names, np, &oom);
        }
        int rc = oom   ? sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", dir)
                 : dup ? sq_error_set(err, SQ_ERR_ARG, "%s: param '%s' given twice", dir, dup)
                       : SQ_OK;
        free(names);
        if (rc) return rc;
    }
    return SQ_OK;
}

/* A writer of the checked arguments, with the lock descriptor fd (-1 for
** none), which it owns from here, even when it fails. */
static int new_writer(sq_trace_writer **out, int fd, const char *dir, const char *owner,
                      int workers, const sq_trace_param *p, size_t np, sq_st_dtype dtype,
                      const char *topo, const char *model, sq_error *err)
{
    sq_trace_writer *w = calloc(1, sizeof *w);
    if (!w) {
        if (fd >= 0) close(fd);
        goto oom;
    }
    w->lock_fd = fd;
    w->part = -1;
    w->dir = strdup(dir);
    w->owner = owner ? strdup(owner) : NULL;
    w->workers = workers;
    w->dtype = dtype;
    w->params = calloc(np, sizeof *w->params);
    w->nparams = np;
    w->topo = topo ? strdup(topo) : NULL;
    w->model = model ? strdup(model) : NULL;
    w->conv = malloc(CONV_CHUNK * sizeof(double));
    if (!w->dir || !w->params || !w->conv || (topo && !w->topo) || (model && !w->model) ||
        (owner && !w->owner))
        goto oom;
    for (size_t i = 0; i < np; i++) {
        w->params[i] = p[i];
        w->params[i].name = strdup(p[i].name);
        if (!w->params[i].name) goto oom;
        sq_trace_shape_product(p[i].shape, p[i].ndim, &w->params[i].n);
    }
    *out = w;
    return 0;
oom:
    sq_trace_writer_abort(w);
    return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", dir);
}

int sq_trace_writer_open_as(sq_trace_writer **out, const char *dir, const char *owner, int workers,
                            const sq_trace_param *p, size_t np, sq_st_dtype dtype, const char *topo,
                            const char *model, sq_error *err)
{
    *out = NULL;
    int fd, rc = check_args(dir, workers, p, np, dtype, topo, err);
    if (rc) return rc;
    make_parents(dir);
    if (mkdir(dir, 0777) != 0) {
        int e = errno;
        struct stat st;
        if (e != EEXIST || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            return sq_error_set(err, SQ_ERR_IO, "%s: cannot create the trace directory: %s", dir,
                                e == EEXIST ? "it exists and is not a directory" : strerror(e));
        }
    }
    if ((rc = take_dir(dir, owner, &fd, err)) != 0) return rc;
    if ((rc = new_writer(out, fd, dir, owner, workers, p, np, dtype, topo, model, err)) != 0)
        return rc;
    if (owner) sq_trace_id_of(owner, (*out)->id);
    else random_id((*out)->id);
    return 0;
}

const char *sq_trace_writer_id(const sq_trace_writer *w)
{
    return w->id;
}

/* Whether id is 32 lower-case hexadecimal digits, as the writers make them. */
static int valid_id(const char *id)
{
    return id && strlen(id) == SQ_TRACE_ID_MAX - 1 && strspn(id, "0123456789abcdef") ==
                                                          SQ_TRACE_ID_MAX - 1;
}

int sq_trace_writer_join(sq_trace_writer **out, const char *dir, const char *id, int worker,
                         int workers, const sq_trace_param *p, size_t np, sq_st_dtype dtype,
                         sq_error *err)
{
    *out = NULL;
    int rc = check_args(dir, workers, p, np, dtype, NULL, err);
    if (rc) return rc;
    if (!valid_id(id)) {
        return sq_error_set(err, SQ_ERR_ARG,
                            "%s: trace id '%s': not the 32 hexadecimal digits of a writer's id",
                            dir, id ? id : "(null)");
    }
    if (worker < 0 || worker >= workers) {
        return sq_error_set(err, SQ_ERR_ARG, "%s: worker %d: the trace has %d", dir, worker,
                            workers);
    }
    /* the owner's lock must be held: joining a directory nobody writes
    ** would leave files no manifest will ever list */
    char *lpath = sq_trace_join(dir, WRITER_FILE);
    if (!lpath) return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", dir);
    int fd = open(lpath, O_RDONLY | O_CLOEXEC), e = errno, held = 0;
    if (fd >= 0) {
        if (flock(fd, LOCK_SH | LOCK_NB) == 0) flock(fd, LOCK_UN);
        else held = errno == EWOULDBLOCK;
        close(fd);
    }
    free(lpath);
    if (!held) {
        struct stat st;
        int nodir = stat(dir, &st) != 0;
        return sq_error_set(err, SQ_ERR_NOTFOUND,
                            "%s: %s: the trace's own writer opens it before the other processes "
                            "join (and every process must see the same directory)",
                            dir, nodir ? "no such directory"
                                 : fd < 0 && e == ENOENT ? "no trace is being written here"
                                                         : "no writer holds this directory");
    }
    if ((rc = new_writer(out, -1, dir, NULL, workers, p, np, dtype, NULL, NULL, err)) != 0)
        return rc;
    memcpy((*out)->id, id, SQ_TRACE_ID_MAX);
    (*out)->part = worker;
    return 0;
}

void sq_trace_writer_abort(sq_trace_writer *w)
{
    if (!w) return;
    if (w->file) sq_st_writer_abort(w->file);
    /* the writer file stays: it names the owner of what was written */
    if (w->lock_fd >= 0) close(w->lock_fd);
    free(w->owner);
    if (w->params)
        for (size_t i = 0; i < w->nparams; i++) free(w->params[i].name);
    free(w->params);
    free(w->dir);
    free(w->topo);
    free(w->model);
    free(w->steps);
    free(w->weighted);
    free(w->conv);
    free(w);
}

/* The step under way is complete: every gradient file, and the weights
** file if the steps have one (a joined writer: its worker's file). */
static int finish_step(sq_trace_writer *w, sq_error *err)
{
    if (!w->cur_open) return 0;
    int last = w->part >= 0 ? w->part + 1 : w->workers;
    if (w->cur_next_worker != last) {
        return sq_error_set(err, SQ_ERR_ARG, "%s: step %u: grads-w%02d.safetensors was not %s",
                            w->dir, (unsigned)w->cur_step, w->cur_next_worker,
                            w->part < 0 ? "written (or adopted)" : "written");
    }
    if (w->nsteps == w->capsteps) {
        size_t cap = w->capsteps ? 2 * w->capsteps : 16;
        uint32_t *p = realloc(w->steps, cap * sizeof *p);
        if (p) w->steps = p;
        unsigned char *q = p ? realloc(w->weighted, cap) : NULL;
        if (!q) {
            return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", w->dir);
        }
        w->weighted = q;
        w->capsteps = cap;
    }
    w->weighted[w->nsteps] = (unsigned char)w->cur_weights;
    w->nweighted += w->cur_weights != 0;
    w->steps[w->nsteps++] = w->cur_step;
    w->cur_open = 0;
    return 0;
}

/* The order rules of the files, for the file of (step, worker) that comes
** next, written or adopted: steps strictly increase, and a step's files come
** as weights, then workers 0, 1, ... (a joined writer: its worker's file
** alone). A new step's directory is created. */
static int enter_file(sq_trace_writer *w, uint32_t step, int worker, sq_error *err)
{
    int rc;
    if (w->file) {
        return sq_error_set(err, SQ_ERR_ARG, "%s: a file is still being written", w->dir);
    }
    if (worker < -1 || worker >= w->workers) {
        return sq_error_set(err, SQ_ERR_ARG, "%s: worker %d: the trace has %d", w->dir, worker,
                            w->workers);
    }
    if (w->part >= 0 && worker != w->part) {
        char what[32];
        if (worker < 0) snprintf(what, sizeof what, "weights.safetensors");
        else snprintf(what, sizeof what, "grads-w%02d.safetensors", worker);
        return sq_error_set(err, SQ_ERR_ARG,
                            "%s: %s: this process joined the trace as worker %d and writes "
                            "grads-w%02d.safetensors alone",
                            w->dir, what, w->part, w->part);
    }
    if (!w->cur_open || step != w->cur_step) {
        if (w->cur_open && step < w->cur_step) {
            return sq_error_set(err, SQ_ERR_ARG, "%s: step %u after step %u: steps must increase",
                                w->dir, (unsigned)step, (unsigned)w->cur_step);
        }
        if ((rc = finish_step(w, err)) != 0) return rc;
        if (w->nsteps && step <= w->steps[w->nsteps - 1]) {
            return sq_error_set(err, SQ_ERR_ARG, "%s: step %u after step %u: steps must increase",
                                w->dir, (unsigned)step, (unsigned)w->steps[w->nsteps - 1]);
        }
        char sdir[64];
        snprintf(sdir, sizeof sdir, "step-%06u", (unsigned)step);
        char *path = sq_trace_join(w->dir, sdir);
        if (!path || (mkdir(path, 0777) != 0 && errno != EEXIST)) {
            rc = path ? sq_error_set(err, SQ_ERR_IO, "%s: cannot create: %s", path, strerror(errno))
                      : sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", w->dir);
            free(path);
            return rc;
        }
        free(path);
        w->cur_open = 1;
        w->cur_step = step;
        w->cur_weights = 0;
        w->cur_next_worker = w->part >= 0 ? w->part : 0;
    }
    if (worker < 0 ? (w->cur_weights || w->cur_next_worker > 0) : worker != w->cur_next_worker) {
        if (w->part >= 0) {
            return sq_error_set(err, SQ_ERR_ARG, "%s: step %u: grads-w%02d.safetensors again",
                                w->dir, (unsigned)step, worker);
        }
        return sq_error_set(err, SQ_ERR_ARG,
                            "%s: step %u: files must come as weights, then grads-w00, w01, "
                            "... (got %s%d)",
                            w->dir, (unsigned)step, worker < 0 ? "weights" : "worker ",
                            worker < 0 ? 0 : worker);
    }
    return 0;
}

int sq_trace_file_begin(sq_trace_writer *w, uint32_t step, int worker, sq_error *err)
{
    int rc = enter_file(w, step, worker, err);
    if (rc) return rc;
    char *fname = sq_trace_step_file(w->dir, step, worker);
    sq_st_tensor *t = calloc(w->nparams, sizeof *t);
    if (!fname || !t) {
        free(fname);
        free(t);
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", w->dir);
    }
    for (size_t i = 0; i < w->nparams; i++) {
        t[i].name = w->params[i].name;
        t[i].dtype = w->dtype;
        t[i].ndim = w->params[i].ndim;
        memcpy(t[i].shape, w->params[i].shape, sizeof t[i].shape);
    }
    char step_text[16];
    snprintf(step_text, sizeof step_text, "%u", (unsigned)step);
    sq_st_kv meta[3] = {{"format", SQ_TRACE_FORMAT}, {"step", step_text}, {"trace_id", w->id}};
    rc = sq_st_writer_open(&w->file, fname, t, w->nparams, meta, 3, err);
    free(fname);
    free(t);
    if (rc) {
        w->file = NULL;
        return rc;
    }
    w->file_worker = worker;
    w->next_param = 0;
    return 0;
}

/* Whether file f, at fname, is exactly what this writer would have written
** for step: its metadata, and its tensors by name, dtype and shape. */
static int check_adopted(const sq_trace_writer *w, const char *fname, const sq_st_file *f,
                         uint32_t step, sq_error *err)
{
    const char *v = sq_st_meta_get(f, "format");
    if (!v || strcmp(v, SQ_TRACE_FORMAT)) {
        return sq_error_set(err, SQ_ERR_FORMAT, "%s: field 'format': %s%s%s, not a file of a "
                            "trace writer", fname, v ? "'" : "missing", v ? v : "", v ? "'" : "");
    }
    v = sq_st_meta_get(f, "trace_id");
    if (!v || strcmp(v, w->id)) {
        return sq_error_set(err, SQ_ERR_CONFLICT,
                            "%s: field 'trace_id': %s%s%s, but this trace's id is '%s': a file of "
                            "another trace", fname, v ? "'" : "missing", v ? v : "", v ? "'" : "",
                            w->id);
    }
    char step_text[16];
    snprintf(step_text, sizeof step_text, "%u", (unsigned)step);
    v = sq_st_meta_get(f, "step");
    if (!v || strcmp(v, step_text)) {
        return sq_error_set(err, SQ_ERR_FORMAT, "%s: field 'step': %s%s%s, expected %u", fname,
                            v ? "'" : "missing", v ? v : "", v ? "'" : "", (unsigned)step);
    }
    for (size_t i = 0; i < w->nparams; i++) {
        const sq_trace_param *p = &w->params[i];
        const sq_st_entry *e = sq_st_find(f, p->name);
        if (!e) {
            return sq_error_set(err, SQ_ERR_FORMAT, "%s: tensor '%s': missing", fname, p->name);
        }
        if (e->dtype != w->dtype) {
            return sq_error_set(err, SQ_ERR_FORMAT,
                                "%s: tensor '%s': field 'dtype': %s, but the trace is written "
                                "in %s",
                                fname, p->name, sq_st_dtype_name(e->dtype),
                                sq_st_dtype_name(w->dtype));
        }
        if (e->ndim != p->ndim || memcmp(e->shape, p->shape, (size_t)p->ndim * sizeof *p->shape)) {
            char a[128], b[128];
            sq_npy_shape_str(e->shape, e->ndim, a, sizeof a);
            sq_npy_shape_str(p->shape, p->ndim, b, sizeof b);
            return sq_error_set(err, SQ_ERR_FORMAT,
                                "%s: tensor '%s': field 'shape': %s, but the trace's param is %s",
                                fname, p->name, a, b);
        }
    }
    if (f->ntensors != w->nparams) {
        return sq_error_set(err, SQ_ERR_FORMAT, "%s: %zu tensors, but the trace has %zu params",
                            fname, f->ntensors, w->nparams);
    }
    return 0;
}

int sq_trace_file_adopt(sq_trace_writer *w, uint32_t step, int worker, sq_error *err)
{
    if (w->part >= 0) {
        return sq_error_set(err, SQ_ERR_ARG,
                            "%s: worker %d's process joined the trace: the trace's own writer "
                            "adopts the files of the others",
                            w->dir, w->part);
    }
    if (worker < 0) {
        return sq_error_set(err, SQ_ERR_ARG,
                            "%s: step %u: weights.safetensors: only gradient files are adopted",
                            w->dir, (unsigned)step);
    }
    int rc = enter_file(w, step, worker, err);
    if (rc) return rc;
    char *fname = sq_trace_step_file(w->dir, step, worker);
    if (!fname) return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", w->dir);
    struct stat st;
    if (stat(fname, &st) != 0 && errno == ENOENT) {
        rc = sq_error_set(err, SQ_ERR_NOTFOUND,
                          "%s: missing: worker %d's process has not written it (adopt a step's "
                          "files after every process ended them)",
                          fname, worker);
    } else {
        sq_st_file f;
        rc = sq_st_open(fname, &f, err);
        if (rc == 0) {
            rc = check_adopted(w, fname, &f, step, err);
            sq_st_free(&f);
        }
    }
    free(fname);
    if (rc == 0) w->cur_next_worker++;
    return rc;
}

int sq_trace_file_put(sq_trace_writer *w, const float *x, sq_error *err)
{
    int rc;
    if (!w->file || w->next_param >= w->nparams) {
        return sq_error_set(err, SQ_ERR_ARG, "%s: no tensor is expected now", w->dir);
    }
    uint64_t n = w->params[w->next_param].n;
    size_t isz = sq_st_dtype_size(w->dtype);
    for (uint64_t i = 0; i < n; i += CONV_CHUNK) {
        size_t m = (size_t)(n - i < CONV_CHUNK ? n - i : CONV_CHUNK);
        const void *src = x + i;
        switch (w->dtype) {
        case SQ_ST_F16: sq_f32_to_f16_n(x + i, w->conv, m); src = w->conv; break;
        case SQ_ST_BF16: sq_f32_to_bf16_n(x + i, w->conv, m); src = w->conv; break;
        case SQ_ST_F64:
            for (size_t j = 0; j < m; j++) ((double *)w->conv)[j] = x[i + j];
            src = w->conv;
            break;
        default: break;
        }
        if ((rc = sq_st_writer_put(w->file, src, (uint64_t)m * isz, err)) != 0) return rc;
    }
    w->next_param++;
    return 0;
}

int sq_trace_file_end(sq_trace_writer *w, sq_error *err)
{
    int rc;
    if (!w->file) {
        return sq_error_set(err, SQ_ERR_ARG, "%s: no file is being written", w->dir);
    }
    sq_st_writer *f = w->file;
    w->file = NULL;
    if (w->next_param != w->nparams) {
        sq_st_writer_abort(f);
        return sq_error_set(err, SQ_ERR_ARG, "%s: step %u: %zu of %zu params written", w->dir,
                            (unsigned)w->cur_step, w->next_param, w->nparams);
    }
    if ((rc = sq_st_writer_commit(f, err)) != 0) return rc;
    if (w->file_worker < 0)
        w->cur_weights = 1;
    else
        w->cur_next_worker++;
    return 0;
}

int sq_trace_writer_close(sq_trace_writer *w, sq_error *err)
{
    int rc;
    char *text = NULL, *mpath = NULL;
    cJSON *root = NULL;
    if (w->file) {
        rc = sq_error_set(err, SQ_ERR_ARG, "%s: a file is still being written", w->dir);
        goto done;
    }
    if ((rc = finish_step(w, err)) != 0) goto done;
    if (w->part >= 0) goto done; /* the trace's own writer lists the steps */
    if (w->nsteps == 0) {
        rc = sq_error_set(err, SQ_ERR_ARG, "%s: no step was written", w->dir);
        goto done;
    }
    root = cJSON_CreateObject();
    cJSON *steps = cJSON_CreateArray(), *params = cJSON_CreateArray();
    cJSON_AddStringToObject(root, "format", SQ_TRACE_FORMAT);
    cJSON_AddNumberToObject(root, "version", SQ_TRACE_VERSION);
    cJSON_AddStringToObject(root, "id", w->id);
    if (w->owner) cJSON_AddStringToObject(root, "owner", w->owner);
    cJSON_AddNumberToObject(root, "workers", w->workers);
    if (w->nweighted == 0 || w->nweighted == w->nsteps) {
        /* every step or none: the boolean every reader of version 1 reads */
        cJSON_AddBoolToObject(root, "weights", w->nweighted != 0);
    } else {
        cJSON *ws = cJSON_CreateArray();
        for (size_t i = 0; i < w->nsteps; i++)
            if (w->weighted[i]) cJSON_AddItemToArray(ws, cJSON_CreateNumber(w->steps[i]));
        cJSON_AddItemToObject(root, "weights", ws);
    }
    cJSON_AddStringToObject(root, "dtype", sq_st_dtype_name(w->dtype));
    if (w->topo) cJSON_AddStringToObject(root, "topology", w->topo);
    if (w->model) {
        cJSON *m = cJSON_Parse(w->model);
        if (!m) m = cJSON_CreateString(w->model);
        cJSON_AddItemToObject(root, "model", m);
    }
    cJSON_AddItemToObject(root, "steps", steps);
    cJSON_AddItemToObject(root, "params", params);
    for (size_t i = 0; i < w->nsteps; i++)
        cJSON_AddItemToArray(steps, cJSON_CreateNumber(w->steps[i]));
    for (size_t i = 0; i < w->nparams; i++) {
        cJSON *p = cJSON_CreateObject(), *shape = cJSON_CreateArray();
        cJSON_AddStringToObject(p, "name", w->params[i].name);
        for (int d = 0; d < w->params[i].ndim; d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)w->params[i].shape[d]));
        cJSON_AddItemToObject(p, "shape", shape);
        cJSON_AddItemToArray(params, p);
    }
    text = cJSON_Print(root);
    mpath = sq_trace_join(w->dir, "manifest.json");
    if (!text || !mpath) {
        rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", w->dir);
        goto done;
    }
    sq_wfile f;
    if ((rc = sq_wfile_open(&f, mpath, err)) != 0) goto done;
    sq_wfile_write(&f, text, strlen(text));
    sq_wfile_write(&f, "\n", 1);
    rc = sq_wfile_commit(&f, err);
    if (rc == 0) {
        /* finished: no writer file, and the lock goes with it */
        char *lpath = sq_trace_join(w->dir, WRITER_FILE);
        if (lpath) unlink(lpath);
        free(lpath);
    }
done:
    cJSON_Delete(root);
    free(text);
    free(mpath);
    sq_trace_writer_abort(w);
    return rc;
}
