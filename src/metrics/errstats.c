/*
** errstats.c -- error statistics in fp64, and the clipping count.
*/
#include "metrics/errstats.h"
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

uint64_t sq_count_clipped(const sq_codec *c, const float *x, uint64_t n)
{
    if (sq_codec_validate(c) != SQ_OK || n == 0) return 0;
    sq_code_range l = sq_hd_code_range(c->kind == SQ_KIND_MINMAX, c->bits,
                                       c->levels == SQ_LEVELS_DEEPSPEED);
    uint64_t g = c->group, clipped = 0;
    float *buf = malloc((size_t)(g < n ? g : n) * sizeof(float));
    if (!buf) return 0;
    for (uint64_t start = 0; start < n; start += g) {
        uint64_t len = n - start < g ? n - start : g;
        memcpy(buf, x + start, (size_t)len * sizeof(float));
        if (c->hadamard) sq_hadamard(buf, len, c->hadamard);
        float lo = buf[0], hi = buf[0], a = 0;
        for (uint64_t i = 0; i < len; i++) {
            float v = buf[i];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            a = fabsf(v) > a ? fabsf(v) : a;
        }
        for (uint64_t i = 0; i < len; i++) {
            float v = c->kind == SQ_KIND_MINMAX ? (hi > lo ? (buf[i] - lo) * (l.qm / (hi - lo)) : 0)
                                                : (a > 0 ? buf[i] * (l.qm / a) : 0);
            float q = rintf(v);
            if (q > l.qhi || q < l.qlo) clipped++;
        }
    }
    free(buf);
    return clipped;
}
