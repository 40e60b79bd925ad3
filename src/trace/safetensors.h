/*
** safetensors.h -- a writer and a validating reader of safetensors files.
**
** Layout: 8 bytes little-endian N, N bytes of JSON, then the data section.
** The JSON object maps each tensor name to
**   {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}
** with offsets relative to the start of the data section, and may hold one
** "__metadata__" object of string values. The writer puts tensors in the
** order given, back to back, and pads the JSON with spaces to a multiple of 8
** bytes. The reader checks everything: header length against the file size,
** the JSON, every dtype, shape and offset, that shape and dtype account for
** exactly end - begin bytes, and that the tensors cover the data section
** without overlap or gap.
**
** The reader maps a regular file (read-only, private) instead of copying it:
** tensor data points into the mapping, pages come in as they are touched,
** and sq_st_release drops a tensor's pages again, so a file larger than
** memory can be streamed tensor by tensor. Only standard input ("-") may be
** a pipe (input.h); it is read into memory, no further than the header's
** tensors reach.
** sq_st_parse validates an image that is already in memory (the fuzzers
** call it); the file reader runs the same code on its mapping.
**
** Errors: SQ_OK or a negative kind (shardq.h), with a sentence naming the
** file, the tensor and the field in err (when it is not NULL), e.g.
**   "x.safetensors: tensor 'codes': field 'data_offsets': end 100 beyond the
**    data section (96 bytes)"
** The reader's kinds: SQ_ERR_FORMAT for a malformed, truncated or lying
** file, SQ_ERR_NOTFOUND for a file that does not exist, SQ_ERR_IO for any
** other failed open or read, SQ_ERR_NOMEM, SQ_ERR_UNSUPPORTED for more than
** SQ_INPUT_STREAM_MAX bytes from a pipe. The writer's: SQ_ERR_ARG for
** tensors or metadata it refuses (and puts that do not add up), SQ_ERR_IO
** for a failed write, SQ_ERR_NOMEM.
** Writes go through a temporary file renamed over the target (wfile.h).
*/
#ifndef SQ_TRACE_SAFETENSORS_H
#define SQ_TRACE_SAFETENSORS_H

#include "shardq.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SQ_ST_MAXDIM 64
/* The largest JSON header the reader accepts (the Rust reference's limit). */
#define SQ_ST_HEADER_MAX ((uint64_t)100000000)

typedef enum sq_st_dtype {
    SQ_ST_BOOL, SQ_ST_U8, SQ_ST_I8, SQ_ST_F8_E5M2, SQ_ST_F8_E4M3,
    SQ_ST_I16, SQ_ST_U16, SQ_ST_F16, SQ_ST_BF16,
    SQ_ST_I32, SQ_ST_U32, SQ_ST_F32,
    SQ_ST_I64, SQ_ST_U64, SQ_ST_F64,
    SQ_ST_NDTYPES
} sq_st_dtype;

/* "F32", ... ; NULL for an out-of-range value. */
const char *sq_st_dtype_name(sq_st_dtype d);
/* Bytes per element (1, 2, 4 or 8); 0 for an out-of-range value. */
size_t sq_st_dtype_size(sq_st_dtype d);
/* The dtype of a name ("F32"), or SQ_ST_DTYPE_NONE (-1) when unknown. */
#define SQ_ST_DTYPE_NONE (-1)
int sq_st_dtype_parse(const char *name);
/* 1 for the floating-point dtypes the codecs take (F32, F16, BF16, F64),
** else 0. */
int sq_st_dtype_is_float(sq_st_dtype d);

/* One tensor to write: product(shape) * itemsize bytes at data (which may be
** NULL when that is 0), little-endian. */
typedef struct sq_st_tensor {
    const char *name;
    sq_st_dtype dtype;
    int ndim;
    uint64_t shape[SQ_ST_MAXDIM];
    const void *data;
} sq_st_tensor;

/* One __metadata__ entry (both strings, any UTF-8). */
typedef struct sq_st_kv {
    const char *key;
    const char *value;
} sq_st_kv;

/* Writes the tensors t[0..nt) in that order with the metadata m[0..nm)
** (no "__metadata__" object when nm = 0). Names must be unique, non-empty
** and not "__metadata__". */
int sq_st_write(const char *path, const sq_st_tensor *t, size_t nt, const sq_st_kv *m, size_t nm,
                sq_error *err);

/* The streaming writer, for files that need not be in memory at once.
** sq_st_writer_open checks the tensors and metadata as sq_st_write does
** (t[i].data is ignored) and writes the header; sq_st_writer_put appends the
** data of the tensors, in their order, in pieces of any size;
** sq_st_writer_commit checks that exactly the promised bytes were put and
** renames the file into place. After open succeeds, exactly one of commit
** or abort must be called: both free the writer, whatever the outcome. A
** failed put is remembered and makes commit fail too; the target is never
** left half-written (wfile.h). */
typedef struct sq_st_writer sq_st_writer;

int sq_st_writer_open(sq_st_writer **w, const char *path, const sq_st_tensor *t, size_t nt,
                      const sq_st_kv *m, size_t nm, sq_error *err);
int sq_st_writer_put(sq_st_writer *w, const void *data, uint64_t bytes, sq_error *err);
int sq_st_writer_commit(sq_st_writer *w, sq_error *err);
void sq_st_writer_abort(sq_st_writer *w);

/* A tensor of a file that was read. */
typedef struct sq_st_entry {
    char *name;
    sq_st_dtype dtype;
    int ndim;
    uint64_t shape[SQ_ST_MAXDIM];
    uint64_t nelem;        /* product of shape */
    uint64_t begin, end;   /* byte offsets into the data section */
    const unsigned char *data; /* = file->data + begin; not aligned: memcpy it out */
} sq_st_entry;

typedef struct sq_st_file {
    sq_st_entry *tensors;  /* in file order of their offsets */
    size_t ntensors;
    sq_st_kv *meta;        /* __metadata__, strings owned by the struct */
    size_t nmeta;
    const unsigned char *data; /* the whole data section: in the mapping, the
                                  caller's buffer or a private copy */
    uint64_t data_len;
    uint64_t header_len;   /* N */
    char *name;            /* the file name, for messages */
    /* Private to the reader: what sq_st_free gives back. */
    void *map;             /* the mapping of the whole file, or NULL */
    size_t map_len;
    void *copy;            /* the image read from a pipe (malloc'd), or NULL */
    const sq_st_entry **byname; /* the tensors sorted by name: sq_st_find's index */
} sq_st_file;

/* Opens and validates a whole file into *out (which sq_st_free releases). A
** regular file is mapped read-only; a pipe on standard input ("-" or
** /dev/stdin) is read into memory; anything else that is not a regular
** file (a FIFO, a device) is refused, naming it. */
int sq_st_open(const char *path, sq_st_file *out, sq_error *err);
/* The same as sq_st_open (its older name). */
int sq_st_read(const char *path, sq_st_file *out, sq_error *err);
/* Validates the file image buf[0..len) (all of a file) into *out. Nothing is
** copied: the tensors' data point into buf, which must outlive *out. name
** is the file name for messages. */
int sq_st_parse(const char *name, const void *buf, size_t len, sq_st_file *out, sq_error *err);
/* Unmaps or frees everything and zeroes *f; safe on a zeroed struct. */
void sq_st_free(sq_st_file *f);

/* Drops the pages of e's data from the resident set (e NULL: the whole
** file), so that streaming a large file tensor by tensor keeps memory
** bounded. The data stay readable: touched again, they are read back from
** the file. A no-op for a file held in memory. */
void sq_st_release(const sq_st_file *f, const sq_st_entry *e);

/* Converts e's nelem values (of a float dtype, unaligned, little-endian) to
** fp32 in out[0..nelem): F32 is copied, F16 and BF16 widen exactly, F64
** rounds to nearest even. Fails, naming the file, the tensor and the first
** offending element, on a dtype that is not a float, on NaN or +-Inf, and
** on an F64 value beyond fp32's range:
**   "x.st: tensor 'w': element 123 is NaN"          (SQ_ERR_NONFINITE)
**   "x.st: tensor 'w': element 5: 1e+300 overflows fp32" (SQ_ERR_RANGE)
** and SQ_ERR_FORMAT for a dtype that is not a float. out is undefined
** after a failure. */
int sq_st_to_f32(const sq_st_file *f, const sq_st_entry *e, float *out, sq_error *err);
/* The same checks (so both accept the same tensors), converting exactly to
** double: the fp64 reference of the values. */
int sq_st_to_f64(const sq_st_file *f, const sq_st_entry *e, double *out, sq_error *err);

/* The tensor called name, or NULL (a binary search: a file of many tensors
** is checked name by name against a manifest in n log n). */
const sq_st_entry *sq_st_find(const sq_st_file *f, const char *name);
/* The value of metadata key, or NULL. */
const char *sq_st_meta_get(const sq_st_file *f, const char *key);

#ifdef __cplusplus
}
#endif
#endif /* SQ_TRACE_SAFETENSORS_H */
