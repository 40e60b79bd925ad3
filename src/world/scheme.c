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
#include "shardq/world.h"

#include <errno.h>
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
                                         "qgz",      "qwz"};
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
                "zeropp, zeropp8, qsdp, qgz, qwz)",
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
    }
    /* DeepSpeed's ZeRO-3 partitions parameter by parameter, and qgZ and qwZ
    ** size their groups per tensor */
    if (sq_scheme_per_tensor(s)) s->layout = SQ_LAYOUT_PARAM;
    return SQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Knobs                                                                    */
/* ------------------------------------------------------------------------ */

#define CODEC_KNOBS(prefix, what, groups, grouphelp)                                        \
    {prefix "bits", "1-8, 16 (bf16), 32 (fp32)", "bits per element of " what},             \
        {prefix "kind", "sym, minmax, qsgd, sign, fp8e4m3, fp8e5m2",                         \
         "absmax (symmetric) or min-max groups, or a compressor: QSGD (norm-scaled levels), "  \
         "scaled sign (bits 1), FP8 E4M3 or E5M2 (bits 8) per group"},                         \
        {prefix "group", groups, grouphelp},                                                \
        {prefix "round", "rtn, sr", "round to nearest even or stochastic (Philox)"},        \
        {prefix "hadamard", "0, 2-1024 (power of two)", "Hadamard size, 0 = off"},          \
        {prefix "levels", "sdp4bit, deepspeed", "qmax/absmax (sdp4bit) or 2^(b-1)/absmax"}, \
        {prefix "scale", "fp32, bf16, fp16", "dtype of scales and offsets"}

const sq_knob sq_scheme_knobs[] = {
    {"weight.mode", "direct, diff", "weights travel themselves, or their difference to w-hat"},
    CODEC_KNOBS("weight.", "the weight all-gather", "1-2^40, qwz",
                "elements per scale; qwz: DeepSpeed qwZ's block count per partition"),
    {"weight.recon", "bf16, fp32",
     "a quantized weight wire rebuilds bf16 weights (bf16 master copy, bf16 difference and "
     "add, as the reference systems) or fp32 ones; bits 16/32 ignore it (the wire's dtype "
     "is the precision)"},
    {"grad.mode", "ring, a2a, twolevel", "ring reduce-scatter, one- or two-level all-to-all"},
    CODEC_KNOBS("grad.intra.", "the intra-node hop (the only one when K = 1)", "1-2^40, qgz",
                "elements per scale; qgz: numel / max(rows, cols, N) per tensor (DeepSpeed qgZ)"),
    CODEC_KNOBS("grad.inter.", "the inter-node hop (the single level when K > 1)", "1-2^40, qgz",
                "elements per scale; qgz: numel / max(rows, cols, N) per tensor (DeepSpeed qgZ)"),
    {"grad.pipe", "1-1024", "pipeline slices of the two-level all-to-all"},
    {"grad.mean", "0, 1", "1: gradients divided by N before the reduce (a mean)"},
    {"grad.dtype", "fp32, fp16",
     "arithmetic of the gradient path; fp16 rounds the input, every decoded chunk and every "
     "partial sum to fp16 (DeepSpeed qgZ)"},
    {"grad.fallback", "none, qgz",
     "qgz: 1-D tensors, numel not a multiple of 2N and one-node worlds take the fp32 ring "
     "(DeepSpeed qgZ, per tensor)"},
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
static const char *const gmode_names[] = {"ring", "a2a", "twolevel"};
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
    } else if (!strcmp(field, "kind")) {
        if ((i = pick(val, kind_names, NKINDS)) < 0) goto bad;
        w->codec.kind = (sq_kind)i;
    } else if (!strcmp(field, "round")) {
        if ((i = pick(val, round_names, 2)) < 0) goto bad;
        w->codec.round = (sq_round)i;
    } else if (!strcmp(field, "levels")) {
        if ((i = pick(val, level_names, 2)) < 0) goto bad;
        w->codec.levels = (sq_levels)i;
    } else if (!strcmp(field, "scale")) {
        if ((i = pick(val, scale_names, 3)) < 0) goto bad;
        w->codec.scale = (sq_scale_dtype)i;
    } else {
        return SQ_ERR_ARG; /* not a wire field: the caller reports the key */
    }
    return SQ_OK;
bad:
    set_err(err, "%s=%s: unknown value (%s)", key, val,
            !strcmp(field, "kind")     ? "sym, minmax, qsgd, sign, fp8e4m3, fp8e5m2"
            : !strcmp(field, "round")  ? "rtn, sr"
            : !strcmp(field, "levels") ? "sdp4bit, deepspeed"
                                       : "fp32, bf16, fp16");
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
        if ((i = pick(val, gmode_names, 3)) < 0) goto bad;
        s->grad_mode = (sq_grad_mode)i;
        return SQ_OK;
    }
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
    char why[160];
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

int sq_scheme_validate(const sq_scheme *s, sq_error *err)
{
    int rc;
    if ((rc = check_wire(&s->weight, "weight", err)) ||
        (rc = check_wire(&s->grad_intra, "grad.intra", err)) ||
        (rc = check_wire(&s->grad_inter, "grad.inter", err)))
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
        set_err(err,
                "grad.mode=ring sums partial results at every hop and takes unquantized wires "
                "only: set grad.bits=32 or 16, or grad.mode=a2a / twolevel");
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
         a->codec.hadamard || b->codec.hadamard)) {
        set_err(err,
                "grad.dtype=fp16 is the arithmetic of qgZ's quantized all-to-all: it needs "
                "grad.mode=a2a or twolevel, quantized hops (grad.bits 1 to 8) and no Hadamard "
                "transform");
        return SQ_ERR_SPEC;
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
    ** schemes that behave alike print alike. */
    sq_codec def = sq_codec_default();
    const sq_codec *c = sq_wire_raw(w) ? &def : &w->codec;
    if (!strcmp(field, "bits")) snprintf(buf, len, "%d", w->bits);
    else if (!strcmp(field, "kind")) snprintf(buf, len, "%s", kind_name(c->kind));
    else if (!strcmp(field, "group") && !sq_wire_raw(w) && w->rule != SQ_GROUP_FIXED)
        snprintf(buf, len, "%s", rule_names[w->rule % 3]);
    else if (!strcmp(field, "group")) snprintf(buf, len, "%llu", (unsigned long long)c->group);
    else if (!strcmp(field, "round")) snprintf(buf, len, "%s", round_names[c->round & 1]);
    else if (!strcmp(field, "hadamard")) snprintf(buf, len, "%d", c->hadamard);
    else if (!strcmp(field, "levels")) snprintf(buf, len, "%s", level_names[c->levels & 1]);
    else if (!strcmp(field, "scale")) snprintf(buf, len, "%s", scale_names[c->scale % 3]);
    else snprintf(buf, len, "?");
}

int sq_scheme_get(const sq_scheme *s, const char *key, char *buf, size_t len)
{
    if (!strcmp(key, "weight.mode")) return snprintf(buf, len, "%s", wmode_names[s->weight_mode & 1]);
    if (!strcmp(key, "weight.recon")) /* an unquantized wire ignores it: print the default */
        return snprintf(buf, len, "%s",
                        recon_names[sq_wire_raw(&s->weight) ? SQ_RECON_BF16 : s->weight_recon & 1]);
    if (!strcmp(key, "grad.mode")) return snprintf(buf, len, "%s", gmode_names[s->grad_mode % 3]);
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

int sq_scheme_format(const sq_scheme *s, char *buf, size_t len)
{
    size_t used = 0;
    int total = 0;
    for (size_t k = 0; k < sq_scheme_nknobs; k++) {
        char v[64];
        sq_scheme_get(s, sq_scheme_knobs[k].key, v, sizeof v);
        int n = snprintf(buf + used, used < len ? len - used : 0, "%s%s=%s", k ? "," : "",
                         sq_scheme_knobs[k].key, v);
        total += n;
        used = used + (size_t)n < len ? used + (size_t)n : len;
    }
    return total;
}
