/*
** input.h -- what the readers share: opening an input file so that it
** cannot hang or flood them, the check for duplicate keys in JSON, and
** the machine's byte order.
**
** An input must be a regular file. A FIFO would block open() until some
** writer came (forever, if none does) and a device such as /dev/zero never
** ends, so both are refused by name before a byte is read; the open itself
** is non-blocking, so a FIFO cannot hang it. Standard input ("-" or
** /dev/stdin) is the one exception, where the caller allows it: it may be
** a pipe, and what comes through a pipe is bounded by SQ_INPUT_STREAM_MAX
** bytes (the readers check a header's promise against it before reading).
**
** JSON objects with the same key twice are legal to cJSON, which keeps both
** and finds the first; a manifest or header that says `steps` twice would
** silently lose one. sq_json_dup_key finds such keys in linear time.
*/
#ifndef SQ_TRACE_INPUT_H
#define SQ_TRACE_INPUT_H

#include "shardq/codec.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Both formats store little-endian numbers: a big-endian machine converts
** each value, a little-endian one copies. */
#if defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define SQ_BIG_ENDIAN 1
#else
#define SQ_BIG_ENDIAN 0
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The most bytes a reader takes from a pipe on standard input. */
#define SQ_INPUT_STREAM_MAX ((uint64_t)1 << 32)

/* Flags of sq_input_open. */
#define SQ_INPUT_STDIN 1 /* "-" and /dev/stdin are standard input, may be a pipe */

typedef struct sq_input {
    int fd;        /* open for reading, blocking, close-on-exec */
    int stream;    /* 1: a pipe on standard input, size unknown */
    uint64_t size; /* the size of a regular file */
} sq_input;

/* 1 when path names standard input ("-" or /dev/stdin). */
int sq_input_is_stdin(const char *path);

/* Opens path for reading into *in. Fails, naming path, when it cannot be
** opened, is a directory ("is a directory"), or is not a regular file
** ("not a regular file (a FIFO)"); with SQ_INPUT_STDIN, standard input may
** also be a pipe or FIFO. Never blocks. The kind: SQ_ERR_NOTFOUND when path
** does not exist, SQ_ERR_IO for any other refusal. */
int sq_input_open(const char *path, int flags, sq_input *in, sq_error *err);

/* The same as a stdio stream (*in gets the fd's facts; fclose closes it);
** NULL on failure, with err's kind saying why (when err is not NULL). */
FILE *sq_input_fopen(const char *path, int flags, sq_input *in, sq_error *err);

/* The string of keys[0..n) given twice whose second occurrence comes first
** (the one a reader in order meets first), or NULL. Sorting makes it
** n log n where comparing every pair is quadratic (100k names: a minute).
** *oom is set to 1 when out of memory (and NULL returned). */
const char *sq_dup_string(const char *const *keys, size_t n, int *oom);

/* The formats shardq is asked to read (the `expected` of sq_input_foreign). */
#define SQ_INPUT_SAFETENSORS 0
#define SQ_INPUT_NPY 1

/* The most leading bytes sq_input_foreign looks at: enough for the name of
** a zip archive's first member. */
#define SQ_INPUT_SNIFF_MAX 512

/* When buf[0..len), the first bytes of path, are those of another format
** than `expected` (a PyTorch checkpoint, zip-based or a legacy pickle; a
** Python pickle; a NumPy .npz or .npy; a safetensors file; HDF5; gzip; a
** zip archive), sets err to "PATH: this is <what>, not <expected>: <how to
** write the expected one>" and returns SQ_ERR_FORMAT; otherwise returns 0
** and leaves err alone. Readers call it when the expected header does not
** parse, so that a .pt file is named as one rather than as a safetensors
** file with an absurd header length. */
int sq_input_foreign(const char *path, const unsigned char *buf, size_t len, int expected,
                     sq_error *err);

/* The offset in s[0..len) of the first byte that does not begin valid
** UTF-8 (RFC 3629: no overlong forms, no surrogates U+D800..U+DFFF,
** nothing above U+10FFFF, no sequence cut short; the offset of a bad
** sequence's first byte, as Python's decoder reports it), or len when all
** of it is valid. JSON is UTF-8 (RFC 8259), but cJSON passes any byte through, so a
** name read from a header would come out of `--json` as text no parser takes. */
size_t sq_utf8_invalid(const char *s, size_t len);

/* s with every byte outside printable ASCII written \xNN, into buf[0..len)
** (cut short when it does not fit): a name that is not UTF-8, quotable in a
** message that stays readable. Returns buf. */
const char *sq_escape_bytes(const char *s, char *buf, size_t len);

struct cJSON;
/* Looks for a key given twice in any object of the JSON tree v (objects in
** arrays and objects included). Returns 0 when there is none, 1 with *key
** the duplicated key and where[0..wherelen) the path of its object, e.g.
** "the top level", "params[3]" or "model.layers", and SQ_ERR_NOMEM (negative) when out
** of memory. */
int sq_json_dup_key(const struct cJSON *v, const char **key, char *where, size_t wherelen);

#ifdef __cplusplus
}
#endif
#endif
