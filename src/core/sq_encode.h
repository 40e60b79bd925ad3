/*
** sq_encode.h -- the one quantizing and the one decoding operation of the
** C reference (codec.c), with the variant as arguments: what sq_encode,
** sq_decode and their named wrappers call, and what the backend layer
** calls for the CPU (src/backend/backend.c).
*/
#ifndef SQ_ENCODE_H
#define SQ_ENCODE_H

#include "shardq/codec.h"

/* q = Q(x) (diff 0) or Q(x - ref) (diff 1: ref may not be NULL when n > 0),
** staged in fp32 or as bf16 (bf16 1): the contracts of shardq/codec.h. */
int sq_encode_job(const sq_codec *c, const float *x, const float *ref, int diff, uint64_t n,
                  const sq_rng_key *key, sq_qbuf *q, int bf16);
/* out = D(q) (add 0) or ref + D(q) (add 1), in fp32 or bf16 (bf16 1). */
int sq_decode_job(const sq_codec *c, const sq_qbuf *q, const float *ref, int add, uint64_t n,
                  float *out, int bf16);

#endif
