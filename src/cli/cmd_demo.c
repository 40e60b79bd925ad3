/*
** cmd_demo.c -- `shardq demo`: the main job on its built-in defaults, a tour
** of the whole harness in a few minutes on a laptop:
**
**   1. train the byte-level GPT under the baseline while capturing a trace
**      of its weights and per-worker gradients;
**   2. sweep bits x group sizes x Hadamard, and every preset over three
**      seeds, on that trace (replays);
**   3. train the same model under the main presets (same data, same seed);
**   4. measure the codec kernels beside the copy bandwidth;
**   5. run the cost model for the speedup at cluster scale;
**   6. write the report, and print the lines that matter most.
**
** Every step is the ordinary command (train, sweep, bench, model, report)
** run in this process, every result goes to one database in the output
** directory, and each run carries a key: a demo interrupted at any point
** completes by running it again, and a finished one reruns in seconds.
*/
#define _GNU_SOURCE /* realpath */
#include "cli.h"
#include "store/store.h"

#include <sqlite3.h>

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char demo_usage[] =
    "usage: shardq demo [options]\n"
    "\n"
    "The main job, on built-in defaults: trains the byte-level GPT on the default\n"
    "corpus under the baseline while capturing a trace; sweeps bits, group sizes,\n"
    "the Hadamard transform and every preset over that trace; trains the main\n"
    "presets for comparison; measures the codec kernels; predicts the speedup on\n"
    "the SDP4Bit A100 cluster with the cost model; and writes a report (about\n"
    "four minutes on 2 cores). Everything lands in DIR: shardq.db, the trace,\n"
    "the recipes it ran, and report/index.html. Run it again to resume.\n"
    "\n"
    "options:\n"
    "  --out DIR        where everything goes (default shardq-demo)\n"
    "  --corpus PATH    training text (default $SHARDQ_CORPUS, else Debian's\n"
    "                   fortunes)\n"
    "  --steps N        training steps of each run (default 200)\n"
    "  --tiny           a 1-layer, 32-wide model on 1x2 workers and a short\n"
    "                   sweep: the whole tour in seconds (a smoke test)\n"
    "  -h, --help       this text\n";

/* The presets compared by training: the baseline, the paper's weight and
** gradient halves, SDP4Bit itself and ZeRO++ at 4 bits. */
static const char demo_presets[] = "qw, qwd, tlqhs, sdp4bit, zeropp";

typedef struct demo {
    char out[PATH_MAX];
    char db[PATH_MAX + 16];
    char trace[PATH_MAX + 16];
    char report[PATH_MAX + 16];
    const char *corpus;
    int steps, tiny;
    char every[32]; /* a quarter of the steps: evaluations and captured steps */
    double t0;
} demo;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void phase(const demo *d, int k, const char *what)
{
    printf("\n[%d/6 %5.0f s] %s\n", k, now() - d->t0, what);
    fflush(stdout);
}

/* Runs one subcommand in this process with a NULL-terminated argument list. */
static int run(int (*cmd)(int, char **), const char *const *args)
{
    char *argv[64];
    int argc = 0;
    while (args[argc] && argc < 63) {
        argv[argc] = (char *)args[argc];
        argc++;
    }
    argv[argc] = NULL;
    fflush(stdout);
    int rc = cmd(argc, argv);
    fflush(stdout);
    return rc;
}

/* The model options of every training run. */
static void model_args(const demo *d, const char **a, int *n)
{
    static char steps[32];
    snprintf(steps, sizeof steps, "%d", d->steps);
    a[(*n)++] = "--steps", a[(*n)++] = steps;
    a[(*n)++] = "--eval-every", a[(*n)++] = d->every;
    if (d->tiny) {
        static const char *const tiny[] = {"--layers", "1", "--channels", "32", "--heads", "2",
                                           "--context", "32", "--seq", "32", "--eval-seqs", "8",
                                           "--workers", "1x2"};
        for (size_t i = 0; i < sizeof tiny / sizeof *tiny; i++) a[(*n)++] = tiny[i];
    } else {
        a[(*n)++] = "--workers", a[(*n)++] = "2x4";
    }
    if (d->corpus) a[(*n)++] = "--corpus", a[(*n)++] = d->corpus;
}

static int step_capture(demo *d)
{
    phase(d, 1, "training the GPT under the baseline, capturing a trace of its weights and "
                "gradients");
    const char *a[64] = {"train", "--scheme", "baseline", "--db", d->db, "--key",
                         "demo/capture", "--sweep", "demo-train", "--capture", d->trace,
                         "--capture-every", d->every};
    int n = 13;
    model_args(d, a, &n);
    a[n] = NULL;
    return run(cmd_train, a);
}

static int step_replays(demo *d)
{
    phase(d, 2, "sweeping bits x group sizes x Hadamard, and every preset over 3 seeds, on the "
                "trace");
    char path[PATH_MAX + 32], text[2048];
    snprintf(path, sizeof path, "%s/demo-replay.ini", d->out);
    snprintf(text, sizeof text,
             "; demo-replay.ini -- written by `shardq demo`: the quantization ablation on\n"
             "; the trace the demo's baseline training captured.\n\n"
             "[sweep]\nname = demo-replay\ntrace = trace\nworkers = %s\nseeds = 1\n\n"
             "[grid gradients]\npresets = sdp4bit\npaths = grad\ngrad.bits = %s\n"
             "grad.group = %s\ngrad.hadamard = 0, 32\n\n"
             "[grid presets]\npresets = baseline, qw, qwd, ulq, tlq, tlqhs, sdp4bit, zeropp, "
             "zeropp8, qsdp\nseeds = 1, 2, 3\n",
             d->tiny ? "1x2" : "2x4", d->tiny ? "2, 4, 8" : "2, 3, 4, 6, 8",
             d->tiny ? "32, 128" : "32, 128, 512, 2048");
    if (cli_write_file("demo", path, text, strlen(text))) return CLI_RUNTIME;
    const char *a[] = {"sweep", "--db", d->db, path, NULL};
    return run(cmd_sweep, a);
}

static int step_training(demo *d)
{
    phase(d, 3, "training the same model under the main presets (same data, same seed)");
    char path[PATH_MAX + 32], text[2048], opts[1024] = "";
    const char *a[64];
    int n = 0;
    model_args(d, a, &n);
    /* the same options as recipe keys, but the workers and corpus */
    for (int i = 0; i + 1 < n; i += 2) {
        if (!strcmp(a[i], "--workers") || !strcmp(a[i], "--corpus")) continue;
        size_t len = strlen(opts);
        snprintf(opts + len, sizeof opts - len, "%s = %s\n", a[i] + 2, a[i + 1]);
    }
    snprintf(text, sizeof text,
             "; demo-train.ini -- written by `shardq demo`: the main presets trained like\n"
             "; the demo's baseline (its run is the capture, in the same sweep).\n\n"
             "[sweep]\nname = demo-train\ncommand = train\nworkers = %s\nseeds = 1\n%s%s%s\n"
             "[grid presets]\npresets = %s\n",
             d->tiny ? "1x2" : "2x4", d->corpus ? "corpus = " : "", d->corpus ? d->corpus : "",
             d->corpus ? "\n" : "", demo_presets);
    size_t len = strlen(text);
    snprintf(text + len, sizeof text - len, "%s", opts);
    snprintf(path, sizeof path, "%s/demo-train.ini", d->out);
    if (cli_write_file("demo", path, text, strlen(text))) return CLI_RUNTIME;
    const char *s[] = {"sweep", "--db", d->db, path, NULL};
    return run(cmd_sweep, s);
}

/* Whether the database holds a finished run of this kind: bench and model
** runs carry no key, so the demo looks before it runs them again. */
static int have_done(const demo *d, const char *kind, int *out)
{
    char err[1024];
    sq_store *s;
    *out = 0;
    if (sq_store_open(d->db, SQ_STORE_BUSY_MS, 0, &s, err, sizeof err)) {
        fprintf(stderr, "shardq demo: %s\n", err);
        return -1;
    }
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(sq_store_db(s), "SELECT count(*) FROM runs WHERE kind = ?1 AND "
                           "status = 'done'", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) *out = sqlite3_column_int(st, 0) > 0;
        sqlite3_finalize(st);
    }
    sq_store_close(s);
    if (*out) printf("already done: a %s run is in %s\n", kind, d->db);
    return 0;
}

static int step_bench(demo *d)
{
    phase(d, 4, "measuring the codec kernels beside the copy bandwidth");
    int have;
    if (have_done(d, "bench", &have)) return CLI_RUNTIME;
    if (have) return CLI_OK;
    const char *a[] = {"bench", "--db", d->db, "--sizes", d->tiny ? "1,4" : "1,4,16,64",
                       "--min-time", d->tiny ? "0.01" : "0.05", "--ops",
                       "quantize,quantize-nh,dequantize,quantize-8,sum-requant", NULL};
    return run(cmd_bench, a);
}

static int step_model(demo *d)
{
    phase(d, 5, "predicting the speedup on the SDP4Bit A100 cluster (cost model)");
    int have;
    if (have_done(d, "model", &have)) return CLI_RUNTIME;
    if (have) return CLI_OK;
    const char *a[] = {"model", "--sweep-gpus", "--scheme", "qw,qwd,ulq,tlq,tlqhs,sdp4bit,zeropp",
                       "--db", d->db, NULL};
    return run(cmd_model, a);
}

/* ------------------------------------------------------------------------ */
/* The lines that matter                                                    */
/* ------------------------------------------------------------------------ */

static double q1(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    double v = NAN;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return NAN;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
        v = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    return v;
}

static double replay_err(sqlite3 *db, const char *preset, const char *path)
{
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT avg(m.rel_l2) FROM runs r JOIN step_metrics m ON "
             "m.run_id = r.id WHERE r.sweep = 'demo-replay' AND r.status = 'done' AND r.preset "
             "= '%s' AND m.path = '%s' AND r.key LIKE '%%paths=grad,weight%%'", preset, path);
    return q1(db, sql);
}

static double final_val(sqlite3 *db, const char *preset)
{
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT t.val_loss FROM runs r JOIN train_steps t ON t.run_id = "
             "r.id WHERE r.sweep = 'demo-train' AND r.status = 'done' AND r.preset = '%s' AND "
             "t.val_loss IS NOT NULL ORDER BY r.id DESC, t.step DESC LIMIT 1", preset);
    return q1(db, sql);
}

static double speedup(sqlite3 *db, const char *scheme, int gpus)
{
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT speedup FROM model_results WHERE scheme = '%s' AND gpus "
             "%s ORDER BY run_id DESC, gpus DESC LIMIT 1", scheme,
             gpus ? "= 64" : "= (SELECT max(gpus) FROM model_results)");
    return q1(db, sql);
}

static void key_lines(const demo *d)
{
    char err[1024];
    sq_store *s;
    if (sq_store_open(d->db, SQ_STORE_BUSY_MS, 1, &s, err, sizeof err)) {
        fprintf(stderr, "shardq demo: %s\n", err);
        return;
    }
    sqlite3 *db = sq_store_db(s);
    double g_sdp = replay_err(db, "sdp4bit", "grad"), g_ulq = replay_err(db, "ulq", "grad");
    double w_qw = replay_err(db, "qw", "weight"), w_qwd = replay_err(db, "qwd", "weight");
    double v_base = final_val(db, "baseline"), v_sdp = final_val(db, "sdp4bit");
    double v_qw = final_val(db, "qw");
    double s64 = speedup(db, "sdp4bit", 64), smax = speedup(db, "sdp4bit", 0);
    int gmax = (int)q1(db, "SELECT max(gpus) FROM model_results");
    sq_store_close(s);

    printf("\nThe three lines that matter:\n");
    printf("  error:       on the captured gradients sdp4bit (8/4-bit, Hadamard) adds %.3g "
           "relative L2 error, ulq (4/4-bit) %.3g; 4-bit weight differences (qwd) %.3g against "
           "4-bit weights (qw) %.3g\n", g_sdp, g_ulq, w_qwd, w_qw);
    printf("  convergence: after %d steps the validation loss is %.4f under the baseline, %.4f "
           "(%+.2f%%) under sdp4bit, %.4f (%+.2f%%) under qw\n", d->steps, v_base, v_sdp,
           100 * (v_sdp / v_base - 1), v_qw, 100 * (v_qw / v_base - 1));
    printf("  scale:       sdp4bit is predicted %.2fx faster than the baseline for GPT-1.3B on "
           "64 A100 (SDP4Bit measured 2.39x), %.2fx on %d\n", s64, smax, gmax);
}

/* ------------------------------------------------------------------------ */

static int make_dir(const char *path)
{
    if (mkdir(path, 0777) == 0 || errno == EEXIST) {
        struct stat sb;
        if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return 0;
        fprintf(stderr, "shardq demo: --out %s: not a directory\n", path);
        return -1;
    }
    fprintf(stderr, "shardq demo: --out %s: cannot create: %s\n", path, strerror(errno));
    return -1;
}

int cmd_demo(int argc, char **argv)
{
    static const struct option opts[] = {{"out", required_argument, NULL, 'o'},
                                         {"corpus", required_argument, NULL, 'c'},
                                         {"steps", required_argument, NULL, 's'},
                                         {"tiny", no_argument, NULL, 't'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    static const char *const longnames[] = {"out", "corpus", "steps", "tiny", "help", NULL};
    demo d = {.steps = 200};
    const char *out = "shardq-demo";
    uint64_t u;
    opterr = 0;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (ch) {
        case 'o': out = optarg; break;
        case 'c': d.corpus = optarg; break;
        case 's':
            if (cli_parse_u64("demo", "--steps", optarg, 1000000, &u)) return CLI_USAGE;
            if (u < 4) {
                fprintf(stderr, "shardq demo: --steps %llu: at least 4 (the trace captures "
                        "four steps)\n", (unsigned long long)u);
                return CLI_USAGE;
            }
            d.steps = (int)u;
            break;
        case 't': d.tiny = 1; break;
        case 'h': fputs(demo_usage, stdout); return CLI_OK;
        default: return cli_option_error("demo", ch, argv, longnames);
        }
    }
    if (cli_check_positional("demo", argv + optind, argc - optind, 0, 0, "no arguments"))
        return CLI_USAGE;
    /* absolute: the training recipe is read relative to its own directory */
    static char corpus[PATH_MAX];
    if (d.corpus) {
        if (access(d.corpus, R_OK) != 0 || !realpath(d.corpus, corpus)) {
            fprintf(stderr, "shardq demo: --corpus %s: %s\n", d.corpus, strerror(errno));
            return CLI_RUNTIME;
        }
        d.corpus = corpus;
    }
    if (make_dir(out)) return CLI_RUNTIME;
    /* absolute, so that the recipes written into it are read from anywhere */
    if (!realpath(out, d.out)) {
        fprintf(stderr, "shardq demo: --out %s: %s\n", out, strerror(errno));
        return CLI_RUNTIME;
    }
    snprintf(d.db, sizeof d.db, "%s/shardq.db", d.out);
    snprintf(d.trace, sizeof d.trace, "%s/trace", d.out);
    snprintf(d.report, sizeof d.report, "%s/report", d.out);
    snprintf(d.every, sizeof d.every, "%d", d.steps / 4);
    d.t0 = now();
    printf("shardq demo: everything goes to %s (database %s)\n", d.out, d.db);

    int rc = step_capture(&d);
    if (rc == CLI_OK) rc = step_replays(&d);
    if (rc == CLI_OK) rc = step_training(&d);
    if (rc == CLI_OK) rc = step_bench(&d);
    if (rc == CLI_OK) rc = step_model(&d);
    if (rc == CLI_OK) {
        phase(&d, 6, "writing the report");
        rc = cli_report_write(d.db, d.report, NULL, 0);
    }
    if (rc != CLI_OK) {
        fprintf(stderr, "shardq demo: stopped (exit %d); run it again to resume\n", rc);
        return rc;
    }
    key_lines(&d);
    printf("\nreport: %s/index.html (and report.md), written in %.0f s\n", d.report,
           now() - d.t0);
    return CLI_OK;
}
