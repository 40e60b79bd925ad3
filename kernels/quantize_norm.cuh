/*
** quantize_norm.cuh -- the quantizing kernels of QSGD and the scaled sign,
** whose groups are scaled by a float sum (of x^2, of |x|). Included by
** quantize.cu, whose QuantArgs and gather() it shares. C reference:
** sq_dense_quantize_tile() in src/core/codec_dense.c.
**
** A float sum depends on its order, so unlike the integer keys of the
** other kinds it cannot be folded by whichever thread comes first. sq_hd.h
** fixes the order the C reference keeps: element j of a group into lane
** partial j % 32, in increasing j, then the partials folded in halves. One
** warp per group does exactly that (lane l reads elements l, l + 32, ...,
** then xor shuffles of 16, 8, 4, 2, 1), so any group size works. Three
** passes:
**
**   stage   (only for x - ref, bf16 staging, sums of chunks or a Hadamard
**           transform) the values to quantize, into device scratch
**   stats   a warp per group: absmax (an integer max), the lane sums, the
**           group's multiplier into scratch and its scale into the qbuf
**   encode  each thread codes and packs its 8 elements, as quantize.cu
*/
#ifndef SQ_QUANTIZE_NORM_CUH
#define SQ_QUANTIZE_NORM_CUH

namespace sqk {

/* What the encode pass reads of group gi: gp[2 gi] the multiplier m,
** gp[2 gi + 1] the lift P, 0 for a group that failed (its codes are then
** left 0: the operation reports an error). */
struct NormArgs {
    const float *vals; /* the values to quantize: x itself, or the staged ones */
    float *gp;
    uint32_t stats_flag; /* what a non-finite value found by stats is (0 when
                         ** staging has already flagged it) */
};

template <int SRC>
__global__ void __launch_bounds__(BLOCK) norm_stage_kernel(const __grid_constant__ QuantArgs a,
                                                           float *vals)
{
    SQK_DYN_SMEM(smem);
    float *xbuf = reinterpret_cast<float *>(smem);
    const uint64_t T = (uint64_t)EPT * blockDim.x;
    for (uint64_t tile = blockIdx.x; tile < a.ntiles; tile += gridDim.x) {
        const uint64_t e0 = tile * T + (uint64_t)EPT * threadIdx.x;
        float v[EPT];
        gather<SRC>(a, e0, v);
        if (a.c.h && transform(v, a.c.h, false, e0, a.n, xbuf))
            set_flag(a.flags, SQK_FLAG_TRANSFORM);
        store8(vals, e0, a.n, v);
    }
}

/* Each warp takes one group per round; every warp of a block runs the same
** rounds and shuffles (a warp past the last group reduces neutral values),
** so no shuffle is ever left without its partners. */
__global__ void __launch_bounds__(BLOCK) norm_stats_kernel(const __grid_constant__ QuantArgs a,
                                                           const __grid_constant__ NormArgs na)
{
    const KCodec &c = a.c;
    const unsigned lane = threadIdx.x & 31u;
    const uint64_t wpb = blockDim.x / 32u, warp = threadIdx.x / 32u;
    const int squares = c.kind == SQ_KIND_QSGD;
    for (uint64_t base = (uint64_t)blockIdx.x * wpb; base < a.ngroups;
         base += (uint64_t)gridDim.x * wpb) {
        const uint64_t gi = base + warp;
        const bool have = gi < a.ngroups;
        const uint64_t g0 = have ? gi * c.group : 0;
        const uint64_t len = have ? (a.n - g0 < c.group ? a.n - g0 : c.group) : 0;
        const float *x = na.vals + g0;
        uint32_t amax = 0;
        for (uint64_t j = lane; j < len; j += 32) amax = umax(amax, sq_bits_f32(x[j]) & 0x7fffffffu);
        for (int m = 16; m >= 1; m >>= 1) amax = umax(amax, __shfl_xor_sync(FULL_MASK, amax, m));
        const bool finite = amax < 0x7f800000u;
        const float P = sq_hd_norm_lift(finite ? sq_f32_bits(amax) : 0.0f);
        float part = 0.0f;
        if (finite)
            for (uint64_t j = lane; j < len; j += 32) part = part + sq_hd_norm_term(x[j], P, squares);
        for (int m = 16; m >= 1; m >>= 1) part = part + __shfl_xor_sync(FULL_MASK, part, m);
        if (!have || lane != 0) continue;
        float m = 0.0f, lift = 0.0f;
        if (!finite) {
            if (na.stats_flag) set_flag(a.flags, na.stats_flag);
        } else {
            sq_group_params p = squares ? sq_hd_qsgd_params(part, P, c.qm, c.dtype)
                                        : sq_hd_sign_params(part, len, P, c.dtype);
            const float lim = squares ? c.qm : 1.0f;
            if (!sq_hd_grid_finite(&p, -lim, lim)) {
                set_flag(a.flags, SQK_FLAG_RANGE);
            } else {
                sq_hd_store_meta(a.scales, gi, c.dtype, p.s);
                m = p.m;
                lift = p.lift;
            }
        }
        na.gp[2 * gi] = m;
        na.gp[2 * gi + 1] = lift;
    }
}

__global__ void __launch_bounds__(BLOCK) norm_encode_kernel(const __grid_constant__ QuantArgs a,
                                                            const __grid_constant__ NormArgs na)
{
    const KCodec &c = a.c;
    const uint64_t T = (uint64_t)EPT * blockDim.x;
    const uint32_t mask = (1u << c.bits) - 1u;
    for (uint64_t tile = blockIdx.x; tile < a.ntiles; tile += gridDim.x) {
        const uint64_t e0 = tile * T + (uint64_t)EPT * threadIdx.x;
        if (e0 >= a.n) continue;
        float v[EPT], u[EPT];
        load8(na.vals, e0, a.n, v);
        draw_uniforms(a, c.sr, e0, u);
        uint64_t gi = group_of(c, e0);
        uint64_t left = (gi + 1) * c.group - e0;
        sq_group_params p = {na.gp[2 * gi], na.gp[2 * gi + 1], 0.0f, 1.0f};
        uint64_t acc = 0;
SQK_UNROLL
        for (int j = 0; j < EPT; j++) {
            uint32_t code = 0;
            if (e0 + j < a.n) {
                if (left == 0) {
                    gi++;
                    left = c.group;
                    p.m = na.gp[2 * gi];
                    p.lift = na.gp[2 * gi + 1];
                }
                if (p.lift != 0.0f)
                    code = (uint32_t)(c.kind == SQ_KIND_QSGD
                                          ? sq_hd_qsgd_code(v[j], &p, c.sr, u[j], c.qm)
                                          : sq_hd_sign_code(v[j])) & mask;
                left--;
            }
            acc = (acc << c.bits) | code;
        }
        store_code_bytes(a.codes, e0, c.bits, c.nbytes, acc);
    }
}

/* Scratch of the three passes for n elements: the staged values, then two
** floats per group. */
static uint64_t norm_vals_bytes(uint64_t n) { return (n * 4 + 255) / 256 * 256; }

static uint64_t norm_scratch(const KCodec &c, uint64_t n)
{
    const uint64_t groups = (n + c.group - 1) / c.group;
    return norm_vals_bytes(n) + (groups * 8 + 255) / 256 * 256;
}

template <int SRC>
static int run_quantize_norm(sqk_env *env, QuantArgs &a, void *scratch)
{
    const uint64_t tile = (uint64_t)EPT * BLOCK;
    a.ntiles = (a.n + tile - 1) / tile;
    a.ngroups = (a.n + a.c.group - 1) / a.c.group;
    const bool stage = SRC != SRC_X || a.c.h || a.bf16;
    NormArgs na;
    na.vals = stage ? static_cast<const float *>(scratch) : a.x;
    na.gp = reinterpret_cast<float *>(static_cast<char *>(scratch) + norm_vals_bytes(a.n));
    na.stats_flag = stage ? 0u : a.nf_flag;
    const unsigned grid = grid_for(env, a.ntiles, BLOCK);
    if (stage) {
        auto kernel = norm_stage_kernel<SRC>;
        SQK_LAUNCH(env, "norm_stage_kernel", kernel, grid, BLOCK, xbuf_bytes(a.c.h, BLOCK), a,
                   static_cast<float *>(scratch));
    }
    const uint64_t warps = BLOCK / 32;
    const unsigned sgrid = grid_for(env, (a.ngroups + warps - 1) / warps, BLOCK);
    SQK_LAUNCH(env, "norm_stats_kernel", norm_stats_kernel, sgrid, BLOCK, 0, a, na);
    SQK_LAUNCH(env, "norm_encode_kernel", norm_encode_kernel, grid, BLOCK, 0, a, na);
    return SQ_OK;
}

} /* namespace sqk */

#endif
