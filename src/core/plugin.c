/*
** plugin.c -- the registry of plug-in codecs (shardq/plugin.h), and what
** spec.c asks of a kind=plugin codec through the table of kinds
** (sq_kinds.h, filled by codec_plugin.c): its checks, its text, its sizes.
**
** The registry is an array that only grows: an entry is written whole
** before the count that makes it visible is raised (release), and readers
** load the count (acquire), so a lookup takes no lock while another thread
** registers. Registrations take a spin lock among themselves.
**
** Sizes are asked of a plug-in once per unit of lcm(group, 8) elements, at
** registration, where they are checked to be additive; the size of n
** elements is then (n / unit) times the unit's plus the size of the
** remainder, so the callback is only called for a partial unit.
*/
#include "sq_plugin.h"
#include "sq_hd.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    sq_plugin_codec d;      /* the copy; its strings point to those below */
    char name[SQ_PLUGIN_NAME_MAX + 1];
    char *about, *params, *source;
    uint64_t unit;          /* lcm(group, 8) */
    uint64_t unit_bytes[3]; /* sizes(unit) */
} entry;

static entry registry[SQ_PLUGIN_MAX];
static atomic_int registered;
static atomic_flag registering = ATOMIC_FLAG_INIT;

static const entry *entry_of(int id)
{
    int n = atomic_load_explicit(&registered, memory_order_acquire);
    return id >= 1 && id <= n ? &registry[id - 1] : NULL;
}

/* ------------------------------------------------------------------------ */
/* Registering                                                              */
/* ------------------------------------------------------------------------ */

static int valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > SQ_PLUGIN_NAME_MAX || !(s[0] >= 'a' && s[0] <= 'z')) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_')) return 0;
    return 1;
}

static char *dup_or_null(const char *s, int *oom)
{
    if (!s) return NULL;
    char *d = strdup(s);
    if (!d) *oom = 1;
    return d;
}

/* The checks that need the configured copy: the group, the flags, and the
** sizes' additivity over whole units (which the world's addressing of a
** packed buffer by prefix sizes relies on). */
static int check_entry(entry *e, sq_error *err)
{
    sq_plugin_codec *d = &e->d;
    if (d->group < 1 || d->group > SQ_GROUP_MAX)
        return sq_error_set(err, SQ_ERR_SPEC, "plug-in codec %s: group=%llu: must be 1 to 2^40",
                            e->name, (unsigned long long)d->group);
    if ((d->stochastic != 0 && d->stochastic != 1) ||
        (d->sum_composes != 0 && d->sum_composes != 1))
        return sq_error_set(err, SQ_ERR_SPEC,
                            "plug-in codec %s: stochastic and sum_composes must be 0 or 1",
                            e->name);
    if (d->sum_composes && !d->combine)
        return sq_error_set(err, SQ_ERR_SPEC,
                            "plug-in codec %s: sum_composes=1 needs a combine callback", e->name);
    e->unit = sq_hd_lcm_u64(d->group, 8, NULL);
    uint64_t zero[3] = {1, 1, 1};
    d->sizes(d->ctx, 0, zero);
    d->sizes(d->ctx, e->unit, e->unit_bytes);
    if (zero[0] || zero[1] || zero[2])
        return sq_error_set(err, SQ_ERR_SPEC,
                            "plug-in codec %s: sizes of 0 elements are %llu, %llu, %llu bytes "
                            "(must be 0)",
                            e->name, (unsigned long long)zero[0], (unsigned long long)zero[1],
                            (unsigned long long)zero[2]);
    if (!(e->unit_bytes[0] | e->unit_bytes[1] | e->unit_bytes[2]))
        return sq_error_set(err, SQ_ERR_SPEC,
                            "plug-in codec %s: sizes of %llu elements are all 0 bytes", e->name,
                            (unsigned long long)e->unit);
    static const uint64_t ks[] = {2, 3, 5};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        uint64_t b[3], n = ks[i] * e->unit;
        d->sizes(d->ctx, n, b);
        for (int p = 0; p < 3; p++)
            if (b[p] != ks[i] * e->unit_bytes[p])
                return sq_error_set(
                    err, SQ_ERR_SPEC,
                    "plug-in codec %s: sizes are not additive over whole units of "
                    "lcm(group, 8) = %llu elements: %s of %llu elements are %llu bytes, "
                    "%llu times those of %llu",
                    e->name, (unsigned long long)e->unit,
                    p == 0 ? "codes" : p == 1 ? "scales" : "offsets", (unsigned long long)n,
                    (unsigned long long)b[p], (unsigned long long)ks[i],
                    (unsigned long long)e->unit);
    }
    return SQ_OK;
}

/* The descriptor's configure, called the way its version says. */
static int configure(entry *e, sq_error *ce)
{
    if (e->d.abi == SQ_PLUGIN_ABI_V1) {
        int rc = e->d.configure_v1(&e->d, e->params, ce->msg, sizeof ce->msg);
        ce->msg[sizeof ce->msg - 1] = '\0';
        return rc;
    }
    ce->status = SQ_OK;
    return e->d.configure(&e->d, e->params, ce);
}

/* Fills the entry after the last from codec, under the lock. */
static int add_entry(const sq_plugin_codec *codec, const char *source, sq_error *err)
{
    const char *name = codec->name;
    int n = atomic_load_explicit(&registered, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (!strcmp(registry[i].name, name))
            return sq_error_set(err, SQ_ERR_CONFLICT,
                                "plug-in codec %s: a codec of that name is already registered "
                                "(from %s)", name,
                                registry[i].source ? registry[i].source : "this program");
    if (n == SQ_PLUGIN_MAX)
        return sq_error_set(err, SQ_ERR_NOMEM,
                            "plug-in codec %s: the registry is full (%d codecs)", name,
                            SQ_PLUGIN_MAX);
    entry *e = &registry[n];
    memset(e, 0, sizeof *e);
    e->d = *codec;
    snprintf(e->name, sizeof e->name, "%s", name);
    int oom = 0;
    e->about = dup_or_null(codec->about, &oom);
    e->params = dup_or_null(codec->params, &oom);
    e->source = dup_or_null(source, &oom);
    e->d.name = e->name;
    e->d.about = e->about;
    e->d.params = e->params;
    int rc = SQ_OK;
    sq_error ce = {0};
    if (oom) {
        rc = sq_error_set(err, SQ_ERR_NOMEM, "plug-in codec %s: out of memory", name);
    } else if (e->d.configure && (rc = configure(e, &ce)) != 0) {
        if (rc > 0 || rc < SQ_ERR_INTERRUPTED) rc = SQ_ERR_SPEC;
        rc = sq_error_set(err, rc, "plug-in codec %s: params '%s': %s", name,
                          e->params ? e->params : "", ce.msg[0] ? ce.msg : sq_strerror(rc));
    } else {
        rc = check_entry(e, err);
    }
    /* configure may not rename the codec, change its version nor drop a
    ** callback */
    e->d.name = e->name;
    e->d.abi = codec->abi;
    if (rc == SQ_OK && (!e->d.encode || !e->d.decode || !e->d.sizes))
        rc = sq_error_set(err, SQ_ERR_SPEC, "plug-in codec %s: configure removed a callback", name);
    if (rc != SQ_OK) {
        free(e->about), free(e->params), free(e->source);
        memset(e, 0, sizeof *e);
        return rc;
    }
    atomic_store_explicit(&registered, n + 1, memory_order_release);
    return n + 1;
}

int sq_plugin_add(const sq_plugin_codec *codec, const char *source, sq_error *err)
{
    sq_error_clear(err);
    if (!codec) return sq_error_set(err, SQ_ERR_ARG, "no plug-in codec given");
    const char *name = codec->name ? codec->name : "(unnamed)";
    if (codec->abi != SQ_PLUGIN_ABI && codec->abi != SQ_PLUGIN_ABI_V1)
        return sq_error_set(err, SQ_ERR_SPEC,
                            "plug-in codec %s%s%s: interface version %u, this libshardq speaks "
                            "version %d (rebuild it against this shardq/plugin.h)",
                            name, source ? " from " : "", source ? source : "",
                            (unsigned)codec->abi, SQ_PLUGIN_ABI);
    if (!codec->name || !valid_name(codec->name))
        return sq_error_set(err, SQ_ERR_SPEC,
                            "plug-in codec '%.64s': a name is 1 to %d of a-z, 0-9 and _, "
                            "starting with a letter", name, SQ_PLUGIN_NAME_MAX);
    if (!codec->encode || !codec->decode || !codec->sizes)
        return sq_error_set(err, SQ_ERR_SPEC,
                            "plug-in codec %s: encode, decode and sizes are required (%s%s%s "
                            "missing)", name, codec->encode ? "" : "encode ",
                            codec->decode ? "" : "decode ", codec->sizes ? "" : "sizes ");
    while (atomic_flag_test_and_set_explicit(&registering, memory_order_acquire)) {
    }
    int rc = add_entry(codec, source, err);
    atomic_flag_clear_explicit(&registering, memory_order_release);
    return rc;
}

int sq_plugin_find(const char *name)
{
    int n = atomic_load_explicit(&registered, memory_order_acquire);
    for (int i = 0; name && i < n; i++)
        if (!strcmp(registry[i].name, name)) return i + 1;
    return SQ_ERR_NOTFOUND;
}

int sq_plugin_count(void) { return atomic_load_explicit(&registered, memory_order_acquire); }

const sq_plugin_codec *sq_plugin_get(int id)
{
    const entry *e = entry_of(id);
    return e ? &e->d : NULL;
}

const char *sq_plugin_source(int id)
{
    const entry *e = entry_of(id);
    return e ? e->source : NULL;
}

/* The fields a plug-in ignores, at their defaults: equal codecs compare
** equal field by field. */
static void plugin_codec(const entry *e, int id, sq_codec *c)
{
    *c = sq_codec_default();
    c->kind = SQ_KIND_PLUGIN;
    c->plugin = id;
    c->group = e->d.group;
    c->round = e->d.stochastic ? SQ_ROUND_SR : SQ_ROUND_RTN;
}

int sq_codec_from_plugin(int id, sq_codec *out)
{
    const entry *e = entry_of(id);
    if (!e || !out) return e ? SQ_ERR_ARG : SQ_ERR_NOTFOUND;
    plugin_codec(e, id, out);
    return SQ_OK;
}

const sq_plugin_codec *sq_plugin_of(const sq_codec *c)
{
    return c->kind == SQ_KIND_PLUGIN ? sq_plugin_get(c->plugin) : NULL;
}

/* ------------------------------------------------------------------------ */
/* What spec.c asks (through the table of kinds)                            */
/* ------------------------------------------------------------------------ */

int sq_plugin_check(const sq_codec *c, sq_error *err)
{
    const entry *e = entry_of(c->plugin);
    if (!e)
        return sq_error_set(err, SQ_ERR_SPEC, "kind=plugin: no plug-in codec has id %d (%d "
                            "registered)", c->plugin, sq_plugin_count());
    if (c->group != e->d.group)
        return sq_error_set(err, SQ_ERR_SPEC, "group=%llu: plug-in codec %s has group %llu (set "
                            "when it is registered)", (unsigned long long)c->group, e->name,
                            (unsigned long long)e->d.group);
    if (c->hadamard)
        return sq_error_set(err, SQ_ERR_SPEC, "hadamard=%d: kind=plugin:%s takes no Hadamard "
                            "transform", c->hadamard, e->name);
    return SQ_OK;
}

/* kind=plugin:NAME takes group (the plug-in's own, given in any order)
** and no other key: a plug-in's settings are its registration parameters. */
int sq_plugin_settle(sq_codec *c, unsigned seen, sq_error *err)
{
    static const char *const keys[] = {"kind",     "bits",   "group", "round",
                                       "hadamard", "levels", "scale", "keep"};
    const entry *e = entry_of(c->plugin);
    for (int k = 0; k < 8; k++)
        if ((seen & (1u << k)) && strcmp(keys[k], "kind") && strcmp(keys[k], "group"))
            return sq_error_set(err, SQ_ERR_SPEC, "%s: kind=plugin:%s takes no %s (a plug-in "
                                "codec's settings are the parameters it is registered with)",
                                keys[k], e ? e->name : "?", keys[k]);
    uint64_t group = c->group;
    sq_codec_from_plugin(c->plugin, c);
    if (seen & (1u << 2)) c->group = group; /* checked against the plug-in's */
    return SQ_OK;
}

int sq_plugin_parse_kind(const char *name, sq_codec *c, sq_error *err)
{
    int id = sq_plugin_find(name);
    if (id < 0) {
        char known[160] = "";
        size_t used = 0;
        int n = sq_plugin_count();
        for (int i = 0; i < n && used < sizeof known; i++)
            used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "",
                                     registry[i].name);
        return sq_error_set(err, SQ_ERR_SPEC,
                            "kind=plugin:%s: no plug-in codec of that name is registered (%s%s); "
                            "load the shared object that defines it first "
                            "(SHARDQ_PLUGINS=FILE.so, or sq_plugin_load)",
                            name, n ? "registered: " : "there are none", known);
    }
    plugin_codec(entry_of(id), id, c);
    return SQ_OK;
}

int sq_plugin_format(const sq_codec *c, char *buf, size_t len)
{
    const entry *e = entry_of(c->plugin);
    return snprintf(buf, len, "kind=plugin:%s,group=%llu", e ? e->name : "?",
                    (unsigned long long)c->group);
}

uint64_t sq_plugin_bytes(const sq_codec *c, uint64_t n, int part)
{
    const entry *e = entry_of(c->plugin);
    if (!e) return 0;
    uint64_t rest[3] = {0, 0, 0};
    if (n % e->unit) e->d.sizes(e->d.ctx, n % e->unit, rest);
    return n / e->unit * e->unit_bytes[part] + rest[part];
}
