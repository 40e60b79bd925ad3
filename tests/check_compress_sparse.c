/*
** check_compress_sparse.c -- top-k and random-k sparsification and the
** bf16 / fp16 casts as codec kinds (kind=topk, randk, bf16, fp16).
**
** Every kind is checked against a straight-line reference written here
** (the bytes of the indices and values, the decoded values): groups of 1
** to more than 65536 elements (the three index widths), a short last
** group, ties, the three value dtypes, a Hadamard transform before the
** selection, the sums. Random-k's selection is checked to be distinct,
** a function of the key and the group alone, and uniform (chi-square
** tests over seeds). The sizes are their closed forms, prefixes of whole
** groups address the data of the groups that follow (what the world
** relies on), and the traffic a world counts for such wires is the closed
** form too. The casts are sq_f32_to_bf16 / sq_f32_to_f16 element by
** element, and a value past fp16's range is refused, never an Inf.
*/
#include "shardq/codec.h"
#include "shardq/world.h"
#include "check_util.h"

#include <gsl/gsl_cdf.h>

/* ------------------------------------------------------------------------ */
/* The reference                                                            */
/* ------------------------------------------------------------------------ */

static uint64_t ref_width(uint64_t group) { return group <= 256 ? 1 : group <= 65536 ? 2 : 4; }
static uint64_t ref_vsize(sq_scale_dtype s) { return s == SQ_SCALE_FP32 ? 4 : 2; }

/* Elements a sparse codec keeps of n. */
static uint64_t ref_kept(uint64_t n, uint64_t group, uint64_t keep)
{
    uint64_t rest = n % group;
    return n / group * keep + (rest < keep ? rest : keep);
}

static void put_le(uint8_t *p, uint64_t v, uint64_t bytes)
{
    for (uint64_t b = 0; b < bytes; b++) p[b] = (uint8_t)(v >> (8 * b));
}

static uint64_t get_le(const uint8_t *p, uint64_t bytes)
{
    uint64_t v = 0;
    for (uint64_t b = 0; b < bytes; b++) v |= (uint64_t)p[b] << (8 * b);
    return v;
}

/* v in the value dtype: its bytes at p, and the value they hold. */
static float put_value(uint8_t *p, float v, sq_scale_dtype s)
{
    if (s == SQ_SCALE_FP32) {
        memcpy(p, &v, 4);
        return v;
    }
    uint16_t h = s == SQ_SCALE_BF16 ? sq_f32_to_bf16(v) : sq_f32_to_f16(v);
    put_le(p, h, 2);
    return s == SQ_SCALE_BF16 ? sq_bf16_to_f32(h) : sq_f16_to_f32(h);
}

/* top-k by repeated scans: the largest |x| not yet taken, the lowest index
** on ties (strictly greater replaces), then the taken ones in index order. */
static void ref_select_top(const float *x, uint64_t len, uint64_t k, uint64_t *pick)
{
    char *taken = calloc(len, 1);
    ck_assert_ptr_nonnull(taken);
    for (uint64_t t = 0; t < k; t++) {
        uint64_t best = len;
        for (uint64_t j = 0; j < len; j++)
            if (!taken[j] && (best == len || fabsf(x[j]) > fabsf(x[best]))) best = j;
        taken[best] = 1;
    }
    uint64_t got = 0;
    for (uint64_t j = 0; j < len; j++)
        if (taken[j]) pick[got++] = j;
    free(taken);
}

/* random-k as docs/conventions.md writes it: a partial Fisher-Yates
** shuffle of the group starting at element s, step j drawing 48 bits from
** sq_uniform24 at 2 (s + j) and 2 (s + j) + 1, the product taken in 128 bits. */
static void ref_select_random(const sq_rng_key *key, uint64_t s, uint64_t len, uint64_t k,
                              uint64_t *pick)
{
    uint64_t *perm = malloc(len * sizeof *perm);
    ck_assert_ptr_nonnull(perm);
    for (uint64_t j = 0; j < len; j++) perm[j] = j;
    for (uint64_t j = 0; j < k; j++) {
        uint64_t hi = (uint64_t)ldexp(sq_uniform24(key, 2 * (s + j)), 24);
        uint64_t lo = (uint64_t)ldexp(sq_uniform24(key, 2 * (s + j) + 1), 24);
        __extension__ unsigned __int128 prod = (unsigned __int128)(hi << 24 | lo) * (len - j);
        uint64_t r = j + (uint64_t)(prod >> 48);
        uint64_t v = perm[j];
        perm[j] = perm[r];
        perm[r] = v;
    }
    for (uint64_t a = 0; a < k; a++) /* insertion sort of the first k */
        for (uint64_t b = a; b > 0 && perm[b - 1] > perm[b]; b--) {
            uint64_t v = perm[b];
            perm[b] = perm[b - 1];
            perm[b - 1] = v;
        }
    memcpy(pick, perm, k * sizeof *pick);
    free(perm);
}

/* The reference encoding of x[0..n) under a sparse codec c: the codes and
** values arrays (byte for byte) and the decoded values. */
typedef struct ref_out {
    uint8_t *codes, *vals;
    uint64_t ncodes, nvals;
    float *dec;
} ref_out;

static void ref_sparse(const sq_codec *c, const float *x, uint64_t n, const sq_rng_key *key,
                       ref_out *o)
{
    const uint64_t w = ref_width(c->group), vs = ref_vsize(c->scale);
    const uint64_t kept = ref_kept(n, c->group, c->keep);
    o->ncodes = kept * w;
    o->nvals = kept * vs;
    o->codes = calloc(o->ncodes + 1, 1);
    o->vals = calloc(o->nvals + 1, 1);
    o->dec = calloc(n + 1, sizeof *o->dec);
    uint64_t *pick = malloc((c->keep + 1) * sizeof *pick);
    ck_assert(o->codes && o->vals && o->dec && pick);
    uint64_t slot = 0;
    for (uint64_t g0 = 0; g0 < n; g0 += c->group) {
        uint64_t len = n - g0 < c->group ? n - g0 : c->group;
        uint64_t k = len < c->keep ? len : c->keep;
        if (c->kind == SQ_KIND_TOPK)
            ref_select_top(x + g0, len, k, pick);
        else
            ref_select_random(key, g0, len, k, pick);
        for (uint64_t t = 0; t < k; t++, slot++) {
            put_le(o->codes + slot * w, pick[t], w);
            o->dec[g0 + pick[t]] = put_value(o->vals + slot * vs, x[g0 + pick[t]], c->scale);
        }
    }
    ck_assert_uint_eq(slot, kept);
    free(pick);
}

static void ref_free(ref_out *o)
{
    free(o->codes);
    free(o->vals);
    free(o->dec);
}

static sq_codec spec(const char *text)
{
    sq_codec c;
    char err[256];
    int rc = sq_codec_parse(text, &c, err, sizeof err);
    ck_assert_msg(rc == SQ_OK, "%s: %s", text, err);
    return c;
}

/* Values whose magnitude changes every 100 elements, within fp16's range. */
static void fill(float *x, uint64_t n, uint64_t seed)
{
    sqt_fill(x, (size_t)n, seed);
    for (uint64_t i = 0; i < n; i++) x[i] *= 0x1p-4f;
}

/* Quantizes x under c and compares everything with the reference. */
static void check_against_reference(const sq_codec *c, const float *x, uint64_t n,
                                    const sq_rng_key *key, const char *what)
{
    ref_out r;
    ref_sparse(c, x, n, key, &r);
    ck_assert_uint_eq(sq_codec_code_bytes(c, n), r.ncodes);
    ck_assert_uint_eq(sq_codec_scale_bytes(c, n), r.nvals);
    ck_assert_uint_eq(sq_codec_offset_bytes(c, n), 0);
    sq_qbuf q;
    ck_assert_int_eq(sq_qbuf_alloc(c, n, &q), SQ_OK);
    int rc = sq_quantize(c, x, n, key, &q);
    ck_assert_msg(rc == SQ_OK, "%s: quantize %d", what, rc);
    SQT_ASSERT_BYTES(q.codes, r.codes, r.ncodes, what);
    SQT_ASSERT_BYTES(q.scales, r.vals, r.nvals, what);
    float *y = malloc((n + 1) * sizeof *y);
    ck_assert_int_eq(sq_dequantize(c, &q, n, y), SQ_OK);
    SQT_ASSERT_BYTES(y, r.dec, n * sizeof *y, what);
    free(y);
    sq_qbuf_free(&q);
    ref_free(&r);
}

/* ------------------------------------------------------------------------ */
/* top-k and random-k against the reference                                 */
/* ------------------------------------------------------------------------ */

static const sq_rng_key KEY = {0x5eed5eedull, 7, 3, SQ_SITE_GRAD_INTER};

static void sweep_kind(const char *kind)
{
    static const uint64_t groups[] = {1, 3, 5, 64, 256, 257, 1000};
    static const uint64_t sizes[] = {1, 7, 64, 999, 4099};
    static const char *const scales[] = {"fp32", "bf16", "fp16"};
    float *x = malloc(4099 * sizeof *x), *t = malloc(4099 * sizeof *t);
    fill(x, 4099, 11);
    sqt_gen_ties(4099, t); /* half-integers: many equal magnitudes, +-0 */
    for (size_t g = 0; g < sizeof groups / sizeof *groups; g++)
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
            for (int k = 0; k < 3; k++) {
                uint64_t G = groups[g];
                uint64_t keep = k == 0 ? 1 : k == 1 ? (G + 2) / 3 : G;
                char text[160], what[200];
                snprintf(text, sizeof text, "kind=%s,group=%llu,keep=%llu,scale=%s", kind,
                         (unsigned long long)G, (unsigned long long)keep, scales[(g + s + k) % 3]);
                sq_codec c = spec(text);
                snprintf(what, sizeof what, "%s n=%llu", text, (unsigned long long)sizes[s]);
                check_against_reference(&c, (s + k) % 2 ? t : x, sizes[s], &KEY, what);
            }
    free(x);
    free(t);
}

START_TEST(test_topk_reference) { sweep_kind("topk"); }
END_TEST

START_TEST(test_randk_reference) { sweep_kind("randk"); }
END_TEST

/* The index widths: 1 byte to 256, 2 to 65536, 4 beyond; a short last group. */
START_TEST(test_index_widths)
{
    const uint64_t n = 140001;
    float *x = malloc(n * sizeof *x);
    fill(x, n, 5);
    static const struct {
        uint64_t group, width;
    } w[] = {{256, 1}, {257, 2}, {65536, 2}, {65537, 4}, {70000, 4}};
    for (size_t i = 0; i < sizeof w / sizeof *w; i++)
        for (int r = 0; r < 2; r++) {
            char text[128];
            snprintf(text, sizeof text, "kind=%s,group=%llu,keep=3", r ? "randk" : "topk",
                     (unsigned long long)w[i].group);
            sq_codec c = spec(text);
            ck_assert_int_eq(c.bits, (int)(8 * w[i].width));
            ck_assert_uint_eq(sq_codec_code_bytes(&c, n), ref_kept(n, w[i].group, 3) * w[i].width);
            check_against_reference(&c, x, n, &KEY, text);
        }
    free(x);
}
END_TEST

/* Ties by magnitude go to the lower index, whatever the sign, +0 with -0. */
START_TEST(test_topk_ties)
{
    const float x[] = {1, -3, 3, -3, 0, -0.0f, 2, 3};
    sq_codec c = spec("kind=topk,group=8,keep=3");
    sq_qbuf q;
    ck_assert_int_eq(sq_qbuf_alloc(&c, 8, &q), SQ_OK);
    ck_assert_int_eq(sq_quantize(&c, x, 8, NULL, &q), SQ_OK);
    ck_assert_int_eq(q.codes[0], 1);
    ck_assert_int_eq(q.codes[1], 2);
    ck_assert_int_eq(q.codes[2], 3);
    const float z[] = {-0.0f, 0.0f, 0.0f, -0.0f};
    sq_codec c2 = spec("kind=topk,group=4,keep=2");
    ck_assert_int_eq(sq_quantize(&c2, z, 4, NULL, &q), SQ_OK);
    ck_assert_int_eq(q.codes[0], 0);
    ck_assert_int_eq(q.codes[1], 1);
    ck_assert_uint_eq(sqt_bits(((float *)q.scales)[0]), 0x80000000u); /* -0 travels as -0 */
    sq_qbuf_free(&q);
    /* orders that strain a selection: equal, ascending, descending,
    ** organ-pipe, alternating signs; few kept and many */
    const uint64_t n = 3000;
    float *v = malloc(n * sizeof *x);
    for (int pat = 0; pat < 5; pat++) {
        for (uint64_t i = 0; i < n; i++) {
            uint64_t j = i % 1000;
            v[i] = pat == 0   ? 2.5f
                   : pat == 1 ? (float)j
                   : pat == 2 ? (float)(1000 - j)
                   : pat == 3 ? (float)(j < 500 ? j : 1000 - j)
                              : (j % 2 ? -1.0f : 1.0f) * (float)(j % 7);
        }
        for (int k = 0; k < 3; k++) {
            char text[96];
            snprintf(text, sizeof text, "kind=topk,group=1000,keep=%d",
                     k == 0 ? 10 : k == 1 ? 65 : 999);
            sq_codec t = spec(text);
            check_against_reference(&t, v, n, NULL, text);
        }
    }
    free(v);
}
END_TEST

/* A Hadamard transform before the selection, its inverse after decoding. */
START_TEST(test_hadamard)
{
    const uint64_t n = 1000;
    float *x = malloc(n * sizeof *x), *h = malloc(n * sizeof *h), *y = malloc(n * sizeof *y);
    fill(x, n, 9);
    for (int r = 0; r < 2; r++) {
        sq_codec c = spec(r ? "kind=randk,group=64,keep=9,hadamard=32"
                            : "kind=topk,group=64,keep=9,hadamard=32,scale=bf16");
        memcpy(h, x, n * sizeof *h);
        ck_assert_int_eq(sq_hadamard(h, n, 32), SQ_OK);
        ref_out ro;
        ref_sparse(&c, h, n, &KEY, &ro);
        sq_qbuf q;
        ck_assert_int_eq(sq_qbuf_alloc(&c, n, &q), SQ_OK);
        ck_assert_int_eq(sq_quantize(&c, x, n, &KEY, &q), SQ_OK);
        SQT_ASSERT_BYTES(q.codes, ro.codes, ro.ncodes, "hadamard codes");
        SQT_ASSERT_BYTES(q.scales, ro.vals, ro.nvals, "hadamard values");
        ck_assert_int_eq(sq_hadamard_inverse(ro.dec, n, 32), SQ_OK);
        ck_assert_int_eq(sq_dequantize(&c, &q, n, y), SQ_OK);
        SQT_ASSERT_BYTES(y, ro.dec, n * sizeof *y, "hadamard decode");
        sq_qbuf_free(&q);
        ref_free(&ro);
    }
    free(x), free(h), free(y);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* random-k's selection                                                     */
/* ------------------------------------------------------------------------ */

/* The indices randk keeps of group g of an n-element buffer. */
static void randk_indices(const sq_codec *c, const float *x, uint64_t n, const sq_rng_key *key,
                          uint64_t g, uint64_t *out)
{
    sq_qbuf q;
    ck_assert_int_eq(sq_qbuf_alloc(c, n, &q), SQ_OK);
    ck_assert_int_eq(sq_quantize(c, x, n, key, &q), SQ_OK);
    uint64_t w = ref_width(c->group), rest = n - g * c->group;
    uint64_t len = rest < c->group ? rest : c->group;
    uint64_t k = len < c->keep ? len : c->keep;
    for (uint64_t t = 0; t < k; t++) out[t] = get_le(q.codes + (g * c->keep + t) * w, w);
    sq_qbuf_free(&q);
}

START_TEST(test_randk_selection)
{
    const uint64_t n = 1000;
    sq_codec c = spec("kind=randk,group=64,keep=10");
    float *x = malloc(n * sizeof *x), *x2 = malloc(n * sizeof *x2);
    fill(x, n, 1);
    fill(x2, n, 2);
    sq_qbuf q, q2;
    ck_assert_int_eq(sq_qbuf_alloc(&c, n, &q), SQ_OK);
    ck_assert_int_eq(sq_qbuf_alloc(&c, n, &q2), SQ_OK);
    /* a key is required, as for stochastic rounding */
    ck_assert_int_eq(sq_quantize(&c, x, n, NULL, &q), SQ_ERR_ARG);
    /* distinct, ascending, inside the group, the last (40-element) group too */
    ck_assert_int_eq(sq_quantize(&c, x, n, &KEY, &q), SQ_OK);
    for (uint64_t g = 0; g < 16; g++)
        for (uint64_t t = 0; t < 10; t++) {
            uint64_t j = q.codes[g * 10 + t];
            ck_assert_uint_lt(j, g == 15 ? 40 : 64);
            if (t) ck_assert_uint_gt(j, q.codes[g * 10 + t - 1]);
        }
    /* the same key, the same bytes; other values, the same indices */
    ck_assert_int_eq(sq_quantize(&c, x, n, &KEY, &q2), SQ_OK);
    ck_assert_mem_eq(q.codes, q2.codes, sq_codec_code_bytes(&c, n));
    ck_assert_int_eq(sq_quantize(&c, x2, n, &KEY, &q2), SQ_OK);
    ck_assert_mem_eq(q.codes, q2.codes, sq_codec_code_bytes(&c, n));
    /* any field of the key changes them */
    for (int f = 0; f < 4; f++) {
        sq_rng_key k2 = KEY;
        if (f == 0) k2.seed++;
        if (f == 1) k2.step++;
        if (f == 2) k2.worker++;
        if (f == 3) k2.site = SQ_SITE_GRAD_INTRA;
        ck_assert_int_eq(sq_quantize(&c, x, n, &k2, &q2), SQ_OK);
        ck_assert_msg(memcmp(q.codes, q2.codes, sq_codec_code_bytes(&c, n)) != 0,
                      "key field %d changes nothing", f);
    }
    /* group g's choice depends on the key and g only: a shorter buffer
    ** chooses the same for the groups it has */
    uint64_t a[10], b[10];
    for (uint64_t g = 0; g < 5; g++) {
        randk_indices(&c, x, n, &KEY, g, a);
        randk_indices(&c, x2, 320, &KEY, g, b);
        ck_assert_mem_eq(a, b, sizeof a);
    }
    sq_qbuf_free(&q);
    sq_qbuf_free(&q2);
    free(x), free(x2);
}
END_TEST

/* Uniform subsets: the 15 pairs of a 6-element group over 15000 seeds
** (multinomial chi-square, 14 degrees of freedom), and each index of a
** 16-element group keeping 4 over 4000 seeds (sampling without
** replacement: sum (o - E)^2 / E (L - 1) / (L - k) is chi-square with L - 1
** degrees of freedom). Each fails if its p-value is below 1e-6. */
START_TEST(test_randk_uniform)
{
    float x[16];
    fill(x, 16, 3);
    sq_codec c6 = spec("kind=randk,group=6,keep=2"), c16 = spec("kind=randk,group=16,keep=4");
    sq_qbuf q;
    ck_assert_int_eq(sq_qbuf_alloc(&c16, 16, &q), SQ_OK);
    double pairs[6][6] = {{0}};
    const int S6 = 15000;
    for (int s = 0; s < S6; s++) {
        sq_rng_key k = {(uint64_t)s * 2654435761u, 1, 2, 3};
        ck_assert_int_eq(sq_quantize(&c6, x, 6, &k, &q), SQ_OK);
        pairs[q.codes[0]][q.codes[1]] += 1;
    }
    double chi = 0, e = S6 / 15.0;
    for (int i = 0; i < 6; i++)
        for (int j = i + 1; j < 6; j++) chi += (pairs[i][j] - e) * (pairs[i][j] - e) / e;
    double p = gsl_cdf_chisq_Q(chi, 14);
    ck_assert_msg(p > 1e-6, "pairs of 6: chi2 = %g, p = %g", chi, p);

    double hits[16] = {0};
    const int S16 = 4000;
    for (int s = 0; s < S16; s++) {
        sq_rng_key k = {7, (uint32_t)s, 0, SQ_SITE_GRAD_SINGLE};
        ck_assert_int_eq(sq_quantize(&c16, x, 16, &k, &q), SQ_OK);
        for (int t = 0; t < 4; t++) hits[q.codes[t]] += 1;
    }
    chi = 0, e = S16 * 4 / 16.0;
    for (int i = 0; i < 16; i++) chi += (hits[i] - e) * (hits[i] - e) / e;
    chi *= 15.0 / 12.0;
    p = gsl_cdf_chisq_Q(chi, 15);
    ck_assert_msg(p > 1e-6, "indices of 16: chi2 = %g, p = %g", chi, p);
    sq_qbuf_free(&q);
}
END_TEST

/* Decoded random-k is the kept values, unscaled: biased by keep / group,
** which error feedback compensates. */
START_TEST(test_randk_unscaled)
{
    const uint64_t n = 64;
    float x[64], y[64];
    for (uint64_t i = 0; i < n; i++) x[i] = 1.0f;
    sq_codec c = spec("kind=randk,group=64,keep=16");
    sq_qbuf q;
    ck_assert_int_eq(sq_qbuf_alloc(&c, n, &q), SQ_OK);
    ck_assert_int_eq(sq_quantize(&c, x, n, &KEY, &q), SQ_OK);
    ck_assert_int_eq(sq_dequantize(&c, &q, n, y), SQ_OK);
    double sum = 0;
    for (uint64_t i = 0; i < n; i++) {
        ck_assert(y[i] == 0.0f || y[i] == 1.0f);
        sum += y[i];
    }
    ck_assert(sum == 16.0);
    sq_qbuf_free(&q);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Sizes                                                                    */
/* ------------------------------------------------------------------------ */

START_TEST(test_sizes_closed_forms)
{
    static const uint64_t groups[] = {1, 2, 8, 100, 256, 257, 4096, 65536, 65537, 1ull << 40};
    static const uint64_t ns[] = {0, 1, 9, 1000, 65536, 1000003, 1ull << 41};
    for (size_t g = 0; g < sizeof groups / sizeof *groups; g++)
        for (int sc = 0; sc < 3; sc++) {
            uint64_t G = groups[g], keeps[3] = {1, (G + 1) / 2, G};
            for (int k = 0; k < 3; k++)
                for (int kind = 0; kind < 2; kind++) {
                    sq_codec c = sq_codec_default();
                    c.kind = kind ? SQ_KIND_RANDK : SQ_KIND_TOPK;
                    c.group = G;
                    c.keep = keeps[k];
                    c.scale = (sq_scale_dtype)sc;
                    ck_assert_int_eq(sq_codec_validate(&c), SQ_OK);
                    uint64_t w = ref_width(G), v = ref_vsize(c.scale);
                    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
                        uint64_t n = ns[i], kept = ref_kept(n, G, c.keep);
                        ck_assert_uint_eq(sq_codec_code_bytes(&c, n), kept * w);
                        ck_assert_uint_eq(sq_codec_scale_bytes(&c, n), kept * v);
                        ck_assert_uint_eq(sq_codec_offset_bytes(&c, n), 0);
                        ck_assert_uint_eq(sq_codec_bytes(&c, n), kept * (w + v));
                        ck_assert_uint_eq(sq_codec_groups(&c, n), (n + G - 1) / G);
                        /* whole groups: keep (index bits + value bits) / group */
                        if (n && n % G == 0)
                            ck_assert(sq_codec_bits_per_element(&c, n) ==
                                      (double)(c.keep * 8 * (w + v)) / (double)G);
                    }
                }
        }
    /* the casts: two bytes an element, no scales */
    for (int f = 0; f < 2; f++) {
        sq_codec c = spec(f ? "kind=fp16" : "kind=bf16");
        for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
            ck_assert_uint_eq(sq_codec_code_bytes(&c, ns[i]), 2 * ns[i]);
            ck_assert_uint_eq(sq_codec_scale_bytes(&c, ns[i]), 0);
            ck_assert_uint_eq(sq_codec_offset_bytes(&c, ns[i]), 0);
            ck_assert_uint_eq(sq_codec_groups(&c, ns[i]), ns[i]);
        }
        ck_assert(sq_codec_bits_per_element(&c, 12345) == 16.0);
    }
}
END_TEST

/* The sizes of a prefix of whole groups are the offsets of the groups that
** follow: quantizing the rest on its own writes the same bytes there. */
START_TEST(test_prefix_offsets)
{
    const uint64_t n = 5000;
    float *x = malloc(n * sizeof *x);
    fill(x, n, 21);
    static const char *const specs[] = {"kind=topk,group=64,keep=5",
                                        "kind=topk,group=300,keep=17,scale=fp16",
                                        "kind=fp16", "kind=bf16"};
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
        sq_codec c = spec(specs[s]);
        sq_qbuf all, tail;
        ck_assert_int_eq(sq_qbuf_alloc(&c, n, &all), SQ_OK);
        ck_assert_int_eq(sq_quantize(&c, x, n, NULL, &all), SQ_OK);
        uint64_t G = c.kind == SQ_KIND_TOPK ? c.group : 1;
        for (uint64_t e = 0; e < n; e += 7 * G) {
            ck_assert_int_eq(sq_qbuf_alloc(&c, n - e, &tail), SQ_OK);
            ck_assert_int_eq(sq_quantize(&c, x + e, n - e, NULL, &tail), SQ_OK);
            ck_assert_mem_eq(all.codes + sq_codec_code_bytes(&c, e), tail.codes,
                             sq_codec_code_bytes(&c, n - e));
            ck_assert_mem_eq((char *)all.scales + sq_codec_scale_bytes(&c, e), tail.scales,
                             sq_codec_scale_bytes(&c, n - e));
            ck_assert_uint_eq(sq_codec_code_bytes(&c, e) + sq_codec_code_bytes(&c, n - e),
                              sq_codec_code_bytes(&c, n));
            sq_qbuf_free(&tail);
        }
        sq_qbuf_free(&all);
    }
    free(x);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The casts                                                                */
/* ------------------------------------------------------------------------ */

START_TEST(test_casts)
{
    const uint64_t n = 70001;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    fill(x, n, 31);
    /* the edges: zeros, fp16 subnormals and their rounding, the largest
    ** values of fp16, ties of both dtypes */
    const float edge[] = {0.0f, -0.0f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-26f, -0x1p-14f,
                          65504.0f, -65519.0f, 65519.99f * 0.5f, 1.0f + 0x1p-11f,
                          1.0f + 0x1p-8f, 1.0f + 0x3p-8f, 3e38f, -1e-40f};
    const size_t ne = sizeof edge / sizeof *edge;
    for (size_t i = 0; i < ne; i++) x[100 + i] = edge[i];
    for (int f = 0; f < 2; f++) {
        sq_codec c = spec(f ? "kind=fp16" : "kind=bf16");
        if (f) x[100 + 13] = 1.0f; /* 3e38 is past fp16 */
        sq_qbuf q;
        ck_assert_int_eq(sq_qbuf_alloc(&c, n, &q), SQ_OK);
        ck_assert_int_eq(sq_quantize(&c, x, n, NULL, &q), SQ_OK);
        ck_assert_int_eq(sq_dequantize(&c, &q, n, y), SQ_OK);
        for (uint64_t i = 0; i < n; i++) {
            uint16_t want = f ? sq_f32_to_f16(x[i]) : sq_f32_to_bf16(x[i]);
            uint16_t got = (uint16_t)get_le(q.codes + 2 * i, 2);
            float back = f ? sq_f16_to_f32(want) : sq_bf16_to_f32(want);
            SQT_CHECK(got == want, "%s element %llu (%a): code %04x, want %04x",
                      f ? "fp16" : "bf16", (unsigned long long)i, (double)x[i], got, want);
            SQT_CHECK(sqt_bits(y[i]) == sqt_bits(back), "element %llu: decoded %a, want %a",
                      (unsigned long long)i, (double)y[i], (double)back);
        }
        /* scales may be NULL: a cast has none */
        sq_qbuf noscales = {q.codes, NULL, NULL};
        ck_assert_int_eq(sq_quantize(&c, x, n, NULL, &noscales), SQ_OK);
        ck_assert_int_eq(sq_dequantize(&c, &noscales, n, y), SQ_OK);
        sq_qbuf_free(&q);
    }
    free(x), free(y);
}
END_TEST

/* Past fp16's range: a range error, never an Inf; NaN and Inf refused. */
START_TEST(test_cast_refusals)
{
    float x[4] = {1.0f, 2.0f, 65519.0f, -3.0f}, y[4];
    sq_codec f = spec("kind=fp16"), b = spec("kind=bf16");
    sq_qbuf q;
    ck_assert_int_eq(sq_qbuf_alloc(&f, 4, &q), SQ_OK);
    ck_assert_int_eq(sq_quantize(&f, x, 4, NULL, &q), SQ_OK);
    ck_assert_uint_eq(get_le(q.codes + 4, 2), 0x7bffu); /* 65504 */
    x[2] = 65520.0f;
    ck_assert_int_eq(sq_quantize(&f, x, 4, NULL, &q), SQ_ERR_RANGE);
    x[2] = -1e6f;
    ck_assert_int_eq(sq_quantize(&f, x, 4, NULL, &q), SQ_ERR_RANGE);
    ck_assert_int_eq(sq_quantize(&b, x, 4, NULL, &q), SQ_OK);
    x[2] = 3.4028234663852886e38f; /* rounds past bf16's largest */
    ck_assert_int_eq(sq_quantize(&b, x, 4, NULL, &q), SQ_ERR_RANGE);
    x[2] = NAN;
    ck_assert_int_eq(sq_quantize(&f, x, 4, NULL, &q), SQ_ERR_NONFINITE);
    x[2] = -INFINITY;
    ck_assert_int_eq(sq_quantize(&b, x, 4, NULL, &q), SQ_ERR_NONFINITE);
    /* a damaged code that decodes to Inf */
    x[2] = 1.0f;
    ck_assert_int_eq(sq_quantize(&f, x, 4, NULL, &q), SQ_OK);
    put_le(q.codes + 2, 0x7c00u, 2);
    ck_assert_int_eq(sq_dequantize(&f, &q, 4, y), SQ_ERR_RANGE);
    /* the fp16 arithmetic of qgZ is for the quantizing kinds */
    ck_assert_int_eq(sq_dequant_sum_f16(&f, &q, 1, 4, y), SQ_ERR_SPEC);
    sq_qbuf_free(&q);
    /* sparse values past fp16 */
    sq_codec t = spec("kind=topk,group=4,keep=1,scale=fp16");
    ck_assert_int_eq(sq_qbuf_alloc(&t, 4, &q), SQ_OK);
    x[2] = 1e5f;
    ck_assert_int_eq(sq_quantize(&t, x, 4, NULL, &q), SQ_ERR_RANGE);
    x[2] = NAN;
    ck_assert_int_eq(sq_quantize(&t, x, 4, NULL, &q), SQ_ERR_NONFINITE);
    /* an index past its group (a damaged buffer) writes nothing outside it */
    x[2] = 5.0f;
    ck_assert_int_eq(sq_quantize(&t, x, 4, NULL, &q), SQ_OK);
    q.codes[0] = 9;
    ck_assert_int_eq(sq_dequantize(&t, &q, 4, y), SQ_ERR_RANGE);
    sq_qbuf_free(&q);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Sums                                                                     */
/* ------------------------------------------------------------------------ */

/* Each chunk decoded to fp32 and summed in chunk order; requantization
** selects again on the sum. */
START_TEST(test_sums)
{
    const uint64_t n = 3001;
    const int k = 3;
    static const char *const specs[][2] = {
        {"kind=topk,group=100,keep=7", "kind=topk,group=100,keep=7"},
        {"kind=randk,group=64,keep=20,scale=bf16", "kind=topk,group=500,keep=3"},
        {"kind=fp16", "kind=bf16"},
        {"bits=4,group=128,round=rtn", "kind=topk,group=128,keep=9"},
        {"kind=topk,group=64,keep=2", "bits=8,group=64,round=rtn"},
    };
    float *x = malloc(n * sizeof *x), *want = malloc(n * sizeof *want);
    float *got = malloc(n * sizeof *got), *d = malloc(n * sizeof *d);
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
        sq_codec ci = spec(specs[s][0]), co = spec(specs[s][1]);
        sq_qbuf ch[3], out, ref;
        for (int i = 0; i < k; i++) {
            fill(x, n, 40 + (uint64_t)i);
            sq_rng_key key = KEY;
            key.worker = (uint32_t)i;
            ck_assert_int_eq(sq_qbuf_alloc(&ci, n, &ch[i]), SQ_OK);
            ck_assert_int_eq(sq_quantize(&ci, x, n, &key, &ch[i]), SQ_OK);
            ck_assert_int_eq(sq_dequantize(&ci, &ch[i], n, d), SQ_OK);
            for (uint64_t j = 0; j < n; j++) want[j] = i ? want[j] + d[j] : d[j];
        }
        ck_assert_int_eq(sq_dequant_sum(&ci, ch, k, n, got), SQ_OK);
        SQT_ASSERT_BYTES(got, want, n * sizeof *got, specs[s][0]);
        ck_assert_int_eq(sq_qbuf_alloc(&co, n, &out), SQ_OK);
        ck_assert_int_eq(sq_qbuf_alloc(&co, n, &ref), SQ_OK);
        ck_assert_int_eq(sq_dequant_sum_requant(&ci, ch, k, n, &co, &KEY, &out), SQ_OK);
        ck_assert_int_eq(sq_quantize(&co, want, n, &KEY, &ref), SQ_OK);
        SQT_ASSERT_BYTES(out.codes, ref.codes, sq_codec_code_bytes(&co, n), specs[s][1]);
        SQT_ASSERT_BYTES(out.scales, ref.scales, sq_codec_scale_bytes(&co, n), specs[s][1]);
        /* qgZ's fp16 sums refuse these kinds */
        ck_assert_int_eq(sq_dequant_sum_requant_f16(&ci, ch, k, n, &co, &KEY, &out),
                         SQ_ERR_SPEC);
        for (int i = 0; i < k; i++) sq_qbuf_free(&ch[i]);
        sq_qbuf_free(&out);
        sq_qbuf_free(&ref);
    }
    free(x), free(want), free(got), free(d);
}
END_TEST

/* The bytes do not depend on the thread count. */
START_TEST(test_threads)
{
    const uint64_t n = 300007;
    float *x = malloc(n * sizeof *x);
    fill(x, n, 77);
    static const char *const specs[] = {"kind=topk,group=1000,keep=10,hadamard=8",
                                        "kind=randk,group=4096,keep=100", "kind=fp16"};
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
        sq_codec c = spec(specs[s]);
        sq_qbuf a, b;
        ck_assert_int_eq(sq_qbuf_alloc(&c, n, &a), SQ_OK);
        ck_assert_int_eq(sq_qbuf_alloc(&c, n, &b), SQ_OK);
        sq_set_threads(1);
        ck_assert_int_eq(sq_quantize(&c, x, n, &KEY, &a), SQ_OK);
        sq_set_threads(4);
        ck_assert_int_eq(sq_quantize(&c, x, n, &KEY, &b), SQ_OK);
        sq_set_threads(0);
        ck_assert_mem_eq(a.codes, b.codes, sq_codec_code_bytes(&c, n));
        ck_assert_mem_eq(a.scales, b.scales, sq_codec_scale_bytes(&c, n));
        sq_qbuf_free(&a);
        sq_qbuf_free(&b);
    }
    free(x);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Specs                                                                    */
/* ------------------------------------------------------------------------ */

static void format_is(const char *text, const char *want)
{
    sq_codec c = spec(text);
    char buf[SQ_CODEC_STRLEN];
    int n = sq_codec_format(&c, buf, sizeof buf);
    ck_assert_str_eq(buf, want);
    ck_assert_int_eq(n, (int)strlen(want));
    sq_codec back = spec(buf); /* the canonical text parses to itself */
    char again[SQ_CODEC_STRLEN];
    sq_codec_format(&back, again, sizeof again);
    ck_assert_str_eq(again, want);
}

static void refused(const char *text, const char *words)
{
    sq_codec c;
    char err[256] = "";
    ck_assert_int_eq(sq_codec_parse(text, &c, err, sizeof err), SQ_ERR_SPEC);
    ck_assert_msg(strstr(err, words) != NULL, "%s: '%s' lacks '%s'", text, err, words);
}

START_TEST(test_spec)
{
    format_is("kind=topk,keep=8", "kind=topk,bits=8,group=128,round=rtn,hadamard=0,"
                                  "levels=sdp4bit,scale=fp32,keep=8");
    format_is("keep=3,kind=randk,group=1000,scale=bf16,bits=16",
              "kind=randk,bits=16,group=1000,round=sr,hadamard=0,levels=sdp4bit,scale=bf16,keep=3");
    format_is("kind=topk,group=65537,keep=65537,hadamard=1024",
              "kind=topk,bits=32,group=65537,round=rtn,hadamard=1024,levels=sdp4bit,scale=fp32,"
              "keep=65537");
    format_is("kind=fp16", "kind=fp16,bits=16,group=1,round=rtn,hadamard=0,levels=sdp4bit,"
                           "scale=fp32");
    format_is("kind=bf16,bits=16,round=rtn,group=1", "kind=bf16,bits=16,group=1,round=rtn,"
                                                      "hadamard=0,levels=sdp4bit,scale=fp32");
    /* the existing kinds print as they always did */
    format_is("", "kind=sym,bits=4,group=128,round=sr,hadamard=0,levels=sdp4bit,scale=fp32");
    refused("kind=topk", "needs keep=");
    refused("kind=topk,keep=0", "keep=0");
    refused("kind=topk,keep=9,group=8", "keep=9");
    refused("kind=randk,keep=1,round=rtn", "round=rtn");
    refused("kind=topk,keep=1,round=sr", "round=sr");
    refused("kind=topk,keep=1,bits=4", "bits=4");
    refused("kind=topk,keep=1,group=300,bits=8", "indices of 16 bits");
    refused("kind=topk,keep=1,levels=deepspeed", "levels=deepspeed");
    refused("kind=fp16,group=128", "group=128");
    refused("kind=fp16,scale=bf16", "no scales");
    refused("kind=fp16,keep=2", "keep=2");
    refused("kind=bf16,bits=8", "16-bit codes");
    refused("kind=fp16,hadamard=32", "hadamard=32");
    refused("kind=sym,keep=4", "topk and kind=randk only");
    refused("bits=16", "bits=16");
    refused("kind=qsgd,keep=4", "topk and kind=randk only");
    refused("kind=nope", "topk, randk, bf16, fp16");
    /* the struct form: fields a kind ignores are ignored, keep checked */
    sq_codec c = sq_codec_default();
    c.kind = SQ_KIND_TOPK;
    ck_assert_int_eq(sq_codec_validate(&c), SQ_ERR_SPEC); /* keep 0 */
    c.keep = 4;
    c.bits = 3;
    c.round = SQ_ROUND_SR;
    ck_assert_int_eq(sq_codec_validate(&c), SQ_OK);
    char buf[SQ_CODEC_STRLEN];
    sq_codec_format(&c, buf, sizeof buf);
    ck_assert_str_eq(buf, "kind=topk,bits=8,group=128,round=rtn,hadamard=0,levels=sdp4bit,"
                          "scale=fp32,keep=4");
    /* ... and so quantize: topk needs no key even with round=sr stored */
    float x[128] = {0}, y[128];
    x[5] = 1;
    sq_qbuf q;
    ck_assert_int_eq(sq_qbuf_alloc(&c, 128, &q), SQ_OK);
    ck_assert_int_eq(sq_quantize(&c, x, 128, NULL, &q), SQ_OK);
    ck_assert_int_eq(sq_dequantize(&c, &q, 128, y), SQ_OK);
    ck_assert(y[5] == 1.0f);
    sq_qbuf_free(&q);
    c = sq_codec_default();
    c.kind = SQ_KIND_FP16;
    c.group = 77; /* ignored */
    ck_assert_int_eq(sq_codec_validate(&c), SQ_OK);
    ck_assert_uint_eq(sq_codec_code_bytes(&c, 10), 20);
    /* truncation: the length it would need */
    c = spec("kind=randk,keep=3");
    char small[8];
    ck_assert_int_eq(sq_codec_format(&c, small, sizeof small),
                     (int)strlen("kind=randk,bits=8,group=128,round=sr,hadamard=0,"
                                 "levels=sdp4bit,scale=fp32,keep=3"));
    ck_assert_str_eq(small, "kind=ra");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Schemes and the world                                                    */
/* ------------------------------------------------------------------------ */

static sq_scheme scheme(const char *preset, const char *const *sets)
{
    sq_scheme s;
    sq_error err = {0};
    ck_assert_int_eq(sq_scheme_preset(preset, &s, &err), SQ_OK);
    for (int i = 0; sets && sets[i]; i++)
        ck_assert_msg(sq_scheme_set(&s, sets[i], &err) == SQ_OK, "%s: %s", sets[i], err.msg);
    return s;
}

static void invalid(const char *preset, const char *const *sets, const char *words)
{
    sq_scheme s = scheme(preset, sets);
    sq_error err = {0};
    ck_assert_int_eq(sq_scheme_validate(&s, &err), SQ_ERR_SPEC);
    ck_assert_msg(strstr(err.msg, words) != NULL, "'%s' lacks '%s'", err.msg, words);
}

START_TEST(test_scheme_knobs)
{
    const char *topk[] = {"grad.kind=topk", "grad.keep=8", "grad.group=256", NULL};
    sq_scheme s = scheme("ulq", topk);
    sq_error err = {0};
    ck_assert_int_eq(sq_scheme_validate(&s, &err), SQ_OK);
    ck_assert(!sq_wire_raw(&s.grad_intra));
    char text[SQ_SCHEME_STRLEN], v[64];
    sq_scheme_format(&s, text, sizeof text);
    ck_assert_ptr_nonnull(strstr(text, "grad.intra.bits=8,grad.intra.kind=topk,"
                                       "grad.intra.group=256,grad.intra.round=rtn,"
                                       "grad.intra.hadamard=0,grad.intra.levels=sdp4bit,"
                                       "grad.intra.scale=fp32,grad.intra.keep=8,"
                                       "grad.inter.bits=8"));
    ck_assert_ptr_null(strstr(text, "weight.keep")); /* printed for topk/randk wires only */
    sq_scheme_get(&s, "weight.keep", v, sizeof v);
    ck_assert_str_eq(v, "0");
    /* the text, applied onto another preset, gives the same scheme text */
    sq_scheme b = scheme("baseline", NULL);
    char work[SQ_SCHEME_STRLEN], *save = NULL;
    memcpy(work, text, sizeof work);
    for (char *item = strtok_r(work, ",", &save); item; item = strtok_r(NULL, ",", &save))
        ck_assert_msg(sq_scheme_set(&b, item, &err) == SQ_OK, "%s: %s", item, err.msg);
    char again[SQ_SCHEME_STRLEN];
    sq_scheme_format(&b, again, sizeof again);
    ck_assert_str_eq(again, text);
    /* the kind wins over the bits knob, in either order */
    const char *order1[] = {"grad.bits=32", "grad.kind=fp16", NULL};
    const char *order2[] = {"grad.kind=fp16", "grad.bits=4", NULL};
    sq_scheme f1 = scheme("ulq", order1), f2 = scheme("ulq", order2);
    ck_assert(!sq_wire_raw(&f1.grad_inter) && !sq_wire_raw(&f2.grad_inter));
    char t1[SQ_SCHEME_STRLEN], t2[SQ_SCHEME_STRLEN];
    sq_scheme_format(&f1, t1, sizeof t1);
    sq_scheme_format(&f2, t2, sizeof t2);
    ck_assert_str_eq(t1, t2);
    ck_assert_ptr_nonnull(strstr(t1, "grad.inter.bits=16,grad.inter.kind=fp16,grad.inter.group=1,"
                                     "grad.inter.round=rtn"));
    /* the bf16 wire has one spelling */
    sq_scheme r = scheme("ulq", NULL);
    ck_assert_int_eq(sq_scheme_set(&r, "grad.kind=bf16", &err), SQ_ERR_SPEC);
    ck_assert_ptr_nonnull(strstr(err.msg, "grad.bits=16"));
    /* where these wires cannot go */
    const char *ring[] = {"grad.kind=topk", "grad.keep=4", NULL};
    invalid("baseline", ring, "a topk, randk or fp16 wire needs grad.mode=a2a or twolevel");
    const char *nokeep[] = {"grad.kind=randk", NULL};
    invalid("ulq", nokeep, "keep=0");
    const char *big[] = {"grad.kind=topk", "grad.keep=200", NULL};
    invalid("ulq", big, "keep=200");
    const char *f16[] = {"grad.kind=topk", "grad.keep=4", NULL};
    invalid("qgz", f16, "qgz");
    const char *hcast[] = {"grad.kind=fp16", NULL};
    invalid("tlqhs", hcast, "hadamard=32");
}
END_TEST

static sq_world *world(int K, int G, const char *preset, const char *const *sets, uint64_t n,
                       int dry)
{
    sq_world_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.topo.nodes = K;
    cfg.topo.per_node = G;
    cfg.scheme = scheme(preset, sets);
    cfg.elements = n;
    cfg.seed = 5;
    cfg.dry = dry;
    sq_world *w = NULL;
    sq_error err = {0};
    ck_assert_msg(sq_world_open(&cfg, &w, &err) == SQ_OK, "%s", err.msg);
    return w;
}

/* The bytes the gradient reduce-scatter sends, per worker and link: the
** closed forms of the wire's sizes (intra: G - 1 chunks of P / G; inter:
** K - 1 chunks of P / N; a2a: N - 1 chunks of P / N). */
static void check_traffic(const char *const *sets, const char *preset, int K, int G, uint64_t n,
                          uint64_t group, uint64_t keep, uint64_t w, uint64_t v)
{
    const int N = K * G;
    sq_world *d = world(K, G, preset, sets, n, 1);
    ck_assert_int_eq(sq_world_reduce_grads(d, 1), SQ_OK);
    const uint64_t P = sq_world_padded(d);
    ck_assert_uint_eq(P % ((uint64_t)N * group), 0);
    const sq_grad_mode path = sq_world_grad_path(d);
    for (int r = 0; r < N; r++) {
        const sq_traffic *t = sq_world_traffic(d, r);
        uint64_t codes = 0, meta = 0, elems = 0;
        for (int l = 0; l < SQ_NLINK; l++) {
            codes += t->t[SQ_COLL_GRAD][l].sent_codes;
            meta += t->t[SQ_COLL_GRAD][l].sent_meta;
            elems += t->t[SQ_COLL_GRAD][l].sent_elems;
        }
        const uint64_t intra = (uint64_t)(G - 1) * (P / (uint64_t)G);
        uint64_t m = path == SQ_GRAD_TWOLEVEL ? intra + (uint64_t)(K - 1) * (P / (uint64_t)N)
                                              : (uint64_t)(N - 1) * (P / (uint64_t)N);
        ck_assert_uint_eq(elems, m);
        ck_assert_uint_eq(codes, m / group * keep * w);
        ck_assert_uint_eq(meta, m / group * keep * v);
        if (path == SQ_GRAD_TWOLEVEL) {
            const sq_link_traffic *gi = &t->t[SQ_COLL_GRAD][SQ_LINK_INTRA];
            ck_assert_uint_eq(gi->sent_codes, intra / group * keep * w);
        }
    }
    /* a world that moves data counts the same */
    sq_world *x = world(K, G, preset, sets, n, 0);
    float *g = malloc(n * sizeof *g);
    for (int r = 0; r < N; r++) {
        fill(g, n, 100 + (uint64_t)r);
        ck_assert_int_eq(sq_world_put_grad(x, r, g), SQ_OK);
    }
    ck_assert_msg(sq_world_reduce_grads(x, 1) == SQ_OK, "%s", sq_world_error(x));
    for (int r = 0; r < N; r++)
        ck_assert(memcmp(sq_world_traffic(d, r), sq_world_traffic(x, r), sizeof(sq_traffic)) == 0);
    free(g);
    sq_world_close(d);
    sq_world_close(x);
}

START_TEST(test_world_traffic)
{
    const char *a2a_topk[] = {"grad.mode=a2a", "grad.kind=topk", "grad.keep=5", "grad.group=300",
                              NULL};
    check_traffic(a2a_topk, "ulq", 2, 4, 100003, 300, 5, 2, 4);
    check_traffic(a2a_topk, "ulq", 3, 1, 9001, 300, 5, 2, 4);
    const char *two_randk[] = {"grad.kind=randk", "grad.keep=3", "grad.group=64",
                               "grad.scale=bf16", NULL};
    check_traffic(two_randk, "ulq", 2, 4, 50001, 64, 3, 1, 2);
    check_traffic(two_randk, "ulq", 4, 2, 777, 64, 3, 1, 2);
    const char *cast[] = {"grad.kind=fp16", NULL};
    check_traffic(cast, "ulq", 2, 2, 10001, 1, 1, 2, 0);
    check_traffic(cast, "qsdp", 2, 3, 10001, 1, 1, 2, 0);
}
END_TEST

/* The a2a sum of top-k chunks, against the reference: each worker's
** gradient (divided by N) selected per group of its whole buffer, decoded,
** and summed in worker order. */
START_TEST(test_world_a2a_reference)
{
    const int K = 2, G = 2, N = 4;
    const uint64_t n = 5003;
    for (int kind = 0; kind < 2; kind++) {
        const char *sets[] = {"grad.mode=a2a", kind ? "grad.kind=randk" : "grad.kind=topk",
                              "grad.keep=4", "grad.group=32", NULL};
        sq_world *w = world(K, G, "ulq", sets, n, 0);
        const sq_codec *c = &sq_world_single_wire(w)->codec;
        const uint64_t P = sq_world_padded(w), S = sq_world_shard(w);
        float *x = malloc(n * sizeof *x), *y = calloc(P, sizeof *y);
        float *want = calloc(P, sizeof *want), *got = malloc(S * sizeof *got);
        for (int r = 0; r < N; r++) {
            fill(x, n, 300 + (uint64_t)r);
            ck_assert_int_eq(sq_world_put_grad(w, r, x), SQ_OK);
            for (uint64_t i = 0; i < n; i++) y[i] = x[i] / (float)N;
            sq_rng_key key = {5, 9, (uint32_t)r, SQ_SITE_GRAD_SINGLE};
            ref_out ro;
            ref_sparse(c, y, P, &key, &ro);
            for (uint64_t i = 0; i < P; i++) want[i] = r ? want[i] + ro.dec[i] : ro.dec[i];
            ref_free(&ro);
        }
        ck_assert_msg(sq_world_reduce_grads(w, 9) == SQ_OK, "%s", sq_world_error(w));
        for (int r = 0; r < N; r++) {
            ck_assert_int_eq(sq_world_get_grad_shard(w, r, got), SQ_OK);
            SQT_ASSERT_BYTES(got, want + (size_t)r * S, S * sizeof *got, kind ? "randk" : "topk");
        }
        free(x), free(y), free(want), free(got);
        sq_world_close(w);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("compress_sparse");
    TCase *tr = tcase_create("reference");
    tcase_add_test(tr, test_topk_reference);
    tcase_add_test(tr, test_randk_reference);
    tcase_add_test(tr, test_index_widths);
    tcase_add_test(tr, test_topk_ties);
    tcase_add_test(tr, test_hadamard);
    suite_add_tcase(s, tr);
    TCase *tk = tcase_create("randk");
    tcase_add_test(tk, test_randk_selection);
    tcase_add_test(tk, test_randk_uniform);
    tcase_add_test(tk, test_randk_unscaled);
    suite_add_tcase(s, tk);
    TCase *tz = tcase_create("sizes");
    tcase_add_test(tz, test_sizes_closed_forms);
    tcase_add_test(tz, test_prefix_offsets);
    suite_add_tcase(s, tz);
    TCase *tc = tcase_create("casts");
    tcase_add_test(tc, test_casts);
    tcase_add_test(tc, test_cast_refusals);
    suite_add_tcase(s, tc);
    TCase *to = tcase_create("operations");
    tcase_add_test(to, test_sums);
    tcase_add_test(to, test_threads);
    tcase_add_test(to, test_spec);
    suite_add_tcase(s, to);
    TCase *tw = tcase_create("world");
    tcase_add_test(tw, test_scheme_knobs);
    tcase_add_test(tw, test_world_traffic);
    tcase_add_test(tw, test_world_a2a_reference);
    suite_add_tcase(s, tw);
    return sqt_run(s);
}
