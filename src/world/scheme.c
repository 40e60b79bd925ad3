/*
** scheme.c -- the published schemes as named sets of knobs.
**
** A scheme says what the weight all-gather and the gradient reduce-scatter
** send: the collective pattern and one wire per hop. A preset is only a
** starting point; every knob can be set afterwards ("grad.inter.bits=3"),
** and the canonical text lists every knob in a fixed order so that equal
** schemes print equal strings.
*/
#include "shardq/layout.h"
#include "shardq/plugin.h"
#include "shardq/world.h"
#include "sq_sparse.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every failure of this file is a knob or a scheme out of range. */
static void set_err(sq_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(sq_error *err, const char *fmt, ...)
{
    if (!err) return;
    err->status = SQ_ERR_SPEC;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------------ */
/* Presets                                                                  */
/* ------------------------------------------------------------------------ */

const char *const sq_scheme_presets[] = {"baseline", "qw",  "qwd",     "ulq",     "tlq",
                                         "tlqhs",    "sdp4bit", "zeropp", "zeropp8", "qsdp",
                                         "qgz",      "qwz",     "powersgd", "powersgd4",
                                         "qsgd",     "efsignsgd", "topk"};
const size_t sq_scheme_npresets = sizeof sq_scheme_presets / sizeof sq_scheme_presets[0];

static sq_wire raw_wire(int bits)
{
    sq_wire w;
    memset(&w, 0, sizeof w);
    w.bits = bits;
    w.codec = sq_codec_default();
    return w;
}

static sq_wire codec_wire(sq_kind kind, int bits, uint64_t group, sq_round round, int hadamard,
                          sq_levels levels)
{
    sq_wire w;
    memset(&w, 0, sizeof w);
    w.bits = bits;
    w.codec = sq_codec_default();
    w.codec.kind = kind;
    w.codec.bits = bits;
    w.codec.group = group;
    w.codec.round = round;
    w.codec.hadamard = hadamard;
    w.codec.levels = levels;
    return w;
}

/* The weight side of qW / qWD: int4, groups of 2048, symmetric, SR. */
static sq_wire int4_weights(void)
{
    return codec_wire(SQ_KIND_SYM, 4, 2048, SQ_ROUND_SR, 0, SQ_LEVELS_SDP4BIT);
}

/* SDP4Bit's public ULq (the paper's ZeRO++ gradient baseline), as its
** repository runs it: the two-level all-to-all with 4 bits on both hops,
** stochastic rounding, qmax = 2^(b-1) - 1 (15 levels), groups sized from
** gq_group_size_intra on both hops, fp32 sums, no Hadamard. */
static void set_ulq(sq_scheme *s)
{
    s->grad_mode = SQ_GRAD_TWOLEVEL;
    s->grad_intra = codec_wire(SQ_KIND_SYM, 4, 128, SQ_ROUND_SR, 0, SQ_LEVELS_SDP4BIT);
    s->grad_inter = s->grad_intra;
}

/* DeepSpeed's qgZ as shipped: per gradient tensor, 4-bit symmetric RTN with
** DeepSpeed levels, numel / max(shape[0], shape[1], N) elements a group,
** fp16 arithmetic, and the fp32 ring for 1-D tensors, tensors whose numel
** is not a multiple of 2N and one-node worlds. (The group 128 is only a
** placeholder: the rule sizes the groups per tensor.) */
static void set_qgz(sq_scheme *s)
{
    s->grad_mode = SQ_GRAD_TWOLEVEL;
    s->grad_intra = codec_wire(SQ_KIND_SYM, 4, 128, SQ_ROUND_RTN, 0, SQ_LEVELS_DEEPSPEED);
    s->grad_intra.rule = SQ_GROUP_QGZ;
    s->grad_inter = s->grad_intra;
    s->grad_dtype = SQ_GRAD_FP16;
    s->grad_fallback = SQ_FALLBACK_QGZ;
}

/* DeepSpeed's qwZ: int8 symmetric RTN with DeepSpeed levels, the block
** count of CUDAQuantizer per partition (4096 is a placeholder). */
static sq_wire qwz_weights(void)
{
    sq_wire w = codec_wire(SQ_KIND_SYM, 8, 4096, SQ_ROUND_RTN, 0, SQ_LEVELS_DEEPSPEED);
    w.rule = SQ_GROUP_QWZ;
    return w;
}

/* A compressor of the gradient as GRACE runs one: every worker encodes its
** own gradient once, the receivers decode and sum in fp32 (the single-level
** all-to-all), with or without error feedback; the weights as the
** baseline's. */
static void set_single(sq_scheme *s, sq_wire w, int ef)
{
    w.ef = ef;
    s->grad_mode = SQ_GRAD_A2A;
    s->grad_intra = w;
    s->grad_inter = w;
}

/* SDP4Bit TLq: 8-bit intra-node, 4-bit inter-node, groups of 128, SR;
** TLq-HS adds the 32-point Hadamard. */
static void set_tlq(sq_scheme *s, int hadamard)
{
    s->grad_mode = SQ_GRAD_TWOLEVEL;
    s->grad_intra = codec_wire(SQ_KIND_SYM, 8, 128, SQ_ROUND_SR, hadamard, SQ_LEVELS_SDP4BIT);
    s->grad_inter = codec_wire(SQ_KIND_SYM, 4, 128, SQ_ROUND_SR, hadamard, SQ_LEVELS_SDP4BIT);
}

int sq_scheme_preset(const char *name, sq_scheme *s, sq_error *err)
{
    size_t i;
    for (i = 0; i < sq_scheme_npresets; i++)
        if (name && strcmp(name, sq_scheme_presets[i]) == 0) break;
    if (i == sq_scheme_npresets) {
        set_err(err,
                "unknown scheme '%s' (presets: baseline, qw, qwd, ulq, tlq, tlqhs, sdp4bit, "
                "zeropp, zeropp8, qsdp, qgz, qwz, powersgd, powersgd4, qsgd, efsignsgd, topk)",
                name ? name : "");
        return SQ_ERR_SPEC;
    }
    /* The baseline of Megatron: bf16 weights gathered, fp32 gradients
    ** reduce-scattered by a ring, pre-divided by N. */
    memset(s, 0, sizeof *s);
    snprintf(s->preset, sizeof s->preset, "%s", name);
    s->weight_mode = SQ_WEIGHT_DIRECT;
    s->weight = raw_wire(16);
    s->weight_recon = SQ_RECON_BF16; /* every preset: the reference systems' bf16 w-hat */
    s->grad_mode = SQ_GRAD_RING;
    s->grad_intra = raw_wire(32);
    s->grad_inter = raw_wire(32);
    s->pipe = 1;
    s->grad_mean = 1;
    /* Megatron's distributed optimizer: one flat buffer in 40 M-element
    ** buckets (SDP4Bit's scripts run with --overlap-grad-reduce) */
    s->layout = SQ_LAYOUT_BUCKET;
    s->bucket = SQ_LAYOUT_BUCKET_DEFAULT;
    s->grad_dtype = SQ_GRAD_FP32;
    s->grad_fallback = SQ_FALLBACK_NONE;
    /* PyTorch's PowerSGDState defaults, but start_powerSGD_iter = 1000:
    ** here 0, so that short runs compress at all (docs/schemes.md) */
    s->psgd_rank = 1;
    s->psgd_warm = 1;
    s->psgd_ef = 1;
    s->psgd_start = 0;
    s->psgd_minrate = 2.0;
    s->psgd_eps = 0.0f;
    s->psgd_cols = 0;
    s->psgd_view_cols = 0;

    if (!strcmp(name, "qw")) {
        s->weight = int4_weights();
    } else if (!strcmp(name, "qwd")) {
        s->weight_mode = SQ_WEIGHT_DIFF;
        s->weight = int4_weights();
    } else if (!strcmp(name, "ulq")) {
        set_ulq(s);
    } else if (!strcmp(name, "tlq")) {
        set_tlq(s, 0);
    } else if (!strcmp(name, "tlqhs")) {
        set_tlq(s, 32);
    } else if (!strcmp(name, "sdp4bit")) {
        s->weight_mode = SQ_WEIGHT_DIFF;
        s->weight = int4_weights();
        set_tlq(s, 32);
    } else if (!strcmp(name, "zeropp")) {
        /* The paper's ZeRO++ baseline, its own Megatron reimplementation:
        ** qW's 4-bit weights and ULq's gradients. */
        s->weight = int4_weights();
        set_ulq(s);
    } else if (!strcmp(name, "zeropp8")) {
        /* DeepSpeed's ZeRO++ as shipped: qwZ + qgZ (hpZ off). */
        s->weight = qwz_weights();
        set_qgz(s);
    } else if (!strcmp(name, "qsdp")) {
        /* QSDP: unbiased 8-bit min-max quantization per bucket on both
        ** paths; the weights themselves are quantized (no differences) and
        ** each worker's reduced shard is the sum of re-quantized chunks. */
        s->weight = codec_wire(SQ_KIND_MINMAX, 8, 1024, SQ_ROUND_SR, 0, SQ_LEVELS_SDP4BIT);
        s->grad_mode = SQ_GRAD_A2A;
        s->grad_intra = codec_wire(SQ_KIND_MINMAX, 8, 1024, SQ_ROUND_SR, 0, SQ_LEVELS_SDP4BIT);
        s->grad_inter = s->grad_intra;
    } else if (!strcmp(name, "qgz")) {
        set_qgz(s); /* DeepSpeed's qgZ alone, bf16 weights */
    } else if (!strcmp(name, "qwz")) {
        s->weight = qwz_weights(); /* DeepSpeed's qwZ alone, fp32 ring gradients */
    } else if (!strcmp(name, "powersgd") || !strcmp(name, "powersgd4")) {
        /* PowerSGD as PyTorch's powerSGD_hook runs it: every tensor its own
        ** matrix (d0 x numel/d0), rank 1 (PowerSGDState's default) or 4
        ** (the paper's rank for its LSTM on WikiText-2), warm start, error
        ** feedback, fp32 factors; the weights as the baseline's */
        s->grad_mode = SQ_GRAD_POWERSGD;
        s->psgd_rank = name[8] == '4' ? 4 : 1;
        s->layout = SQ_LAYOUT_PARAM;
    } else if (!strcmp(name, "qsgd")) {
        /* GRACE's QSGDCompressor (grace_dl/dist): s levels of each bucket's
        ** L2 norm, stochastic, buckets of 128 (its bucket_size default); 4
        ** bits, s = 7; one encode per worker, decoded and summed (a2a) */
        set_single(s, codec_wire(SQ_KIND_QSGD, 4, 128, SQ_ROUND_SR, 0, SQ_LEVELS_SDP4BIT), 0);
    } else if (!strcmp(name, "efsignsgd")) {
        /* EF-SignSGD (Karimireddy et al. 2019; GRACE's EFSignSGDCompressor
        ** with residual memory): the sign scaled by the mean |x|, error
        ** feedback; one scale per 128 elements, where both take one per
        ** tensor (docs/schemes.md) */
        set_single(s, codec_wire(SQ_KIND_SIGN, 1, 128, SQ_ROUND_RTN, 0, SQ_LEVELS_SDP4BIT), 1);
    } else if (!strcmp(name, "topk")) {
        /* GRACE's TopKCompressor at compress_ratio 0.01 with residual
        ** memory: the 10 largest |x| of each 1024 (0.98%), 16-bit indices,
        ** fp32 values (bits: the index width), error feedback; per group where GRACE selects per
        ** tensor (docs/schemes.md) */
        sq_wire w = codec_wire(SQ_KIND_TOPK, 16, 1024, SQ_ROUND_RTN, 0, SQ_LEVELS_SDP4BIT);
        w.codec.keep = 10;
        set_single(s, w, 1);
    }
    /* DeepSpeed's ZeRO-3 partitions parameter by parameter, and qgZ and qwZ
    ** size their groups per tensor */
    if (sq_scheme_per_tensor(s)) s->layout = SQ_LAYOUT_PARAM;
    return SQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Knobs                                                                    */
/* ------------------------------------------------------------------------ */

/* keep comes last and is printed only for a topk or randk wire, so that the
** canonical text of every other wire is what it always was. */
#define CODEC_KNOBS(prefix, what, groups, grouphelp)                                        \
    {prefix "bits", "1-8, 16 (bf16), 32 (fp32)", "bits per element of " what},             \
        {prefix "kind", "sym, minmax, qsgd, sign, fp8e4m3, fp8e5m2, topk, randk, fp16, "       \
         "plugin:NAME",                                                                      \
         "absmax (symmetric) or min-max groups; a compressor: QSGD (norm-scaled levels), "   \
         "scaled sign (bits 1), FP8 E4M3 or E5M2 (bits 8) per group, top-k or random-k of "  \
         "each group (indices and values); an fp16 cast (bf16: bits=16); or a plug-in "      \
         "codec (its own group)"},                                                           \
        {prefix "group", groups, grouphelp},                                                \
        {prefix "round", "rtn, sr", "round to nearest even or stochastic (Philox)"},        \
        {prefix "hadamard", "0, 2-1024 (power of two)", "Hadamard size, 0 = off"},          \
        {prefix "levels", "sdp4bit, deepspeed", "qmax/absmax (sdp4bit) or 2^(b-1)/absmax"}, \
        {prefix "scale", "fp32, bf16, fp16",                                                \
         "dtype of scales and offsets (topk, randk: of the kept values)"},                  \
        {prefix "keep", "1-2^40 (0: unset)",                                                \
         "elements kept per group by kind=topk or randk, at most the group"}

const sq_knob sq_scheme_knobs[] = {
    {"weight.mode", "direct, diff", "weights travel themselves, or their difference to w-hat"},
    CODEC_KNOBS("weight.", "the weight all-gather", "1-2^40, qwz",
                "elements per scale; qwz: DeepSpeed qwZ's block count per partition"),
    {"weight.recon", "bf16, fp32",
     "a quantized weight wire rebuilds bf16 weights (bf16 master copy, bf16 difference and "
     "add, as the reference systems) or fp32 ones; bits 16/32 ignore it (the wire's dtype "
     "is the precision)"},
    {"grad.mode", "ring, a2a, twolevel, powersgd",
     "ring reduce-scatter, one- or two-level all-to-all, or PowerSGD's low-rank all-reduces"},
    CODEC_KNOBS("grad.intra.", "the intra-node hop (the only one when K = 1)", "1-2^40, qgz",
                "elements per scale; qgz: numel / max(rows, cols, N) per tensor (DeepSpeed qgZ)"),
    {"grad.intra.ef", "0, 1",
     "error feedback at the hop's encode: the worker encodes x + e and keeps e = (x + e) - "
     "D(E(x + e)) for the next step (the worker's own gradient on the two-level path)"},
    CODEC_KNOBS("grad.inter.", "the inter-node hop (the single level when K > 1)", "1-2^40, qgz",
                "elements per scale; qgz: numel / max(rows, cols, N) per tensor (DeepSpeed qgZ)"),
    {"grad.inter.ef", "0, 1",
     "error feedback at the hop's encode (the requantized node-local sum on the two-level "
     "path, the worker's own gradient on one level when K > 1)"},
    {"grad.pipe", "1-1024", "pipeline slices of the two-level all-to-all"},
    {"grad.mean", "0, 1", "1: gradients divided by N before the reduce (a mean)"},
    {"grad.dtype", "fp32, fp16",
     "arithmetic of the gradient path; fp16 rounds the input, every decoded chunk and every "
     "partial sum to fp16 (DeepSpeed qgZ)"},
    {"grad.fallback", "none, qgz",
     "qgz: 1-D tensors, numel not a multiple of 2N and one-node worlds take the fp32 ring "
     "(DeepSpeed qgZ, per tensor)"},
    {"grad.powersgd.rank", "1-1024",
     "rank of PowerSGD's approximation (PyTorch's matrix_approximation_rank)"},
    {"grad.powersgd.warm", "0, 1", "1: start from the last step's Q (warm_start), 0: a fresh Q"},
    {"grad.powersgd.ef", "0, 1", "1: carry the compression error into the next step (error feedback)"},
    {"grad.powersgd.start", "0-4294967295",
     "steps numbered below it reduce uncompressed (start_powerSGD_iter; PyTorch's default 1000)"},
    {"grad.powersgd.minrate", "> 0",
     "compress a matrix only if (rows + cols) rank minrate < rows cols (min_compression_rate)"},
    {"grad.powersgd.eps", ">= 0", "added to each column's norm in the orthogonalization"},
    {"grad.powersgd.cols", "0-2^40",
     "columns of the matrix view of a world that is not one tensor; 0: ceil(sqrt(n))"},
    {"layout", "bucket, param", "flat buckets (Megatron) or a world per parameter (ZeRO-3, FSDP)"},
    {"layout.bucket", "0-2^50", "elements per bucket (0: one bucket); Megatron's is 40000000"},
};
const size_t sq_scheme_nknobs = sizeof sq_scheme_knobs / sizeof sq_scheme_knobs[0];

/* The kinds in enum order (shardq/codec.h), as sq_codec_parse spells them. */
static const char *const kind_names[] = {"sym",     "minmax", "qsgd",  "sign",
                                         "fp8e4m3", "fp8e5m2", "topk", "randk",
                                         "bf16",    "fp16",    "plugin"};
#define NKINDS ((int)(sizeof kind_names / sizeof kind_names[0]))

static const char *kind_name(sq_kind k)
{
    return (unsigned)k < (unsigned)NKINDS ? kind_names[k] : "?";
}
static const char *const round_names[] = {"rtn", "sr"};
static const char *const level_names[] = {"sdp4bit", "deepspeed"};
static const char *const scale_names[] = {"fp32", "bf16", "fp16"};
static const char *const wmode_names[] = {"direct", "diff"};
static const char *const recon_names[] = {"bf16", "fp32"};
/* index = sq_grad_mode; "none" is never a knob's value */
static const char *const gmode_names[] = {"ring", "a2a", "twolevel", "none", "powersgd"};
static const char *const layout_names[] = {"bucket", "param"};
static const char *const gdtype_names[] = {"fp32", "fp16"};
static const char *const fallback_names[] = {"none", "qgz"};
static const char *const rule_names[] = {"", "qgz", "qwz"};

static int pick(const char *v, const char *const *names, int count)
{
    for (int i = 0; i < count; i++)
        if (strcmp(v, names[i]) == 0) return i;
    return -1;
}

static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    if (*s < '0' || *s > '9') return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > max) return -1;
    *out = v;
    return 0;
}

/* kind=plugin:NAME: the plug-in's codec, with the group it registered
** (a fixed size, not a per-tensor rule); the wire's other codec fields
** stay, ignored while the kind is a plug-in. */
static int set_plugin_kind(sq_wire *w, const char *val, const char *key, sq_error *err)
{
    char text[64], why[SQ_ERROR_MSG];
    sq_codec c;
    snprintf(text, sizeof text, "kind=%.50s", val);
    if (strlen(val) > 50 || sq_codec_parse(text, &c, why, sizeof why) != SQ_OK) {
        set_err(err, "%s=%.60s: %s", key, val,
                strlen(val) > 50 ? "not the name of a plug-in codec" : why);
        return SQ_ERR_SPEC;
    }
    w->codec.kind = c.kind;
    w->codec.plugin = c.plugin;
    w->codec.group = c.group;
    w->rule = SQ_GROUP_FIXED;
    return SQ_OK;
}

/* Sets one field of a wire; the combination is checked by validate. */
static int set_wire_field(sq_wire *w, const char *field, const char *val, const char *key,
                          sq_group_rule rule, sq_error *err)
{
    uint64_t u;
    int i;
    if (!strcmp(field, "bits")) {
        if (parse_u64(val, 32, &u) || !((u >= 1 && u <= 8) || u == 16 || u == 32)) {
            set_err(err, "%s=%s: must be 1 to 8, 16 (bf16) or 32 (fp32)", key, val);
            return SQ_ERR_SPEC;
        }
        w->bits = (int)u;
        if (u <= 8) w->codec.bits = (int)u;
    } else if (!strcmp(field, "group")) {
        if (!strcmp(val, rule_names[rule])) {
            w->rule = rule; /* the codec's group stays, unused until a fixed size returns */
            return SQ_OK;
        }
        if (parse_u64(val, SQ_GROUP_MAX, &u) || u < 1) {
            set_err(err, "%s=%s: must be an integer from 1 to 2^40 or the rule %s", key, val,
                    rule_names[rule]);
            return SQ_ERR_SPEC;
        }
        w->codec.group = u;
        w->rule = SQ_GROUP_FIXED;
    } else if (!strcmp(field, "hadamard")) {
        if (parse_u64(val, SQ_HADAMARD_MAX, &u) || u == 1 || (u & (u - 1))) {
            set_err(err, "%s=%s: must be 0 (off) or a power of two from 2 to 1024", key,
                    val);
            return SQ_ERR_SPEC;
        }
        w->codec.hadamard = (int)u;
    } else if (!strcmp(field, "kind") && !strncmp(val, "plugin:", 7)) {
        return set_plugin_kind(w, val, key, err);
    } else if (!strcmp(field, "kind")) {
        if (!strcmp(val, "bf16")) {
            /* one wire, one spelling: the bf16 cast is the unquantized bf16 wire */
            set_err(err, "%s=bf16: the bf16 wire is %.*sbits=16 (the unquantized bf16 wire)", key,
                    (int)(strlen(key) - strlen(field)), key);
            return SQ_ERR_SPEC;
        }
        /* a plug-in is named (plugin:NAME, above): plugin alone is no kind */
        if ((i = pick(val, kind_names, SQ_KIND_PLUGIN)) < 0) goto bad;
        w->codec.kind = (sq_kind)i;
        w->codec.plugin = 0;
    } else if (!strcmp(field, "keep")) {
        if (parse_u64(val, SQ_GROUP_MAX, &u)) {
            set_err(err, "%s=%s: must be an integer from 1 to the group (0: unset)", key, val);
            return SQ_ERR_SPEC;
        }
        w->codec.keep = u;
    } else if (!strcmp(field, "round")) {
        if ((i = pick(val, round_names, 2)) < 0) goto bad;
        w->codec.round = (sq_round)i;
    } else if (!strcmp(field, "levels")) {
        if ((i = pick(val, level_names, 2)) < 0) goto bad;
        w->codec.levels = (sq_levels)i;
    } else if (!strcmp(field, "scale")) {
        if ((i = pick(val, scale_names, 3)) < 0) goto bad;
        w->codec.scale = (sq_scale_dtype)i;
    } else if (!strcmp(field, "ef") && rule == SQ_GROUP_QGZ) {
        /* a gradient wire's knob: the weights have no residual to feed back */
        if (strcmp(val, "0") && strcmp(val, "1")) {
            set_err(err, "%s=%s: must be 0 (off) or 1 (error feedback)", key, val);
            return SQ_ERR_SPEC;
        }
        w->ef = val[0] == '1';
    } else {
        return SQ_ERR_ARG; /* not a wire field: the caller reports the key */
    }
    return SQ_OK;
bad:
    set_err(err, "%s=%s: unknown value (%s)", key, val,
            !strcmp(field, "kind")     ? "sym, minmax, qsgd, sign, fp8e4m3, fp8e5m2, topk, randk, fp16, plugin:NAME"
            : !strcmp(field, "round")  ? "rtn, sr"
            : !strcmp(field, "levels") ? "sdp4bit, deepspeed"
                                       : "fp32, bf16, fp16");
    return SQ_ERR_SPEC;
}

/* The shortest "%.Ng" text that reads back as v (6 to 17 digits), so that
** equal values print equal and the text is the value. */
static void shortest(double v, int is_float, char *buf, size_t len)
{
    for (int d = 6; d <= 17; d++) {
        snprintf(buf, len, "%.*g", d, v);
        double back = strtod(buf, NULL);
        if (is_float ? (float)back == (float)v : back == v) return;
    }
}

/* grad.powersgd.FIELD=val */
static int set_powersgd(sq_scheme *s, const char *key, const char *val, sq_error *err)
{
    const char *f = key + 14;
    uint64_t u;
    if (!strcmp(f, "rank")) {
        if (parse_u64(val, 1024, &u) || u < 1) goto range;
        s->psgd_rank = (int)u;
    } else if (!strcmp(f, "warm") || !strcmp(f, "ef")) {
        if (strcmp(val, "0") && strcmp(val, "1")) goto range;
        *(f[0] == 'w' ? &s->psgd_warm : &s->psgd_ef) = val[0] == '1';
    } else if (!strcmp(f, "start")) {
        if (parse_u64(val, UINT32_MAX, &u)) goto range;
        s->psgd_start = (uint32_t)u;
    } else if (!strcmp(f, "cols")) {
        if (parse_u64(val, SQ_GROUP_MAX, &u)) goto range;
        s->psgd_cols = u;
    } else if (!strcmp(f, "minrate") || !strcmp(f, "eps")) {
        char *end;
        errno = 0;
        double v = strtod(val, &end);
        int eps = f[0] == 'e';
        if (errno || *end || end == val || !isfinite(v) || (eps ? v < 0 : v <= 0) ||
            (eps && !isfinite((float)v)))
            goto range;
        if (eps) s->psgd_eps = (float)v;
        else s->psgd_minrate = v;
    } else {
        set_err(err, "unknown knob '%s' (grad.powersgd.rank, warm, ef, start, minrate, eps, cols)",
                key);
        return SQ_ERR_SPEC;
    }
    return SQ_OK;
range:
    for (size_t k = 0; k < sq_scheme_nknobs; k++)
        if (!strcmp(sq_scheme_knobs[k].key, key))
            set_err(err, "%s=%s: out of range (%s)", key, val, sq_scheme_knobs[k].values);
    return SQ_ERR_SPEC;
}

int sq_scheme_set(sq_scheme *s, const char *assignment, sq_error *err)
{
    if (!s || !assignment) return SQ_ERR_ARG;
    const char *eq = strchr(assignment, '=');
    char key[64];
    if (!eq || eq == assignment || (size_t)(eq - assignment) >= sizeof key) {
        set_err(err, "'%s': expected KEY=VALUE ('shardq schemes' lists the keys)",
                assignment);
        return SQ_ERR_SPEC;
    }
    memcpy(key, assignment, (size_t)(eq - assignment));
    key[eq - assignment] = '\0';
    const char *val = eq + 1;
    if (!*val) {
        set_err(err, "%s: empty value", key);
        return SQ_ERR_SPEC;
    }
    uint64_t u;
    int i, rc = SQ_ERR_ARG;
    if (!strcmp(key, "weight.mode")) {
        if ((i = pick(val, wmode_names, 2)) < 0) goto bad;
        s->weight_mode = (sq_weight_mode)i;
        return SQ_OK;
    }
    if (!strcmp(key, "weight.recon")) {
        if ((i = pick(val, recon_names, 2)) < 0) goto bad;
        s->weight_recon = (sq_weight_recon)i;
        return SQ_OK;
    }
    if (!strcmp(key, "grad.mode")) {
        if ((i = pick(val, gmode_names, 5)) < 0 || i == SQ_GRAD_NONE) goto bad;
        s->grad_mode = (sq_grad_mode)i;
        return SQ_OK;
    }
    if (!strncmp(key, "grad.powersgd.", 14)) return set_powersgd(s, key, val, err);
    if (!strcmp(key, "grad.pipe")) {
        if (parse_u64(val, 1024, &u) || u < 1) {
            set_err(err, "grad.pipe=%s: must be an integer from 1 to 1024", val);
            return SQ_ERR_SPEC;
        }
        s->pipe = (int)u;
        return SQ_OK;
    }
    if (!strcmp(key, "grad.mean")) {
        if (strcmp(val, "0") && strcmp(val, "1")) goto bad;
        s->grad_mean = val[0] == '1';
        return SQ_OK;
    }
    if (!strcmp(key, "layout")) {
        if ((i = pick(val, layout_names, 2)) < 0) goto bad;
        s->layout = i;
        return SQ_OK;
    }
    if (!strcmp(key, "layout.bucket")) {
        if (parse_u64(val, (uint64_t)1 << 50, &u)) {
            set_err(err, "layout.bucket=%s: must be an integer from 0 (one bucket) to 2^50", val);
            return SQ_ERR_SPEC;
        }
        s->bucket = u;
        return SQ_OK;
    }
    if (!strcmp(key, "grad.dtype")) {
        if ((i = pick(val, gdtype_names, 2)) < 0) goto bad;
        s->grad_dtype = (sq_grad_dtype)i;
        return SQ_OK;
    }
    if (!strcmp(key, "grad.fallback")) {
        if ((i = pick(val, fallback_names, 2)) < 0) goto bad;
        s->grad_fallback = (sq_grad_fallback)i;
        return SQ_OK;
    }
    if (!strncmp(key, "weight.", 7)) {
        rc = set_wire_field(&s->weight, key + 7, val, key, SQ_GROUP_QWZ, err);
    } else if (!strncmp(key, "grad.intra.", 11)) {
        rc = set_wire_field(&s->grad_intra, key + 11, val, key, SQ_GROUP_QGZ, err);
    } else if (!strncmp(key, "grad.inter.", 11)) {
        rc = set_wire_field(&s->grad_inter, key + 11, val, key, SQ_GROUP_QGZ, err);
    } else if (!strncmp(key, "grad.", 5)) {
        /* grad.FIELD sets both hops */
        rc = set_wire_field(&s->grad_intra, key + 5, val, key, SQ_GROUP_QGZ, err);
        if (rc == SQ_OK) rc = set_wire_field(&s->grad_inter, key + 5, val, key, SQ_GROUP_QGZ, err);
    }
    if (rc == SQ_ERR_ARG) {
        set_err(err,
                "unknown knob '%s' (weight.*, grad.*, grad.intra.*, grad.inter.*; "
                "'shardq schemes' lists them)",
                key);
        return SQ_ERR_SPEC;
    }
    return rc;
bad:
    for (size_t k = 0; k < sq_scheme_nknobs; k++)
        if (!strcmp(sq_scheme_knobs[k].key, key))
            set_err(err, "%s=%s: unknown value (%s)", key, val, sq_scheme_knobs[k].values);
    return SQ_ERR_SPEC;
}

/* ------------------------------------------------------------------------ */
/* Validation and text                                                      */
/* ------------------------------------------------------------------------ */

static int check_wire(const sq_wire *w, const char *name, sq_error *err)
{
    if (sq_wire_raw(w)) return SQ_OK;
    char why[SQ_ERROR_MSG - 32];
    if (w->codec.kind == SQ_KIND_PLUGIN) {
        const sq_plugin_codec *d = sq_plugin_get(w->codec.plugin);
        if (d && w->rule != SQ_GROUP_FIXED) {
            set_err(err, "%s.group=%s: kind=plugin:%s has its own group (%llu), not a per-tensor "
                    "rule", name, rule_names[w->rule % 3], d->name, (unsigned long long)d->group);
            return SQ_ERR_SPEC;
        }
        if (d && w->codec.hadamard) {
            set_err(err, "%s.hadamard=%d: kind=plugin:%s takes no Hadamard transform (set "
                    "%s.hadamard=0%s)", name, w->codec.hadamard, d->name, name,
                    strncmp(name, "grad.", 5) ? "" : ", or grad.hadamard=0 for both hops");
            return SQ_ERR_SPEC;
        }
        if (sq_codec_validate(&w->codec) == SQ_OK) return SQ_OK;
        /* the core's parser says what is wrong with it */
        char text[2 * SQ_CODEC_STRLEN];
        snprintf(text, sizeof text, "kind=plugin:%s,group=%llu", d ? d->name : "?",
                 (unsigned long long)w->codec.group);
        sq_codec tmp;
        if (sq_codec_parse(text, &tmp, why, sizeof why) == SQ_OK)
            snprintf(why, sizeof why, "invalid codec");
        set_err(err, "%s: %s", name, why);
        return SQ_ERR_SPEC;
    }
    if (sq_sparse_kind(w->codec.kind) && sq_codec_validate(&w->codec) != SQ_OK) {
        /* the fields these kinds use, for the core's parser to judge */
        char text[2 * SQ_CODEC_STRLEN];
        const sq_codec *c = &w->codec;
        if (sq_kind_cast(c->kind))
            snprintf(text, sizeof text, "kind=%s,hadamard=%d", kind_names[c->kind], c->hadamard);
        else
            snprintf(text, sizeof text, "kind=%s,group=%llu,hadamard=%d,scale=%s,keep=%llu",
                     kind_names[c->kind], (unsigned long long)c->group, c->hadamard,
                     scale_names[c->scale % 3], (unsigned long long)c->keep);
        sq_codec tmp;
        if (sq_codec_parse(text, &tmp, why, sizeof why) == SQ_OK)
            snprintf(why, sizeof why, "invalid codec");
        set_err(err, "%s: %s", name, why);
        return SQ_ERR_SPEC;
    }
    if (sq_codec_validate(&w->codec) != SQ_OK) {
        /* the core's parser says what is wrong with it */
        char text[2 * SQ_CODEC_STRLEN];
        const sq_codec *c = &w->codec;
        snprintf(text, sizeof text, "kind=%s,bits=%d,group=%llu,round=%s,hadamard=%d,levels=%s,scale=%s",
                 kind_name(c->kind), c->bits, (unsigned long long)c->group,
                 round_names[c->round & 1], c->hadamard, level_names[c->levels & 1],
                 scale_names[c->scale % 3]);
        sq_codec tmp;
        if (sq_codec_parse(text, &tmp, why, sizeof why) == SQ_OK)
            snprintf(why, sizeof why, "invalid codec");
        set_err(err, "%s: %s", name, why);
        return SQ_ERR_SPEC;
    }
    if (sq_sparse_kind(w->codec.kind) && w->rule != SQ_GROUP_FIXED) {
        set_err(err,
                "%s.group=%s: a per-tensor group rule sizes quantization groups; kind=%s needs "
                "a fixed group (keep= counts within it)",
                name, rule_names[w->rule % 3], kind_names[w->codec.kind]);
        return SQ_ERR_SPEC;
    }
    int h = w->codec.hadamard;
    if (h && w->codec.group % (uint64_t)h) {
        set_err(err,
                "%s.hadamard=%d: the group (%llu) must be a multiple of the Hadamard size, so "
                "that shards hold whole transform blocks",
                name, h, (unsigned long long)w->codec.group);
        return SQ_ERR_SPEC;
    }
    return SQ_OK;
}

/* Error feedback needs a hop that encodes what one worker holds, in fp32. */
static int check_ef(const sq_scheme *s, sq_error *err)
{
    const sq_wire *a = &s->grad_intra, *b = &s->grad_inter;
    if (s->weight.ef) {
        set_err(err, "weight: error feedback is a knob of the gradient wires (grad.ef)");
        return SQ_ERR_SPEC;
    }
    if ((a->ef != 0 && a->ef != 1) || (b->ef != 0 && b->ef != 1)) {
        set_err(err, "grad.intra.ef=%d, grad.inter.ef=%d: must be 0 or 1", a->ef, b->ef);
        return SQ_ERR_SPEC;
    }
    if (!a->ef && !b->ef) return SQ_OK;
    if (s->grad_mode == SQ_GRAD_RING) {
        set_err(err,
                "grad.ef=1 with grad.mode=ring: the ring forwards partial sums and encodes no "
                "worker's own gradient, so there is no residual to feed back; use "
                "grad.mode=a2a or twolevel");
        return SQ_ERR_SPEC;
    }
    if (s->grad_mode == SQ_GRAD_POWERSGD) {
        set_err(err, "grad.ef=1 with grad.mode=powersgd: PowerSGD keeps its own residual "
                     "(grad.powersgd.ef, on by default, as PyTorch's hook)");
        return SQ_ERR_SPEC;
    }
    if (s->grad_dtype == SQ_GRAD_FP16) {
        set_err(err,
                "grad.ef=1 with grad.dtype=fp16: qgZ's fp16 arithmetic has no fp32 residual "
                "(x + e is not an fp16 value); set grad.dtype=fp32 or grad.ef=0");
        return SQ_ERR_SPEC;
    }
    return SQ_OK;
}

int sq_scheme_validate(const sq_scheme *s, sq_error *err)
{
    int rc;
    if ((rc = check_wire(&s->weight, "weight", err)) ||
        (rc = check_wire(&s->grad_intra, "grad.intra", err)) ||
        (rc = check_wire(&s->grad_inter, "grad.inter", err)) || (rc = check_ef(s, err)))
        return rc;
    if (s->weight_mode == SQ_WEIGHT_DIFF && sq_wire_raw(&s->weight)) {
        set_err(err,
                "weight.mode=diff needs a quantized wire (weight.bits 1 to 8): an unquantized "
                "difference is the baseline with extra work");
        return SQ_ERR_SPEC;
    }
    if (s->pipe < 1 || s->pipe > 1024) {
        set_err(err, "grad.pipe=%d: must be 1 to 1024", s->pipe);
        return SQ_ERR_SPEC;
    }
    const sq_wire *a = &s->grad_intra, *b = &s->grad_inter;
    if (s->grad_mode == SQ_GRAD_RING && (!sq_wire_raw(a) || !sq_wire_raw(b))) {
        if (sq_sparse_kind(a->codec.kind) || sq_sparse_kind(b->codec.kind))
            set_err(err,
                    "grad.mode=ring sums partial results at every hop and takes unquantized "
                    "wires only: a topk, randk or fp16 wire needs grad.mode=a2a or twolevel "
                    "(or grad.kind=sym with grad.bits=32 or 16)");
        else
            set_err(err,
                    "grad.mode=ring sums partial results at every hop and takes unquantized "
                    "wires only: set grad.bits=32 or 16, or grad.mode=a2a / twolevel");
        return SQ_ERR_SPEC;
    }
    if (s->weight.rule != SQ_GROUP_FIXED && s->weight.rule != SQ_GROUP_QWZ) {
        set_err(err, "weight.group: the per-tensor rule of the weights is qwz");
        return SQ_ERR_SPEC;
    }
    if ((a->rule != SQ_GROUP_FIXED && a->rule != SQ_GROUP_QGZ) ||
        (b->rule != SQ_GROUP_FIXED && b->rule != SQ_GROUP_QGZ)) {
        set_err(err, "grad.group: the per-tensor rule of the gradients is qgz");
        return SQ_ERR_SPEC;
    }
    if ((unsigned)s->grad_dtype > SQ_GRAD_FP16 || (unsigned)s->grad_fallback > SQ_FALLBACK_QGZ) {
        set_err(err, "grad.dtype or grad.fallback: out of range");
        return SQ_ERR_SPEC;
    }
    if (s->grad_dtype == SQ_GRAD_FP16 &&
        (s->grad_mode == SQ_GRAD_RING || sq_wire_raw(a) || sq_wire_raw(b) ||
         a->codec.hadamard || b->codec.hadamard || sq_sparse_kind(a->codec.kind) ||
         sq_sparse_kind(b->codec.kind))) {
        set_err(err,
                "grad.dtype=fp16 is the arithmetic of qgZ's quantized all-to-all: it needs "
                "grad.mode=a2a or twolevel, quantized hops (grad.bits 1 to 8, not topk, randk "
                "or fp16) and no Hadamard transform");
        return SQ_ERR_SPEC;
    }
    if (s->grad_dtype == SQ_GRAD_FP16 &&
        (a->codec.kind == SQ_KIND_PLUGIN || b->codec.kind == SQ_KIND_PLUGIN)) {
        set_err(err, "grad.dtype=fp16: the fp16 sums of qgZ are the built-in kinds'; a plug-in "
                     "codec's chunks are summed in fp32 (set grad.dtype=fp32)");
        return SQ_ERR_SPEC;
    }
    if ((unsigned)s->grad_mode > SQ_GRAD_POWERSGD || s->grad_mode == SQ_GRAD_NONE) {
        set_err(err, "grad.mode: out of range");
        return SQ_ERR_SPEC;
    }
    if (s->grad_mode == SQ_GRAD_POWERSGD) {
        /* the factors are sums of products: they travel and add up in fp32 */
        if (!sq_wire_raw(a) || !sq_wire_raw(b) || a->bits != 32 || b->bits != 32 ||
            s->grad_dtype != SQ_GRAD_FP32) {
            set_err(err, "grad.mode=powersgd all-reduces its low-rank factors in fp32: set "
                    "grad.bits=32 and grad.dtype=fp32");
            return SQ_ERR_SPEC;
        }
        if (s->grad_fallback != SQ_FALLBACK_NONE) {
            set_err(err, "grad.mode=powersgd has its own rule for the tensors it does not "
                    "compress (grad.powersgd.minrate): set grad.fallback=none");
            return SQ_ERR_SPEC;
        }
        if (s->psgd_rank < 1 || s->psgd_rank > 1024 || !(s->psgd_minrate > 0) ||
            !isfinite(s->psgd_minrate) || !(s->psgd_eps >= 0) || !isfinite(s->psgd_eps) ||
            s->psgd_cols > SQ_GROUP_MAX) {
            set_err(err, "grad.powersgd: rank, minrate, eps or cols out of range");
            return SQ_ERR_SPEC;
        }
    }
    if (s->grad_mode == SQ_GRAD_TWOLEVEL) {
        /* The forward transform happens at the first quantization and the
        ** inverse after the last sum: both hops must agree on it, and an
        ** unquantized hop has no transform to carry. */
        int ha = sq_wire_raw(a) ? 0 : a->codec.hadamard;
        int hb = sq_wire_raw(b) ? 0 : b->codec.hadamard;
        if (ha != hb || (ha && (sq_wire_raw(a) || sq_wire_raw(b)))) {
            set_err(err,
                    "grad.intra.hadamard=%d, grad.inter.hadamard=%d: the two-level path applies "
                    "one transform before the first hop and its inverse after the second, so "
                    "both hops must be quantized with the same size (set grad.hadamard)",
                    ha, hb);
            return SQ_ERR_SPEC;
        }
    }
    return SQ_OK;
}

static void wire_value(const sq_wire *w, const char *field, char *buf, size_t len)
{
    /* An unquantized wire ignores its codec: print the defaults, so that
    ** schemes that behave alike print alike; for the same reason a kind that
    ** fixes some fields (topk, randk, fp16) prints them at its values. */
    sq_codec def = sq_codec_default(), fixed = sq_sparse_canonical(&w->codec);
    const sq_codec *c = sq_wire_raw(w) ? &def : &fixed;
    /* a plug-in ignores the other fields: print them as its codec has them */
    sq_codec plug;
    if (c->kind == SQ_KIND_PLUGIN && sq_codec_from_plugin(c->plugin, &plug) == SQ_OK) {
        plug.bits = c->bits;
        plug.group = c->group;
        plug.hadamard = c->hadamard;
        c = &plug;
    }
    if (!strcmp(field, "bits"))
        snprintf(buf, len, "%d", sq_sparse_kind(c->kind) ? c->bits : w->bits);
    else if (!strcmp(field, "kind") && c->kind == SQ_KIND_PLUGIN)
        snprintf(buf, len, "plugin:%s", sq_plugin_get(c->plugin) ? sq_plugin_get(c->plugin)->name : "?");
    else if (!strcmp(field, "kind"))
        snprintf(buf, len, "%s", kind_name(c->kind));
    else if (!strcmp(field, "keep"))
        snprintf(buf, len, "%llu", sq_kind_sparse(c->kind) ? (unsigned long long)c->keep : 0ull);
    else if (!strcmp(field, "group") && !sq_wire_raw(w) && w->rule != SQ_GROUP_FIXED)
        snprintf(buf, len, "%s", rule_names[w->rule % 3]);
    else if (!strcmp(field, "group")) snprintf(buf, len, "%llu", (unsigned long long)c->group);
    else if (!strcmp(field, "round")) snprintf(buf, len, "%s", round_names[c->round & 1]);
    else if (!strcmp(field, "hadamard")) snprintf(buf, len, "%d", c->hadamard);
    else if (!strcmp(field, "levels")) snprintf(buf, len, "%s", level_names[c->levels & 1]);
    else if (!strcmp(field, "scale")) snprintf(buf, len, "%s", scale_names[c->scale % 3]);
    else if (!strcmp(field, "ef")) snprintf(buf, len, "%d", w->ef);
    else snprintf(buf, len, "?");
}

int sq_scheme_get(const sq_scheme *s, const char *key, char *buf, size_t len)
{
    if (!strcmp(key, "weight.mode")) return snprintf(buf, len, "%s", wmode_names[s->weight_mode & 1]);
    if (!strcmp(key, "weight.recon")) /* an unquantized wire ignores it: print the default */
        return snprintf(buf, len, "%s",
                        recon_names[sq_wire_raw(&s->weight) ? SQ_RECON_BF16 : s->weight_recon & 1]);
    if (!strcmp(key, "grad.mode")) return snprintf(buf, len, "%s", gmode_names[s->grad_mode % 5]);
    if (!strcmp(key, "grad.powersgd.rank")) return snprintf(buf, len, "%d", s->psgd_rank);
    if (!strcmp(key, "grad.powersgd.warm")) return snprintf(buf, len, "%d", s->psgd_warm);
    if (!strcmp(key, "grad.powersgd.ef")) return snprintf(buf, len, "%d", s->psgd_ef);
    if (!strcmp(key, "grad.powersgd.start")) return snprintf(buf, len, "%u", (unsigned)s->psgd_start);
    if (!strcmp(key, "grad.powersgd.cols"))
        return snprintf(buf, len, "%llu", (unsigned long long)s->psgd_cols);
    if (!strcmp(key, "grad.powersgd.minrate") || !strcmp(key, "grad.powersgd.eps")) {
        int eps = key[14] == 'e';
        shortest(eps ? (double)s->psgd_eps : s->psgd_minrate, eps, buf, len);
        return (int)strlen(buf);
    }
    if (!strcmp(key, "grad.pipe")) return snprintf(buf, len, "%d", s->pipe);
    if (!strcmp(key, "grad.mean")) return snprintf(buf, len, "%d", s->grad_mean);
    if (!strcmp(key, "grad.dtype")) return snprintf(buf, len, "%s", gdtype_names[s->grad_dtype & 1]);
    if (!strcmp(key, "grad.fallback"))
        return snprintf(buf, len, "%s", fallback_names[s->grad_fallback & 1]);
    if (!strcmp(key, "layout")) return snprintf(buf, len, "%s", layout_names[s->layout & 1]);
    if (!strcmp(key, "layout.bucket"))
        return snprintf(buf, len, "%llu", (unsigned long long)s->bucket);
    if (!strncmp(key, "weight.", 7)) wire_value(&s->weight, key + 7, buf, len);
    else if (!strncmp(key, "grad.intra.", 11)) wire_value(&s->grad_intra, key + 11, buf, len);
    else if (!strncmp(key, "grad.inter.", 11)) wire_value(&s->grad_inter, key + 11, buf, len);
    else return snprintf(buf, len, "?");
    return (int)strlen(buf);
}

/* Knobs that came after runs were stored under the canonical text, and
** that print only when set: the text of every scheme without them -- and so
** the key of every stored sweep run -- stays what it was. */
static int printed_when_set(const char *key, const char *value)
{
    return (!strcmp(key, "grad.intra.ef") || !strcmp(key, "grad.inter.ef")) &&
           !strcmp(value, "0");
}

/* A wire's keep knob, where the wire is not topk or randk: left out of the
** text, so that the text of every other wire is unchanged. */
static int keep_unused(const sq_scheme *s, const char *key)
{
    size_t kl = strlen(key);
    if (kl < 5 || strcmp(key + kl - 5, ".keep")) return 0;
    const sq_wire *w = !strncmp(key, "weight.", 7)       ? &s->weight
                       : !strncmp(key, "grad.intra.", 11) ? &s->grad_intra
                                                          : &s->grad_inter;
    return sq_wire_raw(w) || !sq_kind_sparse(w->codec.kind);
}

int sq_scheme_format(const sq_scheme *s, char *buf, size_t len)
{
    size_t used = 0;
    int total = 0;
    for (size_t k = 0; k < sq_scheme_nknobs; k++) {
        char v[64];
        /* PowerSGD's knobs mean nothing to the other modes: they print only
        ** under it, so the other schemes' texts (stored run keys) stay */
        if (!strncmp(sq_scheme_knobs[k].key, "grad.powersgd.", 14) &&
            s->grad_mode != SQ_GRAD_POWERSGD)
            continue;
        if (keep_unused(s, sq_scheme_knobs[k].key)) continue;
        sq_scheme_get(s, sq_scheme_knobs[k].key, v, sizeof v);
        if (printed_when_set(sq_scheme_knobs[k].key, v)) continue;
        int n = snprintf(buf + used, used < len ? len - used : 0, "%s%s=%s", total ? "," : "",
                         sq_scheme_knobs[k].key, v);
        total += n;
        used = used + (size_t)n < len ? used + (size_t)n : len;
    }
    return total;
}
