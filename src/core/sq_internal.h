/*
** sq_internal.h -- what the C files of the core share and users do not see.
*/
#ifndef SQ_INTERNAL_H
#define SQ_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Which fast paths the codec takes (SQ_FAST_* bits; all of them unless a
** test turns some off to compare them with the plain ones, which give the
** same bytes): the tiles in L1-sized pieces (codec.c), the AVX-512 loops
** where the machine has them, and the decoding that reads 8-bit codes in
** place and adds each decoded chunk into the sum as it goes. Changed only
** between operations. */
extern int sq_codec_fast;
#define SQ_FAST_PIECES 1
#define SQ_FAST_AVX512 2
#define SQ_FAST_DECODE 4
#define SQ_FAST_ALL 7

/* Hot loops are compiled three times, for AVX-512 (x86-64-v4), for AVX2 and
** for the baseline ISA, and the loader picks one per machine. Every clone
** computes the same bytes: the arithmetic is IEEE +, -, *, / and exact
** conversions either way, and FMA contraction is off for the whole build.
** SQ_NO_CLONES (for checking the baseline's bytes on a machine that has
** more) builds the plain loops alone. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(SQ_NO_CLONES)
#define SQ_MULTIVERSION __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
/* A few loops are also written for AVX-512 alone (SQ_AVX512 functions),
** taken when the machine has it. */
#define SQ_HAVE_AVX512_PATHS 1
#define SQ_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))
static inline int sq_cpu_avx512(void)
{
    return (sq_codec_fast & SQ_FAST_AVX512) && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl");
}
#else
#define SQ_MULTIVERSION
#endif

/* *a = max |x[j]| over a group, returning whether any x[j] is a NaN or an
** Inf. An integer maximum over bit patterns, which vectorises (a float
** maximum does not, for NaN's sake): |x| as bits is >= 0x7f800000 exactly
** for +-Inf and NaN. Inlined into each caller's (cloned) loop. */
static inline __attribute__((always_inline)) int sq_group_absmax(const float *restrict x,
                                                                 uint64_t n, float *a)
{
    uint32_t m = 0;
    for (uint64_t j = 0; j < n; j++) {
        uint32_t b;
        memcpy(&b, &x[j], 4);
        b &= 0x7fffffffu;
        m = b > m ? b : m;
    }
    memcpy(a, &m, 4);
    return m >= 0x7f800000u;
}

/* Stochastic rounding's uniforms of elements [8*blk0, 8*blk0 + len): u[j]
** is the uniform of element 8*blk0 + j. Equal, element for element, to
** sq_uniform(). */
void sq_uniforms(uint32_t key_lo, uint32_t key_hi, uint32_t step, uint32_t ws, uint64_t blk0,
                 uint64_t len, float *u);

/* The same as the 16-bit halves h[j] of the Philox words, u[j] =
** sq_hd_sr_uniform16(h[j]) (half the bytes). */
void sq_sr_halves(uint32_t key_lo, uint32_t key_hi, uint32_t step, uint32_t ws, uint64_t blk0,
                  uint64_t len, uint16_t *h);

/* x'[j] = code[j] * sc for one group of symmetric codes (sym, qsgd);
** returns whether any value written is a NaN or an Inf (codec_group.c,
** below both codec.c and codec_dense.c). */
int sq_decode_sym_group(const int8_t *restrict code, uint64_t n, float sc, float *restrict out);

#endif
