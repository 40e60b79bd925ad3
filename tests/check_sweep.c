/*
** check_sweep.c -- the sweep library's recipes (sweep.h): what a key holds,
** how grids expand, and how bad recipes are refused.
**
** A key is a run's identity in the store: a sweep run again skips the keys
** that are done. So two configurations that differ in any one setting must
** have different keys (or one would be skipped as done), and the same
** settings written in another order must have the same key (or a sweep
** would run them again).
*/
#include "shardq/sweep.h"

#include "check_util.h"

#include <check.h>

#include <stdarg.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[512];

static void setup(void) { ck_assert_int_eq(sqt_mkdtemp(dir, sizeof dir, "check_sweep"), 0); }
static void teardown(void) { sqt_rm_tree(dir); }

/* Writes text as DIR/name.ini and returns its path (static storage). */
static const char *recipe(const char *name, const char *text)
{
    static char path[8][700];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, 700, "%s/%s.ini", dir, name);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
    return p;
}

/* Loads text, which must hold exactly one configuration, and returns its key. */
static char *key_of(const char *text)
{
    sq_sweep sw;
    sq_error e = {0};
    int rc = sq_sweep_load(recipe("k", text), NULL, &sw, &e);
    ck_assert_msg(rc == SQ_OK, "%s: %s", text, sq_error_message(&e));
    ck_assert_msg(sw.nruns == 1, "%s: %zu runs", text, sw.nruns);
    char *k = strdup(sw.runs[0].key);
    sq_sweep_free(&sw);
    return k;
}

/* The keys of the n one-configuration recipes, which must all differ. */
static char **distinct_keys(const char *const *variants, size_t n)
{
    char **keys = calloc(n, sizeof *keys);
    ck_assert_ptr_nonnull(keys);
    for (size_t i = 0; i < n; i++) keys[i] = key_of(variants[i]);
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            ck_assert_msg(strcmp(keys[i], keys[j]) != 0, "one key for\n%s\nand\n%s: %s",
                          variants[i], variants[j], keys[i]);
    return keys;
}

static void free_keys(char **keys, size_t n)
{
    for (size_t i = 0; i < n; i++) free(keys[i]);
    free(keys);
}

/* Loads text expecting failure of kind; the sentence must hold every one of
** the NULL-terminated words. */
static void refused(const char *name, const char *text, int kind, ...)
{
    sq_sweep sw;
    sq_error e = {0};
    const char *path = recipe(name, text);
    int rc = sq_sweep_load(path, NULL, &sw, &e);
    ck_assert_msg(rc == kind, "%s: %d, not %d: %s", name, rc, kind, sq_error_message(&e));
    ck_assert_int_eq(e.status, kind);
    ck_assert_msg(strstr(e.msg, path), "%s: the file is not named: %s", name, e.msg);
    ck_assert_uint_eq(sw.nruns, 0);
    ck_assert_ptr_null(sw.runs);
    va_list ap;
    va_start(ap, kind);
    for (const char *w; (w = va_arg(ap, const char *));)
        ck_assert_msg(strstr(e.msg, w), "%s: '%s' is not in: %s", name, w, e.msg);
    va_end(ap);
}

/* ------------------------------------------------------------------------ */
/* Keys                                                                     */
/* ------------------------------------------------------------------------ */

#define REPLAY_BASE "[sweep]\nname = k\ntrace = t1\n"

START_TEST(test_key_every_replay_setting)
{
    /* the base, then the base with one setting changed */
    static const char *const variants[] = {
        REPLAY_BASE,
        "[sweep]\nname = k2\ntrace = t1\n",
        "[sweep]\nname = k\ntrace = t2\n",
        REPLAY_BASE "presets = qsdp\n",
        REPLAY_BASE "grad.bits = 3\n",
        REPLAY_BASE "grad.group = 64\n",
        REPLAY_BASE "weight.bits = 8\n",
        REPLAY_BASE "workers = 2x2\n",
        REPLAY_BASE "workers = 4x1\n",
        REPLAY_BASE "seeds = 2\n",
        REPLAY_BASE "device = cuda\n",
        REPLAY_BASE "paths = grad\n",
        REPLAY_BASE "paths = weight\n",
        REPLAY_BASE "steps = 3\n",
    };
    size_t n = sizeof variants / sizeof *variants;
    char **keys = distinct_keys(variants, n);
    free_keys(keys, n);
}
END_TEST

#define TRAIN_BASE "[sweep]\nname = k\ncommand = train\ncorpus = c.txt\n"

START_TEST(test_key_every_train_setting)
{
    static const char *const variants[] = {
        TRAIN_BASE,
        "[sweep]\nname = k\ncommand = train\ncorpus = d.txt\n",
        TRAIN_BASE "presets = qwd\n",
        TRAIN_BASE "workers = 1x2\n",
        TRAIN_BASE "seeds = 7\n",
        TRAIN_BASE "steps = 10\n",
        TRAIN_BASE "layers = 2\n",
        TRAIN_BASE "channels = 64\n",
        TRAIN_BASE "heads = 2\n",
        TRAIN_BASE "context = 64\n",
        TRAIN_BASE "seq = 64\n",
        TRAIN_BASE "batch = 4\n",
        TRAIN_BASE "lr = 3e-4\n",
        TRAIN_BASE "min-lr = 1e-5\n",
        TRAIN_BASE "warmup = 5\n",
        TRAIN_BASE "beta1 = 0.8\n",
        TRAIN_BASE "beta2 = 0.99\n",
        TRAIN_BASE "eps = 1e-6\n",
        TRAIN_BASE "weight-decay = 0\n",
        TRAIN_BASE "clip = 0.5\n",
        TRAIN_BASE "eval-every = 5\n",
        TRAIN_BASE "eval-seqs = 16\n",
    };
    size_t n = sizeof variants / sizeof *variants;
    char **keys = distinct_keys(variants, n);
    /* a replay and a training run of the same name are other runs */
    char *r = key_of(REPLAY_BASE);
    for (size_t i = 0; i < n; i++) ck_assert_str_ne(r, keys[i]);
    free(r);
    free_keys(keys, n);
}
END_TEST

START_TEST(test_key_order_free)
{
    /* knobs, options and the other settings in two orders, seed under its
    ** other name, and knobs in grid and [sweep] sections */
    char *a = key_of("[sweep]\nname = k\ntrace = t1\nseeds = 3\ngrad.bits = 3\n"
                     "grad.group = 64\nworkers = 2x2\npaths = grad\n");
    char *b = key_of("[sweep]\nname = k\npaths = grad\nworkers = 2x2\ngrad.group = 64\n"
                     "grad.bits = 3\nseed = 3\ntrace = t1\n");
    char *c = key_of("[sweep]\nname = k\ntrace = t1\ngrad.group = 64\n[grid g]\npaths = grad\n"
                     "grad.bits = 3\nworkers = 2x2\nseed = 3\n");
    ck_assert_str_eq(a, b);
    ck_assert_str_eq(a, c);
    free(a), free(b), free(c);
    a = key_of(TRAIN_BASE "layers = 2\nlr = 3e-4\nheads = 2\nclip = 0.5\n");
    b = key_of(TRAIN_BASE "clip = 0.5\nheads = 2\nlr = 3e-4\nlayers = 2\n");
    ck_assert_str_eq(a, b);
    free(a), free(b);
    /* one scheme spelled two ways: the preset's own value given again */
    a = key_of(REPLAY_BASE);
    sq_scheme s;
    char v[64], text[256];
    ck_assert_int_eq(sq_scheme_preset("sdp4bit", &s, NULL), 0);
    ck_assert_int_gt(sq_scheme_get(&s, "grad.inter.bits", v, sizeof v), 0);
    snprintf(text, sizeof text, REPLAY_BASE "grad.inter.bits = %s\n", v);
    b = key_of(text);
    ck_assert_str_eq(a, b);
    free(a), free(b);
}
END_TEST

START_TEST(test_keys_of_a_grid_unique)
{
    sq_sweep sw;
    sq_error e = {0};
    ck_assert_int_eq(sq_sweep_load(recipe("u", "[sweep]\nname = u\ntrace = t\nseeds = 1..3\n"
                                               "[grid a]\ngrad.bits = 2..5\npaths = grad, both\n"
                                               "[grid b]\npresets = qw, qwd, zeropp\n"),
                                   NULL, &sw, &e),
                     SQ_OK);
    ck_assert_uint_eq(sw.nruns, 3 * 4 * 2 + 3 * 3);
    for (size_t i = 0; i < sw.nruns; i++)
        for (size_t j = i + 1; j < sw.nruns; j++)
            ck_assert_msg(strcmp(sw.runs[i].key, sw.runs[j].key) != 0, "runs %zu and %zu: %s", i,
                          j, sw.runs[i].key);
    sq_sweep_free(&sw);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Expansion                                                                */
/* ------------------------------------------------------------------------ */

START_TEST(test_expansion)
{
    sq_sweep sw;
    sq_error e = {0};
    const char *p = recipe("x", "[sweep]\nname = x\ntrace = t\nseeds = 1..3\nworkers = 2x4\n"
                                "[grid a]\ngrad.bits = 2, 4,\n  6, 8\ngrad.group = 32, 128\n"
                                "[grid b]\npresets = qw, qsdp\nseeds = 7\npaths = weight\n");
    ck_assert_msg(sq_sweep_load(p, NULL, &sw, &e) == SQ_OK, "%s", sq_error_message(&e));
    ck_assert_str_eq(sw.name, "x");
    ck_assert_int_eq(sw.command, SQ_SWEEP_REPLAY);
    ck_assert_uint_eq(sw.nruns, 3 * 4 * 2 + 2);
    ck_assert_uint_eq(sw.ninvalid, 0);
    /* grid by grid, keys in file order, the last varying fastest */
    const sq_sweep_config *x = &sw.runs[0];
    ck_assert_str_eq(x->grid, "a");
    ck_assert_str_eq(x->preset, "sdp4bit");
    ck_assert_int_eq(x->nsets, 2);
    ck_assert_str_eq(x->sets[0], "grad.bits=2");
    ck_assert_str_eq(x->sets[1], "grad.group=32");
    ck_assert_uint_eq(x->seed, 1);
    ck_assert_int_eq(x->has_topo, 1);
    ck_assert_int_eq(x->topo.nodes, 2);
    ck_assert_int_eq(x->topo.per_node, 4);
    ck_assert_int_eq(x->paths, SQ_REPLAY_GRAD | SQ_REPLAY_WEIGHT);
    ck_assert_str_eq(x->device, "cpu");
    ck_assert_str_eq(sw.runs[1].sets[1], "grad.group=128");
    ck_assert_uint_eq(sw.runs[2].seed, 1);
    ck_assert_str_eq(sw.runs[2].sets[0], "grad.bits=4");
    ck_assert_str_eq(sw.runs[6].sets[0], "grad.bits=8");
    ck_assert_uint_eq(sw.runs[8].seed, 2);
    ck_assert_str_eq(sw.runs[8].sets[0], "grad.bits=2");
    /* the scheme is the preset with the knobs applied */
    char v[64];
    ck_assert_int_gt(sq_scheme_get(&sw.runs[2].scheme, "grad.inter.bits", v, sizeof v), 0);
    ck_assert_str_eq(v, "4");
    ck_assert_int_gt(sq_scheme_get(&sw.runs[2].scheme, "grad.inter.group", v, sizeof v), 0);
    ck_assert_str_eq(v, "32");
    /* the trace is relative to the recipe's directory */
    char want[700];
    snprintf(want, sizeof want, "%s/t", dir);
    ck_assert_str_eq(x->trace, want);
    /* grid b overrides the seeds, and keeps the workers of [sweep] */
    x = &sw.runs[sw.nruns - 1];
    ck_assert_str_eq(x->grid, "b");
    ck_assert_str_eq(x->preset, "qsdp");
    ck_assert_uint_eq(x->seed, 7);
    ck_assert_int_eq(x->paths, SQ_REPLAY_WEIGHT);
    ck_assert_int_eq(x->topo.nodes, 2);
    ck_assert_str_eq(x->label, "b qsdp seed=7");
    sq_sweep_free(&sw);

    /* --trace replaces every trace, verbatim */
    ck_assert_int_eq(sq_sweep_load(p, "elsewhere/tr", &sw, &e), SQ_OK);
    ck_assert_str_eq(sw.runs[0].trace, "elsewhere/tr");
    sq_sweep_free(&sw);
}
END_TEST

START_TEST(test_train_options_typed)
{
    sq_sweep sw;
    sq_error e = {0};
    const char *p = recipe("t", TRAIN_BASE "layers = 1, 2\nchannels = 16\nheads = 2\n"
                                "lr = 3e-4\nsteps = 40\nbeta2 = 0.99\neval-every = 0x10\n");
    ck_assert_msg(sq_sweep_load(p, NULL, &sw, &e) == SQ_OK, "%s", sq_error_message(&e));
    ck_assert_int_eq(sw.command, SQ_SWEEP_TRAIN);
    ck_assert_uint_eq(sw.nruns, 2);
    const sq_train_config *c = &sw.runs[1].train;
    ck_assert_int_eq(c->model.layers, 2);
    ck_assert_int_eq(c->model.channels, 16);
    ck_assert_int_eq(c->model.heads, 2);
    ck_assert_float_eq(c->lr.lr, 3e-4f);
    ck_assert_uint_eq(c->steps, 40);
    ck_assert_float_eq(c->adamw.beta2, 0.99f);
    ck_assert_uint_eq(c->eval_every, 16);
    /* the defaults that follow from them, as `shardq train` has them */
    ck_assert_float_eq(c->lr.min_lr, 3e-4f / 10);
    ck_assert_uint_eq(c->lr.warmup, 4);
    /* and what was not set is the trainer's default */
    sq_train_config d;
    sq_train_defaults(&d);
    ck_assert_int_eq(c->batch, d.batch);
    ck_assert_float_eq(c->clip, d.clip);
    /* the options as written, for listing */
    ck_assert_int_eq(sw.runs[1].noptions, 6);
    ck_assert_str_eq(sw.runs[1].options[0], "layers=2");
    ck_assert_ptr_null(sw.runs[1].trace);
    char want[700];
    snprintf(want, sizeof want, "%s/c.txt", dir);
    ck_assert_str_eq(sw.runs[1].corpus, want);
    sq_sweep_free(&sw);
}
END_TEST

START_TEST(test_invalid_combinations_counted)
{
    sq_sweep sw;
    sq_error e = {0};
    /* a Hadamard block larger than the group does not validate */
    const char *p = recipe("i", "[sweep]\nname = i\ntrace = t\ngrad.group = 32, 128\n"
                                "grad.hadamard = 0, 64\n");
    ck_assert_msg(sq_sweep_load(p, NULL, &sw, &e) == SQ_OK, "%s", sq_error_message(&e));
    ck_assert_uint_eq(sw.nruns, 3);
    ck_assert_uint_eq(sw.ninvalid, 1);
    ck_assert_ptr_nonnull(sw.first_invalid);
    sq_scheme s;
    sq_error why = {0};
    ck_assert_int_eq(sq_scheme_preset("sdp4bit", &s, NULL), 0);
    ck_assert_int_eq(sq_scheme_set(&s, "grad.group=32", NULL), 0);
    ck_assert_int_eq(sq_scheme_set(&s, "grad.hadamard=64", NULL), 0);
    ck_assert_int_ne(sq_scheme_validate(&s, &why), 0);
    ck_assert_str_eq(sw.first_invalid, why.msg);
    for (size_t i = 0; i < sw.nruns; i++)
        ck_assert_int_eq(sq_scheme_validate(&sw.runs[i].scheme, NULL), 0);
    sq_sweep_free(&sw);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Bad recipes                                                              */
/* ------------------------------------------------------------------------ */

START_TEST(test_bad_recipes)
{
    refused("b1", "[sweep]\nname = b\ncommand = train\nlr = fast\n", SQ_ERR_SPEC, "[sweep] lr",
            "'fast' is not a number", NULL);
    refused("b2", TRAIN_BASE "[grid g]\nlayers = 0\n", SQ_ERR_SPEC, "[g] layers",
            "'0' is below 1", NULL);
    refused("b3", TRAIN_BASE "heads = 70000\n", SQ_ERR_SPEC, "[sweep] heads", "larger than",
            NULL);
    refused("b4", TRAIN_BASE "beta1 = 1.5\n", SQ_ERR_SPEC, "[sweep] beta1", "out of range",
            NULL);
    refused("b5", TRAIN_BASE "trace = t\n", SQ_ERR_SPEC, "[sweep] trace: not a key of a train",
            NULL);
    refused("b6", REPLAY_BASE "layers = 2\n", SQ_ERR_SPEC,
            "[sweep] layers: not a key of a replay sweep", NULL);
    refused("b7", REPLAY_BASE "seeds = x\n", SQ_ERR_SPEC, "[sweep] seeds", NULL);
    refused("b8", REPLAY_BASE "presets = nope\n", SQ_ERR_SPEC, "[sweep] presets",
            "unknown scheme 'nope'", NULL);
    refused("b9", REPLAY_BASE "paths = all\n", SQ_ERR_SPEC, "[sweep] paths", "'all'", NULL);
    refused("b10", REPLAY_BASE "workers = 2y2\n", SQ_ERR_SPEC, "[sweep] workers", NULL);
    refused("b11", REPLAY_BASE "seeds = 1\nseed = 2\n", SQ_ERR_FORMAT, "line 5",
            "[sweep] seed: given twice (first as 'seeds' at line 4)", NULL);
    refused("b12", REPLAY_BASE "[grid a]\nseeds = 1\n[grid a]\nseeds = 2\n", SQ_ERR_FORMAT,
            "line 6: [grid a] given twice (first at line 4)", NULL);
    refused("b13", REPLAY_BASE "presets =\n", SQ_ERR_FORMAT, "[sweep] presets: no value", NULL);
    refused("b14", "[sweep]\nname = b\ntrace = -t\n", SQ_ERR_SPEC, "[sweep] trace",
            "starts with '-'", NULL);
    refused("b15", REPLAY_BASE "[grod a]\nseeds = 1\n", SQ_ERR_SPEC, "[grod a]: unknown section",
            NULL);
    refused("b16", "[sweep]\ntrace = t\n", SQ_ERR_SPEC, "[sweep] name: missing", NULL);
    refused("b17", "[sweep]\nname = b\n", SQ_ERR_SPEC, "[sweep]: no trace", NULL);
    refused("b18", REPLAY_BASE "[grid a]\n", SQ_ERR_SPEC, "line 4: [grid a]: no keys", NULL);
    refused("b19", REPLAY_BASE "seeds = 1..100000\ngrad.group = 1..100000\n", SQ_ERR_SPEC,
            "line 1: [sweep]: 10000000000 configurations", NULL);
    refused("b20", REPLAY_BASE "[grid a]\ngrad.group = 32\ngrad.hadamard = 64\n", SQ_ERR_SPEC,
            "[grid a]: none of its 1 combination is a valid scheme", NULL);
    refused("b21", REPLAY_BASE "[grid a]\nname = z\n", SQ_ERR_SPEC, "[grid a] name: belongs in "
            "[sweep]", NULL);
    refused("b22", "[sweep]\nname = b\ncommand = fly\n", SQ_ERR_SPEC,
            "[sweep] command: 'fly': expected replay or train", NULL);
    refused("b23", REPLAY_BASE "seeds = 1,,2\n", SQ_ERR_SPEC, "[sweep] seeds: empty item", NULL);
    refused("b24", TRAIN_BASE "steps = 200000000\n", SQ_ERR_SPEC, "[sweep] steps", NULL);
    refused("b25", "[sweep]\nname = b\nthis line has no equals sign\n", SQ_ERR_FORMAT, "line 3",
            NULL);

    /* a line longer than the reader's buffer */
    char text[600];
    snprintf(text, sizeof text, REPLAY_BASE "seeds = ");
    size_t k = strlen(text);
    while (k < sizeof text - 3) text[k++] = '1';
    text[k++] = '\n', text[k] = '\0';
    refused("long", text, SQ_ERR_FORMAT, "line 4: longer than", NULL);

    /* a file that is not there */
    sq_sweep sw;
    sq_error e = {0};
    char path[700];
    snprintf(path, sizeof path, "%s/missing.ini", dir);
    ck_assert_int_eq(sq_sweep_load(path, NULL, &sw, &e), SQ_ERR_IO);
    ck_assert_msg(strstr(e.msg, path) && strstr(e.msg, "cannot open"), "%s", e.msg);
    /* NULL err is allowed */
    ck_assert_int_eq(sq_sweep_load(path, NULL, &sw, NULL), SQ_ERR_IO);
    /* a device, a FIFO and a directory are refused before a byte is read:
    ** /dev/zero never ends, and opening a FIFO waits for a writer */
    ck_assert_int_eq(sq_sweep_load("/dev/zero", NULL, &sw, &e), SQ_ERR_IO);
    ck_assert_msg(strstr(e.msg, "/dev/zero: not a regular file (a character device)"), "%s",
                  e.msg);
    snprintf(path, sizeof path, "%s/recipe.fifo", dir);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    ck_assert_int_eq(sq_sweep_load(path, NULL, &sw, &e), SQ_ERR_IO);
    ck_assert_msg(strstr(e.msg, path) && strstr(e.msg, "not a regular file (a FIFO)"), "%s",
                  e.msg);
    unlink(path);
    ck_assert_int_eq(sq_sweep_load(dir, NULL, &sw, &e), SQ_ERR_IO);
    ck_assert_msg(strstr(e.msg, dir) && strstr(e.msg, "is a directory"), "%s", e.msg);
}
END_TEST

/* A recipe in memory reads as the file at its path would: the same runs,
** keys and text, its trace found beside that path, the path in errors. */
START_TEST(test_load_text)
{
    static const char text[] = "[sweep]\nname = m\ntrace = t\nseeds = 1, 2\n"
                               "[grid a]\ngrad.bits = 2, 4\n";
    sq_sweep f, m;
    sq_error e = {0};
    const char *p = recipe("m", text);
    ck_assert_msg(sq_sweep_load(p, NULL, &f, &e) == SQ_OK, "%s", sq_error_message(&e));
    ck_assert_msg(sq_sweep_load_text(p, text, strlen(text), NULL, &m, &e) == SQ_OK, "%s",
                  sq_error_message(&e));
    ck_assert_uint_eq(m.nruns, f.nruns);
    for (size_t i = 0; i < m.nruns; i++) {
        ck_assert_str_eq(m.runs[i].key, f.runs[i].key);
        ck_assert_str_eq(m.runs[i].trace, f.runs[i].trace);
    }
    ck_assert_str_eq(m.text, text);
    ck_assert_str_eq(m.path, p);
    sq_sweep_free(&f);
    sq_sweep_free(&m);
    /* not NUL-terminated: only len bytes are read */
    ck_assert_int_eq(sq_sweep_load_text(p, text, 17, NULL, &m, &e), SQ_ERR_SPEC);
    ck_assert_msg(strstr(e.msg, p) && strstr(e.msg, "trace"), "%s", e.msg);
    ck_assert_int_eq(sq_sweep_load_text(p, "", 0, NULL, &m, &e), SQ_ERR_SPEC);
    ck_assert_msg(strstr(e.msg, "no [sweep] section"), "%s", e.msg);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sweep");
    TCase *tc = tcase_create("keys");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_key_every_replay_setting);
    tcase_add_test(tc, test_key_every_train_setting);
    tcase_add_test(tc, test_key_order_free);
    tcase_add_test(tc, test_keys_of_a_grid_unique);
    suite_add_tcase(s, tc);

    tc = tcase_create("expansion");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_expansion);
    tcase_add_test(tc, test_train_options_typed);
    tcase_add_test(tc, test_invalid_combinations_counted);
    tcase_add_test(tc, test_load_text);
    suite_add_tcase(s, tc);

    tc = tcase_create("refused");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_bad_recipes);
    suite_add_tcase(s, tc);
    return sqt_run(s);
}
