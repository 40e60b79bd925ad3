/*
** gpt_layers.c -- the layers of the byte-level GPT, forward and backward
** (conventions in gpt_layers.h).
**
** Determinism: every parallel loop below gives each output element to one
** thread, and every sum that element needs runs inside that thread in a
** fixed order (rows in order, channels in order; a product's sums inside
** one single-threaded sgemm call on a block fixed by the shapes). No
** atomics, no reduction clauses over floats, so the bytes do not depend on
** the thread count. The `omp simd` loops have independent iterations (one
** output element each), so vectorising them changes no rounding either.
*/
#include "train/gpt_layers.h"

#include "shardq/codec.h"
#include "shardq/train.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/* Channels per block in the loops that sum over rows: threads split the
** blocks, each block sums its rows in order. */
#define GL_CBLK 32
/* Below this many elements an elementwise loop runs in one thread, and
** below this many multiply-adds a loop of sgemm calls: starting a team costs
** microseconds, and far more when the cores are shared with other work
** (a thread waits at the barrier for a descheduled one). */
#define GL_PAR_MIN 16384
#define GL_BLAS_PAR_MIN (1u << 18)

/* The elementwise kernels with exp in them are compiled for AVX-512, AVX2
** and baseline x86-64, picked at load time (GCC's target_clones). They
** vectorise across independent elements only, and -ffp-contract=off holds
** in every clone (no fused multiply-add), so all clones give the same bits
** (checked on 4M inputs of gelu; -DGL_NO_CLONES builds the baseline only). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__) && \
    !defined(GL_NO_CLONES)
#define GL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define GL_CLONES
#endif

static inline int gl_min(int a, int b) { return a < b ? a : b; }

/* ------------------------------------------------------------------------ */
/* Encoder                                                                  */
/* ------------------------------------------------------------------------ */

void gl_encoder_fwd(float *out, const uint8_t *tok, const float *wte, const float *wpe, int B,
                    int T, int C)
{
    const int BT = B * T;
#pragma omp parallel for num_threads(sq_get_threads()) schedule(static) \
    if ((size_t)BT * (size_t)C >= GL_PAR_MIN)
    for (int r = 0; r < BT; r++) {
        float *o = out + (size_t)r * C;
        const float *e = wte + (size_t)tok[r] * C;
        const float *p = wpe + (size_t)(r % T) * C;
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = e[c] + p[c];
    }
}

void gl_encoder_bwd(float *dwte, float *dwpe, const float *dout, const uint8_t *tok, int B, int T,
                    int C)
{
    const int BT = B * T, nblk = (C + GL_CBLK - 1) / GL_CBLK;
    /* parallel over channel blocks; within one, the rows in order */
#pragma omp parallel for num_threads(sq_get_threads()) schedule(static) \
    if ((size_t)BT * (size_t)C >= GL_PAR_MIN)
    for (int blk = 0; blk < nblk; blk++) {
        const int c0 = blk * GL_CBLK, c1 = gl_min(c0 + GL_CBLK, C);
        for (int r = 0; r < BT; r++) {
            const float *d = dout + (size_t)r * C;
            if (dwte) {
                float *w = dwte + (size_t)tok[r] * C;
#pragma omp simd
                for (int c = c0; c < c1; c++) w[c] += d[c];
            }
            if (dwpe) {
                float *p = dwpe + (size_t)(r % T) * C;
#pragma omp simd
                for (int c = c0; c < c1; c++) p[c] += d[c];
            }
        }
    }
}

/* ------------------------------------------------------------------------ */
/* LayerNorm                                                                */
/* ------------------------------------------------------------------------ */

void gl_layernorm_fwd(float *out, float *mean, float *rstd, const float *x, const float *w,
                      const float *b, size_t rows, int C)
{
#pragma omp parallel for num_threads(sq_get_threads()) schedule(static) \
    if (rows * (size_t)C >= GL_PAR_MIN)
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * C;
        double s = 0.0;
        for (int c = 0; c < C; c++) s += xr[c];
        const double m = s / C;
        double v = 0.0;
        for (int c = 0; c < C; c++) {
            double d = xr[c] - m;
            v += d * d;
        }
        v /= C;
        const float mf = (float)m, rs = (float)(1.0 / sqrt(v + (double)GL_LN_EPS));
        float *o = out + r * C;
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = (xr[c] - mf) * rs * w[c] + b[c];
        mean[r] = mf;
        rstd[r] = rs;
    }
}

void gl_layernorm_bwd(float *dx, float *dw, float *db, const float *dout, const float *x,
                      const float *w, const float *mean, const float *rstd, size_t rows, int C)
{
    const int nth = sq_get_threads();
    const int par = rows * (size_t)C >= GL_PAR_MIN;
    if (dw || db) {
        const int nblk = (C + GL_CBLK - 1) / GL_CBLK;
#pragma omp parallel for num_threads(nth) schedule(static) if (par)
        for (int blk = 0; blk < nblk; blk++) {
            const int c0 = blk * GL_CBLK, c1 = gl_min(c0 + GL_CBLK, C);
            float aw[GL_CBLK], ab[GL_CBLK];
            for (int c = 0; c < c1 - c0; c++) aw[c] = ab[c] = 0.0f;
            for (size_t r = 0; r < rows; r++) {
                const float *d = dout + r * C + c0, *xr = x + r * C + c0;
                const float m = mean[r], s = rstd[r];
#pragma omp simd
                for (int c = 0; c < c1 - c0; c++) {
                    aw[c] += d[c] * ((xr[c] - m) * s);
                    ab[c] += d[c];
                }
            }
            if (dw) memcpy(dw + c0, aw, (size_t)(c1 - c0) * sizeof(float));
            if (db) memcpy(db + c0, ab, (size_t)(c1 - c0) * sizeof(float));
        }
    }
    if (!dx) return;
#pragma omp parallel for num_threads(nth) schedule(static) if (par)
    for (size_t r = 0; r < rows; r++) {
        const float *d = dout + r * C, *xr = x + r * C;
        const float m = mean[r], s = rstd[r];
        /* dxhat = dout * w; dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) */
        double s1 = 0.0, s2 = 0.0;
        for (int c = 0; c < C; c++) {
            const float g = d[c] * w[c];
            s1 += g;
            s2 += (double)g * ((xr[c] - m) * s);
        }
        const float m1 = (float)(s1 / C), m2 = (float)(s2 / C);
        float *o = dx + r * C;
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = (d[c] * w[c] - m1 - ((xr[c] - m) * s) * m2) * s;
    }
}

/* ------------------------------------------------------------------------ */
/* BLAS inside OpenMP loops                                                 */
/* ------------------------------------------------------------------------ */
/*
** The products run inside OpenMP parallel loops, each sgemm call on a block
** of the output fixed by the shapes alone (never by the thread count), with
** OpenBLAS itself kept to one thread meanwhile. Two reasons:
**  - OpenBLAS's pthreads and OpenMP's threads, taking turns, fight for the
**    cores: each pool spins for a while after its work is done, so the other
**    one runs on fewer cores than it thinks it has (measured on 2 cores: the
**    model ran twice as slow with a threaded BLAS between OpenMP loops);
**  - each output element is then summed by one single-threaded call, in an
**    order that depends only on the shapes: the bytes do not depend on
**    OpenBLAS's thread count either.
** With an OpenMP build of OpenBLAS (openblas_get_parallel() == 2), calls
** from inside a parallel region already run single-threaded; a sequential
** build (0) has no threads to turn off.
*/

int gl_blas_serial_begin(void)
{
    if (openblas_get_parallel() != 1) return 0;
    const int n = openblas_get_num_threads();
    if (n > 1) openblas_set_num_threads(1);
    return n;
}

void gl_blas_serial_end(int saved)
{
    if (saved > 1) openblas_set_num_threads(saved);
}

/* Rows of x per sgemm call in the forward and the input gradient, and the
** tile of a weight gradient per call. */
#define GL_MM_ROWS 128
#define GL_DW_TILE 128

/* ------------------------------------------------------------------------ */
/* Linear: x . W^T + b                                                      */
/* ------------------------------------------------------------------------ */

void gl_matmul_fwd(float *out, const float *x, const float *W, const float *bias, int rows, int C,
                   int OC)
{
    const int nth = sq_get_threads(), saved = gl_blas_serial_begin();
    const int nchunk = (rows + GL_MM_ROWS - 1) / GL_MM_ROWS;
    const int par = nchunk > 1 && (size_t)rows * C * OC >= GL_BLAS_PAR_MIN;
#pragma omp parallel for num_threads(nth) schedule(static) if (par)
    for (int k = 0; k < nchunk; k++) {
        const int r0 = k * GL_MM_ROWS, m = gl_min(GL_MM_ROWS, rows - r0);
        float *o = out + (size_t)r0 * OC;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, OC, C, 1.0f, x + (size_t)r0 * C, C,
                    W, C, 0.0f, o, OC);
        if (bias)
            for (int r = 0; r < m; r++) {
                float *orow = o + (size_t)r * OC;
#pragma omp simd
                for (int j = 0; j < OC; j++) orow[j] += bias[j];
            }
    }
    gl_blas_serial_end(saved);
}

/* dW[M, N] = A^T . X over K rows, A [K, lda], X [K, ldx], in tiles of the
** output, inside an enclosing parallel loop: the work items [0, ntiles). */
static void gl_tile_AtX(float *dW, const float *A, int lda, const float *X, int ldx, int M, int N,
                        int K, int tile)
{
    const int tn = (N + GL_DW_TILE - 1) / GL_DW_TILE;
    const int i0 = (tile / tn) * GL_DW_TILE, j0 = (tile % tn) * GL_DW_TILE;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, gl_min(GL_DW_TILE, M - i0),
                gl_min(GL_DW_TILE, N - j0), K, 1.0f, A + i0, lda, X + j0, ldx, 0.0f,
                dW + (size_t)i0 * N + j0, N);
}

static int gl_ntiles(int M, int N)
{
    return ((M + GL_DW_TILE - 1) / GL_DW_TILE) * ((N + GL_DW_TILE - 1) / GL_DW_TILE);
}

void gl_matmul_bwd(float *dx, float *dW, float *dbias, const float *dout, const float *x,
                   const float *W, int rows, int C, int OC)
{
    const int nth = sq_get_threads(), saved = gl_blas_serial_begin();
    /* one loop over three kinds of work item: blocks of rows of dx, tiles
    ** of dW, blocks of channels of dbias; each item's result depends on the
    ** shapes alone, so the dynamic schedule changes no bit */
    const int nx = dx ? (rows + GL_MM_ROWS - 1) / GL_MM_ROWS : 0;
    const int nw = dW ? gl_ntiles(OC, C) : 0;
    const int nb = dbias ? (OC + GL_CBLK - 1) / GL_CBLK : 0;
    const int par = nx + nw + nb > 1 && (size_t)rows * C * OC >= GL_BLAS_PAR_MIN;
#pragma omp parallel for num_threads(nth) schedule(dynamic, 1) if (par)
    for (int item = 0; item < nx + nw + nb; item++) {
        if (item < nx) { /* dx[rows, C] = dout[rows, OC] . W[OC, C] */
            const int r0 = item * GL_MM_ROWS;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, gl_min(GL_MM_ROWS, rows - r0),
                        C, OC, 1.0f, dout + (size_t)r0 * OC, OC, W, C, 0.0f, dx + (size_t)r0 * C,
                        C);
        } else if (item < nx + nw) { /* dW[OC, C] = dout^T . x */
            gl_tile_AtX(dW, dout, OC, x, C, OC, C, rows, item - nx);
        } else { /* dbias: the rows in order */
            const int j0 = (item - nx - nw) * GL_CBLK, j1 = gl_min(j0 + GL_CBLK, OC);
            float acc[GL_CBLK];
            for (int j = 0; j < j1 - j0; j++) acc[j] = 0.0f;
            for (int r = 0; r < rows; r++) {
                const float *d = dout + (size_t)r * OC + j0;
#pragma omp simd
                for (int j = 0; j < j1 - j0; j++) acc[j] += d[j];
            }
            memcpy(dbias + j0, acc, (size_t)(j1 - j0) * sizeof(float));
        }
    }
    gl_blas_serial_end(saved);
}

/* ------------------------------------------------------------------------ */
/* exp                                                                      */
/* ------------------------------------------------------------------------ */
/*
** e^x in plain float arithmetic, so that the loops around it vectorise and
** the result is the same on every machine (libm's expf has per-CPU variants,
** and calls stop vectorisation). x = n ln2 + r, |r| <= ln2 / 2, with ln2 in
** two parts (Cody-Waite: n * 0.693359375 is exact); e^r by its Taylor
** polynomial of degree 7 (truncation 5e-9 relative); times 2^n built in the
** exponent bits. Within 2 ulp of e^x over [-87, 88]; 0 below -87 (where e^x
** would be subnormal), e^88 above 88, NaN stays NaN.
*/
static inline float gl_expf(float x)
{
    const float xc = x > -87.0f ? (x < 88.0f ? x : 88.0f) : -87.0f;
    const float nf = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest */
    const float r = (xc - nf * 0.693359375f) - nf * -2.12194440e-4f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int32_t bits = ((int32_t)nf + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    const float e = p * scale;
    return x != x ? x : (x < -87.0f ? 0.0f : e);
}

/* ------------------------------------------------------------------------ */
/* Causal multi-head attention                                              */
/* ------------------------------------------------------------------------ */
/*
** One (sequence, head) per iteration of the parallel loop, each product one
** single-threaded sgemm on strided views of qkv (row stride 3C). The score
** products are full T x T squares: sgemm is faster at the square than plain
** loops at the triangle. Above the diagonal the probabilities are exact
** zeros, so the square products add nothing there.
*/

/* p[0 .. n) becomes its softmax; returns the sum of the exponentials (in
** double, in order) and the max in *max. The max is exact in any order. */
static inline double softmax_row(float *p, int n, float *max)
{
    float mx = p[0];
    for (int j = 1; j < n; j++) mx = p[j] > mx ? p[j] : mx;
#pragma omp simd
    for (int j = 0; j < n; j++) p[j] = gl_expf(p[j] - mx);
    double sum = 0.0;
    for (int j = 0; j < n; j++) sum += p[j];
    const float inv = (float)(1.0 / sum);
#pragma omp simd
    for (int j = 0; j < n; j++) p[j] *= inv;
    *max = mx;
    return sum;
}

/* Row t of S[T, T] becomes the softmax of S[t, 0 .. t], zeros after. */
GL_CLONES static void causal_softmax(float *S, int T)
{
    for (int t = 0; t < T; t++) {
        float *s = S + (size_t)t * T, mx;
        softmax_row(s, t + 1, &mx);
        for (int t2 = t + 1; t2 < T; t2++) s[t2] = 0.0f;
    }
}

/* dS (holding dP on entry) = scale P (dP - sum_t2 P dP) per row, zeros
** above the diagonal. */
GL_CLONES static void causal_softmax_bwd(float *dS, const float *P, int T, float scale)
{
    for (int t = 0; t < T; t++) {
        const float *p = P + (size_t)t * T;
        float *d = dS + (size_t)t * T;
        const int n = t + 1;
        double dot = 0.0;
        for (int t2 = 0; t2 < n; t2++) dot += (double)p[t2] * d[t2];
        const float dotf = (float)dot;
#pragma omp simd
        for (int t2 = 0; t2 < n; t2++) d[t2] = p[t2] * (d[t2] - dotf) * scale;
        for (int t2 = n; t2 < T; t2++) d[t2] = 0.0f;
    }
}

/* What both attention passes share: the head size, the scale of the scores,
** the threads of the loop over (batch, head) and whether it runs in
** parallel (each head's GEMMs then run serial: gl_blas_serial_begin, whose
** state `saved` the pass gives back to gl_blas_serial_end). */
typedef struct attn_pass {
    int hs, nth, saved, par;
    float scale;
} attn_pass;

static attn_pass attn_begin(int B, int T, int C, int NH)
{
    attn_pass a;
    a.hs = C / NH;
    a.scale = 1.0f / sqrtf((float)a.hs);
    a.nth = sq_get_threads();
    a.saved = gl_blas_serial_begin();
    a.par = B * NH > 1 && (size_t)B * T * T * C >= GL_BLAS_PAR_MIN;
    return a;
}

void gl_attention_fwd(float *out, float *att, const float *qkv, int B, int T, int C, int NH)
{
    const attn_pass a = attn_begin(B, T, C, NH);
    const int hs = a.hs, C3 = 3 * C;
#pragma omp parallel for num_threads(a.nth) schedule(static) if (a.par)
    for (int bh = 0; bh < B * NH; bh++) {
        const int b = bh / NH, h = bh % NH;
        const float *q = qkv + (size_t)b * T * C3 + (size_t)h * hs, *k = q + C, *v = q + 2 * C;
        float *S = att + (size_t)bh * T * T;
        /* S = scale Q K^T, the softmax of each row over t2 <= t */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, a.scale, q, C3, k, C3, 0.0f,
                    S, T);
        causal_softmax(S, T);
        /* out = P V */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, S, T, v, C3, 0.0f,
                    out + (size_t)b * T * C + (size_t)h * hs, C);
    }
    gl_blas_serial_end(a.saved);
}

void gl_attention_bwd(float *dqkv, const float *dout, const float *qkv, const float *att,
                      float *scratch, int B, int T, int C, int NH)
{
    const attn_pass a = attn_begin(B, T, C, NH);
    const int hs = a.hs, C3 = 3 * C;
#pragma omp parallel for num_threads(a.nth) schedule(static) if (a.par)
    for (int bh = 0; bh < B * NH; bh++) {
        const int b = bh / NH, h = bh % NH;
        const size_t off = (size_t)b * T * C3 + (size_t)h * hs;
        const float *q = qkv + off, *k = q + C, *v = q + 2 * C;
        float *dq = dqkv + off, *dk = dq + C, *dv = dq + 2 * C;
        const float *P = att + (size_t)bh * T * T;
        const float *dy = dout + (size_t)b * T * C + (size_t)h * hs;
        float *dS = scratch + (size_t)bh * T * T;
        /* dP = dY V^T; dV = P^T dY */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dy, C, v, C3, 0.0f,
                    dS, T);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, P, T, dy, C, 0.0f, dv,
                    C3);
        /* softmax: dS = scale P (dP - sum_t2 P dP), 0 above the diagonal */
        causal_softmax_bwd(dS, P, T, a.scale);
        /* dQ = dS K; dK = dS^T Q */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, dS, T, k, C3, 0.0f,
                    dq, C3);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, dS, T, q, C3, 0.0f,
                    dk, C3);
    }
    gl_blas_serial_end(a.saved);
}

/* ------------------------------------------------------------------------ */
/* GELU and the residual add                                                */
/* ------------------------------------------------------------------------ */

#define GL_GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GL_GELU_A 0.044715f

/* 0.5 (1 + tanh(u)) = sigmoid(2u): gelu(x) = x s, s = 1 / (1 + e^(-2u)), and
** gelu'(x) = s + x * d/du[sigmoid(2u)] * du/dx = s + 2 x s (1 - s) du/dx. */
GL_CLONES static void gelu_fwd_span(float *out, const float *x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        const float v = x[i];
        const float u = GL_GELU_K * (v + GL_GELU_A * v * v * v);
        out[i] = v / (1.0f + gl_expf(-2.0f * u));
    }
}

GL_CLONES static void gelu_bwd_span(float *dx, const float *x, const float *dout, size_t n)
{
#pragma omp simd /* dx may be dout: element i reads and writes index i only */
    for (size_t i = 0; i < n; i++) {
        const float v = x[i];
        const float u = GL_GELU_K * (v + GL_GELU_A * v * v * v);
        const float s = 1.0f / (1.0f + gl_expf(-2.0f * u));
        const float du = GL_GELU_K * (1.0f + 3.0f * GL_GELU_A * v * v);
        dx[i] = dout[i] * (s + 2.0f * v * s * (1.0f - s) * du);
    }
}

#define GL_SPAN 4096

void gl_gelu_fwd(float *out, const float *x, size_t n)
{
    const size_t ns = (n + GL_SPAN - 1) / GL_SPAN;
#pragma omp parallel for num_threads(sq_get_threads()) schedule(static) if (n >= GL_PAR_MIN)
    for (size_t k = 0; k < ns; k++) {
        const size_t i0 = k * GL_SPAN;
        gelu_fwd_span(out + i0, x + i0, n - i0 < GL_SPAN ? n - i0 : GL_SPAN);
    }
}

void gl_gelu_bwd(float *dx, const float *x, const float *dout, size_t n)
{
    const size_t ns = (n + GL_SPAN - 1) / GL_SPAN;
#pragma omp parallel for num_threads(sq_get_threads()) schedule(static) if (n >= GL_PAR_MIN)
    for (size_t k = 0; k < ns; k++) {
        const size_t i0 = k * GL_SPAN;
        gelu_bwd_span(dx + i0, x + i0, dout + i0, n - i0 < GL_SPAN ? n - i0 : GL_SPAN);
    }
}

void gl_residual_fwd(float *out, const float *a, const float *b, size_t n)
{
#pragma omp parallel for simd num_threads(sq_get_threads()) schedule(static) if (n >= GL_PAR_MIN)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void gl_residual_bwd(float *da, float *db, const float *dout, size_t n)
{
#pragma omp parallel for simd num_threads(sq_get_threads()) schedule(static) if (n >= GL_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        if (da) da[i] += dout[i];
        if (db) db[i] += dout[i];
    }
}

/* ------------------------------------------------------------------------ */
/* Output head, softmax, cross-entropy                                      */
/* ------------------------------------------------------------------------ */

double gl_head_fwd(float *probs, float *losses, const float *x, const float *wte,
                   const uint8_t *targets, int rows, int C)
{
    const int V = SQ_GPT_VOCAB;
    const int nth = sq_get_threads(), saved = gl_blas_serial_begin();
    const int nchunk = (rows + GL_MM_ROWS - 1) / GL_MM_ROWS;
    const int par = nchunk > 1 && (size_t)rows * C * V >= GL_BLAS_PAR_MIN;
#pragma omp parallel for num_threads(nth) schedule(static) if (par)
    for (int k = 0; k < nchunk; k++) {
        const int r0 = k * GL_MM_ROWS, m = gl_min(GL_MM_ROWS, rows - r0);
        /* logits[r0 .. r0 + m) = x . wte^T, then the softmax of each row */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, V, C, 1.0f, x + (size_t)r0 * C, C,
                    wte, C, 0.0f, probs + (size_t)r0 * V, V);
        for (int r = r0; r < r0 + m; r++) {
            float *p = probs + (size_t)r * V, mx;
            const float lt = p[targets[r]];
            double sum = softmax_row(p, V, &mx);
            /* -log softmax[target] = log(sum) + max - logit[target] */
            losses[r] = (float)(log(sum) + ((double)mx - (double)lt));
        }
    }
    gl_blas_serial_end(saved);
    double total = 0.0;
    for (int r = 0; r < rows; r++) total += losses[r];
    return total / rows;
}

void gl_head_bwd(float *dx, float *dwte, float *dlogits, const float *probs,
                 const uint8_t *targets, const float *x, const float *wte, int rows, int C)
{
    const int V = SQ_GPT_VOCAB;
    const float inv = 1.0f / (float)rows;
    const int nth = sq_get_threads(), saved = gl_blas_serial_begin();
    const int nchunk = (rows + GL_MM_ROWS - 1) / GL_MM_ROWS;
    const int nw = dwte ? gl_ntiles(V, C) : 0;
    const int par = nchunk + nw > 1 && (size_t)rows * C * V >= GL_BLAS_PAR_MIN;
#pragma omp parallel num_threads(nth) if (par)
    {
        /* dlogits, then dx[rows, C] = dlogits . wte, a block of rows at a time */
#pragma omp for schedule(static)
        for (int k = 0; k < nchunk; k++) {
            const int r0 = k * GL_MM_ROWS, m = gl_min(GL_MM_ROWS, rows - r0);
            for (int r = r0; r < r0 + m; r++) {
                const float *p = probs + (size_t)r * V;
                float *d = dlogits + (size_t)r * V;
#pragma omp simd
                for (int j = 0; j < V; j++) d[j] = p[j] * inv;
                d[targets[r]] = (p[targets[r]] - 1.0f) * inv;
            }
            if (dx)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, C, V, 1.0f,
                            dlogits + (size_t)r0 * V, V, wte, C, 0.0f, dx + (size_t)r0 * C, C);
        }
        /* (the implied barrier: all of dlogits is written) dwte = dlogits^T . x */
#pragma omp for schedule(dynamic, 1)
        for (int tile = 0; tile < nw; tile++) gl_tile_AtX(dwte, dlogits, V, x, C, V, C, rows, tile);
    }
    gl_blas_serial_end(saved);
}
