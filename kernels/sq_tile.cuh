/*
** sq_tile.cuh -- what one thread and one block of the codec kernels do.
**
** Every codec kernel hands each thread 8 consecutive elements of the flat
** buffer and keeps them in registers from load to store. Eight, because 8
** codes of b bits fill exactly b bytes, so a thread packs and stores whole
** bytes on its own whatever b is, and because the first three Hadamard
** stages (strides 1, 2, 4) then stay inside a thread. A block of B threads
** owns a tile of 8B consecutive elements, thread t the elements 8t..8t+7 of
** it; kernels walk the tiles with a grid stride.
**
** The arithmetic is the C reference's, from the same source (sq_hd.h). What
** this file adds is only who holds which element and how threads exchange
** values. Functions that exchange (shuffles, __syncthreads) must be reached
** by every thread of the block under the same conditions, so threads past
** the end of the buffer run along holding zeros and store nothing.
*/
#ifndef SQ_TILE_CUH
#define SQ_TILE_CUH

#include "shardq/codec.h"
#include "sq_dense.h"
#include "sq_hd.h"
#include "sq_kernels.h"

#ifdef SQK_SIM
#include "cuda_sim.h" /* tests/sim: the CPU emulation of the execution model */
#else
#include <cuda_runtime.h>
#endif

#include <stdint.h>

#define SQK_DEV __device__ __forceinline__

/* Loops over a thread's 8 elements are unrolled, so that its values stay in
** registers (an array indexed at run time would go to local memory). */
#ifdef SQK_SIM
#define SQK_UNROLL _Pragma("GCC unroll 8")
#else
#define SQK_UNROLL _Pragma("unroll")
#endif

/* The block's dynamic shared memory, as 32-bit words. */
#ifdef SQK_SIM
#define SQK_DYN_SMEM(name) uint32_t *name = static_cast<uint32_t *>(sqk_sim_dynamic_smem())
#else
#define SQK_DYN_SMEM(name) extern __shared__ __align__(16) uint32_t name[]
#endif

namespace sqk {

constexpr int EPT = 8;                 /* elements per thread */
constexpr unsigned FULL_MASK = 0xffffffffu;
constexpr int XBUF_MIN_H = 512;        /* Hadamard sizes that pair warps */

/* ------------------------------------------------------------------------ */
/* Codecs and chunk tables as the kernels see them                          */
/* ------------------------------------------------------------------------ */

/* A codec with its level table and group divisor worked out on the host. */
struct KCodec {
    uint64_t group;
    uint64_t nbytes; /* bytes of the packed code stream of the buffer */
    int gshift;     /* log2(group) when group is a power of two, else -1 */
    int bits;
    int kind;       /* the sq_kind */
    int minmax;     /* kind=minmax */
    int sr;         /* round=sr */
    int h;          /* Hadamard size, 0 when off */
    int dtype;      /* scale dtype: 0 fp32, 1 bf16, 2 fp16 */
    int f16;        /* sums of decoded chunks in fp16 (sq_hd_acc_f16) */
    float qm, qlo, qhi; /* fp8: FMAX, -FMAX, FMAX (the absmax maps to FMAX) */
};

/* Up to SQK_MAX_CHUNKS quantized buffers of n elements each. */
struct Chunks {
    const uint8_t *codes[SQK_MAX_CHUNKS];
    const void *scales[SQK_MAX_CHUNKS];
    const void *offsets[SQK_MAX_CHUNKS];
    int k;
};

SQK_DEV uint64_t group_of(const KCodec &c, uint64_t e)
{
    return c.gshift >= 0 ? e >> c.gshift : e / c.group;
}

SQK_DEV void set_flag(uint32_t *flags, uint32_t f) { atomicOr(flags, f); }

/* ------------------------------------------------------------------------ */
/* Loads and stores of a thread's 8 elements                                */
/* ------------------------------------------------------------------------ */

SQK_DEV bool aligned(const void *p, uintptr_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

/* v = p[e0 .. e0+8), zero past n; two 16-byte loads when it can. */
SQK_DEV void load8(const float *p, uint64_t e0, uint64_t n, float v[EPT])
{
    if (e0 + EPT <= n && aligned(p, 16)) {
        const float4 *q = reinterpret_cast<const float4 *>(p + e0);
        float4 a = q[0], b = q[1];
        v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
        v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
        return;
    }
SQK_UNROLL
    for (int j = 0; j < EPT; j++) v[j] = e0 + j < n ? p[e0 + j] : 0.0f;
}

SQK_DEV void store8(float *p, uint64_t e0, uint64_t n, const float v[EPT])
{
    if (e0 + EPT <= n && aligned(p, 16)) {
        /* streaming stores: written once, not read again by this kernel */
        float4 *q = reinterpret_cast<float4 *>(p + e0);
        __stcs(q, make_float4(v[0], v[1], v[2], v[3]));
        __stcs(q + 1, make_float4(v[4], v[5], v[6], v[7]));
        return;
    }
SQK_UNROLL
    for (int j = 0; j < EPT; j++)
        if (e0 + j < n) p[e0 + j] = v[j];
}

/* Whether any of the elements below n is NaN or Inf. */
SQK_DEV bool any_nonfinite(const float v[EPT], uint64_t e0, uint64_t n)
{
    bool bad = false;
SQK_UNROLL
    for (int j = 0; j < EPT; j++) bad |= e0 + j < n && sq_hd_nonfinite(v[j]);
    return bad;
}

/* ------------------------------------------------------------------------ */
/* Packed codes                                                             */
/* ------------------------------------------------------------------------ */

SQK_DEV uint32_t bswap32(uint32_t x)
{
#ifdef SQK_SIM
    return __builtin_bswap32(x);
#else
    return __byte_perm(x, 0u, 0x0123u);
#endif
}

SQK_DEV uint64_t bswap64(uint64_t x)
{
    return ((uint64_t)bswap32((uint32_t)x) << 32) | bswap32((uint32_t)(x >> 32));
}

/* The bits bytes that hold the codes of elements e0..e0+7 (e0 a multiple
** of 8), read as one big-endian number, so that the stream's first bit is
** its top bit. Bytes at or past nbytes, the end of the stream, read as 0. */
SQK_DEV uint64_t load_code_bytes(const uint8_t *codes, uint64_t e0, int bits, uint64_t nbytes)
{
    uint64_t off = e0 / 8 * (uint64_t)bits;
    const uint8_t *p = codes + off;
    if (off + (uint64_t)bits <= nbytes) {
        if (bits == 8 && aligned(p, 8)) return bswap64(*reinterpret_cast<const uint64_t *>(p));
        if (bits == 4 && aligned(p, 4)) return bswap32(*reinterpret_cast<const uint32_t *>(p));
    }
    uint64_t acc = 0;
    for (int j = 0; j < bits; j++) acc = (acc << 8) | (off + j < nbytes ? p[j] : 0u);
    return acc;
}

/* The reverse: writes the bytes of acc below nbytes. */
SQK_DEV void store_code_bytes(uint8_t *codes, uint64_t e0, int bits, uint64_t nbytes,
                              uint64_t acc)
{
    uint64_t off = e0 / 8 * (uint64_t)bits;
    uint8_t *p = codes + off;
    if (off + (uint64_t)bits <= nbytes) {
        if (bits == 8 && aligned(p, 8)) {
            __stcs(reinterpret_cast<unsigned long long *>(p), (unsigned long long)bswap64(acc));
            return;
        }
        if (bits == 4 && aligned(p, 4)) {
            __stcs(reinterpret_cast<unsigned int *>(p), bswap32((uint32_t)acc));
            return;
        }
    }
    for (int j = 0; j < bits; j++)
        if (off + j < nbytes) p[j] = (uint8_t)(acc >> (8 * (bits - 1 - j)));
}

/* The decoded value of one b-bit field f of a group with offset lo (min-max)
** and scale s: the C reference's decoding loops (codec.c, codec_dense.c). */
SQK_DEV float decode1(const KCodec &c, uint32_t f, float lo, float s)
{
    switch (c.kind) {
    case SQ_KIND_MINMAX: return sq_hd_decode((int)f, lo, s);
    case SQ_KIND_SIGN: return sq_hd_decode_sign(f, s);
    case SQ_KIND_FP8E4M3: return sq_hd_fp8_to_f32(f, 0) * s;
    case SQ_KIND_FP8E5M2: return sq_hd_fp8_to_f32(f, 1) * s;
    default: return sq_hd_decode_sym(sq_hd_sign_extend(f, c.bits), s); /* sym, qsgd */
    }
}

/* The code of one value of a group with parameters p, for the kinds whose
** groups are summarised by keys (sym, minmax, fp8); QSGD and the sign
** have kernels of their own (quantize_norm.cuh). */
SQK_DEV uint32_t encode1(const KCodec &c, float x, const sq_group_params &p, float u)
{
    if (sq_kind_fp8(c.kind))
        return sq_hd_f32_to_fp8((x * p.lift) * p.m, c.kind == SQ_KIND_FP8E5M2, c.sr, u);
    return (uint32_t)sq_hd_code(x, &p, c.sr, u, c.qlo, c.qhi);
}

/* v = D(chunk) for the 8 elements from e0, zero past n. */
SQK_DEV void decode8(const KCodec &c, const uint8_t *codes, const void *scales,
                     const void *offsets, uint64_t e0, uint64_t n, float v[EPT])
{
SQK_UNROLL
    for (int j = 0; j < EPT; j++) v[j] = 0.0f;
    if (e0 >= n) return;
    const uint64_t acc = load_code_bytes(codes, e0, c.bits, c.nbytes);
    const uint32_t mask = (1u << c.bits) - 1u;
    uint64_t gi = group_of(c, e0);
    uint64_t left = (gi + 1) * c.group - e0; /* elements of group gi from e0 on */
    float s = sq_hd_load_meta(scales, gi, c.dtype);
    float lo = c.minmax ? sq_hd_load_meta(offsets, gi, c.dtype) : 0.0f;
SQK_UNROLL
    for (int j = 0; j < EPT; j++) {
        if (e0 + j < n) {
            if (left == 0) { /* groups shorter than 8, or not aligned to 8 */
                gi++;
                left = c.group;
                s = sq_hd_load_meta(scales, gi, c.dtype);
                if (c.minmax) lo = sq_hd_load_meta(offsets, gi, c.dtype);
            }
            uint32_t f = (uint32_t)(acc >> (c.bits * (EPT - 1 - j))) & mask;
            v[j] = decode1(c, f, lo, s);
            left--;
        }
    }
}

/* v = acc + D(chunks[0]) + D(chunks[1]) + ..., in fp32 in chunk order; with
** acc NULL, D(chunks[0]) + D(chunks[1]) + ... as the C reference sums.
** c.f16: in fp16 from acc, or from +0 (sq_hd_acc_f16). */
SQK_DEV void sum8(const KCodec &c, const Chunks &in, const float *acc, uint64_t e0, uint64_t n,
                  float v[EPT])
{
    int i = 0;
    if (c.f16) {
        if (acc) {
            load8(acc, e0, n, v);
        } else {
SQK_UNROLL
            for (int j = 0; j < EPT; j++) v[j] = 0.0f;
        }
        for (; i < in.k; i++) {
            float d[EPT];
            decode8(c, in.codes[i], in.scales[i], in.offsets[i], e0, n, d);
SQK_UNROLL
            for (int j = 0; j < EPT; j++) v[j] = sq_hd_acc_f16(v[j], d[j]);
        }
        return;
    }
    if (acc) {
        load8(acc, e0, n, v);
    } else {
        decode8(c, in.codes[0], in.scales[0], in.offsets[0], e0, n, v);
        i = 1;
    }
    for (; i < in.k; i++) {
        float d[EPT];
        decode8(c, in.codes[i], in.scales[i], in.offsets[i], e0, n, d);
SQK_UNROLL
        for (int j = 0; j < EPT; j++) v[j] = v[j] + d[j];
    }
}

/* ------------------------------------------------------------------------ */
/* The Hadamard transform over a tile                                       */
/* ------------------------------------------------------------------------ */

SQK_DEV void butterfly(float &a, float &b)
{
    float s = a + b, d = a - b;
    a = s;
    b = d;
}

/* The unnormalised transform of size h (2..1024) over the tile's aligned
** blocks of h elements. The stages run in the order of the C reference
** (stride 1, 2, ..., h/2) and each is the same pair (a + b, a - b), so the
** bytes agree: strides 1 to 4 inside the thread, 8 to 128 between lanes of
** a warp (shuffles), 256 and 512 between warps through xbuf (8 floats per
** thread, column-major so that a warp's accesses hit 32 banks). The tile
** must hold whole blocks; every thread of the block must call this. */
SQK_DEV void hadamard_tile(float v[EPT], int h, float *xbuf)
{
    if (h >= 2) { butterfly(v[0], v[1]); butterfly(v[2], v[3]); butterfly(v[4], v[5]); butterfly(v[6], v[7]); }
    if (h >= 4) { butterfly(v[0], v[2]); butterfly(v[1], v[3]); butterfly(v[4], v[6]); butterfly(v[5], v[7]); }
    if (h >= 8) { butterfly(v[0], v[4]); butterfly(v[1], v[5]); butterfly(v[2], v[6]); butterfly(v[3], v[7]); }
    const unsigned t = threadIdx.x, nt = blockDim.x;
    for (int m = 1; m < 32 && EPT * m < h; m <<= 1) {
        const bool upper = (t & (unsigned)m) != 0; /* holds b of (a, b) */
SQK_UNROLL
        for (int j = 0; j < EPT; j++) {
            float o = __shfl_xor_sync(FULL_MASK, v[j], m);
            v[j] = upper ? o - v[j] : v[j] + o;
        }
    }
    for (unsigned m = 32; EPT * m < (unsigned)h; m <<= 1) {
SQK_UNROLL
        for (int j = 0; j < EPT; j++) xbuf[j * nt + t] = v[j];
        __syncthreads();
        const bool upper = (t & m) != 0;
SQK_UNROLL
        for (int j = 0; j < EPT; j++) {
            float o = xbuf[j * nt + (t ^ m)];
            v[j] = upper ? o - v[j] : v[j] + o;
        }
        __syncthreads();
    }
}

/* The transform as a codec applies it: a final partial block (one that
** reaches past n) is left as it is, and the inverse scales by 1/h. Returns
** whether a transformed value came out non-finite. */
SQK_DEV bool transform(float v[EPT], int h, bool inverse, uint64_t e0, uint64_t n, float *xbuf)
{
    float orig[EPT];
SQK_UNROLL
    for (int j = 0; j < EPT; j++) orig[j] = v[j];
    hadamard_tile(v, h, xbuf);
    const float inv = 1.0f / (float)h; /* a power of two: exact */
    const uint64_t hm = ~(uint64_t)(h - 1);
    bool bad = false;
SQK_UNROLL
    for (int j = 0; j < EPT; j++) {
        bool whole = ((e0 + j) & hm) + (uint64_t)h <= n;
        if (whole && inverse) v[j] *= inv;
        if (!whole) v[j] = orig[j];
        bad |= whole && sq_hd_nonfinite(v[j]);
    }
    return bad;
}

/* ------------------------------------------------------------------------ */
/* Group statistics                                                         */
/* ------------------------------------------------------------------------ */
/*
** A group is summarised by integer keys, reduced by max (and min): for
** symmetric codecs |x| as bits, whose max is the bits of max |x|; for
** min-max the IEEE totalOrder key of x (sq_hd_order_key), max and min.
** Integer max and min do not depend on the order of reduction, so any
** thread layout, shuffle tree or atomic gives the C reference's result.
*/
constexpr uint32_t KEY_HI_NONE = 0u;          /* neutral for max */
constexpr uint32_t KEY_LO_NONE = 0xffffffffu; /* neutral for min */

SQK_DEV uint32_t key_hi(const KCodec &c, float x)
{
    return c.minmax ? sq_hd_order_key(x) : (sq_bits_f32(x) & 0x7fffffffu);
}

/* Group parameters from its keys; false when the group holds a NaN or Inf
** (already flagged) or its result leaves fp32 (flagged here as a range
** problem). The thread that holds the group's first element stores its
** scale and offset. */
SQK_DEV bool group_setup(const KCodec &c, uint64_t gi, uint32_t khi, uint32_t klo, uint64_t e0,
                         void *scales, void *offsets, uint32_t *flags, sq_group_params *p)
{
    bool ok;
    if (!c.minmax) {
        if (khi >= 0x7f800000u) return false;
        *p = sq_hd_sym_params(sq_f32_bits(khi), c.qm, c.dtype);
        ok = true;
    } else {
        if (khi >= 0xff800000u || klo <= 0x007fffffu) return false; /* +-Inf or NaN */
        ok = sq_hd_minmax_params(sq_hd_order_value(klo), sq_hd_order_value(khi), c.qm, c.dtype,
                                 p) == 0;
    }
    if (!ok || !sq_hd_grid_finite(p, c.qlo, c.qhi)) {
        set_flag(flags, SQK_FLAG_RANGE);
        return false;
    }
    const uint64_t first = gi * c.group;
    if (first >= e0 && first - e0 < (uint64_t)EPT) {
        sq_hd_store_meta(scales, gi, c.dtype, p->s);
        if (c.minmax) sq_hd_store_meta(offsets, gi, c.dtype, p->lo);
    }
    return true;
}

} /* namespace sqk */

#endif
