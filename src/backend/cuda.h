/*
** cuda.h -- the CUDA half of the backend layer (kernels/cuda_backend.cu),
** as backend.c calls it. Arguments arrive validated. A build without CUDA
** links the stubs of device_none.c, which open nothing.
**
** Every function that can fail returns a status of shardq.h and leaves a
** sentence naming the failed CUDA call in sq_cuda_error().
*/
#ifndef SQ_BACKEND_CUDA_H
#define SQ_BACKEND_CUDA_H

#include "shardq/codec.h"

#include <stddef.h>
#include <stdint.h>

SQ_BEGIN_DECLS

typedef struct sq_cuda sq_cuda;

int sq_cuda_open(int device, sq_cuda **out, sq_error *err);
void sq_cuda_close(sq_cuda *d);
const char *sq_cuda_description(const sq_cuda *d);
const char *sq_cuda_error(const sq_cuda *d);

int sq_cuda_alloc(sq_cuda *d, size_t bytes, void **p);
void sq_cuda_free(sq_cuda *d, void *p);
int sq_cuda_put(sq_cuda *d, void *dst, const void *src, size_t bytes);
int sq_cuda_get(sq_cuda *d, void *dst, const void *src, size_t bytes);
int sq_cuda_fill(sq_cuda *d, void *dst, int byte, size_t bytes);
/* dst on device dd, src on device sd (the same, or a peer copy) */
int sq_cuda_copy(sq_cuda *dd, void *dst, sq_cuda *sd, const void *src, size_t bytes);

/* bf16 != 0: the bf16 weight reconstruction variants (sq_quantize_bf16 ...) */
int sq_cuda_quantize(sq_cuda *d, const sq_codec *c, const float *x, const float *ref,
                     uint64_t n, const sq_rng_key *key, const sq_qbuf *q, int bf16);
int sq_cuda_dequantize(sq_cuda *d, const sq_codec *c, const sq_qbuf *q, const float *ref,
                       uint64_t n, float *out, int bf16);
/* f16: the fp16 arithmetic of sq_dequant_sum_f16 / sq_dequant_sum_requant_f16 */
int sq_cuda_sum_requant(sq_cuda *d, const sq_codec *c_in, const sq_qbuf *chunks, int k,
                        uint64_t n, const sq_codec *c_out, const sq_rng_key *key,
                        const sq_qbuf *out, int f16);
int sq_cuda_sum(sq_cuda *d, const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n,
                float *out, int f16);
/* the elementwise operations of backend.h; n > 0 */
int sq_cuda_add(sq_cuda *d, const float *a, const float *b, uint64_t n, float *out);
int sq_cuda_sub(sq_cuda *d, const float *a, const float *b, uint64_t n, float *out);
int sq_cuda_to_bf16(sq_cuda *d, const float *x, uint64_t n, uint16_t *out);
int sq_cuda_from_bf16(sq_cuda *d, const uint16_t *h, uint64_t n, float *out);

/* stream: a cudaStream_t of d's device, NULL for d's own */
int sq_cuda_set_stream(sq_cuda *d, void *stream);
int sq_cuda_set_deferred(sq_cuda *d, int on);
int sq_cuda_sync(sq_cuda *d);
int sq_cuda_timer_start(sq_cuda *d);
int sq_cuda_timer_stop(sq_cuda *d, double *seconds);

SQ_END_DECLS
#endif
