/*
** sq_check.h -- the argument checks of the codec operations (check.c).
**
** Every backend refuses the same calls with the same status: the C
** reference (codec.c) and the backend layer (src/backend/backend.c), which
** checks before it hands a call to the GPU, both use these.
*/
#ifndef SQ_CHECK_H
#define SQ_CHECK_H

#include "shardq/codec.h"

#include <stdint.h>

/* A codec and a size that fit: SQ_ERR_SPEC for an invalid codec. */
int sq_check_codec(const sq_codec *c, uint64_t n);

/* A quantized buffer that holds every part the codec uses. */
int sq_check_qbuf(const sq_codec *c, const sq_qbuf *q, uint64_t n);

/* SR needs a key; a key's worker and site must fit the Philox counter. */
int sq_check_key(const sq_codec *c, const sq_rng_key *key);

/* k >= 1 chunks, each a buffer as sq_check_qbuf asks. */
int sq_check_chunks(const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n);

#endif
