/*
** check_tracedir.c -- traces (src/trace/tracedir.c) and their replay
** (src/replay/replay.c): the writer and reader agree in every dtype, the
** reader refuses what the manifest does not promise, the files of several
** processes make one trace, and the replay computes
** what a straight-line use of the world computes, stores rows that add up,
** and carries the qwd reconstruction from step to step.
*/
#include "check_util.h"
#include "shardq/replay.h"
#include "shardq/trace.h"
#include "shardq/codec.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>


/* The value of element i of file (step, worker, param p): distinct and
** exactly representable in bf16 and f16 when `coarse`. */
static float value(uint32_t step, int worker, size_t p, uint64_t i, int coarse)
{
    int k = (int)((step * 131u + (unsigned)(worker + 1) * 17u + (unsigned)p * 7u + i * 3u) % 61u);
    float v = (float)(k - 30) / 64.0f;
    return coarse ? v : v + (float)i * 1e-7f;
}

/* Writes a trace of `steps` steps from 5, `workers` files, two params,
** with weights at every `weights`-th step from the first (0: none). */
static void write_trace(const char *dir, int steps, int workers, sq_st_dtype dtype, int weights)
{
    sq_trace_param p[2] = {{.name = "w.a", .ndim = 2, .shape = {7, 5}},
                           {.name = "b", .ndim = 1, .shape = {300}}};
    sq_trace_writer *w;
    sq_error terr = {0};
    char *err = terr.msg;
    int coarse = dtype == SQ_ST_BF16 || dtype == SQ_ST_F16;
    ck_assert_msg(sq_trace_writer_open(&w, dir, workers, p, 2, dtype, "1x2", "{\"layers\":1}",
                                       &terr) == 0,
                  "%s", err);
    float buf[300];
    for (int s = 0; s < steps; s++) {
        uint32_t step = 5 + (uint32_t)s;
        for (int r = weights && s % weights == 0 ? -1 : 0; r < workers; r++) {
            ck_assert_msg(sq_trace_file_begin(w, step, r, &terr) == 0, "%s", terr.msg);
            for (size_t q = 0; q < 2; q++) {
                uint64_t n = q ? 300 : 35;
                for (uint64_t i = 0; i < n; i++) buf[i] = value(step, r, q, i, coarse);
                ck_assert_msg(sq_trace_file_put(w, buf, &terr) == 0, "%s", terr.msg);
            }
            ck_assert_msg(sq_trace_file_end(w, &terr) == 0, "%s", terr.msg);
        }
    }
    ck_assert_msg(sq_trace_writer_close(w, &terr) == 0, "%s", terr.msg);
}

START_TEST(test_roundtrip_dtypes)
{
    static const sq_st_dtype dts[] = {SQ_ST_F32, SQ_ST_BF16, SQ_ST_F16, SQ_ST_F64};
    for (size_t d = 0; d < 4; d++) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s", sqt_tpath("rt"));
        sqt_rm_tree(dir);
        write_trace(dir, 3, 2, dts[d], 1);
        sq_trace t;
        sq_error terr = {0};
        ck_assert_msg(sq_trace_open(dir, &t, &terr) == 0, "%s", terr.msg);
        ck_assert_int_eq(t.kind, SQ_TRACE_DIR);
        ck_assert_uint_eq(t.nsteps, 3);
        ck_assert_uint_eq(t.steps[0], 5);
        ck_assert_uint_eq(t.steps[2], 7);
        ck_assert_int_eq(t.workers, 2);
        ck_assert_int_eq(t.has_weights, 1);
        ck_assert_str_eq(t.topo, "1x2");
        ck_assert_str_eq(t.model, "{\"layers\":1}");
        ck_assert_uint_eq(t.nparams, 2);
        ck_assert_str_eq(t.params[0].name, "w.a");
        ck_assert_uint_eq(t.params[0].n, 35);
        ck_assert_uint_eq(t.elements, 335);
        ck_assert_uint_eq(t.dtypes, 1u << dts[d]);
        ck_assert_uint_eq(t.bytes, 3u * 3u * 335u * sq_st_dtype_size(dts[d]));
        int coarse = dts[d] == SQ_ST_BF16 || dts[d] == SQ_ST_F16;
        float x[300];
        double y[300];
        for (size_t s = 0; s < 3; s++) {
            sq_trace_step ts;
            ck_assert_msg(sq_trace_step_open(&t, s, 1, 2, &ts, &terr) == 0, "%s", terr.msg);
            for (int r = -1; r < 2; r++)
                for (size_t q = 0; q < 2; q++) {
                    ck_assert_msg(sq_trace_load(&ts, r, q, x, y, &terr) == 0, "%s", terr.msg);
                    for (uint64_t i = 0; i < t.params[q].n; i++) {
                        float want = value(t.steps[s], r, q, i, coarse);
                        ck_assert_msg(sqt_bits(x[i]) == sqt_bits(want),
                                      "dtype %d step %zu worker %d param %zu element %llu: %a, "
                                      "want %a",
                                      (int)dts[d], s, r, q, (unsigned long long)i, x[i], want);
                        ck_assert(y[i] == (double)want);
                    }
                }
            sq_trace_step_close(&ts);
        }
        sq_trace_close(&t);
    }
}
END_TEST

START_TEST(test_manifest_errors)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", sqt_tpath("man"));
    sq_error terr = {0};
    char *err = terr.msg;
    sq_trace t;
    static const struct {
        const char *json, *want;
    } cases[] = {
        {"[1]", "not a JSON object"},
        {"{\"format\":\"x\"}", "field 'format'"},
        {"{\"format\":\"shardq-trace\",\"version\":2}", "field 'version': 2"},
        {"{\"format\":\"shardq-trace\",\"version\":1,\"workers\":0}", "field 'workers'"},
        {"{\"format\":\"shardq-trace\",\"version\":1,\"workers\":2,\"topology\":\"3x1\"}",
         "field 'topology'"},
        {"{\"format\":\"shardq-trace\",\"version\":1,\"workers\":1,\"steps\":[]}",
         "field 'steps'"},
        {"{\"format\":\"shardq-trace\",\"version\":1,\"workers\":1,\"steps\":[3,3]}",
         "entry 1 (3) does not increase"},
        {"{\"format\":\"shardq-trace\",\"version\":1,\"workers\":1,\"steps\":[1,-2]}",
         "entry 1 is not an integer"},
        {"{\"format\":\"shardq-trace\",\"version\":1,\"workers\":1,\"steps\":[1],\"params\":[]}",
         "field 'params'"},
        {"{\"format\":\"shardq-trace\",\"version\":1,\"workers\":1,\"steps\":[1],"
         "\"params\":[{\"name\":\"a\",\"shape\":[1]},{\"name\":\"a\",\"shape\":[2]}]}",
         "'a' listed twice"},
        {"{\"format\":\"shardq-trace\",\"version\":1,\"workers\":1,\"steps\":[1],"
         "\"params\":[{\"name\":\"a\",\"shape\":[4294967296,4294967296]}]}",
         "product overflows"},
        {"{\"format\":\"shardq-trace\",\"version\":1,\"workers\":1,\"steps\":[1],"
         "\"params\":[{\"name\":\"a\",\"shape\":[1.5]}]}",
         "entry 0 is not a non-negative integer"},
        {"{\"format\":\"shardq-trace\",", "invalid JSON"},
        /* a key given twice, anywhere: cJSON would take the first */
        {"{\"format\":\"shardq-trace\",\"version\":1,\"workers\":1,\"steps\":[1,2],"
         "\"params\":[{\"name\":\"a\",\"shape\":[1]}],\"steps\":[1]}",
         "key 'steps' given twice in the top level"},
        {"{\"format\":\"shardq-trace\",\"version\":1,\"workers\":2,\"workers\":1,"
         "\"steps\":[1],\"params\":[{\"name\":\"a\",\"shape\":[1]}]}",
         "key 'workers' given twice in the top level"},
        {"{\"format\":\"shardq-trace\",\"version\":1,\"workers\":1,\"steps\":[1],"
         "\"params\":[{\"name\":\"a\",\"shape\":[1]},{\"name\":\"b\",\"shape\":[1],"
         "\"name\":\"c\"}]}",
         "key 'name' given twice in params[1]"},
        {"{\"format\":\"shardq-trace\",\"version\":1,\"workers\":1,\"steps\":[1],"
         "\"model\":{\"cfg\":{\"layers\":1,\"heads\":2,\"layers\":2}},"
         "\"params\":[{\"name\":\"a\",\"shape\":[1]}]}",
         "key 'layers' given twice in model.cfg"},
        /* a misspelt key is not ignored */
        {"{\"format\":\"shardq-trace\",\"version\":1,\"workers\":1,\"steps\":[1],"
         "\"weight\":false,\"params\":[{\"name\":\"a\",\"shape\":[1]}]}",
         "field 'weight': unknown"},
        {"{\"format\":\"shardq-trace\",\"version\":1,\"workers\":1,\"steps\":[1],"
         "\"params\":[{\"name\":\"a\",\"shape\":[1],\"shpae\":[2]}]}",
         "entry 0: 'shpae' is unknown"},
        /* the weight cadence: a list of steps among 'steps', increasing */
        {"{\"format\":\"shardq-trace\",\"version\":1,\"workers\":1,\"steps\":[1,2],"
         "\"weights\":\"yes\",\"params\":[{\"name\":\"a\",\"shape\":[1]}]}",
         "field 'weights': expected true, false or a list of steps"},
        {"{\"format\":\"shardq-trace\",\"version\":1,\"workers\":1,\"steps\":[1,2],"
         "\"weights\":[2,1],\"params\":[{\"name\":\"a\",\"shape\":[1]}]}",
         "field 'weights': entry 1 (1) does not increase"},
        {"{\"format\":\"shardq-trace\",\"version\":1,\"workers\":1,\"steps\":[1,4],"
         "\"weights\":[1,3],\"params\":[{\"name\":\"a\",\"shape\":[1]}]}",
         "field 'weights': entry 1: step 3 is not in 'steps'"},
        {"{\"format\":\"shardq-trace\",\"version\":1,\"workers\":1,\"steps\":[1,4],"
         "\"weights\":[1.5],\"params\":[{\"name\":\"a\",\"shape\":[1]}]}",
         "field 'weights': entry 0 is not an integer"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        sqt_rm_tree(dir);
        mkdir(dir, 0777);
        FILE *f = fopen(sqt_tpath("man/manifest.json"), "w");
        ck_assert_ptr_nonnull(f);
        fputs(cases[c].json, f);
        fclose(f);
        ck_assert_int_ne(sq_trace_open(dir, &t, &terr), 0);
        ck_assert_msg(strstr(err, "manifest.json") && strstr(err, cases[c].want),
                      "case %zu: '%s' lacks '%s'", c, err, cases[c].want);
        ck_assert_msg(terr.status == SQ_ERR_FORMAT, "case %zu: kind %d", c, terr.status);
    }
    /* a valid manifest whose step directory is missing */
    sqt_rm_tree(dir);
    mkdir(dir, 0777);
    FILE *f = fopen(sqt_tpath("man/manifest.json"), "w");
    fputs("{\"format\":\"shardq-trace\",\"version\":1,\"workers\":1,\"steps\":[12],"
          "\"params\":[{\"name\":\"a\",\"shape\":[3]}]}", f);
    fclose(f);
    ck_assert_int_ne(sq_trace_open(dir, &t, &terr), 0);
    ck_assert_msg(strstr(err, "step-000012/weights.safetensors: missing"), "%s", err);
    ck_assert_int_eq(terr.status, SQ_ERR_NOTFOUND);
    /* a directory without manifest.json */
    unlink(sqt_tpath("man/manifest.json"));
    ck_assert_int_eq(sq_trace_open(dir, &t, &terr), SQ_ERR_NOTFOUND);
    ck_assert_msg(strstr(err, "no manifest.json"), "%s", err);
    sqt_rm_tree(dir);
    ck_assert_int_ne(sq_trace_open(dir, &t, &terr), 0);
    ck_assert_msg(strstr(err, "cannot open"), "%s", err);
    ck_assert_int_eq(terr.status, SQ_ERR_NOTFOUND);
}
END_TEST

START_TEST(test_file_errors)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", sqt_tpath("fe"));
    sq_error terr = {0};
    char *err = terr.msg;
    sq_trace t;
    /* a gradient file of the wrong shape for a param */
    sqt_rm_tree(dir);
    write_trace(dir, 2, 2, SQ_ST_F32, 1);
    sq_st_tensor bad[2] = {{.name = "w.a", .dtype = SQ_ST_F32, .ndim = 2, .shape = {5, 7}},
                           {.name = "b", .dtype = SQ_ST_F32, .ndim = 1, .shape = {300}}};
    float zeros[300] = {0};
    bad[0].data = zeros;
    bad[1].data = zeros;
    ck_assert_msg(sq_st_write(sqt_tpath("fe/step-000006/grads-w01.safetensors"), bad, 2, NULL, 0,
                              &terr) == 0, "%s", terr.msg);
    ck_assert_int_ne(sq_trace_open(dir, &t, &terr), 0);
    ck_assert_msg(strstr(err, "step-000006/grads-w01.safetensors: tensor 'w.a': field 'shape': "
                              "[5, 7], but the manifest says [7, 5]"), "%s", err);
    ck_assert_int_eq(terr.status, SQ_ERR_FORMAT);
    /* a missing param */
    ck_assert_int_eq(sq_st_write(sqt_tpath("fe/step-000006/grads-w01.safetensors"), bad + 1, 1, NULL,
                                 0, &terr), 0);
    ck_assert_int_ne(sq_trace_open(dir, &t, &terr), 0);
    ck_assert_msg(strstr(err, "tensor 'w.a': missing"), "%s", err);
    ck_assert_int_eq(terr.status, SQ_ERR_NOTFOUND);
    /* a non-float dtype */
    bad[0].shape[0] = 7, bad[0].shape[1] = 5, bad[0].dtype = SQ_ST_I32;
    ck_assert_int_eq(sq_st_write(sqt_tpath("fe/step-000006/grads-w01.safetensors"), bad, 2, NULL, 0,
                                 &terr), 0);
    ck_assert_int_ne(sq_trace_open(dir, &t, &terr), 0);
    ck_assert_msg(strstr(err, "field 'dtype': I32 is not a floating-point dtype"), "%s", err);
    ck_assert_int_eq(terr.status, SQ_ERR_FORMAT);
    /* NaN: the header is fine, the load names the element */
    bad[0].dtype = SQ_ST_F32;
    float nan_at[300] = {0};
    nan_at[123] = NAN;
    bad[1].data = nan_at;
    ck_assert_int_eq(sq_st_write(sqt_tpath("fe/step-000006/grads-w01.safetensors"), bad, 2, NULL, 0,
                                 &terr), 0);
    ck_assert_msg(sq_trace_open(dir, &t, &terr) == 0, "%s", terr.msg);
    sq_trace_step ts;
    ck_assert_int_eq(sq_trace_step_open(&t, 1, 1, 2, &ts, &terr), 0);
    float x[300];
    ck_assert_int_eq(sq_trace_load(&ts, 1, 0, x, NULL, &terr), 0);
    ck_assert_int_ne(sq_trace_load(&ts, 1, 1, x, NULL, &terr), 0);
    ck_assert_msg(strstr(err, "grads-w01.safetensors: tensor 'b': element 123 is NaN"), "%s", err);
    ck_assert_int_eq(terr.status, SQ_ERR_NONFINITE);
    /* no weights of a worker that is not there */
    ck_assert_int_ne(sq_trace_load(&ts, 2, 0, x, NULL, &terr), 0);
    ck_assert_int_eq(terr.status, SQ_ERR_ARG);
    sq_trace_step_close(&ts);
    sq_trace_close(&t);
}
END_TEST

/* A FIFO or a device where a trace's file should be is refused by name,
** at once: the reader neither blocks in open() waiting for a writer nor
** reads a device without end (issue 15). */
/* Weights at a cadence of their own: the writer takes weights at some
** steps, the manifest lists them, the reader opens them there alone; old
** manifests (true, false, absent) read as before. */
START_TEST(test_weight_cadence)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", sqt_tpath("cad"));
    sqt_rm_tree(dir);
    write_trace(dir, 5, 2, SQ_ST_F32, 2); /* steps 5 .. 9, weights at 5, 7, 9 */
    sq_trace t;
    sq_error terr = {0};
    char *err = terr.msg;
    ck_assert_msg(sq_trace_open(dir, &t, &terr) == 0, "%s", err);
    ck_assert_uint_eq(t.nsteps, 5);
    ck_assert_int_eq(t.has_weights, 1);
    ck_assert_uint_eq(t.nweights, 3);
    for (size_t s = 0; s < 5; s++)
        ck_assert_int_eq(sq_trace_step_has_weights(&t, s), s % 2 == 0);
    ck_assert_int_eq(sq_trace_step_has_weights(&t, 5), 0);
    /* 5 steps x 2 gradients + 3 weights, of 335 fp32 values */
    ck_assert_uint_eq(t.bytes, 13u * 335u * 4u);
    float x[300];
    for (size_t s = 0; s < 5; s++) {
        sq_trace_step ts;
        ck_assert_msg(sq_trace_step_open(&t, s, 1, 2, &ts, &terr) == 0, "%s", err);
        ck_assert_int_eq(ts.has_weights, s % 2 == 0);
        int rc = sq_trace_load(&ts, -1, 1, x, NULL, &terr);
        if (s % 2 == 0) {
            ck_assert_msg(rc == 0, "%s", err);
            ck_assert(x[7] == value(t.steps[s], -1, 1, 7, 0));
        } else {
            ck_assert_int_eq(rc, SQ_ERR_ARG);
            ck_assert_msg(strstr(err, "no weights"), "%s", err);
        }
        ck_assert_msg(sq_trace_load(&ts, 1, 1, x, NULL, &terr) == 0, "%s", err);
        sq_trace_step_close(&ts);
    }
    sq_trace_close(&t);
    /* the manifest lists the steps with weights */
    FILE *f = fopen(sqt_tpath("cad/manifest.json"), "r");
    ck_assert_ptr_nonnull(f);
    char text[4096];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    ck_assert_msg(strstr(text, "\"weights\":\t[5, 7, 9]"), "%s", text);
    /* a listed step whose weights are gone */
    ck_assert_int_eq(unlink(sqt_tpath("cad/step-000007/weights.safetensors")), 0);
    ck_assert_int_eq(sq_trace_open(dir, &t, &terr), SQ_ERR_NOTFOUND);
    ck_assert_msg(strstr(err, "step-000007/weights.safetensors: missing"), "%s", err);
    /* weights at every step and at none still write (and read) as booleans */
    for (int every = 0; every <= 1; every++) {
        sqt_rm_tree(dir);
        write_trace(dir, 2, 2, SQ_ST_F32, every);
        f = fopen(sqt_tpath("cad/manifest.json"), "r");
        len = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[len] = '\0';
        ck_assert_msg(strstr(text, every ? "\"weights\":\ttrue" : "\"weights\":\tfalse"), "%s",
                      text);
        ck_assert_msg(sq_trace_open(dir, &t, &terr) == 0, "%s", err);
        ck_assert_int_eq(t.has_weights, every);
        ck_assert_uint_eq(t.nweights, every ? 2u : 0u);
        ck_assert_int_eq(sq_trace_step_has_weights(&t, 1), every);
        sq_trace_close(&t);
    }
    /* weights at the later steps only: the first step need not have them */
    sqt_rm_tree(dir);
    sq_trace_param p[1] = {{.name = "a", .ndim = 1, .shape = {4}}};
    sq_trace_writer *w;
    float v[4] = {1, 2, 3, 4};
    ck_assert_int_eq(sq_trace_writer_open(&w, dir, 1, p, 1, SQ_ST_F32, NULL, NULL, &terr), 0);
    for (uint32_t step = 1; step <= 3; step++)
        for (int r = step == 1 ? 0 : -1; r < 1; r++) {
            ck_assert_msg(sq_trace_file_begin(w, step, r, &terr) == 0, "%s", err);
            ck_assert_int_eq(sq_trace_file_put(w, v, &terr), 0);
            ck_assert_int_eq(sq_trace_file_end(w, &terr), 0);
        }
    ck_assert_msg(sq_trace_writer_close(w, &terr) == 0, "%s", err);
    ck_assert_msg(sq_trace_open(dir, &t, &terr) == 0, "%s", err);
    ck_assert_uint_eq(t.nweights, 2);
    ck_assert_int_eq(sq_trace_step_has_weights(&t, 0), 0);
    ck_assert_int_eq(sq_trace_step_has_weights(&t, 2), 1);
    sq_trace_close(&t);
}
END_TEST

START_TEST(test_not_regular)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", sqt_tpath("nr"));
    sq_error terr = {0};
    char *err = terr.msg;
    sq_trace t;
    sqt_rm_tree(dir);
    write_trace(dir, 2, 2, SQ_ST_F32, 1);
    const char *grad = sqt_tpath("nr/step-000006/grads-w01.safetensors");
    const char *keep = sqt_tpath("grads-w01.keep");
    ck_assert_int_eq(rename(grad, keep), 0);
    ck_assert_int_eq(mkfifo(grad, 0600), 0);
    ck_assert_int_ne(sq_trace_open(dir, &t, &terr), 0);
    ck_assert_msg(strstr(err, "step-000006/grads-w01.safetensors: not a regular file (a FIFO)"),
                  "%s", err);
    ck_assert_int_eq(terr.status, SQ_ERR_IO);
    /* a file that became a FIFO after the trace was opened */
    unlink(grad);
    ck_assert_int_eq(rename(keep, grad), 0);
    ck_assert_msg(sq_trace_open(dir, &t, &terr) == 0, "%s", terr.msg);
    ck_assert_int_eq(rename(grad, keep), 0);
    ck_assert_int_eq(mkfifo(grad, 0600), 0);
    sq_trace_step ts;
    ck_assert_int_ne(sq_trace_step_open(&t, 1, 1, 2, &ts, &terr), 0);
    ck_assert_msg(strstr(err, "grads-w01.safetensors: not a regular file (a FIFO)"), "%s", err);
    sq_trace_close(&t);
    /* the manifest */
    const char *man = sqt_tpath("nr/manifest.json");
    ck_assert_int_eq(unlink(man), 0);
    ck_assert_int_eq(mkfifo(man, 0600), 0);
    ck_assert_int_ne(sq_trace_open(dir, &t, &terr), 0);
    ck_assert_msg(strstr(err, "manifest.json: not a regular file (a FIFO)"), "%s", err);
    /* a single-file trace */
    ck_assert_int_ne(sq_trace_open(grad, &t, &terr), 0);
    ck_assert_msg(strstr(err, "grads-w01.safetensors: not a regular file (a FIFO)"), "%s", err);
    ck_assert_int_ne(sq_trace_open("/dev/zero", &t, &terr), 0);
    ck_assert_msg(strstr(err, "/dev/zero: not a regular file (a character device)"), "%s", err);
}
END_TEST

/* Writes dir/manifest.json for one step (1), one worker, no weights, with
** params p00000 ... of shape [1]; param `dup`, when below n, takes the name
** of param 0. */
static void write_many_manifest(const char *dir, size_t n, size_t dup)
{
    char path[600];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "{\"format\":\"shardq-trace\",\"version\":1,\"workers\":1,\"weights\":false,"
               "\"steps\":[1],\"params\":[");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s{\"name\":\"p%05zu\",\"shape\":[1]}", i ? "," : "", i == dup ? 0 : i);
    fprintf(f, "]}");
    ck_assert_int_eq(fclose(f), 0);
}

/* A model of 100k params: the manifest's names are checked against each
** other and against the files' tensors by sorting (comparing every pair
** took over a minute), and a name listed twice is still found. */
START_TEST(test_many_params)
{
    const size_t n = 100000;
    char dir[512], sub[600];
    sq_error terr = {0};
    char *err = terr.msg;
    snprintf(dir, sizeof dir, "%s", sqt_tpath("many"));
    sqt_rm_tree(dir);
    ck_assert_int_eq(mkdir(dir, 0777), 0);
    snprintf(sub, sizeof sub, "%s/step-000001", dir);
    ck_assert_int_eq(mkdir(sub, 0777), 0);
    sq_st_tensor *ts = calloc(n, sizeof *ts);
    char (*names)[8] = malloc(n * sizeof *names);
    float *vals = malloc(n * sizeof *vals);
    ck_assert(ts && names && vals);
    for (size_t i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "p%05zu", i);
        vals[i] = (float)i;
        /* in reverse order in the file, so that no order is assumed */
        sq_st_tensor *t = &ts[n - 1 - i];
        t->name = names[i], t->dtype = SQ_ST_F32, t->ndim = 1, t->shape[0] = 1, t->data = &vals[i];
    }
    char fname[700];
    snprintf(fname, sizeof fname, "%s/grads-w00.safetensors", sub);
    ck_assert_msg(sq_st_write(fname, ts, n, NULL, 0, &terr) == 0, "%s", terr.msg);
    write_many_manifest(dir, n, n);
    sq_trace t;
    ck_assert_msg(sq_trace_open(dir, &t, &terr) == 0, "%s", terr.msg);
    ck_assert_uint_eq(t.nparams, n);
    ck_assert_int_eq(sq_trace_param_index(&t, "p00000"), 0);
    ck_assert_int_eq(sq_trace_param_index(&t, "p77777"), 77777);
    ck_assert_int_eq(sq_trace_param_index(&t, "p99999"), 99999);
    ck_assert_int_eq(sq_trace_param_index(&t, "p100000"), -1);
    sq_trace_step st;
    ck_assert_msg(sq_trace_step_open(&t, 0, 0, 1, &st, &terr) == 0, "%s", terr.msg);
    float x;
    ck_assert_msg(sq_trace_load(&st, 0, 77777, &x, NULL, &terr) == 0, "%s", terr.msg);
    ck_assert(x == 77777.0f);
    sq_trace_step_close(&st);
    sq_trace_close(&t);
    /* the last name again as the first: found, named */
    write_many_manifest(dir, n, n - 1);
    ck_assert_int_ne(sq_trace_open(dir, &t, &terr), 0);
    ck_assert_msg(strstr(err, "manifest.json: field 'params': 'p00000' listed twice"), "%s", err);
    /* and a tensor name twice in the writer */
    ts[n - 1].name = names[5];
    ck_assert_int_ne(sq_st_write(fname, ts, n, NULL, 0, &terr), 0);
    ck_assert_msg(strstr(err, "tensor 'p00005': name given twice"), "%s", err);
    free(ts), free(names), free(vals);
}
END_TEST

START_TEST(test_writer_errors)
{
    sq_trace_param p[1] = {{.name = "a", .ndim = 1, .shape = {4}}};
    sq_trace_writer *w;
    sq_error terr = {0};
    char *err = terr.msg;
    float x[4] = {1, 2, 3, 4};
    char dir[512];
    snprintf(dir, sizeof dir, "%s", sqt_tpath("we"));
    sqt_rm_tree(dir);
    ck_assert_int_eq(sq_trace_writer_open(&w, dir, 2, p, 1, SQ_ST_F32, NULL, NULL, &terr), 0);
    /* files in the wrong order */
    ck_assert_int_ne(sq_trace_file_begin(w, 1, 1, &terr), 0);
    ck_assert_msg(strstr(err, "files must come as weights, then grads-w00"), "%s", err);
    ck_assert_int_eq(terr.status, SQ_ERR_ARG);
    ck_assert_int_eq(sq_trace_file_begin(w, 1, 0, &terr), 0);
    /* ending a file before its params are put */
    ck_assert_int_ne(sq_trace_file_end(w, &terr), 0);
    ck_assert_msg(strstr(err, "0 of 1 params written"), "%s", err);
    ck_assert_int_eq(terr.status, SQ_ERR_ARG);
    /* a step left with a worker's file missing */
    ck_assert_int_ne(sq_trace_file_begin(w, 2, 0, &terr), 0);
    ck_assert_msg(strstr(err, "step 1: grads-w00.safetensors was not written"), "%s", err);
    ck_assert_int_ne(sq_trace_writer_close(w, &terr), 0);
    /* without a manifest, what was written is no trace */
    sq_trace t;
    ck_assert_int_ne(sq_trace_open(dir, &t, &terr), 0);
    ck_assert_msg(strstr(err, "no manifest.json"), "%s", err);
    /* steps must increase */
    sqt_rm_tree(dir);
    ck_assert_int_eq(sq_trace_writer_open(&w, dir, 1, p, 1, SQ_ST_F32, NULL, NULL, &terr), 0);
    ck_assert_int_eq(sq_trace_file_begin(w, 3, 0, &terr), 0);
    ck_assert_int_eq(sq_trace_file_put(w, x, &terr), 0);
    ck_assert_int_eq(sq_trace_file_end(w, &terr), 0);
    ck_assert_int_ne(sq_trace_file_begin(w, 2, 0, &terr), 0);
    ck_assert_msg(strstr(err, "steps must increase"), "%s", err);
    ck_assert_int_eq(terr.status, SQ_ERR_ARG);
    ck_assert_int_eq(sq_trace_writer_close(w, &terr), 0);
    ck_assert_int_eq(sq_trace_open(dir, &t, &terr), 0);
    ck_assert_uint_eq(t.nsteps, 1);
    ck_assert_int_eq(t.has_weights, 0);
    sq_trace_close(&t);
    /* a directory that holds something already */
    ck_assert_int_ne(sq_trace_writer_open(&w, dir, 1, p, 1, SQ_ST_F32, NULL, NULL, &terr), 0);
    ck_assert_msg(strstr(err, "not empty"), "%s", err);
    ck_assert_int_eq(terr.status, SQ_ERR_CONFLICT);
    /* an integer dtype */
    ck_assert_int_ne(sq_trace_writer_open(&w, sqt_tpath("we2"), 1, p, 1, SQ_ST_I32, NULL, NULL,
                                          &terr), 0);
    ck_assert_int_eq(terr.status, SQ_ERR_ARG);
}
END_TEST

/* The writer's lock and the trace's identity, by kind: a second writer
** while the first lives is BUSY; a directory holding the trace of another
** owner, or a file of another trace, is a CONFLICT. */
START_TEST(test_writer_busy_and_conflict)
{
    sq_trace_param p[1] = {{.name = "a", .ndim = 1, .shape = {4}}};
    float x[4] = {1, 2, 3, 4};
    sq_error e = {0};
    char dir[512], other[512];
    snprintf(dir, sizeof dir, "%s", sqt_tpath("bc"));
    snprintf(other, sizeof other, "%s", sqt_tpath("bc2"));
    sqt_rm_tree(dir);
    sqt_rm_tree(other);
    sq_trace_writer *w, *w2;
    ck_assert_int_eq(sq_trace_writer_open_as(&w, dir, "me", 1, p, 1, SQ_ST_F32, NULL, NULL, &e),
                     SQ_OK);
    /* the same owner again, while the first writer holds the lock */
    ck_assert_int_eq(sq_trace_writer_open_as(&w2, dir, "me", 1, p, 1, SQ_ST_F32, NULL, NULL, &e),
                     SQ_ERR_BUSY);
    ck_assert_msg(strstr(e.msg, "is writing a trace into this directory"), "%s", e.msg);
    ck_assert_int_eq(sq_trace_file_begin(w, 1, 0, &e), SQ_OK);
    ck_assert_int_eq(sq_trace_file_put(w, x, &e), SQ_OK);
    ck_assert_int_eq(sq_trace_file_end(w, &e), SQ_OK);
    ck_assert_int_eq(sq_trace_writer_close(w, &e), SQ_OK);
    /* another owner's finished trace */
    ck_assert_int_eq(sq_trace_writer_open_as(&w2, dir, "you", 1, p, 1, SQ_ST_F32, NULL, NULL, &e),
                     SQ_ERR_CONFLICT);
    ck_assert_ptr_nonnull(strstr(e.msg, dir));
    /* a file of another trace (another owner, so another id) */
    ck_assert_int_eq(sq_trace_writer_open_as(&w2, other, "you", 1, p, 1, SQ_ST_F32, NULL, NULL,
                                             &e), SQ_OK);
    ck_assert_int_eq(sq_trace_file_begin(w2, 1, 0, &e), SQ_OK);
    ck_assert_int_eq(sq_trace_file_put(w2, x, &e), SQ_OK);
    ck_assert_int_eq(sq_trace_file_end(w2, &e), SQ_OK);
    ck_assert_int_eq(sq_trace_writer_close(w2, &e), SQ_OK);
    char from[600], to[600];
    snprintf(from, sizeof from, "%s/step-000001/grads-w00.safetensors", other);
    snprintf(to, sizeof to, "%s/step-000001/grads-w00.safetensors", dir);
    ck_assert_int_eq(rename(from, to), 0);
    sq_trace t;
    ck_assert_int_eq(sq_trace_open(dir, &t, &e), SQ_ERR_CONFLICT);
    ck_assert_msg(strstr(e.msg, "field 'trace_id'"), "%s", e.msg);
    /* a step past the end is not found */
    ck_assert_int_eq(sq_trace_open(other, &t, &e), SQ_ERR_NOTFOUND); /* its file moved away */
    snprintf(to, sizeof to, "%s", sqt_tpath("bc3"));
    sqt_rm_tree(to);
    ck_assert_int_eq(sq_trace_writer_open(&w, to, 1, p, 1, SQ_ST_F32, NULL, NULL, &e), SQ_OK);
    ck_assert_int_eq(sq_trace_file_begin(w, 1, 0, &e), SQ_OK);
    ck_assert_int_eq(sq_trace_file_put(w, x, &e), SQ_OK);
    ck_assert_int_eq(sq_trace_file_end(w, &e), SQ_OK);
    ck_assert_int_eq(sq_trace_writer_close(w, &e), SQ_OK);
    ck_assert_int_eq(sq_trace_open(to, &t, &e), SQ_OK);
    sq_trace_step ts;
    ck_assert_int_eq(sq_trace_step_open(&t, 1, 0, 1, &ts, &e), SQ_ERR_NOTFOUND);
    sq_trace_close(&t);
}
END_TEST

/* One file of (step, worker) through w: param "a" holds value(step, worker). */
static int put_file(sq_trace_writer *w, uint32_t step, int worker, sq_error *e)
{
    float x[4];
    for (int i = 0; i < 4; i++) x[i] = value(step, worker, 0, (uint64_t)i, 0);
    int rc = sq_trace_file_begin(w, step, worker, e);
    if (!rc) rc = sq_trace_file_put(w, x, e);
    return rc ? rc : sq_trace_file_end(w, e);
}

/* A trace of several processes: joined writers write their workers' files,
** the owner adopts them in worker order, and the reader takes the result as
** if one writer had written it; what does not belong is refused by kind. */
START_TEST(test_writer_join_adopt)
{
    sq_trace_param p[1] = {{.name = "a", .ndim = 2, .shape = {2, 2}}};
    sq_error e = {0};
    char dir[512], other[512];
    snprintf(dir, sizeof dir, "%s", sqt_tpath("join"));
    snprintf(other, sizeof other, "%s", sqt_tpath("join2"));
    sqt_rm_tree(dir);
    sqt_rm_tree(other);
    sq_trace_writer *w, *j1, *j2, *x;
    const char *some = "0123456789abcdef0123456789abcdef";
    /* before the owner opened the directory */
    ck_assert_int_eq(sq_trace_writer_join(&j1, dir, some, 1, 3, p, 1, SQ_ST_F32, &e),
                     SQ_ERR_NOTFOUND);
    ck_assert_msg(strstr(e.msg, "no such directory"), "%s", e.msg);
    ck_assert_int_eq(sq_trace_writer_open(&w, dir, 3, p, 1, SQ_ST_F32, "1x3", NULL, &e), SQ_OK);
    /* a copy: the writer's own string goes with it at close */
    char id[SQ_TRACE_ID_MAX];
    snprintf(id, sizeof id, "%s", sq_trace_writer_id(w));
    ck_assert_uint_eq(strlen(id), 32);
    ck_assert_int_eq(sq_trace_writer_join(&j1, dir, "xyz", 1, 3, p, 1, SQ_ST_F32, &e),
                     SQ_ERR_ARG);
    ck_assert_msg(strstr(e.msg, "trace id 'xyz'"), "%s", e.msg);
    ck_assert_int_eq(sq_trace_writer_join(&j1, dir, id, 3, 3, p, 1, SQ_ST_F32, &e), SQ_ERR_ARG);
    ck_assert_int_eq(sq_trace_writer_join(&j1, dir, id, 1, 3, p, 1, SQ_ST_F32, &e), SQ_OK);
    ck_assert_int_eq(sq_trace_writer_join(&j2, dir, id, 2, 3, p, 1, SQ_ST_F32, &e), SQ_OK);
    /* a joined writer writes its own worker's gradient, nothing else */
    ck_assert_int_eq(sq_trace_file_begin(j1, 1, 0, &e), SQ_ERR_ARG);
    ck_assert_msg(strstr(e.msg, "grads-w00.safetensors: this process joined the trace as worker 1"),
                  "%s", e.msg);
    ck_assert_int_eq(sq_trace_file_begin(j1, 1, -1, &e), SQ_ERR_ARG);
    ck_assert_int_eq(sq_trace_file_adopt(j1, 1, 2, &e), SQ_ERR_ARG);
    /* step 1: written and adopted files in worker order */
    ck_assert_int_eq(put_file(w, 1, -1, &e), SQ_OK);
    ck_assert_int_eq(put_file(w, 1, 0, &e), SQ_OK);
    ck_assert_int_eq(put_file(j1, 1, 1, &e), SQ_OK);
    ck_assert_int_eq(put_file(j1, 1, 1, &e), SQ_ERR_ARG); /* once per step */
    ck_assert_msg(strstr(e.msg, "grads-w01.safetensors again"), "%s", e.msg);
    ck_assert_int_eq(sq_trace_file_adopt(w, 1, 2, &e), SQ_ERR_ARG); /* worker 1 first */
    ck_assert_msg(strstr(e.msg, "files must come as weights"), "%s", e.msg);
    ck_assert_int_eq(sq_trace_file_adopt(w, 1, 1, &e), SQ_OK);
    /* not written yet: refused, and adopted once it is */
    ck_assert_int_eq(sq_trace_file_adopt(w, 1, 2, &e), SQ_ERR_NOTFOUND);
    ck_assert_msg(strstr(e.msg, "grads-w02.safetensors: missing: worker 2's process"), "%s",
                  e.msg);
    ck_assert_int_eq(put_file(j2, 1, 2, &e), SQ_OK);
    ck_assert_int_eq(sq_trace_file_adopt(w, 1, 2, &e), SQ_OK);
    /* step 2: worker 2's file of another trace, then its own */
    ck_assert_int_eq(put_file(w, 2, -1, &e), SQ_OK);
    ck_assert_int_eq(put_file(w, 2, 0, &e), SQ_OK);
    ck_assert_int_eq(put_file(j1, 2, 1, &e), SQ_OK);
    ck_assert_int_eq(sq_trace_file_adopt(w, 2, 1, &e), SQ_OK);
    ck_assert_int_eq(sq_trace_writer_join(&x, dir, some, 2, 3, p, 1, SQ_ST_F32, &e), SQ_OK);
    ck_assert_int_eq(put_file(x, 2, 2, &e), SQ_OK);
    ck_assert_int_eq(sq_trace_writer_close(x, &e), SQ_OK);
    ck_assert_int_eq(sq_trace_file_adopt(w, 2, 2, &e), SQ_ERR_CONFLICT);
    ck_assert_msg(strstr(e.msg, "field 'trace_id'"), "%s", e.msg);
    /* a file of another shape (another writer's params) */
    sq_trace_param q[1] = {{.name = "a", .ndim = 1, .shape = {4}}};
    ck_assert_int_eq(sq_trace_writer_join(&x, dir, id, 2, 3, q, 1, SQ_ST_F32, &e), SQ_OK);
    ck_assert_int_eq(put_file(x, 2, 2, &e), SQ_OK);
    ck_assert_int_eq(sq_trace_writer_close(x, &e), SQ_OK);
    ck_assert_int_eq(sq_trace_file_adopt(w, 2, 2, &e), SQ_ERR_FORMAT);
    ck_assert_msg(strstr(e.msg, "tensor 'a': field 'shape': [4], but the trace's param is [2, 2]"),
                  "%s", e.msg);
    ck_assert_int_eq(put_file(j2, 2, 2, &e), SQ_OK);
    ck_assert_int_eq(sq_trace_file_adopt(w, 2, 2, &e), SQ_OK);
    /* a joined writer left with its file open does not close cleanly */
    ck_assert_int_eq(sq_trace_file_begin(j2, 3, 2, &e), SQ_OK);
    ck_assert_int_eq(sq_trace_writer_close(j2, &e), SQ_ERR_ARG);
    ck_assert_int_eq(sq_trace_writer_close(j1, &e), SQ_OK);
    ck_assert_int_eq(sq_trace_writer_close(w, &e), SQ_OK);
    /* the directory has no writer any more: nothing to join */
    ck_assert_int_eq(sq_trace_writer_join(&j1, dir, id, 1, 3, p, 1, SQ_ST_F32, &e),
                     SQ_ERR_NOTFOUND);
    ck_assert_msg(strstr(e.msg, "no trace is being written here"), "%s", e.msg);
    /* what was written reads back as one writer's trace */
    sq_trace t;
    ck_assert_msg(sq_trace_open(dir, &t, &e) == SQ_OK, "%s", e.msg);
    ck_assert_uint_eq(t.nsteps, 2);
    ck_assert_int_eq(t.workers, 3);
    ck_assert_int_eq(t.has_weights, 1);
    ck_assert_str_eq(t.id, id);
    for (size_t s = 0; s < 2; s++) {
        sq_trace_step ts;
        ck_assert_msg(sq_trace_step_open(&t, s, 1, 3, &ts, &e) == SQ_OK, "%s", e.msg);
        for (int r = -1; r < 3; r++) {
            float y[4];
            ck_assert_msg(sq_trace_load(&ts, r, 0, y, NULL, &e) == SQ_OK, "%s", e.msg);
            for (int i = 0; i < 4; i++)
                ck_assert(y[i] == value(t.steps[s], r, 0, (uint64_t)i, 0));
        }
        sq_trace_step_close(&ts);
    }
    sq_trace_close(&t);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Replay                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct rows_seen {
    sq_stat_row r[256];
    char names[256][16];
    size_t n;
} rows_seen;

static int keep_rows(void *ctx, const sq_stat_row *rows, size_t n, sq_error *err)
{
    rows_seen *s = ctx;
    (void)err;
    for (size_t i = 0; i < n && s->n < 256; i++) {
        s->r[s->n] = rows[i];
        snprintf(s->names[s->n], 16, "%s", rows[i].tensor ? rows[i].tensor : "");
        s->r[s->n].tensor = rows[i].tensor ? s->names[s->n] : NULL;
        s->n++;
    }
    return 0;
}

/* The replay's gradient result for one param and step, and its weights,
** computed here with the world directly: the straight line the replay must
** follow (same seed rule, same worker mapping, same first step). With
** weights at every `every`-th step, the weight path goes from weight step
** to weight step and the steps between have gradient rows alone. */
static void straight_line(int steps, int every)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", sqt_tpath("rp"));
    sqt_rm_tree(dir);
    write_trace(dir, steps, 2, SQ_ST_F32, every);
    const size_t nw = (size_t)(steps + every - 1) / (size_t)every; /* steps with weights */
    sq_trace t;
    sq_error terr = {0};
    ck_assert_int_eq(sq_trace_open(dir, &t, &terr), 0);
    sq_replay_config cfg = {.topo = {2, 2}, .seed = 99, .paths = 3, .tensor_rows = 1};
    ck_assert_int_eq(sq_scheme_preset("sdp4bit", &cfg.scheme, NULL), 0);
    ck_assert_int_eq(sq_scheme_set(&cfg.scheme, "grad.group=32", NULL), 0);
    ck_assert_int_eq(sq_scheme_set(&cfg.scheme, "weight.group=32", NULL), 0);
    /* the straight line below is one world per param; 2 files on 4 workers */
    ck_assert_int_eq(sq_scheme_set(&cfg.scheme, "layout=param", NULL), 0);
    cfg.reuse_workers = 1;
    rows_seen seen = {.n = 0};
    sq_replay_sink sink = {.ctx = &seen, .rows = keep_rows};
    sq_replay_result res;
    sq_error rerr = {0};
    ck_assert_msg(sq_replay_run(&cfg, &t, &sink, &res, &rerr) == 0, "%s", rerr.msg);
    ck_assert_uint_eq(res.steps, (size_t)steps);
    ck_assert_uint_eq(res.params, 2);
    ck_assert(res.has_grad && res.has_weight);
    ck_assert_uint_eq(res.weight_steps, nw);
    /* rows: per tensor `steps` grad + nw - 1 weight, then the same per step */
    ck_assert_uint_eq(seen.n, 3 * ((size_t)steps + nw - 1));

    /* param 1 ("b", 300 elements) by hand */
    sq_world_config wc = {.topo = {2, 2}, .scheme = cfg.scheme, .elements = 300,
                          .seed = 99 ^ ((uint64_t)1 << 40)};
    sq_world *w;
    ck_assert_int_eq(sq_world_open(&wc, &w, NULL), 0);
    const uint64_t S = sq_world_shard(w);
    static float g[300], shard[4096], what[300], wt[300];
    for (size_t s = 0; s < (size_t)steps; s++) {
        uint32_t step = 5 + (uint32_t)s;
        const int weighted = s % (size_t)every == 0;
        static double exact[4096];
        memset(exact, 0, sizeof exact);
        for (int r = 0; r < 4; r++) {
            for (int i = 0; i < 300; i++) g[i] = value(step, r % 2, 1, (uint64_t)i, 0);
            for (int i = 0; i < 300; i++) exact[i] += g[i];
            ck_assert_int_eq(sq_world_put_grad(w, r, g), 0);
        }
        ck_assert_int_eq(sq_world_reduce_grads(w, step), 0);
        sq_erracc acc;
        sq_erracc_init(&acc);
        for (int i = 0; i < 300; i++) exact[i] /= 4;
        for (int r = 0; r < 4; r++) {
            ck_assert_int_eq(sq_world_get_grad_shard(w, r, shard), 0);
            uint64_t first = (uint64_t)r * S;
            uint64_t len = first >= 300 ? 0 : (300 - first < S ? 300 - first : S);
            sq_erracc_add(&acc, shard, exact + first, len);
        }
        sq_errstats want = sq_erracc_finish(&acc);
        for (int i = 0; i < 300; i++) wt[i] = value(step, -1, 1, (uint64_t)i, 0);
        sq_errstats wwant = {0};
        if (s == 0) {
            ck_assert_int_eq(sq_world_init_weights(w, wt), 0);
        } else if (weighted) {
            for (int r = 0; r < 4; r++) {
                static float m[4096];
                memset(m, 0, sizeof m);
                uint64_t first = (uint64_t)r * S;
                for (uint64_t i = 0; i < S && first + i < 300; i++) m[i] = wt[first + i];
                ck_assert_int_eq(sq_world_put_master(w, r, m), 0);
            }
            ck_assert_int_eq(sq_world_gather_weights(w, step), 0);
            ck_assert_int_eq(sq_world_get_weights(w, 3, what), 0);
            double ex[300];
            for (int i = 0; i < 300; i++) ex[i] = wt[i];
            sq_erracc_init(&acc);
            sq_erracc_add(&acc, what, ex, 300);
            wwant = sq_erracc_finish(&acc);
        }
        /* find the replay's rows for (step, b) */
        int found = 0;
        for (size_t k = 0; k < seen.n; k++) {
            const sq_stat_row *x = &seen.r[k];
            if (!x->tensor || strcmp(x->tensor, "b") || x->step != step) continue;
            const sq_errstats *ws = !strcmp(x->path, "grad") ? &want : &wwant;
            ck_assert_msg(x->st.n == ws->n && x->st.mse == ws->mse &&
                              x->st.max_abs == ws->max_abs && x->st.cosine == ws->cosine,
                          "step %u %s: replay mse %.17g, straight line %.17g", step, x->path,
                          x->st.mse, ws->mse);
            found++;
        }
        ck_assert_int_eq(found, s > 0 && weighted ? 2 : 1);
    }
    sq_world_close(w);
    /* step rows are the tensors together */
    for (size_t k = 0; k < seen.n; k++) {
        const sq_stat_row *x = &seen.r[k];
        if (x->tensor) continue;
        double e2 = 0;
        uint64_t n = 0;
        for (size_t j = 0; j < seen.n; j++) {
            const sq_stat_row *y = &seen.r[j];
            if (y->tensor && y->step == x->step && !strcmp(y->path, x->path)) {
                n += y->st.n;
                e2 += y->st.mse * (double)y->st.n;
            }
        }
        ck_assert_uint_eq(n, x->st.n);
        ck_assert(fabs(e2 - x->st.mse * (double)x->st.n) <= 1e-12 * e2);
    }
    sq_trace_close(&t);
}

START_TEST(test_replay_straight_line)
{
    straight_line(3, 1);
}
END_TEST

/* Weights every 2nd step: the all-gather runs at steps 7 and 9 alone, from
** the w-hat of the weight step before. */
START_TEST(test_replay_weight_cadence)
{
    straight_line(5, 2);
}
END_TEST

START_TEST(test_replay_params_differ_in_seed)
{
    /* two params with the same values must not get the same rounding */
    sq_trace_param p[2] = {{.name = "x", .ndim = 1, .shape = {4096}},
                           {.name = "y", .ndim = 1, .shape = {4096}}};
    char dir[512];
    snprintf(dir, sizeof dir, "%s", sqt_tpath("same"));
    sqt_rm_tree(dir);
    sq_trace_writer *w;
    sq_error terr = {0};
    ck_assert_int_eq(sq_trace_writer_open(&w, dir, 4, p, 2, SQ_ST_F32, NULL, NULL, &terr), 0);
    static float g[4096];
    for (int r = 0; r < 4; r++) {
        ck_assert_int_eq(sq_trace_file_begin(w, 1, r, &terr), 0);
        sqt_gen_input(7 + (uint64_t)r, 4096, -12, g);
        ck_assert_int_eq(sq_trace_file_put(w, g, &terr), 0);
        ck_assert_int_eq(sq_trace_file_put(w, g, &terr), 0);
        ck_assert_int_eq(sq_trace_file_end(w, &terr), 0);
    }
    ck_assert_int_eq(sq_trace_writer_close(w, &terr), 0);
    sq_trace t;
    ck_assert_int_eq(sq_trace_open(dir, &t, &terr), 0);
    ck_assert_int_eq(t.has_weights, 0);
    sq_replay_config cfg = {.topo = sq_replay_default_topo(&t), .seed = 3, .paths = 3,
                            .tensor_rows = 1};
    ck_assert_int_eq(cfg.topo.nodes, 1);
    ck_assert_int_eq(cfg.topo.per_node, 4);
    ck_assert_int_eq(sq_scheme_preset("qsdp", &cfg.scheme, NULL), 0);
    rows_seen seen = {.n = 0};
    sq_replay_sink sink = {.ctx = &seen, .rows = keep_rows};
    sq_replay_result res;
    sq_error rerr = {0};
    ck_assert_msg(sq_replay_run(&cfg, &t, &sink, &res, &rerr) == 0, "%s", rerr.msg);
    ck_assert(!res.has_weight);
    ck_assert_uint_eq(seen.n, 3);
    /* the layout's order: a bucket holds the params in reverse */
    int x = strcmp(seen.r[0].tensor, "x") ? 1 : 0, y = 1 - x;
    ck_assert_str_eq(seen.r[x].tensor, "x");
    ck_assert_str_eq(seen.r[y].tensor, "y");
    ck_assert(seen.r[x].st.mse > 0 && seen.r[x].st.mse != seen.r[y].st.mse);
    /* weights only, from a trace without them: nothing to replay */
    cfg.paths = SQ_REPLAY_WEIGHT;
    ck_assert_int_ne(sq_replay_run(&cfg, &t, NULL, &res, &rerr), 0);
    ck_assert_msg(strstr(rerr.msg, "the trace holds no weights"), "%s", rerr.msg);
    sq_trace_close(&t);
}
END_TEST

static void setup(void)
{
    ck_assert_int_eq(sqt_scratch_begin("check_tracedir"), 0);
}

static void teardown(void)
{
    sqt_rm_tree(sqt_tmpdir);
}

int main(void)
{
    Suite *s = suite_create("tracedir");
    TCase *tc = tcase_create("trace");
    tcase_set_timeout(tc, 300); /* 100k params under a sanitizer */
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_roundtrip_dtypes);
    tcase_add_test(tc, test_manifest_errors);
    tcase_add_test(tc, test_file_errors);
    tcase_add_test(tc, test_writer_errors);
    tcase_add_test(tc, test_writer_busy_and_conflict);
    tcase_add_test(tc, test_writer_join_adopt);
    tcase_add_test(tc, test_weight_cadence);
    tcase_add_test(tc, test_not_regular);
    tcase_add_test(tc, test_many_params);
    suite_add_tcase(s, tc);
    tc = tcase_create("replay");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_replay_straight_line);
    tcase_add_test(tc, test_replay_weight_cadence);
    tcase_add_test(tc, test_replay_params_differ_in_seed);
    suite_add_tcase(s, tc);
    return sqt_run(s);
}
