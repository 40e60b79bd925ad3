/*
** cast.cu -- the casts as codecs (kind=bf16, kind=fp16) on the GPU: the
** codec operations of sq_kernels.h for a cast codec. C reference:
** src/core/codec_cast.c, through the tiles of src/core/codec.c.
**
** A cast is elementwise, so these kernels are the elementwise ones of
** elementwise.cu with the codec's staging around the cast: 256 threads, 8
** consecutive elements a thread, a grid stride over tiles. Codes are
** written and read byte by byte (sq_hd_cast_put / _get): a code region the
** world addresses inside a packed buffer has no alignment to rely on.
**
** What an element finds becomes a flag as the C reference ranks it: NaN or
** Inf in the input is SQK_FLAG_NONFINITE (SQK_FLAG_RANGE when the input is
** a sum of chunks, as the C reference's requantization says), a staged
** value (x - ref, a bf16 rounding) or a cast that leaves its range is
** SQK_FLAG_RANGE, and so is a decoded or summed value that is not finite.
*/
#include "sq_launch.cuh"
#include "sq_hd_cast.h"
#include "sq_sparse.h"

namespace sqk {

enum { CAST_X = 0, CAST_DIFF = 1 };

template <int SRC>
__global__ void __launch_bounds__(BLOCK)
    cast_encode_kernel(const float *x, const float *ref, uint8_t *codes, uint64_t n,
                       uint64_t ntiles, int fp16, int bf16, uint32_t nf_flag, uint32_t *flags)
{
    const uint64_t T = (uint64_t)EPT * blockDim.x;
    uint32_t found = 0;
    for (uint64_t tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        const uint64_t e0 = tile * T + (uint64_t)EPT * threadIdx.x;
        float a[EPT], b[EPT];
        load8(x, e0, n, a);
        if (SRC == CAST_DIFF) load8(ref, e0, n, b);
SQK_UNROLL
        for (int j = 0; j < EPT; j++) {
            if (e0 + j >= n) continue;
            bool bad_in = sq_hd_nonfinite(a[j]) || (SRC == CAST_DIFF && sq_hd_nonfinite(b[j]));
            float v = SRC == CAST_DIFF ? (bf16 ? sq_hd_bf16_diff(a[j], b[j]) : a[j] - b[j])
                                       : (bf16 ? sq_hd_bf16_round(a[j]) : a[j]);
            uint16_t h;
            int f = sq_hd_cast_encode(v, fp16, &h);
            found |= bad_in ? nf_flag : (f ? (uint32_t)SQK_FLAG_RANGE : 0u);
            sq_hd_cast_put(codes, e0 + j, h);
        }
    }
    if (found) set_flag(flags, found);
}

enum { CAST_PLAIN = 0, CAST_ADD = 1 };

template <int MODE>
__global__ void __launch_bounds__(BLOCK)
    cast_decode_kernel(const uint8_t *codes, const float *ref, float *out, uint64_t n,
                       uint64_t ntiles, int fp16, int bf16, uint32_t *flags)
{
    const uint64_t T = (uint64_t)EPT * blockDim.x;
    int bad = 0;
    for (uint64_t tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        const uint64_t e0 = tile * T + (uint64_t)EPT * threadIdx.x;
        float r[EPT], v[EPT];
        /* ref is in registers before out (which may be ref) is written */
        if (MODE == CAST_ADD) load8(ref, e0, n, r);
SQK_UNROLL
        for (int j = 0; j < EPT; j++) {
            float d = e0 + j < n ? sq_hd_cast_decode(sq_hd_cast_get(codes, e0 + j), fp16) : 0.0f;
            if (MODE == CAST_ADD)
                d = bf16 ? sq_hd_bf16_add(d, r[j]) : r[j] + d;
            else if (bf16)
                d = sq_hd_bf16_round(d);
            v[j] = d;
            bad |= e0 + j < n && sq_hd_nonfinite(d);
        }
        store8(out, e0, n, v);
    }
    if (bad) set_flag(flags, SQK_FLAG_RANGE);
}

/* D(in[0]) + ... in fp32 in chunk order, continuing acc when given. */
__global__ void __launch_bounds__(BLOCK)
    cast_sum_kernel(Chunks in, const float *acc, float *out, uint64_t n, uint64_t ntiles, int fp16,
                    uint32_t *flags)
{
    const uint64_t T = (uint64_t)EPT * blockDim.x;
    int bad = 0;
    for (uint64_t tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        const uint64_t e0 = tile * T + (uint64_t)EPT * threadIdx.x;
        float v[EPT];
        if (acc) load8(acc, e0, n, v);
SQK_UNROLL
        for (int j = 0; j < EPT; j++) {
            if (e0 + j >= n) {
                v[j] = 0.0f;
                continue;
            }
            int i = 0;
            if (!acc) v[j] = sq_hd_cast_decode(sq_hd_cast_get(in.codes[i++], e0 + j), fp16);
            for (; i < in.k; i++)
                v[j] = v[j] + sq_hd_cast_decode(sq_hd_cast_get(in.codes[i], e0 + j), fp16);
            bad |= sq_hd_nonfinite(v[j]);
        }
        store8(out, e0, n, v);
    }
    if (bad) set_flag(flags, SQK_FLAG_RANGE);
}

inline uint64_t cast_tiles(uint64_t n) { return (n + EPT * BLOCK - 1) / (EPT * BLOCK); }

inline uint64_t round256(uint64_t b) { return (b + 255) / 256 * 256; }

} /* namespace sqk */

using namespace sqk;

extern "C" int sqk_cast_quantize(sqk_env *env, const sq_codec *c, const float *x,
                                 const float *ref, uint64_t n, const sq_qbuf *q, int bf16,
                                 uint32_t nf_flag)
{
    if (n == 0) return SQ_OK;
    const uint64_t ntiles = cast_tiles(n);
    const int fp16 = c->kind == SQ_KIND_FP16;
    const unsigned grid = grid_for(env, ntiles, BLOCK);
    if (ref) {
        auto kernel = cast_encode_kernel<CAST_DIFF>;
        SQK_LAUNCH(env, "cast_encode_kernel (diff)", kernel, grid, BLOCK, 0, x, ref, q->codes, n,
                   ntiles, fp16, bf16, nf_flag, env->flags);
    } else {
        auto kernel = cast_encode_kernel<CAST_X>;
        SQK_LAUNCH(env, "cast_encode_kernel", kernel, grid, BLOCK, 0, x, ref, q->codes, n, ntiles,
                   fp16, bf16, nf_flag, env->flags);
    }
    return SQ_OK;
}

extern "C" int sqk_cast_dequantize(sqk_env *env, const sq_codec *c, const sq_qbuf *q,
                                   const float *ref, uint64_t n, float *out, int bf16)
{
    if (n == 0) return SQ_OK;
    const uint64_t ntiles = cast_tiles(n);
    const int fp16 = c->kind == SQ_KIND_FP16;
    const unsigned grid = grid_for(env, ntiles, BLOCK);
    if (ref) {
        auto kernel = cast_decode_kernel<CAST_ADD>;
        SQK_LAUNCH(env, "cast_decode_kernel (add)", kernel, grid, BLOCK, 0, q->codes, ref, out,
                   n, ntiles, fp16, bf16, env->flags);
    } else {
        auto kernel = cast_decode_kernel<CAST_PLAIN>;
        SQK_LAUNCH(env, "cast_decode_kernel", kernel, grid, BLOCK, 0, q->codes, ref, out, n,
                   ntiles, fp16, bf16, env->flags);
    }
    return SQ_OK;
}

extern "C" int sqk_cast_sum(sqk_env *env, const sq_codec *c, const sq_qbuf *chunks, int k,
                            uint64_t n, float *out)
{
    if (n == 0) return SQ_OK;
    const uint64_t ntiles = cast_tiles(n);
    const int fp16 = c->kind == SQ_KIND_FP16;
    const unsigned grid = grid_for(env, ntiles, BLOCK);
    for (int first = 0; first < k; first += SQK_MAX_CHUNKS) {
        const int count = k - first < SQK_MAX_CHUNKS ? k - first : SQK_MAX_CHUNKS;
        Chunks in = chunk_table(chunks, first, count);
        const float *acc = first ? out : nullptr;
        SQK_LAUNCH(env, "cast_sum_kernel", cast_sum_kernel, grid, BLOCK, 0, in, acc, out, n,
                   ntiles, fp16, env->flags);
    }
    return SQ_OK;
}

extern "C" uint64_t sqk_cast_sum_requant_scratch(const sq_codec *c_in, int k, uint64_t n,
                                                 const sq_codec *c_out)
{
    (void)c_in;
    (void)k;
    if (sq_kind_cast(c_out->kind)) return round256(n * 4);
    sq_codec co = *c_out;
    co.hadamard = 0;
    return round256(n * 4) + sqk_quantize_scratch(&co, n);
}

/* A cast on either side: the fp32 sum of the chunks into scratch (as the C
** reference's tile sums them, in chunk order), then the output codec's
** quantization of it, whose non-finite input is a sum past fp32: a range
** error. Neither codec carries a transform here. */
extern "C" int sqk_cast_sum_requant(sqk_env *env, const sq_codec *c_in, const sq_qbuf *chunks,
                                    int k, uint64_t n, const sq_codec *c_out,
                                    const sq_rng_key *key, const sq_qbuf *out)
{
    if (n == 0) return SQ_OK;
    float *sum = static_cast<float *>(env->scratch);
    int rc;
    if (sq_kind_cast(c_in->kind)) {
        rc = sqk_cast_sum(env, c_in, chunks, k, n, sum);
    } else {
        KCodec ci = kcodec(c_in, n);
        ci.h = 0;
        rc = sum_chunks_batched(env, ci, chunks, k, n, sum, false);
    }
    if (rc != SQ_OK) return rc;
    if (sq_kind_cast(c_out->kind))
        return sqk_cast_quantize(env, c_out, sum, nullptr, n, out, 0, SQK_FLAG_RANGE);
    sq_codec co = *c_out;
    co.hadamard = 0;
    sqk_env inner = *env;
    inner.scratch = static_cast<char *>(env->scratch) + round256(n * 4);
    rc = sqk_quantize(&inner, &co, sum, nullptr, n, key, out, 0);
    env->failed = inner.failed;
    env->error = inner.error;
    return rc;
}
