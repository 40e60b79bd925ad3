/*
** check_gpt.c -- the byte-level GPT (src/train/gpt.c, gpt_layers.c): every
** layer's backward and the whole model's gradient against central finite
** differences of the forward, causality of the attention, the param table,
** the initialisation (deterministic, bf16-exact, the right spread), the loss
** at init, the same bytes run after run and whatever the thread count, the
** error sentences, and a speed figure on stderr.
**
** Finite differences. Every check compares an analytic gradient g_a with
** g_fd[j] = (L(x_j + h) - L(x_j - h)) / (x_j+ - x_j-), where x_j+- are the
** perturbed values as actually stored in fp32 (so the step is exact) and L
** is accumulated in double. For a layer, L = sum(dout .* out) with a random
** dout, so that dL/dx is exactly what the backward computes from dout. The
** verdict is the relative error of the whole vector, ||g_a - g_fd|| /
** ||g_fd|| (fd_compare), against a tolerance given, and argued, per check.
** The error has two sources: truncation, O(h^2) times the third derivative
** (zero for the linear layers), and the fp32 rounding of the forward, about
** 2^-24 |out| for each output that x_j changes, divided by 2h. Outputs that
** do not depend on x_j are computed bit-identically in both evaluations, and
** the products dout * out are exact in double, so their rounding cancels.
*/
#define _GNU_SOURCE /* dlsym(RTLD_DEFAULT), dladdr */
#include "check_util.h"
#include "shardq/codec.h"
#include "shardq/train.h"
#include "train/gpt_layers.h"

#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The allocation-failure test asks for an enormous workspace; under
** AddressSanitizer that must fail like malloc does, not abort. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

/* OpenBLAS's thread count, looked up at run time: the tests link libshardq
** only (which brings OpenBLAS), not OpenBLAS itself. NULL without it. */
typedef void (*blas_set_fn)(int);
typedef int (*blas_get_fn)(void);

static void blas_threads_fns(blas_set_fn *set, blas_get_fn *get)
{
    void *s = dlsym(RTLD_DEFAULT, "openblas_set_num_threads");
    void *g = dlsym(RTLD_DEFAULT, "openblas_get_num_threads");
    memcpy(set, &s, sizeof *set);
    memcpy(get, &g, sizeof *get);
}

static float *fvec(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof *p);
    ck_assert_ptr_nonnull(p);
    return p;
}

static double *dvec(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof *p);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* x[i] = offset + scale * uniform(-1, 1) */
static void fill(float *x, size_t n, uint64_t seed, float scale, float offset)
{
    sqt_rng r = {seed};
    for (size_t i = 0; i < n; i++) x[i] = offset + scale * sqt_sym(&r);
}

static double dot_d(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * (double)b[i];
    return s;
}

#define PI 3.14159265358979323846

static int verbose(void) { return getenv("CHECK_GPT_VERBOSE") != NULL; }

typedef double (*loss_fn)(void *ctx);

/* Central differences of f with respect to x[idx[k]] (x[k] when idx is
** NULL), k < m, into gfd[k]. The step is h = max(hmin, hrel |x|), and the
** divisor the difference of the two stored fp32 values. */
static void fd_grad(loss_fn f, void *ctx, float *x, const size_t *idx, size_t m, double hrel,
                    double hmin, double *gfd)
{
    for (size_t k = 0; k < m; k++) {
        const size_t j = idx ? idx[k] : k;
        const float v = x[j];
        const double h = fmax(hmin, hrel * fabs((double)v));
        const float xp = (float)((double)v + h), xm = (float)((double)v - h);
        x[j] = xp;
        const double lp = f(ctx);
        x[j] = xm;
        const double lm = f(ctx);
        x[j] = v;
        gfd[k] = (lp - lm) / ((double)xp - (double)xm);
    }
}

/* The one comparison every check uses: the relative error of the whole
** vector, ||ga - gfd|| / ||gfd|| (the absolute norm when gfd is all zero).
** Returns 1 when it is below tol; msg gets the error and the worst element
** either way. */
static int fd_compare(const char *what, const float *ga, const double *gfd, size_t m, double tol,
                      double *err_out, char *msg, size_t msglen)
{
    double num = 0.0, den = 0.0, worst = -1.0;
    size_t wi = 0;
    for (size_t k = 0; k < m; k++) {
        const double d = (double)ga[k] - gfd[k];
        num += d * d;
        den += gfd[k] * gfd[k];
        if (fabs(d) > worst) worst = fabs(d), wi = k;
    }
    const double err = den > 0.0 ? sqrt(num / den) : sqrt(num);
    if (err_out) *err_out = err;
    snprintf(msg, msglen,
             "%s: relative error %.3g (tolerance %.3g) over %zu elements; worst element %zu: "
             "analytic %.9g, finite differences %.9g",
             what, err, tol, m, wi, m ? (double)ga[wi] : 0.0, m ? gfd[wi] : 0.0);
    if (verbose()) fprintf(stderr, "  %s\n", msg);
    return err < tol && isfinite(err);
}

/* fd over all n elements of x, compared with ga[0..n). */
static void check_all(const char *what, loss_fn f, void *ctx, float *x, const float *ga, size_t n,
                      double hrel, double hmin, double tol)
{
    double *g = dvec(n);
    fd_grad(f, ctx, x, NULL, n, hrel, hmin, g);
    char msg[512];
    ck_assert_msg(fd_compare(what, ga, g, n, tol, NULL, msg, sizeof msg), "%s", msg);
    free(g);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------------------ */
/* Layers against finite differences                                        */
/* ------------------------------------------------------------------------ */
/*
** Tolerances of the layer checks. Inputs are O(1), h = 1e-2 (absolute, or
** relative to |x| when larger).
**  - Linear in the perturbed input (encoder, matmul, residual, the gain and
**    bias of a layernorm): no truncation error; the rounding of the changed
**    outputs, ~6e-8 |out| each, over 2h = 2e-2 gives ~1e-5 relative at
**    most. Tolerance 1e-4 (observed 6e-7 .. 9e-6).
**  - Nonlinear (layernorm's input, gelu, attention, the head's softmax):
**    the truncation error h^2 f''' / 6 f' ~ 1e-4 relative for O(1) inputs.
**    Tolerance 1e-3 (observed 1e-5 .. 2.4e-4, the largest the head's dwte,
**    where a logit moves by h |x| ~ 3e-2 and the softmax curves most).
** A backward that misses a term, transposes a product or drops a scale is
** off by O(1) in the relative error; test_fd_bites shows that a single
** flipped element or a 1% scaling is caught.
*/
#define TOL_LINEAR 1e-4
#define TOL_NONLIN 1e-3

/* Encoder ----------------------------------------------------------------- */

typedef struct enc_ctx {
    float *out, *wte, *wpe, *dout;
    uint8_t *tok;
    int B, T, C;
} enc_ctx;

static double enc_loss(void *p)
{
    enc_ctx *c = p;
    gl_encoder_fwd(c->out, c->tok, c->wte, c->wpe, c->B, c->T, c->C);
    return dot_d(c->dout, c->out, (size_t)c->B * c->T * c->C);
}

START_TEST(test_fd_encoder)
{
    enc_ctx c = {0};
    c.B = 3, c.T = 5, c.C = 8;
    const size_t n = (size_t)c.B * c.T * c.C, V = SQ_GPT_VOCAB;
    c.out = fvec(n), c.dout = fvec(n), c.wte = fvec(V * c.C), c.wpe = fvec((size_t)c.T * c.C);
    c.tok = malloc((size_t)c.B * c.T);
    /* few distinct tokens, so rows of dwte sum several positions */
    static const uint8_t pool[] = {3, 7, 200, 255, 0};
    for (int i = 0; i < c.B * c.T; i++) c.tok[i] = pool[(i * 7 + 3) % 5];
    fill(c.wte, V * c.C, 1, 1.0f, 0.0f);
    fill(c.wpe, (size_t)c.T * c.C, 2, 1.0f, 0.0f);
    fill(c.dout, n, 3, 1.0f, 0.0f);
    float *dwte = fvec(V * c.C), *dwpe = fvec((size_t)c.T * c.C);
    gl_encoder_bwd(dwte, dwpe, c.dout, c.tok, c.B, c.T, c.C);
    check_all("encoder dwte", enc_loss, &c, c.wte, dwte, V * c.C, 1e-2, 1e-2, TOL_LINEAR);
    check_all("encoder dwpe", enc_loss, &c, c.wpe, dwpe, (size_t)c.T * c.C, 1e-2, 1e-2, TOL_LINEAR);
    /* the backward adds (the model relies on it for the tied wte): onto a
    ** start of 1, the rows' sum in order */
    float *once = fvec(V * c.C);
    for (size_t i = 0; i < V * c.C; i++) once[i] = 1.0f;
    gl_encoder_bwd(once, NULL, c.dout, c.tok, c.B, c.T, c.C);
    for (size_t i = 0; i < V * c.C; i++) {
        float want = 1.0f;
        for (int r = 0; r < c.B * c.T; r++)
            if (c.tok[r] == i / c.C) want += c.dout[r * c.C + i % c.C];
        SQT_CHECK(once[i] == want, "dwte[%zu] = %g onto 1, want %g", i, (double)once[i],
                  (double)want);
    }
    free(c.out), free(c.dout), free(c.wte), free(c.wpe), free(c.tok), free(dwte), free(dwpe);
    free(once);
}
END_TEST

/* LayerNorm --------------------------------------------------------------- */

typedef struct ln_ctx {
    float *out, *mean, *rstd, *x, *w, *b, *dout;
    size_t rows;
    int C;
} ln_ctx;

static double ln_loss(void *p)
{
    ln_ctx *c = p;
    gl_layernorm_fwd(c->out, c->mean, c->rstd, c->x, c->w, c->b, c->rows, c->C);
    return dot_d(c->dout, c->out, c->rows * c->C);
}

START_TEST(test_fd_layernorm)
{
    ln_ctx c = {0};
    c.rows = 6, c.C = 16;
    const size_t n = c.rows * c.C;
    c.out = fvec(n), c.x = fvec(n), c.dout = fvec(n), c.w = fvec(c.C), c.b = fvec(c.C);
    c.mean = fvec(c.rows), c.rstd = fvec(c.rows);
    fill(c.x, n, 11, 1.0f, 0.5f); /* a mean away from 0 */
    fill(c.w, c.C, 12, 0.5f, 1.0f);
    fill(c.b, c.C, 13, 0.5f, 0.0f);
    fill(c.dout, n, 14, 1.0f, 0.0f);
    ln_loss(&c);
    /* the forward against the definition in double: biased variance, eps 1e-5 */
    for (size_t r = 0; r < c.rows; r++) {
        double m = 0, v = 0;
        for (int k = 0; k < c.C; k++) m += c.x[r * c.C + k];
        m /= c.C;
        for (int k = 0; k < c.C; k++) v += (c.x[r * c.C + k] - m) * (c.x[r * c.C + k] - m);
        v /= c.C;
        const double rs = 1 / sqrt(v + 1e-5);
        ck_assert_msg(fabs(c.mean[r] - m) < 1e-6 && fabs(c.rstd[r] - rs) < 1e-5,
                      "row %zu: mean %g rstd %g, want %g %g", r, (double)c.mean[r],
                      (double)c.rstd[r], m, rs);
        for (int k = 0; k < c.C; k++) {
            const double want = (c.x[r * c.C + k] - m) * rs * c.w[k] + c.b[k];
            SQT_CHECK(fabs(c.out[r * c.C + k] - want) < 1e-5, "out[%zu, %d] = %g, want %g", r, k,
                      (double)c.out[r * c.C + k], want);
        }
    }
    float *dx = fvec(n), *dw = fvec(c.C), *db = fvec(c.C);
    gl_layernorm_bwd(dx, dw, db, c.dout, c.x, c.w, c.mean, c.rstd, c.rows, c.C);
    check_all("layernorm dx", ln_loss, &c, c.x, dx, n, 1e-2, 1e-2, TOL_NONLIN);
    check_all("layernorm dw", ln_loss, &c, c.w, dw, c.C, 1e-2, 1e-2, TOL_LINEAR);
    check_all("layernorm db", ln_loss, &c, c.b, db, c.C, 1e-2, 1e-2, TOL_LINEAR);
    free(c.out), free(c.x), free(c.dout), free(c.w), free(c.b), free(c.mean), free(c.rstd);
    free(dx), free(dw), free(db);
}
END_TEST

/* Matmul ------------------------------------------------------------------ */

typedef struct mm_ctx {
    float *out, *x, *W, *bias, *dout;
    int rows, C, OC;
} mm_ctx;

static double mm_loss(void *p)
{
    mm_ctx *c = p;
    gl_matmul_fwd(c->out, c->x, c->W, c->bias, c->rows, c->C, c->OC);
    return dot_d(c->dout, c->out, (size_t)c->rows * c->OC);
}

START_TEST(test_fd_matmul)
{
    mm_ctx c = {0};
    c.rows = 7, c.C = 12, c.OC = 10;
    const size_t nx = (size_t)c.rows * c.C, nw = (size_t)c.OC * c.C, no = (size_t)c.rows * c.OC;
    c.out = fvec(no), c.x = fvec(nx), c.W = fvec(nw), c.bias = fvec(c.OC), c.dout = fvec(no);
    fill(c.x, nx, 21, 1.0f, 0.0f);
    fill(c.W, nw, 22, 1.0f, 0.0f);
    fill(c.bias, c.OC, 23, 1.0f, 0.0f);
    fill(c.dout, no, 24, 1.0f, 0.0f);
    /* forward against a straight triple loop, W stored [OC, C] */
    mm_loss(&c);
    for (int r = 0; r < c.rows; r++)
        for (int o = 0; o < c.OC; o++) {
            double s = c.bias[o];
            for (int k = 0; k < c.C; k++) s += (double)c.x[r * c.C + k] * c.W[o * c.C + k];
            ck_assert_msg(fabs(c.out[r * c.OC + o] - s) < 1e-5, "out[%d,%d] = %g, want %g", r, o,
                          (double)c.out[r * c.OC + o], s);
        }
    float *dx = fvec(nx), *dW = fvec(nw), *db = fvec(c.OC);
    gl_matmul_bwd(dx, dW, db, c.dout, c.x, c.W, c.rows, c.C, c.OC);
    check_all("matmul dx", mm_loss, &c, c.x, dx, nx, 1e-2, 1e-2, TOL_LINEAR);
    check_all("matmul dW", mm_loss, &c, c.W, dW, nw, 1e-2, 1e-2, TOL_LINEAR);
    check_all("matmul dbias", mm_loss, &c, c.bias, db, c.OC, 1e-2, 1e-2, TOL_LINEAR);
    free(c.out), free(c.x), free(c.W), free(c.bias), free(c.dout), free(dx), free(dW), free(db);
}
END_TEST

/* Attention --------------------------------------------------------------- */

typedef struct att_ctx {
    float *out, *att, *qkv, *scratch, *dout;
    int B, T, C, NH;
} att_ctx;

static double att_loss(void *p)
{
    att_ctx *c = p;
    gl_attention_fwd(c->out, c->att, c->qkv, c->B, c->T, c->C, c->NH);
    return dot_d(c->dout, c->out, (size_t)c->B * c->T * c->C);
}

static att_ctx att_new(int B, int T, int C, int NH, uint64_t seed)
{
    att_ctx c = {0};
    c.B = B, c.T = T, c.C = C, c.NH = NH;
    const size_t bt = (size_t)B * T;
    c.out = fvec(bt * C), c.dout = fvec(bt * C), c.qkv = fvec(bt * 3 * C);
    c.att = fvec((size_t)B * NH * T * T), c.scratch = fvec((size_t)B * NH * T * T);
    fill(c.qkv, bt * 3 * C, seed, 1.5f, 0.0f); /* scores of O(1): a peaked softmax */
    fill(c.dout, bt * C, seed + 1, 1.0f, 0.0f);
    return c;
}

static void att_free(att_ctx *c)
{
    free(c->out), free(c->dout), free(c->qkv), free(c->att), free(c->scratch);
}

START_TEST(test_fd_attention)
{
    att_ctx c = att_new(2, 6, 8, 2, 31);
    const size_t n = (size_t)c.B * c.T * 3 * c.C;
    att_loss(&c);
    float *dqkv = fvec(n);
    for (size_t i = 0; i < n; i++) dqkv[i] = NAN; /* the backward overwrites */
    gl_attention_bwd(dqkv, c.dout, c.qkv, c.att, c.scratch, c.B, c.T, c.C, c.NH);
    check_all("attention dqkv", att_loss, &c, c.qkv, dqkv, n, 1e-2, 1e-2, TOL_NONLIN);
    /* the softmax rows: sum 1 on and below the diagonal, 0 above */
    for (int bh = 0; bh < c.B * c.NH; bh++)
        for (int t = 0; t < c.T; t++) {
            const float *a = c.att + ((size_t)bh * c.T + t) * c.T;
            double s = 0;
            for (int t2 = 0; t2 <= t; t2++) s += a[t2];
            ck_assert_msg(fabs(s - 1.0) < 1e-6, "att row (%d, %d) sums to %g", bh, t, s);
            for (int t2 = t + 1; t2 < c.T; t2++)
                ck_assert_msg(a[t2] == 0.0f, "att[%d, %d, %d] = %g above the diagonal", bh, t, t2,
                              (double)a[t2]);
        }
    free(dqkv);
    att_free(&c);
}
END_TEST

/* A straight-line reference of the forward (one query at a time, in double)
** at a larger head size, and the causality: the output at t does not move
** when anything after t does, nor does the gradient flow backwards in
** time. */
START_TEST(test_attention_causal)
{
    att_ctx c = att_new(2, 9, 24, 3, 41);
    const int T = c.T, C = c.C, NH = c.NH, hs = C / NH;
    const size_t bt = (size_t)c.B * T, nq = bt * 3 * C, no = bt * C;
    att_loss(&c);
    for (int b = 0; b < c.B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                double s[16], mx = -1e300, sum = 0;
                const float *q = c.qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = c.qkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
                    s[t2] = dot_d(q, k, (size_t)hs) / sqrt((double)hs);
                    mx = fmax(mx, s[t2]);
                }
                for (int t2 = 0; t2 <= t; t2++) sum += (s[t2] = exp(s[t2] - mx));
                for (int i = 0; i < hs; i++) {
                    double o = 0;
                    for (int t2 = 0; t2 <= t; t2++)
                        o += s[t2] / sum * c.qkv[((size_t)b * T + t2) * 3 * C + 2 * C + h * hs + i];
                    const float got = c.out[((size_t)b * T + t) * C + h * hs + i];
                    SQT_CHECK(fabs(got - o) < 1e-5, "out[%d, %d, head %d, %d] = %g, want %g", b, t,
                              h, i, (double)got, o);
                }
            }
    float *ref = fvec(no), *orig = fvec(nq), *dqkv = fvec(nq);
    memcpy(ref, c.out, no * sizeof *ref);
    memcpy(orig, c.qkv, nq * sizeof *orig);
    for (int t0 = 0; t0 < T; t0++) {
        /* move every q, k, v after t0, in every sequence */
        sqt_rng r = {100 + (uint64_t)t0};
        for (int b = 0; b < c.B; b++)
            for (int t = t0 + 1; t < T; t++)
                for (int j = 0; j < 3 * C; j++)
                    c.qkv[((size_t)b * T + t) * 3 * C + j] += 3.0f * sqt_sym(&r);
        att_loss(&c);
        for (int b = 0; b < c.B; b++)
            ck_assert_msg(memcmp(c.out + (size_t)b * T * C, ref + (size_t)b * T * C,
                                 (size_t)(t0 + 1) * C * sizeof(float)) == 0,
                          "sequence %d: the output up to t = %d changed with the inputs after it",
                          b, t0);
        memcpy(c.qkv, orig, nq * sizeof *orig);
        /* a gradient only at t <= t0 reaches no input after t0 */
        att_loss(&c);
        for (size_t i = 0; i < no; i++)
            c.dout[i] = (int)((i / C) % T) <= t0 ? 1.0f + (float)(i % 5) : 0.0f;
        gl_attention_bwd(dqkv, c.dout, c.qkv, c.att, c.scratch, c.B, T, C, NH);
        for (int b = 0; b < c.B; b++)
            for (int t = t0 + 1; t < T; t++)
                for (int j = 0; j < 3 * C; j++)
                    SQT_CHECK(dqkv[((size_t)b * T + t) * 3 * C + j] == 0.0f,
                              "dqkv[%d, %d, %d] = %g: the gradient from t <= %d reached t = %d", b,
                              t, j, (double)dqkv[((size_t)b * T + t) * 3 * C + j], t0, t);
    }
    free(ref), free(orig), free(dqkv);
    att_free(&c);
}
END_TEST

/* GELU and residual ------------------------------------------------------- */

typedef struct ew_ctx {
    float *out, *x, *y, *dout;
    size_t n;
    int kind; /* 0 gelu, 1 residual */
} ew_ctx;

static double ew_loss(void *p)
{
    ew_ctx *c = p;
    if (c->kind == 0) gl_gelu_fwd(c->out, c->x, c->n);
    else gl_residual_fwd(c->out, c->x, c->y, c->n);
    return dot_d(c->dout, c->out, c->n);
}

START_TEST(test_fd_gelu)
{
    ew_ctx c = {0};
    c.n = 200;
    c.out = fvec(c.n), c.x = fvec(c.n), c.dout = fvec(c.n);
    fill(c.x, c.n, 51, 4.0f, 0.0f); /* both tails and the bend */
    fill(c.dout, c.n, 52, 1.0f, 0.0f);
    ew_loss(&c);
    for (size_t i = 0; i < c.n; i++) {
        const double v = c.x[i];
        const double want = 0.5 * v * (1 + tanh(sqrt(2 / PI) * (v + 0.044715 * v * v * v)));
        SQT_CHECK(fabs(c.out[i] - want) < 1e-6, "gelu(%g) = %g, want %g", v, (double)c.out[i],
                  want);
    }
    float *dx = fvec(c.n);
    gl_gelu_bwd(dx, c.x, c.dout, c.n);
    check_all("gelu dx", ew_loss, &c, c.x, dx, c.n, 1e-2, 1e-2, TOL_NONLIN);
    /* in place, as the model calls it */
    float *d2 = fvec(c.n);
    memcpy(d2, c.dout, c.n * sizeof *d2);
    gl_gelu_bwd(d2, c.x, d2, c.n);
    SQT_ASSERT_FLOATS_BITS(d2, dx, c.n, "gelu backward in place");
    free(c.out), free(c.x), free(c.dout), free(dx), free(d2);
}
END_TEST

START_TEST(test_fd_residual)
{
    ew_ctx c = {0};
    c.n = 50, c.kind = 1;
    c.out = fvec(c.n), c.x = fvec(c.n), c.y = fvec(c.n), c.dout = fvec(c.n);
    fill(c.x, c.n, 61, 1.0f, 0.0f);
    fill(c.y, c.n, 62, 1.0f, 0.0f);
    fill(c.dout, c.n, 63, 1.0f, 0.0f);
    float *da = fvec(c.n), *db = fvec(c.n);
    gl_residual_bwd(da, db, c.dout, c.n); /* adds into zeros */
    check_all("residual da", ew_loss, &c, c.x, da, c.n, 1e-2, 1e-2, TOL_LINEAR);
    check_all("residual db", ew_loss, &c, c.y, db, c.n, 1e-2, 1e-2, TOL_LINEAR);
    free(c.out), free(c.x), free(c.y), free(c.dout), free(da), free(db);
}
END_TEST

/* Output head + cross-entropy --------------------------------------------- */

typedef struct head_ctx {
    float *probs, *losses, *x, *wte;
    uint8_t *tg;
    int rows, C;
} head_ctx;

static double head_loss(void *p)
{
    head_ctx *c = p;
    return gl_head_fwd(c->probs, c->losses, c->x, c->wte, c->tg, c->rows, c->C);
}

START_TEST(test_fd_head)
{
    head_ctx c = {0};
    c.rows = 5, c.C = 8;
    const size_t V = SQ_GPT_VOCAB, nx = (size_t)c.rows * c.C;
    c.probs = fvec(c.rows * V), c.losses = fvec(c.rows), c.x = fvec(nx), c.wte = fvec(V * c.C);
    c.tg = malloc(c.rows);
    for (int r = 0; r < c.rows; r++) c.tg[r] = (uint8_t)(37 * r + 5);
    fill(c.x, nx, 71, 1.0f, 0.0f);
    fill(c.wte, V * c.C, 72, 1.0f, 0.0f);
    const double loss = head_loss(&c);
    /* the loss against a straight-line log-softmax in double */
    double want = 0;
    for (int r = 0; r < c.rows; r++) {
        double l[256], mx = -1e300, s = 0;
        for (size_t v = 0; v < V; v++)
            mx = fmax(mx, l[v] = dot_d(c.x + r * c.C, c.wte + v * c.C, c.C));
        for (size_t v = 0; v < V; v++) s += exp(l[v] - mx);
        want += (log(s) + mx - l[c.tg[r]]) / c.rows;
        for (size_t v = 0; v < V; v++)
            SQT_CHECK(fabs(c.probs[r * V + v] - exp(l[v] - mx) / s) < 1e-6, "probs[%d, %zu]", r, v);
    }
    ck_assert_msg(fabs(loss - want) < 1e-5, "loss %.9g, want %.9g", loss, want);
    float *dx = fvec(nx), *dwte = fvec(V * c.C), *dlog = fvec(c.rows * V);
    gl_head_bwd(dx, dwte, dlog, c.probs, c.tg, c.x, c.wte, c.rows, c.C);
    /* dlogits = (softmax - onehot) / rows */
    for (int r = 0; r < c.rows; r++)
        for (size_t v = 0; v < V; v++) {
            const double w = (c.probs[r * V + v] - (v == c.tg[r])) / c.rows;
            SQT_CHECK(fabs(dlog[r * V + v] - w) < 1e-7, "dlogits[%d, %zu] = %g, want %g", r, v,
                      (double)dlog[r * V + v], w);
        }
    check_all("head dx", head_loss, &c, c.x, dx, nx, 1e-2, 1e-2, TOL_NONLIN);
    check_all("head dwte", head_loss, &c, c.wte, dwte, V * c.C, 1e-2, 1e-2, TOL_NONLIN);
    free(c.probs), free(c.losses), free(c.x), free(c.wte), free(c.tg), free(dx), free(dwte);
    free(dlog);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The whole model                                                          */
/* ------------------------------------------------------------------------ */

typedef struct model {
    sq_gpt_config c;
    size_t np;
    sq_gpt_param *p;
    float **w, **g;
    sq_gpt_workspace *ws;
    uint8_t *in, *tg;
    int B, T;
} model;

static model model_new(int L, int C, int NH, int ctx, int B, int T, uint64_t seed)
{
    model m;
    memset(&m, 0, sizeof m);
    m.c = (sq_gpt_config){L, C, NH, ctx};
    m.B = B, m.T = T;
    sq_error e = {0};
    const char *err = e.msg;
    ck_assert_msg(sq_gpt_validate(&m.c, &e) == 0, "%s", err);
    m.np = sq_gpt_nparams(&m.c);
    m.p = calloc(m.np, sizeof *m.p);
    m.w = calloc(m.np, sizeof *m.w);
    m.g = calloc(m.np, sizeof *m.g);
    ck_assert(m.p && m.w && m.g);
    sq_gpt_params(&m.c, m.p);
    for (size_t i = 0; i < m.np; i++) m.w[i] = fvec(m.p[i].n), m.g[i] = fvec(m.p[i].n);
    sq_gpt_init(&m.c, seed, m.w);
    ck_assert_msg(sq_gpt_workspace_new(&m.c, B, T, &m.ws, &e) == 0, "%s", err);
    m.in = malloc((size_t)B * T), m.tg = malloc((size_t)B * T);
    sqt_rng r = {seed ^ 0x5eed};
    for (int i = 0; i < B * T; i++)
        m.in[i] = (uint8_t)sqt_next(&r), m.tg[i] = (uint8_t)sqt_next(&r);
    return m;
}

static void model_free(model *m)
{
    for (size_t i = 0; i < m->np; i++) free(m->w[i]), free(m->g[i]);
    free(m->w), free(m->g), free(m->p), free(m->in), free(m->tg);
    sq_gpt_workspace_free(m->ws);
}

static double model_loss(void *p)
{
    model *m = p;
    return sq_gpt_forward(m->ws, (const float *const *)m->w, m->in, m->tg, m->B, m->T);
}

static double model_step(model *m)
{
    const double loss = model_loss(m);
    sq_gpt_backward(m->ws, (const float *const *)m->w, m->g);
    return loss;
}

/* Params of a "trained-looking" model for the gradient check: at init the
** weights are so small that most layers barely move the loss. Here the
** activations are O(1) everywhere: matrices ~ U(-1, 1) / sqrt(fan-in),
** embeddings U(-1, 1), gains 1 +- 0.3, biases +- 0.2. */
static void model_randomize(model *m, uint64_t seed)
{
    for (size_t i = 0; i < m->np; i++) {
        const sq_gpt_param *p = &m->p[i];
        const int gain = strstr(p->name, "ln") && p->name[strlen(p->name) - 1] == 'w';
        float scale = 0.2f, off = 0.0f;
        if (p->ndim == 2) scale = i < 2 ? 1.0f : (float)(1.7 / sqrt((double)p->shape[1]));
        if (gain) scale = 0.3f, off = 1.0f;
        fill(m->w[i], p->n, seed * 1000 + i, scale, off);
    }
}

/* Relative fd error of the sampled elements of each param tensor (of
** tensor `bad` only when only_bad); the analytic gradient of the sample is
** copied into ga, scaled by `scale` for tensor `bad` (to show the check
** bites). Returns the largest error. */
static double model_fd(model *m, size_t nsample, double h, size_t bad, float scale, int only_bad,
                       int *failed, double tol, char *msg, size_t msglen)
{
    double worst = 0.0;
    *failed = 0;
    sqt_rng r = {777};
    for (size_t i = 0; i < m->np; i++) {
        if (only_bad && i != bad) continue;
        const size_t n = m->p[i].n, k = n < nsample ? n : nsample;
        size_t idx[64];
        float ga[64];
        double gfd[64];
        for (size_t j = 0; j < k; j++) {
            idx[j] = n <= nsample ? j : (size_t)(sqt_next(&r) % n);
            /* half of wte's sample from the rows of the input tokens, where
            ** the embedding's share of the tied gradient lands */
            if (i == 0 && j % 2)
                idx[j] = (size_t)m->in[sqt_next(&r) % (uint64_t)(m->B * m->T)] * m->p[0].shape[1] +
                         (size_t)(sqt_next(&r) % m->p[0].shape[1]);
            ga[j] = m->g[i][idx[j]] * (i == bad ? scale : 1.0f);
        }
        fd_grad(model_loss, m, m->w[i], idx, k, 0.0, h, gfd);
        double e;
        char one[512];
        if (!fd_compare(m->p[i].name, ga, gfd, k, tol, &e, one, sizeof one) && !*failed) {
            *failed = 1;
            snprintf(msg, msglen, "%s", one);
        }
        worst = fmax(worst, e);
    }
    return worst;
}

/*
** Whole-model tolerance. Every param moves every later activation, so the
** fp32 noise of the loss does not cancel as it does for one layer: it is a
** few ulps of the activations, ~1e-7 relative, on a loss of ~5, i.e. ~1e-6
** absolute per evaluation; over 2h = 2e-2 that is ~5e-5 absolute per
** element, against sampled gradients whose norms are ~1e-2 .. 1 (the loss is
** a mean over 16 positions). The truncation error at h = 1e-2 on O(1)
** activations is ~1e-4 relative. Observed: 1.4e-5 .. 2.8e-4 (the largest
** h.0.ln1.w, whose effect passes through every layer); tolerance 3e-3, ten
** times that, and still a third of the 1e-2 that a gradient 1% off in any
** one tensor gives (test_fd_bites).
*/
#define TOL_MODEL 3e-3
#define MODEL_H 1e-2
#define MODEL_SAMPLE 24

START_TEST(test_fd_model)
{
    model m = model_new(2, 16, 2, 8, 2, 8, 5);
    model_randomize(&m, 5);
    for (size_t i = 0; i < m.np; i++)
        for (uint64_t j = 0; j < m.p[i].n; j++) m.g[i][j] = NAN; /* overwritten, every one */
    model_step(&m);
    for (size_t i = 0; i < m.np; i++)
        for (uint64_t j = 0; j < m.p[i].n; j++)
            SQT_CHECK(isfinite(m.g[i][j]), "%s[%llu] not written", m.p[i].name,
                      (unsigned long long)j);
    int failed;
    char msg[512] = "";
    double worst = model_fd(&m, MODEL_SAMPLE, MODEL_H, SIZE_MAX, 1.0f, 0, &failed, TOL_MODEL, msg,
                            sizeof msg);
    if (verbose()) fprintf(stderr, "model: worst relative error %.3g\n", worst);
    ck_assert_msg(!failed, "%s", msg);
    model_free(&m);
}
END_TEST

/* The checks bite: the same comparisons with a wrong analytic gradient. */
START_TEST(test_fd_bites)
{
    /* the model: one tensor's gradient 1% too large, each tensor in turn
    ** would do; the four kinds of tensor are enough */
    model m = model_new(2, 16, 2, 8, 2, 8, 5);
    model_randomize(&m, 5);
    model_step(&m);
    static const char *const victims[] = {"wte", "h.0.attn.qkv.w", "h.1.mlp.proj.b", "lnf.w"};
    for (size_t v = 0; v < 4; v++) {
        size_t bad = SIZE_MAX;
        for (size_t i = 0; i < m.np; i++)
            if (!strcmp(m.p[i].name, victims[v])) bad = i;
        ck_assert(bad != SIZE_MAX);
        int failed;
        char msg[512] = "";
        /* unscaled it passes, scaled by 1.01 it fails */
        model_fd(&m, MODEL_SAMPLE, MODEL_H, bad, 1.0f, 1, &failed, TOL_MODEL, msg, sizeof msg);
        ck_assert_msg(!failed, "%s", msg);
        model_fd(&m, MODEL_SAMPLE, MODEL_H, bad, 1.01f, 1, &failed, TOL_MODEL, msg, sizeof msg);
        ck_assert_msg(failed && strstr(msg, victims[v]),
                      "%s scaled by 1.01 was not caught (%s)", victims[v], msg);
    }
    model_free(&m);

    /* a layer: one flipped element of the layernorm's dx */
    ln_ctx c = {0};
    c.rows = 6, c.C = 16;
    const size_t n = c.rows * c.C;
    c.out = fvec(n), c.x = fvec(n), c.dout = fvec(n), c.w = fvec(c.C), c.b = fvec(c.C);
    c.mean = fvec(c.rows), c.rstd = fvec(c.rows);
    fill(c.x, n, 11, 1.0f, 0.5f);
    fill(c.w, c.C, 12, 0.5f, 1.0f);
    fill(c.b, c.C, 13, 0.5f, 0.0f);
    fill(c.dout, n, 14, 1.0f, 0.0f);
    ln_loss(&c);
    float *dx = fvec(n);
    gl_layernorm_bwd(dx, NULL, NULL, c.dout, c.x, c.w, c.mean, c.rstd, c.rows, c.C);
    double *g = dvec(n);
    fd_grad(ln_loss, &c, c.x, NULL, n, 1e-2, 1e-2, g);
    char msg[512];
    ck_assert_msg(fd_compare("layernorm dx", dx, g, n, TOL_NONLIN, NULL, msg, sizeof msg), "%s",
                  msg);
    size_t big = 0;
    for (size_t i = 0; i < n; i++)
        if (fabsf(dx[i]) > fabsf(dx[big])) big = i;
    dx[big] = -dx[big];
    ck_assert_msg(!fd_compare("layernorm dx, one element flipped", dx, g, n, TOL_NONLIN, NULL, msg,
                              sizeof msg),
                  "a flipped element was not caught: %s", msg);
    dx[big] = -dx[big];
    /* and a missing term: dx without the mean of dxhat subtracted is what a
    ** layernorm backward that forgot it would give; dx + mean(dxhat) rstd */
    for (size_t r = 0; r < c.rows; r++) {
        double s = 0;
        for (int k = 0; k < c.C; k++) s += c.dout[r * c.C + k] * c.w[k];
        for (int k = 0; k < c.C; k++) dx[r * c.C + k] += (float)(s / c.C) * c.rstd[r];
    }
    ck_assert_msg(!fd_compare("layernorm dx, a term missing", dx, g, n, TOL_NONLIN, NULL, msg,
                              sizeof msg),
                  "a missing term was not caught: %s", msg);
    free(c.out), free(c.x), free(c.dout), free(c.w), free(c.b), free(c.mean), free(c.rstd);
    free(dx), free(g);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Params and initialisation                                                */
/* ------------------------------------------------------------------------ */

START_TEST(test_params)
{
    const sq_gpt_config c = {3, 12, 3, 20};
    const size_t np = sq_gpt_nparams(&c);
    ck_assert_uint_eq(np, 4 + 12 * 3);
    sq_gpt_param *p = calloc(np, sizeof *p);
    sq_gpt_params(&c, p);
    static const struct {
        const char *suffix;
        uint64_t r, k; /* rows and cols in units of C; k 0: a vector */
        int decay;
    } lay[12] = {{"ln1.w", 1, 0, 0},      {"ln1.b", 1, 0, 0},      {"attn.qkv.w", 3, 1, 1},
                 {"attn.qkv.b", 3, 0, 0}, {"attn.proj.w", 1, 1, 1}, {"attn.proj.b", 1, 0, 0},
                 {"ln2.w", 1, 0, 0},      {"ln2.b", 1, 0, 0},      {"mlp.fc.w", 4, 1, 1},
                 {"mlp.fc.b", 4, 0, 0},   {"mlp.proj.w", 1, 4, 1}, {"mlp.proj.b", 1, 0, 0}};
    ck_assert_str_eq(p[0].name, "wte");
    ck_assert(p[0].ndim == 2 && p[0].shape[0] == 256 && p[0].shape[1] == 12 && p[0].decay == 1);
    ck_assert_str_eq(p[1].name, "wpe");
    ck_assert(p[1].ndim == 2 && p[1].shape[0] == 20 && p[1].shape[1] == 12 && p[1].decay == 1);
    uint64_t total = p[0].n + p[1].n;
    for (int l = 0; l < 3; l++)
        for (int k = 0; k < 12; k++) {
            const sq_gpt_param *q = &p[2 + 12 * l + k];
            char want[64];
            snprintf(want, sizeof want, "h.%d.%s", l, lay[k].suffix);
            ck_assert_str_eq(q->name, want);
            ck_assert_msg(q->ndim == (lay[k].k ? 2 : 1) && q->shape[0] == lay[k].r * 12 &&
                              (!lay[k].k || q->shape[1] == lay[k].k * 12) &&
                              q->n == lay[k].r * 12 * (lay[k].k ? lay[k].k * 12 : 1) &&
                              q->decay == lay[k].decay,
                          "%s: ndim %d shape %llu x %llu n %llu decay %d", q->name, q->ndim,
                          (unsigned long long)q->shape[0], (unsigned long long)q->shape[1],
                          (unsigned long long)q->n, q->decay);
            total += q->n;
        }
    ck_assert_str_eq(p[38].name, "lnf.w");
    ck_assert_str_eq(p[39].name, "lnf.b");
    ck_assert(p[38].n == 12 && p[39].n == 12 && !p[38].decay && !p[39].decay && p[38].ndim == 1);
    total += 24;
    ck_assert_uint_eq(sq_gpt_elements(&c), total);
    free(p);
}
END_TEST

START_TEST(test_init)
{
    /* C = 256: wte has 65536 elements, mlp.fc.w 262144 */
    model a = model_new(2, 256, 4, 64, 1, 1, 42), b = model_new(2, 256, 4, 64, 1, 1, 42);
    model d = model_new(2, 256, 4, 64, 1, 1, 43);
    for (size_t i = 0; i < a.np; i++) {
        const sq_gpt_param *p = &a.p[i];
        SQT_ASSERT_BYTES(a.w[i], b.w[i], p->n * sizeof(float), p->name);
        const size_t len = strlen(p->name);
        const int is_w = p->ndim == 2,
                  gain = !is_w && strstr(p->name, "ln") && p->name[len - 1] == 'w';
        if (is_w) /* another seed, other numbers */
            ck_assert_msg(memcmp(a.w[i], d.w[i], p->n * sizeof(float)) != 0,
                          "%s: seeds 42 and 43 gave the same values", p->name);
        double s1 = 0, s2 = 0;
        size_t in1 = 0;
        const double want = strstr(p->name, "proj.w") ? 0.02 / sqrt(4.0) : 0.02;
        for (uint64_t j = 0; j < p->n; j++) {
            const float v = a.w[i][j];
            SQT_CHECK((sqt_bits(v) & 0xffffu) == 0 && isfinite(v), "%s[%llu] = %a is not bf16",
                      p->name, (unsigned long long)j, (double)v);
            if (!is_w) {
                SQT_CHECK(v == (gain ? 1.0f : 0.0f), "%s[%llu] = %g", p->name,
                          (unsigned long long)j, (double)v);
                continue;
            }
            /* Box-Muller on 24-bit uniforms: |z| <= sqrt(48 ln 2) = 5.77 */
            SQT_CHECK(fabs(v) <= 5.8 * want, "%s[%llu] = %g: beyond the largest normal", p->name,
                      (unsigned long long)j, (double)v);
            s1 += v, s2 += (double)v * v;
            in1 += fabs(v) < want;
        }
        if (!is_w) continue;
        const double n = (double)p->n, mean = s1 / n, sd = sqrt(s2 / n - mean * mean);
        /* 4 standard errors of the mean; the spread within 3% where n >= 16384
        ** (the standard error of a sample std is 1/sqrt(2n) <= 0.6%), 10% on
        ** the 2560 ... 16384-element tensors */
        const double tol = n >= 16384 ? 0.03 : 0.10;
        ck_assert_msg(fabs(mean) < 4 * want / sqrt(n), "%s: mean %g", p->name, mean);
        ck_assert_msg(fabs(sd / want - 1) < tol, "%s: std %g, want %g", p->name, sd, want);
        /* a normal has 68.27% within one std (a uniform of that std 57.7%);
        ** the standard error of the fraction is 0.0018 at n = 65536 */
        if (n >= 65536)
            ck_assert_msg(fabs(in1 / n - 0.6827) < 0.01, "%s: %.4f within one std", p->name,
                          in1 / n);
    }
    /* different tensors, different streams */
    ck_assert(memcmp(a.w[2 + 2], a.w[2 + 12 + 2], 64) != 0); /* qkv.w of layers 0 and 1 */
    ck_assert(memcmp(a.w[0], a.w[1], 64) != 0);
    /* the documented recipe, straight from sq_uniform24: wte[j] for the first few j */
    const sq_rng_key key = {42, 0, 0, SQ_GPT_INIT_SITE};
    for (uint64_t j = 0; j < 8; j++) {
        const double u1 = sq_uniform24(&key, j & ~1ull), u2 = sq_uniform24(&key, j | 1);
        const double r = sqrt(-2 * log(1 - u1)), th = 2 * PI * u2;
        const float want =
            sq_bf16_to_f32(sq_f32_to_bf16((float)(0.02 * r * (j & 1 ? sin(th) : cos(th)))));
        ck_assert_msg(a.w[0][j] == want, "wte[%llu] = %g, want %g", (unsigned long long)j,
                      (double)a.w[0][j], (double)want);
    }
    model_free(&a), model_free(&b), model_free(&d);
}
END_TEST

START_TEST(test_loss_at_init)
{
    model m = model_new(2, 64, 4, 32, 4, 32, 3);
    const double loss = model_loss(&m);
    ck_assert_msg(fabs(loss - log(256.0)) < 0.1, "loss at init %.4f, want ln 256 = %.4f", loss,
                  log(256.0));
    /* a bad batch shape gives NaN and no forward to differentiate */
    ck_assert(isnan(sq_gpt_forward(m.ws, (const float *const *)m.w, m.in, m.tg, 5, 32)));
    ck_assert(isnan(sq_gpt_forward(m.ws, (const float *const *)m.w, m.in, m.tg, 4, 33)));
    model_free(&m);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Determinism                                                              */
/* ------------------------------------------------------------------------ */

/* Loss and all grads of one step with `threads` OpenMP threads, as bytes. */
static float *step_bytes(int threads, int twice, size_t *len)
{
    sq_set_threads(threads);
    model m = model_new(2, 64, 4, 64, 4, 64, 9); /* large enough that every loop splits */
    model_randomize(&m, 9);
    double loss = model_step(&m);
    if (twice) loss = model_step(&m); /* the same workspace again */
    size_t n = 2;
    for (size_t i = 0; i < m.np; i++) n += m.p[i].n;
    float *out = fvec(n);
    memcpy(out, &loss, sizeof loss);
    for (size_t i = 0, o = 2; i < m.np; o += m.p[i].n, i++)
        memcpy(out + o, m.g[i], m.p[i].n * sizeof(float));
    model_free(&m);
    sq_set_threads(0);
    *len = n * sizeof(float);
    return out;
}

/* The layers call sgemm on blocks of the output fixed by the shapes, from
** inside their OpenMP loops, with OpenBLAS's own threads turned off for the
** while: so neither the OpenMP nor the OpenBLAS thread count may change a
** bit. Both are asserted, and that the OpenBLAS setting is given back. */
START_TEST(test_determinism)
{
    size_t n1, n2, n3, n4, n5;
    float *a = step_bytes(1, 0, &n1), *b = step_bytes(2, 0, &n2), *c = step_bytes(3, 1, &n3);
    float *d = step_bytes(2, 1, &n4);
    blas_set_fn set;
    blas_get_fn get;
    blas_threads_fns(&set, &get);
    ck_assert_msg(set && get, "OpenBLAS's openblas_set_num_threads is not in this process");
    const int blas = get();
    set(blas > 1 ? 1 : 2);
    float *e = step_bytes(2, 0, &n5);
    ck_assert_int_eq(get(), blas > 1 ? 1 : 2);
    set(blas);
    ck_assert(n1 == n2 && n1 == n3 && n1 == n4 && n1 == n5);
    SQT_ASSERT_BYTES(b, a, n1, "loss and grads, 2 threads vs 1");
    SQT_ASSERT_BYTES(c, a, n1, "loss and grads, 3 threads and a second step vs 1");
    SQT_ASSERT_BYTES(d, a, n1, "loss and grads, 2 threads and a second step vs 1");
    SQT_ASSERT_BYTES(e, a, n1, "loss and grads, another OpenBLAS thread count");
    /* and one other input byte gives another loss (the comparison can fail) */
    model m = model_new(2, 64, 4, 64, 4, 64, 9);
    model_randomize(&m, 9);
    m.in[17] ^= 1;
    const double loss = model_step(&m);
    ck_assert(memcmp(&loss, a, sizeof loss) != 0);
    model_free(&m);
    free(a), free(b), free(c), free(d), free(e);
}
END_TEST

/* The layers one by one, at shapes where every parallel loop splits, 1
** thread against 2 and 5. */
START_TEST(test_layers_threads)
{
    const int B = 4, T = 64, C = 96, NH = 3, BT = B * T; /* BT C above the serial threshold */
    const size_t n = (size_t)BT * C, V = SQ_GPT_VOCAB;
    float *x = fvec(4 * n), *w = fvec(4 * n), *dout = fvec(4 * n), *wte = fvec(V * C);
    uint8_t *tok = malloc(BT);
    for (int i = 0; i < BT; i++) tok[i] = (uint8_t)(i * 31 % 7);
    fill(x, 4 * n, 81, 1.0f, 0.2f);
    fill(w, 4 * n, 82, 1.0f, 0.0f);
    fill(dout, 4 * n, 83, 1.0f, 0.0f);
    fill(wte, V * C, 84, 1.0f, 0.0f);
    float *res[3];
    const size_t per = 40 * n + (size_t)B * NH * T * T + 3 * V * C;
    const int thr[3] = {1, 2, 5};
    for (int k = 0; k < 3; k++) {
        sq_set_threads(thr[k]);
        float *o = res[k] = fvec(per), *s = fvec((size_t)B * NH * T * T);
        float *att = fvec((size_t)B * NH * T * T);
        gl_encoder_fwd(o, tok, wte, w, B, T, C);
        o += n;
        memset(o, 0, V * C * sizeof *o);
        gl_encoder_bwd(o, o + V * C, dout, tok, B, T, C);
        o += V * C + n;
        gl_layernorm_fwd(o, o + n, o + 2 * n, x, w, w + C, BT, C);
        gl_layernorm_bwd(o + 3 * n, o + 4 * n, o + 5 * n, dout, x, w, o + n, o + 2 * n, BT, C);
        o += 6 * n;
        gl_matmul_fwd(o, x, w, w + 4 * (size_t)C * C, BT, C, 4 * C); /* out 4n */
        gl_matmul_bwd(o + 4 * n, o + 5 * n, o + 9 * n, dout, x, w, BT, C, 4 * C); /* dW 4 C^2 */
        o += 10 * n;
        gl_attention_fwd(o, att, x, B, T, C, NH);
        memcpy(o + n, att, (size_t)B * NH * T * T * sizeof *o);
        o += n + (size_t)B * NH * T * T;
        gl_attention_bwd(o, dout, x, att, s, B, T, C, NH);
        o += 3 * n;
        gl_gelu_fwd(o, x, 4 * n);
        gl_gelu_bwd(o + 4 * n, x, dout, 4 * n);
        o += 8 * n;
        gl_residual_fwd(o, x, w, n);
        memcpy(o + n, w, n * sizeof *o);
        gl_residual_bwd(o + n, NULL, dout, n);
        o += 2 * n;
        float *probs = fvec(BT * V), *loss = fvec(BT), *dl = fvec(BT * V);
        const double l = gl_head_fwd(probs, loss, x, wte, tok, BT, C);
        gl_head_bwd(o, o + n, dl, probs, tok, x, wte, BT, C);
        memcpy(o + n + V * C, &l, sizeof l);
        free(probs), free(loss), free(dl), free(s), free(att);
    }
    sq_set_threads(0);
    SQT_ASSERT_BYTES(res[1], res[0], per * sizeof(float), "layers, 2 threads vs 1");
    SQT_ASSERT_BYTES(res[2], res[0], per * sizeof(float), "layers, 5 threads vs 1");
    free(res[0]), free(res[1]), free(res[2]);
    free(x), free(w), free(dout), free(wte), free(tok);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Errors and work                                                          */
/* ------------------------------------------------------------------------ */

static void expect_invalid(sq_gpt_config c, const char *needle)
{
    sq_error e = {0};
    const char *err = e.msg;
    ck_assert_msg(sq_gpt_validate(&c, &e) == SQ_ERR_SPEC, "{%d, %d, %d, %d} accepted",
                  c.layers, c.channels, c.heads, c.context);
    ck_assert_msg(strstr(err, needle), "{%d, %d, %d, %d}: '%s' lacks '%s'", c.layers, c.channels,
                  c.heads, c.context, err, needle);
    sq_gpt_workspace *ws = (sq_gpt_workspace *)&c; /* must be reset to NULL */
    ck_assert_int_eq(sq_gpt_workspace_new(&c, 1, 1, &ws, &e), SQ_ERR_SPEC);
    ck_assert_ptr_null(ws);
}

START_TEST(test_errors)
{
    expect_invalid((sq_gpt_config){2, 100, 3, 8}, "channels 100 is not a multiple of heads 3");
    expect_invalid((sq_gpt_config){0, 16, 2, 8}, "at least 1");
    expect_invalid((sq_gpt_config){2, 16, 0, 8}, "at least 1");
    expect_invalid((sq_gpt_config){2, 16, 2, 0}, "at least 1");
    expect_invalid((sq_gpt_config){2, -4, 2, 8}, "at least 1");
    expect_invalid((sq_gpt_config){2, 1 << 30, 1, 8}, "fit in an int");
    expect_invalid((sq_gpt_config){1 << 30, 1 << 20, 1, 8}, "too large");
    expect_invalid((sq_gpt_config){300000000, 1 << 20, 1, 8}, "overflows");
    expect_invalid((sq_gpt_config){100, 1 << 28, 1, 8}, "overflows");

    const sq_gpt_config c = {2, 16, 2, 8};
    sq_error e = {0};
    const char *err = e.msg;
    sq_gpt_workspace *ws = NULL;
    ck_assert_int_eq(sq_gpt_workspace_new(&c, 2, 9, &ws, &e), SQ_ERR_SPEC);
    ck_assert_msg(strstr(err, "T 9 exceeds the context 8"), "%s", err);
    ck_assert_int_eq(sq_gpt_workspace_new(&c, 0, 8, &ws, &e), SQ_ERR_SPEC);
    ck_assert_msg(strstr(err, "at least 1"), "%s", err);
    ck_assert_int_eq(sq_gpt_workspace_new(&c, 1 << 30, 8, &ws, &e), SQ_ERR_SPEC);
    ck_assert_msg(strstr(err, "too large"), "%s", err);
    /* sizes that overflow 64 bits: B NH T^2 L */
    const sq_gpt_config big = {1 << 20, 1 << 12, 1 << 12, 1 << 20};
    ck_assert_int_eq(sq_gpt_validate(&big, &e), 0);
    ck_assert_int_eq(sq_gpt_workspace_new(&big, 400, 1 << 20, &ws, &e), SQ_ERR_SPEC);
    ck_assert_msg(strstr(err, "overflows"), "%s", err);
    /* an allocation that fails: ~2^48 bytes */
    const sq_gpt_config huge = {1024, 1024, 16, 4096};
    ck_assert_int_eq(sq_gpt_workspace_new(&huge, 4096, 4096, &ws, &e), SQ_ERR_NOMEM);
    ck_assert_msg(strstr(err, "out of memory") && strstr(err, "MiB"), "%s", err);
    ck_assert_ptr_null(ws);
    /* a good one */
    ck_assert_msg(sq_gpt_workspace_new(&c, 2, 8, &ws, &e) == 0, "%s", err);
    ck_assert(sq_gpt_workspace_bytes(ws) > 2 * 8 * 16 * 16 * sizeof(float));
    sq_gpt_workspace_free(ws);
    sq_gpt_workspace_free(NULL);
}
END_TEST

START_TEST(test_flops)
{
    /* L = 1, C = 4, B = 1, T = 2: Linears 24 * 2 * 16 = 768, attention
    ** 2 * 1 * 4 * 2 * 3 = 48, head 2 * 2 * 4 * 256 = 4096; times 3 */
    const sq_gpt_config c = {1, 4, 2, 2};
    ck_assert_msg(sq_gpt_flops(&c, 1, 2) == 3.0 * (768 + 48 + 4096), "%.17g",
                  sq_gpt_flops(&c, 1, 2));
    /* linear in B; the Linears' share is 6 flops per token per matrix weight */
    const sq_gpt_config d = {4, 128, 4, 128};
    ck_assert(sq_gpt_flops(&d, 8, 128) == 2 * sq_gpt_flops(&d, 4, 128));
    const double mats = 4.0 * 12 * 128 * 128, tokens = 8 * 128;
    const double rest = sq_gpt_flops(&d, 8, 128) - 6 * tokens * (mats + 256 * 128);
    ck_assert_msg(fabs(rest - 3.0 * 4 * 2 * 8 * 128 * 128 * 129) < 1, "attention %g", rest);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Speed (printed, not asserted), and which BLAS does the work             */
/* ------------------------------------------------------------------------ */

/* Also the loss at init of this larger model and, asserted, that OpenBLAS
** is the CBLAS this process binds to: configure promises it, and another
** CBLAS first on a link line (GSL's reference -lgslcblas) runs the trainer
** a thirtieth as fast, silently. */
START_TEST(test_speed)
{
    model m = model_new(4, 128, 4, 128, 8, 128, 1);
    const double loss = model_step(&m); /* warm up */
    ck_assert_msg(fabs(loss - log(256.0)) < 0.1, "loss at init %.4f, want ln 256", loss);
    double best = 1e30;
    for (int r = 0; r < 2; r++) {
        const double t0 = now_s();
        model_step(&m);
        best = fmin(best, now_s() - t0);
    }
    const double fl = sq_gpt_flops(&m.c, 8, 128);
    model_free(&m);
    /* the BLAS alone, measured the same way: 1024 x 512 x 512 */
    const int M = 1024, N = 512, K = 512;
    float *a = fvec((size_t)M * K), *b = fvec((size_t)N * K), *o = fvec((size_t)M * N);
    fill(a, (size_t)M * K, 1, 1.0f, 0.0f);
    fill(b, (size_t)N * K, 2, 1.0f, 0.0f);
    gl_matmul_fwd(o, a, b, NULL, M, K, N);
    double bs = 1e30;
    for (int r = 0; r < 3; r++) {
        const double t0 = now_s();
        gl_matmul_fwd(o, a, b, NULL, M, K, N);
        bs = fmin(bs, now_s() - t0);
    }
    /* which library's sgemm this process binds to (a CBLAS linked before
    ** OpenBLAS, e.g. GSL's -lgslcblas, takes its place); OpenBLAS is the
    ** object that also defines openblas_get_num_threads, whatever its file
    ** is called (a Debian alternative may name it libblas.so.3) */
    Dl_info info, ob;
    void *sgemm = dlsym(RTLD_DEFAULT, "cblas_sgemm");
    void *obget = dlsym(RTLD_DEFAULT, "openblas_get_num_threads");
    const char *lib = sgemm && dladdr(sgemm, &info) && info.dli_fname ? info.dli_fname : "?";
    const int openblas = sgemm && obget && dladdr(obget, &ob) && lib[0] != '?' &&
                         ob.dli_fbase == info.dli_fbase;
    fprintf(stderr,
            "gpt L=4 C=128 NH=4 T=128 B=8: forward+backward %.1f ms, %.2f GFLOP, %.1f GFLOP/s "
            "(%d OpenMP threads); sgemm 1024x512x512 (gl_matmul_fwd): %.2f ms, %.1f GFLOP/s; "
            "cblas_sgemm from %s\n",
            1e3 * best, fl * 1e-9, fl * 1e-9 / best, sq_get_threads(), 1e3 * bs,
            2.0 * M * N * K * 1e-9 / bs, lib);
    free(a), free(b), free(o);
    ck_assert_msg(openblas, "cblas_sgemm binds to %s, which is not OpenBLAS (%s)", lib,
                  obget ? "OpenBLAS is loaded, but another CBLAS comes first"
                        : "no openblas_get_num_threads in the process");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpt");
    TCase *tc = tcase_create("layers");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_fd_encoder);
    tcase_add_test(tc, test_fd_layernorm);
    tcase_add_test(tc, test_fd_matmul);
    tcase_add_test(tc, test_fd_attention);
    tcase_add_test(tc, test_attention_causal);
    tcase_add_test(tc, test_fd_gelu);
    tcase_add_test(tc, test_fd_residual);
    tcase_add_test(tc, test_fd_head);
    suite_add_tcase(s, tc);
    tc = tcase_create("model");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_fd_model);
    tcase_add_test(tc, test_fd_bites);
    tcase_add_test(tc, test_params);
    tcase_add_test(tc, test_init);
    tcase_add_test(tc, test_loss_at_init);
    tcase_add_test(tc, test_determinism);
    tcase_add_test(tc, test_layers_threads);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_flops);
    tcase_add_test(tc, test_speed);
    suite_add_tcase(s, tc);
    return sqt_run(s);
}
