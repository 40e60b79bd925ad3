/*
** check_backend.c -- the backend layer on every machine: the CPU backend is
** the C reference, names are parsed and refused with reasons, memory moves
** between backends, workers are placed round-robin. (The CUDA backend's
** own tests are tests/check_gpu_codec.c.)
*/
#include "backend/backend.h"
#include "backend/device.h"
#include "equiv.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

/* The failing malloc below is a test, not a bug: under AddressSanitizer
** let it return NULL as libc's does. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

static sq_backend *open_ok(const char *name)
{
    sq_backend *be = NULL;
    char err[256];
    int rc = sq_backend_open(name, &be, err, sizeof err);
    ck_assert_msg(rc == SQ_OK, "open %s: %s", name, err);
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
        char err[256] = "";
        ck_assert_int_eq(sq_backend_open(bad[i].name, &be, err, sizeof err), SQ_ERR_ARG);
        ck_assert_ptr_null(be);
        ck_assert_msg(strstr(err, bad[i].says), "'%s' gave: %s", bad[i].name, err);
    }
    sq_backend *be;
    ck_assert_int_eq(sq_backend_open(NULL, &be, NULL, 0), SQ_ERR_ARG);
}
END_TEST

/* Without a GPU "cuda" is refused with the probe's reason; with one, a
** device number past the last is. */
START_TEST(test_open_cuda)
{
    sq_backend *be = NULL;
    char err[256] = "";
    int n = sq_device_count();
    if (n == 0) {
        ck_assert_int_eq(sq_backend_open("cuda", &be, err, sizeof err), SQ_ERR_UNSUPPORTED);
        ck_assert_msg(strstr(err, "no CUDA device") && strstr(err, sq_device_unavailable_reason()),
                      "%s", err);
        ck_assert_int_eq(sq_backend_open("cuda:3", &be, err, sizeof err), SQ_ERR_UNSUPPORTED);
        ck_assert_msg(strstr(err, "cuda:3"), "%s", err);
    } else {
        char name[32];
        snprintf(name, sizeof name, "cuda:%d", n);
        ck_assert_int_eq(sq_backend_open(name, &be, err, sizeof err), SQ_ERR_ARG);
        ck_assert_msg(strstr(err, "no such device"), "%s", err);
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
    sq_backend_close(be);
}
END_TEST

START_TEST(test_placement)
{
    sq_placement pl;
    char err[256];
    ck_assert_int_eq(sq_placement_open("cpu", &pl, err, sizeof err), SQ_OK);
    ck_assert_int_eq(pl.count, 1);
    for (uint64_t w = 0; w < 70; w++) ck_assert_ptr_eq(sq_placement_worker(&pl, w), pl.be[0]);
    sq_placement_close(&pl);
    ck_assert_int_eq(pl.count, 0);

    ck_assert_int_eq(sq_placement_open("tpu", &pl, err, sizeof err), SQ_ERR_ARG);
    ck_assert_msg(strstr(err, "'tpu' is not a placement"), "%s", err);
    ck_assert_int_eq(pl.count, 0);
    ck_assert_int_eq(sq_placement_open("cuda:", &pl, err, sizeof err), SQ_ERR_ARG);
    ck_assert_msg(strstr(err, "no device named"), "%s", err);

    int n = sq_device_count();
    if (n == 0) {
        ck_assert_int_eq(sq_placement_open("cuda", &pl, err, sizeof err), SQ_ERR_UNSUPPORTED);
        ck_assert_msg(strstr(err, sq_device_unavailable_reason()), "%s", err);
        ck_assert_int_eq(sq_placement_open("cuda:0", &pl, err, sizeof err), SQ_ERR_UNSUPPORTED);
    } else {
        ck_assert_int_eq(sq_placement_open("cuda", &pl, err, sizeof err), SQ_OK);
        ck_assert_int_eq(pl.count, n);
        for (uint64_t w = 0; w < 3 * (uint64_t)n; w++)
            ck_assert_int_eq(sq_backend_device(sq_placement_worker(&pl, w)), (int)(w % (uint64_t)n));
        sq_placement_close(&pl);
        ck_assert_int_eq(sq_placement_open("cuda:0,0", &pl, err, sizeof err), SQ_ERR_ARG);
        ck_assert_msg(strstr(err, "named twice"), "%s", err);
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
    tcase_add_test(tc, test_memory);
    tcase_add_test(tc, test_deferred_and_timer);
    tcase_add_test(tc, test_placement);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    /* one process: a CUDA context does not survive fork() */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
