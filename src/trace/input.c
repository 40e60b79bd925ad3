/*
** input.c -- opening inputs safely, and duplicate JSON keys. See input.h.
*/
#include "trace/input.h"
#include "trace/wfile.h"
#include "shardq/codec.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Opening                                                                  */
/* ------------------------------------------------------------------------ */

int sq_input_is_stdin(const char *path)
{
    return path && (strcmp(path, "-") == 0 || strcmp(path, "/dev/stdin") == 0);
}

/* What a file that is not a regular one is, for messages. */
static const char *kind_of(mode_t m)
{
    return S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
           : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a file";
}

int sq_input_open(const char *path, int flags, sq_input *in, sq_error *err)
{
    memset(in, 0, sizeof *in);
    in->fd = -1;
    if (!path) {
        return sq_error_set(err, SQ_ERR_ARG, "(null): no file name");
    }
    int std = (flags & SQ_INPUT_STDIN) && sq_input_is_stdin(path);
    /* Standard input is a copy of descriptor 0 (closing it leaves stdin
    ** open); anything else is opened without blocking, since open() of a
    ** FIFO waits for a writer. */
    int fd = std ? fcntl(0, F_DUPFD_CLOEXEC, 0) : open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        /* a file that is not there is named as missing, not as a failed read */
        return sq_error_set(err, errno == ENOENT ? SQ_ERR_NOTFOUND : SQ_ERR_IO,
                            "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int rc = sq_error_set(err, SQ_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return rc;
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return sq_error_set(err, SQ_ERR_IO, "%s: is a directory", path);
    }
    int pipe_in = std && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
    if (!S_ISREG(st.st_mode) && !pipe_in) {
        close(fd);
        return sq_error_set(err, SQ_ERR_IO, "%s: not a regular file (%s)%s", path,
                            kind_of(st.st_mode),
                            std ? ": standard input must be a file or a pipe" : "");
    }
    if (!std) {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
            int rc = sq_error_set(err, SQ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
            close(fd);
            return rc;
        }
    }
    in->fd = fd;
    in->stream = pipe_in;
    in->size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
    return 0;
}

FILE *sq_input_fopen(const char *path, int flags, sq_input *in, sq_error *err)
{
    if (sq_input_open(path, flags, in, err)) return NULL;
    FILE *f = fdopen(in->fd, "rb");
    if (!f) {
        sq_error_set(err, SQ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        close(in->fd);
        in->fd = -1;
    }
    return f;
}

/* ------------------------------------------------------------------------ */
/* UTF-8                                                                    */
/* ------------------------------------------------------------------------ */

size_t sq_utf8_invalid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        unsigned c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        /* the lead byte gives the length and the range of the second byte,
        ** which is where overlongs, surrogates and > U+10FFFF show */
        size_t n;
        unsigned lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf) n = 2;
        else if (c >= 0xe0 && c <= 0xef) {
            n = 3;
            if (c == 0xe0) lo = 0xa0;      /* overlong below U+0800 */
            else if (c == 0xed) hi = 0x9f; /* surrogates */
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 4;
            if (c == 0xf0) lo = 0x90;      /* overlong below U+10000 */
            else if (c == 0xf4) hi = 0x8f; /* above U+10FFFF */
        } else
            return i; /* a continuation byte, C0/C1 (overlong ASCII) or F5..FF */
        /* the sequence's first byte is the one named, as Python's decoder does */
        for (size_t k = 1; k < n; k++) {
            if (i + k >= len) return i;
            unsigned b = p[i + k];
            if (k == 1 ? b < lo || b > hi : b < 0x80 || b > 0xbf) return i;
        }
        i += n;
    }
    return len;
}

const char *sq_escape_bytes(const char *s, char *buf, size_t len)
{
    if (!len) return buf;
    size_t at = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        int plain = *p >= 0x20 && *p < 0x7f;
        if (at + (plain ? 1 : 4) >= len) break; /* never half an escape */
        if (plain)
            buf[at++] = (char)*p;
        else
            at += (size_t)snprintf(buf + at, len - at, "\\x%02x", *p);
    }
    buf[at] = '\0';
    return buf;
}

/* ------------------------------------------------------------------------ */
/* Duplicate keys                                                           */
/* ------------------------------------------------------------------------ */

typedef struct keyed {
    const char *key;
    size_t index; /* place in the object */
} keyed;

static int cmp_keyed(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : x->index < y->index ? -1 : x->index > y->index;
}

const char *sq_dup_string(const char *const *keys, size_t n, int *oom)
{
    *oom = 0;
    if (n < 2) return NULL;
    keyed *k = malloc(n * sizeof *k);
    if (!k) {
        *oom = 1;
        return NULL;
    }
    for (size_t i = 0; i < n; i++) k[i] = (keyed){keys[i] ? keys[i] : "", i};
    qsort(k, n, sizeof *k, cmp_keyed);
    const char *dup = NULL;
    size_t at = n;
    for (size_t i = 1; i < n; i++)
        if (strcmp(k[i].key, k[i - 1].key) == 0 && k[i].index < at) {
            at = k[i].index;
            dup = k[i].key;
        }
    free(k);
    return dup;
}

/* The duplicate key of object o, as sq_dup_string finds it. */
static const char *object_dup(const cJSON *o, int *oom)
{
    size_t n = 0;
    for (const cJSON *c = o->child; c; c = c->next) n++;
    if (n < 2) return NULL;
    const char **keys = malloc(n * sizeof *keys);
    if (!keys) {
        *oom = 1;
        return NULL;
    }
    size_t i = 0;
    for (const cJSON *c = o->child; c; c = c->next) keys[i++] = c->string;
    const char *dup = sq_dup_string(keys, n, oom);
    free(keys);
    return dup;
}

/* Depth-first over v, whose path is where[0..used). */
static int walk_dups(const cJSON *v, const char **key, char *where, size_t len, size_t used,
                     int *oom)
{
    if (cJSON_IsObject(v)) {
        const char *d = object_dup(v, oom);
        if (d || *oom) {
            *key = d;
            return 1;
        }
    }
    if (!cJSON_IsObject(v) && !cJSON_IsArray(v)) return 0;
    size_t i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        if (len) {
            if (cJSON_IsArray(v))
                snprintf(where + used, len - used, "[%zu]", i);
            else
                snprintf(where + used, len - used, "%s%s", used ? "." : "", c->string);
        }
        size_t u = len ? strlen(where) : 0;
        if (walk_dups(c, key, where, len, u, oom)) return 1;
        if (len) where[used] = '\0';
    }
    return 0;
}

int sq_json_dup_key(const cJSON *v, const char **key, char *where, size_t wherelen)
{
    int oom = 0;
    *key = NULL;
    if (wherelen) where[0] = '\0';
    if (!walk_dups(v, key, where, wherelen, 0, &oom)) return 0;
    if (oom) return SQ_ERR_NOMEM;
    if (wherelen && !where[0]) snprintf(where, wherelen, "the top level");
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Naming a foreign format                                                  */
/* ------------------------------------------------------------------------ */

/* What a zip archive holds, from the names of the local file headers found
** in buf (a member's header: "PK\3\4", the name's length at byte 26, the
** extra field's at 28, the name at 30; the compressed size at 18 leads to
** the next header when the archive stores members uncompressed, as
** torch.save and numpy.savez do). */
static const char *zip_kind(const unsigned char *buf, size_t len, int *kind)
{
    size_t at = 0;
    int npy = 0, other = 0;
    while (at + 30 <= len && memcmp(buf + at, "PK\3\4", 4) == 0) {
        size_t nlen = (size_t)buf[at + 26] | (size_t)buf[at + 27] << 8;
        size_t xlen = (size_t)buf[at + 28] | (size_t)buf[at + 29] << 8;
        uint64_t csize = (uint64_t)buf[at + 18] | (uint64_t)buf[at + 19] << 8 |
                         (uint64_t)buf[at + 20] << 16 | (uint64_t)buf[at + 21] << 24;
        if (at + 30 + nlen > len) break;
        const char *name = (const char *)buf + at + 30;
        /* torch.save's archive: "<stem>/data.pkl" (archive/data.pkl in
        ** recent versions), always its first member */
        if ((nlen == 8 && memcmp(name, "data.pkl", 8) == 0) ||
            (nlen > 9 && memcmp(name + nlen - 9, "/data.pkl", 9) == 0)) {
            *kind = 1;
            return "a PyTorch checkpoint (torch.save's zip format)";
        }
        if (nlen > 4 && memcmp(name + nlen - 4, ".npy", 4) == 0)
            npy++;
        else
            other++;
        if (csize == 0xffffffffu) break; /* zip64: sizes elsewhere */
        at += 30 + nlen + xlen + (size_t)csize;
    }
    if (npy && !other) {
        *kind = 2;
        return "a NumPy .npz archive";
    }
    return "a zip archive";
}

/* The name of the format whose signature starts buf, or NULL; *kind: 1 a
** PyTorch or Python pickle, 2 .npz, 3 .npy, 4 safetensors, 0 another. */
static const char *format_of(const unsigned char *buf, size_t len, int *kind)
{
    /* legacy torch.save: a pickle (protocol 2) of the magic number
    ** 0x1950a86a20f9469cfc6c, then the protocol version, then the data */
    static const unsigned char torch_magic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                                0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
    *kind = 0;
    if (len >= 4 && memcmp(buf, "PK\3\4", 4) == 0) {
        return zip_kind(buf, len, kind);
    }
    if (len >= sizeof torch_magic && memcmp(buf, torch_magic, sizeof torch_magic) == 0) {
        *kind = 1;
        return "a PyTorch checkpoint (torch.save's legacy pickle format)";
    }
    if (len >= 2 && buf[0] == 0x80 && buf[1] >= 2 && buf[1] <= 5) {
        *kind = 1;
        return "a Python pickle (torch.save or pickle.dump)";
    }
    if (len >= 8 && memcmp(buf, "\x89HDF\r\n\x1a\n", 8) == 0) return "an HDF5 file";
    if (len >= 6 && memcmp(buf, "\x93NUMPY", 6) == 0) {
        *kind = 3;
        return "a NumPy .npy file";
    }
    if (len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b) return "a gzip-compressed file";
    /* safetensors: an 8-byte little-endian header length, then '{' */
    if (len >= 9 && buf[8] == '{' && buf[7] == 0 && buf[6] == 0 && buf[5] == 0) {
        *kind = 4;
        return "a safetensors file";
    }
    return NULL;
}

int sq_input_foreign(const char *path, const unsigned char *buf, size_t len, int expected,
                     sq_error *err)
{
    int kind;
    const char *what = format_of(buf, len, &kind);
    if (!what) return 0;
    if ((kind == 3 && expected == SQ_INPUT_NPY) || (kind == 4 && expected == SQ_INPUT_SAFETENSORS))
        return 0; /* its own format, broken further on: the parser says where */
    const char *hint;
    if (expected == SQ_INPUT_SAFETENSORS) {
        hint = kind == 1 ? "load it and save with safetensors.torch.save_file(state_dict, "
                           "PATH), or capture with shardq's Python package (docs/traces.md)"
               : kind == 2 ? "give each array as a .npy file (numpy.save), or write "
                             "safetensors with safetensors.numpy.save_file(dict(numpy.load(PATH)), "
                             "OUT)"
               : kind == 3 ? "convert with safetensors.numpy.save_file({NAME: "
                             "numpy.load(PATH)}, OUT)"
                           : "write safetensors (safetensors.torch.save_file or "
                             "safetensors.numpy.save_file)";
    } else {
        hint = kind == 2   ? "unpack it: numpy.save(NAME + '.npy', array) for each array of "
                             "numpy.load(PATH)"
               : kind == 1 ? "save each tensor with numpy.save(PATH, t.float().numpy()), or the "
                             "whole state_dict with safetensors.torch.save_file"
               : kind == 4 ? "give it where a safetensors file is read (shardq trace info, "
                             "replay)"
                           : "write .npy with numpy.save";
    }
    return sq_error_set(err, SQ_ERR_FORMAT, "%s: this is %s, not %s: %s", path, what,
                        expected == SQ_INPUT_SAFETENSORS ? "safetensors" : ".npy", hint);
}
