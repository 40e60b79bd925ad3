/*
** error.c -- status codes as sentences.
*/
#include "shardq.h"

const char *sq_strerror(int status)
{
    switch (status) {
    case SQ_OK: return "success";
    case SQ_ERR_ARG: return "invalid argument (NULL buffer, k = 0 or a size that overflows)";
    case SQ_ERR_SPEC: return "invalid codec spec";
    case SQ_ERR_NONFINITE: return "non-finite input (NaN or Inf) cannot be quantized";
    case SQ_ERR_RANGE: return "a result does not fit fp32 (or a scale its 16-bit dtype)";
    case SQ_ERR_NOMEM: return "out of memory";
    case SQ_ERR_UNSUPPORTED: return "operation not supported by this backend";
    case SQ_ERR_DEVICE: return "a CUDA device call failed";
    default: return "unknown error";
    }
}
