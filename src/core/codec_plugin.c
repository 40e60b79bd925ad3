/*
** codec_plugin.c -- the codec operations of kind=plugin: the generic rule
** around a plug-in's encode and decode (shardq/plugin.h), and the
** registration that puts them in the table of kinds (sq_kinds.h), where
** spec.c, check.c and codec.c find them.
**
** The library keeps the contracts of codec.h here, not the plug-in: input
** is checked for NaN and Inf before encode sees it, differences and bf16
** values are staged in fp32 (with the rounding of sq_hd.h, as the built-in
** kinds stage them), and decoded values are checked after decode wrote
** them; codec.c runs the sums over the halves below (encode, decode,
** combine), in fp32 in chunk order. A plug-in is called once per call, on
** the whole buffer.
*/
#include "sq_plugin.h"
#include "sq_hd.h"
#include "sq_kinds.h"

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
static int plugin_encode(const sq_codec *c, const float *val, uint64_t n, const sq_rng_key *key,
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
static int plugin_decode(const sq_codec *c, const sq_qbuf *q, uint64_t n, float *out)
{
    const sq_plugin_codec *d = sq_plugin_of(c);
    return plugin_status(d->decode(d->ctx, q->codes, q->scales, q->offsets, n, out));
}

/* Decodes q into out[0..n): SQ_ERR_RANGE when a value is not finite. */
static int decode(const sq_codec *c, const sq_qbuf *q, uint64_t n, float *out)
{
    int rc = plugin_decode(c, q, n, out);
    if (rc) return rc;
    return any_nonfinite(out, n) ? SQ_ERR_RANGE : SQ_OK;
}

static int plugin_quantize(const sq_codec *c, const float *x, const float *ref, int diff,
                           uint64_t n, const sq_rng_key *key, sq_qbuf *q, int bf16)
{
    if (n == 0) return SQ_OK;
    if (!diff && !bf16)
        return any_nonfinite(x, n) ? SQ_ERR_NONFINITE : plugin_encode(c, x, n, key, q);
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
        rc = plugin_encode(c, val, n, key, q);
    free(val);
    return rc;
}

static int plugin_dequantize(const sq_codec *c, const sq_qbuf *q, const float *ref, int add,
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
    int rc = plugin_decode(c, q, n, val);
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

/* Both codecs this plug-in, summing in the packed domain: the sum of
** the chunks written by combine; SQ_ERR_UNSUPPORTED for any other pair. */
static int plugin_combine(const sq_codec *c_in, const sq_qbuf *chunks, int k, uint64_t n,
                          const sq_codec *c_out, const sq_rng_key *key, sq_qbuf *out)
{
    const sq_plugin_codec *d = sq_plugin_of(c_out);
    if (!d || c_in->kind != SQ_KIND_PLUGIN || c_in->plugin != c_out->plugin || !d->sum_composes)
        return SQ_ERR_UNSUPPORTED;
    float *u;
    int rc = draw_uniforms(d, key, n, &u);
    if (rc) return rc;
    clear_parts(c_out, out, n);
    rc = plugin_status(d->combine(d->ctx, chunks, k, n, d->stochastic ? key : NULL, u, out));
    free(u);
    return rc;
}

/* A stochastic plug-in needs a key. */
static int plugin_needs_key(const sq_codec *c)
{
    const sq_plugin_codec *d = sq_plugin_of(c);
    return d && d->stochastic;
}

/* ------------------------------------------------------------------------ */
/* Registering                                                              */
/* ------------------------------------------------------------------------ */

static const sq_kind_ops plugin_ops = {
    .check = sq_plugin_check,
    .parse_name = sq_plugin_parse_kind,
    .settle = sq_plugin_settle,
    .format = sq_plugin_format,
    .bytes = sq_plugin_bytes,
    .needs_key = plugin_needs_key,
    .quantize = plugin_quantize,
    .dequantize = plugin_dequantize,
    .encode = plugin_encode,
    .decode = plugin_decode,
    .combine = plugin_combine,
};

int sq_plugin_register_from(const sq_plugin_codec *codec, const char *source, sq_error *err)
{
    int rc = sq_plugin_add(codec, source, err);
    /* from the first codec on, kind=plugin is a kind of the table */
    if (rc > 0) sq_kind_ops_set(SQ_KIND_PLUGIN, &plugin_ops);
    return rc;
}

int sq_plugin_register(const sq_plugin_codec *codec, sq_error *err)
{
    return sq_plugin_register_from(codec, NULL, err);
}
