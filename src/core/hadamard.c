/*
** hadamard.c -- the unnormalised Sylvester-Hadamard transform over aligned
** blocks of a flat buffer.
**
** The stage order (stride 1, 2, ..., h/2) is part of the bit-exact contract:
** float addition is not associative, so a different butterfly order would give
** different bytes for the same input. The CUDA kernels use the same order.
*/
#include "shardq/codec.h"
#include "sq_hadamard.h"
#include "sq_internal.h"

SQ_MULTIVERSION
int sq_hadamard(float *x, uint64_t n, int h)
{
    if (!sq_hadamard_size_ok(h) || (!x && n)) return SQ_ERR_ARG;
    int64_t nblk = (int64_t)(n / (uint64_t)h);
    /* blocks are independent; inside a parallel codec operation this region
    ** is nested and runs on the calling thread */
#pragma omp parallel for num_threads(sq_get_threads()) if (n >= (1u << 16)) schedule(static)
    for (int64_t b = 0; b < nblk; b++) {
        float *blk = x + (uint64_t)b * (uint64_t)h;
        sq_hadamard_run(blk, blk, (uint64_t)h, h, 0);
    }
    return SQ_OK;
}

SQ_MULTIVERSION
int sq_hadamard_inverse(float *x, uint64_t n, int h)
{
    if (!sq_hadamard_size_ok(h) || (!x && n)) return SQ_ERR_ARG;
    int64_t nblk = (int64_t)(n / (uint64_t)h);
#pragma omp parallel for num_threads(sq_get_threads()) if (n >= (1u << 16)) schedule(static)
    for (int64_t b = 0; b < nblk; b++) {
        float *blk = x + (uint64_t)b * (uint64_t)h;
        sq_hadamard_run(blk, blk, (uint64_t)h, h, 1);
    }
    return SQ_OK;
}
