/*
** backend.c -- one API over the C reference and the CUDA kernels.
**
** The CPU backend is the core itself over host memory. The CUDA backend
** checks the arguments with the core's own checks (sq_check.h), so that both
** backends refuse the same calls with the same status, and hands the rest
** to kernels/cuda_backend.cu.
*/
#include "shardq/backend.h"
#include "shardq/plugin.h"
#include "backend/cuda.h"
#include "backend/device.h"
#include "sq_check.h"
#include "sq_encode.h"
#include "sq_clock.h"
#include "sq_hd.h"
#include "sq_sparse.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sq_backend {
    sq_backend_kind kind;
    int device;
    sq_cuda *cuda;
    double t0;
    char name[32];
    char description[288];
    sq_error err; /* the last failure: its kind and sentence */
};

/* A CUDA call failed: its sentence becomes the backend's. */
static int cuda_status(sq_backend *be, int rc)
{
    if (rc == SQ_ERR_DEVICE || rc == SQ_ERR_NOMEM) sq_error_set(&be->err, rc, "%s", sq_cuda_error(be->cuda));
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Opening                                                                  */
/* ------------------------------------------------------------------------ */

/* "cuda:N" -> N; SQ_ERR_ARG for anything but digits. */
static int parse_ordinal(const char *s)
{
    if (!*s || strlen(s) > 6) return SQ_ERR_ARG;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9') return SQ_ERR_ARG;
    return atoi(s);
}

static int open_cuda(int dev, sq_backend *be, sq_error *err)
{
    int count = sq_device_count();
    if (count == 0)
        return sq_error_set(err, SQ_ERR_UNSUPPORTED, "%s: no CUDA device: %s", be->name,
                            sq_device_unavailable_reason());
    if (dev >= count)
        return sq_error_set(err, SQ_ERR_ARG, "%s: no such device, %d visible (cuda:0 to cuda:%d)",
                            be->name, count, count - 1);
    int rc = sq_cuda_open(dev, &be->cuda, err);
    if (rc != SQ_OK) return rc;
    snprintf(be->description, sizeof be->description, "%s", sq_cuda_description(be->cuda));
    return SQ_OK;
}

int sq_backend_open(const char *name, sq_backend **out, sq_error *err)
{
    sq_error_clear(err);
    if (!out || !name) return sq_error_set(err, SQ_ERR_ARG, "no backend name");
    *out = NULL;
    sq_backend *be = calloc(1, sizeof *be);
    if (!be) return sq_error_set(err, SQ_ERR_NOMEM, "out of host memory");
    int rc = SQ_OK;
    if (strcmp(name, "cpu") == 0) {
        be->kind = SQ_BACKEND_CPU;
        be->device = -1;
        snprintf(be->name, sizeof be->name, "cpu");
        snprintf(be->description, sizeof be->description, "cpu (%d threads)", sq_get_threads());
    } else if (strcmp(name, "cuda") == 0 || strncmp(name, "cuda:", 5) == 0) {
        int dev = name[4] ? parse_ordinal(name + 5) : 0;
        be->kind = SQ_BACKEND_CUDA;
        be->device = dev;
        if (dev < 0) {
            rc = sq_error_set(err, SQ_ERR_ARG, "%s: '%s' is not a device number (use cuda:0, "
                              "cuda:1, ...)", name, name + 5);
        } else {
            snprintf(be->name, sizeof be->name, "cuda:%d", dev);
            rc = open_cuda(dev, be, err);
        }
    } else {
        rc = sq_error_set(err, SQ_ERR_ARG, "'%s' is not a backend (use cpu, cuda or cuda:N)", name);
    }
    if (rc != SQ_OK) {
        free(be);
        return rc;
    }
    *out = be;
    return SQ_OK;
}

void sq_backend_close(sq_backend *be)
{
    if (!be) return;
    sq_cuda_close(be->cuda);
    free(be);
}

sq_backend_kind sq_backend_kind_of(const sq_backend *be) { return be->kind; }
int sq_backend_device(const sq_backend *be) { return be->device; }
const char *sq_backend_name(const sq_backend *be) { return be->name; }
const char *sq_backend_description(const sq_backend *be) { return be->description; }
const char *sq_backend_error(const sq_backend *be) { return be->err.msg; }

/* ------------------------------------------------------------------------ */
/* Memory                                                                   */
/* ------------------------------------------------------------------------ */

int sq_backend_alloc(sq_backend *be, size_t bytes, void **p)
{
    if (!p) return SQ_ERR_ARG;
    if (be->kind == SQ_BACKEND_CUDA) return cuda_status(be, sq_cuda_alloc(be->cuda, bytes, p));
    *p = malloc(bytes ? bytes : 1);
    if (!*p) {
        sq_error_set(&be->err, SQ_ERR_NOMEM, "malloc(%zu bytes): %s", bytes, strerror(errno));
        return SQ_ERR_NOMEM;
    }
    return SQ_OK;
}

void sq_backend_free(sq_backend *be, void *p)
{
    if (be->kind == SQ_BACKEND_CUDA)
        sq_cuda_free(be->cuda, p);
    else
        free(p);
}

int sq_backend_put(sq_backend *be, void *dst, const void *host_src, size_t bytes)
{
    if (bytes && (!dst || !host_src)) return SQ_ERR_ARG;
    if (be->kind == SQ_BACKEND_CUDA) return cuda_status(be, sq_cuda_put(be->cuda, dst, host_src, bytes));
    if (bytes) memcpy(dst, host_src, bytes);
    return SQ_OK;
}

int sq_backend_get(sq_backend *be, void *host_dst, const void *src, size_t bytes)
{
    if (bytes && (!host_dst || !src)) return SQ_ERR_ARG;
    if (be->kind == SQ_BACKEND_CUDA) return cuda_status(be, sq_cuda_get(be->cuda, host_dst, src, bytes));
    if (bytes) memcpy(host_dst, src, bytes);
    return SQ_OK;
}

int sq_backend_fill(sq_backend *be, void *dst, int byte, size_t bytes)
{
    if (bytes && !dst) return SQ_ERR_ARG;
    if (be->kind == SQ_BACKEND_CUDA) return cuda_status(be, sq_cuda_fill(be->cuda, dst, byte, bytes));
    if (bytes) memset(dst, byte, bytes);
    return SQ_OK;
}

int sq_backend_copy(sq_backend *dst_be, void *dst, sq_backend *src_be, const void *src,
                    size_t bytes)
{
    if (!dst_be || !src_be || (bytes && (!dst || !src))) return SQ_ERR_ARG;
    if (bytes == 0) return SQ_OK;
    if (dst_be->kind == SQ_BACKEND_CPU && src_be->kind == SQ_BACKEND_CPU) {
        memmove(dst, src, bytes);
        return SQ_OK;
    }
    if (dst_be->kind == SQ_BACKEND_CPU) return sq_backend_get(src_be, dst, src, bytes);
    if (src_be->kind == SQ_BACKEND_CPU) return sq_backend_put(dst_be, dst, src, bytes);
    int rc = sq_cuda_copy(dst_be->cuda, dst, src_be->cuda, src, bytes);
    if (rc == SQ_ERR_DEVICE || rc == SQ_ERR_NOMEM) {
        /* the sentence lives in whichever device failed */
        const char *a = sq_cuda_error(dst_be->cuda), *b = sq_cuda_error(src_be->cuda);
        sq_error_set(&dst_be->err, rc, "%s", *a ? a : b);
        if (src_be != dst_be) src_be->err = dst_be->err;
    }
    return rc;
}

/* Plug-in codecs run on the CPU only: their callbacks read and write host
** memory. The kernels of top-k and rand-k (kernels/sparse.cu) have no
** Hadamard staging. A CUDA backend refuses these before anything is
** allocated. */
static int cuda_refuses(sq_backend *be, const sq_codec *c)
{
    if (c && c->kind == SQ_KIND_PLUGIN) {
        const sq_plugin_codec *d = sq_plugin_get(c->plugin);
        return sq_error_set(&be->err, SQ_ERR_UNSUPPORTED,
                            "kind=plugin:%s: plug-in codecs run on the CPU only (their "
                            "callbacks take host memory); use the cpu backend",
                            d ? d->name : "?");
    }
    if (!c || !sq_kind_sparse(c->kind) || !c->hadamard) return SQ_OK;
    return sq_error_set(&be->err, SQ_ERR_UNSUPPORTED,
                        "%s: kind=%s with hadamard=%d has no CUDA kernels (they select without "
                        "the transform); use hadamard=0 or the cpu backend",
                        be->name, sq_codec_kind_name(c->kind), c->hadamard);
}

int sq_backend_qbuf_alloc(sq_backend *be, const sq_codec *c, uint64_t n, sq_qbuf *q)
{
    if (!q || !c || sq_codec_validate(c) != SQ_OK) return SQ_ERR_ARG;
    if (be->kind == SQ_BACKEND_CPU) return sq_qbuf_alloc(c, n, q);
    if (cuda_refuses(be, c)) return SQ_ERR_UNSUPPORTED;
    const uint64_t sizes[3] = {sq_codec_code_bytes(c, n), sq_codec_scale_bytes(c, n),
                               sq_codec_offset_bytes(c, n)};
    const int parts = c->kind == SQ_KIND_MINMAX ? 3 : 2; /* codes, scales[, offsets] */
    void *p[3] = {NULL, NULL, NULL};
    int rc = SQ_OK;
    for (int i = 0; i < parts && rc == SQ_OK; i++) {
        if (sizes[i] > SIZE_MAX) rc = SQ_ERR_ARG;
        if (rc == SQ_OK) rc = sq_backend_alloc(be, (size_t)sizes[i], &p[i]);
        if (rc == SQ_OK) rc = sq_backend_fill(be, p[i], 0, (size_t)sizes[i]);
    }
    q->codes = p[0];
    q->scales = p[1];
    q->offsets = p[2];
    if (rc != SQ_OK) sq_backend_qbuf_free(be, q);
    return rc;
}

void sq_backend_qbuf_free(sq_backend *be, sq_qbuf *q)
{
    if (!q) return;
    if (be->kind == SQ_BACKEND_CPU) {
        sq_qbuf_free(q);
        return;
    }
    sq_backend_free(be, q->codes);
    sq_backend_free(be, q->scales);
    sq_backend_free(be, q->offsets);
    q->codes = NULL;
    q->scales = NULL;
    q->offsets = NULL;
}

/* ------------------------------------------------------------------------ */
/* The codec operations                                                     */
/* ------------------------------------------------------------------------ */

/* The sparse kinds and the casts as the kernels take them: the fields they
** ignore at fixed values (the C reference does the same, codec.c). */
static const sq_codec *settled(const sq_codec *c, sq_codec *copy)
{
    if (!c || !sq_sparse_kind(c->kind)) return c;
    *copy = sq_sparse_canonical(c);
    return copy;
}

/* The CUDA side of quantize, quantize_diff (diff) and their bf16 variants. */
static int cuda_quantize(sq_backend *be, const sq_codec *c, const float *x, const float *ref,
                         int diff, uint64_t n, const sq_rng_key *key, sq_qbuf *q, int bf16)
{
    sq_codec cc;
    c = settled(c, &cc);
    int rc;
    if ((rc = sq_check_codec(c, n)) || (rc = cuda_refuses(be, c)) || (rc = sq_check_qbuf(c, q, n)) ||
        (rc = sq_check_key(c, key)))
        return rc;
    if (n && (!x || (diff && !ref))) return SQ_ERR_ARG;
    return cuda_status(be, sq_cuda_quantize(be->cuda, c, x, diff ? ref : NULL, n, key, q, bf16));
}

/* The CUDA side of dequantize, dequantize_add (add) and their bf16 variants. */
static int cuda_dequantize(sq_backend *be, const sq_codec *c, const sq_qbuf *q, const float *ref,
                           int add, uint64_t n, float *out, int bf16)
{
    sq_codec cc;
    c = settled(c, &cc);
    int rc;
    if ((rc = sq_check_codec(c, n)) || (rc = cuda_refuses(be, c)) || (rc = sq_check_qbuf(c, q, n)))
        return rc;
    if (n && (!out || (add && !ref))) return SQ_ERR_ARG;
    return cuda_status(be, sq_cuda_dequantize(be->cuda, c, q, add ? ref : NULL, n, out, bf16));
}

/* Every quantizing and decoding operation on either side: the C reference
** (be NULL or the CPU) or the kernels. */
static int encode_on(sq_backend *be, const sq_codec *c, const float *x, const float *ref,
                     int diff, uint64_t n, const sq_rng_key *key, sq_qbuf *q, int bf16)
{
    if (!be || be->kind == SQ_BACKEND_CPU) return sq_encode_job(c, x, ref, diff, n, key, q, bf16);
    return cuda_quantize(be, c, x, ref, diff, n, key, q, bf16);
}

static int decode_on(sq_backend *be, const sq_codec *c, const sq_qbuf *q, const float *ref,
                     int add, uint64_t n, float *out, int bf16)
{
    if (!be || be->kind == SQ_BACKEND_CPU) return sq_decode_job(c, q, ref, add, n, out, bf16);
    return cuda_dequantize(be, c, q, ref, add, n, out, bf16);
}

int sq_backend_encode(sq_backend *be, const sq_codec *c, sq_dtype dtype, const float *x,
                      const float *ref, uint64_t n, const sq_rng_key *key, sq_qbuf *q)
{
    if (dtype != SQ_DTYPE_FP32 && dtype != SQ_DTYPE_BF16) return SQ_ERR_ARG;
    return encode_on(be, c, x, ref, ref != NULL, n, key, q, dtype == SQ_DTYPE_BF16);
}

int sq_backend_decode(sq_backend *be, const sq_codec *c, sq_dtype dtype, const sq_qbuf *q,
                      const float *ref, uint64_t n, float *out)
{
    if (dtype != SQ_DTYPE_FP32 && dtype != SQ_DTYPE_BF16) return SQ_ERR_ARG;
    return decode_on(be, c, q, ref, ref != NULL, n, out, dtype == SQ_DTYPE_BF16);
}

/* The names of the releases before sq_backend_encode and sq_backend_decode. */

int sq_backend_quantize(sq_backend *be, const sq_codec *c, const float *x, uint64_t n,
                        const sq_rng_key *key, sq_qbuf *q)
{
    return encode_on(be, c, x, NULL, 0, n, key, q, 0);
}

int sq_backend_quantize_bf16(sq_backend *be, const sq_codec *c, const float *x, uint64_t n,
                             const sq_rng_key *key, sq_qbuf *q)
{
    return encode_on(be, c, x, NULL, 0, n, key, q, 1);
}

int sq_backend_quantize_diff(sq_backend *be, const sq_codec *c, const float *x,
                             const float *ref, uint64_t n, const sq_rng_key *key, sq_qbuf *q)
{
    return encode_on(be, c, x, ref, 1, n, key, q, 0);
}

int sq_backend_quantize_diff_bf16(sq_backend *be, const sq_codec *c, const float *x,
                                  const float *ref, uint64_t n, const sq_rng_key *key,
                                  sq_qbuf *q)
{
    return encode_on(be, c, x, ref, 1, n, key, q, 1);
}

int sq_backend_dequantize(sq_backend *be, const sq_codec *c, const sq_qbuf *q, uint64_t n,
                          float *out)
{
    return decode_on(be, c, q, NULL, 0, n, out, 0);
}

int sq_backend_dequantize_bf16(sq_backend *be, const sq_codec *c, const sq_qbuf *q, uint64_t n,
                               float *out)
{
    return decode_on(be, c, q, NULL, 0, n, out, 1);
}

int sq_backend_dequantize_add(sq_backend *be, const sq_codec *c, const sq_qbuf *q,
                              const float *ref, uint64_t n, float *out)
{
    return decode_on(be, c, q, ref, 1, n, out, 0);
}

int sq_backend_dequantize_add_bf16(sq_backend *be, const sq_codec *c, const sq_qbuf *q,
                                   const float *ref, uint64_t n, float *out)
{
    return decode_on(be, c, q, ref, 1, n, out, 1);
}

/* The arguments of a sum requantized on a GPU: both codecs, the chunks, the
** output and its key. */
static int check_requant(sq_backend *be, const sq_codec *c_in, const sq_qbuf *chunks, int k,
                         uint64_t n, const sq_codec *c_out, const sq_rng_key *key,
                         const sq_qbuf *out)
{
    int rc;
    if ((rc = sq_check_codec(c_in, n)) || (rc = sq_check_codec(c_out, n)) ||
        (rc = cuda_refuses(be, c_in)) || (rc = cuda_refuses(be, c_out)) ||
        (rc = sq_check_chunks(c_in, chunks, k, n)) || (rc = sq_check_qbuf(c_out, out, n)) ||
        (rc = sq_check_key(c_out, key)))
        return rc;
    return SQ_OK;
}

int sq_backend_dequant_sum_requant(sq_backend *be, const sq_codec *c_in, const sq_qbuf *chunks,
                                   int k, uint64_t n, const sq_codec *c_out,
                                   const sq_rng_key *key, sq_qbuf *out)
{
    if (be->kind == SQ_BACKEND_CPU)
        return sq_dequant_sum_requant(c_in, chunks, k, n, c_out, key, out);
    sq_codec cci, cco;
    c_in = settled(c_in, &cci);
    c_out = settled(c_out, &cco);
    int rc = check_requant(be, c_in, chunks, k, n, c_out, key, out);
    if (rc) return rc;
    return cuda_status(be, sq_cuda_sum_requant(be->cuda, c_in, chunks, k, n, c_out, key, out, 0));
}

int sq_backend_dequant_sum(sq_backend *be, const sq_codec *c, const sq_qbuf *chunks, int k,
                           uint64_t n, float *out)
{
    if (be->kind == SQ_BACKEND_CPU) return sq_dequant_sum(c, chunks, k, n, out);
    sq_codec cc;
    c = settled(c, &cc);
    int rc;
    if ((rc = sq_check_codec(c, n)) || (rc = cuda_refuses(be, c)) ||
        (rc = sq_check_chunks(c, chunks, k, n)))
        return rc;
    if (n && !out) return SQ_ERR_ARG;
    return cuda_status(be, sq_cuda_sum(be->cuda, c, chunks, k, n, out, 0));
}

int sq_backend_dequant_sum_requant_f16(sq_backend *be, const sq_codec *c_in,
                                       const sq_qbuf *chunks, int k, uint64_t n,
                                       const sq_codec *c_out, const sq_rng_key *key, sq_qbuf *out)
{
    if (be->kind == SQ_BACKEND_CPU)
        return sq_dequant_sum_requant_f16(c_in, chunks, k, n, c_out, key, out);
    int rc = check_requant(be, c_in, chunks, k, n, c_out, key, out);
    if (rc) return rc;
    if (sq_sparse_kind(c_in->kind) || sq_sparse_kind(c_out->kind)) return SQ_ERR_SPEC;
    if (c_in->hadamard || c_out->hadamard) return SQ_ERR_SPEC;
    return cuda_status(be, sq_cuda_sum_requant(be->cuda, c_in, chunks, k, n, c_out, key, out, 1));
}

int sq_backend_dequant_sum_f16(sq_backend *be, const sq_codec *c, const sq_qbuf *chunks, int k,
                               uint64_t n, float *out)
{
    if (be->kind == SQ_BACKEND_CPU) return sq_dequant_sum_f16(c, chunks, k, n, out);
    int rc;
    if ((rc = sq_check_codec(c, n)) || (rc = cuda_refuses(be, c)) ||
        (rc = sq_check_chunks(c, chunks, k, n)))
        return rc;
    if (n && !out) return SQ_ERR_ARG;
    if (sq_kind_sparse(c->kind) || sq_kind_cast(c->kind)) return SQ_ERR_SPEC;
    if (c->hadamard) return SQ_ERR_SPEC;
    return cuda_status(be, sq_cuda_sum(be->cuda, c, chunks, k, n, out, 1));
}

int sq_backend_reduce(sq_backend *be, const sq_codec *c_in, sq_dtype acc, const sq_qbuf *chunks,
                      int k, uint64_t n, const sq_codec *c_out, const sq_rng_key *key,
                      sq_qbuf *qout, float *out)
{
    if (!be || be->kind == SQ_BACKEND_CPU)
        return sq_reduce(c_in, acc, chunks, k, n, c_out, key, qout, out);
    if (acc != SQ_DTYPE_FP32 && acc != SQ_DTYPE_FP16) return SQ_ERR_ARG;
    const int f16 = acc == SQ_DTYPE_FP16;
    if (c_out)
        return f16 ? sq_backend_dequant_sum_requant_f16(be, c_in, chunks, k, n, c_out, key, qout)
                   : sq_backend_dequant_sum_requant(be, c_in, chunks, k, n, c_out, key, qout);
    return f16 ? sq_backend_dequant_sum_f16(be, c_in, chunks, k, n, out)
               : sq_backend_dequant_sum(be, c_in, chunks, k, n, out);
}

/* ------------------------------------------------------------------------ */
/* Elementwise operations                                                   */
/* ------------------------------------------------------------------------ */

/* The CPU loops run on OpenMP threads from this many elements on. */
#define EW_PAR_MIN ((uint64_t)1 << 16)

/* The findings of sq_hd.h, ORed over all elements (so in any order and any
** number of threads), as a status: the kernels' flags rank them alike. */
static int ew_status(int found)
{
    if (found & SQ_HD_EW_INPUT) return SQ_ERR_NONFINITE;
    if (found & SQ_HD_EW_OUTPUT) return SQ_ERR_RANGE;
    return SQ_OK;
}

/* The CPU side of an elementwise operation: found |= STEP(i) over
** i < n, in parallel, as a status. One loop for the four operations, each
** STEP one call of sq_hd.h. */
#define EW_OMP_FOR \
    _Pragma("omp parallel for num_threads(sq_get_threads()) if (n >= EW_PAR_MIN) schedule(static) reduction(| : found)")
#define EW_CPU(n, STEP)                                                                      \
    do {                                                                                     \
        int found = 0;                                                                       \
        EW_OMP_FOR                                                                           \
        for (uint64_t i = 0; i < (n); i++) found |= STEP;                                    \
        return ew_status(found);                                                             \
    } while (0)

int sq_backend_add(sq_backend *be, const float *a, const float *b, uint64_t n, float *out)
{
    if (n && (!a || !b || !out)) return SQ_ERR_ARG;
    if (n == 0) return SQ_OK;
    if (be->kind == SQ_BACKEND_CUDA) return cuda_status(be, sq_cuda_add(be->cuda, a, b, n, out));
    EW_CPU(n, sq_hd_ew_add(a[i], b[i], &out[i]));
}

int sq_backend_sub(sq_backend *be, const float *a, const float *b, uint64_t n, float *out)
{
    if (n && (!a || !b || !out)) return SQ_ERR_ARG;
    if (n == 0) return SQ_OK;
    if (be->kind == SQ_BACKEND_CUDA) return cuda_status(be, sq_cuda_sub(be->cuda, a, b, n, out));
    /* a - b is a + (-b) exactly: the negation flips the sign bit alone */
    EW_CPU(n, sq_hd_ew_add(a[i], -b[i], &out[i]));
}

int sq_backend_to_bf16(sq_backend *be, const float *x, uint64_t n, uint16_t *out)
{
    if (n && (!x || !out)) return SQ_ERR_ARG;
    if (n == 0) return SQ_OK;
    if (be->kind == SQ_BACKEND_CUDA) return cuda_status(be, sq_cuda_to_bf16(be->cuda, x, n, out));
    EW_CPU(n, sq_hd_ew_to_bf16(x[i], &out[i]));
}

int sq_backend_from_bf16(sq_backend *be, const uint16_t *h, uint64_t n, float *out)
{
    if (n && (!h || !out)) return SQ_ERR_ARG;
    if (n == 0) return SQ_OK;
    if (be->kind == SQ_BACKEND_CUDA) return cuda_status(be, sq_cuda_from_bf16(be->cuda, h, n, out));
    EW_CPU(n, sq_hd_ew_from_bf16(h[i], &out[i]));
}

/* ------------------------------------------------------------------------ */
/* Asynchronous use and timing                                              */
/* ------------------------------------------------------------------------ */

int sq_backend_set_deferred(sq_backend *be, int on)
{
    return be->kind == SQ_BACKEND_CUDA ? cuda_status(be, sq_cuda_set_deferred(be->cuda, on)) : SQ_OK;
}

int sq_backend_sync(sq_backend *be)
{
    return be->kind == SQ_BACKEND_CUDA ? cuda_status(be, sq_cuda_sync(be->cuda)) : SQ_OK;
}

int sq_backend_set_stream(sq_backend *be, void *cuda_stream)
{
    if (!be) return SQ_ERR_ARG;
    if (be->kind == SQ_BACKEND_CUDA) return cuda_status(be, sq_cuda_set_stream(be->cuda, cuda_stream));
    if (!cuda_stream) return SQ_OK;
    return sq_error_set(&be->err, SQ_ERR_UNSUPPORTED, "%s: a CUDA stream given to the CPU backend",
                        be->name);
}

int sq_backend_timer_start(sq_backend *be)
{
    if (be->kind == SQ_BACKEND_CUDA) return cuda_status(be, sq_cuda_timer_start(be->cuda));
    be->t0 = sq_clock_s();
    return SQ_OK;
}

int sq_backend_timer_stop(sq_backend *be, double *seconds)
{
    if (!seconds) return SQ_ERR_ARG;
    if (be->kind == SQ_BACKEND_CUDA) return cuda_status(be, sq_cuda_timer_stop(be->cuda, seconds));
    *seconds = sq_clock_s() - be->t0;
    return SQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Placement                                                                */
/* ------------------------------------------------------------------------ */

static int placement_add(sq_placement *pl, const char *name, sq_error *err)
{
    sq_backend **grown = realloc(pl->be, (size_t)(pl->count + 1) * sizeof *grown);
    if (!grown) return sq_error_set(err, SQ_ERR_NOMEM, "out of host memory");
    pl->be = grown;
    int rc = sq_backend_open(name, &pl->be[pl->count], err);
    if (rc == SQ_OK) pl->count++;
    return rc;
}

int sq_placement_open(const char *spec, sq_placement *pl, sq_error *err)
{
    if (!pl || !spec) return sq_error_set(err, SQ_ERR_ARG, "no placement");
    pl->count = 0;
    pl->be = NULL;
    int rc = SQ_OK;
    if (strcmp(spec, "cpu") == 0) {
        rc = placement_add(pl, "cpu", err);
    } else if (strcmp(spec, "cuda") == 0) {
        int n = sq_device_count();
        if (n == 0) {
            rc = sq_error_set(err, SQ_ERR_UNSUPPORTED, "cuda: no CUDA device: %s",
                              sq_device_unavailable_reason());
        }
        for (int d = 0; d < n && rc == SQ_OK; d++) {
            char name[32];
            snprintf(name, sizeof name, "cuda:%d", d);
            rc = placement_add(pl, name, err);
        }
    } else if (strncmp(spec, "cuda:", 5) == 0) {
        char *list = strdup(spec + 5), *save = NULL;
        if (!list) rc = sq_error_set(err, SQ_ERR_NOMEM, "out of host memory");
        for (char *tok = list ? strtok_r(list, ",", &save) : NULL; tok && rc == SQ_OK;
             tok = strtok_r(NULL, ",", &save)) {
            char name[32];
            snprintf(name, sizeof name, "cuda:%.20s", tok);
            for (int i = 0; i < pl->count && rc == SQ_OK; i++)
                if (strcmp(sq_backend_name(pl->be[i]), name) == 0) {
                    rc = sq_error_set(err, SQ_ERR_ARG, "%s: %s is named twice", spec, name);
                }
            if (rc == SQ_OK) rc = placement_add(pl, name, err);
        }
        free(list);
        if (rc == SQ_OK && pl->count == 0) {
            rc = sq_error_set(err, SQ_ERR_ARG, "%s: no device named", spec);
        }
    } else {
        rc = sq_error_set(err, SQ_ERR_ARG, "'%s' is not a placement (use cpu, cuda or cuda:0,1,...)",
                          spec);
    }
    if (rc != SQ_OK) sq_placement_close(pl);
    return rc;
}

sq_backend *sq_placement_worker(const sq_placement *pl, uint64_t worker)
{
    return pl && pl->count ? pl->be[worker % (uint64_t)pl->count] : NULL;
}

void sq_placement_close(sq_placement *pl)
{
    if (!pl) return;
    for (int i = 0; i < pl->count; i++) sq_backend_close(pl->be[i]);
    free(pl->be);
    pl->be = NULL;
    pl->count = 0;
}
