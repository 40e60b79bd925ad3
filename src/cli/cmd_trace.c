/*
** cmd_trace.c -- `shardq trace info` (what a trace holds) and `shardq trace
** synth` (a synthetic trace in the trace-directory format, for tests,
** benchmarks and trying the commands without a training job).
*/
#include "cli.h"
#include "progress.h"
#include "shardq/synth.h"
#include "shardq/trace.h"
#include "trace/input.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define trace_usage cli_help("shardq-trace")
#define info_usage cli_help("shardq-trace-info")
#define synth_usage cli_help("shardq-trace-synth")

static const char *const trace_cmds[] = {"info", "synth"};

static int trace_info(int argc, char **argv)
{
    static const struct option longopts[] = {{"json", no_argument, NULL, 'j'},
                                             {"values", no_argument, NULL, 'v'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int json = 0, values = 0, ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'j': json = 1; break;
        case 'v': values = 1; break;
        case 'h': fputs(info_usage, stdout); return CLI_OK;
        default: fputs("Try 'shardq trace info --help'.\n", stderr); return CLI_USAGE;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "shardq trace info: expected one PATH\nTry 'shardq trace info --help'.\n");
        return CLI_USAGE;
    }
    sq_trace t;
    sq_error err = {0};
    if (sq_trace_open(argv[optind], &t, &err)) {
        fprintf(stderr, "shardq trace info: %s\n", sq_error_message(&err));
        return CLI_RUNTIME;
    }
    size_t checked = 0;
    if (values && sq_trace_check_values(&t, &checked, &err)) {
        fprintf(stderr, "shardq trace info: %s\n", sq_error_message(&err));
        sq_trace_close(&t);
        return CLI_RUNTIME;
    }
    sq_trace_print_info(stdout, &t, json, values ? (long long)checked : -1);
    sq_trace_close(&t);
    return CLI_OK;
}

/* NAME:D0xD1,... into params (names point into spec, which is modified).
** Every item and every dimension must be there: "a:4,,b:2" or "x:10x" is
** an error, not a shorter list. */
static int parse_params(char *spec, sq_trace_param *p, size_t max, size_t *np)
{
    *np = 0;
    for (char *item = spec, *next; item; item = next) {
        if ((next = strchr(item, ',')) != NULL) *next++ = '\0';
        char *colon = strrchr(item, ':');
        if (!colon || colon == item || !colon[1] || *np == max) return -1;
        *colon = '\0';
        sq_trace_param *q = &p[(*np)++];
        memset(q, 0, sizeof *q);
        q->name = item;
        for (char *d = colon + 1, *nd; d; d = nd) {
            if ((nd = strchr(d, 'x')) != NULL) *nd++ = '\0';
            char *end;
            if (q->ndim == SQ_ST_MAXDIM || *d < '0' || *d > '9') return -1;
            errno = 0;
            q->shape[q->ndim++] = strtoull(d, &end, 10);
            if (*end || errno) return -1;
        }
        q->n = 1;
        for (int d = 0; d < q->ndim; d++) {
            if (q->shape[d] && q->n > (UINT64_MAX >> 4) / q->shape[d]) return -1;
            q->n *= q->shape[d];
        }
    }
    return *np ? 0 : -1;
}

static void show_progress(void *bar, size_t files)
{
    sq_progress_update(bar, files);
}

static int trace_synth(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"params", required_argument, NULL, 'p'},  {"steps", required_argument, NULL, 's'},
        {"first", required_argument, NULL, 'f'},   {"workers", required_argument, NULL, 'w'},
        {"topology", required_argument, NULL, 'T'}, {"dtype", required_argument, NULL, 'd'},
        {"data", required_argument, NULL, 'D'},    {"no-weights", no_argument, NULL, 'N'},
        {"weights-every", required_argument, NULL, 'W'},
        {"lr", required_argument, NULL, 'l'},      {"seed", required_argument, NULL, 'e'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
    char spec_buf[4096] = "wte:256x64,h0.qkv:64x192,h0.proj:64x64,h0.fc:64x256,h0.ln:64";
    uint64_t steps = 4, first = 1, workers = 4, seed = 1, every = 1;
    const char *topo = NULL;
    int dtype = SQ_ST_F32, kind = SQ_SYNTH_NORMAL, weights = 1, lr_given = 0, ch;
    double lr = 1.0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'p':
            if (strlen(optarg) >= sizeof spec_buf) {
                fprintf(stderr, "shardq trace synth: --params: too long\n");
                return CLI_USAGE;
            }
            strcpy(spec_buf, optarg);
            break;
        case 's':
            if (cli_parse_u64("trace synth", "--steps", optarg, 1000000, &steps)) return CLI_USAGE;
            break;
        case 'f':
            if (cli_parse_u64("trace synth", "--first", optarg, UINT32_MAX - 1000000, &first))
                return CLI_USAGE;
            break;
        case 'w':
            if (cli_parse_u64("trace synth", "--workers", optarg, SQ_TRACE_MAX_WORKERS, &workers))
                return CLI_USAGE;
            break;
        case 'T': topo = optarg; break;
        case 'd':
            dtype = sq_st_dtype_parse(optarg);
            if (dtype == SQ_ST_DTYPE_NONE || !sq_st_dtype_is_float((sq_st_dtype)dtype)) {
                fprintf(stderr,
                        "shardq trace synth: --dtype: '%s': expected F32, BF16, F16 or F64\n",
                        optarg);
                return CLI_USAGE;
            }
            break;
        case 'D':
            if ((kind = sq_synth_parse_kind(optarg)) < 0) {
                fprintf(stderr,
                        "shardq trace synth: --data: '%s': expected normal, heavy or outliers\n",
                        optarg);
                return CLI_USAGE;
            }
            break;
        case 'N': weights = 0; break;
        case 'W':
            if (cli_parse_u64("trace synth", "--weights-every", optarg, 1000000, &every))
                return CLI_USAGE;
            if (every == 0) {
                fprintf(stderr, "shardq trace synth: --weights-every 0: expected >= 1 (no "
                        "weights: --no-weights)\n");
                return CLI_USAGE;
            }
            break;
        case 'l': {
            char *end;
            lr = strtod(optarg, &end);
            lr_given = 1;
            if (end == optarg || *end || !isfinite(lr)) {
                fprintf(stderr, "shardq trace synth: --lr: '%s' is not a number\n", optarg);
                return CLI_USAGE;
            }
            break;
        }
        case 'e':
            if (cli_parse_u64("trace synth", "--seed", optarg, UINT64_MAX, &seed)) return CLI_USAGE;
            break;
        case 'h': fputs(synth_usage, stdout); return CLI_OK;
        default: fputs("Try 'shardq trace synth --help'.\n", stderr); return CLI_USAGE;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "shardq trace synth: expected one DIR\nTry 'shardq trace synth --help'.\n");
        return CLI_USAGE;
    }
    if (steps == 0 || workers == 0) {
        fprintf(stderr, "shardq trace synth: --steps and --workers must be at least 1\n");
        return CLI_USAGE;
    }
    if (every > 1 && !weights) {
        fprintf(stderr, "shardq trace synth: --weights-every: --no-weights writes none\n");
        return CLI_USAGE;
    }
    if (lr_given && !weights) {
        fprintf(stderr, "shardq trace synth: --lr: it moves the weights, and --no-weights writes "
                "none\n");
        return CLI_USAGE;
    }
    sq_synth_trace st = {NULL, 0, steps, (uint32_t)first, (int)workers, topo,
                         (sq_st_dtype)dtype, kind, weights ? (int)every : 0, lr, seed};
    char owner[sizeof spec_buf + 512];
    sq_synth_trace_owner(&st, spec_buf, owner, sizeof owner);
    enum { MAXP = 256 };
    sq_trace_param params[MAXP];
    size_t np;
    if (parse_params(spec_buf, params, MAXP, &np)) {
        fprintf(stderr, "shardq trace synth: --params: expected NAME:D0xD1x...,... (at most %d "
                "tensors)\n", MAXP);
        return CLI_USAGE;
    }
    /* the readers refuse a name that is not UTF-8: write none */
    for (size_t i = 0; i < np; i++) {
        size_t len = strlen(params[i].name), bad = sq_utf8_invalid(params[i].name, len);
        if (bad < len) {
            char shown[256];
            fprintf(stderr, "shardq trace synth: --params: tensor '%s': not UTF-8 (byte %zu of "
                    "the name)\n", sq_escape_bytes(params[i].name, shown, sizeof shown), bad);
            return CLI_USAGE;
        }
    }
    const char *dir = argv[optind];
    st.params = params, st.nparams = np;
    uint64_t wsteps = weights ? (steps + every - 1) / every : 0;
    sq_progress *bar = sq_progress_start("files", (size_t)(steps * workers + wsteps));
    sq_error err = {0};
    int rc = sq_synth_trace_write(dir, &st, owner, show_progress, bar, &err);
    sq_progress_finish(bar);
    if (rc) {
        fprintf(stderr, "shardq trace synth: %s\n", sq_error_message(&err));
        return CLI_RUNTIME;
    }
    return CLI_OK;
}

int cmd_trace(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
        !strcmp(argv[1], "help")) {
        fputs(trace_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : CLI_OK;
    }
    if (!strcmp(argv[1], "info")) return trace_info(argc - 1, argv + 1);
    if (!strcmp(argv[1], "synth")) return trace_synth(argc - 1, argv + 1);
    const char *s = cli_suggest(argv[1], trace_cmds, 2);
    fprintf(stderr, "shardq trace: unknown command '%s'%s%s%s\nTry 'shardq trace --help'.\n",
            argv[1], s ? " (did you mean '" : "", s ? s : "", s ? "'?)" : "");
    return CLI_USAGE;
}
