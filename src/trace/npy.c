/*
** npy.c -- the .npy reader and writer, and raw float32 input. See npy.h.
**
** The .npy format (NumPy's numpy/lib/format.py documents it): the magic
** "\x93NUMPY", a major and a minor version byte, the header length (2 bytes
** little-endian in version 1.0, 4 bytes in 2.0 and 3.0), then the header: a
** Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)}
** padded with spaces and ended by a newline, then the raw data.
*/
#include "shardq/trace.h"
#include "trace/input.h"
#include "trace/wfile.h"
#include "shardq/codec.h"
#include "sq_hd.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The longest header we accept: NumPy itself refuses more than 10000 bytes by
** default; a header of 64 dimensions takes under 1.5 kB. */
#define NPY_HEADER_MAX ((uint32_t)1 << 20)
/* Bytes read and converted at a time. */
#define CHUNK_BYTES ((size_t)1 << 20)
/* Trailing bytes counted on a pipe before giving up counting. */
#define TRAILING_MAX ((uint64_t)1 << 20)

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

const char *sq_npy_dtype_name(sq_npy_dtype d)
{
    switch (d) {
    case SQ_NPY_F4: return "<f4";
    case SQ_NPY_F8: return "<f8";
    case SQ_NPY_F2: return "<f2";
    case SQ_NPY_RAW_F4: return "raw-f32";
    }
    return "?";
}

static size_t dtype_size(sq_npy_dtype d)
{
    return d == SQ_NPY_F8 ? 8 : d == SQ_NPY_F2 ? 2 : 4;
}

void sq_npy_free(sq_npy *a)
{
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

int sq_npy_shape_str(const uint64_t *shape, int ndim, char *buf, size_t len)
{
    size_t used = 0;
    int total = 0;
    for (int d = -1; d <= ndim; d++) {
        char piece[32];
        int k;
        if (d < 0)
            k = snprintf(piece, sizeof piece, "[");
        else if (d == ndim)
            k = snprintf(piece, sizeof piece, "]");
        else
            k = snprintf(piece, sizeof piece, "%s%llu", d ? ", " : "",
                         (unsigned long long)shape[d]);
        total += k;
        if (buf && len && used + 1 < len) {
            size_t room = len - 1 - used, take = (size_t)k < room ? (size_t)k : room;
            memcpy(buf + used, piece, take);
            used += take;
        }
    }
    if (buf && len) buf[used] = '\0';
    return total;
}

/* ------------------------------------------------------------------------ */
/* Little-endian loads                                                      */
/* ------------------------------------------------------------------------ */

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Converts count elements of dtype d (little-endian bytes) to float32. */
static void convert_chunk(sq_npy_dtype d, const unsigned char *in, size_t count, float *out)
{
    if (d == SQ_NPY_F4 || d == SQ_NPY_RAW_F4) {
        if (!SQ_BIG_ENDIAN) {
            memcpy(out, in, count * 4);
            return;
        }
        for (size_t i = 0; i < count; i++) {
            uint32_t u = le32(in + 4 * i);
            memcpy(&out[i], &u, 4);
        }
    } else if (d == SQ_NPY_F8) {
        for (size_t i = 0; i < count; i++) {
            uint64_t u = (uint64_t)le32(in + 8 * i) | (uint64_t)le32(in + 8 * i + 4) << 32;
            double v;
            memcpy(&v, &u, 8);
            /* float32 overflow made explicit (round to nearest even): from
            ** FLT_MAX + half an ulp on, the value rounds to infinity. */
            if (fabs(v) >= 0x1.ffffffp+127)
                out[i] = v > 0 ? INFINITY : -INFINITY;
            else
                out[i] = (float)v; /* NaN stays NaN */
        }
    } else {
        for (size_t i = 0; i < count; i++)
            out[i] = sq_f16_to_f32((uint16_t)(in[2 * i] | in[2 * i + 1] << 8));
    }
}

/* ------------------------------------------------------------------------ */
/* The header dictionary                                                    */
/* ------------------------------------------------------------------------ */

typedef struct hparser {
    const char *s;
    size_t i, len;
    const char *path;
    sq_error *err;
} hparser;

static void skip_ws(hparser *p)
{
    while (p->i < p->len &&
           (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

/* A printable excerpt of the header from position i, for error messages. */
static const char *excerpt(const hparser *p, size_t i, char *buf, size_t len)
{
    size_t k = 0;
    if (i >= p->len) return "end of header";
    buf[k++] = '\'';
    while (i < p->len && k + 5 < len && k < 24) {
        unsigned char c = (unsigned char)p->s[i++];
        buf[k++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (i < p->len) {
        buf[k++] = '.';
        buf[k++] = '.';
        buf[k++] = '.';
    }
    buf[k++] = '\'';
    buf[k] = '\0';
    return buf;
}

/* A quoted string (single or double quotes, no escapes) into out[0..cap). */
static int parse_string(hparser *p, const char *what, char *out, size_t cap)
{
    char ex[40];
    if (p->i >= p->len || (p->s[p->i] != '\'' && p->s[p->i] != '"')) {
        return sq_error_set(p->err, SQ_ERR_FORMAT, "%s: %s: expected a quoted string, found %s",
                            p->path, what, excerpt(p, p->i, ex, sizeof ex));
    }
    char q = p->s[p->i++];
    size_t k = 0;
    while (p->i < p->len && p->s[p->i] != q) {
        unsigned char c = (unsigned char)p->s[p->i];
        if (c == '\\' || c < 0x20 || c >= 0x7f) {
            return sq_error_set(p->err, SQ_ERR_FORMAT,
                                "%s: %s: unsupported character in a string (escape or non-ASCII)",
                                p->path, what);
        }
        if (k + 1 >= cap) {
            return sq_error_set(p->err, SQ_ERR_FORMAT, "%s: %s: string too long", p->path, what);
        }
        out[k++] = (char)c;
        p->i++;
    }
    if (p->i >= p->len) {
        return sq_error_set(p->err, SQ_ERR_FORMAT, "%s: %s: unterminated string", p->path, what);
    }
    p->i++;
    out[k] = '\0';
    return 0;
}

static int is_ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static int parse_bool(hparser *p, int *out)
{
    char ex[40];
    size_t start = p->i;
    while (p->i < p->len && is_ident_char(p->s[p->i])) p->i++;
    size_t k = p->i - start;
    if (k == 4 && memcmp(p->s + start, "True", 4) == 0) {
        *out = 1;
        return 0;
    }
    if (k == 5 && memcmp(p->s + start, "False", 5) == 0) {
        *out = 0;
        return 0;
    }
    return sq_error_set(p->err, SQ_ERR_FORMAT,
                        "%s: header field 'fortran_order': expected True or False, found %s",
                        p->path, excerpt(p, start, ex, sizeof ex));
}

/* A tuple of non-negative integers: (), (5,), (3, 4), (3, 4,). */
static int parse_shape(hparser *p, uint64_t *shape, int *ndim)
{
    char ex[40];
    size_t start = p->i;
    if (p->i >= p->len || p->s[p->i] != '(') {
        return sq_error_set(
            p->err, SQ_ERR_FORMAT,
            "%s: header field 'shape': expected a tuple of non-negative integers, found %s",
            p->path, excerpt(p, start, ex, sizeof ex));
    }
    p->i++;
    int nd = 0, commas = 0;
    skip_ws(p);
    while (p->i < p->len && p->s[p->i] != ')') {
        if (p->s[p->i] == '-') {
            return sq_error_set(p->err, SQ_ERR_FORMAT,
                                "%s: header field 'shape': negative dimension %s", p->path,
                                excerpt(p, p->i, ex, sizeof ex));
        }
        if (p->s[p->i] < '0' || p->s[p->i] > '9') {
            return sq_error_set(p->err, SQ_ERR_FORMAT,
                                "%s: header field 'shape': expected an integer, found %s", p->path,
                                excerpt(p, p->i, ex, sizeof ex));
        }
        if (p->s[p->i] == '0' && p->i + 1 < p->len && p->s[p->i + 1] >= '0' &&
            p->s[p->i + 1] <= '9') {
            return sq_error_set(p->err, SQ_ERR_FORMAT,
                                "%s: header field 'shape': integer with a leading zero %s", p->path,
                                excerpt(p, p->i, ex, sizeof ex));
        }
        uint64_t v = 0;
        while (p->i < p->len && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
            unsigned dgt = (unsigned)(p->s[p->i] - '0');
            if (v > (UINT64_MAX - dgt) / 10) {
                return sq_error_set(p->err, SQ_ERR_FORMAT,
                                    "%s: header field 'shape': dimension %d does not fit 64 bits",
                                    p->path, nd);
            }
            v = 10 * v + dgt;
            p->i++;
        }
        if (p->i < p->len && p->s[p->i] == 'L') p->i++; /* Python 2 long */
        if (nd == SQ_NPY_MAXDIM) {
            return sq_error_set(p->err, SQ_ERR_FORMAT,
                                "%s: header field 'shape': more than %d dimensions", p->path,
                                SQ_NPY_MAXDIM);
        }
        shape[nd++] = v;
        skip_ws(p);
        if (p->i < p->len && p->s[p->i] == ',') {
            commas++;
            p->i++;
            skip_ws(p);
        } else if (p->i < p->len && p->s[p->i] != ')') {
            return sq_error_set(p->err, SQ_ERR_FORMAT,
                                "%s: header field 'shape': expected ',' or ')', found %s", p->path,
                                excerpt(p, p->i, ex, sizeof ex));
        }
    }
    if (p->i >= p->len) {
        return sq_error_set(p->err, SQ_ERR_FORMAT, "%s: header field 'shape': unterminated tuple",
                            p->path);
    }
    p->i++; /* ')' */
    if (nd == 1 && commas == 0) {
        return sq_error_set(
            p->err, SQ_ERR_FORMAT,
            "%s: header field 'shape': (%llu) is not a tuple (a 1-d shape is written (%llu,))",
            p->path, (unsigned long long)shape[0], (unsigned long long)shape[0]);
    }
    *ndim = nd;
    return 0;
}

static int parse_header(hparser *p, sq_npy *out)
{
    char ex[40];
    int have_descr = 0, have_fortran = 0, have_shape = 0, fortran = 0, rc;
    char descr[64] = "";
    skip_ws(p);
    if (p->i >= p->len || p->s[p->i] != '{') {
        return sq_error_set(p->err, SQ_ERR_FORMAT,
                            "%s: header: expected a dictionary '{...}', found %s", p->path,
                            excerpt(p, p->i, ex, sizeof ex));
    }
    p->i++;
    for (;;) {
        skip_ws(p);
        if (p->i < p->len && p->s[p->i] == '}') break;
        char key[64];
        if ((rc = parse_string(p, "header key", key, sizeof key)) != 0) return rc;
        skip_ws(p);
        if (p->i >= p->len || p->s[p->i] != ':') {
            return sq_error_set(p->err, SQ_ERR_FORMAT,
                                "%s: header field '%s': expected ':', found %s", p->path, key,
                                excerpt(p, p->i, ex, sizeof ex));
        }
        p->i++;
        skip_ws(p);
        int *seen;
        if (strcmp(key, "descr") == 0)
            seen = &have_descr;
        else if (strcmp(key, "fortran_order") == 0)
            seen = &have_fortran;
        else if (strcmp(key, "shape") == 0)
            seen = &have_shape;
        else {
            return sq_error_set(
                p->err, SQ_ERR_FORMAT,
                "%s: header: unknown key '%s' (expected 'descr', 'fortran_order', 'shape')",
                p->path, key);
        }
        if (*seen) {
            return sq_error_set(p->err, SQ_ERR_FORMAT, "%s: header field '%s': given twice",
                                p->path, key);
        }
        *seen = 1;
        if (seen == &have_descr) {
            if ((rc = parse_string(p, "header field 'descr'", descr, sizeof descr)) != 0) return rc;
        } else if (seen == &have_fortran) {
            if ((rc = parse_bool(p, &fortran)) != 0) return rc;
        } else {
            if ((rc = parse_shape(p, out->shape, &out->ndim)) != 0) return rc;
        }
        skip_ws(p);
        if (p->i < p->len && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->len && p->s[p->i] == '}') break;
        return sq_error_set(p->err, SQ_ERR_FORMAT,
                            "%s: header field '%s': expected ',' or '}' after it, found %s",
                            p->path, key, excerpt(p, p->i, ex, sizeof ex));
    }
    p->i++; /* '}' */
    skip_ws(p);
    if (p->i < p->len) {
        return sq_error_set(p->err, SQ_ERR_FORMAT,
                            "%s: header: unexpected text after the dictionary: %s", p->path,
                            excerpt(p, p->i, ex, sizeof ex));
    }
    const char *missing = !have_descr ? "descr" : !have_fortran ? "fortran_order"
                          : !have_shape ? "shape" : NULL;
    if (missing) {
        return sq_error_set(p->err, SQ_ERR_FORMAT, "%s: header field '%s': missing", p->path,
                            missing);
    }
    if (strcmp(descr, "<f4") == 0)
        out->dtype = SQ_NPY_F4;
    else if (strcmp(descr, "<f8") == 0)
        out->dtype = SQ_NPY_F8;
    else if (strcmp(descr, "<f2") == 0)
        out->dtype = SQ_NPY_F2;
    else {
        return sq_error_set(
            p->err, SQ_ERR_FORMAT,
            "%s: header field 'descr': unsupported dtype '%s' (shardq reads <f4, <f8, <f2)",
            p->path, descr);
    }
    if (fortran) {
        return sq_error_set(
            p->err, SQ_ERR_FORMAT,
            "%s: header field 'fortran_order': True is not supported (write the array in "
            "C order, e.g. numpy.ascontiguousarray)",
            p->path);
    }
    /* n = product of the shape, and n * 8 bytes must stay addressable. */
    uint64_t n = 1;
    int zero = 0;
    for (int d = 0; d < out->ndim; d++) zero |= out->shape[d] == 0;
    if (zero)
        n = 0;
    else
        for (int d = 0; d < out->ndim; d++) {
            if (n > UINT64_MAX / out->shape[d]) {
                return sq_error_set(p->err, SQ_ERR_FORMAT,
                                    "%s: header field 'shape': product overflows", p->path);
            }
            n *= out->shape[d];
        }
    uint64_t limit = (uint64_t)(SIZE_MAX < UINT64_MAX ? SIZE_MAX : UINT64_MAX) / 8;
    if (n > limit) {
        return sq_error_set(p->err, SQ_ERR_FORMAT, "%s: header field 'shape': product overflows",
                            p->path);
    }
    out->n = n;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                  */
/* ------------------------------------------------------------------------ */

/* Where the bytes come from: a file, or a whole image in memory (which is
** "sized" like a regular file). */
typedef struct src {
    FILE *f;                  /* the file, or NULL for a buffer */
    const unsigned char *buf; /* the buffer when f is NULL */
    size_t pos;               /* bytes of buf consumed */
    int sized;      /* a regular file or a buffer, whose size is known */
    uint64_t size;  /* the file size when sized */
} src;

/* Reads up to len bytes; returns how many (short only at EOF or on error). */
static size_t read_some(src *s, void *buf, size_t len)
{
    if (!len) return 0;
    if (s->f) return fread(buf, 1, len, s->f);
    size_t left = (size_t)s->size - s->pos, k = len < left ? len : left;
    if (k) memcpy(buf, s->buf + s->pos, k);
    s->pos += k;
    return k;
}

/* A regular file, or a pipe on standard input (input.h). */
static int open_src(const char *path, src *s, sq_error *err)
{
    memset(s, 0, sizeof *s);
    sq_input in;
    int rc = sq_input_open(path, SQ_INPUT_STDIN, &in, err);
    if (rc) return rc;
    s->f = fdopen(in.fd, "rb");
    if (!s->f) {
        rc = sq_error_set(err, SQ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        close(in.fd);
        return rc;
    }
    s->sized = !in.stream;
    s->size = in.size;
    return 0;
}

/* SQ_ERR_IO when the stream failed (not merely ended), else SQ_OK. */
static int read_error(src *s, const char *path, sq_error *err)
{
    if (s->f && ferror(s->f))
        return sq_error_set(err, SQ_ERR_IO, "%s: read error: %s", path,
                            strerror(errno ? errno : EIO));
    return SQ_OK;
}

/* Reads n elements of dtype d from s into a new out->data, then checks that
** the file ends there. `offset` is where the data starts (for messages). */
static int read_data(src *s, const char *path, uint64_t offset, sq_npy *out, sq_error *err)
{
    size_t isz = dtype_size(out->dtype);
    uint64_t want = out->n * isz;
    int rc;
    const char *dname = sq_npy_dtype_name(out->dtype);
    if (!s->sized && want > SQ_INPUT_STREAM_MAX) {
        return sq_error_set(err, SQ_ERR_UNSUPPORTED,
                            "%s: the header promises %llu bytes of %s, more than the %llu "
                            "read from a pipe: give the file by name",
                            path, (unsigned long long)want, dname,
                            (unsigned long long)SQ_INPUT_STREAM_MAX);
    }
    if (s->sized) {
        uint64_t have = s->size > offset ? s->size - offset : 0;
        if (have < want) {
            return sq_error_set(
                err, SQ_ERR_FORMAT,
                "%s: data truncated: header promises %llu bytes of %s, file has %llu", path,
                (unsigned long long)want, dname, (unsigned long long)have);
        }
        if (have > want) {
            return sq_error_set(
                err, SQ_ERR_FORMAT,
                "%s: %llu bytes of trailing data after the %llu bytes of %s the header promises",
                path, (unsigned long long)(have - want), (unsigned long long)want, dname);
        }
    }
    out->data = malloc(out->n ? (size_t)out->n * sizeof(float) : 1);
    if (!out->data) {
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory for %llu values", path,
                            (unsigned long long)out->n);
    }
    /* A small array needs no megabyte of scratch. */
    size_t chunk_bytes = want < CHUNK_BYTES ? (size_t)want : CHUNK_BYTES;
    unsigned char *chunk = NULL;
    if (out->dtype != SQ_NPY_F4 || SQ_BIG_ENDIAN) {
        chunk = malloc(chunk_bytes ? chunk_bytes : 1);
        if (!chunk) {
            return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
        }
    }
    uint64_t done = 0; /* elements */
    size_t per = chunk_bytes / isz;
    while (done < out->n) {
        size_t count = out->n - done < per ? (size_t)(out->n - done) : per;
        size_t got;
        if (chunk) {
            got = read_some(s, chunk, count * isz);
            convert_chunk(out->dtype, chunk, got / isz, out->data + done);
        } else {
            got = read_some(s, out->data + done, count * isz);
        }
        if (got != count * isz) {
            free(chunk);
            if ((rc = read_error(s, path, err)) != 0) return rc;
            return sq_error_set(
                err, SQ_ERR_FORMAT,
                "%s: data truncated: header promises %llu bytes of %s, file has %llu", path,
                (unsigned long long)want, dname, (unsigned long long)(done * isz + got));
        }
        done += count;
    }
    free(chunk);
    if (!s->sized) {
        /* A pipe: the size was unknown, so look for more bytes, but not
        ** for ever (a pipe from /dev/zero never ends). */
        unsigned char extra[4096];
        uint64_t more = 0;
        size_t got;
        while (more <= TRAILING_MAX && (got = read_some(s, extra, sizeof extra)) > 0) more += got;
        if ((rc = read_error(s, path, err)) != 0) return rc;
        if (more) {
            return sq_error_set(
                err, SQ_ERR_FORMAT,
                "%s: %s%llu bytes of trailing data after the %llu bytes of %s the header "
                "promises",
                path, more > TRAILING_MAX ? "more than " : "",
                (unsigned long long)(more > TRAILING_MAX ? TRAILING_MAX : more),
                (unsigned long long)want, dname);
        }
    }
    return 0;
}

/* What both readers do first: clear *out and open path. */
static int begin_read(const char *path, sq_npy *out, src *s, sq_error *err)
{
    if (!out) return sq_error_set(err, SQ_ERR_ARG, "%s: no array given", path ? path : "(null)");
    memset(out, 0, sizeof *out);
    if (!path) {
        return sq_error_set(err, SQ_ERR_ARG, "(null): no file name");
    }
    return open_src(path, s, err);
}

/* Reads a .npy image from s (its name is path) into *out, which is zeroed;
** frees it again on failure. */
static int read_npy(src *s, const char *path, sq_npy *out, sq_error *err)
{
    unsigned char pre[12];
    int rc;
    char *header = NULL;
    size_t got = read_some(s, pre, 8);
    if ((rc = read_error(s, path, err)) != 0) goto done;
    if (got == 0) {
        rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: not a .npy file: the file is empty", path);
        goto done;
    }
    if (got < 6 ? memcmp(pre, npy_magic, got) != 0 : memcmp(pre, npy_magic, 6) != 0) {
        /* a format given by mistake (an .npz, a .pt) is named as such */
        unsigned char sniff[SQ_INPUT_SNIFF_MAX];
        memcpy(sniff, pre, got);
        size_t more = got == 8 ? read_some(s, sniff + 8, sizeof sniff - 8) : 0;
        if ((rc = read_error(s, path, err)) != 0) goto done;
        if ((rc = sq_input_foreign(path, sniff, got + more, SQ_INPUT_NPY, err)) != 0) goto done;
        rc = sq_error_set(err, SQ_ERR_FORMAT,
                          "%s: not a .npy file: bad magic string (expected \\x93NUMPY)", path);
        goto done;
    }
    if (got < 8) {
        rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: truncated header: the file ends after %zu bytes",
                          path, got);
        goto done;
    }
    int major = pre[6], minor = pre[7];
    if (major < 1 || major > 3 || minor != 0) {
        rc = sq_error_set(
            err, SQ_ERR_FORMAT,
            "%s: header field 'version': unsupported format version %d.%d (shardq reads 1.0, "
            "2.0 and 3.0)",
            path, major, minor);
        goto done;
    }
    size_t lenbytes = major == 1 ? 2 : 4;
    got = read_some(s, pre + 8, lenbytes);
    if (got != lenbytes) {
        if ((rc = read_error(s, path, err)) != 0) goto done;
        rc = sq_error_set(err, SQ_ERR_FORMAT,
                          "%s: truncated header: the file ends in the header length field", path);
        goto done;
    }
    uint32_t hlen = major == 1 ? (uint32_t)(pre[8] | pre[9] << 8) : le32(pre + 8);
    uint64_t prefix = 8 + lenbytes;
    if (s->sized && prefix + hlen > s->size) {
        rc = sq_error_set(err, SQ_ERR_FORMAT,
                          "%s: header field 'header_len': %u bytes go beyond the end of the file "
                          "(%llu bytes)",
                          path, hlen, (unsigned long long)s->size);
        goto done;
    }
    if (hlen > NPY_HEADER_MAX) {
        rc = sq_error_set(err, SQ_ERR_FORMAT,
                          "%s: header field 'header_len': %u bytes is absurd (limit %u)", path,
                          hlen, NPY_HEADER_MAX);
        goto done;
    }
    header = malloc((size_t)hlen + 1);
    if (!header) {
        rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    got = read_some(s, header, hlen);
    if (got != hlen) {
        if ((rc = read_error(s, path, err)) != 0) goto done;
        rc = sq_error_set(
            err, SQ_ERR_FORMAT,
            "%s: truncated header: header length says %u bytes, the file ends after %zu", path,
            hlen, got);
        goto done;
    }
    header[hlen] = '\0';
    hparser p = {header, 0, hlen, path, err};
    if ((rc = parse_header(&p, out)) != 0) goto done;
    out->version = major;
    rc = read_data(s, path, prefix + hlen, out, err);
done:
    free(header);
    if (rc) sq_npy_free(out);
    return rc;
}

int sq_npy_read(const char *path, sq_npy *out, sq_error *err)
{
    src s;
    int rc = begin_read(path, out, &s, err);
    if (rc) return rc;
    rc = read_npy(&s, path, out, err);
    fclose(s.f);
    return rc;
}

int sq_npy_parse(const char *name, const void *buf, size_t len, sq_npy *out, sq_error *err)
{
    if (!out) return sq_error_set(err, SQ_ERR_ARG, "%s: no array given", name ? name : "(memory)");
    memset(out, 0, sizeof *out);
    const char *path = name ? name : "(memory)";
    if (!buf && len) {
        return sq_error_set(err, SQ_ERR_ARG, "%s: no buffer given", path);
    }
    src s = {NULL, buf, 0, 1, len};
    return read_npy(&s, path, out, err);
}

int sq_npy_check_finite(const char *name, const sq_npy *a, sq_error *err)
{
    const char *path = name ? name : "(null)";
    if (!a || (a->n && !a->data)) {
        return sq_error_set(err, SQ_ERR_ARG, "%s: no array given", path);
    }
    /* Blocks of a branch-free test (vectorised); the slow search only in
    ** the block known to hold a bad value. */
    const uint64_t block = 4096;
    for (uint64_t b0 = 0; b0 < a->n; b0 += block) {
        uint64_t b1 = a->n - b0 < block ? a->n : b0 + block;
        uint32_t bad = 0;
        for (uint64_t i = b0; i < b1; i++) bad |= (uint32_t)sq_hd_nonfinite(a->data[i]);
        if (!bad) continue;
        for (uint64_t i = b0; i < b1; i++) {
            float v = a->data[i];
            if (isnan(v) || isinf(v)) {
                return sq_error_set(err, SQ_ERR_NONFINITE, "%s: element %llu is %s", path,
                                    (unsigned long long)i,
                                    isnan(v) ? "NaN"
                                    : v > 0  ? "+Inf"
                                             : "-Inf");
            }
        }
    }
    return 0;
}

int sq_npy_read_raw(const char *path, sq_npy *out, sq_error *err)
{
    src s;
    int rc = begin_read(path, out, &s, err);
    if (rc) return rc;
    out->dtype = SQ_NPY_RAW_F4;
    out->ndim = 1;
    if (s.sized) {
        if (s.size % 4) {
            rc = sq_error_set(err, SQ_ERR_FORMAT,
                              "%s: raw float32 input: file size %llu is not a multiple of 4 bytes",
                              path, (unsigned long long)s.size);
            goto done;
        }
        if (s.size / 4 > (uint64_t)SIZE_MAX / sizeof(float)) {
            rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: raw float32 input: too large", path);
            goto done;
        }
        out->n = s.size / 4;
        out->shape[0] = out->n;
        rc = read_data(&s, path, 0, out, err);
    } else {
        /* A pipe: grow a buffer until EOF, up to the limit of a pipe. */
        size_t cap = 1 << 16, len = 0;
        unsigned char *buf = malloc(cap);
        for (;;) {
            if (!buf) {
                rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
                goto done;
            }
            size_t got = read_some(&s, buf + len, cap - len);
            len += got;
            if (len < cap) break;
            if ((uint64_t)len >= SQ_INPUT_STREAM_MAX) {
                rc = sq_error_set(err, SQ_ERR_UNSUPPORTED,
                                  "%s: raw float32 input: %llu bytes or more from a pipe, "
                                  "the most it takes: give the file by name",
                                  path, (unsigned long long)SQ_INPUT_STREAM_MAX);
                free(buf);
                goto done;
            }
            unsigned char *nb = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (!nb) free(buf);
            buf = nb;
            cap *= 2;
        }
        if ((rc = read_error(&s, path, err)) != 0 || len % 4) {
            if (!rc)
                rc = sq_error_set(err, SQ_ERR_FORMAT,
                                  "%s: raw float32 input: size %zu is not a multiple of 4 bytes",
                                  path, len);
            free(buf);
            goto done;
        }
        out->n = len / 4;
        out->shape[0] = out->n;
        out->data = malloc(len ? len : 1);
        if (!out->data) {
            free(buf);
            rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
            goto done;
        }
        convert_chunk(SQ_NPY_RAW_F4, buf, len / 4, out->data);
        free(buf);
        rc = 0;
    }
done:
    fclose(s.f);
    if (rc) sq_npy_free(out);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                  */
/* ------------------------------------------------------------------------ */

int sq_npy_write_f32(const char *path, const float *x, const uint64_t *shape, int ndim,
                     sq_error *err)
{
    const char *name = path ? path : "(null)";
    if (ndim < 0 || ndim > SQ_NPY_MAXDIM || (ndim > 0 && !shape)) {
        return sq_error_set(err, SQ_ERR_ARG, "%s: shape: %d dimensions (0 to %d allowed)", name,
                            ndim, SQ_NPY_MAXDIM);
    }
    uint64_t n = 1;
    int zero = 0;
    for (int d = 0; d < ndim; d++) zero |= shape[d] == 0;
    for (int d = 0; d < ndim && !zero; d++) {
        if (n > UINT64_MAX / shape[d]) {
            return sq_error_set(err, SQ_ERR_ARG, "%s: shape: product overflows", name);
        }
        n *= shape[d];
    }
    if (zero) n = 0;
    if (n > (uint64_t)SIZE_MAX / sizeof(float)) {
        return sq_error_set(err, SQ_ERR_ARG, "%s: shape: product overflows", name);
    }
    if (n && !x) {
        return sq_error_set(err, SQ_ERR_ARG, "%s: no data", name);
    }
    /* The header: magic, version 1.0, length, dict, spaces, newline; the
    ** whole preamble a multiple of 64 bytes. */
    char dict[64 * 24 + 128];
    int k = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    for (int d = 0; d < ndim; d++)
        k += snprintf(dict + k, sizeof dict - (size_t)k, "%s%llu", d ? ", " : "",
                      (unsigned long long)shape[d]);
    k += snprintf(dict + k, sizeof dict - (size_t)k, "%s), }", ndim == 1 ? "," : "");
    size_t total = 10 + (size_t)k + 1;
    total = (total + 63) / 64 * 64;
    size_t hlen = total - 10;
    unsigned char *head = malloc(total);
    if (!head) {
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", name);
    }
    memcpy(head, npy_magic, 6);
    head[6] = 1;
    head[7] = 0;
    head[8] = (unsigned char)(hlen & 0xff);
    head[9] = (unsigned char)(hlen >> 8);
    memcpy(head + 10, dict, (size_t)k);
    memset(head + 10 + k, ' ', total - 10 - (size_t)k - 1);
    head[total - 1] = '\n';

    sq_wfile w;
    int rc = sq_wfile_open(&w, path, err);
    if (rc) {
        free(head);
        return rc;
    }
    sq_wfile_write(&w, head, total);
    free(head);
    if (!SQ_BIG_ENDIAN) {
        sq_wfile_write(&w, x, (size_t)n * sizeof(float));
    } else {
        unsigned char buf[4096];
        for (uint64_t i = 0; i < n;) {
            size_t m = 0;
            for (; m < sizeof buf / 4 && i < n; m++, i++) {
                uint32_t u;
                memcpy(&u, &x[i], 4);
                buf[4 * m] = (unsigned char)u;
                buf[4 * m + 1] = (unsigned char)(u >> 8);
                buf[4 * m + 2] = (unsigned char)(u >> 16);
                buf[4 * m + 3] = (unsigned char)(u >> 24);
            }
            sq_wfile_write(&w, buf, 4 * m);
        }
    }
    return sq_wfile_commit(&w, err);
}
