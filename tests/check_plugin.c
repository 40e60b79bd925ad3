/*
** check_plugin.c -- plug-in codecs (shardq/plugin.h): the registry and its
** refusals, the generic rule of the codec operations around a plug-in's
** callbacks, a plug-in inside an emulated world, and the example module
** (experiments/plugins/terngrad.c) loaded from its shared object.
**
** The codecs registered here are straight-line references written in this
** file: "sym8ref" is the built-in kind=sym,bits=8,round=rtn with fp32 scales
** written out from docs/conventions.md, so that a world running it as a
** plug-in must move the same bytes and compute the same values as the
** world running the built-in codec; the others exercise one path each.
*/
#include "check_util.h"
#include "world_util.h"
#include "shardq/codec.h"
#include "shardq/plugin.h"
#include "shardq/world.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GROUP 16

static sq_error err;

/* ------------------------------------------------------------------------ */
/* sym8ref: kind=sym,bits=8,round=rtn,levels=sdp4bit,scale=fp32, by hand    */
/* ------------------------------------------------------------------------ */

static int sym8_encodes; /* calls of encode: non-finite input never gets here */

static void sym8_sizes(void *ctx, uint64_t n, uint64_t b[3])
{
    (void)ctx;
    b[0] = n;                              /* one int8 code an element */
    b[1] = 4 * (n / GROUP + (n % GROUP != 0)); /* one fp32 scale a group */
    b[2] = 0;
}

/* One group: a = max |x|; a = 0 gives scale 1 and codes 0; else
** m = 127 / (a * lift) (lift 2^64 below 2^-64), v = (x * lift) * m clamped
** to [-128, 128], rounded half to even, clamped to [-127, 127]; scale a / 127. */
static int sym8_encode(void *ctx, const float *x, uint64_t n, const sq_rng_key *key,
                       const float *u, uint8_t *codes, void *scales, void *offsets)
{
    (void)ctx, (void)key, (void)u, (void)offsets;
    sym8_encodes++;
    float *s = scales;
    for (uint64_t g = 0; g * GROUP < n; g++) {
        uint64_t lo = g * GROUP, hi = lo + GROUP < n ? lo + GROUP : n;
        float a = 0;
        for (uint64_t i = lo; i < hi; i++) a = fabsf(x[i]) > a ? fabsf(x[i]) : a;
        if (a == 0) {
            s[g] = 1.0f;
            continue;
        }
        float lift = a < 0x1p-64f ? 0x1p64f : 1.0f;
        float m = 127.0f / (a * lift);
        s[g] = a / 127.0f;
        for (uint64_t i = lo; i < hi; i++) {
            float v = (x[i] * lift) * m;
            v = v < -128.0f ? -128.0f : v > 128.0f ? 128.0f : v;
            float q = rintf(v);
            q = q < -127.0f ? -127.0f : q > 127.0f ? 127.0f : q;
            codes[i] = (uint8_t)(int8_t)q;
        }
    }
    return 0;
}

static int sym8_decode(void *ctx, const uint8_t *codes, const void *scales, const void *offsets,
                       uint64_t n, float *out)
{
    (void)ctx, (void)offsets;
    const float *s = scales;
    for (uint64_t i = 0; i < n; i++) out[i] = (float)(int8_t)codes[i] * s[i / GROUP];
    return 0;
}

static sq_plugin_codec sym8_desc(const char *name)
{
    return (sq_plugin_codec){.abi = SQ_PLUGIN_ABI, .name = name, .group = GROUP,
                             .sizes = sym8_sizes, .encode = sym8_encode, .decode = sym8_decode};
}

/* ------------------------------------------------------------------------ */
/* dither1: a stochastic 1-bit codec with offsets, to see the uniforms     */
/* ------------------------------------------------------------------------ */

/* Per group: offsets = min, scales = max - min; bit i = u_i < (x_i - min) /
** (max - min), decoded min + bit * (max - min): unbiased. */
static void dither_sizes(void *ctx, uint64_t n, uint64_t b[3])
{
    (void)ctx;
    b[0] = n / 8 + (n % 8 != 0);
    b[1] = b[2] = 4 * (n / GROUP + (n % GROUP != 0));
}

static int dither_encode(void *ctx, const float *x, uint64_t n, const sq_rng_key *key,
                         const float *u, uint8_t *codes, void *scales, void *offsets)
{
    (void)ctx;
    if (!key || !u) return SQ_ERR_ARG;
    float *s = scales, *o = offsets;
    for (uint64_t g = 0; g * GROUP < n; g++) {
        uint64_t lo = g * GROUP, hi = lo + GROUP < n ? lo + GROUP : n;
        float mn = x[lo], mx = x[lo];
        for (uint64_t i = lo; i < hi; i++) {
            mn = x[i] < mn ? x[i] : mn;
            mx = x[i] > mx ? x[i] : mx;
        }
        o[g] = mn;
        s[g] = mx - mn;
        for (uint64_t i = lo; i < hi; i++)
            if (mx > mn && u[i] < (x[i] - mn) / (mx - mn)) codes[i / 8] |= (uint8_t)(0x80u >> (i % 8));
    }
    return 0;
}

static int dither_decode(void *ctx, const uint8_t *codes, const void *scales, const void *offsets,
                         uint64_t n, float *out)
{
    (void)ctx;
    const float *s = scales, *o = offsets;
    for (uint64_t i = 0; i < n; i++)
        out[i] = o[i / GROUP] + ((codes[i / 8] >> (7 - i % 8)) & 1 ? s[i / GROUP] : 0.0f);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* fixed: fixed point that composes with summation                          */
/* ------------------------------------------------------------------------ */

/* int32 codes round(x * 256), no metadata; combine adds the codes. */
static int fixed_combines;

static void fixed_sizes(void *ctx, uint64_t n, uint64_t b[3])
{
    (void)ctx;
    b[0] = 4 * n;
    b[1] = b[2] = 0;
}

static int fixed_encode(void *ctx, const float *x, uint64_t n, const sq_rng_key *key,
                        const float *u, uint8_t *codes, void *scales, void *offsets)
{
    (void)ctx, (void)key, (void)u, (void)scales, (void)offsets;
    for (uint64_t i = 0; i < n; i++) {
        int32_t q = (int32_t)rintf(x[i] * 256.0f);
        memcpy(codes + 4 * i, &q, 4);
    }
    return 0;
}

static int fixed_decode(void *ctx, const uint8_t *codes, const void *scales, const void *offsets,
                        uint64_t n, float *out)
{
    (void)ctx, (void)scales, (void)offsets;
    for (uint64_t i = 0; i < n; i++) {
        int32_t q;
        memcpy(&q, codes + 4 * i, 4);
        out[i] = (float)q / 256.0f;
    }
    return 0;
}

static int fixed_combine(void *ctx, const sq_qbuf *chunks, int k, uint64_t n,
                         const sq_rng_key *key, const float *u, sq_qbuf *out)
{
    (void)ctx, (void)key, (void)u;
    fixed_combines++;
    for (uint64_t i = 0; i < n; i++) {
        int32_t sum = 0, q;
        for (int c = 0; c < k; c++) {
            memcpy(&q, chunks[c].codes + 4 * i, 4);
            sum += q;
        }
        memcpy(out->codes + 4 * i, &sum, 4);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* nanout: decodes element 3 of every buffer to NaN                         */
/* ------------------------------------------------------------------------ */

static int nan_decode(void *ctx, const uint8_t *codes, const void *scales, const void *offsets,
                      uint64_t n, float *out)
{
    int rc = sym8_decode(ctx, codes, scales, offsets, n, out);
    if (n > 3) out[3] = NAN;
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Registration, once for the whole suite                                   */
/* ------------------------------------------------------------------------ */

static int id_sym8, id_dither, id_fixed, id_nan;

/* configure of "cfg": params "group=N" */
static int cfg_configure(sq_plugin_codec *self, const char *params, sq_error *e)
{
    if (!params || strncmp(params, "group=", 6))
        return sq_error_set(e, SQ_ERR_SPEC, "expected group=N");
    self->group = strtoull(params + 6, NULL, 10);
    return 0;
}

/* The same in the deprecated version 1 of the interface, which this
** release still registers: the sentence into a buffer. */
static int cfg_configure_v1(sq_plugin_codec *self, const char *params, char *e, size_t len)
{
    if (!params || strncmp(params, "group=", 6)) {
        snprintf(e, len, "expected group=N (v1)");
        return SQ_ERR_SPEC;
    }
    self->group = strtoull(params + 6, NULL, 10);
    return 0;
}

static void register_all(void)
{
    if (id_sym8) return;
    sq_plugin_codec d = sym8_desc("sym8ref");
    id_sym8 = sq_plugin_register(&d, &err);
    ck_assert_msg(id_sym8 >= 1, "%s", err.msg);
    d = (sq_plugin_codec){.abi = SQ_PLUGIN_ABI, .name = "dither1", .group = GROUP,
                          .stochastic = 1, .sizes = dither_sizes, .encode = dither_encode,
                          .decode = dither_decode};
    id_dither = sq_plugin_register(&d, &err);
    ck_assert_msg(id_dither >= 1, "%s", err.msg);
    d = (sq_plugin_codec){.abi = SQ_PLUGIN_ABI, .name = "fixed", .group = 1, .sum_composes = 1,
                          .sizes = fixed_sizes, .encode = fixed_encode, .decode = fixed_decode,
                          .combine = fixed_combine};
    id_fixed = sq_plugin_register(&d, &err);
    ck_assert_msg(id_fixed >= 1, "%s", err.msg);
    d = sym8_desc("nanout");
    d.decode = nan_decode;
    id_nan = sq_plugin_register(&d, &err);
    ck_assert_msg(id_nan >= 1, "%s", err.msg);
}

static sq_codec codec_of(int id)
{
    sq_codec c;
    ck_assert_int_eq(sq_codec_from_plugin(id, &c), SQ_OK);
    return c;
}

/* Field by field (memcmp would compare the padding too). */
static int same_codec(const sq_codec *a, const sq_codec *b)
{
    return a->kind == b->kind && a->bits == b->bits && a->group == b->group &&
           a->round == b->round && a->hadamard == b->hadamard && a->levels == b->levels &&
           a->scale == b->scale && a->plugin == b->plugin;
}

static float *fill(uint64_t n, uint64_t seed)
{
    float *x = malloc(n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    sqt_fill(x, n, seed);
    return x;
}

/* ------------------------------------------------------------------------ */
/* The registry                                                             */
/* ------------------------------------------------------------------------ */

START_TEST(test_registry)
{
    register_all();
    ck_assert_int_eq(sq_plugin_find("sym8ref"), id_sym8);
    ck_assert_int_eq(sq_plugin_find("nothing"), SQ_ERR_NOTFOUND);
    ck_assert_int_ge(sq_plugin_count(), 4);
    ck_assert_str_eq(sq_plugin_get(id_dither)->name, "dither1");
    ck_assert_ptr_null(sq_plugin_get(0));
    ck_assert_ptr_null(sq_plugin_get(sq_plugin_count() + 1));
    ck_assert_ptr_null(sq_plugin_source(id_sym8));

    /* a duplicate name */
    sq_plugin_codec d = sym8_desc("sym8ref");
    ck_assert_int_eq(sq_plugin_register(&d, &err), SQ_ERR_CONFLICT);
    ck_assert_ptr_nonnull(strstr(err.msg, "sym8ref"));
    ck_assert_ptr_nonnull(strstr(err.msg, "already registered"));
    /* another interface version: both named */
    d = sym8_desc("other_abi");
    d.abi = SQ_PLUGIN_ABI + 7;
    ck_assert_int_eq(sq_plugin_register(&d, &err), SQ_ERR_SPEC);
    char want[64];
    snprintf(want, sizeof want, "version %d, this libshardq speaks version %d", SQ_PLUGIN_ABI + 7,
             SQ_PLUGIN_ABI);
    ck_assert_msg(strstr(err.msg, want) && strstr(err.msg, "other_abi"), "%s", err.msg);
    /* bad names, missing callbacks */
    const char *bad[] = {"", "Caps", "1st", "has-dash", "a,b", "waytoolongwaytoolongwaytoolong_x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        d = sym8_desc(bad[i]);
        ck_assert_int_eq(sq_plugin_register(&d, &err), SQ_ERR_SPEC);
    }
    d = sym8_desc("nodecode");
    d.decode = NULL;
    ck_assert_int_eq(sq_plugin_register(&d, &err), SQ_ERR_SPEC);
    ck_assert_ptr_nonnull(strstr(err.msg, "decode"));
    /* a group out of range, sum_composes without combine */
    d = sym8_desc("group0");
    d.group = 0;
    ck_assert_int_eq(sq_plugin_register(&d, &err), SQ_ERR_SPEC);
    d = sym8_desc("nocombine");
    d.sum_composes = 1;
    ck_assert_int_eq(sq_plugin_register(&d, &err), SQ_ERR_SPEC);
    ck_assert_ptr_nonnull(strstr(err.msg, "combine"));
    /* configure: parameters parsed at registration set the group */
    d = (sq_plugin_codec){.abi = SQ_PLUGIN_ABI, .name = "cfg", .group = 1, .params = "group=64",
                          .configure = cfg_configure, .sizes = sym8_sizes,
                          .encode = sym8_encode, .decode = sym8_decode};
    int id = sq_plugin_register(&d, &err);
    ck_assert_msg(id >= 1, "%s", err.msg);
    ck_assert_uint_eq(sq_plugin_get(id)->group, 64);
    ck_assert_str_eq(sq_plugin_get(id)->params, "group=64");
    d.name = "cfgbad";
    d.params = "size=3";
    ck_assert_int_eq(sq_plugin_register(&d, &err), SQ_ERR_SPEC);
    ck_assert_msg(strstr(err.msg, "cfgbad") && strstr(err.msg, "size=3") &&
                      strstr(err.msg, "expected group=N"), "%s", err.msg);
    ck_assert_int_eq(sq_plugin_find("cfgbad"), SQ_ERR_NOTFOUND);
    /* a descriptor of version 1 still registers, its configure called the
    ** old way */
    d = (sq_plugin_codec){.abi = SQ_PLUGIN_ABI_V1, .name = "cfgv1", .group = 1,
                          .params = "group=32", .configure_v1 = cfg_configure_v1,
                          .sizes = sym8_sizes, .encode = sym8_encode, .decode = sym8_decode};
    id = sq_plugin_register(&d, &err);
    ck_assert_msg(id >= 1, "%s", err.msg);
    ck_assert_uint_eq(sq_plugin_get(id)->group, 32);
    d.name = "cfgv1bad";
    d.params = "size=3";
    ck_assert_int_eq(sq_plugin_register(&d, &err), SQ_ERR_SPEC);
    ck_assert_msg(strstr(err.msg, "cfgv1bad") && strstr(err.msg, "expected group=N (v1)"), "%s",
                  err.msg);
}
END_TEST

/* Sizes with a per-buffer header: not additive, refused at registration. */
static void header_sizes(void *ctx, uint64_t n, uint64_t b[3])
{
    (void)ctx;
    b[0] = n ? n + 4 : 0;
    b[1] = b[2] = 0;
}

START_TEST(test_not_additive)
{
    sq_plugin_codec d = sym8_desc("withheader");
    d.sizes = header_sizes;
    ck_assert_int_eq(sq_plugin_register(&d, &err), SQ_ERR_SPEC);
    ck_assert_msg(strstr(err.msg, "not additive") && strstr(err.msg, "withheader"), "%s",
                  err.msg);
    ck_assert_int_eq(sq_plugin_find("withheader"), SQ_ERR_NOTFOUND);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Specs                                                                    */
/* ------------------------------------------------------------------------ */

START_TEST(test_spec)
{
    register_all();
    sq_codec c;
    char e[512], buf[SQ_CODEC_STRLEN];
    ck_assert_int_eq(sq_codec_parse("kind=plugin:sym8ref", &c, e, sizeof e), SQ_OK);
    ck_assert_int_eq(c.kind, SQ_KIND_PLUGIN);
    ck_assert_int_eq(c.plugin, id_sym8);
    ck_assert_uint_eq(c.group, GROUP);
    ck_assert_int_eq(sq_codec_validate(&c), SQ_OK);
    sq_codec_format(&c, buf, sizeof buf);
    ck_assert_str_eq(buf, "kind=plugin:sym8ref,group=16");
    sq_codec back;
    ck_assert_int_eq(sq_codec_parse(buf, &back, e, sizeof e), SQ_OK);
    ck_assert(same_codec(&back, &c));
    ck_assert_int_eq(sq_codec_parse("group=16,kind=plugin:sym8ref", &back, e, sizeof e), SQ_OK);
    ck_assert(same_codec(&back, &c));
    sq_codec from = codec_of(id_sym8);
    ck_assert(same_codec(&from, &c));

    /* the group is the plug-in's; no other key applies */
    ck_assert_int_eq(sq_codec_parse("kind=plugin:sym8ref,group=32", &c, e, sizeof e), SQ_ERR_SPEC);
    ck_assert_msg(strstr(e, "group=32") && strstr(e, "sym8ref has group 16"), "%s", e);
    ck_assert_int_eq(sq_codec_parse("bits=3,kind=plugin:sym8ref", &c, e, sizeof e), SQ_ERR_SPEC);
    ck_assert_msg(strstr(e, "takes no bits"), "%s", e);
    ck_assert_int_eq(sq_codec_parse("kind=plugin:sym8ref,hadamard=16", &c, e, sizeof e),
                     SQ_ERR_SPEC);
    /* an unknown name: named, with how to load one */
    ck_assert_int_eq(sq_codec_parse("kind=plugin:nosuch", &c, e, sizeof e), SQ_ERR_SPEC);
    ck_assert_msg(strstr(e, "kind=plugin:nosuch") && strstr(e, "SHARDQ_PLUGINS") &&
                      strstr(e, "sym8ref"), "%s", e);
    ck_assert_int_eq(sq_codec_parse("kind=plugin:", &c, e, sizeof e), SQ_ERR_SPEC);
    /* a stale id */
    c = codec_of(id_sym8);
    c.plugin = 999;
    ck_assert_int_eq(sq_codec_validate(&c), SQ_ERR_SPEC);
    c.plugin = 0;
    ck_assert_int_eq(sq_codec_validate(&c), SQ_ERR_SPEC);
    /* built-in text is unchanged */
    c = sq_codec_default();
    ck_assert_int_eq(c.plugin, 0);
    sq_codec_format(&c, buf, sizeof buf);
    ck_assert_str_eq(buf, "kind=sym,bits=4,group=128,round=sr,hadamard=0,levels=sdp4bit,scale=fp32");
}
END_TEST

START_TEST(test_sizes)
{
    register_all();
    sq_codec c = codec_of(id_dither);
    const uint64_t ns[] = {0, 1, 7, 8, 15, 16, 17, 100, 1000003};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        uint64_t n = ns[i], b[3];
        dither_sizes(NULL, n, b);
        ck_assert_uint_eq(sq_codec_code_bytes(&c, n), b[0]);
        ck_assert_uint_eq(sq_codec_scale_bytes(&c, n), b[1]);
        ck_assert_uint_eq(sq_codec_offset_bytes(&c, n), b[2]);
        ck_assert_uint_eq(sq_codec_bytes(&c, n), b[0] + b[1] + b[2]);
        ck_assert_uint_eq(sq_codec_groups(&c, n), n / GROUP + (n % GROUP != 0));
        sq_qbuf q;
        ck_assert_int_eq(sq_qbuf_alloc(&c, n, &q), SQ_OK);
        ck_assert(q.codes && q.scales && q.offsets);
        sq_qbuf_free(&q);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The operations                                                           */
/* ------------------------------------------------------------------------ */

/* sym8ref through the library equals the built-in codec it writes out. */
START_TEST(test_equals_builtin)
{
    register_all();
    const uint64_t n = 4099;
    sq_codec p = codec_of(id_sym8), b;
    char e[256];
    ck_assert_int_eq(sq_codec_parse("kind=sym,bits=8,group=16,round=rtn", &b, e, sizeof e), SQ_OK);
    float *x = fill(n, 3), *ref = fill(n, 4), *y1 = malloc(n * 4), *y2 = malloc(n * 4);
    for (uint64_t i = 200; i < 232; i++) x[i] = 0; /* two zero groups */
    sq_qbuf qp, qb;
    ck_assert_int_eq(sq_qbuf_alloc(&p, n, &qp), SQ_OK);
    ck_assert_int_eq(sq_qbuf_alloc(&b, n, &qb), SQ_OK);
    for (int op = 0; op < 4; op++) {
        int rc1, rc2;
        if (op == 0) {
            rc1 = sq_quantize(&p, x, n, NULL, &qp), rc2 = sq_quantize(&b, x, n, NULL, &qb);
        } else if (op == 1) {
            rc1 = sq_quantize_diff(&p, x, ref, n, NULL, &qp);
            rc2 = sq_quantize_diff(&b, x, ref, n, NULL, &qb);
        } else if (op == 2) {
            rc1 = sq_quantize_bf16(&p, x, n, NULL, &qp), rc2 = sq_quantize_bf16(&b, x, n, NULL, &qb);
        } else {
            rc1 = sq_quantize_diff_bf16(&p, x, ref, n, NULL, &qp);
            rc2 = sq_quantize_diff_bf16(&b, x, ref, n, NULL, &qb);
        }
        ck_assert_int_eq(rc1, SQ_OK);
        ck_assert_int_eq(rc2, SQ_OK);
        ck_assert_int_eq(memcmp(qp.codes, qb.codes, n), 0);
        ck_assert_int_eq(memcmp(qp.scales, qb.scales, sq_codec_scale_bytes(&b, n)), 0);
        ck_assert_int_eq(sq_dequantize(&p, &qp, n, y1), SQ_OK);
        ck_assert_int_eq(sq_dequantize(&b, &qb, n, y2), SQ_OK);
        ck_assert_int_eq(memcmp(y1, y2, n * 4), 0);
        ck_assert_int_eq(sq_dequantize_bf16(&p, &qp, n, y1), SQ_OK);
        ck_assert_int_eq(sq_dequantize_bf16(&b, &qb, n, y2), SQ_OK);
        ck_assert_int_eq(memcmp(y1, y2, n * 4), 0);
        ck_assert_int_eq(sq_dequantize_add(&p, &qp, ref, n, y1), SQ_OK);
        ck_assert_int_eq(sq_dequantize_add(&b, &qb, ref, n, y2), SQ_OK);
        ck_assert_int_eq(memcmp(y1, y2, n * 4), 0);
        ck_assert_int_eq(sq_dequantize_add_bf16(&p, &qp, ref, n, y1), SQ_OK);
        ck_assert_int_eq(sq_dequantize_add_bf16(&b, &qb, ref, n, y2), SQ_OK);
        ck_assert_int_eq(memcmp(y1, y2, n * 4), 0);
    }
    /* out may be ref */
    ck_assert_int_eq(sq_dequantize_add(&p, &qp, ref, n, y2), SQ_OK);
    memcpy(y1, ref, n * 4);
    ck_assert_int_eq(sq_dequantize_add(&p, &qp, y1, n, y1), SQ_OK);
    ck_assert_int_eq(memcmp(y1, y2, n * 4), 0);
    sq_qbuf_free(&qp), sq_qbuf_free(&qb);
    free(x), free(ref), free(y1), free(y2);
}
END_TEST

/* The sums: decode each chunk, add in fp32 in chunk order, (encode). */
START_TEST(test_sums)
{
    register_all();
    const uint64_t n = 1000;
    const int k = 3;
    sq_codec p = codec_of(id_sym8), b;
    char e[256];
    ck_assert_int_eq(sq_codec_parse("kind=sym,bits=8,group=16,round=rtn", &b, e, sizeof e), SQ_OK);
    sq_qbuf cp[3], cb[3], op, ob;
    float *x[3], *want = malloc(n * 4), *got = malloc(n * 4), *tmp = malloc(n * 4);
    for (int i = 0; i < k; i++) {
        x[i] = fill(n, 10 + (uint64_t)i);
        ck_assert_int_eq(sq_qbuf_alloc(&p, n, &cp[i]), SQ_OK);
        ck_assert_int_eq(sq_qbuf_alloc(&b, n, &cb[i]), SQ_OK);
        ck_assert_int_eq(sq_quantize(&p, x[i], n, NULL, &cp[i]), SQ_OK);
        ck_assert_int_eq(sq_quantize(&b, x[i], n, NULL, &cb[i]), SQ_OK);
    }
    /* the reference: decoded by hand, summed in chunk order */
    for (int i = 0; i < k; i++) {
        sym8_decode(NULL, cp[i].codes, cp[i].scales, NULL, n, tmp);
        for (uint64_t j = 0; j < n; j++) want[j] = i ? want[j] + tmp[j] : tmp[j];
    }
    ck_assert_int_eq(sq_dequant_sum(&p, cp, k, n, got), SQ_OK);
    ck_assert_int_eq(memcmp(got, want, n * 4), 0);
    /* plug-in to plug-in: encode(sum); plug-in to built-in; built-in to plug-in */
    ck_assert_int_eq(sq_qbuf_alloc(&p, n, &op), SQ_OK);
    ck_assert_int_eq(sq_qbuf_alloc(&b, n, &ob), SQ_OK);
    ck_assert_int_eq(sq_dequant_sum_requant(&p, cp, k, n, &p, NULL, &op), SQ_OK);
    sq_qbuf ref;
    ck_assert_int_eq(sq_qbuf_alloc(&p, n, &ref), SQ_OK);
    sym8_encode(NULL, want, n, NULL, NULL, ref.codes, ref.scales, NULL);
    ck_assert_int_eq(memcmp(op.codes, ref.codes, n), 0);
    ck_assert_int_eq(memcmp(op.scales, ref.scales, sq_codec_scale_bytes(&p, n)), 0);
    ck_assert_int_eq(sq_dequant_sum_requant(&p, cp, k, n, &b, NULL, &ob), SQ_OK);
    ck_assert_int_eq(memcmp(ob.codes, ref.codes, n), 0);
    ck_assert_int_eq(sq_dequant_sum_requant(&b, cb, k, n, &p, NULL, &op), SQ_OK);
    ck_assert_int_eq(memcmp(op.codes, ref.codes, n), 0);
    /* the fp16 sums are the built-in kinds' */
    ck_assert_int_eq(sq_dequant_sum_f16(&p, cp, k, n, got), SQ_ERR_SPEC);
    ck_assert_int_eq(sq_dequant_sum_requant_f16(&p, cp, k, n, &p, NULL, &op), SQ_ERR_SPEC);
    for (int i = 0; i < k; i++) sq_qbuf_free(&cp[i]), sq_qbuf_free(&cb[i]), free(x[i]);
    sq_qbuf_free(&op), sq_qbuf_free(&ob), sq_qbuf_free(&ref);
    free(want), free(got), free(tmp);
}
END_TEST

/* sum_composes: combine sums the packed chunks, between equal codecs only. */
START_TEST(test_composes)
{
    register_all();
    const uint64_t n = 77;
    const int k = 4;
    sq_codec f = codec_of(id_fixed), s = codec_of(id_sym8);
    sq_qbuf c[4], out, out2;
    float *x[4];
    for (int i = 0; i < k; i++) {
        x[i] = fill(n, 20 + (uint64_t)i);
        ck_assert_int_eq(sq_qbuf_alloc(&f, n, &c[i]), SQ_OK);
        ck_assert_int_eq(sq_quantize(&f, x[i], n, NULL, &c[i]), SQ_OK);
    }
    ck_assert_int_eq(sq_qbuf_alloc(&f, n, &out), SQ_OK);
    int before = fixed_combines;
    ck_assert_int_eq(sq_dequant_sum_requant(&f, c, k, n, &f, NULL, &out), SQ_OK);
    ck_assert_int_eq(fixed_combines, before + 1);
    for (uint64_t j = 0; j < n; j++) {
        int32_t want = 0, q, got;
        for (int i = 0; i < k; i++) {
            memcpy(&q, c[i].codes + 4 * j, 4);
            want += q;
        }
        memcpy(&got, out.codes + 4 * j, 4);
        ck_assert_int_eq(got, want);
    }
    /* into another codec: the generic rule, combine not called */
    ck_assert_int_eq(sq_qbuf_alloc(&s, n, &out2), SQ_OK);
    ck_assert_int_eq(sq_dequant_sum_requant(&f, c, k, n, &s, NULL, &out2), SQ_OK);
    ck_assert_int_eq(fixed_combines, before + 1);
    for (int i = 0; i < k; i++) sq_qbuf_free(&c[i]), free(x[i]);
    sq_qbuf_free(&out), sq_qbuf_free(&out2);
}
END_TEST

/* A stochastic plug-in gets u[i] = sq_uniform(key, i) and needs a key. */
START_TEST(test_stochastic)
{
    register_all();
    const uint64_t n = 333;
    sq_codec c = codec_of(id_dither);
    ck_assert_int_eq(c.round, SQ_ROUND_SR);
    float *x = fill(n, 5), *y = malloc(n * 4);
    sq_qbuf q;
    ck_assert_int_eq(sq_qbuf_alloc(&c, n, &q), SQ_OK);
    ck_assert_int_eq(sq_quantize(&c, x, n, NULL, &q), SQ_ERR_ARG);
    sq_rng_key key = {42, 7, 3, SQ_SITE_GRAD_INTER};
    ck_assert_int_eq(sq_quantize(&c, x, n, &key, &q), SQ_OK);
    /* the reference bits, drawn here */
    for (uint64_t g = 0; g * GROUP < n; g++) {
        uint64_t lo = g * GROUP, hi = lo + GROUP < n ? lo + GROUP : n;
        float mn = x[lo], mx = x[lo];
        for (uint64_t i = lo; i < hi; i++) mn = fminf(mn, x[i]), mx = fmaxf(mx, x[i]);
        for (uint64_t i = lo; i < hi; i++) {
            int want = mx > mn && sq_uniform(&key, i) < (x[i] - mn) / (mx - mn);
            ck_assert_int_eq((q.codes[i / 8] >> (7 - i % 8)) & 1, want);
        }
    }
    ck_assert_int_eq(sq_dequantize(&c, &q, n, y), SQ_OK);
    /* quantizing again into a used buffer gives the same bytes (cleared first) */
    uint8_t *first = malloc(sq_codec_code_bytes(&c, n));
    memcpy(first, q.codes, sq_codec_code_bytes(&c, n));
    memset(q.codes, 0xff, sq_codec_code_bytes(&c, n));
    ck_assert_int_eq(sq_quantize(&c, x, n, &key, &q), SQ_OK);
    ck_assert_int_eq(memcmp(first, q.codes, sq_codec_code_bytes(&c, n)), 0);
    /* a deterministic plug-in takes no key */
    sq_codec s = codec_of(id_sym8);
    ck_assert_int_eq(s.round, SQ_ROUND_RTN);
    sq_qbuf qs;
    ck_assert_int_eq(sq_qbuf_alloc(&s, n, &qs), SQ_OK);
    ck_assert_int_eq(sq_quantize(&s, x, n, NULL, &qs), SQ_OK);
    sq_qbuf_free(&qs), sq_qbuf_free(&q);
    free(x), free(y), free(first);
}
END_TEST

/* NaN and Inf never reach encode; a decode past fp32 is SQ_ERR_RANGE. */
START_TEST(test_nonfinite)
{
    register_all();
    const uint64_t n = 64;
    sq_codec c = codec_of(id_sym8);
    float *x = fill(n, 6), *ref = fill(n, 7), *y = malloc(n * 4);
    sq_qbuf q;
    ck_assert_int_eq(sq_qbuf_alloc(&c, n, &q), SQ_OK);
    int calls = sym8_encodes;
    x[17] = NAN;
    ck_assert_int_eq(sq_quantize(&c, x, n, NULL, &q), SQ_ERR_NONFINITE);
    ck_assert_int_eq(sq_quantize_diff(&c, x, ref, n, NULL, &q), SQ_ERR_NONFINITE);
    x[17] = -INFINITY;
    ck_assert_int_eq(sq_quantize_bf16(&c, x, n, NULL, &q), SQ_ERR_NONFINITE);
    x[17] = 1.0f;
    ref[9] = INFINITY;
    ck_assert_int_eq(sq_quantize_diff(&c, x, ref, n, NULL, &q), SQ_ERR_NONFINITE);
    /* finite input whose difference leaves fp32 */
    x[9] = 3e38f, ref[9] = -3e38f;
    ck_assert_int_eq(sq_quantize_diff(&c, x, ref, n, NULL, &q), SQ_ERR_RANGE);
    /* finite input whose bf16 rounding is an infinity */
    x[9] = 3.4028235e38f;
    ck_assert_int_eq(sq_quantize_bf16(&c, x, n, NULL, &q), SQ_ERR_RANGE);
    ck_assert_int_eq(sym8_encodes, calls);
    /* a plug-in whose decode gives a NaN */
    sq_codec bad = codec_of(id_nan);
    x[9] = 1.0f;
    ck_assert_int_eq(sq_quantize(&bad, x, n, NULL, &q), SQ_OK);
    for (uint64_t i = 0; i < n; i++) y[i] = -1;
    ck_assert_int_eq(sq_dequantize(&bad, &q, n, y), SQ_ERR_RANGE);
    ck_assert(y[63] != -1.0f); /* every value written */
    ck_assert_int_eq(sq_dequantize_add(&bad, &q, ref, n, y), SQ_ERR_RANGE);
    ck_assert_int_eq(sq_dequant_sum(&bad, &q, 1, n, y), SQ_ERR_RANGE);
    sq_qbuf out;
    ck_assert_int_eq(sq_qbuf_alloc(&c, n, &out), SQ_OK);
    ck_assert_int_eq(sq_dequant_sum_requant(&bad, &q, 1, n, &c, NULL, &out), SQ_ERR_RANGE);
    /* zero elements: nothing to do, nothing called */
    calls = sym8_encodes;
    ck_assert_int_eq(sq_quantize(&c, x, 0, NULL, &q), SQ_OK);
    ck_assert_int_eq(sym8_encodes, calls);
    /* a buffer without the arrays the codec uses */
    sq_codec d = codec_of(id_dither);
    sq_qbuf none = {q.codes, q.scales, NULL};
    sq_rng_key key = {1, 0, 0, 0};
    ck_assert_int_eq(sq_quantize(&d, x, n, &key, &none), SQ_ERR_ARG);
    sq_qbuf_free(&q), sq_qbuf_free(&out);
    free(x), free(ref), free(y);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* In a world                                                               */
/* ------------------------------------------------------------------------ */

/* Opens a 2x2 world (sdp4bit, no Hadamard) with knobs on its wires. */
static sq_world *world_with(const char *const *sets, uint64_t n)
{
    sq_world_config cfg = sqt_world_config(2, 2, "sdp4bit", "grad.hadamard=0", n, 9);
    for (int i = 0; sets[i]; i++)
        ck_assert_msg(sq_scheme_set(&cfg.scheme, sets[i], &err) == SQ_OK, "%s: %s", sets[i],
                      err.msg);
    ck_assert_msg(sq_scheme_validate(&cfg.scheme, &err) == SQ_OK, "%s", err.msg);
    sq_world *w = NULL;
    ck_assert_msg(sq_world_open(&cfg, &w, &err) == SQ_OK, "%s", err.msg);
    return w;
}

/* Runs two steps of both collectives; returns every worker's weights and
** gradient shards, concatenated. */
static float *run_world(sq_world *w, uint64_t n)
{
    int N = sq_world_workers(w);
    uint64_t S = sq_world_shard(w);
    float *w0 = fill(n, 31), *g = fill(n, 32), *out = malloc((size_t)N * (n + S) * 4 * 2);
    float *master = calloc(S, sizeof *master);
    ck_assert_int_eq(sq_world_init_weights(w, w0), SQ_OK);
    size_t at = 0;
    for (uint32_t step = 1; step <= 2; step++) {
        for (int r = 0; r < N; r++) {
            /* move the master a little, so the weight path has differences */
            ck_assert_int_eq(sq_world_get_master(w, r, master), SQ_OK);
            for (uint64_t i = 0; i < sq_world_shard_len(w, r); i++) master[i] += 0.01f * (float)(i % 7);
            ck_assert_int_eq(sq_world_put_master(w, r, master), SQ_OK);
            for (uint64_t i = 0; i < n; i++) g[i] = g[i] * 0.5f + (float)(r + 1) * 0.001f;
            ck_assert_msg(sq_world_put_grad(w, r, g) == SQ_OK, "%s", sq_world_error(w));
        }
        ck_assert_msg(sq_world_gather_weights(w, step) == SQ_OK, "%s", sq_world_error(w));
        ck_assert_msg(sq_world_reduce_grads(w, step) == SQ_OK, "%s", sq_world_error(w));
        for (int r = 0; r < N; r++) {
            ck_assert_int_eq(sq_world_get_weights(w, r, out + at), SQ_OK);
            at += n;
            ck_assert_int_eq(sq_world_get_grad_shard(w, r, out + at), SQ_OK);
            at += S;
        }
    }
    free(w0), free(g), free(master);
    return out;
}

START_TEST(test_world)
{
    register_all();
    const uint64_t n = 3001;
    const char *const builtin[] = {"weight.kind=sym", "weight.bits=8", "weight.group=16",
                                   "weight.round=rtn", "grad.kind=sym", "grad.bits=8",
                                   "grad.group=16", "grad.round=rtn", NULL};
    const char *const plugin[] = {"weight.kind=plugin:sym8ref", "grad.kind=plugin:sym8ref",
                                  NULL};
    sq_world *wb = world_with(builtin, n), *wp = world_with(plugin, n);
    ck_assert_uint_eq(sq_world_padded(wb), sq_world_padded(wp));
    char text[SQ_SCHEME_STRLEN];
    sq_scheme_format(sq_world_scheme(wp), text, sizeof text);
    ck_assert_msg(strstr(text, "grad.inter.kind=plugin:sym8ref,grad.inter.group=16"), "%s", text);
    float *yb = run_world(wb, n), *yp = run_world(wp, n);
    size_t len = (size_t)sq_world_workers(wb) * (n + sq_world_shard(wb)) * 2;
    for (size_t i = 0; i < len; i++)
        SQT_CHECK(sqt_bits(yb[i]) == sqt_bits(yp[i]), "value %zu: plug-in %a, built-in %a", i,
                  yp[i], yb[i]);
    /* the traffic is the codec's sizes: byte for byte the built-in's */
    sq_traffic tb, tp;
    memset(&tb, 0, sizeof tb), memset(&tp, 0, sizeof tp);
    sq_world_add_traffic(wb, &tb);
    sq_world_add_traffic(wp, &tp);
    for (int c = 0; c < SQ_NCOLL; c++)
        for (int l = 0; l < SQ_NLINK; l++) {
            const sq_link_traffic *a = &tb.t[c][l], *b = &tp.t[c][l];
            ck_assert_uint_eq(a->sent_codes, b->sent_codes);
            ck_assert_uint_eq(a->sent_meta, b->sent_meta);
            ck_assert_uint_eq(a->sent_elems, b->sent_elems);
            /* and in closed form: a byte a code, 4 bytes a group of 16 */
            ck_assert_uint_eq(b->sent_codes, b->sent_elems);
            ck_assert_uint_eq(b->sent_meta, b->sent_elems / GROUP * 4);
        }
    ck_assert_uint_gt(tp.t[1][1].sent_codes, 0);
    free(yb), free(yp);
    sq_world_close(wb), sq_world_close(wp);

    /* scheme knobs: a plug-in's group is its own */
    sq_scheme s;
    ck_assert_int_eq(sq_scheme_preset("sdp4bit", &s, &err), SQ_OK);
    ck_assert_int_eq(sq_scheme_set(&s, "grad.inter.kind=plugin:nosuch", &err), SQ_ERR_SPEC);
    ck_assert_msg(strstr(err.msg, "grad.inter.kind=plugin:nosuch"), "%s", err.msg);
    ck_assert_int_eq(sq_scheme_set(&s, "grad.inter.kind=plugin:sym8ref", &err), SQ_OK);
    ck_assert_int_eq(sq_scheme_validate(&s, &err), SQ_ERR_SPEC); /* sdp4bit's Hadamard */
    ck_assert_msg(strstr(err.msg, "takes no Hadamard"), "%s", err.msg);
    ck_assert_int_eq(sq_scheme_set(&s, "grad.hadamard=0", &err), SQ_OK);
    ck_assert_int_eq(sq_scheme_validate(&s, &err), SQ_OK);
    ck_assert_int_eq(sq_scheme_set(&s, "grad.inter.group=32", &err), SQ_OK);
    ck_assert_int_eq(sq_scheme_validate(&s, &err), SQ_ERR_SPEC);
    ck_assert_int_eq(sq_scheme_set(&s, "grad.inter.group=qgz", &err), SQ_OK);
    ck_assert_int_eq(sq_scheme_validate(&s, &err), SQ_ERR_SPEC);
    ck_assert_msg(strstr(err.msg, "its own group"), "%s", err.msg);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Shared objects                                                           */
/* ------------------------------------------------------------------------ */

static const char *module_path(void)
{
    const char *p = getenv("SHARDQ_TERNGRAD");
    ck_assert_msg(p && *p, "SHARDQ_TERNGRAD (the example module's path) is not set");
    return p;
}

START_TEST(test_load_terngrad)
{
    const char *path = module_path();
    int before = sq_plugin_count();
    int rc = sq_plugin_load(path, &err);
    ck_assert_msg(rc == 1, "%d: %s", rc, err.msg);
    ck_assert_int_eq(sq_plugin_count(), before + 1);
    /* again: the same file, nothing new */
    ck_assert_int_eq(sq_plugin_load(path, &err), 0);
    ck_assert_int_eq(sq_plugin_load_list(path, &err), 0);
    int id = sq_plugin_find("terngrad");
    ck_assert_int_ge(id, 1);
    ck_assert_ptr_nonnull(sq_plugin_source(id));
    ck_assert_ptr_nonnull(strstr(sq_plugin_source(id), "terngrad"));
    ck_assert_uint_eq(sq_plugin_get(id)->group, 128);

    /* its bytes against a straight-line TernGrad (docs/plugins.md, the module's header) */
    sq_codec c;
    char e[256];
    ck_assert_int_eq(sq_codec_parse("kind=plugin:terngrad", &c, e, sizeof e), SQ_OK);
    const uint64_t n = 1000;
    float *x = fill(n, 8), *y = malloc(n * 4);
    sq_qbuf q;
    sq_rng_key key = {5, 1, 2, SQ_SITE_GRAD_INTER};
    ck_assert_int_eq(sq_qbuf_alloc(&c, n, &q), SQ_OK);
    ck_assert_uint_eq(sq_codec_code_bytes(&c, n), 250);
    ck_assert_uint_eq(sq_codec_scale_bytes(&c, n), 4 * 8);
    ck_assert_uint_eq(sq_codec_offset_bytes(&c, n), 0);
    ck_assert_int_eq(sq_quantize(&c, x, n, NULL, &q), SQ_ERR_ARG); /* stochastic: a key */
    ck_assert_int_eq(sq_quantize(&c, x, n, &key, &q), SQ_OK);
    ck_assert_int_eq(sq_dequantize(&c, &q, n, y), SQ_OK);
    for (uint64_t g = 0; g * 128 < n; g++) {
        uint64_t lo = g * 128, hi = lo + 128 < n ? lo + 128 : n;
        float s = 0;
        for (uint64_t i = lo; i < hi; i++) s = fabsf(x[i]) > s ? fabsf(x[i]) : s;
        ck_assert(((float *)q.scales)[g] == s);
        for (uint64_t i = lo; i < hi; i++) {
            int t = sq_uniform(&key, i) < fabsf(x[i]) / s ? (x[i] < 0 ? -1 : 1) : 0;
            unsigned field = (q.codes[i / 4] >> (6 - 2 * (i % 4))) & 3u;
            ck_assert_uint_eq(field, t == 1 ? 1u : t == -1 ? 3u : 0u);
            ck_assert(y[i] == s * (float)t);
        }
    }
    /* unbiased: the mean decoded value over many keys approaches x */
    double *mean = calloc(n, sizeof *mean);
    const int reps = 400;
    for (int r = 0; r < reps; r++) {
        key.seed = 100 + (uint64_t)r;
        ck_assert_int_eq(sq_quantize(&c, x, n, &key, &q), SQ_OK);
        ck_assert_int_eq(sq_dequantize(&c, &q, n, y), SQ_OK);
        for (uint64_t i = 0; i < n; i++) mean[i] += y[i] / (double)reps;
    }
    double num = 0, den = 0;
    for (uint64_t i = 0; i < n; i++) num += (mean[i] - x[i]) * (mean[i] - x[i]), den += x[i] * x[i];
    /* the variance of one draw is |x| (s - |x|) <= s^2 / 4 per element; over
    ** 400 draws the relative error of the mean is well under 0.2 */
    ck_assert_msg(sqrt(num / den) < 0.2, "relative error of the mean %g", sqrt(num / den));
    free(mean), free(x), free(y);
    sq_qbuf_free(&q);
}
END_TEST

START_TEST(test_load_errors)
{
    ck_assert_int_eq(sq_plugin_load("no/such/file.so", &err), SQ_ERR_NOTFOUND);
    ck_assert_ptr_nonnull(strstr(err.msg, "no/such/file.so"));
    ck_assert_int_eq(sq_plugin_load("", &err), SQ_ERR_ARG);
    ck_assert_int_eq(sq_plugin_load_list("::no/such:", &err), SQ_ERR_NOTFOUND);
    /* not a shared object: libtool's text file beside the module */
    char la[4096];
    const char *path = module_path();
    snprintf(la, sizeof la, "%.*s/../terngrad.la", (int)(strrchr(path, '/') - path), path);
    ck_assert_int_eq(sq_plugin_load(la, &err), SQ_ERR_IO);
    ck_assert_msg(strstr(err.msg, "terngrad.la") && strstr(err.msg, "cannot load"), "%s", err.msg);
    /* test modules: another interface version, no entry point */
    const char *dir = getenv("SHARDQ_TEST_PLUGINS");
    ck_assert_msg(dir && *dir, "SHARDQ_TEST_PLUGINS (the test modules' directory) is not set");
    char p[4096];
    snprintf(p, sizeof p, "%s/plugin_badabi.so", dir);
    ck_assert_int_eq(sq_plugin_load(p, &err), SQ_ERR_SPEC);
    char want[96];
    snprintf(want, sizeof want, "interface version 999, this shardq speaks version %d",
             SQ_PLUGIN_ABI);
    ck_assert_msg(strstr(err.msg, want) && strstr(err.msg, "plugin_badabi.so"), "%s", err.msg);
    snprintf(p, sizeof p, "%s/plugin_noinit.so", dir);
    ck_assert_int_eq(sq_plugin_load(p, &err), SQ_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "shardq_plugin_init") && strstr(err.msg, "plugin_noinit.so"),
                  "%s", err.msg);
    ck_assert_int_eq(sq_plugin_find("badabi"), SQ_ERR_NOTFOUND);
}
END_TEST

/* A file of the deprecated interface version 1 still loads this release:
** its init, configure and register_codec are called the old way, and a
** refusal's sentence comes back through its buffer. */
START_TEST(test_load_old_abi)
{
    const char *dir = getenv("SHARDQ_TEST_PLUGINS");
    ck_assert_msg(dir && *dir, "SHARDQ_TEST_PLUGINS (the test modules' directory) is not set");
    char p[4096];
    snprintf(p, sizeof p, "%s/plugin_oldabi.so", dir);
    unsetenv("SHARDQ_OLDABI_PARAMS");
    ck_assert_msg(sq_plugin_load(p, &err) == 1, "%s", err.msg);
    int id = sq_plugin_find("oldabi");
    ck_assert_int_ge(id, 1);
    ck_assert_uint_eq(sq_plugin_get(id)->group, 8);
    sq_codec c;
    ck_assert_int_eq(sq_codec_parse_v2("kind=plugin:oldabi", &c, &err), SQ_OK);
    float x[8] = {1, -2, 3, -4, 5, -6, 7, 200}, y[8];
    sq_qbuf q;
    ck_assert_int_eq(sq_qbuf_alloc(&c, 8, &q), SQ_OK);
    ck_assert_int_eq(sq_encode(&c, SQ_DTYPE_FP32, x, NULL, 8, NULL, &q), SQ_OK);
    ck_assert_int_eq(sq_decode(&c, SQ_DTYPE_FP32, &q, NULL, 8, y), SQ_OK);
    for (int i = 0; i < 7; i++) ck_assert_float_eq(y[i], x[i]);
    ck_assert_float_eq(y[7], 127);
    sq_qbuf_free(&q);
}
END_TEST

START_TEST(test_load_old_abi_refused)
{
    const char *dir = getenv("SHARDQ_TEST_PLUGINS");
    ck_assert_msg(dir && *dir, "SHARDQ_TEST_PLUGINS (the test modules' directory) is not set");
    char p[4096];
    snprintf(p, sizeof p, "%s/plugin_oldabi.so", dir);
    setenv("SHARDQ_OLDABI_PARAMS", "bad", 1);
    ck_assert_int_eq(sq_plugin_load(p, &err), SQ_ERR_SPEC);
    ck_assert_msg(strstr(err.msg, "plugin_oldabi.so") && strstr(err.msg, "expected group=N"),
                  "%s", err.msg);
    ck_assert_int_eq(sq_plugin_find("oldabi"), SQ_ERR_NOTFOUND);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plugin");
    TCase *t = tcase_create("plugin");
    tcase_set_timeout(t, 600);
    tcase_add_test(t, test_registry);
    tcase_add_test(t, test_load_old_abi);
    tcase_add_test(t, test_load_old_abi_refused);
    tcase_add_test(t, test_not_additive);
    tcase_add_test(t, test_spec);
    tcase_add_test(t, test_sizes);
    tcase_add_test(t, test_equals_builtin);
    tcase_add_test(t, test_sums);
    tcase_add_test(t, test_composes);
    tcase_add_test(t, test_stochastic);
    tcase_add_test(t, test_nonfinite);
    tcase_add_test(t, test_world);
    tcase_add_test(t, test_load_terngrad);
    tcase_add_test(t, test_load_errors);
    suite_add_tcase(s, t);
    return sqt_run(s);
}
