/*
** check_gpu_world.c -- the sharded world on GPUs gives the bytes it gives
** on the CPU: every preset on several topologies, workers on one GPU and
** spread over every visible GPU (peer copies), several steps so that qWD's
** w-hat and error feedback's residuals carry over. Skips (exit 77) without a GPU, and says why.
*/
#include "backend/device.h"
#include "check_util.h"
#include "shardq/codec.h"
#include "shardq/world.h"
#include "world_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Runs `steps` steps of reduce, SGD, gather on one placement; returns the
** reduced gradients and w-hat of every step, concatenated. */
static float *run(const char *device, const char *preset, const char *set, int K, int G,
                  uint64_t n, int steps, size_t *len)
{
    sq_world_config cfg = sqt_world_preset(K, G, preset);
    sq_error err = {0};
    if (K > 1 && G > 1) ck_assert_int_eq(sq_scheme_set(&cfg.scheme, "grad.pipe=2", &err), SQ_OK);
    if (set) ck_assert_msg(sq_scheme_set(&cfg.scheme, set, &err) == SQ_OK, "%s", err.msg);
    if (sq_scheme_per_tensor(&cfg.scheme)) {
        /* per-tensor rules: one tensor of 2-D shape when it has one, else 1-D */
        uint64_t shape[2] = {n / 1024, 1024};
        int ndim = n % 1024 ? 1 : 2;
        if (ndim == 1) shape[0] = n;
        sq_scheme one;
        ck_assert_msg(sq_scheme_for_tensor(&cfg.scheme, &cfg.topo, shape, ndim, &one, &err) == SQ_OK,
                      "%s", err.msg);
        cfg.scheme = one;
    }
    cfg.elements = n;
    cfg.seed = 12345;
    cfg.device = device;
    sq_world *w;
    ck_assert_msg(sq_world_open(&cfg, &w, &err) == SQ_OK, "%s: %s", device, err.msg);
    int N = K * G;
    const uint64_t P = sq_world_padded(w);
    const uint64_t e1 = sq_world_residual_len(w, 0), e2 = sq_world_residual_len(w, 1);
    *len = (size_t)steps * (P + (size_t)N * n) + (size_t)N * (e1 + e2 + 1);
    float *out = malloc(*len * sizeof *out);
    ck_assert_ptr_nonnull(out);
    float *o = sqt_world_steps(w, N, n, steps, out, device);
    /* error feedback's residuals at the end, and their statistic */
    for (int r = 0; r < N; r++) {
        if (e1) ck_assert_int_eq(sq_world_get_residual(w, r, 0, o), SQ_OK);
        o += e1;
        if (e2) ck_assert_int_eq(sq_world_get_residual(w, r, 1, o), SQ_OK);
        o += e2;
        *o++ = (float)sq_world_residual_rel(w);
    }
    sq_world_close(w);
    return out;
}

START_TEST(test_world_cpu_equals_gpu)
{
    static const int kg[][2] = {{2, 4}, {3, 2}, {1, 4}, {4, 1}};
    for (size_t p = 0; p < sq_scheme_npresets; p++)
        for (size_t t = 0; t < 4; t++) {
            const char *preset = sq_scheme_presets[p];
            size_t la, lb, lc;
            float *a = run("cpu", preset, NULL, kg[t][0], kg[t][1], 100003, 3, &la);
            float *b = run("cuda:0", preset, NULL, kg[t][0], kg[t][1], 100003, 3, &lb);
            float *c = run("cuda", preset, NULL, kg[t][0], kg[t][1], 100003, 3, &lc);
            char msg[256];
            ck_assert_uint_eq(la, lb);
            ck_assert_msg(sqt_bytes_equal(a, b, la * sizeof(float), msg, sizeof msg),
                          "%s %dx%d cpu vs cuda:0: %s", preset, kg[t][0], kg[t][1], msg);
            ck_assert_msg(sqt_bytes_equal(a, c, la * sizeof(float), msg, sizeof msg),
                          "%s %dx%d cpu vs all GPUs: %s", preset, kg[t][0], kg[t][1], msg);
            free(a), free(b), free(c);
        }
}
END_TEST

/* The weight path under both values of weight.recon (the presets above run
** the default, bf16): the quantized weight wires, bf16 weights on the grid. */
START_TEST(test_recon_cpu_equals_gpu)
{
    static const char *const presets[] = {"qw", "qwd", "sdp4bit", "zeropp8", "qsdp"};
    static const char *const sets[] = {"weight.recon=bf16", "weight.recon=fp32"};
    for (size_t p = 0; p < 5; p++)
        for (int k = 0; k < 2; k++) {
            size_t la, lb;
            float *a = run("cpu", presets[p], sets[k], 3, 2, 50021, 4, &la);
            float *b = run("cuda", presets[p], sets[k], 3, 2, 50021, 4, &lb);
            char msg[256];
            ck_assert_uint_eq(la, lb);
            ck_assert_msg(sqt_bytes_equal(a, b, la * sizeof(float), msg, sizeof msg),
                          "%s %s cpu vs GPUs: %s", presets[p], sets[k], msg);
            free(a), free(b);
        }
}
END_TEST

/* Error feedback on every gradient hop of the quantized paths: the same
** residuals, results and statistic on the CPU and on GPUs. */
START_TEST(test_ef_cpu_equals_gpu)
{
    static const char *const presets[] = {"qsdp", "tlqhs", "sdp4bit", "ulq"};
    static const char *const sets[] = {"grad.ef=1", "grad.inter.ef=1"};
    static const int kg[][2] = {{2, 4}, {3, 2}, {1, 4}};
    for (size_t p = 0; p < 4; p++)
        for (int k = 0; k < 2; k++)
            for (size_t t = 0; t < 3; t++) {
                size_t la, lb;
                float *a = run("cpu", presets[p], sets[k], kg[t][0], kg[t][1], 50021, 3, &la);
                float *b = run("cuda", presets[p], sets[k], kg[t][0], kg[t][1], 50021, 3, &lb);
                char msg[256];
                ck_assert_uint_eq(la, lb);
                ck_assert_msg(sqt_bytes_equal(a, b, la * sizeof(float), msg, sizeof msg),
                              "%s %s %dx%d cpu vs GPUs: %s", presets[p], sets[k], kg[t][0],
                              kg[t][1], msg);
                free(a), free(b);
            }
}
END_TEST

/* The per-tensor presets on a 2-D tensor that qgZ quantizes (fp16 sums). */
START_TEST(test_world_per_tensor_2d)
{
    static const int kg[][2] = {{2, 4}, {4, 2}, {2, 2}};
    for (size_t p = 0; p < sq_scheme_npresets; p++) {
        sq_scheme s;
        ck_assert_int_eq(sq_scheme_preset(sq_scheme_presets[p], &s, NULL), SQ_OK);
        if (!sq_scheme_per_tensor(&s)) continue;
        for (size_t t = 0; t < 3; t++) {
            const char *preset = sq_scheme_presets[p];
            size_t la, lb;
            float *a = run("cpu", preset, NULL, kg[t][0], kg[t][1], 96 * 1024, 2, &la);
            float *b = run("cuda:0", preset, NULL, kg[t][0], kg[t][1], 96 * 1024, 2, &lb);
            char msg[256];
            ck_assert_uint_eq(la, lb);
            ck_assert_msg(sqt_bytes_equal(a, b, la * sizeof(float), msg, sizeof msg),
                          "%s %dx%d (96 x 1024) cpu vs cuda:0: %s", preset, kg[t][0], kg[t][1], msg);
            free(a), free(b);
        }
    }
}
END_TEST

int main(void)
{
    sqt_devices_or_skip();
    Suite *s = suite_create("gpu_world");
    TCase *tc = tcase_create("equal");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_world_cpu_equals_gpu);
    tcase_add_test(tc, test_recon_cpu_equals_gpu);
    tcase_add_test(tc, test_ef_cpu_equals_gpu);
    tcase_add_test(tc, test_world_per_tensor_2d);
    suite_add_tcase(s, tc);
    return sqt_run_nofork(s);
}
