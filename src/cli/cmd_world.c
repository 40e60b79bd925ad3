/*
** cmd_world.c -- `shardq world`: the traffic of one training iteration
** under a scheme on any topology and model size, and, with --run, the
** collectives run for real on synthetic data with their error statistics;
** `shardq schemes`: the presets and their knobs.
*/
#include "shardq/backend.h"
#include "cli.h"
#include "shardq/metrics.h"
#include "progress.h"
#include "ranks.h"
#include "shardq/synth.h"
#include "shardq/codec.h"
#include "shardq/world.h"
#include "shardq/trace.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define world_usage cli_help("shardq-world")

#define schemes_usage cli_help("shardq-schemes")

/* ------------------------------------------------------------------------ */
/* shardq schemes                                                           */
/* ------------------------------------------------------------------------ */

int cmd_schemes(int argc, char **argv)
{
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(schemes_usage, stdout);
            return CLI_OK;
        } else {
            static const char *const names[] = {"json", "help", NULL};
            cli_unknown_option("schemes", argv[i], names);
            return CLI_USAGE;
        }
    }
    sq_scheme_print(stdout, json);
    return CLI_OK;
}

static void json_stats(const char *name, const sq_errstats *s, double clipped, int last)
{
    printf("\"%s\":{\"n\":%llu,\"rel_l2\":%.9g,\"mse\":%.9g,\"max_abs\":%.9g,\"snr_db\":%.6g,"
           "\"cosine\":%.12g,\"mean_signed\":%.9g,\"frac_zeroed\":%.9g,\"frac_clipped\":%.9g}%s",
           name, (unsigned long long)s->n, s->rel_l2, s->mse, s->max_abs,
           isfinite(s->snr_db) ? s->snr_db : 999.0, s->cosine, s->mean_signed, s->frac_zeroed,
           clipped, last ? "" : ",");
}

/* ------------------------------------------------------------------------ */
/* shardq world                                                             */
/* ------------------------------------------------------------------------ */

typedef struct run_opts {
    int steps, data;
    double lr;
} run_opts;

static void print_step(const sq_step_report *st, int json, int first)
{
    const sq_errstats *gs = &st->grad, *ws = &st->weight;
    if (json) {
        printf("%s{\"step\":%u,\"replicas_identical\":%s,", first ? "" : ",", st->step,
               st->identical ? "true" : "false");
        json_stats("grad", gs, st->grad_clipped, 0);
        json_stats("weight", ws, st->weight_clipped, 1);
        if (st->has_residual) { /* error feedback's state after the reduce */
            printf(",\"ef_residual\":");
            cli_json_num(st->ef_residual);
        }
        printf("}");
        return;
    }
    printf("step %u  grad: rel_l2 %.4g  snr %.2f dB  cos %.6f  bias %.3g  max %.3g  "
           "zeroed %.3g  clipped %.3g\n"
           "        weight: rel_l2 %.4g  snr %.2f dB  max %.3g  replicas %s\n",
           st->step, gs->rel_l2, gs->snr_db, gs->cosine, gs->mean_signed, gs->max_abs,
           gs->frac_zeroed, st->grad_clipped, ws->rel_l2, ws->snr_db, ws->max_abs,
           st->identical ? "identical" : "DIFFER");
    if (st->has_residual)
        printf("        error feedback: residual/gradient %.4g\n", st->ef_residual);
}

/* Synthetic training (sq_step_synthetic_*), a line or a JSON object per
** step; CLI_RUNTIME when a step fails or the replicas of w-hat differ. */
static int run_steps(sq_world *w, const run_opts *o, uint64_t seed, int json)
{
    sq_step_synthetic *syn;
    sq_error err = {0};
    if (sq_step_synthetic_open(w, seed, o->data, o->lr, &syn, &err)) {
        fprintf(stderr, "shardq world: %s\n", sq_error_message(&err));
        return CLI_RUNTIME;
    }
    int rc = CLI_RUNTIME;
    sq_progress *bar = json ? NULL : sq_progress_start("steps", (size_t)o->steps);
    if (json) printf(",\"steps\":[");
    for (int t = 0; t < o->steps; t++) {
        sq_step_report st;
        if (sq_step_synthetic_run(syn, (uint32_t)t + 1, &st, &err)) {
            fprintf(stderr, "shardq world: %s\n", sq_error_message(&err));
            goto done;
        }
        sq_progress_pause(bar);
        print_step(&st, json, t == 0);
        sq_progress_update(bar, (size_t)t + 1);
        if (!st.identical) {
            fprintf(stderr, "shardq world: step %u: the replicas of w-hat differ\n", st.step);
            goto done;
        }
    }
    sq_progress_finish(bar);
    if (json) printf("]");
    rc = CLI_OK;
done:
    sq_step_synthetic_close(syn);
    return rc;
}

/* The options of one `shardq world`. */
typedef struct world_args {
    const char *workers, *scheme, *device; /* device NULL: cpu, or the transport's */
    const char *sets[64];
    int nsets, run, json, transport, digest, has_topo;
    uint64_t elements, seed, steps;
    uint64_t shape[8];
    int ndim;
    run_opts o;
} world_args;

/* --shape D0,D1,...: up to 8 positive sizes. */
static int parse_shape(const char *arg, world_args *a)
{
    char buf[256], *tok, *save = NULL;
    snprintf(buf, sizeof buf, "%s", arg);
    a->ndim = 0;
    for (tok = strtok_r(buf, ",x", &save); tok; tok = strtok_r(NULL, ",x", &save)) {
        if (a->ndim == 8 || cli_parse_u64("world", "--shape", tok, (uint64_t)1 << 50,
                                          &a->shape[a->ndim]) || a->shape[a->ndim] == 0) {
            fprintf(stderr, "shardq world: --shape '%s': expected 1 to 8 positive sizes "
                    "D0,D1,...\n", arg);
            return CLI_USAGE;
        }
        a->ndim++;
    }
    if (a->ndim == 0) {
        fprintf(stderr, "shardq world: --shape '%s': no sizes\n", arg);
        return CLI_USAGE;
    }
    return CLI_OK;
}

/* One option: CLI_OK to go on (*done after --help), else the exit status. */
static int parse_option(int ch, const char *arg, world_args *a, int *done)
{
    switch (ch) {
    case 'w': a->workers = arg, a->has_topo = 1; return CLI_OK;
    case 'T': return cli_transport_parse("world", arg, &a->transport) ? CLI_USAGE : CLI_OK;
    case 'g': a->digest = 1; return CLI_OK;
    case 's': a->scheme = arg; return CLI_OK;
    case 'S':
        if (a->nsets == 64) {
            fprintf(stderr, "shardq world: --set: at most 64\n");
            return CLI_USAGE;
        }
        a->sets[a->nsets++] = arg;
        return CLI_OK;
    case 'n':
        return cli_parse_u64("world", "--elements", arg, (uint64_t)1 << 50, &a->elements)
                   ? CLI_USAGE : CLI_OK;
    case 'H': return parse_shape(arg, a);
    case 'r': a->run = 1; return CLI_OK;
    case 't':
        if (cli_parse_u64("world", "--steps", arg, 1000000, &a->steps)) return CLI_USAGE;
        /* 0 steps would print a run that moved nothing, as if it had */
        if (a->steps == 0) {
            fprintf(stderr, "shardq world: --steps: 0: run at least one step\n");
            return CLI_USAGE;
        }
        return CLI_OK;
    case 'e': return cli_parse_u64("world", "--seed", arg, UINT64_MAX, &a->seed) ? CLI_USAGE
                                                                                 : CLI_OK;
    case 'D':
        if ((a->o.data = sq_synth_parse_kind(arg)) < 0) {
            fprintf(stderr, "shardq world: --data: '%s': expected normal, heavy or outliers\n",
                    arg);
            return CLI_USAGE;
        }
        return CLI_OK;
    case 'l': {
        char *end;
        a->o.lr = strtod(arg, &end);
        if (*end || !isfinite(a->o.lr)) {
            fprintf(stderr, "shardq world: --lr: '%s' is not a number\n", arg);
            return CLI_USAGE;
        }
        return CLI_OK;
    }
    case 'd':
        if (cli_check_device("world", arg)) return CLI_USAGE;
        a->device = arg;
        return CLI_OK;
    case 'j': a->json = 1; return CLI_OK;
    case 'h': fputs(world_usage, stdout); *done = 1; return CLI_OK;
    default: fputs("Try 'shardq world --help'.\n", stderr); return CLI_USAGE;
    }
}

static int parse_args(int argc, char **argv, world_args *a, int *done)
{
    static const struct option longopts[] = {
        {"workers", required_argument, NULL, 'w'}, {"scheme", required_argument, NULL, 's'},
        {"set", required_argument, NULL, 'S'},     {"elements", required_argument, NULL, 'n'},
        {"run", no_argument, NULL, 'r'},           {"steps", required_argument, NULL, 't'},
        {"seed", required_argument, NULL, 'e'},    {"data", required_argument, NULL, 'D'},
        {"lr", required_argument, NULL, 'l'},      {"device", required_argument, NULL, 'd'},
        {"json", no_argument, NULL, 'j'},          {"help", no_argument, NULL, 'h'},
        {"shape", required_argument, NULL, 'H'},   {"transport", required_argument, NULL, 'T'},
        {"digest", no_argument, NULL, 'g'},        {NULL, 0, NULL, 0}};
    int ch, rc;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1)
        if ((rc = parse_option(ch, optarg, a, done)) != CLI_OK || *done) return rc;
    if (optind < argc) {
        fprintf(stderr, "shardq world: unexpected argument '%s'\n", argv[optind]);
        return CLI_USAGE;
    }
    a->o.steps = (int)a->steps;
    return CLI_OK;
}

/* The scheme for the model's shape (its per-tensor rules resolved for the
** one tensor), and the model's size checked. */
static int resolve_model(world_args *a, sq_world_config *cfg)
{
    sq_error terr;
    if (cli_scheme("world", a->scheme, a->sets, a->nsets, &cfg->scheme)) return CLI_USAGE;
    /* PowerSGD views a given shape as its matrix; without one, the flat
    ** buffer's view (grad.powersgd.cols) */
    const int view = a->ndim && cfg->scheme.grad_mode == SQ_GRAD_POWERSGD;
    if (a->ndim) {
        a->elements = 1;
        for (int d = 0; d < a->ndim; d++)
            if (__builtin_mul_overflow(a->elements, a->shape[d], &a->elements) ||
                a->elements > ((uint64_t)1 << 50)) {
                fprintf(stderr, "shardq world: --shape: more than 2^50 elements\n");
                return CLI_USAGE;
            }
    } else {
        a->shape[0] = a->elements;
        a->ndim = 1;
    }
    if (a->elements && (sq_scheme_per_tensor(&cfg->scheme) || view)) {
        /* the model is one tensor: resolve the scheme's per-tensor rules */
        sq_scheme one;
        if (sq_scheme_for_tensor(&cfg->scheme, &cfg->topo, a->shape, a->ndim, &one, &terr)) {
            fprintf(stderr, "shardq world: --scheme %s: %s\n", a->scheme,
                    sq_error_message(&terr));
            return CLI_USAGE;
        }
        cfg->scheme = one;
    }
    if (a->elements == 0) {
        fprintf(stderr, "shardq world: --elements: a model of 0 elements has nothing to send\n");
        return CLI_USAGE;
    }
    if (a->run && a->elements > ((uint64_t)1 << 31)) {
        fprintf(stderr, "shardq world: --elements %llu: --run keeps a few copies per worker in "
                "memory; use at most 2^31 (sizes alone need no --run)\n",
                (unsigned long long)a->elements);
        return CLI_USAGE;
    }
    cfg->elements = a->elements;
    cfg->seed = a->seed;
    cfg->device = a->device;
    cfg->dry = !a->run;
    cfg->digest = a->digest;
    return CLI_OK;
}

/* The world's topology, scheme and sizes, before anything is counted. */
static void print_world(const world_args *a, sq_world *w, const sq_world_config *cfg,
                        const cli_ranks *R)
{
    sq_world_print(stdout, w, cfg, a->scheme, a->json);
    if (a->json) return;
    if (a->run) {
        sq_backend *be = sq_world_backend(w, R->on ? R->rank : 0);
        printf("running %d steps on %s, %s gradients, seed %llu\n", a->o.steps,
               sq_backend_description(be), a->o.data == SQ_SYNTH_NORMAL ? "normal"
               : a->o.data == SQ_SYNTH_HEAVY ? "heavy-tailed" : "outlier",
               (unsigned long long)a->seed);
    }
}

/* The traffic of the iteration (and, with --run, the collectives' times). */
static void print_report(const world_args *a, sq_world *w, const cli_ranks *R,
                         const sq_output_digest *dg)
{
    if (a->json) {
        /* measured times vary from run to run: only real ranks print them,
        ** so that an in-process run's JSON is a function of its inputs */
        printf(",\"transport\":{\"kind\":\"%s\",\"ranks\":%d},", cli_ranks_kind_name(R),
               R->on ? R->size : 1);
        if (R->on && a->run) {
            printf("\"times\":{");
            sq_world_print_times(stdout, w, 1);
            printf("},");
        }
        sq_world_print_traffic(stdout, w, dg, 1);
        printf("}\n");
        return;
    }
    sq_world_print_traffic(stdout, w, NULL, 0);
    if (a->run) {
        printf("\nwall time of the collectives (%s, the slowest rank):\n",
               R->kind == CLI_TRANSPORT_NCCL ? "NCCL ranks" : R->on ? "MPI ranks"
               : "in process, every worker in turn");
        sq_world_print_times(stdout, w, 0);
    }
}

/* One iteration's sizes, or --run's steps, and the report. */
static int world_run(const world_args *a, sq_world *w, const sq_world_config *cfg,
                     const cli_ranks *R)
{
    int rc;
    if (!a->run) {
        /* one iteration, sizes only */
        if ((rc = sq_world_reduce_grads(w, 1)) == SQ_OK) rc = sq_world_gather_weights(w, 1);
        if (rc) {
            fprintf(stderr, "shardq world: %s\n", sq_world_error(w));
            return CLI_RUNTIME;
        }
    }
    print_world(a, w, cfg, R);
    if (a->run && (rc = run_steps(w, &a->o, a->seed, a->json)) != CLI_OK) {
        if (a->json) printf("]}\n");
        return rc;
    }
    sq_output_digest *dg = NULL;
    if (a->run && a->digest) {
        sq_error err = {0};
        dg = calloc((size_t)sq_world_workers(w), sizeof *dg);
        if (!dg || sq_world_output_digests(w, dg, &err)) {
            fprintf(stderr, "shardq world: digests: %s\n",
                    dg ? sq_error_message(&err) : "out of memory");
            free(dg);
            return CLI_RUNTIME;
        }
    }
    print_report(a, w, R, dg);
    free(dg);
    return CLI_OK;
}

int cmd_world(int argc, char **argv)
{
    world_args a = {.workers = "2x4", .scheme = "sdp4bit", .transport = CLI_TRANSPORT_AUTO,
                    .elements = 16777216, .seed = 1, .steps = 3,
                    .o = {3, SQ_SYNTH_NORMAL, 1.0}};
    int done = 0, ret = parse_args(argc, argv, &a, &done);
    if (ret != CLI_OK || done) return ret;
    sq_world_config cfg;
    memset(&cfg, 0, sizeof cfg);
    sq_error terr;
    if (sq_topo_parse(a.workers, &cfg.topo, &terr)) {
        fprintf(stderr, "shardq world: --workers: %s\n", sq_error_message(&terr));
        return CLI_USAGE;
    }
    /* without --run the world is sizes only and places nothing */
    if (a.run && cli_device_present("world", a.device)) return CLI_RUNTIME;
    cli_ranks R;
    ret = cli_ranks_begin("world", a.transport, &cfg.topo, a.has_topo, &a.device, &R);
    if (ret) return ret;
    if ((ret = resolve_model(&a, &cfg)) == CLI_OK) {
        sq_world *w = NULL;
        cfg.transport = R.tr;
        int rc = sq_world_open(&cfg, &w, &terr);
        if (rc) {
            fprintf(stderr, "shardq world: %s\n", sq_error_message(&terr));
            ret = rc == SQ_ERR_SPEC || rc == SQ_ERR_ARG ? CLI_USAGE : CLI_RUNTIME;
        } else {
            ret = world_run(&a, w, &cfg, &R);
            sq_world_close(w);
        }
    }
    return cli_ranks_end("world", &R, ret);
}
