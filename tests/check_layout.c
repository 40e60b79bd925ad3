/*
** check_layout.c -- the bucket layout: Megatron's rule, the bytes of one
** iteration against closed forms on the real parameter count, and groups
** that straddle parameters quantized as a straight line written here says.
*/
#include "shardq/layout.h"
#include "shardq/replay.h"
#include "shardq/train.h"
#include "shardq/trace.h"
#include "shardq/world.h"

#include "check_util.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void build_ok(sq_layout_kind kind, uint64_t bucket, const uint64_t *sizes, size_t n,
                     sq_layout *l)
{
    sq_error e = {0};
    ck_assert_msg(sq_layout_build(kind, bucket, sizes, n, l, &e) == SQ_OK, "%s", e.msg);
}

static void slot_is(const sq_layout *l, size_t u, size_t k, size_t param, uint64_t offset)
{
    const sq_layout_slot *s = &l->slots[l->units[u].first + k];
    ck_assert_uint_eq(s->param, param);
    ck_assert_uint_eq(s->offset, offset);
    ck_assert_uint_eq(l->unit_of[param], u);
}

/* ------------------------------------------------------------------------ */
/* Megatron's rule                                                          */
/* ------------------------------------------------------------------------ */

START_TEST(test_reverse_order_and_closing_rule)
{
    /* reversed: 50, 40 | 30, 20, 10: a bucket closes at >= 60 elements */
    const uint64_t sizes[] = {10, 20, 30, 40, 50};
    sq_layout l;
    build_ok(SQ_LAYOUT_BUCKET, 60, sizes, 5, &l);
    ck_assert_uint_eq(l.nunits, 2);
    ck_assert_uint_eq(l.units[0].n, 90);
    ck_assert_uint_eq(l.units[0].count, 2);
    slot_is(&l, 0, 0, 4, 0);
    slot_is(&l, 0, 1, 3, 50);
    ck_assert_uint_eq(l.units[1].n, 60);
    slot_is(&l, 1, 0, 2, 0);
    slot_is(&l, 1, 1, 1, 30);
    slot_is(&l, 1, 2, 0, 50);
    ck_assert_uint_eq(l.units[0].seed_key, 0);
    ck_assert_uint_eq(l.units[1].seed_key, 1);
    sq_layout_free(&l);
}
END_TEST

START_TEST(test_a_bucket_never_holds_one_param_alone)
{
    /* a param larger than the bucket waits for a second one (Megatron's
    ** len(bucket_params) > 1) */
    const uint64_t a[] = {5, 100}, b[] = {100, 5, 7};
    sq_layout l;
    build_ok(SQ_LAYOUT_BUCKET, 10, a, 2, &l);
    ck_assert_uint_eq(l.nunits, 1);
    slot_is(&l, 0, 0, 1, 0);
    slot_is(&l, 0, 1, 0, 100);
    sq_layout_free(&l);
    /* reversed 7, 5 (12 >= 10: closed), then 100 alone at the end */
    build_ok(SQ_LAYOUT_BUCKET, 10, b, 3, &l);
    ck_assert_uint_eq(l.nunits, 2);
    ck_assert_uint_eq(l.units[0].n, 12);
    ck_assert_uint_eq(l.units[1].n, 100);
    ck_assert_uint_eq(l.units[1].count, 1);
    sq_layout_free(&l);
}
END_TEST

START_TEST(test_one_bucket_and_per_param)
{
    const uint64_t sizes[] = {3, 0, 4, 5};
    sq_layout l;
    build_ok(SQ_LAYOUT_BUCKET, 0, sizes, 4, &l);
    ck_assert_uint_eq(l.nunits, 1);
    ck_assert_uint_eq(l.units[0].n, 12);
    ck_assert_uint_eq(l.nslots, 3);
    slot_is(&l, 0, 0, 3, 0);
    slot_is(&l, 0, 1, 2, 5);
    slot_is(&l, 0, 2, 0, 9);
    ck_assert_uint_eq(l.unit_of[1], SIZE_MAX); /* 0 elements: nowhere */
    sq_layout_free(&l);
    build_ok(SQ_LAYOUT_PARAM, 2, sizes, 4, &l);
    ck_assert_uint_eq(l.nunits, 3);
    /* in param order, each keyed by its own index: the seeds of before */
    ck_assert_uint_eq(l.units[0].seed_key, 0);
    ck_assert_uint_eq(l.units[1].seed_key, 2);
    ck_assert_uint_eq(l.units[2].seed_key, 3);
    ck_assert_uint_eq(l.units[2].n, 5);
    sq_world_config base = {.topo = {1, 2}, .seed = 77};
    sq_world_config c = sq_layout_world_config(&l, 1, &base);
    ck_assert_uint_eq(c.elements, 4);
    ck_assert_uint_eq(c.seed, 77 ^ ((uint64_t)2 << 40));
    sq_layout_free(&l);
}
END_TEST

START_TEST(test_scheme_knobs)
{
    sq_scheme s;
    sq_error e = {0};
    ck_assert_int_eq(sq_scheme_preset("sdp4bit", &s, &e), 0);
    ck_assert_int_eq(s.layout, SQ_LAYOUT_BUCKET);
    ck_assert_uint_eq(s.bucket, SQ_LAYOUT_BUCKET_DEFAULT);
    ck_assert_int_eq(sq_scheme_set(&s, "layout=param", &e), 0);
    ck_assert_int_eq(s.layout, SQ_LAYOUT_PARAM);
    ck_assert_int_eq(sq_scheme_set(&s, "layout.bucket=0", &e), 0);
    ck_assert_uint_eq(s.bucket, 0);
    ck_assert_int_eq(sq_scheme_set(&s, "layout=flat", &e), SQ_ERR_SPEC);
    ck_assert_int_eq(sq_scheme_set(&s, "layout.bucket=-1", &e), SQ_ERR_SPEC);
    ck_assert_msg(strstr(e.msg, "layout.bucket"), "%s", e.msg);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Bytes of one iteration                                                   */
/* ------------------------------------------------------------------------ */

static uint64_t wbytes(const sq_wire *w, uint64_t n)
{
    return sq_wire_code_bytes(w, n) + sq_wire_meta_bytes(w, n);
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b, b = t;
    }
    return a;
}

static uint64_t lcm64(uint64_t a, uint64_t b) { return a / gcd64(a, b) * b; }

/* The elements one worker's share must be a multiple of: whole groups (and
** whole bytes of codes) of every wire the scheme uses on this topology. */
static uint64_t group_lcm(const sq_scheme *s, const sq_topo *t)
{
    uint64_t u = lcm64(8, sq_wire_group(&s->weight));
    if (sq_topo_workers(t) > 1 && s->grad_mode != SQ_GRAD_RING) {
        u = lcm64(u, sq_wire_group(&s->grad_intra));
        u = lcm64(u, sq_wire_group(&s->grad_inter));
    }
    return u;
}

/* What the collectives of one iteration of unit worlds of padded sizes
** P_b send, summed over workers: the closed forms of docs/schemes.md. */
static void closed_forms(const sq_scheme *s, const sq_topo *t, uint64_t P, uint64_t *want)
{
    const uint64_t N = (uint64_t)sq_topo_workers(t), K = (uint64_t)t->nodes,
                   G = (uint64_t)t->per_node, S = P / N;
    /* the ring all-gather: N - 1 shards per worker, over both links */
    want[SQ_COLL_WEIGHT] += N * (N - 1) * wbytes(&s->weight, S);
    sq_grad_mode path = s->grad_mode;
    if (N == 1) return;
    if (path == SQ_GRAD_TWOLEVEL && (K == 1 || G == 1)) path = SQ_GRAD_A2A;
    const sq_wire *single = K > 1 ? &s->grad_inter : &s->grad_intra;
    if (path == SQ_GRAD_RING || path == SQ_GRAD_A2A)
        want[SQ_COLL_GRAD] += N * (N - 1) * wbytes(single, S);
    else
        want[SQ_COLL_GRAD] += N * (G - 1) * wbytes(&s->grad_intra, P / G) +
                                 N * (K - 1) * wbytes(&s->grad_inter, S);
}

static uint64_t sent(const sq_traffic *t, int coll)
{
    uint64_t b = 0;
    for (int l = 0; l < SQ_NLINK; l++) b += t->t[coll][l].sent_codes + t->t[coll][l].sent_meta;
    return b;
}

/* Opens every unit's dry world, checks its padding, and sums the traffic of
** one iteration; returns the padded total. */
static uint64_t one_iteration(const sq_scheme *s, const sq_topo *t, const uint64_t *sizes,
                              size_t np, sq_traffic *sum, uint64_t *want)
{
    sq_layout l;
    sq_error e = {0};
    ck_assert_msg(sq_layout_for_scheme(s, sizes, np, &l, &e) == 0, "%s", e.msg);
    const uint64_t N = (uint64_t)sq_topo_workers(t), g = group_lcm(s, t);
    uint64_t padded = 0;
    for (size_t u = 0; u < l.nunits; u++) {
        sq_world_config base = {.topo = *t, .scheme = *s, .seed = 1, .dry = 1};
        sq_world_config c = sq_layout_world_config(&l, u, &base);
        sq_world *w;
        ck_assert_msg(sq_world_open(&c, &w, &e) == 0, "%s", e.msg);
        uint64_t n = l.units[u].n, P = sq_world_padded(w);
        /* padding only at the bucket's end, less than one group per worker */
        ck_assert_uint_ge(P, n);
        ck_assert_msg(P - n < N * g || N == 1, "unit %zu: %llu padded to %llu (%llu workers, "
                      "groups of %llu)", u, (unsigned long long)n, (unsigned long long)P,
                      (unsigned long long)N, (unsigned long long)g);
        /* one worker keeps everything: no padding at all */
        ck_assert_uint_eq(N == 1 ? P - n : P % N, 0);
        ck_assert_uint_eq(N == 1 ? 0 : (P / N) % g, 0);
        ck_assert_int_eq(sq_world_gather_weights(w, 1), 0);
        ck_assert_int_eq(sq_world_reduce_grads(w, 1), 0);
        sq_world_add_traffic(w, sum);
        closed_forms(s, t, P, want);
        padded += P;
        sq_world_close(w);
    }
    sq_layout_free(&l);
    return padded;
}

START_TEST(test_bytes_equal_closed_forms)
{
    static const char *const presets[] = {"baseline", "qwd", "tlq", "sdp4bit", "qsdp"};
    static const sq_topo topos[] = {{2, 4}, {3, 2}, {1, 4}, {4, 1}, {1, 1}};
    /* models: the demo's GPT, a smaller one, and odd sizes */
    sq_gpt_config g1 = {.layers = 4, .channels = 128, .heads = 4, .context = 128};
    sq_gpt_config g2 = {.layers = 2, .channels = 64, .heads = 2, .context = 64};
    sq_gpt_param gp[64];
    uint64_t m[3][64];
    size_t nm[3];
    nm[0] = sq_gpt_nparams(&g1);
    sq_gpt_params(&g1, gp);
    for (size_t p = 0; p < nm[0]; p++) m[0][p] = gp[p].n;
    nm[1] = sq_gpt_nparams(&g2);
    sq_gpt_params(&g2, gp);
    for (size_t p = 0; p < nm[1]; p++) m[1][p] = gp[p].n;
    const uint64_t odd[] = {1, 4095, 2049, 100003, 7, 65536, 333};
    nm[2] = sizeof odd / sizeof odd[0];
    memcpy(m[2], odd, sizeof odd);
    for (size_t mi = 0; mi < 3; mi++) {
        uint64_t real = 0;
        for (size_t p = 0; p < nm[mi]; p++) real += m[mi][p];
        for (size_t pi = 0; pi < sizeof presets / sizeof *presets; pi++)
            for (size_t ti = 0; ti < sizeof topos / sizeof *topos; ti++)
                for (int bucket = 0; bucket < 3; bucket++) {
                    sq_scheme s;
                    ck_assert_int_eq(sq_scheme_preset(presets[pi], &s, NULL), 0);
                    /* one bucket, buckets of ~1/3 of the model, one per param */
                    if (bucket == 1) s.bucket = real / 3;
                    if (bucket == 2) s.layout = SQ_LAYOUT_PARAM;
                    sq_traffic sum;
                    memset(&sum, 0, sizeof sum);
                    uint64_t want[SQ_NCOLL] = {0, 0};
                    uint64_t padded = one_iteration(&s, &topos[ti], m[mi], nm[mi], &sum, want);
                    ck_assert_uint_ge(padded, real);
                    for (int c = 0; c < SQ_NCOLL; c++)
                        ck_assert_msg(sent(&sum, c) == want[c],
                                      "%s on %dx%d, model %zu, layout %d: %s sent %llu, "
                                      "closed form %llu", presets[pi], topos[ti].nodes,
                                      topos[ti].per_node, mi, bucket, sq_coll_name(c),
                                      (unsigned long long)sent(&sum, c),
                                      (unsigned long long)want[c]);
                }
    }
}
END_TEST

/* The figures: the demo's model on 2 x 4 under sdp4bit travels as
** 1,392,640 elements in per-param worlds, as 851,968 in one flat bucket. */
START_TEST(test_demo_model_padding)
{
    sq_gpt_config g = {.layers = 4, .channels = 128, .heads = 4, .context = 128};
    sq_gpt_param gp[64];
    size_t np = sq_gpt_nparams(&g);
    sq_gpt_params(&g, gp);
    uint64_t sizes[64], real = 0;
    for (size_t p = 0; p < np; p++) real += sizes[p] = gp[p].n;
    ck_assert_uint_eq(real, 842496);
    sq_topo t = {2, 4};
    sq_scheme s;
    ck_assert_int_eq(sq_scheme_preset("sdp4bit", &s, NULL), 0);
    sq_traffic sum;
    memset(&sum, 0, sizeof sum);
    uint64_t want[SQ_NCOLL] = {0, 0};
    ck_assert_uint_eq(one_iteration(&s, &t, sizes, np, &sum, want), 851968);
    s.layout = SQ_LAYOUT_PARAM;
    ck_assert_uint_eq(one_iteration(&s, &t, sizes, np, &sum, want), 1392640);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Straddling groups                                                        */
/* ------------------------------------------------------------------------ */

enum { NP = 3, W = 2 };
static const uint64_t SZ[NP] = {100, 300, 37};
static float GRAD[W][NP][300];

typedef struct got {
    float x[NP][300];
    int seen[NP];
} got;

static int keep_grad(void *ctx, uint32_t step, size_t p, int path, const float *x, uint64_t n)
{
    got *g = ctx;
    (void)step;
    if (path == SQ_REPLAY_GRAD && p < NP && n == SZ[p]) {
        memcpy(g->x[p], x, (size_t)n * sizeof *x);
        g->seen[p]++;
    }
    return 0;
}

static void write_trace(const char *dir)
{
    sq_trace_param tp[NP];
    static char names[NP][8];
    for (int p = 0; p < NP; p++) {
        snprintf(names[p], sizeof names[p], "p%d", p % 1000);
        tp[p] = (sq_trace_param){.name = names[p], .ndim = 1, .shape = {SZ[p]}, .n = SZ[p]};
    }
    sq_trace_writer *w;
    sq_error e = {0};
    ck_assert_msg(sq_trace_writer_open(&w, dir, W, tp, NP, SQ_ST_F32, "1x2", NULL, &e) == 0,
                  "%s", e.msg);
    for (int r = 0; r < W; r++) {
        ck_assert_int_eq(sq_trace_file_begin(w, 5, r, &e), 0);
        for (int p = 0; p < NP; p++) {
            sqt_gen_input(100 + 10 * (uint64_t)r + (uint64_t)p, SZ[p], -9, GRAD[r][p]);
            ck_assert_int_eq(sq_trace_file_put(w, GRAD[r][p], &e), 0);
        }
        ck_assert_int_eq(sq_trace_file_end(w, &e), 0);
    }
    ck_assert_msg(sq_trace_writer_close(w, &e) == 0, "%s", e.msg);
}

/* tlq on 1 x 2 is the single-level all-to-all on the 8-bit intra wire:
** each worker quantizes its whole (padded) flat bucket in groups of 128,
** SR with Philox keyed (seed, step, worker, single site), and each
** partition is the fp32 sum of the two decoded copies. Written out here as
** plain loops over the flat buffer [p2 | p1 | p0] (Megatron's reverse
** order), where groups 0 .. 3 hold 37 + 91, 128, 81 + 47, 53 + 75 padding. */
START_TEST(test_straddling_groups_straight_line)
{
    char dir[512];
    ck_assert_int_eq(sqt_mkdtemp(dir, sizeof dir, "layout"), 0);
    char path[600];
    snprintf(path, sizeof path, "%s/t", dir);
    write_trace(path);
    sq_trace t;
    sq_error e = {0};
    ck_assert_msg(sq_trace_open(path, &t, &e) == 0, "%s", e.msg);
    sq_replay_config cfg = {.topo = {1, 2}, .seed = 4242, .paths = SQ_REPLAY_GRAD};
    ck_assert_int_eq(sq_scheme_preset("tlq", &cfg.scheme, NULL), 0);
    got g;
    memset(&g, 0, sizeof g);
    sq_replay_sink sink = {.ctx = &g, .tensor = keep_grad};
    sq_replay_result res;
    ck_assert_msg(sq_replay_run(&cfg, &t, &sink, &res, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(res.units, 1);
    ck_assert_uint_eq(res.padded, 512);

    enum { P = 512, GS = 128 };
    static float x[W][P], d[W][P], want[P];
    const uint64_t off[NP] = {337, 37, 0};
    for (int r = 0; r < W; r++) {
        memset(x[r], 0, sizeof x[r]);
        for (int p = 0; p < NP; p++)
            for (uint64_t i = 0; i < SZ[p]; i++) x[r][off[p] + i] = GRAD[r][p][i] / 2.0f;
        sq_rng_key key = {.seed = 4242, .step = 5, .worker = (uint32_t)r,
                          .site = SQ_SITE_GRAD_SINGLE};
        for (int b = 0; b < P / GS; b++) {
            float a = 0;
            for (int i = b * GS; i < (b + 1) * GS; i++) a = fabsf(x[r][i]) > a ? fabsf(x[r][i]) : a;
            float m = a > 0 ? 127.0f / a : 1.0f, s = a > 0 ? a / 127.0f : 1.0f;
            for (int i = b * GS; i < (b + 1) * GS; i++) {
                float v = x[r][i] * m, f = floorf(v);
                float q = f + (sq_uniform(&key, (uint64_t)i) < v - f ? 1.0f : 0.0f);
                q = q < -127 ? -127 : q > 127 ? 127 : q;
                d[r][i] = q * s;
            }
        }
    }
    for (int i = 0; i < P; i++) want[i] = d[0][i] + d[1][i];
    for (int p = 0; p < NP; p++) {
        ck_assert_int_eq(g.seen[p], 1);
        char msg[256];
        ck_assert_msg(sqt_bytes_equal(g.x[p], want + off[p], SZ[p] * sizeof(float), msg,
                                      sizeof msg), "p%d: %s", p, msg);
    }
    /* and the same replay in per-param worlds is another computation */
    ck_assert_int_eq(sq_scheme_set(&cfg.scheme, "layout=param", NULL), 0);
    memset(&g, 0, sizeof g);
    ck_assert_msg(sq_replay_run(&cfg, &t, &sink, &res, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(res.units, 3);
    ck_assert(memcmp(g.x[1], want + off[1], SZ[1] * sizeof(float)) != 0);
    sq_trace_close(&t);
    sqt_rm_tree(dir);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("layout");
    TCase *tc = tcase_create("layout");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_reverse_order_and_closing_rule);
    tcase_add_test(tc, test_a_bucket_never_holds_one_param_alone);
    tcase_add_test(tc, test_one_bucket_and_per_param);
    tcase_add_test(tc, test_scheme_knobs);
    tcase_add_test(tc, test_bytes_equal_closed_forms);
    tcase_add_test(tc, test_demo_model_padding);
    tcase_add_test(tc, test_straddling_groups_straight_line);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return sqt_run(suite()); }
