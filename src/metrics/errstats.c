/*
** errstats.c -- error statistics in fp64, and the clipping count.
*/
#include "shardq/metrics.h"
#include "sq_hd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void sq_erracc_init(sq_erracc *a) { memset(a, 0, sizeof *a); }

void sq_erracc_add(sq_erracc *a, const float *got, const double *exact, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        double y = got[i], x = exact[i], e = y - x;
        a->sum_e2 += e * e;
        a->sum_x2 += x * x;
        a->sum_y2 += y * y;
        a->sum_xy += x * y;
        a->sum_e += e;
        if (fabs(e) > a->max_abs) a->max_abs = fabs(e);
        if (y == 0.0 && x != 0.0) a->zeroed++;
    }
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
#pragma omp parallel for reduction(+ : clipped) schedule(static) if (ngroups > 64)
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

uint64_t sq_count_clipped(const sq_codec *c, const float *x, uint64_t n)
{
    if (sq_codec_validate(c) != SQ_OK || n == 0) return 0;
    sq_code_range l = sq_hd_code_range(c->kind == SQ_KIND_MINMAX, c->bits,
                                       c->levels == SQ_LEVELS_DEEPSPEED);
    uint64_t g = c->group, clipped = 0;
    /* Chunks of whole groups, so that one Hadamard call (one parallel
    ** region) covers many groups; a trailing partial group on its own. */
    uint64_t chunk = g >= ((uint64_t)1 << 20) ? g : (((uint64_t)1 << 20) / g) * g;
    uint64_t whole = n / g * g;
    if (chunk > whole && whole) chunk = whole;
    float *buf = malloc((size_t)(chunk < n ? (chunk > n - whole ? chunk : n - whole) : n) *
                        sizeof(float));
    if (!buf) return 0;
    for (uint64_t start = 0; start < whole; start += chunk) {
        uint64_t len = whole - start < chunk ? whole - start : chunk;
        memcpy(buf, x + start, (size_t)len * sizeof(float));
        /* blocks never straddle groups when h divides g: one call does all */
        if (c->hadamard && g % (uint64_t)c->hadamard == 0)
            sq_hadamard(buf, len, c->hadamard);
        else if (c->hadamard)
            for (uint64_t k = 0; k < len; k += g) sq_hadamard(buf + k, g, c->hadamard);
        clipped += clipped_in(c, l, buf, len);
    }
    if (whole < n) {
        uint64_t len = n - whole;
        memcpy(buf, x + whole, (size_t)len * sizeof(float));
        if (c->hadamard) sq_hadamard(buf, len, c->hadamard);
        clipped += clipped_in(c, l, buf, len);
    }
    free(buf);
    return clipped;
}
