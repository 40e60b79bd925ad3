/*
** check_presets.c -- the reference-named presets against straight-line
** transcriptions of the rules they follow.
**
** Each reference below is written here as plain scalar loops from the
** reference's description (docs/schemes.md, the source column), not from
** the library's codec: SDP4Bit's ULq two-level reduce (stochastic rounding,
** 15 levels, fp32 sums), DeepSpeed's qgZ (its group rule, RTN with
** DeepSpeed levels, fp16 sums, its fallbacks) and qwZ (CUDAQuantizer's block
** count, int8 RTN). The library's world (or codec, for qwZ) runs the same
** input and the bytes must agree. Only sq_uniform, the Philox stream every
** stochastic rounding of shardq draws from, comes from the library.
*/
#include "check_util.h"
#include "shardq/world.h"

#include <math.h>

/* ------------------------------------------------------------------------ */
/* Scalar helpers of the references                                         */
/* ------------------------------------------------------------------------ */

/* x rounded to the nearest fp16 value, ties to even (what __float2half and
** an fp16 add do), written with frexpf: an fp16 value has 11 significant
** bits above 2^-14 and steps of 2^-24 below. */
static float ref_f16(float x)
{
    if (x == 0.0f) return x;
    int e;
    frexpf(x, &e); /* |x| in [2^(e-1), 2^e) */
    int ue = e - 1 - 10;
    if (ue < -24) ue = -24;
    float ulp = ldexpf(1.0f, ue);
    float r = rintf(x / ulp) * ulp;
    if (fabsf(r) > 65504.0f) return x > 0 ? INFINITY : -INFINITY;
    return r;
}

static float absmax(const float *x, size_t n)
{
    float a = 0.0f;
    for (size_t i = 0; i < n; i++) a = fabsf(x[i]) > a ? fabsf(x[i]) : a;
    return a;
}

/* One group, symmetric: codes clamped to [qlo, qhi], the multiplier qm /
** absmax, the scale absmax / qm; SR rounds v up when u < v - floor(v). */
static void ref_group(const float *x, size_t n, float qm, float qlo, float qhi, int sr,
                      const sq_rng_key *key, uint64_t first, float *decoded)
{
    float a = absmax(x, n);
    float m = a == 0.0f ? 1.0f : qm / a, s = a == 0.0f ? 1.0f : a / qm;
    for (size_t i = 0; i < n; i++) {
        float v = x[i] * m, q;
        if (sr) {
            float f = floorf(v);
            q = f + (sq_uniform(key, first + i) < v - f ? 1.0f : 0.0f);
        } else {
            q = rintf(v);
        }
        q = q < qlo ? qlo : q > qhi ? qhi : q;
        decoded[i] = (float)(int)q * s; /* an integer code: never -0 */
    }
}

/* A buffer of n elements in groups of g, as the receiver decodes it. */
static void ref_codec(const float *x, size_t n, size_t g, float qm, float qlo, float qhi, int sr,
                      const sq_rng_key *key, float *decoded)
{
    for (size_t g0 = 0; g0 < n; g0 += g)
        ref_group(x + g0, n - g0 < g ? n - g0 : g, qm, qlo, qhi, sr, key, g0, decoded + g0);
}

/* ------------------------------------------------------------------------ */
/* Running a world                                                          */
/* ------------------------------------------------------------------------ */

#define SEED 4242u
#define STEP 3u

/* grads[r * n ...]: worker r's gradient; out[r * n ...]: its shard (the
** partition r of n / N elements). n must need no padding. */
static void run_world(const sq_scheme *s, int K, int G, uint64_t n, const float *grads, float *out)
{
    sq_world_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.topo.nodes = K;
    cfg.topo.per_node = G;
    cfg.scheme = *s;
    cfg.elements = n;
    cfg.seed = SEED;
    sq_world *w;
    sq_error err = {0};
    int rc = sq_world_open(&cfg, &w, &err);
    ck_assert_msg(rc == SQ_OK, "open: %s", err.msg);
    ck_assert_uint_eq(sq_world_padded(w), n);
    const int N = K * G;
    for (int r = 0; r < N; r++) ck_assert_int_eq(sq_world_put_grad(w, r, grads + (size_t)r * n), SQ_OK);
    rc = sq_world_reduce_grads(w, STEP);
    ck_assert_msg(rc == SQ_OK, "reduce: %s", sq_world_error(w));
    for (int r = 0; r < N; r++)
        ck_assert_int_eq(sq_world_get_grad_shard(w, r, out + (size_t)r * (n / (uint64_t)N)), SQ_OK);
    sq_world_close(w);
}

static void fill_grads(float *g, size_t count, uint64_t seed)
{
    sqt_rng rng = {seed};
    for (size_t i = 0; i < count; i++) g[i] = sqt_sym(&rng) * (1.0f + (float)(i % 7));
}

static void expect_bytes(const float *got, const float *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(sqt_bits(got[i]) == sqt_bits(want[i]), "%s: element %zu: got %.9g want %.9g",
                      what, i, (double)got[i], (double)want[i]);
}

/* ------------------------------------------------------------------------ */
/* ulq: SDP4Bit's public ULq                                                */
/* ------------------------------------------------------------------------ */

/* The two-level reduce of quantized_reduce_scatter_intra_and_inter with
** 4 bits on both hops: worker (k, l) quantizes its whole gradient (SR,
** qmax = 7, groups of 128 numbered in its own buffer), receives from every
** local peer l' the partitions b = j * G + l of all nodes j, sums them in
** fp32 over l' = 0..G-1, requantizes that buffer of K partitions (SR, the
** inter site, element e = j * S + t), and worker r = (k, l) sums over the
** nodes k' = 0..K-1 the piece k of (k', l). The gradient is divided by N
** first (grad.mean). */
static void ref_ulq(int K, int G, size_t n, const float *grads, float *out)
{
    const int N = K * G;
    const size_t S = n / (size_t)N, Q = (size_t)K * S, g = 128;
    float *x = malloc(n * sizeof *x), *d1 = malloc((size_t)N * n * sizeof *d1);
    float *sum1 = malloc(Q * sizeof *sum1), *d2 = malloc((size_t)N * Q * sizeof *d2);
    for (int r = 0; r < N; r++) {
        for (size_t i = 0; i < n; i++) x[i] = grads[(size_t)r * n + i] / (float)N;
        sq_rng_key key = {SEED, STEP, (uint32_t)r, SQ_SITE_GRAD_INTRA};
        ref_codec(x, n, g, 7.0f, -7.0f, 7.0f, 1, &key, d1 + (size_t)r * n);
    }
    for (int k = 0; k < K; k++)
        for (int l = 0; l < G; l++) {
            for (int j = 0; j < K; j++)
                for (size_t t = 0; t < S; t++) {
                    float acc = 0.0f;
                    for (int lp = 0; lp < G; lp++) {
                        float v = d1[(size_t)(k * G + lp) * n + (size_t)(j * G + l) * S + t];
                        acc = lp ? acc + v : v;
                    }
                    sum1[(size_t)j * S + t] = acc;
                }
            int r = k * G + l;
            sq_rng_key key = {SEED, STEP, (uint32_t)r, SQ_SITE_GRAD_INTER};
            ref_codec(sum1, Q, g, 7.0f, -7.0f, 7.0f, 1, &key, d2 + (size_t)r * Q);
        }
    for (int k = 0; k < K; k++)
        for (int l = 0; l < G; l++)
            for (size_t t = 0; t < S; t++) {
                float acc = 0.0f;
                for (int kp = 0; kp < K; kp++) {
                    float v = d2[(size_t)(kp * G + l) * Q + (size_t)k * S + t];
                    acc = kp ? acc + v : v;
                }
                out[(size_t)(k * G + l) * S + t] = acc;
            }
    free(x);
    free(d1);
    free(sum1);
    free(d2);
}

static void check_ulq(int K, int G)
{
    const int N = K * G;
    const size_t n = (size_t)N * 256; /* two groups a partition, no padding */
    float *grads = malloc((size_t)N * n * sizeof *grads);
    float *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want);
    fill_grads(grads, (size_t)N * n, 17 + (uint64_t)N);
    sq_scheme s;
    ck_assert_int_eq(sq_scheme_preset("ulq", &s, NULL), SQ_OK);
    run_world(&s, K, G, n, grads, got);
    ref_ulq(K, G, n, grads, want);
    expect_bytes(got, want, n, G == 2 ? "ulq 2x2" : "ulq 2x4");
    free(grads);
    free(got);
    free(want);
}

START_TEST(test_ulq_2x2) { check_ulq(2, 2); }
END_TEST

START_TEST(test_ulq_2x4) { check_ulq(2, 4); }
END_TEST

/* zeropp is qw's weights and ulq's gradients, nothing else. */
START_TEST(test_zeropp_is_qw_plus_ulq)
{
    sq_scheme z, qw, ulq;
    ck_assert_int_eq(sq_scheme_preset("zeropp", &z, NULL), SQ_OK);
    ck_assert_int_eq(sq_scheme_preset("qw", &qw, NULL), SQ_OK);
    ck_assert_int_eq(sq_scheme_preset("ulq", &ulq, NULL), SQ_OK);
    /* its text is qw's weight knobs followed by ulq's gradient knobs */
    static const char *const keys[] = {"weight.", "grad."};
    for (size_t k = 0; k < sq_scheme_nknobs; k++) {
        const char *key = sq_scheme_knobs[k].key;
        const sq_scheme *from = !strncmp(key, keys[0], 7) ? &qw : &ulq;
        char a[64], b[64];
        sq_scheme_get(&z, key, a, sizeof a);
        sq_scheme_get(from, key, b, sizeof b);
        ck_assert_msg(!strcmp(a, b), "%s: %s vs %s", key, a, b);
    }
    ck_assert_int_eq(z.grad_intra.codec.round, SQ_ROUND_SR);
    ck_assert_int_eq(z.grad_intra.codec.levels, SQ_LEVELS_SDP4BIT);
    ck_assert_uint_eq(z.grad_intra.codec.group, 128);
    ck_assert_int_eq(z.grad_mode, SQ_GRAD_TWOLEVEL);
    ck_assert_int_eq(z.grad_dtype, SQ_GRAD_FP32);
    ck_assert_int_eq(sq_scheme_per_tensor(&z), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* qgZ: DeepSpeed's all_to_all_quant_reduce                                 */
/* ------------------------------------------------------------------------ */

/* The group rule, transcribed: max(shape[0], shape[1], N) groups. */
static uint64_t ref_qgz_group(const uint64_t *shape, uint64_t N)
{
    uint64_t numel = 1;
    for (int d = 0; shape[d]; d++) numel *= shape[d];
    uint64_t groups = shape[0];
    if (shape[1] > groups) groups = shape[1];
    if (N > groups) groups = N;
    return numel / groups;
}

/* qgZ on K x G with fp16 arithmetic: x = fp16(g / N); intra groups RTN,
** multiplier 8 / absmax, codes -8..7; each decoded value rounded to fp16 and
** summed in fp16 from +0 over the local peers; the sums requantized alike;
** the K pieces decoded to fp16 and summed in fp16 from +0. */
static void ref_qgz(int K, int G, size_t n, size_t g, const float *grads, float *out)
{
    const int N = K * G;
    const size_t S = n / (size_t)N, Q = (size_t)K * S;
    float *x = malloc(n * sizeof *x), *d1 = malloc((size_t)N * n * sizeof *d1);
    float *sum1 = malloc(Q * sizeof *sum1), *d2 = malloc((size_t)N * Q * sizeof *d2);
    for (int r = 0; r < N; r++) {
        for (size_t i = 0; i < n; i++) x[i] = ref_f16(grads[(size_t)r * n + i] / (float)N);
        ref_codec(x, n, g, 8.0f, -8.0f, 7.0f, 0, NULL, d1 + (size_t)r * n);
    }
    for (int k = 0; k < K; k++)
        for (int l = 0; l < G; l++) {
            for (int j = 0; j < K; j++)
                for (size_t t = 0; t < S; t++) {
                    float acc = 0.0f;
                    for (int lp = 0; lp < G; lp++)
                        acc = ref_f16(acc + ref_f16(d1[(size_t)(k * G + lp) * n +
                                                       (size_t)(j * G + l) * S + t]));
                    sum1[(size_t)j * S + t] = acc;
                }
            ref_codec(sum1, Q, g, 8.0f, -8.0f, 7.0f, 0, NULL, d2 + (size_t)(k * G + l) * Q);
        }
    for (int k = 0; k < K; k++)
        for (int l = 0; l < G; l++)
            for (size_t t = 0; t < S; t++) {
                float acc = 0.0f;
                for (int kp = 0; kp < K; kp++)
                    acc = ref_f16(acc + ref_f16(d2[(size_t)(kp * G + l) * Q + (size_t)k * S + t]));
                out[(size_t)(k * G + l) * S + t] = acc;
            }
    free(x);
    free(d1);
    free(sum1);
    free(d2);
}

static const sq_topo topo_2x2 = {2, 2};

/* Shapes (0-terminated) whose qgZ group divides the partitions. */
static const uint64_t qgz_shapes[][4] = {
    {8, 16, 0, 0},  /* cols > rows > N: 16 groups of 8 */
    {4, 64, 0, 0},  /* 64 groups of 4 */
    {2, 2, 8, 0},   /* N > rows, cols: 4 groups of 8 */
    {1, 2, 16, 0},  /* N > rows, cols again: 4 groups of 8 */
    {32, 4, 0, 0},  /* rows > cols: 32 groups of 4 */
};

START_TEST(test_qgz_reference_2x2)
{
    const uint64_t *shape = qgz_shapes[_i];
    int ndim = 0;
    uint64_t n = 1;
    while (ndim < 4 && shape[ndim]) n *= shape[ndim++];
    sq_scheme s, t;
    sq_error err = {0};
    ck_assert_int_eq(sq_scheme_preset("qgz", &s, NULL), SQ_OK);
    ck_assert_int_eq(sq_scheme_per_tensor(&s), 1);
    int rc = sq_scheme_for_tensor(&s, &topo_2x2, shape, ndim, &t, &err);
    ck_assert_msg(rc == SQ_OK, "%s", err.msg);
    ck_assert_int_eq(sq_scheme_per_tensor(&t), 0);
    const uint64_t g = ref_qgz_group(shape, 4);
    ck_assert_uint_eq(t.grad_intra.codec.group, g);
    ck_assert_uint_eq(t.grad_inter.codec.group, g);
    ck_assert_int_eq(t.grad_mode, SQ_GRAD_TWOLEVEL);
    ck_assert_int_eq(t.grad_dtype, SQ_GRAD_FP16);

    float *grads = malloc(4 * n * sizeof *grads), *got = malloc(n * sizeof *got);
    float *want = malloc(n * sizeof *want);
    fill_grads(grads, 4 * n, 99 + (uint64_t)_i);
    /* small and large values, so that fp16's rounding and subnormals show */
    for (size_t i = 0; i < 4 * n; i += 5) grads[i] *= 1e-5f;
    run_world(&t, 2, 2, n, grads, got);
    ref_qgz(2, 2, n, (size_t)g, grads, want);
    expect_bytes(got, want, n, "qgz 2x2");
    free(grads);
    free(got);
    free(want);
}
END_TEST

/* The group rule for shapes a world does not need to run. */
START_TEST(test_qgz_group_rule)
{
    static const uint64_t shapes[][4] = {
        {768, 3072, 0, 0}, {3072, 768, 0, 0}, {50304, 768, 0, 0}, {3, 5, 16, 0}, {2, 2, 64, 0},
    };
    static const sq_topo topos[] = {{2, 8}, {4, 8}, {16, 4}, {2, 2}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (size_t j = 0; j < sizeof topos / sizeof topos[0]; j++) {
            int ndim = 0;
            uint64_t n = 1;
            while (ndim < 4 && shapes[i][ndim]) n *= shapes[i][ndim++];
            const uint64_t N = (uint64_t)sq_topo_workers(&topos[j]);
            sq_scheme s, t;
            sq_error err = {0};
            ck_assert_int_eq(sq_scheme_preset("zeropp8", &s, NULL), SQ_OK);
            ck_assert_int_eq(sq_scheme_for_tensor(&s, &topos[j], shapes[i], ndim, &t, &err), SQ_OK);
            if (n % (2 * N)) {
                ck_assert_int_eq(t.grad_mode, SQ_GRAD_RING);
                continue;
            }
            ck_assert_int_eq(t.grad_mode, SQ_GRAD_TWOLEVEL);
            ck_assert_uint_eq(t.grad_intra.codec.group, ref_qgz_group(shapes[i], N));
            ck_assert_uint_eq(t.grad_inter.codec.group, ref_qgz_group(shapes[i], N));
            ck_assert_int_eq(t.grad_intra.codec.round, SQ_ROUND_RTN);
            ck_assert_int_eq(t.grad_intra.codec.levels, SQ_LEVELS_DEEPSPEED);
            ck_assert_int_eq(t.grad_intra.bits, 4);
        }
}
END_TEST

/* The fallbacks: a 1-D tensor, numel not a multiple of 2N, one node. */
static void expect_fallback(const sq_topo *topo, const uint64_t *shape, int ndim)
{
    sq_scheme s, t;
    sq_error err = {0};
    ck_assert_int_eq(sq_scheme_preset("qgz", &s, NULL), SQ_OK);
    ck_assert_int_eq(sq_scheme_for_tensor(&s, topo, shape, ndim, &t, &err), SQ_OK);
    ck_assert_int_eq(t.grad_mode, SQ_GRAD_RING);
    ck_assert_int_eq(t.grad_intra.bits, 32);
    ck_assert_int_eq(t.grad_inter.bits, 32);
    ck_assert_int_eq(t.grad_dtype, SQ_GRAD_FP32);
    ck_assert_int_eq(t.grad_fallback, SQ_FALLBACK_NONE);
    ck_assert_int_eq(sq_scheme_per_tensor(&t), 0);
    ck_assert_int_eq(sq_scheme_validate(&t, &err), SQ_OK);
    /* and it runs: the world reduces it as the baseline's fp32 ring */
    uint64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    sq_scheme base;
    ck_assert_int_eq(sq_scheme_preset("baseline", &base, NULL), SQ_OK);
    const int N = sq_topo_workers(topo);
    const uint64_t unit = 8 * (uint64_t)N;
    if (n % unit) return; /* padded: compare only where no padding */
    float *grads = malloc((size_t)N * n * sizeof *grads), *a = malloc(n * sizeof *a);
    float *b = malloc(n * sizeof *b);
    fill_grads(grads, (size_t)N * n, 5);
    run_world(&t, topo->nodes, topo->per_node, n, grads, a);
    run_world(&base, topo->nodes, topo->per_node, n, grads, b);
    expect_bytes(a, b, n, "fallback");
    free(grads);
    free(a);
    free(b);
}

START_TEST(test_qgz_fallbacks)
{
    const uint64_t one_d[] = {1024};
    expect_fallback(&topo_2x2, one_d, 1);
    const uint64_t odd[] = {3, 12}; /* 36 % 8 != 0 */
    expect_fallback(&topo_2x2, odd, 2);
    const uint64_t odd2[] = {6, 6, 1}; /* 36 again, 3-D */
    expect_fallback(&topo_2x2, odd2, 3);
    const sq_topo one_node = {1, 4};
    const uint64_t fine[] = {8, 16}; /* quantized on 2x2, not on one node */
    expect_fallback(&one_node, fine, 2);
    /* without the fallback a 1-D tensor has no qgZ group */
    sq_scheme s, t;
    sq_error err = {0};
    ck_assert_int_eq(sq_scheme_preset("qgz", &s, NULL), SQ_OK);
    ck_assert_int_eq(sq_scheme_set(&s, "grad.fallback=none", &err), SQ_OK);
    ck_assert_int_eq(sq_scheme_for_tensor(&s, &topo_2x2, one_d, 1, &t, &err), SQ_ERR_SPEC);
    ck_assert_msg(strstr(err.msg, "grad.fallback=qgz"), "%s", err.msg);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* qwZ: CUDAQuantizer                                                       */
/* ------------------------------------------------------------------------ */

/* The block count of CUDAQuantizer.quantize, transcribed line by line
** (target 8000; the partition rounded up to a multiple of 8, see docs/schemes.md). */
static uint64_t ref_qwz_groups(uint64_t numel)
{
    uint64_t groups = (numel + 7999) / 8000;
    while (groups < numel) {
        if (numel % (8 * groups) == 0) break;
        groups += 1;
    }
    while (1) {
        if (numel % (8 * groups * 2) == 0 && numel / groups > 8000)
            groups *= 2;
        else
            break;
    }
    return groups;
}

START_TEST(test_qwz_block_rule)
{
    /* (numel, workers): partitions of ceil(numel / N) */
    static const uint64_t cases[][2] = {
        {768 * 3072, 8},  {50304 * 768, 16}, {768, 4},  {1000, 8},   {4096, 1},
        {16000 * 8, 8},   {100003, 4},       {24, 3},   {8000, 1},   {8008, 1},
        {64000, 1},       {65536, 2},        {999, 2},  {768 * 768 * 4, 32},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const uint64_t numel = cases[i][0], N = cases[i][1];
        sq_topo topo = {1, (int)N};
        sq_scheme s, t;
        sq_error err = {0};
        ck_assert_int_eq(sq_scheme_preset("qwz", &s, NULL), SQ_OK);
        ck_assert_int_eq(sq_scheme_for_tensor(&s, &topo, &numel, 1, &t, &err), SQ_OK);
        uint64_t part = (numel + N - 1) / N;
        part = (part + 7) / 8 * 8;
        const uint64_t groups = ref_qwz_groups(part);
        ck_assert_msg(part % (8 * groups) == 0 && part / groups < 16000, "case %zu", i);
        ck_assert_msg(t.weight.codec.group == part / groups, "numel %llu on %llu: group %llu, want %llu",
                      (unsigned long long)numel, (unsigned long long)N,
                      (unsigned long long)t.weight.codec.group,
                      (unsigned long long)(part / groups));
        ck_assert_int_eq(t.weight.bits, 8);
        ck_assert_int_eq(t.weight.codec.round, SQ_ROUND_RTN);
        ck_assert_int_eq(t.weight.codec.levels, SQ_LEVELS_DEEPSPEED);
        /* qwz leaves the gradients to the baseline's fp32 ring */
        ck_assert_int_eq(t.grad_mode, SQ_GRAD_RING);
    }
}
END_TEST

/* The qwZ codec of a resolved scheme: int8, multiplier 128 / absmax,
** codes -128..127, RTN, fp32 scales, over a partition in blocks. */
START_TEST(test_qwz_encode_decode)
{
    const uint64_t shape[] = {96, 1000}; /* 96000 on 4: partitions of 24000 */
    const sq_topo topo = {2, 2};
    sq_scheme s, t;
    sq_error err = {0};
    ck_assert_int_eq(sq_scheme_preset("zeropp8", &s, NULL), SQ_OK);
    ck_assert_int_eq(sq_scheme_for_tensor(&s, &topo, shape, 2, &t, &err), SQ_OK);
    const uint64_t part = 24000, g = part / ref_qwz_groups(part);
    ck_assert_uint_eq(t.weight.codec.group, g);
    float *x = malloc(part * sizeof *x), *got = malloc(part * sizeof *got);
    float *want = malloc(part * sizeof *want);
    fill_grads(x, part, 31);
    x[7] = 0.0f;
    sq_qbuf q;
    ck_assert_int_eq(sq_qbuf_alloc(&t.weight.codec, part, &q), SQ_OK);
    ck_assert_int_eq(sq_quantize(&t.weight.codec, x, part, NULL, &q), SQ_OK);
    ck_assert_int_eq(sq_dequantize(&t.weight.codec, &q, part, got), SQ_OK);
    ref_codec(x, part, (size_t)g, 128.0f, -128.0f, 127.0f, 0, NULL, want);
    expect_bytes(got, want, part, "qwz");
    /* the codes themselves: the group's absmax element is +127 or -128 */
    ck_assert_uint_eq(sq_codec_scale_bytes(&t.weight.codec, part), 4 * (part / g));
    sq_qbuf_free(&q);
    free(x);
    free(got);
    free(want);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Per-tensor schemes and the world                                         */
/* ------------------------------------------------------------------------ */

START_TEST(test_world_refuses_rules)
{
    static const char *const names[] = {"zeropp8", "qgz", "qwz"};
    for (size_t i = 0; i < 3; i++) {
        sq_world_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.topo = topo_2x2;
        ck_assert_int_eq(sq_scheme_preset(names[i], &cfg.scheme, NULL), SQ_OK);
        cfg.elements = 4096;
        cfg.dry = 1;
        sq_world *w = NULL;
        sq_error err = {0};
        ck_assert_int_eq(sq_world_open(&cfg, &w, &err), SQ_ERR_SPEC);
        ck_assert_ptr_null(w);
        ck_assert_msg(strstr(err.msg, "needs a tensor shape") && strstr(err.msg, "per-param"),
                      "%s: %s", names[i], err.msg);
    }
}
END_TEST

START_TEST(test_for_tensor_identity)
{
    /* no per-tensor rules: the scheme itself */
    for (size_t p = 0; p < sq_scheme_npresets; p++) {
        sq_scheme s, t;
        sq_error err = {0};
        ck_assert_int_eq(sq_scheme_preset(sq_scheme_presets[p], &s, NULL), SQ_OK);
        const uint64_t shape[] = {64, 64};
        ck_assert_int_eq(sq_scheme_for_tensor(&s, &topo_2x2, shape, 2, &t, &err), SQ_OK);
        char a[SQ_SCHEME_STRLEN], b[SQ_SCHEME_STRLEN];
        sq_scheme_format(&s, a, sizeof a);
        sq_scheme_format(&t, b, sizeof b);
        if (!sq_scheme_per_tensor(&s)) ck_assert_str_eq(a, b);
        else ck_assert_int_eq(sq_scheme_per_tensor(&t), 0);
    }
    sq_scheme s, t;
    sq_error err = {0};
    ck_assert_int_eq(sq_scheme_preset("zeropp8", &s, NULL), SQ_OK);
    const uint64_t zero[] = {0, 4};
    ck_assert_int_eq(sq_scheme_for_tensor(&s, &topo_2x2, zero, 2, &t, &err), SQ_ERR_ARG);
    ck_assert_int_eq(sq_scheme_for_tensor(&s, &topo_2x2, zero, 0, &t, &err), SQ_ERR_ARG);
    ck_assert_int_eq(sq_scheme_for_tensor(NULL, &topo_2x2, zero, 2, &t, &err), SQ_ERR_ARG);
}
END_TEST

/* The knobs of the rules: set, printed, refused where they do not belong. */
START_TEST(test_rule_knobs)
{
    sq_scheme s;
    sq_error err = {0};
    char v[64];
    ck_assert_int_eq(sq_scheme_preset("tlq", &s, NULL), SQ_OK);
    ck_assert_int_eq(sq_scheme_per_tensor(&s), 0);
    ck_assert_int_eq(sq_scheme_set(&s, "grad.group=qgz", &err), SQ_OK);
    ck_assert_int_eq(s.grad_intra.rule, SQ_GROUP_QGZ);
    ck_assert_int_eq(s.grad_inter.rule, SQ_GROUP_QGZ);
    sq_scheme_get(&s, "grad.inter.group", v, sizeof v);
    ck_assert_str_eq(v, "qgz");
    ck_assert_int_eq(sq_scheme_per_tensor(&s), 1);
    ck_assert_int_eq(sq_scheme_set(&s, "grad.group=256", &err), SQ_OK);
    ck_assert_int_eq(s.grad_intra.rule, SQ_GROUP_FIXED);
    ck_assert_int_eq(sq_scheme_per_tensor(&s), 0);
    ck_assert_int_eq(sq_scheme_set(&s, "weight.group=qgz", &err), SQ_ERR_SPEC);
    ck_assert_msg(strstr(err.msg, "qwz"), "%s", err.msg);
    ck_assert_int_eq(sq_scheme_set(&s, "grad.group=qwz", &err), SQ_ERR_SPEC);
    ck_assert_int_eq(sq_scheme_set(&s, "grad.dtype=fp8", &err), SQ_ERR_SPEC);
    ck_assert_int_eq(sq_scheme_set(&s, "grad.fallback=yes", &err), SQ_ERR_SPEC);
    /* fp16 arithmetic needs quantized hops without a transform */
    ck_assert_int_eq(sq_scheme_set(&s, "grad.dtype=fp16", &err), SQ_OK);
    ck_assert_int_eq(sq_scheme_validate(&s, &err), SQ_OK);
    ck_assert_int_eq(sq_scheme_preset("tlqhs", &s, NULL), SQ_OK);
    ck_assert_int_eq(sq_scheme_set(&s, "grad.dtype=fp16", &err), SQ_OK);
    ck_assert_int_eq(sq_scheme_validate(&s, &err), SQ_ERR_SPEC);
    ck_assert_msg(strstr(err.msg, "grad.dtype=fp16"), "%s", err.msg);
    ck_assert_int_eq(sq_scheme_preset("baseline", &s, NULL), SQ_OK);
    ck_assert_int_eq(sq_scheme_set(&s, "grad.dtype=fp16", &err), SQ_OK);
    ck_assert_int_eq(sq_scheme_validate(&s, &err), SQ_ERR_SPEC);
    /* the fallback alone is a per-tensor rule */
    ck_assert_int_eq(sq_scheme_preset("tlq", &s, NULL), SQ_OK);
    ck_assert_int_eq(sq_scheme_set(&s, "grad.fallback=qgz", &err), SQ_OK);
    ck_assert_int_eq(sq_scheme_per_tensor(&s), 1);
    sq_scheme_get(&s, "grad.fallback", v, sizeof v);
    ck_assert_str_eq(v, "qgz");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("presets");
    TCase *tu = tcase_create("ulq");
    tcase_set_timeout(tu, 60);
    tcase_add_test(tu, test_ulq_2x2);
    tcase_add_test(tu, test_ulq_2x4);
    tcase_add_test(tu, test_zeropp_is_qw_plus_ulq);
    suite_add_tcase(s, tu);

    TCase *tg = tcase_create("qgz");
    tcase_set_timeout(tg, 60);
    tcase_add_loop_test(tg, test_qgz_reference_2x2, 0,
                        (int)(sizeof qgz_shapes / sizeof qgz_shapes[0]));
    tcase_add_test(tg, test_qgz_group_rule);
    tcase_add_test(tg, test_qgz_fallbacks);
    suite_add_tcase(s, tg);

    TCase *tw = tcase_create("qwz");
    tcase_add_test(tw, test_qwz_block_rule);
    tcase_add_test(tw, test_qwz_encode_decode);
    suite_add_tcase(s, tw);

    TCase *tr = tcase_create("rules");
    tcase_add_test(tr, test_world_refuses_rules);
    tcase_add_test(tr, test_for_tensor_identity);
    tcase_add_test(tr, test_rule_knobs);
    suite_add_tcase(s, tr);
    return sqt_run(s);
}
