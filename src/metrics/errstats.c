/*
** errstats.c -- error statistics in fp64, and the clipping count.
*/
#include "shardq/metrics.h"
#include "metrics_internal.h"
#include "sq_internal.h"
#include "sq_hd.h"
#include "sq_dense.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void sq_erracc_init(sq_erracc *a) { memset(a, 0, sizeof *a); }

/* One element into the sums, in the order both loops below keep: the
** figures depend on it, never on which reference type fed it. */
static inline void erracc_one(sq_erracc *a, double y, double x)
{
    double e = y - x;
    a->sum_e2 += e * e;
    a->sum_x2 += x * x;
    a->sum_y2 += y * y;
    a->sum_xy += x * y;
    a->sum_e += e;
    if (fabs(e) > a->max_abs) a->max_abs = fabs(e);
    if (y == 0.0 && x != 0.0) a->zeroed++;
}

void sq_erracc_add(sq_erracc *a, const float *got, const double *exact, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) erracc_one(a, got[i], exact[i]);
    a->n += n;
}

void sq_erracc_add_f32(sq_erracc *a, const float *got, const float *exact, uint64_t n)
{
    /* the reference widened as it is read */
    for (uint64_t i = 0; i < n; i++) erracc_one(a, got[i], exact[i]);
    a->n += n;
}

sq_errstats sq_erracc_finish(const sq_erracc *a)
{
    sq_errstats s;
    memset(&s, 0, sizeof s);
    s.n = a->n;
    if (!a->n) return s;
    double nn = (double)a->n;
    s.mse = a->sum_e2 / nn;
    s.max_abs = a->max_abs;
    s.mean_signed = a->sum_e / nn;
    s.frac_zeroed = (double)a->zeroed / nn;
    s.rel_l2 = a->sum_x2 > 0 ? sqrt(a->sum_e2 / a->sum_x2) : (a->sum_e2 > 0 ? INFINITY : 0.0);
    s.snr_db = a->sum_e2 > 0 ? (a->sum_x2 > 0 ? 10.0 * log10(a->sum_x2 / a->sum_e2) : -INFINITY)
                             : INFINITY;
    double d = sqrt(a->sum_x2) * sqrt(a->sum_y2);
    s.cosine = d > 0 ? a->sum_xy / d : (a->sum_x2 == a->sum_y2 ? 1.0 : 0.0);
    return s;
}

void sq_erracc_merge(sq_erracc *into, const sq_erracc *from)
{
    into->n += from->n;
    into->zeroed += from->zeroed;
    into->sum_e2 += from->sum_e2;
    into->sum_x2 += from->sum_x2;
    into->sum_y2 += from->sum_y2;
    into->sum_xy += from->sum_xy;
    into->sum_e += from->sum_e;
    if (from->max_abs > into->max_abs) into->max_abs = from->max_abs;
}

/* Clipped elements among the whole groups (or the one partial group) in
** buf[0..len), which already went through the Hadamard. */
static uint64_t clipped_in(const sq_codec *c, sq_code_range l, const float *buf, uint64_t len)
{
    uint64_t g = c->group, ngroups = (len + g - 1) / g, clipped = 0;
#pragma omp parallel for num_threads(sq_get_threads()) reduction(+ : clipped) schedule(static) \
    if (ngroups > 64)
    for (uint64_t k = 0; k < ngroups; k++) {
        const float *x = buf + k * g;
        uint64_t m = len - k * g < g ? len - k * g : g;
        float lo = x[0], hi = x[0], a = 0;
        for (uint64_t i = 0; i < m; i++) {
            float v = x[i];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            a = fabsf(v) > a ? fabsf(v) : a;
        }
        for (uint64_t i = 0; i < m; i++) {
            float v = c->kind == SQ_KIND_MINMAX ? (hi > lo ? (x[i] - lo) * (l.qm / (hi - lo)) : 0)
                                                : (a > 0 ? x[i] * (l.qm / a) : 0);
            float q = rintf(v);
            if (q > l.qhi || q < l.qlo) clipped++;
        }
    }
    return clipped;
}

/* The elements of group x[0..m) / div that clip, the long way: staged,
** transformed, then scaled as the quantizer would. */
static uint64_t clipped_slow(const sq_codec *c, sq_code_range l, const float *x, uint64_t m,
                             float div, float *buf)
{
    for (uint64_t i = 0; i < m; i++) buf[i] = x[i] / div;
    if (c->hadamard) sq_hadamard(buf, m, c->hadamard);
    return clipped_in(c, l, buf, m);
}

/* Whether a symmetric group with the usual levels is sure to clip nothing.
** Its multiplier m = qm / a (a its largest magnitude after the transform)
** gives |x| m <= a (qm / a)(1 + u) <= qm (1 + u)^2 < qm + 1/2 for every
** finite x, so no code leaves -qm..qm -- unless qm / a overflows (a below
** qm / FLT_MAX). The unnormalised Hadamard keeps the group's L2 norm times
** sqrt(h), so a max |x| >= 2^-40 div before it leaves a far above that. A
** transform that overflows gives a = inf, m = 0, and no clip either. So
** the transform and the per-element pass are needed only for a group
** that is tiny, all zero, or not finite. (DeepSpeed's levels stop at
** qm - 1 above, and min-max groups are left to the long way.) */
static inline __attribute__((always_inline)) int group_safe(const float *x, uint64_t m, float div)
{
    float a;
    return !sq_group_absmax(x, m, &a) && a >= 0x1p-40f * div;
}

SQ_MULTIVERSION
uint64_t sq_count_clipped_div(const sq_codec *c, const float *x, uint64_t n, float div)
{
    if (sq_codec_validate(c) != SQ_OK || n == 0) return 0;
    if (c->kind == SQ_KIND_PLUGIN) return 0; /* a plug-in has no code range to leave */
    /* QSGD's levels span the group's norm, which bounds every |x|; FP8 maps
    ** the absmax to its largest value; the sign has no range to leave */
    if (sq_kind_dense(c->kind)) return 0;
    sq_code_range l = sq_hd_code_range(c->kind == SQ_KIND_MINMAX, c->bits,
                                       c->levels == SQ_LEVELS_DEEPSPEED);
    uint64_t g = c->group, clipped = 0;
    uint64_t whole = n / g * g;
    if (c->kind == SQ_KIND_SYM && c->levels != SQ_LEVELS_DEEPSPEED && div >= 1.0f &&
        (!c->hadamard || g % (uint64_t)c->hadamard == 0)) {
        /* group by group, the long way only where group_safe cannot tell */
        uint64_t ngroups = whole / g;
        int nomem = 0;
#pragma omp parallel num_threads(sq_get_threads()) reduction(+ : clipped) reduction(| : nomem) \
    if (ngroups > 64)
        {
            float *buf = NULL;
#pragma omp for schedule(static)
            for (uint64_t k = 0; k < ngroups; k++) {
                const float *xg = x + k * g;
                if (group_safe(xg, g, div)) continue;
                if (!buf && !(buf = malloc((size_t)g * sizeof *buf))) {
                    nomem = 1;
                    continue;
                }
                clipped += clipped_slow(c, l, xg, g, div, buf);
            }
            free(buf);
        }
        if (nomem) return 0;
        if (whole < n) {
            float *buf = malloc((size_t)(n - whole) * sizeof *buf);
            if (!buf) return 0;
            clipped += clipped_slow(c, l, x + whole, n - whole, div, buf);
            free(buf);
        }
        return clipped;
    }
    /* Chunks of whole groups, so that one Hadamard call (one parallel
    ** region) covers many groups; a trailing partial group on its own. */
    uint64_t chunk = g >= ((uint64_t)1 << 20) ? g : (((uint64_t)1 << 20) / g) * g;
    if (chunk > whole && whole) chunk = whole;
    float *buf = malloc((size_t)(chunk < n ? (chunk > n - whole ? chunk : n - whole) : n) *
                        sizeof(float));
    if (!buf) return 0;
    for (uint64_t start = 0; start < whole; start += chunk) {
        uint64_t len = whole - start < chunk ? whole - start : chunk;
        for (uint64_t i = 0; i < len; i++) buf[i] = x[start + i] / div;
        /* blocks never straddle groups when h divides g: one call does all */
        if (c->hadamard && g % (uint64_t)c->hadamard == 0)
            sq_hadamard(buf, len, c->hadamard);
        else if (c->hadamard)
            for (uint64_t k = 0; k < len; k += g) sq_hadamard(buf + k, g, c->hadamard);
        clipped += clipped_in(c, l, buf, len);
    }
    if (whole < n) clipped += clipped_slow(c, l, x + whole, n - whole, div, buf);
    free(buf);
    return clipped;
}

uint64_t sq_count_clipped(const sq_codec *c, const float *x, uint64_t n)
{
    return sq_count_clipped_div(c, x, n, 1.0f);
}
