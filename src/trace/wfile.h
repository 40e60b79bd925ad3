/*
** wfile.h -- safe replacement of a file, and the error sentences of the
** trace readers and writers.
**
** Writes go to a temporary file beside the target that is renamed over it
** only once everything is written and synced, so a failed write (a full
** disk) never leaves a half-written file behind nor damages an existing one.
** A target that exists and is not a regular file (a device, a pipe), or is a
** symbolic link (/dev/stdout), is written directly, in place.
*/
#ifndef SQ_TRACE_WFILE_H
#define SQ_TRACE_WFILE_H

#include "shardq/codec.h"

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Safe replacement of a file (used by the .npy and safetensors writers)    */
/* ------------------------------------------------------------------------ */

/* sq_wfile_open creates a temporary file beside path (or opens path itself
** when it exists and is not a regular file, or is a symbolic link); sq_wfile_write appends bytes
** (a failure is remembered and reported by commit); sq_wfile_commit flushes,
** syncs, closes and renames it over path; sq_wfile_abort throws it away.
** After open succeeds, exactly one of commit or abort must be called. Both
** fail with SQ_ERR_IO naming the file and the reason (SQ_ERR_ARG for an
** empty name, SQ_ERR_NOMEM). open refuses, SQ_ERR_CONFLICT, a path that is
** a database this process has open or one of its files (sq_protect.h). */
typedef struct sq_wfile {
    FILE *f;
    char *path;   /* the target */
    char *tmp;    /* the temporary file, NULL when writing directly */
    int err_no;   /* the first errno of a failed write, 0 when none */
} sq_wfile;

int sq_wfile_open(sq_wfile *w, const char *path, sq_error *err);
void sq_wfile_write(sq_wfile *w, const void *buf, size_t len);
int sq_wfile_commit(sq_wfile *w, sq_error *err);
void sq_wfile_abort(sq_wfile *w);

#ifdef __cplusplus
}
#endif
#endif /* SQ_TRACE_WFILE_H */
