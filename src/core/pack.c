/*
** pack.c -- codes of b bits in one dense most-significant-bit-first stream.
**
** Element 0 occupies the top b bits of byte 0 and later elements follow in
** the bits below, crossing byte boundaries when b does not divide 8; the last
** byte is padded with zero bits. For b = 4 this is the SDP4Bit nibble order
** (element 2i high, 2i+1 low), for b = 8 one byte per code. Any run of 8
** elements fills exactly b bytes, which is what lets the fused operations
** pack disjoint parts of a buffer in parallel.
*/
#include "shardq/codec.h"
#include "sq_hd.h"
#include "sq_internal.h"

/* The loops of the common widths over buffers that do not overlap (what
** lets them vectorise); the others, and overlapping buffers, take the
** general loops below. */
SQ_MULTIVERSION
static void pack4(const uint8_t *restrict codes, uint64_t n, uint8_t *restrict out)
{
    for (uint64_t i = 0; i < n / 2; i++)
        out[i] = (uint8_t)(((codes[2 * i] & 0xfu) << 4) | (codes[2 * i + 1] & 0xfu));
    if (n & 1) out[n / 2] = (uint8_t)((codes[n - 1] & 0xfu) << 4);
}

SQ_MULTIVERSION
static void copy8(const uint8_t *restrict in, uint64_t n, uint8_t *restrict out)
{
    for (uint64_t i = 0; i < n; i++) out[i] = in[i];
}

static int overlap(const uint8_t *a, uint64_t na, const uint8_t *b, uint64_t nb)
{
    return (uintptr_t)a < (uintptr_t)b + nb && (uintptr_t)b < (uintptr_t)a + na;
}

SQ_MULTIVERSION
void sq_pack(const uint8_t *codes, uint64_t n, int bits, uint8_t *out)
{
    const uint64_t nout = (n * (uint64_t)bits + 7) / 8;
    if ((bits == 8 || bits == 4) && !overlap(codes, n, out, nout)) {
        if (bits == 8)
            copy8(codes, n, out);
        else
            pack4(codes, n, out);
        return;
    }
    if (bits == 8) {
        for (uint64_t i = 0; i < n; i++) out[i] = codes[i];
        return;
    }
    const uint32_t mask = (1u << bits) - 1u;
    if (bits == 1) { /* the scaled sign: eight codes a byte */
        uint64_t i = 0;
        for (; i + 8 <= n; i += 8) {
            uint32_t b = 0;
            for (int j = 0; j < 8; j++) b |= (uint32_t)(codes[i + j] & 1u) << (7 - j);
            out[i / 8] = (uint8_t)b;
        }
        if (i < n) {
            uint32_t b = 0;
            for (int j = 0; i + (uint64_t)j < n; j++) b |= (uint32_t)(codes[i + j] & 1u) << (7 - j);
            out[i / 8] = (uint8_t)b;
        }
        return;
    }
    if (bits == 4) {
        uint64_t i = 0;
        for (; i + 1 < n; i += 2)
            out[i / 2] = (uint8_t)(((codes[i] & mask) << 4) | (codes[i + 1] & mask));
        if (i < n) out[i / 2] = (uint8_t)((codes[i] & mask) << 4);
        return;
    }
    uint64_t acc = 0; /* pending bits, right-aligned */
    int have = 0;
    uint64_t o = 0;
    for (uint64_t i = 0; i < n; i++) {
        acc = (acc << bits) | (codes[i] & mask);
        have += bits;
        if (have >= 8) {
            have -= 8;
            out[o++] = (uint8_t)(acc >> have);
        }
    }
    if (have > 0) out[o] = (uint8_t)(acc << (8 - have));
}

/* Field i of the stream, unsigned. */
static inline uint32_t field(const uint8_t *in, uint64_t i, int bits)
{
    uint64_t bit = i * (uint64_t)bits;
    uint64_t byte = bit / 8;
    int off = (int)(bit % 8);
    /* The field spans at most two bytes since bits <= 8. */
    uint32_t two = (uint32_t)in[byte] << 8;
    if (off + bits > 8) two |= in[byte + 1];
    return (two >> (16 - off - bits)) & ((1u << bits) - 1u);
}

/* 4-bit fields two a byte, unsigned or sign-extended, over buffers that do
** not overlap (the common case of the loops below, vectorised). */
SQ_MULTIVERSION
static void unpack4(const uint8_t *restrict in, uint64_t n, int sign, uint8_t *restrict codes)
{
    if (sign)
        for (uint64_t i = 0; i < n / 2; i++) {
            codes[2 * i] = (uint8_t)sq_hd_sign_extend(in[i] >> 4, 4);
            codes[2 * i + 1] = (uint8_t)sq_hd_sign_extend(in[i] & 0xfu, 4);
        }
    else
        for (uint64_t i = 0; i < n / 2; i++) {
            codes[2 * i] = (uint8_t)(in[i] >> 4);
            codes[2 * i + 1] = (uint8_t)(in[i] & 0xfu);
        }
    if (n & 1) {
        uint32_t f = in[n / 2] >> 4;
        codes[n - 1] = (uint8_t)(sign ? sq_hd_sign_extend(f, 4) : (int)f);
    }
}

SQ_MULTIVERSION
void sq_unpack_unsigned(const uint8_t *in, uint64_t n, int bits, uint8_t *codes)
{
    if (bits == 4 && !overlap(in, (n + 1) / 2, codes, n)) {
        unpack4(in, n, 0, codes);
        return;
    }
    if (bits == 8) {
        for (uint64_t i = 0; i < n; i++) codes[i] = in[i];
        return;
    }
    if (bits == 1) {
        uint64_t i = 0;
        for (; i + 8 <= n; i += 8) {
            uint32_t b = in[i / 8];
            for (int j = 0; j < 8; j++) codes[i + j] = (uint8_t)((b >> (7 - j)) & 1u);
        }
        for (; i < n; i++) codes[i] = (uint8_t)((in[i / 8] >> (7 - i % 8)) & 1u);
        return;
    }
    if (bits == 4) {
        for (uint64_t i = 0; i < n / 2; i++) {
            codes[2 * i] = (uint8_t)(in[i] >> 4);
            codes[2 * i + 1] = (uint8_t)(in[i] & 0xf);
        }
        if (n & 1) codes[n - 1] = (uint8_t)(in[n / 2] >> 4);
        return;
    }
    for (uint64_t i = 0; i < n; i++) codes[i] = (uint8_t)field(in, i, bits);
}

SQ_MULTIVERSION
void sq_unpack_signed(const uint8_t *in, uint64_t n, int bits, int8_t *codes)
{
    if (bits == 4 && !overlap(in, (n + 1) / 2, (const uint8_t *)codes, n)) {
        unpack4(in, n, 1, (uint8_t *)codes);
        return;
    }
    sq_unpack_unsigned(in, n, bits, (uint8_t *)codes);
    for (uint64_t i = 0; i < n; i++) codes[i] = (int8_t)sq_hd_sign_extend((uint8_t)codes[i], bits);
}
