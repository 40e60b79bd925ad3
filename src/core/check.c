/*
** check.c -- the argument checks of the codec operations (sq_check.h),
** shared by the C reference and the backend layer. A kind of the table
** (sq_kinds.h) answers for its own parts and key.
*/
#include "sq_check.h"
#include "sq_kinds.h"

#include <stdint.h>

int sq_check_codec(const sq_codec *c, uint64_t n)
{
    if (!c) return SQ_ERR_ARG;
    if (sq_codec_validate(c) != SQ_OK) return SQ_ERR_SPEC;
    if (n > (uint64_t)SIZE_MAX / sizeof(float)) return SQ_ERR_ARG;
    return SQ_OK;
}

/* A kind of the table may use any of the three parts. */
static int check_table_qbuf(const sq_kind_ops *ops, const sq_codec *c, const sq_qbuf *q,
                            uint64_t n)
{
    if (!q) return SQ_ERR_ARG;
    if (n == 0) return SQ_OK;
    const void *p[3] = {q->codes, q->scales, q->offsets};
    for (int i = 0; i < 3; i++)
        if (!p[i] && ops->bytes(c, n, i)) return SQ_ERR_ARG;
    return SQ_OK;
}

int sq_check_qbuf(const sq_codec *c, const sq_qbuf *q, uint64_t n)
{
    const sq_kind_ops *ops = sq_kind_ops_of(c->kind);
    if (ops) return check_table_qbuf(ops, c, q, n);
    if (!q) return SQ_ERR_ARG;
    /* (a cast has no scales: its scales pointer may be NULL) */
    if (n && (!q->codes || (!q->scales && sq_codec_scale_bytes(c, n)) ||
              (c->kind == SQ_KIND_MINMAX && !q->offsets)))
        return SQ_ERR_ARG;
    return SQ_OK;
}

int sq_check_key(const sq_codec *c, const sq_rng_key *key)
{
    const sq_kind_ops *ops = sq_kind_ops_of(c->kind);
    if (ops ? ops->needs_key(c) && !key : c->round == SQ_ROUND_SR && !key) return SQ_ERR_ARG;
    if (key && (key->worker >= (1u << 24) || key->site > 0xffu)) return SQ_ERR_ARG;
    return SQ_OK;
}

int sq_check_chunks(const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n)
{
    if (!chunks || k < 1) return SQ_ERR_ARG;
    for (int i = 0; i < k; i++) {
        int rc = sq_check_qbuf(c, &chunks[i], n);
        if (rc) return rc;
    }
    return SQ_OK;
}
