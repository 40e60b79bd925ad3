/*
** sq_hadamard.h -- one block of the Hadamard transform, for the C reference.
*/
#ifndef SQ_HADAMARD_H
#define SQ_HADAMARD_H

#include <stdint.h>
#include <string.h>

static inline int sq_hadamard_size_ok(int h)
{
    return h >= 2 && h <= 1024 && (h & (h - 1)) == 0;
}

/* The first three stages (strides 1, 2, 4) on one run of 8 elements, spelled
** out so that the compiler can keep them in registers. The additions are the
** same, in the same order, as the generic loop below. */
static inline void sq_hadamard_8(float *restrict x)
{
    float a0 = x[0] + x[1], a1 = x[0] - x[1], a2 = x[2] + x[3], a3 = x[2] - x[3];
    float a4 = x[4] + x[5], a5 = x[4] - x[5], a6 = x[6] + x[7], a7 = x[6] - x[7];
    float b0 = a0 + a2, b2 = a0 - a2, b1 = a1 + a3, b3 = a1 - a3;
    float b4 = a4 + a6, b6 = a4 - a6, b5 = a5 + a7, b7 = a5 - a7;
    x[0] = b0 + b4; x[4] = b0 - b4; x[1] = b1 + b5; x[5] = b1 - b5;
    x[2] = b2 + b6; x[6] = b2 - b6; x[3] = b3 + b7; x[7] = b3 - b7;
}

/* In place over x[0..h): stages of stride 1, 2, ..., h/2; in each stage the
** pair (j, j + stride), bit 'stride' of j clear, becomes (a + b, a - b). */
static inline void sq_hadamard_block(float *restrict x, int h)
{
    int st = 1;
    if (h >= 8) {
        for (int j = 0; j < h; j += 8) sq_hadamard_8(x + j);
        st = 8;
    }
    for (; st < h; st *= 2)
        for (int j0 = 0; j0 < h; j0 += 2 * st)
            for (int j = j0; j < j0 + st; j++) {
                float a = x[j], b = x[j + st];
                x[j] = a + b;
                x[j + st] = a - b;
            }
}

/* The same transform eight lanes at a time (GCC's generic vectors, which
** the AVX2 clone of a SQ_MULTIVERSION caller compiles to 256-bit registers
** and the baseline clone to pairs of SSE registers). Every output lane is
** the same single addition or subtraction of the same operands as in
** sq_hadamard_block, in the same stage order, so the bytes are equal; the
** vectors only choose which lanes are computed together. Stages 1, 2, 4 run
** inside one vector: both the sums and the differences of shuffled lanes
** are formed, and a blend keeps the sum in the lanes whose stride bit is
** clear and the difference in the others. */
#if defined(__GNUC__) && !defined(__clang__)
#define SQ_HADAMARD_VEC 1

/* Vectors move between these helpers through pointers and the helpers are
** always inlined: a vector passed by value between functions compiled for
** different ISAs (the clones of a SQ_MULTIVERSION caller) would not agree on
** the calling convention. */
#define SQ_V8_INLINE static inline __attribute__((always_inline))

typedef float sq_v8f __attribute__((vector_size(32)));
typedef int32_t sq_v8i __attribute__((vector_size(32)));

/* bad |= lanes of v that are NaN or Inf (all exponent bits set) */
#define SQ_V8_NONFINITE(bad, v)                                                 \
    do {                                                                        \
        const sq_v8i e_ = {0x7f800000, 0x7f800000, 0x7f800000, 0x7f800000,    \
                           0x7f800000, 0x7f800000, 0x7f800000, 0x7f800000};   \
        (bad) |= ((sq_v8i)(v) & e_) == e_;                                      \
    } while (0)

/* Strides 1, 2, 4 inside one vector. */
SQ_V8_INLINE void sq_hadamard_v8(sq_v8f *v)
{
    const sq_v8i a1 = {0, 0, 2, 2, 4, 4, 6, 6}, b1 = {1, 1, 3, 3, 5, 5, 7, 7};
    const sq_v8i m1 = {0, 9, 2, 11, 4, 13, 6, 15};
    const sq_v8i a2 = {0, 1, 0, 1, 4, 5, 4, 5}, b2 = {2, 3, 2, 3, 6, 7, 6, 7};
    const sq_v8i m2 = {0, 1, 10, 11, 4, 5, 14, 15};
    const sq_v8i a4 = {0, 1, 2, 3, 0, 1, 2, 3}, b4 = {4, 5, 6, 7, 4, 5, 6, 7};
    const sq_v8i m4 = {0, 1, 2, 3, 12, 13, 14, 15};
    sq_v8f x = *v;
    sq_v8f a = __builtin_shuffle(x, a1), b = __builtin_shuffle(x, b1);
    x = __builtin_shuffle(a + b, a - b, m1);
    a = __builtin_shuffle(x, a2), b = __builtin_shuffle(x, b2);
    x = __builtin_shuffle(a + b, a - b, m2);
    a = __builtin_shuffle(x, a4), b = __builtin_shuffle(x, b4);
    *v = __builtin_shuffle(a + b, a - b, m4);
}

/* out[0..h) = H(in[0..h)) times mul (1, or 1/h for the inverse: a power of
** two, exact), for h >= 8; in and out may be the same. *bad |= the lanes
** whose stored value is not finite (a non-finite input, or a sum that
** overflowed, reaches the outputs as an Inf or a NaN). */
SQ_V8_INLINE void sq_hadamard_block_v(const float *in, float *out, int h, float mul, sq_v8i *bad)
{
    if (h == 32) { /* the common size, in four registers */
        sq_v8f v0, v1, v2, v3, t;
        memcpy(&v0, in, sizeof v0);
        memcpy(&v1, in + 8, sizeof v1);
        memcpy(&v2, in + 16, sizeof v2);
        memcpy(&v3, in + 24, sizeof v3);
        sq_hadamard_v8(&v0);
        sq_hadamard_v8(&v1);
        sq_hadamard_v8(&v2);
        sq_hadamard_v8(&v3);
        t = v0 + v1, v1 = v0 - v1, v0 = t; /* stride 8 */
        t = v2 + v3, v3 = v2 - v3, v2 = t;
        t = v0 + v2, v2 = v0 - v2, v0 = t; /* stride 16 */
        t = v1 + v3, v3 = v1 - v3, v1 = t;
        v0 = v0 * mul, v1 = v1 * mul, v2 = v2 * mul, v3 = v3 * mul;
        SQ_V8_NONFINITE(*bad, v0);
        SQ_V8_NONFINITE(*bad, v1);
        SQ_V8_NONFINITE(*bad, v2);
        SQ_V8_NONFINITE(*bad, v3);
        memcpy(out, &v0, sizeof v0);
        memcpy(out + 8, &v1, sizeof v1);
        memcpy(out + 16, &v2, sizeof v2);
        memcpy(out + 24, &v3, sizeof v3);
        return;
    }
    if (h <= 32) { /* in registers: the loops below, unrolled */
        sq_v8f v[4];
        const int nv = h / 8;
        for (int k = 0; k < nv; k++) {
            memcpy(&v[k], in + 8 * k, sizeof v[k]);
            sq_hadamard_v8(&v[k]);
        }
        for (int st = 1; st < nv; st *= 2)
            for (int k0 = 0; k0 < nv; k0 += 2 * st)
                for (int k = k0; k < k0 + st; k++) {
                    sq_v8f a = v[k], b = v[k + st];
                    v[k] = a + b;
                    v[k + st] = a - b;
                }
        for (int k = 0; k < nv; k++) {
            v[k] = v[k] * mul;
            SQ_V8_NONFINITE(*bad, v[k]);
            memcpy(out + 8 * k, &v[k], sizeof v[k]);
        }
        return;
    }
    for (int j = 0; j < h; j += 8) {
        sq_v8f v;
        memcpy(&v, in + j, sizeof v);
        sq_hadamard_v8(&v);
        memcpy(out + j, &v, sizeof v);
    }
    for (int st = 8; st < h; st *= 2)
        for (int j0 = 0; j0 < h; j0 += 2 * st)
            for (int j = j0; j < j0 + st; j += 8) {
                sq_v8f a, b, sum, dif;
                memcpy(&a, out + j, sizeof a);
                memcpy(&b, out + j + st, sizeof b);
                sum = a + b;
                dif = a - b;
                memcpy(out + j, &sum, sizeof sum);
                memcpy(out + j + st, &dif, sizeof dif);
            }
    for (int j = 0; j < h; j += 8) { /* (the block is in L1) */
        sq_v8f v;
        memcpy(&v, out + j, sizeof v);
        v = v * mul;
        SQ_V8_NONFINITE(*bad, v);
        memcpy(out + j, &v, sizeof v);
    }
}
#endif

/* out = H(in) (times 1/h when inverse) over the whole blocks of in[0..n);
** the elements of a final partial block are copied. in and out may be the
** same. Returns whether any value written to out is a NaN or an Inf: the
** finiteness check rides on the pass that writes the data. Vectorised where
** SQ_HADAMARD_VEC and h >= 8. */
static inline __attribute__((always_inline)) int sq_hadamard_run(const float *in, float *out, uint64_t n, int h, int inverse)
{
    const float mul = inverse ? 1.0f / (float)h : 1.0f; /* a power of two: exact */
    const uint64_t whole = n / (uint64_t)h * (uint64_t)h;
    uint32_t bad = 0;
#ifdef SQ_HADAMARD_VEC
    if (h >= 8) {
        sq_v8i b = {0, 0, 0, 0, 0, 0, 0, 0};
        for (uint64_t j = 0; j < whole; j += (uint64_t)h)
            sq_hadamard_block_v(in + j, out + j, h, mul, &b);
        for (int l = 0; l < 8; l++) bad |= (uint32_t)b[l];
    } else
#endif
    {
        for (uint64_t j = 0; j < whole; j += (uint64_t)h) {
            for (int k = 0; k < h; k++) out[j + (uint64_t)k] = in[j + (uint64_t)k];
            sq_hadamard_block(out + j, h);
            for (int k = 0; k < h; k++) {
                uint32_t u;
                out[j + (uint64_t)k] *= mul;
                memcpy(&u, &out[j + (uint64_t)k], 4);
                bad |= (u & 0x7f800000u) == 0x7f800000u;
            }
        }
    }
    for (uint64_t j = whole; j < n; j++) {
        uint32_t u;
        memcpy(&u, &in[j], 4);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
        out[j] = in[j];
    }
    return bad != 0;
}

#endif
