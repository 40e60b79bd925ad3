/*
** cmd_model.c -- `shardq model`: the cost model of one training iteration at
** cluster scale (src/cost/cost.c), per scheme and phase, for one GPU
** count or a sweep of them, beside the baseline; and `--validate`, which
** sets its predictions beside published results.
*/
#include "shardq/bench.h"
#include "cli.h"
#include "shardq/cost.h"
#include "shardq/store.h"

#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define model_usage cli_help("shardq-model")

#define MAX_SCHEMES SQ_COST_MAX_SCHEMES
#define MAX_SETS 64

typedef struct model_opts {
    sq_cost_platform plat;
    sq_cost_model_shape model;
    sq_cost_parallel par;
    const char *quant_source; /* "platform", "--quant-gbs", or the bench run */
    char quant_text[512];
    sq_scheme schemes[MAX_SCHEMES];
    const char *names[MAX_SCHEMES];
    int nschemes;
    sq_scheme baseline;
} model_opts;

/* The study of the options: at gpus, or a sweep up to max_gpus. */
static sq_cost_study study_of(const model_opts *o, int gpus, int max_gpus)
{
    sq_cost_study st = {.plat = &o->plat, .model = &o->model, .par = o->par,
                        .max_gpus = max_gpus, .baseline = &o->baseline, .schemes = o->schemes,
                        .names = o->names, .nschemes = o->nschemes};
    st.par.gpus = gpus;
    return st;
}

/* A platform, model or table that did not load; an unknown built-in name
** gets a hint of where the names are. */
static void load_failed(const char *context, const sq_error *e, const char *what)
{
    fprintf(stderr, "shardq model: %s%s", context, sq_error_message(e));
    if (e->status == SQ_ERR_NOTFOUND)
        fprintf(stderr, " (shardq model --list shows them; a file is named by a path such as "
                "./%s.ini)", what);
    fputc('\n', stderr);
}

/* --quant-db: the quantization throughput a bench run stored in path. */
static int quant_from_db(const char *path, model_opts *o, sq_error *err)
{
    sq_store *s;
    int rc = sq_store_open(path, 1000, 1, &s, err);
    if (rc) return rc;
    sq_bench_quant q;
    sq_error e = {0};
    rc = sq_bench_stored_quant(s, &q, &e);
    sq_store_close(s);
    if (rc != SQ_OK)
        return sq_error_set(err, rc, "%s: %s%s%s%s", path, sq_error_message(&e),
                            rc == SQ_ERR_NOTFOUND ? " (run shardq bench --db " : "",
                            rc == SQ_ERR_NOTFOUND ? path : "", rc == SQ_ERR_NOTFOUND ? ")" : "");
    o->plat.quant_bw = q.gb_per_s * 1e9;
    snprintf(o->quant_text, sizeof o->quant_text, "bench run %lld in %s (%s, %.0f MB, %d thread%s)",
             (long long)q.run, path, q.device, (double)q.elements * 4 / 1e6, q.threads,
             q.threads == 1 ? "" : "s");
    return SQ_OK;
}

/* ------------------------------------------------------------------------ */
/* --validate                                                               */
/* ------------------------------------------------------------------------ */

/* --validate TABLE: the table's rows predicted (sq_cost_validate) and
** printed beside the published figures; CLI_RUNTIME when a row is out of
** tolerance. */
static int validate_table(const char *table, const sq_cost_validation *v, model_opts *o,
                          int json, sq_cost_validation_report *rep)
{
    sq_error err = {0};
    sq_scheme s;
    if (cli_scheme("model", v->scheme, NULL, 0, &s)) return CLI_USAGE;
    snprintf(o->quant_text, sizeof o->quant_text, "platform");
    sq_cost_print_validation_head(stdout, table, v, &o->plat, json);
    int rc = sq_cost_validate(v, table, &o->plat, &o->baseline, &s, rep, &err);
    sq_cost_print_validation_rows(stdout, v, rep, json);
    if (rc != SQ_OK) {
        if (json) printf("]}\n");
        const sq_cost_validation_row *row = &v->rows[rep->nrows];
        char context[128];
        snprintf(context, sizeof context, "--validate: [row %s]: ", row->label);
        load_failed(context, &err, row->model);
        return CLI_USAGE;
    }
    sq_cost_print_validation_tail(stdout, rep, &o->plat, json);
    int out = rep->predicted.out + rep->self.out;
    if (out)
        fprintf(stderr, "shardq model: --validate %s: %d of %d rows out of tolerance (worst "
                "speedup error %.1f%%, tolerance %.0f%%; %d predicted, %d fitted to "
                "themselves)\n", table, out, v->nrows,
                100 * fmax(rep->predicted.worst, rep->self.worst), 100 * v->tolerance,
                rep->predicted.out, rep->self.out);
    return out ? CLI_RUNTIME : CLI_OK;
}

static int validate(const char *table, const char *platform, model_opts *o, int json)
{
    sq_error err = {0};
    sq_cost_validation *v = malloc(sizeof *v);
    sq_cost_validation_report *rep = malloc(sizeof *rep);
    int rc = CLI_USAGE;
    if (!v || !rep) {
        fprintf(stderr, "shardq model: out of memory\n");
        rc = CLI_RUNTIME;
        goto done;
    }
    const char *what = table;
    /* --platform replaces the table's own: the same rows on another
    ** description of the cluster (a calibrated one) */
    if (sq_cost_validation_read(table, v, &err) == SQ_OK) what = platform ? platform : v->platform;
    if (err.status != SQ_OK || sq_cost_platform_read(what, &o->plat, &err) != SQ_OK)
        load_failed("--validate: ", &err, what);
    else
        rc = validate_table(table, v, o, json, rep);
done:
    free(v);
    free(rep);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* --calibrate                                                              */
/* ------------------------------------------------------------------------ */

/* The fit's failures: rows the hardware or the fit cannot explain are the
** run's (exit 1), files and rows that do not read are the options' (2). */
static int calibrate_status(int st)
{
    return st == SQ_ERR_CONFLICT || st == SQ_ERR_RANGE || st == SQ_ERR_NOMEM ? CLI_RUNTIME
                                                                              : CLI_USAGE;
}

/* --calibrate FILE --platform-out OUT: the fit of the platform to the
** measured baseline rows (sq_cost_calibrate), printed, and the calibrated
** platform file written. */
static int calibrate(const char *file, const char *platform, const char *out,
                     const sq_scheme *base, int system, int json)
{
    const char *cmd = "shardq model --calibrate";
    sq_error err = {0};
    sq_cost_measurements *ms = malloc(sizeof *ms);
    sq_cost_calibration *cal = malloc(sizeof *cal);
    sq_cost_platform p0;
    char *text = NULL;
    int rc = CLI_RUNTIME, st;
    if (!ms || !cal) {
        fprintf(stderr, "%s: out of memory\n", cmd);
    } else if (sq_cost_measurements_read(file, ms, &err) != SQ_OK ||
               sq_cost_platform_read(platform, &p0, &err) != SQ_OK) {
        fprintf(stderr, "%s: %s\n", cmd, sq_error_message(&err));
        rc = CLI_USAGE;
    } else if ((st = sq_cost_calibrate(ms, file, &p0, base, system, out, cal, &err)) != SQ_OK) {
        fprintf(stderr, "%s: %s\n", cmd, sq_error_message(&err));
        rc = calibrate_status(st);
    } else if (sq_cost_platform_format(&cal->platform, cal->comment, &text, &err) != SQ_OK) {
        fprintf(stderr, "%s: %s\n", cmd, sq_error_message(&err));
    } else if (!cli_write_file("model", out, text, strlen(text))) {
        if (json) sq_cost_print_calibration_json(stdout, cal, ms, out);
        else sq_cost_print_calibration(stdout, cal, ms, file, out);
        rc = CLI_OK;
    }
    free(text);
    free(ms);
    free(cal);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The command                                                              */
/* ------------------------------------------------------------------------ */

enum {
    O_PLATFORM = 256, O_MODEL, O_GPUS, O_SWEEP, O_MAXG, O_TP, O_PP, O_MB, O_ACCUM, O_OVERLAP,
    O_SCHEME, O_SET, O_QGBS, O_QDB, O_DB, O_VALIDATE, O_LIST, O_JSON, O_SYSTEM, O_HPZ,
    O_CALIBRATE, O_PLATFORM_OUT
};

static const struct option model_options[] = {
    {"platform", required_argument, NULL, O_PLATFORM},
    {"model", required_argument, NULL, O_MODEL},
    {"gpus", required_argument, NULL, O_GPUS},
    {"sweep-gpus", no_argument, NULL, O_SWEEP},
    {"max-gpus", required_argument, NULL, O_MAXG},
    {"tp", required_argument, NULL, O_TP},
    {"pp", required_argument, NULL, O_PP},
    {"micro-batch", required_argument, NULL, O_MB},
    {"accum", required_argument, NULL, O_ACCUM},
    {"overlap", no_argument, NULL, O_OVERLAP},
    {"scheme", required_argument, NULL, O_SCHEME},
    {"set", required_argument, NULL, O_SET},
    {"quant-gbs", required_argument, NULL, O_QGBS},
    {"quant-db", required_argument, NULL, O_QDB},
    {"db", required_argument, NULL, O_DB},
    {"validate", required_argument, NULL, O_VALIDATE},
    {"list", no_argument, NULL, O_LIST},
    {"json", no_argument, NULL, O_JSON},
    {"system", required_argument, NULL, O_SYSTEM},
    {"hpz", no_argument, NULL, O_HPZ},
    {"calibrate", required_argument, NULL, O_CALIBRATE},
    {"platform-out", required_argument, NULL, O_PLATFORM_OUT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

static const char *const model_longnames[] = {
    "platform", "model", "gpus", "sweep-gpus", "max-gpus", "tp", "pp", "micro-batch", "accum",
    "overlap", "scheme", "set", "quant-gbs", "quant-db", "db", "validate", "list", "json",
    "system", "hpz", "calibrate", "platform-out", "help", NULL};

static int parse_int(const char *opt, const char *text, int max, int *out)
{
    uint64_t u;
    if (cli_parse_u64("model", opt, text, (uint64_t)max, &u)) return -1;
    if (u < 1) {
        fprintf(stderr, "shardq model: %s: must be at least 1\n", opt);
        return -1;
    }
    *out = (int)u;
    return 0;
}

/* The options of one `shardq model` beside those model_opts keeps. */
typedef struct model_args {
    const char *platform, *model, *scheme_list, *db, *quant_db, *table, *calibrate_file;
    const char *platform_out;
    const char *sets[MAX_SETS];
    int nsets, gpus, sweep, max_gpus, json, list, platform_given;
    double quant_gbs;
} model_args;

/* One option: 0, or -1 when it is wrong (said why). */
static int parse_option(int ch, const char *arg, model_args *a, model_opts *o)
{
    switch (ch) {
    case O_PLATFORM: a->platform = arg, a->platform_given = 1; return 0;
    case O_MODEL: a->model = arg; return 0;
    case O_GPUS: return parse_int("--gpus", arg, 1 << 20, &a->gpus);
    case O_SWEEP: a->sweep = 1; return 0;
    case O_MAXG: return parse_int("--max-gpus", arg, 1 << 20, &a->max_gpus);
    case O_TP: return parse_int("--tp", arg, 1024, &o->par.tp);
    case O_PP: return parse_int("--pp", arg, 1024, &o->par.pp);
    case O_MB: return parse_int("--micro-batch", arg, 1 << 20, &o->par.micro_batch);
    case O_ACCUM: return parse_int("--accum", arg, 1 << 20, &o->par.accum);
    case O_OVERLAP: o->par.overlap = 1; return 0;
    case O_SCHEME: a->scheme_list = arg; return 0;
    case O_SET:
        if (a->nsets == MAX_SETS) {
            fprintf(stderr, "shardq model: more than %d --set options\n", MAX_SETS);
            return -1;
        }
        a->sets[a->nsets++] = arg;
        return 0;
    case O_QGBS: return cli_parse_double("model", "--quant-gbs", arg, 1e-6, 1e9, &a->quant_gbs);
    case O_QDB: a->quant_db = arg; return 0;
    case O_DB: a->db = arg; return 0;
    case O_VALIDATE: a->table = arg; return 0;
    case O_LIST: a->list = 1; return 0;
    case O_JSON: a->json = 1; return 0;
    case O_SYSTEM:
        if (!strcmp(arg, "megatron")) o->par.system = SQ_COST_MEGATRON;
        else if (!strcmp(arg, "zero3")) o->par.system = SQ_COST_ZERO3;
        else {
            fprintf(stderr, "shardq model: --system: '%s' is not megatron or zero3\n", arg);
            return -1;
        }
        return 0;
    case O_HPZ: o->par.hpz = 1; return 0;
    case O_CALIBRATE: a->calibrate_file = arg; return 0;
    case O_PLATFORM_OUT: a->platform_out = arg; return 0;
    default: return -1;
    }
}

/* The command line: CLI_OK to go on (*done after --help), else the exit
** status. */
static int parse_args(int argc, char **argv, model_args *a, model_opts *o, int *done)
{
    opterr = 0;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, ":h", model_options, NULL)) != -1) {
        if (ch == 'h') {
            fputs(model_usage, stdout);
            *done = 1;
            return CLI_OK;
        }
        if (ch == '?' || ch == ':') return cli_option_error("model", ch, argv, model_longnames);
        if (parse_option(ch, optarg, a, o)) return CLI_USAGE;
    }
    if (cli_check_positional("model", argv + optind, argc - optind, 0, 0, "no arguments"))
        return CLI_USAGE;
    if (a->quant_db && a->quant_gbs > 0) {
        fprintf(stderr, "shardq model: --quant-gbs and --quant-db: give one\n");
        return CLI_USAGE;
    }
    return CLI_OK;
}

/* --scheme LIST (or every preset), each with the --set knobs. */
static int read_schemes(const model_args *a, model_opts *o)
{
    static char list_buf[1024];
    if (a->scheme_list) {
        if (strlen(a->scheme_list) >= sizeof list_buf) {
            fprintf(stderr, "shardq model: --scheme: list too long\n");
            return CLI_USAGE;
        }
        strcpy(list_buf, a->scheme_list);
        for (char *save, *t = strtok_r(list_buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (o->nschemes == MAX_SCHEMES) {
                fprintf(stderr, "shardq model: --scheme: more than %d schemes\n", MAX_SCHEMES);
                return CLI_USAGE;
            }
            o->names[o->nschemes++] = t;
        }
        if (!o->nschemes) {
            fprintf(stderr, "shardq model: --scheme: empty list\n");
            return CLI_USAGE;
        }
    } else {
        for (size_t i = 0; i < sq_scheme_npresets && i < MAX_SCHEMES; i++)
            o->names[o->nschemes++] = sq_scheme_presets[i];
    }
    for (int i = 0; i < o->nschemes; i++)
        if (cli_scheme("model", o->names[i], a->sets, a->nsets, &o->schemes[i])) return CLI_USAGE;
    return CLI_OK;
}

/* The platform, the model and the quantization kernels' throughput. */
static int read_inputs(const model_args *a, model_opts *o)
{
    sq_error err = {0};
    if (sq_cost_platform_read(a->platform, &o->plat, &err) != SQ_OK) {
        load_failed("", &err, a->platform);
        return CLI_USAGE;
    }
    if (sq_cost_model_read(a->model, &o->model, &err) != SQ_OK) {
        load_failed("", &err, a->model);
        return CLI_USAGE;
    }
    snprintf(o->quant_text, sizeof o->quant_text, "platform %s", o->plat.name);
    if (a->quant_gbs > 0) {
        o->plat.quant_bw = a->quant_gbs * 1e9;
        snprintf(o->quant_text, sizeof o->quant_text, "--quant-gbs");
    }
    if (a->quant_db && quant_from_db(a->quant_db, o, &err) != SQ_OK) {
        fprintf(stderr, "shardq model: --quant-db: %s\n", sq_error_message(&err));
        return CLI_RUNTIME;
    }
    return CLI_OK;
}

/* The predictions (stored with --db) and their tables. */
static int predict(const model_args *a, model_opts *o, sq_cost_point *pts)
{
    int gpus = a->gpus;
    if (a->sweep && gpus) {
        fprintf(stderr, "shardq model: --gpus and --sweep-gpus: give one\n");
        return CLI_USAGE;
    }
    const int gpus_given = gpus > 0;
    if (!a->sweep && !gpus) gpus = o->plat.nodes * o->plat.gpus_per_node;
    /* with --db the library predicts and stores; a prediction that fails
    ** stores nothing, one that is stored and fails is still printed */
    sq_cost_study st = study_of(o, gpus, a->sweep ? a->max_gpus : 0);
    sq_error err = {0};
    int n = 0;
    int stored = a->db ? sq_cost_record(a->db, SQ_STORE_BUSY_MS, &st, pts, &n, NULL, &err)
                       : sq_cost_study_run(&st, pts, &n, &err);
    if (!n) {
        /* a layout refused ("7 GPUs are not whole nodes of 4 GPUs") is the
        ** options' doing: name them, and where the GPU count came from */
        if (err.status == SQ_ERR_ARG) {
            char g[96];
            if (a->sweep)
                snprintf(g, sizeof g, "--sweep-gpus (up to --max-gpus %d)", a->max_gpus);
            else
                snprintf(g, sizeof g, "--gpus %d%s", gpus,
                         gpus_given ? "" : " (the nodes of --platform)");
            fprintf(stderr, "shardq model: %s, --tp %d, --pp %d: %s\n", g, o->par.tp, o->par.pp,
                    sq_error_message(&err));
        } else {
            fprintf(stderr, "shardq model: %s\n", sq_error_message(&err));
        }
        return CLI_USAGE;
    }
    if (a->json) sq_cost_print_json(stdout, &st, o->quant_text, pts, n);
    else if (a->sweep) sq_cost_print_sweep(stdout, &st, o->quant_text, pts, n);
    else sq_cost_print_point(stdout, &st, o->quant_text, &pts[0]);
    if (stored != SQ_OK) {
        fprintf(stderr, "shardq model: %s\n", sq_error_message(&err));
        return CLI_RUNTIME;
    }
    if (a->db && !a->json) printf("\nstored in %s\n", a->db);
    return CLI_OK;
}

/* What runs instead of a prediction: --calibrate or --validate; -1 when
** neither is asked. */
static int calibrate_or_validate(const model_args *a, model_opts *o)
{
    if (a->calibrate_file) {
        if (!a->platform_out) {
            fprintf(stderr, "shardq model: --calibrate: give --platform-out FILE, where the "
                    "calibrated platform goes\n");
            return CLI_USAGE;
        }
        if (a->table || a->sweep || a->gpus || a->scheme_list || a->db) {
            fprintf(stderr, "shardq model: --calibrate fits the platform alone: leave out "
                    "--validate, --gpus, --sweep-gpus, --scheme and --db (predict with "
                    "--platform %s afterwards)\n", a->platform_out);
            return CLI_USAGE;
        }
        return calibrate(a->calibrate_file, a->platform, a->platform_out, &o->baseline,
                         o->par.system, a->json);
    }
    if (a->table) return validate(a->table, a->platform_given ? a->platform : NULL, o, a->json);
    return -1;
}

static int model_main(const model_args *a, model_opts *o, sq_cost_point *pts)
{
    if (a->list) {
        sq_cost_print_builtins(stdout);
        printf("validation tables:\n  sdp4bit-a100         SDP4Bit Table 2, the A100 rows\n");
        return CLI_OK;
    }
    if (o->par.hpz && o->par.system != SQ_COST_ZERO3) {
        fprintf(stderr, "shardq model: --hpz: hpZ is a ZeRO-3 partition: give --system zero3\n");
        return CLI_USAGE;
    }
    if (a->platform_out && !a->calibrate_file) {
        fprintf(stderr, "shardq model: --platform-out: only with --calibrate FILE\n");
        return CLI_USAGE;
    }
    /* ZeRO-3 reduces the gradients in the training dtype (bf16), Megatron's
    ** distributed optimizer in fp32 */
    const char *const zero3_grads[] = {"grad.intra.bits=16", "grad.inter.bits=16"};
    int zero3 = o->par.system == SQ_COST_ZERO3;
    if (cli_scheme("model", "baseline", zero3 ? zero3_grads : NULL, zero3 ? 2 : 0, &o->baseline))
        return CLI_USAGE;
    int rc = calibrate_or_validate(a, o);
    if (rc >= 0) return rc;
    if ((rc = read_inputs(a, o)) != CLI_OK || (rc = read_schemes(a, o)) != CLI_OK) return rc;
    return predict(a, o, pts);
}

int cmd_model(int argc, char **argv)
{
    model_args a = {.platform = "a100-slingshot10", .model = "gpt-1.3b", .max_gpus = 1024};
    model_opts *o = calloc(1, sizeof *o);
    sq_cost_point *pts = calloc(SQ_COST_MAX_POINTS, sizeof *pts);
    int rc = CLI_RUNTIME, done = 0;
    if (!o || !pts) {
        fprintf(stderr, "shardq model: out of memory\n");
    } else {
        o->par = (sq_cost_parallel){.tp = 1, .pp = 1, .micro_batch = 1, .accum = 1};
        rc = parse_args(argc, argv, &a, o, &done);
        if (rc == CLI_OK && !done) rc = model_main(&a, o, pts);
    }
    free(o);
    free(pts);
    return rc;
}
