/*
** sq_hadamard.h -- one block of the Hadamard transform, for the C reference.
*/
#ifndef SQ_HADAMARD_H
#define SQ_HADAMARD_H

#include <stdint.h>

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

#endif
