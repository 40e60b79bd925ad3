/*
** sq_internal.h -- what the C files of the core share and users do not see.
*/
#ifndef SQ_INTERNAL_H
#define SQ_INTERNAL_H

#include <stdint.h>

/* Hot loops are compiled twice, for AVX2 and for the baseline ISA, and the
** loader picks one per machine. Both clones compute the same bytes: the
** arithmetic is IEEE +, -, *, / and exact conversions either way, and FMA
** contraction is off for the whole build. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define SQ_MULTIVERSION __attribute__((target_clones("avx2", "default")))
#else
#define SQ_MULTIVERSION
#endif

/* Stochastic rounding's uniforms of elements [8*blk0, 8*blk0 + len): u[j]
** is the uniform of element 8*blk0 + j. Equal, element for element, to
** sq_uniform(). */
void sq_uniforms(uint32_t key_lo, uint32_t key_hi, uint32_t step, uint32_t ws, uint64_t blk0,
                 uint64_t len, float *u);

#endif
