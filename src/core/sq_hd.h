/*
** sq_hd.h -- the per-element arithmetic shared by the C reference and the CUDA
** kernels.
**
** Everything that decides a bit of output (dtype rounding, the Philox
** uniform, a group's multiplier and scale, a code, a decoded value) is written
** once here as SQ_HD functions. The C files and the .cu files both include
** this header, so the two backends run the same source and differ only in how
** they map loops to threads. Build rules that keep the bytes equal: no FMA
** contraction (-ffp-contract=off for C, -fmad=false for nvcc), no fast-math.
** Only +, -, *, /, sqrt and comparisons appear below: those are correctly
** rounded on both sides (sqrtf is IEEE on the GPU unless -prec-sqrt=false,
** which the build never sets), unlike library functions such as expf.
*/
#ifndef SQ_HD_H
#define SQ_HD_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define SQ_HD __host__ __device__ __forceinline__
#else
#define SQ_HD static inline
#endif

#include <Random123/philox.h>

/* ------------------------------------------------------------------------ */
/* Bit casts                                                                */
/* ------------------------------------------------------------------------ */

SQ_HD uint32_t sq_bits_f32(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
SQ_HD float sq_f32_bits(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

/* NaN or +-Inf: all exponent bits set. An integer test, so loops that OR it
** over many values vectorise. */
SQ_HD int sq_hd_nonfinite(float x) { return (sq_bits_f32(x) & 0x7f800000u) == 0x7f800000u; }

/* A key whose unsigned order is IEEE totalOrder on the float (-0 < +0). The
** min-max codec takes a group's extremes in this order, so that which zero a
** group minimum is does not depend on the order of the scan. */
SQ_HD uint32_t sq_hd_order_key(float x)
{
    uint32_t u = sq_bits_f32(x);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

SQ_HD float sq_hd_order_value(uint32_t k)
{
    return sq_f32_bits((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

/* Tile lengths are multiples of several sizes (a group, 8, a Hadamard
** block): the C reference's tiles, the kernels' blocks and the world's
** padding unit use this. a, b > 0. When the lcm does not fit in 64 bits,
** *overflow is set to 1 (never cleared, so a chain of calls is tested once
** at its end) and the product wraps; overflow may be NULL where the operands
** are known to be small (a codec's group and Hadamard sizes). */
SQ_HD uint64_t sq_hd_lcm_u64(uint64_t a, uint64_t b, int *overflow)
{
    uint64_t x = a, y = b;
    while (y) {
        uint64_t t = x % y;
        x = y;
        y = t;
    }
    uint64_t q = a / x;
    if (overflow && b && q > UINT64_MAX / b) *overflow = 1;
    return q * b;
}

/* ------------------------------------------------------------------------ */
/* bf16 and fp16                                                            */
/* ------------------------------------------------------------------------ */

SQ_HD uint16_t sq_hd_f32_to_bf16(float x)
{
    uint32_t u = sq_bits_f32(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)          /* NaN: keep sign, make quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    /* Round to nearest even on the 16 dropped bits; a carry into the
    ** exponent is the correct rounding, up to Inf. */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

SQ_HD float sq_hd_bf16_to_f32(uint16_t h) { return sq_f32_bits((uint32_t)h << 16); }

SQ_HD uint16_t sq_hd_f32_to_f16(float x)
{
    uint32_t u = sq_bits_f32(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)                          /* NaN: keep top payload, quiet */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u)                         /* >= 65520: rounds to Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) {                       /* normal fp16 (>= 2^-14) */
        uint32_t r = a + 0x0fffu + ((a >> 13) & 1u);
        return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
    }
    if (a < 0x33000000u)                          /* < 2^-25: rounds to zero */
        return sign;
    /* Subnormal fp16: value = mant * 2^-24 with mant = a * 2^24 rounded to
    ** nearest even. shift is how many low bits of the 24-bit significand go. */
    uint32_t e = a >> 23;
    uint32_t sig = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;                    /* 14 .. 24 */
    uint32_t half = 1u << (shift - 1);
    uint32_t rest = sig & ((1u << shift) - 1u);
    uint32_t mant = sig >> shift;
    if (rest > half || (rest == half && (mant & 1u)))
        mant++;
    return (uint16_t)(sign | mant);
}

SQ_HD float sq_hd_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    if (e == 0x1fu)
        return sq_f32_bits(sign | 0x7f800000u | (m << 13));
    if (e != 0)
        return sq_f32_bits(sign | ((e + 112u) << 23) | (m << 13));
    /* zero or subnormal: m * 2^-24 is exact in fp32 */
    float v = (float)m * 5.9604644775390625e-08f;
    return sq_f32_bits(sign | sq_bits_f32(v));
}

/* The bf16 weight reconstruction (scheme knob weight.recon=bf16): the model
** weights w-hat are a bf16 tensor, as in Megatron and DeepSpeed, kept here
** as the fp32 values of bf16 numbers. */

/* x rounded to bf16 (nearest, ties to even) and back: exact in fp32. */
SQ_HD float sq_hd_bf16_round(float x) { return sq_hd_bf16_to_f32(sq_hd_f32_to_bf16(x)); }

/* What the sender quantizes: bf16(bf16(x) - bf16(ref)), the master rounded
** to the bf16 param buffer, minus the model weights. This is what a bf16
** subtraction computes: the fp32 difference of two bf16 numbers rounded to
** bf16 once more equals the exactly rounded bf16 difference (fp32 carries
** more than 2 x 8 + 2 significand bits, so the double rounding is
** innocuous). A finite x past bf16's range becomes Inf: a range problem. */
SQ_HD float sq_hd_bf16_diff(float x, float ref)
{
    return sq_hd_bf16_round(sq_hd_bf16_round(x) - sq_hd_bf16_round(ref));
}

/* What the receiver keeps: w-hat := bf16(bf16(d) + bf16(ref)), the decoded
** difference d cast to bf16 and added to the bf16 weights in bf16 (the same
** double-rounding argument as above). */
SQ_HD float sq_hd_bf16_add(float d, float ref)
{
    return sq_hd_bf16_round(sq_hd_bf16_round(d) + sq_hd_bf16_round(ref));
}
/* x rounded to the nearest fp16 value (ties to even), back in fp32: the
** value of sq_hd_f16_to_f32(sq_hd_f32_to_f16(x)) for every x, NaNs
** included (tests/check_dtype compares the two), computed with selects
** instead of branches so that the loops of fp16 sums vectorise. In fp16's
** normal range the 13 dropped bits round to nearest even in the bit
** pattern; below it, fp16 values are the multiples of 2^-24, and adding
** 1/2, whose ulp is 2^-24, rounds |x| to one (ties to even), the
** subtraction being exact. */
SQ_HD float sq_hd_round_f16(float x)
{
    const uint32_t u = sq_bits_f32(x), a = u & 0x7fffffffu;
    const uint32_t normal = (a + 0x0fffu + ((a >> 13) & 1u)) & 0xffffe000u;
    const uint32_t small = sq_bits_f32((sq_f32_bits(a) + 0.5f) - 0.5f);
    uint32_t r = a >= 0x38800000u ? normal : small;        /* >= 2^-14 */
    r = a >= 0x477ff000u ? 0x7f800000u : r;                /* >= 65520: Inf */
    r = a > 0x7f800000u ? 0x7fc00000u | (a & 0x007fe000u) : r; /* NaN: quiet, top payload */
    return sq_f32_bits((u & 0x80000000u) | r);
}

/* One step of an fp16 sum of decoded values (DeepSpeed's __half2 reduction
** of qgZ): the decoded value d is rounded to fp16 (its __float2half), then
** added to the fp16 partial sum acc and the sum rounded to fp16. acc and d
** rounded are fp16 values; their fp32 sum rounded once more to fp16 is the
** correctly rounded fp16 sum (fp32 has more than 2 * 11 + 2 bits, so the
** double rounding is innocuous). The reduction starts from +0. */
SQ_HD float sq_hd_acc_f16(float acc, float d) { return sq_hd_round_f16(acc + sq_hd_round_f16(d)); }

/* ------------------------------------------------------------------------ */
/* Philox uniforms                                                          */
/* ------------------------------------------------------------------------ */

/* Stochastic rounding's uniforms: one Philox block serves eight elements.
** Element i takes 16 bits of block i/8: the block's four output words read
** as eight 16-bit halves, most significant half first (element 8b + j takes
** word j/2, its high half for even j, its low half for odd j), and
** u = (h + 1/2) * 2^-16 with h that half. Rounding up iff u < r, for a
** fraction r = v - floor(v) in [0, 1), then happens with probability
** ceil(r * 2^16 - 1/2) / 2^16, within 2^-17 of r: the expected code is
** within 2^-17 of a step of v (docs/conventions.md). h + 1/2 needs 17 bits:
** exact in fp32. */
SQ_HD float sq_hd_sr_uniform16(uint32_t half16)
{
    return ((float)half16 + 0.5f) * 1.52587890625e-05f; /* 2^-16, exact */
}

SQ_HD void sq_hd_uniform8(uint32_t key_lo, uint32_t key_hi, uint32_t step, uint32_t ws,
                          uint64_t blk, float u[8])
{
    philox4x32_ctr_t c = {{(uint32_t)blk, (uint32_t)(blk >> 32), step, ws}};
    philox4x32_key_t k = {{key_lo, key_hi}};
    philox4x32_ctr_t r = philox4x32_R(10, c, k);
    for (int j = 0; j < 4; j++) {
        u[2 * j] = sq_hd_sr_uniform16(r.v[j] >> 16);
        u[2 * j + 1] = sq_hd_sr_uniform16(r.v[j] & 0xffffu);
    }
}

/* The 24-bit uniforms of counter block i/4, four per block: element 4b + j
** takes word j, u = (word >> 8) * 2^-24. Not stochastic rounding's (above):
** synthetic data and the GPT's initialisation draw normals from these, where
** a finer grid keeps the Box-Muller tails. */
SQ_HD void sq_hd_uniform4(uint32_t key_lo, uint32_t key_hi, uint32_t step, uint32_t ws,
                          uint64_t blk, float u[4])
{
    philox4x32_ctr_t c = {{(uint32_t)blk, (uint32_t)(blk >> 32), step, ws}};
    philox4x32_key_t k = {{key_lo, key_hi}};
    philox4x32_ctr_t r = philox4x32_R(10, c, k);
    for (int j = 0; j < 4; j++)
        u[j] = (float)(r.v[j] >> 8) * 5.9604644775390625e-08f; /* 2^-24, exact */
}

/* randk's draw (codec_sparse.c): the offset floor(w m / 2^48) of one
** Fisher-Yates step from its two 24-bit uniforms u_hi, u_lo (w = hi 2^24 +
** lo, hi and lo the uniforms times 2^24, exact) and the m positions left,
** m < 2^41, exactly in 64-bit arithmetic: w = a 2^24 + b and m = mh 2^24 +
** ml, so w m / 2^48 = a mh + (a ml + b mh + b ml / 2^24) / 2^24. */
SQ_HD uint64_t sq_hd_randk_offset(float u_hi, float u_lo, uint64_t m)
{
    uint64_t a = (uint64_t)(u_hi * 16777216.0f), b = (uint64_t)(u_lo * 16777216.0f);
    uint64_t mh = m >> 24, ml = m & 0xffffffu;
    return a * mh + ((a * ml + b * mh + ((b * ml) >> 24)) >> 24);
}

/* The sparse kinds' index codes (docs/conventions.md): slot `slot` of a
** code array holds an index j in `width` bytes, least significant first. */
SQ_HD void sq_hd_put_index(uint8_t *codes, uint64_t slot, uint64_t width, uint64_t j)
{
    uint8_t *p = codes + slot * width;
    for (uint64_t b = 0; b < width; b++) p[b] = (uint8_t)(j >> (8 * b));
}

SQ_HD uint64_t sq_hd_get_index(const uint8_t *codes, uint64_t slot, uint64_t width)
{
    const uint8_t *p = codes + slot * width;
    uint64_t j = 0;
    for (uint64_t b = 0; b < width; b++) j |= (uint64_t)p[b] << (8 * b);
    return j;
}

/* ------------------------------------------------------------------------ */
/* Group parameters                                                         */
/* ------------------------------------------------------------------------ */

/* A group whose absmax (or range) is below 2^-64 is quantized after scaling
** both the values and the absmax by 2^64. Scaling by a power of two is exact,
** so the codes equal those of the plain convention wherever its multiplier is
** finite, and the multiplier cannot overflow for denormal groups. */
#define SQ_TINY 5.421010862427522e-20f  /* 2^-64 */
#define SQ_LIFT 1.8446744073709552e+19f /* 2^64 */

/* The codes of a codec: [qlo, qhi], and qm, the numerator of the group
** multiplier (m = qm / absmax for sym, qm / (hi - lo) for minmax). */
typedef struct sq_code_range {
    float qm, qlo, qhi;
} sq_code_range;

SQ_HD sq_code_range sq_hd_code_range(int minmax, int bits, int deepspeed)
{
    sq_code_range l;
    float half = (float)(1 << (bits - 1));
    if (minmax) {         /* L = 2^b - 1, codes 0..L */
        l.qm = 2.0f * half - 1.0f;
        l.qlo = 0.0f;
        l.qhi = l.qm;
    } else if (deepspeed) { /* 2^(b-1), codes -2^(b-1)..2^(b-1) - 1 */
        l.qm = half;
        l.qlo = -half;
        l.qhi = half - 1.0f;
    } else {              /* qmax = 2^(b-1) - 1, codes -qmax..qmax */
        l.qm = half - 1.0f;
        l.qlo = -l.qm;
        l.qhi = l.qm;
    }
    return l;
}

/* What quantizing one group needs: v = (x - lo) * lift * m. */
typedef struct sq_group_params {
    float m;    /* multiplier (already divided by lift) */
    float lift; /* 1 or 2^64 */
    float lo;   /* min-max offset as stored (0 for symmetric) */
    float s;    /* scale as stored, i.e. after rounding to the scale dtype */
} sq_group_params;

/* Scale dtypes: 0 fp32, 1 bf16, 2 fp16 (the values of sq_scale_dtype). */
SQ_HD float sq_hd_round_scale(float s, int dtype)
{
    if (dtype == 1) return sq_hd_bf16_to_f32(sq_hd_f32_to_bf16(s));
    if (dtype == 2) return sq_hd_f16_to_f32(sq_hd_f32_to_f16(s));
    return s;
}

/* Scales and offsets as stored: fp32, or the bf16/fp16 bit patterns of a
** value already rounded to that dtype (sq_hd_round_scale), so that storing
** is exact and loading gives back the value the codes were computed with. */
SQ_HD float sq_hd_load_meta(const void *arr, uint64_t gi, int dtype)
{
    if (dtype == 0) return ((const float *)arr)[gi];
    uint16_t h = ((const uint16_t *)arr)[gi];
    return dtype == 1 ? sq_hd_bf16_to_f32(h) : sq_hd_f16_to_f32(h);
}

SQ_HD void sq_hd_store_meta(void *arr, uint64_t gi, int dtype, float v)
{
    if (dtype == 0)
        ((float *)arr)[gi] = v;
    else
        ((uint16_t *)arr)[gi] = dtype == 1 ? sq_hd_f32_to_bf16(v) : sq_hd_f32_to_f16(v);
}

/* Symmetric group: qm is qmax (sdp4bit levels) or 2^(b-1) (deepspeed).
** a = max |x| must be finite. */
SQ_HD sq_group_params sq_hd_sym_params(float a, float qm, int dtype)
{
    sq_group_params p;
    p.lo = 0.0f;
    if (a == 0.0f) {
        p.m = 1.0f; p.lift = 1.0f; p.s = 1.0f;
        return p;
    }
    p.lift = a < SQ_TINY ? SQ_LIFT : 1.0f;
    p.m = qm / (a * p.lift);
    p.s = sq_hd_round_scale(a / qm, dtype);
    return p;
}

/* Min-max group: lo, hi finite; L = 2^b - 1. The offset is rounded to the
** scale dtype first so that codes are measured from the value that travels.
** Returns 0, or -1 when the range overflows fp32. */
SQ_HD int sq_hd_minmax_params(float lo, float hi, float L, int dtype, sq_group_params *p)
{
    p->lo = sq_hd_round_scale(lo, dtype);
    float r = hi - p->lo;
    if (r - r != 0.0f)                            /* Inf: the range overflows */
        return -1;
    if (r <= 0.0f) {  /* hi = lo (or lo rounded above hi): one level */
        p->m = 1.0f; p->lift = 1.0f; p->s = 1.0f;
        return 0;
    }
    p->lift = r < SQ_TINY ? SQ_LIFT : 1.0f;
    p->m = L / (r * p->lift);
    p->s = sq_hd_round_scale(r / L, dtype);
    return 0;
}

/* Whether every value the group can decode to is finite: a finite group
** near FLT_MAX can have a rounded-up scale with qhi * s (or lo + L * s) past
** fp32, and such a group is refused rather than decoded to an infinity. */
SQ_HD int sq_hd_grid_finite(const sq_group_params *p, float qlo, float qhi)
{
    float a = p->lo + qlo * p->s, b = p->lo + qhi * p->s;
    return a - a == 0.0f && b - b == 0.0f;
}

/* ------------------------------------------------------------------------ */
/* One element                                                              */
/* ------------------------------------------------------------------------ */

/* floorf for |v| < 2^31, from a truncating conversion (which vectorises on
** every SIMD ISA, unlike a call to floorf). */
SQ_HD float sq_hd_floor_small(float v)
{
    float t = (float)(int)v;
    return t - (t > v ? 1.0f : 0.0f);
}

/* The code of one value: v = ((x - lo) * lift) * m, rounded half to even
** (RTN, the result of rintf) or stochastically with the uniform u (SR: up iff
** u < v - floor(v)), clamped to [qlo, qhi]. v is first clamped to
** [qlo - 1, qhi + 1], which cannot change the clamped code and keeps v in the
** range where sq_hd_floor_small is exact. Everything is a select or an add of
** 0 or 1, never a float operation done on one branch only (which the
** compiler may not speculate, since it could trap), so the loops over a group
** vectorise. */
SQ_HD int sq_hd_code(float x, const sq_group_params *p, int sr, float u, float qlo, float qhi)
{
    float v = ((x - p->lo) * p->lift) * p->m;
    float vlo = qlo - 1.0f, vhi = qhi + 1.0f; /* (unconditional: see below) */
    v = v < vlo ? vlo : v;
    v = v > vhi ? vhi : v;
    float q;
    if (sr) {
        float f = sq_hd_floor_small(v);
        q = f + (u < v - f ? 1.0f : 0.0f); /* v - f is exact */
    } else {
        /* rintf: adding and subtracting 1.5 * 2^23 leaves v rounded to an
        ** integer, half to even, for |v| < 2^22 */
        q = (v + 12582912.0f) - 12582912.0f;
    }
    q = q < qlo ? qlo : q;
    q = q > qhi ? qhi : q;
    return (int)q;
}

SQ_HD float sq_hd_decode(int q, float lo, float s)
{
    return lo + (float)q * s;
}

/* For symmetric codes lo is 0 and lo + q*s equals q*s exactly (0 + y = y for
** every y but -0, which becomes +0: a harmless difference we avoid anyway). */
SQ_HD float sq_hd_decode_sym(int q, float s)
{
    return (float)q * s;
}

/* A b-bit two's complement field as a signed integer. */
SQ_HD int sq_hd_sign_extend(uint32_t field, int bits)
{
    return (int)(field ^ (1u << (bits - 1))) - (1 << (bits - 1));
}

/* ------------------------------------------------------------------------ */
/* Compressors: QSGD, scaled sign, FP8 (docs/conventions.md)               */
/* ------------------------------------------------------------------------ */

/* QSGD and the scaled sign need a sum over the group (of x^2, of |x|), and
** a float sum depends on its order. Both sides use this one: element j of
** the group (j = 0, 1, ...) is added to lane partial j % 32, each partial
** starting from +0 and taking its elements in increasing j; then the 32
** partials are folded in halves, s[l] = s[l] + s[l + m] for l < m, with
** m = 16, 8, 4, 2, 1, and s[0] is the sum. A warp does exactly this with
** one lane per partial and xor shuffles; the C reference with an array of
** 32 (which vectorises). */
#define SQ_HD_LANES 32

/* The sums run on y = x * P, P the power of two 2^(127 - e) for e the
** biased exponent of the group's absmax a (e = 1 for a = 0 or a denormal):
** a * P lies in [1, 2) (above 2^-23 for a denormal a), so no square
** overflows and the largest does not underflow. Scaling by a power of two
** is exact wherever the result is normal, so the sums, the norm and the
** scale are those of the plain formulas wherever these stay normal and
** finite. a is finite and >= 0. P = 2^-127 (for a >= 2^127) is a
** denormal: exact all the same. */
SQ_HD float sq_hd_norm_lift(float a)
{
    uint32_t e = sq_bits_f32(a) >> 23;
    e = e < 1u ? 1u : e;
    return e < 254u ? sq_f32_bits((254u - e) << 23) : sq_f32_bits(0x00400000u);
}

/* One element's term of the group sum: y^2 (QSGD's squared L2 norm) or
** |y| (the sign's L1 norm), y = |x| * P. */
SQ_HD float sq_hd_norm_term(float x, float P, int squares)
{
    float y = sq_f32_bits(sq_bits_f32(x) & 0x7fffffffu) * P;
    return squares ? y * y : y;
}

/* QSGD group: ss the group sum of y^2 (> 0 unless every x is 0), P its
** lift, qm = s = 2^(b-1) - 1 levels. The norm is r = sqrt(ss) (IEEE
** sqrt, correctly rounded on both sides like + - * /, so the group's norm
** is a = r / P); the code of x is sign(x) * round(|x| * P * (qm / r)), so
** m = qm / r applies to |x| lifted by P; the scale is (r / qm) / P, which is
** fl(a / qm) wherever a is normal. ss = 0 (an all-zero group): m = 1,
** scale 1, every code 0. */
SQ_HD sq_group_params sq_hd_qsgd_params(float ss, float P, float qm, int dtype)
{
    sq_group_params p;
    p.lo = 0.0f;
    if (ss == 0.0f) {
        p.m = 1.0f; p.lift = 1.0f; p.s = 1.0f;
        return p;
    }
    float r = sqrtf(ss);
    p.lift = P;
    p.m = qm / r;
    p.s = sq_hd_round_scale((r / qm) / P, dtype);
    return p;
}

/* The QSGD code of x: the magnitude v = (|x| * P) * m rounded (RTN, or SR
** with the uniform u: up iff u < v - floor(v), so E[code] = v, unbiased)
** and clamped to qm, with x's sign (so -0 and values that round to 0 give
** code 0). Packed as b-bit two's complement, decoded as code * scale like
** kind=sym. These are sq_hd_code's steps for a v that cannot be negative
** (v is first clamped to qm + 1, which keeps it where sq_hd_floor_small is
** exact and cannot change the clamped code), written out because the
** compiler vectorises them only so. */
SQ_HD int sq_hd_qsgd_code(float x, const sq_group_params *p, int sr, float u, float qm)
{
    float v = (sq_f32_bits(sq_bits_f32(x) & 0x7fffffffu) * p->lift) * p->m;
    float vhi = qm + 1.0f;
    v = v > vhi ? vhi : v;
    float q;
    if (sr) {
        float f = sq_hd_floor_small(v);
        q = f + (u < v - f ? 1.0f : 0.0f);
    } else {
        q = (v + 12582912.0f) - 12582912.0f; /* rintf, as sq_hd_code */
    }
    q = q > qm ? qm : q;
    int c = (int)q;
    return x < 0.0f ? -c : c;
}

/* Scaled sign group: l1 the group sum of |y|, len its elements, P its
** lift. The scale is the mean magnitude ((l1 / len) / P, len in fp32),
** which is 0 for an all-zero group (so it decodes to zeros). */
SQ_HD sq_group_params sq_hd_sign_params(float l1, uint64_t len, float P, int dtype)
{
    sq_group_params p;
    p.lo = 0.0f;
    p.m = 1.0f;
    p.lift = 1.0f;
    p.s = sq_hd_round_scale((l1 / (float)len) / P, dtype);
    return p;
}

/* The 1-bit code of the scaled sign: 1 for x < 0, 0 for x >= 0 (-0
** included); decoded as -scale or +scale. */
SQ_HD int sq_hd_sign_code(float x) { return x < 0.0f ? 1 : 0; }
SQ_HD float sq_hd_decode_sign(uint32_t field, float s) { return field ? -s : s; }

/* FP8 (OCP 8-bit floating point): e4m3 is e4m3fn (bias 7, 3 mantissa bits,
** no infinities, 0x7f and 0xff NaN, largest finite 448); e5m2 is IEEE-like
** (bias 15, 2 mantissa bits, largest finite 57344). A group maps its absmax
** a to the largest finite value: m = FMAX / a, scale = a / FMAX, exactly the
** sym rule (sq_hd_sym_params with qm = FMAX, the 2^64 lift included). */
SQ_HD float sq_hd_fp8_max(int e5m2) { return e5m2 ? 57344.0f : 448.0f; }

/* v rounded to the fp8 grid, saturated to +-FMAX, as its code: the sign bit
** is v's (so -0, and negative values that round to zero, give 0x80). For
** |v| the binade's spacing is q = 2^(E - mb) (E the exponent of |v|, at
** least fp8's smallest normal one, so fp8's denormals share the spacing of
** its first binade; mb the mantissa bits) and t = |v| / q, exact, is below
** 2^(mb+1): RTN rounds t to nearest, ties to even (an even t is an even
** mantissa); SR rounds t up iff u < t - floor(t), which is (|v| - lo) /
** (hi - lo) for the neighbours lo <= |v| <= hi on the grid. The rounded t
** is then the code's low bits directly: code = ((E - Emin) << mb) + t, a
** carry into the exponent field being the next binade. |v| is first
** clamped to FMAX, which is on the grid, so rounding never passes it and
** no NaN (nor, for e5m2, Inf) code is produced. v finite. */
SQ_HD uint32_t sq_hd_f32_to_fp8(float v, int e5m2, int sr, float u)
{
    const uint32_t mb = e5m2 ? 2u : 3u;
    const uint32_t emin = e5m2 ? 113u : 121u;          /* 2^-14, 2^-6 as fp32 exponents */
    const uint32_t fmax = e5m2 ? 0x47600000u : 0x43e00000u; /* 57344, 448 as fp32 bits */
    uint32_t b = sq_bits_f32(v);
    uint32_t sign = (b >> 24) & 0x80u;
    uint32_t a = b & 0x7fffffffu; /* |v| as bits: for v >= 0 their order is v's */
    a = a > fmax ? fmax : a;
    uint32_t e = a >> 23;
    e = e < emin ? emin : e;
    float inv = sq_f32_bits((254u - e + mb) << 23); /* 1 / q, a power of two */
    float t = sq_f32_bits(a) * inv;
    float r;
    if (sr) {
        float f = sq_hd_floor_small(t);
        r = f + (u < t - f ? 1.0f : 0.0f);
    } else {
        r = (t + 12582912.0f) - 12582912.0f; /* rintf, as sq_hd_code */
    }
    return sign | (((e - emin) << mb) + (uint32_t)(int)r);
}

/* The value of an fp8 code (exact in fp32); NaN codes give a quiet NaN, and
** e5m2's infinities +-Inf, which the decoders report as a range problem
** (damaged data: the encoder never writes them). */
SQ_HD float sq_hd_fp8_to_f32(uint32_t code, int e5m2)
{
    const uint32_t mb = e5m2 ? 2u : 3u;
    const uint32_t bias = e5m2 ? 15u : 7u;
    const uint32_t emax = e5m2 ? 31u : 15u; /* the exponent field's top */
    uint32_t sign = (code & 0x80u) << 24;
    uint32_t E = (code >> mb) & emax;
    uint32_t M = code & ((1u << mb) - 1u);
    /* normal: 2^(E - bias) (1 + M / 2^mb); denormal: M 2^(1 - bias - mb) */
    float denorm = (float)M * sq_f32_bits((128u - bias - mb) << 23);
    uint32_t bits = E ? ((E + 127u - bias) << 23) | (M << (23u - mb)) : sq_bits_f32(denorm);
    int nan = e5m2 ? (E == emax && M != 0) : (E == emax && M == 7u);
    int inf = e5m2 && E == emax && M == 0;
    bits = nan ? 0x7fc00000u : (inf ? 0x7f800000u : bits);
    return sq_f32_bits(sign | bits);
}

/* ------------------------------------------------------------------------ */
/* Elementwise operations (backend.h)                                       */
/* ------------------------------------------------------------------------ */

/* What one element of an elementwise operation found. Non-finite input
** outranks a non-finite result: OR the findings over all elements and test
** SQ_HD_EW_INPUT first, and the status does not depend on the order. */
#define SQ_HD_EW_INPUT 1  /* NaN or Inf among the inputs */
#define SQ_HD_EW_OUTPUT 2 /* finite inputs, non-finite result */

/* Selects, not branches, so that the loops over them vectorise. */
SQ_HD int sq_hd_ew_finding(int bad_in, int bad_out)
{
    return bad_in ? SQ_HD_EW_INPUT : (bad_out ? SQ_HD_EW_OUTPUT : 0);
}

/* *out = a + b in fp32 (the one rounding of IEEE addition on both sides).
** Which NaN an add returns is not IEEE's to say: x86 quiets the first NaN
** operand (and gives -NaN for Inf - Inf), a GPU returns 0x7fffffff. So a
** NaN result is chosen here: a quieted, else b quieted (as x86 and
** sq_hd_f32_to_bf16 keep sign and payload), else (Inf - Inf) +qNaN. */
SQ_HD int sq_hd_ew_add(float a, float b, float *out)
{
    uint32_t ua = sq_bits_f32(a), ub = sq_bits_f32(b);
    int nan_a = (ua & 0x7fffffffu) > 0x7f800000u, nan_b = (ub & 0x7fffffffu) > 0x7f800000u;
    float s = a + b;
    uint32_t nan = nan_a ? ua | 0x00400000u : (nan_b ? ub | 0x00400000u : 0x7fc00000u);
    s = (sq_bits_f32(s) & 0x7fffffffu) > 0x7f800000u ? sq_f32_bits(nan) : s;
    *out = s;
    return sq_hd_ew_finding(sq_hd_nonfinite(a) | sq_hd_nonfinite(b), sq_hd_nonfinite(s));
}

/* A finite x past bf16's largest finite value (plus half an ulp) rounds to
** Inf: that is the range finding. */
SQ_HD int sq_hd_ew_to_bf16(float x, uint16_t *out)
{
    uint16_t h = sq_hd_f32_to_bf16(x);
    *out = h;
    return sq_hd_ew_finding(sq_hd_nonfinite(x), (h & 0x7f80u) == 0x7f80u);
}

/* Exact: only a non-finite input is a finding. */
SQ_HD int sq_hd_ew_from_bf16(uint16_t h, float *out)
{
    *out = sq_hd_bf16_to_f32(h);
    return sq_hd_ew_finding((h & 0x7f80u) == 0x7f80u, 0);
}

#endif /* SQ_HD_H */
