/*
** cmd_demo.c -- `shardq demo`: the main job on its built-in defaults, a tour
** of the whole harness in a few minutes on a laptop. The application layer
** runs it (src/app/demo.c: the six phases, their recipes and the lines that
** matter); this file reads the options and prints what the phases report,
** as `shardq train`, `shardq sweep`, `shardq bench` and `shardq model`
** print the same things.
*/
#include "cli.h"
#include "app/app.h"

#include <getopt.h>
#include <stdio.h>

#define demo_usage cli_help("shardq-demo")

typedef struct demo_ui {
    cli_sweep_printer sweep;
    cli_job capture;
} demo_ui;

static void say(void *ctx, int level, const char *line)
{
    (void)ctx;
    if (level == SQ_APP_SAY_WARN) fprintf(stderr, "shardq demo: %s\n", line);
    else printf("%s\n", line);
    fflush(stdout);
}

/* The capture trains as `shardq train` shows it, in the demo's child. */
static void capture_hooks(void *ctx, sq_sweep_hooks *h)
{
    demo_ui *u = ctx;
    u->capture = (cli_job){.cmd = "train", .lines = 1};
    cli_job_hooks(&u->capture, h);
}

static int captured(void *ctx, const sq_app_train *t, int rc, const sq_error *e,
                    const sq_sweep_outcome *out)
{
    demo_ui *u = ctx;
    u->capture.out = out;
    return cli_train_end(&u->capture, t, rc, e, 0);
}

static void pool(void *ctx, const sq_sweep *sw, const sq_sweep_pool_event *e)
{
    cli_sweep_print(&((demo_ui *)ctx)->sweep, sw, e);
}

/* The figures as they come, one line each (the table is `shardq bench`'s). */
static int bench_line(void *ctx, const sq_bench_event *ev)
{
    (void)ctx;
    if (ev->kind != SQ_BENCH_ROW) return 0;
    const sq_bench_result *r = ev->row;
    int noisy = r->noisy | r->copy_noisy;
    char th[32];
    snprintf(th, sizeof th, "%d thread%s:", r->threads, r->threads == 1 ? "" : "s");
    printf("  %-12s %3d MB, %-12s %8.2f GB/s, %5.1f%% of the copy%s\n", r->op->name, r->size_mb,
           th, r->gbs, 100.0 * r->gbs / r->copy_gbs,
           !noisy                           ? ""
           : noisy & SQ_BENCH_NOISY_SPREAD ? "  NOISY: spread > 25% after 3 tries"
                                           : "  NOISY: under half of 1 thread's after 3 tries");
    fflush(stdout);
    return 0;
}

static void model_table(void *ctx, const sq_app_demo_model *m)
{
    (void)ctx;
    printf("%s on %s, speedup over the baseline by GPU count:\n  %6s", m->model, m->platform,
           "GPUs");
    for (int i = 0; i < m->nschemes; i++) printf(" %8s", m->names[i]);
    printf("\n");
    for (int k = 0; k < m->npts; k++) {
        printf("  %6d", m->pts[k].gpus);
        for (int i = 0; i < m->nschemes; i++)
            printf(" %7.2fx", sq_cost_speedup(&m->pts[k].base, &m->pts[k].cost[i]));
        printf("\n");
    }
    fflush(stdout);
}

/* A failure of the application layer: its sentence ("" when said already)
** and the exit status. */
static int failed(const sq_error *e)
{
    if (e->msg[0]) fprintf(stderr, "shardq demo: %s\n", e->msg);
    return cli_exit_status(e->status ? e->status : SQ_ERR_IO);
}

int cmd_demo(int argc, char **argv)
{
    static const struct option opts[] = {
        {"out", required_argument, NULL, 'o'}, {"corpus", required_argument, NULL, 'c'},
        {"steps", required_argument, NULL, 's'}, {"tiny", no_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    static const char *const longnames[] = {"out", "corpus", "steps", "tiny", "help", NULL};
    sq_app_demo_opts o = {.out = "shardq-demo", .steps = 200};
    uint64_t u;
    int ch;
    opterr = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (ch) {
        case 'o': o.out = optarg; break;
        case 'c': o.corpus = optarg; break;
        case 's':
            if (cli_parse_u64("demo", "--steps", optarg, 1000000, &u)) return CLI_USAGE;
            if (u < 4) {
                fprintf(stderr, "shardq demo: --steps %llu: at least 4 (the trace captures "
                        "four steps)\n", (unsigned long long)u);
                return CLI_USAGE;
            }
            o.steps = (int)u;
            break;
        case 't': o.tiny = 1; break;
        case 'h': fputs(demo_usage, stdout); return CLI_OK;
        default: return cli_option_error("demo", ch, argv, longnames);
        }
    }
    if (cli_check_positional("demo", argv + optind, argc - optind, 0, 0, "no arguments"))
        return CLI_USAGE;
    sq_app_demo *d;
    sq_error err = {0};
    if (sq_app_demo_open(&o, &d, &err)) return failed(&err);
    printf("shardq demo: everything goes to %s (database %s)\n", sq_app_demo_dir(d),
           sq_app_demo_db(d));
    demo_ui ctx = {.sweep = {.quiet = 0}};
    sq_app_demo_ui ui = {.ctx = &ctx, .say = say, .capture_hooks = capture_hooks,
                         .captured = captured, .pool = pool, .bench = bench_line,
                         .model = model_table};
    int rc = CLI_OK;
    if (sq_app_demo_run(d, &ui, &err) == SQ_OK) {
        printf("\nThe three lines that matter:\n");
        for (int i = 0; i < 3; i++) printf("  %s\n", sq_app_demo_line(d, i));
        printf("\nreport: %s/index.html (and report.md), written in %.0f s\n",
               sq_app_demo_report_dir(d), sq_app_demo_elapsed(d));
    } else {
        rc = failed(&err);
        fprintf(stderr, "shardq demo: stopped (exit %d); run it again to resume\n", rc);
    }
    sq_app_demo_close(d);
    return rc;
}
