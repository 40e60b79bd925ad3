/*
** codec_group.c -- the decoding loop of one group of symmetric codes,
** which the tiles of codec.c (kind=sym) and of codec_dense.c (kind=qsgd)
** share. It lives below both so that neither calls the other.
*/
#include "sq_hd.h"
#include "sq_internal.h"

/* Returns whether any value written is a NaN or an Inf (the finiteness
** check rides on the pass that writes). */
SQ_MULTIVERSION
int sq_decode_sym_group(const int8_t *restrict code, uint64_t n, float sc, float *restrict out)
{
    uint32_t bad = 0;
    for (uint64_t j = 0; j < n; j++) {
        float v = sq_hd_decode_sym(code[j], sc);
        out[j] = v;
        bad |= sq_hd_nonfinite(v);
    }
    return bad != 0;
}
