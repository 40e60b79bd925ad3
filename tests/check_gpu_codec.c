/*
** check_gpu_codec.c -- the CUDA backend writes the C reference's bytes.
**
** For inputs from several distributions, sizes from 1 to about 1e7, bits 1
** to 8, groups 1 to 4096, Hadamard sizes 0 to 1024, both roundings and both
** level conventions, every operation runs on the GPU through the backend
** and on the CPU through the reference, and every output byte and status
** must agree (tests/equiv.h). Also: pointers that are not 16-byte aligned,
** deferred batches, device errors named by their call, workers placed
** round-robin over all visible GPUs with peer copies between them, and the
** elementwise operations (fp32 add, bf16 conversions) against the CPU
** backend; and the compressors (QSGD, scaled sign, FP8) likewise.
**
** Without a CUDA device (or without a CUDA build) it exits 77, automake's
** SKIP, and says why.
*/
#include "shardq/backend.h"
#include "backend/device.h"
#include "check_util.h"
#include "equiv.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static sq_backend *g_be;   /* cuda:0 */
static int g_misalign;     /* put every buffer off its natural alignment */

/* ------------------------------------------------------------------------ */
/* The eq_backend of equiv.h: host buffers in, device buffers, host out     */
/* ------------------------------------------------------------------------ */

#define ARENA_MAX 512
static struct {
    void *base[ARENA_MAX];
    int n;
} g_arena;

/* Device memory for bytes, shifted by `shift` bytes when misaligning (so
** that vector loads and stores must fall back to narrower ones). */
static void *dev_alloc(size_t bytes, size_t shift)
{
    void *p = NULL;
    if (!g_misalign) shift = 0;
    ck_assert_int_lt(g_arena.n, ARENA_MAX);
    int rc = sq_backend_alloc(g_be, bytes + shift + 1, &p);
    ck_assert_msg(rc == SQ_OK, "%s", sq_backend_error(g_be));
    g_arena.base[g_arena.n++] = p;
    return (char *)p + shift;
}

static void *dev_put(const void *host, size_t bytes, size_t shift)
{
    void *d = dev_alloc(bytes, shift);
    int rc = sq_backend_put(g_be, d, host, bytes);
    ck_assert_msg(rc == SQ_OK, "%s", sq_backend_error(g_be));
    return d;
}

static void dev_get(void *host, const void *d, size_t bytes)
{
    int rc = sq_backend_get(g_be, host, d, bytes);
    ck_assert_msg(rc == SQ_OK, "%s", sq_backend_error(g_be));
}

static void arena_free(void)
{
    for (int i = 0; i < g_arena.n; i++) sq_backend_free(g_be, g_arena.base[i]);
    g_arena.n = 0;
}

static size_t scale_unit(const sq_codec *c) { return c->scale == SQ_SCALE_FP32 ? 4 : 2; }

/* A host qbuf copied to the device (outputs carry equiv.h's pattern in). */
static sq_qbuf qbuf_put(const sq_codec *c, const sq_qbuf *h, uint64_t n)
{
    sq_qbuf d;
    d.codes = dev_put(h->codes, sq_codec_code_bytes(c, n), 1);
    d.scales = dev_put(h->scales, sq_codec_scale_bytes(c, n), scale_unit(c));
    d.offsets = c->kind == SQ_KIND_MINMAX
                    ? dev_put(h->offsets, sq_codec_offset_bytes(c, n), scale_unit(c))
                    : NULL;
    return d;
}

static void qbuf_get(const sq_codec *c, sq_qbuf *h, const sq_qbuf *d, uint64_t n)
{
    dev_get(h->codes, d->codes, sq_codec_code_bytes(c, n));
    dev_get(h->scales, d->scales, sq_codec_scale_bytes(c, n));
    if (c->kind == SQ_KIND_MINMAX) dev_get(h->offsets, d->offsets, sq_codec_offset_bytes(c, n));
}

static int gpu_quantize_as(const sq_codec *c, const float *x, const float *ref, uint64_t n,
                           const sq_rng_key *key, sq_qbuf *q, int bf16)
{
    float *dx = dev_put(x, n * 4, 4), *dref = ref ? dev_put(ref, n * 4, 4) : NULL;
    sq_qbuf dq = qbuf_put(c, q, n);
    int rc = bf16 ? (ref ? sq_backend_quantize_diff_bf16(g_be, c, dx, dref, n, key, &dq)
                         : sq_backend_quantize_bf16(g_be, c, dx, n, key, &dq))
                  : (ref ? sq_backend_quantize_diff(g_be, c, dx, dref, n, key, &dq)
                         : sq_backend_quantize(g_be, c, dx, n, key, &dq));
    ck_assert_msg(rc != SQ_ERR_DEVICE && rc != SQ_ERR_NOMEM, "%s", sq_backend_error(g_be));
    qbuf_get(c, q, &dq, n);
    arena_free();
    return rc;
}

static int gpu_quantize(const sq_codec *c, const float *x, const float *ref, uint64_t n,
                        const sq_rng_key *key, sq_qbuf *q)
{
    return gpu_quantize_as(c, x, ref, n, key, q, 0);
}

static int gpu_dequantize_as(const sq_codec *c, const sq_qbuf *q, const float *ref, uint64_t n,
                             float *out, int bf16)
{
    sq_qbuf dq = qbuf_put(c, q, n);
    float *dref = ref ? dev_put(ref, n * 4, 4) : NULL, *dout = dev_put(out, n * 4, 4);
    int rc = bf16 ? (ref ? sq_backend_dequantize_add_bf16(g_be, c, &dq, dref, n, dout)
                         : sq_backend_dequantize_bf16(g_be, c, &dq, n, dout))
                  : (ref ? sq_backend_dequantize_add(g_be, c, &dq, dref, n, dout)
                         : sq_backend_dequantize(g_be, c, &dq, n, dout));
    ck_assert_msg(rc != SQ_ERR_DEVICE && rc != SQ_ERR_NOMEM, "%s", sq_backend_error(g_be));
    dev_get(out, dout, n * 4);
    arena_free();
    return rc;
}

static int gpu_sum_requant(const sq_codec *c_in, const sq_qbuf *chunks, int k, uint64_t n,
                           const sq_codec *c_out, const sq_rng_key *key, sq_qbuf *out)
{
    sq_qbuf *dc = calloc((size_t)k, sizeof *dc);
    for (int i = 0; i < k; i++) dc[i] = qbuf_put(c_in, &chunks[i], n);
    sq_qbuf dout = qbuf_put(c_out, out, n);
    int rc = sq_backend_dequant_sum_requant(g_be, c_in, dc, k, n, c_out, key, &dout);
    ck_assert_msg(rc != SQ_ERR_DEVICE && rc != SQ_ERR_NOMEM, "%s", sq_backend_error(g_be));
    qbuf_get(c_out, out, &dout, n);
    arena_free();
    free(dc);
    return rc;
}

static int gpu_sum(const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n, float *out)
{
    sq_qbuf *dc = calloc((size_t)k, sizeof *dc);
    for (int i = 0; i < k; i++) dc[i] = qbuf_put(c, &chunks[i], n);
    float *dout = dev_put(out, n * 4, 4);
    int rc = sq_backend_dequant_sum(g_be, c, dc, k, n, dout);
    ck_assert_msg(rc != SQ_ERR_DEVICE && rc != SQ_ERR_NOMEM, "%s", sq_backend_error(g_be));
    dev_get(out, dout, n * 4);
    arena_free();
    free(dc);
    return rc;
}

static const eq_backend gpu = {"cuda:0", gpu_quantize_as, gpu_dequantize_as, gpu_sum_requant,
                               gpu_sum};


static sq_codec codec(const char *spec)
{
    sq_codec c;
    char err[256];
    ck_assert_msg(sq_codec_parse(spec, &c, err, sizeof err) == SQ_OK, "%s: %s", spec, err);
    return c;
}

static int run(eq_op op, const char *spec, uint64_t n, eq_dist dist, uint64_t seed, int k,
               const char *spec_out)
{
    return eq_run_spec(&gpu, op, spec, n, dist, seed, k, spec_out);
}

/* The fp16 sums of qgZ (sq_dequant_sum_f16 and its requantizing twin): the
** GPU against the C reference, bytes and status. */
static int f16_gpu_case(const char *spec, const char *spec_out, uint64_t n, int k, float mag,
                        uint64_t seed)
{
    const sq_codec c = codec(spec), co = spec_out ? codec(spec_out) : c;
    sq_qbuf *chunks = calloc((size_t)k, sizeof *chunks);
    float *x = malloc(n * sizeof *x);
    const sq_rng_key key = {seed, 7, 3, 2};
    for (int i = 0; i < k; i++) {
        eq_fill(x, n, EQ_NORMAL, seed * 100 + (uint64_t)i);
        for (uint64_t j = 0; j < n; j++) x[j] *= mag * (j % 7 == 3 ? 1e-6f : 1.0f);
        ck_assert_int_eq(sq_qbuf_alloc(&c, n, &chunks[i]), SQ_OK);
        ck_assert_int_eq(sq_quantize(&c, x, n, &key, &chunks[i]), SQ_OK);
    }
    sq_qbuf *dc = calloc((size_t)k, sizeof *dc);
    for (int i = 0; i < k; i++) dc[i] = qbuf_put(&c, &chunks[i], n);
    int bad = 0;
    if (!spec_out) {
        float *want = calloc(n, sizeof *want), *got = calloc(n, sizeof *got);
        int rc_ref = sq_dequant_sum_f16(&c, chunks, k, n, want);
        float *dout = dev_put(got, n * 4, 4);
        int rc = sq_backend_dequant_sum_f16(g_be, &c, dc, k, n, dout);
        dev_get(got, dout, n * 4);
        bad += rc != rc_ref || (rc == SQ_OK && memcmp(want, got, n * 4) != 0);
        free(want), free(got);
    } else {
        sq_qbuf want, got;
        ck_assert_int_eq(sq_qbuf_alloc(&co, n, &want), SQ_OK);
        ck_assert_int_eq(sq_qbuf_alloc(&co, n, &got), SQ_OK);
        int rc_ref = sq_dequant_sum_requant_f16(&c, chunks, k, n, &co, &key, &want);
        sq_qbuf dout = qbuf_put(&co, &got, n);
        int rc = sq_backend_dequant_sum_requant_f16(g_be, &c, dc, k, n, &co, &key, &dout);
        qbuf_get(&co, &got, &dout, n);
        bad += rc != rc_ref ||
               (rc == SQ_OK && (memcmp(want.codes, got.codes, sq_codec_code_bytes(&co, n)) ||
                                memcmp(want.scales, got.scales, sq_codec_scale_bytes(&co, n))));
        sq_qbuf_free(&want), sq_qbuf_free(&got);
    }
    if (bad) fprintf(stderr, "f16 %s%s%s k %d n %llu differs\n", spec, spec_out ? " -> " : "",
                     spec_out ? spec_out : "", k, (unsigned long long)n);
    arena_free();
    for (int i = 0; i < k; i++) sq_qbuf_free(&chunks[i]);
    free(chunks), free(dc), free(x);
    return bad;
}

START_TEST(test_f16_sums)
{
    const char *ds = "bits=4,group=768,round=rtn,levels=deepspeed";
    int bad = 0;
    bad += f16_gpu_case(ds, NULL, 3 << 20, 2, 1.0f, 1);
    bad += f16_gpu_case(ds, ds, 3 << 20, 8, 1.0f, 2);
    bad += f16_gpu_case("bits=4,group=7,round=rtn,levels=deepspeed", NULL, 100003, 3, 3.0f, 3);
    bad += f16_gpu_case("bits=8,group=128,round=sr,scale=fp16", "bits=4,group=32,round=sr",
                        100003, 5, 0.01f, 4);
    bad += f16_gpu_case(ds, NULL, 76800, 70, 1.0f, 5); /* batches of chunks */
    bad += f16_gpu_case(ds, ds, 76800, 70, 1.0f, 6);
    bad += f16_gpu_case(ds, ds, 7680, 4, 60000.0f, 7); /* past fp16: SQ_ERR_RANGE */
    ck_assert_int_eq(bad, 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The matrix at several sizes                                              */
/* ------------------------------------------------------------------------ */

/* 1; odd; not a multiple of the group; many tiles and grid strides */
static const uint64_t matrix_sizes[] = {1, 7, 4099, 65537};

START_TEST(test_matrix)
{
    eq_op op = (eq_op)(_i % EQ_NOPS);
    uint64_t n = matrix_sizes[_i / EQ_NOPS];
    int failures = eq_run_matrix(&gpu, op, n, op == EQ_SUM ? 4 : 2, 7000u + (unsigned)_i);
    ck_assert_msg(failures == 0, "%s at n=%llu: %d cases differ (see stderr)", eq_op_names[op],
                  (unsigned long long)n, failures);
}
END_TEST

/* Around 1e7 elements: every distribution and every operation for the
** codecs of the published schemes, one distribution for the others, and a
** sample of the matrix. */
START_TEST(test_large)
{
    const uint64_t n = 10000019;
    const char *schemes[] = {
        "bits=4,group=128,round=sr,hadamard=32", /* TLq-HS inter hop */
        "bits=8,group=128,round=sr,hadamard=32", /* TLq-HS intra hop */
        "bits=4,group=2048,round=sr",            /* qWD */
    };
    const char *others[] = {
        "bits=4,group=128,round=rtn,levels=deepspeed",    /* ZeRO++ qgZ */
        "bits=8,group=4096,round=rtn,levels=deepspeed",   /* ZeRO++ qwZ-like */
        "kind=minmax,bits=8,group=1024,round=sr",         /* QSDP-like */
        "bits=3,group=7,round=sr,hadamard=1024",          /* irregular everything */
    };
    int failures = 0;
    for (size_t s = 0; s < sizeof schemes / sizeof schemes[0]; s++)
        for (int d = 0; d < EQ_NDIST; d++)
            for (int op = 0; op < EQ_NOPS; op++)
                failures += run((eq_op)op, schemes[s], n, (eq_dist)d, 100 * s + (uint64_t)d,
                                op == EQ_SUM ? 4 : 2,
                                op == EQ_SUM_REQUANT ? "bits=4,group=128,round=sr" : NULL);
    for (size_t s = 0; s < sizeof others / sizeof others[0]; s++)
        for (int op = 0; op < EQ_NOPS; op++)
            failures += run((eq_op)op, others[s], n, (eq_dist)(s % EQ_NDIST), 500 + s, 3, NULL);
    for (int i = 0; i < (int)EQ_MATRIX_SIZE; i += 37) {
        eq_case t;
        memset(&t, 0, sizeof t);
        if (eq_matrix_codec(i, &t.c) != 0) continue;
        t.op = (eq_op)(i % EQ_NOPS);
        t.n = n;
        t.k = 3;
        t.dist = (eq_dist)(i % EQ_NDIST);
        t.seed = 900 + (uint64_t)i;
        t.c_out = t.c;
        failures += eq_run(&gpu, &t);
    }
    ck_assert_int_eq(failures, 0);
}
END_TEST

/* Buffers 4 bytes (floats) or 1 byte (codes) off their alignment take the
** scalar paths of the kernels. */
START_TEST(test_misaligned)
{
    g_misalign = 1;
    int failures = 0;
    for (int op = 0; op < EQ_NOPS; op++) {
        failures += run((eq_op)op, "bits=4,group=128,round=sr,hadamard=32", 100003, EQ_GRADIENT,
                        1, 3, NULL);
        failures += run((eq_op)op, "bits=8,group=2048,round=rtn,scale=bf16", 100003, EQ_NORMAL, 2,
                        3, NULL);
    }
    g_misalign = 0;
    ck_assert_int_eq(failures, 0);
}
END_TEST

/* Group shapes of every reduction path, and more chunks than a kernel takes. */
START_TEST(test_paths)
{
    const uint64_t groups[] = {1, 3, 8, 16, 24, 512, 1000, 8192, 12288, 1u << 20};
    int failures = 0;
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
        for (int minmax = 0; minmax < 2; minmax++)
            for (int h = 0; h <= 512; h += 512) {
                char spec[128];
                snprintf(spec, sizeof spec, "kind=%s,bits=6,group=%llu,round=sr,hadamard=%d",
                         minmax ? "minmax" : "sym", (unsigned long long)groups[g], h);
                uint64_t n = 3 * groups[g] + 1000003;
                failures += run(EQ_QUANTIZE, spec, n, (eq_dist)(g % EQ_NDIST), 70 + g, 1, NULL);
                failures +=
                    run(EQ_QUANTIZE_DIFF, spec, n, (eq_dist)(g % EQ_NDIST), 80 + g, 1, NULL);
                failures += run(EQ_SUM_REQUANT, "bits=8,group=32,round=sr", n,
                                (eq_dist)(g % EQ_NDIST), 90 + g, 2, spec);
            }
    failures += run(EQ_SUM_REQUANT, "bits=8,group=128,round=sr", 300007, EQ_GRADIENT, 3, 150,
                    "bits=4,group=128,round=sr");
    failures += run(EQ_SUM, "bits=4,group=128,round=sr,hadamard=1024", 300007, EQ_OUTLIERS, 4,
                    130, NULL);
    ck_assert_int_eq(failures, 0);
}
END_TEST

/* The compressors (QSGD, scaled sign, FP8): every operation at a size of
** many grid strides under each scale dtype and rounding, groups of every
** reduction path (QSGD and the sign: a warp per group; FP8: the key paths
** of the other kinds), sums that requantize into them, misaligned buffers. */
START_TEST(test_compressors)
{
    const char *kinds[] = {"kind=qsgd,bits=2", "kind=qsgd,bits=4", "kind=qsgd,bits=8",
                           "kind=sign",        "kind=fp8e4m3",     "kind=fp8e5m2"};
    const uint64_t groups[] = {1, 7, 32, 128, 1000, 4096};
    int failures = 0, i = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (int sc = 0; sc < 3; sc++)
            for (int sr = 0; sr < 2; sr++) {
                if (strstr(kinds[k], "sign") && sr) continue;
                char spec[160];
                snprintf(spec, sizeof spec, "%s,group=%llu,round=%s,scale=%s,hadamard=%d",
                         kinds[k], (unsigned long long)groups[i % 6], sr ? "sr" : "rtn",
                         sc == 0 ? "fp32" : sc == 1 ? "bf16" : "fp16", i % 3 ? 0 : 128);
                for (int op = 0; op < EQ_NOPS; op++)
                    failures += run((eq_op)op, spec, 1000003, (eq_dist)(i % EQ_NDIST), 600 + i,
                                    op == EQ_SUM ? 4 : 2,
                                    op == EQ_SUM_REQUANT ? "kind=sign,group=64" : NULL);
                failures += run(EQ_SUM_REQUANT, "bits=8,group=128,round=sr", 1000003,
                                (eq_dist)(i % EQ_NDIST), 700 + i, 3, spec);
                i++;
            }
    const uint64_t paths[] = {1, 3, 31, 33, 512, 8192, 1u << 20};
    for (size_t g = 0; g < sizeof paths / sizeof paths[0]; g++)
        for (int k = 0; k < 3; k++) {
            char spec[128];
            snprintf(spec, sizeof spec, "%s,group=%llu,hadamard=%d",
                     k == 0 ? "kind=qsgd,bits=6,round=sr" : k == 1 ? "kind=sign" : "kind=fp8e4m3",
                     (unsigned long long)paths[g], g % 2 ? 512 : 0);
            failures += run(EQ_QUANTIZE, spec, 3 * paths[g] + 1000003, (eq_dist)(g % EQ_NDIST),
                            800 + g, 1, NULL);
            failures += run(EQ_QUANTIZE_DIFF, spec, 3 * paths[g] + 1000003,
                            (eq_dist)(g % EQ_NDIST), 810 + g, 1, NULL);
        }
    failures += run(EQ_QUANTIZE, "kind=qsgd,bits=4,group=128,round=sr,hadamard=32", 10000019,
                    EQ_GRADIENT, 900, 1, NULL);
    failures += run(EQ_SUM_REQUANT, "kind=fp8e4m3,group=128,round=sr", 300007, EQ_GRADIENT, 901,
                    150, "kind=qsgd,bits=4,group=128,round=sr");
    g_misalign = 1;
    for (int op = 0; op < EQ_NOPS; op++) {
        failures += run((eq_op)op, "kind=qsgd,bits=3,group=100,round=sr,scale=bf16", 100003,
                        EQ_NORMAL, 910, 3, NULL);
        failures += run((eq_op)op, "kind=fp8e5m2,group=64,round=rtn,scale=fp16", 100003,
                        EQ_HEAVY, 911, 3, NULL);
    }
    g_misalign = 0;
    ck_assert_int_eq(failures, 0);
}
END_TEST

/* A stream lent by the caller (sq_backend_set_stream): CUDA's legacy and
** per-thread default streams, whose handles need no CUDA header here. Every
** operation, copy and fill on them writes the reference's bytes; a
** deferred batch's findings survive a switch of streams. */
START_TEST(test_streams)
{
    void *const legacy = (void *)1, *const per_thread = (void *)2; /* cudaStreamLegacy, ...PerThread */
    int failures = 0;
    for (int s = 0; s < 2; s++) {
        ck_assert_int_eq(sq_backend_set_stream(g_be, s ? per_thread : legacy), SQ_OK);
        ck_assert_int_eq(sq_backend_set_stream(g_be, s ? per_thread : legacy), SQ_OK);
        for (int op = 0; op < EQ_NOPS; op++)
            failures += run((eq_op)op, "bits=4,group=128,round=sr,hadamard=32", 100003,
                            EQ_GRADIENT, 5 + s, 3, NULL);
    }
    ck_assert_int_eq(sq_backend_set_stream(g_be, NULL), SQ_OK);
    ck_assert_int_eq(failures, 0);

    const uint64_t n = 4096;
    sq_codec c = codec("bits=4,group=128,round=rtn");
    float *x = calloc(n, sizeof *x);
    x[17] = NAN;
    float *dx = dev_put(x, n * 4, 0);
    sq_qbuf dq;
    ck_assert_int_eq(sq_backend_qbuf_alloc(g_be, &c, n, &dq), SQ_OK);
    ck_assert_int_eq(sq_backend_set_deferred(g_be, 1), SQ_OK);
    ck_assert_int_eq(sq_backend_quantize(g_be, &c, dx, n, NULL, &dq), SQ_OK); /* own stream */
    ck_assert_int_eq(sq_backend_set_stream(g_be, legacy), SQ_OK);
    ck_assert_int_eq(sq_backend_sync(g_be), SQ_ERR_NONFINITE);
    ck_assert_int_eq(sq_backend_quantize(g_be, &c, dx, n, NULL, &dq), SQ_OK); /* lent stream */
    ck_assert_int_eq(sq_backend_set_stream(g_be, NULL), SQ_OK);
    ck_assert_int_eq(sq_backend_set_deferred(g_be, 0), SQ_ERR_NONFINITE);
    sq_backend_qbuf_free(g_be, &dq);
    arena_free();
    free(x);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Statuses, deferred batches, device errors                                */
/* ------------------------------------------------------------------------ */

START_TEST(test_status)
{
    const uint64_t n = 100000;
    float *x = malloc(n * 4);
    eq_fill(x, n, EQ_NORMAL, 9);
    sq_codec c = codec("bits=4,group=128,round=sr,hadamard=32");
    sq_rng_key key = eq_key(1, 0);
    sq_qbuf hq;
    eq_qbuf(&c, n, 0, &hq);
    x[54321] = NAN;
    ck_assert_int_eq(gpu_quantize(&c, x, NULL, n, &key, &hq), SQ_ERR_NONFINITE);
    for (int j = 0; j < 32; j++) x[640 + j] = 3e38f;
    x[54321] = 1.0f;
    ck_assert_int_eq(gpu_quantize(&c, x, NULL, n, &key, &hq), SQ_ERR_RANGE);
    /* bf16 weights: a finite value that rounds past bf16's range */
    for (int j = 0; j < 32; j++) x[640 + j] = 1.0f;
    x[777] = 3.4e38f;
    ck_assert_int_eq(gpu_quantize_as(&c, x, NULL, n, &key, &hq, 1), SQ_ERR_RANGE);
    ck_assert_int_eq(sq_quantize_bf16(&c, x, n, &key, &hq), SQ_ERR_RANGE);
    ck_assert_int_eq(gpu_quantize_as(&c, x, x, n, &key, &hq, 1), SQ_ERR_RANGE);
    x[777] = 1.0f;
    /* arguments the core refuses, refused the same way before any launch */
    ck_assert_int_eq(sq_backend_quantize(g_be, &c, x, n, NULL, &hq), SQ_ERR_ARG);
    sq_codec bad = c;
    bad.bits = 9;
    ck_assert_int_eq(sq_backend_quantize(g_be, &bad, x, n, &key, &hq), SQ_ERR_SPEC);
    sq_qbuf_free(&hq);
    free(x);
}
END_TEST

/* The casts, top-k and random-k run on the GPU with the reference's bytes;
** top-k and random-k with a Hadamard transform are refused with a sentence
** that names the kind. */
START_TEST(test_sparse_kinds)
{
    int failures = 0;
    for (int op = 0; op < EQ_NOPS; op++)
        for (uint64_t n = 1; n <= 1000003; n = n * 97 + 5) {
            failures += run((eq_op)op, "kind=fp16", n, EQ_NORMAL, 80 + n, 3,
                            op == EQ_SUM_REQUANT ? "bits=4,group=128,round=sr" : NULL);
            failures += run((eq_op)op, "kind=bf16", n, EQ_GRADIENT, 90 + n, 3, NULL);
            failures += run((eq_op)op, "kind=topk,keep=26,group=256", n, EQ_GRADIENT, 70 + n, 3,
                            NULL);
            failures += run((eq_op)op, "kind=randk,keep=8,group=300,scale=bf16", n, EQ_NORMAL,
                            60 + n, 3, NULL);
        }
    failures += run(EQ_SUM_REQUANT, "bits=8,group=128,round=sr", 65537, EQ_NORMAL, 99, 4,
                    "kind=fp16");
    failures += run(EQ_SUM_REQUANT, "kind=topk,keep=1,group=70000", 150001, EQ_GRADIENT, 98, 3,
                    "kind=randk,keep=64,group=1024,scale=fp16");
    ck_assert_int_eq(failures, 0);
    const uint64_t n = 4096;
    float *x = malloc(n * 4);
    eq_fill(x, n, EQ_NORMAL, 5);
    sq_rng_key key = eq_key(1, 0);
    for (int r = 0; r < 2; r++) {
        sq_codec c = codec(r ? "kind=randk,keep=4,group=64,hadamard=32"
                             : "kind=topk,keep=4,group=64,hadamard=32");
        sq_qbuf hq;
        eq_qbuf(&c, n, 0, &hq);
        ck_assert_int_eq(gpu_quantize(&c, x, NULL, n, &key, &hq), SQ_ERR_UNSUPPORTED);
        ck_assert_ptr_nonnull(strstr(sq_backend_error(g_be), r ? "kind=randk" : "kind=topk"));
        sq_qbuf_free(&hq);
    }
    free(x);
}
END_TEST

/* Deferred: three operations enqueued, one sync; the worst status wins and
** the good results are still right. */
START_TEST(test_deferred)
{
    const uint64_t n = 1 << 20;
    sq_codec c = codec("bits=4,group=128,round=sr");
    sq_rng_key key = eq_key(3, 0);
    float *x = malloc(n * 4), *y = malloc(n * 4), *want = malloc(n * 4);
    eq_fill(x, n, EQ_GRADIENT, 3);
    float *dx = dev_put(x, n * 4, 0), *dy = dev_alloc(n * 4, 0);
    x[5] = INFINITY;
    float *dbad = dev_put(x, n * 4, 0);
    sq_qbuf dq;
    ck_assert_int_eq(sq_backend_qbuf_alloc(g_be, &c, n, &dq), SQ_OK);
    ck_assert_int_eq(sq_backend_set_deferred(g_be, 1), SQ_OK);
    ck_assert_int_eq(sq_backend_quantize(g_be, &c, dx, n, &key, &dq), SQ_OK);
    ck_assert_int_eq(sq_backend_dequantize(g_be, &c, &dq, n, dy), SQ_OK);
    ck_assert_int_eq(sq_backend_sync(g_be), SQ_OK);
    dev_get(y, dy, n * 4);
    ck_assert_int_eq(sq_backend_quantize(g_be, &c, dbad, n, &key, &dq), SQ_OK); /* not yet known */
    ck_assert_int_eq(sq_backend_set_deferred(g_be, 0), SQ_ERR_NONFINITE);
    ck_assert_int_eq(sq_backend_sync(g_be), SQ_OK); /* reported once */

    x[5] = 0.0f;
    eq_fill(x, n, EQ_GRADIENT, 3);
    sq_qbuf hq;
    sq_qbuf_alloc(&c, n, &hq);
    ck_assert_int_eq(sq_quantize(&c, x, n, &key, &hq), SQ_OK);
    ck_assert_int_eq(sq_dequantize(&c, &hq, n, want), SQ_OK);
    ck_assert_mem_eq(y, want, n * 4);
    sq_qbuf_free(&hq);
    sq_backend_qbuf_free(g_be, &dq);
    arena_free();
    free(x);
    free(y);
    free(want);
}
END_TEST

/* A device failure is a status and a sentence naming the call. */
START_TEST(test_device_errors)
{
    void *p = NULL;
    int rc = sq_backend_alloc(g_be, (size_t)1 << 50, &p);
    ck_assert_int_eq(rc, SQ_ERR_NOMEM);
    const char *e = sq_backend_error(g_be);
    ck_assert_msg(strstr(e, "cudaMalloc(") && strstr(e, "cuda:0"), "%s", e);
    /* and the backend still works after it */
    ck_assert_int_eq(sq_backend_alloc(g_be, 64, &p), SQ_OK);
    sq_backend_free(g_be, p);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The elementwise operations against the CPU backend                       */
/* ------------------------------------------------------------------------ */

/* Compares n elements and the guard after them, and the statuses; also
** that the CPU's status is the one backend.h promises. Returns 0 or 1. */
static int ew_compare(const char *what, const void *want, const void *got, uint64_t bytes,
                      int rw, int rg, int rule)
{
    int64_t at = eq_first_diff(want, got, bytes);
    if (at < 0 && rw == rg && rw == rule) return 0;
    fprintf(stderr, "MISMATCH %s: ", what);
    if (at >= 0)
        fprintf(stderr, "byte %lld: 0x%02x on the CPU, 0x%02x on the GPU; ", (long long)at,
                ((const unsigned char *)want)[at], ((const unsigned char *)got)[at]);
    fprintf(stderr, "status %d on the CPU, %d on the GPU, %d by the rule\n", rw, rg, rule);
    return 1;
}

/* The four operations on one input on the CPU and on cuda:0 (inputs and
** outputs one element off their alignment when misaligned; add and sub
** write over a when aliased). Every buffer holds one guard element past n. */
static int ew_gpu_case(sq_backend *cpu, uint64_t n, eq_ew_kind kind, int misalign, int alias,
                       uint64_t seed)
{
    const uint64_t fb = (n + 1) * 4, hb = (n + 1) * 2;
    float *a = eq_alloc(fb, EQ_PATTERN), *b = eq_alloc(fb, EQ_PATTERN);
    float *ca = eq_alloc(fb, EQ_PATTERN), *want = eq_alloc(fb, EQ_PATTERN);
    float *got = eq_alloc(fb, EQ_PATTERN);
    uint16_t *h = eq_alloc(hb, EQ_PATTERN), *hwant = eq_alloc(hb, EQ_PATTERN);
    uint16_t *hgot = eq_alloc(hb, EQ_PATTERN);
    int rule[3], failures = 0;
    char what[160];
    eq_ew_fill(a, b, h, n, kind, seed);
    eq_ew_want(kind, rule);
    g_misalign = misalign;

    snprintf(what, sizeof what, "add, n=%llu, %s%s%s", (unsigned long long)n,
             eq_ew_kind_names[kind], misalign ? ", misaligned" : "", alias ? ", out = a" : "");
    memcpy(ca, a, (size_t)fb);
    int rw = sq_backend_add(cpu, ca, b, n, alias ? ca : want);
    float *da = dev_put(a, (size_t)fb, 4), *db = dev_put(b, (size_t)fb, 4);
    float *dout = alias ? da : dev_put(got, (size_t)fb, 4);
    int rg = sq_backend_add(g_be, da, db, n, dout);
    ck_assert_msg(rg != SQ_ERR_DEVICE && rg != SQ_ERR_NOMEM, "%s", sq_backend_error(g_be));
    dev_get(got, dout, (size_t)fb);
    failures += ew_compare(what, alias ? ca : want, got, fb, rw, rg, rule[0]);

    /* sub of -b: a + b's bytes and status on both */
    snprintf(what, sizeof what, "sub, n=%llu, %s%s%s", (unsigned long long)n,
             eq_ew_kind_names[kind], misalign ? ", misaligned" : "", alias ? ", out = a" : "");
    for (uint64_t i = 0; i < n; i++) b[i] = -b[i];
    float *sw = eq_alloc(fb, EQ_PATTERN), *sg = eq_alloc(fb, EQ_PATTERN);
    memcpy(ca, a, (size_t)fb);
    rw = sq_backend_sub(cpu, ca, b, n, alias ? ca : sw);
    da = dev_put(a, (size_t)fb, 4), db = dev_put(b, (size_t)fb, 4);
    dout = alias ? da : dev_put(sg, (size_t)fb, 4);
    rg = sq_backend_sub(g_be, da, db, n, dout);
    ck_assert_msg(rg != SQ_ERR_DEVICE && rg != SQ_ERR_NOMEM, "%s", sq_backend_error(g_be));
    dev_get(sg, dout, (size_t)fb);
    failures += ew_compare(what, alias ? ca : sw, sg, fb, rw, rg, rule[0]);
    for (uint64_t i = 0; i < n; i++) b[i] = -b[i];
    free(sw);
    free(sg);

    snprintf(what, sizeof what, "to_bf16, n=%llu, %s%s", (unsigned long long)n,
             eq_ew_kind_names[kind], misalign ? ", misaligned" : "");
    rw = sq_backend_to_bf16(cpu, a, n, hwant);
    uint16_t *dh = dev_put(hgot, (size_t)hb, 2);
    rg = sq_backend_to_bf16(g_be, dev_put(a, (size_t)fb, 4), n, dh); /* da may hold a + b */
    ck_assert_msg(rg != SQ_ERR_DEVICE && rg != SQ_ERR_NOMEM, "%s", sq_backend_error(g_be));
    dev_get(hgot, dh, (size_t)hb);
    failures += ew_compare(what, hwant, hgot, hb, rw, rg, rule[1]);

    snprintf(what, sizeof what, "from_bf16, n=%llu, %s%s", (unsigned long long)n,
             eq_ew_kind_names[kind], misalign ? ", misaligned" : "");
    memset(want, EQ_PATTERN, (size_t)fb);
    memset(got, EQ_PATTERN, (size_t)fb);
    rw = sq_backend_from_bf16(cpu, h, n, want);
    uint16_t *dhin = dev_put(h, (size_t)hb, 2);
    dout = dev_put(got, (size_t)fb, 4);
    rg = sq_backend_from_bf16(g_be, dhin, n, dout);
    ck_assert_msg(rg != SQ_ERR_DEVICE && rg != SQ_ERR_NOMEM, "%s", sq_backend_error(g_be));
    dev_get(got, dout, (size_t)fb);
    failures += ew_compare(what, want, got, fb, rw, rg, rule[2]);

    g_misalign = 0;
    arena_free();
    free(a);
    free(b);
    free(ca);
    free(want);
    free(got);
    free(h);
    free(hwant);
    free(hgot);
    return failures;
}

/* 1; odd; a partial tile; many tiles with a partial last vector; ~1e7 */
static const uint64_t ew_sizes[] = {1, 7, 4099, 65537 + 3, 10000019};

START_TEST(test_elementwise)
{
    sq_backend *cpu = NULL;
    sq_error err = {0};
    ck_assert_msg(sq_backend_open("cpu", &cpu, &err) == SQ_OK, "%s", err.msg);
    int failures = 0;
    uint64_t seed = 1;
    for (size_t i = 0; i < sizeof ew_sizes / sizeof ew_sizes[0]; i++)
        for (int kind = 0; kind < EQ_EW_NKINDS; kind++)
            for (int misalign = 0; misalign < 2; misalign++)
                for (int alias = 0; alias < 2; alias++)
                    failures += ew_gpu_case(cpu, ew_sizes[i], (eq_ew_kind)kind, misalign, alias,
                                            seed++);
    /* n = 0 touches nothing; NULL with n > 0 is refused before any launch */
    ck_assert_int_eq(sq_backend_add(g_be, NULL, NULL, 0, NULL), SQ_OK);
    ck_assert_int_eq(sq_backend_to_bf16(g_be, NULL, 0, NULL), SQ_OK);
    ck_assert_int_eq(sq_backend_from_bf16(g_be, NULL, 0, NULL), SQ_OK);
    ck_assert_int_eq(sq_backend_add(g_be, NULL, NULL, 1, NULL), SQ_ERR_ARG);
    ck_assert_int_eq(sq_backend_sub(g_be, NULL, NULL, 0, NULL), SQ_OK);
    ck_assert_int_eq(sq_backend_sub(g_be, NULL, NULL, 1, NULL), SQ_ERR_ARG);
    ck_assert_int_eq(sq_backend_to_bf16(g_be, NULL, 1, NULL), SQ_ERR_ARG);
    ck_assert_int_eq(sq_backend_from_bf16(g_be, NULL, 1, NULL), SQ_ERR_ARG);
    sq_backend_close(cpu);
    ck_assert_int_eq(failures, 0);
}
END_TEST

/* Deferred: an overflowing add and a NaN conversion in one batch report
** the NaN at the sync (non-finite input outranks an overflow), and the
** add's bytes are the CPU's. */
START_TEST(test_elementwise_deferred)
{
    const uint64_t n = 1 << 20;
    float *a = eq_alloc(n * 4, 0), *b = eq_alloc(n * 4, 0), *want = eq_alloc(n * 4, 0);
    float *got = eq_alloc(n * 4, 0);
    uint16_t *h = eq_alloc(n * 2, 0), *h2 = eq_alloc(n * 2, 0);
    sq_backend *cpu = NULL;
    ck_assert_int_eq(sq_backend_open("cpu", &cpu, NULL), SQ_OK);
    eq_ew_fill(want, got, h2, n, EQ_EW_NONFINITE, 6); /* for h2, with NaN and Inf */
    eq_ew_fill(a, b, h, n, EQ_EW_RANGE, 5);           /* a + b overflows */
    float *da = dev_put(a, n * 4, 0), *db = dev_put(b, n * 4, 0), *dout = dev_alloc(n * 4, 0);
    uint16_t *dh = dev_put(h2, n * 2, 0);
    float *dback = dev_alloc(n * 4, 0);
    ck_assert_int_eq(sq_backend_set_deferred(g_be, 1), SQ_OK);
    ck_assert_int_eq(sq_backend_add(g_be, da, db, n, dout), SQ_OK); /* not yet known */
    ck_assert_int_eq(sq_backend_sync(g_be), SQ_ERR_RANGE);
    ck_assert_int_eq(sq_backend_add(g_be, da, db, n, dout), SQ_OK);
    ck_assert_int_eq(sq_backend_from_bf16(g_be, dh, n, dback), SQ_OK);
    ck_assert_int_eq(sq_backend_set_deferred(g_be, 0), SQ_ERR_NONFINITE);
    ck_assert_int_eq(sq_backend_sync(g_be), SQ_OK); /* reported once */
    ck_assert_int_eq(sq_backend_add(cpu, a, b, n, want), SQ_ERR_RANGE);
    dev_get(got, dout, n * 4);
    ck_assert_mem_eq(got, want, n * 4);
    arena_free();
    sq_backend_close(cpu);
    free(a);
    free(b);
    free(want);
    free(got);
    free(h);
    free(h2);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Placement over all GPUs                                                  */
/* ------------------------------------------------------------------------ */

/* Eight emulated workers round-robin over the visible GPUs: each quantizes
** its own input on its device, the codes travel to device 0 by peer copy
** (or device-to-device copy), are decoded there, and equal the C
** reference's decode of the reference's codes. */
START_TEST(test_placement)
{
    sq_placement pl;
    sq_error err = {0};
    ck_assert_msg(sq_placement_open("cuda", &pl, &err) == SQ_OK, "%s", err.msg);
    ck_assert_int_eq(pl.count, sq_device_count());
    const uint64_t n = 300007;
    sq_codec c = codec("bits=4,group=128,round=sr,hadamard=32");
    float *x = malloc(n * 4), *got = malloc(n * 4), *want = malloc(n * 4);
    sq_backend *home = pl.be[0];
    for (uint32_t w = 0; w < 8; w++) {
        sq_backend *be = sq_placement_worker(&pl, w);
        ck_assert_int_eq(sq_backend_device(be), (int)(w % (uint32_t)pl.count));
        sq_rng_key key = eq_key(11, w);
        eq_fill(x, n, EQ_GRADIENT, 40 + w);
        void *dx;
        sq_qbuf dq, hq, dq0;
        ck_assert_int_eq(sq_backend_alloc(be, n * 4, &dx), SQ_OK);
        ck_assert_int_eq(sq_backend_put(be, dx, x, n * 4), SQ_OK);
        ck_assert_int_eq(sq_backend_qbuf_alloc(be, &c, n, &dq), SQ_OK);
        ck_assert_int_eq(sq_backend_quantize(be, &c, dx, n, &key, &dq), SQ_OK);
        ck_assert_int_eq(sq_backend_qbuf_alloc(home, &c, n, &dq0), SQ_OK);
        ck_assert_msg(sq_backend_copy(home, dq0.codes, be, dq.codes, sq_codec_code_bytes(&c, n)) ==
                          SQ_OK, "%s", sq_backend_error(home));
        ck_assert_int_eq(sq_backend_copy(home, dq0.scales, be, dq.scales,
                                         sq_codec_scale_bytes(&c, n)), SQ_OK);
        void *dout;
        ck_assert_int_eq(sq_backend_alloc(home, n * 4, &dout), SQ_OK);
        ck_assert_int_eq(sq_backend_dequantize(home, &c, &dq0, n, dout), SQ_OK);
        ck_assert_int_eq(sq_backend_get(home, got, dout, n * 4), SQ_OK);
        sq_qbuf_alloc(&c, n, &hq);
        ck_assert_int_eq(sq_quantize(&c, x, n, &key, &hq), SQ_OK);
        ck_assert_int_eq(sq_dequantize(&c, &hq, n, want), SQ_OK);
        ck_assert_mem_eq(got, want, n * 4);
        sq_qbuf_free(&hq);
        sq_backend_qbuf_free(be, &dq);
        sq_backend_qbuf_free(home, &dq0);
        sq_backend_free(be, dx);
        sq_backend_free(home, dout);
    }
    free(x);
    free(got);
    free(want);
    sq_placement_close(&pl);
}
END_TEST

int main(void)
{
    sqt_devices_or_skip();
    sq_error err = {0};
    if (sq_backend_open("cuda:0", &g_be, &err) != SQ_OK) {
        fprintf(stderr, "cannot open cuda:0: %s\n", err.msg);
        return EXIT_FAILURE;
    }
    printf("%s\n", sq_backend_description(g_be));

    Suite *s = suite_create("gpu_codec");
    TCase *tm = tcase_create("matrix");
    tcase_add_loop_test(tm, test_matrix, 0,
                        EQ_NOPS * (int)(sizeof matrix_sizes / sizeof matrix_sizes[0]));
    suite_add_tcase(s, tm);
    TCase *tc = tcase_create("device");
    tcase_add_test(tc, test_large);
    tcase_add_test(tc, test_misaligned);
    tcase_add_test(tc, test_paths);
    tcase_add_test(tc, test_compressors);
    tcase_add_test(tc, test_f16_sums);
    tcase_add_test(tc, test_status);
    tcase_add_test(tc, test_sparse_kinds);
    tcase_add_test(tc, test_deferred);
    tcase_add_test(tc, test_streams);
    tcase_add_test(tc, test_device_errors);
    tcase_add_test(tc, test_elementwise);
    tcase_add_test(tc, test_elementwise_deferred);
    tcase_add_test(tc, test_placement);
    suite_add_tcase(s, tc);
    int rc = sqt_run_nofork(s);
    sq_backend_close(g_be);
    return rc;
}
