/*
** sq_hd_cast.h -- the per-element arithmetic of the cast kinds (kind=bf16,
** kind=fp16), shared by the C reference (codec_cast.c) and the CUDA
** kernels (kernels/cast.cu).
**
** A cast's code is the value rounded to nearest even in the 16-bit dtype
** (sq_hd_f32_to_bf16 / sq_hd_f32_to_f16), stored little-endian, two bytes
** an element, byte by byte so that no alignment is assumed. Decoding is
** exact. What an element finds is reported as sq_hd_ew_finding does: a NaN
** or Inf value (SQ_HD_EW_INPUT), a finite value that rounds past the
** dtype's range (SQ_HD_EW_OUTPUT, a range error: never a silent Inf).
*/
#ifndef SQ_HD_CAST_H
#define SQ_HD_CAST_H

#include "sq_hd.h"

/* The code of v: fp16 != 0 an fp16 cast, else bf16. */
SQ_HD int sq_hd_cast_encode(float v, int fp16, uint16_t *code)
{
    uint16_t h = fp16 ? sq_hd_f32_to_f16(v) : sq_hd_f32_to_bf16(v);
    *code = h;
    int inf = fp16 ? (h & 0x7c00u) == 0x7c00u : (h & 0x7f80u) == 0x7f80u;
    return sq_hd_ew_finding(sq_hd_nonfinite(v), inf);
}

SQ_HD float sq_hd_cast_decode(uint16_t code, int fp16)
{
    return fp16 ? sq_hd_f16_to_f32(code) : sq_hd_bf16_to_f32(code);
}

SQ_HD void sq_hd_cast_put(uint8_t *codes, uint64_t i, uint16_t h)
{
    codes[2 * i] = (uint8_t)(h & 0xffu);
    codes[2 * i + 1] = (uint8_t)(h >> 8);
}

SQ_HD uint16_t sq_hd_cast_get(const uint8_t *codes, uint64_t i)
{
    return (uint16_t)(codes[2 * i] | (uint16_t)codes[2 * i + 1] << 8);
}

#endif
