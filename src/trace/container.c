/*
** container.c -- writing and reading the shardq.codec/1 container. See
** container.h.
*/
#include "shardq/trace.h"
#include "sq_sparse.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sq_container_free(sq_container *c)
{
    if (!c) return;
    sq_qbuf_free(&c->q);
    memset(c, 0, sizeof *c);
}

/* A plug-in's scales and offsets are bytes of its own layout: U8 tensors
** of its sizes, offsets always present (maybe empty). */
static int plugin_kind(const sq_codec *c) { return c->kind == SQ_KIND_PLUGIN; }

static int has_offsets(const sq_codec *c) { return c->kind == SQ_KIND_MINMAX || plugin_kind(c); }


static sq_st_dtype scale_dtype(const sq_codec *c)
{
    if (plugin_kind(c)) return SQ_ST_U8;
    return c->scale == SQ_SCALE_FP32   ? SQ_ST_F32
           : c->scale == SQ_SCALE_BF16 ? SQ_ST_BF16
                                       : SQ_ST_F16;
}

/* Values of the scales (and offsets) tensors: one per group, but for topk
** and randk one per kept element, none for a cast, and a plug-in's bytes. */
static uint64_t meta_count(const sq_codec *c, uint64_t n)
{
    if (plugin_kind(c)) return sq_codec_scale_bytes(c, n);
    return sq_codec_scale_bytes(c, n) / (c->scale == SQ_SCALE_FP32 ? 4 : 2);
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                  */
/* ------------------------------------------------------------------------ */

int sq_container_write(const char *path, const sq_container *c, sq_error *err)
{
    const char *name = path ? path : "(null)";
    if (!c || c->ndim < 0 || c->ndim > SQ_NPY_MAXDIM)
        return sq_error_set(err, SQ_ERR_ARG, "%s: no container, or a shape of %d dimensions", name,
                            c ? c->ndim : 0);
    /* the fields a kind ignores as its text form prints them */
    const sq_codec kc = sq_sparse_canonical(&c->codec);
    const sq_codec *k = &kc;
    uint64_t n = c->n;
    sq_st_tensor t[3];
    memset(t, 0, sizeof t);
    t[0].name = "codes";
    t[0].dtype = SQ_ST_U8;
    t[0].ndim = 1;
    t[0].shape[0] = sq_codec_code_bytes(k, n);
    t[0].data = c->q.codes;
    t[1].name = "scales";
    t[1].dtype = scale_dtype(k);
    t[1].ndim = 1;
    t[1].shape[0] = meta_count(k, n);
    t[1].data = c->q.scales;
    size_t nt = 2;
    if (has_offsets(k)) {
        t[2] = t[1];
        t[2].name = "offsets";
        if (plugin_kind(k)) t[2].shape[0] = sq_codec_offset_bytes(k, n);
        t[2].data = c->q.offsets;
        nt = 3;
    }
    char spec[SQ_CODEC_STRLEN], shape[SQ_NPY_MAXDIM * 24 + 8], sn[24], sseed[24], sstep[24],
        sworker[24], ssite[24];
    sq_codec_format(k, spec, sizeof spec);
    sq_npy_shape_str(c->shape, c->ndim, shape, sizeof shape);
    snprintf(sn, sizeof sn, "%llu", (unsigned long long)n);
    snprintf(sseed, sizeof sseed, "%llu", (unsigned long long)c->key.seed);
    snprintf(sstep, sizeof sstep, "%llu", (unsigned long long)c->key.step);
    snprintf(sworker, sizeof sworker, "%llu", (unsigned long long)c->key.worker);
    snprintf(ssite, sizeof ssite, "%llu", (unsigned long long)c->key.site);
    const sq_st_kv meta[] = {
        {"format", SQ_CONTAINER_FORMAT},
        {"codec", spec},
        {"n", sn},
        {"shape", shape},
        {"seed", sseed},
        {"step", sstep},
        {"worker", sworker},
        {"site", ssite},
        {"shardq_version", SHARDQ_VERSION_STRING},
    };
    return sq_st_write(path, t, nt, meta, sizeof meta / sizeof *meta, err);
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                  */
/* ------------------------------------------------------------------------ */

/* A metadata value that is a plain decimal unsigned integer. */
static int meta_u64(const char *s, uint64_t *out)
{
    if (!s || !(*s >= '0' && *s <= '9') || (s[0] == '0' && s[1])) return SQ_ERR_FORMAT;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return SQ_ERR_FORMAT;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) return SQ_ERR_FORMAT;
        v = 10 * v + d;
    }
    *out = v;
    return SQ_OK;
}

/* "[3, 4]" -> shape; "[]" is a scalar. */
static int parse_shape_meta(const char *s, uint64_t *shape, int *ndim)
{
    int nd = 0;
    while (*s == ' ') s++;
    if (*s++ != '[') return SQ_ERR_FORMAT;
    while (*s == ' ') s++;
    if (*s == ']') {
        s++;
    } else {
        for (;;) {
            if (nd == SQ_NPY_MAXDIM || !(*s >= '0' && *s <= '9')) return SQ_ERR_FORMAT;
            uint64_t v = 0;
            while (*s >= '0' && *s <= '9') {
                unsigned d = (unsigned)(*s - '0');
                if (v > (UINT64_MAX - d) / 10) return SQ_ERR_FORMAT;
                v = 10 * v + d;
                s++;
            }
            shape[nd++] = v;
            while (*s == ' ') s++;
            if (*s == ']') {
                s++;
                break;
            }
            if (*s++ != ',') return SQ_ERR_FORMAT;
            while (*s == ' ') s++;
        }
    }
    while (*s == ' ') s++;
    if (*s) return SQ_ERR_FORMAT;
    *ndim = nd;
    return SQ_OK;
}

/* Checks one tensor of the file against the codec. */
static int check_tensor(const char *path, const sq_st_file *f, const char *name,
                        sq_st_dtype want_dtype, uint64_t want_n, const char *spec, uint64_t n,
                        const sq_st_entry **out, sq_error *err)
{
    const sq_st_entry *e = sq_st_find(f, name);
    if (!e)
        return sq_error_set(err, SQ_ERR_FORMAT, "%s: tensor '%s': missing (codec %s needs it)",
                            path, name, spec);
    if (e->dtype != want_dtype)
        return sq_error_set(err, SQ_ERR_FORMAT, "%s: tensor '%s': dtype %s, codec %s needs %s",
                            path, name, sq_st_dtype_name(e->dtype), spec,
                            sq_st_dtype_name(want_dtype));
    if (e->ndim != 1)
        return sq_error_set(err, SQ_ERR_FORMAT, "%s: tensor '%s': %d dimensions, expected 1", path,
                            name, e->ndim);
    if (e->nelem != want_n)
        return sq_error_set(err, SQ_ERR_FORMAT,
                            "%s: tensor '%s': %llu values, codec %s for n=%llu needs %llu", path,
                            name, (unsigned long long)e->nelem, spec, (unsigned long long)n,
                            (unsigned long long)want_n);
    *out = e;
    return SQ_OK;
}

/* Refuses a scales or offsets tensor holding NaN or Inf (a damaged or
** hand-edited file), naming the tensor and the group: decoding it would
** only produce non-finite output. */
static int check_meta_finite(const char *path, const char *name, const sq_codec *c,
                             const void *data, uint64_t groups, sq_error *err)
{
    for (uint64_t g = 0; g < groups; g++) {
        float v;
        if (c->scale == SQ_SCALE_FP32) {
            memcpy(&v, (const uint8_t *)data + 4 * g, 4);
        } else {
            uint16_t h;
            memcpy(&h, (const uint8_t *)data + 2 * g, 2);
            v = c->scale == SQ_SCALE_BF16 ? sq_bf16_to_f32(h) : sq_f16_to_f32(h);
        }
        if (!isfinite(v))
            return sq_error_set(err, SQ_ERR_NONFINITE, "%s: tensor '%s': group %llu is %s", path,
                                name, (unsigned long long)g, isnan(v) ? "NaN" : "infinite");
    }
    return SQ_OK;
}

/* The header fields of f (format, codec, n, shape, key) into *out. */
static int read_fields(const char *path, const sq_st_file *f, sq_container *out, sq_error *err)
{
    const char *keys[] = {"format", "codec", "n", "shape"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (!sq_st_meta_get(f, keys[i]))
            return sq_error_set(err, SQ_ERR_FORMAT,
                                "%s: __metadata__ '%s': missing (not written by 'shardq codec "
                                "encode'?)",
                                path, keys[i]);
    const char *v = sq_st_meta_get(f, "format");
    if (strcmp(v, SQ_CONTAINER_FORMAT) != 0)
        return sq_error_set(err, SQ_ERR_FORMAT, "%s: __metadata__ 'format': '%s', expected '%s'",
                            path, v, SQ_CONTAINER_FORMAT);
    char cerr[256];
    v = sq_st_meta_get(f, "codec");
    if (sq_codec_parse(v, &out->codec, cerr, sizeof cerr) != SQ_OK)
        return sq_error_set(err, SQ_ERR_FORMAT, "%s: __metadata__ 'codec': %s", path, cerr);
    v = sq_st_meta_get(f, "n");
    if (meta_u64(v, &out->n))
        return sq_error_set(err, SQ_ERR_FORMAT,
                            "%s: __metadata__ 'n': '%s' is not an unsigned integer", path, v);
    v = sq_st_meta_get(f, "shape");
    if (parse_shape_meta(v, out->shape, &out->ndim))
        return sq_error_set(err, SQ_ERR_FORMAT,
                            "%s: __metadata__ 'shape': '%s' is not a list like [1024, 3]", path, v);
    uint64_t prod = 1;
    int zero = 0, ovf = 0;
    for (int d = 0; d < out->ndim; d++) zero |= out->shape[d] == 0;
    for (int d = 0; d < out->ndim && !zero; d++) {
        if (prod > UINT64_MAX / out->shape[d]) ovf = 1;
        prod *= out->shape[d];
    }
    if (zero) prod = 0;
    if (ovf || prod != out->n) {
        char held[32];
        snprintf(held, sizeof held, "%llu", (unsigned long long)prod);
        return sq_error_set(err, SQ_ERR_FORMAT,
                            "%s: __metadata__ 'shape': %s holds %s elements, 'n' says %llu", path,
                            v, ovf ? "more than 2^64" : held, (unsigned long long)out->n);
    }
    /* the key is a record of how the file was made, not needed to decode:
    ** a file without it (or with a value out of range) reads as key 0 */
    uint64_t u;
    if (!meta_u64(sq_st_meta_get(f, "seed"), &u)) out->key.seed = u;
    if (!meta_u64(sq_st_meta_get(f, "step"), &u) && u <= UINT32_MAX) out->key.step = (uint32_t)u;
    if (!meta_u64(sq_st_meta_get(f, "worker"), &u) && u < (1u << 24)) out->key.worker = (uint32_t)u;
    if (!meta_u64(sq_st_meta_get(f, "site"), &u) && u <= 255) out->key.site = (uint32_t)u;
    return SQ_OK;
}

int sq_container_read(const char *path, sq_container *out, sq_error *err)
{
    if (!out)
        return sq_error_set(err, SQ_ERR_ARG, "%s: no container given", path ? path : "(null)");
    memset(out, 0, sizeof *out);
    sq_st_file f;
    int rc = sq_st_open(path, &f, err);
    if (rc) return rc;
    if ((rc = read_fields(path, &f, out, err)) != 0) goto done;
    const sq_codec *c = &out->codec;
    uint64_t n = out->n;
    char spec[SQ_CODEC_STRLEN];
    sq_codec_format(c, spec, sizeof spec);
    for (size_t i = 0; i < f.ntensors; i++) {
        const char *name = f.tensors[i].name;
        if (strcmp(name, "codes") && strcmp(name, "scales") &&
            (!has_offsets(c) || strcmp(name, "offsets"))) {
            rc = sq_error_set(
                err, SQ_ERR_FORMAT, "%s: tensor '%s': unexpected (codec %s has %s)", path, name,
                spec, has_offsets(c) ? "codes, scales, offsets" : "codes, scales");
            goto done;
        }
    }
    const sq_st_entry *codes, *scales, *offsets = NULL;
    uint64_t groups = meta_count(c, n);
    uint64_t noffsets = plugin_kind(c) ? sq_codec_offset_bytes(c, n) : groups;
    if ((rc = check_tensor(path, &f, "codes", SQ_ST_U8, sq_codec_code_bytes(c, n), spec, n, &codes,
                           err)) != 0 ||
        (rc = check_tensor(path, &f, "scales", scale_dtype(c), groups, spec, n, &scales, err)) !=
            0 ||
        (has_offsets(c) && (rc = check_tensor(path, &f, "offsets", scale_dtype(c), noffsets,
                                              spec, n, &offsets, err)) != 0))
        goto done;
    /* a plug-in's metadata is its own: its decode is checked instead */
    if (!plugin_kind(c) &&
        ((rc = check_meta_finite(path, "scales", c, scales->data, groups, err)) != 0 ||
        (offsets && (rc = check_meta_finite(path, "offsets", c, offsets->data, groups, err)) != 0)))
        goto done;
    /* the decoder's output (n floats) must be addressable too */
    if (n > (uint64_t)SIZE_MAX / sizeof(float) || sq_qbuf_alloc(c, n, &out->q) != SQ_OK) {
        rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory for n=%llu", path,
                          (unsigned long long)n);
        goto done;
    }
    memcpy(out->q.codes, codes->data, (size_t)(codes->end - codes->begin));
    memcpy(out->q.scales, scales->data, (size_t)(scales->end - scales->begin));
    if (offsets) memcpy(out->q.offsets, offsets->data, (size_t)(offsets->end - offsets->begin));
done:
    sq_st_free(&f);
    if (rc) sq_container_free(out);
    return rc;
}
