/*
** philox.c -- the Philox4x32-10 generator as shardq keys it.
**
** Random numbers are a pure function of (seed, step, worker, site, element
** index), never of execution order, so a result does not depend on threads,
** backends or the order in which workers are emulated.
*/
#include "shardq/codec.h"
#include "sq_hd.h"
#include "sq_internal.h"

void sq_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    philox4x32_ctr_t c = {{ctr[0], ctr[1], ctr[2], ctr[3]}};
    philox4x32_key_t k = {{key[0], key[1]}};
    philox4x32_ctr_t r = philox4x32_R(10, c, k);
    for (int j = 0; j < 4; j++) out[j] = r.v[j];
}

float sq_uniform(const sq_rng_key *key, uint64_t i)
{
    float u[4];
    sq_hd_uniform4((uint32_t)key->seed, (uint32_t)(key->seed >> 32), key->step,
                   (key->worker << 8) | (key->site & 0xffu), i / 4, u);
    return u[i % 4];
}

/* ------------------------------------------------------------------------ */
/* Many blocks at once                                                      */
/* ------------------------------------------------------------------------ */

/* Random123 computes one counter block at a time; stochastic rounding needs
** one block per four elements of every buffer, so here LANES blocks run side
** by side, each lane the same ten rounds (multipliers 0xD2511F53 and
** 0xCD9E8D57, Weyl key increments 0x9E3779B9 and 0xBB67AE85) in a shape the
** compiler vectorises. The tests compare it with philox4x32_R. */
#define LANES 16
#define TWO_M24 5.9604644775390625e-08f

SQ_MULTIVERSION
static void uniforms_lanes(uint32_t k0, uint32_t k1, uint32_t c2, uint32_t c3, uint64_t blk0,
                           uint32_t mul0, uint32_t mul1, float *restrict u)
{
    /* 32-bit words held in 64-bit lanes: the 32x32->64 products then map to
    ** one vector instruction each, with no shuffling of halves */
    uint64_t w0[LANES], w1[LANES], w2[LANES], w3[LANES];
    for (int l = 0; l < LANES; l++) {
        uint64_t b = blk0 + (uint64_t)l;
        uint64_t x0 = (uint32_t)b, x1 = b >> 32, x2 = c2, x3 = c3;
        uint64_t ka = k0, kb = k1;
#pragma GCC unroll 10
        for (int r = 0; r < 10; r++) {
            uint64_t p0 = (uint64_t)mul0 * (uint32_t)x0;
            uint64_t p1 = (uint64_t)mul1 * (uint32_t)x2;
            uint64_t y0 = (p1 >> 32) ^ x1 ^ ka;
            uint64_t y2 = (p0 >> 32) ^ x3 ^ kb;
            x1 = p1 & 0xffffffffu;
            x3 = p0 & 0xffffffffu;
            x0 = y0;
            x2 = y2;
            ka = (ka + 0x9E3779B9u) & 0xffffffffu;
            kb = (kb + 0xBB67AE85u) & 0xffffffffu;
        }
        w0[l] = x0;
        w1[l] = x1;
        w2[l] = x2;
        w3[l] = x3;
    }
    for (int l = 0; l < LANES; l++) {
        u[4 * l + 0] = (float)((uint32_t)w0[l] >> 8) * TWO_M24;
        u[4 * l + 1] = (float)((uint32_t)w1[l] >> 8) * TWO_M24;
        u[4 * l + 2] = (float)((uint32_t)w2[l] >> 8) * TWO_M24;
        u[4 * l + 3] = (float)((uint32_t)w3[l] >> 8) * TWO_M24;
    }
}

/* The multipliers reach the lanes as values read at run time: a compiler that
** sees the constants turns each product into shifts and adds, which is
** slower than one vector multiply per four lanes. */
static volatile uint32_t philox_mul[2] = {0xD2511F53u, 0xCD9E8D57u};

void sq_uniforms(uint32_t key_lo, uint32_t key_hi, uint32_t step, uint32_t ws, uint64_t blk0,
                 uint64_t len, float *u)
{
    const uint32_t m0 = philox_mul[0], m1 = philox_mul[1];
    uint64_t j = 0;
    for (; j + 4 * LANES <= len; j += 4 * LANES)
        uniforms_lanes(key_lo, key_hi, step, ws, blk0 + j / 4, m0, m1, u + j);
    if (j < len) {
        float tail[4 * LANES];
        uniforms_lanes(key_lo, key_hi, step, ws, blk0 + j / 4, m0, m1, tail);
        for (uint64_t t = 0; j + t < len; t++) u[j + t] = tail[t];
    }
}

void sq_uniform_n(const sq_rng_key *key, uint64_t first, uint64_t n, float *u)
{
    uint32_t klo = (uint32_t)key->seed, khi = (uint32_t)(key->seed >> 32);
    uint32_t ws = (key->worker << 8) | (key->site & 0xffu);
    uint64_t head = (4 - first % 4) % 4; /* elements before the first whole block */
    if (head > n) head = n;
    for (uint64_t j = 0; j < head; j++) u[j] = sq_uniform(key, first + j);
    if (n > head) sq_uniforms(klo, khi, key->step, ws, (first + head) / 4, n - head, u + head);
}
