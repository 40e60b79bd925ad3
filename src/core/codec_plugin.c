/*
** codec_plugin.c -- the codec operations of kind=plugin: the generic rule
** around a plug-in's encode and decode (shardq/plugin.h).
**
** The library keeps the contracts of codec.h here, not the plug-in: input
** is checked for NaN and Inf before encode sees it, differences and bf16
** values are staged in fp32 (with the rounding of sq_hd.h, as the built-in
** kinds stage them), decoded values are checked after decode wrote them,
** and sums run in fp32 in chunk order. A plug-in is called once per call,
** on the whole buffer.
*/
#include "sq_plugin.h"
#include "sq_hd.h"

#include <stdlib.h>
#include <string.h>

/* A plug-in's status: its own negative sq_status, or SQ_ERR_RANGE for a
** value that is none. */
static int plugin_status(int rc)
{
    if (rc == 0) return SQ_OK;
    return rc < 0 && rc >= SQ_ERR_INTERRUPTED ? rc : SQ_ERR_RANGE;
}

static float *floats(uint64_t n) { return malloc(n ? (size_t)n * sizeof(float) : 1); }

static int any_nonfinite(const float *x, uint64_t n) { return sq_find_nonfinite(x, (size_t)n) < n; }

/* Zeroes the parts of q that n elements of c take. */
static void clear_parts(const sq_codec *c, sq_qbuf *q, uint64_t n)
{
    void *p[3] = {q->codes, q->scales, q->offsets};
    for (int i = 0; i < 3; i++) {
        uint64_t b = sq_plugin_bytes(c, n, i);
        if (b && p[i]) memset(p[i], 0, (size_t)b);
    }
}

/* The uniforms of a stochastic codec, u[i] = sq_uniform(key, i); *u stays
** NULL for the others. */
static int draw_uniforms(const sq_plugin_codec *d, const sq_rng_key *key, uint64_t n, float **u)
{
    *u = NULL;
    if (!d->stochastic) return SQ_OK;
    if (!(*u = floats(n))) return SQ_ERR_NOMEM;
    sq_uniform_n(key, 0, n, *u);
    return SQ_OK;
}

/* Encodes the finite values val[0..n) into q. */
static int encode(const sq_codec *c, const float *val, uint64_t n, const sq_rng_key *key,
                  sq_qbuf *q)
{
    const sq_plugin_codec *d = sq_plugin_of(c);
    float *u;
    int rc = draw_uniforms(d, key, n, &u);
    if (rc) return rc;
    clear_parts(c, q, n);
    rc = plugin_status(d->encode(d->ctx, val, n, d->stochastic ? key : NULL, u, q->codes,
                                 q->scales, q->offsets));
    free(u);
    return rc;
}

/* The plug-in's decode of q into out[0..n), unchecked. */
static int raw_decode(const sq_codec *c, const sq_qbuf *q, uint64_t n, float *out)
{
    const sq_plugin_codec *d = sq_plugin_of(c);
    return plugin_status(d->decode(d->ctx, q->codes, q->scales, q->offsets, n, out));
}

/* Decodes q into out[0..n): SQ_ERR_RANGE when a value is not finite. */
static int decode(const sq_codec *c, const sq_qbuf *q, uint64_t n, float *out)
{
    int rc = raw_decode(c, q, n, out);
    if (rc) return rc;
    return any_nonfinite(out, n) ? SQ_ERR_RANGE : SQ_OK;
}

int sq_plugin_quantize(const sq_codec *c, const float *x, const float *ref, int diff, uint64_t n,
                       const sq_rng_key *key, sq_qbuf *q, int bf16)
{
    if (n == 0) return SQ_OK;
    if (!diff && !bf16) return any_nonfinite(x, n) ? SQ_ERR_NONFINITE : encode(c, x, n, key, q);
    float *val = floats(n);
    if (!val) return SQ_ERR_NOMEM;
    int bad = 0;
    for (uint64_t j = 0; j < n; j++) {
        float v = diff ? (bf16 ? sq_hd_bf16_diff(x[j], ref[j]) : x[j] - ref[j])
                       : sq_hd_bf16_round(x[j]);
        val[j] = v;
        bad |= sq_hd_nonfinite(v);
    }
    int rc;
    if (bad) /* finite input whose staging overflows is a range problem */
        rc = any_nonfinite(x, n) || (diff && any_nonfinite(ref, n)) ? SQ_ERR_NONFINITE
                                                                     : SQ_ERR_RANGE;
    else
        rc = encode(c, val, n, key, q);
    free(val);
    return rc;
}

int sq_plugin_dequantize(const sq_codec *c, const sq_qbuf *q, const float *ref, int add,
                         uint64_t n, float *out, int bf16)
{
    if (n == 0) return SQ_OK;
    if (!add) {
        int rc = decode(c, q, n, out);
        if (rc != SQ_OK || !bf16) return rc;
        for (uint64_t j = 0; j < n; j++) out[j] = sq_hd_bf16_round(out[j]);
        return any_nonfinite(out, n) ? SQ_ERR_RANGE : SQ_OK;
    }
    /* decoded apart, since out may be ref */
    float *val = floats(n);
    if (!val) return SQ_ERR_NOMEM;
    int rc = raw_decode(c, q, n, val);
    if (rc == SQ_OK) {
        int bad = 0;
        for (uint64_t j = 0; j < n; j++) {
            float v = bf16 ? sq_hd_bf16_add(val[j], ref[j]) : ref[j] + val[j];
            out[j] = v;
            bad |= sq_hd_nonfinite(v);
        }
        rc = bad ? SQ_ERR_RANGE : SQ_OK;
    }
    free(val);
    return rc;
}

/* out = the sum of the k decoded chunks of c in fp32, in chunk order;
** tmp holds n floats. The Hadamard field of a built-in c is ignored. */
static int sum_into(const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n, float *out,
                    float *tmp)
{
    sq_codec plain = *c;
    plain.hadamard = 0;
    for (int i = 0; i < k; i++) {
        float *dst = i ? tmp : out;
        int rc = c->kind == SQ_KIND_PLUGIN ? raw_decode(c, &chunks[i], n, dst)
                                           : sq_dequantize(&plain, &chunks[i], n, dst);
        /* a built-in chunk past fp32 surfaces in the sum's check below */
        if (rc != SQ_OK && !(rc == SQ_ERR_RANGE && c->kind != SQ_KIND_PLUGIN)) return rc;
        if (i)
            for (uint64_t j = 0; j < n; j++) out[j] = out[j] + tmp[j];
    }
    return any_nonfinite(out, n) ? SQ_ERR_RANGE : SQ_OK;
}

int sq_plugin_sum(const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n, float *out,
                  int f16)
{
    if (f16) return SQ_ERR_SPEC; /* the fp16 arithmetic of qgZ is the built-in kinds' */
    if (n == 0) return SQ_OK;
    float *tmp = k > 1 ? floats(n) : NULL;
    if (k > 1 && !tmp) return SQ_ERR_NOMEM;
    int rc = sum_into(c, chunks, k, n, out, tmp);
    free(tmp);
    return rc;
}

int sq_plugin_sum_requant(const sq_codec *c_in, const sq_qbuf *chunks, int k, uint64_t n,
                          const sq_codec *c_out, const sq_rng_key *key, sq_qbuf *out, int f16)
{
    if (f16) return SQ_ERR_SPEC;
    if (n == 0) return SQ_OK;
    const sq_plugin_codec *d = sq_plugin_of(c_out);
    if (d && c_in->kind == SQ_KIND_PLUGIN && c_in->plugin == c_out->plugin && d->sum_composes) {
        /* the plug-in sums in the packed domain */
        float *u;
        int rc = draw_uniforms(d, key, n, &u);
        if (rc) return rc;
        clear_parts(c_out, out, n);
        rc = plugin_status(d->combine(d->ctx, chunks, k, n, d->stochastic ? key : NULL, u, out));
        free(u);
        return rc;
    }
    float *sum = floats(n), *tmp = k > 1 ? floats(n) : NULL;
    int rc = !sum || (k > 1 && !tmp) ? SQ_ERR_NOMEM : sum_into(c_in, chunks, k, n, sum, tmp);
    if (rc == SQ_OK) {
        if (d) {
            rc = encode(c_out, sum, n, key, out);
        } else {
            sq_codec plain = *c_out;
            plain.hadamard = 0;
            rc = sq_quantize(&plain, sum, n, key, out);
            if (rc == SQ_ERR_NONFINITE) rc = SQ_ERR_RANGE;
        }
    }
    free(sum);
    free(tmp);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Argument checks (sq_check.h)                                             */
/* ------------------------------------------------------------------------ */

int sq_plugin_check_qbuf(const sq_codec *c, const sq_qbuf *q, uint64_t n)
{
    if (!q) return SQ_ERR_ARG;
    if (n == 0) return SQ_OK;
    const void *p[3] = {q->codes, q->scales, q->offsets};
    for (int i = 0; i < 3; i++)
        if (!p[i] && sq_plugin_bytes(c, n, i)) return SQ_ERR_ARG;
    return SQ_OK;
}

int sq_plugin_needs_key(const sq_codec *c)
{
    const sq_plugin_codec *d = sq_plugin_of(c);
    return d && d->stochastic;
}
