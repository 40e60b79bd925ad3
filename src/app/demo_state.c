/*
** demo_state.c -- what every phase of `shardq demo` shares (demo_internal.h):
** its lines through the caller's hook, the runs it keeps, and the safe
** writer of the files it leaves in the output directory.
*/
#define _DEFAULT_SOURCE /* PATH_MAX */
#include "app/demo_internal.h"
#include "sq_clock.h"
#include "trace/wfile.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void sq_app_demo_say(const sq_app_demo *d, int level, const char *fmt, ...)
{
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (d->ui && d->ui->say) d->ui->say(d->ui->ctx, level, line);
}

void sq_app_demo_phase(const sq_app_demo *d, int k, const char *what)
{
    sq_app_demo_say(d, SQ_APP_SAY_OUT, "\n[%d/6 %5.0f s] %s", k, sq_clock_s() - d->t0, what);
}

int sq_app_ids_add(sq_app_ids *s, int64_t id)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        int64_t *v = realloc(s->v, cap * sizeof *v);
        if (!v) return SQ_ERR_NOMEM;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = id;
    return SQ_OK;
}

/* id as one of the configuration's runs (of ids, and of all). */
int sq_app_demo_keep(sq_app_demo *d, sq_app_ids *ids, int64_t id, sq_error *err)
{
    if ((ids && sq_app_ids_add(ids, id)) || sq_app_ids_add(&d->all, id))
        return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    return SQ_OK;
}

int sq_app_demo_write(const char *path, const void *data, size_t len, sq_error *err)
{
    sq_wfile w;
    int rc = sq_wfile_open(&w, path, err);
    if (rc) return rc;
    sq_wfile_write(&w, data, len);
    return sq_wfile_commit(&w, err);
}
