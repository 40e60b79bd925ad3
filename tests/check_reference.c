/*
** check_reference.c -- the fast codec paths against a straight-line reference.
**
** The library quantizes in tiles, vectorised, over threads, with its own
** batched Philox and integer min/max scans. This suite re-states the
** conventions (docs/conventions.md) as the plainest loop it can:
** libm floorf/rintf, float comparisons, Random123's philox4x32_R one block at
** a time, the bit stream written bit by bit, and demands the same bytes for
** many codecs, sizes and thread counts.
*/
#include "check_util.h"
#include "shardq/codec.h"

#include <Random123/philox.h>
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* The reference                                                            */
/* ------------------------------------------------------------------------ */

/* Stochastic rounding's uniform: 16-bit half i % 8 of block i / 8, most
** significant half first, u = (half + 1/2) * 2^-16. */
static float ref_uniform(const sq_rng_key *k, uint64_t i)
{
    philox4x32_ctr_t c = {{(uint32_t)(i / 8), (uint32_t)(i / 8 >> 32), k->step,
                           (k->worker << 8) | k->site}};
    philox4x32_key_t key = {{(uint32_t)k->seed, (uint32_t)(k->seed >> 32)}};
    philox4x32_ctr_t r = philox4x32_R(10, c, key);
    uint32_t w = r.v[i % 8 / 2];
    uint32_t half = i % 2 ? w & 0xffffu : w >> 16;
    return ((float)half + 0.5f) * 0x1p-16f;
}

/* The 24-bit uniform: word i % 4 of block i / 4, u = (word >> 8) * 2^-24. */
static float ref_uniform24(const sq_rng_key *k, uint64_t i)
{
    philox4x32_ctr_t c = {{(uint32_t)(i / 4), (uint32_t)(i / 4 >> 32), k->step,
                           (k->worker << 8) | k->site}};
    philox4x32_key_t key = {{(uint32_t)k->seed, (uint32_t)(k->seed >> 32)}};
    philox4x32_ctr_t r = philox4x32_R(10, c, key);
    return (float)(r.v[i % 4] >> 8) * 0x1p-24f;
}

static float to_dtype(float v, sq_scale_dtype dt)
{
    if (dt == SQ_SCALE_BF16) return sq_bf16_to_f32(sq_f32_to_bf16(v));
    if (dt == SQ_SCALE_FP16) return sq_f16_to_f32(sq_f32_to_f16(v));
    return v;
}

static void ref_hadamard(float *x, uint64_t n, int h)
{
    for (uint64_t b = 0; b + (uint64_t)h <= n; b += (uint64_t)h)
        for (int st = 1; st < h; st *= 2)
            for (int j = 0; j < h; j++)
                if (!(j & st)) {
                    float a = x[b + j], c = x[b + j + st];
                    x[b + j] = a + c;
                    x[b + j + st] = a - c;
                }
}

/* Quantizes x[0..n) (already transformed if the codec says so) into codes,
** scales and offsets (offsets as floats, for min-max). */
static void ref_quantize(const sq_codec *c, const float *x, uint64_t n, const sq_rng_key *k,
                         uint8_t *codes, float *scales, float *offsets)
{
    int b = c->bits;
    float qm, qlo, qhi;
    if (c->kind == SQ_KIND_MINMAX) {
        qm = (float)((1 << b) - 1);
        qlo = 0.0f;
        qhi = qm;
    } else if (c->levels == SQ_LEVELS_DEEPSPEED) {
        qm = (float)(1 << (b - 1));
        qlo = -qm;
        qhi = qm - 1.0f;
    } else {
        qm = (float)((1 << (b - 1)) - 1);
        qlo = -qm;
        qhi = qm;
    }
    memset(codes, 0, sq_codec_code_bytes(c, n));
    for (uint64_t g0 = 0; g0 < n; g0 += c->group) {
        uint64_t gl = n - g0 < c->group ? n - g0 : c->group, gi = g0 / c->group;
        float a = 0.0f, lo = x[g0], hi = x[g0];
        for (uint64_t j = 0; j < gl; j++) {
            float v = x[g0 + j];
            if (fabsf(v) > a) a = fabsf(v);
            if (v < lo) lo = v;
            if (v > hi) hi = v;
        }
        float m, s, off = 0.0f, lift = 1.0f;
        if (c->kind == SQ_KIND_SYM) {
            if (a == 0.0f) {
                m = 1.0f;
                s = 1.0f;
            } else {
                if (a < 0x1p-64f) lift = 0x1p64f;
                m = qm / (a * lift);
                s = a / qm;
            }
        } else {
            off = to_dtype(lo, c->scale);
            float r = hi - off;
            if (r <= 0.0f) {
                m = 1.0f;
                s = 1.0f;
            } else {
                if (r < 0x1p-64f) lift = 0x1p64f;
                m = qm / (r * lift);
                s = r / qm;
            }
            offsets[gi] = off;
        }
        scales[gi] = to_dtype(s, c->scale);
        for (uint64_t j = 0; j < gl; j++) {
            uint64_t i = g0 + j;
            float v = ((x[i] - off) * lift) * m, q;
            if (c->round == SQ_ROUND_SR) {
                float f = floorf(v);
                q = ref_uniform(k, i) < v - f ? f + 1.0f : f;
            } else {
                q = rintf(v);
            }
            if (q < qlo) q = qlo;
            if (q > qhi) q = qhi;
            uint32_t field = (uint32_t)(int)q & ((1u << b) - 1u);
            for (int t = 0; t < b; t++) {
                uint64_t bit = i * (uint64_t)b + (uint64_t)t;
                if ((field >> (b - 1 - t)) & 1u) codes[bit / 8] |= (uint8_t)(0x80u >> (bit % 8));
            }
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Inputs                                                                   */
/* ------------------------------------------------------------------------ */

/* Gradient-like values with outliers, exact zeros, denormals and a constant
** run, from an integer recipe. */
static void make_input(float *x, uint64_t n, uint32_t salt)
{
    uint32_t s = 2463534242u ^ salt;
    for (uint64_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        float v = ((float)(s >> 8) * 0x1p-24f - 0.5f) * 1e-3f;
        if (i % 13 == 0) v *= 100.0f;
        if (i % 101 == 5) v = 0.0f;
        if (i % 211 == 7) v = 1e-40f;
        if (i >= 40 && i < 48) v = 0.25f;
        x[i] = v;
    }
}

static const char *const specs[] = {
    "",
    "round=rtn",
    "kind=minmax,bits=3,group=7",
    "hadamard=32,bits=8",
    "kind=minmax,hadamard=1024,group=4096,scale=bf16",
    "levels=deepspeed,bits=1,group=1",
    "scale=fp16,bits=5,group=33,round=rtn",
    "bits=2,group=1,hadamard=2",
    "kind=minmax,bits=7,group=100000,round=rtn,scale=fp16",
    "bits=6,group=3,hadamard=128,levels=deepspeed",
    "kind=minmax,bits=8,group=128,round=sr,hadamard=32",
    "kind=minmax,bits=1,group=64,round=sr",
};
#define N_SPECS (int)(sizeof specs / sizeof specs[0])
static const uint64_t sizes[] = {0, 1, 5, 17, 1000, 65537, 100003};
#define N_SIZES (int)(sizeof sizes / sizeof sizes[0])

static float meta_at(const void *arr, uint64_t g, sq_scale_dtype dt)
{
    if (dt == SQ_SCALE_FP32) return ((const float *)arr)[g];
    uint16_t h = ((const uint16_t *)arr)[g];
    return dt == SQ_SCALE_BF16 ? sq_bf16_to_f32(h) : sq_f16_to_f32(h);
}

/* One codec x size: the library at 1, 2 and 3 threads against the reference. */
START_TEST(test_quantize_matches_reference)
{
    int si = _i / N_SIZES, ni = _i % N_SIZES;
    sq_codec c;
    char err[256];
    ck_assert_msg(sq_codec_parse(specs[si], &c, err, sizeof err) == SQ_OK, "%s", err);
    uint64_t n = sizes[ni];
    float *x = malloc(n * sizeof(float) + 4), *xt = malloc(n * sizeof(float) + 4);
    make_input(x, n, (uint32_t)_i);
    memcpy(xt, x, n * sizeof(float));
    if (c.hadamard) ref_hadamard(xt, n, c.hadamard);
    sq_rng_key key = {0x0123456789abcdefull, 7, 3, 2};
    uint64_t cb = sq_codec_code_bytes(&c, n), ng = sq_codec_groups(&c, n);
    uint8_t *codes = calloc(cb + 1, 1);
    float *scales = calloc(ng + 1, sizeof(float)), *offsets = calloc(ng + 1, sizeof(float));
    ref_quantize(&c, xt, n, &key, codes, scales, offsets);
    for (int th = 1; th <= 3; th++) {
        sq_set_threads(th);
        sq_qbuf q;
        ck_assert_int_eq(sq_qbuf_alloc(&c, n, &q), SQ_OK);
        ck_assert_int_eq(sq_quantize(&c, x, n, &key, &q), SQ_OK);
        for (uint64_t b = 0; b < cb; b++)
            ck_assert_msg(q.codes[b] == codes[b], "%s n=%llu threads=%d: code byte %llu is %02x, "
                          "reference %02x", specs[si], (unsigned long long)n, th,
                          (unsigned long long)b, q.codes[b], codes[b]);
        for (uint64_t g = 0; g < ng; g++) {
            float s = meta_at(q.scales, g, c.scale);
            ck_assert_msg(memcmp(&s, &scales[g], 4) == 0, "%s n=%llu: scale %llu is %a, ref %a",
                          specs[si], (unsigned long long)n, (unsigned long long)g, s, scales[g]);
            if (c.kind == SQ_KIND_MINMAX) {
                float o = meta_at(q.offsets, g, c.scale);
                ck_assert_msg(memcmp(&o, &offsets[g], 4) == 0, "%s: offset %llu is %a, ref %a",
                              specs[si], (unsigned long long)g, o, offsets[g]);
            }
        }
        sq_qbuf_free(&q);
    }
    sq_set_threads(0);
    free(x);
    free(xt);
    free(codes);
    free(scales);
    free(offsets);
}
END_TEST

/* The batched uniforms against Random123 one block at a time, including
** unaligned starts and indices beyond 2^32. */
START_TEST(test_uniform_n_matches_random123)
{
    sq_rng_key key = {0xfedcba9876543210ull, 123456, 0xabcdef, 200};
    const uint64_t firsts[] = {0, 1, 3, 4, 7, 4094, (1ull << 32) - 6, (1ull << 34) + 1,
                               (1ull << 35) + 5};
    float u[1000];
    for (size_t f = 0; f < sizeof firsts / sizeof firsts[0]; f++) {
        sq_uniform_n(&key, firsts[f], 1000, u);
        for (uint64_t j = 0; j < 1000; j++) {
            float r = ref_uniform(&key, firsts[f] + j);
            ck_assert_msg(memcmp(&u[j], &r, 4) == 0, "first=%llu j=%llu: %a vs %a",
                          (unsigned long long)firsts[f], (unsigned long long)j, u[j], r);
            ck_assert_float_eq(sq_uniform(&key, firsts[f] + j), r);
        }
        sq_uniform24_n(&key, firsts[f], 1000, u);
        for (uint64_t j = 0; j < 1000; j++) {
            float r = ref_uniform24(&key, firsts[f] + j);
            ck_assert_msg(memcmp(&u[j], &r, 4) == 0, "24-bit: first=%llu j=%llu: %a vs %a",
                          (unsigned long long)firsts[f], (unsigned long long)j, u[j], r);
            ck_assert_float_eq(sq_uniform24(&key, firsts[f] + j), r);
        }
    }
}
END_TEST

static Suite *reference_suite(void)
{
    Suite *s = suite_create("reference");
    TCase *tc = tcase_create("bytes");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_quantize_matches_reference, 0, N_SPECS * N_SIZES);
    tcase_add_test(tc, test_uniform_n_matches_random123);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return sqt_run(reference_suite());
}
