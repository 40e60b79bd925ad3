/*
** check_philox.c -- the Philox4x32-10 generator and the uniforms of
** stochastic rounding.
**
** Known answers: the three "philox4x32 10" lines of Random123's kat_vectors
** file (counter, key -> output, as published with Random123 by D. E. Shaw
** Research). The same numbers are recomputed by the independent pure-Python
** Philox in tests/golden/make_golden.py (written from the SC'11 paper's
** definition), which refuses to run if they disagree; so they are not taken
** from the code under test.
**
** The rest checks the uniforms against the documented layouts, built here
** by hand on top of the (now validated) raw generator, key = { seed low,
** seed high }: stochastic rounding's sq_uniform, counter = { i/8 low, i/8
** high, step, (worker << 8) | site }, 16-bit half i % 8 of the output words
** (most significant first), u = (half + 1/2) * 2^-16; and sq_uniform24,
** counter = { i/4 low, i/4 high, ... }, word i % 4, u = (word >> 8) * 2^-24.
*/
#include "shardq/codec.h"
#include "check_util.h"

static const struct {
    uint32_t ctr[4], key[2], out[4];
} kat[] = {
    {{0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u}, {0x00000000u, 0x00000000u},
     {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
    {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu},
     {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
    {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u},
     {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
};

START_TEST(test_kat)
{
    uint32_t out[4];
    sq_philox4x32_10(kat[_i].ctr, kat[_i].key, out);
    for (int j = 0; j < 4; j++)
        ck_assert_msg(out[j] == kat[_i].out[j], "KAT %d word %d: got %08x, want %08x", _i, j,
                      out[j], kat[_i].out[j]);
}
END_TEST

/* The four output words of block blk. */
static void layout_block(const sq_rng_key *k, uint64_t blk, uint32_t out[4])
{
    uint32_t ctr[4] = {(uint32_t)blk, (uint32_t)(blk >> 32), k->step, (k->worker << 8) | k->site};
    uint32_t key[2] = {(uint32_t)k->seed, (uint32_t)(k->seed >> 32)};
    sq_philox4x32_10(ctr, key, out);
}

/* The 16-bit half j (0..7, most significant first) of a block's words. */
static uint32_t half16(const uint32_t out[4], int j)
{
    return j % 2 ? out[j / 2] & 0xffffu : out[j / 2] >> 16;
}

static float sr_u(uint32_t h) { return ((float)h + 0.5f) * 0x1p-16f; }

/* Stochastic rounding's uniform of element i, built from the documented
** layout. */
static float layout_uniform(const sq_rng_key *k, uint64_t i)
{
    uint32_t out[4];
    layout_block(k, i / 8, out);
    return sr_u(half16(out, (int)(i % 8)));
}

/* The 24-bit uniform of element i. */
static float layout_uniform24(const sq_rng_key *k, uint64_t i)
{
    uint32_t out[4];
    layout_block(k, i / 4, out);
    return (float)(out[i % 4] >> 8) * 0x1p-24f;
}

static const sq_rng_key keys[] = {
    {0, 0, 0, 0},
    {0x0123456789abcdefull, 7, 3, 2},
    {0xffffffffffffffffull, 0xffffffffu, (1u << 24) - 1, 255},
    {0xdeadbeef00000000ull, 123456, 0x00abcdefu, 0x5a},
};

static const uint64_t indices[] = {
    0, 1, 2, 3, 4, 5, 6, 7, 8, 1023, 4096,
    0xfffffffcull, 0xffffffffull, 0x100000000ull,  /* i itself crosses 2^32; i/8 does not */
    0x3fffffffcull, 0x3ffffffffull,                /* i/4 = 2^32 - 1: high word still 0 */
    0x400000000ull, 0x400000003ull, 0x400000005ull, /* i/4 = 2^32, 2^32 + 1: high word 1 */
    0x7fffffff8ull, 0x7ffffffffull,                /* i/8 = 2^32 - 1 */
    0x800000000ull, 0x800000007ull, 0x80000000bull, /* i/8 = 2^32, 2^32 + 1 */
    0x123456789abcdef0ull, 0xfffffffffffffffdull, 0xffffffffffffffffull,
};

START_TEST(test_uniform_layout)
{
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        for (size_t t = 0; t < sizeof indices / sizeof indices[0]; t++) {
            float got = sq_uniform(&keys[k], indices[t]);
            float want = layout_uniform(&keys[k], indices[t]);
            SQT_CHECK(sqt_bits(got) == sqt_bits(want), "key %zu, i = 0x%llx: got %a, want %a", k,
                      (unsigned long long)indices[t], (double)got, (double)want);
            got = sq_uniform24(&keys[k], indices[t]);
            want = layout_uniform24(&keys[k], indices[t]);
            SQT_CHECK(sqt_bits(got) == sqt_bits(want), "24-bit: key %zu, i = 0x%llx: got %a, want %a",
                      k, (unsigned long long)indices[t], (double)got, (double)want);
        }
}
END_TEST

/* Elements 8b .. 8b+7 take the eight 16-bit halves of one block, in order,
** high half of each word first. */
START_TEST(test_uniform_half_selection)
{
    const sq_rng_key k = {0x0123456789abcdefull, 7, 3, 2};
    for (uint64_t b = 0; b < 50; b++) {
        uint32_t ctr[4] = {(uint32_t)b, 0, 7, (3u << 8) | 2u}, key[2] = {0x89abcdefu, 0x01234567u};
        uint32_t out[4];
        sq_philox4x32_10(ctr, key, out);
        for (int j = 0; j < 8; j++) {
            float u = sq_uniform(&k, 8 * b + (uint64_t)j);
            SQT_CHECK(u == sr_u(half16(out, j)), "block %llu half %d", (unsigned long long)b, j);
            for (int o = 0; o < 8; o++)
                if (o != j && half16(out, o) != half16(out, j))
                    SQT_CHECK(u != sr_u(half16(out, o)), "block %llu half %d", (unsigned long long)b, j);
        }
    }
}
END_TEST

/* sq_uniform24: elements 4b .. 4b+3 take the four words of one block, in
** order. */
START_TEST(test_uniform_word_selection)
{
    const sq_rng_key k = {0x0123456789abcdefull, 7, 3, 2};
    for (uint64_t b = 0; b < 50; b++) {
        uint32_t ctr[4] = {(uint32_t)b, 0, 7, (3u << 8) | 2u}, key[2] = {0x89abcdefu, 0x01234567u};
        uint32_t out[4];
        sq_philox4x32_10(ctr, key, out);
        for (int j = 0; j < 4; j++) {
            float u = sq_uniform24(&k, 4 * b + (uint64_t)j);
            SQT_CHECK(u == (float)(out[j] >> 8) * 0x1p-24f, "block %llu word %d",
                      (unsigned long long)b, j);
            /* and not any of the other three words (they differ with
            ** overwhelming probability; make sure the test can tell) */
            for (int o = 0; o < 4; o++)
                if (o != j && (out[o] >> 8) != (out[j] >> 8))
                    SQT_CHECK(u != (float)(out[o] >> 8) * 0x1p-24f, "block %llu word %d", (unsigned long long)b, j);
        }
    }
}
END_TEST

/* The 64-bit seed goes into the key low word first; swapping the halves is
** a different stream. */
START_TEST(test_seed_split)
{
    const sq_rng_key k = {0x0123456789abcdefull, 0, 0, 0}, swapped = {0x89abcdef01234567ull, 0, 0, 0};
    uint32_t ctr[4] = {0, 0, 0, 0}, key[2] = {0x89abcdefu, 0x01234567u}, out[4];
    sq_philox4x32_10(ctr, key, out);
    ck_assert(sq_uniform(&k, 0) == sr_u(out[0] >> 16));
    ck_assert(sq_uniform(&k, 7) == sr_u(out[3] & 0xffffu));
    int differ = 0;
    for (uint64_t i = 0; i < 16; i++) differ += sq_uniform(&k, i) != sq_uniform(&swapped, i);
    ck_assert_int_ge(differ, 12);
    /* the high half matters: seeds that differ only there give other numbers */
    const sq_rng_key hi = {0x0123456789abcdefull ^ (1ull << 40), 0, 0, 0};
    differ = 0;
    for (uint64_t i = 0; i < 16; i++) differ += sq_uniform(&k, i) != sq_uniform(&hi, i);
    ck_assert_int_ge(differ, 12);
}
END_TEST

/* Counter word 3 is (worker << 8) | site, word 2 the step: check each field
** lands where documented by comparing with hand-built counters, and that
** (worker 1, site 0) and (worker 0, site 1) are different streams. */
START_TEST(test_worker_site_step_packing)
{
    const sq_rng_key k = {42, 0x01020304u, 0x00abcdefu, 0x5au};
    uint32_t ctr[4] = {9, 0, 0x01020304u, 0xabcdef5au}, key[2] = {42, 0}, out[4];
    sq_philox4x32_10(ctr, key, out);
    for (int j = 0; j < 8; j++) ck_assert(sq_uniform(&k, 72 + (uint64_t)j) == sr_u(half16(out, j)));
    for (int j = 0; j < 4; j++)
        ck_assert(sq_uniform24(&k, 36 + (uint64_t)j) == (float)(out[j] >> 8) * 0x1p-24f);

    const sq_rng_key w1 = {42, 0, 1, 0}, s1 = {42, 0, 0, 1}, s0 = {42, 0, 0, 0}, st1 = {42, 1, 0, 0};
    int dw = 0, ds = 0, dst = 0;
    for (uint64_t i = 0; i < 16; i++) {
        dw += sq_uniform(&w1, i) != sq_uniform(&s1, i);
        ds += sq_uniform(&s1, i) != sq_uniform(&s0, i);
        dst += sq_uniform(&st1, i) != sq_uniform(&s0, i);
    }
    ck_assert_int_ge(dw, 12);
    ck_assert_int_ge(ds, 12);
    ck_assert_int_ge(dst, 12);
    /* worker 1 = counter word 3 = 0x100 */
    uint32_t c2[4] = {0, 0, 0, 0x100u}, k2[2] = {42, 0};
    sq_philox4x32_10(c2, k2, out);
    ck_assert(sq_uniform(&w1, 1) == sr_u(out[0] & 0xffffu));
    ck_assert(sq_uniform24(&w1, 1) == (float)(out[1] >> 8) * 0x1p-24f);
}
END_TEST

/* Stochastic rounding's u is an odd multiple of 2^-17 in (0, 1) and
** sq_uniform24's a multiple of 2^-24 in [0, 1); over 2^17 values the mean
** is within 0.01 of 1/2 (the standard error is 0.289 / 362 = 8e-4, so 0.01
** is more than 12 standard errors: a correct generator never fails) and
** every sixteenth of [0, 1) is hit about equally (each bin expects 8192; a
** bin outside [7000, 9400] is over 13 standard deviations off). */
START_TEST(test_uniform_range)
{
    const sq_rng_key k = {0x0123456789abcdefull, 7, 3, 2};
    enum { N = 1 << 17 };
    static float u[N];
    const int sr = _i == 0;
    if (sr) sq_uniform_n(&k, 0, N, u);
    else sq_uniform24_n(&k, 0, N, u);
    double sum = 0;
    unsigned bins[16] = {0};
    for (size_t i = 0; i < N; i++) {
        SQT_CHECK(u[i] >= 0.0f && u[i] < 1.0f, "u[%zu] = %a", i, (double)u[i]);
        float scaled = sr ? (u[i] * 0x1p17f - 1.0f) * 0.5f : u[i] * 0x1p24f;
        SQT_CHECK(scaled == floorf(scaled), "u[%zu] = %a is off its grid", i, (double)u[i]);
        sum += u[i];
        bins[(int)(u[i] * 16)]++;
    }
    ck_assert_msg(fabs(sum / N - 0.5) < 0.01, "mean %g", sum / N);
    for (int b = 0; b < 16; b++)
        ck_assert_msg(bins[b] > 7000 && bins[b] < 9400, "bin %d: %u", b, bins[b]);
}
END_TEST

/* sq_uniform_n(first, n)[j] == sq_uniform(first + j) for starts that are
** and are not block aligned, lengths around the block and batch sizes, and a
** run whose block number crosses 2^32 (the counter's high word). */
START_TEST(test_uniform_n)
{
    const sq_rng_key k = {0xfedcba9876543210ull, 99, 1000, 3};
    const uint64_t firsts[] = {0, 1, 2, 3, 5, 7, 64, 4 * 0xfffffff0ull + 1, 8 * 0xfffffff0ull + 3,
                               0xfffffffffffff000ull};
    const uint64_t ns[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 63, 64, 65, 127, 128, 129, 255, 256, 257, 300, 1031};
    float *u = malloc(1032 * sizeof(float));
    ck_assert_ptr_nonnull(u);
    for (size_t f = 0; f < sizeof firsts / sizeof firsts[0]; f++)
        for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
            u[ns[t]] = -1.0f; /* guard: nothing past n is written */
            sq_uniform_n(&k, firsts[f], ns[t], u);
            for (uint64_t j = 0; j < ns[t]; j++)
                SQT_CHECK(sqt_bits(u[j]) == sqt_bits(layout_uniform(&k, firsts[f] + j)),
                          "first 0x%llx n %llu j %llu", (unsigned long long)firsts[f],
                          (unsigned long long)ns[t], (unsigned long long)j);
            ck_assert(u[ns[t]] == -1.0f);
            sq_uniform24_n(&k, firsts[f], ns[t], u);
            for (uint64_t j = 0; j < ns[t]; j++)
                SQT_CHECK(sqt_bits(u[j]) == sqt_bits(layout_uniform24(&k, firsts[f] + j)),
                          "24-bit: first 0x%llx n %llu j %llu", (unsigned long long)firsts[f],
                          (unsigned long long)ns[t], (unsigned long long)j);
            ck_assert(u[ns[t]] == -1.0f);
        }
    free(u);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("philox");
    TCase *tk = tcase_create("kat");
    tcase_add_loop_test(tk, test_kat, 0, (int)(sizeof kat / sizeof kat[0]));
    suite_add_tcase(s, tk);
    TCase *tu = tcase_create("uniform");
    tcase_add_test(tu, test_uniform_layout);
    tcase_add_test(tu, test_uniform_half_selection);
    tcase_add_test(tu, test_uniform_word_selection);
    tcase_add_test(tu, test_seed_split);
    tcase_add_test(tu, test_worker_site_step_packing);
    tcase_add_loop_test(tu, test_uniform_range, 0, 2);
    tcase_add_test(tu, test_uniform_n);
    suite_add_tcase(s, tu);
    return sqt_run(s);
}
