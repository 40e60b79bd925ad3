/*
** error.c -- status codes as sentences, and the sq_error that carries a
** failure's kind and its description from the library to its caller.
*/
#include "sq_internal.h"
#include "shardq/codec.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *sq_strerror(int status)
{
    switch (status) {
    case SQ_OK: return "success";
    case SQ_ERR_ARG: return "invalid argument (NULL buffer, k = 0 or a size that overflows)";
    case SQ_ERR_SPEC: return "invalid codec spec or setting";
    case SQ_ERR_NONFINITE: return "non-finite input (NaN or Inf) cannot be quantized";
    case SQ_ERR_RANGE: return "a result does not fit fp32 (or a scale its 16-bit dtype)";
    case SQ_ERR_NOMEM: return "out of memory";
    case SQ_ERR_UNSUPPORTED: return "operation not supported by this backend";
    case SQ_ERR_DEVICE: return "a CUDA device call failed";
    case SQ_ERR_IO: return "input/output error";
    case SQ_ERR_FORMAT: return "malformed file";
    case SQ_ERR_BUSY: return "busy: held by another process";
    case SQ_ERR_NOTFOUND: return "not found";
    case SQ_ERR_CONFLICT: return "conflicts with what is stored";
    case SQ_ERR_INTERRUPTED: return "interrupted";
    default: return "unknown error";
    }
}

int sq_error_set(sq_error *e, int status, const char *fmt, ...)
{
    if (!e) return status;
    e->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return status;
}

int sq_error_prefix(sq_error *e, const char *fmt, ...)
{
    if (!e) return SQ_ERR_ARG;
    char head[SQ_ERROR_MSG], old[SQ_ERROR_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    old[sizeof old - 1] = '\0';
    /* head, then the old sentence, cut at the buffer's end: the truncation
    ** is meant (the head says where the failure was, the tail what it was) */
    const char *tail = old[0] ? old : sq_strerror(e->status);
    size_t hl = strlen(head), tl = strlen(tail), room = sizeof e->msg - 1 - hl;
    if (tl > room) tl = room;
    memcpy(e->msg, head, hl);
    memcpy(e->msg + hl, tail, tl);
    e->msg[hl + tl] = '\0';
    return e->status;
}

void sq_error_clear(sq_error *e)
{
    if (!e) return;
    e->status = SQ_OK;
    e->msg[0] = '\0';
}

const char *sq_error_message(const sq_error *e)
{
    if (!e) return sq_strerror(SQ_ERR_ARG);
    return e->msg[0] ? e->msg : sq_strerror(e->status);
}
