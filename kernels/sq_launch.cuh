/*
** sq_launch.cuh -- the host side of the codec kernels: codecs and chunk
** tables in kernel form, grid sizes, and the checked launch.
*/
#ifndef SQ_LAUNCH_CUH
#define SQ_LAUNCH_CUH

#include "sq_tile.cuh"

namespace sqk {

/* Threads of the blocks that need no particular shape, and the most any
** block may have. */
constexpr unsigned BLOCK = 256;
constexpr unsigned BLOCK_MAX = 1024;
/* Static + dynamic shared memory a block may use without opting in. */
constexpr uint64_t SMEM_MAX = 48 * 1024;

/* c as the kernels see it, for a buffer of n elements. */
inline KCodec kcodec(const sq_codec *c, uint64_t n)
{
    KCodec k;
    k.group = c->group;
    k.nbytes = sq_codec_code_bytes(c, n);
    k.gshift = -1;
    if ((c->group & (c->group - 1)) == 0)
        for (k.gshift = 0; ((uint64_t)1 << k.gshift) < c->group; k.gshift++) {
        }
    k.bits = c->bits;
    k.kind = (int)c->kind;
    k.minmax = c->kind == SQ_KIND_MINMAX;
    k.sr = c->round == SQ_ROUND_SR;
    k.h = c->hadamard;
    k.dtype = (int)c->scale;
    k.f16 = 0;
    sq_code_range l = sq_hd_code_range(k.minmax, c->bits, c->levels == SQ_LEVELS_DEEPSPEED);
    k.qm = l.qm;
    k.qlo = l.qlo;
    k.qhi = l.qhi;
    if (sq_kind_fp8(c->kind)) {
        k.qm = k.qhi = sq_hd_fp8_max(c->kind == SQ_KIND_FP8E5M2);
        k.qlo = -k.qm;
    }
    return k;
}

/* Chunks [first, first + count) of a host array of device qbufs. */
inline Chunks chunk_table(const sq_qbuf *q, int first, int count)
{
    Chunks t = {};
    t.k = count;
    for (int i = 0; i < count; i++) {
        t.codes[i] = q[first + i].codes;
        t.scales[i] = q[first + i].scales;
        t.offsets[i] = q[first + i].offsets;
    }
    return t;
}

/* Shared memory of the Hadamard exchange between warps (8 floats a thread),
** which only sizes of 512 and up use. */
inline uint64_t xbuf_bytes(int h, unsigned block)
{
    return h >= XBUF_MIN_H ? (uint64_t)EPT * block * sizeof(float) : 0;
}

/* A grid that keeps every multiprocessor full (2048 resident threads each)
** and walks the remaining tiles with a grid stride. */
inline unsigned grid_for(const sqk_env *env, uint64_t ntiles, unsigned block)
{
    uint64_t per_sm = 2048 / block ? 2048 / block : 1;
    uint64_t g = (uint64_t)(env->sms > 0 ? env->sms : 1) * per_sm;
    if (g > ntiles) g = ntiles;
    return g ? (unsigned)g : 1u;
}

/* D(chunks[0]) + ... + D(chunks[k-1]) into out, SQK_MAX_CHUNKS chunks per
** kernel, each batch continuing the sum of the one before; with finish, the
** inverse Hadamard of c at the end (dequantize.cu). */
int sum_chunks_batched(sqk_env *env, const KCodec &c, const sq_qbuf *chunks, int k, uint64_t n,
                       float *out, bool finish);

} /* namespace sqk */

/* Launches kernel<<<grid, block, smem, env->stream>>>(arg) and returns
** SQ_ERR_DEVICE from the calling function, naming the kernel, if the launch
** fails. Under the tests' emulation, runs it on the CPU. */
#ifdef SQK_SIM
#define SQK_LAUNCH(env, name, kernel, grid, block, smem, ...) \
    sqk_sim_launch((grid), (block), (smem), [&]() { kernel(__VA_ARGS__); })
#else
#define SQK_LAUNCH(env, name, kernel, grid, block, smem, ...)                              \
    do {                                                                                   \
        kernel<<<(grid), (block), (smem), static_cast<cudaStream_t>((env)->stream)>>>(__VA_ARGS__); \
        cudaError_t launch_err_ = cudaGetLastError();                                      \
        if (launch_err_ != cudaSuccess) {                                                  \
            (env)->failed = (name);                                                        \
            (env)->error = (int)launch_err_;                                               \
            return SQ_ERR_DEVICE;                                                          \
        }                                                                                  \
    } while (0)
#endif

#endif
