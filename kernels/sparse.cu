/*
** sparse.cu -- top-k and random-k sparsification (kind=topk, kind=randk) on
** the GPU: the codec operations of sq_kernels.h for a sparse codec. C
** reference: src/core/codec_sparse.c, through the tiles of src/core/codec.c.
**
** Selection is per group and sequential, one thread a group, so that it is
** the reference's selection step for step (speed is secondary here):
**  - topk finds the k-th largest magnitude t (the bits of |x|, whose
**    unsigned order is the magnitudes' order, +0 and -0 tie) by a binary
**    search over its 31 bits, each step counting the group's magnitudes at
**    least the candidate; then keeps, in index order, every magnitude above
**    t and the first k - #{above t} equal to it: the reference's choice.
**  - randk runs the reference's partial Fisher-Yates shuffle over a
**    permutation in scratch, drawing the same uniforms (sq_hd_uniform4) and
**    offsets (sq_hd_randk_offset), then marks the chosen positions (bit 63
**    of the permutation word) and writes them in ascending order.
** Decoding zeroes the output and scatters each group's values in slot
** order with one thread a group (a damaged buffer's repeated index ends as
** the reference's: the last one wins). Staging (x - ref, bf16 roundings)
** and the adds are elementwise passes with the reference's arithmetic.
** The transform (hadamard=) is not supported here: backend.c refuses it.
*/
#include "sq_launch.cuh"
#include "sq_hd_cast.h"
#include "sq_sparse.h"

namespace sqk {

/* The 31 bits of |v|: unsigned order is the order of the magnitudes. */
SQ_HD uint32_t sp_mag(float v) { return sq_bits_f32(v) & 0x7fffffffu; }

struct SparseArgs {
    const float *val;   /* the staged values */
    uint8_t *codes;
    void *scales;
    uint64_t n, group, keep, width, ngroups;
    int dtype, randk;
    uint32_t key_lo, key_hi, step, ws;
    uint64_t *perm;     /* randk: n words of scratch */
    uint32_t nf_flag;   /* what a non-finite value sets */
    uint32_t *flags;
};

/* One thread a group: select, then write indices and values in slot order. */
__global__ void __launch_bounds__(BLOCK) sparse_encode_kernel(SparseArgs a)
{
    uint32_t found = 0;
    for (uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; g < a.ngroups;
         g += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t g0 = g * a.group;
        const uint64_t gl = a.n - g0 < a.group ? a.n - g0 : a.group;
        const uint64_t k = gl < a.keep ? gl : a.keep;
        const float *x = a.val + g0;
        const uint64_t slot0 = g * a.keep;
        uint32_t most = 0;
        for (uint64_t j = 0; j < gl; j++) most = sp_mag(x[j]) > most ? sp_mag(x[j]) : most;
        if (most >= 0x7f800000u) {
            found |= a.nf_flag;
            continue;
        }
        uint64_t slot = slot0;
        if (a.randk) {
            uint64_t *perm = a.perm + g0;
            for (uint64_t j = 0; j < gl; j++) perm[j] = j;
            for (uint64_t j = 0; j < k; j++) {
                const uint64_t i = 2 * (g0 + j); /* even: its pair shares a block */
                float u[4];
                sq_hd_uniform4(a.key_lo, a.key_hi, a.step, a.ws, i / 4, u);
                uint64_t r = j + sq_hd_randk_offset(u[i % 4], u[i % 4 + 1], gl - j);
                uint64_t v = perm[j];
                perm[j] = perm[r];
                perm[r] = v;
            }
            const uint64_t mark = (uint64_t)1 << 63;
            for (uint64_t j = 0; j < k; j++) perm[perm[j] & ~mark] |= mark;
            for (uint64_t j = 0; j < gl; j++)
                if (perm[j] & mark) {
                    sq_hd_put_index(a.codes, slot, a.width, j);
                    sq_hd_store_meta(a.scales, slot, a.dtype, x[j]);
                    if (sq_hd_nonfinite(sq_hd_load_meta(a.scales, slot, a.dtype)))
                        found |= SQK_FLAG_RANGE;
                    slot++;
                }
            continue;
        }
        /* t = the largest magnitude with at least k magnitudes at or above it */
        uint32_t t = 0;
        if (k < gl) {
            for (int bit = 30; bit >= 0; bit--) {
                const uint32_t cand = t | (1u << bit);
                uint64_t cnt = 0;
                for (uint64_t j = 0; j < gl; j++) cnt += sp_mag(x[j]) >= cand;
                if (cnt >= k) t = cand;
            }
        }
        uint64_t above = 0;
        for (uint64_t j = 0; j < gl; j++) above += sp_mag(x[j]) > t;
        uint64_t ties = k - above;
        for (uint64_t j = 0; j < gl && slot < slot0 + k; j++) {
            const uint32_t m = sp_mag(x[j]);
            if (!(m > t || (m == t && ties > 0))) continue;
            if (m == t) ties--;
            sq_hd_put_index(a.codes, slot, a.width, j);
            sq_hd_store_meta(a.scales, slot, a.dtype, x[j]);
            if (sq_hd_nonfinite(sq_hd_load_meta(a.scales, slot, a.dtype))) found |= SQK_FLAG_RANGE;
            slot++;
        }
    }
    if (found) set_flag(a.flags, found);
}

enum { STAGE_DIFF = 1, STAGE_BF16 = 2 };

/* val = x - ref, bf16(x) or bf16(bf16(x) - bf16(ref)), as codec.c stages:
** a staged value that is not finite is the input's fault when the input
** is not finite, a range problem otherwise. */
__global__ void __launch_bounds__(BLOCK)
    sparse_stage_kernel(const float *x, const float *ref, float *val, uint64_t n, int mode,
                        uint32_t *flags)
{
    uint32_t found = 0;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const float r = mode & STAGE_DIFF ? ref[i] : 0.0f;
        float v;
        if (mode & STAGE_BF16)
            v = mode & STAGE_DIFF ? sq_hd_bf16_diff(x[i], r) : sq_hd_bf16_round(x[i]);
        else
            v = x[i] - r;
        val[i] = v;
        if (sq_hd_nonfinite(v))
            found |= sq_hd_nonfinite(x[i]) || sq_hd_nonfinite(r) ? (uint32_t)SQK_FLAG_NONFINITE
                                                                  : (uint32_t)SQK_FLAG_RANGE;
    }
    if (found) set_flag(flags, found);
}

__global__ void __launch_bounds__(BLOCK) sparse_zero_kernel(float *out, uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        out[i] = 0.0f;
}

/* One thread a group, slots in order, into out (zeroed before); report:
** flag a non-finite value or an index past its group (the plain decode). */
__global__ void __launch_bounds__(BLOCK)
    sparse_scatter_kernel(const uint8_t *codes, const void *scales, uint64_t n, uint64_t group,
                          uint64_t keep, uint64_t width, int dtype, uint64_t ngroups, float *out,
                          int report, uint32_t *flags)
{
    int bad = 0;
    for (uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; g < ngroups;
         g += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t g0 = g * group;
        const uint64_t gl = n - g0 < group ? n - g0 : group;
        const uint64_t k = gl < keep ? gl : keep;
        for (uint64_t t = 0; t < k; t++) {
            const uint64_t j = sq_hd_get_index(codes, g * keep + t, width);
            const float v = sq_hd_load_meta(scales, g * keep + t, dtype);
            if (j >= gl) {
                bad = 1;
                continue;
            }
            out[g0 + j] = v;
            bad |= sq_hd_nonfinite(v);
        }
    }
    if (bad && report) set_flag(flags, SQK_FLAG_RANGE);
}

enum { POST_BF16 = 0, POST_ADD = 1, POST_ADD_BF16 = 2, POST_SUM = 3, POST_CHECK = 4 };

/* The elementwise pass after a decode, out[i] from val[i] (and ref[i]):
** bf16(val), ref + val, bf16(bf16(val) + bf16(ref)), out + val (a sum's
** next chunk) or a check; any result not finite is a range problem. */
__global__ void __launch_bounds__(BLOCK)
    sparse_post_kernel(const float *val, const float *ref, float *out, uint64_t n, int mode,
                       uint32_t *flags)
{
    int bad = 0;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        float v = val[i];
        if (mode == POST_BF16)
            v = sq_hd_bf16_round(v);
        else if (mode == POST_ADD)
            v = ref[i] + v;
        else if (mode == POST_ADD_BF16)
            v = sq_hd_bf16_add(v, ref[i]);
        else if (mode == POST_SUM)
            v = out[i] + v;
        out[i] = v;
        bad |= sq_hd_nonfinite(v);
    }
    if (bad) set_flag(flags, SQK_FLAG_RANGE);
}

inline uint64_t sp_round256(uint64_t b) { return (b + 255) / 256 * 256; }

inline uint64_t sp_groups(const sq_codec *c, uint64_t n) { return (n + c->group - 1) / c->group; }

inline unsigned sp_grid(const sqk_env *env, uint64_t items)
{
    return grid_for(env, (items + BLOCK - 1) / BLOCK, BLOCK);
}

/* Zero out, then scatter q's values into it. */
inline int sp_decode(sqk_env *env, const sq_codec *c, const sq_qbuf *q, uint64_t n, float *out,
                     int report)
{
    const uint64_t ng = sp_groups(c, n);
    SQK_LAUNCH(env, "sparse_zero_kernel", sparse_zero_kernel, sp_grid(env, n), BLOCK, 0, out, n);
    SQK_LAUNCH(env, "sparse_scatter_kernel", sparse_scatter_kernel, sp_grid(env, ng), BLOCK, 0,
               q->codes, q->scales, n, c->group, c->keep, sq_sparse_index_bytes(c->group),
               (int)c->scale, ng, out, report, env->flags);
    return SQ_OK;
}

inline int sp_post(sqk_env *env, const float *val, const float *ref, float *out, uint64_t n,
                   int mode)
{
    SQK_LAUNCH(env, "sparse_post_kernel", sparse_post_kernel, sp_grid(env, n), BLOCK, 0, val, ref,
               out, n, mode, env->flags);
    return SQ_OK;
}

} /* namespace sqk */

using namespace sqk;

extern "C" uint64_t sqk_sparse_quantize_scratch(const sq_codec *c, uint64_t n)
{
    /* the staged values, then randk's permutation */
    return sp_round256(n * 4) + (c->kind == SQ_KIND_RANDK ? sp_round256(n * 8) : 0);
}

/* Selection and encoding of the staged values val (scratch past the values
** holds randk's permutation). */
static int sparse_encode(sqk_env *env, const sq_codec *c, const float *val, uint64_t n,
                         const sq_rng_key *key, const sq_qbuf *q, uint32_t nf_flag, void *perm)
{
    SparseArgs a = {};
    a.val = val;
    a.codes = q->codes;
    a.scales = q->scales;
    a.n = n;
    a.group = c->group;
    a.keep = c->keep;
    a.width = sq_sparse_index_bytes(c->group);
    a.ngroups = sp_groups(c, n);
    a.dtype = (int)c->scale;
    a.randk = c->kind == SQ_KIND_RANDK;
    if (a.randk) {
        a.key_lo = (uint32_t)key->seed;
        a.key_hi = (uint32_t)(key->seed >> 32);
        a.step = key->step;
        a.ws = (key->worker << 8) | (key->site & 0xffu);
    }
    a.perm = static_cast<uint64_t *>(perm);
    a.nf_flag = nf_flag;
    a.flags = env->flags;
    SQK_LAUNCH(env, "sparse_encode_kernel", sparse_encode_kernel, sp_grid(env, a.ngroups), BLOCK,
               0, a);
    return SQ_OK;
}

extern "C" int sqk_sparse_quantize(sqk_env *env, const sq_codec *c, const float *x,
                                   const float *ref, uint64_t n, const sq_rng_key *key,
                                   const sq_qbuf *q, int bf16, uint32_t nf_flag)
{
    if (n == 0) return SQ_OK;
    char *s = static_cast<char *>(env->scratch);
    const float *val = x;
    if (ref || bf16) {
        float *staged = reinterpret_cast<float *>(s);
        const int mode = (ref ? STAGE_DIFF : 0) | (bf16 ? STAGE_BF16 : 0);
        SQK_LAUNCH(env, "sparse_stage_kernel", sparse_stage_kernel, sp_grid(env, n), BLOCK, 0, x,
                   ref, staged, n, mode, env->flags);
        val = staged;
    }
    return sparse_encode(env, c, val, n, key, q, nf_flag, s + sp_round256(n * 4));
}

extern "C" uint64_t sqk_decode_scratch(const sq_codec *c, uint64_t n)
{
    return sq_kind_sparse(c->kind) ? sp_round256(n * 4) : 0;
}

extern "C" int sqk_sparse_dequantize(sqk_env *env, const sq_codec *c, const sq_qbuf *q,
                                     const float *ref, uint64_t n, float *out, int bf16)
{
    if (n == 0) return SQ_OK;
    if (!ref) {
        /* codec.c: the plain decode reports damage; with bf16 the rounding's
        ** check replaces it */
        int rc = sp_decode(env, c, q, n, out, !bf16);
        return rc == SQ_OK && bf16 ? sp_post(env, out, nullptr, out, n, POST_BF16) : rc;
    }
    /* out may be ref: the values go to scratch first */
    float *val = static_cast<float *>(env->scratch);
    int rc = sp_decode(env, c, q, n, val, 0);
    return rc == SQ_OK ? sp_post(env, val, ref, out, n, bf16 ? POST_ADD_BF16 : POST_ADD) : rc;
}

extern "C" int sqk_sparse_sum(sqk_env *env, const sq_codec *c, const sq_qbuf *chunks, int k,
                              uint64_t n, float *out)
{
    if (n == 0) return SQ_OK;
    float *tmp = static_cast<float *>(env->scratch);
    int rc = sp_decode(env, c, &chunks[0], n, out, 0);
    for (int i = 1; i < k && rc == SQ_OK; i++) {
        rc = sp_decode(env, c, &chunks[i], n, tmp, 0);
        if (rc == SQ_OK) rc = sp_post(env, tmp, nullptr, out, n, POST_SUM);
    }
    if (rc == SQ_OK && k == 1) rc = sp_post(env, out, nullptr, out, n, POST_CHECK);
    return rc;
}

extern "C" uint64_t sqk_sparse_sum_requant_scratch(const sq_codec *c_in, int k, uint64_t n,
                                                   const sq_codec *c_out)
{
    sq_codec co = *c_out;
    co.hadamard = 0;
    /* the sum, the sparse sum's chunk, then the quantization's own */
    (void)k;
    uint64_t in = sq_kind_sparse(c_in->kind) ? sp_round256(n * 4) : 0;
    uint64_t q = sq_kind_sparse(co.kind) ? sqk_sparse_quantize_scratch(&co, n)
                 : sq_kind_cast(co.kind) ? 0
                                         : sqk_quantize_scratch(&co, n);
    return sp_round256(n * 4) + in + q;
}

/* A sparse codec on either side: the fp32 sum of the chunks in chunk order
** into scratch, as the C reference's tile sums them, then the output
** codec's quantization of it, whose non-finite input is a sum past fp32: a
** range error. Neither codec carries a transform here. */
extern "C" int sqk_sparse_sum_requant(sqk_env *env, const sq_codec *c_in, const sq_qbuf *chunks,
                                      int k, uint64_t n, const sq_codec *c_out,
                                      const sq_rng_key *key, const sq_qbuf *out)
{
    if (n == 0) return SQ_OK;
    char *s = static_cast<char *>(env->scratch);
    float *sum = reinterpret_cast<float *>(s);
    const uint64_t in_bytes = sq_kind_sparse(c_in->kind) ? sp_round256(n * 4) : 0;
    sqk_env inner = *env;
    inner.scratch = s + sp_round256(n * 4);
    int rc;
    if (sq_kind_sparse(c_in->kind)) {
        rc = sqk_sparse_sum(&inner, c_in, chunks, k, n, sum);
    } else if (sq_kind_cast(c_in->kind)) {
        rc = sqk_cast_sum(&inner, c_in, chunks, k, n, sum);
    } else {
        KCodec ci = kcodec(c_in, n);
        ci.h = 0;
        rc = sum_chunks_batched(&inner, ci, chunks, k, n, sum, false);
    }
    if (rc == SQ_OK) {
        sq_codec co = *c_out;
        co.hadamard = 0;
        inner.scratch = s + sp_round256(n * 4) + in_bytes;
        if (sq_kind_sparse(co.kind))
            rc = sqk_sparse_quantize(&inner, &co, sum, nullptr, n, key, out, 0, SQK_FLAG_RANGE);
        else if (sq_kind_cast(co.kind))
            rc = sqk_cast_quantize(&inner, &co, sum, nullptr, n, out, 0, SQK_FLAG_RANGE);
        else
            rc = sqk_quantize(&inner, &co, sum, nullptr, n, key, out, 0);
    }
    env->failed = inner.failed;
    env->error = inner.error;
    return rc;
}
