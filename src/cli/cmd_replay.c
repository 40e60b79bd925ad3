/*
** cmd_replay.c -- `shardq replay`: a scheme over a captured trace, every
** result into the database (the sweep library's job runner, sweep.h, runs
** it: replay.h does the work, store.h the storing).
*/
#include "cli.h"
#include "ranks.h"
#include "shardq/layout.h"
#include "progress.h"
#include "shardq/replay.h"
#include "shardq/store.h"
#include "shardq/sweep.h"

#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define replay_usage cli_help("shardq-replay")

static void json_stats(const char *name, const sq_errstats *s, double clipped)
{
    printf("\"%s\":{\"n\":%llu,\"rel_l2\":", name, (unsigned long long)s->n);
    cli_json_num(s->rel_l2);
    printf(",\"mse\":");
    cli_json_num(s->mse);
    printf(",\"max_abs\":");
    cli_json_num(s->max_abs);
    printf(",\"snr_db\":");
    cli_json_num(s->snr_db);
    printf(",\"cosine\":");
    cli_json_num(s->cosine);
    printf(",\"mean_signed\":");
    cli_json_num(s->mean_signed);
    printf(",\"frac_zeroed\":");
    cli_json_num(s->frac_zeroed);
    printf(",\"frac_clipped\":");
    cli_json_num(clipped);
    printf("}");
}

/* The reader alone, timed after the replay (--bound). */
typedef struct reader_bound {
    int on;
    double seconds;
    uint64_t bytes;
} reader_bound;

static double gb_per_s(uint64_t bytes, double seconds)
{
    return seconds > 0 ? (double)bytes / seconds / 1e9 : NAN;
}

static void print_json(const sq_replay_result *r, const char *trace, const char *preset,
                       const char *scheme, const char *topo, uint64_t seed, const char *device,
                       int64_t run, const cli_ranks *R, const reader_bound *rb)
{
    printf("{\"run\":");
    if (run > 0) printf("%lld", (long long)run);
    else printf("null");
    printf(",\"trace\":");
    cli_json_str(trace);
    printf(",\"preset\":");
    cli_json_str(preset);
    printf(",\"scheme\":");
    cli_json_str(scheme);
    printf(",\"workers\":\"%s\",\"seed\":%llu,\"device\":", topo, (unsigned long long)seed);
    cli_json_str(device);
    printf(",\"layout\":\"%s\",\"units\":%zu,\"reused_workers\":%d,\"dropped_workers\":%d",
           sq_layout_name((sq_layout_kind)r->layout), r->units, r->reused_workers,
           r->dropped_workers);
    printf(",\"steps\":%zu,\"weight_steps\":%zu,\"params\":%zu,\"elements\":%llu,"
           "\"consecutive\":%s,\"trace_bytes\":%llu,\"seconds\":%.6f,\"gb_per_s\":",
           r->steps, r->weight_steps, r->params, (unsigned long long)r->elements,
           r->consecutive ? "true" : "false", (unsigned long long)r->trace_bytes, r->seconds);
    cli_json_num(gb_per_s(r->trace_bytes, r->seconds));
    if (rb->on) {
        printf(",\"reader_alone\":{\"seconds\":%.6f,\"bytes\":%llu,\"gb_per_s\":", rb->seconds,
               (unsigned long long)rb->bytes);
        cli_json_num(gb_per_s(rb->bytes, rb->seconds));
        printf(",\"replay_share\":");
        cli_json_num(gb_per_s(r->trace_bytes, r->seconds) / gb_per_s(rb->bytes, rb->seconds));
        printf("}");
    }
    printf(",\"peak_rss_bytes\":%llu", (unsigned long long)r->peak_rss);
    cli_json_padding(r->elements, r->padded);
    if (r->has_grad) {
        printf(",");
        json_stats("grad", &r->grad, r->grad_clipped);
    }
    if (r->has_weight) {
        printf(",");
        json_stats("weight", &r->weight, r->weight_clipped);
    }
    if (r->residual_bytes) { /* only with error feedback: other runs print what they did */
        printf(",\"error_feedback\":{\"residual_bytes_per_worker\":%llu,\"ef_residual_last\":",
               (unsigned long long)r->residual_bytes);
        cli_json_num(r->ef_residual);
        printf(",\"ef_residual_mean\":");
        cli_json_num(r->ef_residual_mean);
        printf("}");
    }
    printf(",\"bytes\":");
    cli_json_bytes(r->bytes);
    printf(",\"timings\":{");
    for (int k = 0; k < SQ_REPLAY_NTIMINGS; k++) {
        const sq_timing_row *t = &r->timings[k];
        printf("%s\"%s\":{\"calls\":%llu,\"seconds\":%.6f,\"bytes\":%llu,\"gb_per_s\":",
               k ? "," : "", t->op, (unsigned long long)t->calls, t->seconds,
               (unsigned long long)t->bytes);
        cli_json_num(t->seconds > 0 && t->bytes ? (double)t->bytes / t->seconds / 1e9 : NAN);
        printf("}");
    }
    printf("},");
    cli_json_colls(r->coll, r->seconds, R);
    printf("}\n");
}

static void print_text(const sq_replay_result *r, const char *trace, const char *preset,
                       const char *topo, const char *db, int64_t run, const cli_ranks *R,
                       const reader_bound *rb)
{
    printf("replayed %s: %zu step%s x %zu param%s (%llu elements) with %s on %s\n", trace,
           r->steps, r->steps == 1 ? "" : "s", r->params, r->params == 1 ? "" : "s",
           (unsigned long long)r->elements, preset, topo);
    if (r->has_grad)
        printf("  gradients  rel_l2 %.4g  snr %.2f dB  cos %.6f  bias %.3g  max %.3g  "
               "clipped %.3g\n",
               r->grad.rel_l2, r->grad.snr_db, r->grad.cosine, r->grad.mean_signed,
               r->grad.max_abs, r->grad_clipped);
    if (r->has_weight)
        printf("  weights    rel_l2 %.4g  snr %.2f dB  max %.3g  clipped %.3g\n",
               r->weight.rel_l2, r->weight.snr_db, r->weight.max_abs, r->weight_clipped);
    if (r->residual_bytes)
        printf("  error feedback  residual/gradient %.4g after the last step (mean %.4g); "
               "%.3f MB per worker\n",
               r->ef_residual, r->ef_residual_mean, (double)r->residual_bytes / 1e6);
    if (r->units)
        printf("  layout     %s: %zu world%s, %llu elements padded to %llu (x%.4f)\n",
               sq_layout_name((sq_layout_kind)r->layout), r->units, r->units == 1 ? "" : "s",
               (unsigned long long)r->elements, (unsigned long long)r->padded,
               r->elements ? (double)r->padded / (double)r->elements : 1.0);
    if (r->reused_workers)
        printf("  note: %d worker%s reused gradient files of other workers (worker r takes "
               "file r mod W)\n", r->reused_workers, r->reused_workers == 1 ? "" : "s");
    if (r->dropped_workers)
        printf("  note: %d gradient file%s per step left unread\n", r->dropped_workers,
               r->dropped_workers == 1 ? "" : "s");
    if (r->has_weight && r->weight_steps < r->steps)
        printf("  note: weights at %zu of the %zu steps: each weight difference spans the\n"
               "        steps from one weight step to the next (an all-gather at that cadence)\n",
               r->weight_steps, r->steps);
    else if (!r->consecutive && r->has_weight)
        printf("  note: the trace's steps are not consecutive, so each weight difference\n"
               "        spans several optimizer steps (larger than in training)\n");
    cli_print_bytes(r->bytes);
    printf("  %.3f s, %.3f GB of trace read (%.3f GB/s), peak memory %.1f MB\n", r->seconds,
           (double)r->trace_bytes / 1e9,
           r->seconds > 0 ? (double)r->trace_bytes / r->seconds / 1e9 : 0.0,
           (double)r->peak_rss / 1e6);
    if (rb->on)
        printf("  reader alone %.3f s for the same %.3f GB (%.3f GB/s, %d thread%s, read after "
               "the replay): the replay ran at %.1f%% of it\n",
               rb->seconds, (double)rb->bytes / 1e9, gb_per_s(rb->bytes, rb->seconds),
               sq_get_threads(), sq_get_threads() == 1 ? "" : "s",
               100.0 * gb_per_s(r->trace_bytes, r->seconds) / gb_per_s(rb->bytes, rb->seconds));
    cli_print_colls(r->coll, r->seconds, R);
    if (run > 0) printf("  stored as run %lld in %s\n", (long long)run, db);
}

/* --bound: the reader alone over what the replay read (its steps, its
** paths, its gradient files); CLI_RUNTIME, with the message printed, when the
** trace cannot be read again. */
static int time_reader(const char *trace, const char *topo, const sq_replay_result *r,
                       reader_bound *rb)
{
    sq_trace t;
    sq_topo tp;
    sq_error e = {0};
    int rc = sq_topo_parse(topo, &tp, &e);
    if (!rc && !(rc = sq_trace_open(trace, &t, &e))) {
        const int N = r->has_grad ? sq_topo_workers(&tp) : 0;
        rc = sq_trace_time_reader(&t, r->steps, r->has_weight, N, &rb->seconds, &rb->bytes, &e);
        sq_trace_close(&t);
    }
    if (rc) {
        fprintf(stderr, "shardq replay: --bound: %s\n", sq_error_message(&e));
        return CLI_RUNTIME;
    }
    rb->on = 1;
    return CLI_OK;
}

/* A replay across ranks: --key, --sweep and --bound are not for it, the
** ranks' topology is the one, and rank 0 alone writes the store. CLI_OK,
** or CLI_USAGE (said why). */
static int across_ranks(const cli_ranks *R, const char *key, const char *sweep, int bound,
                        sq_sweep_config *cfg, int *nodb)
{
    if (key || sweep) {
        fprintf(stderr, "shardq replay: --key and --sweep are for the children of a sweep; "
                "across ranks run `mpirun shardq sweep RECIPE`\n");
        return CLI_USAGE;
    }
    if (bound) {
        fprintf(stderr, "shardq replay: --bound times the reader in this process; it is "
                "not for a replay across ranks\n");
        return CLI_USAGE;
    }
    cfg->has_topo = 1;
    if (!cli_ranks_leader(R)) *nodb = 1;
    return CLI_OK;
}

int cmd_replay(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"scheme", required_argument, NULL, 's'}, {"set", required_argument, NULL, 'S'},
        {"workers", required_argument, NULL, 'w'}, {"device", required_argument, NULL, 'd'},
        {"seed", required_argument, NULL, 'e'},   {"paths", required_argument, NULL, 'P'},
        {"steps", required_argument, NULL, 't'},  {"db", required_argument, NULL, 'b'},
        {"no-db", no_argument, NULL, 'n'},        {"no-tensor-rows", no_argument, NULL, 'R'},
        {"busy-timeout", required_argument, NULL, 'B'}, {"key", required_argument, NULL, 'k'},
        {"sweep", required_argument, NULL, 'W'},  {"json", no_argument, NULL, 'j'},
        {"quiet", no_argument, NULL, 'q'},        {"help", no_argument, NULL, 'h'},
        {"reuse-workers", no_argument, NULL, 'U'}, {"transport", required_argument, NULL, 'T'},
        {"bound", no_argument, NULL, 'O'},        {NULL, 0, NULL, 0}};
    /* device NULL: cpu, or where the transport puts the workers */
    const char *preset = "sdp4bit", *workers = NULL, *device = NULL, *db = cli_default_db();
    const char *key = NULL, *sweep = NULL;
    const char *sets[64];
    int nsets = 0, json = 0, quiet = 0, nodb = 0, tensor_rows = 1, paths = 3, reuse = 0, ch;
    int bound = 0;
    int transport = CLI_TRANSPORT_AUTO;
    uint64_t seed = 1, steps = 0, busy = SQ_STORE_BUSY_MS;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "hq", longopts, NULL)) != -1) {
        switch (ch) {
        case 's': preset = optarg; break;
        case 'S':
            if (nsets == 64) {
                fprintf(stderr, "shardq replay: --set: at most 64\n");
                return CLI_USAGE;
            }
            sets[nsets++] = optarg;
            break;
        case 'w': workers = optarg; break;
        case 'd':
            if (cli_check_device("replay", optarg)) return CLI_USAGE;
            device = optarg;
            break;
        case 'e':
            if (cli_parse_u64("replay", "--seed", optarg, INT64_MAX, &seed)) return CLI_USAGE;
            break;
        case 'P':
            if (!strcmp(optarg, "grad")) paths = SQ_REPLAY_GRAD;
            else if (!strcmp(optarg, "weight")) paths = SQ_REPLAY_WEIGHT;
            else if (!strcmp(optarg, "grad,weight") || !strcmp(optarg, "weight,grad")) paths = 3;
            else {
                fprintf(stderr, "shardq replay: --paths: '%s': expected grad, weight or "
                        "grad,weight\n", optarg);
                return CLI_USAGE;
            }
            break;
        case 't':
            if (cli_parse_u64("replay", "--steps", optarg, UINT32_MAX, &steps)) return CLI_USAGE;
            /* 0 is the configuration's "all": asked for, it would replay
            ** every step where the user asked for none */
            if (steps == 0) {
                fprintf(stderr, "shardq replay: --steps: 0: replay at least one step (omit "
                        "--steps for all)\n");
                return CLI_USAGE;
            }
            break;
        case 'b': db = optarg; break;
        case 'n': nodb = 1; break;
        case 'R': tensor_rows = 0; break;
        case 'U': reuse = 1; break;
        case 'O': bound = 1; break;
        case 'T':
            if (cli_transport_parse("replay", optarg, &transport)) return CLI_USAGE;
            break;
        case 'B':
            if (cli_parse_u64("replay", "--busy-timeout", optarg, INT_MAX, &busy))
                return CLI_USAGE;
            break;
        case 'k': key = optarg; break;
        case 'W': sweep = optarg; break;
        case 'j': json = 1; break;
        case 'q': quiet = 1; break;
        case 'h': fputs(replay_usage, stdout); return CLI_OK;
        default: fputs("Try 'shardq replay --help'.\n", stderr); return CLI_USAGE;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "shardq replay: expected one TRACE\nTry 'shardq replay --help'.\n");
        return CLI_USAGE;
    }
    sq_sweep_config cfg;
    sq_sweep_config_defaults(&cfg, SQ_SWEEP_REPLAY);
    if (cli_scheme("replay", preset, sets, nsets, &cfg.scheme)) return CLI_USAGE;
    sq_error terr;
    if (workers && sq_topo_parse(workers, &cfg.topo, &terr)) {
        fprintf(stderr, "shardq replay: --workers: %s\n", sq_error_message(&terr));
        return CLI_USAGE;
    }
    cfg.has_topo = workers != NULL;
    if (cli_device_present("replay", device)) return CLI_RUNTIME;
    cli_ranks R;
    int rb = cli_ranks_begin("replay", transport, &cfg.topo, cfg.has_topo, &device, &R);
    if (rb) return rb;
    if (R.on && (rb = across_ranks(&R, key, sweep, bound, &cfg, &nodb)) != CLI_OK)
        return cli_ranks_end("replay", &R, rb);
    cfg.preset = (char *)preset;
    cfg.trace = argv[optind];
    cfg.seed = seed;
    cfg.device = (char *)device;
    cfg.paths = paths;
    cfg.steps = steps;
    cfg.reuse_workers = reuse;

    sq_sweep_outcome *out = calloc(1, sizeof *out);
    if (!out) {
        fprintf(stderr, "shardq replay: out of memory\n");
        return cli_ranks_end("replay", &R, CLI_RUNTIME);
    }
    cli_job j = {.cmd = "replay", .quiet = quiet || !cli_ranks_leader(&R), .out = out};
    sq_sweep_job job = {.cfg = &cfg, .db = nodb ? NULL : db, .key = key, .sweep = sweep,
                        .busy_ms = (int)busy, .tensor_rows = tensor_rows, .transport = R.tr};
    cli_job_hooks(&j, &job.hooks);
    sq_error e = {0};
    int bad = sq_sweep_job_run(&job, out, &e);
    if (bad == SQ_ERR_CONFLICT && (out->replay.reused_workers || out->replay.dropped_workers)) {
        size_t len = strlen(e.msg);
        snprintf(e.msg + len, sizeof e.msg - len, " (--reuse-workers)");
    }
    int rc = cli_job_end(&j, bad, &e, db);
    reader_bound bnd = {0};
    /* (a run already done under --key replayed nothing to compare) */
    if (rc < 0 && bound && out->replay.trace_bytes &&
        time_reader(cfg.trace, out->topo, &out->replay, &bnd) != CLI_OK)
        rc = CLI_RUNTIME;
    if (rc < 0) {
        if (json)
            print_json(&out->replay, cfg.trace, preset, out->scheme, out->topo, seed, device,
                       out->run, &R, &bnd);
        else if (!quiet)
            print_text(&out->replay, cfg.trace, preset, out->topo, db, out->run, &R, &bnd);
        rc = CLI_OK;
    }
    free(out);
    return cli_ranks_end("replay", &R, rc);
}
