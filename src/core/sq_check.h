/*
** sq_check.h -- the argument checks of the codec operations.
**
** Every backend refuses the same calls with the same status: the C
** reference (codec.c) and the backend layer (src/backend/backend.c), which
** checks before it hands a call to the GPU, both use these.
*/
#ifndef SQ_CHECK_H
#define SQ_CHECK_H

#include "shardq/codec.h"
#include "sq_plugin.h"

#include <stdint.h>

/* A codec and a size that fit: SQ_ERR_SPEC for an invalid codec. */
static inline int sq_check_codec(const sq_codec *c, uint64_t n)
{
    if (!c) return SQ_ERR_ARG;
    if (sq_codec_validate(c) != SQ_OK) return SQ_ERR_SPEC;
    if (n > (uint64_t)SIZE_MAX / sizeof(float)) return SQ_ERR_ARG;
    return SQ_OK;
}

static inline int sq_check_qbuf(const sq_codec *c, const sq_qbuf *q, uint64_t n)
{
    if (c->kind == SQ_KIND_PLUGIN) return sq_plugin_check_qbuf(c, q, n);
    if (!q) return SQ_ERR_ARG;
    /* (a cast has no scales: its scales pointer may be NULL) */
    if (n && (!q->codes || (!q->scales && sq_codec_scale_bytes(c, n)) ||
              (c->kind == SQ_KIND_MINMAX && !q->offsets)))
        return SQ_ERR_ARG;
    return SQ_OK;
}

/* SR needs a key; a key's worker and site must fit the Philox counter. */
static inline int sq_check_key(const sq_codec *c, const sq_rng_key *key)
{
    if (c->kind == SQ_KIND_PLUGIN ? sq_plugin_needs_key(c) && !key
                                  : c->round == SQ_ROUND_SR && !key)
        return SQ_ERR_ARG;
    if (key && (key->worker >= (1u << 24) || key->site > 0xffu)) return SQ_ERR_ARG;
    return SQ_OK;
}

static inline int sq_check_chunks(const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n)
{
    if (!chunks || k < 1) return SQ_ERR_ARG;
    for (int i = 0; i < k; i++) {
        int rc = sq_check_qbuf(c, &chunks[i], n);
        if (rc) return rc;
    }
    return SQ_OK;
}

#endif
