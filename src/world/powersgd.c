/*
** powersgd.c -- PowerSGD's arithmetic and the three compute ops of its plan
** (powersgd.h; the all-reduces are plan.c's).
**
** Per step and worker, with M the worker's gradient (divided by N when the
** scheme averages, as every path) plus its residual e, viewed as rows x
** cols:
**   project  Q := the last step's Q (warm start) or a fresh draw, then
**            orthonormalized (as PyTorch does both); P := M Q;
**   P is summed over the workers (an fp32 ring all-reduce);
**   back     P := orthonormal(P); Q := M^T P;
**   Q is summed over the workers (the second all-reduce) and kept;
**   out      A := P Q^T, the result: each worker keeps its partition of A
**            as the reduced gradient; e := M - A / N.
** PyTorch computes the residual against the decompressed all-reduced
** result too (input_tensor_cp - input_tensor): with its undivided inputs
** and its Q divided by N, its residual is N times this one, and the A it
** returns is this A (docs/schemes.md). Without error feedback e stays 0.
**
** Why plain loops and not BLAS: OpenBLAS picks its kernel per CPU (FMA or
** not, blocking), so its bytes differ between machines even on one thread;
** these products are thin (rank r columns), so a loop that reads M once
** per product is as fast as the memory allows anyway.
*/
#include "world/powersgd.h"
#include "world/world_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Below this many multiply-adds a product runs in one thread. */
#define PSGD_PAR_MIN 65536

/* ------------------------------------------------------------------------ */
/* The view                                                                 */
/* ------------------------------------------------------------------------ */

static uint64_t ceil_sqrt(uint64_t n)
{
    uint64_t c = (uint64_t)sqrt((double)n);
    while (c * c < n) c++;
    while (c > 1 && (c - 1) * (c - 1) >= n) c--;
    return c;
}

int sq_psgd_view(const sq_scheme *s, uint64_t n, uint64_t *rows, uint64_t *cols, int *rank)
{
    uint64_t c = s->psgd_view_cols ? s->psgd_view_cols : s->psgd_cols ? s->psgd_cols : ceil_sqrt(n);
    if (c > n) c = n;
    if (c < 1) c = 1;
    const uint64_t m = (n + c - 1) / c;
    uint64_t r = (uint64_t)(s->psgd_rank > 0 ? s->psgd_rank : 1);
    if (r > m) r = m;
    if (r > c) r = c;
    *rows = m, *cols = c, *rank = (int)r;
    /* _should_compress, in Python's floats */
    return (double)(m + c) * (double)r * s->psgd_minrate < (double)m * (double)c;
}

/* ------------------------------------------------------------------------ */
/* Arithmetic                                                               */
/* ------------------------------------------------------------------------ */

void sq_psgd_random_q(uint64_t seed, uint32_t step, float *q, uint64_t n)
{
    const sq_rng_key key = {seed, step, 0, SQ_SITE_POWERSGD_Q};
    enum { CHUNK = 2048 };
    float u[2 * CHUNK];
    for (uint64_t i0 = 0; i0 < n; i0 += CHUNK) {
        const uint64_t len = n - i0 < CHUNK ? n - i0 : CHUNK;
        sq_uniform24_n(&key, 2 * i0, 2 * len, u);
        for (uint64_t i = 0; i < len; i++) {
            const double rr = sqrt(-2.0 * log(1.0 - (double)u[2 * i]));
            q[i0 + i] = (float)(rr * cos(6.283185307179586 * (double)u[2 * i + 1]));
        }
    }
}

int sq_psgd_orthogonalize(float *a, uint64_t rows, int r, float eps)
{
    const uint64_t ur = (uint64_t)r;
    for (int k = 0; k < r; k++) {
        double ss = 0;
        for (uint64_t i = 0; i < rows; i++) ss += (double)a[i * ur + k] * (double)a[i * ur + k];
        const float d = (float)sqrt(ss) + eps;
        if (!isfinite(d)) return k + 1; /* dividing by it would zero the column */
        for (uint64_t i = 0; i < rows; i++)
            a[i * ur + k] = d > 0.0f ? a[i * ur + k] / d : 0.0f;
        for (int l = k + 1; l < r; l++) {
            double dot = 0;
            for (uint64_t i = 0; i < rows; i++) dot += (double)a[i * ur + k] * (double)a[i * ur + l];
            const float df = (float)dot;
            for (uint64_t i = 0; i < rows; i++) {
                const float t = df * a[i * ur + k];
                a[i * ur + l] = a[i * ur + l] - t;
            }
        }
    }
    return 0;
}

void sq_psgd_mul(const float *m, uint64_t rows, uint64_t cols, const float *q, int r, float *p)
{
    const uint64_t ur = (uint64_t)r;
    const int par = rows > 1 && rows * cols * ur >= PSGD_PAR_MIN;
#pragma omp parallel num_threads(sq_get_threads()) if (par)
    {
        double *acc = malloc(ur * sizeof *acc);
#pragma omp for schedule(static)
        for (uint64_t i = 0; i < rows; i++) {
            const float *mi = m + i * cols;
            if (acc) {
                memset(acc, 0, ur * sizeof *acc);
                for (uint64_t j = 0; j < cols; j++)
                    for (uint64_t k = 0; k < ur; k++) acc[k] += (double)mi[j] * (double)q[j * ur + k];
                for (uint64_t k = 0; k < ur; k++) p[i * ur + k] = (float)acc[k];
            } else { /* the same sums, one column at a time */
                for (uint64_t k = 0; k < ur; k++) {
                    double s = 0;
                    for (uint64_t j = 0; j < cols; j++) s += (double)mi[j] * (double)q[j * ur + k];
                    p[i * ur + k] = (float)s;
                }
            }
        }
        free(acc);
    }
}

/* Columns of M per block of q = m^T p: a thread sums its blocks' rows in order. */
#define PSGD_CBLK 64

void sq_psgd_mul_t(const float *m, uint64_t rows, uint64_t cols, const float *p, int r, float *q)
{
    const uint64_t ur = (uint64_t)r, nblk = (cols + PSGD_CBLK - 1) / PSGD_CBLK;
    const int par = nblk > 1 && rows * cols * ur >= PSGD_PAR_MIN;
#pragma omp parallel num_threads(sq_get_threads()) if (par)
    {
        double *acc = malloc(PSGD_CBLK * ur * sizeof *acc);
#pragma omp for schedule(static)
        for (uint64_t b = 0; b < nblk; b++) {
            const uint64_t j0 = b * PSGD_CBLK, j1 = j0 + PSGD_CBLK < cols ? j0 + PSGD_CBLK : cols;
            if (acc) {
                memset(acc, 0, PSGD_CBLK * ur * sizeof *acc);
                for (uint64_t i = 0; i < rows; i++) {
                    const float *mi = m + i * cols, *pi = p + i * ur;
                    for (uint64_t j = j0; j < j1; j++)
                        for (uint64_t k = 0; k < ur; k++)
                            acc[(j - j0) * ur + k] += (double)mi[j] * (double)pi[k];
                }
                for (uint64_t j = j0; j < j1; j++)
                    for (uint64_t k = 0; k < ur; k++) q[j * ur + k] = (float)acc[(j - j0) * ur + k];
            } else {
                for (uint64_t j = j0; j < j1; j++)
                    for (uint64_t k = 0; k < ur; k++) {
                        double s = 0;
                        for (uint64_t i = 0; i < rows; i++)
                            s += (double)m[i * cols + j] * (double)p[i * ur + k];
                        q[j * ur + k] = (float)s;
                    }
            }
        }
        free(acc);
    }
}

static inline float approx_at(const float *p, const float *q, uint64_t i, uint64_t j, uint64_t ur)
{
    double s = 0;
    for (uint64_t k = 0; k < ur; k++) s += (double)p[i * ur + k] * (double)q[j * ur + k];
    return (float)s;
}

void sq_psgd_approx(const float *p, const float *q, uint64_t rows, uint64_t cols, int r,
                    uint64_t first, uint64_t count, float *out)
{
    const uint64_t ur = (uint64_t)r;
    (void)rows;
#pragma omp parallel for num_threads(sq_get_threads()) schedule(static) \
    if (count * ur >= PSGD_PAR_MIN)
    for (uint64_t e = 0; e < count; e++) out[e] = approx_at(p, q, (first + e) / cols, (first + e) % cols, ur);
}

/* ------------------------------------------------------------------------ */
/* The ops                                                                  */
/* ------------------------------------------------------------------------ */

/* A buffer of the rank's backend as host memory: itself on the CPU, else a
** copy (read in when `in`, written back by put_back). */
typedef struct hbuf {
    float *h;
    void *dev;
    uint64_t n;
    int own;
} hbuf;

static int hb_open(sq_backend *be, void *dev, uint64_t n, int in, hbuf *b)
{
    b->dev = dev, b->n = n, b->own = 0, b->h = dev;
    if (sq_backend_kind_of(be) == SQ_BACKEND_CPU) return SQ_OK;
    b->own = 1;
    if (!(b->h = malloc((n ? (size_t)n : 1) * sizeof(float)))) return SQ_ERR_NOMEM;
    return in ? sq_backend_get(be, b->h, dev, (size_t)n * sizeof(float)) : SQ_OK;
}

static int hb_put_back(sq_backend *be, hbuf *b)
{
    return b->own ? sq_backend_put(be, b->dev, b->h, (size_t)b->n * sizeof(float)) : SQ_OK;
}

static void hb_close(hbuf *b)
{
    if (b->own) free(b->h);
    b->h = NULL;
}

static float *fbuf(sq_plan_mem *mem, int b)
{
    return b == SQ_PLAN_PSGD_P || b == SQ_PLAN_PSGD_Q ? (float *)mem->q[b].codes : mem->f[b];
}

/* SQ_OK, or SQ_ERR_RANGE naming the first value of x that is not finite. */
static int overflowed(const float *x, uint64_t n, int r, const char *what, sq_error *err)
{
    size_t i = sq_find_nonfinite(x, (size_t)n);
    if (i == n) return SQ_OK;
    return sq_error_set(err, SQ_ERR_RANGE, "rank %d: PowerSGD: %s, element %zu, leaves fp32", r,
                        what, i);
}

/* The residual e = M - A / N over the model's elements (the view's padding
** keeps none); 1 if an approximated value or a residual is not finite. */
static int residual(const sq_plan_layout *L, float *m, const float *p, const float *q)
{
    const uint64_t n = L->n, cols = L->psgd_cols, ur = (uint64_t)L->psgd_rank;
    const float Nf = (float)L->N;
    int bad = 0;
#pragma omp parallel for num_threads(sq_get_threads()) schedule(static) \
    if (n * ur >= PSGD_PAR_MIN) reduction(| : bad)
    for (uint64_t e = 0; e < n; e++) {
        const float a = approx_at(p, q, e / cols, e % cols, ur);
        m[e] = m[e] - a / Nf;
        bad |= !isfinite(a) || !isfinite(m[e]);
    }
    memset(m + n, 0, (size_t)(L->psgd_rows * cols - n) * sizeof(float));
    return bad;
}

int sq_psgd_exec(const sq_plan_layout *L, int r, const sq_plan_op *op, uint32_t step,
                 sq_plan_mem *mem, sq_error *err)
{
    const sq_scheme *s = &L->scheme;
    const uint64_t rows = L->psgd_rows, cols = L->psgd_cols, n = L->n, mc = rows * cols;
    const int rk = L->psgd_rank, ef = s->psgd_ef;
    const uint64_t ur = (uint64_t)rk, S = L->shard, lo = (uint64_t)r * S;
    sq_backend *be = mem->be;
    hbuf g = {0}, M = {0}, P = {0}, Q = {0}, out = {0}, warm = {0};
    int rc = SQ_OK, told = 0; /* told: err already holds the sentence */
#define OPEN(b, id, len, in) \
    if (rc == SQ_OK) rc = hb_open(be, fbuf(mem, id), len, in, &b)
#define CHECK(x, len, what) \
    if (rc == SQ_OK && (rc = overflowed(x, len, r, what, err))) told = 1
    switch (op->kind) {
    case SQ_PLAN_PSGD_PROJECT:
        OPEN(g, SQ_PLAN_GRAD, n, 1);
        OPEN(M, SQ_PLAN_PSGD_M, mc, ef);
        OPEN(Q, SQ_PLAN_PSGD_Q, cols * ur, s->psgd_warm);
        OPEN(warm, SQ_PLAN_PSGD_WARM, 1, 1);
        OPEN(P, SQ_PLAN_PSGD_P, rows * ur, 0);
        if (rc) break;
        /* M = grad + e; the view's padding holds zeros */
        if (ef)
            for (uint64_t i = 0; i < n; i++) M.h[i] = g.h[i] + M.h[i];
        else
            memcpy(M.h, g.h, (size_t)n * sizeof(float));
        memset(M.h + n, 0, (size_t)(mc - n) * sizeof(float));
        if (!(s->psgd_warm && warm.h[0] != 0.0f)) sq_psgd_random_q(L->seed, step, Q.h, cols * ur);
        if (sq_psgd_orthogonalize(Q.h, cols, rk, s->psgd_eps)) {
            rc = sq_error_set(err, SQ_ERR_RANGE, "rank %d: PowerSGD: a column norm of Q leaves "
                              "fp32", r);
            told = 1;
            break;
        }
        sq_psgd_mul(M.h, rows, cols, Q.h, rk, P.h);
        CHECK(M.h, n, "the gradient plus its residual");
        CHECK(P.h, rows * ur, "P = M Q");
        if (rc == SQ_OK) rc = hb_put_back(be, &M);
        if (rc == SQ_OK) rc = hb_put_back(be, &Q);
        if (rc == SQ_OK) rc = hb_put_back(be, &P);
        break;
    case SQ_PLAN_PSGD_BACK:
        OPEN(M, SQ_PLAN_PSGD_M, mc, 1);
        OPEN(P, SQ_PLAN_PSGD_P, rows * ur, 1);
        OPEN(Q, SQ_PLAN_PSGD_Q, cols * ur, 0);
        if (rc) break;
        if (sq_psgd_orthogonalize(P.h, rows, rk, s->psgd_eps)) {
            rc = sq_error_set(err, SQ_ERR_RANGE, "rank %d: PowerSGD: a column norm of the "
                              "summed P leaves fp32", r);
            told = 1;
            break;
        }
        sq_psgd_mul_t(M.h, rows, cols, P.h, rk, Q.h);
        CHECK(Q.h, cols * ur, "Q = M^T P");
        if (rc == SQ_OK) rc = hb_put_back(be, &P);
        if (rc == SQ_OK) rc = hb_put_back(be, &Q);
        break;
    case SQ_PLAN_PSGD_OUT: {
        if (ef) OPEN(M, SQ_PLAN_PSGD_M, mc, 1);
        OPEN(P, SQ_PLAN_PSGD_P, rows * ur, 1);
        OPEN(Q, SQ_PLAN_PSGD_Q, cols * ur, 1);
        OPEN(out, SQ_PLAN_GOUT, S, 0);
        OPEN(warm, SQ_PLAN_PSGD_WARM, 1, 0);
        if (rc) break;
        /* the own partition of A = P Q^T; past the model, zeros */
        const uint64_t hi = lo + S < n ? lo + S : n, own = lo < hi ? hi - lo : 0;
        sq_psgd_approx(P.h, Q.h, rows, cols, rk, lo, own, out.h);
        memset(out.h + own, 0, (size_t)(S - own) * sizeof(float));
        CHECK(out.h, own, "the approximation P Q^T");
        if (rc == SQ_OK && ef && residual(L, M.h, P.h, Q.h)) {
            rc = sq_error_set(err, SQ_ERR_RANGE, "rank %d: PowerSGD: the residual M - P Q^T / N "
                              "leaves fp32", r);
            told = 1;
        }
        warm.h[0] = 1.0f; /* Q now holds a step's result: the next warm start */
        if (rc == SQ_OK) rc = hb_put_back(be, &out);
        if (rc == SQ_OK && ef) rc = hb_put_back(be, &M);
        if (rc == SQ_OK) rc = hb_put_back(be, &warm);
        break;
    }
    default:
        rc = sq_error_set(err, SQ_ERR_ARG, "rank %d: op kind %d: not a PowerSGD op", r,
                          (int)op->kind);
        told = 1;
    }
#undef OPEN
#undef CHECK
    hb_close(&g), hb_close(&M), hb_close(&P), hb_close(&Q), hb_close(&out), hb_close(&warm);
    if (rc && !told) {
        const char *why = sq_backend_error(be);
        sq_error_set(err, rc, "rank %d (%s): %s: %s%s%s", r, sq_backend_name(be), op->what,
                     sq_strerror(rc), *why ? ": " : "", why);
    }
    return rc;
}
