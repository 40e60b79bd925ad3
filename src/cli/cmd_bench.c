/*
** cmd_bench.c -- `shardq bench`: throughput of the codec operations beside
** the copy bandwidth of the same machine, measured in the same run (the
** method is src/bench/bench.c's, the store's src/bench/record.c's; this
** file parses the options and prints the figures as they come).
**
** With --db the figures also go to the store as a run of kind "bench": one
** bench_results row per printed figure, and the copy of each size as op
** "copy", so that `shardq report` can draw them and a cost model can read
** what this machine measured rather than a datasheet's number.
*/
#include "shardq/backend.h"
#include "shardq/bench.h"
#include "cli.h"
#include "progress.h"
#include "shardq/codec.h"
#include "shardq/store.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* More than the op table holds: --ops may name one twice (refused with --db). */
#define MAX_OPS 64

/* The most --threads may ask for: a team of 100000 overflows the stack in
** libgomp (SIGSEGV) long before it measures anything, and a figure at more
** threads than a large machine's cores measures the scheduler. */
#define MAX_THREADS 1024
/* The largest --sizes value in MB: 64 GiB of fp32 input, with its output
** and copy buffers beside it, is more than any device here holds. */
#define MAX_SIZE_MB 65536

/* ------------------------------------------------------------------------ */
/* Options                                                                  */
/* ------------------------------------------------------------------------ */

/* configure's PYTHON (Makefile.am passes it), as --help prints it */
#ifndef SQ_PYTHON
#define SQ_PYTHON "/usr/bin/python3"
#endif

/* The Python that runs the peer: $SHARDQ_PYTHON, else configure's PYTHON. */
static const char *peer_python(void)
{
    const char *p = getenv("SHARDQ_PYTHON");
    return p && *p ? p : SQ_PYTHON;
}

/* Parses "a,b,c" of integers from 1 to top (or 'all' -> all_value) into
** v[], at most max of them. */
static int parse_list(const char *opt, const char *s, int *v, int max, int top, int all_value)
{
    int n = 0;
    char *copy = strdup(s), *save = NULL;
    if (!copy) return -1;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long x;
        char *end;
        if (all_value > 0 && strcmp(tok, "all") == 0) {
            x = all_value;
        } else {
            errno = 0;
            x = strtol(tok, &end, 10);
            if (*end || end == tok || x < 1) {
                fprintf(stderr, "shardq bench: %s: '%s' is not a positive integer\n", opt, tok);
                free(copy);
                return -1;
            }
            if (errno == ERANGE || x > top) {
                fprintf(stderr, "shardq bench: %s: '%s' is larger than %d\n", opt, tok, top);
                free(copy);
                return -1;
            }
        }
        if (n == max) {
            fprintf(stderr, "shardq bench: %s: at most %d values\n", opt, max);
            free(copy);
            return -1;
        }
        v[n++] = (int)x;
    }
    free(copy);
    if (n == 0) fprintf(stderr, "shardq bench: %s: empty list\n", opt);
    return n ? n : -1;
}

/* A device name is checked before anything is measured: a typo is a usage
** error (2), a GPU that is not there a runtime one (1). */
static int check_device_name(const char *name)
{
    if (strcmp(name, "cpu") == 0 || strcmp(name, "cuda") == 0) return CLI_OK;
    if (strncmp(name, "cuda:", 5) == 0 && name[5]) {
        for (const char *p = name + 5; *p; p++)
            if (*p < '0' || *p > '9') break;
            else if (!p[1]) return CLI_OK;
    }
    fprintf(stderr, "shardq bench: --device: '%s' is not a device (use cpu, cuda or cuda:N)\n",
            name);
    return CLI_USAGE;
}

/* ------------------------------------------------------------------------ */
/* The command                                                              */
/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* The store                                                                */
/* ------------------------------------------------------------------------ */

/* The database keeps one row per (op, threads, size): a value listed twice
** would collide, so with --db it is refused up front, not at the first
** insert after minutes of measuring. */
static int check_unique(const char *opt, const int *v, int n, const char *const *names)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (v[i] == v[j]) {
                if (names)
                    fprintf(stderr, "shardq bench: --ops: '%s' is listed twice (the database "
                            "keeps one row per operation, thread count and size)\n", names[v[i]]);
                else
                    fprintf(stderr, "shardq bench: %s: %d is listed twice (the database keeps "
                            "one row per operation, thread count and size)\n", opt, v[i]);
                return -1;
            }
    return 0;
}

/* What the figures go to as they come: the terminal (the store is the
** library's, sq_bench_record). */
typedef struct bench_out {
    int json, table5, gpu, all, started;
    const int *sizes;
    int nsizes, nops, nthreads;
    char where[320];
    sq_progress *bar;
    const char *peer_python; /* --peer torch: the Python that runs it */
    double min_time;
    int peer_failed;
} bench_out;

/* The header and the progress bar, once: at the first figure, or after a
** failure that came once the run had begun (a store that cannot be written
** fails before, and prints nothing here). */
static void start(bench_out *o)
{
    if (o->started) return;
    o->started = 1;
    if (!o->json) sq_bench_print_header(stdout, o->gpu, o->where, o->all);
    o->bar = sq_progress_start("bench", (size_t)o->nsizes * (size_t)o->nthreads *
                                            (size_t)(o->nops + 1));
}

static int on_bench(void *user, const sq_bench_event *ev)
{
    bench_out *o = user;
    start(o);
    switch (ev->kind) {
    case SQ_BENCH_COPY: sq_progress_update(o->bar, ev->done); break;
    case SQ_BENCH_ROW:
        sq_progress_pause(o->bar);
        sq_bench_print_row(stdout, ev->row, o->where, o->json, ev->run);
        if (o->peer_python && sq_bench_peer_has_op(ev->row->op->name)) {
            sq_error err = {0};
            if (sq_bench_print_peer(stdout, ev->row, o->peer_python, o->min_time, o->json,
                                    &err) != SQ_OK) {
                fprintf(stderr, "shardq bench: --peer torch: %s\n", sq_error_message(&err));
                o->peer_failed = 1;
                return 1; /* stop the run */
            }
        }
        sq_progress_update(o->bar, ev->done);
        break;
    case SQ_BENCH_SIZE: break;
    case SQ_BENCH_PASS:
        if (o->table5) {
            sq_progress_pause(o->bar);
            sq_bench_print_table5(stdout, ev->rows, o->nsizes, o->nops, o->sizes);
        }
        break;
    }
    return 0;
}

/* The options of one `shardq bench`. */
typedef struct bench_args {
    int sizes[16], nsizes;
    int all, threads[16], nthreads, threads_given;
    int opsel[MAX_OPS], nops;
    const char *codec_override, *device, *db;
    double min_time;
    int json, peer;
    uint64_t busy;
} bench_args;

/* --ops LIST into a->opsel. */
static int parse_ops(const char *text, bench_args *a)
{
    a->nops = 0;
    char *copy = strdup(text), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        size_t k;
        if (sq_bench_find_op(tok, &k) != SQ_OK || a->nops == MAX_OPS) {
            fprintf(stderr, "shardq bench: --ops: unknown operation '%s' (see --help)\n", tok);
            free(copy);
            return CLI_USAGE;
        }
        a->opsel[a->nops++] = (int)k;
    }
    free(copy);
    if (a->nops == 0) {
        fprintf(stderr, "shardq bench: --ops: empty list\n");
        return CLI_USAGE;
    }
    return CLI_OK;
}

/* One option of the command line: CLI_OK to go on, else the exit status
** (-h is CLI_OK too, with *done set). */
static int parse_option(int ch, const char *arg, bench_args *a, int *done)
{
    switch (ch) {
    case 's':
        return (a->nsizes = parse_list("--sizes", arg, a->sizes, 16, MAX_SIZE_MB, 0)) < 0
                   ? CLI_USAGE : CLI_OK;
    case 't':
        a->threads_given = 1;
        return (a->nthreads = parse_list("--threads", arg, a->threads, 16, MAX_THREADS,
                                         a->all)) < 0 ? CLI_USAGE : CLI_OK;
    case 'o': return parse_ops(arg, a);
    case 'c': {
        sq_codec c;
        char err[256];
        if (sq_codec_parse(arg, &c, err, sizeof err) != SQ_OK) {
            fprintf(stderr, "shardq bench: --codec: %s\n", err);
            return CLI_USAGE;
        }
        a->codec_override = arg;
        return CLI_OK;
    }
    case 'm': {
        char *end;
        a->min_time = strtod(arg, &end);
        if (*end || !(a->min_time >= 0.0 && a->min_time <= 3600.0)) {
            fprintf(stderr, "shardq bench: --min-time: '%s' is not a number of seconds "
                            "from 0 to 3600\n", arg);
            return CLI_USAGE;
        }
        return CLI_OK;
    }
    case 'd':
        if (check_device_name(arg) != CLI_OK) return CLI_USAGE;
        a->device = arg;
        return CLI_OK;
    case 'j': a->json = 1; return CLI_OK;
    case 'D':
        if (!*arg) {
            fprintf(stderr, "shardq bench: --db: the database file name is empty\n");
            return CLI_USAGE;
        }
        a->db = arg;
        return CLI_OK;
    case 'B':
        return cli_parse_u64("bench", "--busy-timeout", arg, INT_MAX, &a->busy) ? CLI_USAGE
                                                                                : CLI_OK;
    case 'P':
        if (strcmp(arg, "torch") != 0) {
            fprintf(stderr, "shardq bench: --peer: unknown peer '%s' (torch is the one)\n", arg);
            return CLI_USAGE;
        }
        a->peer = 1;
        return CLI_OK;
    case 'h': cli_help_print("shardq-bench", "@PYTHON@", SQ_PYTHON, stdout); *done = 1; return CLI_OK;
    default: fputs("Try 'shardq bench --help'.\n", stderr); return CLI_USAGE;
    }
}

static int parse_args(int argc, char **argv, bench_args *a, int *done)
{
    static const struct option longopts[] = {
        {"sizes", required_argument, NULL, 's'},   {"threads", required_argument, NULL, 't'},
        {"ops", required_argument, NULL, 'o'},     {"codec", required_argument, NULL, 'c'},
        {"min-time", required_argument, NULL, 'm'}, {"device", required_argument, NULL, 'd'},
        {"json", no_argument, NULL, 'j'},          {"db", required_argument, NULL, 'D'},
        {"busy-timeout", required_argument, NULL, 'B'}, {"help", no_argument, NULL, 'h'},
        {"peer", required_argument, NULL, 'P'},
        {NULL, 0, NULL, 0}};
    optind = 1;
    int ch, rc;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1)
        if ((rc = parse_option(ch, optarg, a, done)) != CLI_OK || *done) return rc;
    if (optind < argc) {
        fprintf(stderr, "shardq bench: unexpected argument '%s'\n", argv[optind]);
        return CLI_USAGE;
    }
    return CLI_OK;
}

/* What the options mean on the device: the default operations and sizes,
** no thread count on a GPU, each figure once when stored. */
static int resolve_args(bench_args *a, int gpu, size_t *opidx)
{
    if (gpu && a->threads_given) {
        fprintf(stderr, "shardq bench: --threads: a GPU has no thread count to set\n");
        return CLI_USAGE;
    }
    for (int i = 0; i < a->nops; i++)
        if (gpu && sq_bench_op_at((size_t)a->opsel[i])->cpu_only) {
            fprintf(stderr, "shardq bench: --ops: '%s' is measured on the CPU only\n",
                    sq_bench_op_at((size_t)a->opsel[i])->name);
            return CLI_USAGE;
        }
    if (a->nops == 0) {
        a->nops = (int)sq_bench_default_ops(gpu, opidx, MAX_OPS);
        for (int i = 0; i < a->nops; i++) a->opsel[i] = (int)opidx[i];
    }
    for (int i = 0; i < a->nops; i++) opidx[i] = (size_t)a->opsel[i];
    if (a->nsizes == 0) {
        /* on a GPU, the sizes of SDP4Bit's Table 5 */
        static const int cpu_sizes[] = {1, 4, 16, 64, 256}, gpu_sizes[] = {8, 16, 64, 512, 1024, 2048};
        if (gpu) {
            a->nsizes = 6;
            memcpy(a->sizes, gpu_sizes, sizeof gpu_sizes);
        } else {
            a->nsizes = 5;
            memcpy(a->sizes, cpu_sizes, sizeof cpu_sizes);
        }
    }
    if (gpu) {
        a->threads[0] = 0; /* printed as 0: not applicable */
        a->nthreads = 1;
    }
    if (a->db) {
        const char *names[MAX_OPS];
        for (size_t i = 0; i < sq_bench_nops() && i < MAX_OPS; i++)
            names[i] = sq_bench_op_at(i)->name;
        if (check_unique("--sizes", a->sizes, a->nsizes, NULL) ||
            check_unique("--threads", a->threads, a->nthreads, NULL) ||
            check_unique("--ops", a->opsel, a->nops, names))
            return CLI_USAGE;
    }
    return CLI_OK;
}

/* The measurements, printed as they come (and stored with --db). */
static int run_bench(const bench_args *a, sq_backend *be, int gpu, const size_t *opidx)
{
    bench_out o = {.json = a->json, .gpu = gpu, .all = a->all, .sizes = a->sizes,
                   .nsizes = a->nsizes, .nops = a->nops, .nthreads = a->nthreads,
                   .peer_python = a->peer ? peer_python() : NULL, .min_time = a->min_time};
    sq_bench_device_text(be, o.where, sizeof o.where);
    sq_bench_config cfg = {.sizes_mb = a->sizes, .nsizes = a->nsizes, .threads = a->threads,
                           .nthreads = a->nthreads, .ops = opidx, .nops = a->nops,
                           .codec = a->codec_override, .min_time = a->min_time};
    o.table5 = !a->json && !a->codec_override;
    sq_error e = {0};
    int64_t run = 0;
    int rc;
    /* with a database the run begins before anything is measured or
    ** printed: one that cannot be written fails now, not after the
    ** measurements */
    if (a->db) {
        rc = sq_bench_record(a->db, (int)a->busy, be, &cfg, on_bench, &o, &run, &e);
    } else {
        start(&o);
        rc = sq_bench_run(be, &cfg, on_bench, &o, NULL, NULL, &e);
    }
    if (rc != SQ_OK && (!a->db || run > 0)) start(&o);
    sq_progress_finish(o.bar);
    if (o.peer_failed) return CLI_RUNTIME; /* said why */
    if (rc != SQ_OK) {
        fprintf(stderr, "shardq bench: %s\n", sq_error_message(&e));
        return CLI_RUNTIME;
    }
    if (a->db && !a->json) printf("\nstored as run %lld in %s\n", (long long)run, a->db);
    return CLI_OK;
}

int cmd_bench(int argc, char **argv)
{
    bench_args a = {.all = sq_get_threads(), .device = "cpu", .min_time = 0.2,
                    .busy = SQ_STORE_BUSY_MS};
    a.threads[0] = 1, a.threads[1] = a.all, a.nthreads = a.all > 1 ? 2 : 1;
    int done = 0, rc = parse_args(argc, argv, &a, &done);
    if (rc != CLI_OK || done) return rc;
    const int gpu = strcmp(a.device, "cpu") != 0;
    if (a.peer && (gpu || a.codec_override)) {
        fprintf(stderr, "shardq bench: --peer torch compares the default codecs on the CPU: "
                        "not with %s\n", gpu ? "--device cuda" : "--codec");
        return CLI_USAGE;
    }
    if (a.peer) { /* before anything is measured: a missing torch fails now */
        sq_error perr = {0};
        if (sq_bench_peer_check(peer_python(), &perr) != SQ_OK) {
            fprintf(stderr, "shardq bench: --peer torch: %s\n", sq_error_message(&perr));
            return CLI_RUNTIME;
        }
    }
    /* the device before what the options mean on it: where there is no
    ** such GPU, that is the error, not --threads or --ops given for a GPU */
    sq_backend *be = NULL;
    sq_error err;
    if (sq_backend_open(a.device, &be, &err) != SQ_OK) {
        /* the backend's sentence starts with the device's name, said already */
        const char *msg = sq_error_message(&err);
        size_t dl = strlen(a.device);
        if (!strncmp(msg, a.device, dl) && !strncmp(msg + dl, ": ", 2)) msg += dl + 2;
        fprintf(stderr, "shardq bench: --device %s: %s\n", a.device, msg);
        return CLI_RUNTIME;
    }
    size_t opidx[MAX_OPS];
    rc = resolve_args(&a, gpu, opidx);
    if (rc == CLI_OK) rc = run_bench(&a, be, gpu, opidx);
    sq_backend_close(be);
    return rc;
}
