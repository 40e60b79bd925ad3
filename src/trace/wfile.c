/*
** wfile.c -- safe replacement of a file. See wfile.h.
*/
#include "trace/wfile.h"
#include "sq_protect.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

int sq_wfile_open(sq_wfile *w, const char *path, sq_error *err)
{
    memset(w, 0, sizeof *w);
    if (!path || !*path) {
        return sq_error_set(err, SQ_ERR_ARG, "empty output file name");
    }
    /* a database this process has open (or its -wal, -shm, -journal):
    ** the rename below would put this file in its place */
    char which[1024];
    if (sq_path_is_protected(path, which, sizeof which)) {
        return sq_error_set(err, SQ_ERR_CONFLICT,
                            "%s: is the database in use (%s): refused, it would be replaced", path,
                            which);
    }
    w->path = strdup(path);
    if (!w->path) {
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
    }
    struct stat st, lst;
    int exists = stat(path, &st) == 0;
    int link = lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode);
    int rc;
    if (exists && S_ISDIR(st.st_mode)) {
        rc = sq_error_set(err, SQ_ERR_IO, "%s: is a directory", path);
        goto fail;
    }
    if (link || (exists && !S_ISREG(st.st_mode))) {
        /* A device or a pipe cannot be replaced by rename, and a symbolic
        ** link (/dev/stdout, a link into a data store) must stay one: write
        ** through it, in place. */
        w->f = fopen(path, "wb");
        if (!w->f) {
            rc = sq_error_set(err, SQ_ERR_IO, "%s: cannot open for writing: %s", path,
                              strerror(errno));
            goto fail;
        }
        return 0;
    }
    size_t tlen = strlen(path) + 48;
    w->tmp = malloc(tlen);
    if (!w->tmp) {
        rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    static unsigned counter;
    int fd = -1;
    for (int tries = 0; tries < 100 && fd < 0; tries++) {
        snprintf(w->tmp, tlen, "%s.tmp.%ld.%u", path, (long)getpid(), counter++);
        fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        rc = sq_error_set(err, SQ_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        goto fail;
    }
    /* Keep the permissions of the file we replace. */
    if (exists) (void)fchmod(fd, st.st_mode & 07777);
    w->f = fdopen(fd, "wb");
    if (!w->f) {
        rc = sq_error_set(err, SQ_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        close(fd);
        unlink(w->tmp);
        goto fail;
    }
    return 0;
fail:
    free(w->tmp);
    free(w->path);
    memset(w, 0, sizeof *w);
    return rc;
}

void sq_wfile_write(sq_wfile *w, const void *buf, size_t len)
{
    if (!w->f || w->err_no || !len) return;
    errno = 0;
    if (fwrite(buf, 1, len, w->f) != len) w->err_no = errno ? errno : EIO;
}

static void wfile_release(sq_wfile *w)
{
    free(w->tmp);
    free(w->path);
    memset(w, 0, sizeof *w);
}

void sq_wfile_abort(sq_wfile *w)
{
    if (!w || !w->path) return;
    if (w->f) fclose(w->f);
    if (w->tmp) unlink(w->tmp);
    wfile_release(w);
}

int sq_wfile_commit(sq_wfile *w, sq_error *err)
{
    if (!w || !w->path || !w->f) {
        return sq_error_set(err, SQ_ERR_ARG, "internal error: output file not open");
    }
    int e = w->err_no;
    errno = 0;
    if (fflush(w->f) != 0 && !e) e = errno ? errno : EIO;
    if (w->tmp && !e && fsync(fileno(w->f)) != 0) e = errno;
    errno = 0;
    if (fclose(w->f) != 0 && !e) e = errno ? errno : EIO;
    w->f = NULL;
    if (e) {
        int rc = sq_error_set(err, SQ_ERR_IO, "%s: write failed: %s", w->path, strerror(e));
        if (w->tmp) unlink(w->tmp);
        wfile_release(w);
        return rc;
    }
    if (w->tmp && rename(w->tmp, w->path) != 0) {
        int rc =
            sq_error_set(err, SQ_ERR_IO, "%s: cannot replace it: %s", w->path, strerror(errno));
        unlink(w->tmp);
        wfile_release(w);
        return rc;
    }
    wfile_release(w);
    return 0;
}
