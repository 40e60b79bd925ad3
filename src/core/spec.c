/*
** spec.c -- codec specs: defaults, validation, the text form, exact sizes.
**
** A spec is written "key=value,key=value" with every key optional, so that a
** sweep can name only what it varies; printing it back always gives every key
** in one fixed order, so that equal codecs have equal strings in the store.
*/
#include "shardq/codec.h"
#include "sq_plugin.h"
#include "sq_sparse.h"
#include "sq_dense.h"
#include "sq_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sq_codec sq_codec_default(void)
{
    sq_codec c;
    c.kind = SQ_KIND_SYM;
    c.bits = 4;
    c.group = 128;
    c.round = SQ_ROUND_SR;
    c.hadamard = 0;
    c.levels = SQ_LEVELS_SDP4BIT;
    c.scale = SQ_SCALE_FP32;
    c.keep = 0;
    c.plugin = 0;
    return c;
}

#define set_err sq_errbuf_printf

/* The kinds in enum order (shardq/codec.h); a plugin is written
** kind=plugin:NAME. */
static const char *const kind_names[] = {"sym",     "minmax", "qsgd",  "sign",
                                         "fp8e4m3", "fp8e5m2", "topk", "randk",
                                         "bf16",    "fp16",    "plugin"};
#define NKINDS ((int)(sizeof kind_names / sizeof kind_names[0]))
#define KIND_LIST \
    "sym, minmax, qsgd, sign, fp8e4m3, fp8e5m2, topk, randk, bf16, fp16 or plugin:NAME"
static const char *const round_names[] = {"rtn", "sr"};

/* The checks shared by validate and parse, with a sentence for each. */

static int check_codec(const sq_codec *c, char *err, size_t errlen)
{
    if (c->kind == SQ_KIND_PLUGIN) return sq_plugin_check(c, err, errlen);
    if (sq_sparse_kind(c->kind)) return sq_sparse_check(c, err, errlen);
    if (c->kind != SQ_KIND_SYM && c->kind != SQ_KIND_MINMAX && !sq_kind_dense(c->kind)) {
        set_err(err, errlen, "kind: must be " KIND_LIST);
        return SQ_ERR_SPEC;
    }
    if (c->bits < 1 || c->bits > 8) {
        set_err(err, errlen, "bits=%d: must be 1 to 8", c->bits);
        return SQ_ERR_SPEC;
    }
    if (c->group < 1 || c->group > SQ_GROUP_MAX) {
        set_err(err, errlen, "group=%llu: must be 1 to 2^40", (unsigned long long)c->group);
        return SQ_ERR_SPEC;
    }
    if (c->round != SQ_ROUND_RTN && c->round != SQ_ROUND_SR) {
        set_err(err, errlen, "round: must be rtn or sr");
        return SQ_ERR_SPEC;
    }
    if (c->hadamard != 0 && (c->hadamard < 2 || c->hadamard > SQ_HADAMARD_MAX ||
                             (c->hadamard & (c->hadamard - 1)) != 0)) {
        set_err(err, errlen, "hadamard=%d: must be 0 (off) or a power of two from 2 to 1024",
                c->hadamard);
        return SQ_ERR_SPEC;
    }
    if (c->levels != SQ_LEVELS_SDP4BIT && c->levels != SQ_LEVELS_DEEPSPEED) {
        set_err(err, errlen, "levels: must be sdp4bit or deepspeed");
        return SQ_ERR_SPEC;
    }
    if (c->scale != SQ_SCALE_FP32 && c->scale != SQ_SCALE_BF16 && c->scale != SQ_SCALE_FP16) {
        set_err(err, errlen, "scale: must be fp32, bf16 or fp16");
        return SQ_ERR_SPEC;
    }
    if (sq_kind_dense(c->kind)) return sq_dense_check(c, err, errlen);
    if (c->kind == SQ_KIND_MINMAX && c->levels != SQ_LEVELS_SDP4BIT) {
        set_err(err, errlen, "levels=deepspeed: applies to kind=sym only");
        return SQ_ERR_SPEC;
    }
    if (c->kind == SQ_KIND_SYM && c->levels == SQ_LEVELS_SDP4BIT && c->bits < 2) {
        set_err(err, errlen, "bits=1: kind=sym with levels=sdp4bit has only the level 0 at 1 bit; "
                             "use levels=deepspeed or kind=minmax");
        return SQ_ERR_SPEC;
    }
    return SQ_OK;
}

int sq_codec_validate(const sq_codec *c)
{
    return c ? check_codec(c, NULL, 0) : SQ_ERR_ARG;
}

/* Parses a whole decimal unsigned value; no sign, no spaces, no suffix. */
static int parse_u64(const char *s, uint64_t *out)
{
    if (*s < '0' || *s > '9') return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

static int pick(const char *v, const char *const *names, int count)
{
    for (int i = 0; i < count; i++)
        if (strcmp(v, names[i]) == 0) return i;
    return -1;
}

static const char *const level_names[] = {"sdp4bit", "deepspeed"};
static const char *const scale_names[] = {"fp32", "bf16", "fp16"};

#define KEYS "kind, bits, group, round, hadamard, levels, scale, keep"

/* Index of a key in KEYS order, or -1. */
static int key_index(const char *key)
{
    static const char *const keys[] = {"kind",     "bits",   "group", "round",
                                       "hadamard", "levels", "scale", "keep"};
    return pick(key, keys, 8);
}

/* One "key=value" item; the item is NUL-terminated and writable. seen has a
** bit per key already given. */
static int parse_item(char *item, sq_codec *c, unsigned *seen, char *err, size_t errlen)
{
    char *eq = strchr(item, '=');
    if (!eq) {
        set_err(err, errlen, "'%s': expected key=value (keys: " KEYS ")", item);
        return SQ_ERR_SPEC;
    }
    *eq = '\0';
    const char *key = item, *val = eq + 1;
    if (!*val) {
        set_err(err, errlen, "%s: empty value", key);
        return SQ_ERR_SPEC;
    }
    int k = key_index(key);
    if (k >= 0 && (*seen & (1u << k))) {
        set_err(err, errlen, "%s: given twice", key);
        return SQ_ERR_SPEC;
    }
    if (k >= 0) *seen |= 1u << k;
    uint64_t u;
    int i;
    if (strcmp(key, "kind") == 0) {
        if (strncmp(val, "plugin:", 7) == 0) return sq_plugin_parse_kind(val + 7, c, err, errlen);
        /* a plug-in is named: kind=plugin alone is no kind */
        if ((i = pick(val, kind_names, SQ_KIND_PLUGIN)) < 0) goto bad_name;
        c->kind = (sq_kind)i;
    } else if (strcmp(key, "bits") == 0) {
        /* 16 and 32: the widths of the kinds that fix their own codes
        ** (sq_sparse_settle checks them against the kind) */
        if (parse_u64(val, &u) || !((u >= 1 && u <= 8) || u == 16 || u == 32)) {
            set_err(err, errlen, "bits=%s: must be an integer from 1 to 8", val);
            return SQ_ERR_SPEC;
        }
        c->bits = (int)u;
    } else if (strcmp(key, "group") == 0) {
        if (parse_u64(val, &u) || u < 1 || u > SQ_GROUP_MAX) {
            set_err(err, errlen, "group=%s: must be an integer from 1 to 2^40", val);
            return SQ_ERR_SPEC;
        }
        c->group = u;
    } else if (strcmp(key, "round") == 0) {
        if ((i = pick(val, round_names, 2)) < 0) goto bad_name;
        c->round = (sq_round)i;
    } else if (strcmp(key, "hadamard") == 0) {
        if (parse_u64(val, &u) || u > SQ_HADAMARD_MAX || u == 1 || (u & (u - 1)) != 0) {
            set_err(err, errlen, "hadamard=%s: must be 0 (off) or a power of two from 2 to 1024",
                    val);
            return SQ_ERR_SPEC;
        }
        c->hadamard = (int)u;
    } else if (strcmp(key, "levels") == 0) {
        if ((i = pick(val, level_names, 2)) < 0) goto bad_name;
        c->levels = (sq_levels)i;
    } else if (strcmp(key, "scale") == 0) {
        if ((i = pick(val, scale_names, 3)) < 0) goto bad_name;
        c->scale = (sq_scale_dtype)i;
    } else if (strcmp(key, "keep") == 0) {
        if (parse_u64(val, &u) || u < 1 || u > SQ_GROUP_MAX) {
            set_err(err, errlen, "keep=%s: must be an integer from 1 to the group", val);
            return SQ_ERR_SPEC;
        }
        c->keep = u;
    } else {
        set_err(err, errlen, "unknown key '%s' (keys: " KEYS ")", key);
        return SQ_ERR_SPEC;
    }
    return SQ_OK;

bad_name:
    set_err(err, errlen, "%s=%s: unknown value (%s)", key, val,
            strcmp(key, "kind") == 0     ? "sym, minmax, qsgd, sign, fp8e4m3, fp8e5m2, topk, "
                                           "randk, bf16, fp16 or plugin:NAME"
            : strcmp(key, "round") == 0  ? "rtn or sr"
            : strcmp(key, "levels") == 0 ? "sdp4bit or deepspeed"
                                         : "fp32, bf16 or fp16");
    return SQ_ERR_SPEC;
}

/* kind=plugin:NAME takes group (the plug-in's own, given in any order)
** and no other key: a plug-in's settings are its registration parameters. */
static int plugin_keys(sq_codec *c, unsigned seen, char *err, size_t errlen)
{
    static const char *const keys[] = {"kind",     "bits",   "group", "round",
                                       "hadamard", "levels", "scale", "keep"};
    for (int k = 0; k < 8; k++)
        if ((seen & (1u << k)) && strcmp(keys[k], "kind") && strcmp(keys[k], "group")) {
            set_err(err, errlen, "%s: kind=plugin:%s takes no %s (a plug-in codec's settings "
                    "are the parameters it is registered with)", keys[k],
                    sq_plugin_get(c->plugin)->name, keys[k]);
            return SQ_ERR_SPEC;
        }
    uint64_t group = c->group;
    sq_codec_from_plugin(c->plugin, c);
    if (seen & (1u << 2)) c->group = group; /* checked against the plug-in's */
    return SQ_OK;
}

/* Keys may appear in any order; a key given twice is an error, since a sweep
** that sets a knob twice almost certainly meant something else. */
int sq_codec_parse(const char *text, sq_codec *out, char *err, size_t errlen)
{
    if (!text || !out) {
        set_err(err, errlen, "no spec given");
        return SQ_ERR_ARG;
    }
    sq_codec c = sq_codec_default();
    size_t len = strlen(text);
    char *buf = malloc(len + 1);
    if (!buf) {
        set_err(err, errlen, "out of memory");
        return SQ_ERR_NOMEM;
    }
    memcpy(buf, text, len + 1);
    int rc = SQ_OK;
    unsigned seen = 0;
    if (len > 0) {
        char *item = buf;
        for (;;) {
            char *comma = strchr(item, ',');
            if (comma) *comma = '\0';
            if (!*item) {
                set_err(err, errlen, "empty item in spec '%s' (stray comma?)", text);
                rc = SQ_ERR_SPEC;
                break;
            }
            if ((rc = parse_item(item, &c, &seen, err, errlen)) != SQ_OK) break;
            if (!comma) break;
            item = comma + 1;
        }
    }
    free(buf);
    if (rc == SQ_OK && c.kind == SQ_KIND_PLUGIN) rc = plugin_keys(&c, seen, err, errlen);
    if (rc == SQ_OK) rc = sq_sparse_settle(&c, seen, err, errlen);
    if (rc == SQ_OK) sq_dense_defaults(&c, (seen >> 1) & 1u, (seen >> 3) & 1u); /* bits, round */
    if (rc == SQ_OK) rc = check_codec(&c, err, errlen);
    if (rc == SQ_OK) *out = c;
    return rc;
}

int sq_codec_format(const sq_codec *c, char *buf, size_t len)
{
    if (!c || sq_codec_validate(c) != SQ_OK) return snprintf(buf, len, "invalid");
    if (c->kind == SQ_KIND_PLUGIN) return sq_plugin_format(c, buf, len);
    if (sq_sparse_kind(c->kind)) {
        /* the fixed fields at their fixed values; keep for the kinds with one */
        sq_codec k = sq_sparse_canonical(c);
        int used = snprintf(buf, len,
                            "kind=%s,bits=%d,group=%llu,round=%s,hadamard=%d,levels=%s,scale=%s",
                            kind_names[k.kind], k.bits, (unsigned long long)k.group,
                            round_names[k.round], k.hadamard, level_names[k.levels],
                            scale_names[k.scale]);
        if (!sq_kind_sparse(k.kind)) return used;
        size_t at = (size_t)used < len ? (size_t)used : len;
        return used + snprintf(buf ? buf + at : NULL, len - at, ",keep=%llu",
                               (unsigned long long)k.keep);
    }
    return snprintf(buf, len, "kind=%s,bits=%d,group=%llu,round=%s,hadamard=%d,levels=%s,scale=%s",
                    kind_names[c->kind], c->bits, (unsigned long long)c->group,
                    round_names[c->round], c->hadamard, level_names[c->levels],
                    scale_names[c->scale]);
}

/* ------------------------------------------------------------------------ */
/* Sizes                                                                    */
/* ------------------------------------------------------------------------ */

uint64_t sq_codec_groups(const sq_codec *c, uint64_t n)
{
    if (sq_sparse_kind(c->kind)) return sq_sparse_groups(c, n);
    return n / c->group + (n % c->group != 0);
}

uint64_t sq_codec_code_bytes(const sq_codec *c, uint64_t n)
{
    if (c->kind == SQ_KIND_PLUGIN) return sq_plugin_bytes(c, n, 0);
    if (sq_sparse_kind(c->kind)) return sq_sparse_code_bytes(c, n);
    /* n * bits / 8 without overflow for any n < 2^64 */
    uint64_t whole = (n / 8) * (uint64_t)c->bits;
    return whole + ((n % 8) * (uint64_t)c->bits + 7) / 8;
}

static uint64_t scale_size(const sq_codec *c)
{
    return c->scale == SQ_SCALE_FP32 ? 4 : 2;
}

uint64_t sq_codec_scale_bytes(const sq_codec *c, uint64_t n)
{
    if (c->kind == SQ_KIND_PLUGIN) return sq_plugin_bytes(c, n, 1);
    if (sq_sparse_kind(c->kind)) return sq_sparse_scale_bytes(c, n);
    return sq_codec_groups(c, n) * scale_size(c);
}

uint64_t sq_codec_offset_bytes(const sq_codec *c, uint64_t n)
{
    if (c->kind == SQ_KIND_PLUGIN) return sq_plugin_bytes(c, n, 2);
    return c->kind == SQ_KIND_MINMAX ? sq_codec_scale_bytes(c, n) : 0;
}

uint64_t sq_codec_bytes(const sq_codec *c, uint64_t n)
{
    return sq_codec_code_bytes(c, n) + sq_codec_scale_bytes(c, n) + sq_codec_offset_bytes(c, n);
}

double sq_codec_bits_per_element(const sq_codec *c, uint64_t n)
{
    return n ? 8.0 * (double)sq_codec_bytes(c, n) / (double)n : 0.0;
}
