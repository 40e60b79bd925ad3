/*
** check_store_rows.c -- reading the store through store_rows.h: the
** reader's refusal of a file without shardq's schema, the runs' summaries
** and their filters, a run's params, tensor count and netbench rows, the
** named queries and the cursor's typed values, the three exports and the
** refusals of a user's statement, --where's selection, the time limit,
** and the sweep's and the bench's rows.
**
** The runs are written with store.h's writers; nothing here uses SQL.
*/
#include "check_util.h"
#include "shardq/store_rows.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[512];
static char db_path[600];

static void setup(void)
{
    ck_assert_int_eq(sqt_mkdtemp(dir, sizeof dir, "check_store_rows"), 0);
    snprintf(db_path, sizeof db_path, "%s/shardq.db", dir);
}

static void teardown(void) { sqt_rm_tree(dir); }

/* Two ended runs: 1 a replay of sweep "sw" (key "k1", params bits=4 and
** mode=ring, two grad steps), 2 a train run (bits=4.5, a netbench row). */
static void write_runs(void)
{
    sq_store *s;
    sq_error err = {0};
    ck_assert_msg(sq_store_open(db_path, 0, 0, &s, &err) == 0, "%s", sq_error_message(&err));
    sq_run_info a = {.kind = "replay", .key = "k1", .sweep = "sw", .config = "{}",
                     .preset = "sdp4bit", .topo = "1x2", .trace = "traces/t1/", .seed = 7};
    sq_store_kv pa[] = {{"grad.bits", "4"}, {"grad.mode", "ring"}};
    int64_t id;
    ck_assert_int_eq(sq_store_run_begin(s, &a, pa, 2, &id), SQ_STORE_STARTED);
    ck_assert_int_eq(id, 1);
    sq_stat_row st[2] = {{.step = 0, .path = "grad", .st = {.n = 10, .rel_l2 = 0.25},
                          .frac_clipped = NAN, .seconds = NAN, .ef_residual = NAN},
                         {.step = 1, .path = "grad", .st = {.n = 10, .rel_l2 = 0.75},
                          .frac_clipped = NAN, .seconds = NAN, .ef_residual = NAN}};
    ck_assert_int_eq(sq_store_add_stats(s, id, st, 2), 0);
    ck_assert_int_eq(sq_store_run_end(s, id, "done", NULL, NULL, 0, NULL, 0), 0);
    sq_run_info b = {.kind = "train", .config = "{}", .seed = 8};
    sq_store_kv pb[] = {{"grad.bits", "4.5"}};
    ck_assert_int_eq(sq_store_run_begin(s, &b, pb, 1, &id), SQ_STORE_STARTED);
    sq_netbench_row nb = {.op = "allgather", .level = "intra", .bytes = 1024, .count = 256,
                          .ranks = 2, .comms = 1, .iters = 5, .seconds = 1e-4,
                          .algbw_gb_s = 10.24, .busbw_gb_s = 5.12};
    ck_assert_int_eq(sq_store_add_netbench(s, id, &nb, 1), 0);
    ck_assert_int_eq(sq_store_run_end(s, id, "failed", "boom", NULL, 0, NULL, 0), 0);
    sq_store_close(s);
}

static sq_store *reader(void)
{
    sq_store *s;
    sq_error err = {0};
    ck_assert_msg(sq_store_open_reader(db_path, &s, &err) == 0, "%s", sq_error_message(&err));
    return s;
}

START_TEST(test_reader_refuses_empty)
{
    FILE *f = fopen(db_path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    sq_store *s = NULL;
    sq_error err = {0};
    ck_assert_int_eq(sq_store_open_reader(db_path, &s, &err), SQ_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(sq_error_message(&err), "not a shardq store (no schema"));
}
END_TEST

START_TEST(test_runs_summary)
{
    write_runs();
    sq_store *s = reader();
    sq_store_cursor *c;
    sq_error err = {0};
    ck_assert_int_eq(sq_store_runs_open(s, NULL, &c, &err), 0);
    sq_run_summary r;
    ck_assert_int_eq(sq_store_runs_next(c, &r, &err), 1);
    ck_assert_int_eq(r.id, 1);
    ck_assert_str_eq(r.status, "done");
    ck_assert_str_eq(r.sweep, "sw");
    ck_assert_str_eq(r.trace, "traces/t1/");
    ck_assert_str_eq(r.trace_name, "t1");
    ck_assert_int_eq(r.seed, 7);
    ck_assert_int_eq(strlen(r.started_text), 19);
    ck_assert_ptr_nonnull(r.duration);
    ck_assert_double_eq_tol(r.grad_rel_l2, 0.5, 1e-12);
    ck_assert(isnan(r.weight_rel_l2));
    ck_assert_ptr_null(r.error);
    ck_assert_int_eq(sq_store_runs_next(c, &r, &err), 1);
    ck_assert_int_eq(r.id, 2);
    ck_assert_str_eq(r.error, "boom");
    ck_assert_ptr_null(r.preset);
    ck_assert_ptr_null(r.trace_name);
    ck_assert_int_eq(sq_store_runs_next(c, &r, &err), 0);
    sq_store_cursor_close(c);
    /* the filters: status, kind, ids */
    sq_run_filter f = {.status = "failed"};
    ck_assert_int_eq(sq_store_runs_open(s, &f, &c, &err), 0);
    ck_assert_int_eq(sq_store_runs_next(c, &r, &err), 1);
    ck_assert_int_eq(r.id, 2);
    ck_assert_int_eq(sq_store_runs_next(c, &r, &err), 0);
    sq_store_cursor_close(c);
    f = (sq_run_filter){.kind = "replay", .ids = "[2]"};
    ck_assert_int_eq(sq_store_runs_open(s, &f, &c, &err), 0);
    ck_assert_int_eq(sq_store_runs_next(c, &r, &err), 0);
    sq_store_cursor_close(c);
    sq_store_close(s);
}
END_TEST

START_TEST(test_run_rows)
{
    write_runs();
    sq_store *s = reader();
    sq_error err = {0};
    ck_assert_int_eq(sq_store_read_begin(s, &err), 0);
    int found = -1;
    ck_assert_int_eq(sq_store_run_exists(s, 2, &found, &err), 0);
    ck_assert_int_eq(found, 1);
    ck_assert_int_eq(sq_store_run_exists(s, 3, &found, &err), 0);
    ck_assert_int_eq(found, 0);
    sq_store_param *p;
    size_t n;
    ck_assert_int_eq(sq_store_run_params(s, 1, &p, &n, &err), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(p[0].key, "grad.bits");
    ck_assert_str_eq(p[0].value, "4");
    ck_assert_str_eq(p[1].key, "grad.mode");
    sq_store_params_free(p, n);
    sq_store_tensor_count t;
    ck_assert_int_eq(sq_store_run_tensor_count(s, 1, &t, &err), 0);
    ck_assert_int_eq(t.rows, 0);
    sq_netbench_row *nb;
    ck_assert_int_eq(sq_store_run_netbench(s, 2, &nb, &n, &err), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(nb[0].op, "allgather");
    ck_assert_uint_eq(nb[0].bytes, 1024);
    ck_assert_double_eq(nb[0].busbw_gb_s, 5.12);
    sq_store_netbench_free(nb, n);
    ck_assert_int_eq(sq_store_run_netbench(s, 1, &nb, &n, &err), 0);
    ck_assert_uint_eq(n, 0);
    sq_store_close(s);
}
END_TEST

START_TEST(test_named_queries)
{
    write_runs();
    sq_store *s = reader();
    sq_error err = {0};
    sq_store_cursor *c;
    sq_store_value id = {.type = SQ_STORE_INTEGER, .i = 1};
    ck_assert_int_eq(sq_store_query(s, "run", &id, 1, &c, &err), 0);
    ck_assert_int_eq(sq_store_cursor_step(c, &err), 1);
    int ncols = sq_store_cursor_columns(c), seen = 0;
    for (int i = 0; i < ncols; i++) {
        if (!strcmp(sq_store_cursor_name(c, i), "kind")) {
            ck_assert_int_eq(sq_store_cursor_type(c, i), SQ_STORE_TEXT);
            ck_assert_str_eq(sq_store_cursor_text(c, i, NULL), "replay");
            seen++;
        }
        if (!strcmp(sq_store_cursor_name(c, i), "seed")) {
            ck_assert_int_eq(sq_store_cursor_type(c, i), SQ_STORE_INTEGER);
            ck_assert_int_eq(sq_store_cursor_int(c, i), 7);
            seen++;
        }
    }
    ck_assert_int_eq(seen, 2);
    ck_assert_int_eq(sq_store_cursor_step(c, &err), 0);
    sq_store_cursor_close(c);
    ck_assert_int_eq(sq_store_query(s, "run.metrics", &id, 1, &c, &err), 0);
    ck_assert_int_eq(sq_store_cursor_step(c, &err), 1);
    ck_assert_str_eq(sq_store_cursor_name(c, 3), "mean_rel_l2");
    ck_assert_double_eq_tol(sq_store_cursor_double(c, 3), 0.5, 1e-12);
    sq_store_cursor_close(c);
    ck_assert_int_eq(sq_store_query(s, "nope", &id, 1, &c, &err), SQ_ERR_ARG);
    ck_assert_int_eq(sq_store_query(s, "run", NULL, 0, &c, &err), SQ_ERR_ARG);
    sq_store_close(s);
}
END_TEST

START_TEST(test_exports)
{
    write_runs();
    sq_store *s = reader();
    sq_error err = {0};
    sq_store_cursor *c;
    /* a table, of the runs named */
    ck_assert_int_eq(sq_store_export_table(s, "params", "[2]", &c, &err), 0);
    ck_assert_int_eq(sq_store_cursor_step(c, &err), 1);
    ck_assert_int_eq(sq_store_cursor_int(c, 0), 2);
    ck_assert_int_eq(sq_store_cursor_step(c, &err), 0);
    sq_store_cursor_close(c);
    ck_assert_int_eq(sq_store_export_table(s, "nope", NULL, &c, &err), SQ_ERR_NOTFOUND);
    /* wide: grad.bits is REAL (4 and 4.5), grad.mode TEXT */
    ck_assert_int_eq(sq_store_export_wide(s, NULL, &c, &err), 0);
    int bits = -1, mode = -1;
    for (int i = 0; i < sq_store_cursor_columns(c); i++) {
        if (!strcmp(sq_store_cursor_name(c, i), "grad.bits")) bits = i;
        if (!strcmp(sq_store_cursor_name(c, i), "grad.mode")) mode = i;
    }
    ck_assert(bits > 0 && mode > 0);
    ck_assert_int_eq(sq_store_cursor_step(c, &err), 1);
    ck_assert_int_eq(sq_store_cursor_type(c, bits), SQ_STORE_REAL);
    ck_assert_int_eq(sq_store_cursor_type(c, mode), SQ_STORE_TEXT);
    ck_assert_int_eq(sq_store_cursor_step(c, &err), 1);
    ck_assert_int_eq(sq_store_cursor_type(c, mode), SQ_STORE_NULL);
    ck_assert_int_eq(sq_store_cursor_step(c, &err), 0);
    sq_store_cursor_close(c);
    /* a statement: its values typed; refusals */
    ck_assert_int_eq(sq_store_export_sql(s, "SELECT x'00ff', 1.5, NULL, sq_duration(75)", &c,
                                         &err), 0);
    ck_assert_int_eq(sq_store_cursor_step(c, &err), 1);
    size_t n;
    const unsigned char *b = sq_store_cursor_blob(c, 0, &n);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(b[1], 0xff);
    ck_assert_int_eq(sq_store_cursor_type(c, 1), SQ_STORE_REAL);
    ck_assert_int_eq(sq_store_cursor_type(c, 2), SQ_STORE_NULL);
    ck_assert_str_eq(sq_store_cursor_text(c, 3, NULL), "1m15s");
    sq_store_cursor_close(c);
    static const struct {
        const char *sql, *why;
    } bad[] = {{"DELETE FROM runs", "refused: it would write to the database"},
               {"SELECT 1; SELECT 2", "refused: give one statement only"},
               {"", "nor a valid statement: it is empty"},
               {"SELEC 1", "nor a valid statement: near \"SELEC\""}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(sq_store_export_sql(s, bad[i].sql, &c, &err), SQ_ERR_SPEC);
        ck_assert_msg(strstr(sq_error_message(&err), bad[i].why), "%s: %s", bad[i].sql,
                      sq_error_message(&err));
    }
    sq_store_close(s);
}
END_TEST

START_TEST(test_select_and_limit)
{
    write_runs();
    sq_store *s = reader();
    sq_error err = {0};
    char *ids;
    const char *f1[] = {"grad.bits=4"};
    ck_assert_int_eq(sq_store_select_runs(s, NULL, f1, 1, &ids, &err), 0);
    ck_assert_str_eq(ids, "[1]");
    free(ids);
    const char *f2[] = {"kind=train", "seed=8"};
    ck_assert_int_eq(sq_store_select_runs(s, NULL, f2, 2, &ids, &err), 0);
    ck_assert_str_eq(ids, "[2]");
    free(ids);
    ck_assert_int_eq(sq_store_select_runs(s, "seed = 7", NULL, 0, &ids, &err), 0);
    ck_assert_str_eq(ids, "[1]");
    free(ids);
    const char *f3[] = {"noeq"};
    ck_assert_int_eq(sq_store_select_runs(s, NULL, f3, 1, &ids, &err), SQ_ERR_SPEC);
    ck_assert_ptr_nonnull(strstr(sq_error_message(&err), "expected KEY=VALUE"));
    const char *f4[] = {"bogus=1"};
    ck_assert_int_eq(sq_store_select_runs(s, NULL, f4, 1, &ids, &err), SQ_ERR_SPEC);
    /* a statement that never ends stops at the limit */
    ck_assert_int_eq(sq_store_limit_queries(s, 0.2), 0);
    sq_store_cursor *c;
    ck_assert_int_eq(sq_store_export_sql(s, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT "
                                            "x + 1 FROM c) SELECT max(x) FROM c", &c, &err), 0);
    ck_assert_int_eq(sq_store_cursor_step(c, &err), SQ_ERR_INTERRUPTED);
    ck_assert_ptr_nonnull(strstr(sq_error_message(&err), "ran past its time limit"));
    sq_store_cursor_close(c);
    sq_store_close(s);
}
END_TEST

static int count_key(void *ctx, const char *key)
{
    ck_assert_str_eq(key, "k1");
    ++*(int *)ctx;
    return 0;
}

static int count_running(void *ctx, const sq_store_running *r)
{
    (void)r;
    ++*(int *)ctx;
    return 0;
}

START_TEST(test_sweep_and_bench_rows)
{
    write_runs();
    sq_store *s = reader();
    sq_error err = {0};
    int n = 0;
    ck_assert_int_eq(sq_store_sweep_done_keys(s, "sw", count_key, &n, &err), 0);
    ck_assert_int_eq(n, 1);
    n = 0;
    ck_assert_int_eq(sq_store_sweep_running(s, "sw", count_running, &n, &err), 0);
    ck_assert_int_eq(n, 0);
    sq_store_quant_figure q;
    ck_assert_int_eq(sq_store_bench_quant_figure(s, &q, &err), SQ_ERR_NOTFOUND);
    sq_store_close(s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("store_rows");
    TCase *tc = tcase_create("read");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_reader_refuses_empty);
    tcase_add_test(tc, test_runs_summary);
    tcase_add_test(tc, test_run_rows);
    tcase_add_test(tc, test_named_queries);
    tcase_add_test(tc, test_exports);
    tcase_add_test(tc, test_select_and_limit);
    tcase_add_test(tc, test_sweep_and_bench_rows);
    suite_add_tcase(s, tc);
    return sqt_run(s);
}
