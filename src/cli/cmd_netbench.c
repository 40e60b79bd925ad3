/*
** cmd_netbench.c -- `shardq netbench`: the bus bandwidth and latency of
** MPI's all-gather, reduce-scatter and all-to-all per message size and link
** level, under mpirun, printed as nccl-tests prints NCCL's, stored in the
** database (a run of kind 'netbench', netbench_results rows) and written as
** a platform file that `shardq model --platform` reads. The measuring is
** src/mpi/netbench.c's; this file parses the options, keeps the ranks in
** step about what fails, and prints and writes on rank 0 alone.
*/
#include "cli.h"
#include "ranks.h"
#include "shardq/cost.h"
#include "shardq/store.h"
#include "shardq/world.h"

#include <ctype.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef SHARDQ_HAVE_MPI
#include "shardq/mpi.h"
#endif

#define netbench_usage cli_help("shardq-netbench")

/* SIZE: digits with an optional K, M or G (binary, as nccl-tests' -b/-e). */
static int parse_size(const char *opt, const char *text, uint64_t *out)
{
    char *end;
    const char *p = text;
    if (!isdigit((unsigned char)*p)) goto bad;
    unsigned long long v = strtoull(p, &end, 10);
    int shift = 0;
    if (*end == 'K' || *end == 'k') shift = 10, end++;
    else if (*end == 'M' || *end == 'm') shift = 20, end++;
    else if (*end == 'G' || *end == 'g') shift = 30, end++;
    if (*end || v == 0) goto bad;
    if (v > (1ull << 30) >> shift) {
        fprintf(stderr, "shardq netbench: %s: '%s' is larger than 1G\n", opt, text);
        return -1;
    }
    *out = (uint64_t)v << shift;
    return 0;
bad:
    fprintf(stderr, "shardq netbench: %s: '%s' is not a size (a positive number of bytes, "
            "with K, M or G)\n", opt, text);
    return -1;
}

#ifdef SHARDQ_HAVE_MPI

/* A comma list of names into a bit mask; parse gives a name's index, -1
** for an unknown one. */
static int parse_names(const char *opt, const char *text, int (*parse)(const char *),
                       const char *expected, unsigned *mask)
{
    char buf[256], *save = NULL;
    snprintf(buf, sizeof buf, "%s", text);
    *mask = 0;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int i = parse(tok);
        if (i < 0) {
            fprintf(stderr, "shardq netbench: %s: unknown '%s' (expected %s)\n", opt, tok,
                    expected);
            return -1;
        }
        *mask |= 1u << i;
    }
    if (!*mask) {
        fprintf(stderr, "shardq netbench: %s: '%s' names nothing (expected %s)\n", opt, text,
                expected);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The store and the platform file (rank 0)                                 */
/* ------------------------------------------------------------------------ */

typedef struct opts {
    sq_netbench_config cfg;
    const char *db, *platform_out, *name, *assume;
    double tflops, hbm, quant; /* NaN: --assume's */
    int busy, json;
} opts;

/* Begins the run of kind 'netbench' in o->db: fails before anything is
** measured when the database cannot be written. */
static int store_begin(const opts *o, const sq_mpi *m, const sq_topo *t, const char *hosts,
                       sq_store **s, int64_t *run)
{
    sq_error err = {0};
    int rc = sq_netbench_store_begin(o->db, o->busy, m, &o->cfg, t, hosts, o->platform_out, s,
                                     run, &err);
    if (rc == SQ_OK) return CLI_OK;
    fprintf(stderr, "shardq netbench: %s\n", sq_error_message(&err));
    return rc == SQ_ERR_BUSY ? CLI_BUSY : CLI_RUNTIME;
}

/* Every result as a row, and the run's end ('failed' with failure). */
static int store_end(sq_store *s, int64_t run, const sq_netbench_result *r, size_t n,
                     const char *failure)
{
    sq_error err = {0};
    int rc = sq_netbench_store_end(s, run, r, n, failure, &err);
    if (rc) fprintf(stderr, "shardq netbench: %s\n", sq_error_message(&err));
    return rc || failure ? CLI_RUNTIME : CLI_OK;
}

static int read_assumed(const opts *o, sq_netbench_assumed *a)
{
    sq_error err = {0};
    if (sq_netbench_assumed_read(o->assume, o->tflops, o->hbm, o->quant, a, &err) == SQ_OK)
        return CLI_OK;
    fprintf(stderr, "shardq netbench: --assume: %s\n", sq_error_message(&err));
    return CLI_USAGE;
}

/* --platform-out: the measured links and the assumed figures as a
** platform file, checked by reading it back as the model will. */
static int write_platform(const opts *o, const sq_netbench_assumed *a, const sq_topo *t,
                          const char *hosts, const char *name, const sq_netbench_result *r,
                          size_t n)
{
    char date[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", &tm);
    sq_netbench_platform_info info = sq_netbench_info(a, t, hosts, name, date);
    sq_cost_platform p;
    char *text = NULL;
    sq_error err = {0};
    if (sq_netbench_platform(r, n, &info, &p, &text, &err)) {
        fprintf(stderr, "shardq netbench: --platform-out %s: %s\n", o->platform_out,
                sq_error_message(&err));
        return CLI_RUNTIME;
    }
    int rc = cli_write_file("netbench", o->platform_out, text, strlen(text));
    free(text);
    if (rc) return CLI_RUNTIME;
    /* what the model will read: the file as written, through its reader */
    sq_cost_platform back;
    if (sq_cost_platform_read(o->platform_out, &back, &err)) {
        fprintf(stderr, "shardq netbench: %s: written, but it does not read back: %s\n",
                o->platform_out, sq_error_message(&err));
        return CLI_RUNTIME;
    }
    return CLI_OK;
}

/* Rank 0's status to every rank: so that all end alike, without an abort. */
static int agree(const cli_ranks *R, int rc)
{
    int v = rc;
    sq_error err = {0};
    if (R->tr->share(R->tr->ctx, 0, &v, sizeof v, &err)) {
        fprintf(stderr, "shardq netbench: rank %d: %s\n", R->rank, sq_error_message(&err));
        return CLI_RUNTIME;
    }
    return v;
}

static int measure(opts *o, sq_topo *topo, int has_topo)
{
    sq_netbench_assumed a;
    if (o->platform_out) {
        int rc = read_assumed(o, &a);
        if (rc) return rc;
    }
    cli_ranks R;
    const char *device = "cpu"; /* MPI moves host memory */
    int rc = cli_ranks_begin("netbench", CLI_TRANSPORT_MPI, topo, has_topo, &device, &R);
    if (rc) return rc;
    const sq_mpi *m = R.mpi;
    const int leader = cli_ranks_leader(&R);
    char hosts[1024], name[64];
    sq_netbench_hosts(m, hosts, sizeof hosts);
    if (o->name) snprintf(name, sizeof name, "%s", o->name);
    else sq_netbench_default_name(sq_mpi_host(m, 0), name, sizeof name);

    int any = 0;
    for (int level = 0; level < SQ_NETBENCH_NLEVELS; level++)
        any |= (o->cfg.levels & 1u << level) && !sq_netbench_skip_reason(m, level);
    if (!any) {
        /* the same on every rank: no collective call to agree on */
        if (leader) {
            sq_netbench_print_nothing(stdout, m, &o->cfg, R.size, topo, o->json);
            if (o->platform_out)
                fprintf(stderr, "shardq netbench: --platform-out %s: not written: nothing was "
                        "measured\n", o->platform_out);
        }
        rc = o->platform_out ? CLI_RUNTIME : CLI_OK;
        cli_ranks_end("netbench", &R, CLI_OK);
        return rc;
    }

    /* rank 0 opens the database before measuring, and every rank learns
    ** whether it could */
    sq_store *s = NULL;
    int64_t run = 0;
    if (leader && o->db) rc = store_begin(o, m, topo, hosts, &s, &run);
    if ((rc = agree(&R, rc)) != CLI_OK) {
        cli_ranks_end("netbench", &R, CLI_OK);
        return rc;
    }

    sq_netbench_printer pr = {.out = stdout, .json = o->json, .leader = leader, .op = -1,
                              .level = -1};
    if (leader && !o->json) sq_netbench_print_header(stdout, m, &o->cfg, R.size, topo, hosts);
    o->cfg.progress = sq_netbench_print_result;
    o->cfg.user = &pr;
    sq_netbench_result *res = NULL;
    size_t n = 0;
    sq_error err = {0};
    if (sq_netbench_run(m, &o->cfg, &res, &n, &err)) {
        fprintf(stderr, "shardq netbench: rank %d: %s\n", R.rank, sq_error_message(&err));
        if (s) {
            store_end(s, run, NULL, 0, sq_error_message(&err));
            sq_store_close(s);
        }
        return cli_ranks_end("netbench", &R, CLI_RUNTIME);
    }

    rc = CLI_OK;
    if (leader) {
        if (!o->json) {
            sq_netbench_print_block_end(&pr);
            sq_netbench_print_summary(stdout, m, &o->cfg, res, n, 0);
        }
        if (s) {
            rc = store_end(s, run, res, n, NULL);
            sq_store_close(s);
        }
        if (rc == CLI_OK && o->platform_out)
            rc = write_platform(o, &a, topo, hosts, name, res, n);
        if (o->json) {
            sq_netbench_print_json(stdout, m, &o->cfg, R.size, topo, hosts, res, n, o->db,
                                   s && rc == CLI_OK ? run : -1,
                                   rc == CLI_OK ? o->platform_out : NULL);
        } else {
            if (s && rc == CLI_OK)
                printf("stored as run %lld in %s (shardq db show %lld)\n", (long long)run,
                       o->db, (long long)run);
            if (o->platform_out && rc == CLI_OK)
                printf("platform %s written to %s (shardq model --platform %s)\n", name,
                       o->platform_out, o->platform_out);
        }
    }
    free(res);
    rc = agree(&R, rc);
    cli_ranks_end("netbench", &R, CLI_OK);
    return rc;
}

#endif /* SHARDQ_HAVE_MPI */

/* The options of one `shardq netbench`. */
typedef struct nb_args {
    const char *workers, *levels, *ops, *db, *platform_out, *name, *assume;
    uint64_t min_bytes, max_bytes, warmup, iters, busy;
    double seconds, tflops, hbm, quant;
    int json;
} nb_args;

enum { O_WORKERS = 1, O_LEVELS, O_OPS, O_MIN, O_MAX, O_WARMUP, O_ITERS, O_SECONDS, O_DB,
       O_NODB, O_BUSY, O_PLATFORM, O_NAME, O_ASSUME, O_TFLOPS, O_HBM, O_QUANT, O_JSON };

/* A file name that must not be empty. */
static int nonempty(const char *opt, const char *what, const char *arg, const char **out)
{
    if (!*arg) {
        fprintf(stderr, "shardq netbench: %s: the %s is empty\n", opt, what);
        return CLI_USAGE;
    }
    *out = arg;
    return CLI_OK;
}

/* A count of calls, at least one. */
static int parse_calls(const char *opt, const char *arg, const char *zero, uint64_t *out)
{
    if (cli_parse_u64("netbench", opt, arg, 1000000, out)) return CLI_USAGE;
    if (!*out) {
        fprintf(stderr, "shardq netbench: %s: 0: %s\n", opt, zero);
        return CLI_USAGE;
    }
    return CLI_OK;
}

static int parse_figure(const char *opt, const char *arg, double *out)
{
    return cli_parse_double("netbench", opt, arg, 1e-6, 1e9, out) ? CLI_USAGE : CLI_OK;
}

/* One option: CLI_OK to go on, else the exit status. */
static int parse_option(int ch, const char *arg, nb_args *a)
{
    switch (ch) {
    case O_WORKERS: a->workers = arg; return CLI_OK;
    case O_LEVELS: a->levels = arg; return CLI_OK;
    case O_OPS: a->ops = arg; return CLI_OK;
    case O_MIN: return parse_size("--min-bytes", arg, &a->min_bytes) ? CLI_USAGE : CLI_OK;
    case O_MAX: return parse_size("--max-bytes", arg, &a->max_bytes) ? CLI_USAGE : CLI_OK;
    case O_WARMUP:
        return parse_calls("--warmup", arg, "at least one untimed call sets the number of "
                           "timed ones", &a->warmup);
    case O_ITERS: return parse_calls("--iters", arg, "at least one call is timed", &a->iters);
    case O_SECONDS:
        return cli_parse_double("netbench", "--seconds", arg, 1e-6, 86400, &a->seconds)
                   ? CLI_USAGE : CLI_OK;
    case O_DB: return nonempty("--db", "database file name", arg, &a->db);
    case O_NODB: a->db = NULL; return CLI_OK;
    case O_BUSY:
        return cli_parse_u64("netbench", "--busy-timeout", arg, INT_MAX, &a->busy) ? CLI_USAGE
                                                                                   : CLI_OK;
    case O_PLATFORM: return nonempty("--platform-out", "file name", arg, &a->platform_out);
    case O_NAME: a->name = arg; return CLI_OK;
    case O_ASSUME: a->assume = arg; return CLI_OK;
    case O_TFLOPS: return parse_figure("--achieved-tflops", arg, &a->tflops);
    case O_HBM: return parse_figure("--hbm-gbs", arg, &a->hbm);
    case O_QUANT: return parse_figure("--quant-gbs", arg, &a->quant);
    case O_JSON: a->json = 1; return CLI_OK;
    default: return CLI_USAGE;
    }
}

/* The command line: CLI_OK to go on (*done after --help), else the exit
** status. */
static int parse_args(int argc, char **argv, nb_args *a, int *done)
{
    static const struct option longopts[] = {
        {"workers", required_argument, NULL, O_WORKERS},
        {"levels", required_argument, NULL, O_LEVELS},
        {"ops", required_argument, NULL, O_OPS},
        {"min-bytes", required_argument, NULL, O_MIN},
        {"max-bytes", required_argument, NULL, O_MAX},
        {"warmup", required_argument, NULL, O_WARMUP},
        {"iters", required_argument, NULL, O_ITERS},
        {"seconds", required_argument, NULL, O_SECONDS},
        {"db", required_argument, NULL, O_DB},
        {"no-db", no_argument, NULL, O_NODB},
        {"busy-timeout", required_argument, NULL, O_BUSY},
        {"platform-out", required_argument, NULL, O_PLATFORM},
        {"name", required_argument, NULL, O_NAME},
        {"assume", required_argument, NULL, O_ASSUME},
        {"achieved-tflops", required_argument, NULL, O_TFLOPS},
        {"hbm-gbs", required_argument, NULL, O_HBM},
        {"quant-gbs", required_argument, NULL, O_QUANT},
        {"json", no_argument, NULL, O_JSON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    static const char *const names[] = {
        "workers", "levels", "ops", "min-bytes", "max-bytes", "warmup", "iters", "seconds",
        "db", "no-db", "busy-timeout", "platform-out", "name", "assume", "achieved-tflops",
        "hbm-gbs", "quant-gbs", "json", "help", NULL};
    int ch, rc;
    opterr = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        if (ch == 'h') {
            fputs(netbench_usage, stdout);
            *done = 1;
            return CLI_OK;
        }
        if (ch == '?' || ch == ':') return cli_option_error("netbench", ch, argv, names);
        if ((rc = parse_option(ch, optarg, a)) != CLI_OK) return rc;
    }
    if (optind < argc) {
        fprintf(stderr, "shardq netbench: unexpected argument '%s'\nTry 'shardq netbench "
                "--help'.\n", argv[optind]);
        return CLI_USAGE;
    }
    return CLI_OK;
}

/* What the options say together: sizes in order, a name a platform can
** have, the platform's options only with its file. */
static int check_args(const nb_args *a)
{
    if (a->min_bytes > a->max_bytes) {
        fprintf(stderr, "shardq netbench: --min-bytes %llu is larger than --max-bytes %llu\n",
                (unsigned long long)a->min_bytes, (unsigned long long)a->max_bytes);
        return CLI_USAGE;
    }
    if (a->name) {
        size_t k = strlen(a->name);
        int ok = k > 0 && k < 64;
        for (const char *p = a->name; ok && *p; p++)
            ok = isalnum((unsigned char)*p) || *p == '-' || *p == '_' || *p == '.';
        if (!ok) {
            fprintf(stderr, "shardq netbench: --name: '%s': 1 to 63 letters, digits, '.', '-' "
                    "or '_'\n", a->name);
            return CLI_USAGE;
        }
    }
    if (!a->platform_out && (a->name || !isnan(a->tflops) || !isnan(a->hbm) || !isnan(a->quant))) {
        fprintf(stderr, "shardq netbench: --name, --achieved-tflops, --hbm-gbs and --quant-gbs "
                "are for the platform file: give --platform-out FILE\n");
        return CLI_USAGE;
    }
    return CLI_OK;
}

int cmd_netbench(int argc, char **argv)
{
    nb_args a = {.db = cli_default_db(), .assume = "a100-slingshot10", .min_bytes = 8,
                 .max_bytes = (uint64_t)64 << 20, .warmup = 5, .iters = 20,
                 .busy = SQ_STORE_BUSY_MS, .seconds = 1.0, .tflops = NAN, .hbm = NAN,
                 .quant = NAN};
    int done = 0, rc = parse_args(argc, argv, &a, &done);
    if (rc != CLI_OK || done) return rc;
    if ((rc = check_args(&a)) != CLI_OK) return rc;
    sq_topo topo = {0, 0};
    sq_error terr = {0};
    if (a.workers && sq_topo_parse(a.workers, &topo, &terr)) {
        fprintf(stderr, "shardq netbench: --workers: %s\n", sq_error_message(&terr));
        return CLI_USAGE;
    }
#ifndef SHARDQ_HAVE_MPI
    fprintf(stderr, "shardq netbench: this shardq was built without MPI, and netbench measures "
            "between MPI ranks (install the Debian packages openmpi-bin and libopenmpi-dev, or "
            "run ./bootstrap --deps, then ./configure and make again)\n");
    return CLI_USAGE;
#else
    opts o = {.db = a.db, .platform_out = a.platform_out, .name = a.name, .assume = a.assume,
              .tflops = a.tflops, .hbm = a.hbm, .quant = a.quant, .busy = (int)a.busy,
              .json = a.json};
    o.cfg = (sq_netbench_config){.min_bytes = a.min_bytes, .max_bytes = a.max_bytes,
                                 .warmup = (int)a.warmup, .iters = (int)a.iters,
                                 .seconds = a.seconds};
    if (a.levels && parse_names("--levels", a.levels, sq_netbench_level_parse,
                                "intra, inter, rail or all", &o.cfg.levels))
        return CLI_USAGE;
    if (a.ops && parse_names("--ops", a.ops, sq_netbench_op_parse,
                             "allgather, reducescatter or alltoall", &o.cfg.ops))
        return CLI_USAGE;
    sq_error err = {0};
    if (sq_netbench_config_check(&o.cfg, &err)) {
        fprintf(stderr, "shardq netbench: %s\n", sq_error_message(&err));
        return CLI_USAGE;
    }
    return measure(&o, &topo, a.workers != NULL);
#endif
}
