/*
** check_hadamard.c -- the blockwise Sylvester-Hadamard transform.
**
** Three kinds of expectation: exact algebra on small integers (H H = h I,
** and H x = the explicit matrix product, both exact in fp32 when every
** partial sum is an integer below 2^24); a rounding-error bound for the
** inverse on random floats; and the bit-exact stage order of the contract,
** against a butterfly written out here from the documented order.
*/
#include "shardq/codec.h"
#include "check_util.h"

/* ------------------------------------------------------------------------ */
/* References                                                               */
/* ------------------------------------------------------------------------ */

/* Sylvester matrix entry: H[i][j] = (-1)^popcount(i & j). */
static int syl(int i, int j) { return __builtin_popcount((unsigned)(i & j)) & 1 ? -1 : 1; }

/* The documented butterfly in fp32, one block: stages of stride 1, 2, ...,
** h/2; for each j with bit `stride` clear, (x[j], x[j+stride]) becomes
** (a + b, a - b). */
static void ref_block(float *x, int h)
{
    for (int st = 1; st < h; st *= 2)
        for (int j = 0; j < h; j++)
            if (!(j & st)) {
                float a = x[j], b = x[j + st];
                x[j] = a + b;
                x[j + st] = a - b;
            }
}

/* The same with the stages in the opposite order (h/2 first): equal in
** exact arithmetic, different in fp32. Used to show the bit-exact test can
** tell orders apart. */
static void ref_block_reversed(float *x, int h)
{
    for (int st = h / 2; st >= 1; st /= 2)
        for (int j = 0; j < h; j++)
            if (!(j & st)) {
                float a = x[j], b = x[j + st];
                x[j] = a + b;
                x[j + st] = a - b;
            }
}

static float *alloc_floats(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    ck_assert_ptr_nonnull(p);
    return p;
}

/* ------------------------------------------------------------------------ */
/* Exact algebra                                                            */
/* ------------------------------------------------------------------------ */

/* h = 2^(_i): integers in [-8, 8]; after one transform |y| <= 8h <= 8192,
** after two |z| <= 8h^2 <= 2^23, all exact in fp32, so H(H(x)) = h x
** exactly, and the inverse gives x back exactly. Three full blocks. */
START_TEST(test_hh_is_h_identity)
{
    int h = 1 << _i;
    size_t n = 3 * (size_t)h;
    float *x = alloc_floats(n), *y = alloc_floats(n);
    sqt_rng r = {(uint64_t)h};
    for (size_t i = 0; i < n; i++) x[i] = (float)((int)(sqt_next(&r) % 17) - 8);
    memcpy(y, x, n * sizeof(float));
    ck_assert_int_eq(sq_hadamard(y, n, h), SQ_OK);
    ck_assert_int_eq(sq_hadamard(y, n, h), SQ_OK);
    for (size_t i = 0; i < n; i++)
        SQT_CHECK(y[i] == (float)h * x[i], "h %d element %zu: %g, want %g", h, i, (double)y[i],
                  (double)((float)h * x[i]));
    memcpy(y, x, n * sizeof(float));
    ck_assert_int_eq(sq_hadamard(y, n, h), SQ_OK);
    ck_assert_int_eq(sq_hadamard_inverse(y, n, h), SQ_OK);
    SQT_ASSERT_FLOATS_BITS(y, x, n, "inverse of the transform of small integers");
    free(x);
    free(y);
}
END_TEST

/* Against the explicit matrix-vector product in double, for h <= 64:
** integer inputs (exact on both sides, so equal), block by block. */
START_TEST(test_matrix_product)
{
    int h = 1 << _i;
    size_t n = 2 * (size_t)h;
    float *x = alloc_floats(n), *y = alloc_floats(n);
    sqt_rng r = {99u + (uint64_t)h};
    for (size_t i = 0; i < n; i++) x[i] = (float)((int)(sqt_next(&r) % 2001) - 1000);
    memcpy(y, x, n * sizeof(float));
    ck_assert_int_eq(sq_hadamard(y, n, h), SQ_OK);
    for (size_t b = 0; b < n; b += (size_t)h)
        for (int i = 0; i < h; i++) {
            double want = 0;
            for (int j = 0; j < h; j++) want += syl(i, j) * (double)x[b + (size_t)j];
            SQT_CHECK((double)y[b + (size_t)i] == want, "h %d block %zu row %d: %g, want %g", h,
                      b / (size_t)h, i, (double)y[b + (size_t)i], want);
        }
    free(x);
    free(y);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Rounding                                                                 */
/* ------------------------------------------------------------------------ */

/* Inverse round trip on random floats. With k = log2(h) stages and
** gamma_k = k u / (1 - k u), u = 2^-24, the forward transform's error on
** each output is at most gamma_k * |x|_1 (|x|_1 the block's L1 norm: every
** partial sum is bounded by it); transforming the perturbed vector adds at
** most h gamma_k |x|_1 from the perturbation and gamma_k h (1 + gamma_k)
** |x|_1 from its own rounding; dividing by h (exact, a power of two) leaves
**     |x'_i - x_i| <= (2 + gamma_k) gamma_k |x|_1,
** which we check with (2.01) gamma_k. Also checks the bound is not vacuous:
** a transform with a wrong normalisation or a lost stage breaks it by
** orders of magnitude. */
START_TEST(test_inverse_roundtrip_bound)
{
    int h = 1 << _i, k = _i;
    size_t tail = h > 3 ? 3 : (size_t)h - 1, n = 4 * (size_t)h + tail;
    float *x = alloc_floats(n), *y = alloc_floats(n);
    sqt_fill(x, n, 500u + (uint64_t)h);
    memcpy(y, x, n * sizeof(float));
    ck_assert_int_eq(sq_hadamard(y, n, h), SQ_OK);
    ck_assert_int_eq(sq_hadamard_inverse(y, n, h), SQ_OK);
    double u = 0x1p-24, gamma = k * u / (1 - k * u);
    for (size_t b = 0; b + (size_t)h <= n; b += (size_t)h) {
        double l1 = 0;
        for (int j = 0; j < h; j++) l1 += fabs((double)x[b + (size_t)j]);
        double bound = 2.01 * gamma * l1;
        for (int j = 0; j < h; j++) {
            size_t i = b + (size_t)j;
            double err = fabs((double)y[i] - (double)x[i]);
            SQT_CHECK(err <= bound, "h %d element %zu: |%a - %a| = %g > %g", h, i, (double)y[i],
                      (double)x[i], err, bound);
        }
    }
    /* the final partial block is untouched both ways */
    SQT_ASSERT_FLOATS_BITS(y + n - tail, x + n - tail, tail, "partial block after the round trip");
    free(x);
    free(y);
}
END_TEST

/* The stage order is part of the bit-exact contract: random floats must give
** exactly the documented butterfly's bits, for every h and on every block
** (including blocks at odd offsets into the buffer). */
START_TEST(test_bit_exact_order)
{
    int h = 1 << _i;
    size_t n = 5 * (size_t)h + (size_t)h / 2 + 1;
    float *x = alloc_floats(n), *y = alloc_floats(n), *want = alloc_floats(n);
    sqt_fill(x, n, 900u + (uint64_t)h);
    memcpy(y, x, n * sizeof(float));
    memcpy(want, x, n * sizeof(float));
    for (size_t b = 0; b + (size_t)h <= n; b += (size_t)h) ref_block(want + b, h);
    ck_assert_int_eq(sq_hadamard(y, n, h), SQ_OK);
    SQT_ASSERT_FLOATS_BITS(y, want, n, "transform vs the documented butterfly");

    /* inverse: the same butterfly, then times 1/h */
    memcpy(y, x, n * sizeof(float));
    memcpy(want, x, n * sizeof(float));
    for (size_t b = 0; b + (size_t)h <= n; b += (size_t)h) {
        ref_block(want + b, h);
        for (int j = 0; j < h; j++) want[b + (size_t)j] *= 1.0f / (float)h;
    }
    ck_assert_int_eq(sq_hadamard_inverse(y, n, h), SQ_OK);
    SQT_ASSERT_FLOATS_BITS(y, want, n, "inverse vs the documented butterfly");

    /* for h >= 4 the order matters on this data: the reversed order differs
    ** somewhere, so the comparison above does discriminate */
    if (h >= 4) {
        memcpy(want, x, n * sizeof(float));
        memcpy(y, x, n * sizeof(float));
        for (size_t b = 0; b + (size_t)h <= n; b += (size_t)h) {
            ref_block(want + b, h);
            ref_block_reversed(y + b, h);
        }
        ck_assert_msg(memcmp(y, want, n * sizeof(float)) != 0,
                      "h %d: stage order made no difference on this data", h);
    }
    free(x);
    free(y);
    free(want);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Blocks, sizes, errors                                                    */
/* ------------------------------------------------------------------------ */

/* A partial final block, and a whole buffer shorter than h, are left
** bit-identical: filled with NaN payloads and -0 (which any arithmetic
** would disturb) to prove they are not even touched. */
START_TEST(test_partial_untouched)
{
    static const int hs[] = {2, 4, 32, 1024};
    for (size_t t = 0; t < sizeof hs / sizeof hs[0]; t++) {
        int h = hs[t];
        size_t tail = (size_t)h - 1, n = 2 * (size_t)h + tail;
        float *x = alloc_floats(n), *y = alloc_floats(n);
        sqt_fill(x, 2 * (size_t)h, 3);
        for (size_t i = 0; i < tail; i++)
            x[2 * (size_t)h + i] = i % 2 ? -0.0f : sqt_float(0x7fa00000u + (uint32_t)i);
        memcpy(y, x, n * sizeof(float));
        ck_assert_int_eq(sq_hadamard(y, n, h), SQ_OK);
        SQT_ASSERT_FLOATS_BITS(y + 2 * h, x + 2 * h, tail, "partial block (forward)");
        memcpy(y, x, n * sizeof(float));
        ck_assert_int_eq(sq_hadamard_inverse(y, n, h), SQ_OK);
        SQT_ASSERT_FLOATS_BITS(y + 2 * h, x + 2 * h, tail, "partial block (inverse)");
        /* n < h: nothing at all changes */
        memcpy(y, x + 2 * h, tail * sizeof(float));
        ck_assert_int_eq(sq_hadamard(y, tail, h), SQ_OK);
        SQT_ASSERT_FLOATS_BITS(y, x + 2 * h, tail, "n < h (forward)");
        ck_assert_int_eq(sq_hadamard_inverse(y, tail, h), SQ_OK);
        SQT_ASSERT_FLOATS_BITS(y, x + 2 * h, tail, "n < h (inverse)");
        free(x);
        free(y);
    }
}
END_TEST

/* Blocks are independent and aligned to the buffer start: transforming the
** whole buffer equals transforming each block on its own. */
START_TEST(test_blocks_independent)
{
    int h = 64;
    size_t n = 10 * 64 + 17;
    float *x = alloc_floats(n), *y = alloc_floats(n);
    sqt_fill(x, n, 11);
    memcpy(y, x, n * sizeof(float));
    ck_assert_int_eq(sq_hadamard(y, n, h), SQ_OK);
    for (size_t b = 0; b + 64 <= n; b += 64) ck_assert_int_eq(sq_hadamard(x + b, 64, h), SQ_OK);
    SQT_ASSERT_FLOATS_BITS(y, x, n, "whole buffer vs block by block");
    free(x);
    free(y);
}
END_TEST

START_TEST(test_invalid_sizes)
{
    static const int bad[] = {0, 1, 3, 6, 12, 1000, 1536, 2048, 4096, -2, -1024};
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8];
    for (size_t t = 0; t < sizeof bad / sizeof bad[0]; t++) {
        memcpy(y, x, sizeof x);
        ck_assert_msg(sq_hadamard(y, 8, bad[t]) == SQ_ERR_ARG, "h = %d accepted", bad[t]);
        ck_assert_msg(sq_hadamard_inverse(y, 8, bad[t]) == SQ_ERR_ARG, "h = %d accepted", bad[t]);
        SQT_ASSERT_FLOATS_BITS(y, x, 8, "buffer changed by a rejected call");
    }
    ck_assert_int_eq(sq_hadamard(NULL, 8, 4), SQ_ERR_ARG);
    ck_assert_int_eq(sq_hadamard_inverse(NULL, 8, 4), SQ_ERR_ARG);
    ck_assert_int_eq(sq_hadamard(NULL, 0, 4), SQ_OK); /* nothing to do */
    ck_assert_int_eq(sq_hadamard(y, 0, 1024), SQ_OK);
}
END_TEST

/* The transform of a buffer large enough to run in parallel gives the same
** bits for any thread count. */
START_TEST(test_threads)
{
    size_t n = (1u << 18) + 5;
    float *x = alloc_floats(n), *a = alloc_floats(n), *b = alloc_floats(n);
    sqt_fill(x, n, 21);
    static const int threads[] = {1, 2, 3, 4};
    for (size_t t = 0; t < 4; t++) {
        sq_set_threads(threads[t]);
        memcpy(b, x, n * sizeof(float));
        ck_assert_int_eq(sq_hadamard(b, n, 256), SQ_OK);
        ck_assert_int_eq(sq_hadamard_inverse(b, n, 32), SQ_OK);
        if (t == 0) memcpy(a, b, n * sizeof(float));
        else SQT_ASSERT_FLOATS_BITS(b, a, n, "thread count changed the transform");
    }
    sq_set_threads(0);
    free(x);
    free(a);
    free(b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hadamard");
    TCase *tc = tcase_create("hadamard");
    tcase_add_loop_test(tc, test_hh_is_h_identity, 1, 11);   /* h = 2 .. 1024 */
    tcase_add_loop_test(tc, test_matrix_product, 1, 7);      /* h = 2 .. 64 */
    tcase_add_loop_test(tc, test_inverse_roundtrip_bound, 1, 11);
    tcase_add_loop_test(tc, test_bit_exact_order, 1, 11);
    tcase_add_test(tc, test_partial_untouched);
    tcase_add_test(tc, test_blocks_independent);
    tcase_add_test(tc, test_invalid_sizes);
    tcase_add_test(tc, test_threads);
    suite_add_tcase(s, tc);
    return sqt_run(s);
}
