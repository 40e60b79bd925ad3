/*
** sq_internal.h -- what the C files of the core share and users do not see.
*/
#ifndef SQ_INTERNAL_H
#define SQ_INTERNAL_H

#include <stddef.h>
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

/* x'[j] = code[j] * sc for one group of symmetric codes (sym, qsgd);
** returns whether any value written is a NaN or an Inf. */
int sq_decode_sym_group(const int8_t *restrict code, uint64_t n, float sc, float *restrict out);

/* printf into a caller's error buffer (err may be NULL, errlen 0). */
void sq_errbuf_printf(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
