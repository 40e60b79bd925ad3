/*
** check_ef.c -- error feedback on the gradient wires (docs/schemes.md,
** error feedback): the residual identity over many steps, exactly where the
** arithmetic is exact and within a derived fp32 bound where it is not; the
** residual persists from reduce to reduce, per worker, and is reset only
** when asked; a lossless wire keeps it at zero and its bytes unchanged; EF
** shrinks the accumulated error of the sum over steps, a lot for a biased
** compressor and still for an unbiased one; the statistic and the memory
** figure the runs report.
**
** The decoded values a worker sent come from the world's own result, never
** from its code: each worker owns whole groups of the gradient (the others
** put zeros there, which encode and decode to zeros), so every element of
** the reduced gradient is the decoding of exactly one worker's bytes.
*/
#include "check_util.h"
#include "shardq/world.h"
#include "world_util.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Fixtures                                                                 */
/* ------------------------------------------------------------------------ */

static sq_world *open_ef(int K, int G, const char *preset, const char *const *sets, uint64_t n,
                         uint64_t seed)
{
    sq_world_config cfg = sqt_world_config(K, G, preset, NULL, n, seed);
    sq_error err = {0};
    for (int i = 0; sets && sets[i]; i++)
        ck_assert_msg(sq_scheme_set(&cfg.scheme, sets[i], &err) == SQ_OK, "%s", err.msg);
    sq_world *w = NULL;
    ck_assert_msg(sq_world_open(&cfg, &w, &err) == SQ_OK, "%dx%d %s: %s", K, G, preset, err.msg);
    return w;
}

/* The whole reduced gradient (every partition, padded). */
static void get_out(sq_world *w, float *out)
{
    const uint64_t S = sq_world_shard(w);
    for (int r = 0; r < sq_world_workers(w); r++)
        ck_assert_msg(sq_world_get_grad_shard(w, r, out + (uint64_t)r * S) == SQ_OK, "%s",
                      sq_world_error(w));
}

/* A value on the grid 2^-12 in (-1, 1): sums and differences of a few
** thousand of them, and the levels of a 2-bit symmetric or 1-bit min-max
** codec (which are values of the group itself), are exact in fp32. */
static float dyadic(sqt_rng *r) { return (float)((int)(sqt_next(r) % 8191) - 4095) * 0x1p-12f; }

/* Worker r's gradient of one step: in the groups it owns (group index g
** with g % N == r) values from fill, elsewhere zeros. owner 0: every
** worker fills every group. */
typedef enum { FILL_DYADIC, FILL_BELL, FILL_CONST } fill_kind;
static void make_grad(float *x, uint64_t n, uint64_t group, int N, int r, int owned,
                      fill_kind kind, uint64_t seed)
{
    sqt_rng rng = {seed * 7919 + (uint64_t)r * 104729 + 1};
    if (kind != FILL_DYADIC) /* a constant gradient: the same every step */
        sqt_fill(x, (size_t)n, kind == FILL_CONST ? 77 + (uint64_t)r : seed * 31 + (uint64_t)r);
    for (uint64_t i = 0; i < n; i++) {
        if (kind == FILL_DYADIC) x[i] = dyadic(&rng);
        if (owned && (i / group) % (uint64_t)N != (uint64_t)r) x[i] = 0.0f;
    }
}

/* ------------------------------------------------------------------------ */
/* The residual identity                                                    */
/* ------------------------------------------------------------------------ */

/*
** Over T steps, with x_t the gradients put (as put: divided by N in a
** mean), d_t the decoded bytes and e_T the residuals at the end:
**   sum_t d_t + e_T = sum_t x_t, per worker at each hop, and
**   sum_t out_t + sum_r e1_r + sum_r e2_r = sum_t sum_r x_r,t
** over the reduced gradient out (e2 mapped back from the requantized
** sum's slice-major layout). In fp32 each step adds two roundings, of
** x' = x + e and of e = x' - d, each at most u |result| (u = 2^-24):
**   |sum_t d_t + e_T - sum_t x_t| <= u sum_t (|x'_t| + |e_t|),
**   |x'_t| <= (1 + u)(|x_t| + |e_(t-1)|).
** On the dyadic grid with a 2-bit symmetric (levels 0, +-absmax) or 1-bit
** min-max codec (levels min, max) every operation is exact, and so is the
** identity.
*/

/* Element index of e2[j] of worker r (two-level, docs/schemes.md). */
static uint64_t e2_element(sq_world *w, int r, uint64_t j)
{
    const sq_topo *t = sq_world_topo(w);
    const int K = t->nodes, G = t->per_node, l = r % G;
    const uint64_t pipe = (uint64_t)sq_world_scheme(w)->pipe, S = sq_world_shard(w);
    const uint64_t slice = S / pipe, b = j / slice, y = b / (uint64_t)K, piece = b % (uint64_t)K;
    return (piece * (uint64_t)G + (uint64_t)l) * S + y * slice + j % slice;
}

typedef struct ident_case {
    int K, G;
    const char *preset;
    const char *sets[8];
    fill_kind fill;
    int exact;  /* 1: the identity holds exactly */
    int owned;  /* 1: each worker owns whole groups (the per-worker check) */
    uint64_t n;
    uint32_t steps;
} ident_case;

static const ident_case ident_cases[] = {
    /* one level, 2-bit symmetric, round to nearest and stochastic, per worker */
    {1, 4, "qsdp", {"grad.kind=sym", "grad.bits=2", "grad.round=rtn", "grad.group=64",
                    "grad.ef=1", NULL}, FILL_DYADIC, 1, 1, 4096, 40},
    {1, 4, "qsdp", {"grad.kind=sym", "grad.bits=2", "grad.group=64", "grad.ef=1", NULL},
     FILL_DYADIC, 1, 1, 4096, 40},
    /* 1-bit min-max, K > 1: the single wire is grad.inter (round to nearest:
    ** stochastic rounding at one bit is not contractive, and its residual
    ** grows without bound -- docs/schemes.md, error feedback) */
    {2, 2, "qsdp", {"grad.bits=1", "grad.round=rtn", "grad.group=32", "grad.inter.ef=1",
                    "grad.mean=0", NULL}, FILL_DYADIC, 1, 1, 3000, 40},
    /* both hops of the two-level path, with pipelining, every worker everywhere */
    {2, 4, "ulq", {"grad.bits=2", "grad.group=32", "grad.ef=1", "grad.pipe=2", NULL},
     FILL_DYADIC, 1, 0, 5000, 32},
    /* the requantization alone, behind a lossless first hop */
    {3, 2, "ulq", {"grad.bits=2", "grad.round=rtn", "grad.group=16", "grad.intra.bits=32",
                   "grad.inter.ef=1", "grad.mean=0"}, FILL_DYADIC, 1, 0, 2000, 32},
    /* fp32 values of every scale: within the bound, a Hadamard transform too */
    {1, 4, "qsdp", {"grad.kind=sym", "grad.bits=4", "grad.group=128", "grad.hadamard=32",
                    "grad.ef=1", NULL}, FILL_BELL, 0, 1, 4096, 24},
    {2, 4, "tlqhs", {"grad.ef=1", NULL}, FILL_BELL, 0, 0, 5000, 24},
    {2, 2, "tlq", {"grad.intra.bits=16", "grad.inter.ef=1", "grad.intra.ef=1", NULL}, FILL_BELL, 0,
     0, 3000, 24},
};

/* Every element's |value| summed over steps, for the bound. */
static void add_abs(double *acc, const float *x, uint64_t n, double f)
{
    for (uint64_t i = 0; i < n; i++) acc[i] += f * fabs((double)x[i]);
}

START_TEST(test_identity)
{
    const ident_case *c = &ident_cases[_i];
    sq_world *w = open_ef(c->K, c->G, c->preset, c->sets, c->n, 99 + (uint64_t)_i);
    const int N = sq_world_workers(w);
    const uint64_t n = c->n, P = sq_world_padded(w);
    const uint64_t e1n = sq_world_residual_len(w, 0), e2n = sq_world_residual_len(w, 1);
    ck_assert_msg(e1n || e2n, "case %d keeps no residual", _i);
    ck_assert(e1n == 0 || e1n == P);
    ck_assert(e2n == 0 || e2n == P / (uint64_t)c->G);
    ck_assert_uint_eq(sq_world_residual_bytes(w), 4 * (e1n + e2n));
    const sq_scheme *sc = sq_world_scheme(w);
    const uint64_t group = sq_wire_group(sq_world_single_wire(w)); /* owned: one level */
    const float div = sc->grad_mean ? (float)N : 1.0f;
    /* fp64 sums: of the results, of the inputs (per worker), of the
    ** magnitudes for the bound (per worker and hop) */
    double *sum_out = calloc(P, sizeof *sum_out), *sum_in = calloc((size_t)N * P, sizeof *sum_in);
    double *bound = calloc((size_t)N * P, sizeof *bound), *bound2 = calloc(P, sizeof *bound2);
    float *x = malloc(n * sizeof *x), *out = malloc(P * sizeof *out);
    float *e1 = calloc((size_t)N * (e1n ? e1n : 1), sizeof *e1);
    float *e2 = calloc((size_t)N * (e2n ? e2n : 1), sizeof *e2);
    ck_assert(sum_out && sum_in && bound && bound2 && x && out && e1 && e2);
    for (uint32_t t = 0; t < c->steps; t++) {
        for (int r = 0; r < N; r++) {
            make_grad(x, n, group, N, r, c->owned, c->fill, t + 1);
            ck_assert_int_eq(sq_world_put_grad(w, r, x), SQ_OK);
            for (uint64_t i = 0; i < n; i++) {
                float xi = x[i] / div; /* what put_grad keeps */
                sum_in[(uint64_t)r * P + i] += xi;
                bound[(uint64_t)r * P + i] += fabs((double)xi);
            }
            /* |x'_t| <= |x_t| + |e_(t-1)|, and |e_(t-1)| itself */
            if (e1n) add_abs(bound + (uint64_t)r * P, e1 + (uint64_t)r * e1n, e1n, 2.0);
        }
        /* the requantization's input magnitude, per element of the sum */
        for (int r = 0; r < N && e2n; r++)
            for (uint64_t j = 0; j < e2n; j++)
                bound2[e2_element(w, r, j)] += 2.0 * fabs((double)e2[(uint64_t)r * e2n + j]);
        ck_assert_msg(sq_world_reduce_grads(w, t) == SQ_OK, "%s", sq_world_error(w));
        get_out(w, out);
        for (uint64_t i = 0; i < P; i++) {
            sum_out[i] += out[i];
            bound2[i] += 2.0 * fabs((double)out[i]);
        }
        for (int r = 0; r < N; r++) {
            if (e1n) ck_assert_int_eq(sq_world_get_residual(w, r, 0, e1 + (uint64_t)r * e1n), SQ_OK);
            if (e2n) ck_assert_int_eq(sq_world_get_residual(w, r, 1, e2 + (uint64_t)r * e2n), SQ_OK);
            if (e1n) add_abs(bound + (uint64_t)r * P, e1 + (uint64_t)r * e1n, e1n, 1.0);
        }
    }
    /* e2 mapped back: each element gets the residuals of the sums it was in */
    double *with2 = calloc(P, sizeof *with2);
    ck_assert_ptr_nonnull(with2);
    for (int r = 0; r < N && e2n; r++)
        for (uint64_t j = 0; j < e2n; j++) {
            uint64_t i = e2_element(w, r, j);
            ck_assert_uint_lt(i, P);
            with2[i] += e2[(uint64_t)r * e2n + j];
        }
    /* Off the grid, the fp32 sums of the world (decode-sums of N chunks,
    ** the node-local sums) round too: at most N u times the magnitudes of
    ** what they add, which the bound's terms also cover. */
    const double u = 0x1p-24;
    uint64_t bad = 0, nonzero = 0;
    double worst = 0;
    for (uint64_t i = 0; i < P; i++) {
        double lhs = sum_out[i] + with2[i], rhs = 0, mag = bound2[i];
        for (int r = 0; r < N; r++) {
            rhs += sum_in[(uint64_t)r * P + i];
            if (e1n) lhs += e1[(uint64_t)r * e1n + i];
            mag += bound[(uint64_t)r * P + i];
            if (e1n && e1[(uint64_t)r * e1n + i] != 0) nonzero++;
            if (e2n && with2[i] != 0) nonzero++;
        }
        double tol = c->exact ? 0 : (N + 2) * u * (1 + 1e-6) * mag;
        if (fabs(lhs - rhs) > tol && bad++ < 5)
            fprintf(stderr, "case %d, element %llu: %.17g, want %.17g (tolerance %.3g)\n", _i,
                    (unsigned long long)i, lhs, rhs, tol);
        if (fabs(lhs - rhs) > worst) worst = fabs(lhs - rhs);
    }
    free(with2);
    ck_assert_msg(bad == 0, "case %d: %llu elements break the identity (worst %g)", _i,
                  (unsigned long long)bad, worst);
    /* the residual is not trivially zero: the identity was tested */
    ck_assert_uint_gt(nonzero, P / 8);
    /* per worker: where a worker owns the group, the result is its own
    ** decoding, and every other worker's residual there stays zero */
    if (c->owned && e1n)
        for (uint64_t i = 0; i < n; i++) {
            int owner = (int)((i / group) % (uint64_t)N);
            double own = sum_out[i] + e1[(uint64_t)owner * e1n + i];
            SQT_CHECK(c->exact ? own == sum_in[(uint64_t)owner * P + i]
                               : fabs(own - sum_in[(uint64_t)owner * P + i]) <=
                                     u * (1 + u) * bound[(uint64_t)owner * P + i] + 1e-30,
                      "case %d element %llu: worker %d's identity", _i, (unsigned long long)i,
                      owner);
            for (int r = 0; r < N; r++)
                SQT_CHECK(r == owner || e1[(uint64_t)r * e1n + i] == 0.0f,
                          "case %d element %llu: worker %d holds a residual in worker %d's group",
                          _i, (unsigned long long)i, r, owner);
        }
    free(sum_out), free(sum_in), free(bound), free(bound2), free(x), free(out), free(e1), free(e2);
    sq_world_close(w);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* State: persistence, per worker, reset                                    */
/* ------------------------------------------------------------------------ */

static int all_zero(const float *x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (x[i] != 0.0f) return 0;
    return 1;
}

START_TEST(test_persists_and_resets)
{
    static const char *const sets[] = {"grad.kind=sym", "grad.bits=2", "grad.ef=1", NULL};
    sq_world *w = open_ef(1, 4, "qsdp", sets, 1000, 5);
    const int N = sq_world_workers(w);
    const uint64_t n = 1000, P = sq_world_padded(w);
    float *x = malloc(n * 4), *zero = calloc(n, 4), *out = malloc(P * 4);
    float *e = malloc((size_t)N * P * 4), *e_after = malloc(P * 4);
    ck_assert(x && zero && out && e && e_after);
    /* a fresh world: zero residuals, no statistic yet */
    for (int r = 0; r < N; r++) {
        ck_assert_int_eq(sq_world_get_residual(w, r, 0, e + (uint64_t)r * P), SQ_OK);
        ck_assert(all_zero(e + (uint64_t)r * P, P));
    }
    ck_assert_int_eq(sq_world_get_residual(w, 0, 1, e), SQ_ERR_ARG); /* a2a: no second hop */
    for (int r = 0; r < N; r++) {
        sqt_fill(x, n, 40 + (uint64_t)r);
        ck_assert_int_eq(sq_world_put_grad(w, r, x), SQ_OK);
    }
    ck_assert_int_eq(sq_world_reduce_grads(w, 0), SQ_OK);
    /* per worker: each keeps its own, and they differ */
    for (int r = 0; r < N; r++) {
        ck_assert_int_eq(sq_world_get_residual(w, r, 0, e + (uint64_t)r * P), SQ_OK);
        ck_assert(!all_zero(e + (uint64_t)r * P, n));
        if (r) ck_assert(memcmp(e, e + (uint64_t)r * P, P * 4) != 0);
    }
    /* the statistic: the mean over workers of |e_r| / |x_r|, x_r as put */
    double want = 0;
    for (int r = 0; r < N; r++) {
        double e2 = 0, x2 = 0, ge2, gx2;
        sqt_fill(x, n, 40 + (uint64_t)r);
        for (uint64_t i = 0; i < n; i++) {
            double xi = x[i] / (float)N;
            x2 += xi * xi;
        }
        for (uint64_t i = 0; i < P; i++) e2 += (double)e[(uint64_t)r * P + i] * e[(uint64_t)r * P + i];
        ck_assert_int_eq(sq_world_residual_norms(w, r, &ge2, &gx2), 1);
        ck_assert_double_eq_tol(ge2, e2, 1e-12 * e2);
        ck_assert_double_eq_tol(gx2, x2, 1e-12 * x2);
        want += sqrt(e2 / x2) / N;
    }
    double rel = sq_world_residual_rel(w);
    ck_assert_double_eq_tol(rel, want, 1e-12);
    ck_assert(rel > 0.05 && isfinite(rel)); /* 2 bits: a residual of some size */
    /* a step of zero gradients still sends the residual: it persisted */
    for (int r = 0; r < N; r++) ck_assert_int_eq(sq_world_put_grad(w, r, zero), SQ_OK);
    ck_assert_int_eq(sq_world_reduce_grads(w, 1), SQ_OK);
    get_out(w, out);
    ck_assert(!all_zero(out, P));
    ck_assert_int_eq(sq_world_get_residual(w, 0, 0, e_after), SQ_OK);
    ck_assert(memcmp(e_after, e, P * 4) != 0);
    ck_assert(isinf(sq_world_residual_rel(w))); /* a residual against a zero gradient */
    /* reset: zeros again, and zeros in give zeros out */
    ck_assert_int_eq(sq_world_reset_residuals(w), SQ_OK);
    for (int r = 0; r < N; r++) {
        ck_assert_int_eq(sq_world_get_residual(w, r, 0, e), SQ_OK);
        ck_assert(all_zero(e, P));
    }
    ck_assert_int_eq(sq_world_reduce_grads(w, 2), SQ_OK);
    get_out(w, out);
    ck_assert(all_zero(out, P));
    ck_assert_double_eq(sq_world_residual_rel(w), 0.0);
    free(x), free(zero), free(out), free(e), free(e_after);
    sq_world_close(w);
}
END_TEST

/* Two worlds of the same seed keep the same residuals; a third, opened
** and run twice over the same steps with a reset between, too. */
START_TEST(test_deterministic)
{
    static const char *const sets[] = {"grad.ef=1", NULL};
    sq_world *a = open_ef(2, 2, "tlqhs", sets, 3000, 8), *b = open_ef(2, 2, "tlqhs", sets, 3000, 8);
    const int N = sq_world_workers(a);
    const uint64_t n = 3000, P = sq_world_padded(a), Q = sq_world_residual_len(a, 1);
    float *x = malloc(n * 4), *ea = malloc(P * 4), *eb = malloc(P * 4);
    ck_assert(x && ea && eb);
    for (int round = 0; round < 2; round++) {
        for (uint32_t t = 0; t < 3; t++) {
            for (int r = 0; r < N; r++) {
                sqt_fill(x, n, 7 * t + (uint64_t)r);
                ck_assert_int_eq(sq_world_put_grad(a, r, x), SQ_OK);
                if (!round) ck_assert_int_eq(sq_world_put_grad(b, r, x), SQ_OK);
            }
            ck_assert_int_eq(sq_world_reduce_grads(a, t), SQ_OK);
            if (!round) ck_assert_int_eq(sq_world_reduce_grads(b, t), SQ_OK);
        }
        for (int r = 0; r < N; r++)
            for (int hop = 0; hop < 2; hop++) {
                uint64_t len = hop ? Q : P;
                ck_assert_int_eq(sq_world_get_residual(a, r, hop, ea), SQ_OK);
                ck_assert_int_eq(sq_world_get_residual(b, r, hop, eb), SQ_OK);
                ck_assert(memcmp(ea, eb, len * 4) == 0);
            }
        ck_assert_int_eq(sq_world_reset_residuals(a), SQ_OK);
    }
    free(x), free(ea), free(eb);
    sq_world_close(a);
    sq_world_close(b);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* What EF changes, and what it does not                                    */
/* ------------------------------------------------------------------------ */

/* A lossless wire (fp32) leaves nothing to feed back: the residual stays
** zero and the bytes on the wire are those without EF. A bf16 wire keeps
** its rounding. Sizes and traffic never change. */
START_TEST(test_lossless_and_traffic)
{
    static const char *const f32_on[] = {"grad.mode=a2a", "grad.ef=1", NULL};
    static const char *const f32_off[] = {"grad.mode=a2a", NULL};
    static const char *const bf_on[] = {"grad.mode=twolevel", "grad.bits=16", "grad.ef=1", NULL};
    sq_world_config ca = sqt_world_config(2, 4, "baseline", NULL, 2500, 3), cb = ca;
    sq_error err = {0};
    for (int i = 0; f32_on[i]; i++) ck_assert_int_eq(sq_scheme_set(&ca.scheme, f32_on[i], &err), 0);
    for (int i = 0; f32_off[i]; i++) ck_assert_int_eq(sq_scheme_set(&cb.scheme, f32_off[i], &err), 0);
    ca.digest = cb.digest = 1;
    sq_world *a, *b;
    ck_assert_int_eq(sq_world_open(&ca, &a, &err), SQ_OK);
    ck_assert_int_eq(sq_world_open(&cb, &b, &err), SQ_OK);
    sq_world *c = open_ef(2, 4, "baseline", bf_on, 2500, 3);
    const int N = sq_world_workers(a);
    const uint64_t n = 2500, P = sq_world_padded(a), S = sq_world_shard(a);
    float *x = malloc(n * 4), *e = malloc(P * 4), *ga = malloc(S * 4), *gb = malloc(S * 4);
    ck_assert(x && e && ga && gb);
    for (uint32_t t = 0; t < 3; t++) {
        for (int r = 0; r < N; r++) {
            sqt_fill(x, n, 100 * t + (uint64_t)r);
            ck_assert_int_eq(sq_world_put_grad(a, r, x), SQ_OK);
            ck_assert_int_eq(sq_world_put_grad(b, r, x), SQ_OK);
            ck_assert_int_eq(sq_world_put_grad(c, r, x), SQ_OK);
        }
        ck_assert_int_eq(sq_world_reduce_grads(a, t), SQ_OK);
        ck_assert_int_eq(sq_world_reduce_grads(b, t), SQ_OK);
        ck_assert_int_eq(sq_world_reduce_grads(c, t), SQ_OK);
    }
    for (int r = 0; r < N; r++) {
        ck_assert_uint_eq(sq_world_wire_digest(a, r), sq_world_wire_digest(b, r));
        ck_assert_int_eq(sq_world_get_grad_shard(a, r, ga), SQ_OK);
        ck_assert_int_eq(sq_world_get_grad_shard(b, r, gb), SQ_OK);
        ck_assert(memcmp(ga, gb, S * 4) == 0);
        ck_assert_int_eq(sq_world_get_residual(a, r, 0, e), SQ_OK);
        ck_assert(all_zero(e, P));
        ck_assert(memcmp(sq_world_traffic(a, r), sq_world_traffic(b, r), sizeof(sq_traffic)) == 0);
        /* bf16: the residual of the cast, at both hops */
        ck_assert_int_eq(sq_world_get_residual(c, r, 0, e), SQ_OK);
        ck_assert(!all_zero(e, n));
        ck_assert_int_eq(sq_world_get_residual(c, r, 1, e), SQ_OK);
        ck_assert(!all_zero(e, sq_world_residual_len(c, 1)));
    }
    ck_assert_double_eq(sq_world_residual_rel(a), 0.0);
    ck_assert(isnan(sq_world_residual_rel(b)));
    ck_assert_uint_eq(sq_world_residual_bytes(b), 0);
    ck_assert(sq_world_residual_rel(c) > 0 && sq_world_residual_rel(c) < 0x1p-7);
    free(x), free(e), free(ga), free(gb);
    sq_world_close(a);
    sq_world_close(b);
    sq_world_close(c);
    /* a dry world counts the same bytes with it and holds nothing */
    static const char *const tl_on[] = {"grad.ef=1", NULL};
    sq_world_config d1 = sqt_world_config(2, 4, "tlqhs", NULL, 100000, 1), d2 = d1;
    ck_assert_int_eq(sq_scheme_set(&d1.scheme, tl_on[0], &err), SQ_OK);
    d1.dry = d2.dry = 1;
    ck_assert_int_eq(sq_world_open(&d1, &a, &err), SQ_OK);
    ck_assert_int_eq(sq_world_open(&d2, &b, &err), SQ_OK);
    ck_assert_int_eq(sq_world_reduce_grads(a, 0), SQ_OK);
    ck_assert_int_eq(sq_world_reduce_grads(b, 0), SQ_OK);
    for (int r = 0; r < sq_world_workers(a); r++)
        ck_assert(memcmp(sq_world_traffic(a, r), sq_world_traffic(b, r), sizeof(sq_traffic)) == 0);
    ck_assert(isnan(sq_world_residual_rel(a)));
    sq_world_close(a);
    sq_world_close(b);
}
END_TEST

/* One worker has no hop: nothing is kept, nothing measured. Ring schemes
** refuse it (check_scheme); a one-worker world of an a2a scheme runs. */
START_TEST(test_one_worker)
{
    static const char *const sets[] = {"grad.ef=1", NULL};
    sq_world *w = open_ef(1, 1, "qsdp", sets, 100, 1);
    ck_assert_uint_eq(sq_world_residual_bytes(w), 0);
    float x[100];
    sqt_fill(x, 100, 1);
    ck_assert_int_eq(sq_world_put_grad(w, 0, x), SQ_OK);
    ck_assert_int_eq(sq_world_reduce_grads(w, 0), SQ_OK);
    ck_assert(isnan(sq_world_residual_rel(w)));
    ck_assert_int_eq(sq_world_get_residual(w, 0, 0, x), SQ_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(sq_world_error(w), "residual"));
    sq_world_close(w);
}
END_TEST

/*
** The accumulated error of the sum over T steps, |sum_t out_t - sum_t
** exact_t| / |sum_t exact_t|, with and without EF. A biased compressor
** (2-bit symmetric, round to nearest) given the same gradient every step
** makes the same error every step: it grows as T without EF and stays the
** size of one residual with it. An unbiased one (stochastic rounding)
** grows as sqrt(T) without EF. So EF must win by far over RTN, and still
** clearly over SR.
*/
static double accumulated_error(const char *round, int ef, uint32_t steps)
{
    char kv[32];
    snprintf(kv, sizeof kv, "grad.round=%s", round);
    const char *sets[] = {"grad.kind=sym", "grad.bits=2", "grad.group=128", kv,
                          ef ? "grad.ef=1" : "grad.ef=0", NULL};
    sq_world *w = open_ef(2, 2, "qsdp", sets, 4000, 17);
    const int N = sq_world_workers(w);
    const uint64_t n = 4000, P = sq_world_padded(w);
    float *x = malloc(n * 4), *out = malloc(P * 4);
    double *got = calloc(P, sizeof *got), *want = calloc(P, sizeof *want);
    ck_assert(x && out && got && want);
    for (uint32_t t = 0; t < steps; t++) {
        for (int r = 0; r < N; r++) {
            make_grad(x, n, 128, N, r, 0, FILL_CONST, 0);
            ck_assert_int_eq(sq_world_put_grad(w, r, x), SQ_OK);
            for (uint64_t i = 0; i < n; i++) want[i] += (double)(x[i] / (float)N);
        }
        ck_assert_int_eq(sq_world_reduce_grads(w, t), SQ_OK);
        get_out(w, out);
        for (uint64_t i = 0; i < P; i++) got[i] += out[i];
    }
    double e2 = 0, x2 = 0;
    for (uint64_t i = 0; i < n; i++) {
        e2 += (got[i] - want[i]) * (got[i] - want[i]);
        x2 += want[i] * want[i];
    }
    free(x), free(out), free(got), free(want);
    sq_world_close(w);
    return sqrt(e2 / x2);
}

START_TEST(test_reduces_accumulated_error)
{
    const uint32_t T = 128;
    double rtn_off = accumulated_error("rtn", 0, T), rtn_on = accumulated_error("rtn", 1, T);
    double sr_off = accumulated_error("sr", 0, T), sr_on = accumulated_error("sr", 1, T);
    double rtn_one = accumulated_error("rtn", 0, 1);
    fprintf(stderr, "accumulated error over %u steps: rtn %.4g -> %.4g with EF, sr %.4g -> %.4g\n",
            T, rtn_off, rtn_on, sr_off, sr_on);
    /* without EF a biased compressor's error does not average out */
    ck_assert_double_eq_tol(rtn_off, rtn_one, 1e-9);
    ck_assert(rtn_off > 0.2);
    ck_assert_msg(rtn_on < 0.1 * rtn_off, "rtn: %g with EF, %g without", rtn_on, rtn_off);
    ck_assert_msg(sr_on < 0.5 * sr_off, "sr: %g with EF, %g without", sr_on, sr_off);
    /* and SR alone already beats RTN alone: it is unbiased */
    ck_assert(sr_off < rtn_off);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ef");
    TCase *ti = tcase_create("identity");
    tcase_set_timeout(ti, 120);
    tcase_add_loop_test(ti, test_identity, 0, (int)(sizeof ident_cases / sizeof ident_cases[0]));
    suite_add_tcase(s, ti);
    TCase *tstate = tcase_create("state");
    tcase_add_test(tstate, test_persists_and_resets);
    tcase_add_test(tstate, test_deterministic);
    tcase_add_test(tstate, test_one_worker);
    suite_add_tcase(s, tstate);
    TCase *te = tcase_create("effect");
    tcase_set_timeout(te, 120);
    tcase_add_test(te, test_lossless_and_traffic);
    tcase_add_test(te, test_reduces_accumulated_error);
    suite_add_tcase(s, te);
    return sqt_run(s);
}
