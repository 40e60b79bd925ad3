/*
** check_train.c -- the training loop: the corpus and its batches, AdamW and
** the schedule against hand computations, N-worker baseline training against
** one worker on the concatenated batch, the loss falling on real text, every
** preset in the loop, and a captured trace that replays to the bytes the
** training computed.
**
** The text is the command's --help texts (src/cli/help/ of $SHARDQ_SRCDIR, a
** directory the corpus reader takes whole): real English prose that ships
** with the tests and that no rewrite of the manual changes.
*/
#include "check_util.h"
#include "shardq/replay.h"
#include "shardq/train.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static char tmp[512];

static void setup(void)
{
    sqt_mkdtemp(tmp, sizeof tmp, "check_train");
}

static void teardown(void)
{
    sqt_rm_tree(tmp);
}

static const char *corpus_path(void)
{
    static char path[1024];
    const char *src = getenv("SHARDQ_SRCDIR");
    snprintf(path, sizeof path, "%s/src/cli/help", src ? src : ".");
    return path;
}

static void load_corpus(sq_corpus *c)
{
    sq_error e = {0};
    ck_assert_msg(sq_corpus_load(corpus_path(), c, &e) == 0, "%s", e.msg);
}

/* A model small enough to train in a second or two. */
static void tiny_config(sq_train_config *c, const char *preset, int K, int G)
{
    sq_train_defaults(c);
    c->model = (sq_gpt_config){.layers = 2, .channels = 32, .heads = 2, .context = 32};
    c->seq = 32;
    c->batch = 2;
    c->steps = 4;
    c->lr = (sq_lr_schedule){.lr = 3e-3f, .min_lr = 3e-4f, .warmup = 2};
    c->eval_every = 0;
    c->eval_seqs = 8;
    c->topo = (sq_topo){K, G};
    sq_error err = {0};
    /* "PRESET+KNOB": a knob on top (error feedback) */
    char name[32];
    const char *plus = strchr(preset, '+');
    snprintf(name, sizeof name, "%.*s", plus ? (int)(plus - preset) : (int)strlen(preset), preset);
    ck_assert_msg(sq_scheme_preset(name, &c->scheme, &err) == 0, "%s", err.msg);
    if (plus) ck_assert_msg(sq_scheme_set(&c->scheme, plus + 1, &err) == 0, "%s", err.msg);
}

static void set_knob(sq_train_config *c, const char *kv)
{
    sq_error err = {0};
    ck_assert_msg(sq_scheme_set(&c->scheme, kv, &err) == 0, "%s", err.msg);
}

/* ------------------------------------------------------------------------ */
/* What a run produced, recorded by the sinks                               */
/* ------------------------------------------------------------------------ */

#define MAX_STEPS 64
#define MAX_PARAMS 64

typedef struct record {
    double loss[MAX_STEPS], val[MAX_STEPS], norm[MAX_STEPS], ef[MAX_STEPS];
    uint32_t nsteps;
    /* [step][param][what]: copies of the tensors the sink was given */
    float *tensor[MAX_STEPS][MAX_PARAMS][2];
    uint64_t n[MAX_PARAMS];
} record;

static void record_free(record *r)
{
    for (int s = 0; s < MAX_STEPS; s++)
        for (int p = 0; p < MAX_PARAMS; p++)
            for (int k = 0; k < 2; k++) free(r->tensor[s][p][k]);
    memset(r, 0, sizeof *r);
}

static int rec_step(void *ctx, const sq_train_row *row, sq_error *err)
{
    record *r = ctx;
    (void)err;
    ck_assert_uint_lt(row->step, MAX_STEPS);
    r->loss[row->step] = row->loss;
    r->val[row->step] = row->val_loss;
    r->norm[row->step] = row->grad_norm;
    r->ef[row->step] = row->ef_residual;
    r->nsteps = (uint32_t)row->step + 1;
    return 0;
}

static int rec_tensor(void *ctx, uint32_t step, size_t p, int what, const float *x, uint64_t n)
{
    record *r = ctx;
    ck_assert_uint_lt(step, MAX_STEPS);
    ck_assert_uint_lt(p, MAX_PARAMS);
    ck_assert_ptr_null(r->tensor[step][p][what]);
    float *copy = malloc((size_t)n * sizeof *copy);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, x, (size_t)n * sizeof *copy);
    r->tensor[step][p][what] = copy;
    r->n[p] = n;
    return 0;
}

static void train(const sq_train_config *c, const sq_corpus *corpus, record *r, int tensors,
                  sq_train_result *res)
{
    sq_train_sink sink = {.ctx = r, .step = rec_step, .tensor = tensors ? rec_tensor : NULL};
    sq_error err = {0};
    ck_assert_msg(sq_train_run(c, corpus, &sink, res, &err) == 0, "%s: %s",
                  c->scheme.preset, sq_error_message(&err));
}

/* ------------------------------------------------------------------------ */
/* The corpus                                                               */
/* ------------------------------------------------------------------------ */

static void write_text(const char *dir, const char *name, const char *text, size_t len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(text, 1, len, f), len);
    fclose(f);
}

START_TEST(test_corpus_directory)
{
    /* b before a in creation order, a subdirectory, a binary file and a link */
    char big[5000];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (char)('a' + i % 26);
    write_text(tmp, "b.txt", "BBBB", 4);
    write_text(tmp, "a.txt", big, sizeof big);
    char sub[600];
    snprintf(sub, sizeof sub, "%s/sub", tmp);
    ck_assert_int_eq(mkdir(sub, 0777), 0);
    write_text(sub, "c.txt", "CC", 2);
    write_text(tmp, "d.dat", "x\0y", 3);
    char link[600];
    snprintf(link, sizeof link, "%s/e.u8", tmp);
    ck_assert_int_eq(symlink("b.txt", link), 0);
    sq_corpus c;
    sq_error e = {0};
    ck_assert_msg(sq_corpus_load(tmp, &c, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(c.files, 3);
    ck_assert_uint_eq(c.skipped, 2);
    /* a.txt, b.txt, sub/c.txt: 5006 bytes in name order; under ten blocks of
    ** 4096, so blocks of 5006 / 10 = 500, the eleventh holding 6: block 9 is
    ** validation */
    ck_assert_uint_eq(c.ntrain + c.nval, 5006);
    ck_assert_uint_eq(c.nval, 500);
    ck_assert_int_eq(memcmp(c.val, big + 4500, 500), 0);
    ck_assert_int_eq(memcmp(c.train, big, 4500), 0);
    ck_assert_int_eq(memcmp(c.train + 4500, "BBBBCC", 6), 0);
    sq_corpus_free(&c);

    /* a single file is read whatever its name */
    snprintf(link, sizeof link, "%s/a.txt", tmp);
    ck_assert_msg(sq_corpus_load(link, &c, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(c.ntrain + c.nval, sizeof big);
    sq_corpus_free(&c);
}
END_TEST

START_TEST(test_corpus_errors)
{
    sq_corpus c;
    char path[600];
    sq_error e = {0};
    const char *err = e.msg;
    snprintf(path, sizeof path, "%s/none", tmp);
    ck_assert_int_eq(sq_corpus_load(path, &c, &e), SQ_ERR_NOTFOUND);
    /* the library names the file; the option (--corpus) is the CLI's to add */
    ck_assert_msg(strstr(err, path) && strstr(err, "No such file") && !strstr(err, "--corpus"),
                  "%s", err);
    write_text(tmp, "tiny.txt", "hello", 5);
    snprintf(path, sizeof path, "%s/tiny.txt", tmp);
    ck_assert_int_eq(sq_corpus_load(path, &c, &e), SQ_ERR_FORMAT);
    ck_assert_msg(strstr(err, path) && strstr(err, "too little to train on"), "%s", err);
    /* only binary files */
    char dir[600];
    snprintf(dir, sizeof dir, "%s/bin", tmp);
    ck_assert_int_eq(mkdir(dir, 0777), 0);
    write_text(dir, "x.dat", "\0\0\0\0", 4);
    ck_assert_int_eq(sq_corpus_load(dir, &c, &e), SQ_ERR_FORMAT);
    ck_assert_msg(strstr(err, "0 bytes of text in 0 files (1 left out"), "%s", err);

    /* a corpus smaller than a sequence is refused by the trainer, named */
    char text[200];
    memset(text, 'x', sizeof text);
    write_text(tmp, "small.txt", text, sizeof text);
    snprintf(path, sizeof path, "%s/small.txt", tmp);
    ck_assert_msg(sq_corpus_load(path, &c, &e) == 0, "%s", err);
    sq_train_config cfg;
    tiny_config(&cfg, "baseline", 1, 1);
    cfg.seq = 32;
    sq_train_field field;
    ck_assert_int_eq(sq_train_validate(&cfg, &c, &field, &e), SQ_ERR_SPEC);
    ck_assert_int_eq(field, SQ_TRAIN_FIELD_CORPUS);
    ck_assert_msg(strstr(err, path) && strstr(err, "sequence length 32"), "%s", err);
    sq_corpus_free(&c);
}
END_TEST

/* Sequence j of a step does not depend on how the batch is split. */
START_TEST(test_batches_split)
{
    sq_corpus c;
    load_corpus(&c);
    enum { T = 16, N = 4, B = 3 };
    uint8_t all_in[N * B * T], all_tg[N * B * T], in[B * T], tg[B * T];
    sq_corpus_train_batch(&c, 7, 5, 0, N * B, T, all_in, all_tg);
    for (int r = 0; r < N; r++) {
        sq_corpus_train_batch(&c, 7, 5, (uint64_t)r * B, B, T, in, tg);
        ck_assert_int_eq(memcmp(in, all_in + r * B * T, sizeof in), 0);
        ck_assert_int_eq(memcmp(tg, all_tg + r * B * T, sizeof tg), 0);
    }
    /* the targets are the inputs shifted by one byte of the text */
    ck_assert_int_eq(memcmp(all_in + 1, all_tg, T - 1), 0);
    /* another seed or step: other text */
    sq_corpus_train_batch(&c, 8, 5, 0, B, T, in, tg);
    ck_assert_int_ne(memcmp(in, all_in, sizeof in), 0);
    sq_corpus_train_batch(&c, 7, 6, 0, B, T, in, tg);
    ck_assert_int_ne(memcmp(in, all_in, sizeof in), 0);
    /* validation windows: inside the validation text, first at its start */
    sq_corpus_val_seq(&c, 0, 10, T, in, tg);
    ck_assert_int_eq(memcmp(in, c.val, T), 0);
    sq_corpus_val_seq(&c, 9, 10, T, in, tg);
    ck_assert_int_eq(memcmp(tg, c.val + c.nval - T, T), 0);
    sq_corpus_free(&c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The optimizer                                                            */
/* ------------------------------------------------------------------------ */

/* AdamW against the formulas evaluated in double: agreement to a few fp32
** ulps (the fp32 path rounds at each of ~10 operations). */
START_TEST(test_adamw_by_hand)
{
    sq_adamw a = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
    enum { n = 5 };
    float w[n] = {0.5f, -0.25f, 0.0f, 1.0f, -2.0f}, m[n] = {0}, v[n] = {0};
    const float g[2][n] = {{0.1f, -0.2f, 0.0f, 3.0f, 1e-3f}, {0.2f, 0.1f, -0.5f, -3.0f, 1e-3f}};
    double wd[n], md[n] = {0}, vd[n] = {0};
    for (int i = 0; i < n; i++) wd[i] = w[i];
    const float lr = 0.01f, scale = 0.5f;
    for (uint32_t t = 1; t <= 2; t++) {
        sq_adamw_step(&a, lr, t, 1, scale, g[t - 1], w, m, v, n);
        for (int i = 0; i < n; i++) {
            double gi = (double)g[t - 1][i] * scale;
            md[i] = 0.9 * md[i] + 0.1 * gi;
            vd[i] = 0.95 * vd[i] + 0.05 * gi * gi;
            double mh = md[i] / (1 - pow(0.9, t)), vh = vd[i] / (1 - pow(0.95, t));
            wd[i] -= (double)lr * (mh / (sqrt(vh) + 1e-8) + 0.1 * wd[i]);
        }
    }
    for (int i = 0; i < n; i++)
        ck_assert_msg(fabs(w[i] - wd[i]) <= 1e-6 * (fabs(wd[i]) + 1e-2), "w[%d] %.9g vs %.9g", i,
                      (double)w[i], wd[i]);
    /* no decay: a zero gradient leaves the weight as it is */
    float x = 3.0f, mx = 0, vx = 0, zero = 0;
    sq_adamw_step(&a, lr, 1, 0, 1.0f, &zero, &x, &mx, &vx, 1);
    ck_assert_float_eq(x, 3.0f);
    sq_adamw_step(&a, lr, 1, 1, 1.0f, &zero, &x, &mx, &vx, 1);
    ck_assert_float_eq_tol(x, 3.0f * (1 - 0.01f * 0.1f), 1e-6);
}
END_TEST

START_TEST(test_lr_schedule)
{
    sq_lr_schedule s = {.lr = 1.0f, .min_lr = 0.1f, .warmup = 10, .total = 110};
    ck_assert_float_eq_tol(sq_lr_at(&s, 0), 0.1f, 1e-7);
    ck_assert_float_eq_tol(sq_lr_at(&s, 9), 1.0f, 1e-7);
    ck_assert_float_eq_tol(sq_lr_at(&s, 10), 1.0f, 1e-7);
    /* the cosine spans steps 10 .. 109: step 59 is 49/99 of the way */
    ck_assert_float_eq_tol(sq_lr_at(&s, 59), 0.1 + 0.45 * (1 + cos(3.14159265358979 * 49 / 99)),
                           1e-6);
    ck_assert_float_eq_tol(sq_lr_at(&s, 109), 0.1f, 1e-7);
    ck_assert_float_eq_tol(sq_lr_at(&s, 500), 0.1f, 1e-7);
    for (uint32_t t = 11; t < 110; t++) ck_assert(sq_lr_at(&s, t) <= sq_lr_at(&s, t - 1));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Training                                                                 */
/* ------------------------------------------------------------------------ */

/* N workers with the unquantized scheme (fp32 wires) against one worker on
** the concatenated batch. The only difference is where fp32 sums are split:
** each worker's weight gradient sums B T rows and the reduce-scatter then
** adds N means, where one worker sums all N B T rows in one product. That
** changes the gradient by a few fp32 ulps (relative ~1e-7 .. 1e-6), which
** AdamW passes on almost unchanged (its update is m / sqrt(v), insensitive
** to a relative change of g), so after a few steps the losses agree to
** ~1e-6 relative and the weights to ~1e-6 relative L2. The tolerances, 1e-4
** relative for losses and the gradient norm and 1e-4 for the weights, leave
** room above that noise and are still far below what a real error (a wrong
** mean, a missed worker, a batch not split as the data says) makes: such
** errors move the loss in the second or third digit. */
START_TEST(test_baseline_equals_single_worker)
{
    sq_corpus c;
    load_corpus(&c);
    sq_train_config multi, single;
    tiny_config(&multi, "baseline", 2, 2);
    set_knob(&multi, "weight.bits=32");
    multi.steps = 6;
    single = multi;
    single.topo = (sq_topo){1, 1};
    single.batch = multi.batch * 4;
    record a = {0}, b = {0};
    sq_train_result ra, rb;
    train(&multi, &c, &a, 1, &ra);
    train(&single, &c, &b, 1, &rb);
    ck_assert_uint_eq(ra.tokens, rb.tokens);
    double worst_w = 0;
    for (uint32_t s = 0; s < multi.steps; s++) {
        ck_assert_msg(fabs(a.loss[s] - b.loss[s]) <= 1e-4 * fabs(b.loss[s]),
                      "step %u: loss %.9g vs %.9g", s, a.loss[s], b.loss[s]);
        ck_assert_msg(fabs(a.norm[s] - b.norm[s]) <= 1e-4 * fabs(b.norm[s]),
                      "step %u: grad norm %.9g vs %.9g", s, a.norm[s], b.norm[s]);
        /* the model each step computed at */
        double num = 0, den = 0;
        for (size_t p = 0; p < MAX_PARAMS && a.tensor[s][p][SQ_TRAIN_MODEL]; p++)
            for (uint64_t i = 0; i < a.n[p]; i++) {
                double d = (double)a.tensor[s][p][SQ_TRAIN_MODEL][i] -
                           (double)b.tensor[s][p][SQ_TRAIN_MODEL][i];
                num += d * d;
                den += (double)b.tensor[s][p][SQ_TRAIN_MODEL][i] *
                       (double)b.tensor[s][p][SQ_TRAIN_MODEL][i];
            }
        double rel = sqrt(num / den);
        if (rel > worst_w) worst_w = rel;
    }
    ck_assert_msg(worst_w <= 1e-4, "weights differ by %.3g relative L2", worst_w);
    /* and the agreement is not trivial: the weights did move */
    double moved = 0;
    for (uint64_t i = 0; i < a.n[2]; i++)
        moved += fabs((double)a.tensor[5][2][SQ_TRAIN_MODEL][i] -
                      (double)a.tensor[0][2][SQ_TRAIN_MODEL][i]);
    ck_assert(moved > 0);
    fprintf(stderr, "baseline 2x2 vs 1x1: worst weight rel L2 %.3g, final loss %.9g vs %.9g\n",
            worst_w, a.loss[5], b.loss[5]);
    record_free(&a);
    record_free(&b);
    sq_corpus_free(&c);
}
END_TEST

/* The same configuration twice: the same bytes. */
START_TEST(test_reproducible)
{
    sq_corpus c;
    load_corpus(&c);
    sq_train_config cfg;
    tiny_config(&cfg, "sdp4bit", 2, 2);
    record a = {0}, b = {0};
    sq_train_result ra, rb;
    train(&cfg, &c, &a, 0, &ra);
    train(&cfg, &c, &b, 0, &rb);
    for (uint32_t s = 0; s < cfg.steps; s++) ck_assert_double_eq(a.loss[s], b.loss[s]);
    ck_assert_double_eq(ra.final_val, rb.final_val);
    /* another seed: another run */
    cfg.seed = 2;
    train(&cfg, &c, &b, 0, &rb);
    ck_assert_double_ne(a.loss[0], b.loss[0]);
    sq_corpus_free(&c);
}
END_TEST

/* The workers' passes run side by side, one lane per thread: 1, 2 and 3
** threads (3 lanes over 4 workers leave a short last round) give the same
** bytes of every loss, validation loss, reduced gradient and w-hat. */
START_TEST(test_threads_same_bytes)
{
    sq_corpus c;
    load_corpus(&c);
    sq_train_config cfg;
    tiny_config(&cfg, "sdp4bit", 2, 2);
    cfg.eval_every = 2;
    cfg.eval_seqs = 5; /* batches of 2, 2, 1: a short last one */
    record a = {0}, b = {0};
    sq_train_result ra, rb;
    const int saved = sq_get_threads();
    sq_set_threads(1);
    train(&cfg, &c, &a, 1, &ra);
    for (int th = 2; th <= 3; th++) {
        sq_set_threads(th);
        train(&cfg, &c, &b, 1, &rb);
        ck_assert_uint_eq(a.nsteps, b.nsteps);
        for (uint32_t s = 0; s < cfg.steps; s++) {
            ck_assert_msg(a.loss[s] == b.loss[s], "%d threads: step %u loss", th, s);
            ck_assert_msg(a.norm[s] == b.norm[s], "%d threads: step %u norm", th, s);
            ck_assert_msg(isnan(a.val[s]) ? isnan(b.val[s]) : a.val[s] == b.val[s],
                          "%d threads: step %u validation", th, s);
            for (int p = 0; p < MAX_PARAMS; p++)
                for (int k = 0; k < 2; k++) {
                    if (!a.tensor[s][p][k]) continue;
                    ck_assert_ptr_nonnull(b.tensor[s][p][k]);
                    ck_assert_msg(!memcmp(a.tensor[s][p][k], b.tensor[s][p][k],
                                          (size_t)a.n[p] * sizeof(float)),
                                  "%d threads: step %u param %d tensor %d", th, s, p, k);
                }
        }
        ck_assert(ra.final_val == rb.final_val);
        record_free(&b);
    }
    sq_set_threads(saved);
    record_free(&a);
    sq_corpus_free(&c);
}
END_TEST

/* A tiny model on real text: the loss falls well below the uniform
** ln 256 = 5.55 within a few seconds. */
START_TEST(test_loss_falls)
{
    sq_corpus c;
    load_corpus(&c);
    sq_train_config cfg;
    tiny_config(&cfg, "sdp4bit", 2, 2);
    cfg.model = (sq_gpt_config){.layers = 2, .channels = 64, .heads = 4, .context = 64};
    cfg.seq = 64;
    cfg.batch = 2;
    cfg.steps = 60;
    cfg.lr = (sq_lr_schedule){.lr = 3e-3f, .min_lr = 3e-4f, .warmup = 6};
    cfg.eval_every = 30;
    cfg.eval_seqs = 16;
    record r = {0};
    sq_train_result res;
    train(&cfg, &c, &r, 0, &res);
    fprintf(stderr, "loss falls: %.4f -> %.4f, validation %.4f (%.1f s, %.0f tokens/s)\n",
            res.first_loss, res.final_loss, res.final_val, res.seconds,
            (double)res.tokens / res.seconds);
    ck_assert_msg(fabs(res.first_loss - log(256.0)) < 0.2, "initial loss %.4f", res.first_loss);
    /* the help texts change with the commands, so the bounds are on the
    ** fall, with room */
    ck_assert_msg(res.final_loss < res.first_loss - 1.5, "training loss %.4f -> %.4f",
                  res.first_loss, res.final_loss);
    ck_assert_msg(res.final_val < res.first_loss - 1.0, "validation loss %.4f after %.4f",
                  res.final_val, res.first_loss);
    ck_assert(!isnan(r.val[29]) && isnan(r.val[28]) && !isnan(r.val[59]));
    ck_assert_uint_eq(res.tokens, 60ull * 4 * 2 * 64);
    sq_corpus_free(&c);
}
END_TEST

/* Every preset runs in the loop, moves bytes on the links its topology has,
** and keeps the loss finite. */
START_TEST(test_every_preset)
{
    sq_corpus c;
    load_corpus(&c);
    for (size_t k = 0; k < sq_scheme_npresets; k++) {
        sq_train_config cfg;
        tiny_config(&cfg, sq_scheme_presets[k], 2, 2);
        cfg.steps = 3;
        record r = {0};
        sq_train_result res;
        train(&cfg, &c, &r, 0, &res);
        ck_assert_msg(isfinite(res.final_loss) && isfinite(res.final_val), "%s",
                      sq_scheme_presets[k]);
        for (int l = 0; l < SQ_NLINK; l++) {
            ck_assert_msg(res.bytes[SQ_COLL_WEIGHT * SQ_NLINK + l].sent_elems > 0, "%s",
                          sq_scheme_presets[k]);
            ck_assert_msg(res.bytes[SQ_COLL_GRAD * SQ_NLINK + l].sent_elems > 0, "%s",
                          sq_scheme_presets[k]);
        }
    }
    sq_corpus_free(&c);
}
END_TEST

/* Every scheme computes with the baseline's weight precision: the w-hat
** the world gives, bf16 numbers (the baseline's bf16 wire, the quantized
** wires' bf16 reconstruction). Two settings give fp32 weights, by design:
** the baseline with weight.bits=32, and weight.recon=fp32. */
static int weights_on_bf16_grid(const record *r, uint32_t steps, size_t *off)
{
    *off = 0;
    for (uint32_t s = 0; s < steps; s++)
        for (size_t p = 0; p < MAX_PARAMS && r->tensor[s][p][SQ_TRAIN_MODEL]; p++)
            for (uint64_t i = 0; i < r->n[p]; i++) {
                float x = r->tensor[s][p][SQ_TRAIN_MODEL][i];
                *off += sqt_bits(sq_bf16_to_f32(sq_f32_to_bf16(x))) != sqt_bits(x);
            }
    return *off == 0;
}

START_TEST(test_weights_are_bf16)
{
    sq_corpus c;
    load_corpus(&c);
    for (size_t k = 0; k < sq_scheme_npresets + 2; k++) {
        sq_train_config cfg;
        const char *name = k < sq_scheme_npresets ? sq_scheme_presets[k]
                           : k == sq_scheme_npresets ? "baseline" : "qwd";
        tiny_config(&cfg, name, 2, 2);
        if (k == sq_scheme_npresets) set_knob(&cfg, "weight.bits=32");
        if (k == sq_scheme_npresets + 1) set_knob(&cfg, "weight.recon=fp32");
        cfg.steps = 3;
        record r = {0};
        sq_train_result res;
        train(&cfg, &c, &r, 1, &res);
        size_t off;
        int grid = weights_on_bf16_grid(&r, cfg.steps, &off);
        if (k < sq_scheme_npresets)
            ck_assert_msg(grid, "%s: %zu weights the model computed with are not bf16 numbers",
                          name, off);
        else
            ck_assert_msg(!grid, "%s with %s: fp32 weights expected", name,
                          k == sq_scheme_npresets ? "weight.bits=32" : "weight.recon=fp32");
        record_free(&r);
    }
    sq_corpus_free(&c);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Capture and replay                                                       */
/* ------------------------------------------------------------------------ */

typedef struct compare_ctx {
    const record *train;
    int grads, weights; /* tensors compared */
    int mismatches;
    int ef_rows;        /* step rows whose ef_residual equals training's */
} compare_ctx;

/* Error feedback's figure of each step: the replay's step rows against the
** training's (the same sums over the same units in the same order). */
static int cmp_rows(void *ctx, const sq_stat_row *rows, size_t n, sq_error *err)
{
    compare_ctx *c = ctx;
    (void)err;
    for (size_t i = 0; i < n; i++) {
        const sq_stat_row *r = &rows[i];
        if (r->tensor || strcmp(r->path, "grad")) continue;
        ck_assert_uint_lt(r->step, MAX_STEPS);
        double want = c->train->ef[r->step];
        if (r->ef_residual == want || (isnan(want) && isnan(r->ef_residual))) c->ef_rows++;
    }
    return 0;
}

static int cmp_tensor(void *ctx, uint32_t step, size_t p, int path, const float *x, uint64_t n)
{
    compare_ctx *c = ctx;
    const float *want = c->train->tensor[step][p][path == SQ_REPLAY_GRAD ? SQ_TRAIN_REDUCED
                                                                         : SQ_TRAIN_MODEL];
    ck_assert_ptr_nonnull(want);
    ck_assert_uint_eq(n, c->train->n[p]);
    if (memcmp(want, x, (size_t)n * sizeof *x) != 0) {
        c->mismatches++;
    }
    if (path == SQ_REPLAY_GRAD) c->grads++;
    else c->weights++;
    return 0;
}

static void capture_and_replay_as(const char *preset, int K, int G, uint32_t steps,
                                  uint32_t every, const char *layout)
{
    sq_corpus c;
    load_corpus(&c);
    sq_train_config cfg;
    tiny_config(&cfg, preset, K, G);
    if (layout) {
        sq_error e = {0};
        ck_assert_msg(sq_scheme_set(&cfg.scheme, layout, &e) == 0, "%s", e.msg);
    }
    cfg.steps = steps;
    cfg.seed = 11;
    char dir[700];
    snprintf(dir, sizeof dir, "%s/%s-%u-%s", tmp, preset, every, layout ? layout : "default");
    cfg.capture = dir;
    cfg.capture_every = every;
    cfg.capture_model = "{\"kind\":\"gpt\"}";
    record r = {0};
    sq_train_result res;
    train(&cfg, &c, &r, 1, &res);
    uint32_t captured = (steps + every - 1) / every;
    ck_assert_uint_eq(res.captured, captured);
    /* the layout asked for is the one that ran */
    if (layout && !strcmp(layout, "layout=param"))
        ck_assert_uint_eq(res.units, sq_gpt_nparams(&cfg.model));
    else if (layout && !strcmp(layout, "layout.bucket=5000"))
        ck_assert_uint_gt(res.units, 2);
    else
        ck_assert_uint_eq(res.units, 1);

    sq_trace t;
    sq_error rerr = {0}, terr = {0};
    ck_assert_msg(sq_trace_open(dir, &t, &terr) == 0, "%s", terr.msg);
    ck_assert_uint_eq(t.nsteps, captured);
    ck_assert_int_eq(t.workers, K * G);
    ck_assert(t.has_weights);
    ck_assert_uint_eq(t.nparams, sq_gpt_nparams(&cfg.model));
    ck_assert_uint_eq(t.elements, sq_gpt_elements(&cfg.model));
    ck_assert_str_eq(t.model, "{\"kind\":\"gpt\"}");
    char topo[32];
    snprintf(topo, sizeof topo, "%dx%d", K, G);
    ck_assert_str_eq(t.topo, topo);

    /* the weights replay only when every step is there: each all-gather
    ** then starts from the w-hat the training had */
    sq_replay_config rc = {.topo = sq_replay_default_topo(&t), .scheme = cfg.scheme,
                           .seed = cfg.seed,
                           .paths = SQ_REPLAY_GRAD | (every == 1 ? SQ_REPLAY_WEIGHT : 0)};
    compare_ctx cc = {.train = &r};
    sq_replay_sink sink = {.ctx = &cc, .rows = cmp_rows, .tensor = cmp_tensor};
    sq_replay_result rr;
    ck_assert_msg(sq_replay_run(&rc, &t, &sink, &rr, &rerr) == 0, "%s", rerr.msg);
    ck_assert_int_eq(cc.mismatches, 0);
    /* error feedback: the residuals replayed as they were trained (every
    ** step captured), and the same bytes of residual per worker */
    if (every == 1) ck_assert_int_eq(cc.ef_rows, (int)captured);
    ck_assert_uint_eq(rr.residual_bytes, res.residual_bytes);
    ck_assert_int_eq(res.residual_bytes > 0, strstr(preset, ".ef=1") != NULL);
    if (res.residual_bytes) ck_assert(res.ef_residual > 0 && res.ef_residual < 2);
    else ck_assert(isnan(res.ef_residual) && isnan(r.ef[0]));
    ck_assert_int_eq(cc.grads, (int)(captured * t.nparams));
    ck_assert_int_eq(cc.weights, every == 1 ? (int)(captured * t.nparams) : 0);
    sq_trace_close(&t);

    /* the check bites: another seed rounds differently (every preset but
    ** the baseline rounds something stochastically) */
    if (strcmp(preset, "baseline") != 0) {
        ck_assert_msg(sq_trace_open(dir, &t, &terr) == 0, "%s", terr.msg);
        rc.seed = cfg.seed + 1;
        cc = (compare_ctx){.train = &r};
        sink.ctx = &cc;
        ck_assert_msg(sq_replay_run(&rc, &t, &sink, &rr, &rerr) == 0, "%s", rerr.msg);
        ck_assert_int_gt(cc.mismatches, 0);
        sq_trace_close(&t);
    }
    record_free(&r);
    sq_corpus_free(&c);
}

static void capture_and_replay(const char *preset, int K, int G, uint32_t steps, uint32_t every)
{
    capture_and_replay_as(preset, K, G, steps, every, NULL);
}

START_TEST(test_capture_replays_bit_for_bit)
{
    static const char *const presets[] = {"sdp4bit", "qwd", "qw", "tlqhs", "zeropp", "qsdp",
                                          "baseline", "tlqhs+grad.ef=1", "qsdp+grad.inter.ef=1"};
    capture_and_replay(presets[_i], 2, 2, 4, 1);
}
END_TEST

/* both layouts replay bit for bit: one world per param, and buckets small
** enough that the model spans several (the default is one bucket here) */
START_TEST(test_capture_replays_in_every_layout)
{
    static const char *const layouts[] = {"layout=param", "layout.bucket=5000",
                                          "layout.bucket=0"};
    capture_and_replay_as(_i == 0 ? "qwd" : "sdp4bit", 2, 2, 3, 1, layouts[_i]);
}
END_TEST

START_TEST(test_capture_every_second_step)
{
    capture_and_replay("sdp4bit", 2, 2, 5, 2);
}
END_TEST

static Suite *train_suite(void)
{
    Suite *s = suite_create("train");
    TCase *tc = tcase_create("corpus");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_corpus_directory);
    tcase_add_test(tc, test_corpus_errors);
    tcase_add_test(tc, test_batches_split);
    suite_add_tcase(s, tc);
    tc = tcase_create("optimizer");
    tcase_add_test(tc, test_adamw_by_hand);
    tcase_add_test(tc, test_lr_schedule);
    suite_add_tcase(s, tc);
    tc = tcase_create("training");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_baseline_equals_single_worker);
    tcase_add_test(tc, test_reproducible);
    tcase_add_test(tc, test_threads_same_bytes);
    tcase_add_test(tc, test_loss_falls);
    tcase_add_test(tc, test_every_preset);
    tcase_add_test(tc, test_weights_are_bf16);
    tcase_add_loop_test(tc, test_capture_replays_bit_for_bit, 0, 9);
    tcase_add_loop_test(tc, test_capture_replays_in_every_layout, 0, 3);
    tcase_add_test(tc, test_capture_every_second_step);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return sqt_run(train_suite());
}
