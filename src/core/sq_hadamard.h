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

/* Strides 1, 2, 4 inside one vector. Each stage pairs every lane with the
** lane 'stride' away (one shuffle, t) and forms x + t, right in the lanes
** whose stride bit is clear (a + b: a the lane, b its partner above), and
** t - x, right in the others (a - b: a the partner below, b the lane); a
** blend keeps each where it is right. */
SQ_V8_INLINE void sq_hadamard_v8(sq_v8f *v)
{
    const sq_v8i s1 = {1, 0, 3, 2, 5, 4, 7, 6}, m1 = {0, 9, 2, 11, 4, 13, 6, 15};
    const sq_v8i s2 = {2, 3, 0, 1, 6, 7, 4, 5}, m2 = {0, 1, 10, 11, 4, 5, 14, 15};
    const sq_v8i s4 = {4, 5, 6, 7, 0, 1, 2, 3}, m4 = {0, 1, 2, 3, 12, 13, 14, 15};
    sq_v8f x = *v, t;
    t = __builtin_shuffle(x, s1);
    x = __builtin_shuffle(x + t, t - x, m1);
    t = __builtin_shuffle(x, s2);
    x = __builtin_shuffle(x + t, t - x, m2);
    t = __builtin_shuffle(x, s4);
    *v = __builtin_shuffle(x + t, t - x, m4);
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

#if defined(SQ_HADAMARD_VEC) && defined(__x86_64__)
/* The 32-point block sixteen lanes at a time, for the AVX-512 passes
** (functions compiled for avx512f, chosen at run time): the same additions
** in the same order as sq_hadamard_block, strides 1, 2, 4, 8 inside each
** half by sq_hadamard_v8's shuffle and blend, stride 16 between the
** halves. */
typedef float sq_v16f __attribute__((vector_size(64)));
typedef int32_t sq_v16i __attribute__((vector_size(64)));
typedef uint32_t sq_v16u __attribute__((vector_size(64)));

SQ_V8_INLINE void sq_hadamard_v16(sq_v16f *v)
{
    const sq_v16i s1 = {1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14};
    const sq_v16i m1 = {0, 17, 2, 19, 4, 21, 6, 23, 8, 25, 10, 27, 12, 29, 14, 31};
    const sq_v16i s2 = {2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13};
    const sq_v16i m2 = {0, 1, 18, 19, 4, 5, 22, 23, 8, 9, 26, 27, 12, 13, 30, 31};
    const sq_v16i s4 = {4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11};
    const sq_v16i m4 = {0, 1, 2, 3, 20, 21, 22, 23, 8, 9, 10, 11, 28, 29, 30, 31};
    const sq_v16i s8 = {8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7};
    const sq_v16i m8 = {0, 1, 2, 3, 4, 5, 6, 7, 24, 25, 26, 27, 28, 29, 30, 31};
    sq_v16f x = *v, t;
    t = __builtin_shuffle(x, s1);
    x = __builtin_shuffle(x + t, t - x, m1);
    t = __builtin_shuffle(x, s2);
    x = __builtin_shuffle(x + t, t - x, m2);
    t = __builtin_shuffle(x, s4);
    x = __builtin_shuffle(x + t, t - x, m4);
    t = __builtin_shuffle(x, s8);
    *v = __builtin_shuffle(x + t, t - x, m8);
}

/* Bit 31 of a lane of *bad set when the lane of v is a NaN or an Inf: the
** exponent field plus one carries into bit 31 exactly when it is all ones
** (a vector compare would be lowered lane by lane here). Through pointers,
** as every vector between these helpers. */
SQ_V8_INLINE void sq_v16_flag_nonfinite(sq_v16u *bad, const sq_v16f *v)
{
    const sq_v16u e = {0x7f800000u, 0x7f800000u, 0x7f800000u, 0x7f800000u, 0x7f800000u,
                       0x7f800000u, 0x7f800000u, 0x7f800000u, 0x7f800000u, 0x7f800000u,
                       0x7f800000u, 0x7f800000u, 0x7f800000u, 0x7f800000u, 0x7f800000u,
                       0x7f800000u};
    const sq_v16u one = {0x00800000u, 0x00800000u, 0x00800000u, 0x00800000u, 0x00800000u,
                         0x00800000u, 0x00800000u, 0x00800000u, 0x00800000u, 0x00800000u,
                         0x00800000u, 0x00800000u, 0x00800000u, 0x00800000u, 0x00800000u,
                         0x00800000u};
    *bad |= ((sq_v16u)*v & e) + one;
}

/* out[0..32) = H(in[0..32)) times 1/32 when inverse; when check, bit 31
** of a lane of *bad is set if a value stored from that lane is not
** finite. (A forward block is not
** multiplied by 1: every output is a sum or a difference, never a
** signalling NaN, so the product would be the same bits.) */
SQ_V8_INLINE void sq_hadamard32_v16(const float *in, float *out, int inverse, int check,
                                    sq_v16u *bad)
{
    /* Pease's constant-geometry form of the same butterflies: each stage
    ** takes the pairs (2i, 2i + 1) of the current order, puts a + b at i and
    ** a - b at i + 16. The element that stage s pairs with an element of
    ** index bit s clear is the one with it set, as the in-place order does
    ** (the stage shifts the index right by one bit and makes the sum or
    ** difference bit the top one), and after five stages the order is the
    ** natural one again. Every output is the same sum or difference of the
    ** same operands. */
    const sq_v16i ev = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30};
    const sq_v16i od = {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31};
    sq_v16f v0, v1, a, b;
    memcpy(&v0, in, sizeof v0);
    memcpy(&v1, in + 16, sizeof v1);
    for (int st = 0; st < 5; st++) {
        a = __builtin_shuffle(v0, v1, ev);
        b = __builtin_shuffle(v0, v1, od);
        v0 = a + b;
        v1 = a - b;
    }
    if (inverse) {
        const float mul = 1.0f / 32.0f;
        v0 = v0 * mul, v1 = v1 * mul;
    }
    if (check) {
        sq_v16_flag_nonfinite(bad, &v0);
        sq_v16_flag_nonfinite(bad, &v1);
    }
    memcpy(out, &v0, sizeof v0);
    memcpy(out + 16, &v1, sizeof v1);
}

/* A block of h = 64 .. 1024 sixteen lanes at a time: strides 1 .. 16 on
** each run of 32 (sq_hadamard32_v16), then the strides 32 .. h/2 two at a
** time where they can be (the four values j, j + st, j + 2st, j + 3st go
** through stride st and then stride 2st in registers: the same pairs, in
** the same order, as two passes would take), the last pass multiplying
** and checking as sq_hadamard32_v16 does. in and out may be the same. */
SQ_V8_INLINE void sq_hadamard_big_v16(const float *in, float *out, int h, int inverse,
                                      int check, sq_v16u *bad)
{
    const float mul = 1.0f / (float)h; /* a power of two: exact */
    for (int j = 0; j < h; j += 32) sq_hadamard32_v16(in + j, out + j, 0, 0, bad);
    for (int st = 32; st < h; st *= 4) {
        if (4 * st <= h) {
            const int last = 4 * st == h;
            for (int j0 = 0; j0 < h; j0 += 4 * st)
                for (int j = j0; j < j0 + st; j += 16) {
                    sq_v16f a, b, c, d, t;
                    memcpy(&a, out + j, sizeof a);
                    memcpy(&b, out + j + st, sizeof b);
                    memcpy(&c, out + j + 2 * st, sizeof c);
                    memcpy(&d, out + j + 3 * st, sizeof d);
                    t = a + b, b = a - b, a = t; /* stride st */
                    t = c + d, d = c - d, c = t;
                    t = a + c, c = a - c, a = t; /* stride 2st */
                    t = b + d, d = b - d, b = t;
                    if (last && inverse) a = a * mul, b = b * mul, c = c * mul, d = d * mul;
                    if (last && check) {
                        sq_v16_flag_nonfinite(bad, &a);
                        sq_v16_flag_nonfinite(bad, &b);
                        sq_v16_flag_nonfinite(bad, &c);
                        sq_v16_flag_nonfinite(bad, &d);
                    }
                    memcpy(out + j, &a, sizeof a);
                    memcpy(out + j + st, &b, sizeof b);
                    memcpy(out + j + 2 * st, &c, sizeof c);
                    memcpy(out + j + 3 * st, &d, sizeof d);
                }
        } else { /* the last stride alone */
            for (int j = 0; j < st; j += 16) {
                sq_v16f a, b, t;
                memcpy(&a, out + j, sizeof a);
                memcpy(&b, out + j + st, sizeof b);
                t = a + b, b = a - b, a = t;
                if (inverse) a = a * mul, b = b * mul;
                if (check) {
                    sq_v16_flag_nonfinite(bad, &a);
                    sq_v16_flag_nonfinite(bad, &b);
                }
                memcpy(out + j, &a, sizeof a);
                memcpy(out + j + st, &b, sizeof b);
            }
        }
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
