/*
** safetensors.c -- writer and validating reader of safetensors files, and
** the conversions of their float tensors to fp32 and fp64. See
** safetensors.h.
*/
/* madvise(MADV_DONTNEED) is not in POSIX (posix_madvise's DONTNEED is a
** no-op on Linux), and only it drops mapped pages from the resident set. */
#define _DEFAULT_SOURCE 1

#include "shardq/trace.h"
#include "trace/input.h"
#include "trace/wfile.h"
#include "shardq/codec.h"
#include "sq_hd.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
    const char *name;
    size_t size;
} dtypes[SQ_ST_NDTYPES] = {
    [SQ_ST_BOOL] = {"BOOL", 1},       [SQ_ST_U8] = {"U8", 1},     [SQ_ST_I8] = {"I8", 1},
    [SQ_ST_F8_E5M2] = {"F8_E5M2", 1}, [SQ_ST_F8_E4M3] = {"F8_E4M3", 1},
    [SQ_ST_I16] = {"I16", 2},         [SQ_ST_U16] = {"U16", 2},   [SQ_ST_F16] = {"F16", 2},
    [SQ_ST_BF16] = {"BF16", 2},       [SQ_ST_I32] = {"I32", 4},   [SQ_ST_U32] = {"U32", 4},
    [SQ_ST_F32] = {"F32", 4},         [SQ_ST_I64] = {"I64", 8},   [SQ_ST_U64] = {"U64", 8},
    [SQ_ST_F64] = {"F64", 8},
};

const char *sq_st_dtype_name(sq_st_dtype d)
{
    return (unsigned)d < SQ_ST_NDTYPES ? dtypes[d].name : NULL;
}

size_t sq_st_dtype_size(sq_st_dtype d)
{
    return (unsigned)d < SQ_ST_NDTYPES ? dtypes[d].size : 0;
}

int sq_st_dtype_parse(const char *name)
{
    if (!name) return SQ_ST_DTYPE_NONE;
    for (int i = 0; i < SQ_ST_NDTYPES; i++)
        if (strcmp(dtypes[i].name, name) == 0) return i;
    return SQ_ST_DTYPE_NONE;
}

int sq_st_dtype_is_float(sq_st_dtype d)
{
    return d == SQ_ST_F32 || d == SQ_ST_F16 || d == SQ_ST_BF16 || d == SQ_ST_F64;
}

/* product(shape) * itemsize into *bytes (and the product into *nelem);
** SQ_ERR_RANGE when either overflows 64 bits. */
static int tensor_bytes(const uint64_t *shape, int ndim, size_t isz, uint64_t *nelem,
                        uint64_t *bytes)
{
    uint64_t n = 1;
    int zero = 0;
    for (int d = 0; d < ndim; d++) zero |= shape[d] == 0;
    for (int d = 0; d < ndim && !zero; d++) {
        if (n > UINT64_MAX / shape[d]) return SQ_ERR_RANGE;
        n *= shape[d];
    }
    if (zero) n = 0;
    if (n > UINT64_MAX / isz) return SQ_ERR_RANGE;
    *nelem = n;
    *bytes = n * isz;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct sbuf {
    char *s;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_puts(sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k > 0) sb_add(b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

/* A JSON string literal. */
static void sb_json_str(sbuf *b, const char *s)
{
    sb_add(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            sb_add(b, e, 2);
        } else if (*p < 0x20) {
            sb_printf(b, "\\u%04x", *p);
        } else {
            sb_add(b, (const char *)p, 1);
        }
    }
    sb_add(b, "\"", 1);
}

/* A tensor name or metadata key given twice (sorted, not compared pair by
** pair: a model of 100k tensors). */
static int names_twice(const char *fname, const sq_st_tensor *t, size_t nt, const sq_st_kv *m,
                       size_t nm, sq_error *err)
{
    size_t n = nt > nm ? nt : nm;
    const char **keys = malloc((n ? n : 1) * sizeof *keys);
    if (!keys) {
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", fname);
    }
    int oom = 0, rc = SQ_OK;
    for (size_t i = 0; i < nm; i++) keys[i] = m[i].key;
    const char *dup = sq_dup_string(keys, nm, &oom);
    if (dup) rc = sq_error_set(err, SQ_ERR_ARG, "%s: __metadata__ '%s': given twice", fname, dup);
    if (!dup && !oom) {
        for (size_t i = 0; i < nt; i++) keys[i] = t[i].name;
        dup = sq_dup_string(keys, nt, &oom);
        if (dup)
            rc = sq_error_set(err, SQ_ERR_ARG, "%s: tensor '%s': name given twice", fname, dup);
    }
    if (oom) rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", fname);
    free(keys);
    return rc;
}

/* Checks the tensors and metadata and builds the JSON header, padded with
** spaces to a multiple of 8 bytes, into *b; ends[i] gets the end offset of
** tensor i in the data section. */
static int build_header(const char *fname, const sq_st_tensor *t, size_t nt, const sq_st_kv *m,
                        size_t nm, sbuf *b, uint64_t *ends, sq_error *err)
{
    int rc;
    if ((nt && !t) || (nm && !m)) {
        return sq_error_set(err, SQ_ERR_ARG, "%s: no tensors or metadata given", fname);
    }
    sb_puts(b, "{");
    if (nm) {
        sb_puts(b, "\"__metadata__\":{");
        for (size_t i = 0; i < nm; i++) {
            if (!m[i].key || !m[i].value) {
                return sq_error_set(err, SQ_ERR_ARG,
                                    "%s: __metadata__ entry %zu: NULL key or value", fname, i);
            }
            if (i) sb_puts(b, ",");
            sb_json_str(b, m[i].key);
            sb_puts(b, ":");
            sb_json_str(b, m[i].value);
        }
        sb_puts(b, "}");
    }
    uint64_t off = 0;
    for (size_t i = 0; i < nt; i++) {
        const char *name = t[i].name;
        if (!name || !*name || strcmp(name, "__metadata__") == 0) {
            return sq_error_set(err, SQ_ERR_ARG, "%s: tensor %zu: invalid name '%s'", fname, i,
                                name ? name : "(null)");
        }
        size_t isz = sq_st_dtype_size(t[i].dtype);
        if (!isz) {
            return sq_error_set(err, SQ_ERR_ARG, "%s: tensor '%s': field 'dtype': unknown dtype %d",
                                fname, name, (int)t[i].dtype);
        }
        if (t[i].ndim < 0 || t[i].ndim > SQ_ST_MAXDIM) {
            return sq_error_set(err, SQ_ERR_ARG, "%s: tensor '%s': field 'shape': %d dimensions",
                                fname, name, t[i].ndim);
        }
        uint64_t nelem, bytes;
        if (tensor_bytes(t[i].shape, t[i].ndim, isz, &nelem, &bytes) ||
            bytes > UINT64_MAX - off || bytes > SIZE_MAX) {
            return sq_error_set(err, SQ_ERR_ARG,
                                "%s: tensor '%s': field 'shape': product overflows", fname, name);
        }
        sb_puts(b, b->len > 1 ? "," : "");
        sb_json_str(b, name);
        sb_printf(b, ":{\"dtype\":\"%s\",\"shape\":[", sq_st_dtype_name(t[i].dtype));
        for (int d = 0; d < t[i].ndim; d++)
            sb_printf(b, "%s%llu", d ? "," : "", (unsigned long long)t[i].shape[d]);
        sb_printf(b, "],\"data_offsets\":[%llu,", (unsigned long long)off);
        off += bytes;
        sb_printf(b, "%llu]}", (unsigned long long)off);
        ends[i] = off;
    }
    sb_puts(b, "}");
    if ((rc = names_twice(fname, t, nt, m, nm, err)) != 0) return rc;
    while (!b->oom && b->len % 8) sb_puts(b, " ");
    if (b->oom) {
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", fname);
    }
    return 0;
}

struct sq_st_writer {
    sq_wfile out;
    char *name;          /* the target, for messages */
    size_t nt;
    char **names;        /* the tensors' names and end offsets, for messages */
    uint64_t *ends;
    uint64_t total, put; /* bytes of data promised, and put so far */
    char *failure;       /* the error of a failed put, repeated by commit */
    int failure_kind;    /* and its kind */
};

static void writer_free(sq_st_writer *w)
{
    if (!w) return;
    for (size_t i = 0; i < w->nt; i++) free(w->names[i]);
    free(w->names);
    free(w->ends);
    free(w->name);
    free(w->failure);
    free(w);
}

int sq_st_writer_open(sq_st_writer **wp, const char *path, const sq_st_tensor *t, size_t nt,
                      const sq_st_kv *m, size_t nm, sq_error *err)
{
    const char *fname = path ? path : "(null)";
    if (!wp) {
        return sq_error_set(err, SQ_ERR_ARG, "%s: no writer given", fname);
    }
    *wp = NULL;
    sq_st_writer *w = calloc(1, sizeof *w);
    sbuf b = {0};
    int rc;
    if (!w || !(w->name = strdup(fname)) || !(w->ends = calloc(nt ? nt : 1, sizeof *w->ends)) ||
        !(w->names = calloc(nt ? nt : 1, sizeof *w->names))) {
        rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", fname);
        goto fail;
    }
    if ((rc = build_header(fname, t, nt, m, nm, &b, w->ends, err)) != 0) goto fail;
    for (; w->nt < nt; w->nt++)
        if (!(w->names[w->nt] = strdup(t[w->nt].name))) {
            rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", fname);
            goto fail;
        }
    w->total = nt ? w->ends[nt - 1] : 0;
    unsigned char len8[8];
    for (int k = 0; k < 8; k++) len8[k] = (unsigned char)((uint64_t)b.len >> (8 * k));
    if ((rc = sq_wfile_open(&w->out, path, err)) != 0) goto fail;
    sq_wfile_write(&w->out, len8, 8);
    sq_wfile_write(&w->out, b.s, b.len);
    free(b.s);
    *wp = w;
    return 0;
fail:
    free(b.s);
    writer_free(w);
    return rc;
}

/* Records the first failure of a put, so that commit reports it too. */
static int put_failed(sq_st_writer *w, sq_error *err, int kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int put_failed(sq_st_writer *w, sq_error *err, int kind, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!w->failure) {
        w->failure = strdup(msg);
        w->failure_kind = kind;
    }
    return sq_error_set(err, w->failure ? w->failure_kind : kind, "%s",
                        w->failure ? w->failure : msg);
}

/* The tensor whose data hold byte pos of the data section (the last one
** when pos is at or beyond the end). */
static const char *tensor_at(const sq_st_writer *w, uint64_t pos)
{
    for (size_t i = 0; i < w->nt; i++)
        if (w->ends[i] > pos) return w->names[i];
    return w->nt ? w->names[w->nt - 1] : "(none)";
}

int sq_st_writer_put(sq_st_writer *w, const void *data, uint64_t bytes, sq_error *err)
{
    if (!w) {
        return sq_error_set(err, SQ_ERR_ARG, "internal error: safetensors writer not open");
    }
    if (w->failure) return put_failed(w, err, w->failure_kind, "%s", w->failure);
    if (bytes > w->total - w->put)
        return put_failed(w, err, SQ_ERR_ARG,
                          "%s: %llu bytes put at data offset %llu go beyond the %llu bytes the "
                          "header promises (the last tensor is '%s')",
                          w->name, (unsigned long long)bytes, (unsigned long long)w->put,
                          (unsigned long long)w->total, w->nt ? w->names[w->nt - 1] : "(none)");
    if (bytes > SIZE_MAX)
        return put_failed(w, err, SQ_ERR_NOMEM, "%s: %llu bytes in one put: too many for memory",
                          w->name, (unsigned long long)bytes);
    if (bytes && !data)
        return put_failed(w, err, SQ_ERR_ARG, "%s: tensor '%s': no data", w->name,
                          tensor_at(w, w->put));
    sq_wfile_write(&w->out, data, (size_t)bytes);
    if (w->out.err_no)
        return put_failed(w, err, SQ_ERR_IO, "%s: write failed: %s", w->name,
                          strerror(w->out.err_no));
    w->put += bytes;
    return 0;
}

void sq_st_writer_abort(sq_st_writer *w)
{
    if (!w) return;
    sq_wfile_abort(&w->out);
    writer_free(w);
}

int sq_st_writer_commit(sq_st_writer *w, sq_error *err)
{
    if (!w) {
        return sq_error_set(err, SQ_ERR_ARG, "internal error: safetensors writer not open");
    }
    int rc;
    if (w->failure) {
        rc = sq_error_set(err, w->failure_kind, "%s", w->failure);
        sq_st_writer_abort(w);
        return rc;
    }
    if (w->put != w->total) {
        const char *name = tensor_at(w, w->put);
        uint64_t end = 0, begin = 0;
        for (size_t i = 0; i < w->nt; i++)
            if (strcmp(w->names[i], name) == 0) {
                end = w->ends[i];
                begin = i ? w->ends[i - 1] : 0;
            }
        rc = sq_error_set(err, SQ_ERR_ARG,
                          "%s: tensor '%s': %llu of its %llu bytes put; the data section needs "
                          "%llu bytes in all, %llu were put",
                          w->name, name, (unsigned long long)(w->put - begin),
                          (unsigned long long)(end - begin), (unsigned long long)w->total,
                          (unsigned long long)w->put);
        sq_st_writer_abort(w);
        return rc;
    }
    rc = sq_wfile_commit(&w->out, err);
    writer_free(w);
    return rc;
}

int sq_st_write(const char *path, const sq_st_tensor *t, size_t nt, const sq_st_kv *m, size_t nm,
                sq_error *err)
{
    const char *fname = path ? path : "(null)";
    /* Missing data is refused before anything is created. A tensor the
    ** writer would refuse anyway is left for it to report. */
    for (size_t i = 0; t && i < nt; i++) {
        uint64_t nelem, bytes;
        size_t isz = sq_st_dtype_size(t[i].dtype);
        if (isz && t[i].ndim >= 0 && t[i].ndim <= SQ_ST_MAXDIM &&
            !tensor_bytes(t[i].shape, t[i].ndim, isz, &nelem, &bytes) && bytes && !t[i].data) {
            return sq_error_set(err, SQ_ERR_ARG, "%s: tensor '%s': no data", fname,
                                t[i].name ? t[i].name : "(null)");
        }
    }
    sq_st_writer *w;
    int rc = sq_st_writer_open(&w, path, t, nt, m, nm, err);
    if (rc) return rc;
    for (size_t i = 0; i < nt; i++) {
        uint64_t bytes = w->ends[i] - (i ? w->ends[i - 1] : 0);
        if ((rc = sq_st_writer_put(w, t[i].data, bytes, err)) != 0) {
            sq_st_writer_abort(w);
            return rc;
        }
    }
    return sq_st_writer_commit(w, err);
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                  */
/* ------------------------------------------------------------------------ */

void sq_st_free(sq_st_file *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->ntensors; i++) free(f->tensors[i].name);
    for (size_t i = 0; i < f->nmeta; i++) {
        free((char *)f->meta[i].key);
        free((char *)f->meta[i].value);
    }
    free(f->tensors);
    free(f->meta);
    free(f->byname);
    free(f->name);
    if (f->map) munmap(f->map, f->map_len);
    free(f->copy);
    memset(f, 0, sizeof *f);
}

const sq_st_entry *sq_st_find(const sq_st_file *f, const char *name)
{
    if (!f || !name) return NULL;
    if (!f->byname) { /* a struct the reader did not fill */
        for (size_t i = 0; i < f->ntensors; i++)
            if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
        return NULL;
    }
    size_t lo = 0, hi = f->ntensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const sq_st_entry *e = f->byname[mid];
        int c = strcmp(e->name, name);
        if (c == 0) return e;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const char *sq_st_meta_get(const sq_st_file *f, const char *key)
{
    if (!f || !key) return NULL;
    for (size_t i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta[i].key, key) == 0) return f->meta[i].value;
    return NULL;
}

/* A JSON number that is a non-negative integer exactly representable. */
static int json_uint(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v)) return SQ_ERR_FORMAT;
    double d = v->valuedouble;
    if (!(d >= 0.0 && d <= 9007199254740992.0) || d != floor(d)) return SQ_ERR_FORMAT;
    *out = (uint64_t)d;
    return 0;
}

static int cmp_entry_offsets(const void *a, const void *b)
{
    const sq_st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name); /* a fixed order, so fixed messages */
}

static int cmp_entry_names(const void *a, const void *b)
{
    const sq_st_entry *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

/* Validates one tensor entry of the header into *e. */
static int parse_tensor(const char *path, const cJSON *item, sq_st_entry *e, sq_error *err)
{
    const char *name = item->string;
    if (!cJSON_IsObject(item)) {
        return sq_error_set(err, SQ_ERR_FORMAT,
                            "%s: tensor '%s': expected an object with dtype, shape, data_offsets",
                            path, name);
    }
    const cJSON *dtype = NULL, *shape = NULL, *offs = NULL;
    for (const cJSON *f = item->child; f; f = f->next) {
        const cJSON **slot = strcmp(f->string, "dtype") == 0 ? &dtype
                             : strcmp(f->string, "shape") == 0 ? &shape
                             : strcmp(f->string, "data_offsets") == 0 ? &offs
                                                                       : NULL;
        if (!slot) {
            return sq_error_set(
                err, SQ_ERR_FORMAT,
                "%s: tensor '%s': unknown field '%s' (expected dtype, shape, data_offsets)", path,
                name, f->string);
        }
        if (*slot) {
            return sq_error_set(err, SQ_ERR_FORMAT, "%s: tensor '%s': field '%s': given twice",
                                path, name, f->string);
        }
        *slot = f;
    }
    const char *missing = !dtype ? "dtype" : !shape ? "shape" : !offs ? "data_offsets" : NULL;
    if (missing) {
        return sq_error_set(err, SQ_ERR_FORMAT, "%s: tensor '%s': field '%s': missing", path, name,
                            missing);
    }
    int dt = cJSON_IsString(dtype) ? sq_st_dtype_parse(dtype->valuestring) : SQ_ST_DTYPE_NONE;
    if (dt < 0) {
        return sq_error_set(
            err, SQ_ERR_FORMAT, "%s: tensor '%s': field 'dtype': unknown dtype %s%s%s", path, name,
            cJSON_IsString(dtype) ? "'" : "(not a string)",
            cJSON_IsString(dtype) ? dtype->valuestring : "", cJSON_IsString(dtype) ? "'" : "");
    }
    e->dtype = (sq_st_dtype)dt;
    if (!cJSON_IsArray(shape)) {
        return sq_error_set(err, SQ_ERR_FORMAT,
                            "%s: tensor '%s': field 'shape': expected an array of integers", path,
                            name);
    }
    int nd = 0;
    for (const cJSON *d = shape->child; d; d = d->next, nd++) {
        if (nd == SQ_ST_MAXDIM) {
            return sq_error_set(err, SQ_ERR_FORMAT,
                                "%s: tensor '%s': field 'shape': more than %d dimensions", path,
                                name, SQ_ST_MAXDIM);
        }
        if (json_uint(d, &e->shape[nd])) {
            return sq_error_set(
                err, SQ_ERR_FORMAT,
                "%s: tensor '%s': field 'shape': entry %d is not a non-negative integer", path,
                name, nd);
        }
    }
    e->ndim = nd;
    uint64_t bytes;
    if (tensor_bytes(e->shape, nd, sq_st_dtype_size(e->dtype), &e->nelem, &bytes)) {
        return sq_error_set(err, SQ_ERR_FORMAT, "%s: tensor '%s': field 'shape': product overflows",
                            path, name);
    }
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
        json_uint(offs->child, &e->begin) || json_uint(offs->child->next, &e->end)) {
        return sq_error_set(
            err, SQ_ERR_FORMAT,
            "%s: tensor '%s': field 'data_offsets': expected [begin, end], two non-negative "
            "integers",
            path, name);
    }
    if (e->begin > e->end) {
        return sq_error_set(err, SQ_ERR_FORMAT,
                            "%s: tensor '%s': field 'data_offsets': begin %llu > end %llu", path,
                            name, (unsigned long long)e->begin, (unsigned long long)e->end);
    }
    if (bytes != e->end - e->begin) {
        char sh[96];
        sq_npy_shape_str(e->shape, e->ndim, sh, sizeof sh);
        return sq_error_set(
            err, SQ_ERR_FORMAT,
            "%s: tensor '%s': field 'shape': %s of %s is %llu bytes, but data_offsets "
            "[%llu, %llu] span %llu",
            path, name, sh, sq_st_dtype_name(e->dtype), (unsigned long long)bytes,
            (unsigned long long)e->begin, (unsigned long long)e->end,
            (unsigned long long)(e->end - e->begin));
    }
    return 0;
}

/* A name of the header (what: "tensor", "__metadata__ key") that is not
** UTF-8: the header is JSON, whose text is UTF-8, and cJSON keeps any byte,
** so such a name would reach `trace info --json` and the database as text
** no reader takes. The error names it escaped, and the offset of the first
** bad byte in it. */
static int check_utf8(const char *path, const char *what, const char *name, const char *noun,
                      sq_error *err)
{
    size_t len = strlen(name), bad = sq_utf8_invalid(name, len);
    if (bad == len) return 0;
    char shown[256];
    return sq_error_set(err, SQ_ERR_FORMAT, "%s: %s '%s': not UTF-8 (byte %zu of the %s)", path,
                        what, sq_escape_bytes(name, shown, sizeof shown), bad, noun);
}

/* Parses and validates the JSON header hdr (NUL-terminated, N bytes) into *f;
** data_len is the size of the data section. */
static int parse_header(const char *path, const char *hdr, sq_st_file *f, sq_error *err)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(hdr, &end, 1);
    if (!root) {
        size_t at = end && end >= hdr ? (size_t)(end - hdr) : 0;
        return sq_error_set(err, SQ_ERR_FORMAT,
                            "%s: header: invalid JSON near byte %zu of the header", path, at);
    }
    int rc;
    if (!cJSON_IsObject(root)) {
        rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: header: the JSON is not an object", path);
        goto done;
    }
    size_t count = (size_t)cJSON_GetArraySize(root);
    f->tensors = calloc(count ? count : 1, sizeof *f->tensors);
    if (!f->tensors) {
        rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    const cJSON *meta = NULL;
    for (const cJSON *it = root->child; it; it = it->next) {
        if (strcmp(it->string, "__metadata__") == 0) {
            if (meta) {
                rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: __metadata__: given twice", path);
                goto done;
            }
            meta = it;
            continue;
        }
        if ((rc = check_utf8(path, "tensor", it->string, "name", err)) != 0) goto done;
        sq_st_entry *e = &f->tensors[f->ntensors];
        e->name = strdup(it->string);
        if (!e->name) {
            rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
            goto done;
        }
        f->ntensors++;
        if ((rc = parse_tensor(path, it, e, err)) != 0) goto done;
    }
    if (meta) {
        if (!cJSON_IsObject(meta)) {
            rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: __metadata__: expected an object of strings",
                              path);
            goto done;
        }
        size_t nm = (size_t)cJSON_GetArraySize(meta);
        f->meta = calloc(nm ? nm : 1, sizeof *f->meta);
        if (!f->meta) {
            rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
            goto done;
        }
        /* a key given twice: by sorting, not by looking each one up */
        const char *dup;
        int d = sq_json_dup_key(meta, &dup, NULL, 0);
        if (d) {
            if (d < 0)
                rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
            else
                rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: __metadata__ '%s': given twice", path,
                                  dup);
            goto done;
        }
        for (const cJSON *kv = meta->child; kv; kv = kv->next) {
            if ((rc = check_utf8(path, "__metadata__ key", kv->string, "key", err)) != 0)
                goto done;
            if (!cJSON_IsString(kv)) {
                rc = sq_error_set(err, SQ_ERR_FORMAT,
                                  "%s: __metadata__ '%s': value is not a string", path, kv->string);
                goto done;
            }
            size_t bad = sq_utf8_invalid(kv->valuestring, strlen(kv->valuestring));
            if (bad < strlen(kv->valuestring)) {
                char shown[256];
                rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: __metadata__ '%s': the value is not "
                                  "UTF-8 (byte %zu of the value: '%s')", path, kv->string, bad,
                                  sq_escape_bytes(kv->valuestring, shown, sizeof shown));
                goto done;
            }
            char *k = strdup(kv->string), *v = strdup(kv->valuestring);
            if (!k || !v) {
                free(k);
                free(v);
                rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
                goto done;
            }
            f->meta[f->nmeta].key = k;
            f->meta[f->nmeta].value = v;
            f->nmeta++;
        }
    }
    /* Unique names. */
    if (f->ntensors > 1) {
        const sq_st_entry **byname = malloc(f->ntensors * sizeof *byname);
        if (!byname) {
            rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
            goto done;
        }
        for (size_t i = 0; i < f->ntensors; i++) byname[i] = &f->tensors[i];
        qsort(byname, f->ntensors, sizeof *byname, cmp_entry_names);
        for (size_t i = 1; i < f->ntensors; i++)
            if (strcmp(byname[i]->name, byname[i - 1]->name) == 0) {
                rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: tensor '%s': given twice", path,
                                  byname[i]->name);
                free(byname);
                goto done;
            }
        free(byname);
    }
    rc = 0;
done:
    cJSON_Delete(root);
    return rc;
}

/* Offsets within the data section, no overlap, no gap. */
static int check_layout(const char *path, sq_st_file *f, sq_error *err)
{
    qsort(f->tensors, f->ntensors, sizeof *f->tensors, cmp_entry_offsets);
    uint64_t pos = 0;
    for (size_t i = 0; i < f->ntensors; i++) {
        sq_st_entry *e = &f->tensors[i];
        if (e->end > f->data_len) {
            return sq_error_set(
                err, SQ_ERR_FORMAT,
                "%s: tensor '%s': field 'data_offsets': end %llu beyond the data section "
                "(%llu bytes)",
                path, e->name, (unsigned long long)e->end, (unsigned long long)f->data_len);
        }
    }
    for (size_t i = 0; i < f->ntensors; i++) {
        sq_st_entry *e = &f->tensors[i];
        if (e->begin < pos) {
            const sq_st_entry *p = &f->tensors[i - 1];
            return sq_error_set(
                err, SQ_ERR_FORMAT,
                "%s: tensor '%s': field 'data_offsets': [%llu, %llu] overlaps tensor '%s' "
                "[%llu, %llu]",
                path, e->name, (unsigned long long)e->begin, (unsigned long long)e->end, p->name,
                (unsigned long long)p->begin, (unsigned long long)p->end);
        }
        if (e->begin > pos) {
            return sq_error_set(
                err, SQ_ERR_FORMAT,
                "%s: data section: bytes [%llu, %llu) belong to no tensor (before tensor "
                "'%s')",
                path, (unsigned long long)pos, (unsigned long long)e->begin, e->name);
        }
        pos = e->end;
    }
    if (pos != f->data_len) {
        return sq_error_set(err, SQ_ERR_FORMAT,
                            "%s: data section: bytes [%llu, %llu) at its end belong to no tensor",
                            path, (unsigned long long)pos, (unsigned long long)f->data_len);
    }
    for (size_t i = 0; i < f->ntensors; i++)
        f->tensors[i].data = f->data + f->tensors[i].begin;
    return 0;
}

/* Validates the header length and the JSON header of the image buf[0..len)
** into *f (zeroed, with its name set); the data section is not looked at. */
static int parse_head(const char *path, const unsigned char *buf, size_t len, sq_st_file *f,
                      sq_error *err)
{
    /* Not even a plausible header: first the formats people give by
    ** mistake (a .pt checkpoint, an .npz), named as such, since "header
    ** length 578712552184433488" tells nobody what is wrong. Only then,
    ** because a real header may start with any bytes. */
    int plausible = len >= 9 && buf[8] == '{';
    if (!plausible &&
        sq_input_foreign(path, buf, len < SQ_INPUT_SNIFF_MAX ? len : SQ_INPUT_SNIFF_MAX,
                         SQ_INPUT_SAFETENSORS, err))
        return SQ_ERR_FORMAT;
    if (len < 8) {
        return sq_error_set(
            err, SQ_ERR_FORMAT,
            "%s: not a safetensors file: %zu bytes, too short for the header length", path, len);
    }
    uint64_t n = 0;
    for (int k = 0; k < 8; k++) n |= (uint64_t)buf[k] << (8 * k);
    if (n > len - 8) {
        return sq_error_set(err, SQ_ERR_FORMAT,
                            "%s: header length %llu goes beyond the end of the file (%llu bytes)",
                            path, (unsigned long long)n, (unsigned long long)len);
    }
    if (n > SQ_ST_HEADER_MAX) {
        return sq_error_set(err, SQ_ERR_FORMAT,
                            "%s: header length %llu exceeds the limit of %llu bytes", path,
                            (unsigned long long)n, (unsigned long long)SQ_ST_HEADER_MAX);
    }
    if (n < 2) {
        return sq_error_set(err, SQ_ERR_FORMAT,
                            "%s: header length %llu: too short for a JSON object", path,
                            (unsigned long long)n);
    }
    f->header_len = n;
    const unsigned char *json = buf + 8;
    const unsigned char *nul = memchr(json, '\0', (size_t)n);
    if (nul) {
        return sq_error_set(err, SQ_ERR_FORMAT, "%s: header: NUL byte at byte %zu of the JSON",
                            path, (size_t)(nul - json));
    }
    if (json[0] != '{') {
        return sq_error_set(err, SQ_ERR_FORMAT, "%s: header: does not start with '{'", path);
    }
    /* cJSON wants a terminated string; the header is small beside the data,
    ** which is never copied. */
    char *hdr = malloc((size_t)n + 1);
    if (!hdr) {
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
    }
    memcpy(hdr, json, (size_t)n);
    hdr[n] = '\0';
    int rc = parse_header(path, hdr, f, err);
    free(hdr);
    return rc;
}

/* Validates the image buf[0..len) of a whole file into *f (zeroed, with its
** name set): the header length, the JSON, then the layout of the data,
** which stays in buf. */
static int parse_image(const char *path, const unsigned char *buf, size_t len, sq_st_file *f,
                       sq_error *err)
{
    int rc;
    if ((rc = parse_head(path, buf, len, f, err)) != 0) return rc;
    f->data = buf + 8 + f->header_len;
    f->data_len = len - 8 - f->header_len;
    if ((rc = check_layout(path, f, err)) != 0) return rc;
    /* the index by name, once the tensors have their final places */
    f->byname = malloc((f->ntensors ? f->ntensors : 1) * sizeof *f->byname);
    if (!f->byname) {
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
    }
    for (size_t i = 0; i < f->ntensors; i++) f->byname[i] = &f->tensors[i];
    qsort(f->byname, f->ntensors, sizeof *f->byname, cmp_entry_names);
    return 0;
}

int sq_st_parse(const char *name, const void *buf, size_t len, sq_st_file *out, sq_error *err)
{
    if (!out) return sq_error_set(err, SQ_ERR_ARG, "%s: no file given", name ? name : "(memory)");
    memset(out, 0, sizeof *out);
    const char *path = name ? name : "(memory)";
    static const unsigned char none[1];
    if (!buf) {
        if (len) {
            return sq_error_set(err, SQ_ERR_ARG, "%s: no buffer given", path);
        }
        buf = none;
    }
    if (!(out->name = strdup(path))) {
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
    }
    int rc = parse_image(out->name, buf, len, out, err);
    if (rc) sq_st_free(out);
    return rc;
}

/* Reads up to len bytes of fd into buf, stopping early only at its end:
** how many, or SQ_ERR_IO on a read error (named in err). */
static ssize_t read_upto(int fd, const char *path, unsigned char *buf, size_t len, sq_error *err)
{
    size_t n = 0;
    while (n < len) {
        ssize_t k = read(fd, buf + n, len - n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            return sq_error_set(err, SQ_ERR_IO, "%s: read error: %s", path, strerror(errno));
        }
        if (k == 0) break;
        n += (size_t)k;
    }
    return (ssize_t)n;
}

/* Grows *buf to hold cap bytes. */
static int grow(unsigned char **buf, size_t cap, const char *path, sq_error *err)
{
    unsigned char *p = realloc(*buf, cap ? cap : 1);
    if (!p) {
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
    }
    *buf = p;
    return 0;
}

/* Reads the image of a file from a pipe into a new buffer, no more of it
** than its header accounts for: the header length, the header, then the
** data section up to the largest end of a tensor. A pipe that ends early
** gives a short image (which the parser refuses as a file cut short would
** be); one that goes on past the data fails here, without reading it all. */
static int read_stream(int fd, const char *path, unsigned char **buf, size_t *len, sq_error *err)
{
    unsigned char *b = NULL;
    size_t have = 0;
    uint64_t n = 0;
    ssize_t k;
    sq_st_file head;
    memset(&head, 0, sizeof head);
    *buf = NULL;
    *len = 0;
    int rc = grow(&b, 8, path, err);
    if (rc) return rc;
    if ((k = read_upto(fd, path, b, 8, err)) < 0) goto fail_read;
    have = (size_t)k;
    if (have < 8) goto done; /* the parser names the fault */
    for (int i = 0; i < 8; i++) n |= (uint64_t)b[i] << (8 * i);
    if (n > SQ_ST_HEADER_MAX) {
        /* another format, perhaps (sq_input_foreign): its first bytes say */
        if ((rc = grow(&b, SQ_INPUT_SNIFF_MAX, path, err)) != 0) goto fail;
        if ((k = read_upto(fd, path, b + 8, SQ_INPUT_SNIFF_MAX - 8, err)) < 0) goto fail_read;
        if ((rc = sq_input_foreign(path, b, 8 + (size_t)k, SQ_INPUT_SAFETENSORS, err)) != 0)
            goto fail;
        rc = sq_error_set(err, SQ_ERR_FORMAT,
                          "%s: header length %llu exceeds the limit of %llu bytes", path,
                          (unsigned long long)n, (unsigned long long)SQ_ST_HEADER_MAX);
        goto fail;
    }
    if ((rc = grow(&b, 8 + (size_t)n, path, err)) != 0) goto fail;
    if ((k = read_upto(fd, path, b + 8, (size_t)n, err)) < 0) goto fail_read;
    have += (size_t)k;
    if ((uint64_t)k < n) goto done;
    if ((rc = parse_head(path, b, have, &head, err)) != 0) {
        sq_st_free(&head);
        goto fail;
    }
    uint64_t data = 0;
    for (size_t i = 0; i < head.ntensors; i++)
        if (head.tensors[i].end > data) data = head.tensors[i].end;
    sq_st_free(&head);
    if (data > SQ_INPUT_STREAM_MAX - have) {
        rc = sq_error_set(err, SQ_ERR_UNSUPPORTED,
                          "%s: the header promises %llu bytes of data, more than the %llu "
                          "read from a pipe: give the file by name",
                          path, (unsigned long long)data, (unsigned long long)SQ_INPUT_STREAM_MAX);
        goto fail;
    }
    if ((rc = grow(&b, have + (size_t)data, path, err)) != 0) goto fail;
    if ((k = read_upto(fd, path, b + have, (size_t)data, err)) < 0) goto fail_read;
    have += (size_t)k;
    if ((uint64_t)k == data) {
        unsigned char more;
        if ((k = read_upto(fd, path, &more, 1, err)) < 0) goto fail_read;
        if (k) {
            rc = sq_error_set(err, SQ_ERR_FORMAT,
                              "%s: data section: bytes from %llu on belong to no tensor", path,
                              (unsigned long long)data);
            goto fail;
        }
    }
done:
    *buf = b;
    *len = have;
    return 0;
fail_read:
    rc = (int)k;
fail:
    free(b);
    return rc;
}

/* Reads a regular file of `size` bytes that cannot be mapped (an empty
** one) into a new buffer. */
static int read_file(int fd, const char *path, uint64_t size, unsigned char **buf, size_t *len,
                     sq_error *err)
{
    *buf = NULL;
    if (size > SIZE_MAX - 1) {
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: %llu bytes: too large to read", path,
                            (unsigned long long)size);
    }
    unsigned char *b = NULL;
    int rc = grow(&b, (size_t)size, path, err);
    if (rc) return rc;
    ssize_t k = read_upto(fd, path, b, (size_t)size, err);
    if (k < 0) {
        free(b);
        return (int)k;
    }
    *buf = b;
    *len = (size_t)k;
    return 0;
}

int sq_st_open(const char *path, sq_st_file *out, sq_error *err)
{
    if (!out) return sq_error_set(err, SQ_ERR_ARG, "%s: no file given", path ? path : "(null)");
    memset(out, 0, sizeof *out);
    sq_input in;
    int rc = sq_input_open(path, SQ_INPUT_STDIN, &in, err);
    if (rc) return rc;
    int fd = in.fd;
    /* A regular file is mapped; mmap of length 0 is invalid, so an empty
    ** file is read (and fails as too short). */
    void *map = MAP_FAILED;
    size_t size = 0;
    if (!in.stream && in.size > 0) {
        if (in.size > SIZE_MAX) {
            rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: %llu bytes: too large to map", path,
                              (unsigned long long)in.size);
            close(fd);
            return rc;
        }
        size = (size_t)in.size;
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    }
    unsigned char *copy = NULL;
    if (map == MAP_FAILED &&
        (rc = in.stream ? read_stream(fd, path, &copy, &size, err)
                        : read_file(fd, path, in.size, &copy, &size, err)) != 0) {
        close(fd);
        return rc;
    }
    close(fd); /* a mapping outlives its descriptor */
    const void *image = map != MAP_FAILED ? map : copy;
    if ((rc = sq_st_parse(path, image, size, out, err)) != 0) {
        if (map != MAP_FAILED) munmap(map, size);
        free(copy);
        return rc;
    }
    if (map != MAP_FAILED) {
        out->map = map;
        out->map_len = size;
    }
    out->copy = copy;
    return 0;
}

int sq_st_read(const char *path, sq_st_file *out, sq_error *err)
{
    return sq_st_open(path, out, err);
}

/* Drops the pages of the mapped bytes [lo, lo + len) of f: those that
** touch the range (outward), or those wholly inside it (inward: the pages
** it shares with a neighbour that is still being read stay). */
static void drop_pages(const sq_st_file *f, uintptr_t lo, uint64_t len, int outward)
{
#ifdef MADV_DONTNEED
    uintptr_t base = (uintptr_t)f->map;
    if (lo < base || lo - base > f->map_len || len > f->map_len - (lo - base))
        return; /* not bytes of this file */
    /* The neighbours' pages that go too are clean (PROT_READ, never
    ** written), so touching them again reads them back from the file;
    ** nothing is lost. */
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), hi = lo + (uintptr_t)len;
    uintptr_t a = outward ? lo & ~(pg - 1) : (lo + pg - 1) & ~(pg - 1);
    uintptr_t b = outward ? (hi + pg - 1) & ~(pg - 1) : hi & ~(pg - 1);
    if (b > a) (void)madvise((void *)a, (size_t)(b - a), MADV_DONTNEED);
#else
    (void)f, (void)lo, (void)len, (void)outward;
#endif
}

void sq_st_release(const sq_st_file *f, const sq_st_entry *e)
{
    if (!f || !f->map) return;
    drop_pages(f, (uintptr_t)(e ? e->data : f->data), e ? e->end - e->begin : f->data_len, 1);
}

void sq_st_release_part(const sq_st_file *f, const sq_st_entry *e, uint64_t first, uint64_t len)
{
    if (!f || !f->map || !e || first > e->nelem || len > e->nelem - first) return;
    const uint64_t isz = sq_st_dtype_size(e->dtype);
    drop_pages(f, (uintptr_t)(e->data + first * isz), len * isz, 0);
}

/* ------------------------------------------------------------------------ */
/* Conversion to fp32 and fp64                                              */
/* ------------------------------------------------------------------------ */

/* Elements converted at a time: a chunk is one OpenMP work item, and the
** unit in which a bad element is looked for once one is known to exist. */
#define CONV_CHUNK 16384
/* From FLT_MAX + half an ulp on, a double rounds (to nearest even) to an
** infinite float. */
#define F32_OVERFLOW 0x1.ffffffp+127

static uint64_t load_le64(const unsigned char *p)
{
    uint64_t u = 0;
    for (int k = 0; k < 8; k++) u |= (uint64_t)p[k] << (8 * k);
    return u;
}

static uint32_t load_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Element i of a float dtype as a double (exact for every float dtype). */
static double elem_f64(sq_st_dtype dt, const unsigned char *p, uint64_t i)
{
    uint16_t h;
    double v;
    switch (dt) {
    case SQ_ST_F64: {
        uint64_t u = load_le64(p + 8 * i);
        memcpy(&v, &u, 8);
        return v;
    }
    case SQ_ST_F32: return (double)sq_f32_bits(load_le32(p + 4 * i));
    case SQ_ST_BF16:
        h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
        return (double)sq_hd_bf16_to_f32(h);
    default:
        h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
        return (double)sq_hd_f16_to_f32(h);
    }
}

/* The shortest %g form that reads back as v ("1e+300", not 1.0000000000000001e+300). */
static void shortest_g(double v, char *buf, size_t len)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

/* Finds the first bad element of chunk c (one is known to be there) and
** writes the error naming it: SQ_ERR_NONFINITE for NaN or Inf, SQ_ERR_RANGE
** for a finite F64 beyond fp32. */
static int report_bad(const sq_st_file *f, const sq_st_entry *e, uint64_t c, sq_error *err)
{
    uint64_t i = c * CONV_CHUNK, stop = e->nelem - i < CONV_CHUNK ? e->nelem : i + CONV_CHUNK;
    for (; i < stop; i++) {
        double v = elem_f64(e->dtype, e->data, i);
        if (isnan(v)) {
            return sq_error_set(err, SQ_ERR_NONFINITE, "%s: tensor '%s': element %llu is NaN",
                                f->name, e->name, (unsigned long long)i);
        }
        if (isinf(v)) {
            return sq_error_set(err, SQ_ERR_NONFINITE, "%s: tensor '%s': element %llu is %s",
                                f->name, e->name, (unsigned long long)i, v > 0 ? "+Inf" : "-Inf");
        }
        if (fabs(v) >= F32_OVERFLOW) {
            char num[40];
            shortest_g(v, num, sizeof num);
            return sq_error_set(err, SQ_ERR_RANGE,
                                "%s: tensor '%s': element %llu: %s overflows fp32", f->name,
                                e->name, (unsigned long long)i, num);
        }
    }
    return sq_error_set(err, SQ_ERR_ARG,
                        "%s: tensor '%s': internal error: no bad element in chunk %llu", f->name,
                        e->name, (unsigned long long)c);
}

/* Converts n elements at p to fp32; nonzero when one is NaN, Inf or (F64)
** beyond fp32's range, which all come out as a non-finite float. One plain
** loop per dtype, written so that the compiler vectorises it. */
static int chunk_f32(sq_st_dtype dt, const unsigned char *p, size_t n, float *out)
{
    uint32_t bad = 0;
    switch (dt) {
    case SQ_ST_F32:
        if (!SQ_BIG_ENDIAN)
            memcpy(out, p, 4 * n);
        else
            for (size_t i = 0; i < n; i++) out[i] = sq_f32_bits(load_le32(p + 4 * i));
        break;
    case SQ_ST_BF16:
        for (size_t i = 0; i < n; i++)
            out[i] = sq_hd_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        break;
    case SQ_ST_F16:
        for (size_t i = 0; i < n; i++)
            out[i] = sq_hd_f16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        break;
    default: /* F64 */
        for (size_t i = 0; i < n; i++) {
            double v;
            uint64_t u = SQ_BIG_ENDIAN ? load_le64(p + 8 * i) : 0;
            if (!SQ_BIG_ENDIAN) memcpy(&u, p + 8 * i, 8);
            memcpy(&v, &u, 8);
            out[i] = (float)v;
        }
        break;
    }
    for (size_t i = 0; i < n; i++) bad |= (uint32_t)sq_hd_nonfinite(out[i]);
    return bad != 0;
}

/* The same to fp64: every value is exact; bad as for chunk_f32. */
static int chunk_f64(sq_st_dtype dt, const unsigned char *p, size_t n, double *out)
{
    uint32_t bad = 0;
    switch (dt) {
    case SQ_ST_F64:
        if (!SQ_BIG_ENDIAN)
            memcpy(out, p, 8 * n);
        else
            for (size_t i = 0; i < n; i++) {
                uint64_t u = load_le64(p + 8 * i);
                memcpy(&out[i], &u, 8);
            }
        /* NaN fails the comparison too. */
        for (size_t i = 0; i < n; i++) bad |= (uint32_t)!(fabs(out[i]) < F32_OVERFLOW);
        return bad != 0;
    case SQ_ST_F32:
        for (size_t i = 0; i < n; i++) {
            uint32_t u;
            if (SQ_BIG_ENDIAN) u = load_le32(p + 4 * i);
            else memcpy(&u, p + 4 * i, 4);
            bad |= (uint32_t)((u & 0x7f800000u) == 0x7f800000u);
            out[i] = (double)sq_f32_bits(u);
        }
        return bad != 0;
    case SQ_ST_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
            bad |= (uint32_t)((h & 0x7f80u) == 0x7f80u);
            out[i] = (double)sq_hd_bf16_to_f32(h);
        }
        return bad != 0;
    default: /* F16 */
        for (size_t i = 0; i < n; i++) {
            uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
            bad |= (uint32_t)((h & 0x7c00u) == 0x7c00u);
            out[i] = (double)sq_hd_f16_to_f32(h);
        }
        return bad != 0;
    }
}

/* Both conversions: checks the arguments, runs the chunks in parallel and
** names the first bad element (the lowest bad chunk is found whatever the
** thread count, so the message is too). */
static int convert(const sq_st_file *f, const sq_st_entry *e, void *out, int to64, sq_error *err)
{
    const char *path = f && f->name ? f->name : "(null)";
    if (!f || !e) {
        return sq_error_set(err, SQ_ERR_ARG, "%s: no tensor given", path);
    }
    if (!sq_st_dtype_is_float(e->dtype)) {
        const char *dn = sq_st_dtype_name(e->dtype);
        return sq_error_set(
            err, SQ_ERR_FORMAT,
            "%s: tensor '%s': field 'dtype': %s is not a floating-point dtype (F32, F16, "
            "BF16, F64)",
            path, e->name, dn ? dn : "(invalid)");
    }
    size_t isz = sq_st_dtype_size(e->dtype);
    /* The entry must lie in this file's data, as the reader made it. */
    if (e->end > f->data_len || e->begin > e->end || e->data != f->data + e->begin ||
        e->nelem > (e->end - e->begin) / isz || e->nelem * isz != e->end - e->begin) {
        return sq_error_set(err, SQ_ERR_ARG, "%s: tensor '%s': not a tensor of this file", path,
                            e->name);
    }
    uint64_t n = e->nelem;
    if (n == 0) return 0;
    if (!out) {
        return sq_error_set(err, SQ_ERR_ARG, "%s: tensor '%s': no output buffer", path, e->name);
    }
    uint64_t nchunks = (n + CONV_CHUNK - 1) / CONV_CHUNK, first = UINT64_MAX;
#pragma omp parallel for num_threads(sq_get_threads()) if (nchunks > 4) schedule(static) \
    reduction(min : first)
    for (uint64_t c = 0; c < nchunks; c++) {
        uint64_t i0 = c * CONV_CHUNK;
        size_t len = (size_t)(n - i0 < CONV_CHUNK ? n - i0 : CONV_CHUNK);
        const unsigned char *p = e->data + i0 * isz;
        int bad = to64 ? chunk_f64(e->dtype, p, len, (double *)out + i0)
                       : chunk_f32(e->dtype, p, len, (float *)out + i0);
        if (bad && c < first) first = c;
    }
    if (first == UINT64_MAX) return 0;
    return report_bad(f, e, first, err);
}

int sq_st_to_f32(const sq_st_file *f, const sq_st_entry *e, float *out, sq_error *err)
{
    return convert(f, e, out, 0, err);
}

int sq_st_to_f64(const sq_st_file *f, const sq_st_entry *e, double *out, sq_error *err)
{
    return convert(f, e, out, 1, err);
}

int sq_st_to_f32_part(const sq_st_file *f, const sq_st_entry *e, uint64_t first, uint64_t len,
                      float *out)
{
    if (!f || !e || !sq_st_dtype_is_float(e->dtype) || e->data != f->data + e->begin ||
        e->end > f->data_len || first > e->nelem || len > e->nelem - first ||
        e->nelem * sq_st_dtype_size(e->dtype) != e->end - e->begin)
        return SQ_ERR_ARG;
    /* chunk by chunk, each chunk's values checked while they are in cache */
    const size_t isz = sq_st_dtype_size(e->dtype);
    for (uint64_t i = 0; i < len; i += CONV_CHUNK) {
        size_t m = (size_t)(len - i < CONV_CHUNK ? len - i : CONV_CHUNK);
        if (!chunk_f32(e->dtype, e->data + (first + i) * isz, m, out + i)) continue;
        /* the kind of the first bad value, as report_bad names it: a finite
        ** F64 beyond fp32 comes out infinite, but is a range problem */
        for (size_t j = 0; j < m; j++)
            if (sq_hd_nonfinite(out[i + j])) {
                double v = elem_f64(e->dtype, e->data, first + i + j);
                return isfinite(v) ? SQ_ERR_RANGE : SQ_ERR_NONFINITE;
            }
    }
    return SQ_OK;
}
