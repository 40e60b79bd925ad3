/*
** philox.c -- the Philox4x32-10 generator as shardq keys it.
**
** Random numbers are a pure function of (seed, step, worker, site, element
** index), never of execution order, so a result does not depend on threads,
** backends or the order in which workers are emulated. Stochastic rounding
** takes 16 bits per element, eight elements per block (sq_hd_uniform8);
** synthetic data and initialisation take 24 bits, four per block
** (sq_hd_uniform4).
*/
#include "shardq/codec.h"
#include "sq_hd.h"
#include "sq_internal.h"

#include <string.h>

void sq_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    philox4x32_ctr_t c = {{ctr[0], ctr[1], ctr[2], ctr[3]}};
    philox4x32_key_t k = {{key[0], key[1]}};
    philox4x32_ctr_t r = philox4x32_R(10, c, k);
    for (int j = 0; j < 4; j++) out[j] = r.v[j];
}

static uint32_t key_ws(const sq_rng_key *key) { return (key->worker << 8) | (key->site & 0xffu); }

float sq_uniform(const sq_rng_key *key, uint64_t i)
{
    float u[8];
    sq_hd_uniform8((uint32_t)key->seed, (uint32_t)(key->seed >> 32), key->step, key_ws(key),
                   i / 8, u);
    return u[i % 8];
}

float sq_uniform24(const sq_rng_key *key, uint64_t i)
{
    float u[4];
    sq_hd_uniform4((uint32_t)key->seed, (uint32_t)(key->seed >> 32), key->step, key_ws(key),
                   i / 4, u);
    return u[i % 4];
}

/* ------------------------------------------------------------------------ */
/* Many blocks at once                                                      */
/* ------------------------------------------------------------------------ */

/* Random123 computes one counter block at a time; stochastic rounding needs
** one block per eight elements of every buffer, so here LANES blocks run side
** by side, each lane the same ten rounds (multipliers 0xD2511F53 and
** 0xCD9E8D57, Weyl key increments 0x9E3779B9 and 0xBB67AE85) in a shape the
** compiler vectorises. The tests compare it with philox4x32_R. */
#define LANES 16
#define TWO_M24 5.9604644775390625e-08f

/* The four output words of blocks blk0 .. blk0 + LANES - 1. Inlined into
** each (multiversioned) caller. */
static inline __attribute__((always_inline)) void
philox_lanes(uint32_t k0, uint32_t k1, uint32_t c2, uint32_t c3, uint64_t blk0, uint32_t mul0,
             uint32_t mul1, uint32_t w[4][LANES])
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
        w[0][l] = (uint32_t)w0[l];
        w[1][l] = (uint32_t)w1[l];
        w[2][l] = (uint32_t)w2[l];
        w[3][l] = (uint32_t)w3[l];
    }
}

/* Stochastic rounding's layout: eight 16-bit uniforms per block. Also
** cloned for AVX-512, whose 8-lane 32x32->64 multiply halves the count of
** Philox's products; integer arithmetic and exact conversions only, so
** every clone gives the same bytes. */
#ifdef SQ_HAVE_AVX512_PATHS
__attribute__((target_clones("arch=x86-64-v4", "avx512f", "avx2", "default")))
#endif
static void uniforms8_lanes(uint32_t k0, uint32_t k1, uint32_t c2, uint32_t c3, uint64_t blk0,
                            uint32_t mul0, uint32_t mul1, float *restrict u)
{
    uint32_t w[4][LANES];
    philox_lanes(k0, k1, c2, c3, blk0, mul0, mul1, w);
    for (int l = 0; l < LANES; l++)
        for (int j = 0; j < 4; j++) {
            u[8 * l + 2 * j] = sq_hd_sr_uniform16(w[j][l] >> 16);
            u[8 * l + 2 * j + 1] = sq_hd_sr_uniform16(w[j][l] & 0xffffu);
        }
}

/* The same as 16-bit halves h (sq_hd_sr_uniform16(h) the uniform). */
SQ_MULTIVERSION
static void halves8_lanes(uint32_t k0, uint32_t k1, uint32_t c2, uint32_t c3, uint64_t blk0,
                          uint32_t mul0, uint32_t mul1, uint16_t *restrict h)
{
    uint32_t w[4][LANES];
    philox_lanes(k0, k1, c2, c3, blk0, mul0, mul1, w);
    for (int l = 0; l < LANES; l++)
        for (int j = 0; j < 4; j++) {
            h[8 * l + 2 * j] = (uint16_t)(w[j][l] >> 16);
            h[8 * l + 2 * j + 1] = (uint16_t)(w[j][l] & 0xffffu);
        }
}

#ifdef SQ_HAVE_AVX512_PATHS
#include <immintrin.h>
#define AVX_REGS 4                 /* four independent chains of rounds */
#define AVX_BLOCKS (8 * AVX_REGS) /* blocks a step */

/* The same blocks with AVX-512 written out: eight blocks a register, each
** 32-bit word in the low half of a 64-bit lane, where one vpmuludq gives
** the whole 32x32->64 product. The high halves of the lanes are never
** cleared: the multiply reads only the low halves and the output only
** keeps them, so what accumulates there is never used. The words are then
** laid out block after block, each word's halves swapped, which as 16-bit
** numbers in memory (little-endian) is the order of sq_hd_uniform8: word
** j/2 of block b at element 8b + j, its high half first. */
SQ_AVX512 static inline __attribute__((always_inline)) void
blocks8_avx512(uint32_t k0, uint32_t k1, uint32_t c2, uint32_t c3, uint64_t blk0, uint64_t nblk,
               uint32_t mul0, uint32_t mul1, float *restrict u, uint16_t *restrict hv)
{
    const __m512i m0 = _mm512_set1_epi64(mul0), m1 = _mm512_set1_epi64(mul1);
    const __m512i lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i pair =
        _mm512_set_epi32(30, 14, 28, 12, 26, 10, 24, 8, 22, 6, 20, 4, 18, 2, 16, 0);
    const __m512i lo4 = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);
    const __m512i hi4 = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
    __m512i ka[10], kb[10];
    for (int r = 0; r < 10; r++) {
        ka[r] = _mm512_set1_epi64((uint32_t)(k0 + (uint32_t)r * 0x9E3779B9u));
        kb[r] = _mm512_set1_epi64((uint32_t)(k1 + (uint32_t)r * 0xBB67AE85u));
    }
    for (uint64_t b = 0; b < nblk; b += AVX_BLOCKS) {
        __m512i x0[AVX_REGS], x1[AVX_REGS], x2[AVX_REGS], x3[AVX_REGS];
        for (int h = 0; h < AVX_REGS; h++) {
            const uint64_t first = blk0 + b + 8u * (unsigned)h;
            x0[h] = _mm512_add_epi64(_mm512_set1_epi64((long long)first), lane);
            x1[h] = _mm512_srli_epi64(x0[h], 32);
            x2[h] = _mm512_set1_epi64(c2);
            x3[h] = _mm512_set1_epi64(c3);
        }
        for (int r = 0; r < 10; r++)
            for (int h = 0; h < AVX_REGS; h++) {
                __m512i p0 = _mm512_mul_epu32(x0[h], m0), p1 = _mm512_mul_epu32(x2[h], m1);
                x0[h] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p1, 32), x1[h], ka[r], 0x96);
                x2[h] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p0, 32), x3[h], kb[r], 0x96);
                x1[h] = p1;
                x3[h] = p0;
            }
        uint16_t h16[8 * AVX_BLOCKS];
        uint16_t *dst = hv ? hv + 8 * b : h16;
        for (int h = 0; h < AVX_REGS; h++) {
            __m512i a = _mm512_permutex2var_epi32(x0[h], pair, x1[h]); /* w0 w1 of 8 blocks */
            __m512i c = _mm512_permutex2var_epi32(x2[h], pair, x3[h]); /* w2 w3 */
            __m512i lo = _mm512_permutex2var_epi64(a, lo4, c);
            __m512i hi = _mm512_permutex2var_epi64(a, hi4, c);
            _mm512_storeu_si512(dst + 64 * h, _mm512_rol_epi32(lo, 16));
            _mm512_storeu_si512(dst + 64 * h + 32, _mm512_rol_epi32(hi, 16));
        }
        if (!hv)
            for (int j = 0; j < 8 * AVX_BLOCKS; j++)
                u[8 * b + (uint64_t)j] = sq_hd_sr_uniform16(h16[j]);
    }
}

SQ_AVX512 static void
uniforms8_avx512(uint32_t k0, uint32_t k1, uint32_t c2, uint32_t c3, uint64_t blk0, uint64_t nblk,
                 uint32_t mul0, uint32_t mul1, float *restrict u)
{
    blocks8_avx512(k0, k1, c2, c3, blk0, nblk, mul0, mul1, u, NULL);
}

SQ_AVX512 static void
halves8_avx512(uint32_t k0, uint32_t k1, uint32_t c2, uint32_t c3, uint64_t blk0, uint64_t nblk,
               uint32_t mul0, uint32_t mul1, uint16_t *restrict h)
{
    blocks8_avx512(k0, k1, c2, c3, blk0, nblk, mul0, mul1, NULL, h);
}
#endif

/* The 24-bit layout: four uniforms per block. */
SQ_MULTIVERSION
static void uniforms4_lanes(uint32_t k0, uint32_t k1, uint32_t c2, uint32_t c3, uint64_t blk0,
                            uint32_t mul0, uint32_t mul1, float *restrict u)
{
    uint32_t w[4][LANES];
    philox_lanes(k0, k1, c2, c3, blk0, mul0, mul1, w);
    for (int l = 0; l < LANES; l++)
        for (int j = 0; j < 4; j++) u[4 * l + j] = (float)(w[j][l] >> 8) * TWO_M24;
}

/* The multipliers reach the lanes as values read at run time: a compiler that
** sees the constants turns each product into shifts and adds, which is
** slower than one vector multiply per four lanes. */
static volatile uint32_t philox_mul[2] = {0xD2511F53u, 0xCD9E8D57u};

typedef void (*lanes_fn)(uint32_t, uint32_t, uint32_t, uint32_t, uint64_t, uint32_t, uint32_t,
                         float *restrict);

/* The uniforms of elements [per * blk0, per * blk0 + len), per = 8 or 4. */
static void uniforms_run(lanes_fn f, uint64_t per, uint32_t key_lo, uint32_t key_hi,
                         uint32_t step, uint32_t ws, uint64_t blk0, uint64_t len, float *u)
{
    const uint32_t m0 = philox_mul[0], m1 = philox_mul[1];
    const uint64_t span = per * LANES;
    uint64_t j = 0;
    for (; j + span <= len; j += span) f(key_lo, key_hi, step, ws, blk0 + j / per, m0, m1, u + j);
    if (j < len) {
        float tail[8 * LANES];
        f(key_lo, key_hi, step, ws, blk0 + j / per, m0, m1, tail);
        for (uint64_t t = 0; j + t < len; t++) u[j + t] = tail[t];
    }
}

void sq_uniforms(uint32_t key_lo, uint32_t key_hi, uint32_t step, uint32_t ws, uint64_t blk0,
                 uint64_t len, float *u)
{
#ifdef SQ_HAVE_AVX512_PATHS
    const uint64_t span = 8 * AVX_BLOCKS, whole = len / span * span;
    if (whole && sq_cpu_avx512()) {
        uniforms8_avx512(key_lo, key_hi, step, ws, blk0, whole / 8, philox_mul[0], philox_mul[1],
                         u);
        blk0 += whole / 8;
        u += whole;
        len -= whole;
    }
#endif
    uniforms_run(uniforms8_lanes, 8, key_lo, key_hi, step, ws, blk0, len, u);
}

static void uniforms24(uint32_t key_lo, uint32_t key_hi, uint32_t step, uint32_t ws,
                       uint64_t blk0, uint64_t len, float *u)
{
    uniforms_run(uniforms4_lanes, 4, key_lo, key_hi, step, ws, blk0, len, u);
}

void sq_sr_halves(uint32_t key_lo, uint32_t key_hi, uint32_t step, uint32_t ws, uint64_t blk0,
                  uint64_t len, uint16_t *h)
{
    const uint32_t m0 = philox_mul[0], m1 = philox_mul[1];
#ifdef SQ_HAVE_AVX512_PATHS
    const uint64_t span = 8 * AVX_BLOCKS, whole = len / span * span;
    if (whole && sq_cpu_avx512()) {
        halves8_avx512(key_lo, key_hi, step, ws, blk0, whole / 8, m0, m1, h);
        blk0 += whole / 8;
        h += whole;
        len -= whole;
    }
#endif
    uint64_t j = 0;
    for (; j + 8 * LANES <= len; j += 8 * LANES)
        halves8_lanes(key_lo, key_hi, step, ws, blk0 + j / 8, m0, m1, h + j);
    if (j < len) {
        uint16_t tail[8 * LANES];
        halves8_lanes(key_lo, key_hi, step, ws, blk0 + j / 8, m0, m1, tail);
        for (uint64_t t = 0; j + t < len; t++) h[j + t] = tail[t];
    }
}

/* u[j] = one(key, first + j): the elements before the first whole block one
** by one, then whole blocks (run). */
static void uniform_n(const sq_rng_key *key, uint64_t first, uint64_t n, float *u, uint64_t per,
                      float (*one)(const sq_rng_key *, uint64_t),
                      void (*run)(uint32_t, uint32_t, uint32_t, uint32_t, uint64_t, uint64_t,
                                  float *))
{
    uint32_t klo = (uint32_t)key->seed, khi = (uint32_t)(key->seed >> 32);
    uint64_t head = (per - first % per) % per;
    if (head > n) head = n;
    for (uint64_t j = 0; j < head; j++) u[j] = one(key, first + j);
    if (n > head)
        run(klo, khi, key->step, key_ws(key), (first + head) / per, n - head, u + head);
}

void sq_uniform_n(const sq_rng_key *key, uint64_t first, uint64_t n, float *u)
{
    uniform_n(key, first, n, u, 8, sq_uniform, sq_uniforms);
}

void sq_uniform24_n(const sq_rng_key *key, uint64_t first, uint64_t n, float *u)
{
    uniform_n(key, first, n, u, 4, sq_uniform24, uniforms24);
}
