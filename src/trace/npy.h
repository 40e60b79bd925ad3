/*
** npy.h -- NumPy .npy files (and raw little-endian float32) in and out.
**
** The reader takes format versions 1.0, 2.0 and 3.0, C order only, dtypes
** '<f4', '<f8' and '<f2', and hands back float32 (wider or narrower data is
** converted: '<f8' rounds to nearest, values beyond float32 become +-Inf).
** The header dictionary is parsed strictly: exactly the keys 'descr',
** 'fortran_order' and 'shape', the file size must equal header + n * itemsize.
** The writer writes version 1.0 '<f4'.
**
** Errors: every function returns SQ_OK or a negative kind (shardq.h), and
** writes a sentence naming the file and the field at fault into err (when
** it is not NULL), e.g.
**   "x.npy: header field 'shape': product overflows"
**   "x.npy: data truncated: header promises 4000 bytes of <f4, file has 3990"
** The kinds: SQ_ERR_FORMAT for a malformed, truncated or lying file,
** SQ_ERR_NOTFOUND for a file that does not exist, SQ_ERR_IO for any other
** failed open, read or write, SQ_ERR_NONFINITE for NaN or Inf
** (sq_npy_check_finite), SQ_ERR_NOMEM, SQ_ERR_ARG for a bad argument, and
** SQ_ERR_UNSUPPORTED for more than SQ_INPUT_STREAM_MAX bytes from a pipe.
**
** Writes go through sq_wfile (wfile.h): a failed write never leaves a
** half-written file behind nor damages an existing one.
*/
#ifndef SQ_TRACE_NPY_H
#define SQ_TRACE_NPY_H

#include "shardq.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most dimensions a file may have (NumPy 2 allows 64). */
#define SQ_NPY_MAXDIM 64

/* The element type a file held before conversion to float32. */
typedef enum sq_npy_dtype {
    SQ_NPY_F4 = 0,    /* '<f4' */
    SQ_NPY_F8 = 1,    /* '<f8' */
    SQ_NPY_F2 = 2,    /* '<f2' */
    SQ_NPY_RAW_F4 = 3 /* a raw little-endian float32 file (no header) */
} sq_npy_dtype;

/* "<f4", "<f8", "<f2" or "raw-f32". */
const char *sq_npy_dtype_name(sq_npy_dtype d);

typedef struct sq_npy {
    float *data;     /* n values in C order (malloc'd; not NULL on success, even for n = 0) */
    uint64_t n;      /* number of elements: the product of shape (1 for ndim = 0) */
    int ndim;        /* 0 for a scalar */
    uint64_t shape[SQ_NPY_MAXDIM];
    sq_npy_dtype dtype; /* what the file held */
    int version;     /* format major version 1, 2 or 3; 0 for raw */
} sq_npy;

/* Reads a .npy file into *out (which sq_npy_free releases). Values are
** left as they are: NaN and Inf are read like any other (see
** sq_npy_check_finite). path must be a regular file, or standard input
** ("-", /dev/stdin), which may be a pipe (input.h): then no more than the
** header promises is read, at most SQ_INPUT_STREAM_MAX bytes. */
int sq_npy_read(const char *path, sq_npy *out, sq_error *err);

/* The same for a whole .npy image buf[0..len) already in memory, with the
** same checks (the fuzzer calls it); name is the file name for messages.
** out->data is a new allocation: buf may go once this returns. */
int sq_npy_parse(const char *name, const void *buf, size_t len, sq_npy *out, sq_error *err);

/* SQ_OK when all of a's values are finite; otherwise SQ_ERR_NONFINITE with
** "NAME: element 17 is NaN" ("+Inf", "-Inf") for the first that is not. */
int sq_npy_check_finite(const char *name, const sq_npy *a, sq_error *err);

/* Reads a raw little-endian float32 file (its size must be a multiple of 4)
** into *out as a 1-d array; from a pipe on standard input, at most
** SQ_INPUT_STREAM_MAX bytes. */
int sq_npy_read_raw(const char *path, sq_npy *out, sq_error *err);

/* Frees out->data and zeroes *out; safe on a zeroed struct. */
void sq_npy_free(sq_npy *a);

/* Writes x (product of shape[0..ndim) values; ndim 0 is a scalar) as a
** version 1.0 '<f4' file whose header is padded with spaces to a multiple of
** 64 bytes and ends in a newline. x may be NULL when the product is 0. */
int sq_npy_write_f32(const char *path, const float *x, const uint64_t *shape, int ndim,
                     sq_error *err);

/* Formats a shape as "[1024, 3]" ("[]" for a scalar) into buf, like snprintf. */
int sq_npy_shape_str(const uint64_t *shape, int ndim, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* SQ_TRACE_NPY_H */
