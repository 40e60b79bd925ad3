/*
** sq_sparse.h -- the sparse kinds (topk, randk) and the casts (bf16, fp16)
** as the rest of the core sees them: their validation, canonical fields,
** sizes and the per-tile encode and decode that codec.c calls.
**
** These kinds reuse codec.c's tiles (staging, Hadamard, sums, requant):
** only what one tile becomes on the wire differs, so codec.c hands a tile
** to sq_sparse_encode_tile / sq_sparse_decode_tile when sq_sparse_kind()
** says the codec is one of them. docs/conventions.md, has the rules.
*/
#ifndef SQ_SPARSE_H
#define SQ_SPARSE_H

#include "shardq/codec.h"

#include <stddef.h>
#include <stdint.h>

SQ_BEGIN_DECLS

/* topk or randk */
static inline int sq_kind_sparse(sq_kind k) { return k == SQ_KIND_TOPK || k == SQ_KIND_RANDK; }
/* bf16 or fp16 */
static inline int sq_kind_cast(sq_kind k) { return k == SQ_KIND_BF16 || k == SQ_KIND_FP16; }
/* any kind of this file */
static inline int sq_sparse_kind(sq_kind k) { return sq_kind_sparse(k) || sq_kind_cast(k); }

/* Bytes of one index code of a sparse group of `group` elements: 1, 2 or 4. */
static inline uint64_t sq_sparse_index_bytes(uint64_t group)
{
    return group <= 256 ? 1 : group <= 65536 ? 2 : 4;
}

/* c with the fields its kind ignores set to the kind's fixed values (the
** values sq_codec_format prints); any other kind comes back unchanged. */
sq_codec sq_sparse_canonical(const sq_codec *c);

/* The checks of sq_codec_validate for these kinds: SQ_OK or SQ_ERR_SPEC
** with a sentence in err (which may be NULL). */
int sq_sparse_check(const sq_codec *c, sq_error *err);

/* After sq_codec_parse has read every key: refuses a key the kind fixes
** given with another value, or keep= given to a kind without it, and sets
** the ignored fields to their fixed values. given has a bit per key in the
** parser's order (kind, bits, group, round, hadamard, levels, scale, keep). */
int sq_sparse_settle(sq_codec *c, unsigned given, sq_error *err);

/* sq_codec_groups, _code_bytes and _scale_bytes of these kinds. */
uint64_t sq_sparse_groups(const sq_codec *c, uint64_t n);
uint64_t sq_sparse_code_bytes(const sq_codec *c, uint64_t n);
uint64_t sq_sparse_scale_bytes(const sq_codec *c, uint64_t n);

/* Encodes val[0..len), the elements [start, start + len) of the buffer
** (start a multiple of the group), into q: SQ_OK, SQ_ERR_NONFINITE for NaN
** or Inf among the values, SQ_ERR_RANGE for a value past its 16-bit dtype,
** SQ_ERR_NOMEM. c is canonical (sq_sparse_canonical). */
int sq_sparse_encode_tile(const sq_codec *c, const float *val, uint64_t start, uint64_t len,
                          const sq_rng_key *key, sq_qbuf *q);

/* Decodes the elements [start, start + len) of q into out[0..len); returns
** whether any value written is not finite or an index lies past its group
** (a damaged buffer). */
int sq_sparse_decode_tile(const sq_codec *c, const sq_qbuf *q, uint64_t start, uint64_t len,
                          float *out);

/* The casts' halves of the two above (codec_cast.c). */
int sq_cast_encode_tile(const sq_codec *c, const float *val, uint64_t start, uint64_t len,
                        sq_qbuf *q);
int sq_cast_decode_tile(const sq_codec *c, const sq_qbuf *q, uint64_t start, uint64_t len,
                        float *out);

SQ_END_DECLS
#endif
