/*
** cmd_bench.c -- `shardq bench`: throughput of the codec operations beside
** the copy bandwidth of the same machine, measured in the same run.
**
** A throughput figure means little alone: a quantizer at 5 GB/s is fast on a
** laptop and slow on a server. So every row is printed beside a plain copy
** of the same number of bytes on the same device (memcpy with the same
** thread count on the CPU, a device-to-device copy on a GPU), and the ratio
** is the figure to compare across machines. Bytes are counted as read +
** written, metadata included, exactly as the codec sizes them. Kernels with
** a fused Hadamard transform are also printed as a fraction of their twin
** without it, which is the cost of the transform.
**
** Every operation runs through the backend layer, so the CPU and a GPU are
** measured by the same code; a GPU is timed with CUDA events over batches of
** calls enqueued back to back.
**
** With --db the figures also go to the store as a run of kind "bench": one
** bench_results row per printed figure, and the copy of each size as op
** "copy", so that `shardq report` can draw them and a cost model can read
** what this machine measured rather than a datasheet's number.
*/
#include "backend/backend.h"
#include "backend/device.h"
#include "cli.h"
#include "progress.h"
#include "shardq.h"
#include "store/store.h"

#include <cjson/cJSON.h>

#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char bench_usage[] =
    "usage: shardq bench [options]\n"
    "\n"
    "Measures the codec operations on a device and prints their throughput in\n"
    "GB/s (bytes read + written, metadata included) beside a plain copy of the\n"
    "same size measured in the same run: memcpy with the same thread count on\n"
    "the CPU, a device-to-device copy on a GPU.\n"
    "\n"
    "options:\n"
    "  --device DEV      cpu (default: the C reference), cuda (device 0) or\n"
    "                    cuda:N (the CUDA kernels on device N)\n"
    "  --sizes LIST      input sizes in MB of fp32 (default 1,4,16,64,256 on the\n"
    "                    CPU, 8,16,64,512,1024,2048 on a GPU)\n"
    "  --threads LIST    CPU thread counts; 'all' is every core (default 1,all)\n"
    "  --ops LIST        operations to run (default: all that the device has):\n"
    "                    quantize, quantize-nh, quantize-rtn, quantize-8,\n"
    "                    quantize-8-nh, quantize-8-rtn, quantize-h1024,\n"
    "                    dequantize, dequantize-nh, dequantize-8,\n"
    "                    dequantize-8-nh, quantize-diff, dequantize-add,\n"
    "                    sum-requant, sum, sum-nh, and on the CPU hadamard, rng\n"
    "  --codec SPEC      replace the codec of every quantize and dequantize row\n"
    "                    by SPEC\n"
    "  --min-time SEC    time each figure over at least SEC seconds (default 0.2)\n"
    "  --json            one JSON object per line instead of the table\n"
    "  --db FILE         also store the figures in FILE as a run of kind\n"
    "                    'bench' (db export bench_results; default: store\n"
    "                    nothing)\n"
    "  --busy-timeout MS how long to wait for a locked database (default 10000)\n"
    "  -h, --help        this text\n"
    "\n"
    "A row with a Hadamard transform also shows its throughput relative to the\n"
    "same kernel without it (the -nh rows), when both run; when the quantize and\n"
    "dequantize rows of a bit width ran with and without it, a summary in the\n"
    "form of SDP4Bit's Table 5 follows (GB/s +- std beside the copy).\n";

/* ------------------------------------------------------------------------ */
/* The operations                                                           */
/* ------------------------------------------------------------------------ */

#define K_CHUNKS 4 /* workers per node summed by the reduce-scatter hops */

/* Buffers of one input size, on the benchmarked backend. */
typedef struct bench_ctx {
    sq_backend *be;
    uint64_t n;
    float *x, *ref, *out;    /* backend memory */
    sq_codec c, c_out;
    sq_qbuf q, qout;
    sq_qbuf chunks[K_CHUNKS];
    sq_rng_key key;
} bench_ctx;

static int op_copy(bench_ctx *b)
{
    size_t bytes = (size_t)b->n * sizeof(float);
    if (sq_backend_kind_of(b->be) == SQ_BACKEND_CUDA)
        return sq_backend_copy(b->be, b->out, b->be, b->x, bytes);
    /* each thread copies its own contiguous slice */
    int nth = sq_get_threads();
#pragma omp parallel for num_threads(nth) schedule(static)
    for (int t = 0; t < nth; t++) {
        size_t lo = bytes / (size_t)nth * (size_t)t;
        size_t hi = t == nth - 1 ? bytes : bytes / (size_t)nth * (size_t)(t + 1);
        memcpy((char *)b->out + lo, (const char *)b->x + lo, hi - lo);
    }
    return SQ_OK;
}

static int op_quantize(bench_ctx *b)
{
    return sq_backend_quantize(b->be, &b->c, b->x, b->n, &b->key, &b->q);
}

static int op_dequantize(bench_ctx *b)
{
    return sq_backend_dequantize(b->be, &b->c, &b->q, b->n, b->out);
}

static int op_quantize_diff(bench_ctx *b)
{
    return sq_backend_quantize_diff(b->be, &b->c, b->x, b->ref, b->n, &b->key, &b->q);
}

static int op_dequantize_add(bench_ctx *b)
{
    return sq_backend_dequantize_add(b->be, &b->c, &b->q, b->ref, b->n, b->out);
}

static int op_sum_requant(bench_ctx *b)
{
    return sq_backend_dequant_sum_requant(b->be, &b->c, b->chunks, K_CHUNKS, b->n, &b->c_out,
                                          &b->key, &b->qout);
}

static int op_sum(bench_ctx *b)
{
    return sq_backend_dequant_sum(b->be, &b->c, b->chunks, K_CHUNKS, b->n, b->out);
}

/* CPU only: the transform alone, and the uniforms alone, as stochastic
** rounding draws them (what SR cannot go below). */
static int op_hadamard(bench_ctx *b)
{
    return sq_hadamard(b->out, b->n, 32);
}

static int op_rng(bench_ctx *b)
{
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
    int (*fn)(bench_ctx *);
    input_kind input;
    int cpu_only;
    const char *twin;      /* the same kernel without the Hadamard transform */
    const char *what;      /* one line for the table */
} op_desc;

#define TLQHS4 "kind=sym,bits=4,group=128,round=sr,hadamard=32"
#define TLQHS8 "kind=sym,bits=8,group=128,round=sr,hadamard=32"

static const op_desc ops[] = {
    {"quantize-nh", "kind=sym,bits=4,group=128,round=sr", NULL, op_quantize, IN_FLOAT, 0, NULL,
     "fp32 -> 4-bit SR, group 128"},
    {"quantize", TLQHS4, NULL, op_quantize, IN_FLOAT, 0, "quantize-nh",
     "fp32 -> 4-bit SR with a 32-point Hadamard (TLq-HS)"},
    {"quantize-h1024", "kind=sym,bits=4,group=1024,round=sr,hadamard=1024", NULL, op_quantize,
     IN_FLOAT, 0, NULL, "fp32 -> 4-bit SR, group 1024, 1024-point Hadamard"},
    {"quantize-rtn", "kind=sym,bits=4,group=128,round=rtn", NULL, op_quantize, IN_FLOAT, 0, NULL,
     "fp32 -> 4-bit RTN (ZeRO++ qgZ)"},
    {"quantize-8-nh", "kind=sym,bits=8,group=128,round=sr", NULL, op_quantize, IN_FLOAT, 0, NULL,
     "fp32 -> 8-bit SR, group 128"},
    {"quantize-8", TLQHS8, NULL, op_quantize, IN_FLOAT, 0, "quantize-8-nh",
     "fp32 -> 8-bit SR with Hadamard (TLq-HS intra hop)"},
    {"quantize-8-rtn", "kind=sym,bits=8,group=128,round=rtn", NULL, op_quantize, IN_FLOAT, 0,
     NULL, "fp32 -> 8-bit RTN"},
    {"dequantize-nh", "kind=sym,bits=4,group=128,round=sr", NULL, op_dequantize, IN_QUANT, 0,
     NULL, "4-bit -> fp32"},
    {"dequantize", TLQHS4, NULL, op_dequantize, IN_QUANT, 0, "dequantize-nh",
     "4-bit -> fp32 with inverse Hadamard"},
    {"dequantize-8-nh", "kind=sym,bits=8,group=128,round=sr", NULL, op_dequantize, IN_QUANT, 0,
     NULL, "8-bit -> fp32"},
    {"dequantize-8", TLQHS8, NULL, op_dequantize, IN_QUANT, 0, "dequantize-8-nh",
     "8-bit -> fp32 with inverse Hadamard"},
    {"quantize-diff", "kind=sym,bits=4,group=2048,round=sr", NULL, op_quantize_diff, IN_FLOAT, 0,
     NULL, "Q(w - w_ref), 4-bit SR, group 2048 (qWD send)"},
    {"dequantize-add", "kind=sym,bits=4,group=2048,round=sr", NULL, op_dequantize_add, IN_QUANT,
     0, NULL, "w_ref + D(q) (qWD receive)"},
    {"sum-requant", "kind=sym,bits=8,group=128,round=sr", "kind=sym,bits=4,group=128,round=sr",
     op_sum_requant, IN_CHUNKS, 0, NULL, "4 x 8-bit -> sum -> 4-bit SR (middle hop)"},
    {"sum-nh", "kind=sym,bits=4,group=128,round=sr", NULL, op_sum, IN_CHUNKS, 0, NULL,
     "4 x 4-bit -> sum"},
    {"sum", TLQHS4, NULL, op_sum, IN_CHUNKS, 0, "sum-nh",
     "4 x 4-bit -> sum -> inverse Hadamard (last hop)"},
    {"hadamard", NULL, NULL, op_hadamard, IN_FLOAT, 1, NULL, "32-point Hadamard, in place"},
    {"rng", NULL, NULL, op_rng, IN_FLOAT, 1, NULL, "Philox4x32-10 uniforms alone (SR's floor)"},
};
#define N_OPS (sizeof ops / sizeof ops[0])

/* The CPU's default rows (what the C reference's figures in README are). */
static const char *const cpu_default_ops[] = {
    "quantize", "quantize-rtn", "quantize-8", "dequantize", "quantize-diff",
    "dequantize-add", "sum-requant", "sum", "hadamard", "rng"};

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
    if (o->fn == op_hadamard || o->fn == op_copy) return 2 * f;
    return f; /* rng: the uniforms written */
}

/* ------------------------------------------------------------------------ */
/* Timing                                                                   */
/* ------------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Seconds of one call of fn, one figure per batch: a warm-up call, then
** batches of calls enqueued back to back (deferred, so a GPU never waits for
** the host between them), each batch timed on the backend's clock, at least
** three batches and min_time seconds in all. Returns the number of batches
** in t[] (0 on failure, with *rc set). */
#define MAX_BATCHES 64
static int time_op(bench_ctx *b, int (*fn)(bench_ctx *), double min_time, double t[MAX_BATCHES],
                   int *rc)
{
    double one = 0.0;
    int n = 0;
    *rc = fn(b);
    if (*rc == SQ_OK) *rc = sq_backend_sync(b->be);
    if (*rc == SQ_OK) *rc = sq_backend_timer_start(b->be);
    if (*rc == SQ_OK) *rc = fn(b);
    if (*rc == SQ_OK) *rc = sq_backend_timer_stop(b->be, &one);
    if (*rc != SQ_OK) return 0;
    /* batches of about a tenth of min_time, at least 1 ms on a GPU */
    double want = min_time / 10 > 1e-3 ? min_time / 10 : 1e-3;
    long reps = one > 0 ? (long)(want / one) + 1 : 1;
    if (reps > 100000) reps = 100000;
    if ((*rc = sq_backend_set_deferred(b->be, 1)) != SQ_OK) return 0;
    double spent = 0.0;
    while (n < MAX_BATCHES && (n < 3 || spent < min_time)) {
        double s = 0.0;
        int r = sq_backend_timer_start(b->be);
        for (long i = 0; i < reps && r == SQ_OK; i++) r = fn(b);
        if (r == SQ_OK) r = sq_backend_timer_stop(b->be, &s);
        if (r != SQ_OK) {
            *rc = r;
            break;
        }
        t[n++] = s / (double)reps;
        spent += s;
    }
    int r = sq_backend_set_deferred(b->be, 0); /* waits, and reports the batch */
    if (*rc == SQ_OK) *rc = r;
    return *rc == SQ_OK ? n : 0;
}

/* GB/s of each batch: the median (what a user can expect, not a lucky run)
** and the standard deviation. */
static void throughput(double bytes, const double *t, int n, double *median, double *std)
{
    double g[MAX_BATCHES], sum = 0.0, sq = 0.0;
    for (int i = 0; i < n; i++) {
        g[i] = bytes / t[i] / 1e9;
        sum += g[i];
    }
    qsort(g, (size_t)n, sizeof(double), cmp_double);
    *median = n % 2 ? g[n / 2] : 0.5 * (g[n / 2 - 1] + g[n / 2]);
    for (int i = 0; i < n; i++) sq += (g[i] - sum / n) * (g[i] - sum / n);
    *std = n > 1 ? sqrt(sq / (n - 1)) : 0.0;
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

static void free_codec_buffers(bench_ctx *b)
{
    sq_backend_qbuf_free(b->be, &b->q);
    sq_backend_qbuf_free(b->be, &b->qout);
    for (int k = 0; k < K_CHUNKS; k++) sq_backend_qbuf_free(b->be, &b->chunks[k]);
}

static void ctx_free(bench_ctx *b)
{
    free_codec_buffers(b);
    sq_backend_free(b->be, b->x);
    sq_backend_free(b->be, b->ref);
    sq_backend_free(b->be, b->out);
    b->x = b->ref = b->out = NULL;
}

/* The float buffers of one size, filled on the host and put on the backend. */
static int ctx_setup(bench_ctx *b, sq_backend *be, uint64_t n)
{
    memset(b, 0, sizeof *b);
    b->be = be;
    b->n = n;
    b->key = (sq_rng_key){.seed = 0x5eed, .step = 1, .worker = 0, .site = SQ_SITE_GRAD_INTRA};
    size_t bytes = (size_t)n * sizeof(float);
    int rc = sq_backend_alloc(be, bytes, (void **)&b->x);
    if (rc == SQ_OK) rc = sq_backend_alloc(be, bytes, (void **)&b->ref);
    if (rc == SQ_OK) rc = sq_backend_alloc(be, bytes, (void **)&b->out);
    if (rc != SQ_OK) return rc;
    /* staged on the host even for the CPU backend: filling x in place and
    ** then the stage with ref's values would leave x equal to ref */
    float *host = malloc(bytes);
    if (!host) return SQ_ERR_NOMEM;
    fill_input(host, n, 1);
    rc = sq_backend_put(be, b->x, host, bytes);
    fill_input(host, n, 2);
    if (rc == SQ_OK) rc = sq_backend_put(be, b->ref, host, bytes);
    free(host);
    if (rc == SQ_OK) rc = sq_backend_copy(be, b->out, be, b->x, bytes);
    return rc;
}

/* The codec buffers one operation reads and writes. */
static int op_setup(bench_ctx *b, const op_desc *o, const char *codec_override)
{
    char err[256];
    free_codec_buffers(b);
    if (!o->codec) return SQ_OK;
    const char *spec = codec_override && o->fn != op_sum_requant ? codec_override : o->codec;
    if (sq_codec_parse(spec, &b->c, err, sizeof err) != SQ_OK) return SQ_ERR_SPEC;
    if (o->codec_out && sq_codec_parse(o->codec_out, &b->c_out, err, sizeof err) != SQ_OK)
        return SQ_ERR_SPEC;
    int rc = sq_backend_qbuf_alloc(b->be, &b->c, b->n, &b->q);
    if (rc == SQ_OK && o->codec_out) rc = sq_backend_qbuf_alloc(b->be, &b->c_out, b->n, &b->qout);
    if (rc == SQ_OK && o->input == IN_QUANT)
        rc = sq_backend_quantize(b->be, &b->c, b->x, b->n, &b->key, &b->q);
    for (int k = 0; rc == SQ_OK && o->input == IN_CHUNKS && k < K_CHUNKS; k++) {
        sq_rng_key kk = b->key;
        kk.worker = (uint32_t)k;
        rc = sq_backend_qbuf_alloc(b->be, &b->c, b->n, &b->chunks[k]);
        if (rc == SQ_OK) rc = sq_backend_quantize(b->be, &b->c, b->x, b->n, &kk, &b->chunks[k]);
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

typedef struct row {
    const op_desc *o;     /* NULL: not measured */
    int size_mb, threads;
    double gbs, gbs_std, copy_gbs, copy_std;
    double bytes;         /* read + written by one call */
    double twin_ratio;    /* < 0: no twin measured */
    char codec[SQ_CODEC_STRLEN];
} row;

static void print_row(const row *r, const char *device, int json, int64_t run)
{
    if (json) {
        printf("{\"op\":\"%s\",\"codec\":\"%s\",\"bytes_in\":%llu,\"threads\":%d,"
               "\"gbps\":%.4f,\"gbps_std\":%.4f,\"copy_gbps\":%.4f,\"percent_of_copy\":%.2f,",
               r->o->name, r->codec, (unsigned long long)r->size_mb << 20, r->threads, r->gbs,
               r->gbs_std, r->copy_gbs, 100.0 * r->gbs / r->copy_gbs);
        if (r->twin_ratio >= 0)
            printf("\"vs_without_hadamard\":%.4f,", r->twin_ratio);
        if (run > 0) printf("\"run\":%lld,", (long long)run);
        printf("\"device\":\"%s\"}\n", device);
    } else {
        char twin[16] = "", th[16] = "-";
        if (r->twin_ratio >= 0) snprintf(twin, sizeof twin, "%.1f%%", 100.0 * r->twin_ratio);
        if (r->threads > 0) snprintf(th, sizeof th, "%d", r->threads);
        printf("%-15s %8d %7s %9.2f %10.2f %7.1f%% %8s  %s\n", r->o->name, r->size_mb, th, r->gbs,
               r->copy_gbs, 100.0 * r->gbs / r->copy_gbs, twin, r->o->what);
    }
    fflush(stdout);
}

/* SDP4Bit's Table 5 form: one line per input size, quantize and dequantize
** without and with the fused Hadamard, GB/s +- std, here beside the copy.
** Printed for each bit width whose four rows ran at every size. */
static void print_table5(const row *rows, int nsizes, int nops, const int *sizes)
{
    static const char *const cols[2][4] = {
        {"quantize-nh", "quantize", "dequantize-nh", "dequantize"},
        {"quantize-8-nh", "quantize-8", "dequantize-8-nh", "dequantize-8"}};
    for (int w = 0; w < 2; w++) {
        const row *cell[16][4];
        int complete = 1;
        for (int si = 0; si < nsizes; si++)
            for (int c = 0; c < 4; c++) {
                cell[si][c] = NULL;
                for (int oi = 0; oi < nops; oi++) {
                    const row *r = &rows[si * nops + oi];
                    if (r->o && strcmp(r->o->name, cols[w][c]) == 0) cell[si][c] = r;
                }
                complete &= cell[si][c] != NULL;
            }
        if (!complete) continue;
        printf("\nSDP4Bit Table 5 form, %d-bit, group 128, SR, Hadamard 32 (GB/s, median +- std):\n",
               w ? 8 : 4);
        printf("%9s %16s %16s %16s %16s %16s\n", "input MB", "copy", "quant w/o HT", "quant w/ HT",
               "dequant w/o HT", "dequant w/ HT");
        for (int si = 0; si < nsizes; si++) {
            char f[5][32];
            snprintf(f[0], sizeof f[0], "%.1f+-%.1f", cell[si][0]->copy_gbs, cell[si][0]->copy_std);
            for (int c = 0; c < 4; c++)
                snprintf(f[c + 1], sizeof f[c + 1], "%.1f+-%.1f", cell[si][c]->gbs,
                         cell[si][c]->gbs_std);
            printf("%9d %16s %16s %16s %16s %16s\n", sizes[si], f[0], f[1], f[2], f[3], f[4]);
        }
    }
}

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

/* The run's configuration: what was asked for, so that two bench runs can
** be told apart (the runs table's config). */
static char *bench_config(const char *device, const char *where, const int *sizes, int nsizes,
                          const int *threads, int nthreads, const int *opsel, int nops,
                          const char *codec, double min_time)
{
    cJSON *o = cJSON_CreateObject(), *a;
    cJSON_AddStringToObject(o, "command", "bench");
    cJSON_AddStringToObject(o, "device", device);
    cJSON_AddStringToObject(o, "description", where);
    cJSON_AddItemToObject(o, "sizes_mb", a = cJSON_CreateArray());
    for (int i = 0; i < nsizes; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(sizes[i]));
    cJSON_AddItemToObject(o, "threads", a = cJSON_CreateArray());
    for (int i = 0; i < nthreads; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(threads[i]));
    cJSON_AddItemToObject(o, "ops", a = cJSON_CreateArray());
    for (int i = 0; i < nops; i++) cJSON_AddItemToArray(a, cJSON_CreateString(ops[opsel[i]].name));
    if (codec)
        cJSON_AddStringToObject(o, "codec", codec);
    else
        cJSON_AddNullToObject(o, "codec");
    cJSON_AddNumberToObject(o, "min_time", min_time);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* The figures of one size at one thread count: the copy, then every op
** measured, in one transaction. */
static int store_size(sq_store *store, int64_t run, const row *rows, int nops, uint64_t n,
                      int threads, double copy_gbs, double copy_std, char *err, size_t errlen)
{
    sq_bench_row b[N_OPS + 1];
    size_t k = 0;
    b[k++] = (sq_bench_row){.op = "copy", .threads = threads, .elements = n,
                            .bytes = 2 * 4 * n, .gb_per_s = copy_gbs,
                            .gb_per_s_std = copy_std, .copy_gb_per_s = copy_gbs};
    for (int oi = 0; oi < nops; oi++) {
        const row *r = &rows[oi];
        if (!r->o) continue;
        b[k++] = (sq_bench_row){.op = r->o->name, .threads = threads, .elements = n,
                                .bytes = (uint64_t)r->bytes, .gb_per_s = r->gbs,
                                .gb_per_s_std = r->gbs_std, .copy_gb_per_s = r->copy_gbs};
    }
    return sq_store_add_bench(store, run, b, k, err, errlen);
}

int cmd_bench(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"sizes", required_argument, NULL, 's'},   {"threads", required_argument, NULL, 't'},
        {"ops", required_argument, NULL, 'o'},     {"codec", required_argument, NULL, 'c'},
        {"min-time", required_argument, NULL, 'm'}, {"device", required_argument, NULL, 'd'},
        {"json", no_argument, NULL, 'j'},          {"db", required_argument, NULL, 'D'},
        {"busy-timeout", required_argument, NULL, 'B'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int sizes[16], nsizes = 0;
    int all = sq_get_threads();
    int threads[16] = {1, all}, nthreads = all > 1 ? 2 : 1, threads_given = 0;
    int opsel[N_OPS], nops = 0;
    const char *codec_override = NULL, *device = "cpu";
    double min_time = 0.2;
    int json = 0;
    const char *db = NULL;
    uint64_t busy = SQ_STORE_BUSY_MS;

    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 's':
            if ((nsizes = parse_list("--sizes", optarg, sizes, 16, 0)) < 0) return CLI_USAGE;
            break;
        case 't':
            if ((nthreads = parse_list("--threads", optarg, threads, 16, all)) < 0) return CLI_USAGE;
            threads_given = 1;
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
                    return CLI_USAGE;
                }
                opsel[nops++] = k;
            }
            free(copy);
            if (nops == 0) {
                fprintf(stderr, "shardq bench: --ops: empty list\n");
                return CLI_USAGE;
            }
            break;
        }
        case 'c': {
            sq_codec c;
            char err[256];
            if (sq_codec_parse(optarg, &c, err, sizeof err) != SQ_OK) {
                fprintf(stderr, "shardq bench: --codec: %s\n", err);
                return CLI_USAGE;
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
                return CLI_USAGE;
            }
            break;
        }
        case 'd':
            if (check_device_name(optarg) != CLI_OK) return CLI_USAGE;
            device = optarg;
            break;
        case 'j': json = 1; break;
        case 'D':
            if (!*optarg) {
                fprintf(stderr, "shardq bench: --db: the database file name is empty\n");
                return CLI_USAGE;
            }
            db = optarg;
            break;
        case 'B':
            if (cli_parse_u64("bench", "--busy-timeout", optarg, INT_MAX, &busy)) return CLI_USAGE;
            break;
        case 'h': fputs(bench_usage, stdout); return CLI_OK;
        default: fputs("Try 'shardq bench --help'.\n", stderr); return CLI_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "shardq bench: unexpected argument '%s'\n", argv[optind]);
        return CLI_USAGE;
    }

    const int gpu = strcmp(device, "cpu") != 0;
    if (gpu && threads_given) {
        fprintf(stderr, "shardq bench: --threads: a GPU has no thread count to set\n");
        return CLI_USAGE;
    }
    for (int i = 0; i < nops; i++)
        if (gpu && ops[opsel[i]].cpu_only) {
            fprintf(stderr, "shardq bench: --ops: '%s' is measured on the CPU only\n",
                    ops[opsel[i]].name);
            return CLI_USAGE;
        }
    if (nops == 0) {
        if (gpu) {
            for (size_t i = 0; i < N_OPS; i++)
                if (!ops[i].cpu_only) opsel[nops++] = (int)i;
        } else {
            for (size_t i = 0; i < sizeof cpu_default_ops / sizeof *cpu_default_ops; i++)
                opsel[nops++] = find_op(cpu_default_ops[i]);
        }
    }
    if (nsizes == 0) {
        /* on a GPU, the sizes of SDP4Bit's Table 5 */
        static const int cpu_sizes[] = {1, 4, 16, 64, 256}, gpu_sizes[] = {8, 16, 64, 512, 1024, 2048};
        if (gpu) {
            nsizes = 6;
            memcpy(sizes, gpu_sizes, sizeof gpu_sizes);
        } else {
            nsizes = 5;
            memcpy(sizes, cpu_sizes, sizeof cpu_sizes);
        }
    }
    if (gpu) {
        threads[0] = 0; /* printed as 0: not applicable */
        nthreads = 1;
    }
    if (db) {
        const char *names[N_OPS];
        for (size_t i = 0; i < N_OPS; i++) names[i] = ops[i].name;
        if (check_unique("--sizes", sizes, nsizes, NULL) ||
            check_unique("--threads", threads, nthreads, NULL) ||
            check_unique("--ops", opsel, nops, names))
            return CLI_USAGE;
    }

    sq_backend *be = NULL;
    sq_error err;
    if (sq_backend_open(device, &be, &err) != SQ_OK) {
        fprintf(stderr, "shardq bench: --device %s: %s\n", device, sq_error_message(&err));
        return CLI_RUNTIME;
    }
    char where[320];
    if (gpu) {
        snprintf(where, sizeof where, "%s", sq_backend_description(be));
    } else {
        cpu_name(where, sizeof where);
    }
    /* the run begins before anything is measured or printed: a database
    ** that cannot be written fails now, not after the measurements */
    sq_store *store = NULL;
    int64_t run = 0;
    if (db) {
        char *config = bench_config(sq_backend_name(be), where, sizes, nsizes, threads, nthreads,
                                    opsel, nops, codec_override, min_time);
        sq_run_info info = {.kind = "bench", .config = config ? config : "{}",
                            .device = sq_backend_name(be)};
        int b = config ? cli_run_begin("bench", db, (int)busy, &info, NULL, NULL, 0, 1, &store,
                                       &run)
                       : CLI_RUNTIME;
        if (!config) fprintf(stderr, "shardq bench: out of memory\n");
        free(config);
        if (b != CLI_OK || !store) {
            sq_backend_close(be);
            return b != CLI_OK ? b : CLI_RUNTIME;
        }
    }
    if (!json) {
        if (gpu)
            printf("shardq bench: CUDA kernels on %s\n", where);
        else
            printf("shardq bench: C reference on %s, %d threads available\n", where, all);
        printf("GB/s = (bytes read + bytes written) / time, the median of timed batches.\n"
               "copy: the input size copied %s,\n"
               "measured in the same run. vs no-H: a Hadamard kernel's throughput as a\n"
               "fraction of the same kernel without the transform.\n\n",
               gpu ? "device to device (cudaMemcpyAsync)" : "by memcpy with the same threads");
        printf("%-15s %8s %7s %9s %10s %8s %8s  %s\n", "op", "size MB", "threads", "GB/s", "copy",
               "% copy", "vs no-H", "what");
    }
    char failure[1024] = "";

    size_t total = (size_t)nsizes * (size_t)nthreads * (size_t)(nops + 1), done = 0;
    sq_progress *bar = sq_progress_start("bench", total);
    int status = CLI_OK;
    row *rows = calloc((size_t)nsizes * (size_t)nops, sizeof *rows);
    if (!rows) {
        fprintf(stderr, "shardq bench: out of memory\n");
        snprintf(failure, sizeof failure, "out of memory");
        status = CLI_RUNTIME;
    }
    for (int ti = 0; ti < nthreads && !status; ti++) {
        memset(rows, 0, (size_t)nsizes * (size_t)nops * sizeof *rows);
        if (!gpu) sq_set_threads(threads[ti]);
        for (int si = 0; si < nsizes && !status; si++) {
            uint64_t n = (uint64_t)sizes[si] * (1u << 20) / 4;
            bench_ctx b;
            double t[MAX_BATCHES], copy_gbs = 0.0, copy_std = 0.0;
            const char *failed = "copy";
            int rc = ctx_setup(&b, be, n);
            int nt = rc == SQ_OK ? time_op(&b, op_copy, min_time, t, &rc) : 0;
            const int copied = nt > 0;
            if (nt) throughput(2.0 * 4.0 * (double)n, t, nt, &copy_gbs, &copy_std);
            sq_progress_update(bar, ++done);
            for (int oi = 0; oi < nops && rc == SQ_OK; oi++) {
                const op_desc *o = &ops[opsel[oi]];
                row *r = &rows[si * nops + oi];
                failed = o->name;
                rc = op_setup(&b, o, codec_override);
                nt = rc == SQ_OK ? time_op(&b, o->fn, min_time, t, &rc) : 0;
                if (rc != SQ_OK) break;
                r->o = o;
                r->size_mb = sizes[si];
                r->threads = threads[ti];
                r->bytes = op_bytes(o, &b);
                throughput(r->bytes, t, nt, &r->gbs, &r->gbs_std);
                r->copy_gbs = copy_gbs;
                r->copy_std = copy_std;
                r->twin_ratio = -1.0;
                strcpy(r->codec, "-");
                if (o->codec) sq_codec_format(&b.c, r->codec, sizeof r->codec);
                for (int j = 0; j < oi && o->twin && !codec_override; j++)
                    if (strcmp(rows[si * nops + j].o->name, o->twin) == 0)
                        r->twin_ratio = r->gbs / rows[si * nops + j].gbs;
                sq_progress_pause(bar);
                print_row(r, where, json, run);
                sq_progress_update(bar, ++done);
            }
            /* what was measured is kept, even when a later op failed */
            char err2[1024];
            if (store && copied && store_size(store, run, &rows[si * nops], nops, n, threads[ti],
                                          copy_gbs, copy_std, err2, sizeof err2)) {
                sq_progress_finish(bar);
                bar = NULL;
                fprintf(stderr, "shardq bench: %s\n", err2);
                snprintf(failure, sizeof failure, "%s", err2);
                status = CLI_RUNTIME;
            }
            if (rc != SQ_OK) {
                sq_progress_finish(bar);
                bar = NULL;
                snprintf(failure, sizeof failure, "%s at %d MB on %s: %s%s%s", failed, sizes[si],
                         sq_backend_name(be), sq_strerror(rc), *sq_backend_error(be) ? ": " : "",
                         sq_backend_error(be));
                fprintf(stderr, "shardq bench: %s\n", failure);
                status = CLI_RUNTIME;
            }
            ctx_free(&b);
        }
        if (!status && !json && !codec_override) {
            sq_progress_pause(bar);
            print_table5(rows, nsizes, nops, sizes);
        }
    }
    free(rows);
    sq_progress_finish(bar);
    sq_set_threads(0);
    sq_backend_close(be);
    if (store) {
        char err[1024];
        if (sq_store_run_end(store, run, status ? "failed" : "done", status ? failure : NULL,
                             NULL, 0, NULL, 0, err, sizeof err)) {
            fprintf(stderr, "shardq bench: %s\n", err);
            status = CLI_RUNTIME;
        } else if (!status && !json) {
            printf("\nstored as run %lld in %s\n", (long long)run, db);
        }
        sq_store_close(store);
    }
    return status;
}
