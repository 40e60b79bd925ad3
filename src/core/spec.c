/*
** spec.c -- codec specs: defaults, validation, the text form, exact sizes.
**
** A spec is written "key=value,key=value" with every key optional, so that a
** sweep can name only what it varies; printing it back always gives every key
** in one fixed order, so that equal codecs have equal strings in the store.
*/
#include "shardq/codec.h"
#include "sq_kinds.h"
#include "sq_sparse.h"
#include "sq_dense.h"

#include <errno.h>
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

/* The kinds' names are kinds.c's (sq_codec_kind_name); this sentence lists
** them for a person. */
#define KIND_LIST \
    "sym, minmax, qsgd, sign, fp8e4m3, fp8e5m2, topk, randk, bf16, fp16 or plugin:NAME"
static const char *const round_names[] = {"rtn", "sr"};

/* The checks shared by validate and parse, with a sentence for each. */

/* A kind of the table (sq_kinds.h) with its entry still empty: a plug-in
** id when no plug-in is registered. */
static int check_unregistered(const sq_codec *c, sq_error *err)
{
    return sq_error_set(err, SQ_ERR_SPEC, "kind=plugin: no plug-in codec has id %d (0 registered)",
                        c->plugin);
}

static int check_codec(const sq_codec *c, sq_error *err)
{
    const sq_kind_ops *ops = sq_kind_ops_of(c->kind);
    if (ops) return ops->check(c, err);
    if (c->kind == SQ_KIND_PLUGIN) return check_unregistered(c, err);
    if (sq_sparse_kind(c->kind)) return sq_sparse_check(c, err);
    if (c->kind != SQ_KIND_SYM && c->kind != SQ_KIND_MINMAX && !sq_kind_dense(c->kind))
        return sq_error_set(err, SQ_ERR_SPEC, "kind: must be " KIND_LIST);
    if (c->bits < 1 || c->bits > 8)
        return sq_error_set(err, SQ_ERR_SPEC, "bits=%d: must be 1 to 8", c->bits);
    if (c->group < 1 || c->group > SQ_GROUP_MAX)
        return sq_error_set(err, SQ_ERR_SPEC, "group=%llu: must be 1 to 2^40",
                            (unsigned long long)c->group);
    if (c->round != SQ_ROUND_RTN && c->round != SQ_ROUND_SR)
        return sq_error_set(err, SQ_ERR_SPEC, "round: must be rtn or sr");
    if (c->hadamard != 0 && (c->hadamard < 2 || c->hadamard > SQ_HADAMARD_MAX ||
                             (c->hadamard & (c->hadamard - 1)) != 0))
        return sq_error_set(err, SQ_ERR_SPEC,
                            "hadamard=%d: must be 0 (off) or a power of two from 2 to 1024",
                            c->hadamard);
    if (c->levels != SQ_LEVELS_SDP4BIT && c->levels != SQ_LEVELS_DEEPSPEED)
        return sq_error_set(err, SQ_ERR_SPEC, "levels: must be sdp4bit or deepspeed");
    if (c->scale != SQ_SCALE_FP32 && c->scale != SQ_SCALE_BF16 && c->scale != SQ_SCALE_FP16)
        return sq_error_set(err, SQ_ERR_SPEC, "scale: must be fp32, bf16 or fp16");
    if (sq_kind_dense(c->kind)) return sq_dense_check(c, err);
    if (c->kind == SQ_KIND_MINMAX && c->levels != SQ_LEVELS_SDP4BIT)
        return sq_error_set(err, SQ_ERR_SPEC, "levels=deepspeed: applies to kind=sym only");
    if (c->kind == SQ_KIND_SYM && c->levels == SQ_LEVELS_SDP4BIT && c->bits < 2)
        return sq_error_set(err, SQ_ERR_SPEC,
                            "bits=1: kind=sym with levels=sdp4bit has only the level 0 at 1 bit; "
                            "use levels=deepspeed or kind=minmax");
    return SQ_OK;
}

int sq_codec_validate(const sq_codec *c)
{
    return c ? check_codec(c, NULL) : SQ_ERR_ARG;
}

/* Parses a whole decimal unsigned value; no sign, no spaces, no suffix. */
static int parse_u64(const char *s, uint64_t *out)
{
    if (*s < '0' || *s > '9') return SQ_ERR_SPEC;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return SQ_ERR_SPEC;
    *out = v;
    return SQ_OK;
}

static int pick(const char *v, const char *const *names, int count)
{
    for (int i = 0; i < count; i++)
        if (strcmp(v, names[i]) == 0) return i;
    return SQ_ERR_NOTFOUND;
}

static const char *const level_names[] = {"sdp4bit", "deepspeed"};
static const char *const scale_names[] = {"fp32", "bf16", "fp16"};

#define KEYS "kind, bits, group, round, hadamard, levels, scale, keep"

/* Index of a key in KEYS order, or SQ_ERR_NOTFOUND. */
static int key_index(const char *key)
{
    static const char *const keys[] = {"kind",     "bits",   "group", "round",
                                       "hadamard", "levels", "scale", "keep"};
    return pick(key, keys, 8);
}

/* "kind=NAME:SUFFIX" of a kind of the table; with its entry still empty,
** no plug-in is registered. */
static int parse_table_kind(int kind, const char *suffix, sq_codec *c, sq_error *err)
{
    const sq_kind_ops *ops = sq_kind_ops_of(kind);
    if (ops) return ops->parse_name(suffix, c, err);
    return sq_error_set(err, SQ_ERR_SPEC,
                        "kind=plugin:%s: no plug-in codec of that name is registered (there are "
                        "none); load the shared object that defines it first "
                        "(SHARDQ_PLUGINS=FILE.so, or sq_plugin_load)", suffix);
}

/* One "key=value" item; the item is NUL-terminated and writable. seen has a
** bit per key already given. */
static int parse_item(char *item, sq_codec *c, unsigned *seen, sq_error *err)
{
    char *eq = strchr(item, '=');
    if (!eq)
        return sq_error_set(err, SQ_ERR_SPEC, "'%s': expected key=value (keys: " KEYS ")", item);
    *eq = '\0';
    const char *key = item, *val = eq + 1;
    if (!*val)
        return sq_error_set(err, SQ_ERR_SPEC, "%s: empty value", key);
    int k = key_index(key);
    if (k >= 0 && (*seen & (1u << k)))
        return sq_error_set(err, SQ_ERR_SPEC, "%s: given twice", key);
    if (k >= 0) *seen |= 1u << k;
    uint64_t u;
    int i;
    if (strcmp(key, "kind") == 0) {
        if (strncmp(val, "plugin:", 7) == 0)
            return parse_table_kind(SQ_KIND_PLUGIN, val + 7, c, err);
        /* a plug-in is named: kind=plugin alone is no kind */
        for (i = 0; i < SQ_KIND_PLUGIN && strcmp(val, sq_codec_kind_name(i)); i++) {
        }
        if (i == SQ_KIND_PLUGIN) goto bad_name;
        c->kind = (sq_kind)i;
    } else if (strcmp(key, "bits") == 0) {
        /* 16 and 32: the widths of the kinds that fix their own codes
        ** (sq_sparse_settle checks them against the kind) */
        if (parse_u64(val, &u) || !((u >= 1 && u <= 8) || u == 16 || u == 32))
            return sq_error_set(err, SQ_ERR_SPEC, "bits=%s: must be an integer from 1 to 8", val);
        c->bits = (int)u;
    } else if (strcmp(key, "group") == 0) {
        if (parse_u64(val, &u) || u < 1 || u > SQ_GROUP_MAX)
            return sq_error_set(err, SQ_ERR_SPEC, "group=%s: must be an integer from 1 to 2^40",
                                val);
        c->group = u;
    } else if (strcmp(key, "round") == 0) {
        if ((i = pick(val, round_names, 2)) < 0) goto bad_name;
        c->round = (sq_round)i;
    } else if (strcmp(key, "hadamard") == 0) {
        if (parse_u64(val, &u) || u > SQ_HADAMARD_MAX || u == 1 || (u & (u - 1)) != 0)
            return sq_error_set(err, SQ_ERR_SPEC,
                                "hadamard=%s: must be 0 (off) or a power of two from 2 to 1024",
                                val);
        c->hadamard = (int)u;
    } else if (strcmp(key, "levels") == 0) {
        if ((i = pick(val, level_names, 2)) < 0) goto bad_name;
        c->levels = (sq_levels)i;
    } else if (strcmp(key, "scale") == 0) {
        if ((i = pick(val, scale_names, 3)) < 0) goto bad_name;
        c->scale = (sq_scale_dtype)i;
    } else if (strcmp(key, "keep") == 0) {
        if (parse_u64(val, &u) || u < 1 || u > SQ_GROUP_MAX)
            return sq_error_set(err, SQ_ERR_SPEC, "keep=%s: must be an integer from 1 to the group",
                                val);
        c->keep = u;
    } else {
        return sq_error_set(err, SQ_ERR_SPEC, "unknown key '%s' (keys: " KEYS ")", key);
    }
    return SQ_OK;

bad_name:
    return sq_error_set(err, SQ_ERR_SPEC, "%s=%s: unknown value (%s)", key, val,
                        strcmp(key, "kind") == 0     ? KIND_LIST
                        : strcmp(key, "round") == 0  ? "rtn or sr"
                        : strcmp(key, "levels") == 0 ? "sdp4bit or deepspeed"
                                                     : "fp32, bf16 or fp16");
}

/* Keys may appear in any order; a key given twice is an error, since a sweep
** that sets a knob twice almost certainly meant something else. */
int sq_codec_parse_v2(const char *text, sq_codec *out, sq_error *err)
{
    sq_error_clear(err);
    if (!text || !out) return sq_error_set(err, SQ_ERR_ARG, "no spec given");
    sq_codec c = sq_codec_default();
    size_t len = strlen(text);
    char *buf = malloc(len + 1);
    if (!buf) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    memcpy(buf, text, len + 1);
    int rc = SQ_OK;
    unsigned seen = 0;
    if (len > 0) {
        char *item = buf;
        for (;;) {
            char *comma = strchr(item, ',');
            if (comma) *comma = '\0';
            if (!*item) {
                rc = sq_error_set(err, SQ_ERR_SPEC, "empty item in spec '%s' (stray comma?)", text);
                break;
            }
            if ((rc = parse_item(item, &c, &seen, err)) != SQ_OK) break;
            if (!comma) break;
            item = comma + 1;
        }
    }
    free(buf);
    const sq_kind_ops *ops = sq_kind_ops_of(c.kind);
    if (rc == SQ_OK && ops) rc = ops->settle(&c, seen, err);
    if (rc == SQ_OK) rc = sq_sparse_settle(&c, seen, err);
    if (rc == SQ_OK) sq_dense_defaults(&c, (seen >> 1) & 1u, (seen >> 3) & 1u); /* bits, round */
    if (rc == SQ_OK) rc = check_codec(&c, err);
    if (rc == SQ_OK) *out = c;
    return rc;
}

int sq_codec_parse(const char *text, sq_codec *out, char *err, size_t errlen)
{
    sq_error e;
    int rc = sq_codec_parse_v2(text, out, &e);
    if (rc != SQ_OK && err && errlen) snprintf(err, errlen, "%s", e.msg);
    return rc;
}

int sq_codec_format(const sq_codec *c, char *buf, size_t len)
{
    if (!c || sq_codec_validate(c) != SQ_OK) return snprintf(buf, len, "invalid");
    const sq_kind_ops *ops = sq_kind_ops_of(c->kind);
    if (ops) return ops->format(c, buf, len);
    if (sq_sparse_kind(c->kind)) {
        /* the fixed fields at their fixed values; keep for the kinds with one */
        sq_codec k = sq_sparse_canonical(c);
        int used = snprintf(buf, len,
                            "kind=%s,bits=%d,group=%llu,round=%s,hadamard=%d,levels=%s,scale=%s",
                            sq_codec_kind_name(k.kind), k.bits, (unsigned long long)k.group,
                            round_names[k.round], k.hadamard, level_names[k.levels],
                            scale_names[k.scale]);
        if (!sq_kind_sparse(k.kind)) return used;
        size_t at = (size_t)used < len ? (size_t)used : len;
        return used + snprintf(buf ? buf + at : NULL, len - at, ",keep=%llu",
                               (unsigned long long)k.keep);
    }
    return snprintf(buf, len, "kind=%s,bits=%d,group=%llu,round=%s,hadamard=%d,levels=%s,scale=%s",
                    sq_codec_kind_name(c->kind), c->bits, (unsigned long long)c->group,
                    round_names[c->round], c->hadamard, level_names[c->levels],
                    scale_names[c->scale]);
}

/* ------------------------------------------------------------------------ */
/* Sizes                                                                    */
/* ------------------------------------------------------------------------ */

/* A kind of the table (sq_kinds.h) gives its own sizes: none before its
** entry is filled. */
static int table_kind(const sq_codec *c) { return c->kind == SQ_KIND_PLUGIN; }

static uint64_t table_bytes(const sq_codec *c, uint64_t n, int part)
{
    const sq_kind_ops *ops = sq_kind_ops_of(c->kind);
    return ops ? ops->bytes(c, n, part) : 0;
}

uint64_t sq_codec_groups(const sq_codec *c, uint64_t n)
{
    if (sq_sparse_kind(c->kind)) return sq_sparse_groups(c, n);
    return n / c->group + (n % c->group != 0);
}

uint64_t sq_codec_code_bytes(const sq_codec *c, uint64_t n)
{
    if (table_kind(c)) return table_bytes(c, n, 0);
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
    if (table_kind(c)) return table_bytes(c, n, 1);
    if (sq_sparse_kind(c->kind)) return sq_sparse_scale_bytes(c, n);
    return sq_codec_groups(c, n) * scale_size(c);
}

uint64_t sq_codec_offset_bytes(const sq_codec *c, uint64_t n)
{
    if (table_kind(c)) return table_bytes(c, n, 2);
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
