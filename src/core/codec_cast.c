/*
** codec_cast.c -- the casts as codecs (kind=bf16, kind=fp16): what one tile
** of codec.c becomes. Every value is rounded to nearest even in the 16-bit
** dtype and sent as a little-endian 16-bit code; there are no scales. The
** per-element step is sq_hd_cast.h's, which the CUDA kernels share.
*/
#include "shardq/codec.h"
#include "sq_hd_cast.h"
#include "sq_internal.h"
#include "sq_sparse.h"

SQ_MULTIVERSION
static int encode_pass(const float *restrict val, uint64_t len, int fp16, uint8_t *restrict codes)
{
    int found = 0;
    for (uint64_t j = 0; j < len; j++) {
        uint16_t h;
        found |= sq_hd_cast_encode(val[j], fp16, &h);
        sq_hd_cast_put(codes, j, h);
    }
    return found;
}

SQ_MULTIVERSION
static int decode_pass(const uint8_t *restrict codes, uint64_t len, int fp16, float *restrict out)
{
    uint32_t bad = 0;
    for (uint64_t j = 0; j < len; j++) {
        float v = sq_hd_cast_decode(sq_hd_cast_get(codes, j), fp16);
        out[j] = v;
        bad |= sq_hd_nonfinite(v);
    }
    return bad != 0;
}

/* A value past the dtype's range outranks NaN or Inf elsewhere in the
** tile, as the kernels' flags rank them (sqk_status). */
int sq_cast_encode_tile(const sq_codec *c, const float *val, uint64_t start, uint64_t len,
                        sq_qbuf *q)
{
    int found = encode_pass(val, len, c->kind == SQ_KIND_FP16, q->codes + 2 * start);
    return (found & SQ_HD_EW_OUTPUT) ? SQ_ERR_RANGE
           : (found & SQ_HD_EW_INPUT) ? SQ_ERR_NONFINITE
                                      : SQ_OK;
}

int sq_cast_decode_tile(const sq_codec *c, const sq_qbuf *q, uint64_t start, uint64_t len,
                        float *out)
{
    return decode_pass(q->codes + 2 * start, len, c->kind == SQ_KIND_FP16, out);
}
