/*
** dtype.c -- fp32 <-> bf16 / fp16 conversions over scalars and arrays.
**
** The arithmetic is in sq_hd.h so that the CUDA kernels round identically.
*/
#include "shardq/codec.h"
#include "sq_hd.h"

uint16_t sq_f32_to_bf16(float x) { return sq_hd_f32_to_bf16(x); }
float sq_bf16_to_f32(uint16_t h) { return sq_hd_bf16_to_f32(h); }
uint16_t sq_f32_to_f16(float x) { return sq_hd_f32_to_f16(x); }
float sq_f16_to_f32(uint16_t h) { return sq_hd_f16_to_f32(h); }

void sq_f32_to_bf16_n(const float *x, uint16_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = sq_hd_f32_to_bf16(x[i]);
}

void sq_bf16_to_f32_n(const uint16_t *h, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = sq_hd_bf16_to_f32(h[i]);
}

void sq_f32_to_f16_n(const float *x, uint16_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = sq_hd_f32_to_f16(x[i]);
}

void sq_f16_to_f32_n(const uint16_t *h, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = sq_hd_f16_to_f32(h[i]);
}

size_t sq_find_nonfinite(const float *x, size_t n)
{
    /* blocks without an early exit vectorise; the block that holds one is
    ** then searched element by element */
    size_t i = 0;
    for (; i + 256 <= n; i += 256) {
        int bad = 0;
        for (size_t j = 0; j < 256; j++) bad |= sq_hd_nonfinite(x[i + j]);
        if (bad) break;
    }
    for (; i < n; i++)
        if (sq_hd_nonfinite(x[i])) return i;
    return n;
}
