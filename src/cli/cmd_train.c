/*
** cmd_train.c -- `shardq train`: the byte-level GPT trained under a scheme
** on K x G emulated workers (trainer.h does the work); losses, bytes and
** timings into the database, optionally a trace of the run.
*/
#include "cli.h"
#include "app/app.h"
#include "ranks.h"
#include "shardq/layout.h"
#include "progress.h"
#include "shardq/store.h"
#include "shardq/sweep.h"
#include "shardq/train.h"

#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


/* The option of a setting that sq_train_validate refused, or NULL. */
static const char *field_option(sq_train_field f)
{
    switch (f) {
    case SQ_TRAIN_FIELD_BATCH: return "--batch";
    case SQ_TRAIN_FIELD_SEQ: return "--seq";
    case SQ_TRAIN_FIELD_STEPS: return "--steps";
    case SQ_TRAIN_FIELD_LR: return "--lr";
    case SQ_TRAIN_FIELD_CLIP: return "--clip";
    case SQ_TRAIN_FIELD_EVAL_SEQS: return "--eval-seqs";
    case SQ_TRAIN_FIELD_CAPTURE_EVERY: return "--capture-every";
    case SQ_TRAIN_FIELD_CAPTURE_WEIGHTS_EVERY: return "--capture-weights-every";
    default: return NULL;
    }
}

/* The model's sentence (sq_gpt_validate: "channels 8 is not a multiple of
** heads 3") with its settings under their options' names ("--channels 8
** ... --heads 3"): a word layers, channels, heads or context followed by a
** number is the setting; "4 x channels must fit" is left as it is. */
static void print_model_invalid(const char *msg)
{
    static const char *const words[] = {"layers ", "channels ", "heads ", "context "};
    fputs("shardq train: ", stderr);
    for (const char *p = msg; *p;) {
        int opt = 0;
        if (p == msg || p[-1] == ' ')
            for (size_t k = 0; k < sizeof words / sizeof *words && !opt; k++) {
                size_t n = strlen(words[k]);
                opt = !strncmp(p, words[k], n) && p[n] >= '0' && p[n] <= '9';
            }
        if (opt) fputs("--", stderr);
        fputc(*p++, stderr);
    }
    fputc('\n', stderr);
}

/* A refused setting, said under the option's name: the library's sentence
** begins with the setting's name (sq_train_field_name), which the option
** replaces; the corpus sentence speaks of the sequence length, which is
** --seq here, or says why the corpus could not be read; the model's names
** its settings, each an option here. */
static void report_invalid(sq_train_field f, const sq_error *e)
{
    const char *msg = sq_error_message(e), *name = sq_train_field_name(f);
    const char *opt = field_option(f);
    size_t len = strlen(name);
    if (f == SQ_TRAIN_FIELD_MODEL) {
        print_model_invalid(msg);
    } else if (f == SQ_TRAIN_FIELD_CORPUS) {
        static const char seqlen[] = "the sequence length ";
        const char *at = strstr(msg, seqlen), *tail = strstr(msg, " (give a larger corpus");
        msg += strncmp(msg, "corpus ", 7) == 0 ? 7 : 0;
        if (at && tail && tail > at)
            fprintf(stderr, "shardq train: %.*s--seq %.*s (give a larger --corpus or a smaller "
                    "--seq)\n", (int)(at - msg), msg, (int)(tail - at - (sizeof seqlen - 1)),
                    at + sizeof seqlen - 1);
        else /* the corpus could not be read */
            fprintf(stderr, "shardq train: %s (--corpus)\n", sq_error_message(e));
    } else if (opt && !strncmp(msg, name, len)) {
        fprintf(stderr, "shardq train: %s%s\n", opt, msg + len);
    } else {
        fprintf(stderr, "shardq train: %s\n", msg);
    }
}

/* sq_train_validate, its failure reported under the options' names: 1 when
** the settings are refused. */
static int train_invalid(const sq_train_config *c, const sq_corpus *corpus)
{
    sq_train_field f = SQ_TRAIN_FIELD_NONE;
    sq_error e = {0};
    if (sq_train_validate(c, corpus, &f, &e) == SQ_OK) return 0;
    report_invalid(f, &e);
    return 1;
}

/* The figures of the summary, computed once for text and JSON. */
typedef struct figures {
    double tokens_per_s;
    double gflops_compute; /* over the forward + backward time */
    double gflops_step;    /* over the whole loop */
    double sgemm;          /* GFLOP/s of one sgemm of the model's shape */
    double step_time;      /* the loop without evaluation and capture */
    double overhead;       /* share of step_time in the collectives and the optimizer */
    double collectives;    /* share of step_time in the two collectives */
} figures;

static figures compute_figures(const sq_train_result *r, double sgemm)
{
    figures f = {.sgemm = sgemm};
    f.tokens_per_s = r->seconds > 0 ? (double)r->tokens / r->seconds : NAN;
    f.gflops_compute = r->time[SQ_TT_COMPUTE] > 0 ? r->flops / r->time[SQ_TT_COMPUTE] / 1e9 : NAN;
    f.gflops_step = r->seconds > 0 ? r->flops / r->seconds / 1e9 : NAN;
    f.step_time = r->time[SQ_TT_COMPUTE] + r->time[SQ_TT_GRAD] + r->time[SQ_TT_OPTIM] +
                  r->time[SQ_TT_WEIGHT];
    f.collectives = f.step_time > 0 ? (r->time[SQ_TT_GRAD] + r->time[SQ_TT_WEIGHT]) / f.step_time
                                    : NAN;
    f.overhead = f.step_time > 0 ? (f.step_time - r->time[SQ_TT_COMPUTE]) / f.step_time : NAN;
    return f;
}

static void print_text(const sq_train_result *r, const figures *f, const sq_train_config *c,
                       const sq_corpus *corpus, const char *preset, const char *topo,
                       const char *db, int64_t run, const cli_ranks *ranks)
{
    printf("trained a %d-layer, %d-wide GPT (%.2f M params) for %u steps on %s with %s on "
           "%s\n", c->model.layers, c->model.channels, (double)r->elements / 1e6, r->steps,
           corpus->path, preset, topo);
    printf("  loss %.4f -> %.4f, validation %.4f\n", r->first_loss, r->final_loss, r->final_val);
    printf("  %llu tokens in %.1f s: %.0f tokens/s; %.2f GFLOP/s in forward+backward "
           "(%.2f over the whole step) beside sgemm %.2f GFLOP/s\n",
           (unsigned long long)r->tokens, r->seconds, f->tokens_per_s, f->gflops_compute,
           f->gflops_step, f->sgemm);
    printf("  step time: compute %.1f%%, gradient reduce-scatter %.1f%%, optimizer %.1f%%, "
           "weight all-gather %.1f%% (emulated collectives %.1f%%)\n",
           100 * r->time[SQ_TT_COMPUTE] / f->step_time, 100 * r->time[SQ_TT_GRAD] / f->step_time,
           100 * r->time[SQ_TT_OPTIM] / f->step_time, 100 * r->time[SQ_TT_WEIGHT] / f->step_time,
           100 * f->collectives);
    if (r->units)
        printf("  layout %s: %zu world%s, %llu elements padded to %llu (x%.4f)\n",
               sq_layout_name((sq_layout_kind)r->layout), r->units, r->units == 1 ? "" : "s",
               (unsigned long long)r->elements, (unsigned long long)r->padded,
               r->elements ? (double)r->padded / (double)r->elements : 1.0);
    if (r->residual_bytes)
        printf("  error feedback: residual/gradient %.4g after the last step; %.3f MB per "
               "worker\n", r->ef_residual, (double)r->residual_bytes / 1e6);
    cli_print_bytes(r->bytes);
    cli_print_colls(r->coll, f->step_time, ranks);
    if (c->capture)
        printf("  captured %u step%s into %s\n", r->captured, r->captured == 1 ? "" : "s",
               c->capture);
    if (run > 0) printf("  stored as run %lld in %s\n", (long long)run, db);
}

static void print_json(const sq_train_result *r, const figures *f, const sq_train_config *c,
                       const sq_corpus *corpus, const char *preset, const char *scheme,
                       const char *topo, int64_t run, const cli_ranks *ranks)
{
    printf("{\"run\":");
    if (run > 0) printf("%lld", (long long)run);
    else printf("null");
    printf(",\"corpus\":");
    cli_json_str(corpus->path);
    printf(",\"preset\":");
    cli_json_str(preset);
    printf(",\"scheme\":");
    cli_json_str(scheme);
    printf(",\"workers\":\"%s\",\"seed\":%llu", topo, (unsigned long long)c->seed);
    printf(",\"model\":{\"layers\":%d,\"channels\":%d,\"heads\":%d,\"context\":%d,"
           "\"params\":%llu", c->model.layers, c->model.channels, c->model.heads,
           c->model.context, (unsigned long long)r->elements);
    cli_json_padding(r->elements, r->padded);
    printf("}");
    printf(",\"layout\":\"%s\",\"units\":%zu", sq_layout_name((sq_layout_kind)r->layout),
           r->units);
    printf(",\"steps\":%u,\"tokens\":%llu,\"first_loss\":", r->steps,
           (unsigned long long)r->tokens);
    cli_json_num(r->first_loss);
    printf(",\"final_loss\":");
    cli_json_num(r->final_loss);
    printf(",\"final_val_loss\":");
    cli_json_num(r->final_val);
    printf(",\"seconds\":%.6f,\"tokens_per_s\":", r->seconds);
    cli_json_num(f->tokens_per_s);
    printf(",\"gflops_compute\":");
    cli_json_num(f->gflops_compute);
    printf(",\"gflops_step\":");
    cli_json_num(f->gflops_step);
    printf(",\"sgemm_gflops\":");
    cli_json_num(f->sgemm);
    printf(",\"collective_share\":");
    cli_json_num(f->collectives);
    printf(",\"overhead_share\":");
    cli_json_num(f->overhead);
    printf(",\"captured\":%u,\"peak_rss_bytes\":%llu,\"time\":{", r->captured,
           (unsigned long long)r->peak_rss);
    for (int k = 0; k < SQ_TT_N; k++) printf("%s\"%s\":%.6f", k ? "," : "",
                                             sq_train_time_names[k], r->time[k]);
    printf("}");
    if (r->residual_bytes) { /* only with error feedback */
        printf(",\"error_feedback\":{\"residual_bytes_per_worker\":%llu,\"ef_residual_last\":",
               (unsigned long long)r->residual_bytes);
        cli_json_num(r->ef_residual);
        printf("}");
    }
    printf(",\"bytes\":");
    cli_json_bytes(r->bytes);
    printf(",");
    cli_json_colls(r->coll, f->step_time, ranks);
    printf("}\n");
}

enum {
    O_CORPUS = 256, O_STEPS, O_BATCH, O_SEQ, O_EVAL_EVERY, O_EVAL_SEQS, O_LAYERS, O_CHANNELS,
    O_HEADS, O_CONTEXT, O_LR, O_MIN_LR, O_WARMUP, O_BETA1, O_BETA2, O_EPS, O_WD, O_CLIP,
    O_SCHEME, O_SET, O_WORKERS, O_DEVICE, O_SEED, O_CAPTURE, O_CAPTURE_EVERY, O_CAPTURE_WEVERY,
    O_DB, O_NODB, O_BUSY, O_KEY, O_SWEEP, O_JSON, O_TRANSPORT
};

static const struct option longopts[] = {
    {"corpus", required_argument, NULL, O_CORPUS},
    {"steps", required_argument, NULL, O_STEPS},
    {"batch", required_argument, NULL, O_BATCH},
    {"seq", required_argument, NULL, O_SEQ},
    {"eval-every", required_argument, NULL, O_EVAL_EVERY},
    {"eval-seqs", required_argument, NULL, O_EVAL_SEQS},
    {"layers", required_argument, NULL, O_LAYERS},
    {"channels", required_argument, NULL, O_CHANNELS},
    {"heads", required_argument, NULL, O_HEADS},
    {"context", required_argument, NULL, O_CONTEXT},
    {"lr", required_argument, NULL, O_LR},
    {"min-lr", required_argument, NULL, O_MIN_LR},
    {"warmup", required_argument, NULL, O_WARMUP},
    {"beta1", required_argument, NULL, O_BETA1},
    {"beta2", required_argument, NULL, O_BETA2},
    {"eps", required_argument, NULL, O_EPS},
    {"weight-decay", required_argument, NULL, O_WD},
    {"clip", required_argument, NULL, O_CLIP},
    {"scheme", required_argument, NULL, O_SCHEME},
    {"set", required_argument, NULL, O_SET},
    {"workers", required_argument, NULL, O_WORKERS},
    {"device", required_argument, NULL, O_DEVICE},
    {"seed", required_argument, NULL, O_SEED},
    {"capture", required_argument, NULL, O_CAPTURE},
    {"capture-every", required_argument, NULL, O_CAPTURE_EVERY},
    {"capture-weights-every", required_argument, NULL, O_CAPTURE_WEVERY},
    {"db", required_argument, NULL, O_DB},
    {"no-db", no_argument, NULL, O_NODB},
    {"busy-timeout", required_argument, NULL, O_BUSY},
    {"key", required_argument, NULL, O_KEY},
    {"sweep", required_argument, NULL, O_SWEEP},
    {"json", no_argument, NULL, O_JSON},
    {"transport", required_argument, NULL, O_TRANSPORT},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

/* An integer option into an int within [min, max]. */
static int int_opt(const char *opt, const char *text, int min, int max, int *out)
{
    uint64_t v;
    if (cli_parse_u64("train", opt, text, (uint64_t)max, &v)) return -1;
    if ((int64_t)v < min) {
        fprintf(stderr, "shardq train: %s: '%s' is below %d\n", opt, text, min);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int float_opt(const char *opt, const char *text, double min, double max, float *out)
{
    double v;
    if (cli_parse_double("train", opt, text, min, max, &v)) return -1;
    *out = (float)v;
    return 0;
}

int cli_train_end(cli_job *j, const sq_app_train *t, int bad, const sq_error *e, int json)
{
    const sq_sweep_outcome *out = j->out;
    const sq_sweep_config *cfg = t->cfg;
    const char *db = t->db, *capture = t->capture;
    int rc, quiet = j->quiet;
    if (bad && out->status == SQ_SWEEP_ALREADY_DONE && capture) {
        /* the run of the key is done, but not its trace */
        sq_progress_finish(j->bar);
        if (!quiet) printf("already done: run %lld in %s\n", (long long)out->run, db);
        const char *why = strstr(sq_error_message(e), "is not there: ");
        fprintf(stderr, "shardq train: --capture %s: the run of this --key is done, but its "
                "trace is not there: %s\n", capture, why ? why + 14 : sq_error_message(e));
        rc = CLI_RUNTIME;
    } else if (bad && out->field != SQ_TRAIN_FIELD_NONE) {
        sq_progress_finish(j->bar);
        report_invalid(out->field, e);
        rc = CLI_RUNTIME;
    } else if ((rc = cli_job_end(j, bad, e, db)) < 0) {
        /* the configuration as run, for the summary */
        sq_train_config c = cfg->train;
        c.seed = cfg->seed;
        c.capture = capture;
        figures f = compute_figures(&out->train, out->sgemm);
        sq_corpus corpus = {.path = (char *)out->corpus};
        const struct sq_transport *tr = t->transport;
        cli_ranks ranks = {.on = tr != NULL, .size = tr ? tr->nranks : 1};
        if (json)
            print_json(&out->train, &f, &c, &corpus, cfg->preset, out->scheme, out->topo,
                       out->run, &ranks);
        else if (!quiet)
            print_text(&out->train, &f, &c, &corpus, cfg->preset, out->topo, db, out->run,
                       &ranks);
        rc = CLI_OK;
    }
    return rc;
}

int cli_train_job(const sq_sweep_config *cfg, const char *db, const char *key,
                  const char *sweep, int busy_ms, const char *capture, uint32_t capture_every,
                  int quiet, int json, const struct sq_transport *transport)
{
    sq_sweep_outcome *out = calloc(1, sizeof *out);
    if (!out) {
        fprintf(stderr, "shardq train: out of memory\n");
        return CLI_RUNTIME;
    }
    cli_job j = {.cmd = "train", .quiet = quiet, .lines = !quiet && !json, .out = out};
    sq_app_train t = {.cfg = cfg, .db = db, .key = key, .sweep = sweep, .busy_ms = busy_ms,
                      .capture = capture, .capture_every = capture_every,
                      .transport = transport};
    sq_sweep_hooks hooks;
    cli_job_hooks(&j, &hooks);
    sq_error e = {0};
    int bad = sq_app_train_run(&t, &hooks, out, &e);
    int rc = cli_train_end(&j, &t, bad, &e, json);
    free(out);
    return rc;
}

int cmd_train(int argc, char **argv)
{
    const char *longnames[sizeof longopts / sizeof longopts[0]];
    for (size_t i = 0; i < sizeof longopts / sizeof longopts[0]; i++)
        longnames[i] = longopts[i].name;
    sq_train_config c;
    sq_train_defaults(&c);
    const char *corpus_path = NULL, *preset = "sdp4bit", *workers = "2x4";
    int transport = CLI_TRANSPORT_AUTO, workers_given = 0;
    /* device NULL: cpu, or where the transport puts the workers */
    const char *device = NULL, *db = cli_default_db(), *key = NULL, *sweep = NULL;
    const char *sets[64];
    int nsets = 0, json = 0, quiet = 0, nodb = 0, min_lr_given = 0, warmup_given = 0, ch;
    int capture_every_given = 0, capture_wevery_given = 0;
    uint64_t u, busy = SQ_STORE_BUSY_MS;
    opterr = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, ":hq", longopts, NULL)) != -1) {
        int bad = 0;
        switch (ch) {
        case O_CORPUS: corpus_path = optarg; break;
        case O_STEPS:
            bad = cli_parse_u64("train", "--steps", optarg, 100000000, &u);
            c.steps = (uint32_t)u;
            break;
        case O_BATCH: bad = int_opt("--batch", optarg, 1, 65536, &c.batch); break;
        case O_SEQ: bad = int_opt("--seq", optarg, 1, 1 << 20, &c.seq); break;
        case O_EVAL_EVERY:
            bad = cli_parse_u64("train", "--eval-every", optarg, UINT32_MAX, &u);
            c.eval_every = (uint32_t)u;
            break;
        case O_EVAL_SEQS: bad = int_opt("--eval-seqs", optarg, 1, 1 << 20, &c.eval_seqs); break;
        case O_LAYERS: bad = int_opt("--layers", optarg, 1, 1024, &c.model.layers); break;
        case O_CHANNELS: bad = int_opt("--channels", optarg, 1, 1 << 16, &c.model.channels); break;
        case O_HEADS: bad = int_opt("--heads", optarg, 1, 1 << 16, &c.model.heads); break;
        case O_CONTEXT: bad = int_opt("--context", optarg, 1, 1 << 20, &c.model.context); break;
        case O_LR: bad = float_opt("--lr", optarg, 1e-12, 10, &c.lr.lr); break;
        case O_MIN_LR:
            bad = float_opt("--min-lr", optarg, 0, 10, &c.lr.min_lr);
            min_lr_given = 1;
            break;
        case O_WARMUP:
            bad = cli_parse_u64("train", "--warmup", optarg, 100000000, &u);
            c.lr.warmup = (uint32_t)u;
            warmup_given = 1;
            break;
        case O_BETA1: bad = float_opt("--beta1", optarg, 0, 0.999999, &c.adamw.beta1); break;
        case O_BETA2: bad = float_opt("--beta2", optarg, 0, 0.999999, &c.adamw.beta2); break;
        case O_EPS: bad = float_opt("--eps", optarg, 1e-30, 1, &c.adamw.eps); break;
        case O_WD: bad = float_opt("--weight-decay", optarg, 0, 10, &c.adamw.weight_decay); break;
        case O_CLIP: bad = float_opt("--clip", optarg, 0, 1e30, &c.clip); break;
        case O_SCHEME: preset = optarg; break;
        case O_SET:
            if (nsets == 64) {
                fprintf(stderr, "shardq train: --set: at most 64\n");
                return CLI_USAGE;
            }
            sets[nsets++] = optarg;
            break;
        case O_WORKERS: workers = optarg, workers_given = 1; break;
        case O_DEVICE:
            bad = cli_check_device("train", optarg);
            device = optarg;
            break;
        case O_SEED: bad = cli_parse_u64("train", "--seed", optarg, INT64_MAX, &c.seed); break;
        case O_CAPTURE: c.capture = optarg; break;
        case O_CAPTURE_EVERY:
            bad = cli_parse_u64("train", "--capture-every", optarg, UINT32_MAX, &u);
            c.capture_every = (uint32_t)u;
            capture_every_given = 1;
            break;
        case O_CAPTURE_WEVERY:
            bad = cli_parse_u64("train", "--capture-weights-every", optarg, UINT32_MAX, &u);
            if (!bad && u == 0) {
                fprintf(stderr, "shardq train: --capture-weights-every 0: expected >= 1\n");
                bad = 1;
            }
            c.capture_weights_every = (uint32_t)u;
            capture_wevery_given = 1;
            break;
        case O_DB: db = optarg; break;
        case O_NODB: nodb = 1; break;
        case O_BUSY: bad = cli_parse_u64("train", "--busy-timeout", optarg, INT_MAX, &busy); break;
        case O_KEY: key = optarg; break;
        case O_SWEEP: sweep = optarg; break;
        case O_JSON: json = 1; break;
        case O_TRANSPORT: bad = cli_transport_parse("train", optarg, &transport) != CLI_OK; break;
        case 'q': quiet = 1; break;
        case 'h': cli_help_print("shardq-train", "@CORPUS@", SQ_CORPUS_DEFAULT, stdout); return CLI_OK;
        default: return cli_option_error("train", ch, argv, longnames);
        }
        if (bad) return CLI_USAGE;
    }
    if (cli_check_positional("train", argv + optind, argc - optind, 0, 0, "no arguments"))
        return CLI_USAGE;
    if ((capture_every_given || capture_wevery_given) && !c.capture) {
        fprintf(stderr, "shardq train: %s: there is no --capture DIR to write\n",
                capture_every_given ? "--capture-every" : "--capture-weights-every");
        return CLI_USAGE;
    }
    if (!min_lr_given) c.lr.min_lr = c.lr.lr / 10;
    if (!warmup_given) c.lr.warmup = c.steps / 10;
    sq_sweep_config cfg;
    sq_sweep_config_defaults(&cfg, SQ_SWEEP_TRAIN);
    if (cli_scheme("train", preset, sets, nsets, &c.scheme)) return CLI_USAGE;
    sq_error terr = {0};
    if (sq_topo_parse(workers, &c.topo, &terr)) {
        fprintf(stderr, "shardq train: --workers: %s\n", sq_error_message(&terr));
        return CLI_USAGE;
    }
    c.device = device ? device : "cpu";
    if (train_invalid(&c, NULL)) return CLI_USAGE;
    if (cli_device_present("train", device)) return CLI_RUNTIME;
    cli_ranks R;
    int rb = cli_ranks_begin("train", transport, &c.topo, workers_given, &device, &R);
    if (rb) return rb;
    c.device = device;
    if (R.on) {
        if (key || sweep || c.capture) {
            fprintf(stderr, "shardq train: %s: not on real ranks (a sweep: `mpirun shardq sweep "
                    "RECIPE`; a capture: in process)\n", c.capture ? "--capture" : "--key/--sweep");
            return cli_ranks_end("train", &R, CLI_USAGE);
        }
        if (!cli_ranks_leader(&R)) nodb = 1, quiet = 1; /* rank 0 alone prints and stores */
    }
    if (!corpus_path) {
        const char *env = getenv("SHARDQ_CORPUS");
        corpus_path = env && *env ? env : SQ_CORPUS_DEFAULT;
        if (access(corpus_path, F_OK) != 0) {
            fprintf(stderr, "shardq train: the default corpus %s is missing: install the Debian "
                    "package fortunes (./bootstrap --deps does), or give a text file or "
                    "directory with --corpus PATH\n", corpus_path);
            return CLI_RUNTIME;
        }
    }
    cfg.train = c;
    cfg.scheme = c.scheme;
    cfg.has_topo = 1;
    cfg.topo = c.topo;
    cfg.seed = c.seed;
    cfg.preset = (char *)preset;
    cfg.device = (char *)device;
    cfg.corpus = (char *)corpus_path;
    cfg.steps = c.steps;
    int rc = cli_train_job(&cfg, nodb ? NULL : db, key, sweep, (int)busy, c.capture,
                           c.capture_every, quiet, json, R.tr);
    return cli_ranks_end("train", &R, rc);
}
