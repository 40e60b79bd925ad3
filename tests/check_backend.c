/*
** check_backend.c -- the backend layer on every machine: the CPU backend is
** the C reference, its elementwise operations write the values and
** statuses backend.h promises, names are parsed and refused with reasons,
** memory moves between backends, workers are placed round-robin. (The CUDA backend's
** own tests are tests/check_gpu_codec.c.)
*/
#include "shardq/backend.h"
#include "backend/device.h"
#include "check_util.h"
#include "equiv.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The failing malloc below is a test, not a bug: under AddressSanitizer
** let it return NULL as libc's does. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

static sq_backend *open_ok(const char *name)
{
    sq_backend *be = NULL;
    sq_error err = {0};
    int rc = sq_backend_open(name, &be, &err);
    ck_assert_msg(rc == SQ_OK, "open %s: %s", name, err.msg);
    return be;
}

START_TEST(test_cpu_identity)
{
    sq_backend *be = open_ok("cpu");
    ck_assert_int_eq(sq_backend_kind_of(be), SQ_BACKEND_CPU);
    ck_assert_int_eq(sq_backend_device(be), -1);
    ck_assert_str_eq(sq_backend_name(be), "cpu");
    ck_assert_msg(strncmp(sq_backend_description(be), "cpu (", 5) == 0, "%s",
                  sq_backend_description(be));
    ck_assert_str_eq(sq_backend_error(be), "");
    sq_backend_close(be);
    sq_backend_close(NULL);
}
END_TEST

/* Each bad name gets a status and a sentence that names it. */
START_TEST(test_open_errors)
{
    struct {
        const char *name;
        const char *says;
    } bad[] = {
        {"gpu", "'gpu' is not a backend"},
        {"cuda:x", "'x' is not a device number"},
        {"cuda:", "'' is not a device number"},
        {"cuda:-1", "'-1' is not a device number"},
        {"cuda:1e3", "'1e3' is not a device number"},
        {"CPU", "'CPU' is not a backend"},
        {"", "'' is not a backend"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sq_backend *be = (sq_backend *)1;
        sq_error err = {0};
        ck_assert_int_eq(sq_backend_open(bad[i].name, &be, &err), SQ_ERR_ARG);
        ck_assert_ptr_null(be);
        ck_assert_msg(strstr(err.msg, bad[i].says), "'%s' gave: %s", bad[i].name, err.msg);
    }
    sq_backend *be;
    ck_assert_int_eq(sq_backend_open(NULL, &be, NULL), SQ_ERR_ARG);
}
END_TEST

/* Without a GPU "cuda" is refused with the probe's reason; with one, a
** device number past the last is. */
START_TEST(test_open_cuda)
{
    sq_backend *be = NULL;
    sq_error err = {0};
    int n = sq_device_count();
    if (n == 0) {
        ck_assert_int_eq(sq_backend_open("cuda", &be, &err), SQ_ERR_UNSUPPORTED);
        ck_assert_msg(strstr(err.msg, "no CUDA device") && strstr(err.msg, sq_device_unavailable_reason()),
                      "%s", err.msg);
        ck_assert_int_eq(sq_backend_open("cuda:3", &be, &err), SQ_ERR_UNSUPPORTED);
        ck_assert_msg(strstr(err.msg, "cuda:3"), "%s", err.msg);
    } else {
        char name[32];
        snprintf(name, sizeof name, "cuda:%d", n);
        ck_assert_int_eq(sq_backend_open(name, &be, &err), SQ_ERR_ARG);
        ck_assert_msg(strstr(err.msg, "no such device"), "%s", err.msg);
        be = open_ok("cuda");
        ck_assert_int_eq(sq_backend_kind_of(be), SQ_BACKEND_CUDA);
        ck_assert_str_eq(sq_backend_name(be), "cuda:0");
        sq_backend_close(be);
    }
}
END_TEST

/* The CPU backend's operations are the core's, byte for byte. */
START_TEST(test_cpu_ops)
{
    sq_backend *be = open_ok("cpu");
    const uint64_t n = 10007;
    sq_codec c;
    ck_assert_int_eq(sq_codec_parse("bits=4,group=128,round=sr,hadamard=32", &c, NULL, 0), SQ_OK);
    float *x = malloc(n * 4), *ref = malloc(n * 4), *a = malloc(n * 4), *b = malloc(n * 4);
    eq_fill(x, n, EQ_GRADIENT, 1);
    eq_fill(ref, n, EQ_GRADIENT, 2);
    sq_rng_key key = eq_key(5, 1);
    sq_qbuf q1, q2, qs[2];
    ck_assert_int_eq(sq_backend_qbuf_alloc(be, &c, n, &q1), SQ_OK);
    ck_assert_int_eq(sq_qbuf_alloc(&c, n, &q2), SQ_OK);
    uint64_t cb = sq_codec_code_bytes(&c, n), sb = sq_codec_scale_bytes(&c, n);

    ck_assert_int_eq(sq_backend_quantize(be, &c, x, n, &key, &q1), SQ_OK);
    ck_assert_int_eq(sq_quantize(&c, x, n, &key, &q2), SQ_OK);
    ck_assert_mem_eq(q1.codes, q2.codes, cb);
    ck_assert_mem_eq(q1.scales, q2.scales, sb);

    ck_assert_int_eq(sq_backend_quantize_diff(be, &c, x, ref, n, &key, &q1), SQ_OK);
    ck_assert_int_eq(sq_quantize_diff(&c, x, ref, n, &key, &q2), SQ_OK);
    ck_assert_mem_eq(q1.codes, q2.codes, cb);

    ck_assert_int_eq(sq_backend_dequantize(be, &c, &q1, n, a), SQ_OK);
    ck_assert_int_eq(sq_dequantize(&c, &q2, n, b), SQ_OK);
    ck_assert_mem_eq(a, b, n * 4);

    ck_assert_int_eq(sq_backend_dequantize_add(be, &c, &q1, ref, n, a), SQ_OK);
    ck_assert_int_eq(sq_dequantize_add(&c, &q2, ref, n, b), SQ_OK);
    ck_assert_mem_eq(a, b, n * 4);

    qs[0] = q1;
    qs[1] = q2;
    ck_assert_int_eq(sq_backend_dequant_sum(be, &c, qs, 2, n, a), SQ_OK);
    ck_assert_int_eq(sq_dequant_sum(&c, qs, 2, n, b), SQ_OK);
    ck_assert_mem_eq(a, b, n * 4);

    sq_qbuf r1, r2;
    ck_assert_int_eq(sq_backend_qbuf_alloc(be, &c, n, &r1), SQ_OK);
    ck_assert_int_eq(sq_qbuf_alloc(&c, n, &r2), SQ_OK);
    ck_assert_int_eq(sq_backend_dequant_sum_requant(be, &c, qs, 2, n, &c, &key, &r1), SQ_OK);
    ck_assert_int_eq(sq_dequant_sum_requant(&c, qs, 2, n, &c, &key, &r2), SQ_OK);
    ck_assert_mem_eq(r1.codes, r2.codes, cb);

    /* the same refusals as the core */
    x[99] = NAN;
    ck_assert_int_eq(sq_backend_quantize(be, &c, x, n, &key, &q1), SQ_ERR_NONFINITE);
    ck_assert_int_eq(sq_backend_quantize(be, &c, x, n, NULL, &q1), SQ_ERR_ARG);
    ck_assert_int_eq(sq_backend_dequant_sum(be, &c, qs, 0, n, a), SQ_ERR_ARG);

    sq_backend_qbuf_free(be, &q1);
    sq_backend_qbuf_free(be, &r1);
    sq_backend_qbuf_free(be, &q1); /* twice is harmless */
    sq_qbuf_free(&q2);
    sq_qbuf_free(&r2);
    free(x);
    free(ref);
    free(a);
    free(b);
    sq_backend_close(be);
}
END_TEST

/* The one family (sq_encode, sq_decode, sq_backend_encode and
** sq_backend_decode with the CPU backend or none) gives the bytes of the
** eight named operations it stands for. */
START_TEST(test_family)
{
    sq_backend *be = open_ok("cpu");
    const uint64_t n = 4099;
    sq_codec c;
    ck_assert_int_eq(sq_codec_parse_v2("bits=4,group=128,round=sr,hadamard=32", &c, NULL), SQ_OK);
    float *x = malloc(n * 4), *ref = malloc(n * 4), *a = malloc(n * 4), *b = malloc(n * 4);
    eq_fill(x, n, EQ_GRADIENT, 3);
    eq_fill(ref, n, EQ_GRADIENT, 4);
    sq_rng_key key = eq_key(9, 2);
    sq_qbuf qf, qn;
    ck_assert_int_eq(sq_qbuf_alloc(&c, n, &qf), SQ_OK);
    ck_assert_int_eq(sq_qbuf_alloc(&c, n, &qn), SQ_OK);
    const uint64_t cb = sq_codec_code_bytes(&c, n), sb = sq_codec_scale_bytes(&c, n);
    for (int v = 0; v < 4; v++) {
        const sq_dtype dt = v & 1 ? SQ_DTYPE_BF16 : SQ_DTYPE_FP32;
        const float *r = v & 2 ? ref : NULL;
        for (int side = 0; side < 3; side++) {
            int rc = side == 0   ? sq_encode(&c, dt, x, r, n, &key, &qf)
                     : side == 1 ? sq_backend_encode(NULL, &c, dt, x, r, n, &key, &qf)
                                 : sq_backend_encode(be, &c, dt, x, r, n, &key, &qf);
            ck_assert_int_eq(rc, SQ_OK);
            if (v == 0) rc = sq_quantize(&c, x, n, &key, &qn);
            if (v == 1) rc = sq_quantize_bf16(&c, x, n, &key, &qn);
            if (v == 2) rc = sq_quantize_diff(&c, x, ref, n, &key, &qn);
            if (v == 3) rc = sq_quantize_diff_bf16(&c, x, ref, n, &key, &qn);
            ck_assert_int_eq(rc, SQ_OK);
            ck_assert_mem_eq(qf.codes, qn.codes, cb);
            ck_assert_mem_eq(qf.scales, qn.scales, sb);
            rc = side == 0   ? sq_decode(&c, dt, &qf, r, n, a)
                 : side == 1 ? sq_backend_decode(NULL, &c, dt, &qf, r, n, a)
                             : sq_backend_decode(be, &c, dt, &qf, r, n, a);
            ck_assert_int_eq(rc, SQ_OK);
            if (v == 0) rc = sq_dequantize(&c, &qn, n, b);
            if (v == 1) rc = sq_dequantize_bf16(&c, &qn, n, b);
            if (v == 2) rc = sq_dequantize_add(&c, &qn, ref, n, b);
            if (v == 3) rc = sq_dequantize_add_bf16(&c, &qn, ref, n, b);
            ck_assert_int_eq(rc, SQ_OK);
            ck_assert_mem_eq(a, b, n * 4);
        }
    }
    /* the sums as one call, each variant the bytes of its named one */
    sq_qbuf qs[2] = {qf, qn}, ra, rb;
    ck_assert_int_eq(sq_qbuf_alloc(&c, n, &ra), SQ_OK);
    ck_assert_int_eq(sq_qbuf_alloc(&c, n, &rb), SQ_OK);
    sq_codec plain = c;
    plain.hadamard = 0; /* the fp16 sums take no transform */
    for (int f16 = 0; f16 < 2; f16++) {
        const sq_codec *cc = f16 ? &plain : &c;
        const sq_dtype acc = f16 ? SQ_DTYPE_FP16 : SQ_DTYPE_FP32;
        for (int side = 0; side < 2; side++) {
            sq_backend *on = side ? be : NULL;
            ck_assert_int_eq(side ? sq_backend_reduce(on, cc, acc, qs, 2, n, NULL, NULL, NULL, a)
                                  : sq_reduce(cc, acc, qs, 2, n, NULL, NULL, NULL, a), SQ_OK);
            ck_assert_int_eq(f16 ? sq_dequant_sum_f16(cc, qs, 2, n, b)
                                 : sq_dequant_sum(cc, qs, 2, n, b), SQ_OK);
            ck_assert_mem_eq(a, b, n * 4);
            ck_assert_int_eq(side ? sq_backend_reduce(on, cc, acc, qs, 2, n, cc, &key, &ra, NULL)
                                  : sq_reduce(cc, acc, qs, 2, n, cc, &key, &ra, NULL), SQ_OK);
            ck_assert_int_eq(f16 ? sq_dequant_sum_requant_f16(cc, qs, 2, n, cc, &key, &rb)
                                 : sq_dequant_sum_requant(cc, qs, 2, n, cc, &key, &rb), SQ_OK);
            ck_assert_mem_eq(ra.codes, rb.codes, cb);
            ck_assert_mem_eq(ra.scales, rb.scales, sb);
        }
    }
    ck_assert_int_eq(sq_reduce(&c, SQ_DTYPE_BF16, qs, 2, n, NULL, NULL, NULL, a), SQ_ERR_ARG);
    sq_qbuf_free(&ra);
    sq_qbuf_free(&rb);
    /* a dtype the pair does not take */
    ck_assert_int_eq(sq_encode(&c, SQ_DTYPE_FP16, x, NULL, n, &key, &qf), SQ_ERR_ARG);
    ck_assert_int_eq(sq_backend_decode(be, &c, SQ_DTYPE_FP16, &qf, NULL, n, a), SQ_ERR_ARG);
    sq_qbuf_free(&qf);
    sq_qbuf_free(&qn);
    free(x), free(ref), free(a), free(b);
    sq_backend_close(be);
}
END_TEST

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* The elementwise operations: values bit for bit, every element written,
** the statuses of backend.h. */
START_TEST(test_cpu_elementwise)
{
    sq_backend *be = open_ok("cpu");
    const float fmax = 3.4028234663852886e38f;
    const float tiny = from_bits(1); /* the smallest subnormal */

    /* add: rounding to even, signed zeros, subnormals, aliasing */
    float a[6] = {1.0f, -0.0f, -0.0f, tiny, 0.1f, 1e30f};
    float b[6] = {5.9604644775390625e-08f, -0.0f, 0.0f, tiny, 0.2f, -1e30f};
    float out[6];
    ck_assert_int_eq(sq_backend_add(be, a, b, 6, out), SQ_OK);
    ck_assert_uint_eq(bits_of(out[0]), bits_of(1.0f)); /* 1 + 2^-24: a tie, to even */
    ck_assert_uint_eq(bits_of(out[1]), 0x80000000u);   /* -0 + -0 = -0 */
    ck_assert_uint_eq(bits_of(out[2]), 0);             /* -0 + 0 = +0 */
    ck_assert_uint_eq(bits_of(out[3]), 2);             /* no flush to zero */
    volatile float x01 = 0.1f, x02 = 0.2f;
    ck_assert_uint_eq(bits_of(out[4]), bits_of(x01 + x02));
    ck_assert_uint_eq(bits_of(out[5]), 0);
    ck_assert_int_eq(sq_backend_add(be, a, b, 6, a), SQ_OK); /* out = a */
    ck_assert_mem_eq(a, out, sizeof out);

    /* add: overflow is RANGE, and everything is written */
    float c[3] = {fmax, -fmax, 2.0f}, d[3] = {fmax, -fmax, 3.0f};
    memset(out, 0x5a, sizeof out);
    ck_assert_int_eq(sq_backend_add(be, c, d, 3, out), SQ_ERR_RANGE);
    ck_assert_uint_eq(bits_of(out[0]), 0x7f800000u);
    ck_assert_uint_eq(bits_of(out[1]), 0xff800000u);
    ck_assert_uint_eq(bits_of(out[2]), bits_of(5.0f));
    /* non-finite input outranks an overflow elsewhere; which NaN comes out
    ** is fixed: the first NaN operand quieted, else +qNaN for Inf - Inf */
    float e[4] = {fmax, from_bits(0x7f800001u), 1.0f, INFINITY};
    float f[4] = {fmax, 1.0f, from_bits(0xffc12345u), -INFINITY};
    ck_assert_int_eq(sq_backend_add(be, e, f, 4, out), SQ_ERR_NONFINITE);
    ck_assert_uint_eq(bits_of(out[0]), 0x7f800000u);
    ck_assert_uint_eq(bits_of(out[1]), 0x7fc00001u);
    ck_assert_uint_eq(bits_of(out[2]), 0xffc12345u);
    ck_assert_uint_eq(bits_of(out[3]), 0x7fc00000u);

    /* sub: a - b, rounding, signed zeros (x - x = +0, -0 - +0 = -0), overflow,
    ** and the NaN a + (-b) gives (b's sign flipped, then quieted) */
    {
        float p[6] = {1.0f, 0.5f, -0.0f, 0.3f, fmax, 1.0f};
        float q[6] = {-5.9604644775390625e-08f, 0.5f, 0.0f, 0.1f, -fmax, from_bits(0x7f800001u)};
        float r[6];
        ck_assert_int_eq(sq_backend_sub(be, p, q, 5, r), SQ_ERR_RANGE);
        ck_assert_uint_eq(bits_of(r[0]), bits_of(1.0f)); /* 1 + 2^-24: a tie, to even */
        ck_assert_uint_eq(bits_of(r[1]), 0);
        ck_assert_uint_eq(bits_of(r[2]), 0x80000000u);
        volatile float x03 = 0.3f, x01b = 0.1f;
        ck_assert_uint_eq(bits_of(r[3]), bits_of(x03 - x01b));
        ck_assert_uint_eq(bits_of(r[4]), 0x7f800000u);
        ck_assert_int_eq(sq_backend_sub(be, p + 5, q + 5, 1, r), SQ_ERR_NONFINITE);
        ck_assert_uint_eq(bits_of(r[0]), 0xffc00001u);
        ck_assert_int_eq(sq_backend_sub(be, p, p, 4, p), SQ_OK); /* out = a = b */
        for (int i = 0; i < 4; i++) ck_assert_uint_eq(bits_of(p[i]), 0);
        ck_assert_int_eq(sq_backend_sub(be, NULL, NULL, 0, NULL), SQ_OK);
        ck_assert_int_eq(sq_backend_sub(be, NULL, q, 1, r), SQ_ERR_ARG);
        ck_assert_int_eq(sq_backend_sub(be, p, q, 1, NULL), SQ_ERR_ARG);
    }

    /* to_bf16: ties to even (normal and subnormal), -0, past bf16's range */
    const uint32_t xs[8] = {0x3f800000u, 0x3f808000u, 0x3f818000u, 0x80000000u,
                            0x00008000u, 0x00018000u, 0x7f7f7fffu, 0xbf7fffffu};
    const uint16_t hs[8] = {0x3f80, 0x3f80, 0x3f82, 0x8000, 0x0000, 0x0002, 0x7f7f, 0xbf80};
    float x[8];
    uint16_t h[8];
    for (int i = 0; i < 8; i++) x[i] = from_bits(xs[i]);
    ck_assert_int_eq(sq_backend_to_bf16(be, x, 8, h), SQ_OK);
    for (int i = 0; i < 8; i++) ck_assert_uint_eq(h[i], hs[i]);
    x[1] = 3.4e38f;                 /* finite, rounds to Inf */
    x[2] = from_bits(0x7f7f8000u);  /* the tie at the top: to Inf */
    memset(h, 0x5a, sizeof h);
    ck_assert_int_eq(sq_backend_to_bf16(be, x, 8, h), SQ_ERR_RANGE);
    ck_assert_uint_eq(h[0], 0x3f80);
    ck_assert_uint_eq(h[1], 0x7f80);
    ck_assert_uint_eq(h[2], 0x7f80);
    ck_assert_uint_eq(h[7], 0xbf80);
    x[5] = from_bits(0x7f800001u);  /* a NaN whose payload is all in the dropped bits */
    ck_assert_int_eq(sq_backend_to_bf16(be, x, 8, h), SQ_ERR_NONFINITE);
    ck_assert_uint_eq(h[5], 0x7fc0);
    ck_assert_uint_eq(h[1], 0x7f80);

    /* from_bf16: exact; only non-finite input is refused */
    const uint16_t in[6] = {0x3f80, 0x8000, 0x0001, 0x7f7f, 0xc2f7, 0x0080};
    float back[6];
    ck_assert_int_eq(sq_backend_from_bf16(be, in, 6, back), SQ_OK);
    for (int i = 0; i < 6; i++) ck_assert_uint_eq(bits_of(back[i]), (uint32_t)in[i] << 16);
    const uint16_t bad[3] = {0x3f80, 0x7f80, 0xffc1};
    memset(back, 0x5a, sizeof back);
    ck_assert_int_eq(sq_backend_from_bf16(be, bad, 3, back), SQ_ERR_NONFINITE);
    ck_assert_uint_eq(bits_of(back[1]), 0x7f800000u);
    ck_assert_uint_eq(bits_of(back[2]), 0xffc10000u);

    /* n = 0 does nothing, NULL included; NULL with n > 0 is refused */
    ck_assert_int_eq(sq_backend_add(be, NULL, NULL, 0, NULL), SQ_OK);
    ck_assert_int_eq(sq_backend_to_bf16(be, NULL, 0, NULL), SQ_OK);
    ck_assert_int_eq(sq_backend_from_bf16(be, NULL, 0, NULL), SQ_OK);
    ck_assert_int_eq(sq_backend_add(be, NULL, b, 1, out), SQ_ERR_ARG);
    ck_assert_int_eq(sq_backend_add(be, a, NULL, 1, out), SQ_ERR_ARG);
    ck_assert_int_eq(sq_backend_add(be, a, b, 1, NULL), SQ_ERR_ARG);
    ck_assert_int_eq(sq_backend_to_bf16(be, NULL, 1, h), SQ_ERR_ARG);
    ck_assert_int_eq(sq_backend_to_bf16(be, x, 1, NULL), SQ_ERR_ARG);
    ck_assert_int_eq(sq_backend_from_bf16(be, NULL, 1, back), SQ_ERR_ARG);
    ck_assert_int_eq(sq_backend_from_bf16(be, in, 1, NULL), SQ_ERR_ARG);

    sq_backend_close(be);
}
END_TEST

/* Sizes that take the OpenMP loops: the same bytes as a plain loop, and
** the same status whichever thread meets the NaN or the overflow. */
START_TEST(test_cpu_elementwise_large)
{
    sq_backend *be = open_ok("cpu");
    const uint64_t n = 300007;
    float *a = malloc(n * 4), *b = malloc(n * 4), *out = malloc(n * 4), *want = malloc(n * 4);
    uint16_t *h = malloc(n * 2), *hw = malloc(n * 2);
    for (int kind = 0; kind < EQ_EW_NKINDS; kind++) {
        int st[3];
        eq_ew_fill(a, b, h, n, (eq_ew_kind)kind, 40 + (uint64_t)kind);
        eq_ew_want((eq_ew_kind)kind, st);
        ck_assert_int_eq(sq_backend_add(be, a, b, n, out), st[0]);
        for (uint64_t i = 0; i < n; i++) want[i] = a[i] + b[i];
        for (uint64_t i = 0; i < n; i++)
            if (want[i] == want[i]) /* NaN payloads: see test_cpu_elementwise */
                ck_assert_uint_eq(bits_of(out[i]), bits_of(want[i]));
        /* sub of -b: the sum's bytes and status */
        for (uint64_t i = 0; i < n; i++) b[i] = -b[i];
        ck_assert_int_eq(sq_backend_sub(be, a, b, n, out), st[0]);
        for (uint64_t i = 0; i < n; i++)
            if (want[i] == want[i]) ck_assert_uint_eq(bits_of(out[i]), bits_of(want[i]));
        ck_assert_int_eq(sq_backend_to_bf16(be, a, n, hw), st[1]);
        for (uint64_t i = 0; i < n; i++) ck_assert_uint_eq(hw[i], sq_f32_to_bf16(a[i]));
        ck_assert_int_eq(sq_backend_from_bf16(be, h, n, out), st[2]);
        for (uint64_t i = 0; i < n; i++) ck_assert_uint_eq(bits_of(out[i]), (uint32_t)h[i] << 16);
    }
    free(a);
    free(b);
    free(out);
    free(want);
    free(h);
    free(hw);
    sq_backend_close(be);
}
END_TEST

START_TEST(test_memory)
{
    sq_backend *a = open_ok("cpu"), *b = open_ok("cpu");
    char host[64], back[64];
    for (int i = 0; i < 64; i++) host[i] = (char)i;
    void *pa, *pb;
    ck_assert_int_eq(sq_backend_alloc(a, 64, &pa), SQ_OK);
    ck_assert_int_eq(sq_backend_alloc(b, 64, &pb), SQ_OK);
    ck_assert_int_eq(sq_backend_put(a, pa, host, 64), SQ_OK);
    ck_assert_int_eq(sq_backend_copy(b, pb, a, pa, 64), SQ_OK);
    ck_assert_int_eq(sq_backend_get(b, back, pb, 64), SQ_OK);
    ck_assert_mem_eq(host, back, 64);
    ck_assert_int_eq(sq_backend_fill(b, pb, 0x7e, 64), SQ_OK);
    ck_assert_int_eq(sq_backend_get(b, back, pb, 64), SQ_OK);
    for (int i = 0; i < 64; i++) ck_assert_int_eq(back[i], 0x7e);
    ck_assert_int_eq(sq_backend_copy(b, NULL, a, pa, 64), SQ_ERR_ARG);
    ck_assert_int_eq(sq_backend_copy(b, pb, a, pa, 0), SQ_OK);
    void *huge = NULL;
    ck_assert_int_eq(sq_backend_alloc(a, SIZE_MAX / 2, &huge), SQ_ERR_NOMEM);
    ck_assert_msg(strstr(sq_backend_error(a), "malloc"), "%s", sq_backend_error(a));
    sq_backend_free(a, pa);
    sq_backend_free(b, pb);
    sq_backend_close(a);
    sq_backend_close(b);
}
END_TEST

START_TEST(test_deferred_and_timer)
{
    sq_backend *be = open_ok("cpu");
    double s = -1.0;
    ck_assert_int_eq(sq_backend_set_deferred(be, 1), SQ_OK);
    ck_assert_int_eq(sq_backend_timer_start(be), SQ_OK);
    ck_assert_int_eq(sq_backend_timer_stop(be, &s), SQ_OK);
    ck_assert(s >= 0.0);
    ck_assert_int_eq(sq_backend_sync(be), SQ_OK);
    ck_assert_int_eq(sq_backend_set_deferred(be, 0), SQ_OK);
    ck_assert_int_eq(sq_backend_timer_stop(be, NULL), SQ_ERR_ARG);
    /* the CPU has no CUDA stream to lend it; NULL (its own way) is fine */
    ck_assert_int_eq(sq_backend_set_stream(be, NULL), SQ_OK);
    ck_assert_int_eq(sq_backend_set_stream(be, (void *)1), SQ_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(sq_backend_error(be), "CUDA stream"), "%s", sq_backend_error(be));
    ck_assert_int_eq(sq_backend_set_stream(NULL, NULL), SQ_ERR_ARG);
    sq_backend_close(be);
}
END_TEST

START_TEST(test_placement)
{
    sq_placement pl;
    sq_error err = {0};
    ck_assert_int_eq(sq_placement_open("cpu", &pl, &err), SQ_OK);
    ck_assert_int_eq(pl.count, 1);
    for (uint64_t w = 0; w < 70; w++) ck_assert_ptr_eq(sq_placement_worker(&pl, w), pl.be[0]);
    sq_placement_close(&pl);
    ck_assert_int_eq(pl.count, 0);

    ck_assert_int_eq(sq_placement_open("tpu", &pl, &err), SQ_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "'tpu' is not a placement"), "%s", err.msg);
    ck_assert_int_eq(pl.count, 0);
    ck_assert_int_eq(sq_placement_open("cuda:", &pl, &err), SQ_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "no device named"), "%s", err.msg);

    int n = sq_device_count();
    if (n == 0) {
        ck_assert_int_eq(sq_placement_open("cuda", &pl, &err), SQ_ERR_UNSUPPORTED);
        ck_assert_msg(strstr(err.msg, sq_device_unavailable_reason()), "%s", err.msg);
        ck_assert_int_eq(sq_placement_open("cuda:0", &pl, &err), SQ_ERR_UNSUPPORTED);
    } else {
        ck_assert_int_eq(sq_placement_open("cuda", &pl, &err), SQ_OK);
        ck_assert_int_eq(pl.count, n);
        for (uint64_t w = 0; w < 3 * (uint64_t)n; w++)
            ck_assert_int_eq(sq_backend_device(sq_placement_worker(&pl, w)), (int)(w % (uint64_t)n));
        sq_placement_close(&pl);
        ck_assert_int_eq(sq_placement_open("cuda:0,0", &pl, &err), SQ_ERR_ARG);
        ck_assert_msg(strstr(err.msg, "named twice"), "%s", err.msg);
    }
    ck_assert_ptr_null(sq_placement_worker(NULL, 0));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("backend");
    TCase *tc = tcase_create("cpu");
    tcase_add_test(tc, test_cpu_identity);
    tcase_add_test(tc, test_open_errors);
    tcase_add_test(tc, test_open_cuda);
    tcase_add_test(tc, test_cpu_ops);
    tcase_add_test(tc, test_family);
    tcase_add_test(tc, test_cpu_elementwise);
    tcase_add_test(tc, test_cpu_elementwise_large);
    tcase_add_test(tc, test_memory);
    tcase_add_test(tc, test_deferred_and_timer);
    tcase_add_test(tc, test_placement);
    suite_add_tcase(s, tc);
    return sqt_run_nofork(s);
}
