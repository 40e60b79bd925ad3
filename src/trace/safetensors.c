/*
** safetensors.c -- writer and validating reader of safetensors files. See
** safetensors.h.
*/
#include "trace/safetensors.h"
#include "trace/npy.h"
#include "trace/wfile.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
    if (!name) return -1;
    for (int i = 0; i < SQ_ST_NDTYPES; i++)
        if (strcmp(dtypes[i].name, name) == 0) return i;
    return -1;
}

/* product(shape) * itemsize into *bytes (and the product into *nelem);
** -1 when either overflows 64 bits. */
static int tensor_bytes(const uint64_t *shape, int ndim, size_t isz, uint64_t *nelem,
                        uint64_t *bytes)
{
    uint64_t n = 1;
    int zero = 0;
    for (int d = 0; d < ndim; d++) zero |= shape[d] == 0;
    for (int d = 0; d < ndim && !zero; d++) {
        if (n > UINT64_MAX / shape[d]) return -1;
        n *= shape[d];
    }
    if (zero) n = 0;
    if (n > UINT64_MAX / isz) return -1;
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

int sq_st_write(const char *path, const sq_st_tensor *t, size_t nt, const sq_st_kv *m,
                size_t nm, char *err, size_t errlen)
{
    const char *fname = path ? path : "(null)";
    if ((nt && !t) || (nm && !m)) {
        sq_set_err(err, errlen, "%s: no tensors or metadata given", fname);
        return -1;
    }
    uint64_t *bytes = malloc((nt ? nt : 1) * sizeof *bytes);
    sbuf b = {0};
    if (!bytes) {
        sq_set_err(err, errlen, "%s: out of memory", fname);
        return -1;
    }
    sb_puts(&b, "{");
    if (nm) {
        sb_puts(&b, "\"__metadata__\":{");
        for (size_t i = 0; i < nm; i++) {
            if (!m[i].key || !m[i].value) {
                sq_set_err(err, errlen, "%s: __metadata__ entry %zu: NULL key or value", fname, i);
                goto fail;
            }
            for (size_t j = 0; j < i; j++)
                if (strcmp(m[i].key, m[j].key) == 0) {
                    sq_set_err(err, errlen, "%s: __metadata__ '%s': given twice", fname, m[i].key);
                    goto fail;
                }
            if (i) sb_puts(&b, ",");
            sb_json_str(&b, m[i].key);
            sb_puts(&b, ":");
            sb_json_str(&b, m[i].value);
        }
        sb_puts(&b, "}");
    }
    uint64_t off = 0;
    for (size_t i = 0; i < nt; i++) {
        const char *name = t[i].name;
        if (!name || !*name || strcmp(name, "__metadata__") == 0) {
            sq_set_err(err, errlen, "%s: tensor %zu: invalid name '%s'", fname, i,
                    name ? name : "(null)");
            goto fail;
        }
        for (size_t j = 0; j < i; j++)
            if (strcmp(name, t[j].name) == 0) {
                sq_set_err(err, errlen, "%s: tensor '%s': name given twice", fname, name);
                goto fail;
            }
        size_t isz = sq_st_dtype_size(t[i].dtype);
        if (!isz) {
            sq_set_err(err, errlen, "%s: tensor '%s': field 'dtype': unknown dtype %d", fname, name,
                    (int)t[i].dtype);
            goto fail;
        }
        if (t[i].ndim < 0 || t[i].ndim > SQ_ST_MAXDIM) {
            sq_set_err(err, errlen, "%s: tensor '%s': field 'shape': %d dimensions", fname, name,
                    t[i].ndim);
            goto fail;
        }
        uint64_t nelem;
        if (tensor_bytes(t[i].shape, t[i].ndim, isz, &nelem, &bytes[i]) ||
            bytes[i] > UINT64_MAX - off || bytes[i] > SIZE_MAX) {
            sq_set_err(err, errlen, "%s: tensor '%s': field 'shape': product overflows", fname,
                    name);
            goto fail;
        }
        if (bytes[i] && !t[i].data) {
            sq_set_err(err, errlen, "%s: tensor '%s': no data", fname, name);
            goto fail;
        }
        sb_puts(&b, b.len > 1 ? "," : "");
        sb_json_str(&b, name);
        sb_printf(&b, ":{\"dtype\":\"%s\",\"shape\":[", sq_st_dtype_name(t[i].dtype));
        for (int d = 0; d < t[i].ndim; d++)
            sb_printf(&b, "%s%llu", d ? "," : "", (unsigned long long)t[i].shape[d]);
        sb_printf(&b, "],\"data_offsets\":[%llu,", (unsigned long long)off);
        off += bytes[i];
        sb_printf(&b, "%llu]}", (unsigned long long)off);
    }
    sb_puts(&b, "}");
    while (!b.oom && b.len % 8) sb_puts(&b, " ");
    if (b.oom) {
        sq_set_err(err, errlen, "%s: out of memory", fname);
        goto fail;
    }
    unsigned char len8[8];
    for (int k = 0; k < 8; k++) len8[k] = (unsigned char)((uint64_t)b.len >> (8 * k));

    sq_wfile w;
    if (sq_wfile_open(&w, path, err, errlen)) goto fail;
    sq_wfile_write(&w, len8, 8);
    sq_wfile_write(&w, b.s, b.len);
    for (size_t i = 0; i < nt; i++) sq_wfile_write(&w, t[i].data, (size_t)bytes[i]);
    free(bytes);
    free(b.s);
    return sq_wfile_commit(&w, err, errlen);
fail:
    free(bytes);
    free(b.s);
    return -1;
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
    free(f->data);
    memset(f, 0, sizeof *f);
}

const sq_st_entry *sq_st_find(const sq_st_file *f, const char *name)
{
    if (!f || !name) return NULL;
    for (size_t i = 0; i < f->ntensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
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
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!(d >= 0.0 && d <= 9007199254740992.0) || d != floor(d)) return -1;
    *out = (uint64_t)d;
    return 0;
}

static int cmp_entry_offsets(const void *a, const void *b)
{
    const sq_st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int cmp_entry_names(const void *a, const void *b)
{
    const sq_st_entry *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

/* Validates one tensor entry of the header into *e. */
static int parse_tensor(const char *path, const cJSON *item, sq_st_entry *e, char *err,
                        size_t errlen)
{
    const char *name = item->string;
    if (!cJSON_IsObject(item)) {
        sq_set_err(err, errlen, "%s: tensor '%s': expected an object with dtype, shape, data_offsets",
                path, name);
        return -1;
    }
    const cJSON *dtype = NULL, *shape = NULL, *offs = NULL;
    for (const cJSON *f = item->child; f; f = f->next) {
        const cJSON **slot = strcmp(f->string, "dtype") == 0 ? &dtype
                             : strcmp(f->string, "shape") == 0 ? &shape
                             : strcmp(f->string, "data_offsets") == 0 ? &offs
                                                                       : NULL;
        if (!slot) {
            sq_set_err(err, errlen,
                    "%s: tensor '%s': unknown field '%s' (expected dtype, shape, data_offsets)",
                    path, name, f->string);
            return -1;
        }
        if (*slot) {
            sq_set_err(err, errlen, "%s: tensor '%s': field '%s': given twice", path, name,
                    f->string);
            return -1;
        }
        *slot = f;
    }
    const char *missing = !dtype ? "dtype" : !shape ? "shape" : !offs ? "data_offsets" : NULL;
    if (missing) {
        sq_set_err(err, errlen, "%s: tensor '%s': field '%s': missing", path, name, missing);
        return -1;
    }
    int dt = cJSON_IsString(dtype) ? sq_st_dtype_parse(dtype->valuestring) : -1;
    if (dt < 0) {
        sq_set_err(err, errlen, "%s: tensor '%s': field 'dtype': unknown dtype %s%s%s", path, name,
                cJSON_IsString(dtype) ? "'" : "(not a string)",
                cJSON_IsString(dtype) ? dtype->valuestring : "",
                cJSON_IsString(dtype) ? "'" : "");
        return -1;
    }
    e->dtype = (sq_st_dtype)dt;
    if (!cJSON_IsArray(shape)) {
        sq_set_err(err, errlen, "%s: tensor '%s': field 'shape': expected an array of integers",
                path, name);
        return -1;
    }
    int nd = 0;
    for (const cJSON *d = shape->child; d; d = d->next, nd++) {
        if (nd == SQ_ST_MAXDIM) {
            sq_set_err(err, errlen, "%s: tensor '%s': field 'shape': more than %d dimensions", path,
                    name, SQ_ST_MAXDIM);
            return -1;
        }
        if (json_uint(d, &e->shape[nd])) {
            sq_set_err(err, errlen,
                    "%s: tensor '%s': field 'shape': entry %d is not a non-negative integer",
                    path, name, nd);
            return -1;
        }
    }
    e->ndim = nd;
    uint64_t bytes;
    if (tensor_bytes(e->shape, nd, sq_st_dtype_size(e->dtype), &e->nelem, &bytes)) {
        sq_set_err(err, errlen, "%s: tensor '%s': field 'shape': product overflows", path, name);
        return -1;
    }
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
        json_uint(offs->child, &e->begin) || json_uint(offs->child->next, &e->end)) {
        sq_set_err(err, errlen,
                "%s: tensor '%s': field 'data_offsets': expected [begin, end], two non-negative "
                "integers",
                path, name);
        return -1;
    }
    if (e->begin > e->end) {
        sq_set_err(err, errlen, "%s: tensor '%s': field 'data_offsets': begin %llu > end %llu", path,
                name, (unsigned long long)e->begin, (unsigned long long)e->end);
        return -1;
    }
    if (bytes != e->end - e->begin) {
        char sh[96];
        sq_npy_shape_str(e->shape, e->ndim, sh, sizeof sh);
        sq_set_err(err, errlen,
                "%s: tensor '%s': field 'shape': %s of %s is %llu bytes, but data_offsets "
                "[%llu, %llu] span %llu",
                path, name, sh, sq_st_dtype_name(e->dtype), (unsigned long long)bytes,
                (unsigned long long)e->begin, (unsigned long long)e->end,
                (unsigned long long)(e->end - e->begin));
        return -1;
    }
    return 0;
}

/* Parses and validates the JSON header hdr (NUL-terminated, N bytes) into *f;
** data_len is the size of the data section. */
static int parse_header(const char *path, const char *hdr, sq_st_file *f, char *err,
                        size_t errlen)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(hdr, &end, 1);
    if (!root) {
        size_t at = end && end >= hdr ? (size_t)(end - hdr) : 0;
        sq_set_err(err, errlen, "%s: header: invalid JSON near byte %zu of the header", path, at);
        return -1;
    }
    int rc = -1;
    if (!cJSON_IsObject(root)) {
        sq_set_err(err, errlen, "%s: header: the JSON is not an object", path);
        goto done;
    }
    size_t count = (size_t)cJSON_GetArraySize(root);
    f->tensors = calloc(count ? count : 1, sizeof *f->tensors);
    if (!f->tensors) {
        sq_set_err(err, errlen, "%s: out of memory", path);
        goto done;
    }
    const cJSON *meta = NULL;
    for (const cJSON *it = root->child; it; it = it->next) {
        if (strcmp(it->string, "__metadata__") == 0) {
            if (meta) {
                sq_set_err(err, errlen, "%s: __metadata__: given twice", path);
                goto done;
            }
            meta = it;
            continue;
        }
        sq_st_entry *e = &f->tensors[f->ntensors];
        e->name = strdup(it->string);
        if (!e->name) {
            sq_set_err(err, errlen, "%s: out of memory", path);
            goto done;
        }
        f->ntensors++;
        if (parse_tensor(path, it, e, err, errlen)) goto done;
    }
    if (meta) {
        if (!cJSON_IsObject(meta)) {
            sq_set_err(err, errlen, "%s: __metadata__: expected an object of strings", path);
            goto done;
        }
        size_t nm = (size_t)cJSON_GetArraySize(meta);
        f->meta = calloc(nm ? nm : 1, sizeof *f->meta);
        if (!f->meta) {
            sq_set_err(err, errlen, "%s: out of memory", path);
            goto done;
        }
        for (const cJSON *kv = meta->child; kv; kv = kv->next) {
            if (!cJSON_IsString(kv)) {
                sq_set_err(err, errlen, "%s: __metadata__ '%s': value is not a string", path,
                        kv->string);
                goto done;
            }
            if (sq_st_meta_get(f, kv->string)) {
                sq_set_err(err, errlen, "%s: __metadata__ '%s': given twice", path, kv->string);
                goto done;
            }
            char *k = strdup(kv->string), *v = strdup(kv->valuestring);
            if (!k || !v) {
                free(k);
                free(v);
                sq_set_err(err, errlen, "%s: out of memory", path);
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
            sq_set_err(err, errlen, "%s: out of memory", path);
            goto done;
        }
        for (size_t i = 0; i < f->ntensors; i++) byname[i] = &f->tensors[i];
        qsort(byname, f->ntensors, sizeof *byname, cmp_entry_names);
        for (size_t i = 1; i < f->ntensors; i++)
            if (strcmp(byname[i]->name, byname[i - 1]->name) == 0) {
                sq_set_err(err, errlen, "%s: tensor '%s': given twice", path, byname[i]->name);
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
static int check_layout(const char *path, sq_st_file *f, char *err, size_t errlen)
{
    qsort(f->tensors, f->ntensors, sizeof *f->tensors, cmp_entry_offsets);
    uint64_t pos = 0;
    for (size_t i = 0; i < f->ntensors; i++) {
        sq_st_entry *e = &f->tensors[i];
        if (e->end > f->data_len) {
            sq_set_err(err, errlen,
                    "%s: tensor '%s': field 'data_offsets': end %llu beyond the data section "
                    "(%llu bytes)",
                    path, e->name, (unsigned long long)e->end, (unsigned long long)f->data_len);
            return -1;
        }
    }
    for (size_t i = 0; i < f->ntensors; i++) {
        sq_st_entry *e = &f->tensors[i];
        if (e->begin < pos) {
            const sq_st_entry *p = &f->tensors[i - 1];
            sq_set_err(err, errlen,
                    "%s: tensor '%s': field 'data_offsets': [%llu, %llu] overlaps tensor '%s' "
                    "[%llu, %llu]",
                    path, e->name, (unsigned long long)e->begin, (unsigned long long)e->end,
                    p->name, (unsigned long long)p->begin, (unsigned long long)p->end);
            return -1;
        }
        if (e->begin > pos) {
            sq_set_err(err, errlen,
                    "%s: data section: bytes [%llu, %llu) belong to no tensor (before tensor "
                    "'%s')",
                    path, (unsigned long long)pos, (unsigned long long)e->begin, e->name);
            return -1;
        }
        pos = e->end;
    }
    if (pos != f->data_len) {
        sq_set_err(err, errlen,
                "%s: data section: bytes [%llu, %llu) at its end belong to no tensor", path,
                (unsigned long long)pos, (unsigned long long)f->data_len);
        return -1;
    }
    for (size_t i = 0; i < f->ntensors; i++)
        f->tensors[i].data = f->data + f->tensors[i].begin;
    return 0;
}

int sq_st_read(const char *path, sq_st_file *out, char *err, size_t errlen)
{
    if (!out) return -1;
    memset(out, 0, sizeof *out);
    if (!path) {
        sq_set_err(err, errlen, "(null): no file name");
        return -1;
    }
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        sq_set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    int rc = -1, sized = 0;
    uint64_t fsize = 0;
    char *hdr = NULL;
    struct stat st;
    if (fstat(fileno(fp), &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            sq_set_err(err, errlen, "%s: is a directory", path);
            goto done;
        }
        if (S_ISREG(st.st_mode)) {
            sized = 1;
            fsize = (uint64_t)st.st_size;
        }
    }
    unsigned char len8[8];
    size_t got = fread(len8, 1, 8, fp);
    if (got != 8) {
        if (ferror(fp))
            sq_set_err(err, errlen, "%s: read error: %s", path, strerror(errno));
        else
            sq_set_err(err, errlen,
                    "%s: not a safetensors file: %zu bytes, too short for the header length",
                    path, got);
        goto done;
    }
    uint64_t n = 0;
    for (int k = 0; k < 8; k++) n |= (uint64_t)len8[k] << (8 * k);
    if (sized && n > fsize - 8) {
        sq_set_err(err, errlen,
                "%s: header length %llu goes beyond the end of the file (%llu bytes)", path,
                (unsigned long long)n, (unsigned long long)fsize);
        goto done;
    }
    if (n > SQ_ST_HEADER_MAX) {
        sq_set_err(err, errlen, "%s: header length %llu exceeds the limit of %llu bytes", path,
                (unsigned long long)n, (unsigned long long)SQ_ST_HEADER_MAX);
        goto done;
    }
    if (n < 2) {
        sq_set_err(err, errlen, "%s: header length %llu: too short for a JSON object", path,
                (unsigned long long)n);
        goto done;
    }
    out->header_len = n;
    hdr = malloc((size_t)n + 1);
    if (!hdr) {
        sq_set_err(err, errlen, "%s: out of memory", path);
        goto done;
    }
    got = fread(hdr, 1, (size_t)n, fp);
    if (got != n) {
        if (ferror(fp))
            sq_set_err(err, errlen, "%s: read error: %s", path, strerror(errno));
        else
            sq_set_err(err, errlen, "%s: header length %llu goes beyond the end of the file", path,
                    (unsigned long long)n);
        goto done;
    }
    hdr[n] = '\0';
    if (strlen(hdr) != n) {
        sq_set_err(err, errlen, "%s: header: NUL byte at byte %zu of the JSON", path, strlen(hdr));
        goto done;
    }
    if (hdr[0] != '{') {
        sq_set_err(err, errlen, "%s: header: does not start with '{'", path);
        goto done;
    }
    if (parse_header(path, hdr, out, err, errlen)) goto done;
    /* The data section. */
    if (sized) {
        out->data_len = fsize - 8 - n;
        if (out->data_len > SIZE_MAX) {
            sq_set_err(err, errlen, "%s: data section too large for memory", path);
            goto done;
        }
        out->data = malloc(out->data_len ? (size_t)out->data_len : 1);
        if (!out->data) {
            sq_set_err(err, errlen, "%s: out of memory for %llu bytes of data", path,
                    (unsigned long long)out->data_len);
            goto done;
        }
        got = out->data_len ? fread(out->data, 1, (size_t)out->data_len, fp) : 0;
        if (got != out->data_len) {
            sq_set_err(err, errlen, "%s: %s", path,
                    ferror(fp) ? strerror(errno) : "file shrank while being read");
            goto done;
        }
    } else {
        size_t cap = 1 << 16, len = 0;
        out->data = malloc(cap);
        for (;;) {
            if (!out->data) {
                sq_set_err(err, errlen, "%s: out of memory", path);
                goto done;
            }
            len += fread(out->data + len, 1, cap - len, fp);
            if (len < cap) break;
            unsigned char *p = cap <= SIZE_MAX / 2 ? realloc(out->data, cap * 2) : NULL;
            if (!p) free(out->data);
            out->data = p;
            cap *= 2;
        }
        if (ferror(fp)) {
            sq_set_err(err, errlen, "%s: read error: %s", path, strerror(errno));
            goto done;
        }
        out->data_len = len;
    }
    if (check_layout(path, out, err, errlen)) goto done;
    rc = 0;
done:
    free(hdr);
    fclose(fp);
    if (rc) sq_st_free(out);
    return rc;
}
