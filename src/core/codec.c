/*
** codec.c -- the fused codec operations of the C reference.
**
** Every operation walks the buffer in tiles. A tile holds whole groups, whole
** Hadamard blocks and whole bytes of packed codes (its length is a multiple of
** lcm(group, 8, hadamard)), so tiles are independent: each thread takes whole
** tiles, and what a tile computes depends only on its elements. That is why
** the bytes never depend on the thread count.
**
** Inside a tile the work is done in passes over small buffers that stay in
** cache: gather the values (x, x - ref, or a sum of decoded chunks) into
** `val`, transform them, draw the uniforms, quantize group by group into
** one-byte codes, pack. Decoding runs the same passes backwards. The passes
** go over pieces of the tile (whole groups, blocks and bytes again) small
** enough for L1; a quantizing tile's output waits in the scratch until the
** whole tile has succeeded, and a tile that fails is run again in one piece,
** which is what defines its results (quantize_whole). sq_codec_fast turns
** the pieces and the other fast paths off, for the tests that compare.
*/
#include "shardq/codec.h"
#include "sq_hadamard.h"
#include "sq_hd.h"
#include "sq_check.h"
#include "sq_encode.h"
#include "sq_dense.h"
#include "sq_internal.h"
#include "sq_kinds.h"
#include "sq_sparse.h"

#include <stdlib.h>
#include <string.h>

/* Aim for tiles of about this many elements: big enough to amortise the
** per-tile work, small enough that the tile buffers stay in L2. */
#define TILE_TARGET 16384u

int sq_codec_fast = SQ_FAST_ALL; /* sq_internal.h */

/* The passes of a tile run over pieces of about this many elements (whole
** groups, Hadamard blocks and bytes of codes), so that the values, uniforms
** and codes a pass hands to the next stay in L1. */
#define SUB_TARGET 1024u

/* ------------------------------------------------------------------------ */
/* Tiles                                                                    */
/* ------------------------------------------------------------------------ */

/* Tile length for codecs that share groups/hadamard (c2 may be NULL). */
static uint64_t tile_length(const sq_codec *c, const sq_codec *c2, uint64_t n)
{
    uint64_t l = sq_hd_lcm_u64(c->group, 8, NULL);
    if (c->hadamard) l = sq_hd_lcm_u64(l, (uint64_t)c->hadamard, NULL);
    if (c2) l = sq_hd_lcm_u64(l, c2->group, NULL);
    if (l < TILE_TARGET) l *= (TILE_TARGET + l - 1) / l;
    return l < n ? l : (n ? n : 1);
}

/* The length of the pieces of a tile (its divisor, or the tile itself). */
static uint64_t sub_length(const sq_codec *c, const sq_codec *c2, uint64_t tile)
{
    uint64_t l = sq_hd_lcm_u64(c->group, 8, NULL);
    if (c->hadamard) l = sq_hd_lcm_u64(l, (uint64_t)c->hadamard, NULL);
    if (c2) l = sq_hd_lcm_u64(l, c2->group, NULL);
    if (l < SUB_TARGET) l *= SUB_TARGET / l;
    return l < tile ? l : tile;
}

/* Scratch for one thread: values, uniforms, one-byte codes, and the
** quantized output of one tile (codes, scales, offsets) until it is known
** to be complete. */
typedef struct scratch {
    float *val;
    float *tmp;
    float *u;
    uint16_t *h;
    uint8_t *code, *code2;
    sq_qbuf out;
} scratch;

static int scratch_init(scratch *s, uint64_t t)
{
    s->val = malloc(t * sizeof(float));
    s->tmp = malloc(t * sizeof(float));
    s->u = malloc(t * sizeof(float));
    s->h = malloc(t * sizeof(uint16_t));
    s->code = malloc(t);
    s->code2 = malloc(t);
    s->out.codes = malloc(t);
    s->out.scales = malloc(t * sizeof(float));
    s->out.offsets = malloc(t * sizeof(float));
    int ok = s->val && s->tmp && s->u && s->h && s->code && s->code2;
    ok = ok && s->out.codes && s->out.scales && s->out.offsets;
    return ok ? SQ_OK : SQ_ERR_NOMEM;
}

static void scratch_free(scratch *s)
{
    free(s->val);
    free(s->tmp);
    free(s->u);
    free(s->h);
    free(s->code);
    free(s->code2);
    free(s->out.codes);
    free(s->out.scales);
    free(s->out.offsets);
}

/* ------------------------------------------------------------------------ */
/* Quantizing one tile                                                      */
/* ------------------------------------------------------------------------ */

static sq_code_range codec_levels(const sq_codec *c)
{
    return sq_hd_code_range(c->kind == SQ_KIND_MINMAX, c->bits, c->levels == SQ_LEVELS_DEEPSPEED);
}


/* Group statistics: a symmetric group's scan is sq_group_absmax; a min-max
** group's is the same kind of integer max/min reduction over bit patterns
** (order keys), reporting non-finite input on the way. (Inlined into
** encode_groups, one cloned function, as are the loops below.) */
#define SQ_INLINE static inline __attribute__((always_inline))

SQ_INLINE int minmax_scan(const float *restrict x, uint64_t n, float *lo, float *hi)
{
    uint32_t kmin = 0xffffffffu, kmax = 0, mag = 0;
    for (uint64_t j = 0; j < n; j++) {
        uint32_t k = sq_hd_order_key(x[j]);
        uint32_t b = sq_bits_f32(x[j]) & 0x7fffffffu;
        kmin = k < kmin ? k : kmin;
        kmax = k > kmax ? k : kmax;
        mag = b > mag ? b : mag;
    }
    *lo = sq_hd_order_value(kmin);
    *hi = sq_hd_order_value(kmax);
    return mag >= 0x7f800000u;
}

SQ_INLINE void encode_group(const float *restrict x, uint64_t n, sq_group_params p, int sr,
                            const uint16_t *restrict h, float qlo, float qhi,
                            uint8_t *restrict code)
{
    if (sr)
        for (uint64_t j = 0; j < n; j++)
            code[j] = (uint8_t)sq_hd_code(x[j], &p, 1, sq_hd_sr_uniform16(h[j]), qlo, qhi);
    else
        for (uint64_t j = 0; j < n; j++)
            code[j] = (uint8_t)sq_hd_code(x[j], &p, 0, 0.0f, qlo, qhi);
}

/* The groups of val[0..len) (kinds sym and minmax), the first one group gi0
** of q's arrays: scan, parameters, checks, metadata, one-byte codes. u:
** Philox's 16-bit halves (SR: sq_sr_halves), made uniforms where used.
** Returns SQ_OK or the failure of the first group that fails. Groups go
** in batches: first the statistics and parameters of the batch (short
** chains of scalar work, a division each, that the processor overlaps when
** they are side by side), then their codes; a failure stops
** at the same group, with the same metadata written, as one group at a
** time would (the codes of a failing call are never packed). */
#define GROUP_BATCH 32

SQ_MULTIVERSION
static int encode_groups(const sq_codec *c, const float *restrict val, uint64_t len,
                         const uint16_t *restrict u, uint64_t gi0, sq_qbuf *q,
                         uint8_t *restrict code)
{
    const sq_code_range lv = codec_levels(c);
    const int sr = c->round == SQ_ROUND_SR, dt = (int)c->scale;
    const uint64_t g = c->group;
    sq_group_params p[GROUP_BATCH];
    for (uint64_t b0 = 0; b0 < len; b0 += g * GROUP_BATCH) {
        const uint64_t blen = len - b0 < g * GROUP_BATCH ? len - b0 : g * GROUP_BATCH;
        int ng = 0;
        for (uint64_t g0 = 0; g0 < blen; g0 += g, ng++) {
            const uint64_t gl = blen - g0 < g ? blen - g0 : g, gi = gi0 + (b0 + g0) / g;
            const float *x = val + b0 + g0;
            if (c->kind == SQ_KIND_SYM) {
                float a;
                if (sq_group_absmax(x, gl, &a)) return SQ_ERR_NONFINITE;
                p[ng] = sq_hd_sym_params(a, lv.qm, dt);
            } else {
                float lo, hi;
                if (minmax_scan(x, gl, &lo, &hi)) return SQ_ERR_NONFINITE;
                if (sq_hd_minmax_params(lo, hi, lv.qm, dt, &p[ng]) != 0) return SQ_ERR_RANGE;
                sq_hd_store_meta(q->offsets, gi, dt, p[ng].lo);
            }
            /* a 16-bit scale that overflowed, or a grid that reaches past fp32 */
            if (!sq_hd_grid_finite(&p[ng], lv.qlo, lv.qhi)) return SQ_ERR_RANGE;
            sq_hd_store_meta(q->scales, gi, dt, p[ng].s);
        }
        ng = 0;
        for (uint64_t g0 = 0; g0 < blen; g0 += g, ng++) {
            const uint64_t gl = blen - g0 < g ? blen - g0 : g, o = b0 + g0;
            if (p[ng].lo == 0.0f && p[ng].lift == 1.0f) {
                /* the usual group: the same codes from a copy whose offset
                ** and lift are constants, so that x - 0 and x * 1 (which
                ** change no value) compile to nothing */
                const sq_group_params k = {.m = p[ng].m, .lift = 1.0f, .lo = 0.0f, .s = p[ng].s};
                encode_group(val + o, gl, k, sr, u + o, lv.qlo, lv.qhi, code + o);
            } else {
                encode_group(val + o, gl, p[ng], sr, u + o, lv.qlo, lv.qhi, code + o);
            }
        }
    }
    return SQ_OK;
}

/* Quantizes val[0..len), the elements [start, start + len) of the buffer,
** into q, whose arrays begin at element base (0, or the first element of a
** tile whose output goes to the scratch; the sparse and dense kinds only
** write the buffer itself, base 0). start and base are multiples of the
** group and of 8. */
static int quantize_tile(const sq_codec *c, const float *val, uint64_t start, uint64_t len,
                         const sq_rng_key *key, scratch *s, sq_qbuf *q, uint64_t base)
{
    if (sq_sparse_kind(c->kind)) return sq_sparse_encode_tile(c, val, start, len, key, q);
    const int sr = c->round == SQ_ROUND_SR; /* (key may be NULL for RTN) */
    const uint32_t klo = sr ? (uint32_t)key->seed : 0, khi = sr ? (uint32_t)(key->seed >> 32) : 0;
    const uint32_t ws = sr ? (key->worker << 8) | key->site : 0, step = sr ? key->step : 0;
    if (sq_kind_dense(c->kind)) {
        if (sr) sq_uniforms(klo, khi, step, ws, start / 8, len, s->u);
        return sq_dense_quantize_tile(c, val, start, len, sr ? s->u : NULL, s->code, q);
    }
    if (sr) sq_sr_halves(klo, khi, step, ws, start / 8, len, s->h);
    uint8_t *packed = q->codes + (start - base) / 8 * (uint64_t)c->bits;
    /* 8-bit codes are their own packed form: into the scratch's output
    ** directly (never into the buffer itself, which a failing group must
    ** leave as it was) */
    if (c->bits == 8 && q == &s->out)
        return encode_groups(c, val, len, s->h, (start - base) / c->group, q, packed);
    int rc = encode_groups(c, val, len, s->h, (start - base) / c->group, q, s->code);
    if (rc != SQ_OK) return rc;
    sq_pack(s->code, len, c->bits, packed);
    return SQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Decoding one tile                                                        */
/* ------------------------------------------------------------------------ */

/* One group's decoded values v[j] = lo + code[j] * s (sym: code[j] * s,
** sq_hd_decode_sym) from one-byte codes (8-bit codes in place, or unpacked
** ones, sign-extended for sym): written (add 0; returns whether one is a
** NaN or an Inf) or added to out (add 1: out[j] = out[j] + v[j], what the
** sums do with a decoded chunk). With a second buffer b (its codes cb, its
** lo and s), out[j] = (out[j] + v[j]) + w[j], or v[j] + w[j] when not
** adding: two chunks of a sum in one pass, in the same order. */
SQ_INLINE float decode_one(int sym, const uint8_t *restrict code, uint64_t j, float lo, float sc)
{
    return sym ? sq_hd_decode_sym((int)(int8_t)code[j], sc) : sq_hd_decode((int)code[j], lo, sc);
}

SQ_INLINE uint32_t decode_group(int sym, const uint8_t *restrict code, uint64_t n, float lo,
                                float sc, int add, float *restrict out)
{
    uint32_t bad = 0;
    if (add)
        for (uint64_t j = 0; j < n; j++) out[j] = out[j] + decode_one(sym, code, j, lo, sc);
    else
        for (uint64_t j = 0; j < n; j++) {
            float v = decode_one(sym, code, j, lo, sc);
            out[j] = v;
            bad |= (uint32_t)sq_hd_nonfinite(v);
        }
    return bad;
}

SQ_INLINE void decode_group2(int sym, const uint8_t *restrict code, float lo, float sc,
                             const uint8_t *restrict cb, float lob, float scb, uint64_t n,
                             int add, float *restrict out)
{
    if (add)
        for (uint64_t j = 0; j < n; j++)
            out[j] = (out[j] + decode_one(sym, code, j, lo, sc)) + decode_one(sym, cb, j, lob, scb);
    else
        for (uint64_t j = 0; j < n; j++)
            out[j] = decode_one(sym, code, j, lo, sc) + decode_one(sym, cb, j, lob, scb);
}

/* The groups of the elements [start, start + len) (kinds sym and minmax)
** into out, written or added (decode_group), the codes one a byte; with qb
** (not NULL, its codes cb) two buffers at once (decode_group2). */
SQ_MULTIVERSION
static int decode_groups(const sq_codec *c, const sq_qbuf *q, const sq_qbuf *qb, uint64_t start,
                         uint64_t len, const uint8_t *restrict codes, const uint8_t *restrict cb,
                         int add, float *restrict out)
{
    const int sym = c->kind == SQ_KIND_SYM, dt = (int)c->scale;
    uint32_t bad = 0;
    uint64_t gi = start / c->group;
    for (uint64_t g0 = 0; g0 < len; g0 += c->group, gi++) {
        uint64_t gl = len - g0 < c->group ? len - g0 : c->group;
        float sc = sq_hd_load_meta(q->scales, gi, dt);
        float lo = sym ? 0.0f : sq_hd_load_meta(q->offsets, gi, dt);
        /* (the loops specialised on the arguments that select them) */
        if (qb) {
            float scb = sq_hd_load_meta(qb->scales, gi, dt);
            float lob = sym ? 0.0f : sq_hd_load_meta(qb->offsets, gi, dt);
            if (sym)
                decode_group2(1, codes + g0, lo, sc, cb + g0, lob, scb, gl, add, out + g0);
            else
                decode_group2(0, codes + g0, lo, sc, cb + g0, lob, scb, gl, add, out + g0);
        } else {
            bad |= sym ? decode_group(1, codes + g0, gl, lo, sc, add, out + g0)
                       : decode_group(0, codes + g0, gl, lo, sc, add, out + g0);
        }
    }
    return bad != 0;
}

/* Asks for the lines of the bytes that follow p[0..bytes) four times as
** far on, ahead of their use. The sums read several quantized buffers a
** piece at a time each, short runs that the processor's own prefetcher
** follows late; a prefetch never faults, so running past the buffer's end
** is harmless. */
static void prefetch_ahead(const uint8_t *p, uint64_t bytes)
{
#if defined(__GNUC__)
    const uintptr_t a = (uintptr_t)p + 4 * bytes;
    for (uint64_t o = 0; o < bytes; o += 64) __builtin_prefetch((const void *)(a + o), 0, 1);
#else
    (void)p, (void)bytes;
#endif
}

/* The codes of the elements [start, start + len) of q one a byte: the
** 8-bit stream itself, or unpacked into buf. */
static const uint8_t *codes_of(const sq_codec *c, const sq_qbuf *q, uint64_t start, uint64_t len,
                               int add, uint8_t *buf)
{
    const uint8_t *in = q->codes + start / 8 * (uint64_t)c->bits;
    if (add) prefetch_ahead(in, len * (uint64_t)c->bits / 8);
    if (c->bits == 8 && (sq_codec_fast & SQ_FAST_DECODE)) return in;
    /* start is byte aligned, so the whole tile unpacks in one go */
    if (c->kind == SQ_KIND_SYM)
        sq_unpack_signed(in, len, c->bits, (int8_t *)buf);
    else
        sq_unpack_unsigned(in, len, c->bits, buf);
    return buf;
}

/* out[0..len) = D(q) over the elements [start, start + len), in the
** quantized domain (no inverse Hadamard), or (add) out[j] + D(q)[j]; with
** qb, D(qb) added after (add 1: (out + D(q)) + D(qb), add 0: D(q) + D(qb)).
** Returns whether any decoded value written is not finite (0 when adding
** or with qb). */
static int decode_into(const sq_codec *c, const sq_qbuf *q, const sq_qbuf *qb, uint64_t start,
                       uint64_t len, scratch *s, int add, float *out)
{
    const uint8_t *codes = codes_of(c, q, start, len, add || qb, s->code);
    const uint8_t *cb = qb ? codes_of(c, qb, start, len, 1, s->code2) : NULL;
    return decode_groups(c, q, qb, start, len, codes, cb, add, out);
}

static int decode_tile(const sq_codec *c, const sq_qbuf *q, uint64_t start, uint64_t len,
                       scratch *s, float *out)
{
    if (sq_sparse_kind(c->kind)) return sq_sparse_decode_tile(c, q, start, len, out);
    if (sq_kind_dense(c->kind)) return sq_dense_decode_tile(c, q, start, len, s->code, out);
    return decode_into(c, q, NULL, start, len, s, 0, out);
}

/* out[0..len) = sum of the k decoded chunks, in chunk order; f16: in fp16
** from +0 (sq_hd_acc_f16). */
static void sum_tile(const sq_codec *c, const sq_qbuf *chunks, int k, int f16, uint64_t start,
                     uint64_t len, scratch *s, float *out)
{
    if (f16) {
        for (uint64_t j = 0; j < len; j++) out[j] = 0.0f;
        for (int i = 0; i < k; i++) {
            (void)decode_tile(c, &chunks[i], start, len, s, s->tmp);
            for (uint64_t j = 0; j < len; j++) out[j] = sq_hd_acc_f16(out[j], s->tmp[j]);
        }
        return;
    }
    if (!sq_sparse_kind(c->kind) && !sq_kind_dense(c->kind) && (sq_codec_fast & SQ_FAST_DECODE)) {
        /* the same sums in the same order, two chunks a pass, each decoded
        ** value added as it is made */
        int i = 0;
        for (; i + 1 < k; i += 2)
            (void)decode_into(c, &chunks[i], &chunks[i + 1], start, len, s, i > 0, out);
        if (i < k) (void)decode_into(c, &chunks[i], NULL, start, len, s, i > 0, out);
        return;
    }
    (void)decode_tile(c, &chunks[0], start, len, s, out);
    for (int i = 1; i < k; i++) {
        (void)decode_tile(c, &chunks[i], start, len, s, s->tmp);
        for (uint64_t j = 0; j < len; j++) out[j] = out[j] + s->tmp[j];
    }
}

/* ------------------------------------------------------------------------ */
/* The operations                                                           */
/* ------------------------------------------------------------------------ */

enum op {
    OP_QUANTIZE,
    OP_QUANTIZE_DIFF,
    OP_DEQUANTIZE,
    OP_DEQUANTIZE_ADD,
    OP_SUM_REQUANT,
    OP_SUM
};

typedef struct job {
    enum op op;
    const sq_codec *c;      /* the codec of the input (or of the only buffer) */
    const sq_codec *c_out;  /* OP_SUM_REQUANT: the codec of the output */
    const float *x, *ref;   /* float inputs */
    const sq_qbuf *in;      /* quantized inputs (k of them for the sums) */
    int k;
    int f16;                /* the sums: fp16 arithmetic */
    const sq_rng_key *key;
    sq_qbuf *qout;          /* quantized output */
    float *out;             /* float output */
    int bf16;               /* the bf16 weight reconstruction (sq_hd_bf16_*) */
} job;

/* Whether any of x[0..len) is a NaN or an Inf. */
SQ_MULTIVERSION
static int any_nonfinite(const float *restrict x, uint64_t len)
{
    uint32_t bad = 0;
    for (uint64_t j = 0; j < len; j++)
        bad |= sq_hd_nonfinite(x[j]);
    return bad != 0;
}

/* val = x (ref NULL) or x - ref, in fp32; returns whether any staged value is
** a NaN or an Inf (a difference that overflows counts as non-finite). (One
** loop for each case: a loop that tests ref per element becomes, with
** AVX-512, masked loads from ref even when it is NULL, which the processor
** serves very slowly.) */
SQ_MULTIVERSION
static int stage_values(const float *restrict x, const float *restrict ref, uint64_t len,
                        float *restrict val)
{
    uint32_t bad = 0;
    if (ref)
        for (uint64_t j = 0; j < len; j++) {
            float v = x[j] - ref[j];
            val[j] = v;
            bad |= sq_hd_nonfinite(v);
        }
    else
        for (uint64_t j = 0; j < len; j++) {
            float v = x[j];
            val[j] = v;
            bad |= sq_hd_nonfinite(v);
        }
    return bad != 0;
}

/* val = bf16(x) (ref NULL) or bf16(bf16(x) - bf16(ref)); as stage_values. */
SQ_MULTIVERSION
static int stage_values_bf16(const float *restrict x, const float *restrict ref, uint64_t len,
                             float *restrict val)
{
    uint32_t bad = 0;
    if (ref)
        for (uint64_t j = 0; j < len; j++) {
            float v = sq_hd_bf16_diff(x[j], ref[j]);
            val[j] = v;
            bad |= sq_hd_nonfinite(v);
        }
    else
        for (uint64_t j = 0; j < len; j++) {
            float v = sq_hd_bf16_round(x[j]);
            val[j] = v;
            bad |= sq_hd_nonfinite(v);
        }
    return bad != 0;
}

/* The Hadamard passes of the codec (sq_hadamard_run, vectorised): in and out
** may be the same; returns whether any value written is not finite. */
SQ_MULTIVERSION
static int hadamard_pass_any(const float *in, float *out, uint64_t len, int h, int inverse)
{
    return sq_hadamard_run(in, out, len, h, inverse);
}

#ifdef SQ_HAVE_AVX512_PATHS
/* The transforms of 32 points and more with AVX-512 (sq_hadamard32_v16,
** sq_hadamard_big_v16); check 0 skips the finiteness test and returns 0
** (for callers whose next pass tests). */
SQ_AVX512
static int hadamard_pass_avx512(const float *in, float *out, uint64_t len, int h, int inverse,
                                int check)
{
    const uint64_t whole = len / (uint64_t)h * (uint64_t)h;
    sq_v16u bad = {0};
    /* (each loop specialised on the flags) */
    if (h == 32) {
#define H32_LOOP(inv, chk)                                                                 \
    for (uint64_t j = 0; j < whole; j += 32) sq_hadamard32_v16(in + j, out + j, inv, chk, &bad)
        if (check) {
            if (inverse)
                H32_LOOP(1, 1);
            else
                H32_LOOP(0, 1);
        } else {
            if (inverse)
                H32_LOOP(1, 0);
            else
                H32_LOOP(0, 0);
        }
#undef H32_LOOP
    } else {
        for (uint64_t j = 0; j < whole; j += (uint64_t)h) {
            if (check)
                sq_hadamard_big_v16(in + j, out + j, h, inverse, 1, &bad);
            else
                sq_hadamard_big_v16(in + j, out + j, h, inverse, 0, &bad);
        }
    }
    uint32_t b = 0;
    for (int l = 0; l < 16; l++) b |= bad[l] >> 31;
    for (uint64_t j = whole; j < len; j++) { /* a final partial block is copied */
        b |= sq_hd_nonfinite(in[j]);
        out[j] = in[j];
    }
    return check && b != 0;
}
#endif

static int hadamard_pass_checked(const float *in, float *out, uint64_t len, int h, int inverse,
                                 int check)
{
#ifdef SQ_HAVE_AVX512_PATHS
    if (h >= 32 && sq_cpu_avx512()) return hadamard_pass_avx512(in, out, len, h, inverse, check);
#endif
    return hadamard_pass_any(in, out, len, h, inverse) && check;
}

static int hadamard_pass(const float *in, float *out, uint64_t len, int h, int inverse)
{
    return hadamard_pass_checked(in, out, len, h, inverse, 1);
}

/* out[j] = bf16(out[j]) (finite values only: a NaN stays a NaN), returning
** whether any is not finite. */
SQ_MULTIVERSION
static int round_bf16_pass(float *restrict out, uint64_t len)
{
    uint32_t bad = 0;
    for (uint64_t j = 0; j < len; j++) {
        float v = sq_hd_bf16_round(out[j]);
        out[j] = v;
        bad |= sq_hd_nonfinite(v);
    }
    return bad != 0;
}

/* out[j] = ref[j] + val[j] (fp32) or bf16(bf16(val) + bf16(ref)); returns
** whether any result is not finite. */
SQ_MULTIVERSION
static int add_pass(const float *restrict val, const float *restrict ref, uint64_t len, int bf16,
                    float *restrict out)
{
    uint32_t bad = 0;
    if (bf16)
        for (uint64_t j = 0; j < len; j++) {
            float v = sq_hd_bf16_add(val[j], ref[j]);
            out[j] = v;
            bad |= sq_hd_nonfinite(v);
        }
    else
        for (uint64_t j = 0; j < len; j++) {
            float v = ref[j] + val[j];
            out[j] = v;
            bad |= sq_hd_nonfinite(v);
        }
    return bad != 0;
}

/* The quantizing operations over one tile in one go: stage the whole tile
** into val, transform it, quantize it. This is the definition of their
** results, failures included. */
static int quantize_whole(const job *jb, uint64_t start, uint64_t len, scratch *s)
{
    const sq_codec *c = jb->c;
    if (jb->op == OP_QUANTIZE && !c->hadamard && !jb->bf16) /* nothing to stage */
        return quantize_tile(c, jb->x + start, start, len, jb->key, s, jb->qout, 0);
    if (jb->op == OP_QUANTIZE && !jb->bf16) {
        /* staging is the transform: one pass from x into val */
        if (hadamard_pass(jb->x + start, s->val, len, c->hadamard, 0))
            return any_nonfinite(jb->x + start, len) ? SQ_ERR_NONFINITE : SQ_ERR_RANGE;
        int rc = quantize_tile(c, s->val, start, len, jb->key, s, jb->qout, 0);
        return rc == SQ_ERR_NONFINITE ? SQ_ERR_RANGE : rc;
    }
    const float *ref = jb->op == OP_QUANTIZE_DIFF ? jb->ref + start : NULL;
    if (jb->bf16 ? stage_values_bf16(jb->x + start, ref, len, s->val)
                 : stage_values(jb->x + start, ref, len, s->val)) {
        /* finite input whose difference (or bf16 rounding) overflows:
        ** a range problem */
        if (!any_nonfinite(jb->x + start, len) && !(ref && any_nonfinite(ref, len)))
            return SQ_ERR_RANGE;
        return SQ_ERR_NONFINITE;
    }
    if (!c->hadamard) return quantize_tile(c, s->val, start, len, jb->key, s, jb->qout, 0);
    /* finite input that the transform takes beyond fp32 is a range
    ** problem, not the caller's bad data */
    if (hadamard_pass(s->val, s->val, len, c->hadamard, 0)) return SQ_ERR_RANGE;
    int rc = quantize_tile(c, s->val, start, len, jb->key, s, jb->qout, 0);
    return rc == SQ_ERR_NONFINITE ? SQ_ERR_RANGE : rc;
}

/* Where the output of the elements [start, start + len) of a codec lies in
** its arrays, and how long it is (start a multiple of the group and of 8). */
static void copy_tile_output(const sq_codec *c, const sq_qbuf *from, uint64_t start,
                             uint64_t len, sq_qbuf *to)
{
    const uint64_t bits = (uint64_t)c->bits, g = c->group;
    const uint64_t meta = c->scale == SQ_SCALE_FP32 ? 4 : 2;
    const uint64_t groups = (len + g - 1) / g;
    memcpy(to->codes + start / 8 * bits, from->codes, (len * bits + 7) / 8);
    memcpy((uint8_t *)to->scales + start / g * meta, from->scales, groups * meta);
    if (c->kind == SQ_KIND_MINMAX)
        memcpy((uint8_t *)to->offsets + start / g * meta, from->offsets, groups * meta);
}

/* The same operations piece by piece (sub_length), each piece staged,
** transformed and quantized while it is in L1, the output kept in the
** scratch until the whole tile has succeeded. Any failure returns at once
** and the caller runs quantize_whole, whose output and status are the
** results; so this is only the fast way to reach the same bytes. A piece's
** bytes depend only on its elements (the tile's argument), so the pieces
** give the bytes of the whole. For the kinds sym and minmax. */
static int quantize_pieces(const job *jb, uint64_t start, uint64_t len, uint64_t sub,
                           scratch *s)
{
    const sq_codec *c = jb->op == OP_SUM_REQUANT ? jb->c_out : jb->c;
    const int stage = jb->op == OP_QUANTIZE_DIFF || jb->bf16;
    for (uint64_t o = 0; o < len; o += sub) {
        const uint64_t l = len - o < sub ? len - o : sub;
        const float *x = jb->x + start + o, *val = x;
        if (jb->op == OP_SUM_REQUANT) {
            sum_tile(jb->c, jb->in, jb->k, jb->f16, start + o, l, s, s->val);
            val = s->val;
        } else if (stage) {
            const float *ref = jb->op == OP_QUANTIZE_DIFF ? jb->ref + start + o : NULL;
            if (jb->bf16 ? stage_values_bf16(x, ref, l, s->val) : stage_values(x, ref, l, s->val))
                return SQ_ERR_RANGE;
            if (c->hadamard && hadamard_pass(s->val, s->val, l, c->hadamard, 0))
                return SQ_ERR_RANGE;
            val = s->val;
        } else if (c->hadamard) {
            (void)hadamard_pass_checked(x, s->val, l, c->hadamard, 0, 0); /* the scan tests */
            val = s->val;
        }
        int rc = quantize_tile(c, val, start + o, l, jb->key, s, &s->out, start);
        if (rc != SQ_OK) return rc;
    }
    copy_tile_output(c, &s->out, start, len, jb->qout);
    return SQ_OK;
}

/* Whether quantize_pieces takes the quantizing operations of a job (the
** codecs it decodes and quantizes are sym or minmax). */
static int quantize_in_pieces(const job *jb)
{
    const sq_codec *cq = jb->op == OP_SUM_REQUANT ? jb->c_out : jb->c;
    return !sq_sparse_kind(jb->c->kind) && !sq_sparse_kind(cq->kind) &&
           !sq_kind_dense(cq->kind);
}

static int run_tile(const job *jb, uint64_t start, uint64_t len, scratch *s)
{
    const sq_codec *c = jb->c;
    const int split = !sq_sparse_kind(c->kind) && (sq_codec_fast & SQ_FAST_PIECES);
    const uint64_t sub = split ? sub_length(c, jb->c_out, len) : len;
    switch (jb->op) {
    case OP_QUANTIZE:
    case OP_QUANTIZE_DIFF:
        if (sub < len && quantize_in_pieces(jb) && quantize_pieces(jb, start, len, sub, s) == SQ_OK)
            return SQ_OK;
        return quantize_whole(jb, start, len, s);
    /* The decoding operations write every value, then report any that is
    ** not finite: metadata from a damaged file, or a sum past fp32. */
    case OP_DEQUANTIZE: {
        /* the check of each value rides on the last pass that writes it */
        int bad = 0;
        for (uint64_t o = 0; o < len; o += sub) {
            const uint64_t l = len - o < sub ? len - o : sub;
            float *out = jb->out + start + o;
            int b = decode_tile(c, jb->in, start + o, l, s, out);
            if (c->hadamard) b = hadamard_pass(out, out, l, c->hadamard, 1);
            if (jb->bf16) b = round_bf16_pass(out, l);
            bad |= b;
        }
        return bad ? SQ_ERR_RANGE : SQ_OK;
    }
    case OP_DEQUANTIZE_ADD: {
        int bad = 0;
        for (uint64_t o = 0; o < len; o += sub) {
            const uint64_t l = len - o < sub ? len - o : sub;
            (void)decode_tile(c, jb->in, start + o, l, s, s->val);
            if (c->hadamard) (void)hadamard_pass(s->val, s->val, l, c->hadamard, 1);
            bad |= add_pass(s->val, jb->ref + start + o, l, jb->bf16, jb->out + start + o);
        }
        return bad ? SQ_ERR_RANGE : SQ_OK;
    }
    case OP_SUM_REQUANT: {
        if (sub < len && quantize_in_pieces(jb) && quantize_pieces(jb, start, len, sub, s) == SQ_OK)
            return SQ_OK;
        sum_tile(c, jb->in, jb->k, jb->f16, start, len, s, s->val);
        int rc = quantize_tile(jb->c_out, s->val, start, len, jb->key, s, jb->qout, 0);
        return rc == SQ_ERR_NONFINITE ? SQ_ERR_RANGE : rc;
    }
    case OP_SUM: {
        int bad = 0;
        for (uint64_t o = 0; o < len; o += sub) {
            const uint64_t l = len - o < sub ? len - o : sub;
            float *out = jb->out + start + o;
            sum_tile(c, jb->in, jb->k, jb->f16, start + o, l, s, out);
            bad |= c->hadamard ? hadamard_pass(out, out, l, c->hadamard, 1) : any_nonfinite(out, l);
        }
        return bad ? SQ_ERR_RANGE : SQ_OK;
    }
    }
    return SQ_ERR_ARG;
}

/* Runs a job over all tiles, in parallel. Each tile's result depends only on
** its own elements; the status is the minimum (most severe) over all tiles,
** which is also independent of the thread count. */
static int run_job(const job *jb, uint64_t n)
{
    if (n == 0) return SQ_OK;
    uint64_t t = tile_length(jb->c, jb->c_out, n);
    uint64_t ntiles = (n + t - 1) / t;
    int rc = SQ_OK;
    int nth = sq_get_threads();
    if ((uint64_t)nth > ntiles) nth = (int)ntiles;
#pragma omp parallel num_threads(nth) reduction(min : rc)
    {
        scratch s;
        int mine = scratch_init(&s, t);
        if (mine == SQ_OK) {
#pragma omp for schedule(static)
            for (uint64_t i = 0; i < ntiles; i++) {
                uint64_t start = i * t;
                uint64_t len = n - start < t ? n - start : t;
                int r = run_tile(jb, start, len, &s);
                if (r < mine) mine = r;
            }
        }
        scratch_free(&s);
        rc = mine;
    }
    return rc;
}

/* The sparse kinds and the casts run on a copy with the fields they ignore
** at fixed values (a cast's group is 1, randk's round sr so that the key
** checks ask for a key); every other codec is used as it is. */
static const sq_codec *settled(const sq_codec *c, sq_codec *copy)
{
    if (!c || !sq_sparse_kind(c->kind)) return c;
    *copy = sq_sparse_canonical(c);
    return copy;
}

/* quantize (diff 0) and quantize_diff (diff 1), fp32 or bf16 staging */
int sq_encode_job(const sq_codec *c, const float *x, const float *ref, int diff,
                        uint64_t n, const sq_rng_key *key, sq_qbuf *q, int bf16)
{
    sq_codec cc;
    c = settled(c, &cc);
    int rc;
    if ((rc = sq_check_codec(c, n)) || (rc = sq_check_qbuf(c, q, n)) ||
        (rc = sq_check_key(c, key)))
        return rc;
    if (n && (!x || (diff && !ref))) return SQ_ERR_ARG;
    const sq_kind_ops *ops = sq_kind_ops_of(c->kind);
    if (ops) return ops->quantize(c, x, ref, diff, n, key, q, bf16);
    job jb = {.op = diff ? OP_QUANTIZE_DIFF : OP_QUANTIZE, .c = c, .x = x, .ref = ref,
              .key = key, .qout = q, .bf16 = bf16};
    return run_job(&jb, n);
}

/* dequantize (add 0) and dequantize_add (add 1), fp32 or bf16 output */
int sq_decode_job(const sq_codec *c, const sq_qbuf *q, const float *ref, int add,
                          uint64_t n, float *out, int bf16)
{
    sq_codec cc;
    c = settled(c, &cc);
    int rc;
    if ((rc = sq_check_codec(c, n)) || (rc = sq_check_qbuf(c, q, n))) return rc;
    if (n && (!out || (add && !ref))) return SQ_ERR_ARG;
    const sq_kind_ops *ops = sq_kind_ops_of(c->kind);
    if (ops) return ops->dequantize(c, q, ref, add, n, out, bf16);
    job jb = {.op = add ? OP_DEQUANTIZE_ADD : OP_DEQUANTIZE, .c = c, .in = q, .ref = ref,
              .out = out, .bf16 = bf16};
    return run_job(&jb, n);
}

int sq_encode(const sq_codec *c, sq_dtype dtype, const float *x, const float *ref, uint64_t n,
              const sq_rng_key *key, sq_qbuf *q)
{
    if (dtype != SQ_DTYPE_FP32 && dtype != SQ_DTYPE_BF16) return SQ_ERR_ARG;
    return sq_encode_job(c, x, ref, ref != NULL, n, key, q, dtype == SQ_DTYPE_BF16);
}

int sq_decode(const sq_codec *c, sq_dtype dtype, const sq_qbuf *q, const float *ref, uint64_t n,
              float *out)
{
    if (dtype != SQ_DTYPE_FP32 && dtype != SQ_DTYPE_BF16) return SQ_ERR_ARG;
    return sq_decode_job(c, q, ref, ref != NULL, n, out, dtype == SQ_DTYPE_BF16);
}

/* The names of the releases before sq_encode and sq_decode (shardq/codec.h). */

int sq_quantize(const sq_codec *c, const float *x, uint64_t n, const sq_rng_key *key,
                sq_qbuf *q)
{
    return sq_encode_job(c, x, NULL, 0, n, key, q, 0);
}

int sq_quantize_diff(const sq_codec *c, const float *x, const float *ref, uint64_t n,
                     const sq_rng_key *key, sq_qbuf *q)
{
    return sq_encode_job(c, x, ref, 1, n, key, q, 0);
}

int sq_dequantize(const sq_codec *c, const sq_qbuf *q, uint64_t n, float *out)
{
    return sq_decode_job(c, q, NULL, 0, n, out, 0);
}

int sq_dequantize_add(const sq_codec *c, const sq_qbuf *q, const float *ref, uint64_t n,
                      float *out)
{
    return sq_decode_job(c, q, ref, 1, n, out, 0);
}

int sq_quantize_bf16(const sq_codec *c, const float *x, uint64_t n, const sq_rng_key *key,
                     sq_qbuf *q)
{
    return sq_encode_job(c, x, NULL, 0, n, key, q, 1);
}

int sq_quantize_diff_bf16(const sq_codec *c, const float *x, const float *ref, uint64_t n,
                          const sq_rng_key *key, sq_qbuf *q)
{
    return sq_encode_job(c, x, ref, 1, n, key, q, 1);
}

int sq_dequantize_bf16(const sq_codec *c, const sq_qbuf *q, uint64_t n, float *out)
{
    return sq_decode_job(c, q, NULL, 0, n, out, 1);
}

int sq_dequantize_add_bf16(const sq_codec *c, const sq_qbuf *q, const float *ref, uint64_t n,
                           float *out)
{
    return sq_decode_job(c, q, ref, 1, n, out, 1);
}

/* ------------------------------------------------------------------------ */
/* Sums with a kind of the table (plug-ins)                                 */
/* ------------------------------------------------------------------------ */
/*
** The generic rule of shardq/plugin.h: whole buffers, each chunk decoded
** (by the kind's decode, or as a built-in one without its Hadamard field),
** summed in fp32 in chunk order, checked, and encoded with the output codec
** -- unless that codec's kind sums the packed chunks itself (combine).
** The fp16 arithmetic of qgZ is the built-in kinds'.
*/

static float *floats(uint64_t n) { return malloc(n ? (size_t)n * sizeof(float) : 1); }

/* out = the sum of the k decoded chunks of c; tmp holds n floats. */
static int table_sum_into(const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n,
                          float *out, float *tmp)
{
    const sq_kind_ops *ops = sq_kind_ops_of(c->kind);
    sq_codec plain = *c;
    plain.hadamard = 0;
    for (int i = 0; i < k; i++) {
        float *dst = i ? tmp : out;
        int rc = ops ? ops->decode(c, &chunks[i], n, dst)
                     : sq_decode_job(&plain, &chunks[i], NULL, 0, n, dst, 0);
        /* a built-in chunk past fp32 surfaces in the sum's check below */
        if (rc != SQ_OK && !(rc == SQ_ERR_RANGE && !ops)) return rc;
        if (i)
            for (uint64_t j = 0; j < n; j++) out[j] = out[j] + tmp[j];
    }
    return any_nonfinite(out, n) ? SQ_ERR_RANGE : SQ_OK;
}

static int table_sum(const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n, float *out,
                     int f16)
{
    if (f16) return SQ_ERR_SPEC;
    if (n == 0) return SQ_OK;
    float *tmp = k > 1 ? floats(n) : NULL;
    if (k > 1 && !tmp) return SQ_ERR_NOMEM;
    int rc = table_sum_into(c, chunks, k, n, out, tmp);
    free(tmp);
    return rc;
}

static int table_sum_requant(const sq_codec *c_in, const sq_qbuf *chunks, int k, uint64_t n,
                             const sq_codec *c_out, const sq_rng_key *key, sq_qbuf *out,
                             int f16)
{
    if (f16) return SQ_ERR_SPEC;
    if (n == 0) return SQ_OK;
    const sq_kind_ops *ops = sq_kind_ops_of(c_out->kind);
    int rc = ops ? ops->combine(c_in, chunks, k, n, c_out, key, out) : SQ_ERR_UNSUPPORTED;
    if (rc != SQ_ERR_UNSUPPORTED) return rc;
    float *sum = floats(n), *tmp = k > 1 ? floats(n) : NULL;
    rc = !sum || (k > 1 && !tmp) ? SQ_ERR_NOMEM : table_sum_into(c_in, chunks, k, n, sum, tmp);
    if (rc == SQ_OK) {
        if (ops) {
            rc = ops->encode(c_out, sum, n, key, out);
        } else {
            sq_codec plain = *c_out;
            plain.hadamard = 0;
            rc = sq_encode_job(&plain, sum, NULL, 0, n, key, out, 0);
            if (rc == SQ_ERR_NONFINITE) rc = SQ_ERR_RANGE;
        }
    }
    free(sum);
    free(tmp);
    return rc;
}

static int sum_requant(const sq_codec *c_in, const sq_qbuf *chunks, int k, uint64_t n,
                       const sq_codec *c_out, const sq_rng_key *key, sq_qbuf *out, int f16)
{
    sq_codec cci, cco;
    c_in = settled(c_in, &cci);
    c_out = settled(c_out, &cco);
    int rc;
    if ((rc = sq_check_codec(c_in, n)) || (rc = sq_check_codec(c_out, n)) ||
        (rc = sq_check_chunks(c_in, chunks, k, n)) || (rc = sq_check_qbuf(c_out, out, n)) ||
        (rc = sq_check_key(c_out, key)))
        return rc;
    if (sq_kind_ops_of(c_in->kind) || sq_kind_ops_of(c_out->kind))
        return table_sum_requant(c_in, chunks, k, n, c_out, key, out, f16);
    /* The Hadamard fields are ignored here; the tile length must not depend
    ** on them, so use copies without. */
    sq_codec ci = *c_in, co = *c_out;
    ci.hadamard = 0;
    co.hadamard = 0;
    job jb = {.op = OP_SUM_REQUANT, .c = &ci, .c_out = &co, .in = chunks, .k = k,
              .f16 = f16, .key = key, .qout = out};
    return run_job(&jb, n);
}

static int sum(const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n, float *out, int f16)
{
    sq_codec cc;
    c = settled(c, &cc);
    int rc;
    if ((rc = sq_check_codec(c, n)) || (rc = sq_check_chunks(c, chunks, k, n))) return rc;
    if (n && !out) return SQ_ERR_ARG;
    if (sq_kind_ops_of(c->kind)) return table_sum(c, chunks, k, n, out, f16);
    job jb = {.op = OP_SUM, .c = c, .in = chunks, .k = k, .f16 = f16, .out = out};
    return run_job(&jb, n);
}

int sq_dequant_sum_requant(const sq_codec *c_in, const sq_qbuf *chunks, int k, uint64_t n,
                           const sq_codec *c_out, const sq_rng_key *key, sq_qbuf *out)
{
    return sum_requant(c_in, chunks, k, n, c_out, key, out, 0);
}

int sq_dequant_sum(const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n, float *out)
{
    return sum(c, chunks, k, n, out, 0);
}

int sq_dequant_sum_requant_f16(const sq_codec *c_in, const sq_qbuf *chunks, int k, uint64_t n,
                               const sq_codec *c_out, const sq_rng_key *key, sq_qbuf *out)
{
    if (c_in && c_out && (sq_sparse_kind(c_in->kind) || sq_sparse_kind(c_out->kind)))
        return SQ_ERR_SPEC; /* qgZ's fp16 arithmetic is for the quantizing kinds */
    if (c_in && c_out && (c_in->hadamard || c_out->hadamard)) return SQ_ERR_SPEC;
    return sum_requant(c_in, chunks, k, n, c_out, key, out, 1);
}

int sq_dequant_sum_f16(const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n, float *out)
{
    if (c && sq_sparse_kind(c->kind)) return SQ_ERR_SPEC; /* as above */
    if (c && c->hadamard) return SQ_ERR_SPEC;
    return sum(c, chunks, k, n, out, 1);
}

int sq_reduce(const sq_codec *c_in, sq_dtype acc, const sq_qbuf *chunks, int k, uint64_t n,
              const sq_codec *c_out, const sq_rng_key *key, sq_qbuf *qout, float *out)
{
    if (acc != SQ_DTYPE_FP32 && acc != SQ_DTYPE_FP16) return SQ_ERR_ARG;
    const int f16 = acc == SQ_DTYPE_FP16;
    if (c_out)
        return f16 ? sq_dequant_sum_requant_f16(c_in, chunks, k, n, c_out, key, qout)
                   : sq_dequant_sum_requant(c_in, chunks, k, n, c_out, key, qout);
    return f16 ? sq_dequant_sum_f16(c_in, chunks, k, n, out)
               : sq_dequant_sum(c_in, chunks, k, n, out);
}
