/*
** shardq/backend.h -- backends: the codec operations on the CPU or a CUDA device, memory, placement.
**
** Part of the public API of libshardq (docs/library.md); every
** declaration below is exported, everything else in the library is hidden.
*/
#ifndef SHARDQ_BACKEND_H
#define SHARDQ_BACKEND_H

#include "shardq/codec.h"

#include <stddef.h>
#include <stdint.h>

SQ_BEGIN_DECLS

/*
** backend -- the codec operations on the CPU or on a CUDA device.
**
** A backend is where buffers live and where the six codec operations of
** shardq.h run: "cpu" is the C reference over host memory, "cuda:N" the
** kernels of kernels/ over the memory of device N (plain cudaMalloc, never
** managed memory). Both produce the same bytes for the same inputs and key.
** The calls mirror shardq.h with a backend in front; every pointer a call
** takes is memory of that backend (sq_backend_alloc), except where a
** comment says host.
**
** Nothing here aborts or prints. A call that fails returns a status of
** shardq.h: the codec's own (SQ_ERR_NONFINITE, SQ_ERR_RANGE ...), or
** SQ_ERR_DEVICE / SQ_ERR_NOMEM when the device refused, and then
** sq_backend_error() names the call, e.g. "cudaMalloc(2.00 GiB) on cuda:0:
** out of memory" or "launch of decode_kernel on cuda:1: ...".
**
** A backend is used by one thread at a time.
*/
typedef struct sq_backend sq_backend;

typedef enum sq_backend_kind { SQ_BACKEND_CPU = 0, SQ_BACKEND_CUDA = 1 } sq_backend_kind;

/* Opens "cpu", "cuda" (device 0) or "cuda:N". On failure returns the kind
** (SQ_ERR_ARG for a bad name, SQ_ERR_UNSUPPORTED without the device,
** SQ_ERR_DEVICE / SQ_ERR_NOMEM when it refused) and writes a sentence into
** err (e.g. "cuda:2: no such device, 1 visible" or "cuda: no CUDA device:
** built without CUDA"). */
int sq_backend_open(const char *name, sq_backend **out, sq_error *err);
void sq_backend_close(sq_backend *be);

sq_backend_kind sq_backend_kind_of(const sq_backend *be);
int sq_backend_device(const sq_backend *be);            /* CUDA ordinal; -1 for the CPU */
const char *sq_backend_name(const sq_backend *be);      /* "cpu", "cuda:0" */
/* One line for reports: "cuda:0 (NVIDIA H100 80GB HBM3, sm_90, 132 SMs,
** 79.1 GiB)" or "cpu (2 threads)". */
const char *sq_backend_description(const sq_backend *be);
/* What the last failing call of this backend did wrong; "" if none (the
** backend keeps an sq_error; every call returns the kind). */
const char *sq_backend_error(const sq_backend *be);

/* ------------------------------------------------------------------------ */
/* Memory                                                                   */
/* ------------------------------------------------------------------------ */

int sq_backend_alloc(sq_backend *be, size_t bytes, void **p);
void sq_backend_free(sq_backend *be, void *p);
/* host -> backend, backend -> host, and bytes set to a value */
int sq_backend_put(sq_backend *be, void *dst, const void *host_src, size_t bytes);
int sq_backend_get(sq_backend *be, void *host_dst, const void *src, size_t bytes);
int sq_backend_fill(sq_backend *be, void *dst, int byte, size_t bytes);
/* Between two backends (or within one): a device-to-device copy on one
** GPU, a peer copy between two, through the host otherwise. Waits for the
** source's pending work first. */
int sq_backend_copy(sq_backend *dst_be, void *dst, sq_backend *src_be, const void *src,
                    size_t bytes);

/* A quantized buffer of n elements in the backend's memory, zeroed, sized
** as sq_qbuf_alloc sizes it; free is safe on a zeroed struct. */
int sq_backend_qbuf_alloc(sq_backend *be, const sq_codec *c, uint64_t n, sq_qbuf *q);
void sq_backend_qbuf_free(sq_backend *be, sq_qbuf *q);

/* ------------------------------------------------------------------------ */
/* The codec operations (contracts as in shardq.h; chunks is a host array  */
/* of qbufs in the backend's memory)                                        */
/* ------------------------------------------------------------------------ */

/* sq_encode and sq_decode (shardq/codec.h) on a backend: be NULL (or the
** CPU backend) runs the C reference, a CUDA backend the kernels, with the
** same bytes. The named operations that follow are these calls under the
** names of earlier releases, kept for their callers. */
int sq_backend_encode(sq_backend *be, const sq_codec *c, sq_dtype dtype, const float *x,
                      const float *ref, uint64_t n, const sq_rng_key *key, sq_qbuf *q);
int sq_backend_decode(sq_backend *be, const sq_codec *c, sq_dtype dtype, const sq_qbuf *q,
                      const float *ref, uint64_t n, float *out);

int sq_backend_quantize(sq_backend *be, const sq_codec *c, const float *x, uint64_t n,
                        const sq_rng_key *key, sq_qbuf *q);
int sq_backend_dequantize(sq_backend *be, const sq_codec *c, const sq_qbuf *q, uint64_t n,
                          float *out);
int sq_backend_quantize_diff(sq_backend *be, const sq_codec *c, const float *x,
                             const float *ref, uint64_t n, const sq_rng_key *key, sq_qbuf *q);
int sq_backend_dequantize_add(sq_backend *be, const sq_codec *c, const sq_qbuf *q,
                              const float *ref, uint64_t n, float *out);
/* The bf16 weight reconstruction variants (contracts as in shardq.h). */
int sq_backend_quantize_bf16(sq_backend *be, const sq_codec *c, const float *x, uint64_t n,
                             const sq_rng_key *key, sq_qbuf *q);
int sq_backend_quantize_diff_bf16(sq_backend *be, const sq_codec *c, const float *x,
                                  const float *ref, uint64_t n, const sq_rng_key *key,
                                  sq_qbuf *q);
int sq_backend_dequantize_bf16(sq_backend *be, const sq_codec *c, const sq_qbuf *q, uint64_t n,
                               float *out);
int sq_backend_dequantize_add_bf16(sq_backend *be, const sq_codec *c, const sq_qbuf *q,
                                   const float *ref, uint64_t n, float *out);
/* sq_reduce (shardq/codec.h) on a backend (be NULL: the C reference);
** the four named sums that follow are its variants. */
int sq_backend_reduce(sq_backend *be, const sq_codec *c_in, sq_dtype acc, const sq_qbuf *chunks,
                      int k, uint64_t n, const sq_codec *c_out, const sq_rng_key *key,
                      sq_qbuf *qout, float *out);
int sq_backend_dequant_sum_requant(sq_backend *be, const sq_codec *c_in, const sq_qbuf *chunks,
                                   int k, uint64_t n, const sq_codec *c_out,
                                   const sq_rng_key *key, sq_qbuf *out);
int sq_backend_dequant_sum(sq_backend *be, const sq_codec *c, const sq_qbuf *chunks, int k,
                           uint64_t n, float *out);
/* The fp16 arithmetic of DeepSpeed's qgZ (sq_dequant_sum_requant_f16,
** sq_dequant_sum_f16). */
int sq_backend_dequant_sum_requant_f16(sq_backend *be, const sq_codec *c_in,
                                       const sq_qbuf *chunks, int k, uint64_t n,
                                       const sq_codec *c_out, const sq_rng_key *key,
                                       sq_qbuf *out);
int sq_backend_dequant_sum_f16(sq_backend *be, const sq_codec *c, const sq_qbuf *chunks, int k,
                               uint64_t n, float *out);

/* ------------------------------------------------------------------------ */
/* Elementwise operations                                                   */
/* ------------------------------------------------------------------------ */

/* For the raw payloads of the collectives: the fp32 partial sums of a ring
** reduce-scatter and bf16 wires, and the residuals of error feedback. Both
** backends write the same bytes and return the same status. NULL with
** n > 0 is SQ_ERR_ARG; n = 0 does nothing. Otherwise every output element is written, then: NaN or Inf in
** the input is SQ_ERR_NONFINITE, else a non-finite output (the sum past
** fp32, a finite value past bf16's range rounded to Inf) SQ_ERR_RANGE. */

/* out = a + b in fp32, element by element (a, b, out may alias). */
int sq_backend_add(sq_backend *be, const float *a, const float *b, uint64_t n, float *out);
/* out = a - b in fp32, element by element (a, b, out may alias): a + (-b),
** the add above with b's sign flipped (exact), so its bytes and statuses are
** those of sq_backend_add(a, -b). Error feedback's residual (world.h). */
int sq_backend_sub(sq_backend *be, const float *a, const float *b, uint64_t n, float *out);
/* out = bf16(x), round to nearest even (sq_f32_to_bf16). */
int sq_backend_to_bf16(sq_backend *be, const float *x, uint64_t n, uint16_t *out);
/* out = fp32(h), exact. */
int sq_backend_from_bf16(sq_backend *be, const uint16_t *h, uint64_t n, float *out);

/* ------------------------------------------------------------------------ */
/* Asynchronous use and timing                                              */
/* ------------------------------------------------------------------------ */

/* Deferred mode (on != 0): on a GPU the operations and same-device copies
** only enqueue work and return SQ_OK once their arguments are checked and
** their kernels launched; sq_backend_sync() waits and returns the status of
** everything since the last sync (the most severe). Turning it off syncs.
** The CPU backend runs every call at once either way. */
int sq_backend_set_deferred(sq_backend *be, int on);
int sq_backend_sync(sq_backend *be);

/* The CUDA stream the backend enqueues its work on, for a caller whose own
** work runs on a stream of its choosing (PyTorch's current stream): every
** later kernel, copy, fill and timer event of the backend goes on
** cuda_stream, a cudaStream_t of the backend's device passed as a pointer
** so that this header needs no CUDA. NULL returns to the backend's own
** stream; the legacy default stream, which CUDA also writes as 0, is
** cudaStreamLegacy, the handle ((cudaStream_t)0x1). Work enqueued after the
** switch runs after all the backend enqueued before it (an event between
** the two streams; the host does not wait), and the findings of a deferred
** batch carry over to the next sync. A stream set here must stay valid
** until the backend is switched away from it or closed. Without
** deferred mode every operation still waits for its stream, as it does on
** the backend's own. The CPU backend takes NULL only: a stream is
** SQ_ERR_UNSUPPORTED. */
int sq_backend_set_stream(sq_backend *be, void *cuda_stream);

/* Seconds between start and stop on the backend's own clock: CUDA events
** on the backend's stream, the host's monotonic clock on the CPU. stop
** waits for the work enqueued before it. */
int sq_backend_timer_start(sq_backend *be);
int sq_backend_timer_stop(sq_backend *be, double *seconds);

/* ------------------------------------------------------------------------ */
/* Placing emulated workers                                                 */
/* ------------------------------------------------------------------------ */

/* A set of backends over which workers are placed round-robin: worker w
** runs on backend w % count. "cpu" is one CPU backend, "cuda" every
** visible GPU, "cuda:0,2" the ones named. */
typedef struct sq_placement {
    int count;
    sq_backend **be;
} sq_placement;

int sq_placement_open(const char *spec, sq_placement *pl, sq_error *err);
sq_backend *sq_placement_worker(const sq_placement *pl, uint64_t worker);
void sq_placement_close(sq_placement *pl);

SQ_END_DECLS
#endif /* SHARDQ_BACKEND_H */
