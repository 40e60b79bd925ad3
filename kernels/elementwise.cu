/*
** elementwise.cu -- the elementwise kernels of backend.h: fp32 add (the
** partial sums of a ring reduce-scatter) and subtract (error feedback's
** residual), and the fp32 <-> bf16 conversions of bf16 wires. C reference:
** the loops of sq_backend_add(), sq_backend_sub(), sq_backend_to_bf16()
** and sq_backend_from_bf16() in src/backend/backend.c.
**
** The tiles of the codec kernels (sq_tile.cuh): 256 threads, 8 consecutive
** elements a thread, loaded and stored as vectors where aligned. Each
** element goes through the same sq_hd.h function as on the CPU, which also
** says what it found; a thread ORs its findings over all its tiles and
** reports them with one atomic at the end. Elements past n are loaded as
** zeros, which convert and add to zeros and find nothing.
*/
#include "sq_launch.cuh"

namespace sqk {

/* A thread's 8 bf16 values are 16 bytes: one uint4 where aligned, two
** values a word (little-endian, the element of lower index in the low half). */
SQK_DEV void load8_u16(const uint16_t *p, uint64_t e0, uint64_t n, uint16_t v[EPT])
{
    if (e0 + EPT <= n && aligned(p, 16)) {
        const uint4 w = *reinterpret_cast<const uint4 *>(p + e0);
        const uint32_t words[4] = {w.x, w.y, w.z, w.w};
SQK_UNROLL
        for (int j = 0; j < EPT; j++) v[j] = (uint16_t)(words[j / 2] >> (16 * (j % 2)));
        return;
    }
SQK_UNROLL
    for (int j = 0; j < EPT; j++) v[j] = e0 + j < n ? p[e0 + j] : (uint16_t)0;
}

SQK_DEV void store8_u16(uint16_t *p, uint64_t e0, uint64_t n, const uint16_t v[EPT])
{
    if (e0 + EPT <= n && aligned(p, 16)) {
        uint32_t words[4];
SQK_UNROLL
        for (int j = 0; j < 4; j++) words[j] = (uint32_t)v[2 * j] | (uint32_t)v[2 * j + 1] << 16;
        __stcs(reinterpret_cast<uint4 *>(p + e0),
               make_uint4(words[0], words[1], words[2], words[3]));
        return;
    }
SQK_UNROLL
    for (int j = 0; j < EPT; j++)
        if (e0 + j < n) p[e0 + j] = v[j];
}

/* A thread's findings (SQ_HD_EW_*) as flags. */
SQK_DEV void report(uint32_t *flags, int found)
{
    if (!found) return;
    set_flag(flags, ((found & SQ_HD_EW_INPUT) ? (uint32_t)SQK_FLAG_NONFINITE : 0u) |
                        ((found & SQ_HD_EW_OUTPUT) ? (uint32_t)SQK_FLAG_OUTPUT : 0u));
}

/* negate: out = a - b as a + (-b) (the negation is exact: the sign
** bit alone), the CPU's sq_backend_sub. */
__global__ void __launch_bounds__(BLOCK) add_kernel(const float *a, const float *b, float *out,
                                                    uint64_t n, uint64_t ntiles, uint32_t *flags,
                                                    int negate)
{
    const uint64_t T = (uint64_t)EPT * blockDim.x;
    int found = 0;
    for (uint64_t tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        const uint64_t e0 = tile * T + (uint64_t)EPT * threadIdx.x;
        float x[EPT], y[EPT], s[EPT];
        /* both inputs are in registers before out (which may be a or b) is written */
        load8(a, e0, n, x);
        load8(b, e0, n, y);
SQK_UNROLL
        for (int j = 0; j < EPT; j++) found |= sq_hd_ew_add(x[j], negate ? -y[j] : y[j], &s[j]);
        store8(out, e0, n, s);
    }
    report(flags, found);
}

__global__ void __launch_bounds__(BLOCK) to_bf16_kernel(const float *x, uint16_t *out, uint64_t n,
                                                        uint64_t ntiles, uint32_t *flags)
{
    const uint64_t T = (uint64_t)EPT * blockDim.x;
    int found = 0;
    for (uint64_t tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        const uint64_t e0 = tile * T + (uint64_t)EPT * threadIdx.x;
        float v[EPT];
        uint16_t h[EPT];
        load8(x, e0, n, v);
SQK_UNROLL
        for (int j = 0; j < EPT; j++) found |= sq_hd_ew_to_bf16(v[j], &h[j]);
        store8_u16(out, e0, n, h);
    }
    report(flags, found);
}

__global__ void __launch_bounds__(BLOCK) from_bf16_kernel(const uint16_t *h, float *out, uint64_t n,
                                                          uint64_t ntiles, uint32_t *flags)
{
    const uint64_t T = (uint64_t)EPT * blockDim.x;
    int found = 0;
    for (uint64_t tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        const uint64_t e0 = tile * T + (uint64_t)EPT * threadIdx.x;
        uint16_t v[EPT];
        float f[EPT];
        load8_u16(h, e0, n, v);
SQK_UNROLL
        for (int j = 0; j < EPT; j++) found |= sq_hd_ew_from_bf16(v[j], &f[j]);
        store8(out, e0, n, f);
    }
    report(flags, found);
}

inline uint64_t ew_tiles(uint64_t n) { return (n + EPT * BLOCK - 1) / (EPT * BLOCK); }

} /* namespace sqk */

using namespace sqk;

extern "C" int sqk_add(sqk_env *env, const float *a, const float *b, uint64_t n, float *out)
{
    if (n == 0) return SQ_OK;
    const uint64_t ntiles = ew_tiles(n);
    SQK_LAUNCH(env, "add_kernel", add_kernel, grid_for(env, ntiles, BLOCK), BLOCK, 0, a, b, out,
               n, ntiles, env->flags, 0);
    return SQ_OK;
}

extern "C" int sqk_sub(sqk_env *env, const float *a, const float *b, uint64_t n, float *out)
{
    if (n == 0) return SQ_OK;
    const uint64_t ntiles = ew_tiles(n);
    SQK_LAUNCH(env, "add_kernel", add_kernel, grid_for(env, ntiles, BLOCK), BLOCK, 0, a, b, out,
               n, ntiles, env->flags, 1);
    return SQ_OK;
}

extern "C" int sqk_to_bf16(sqk_env *env, const float *x, uint64_t n, uint16_t *out)
{
    if (n == 0) return SQ_OK;
    const uint64_t ntiles = ew_tiles(n);
    SQK_LAUNCH(env, "to_bf16_kernel", to_bf16_kernel, grid_for(env, ntiles, BLOCK), BLOCK, 0, x,
               out, n, ntiles, env->flags);
    return SQ_OK;
}

extern "C" int sqk_from_bf16(sqk_env *env, const uint16_t *h, uint64_t n, float *out)
{
    if (n == 0) return SQ_OK;
    const uint64_t ntiles = ew_tiles(n);
    SQK_LAUNCH(env, "from_bf16_kernel", from_bf16_kernel, grid_for(env, ntiles, BLOCK), BLOCK, 0,
               h, out, n, ntiles, env->flags);
    return SQ_OK;
}
