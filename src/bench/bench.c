/*
** bench.c -- the benchmark method (bench.h): the op table, the inputs, the
** timing and the byte counting of the codec operations, measured beside a
** copy of the same size on the same device in the same run.
**
** Every operation runs through the backend layer, so the CPU and a GPU are
** measured by the same code; a GPU is timed with CUDA events over batches of
** calls enqueued back to back. Kernels with a fused Hadamard transform are
** also given as a fraction of their twin without it, which is the cost of
** the transform.
*/
#include "shardq/bench.h"

#include "shardq/codec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* The operations                                                           */
/* ------------------------------------------------------------------------ */

/* Buffers of one input size, on the benchmarked backend. */
typedef struct bench_ctx {
    sq_backend *be;
    uint64_t n;
    float *x, *ref, *out;    /* backend memory */
    sq_codec c, c_out;
    sq_qbuf q, qout;
    sq_qbuf chunks[SQ_BENCH_CHUNKS];
    sq_rng_key key;
    sq_dtype dtype;          /* op_encode, op_decode: the variant */
    const float *use_ref;    /* (ref, or NULL) */
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

/* quantize, quantize_diff, dequantize, dequantize_add and their bf16
** variants: the one pair of the codec family, the variant the op's (set
** by op_setup from the table). */
static int op_encode(bench_ctx *b)
{
    return sq_backend_encode(b->be, &b->c, b->dtype, b->x, b->use_ref, b->n, &b->key, &b->q);
}

static int op_decode(bench_ctx *b)
{
    return sq_backend_decode(b->be, &b->c, b->dtype, &b->q, b->use_ref, b->n, b->out);
}

static int op_sum_requant(bench_ctx *b)
{
    return sq_backend_reduce(b->be, &b->c, SQ_DTYPE_FP32, b->chunks, SQ_BENCH_CHUNKS, b->n,
                             &b->c_out, &b->key, &b->qout, NULL);
}

static int op_sum(bench_ctx *b)
{
    return sq_backend_reduce(b->be, &b->c, SQ_DTYPE_FP32, b->chunks, SQ_BENCH_CHUNKS, b->n, NULL,
                             NULL, NULL, b->out);
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

/* An op of the table: what bench.h shows, and how it runs. */
typedef struct op_impl {
    sq_bench_op pub;
    int (*fn)(bench_ctx *);
    input_kind input; /* what its input buffers hold before it runs */
    sq_dtype dtype;   /* op_encode, op_decode: fp32 or the bf16 variants */
    int ref;          /* op_encode, op_decode: with the reference (diff, add) */
} op_impl;

#define TLQHS4 "kind=sym,bits=4,group=128,round=sr,hadamard=32"
#define TLQHS8 "kind=sym,bits=8,group=128,round=sr,hadamard=32"

static const op_impl ops[] = {
    {{"quantize-nh", "kind=sym,bits=4,group=128,round=sr", NULL, 0, NULL,
      "fp32 -> 4-bit SR, group 128"},
     op_encode, IN_FLOAT, SQ_DTYPE_FP32, 0},
    {{"quantize", TLQHS4, NULL, 0, "quantize-nh",
      "fp32 -> 4-bit SR with a 32-point Hadamard (TLq-HS)"},
     op_encode, IN_FLOAT, SQ_DTYPE_FP32, 0},
    {{"quantize-h1024", "kind=sym,bits=4,group=1024,round=sr,hadamard=1024", NULL, 0, NULL,
      "fp32 -> 4-bit SR, group 1024, 1024-point Hadamard"},
     op_encode, IN_FLOAT, SQ_DTYPE_FP32, 0},
    {{"quantize-rtn", "kind=sym,bits=4,group=128,round=rtn", NULL, 0, NULL,
      "fp32 -> 4-bit RTN (ZeRO++ qgZ)"},
     op_encode, IN_FLOAT, SQ_DTYPE_FP32, 0},
    {{"quantize-8-nh", "kind=sym,bits=8,group=128,round=sr", NULL, 0, NULL,
      "fp32 -> 8-bit SR, group 128"},
     op_encode, IN_FLOAT, SQ_DTYPE_FP32, 0},
    {{"quantize-8", TLQHS8, NULL, 0, "quantize-8-nh",
      "fp32 -> 8-bit SR with Hadamard (TLq-HS intra hop)"},
     op_encode, IN_FLOAT, SQ_DTYPE_FP32, 0},
    {{"quantize-8-rtn", "kind=sym,bits=8,group=128,round=rtn", NULL, 0, NULL,
      "fp32 -> 8-bit RTN"},
     op_encode, IN_FLOAT, SQ_DTYPE_FP32, 0},
    {{"dequantize-nh", "kind=sym,bits=4,group=128,round=sr", NULL, 0, NULL,
      "4-bit -> fp32"},
     op_decode, IN_QUANT, SQ_DTYPE_FP32, 0},
    {{"dequantize", TLQHS4, NULL, 0, "dequantize-nh",
      "4-bit -> fp32 with inverse Hadamard"},
     op_decode, IN_QUANT, SQ_DTYPE_FP32, 0},
    {{"dequantize-8-nh", "kind=sym,bits=8,group=128,round=sr", NULL, 0, NULL,
      "8-bit -> fp32"},
     op_decode, IN_QUANT, SQ_DTYPE_FP32, 0},
    {{"dequantize-8", TLQHS8, NULL, 0, "dequantize-8-nh",
      "8-bit -> fp32 with inverse Hadamard"},
     op_decode, IN_QUANT, SQ_DTYPE_FP32, 0},
    {{"quantize-diff", "kind=sym,bits=4,group=2048,round=sr", NULL, 0, NULL,
      "Q(w - w_ref), 4-bit SR, group 2048 (qWD send)"},
     op_encode, IN_FLOAT, SQ_DTYPE_FP32, 1},
    {{"dequantize-add", "kind=sym,bits=4,group=2048,round=sr", NULL, 0, NULL,
      "w_ref + D(q) (qWD receive)"},
     op_decode, IN_QUANT, SQ_DTYPE_FP32, 1},
    {{"quantize-bf16", "kind=sym,bits=4,group=2048,round=sr", NULL, 0, NULL,
      "Q(bf16(w)), 4-bit SR, group 2048 (qW send, bf16 weights)"},
     op_encode, IN_FLOAT, SQ_DTYPE_BF16, 0},
    {{"dequantize-bf16", "kind=sym,bits=4,group=2048,round=sr", NULL, 0, NULL,
      "bf16(D(q)) (qW receive, bf16 weights)"},
     op_decode, IN_QUANT, SQ_DTYPE_BF16, 0},
    {{"quantize-diff-bf16", "kind=sym,bits=4,group=2048,round=sr", NULL, 0, NULL,
      "Q(bf16(bf16(w) - w_ref)), 4-bit SR, group 2048 (qWD send, bf16 weights)"},
     op_encode, IN_FLOAT, SQ_DTYPE_BF16, 1},
    {{"dequantize-add-bf16", "kind=sym,bits=4,group=2048,round=sr", NULL, 0, NULL,
      "bf16(bf16(D(q)) + w_ref) (qWD receive, bf16 weights)"},
     op_decode, IN_QUANT, SQ_DTYPE_BF16, 1},
    {{"sum-requant", "kind=sym,bits=8,group=128,round=sr",
      "kind=sym,bits=4,group=128,round=sr", 0, NULL,
      "4 x 8-bit -> sum -> 4-bit SR (middle hop)"},
     op_sum_requant, IN_CHUNKS, SQ_DTYPE_FP32, 0},
    {{"sum-nh", "kind=sym,bits=4,group=128,round=sr", NULL, 0, NULL,
      "4 x 4-bit -> sum"},
     op_sum, IN_CHUNKS, SQ_DTYPE_FP32, 0},
    {{"sum", TLQHS4, NULL, 0, "sum-nh",
      "4 x 4-bit -> sum -> inverse Hadamard (last hop)"},
     op_sum, IN_CHUNKS, SQ_DTYPE_FP32, 0},
    {{"hadamard", NULL, NULL, 1, NULL,
      "32-point Hadamard, in place"},
     op_hadamard, IN_FLOAT, SQ_DTYPE_FP32, 0},
    {{"rng", NULL, NULL, 1, NULL,
      "Philox4x32-10 uniforms alone (SR's floor)"},
     op_rng, IN_FLOAT, SQ_DTYPE_FP32, 0},
};

#define N_OPS (sizeof ops / sizeof ops[0])

/* The CPU's default rows (what the C reference's figures in docs/results.md are). */
static const char *const cpu_default_ops[] = {
    "quantize", "quantize-rtn", "quantize-8", "dequantize", "quantize-diff",
    "dequantize-add", "sum-requant", "sum", "hadamard", "rng"};

size_t sq_bench_nops(void) { return N_OPS; }

const sq_bench_op *sq_bench_op_at(size_t i) { return i < N_OPS ? &ops[i].pub : NULL; }

int sq_bench_find_op(const char *name, size_t *index)
{
    for (size_t i = 0; name && i < N_OPS; i++)
        if (strcmp(ops[i].pub.name, name) == 0) {
            if (index) *index = i;
            return SQ_OK;
        }
    return SQ_ERR_NOTFOUND;
}

size_t sq_bench_default_ops(int gpu, size_t *index, size_t max)
{
    size_t n = 0;
    if (gpu) {
        for (size_t i = 0; i < N_OPS && n < max; i++)
            if (!ops[i].pub.cpu_only) index[n++] = i;
    } else {
        for (size_t i = 0; i < sizeof cpu_default_ops / sizeof *cpu_default_ops && n < max; i++)
            sq_bench_find_op(cpu_default_ops[i], &index[n++]);
    }
    return n;
}

/* The table entry of a public op (the first member of its op_impl). */
static const op_impl *impl_of(const sq_bench_op *op)
{
    for (size_t i = 0; i < N_OPS; i++)
        if (&ops[i].pub == op) return &ops[i];
    return NULL;
}

double sq_bench_copy_bytes(uint64_t n) { return 2.0 * 4.0 * (double)n; }

double sq_bench_op_bytes(const sq_bench_op *op, const sq_codec *c, const sq_codec *c_out,
                         uint64_t n)
{
    const op_impl *o = impl_of(op);
    if (!o) return 0.0;
    double f = 4.0 * (double)n;
    double q = op->codec && c ? (double)sq_codec_bytes(c, n) : 0.0;
    int (*fn)(bench_ctx *) = o->fn;
    if (fn == op_encode || fn == op_decode) return (o->ref ? 2 : 1) * f + q;
    if (fn == op_sum_requant)
        return SQ_BENCH_CHUNKS * q + (c_out ? (double)sq_codec_bytes(c_out, n) : 0.0);
    if (fn == op_sum) return SQ_BENCH_CHUNKS * q + f;
    if (fn == op_hadamard || fn == op_copy) return 2 * f;
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

/* time_op and throughput until the spread is within SQ_BENCH_NOISY of the
** median, SQ_BENCH_TRIES tries at most, keeping the steadiest; *noisy when
** none was. Returns the number of batches of the kept try (0: failed). */
static int time_steady(bench_ctx *b, int (*fn)(bench_ctx *), double min_time, double bytes,
                       double *gbs, double *std, int *noisy, int *rc)
{
    double t[MAX_BATCHES];
    int kept = 0;
    *noisy = 0;
    for (int k = 0; k < SQ_BENCH_TRIES; k++) {
        int nt = time_op(b, fn, min_time, t, rc);
        if (!nt) return 0;
        double g, sd;
        throughput(bytes, t, nt, &g, &sd);
        if (!kept || sd / g < *std / *gbs) *gbs = g, *std = sd, kept = nt;
        if (*std <= SQ_BENCH_NOISY * *gbs) return kept;
    }
    *noisy = SQ_BENCH_NOISY_SPREAD;
    return kept;
}

int sq_bench_slow_vs_one(double gbs, int threads, double gbs_one)
{
    return threads > 1 && gbs_one > 0.0 && gbs < SQ_BENCH_SLOW * gbs_one;
}

/* The 1-thread rule (SQ_BENCH_SLOW): a figure at more threads far below the
** same one on 1 thread (one) is measured again, SQ_BENCH_TRIES tries in all,
** keeping the fastest, since a busy machine only ever slows a figure down;
** *noisy gains SQ_BENCH_NOISY_THREADS when it stays below. Returns 0 when a
** try failed (*rc set), else 1. */
static int time_vs_one(bench_ctx *b, int (*fn)(bench_ctx *), double min_time, double bytes,
                       int threads, double one, double *gbs, double *std, int *noisy, int *rc)
{
    for (int k = 1; k < SQ_BENCH_TRIES && sq_bench_slow_vs_one(*gbs, threads, one); k++) {
        double g = 0.0, sd = 0.0;
        int nz = 0;
        if (!time_steady(b, fn, min_time, bytes, &g, &sd, &nz, rc)) return 0;
        if (g > *gbs) *gbs = g, *std = sd, *noisy = nz;
    }
    if (sq_bench_slow_vs_one(*gbs, threads, one)) *noisy |= SQ_BENCH_NOISY_THREADS;
    return 1;
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
    for (int k = 0; k < SQ_BENCH_CHUNKS; k++) sq_backend_qbuf_free(b->be, &b->chunks[k]);
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
static int op_setup(bench_ctx *b, const op_impl *o, const char *codec_override)
{
    free_codec_buffers(b);
    b->dtype = o->dtype;
    b->use_ref = o->ref ? b->ref : NULL;
    if (!o->pub.codec) return SQ_OK;
    const char *spec = codec_override && o->fn != op_sum_requant ? codec_override : o->pub.codec;
    if (sq_codec_parse_v2(spec, &b->c, NULL) != SQ_OK) return SQ_ERR_SPEC;
    if (o->pub.codec_out && sq_codec_parse_v2(o->pub.codec_out, &b->c_out, NULL) != SQ_OK)
        return SQ_ERR_SPEC;
    int rc = sq_backend_qbuf_alloc(b->be, &b->c, b->n, &b->q);
    if (rc == SQ_OK && o->pub.codec_out)
        rc = sq_backend_qbuf_alloc(b->be, &b->c_out, b->n, &b->qout);
    if (rc == SQ_OK && o->input == IN_QUANT)
        rc = sq_backend_quantize(b->be, &b->c, b->x, b->n, &b->key, &b->q);
    for (int k = 0; rc == SQ_OK && o->input == IN_CHUNKS && k < SQ_BENCH_CHUNKS; k++) {
        sq_rng_key kk = b->key;
        kk.worker = (uint32_t)k;
        rc = sq_backend_qbuf_alloc(b->be, &b->c, b->n, &b->chunks[k]);
        if (rc == SQ_OK) rc = sq_backend_quantize(b->be, &b->c, b->x, b->n, &kk, &b->chunks[k]);
    }
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The run                                                                  */
/* ------------------------------------------------------------------------ */

void sq_bench_device_text(const sq_backend *be, char *buf, size_t len)
{
    if (sq_backend_kind_of(be) == SQ_BACKEND_CUDA) {
        snprintf(buf, len, "%s", sq_backend_description(be));
        return;
    }
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


/* Checks what a run is asked to measure, before anything is. */
static int check_config(const sq_backend *be, const sq_bench_config *cfg, sq_error *err)
{
    if (!cfg->sizes_mb || cfg->nsizes < 1 || !cfg->threads || cfg->nthreads < 1 || !cfg->ops ||
        cfg->nops < 1)
        return sq_error_set(err, SQ_ERR_ARG, "a benchmark needs sizes, thread counts and ops");
    if (!(cfg->min_time >= 0.0))
        return sq_error_set(err, SQ_ERR_ARG, "minimum time %g is not a number of seconds",
                            cfg->min_time);
    for (int i = 0; i < cfg->nsizes; i++)
        if (cfg->sizes_mb[i] < 1 || cfg->sizes_mb[i] > (1 << 20))
            return sq_error_set(err, SQ_ERR_ARG, "size %d MB is out of range", cfg->sizes_mb[i]);
    int gpu = sq_backend_kind_of(be) == SQ_BACKEND_CUDA;
    for (int i = 0; i < cfg->nops; i++) {
        if (cfg->ops[i] >= N_OPS)
            return sq_error_set(err, SQ_ERR_ARG, "op index %zu is not in the table", cfg->ops[i]);
        if (gpu && ops[cfg->ops[i]].pub.cpu_only)
            return sq_error_set(err, SQ_ERR_UNSUPPORTED, "'%s' is measured on the CPU only",
                                ops[cfg->ops[i]].pub.name);
    }
    sq_codec c;
    char msg[256];
    if (cfg->codec && sq_codec_parse(cfg->codec, &c, msg, sizeof msg) != SQ_OK)
        return sq_error_set(err, SQ_ERR_SPEC, "codec '%s': %s", cfg->codec, msg);
    return SQ_OK;
}

static int report(sq_bench_progress progress, void *user, const sq_bench_event *ev)
{
    return progress ? progress(user, ev) : 0;
}

int sq_bench_run(sq_backend *be, const sq_bench_config *cfg, sq_bench_progress progress,
                 void *user, sq_bench_result **out, size_t *nout, sq_error *err)
{
    if (out) *out = NULL;
    if (nout) *nout = 0;
    if (!be || !cfg) return sq_error_set(err, SQ_ERR_ARG, "no backend or no benchmark");
    int rc = check_config(be, cfg, err);
    if (rc != SQ_OK) return rc;
    const int gpu = sq_backend_kind_of(be) == SQ_BACKEND_CUDA;
    const int nthreads = gpu ? 1 : cfg->nthreads, nsizes = cfg->nsizes, nops = cfg->nops;
    const size_t per_pass = (size_t)nsizes * (size_t)nops;
    sq_bench_result *all = calloc(per_pass * (size_t)nthreads, sizeof *all);
    if (!all) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    size_t total = per_pass * (size_t)nthreads + (size_t)nsizes * (size_t)nthreads, done = 0;
    int stopped = 0;
    for (int ti = 0; ti < nthreads && rc == SQ_OK && !stopped; ti++) {
        sq_bench_result *rows = all + (size_t)ti * per_pass;
        const int threads = cfg->threads[ti];
        /* the 1-thread pass measured before this one, whose figures the
        ** 1-thread rule compares with (NULL: none) */
        const sq_bench_result *ones = NULL;
        for (int tj = 0; tj < ti; tj++)
            if (cfg->threads[tj] == 1) ones = all + (size_t)tj * per_pass;
        if (!gpu) sq_set_threads(threads);
        for (int si = 0; si < nsizes && rc == SQ_OK && !stopped; si++) {
            const int mb = cfg->sizes_mb[si];
            uint64_t n = (uint64_t)mb * (1u << 20) / 4;
            bench_ctx b;
            double copy_gbs = 0.0, copy_std = 0.0;
            int copy_noisy = 0;
            const char *failed = "copy";
            rc = ctx_setup(&b, be, n);
            int nt = rc == SQ_OK ? time_steady(&b, op_copy, cfg->min_time, sq_bench_copy_bytes(n),
                                               &copy_gbs, &copy_std, &copy_noisy, &rc)
                                 : 0;
            if (nt && ones &&
                !time_vs_one(&b, op_copy, cfg->min_time, sq_bench_copy_bytes(n), threads,
                             ones[si * nops].copy_gbs, &copy_gbs, &copy_std, &copy_noisy, &rc))
                nt = 0;
            const int copied = nt > 0;
            sq_bench_event ev = {.kind = SQ_BENCH_COPY, .done = ++done, .total = total,
                                 .size_mb = mb, .threads = threads, .elements = n,
                                 .copy_gbs = copy_gbs, .copy_std = copy_std};
            if (copied && report(progress, user, &ev)) stopped = 1;
            for (int oi = 0; oi < nops && rc == SQ_OK && !stopped; oi++) {
                const op_impl *o = &ops[cfg->ops[oi]];
                sq_bench_result *r = &rows[si * nops + oi];
                failed = o->pub.name;
                rc = op_setup(&b, o, cfg->codec);
                double bytes = rc == SQ_OK ? sq_bench_op_bytes(&o->pub, &b.c, &b.c_out, n) : 0;
                nt = rc == SQ_OK ? time_steady(&b, o->fn, cfg->min_time, bytes, &r->gbs,
                                               &r->gbs_std, &r->noisy, &rc)
                                 : 0;
                if (nt && ones)
                    time_vs_one(&b, o->fn, cfg->min_time, bytes, threads, ones[si * nops + oi].gbs,
                                &r->gbs, &r->gbs_std, &r->noisy, &rc);
                if (rc != SQ_OK) break;
                r->op = &o->pub;
                r->size_mb = mb;
                r->threads = threads;
                r->elements = n;
                r->bytes = bytes;
                r->copy_gbs = copy_gbs;
                r->copy_std = copy_std;
                r->copy_noisy = copy_noisy;
                r->twin_ratio = -1.0;
                strcpy(r->codec, "-");
                if (o->pub.codec) sq_codec_format(&b.c, r->codec, sizeof r->codec);
                for (int j = 0; j < oi && o->pub.twin && !cfg->codec; j++)
                    if (strcmp(rows[si * nops + j].op->name, o->pub.twin) == 0)
                        r->twin_ratio = r->gbs / rows[si * nops + j].gbs;
                ev.kind = SQ_BENCH_ROW, ev.done = ++done, ev.row = r;
                if (report(progress, user, &ev)) stopped = 1;
            }
            /* what was measured is reported, even when a later op failed */
            ev.kind = SQ_BENCH_SIZE, ev.row = NULL, ev.rows = &rows[si * nops], ev.nrows = nops;
            if (copied && !stopped && report(progress, user, &ev)) stopped = 1;
            if (rc != SQ_OK) {
                const char *why = sq_backend_error(be);
                sq_error_set(err, rc, "%s at %d MB on %s: %s%s%s", failed, mb, sq_backend_name(be),
                             sq_strerror(rc), *why ? ": " : "", why);
            }
            ctx_free(&b);
        }
        if (rc == SQ_OK && !stopped) {
            sq_bench_event ev = {.kind = SQ_BENCH_PASS, .done = done, .total = total,
                                 .rows = rows, .nrows = (int)per_pass, .threads = threads};
            if (report(progress, user, &ev)) stopped = 1;
        }
    }
    if (!gpu) sq_set_threads(0);
    if (rc == SQ_OK && stopped)
        rc = sq_error_set(err, SQ_ERR_INTERRUPTED, "the benchmark was stopped by its caller");
    if (out) *out = all;
    else free(all);
    if (nout) *nout = per_pass * (size_t)nthreads;
    return rc;
}
