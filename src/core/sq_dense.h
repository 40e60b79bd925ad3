/*
** sq_dense.h -- the per-group compressors of the core: QSGD, the scaled
** sign and FP8 (codec_dense.c), as spec.c and codec.c hand them over.
**
** They are kinds of sq_codec that fit the tiles of codec.c: one scale per
** group, a dense stream of b-bit codes. Only the group statistics and the
** per-element codes differ, and those live in sq_hd.h for both backends.
*/
#ifndef SQ_DENSE_H
#define SQ_DENSE_H

#include "shardq/codec.h"
#include "sq_hd.h"

#include <stddef.h>
#include <stdint.h>

/* Whether kind is one of these compressors (also in the kernels). */
SQ_HD int sq_kind_dense(int kind)
{
    return kind == SQ_KIND_QSGD || kind == SQ_KIND_SIGN || kind == SQ_KIND_FP8E4M3 ||
           kind == SQ_KIND_FP8E5M2;
}

/* QSGD and the sign scale their groups by a sum (sq_hd_norm_term), FP8 by
** the absmax, as kind=sym does. */
SQ_HD int sq_kind_normed(int kind) { return kind == SQ_KIND_QSGD || kind == SQ_KIND_SIGN; }
SQ_HD int sq_kind_fp8(int kind) { return kind == SQ_KIND_FP8E4M3 || kind == SQ_KIND_FP8E5M2; }

SQ_BEGIN_DECLS

/* spec.c: the bits and round a spec takes for these kinds when it does not
** give them (sign: 1 bit, rtn; fp8: 8 bits), and the checks of the kinds,
** with a sentence in err (which may be NULL) like the parser's. */
void sq_dense_defaults(sq_codec *c, int bits_given, int round_given);
int sq_dense_check(const sq_codec *c, sq_error *err);

/* codec.c: quantize val[0..len), the elements [start, start + len) of the
** buffer (start a multiple of the group and of 8), into q, with u the
** uniforms of those elements (NULL for RTN) and code len bytes of scratch;
** and decode them back into out, returning whether a value is not finite. */
int sq_dense_quantize_tile(const sq_codec *c, const float *val, uint64_t start, uint64_t len,
                           const float *u, uint8_t *code, sq_qbuf *q);
int sq_dense_decode_tile(const sq_codec *c, const sq_qbuf *q, uint64_t start, uint64_t len,
                         uint8_t *code, float *out);

SQ_END_DECLS
#endif
