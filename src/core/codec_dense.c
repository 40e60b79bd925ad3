/*
** codec_dense.c -- the per-group compressors: QSGD, the scaled sign and
** FP8 (E4M3, E5M2), in the C reference.
**
** codec.c walks the buffer in tiles of whole groups and whole bytes and
** hands a tile of these kinds here: find each group's statistics, store its
** scale, code its elements, pack. The arithmetic is sq_hd.h's, shared with
** the CUDA kernels; what this file adds is the order of the loops, the
** same as the kernels' where the order matters (the lane sums of
** sq_hd_norm_term). docs/conventions.md gives the rules.
*/
#include "shardq/codec.h"
#include "sq_dense.h"
#include "sq_hd.h"
#include "sq_internal.h"


/* ------------------------------------------------------------------------ */
/* Specs                                                                    */
/* ------------------------------------------------------------------------ */

void sq_dense_defaults(sq_codec *c, int bits_given, int round_given)
{
    if (c->kind == SQ_KIND_SIGN && !bits_given) c->bits = 1;
    if (c->kind == SQ_KIND_SIGN && !round_given) c->round = SQ_ROUND_RTN;
    if (sq_kind_fp8(c->kind) && !bits_given) c->bits = 8;
}

int sq_dense_check(const sq_codec *c, sq_error *err)
{
    if (c->levels != SQ_LEVELS_SDP4BIT)
        return sq_error_set(err, SQ_ERR_SPEC, "levels=deepspeed: applies to kind=sym only");
    if (c->kind == SQ_KIND_QSGD && c->bits < 2)
        return sq_error_set(err, SQ_ERR_SPEC,
                            "bits=%d: kind=qsgd has s = 2^(b-1) - 1 levels, none at 1 "
                            "bit; use bits 2 to 8 (or kind=sign)",
                            c->bits);
    if (c->kind == SQ_KIND_SIGN && c->bits != 1)
        return sq_error_set(err, SQ_ERR_SPEC,
                            "bits=%d: kind=sign codes one bit per element (bits=1)", c->bits);
    if (c->kind == SQ_KIND_SIGN && c->round != SQ_ROUND_RTN)
        return sq_error_set(err, SQ_ERR_SPEC,
                            "round=sr: kind=sign rounds nothing (the code is the sign "
                            "of x): use round=rtn");
    if (sq_kind_fp8(c->kind) && c->bits != 8)
        return sq_error_set(err, SQ_ERR_SPEC,
                            "bits=%d: kind=%s codes one byte per element (bits=8)", c->bits,
                            sq_codec_kind_name(c->kind));
    return SQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Group statistics                                                         */
/* ------------------------------------------------------------------------ */

/* sq_group_absmax, cloned: this file's group loop is not */
SQ_MULTIVERSION
static int group_absmax(const float *restrict x, uint64_t n, float *a)
{
    return sq_group_absmax(x, n, a);
}

/* The group sum of sq_hd_norm_term in the order sq_hd.h fixes: 32 lane
** partials in index order, then folded in halves. */
SQ_MULTIVERSION
static float lane_sum(const float *restrict x, uint64_t n, float P, int squares)
{
    float s[SQ_HD_LANES];
    for (int l = 0; l < SQ_HD_LANES; l++) s[l] = 0.0f;
    uint64_t j = 0;
    if (squares)
        for (; j + SQ_HD_LANES <= n; j += SQ_HD_LANES)
            for (int l = 0; l < SQ_HD_LANES; l++) s[l] = s[l] + sq_hd_norm_term(x[j + l], P, 1);
    else
        for (; j + SQ_HD_LANES <= n; j += SQ_HD_LANES)
            for (int l = 0; l < SQ_HD_LANES; l++) s[l] = s[l] + sq_hd_norm_term(x[j + l], P, 0);
    for (int l = 0; j + (uint64_t)l < n; l++) s[l] = s[l] + sq_hd_norm_term(x[j + l], P, squares);
    for (int m = SQ_HD_LANES / 2; m >= 1; m /= 2)
        for (int l = 0; l < m; l++) s[l] = s[l] + s[l + m];
    return s[0];
}

/* ------------------------------------------------------------------------ */
/* Codes of one group                                                       */
/* ------------------------------------------------------------------------ */

SQ_MULTIVERSION
static void encode_qsgd(const float *restrict x, uint64_t n, sq_group_params p, float qm,
                        const float *restrict u, uint8_t *restrict code)
{
    if (u)
        for (uint64_t j = 0; j < n; j++) code[j] = (uint8_t)sq_hd_qsgd_code(x[j], &p, 1, u[j], qm);
    else
        for (uint64_t j = 0; j < n; j++) code[j] = (uint8_t)sq_hd_qsgd_code(x[j], &p, 0, 0.0f, qm);
}

SQ_MULTIVERSION
static void encode_sign(const float *restrict x, uint64_t n, uint8_t *restrict code)
{
    for (uint64_t j = 0; j < n; j++) code[j] = (uint8_t)sq_hd_sign_code(x[j]);
}

SQ_MULTIVERSION
static void encode_fp8(const float *restrict x, uint64_t n, sq_group_params p, int e5m2,
                       const float *restrict u, uint8_t *restrict code)
{
    if (u)
        for (uint64_t j = 0; j < n; j++)
            code[j] = (uint8_t)sq_hd_f32_to_fp8((x[j] * p.lift) * p.m, e5m2, 1, u[j]);
    else
        for (uint64_t j = 0; j < n; j++)
            code[j] = (uint8_t)sq_hd_f32_to_fp8((x[j] * p.lift) * p.m, e5m2, 0, 0.0f);
}

int sq_dense_quantize_tile(const sq_codec *c, const float *val, uint64_t start, uint64_t len,
                           const float *u, uint8_t *code, sq_qbuf *q)
{
    const int dtype = (int)c->scale, e5m2 = c->kind == SQ_KIND_FP8E5M2;
    const float qm = sq_kind_fp8(c->kind) ? sq_hd_fp8_max(e5m2)
                                          : (float)(1 << (c->bits - 1)) - 1.0f;
    for (uint64_t g0 = 0; g0 < len; g0 += c->group) {
        uint64_t gl = len - g0 < c->group ? len - g0 : c->group;
        const float *x = val + g0;
        const uint64_t gi = (start + g0) / c->group;
        float a;
        if (group_absmax(x, gl, &a)) return SQ_ERR_NONFINITE;
        sq_group_params p;
        float lim; /* the largest decoded magnitude, in scales */
        if (c->kind == SQ_KIND_QSGD) {
            float P = sq_hd_norm_lift(a);
            p = sq_hd_qsgd_params(lane_sum(x, gl, P, 1), P, qm, dtype);
            lim = qm;
        } else if (c->kind == SQ_KIND_SIGN) {
            float P = sq_hd_norm_lift(a);
            p = sq_hd_sign_params(lane_sum(x, gl, P, 0), gl, P, dtype);
            lim = 1.0f;
        } else {
            p = sq_hd_sym_params(a, qm, dtype);
            lim = qm;
        }
        /* a 16-bit scale that overflowed, or a grid that reaches past fp32 */
        if (!sq_hd_grid_finite(&p, -lim, lim)) return SQ_ERR_RANGE;
        sq_hd_store_meta(q->scales, gi, dtype, p.s);
        const float *ug = u ? u + g0 : NULL;
        if (c->kind == SQ_KIND_QSGD) encode_qsgd(x, gl, p, qm, ug, code + g0);
        else if (c->kind == SQ_KIND_SIGN) encode_sign(x, gl, code + g0);
        else encode_fp8(x, gl, p, e5m2, ug, code + g0);
    }
    sq_pack(code, len, c->bits, q->codes + start / 8 * (uint64_t)c->bits);
    return SQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Decoding                                                                 */
/* ------------------------------------------------------------------------ */

/* Each loop returns whether any value it wrote is not finite. */
SQ_MULTIVERSION
static int decode_sign(const uint8_t *restrict code, uint64_t n, float s, float *restrict out)
{
    uint32_t bad = 0;
    for (uint64_t j = 0; j < n; j++) {
        float v = sq_hd_decode_sign(code[j], s);
        out[j] = v;
        bad |= sq_hd_nonfinite(v);
    }
    return bad != 0;
}

SQ_MULTIVERSION
static int decode_fp8(const uint8_t *restrict code, uint64_t n, int e5m2, float s,
                      float *restrict out)
{
    uint32_t bad = 0;
    for (uint64_t j = 0; j < n; j++) {
        float v = sq_hd_fp8_to_f32(code[j], e5m2) * s;
        out[j] = v;
        bad |= sq_hd_nonfinite(v);
    }
    return bad != 0;
}

int sq_dense_decode_tile(const sq_codec *c, const sq_qbuf *q, uint64_t start, uint64_t len,
                         uint8_t *code, float *out)
{
    const uint8_t *in = q->codes + start / 8 * (uint64_t)c->bits;
    if (c->kind == SQ_KIND_QSGD)
        sq_unpack_signed(in, len, c->bits, (int8_t *)code);
    else
        sq_unpack_unsigned(in, len, c->bits, code);
    int bad = 0;
    for (uint64_t g0 = 0; g0 < len; g0 += c->group) {
        uint64_t gl = len - g0 < c->group ? len - g0 : c->group;
        float s = sq_hd_load_meta(q->scales, (start + g0) / c->group, (int)c->scale);
        if (c->kind == SQ_KIND_QSGD)
            bad |= sq_decode_sym_group((const int8_t *)code + g0, gl, s, out + g0);
        else if (c->kind == SQ_KIND_SIGN)
            bad |= decode_sign(code + g0, gl, s, out + g0);
        else
            bad |= decode_fp8(code + g0, gl, c->kind == SQ_KIND_FP8E5M2, s, out + g0);
    }
    return bad;
}
