/*
** check_codec.c -- the fused codec operations: quantize / dequantize and
** their error bounds, stochastic rounding's unbiasedness, quantize_diff /
** dequantize_add, the chunk sums, Hadamard inside the codecs, and thread
** count independence.
**
** Exact expectations come from the straight-line reference in check_util.h
** (the conventions written as plain loops); the error bounds are derived
** from the conventions independently of any implementation.
*/
#include "shardq/codec.h"
#include "check_util.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_statistics_double.h>

static const sq_rng_key KEY = {0x0123456789abcdefull, 7, 3, 2};

static sq_codec make_codec(sq_kind kind, int bits, uint64_t group, sq_round rnd, int had,
                           sq_levels lv, sq_scale_dtype sc)
{
    sq_codec c = {kind, bits, group, rnd, had, lv, sc, 0, 0};
    ck_assert_int_eq(sq_codec_validate(&c), SQ_OK);
    return c;
}

static void qalloc(const sq_codec *c, uint64_t n, sq_qbuf *q)
{
    ck_assert_int_eq(sq_qbuf_alloc(c, n, q), SQ_OK);
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* Two quantized buffers byte-equal (codes, scales and, for min-max,
** offsets). */
static void assert_qbuf_equal(const sq_codec *c, const sq_qbuf *got, const sq_qbuf *want,
                              uint64_t n, const char *what)
{
    char msg[128];
    snprintf(msg, sizeof msg, "%s: codes", what);
    SQT_ASSERT_BYTES(got->codes, want->codes, sq_codec_code_bytes(c, n), msg);
    snprintf(msg, sizeof msg, "%s: scales", what);
    SQT_ASSERT_BYTES(got->scales, want->scales, sq_codec_scale_bytes(c, n), msg);
    if (c->kind == SQ_KIND_MINMAX) {
        snprintf(msg, sizeof msg, "%s: offsets", what);
        SQT_ASSERT_BYTES(got->offsets, want->offsets, sq_codec_offset_bytes(c, n), msg);
    }
}

/* ------------------------------------------------------------------------ */
/* The error bound                                                          */
/* ------------------------------------------------------------------------ */
/*
** Per element, with s the stored scale of the element's group, qm the
** multiplier numerator (qmax, 2^(b-1) or 2^b - 1), u = 2^-24:
**
**   |x - x'| <= w s + 2^-20 (qm s + |x|) + e16 + 2^-140
**
** w = 1/2 for RTN (|v - q| <= 1/2), 1 for SR (|v - q| < 1), and 1 for RTN
** codes clamped at the top of deepspeed levels (x up to 2^(b-1) s, code
** 2^(b-1) - 1). The 2^-20 term (16 u) covers the fp32 roundings: m = qm/a,
** v = x m and (min-max) x - lo contribute at most 3 u |v| to v, the scale
** a/qm and the decode q s (+ lo) at most 3 u (qm s + |x'|), and |v| <= qm.
** e16 covers a 16-bit scale dtype: the codes use the fp32 multiplier but the
** decode the rounded scale (and offset), off by at most 2^-9 (bf16) or
** 2^-11 (fp16) relatively, so e16 = 2^-8 (qm s + |lo|) for bf16 and
** 2^-10 (qm s + |lo|) + (qm + 1) 2^-24 for fp16 (the last term: fp16
** subnormal scales have an absolute error up to 2^-25). 2^-140 absorbs fp32
** subnormal results.
*/
static double err_bound(const sq_codec *c, float x, float s, float lo, int code)
{
    const sqt_levels lv = sqt_levels_of(c);
    double w = c->round == SQ_ROUND_SR ? 1.0 : 0.5;
    if (c->kind == SQ_KIND_SYM && c->levels == SQ_LEVELS_DEEPSPEED && code == (int)lv.qhi) w = 1.0;
    double qs = (double)lv.qm * s;
    double b = w * s + 0x1p-20 * (qs + fabs((double)x)) + 0x1p-140;
    if (c->scale == SQ_SCALE_BF16) b += 0x1p-8 * (qs + fabs((double)lo));
    if (c->scale == SQ_SCALE_FP16) b += 0x1p-10 * (qs + fabs((double)lo)) + (lv.qm + 1) * 0x1p-24;
    return b;
}

/* Quantizes x with c and checks everything the conventions fix: codes,
** scales and offsets equal the reference's, codes lie in range, the
** library's dequantize equals decoding by hand, and every element is within
** err_bound. c must have hadamard = 0. */
static void verify_case(const sq_codec *c, const float *x, uint64_t n, const sq_rng_key *key,
                        const char *label)
{
    const sqt_levels lv = sqt_levels_of(c);
    uint64_t groups = sq_codec_groups(c, n);
    sq_qbuf q;
    qalloc(c, n, &q);
    int rc = sq_quantize(c, x, n, key, &q);
    ck_assert_msg(rc == SQ_OK, "%s: quantize returned %d", label, rc);

    int *want = xmalloc(n * sizeof(int)), *got = xmalloc(n * sizeof(int));
    float *ws = xmalloc(groups * sizeof(float)), *wo = xmalloc(groups * sizeof(float));
    float *dec = xmalloc(n * sizeof(float)), *out = xmalloc(n * sizeof(float));
    ck_assert_int_eq(sqt_ref_quantize(c, x, n, key, want, ws, wo), SQ_OK);
    sqt_decode(c, &q, n, dec, got);

    for (uint64_t g = 0; g < groups; g++) {
        float s = sqt_meta(q.scales, g, c->scale);
        SQT_CHECK(sqt_bits(s) == sqt_bits(ws[g]), "%s: group %llu scale %a, want %a", label,
                  (unsigned long long)g, (double)s, (double)ws[g]);
        if (c->kind == SQ_KIND_MINMAX) {
            float o = sqt_meta(q.offsets, g, c->scale);
            SQT_CHECK(sqt_bits(o) == sqt_bits(wo[g]), "%s: group %llu offset %a, want %a", label,
                      (unsigned long long)g, (double)o, (double)wo[g]);
        }
    }
    for (uint64_t i = 0; i < n; i++) {
        SQT_CHECK(got[i] >= (int)lv.qlo && got[i] <= (int)lv.qhi, "%s: code %d at %llu out of range",
                  label, got[i], (unsigned long long)i);
        SQT_CHECK(got[i] == want[i], "%s: element %llu (x = %a, group %llu): code %d, want %d", label,
                  (unsigned long long)i, (double)x[i], (unsigned long long)(i / c->group), got[i],
                  want[i]);
    }
    ck_assert_int_eq(sq_dequantize(c, &q, n, out), SQ_OK);
    SQT_ASSERT_FLOATS_BITS(out, dec, n, label);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t g = i / c->group;
        float s = sqt_meta(q.scales, g, c->scale);
        float lo = c->kind == SQ_KIND_MINMAX ? sqt_meta(q.offsets, g, c->scale) : 0.0f;
        double err = fabs((double)out[i] - (double)x[i]), b = err_bound(c, x[i], s, lo, got[i]);
        SQT_CHECK(err <= b, "%s: element %llu: x = %a, x' = %a, error %g > bound %g (s = %a)", label,
                  (unsigned long long)i, (double)x[i], (double)out[i], err, b, (double)s);
    }
    free(want);
    free(got);
    free(ws);
    free(wo);
    free(dec);
    free(out);
    sq_qbuf_free(&q);
}

/* ------------------------------------------------------------------------ */
/* Round trips                                                              */
/* ------------------------------------------------------------------------ */

/* Loop index: variant * 8 + (bits - 1); variant 0 sym/sdp4bit, 1
** sym/deepspeed, 2 min-max. */
static int variant_codec(int i, sq_codec *c)
{
    int variant = i / 8, bits = i % 8 + 1;
    if (variant == 0 && bits < 2) return 0; /* sym sdp4bit has no 1-bit form */
    *c = sq_codec_default();
    c->kind = variant == 2 ? SQ_KIND_MINMAX : SQ_KIND_SYM;
    c->levels = variant == 1 ? SQ_LEVELS_DEEPSPEED : SQ_LEVELS_SDP4BIT;
    c->bits = bits;
    return 1;
}

/* Every width and level convention, group sizes 1, 7, 128, 4096, with n a
** multiple of the group and not, RTN and SR, fp32 scales. */
START_TEST(test_roundtrip)
{
    sq_codec c;
    if (!variant_codec(_i, &c)) return;
    static const uint64_t groups[] = {1, 7, 128, 4096};
    for (size_t g = 0; g < 4; g++) {
        uint64_t ns[2] = {3 * groups[g], 3 * groups[g] + groups[g] / 2 + 1};
        for (int k = 0; k < 2; k++) {
            if (groups[g] == 1 && k == 1) continue; /* every n is a multiple of 1 */
            float *x = xmalloc(ns[k] * sizeof(float));
            sqt_fill(x, ns[k], 1000u + (uint64_t)_i * 10u + g);
            for (int rnd = 0; rnd < 2; rnd++) {
                c.group = groups[g];
                c.round = (sq_round)rnd;
                char label[SQ_CODEC_STRLEN + 32], spec[SQ_CODEC_STRLEN];
                sq_codec_format(&c, spec, sizeof spec);
                snprintf(label, sizeof label, "%s n=%llu", spec, (unsigned long long)ns[k]);
                verify_case(&c, x, ns[k], &KEY, label);
            }
            free(x);
        }
    }
}
END_TEST

/* The same with bf16 and fp16 scales (data scaled by 2^-6 so that fp16
** offsets and scales stay in range). */
START_TEST(test_roundtrip_16bit_scales)
{
    sq_codec c;
    if (!variant_codec(_i, &c)) return;
    static const uint64_t groups[] = {1, 7, 128};
    for (size_t g = 0; g < 3; g++) {
        uint64_t n = 5 * groups[g] + (groups[g] > 1 ? 3 : 0);
        float *x = xmalloc(n * sizeof(float));
        sqt_fill(x, n, 2000u + (uint64_t)_i * 10u + g);
        for (uint64_t i = 0; i < n; i++) x[i] *= 0x1p-6f;
        for (int sc = 1; sc <= 2; sc++)
            for (int rnd = 0; rnd < 2; rnd++) {
                c.group = groups[g];
                c.round = (sq_round)rnd;
                c.scale = (sq_scale_dtype)sc;
                char label[SQ_CODEC_STRLEN + 32], spec[SQ_CODEC_STRLEN];
                sq_codec_format(&c, spec, sizeof spec);
                snprintf(label, sizeof label, "%s n=%llu", spec, (unsigned long long)n);
                verify_case(&c, x, n, &KEY, label);
            }
        free(x);
    }
}
END_TEST

/* Values exactly on the grid come back exactly, RTN and SR alike. With s a
** power of two, a = qm s, m = qm / a = 1/s and s = a / qm are exact, v = q
** is an integer, so RTN keeps it and SR has v - floor(v) = 0 < u never. Each
** group holds its extreme(s) so that a (or lo, hi) is the intended one. */
START_TEST(test_on_grid_exact)
{
    sq_codec c;
    if (!variant_codec(_i, &c)) return;
    const sqt_levels lv = sqt_levels_of(&c);
    static const float scales[] = {0x1p-3f, 0x1p5f, 0x1p-100f};
    const uint64_t group = 37, n = 4 * group + 5;
    float *x = xmalloc(n * sizeof(float)), *out = xmalloc(n * sizeof(float));
    sqt_rng r = {(uint64_t)_i};
    for (size_t t = 0; t < 3; t++) {
        float s = scales[t];
        for (uint64_t i = 0; i < n; i++) {
            int span = (int)(lv.qhi - lv.qlo) + 1;
            float q = lv.qlo + (float)(int)(sqt_next(&r) % (uint64_t)span);
            x[i] = q * s;
        }
        for (uint64_t g0 = 0; g0 < n; g0 += group) {
            float lo = c.kind == SQ_KIND_MINMAX ? (float)((int)(sqt_next(&r) % 9) - 4) * s : 0.0f;
            uint64_t len = n - g0 < group ? n - g0 : group;
            for (uint64_t j = 0; j < len; j++) x[g0 + j] += lo;
            if (c.kind == SQ_KIND_MINMAX) {
                x[g0] = lo;                                    /* the group minimum */
                if (len > 1) x[g0 + len - 1] = lo + lv.qhi * s; /* and maximum */
            } else {
                /* absmax qm s: +-qmax s alternately (sdp4bit); deepspeed
                ** can only reach 2^(b-1) s as the negative code */
                int neg = c.levels == SQ_LEVELS_DEEPSPEED || (g0 / group) % 2;
                x[g0] = neg ? -lv.qm * s : lv.qm * s;
            }
        }
        for (int rnd = 0; rnd < 2; rnd++) {
            c.group = group;
            c.round = (sq_round)rnd;
            sq_qbuf q;
            qalloc(&c, n, &q);
            ck_assert_int_eq(sq_quantize(&c, x, n, &KEY, &q), SQ_OK);
            ck_assert_int_eq(sq_dequantize(&c, &q, n, out), SQ_OK);
            char label[64];
            snprintf(label, sizeof label, "grid, bits %d kind %d levels %d round %d s %a", c.bits,
                     c.kind, c.levels, rnd, (double)s);
            SQT_ASSERT_FLOATS_BITS(out, x, n, label);
            sq_qbuf_free(&q);
        }
    }
    free(x);
    free(out);
}
END_TEST

/* Exact ties: values at k + 1/2 levels (s a power of two, so v = k + 1/2
** exactly) round half to even under RTN, then clamp. The expected code is
** worked out with integers here, not with rintf. */
START_TEST(test_rtn_ties)
{
    sq_codec c;
    if (!variant_codec(_i, &c)) return;
    const sqt_levels lv = sqt_levels_of(&c);
    const float s = 0x1p-2f;
    const int qlo = (int)lv.qlo, qhi = (int)lv.qhi;
    float x[300], out[300]; /* up to 2^8 + 2 elements */
    int codes[300], want[300];
    uint64_t n = 0;
    float lo = c.kind == SQ_KIND_MINMAX ? -3.0f * s : 0.0f;
    /* the group's extremes first, so that a (or lo, hi) is as intended */
    if (c.kind == SQ_KIND_MINMAX) {
        x[n] = lo, want[n++] = 0;
        x[n] = lo + lv.qhi * s, want[n++] = qhi;
    } else {
        x[n] = -lv.qm * s, want[n++] = qlo; /* a = qm s; -qm is a code for both level kinds */
    }
    for (int k = qlo - 1; k <= qhi; k++) {
        int tie_lo = k, tie_hi = k + 1;
        if (c.kind == SQ_KIND_MINMAX && (k < 0 || k >= qhi)) continue; /* outside [lo, hi] */
        if (c.kind == SQ_KIND_SYM && (k < -(int)lv.qm || k + 1 > (int)lv.qm)) continue; /* |x| <= a */
        int even = (tie_lo % 2 == 0) ? tie_lo : tie_hi;
        even = even < qlo ? qlo : even > qhi ? qhi : even;
        x[n] = lo + ((float)k + 0.5f) * s;
        want[n++] = even;
    }
    c.group = n;
    c.round = SQ_ROUND_RTN;
    sq_qbuf q;
    qalloc(&c, n, &q);
    ck_assert_int_eq(sq_quantize(&c, x, n, NULL, &q), SQ_OK);
    sqt_decode(&c, &q, n, out, codes);
    ck_assert(sqt_meta(q.scales, 0, c.scale) == s);
    for (uint64_t i = 0; i < n; i++)
        ck_assert_msg(codes[i] == want[i], "bits %d kind %d levels %d: x = %g s: code %d, want %d",
                      c.bits, c.kind, c.levels, (double)((x[i] - lo) / s), codes[i], want[i]);
    sq_qbuf_free(&q);
}
END_TEST

/* The SR decision at its boundary: round up iff u < v - floor(v), strictly.
** With s = 2^-4 and a = 7 s, m = 16 and v = x / s exactly, so the test can
** place v - floor(v) exactly on the element's own uniform u_i (from
** sq_uniform, checked against the known answers in check_philox) or one
** 2^-24 step above it, for positive and negative v. */
START_TEST(test_sr_boundary)
{
    enum { N = 64 };
    const float s = 0x1p-4f;
    float x[N], out[N];
    int codes[N], want[N];
    x[0] = 7.0f * s;
    want[0] = 7;
    for (int i = 1; i < N; i++) {
        float u = sq_uniform(&KEY, (uint64_t)i);
        float above = u + 0x1p-24f; /* exact; may be 1.0 */
        switch (i % 4) {
        case 1: x[i] = u * s; want[i] = 0; break;                     /* frac == u: stay */
        case 2: x[i] = above * s; want[i] = 1; break;                 /* frac > u (or v = 1): up */
        case 3: x[i] = (-1.0f + u) * s; want[i] = -1; break;          /* frac == u: stay at -1 */
        default: x[i] = (-1.0f + above) * s; want[i] = 0; break;      /* frac > u: up to 0 */
        }
    }
    sq_codec c = make_codec(SQ_KIND_SYM, 4, N, SQ_ROUND_SR, 0, SQ_LEVELS_SDP4BIT, SQ_SCALE_FP32);
    sq_qbuf q;
    qalloc(&c, N, &q);
    ck_assert_int_eq(sq_quantize(&c, x, N, &KEY, &q), SQ_OK);
    sqt_decode(&c, &q, N, out, codes);
    for (int i = 0; i < N; i++)
        ck_assert_msg(codes[i] == want[i], "element %d (v = %a, u = %a): code %d, want %d", i,
                      (double)(x[i] / s), (double)sq_uniform(&KEY, (uint64_t)i), codes[i], want[i]);
    sq_qbuf_free(&q);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Stochastic rounding is unbiased; RTN is not                              */
/* ------------------------------------------------------------------------ */

enum { UB_N = 64, UB_SEEDS = 4000 };

/* One group of 64: element 0 is the group maximum 7 s exactly on the grid;
** every other element sits at (k + f) s with k in [-7, 6] and the fraction f
** from 0.1 to 0.9, so that v = x m = k + f exactly (s = 2^-4, m = 16) and
** stochastic rounding is a Bernoulli(f) choice between k and k + 1. */
static void ub_input(float *x)
{
    const float s = 0x1p-4f;
    x[0] = 7.0f * s;
    for (int e = 1; e < UB_N; e++) {
        float f = 0.1f + 0.8f * (float)(e - 1) / (float)(UB_N - 2);
        x[e] = ((float)(e % 14 - 7) + f) * s;
    }
}

/* err[e * UB_SEEDS + t] = x'_e - x_e for seed t, in units of s. */
static void ub_errors(sq_round rnd, const float *x, double *err)
{
    sq_codec c = make_codec(SQ_KIND_SYM, 4, UB_N, rnd, 0, SQ_LEVELS_SDP4BIT, SQ_SCALE_FP32);
    sq_qbuf q;
    qalloc(&c, UB_N, &q);
    float out[UB_N];
    sq_set_threads(1); /* one group: a thread team would be pure overhead */
    for (int t = 0; t < UB_SEEDS; t++) {
        sq_rng_key k = {0x5eed0000ull + (uint64_t)t, 7, 3, 2};
        ck_assert_int_eq(sq_quantize(&c, x, UB_N, &k, &q), SQ_OK);
        ck_assert_int_eq(sq_dequantize(&c, &q, UB_N, out), SQ_OK);
        for (int e = 0; e < UB_N; e++)
            err[(size_t)e * UB_SEEDS + (size_t)t] = ((double)out[e] - (double)x[e]) / 0x1p-4;
    }
    sq_set_threads(0);
    sq_qbuf_free(&q);
}

/* For each element a one-sample t-test of mean(x' - x) = 0 over 4000 seeds,
** two-sided, plus a global test: the sum of the 63 squared t statistics
** against chi-square(63). Bonferroni: 64 tests each at p < 1e-8 give a
** family-wise false-failure probability below 64e-8 < 1e-6 for a correct
** implementation. The per-element errors are Bernoulli with p in
** [0.1, 0.9], so with 4000 samples the t approximation holds well at these
** tails (skewness of the mean <= 0.042). The seeds are fixed, so the test is
** deterministic: the probability above is that of having picked an unlucky
** seed set, not of a flake. Power: a bias of 0.1 s on one element (e.g. a
** rounding that is off by 0.1 in probability) gives |t| > 13. */
START_TEST(test_sr_unbiased)
{
    float x[UB_N];
    ub_input(x);
    double *err = xmalloc((size_t)UB_N * UB_SEEDS * sizeof(double));
    ub_errors(SQ_ROUND_SR, x, err);
    const double alpha = 1e-8;
    double chi2 = 0;
    for (int e = 0; e < UB_N; e++) {
        const double *v = err + (size_t)e * UB_SEEDS;
        double mean = gsl_stats_mean(v, 1, UB_SEEDS), sd = gsl_stats_sd(v, 1, UB_SEEDS);
        if (e == 0) { /* on the grid: never moves */
            ck_assert_msg(mean == 0.0 && sd == 0.0, "element 0: mean %g sd %g", mean, sd);
            continue;
        }
        /* Bernoulli(f) between k and k + 1: the sd is about sqrt(f(1-f)) >= 0.3 */
        ck_assert_msg(sd > 0.25, "element %d: sd %g, SR does not randomise", e, sd);
        for (int t = 0; t < UB_SEEDS; t++)
            SQT_CHECK(fabs(v[t]) < 1.0, "element %d seed %d: error %g s", e, t, v[t]);
        double tstat = mean / (sd / sqrt((double)UB_SEEDS));
        double p = 2.0 * gsl_cdf_tdist_Q(fabs(tstat), UB_SEEDS - 1);
        ck_assert_msg(p >= alpha, "element %d (x = %a): mean error %g s, t = %g, p = %g: biased",
                      e, (double)x[e], mean, tstat, p);
        chi2 += tstat * tstat;
    }
    double pg = gsl_cdf_chisq_Q(chi2, UB_N - 1);
    ck_assert_msg(pg >= alpha, "global: sum of t^2 = %g over %d elements, p = %g", chi2, UB_N - 1, pg);
    free(err);
}
END_TEST

/* The bias bound of stochastic rounding's 16-bit uniforms, exactly. u takes
** the 2^16 values (h + 1/2) 2^-16, so v = k + r rounds up with probability
** P(r) = ceil(r 2^16 - 1/2) / 2^16 over h, and |P(r) - r| <= 2^-17: the
** expected code is within 2^-17 of a step of v. No sampling over seeds can
** resolve 2^-17 (the standard error of a mean of n Bernoulli draws is
** 0.5 / sqrt(n)), so the expectation is computed exactly, through the codec
** itself: one buffer of 2^21 elements at fraction r (groups of 64 whose
** element 0 is the maximum 7 s, so that v = x / s exactly), whose stream
** uniforms take every one of the 2^16 values; the mean code over one element
** per value is the expectation over the uniform. Checked for fractions across
** [0, 1) and at the worst places, r = (j + 1/2) 2^-16 and just above, where
** the bound is reached (so it is the bound, not a loose one). */
START_TEST(test_sr_bias_bound)
{
    enum { N = 1 << 21, G = 64, H = 1 << 16 };
    const float s = 0x1p-4f;
    float *x = xmalloc(N * sizeof(float)), *out = xmalloc(N * sizeof(float));
    int *codes = xmalloc(N * sizeof(int));
    uint32_t *first = xmalloc(H * sizeof(uint32_t));
    for (int h = 0; h < H; h++) first[h] = UINT32_MAX;
    sq_uniform_n(&KEY, 0, N, out);
    for (uint32_t i = 0; i < N; i++) {
        float hv = out[i] * 0x1p16f - 0.5f; /* exact: u = (h + 1/2) 2^-16 */
        ck_assert(hv >= 0.0f && hv < (float)H && hv == floorf(hv));
        if (i % G && first[(int)hv] == UINT32_MAX) first[(int)hv] = i;
    }
    for (int h = 0; h < H; h++) ck_assert_msg(first[h] != UINT32_MAX, "no element draws h = %d", h);
    const double fr[] = {0.0, 0x1p-21, 0x1p-17, 0x1p-17 + 0x1p-21, 419430 * 0x1p-22, 0.25, 0.5,
                         (12345 + 0.5) * 0x1p-16, (12345 + 0.5) * 0x1p-16 + 0x1p-21, 0.75,
                         1 - 0x1p-17, 1 - 0x1p-21};
    sq_codec c = make_codec(SQ_KIND_SYM, 4, G, SQ_ROUND_SR, 0, SQ_LEVELS_SDP4BIT, SQ_SCALE_FP32);
    sq_qbuf q;
    qalloc(&c, N, &q);
    double worst = 0;
    for (size_t t = 0; t < sizeof fr / sizeof fr[0]; t++) {
        const float v = 2.0f + (float)fr[t]; /* exact: fr is a multiple of 2^-22 */
        ck_assert((double)v - 2.0 == fr[t]);
        for (uint32_t i = 0; i < N; i++) x[i] = i % G ? v * s : 7.0f * s;
        ck_assert_int_eq(sq_quantize(&c, x, N, &KEY, &q), SQ_OK);
        sqt_decode(&c, &q, N, out, codes);
        long ups = 0;
        for (int h = 0; h < H; h++) {
            const int code = codes[first[h]];
            ck_assert(code == 2 || code == 3);
            ups += code - 2;
        }
        const double bias = (double)ups / H - fr[t]; /* exact in double */
        ck_assert_msg(fabs(bias) <= 0x1p-17, "r = %a: P(up) = %ld / 2^16, bias %a steps > 2^-17",
                      fr[t], ups, bias);
        if (fabs(bias) > worst) worst = fabs(bias);
    }
    ck_assert_msg(worst == 0x1p-17, "the bound is reached at r = (j + 1/2) 2^-16: worst %a", worst);
    sq_qbuf_free(&q);
    free(x), free(out), free(codes), free(first);
}
END_TEST

/* RTN on the same input: the error of every element is the same for every
** seed, and non-zero (at least 0.1 s) off the grid: a systematic bias that
** no number of repetitions averages away. */
START_TEST(test_rtn_biased)
{
    float x[UB_N];
    ub_input(x);
    double *err = xmalloc((size_t)UB_N * UB_SEEDS * sizeof(double));
    ub_errors(SQ_ROUND_RTN, x, err);
    for (int e = 0; e < UB_N; e++) {
        const double *v = err + (size_t)e * UB_SEEDS;
        for (int t = 1; t < UB_SEEDS; t++)
            SQT_CHECK(v[t] == v[0], "element %d: RTN error changed with the seed", e);
        if (e == 0) ck_assert(v[0] == 0.0);
        else
            SQT_CHECK(fabs(v[0]) >= 0.099 && fabs(v[0]) <= 0.5, "element %d: RTN error %g s", e, v[0]);
    }
    free(err);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* quantize_diff / dequantize_add                                           */
/* ------------------------------------------------------------------------ */

/* q = Q(x - ref) is the quantization of the fp32 difference, byte for byte;
** ref + D(q) is the fp32 sum with the decoded difference; the result is
** within the bound of the difference plus the two fp32 roundings; and out
** may alias ref. */
START_TEST(test_diff_roundtrip)
{
    static const char *specs[] = {
        "kind=sym,bits=4,group=128,round=sr",
        "kind=sym,bits=4,group=128,round=sr,hadamard=64",
        "kind=minmax,bits=3,group=100,round=rtn",
        "kind=minmax,bits=5,group=32,round=sr,hadamard=32,scale=bf16",
        "kind=sym,bits=8,group=7,round=rtn,levels=deepspeed",
    };
    const uint64_t n = 20000 + 13;
    float *x = xmalloc(n * sizeof(float)), *ref = xmalloc(n * sizeof(float));
    float *d = xmalloc(n * sizeof(float)), *out = xmalloc(n * sizeof(float));
    float *want = xmalloc(n * sizeof(float)), *alias = xmalloc(n * sizeof(float));
    sqt_fill(ref, n, 31);
    sqt_fill(x, n, 32);
    for (uint64_t i = 0; i < n; i++) x[i] = ref[i] + 0x1p-5f * x[i]; /* a small update */
    for (uint64_t i = 0; i < n; i++) d[i] = x[i] - ref[i];
    for (size_t t = 0; t < sizeof specs / sizeof specs[0]; t++) {
        sq_codec c;
        char err[128];
        ck_assert_int_eq(sq_codec_parse(specs[t], &c, err, sizeof err), SQ_OK);
        sq_qbuf q, qd;
        qalloc(&c, n, &q);
        qalloc(&c, n, &qd);
        ck_assert_int_eq(sq_quantize_diff(&c, x, ref, n, &KEY, &q), SQ_OK);
        ck_assert_int_eq(sq_quantize(&c, d, n, &KEY, &qd), SQ_OK);
        assert_qbuf_equal(&c, &q, &qd, n, specs[t]);

        ck_assert_int_eq(sq_dequantize(&c, &q, n, want), SQ_OK);
        for (uint64_t i = 0; i < n; i++) want[i] = ref[i] + want[i];
        ck_assert_int_eq(sq_dequantize_add(&c, &q, ref, n, out), SQ_OK);
        SQT_ASSERT_FLOATS_BITS(out, want, n, specs[t]);
        memcpy(alias, ref, n * sizeof(float));
        ck_assert_int_eq(sq_dequantize_add(&c, &q, alias, n, alias), SQ_OK);
        SQT_ASSERT_FLOATS_BITS(alias, want, n, "dequantize_add with out == ref");

        if (!c.hadamard) {
            const sqt_levels lv = sqt_levels_of(&c);
            for (uint64_t i = 0; i < n; i++) {
                uint64_t g = i / c.group;
                float s = sqt_meta(q.scales, g, c.scale);
                float lo = c.kind == SQ_KIND_MINMAX ? sqt_meta(q.offsets, g, c.scale) : 0.0f;
                /* worst-case code for the deepspeed clamp term */
                double b = err_bound(&c, d[i], s, lo, (int)lv.qhi) +
                           0x1p-24 * (fabs((double)x[i] - ref[i]) + fabs((double)out[i]));
                double e = fabs((double)out[i] - (double)x[i]);
                SQT_CHECK(e <= b, "%s: element %llu: error %g > %g", specs[t],
                          (unsigned long long)i, e, b);
            }
        }
        sq_qbuf_free(&q);
        sq_qbuf_free(&qd);
    }
    free(x);
    free(ref);
    free(d);
    free(out);
    free(want);
    free(alias);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The chunk sums                                                           */
/* ------------------------------------------------------------------------ */

static const struct {
    const char *in, *out;
} sum_codecs[] = {
    {"kind=sym,bits=4,group=128,round=sr", "kind=sym,bits=8,group=64,round=rtn"},
    {"kind=minmax,bits=3,group=64,round=rtn", "kind=minmax,bits=4,group=32,round=sr,scale=bf16"},
    /* Hadamard fields are ignored by dequant_sum_requant (the middle hop) */
    {"kind=sym,bits=4,group=128,round=sr,hadamard=64", "kind=sym,bits=4,group=128,round=sr,hadamard=64"},
    {"kind=sym,bits=3,group=7,round=sr,levels=deepspeed", "kind=minmax,bits=8,group=4096,round=sr,scale=fp16"},
    {"kind=minmax,bits=2,group=1000,round=sr,scale=fp16", "kind=sym,bits=2,group=3,round=rtn"},
};

/* Quantizes k chunks of different data with c_in (different steps). */
static sq_qbuf *make_chunks(const sq_codec *c, int k, uint64_t n, float *scratch)
{
    sq_qbuf *chunks = xmalloc((size_t)k * sizeof(sq_qbuf));
    for (int i = 0; i < k; i++) {
        sqt_fill(scratch, n, 700u + (uint64_t)i);
        for (uint64_t j = 0; j < n; j++) scratch[j] *= 0x1p-6f; /* fp16 metadata in range */
        sq_rng_key key = KEY;
        key.step = 100u + (uint32_t)i;
        qalloc(c, n, &chunks[i]);
        ck_assert_int_eq(sq_quantize(c, scratch, n, &key, &chunks[i]), SQ_OK);
    }
    return chunks;
}

/* Sum of the chunks decoded by hand (unpack, multiply), in chunk order in
** fp32, starting from chunk 0 itself (not from 0 + chunk 0: that would turn
** -0 into +0). */
static void ref_sum(const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n, float *sum,
                    float *tmp)
{
    sqt_decode(c, &chunks[0], n, sum, NULL);
    for (int i = 1; i < k; i++) {
        sqt_decode(c, &chunks[i], n, tmp, NULL);
        for (uint64_t j = 0; j < n; j++) sum[j] = sum[j] + tmp[j];
    }
}

/* dequant_sum_requant equals: decode by hand, sum in order, sq_quantize the
** sum with c_out (its Hadamard field cleared): byte for byte. n spans several
** of the library's internal tiles and is not a multiple of any group. */
START_TEST(test_sum_requant)
{
    static const int ks[] = {1, 2, 3, 5};
    const uint64_t n = 50001;
    float *tmp = xmalloc(n * sizeof(float)), *sum = xmalloc(n * sizeof(float));
    sq_codec ci, co;
    char err[128];
    ck_assert_int_eq(sq_codec_parse(sum_codecs[_i].in, &ci, err, sizeof err), SQ_OK);
    ck_assert_int_eq(sq_codec_parse(sum_codecs[_i].out, &co, err, sizeof err), SQ_OK);
    sq_codec co_plain = co;
    co_plain.hadamard = 0;
    for (size_t t = 0; t < 4; t++) {
        int k = ks[t];
        sq_qbuf *chunks = make_chunks(&ci, k, n, tmp);
        ref_sum(&ci, chunks, k, n, sum, tmp);
        sq_qbuf got, want;
        qalloc(&co, n, &got);
        qalloc(&co, n, &want);
        ck_assert_int_eq(sq_quantize(&co_plain, sum, n, &KEY, &want), SQ_OK);
        ck_assert_int_eq(sq_dequant_sum_requant(&ci, chunks, k, n, &co, &KEY, &got), SQ_OK);
        char label[300];
        snprintf(label, sizeof label, "sum_requant %s -> %s, k = %d", sum_codecs[_i].in,
                 sum_codecs[_i].out, k);
        assert_qbuf_equal(&co, &got, &want, n, label);
        for (int i = 0; i < k; i++) sq_qbuf_free(&chunks[i]);
        free(chunks);
        sq_qbuf_free(&got);
        sq_qbuf_free(&want);
    }
    free(tmp);
    free(sum);
}
END_TEST

/* dequant_sum equals the hand-decoded sum in chunk order, followed by the
** inverse Hadamard when the codec has one (the last hop). */
START_TEST(test_dequant_sum)
{
    static const int ks[] = {1, 2, 4};
    const uint64_t n = 40000 + 77;
    float *tmp = xmalloc(n * sizeof(float)), *want = xmalloc(n * sizeof(float));
    float *got = xmalloc(n * sizeof(float));
    sq_codec c;
    char err[128];
    ck_assert_int_eq(sq_codec_parse(sum_codecs[_i].in, &c, err, sizeof err), SQ_OK);
    for (size_t t = 0; t < 3; t++) {
        int k = ks[t];
        sq_qbuf *chunks = make_chunks(&c, k, n, tmp);
        ref_sum(&c, chunks, k, n, want, tmp);
        if (c.hadamard) ck_assert_int_eq(sq_hadamard_inverse(want, n, c.hadamard), SQ_OK);
        ck_assert_int_eq(sq_dequant_sum(&c, chunks, k, n, got), SQ_OK);
        char label[200];
        snprintf(label, sizeof label, "dequant_sum %s, k = %d", sum_codecs[_i].in, k);
        SQT_ASSERT_FLOATS_BITS(got, want, n, label);
        for (int i = 0; i < k; i++) sq_qbuf_free(&chunks[i]);
        free(chunks);
    }
    free(tmp);
    free(want);
    free(got);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Hadamard inside the codecs                                               */
/* ------------------------------------------------------------------------ */

/* quantize with hadamard = h is sq_hadamard then quantize without, byte for
** byte; dequantize with hadamard = h is dequantize without, then the inverse
** transform. n leaves a partial final block and a short last group. */
START_TEST(test_hadamard_in_codec)
{
    static const int hs[] = {2, 32, 256, 1024};
    static const char *bases[] = {"kind=sym,bits=4,group=128,round=sr",
                                  "kind=minmax,bits=3,group=96,round=rtn",
                                  "kind=sym,bits=6,group=1000,round=rtn,levels=deepspeed,scale=bf16"};
    const uint64_t n = 3 * 1024 + 700 + 5;
    float *x = xmalloc(n * sizeof(float)), *xt = xmalloc(n * sizeof(float));
    float *a = xmalloc(n * sizeof(float)), *b = xmalloc(n * sizeof(float));
    sqt_fill(x, n, 77);
    for (size_t bi = 0; bi < 3; bi++)
        for (size_t t = 0; t < 4; t++) {
            sq_codec c, c0;
            char err[128];
            ck_assert_int_eq(sq_codec_parse(bases[bi], &c, err, sizeof err), SQ_OK);
            c0 = c;
            c.hadamard = hs[t];
            sq_qbuf qh, q0;
            qalloc(&c, n, &qh);
            qalloc(&c, n, &q0);
            memcpy(xt, x, n * sizeof(float));
            ck_assert_int_eq(sq_hadamard(xt, n, hs[t]), SQ_OK);
            ck_assert_int_eq(sq_quantize(&c, x, n, &KEY, &qh), SQ_OK);
            ck_assert_int_eq(sq_quantize(&c0, xt, n, &KEY, &q0), SQ_OK);
            char label[200];
            snprintf(label, sizeof label, "%s,hadamard=%d", bases[bi], hs[t]);
            assert_qbuf_equal(&c, &qh, &q0, n, label);
            /* the input is not modified by a quantize with a transform */
            sqt_fill(xt, n, 77);
            SQT_ASSERT_FLOATS_BITS(x, xt, n, "quantize modified its input");

            ck_assert_int_eq(sq_dequantize(&c, &qh, n, a), SQ_OK);
            ck_assert_int_eq(sq_dequantize(&c0, &qh, n, b), SQ_OK);
            ck_assert_int_eq(sq_hadamard_inverse(b, n, hs[t]), SQ_OK);
            SQT_ASSERT_FLOATS_BITS(a, b, n, label);
            sq_qbuf_free(&qh);
            sq_qbuf_free(&q0);
        }
    free(x);
    free(xt);
    free(a);
    free(b);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Determinism                                                              */
/* ------------------------------------------------------------------------ */

/* A few MB with SR and Hadamard: 1, 2 and 4 threads give the same bytes for
** quantize, quantize_diff and dequant_sum_requant, and the same floats for
** dequantize. */
START_TEST(test_thread_count_independence)
{
    static const char *specs[] = {"kind=sym,bits=4,group=128,round=sr,hadamard=64",
                                  "kind=minmax,bits=3,group=100,round=sr,hadamard=128"};
    static const int threads[] = {1, 2, 4};
    const uint64_t n = (1u << 20) + 1234;
    float *x = xmalloc(n * sizeof(float)), *ref = xmalloc(n * sizeof(float));
    float *d1 = xmalloc(n * sizeof(float)), *dk = xmalloc(n * sizeof(float));
    sqt_fill(x, n, 4242);
    sqt_fill(ref, n, 4243);
    for (size_t s = 0; s < 2; s++) {
        sq_codec c;
        char err[128];
        ck_assert_int_eq(sq_codec_parse(specs[s], &c, err, sizeof err), SQ_OK);
        sq_qbuf q1, qk, diff1, diffk, sum1, sumk, chunks[2];
        qalloc(&c, n, &q1);
        qalloc(&c, n, &diff1);
        qalloc(&c, n, &sum1);
        for (size_t t = 0; t < 3; t++) {
            sq_set_threads(threads[t]);
            sq_qbuf *q = t ? &qk : &q1, *df = t ? &diffk : &diff1, *sm = t ? &sumk : &sum1;
            if (t) {
                qalloc(&c, n, q);
                qalloc(&c, n, df);
                qalloc(&c, n, sm);
            }
            ck_assert_int_eq(sq_quantize(&c, x, n, &KEY, q), SQ_OK);
            ck_assert_int_eq(sq_quantize_diff(&c, x, ref, n, &KEY, df), SQ_OK);
            ck_assert_int_eq(sq_dequantize(&c, q, n, t ? dk : d1), SQ_OK);
            chunks[0] = *q;
            chunks[1] = *df;
            ck_assert_int_eq(sq_dequant_sum_requant(&c, chunks, 2, n, &c, &KEY, sm), SQ_OK);
            if (t) {
                char label[200];
                snprintf(label, sizeof label, "%s with %d threads vs 1", specs[s], threads[t]);
                assert_qbuf_equal(&c, q, &q1, n, label);
                assert_qbuf_equal(&c, df, &diff1, n, label);
                assert_qbuf_equal(&c, sm, &sum1, n, label);
                SQT_ASSERT_FLOATS_BITS(dk, d1, n, label);
                sq_qbuf_free(q);
                sq_qbuf_free(df);
                sq_qbuf_free(sm);
            }
        }
        sq_set_threads(0);
        sq_qbuf_free(&q1);
        sq_qbuf_free(&diff1);
        sq_qbuf_free(&sum1);
    }
    free(x);
    free(ref);
    free(d1);
    free(dk);
}
END_TEST

/* Every part of the key reaches the codes: the same key gives the same
** bytes twice; changing the seed's low or high half, the step, the worker
** or the site changes them. RTN ignores the key (and accepts NULL). */
START_TEST(test_key_sensitivity)
{
    const uint64_t n = 4096;
    float *x = xmalloc(n * sizeof(float));
    sqt_fill(x, n, 5);
    sq_codec c = make_codec(SQ_KIND_SYM, 4, 128, SQ_ROUND_SR, 0, SQ_LEVELS_SDP4BIT, SQ_SCALE_FP32);
    uint64_t cb = sq_codec_code_bytes(&c, n);
    sq_qbuf a, b;
    qalloc(&c, n, &a);
    qalloc(&c, n, &b);
    ck_assert_int_eq(sq_quantize(&c, x, n, &KEY, &a), SQ_OK);
    ck_assert_int_eq(sq_quantize(&c, x, n, &KEY, &b), SQ_OK);
    SQT_ASSERT_BYTES(b.codes, a.codes, cb, "same key, different codes");
    sq_rng_key variants[5];
    for (int v = 0; v < 5; v++) variants[v] = KEY;
    variants[0].seed ^= 1;
    variants[1].seed ^= 1ull << 63;
    variants[2].step += 1;
    variants[3].worker += 1;
    variants[4].site += 1;
    for (int v = 0; v < 5; v++) {
        ck_assert_int_eq(sq_quantize(&c, x, n, &variants[v], &b), SQ_OK);
        ck_assert_msg(memcmp(a.codes, b.codes, cb) != 0, "key variant %d gave the same codes", v);
    }
    c.round = SQ_ROUND_RTN;
    ck_assert_int_eq(sq_quantize(&c, x, n, NULL, &a), SQ_OK);
    ck_assert_int_eq(sq_quantize(&c, x, n, &variants[0], &b), SQ_OK);
    SQT_ASSERT_BYTES(b.codes, a.codes, cb, "RTN depends on the key");
    sq_qbuf_free(&a);
    sq_qbuf_free(&b);
    free(x);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("codec");
    TCase *tr = tcase_create("roundtrip");
    tcase_add_loop_test(tr, test_roundtrip, 0, 24);
    tcase_add_loop_test(tr, test_roundtrip_16bit_scales, 0, 24);
    tcase_add_loop_test(tr, test_on_grid_exact, 0, 24);
    tcase_add_loop_test(tr, test_rtn_ties, 0, 24);
    suite_add_tcase(s, tr);
    TCase *ts = tcase_create("stochastic");
    tcase_add_test(ts, test_sr_boundary);
    tcase_add_test(ts, test_sr_unbiased);
    tcase_add_test(ts, test_sr_bias_bound);
    tcase_add_test(ts, test_rtn_biased);
    tcase_add_test(ts, test_key_sensitivity);
    suite_add_tcase(s, ts);
    TCase *to = tcase_create("operations");
    tcase_add_test(to, test_diff_roundtrip);
    tcase_add_loop_test(to, test_sum_requant, 0, (int)(sizeof sum_codecs / sizeof sum_codecs[0]));
    tcase_add_loop_test(to, test_dequant_sum, 0, (int)(sizeof sum_codecs / sizeof sum_codecs[0]));
    tcase_add_test(to, test_hadamard_in_codec);
    tcase_add_test(to, test_thread_count_independence);
    suite_add_tcase(s, to);
    return sqt_run(s);
}
