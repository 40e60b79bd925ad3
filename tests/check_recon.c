/*
** check_recon.c -- the bf16 weight reconstruction (scheme knob weight.recon).
**
** With weight.recon=bf16 (every preset's default) a quantized weight wire
** works as the reference systems do: the sender quantizes its master shard
** rounded to bf16 (qW, ZeRO++ qwZ) or the bf16 difference of that and the
** bf16 model weights (SDP4Bit qWD), and every worker rebuilds w-hat as
** bf16(D(q)) or bf16(bf16(D(q)) + w-hat). So w-hat stays on the bf16 grid
** and bit-identical on every worker, step after step. Checked here:
**   - the grid and the replicas over many steps of drifting fp32 masters;
**   - one and two steps against a straight-line transcription written with
**     scalar loops (cast, subtract, absmax, stochastic rounding with
**     sq_uniform, decode, cast, add), sharing no code with src/core;
**   - the core's four bf16 operations against the same transcription;
**   - weight.recon=fp32 is the fp32 path of sq_quantize_diff /
**     sq_dequantize_add (the code before the knob);
**   - an unquantized wire ignores the knob; the initialisation.
*/
#include "check_util.h"
#include "world_util.h"
#include "shardq/codec.h"
#include "shardq/world.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

static float bf16r(float x) { return sq_bf16_to_f32(sq_f32_to_bf16(x)); }

static int on_grid(float x) { return sqt_bits(bf16r(x)) == sqt_bits(x); }

static sq_world *open_world(int K, int G, const char *preset, const char *set, uint64_t n,
                            uint64_t seed)
{
    sq_world_config cfg = sqt_world_config(K, G, preset, set, n, seed);
    sq_error err = {0};
    sq_world *w = NULL;
    ck_assert_msg(sq_world_open(&cfg, &w, &err) == SQ_OK, "open %dx%d %s: %s", K, G, preset,
                  err.msg);
    return w;
}

/* Initial weights off the bf16 grid (so that the initialisation's cast
** shows), of mixed scales. */
static float *make_w0(uint64_t n, uint64_t seed)
{
    float *x = malloc(n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    sqt_fill(x, n, seed);
    for (uint64_t i = 0; i < n; i++) x[i] = x[i] * 0.02f + 1e-3f * (float)(i % 5);
    return x;
}

/* The masters of step t: an fp32 drift that bf16 cannot follow exactly. */
static void drift(float *m, uint64_t n, int t)
{
    for (uint64_t i = 0; i < n; i++)
        m[i] -= 3e-5f * (float)((int)((i * 7 + (uint64_t)t * 13) % 11) - 5) + 1e-6f * (float)t;
}

static void put_masters(sq_world *w, const float *m)
{
    uint64_t S = sq_world_shard(w);
    for (int r = 0; r < sq_world_workers(w); r++)
        ck_assert_msg(sq_world_put_master(w, r, m + (uint64_t)r * S) == SQ_OK, "%s",
                      sq_world_error(w));
}

/* ------------------------------------------------------------------------ */
/* The straight-line transcription of the reference                         */
/* ------------------------------------------------------------------------ */

/* One shard of S elements (whole groups) of a symmetric sdp4bit-levels SR
** codec with fp32 scales, quantized and decoded: dq[j] = D(Q(v))[j], the
** uniforms of element j being sq_uniform(key, j). */
static void sym_sr_roundtrip(const float *v, uint64_t S, uint64_t group, int bits,
                             const sq_rng_key *key, float *dq)
{
    const float qmax = (float)((1 << (bits - 1)) - 1);
    for (uint64_t g0 = 0; g0 < S; g0 += group) {
        float a = 0.0f;
        for (uint64_t j = g0; j < g0 + group; j++) a = fabsf(v[j]) > a ? fabsf(v[j]) : a;
        ck_assert_msg(a == 0.0f || a >= 1e-19f, "a group too small for this transcription");
        float mult = a == 0.0f ? 1.0f : qmax / a, s = a == 0.0f ? 1.0f : a / qmax;
        for (uint64_t j = g0; j < g0 + group; j++) {
            float x = v[j] * mult, f = floorf(x);
            float q = f + (sq_uniform(key, j) < x - f ? 1.0f : 0.0f);
            q = q < -qmax ? -qmax : q > qmax ? qmax : q;
            dq[j] = q * s;
        }
    }
}

/* One weight all-gather of SDP4Bit's reference on the padded arrays m (the
** fp32 masters) and what (the bf16 model weights, updated): every worker r
** quantizes shard r of bf16(m) (direct) or of bf16(bf16(m) - what) (diff),
** and w-hat becomes bf16(dq) or bf16(bf16(dq) + what). */
static void reference_gather(const sq_codec *c, int diff, int N, uint64_t S, uint64_t seed,
                             uint32_t step, const float *m, float *what)
{
    float *v = malloc(S * sizeof *v), *dq = malloc(S * sizeof *dq);
    for (int r = 0; r < N; r++) {
        const float *mr = m + (uint64_t)r * S;
        float *wr = what + (uint64_t)r * S;
        for (uint64_t j = 0; j < S; j++) {
            float b = bf16r(mr[j]);
            v[j] = diff ? bf16r(b - wr[j]) : b; /* a bf16 subtraction */
        }
        sq_rng_key key = {seed, step, (uint32_t)r, SQ_SITE_WEIGHT};
        sym_sr_roundtrip(v, S, c->group, c->bits, &key, dq);
        for (uint64_t j = 0; j < S; j++)
            wr[j] = diff ? bf16r(bf16r(dq[j]) + wr[j]) : bf16r(dq[j]); /* a bf16 add */
    }
    free(v), free(dq);
}

/* ------------------------------------------------------------------------ */
/* Many steps: the grid and the replicas                                    */
/* ------------------------------------------------------------------------ */

static const char *const quantized_presets[] = {"qw", "qwd", "sdp4bit", "zeropp", "zeropp8",
                                                "qsdp"};
static const int topos[][2] = {{2, 4}, {3, 2}};

START_TEST(test_grid_many_steps)
{
    const char *preset = quantized_presets[_i / 2];
    const int K = topos[_i % 2][0], G = topos[_i % 2][1], steps = 24;
    const uint64_t n = 30011;
    sq_world *w = open_world(K, G, preset, NULL, n, 17);
    const int N = sq_world_workers(w);
    const uint64_t P = sq_world_padded(w);
    float *m = calloc(P, sizeof *m), *w0 = make_w0(n, 5);
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    memcpy(m, w0, n * sizeof *m);
    ck_assert_int_eq(sq_world_init_weights(w, w0), SQ_OK);
    for (int t = 1; t <= steps; t++) {
        drift(m, n, t);
        put_masters(w, m);
        ck_assert_msg(sq_world_gather_weights(w, (uint32_t)t) == SQ_OK, "%s",
                      sq_world_error(w));
        ck_assert_int_eq(sq_world_get_weights(w, 0, a), SQ_OK);
        double e2 = 0, m2 = 0;
        for (uint64_t i = 0; i < n; i++) {
            SQT_CHECK(on_grid(a[i]), "%s %dx%d step %d: w-hat[%llu] = %.9g is not a bf16 number",
                      preset, K, G, t, (unsigned long long)i, a[i]);
            e2 += ((double)a[i] - m[i]) * ((double)a[i] - m[i]);
            m2 += (double)m[i] * m[i];
        }
        for (int r = 1; r < N; r++) {
            ck_assert_int_eq(sq_world_get_weights(w, r, b), SQ_OK);
            ck_assert_msg(memcmp(a, b, n * sizeof *a) == 0, "%s %dx%d step %d: worker %d's w-hat "
                          "differs from worker 0's", preset, K, G, t, r);
        }
        /* and it tracks the masters: closely with differences; within the
        ** codec's error when the weights themselves travel (4 bits over
        ** groups of values of very different scales: measured 0.59) */
        const double bound = sq_world_scheme(w)->weight_mode == SQ_WEIGHT_DIFF ? 0.02 : 0.75;
        ck_assert_msg(sqrt(e2 / m2) < bound, "%s step %d: w-hat is %g away from the masters",
                      preset, t, sqrt(e2 / m2));
    }
    free(m), free(w0), free(a), free(b);
    sq_world_close(w);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Against the straight-line reference                                      */
/* ------------------------------------------------------------------------ */

START_TEST(test_straight_line)
{
    static const char *const presets[] = {"qw", "qwd", "sdp4bit"};
    const char *preset = presets[_i / 2];
    const int K = topos[_i % 2][0], G = topos[_i % 2][1];
    const uint64_t n = 20011, seed = 23;
    sq_world *w = open_world(K, G, preset, NULL, n, seed);
    const sq_scheme *s = sq_world_scheme(w);
    const int N = sq_world_workers(w), diff = s->weight_mode == SQ_WEIGHT_DIFF;
    const uint64_t P = sq_world_padded(w), S = sq_world_shard(w);
    ck_assert_int_eq(s->weight_recon, SQ_RECON_BF16);
    ck_assert_int_eq(s->weight.codec.kind, SQ_KIND_SYM);
    ck_assert_int_eq(s->weight.codec.round, SQ_ROUND_SR);
    ck_assert_int_eq(s->weight.codec.levels, SQ_LEVELS_SDP4BIT);
    ck_assert_int_eq(s->weight.codec.scale, SQ_SCALE_FP32);
    ck_assert_int_eq(s->weight.codec.hadamard, 0);
    ck_assert_uint_eq(S % s->weight.codec.group, 0);
    float *m = calloc(P, sizeof *m), *what = calloc(P, sizeof *what), *w0 = make_w0(n, 9);
    float *got = malloc(n * sizeof *got);
    memcpy(m, w0, n * sizeof *m);
    ck_assert_int_eq(sq_world_init_weights(w, w0), SQ_OK);
    /* the reference starts every replica from the bf16 model */
    for (uint64_t i = 0; i < n; i++) what[i] = bf16r(w0[i]);
    for (uint32_t t = 1; t <= 2; t++) {
        drift(m, n, (int)t);
        put_masters(w, m);
        ck_assert_int_eq(sq_world_gather_weights(w, t), SQ_OK);
        reference_gather(&s->weight.codec, diff, N, S, seed, t, m, what);
        for (int r = 0; r < N; r++) {
            ck_assert_int_eq(sq_world_get_weights(w, r, got), SQ_OK);
            char msg[256];
            ck_assert_msg(sqt_bytes_equal(got, what, n * sizeof *got, msg, sizeof msg),
                          "%s %dx%d step %u worker %d: %s", preset, K, G, t, r, msg);
        }
    }
    free(m), free(what), free(w0), free(got);
    sq_world_close(w);
}
END_TEST

/* The core's operations, one shard, against the same loops: what the
** sender encodes and what the receiver keeps, with the codes decoded by the
** fp32 decoder so that only the bf16 steps differ. */
START_TEST(test_core_ops)
{
    sq_codec c = sq_codec_default();
    c.bits = 4;
    c.group = 2048;
    const uint64_t n = 6 * 2048;
    float *x = make_w0(n, 3), *ref = malloc(n * sizeof *ref), *v = malloc(n * sizeof *v);
    float *dq = malloc(n * sizeof *dq), *want = malloc(n * sizeof *want);
    float *got = malloc(n * sizeof *got), *plain = malloc(n * sizeof *plain);
    for (uint64_t i = 0; i < n; i++) ref[i] = bf16r(x[i] * (1.0f + 1e-3f * (float)(i % 3)));
    sq_rng_key key = {99, 4, 2, SQ_SITE_WEIGHT};
    sq_qbuf q;
    ck_assert_int_eq(sq_qbuf_alloc(&c, n, &q), SQ_OK);
    for (int diff = 0; diff < 2; diff++) {
        for (uint64_t j = 0; j < n; j++) v[j] = diff ? bf16r(bf16r(x[j]) - ref[j]) : bf16r(x[j]);
        sym_sr_roundtrip(v, n, c.group, c.bits, &key, dq);
        ck_assert_int_eq(diff ? sq_quantize_diff_bf16(&c, x, ref, n, &key, &q)
                              : sq_quantize_bf16(&c, x, n, &key, &q), SQ_OK);
        ck_assert_int_eq(sq_dequantize(&c, &q, n, plain), SQ_OK);
        char msg[256];
        ck_assert_msg(sqt_bytes_equal(plain, dq, n * sizeof *dq, msg, sizeof msg),
                      "decoded codes of the %s: %s", diff ? "difference" : "weights", msg);
        for (uint64_t j = 0; j < n; j++) want[j] = diff ? bf16r(bf16r(dq[j]) + ref[j]) : bf16r(dq[j]);
        ck_assert_int_eq(diff ? sq_dequantize_add_bf16(&c, &q, ref, n, got)
                              : sq_dequantize_bf16(&c, &q, n, got), SQ_OK);
        ck_assert_msg(sqt_bytes_equal(got, want, n * sizeof *got, msg, sizeof msg),
                      "w-hat from the %s: %s", diff ? "difference" : "weights", msg);
        /* in place, as the world adds into w-hat */
        if (diff) {
            memcpy(got, ref, n * sizeof *got);
            ck_assert_int_eq(sq_dequantize_add_bf16(&c, &q, got, n, got), SQ_OK);
            ck_assert_msg(sqt_bytes_equal(got, want, n * sizeof *got, msg, sizeof msg),
                          "in place: %s", msg);
        }
    }
    /* a bf16 subtraction is the fp32 difference of two bf16 numbers rounded
    ** once: exact for nearby values (Sterbenz), rounded for distant ones */
    ck_assert_float_eq(bf16r(bf16r(1.0f) - bf16r(0.9921875f)), 0.0078125f);
    sq_qbuf_free(&q);
    free(x), free(ref), free(v), free(dq), free(want), free(got), free(plain);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* weight.recon=fp32: the code before the knob                              */
/* ------------------------------------------------------------------------ */

/* Shard r of P elements from its own quantized buffer into the gathered
** one (whole groups; symmetric codecs with fp32 scales only). */
static void place_shard(const sq_codec *c, sq_qbuf *all, const sq_qbuf *one, int r, uint64_t S)
{
    memcpy(all->codes + sq_codec_code_bytes(c, (uint64_t)r * S), one->codes,
           sq_codec_code_bytes(c, S));
    memcpy((char *)all->scales + sq_codec_scale_bytes(c, (uint64_t)r * S), one->scales,
           sq_codec_scale_bytes(c, S));
}

START_TEST(test_fp32_is_the_old_path)
{
    static const char *const presets[] = {"qw", "qwd", "sdp4bit"};
    const char *preset = presets[_i / 2];
    const int K = topos[_i % 2][0], G = topos[_i % 2][1];
    const uint64_t n = 20011, seed = 29;
    sq_world *w = open_world(K, G, preset, "weight.recon=fp32", n, seed);
    const sq_scheme *s = sq_world_scheme(w);
    const sq_codec *c = &s->weight.codec;
    const int N = sq_world_workers(w), diff = s->weight_mode == SQ_WEIGHT_DIFF;
    const uint64_t P = sq_world_padded(w), S = sq_world_shard(w);
    float *m = calloc(P, sizeof *m), *what = calloc(P, sizeof *what), *w0 = make_w0(n, 13);
    float *got = malloc(n * sizeof *got);
    memcpy(m, w0, n * sizeof *m);
    memcpy(what, w0, n * sizeof *what); /* fp32 w-hat from the fp32 w0 */
    ck_assert_int_eq(sq_world_init_weights(w, w0), SQ_OK);
    sq_qbuf all, one;
    ck_assert_int_eq(sq_qbuf_alloc(c, P, &all), SQ_OK);
    ck_assert_int_eq(sq_qbuf_alloc(c, S, &one), SQ_OK);
    int off_grid = 0;
    for (uint32_t t = 1; t <= 3; t++) {
        drift(m, n, (int)t);
        put_masters(w, m);
        for (int r = 0; r < N; r++) {
            sq_rng_key key = {seed, t, (uint32_t)r, SQ_SITE_WEIGHT};
            ck_assert_int_eq(diff ? sq_quantize_diff(c, m + (uint64_t)r * S, what + (uint64_t)r * S,
                                                     S, &key, &one)
                                  : sq_quantize(c, m + (uint64_t)r * S, S, &key, &one), SQ_OK);
            place_shard(c, &all, &one, r, S);
        }
        ck_assert_int_eq(diff ? sq_dequantize_add(c, &all, what, P, what)
                              : sq_dequantize(c, &all, P, what), SQ_OK);
        ck_assert_int_eq(sq_world_gather_weights(w, t), SQ_OK);
        for (int r = 0; r < N; r++) {
            ck_assert_int_eq(sq_world_get_weights(w, r, got), SQ_OK);
            char msg[256];
            ck_assert_msg(sqt_bytes_equal(got, what, n * sizeof *got, msg, sizeof msg),
                          "%s %dx%d step %u worker %d: %s", preset, K, G, t, r, msg);
        }
        for (uint64_t i = 0; i < n; i++) off_grid += !on_grid(got[i]);
    }
    ck_assert_int_gt(off_grid, 0); /* fp32 weights, not bf16 ones */
    sq_qbuf_free(&all), sq_qbuf_free(&one);
    free(m), free(what), free(w0), free(got);
    sq_world_close(w);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The knob, the unquantized wires, the initialisation                      */
/* ------------------------------------------------------------------------ */

START_TEST(test_knob)
{
    for (size_t p = 0; p < sq_scheme_npresets; p++) {
        sq_scheme s;
        sq_error err = {0};
        ck_assert_int_eq(sq_scheme_preset(sq_scheme_presets[p], &s, &err), SQ_OK);
        ck_assert_int_eq(s.weight_recon, SQ_RECON_BF16);
        char text[SQ_SCHEME_STRLEN];
        sq_scheme_format(&s, text, sizeof text);
        ck_assert_msg(strstr(text, ",weight.recon=bf16,grad.mode=") != NULL, "%s", text);
    }
    sq_scheme s;
    sq_error err = {0};
    ck_assert_int_eq(sq_scheme_preset("qwd", &s, &err), SQ_OK);
    ck_assert_int_eq(sq_scheme_set(&s, "weight.recon=fp32", &err), SQ_OK);
    ck_assert_int_eq(s.weight_recon, SQ_RECON_FP32);
    char v[32];
    sq_scheme_get(&s, "weight.recon", v, sizeof v);
    ck_assert_str_eq(v, "fp32");
    ck_assert_int_eq(sq_scheme_set(&s, "weight.recon=fp16", &err), SQ_ERR_SPEC);
    ck_assert_msg(strstr(err.msg, "weight.recon=fp16") && strstr(err.msg, "bf16, fp32"), "%s",
                  err.msg);
    /* an unquantized wire ignores the knob, and prints alike */
    ck_assert_int_eq(sq_scheme_preset("baseline", &s, &err), SQ_OK);
    sq_scheme t = s;
    ck_assert_int_eq(sq_scheme_set(&t, "weight.recon=fp32", &err), SQ_OK);
    char a[SQ_SCHEME_STRLEN], b[SQ_SCHEME_STRLEN];
    sq_scheme_format(&s, a, sizeof a);
    sq_scheme_format(&t, b, sizeof b);
    ck_assert_str_eq(a, b);
}
END_TEST

/* bits 16 and 32: the same bytes under either value of the knob. */
START_TEST(test_raw_wires_ignore_the_knob)
{
    static const char *const sets[][2] = {{"weight.bits=16", "weight.bits=16"},
                                          {"weight.bits=32", "weight.bits=32"}};
    const uint64_t n = 5003;
    for (int k = 0; k < 2; k++) {
        float *out[2];
        for (int recon = 0; recon < 2; recon++) {
            sq_world_config cfg;
            memset(&cfg, 0, sizeof cfg);
            cfg.topo = (sq_topo){2, 2};
            sq_error err = {0};
            ck_assert_int_eq(sq_scheme_preset("qw", &cfg.scheme, &err), SQ_OK);
            ck_assert_int_eq(sq_scheme_set(&cfg.scheme, sets[k][recon], &err), SQ_OK);
            ck_assert_int_eq(sq_scheme_set(&cfg.scheme, recon ? "weight.recon=fp32"
                                                              : "weight.recon=bf16", &err), SQ_OK);
            cfg.elements = n;
            cfg.seed = 3;
            sq_world *w = NULL;
            ck_assert_int_eq(sq_world_open(&cfg, &w, &err), SQ_OK);
            float *m = calloc(sq_world_padded(w), sizeof *m), *w0 = make_w0(n, 1);
            memcpy(m, w0, n * sizeof *m);
            ck_assert_int_eq(sq_world_init_weights(w, w0), SQ_OK);
            out[recon] = malloc(2 * n * sizeof(float));
            ck_assert_int_eq(sq_world_get_weights(w, 1, out[recon]), SQ_OK);
            drift(m, n, 1);
            put_masters(w, m);
            ck_assert_int_eq(sq_world_gather_weights(w, 1), SQ_OK);
            ck_assert_int_eq(sq_world_get_weights(w, 3, out[recon] + n), SQ_OK);
            /* the wire's dtype is the precision */
            for (uint64_t i = 0; i < n; i++) {
                ck_assert_uint_eq(sqt_bits(out[recon][i]), sqt_bits(w0[i]));
                float want = k == 0 ? bf16r(m[i]) : m[i];
                ck_assert_uint_eq(sqt_bits(out[recon][n + i]), sqt_bits(want));
            }
            free(m), free(w0);
            sq_world_close(w);
        }
        ck_assert_int_eq(memcmp(out[0], out[1], 2 * n * sizeof(float)), 0);
        free(out[0]), free(out[1]);
    }
}
END_TEST

START_TEST(test_init)
{
    const uint64_t n = 4099;
    float *w0 = make_w0(n, 7), *got = malloc(n * sizeof *got);
    int off_grid = 0;
    for (uint64_t i = 0; i < n; i++) off_grid += !on_grid(w0[i]);
    ck_assert_int_gt(off_grid, (int)(n / 2));
    for (int recon = 0; recon < 2; recon++) {
        sq_world *w = open_world(2, 2, "qwd", recon ? "weight.recon=fp32" : NULL, n, 1);
        uint64_t S = sq_world_shard(w);
        float *m = calloc(S, sizeof *m);
        ck_assert_int_eq(sq_world_init_weights(w, w0), SQ_OK);
        for (int r = 0; r < 4; r++) {
            /* w-hat: the bf16 model (or w0 itself); the masters: fp32 w0 */
            ck_assert_int_eq(sq_world_get_weights(w, r, got), SQ_OK);
            for (uint64_t i = 0; i < n; i++)
                ck_assert_uint_eq(sqt_bits(got[i]), sqt_bits(recon ? w0[i] : bf16r(w0[i])));
            ck_assert_int_eq(sq_world_get_master(w, r, m), SQ_OK);
            for (uint64_t i = 0; i < S && (uint64_t)r * S + i < n; i++)
                ck_assert_uint_eq(sqt_bits(m[i]), sqt_bits(w0[(uint64_t)r * S + i]));
        }
        free(m);
        sq_world_close(w);
    }
    /* one worker has no wire: w-hat is the master, whatever the knob */
    sq_world *w = open_world(1, 1, "qwd", NULL, n, 1);
    ck_assert_int_eq(sq_world_init_weights(w, w0), SQ_OK);
    ck_assert_int_eq(sq_world_get_weights(w, 0, got), SQ_OK);
    ck_assert_int_eq(memcmp(got, w0, n * sizeof *got), 0);
    sq_world_close(w);
    /* a finite w0 that bf16 cannot hold */
    w = open_world(2, 2, "qw", NULL, n, 1);
    w0[77] = 3.4e38f;
    ck_assert_int_eq(sq_world_init_weights(w, w0), SQ_ERR_RANGE);
    ck_assert_msg(strstr(sq_world_error(w), "element 77"), "%s", sq_world_error(w));
    sq_world_close(w);
    free(w0), free(got);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("recon");
    TCase *tc = tcase_create("world");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_grid_many_steps, 0,
                        (int)(2 * sizeof quantized_presets / sizeof quantized_presets[0]));
    tcase_add_loop_test(tc, test_straight_line, 0, 6);
    tcase_add_loop_test(tc, test_fp32_is_the_old_path, 0, 6);
    suite_add_tcase(s, tc);
    tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_core_ops);
    tcase_add_test(tc, test_knob);
    tcase_add_test(tc, test_raw_wires_ignore_the_knob);
    tcase_add_test(tc, test_init);
    suite_add_tcase(s, tc);
    return sqt_run(s);
}
