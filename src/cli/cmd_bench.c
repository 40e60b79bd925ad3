/*
** cmd_bench.c -- `shardq bench`: throughput of the codec operations beside
** the memory bandwidth of the same machine, measured in the same run.
**
** A throughput figure means little alone: a quantizer at 5 GB/s is fast on a
** laptop and slow on a server. So every row is printed beside memcpy of the
** same number of bytes with the same number of threads, and the ratio is the
** figure to compare across machines. Bytes are counted as read + written,
** metadata included, exactly as the codec sizes them.
*/
#include "cli.h"
#include "progress.h"
#include "shardq.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static const char bench_usage[] =
    "usage: shardq bench [options]\n"
    "\n"
    "Measures every codec operation of the C reference on sizes from 1 MB to\n"
    "256 MB of fp32 input, with one thread and with all threads, and prints the\n"
    "throughput in GB/s (bytes read + written) beside memcpy of the same size.\n"
    "\n"
    "options:\n"
    "  --sizes LIST      input sizes in MB (default 1,4,16,64,256)\n"
    "  --threads LIST    thread counts; 'all' is every core (default 1,all)\n"
    "  --ops LIST        operations to run (default: all of them):\n"
    "                    quantize, quantize-rtn, quantize-8, dequantize,\n"
    "                    quantize-diff, dequantize-add, sum-requant, sum,\n"
    "                    hadamard, rng\n"
    "  --codec SPEC      replace the default codecs of the quantize and\n"
    "                    dequantize rows by SPEC\n"
    "  --min-time SEC    time each figure over at least SEC seconds (default 0.2)\n"
    "  --device DEV      cpu (default); cuda[:N] needs the CUDA codec backend\n"
    "  --json            one JSON object per line instead of the table\n"
    "  -h, --help        this text\n";

/* ------------------------------------------------------------------------ */
/* Timing                                                                   */
/* ------------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median seconds of one call of fn(arg): one warm-up call, then at least three
** timed calls and at least min_time seconds in all. The median rather than the
** best, so that a figure is what a user can expect, not a lucky run. */
#define MAX_REPS 256
static double time_median(int (*fn)(void *), void *arg, double min_time, int *rc)
{
    double t[MAX_REPS];
    int n = 0;
    double start = sq_clock_s();
    *rc = fn(arg);
    while (*rc == SQ_OK && n < MAX_REPS && (n < 3 || sq_clock_s() - start < min_time)) {
        double t0 = sq_clock_s();
        *rc = fn(arg);
        t[n++] = sq_clock_s() - t0;
    }
    if (n == 0) return 0.0;
    qsort(t, (size_t)n, sizeof(double), cmp_double);
    return t[n / 2];
}

/* ------------------------------------------------------------------------ */
/* The operations                                                           */
/* ------------------------------------------------------------------------ */

#define K_CHUNKS 4 /* workers per node summed by the reduce-scatter hops */

typedef struct bench_ctx {
    uint64_t n;
    float *x, *ref, *out;
    sq_codec c, c_out;
    sq_qbuf q, qout;
    sq_qbuf chunks[K_CHUNKS];
    sq_rng_key key;
    float *u;
} bench_ctx;

static int op_memcpy(void *arg)
{
    bench_ctx *b = arg;
    size_t bytes = (size_t)b->n * sizeof(float);
    int nth = sq_get_threads();
    /* each thread copies its own contiguous slice */
#pragma omp parallel for num_threads(nth) schedule(static)
    for (int t = 0; t < nth; t++) {
        size_t lo = bytes / (size_t)nth * (size_t)t;
        size_t hi = t == nth - 1 ? bytes : bytes / (size_t)nth * (size_t)(t + 1);
        memcpy((char *)b->out + lo, (const char *)b->x + lo, hi - lo);
    }
    return SQ_OK;
}

static int op_quantize(void *arg)
{
    bench_ctx *b = arg;
    return sq_quantize(&b->c, b->x, b->n, &b->key, &b->q);
}

static int op_dequantize(void *arg)
{
    bench_ctx *b = arg;
    return sq_dequantize(&b->c, &b->q, b->n, b->out);
}

static int op_quantize_diff(void *arg)
{
    bench_ctx *b = arg;
    return sq_quantize_diff(&b->c, b->x, b->ref, b->n, &b->key, &b->q);
}

static int op_dequantize_add(void *arg)
{
    bench_ctx *b = arg;
    return sq_dequantize_add(&b->c, &b->q, b->ref, b->n, b->out);
}

static int op_sum_requant(void *arg)
{
    bench_ctx *b = arg;
    return sq_dequant_sum_requant(&b->c, b->chunks, K_CHUNKS, b->n, &b->c_out, &b->key, &b->qout);
}

static int op_sum(void *arg)
{
    bench_ctx *b = arg;
    return sq_dequant_sum(&b->c, b->chunks, K_CHUNKS, b->n, b->out);
}

static int op_hadamard(void *arg)
{
    bench_ctx *b = arg;
    return sq_hadamard(b->out, b->n, 32);
}

/* The uniforms alone, as stochastic rounding draws them: what SR cannot go
** below. Threads take disjoint slices, as the fused operations do. */
static int op_rng(void *arg)
{
    bench_ctx *b = arg;
    int nth = sq_get_threads();
    uint64_t per = (b->n / (uint64_t)nth + 3) / 4 * 4;
#pragma omp parallel for num_threads(nth) schedule(static)
    for (int t = 0; t < nth; t++) {
        uint64_t lo = per * (uint64_t)t < b->n ? per * (uint64_t)t : b->n;
        uint64_t hi = lo + per < b->n ? lo + per : b->n;
        sq_uniform_n(&b->key, lo, hi - lo, b->out + lo);
    }
    return SQ_OK;
}

typedef enum { IN_FLOAT, IN_QUANT, IN_CHUNKS } input_kind;

typedef struct op_desc {
    const char *name;
    const char *codec;     /* default codec of the input */
    const char *codec_out; /* sum-requant: codec of the output */
    int (*fn)(void *);
    input_kind input;
    const char *what;      /* one line for the table */
} op_desc;

static const op_desc ops[] = {
    {"quantize", "kind=sym,bits=4,group=128,round=sr,hadamard=32", NULL, op_quantize, IN_FLOAT,
     "fp32 -> 4-bit SR with a 32-point Hadamard (TLq-HS)"},
    {"quantize-rtn", "kind=sym,bits=4,group=128,round=rtn", NULL, op_quantize, IN_FLOAT,
     "fp32 -> 4-bit RTN (ZeRO++ qgZ)"},
    {"quantize-8", "kind=sym,bits=8,group=128,round=sr,hadamard=32", NULL, op_quantize, IN_FLOAT,
     "fp32 -> 8-bit SR with Hadamard (TLq-HS intra hop)"},
    {"dequantize", "kind=sym,bits=4,group=128,round=sr,hadamard=32", NULL, op_dequantize,
     IN_QUANT, "4-bit -> fp32 with inverse Hadamard"},
    {"quantize-diff", "kind=sym,bits=4,group=2048,round=sr", NULL, op_quantize_diff, IN_FLOAT,
     "Q(w - w_ref), 4-bit SR, group 2048 (qWD send)"},
    {"dequantize-add", "kind=sym,bits=4,group=2048,round=sr", NULL, op_dequantize_add, IN_QUANT,
     "w_ref + D(q) (qWD receive)"},
    {"sum-requant", "kind=sym,bits=8,group=128,round=sr", "kind=sym,bits=4,group=128,round=sr",
     op_sum_requant, IN_CHUNKS, "4 x 8-bit -> sum -> 4-bit SR (middle hop)"},
    {"sum", "kind=sym,bits=4,group=128,round=sr,hadamard=32", NULL, op_sum, IN_CHUNKS,
     "4 x 4-bit -> sum -> inverse Hadamard (last hop)"},
    {"hadamard", NULL, NULL, op_hadamard, IN_FLOAT, "32-point Hadamard, in place"},
    {"rng", NULL, NULL, op_rng, IN_FLOAT, "Philox4x32-10 uniforms alone (SR's floor)"},
};
#define N_OPS (sizeof ops / sizeof ops[0])

/* Bytes read + written by one call. */
static double op_bytes(const op_desc *o, const bench_ctx *b)
{
    double f = 4.0 * (double)b->n;
    double q = o->codec ? (double)sq_codec_bytes(&b->c, b->n) : 0.0;
    if (o->fn == op_quantize) return f + q;
    if (o->fn == op_dequantize) return q + f;
    if (o->fn == op_quantize_diff) return 2 * f + q;
    if (o->fn == op_dequantize_add) return q + 2 * f;
    if (o->fn == op_sum_requant) return K_CHUNKS * q + (double)sq_codec_bytes(&b->c_out, b->n);
    if (o->fn == op_sum) return K_CHUNKS * q + f;
    if (o->fn == op_hadamard) return 2 * f;
    return f; /* rng: the uniforms written */
}

/* ------------------------------------------------------------------------ */
/* Inputs                                                                   */
/* ------------------------------------------------------------------------ */

/* Gradient-like values: a smooth spread with an outlier every 997 elements,
** from a fixed integer recipe so every run benchmarks the same data. */
static void fill_input(float *x, uint64_t n, uint32_t salt)
{
    uint32_t s = 0x9e3779b9u ^ salt;
    for (uint64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        float v = ((float)(s >> 8) * 5.9604644775390625e-08f - 0.5f) * 2e-3f;
        x[i] = i % 997 == 0 ? v * 40.0f : v;
    }
}

static void ctx_free(bench_ctx *b)
{
    free(b->x);
    free(b->ref);
    free(b->out);
    sq_qbuf_free(&b->q);
    sq_qbuf_free(&b->qout);
    for (int k = 0; k < K_CHUNKS; k++) sq_qbuf_free(&b->chunks[k]);
    memset(b, 0, sizeof *b);
}

/* Prepares the buffers one operation reads and writes. */
static int ctx_setup(bench_ctx *b, const op_desc *o, const char *codec_override, uint64_t n)
{
    char err[256];
    memset(b, 0, sizeof *b);
    b->n = n;
    b->key = (sq_rng_key){.seed = 0x5eed, .step = 1, .worker = 0, .site = SQ_SITE_GRAD_INTRA};
    b->x = malloc(n * sizeof(float));
    b->ref = malloc(n * sizeof(float));
    b->out = malloc(n * sizeof(float));
    if (!b->x || !b->ref || !b->out) return SQ_ERR_NOMEM;
    fill_input(b->x, n, 1);
    fill_input(b->ref, n, 2);
    memcpy(b->out, b->x, n * sizeof(float));
    if (!o || !o->codec) return SQ_OK;
    const char *spec = codec_override && o->fn != op_sum_requant ? codec_override : o->codec;
    if (sq_codec_parse(spec, &b->c, err, sizeof err) != SQ_OK) {
        fprintf(stderr, "shardq bench: --codec: %s\n", err);
        return SQ_ERR_SPEC;
    }
    if (o->codec_out && sq_codec_parse(o->codec_out, &b->c_out, err, sizeof err) != SQ_OK)
        return SQ_ERR_SPEC;
    int rc = sq_qbuf_alloc(&b->c, n, &b->q);
    if (rc == SQ_OK && o->codec_out) rc = sq_qbuf_alloc(&b->c_out, n, &b->qout);
    if (rc == SQ_OK && o->input == IN_QUANT) rc = sq_quantize(&b->c, b->x, n, &b->key, &b->q);
    for (int k = 0; rc == SQ_OK && o->input == IN_CHUNKS && k < K_CHUNKS; k++) {
        sq_rng_key kk = b->key;
        kk.worker = (uint32_t)k;
        rc = sq_qbuf_alloc(&b->c, n, &b->chunks[k]);
        if (rc == SQ_OK) rc = sq_quantize(&b->c, b->x, n, &kk, &b->chunks[k]);
    }
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Options                                                                  */
/* ------------------------------------------------------------------------ */

/* Parses "a,b,c" of positive integers (or 'all' -> all_value) into v[]. */
static int parse_list(const char *opt, const char *s, int *v, int max, int all_value)
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
            x = strtol(tok, &end, 10);
            if (*end || x < 1 || x > 1 << 20) {
                fprintf(stderr, "shardq bench: %s: '%s' is not a positive integer\n", opt, tok);
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

static int find_op(const char *name)
{
    for (size_t i = 0; i < N_OPS; i++)
        if (strcmp(ops[i].name, name) == 0) return (int)i;
    return -1;
}

static void cpu_name(char *buf, size_t len)
{
    snprintf(buf, len, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *p = strchr(line, ':');
            if (p) {
                p += 1 + (p[1] == ' ');
                p[strcspn(p, "\n")] = '\0';
                snprintf(buf, len, "%s", p);
            }
            break;
        }
    }
    fclose(f);
}

/* ------------------------------------------------------------------------ */
/* The command                                                              */
/* ------------------------------------------------------------------------ */

int cmd_bench(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"sizes", required_argument, NULL, 's'},   {"threads", required_argument, NULL, 't'},
        {"ops", required_argument, NULL, 'o'},     {"codec", required_argument, NULL, 'c'},
        {"min-time", required_argument, NULL, 'm'}, {"device", required_argument, NULL, 'd'},
        {"json", no_argument, NULL, 'j'},          {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int sizes[16] = {1, 4, 16, 64, 256}, nsizes = 5;
    int all = sq_get_threads();
    int threads[16] = {1, all}, nthreads = all > 1 ? 2 : 1;
    int opsel[N_OPS], nops = 0;
    const char *codec_override = NULL;
    double min_time = 0.2;
    int json = 0;
    for (size_t i = 0; i < N_OPS; i++) opsel[nops++] = (int)i;

    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 's':
            if ((nsizes = parse_list("--sizes", optarg, sizes, 16, 0)) < 0) return 2;
            break;
        case 't':
            if ((nthreads = parse_list("--threads", optarg, threads, 16, all)) < 0) return 2;
            break;
        case 'o': {
            nops = 0;
            char *copy = strdup(optarg), *save = NULL;
            for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                int k = find_op(tok);
                if (k < 0 || nops == (int)N_OPS) {
                    fprintf(stderr, "shardq bench: --ops: unknown operation '%s' (see --help)\n",
                            tok);
                    free(copy);
                    return 2;
                }
                opsel[nops++] = k;
            }
            free(copy);
            if (nops == 0) {
                fprintf(stderr, "shardq bench: --ops: empty list\n");
                return 2;
            }
            break;
        }
        case 'c': {
            sq_codec c;
            char err[256];
            if (sq_codec_parse(optarg, &c, err, sizeof err) != SQ_OK) {
                fprintf(stderr, "shardq bench: --codec: %s\n", err);
                return 2;
            }
            codec_override = optarg;
            break;
        }
        case 'm': {
            char *end;
            min_time = strtod(optarg, &end);
            if (*end || !(min_time >= 0.0 && min_time <= 3600.0)) {
                fprintf(stderr, "shardq bench: --min-time: '%s' is not a number of seconds "
                                "from 0 to 3600\n", optarg);
                return 2;
            }
            break;
        }
        case 'd':
            if (strcmp(optarg, "cpu") != 0) {
                fprintf(stderr,
                        "shardq bench: --device %s: this version has the C reference only; "
                        "the CUDA codec backend is not built into it yet (use --device cpu)\n",
                        optarg);
                return 2;
            }
            break;
        case 'j': json = 1; break;
        case 'h': fputs(bench_usage, stdout); return 0;
        default: fputs("Try 'shardq bench --help'.\n", stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "shardq bench: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }

    char cpu[256];
    cpu_name(cpu, sizeof cpu);
    if (!json) {
        printf("shardq bench: C reference on %s, %d threads available\n", cpu, all);
        printf("GB/s = (bytes read + bytes written) / time, median of repeats; memcpy moves the\n"
               "input size with the same thread count in the same run.\n\n");
        printf("%-15s %8s %7s %9s %10s %8s  %s\n", "op", "size MB", "threads", "GB/s",
               "memcpy", "% copy", "what");
    }
    size_t total = (size_t)nsizes * (size_t)nthreads * (size_t)(nops + 1), done = 0;
    sq_progress *bar = sq_progress_start("bench", total);
    int status = 0;
    for (int si = 0; si < nsizes && !status; si++) {
        uint64_t n = (uint64_t)sizes[si] * (1u << 20) / 4;
        for (int ti = 0; ti < nthreads && !status; ti++) {
            sq_set_threads(threads[ti]);
            bench_ctx b;
            int rc = ctx_setup(&b, NULL, NULL, n);
            double tcopy = rc == SQ_OK ? time_median(op_memcpy, &b, min_time, &rc) : 0.0;
            double copy_gbs = tcopy > 0 ? 2.0 * 4.0 * (double)n / tcopy / 1e9 : 0.0;
            ctx_free(&b);
            sq_progress_update(bar, ++done);
            for (int oi = 0; oi < nops && rc == SQ_OK; oi++) {
                const op_desc *o = &ops[opsel[oi]];
                rc = ctx_setup(&b, o, codec_override, n);
                double t = rc == SQ_OK ? time_median(o->fn, &b, min_time, &rc) : 0.0;
                if (rc != SQ_OK) {
                    sq_progress_finish(bar);
                    bar = NULL;
                    fprintf(stderr, "shardq bench: %s: %s\n", o->name, sq_strerror(rc));
                    status = 1;
                    ctx_free(&b);
                    break;
                }
                double gbs = op_bytes(o, &b) / t / 1e9;
                char spec[SQ_CODEC_STRLEN] = "-";
                if (o->codec) sq_codec_format(&b.c, spec, sizeof spec);
                sq_progress_pause(bar);
                if (json)
                    printf("{\"op\":\"%s\",\"codec\":\"%s\",\"bytes_in\":%llu,\"threads\":%d,"
                           "\"seconds\":%.6g,\"gbps\":%.4f,\"memcpy_gbps\":%.4f,"
                           "\"cpu\":\"%s\"}\n",
                           o->name, spec, (unsigned long long)(4 * n), threads[ti], t, gbs,
                           copy_gbs, cpu);
                else
                    printf("%-15s %8d %7d %9.2f %10.2f %7.1f%%  %s\n", o->name, sizes[si],
                           threads[ti], gbs, copy_gbs, 100.0 * gbs / copy_gbs, o->what);
                fflush(stdout);
                ctx_free(&b);
                sq_progress_update(bar, ++done);
            }
            if (rc == SQ_ERR_NOMEM && !status) {
                fprintf(stderr, "shardq bench: out of memory at %d MB\n", sizes[si]);
                status = 1;
            }
        }
    }
    sq_progress_finish(bar);
    sq_set_threads(0);
    return status;
}
