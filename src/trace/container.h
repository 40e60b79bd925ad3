/*
** container.h -- the shardq.codec/1 container: one quantized array in a
** safetensors file (README, "Formats").
**
** The file holds the tensors "codes" (U8), "scales" and, for min-max codecs,
** "offsets" (F32, BF16 or F16 as the codec's scale dtype), and __metadata__
** with everything a decoder needs: "format" (shardq.codec/1), the canonical
** "codec", "n" and the original "shape", then the random-number key ("seed",
** "step", "worker", "site") and "shardq_version".
**
** The reader checks every field against the others (the codec against the
** tensors' dtypes and sizes, the shape against n) and that the scales and
** offsets are finite, so a damaged or hand-edited file is refused before it
** is decoded. Errors name the file and the field:
**   SQ_ERR_FORMAT     malformed, truncated or lying: a missing or bad
**                     __metadata__ value, a tensor missing, unexpected or of
**                     the wrong dtype or size (and what sq_st_open refuses)
**   SQ_ERR_NONFINITE  a scale or offset that is NaN or infinite
**   SQ_ERR_NOTFOUND   no such file; SQ_ERR_IO, a failed open, read or write
**   SQ_ERR_NOMEM      no memory for the decoded buffers
*/
#ifndef SQ_TRACE_CONTAINER_H
#define SQ_TRACE_CONTAINER_H

#include "shardq.h"
#include "trace/npy.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SQ_CONTAINER_FORMAT "shardq.codec/1"

/* One encoded array: what is written, or what was read. */
typedef struct sq_container {
    sq_codec codec;
    uint64_t n; /* values encoded: the product of shape */
    int ndim;   /* 0 for a scalar */
    uint64_t shape[SQ_NPY_MAXDIM];
    sq_rng_key key; /* the key of stochastic rounding */
    sq_qbuf q;      /* codes, scales and offsets of n values */
} sq_container;

/* Writes c (its q holding the encoding of c->n values under c->codec) to
** path, safely replaced (wfile.h); "-" is not special here: name
** /dev/stdout to write to standard output. */
int sq_container_write(const char *path, const sq_container *c, sq_error *err);

/* Reads and validates path (standard input as "-" or /dev/stdin, which may
** be a pipe) into *out, whose q is then allocated: sq_container_free
** releases it. On failure *out holds nothing to free. The key is read when
** the file records it (a file without one reads as key 0). */
int sq_container_read(const char *path, sq_container *out, sq_error *err);

/* Frees out->q and zeroes *out; safe on a zeroed struct. */
void sq_container_free(sq_container *c);

#ifdef __cplusplus
}
#endif
#endif /* SQ_TRACE_CONTAINER_H */
