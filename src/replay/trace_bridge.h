/*
** trace_bridge.h -- the trace module's calls under the sq_error convention,
** for replay and train, while that module still reports (char *err,
** size_t errlen) and -1 (issue #16 converts it on its own branch).
**
** Each bridge has the signature the converted call will have, so that
** once the trace module returns its kinds this file goes away and every
** `X_e(` becomes `X(`. Until then the kind is read from the sentence the
** module wrote, which names the cause in fixed words.
*/
#ifndef SQ_REPLAY_TRACE_BRIDGE_H
#define SQ_REPLAY_TRACE_BRIDGE_H

#include "shardq.h"
#include "trace/input.h"
#include "trace/tracedir.h"

#include <stdio.h>
#include <string.h>

static inline int sq_trace_bridge_kind(int rc, const char *msg)
{
    if (rc == 0) return SQ_OK;
    if (strstr(msg, "out of memory")) return SQ_ERR_NOMEM;
    if (strstr(msg, " is NaN") || strstr(msg, " is +Inf") || strstr(msg, " is -Inf") ||
        strstr(msg, "overflows fp32"))
        return SQ_ERR_NONFINITE;
    if (strstr(msg, "cannot ") || strstr(msg, "read error") || strstr(msg, "No such file") ||
        strstr(msg, "Permission denied") || strstr(msg, ": missing"))
        return SQ_ERR_IO;
    return SQ_ERR_FORMAT;
}

static inline int sq_trace_bridge_finish(int rc, const char *msg, sq_error *err)
{
    if (rc == 0) return SQ_OK;
    return sq_error_set(err, sq_trace_bridge_kind(rc, msg), "%s", msg);
}

#define SQ_TRACE_BRIDGE(call)                                                                  \
    char bridge_msg[SQ_ERROR_MSG] = "";                                                        \
    int bridge_rc = (call);                                                                    \
    return sq_trace_bridge_finish(bridge_rc, bridge_msg, err)
#define BRIDGE_ERR bridge_msg, sizeof bridge_msg

static inline int sq_trace_step_open_e(const sq_trace *t, size_t index, int weights, int ngrads,
                                       sq_trace_step *s, sq_error *err)
{
    SQ_TRACE_BRIDGE(sq_trace_step_open(t, index, weights, ngrads, s, BRIDGE_ERR));
}

static inline int sq_trace_load_e(sq_trace_step *s, int worker, size_t p, float *out32,
                                  double *out64, sq_error *err)
{
    SQ_TRACE_BRIDGE(sq_trace_load(s, worker, p, out32, out64, BRIDGE_ERR));
}

static inline int sq_trace_writer_open_as_e(sq_trace_writer **w, const char *dir,
                                            const char *owner, int workers,
                                            const sq_trace_param *p, size_t np,
                                            sq_st_dtype dtype, const char *topo,
                                            const char *model, sq_error *err)
{
    SQ_TRACE_BRIDGE(sq_trace_writer_open_as(w, dir, owner, workers, p, np, dtype, topo, model,
                                            BRIDGE_ERR));
}

static inline int sq_trace_file_begin_e(sq_trace_writer *w, uint32_t step, int worker,
                                        sq_error *err)
{
    SQ_TRACE_BRIDGE(sq_trace_file_begin(w, step, worker, BRIDGE_ERR));
}

static inline int sq_trace_file_put_e(sq_trace_writer *w, const float *x, sq_error *err)
{
    SQ_TRACE_BRIDGE(sq_trace_file_put(w, x, BRIDGE_ERR));
}

static inline int sq_trace_file_end_e(sq_trace_writer *w, sq_error *err)
{
    SQ_TRACE_BRIDGE(sq_trace_file_end(w, BRIDGE_ERR));
}

static inline int sq_trace_writer_close_e(sq_trace_writer *w, sq_error *err)
{
    SQ_TRACE_BRIDGE(sq_trace_writer_close(w, BRIDGE_ERR));
}

static inline FILE *sq_input_fopen_e(const char *path, int flags, sq_input *in, sq_error *err)
{
    char msg[SQ_ERROR_MSG] = "";
    FILE *f = sq_input_fopen(path, flags, in, msg, sizeof msg);
    if (!f) {
        int kind = sq_trace_bridge_kind(-1, msg);
        sq_error_set(err, kind == SQ_ERR_FORMAT ? SQ_ERR_IO : kind, "%s", msg);
    }
    return f;
}

#endif /* SQ_REPLAY_TRACE_BRIDGE_H */
