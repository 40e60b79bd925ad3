/*
** check_edge.c -- the codec at its edges: empty and one-element buffers,
** zero and constant groups, groups larger than the buffer, denormal groups
** (the 2^64 lift), values near FLT_MAX, non-finite input, overflowing
** scales, and argument errors.
*/
#include "shardq/codec.h"
#include "check_util.h"

#include <float.h>

static const sq_rng_key KEY = {0x0123456789abcdefull, 7, 3, 2};

static sq_codec codec(const char *spec)
{
    sq_codec c;
    char err[128] = "";
    ck_assert_msg(sq_codec_parse(spec, &c, err, sizeof err) == SQ_OK, "%s: %s", spec, err);
    return c;
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* Quantizes, returns the status; on success fills codes (unpacked) and the
** decoded values from the library's dequantize. */
static int run(const sq_codec *c, const float *x, uint64_t n, sq_qbuf *q, int *codes, float *out)
{
    ck_assert_int_eq(sq_qbuf_alloc(c, n, q), SQ_OK);
    int rc = sq_quantize(c, x, n, &KEY, q);
    if (rc == SQ_OK) {
        float *tmp = xmalloc(n * sizeof(float));
        sqt_decode(c, q, n, tmp, codes);
        if (out) {
            ck_assert_int_eq(sq_dequantize(c, q, n, out), SQ_OK);
            /* the library's decode is the documented one */
            if (!c->hadamard) SQT_ASSERT_FLOATS_BITS(out, tmp, n, "dequantize vs unpack * scale");
        }
        free(tmp);
    }
    return rc;
}

/* Codes of the library equal the reference's (check_util.h). */
static void assert_codes_ref(const sq_codec *c, const float *x, uint64_t n, const int *got,
                             const char *what)
{
    int *want = xmalloc(n * sizeof(int));
    ck_assert_int_eq(sqt_ref_quantize(c, x, n, &KEY, want, NULL, NULL), SQ_OK);
    for (uint64_t i = 0; i < n; i++)
        SQT_CHECK(got[i] == want[i], "%s: element %llu (x = %a): code %d, want %d", what,
                  (unsigned long long)i, (double)x[i], got[i], want[i]);
    free(want);
}

/* ------------------------------------------------------------------------ */
/* Sizes 0 and 1, zero and constant groups                                  */
/* ------------------------------------------------------------------------ */

static const char *all_kinds[] = {
    "kind=sym,bits=4,round=rtn",
    "kind=sym,bits=4,round=sr,hadamard=32",
    "kind=sym,bits=3,round=sr,levels=deepspeed,scale=bf16",
    "kind=minmax,bits=3,round=rtn",
    "kind=minmax,bits=8,round=sr,hadamard=2,scale=fp16",
};

START_TEST(test_n_zero)
{
    for (size_t t = 0; t < sizeof all_kinds / sizeof all_kinds[0]; t++) {
        sq_codec c = codec(all_kinds[t]);
        ck_assert_uint_eq(sq_codec_bytes(&c, 0), 0);
        sq_qbuf q;
        ck_assert_int_eq(sq_qbuf_alloc(&c, 0, &q), SQ_OK);
        float x[1] = {1.0f}, out[1] = {42.0f}, ref[1] = {2.0f};
        ck_assert_int_eq(sq_quantize(&c, x, 0, &KEY, &q), SQ_OK);
        ck_assert_int_eq(sq_quantize_diff(&c, x, ref, 0, &KEY, &q), SQ_OK);
        ck_assert_int_eq(sq_dequantize(&c, &q, 0, out), SQ_OK);
        ck_assert_int_eq(sq_dequantize_add(&c, &q, ref, 0, out), SQ_OK);
        ck_assert_int_eq(sq_dequant_sum(&c, &q, 1, 0, out), SQ_OK);
        sq_qbuf o;
        ck_assert_int_eq(sq_qbuf_alloc(&c, 0, &o), SQ_OK);
        ck_assert_int_eq(sq_dequant_sum_requant(&c, &q, 1, 0, &c, &KEY, &o), SQ_OK);
        ck_assert(out[0] == 42.0f); /* nothing written */
        sq_qbuf_free(&q);
        sq_qbuf_free(&o);
    }
}
END_TEST

/* One element: sym gives the code +-qmax (RTN exactly; SR qmax or one
** below, when v = x * (qmax/|x|) rounds just under qmax) and decodes within
** the bound; min-max has r = 0, so m = s = 1, code 0 and the decode is the
** offset, the value itself, bit for bit. */
START_TEST(test_n_one)
{
    static const float xs[] = {3.0f, -0.1f, 1e30f, -1e-30f, 0x1p-149f, -7.0f, 0x1.fffffep-65f};
    for (int bits = 2; bits <= 8; bits++)
        for (size_t t = 0; t < sizeof xs / sizeof xs[0]; t++)
            for (int rnd = 0; rnd < 2; rnd++) {
                sq_codec c = sq_codec_default();
                c.bits = bits;
                c.round = (sq_round)rnd;
                int qm = (1 << (bits - 1)) - 1, code;
                sq_qbuf q;
                float out;
                ck_assert_int_eq(run(&c, &xs[t], 1, &q, &code, &out), SQ_OK);
                int want = xs[t] < 0 ? -qm : qm;
                if (rnd == SQ_ROUND_RTN)
                    ck_assert_msg(code == want, "bits %d x %a: code %d, want %d", bits, (double)xs[t], code, want);
                else
                    ck_assert_msg(code == want || code == want - (xs[t] < 0 ? -1 : 1), "bits %d x %a: code %d",
                                  bits, (double)xs[t], code);
                float s = sqt_meta(q.scales, 0, c.scale);
                double err = fabs((double)out - xs[t]);
                ck_assert_msg(err <= (rnd ? 1.0 : 0.5) * s + 0x1p-20 * fabs((double)xs[t]) + (qm + 2) * 0x1p-150,
                              "bits %d x %a: x' = %a", bits, (double)xs[t], (double)out);
                sq_qbuf_free(&q);

                c.kind = SQ_KIND_MINMAX;
                ck_assert_int_eq(run(&c, &xs[t], 1, &q, &code, &out), SQ_OK);
                ck_assert_int_eq(code, 0);
                ck_assert(sqt_meta(q.scales, 0, c.scale) == 1.0f);
                ck_assert_uint_eq(sqt_bits(sqt_meta(q.offsets, 0, c.scale)), sqt_bits(xs[t]));
                ck_assert_uint_eq(sqt_bits(out), sqt_bits(xs[t]));
                sq_qbuf_free(&q);
            }
}
END_TEST

/* All-zero groups: code 0, scale 1 (in every dtype), offset 0, decode 0;
** the groups around them are unaffected. -0 inputs decode to zero too. */
START_TEST(test_zero_groups)
{
    static const char *specs[] = {
        "kind=sym,bits=4,group=64,round=rtn",         "kind=sym,bits=4,group=64,round=sr",
        "kind=sym,bits=5,group=64,round=sr,scale=bf16", "kind=sym,bits=2,group=64,levels=deepspeed,scale=fp16",
        "kind=minmax,bits=3,group=64,round=rtn",      "kind=minmax,bits=3,group=64,round=sr,scale=fp16",
        "kind=minmax,bits=1,group=64,round=sr,scale=bf16",
    };
    const uint64_t n = 300;
    float x[300], out[300];
    int codes[300];
    for (size_t t = 0; t < sizeof specs / sizeof specs[0]; t++) {
        sq_codec c = codec(specs[t]);
        sqt_fill(x, n, 3);
        for (int i = 128; i < 192; i++) x[i] = i % 3 ? 0.0f : -0.0f; /* group 2 */
        for (int i = 256; i < 300; i++) x[i] = 0.0f;                  /* the short last group */
        sq_qbuf q;
        ck_assert_int_eq(run(&c, x, n, &q, codes, out), SQ_OK);
        for (int g = 2; g <= 4; g += 2) {
            ck_assert_msg(sqt_meta(q.scales, (uint64_t)g, c.scale) == 1.0f, "%s: group %d scale %a", specs[t], g,
                          (double)sqt_meta(q.scales, (uint64_t)g, c.scale));
            if (c.kind == SQ_KIND_MINMAX) ck_assert(sqt_meta(q.offsets, (uint64_t)g, c.scale) == 0.0f);
        }
        for (int i = 128; i < 192; i++) ck_assert(codes[i] == 0 && out[i] == 0.0f);
        for (int i = 256; i < 300; i++) ck_assert(codes[i] == 0 && out[i] == 0.0f);
        assert_codes_ref(&c, x, n, codes, specs[t]);
        sq_qbuf_free(&q);
    }
}
END_TEST

/* Constant groups. Sym: the code is +-qmax for RTN; for SR too when v is
** exactly qmax (c a power of two), else qmax or one below. Min-max: r = 0
** gives m = s = 1, code 0, and the decode is c exactly. */
START_TEST(test_constant_groups)
{
    static const float consts[] = {3.0f, -0.1f, 1e30f, -7.5e-20f, 1e-25f, FLT_MIN, -0x1p-149f,
                                   0.25f, -0x1p-70f, 0x1p100f};
    const uint64_t n = 100, g = 32; /* 4 groups, the last of 4 elements */
    float x[100], out[100];
    int codes[100];
    for (size_t t = 0; t < sizeof consts / sizeof consts[0]; t++) {
        float k = consts[t];
        int pow2 = (sqt_bits(k) & 0x7fffffu) == 0 && (sqt_bits(k) & 0x7f800000u) != 0;
        for (uint64_t i = 0; i < n; i++) x[i] = k;
        for (int bits = 2; bits <= 8; bits++)
            for (int rnd = 0; rnd < 2; rnd++) {
                sq_codec c = sq_codec_default();
                c.bits = bits;
                c.group = g;
                c.round = (sq_round)rnd;
                int qm = (1 << (bits - 1)) - 1, want = k < 0 ? -qm : qm;
                sq_qbuf q;
                ck_assert_int_eq(run(&c, x, n, &q, codes, out), SQ_OK);
                for (uint64_t i = 0; i < n; i++) {
                    if (rnd == SQ_ROUND_RTN || pow2)
                        SQT_CHECK(codes[i] == want, "c = %a bits %d round %d: code %d, want %d",
                                  (double)k, bits, rnd, codes[i], want);
                    else
                        SQT_CHECK(codes[i] == want || codes[i] == want - (k < 0 ? -1 : 1),
                                  "c = %a bits %d: code %d", (double)k, bits, codes[i]);
                }
                sq_qbuf_free(&q);

                c.kind = SQ_KIND_MINMAX;
                ck_assert_int_eq(run(&c, x, n, &q, codes, out), SQ_OK);
                for (uint64_t gi = 0; gi < 4; gi++) {
                    ck_assert(sqt_meta(q.scales, gi, c.scale) == 1.0f);
                    ck_assert_uint_eq(sqt_bits(sqt_meta(q.offsets, gi, c.scale)), sqt_bits(k));
                }
                for (uint64_t i = 0; i < n; i++)
                    SQT_CHECK(codes[i] == 0 && sqt_bits(out[i]) == sqt_bits(k), "minmax c = %a: code %d x' %a",
                              (double)k, codes[i], (double)out[i]);
                sq_qbuf_free(&q);
            }
    }
}
END_TEST

/* Min-max with a 16-bit dtype rounds the offset first. A constant that
** rounds down has a tiny positive range (ordinary quantization); one that
** rounds UP lies below its own offset, r = hi - lo' < 0: the library then
** takes the one-level path (m = s = 1, code 0) and decodes to lo', within
** half a bf16 ulp of the value. (The r < 0 case is not spelled out in
** shardq.h; this pins what sq_hd.h documents.) */
START_TEST(test_constant_minmax_16bit_offset)
{
    sq_codec c = codec("kind=minmax,bits=3,group=8,round=rtn,scale=bf16");
    float x[8], out[8];
    int codes[8];
    sq_qbuf q;
    /* 1 + 2^-8 + 2^-10 (0x1.014p0) rounds up to 1 + 2^-7 */
    for (int i = 0; i < 8; i++) x[i] = 0x1.014p+0f;
    ck_assert_int_eq(run(&c, x, 8, &q, codes, out), SQ_OK);
    ck_assert(sqt_meta(q.offsets, 0, c.scale) == 0x1.02p+0f);
    ck_assert(sqt_meta(q.scales, 0, c.scale) == 1.0f);
    for (int i = 0; i < 8; i++) ck_assert(codes[i] == 0 && out[i] == 0x1.02p+0f);
    sq_qbuf_free(&q);
    /* 1 + 2^-9 rounds down to 1: r = 2^-9, codes L = 7, decode near x */
    for (int i = 0; i < 8; i++) x[i] = 0x1.008p+0f;
    ck_assert_int_eq(run(&c, x, 8, &q, codes, out), SQ_OK);
    ck_assert(sqt_meta(q.offsets, 0, c.scale) == 1.0f);
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(codes[i], 7);
        ck_assert_msg(fabsf(out[i] - x[i]) <= 0x1p-9f * 0x1p-8f * 7, "x' = %a", (double)out[i]);
    }
    assert_codes_ref(&c, x, 8, codes, "rounded-down offset");
    sq_qbuf_free(&q);
}
END_TEST

/* A group larger than n: one short group holds everything. */
START_TEST(test_group_larger_than_n)
{
    static const char *specs[] = {"kind=sym,bits=4,group=4096,round=sr",
                                  "kind=minmax,bits=5,group=1099511627776,round=rtn"};
    const uint64_t n = 100;
    float x[100], out[100];
    int codes[100];
    sqt_fill(x, n, 9);
    for (size_t t = 0; t < 2; t++) {
        sq_codec c = codec(specs[t]);
        ck_assert_uint_eq(sq_codec_groups(&c, n), 1);
        sq_qbuf q;
        ck_assert_int_eq(run(&c, x, n, &q, codes, out), SQ_OK);
        assert_codes_ref(&c, x, n, codes, specs[t]);
        sq_qbuf_free(&q);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Denormal groups                                                          */
/* ------------------------------------------------------------------------ */

/* Groups whose absmax (range) is below 2^-64, down to fp32 denormals. The
** codes are the convention's with the 2^64 lift (reference in
** check_util.h). The decode error is bounded by
**     w s + (qm + 2) 2^-150 + 2^-23 a
** (w = 1/2 RTN, 1 SR; a the absmax or range): a denormal scale s is itself
** rounded, by up to 2^-150 (half the denormal spacing), which the code
** multiplies by up to qm; the product q s and (min-max) the sum with lo add
** at most another 2^-150; 2^-23 a covers the two roundings of v = x m in
** the lifted (normal) range. */
START_TEST(test_denormal_groups)
{
    const uint64_t n = 256 + 17, g = 64;
    float x[273], out[273];
    int codes[273];
    sqt_rng r = {17};
    for (int variant = 0; variant < 3; variant++)
        for (int bits = 1; bits <= 8; bits++)
            for (int rnd = 0; rnd < 2; rnd++) {
                sq_codec c = sq_codec_default();
                c.kind = variant == 2 ? SQ_KIND_MINMAX : SQ_KIND_SYM;
                c.levels = variant == 1 ? SQ_LEVELS_DEEPSPEED : SQ_LEVELS_SDP4BIT;
                c.bits = bits;
                c.group = g;
                c.round = (sq_round)rnd;
                if (sq_codec_validate(&c) != SQ_OK) continue;
                const sqt_levels lv = sqt_levels_of(&c);
                /* group 0: pure denormals k 2^-149; group 1: up to 2^-100;
                ** group 2: just below 2^-64; group 3: a single denormal
                ** amid zeros; the short last group: exactly +-2^-64 and
                ** smaller (no lift for its absmax) */
                for (uint64_t i = 0; i < n; i++) {
                    int64_t k = (int64_t)(sqt_next(&r) % 4001) - 2000;
                    if (i < 64) x[i] = ldexpf((float)k, -149);
                    else if (i < 128) x[i] = ldexpf((float)k, -111);
                    else if (i < 192) x[i] = ldexpf((float)k, -75) * 0x1.fffp-1f;
                    else if (i < 256) x[i] = i == 200 ? -0x1p-149f : 0.0f;
                    else x[i] = i == 260 ? -0x1p-64f : ldexpf((float)k, -80);
                }
                sq_qbuf q;
                ck_assert_int_eq(run(&c, x, n, &q, codes, out), SQ_OK);
                char what[128];
                snprintf(what, sizeof what, "denormal groups, kind %d levels %d bits %d round %d",
                         c.kind, c.levels, bits, rnd);
                assert_codes_ref(&c, x, n, codes, what);
                for (uint64_t i = 0; i < n; i++) {
                    uint64_t gi = i / g, g0 = gi * g, len = n - g0 < g ? n - g0 : g;
                    float a = 0, mn = x[g0], mx = x[g0];
                    for (uint64_t j = g0; j < g0 + len; j++) {
                        a = fmaxf(a, fabsf(x[j]));
                        mn = fminf(mn, x[j]);
                        mx = fmaxf(mx, x[j]);
                    }
                    double span = c.kind == SQ_KIND_MINMAX ? (double)mx - mn : a;
                    float s = sqt_meta(q.scales, gi, c.scale);
                    double w = rnd ? 1.0 : 0.5;
                    if (variant == 1 && codes[i] == (int)lv.qhi) w = 1.0; /* deepspeed top clamp */
                    double b = w * s + (lv.qm + 2) * 0x1p-150 + 0x1p-23 * span;
                    double err = fabs((double)out[i] - x[i]);
                    SQT_CHECK(err <= b, "%s: element %llu x = %a x' = %a s = %a: error %g > %g", what,
                              (unsigned long long)i, (double)x[i], (double)out[i], (double)s, err, b);
                }
                sq_qbuf_free(&q);
            }
}
END_TEST

/* Where the plain multiplier m = qm / a is finite (a >= 2^-126 here), the
** lifted computation gives the same codes as the plain formula
** v = x * (qm / a), as the convention promises. */
START_TEST(test_lift_matches_plain)
{
    const uint64_t n = 64 * 6;
    float x[384], out[384];
    int codes[384];
    sqt_rng r = {23};
    for (uint64_t i = 0; i < n; i++) {
        int e = -120 + (int)(i / 64) * 10; /* groups from ~2^-120 up to ~2^-70: all lifted */
        x[i] = ldexpf(sqt_sym(&r), e);
    }
    for (int bits = 2; bits <= 8; bits++)
        for (int rnd = 0; rnd < 2; rnd++) {
            sq_codec c = sq_codec_default();
            c.bits = bits;
            c.group = 64;
            c.round = (sq_round)rnd;
            float qm = (float)((1 << (bits - 1)) - 1);
            sq_qbuf q;
            ck_assert_int_eq(run(&c, x, n, &q, codes, out), SQ_OK);
            for (uint64_t g0 = 0; g0 < n; g0 += 64) {
                float a = 0;
                for (uint64_t j = g0; j < g0 + 64; j++) a = fmaxf(a, fabsf(x[j]));
                ck_assert(a < 0x1p-64f && a >= 0x1p-126f);
                float m = qm / a;
                ck_assert(isfinite(m));
                for (uint64_t j = g0; j < g0 + 64; j++) {
                    float v = x[j] * m, qf;
                    if (rnd == SQ_ROUND_RTN) qf = rintf(v);
                    else {
                        float f = floorf(v);
                        qf = f + (sq_uniform(&KEY, j) < v - f ? 1.0f : 0.0f);
                    }
                    qf = fminf(fmaxf(qf, -qm), qm);
                    SQT_CHECK(codes[j] == (int)qf, "bits %d round %d element %llu: code %d, plain formula %d",
                              bits, rnd, (unsigned long long)j, codes[j], (int)qf);
                }
            }
            sq_qbuf_free(&q);
        }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Near FLT_MAX                                                             */
/* ------------------------------------------------------------------------ */

/* Sym groups with absmax FLT_MAX/2 (and FLT_MAX itself where
** fl(qmax * fl(FLT_MAX / qmax)) is finite): the decode is finite and within
** the usual bound. Where that product is Inf (absmax = FLT_MAX with qmax = 31
** or 127, bits 6 and 8), the top code would decode to Inf: quantize must
** refuse the group with SQ_ERR_RANGE (shardq.h, "Non-finite values"). */
START_TEST(test_near_flt_max_sym)
{
    const uint64_t n = 64;
    float x[64], out[64];
    int codes[64];
    sqt_rng r = {31};
    for (int variant = 0; variant < 2; variant++)
        for (int bits = 1; bits <= 8; bits++)
            for (int top = 0; top < 2; top++)
                for (int rnd = 0; rnd < 2; rnd++) {
                    sq_codec c = sq_codec_default();
                    c.levels = variant ? SQ_LEVELS_DEEPSPEED : SQ_LEVELS_SDP4BIT;
                    c.bits = bits;
                    c.group = 64;
                    c.round = (sq_round)rnd;
                    if (sq_codec_validate(&c) != SQ_OK) continue;
                    const sqt_levels lv = sqt_levels_of(&c);
                    float a = top ? FLT_MAX : FLT_MAX / 2;
                    volatile float s0 = a / lv.qm, top_decode = lv.qhi * s0,
                                   bottom_decode = lv.qlo * s0;
                    for (uint64_t i = 0; i < n; i++) x[i] = a * sqt_sym(&r);
                    x[0] = variant ? -a : a;
                    x[1] = -a;
                    sq_qbuf q;
                    if (!isfinite(top_decode) || !isfinite(bottom_decode)) {
                        ck_assert_int_eq(sq_qbuf_alloc(&c, n, &q), SQ_OK);
                        SQT_CHECK(sq_quantize(&c, x, n, &KEY, &q) == SQ_ERR_RANGE,
                                  "bits %d levels %d: grid past FLT_MAX not refused", bits, variant);
                        sq_qbuf_free(&q);
                        continue;
                    }
                    ck_assert_int_eq(run(&c, x, n, &q, codes, out), SQ_OK);
                    assert_codes_ref(&c, x, n, codes, "near FLT_MAX");
                    float s = sqt_meta(q.scales, 0, c.scale);
                    for (uint64_t i = 0; i < n; i++) {
                        double w = rnd ? 1.0 : (variant && codes[i] == (int)lv.qhi ? 1.0 : 0.5);
                        double err = fabs((double)out[i] - x[i]);
                        double b = w * s + 0x1p-20 * ((double)lv.qm * s + fabs((double)x[i]));
                        SQT_CHECK(isfinite(out[i]) && err <= b, "bits %d levels %d: x = %a x' = %a", bits,
                                  variant, (double)x[i], (double)out[i]);
                    }
                    sq_qbuf_free(&q);
                }
}
END_TEST

/* Min-max: a range that overflows fp32 (lo = -FLT_MAX, hi = FLT_MAX) is
** SQ_ERR_RANGE; a range of FLT_MAX/2 works and decodes finitely. */
START_TEST(test_near_flt_max_minmax)
{
    float x[16], out[16];
    int codes[16];
    for (int i = 0; i < 16; i++) x[i] = (float)(i - 8) * (FLT_MAX / 16);
    x[0] = -FLT_MAX;
    x[15] = FLT_MAX;
    for (int bits = 1; bits <= 8; bits++)
        for (int rnd = 0; rnd < 2; rnd++) {
            sq_codec c = codec("kind=minmax,group=16");
            c.bits = bits;
            c.round = (sq_round)rnd;
            sq_qbuf q;
            ck_assert_int_eq(sq_qbuf_alloc(&c, 16, &q), SQ_OK);
            ck_assert_int_eq(sq_quantize(&c, x, 16, &KEY, &q), SQ_ERR_RANGE);
            sq_qbuf_free(&q);

            float y[16];
            for (int i = 0; i < 16; i++) y[i] = x[i] / 4; /* range FLT_MAX / 2 */
            ck_assert_int_eq(run(&c, y, 16, &q, codes, out), SQ_OK);
            assert_codes_ref(&c, y, 16, codes, "minmax near FLT_MAX");
            float s = sqt_meta(q.scales, 0, c.scale);
            float L = (float)((1 << bits) - 1);
            for (int i = 0; i < 16; i++) {
                double err = fabs((double)out[i] - y[i]);
                double b = (rnd ? 1.0 : 0.5) * s + 0x1p-20 * ((double)L * s + fabs((double)y[i]));
                SQT_CHECK(isfinite(out[i]) && err <= b, "bits %d: y = %a y' = %a", bits, (double)y[i],
                          (double)out[i]);
            }
            sq_qbuf_free(&q);
        }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Non-finite input, overflowing scales                                     */
/* ------------------------------------------------------------------------ */

START_TEST(test_nonfinite)
{
    const float bad[] = {NAN, -NAN, INFINITY, -INFINITY, sqt_float(0x7f800001u)};
    const uint64_t n = 300, where[] = {0, 150, 299}; /* 299: in the short last group and block */
    float x[300], ref[300];
    for (size_t t = 0; t < sizeof all_kinds / sizeof all_kinds[0]; t++) {
        sq_codec c = codec(all_kinds[t]);
        sq_qbuf q;
        ck_assert_int_eq(sq_qbuf_alloc(&c, n, &q), SQ_OK);
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++)
            for (size_t w = 0; w < 3; w++) {
                sqt_fill(x, n, 1);
                sqt_fill(ref, n, 2);
                x[where[w]] = bad[b];
                SQT_CHECK(sq_quantize(&c, x, n, &KEY, &q) == SQ_ERR_NONFINITE, "%s: %a at %llu",
                          all_kinds[t], (double)bad[b], (unsigned long long)where[w]);
                SQT_CHECK(sq_quantize_diff(&c, x, ref, n, &KEY, &q) == SQ_ERR_NONFINITE,
                          "%s: diff, %a in x", all_kinds[t], (double)bad[b]);
                SQT_CHECK(sq_quantize_diff(&c, ref, x, n, &KEY, &q) == SQ_ERR_NONFINITE,
                          "%s: diff, %a in ref", all_kinds[t], (double)bad[b]);
            }
        /* finite x and ref whose fp32 difference overflows: the input was
        ** fine, the result does not fit */
        sqt_fill(x, n, 1);
        sqt_fill(ref, n, 2);
        x[77] = FLT_MAX;
        ref[77] = -FLT_MAX;
        ck_assert_int_eq(sq_quantize_diff(&c, x, ref, n, &KEY, &q), SQ_ERR_RANGE);
        sq_qbuf_free(&q);
    }
}
END_TEST

/* Scales (and min-max offsets) that do not fit a 16-bit dtype, and
** transforms that take finite input beyond fp32, are SQ_ERR_RANGE. */
START_TEST(test_range_errors)
{
    struct {
        const char *spec;
        float lo, hi;
    } cases[] = {
        {"kind=sym,bits=4,scale=fp16", -1e6f, 1.0f},          /* s = 1e6 / 7 > 65504 */
        {"kind=sym,bits=8,scale=fp16", 0.0f, 65504.0f * 128}, /* s = 65504 * 128 / 127 */
        {"kind=sym,bits=2,scale=bf16", -FLT_MAX, 0.0f},       /* s = FLT_MAX: bf16 Inf */
        {"kind=minmax,bits=3,scale=fp16", -1e5f, 0.0f},       /* offset -1e5: fp16 -Inf */
        {"kind=minmax,bits=3,scale=fp16", 0.0f, 1e6f},        /* s = 1e6 / 7 */
        {"kind=minmax,bits=8,scale=bf16", -FLT_MAX, FLT_MAX}, /* range overflows */
    };
    float x[300];
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        sq_codec c = codec(cases[t].spec);
        sqt_fill(x, 300, 4);
        for (int i = 0; i < 300; i++) x[i] *= 0x1p-10f;
        x[140] = cases[t].lo; /* in group 1 */
        x[141] = cases[t].hi;
        sq_qbuf q;
        ck_assert_int_eq(sq_qbuf_alloc(&c, 300, &q), SQ_OK);
        ck_assert_msg(sq_quantize(&c, x, 300, &KEY, &q) == SQ_ERR_RANGE, "%s with [%a, %a]",
                      cases[t].spec, (double)cases[t].lo, (double)cases[t].hi);
        sq_qbuf_free(&q);
    }
    /* the largest scale that fits: s = 65504 exactly is fine */
    sq_codec c = codec("kind=sym,bits=4,scale=fp16");
    x[141] = 65504.0f * 7;
    x[140] = 0.0f;
    sq_qbuf q;
    ck_assert_int_eq(sq_qbuf_alloc(&c, 300, &q), SQ_OK);
    ck_assert_int_eq(sq_quantize(&c, x, 300, &KEY, &q), SQ_OK);
    ck_assert(sqt_meta(q.scales, 1, c.scale) == 65504.0f);
    sq_qbuf_free(&q);

    /* Hadamard of finite values beyond FLT_MAX / 2: a + b overflows. The
    ** library reports this as SQ_ERR_RANGE (the input was finite); shardq.h
    ** does not yet say which status applies; this pins codec.c's choice. */
    c = codec("kind=sym,bits=4,hadamard=2,round=rtn");
    sqt_fill(x, 300, 4);
    x[10] = FLT_MAX * 0.75f;
    x[11] = FLT_MAX * 0.75f;
    ck_assert_int_eq(sq_qbuf_alloc(&c, 300, &q), SQ_OK);
    ck_assert_int_eq(sq_quantize(&c, x, 300, &KEY, &q), SQ_ERR_RANGE);
    sq_qbuf_free(&q);
}
END_TEST

/* Decoded chunks whose fp32 sum overflows cannot be requantized: an error,
** never SQ_OK with garbage. */
START_TEST(test_sum_overflow)
{
    sq_codec c = codec("kind=sym,bits=8,group=4,round=rtn");
    float x[8] = {FLT_MAX / 2 * 1.5f, 1, 2, 3, 4, 5, 6, 7};
    sq_qbuf chunks[2], out;
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(sq_qbuf_alloc(&c, 8, &chunks[i]), SQ_OK);
        ck_assert_int_eq(sq_quantize(&c, x, 8, NULL, &chunks[i]), SQ_OK);
    }
    ck_assert_int_eq(sq_qbuf_alloc(&c, 8, &out), SQ_OK);
    ck_assert_int_eq(sq_dequant_sum_requant(&c, chunks, 2, 8, &c, NULL, &out), SQ_ERR_RANGE);
    float y[8], big[8];
    ck_assert_int_eq(sq_dequant_sum(&c, chunks, 2, 8, y), SQ_ERR_RANGE);
    ck_assert(isinf(y[0]) && isfinite(y[1])); /* every value written all the same */
    /* ref + D(q) past fp32 */
    for (int i = 0; i < 8; i++) big[i] = FLT_MAX;
    ck_assert_int_eq(sq_dequantize_add(&c, &chunks[0], big, 8, y), SQ_ERR_RANGE);
    for (int i = 0; i < 2; i++) sq_qbuf_free(&chunks[i]);
    sq_qbuf_free(&out);
}
END_TEST

/* Min-max groups spanning [0, FLT_MAX]: the range fits, but the rounded
** scale times 2^b - 1 may not; exactly those cases are SQ_ERR_RANGE, the
** others decode finitely. */
START_TEST(test_minmax_grid_past_flt_max)
{
    float x[4] = {0.0f, FLT_MAX, FLT_MAX / 3, FLT_MAX / 7}, out[4];
    int refused = 0;
    for (int bits = 1; bits <= 8; bits++) {
        sq_codec c = codec("kind=minmax,group=4,round=rtn");
        c.bits = bits;
        volatile float L = (float)((1 << bits) - 1), s = FLT_MAX / L, top = L * s;
        sq_qbuf q;
        ck_assert_int_eq(sq_qbuf_alloc(&c, 4, &q), SQ_OK);
        int rc = sq_quantize(&c, x, 4, NULL, &q);
        if (isfinite(top)) {
            ck_assert_int_eq(rc, SQ_OK);
            ck_assert_int_eq(sq_dequantize(&c, &q, 4, out), SQ_OK);
            for (int i = 0; i < 4; i++) ck_assert(isfinite(out[i]));
        } else {
            ck_assert_int_eq(rc, SQ_ERR_RANGE);
            refused++;
        }
        sq_qbuf_free(&q);
    }
    ck_assert_msg(refused > 0, "no bit width exercised the refusal"); /* 3, 5, 6, 7 do */
}
END_TEST

/* The exact case that first showed the problem: {FLT_MAX, 1}, sym 6-bit. */
START_TEST(test_sym_grid_past_flt_max)
{
    sq_codec c = codec("kind=sym,bits=6,group=2,round=rtn");
    float x[2] = {FLT_MAX, 1.0f};
    sq_qbuf q;
    ck_assert_int_eq(sq_qbuf_alloc(&c, 2, &q), SQ_OK);
    ck_assert_int_eq(sq_quantize(&c, x, 2, NULL, &q), SQ_ERR_RANGE);
    sq_qbuf_free(&q);
}
END_TEST

/* Decoding metadata that is not finite (a damaged file) reports it. */
START_TEST(test_decode_bad_metadata)
{
    sq_codec c = codec("kind=sym,bits=4,group=4,round=rtn");
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
    sq_qbuf q;
    ck_assert_int_eq(sq_qbuf_alloc(&c, 8, &q), SQ_OK);
    ck_assert_int_eq(sq_quantize(&c, x, 8, NULL, &q), SQ_OK);
    ck_assert_int_eq(sq_dequantize(&c, &q, 8, out), SQ_OK);
    ((float *)q.scales)[1] = NAN;
    ck_assert_int_eq(sq_dequantize(&c, &q, 8, out), SQ_ERR_RANGE);
    ((float *)q.scales)[1] = FLT_MAX;
    ck_assert_int_eq(sq_dequantize(&c, &q, 8, out), SQ_ERR_RANGE);
    sq_qbuf_free(&q);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Arguments                                                                */
/* ------------------------------------------------------------------------ */

START_TEST(test_null_and_bad_args)
{
    const uint64_t n = 16;
    float x[16], ref[16], out[16];
    sqt_fill(x, n, 5);
    sqt_fill(ref, n, 6);
    sq_codec sym = codec("kind=sym,round=sr"), mm = codec("kind=minmax,round=rtn");
    sq_codec rtn = codec("kind=sym,round=rtn");
    sq_qbuf q, qm;
    ck_assert_int_eq(sq_qbuf_alloc(&sym, n, &q), SQ_OK);
    ck_assert_int_eq(sq_qbuf_alloc(&mm, n, &qm), SQ_OK);
    ck_assert_ptr_null(q.offsets); /* sym has no offsets */

    /* quantize */
    ck_assert_int_eq(sq_quantize(NULL, x, n, &KEY, &q), SQ_ERR_ARG);
    ck_assert_int_eq(sq_quantize(&sym, NULL, n, &KEY, &q), SQ_ERR_ARG);
    ck_assert_int_eq(sq_quantize(&sym, x, n, &KEY, NULL), SQ_ERR_ARG);
    ck_assert_int_eq(sq_quantize(&sym, x, n, NULL, &q), SQ_ERR_ARG); /* SR needs a key */
    ck_assert_int_eq(sq_quantize(&rtn, x, n, NULL, &q), SQ_OK);      /* RTN does not */
    sq_qbuf broken = q;
    broken.codes = NULL;
    ck_assert_int_eq(sq_quantize(&sym, x, n, &KEY, &broken), SQ_ERR_ARG);
    broken = q;
    broken.scales = NULL;
    ck_assert_int_eq(sq_quantize(&sym, x, n, &KEY, &broken), SQ_ERR_ARG);
    broken = qm;
    broken.offsets = NULL;
    ck_assert_int_eq(sq_quantize(&mm, x, n, &KEY, &broken), SQ_ERR_ARG);
    /* key fields beyond their documented widths */
    sq_rng_key k = KEY;
    k.worker = 1u << 24;
    ck_assert_int_eq(sq_quantize(&sym, x, n, &k, &q), SQ_ERR_ARG);
    k = KEY;
    k.site = 256;
    ck_assert_int_eq(sq_quantize(&sym, x, n, &k, &q), SQ_ERR_ARG);
    /* an invalid codec struct */
    sq_codec bad = sym;
    bad.bits = 9;
    ck_assert_int_eq(sq_quantize(&bad, x, n, &KEY, &q), SQ_ERR_SPEC);
    bad = sym;
    bad.group = 0;
    ck_assert_int_eq(sq_quantize(&bad, x, n, &KEY, &q), SQ_ERR_SPEC);

    /* quantize_diff */
    ck_assert_int_eq(sq_quantize_diff(NULL, x, ref, n, &KEY, &q), SQ_ERR_ARG);
    ck_assert_int_eq(sq_quantize_diff(&sym, NULL, ref, n, &KEY, &q), SQ_ERR_ARG);
    ck_assert_int_eq(sq_quantize_diff(&sym, x, NULL, n, &KEY, &q), SQ_ERR_ARG);
    ck_assert_int_eq(sq_quantize_diff(&sym, x, ref, n, &KEY, NULL), SQ_ERR_ARG);
    ck_assert_int_eq(sq_quantize_diff(&sym, x, ref, n, NULL, &q), SQ_ERR_ARG);

    /* dequantize, dequantize_add */
    ck_assert_int_eq(sq_quantize(&sym, x, n, &KEY, &q), SQ_OK);
    ck_assert_int_eq(sq_dequantize(NULL, &q, n, out), SQ_ERR_ARG);
    ck_assert_int_eq(sq_dequantize(&sym, NULL, n, out), SQ_ERR_ARG);
    ck_assert_int_eq(sq_dequantize(&sym, &q, n, NULL), SQ_ERR_ARG);
    broken = q;
    broken.codes = NULL;
    ck_assert_int_eq(sq_dequantize(&sym, &broken, n, out), SQ_ERR_ARG);
    broken = qm;
    broken.offsets = NULL;
    ck_assert_int_eq(sq_dequantize(&mm, &broken, n, out), SQ_ERR_ARG);
    ck_assert_int_eq(sq_dequantize_add(NULL, &q, ref, n, out), SQ_ERR_ARG);
    ck_assert_int_eq(sq_dequantize_add(&sym, NULL, ref, n, out), SQ_ERR_ARG);
    ck_assert_int_eq(sq_dequantize_add(&sym, &q, NULL, n, out), SQ_ERR_ARG);
    ck_assert_int_eq(sq_dequantize_add(&sym, &q, ref, n, NULL), SQ_ERR_ARG);

    /* the sums: NULL chunks, k = 0, k < 0, a broken chunk, NULL outputs */
    sq_qbuf chunks[2] = {q, q}, o;
    ck_assert_int_eq(sq_qbuf_alloc(&sym, n, &o), SQ_OK);
    ck_assert_int_eq(sq_dequant_sum(&sym, NULL, 1, n, out), SQ_ERR_ARG);
    ck_assert_int_eq(sq_dequant_sum(&sym, chunks, 0, n, out), SQ_ERR_ARG);
    ck_assert_int_eq(sq_dequant_sum(&sym, chunks, -1, n, out), SQ_ERR_ARG);
    ck_assert_int_eq(sq_dequant_sum(&sym, chunks, 2, n, NULL), SQ_ERR_ARG);
    ck_assert_int_eq(sq_dequant_sum(NULL, chunks, 2, n, out), SQ_ERR_ARG);
    ck_assert_int_eq(sq_dequant_sum(&sym, chunks, 2, n, out), SQ_OK);
    ck_assert_int_eq(sq_dequant_sum_requant(&sym, NULL, 1, n, &sym, &KEY, &o), SQ_ERR_ARG);
    ck_assert_int_eq(sq_dequant_sum_requant(&sym, chunks, 0, n, &sym, &KEY, &o), SQ_ERR_ARG);
    ck_assert_int_eq(sq_dequant_sum_requant(&sym, chunks, -3, n, &sym, &KEY, &o), SQ_ERR_ARG);
    ck_assert_int_eq(sq_dequant_sum_requant(NULL, chunks, 2, n, &sym, &KEY, &o), SQ_ERR_ARG);
    ck_assert_int_eq(sq_dequant_sum_requant(&sym, chunks, 2, n, NULL, &KEY, &o), SQ_ERR_ARG);
    ck_assert_int_eq(sq_dequant_sum_requant(&sym, chunks, 2, n, &sym, &KEY, NULL), SQ_ERR_ARG);
    ck_assert_int_eq(sq_dequant_sum_requant(&sym, chunks, 2, n, &sym, NULL, &o), SQ_ERR_ARG);
    chunks[1].scales = NULL;
    ck_assert_int_eq(sq_dequant_sum(&sym, chunks, 2, n, out), SQ_ERR_ARG);
    ck_assert_int_eq(sq_dequant_sum_requant(&sym, chunks, 2, n, &sym, &KEY, &o), SQ_ERR_ARG);

    /* allocation */
    ck_assert_int_eq(sq_qbuf_alloc(NULL, n, &o), SQ_ERR_ARG);
    ck_assert_int_eq(sq_qbuf_alloc(&sym, n, NULL), SQ_ERR_ARG);
    sq_qbuf_free(&q);
    sq_qbuf_free(&qm);
    sq_qbuf_free(&o);
}
END_TEST

START_TEST(test_qbuf_alloc_free)
{
    sq_codec c = codec("kind=minmax,bits=3,group=64,scale=bf16");
    sq_qbuf q;
    ck_assert_int_eq(sq_qbuf_alloc(&c, 300, &q), SQ_OK);
    ck_assert(q.codes && q.scales && q.offsets);
    for (uint64_t i = 0; i < sq_codec_code_bytes(&c, 300); i++) ck_assert_uint_eq(q.codes[i], 0);
    for (uint64_t i = 0; i < sq_codec_scale_bytes(&c, 300); i++)
        ck_assert_uint_eq(((uint8_t *)q.scales)[i], 0);
    for (uint64_t i = 0; i < sq_codec_offset_bytes(&c, 300); i++)
        ck_assert_uint_eq(((uint8_t *)q.offsets)[i], 0);
    sq_qbuf_free(&q);
    ck_assert(q.codes == NULL && q.scales == NULL && q.offsets == NULL);
    sq_qbuf_free(&q); /* twice is harmless */
    sq_qbuf zero = {NULL, NULL, NULL};
    sq_qbuf_free(&zero);
    sq_qbuf_free(NULL);
}
END_TEST

START_TEST(test_strerror)
{
    const int codes[] = {SQ_OK, SQ_ERR_ARG, SQ_ERR_SPEC, SQ_ERR_NONFINITE, SQ_ERR_RANGE,
                         SQ_ERR_NOMEM, SQ_ERR_UNSUPPORTED, SQ_ERR_DEVICE};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *s = sq_strerror(codes[i]);
        ck_assert(s && *s);
        for (size_t j = 0; j < i; j++) ck_assert_str_ne(s, sq_strerror(codes[j]));
    }
    ck_assert_ptr_nonnull(sq_strerror(-1000));
    ck_assert_ptr_nonnull(sq_strerror(12345));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("edge");
    TCase *ts = tcase_create("sizes_and_groups");
    tcase_add_test(ts, test_n_zero);
    tcase_add_test(ts, test_n_one);
    tcase_add_test(ts, test_zero_groups);
    tcase_add_test(ts, test_constant_groups);
    tcase_add_test(ts, test_constant_minmax_16bit_offset);
    tcase_add_test(ts, test_group_larger_than_n);
    suite_add_tcase(s, ts);
    TCase *tv = tcase_create("extreme_values");
    tcase_add_test(tv, test_denormal_groups);
    tcase_add_test(tv, test_lift_matches_plain);
    tcase_add_test(tv, test_near_flt_max_sym);
    tcase_add_test(tv, test_near_flt_max_minmax);
    tcase_add_test(tv, test_nonfinite);
    tcase_add_test(tv, test_range_errors);
    tcase_add_test(tv, test_sum_overflow);
    tcase_add_test(tv, test_minmax_grid_past_flt_max);
    tcase_add_test(tv, test_sym_grid_past_flt_max);
    tcase_add_test(tv, test_decode_bad_metadata);
    suite_add_tcase(s, tv);
    TCase *ta = tcase_create("arguments");
    tcase_add_test(ta, test_null_and_bad_args);
    tcase_add_test(ta, test_qbuf_alloc_free);
    tcase_add_test(ta, test_strerror);
    suite_add_tcase(s, ta);
    return sqt_run(s);
}
