/*
** sq_kernels.h -- the CUDA codec kernels, as the backend calls them.
**
** Each sqk_* function enqueues the kernels of one codec operation on a
** stream and returns at once: it does not wait, allocate or copy. Pointers
** are device pointers (host pointers when the tests run the kernels under
** their CPU emulation, tests/sim). The caller (src/backend) has validated
** the arguments as the C reference does; what the kernels find in the data
** (NaN, overflow) is ORed into the device word *env->flags, which
** sqk_status() turns into the status the C reference returns. The
** elementwise operations of backend.h (fp32 add, bf16 conversions) follow
** the same rules.
**
** The kernels compute exactly what src/core/codec.c computes, from the same
** per-element source (sq_hd.h); the tests compare the bytes.
*/
#ifndef SQ_KERNELS_H
#define SQ_KERNELS_H

#include "shardq/codec.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Chunks that one kernel sums, passed by value as a kernel argument; more
** are summed in batches of this many, in the same order. */
#define SQK_MAX_CHUNKS 64

/* What the kernels report through *env->flags. */
enum {
    SQK_FLAG_NONFINITE = 1u, /* NaN or Inf in the input */
    SQK_FLAG_RANGE = 2u,     /* finite input, result beyond fp32 (or a scale
                             ** beyond its dtype), non-finite decoded output */
    SQK_FLAG_TRANSFORM = 4u, /* the Hadamard transform made a value non-finite */
    SQK_FLAG_OUTPUT = 8u     /* an elementwise operation made finite input
                             ** non-finite (non-finite input anywhere
                             ** outranks it, as in sq_hd.h) */
};

typedef struct sqk_env {
    void *stream;        /* cudaStream_t the kernels are enqueued on */
    int sms;             /* multiprocessors of the device: sizes the grids */
    uint32_t *flags;     /* device word the kernels OR their findings into */
    void *scratch;       /* device memory of at least sqk_*_scratch() bytes */
    const char *failed;  /* set when a launch fails: the kernel's name */
    int error;           /* and the cudaError_t it returned */
} sqk_env;

/* Device scratch an operation needs (0 for most: large or irregular groups
** need per-group keys, more than SQK_MAX_CHUNKS chunks an fp32 sum). */
uint64_t sqk_quantize_scratch(const sq_codec *c, uint64_t n);
uint64_t sqk_sum_requant_scratch(const sq_codec *c_in, int k, uint64_t n,
                                 const sq_codec *c_out);

/* The six operations of shardq.h; ref NULL gives quantize / dequantize,
** non-NULL quantize_diff / dequantize_add; bf16 != 0 their bf16 weight
** reconstruction variants (sq_quantize_bf16 ...). Return SQ_OK, or
** SQ_ERR_DEVICE with env->failed and env->error set when a launch fails. */
int sqk_quantize(sqk_env *env, const sq_codec *c, const float *x, const float *ref,
                 uint64_t n, const sq_rng_key *key, const sq_qbuf *q, int bf16);
int sqk_dequantize(sqk_env *env, const sq_codec *c, const sq_qbuf *q, const float *ref,
                   uint64_t n, float *out, int bf16);
int sqk_sum_requant(sqk_env *env, const sq_codec *c_in, const sq_qbuf *chunks, int k,
                    uint64_t n, const sq_codec *c_out, const sq_rng_key *key,
                    const sq_qbuf *out);
int sqk_sum(sqk_env *env, const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n,
            float *out);
/* The same two sums in fp16 (sq_dequant_sum_f16, sq_dequant_sum_requant_f16;
** the codecs carry no Hadamard transform, and the scratch is
** sqk_sum_requant_scratch's). */
int sqk_sum_requant_f16(sqk_env *env, const sq_codec *c_in, const sq_qbuf *chunks, int k,
                        uint64_t n, const sq_codec *c_out, const sq_rng_key *key,
                        const sq_qbuf *out);
int sqk_sum_f16(sqk_env *env, const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n,
                float *out);

/* The elementwise operations of backend.h (elementwise.cu); out may equal
** an input. Non-finite input sets SQK_FLAG_NONFINITE, a non-finite result
** of finite input SQK_FLAG_OUTPUT. */
int sqk_add(sqk_env *env, const float *a, const float *b, uint64_t n, float *out);
/* out = a - b: sq_hd_ew_add(a, -b), as sq_backend_sub on the CPU */
int sqk_sub(sqk_env *env, const float *a, const float *b, uint64_t n, float *out);
int sqk_to_bf16(sqk_env *env, const float *x, uint64_t n, uint16_t *out);
int sqk_from_bf16(sqk_env *env, const uint16_t *h, uint64_t n, float *out);

/* The casts as codecs (kind=bf16, kind=fp16; cast.cu): sqk_quantize,
** sqk_dequantize, sqk_sum and sqk_sum_requant hand a cast codec to these.
** nf_flag is what non-finite input sets (SQK_FLAG_RANGE when the input is
** a sum). The fp16 sums refuse casts before they reach the kernels. */
int sqk_cast_quantize(sqk_env *env, const sq_codec *c, const float *x, const float *ref,
                      uint64_t n, const sq_qbuf *q, int bf16, uint32_t nf_flag);
int sqk_cast_dequantize(sqk_env *env, const sq_codec *c, const sq_qbuf *q, const float *ref,
                        uint64_t n, float *out, int bf16);
int sqk_cast_sum(sqk_env *env, const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n,
                 float *out);
uint64_t sqk_cast_sum_requant_scratch(const sq_codec *c_in, int k, uint64_t n,
                                      const sq_codec *c_out);
int sqk_cast_sum_requant(sqk_env *env, const sq_codec *c_in, const sq_qbuf *chunks, int k,
                         uint64_t n, const sq_codec *c_out, const sq_rng_key *key,
                         const sq_qbuf *out);

/* The sparse kinds (kind=topk, kind=randk; sparse.cu), without a
** transform (the backend refuses hadamard= for them): sqk_quantize,
** sqk_dequantize, sqk_sum and sqk_sum_requant hand them to these (a sum
** requantization with a sparse codec on either side). Decoding needs
** sqk_decode_scratch() bytes of scratch (dequantize_add, the sums). */
uint64_t sqk_decode_scratch(const sq_codec *c, uint64_t n);
uint64_t sqk_sparse_quantize_scratch(const sq_codec *c, uint64_t n);
int sqk_sparse_quantize(sqk_env *env, const sq_codec *c, const float *x, const float *ref,
                        uint64_t n, const sq_rng_key *key, const sq_qbuf *q, int bf16,
                        uint32_t nf_flag);
int sqk_sparse_dequantize(sqk_env *env, const sq_codec *c, const sq_qbuf *q, const float *ref,
                          uint64_t n, float *out, int bf16);
int sqk_sparse_sum(sqk_env *env, const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n,
                   float *out);
uint64_t sqk_sparse_sum_requant_scratch(const sq_codec *c_in, int k, uint64_t n,
                                        const sq_codec *c_out);
int sqk_sparse_sum_requant(sqk_env *env, const sq_codec *c_in, const sq_qbuf *chunks, int k,
                           uint64_t n, const sq_codec *c_out, const sq_rng_key *key,
                           const sq_qbuf *out);

/* The status for the flags of one or more operations. A range problem
** outranks non-finite input, which outranks a transform or an elementwise
** result that overflowed (non-finite input makes those non-finite too).
** For an input with one kind of problem this is the C reference's status;
** when one input has several, the two backends may name different ones
** (never for the elementwise operations, whose rule is this order). */
static inline int sqk_status(uint32_t flags)
{
    if (flags & SQK_FLAG_RANGE) return SQ_ERR_RANGE;
    if (flags & SQK_FLAG_NONFINITE) return SQ_ERR_NONFINITE;
    if (flags & (SQK_FLAG_TRANSFORM | SQK_FLAG_OUTPUT)) return SQ_ERR_RANGE;
    return SQ_OK;
}

#ifdef __cplusplus
}
#endif
#endif
