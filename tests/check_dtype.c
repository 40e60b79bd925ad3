/*
** check_dtype.c -- fp32 <-> bf16 / fp16 conversions and sq_find_nonfinite.
**
** Expected values come from two places that do not share the library's bit
** tricks: hand-picked cases written as bit patterns, and a reference that
** rounds in double arithmetic from the value (frexp, ldexp, nearbyint in the
** default round-to-nearest-even mode) rather than from the bit pattern.
*/
#include "shardq/codec.h"
#include "check_util.h"
#include "sq_hd.h"

#include <float.h>
#include <math.h>

/* ------------------------------------------------------------------------ */
/* Reference rounding                                                       */
/* ------------------------------------------------------------------------ */

/* Rounds a finite x to a binary format with p significand bits (implicit bit
** included), smallest normal exponent emin, largest exponent emax: round to
** nearest, ties to even; results beyond the largest finite value are +-Inf.
** Every step is exact in double for the formats used here (x is a float, the
** quotient by a power of two and the integer k have at most 24 bits). */
static double ref_round(double x, int p, int emin, int emax)
{
    if (x == 0.0) return x;
    int e;
    frexp(x, &e);                  /* x = m 2^e, 0.5 <= |m| < 1 */
    int exp = e - 1;               /* x = M 2^exp, 1 <= |M| < 2 */
    int qexp = (exp > emin ? exp : emin) - (p - 1);
    double k = nearbyint(ldexp(x, -qexp));
    double y = ldexp(k, qexp);
    double maxfinite = ldexp(2.0 - ldexp(1.0, 1 - p), emax);
    if (fabs(y) > maxfinite) return copysign(INFINITY, x);
    return y;
}

static double ref_bf16(float x) { return ref_round(x, 8, -126, 127); }
static double ref_f16(float x) { return ref_round(x, 11, -14, 15); }

/* Value of an fp16 pattern, from the IEEE definition. */
static double f16_value(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v;
    if (e == 0x1f) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp(m, -24);
    else v = ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

static int f16_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }
static int bf16_is_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f); }

/* ------------------------------------------------------------------------ */
/* bf16                                                                     */
/* ------------------------------------------------------------------------ */

START_TEST(test_bf16_specials)
{
    static const struct { uint32_t f; uint16_t h; } cases[] = {
        {0x00000000u, 0x0000}, {0x80000000u, 0x8000},   /* +-0 keep their sign */
        {0x3f800000u, 0x3f80}, {0xbf800000u, 0xbf80},   /* +-1 */
        {0x7f800000u, 0x7f80}, {0xff800000u, 0xff80},   /* +-Inf */
        {0x7f7f7fffu, 0x7f7f}, /* just below the tie under the largest bf16: down */
        {0x7f7f8000u, 0x7f80}, /* tie between 0x7f7f (odd) and Inf: up, to Inf */
        {0x7f7fffffu, 0x7f80}, /* FLT_MAX is beyond bf16 max + half an ulp */
        {0xff7fffffu, 0xff80}, /* -FLT_MAX */
        {0x00000001u, 0x0000}, /* the smallest f32 denormal: far below half */
        {0x00008000u, 0x0000}, /* tie between 0 and 0x0001: even, 0 */
        {0x00018000u, 0x0002}, /* tie between 0x0001 and 0x0002: even */
        {0x80008001u, 0x8001}, /* above the tie, negative */
        {0x3fff8000u, 0x4000}, /* tie that carries into the exponent */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = sq_f32_to_bf16(sqt_float(cases[i].f));
        SQT_CHECK(got == cases[i].h, "f32 0x%08x -> bf16 0x%04x, want 0x%04x", cases[i].f,
                      got, cases[i].h);
    }
}
END_TEST

/* Every finite bf16 pattern h: the f32 halfway between h and the next
** pattern up goes to whichever of the two is even; one f32 ulp either side
** goes to the nearer one. Covers the carry into the exponent and, for the
** largest finite value (odd), the tie up to Inf. Both signs. */
START_TEST(test_bf16_ties_exhaustive)
{
    for (uint32_t h = 0; h < 0x10000u; h++) {
        if ((h & 0x7fffu) >= 0x7f80u) continue; /* Inf, NaN */
        uint32_t mid = (h << 16) | 0x8000u;
        uint16_t even = (h & 1u) ? (uint16_t)(h + 1) : (uint16_t)h;
        uint16_t got = sq_f32_to_bf16(sqt_float(mid));
        SQT_CHECK(got == even, "tie 0x%08x -> 0x%04x, want 0x%04x", mid, got, even);
        got = sq_f32_to_bf16(sqt_float(mid - 1));
        SQT_CHECK(got == (uint16_t)h, "0x%08x -> 0x%04x, want 0x%04x", mid - 1, got, h);
        got = sq_f32_to_bf16(sqt_float(mid + 1));
        SQT_CHECK(got == (uint16_t)(h + 1), "0x%08x -> 0x%04x, want 0x%04x", mid + 1, got,
                      h + 1);
    }
}
END_TEST

START_TEST(test_bf16_nan)
{
    static const uint32_t nans[] = {
        0x7fc00000u, 0xffc00000u, /* quiet, both signs */
        0x7f800001u, 0xff800001u, /* signalling, payload only in the dropped bits */
        0x7fa00000u, 0x7fbfffffu, /* signalling, payload in the kept bits */
        0x7fffffffu, 0xffffffffu,
    };
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        uint16_t h = sq_f32_to_bf16(sqt_float(nans[i]));
        SQT_CHECK(bf16_is_nan(h), "NaN 0x%08x -> 0x%04x, not a NaN", nans[i], h);
        SQT_CHECK((h >> 15) == (nans[i] >> 31), "NaN 0x%08x -> 0x%04x: sign lost", nans[i], h);
        SQT_CHECK(h & 0x0040u, "NaN 0x%08x -> 0x%04x: not quiet", nans[i], h);
    }
}
END_TEST

/* A sample of about a million f32 patterns spread over the whole space (a
** stride coprime to every power of two) against the value-based reference. */
START_TEST(test_bf16_sampled_vs_reference)
{
    for (uint64_t u = 0; u < 0x100000000ull; u += 4093) {
        float x = sqt_float((uint32_t)u);
        if (!isfinite(x)) continue;
        double want = ref_bf16(x);
        float got = sq_bf16_to_f32(sq_f32_to_bf16(x));
        SQT_CHECK((double)got == want && !!signbit(got) == !!signbit(want),
                      "f32 0x%08x (%a) -> %a, want %a", (uint32_t)u, (double)x, (double)got, want);
    }
}
END_TEST

START_TEST(test_bf16_to_f32_exhaustive)
{
    for (uint32_t h = 0; h < 0x10000u; h++)
        SQT_CHECK(sqt_bits(sq_bf16_to_f32((uint16_t)h)) == h << 16, "bf16 0x%04x", h);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* fp16                                                                     */
/* ------------------------------------------------------------------------ */

START_TEST(test_f16_specials)
{
    static const struct { float f; uint16_t h; } cases[] = {
        {0.0f, 0x0000}, {-0.0f, 0x8000}, {1.0f, 0x3c00}, {-2.0f, 0xc000},
        {65504.0f, 0x7bff},              /* the largest fp16 */
        {65519.99609375f, 0x7bff},       /* f32 just below 65520: rounds down */
        {65520.0f, 0x7c00},              /* the tie with 65536, odd 0x7bff: Inf */
        {-65520.0f, 0xfc00}, {FLT_MAX, 0x7c00}, {-FLT_MAX, 0xfc00},
        {INFINITY, 0x7c00}, {-INFINITY, 0xfc00},
        {0x1p-14f, 0x0400},              /* smallest normal */
        {0x1p-24f, 0x0001},              /* smallest subnormal, exact */
        {0x1p-25f, 0x0000},              /* tie between 0 and 2^-24: even, 0 */
        {0x1.000002p-25f, 0x0001},       /* just above that tie */
        {0x1.8p-24f, 0x0002},            /* 3 * 2^-25: tie between 1 and 2 units: 2 */
        {0x1.4p-23f, 0x0002},            /* 5 * 2^-25: tie between 2 and 3 units: 2 */
        {0x1.cp-23f, 0x0004},            /* 7 * 2^-25: tie between 3 and 4 units: 4 */
        {0x1p-26f, 0x0000}, {-0x1p-26f, 0x8000},
        {0x1.ffcp-15f, 0x0400},          /* 1023.5 * 2^-24: tie, up to the normal */
        {0x1.ff4p-15f, 0x03fe},          /* 1022.5 * 2^-24: tie, down to even */
        {0x1p-149f, 0x0000}, {-0x1p-149f, 0x8000}, /* f32 denormals vanish */
        {0x1.002p+0f, 0x3c00},           /* 1 + 2^-11: tie, even */
        {0x1.006p+0f, 0x3c02},           /* 1 + 3 * 2^-11: tie, even */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = sq_f32_to_f16(cases[i].f);
        SQT_CHECK(got == cases[i].h, "f32 %a -> fp16 0x%04x, want 0x%04x",
                      (double)cases[i].f, got, cases[i].h);
    }
}
END_TEST

/* As for bf16: the exact midpoint of every pair of adjacent finite fp16
** patterns (always an f32) goes to the even one; one f32 ulp either side to
** the nearer. Includes the subnormal range, the subnormal/normal border and
** 65520 -> Inf (midpoint of 0x7bff and 0x7c00). */
START_TEST(test_f16_ties_exhaustive)
{
    for (uint32_t h = 0; h < 0x7c00u; h++) {
        for (int neg = 0; neg < 2; neg++) {
            uint16_t lo = (uint16_t)(h | (neg ? 0x8000u : 0)), hi = (uint16_t)(lo + 1);
            double mid = (f16_value((uint16_t)h) + (h + 1 == 0x7c00u ? 65536.0
                                                                     : f16_value((uint16_t)(h + 1)))) / 2;
            float fm = (float)(neg ? -mid : mid);
            ck_assert((double)fabsf(fm) == mid); /* the midpoint is exact in f32 */
            uint16_t even = (h & 1u) ? hi : lo;
            uint16_t got = sq_f32_to_f16(fm);
            SQT_CHECK(got == even, "tie %a -> 0x%04x, want 0x%04x", (double)fm, got, even);
            float below = nextafterf(fm, 0.0f), above = nextafterf(fm, neg ? -INFINITY : INFINITY);
            got = sq_f32_to_f16(below);
            SQT_CHECK(got == lo, "%a -> 0x%04x, want 0x%04x", (double)below, got, lo);
            got = sq_f32_to_f16(above);
            SQT_CHECK(got == hi, "%a -> 0x%04x, want 0x%04x", (double)above, got, hi);
        }
    }
}
END_TEST

START_TEST(test_f16_nan)
{
    static const uint32_t nans[] = {
        0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u,
        0x7f802000u, /* payload lands in the lowest fp16 mantissa bit */
        0x7fbfffffu, 0x7fffffffu, 0xffffffffu,
    };
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        uint16_t h = sq_f32_to_f16(sqt_float(nans[i]));
        SQT_CHECK(f16_is_nan(h), "NaN 0x%08x -> 0x%04x, not a NaN", nans[i], h);
        SQT_CHECK((h >> 15) == (nans[i] >> 31), "NaN 0x%08x -> 0x%04x: sign lost", nans[i], h);
        SQT_CHECK(h & 0x0200u, "NaN 0x%08x -> 0x%04x: not quiet", nans[i], h);
    }
}
END_TEST

START_TEST(test_f16_sampled_vs_reference)
{
    for (uint64_t u = 0; u < 0x100000000ull; u += 4093) {
        float x = sqt_float((uint32_t)u);
        if (!isfinite(x)) continue;
        double want = ref_f16(x);
        float got = sq_f16_to_f32(sq_f32_to_f16(x));
        SQT_CHECK((double)got == want && !!signbit(got) == !!signbit(want),
                      "f32 0x%08x (%a) -> %a, want %a", (uint32_t)u, (double)x, (double)got, want);
    }
}
END_TEST

/* sq_hd_round_f16 (the kernels' branch-free fp16 rounding) against the
** conversion there and back: the value and the bits (signs of zero, NaN
** payloads) of every fp16 tie and its two neighbours, of every pattern
** whose 13 dropped bits are 0, 1, 0x0fff, 0x1000, 0x1001 or 0x1fff, and of
** a stride through all 2^32 patterns. */
static void check_round_f16(uint32_t b)
{
    const float x = sqt_float(b);
    const uint32_t got = sqt_bits(sq_hd_round_f16(x)),
                   want = sqt_bits(sq_f16_to_f32(sq_f32_to_f16(x)));
    SQT_CHECK(got == want, "f32 0x%08x -> 0x%08x, want 0x%08x", b, got, want);
}

START_TEST(test_round_f16_branch_free)
{
    for (uint32_t h = 0; h < 0x7c00u; h++) {
        double mid = (f16_value((uint16_t)h) + (h + 1 == 0x7c00u ? 65536.0
                                                                 : f16_value((uint16_t)(h + 1)))) / 2;
        const uint32_t m = sqt_bits((float)mid);
        for (uint32_t sign = 0; sign < 2; sign++)
            for (uint32_t d = 0; d < 3; d++) check_round_f16(((m + d - 1) & 0x7fffffffu) | sign << 31);
    }
    static const uint32_t low[] = {0, 1, 0x0fff, 0x1000, 0x1001, 0x1fff};
    for (uint32_t top = 0; top < (1u << 19); top++)
        for (size_t k = 0; k < sizeof low / sizeof low[0]; k++) check_round_f16(top << 13 | low[k]);
    for (uint64_t u = 0; u < 0x100000000ull; u += 65521) check_round_f16((uint32_t)u);
}
END_TEST

START_TEST(test_f16_to_f32_exhaustive)
{
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float got = sq_f16_to_f32((uint16_t)h);
        double want = f16_value((uint16_t)h);
        if (f16_is_nan((uint16_t)h)) {
            SQT_CHECK(isnan(got) && !!signbit(got) == (h >> 15), "fp16 0x%04x", h);
        } else {
            SQT_CHECK((double)got == want && !!signbit(got) == (h >> 15),
                          "fp16 0x%04x -> %a, want %a", h, (double)got, want);
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Round trips, arrays                                                      */
/* ------------------------------------------------------------------------ */

/* Every 16-bit pattern through f32 and back: non-NaN patterns come back
** bit-identical; NaNs come back as quiet NaNs with their sign. */
START_TEST(test_roundtrip_exhaustive)
{
    for (uint32_t h = 0; h < 0x10000u; h++) {
        uint16_t b = sq_f32_to_bf16(sq_bf16_to_f32((uint16_t)h));
        if (bf16_is_nan((uint16_t)h))
            SQT_CHECK(bf16_is_nan(b) && (b >> 15) == (h >> 15) && (b & 0x40), "bf16 0x%04x -> 0x%04x", h, b);
        else
            SQT_CHECK(b == h, "bf16 0x%04x -> 0x%04x", h, b);
        uint16_t f = sq_f32_to_f16(sq_f16_to_f32((uint16_t)h));
        if (f16_is_nan((uint16_t)h))
            SQT_CHECK(f16_is_nan(f) && (f >> 15) == (h >> 15) && (f & 0x200), "fp16 0x%04x -> 0x%04x", h, f);
        else
            SQT_CHECK(f == h, "fp16 0x%04x -> 0x%04x", h, f);
    }
}
END_TEST

START_TEST(test_array_versions)
{
    enum { N = 4099 };
    static float x[N], back[N + 1];
    static uint16_t h[N + 1], hs[N];
    sqt_rng r = {42};
    for (size_t i = 0; i < N; i++) x[i] = sqt_float((uint32_t)sqt_next(&r)); /* any pattern, NaNs too */
    x[0] = 65520.0f;
    x[1] = 0x1p-25f;
    x[2] = sqt_float(0x7f800001u);

    h[N] = 0xabcd; /* a guard: the array functions write n elements, no more */
    sq_f32_to_bf16_n(x, h, N);
    for (size_t i = 0; i < N; i++) hs[i] = sq_f32_to_bf16(x[i]);
    SQT_ASSERT_BYTES(h, hs, sizeof hs, "sq_f32_to_bf16_n vs scalar");
    ck_assert_uint_eq(h[N], 0xabcd);
    back[N] = 7.0f;
    sq_bf16_to_f32_n(h, back, N);
    for (size_t i = 0; i < N; i++)
        ck_assert_uint_eq(sqt_bits(back[i]), sqt_bits(sq_bf16_to_f32(h[i])));
    ck_assert(back[N] == 7.0f);

    sq_f32_to_f16_n(x, h, N);
    for (size_t i = 0; i < N; i++) hs[i] = sq_f32_to_f16(x[i]);
    SQT_ASSERT_BYTES(h, hs, sizeof hs, "sq_f32_to_f16_n vs scalar");
    ck_assert_uint_eq(h[N], 0xabcd);
    sq_f16_to_f32_n(h, back, N);
    for (size_t i = 0; i < N; i++)
        ck_assert_uint_eq(sqt_bits(back[i]), sqt_bits(sq_f16_to_f32(h[i])));
    ck_assert(back[N] == 7.0f);

    /* n = 0 writes nothing, even through NULL */
    sq_f32_to_bf16_n(NULL, NULL, 0);
    sq_f16_to_f32_n(NULL, NULL, 0);
}
END_TEST

START_TEST(test_find_nonfinite)
{
    enum { N = 1000 };
    static float x[N];
    sqt_fill(x, N, 7);
    x[3] = FLT_MAX;
    x[4] = -FLT_MAX;
    x[5] = 0x1p-149f; /* denormals are finite */
    ck_assert_uint_eq(sq_find_nonfinite(x, N), N);
    ck_assert_uint_eq(sq_find_nonfinite(x, 0), 0);
    ck_assert_uint_eq(sq_find_nonfinite(NULL, 0), 0);

    const float bad[] = {NAN, -NAN, INFINITY, -INFINITY, sqt_float(0x7f800001u),
                         sqt_float(0xffbfffffu)};
    const size_t at[] = {0, 1, 499, N - 1};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++)
        for (size_t a = 0; a < sizeof at / sizeof at[0]; a++) {
            float keep = x[at[a]];
            x[at[a]] = bad[b];
            ck_assert_uint_eq(sq_find_nonfinite(x, N), at[a]);
            /* the prefix before it is all finite */
            ck_assert_uint_eq(sq_find_nonfinite(x, at[a]), at[a]);
            x[at[a]] = keep;
        }
    /* the first of several */
    x[700] = NAN;
    x[200] = INFINITY;
    ck_assert_uint_eq(sq_find_nonfinite(x, N), 200);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dtype");
    TCase *tb = tcase_create("bf16");
    tcase_add_test(tb, test_bf16_specials);
    tcase_add_test(tb, test_bf16_ties_exhaustive);
    tcase_add_test(tb, test_bf16_nan);
    tcase_add_test(tb, test_bf16_sampled_vs_reference);
    tcase_add_test(tb, test_bf16_to_f32_exhaustive);
    suite_add_tcase(s, tb);
    TCase *th = tcase_create("fp16");
    tcase_add_test(th, test_f16_specials);
    tcase_add_test(th, test_f16_ties_exhaustive);
    tcase_add_test(th, test_f16_nan);
    tcase_add_test(th, test_f16_sampled_vs_reference);
    tcase_add_test(th, test_f16_to_f32_exhaustive);
    tcase_add_test(th, test_round_f16_branch_free);
    suite_add_tcase(s, th);
    TCase *ta = tcase_create("misc");
    tcase_add_test(ta, test_roundtrip_exhaustive);
    tcase_add_test(ta, test_array_versions);
    tcase_add_test(ta, test_find_nonfinite);
    suite_add_tcase(s, ta);
    return sqt_run(s);
}
