/*
** quantize.cu -- the quantizing kernels: quantize, quantize the difference
** x - ref, and dequantize k chunks + sum + requantize. C reference:
** quantize_tile() and run_tile() in src/core/codec.c.
**
** One kernel does it all when a tile of the block can hold whole groups:
** each thread gathers its 8 values (x, x - ref, or a sum of decoded chunks),
** the block applies the Hadamard transform, reduces each group's keys
** (sq_tile.cuh), and every thread quantizes and packs its own elements. The
** values cross device memory once, which is what lets the kernel run near
** the copy bandwidth. How a group's keys are reduced depends on its size:
**
**   group = 8 x 2^k <= 256  shuffles inside a warp, no shared memory
**   group = 256 x m         a warp reduces, then one atomic per warp into
**                           a shared slot per group
**   anything else           each thread folds its elements into shared
**                           slots, one atomic per group it touches
**
** Groups too large for a block (or whose shape would need a block past 1024
** threads) take two passes: the first reduces the keys of every group into
** device scratch with atomics, the second gathers the values again and
** quantizes. Integer max and min give the same keys in any order, so both
** paths give the C reference's bytes. (QSGD and the scaled sign sum their
** groups in floats, in a fixed order: quantize_norm.cuh.)
*/
#include "sq_launch.cuh"
#include "sq_sparse.h"

namespace sqk {

enum Src { SRC_X, SRC_DIFF, SRC_SUM };
enum Phase { PH_FUSED, PH_STATS, PH_ENCODE };
enum Red { RED_SHFL, RED_WARP, RED_SLOTS };

struct QuantArgs {
    const float *x, *ref;   /* SRC_X, SRC_DIFF */
    Chunks in;              /* SRC_SUM: chunks under cin */
    KCodec cin;
    KCodec c;               /* the codec quantized to */
    uint64_t n, ntiles, ngroups;
    uint32_t key_lo, key_hi, step, ws; /* the Philox key and counter words */
    uint8_t *codes;
    void *scales, *offsets;
    uint32_t *gkeys_hi, *gkeys_lo; /* two passes: per-group keys */
    uint32_t *flags;
    uint32_t nf_flag;       /* what a non-finite value is: bad input, or for
                            ** sums a result beyond fp32 */
    int bf16;               /* SRC_X, SRC_DIFF: stage bf16(x) or
                            ** bf16(bf16(x) - bf16(ref)) (sq_hd_bf16_*) */
    unsigned slots;         /* per-group key slots in shared memory */
    int red;                /* PH_FUSED: how keys are reduced (Red) */
    int tpg;                /* RED_SHFL: threads per group */
};

/* The uniforms of the thread's 8 elements from e0 (a multiple of EPT: one
** Philox block), or zeros for round-to-nearest. */
SQK_DEV void draw_uniforms(const QuantArgs &a, int sr, uint64_t e0, float u[EPT])
{
    static_assert(EPT == 8, "a thread's elements are one Philox block's eight");
    if (sr) {
        sq_hd_uniform8(a.key_lo, a.key_hi, a.step, a.ws, e0 / 8, u);
    } else {
SQK_UNROLL
        for (int j = 0; j < EPT; j++) u[j] = 0.0f;
    }
}

/* The thread's 8 values: x, x - ref (in fp32), or the sum of the chunks;
** with a.bf16, bf16(x) or bf16(bf16(x) - bf16(ref)). */
template <int SRC>
SQK_DEV void gather(const QuantArgs &a, uint64_t e0, float v[EPT])
{
    if (SRC == SRC_SUM) {
        sum8(a.cin, a.in, nullptr, e0, a.n, v);
        if (any_nonfinite(v, e0, a.n)) set_flag(a.flags, a.nf_flag);
        return;
    }
    load8(a.x, e0, a.n, v);
    bool bad = any_nonfinite(v, e0, a.n);
    if (SRC == SRC_DIFF) {
        float r[EPT];
        load8(a.ref, e0, a.n, r);
        bad |= any_nonfinite(r, e0, a.n);
        if (a.bf16) {
SQK_UNROLL
            for (int j = 0; j < EPT; j++) v[j] = sq_hd_bf16_diff(v[j], r[j]);
        } else {
SQK_UNROLL
            for (int j = 0; j < EPT; j++) v[j] = v[j] - r[j];
        }
    } else if (a.bf16) {
SQK_UNROLL
        for (int j = 0; j < EPT; j++) v[j] = sq_hd_bf16_round(v[j]);
    }
    /* finite input whose difference (or bf16 rounding) overflows */
    if ((SRC == SRC_DIFF || a.bf16) && !bad && any_nonfinite(v, e0, a.n))
        set_flag(a.flags, SQK_FLAG_RANGE);
    if (bad) set_flag(a.flags, a.nf_flag);
}

SQK_DEV uint32_t umax(uint32_t a, uint32_t b) { return a > b ? a : b; }
SQK_DEV uint32_t umin(uint32_t a, uint32_t b) { return a < b ? a : b; }

/* Folds the thread's elements into the shared slots of their groups (slot =
** group - g_first), one atomic per group touched. */
SQK_DEV void fold_into_slots(const QuantArgs &a, const float v[EPT], uint64_t e0,
                             uint64_t g_first, uint32_t *slot_hi, uint32_t *slot_lo)
{
    const KCodec &c = a.c;
    if (e0 >= a.n) return;
    uint64_t gi = group_of(c, e0);
    uint64_t left = (gi + 1) * c.group - e0;
    uint32_t hi = KEY_HI_NONE, lo = KEY_LO_NONE;
SQK_UNROLL
    for (int j = 0; j < EPT; j++) {
        if (e0 + j < a.n) {
            if (left == 0) {
                atomicMax(&slot_hi[gi - g_first], hi);
                if (c.minmax) atomicMin(&slot_lo[gi - g_first], lo);
                gi++;
                left = c.group;
                hi = KEY_HI_NONE;
                lo = KEY_LO_NONE;
            }
            hi = umax(hi, key_hi(c, v[j]));
            if (c.minmax) lo = umin(lo, sq_hd_order_key(v[j]));
            left--;
        }
    }
    atomicMax(&slot_hi[gi - g_first], hi);
    if (c.minmax) atomicMin(&slot_lo[gi - g_first], lo);
}

template <int SRC, int PHASE>
__global__ void __launch_bounds__(BLOCK_MAX) quantize_kernel(const __grid_constant__ QuantArgs a)
{
    SQK_DYN_SMEM(smem);
    const KCodec &c = a.c;
    const unsigned t = threadIdx.x, nt = blockDim.x;
    const uint64_t T = (uint64_t)EPT * nt;
    float *xbuf = reinterpret_cast<float *>(smem);
    uint32_t *slot_hi = smem + (c.h >= XBUF_MIN_H ? EPT * nt : 0);
    uint32_t *slot_lo = slot_hi + a.slots;
    const bool in_slots = PHASE == PH_STATS || (PHASE == PH_FUSED && a.red != RED_SHFL);

    for (uint64_t tile = blockIdx.x; tile < a.ntiles; tile += gridDim.x) {
        const uint64_t t0 = tile * T, e0 = t0 + (uint64_t)EPT * t;
        const uint64_t g_first = group_of(c, t0);
        float v[EPT];
        gather<SRC>(a, e0, v);
        if (c.h && transform(v, c.h, false, e0, a.n, xbuf))
            set_flag(a.flags, SQK_FLAG_TRANSFORM);

        /* 1. The keys of the groups. RED_SHFL and RED_WARP: the thread's
        ** elements lie in one group, whose keys end up in khi, klo. */
        uint32_t khi = KEY_HI_NONE, klo = KEY_LO_NONE;
        if (in_slots) {
            for (unsigned s = t; s < a.slots; s += nt) {
                slot_hi[s] = KEY_HI_NONE;
                if (c.minmax) slot_lo[s] = KEY_LO_NONE;
            }
            __syncthreads();
        }
        if (PHASE == PH_FUSED && a.red != RED_SLOTS) {
SQK_UNROLL
            for (int j = 0; j < EPT; j++) {
                if (e0 + j < a.n) {
                    khi = umax(khi, key_hi(c, v[j]));
                    if (c.minmax) klo = umin(klo, sq_hd_order_key(v[j]));
                }
            }
            const int width = a.red == RED_SHFL ? a.tpg : 32;
            for (int m = 1; m < width; m <<= 1) {
                khi = umax(khi, __shfl_xor_sync(FULL_MASK, khi, m));
                if (c.minmax) klo = umin(klo, __shfl_xor_sync(FULL_MASK, klo, m));
            }
            if (a.red == RED_WARP) {
                if ((t & 31u) == 0 && e0 < a.n) {
                    atomicMax(&slot_hi[group_of(c, e0) - g_first], khi);
                    if (c.minmax) atomicMin(&slot_lo[group_of(c, e0) - g_first], klo);
                }
                __syncthreads();
                if (e0 < a.n) {
                    khi = slot_hi[group_of(c, e0) - g_first];
                    if (c.minmax) klo = slot_lo[group_of(c, e0) - g_first];
                }
            }
        } else if (PHASE != PH_ENCODE) {
            fold_into_slots(a, v, e0, g_first, slot_hi, slot_lo);
            __syncthreads();
            if (PHASE == PH_STATS) {
                for (unsigned s = t; s < a.slots; s += nt) {
                    const uint64_t gi = g_first + s;
                    if (gi < a.ngroups) {
                        atomicMax(&a.gkeys_hi[gi], slot_hi[s]);
                        if (c.minmax) atomicMin(&a.gkeys_lo[gi], slot_lo[s]);
                    }
                }
                __syncthreads();
                continue;
            }
        }

        /* 2. Group parameters, codes, packing. */
        if (e0 < a.n) {
            float u[EPT];
            draw_uniforms(a, c.sr, e0, u);
            uint64_t gi = group_of(c, e0);
            uint64_t left = (gi + 1) * c.group - e0;
            sq_group_params p = {1.0f, 1.0f, 0.0f, 1.0f};
            bool ok = false;
            bool need = true; /* parameters of group gi still to be set up */
            uint64_t acc = 0;
            const uint32_t mask = (1u << c.bits) - 1u;
SQK_UNROLL
            for (int j = 0; j < EPT; j++) {
                uint32_t code = 0;
                if (e0 + j < a.n) {
                    if (left == 0) {
                        gi++;
                        left = c.group;
                        need = true;
                    }
                    if (need) {
                        if (PHASE == PH_ENCODE) {
                            khi = a.gkeys_hi[gi];
                            if (c.minmax) klo = a.gkeys_lo[gi];
                        } else if (a.red == RED_SLOTS) {
                            khi = slot_hi[gi - g_first];
                            if (c.minmax) klo = slot_lo[gi - g_first];
                        }
                        ok = group_setup(c, gi, khi, klo, e0, a.scales, a.offsets, a.flags, &p);
                        need = false;
                    }
                    if (ok) code = encode1(c, v[j], p, u[j]) & mask;
                    left--;
                }
                acc = (acc << c.bits) | code;
            }
            store_code_bytes(a.codes, e0, c.bits, c.nbytes, acc);
        }
        if (in_slots) __syncthreads(); /* the slots are reset for the next tile */
    }
}

/* Sets the per-group keys of the two-pass path to their neutral values. */
__global__ void __launch_bounds__(BLOCK) fill_keys_kernel(uint32_t *hi, uint32_t *lo,
                                                          uint64_t ngroups)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < ngroups;
         i += (uint64_t)gridDim.x * blockDim.x) {
        hi[i] = KEY_HI_NONE;
        if (lo) lo[i] = KEY_LO_NONE;
    }
}

} /* namespace sqk */

/* QSGD and the scaled sign: kernels of their own */
#include "quantize_norm.cuh"

namespace sqk {

/* ------------------------------------------------------------------------ */
/* Host side                                                                */
/* ------------------------------------------------------------------------ */

struct QPlan {
    bool fused;
    unsigned block;
    unsigned slots;
    int red, tpg;
    uint64_t smem;
};

/* The block that quantizes c: the fused kernel when a tile of at most 1024
** threads, a whole number of warps, can hold whole groups, whole Hadamard
** blocks and whole bytes; two passes otherwise. */
static QPlan plan_quantize(const KCodec &c)
{
    QPlan p = {};
    const uint64_t keys = c.minmax ? 2 : 1;
    uint64_t whole = sq_hd_lcm_u64(c.group, EPT, NULL); /* elements a tile must be a multiple of */
    if (c.h) whole = sq_hd_lcm_u64(whole, (uint64_t)c.h, NULL);
    if (whole / EPT <= BLOCK_MAX) {
        const uint64_t b0 = sq_hd_lcm_u64(whole / EPT, 32, NULL);
        if (b0 <= BLOCK_MAX) {
            const uint64_t b = b0 <= BLOCK ? b0 * (BLOCK / b0) : b0;
            const uint64_t tile = EPT * b;
            p.block = (unsigned)b;
            p.red = RED_SLOTS;
            p.slots = (unsigned)(tile / c.group);
            if (c.group % EPT == 0) {
                const uint64_t tpg = c.group / EPT;
                if (tpg <= 32 && (tpg & (tpg - 1)) == 0) {
                    p.red = RED_SHFL;
                    p.tpg = (int)tpg;
                    p.slots = 0;
                } else if (tpg % 32 == 0) {
                    p.red = RED_WARP;
                }
            }
            p.smem = xbuf_bytes(c.h, p.block) + (uint64_t)p.slots * 4 * keys;
            p.fused = p.smem <= SMEM_MAX;
            if (p.fused) return p;
        }
    }
    p = QPlan();
    p.block = BLOCK;
    const uint64_t tile = EPT * BLOCK;
    p.slots = (unsigned)(tile / c.group + 2 < tile ? tile / c.group + 2 : tile);
    p.smem = xbuf_bytes(c.h, BLOCK) + (uint64_t)p.slots * 4 * keys;
    return p;
}

static uint64_t key_scratch(const KCodec &c, uint64_t n)
{
    if (sq_kind_normed(c.kind)) return norm_scratch(c, n);
    if (plan_quantize(c).fused) return 0;
    const uint64_t groups = (n + c.group - 1) / c.group;
    return (groups * 4 * (c.minmax ? 2 : 1) + 255) / 256 * 256;
}

template <int SRC>
static int run_quantize(sqk_env *env, QuantArgs &a, void *scratch)
{
    if (sq_kind_normed(a.c.kind)) return run_quantize_norm<SRC>(env, a, scratch);
    const QPlan p = plan_quantize(a.c);
    const uint64_t tile = (uint64_t)EPT * p.block;
    a.ntiles = (a.n + tile - 1) / tile;
    a.ngroups = (a.n + a.c.group - 1) / a.c.group;
    a.slots = p.slots;
    a.red = p.red;
    a.tpg = p.tpg;
    const unsigned grid = grid_for(env, a.ntiles, p.block);
    if (p.fused) {
        auto kernel = quantize_kernel<SRC, PH_FUSED>;
        SQK_LAUNCH(env, "quantize_kernel (fused)", kernel, grid, p.block, p.smem, a);
        return SQ_OK;
    }
    a.gkeys_hi = static_cast<uint32_t *>(scratch);
    a.gkeys_lo = a.c.minmax ? a.gkeys_hi + a.ngroups : nullptr;
    const unsigned fill_grid = grid_for(env, (a.ngroups + BLOCK - 1) / BLOCK, BLOCK);
    SQK_LAUNCH(env, "fill_keys_kernel", fill_keys_kernel, fill_grid, BLOCK, 0,
               a.gkeys_hi, a.gkeys_lo, a.ngroups);
    auto stats = quantize_kernel<SRC, PH_STATS>;
    SQK_LAUNCH(env, "quantize_kernel (group keys)", stats, grid, p.block, p.smem, a);
    auto encode = quantize_kernel<SRC, PH_ENCODE>;
    SQK_LAUNCH(env, "quantize_kernel (encode)", encode, grid, p.block, xbuf_bytes(a.c.h, p.block),
               a);
    return SQ_OK;
}

static QuantArgs quant_args(sqk_env *env, const sq_codec *c, uint64_t n, const sq_rng_key *key,
                            const sq_qbuf *q)
{
    QuantArgs a = QuantArgs();
    a.c = kcodec(c, n);
    a.n = n;
    if (key) {
        a.key_lo = (uint32_t)key->seed;
        a.key_hi = (uint32_t)(key->seed >> 32);
        a.step = key->step;
        a.ws = (key->worker << 8) | key->site;
    }
    a.codes = q->codes;
    a.scales = q->scales;
    a.offsets = q->offsets;
    a.flags = env->flags;
    a.nf_flag = SQK_FLAG_NONFINITE;
    return a;
}

} /* namespace sqk */

using namespace sqk;

extern "C" uint64_t sqk_quantize_scratch(const sq_codec *c, uint64_t n)
{
    if (sq_kind_cast(c->kind)) return 0;
    if (sq_kind_sparse(c->kind)) return sqk_sparse_quantize_scratch(c, n);
    return key_scratch(kcodec(c, n), n);
}

extern "C" int sqk_quantize(sqk_env *env, const sq_codec *c, const float *x, const float *ref,
                            uint64_t n, const sq_rng_key *key, const sq_qbuf *q, int bf16)
{
    if (sq_kind_cast(c->kind))
        return sqk_cast_quantize(env, c, x, ref, n, q, bf16, SQK_FLAG_NONFINITE);
    if (sq_kind_sparse(c->kind))
        return sqk_sparse_quantize(env, c, x, ref, n, key, q, bf16, SQK_FLAG_NONFINITE);
    if (n == 0) return SQ_OK;
    QuantArgs a = quant_args(env, c, n, key, q);
    a.x = x;
    a.ref = ref;
    a.bf16 = bf16;
    return ref ? run_quantize<SRC_DIFF>(env, a, env->scratch)
               : run_quantize<SRC_X>(env, a, env->scratch);
}

/* More chunks than a kernel argument holds are first summed into an fp32
** scratch buffer (in batches, in order), which is then quantized. */
static uint64_t sum_scratch(int k, uint64_t n)
{
    return k > SQK_MAX_CHUNKS ? (n * 4 + 255) / 256 * 256 : 0;
}

extern "C" uint64_t sqk_sum_requant_scratch(const sq_codec *c_in, int k, uint64_t n,
                                            const sq_codec *c_out)
{
    if (sq_kind_sparse(c_in->kind) || sq_kind_sparse(c_out->kind))
        return sqk_sparse_sum_requant_scratch(c_in, k, n, c_out);
    if (sq_kind_cast(c_in->kind) || sq_kind_cast(c_out->kind))
        return sqk_cast_sum_requant_scratch(c_in, k, n, c_out);
    KCodec co = kcodec(c_out, n);
    co.h = 0;
    return sum_scratch(k, n) + key_scratch(co, n);
}

static int sum_requant(sqk_env *env, const sq_codec *c_in, const sq_qbuf *chunks, int k,
                       uint64_t n, const sq_codec *c_out, const sq_rng_key *key,
                       const sq_qbuf *out, int f16)
{
    if (sq_kind_sparse(c_in->kind) || sq_kind_sparse(c_out->kind))
        return sqk_sparse_sum_requant(env, c_in, chunks, k, n, c_out, key, out);
    if (sq_kind_cast(c_in->kind) || sq_kind_cast(c_out->kind))
        return sqk_cast_sum_requant(env, c_in, chunks, k, n, c_out, key, out);
    if (n == 0) return SQ_OK;
    /* the middle hop stays in the transformed domain */
    KCodec ci = kcodec(c_in, n);
    ci.h = 0;
    ci.f16 = f16;
    QuantArgs a = quant_args(env, c_out, n, key, out);
    a.c.h = 0;
    a.nf_flag = SQK_FLAG_RANGE; /* a sum past fp32 */
    if (k <= SQK_MAX_CHUNKS) {
        a.in = chunk_table(chunks, 0, k);
        a.cin = ci;
        return run_quantize<SRC_SUM>(env, a, env->scratch);
    }
    float *sum = static_cast<float *>(env->scratch);
    int rc = sum_chunks_batched(env, ci, chunks, k, n, sum, false);
    if (rc != SQ_OK) return rc;
    a.x = sum;
    return run_quantize<SRC_X>(env, a, static_cast<char *>(env->scratch) + sum_scratch(k, n));
}

extern "C" int sqk_sum_requant(sqk_env *env, const sq_codec *c_in, const sq_qbuf *chunks, int k,
                               uint64_t n, const sq_codec *c_out, const sq_rng_key *key,
                               const sq_qbuf *out)
{
    return sum_requant(env, c_in, chunks, k, n, c_out, key, out, 0);
}

extern "C" int sqk_sum_requant_f16(sqk_env *env, const sq_codec *c_in, const sq_qbuf *chunks,
                                   int k, uint64_t n, const sq_codec *c_out,
                                   const sq_rng_key *key, const sq_qbuf *out)
{
    return sum_requant(env, c_in, chunks, k, n, c_out, key, out, 1);
}
