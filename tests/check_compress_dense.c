/*
** check_compress_dense.c -- the per-group compressors: QSGD, the scaled
** sign and FP8 (E4M3, E5M2).
**
** Every kind is checked against a straight-line reference written here from
** docs/conventions.md (plain loops, libm's rintf, floorf, sqrtf and ldexpf,
** a packer of its own, FP8 values from the format's definition), byte for
** byte over codes and scales and bit for bit over the decoded values; for
** several sizes with a short last group, bits, scale dtypes and Hadamard
** sizes. Also: stochastic rounding is unbiased (a t-test over seeds, shown
** to catch a biased rounding), FP8's 256 codes round-trip and RTN picks
** the nearest of them (a brute-force search), saturation, FP8 denormals,
** sizes equal their closed forms, non-finite input is refused, the thread
** count changes no byte, and the specs parse, print and refuse as the
** manual says (docs/codecs.md).
*/
#include "shardq/codec.h"
#include "check_util.h"

#include <float.h>

static const sq_rng_key KEY = {0x0123456789abcdefull, 7, 3, 2};

static sq_codec codec_of(const char *spec)
{
    sq_codec c;
    char err[256] = "";
    ck_assert_msg(sq_codec_parse(spec, &c, err, sizeof err) == SQ_OK, "%s: %s", spec, err);
    return c;
}

static void *xmalloc(size_t bytes)
{
    void *p = calloc(bytes ? bytes : 1, 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* ------------------------------------------------------------------------ */
/* The reference                                                            */
/* ------------------------------------------------------------------------ */

static int is_fp8(const sq_codec *c)
{
    return c->kind == SQ_KIND_FP8E4M3 || c->kind == SQ_KIND_FP8E5M2;
}

/* The value of an FP8 code from the format's definition (NaN for NaN codes,
** +-Inf for E5M2's infinities). */
static float fp8_value(unsigned code, int e5m2)
{
    const int mb = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7, emax = e5m2 ? 31 : 15;
    const int sign = code & 0x80, e = (int)(code >> mb) & emax, m = (int)code & ((1 << mb) - 1);
    double v;
    if (!e5m2 && e == 15 && m == 7) v = NAN;
    else if (e5m2 && e == 31) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp((double)m, 1 - bias - mb);
    else v = ldexp(1.0 + ldexp((double)m, -mb), e - bias);
    return (float)(sign ? -v : v);
}

static float fp8_max(int e5m2) { return e5m2 ? 57344.0f : 448.0f; }

/* The code of v: the nearest finite value of v's sign by brute force over
** the 256 codes, ties to the even mantissa (an even code), beyond the
** largest saturated to it; SR: the neighbours lo <= |v| <= hi, up iff
** u < (|v| - lo) / (hi - lo). */
static unsigned fp8_round(float v, int e5m2, int sr, float u)
{
    const unsigned sign = signbit(v) ? 0x80u : 0u;
    const float a = fabsf(v);
    if (a >= fp8_max(e5m2)) return sign | (e5m2 ? 0x7bu : 0x7eu);
    unsigned lo = 0, hi = 0;
    float lov = -1.0f, hiv = INFINITY;
    for (unsigned c = 0; c < 0x80; c++) {
        float g = fp8_value(c, e5m2);
        if (!isfinite(g)) continue;
        if (g <= a && g > lov) lov = g, lo = c;
        if (g >= a && g < hiv) hiv = g, hi = c;
    }
    if (lov == a) return sign | lo;
    if (sr) return sign | (u < (a - lov) / (hiv - lov) ? hi : lo);
    if (a - lov != hiv - a) return sign | (a - lov < hiv - a ? lo : hi);
    return sign | ((lo & 1u) ? hi : lo);
}

/* The lane sum of docs/conventions.md: element j into partial j % 32 in
** increasing j, then the partials folded in halves. */
static float lane_sum(const float *y, uint64_t n)
{
    float s[32] = {0};
    for (uint64_t j = 0; j < n; j++) s[j % 32] += y[j];
    for (int m = 16; m >= 1; m /= 2)
        for (int l = 0; l < m; l++) s[l] += s[l + m];
    return s[0];
}

/* P: 2^(127 - e) for e the biased exponent of a (1 for 0 and denormals). */
static float norm_lift(float a)
{
    int e = 1;
    if (a >= FLT_MIN) {
        int k;
        frexpf(a, &k); /* a = f 2^k, f in [0.5, 1) */
        e = k - 1 + 127;
    }
    return ldexpf(1.0f, 127 - e);
}

/* Quantizes x[0..n) (already transformed) by the conventions into codes[i]
** (signed for qsgd, the fields otherwise) and the stored scales; u NULL
** takes sq_uniform's uniforms, else u[i]. Returns SQ_OK, NONFINITE or
** RANGE. */
static int ref_quantize(const sq_codec *c, const float *x, uint64_t n, const sq_rng_key *key,
                        const float *u, int *codes, float *scales)
{
    const int e5m2 = c->kind == SQ_KIND_FP8E5M2;
    const float qm = is_fp8(c) ? fp8_max(e5m2) : ldexpf(1.0f, c->bits - 1) - 1.0f;
    int status = SQ_OK;
    float *y = xmalloc((size_t)c->group * sizeof *y);
    for (uint64_t g0 = 0, gi = 0; g0 < n; g0 += c->group, gi++) {
        const uint64_t len = n - g0 < c->group ? n - g0 : c->group;
        const float *gx = x + g0;
        float a = 0.0f;
        for (uint64_t j = 0; j < len; j++) {
            if (!isfinite(gx[j])) {
                free(y);
                return SQ_ERR_NONFINITE;
            }
            a = fmaxf(a, fabsf(gx[j]));
        }
        float s, m = 1.0f, lift = 1.0f, lim = qm;
        if (c->kind == SQ_KIND_QSGD || c->kind == SQ_KIND_SIGN) {
            const float P = norm_lift(a);
            for (uint64_t j = 0; j < len; j++) {
                y[j] = fabsf(gx[j]) * P;
                if (c->kind == SQ_KIND_QSGD) y[j] = y[j] * y[j];
            }
            const float sum = lane_sum(y, len);
            if (c->kind == SQ_KIND_SIGN) {
                s = sqt_round_dtype(sum / (float)len / P, c->scale);
                lim = 1.0f;
            } else if (sum == 0.0f) {
                s = 1.0f;
            } else {
                const float r = sqrtf(sum);
                lift = P;
                m = qm / r;
                s = sqt_round_dtype(r / qm / P, c->scale);
            }
        } else if (a == 0.0f) {
            s = 1.0f;
        } else {
            if (a < 0x1p-64f) lift = 0x1p64f;
            m = qm / (a * lift);
            s = sqt_round_dtype(a / qm, c->scale);
        }
        if (!isfinite(s * lim)) status = SQ_ERR_RANGE;
        scales[gi] = s;
        for (uint64_t j = 0; j < len; j++) {
            const uint64_t i = g0 + j;
            const float ui = c->round == SQ_ROUND_SR ? (u ? u[i] : sq_uniform(key, i)) : 0.0f;
            if (c->kind == SQ_KIND_SIGN) {
                codes[i] = gx[j] < 0.0f;
            } else if (c->kind == SQ_KIND_QSGD) {
                float v = (fabsf(gx[j]) * lift) * m, q;
                if (c->round == SQ_ROUND_RTN) {
                    q = rintf(v);
                } else {
                    float f = floorf(v);
                    q = f + (ui < v - f ? 1.0f : 0.0f);
                }
                q = fminf(fmaxf(q, 0.0f), qm);
                codes[i] = gx[j] < 0.0f ? -(int)q : (int)q;
            } else {
                codes[i] = (int)fp8_round((gx[j] * lift) * m, e5m2, c->round == SQ_ROUND_SR, ui);
            }
        }
    }
    free(y);
    return status;
}

/* The decoded value of element i. */
static float ref_decode1(const sq_codec *c, int code, float s)
{
    if (c->kind == SQ_KIND_SIGN) return code ? -s : s;
    if (is_fp8(c)) return fp8_value((unsigned)code, c->kind == SQ_KIND_FP8E5M2) * s;
    return (float)code * s;
}

/* b-bit fields, most significant bit first, one bit at a time. */
static void ref_pack(const int *codes, uint64_t n, int bits, uint8_t *out)
{
    memset(out, 0, (size_t)((n * (uint64_t)bits + 7) / 8));
    for (uint64_t i = 0; i < n; i++)
        for (int b = bits - 1; b >= 0; b--) {
            uint64_t bit = i * (uint64_t)bits + (uint64_t)(bits - 1 - b);
            if (((unsigned)codes[i] >> b) & 1u) out[bit / 8] |= (uint8_t)(0x80u >> (bit % 8));
        }
}

static void store_scales(const sq_codec *c, const float *s, uint64_t groups, uint8_t *out)
{
    for (uint64_t g = 0; g < groups; g++) {
        if (c->scale == SQ_SCALE_FP32) {
            memcpy(out + 4 * g, &s[g], 4);
        } else {
            uint16_t h = c->scale == SQ_SCALE_BF16 ? sq_f32_to_bf16(s[g]) : sq_f32_to_f16(s[g]);
            memcpy(out + 2 * g, &h, 2);
        }
    }
}

/* One case: the codec's bytes and decoded values against the reference. */
static void check_case(const char *spec, uint64_t n, uint64_t seed)
{
    const sq_codec c = codec_of(spec);
    float *x = xmalloc(n * 4), *t = xmalloc(n * 4), *scales = xmalloc(n * 4 + 4);
    float *want = xmalloc(n * 4), *got = xmalloc(n * 4);
    int *codes = xmalloc(n * sizeof *codes);
    sqt_fill(x, n, seed);
    if (n > 40) x[n / 3] = 0.0f, x[n / 3 + 1] = -0.0f;
    memcpy(t, x, n * 4);
    if (c.hadamard) ck_assert_int_eq(sq_hadamard(t, n, c.hadamard), SQ_OK);
    ck_assert_int_eq(ref_quantize(&c, t, n, &KEY, NULL, codes, scales), SQ_OK);
    const uint64_t groups = sq_codec_groups(&c, n);
    uint8_t *wcodes = xmalloc(sq_codec_code_bytes(&c, n)), *wscales = xmalloc(groups * 4);
    ref_pack(codes, n, c.bits, wcodes);
    store_scales(&c, scales, groups, wscales);
    sq_qbuf q;
    ck_assert_int_eq(sq_qbuf_alloc(&c, n, &q), SQ_OK);
    ck_assert_int_eq(sq_quantize(&c, x, n, &KEY, &q), SQ_OK);
    char what[256];
    snprintf(what, sizeof what, "%s n=%llu: codes", spec, (unsigned long long)n);
    SQT_ASSERT_BYTES(q.codes, wcodes, sq_codec_code_bytes(&c, n), what);
    snprintf(what, sizeof what, "%s n=%llu: scales", spec, (unsigned long long)n);
    SQT_ASSERT_BYTES(q.scales, wscales, sq_codec_scale_bytes(&c, n), what);
    for (uint64_t i = 0; i < n; i++) want[i] = ref_decode1(&c, codes[i], scales[i / c.group]);
    if (c.hadamard) ck_assert_int_eq(sq_hadamard_inverse(want, n, c.hadamard), SQ_OK);
    ck_assert_int_eq(sq_dequantize(&c, &q, n, got), SQ_OK);
    snprintf(what, sizeof what, "%s n=%llu: decoded", spec, (unsigned long long)n);
    SQT_ASSERT_FLOATS_BITS(got, want, n, what);
    sq_qbuf_free(&q);
    free(x), free(t), free(scales), free(want), free(got), free(codes), free(wcodes), free(wscales);
}

START_TEST(test_reference)
{
    const char *kinds[] = {"kind=qsgd,bits=2", "kind=qsgd,bits=3", "kind=qsgd,bits=4",
                           "kind=qsgd,bits=7", "kind=qsgd,bits=8", "kind=sign",
                           "kind=fp8e4m3",     "kind=fp8e5m2"};
    const uint64_t groups[] = {1, 5, 32, 64, 100, 128, 1000};
    const uint64_t sizes[] = {1, 7, 100, 257, 1000, 4099};
    int i = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (int sc = 0; sc < 3; sc++)
            for (int sr = 0; sr < 2; sr++)
                for (int h = 0; h < 2; h++) {
                    if (strstr(kinds[k], "sign") && sr) continue;
                    char spec[160];
                    snprintf(spec, sizeof spec, "%s,group=%llu,round=%s,scale=%s,hadamard=%d",
                             kinds[k], (unsigned long long)groups[i % 7], sr ? "sr" : "rtn",
                             sc == 0 ? "fp32" : sc == 1 ? "bf16" : "fp16", h ? 32 : 0);
                    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
                        check_case(spec, sizes[s], 10u * (unsigned)i + s);
                    i++;
                }
}
END_TEST

/* Groups of tiny, huge and denormal values: the lift P and FP8's 2^64 lift
** keep the reference's bytes; all-zero groups: QSGD and FP8 scale 1 and
** codes 0, the sign scale 0; all decode to zeros. */
START_TEST(test_extremes)
{
    const uint64_t n = 64;
    float *x = xmalloc(n * 4), *out = xmalloc(n * 4), *scales = xmalloc(n * 4);
    int *codes = xmalloc(n * sizeof *codes);
    const float mags[] = {1e-45f, 1e-40f, 1e-30f, 1e-20f, 1.0f, 1e20f, 1e30f, 3e38f};
    const char *specs[] = {"kind=qsgd,bits=4,group=16,round=sr", "kind=qsgd,bits=8,group=16,round=rtn",
                           "kind=sign,group=16", "kind=fp8e4m3,group=16,round=sr",
                           "kind=fp8e5m2,group=16,round=rtn"};
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++)
        for (size_t m = 0; m < sizeof mags / sizeof mags[0]; m++) {
            const sq_codec c = codec_of(specs[s]);
            sqt_rng r = {m * 31 + s};
            for (uint64_t i = 0; i < n; i++) x[i] = mags[m] * sqt_sym(&r);
            for (uint64_t i = 0; i < 16; i++) x[i] = 0.0f; /* an all-zero group */
            sq_qbuf q;
            ck_assert_int_eq(sq_qbuf_alloc(&c, n, &q), SQ_OK);
            int rw = ref_quantize(&c, x, n, &KEY, NULL, codes, scales);
            int rg = sq_quantize(&c, x, n, &KEY, &q);
            ck_assert_msg(rw == rg, "%s at %g: status %d, the reference %d", specs[s],
                          (double)mags[m], rg, rw);
            if (rw != SQ_OK) {
                sq_qbuf_free(&q);
                continue;
            }
            uint8_t w[64];
            ref_pack(codes, n, c.bits, w);
            SQT_ASSERT_BYTES(q.codes, w, sq_codec_code_bytes(&c, n), specs[s]);
            SQT_ASSERT_BYTES(q.scales, scales, 4 * 4, specs[s]);
            ck_assert_float_eq(scales[0], c.kind == SQ_KIND_SIGN ? 0.0f : 1.0f);
            ck_assert_int_eq(sq_dequantize(&c, &q, n, out), SQ_OK);
            for (uint64_t i = 0; i < 16; i++) ck_assert_float_eq(out[i], 0.0f);
            sq_qbuf_free(&q);
        }
    free(x), free(out), free(scales), free(codes);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Stochastic rounding is unbiased                                          */
/* ------------------------------------------------------------------------ */

#define SR_N 256
#define SR_SEEDS 1000
#define SR_T 5.0

/* Per element, over the seeds: the sum and the sum of squares of the
** decoded value. decode(i, seed, out) fills out[0..SR_N). */
typedef void (*sr_decoder)(const sq_codec *c, const float *x, uint64_t seed, float *out);

static void sr_library(const sq_codec *c, const float *x, uint64_t seed, float *out)
{
    sq_rng_key key = {seed, 1, 0, 0};
    sq_qbuf q;
    ck_assert_int_eq(sq_qbuf_alloc(c, SR_N, &q), SQ_OK);
    ck_assert_int_eq(sq_quantize(c, x, SR_N, &key, &q), SQ_OK);
    ck_assert_int_eq(sq_dequantize(c, &q, SR_N, out), SQ_OK);
    sq_qbuf_free(&q);
}

/* The reference with its uniforms halved: up with probability min(1, 2r)
** instead of r -- a biased rounding. */
static void sr_biased(const sq_codec *c, const float *x, uint64_t seed, float *out)
{
    sq_rng_key key = {seed, 1, 0, 0};
    float u[SR_N], scales[SR_N];
    int codes[SR_N];
    for (int i = 0; i < SR_N; i++) u[i] = 0.5f * sq_uniform(&key, (uint64_t)i);
    ck_assert_int_eq(ref_quantize(c, x, SR_N, &key, u, codes, scales), SQ_OK);
    for (int i = 0; i < SR_N; i++) out[i] = ref_decode1(c, codes[i], scales[i / c->group]);
}

/* The step of element i's rounding, in decoded units: the group's scale
** for QSGD; for FP8 the grid spacing around |x_i| / scale (at most 2^-mb
** of it, or the denormal spacing) times the scale. */
static void sr_steps(const sq_codec *c, const float *x, double *step)
{
    sq_qbuf q;
    ck_assert_int_eq(sq_qbuf_alloc(c, SR_N, &q), SQ_OK);
    ck_assert_int_eq(sq_quantize(c, x, SR_N, &KEY, &q), SQ_OK);
    const int e5m2 = c->kind == SQ_KIND_FP8E5M2, mb = e5m2 ? 2 : 3;
    for (int i = 0; i < SR_N; i++) {
        double s = ((const float *)q.scales)[i / c->group];
        step[i] = is_fp8(c) ? ldexp(fabs(x[i]), -mb) + ldexp(s, (e5m2 ? -14 : -6) - mb) : s;
    }
    sq_qbuf_free(&q);
}

/* Element i passes when |mean_i - x_i| <= SR_T * se_i + 2^-17 step_i +
** 2^-20 |x_i|. se_i is the standard error of the mean, sd_i / sqrt(seeds)
** with sd_i the sample standard deviation, but at least step_i / seeds, the
** resolution of the seeds (a fraction v - floor(v) of 10^-5 rounds up once
** in 10^5 draws: over 1000 seeds it is seen as sd = 0 and an error of
** 10^-5 steps). 2^-17 of a step is the resolution of the 16-bit uniforms
** (docs/conventions.md, Rounding: a smaller fraction never rounds up), 2^-20 |x_i| the
** fp32 rounding of the multiplier and the scale -- biases of the
** arithmetic, not of the rounding. So RTN, which has sd = 0, fails wherever
** it is off by more than 0.5% of a step. Returns the failing elements. */
static int sr_t_test(const sq_codec *c, const float *x, sr_decoder dec, double *worst)
{
    double sum[SR_N] = {0}, sum2[SR_N] = {0}, step[SR_N];
    float out[SR_N];
    sr_steps(c, x, step);
    for (uint64_t s = 0; s < SR_SEEDS; s++) {
        dec(c, x, 1000 + s, out);
        for (int i = 0; i < SR_N; i++) sum[i] += out[i], sum2[i] += (double)out[i] * out[i];
    }
    int fails = 0;
    *worst = 0.0;
    for (int i = 0; i < SR_N; i++) {
        double mean = sum[i] / SR_SEEDS;
        double var = (sum2[i] - SR_SEEDS * mean * mean) / (SR_SEEDS - 1);
        double se = sqrt(var > 0 ? var : 0) / sqrt((double)SR_SEEDS);
        se = fmax(se, step[i] / SR_SEEDS);
        double err = fabs(mean - x[i]) - ldexp(step[i], -17) - ldexp(fabs(x[i]), -20);
        if (err > SR_T * se) fails++;
        if (se > 0 && err / se > *worst) *worst = err / se;
    }
    return fails;
}

START_TEST(test_sr_unbiased)
{
    float x[SR_N];
    sqt_rng r = {77};
    for (int i = 0; i < SR_N; i++) x[i] = sqt_bell(&r, 1.0f + (float)(i / 64));
    x[5] = 0.0f;
    const char *specs[] = {"kind=qsgd,bits=2,group=64,round=sr", "kind=qsgd,bits=4,group=64,round=sr",
                           "kind=qsgd,bits=8,group=32,round=sr", "kind=fp8e4m3,group=64,round=sr",
                           "kind=fp8e5m2,group=64,round=sr",
                           "kind=qsgd,bits=4,group=64,round=sr,hadamard=16"};
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        const sq_codec c = codec_of(specs[s]);
        double worst;
        int fails = sr_t_test(&c, x, sr_library, &worst);
        ck_assert_msg(fails == 0, "%s: %d of %d elements biased (worst t %.2f)", specs[s], fails,
                      SR_N, worst);
        if (c.hadamard) continue; /* the biased variants work without a transform */
        /* the test can fail: a biased rounding and RTN are caught */
        int biased = sr_t_test(&c, x, sr_biased, &worst);
        ck_assert_msg(biased > SR_N / 4, "%s: a biased rounding fails only %d elements", specs[s],
                      biased);
        sq_codec rtn = c;
        rtn.round = SQ_ROUND_RTN;
        int det = sr_t_test(&rtn, x, sr_library, &worst);
        ck_assert_msg(det > SR_N / 4, "%s: RTN fails only %d elements", specs[s], det);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* FP8                                                                      */
/* ------------------------------------------------------------------------ */

/* A group {FMAX, v}: m = FMAX / FMAX = 1 and scale 1, so v's code is v
** rounded to FP8 itself and decodes to its FP8 value. */
static unsigned fp8_code_of(const sq_codec *c, float v, const sq_rng_key *key, float *back)
{
    float x[2] = {fp8_max(c->kind == SQ_KIND_FP8E5M2), v}, out[2];
    sq_qbuf q;
    ck_assert_int_eq(sq_qbuf_alloc(c, 2, &q), SQ_OK);
    ck_assert_int_eq(sq_quantize(c, x, 2, key, &q), SQ_OK);
    ck_assert_float_eq(*(float *)q.scales, 1.0f);
    ck_assert_int_eq(q.codes[0], c->kind == SQ_KIND_FP8E5M2 ? 0x7b : 0x7e);
    unsigned code = q.codes[1];
    ck_assert_int_eq(sq_dequantize(c, &q, 2, out), SQ_OK);
    if (back) *back = out[1];
    sq_qbuf_free(&q);
    return code;
}

/* Every finite code round-trips (RTN and SR), and decodes to its value. */
START_TEST(test_fp8_codes)
{
    for (int e5m2 = 0; e5m2 < 2; e5m2++)
        for (int sr = 0; sr < 2; sr++) {
            char spec[64];
            snprintf(spec, sizeof spec, "kind=%s,group=2,round=%s", e5m2 ? "fp8e5m2" : "fp8e4m3",
                     sr ? "sr" : "rtn");
            const sq_codec c = codec_of(spec);
            int finite = 0;
            for (unsigned code = 0; code < 256; code++) {
                float v = fp8_value(code, e5m2), back;
                if (!isfinite(v)) continue;
                finite++;
                sq_rng_key key = {code, 0, 0, 0};
                unsigned got = fp8_code_of(&c, v, &key, &back);
                ck_assert_msg(got == code, "%s: %a (code 0x%02x) gives 0x%02x", spec, (double)v,
                              code, got);
                ck_assert_msg(sqt_bits(back) == sqt_bits(v), "%s: code 0x%02x decodes to %a, not %a",
                              spec, code, (double)back, (double)v);
            }
            ck_assert_int_eq(finite, e5m2 ? 248 : 254); /* 0x7f, 0xff; 4 NaN + Inf each sign */
        }
}
END_TEST

/* RTN picks the nearest code (ties to the even mantissa) by a brute-force
** search over all 256, for values in every binade, the denormals, midpoints
** and their neighbours; SR picks one of the two neighbours. */
START_TEST(test_fp8_nearest)
{
    for (int e5m2 = 0; e5m2 < 2; e5m2++) {
        const sq_codec rtn = codec_of(e5m2 ? "kind=fp8e5m2,group=2,round=rtn"
                                           : "kind=fp8e4m3,group=2,round=rtn");
        const sq_codec sr = codec_of(e5m2 ? "kind=fp8e5m2,group=2,round=sr"
                                          : "kind=fp8e4m3,group=2,round=sr");
        sqt_rng r = {5u + (unsigned)e5m2};
        int ties = 0;
        for (int i = 0; i < 6000; i++) {
            float v;
            if (i < 2 * 127) { /* midpoints of neighbouring codes, and a hair off */
                float a = fp8_value((unsigned)(i / 2), e5m2), b = fp8_value((unsigned)(i / 2 + 1), e5m2);
                if (!isfinite(b) || b > fp8_max(e5m2)) continue;
                v = (a + b) / 2;
                if (i % 2) v = nextafterf(v, (i / 2) % 3 ? a : b);
                else ties++;
            } else {
                int e = (int)(sqt_next(&r) % (e5m2 ? 35 : 21)) - (e5m2 ? 19 : 12);
                v = ldexpf(sqt_unit(&r) + 0.5f, e);
                v = fminf(v, fp8_max(e5m2));
            }
            if (i % 3 == 2) v = -v;
            sq_rng_key key = {(uint64_t)i, 0, 0, 0};
            unsigned want = fp8_round(v, e5m2, 0, 0.0f), got = fp8_code_of(&rtn, v, &key, NULL);
            ck_assert_msg(got == want, "fp8%s RTN of %a: 0x%02x, the nearest is 0x%02x",
                          e5m2 ? "e5m2" : "e4m3", (double)v, got, want);
            unsigned gs = fp8_code_of(&sr, v, &key, NULL);
            float u = sq_uniform(&key, 1);
            ck_assert_msg(gs == fp8_round(v, e5m2, 1, u), "fp8%s SR of %a: 0x%02x",
                          e5m2 ? "e5m2" : "e4m3", (double)v, gs);
        }
        ck_assert_int_ge(ties, 100);
    }
}
END_TEST

/* Saturation: the group's absmax always takes the largest finite code (its
** multiplier may round it a hair above FMAX), never a NaN or an Inf; and
** denormal FP8 values are produced exactly. */
START_TEST(test_fp8_saturation)
{
    sqt_rng r = {99};
    for (int e5m2 = 0; e5m2 < 2; e5m2++)
        for (int sr = 0; sr < 2; sr++) {
            char spec[64];
            snprintf(spec, sizeof spec, "kind=%s,group=4,round=%s", e5m2 ? "fp8e5m2" : "fp8e4m3",
                     sr ? "sr" : "rtn");
            const sq_codec c = codec_of(spec);
            const unsigned top = e5m2 ? 0x7b : 0x7e;
            sq_qbuf q;
            ck_assert_int_eq(sq_qbuf_alloc(&c, 4, &q), SQ_OK);
            for (int i = 0; i < 20000; i++) {
                float a = ldexpf(1.0f + sqt_unit(&r), (int)(sqt_next(&r) % 200) - 100);
                float x[4] = {a * 0.5f, -a, a * sqt_sym(&r), a * 1e-3f};
                sq_rng_key key = {(uint64_t)i, 0, 0, 0};
                ck_assert_int_eq(sq_quantize(&c, x, 4, &key, &q), SQ_OK);
                ck_assert_msg(q.codes[1] == (0x80u | top), "%s: -%a gives 0x%02x", spec, (double)a,
                              q.codes[1]);
                for (int j = 0; j < 4; j++)
                    ck_assert_msg((q.codes[j] & 0x7fu) <= top, "%s: code 0x%02x", spec, q.codes[j]);
            }
            sq_qbuf_free(&q);
        }
    /* the denormals: every one, with scale 1 */
    for (int e5m2 = 0; e5m2 < 2; e5m2++) {
        const sq_codec c = codec_of(e5m2 ? "kind=fp8e5m2,group=2,round=rtn"
                                         : "kind=fp8e4m3,group=2,round=rtn");
        for (unsigned m = 1; m < (e5m2 ? 4u : 8u); m++) {
            float v = ldexpf((float)m, e5m2 ? -16 : -9), back;
            ck_assert_int_eq(fp8_code_of(&c, v, &KEY, &back), m);
            ck_assert_float_eq(back, v);
            /* below half the smallest: +-0, sign kept */
            ck_assert_int_eq(fp8_code_of(&c, -ldexpf(1.0f, e5m2 ? -18 : -11), &KEY, &back), 0x80);
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Sizes, errors, threads, specs                                            */
/* ------------------------------------------------------------------------ */

START_TEST(test_sizes)
{
    const char *specs[] = {"kind=qsgd,bits=3,group=100", "kind=qsgd,bits=8,group=7,scale=bf16",
                           "kind=sign,group=128", "kind=sign,group=1,scale=fp16",
                           "kind=fp8e4m3,group=32", "kind=fp8e5m2,group=1000,scale=bf16"};
    const uint64_t ns[] = {0, 1, 7, 8, 9, 1000, 4099, ((uint64_t)1 << 40) + 3};
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        const sq_codec c = codec_of(specs[s]);
        const uint64_t b = (uint64_t)c.bits, su = c.scale == SQ_SCALE_FP32 ? 4 : 2;
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            const uint64_t n = ns[k], groups = (n + c.group - 1) / c.group;
            ck_assert_uint_eq(sq_codec_groups(&c, n), groups);
            ck_assert_uint_eq(sq_codec_code_bytes(&c, n), (n * b + 7) / 8);
            ck_assert_uint_eq(sq_codec_scale_bytes(&c, n), groups * su);
            ck_assert_uint_eq(sq_codec_offset_bytes(&c, n), 0);
            ck_assert_uint_eq(sq_codec_bytes(&c, n), (n * b + 7) / 8 + groups * su);
        }
        /* a prefix of whole groups and bytes ends where its arrays end */
        const uint64_t e = c.group * 8 * 3;
        ck_assert_uint_eq(sq_codec_code_bytes(&c, e), e / 8 * b);
        ck_assert_uint_eq(sq_codec_scale_bytes(&c, e), e / c.group * su);
    }
    /* bits per element of the usual configurations */
    ck_assert_double_eq_tol(sq_codec_bits_per_element(&(sq_codec){.kind = SQ_KIND_SIGN, .bits = 1,
                                .group = 128, .round = SQ_ROUND_RTN}, 1024), 1.25, 1e-12);
    sq_codec f = codec_of("kind=fp8e4m3,group=128");
    ck_assert_double_eq_tol(sq_codec_bits_per_element(&f, 1024), 8.25, 1e-12);
}
END_TEST

START_TEST(test_nonfinite)
{
    const char *specs[] = {"kind=qsgd,group=64", "kind=qsgd,group=64,hadamard=32",
                           "kind=sign,group=64", "kind=fp8e4m3,group=64",
                           "kind=fp8e5m2,group=64,round=rtn"};
    const float bad[] = {NAN, INFINITY, -INFINITY};
    const uint64_t n = 1000;
    float *x = xmalloc(n * 4), *ref = xmalloc(n * 4);
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        const sq_codec c = codec_of(specs[s]);
        sq_qbuf q;
        ck_assert_int_eq(sq_qbuf_alloc(&c, n, &q), SQ_OK);
        for (size_t b = 0; b < 3; b++)
            for (uint64_t at = 0; at < n; at += 333) {
                sqt_fill(x, n, at);
                memcpy(ref, x, n * 4);
                x[at] = bad[b];
                ck_assert_int_eq(sq_quantize(&c, x, n, &KEY, &q), SQ_ERR_NONFINITE);
                ck_assert_int_eq(sq_quantize_diff(&c, x, ref, n, &KEY, &q), SQ_ERR_NONFINITE);
                ck_assert_int_eq(sq_quantize_bf16(&c, x, n, &KEY, &q), SQ_ERR_NONFINITE);
            }
        /* zero length: nothing to do, nothing touched */
        sq_qbuf none = {NULL, NULL, NULL};
        ck_assert_int_eq(sq_quantize(&c, NULL, 0, &KEY, &none), SQ_OK);
        ck_assert_int_eq(sq_dequantize(&c, &none, 0, NULL), SQ_OK);
        sq_qbuf_free(&q);
    }
    free(x), free(ref);
}
END_TEST

START_TEST(test_threads)
{
    const uint64_t n = 300007;
    const char *specs[] = {"kind=qsgd,bits=4,group=128,round=sr,hadamard=32",
                           "kind=sign,group=1000", "kind=fp8e4m3,group=64,round=sr,scale=bf16",
                           "kind=fp8e5m2,group=7,round=rtn"};
    float *x = xmalloc(n * 4), *a = xmalloc(n * 4), *b = xmalloc(n * 4);
    sqt_fill(x, n, 3);
    const int saved = sq_get_threads();
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        const sq_codec c = codec_of(specs[s]);
        sq_qbuf q1, q3;
        ck_assert_int_eq(sq_qbuf_alloc(&c, n, &q1), SQ_OK);
        ck_assert_int_eq(sq_qbuf_alloc(&c, n, &q3), SQ_OK);
        sq_set_threads(1);
        ck_assert_int_eq(sq_quantize(&c, x, n, &KEY, &q1), SQ_OK);
        ck_assert_int_eq(sq_dequantize(&c, &q1, n, a), SQ_OK);
        sq_set_threads(3);
        ck_assert_int_eq(sq_quantize(&c, x, n, &KEY, &q3), SQ_OK);
        ck_assert_int_eq(sq_dequantize(&c, &q3, n, b), SQ_OK);
        SQT_ASSERT_BYTES(q3.codes, q1.codes, sq_codec_code_bytes(&c, n), specs[s]);
        SQT_ASSERT_BYTES(q3.scales, q1.scales, sq_codec_scale_bytes(&c, n), specs[s]);
        SQT_ASSERT_FLOATS_BITS(b, a, n, specs[s]);
        sq_qbuf_free(&q1);
        sq_qbuf_free(&q3);
    }
    sq_set_threads(saved);
    free(x), free(a), free(b);
}
END_TEST

/* The sums decode each chunk and add in chunk order; with a requantization
** the sum is quantized as sq_quantize would quantize it. */
START_TEST(test_sums)
{
    const uint64_t n = 5003;
    const int k = 3;
    const sq_codec c = codec_of("kind=qsgd,bits=5,group=100,round=sr,hadamard=64");
    const sq_codec co = codec_of("kind=fp8e5m2,group=64,round=sr");
    sq_qbuf chunks[3], out, direct;
    float *x = xmalloc(n * 4), *sum = xmalloc(n * 4), *d = xmalloc(n * 4), *got = xmalloc(n * 4);
    for (int i = 0; i < k; i++) {
        sqt_fill(x, n, 40u + (unsigned)i);
        ck_assert_int_eq(sq_qbuf_alloc(&c, n, &chunks[i]), SQ_OK);
        sq_rng_key key = {1, 2, (uint32_t)i, 1};
        ck_assert_int_eq(sq_quantize(&c, x, n, &key, &chunks[i]), SQ_OK);
    }
    /* in the transformed domain: decode without the inverse */
    sq_codec plain = c;
    plain.hadamard = 0;
    for (int i = 0; i < k; i++) {
        ck_assert_int_eq(sq_dequantize(&plain, &chunks[i], n, d), SQ_OK);
        for (uint64_t j = 0; j < n; j++) sum[j] = i ? sum[j] + d[j] : d[j];
    }
    ck_assert_int_eq(sq_qbuf_alloc(&co, n, &out), SQ_OK);
    ck_assert_int_eq(sq_qbuf_alloc(&co, n, &direct), SQ_OK);
    ck_assert_int_eq(sq_dequant_sum_requant(&c, chunks, k, n, &co, &KEY, &out), SQ_OK);
    ck_assert_int_eq(sq_quantize(&co, sum, n, &KEY, &direct), SQ_OK);
    SQT_ASSERT_BYTES(out.codes, direct.codes, n, "sum requant: codes");
    SQT_ASSERT_BYTES(out.scales, direct.scales, sq_codec_scale_bytes(&co, n), "sum requant: scales");
    ck_assert_int_eq(sq_dequant_sum(&c, chunks, k, n, got), SQ_OK);
    ck_assert_int_eq(sq_hadamard_inverse(sum, n, c.hadamard), SQ_OK);
    SQT_ASSERT_FLOATS_BITS(got, sum, n, "sum");
    for (int i = 0; i < k; i++) sq_qbuf_free(&chunks[i]);
    sq_qbuf_free(&out);
    sq_qbuf_free(&direct);
    free(x), free(sum), free(d), free(got);
}
END_TEST

START_TEST(test_specs)
{
    static const struct {
        const char *in, *canonical;
    } ok[] = {
        {"kind=qsgd", "kind=qsgd,bits=4,group=128,round=sr,hadamard=0,levels=sdp4bit,scale=fp32"},
        {"kind=qsgd,bits=2,round=rtn", "kind=qsgd,bits=2,group=128,round=rtn,hadamard=0,levels=sdp4bit,scale=fp32"},
        /* the sign's bits and round, and FP8's bits, default to the only values they take */
        {"kind=sign", "kind=sign,bits=1,group=128,round=rtn,hadamard=0,levels=sdp4bit,scale=fp32"},
        {"kind=sign,bits=1,round=rtn,group=64,scale=bf16",
         "kind=sign,bits=1,group=64,round=rtn,hadamard=0,levels=sdp4bit,scale=bf16"},
        {"kind=fp8e4m3", "kind=fp8e4m3,bits=8,group=128,round=sr,hadamard=0,levels=sdp4bit,scale=fp32"},
        {"round=rtn,kind=fp8e5m2,hadamard=32",
         "kind=fp8e5m2,bits=8,group=128,round=rtn,hadamard=32,levels=sdp4bit,scale=fp32"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        sq_codec c = codec_of(ok[i].in), back;
        char buf[SQ_CODEC_STRLEN];
        sq_codec_format(&c, buf, sizeof buf);
        ck_assert_str_eq(buf, ok[i].canonical);
        ck_assert_int_eq(sq_codec_parse(buf, &back, NULL, 0), SQ_OK);
        /* field by field: the struct's padding is no part of a codec */
        ck_assert(back.kind == c.kind && back.bits == c.bits && back.group == c.group &&
                  back.round == c.round && back.hadamard == c.hadamard &&
                  back.levels == c.levels && back.scale == c.scale && back.keep == c.keep &&
                  back.plugin == c.plugin);
    }
    static const struct {
        const char *in, *names;
    } bad[] = {
        {"kind=qsgd,bits=1", "bits=1"},
        {"kind=sign,bits=4", "bits=4"},
        {"kind=sign,round=sr", "round=sr"},
        {"kind=fp8e4m3,bits=4", "bits=4"},
        {"kind=fp8e5m2,bits=7", "bits=7"},
        {"kind=qsgd,levels=deepspeed", "levels"},
        {"kind=fp8", "fp8e4m3"},          /* an unknown kind lists the kinds */
        {"kind=qsgd,kind=sign", "kind"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sq_codec c;
        char err[256] = "";
        ck_assert_int_eq(sq_codec_parse(bad[i].in, &c, err, sizeof err), SQ_ERR_SPEC);
        ck_assert_msg(strstr(err, bad[i].names), "%s: '%s' does not name %s", bad[i].in, err,
                      bad[i].names);
    }
    /* validate on structs filled by hand */
    sq_codec c = sq_codec_default();
    c.kind = SQ_KIND_SIGN;
    ck_assert_int_eq(sq_codec_validate(&c), SQ_ERR_SPEC); /* bits=4, round=sr */
    c.bits = 1;
    c.round = SQ_ROUND_RTN;
    ck_assert_int_eq(sq_codec_validate(&c), SQ_OK);
    c.kind = SQ_KIND_FP8E4M3;
    ck_assert_int_eq(sq_codec_validate(&c), SQ_ERR_SPEC);
    c.bits = 8;
    ck_assert_int_eq(sq_codec_validate(&c), SQ_OK);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("compress_dense");
    TCase *t = tcase_create("reference");
    tcase_add_test(t, test_reference);
    tcase_add_test(t, test_extremes);
    tcase_add_test(t, test_sums);
    suite_add_tcase(s, t);
    TCase *u = tcase_create("unbiased");
    tcase_add_test(u, test_sr_unbiased);
    suite_add_tcase(s, u);
    TCase *f = tcase_create("fp8");
    tcase_add_test(f, test_fp8_codes);
    tcase_add_test(f, test_fp8_nearest);
    tcase_add_test(f, test_fp8_saturation);
    suite_add_tcase(s, f);
    TCase *o = tcase_create("other");
    tcase_add_test(o, test_sizes);
    tcase_add_test(o, test_nonfinite);
    tcase_add_test(o, test_threads);
    tcase_add_test(o, test_specs);
    suite_add_tcase(s, o);
    return sqt_run(s);
}
