/*
** hadamard.c -- the unnormalised Sylvester-Hadamard transform over aligned
** blocks of a flat buffer.
**
** The stage order (stride 1, 2, ..., h/2) is part of the bit-exact contract:
** float addition is not associative, so a different butterfly order would give
** different bytes for the same input. The CUDA kernels use the same order.
*/
#include "shardq.h"
#include "sq_hadamard.h"
#include "sq_internal.h"

SQ_MULTIVERSION
int sq_hadamard(float *x, uint64_t n, int h)
{
    if (!sq_hadamard_size_ok(h) || (!x && n)) return SQ_ERR_ARG;
    for (uint64_t b = 0; b + (uint64_t)h <= n; b += (uint64_t)h)
        sq_hadamard_block(x + b, h);
    return SQ_OK;
}

SQ_MULTIVERSION
int sq_hadamard_inverse(float *x, uint64_t n, int h)
{
    if (!sq_hadamard_size_ok(h) || (!x && n)) return SQ_ERR_ARG;
    const float inv = 1.0f / (float)h; /* a power of two: exact */
    for (uint64_t b = 0; b + (uint64_t)h <= n; b += (uint64_t)h) {
        sq_hadamard_block(x + b, h);
        for (int j = 0; j < h; j++) x[b + j] *= inv;
    }
    return SQ_OK;
}
