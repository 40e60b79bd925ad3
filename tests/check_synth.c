/*
** check_synth.c -- synthetic data (synth/synth.h): the same seed gives the
** same bytes, another seed or stream other bytes, and a synthetic trace is
** a pure function of its options, wherever it is written.
*/
#include "check_util.h"
#include "shardq/codec.h"
#include "shardq/synth.h"
#include "shardq/trace.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 1000

START_TEST(test_same_seed_same_bytes)
{
    static float a[N], b[N], tmp[N], u[3 * N];
    sq_synth_weights(42, a, N, u);
    sq_synth_weights(42, b, N, u);
    ck_assert_int_eq(memcmp(a, b, sizeof a), 0);
    sq_synth_weights(43, b, N, u);
    ck_assert_int_ne(memcmp(a, b, sizeof a), 0);
    for (int kind = SQ_SYNTH_NORMAL; kind <= SQ_SYNTH_OUTLIERS; kind++) {
        sq_synth_grad(7, 3, 1, kind, N, a, tmp, u);
        sq_synth_grad(7, 3, 1, kind, N, b, tmp, u);
        ck_assert_int_eq(memcmp(a, b, sizeof a), 0);
        for (uint64_t i = 0; i < N; i++) ck_assert(isfinite(a[i]));
        sq_synth_grad(8, 3, 1, kind, N, b, tmp, u); /* another seed */
        ck_assert_int_ne(memcmp(a, b, sizeof a), 0);
        sq_synth_grad(7, 4, 1, kind, N, b, tmp, u); /* another step */
        ck_assert_int_ne(memcmp(a, b, sizeof a), 0);
        sq_synth_grad(7, 3, 2, kind, N, b, tmp, u); /* another worker */
        ck_assert_int_ne(memcmp(a, b, sizeof a), 0);
        sq_synth_grad_stream(7, 1, 3, 1, kind, N, b, tmp, u); /* another tensor */
        ck_assert_int_ne(memcmp(a, b, sizeof a), 0);
        sq_synth_grad_stream(7, 0, 3, 1, kind, N, b, tmp, u); /* stream 0 is sq_synth_grad */
        ck_assert_int_eq(memcmp(a, b, sizeof a), 0);
    }
}
END_TEST

START_TEST(test_kinds)
{
    ck_assert_int_eq(sq_synth_parse_kind("normal"), SQ_SYNTH_NORMAL);
    ck_assert_int_eq(sq_synth_parse_kind("heavy"), SQ_SYNTH_HEAVY);
    ck_assert_int_eq(sq_synth_parse_kind("outliers"), SQ_SYNTH_OUTLIERS);
    ck_assert_int_eq(sq_synth_parse_kind("gauss"), SQ_ERR_SPEC);
    ck_assert_int_eq(sq_synth_parse_kind(NULL), SQ_ERR_SPEC);
    for (int k = SQ_SYNTH_NORMAL; k <= SQ_SYNTH_OUTLIERS; k++)
        ck_assert_int_eq(sq_synth_parse_kind(sq_synth_kind_name(k)), k);
}
END_TEST

static void count_files(void *ctx, size_t files)
{
    *(size_t *)ctx = files;
}

START_TEST(test_trace_is_a_function_of_its_options)
{
    sq_trace_param p[2] = {{.name = "w", .ndim = 2, .shape = {8, 16}, .n = 128},
                           {.name = "b", .ndim = 1, .shape = {16}, .n = 16}};
    sq_synth_trace s = {p, 2, 3, 10, 2, "1x2", SQ_ST_BF16, SQ_SYNTH_HEAVY, 1, 0.5, 9};
    const char *a = sqt_tpath("a"), *b = sqt_tpath("deeper/b");
    sq_error e = {0};
    size_t files = 0;
    ck_assert_msg(sq_synth_trace_write(a, &s, "owner x", count_files, &files, &e) == SQ_OK, "%s",
                  sq_error_message(&e));
    ck_assert_uint_eq(files, 3 * (2 + 1));
    ck_assert_msg(sq_synth_trace_write(b, &s, "owner x", NULL, NULL, &e) == SQ_OK, "%s",
                  sq_error_message(&e));
    const char *names[] = {"manifest.json", "step-000010/weights.safetensors",
                           "step-000011/grads-w01.safetensors", "step-000012/weights.safetensors"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char pa[600], pb[600];
        snprintf(pa, sizeof pa, "%s/%s", a, names[i]);
        snprintf(pb, sizeof pb, "%s/%s", b, names[i]);
        size_t la, lb;
        unsigned char *xa = sqt_read_bytes(pa, &la), *xb = sqt_read_bytes(pb, &lb);
        ck_assert_uint_eq(la, lb);
        ck_assert_msg(memcmp(xa, xb, la) == 0, "%s differs", names[i]);
        free(xa);
        free(xb);
    }
    sq_trace t;
    ck_assert_msg(sq_trace_open(a, &t, &e) == SQ_OK, "%s", sq_error_message(&e));
    ck_assert_uint_eq(t.nsteps, 3);
    ck_assert_int_eq(t.workers, 2);
    ck_assert(t.has_weights);
    sq_trace_close(&t);
    /* another seed: other bytes; the same directory of another owner: refused */
    s.seed = 10;
    const char *c = sqt_tpath("c");
    ck_assert_int_eq(sq_synth_trace_write(c, &s, "owner y", NULL, NULL, &e), SQ_OK);
    size_t la, lc;
    char pa[600], pc[600];
    snprintf(pa, sizeof pa, "%s/step-000011/grads-w01.safetensors", a);
    snprintf(pc, sizeof pc, "%s/step-000011/grads-w01.safetensors", c);
    unsigned char *xa = sqt_read_bytes(pa, &la), *xc = sqt_read_bytes(pc, &lc);
    ck_assert(la != lc || memcmp(xa, xc, la) != 0);
    free(xa);
    free(xc);
    ck_assert_int_eq(sq_synth_trace_write(a, &s, "owner y", NULL, NULL, &e), SQ_ERR_CONFLICT);
    ck_assert_ptr_nonnull(strstr(sq_error_message(&e), a));
}
END_TEST

int main(void)
{
    if (sqt_scratch_begin("check_synth")) return 99;
    Suite *s = suite_create("synth");
    TCase *tc = tcase_create("synth");
    tcase_add_test(tc, test_same_seed_same_bytes);
    tcase_add_test(tc, test_kinds);
    tcase_add_test(tc, test_trace_is_a_function_of_its_options);
    suite_add_tcase(s, tc);
    return sqt_run_scratch(s);
}
