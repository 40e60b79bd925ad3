/*
** check_world.c -- the emulated sharded world: exact collectives with
** quantization off, byte-for-byte agreement with straight-line references
** of the quantized paths, the closed-form traffic of SDP4Bit's section 2.4,
** qWD's identical replicas, and the same bytes whatever the thread count.
**
** The references here are written from the algorithm's description (spec
** section 2.3, docs/schemes.md) with the core's codec calls and
** loops over single groups; they share no code with src/world.
*/
#include "check_util.h"
#include "shardq/codec.h"
#include "sq_hd.h"
#include "shardq/world.h"
#include "world_util.h"
#include "world/world_internal.h" /* a replica changed behind the world's back */

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Fixtures                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct topo3 {
    int K, G, pipe;
} topo3;

/* The topologies the issue names; (1,4), (4,1) and (1,1) exercise the
** fallbacks. */
static const topo3 topos[] = {{2, 4, 1}, {2, 4, 2}, {3, 2, 4}, {2, 8, 8},
                              {1, 4, 1}, {4, 1, 2}, {1, 1, 1}};
#define NTOPOS (sizeof topos / sizeof topos[0])

static sq_world *open_world(int K, int G, const char *preset, const char *const *sets,
                            uint64_t n, uint64_t seed, int dry)
{
    sq_world_config cfg = sqt_world_preset(K, G, preset);
    sq_error err = {0};
    for (int i = 0; sets && sets[i]; i++)
        ck_assert_msg(sq_scheme_set(&cfg.scheme, sets[i], &err) == SQ_OK, "%s", err.msg);
    if (sq_scheme_per_tensor(&cfg.scheme)) {
        /* per-tensor rules (zeropp8, qgz, qwz): the model as one 1-D tensor */
        const uint64_t shape[1] = {n};
        sq_scheme one;
        ck_assert_int_eq(sq_scheme_for_tensor(&cfg.scheme, &cfg.topo, shape, 1, &one, &err), SQ_OK);
        cfg.scheme = one;
    }
    cfg.elements = n;
    cfg.seed = seed;
    cfg.dry = dry;
    sq_world *w = NULL;
    int rc = sq_world_open(&cfg, &w, &err);
    ck_assert_msg(rc == SQ_OK, "open %dx%d %s: %s", K, G, preset, err.msg);
    return w;
}

/* Worker r's test gradient: structured values of very different scales. */
static float *make_grads(int N, uint64_t n, uint64_t seed)
{
    float *x = malloc((size_t)N * n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (int r = 0; r < N; r++) sqt_fill(x + (size_t)r * n, n, seed * 1000 + (uint64_t)r);
    return x;
}

/* x divided by N in fp32 and padded with zeros to P elements, per worker:
** what the world's workers hold after put_grad with a mean. */
static float *scaled_padded(const float *x, int N, uint64_t n, uint64_t P, int mean)
{
    float *y = calloc((size_t)N * P, sizeof *y);
    ck_assert_ptr_nonnull(y);
    for (int r = 0; r < N; r++)
        for (uint64_t i = 0; i < n; i++)
            y[(size_t)r * P + i] = mean && N > 1 ? x[(size_t)r * n + i] / (float)N : x[(size_t)r * n + i];
    return y;
}

static void put_all(sq_world *w, const float *x, uint64_t n)
{
    for (int r = 0; r < sq_world_workers(w); r++)
        ck_assert_msg(sq_world_put_grad(w, r, x + (size_t)r * n) == SQ_OK, "%s", sq_world_error(w));
}

/* Every worker's reduced shard, concatenated: the padded result. */
static float *get_all(sq_world *w)
{
    int N = sq_world_workers(w);
    uint64_t S = sq_world_shard(w);
    float *out = malloc((size_t)N * S * sizeof *out);
    ck_assert_ptr_nonnull(out);
    for (int r = 0; r < N; r++)
        ck_assert_msg(sq_world_get_grad_shard(w, r, out + (size_t)r * S) == SQ_OK, "%s",
                      sq_world_error(w));
    return out;
}

/* ------------------------------------------------------------------------ */
/* Quantization off: the exact result, in the documented order              */
/* ------------------------------------------------------------------------ */

/* The fp32 sum of element i in the order the path documents. */
static float ordered_sum(const float *y, int K, int G, uint64_t P, uint64_t S, uint64_t i,
                         sq_grad_mode path)
{
    int N = K * G;
    if (path == SQ_GRAD_NONE) return y[i];
    if (path == SQ_GRAD_A2A) {
        float s = y[i];
        for (int r = 1; r < N; r++) s = s + y[(size_t)r * P + i];
        return s;
    }
    if (path == SQ_GRAD_RING) {
        int c = (int)(i / S);
        float s = y[(size_t)((c + 1) % N) * P + i];
        for (int j = 2; j <= N; j++) s = s + y[(size_t)((c + j) % N) * P + i];
        return s;
    }
    /* two levels: each node sums its local workers, then the nodes are summed */
    float total = 0;
    for (int k = 0; k < K; k++) {
        float s = y[(size_t)(k * G) * P + i];
        for (int l = 1; l < G; l++) s = s + y[(size_t)(k * G + l) * P + i];
        total = k ? total + s : s;
    }
    return total;
}

static void check_exact(const char *preset, const char *const *sets, sq_grad_mode want_mode)
{
    const uint64_t n = 30011; /* prime: every topology pads */
    for (size_t t = 0; t < NTOPOS; t++) {
        int K = topos[t].K, G = topos[t].G, N = K * G;
        char pipe[32];
        snprintf(pipe, sizeof pipe, "grad.pipe=%d", topos[t].pipe);
        const char *all[8];
        int m = 0;
        for (; sets && sets[m]; m++) all[m] = sets[m];
        all[m++] = pipe;
        all[m] = NULL;
        sq_world *w = open_world(K, G, preset, all, n, 7, 0);
        uint64_t P = sq_world_padded(w), S = sq_world_shard(w);
        sq_grad_mode path = sq_world_grad_path(w);
        if (N == 1) ck_assert_int_eq(path, SQ_GRAD_NONE);
        else if (want_mode == SQ_GRAD_TWOLEVEL && (K == 1 || G == 1)) ck_assert_int_eq(path, SQ_GRAD_A2A);
        else ck_assert_int_eq(path, want_mode);
        ck_assert_uint_eq(P % (uint64_t)N, 0);
        ck_assert_uint_ge(P, n);

        float *x = make_grads(N, n, 3 + t);
        put_all(w, x, n);
        ck_assert_msg(sq_world_reduce_grads(w, 1) == SQ_OK, "%s", sq_world_error(w));
        float *got = get_all(w);
        float *y = scaled_padded(x, N, n, P, 1);
        int bf16 = sq_world_single_wire(w)->bits == 16 && path == SQ_GRAD_RING;
        for (uint64_t i = 0; i < P; i++) {
            float want;
            if (bf16) {
                /* every partial sum crosses the wire as bf16 */
                int c = (int)(i / S);
                float s = y[(size_t)((c + 1) % N) * P + i];
                for (int j = 2; j <= N; j++)
                    s = sq_bf16_to_f32(sq_f32_to_bf16(s)) + y[(size_t)((c + j) % N) * P + i];
                want = s;
            } else {
                want = ordered_sum(y, K, G, P, S, i, path);
            }
            SQT_CHECK(sqt_bits(got[i]) == sqt_bits(want),
                      "%s %dx%d pipe %d: element %llu: got %a, want %a", preset, K, G,
                      topos[t].pipe, (unsigned long long)i, got[i], want);
            /* and against fp64: a sum of N fp32 terms is within N ulps */
            double exact = 0;
            for (int r = 0; r < N; r++) exact += i < n ? (double)x[(size_t)r * n + i] : 0.0;
            exact /= N;
            double mag = 0;
            for (int r = 0; r < N; r++) mag += i < n ? fabs((double)x[(size_t)r * n + i]) / N : 0;
            /* N fp32 roundings of partial sums, each within half an ulp of the
            ** magnitude sum; bf16 partial sums: 2^-9 each */
            double tol = (N + 1) * (bf16 ? 0x1p-8 : 0x1p-23) * mag + 1e-38;
            SQT_CHECK(fabs((double)got[i] - exact) <= tol,
                      "%s %dx%d: element %llu: %.9g vs fp64 %.9g", preset, K, G,
                      (unsigned long long)i, got[i], exact);
            SQT_CHECK(i < n || got[i] == 0.0f, "padding element %llu is %g", (unsigned long long)i,
                      got[i]);
        }
        free(x), free(y), free(got);
        sq_world_close(w);
    }
}

START_TEST(test_exact_ring)
{
    check_exact("baseline", NULL, SQ_GRAD_RING);
}
END_TEST

START_TEST(test_exact_ring_bf16)
{
    static const char *const sets[] = {"grad.bits=16", NULL};
    check_exact("baseline", sets, SQ_GRAD_RING);
}
END_TEST

START_TEST(test_exact_a2a)
{
    static const char *const sets[] = {"grad.mode=a2a", "grad.bits=32", NULL};
    check_exact("baseline", sets, SQ_GRAD_A2A);
}
END_TEST

START_TEST(test_exact_twolevel)
{
    static const char *const sets[] = {"grad.bits=32", NULL};
    check_exact("tlq", sets, SQ_GRAD_TWOLEVEL);
}
END_TEST

/* With fp32 weights on the wire the all-gather is a copy: every worker ends
** with the master weights bit for bit; with bf16, with their bf16 rounding. */
START_TEST(test_exact_gather)
{
    const uint64_t n = 20011;
    for (int bits = 16; bits <= 32; bits += 16)
        for (size_t t = 0; t < NTOPOS; t++) {
            int K = topos[t].K, G = topos[t].G, N = K * G;
            char set[32];
            snprintf(set, sizeof set, "weight.bits=%d", bits);
            const char *sets[] = {set, NULL};
            sq_world *w = open_world(K, G, "baseline", sets, n, 1, 0);
            uint64_t S = sq_world_shard(w), P = sq_world_padded(w);
            float *w0 = make_grads(1, n, 11), *m = calloc(P, sizeof *m), *got = malloc(n * sizeof *got);
            ck_assert_int_eq(sq_world_init_weights(w, w0), SQ_OK);
            for (uint64_t i = 0; i < n; i++) m[i] = w0[i] * 0.5f + 1.0f;
            for (int r = 0; r < N; r++)
                ck_assert_msg(sq_world_put_master(w, r, m + (uint64_t)r * S) == SQ_OK, "%s",
                              sq_world_error(w));
            ck_assert_int_eq(sq_world_gather_weights(w, 1), SQ_OK);
            for (int r = 0; r < N; r++) {
                ck_assert_int_eq(sq_world_get_weights(w, r, got), SQ_OK);
                for (uint64_t i = 0; i < n; i++) {
                    /* one worker communicates nothing: w-hat is the master copy */
                    float want = bits == 32 || N == 1 ? m[i] : sq_bf16_to_f32(sq_f32_to_bf16(m[i]));
                    SQT_CHECK(sqt_bits(got[i]) == sqt_bits(want), "bits %d %dx%d worker %d elem %llu",
                              bits, K, G, r, (unsigned long long)i);
                }
            }
            free(w0), free(m), free(got);
            sq_world_close(w);
        }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Quantization on: straight-line references                                */
/* ------------------------------------------------------------------------ */

/* A quantized buffer on the host, with group-granular copies. */
typedef struct hq {
    sq_codec c;
    uint64_t n;
    sq_qbuf q;
} hq;

static void hq_alloc(hq *h, const sq_codec *c, uint64_t n)
{
    h->c = *c;
    h->n = n;
    ck_assert_int_eq(sq_qbuf_alloc(c, n, &h->q), SQ_OK);
}

static size_t meta_size(const sq_codec *c) { return c->scale == SQ_SCALE_FP32 ? 4 : 2; }

/* Copies group gs of src to group gd of dst (codes, scale, offset). */
static void copy_group(hq *dst, uint64_t gd, const hq *src, uint64_t gs)
{
    uint64_t g = src->c.group, cb = g * (uint64_t)src->c.bits / 8; /* whole bytes in these tests */
    memcpy(dst->q.codes + gd * cb, src->q.codes + gs * cb, cb);
    size_t ms = meta_size(&src->c);
    memcpy((char *)dst->q.scales + gd * ms, (char *)src->q.scales + gs * ms, ms);
    if (src->c.kind == SQ_KIND_MINMAX)
        memcpy((char *)dst->q.offsets + gd * ms, (char *)src->q.offsets + gs * ms, ms);
}

/* SDP4Bit's two-level reduce-scatter, written straight from spec section
** 2.3, one group at a time; returns the padded result (all partitions). */
static float *ref_twolevel(const sq_scheme *s, int K, int G, const float *y, uint64_t P,
                           uint64_t seed, uint32_t step)
{
    int N = K * G, pipe = s->pipe;
    const sq_codec *ci = &s->grad_intra.codec, *co = &s->grad_inter.codec;
    uint64_t g = ci->group, X = P / (g * (uint64_t)N * (uint64_t)pipe), Q = P / (uint64_t)G;
    hq *enc = calloc((size_t)N, sizeof *enc), *swz = calloc((size_t)N, sizeof *swz);
    hq *req = calloc((size_t)N, sizeof *req);
    for (int r = 0; r < N; r++) {
        hq_alloc(&enc[r], ci, P);
        hq_alloc(&swz[r], ci, P);
        sq_rng_key key = {seed, step, (uint32_t)r, SQ_SITE_GRAD_INTRA};
        ck_assert_int_eq(sq_quantize(ci, y + (size_t)r * P, P, &key, &enc[r].q), SQ_OK);
        for (int z = 0; z < N; z++)
            for (int yy = 0; yy < pipe; yy++)
                for (uint64_t x = 0; x < X; x++) {
                    uint64_t in = (uint64_t)z * pipe * X + (uint64_t)yy * X + x;
                    uint64_t out = ((uint64_t)yy * G * K + (uint64_t)(z % G) * K + (uint64_t)(z / G)) * X + x;
                    copy_group(&swz[r], out, &enc[r], in);
                }
    }
    /* receiver (k, l): chunk j = what local peer (k, j) sent, slice after slice */
    sq_qbuf *chunks = calloc((size_t)(G > K ? G : K), sizeof *chunks);
    hq *parts = calloc((size_t)(G > K ? G : K), sizeof *parts);
    for (int r = 0; r < N; r++) {
        int k = r / G, l = r % G;
        for (int j = 0; j < G; j++) {
            hq_alloc(&parts[j], ci, Q);
            uint64_t d = 0;
            for (int yy = 0; yy < pipe; yy++)
                for (uint64_t x = 0; x < (uint64_t)K * X; x++)
                    copy_group(&parts[j], d++, &swz[k * G + j],
                               ((uint64_t)yy * G * K + (uint64_t)l * K) * X + x);
            chunks[j] = parts[j].q;
        }
        hq_alloc(&req[r], co, Q);
        sq_rng_key key = {seed, step, (uint32_t)r, SQ_SITE_GRAD_INTER};
        ck_assert_int_eq(sq_dequant_sum_requant(ci, chunks, G, Q, co, &key, &req[r].q), SQ_OK);
        for (int j = 0; j < G; j++) sq_qbuf_free(&parts[j].q);
    }
    /* receiver (k, l): chunk from node k2 = piece k of (k2, l)'s requantized sum */
    uint64_t S = P / (uint64_t)N;
    float *out = malloc(P * sizeof *out);
    for (int r = 0; r < N; r++) {
        int k = r / G, l = r % G;
        for (int k2 = 0; k2 < K; k2++) {
            hq_alloc(&parts[k2], co, S);
            uint64_t d = 0;
            for (int yy = 0; yy < pipe; yy++)
                for (uint64_t x = 0; x < X; x++)
                    copy_group(&parts[k2], d++, &req[k2 * G + l], ((uint64_t)yy * K + (uint64_t)k) * X + x);
            chunks[k2] = parts[k2].q;
        }
        ck_assert_int_eq(sq_dequant_sum(co, chunks, K, S, out + (size_t)r * S), SQ_OK);
        for (int k2 = 0; k2 < K; k2++) sq_qbuf_free(&parts[k2].q);
    }
    for (int r = 0; r < N; r++) {
        sq_qbuf_free(&enc[r].q);
        sq_qbuf_free(&swz[r].q);
        sq_qbuf_free(&req[r].q);
    }
    free(enc), free(swz), free(req), free(chunks), free(parts);
    return out;
}

START_TEST(test_twolevel_reference)
{
    static const topo3 tl[] = {{2, 4, 1}, {2, 4, 2}, {3, 2, 4}, {2, 8, 8}, {4, 2, 1}};
    static const char *const presets[] = {"sdp4bit", "tlq", "ulq"};
    const uint64_t n = 40009;
    for (size_t p = 0; p < 3; p++)
        for (size_t t = 0; t < sizeof tl / sizeof tl[0]; t++) {
            int K = tl[t].K, G = tl[t].G, N = K * G;
            char pipe[32];
            snprintf(pipe, sizeof pipe, "grad.pipe=%d", tl[t].pipe);
            const char *sets[] = {pipe, NULL};
            sq_world *w = open_world(K, G, presets[p], sets, n, 99, 0);
            ck_assert_int_eq(sq_world_grad_path(w), SQ_GRAD_TWOLEVEL);
            uint64_t P = sq_world_padded(w);
            float *x = make_grads(N, n, 5 + t);
            float *y = scaled_padded(x, N, n, P, 1);
            for (uint32_t step = 1; step <= 2; step++) {
                put_all(w, x, n);
                ck_assert_msg(sq_world_reduce_grads(w, step) == SQ_OK, "%s", sq_world_error(w));
                float *got = get_all(w);
                float *want = ref_twolevel(sq_world_scheme(w), K, G, y, P, 99, step);
                char msg[256];
                ck_assert_msg(sqt_bytes_equal(got, want, P * sizeof(float), msg, sizeof msg),
                              "%s %dx%d pipe %d step %u: %s", presets[p], K, G, tl[t].pipe, step, msg);
                free(got), free(want);
            }
            free(x), free(y);
            sq_world_close(w);
        }
}
END_TEST

/* QSDP's single level (and the fallbacks of the two-level presets): the
** whole gradient quantized once, partition z dequantized and summed by
** worker z in worker order. */
START_TEST(test_a2a_reference)
{
    static const struct {
        int K, G;
        const char *preset;
    } cases[] = {{2, 4, "qsdp"}, {3, 1, "qsdp"}, {1, 4, "sdp4bit"}, {4, 1, "sdp4bit"}, {1, 8, "ulq"}};
    const uint64_t n = 25013;
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        int K = cases[t].K, G = cases[t].G, N = K * G;
        sq_world *w = open_world(K, G, cases[t].preset, NULL, n, 5, 0);
        ck_assert_int_eq(sq_world_grad_path(w), SQ_GRAD_A2A);
        const sq_scheme *s = sq_world_scheme(w);
        /* SDP4Bit: one node keeps the 8-bit intra level, one worker per
        ** node the 4-bit inter level */
        const sq_codec *c = K > 1 ? &s->grad_inter.codec : &s->grad_intra.codec;
        ck_assert_ptr_eq(sq_world_single_wire(w), K > 1 ? &s->grad_inter : &s->grad_intra);
        uint64_t P = sq_world_padded(w), S = sq_world_shard(w);
        float *x = make_grads(N, n, 17 + t), *y = scaled_padded(x, N, n, P, 1);
        put_all(w, x, n);
        ck_assert_int_eq(sq_world_reduce_grads(w, 3), SQ_OK);
        float *got = get_all(w), *want = malloc(P * sizeof *want);
        hq *enc = calloc((size_t)N, sizeof *enc);
        for (int r = 0; r < N; r++) {
            hq_alloc(&enc[r], c, P);
            sq_rng_key key = {5, 3, (uint32_t)r, SQ_SITE_GRAD_SINGLE};
            ck_assert_int_eq(sq_quantize(c, y + (size_t)r * P, P, &key, &enc[r].q), SQ_OK);
        }
        sq_qbuf *chunks = calloc((size_t)N, sizeof *chunks);
        hq *parts = calloc((size_t)N, sizeof *parts);
        for (int z = 0; z < N; z++) {
            for (int r = 0; r < N; r++) {
                hq_alloc(&parts[r], c, S);
                for (uint64_t gi = 0; gi < S / c->group; gi++)
                    copy_group(&parts[r], gi, &enc[r], (uint64_t)z * (S / c->group) + gi);
                chunks[r] = parts[r].q;
            }
            ck_assert_int_eq(sq_dequant_sum(c, chunks, N, S, want + (size_t)z * S), SQ_OK);
            for (int r = 0; r < N; r++) sq_qbuf_free(&parts[r].q);
        }
        char msg[256];
        ck_assert_msg(sqt_bytes_equal(got, want, P * sizeof(float), msg, sizeof msg), "%s %dx%d: %s",
                      cases[t].preset, K, G, msg);
        for (int r = 0; r < N; r++) sq_qbuf_free(&enc[r].q);
        free(enc), free(chunks), free(parts), free(x), free(y), free(got), free(want);
        sq_world_close(w);
    }
}
END_TEST

/* The weight path of qW and qWD: each shard quantized by its owner (Philox
** index = place in the shard), w-hat rebuilt from the gathered bytes; with
** weight.recon=bf16 (the default) by the core's bf16 operations from a bf16
** w-hat, with weight.recon=fp32 by the fp32 ones from w0 itself. */
START_TEST(test_weight_reference)
{
    static const char *const presets[] = {"qw", "qwd", "zeropp8", "qsdp"};
    static const char *const fp32[] = {"weight.recon=fp32", NULL};
    const uint64_t n = 50021;
    for (size_t p = 0; p < 8; p++) {
        int K = 2, G = 3, N = 6, bf16 = p < 4;
        sq_world *w = open_world(K, G, presets[p % 4], bf16 ? NULL : fp32, n, 21, 0);
        const sq_scheme *s = sq_world_scheme(w);
        const sq_codec *c = &s->weight.codec;
        uint64_t P = sq_world_padded(w), S = sq_world_shard(w);
        ck_assert_uint_eq(S % c->group, 0);
        float *w0 = make_grads(1, n, 31), *m = calloc(P, sizeof *m), *ref = calloc(P, sizeof *ref);
        float *got = malloc(n * sizeof *got);
        for (uint64_t i = 0; i < n; i++) ref[i] = bf16 ? sq_bf16_to_f32(sq_f32_to_bf16(w0[i])) : w0[i];
        ck_assert_int_eq(sq_world_init_weights(w, w0), SQ_OK);
        hq all;
        hq_alloc(&all, c, P);
        for (uint32_t step = 1; step <= 3; step++) {
            for (uint64_t i = 0; i < n; i++) m[i] = w0[i] * (1.0f + 0.01f * (float)step);
            for (int r = 0; r < N; r++) {
                ck_assert_int_eq(sq_world_put_master(w, r, m + (uint64_t)r * S), SQ_OK);
                hq one;
                hq_alloc(&one, c, S);
                sq_rng_key key = {21, step, (uint32_t)r, SQ_SITE_WEIGHT};
                if (s->weight_mode == SQ_WEIGHT_DIFF)
                    ck_assert_int_eq((bf16 ? sq_quantize_diff_bf16 : sq_quantize_diff)(
                                         c, m + (uint64_t)r * S, ref + (uint64_t)r * S, S, &key,
                                         &one.q), SQ_OK);
                else
                    ck_assert_int_eq((bf16 ? sq_quantize_bf16 : sq_quantize)(
                                         c, m + (uint64_t)r * S, S, &key, &one.q), SQ_OK);
                for (uint64_t gi = 0; gi < S / c->group; gi++)
                    copy_group(&all, (uint64_t)r * (S / c->group) + gi, &one, gi);
                sq_qbuf_free(&one.q);
            }
            if (s->weight_mode == SQ_WEIGHT_DIFF)
                ck_assert_int_eq((bf16 ? sq_dequantize_add_bf16 : sq_dequantize_add)(
                                     c, &all.q, ref, P, ref), SQ_OK);
            else
                ck_assert_int_eq((bf16 ? sq_dequantize_bf16 : sq_dequantize)(c, &all.q, P, ref),
                                 SQ_OK);
            ck_assert_int_eq(sq_world_gather_weights(w, step), SQ_OK);
            for (int r = 0; r < N; r++) {
                ck_assert_int_eq(sq_world_get_weights(w, r, got), SQ_OK);
                char msg[256];
                ck_assert_msg(sqt_bytes_equal(got, ref, n * sizeof(float), msg, sizeof msg),
                              "%s (weight.recon=%s) step %u worker %d: %s", presets[p % 4],
                              bf16 ? "bf16" : "fp32", step, r, msg);
            }
        }
        sq_qbuf_free(&all.q);
        free(w0), free(m), free(ref), free(got);
        sq_world_close(w);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* qWD over many steps                                                      */
/* ------------------------------------------------------------------------ */

/* The replica check names the first worker whose w-hat differs from
** worker 0's, byte for byte (a -0 for a +0 included), and none when all
** agree; with threads it compares replicas side by side. */
START_TEST(test_replicas_differ_names_first)
{
    const int K = 2, G = 4;
    const uint64_t n = 300007;
    sq_world *w = open_world(K, G, "sdp4bit", NULL, n, 4, 0);
    float *w0 = make_grads(1, n, 41), *a = malloc(n * sizeof *a), *tmp = malloc(n * sizeof *tmp);
    for (uint64_t i = 0; i < n; i++) w0[i] *= 1e-2f;
    ck_assert_int_eq(sq_world_init_weights(w, w0), SQ_OK);
    ck_assert_int_eq(sq_world_get_weights(w, 0, a), SQ_OK);
    /* in place: the same bytes as the copy, the world's own buffer; none
    ** for a worker that does not exist */
    const float *in0 = sq_world_weights_in_place(w, 0);
    ck_assert_ptr_eq(in0, w->workers[0].what);
    ck_assert(memcmp(in0, a, n * sizeof *a) == 0);
    ck_assert_ptr_null(sq_world_weights_in_place(w, K * G));
    ck_assert_ptr_null(sq_world_weights_in_place(w, -1));
    int differs = -1;
    ck_assert_int_eq(sq_world_replicas_differ(w, a, tmp, &differs), SQ_OK);
    ck_assert_int_eq(differs, 0);
    float *r6 = w->workers[6].what, *r3 = w->workers[3].what;
    r6[n - 1] = -r6[n - 1];
    ck_assert_int_eq(sq_world_replicas_differ(w, a, tmp, &differs), SQ_OK);
    ck_assert_int_eq(differs, 6);
    const float keep = r3[5];
    r3[5] = r3[5] == 0.0f && !signbit(r3[5]) ? -0.0f : 0.0f; /* a zero of the other sign, or 0 */
    ck_assert_int_eq(sq_world_replicas_differ(w, a, tmp, &differs), SQ_OK);
    ck_assert_int_eq(differs, 3);
    r3[5] = keep;
    r6[n - 1] = -r6[n - 1];
    ck_assert_int_eq(sq_world_replicas_differ(w, a, tmp, &differs), SQ_OK);
    ck_assert_int_eq(differs, 0);
    free(w0), free(a), free(tmp);
    sq_world_close(w);
}
END_TEST

/* Training-like use: reduce, SGD on the master shards, gather. The replicas
** of w-hat must stay bit for bit identical, and w-hat must keep tracking
** the master weights (the error of one step is folded into the next
** difference, so it does not accumulate). */
START_TEST(test_qwd_many_steps)
{
    const int K = 2, G = 4, N = 8, steps = 60;
    const uint64_t n = 12007;
    sq_world *w = open_world(K, G, "sdp4bit", NULL, n, 4, 0);
    uint64_t S = sq_world_shard(w), P = sq_world_padded(w);
    float *w0 = make_grads(1, n, 41), *x = make_grads(N, n, 42);
    float *m = calloc(P, sizeof *m), *shard = malloc(S * sizeof *shard);
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    for (uint64_t i = 0; i < n; i++) w0[i] *= 1e-2f;
    for (size_t i = 0; i < (size_t)N * n; i++) x[i] *= 1e-3f;
    ck_assert_int_eq(sq_world_init_weights(w, w0), SQ_OK);
    memcpy(m, w0, n * sizeof *m);
    double err_early = 0;
    for (int t = 1; t <= steps; t++) {
        /* a gradient that changes from step to step */
        for (int r = 0; r < N; r++)
            for (uint64_t i = 0; i < n; i++)
                x[(size_t)r * n + i] = -x[(size_t)r * n + i] * 0.99f + 1e-5f * (float)(t % 7);
        put_all(w, x, n);
        ck_assert_int_eq(sq_world_reduce_grads(w, (uint32_t)t), SQ_OK);
        for (int r = 0; r < N; r++) {
            ck_assert_int_eq(sq_world_get_grad_shard(w, r, shard), SQ_OK);
            for (uint64_t i = 0; i < S && (uint64_t)r * S + i < n; i++) m[(uint64_t)r * S + i] -= 0.5f * shard[i];
            ck_assert_int_eq(sq_world_put_master(w, r, m + (uint64_t)r * S), SQ_OK);
        }
        ck_assert_int_eq(sq_world_gather_weights(w, (uint32_t)t), SQ_OK);
        ck_assert_int_eq(sq_world_get_weights(w, 0, a), SQ_OK);
        for (int r = 1; r < N; r++) {
            ck_assert_int_eq(sq_world_get_weights(w, r, b), SQ_OK);
            ck_assert_msg(memcmp(a, b, n * sizeof *a) == 0, "step %d: worker %d's w-hat differs", t, r);
        }
        double e2 = 0, m2 = 0;
        for (uint64_t i = 0; i < n; i++) {
            e2 += ((double)a[i] - m[i]) * ((double)a[i] - m[i]);
            m2 += (double)m[i] * m[i];
        }
        double rel = sqrt(e2 / m2);
        if (t == 10) err_early = rel;
        if (t > 10)
            ck_assert_msg(rel < 3 * err_early + 1e-6, "step %d: w-hat error %g grew from %g", t, rel,
                          err_early);
        ck_assert_msg(rel < 0.05, "step %d: w-hat drifted from the master weights (%g)", t, rel);
    }
    free(w0), free(x), free(m), free(shard), free(a), free(b);
    sq_world_close(w);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Traffic: SDP4Bit's closed forms (spec section 2.4)                       */
/* ------------------------------------------------------------------------ */

static void check_sdp4bit_bytes(int K, int G, uint64_t n)
{
    int N = K * G;
    sq_world *w = open_world(K, G, "sdp4bit", NULL, n, 1, 1);
    ck_assert_int_eq(sq_world_reduce_grads(w, 1), SQ_OK);
    ck_assert_int_eq(sq_world_gather_weights(w, 1), SQ_OK);
    uint64_t P = sq_world_padded(w), S = P / (uint64_t)N;
    ck_assert_uint_eq(P % (2048ull * (uint64_t)N), 0); /* shards of whole weight groups */
    for (int r = 0; r < N; r++) {
        const sq_traffic *t = sq_world_traffic(w, r);
        /* weights: (N-1)/N * P * (0.5 + 4/2048) bytes, on the link to the next worker */
        uint64_t wc = (uint64_t)(N - 1) * S / 2, wm = (uint64_t)(N - 1) * (S / 2048) * 4;
        int next_inter = (r % G == G - 1) && K > 1;
        const sq_link_traffic *wl = &t->t[SQ_COLL_WEIGHT][next_inter], *wo = &t->t[SQ_COLL_WEIGHT][!next_inter];
        ck_assert_uint_eq(wl->sent_codes, wc);
        ck_assert_uint_eq(wl->sent_meta, wm);
        ck_assert_uint_eq(wo->sent_codes + wo->sent_meta, 0);
        /* gradients, hop 1: (G-1)/G * P * (1 + 4/128); hop 2: (K-1)/K * P/G * (0.5 + 4/128);
        ** one node: only hop 1 at 8 bits over all N; one worker per node: hop 2 at 4 bits */
        const sq_link_traffic *gi = &t->t[SQ_COLL_GRAD][SQ_LINK_INTRA], *ge = &t->t[SQ_COLL_GRAD][SQ_LINK_INTER];
        uint64_t ic = (uint64_t)(G - 1) * (P / (uint64_t)G), im = (uint64_t)(G - 1) * (P / (uint64_t)G / 128) * 4;
        uint64_t ec = (uint64_t)(K - 1) * (P / (uint64_t)N) / 2, em = (uint64_t)(K - 1) * (P / (uint64_t)N / 128) * 4;
        ck_assert_uint_eq(gi->sent_codes, ic);
        ck_assert_uint_eq(gi->sent_meta, im);
        ck_assert_uint_eq(ge->sent_codes, ec);
        ck_assert_uint_eq(ge->sent_meta, em);
        /* what is sent is received: symmetric patterns */
        ck_assert_uint_eq(gi->recv_codes, ic);
        ck_assert_uint_eq(ge->recv_meta, em);
        ck_assert_uint_eq(gi->sent_elems, (uint64_t)(G - 1) * (P / (uint64_t)G));
    }
    sq_world_close(w);
}

START_TEST(test_bytes_closed_forms)
{
    static const int kg[][2] = {{16, 4}, {16, 8}, {2, 4}, {4, 1}, {1, 8}};
    for (size_t i = 0; i < 5; i++) {
        check_sdp4bit_bytes(kg[i][0], kg[i][1], 1300000000ull);
        check_sdp4bit_bytes(kg[i][0], kg[i][1], 1000003ull);
    }
}
END_TEST

/* The baseline: (N-1)/N * 2P for bf16 weights and (N-1)/N * 4P for the
** fp32 ring; a dry world counts exactly what a world that moves data does. */
START_TEST(test_bytes_baseline_and_dry)
{
    static const int kg[][2] = {{16, 4}, {2, 4}, {4, 1}, {1, 8}, {3, 2}};
    for (size_t i = 0; i < 5; i++) {
        int K = kg[i][0], G = kg[i][1], N = K * G;
        sq_world *w = open_world(K, G, "baseline", NULL, 100003, 1, 1);
        ck_assert_int_eq(sq_world_reduce_grads(w, 1), SQ_OK);
        ck_assert_int_eq(sq_world_gather_weights(w, 1), SQ_OK);
        uint64_t S = sq_world_shard(w);
        for (int r = 0; r < N; r++) {
            const sq_traffic *t = sq_world_traffic(w, r);
            uint64_t wsent = 0, gsent = 0, meta = 0;
            for (int l = 0; l < 2; l++) {
                wsent += t->t[SQ_COLL_WEIGHT][l].sent_codes;
                gsent += t->t[SQ_COLL_GRAD][l].sent_codes;
                meta += t->t[SQ_COLL_WEIGHT][l].sent_meta + t->t[SQ_COLL_GRAD][l].sent_meta;
            }
            ck_assert_uint_eq(wsent, (uint64_t)(N - 1) * S * 2);
            ck_assert_uint_eq(gsent, (uint64_t)(N - 1) * S * 4);
            ck_assert_uint_eq(meta, 0);
        }
        sq_world_close(w);
    }
    /* dry versus real, for every preset on 2x2 */
    for (size_t p = 0; p < sq_scheme_npresets; p++) {
        sq_world *d = open_world(2, 2, sq_scheme_presets[p], NULL, 9001, 3, 1);
        sq_world *w = open_world(2, 2, sq_scheme_presets[p], NULL, 9001, 3, 0);
        float *x = make_grads(4, 9001, 2);
        put_all(w, x, 9001);
        ck_assert_int_eq(sq_world_init_weights(w, x), SQ_OK);
        ck_assert_int_eq(sq_world_reduce_grads(d, 1), SQ_OK);
        ck_assert_int_eq(sq_world_gather_weights(d, 1), SQ_OK);
        ck_assert_int_eq(sq_world_reduce_grads(w, 1), SQ_OK);
        ck_assert_int_eq(sq_world_gather_weights(w, 1), SQ_OK);
        for (int r = 0; r < 4; r++)
            ck_assert_msg(memcmp(sq_world_traffic(d, r), sq_world_traffic(w, r), sizeof(sq_traffic)) == 0,
                          "%s: dry and real traffic differ at worker %d", sq_scheme_presets[p], r);
        free(x);
        sq_world_close(d);
        sq_world_close(w);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Determinism and bad input                                                */
/* ------------------------------------------------------------------------ */

static float *run_once(const char *preset, int threads, uint64_t seed)
{
    sq_set_threads(threads);
    const uint64_t n = 70001;
    sq_world *w = open_world(2, 4, preset, NULL, n, seed, 0);
    float *x = make_grads(8, n, 77);
    ck_assert_int_eq(sq_world_init_weights(w, x), SQ_OK);
    put_all(w, x, n);
    ck_assert_int_eq(sq_world_reduce_grads(w, 1), SQ_OK);
    float *g = get_all(w);
    uint64_t S = sq_world_shard(w), P = sq_world_padded(w);
    float *m = calloc(P, sizeof *m);
    for (uint64_t i = 0; i < n; i++) m[i] = x[i] - g[i];
    for (int r = 0; r < 8; r++) ck_assert_int_eq(sq_world_put_master(w, r, m + (uint64_t)r * S), SQ_OK);
    ck_assert_int_eq(sq_world_gather_weights(w, 1), SQ_OK);
    float *out = malloc((P + n) * sizeof *out);
    memcpy(out, g, P * sizeof *out);
    ck_assert_int_eq(sq_world_get_weights(w, 5, out + P), SQ_OK);
    free(x), free(g), free(m);
    sq_world_close(w);
    sq_set_threads(0);
    return out;
}

/* Every preset: 1 thread (ranks in turn, each op on one thread), 3 threads
** (8 ranks side by side on 3 threads: an uneven share) and 4. */
START_TEST(test_threads_same_bytes)
{
    static const char *const presets[] = {"baseline", "qw",     "qwd",      "ulq",       "tlq",
                                          "tlqhs",    "sdp4bit", "zeropp",  "zeropp8",   "qsdp",
                                          "qgz",      "qwz",    "powersgd", "powersgd4", "qsgd",
                                          "efsignsgd", "topk"};
    for (size_t p = 0; p < sizeof presets / sizeof presets[0]; p++) {
        float *a = run_once(presets[p], 1, 9), *b = run_once(presets[p], 4, 9);
        float *b3 = run_once(presets[p], 3, 9), *c = run_once(presets[p], 1, 10);
        size_t bytes = 0;
        { /* the padded size of that world */
            sq_world *w = open_world(2, 4, presets[p], NULL, 70001, 9, 1);
            bytes = (sq_world_padded(w) + 70001) * sizeof(float);
            sq_world_close(w);
        }
        ck_assert_msg(memcmp(a, b, bytes) == 0, "%s: 1 and 4 threads differ", presets[p]);
        ck_assert_msg(memcmp(a, b3, bytes) == 0, "%s: 1 and 3 threads differ", presets[p]);
        /* the seed reaches the bytes (not every preset rounds at random) */
        if (!strcmp(presets[p], "sdp4bit") || !strcmp(presets[p], "zeropp") ||
            !strcmp(presets[p], "qsdp"))
            ck_assert_msg(memcmp(a, c, bytes) != 0, "%s: seeds 9 and 10 gave the same bytes",
                          presets[p]);
        free(a), free(b), free(b3), free(c);
    }
}
END_TEST

/* A collective that fails on several ranks names the lowest of them,
** whether the ranks run in turn or side by side: workers 2 to 7 hold values
** whose sums overflow fp32 (SQ_ERR_RANGE). */
START_TEST(test_failure_names_lowest_rank)
{
    static const char *const presets[] = {"sdp4bit", "tlqhs"};
    for (size_t p = 0; p < sizeof presets / sizeof presets[0]; p++) {
        char first[SQ_ERROR_MSG] = "";
        for (int threads = 1; threads <= 3; threads++) {
            sq_set_threads(threads);
            const uint64_t n = 70001;
            sq_world *w = open_world(2, 4, presets[p], NULL, n, 9, 0);
            float *x = make_grads(8, n, 77);
            for (size_t i = 2 * n; i < 8 * n; i++) x[i] = FLT_MAX / 2;
            put_all(w, x, n);
            const int rc = sq_world_reduce_grads(w, 1);
            const char *msg = sq_world_error(w);
            ck_assert_msg(rc == SQ_ERR_RANGE && !strncmp(msg, "worker 2 (cpu): ", 16),
                          "%s, %d threads: status %d: %s", presets[p], threads, rc, msg);
            if (threads == 1) snprintf(first, sizeof first, "%s", msg);
            ck_assert_msg(!strcmp(msg, first), "%s: %d threads: '%s', 1 thread: '%s'", presets[p],
                          threads, msg, first);
            free(x);
            sq_world_close(w);
            sq_set_threads(0);
        }
    }
}
END_TEST

/* put_grad_part: the gradient put in pieces (uneven, in a scrambled order,
** the last one ending at n and zeroing the padding over whatever the step
** before left there) reduces to the same bytes as put_grad of the whole,
** mean or sum, fp32 or fp16 gradients; what it refuses, it refuses
** without touching the world's message. */
START_TEST(test_put_grad_part)
{
    static const char *const presets[] = {"sdp4bit", "baseline", "qgz"};
    const uint64_t n = 70001, cuts[] = {0, 1, 4096, 30000, 30001, 69999, n};
    const size_t ncuts = sizeof cuts / sizeof *cuts;
    for (size_t p = 0; p < sizeof presets / sizeof *presets; p++) {
        float *x = make_grads(8, n, 5);
        sq_world *a = open_world(2, 4, presets[p], NULL, n, 9, 0);
        sq_world *b = open_world(2, 4, presets[p], NULL, n, 9, 0);
        put_all(a, x, n);
        /* b: garbage first, so that the padding must be zeroed again */
        float *junk = malloc(n * sizeof *junk);
        for (uint64_t i = 0; i < n; i++) junk[i] = 1e-3f * (float)(i % 7 + 1);
        for (int r = 0; r < 8; r++) ck_assert_int_eq(sq_world_put_grad(b, r, junk), SQ_OK);
        for (int r = 7; r >= 0; r--)
            for (size_t k = ncuts - 1; k-- > 0;) {
                const float *xr = x + (size_t)r * n;
                ck_assert_int_eq(sq_world_put_grad_part(b, r, cuts[k], cuts[k + 1] - cuts[k],
                                                        xr + cuts[k]),
                                 SQ_OK);
            }
        ck_assert_int_eq(sq_world_reduce_grads(a, 1), SQ_OK);
        ck_assert_int_eq(sq_world_reduce_grads(b, 1), SQ_OK);
        float *ga = get_all(a), *gb = get_all(b);
        size_t bytes = (size_t)sq_world_padded(a) * sizeof(float);
        ck_assert_msg(memcmp(ga, gb, bytes) == 0, "%s: parts and whole differ", presets[p]);
        /* refusals: a range past n, no values, a NaN, a dry world */
        ck_assert_int_eq(sq_world_put_grad(b, 99, x), SQ_ERR_ARG);
        char before[SQ_ERROR_MSG];
        snprintf(before, sizeof before, "%s", sq_world_error(b));
        ck_assert_int_eq(sq_world_put_grad_part(b, 0, n - 1, 2, x), SQ_ERR_ARG);
        ck_assert_int_eq(sq_world_put_grad_part(b, 0, 0, 1, NULL), SQ_ERR_ARG);
        ck_assert_int_eq(sq_world_put_grad_part(b, 8, 0, 1, x), SQ_ERR_UNSUPPORTED);
        const float x3 = x[3];
        x[3] = NAN;
        ck_assert_int_eq(sq_world_put_grad_part(b, 1, 0, 10, x), SQ_ERR_NONFINITE);
        ck_assert_str_eq(sq_world_error(b), before);
        x[3] = x3;
        /* a bad value anywhere in a long piece: before the destination's
        ** alignment, in the vectors (streaming stores) and in the tail */
        static const uint64_t at[] = {1, 2, 37, 500, 992, 999};
        for (size_t k = 0; k < sizeof at / sizeof *at; k++) {
            const float keep = x[at[k]];
            x[at[k]] = k % 2 ? INFINITY : NAN;
            ck_assert_msg(sq_world_put_grad_part(b, 2, 1, 999, x + 1) == SQ_ERR_NONFINITE,
                          "%s: a bad value at %llu passed", presets[p], (unsigned long long)at[k]);
            x[at[k]] = keep;
        }
        ck_assert_int_eq(sq_world_put_grad_part(b, 2, 1, 999, x + 1), SQ_OK);
        sq_world *d = open_world(2, 4, presets[p], NULL, n, 9, 1);
        ck_assert_int_eq(sq_world_put_grad_part(d, 0, 0, 1, junk), SQ_ERR_UNSUPPORTED);
        sq_world_close(d);
        free(ga), free(gb), free(junk), free(x);
        sq_world_close(a);
        sq_world_close(b);
    }
}
END_TEST

START_TEST(test_bad_input)
{
    const uint64_t n = 10000; /* padded to 16384: shard 0 is all model, shard 3 all padding */
    sq_world *w = open_world(2, 2, "sdp4bit", NULL, n, 1, 0);
    float *x = calloc(n, sizeof *x);
    x[417] = NAN;
    ck_assert_int_eq(sq_world_put_grad(w, 3, x), SQ_ERR_NONFINITE);
    ck_assert_msg(strstr(sq_world_error(w), "worker 3") && strstr(sq_world_error(w), "417"), "%s",
                  sq_world_error(w));
    x[417] = INFINITY;
    ck_assert_int_eq(sq_world_init_weights(w, x), SQ_ERR_NONFINITE);
    x[417] = 0;
    ck_assert_int_eq(sq_world_put_grad(w, 4, x), SQ_ERR_ARG);
    /* the padding of the last shard must stay zero */
    uint64_t S = sq_world_shard(w);
    float *s = calloc(S, sizeof *s);
    s[S - 1] = 1.0f;
    ck_assert_int_eq(sq_world_put_master(w, 3, s), SQ_ERR_ARG);
    ck_assert_msg(strstr(sq_world_error(w), "padding"), "%s", sq_world_error(w));
    ck_assert_int_eq(sq_world_put_master(w, 0, s), SQ_OK); /* shard 0 holds no padding */
    sq_world_close(w);
    /* a dry world holds no data */
    w = open_world(2, 2, "sdp4bit", NULL, n, 1, 1);
    ck_assert_int_eq(sq_world_put_grad(w, 0, x), SQ_ERR_UNSUPPORTED);
    sq_world_close(w);
    /* schemes the world cannot run, and empty models */
    sq_world_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.topo.nodes = 2;
    cfg.topo.per_node = 2;
    sq_error err = {0};
    ck_assert_int_eq(sq_scheme_preset("baseline", &cfg.scheme, &err), SQ_OK);
    cfg.elements = 0;
    ck_assert_int_eq(sq_world_open(&cfg, &w, &err), SQ_ERR_ARG);
    cfg.elements = 10;
    ck_assert_int_eq(sq_scheme_set(&cfg.scheme, "grad.bits=4", &err), SQ_OK);
    ck_assert_int_eq(sq_world_open(&cfg, &w, &err), SQ_ERR_SPEC);
    ck_assert_msg(strstr(err.msg, "ring"), "%s", err.msg);
    /* a dry world whose byte counts would wrap 64 bits: a 4-byte scale per
    ** element sent by 4096 workers; 2^40 elements still count */
    cfg.topo.nodes = 2;
    cfg.topo.per_node = 2048;
    cfg.dry = 1;
    ck_assert_int_eq(sq_scheme_preset("zeropp", &cfg.scheme, &err), SQ_OK);
    ck_assert_int_eq(sq_scheme_set(&cfg.scheme, "grad.group=1", &err), SQ_OK);
    cfg.elements = (uint64_t)1 << 50;
    ck_assert_int_eq(sq_world_open(&cfg, &w, &err), SQ_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "overflow the 64-bit traffic counters"), "%s", err.msg);
    cfg.elements = (uint64_t)1 << 40;
    ck_assert_msg(sq_world_open(&cfg, &w, &err) == SQ_OK, "%s", err.msg);
    ck_assert_int_eq(sq_world_reduce_grads(w, 1), SQ_OK);
    sq_traffic sum;
    memset(&sum, 0, sizeof sum);
    sq_world_add_traffic(w, &sum);
    const sq_link_traffic *gi = &sum.t[SQ_COLL_GRAD][SQ_LINK_INTRA];
    /* 2 x 2048 workers x 2047 sub-chunks of 2^40 / 2048 elements, a scale each */
    ck_assert_uint_eq(gi->sent_meta, 2ull * 2047 * ((uint64_t)1 << 40) * 4);
    sq_world_close(w);
    /* buffers beyond any machine's memory (4096 workers of 2^31 elements):
    ** refused before the first is allocated, not filled until killed */
    cfg.topo.nodes = 64;
    cfg.topo.per_node = 64;
    cfg.dry = 0;
    cfg.elements = (uint64_t)1 << 31;
    ck_assert_int_eq(sq_world_open(&cfg, &w, &err), SQ_ERR_NOMEM);
    ck_assert_msg(strstr(err.msg, "GB of memory"), "%s", err.msg);
    free(x), free(s);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Any model size against the padding (issue 15)                            */
/* ------------------------------------------------------------------------ */

/* Two steps of the loop every caller writes -- gradients in, reduce, an
** SGD step on the model part of each master shard, gather -- on a model of
** n elements. A shard may be larger than the whole model, so every shard
** buffer here is S elements and only sq_world_shard_len() of them are the
** model's. The replicas must agree, put_master must accept the shards (their
** padding +0), and the padding of the master shards must stay +0. */
static void run_small(int K, int G, const char *preset, uint64_t n)
{
    const int N = K * G;
    sq_world *w = open_world(K, G, preset, NULL, n, 5, 0);
    const uint64_t S = sq_world_shard(w), P = sq_world_padded(w);
    ck_assert_uint_eq(S * (uint64_t)N, P);
    uint64_t covered = 0;
    for (int r = 0; r < N; r++) {
        uint64_t len = sq_world_shard_len(w, r);
        ck_assert_uint_le(len, S);
        ck_assert_uint_eq(len, (uint64_t)r * S >= n ? 0 : n - (uint64_t)r * S < S ? n - (uint64_t)r * S : S);
        covered += len;
    }
    ck_assert_uint_eq(covered, n);
    float *w0 = make_grads(1, n, 11), *x = make_grads(N, n, 12);
    float *shard = malloc(S * sizeof *shard), *m = malloc(S * sizeof *m);
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    ck_assert(shard && m && a && b);
    ck_assert_msg(sq_world_init_weights(w, w0) == SQ_OK, "%s", sq_world_error(w));
    for (uint32_t t = 1; t <= 2; t++) {
        put_all(w, x, n);
        ck_assert_msg(sq_world_reduce_grads(w, t) == SQ_OK, "%s", sq_world_error(w));
        for (int r = 0; r < N; r++) {
            uint64_t len = sq_world_shard_len(w, r);
            ck_assert_msg(sq_world_get_grad_shard(w, r, shard) == SQ_OK, "%s", sq_world_error(w));
            ck_assert_msg(sq_world_get_master(w, r, m) == SQ_OK, "%s", sq_world_error(w));
            for (uint64_t i = 0; i < len; i++) {
                SQT_CHECK(isfinite(shard[i]), "%s %dx%d n %llu: worker %d: reduced element %llu "
                          "is %g", preset, K, G, (unsigned long long)n, r, (unsigned long long)i,
                          shard[i]);
                m[i] -= 0.5f * shard[i];
            }
            for (uint64_t i = len; i < S; i++)
                SQT_CHECK(sqt_bits(m[i]) == 0, "%s %dx%d n %llu: worker %d: master padding %llu "
                          "is %a", preset, K, G, (unsigned long long)n, r, (unsigned long long)i,
                          m[i]);
            ck_assert_msg(sq_world_put_master(w, r, m) == SQ_OK, "%s %dx%d n %llu: %s", preset, K,
                          G, (unsigned long long)n, sq_world_error(w));
        }
        ck_assert_msg(sq_world_gather_weights(w, t) == SQ_OK, "%s", sq_world_error(w));
        ck_assert_int_eq(sq_world_get_weights(w, 0, a), SQ_OK);
        for (uint64_t i = 0; i < n; i++)
            SQT_CHECK(isfinite(a[i]), "%s %dx%d n %llu: w-hat element %llu is %g", preset, K, G,
                      (unsigned long long)n, (unsigned long long)i, a[i]);
        for (int r = 1; r < N; r++) {
            ck_assert_int_eq(sq_world_get_weights(w, r, b), SQ_OK);
            ck_assert_msg(memcmp(a, b, n * sizeof *a) == 0, "%s %dx%d n %llu: step %u: worker "
                          "%d's w-hat differs", preset, K, G, (unsigned long long)n, t, r);
        }
    }
    free(w0), free(x), free(shard), free(m), free(a), free(b);
    sq_world_close(w);
}

/* The sizes where the padding changes: 1, a byte of 4-bit codes and one
** past it, one group of each wire either side, one shard and one padding
** unit either side. */
static size_t edge_sizes(int K, int G, const char *preset, uint64_t *out)
{
    sq_world *w = open_world(K, G, preset, NULL, 1, 1, 1);
    const sq_scheme *sc = sq_world_scheme(w);
    uint64_t u = sq_world_pad_unit(w), S = sq_world_shard(w);
    uint64_t groups[3] = {sq_wire_group(&sc->weight), sq_wire_group(&sc->grad_intra),
                          sq_wire_group(&sc->grad_inter)};
    sq_world_close(w);
    uint64_t c[16] = {1, 7, 8, 9, S - 1, S, S + 1, u - 1, u, u + 1};
    size_t k = 10;
    for (int i = 0; i < 3; i++) c[k++] = groups[i] - 1, c[k++] = groups[i] + 1;
    size_t m = 0;
    for (size_t i = 0; i < k; i++) {
        int dup = c[i] == 0;
        for (size_t j = 0; j < m && !dup; j++) dup = out[j] == c[i];
        if (!dup) out[m++] = c[i];
    }
    return m;
}

START_TEST(test_small_models)
{
    static const int kg[][2] = {{2, 4}, {3, 2}, {1, 2}, {2, 1}};
    for (size_t p = 0; p < sq_scheme_npresets; p++)
        for (size_t t = 0; t < sizeof kg / sizeof kg[0]; t++) {
            uint64_t sizes[16];
            size_t ns = edge_sizes(kg[t][0], kg[t][1], sq_scheme_presets[p], sizes);
            for (size_t i = 0; i < ns; i++)
                run_small(kg[t][0], kg[t][1], sq_scheme_presets[p], sizes[i]);
        }
}
END_TEST

/* The one lcm of the codec's tiles and the world's padding unit: the value
** and the overflow flag of the world's former checked version (gcd, then
** a / gcd * b with a checked multiply), on small, large and coprime sizes. */
START_TEST(test_lcm)
{
    static const uint64_t v[] = {1, 2, 3, 8, 12, 64, 96, 1000, 4294967291u, (uint64_t)1 << 32,
                                 ((uint64_t)1 << 32) + 1, (uint64_t)1 << 50, (uint64_t)3 << 61,
                                 UINT64_MAX, UINT64_MAX - 1};
    size_t n = sizeof v / sizeof v[0];
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            uint64_t a = v[i], b = v[j], x = a, y = b, want;
            while (y) {
                uint64_t t = x % y;
                x = y;
                y = t;
            }
            int want_ov = __builtin_mul_overflow(a / x, b, &want), ov = 0;
            uint64_t got = sq_hd_lcm_u64(a, b, &ov);
            ck_assert_msg(got == want && ov == want_ov, "lcm(%llu, %llu) = %llu (overflow %d), "
                          "want %llu (%d)", (unsigned long long)a, (unsigned long long)b,
                          (unsigned long long)got, ov, (unsigned long long)want, want_ov);
            ck_assert_uint_eq(sq_hd_lcm_u64(a, b, NULL), want);
        }
    int ov = 0;
    ck_assert_uint_eq(sq_hd_lcm_u64(4, 6, &ov), 12);
    ck_assert_int_eq(ov, 0);
    sq_hd_lcm_u64((uint64_t)1 << 63, 3, &ov);
    ck_assert_int_eq(ov, 1);
    sq_hd_lcm_u64(4, 6, &ov); /* a chain is tested once: the flag stays set */
    ck_assert_int_eq(ov, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("world");
    TCase *tc = tcase_create("exact");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_exact_ring);
    tcase_add_test(tc, test_replicas_differ_names_first);
    tcase_add_test(tc, test_exact_ring_bf16);
    tcase_add_test(tc, test_exact_a2a);
    tcase_add_test(tc, test_exact_twolevel);
    tcase_add_test(tc, test_exact_gather);
    suite_add_tcase(s, tc);
    tc = tcase_create("reference");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_twolevel_reference);
    tcase_add_test(tc, test_a2a_reference);
    tcase_add_test(tc, test_weight_reference);
    tcase_add_test(tc, test_qwd_many_steps);
    suite_add_tcase(s, tc);
    tc = tcase_create("traffic");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_bytes_closed_forms);
    tcase_add_test(tc, test_bytes_baseline_and_dry);
    suite_add_tcase(s, tc);
    tc = tcase_create("determinism");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_threads_same_bytes);
    tcase_add_test(tc, test_failure_names_lowest_rank);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_put_grad_part);
    suite_add_tcase(s, tc);
    tc = tcase_create("sizes");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_small_models);
    tcase_add_test(tc, test_lcm);
    suite_add_tcase(s, tc);
    return sqt_run(s);
}
