/*
** check_bench.c -- the benchmark method (src/bench/bench.c): the op table's
** byte counts are the codec's own sizes of the specs it declares, and a tiny
** run on the CPU gives one row per op with positive times and those byte
** counts, its events in order; the 1-thread rule of noisy figures from
** made-up numbers. No speed is asserted.
*/
#include "check_util.h"
#include "shardq/bench.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* What one call reads and writes, from the op's name and its specs. */
static double expected_bytes(const sq_bench_op *op, uint64_t n)
{
    sq_codec c, c_out;
    char err[256];
    double f = 4.0 * (double)n, q = 0, q_out = 0;
    if (op->codec) {
        ck_assert_msg(sq_codec_parse(op->codec, &c, err, sizeof err) == SQ_OK, "%s", err);
        q = (double)sq_codec_bytes(&c, n);
    }
    if (op->codec_out) {
        ck_assert_msg(sq_codec_parse(op->codec_out, &c_out, err, sizeof err) == SQ_OK, "%s", err);
        q_out = (double)sq_codec_bytes(&c_out, n);
    }
    if (starts(op->name, "quantize-diff")) return 2 * f + q;     /* x, ref -> codes */
    if (starts(op->name, "dequantize-add")) return q + 2 * f;    /* codes, ref -> out */
    if (!strcmp(op->name, "sum-requant")) return SQ_BENCH_CHUNKS * q + q_out;
    if (starts(op->name, "quantize") || starts(op->name, "dequantize")) return f + q;
    if (starts(op->name, "sum")) return SQ_BENCH_CHUNKS * q + f;
    if (!strcmp(op->name, "hadamard")) return 2 * f;              /* in place: read + write */
    if (!strcmp(op->name, "rng")) return f;                       /* the uniforms written */
    ck_abort_msg("op %s has no expected byte count", op->name);
    return 0;
}

START_TEST(test_table_bytes)
{
    ck_assert_uint_ge(sq_bench_nops(), 18);
    ck_assert_ptr_null(sq_bench_op_at(sq_bench_nops()));
    for (size_t i = 0; i < sq_bench_nops(); i++) {
        const sq_bench_op *op = sq_bench_op_at(i);
        size_t at;
        ck_assert_int_eq(sq_bench_find_op(op->name, &at), SQ_OK);
        ck_assert_uint_eq(at, i);
        sq_codec c, c_out;
        char err[256];
        if (op->codec) ck_assert_int_eq(sq_codec_parse(op->codec, &c, err, sizeof err), SQ_OK);
        if (op->codec_out)
            ck_assert_int_eq(sq_codec_parse(op->codec_out, &c_out, err, sizeof err), SQ_OK);
        for (uint64_t n = 1; n <= 1000003; n = n * 31 + 7) {
            double want = expected_bytes(op, n);
            double got = sq_bench_op_bytes(op, op->codec ? &c : NULL,
                                           op->codec_out ? &c_out : NULL, n);
            ck_assert_msg(got == want, "%s, n = %llu: %.0f bytes, expected %.0f", op->name,
                          (unsigned long long)n, got, want);
        }
        if (op->twin) { /* the twin is the same op without the transform */
            ck_assert_int_eq(sq_bench_find_op(op->twin, &at), SQ_OK);
            ck_assert_ptr_nonnull(strstr(op->codec, "hadamard="));
            ck_assert_ptr_null(strstr(sq_bench_op_at(at)->codec, "hadamard="));
        }
    }
    ck_assert(sq_bench_copy_bytes(1000) == 8000.0);
    size_t at;
    ck_assert_int_eq(sq_bench_find_op("quantise", &at), SQ_ERR_NOTFOUND);
    size_t idx[64];
    size_t n = sq_bench_default_ops(1, idx, 64);
    for (size_t i = 0; i < n; i++) ck_assert(!sq_bench_op_at(idx[i])->cpu_only);
    ck_assert_uint_gt(sq_bench_default_ops(0, idx, 64), 0);
}
END_TEST

typedef struct seen {
    int copies, rows, sizes, passes, stop_after;
    size_t last_done, total;
} seen;

static int count(void *user, const sq_bench_event *ev)
{
    seen *s = user;
    if (ev->kind == SQ_BENCH_COPY || ev->kind == SQ_BENCH_ROW)
        ck_assert_uint_gt(ev->done, s->last_done);
    else
        ck_assert_uint_eq(ev->done, s->last_done);
    s->last_done = ev->done;
    s->total = ev->total;
    switch (ev->kind) {
    case SQ_BENCH_COPY: s->copies++; ck_assert(ev->copy_gbs > 0); break;
    case SQ_BENCH_ROW: s->rows++; ck_assert_ptr_nonnull(ev->row); break;
    case SQ_BENCH_SIZE: s->sizes++; break;
    case SQ_BENCH_PASS: s->passes++; break;
    }
    return s->stop_after && s->rows == s->stop_after;
}

START_TEST(test_tiny_run)
{
    sq_backend *be;
    char msg[256];
    sq_error berr = {0};
    ck_assert_msg(sq_backend_open("cpu", &be, &berr) == SQ_OK, "%s", berr.msg);
    size_t ops[64];
    int nops = (int)sq_bench_default_ops(0, ops, 64);
    int sizes[] = {1}, threads[] = {1};
    sq_bench_config cfg = {.sizes_mb = sizes, .nsizes = 1, .threads = threads, .nthreads = 1,
                           .ops = ops, .nops = nops, .min_time = 0};
    seen s = {0};
    sq_bench_result *rows;
    size_t nrows;
    sq_error e = {0};
    ck_assert_msg(sq_bench_run(be, &cfg, count, &s, &rows, &nrows, &e) == SQ_OK, "%s", e.msg);
    ck_assert_uint_eq(nrows, (size_t)nops);
    ck_assert_int_eq(s.copies, 1);
    ck_assert_int_eq(s.rows, nops);
    ck_assert_int_eq(s.sizes, 1);
    ck_assert_int_eq(s.passes, 1);
    ck_assert_uint_eq(s.last_done, s.total);
    const uint64_t n = (1u << 20) / 4;
    for (int i = 0; i < nops; i++) {
        const sq_bench_result *r = &rows[i];
        ck_assert_ptr_eq(r->op, sq_bench_op_at(ops[i]));
        ck_assert_uint_eq(r->elements, n);
        ck_assert_int_eq(r->size_mb, 1);
        ck_assert_int_eq(r->threads, 1);
        ck_assert_msg(r->bytes == expected_bytes(r->op, n), "%s: %.0f bytes", r->op->name,
                      r->bytes);
        ck_assert_msg(isfinite(r->gbs) && r->gbs > 0 && r->copy_gbs > 0, "%s: %g GB/s",
                      r->op->name, r->gbs);
        char canon[SQ_CODEC_STRLEN] = "-";
        sq_codec c;
        if (r->op->codec) {
            ck_assert_int_eq(sq_codec_parse(r->op->codec, &c, msg, sizeof msg), SQ_OK);
            sq_codec_format(&c, canon, sizeof canon);
        }
        ck_assert_str_eq(r->codec, canon);
    }
    free(rows);

    /* a callback that says stop stops the run */
    s = (seen){.stop_after = 2};
    ck_assert_int_eq(sq_bench_run(be, &cfg, count, &s, NULL, NULL, &e), SQ_ERR_INTERRUPTED);
    ck_assert_int_eq(s.rows, 2);
    ck_assert_int_eq(s.passes, 0);

    /* a codec that replaces the ops' own */
    cfg.codec = "bits=3,group=64";
    cfg.nops = 1;
    s = (seen){0};
    ck_assert_msg(sq_bench_run(be, &cfg, NULL, NULL, &rows, &nrows, &e) == SQ_OK, "%s", e.msg);
    ck_assert_ptr_nonnull(strstr(rows[0].codec, "bits=3"));
    free(rows);

    /* what cannot be measured */
    cfg.codec = "bits=9";
    ck_assert_int_eq(sq_bench_run(be, &cfg, NULL, NULL, NULL, NULL, &e), SQ_ERR_SPEC);
    cfg.codec = NULL;
    cfg.nops = 0;
    ck_assert_int_eq(sq_bench_run(be, &cfg, NULL, NULL, NULL, NULL, &e), SQ_ERR_ARG);
    sq_backend_close(be);
}
END_TEST

/* The 1-thread rule (SQ_BENCH_SLOW) from made-up figures. */
START_TEST(test_slow_vs_one)
{
    /* the case: 2 threads copying at 0.26 GB/s beside 61.6 on 1 */
    ck_assert_int_eq(sq_bench_slow_vs_one(0.26, 2, 61.6), 1);
    ck_assert_int_eq(sq_bench_slow_vs_one(30.7, 2, 61.6), 1);  /* just under half */
    ck_assert_int_eq(sq_bench_slow_vs_one(30.8, 2, 61.6), 0);  /* half: not under it */
    ck_assert_int_eq(sq_bench_slow_vs_one(40.0, 16, 61.6), 0); /* slower, but not by half */
    ck_assert_int_eq(sq_bench_slow_vs_one(90.0, 2, 61.6), 0);
    ck_assert_int_eq(sq_bench_slow_vs_one(0.26, 1, 61.6), 0);  /* 1 thread is the reference */
    ck_assert_int_eq(sq_bench_slow_vs_one(0.26, 0, 61.6), 0);  /* a GPU: no thread count */
    ck_assert_int_eq(sq_bench_slow_vs_one(0.26, 2, 0.0), 0);   /* no 1-thread figure */
    ck_assert_int_eq(sq_bench_slow_vs_one(0.26, 2, -1.0), 0);

    /* a run on 1 and 2 threads flags its 2-thread figures by the rule
    ** exactly when they stayed under half of the 1-thread ones (whatever
    ** the speed), and never the 1-thread ones */
    sq_backend *be;
    sq_error e = {0};
    ck_assert_msg(sq_backend_open("cpu", &be, &e) == SQ_OK, "%s", e.msg);
    size_t op;
    ck_assert_int_eq(sq_bench_find_op("quantize", &op), SQ_OK);
    int sizes[] = {1}, threads[] = {1, 2};
    sq_bench_config cfg = {.sizes_mb = sizes, .nsizes = 1, .threads = threads, .nthreads = 2,
                           .ops = &op, .nops = 1, .min_time = 0};
    sq_bench_result *rows;
    size_t nrows;
    ck_assert_msg(sq_bench_run(be, &cfg, NULL, NULL, &rows, &nrows, &e) == SQ_OK, "%s", e.msg);
    ck_assert_uint_eq(nrows, 2);
    ck_assert_int_eq(rows[0].noisy & ~SQ_BENCH_NOISY_SPREAD, 0);
    ck_assert_int_eq(rows[0].copy_noisy & ~SQ_BENCH_NOISY_SPREAD, 0);
    ck_assert_int_eq(rows[1].noisy & ~(SQ_BENCH_NOISY_SPREAD | SQ_BENCH_NOISY_THREADS), 0);
    ck_assert_int_eq(!!(rows[1].noisy & SQ_BENCH_NOISY_THREADS),
                     sq_bench_slow_vs_one(rows[1].gbs, 2, rows[0].gbs));
    ck_assert_int_eq(!!(rows[1].copy_noisy & SQ_BENCH_NOISY_THREADS),
                     sq_bench_slow_vs_one(rows[1].copy_gbs, 2, rows[0].copy_gbs));
    free(rows);
    sq_backend_close(be);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bench");
    TCase *tc = tcase_create("bench");
    tcase_add_test(tc, test_table_bytes);
    tcase_add_test(tc, test_tiny_run);
    tcase_add_test(tc, test_slow_vs_one);
    suite_add_tcase(s, tc);
    return sqt_run(s);
}
