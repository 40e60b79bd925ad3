/*
** qbuf.c -- allocation of quantized buffers.
*/
#include "shardq/codec.h"
#include "sq_plugin.h"

#include <stdlib.h>

static void *zalloc(uint64_t bytes)
{
    if (bytes > SIZE_MAX) return NULL;
    return calloc(bytes ? (size_t)bytes : 1, 1); /* never NULL for success */
}

int sq_qbuf_alloc(const sq_codec *c, uint64_t n, sq_qbuf *q)
{
    if (!c || !q || sq_codec_validate(c) != SQ_OK) return SQ_ERR_ARG;
    q->codes = zalloc(sq_codec_code_bytes(c, n));
    q->scales = zalloc(sq_codec_scale_bytes(c, n));
    /* a plug-in may use all three */
    int offsets = c->kind == SQ_KIND_MINMAX || c->kind == SQ_KIND_PLUGIN;
    q->offsets = offsets ? zalloc(sq_codec_offset_bytes(c, n)) : NULL;
    if (!q->codes || !q->scales || (offsets && !q->offsets)) {
        sq_qbuf_free(q);
        return SQ_ERR_NOMEM;
    }
    return SQ_OK;
}

void sq_qbuf_free(sq_qbuf *q)
{
    if (!q) return;
    free(q->codes);
    free(q->scales);
    free(q->offsets);
    q->codes = NULL;
    q->scales = NULL;
    q->offsets = NULL;
}
