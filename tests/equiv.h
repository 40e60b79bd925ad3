/*
** equiv.h -- do the CUDA kernels write the C reference's bytes?
**
** Shared by tests/check_gpu_codec.c (the kernels on a GPU, through the
** backend) and tests/check_kernels_sim.cc (the same kernel sources under
** the CPU emulation of tests/sim). A case draws inputs from a distribution,
** runs one operation through the C reference (libshardq) and through the
** backend under test, and compares every output byte and the status. The
** backend's output buffers start filled with a pattern, so a byte it never
** writes is caught too.
**
** Header-only and valid C and C++.
*/
#ifndef SHARDQ_EQUIV_H
#define SHARDQ_EQUIV_H

#include "shardq/codec.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The operations, in the order of shardq.h, then the bf16 weight
** reconstruction variants of the first four (sq_quantize_bf16 ...). */
typedef enum eq_op {
    EQ_QUANTIZE,
    EQ_QUANTIZE_DIFF,
    EQ_DEQUANTIZE,
    EQ_DEQUANTIZE_ADD,
    EQ_SUM_REQUANT,
    EQ_SUM,
    EQ_QUANTIZE_BF16,
    EQ_QUANTIZE_DIFF_BF16,
    EQ_DEQUANTIZE_BF16,
    EQ_DEQUANTIZE_ADD_BF16,
    EQ_NOPS
} eq_op;

static const char *const eq_op_names[EQ_NOPS] = {
    "quantize", "quantize_diff", "dequantize", "dequantize_add", "dequant_sum_requant",
    "dequant_sum", "quantize_bf16", "quantize_diff_bf16", "dequantize_bf16",
    "dequantize_add_bf16"};

/* The fp32 operation of a bf16 variant (itself for the others), and
** whether op is a bf16 variant. */
static inline eq_op eq_base_op(eq_op op)
{
    return op >= EQ_QUANTIZE_BF16 ? (eq_op)(op - EQ_QUANTIZE_BF16) : op;
}
static inline int eq_is_bf16(eq_op op) { return op >= EQ_QUANTIZE_BF16; }

/* The backend under test. Buffers are host memory: the backend copies them
** to its device and back as it needs. ref NULL selects quantize/dequantize,
** non-NULL quantize_diff/dequantize_add; bf16 != 0 their bf16 variants. */
typedef struct eq_backend {
    const char *name;
    int (*quantize)(const sq_codec *c, const float *x, const float *ref, uint64_t n,
                    const sq_rng_key *key, sq_qbuf *q, int bf16);
    int (*dequantize)(const sq_codec *c, const sq_qbuf *q, const float *ref, uint64_t n,
                      float *out, int bf16);
    int (*sum_requant)(const sq_codec *c_in, const sq_qbuf *chunks, int k, uint64_t n,
                       const sq_codec *c_out, const sq_rng_key *key, sq_qbuf *out);
    int (*sum)(const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n, float *out);
} eq_backend;

/* ------------------------------------------------------------------------ */
/* Inputs                                                                   */
/* ------------------------------------------------------------------------ */

typedef enum eq_dist {
    EQ_NORMAL,   /* N(0, 1) */
    EQ_HEAVY,    /* N(0, 1) / sqrt(U): a heavy, Student-like tail */
    EQ_OUTLIERS, /* N(0, 1) with one element in 500 times 1000 */
    EQ_GRADIENT, /* N(0, 1e-4), one in 200 times 30: real gradient scales */
    EQ_NDIST
} eq_dist;

static const char *const eq_dist_names[EQ_NDIST] = {"normal", "heavy-tailed", "outliers",
                                                    "gradient"};

static inline uint64_t eq_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline double eq_unit(uint64_t *s) /* (0, 1] */
{
    return ((double)(eq_next(s) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

static inline void eq_fill(float *x, uint64_t n, eq_dist d, uint64_t seed)
{
    uint64_t s = seed * 0x2545f4914f6cdd1dull + (uint64_t)d;
    for (uint64_t i = 0; i < n; i++) {
        double z = sqrt(-2.0 * log(eq_unit(&s))) * cos(6.283185307179586 * eq_unit(&s));
        switch (d) {
        case EQ_NORMAL: break;
        case EQ_HEAVY: z /= sqrt(eq_unit(&s)); break;
        case EQ_OUTLIERS: if (eq_next(&s) % 500 == 0) z *= 1000.0; break;
        case EQ_GRADIENT: z *= 1e-4; if (eq_next(&s) % 200 == 0) z *= 30.0; break;
        default: break;
        }
        x[i] = (float)z;
    }
}

/* ------------------------------------------------------------------------ */
/* Comparing                                                                */
/* ------------------------------------------------------------------------ */

#define EQ_PATTERN 0x5a /* what the backend's outputs hold before it runs */

static inline void *eq_alloc(uint64_t bytes, int fill)
{
    void *p = malloc(bytes ? (size_t)bytes : 1);
    if (!p) {
        fprintf(stderr, "equiv: out of memory (%llu bytes)\n", (unsigned long long)bytes);
        exit(99);
    }
    memset(p, fill, bytes ? (size_t)bytes : 1);
    return p;
}

/* A host qbuf of n elements (sq_qbuf_alloc) with every byte set to fill. */
static inline void eq_qbuf(const sq_codec *c, uint64_t n, int fill, sq_qbuf *q)
{
    if (sq_qbuf_alloc(c, n, q) != SQ_OK) {
        fprintf(stderr, "equiv: out of memory for a qbuf of %llu elements\n",
                (unsigned long long)n);
        exit(99);
    }
    memset(q->codes, fill, (size_t)sq_codec_code_bytes(c, n));
    memset(q->scales, fill, (size_t)sq_codec_scale_bytes(c, n));
    if (q->offsets) memset(q->offsets, fill, (size_t)sq_codec_offset_bytes(c, n));
}

/* Index of the first differing byte, or -1. */
static inline int64_t eq_first_diff(const void *a, const void *b, uint64_t bytes)
{
    const uint8_t *p = (const uint8_t *)a, *q = (const uint8_t *)b;
    for (uint64_t i = 0; i < bytes; i++)
        if (p[i] != q[i]) return (int64_t)i;
    return -1;
}

typedef struct eq_case {
    eq_op op;
    sq_codec c;     /* the codec (the input codec of the sums) */
    sq_codec c_out; /* EQ_SUM_REQUANT: the output codec */
    int k;          /* chunks of the sums */
    uint64_t n;
    eq_dist dist;
    uint64_t seed;
} eq_case;

static inline void eq_describe(const eq_case *t, char *buf, size_t len)
{
    char a[SQ_CODEC_STRLEN], b[SQ_CODEC_STRLEN];
    sq_codec_format(&t->c, a, sizeof a);
    sq_codec_format(&t->c_out, b, sizeof b);
    if (t->op == EQ_SUM_REQUANT)
        snprintf(buf, len, "%s n=%llu k=%d %s in {%s} out {%s} seed=%llu",
                 eq_op_names[t->op], (unsigned long long)t->n, t->k, eq_dist_names[t->dist], a, b,
                 (unsigned long long)t->seed);
    else
        snprintf(buf, len, "%s n=%llu%s%.0d %s {%s} seed=%llu", eq_op_names[t->op],
                 (unsigned long long)t->n, t->op == EQ_SUM ? " k=" : "",
                 t->op == EQ_SUM ? t->k : 0, eq_dist_names[t->dist], a,
                 (unsigned long long)t->seed);
}

static inline int eq_report_bytes(const eq_case *t, const char *what, const void *want,
                                  const void *got, uint64_t bytes, uint64_t unit)
{
    int64_t i = eq_first_diff(want, got, bytes);
    if (i < 0) return 0;
    char d[512];
    eq_describe(t, d, sizeof d);
    uint64_t e = (uint64_t)i / unit;
    fprintf(stderr, "MISMATCH %s: %s differs first at byte %lld (item %llu):", d, what,
            (long long)i, (unsigned long long)e);
    if (unit == 4) {
        float w, g;
        memcpy(&w, (const uint8_t *)want + e * 4, 4);
        memcpy(&g, (const uint8_t *)got + e * 4, 4);
        uint32_t wb, gb;
        memcpy(&wb, &w, 4);
        memcpy(&gb, &g, 4);
        fprintf(stderr, " reference %.9g (0x%08x), backend %.9g (0x%08x)\n", w, wb, g, gb);
    } else {
        fprintf(stderr, " reference 0x%02x, backend 0x%02x\n", ((const uint8_t *)want)[i],
                ((const uint8_t *)got)[i]);
    }
    return 1;
}

static inline int eq_compare_qbuf(const eq_case *t, const sq_codec *c, const sq_qbuf *want,
                                  const sq_qbuf *got)
{
    uint64_t su = c->scale == SQ_SCALE_FP32 ? 4 : 2;
    int bad = eq_report_bytes(t, "codes", want->codes, got->codes, sq_codec_code_bytes(c, t->n), 1);
    bad |= eq_report_bytes(t, "scales", want->scales, got->scales, sq_codec_scale_bytes(c, t->n), su);
    if (c->kind == SQ_KIND_MINMAX)
        bad |= eq_report_bytes(t, "offsets", want->offsets, got->offsets,
                               sq_codec_offset_bytes(c, t->n), su);
    return bad;
}

static inline int eq_compare_status(const eq_case *t, int want, int got)
{
    if (want == got) return 0;
    char d[512];
    eq_describe(t, d, sizeof d);
    fprintf(stderr, "MISMATCH %s: status %d (%s) from the reference, %d (%s) from the backend\n",
            d, want, sq_strerror(want), got, sq_strerror(got));
    return 1;
}

/* ------------------------------------------------------------------------ */
/* One case                                                                 */
/* ------------------------------------------------------------------------ */

static inline sq_rng_key eq_key(uint64_t seed, uint32_t worker)
{
    sq_rng_key k;
    k.seed = 0x5eed0000ull + seed;
    k.step = 7;
    k.worker = worker;
    k.site = SQ_SITE_GRAD_INTRA;
    return k;
}

/* Quantized inputs for the decoding operations, made by the reference. */
static inline void eq_make_chunks(const eq_case *t, int k, sq_qbuf *chunks)
{
    float *x = (float *)eq_alloc(t->n * 4, 0);
    for (int i = 0; i < k; i++) {
        eq_fill(x, t->n, t->dist, t->seed * 131 + (uint64_t)i);
        sq_qbuf_alloc(&t->c, t->n, &chunks[i]);
        sq_rng_key key = eq_key(t->seed, (uint32_t)i);
        int rc = sq_quantize(&t->c, x, t->n, &key, &chunks[i]);
        if (rc != SQ_OK) { /* inputs the reference refuses make no test */
            fprintf(stderr, "equiv: the reference cannot quantize the input: %s\n",
                    sq_strerror(rc));
            exit(99);
        }
    }
    free(x);
}

/* Runs one case; 0 when the backend agrees with the reference in every
** byte and the status, 1 after printing what differs. */
static inline int eq_run(const eq_backend *be, const eq_case *t)
{
    const uint64_t n = t->n;
    const int bf16 = eq_is_bf16(t->op);
    int bad = 0;
    sq_rng_key key = eq_key(t->seed, 3);
    switch (eq_base_op(t->op)) {
    case EQ_QUANTIZE:
    case EQ_QUANTIZE_DIFF: {
        float *x = (float *)eq_alloc(n * 4, 0), *ref = NULL;
        eq_fill(x, n, t->dist, t->seed);
        if (eq_base_op(t->op) == EQ_QUANTIZE_DIFF) {
            ref = (float *)eq_alloc(n * 4, 0);
            eq_fill(ref, n, t->dist, t->seed + 1000003);
            for (uint64_t i = 0; i < n; i++) ref[i] = x[i] + ref[i] * 0.01f;
        }
        sq_qbuf want, got;
        sq_qbuf_alloc(&t->c, n, &want);
        eq_qbuf(&t->c, n, EQ_PATTERN, &got);
        int rw = bf16 ? (ref ? sq_quantize_diff_bf16(&t->c, x, ref, n, &key, &want)
                             : sq_quantize_bf16(&t->c, x, n, &key, &want))
                      : (ref ? sq_quantize_diff(&t->c, x, ref, n, &key, &want)
                             : sq_quantize(&t->c, x, n, &key, &want));
        int rg = be->quantize(&t->c, x, ref, n, &key, &got, bf16);
        bad = eq_compare_status(t, rw, rg);
        if (!bad && rw == SQ_OK) bad = eq_compare_qbuf(t, &t->c, &want, &got);
        sq_qbuf_free(&want);
        sq_qbuf_free(&got);
        free(x);
        free(ref);
        break;
    }
    case EQ_DEQUANTIZE:
    case EQ_DEQUANTIZE_ADD:
    case EQ_SUM: {
        int k = t->op == EQ_SUM ? t->k : 1;
        sq_qbuf *chunks = (sq_qbuf *)calloc((size_t)k, sizeof(sq_qbuf));
        eq_make_chunks(t, k, chunks);
        float *ref = NULL;
        if (eq_base_op(t->op) == EQ_DEQUANTIZE_ADD) {
            ref = (float *)eq_alloc(n * 4, 0);
            eq_fill(ref, n, t->dist, t->seed + 77);
        }
        float *want = (float *)eq_alloc(n * 4, 0), *got = (float *)eq_alloc(n * 4, EQ_PATTERN);
        int rw, rg;
        if (t->op == EQ_SUM) {
            rw = sq_dequant_sum(&t->c, chunks, k, n, want);
            rg = be->sum(&t->c, chunks, k, n, got);
        } else {
            rw = bf16 ? (ref ? sq_dequantize_add_bf16(&t->c, &chunks[0], ref, n, want)
                             : sq_dequantize_bf16(&t->c, &chunks[0], n, want))
                      : (ref ? sq_dequantize_add(&t->c, &chunks[0], ref, n, want)
                             : sq_dequantize(&t->c, &chunks[0], n, want));
            rg = be->dequantize(&t->c, &chunks[0], ref, n, got, bf16);
        }
        bad = eq_compare_status(t, rw, rg);
        if (!bad && rw == SQ_OK) bad = eq_report_bytes(t, "output", want, got, n * 4, 4);
        for (int i = 0; i < k; i++) sq_qbuf_free(&chunks[i]);
        free(chunks);
        free(ref);
        free(want);
        free(got);
        break;
    }
    case EQ_SUM_REQUANT: {
        sq_qbuf *chunks = (sq_qbuf *)calloc((size_t)t->k, sizeof(sq_qbuf));
        eq_make_chunks(t, t->k, chunks);
        sq_qbuf want, got;
        sq_qbuf_alloc(&t->c_out, n, &want);
        eq_qbuf(&t->c_out, n, EQ_PATTERN, &got);
        int rw = sq_dequant_sum_requant(&t->c, chunks, t->k, n, &t->c_out, &key, &want);
        int rg = be->sum_requant(&t->c, chunks, t->k, n, &t->c_out, &key, &got);
        bad = eq_compare_status(t, rw, rg);
        if (!bad && rw == SQ_OK) bad = eq_compare_qbuf(t, &t->c_out, &want, &got);
        for (int i = 0; i < t->k; i++) sq_qbuf_free(&chunks[i]);
        free(chunks);
        sq_qbuf_free(&want);
        sq_qbuf_free(&got);
        break;
    }
    default: break;
    }
    return bad;
}

/* Runs op on codecs given as specs (spec_out NULL: the same as spec). A
** malformed spec is a bug in the test: it stops the program (exit 99). */
static inline int eq_run_spec(const eq_backend *be, eq_op op, const char *spec, uint64_t n,
                              eq_dist dist, uint64_t seed, int k, const char *spec_out)
{
    eq_case t;
    char err[256];
    memset(&t, 0, sizeof t);
    const char *bad = sq_codec_parse(spec, &t.c, err, sizeof err) != SQ_OK ? spec : NULL;
    if (!bad && sq_codec_parse(spec_out ? spec_out : spec, &t.c_out, err, sizeof err) != SQ_OK)
        bad = spec_out;
    if (bad) {
        fprintf(stderr, "equiv: bad spec in the test: %s: %s\n", bad, err);
        exit(99);
    }
    t.op = op;
    t.k = k;
    t.n = n;
    t.dist = dist;
    t.seed = seed;
    return eq_run(be, &t);
}

/* ------------------------------------------------------------------------ */
/* The matrix of the issue: bits 1..8, groups, Hadamard sizes, rounding,    */
/* level conventions                                                         */
/* ------------------------------------------------------------------------ */

static const uint64_t eq_groups[] = {1, 7, 32, 128, 2048, 4096};
static const int eq_hadamards[] = {0, 32, 128, 1024};
#define EQ_NGROUPS (sizeof eq_groups / sizeof eq_groups[0])
#define EQ_NHADAMARDS (sizeof eq_hadamards / sizeof eq_hadamards[0])

/* The codec of matrix index i (bits, group, hadamard, round, levels, in
** that order from fastest to slowest), or -1 if that combination is not a
** codec (1-bit symmetric codes need the deepspeed levels). */
#define EQ_MATRIX_SIZE (8 * EQ_NGROUPS * EQ_NHADAMARDS * 2 * 2)
static inline int eq_matrix_codec(int i, sq_codec *c)
{
    *c = sq_codec_default();
    c->bits = 1 + i % 8;
    i /= 8;
    c->group = eq_groups[i % EQ_NGROUPS];
    i /= (int)EQ_NGROUPS;
    c->hadamard = eq_hadamards[i % EQ_NHADAMARDS];
    i /= (int)EQ_NHADAMARDS;
    c->round = i % 2 ? SQ_ROUND_SR : SQ_ROUND_RTN;
    i /= 2;
    c->levels = i % 2 ? SQ_LEVELS_DEEPSPEED : SQ_LEVELS_SDP4BIT;
    return sq_codec_validate(c) == SQ_OK ? 0 : -1;
}

/* Runs op over the whole matrix at size n, the distribution turning with
** the index. Returns the number of failing cases. */
static inline int eq_run_matrix(const eq_backend *be, eq_op op, uint64_t n, int k, uint64_t seed)
{
    int failures = 0;
    for (int i = 0; i < (int)EQ_MATRIX_SIZE; i++) {
        eq_case t;
        memset(&t, 0, sizeof t);
        if (eq_matrix_codec(i, &t.c) != 0) continue;
        t.op = op;
        t.n = n;
        t.k = k;
        t.dist = (eq_dist)(i % EQ_NDIST);
        t.seed = seed + (uint64_t)i;
        if (op == EQ_SUM_REQUANT) {
            /* TLq's middle hop: wide codes in, the matrix codec out */
            t.c_out = t.c;
            t.c.bits = 8;
            t.c.round = SQ_ROUND_SR;
        }
        failures += eq_run(be, &t);
    }
    return failures;
}

/* ------------------------------------------------------------------------ */
/* The elementwise operations of backend.h                                  */
/* ------------------------------------------------------------------------ */

/* What the inputs of an elementwise case hold besides ordinary values. */
typedef enum eq_ew_kind {
    EQ_EW_FINITE,    /* finite, no sum past fp32, nothing past bf16's range */
    EQ_EW_RANGE,     /* also sums past fp32 and values that round to Inf in bf16 */
    EQ_EW_NONFINITE, /* also NaN (quiet, signalling) and Inf in a, b and h */
    EQ_EW_NKINDS
} eq_ew_kind;

static const char *const eq_ew_kind_names[EQ_EW_NKINDS] = {"finite", "range", "nonfinite"};

static inline float eq_f32_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Random sign and mantissa, the exponent field in [elo, ehi]. */
static inline uint32_t eq_ew_bits(uint64_t *s, uint32_t elo, uint32_t ehi)
{
    uint64_t r = eq_next(s);
    uint32_t e = elo + (uint32_t)((r >> 32) % (ehi - elo + 1));
    return ((uint32_t)r & 0x807fffffu) | e << 23;
}

/* Element i of category c (i % 16 for a, shifted for b, so that the large
** categories 13 and 14 never meet each other or category 8 in one sum). */
static inline uint32_t eq_ew_value(uint64_t *s, unsigned c)
{
    switch (c) {
    case 8: return (eq_ew_bits(s, 1, 200) & 0xffff0000u) | 0x8000u; /* a bf16 tie */
    case 9: return 0x80000000u;                                    /* -0 */
    case 10: return 0;
    case 11: return eq_ew_bits(s, 0, 0);                           /* subnormal */
    case 12: return (eq_ew_bits(s, 0, 0) & 0xffff0000u) | 0x8000u; /* subnormal tie */
    case 13: return (eq_next(s) & 1 ? 0x80000000u : 0) | 0x7f7f7fffu; /* bf16's last finite */
    case 14: return eq_ew_bits(s, 1, 253);
    case 15: return eq_ew_bits(s, 97, 157);
    default: return eq_ew_bits(s, 100, 160);
    }
}

/* Inputs of n elements: a and b for add (and a for to_bf16), h for
** from_bf16. */
static inline void eq_ew_fill(float *a, float *b, uint16_t *h, uint64_t n, eq_ew_kind kind,
                              uint64_t seed)
{
    uint64_t s = seed * 0x2545f4914f6cdd1dull + 17u * (uint64_t)kind;
    for (uint64_t i = 0; i < n; i++) {
        a[i] = eq_f32_bits(eq_ew_value(&s, (unsigned)(i % 16)));
        b[i] = eq_f32_bits(eq_ew_value(&s, (unsigned)((i + 5) % 16)));
        if (i % 23 == 0) b[i] = -a[i]; /* an exact cancellation: +0 */
        if (i % 48 == 11) b[i] = eq_f32_bits(eq_ew_bits(&s, 0, 0)); /* two subnormals */
        uint16_t r = (uint16_t)eq_next(&s);
        switch (i % 16) {
        case 9: r = 0x8000u; break;
        case 10: r = 0; break;
        case 11: r &= 0x807fu; break; /* subnormal */
        default: break;
        }
        if ((r & 0x7f80u) == 0x7f80u) r ^= 0x4000u; /* keep it finite */
        h[i] = r;
    }
    if (n == 0 || kind == EQ_EW_FINITE) return;
    const float big = 3.4028234663852886e38f; /* FLT_MAX */
    a[n / 2] = 3.4e38f;                         /* rounds to Inf in bf16 */
    a[n - 1] = eq_f32_bits(0x7f7f8000u);        /* the tie at the top: to Inf */
    a[0] = b[0] = big;                          /* a sum past fp32; Inf in bf16 */
    a[n / 3] = b[n / 3] = -big;                 /* and to -Inf (last: n = 1 too) */
    if (kind == EQ_EW_RANGE) return;
    a[n - 1] = eq_f32_bits(0x7fc12345u);        /* NaN with a payload */
    b[n / 2] = eq_f32_bits(0xff800000u);        /* -Inf */
    b[n / 3] = eq_f32_bits(0x7f800001u);        /* signalling NaN */
    a[2 * n / 3] = eq_f32_bits(0x7f800000u);    /* Inf - Inf */
    b[2 * n / 3] = eq_f32_bits(0xff800000u);
    h[n / 2] = 0x7f80u;
    h[n / 3] = 0x7f81u;
    h[n - 1] = 0xffc1u;
}

/* The statuses the inputs of kind must give (n > 0): add, to_bf16,
** from_bf16. */
static inline void eq_ew_want(eq_ew_kind kind, int want[3])
{
    want[0] = want[1] = kind == EQ_EW_FINITE ? SQ_OK
                        : kind == EQ_EW_RANGE ? SQ_ERR_RANGE
                                              : SQ_ERR_NONFINITE;
    want[2] = kind == EQ_EW_NONFINITE ? SQ_ERR_NONFINITE : SQ_OK;
}

#endif
