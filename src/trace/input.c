/*
** input.c -- opening inputs safely, and duplicate JSON keys. See input.h.
*/
#include "trace/input.h"
#include "trace/wfile.h"
#include "shardq/codec.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Opening                                                                  */
/* ------------------------------------------------------------------------ */

int sq_input_is_stdin(const char *path)
{
    return path && (strcmp(path, "-") == 0 || strcmp(path, "/dev/stdin") == 0);
}

/* What a file that is not a regular one is, for messages. */
static const char *kind_of(mode_t m)
{
    return S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
           : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a file";
}

int sq_input_open(const char *path, int flags, sq_input *in, sq_error *err)
{
    memset(in, 0, sizeof *in);
    in->fd = -1;
    if (!path) {
        return sq_error_set(err, SQ_ERR_ARG, "(null): no file name");
    }
    int std = (flags & SQ_INPUT_STDIN) && sq_input_is_stdin(path);
    /* Standard input is a copy of descriptor 0 (closing it leaves stdin
    ** open); anything else is opened without blocking, since open() of a
    ** FIFO waits for a writer. */
    int fd = std ? fcntl(0, F_DUPFD_CLOEXEC, 0) : open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        /* a file that is not there is named as missing, not as a failed read */
        return sq_error_set(err, errno == ENOENT ? SQ_ERR_NOTFOUND : SQ_ERR_IO,
                            "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int rc = sq_error_set(err, SQ_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return rc;
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return sq_error_set(err, SQ_ERR_IO, "%s: is a directory", path);
    }
    int pipe_in = std && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
    if (!S_ISREG(st.st_mode) && !pipe_in) {
        close(fd);
        return sq_error_set(err, SQ_ERR_IO, "%s: not a regular file (%s)%s", path,
                            kind_of(st.st_mode),
                            std ? ": standard input must be a file or a pipe" : "");
    }
    if (!std) {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
            int rc = sq_error_set(err, SQ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
            close(fd);
            return rc;
        }
    }
    in->fd = fd;
    in->stream = pipe_in;
    in->size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
    return 0;
}

FILE *sq_input_fopen(const char *path, int flags, sq_input *in, sq_error *err)
{
    if (sq_input_open(path, flags, in, err)) return NULL;
    FILE *f = fdopen(in->fd, "rb");
    if (!f) {
        sq_error_set(err, SQ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        close(in->fd);
        in->fd = -1;
    }
    return f;
}

/* ------------------------------------------------------------------------ */
/* Duplicate keys                                                           */
/* ------------------------------------------------------------------------ */

typedef struct keyed {
    const char *key;
    size_t index; /* place in the object */
} keyed;

static int cmp_keyed(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : x->index < y->index ? -1 : x->index > y->index;
}

const char *sq_dup_string(const char *const *keys, size_t n, int *oom)
{
    *oom = 0;
    if (n < 2) return NULL;
    keyed *k = malloc(n * sizeof *k);
    if (!k) {
        *oom = 1;
        return NULL;
    }
    for (size_t i = 0; i < n; i++) k[i] = (keyed){keys[i] ? keys[i] : "", i};
    qsort(k, n, sizeof *k, cmp_keyed);
    const char *dup = NULL;
    size_t at = n;
    for (size_t i = 1; i < n; i++)
        if (strcmp(k[i].key, k[i - 1].key) == 0 && k[i].index < at) {
            at = k[i].index;
            dup = k[i].key;
        }
    free(k);
    return dup;
}

/* The duplicate key of object o, as sq_dup_string finds it. */
static const char *object_dup(const cJSON *o, int *oom)
{
    size_t n = 0;
    for (const cJSON *c = o->child; c; c = c->next) n++;
    if (n < 2) return NULL;
    const char **keys = malloc(n * sizeof *keys);
    if (!keys) {
        *oom = 1;
        return NULL;
    }
    size_t i = 0;
    for (const cJSON *c = o->child; c; c = c->next) keys[i++] = c->string;
    const char *dup = sq_dup_string(keys, n, oom);
    free(keys);
    return dup;
}

/* Depth-first over v, whose path is where[0..used). */
static int walk_dups(const cJSON *v, const char **key, char *where, size_t len, size_t used,
                     int *oom)
{
    if (cJSON_IsObject(v)) {
        const char *d = object_dup(v, oom);
        if (d || *oom) {
            *key = d;
            return 1;
        }
    }
    if (!cJSON_IsObject(v) && !cJSON_IsArray(v)) return 0;
    size_t i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        if (len) {
            if (cJSON_IsArray(v))
                snprintf(where + used, len - used, "[%zu]", i);
            else
                snprintf(where + used, len - used, "%s%s", used ? "." : "", c->string);
        }
        size_t u = len ? strlen(where) : 0;
        if (walk_dups(c, key, where, len, u, oom)) return 1;
        if (len) where[used] = '\0';
    }
    return 0;
}

int sq_json_dup_key(const cJSON *v, const char **key, char *where, size_t wherelen)
{
    int oom = 0;
    *key = NULL;
    if (wherelen) where[0] = '\0';
    if (!walk_dups(v, key, where, wherelen, 0, &oom)) return 0;
    if (oom) return SQ_ERR_NOMEM;
    if (wherelen && !where[0]) snprintf(where, wherelen, "the top level");
    return 1;
}
