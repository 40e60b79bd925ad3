/*
** check_costfiles.c -- the cost model's files (src/cost/files.c): every
** built-in platform, model and validation table loads; a platform file's
** figures arrive in the struct in SI units; and each kind of bad file fails
** with its kind (SQ_ERR_FORMAT, SQ_ERR_IO, SQ_ERR_NOTFOUND) and a sentence
** that names the file, the key and the line.
*/
#include "check_util.h"
#include "shardq/cost.h"

#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/check_costfiles.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Writes text to dir/name and returns the path (static storage, one at a time). */
static const char *write_file(const char *name, const char *text)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fputs(text, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
    return path;
}

/* A platform with round figures, one key per line (line numbers below). */
static const char platform_text[] =
    "[platform]\n"                 /* 1 */
    "name = round\n"               /* 2 */
    "nodes = 3\n"                  /* 3 */
    "gpus_per_node = 8\n"          /* 4 */
    "achieved_tflops = 150\n"      /* 5 */
    "hbm_gb_s = 2000\n"            /* 6 */
    "quant_gb_s = 500\n"           /* 7 */
    "[intra]\n"                    /* 8 */
    "bandwidth_gb_s = 300\n"       /* 9 */
    "latency_us = 2.5\n"           /* 10 */
    "[inter]\n"                    /* 11 */
    "nics_per_node = 4\n"          /* 12 */
    "nic_gb_s = 50\n"              /* 13 */
    "efficiency = 0.75\n"          /* 14 */
    "communicator_gb_s = 0\n"      /* 15 */
    "latency_us = 10\n";           /* 16 */

/* platform_text with line `line` (1-based) replaced by `with` (NULL: deleted). */
static const char *platform_with(int line, const char *with)
{
    static char buf[2048];
    buf[0] = '\0';
    const char *p = platform_text;
    for (int l = 1; *p; l++) {
        const char *nl = strchr(p, '\n');
        size_t len = (size_t)(nl - p) + 1;
        if (l != line) strncat(buf, p, len);
        else if (with) strcat(buf, with);
        p += len;
    }
    return buf;
}

#define close_rel(a, b) \
    ck_assert_msg(fabs((a) - (b)) <= 1e-12 * fabs(b), "%s = %.17g, expected %.17g", #a, \
                  (double)(a), (double)(b))

START_TEST(test_builtins_load)
{
    char name[128];
    size_t n[3] = {0, 0, 0};
    sq_error e = {0};
    for (size_t i = 0; !sq_cost_builtin_name(SQ_COST_PLATFORM, i, name, sizeof name);
         i++, n[0]++) {
        sq_cost_platform p;
        ck_assert_msg(sq_cost_platform_read(name, &p, &e) == SQ_OK, "%s: %s", name, e.msg);
        ck_assert_str_eq(p.name, name);
        /* every figure of a built-in platform says where it comes from */
        for (int f = 0; f < SQ_COST_NFIGURES; f++)
            ck_assert_msg(p.source[f].kind != SQ_COST_SRC_UNSTATED && p.source[f].note[0],
                          "%s: [sources] %s: not stated", name, sq_cost_figure_key(f));
    }
    for (size_t i = 0; !sq_cost_builtin_name(SQ_COST_MODEL, i, name, sizeof name);
         i++, n[1]++) {
        sq_cost_model_shape m;
        ck_assert_msg(sq_cost_model_read(name, &m, &e) == SQ_OK, "%s: %s", name, e.msg);
        ck_assert(sq_cost_model_params(&m, 1) > 0);
    }
    for (size_t i = 0; !sq_cost_builtin_name(SQ_COST_VALIDATION, i, name, sizeof name);
         i++, n[2]++) {
        static sq_cost_validation v;
        ck_assert_msg(sq_cost_validation_read(name, &v, &e) == SQ_OK, "%s: %s", name, e.msg);
        ck_assert_int_gt(v.nrows, 0);
        /* what a table names must load too */
        sq_cost_platform p;
        ck_assert_msg(sq_cost_platform_read(v.platform, &p, &e) == SQ_OK, "%s", e.msg);
        for (int r = 0; r < v.nrows; r++) {
            sq_cost_model_shape m;
            ck_assert_msg(sq_cost_model_read(v.rows[r].model, &m, &e) == SQ_OK, "%s", e.msg);
            ck_assert(isfinite(v.rows[r].speedup) && v.rows[r].tp >= 1 && v.rows[r].pp >= 1);
        }
    }
    ck_assert_uint_ge(n[0], 2);
    ck_assert_uint_ge(n[1], 6);
    ck_assert_uint_ge(n[2], 1);
    ck_assert_int_eq(sq_cost_builtin_name(SQ_COST_PLATFORM, n[0], name, sizeof name),
                     SQ_ERR_NOTFOUND);
    ck_assert_int_eq(sq_cost_builtin_name(SQ_COST_PLATFORM, 0, name, 4), SQ_ERR_RANGE);
}
END_TEST

/* The built-in copy of a file and the file itself give the same platform. */
START_TEST(test_builtin_is_the_file)
{
    const char *src = getenv("SHARDQ_SRCDIR");
    if (!src) return; /* run outside make check: nothing to compare with */
    char path[1024];
    snprintf(path, sizeof path, "%s/experiments/platforms/a100-slingshot10.ini", src);
    sq_cost_platform a, b;
    sq_error e = {0};
    ck_assert_msg(sq_cost_platform_read("a100-slingshot10", &a, &e) == SQ_OK, "%s", e.msg);
    ck_assert_msg(sq_cost_platform_read(path, &b, &e) == SQ_OK, "%s", e.msg);
    ck_assert_int_eq(memcmp(&a, &b, sizeof a), 0);
    ck_assert_int_eq(a.gpus_per_node, 4);
    close_rel(a.nic_bw, 12.5e9);
}
END_TEST

START_TEST(test_platform_round_trip)
{
    make_dir();
    sq_cost_platform p;
    sq_error e = {0};
    const char *path = write_file("round.ini", platform_text);
    ck_assert_msg(sq_cost_platform_read(path, &p, &e) == SQ_OK, "%s", e.msg);
    ck_assert_str_eq(p.name, "round");
    ck_assert_int_eq(p.nodes, 3);
    ck_assert_int_eq(p.gpus_per_node, 8);
    close_rel(p.achieved_flops, 150e12);
    close_rel(p.hbm_bw, 2000e9);
    close_rel(p.quant_bw, 500e9);
    close_rel(p.intra_bw, 300e9);
    close_rel(p.intra_latency, 2.5e-6);
    ck_assert_int_eq(p.nics_per_node, 4);
    close_rel(p.nic_bw, 50e9);
    close_rel(p.net_efficiency, 0.75);
    ck_assert(p.communicator_bw == 0);
    close_rel(p.inter_latency, 10e-6);
    remove_dir();
}
END_TEST

/* Reading text as a platform fails with kind, and the message holds every
** one of the NULL-ended words. */
static void platform_fails(const char *text, int kind, ...)
{
    const char *path = write_file("bad.ini", text);
    sq_cost_platform p;
    sq_error e = {0};
    ck_assert_int_eq(sq_cost_platform_read(path, &p, &e), kind);
    ck_assert_int_eq(e.status, kind);
    ck_assert_msg(strstr(e.msg, path) != NULL, "no file name in: %s", e.msg);
    va_list ap;
    va_start(ap, kind);
    for (const char *w; (w = va_arg(ap, const char *));)
        ck_assert_msg(strstr(e.msg, w) != NULL, "no '%s' in: %s", w, e.msg);
    va_end(ap);
}

START_TEST(test_format_errors)
{
    make_dir();
    platform_fails(platform_with(13, "nic_speed = 50\n"), SQ_ERR_FORMAT, "[inter]", "nic_speed",
                   "unknown key", "line 13", NULL);
    platform_fails(platform_with(13, "nic_gb_s = fast\n"), SQ_ERR_FORMAT, "[inter]", "nic_gb_s",
                   "'fast' is not a number", "line 13", NULL);
    platform_fails(platform_with(4, "gpus_per_node = 2.5\n"), SQ_ERR_FORMAT, "gpus_per_node",
                   "not a positive integer", "line 4", NULL);
    platform_fails(platform_with(6, "hbm_gb_s = 0\n"), SQ_ERR_FORMAT, "hbm_gb_s", "positive",
                   "line 6", NULL);
    platform_fails(platform_with(14, "efficiency = 1.5\n"), SQ_ERR_FORMAT, "efficiency",
                   "more than 1", "line 14", NULL);
    /* a key given twice names both lines */
    platform_fails(platform_with(16, "latency_us = 10\nlatency_us = 11\n"), SQ_ERR_FORMAT,
                   "[inter]", "latency_us", "given twice", "lines 16 and 17", NULL);
    /* a truncated line: a key without '= value', a section without ']' */
    platform_fails(platform_with(13, "nic_gb_s\n"), SQ_ERR_FORMAT, "line 13", NULL);
    platform_fails(platform_with(11, "[inter\n"), SQ_ERR_FORMAT, "line 11", NULL);
    /* a missing section: its first key is reported missing */
    char text[2048];
    snprintf(text, sizeof text, "%.*s", (int)(strstr(platform_text, "[inter]") - platform_text),
             platform_text);
    platform_fails(text, SQ_ERR_FORMAT, "[inter]", "nics_per_node", "missing", NULL);
    platform_fails(platform_with(6, NULL), SQ_ERR_FORMAT, "[platform]", "hbm_gb_s", "missing",
                   NULL);
    platform_fails("", SQ_ERR_FORMAT, "[platform] name: missing", NULL);
    platform_fails("[platform]\nname = x\nnodes 3\n", SQ_ERR_FORMAT, "line 3",
                   "not 'key = value'", NULL);
    /* a file with a NUL byte is no text */
    const char *bin = write_file("bin.ini", "");
    FILE *f = fopen(bin, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite("a\0b", 1, 3, f), 3);
    ck_assert_int_eq(fclose(f), 0);
    sq_cost_platform p;
    sq_error e = {0};
    ck_assert_int_eq(sq_cost_platform_read(bin, &p, &e), SQ_ERR_FORMAT);
    ck_assert_msg(strstr(e.msg, "not a text file"), "%s", e.msg);

    /* a model whose numbers parse but do not make a model */
    sq_cost_model_shape m;
    const char *path = write_file("m.ini", "[model]\nname = x\nlayers = 2\nhidden = 30\nheads = 4\n"
                                           "vocab = 10\nseq = 8\n");
    ck_assert_int_eq(sq_cost_model_read(path, &m, &e), SQ_ERR_FORMAT);
    ck_assert_msg(strstr(e.msg, path) && strstr(e.msg, "not a multiple of heads"), "%s", e.msg);

    /* a validation row without its speedup */
    static sq_cost_validation v;
    path = write_file("v.ini", "[validate]\nplatform = a100-slingshot10\nscheme = sdp4bit\n"
                               "gpus = 64\nmicro_batch = 1\naccum = 1\ntolerance = 0.1\n"
                               "[row A]\nmodel = gpt-1.3b\ntp = 1\npp = 1\n");
    ck_assert_int_eq(sq_cost_validation_read(path, &v, &e), SQ_ERR_FORMAT);
    ck_assert_msg(strstr(e.msg, "[row A] speedup: missing"), "%s", e.msg);
    path = write_file("v.ini", "[validate]\nplatform = a100-slingshot10\nscheme = sdp4bit\n"
                               "gpus = 64\nmicro_batch = 1\naccum = 1\ntolerance = 0.1\n"
                               "[row A]\nmodel = gpt-1.3b\ntp = 1\npp = 1\nspeedup = 1.2\n"
                               "overlap = maybe\n");
    ck_assert_int_eq(sq_cost_validation_read(path, &v, &e), SQ_ERR_FORMAT);
    ck_assert_msg(strstr(e.msg, "[row A] overlap: unknown key (line 13)"), "%s", e.msg);
    remove_dir();
}
END_TEST

START_TEST(test_io_and_notfound)
{
    make_dir();
    sq_cost_platform p;
    sq_cost_model_shape m;
    static sq_cost_validation v;
    sq_error e = {0};
    char path[128];
    snprintf(path, sizeof path, "%s/none.ini", dir);
    /* a missing file is NOTFOUND, as everywhere in the library */
    ck_assert_int_eq(sq_cost_platform_read(path, &p, &e), SQ_ERR_NOTFOUND);
    ck_assert_msg(strstr(e.msg, path) && strstr(e.msg, "cannot open"), "%s", e.msg);
    /* a directory is no file */
    snprintf(path, sizeof path, "%s/", dir);
    ck_assert_int_eq(sq_cost_model_read(path, &m, &e), SQ_ERR_IO);

    ck_assert_int_eq(sq_cost_platform_read("nope", &p, &e), SQ_ERR_NOTFOUND);
    ck_assert_msg(strstr(e.msg, "no built-in platform 'nope'"), "%s", e.msg);
    ck_assert_int_eq(sq_cost_model_read("gpt-7b", &m, &e), SQ_ERR_NOTFOUND);
    ck_assert_msg(strstr(e.msg, "no built-in model 'gpt-7b'"), "%s", e.msg);
    ck_assert_int_eq(sq_cost_validation_read("nope", &v, &e), SQ_ERR_NOTFOUND);
    /* a built-in name is a model's, not a platform's */
    ck_assert_int_eq(sq_cost_platform_read("gpt-1.3b", &p, &e), SQ_ERR_NOTFOUND);
    /* no sq_error: the kind alone */
    ck_assert_int_eq(sq_cost_platform_read("nope", &p, NULL), SQ_ERR_NOTFOUND);
    ck_assert_int_eq(sq_cost_platform_read(NULL, &p, &e), SQ_ERR_ARG);
    remove_dir();
}
END_TEST

/* [sources]: each figure's source read, written back by
** sq_cost_platform_format and read again the same; a fit to rows of a
** table counts for those rows only, a fit to a table for all of them. */
START_TEST(test_sources)
{
    make_dir();
    char text[4096];
    snprintf(text, sizeof text, "%s\n[sources]\nachieved_tflops = measured: a profile\n"
             "inter.nic_gb_s = fitted tab r1,r2: least squares\n"
             "inter.communicator_gb_s = fitted tab: the paper\nhbm_gb_s = datasheet\n",
             platform_text);
    sq_cost_platform p, q;
    sq_error e = {0};
    const char *path = write_file("src.ini", text);
    ck_assert_msg(sq_cost_platform_read(path, &p, &e) == SQ_OK, "%s", e.msg);
    ck_assert_int_eq(p.source[SQ_COST_FIG_ACHIEVED_TFLOPS].kind, SQ_COST_SRC_MEASURED);
    ck_assert_str_eq(p.source[SQ_COST_FIG_ACHIEVED_TFLOPS].note, "a profile");
    ck_assert_int_eq(p.source[SQ_COST_FIG_HBM].kind, SQ_COST_SRC_DATASHEET);
    ck_assert_int_eq(p.source[SQ_COST_FIG_QUANT].kind, SQ_COST_SRC_UNSTATED);
    const sq_cost_source *nic = &p.source[SQ_COST_FIG_NIC_BW];
    ck_assert_int_eq(nic->kind, SQ_COST_SRC_FITTED);
    ck_assert_str_eq(nic->fitted_to, "tab");
    ck_assert_str_eq(nic->rows, "r1,r2");
    ck_assert(sq_cost_fitted_to(&p, SQ_COST_FIG_NIC_BW, "tab", "r2"));
    ck_assert(!sq_cost_fitted_to(&p, SQ_COST_FIG_NIC_BW, "tab", "r"));
    ck_assert(!sq_cost_fitted_to(&p, SQ_COST_FIG_NIC_BW, "other", "r1"));
    ck_assert(sq_cost_fitted_to(&p, SQ_COST_FIG_COMMUNICATOR, "tab", "anything"));
    ck_assert(!sq_cost_fitted_to(&p, SQ_COST_FIG_ACHIEVED_TFLOPS, "tab", "r1"));
    /* written and read back: the same figures and sources */
    char *out = NULL;
    ck_assert_msg(sq_cost_platform_format(&p, "a comment\nof two lines", &out, &e) == SQ_OK,
                  "%s", e.msg);
    ck_assert_ptr_nonnull(strstr(out, "# of two lines\n"));
    path = write_file("back.ini", out);
    free(out);
    ck_assert_msg(sq_cost_platform_read(path, &q, &e) == SQ_OK, "%s", e.msg);
    ck_assert_int_eq(memcmp(&p, &q, sizeof p), 0);
    /* bad sources name the file, the figure and the line */
    snprintf(text, sizeof text, "%s\n[sources]\nnic_gb_s = datasheet: x\n", platform_text);
    platform_fails(text, SQ_ERR_FORMAT, "[sources] nic_gb_s: not a figure", "inter.nic_gb_s",
                   NULL);
    snprintf(text, sizeof text, "%s\n[sources]\nhbm_gb_s = guessed: x\n", platform_text);
    platform_fails(text, SQ_ERR_FORMAT, "[sources] hbm_gb_s: 'guessed: x' does not begin with",
                   NULL);
    snprintf(text, sizeof text, "%s\n[sources]\nhbm_gb_s = fitted: x\n", platform_text);
    platform_fails(text, SQ_ERR_FORMAT, "'fitted TABLE: how'", NULL);
    snprintf(text, sizeof text, "%s\n[sources]\nhbm_gb_s = datasheet tab: x\n", platform_text);
    platform_fails(text, SQ_ERR_FORMAT, "only 'fitted' takes a table", NULL);
    snprintf(text, sizeof text, "%s\n[sources]\nhbm_gb_s = datasheet\nhbm_gb_s = measured\n",
             platform_text);
    platform_fails(text, SQ_ERR_FORMAT, "[sources] hbm_gb_s: given twice", NULL);
    remove_dir();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("costfiles");
    TCase *tc = tcase_create("files");
    tcase_add_test(tc, test_builtins_load);
    tcase_add_test(tc, test_builtin_is_the_file);
    tcase_add_test(tc, test_platform_round_trip);
    tcase_add_test(tc, test_format_errors);
    tcase_add_test(tc, test_sources);
    tcase_add_test(tc, test_io_and_notfound);
    suite_add_tcase(s, tc);
    return sqt_run(s);
}
