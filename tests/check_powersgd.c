/*
** check_powersgd.c -- grad.mode=powersgd: PowerSGD's low-rank all-reduces in
** the sharded world, against a straight-line reference written here.
**
**   - the world's reduced partitions and each worker's residual equal, byte
**     for byte, a scalar transcription of the rules of docs/schemes.md (PowerSGD)
**     (normals by Box-Muller on sq_uniform24, Gram-Schmidt, products summed
**     in double in index order, P and Q summed in the ring's order per
**     chunk, A = P Q^T, e = M - A / N) over three steps, with and without
**     warm start and error feedback, with an epsilon, on chunks of uneven
**     length;
**   - a sum of worker gradients of rank r is rebuilt to fp32 accuracy;
**   - the bytes of a step are the closed form: two ring all-reduces of
**     (rows + cols) rank fp32 values per compressed tensor, plus the ring
**     reduce-scatter of the tensors PyTorch's rule leaves uncompressed,
**     per worker and per link level;
**   - error feedback's identity over many steps: the results plus the
**     workers' final residuals sum to the inputs, within the bound of the
**     fp32 roundings it takes (derived below);
**   - the bytes do not depend on the thread count;
**   - grad.powersgd.start: the steps before it are the baseline's ring;
**   - the knobs, their text and their refusals; overflow is an error.
** Only sq_uniform24 (the Philox stream) comes from the library.
*/
#include "check_util.h"
#include "shardq/layout.h"
#include "shardq/world.h"
#include "world/world_internal.h" /* the workers' residuals */

#include <math.h>

/* ------------------------------------------------------------------------ */
/* The reference                                                            */
/* ------------------------------------------------------------------------ */

typedef struct ref {
    int N, r, warm, ef;
    uint64_t m, c, n, seed;
    float eps;
    float *e;  /* N x n residuals */
    float *q;  /* c x r, the last step's sum */
    int have_q;
} ref;

/* Chunk z of len elements among N: the first len mod N chunks one longer. */
static uint64_t chunk_of(uint64_t i, uint64_t len, int N)
{
    uint64_t base = len / (uint64_t)N, rem = len % (uint64_t)N;
    for (int z = 0; z < N; z++) {
        uint64_t lo = (uint64_t)z * base + ((uint64_t)z < rem ? (uint64_t)z : rem);
        uint64_t hi = lo + base + ((uint64_t)z < rem ? 1 : 0);
        if (i >= lo && i < hi) return (uint64_t)z;
    }
    ck_abort_msg("element %llu outside %llu", (unsigned long long)i, (unsigned long long)len);
    return 0;
}

/* sum[i] = x[z+1][i] + x[z+2][i] + ... + x[z][i], left to right, z = i's chunk */
static void ring_sum(float *const *x, int N, uint64_t len, float *sum)
{
    for (uint64_t i = 0; i < len; i++) {
        int z = (int)chunk_of(i, len, N);
        float s = x[(z + 1) % N][i];
        for (int t = 2; t <= N; t++) s = s + x[(z + t) % N][i];
        sum[i] = s;
    }
}

static void gram_schmidt(float *a, uint64_t rows, int r, float eps)
{
    for (int k = 0; k < r; k++) {
        double ss = 0;
        for (uint64_t i = 0; i < rows; i++) ss += (double)a[i * r + k] * (double)a[i * r + k];
        float d = (float)sqrt(ss) + eps;
        for (uint64_t i = 0; i < rows; i++) a[i * r + k] = d > 0 ? a[i * r + k] / d : 0.0f;
        for (int l = k + 1; l < r; l++) {
            double dot = 0;
            for (uint64_t i = 0; i < rows; i++) dot += (double)a[i * r + k] * (double)a[i * r + l];
            float df = (float)dot;
            for (uint64_t i = 0; i < rows; i++) {
                float t = df * a[i * r + k];
                a[i * r + l] = a[i * r + l] - t;
            }
        }
    }
}

/* One step: x[w] the inputs as the world holds them (divided by N), out = A. */
static void ref_step(ref *R, float *const *x, uint32_t step, float *out)
{
    const int N = R->N, r = R->r;
    const uint64_t m = R->m, c = R->c, n = R->n;
    float **M = calloc((size_t)N, sizeof *M), **P = calloc((size_t)N, sizeof *P);
    float **Q = calloc((size_t)N, sizeof *Q);
    float *p = malloc(m * (uint64_t)r * 4), *q = R->q;
    ck_assert(M && P && Q && p);
    for (int w = 0; w < N; w++) {
        M[w] = calloc(m * c, 4), P[w] = malloc(m * (uint64_t)r * 4), Q[w] = malloc(c * (uint64_t)r * 4);
        ck_assert(M[w] && P[w] && Q[w]);
        for (uint64_t i = 0; i < n; i++) M[w][i] = R->ef ? x[w][i] + R->e[w * n + i] : x[w][i];
    }
    if (!(R->warm && R->have_q)) {
        sq_rng_key key = {R->seed, step, 0, 16};
        for (uint64_t i = 0; i < c * (uint64_t)r; i++) {
            double u1 = sq_uniform24(&key, 2 * i), u2 = sq_uniform24(&key, 2 * i + 1);
            q[i] = (float)(sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2));
        }
    }
    gram_schmidt(q, c, r, R->eps);
    for (int w = 0; w < N; w++)
        for (uint64_t i = 0; i < m; i++)
            for (int k = 0; k < r; k++) {
                double s = 0;
                for (uint64_t j = 0; j < c; j++) s += (double)M[w][i * c + j] * (double)q[j * r + k];
                P[w][i * r + k] = (float)s;
            }
    ring_sum(P, N, m * (uint64_t)r, p);
    gram_schmidt(p, m, r, R->eps);
    for (int w = 0; w < N; w++)
        for (uint64_t j = 0; j < c; j++)
            for (int k = 0; k < r; k++) {
                double s = 0;
                for (uint64_t i = 0; i < m; i++) s += (double)M[w][i * c + j] * (double)p[i * r + k];
                Q[w][j * r + k] = (float)s;
            }
    ring_sum(Q, N, c * (uint64_t)r, q);
    for (uint64_t e = 0; e < n; e++) {
        double s = 0;
        for (int k = 0; k < r; k++) s += (double)p[(e / c) * r + k] * (double)q[(e % c) * r + k];
        out[e] = (float)s;
    }
    for (int w = 0; w < N; w++)
        for (uint64_t e = 0; e < n; e++) {
            float a = out[e] / (float)N;
            R->e[w * n + e] = R->ef ? M[w][e] - a : 0.0f;
        }
    R->have_q = 1;
    for (int w = 0; w < N; w++) free(M[w]), free(P[w]), free(Q[w]);
    free(M), free(P), free(Q), free(p);
}

/* ------------------------------------------------------------------------ */
/* Worlds                                                                   */
/* ------------------------------------------------------------------------ */

/* A world of one m x c tensor under powersgd with the knobs `set` ("a;b"). */
static sq_world *open_matrix(int K, int G, uint64_t m, uint64_t c, const char *set, uint64_t seed,
                             int dry)
{
    sq_world_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.topo.nodes = K, cfg.topo.per_node = G;
    sq_error err = {0};
    ck_assert_int_eq(sq_scheme_preset("powersgd", &cfg.scheme, &err), SQ_OK);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", set ? set : "");
    char *save = NULL;
    for (char *kv = strtok_r(buf, ";", &save); kv; kv = strtok_r(NULL, ";", &save))
        ck_assert_msg(sq_scheme_set(&cfg.scheme, kv, &err) == SQ_OK, "%s: %s", kv, err.msg);
    const uint64_t shape[2] = {m, c};
    sq_scheme one;
    ck_assert_int_eq(sq_scheme_for_tensor(&cfg.scheme, &cfg.topo, shape, 2, &one, &err), SQ_OK);
    ck_assert_uint_eq(one.psgd_view_cols, c);
    cfg.scheme = one;
    cfg.elements = m * c;
    cfg.seed = seed;
    cfg.dry = dry;
    sq_world *w = NULL;
    ck_assert_msg(sq_world_open(&cfg, &w, &err) == SQ_OK, "%s", err.msg);
    return w;
}

/* Every worker's partition into out (n elements). */
static void gather(sq_world *w, float *out)
{
    const int N = sq_world_workers(w);
    const uint64_t S = sq_world_shard(w), n = sq_world_elements(w);
    float *sh = malloc(S * 4);
    ck_assert_ptr_nonnull(sh);
    for (int r = 0; r < N; r++) {
        ck_assert_int_eq(sq_world_get_grad_shard(w, r, sh), SQ_OK);
        for (uint64_t i = 0; i < S && (uint64_t)r * S + i < n; i++) out[(uint64_t)r * S + i] = sh[i];
        for (uint64_t i = sq_world_shard_len(w, r); i < S; i++) ck_assert(sh[i] == 0.0f);
    }
    free(sh);
}

/* ------------------------------------------------------------------------ */
/* (a) the reference                                                        */
/* ------------------------------------------------------------------------ */

static const struct {
    int K, G;
    uint64_t m, c;
    const char *set;
} refcases[] = {
    {1, 3, 12, 10, "grad.powersgd.rank=2"},
    {2, 2, 12, 10, "grad.powersgd.rank=2"},
    {2, 2, 7, 9, NULL}, /* P's 7 and Q's 9 values in chunks of uneven length */
    {1, 4, 16, 12, "grad.powersgd.rank=3;grad.powersgd.warm=0"},
    {2, 3, 16, 12, "grad.powersgd.rank=2;grad.powersgd.ef=0"},
    {3, 1, 20, 14, "grad.powersgd.rank=2;grad.powersgd.eps=1e-8"},
    {1, 2, 9, 30, "grad.powersgd.rank=4;grad.powersgd.minrate=0.5"},
};

START_TEST(test_reference)
{
    const int K = refcases[_i].K, G = refcases[_i].G, N = K * G;
    const uint64_t m = refcases[_i].m, c = refcases[_i].c, n = m * c, seed = 77 + (uint64_t)_i;
    sq_world *w = open_matrix(K, G, m, c, refcases[_i].set, seed, 0);
    ck_assert_int_eq(sq_world_grad_path(w), SQ_GRAD_POWERSGD);
    const sq_scheme *s = sq_world_scheme(w);
    ref R = {N, w->L.psgd_rank, s->psgd_warm, s->psgd_ef, m, c, n, seed, s->psgd_eps,
             calloc((size_t)N * n, 4), malloc(c * 8 * 4), 0};
    ck_assert(R.e && R.q);
    ck_assert_int_eq(R.r, s->psgd_rank);
    float **x = calloc((size_t)N, sizeof *x), *g = malloc(n * 4), *want = malloc(n * 4);
    float *got = malloc(n * 4);
    ck_assert(x && g && want && got);
    for (uint32_t step = 4; step < 7; step++) {
        for (int r = 0; r < N; r++) {
            sqt_fill(g, n, 1000 * step + (uint64_t)r);
            if (r == 1) /* a strong common direction, so that warm start matters */
                for (uint64_t i = 0; i < n; i++) g[i] += (float)((i / c) % 3) * (float)(i % c) * 0.25f;
            ck_assert_int_eq(sq_world_put_grad(w, r, g), SQ_OK);
            x[r] = realloc(x[r], n * 4);
            for (uint64_t i = 0; i < n; i++) x[r][i] = g[i] / (float)N;
        }
        ck_assert_msg(sq_world_reduce_grads(w, step) == SQ_OK, "%s", sq_world_error(w));
        ref_step(&R, x, step, want);
        gather(w, got);
        for (uint64_t i = 0; i < n; i++)
            ck_assert_msg(sqt_bits(got[i]) == sqt_bits(want[i]),
                          "case %d step %u element %llu: %.9g, reference %.9g", _i, step,
                          (unsigned long long)i, got[i], want[i]);
        for (int r = 0; r < N && R.ef; r++) /* without error feedback it keeps M */
            ck_assert_msg(memcmp(w->workers[r].psgd_m, R.e + (uint64_t)r * n, n * 4) == 0,
                          "case %d step %u: worker %d's residual differs", _i, step, r);
    }
    for (int r = 0; r < N; r++) free(x[r]);
    free(x), free(g), free(want), free(got), free(R.e), free(R.q);
    sq_world_close(w);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* (b) a rank-r sum is rebuilt                                              */
/* ------------------------------------------------------------------------ */

/* The relative L2 error of the world's result against the exact mean, for
** worker gradients U V_w^T of one U (their mean has rank r). */
static double rank_error(int rank, int r)
{
    const int K = 2, G = 2, N = K * G;
    const uint64_t m = 64, c = 48, n = m * c;
    char set[64];
    snprintf(set, sizeof set, "grad.powersgd.rank=%d", rank);
    sq_world *w = open_matrix(K, G, m, c, set, 5, 0);
    sqt_rng rng = {99};
    float *U = malloc(m * (uint64_t)r * 4), *V = malloc(c * (uint64_t)r * 4), *g = malloc(n * 4);
    double *exact = calloc(n, sizeof *exact);
    float *got = malloc(n * 4);
    ck_assert(U && V && g && exact && got);
    for (uint64_t i = 0; i < m * (uint64_t)r; i++) U[i] = sqt_sym(&rng);
    for (int q = 0; q < N; q++) {
        for (uint64_t i = 0; i < c * (uint64_t)r; i++) V[i] = sqt_sym(&rng);
        for (uint64_t e = 0; e < n; e++) {
            double s = 0;
            for (int k = 0; k < r; k++) s += (double)U[(e / c) * r + k] * (double)V[(e % c) * r + k];
            g[e] = (float)s;
            exact[e] += (double)g[e] / N;
        }
        ck_assert_int_eq(sq_world_put_grad(w, q, g), SQ_OK);
    }
    ck_assert_int_eq(sq_world_reduce_grads(w, 1), SQ_OK);
    gather(w, got);
    double num = 0, den = 0;
    for (uint64_t e = 0; e < n; e++) {
        num += ((double)got[e] - exact[e]) * ((double)got[e] - exact[e]);
        den += exact[e] * exact[e];
    }
    free(U), free(V), free(g), free(exact), free(got);
    sq_world_close(w);
    return sqrt(num / den);
}

START_TEST(test_exact_rank)
{
    static const int ranks[] = {1, 2, 4};
    const int r = ranks[_i];
    /* fp32 inputs whose mean has rank r: a few ulps of error, not a rank's worth */
    double e = rank_error(r, r);
    ck_assert_msg(e < 2e-6, "rank %d: relative error %g", r, e);
    /* one rank less cannot */
    if (r > 1) {
        e = rank_error(r - 1, r);
        ck_assert_msg(e > 1e-2, "rank %d of a rank-%d mean: relative error %g", r - 1, r, e);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* (c) bytes: the closed form                                               */
/* ------------------------------------------------------------------------ */

/* What worker r sends in two ring all-reduces of lp and lq fp32 values:
** every chunk but its own (reduce-scatter) and every chunk but its
** successor's (all-gather), 4 bytes each. */
static uint64_t ring_allreduce_bytes(uint64_t len, int N, int r)
{
    uint64_t base = len / (uint64_t)N, rem = len % (uint64_t)N;
    uint64_t own = base + ((uint64_t)r < rem), succ = base + ((uint64_t)((r + 1) % N) < rem);
    return 4 * (2 * len - own - succ);
}

START_TEST(test_bytes_closed_form)
{
    static const int topos[][2] = {{2, 4}, {1, 3}, {3, 1}, {2, 3}};
    const int K = topos[_i][0], G = topos[_i][1], N = K * G;
    /* a matrix, a bias (1-D: n x 1 never compresses), a 3 x 3 ((3 + 3) 2 > 9),
    ** a 3-D tensor viewed as 50 x 80 */
    static const uint64_t shapes[][3] = {{64, 32, 0}, {100, 0, 0}, {3, 3, 0}, {50, 40, 2}};
    static const int ndims[] = {2, 1, 2, 3};
    static const int compressed[] = {1, 0, 0, 1};
    uint64_t sizes[4];
    for (int t = 0; t < 4; t++) {
        sizes[t] = 1;
        for (int d = 0; d < ndims[t]; d++) sizes[t] *= shapes[t][d];
    }
    sq_world_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.topo.nodes = K, cfg.topo.per_node = G;
    cfg.dry = 1;
    cfg.seed = 3;
    ck_assert_int_eq(sq_scheme_preset("powersgd", &cfg.scheme, NULL), SQ_OK);
    sq_layout lay;
    ck_assert_int_eq(sq_layout_for_scheme(&cfg.scheme, sizes, 4, &lay, NULL), SQ_OK);
    ck_assert_int_eq(lay.kind, SQ_LAYOUT_PARAM);
    sq_traffic sum;
    memset(&sum, 0, sizeof sum);
    uint64_t want_link[SQ_NLINK] = {0, 0}, want_params = 0, want_msgs = 0;
    for (size_t u = 0; u < lay.nunits; u++) {
        size_t p = lay.slots[lay.units[u].first].param;
        sq_world *w = NULL;
        sq_error err = {0};
        ck_assert_msg(sq_layout_open_world(&lay, u, &cfg, shapes[p], ndims[p], &w, &err) == SQ_OK,
                      "%s", err.msg);
        ck_assert_int_eq(sq_world_reduce_grads(w, 1), SQ_OK);
        ck_assert_int_eq(sq_world_grad_path(w), compressed[p] ? SQ_GRAD_POWERSGD : SQ_GRAD_RING);
        const uint64_t n = sizes[p];
        for (int r = 0; r < N; r++) {
            const int link = r / G == ((r + 1) % N) / G ? SQ_LINK_INTRA : SQ_LINK_INTER;
            if (compressed[p]) {
                const uint64_t rows = shapes[p][0], cols = n / rows;
                want_link[link] += ring_allreduce_bytes(rows, N, r) + ring_allreduce_bytes(cols, N, r);
                want_msgs += 4 * (uint64_t)(N - 1);
            } else {
                /* the baseline's ring reduce-scatter of the padded buffer */
                const uint64_t unit = 8 * (uint64_t)N, padded = (n + unit - 1) / unit * unit;
                want_link[link] += 4 * (uint64_t)(N - 1) * (padded / (uint64_t)N);
                want_msgs += (uint64_t)(N - 1);
            }
        }
        want_params += (uint64_t)(N - 1) * n;
        sq_world_add_traffic(w, &sum);
        sq_world_close(w);
    }
    sq_layout_free(&lay);
    const sq_link_traffic *x = sum.t[SQ_COLL_GRAD];
    for (int l = 0; l < SQ_NLINK; l++) {
        ck_assert_uint_eq(x[l].sent_codes, want_link[l]);
        ck_assert_uint_eq(x[l].recv_codes, want_link[l]);
        ck_assert_uint_eq(x[l].sent_meta + x[l].recv_meta, 0);
    }
    ck_assert_uint_eq(x[0].sent_params + x[1].sent_params, want_params);
    ck_assert_uint_eq(x[0].messages + x[1].messages, want_msgs);
    /* the all-workers total: 2 (N - 1) (rows + cols) rank values, 4 bytes each, per matrix */
    uint64_t total = x[0].sent_codes + x[1].sent_codes, unc = 0;
    for (int t = 1; t <= 2; t++) {
        const uint64_t unit = 8 * (uint64_t)N;
        unc += 4 * (uint64_t)(N - 1) * ((sizes[t] + unit - 1) / unit * unit);
    }
    ck_assert_uint_eq(total, 8 * (uint64_t)(N - 1) * ((64 + 32) + (50 + 80)) + unc);
}
END_TEST

/* Rank 4: four times the factors' bytes; a bucket world views its flat
** buffer through grad.powersgd.cols (or ceil(sqrt(n))). */
START_TEST(test_bytes_views)
{
    const int N = 8;
    sq_world *w = open_matrix(2, 4, 64, 32, "grad.powersgd.rank=4", 1, 1);
    ck_assert_int_eq(sq_world_reduce_grads(w, 1), SQ_OK);
    sq_traffic t;
    memset(&t, 0, sizeof t);
    sq_world_add_traffic(w, &t);
    ck_assert_uint_eq(t.t[SQ_COLL_GRAD][0].sent_codes + t.t[SQ_COLL_GRAD][1].sent_codes,
                      8 * (uint64_t)(N - 1) * (64 + 32) * 4);
    sq_world_close(w);
    static const struct {
        const char *set;
        uint64_t n, rows, cols;
    } flat[] = {{"grad.powersgd.cols=100", 1000, 10, 100},
                {"grad.powersgd.cols=300", 1000, 4, 300},
                {"grad.powersgd.cols=0", 1000, 32, 32},
                {"grad.powersgd.cols=0", 1024, 32, 32},
                {"grad.powersgd.cols=0", 1025, 32, 33}};
    for (size_t i = 0; i < sizeof flat / sizeof flat[0]; i++) {
        sq_world_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.topo.nodes = 2, cfg.topo.per_node = 4;
        ck_assert_int_eq(sq_scheme_preset("baseline", &cfg.scheme, NULL), SQ_OK);
        ck_assert_int_eq(sq_scheme_set(&cfg.scheme, "grad.mode=powersgd", NULL), SQ_OK);
        ck_assert_int_eq(sq_scheme_set(&cfg.scheme, flat[i].set, NULL), SQ_OK);
        cfg.elements = flat[i].n;
        cfg.dry = 1;
        sq_error err = {0};
        ck_assert_msg(sq_world_open(&cfg, &w, &err) == SQ_OK, "%s", err.msg);
        ck_assert_int_eq(sq_world_grad_path(w), SQ_GRAD_POWERSGD);
        ck_assert_uint_eq(w->L.psgd_rows, flat[i].rows);
        ck_assert_uint_eq(w->L.psgd_cols, flat[i].cols);
        ck_assert_int_eq(sq_world_reduce_grads(w, 1), SQ_OK);
        memset(&t, 0, sizeof t);
        sq_world_add_traffic(w, &t);
        ck_assert_uint_eq(t.t[SQ_COLL_GRAD][0].sent_codes + t.t[SQ_COLL_GRAD][1].sent_codes,
                          8 * (uint64_t)(N - 1) * (flat[i].rows + flat[i].cols));
        sq_world_close(w);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* (d) error feedback's identity                                            */
/* ------------------------------------------------------------------------ */

/*
** Per worker and step, in exact arithmetic with the roundings d1, d2, d3
** (|d| <= u |result|, u = 2^-24, round to nearest):
**   M  = x + e + d1,  a = A / N + d2,  e' = M - a + d3,
** so e' = x + e - A / N + (d1 - d2 + d3), and over T steps and N workers
** (A is every worker's): sum_w e_T = sum_t sum_w x_t - sum_t A_t + D with
** |D| <= u sum_t sum_w (|M| + |a| + |e'|). |M| is bounded through the
** values the test sees: |M| <= (|x| + |e|)(1 + u). The sums below run in
** double over at most a few hundred terms of fp32 values: their own error
** is far below u.
*/
START_TEST(test_ef_identity)
{
    const int K = 2, G = 2, N = K * G, T = 40;
    const uint64_t m = 30, c = 20, n = m * c;
    sq_world *w = open_matrix(K, G, m, c, "grad.powersgd.rank=2", 11, 0);
    const double u = 0x1p-24;
    double *lhs = calloc(n, sizeof *lhs), *rhs = calloc(n, sizeof *rhs), *bound = calloc(n, 8);
    float *g = malloc(n * 4), *A = malloc(n * 4), *e0 = malloc((size_t)N * n * 4);
    ck_assert(lhs && rhs && bound && g && A && e0);
    for (int t = 0; t < T; t++) {
        for (int r = 0; r < N; r++) memcpy(e0 + (uint64_t)r * n, w->workers[r].psgd_m, n * 4);
        for (int r = 0; r < N; r++) {
            sqt_fill(g, n, 31 * (uint64_t)t + (uint64_t)r);
            ck_assert_int_eq(sq_world_put_grad(w, r, g), SQ_OK);
            for (uint64_t i = 0; i < n; i++) {
                float xi = g[i] / (float)N;
                rhs[i] += xi;
                bound[i] += u * (fabs(xi) + fabs(e0[(uint64_t)r * n + i])) * (1 + u);
            }
        }
        ck_assert_int_eq(sq_world_reduce_grads(w, (uint32_t)t), SQ_OK);
        gather(w, A);
        for (uint64_t i = 0; i < n; i++) {
            lhs[i] += A[i];
            for (int r = 0; r < N; r++)
                bound[i] += u * (fabs((double)(A[i] / (float)N)) + fabs(w->workers[r].psgd_m[i]));
        }
    }
    double worst = 0, resid = 0;
    for (uint64_t i = 0; i < n; i++) {
        double e = 0;
        for (int r = 0; r < N; r++) e += w->workers[r].psgd_m[i];
        resid += fabs(e);
        double gap = fabs(lhs[i] + e - rhs[i]);
        ck_assert_msg(gap <= bound[i] * (1 + 1e-9), "element %llu: %g off, bound %g",
                      (unsigned long long)i, gap, bound[i]);
        if (gap / bound[i] > worst) worst = gap / bound[i];
    }
    /* the roundings are real too: the worst element uses some 12% of its bound */
    ck_assert(worst > 0.01 && worst <= 1 + 1e-9);
    ck_assert(resid > 0); /* the residual is real: rank 2 of noise loses most of it */
    free(lhs), free(rhs), free(bound), free(g), free(A), free(e0);
    sq_world_close(w);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* (e) threads                                                              */
/* ------------------------------------------------------------------------ */

static void run_threads(int threads, float *out, float *resid)
{
    sq_set_threads(threads);
    const uint64_t m = 400, c = 300, n = m * c;
    sq_world *w = open_matrix(1, 3, m, c, "grad.powersgd.rank=4", 21, 0);
    float *g = malloc(n * 4);
    ck_assert_ptr_nonnull(g);
    for (uint32_t step = 0; step < 2; step++) {
        for (int r = 0; r < 3; r++) {
            sqt_fill(g, n, 7 * step + (uint64_t)r);
            ck_assert_int_eq(sq_world_put_grad(w, r, g), SQ_OK);
        }
        ck_assert_int_eq(sq_world_reduce_grads(w, step), SQ_OK);
    }
    gather(w, out);
    memcpy(resid, w->workers[2].psgd_m, n * 4);
    free(g);
    sq_world_close(w);
    sq_set_threads(0);
}

START_TEST(test_threads)
{
    const uint64_t n = 400 * 300;
    float *a = malloc(n * 4), *b = malloc(n * 4), *ra = malloc(n * 4), *rb = malloc(n * 4);
    ck_assert(a && b && ra && rb);
    run_threads(1, a, ra);
    run_threads(4, b, rb);
    ck_assert_msg(memcmp(a, b, n * 4) == 0, "the result depends on the thread count");
    ck_assert_msg(memcmp(ra, rb, n * 4) == 0, "the residual depends on the thread count");
    free(a), free(b), free(ra), free(rb);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* (f) grad.powersgd.start                                                  */
/* ------------------------------------------------------------------------ */

START_TEST(test_start)
{
    const uint64_t m = 64, c = 32, n = m * c;
    sq_world *w = open_matrix(2, 2, m, c, "grad.powersgd.start=2", 9, 0);
    sq_world_config bc;
    memset(&bc, 0, sizeof bc);
    bc.topo.nodes = 2, bc.topo.per_node = 2;
    ck_assert_int_eq(sq_scheme_preset("baseline", &bc.scheme, NULL), SQ_OK);
    bc.elements = n;
    bc.seed = 9;
    sq_world *b = NULL;
    ck_assert_int_eq(sq_world_open(&bc, &b, NULL), SQ_OK);
    ck_assert_uint_eq(sq_world_padded(w), sq_world_padded(b));
    float *g = malloc(n * 4), *x = malloc(n * 4), *y = malloc(n * 4);
    ck_assert(g && x && y);
    for (uint32_t step = 0; step < 3; step++) {
        for (int r = 0; r < 4; r++) {
            sqt_fill(g, n, 50 + 4 * step + (uint64_t)r);
            ck_assert_int_eq(sq_world_put_grad(w, r, g), SQ_OK);
            ck_assert_int_eq(sq_world_put_grad(b, r, g), SQ_OK);
        }
        sq_world_reset_traffic(w);
        sq_world_reset_traffic(b);
        ck_assert_int_eq(sq_world_reduce_grads(w, step), SQ_OK);
        ck_assert_int_eq(sq_world_reduce_grads(b, step), SQ_OK);
        gather(w, x);
        gather(b, y);
        const int same = memcmp(x, y, n * 4) == 0;
        const int same_bytes = memcmp(sq_world_traffic(w, 0), sq_world_traffic(b, 0),
                                      sizeof(sq_traffic)) == 0;
        ck_assert_msg(same == (step < 2) && same_bytes == (step < 2), "step %u", step);
        /* no residual before the first compressed step (PyTorch's error_dict) */
        for (uint64_t i = 0; step < 2 && i < n; i++) ck_assert(w->workers[1].psgd_m[i] == 0.0f);
    }
    free(g), free(x), free(y);
    sq_world_close(w);
    sq_world_close(b);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* (g) knobs, fallbacks, errors                                             */
/* ------------------------------------------------------------------------ */

START_TEST(test_knobs)
{
    sq_scheme s;
    sq_error err = {0};
    char buf[SQ_SCHEME_STRLEN], v[64];
    ck_assert_int_eq(sq_scheme_preset("powersgd", &s, &err), SQ_OK);
    ck_assert_int_eq(s.grad_mode, SQ_GRAD_POWERSGD);
    ck_assert_int_eq(s.psgd_rank, 1);
    ck_assert_int_eq(s.psgd_warm, 1);
    ck_assert_int_eq(s.psgd_ef, 1);
    ck_assert_uint_eq(s.psgd_start, 0);
    ck_assert(s.psgd_minrate == 2.0 && s.psgd_eps == 0.0f);
    ck_assert_int_eq(s.layout, SQ_LAYOUT_PARAM);
    sq_scheme_format(&s, buf, sizeof buf);
    ck_assert_msg(strstr(buf, "grad.mode=powersgd,") && strstr(buf, "grad.powersgd.rank=1,") &&
                      strstr(buf, "grad.powersgd.minrate=2,grad.powersgd.eps=0,"),
                  "%s", buf);
    ck_assert_int_eq(sq_scheme_preset("powersgd4", &s, &err), SQ_OK);
    ck_assert_int_eq(s.psgd_rank, 4);
    /* the other schemes print no PowerSGD knob */
    for (size_t p = 0; p < sq_scheme_npresets; p++) {
        ck_assert_int_eq(sq_scheme_preset(sq_scheme_presets[p], &s, &err), SQ_OK);
        sq_scheme_format(&s, buf, sizeof buf);
        ck_assert_int_eq(strstr(buf, "grad.powersgd.") != NULL, s.grad_mode == SQ_GRAD_POWERSGD);
    }
    /* values and their text */
    ck_assert_int_eq(sq_scheme_preset("baseline", &s, &err), SQ_OK);
    ck_assert_int_eq(sq_scheme_set(&s, "grad.mode=powersgd", &err), SQ_OK);
    ck_assert_int_eq(sq_scheme_validate(&s, &err), SQ_OK);
    ck_assert_int_eq(sq_scheme_set(&s, "grad.powersgd.eps=1e-8", &err), SQ_OK);
    sq_scheme_get(&s, "grad.powersgd.eps", v, sizeof v);
    ck_assert_str_eq(v, "1e-08");
    ck_assert_int_eq(sq_scheme_set(&s, "grad.powersgd.minrate=0.1", &err), SQ_OK);
    sq_scheme_get(&s, "grad.powersgd.minrate", v, sizeof v);
    ck_assert_str_eq(v, "0.1");
    ck_assert_int_eq(sq_scheme_set(&s, "grad.powersgd.start=1000", &err), SQ_OK);
    ck_assert_int_eq(sq_scheme_set(&s, "grad.powersgd.cols=768", &err), SQ_OK);
    ck_assert_int_eq(sq_scheme_set(&s, "grad.powersgd.warm=0", &err), SQ_OK);
    sq_scheme_format(&s, buf, sizeof buf);
    ck_assert_msg(strstr(buf, "grad.powersgd.rank=1,grad.powersgd.warm=0,grad.powersgd.ef=1,"
                              "grad.powersgd.start=1000,grad.powersgd.minrate=0.1,"
                              "grad.powersgd.eps=1e-08,grad.powersgd.cols=768,layout=bucket"),
                  "%s", buf);
    /* refusals, each naming the knob */
    static const char *const bad[] = {"grad.powersgd.rank=0", "grad.powersgd.rank=1025",
                                      "grad.powersgd.warm=2", "grad.powersgd.ef=yes",
                                      "grad.powersgd.minrate=0", "grad.powersgd.minrate=-1",
                                      "grad.powersgd.minrate=inf", "grad.powersgd.eps=-1e-9",
                                      "grad.powersgd.eps=1e39", "grad.powersgd.start=-1",
                                      "grad.powersgd.start=4294967296", "grad.powersgd.cols=x",
                                      "grad.powersgd.bogus=1", "grad.mode=none"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sq_scheme t = s;
        err.msg[0] = '\0';
        ck_assert_msg(sq_scheme_set(&t, bad[i], &err) == SQ_ERR_SPEC, "%s accepted", bad[i]);
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)(strchr(bad[i], '=') - bad[i]), bad[i]);
        ck_assert_msg(strstr(err.msg, key), "%s: %s", bad[i], err.msg);
    }
    /* the factors travel in fp32 */
    sq_scheme t = s;
    ck_assert_int_eq(sq_scheme_set(&t, "grad.bits=16", &err), SQ_OK);
    ck_assert_int_eq(sq_scheme_validate(&t, &err), SQ_ERR_SPEC);
    ck_assert_msg(strstr(err.msg, "powersgd") && strstr(err.msg, "fp32"), "%s", err.msg);
    t = s;
    ck_assert_int_eq(sq_scheme_set(&t, "grad.fallback=qgz", &err), SQ_OK);
    ck_assert_int_eq(sq_scheme_validate(&t, &err), SQ_ERR_SPEC);
}
END_TEST

START_TEST(test_fallbacks)
{
    /* one worker: nothing moves, the gradient is its own */
    sq_world *w = open_matrix(1, 1, 64, 32, NULL, 1, 1);
    ck_assert_int_eq(sq_world_grad_path(w), SQ_GRAD_NONE);
    sq_world_close(w);
    /* PyTorch's rule: (rows + cols) rank minrate < rows cols, else uncompressed */
    w = open_matrix(2, 2, 8, 8, NULL, 1, 1); /* 16 x 2 = 32 < 64 */
    ck_assert_int_eq(sq_world_grad_path(w), SQ_GRAD_POWERSGD);
    sq_world_close(w);
    w = open_matrix(2, 2, 8, 8, "grad.powersgd.minrate=4", 1, 1); /* 64, not < 64 */
    ck_assert_int_eq(sq_world_grad_path(w), SQ_GRAD_RING);
    sq_world_close(w);
    w = open_matrix(2, 2, 8, 8, "grad.powersgd.rank=20", 1, 1); /* rank min(8, 8, 20) */
    ck_assert_int_eq(sq_world_grad_path(w), SQ_GRAD_RING);
    ck_assert_int_eq(w->L.psgd_rank, 8);
    sq_world_close(w);
    /* a 1-D tensor is n x 1: never compressed at minrate >= 1 */
    sq_scheme s, one;
    sq_topo topo = {2, 2};
    ck_assert_int_eq(sq_scheme_preset("powersgd", &s, NULL), SQ_OK);
    const uint64_t shape[1] = {5000};
    ck_assert_int_eq(sq_scheme_for_tensor(&s, &topo, shape, 1, &one, NULL), SQ_OK);
    ck_assert_uint_eq(one.psgd_view_cols, 1);
    sq_world_config cfg = {.topo = topo, .scheme = one, .elements = 5000, .seed = 1, .dry = 1};
    ck_assert_int_eq(sq_world_open(&cfg, &w, NULL), SQ_OK);
    ck_assert_int_eq(sq_world_grad_path(w), SQ_GRAD_RING);
    sq_world_close(w);
}
END_TEST

START_TEST(test_overflow)
{
    const uint64_t m = 16, c = 16, n = m * c;
    sq_world *w = open_matrix(1, 2, m, c, "grad.mean=0", 1, 0);
    float *g = malloc(n * 4);
    ck_assert_ptr_nonnull(g);
    for (uint64_t i = 0; i < n; i++) g[i] = 3e38f;
    for (int r = 0; r < 2; r++) ck_assert_int_eq(sq_world_put_grad(w, r, g), SQ_OK);
    ck_assert_int_eq(sq_world_reduce_grads(w, 1), SQ_ERR_RANGE);
    ck_assert_msg(strstr(sq_world_error(w), "PowerSGD"), "%s", sq_world_error(w));
    free(g);
    sq_world_close(w);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("powersgd");
    TCase *tc = tcase_create("algorithm");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_reference, 0, (int)(sizeof refcases / sizeof refcases[0]));
    tcase_add_loop_test(tc, test_exact_rank, 0, 3);
    tcase_add_test(tc, test_ef_identity);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_start);
    suite_add_tcase(s, tc);
    TCase *tb = tcase_create("bytes");
    tcase_add_loop_test(tb, test_bytes_closed_form, 0, 4);
    tcase_add_test(tb, test_bytes_views);
    suite_add_tcase(s, tb);
    TCase *tk = tcase_create("knobs");
    tcase_add_test(tk, test_knobs);
    tcase_add_test(tk, test_fallbacks);
    tcase_add_test(tk, test_overflow);
    suite_add_tcase(s, tk);
    return sqt_run(s);
}
