/*
** powersgd.h -- PowerSGD's arithmetic and its ops in the world's plans.
**
** PowerSGD (Vogels, Karimireddy and Jaggi, NeurIPS 2019), as PyTorch's
** powerSGD_hook runs it: a worker's gradient plus its error-feedback
** residual, viewed as an m x c matrix M, is approximated by P Q^T with
** P = M Q (all-reduced, then orthonormalized) and Q = M^T P (all-reduced).
** The rules of every sum below are fixed (docs/schemes.md), so the bytes
** depend neither on the thread count nor on the machine:
**   products     each output element is a sum of fp32 x fp32 products,
**                exact in double, added in double in index order and
**                rounded to fp32 once;
**   orthogonalize Gram-Schmidt over the columns in order (PyTorch's
**                _orthogonalize_gram_schmidt): a column's norm is the fp32
**                rounding of the double square root of its double sum of
**                squares, the column is divided by norm + eps in fp32 (a
**                column of norm + eps = 0 becomes zeros, one of an infinite
**                norm is an error), and each later
**                column loses (fp32 rounding of the double dot product)
**                times it, product then difference in fp32.
** Matrices are row-major: M[i c + j], P[i r + k], Q[j r + k].
*/
#ifndef SQ_WORLD_POWERSGD_H
#define SQ_WORLD_POWERSGD_H

#include "shardq/plan.h"

/* The Philox site of PowerSGD's random Q (docs/conventions.md). */
#define SQ_SITE_POWERSGD_Q 16

/* The matrix view of a world of n elements under scheme s: cols =
** s->psgd_view_cols (the tensor's own view) if set, else s->psgd_cols if
** set, else ceil(sqrt(n)); at most n. rows = ceil(n / cols) (the last row
** is padded with zeros); rank = min(rows, cols, s->psgd_rank). Returns 1
** when PyTorch's rule compresses it: (rows + cols) rank minrate < rows cols. */
int sq_psgd_view(const sq_scheme *s, uint64_t n, uint64_t *rows, uint64_t *cols, int *rank);

/* Chunk c of a ring all-reduce of len elements among N ranks: the first
** len mod N chunks hold one element more. */
static inline void sq_psgd_chunk(uint64_t len, int N, int c, uint64_t *off, uint64_t *n)
{
    const uint64_t base = len / (uint64_t)N, rem = len % (uint64_t)N, uc = (uint64_t)c;
    *off = uc * base + (uc < rem ? uc : rem);
    *n = base + (uc < rem ? 1 : 0);
}

/* q[i] = standard normals, i < n: Box-Muller over the 24-bit uniforms
** 2i and 2i + 1 of key (seed, step, worker 0, SQ_SITE_POWERSGD_Q), in
** double, rounded to fp32. */
void sq_psgd_random_q(uint64_t seed, uint32_t step, float *q, uint64_t n);

/* Orthonormalizes the r columns of a (rows x r) in place; 0, or k + 1 when
** column k's norm + eps leaves fp32 (dividing by it would zero the column:
** SQ_ERR_RANGE to the caller, where PyTorch would return zeros). */
int sq_psgd_orthogonalize(float *a, uint64_t rows, int r, float eps);

/* p = m q: m is rows x cols, q cols x r, p rows x r. */
void sq_psgd_mul(const float *m, uint64_t rows, uint64_t cols, const float *q, int r, float *p);

/* q = m^T p: q is cols x r. */
void sq_psgd_mul_t(const float *m, uint64_t rows, uint64_t cols, const float *p, int r, float *q);

/* out[e - first] = element e (row-major) of p q^T, e in [first, first + count). */
void sq_psgd_approx(const float *p, const float *q, uint64_t rows, uint64_t cols, int r,
                    uint64_t first, uint64_t count, float *out);

/* Runs one of PowerSGD's compute ops (SQ_PLAN_PSGD_*) of rank r. */
int sq_psgd_exec(const sq_plan_layout *L, int r, const sq_plan_op *op, uint32_t step,
                 sq_plan_mem *mem, sq_error *err);

#endif
