/*
** dequantize.cu -- the decoding kernels: dequantize, dequantize and add
** (qWD receive), and dequantize k chunks + sum (+ inverse Hadamard, the last
** hop of a two-level reduce-scatter). C reference: decode_tile(),
** sum_tile() and run_tile() in src/core/codec.c.
**
** Decoding needs no group statistics, so one block shape fits every codec:
** 256 threads, tiles of 2048 elements (whole Hadamard blocks up to 1024).
** Each thread unpacks the bytes of its 8 codes, scales them, sums the chunks
** in chunk order, and the block applies the inverse transform last.
*/
#include "sq_launch.cuh"
#include "sq_sparse.h"

namespace sqk {

enum DecodeMode { DEC_PLAIN, DEC_ADD, DEC_SUM };

struct DecodeArgs {
    Chunks in;
    KCodec c;
    uint64_t n, ntiles;
    const float *acc;  /* DEC_SUM: a sum to continue (an earlier batch), or NULL */
    const float *ref;  /* DEC_ADD */
    float *out;
    int finish;        /* apply the inverse Hadamard (the last batch) */
    int bf16;          /* DEC_PLAIN, DEC_ADD: bf16 output (sq_hd_bf16_*) */
    uint32_t *flags;
};

template <int MODE>
__global__ void __launch_bounds__(BLOCK) decode_kernel(const __grid_constant__ DecodeArgs a)
{
    SQK_DYN_SMEM(smem);
    float *xbuf = reinterpret_cast<float *>(smem);
    const uint64_t T = (uint64_t)EPT * blockDim.x;
    for (uint64_t tile = blockIdx.x; tile < a.ntiles; tile += gridDim.x) {
        const uint64_t e0 = tile * T + (uint64_t)EPT * threadIdx.x;
        float v[EPT];
        if (MODE == DEC_SUM)
            sum8(a.c, a.in, a.acc, e0, a.n, v);
        else
            decode8(a.c, a.in.codes[0], a.in.scales[0], a.in.offsets[0], e0, a.n, v);
        if (a.finish && a.c.h) transform(v, a.c.h, true, e0, a.n, xbuf);
        if (MODE == DEC_ADD) {
            float r[EPT];
            load8(a.ref, e0, a.n, r);
            if (a.bf16) {
SQK_UNROLL
                for (int j = 0; j < EPT; j++) v[j] = sq_hd_bf16_add(v[j], r[j]);
            } else {
SQK_UNROLL
                for (int j = 0; j < EPT; j++) v[j] = r[j] + v[j];
            }
        } else if (MODE == DEC_PLAIN && a.bf16) {
SQK_UNROLL
            for (int j = 0; j < EPT; j++) v[j] = sq_hd_bf16_round(v[j]);
        }
        /* damaged metadata, or a sum past fp32 */
        if (any_nonfinite(v, e0, a.n)) set_flag(a.flags, SQK_FLAG_RANGE);
        store8(a.out, e0, a.n, v);
    }
}

static DecodeArgs decode_args(sqk_env *env, const KCodec &c, uint64_t n, float *out)
{
    DecodeArgs a = DecodeArgs();
    a.c = c;
    a.n = n;
    a.ntiles = (n + EPT * BLOCK - 1) / (EPT * BLOCK);
    a.out = out;
    a.finish = 1;
    a.flags = env->flags;
    return a;
}

int sum_chunks_batched(sqk_env *env, const KCodec &c, const sq_qbuf *chunks, int k, uint64_t n,
                       float *out, bool finish)
{
    if (n == 0) return SQ_OK;
    DecodeArgs a = decode_args(env, c, n, out);
    const unsigned grid = grid_for(env, a.ntiles, BLOCK);
    auto kernel = decode_kernel<DEC_SUM>;
    for (int first = 0; first < k; first += SQK_MAX_CHUNKS) {
        const int count = k - first < SQK_MAX_CHUNKS ? k - first : SQK_MAX_CHUNKS;
        a.in = chunk_table(chunks, first, count);
        a.acc = first ? out : nullptr;
        a.finish = finish && first + count == k;
        SQK_LAUNCH(env, "decode_kernel (sum)", kernel, grid, BLOCK, xbuf_bytes(c.h, BLOCK), a);
    }
    return SQ_OK;
}

} /* namespace sqk */

using namespace sqk;

extern "C" int sqk_dequantize(sqk_env *env, const sq_codec *c, const sq_qbuf *q, const float *ref,
                              uint64_t n, float *out, int bf16)
{
    if (sq_kind_cast(c->kind)) return sqk_cast_dequantize(env, c, q, ref, n, out, bf16);
    if (sq_kind_sparse(c->kind)) return sqk_sparse_dequantize(env, c, q, ref, n, out, bf16);
    if (n == 0) return SQ_OK;
    DecodeArgs a = decode_args(env, kcodec(c, n), n, out);
    a.in = chunk_table(q, 0, 1);
    a.ref = ref;
    a.bf16 = bf16;
    const unsigned grid = grid_for(env, a.ntiles, BLOCK);
    if (ref) {
        auto kernel = decode_kernel<DEC_ADD>;
        SQK_LAUNCH(env, "decode_kernel (add)", kernel, grid, BLOCK, xbuf_bytes(a.c.h, BLOCK), a);
    } else {
        auto kernel = decode_kernel<DEC_PLAIN>;
        SQK_LAUNCH(env, "decode_kernel", kernel, grid, BLOCK, xbuf_bytes(a.c.h, BLOCK), a);
    }
    return SQ_OK;
}

extern "C" int sqk_sum(sqk_env *env, const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n,
                       float *out)
{
    if (sq_kind_cast(c->kind)) return sqk_cast_sum(env, c, chunks, k, n, out);
    if (sq_kind_sparse(c->kind)) return sqk_sparse_sum(env, c, chunks, k, n, out);
    return sum_chunks_batched(env, kcodec(c, n), chunks, k, n, out, true);
}

extern "C" int sqk_sum_f16(sqk_env *env, const sq_codec *c, const sq_qbuf *chunks, int k,
                           uint64_t n, float *out)
{
    KCodec kc = kcodec(c, n);
    kc.f16 = 1;
    return sum_chunks_batched(env, kc, chunks, k, n, out, true);
}
