/*
** check_errstats.c -- the error statistics and the measured step
** (src/metrics): every figure against values worked out by hand on small
** vectors, the clipping count on groups whose clipped elements are known,
** and the pieces of the measured step on a small world against the same
** sums written out here.
*/
#include "shardq/metrics.h"
#include "shardq/world.h"
#include "metrics/metrics_internal.h"

#include "check_util.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define EPS 1e-15

/* ------------------------------------------------------------------------ */
/* Statistics                                                               */
/* ------------------------------------------------------------------------ */

/* got {1, 0, 3, -2} against exact {1, 2, 2, -2}: errors {0, -2, 1, 0}, so
** sum e^2 = 5, sum x^2 = 13, sum y^2 = 14, sum xy = 11, sum e = -1, and
** element 1 is zeroed (exact 2, got 0). */
static const float got4[4] = {1, 0, 3, -2};
static const double exact4[4] = {1, 2, 2, -2};

START_TEST(test_stats_by_hand)
{
    sq_erracc a;
    sq_erracc_init(&a);
    sq_erracc_add(&a, got4, exact4, 4);
    sq_errstats s = sq_erracc_finish(&a);
    ck_assert_uint_eq(s.n, 4);
    ck_assert_double_eq_tol(s.mse, 5.0 / 4.0, EPS);
    ck_assert_double_eq_tol(s.rel_l2, sqrt(5.0 / 13.0), EPS);
    ck_assert_double_eq_tol(s.max_abs, 2.0, EPS);
    ck_assert_double_eq_tol(s.cosine, 11.0 / (sqrt(13.0) * sqrt(14.0)), EPS);
    ck_assert_double_eq_tol(s.mean_signed, -1.0 / 4.0, EPS);
    ck_assert_double_eq_tol(s.frac_zeroed, 1.0 / 4.0, EPS);
    ck_assert_double_eq_tol(s.snr_db, 10.0 * log10(13.0 / 5.0), 1e-12);
}
END_TEST

START_TEST(test_stats_in_pieces)
{
    /* the same figures from two pieces added, or merged from two accumulators */
    sq_erracc whole, p1, p2, cont;
    sq_erracc_init(&whole);
    sq_erracc_add(&whole, got4, exact4, 4);
    sq_erracc_init(&cont);
    sq_erracc_add(&cont, got4, exact4, 1);
    sq_erracc_add(&cont, got4 + 1, exact4 + 1, 3);
    sq_erracc_init(&p1);
    sq_erracc_init(&p2);
    sq_erracc_add(&p1, got4, exact4, 2);
    sq_erracc_add(&p2, got4 + 2, exact4 + 2, 2);
    sq_erracc_merge(&p1, &p2);
    sq_errstats w = sq_erracc_finish(&whole), c = sq_erracc_finish(&cont),
                m = sq_erracc_finish(&p1);
    ck_assert_int_eq(memcmp(&w, &c, sizeof w), 0);
    ck_assert_uint_eq(m.n, 4);
    ck_assert_double_eq_tol(m.mse, w.mse, EPS);
    ck_assert_double_eq_tol(m.cosine, w.cosine, EPS);
    ck_assert_double_eq_tol(m.max_abs, 2.0, EPS);
    ck_assert_double_eq_tol(m.frac_zeroed, 0.25, EPS);
}
END_TEST

START_TEST(test_stats_edges)
{
    /* nothing measured: all zero */
    sq_erracc a;
    sq_erracc_init(&a);
    sq_errstats s = sq_erracc_finish(&a);
    ck_assert_uint_eq(s.n, 0);
    ck_assert(s.mse == 0 && s.rel_l2 == 0);
    /* an exact result: no error, infinite SNR, cosine 1 */
    const float y[3] = {0.5f, -4, 0};
    const double x[3] = {0.5, -4, 0};
    sq_erracc_add(&a, y, x, 3);
    s = sq_erracc_finish(&a);
    ck_assert(s.mse == 0 && s.rel_l2 == 0 && s.max_abs == 0 && s.frac_zeroed == 0);
    ck_assert(isinf(s.snr_db) && s.snr_db > 0);
    ck_assert_double_eq_tol(s.cosine, 1.0, EPS);
    /* exact zeros against a result that is not: rel_l2 infinite, cosine 0 */
    const float nz[2] = {1, 0};
    const double zero[2] = {0, 0};
    sq_erracc_init(&a);
    sq_erracc_add(&a, nz, zero, 2);
    s = sq_erracc_finish(&a);
    ck_assert(isinf(s.rel_l2));
    ck_assert_double_eq_tol(s.cosine, 0.0, EPS);
    ck_assert_double_eq_tol(s.frac_zeroed, 0.0, EPS);
    ck_assert_double_eq_tol(s.mse, 0.5, EPS);
    /* every element zeroed */
    const float zf[2] = {0, 0};
    const double one[2] = {1, -1};
    sq_erracc_init(&a);
    sq_erracc_add(&a, zf, one, 2);
    s = sq_erracc_finish(&a);
    ck_assert_double_eq_tol(s.frac_zeroed, 1.0, EPS);
    ck_assert_double_eq_tol(s.rel_l2, 1.0, EPS);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Clipping                                                                 */
/* ------------------------------------------------------------------------ */

START_TEST(test_clipped_by_hand)
{
    /* 4-bit symmetric with DeepSpeed's levels: codes -8..7 and the absmax
    ** scaled to 8, so a group's positive absmax (and only it) is clipped */
    sq_codec c = sq_codec_default();
    c.bits = 4;
    c.group = 4;
    c.round = SQ_ROUND_RTN;
    c.levels = SQ_LEVELS_DEEPSPEED;
    const float x[12] = {1, -1, 0.5f, 0,     /* +1 clipped */
                         -2, 1, 0, 0,        /* the absmax is negative: none */
                         3, 3, -3, 1};       /* both +3 */
    ck_assert_uint_eq(sq_count_clipped(&c, x, 12), 3);
    ck_assert_uint_eq(sq_count_clipped(&c, x, 4), 1);
    ck_assert_uint_eq(sq_count_clipped(&c, x + 4, 4), 0);
    /* a short last group counts too: {3, 3} */
    ck_assert_uint_eq(sq_count_clipped(&c, x + 8, 2), 2);
    /* SDP4Bit's levels (codes -7..7, absmax at 7) clip nothing, nor min-max */
    c.levels = SQ_LEVELS_SDP4BIT;
    ck_assert_uint_eq(sq_count_clipped(&c, x, 12), 0);
    c.kind = SQ_KIND_MINMAX;
    ck_assert_uint_eq(sq_count_clipped(&c, x, 12), 0);
}
END_TEST

/* The clipped count of x / div the long way, group by group: the
** reference the short cut of sq_count_clipped must agree with. */
static uint64_t clipped_reference(const sq_codec *c, const float *x, uint64_t n, float div)
{
    float buf[256];
    const float qm = (float)((1 << (c->bits - 1)) - 1);
    uint64_t clipped = 0;
    for (uint64_t k = 0; k < n; k += c->group) {
        uint64_t m = n - k < c->group ? n - k : c->group;
        for (uint64_t i = 0; i < m; i++) buf[i] = x[k + i] / div;
        if (c->hadamard) sq_hadamard(buf, m, c->hadamard);
        float a = 0;
        for (uint64_t i = 0; i < m; i++) a = fabsf(buf[i]) > a ? fabsf(buf[i]) : a;
        for (uint64_t i = 0; i < m; i++) {
            float q = rintf(a > 0 ? buf[i] * (qm / a) : 0);
            if (q > qm || q < -qm) clipped++;
        }
    }
    return clipped;
}

START_TEST(test_clipped_tiny_groups)
{
    /* SDP4Bit's levels clip only where qm / absmax overflows: groups of
    ** subnormal values (after the Hadamard too), which the short cut must
    ** send the long way; ordinary, zero and huge groups clip nothing */
    enum { G = 128, NG = 100, N = NG * G + 50 };
    static float x[N];
    uint64_t s = 7;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
    }
    for (int i = 0; i < G; i++) {
        x[3 * G + i] = 1e-41f;                  /* all one subnormal: 1 clipped */
        x[5 * G + i] = (i % 3 ? -1 : 1) * 1e-40f; /* subnormal, mixed signs */
        x[7 * G + i] = 0;                       /* zero: none */
        x[9 * G + i] = i ? 0 : 1e-44f;          /* one subnormal */
        x[11 * G + i] = 3e38f;                  /* the Hadamard overflows: none */
    }
    for (int i = NG * G; i < N; i++) x[i] = 2e-41f; /* the short last group */
    sq_codec c = sq_codec_default();
    c.bits = 4;
    c.group = G;
    c.levels = SQ_LEVELS_SDP4BIT;
    c.hadamard = 32;
    uint64_t want = clipped_reference(&c, x, N, 1.0f);
    ck_assert_uint_gt(want, 0);
    ck_assert_uint_eq(sq_count_clipped(&c, x, N), want);
    ck_assert_uint_eq(sq_count_clipped_div(&c, x, N, 6.0f), clipped_reference(&c, x, N, 6.0f));
    c.hadamard = 0;
    want = clipped_reference(&c, x, N, 1.0f);
    ck_assert_uint_gt(want, 0);
    ck_assert_uint_eq(sq_count_clipped(&c, x, N), want);
    ck_assert_uint_eq(sq_count_clipped_div(&c, x, N, 8.0f), clipped_reference(&c, x, N, 8.0f));
}
END_TEST

START_TEST(test_frac)
{
    ck_assert_double_eq_tol(sq_step_frac(3, 12), 0.25, EPS);
    ck_assert_double_eq_tol(sq_step_frac(0, 5), 0.0, EPS);
    ck_assert(isnan(sq_step_frac(0, 0)));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The measured step on a world                                             */
/* ------------------------------------------------------------------------ */

static sq_world *open_world_set(const char *preset, const char *set, int K, int G, uint64_t n)
{
    sq_world_config wc = {.topo = {K, G}, .elements = n, .seed = 11};
    sq_error err = {0};
    ck_assert_msg(sq_scheme_preset(preset, &wc.scheme, &err) == 0, "%s", err.msg);
    for (const char *p = set; p && *p;) {
        /* "a=b;c=d" */
        char kv[64];
        size_t len = strcspn(p, ";");
        snprintf(kv, sizeof kv, "%.*s", (int)len, p);
        ck_assert_msg(sq_scheme_set(&wc.scheme, kv, &err) == 0, "%s", err.msg);
        p += len + (p[len] == ';');
    }
    if (sq_scheme_per_tensor(&wc.scheme)) {
        /* per-tensor rules (zeropp8): the model as one 1-D tensor */
        const uint64_t shape[1] = {n};
        sq_scheme one;
        ck_assert_int_eq(sq_scheme_for_tensor(&wc.scheme, &wc.topo, shape, 1, &one, &err), 0);
        wc.scheme = one;
    }
    sq_world *w;
    ck_assert_msg(sq_world_open(&wc, &w, &err) == 0, "%s", err.msg);
    return w;
}

static sq_world *open_world(const char *preset, int K, int G, uint64_t n)
{
    return open_world_set(preset, NULL, K, G, n);
}

static void fill(float *x, uint64_t n, uint64_t seed)
{
    sqt_rng r = {seed};
    for (uint64_t i = 0; i < n; i++) x[i] = sqt_bell(&r, 1.0f);
}

/* Baseline on 1 x 2: the ring reduce-scatter adds the two halves in fp32,
** so every element of the result is (float)(g0 / 2 + g1 / 2), against the
** exact mean (g0 + g1) / 2 in fp64. */
START_TEST(test_step_baseline_grad)
{
    enum { N = 1000 };
    sq_world *w = open_world("baseline", 1, 2, N);
    const uint64_t P = sq_world_padded(w), S = sq_world_shard(w);
    static float g[2][N], tmp[N], whole[4 * N], shard[4 * N];
    static double exact[4 * N];
    ck_assert_uint_le(P, 4 * N);
    for (int r = 0; r < 2; r++) fill(g[r], N, 100 + (uint64_t)r);
    for (uint64_t i = 0; i < P; i++) exact[i] = 12345; /* zeroed by the step */
    sq_step_exact_zero(w, exact);
    for (int r = 0; r < 2; r++) {
        ck_assert_int_eq(sq_world_put_grad(w, r, g[r]), SQ_OK);
        /* the fp32 wire quantizes nothing: nothing clipped */
        ck_assert_uint_eq(sq_step_add_grad(w, exact, g[r], NULL, 1, tmp), 0);
    }
    sq_step_exact_mean(w, exact);
    for (uint64_t i = 0; i < N; i++)
        ck_assert(exact[i] == ((double)g[0][i] + (double)g[1][i]) / 2.0);
    for (uint64_t i = N; i < P; i++) ck_assert(exact[i] == 0);
    ck_assert_int_eq(sq_world_reduce_grads(w, 1), SQ_OK);
    sq_erracc e, e2;
    sq_erracc_init(&e);
    sq_erracc_init(&e2);
    ck_assert_int_eq(sq_step_grad_error(w, exact, whole, NULL, &e), SQ_OK);
    ck_assert_int_eq(sq_step_grad_error(w, exact, NULL, shard, &e2), SQ_OK);
    /* by hand, element by element */
    double se2 = 0, sx2 = 0, sy2 = 0, sxy = 0, mx = 0;
    for (uint64_t i = 0; i < N; i++) {
        float y = g[0][i] / 2.0f + g[1][i] / 2.0f;
        ck_assert(whole[i] == y);
        double x = exact[i], d = (double)y - x;
        se2 += d * d, sx2 += x * x, sy2 += (double)y * y, sxy += x * y;
        if (fabs(d) > mx) mx = fabs(d);
    }
    sq_errstats s = sq_erracc_finish(&e), s2 = sq_erracc_finish(&e2);
    ck_assert_int_eq(memcmp(&s, &s2, sizeof s), 0);
    ck_assert_uint_eq(s.n, N);
    ck_assert(s.mse == se2 / N);
    ck_assert(s.rel_l2 == sqrt(se2 / sx2));
    ck_assert(s.max_abs == mx);
    ck_assert(s.cosine == sxy / (sqrt(sx2) * sqrt(sy2)));
    /* the partitions: worker 1's starts at S */
    ck_assert_uint_eq(S * 2, P);
    sq_world_close(w);
}
END_TEST

/* A trace worker copied to several workers counts once per copy, in the
** exact sum and in the clipped count. */
START_TEST(test_step_copies_and_clipping)
{
    enum { N = 512 };
    /* 4-bit RTN, DeepSpeed levels (ulq before it became SDP4Bit's SR ULq) */
    sq_world *w = open_world_set("ulq", "grad.round=rtn;grad.levels=deepspeed", 1, 4, N);
    static float g[N], tmp[N], div[N];
    static double exact[4 * N], g64[N];
    fill(g, N, 7);
    g[5] = 10; /* a positive absmax: the top code clips it */
    for (uint64_t i = 0; i < N; i++) g64[i] = (double)g[i];
    sq_step_exact_zero(w, exact);
    uint64_t c3 = sq_step_add_grad(w, exact, g, g64, 3, tmp);
    for (uint64_t i = 0; i < N; i++) ck_assert(exact[i] == 3.0 * g64[i]);
    /* what the first quantizer sees: g / N (the scheme averages) */
    for (uint64_t i = 0; i < N; i++) div[i] = g[i] / 4.0f;
    uint64_t want = sq_count_clipped(&sq_world_scheme(w)->grad_intra.codec, div, N);
    ck_assert_uint_gt(want, 0); /* DeepSpeed levels clip each group's +absmax */
    ck_assert_uint_eq(c3, 3 * want);
    sq_step_exact_mean(w, exact);
    for (uint64_t i = 0; i < N; i++) ck_assert(exact[i] == 3.0 * g64[i] / 4.0);
    sq_world_close(w);
}
END_TEST

START_TEST(test_step_weight_clipped)
{
    enum { N = 256 };
    sq_world *w = open_world("zeropp8", 1, 2, N); /* int8 RTN, DeepSpeed levels (qwZ) */
    static float m[N], what[N], tmp[N];
    fill(m, N, 3);
    fill(what, N, 4);
    m[17] = 10; /* a positive absmax: the top code clips it */
    uint64_t got = sq_step_weight_clipped(w, m, what, N, tmp);
    ck_assert_uint_eq(got, sq_count_clipped(&sq_world_scheme(w)->weight.codec, m, N));
    ck_assert_uint_gt(got, 0);
    sq_world_close(w);
    /* qwd sends the difference to the previous w-hat */
    w = open_world("qwd", 1, 2, N);
    static float d[N];
    for (uint64_t i = 0; i < N; i++) d[i] = m[i] - what[i];
    ck_assert_uint_eq(sq_step_weight_clipped(w, m, what, N, tmp),
                      sq_count_clipped(&sq_world_scheme(w)->weight.codec, d, N));
    sq_world_close(w);
    /* unquantized weights, or one worker: nothing is measured */
    w = open_world("zeropp8", 1, 1, N);
    ck_assert_uint_eq(sq_step_weight_clipped(w, m, what, N, tmp), 0);
    sq_world_close(w);
    w = open_world("baseline", 1, 2, N);
    ck_assert_uint_eq(sq_step_weight_clipped(w, m, what, N, tmp), 0);
    sq_world_close(w);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The replica check                                                        */
/* ------------------------------------------------------------------------ */

typedef struct replicas {
    float x[4][64];
    int fail_at; /* the worker whose read fails, or -1 */
} replicas;

static int get_replica(void *ctx, int r, float *out)
{
    replicas *rp = ctx;
    if (r == rp->fail_at) return SQ_ERR_DEVICE;
    memcpy(out, rp->x[r], sizeof rp->x[r]);
    return SQ_OK;
}

START_TEST(test_replicas_one_byte)
{
    static replicas rp;
    rp.fail_at = -1;
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < 64; i++) rp.x[r][i] = (float)i * 0.25f - 3;
    float what[64], tmp[64];
    int differs = -1;
    ck_assert_int_eq(sq_step_replicas_of(4, 64, get_replica, &rp, what, tmp, &differs), SQ_OK);
    ck_assert_int_eq(differs, 0);
    ck_assert_int_eq(memcmp(what, rp.x[0], sizeof what), 0);
    /* one byte of worker 2's element 37 */
    ((unsigned char *)&rp.x[2][37])[0] ^= 1;
    ck_assert_int_eq(sq_step_replicas_of(4, 64, get_replica, &rp, what, tmp, &differs), SQ_OK);
    ck_assert_int_eq(differs, 2);
    ((unsigned char *)&rp.x[2][37])[0] ^= 1;
    /* -0 against +0 holds other bytes: a divergence */
    rp.x[3][0] = 0.0f, rp.x[0][0] = rp.x[1][0] = rp.x[2][0] = -0.0f;
    ck_assert_int_eq(sq_step_replicas_of(4, 64, get_replica, &rp, what, tmp, &differs), SQ_OK);
    ck_assert_int_eq(differs, 3);
    /* a failing read passes its kind on */
    rp.fail_at = 1;
    ck_assert_int_eq(sq_step_replicas_of(4, 64, get_replica, &rp, what, tmp, &differs),
                     SQ_ERR_DEVICE);
}
END_TEST

START_TEST(test_replicas_of_a_world)
{
    enum { N = 300 };
    sq_world *w = open_world("qwd", 2, 2, N);
    static float w0[N], what[N], tmp[N];
    fill(w0, N, 9);
    ck_assert_int_eq(sq_world_init_weights(w, w0), SQ_OK);
    int differs = -1;
    ck_assert_int_eq(sq_step_replicas(w, what, tmp, &differs), SQ_OK);
    ck_assert_int_eq(differs, 0);
    /* weight.recon=bf16: every replica starts from the bf16 model */
    for (int i = 0; i < N; i++) w0[i] = sq_bf16_to_f32(sq_f32_to_bf16(w0[i]));
    ck_assert_int_eq(memcmp(what, w0, sizeof w0), 0);
    sq_world_close(w);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("errstats");
    TCase *tc = tcase_create("stats");
    tcase_add_test(tc, test_stats_by_hand);
    tcase_add_test(tc, test_stats_in_pieces);
    tcase_add_test(tc, test_stats_edges);
    tcase_add_test(tc, test_clipped_by_hand);
    tcase_add_test(tc, test_clipped_tiny_groups);
    tcase_add_test(tc, test_frac);
    suite_add_tcase(s, tc);
    tc = tcase_create("step");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_step_baseline_grad);
    tcase_add_test(tc, test_step_copies_and_clipping);
    tcase_add_test(tc, test_step_weight_clipped);
    tcase_add_test(tc, test_replicas_one_byte);
    tcase_add_test(tc, test_replicas_of_a_world);
    suite_add_tcase(s, tc);
    return sqt_run(s);
}
