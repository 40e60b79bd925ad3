/*
** codec_sparse.c -- top-k and random-k sparsification (kind=topk, randk):
** their spec rules, exact sizes, and what one tile of codec.c becomes.
**
** Each group of `group` elements keeps k = min(keep, its length) of them.
** The codes array holds their indices within the group (little-endian, 1, 2
** or 4 bytes each, sq_sparse_index_bytes), the scales array their values in
** the scale dtype, both in ascending index order, group after group. Every
** group but the last is whole, so group g's data start at slot g * keep of
** both arrays: the byte offsets are closed forms, which is what lets the
** world address a region of a packed buffer (sq_wire_at).
**
** topk keeps the k largest |x|, ties to the lower index. randk keeps k
** indices drawn uniformly without replacement by a partial Fisher-Yates
** shuffle driven by Philox (sq_uniform24, docs/conventions.md) and sends
** the values unscaled, as GRACE's RandomK does.
*/
#include "shardq/codec.h"
#include "sq_hd.h"
#include "sq_sparse.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Spec rules                                                               */
/* ------------------------------------------------------------------------ */

sq_codec sq_sparse_canonical(const sq_codec *c)
{
    sq_codec k = *c;
    if (sq_kind_sparse(c->kind)) {
        k.bits = 8 * (int)sq_sparse_index_bytes(c->group);
        k.round = c->kind == SQ_KIND_RANDK ? SQ_ROUND_SR : SQ_ROUND_RTN;
        k.levels = SQ_LEVELS_SDP4BIT;
    } else if (sq_kind_cast(c->kind)) {
        k.bits = 16;
        k.group = 1;
        k.round = SQ_ROUND_RTN;
        k.levels = SQ_LEVELS_SDP4BIT;
        k.scale = SQ_SCALE_FP32;
        k.keep = 0;
    }
    return k;
}

int sq_sparse_check(const sq_codec *c, sq_error *err)
{
    const char *name = sq_codec_kind_name(c->kind);
    if (c->hadamard != 0 && (c->hadamard < 2 || c->hadamard > SQ_HADAMARD_MAX ||
                             (c->hadamard & (c->hadamard - 1)) != 0))
        return sq_error_set(err, SQ_ERR_SPEC,
                            "hadamard=%d: must be 0 (off) or a power of two from 2 to 1024",
                            c->hadamard);
    if (sq_kind_cast(c->kind)) {
        if (c->hadamard)
            return sq_error_set(err, SQ_ERR_SPEC,
                                "hadamard=%d: kind=%s is a cast of each value, with no groups "
                                "for a transform to spread outliers over (hadamard=0)",
                                c->hadamard, name);
        return SQ_OK;
    }
    if (c->group < 1 || c->group > SQ_GROUP_MAX)
        return sq_error_set(err, SQ_ERR_SPEC, "group=%llu: must be 1 to 2^40",
                            (unsigned long long)c->group);
    if (c->keep < 1 || c->keep > c->group)
        return sq_error_set(err, SQ_ERR_SPEC,
                            "keep=%llu: kind=%s keeps 1 to group (%llu) elements of each group",
                            (unsigned long long)c->keep, name, (unsigned long long)c->group);
    if (c->scale != SQ_SCALE_FP32 && c->scale != SQ_SCALE_BF16 && c->scale != SQ_SCALE_FP16)
        return sq_error_set(err, SQ_ERR_SPEC, "scale: must be fp32, bf16 or fp16");
    return SQ_OK;
}

/* The parser's key order (spec.c KEYS). */
enum { K_KIND, K_BITS, K_GROUP, K_ROUND, K_HADAMARD, K_LEVELS, K_SCALE, K_KEEP };

static const char *const round_text[] = {"rtn", "sr"};
static const char *const levels_text[] = {"sdp4bit", "deepspeed"};
static const char *const scale_text[] = {"fp32", "bf16", "fp16"};

int sq_sparse_settle(sq_codec *c, unsigned given, sq_error *err)
{
    if (!sq_sparse_kind(c->kind)) {
        if (given & (1u << K_KEEP))
            return sq_error_set(err, SQ_ERR_SPEC,
                                "keep=%llu: applies to kind=topk and kind=randk only",
                                (unsigned long long)c->keep);
        return SQ_OK;
    }
    const char *name = sq_codec_kind_name(c->kind);
    const sq_codec k = sq_sparse_canonical(c);
    const int cast = sq_kind_cast(c->kind);
    if ((given & (1u << K_BITS)) && c->bits != k.bits) {
        if (cast)
            return sq_error_set(err, SQ_ERR_SPEC,
                                "bits=%d: kind=%s has 16-bit codes (leave bits out)", c->bits,
                                name);
        return sq_error_set(err, SQ_ERR_SPEC,
                            "bits=%d: kind=%s's codes are indices of %d bits for group=%llu "
                            "(leave bits out)",
                            c->bits, name, k.bits, (unsigned long long)c->group);
    }
    if ((given & (1u << K_ROUND)) && c->round != k.round)
        return sq_error_set(err, SQ_ERR_SPEC, "round=%s: kind=%s %s (leave round out)",
                            round_text[c->round & 1], name,
                            c->kind == SQ_KIND_RANDK ? "selects at random: round=sr"
                            : cast                   ? "rounds to nearest even: round=rtn"
                                                     : "selects deterministically: round=rtn");
    if ((given & (1u << K_LEVELS)) && c->levels != k.levels)
        return sq_error_set(err, SQ_ERR_SPEC, "levels=%s: applies to kind=sym only",
                            levels_text[c->levels & 1]);
    if (cast && (given & (1u << K_GROUP)) && c->group != 1)
        return sq_error_set(err, SQ_ERR_SPEC,
                            "group=%llu: kind=%s casts each value on its own (leave group out)",
                            (unsigned long long)c->group, name);
    if (cast && (given & (1u << K_SCALE)) && c->scale != SQ_SCALE_FP32)
        return sq_error_set(err, SQ_ERR_SPEC, "scale=%s: kind=%s has no scales (leave scale out)",
                            scale_text[c->scale % 3], name);
    if (cast && (given & (1u << K_KEEP)))
        return sq_error_set(err, SQ_ERR_SPEC, "keep=%llu: applies to kind=topk and kind=randk only",
                            (unsigned long long)c->keep);
    if (!cast && !(given & (1u << K_KEEP)))
        return sq_error_set(err, SQ_ERR_SPEC,
                            "kind=%s: needs keep= (elements kept per group, 1 to the group)", name);
    *c = k;
    return SQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Sizes                                                                    */
/* ------------------------------------------------------------------------ */

/* Elements kept of n: keep per whole group, min(keep, rest) of the last. */
static uint64_t kept(const sq_codec *c, uint64_t n)
{
    uint64_t rest = n % c->group;
    return n / c->group * c->keep + (rest < c->keep ? rest : c->keep);
}

static uint64_t value_bytes(const sq_codec *c)
{
    return c->scale == SQ_SCALE_FP32 ? 4 : 2;
}

uint64_t sq_sparse_groups(const sq_codec *c, uint64_t n)
{
    if (sq_kind_cast(c->kind)) return n;
    return n / c->group + (n % c->group != 0);
}

uint64_t sq_sparse_code_bytes(const sq_codec *c, uint64_t n)
{
    if (sq_kind_cast(c->kind)) return 2 * n;
    return kept(c, n) * sq_sparse_index_bytes(c->group);
}

uint64_t sq_sparse_scale_bytes(const sq_codec *c, uint64_t n)
{
    if (sq_kind_cast(c->kind)) return 0;
    return kept(c, n) * value_bytes(c);
}

/* ------------------------------------------------------------------------ */
/* Selection                                                                */
/* ------------------------------------------------------------------------ */

static int desc_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int asc_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

/* The k-th largest of a[0..len), 1 <= k <= len, reordering a: quickselect
** with median-of-three pivots and three-way partitions, finished by a sort
** once the range is small or after 2 log2(len) rounds (so the worst case
** stays O(len log len)). The value does not depend on how it is found. */
static uint32_t kth_largest(uint32_t *a, uint64_t len, uint64_t k)
{
    uint64_t lo = 0, hi = len, t = k - 1;
    int rounds = 0;
    for (uint64_t l = len; l > 1; l >>= 1) rounds += 2;
    while (hi - lo > 32 && rounds-- > 0) {
        uint32_t x = a[lo], y = a[lo + (hi - lo) / 2], z = a[hi - 1];
        uint32_t mn = x < y ? x : y, mx = x < y ? y : x;
        uint32_t p = z < mn ? mn : z > mx ? mx : z;
        /* descending: [lo, gt) above p, [gt, i) equal, [lt, hi) below */
        uint64_t gt = lo, i = lo, lt = hi;
        while (i < lt) {
            uint32_t v = a[i];
            if (v > p) {
                a[i++] = a[gt];
                a[gt++] = v;
            } else if (v < p) {
                a[i] = a[--lt];
                a[lt] = v;
            } else {
                i++;
            }
        }
        if (t < gt)
            hi = gt;
        else if (t >= lt)
            lo = lt;
        else
            return p;
    }
    qsort(a + lo, (size_t)(hi - lo), sizeof *a, desc_u32);
    return a[t];
}

/* topk: the k indices of the largest |x[j]|, ties to the lower index, in
** ascending order into pick. |x| is compared as the bits of fabsf(x), whose
** unsigned order is the order of the magnitudes (+0 and -0 tie). tmp holds
** len words. */
static void select_top(const float *x, uint64_t len, uint64_t k, uint32_t *tmp, uint64_t *pick)
{
    if (k == len) {
        for (uint64_t j = 0; j < len; j++) pick[j] = j;
        return;
    }
    /* the k-th largest magnitude: all above it are kept, and of those equal
    ** to it the first `ties` in index order */
    uint32_t t;
    if (k <= 64) {
        /* few kept: the k largest so far, descending, in tmp[0..k); most
        ** elements fail the first comparison */
        uint64_t have = 0;
        for (uint64_t j = 0; j < len; j++) {
            uint32_t a = sq_bits_f32(x[j]) & 0x7fffffffu;
            if (have == k && a <= tmp[k - 1]) continue;
            uint64_t i = have < k ? have++ : k - 1;
            for (; i > 0 && tmp[i - 1] < a; i--) tmp[i] = tmp[i - 1];
            tmp[i] = a;
        }
        t = tmp[k - 1];
    } else {
        for (uint64_t j = 0; j < len; j++) tmp[j] = sq_bits_f32(x[j]) & 0x7fffffffu;
        t = kth_largest(tmp, len, k);
    }
    uint64_t above = 0;
    for (uint64_t j = 0; j < len; j++) above += (sq_bits_f32(x[j]) & 0x7fffffffu) > t;
    uint64_t ties = k - above, got = 0;
    for (uint64_t j = 0; j < len && got < k; j++) {
        uint32_t a = sq_bits_f32(x[j]) & 0x7fffffffu;
        if (a > t || (a == t && ties > 0)) {
            if (a == t) ties--;
            pick[got++] = j;
        }
    }
}

/* randk: a partial Fisher-Yates shuffle of the group [s, s + len) of the
** buffer. Step j (0 <= j < k) draws w = hi 2^24 + lo from the 24-bit
** uniforms of indices 2 (s + j) and 2 (s + j) + 1 (sq_uniform24 times
** 2^24, exact) and swaps position j with j + floor(w (len - j) / 2^48)
** (sq_hd_randk_offset, shared with the kernels).
** The first k positions, sorted, are the indices kept. perm holds len
** words. */
static void select_random(const sq_rng_key *key, uint64_t s, uint64_t len, uint64_t k,
                          uint64_t *perm, uint64_t *pick)
{
    enum { BATCH = 256 };
    float u[2 * BATCH];
    for (uint64_t j = 0; j < len; j++) perm[j] = j;
    for (uint64_t j0 = 0; j0 < k; j0 += BATCH) {
        uint64_t cnt = k - j0 < BATCH ? k - j0 : BATCH;
        sq_uniform24_n(key, 2 * (s + j0), 2 * cnt, u);
        for (uint64_t t = 0; t < cnt; t++) {
            uint64_t j = j0 + t;
            uint64_t r = j + sq_hd_randk_offset(u[2 * t], u[2 * t + 1], len - j);
            uint64_t v = perm[j];
            perm[j] = perm[r];
            perm[r] = v;
        }
    }
    memcpy(pick, perm, (size_t)k * sizeof *pick);
    qsort(pick, (size_t)k, sizeof *pick, asc_u64);
}

/* ------------------------------------------------------------------------ */
/* Tiles                                                                    */
/* ------------------------------------------------------------------------ */

int sq_sparse_encode_tile(const sq_codec *c, const float *val, uint64_t start, uint64_t len,
                          const sq_rng_key *key, sq_qbuf *q)
{
    if (sq_kind_cast(c->kind)) return sq_cast_encode_tile(c, val, start, len, q);
    const int randk = c->kind == SQ_KIND_RANDK;
    if (randk && !key) return SQ_ERR_ARG;
    /* NaN and Inf are refused wherever they are, kept or not */
    uint32_t mag = 0;
    for (uint64_t j = 0; j < len; j++) {
        uint32_t b = sq_bits_f32(val[j]) & 0x7fffffffu;
        mag = b > mag ? b : mag;
    }
    if (mag >= 0x7f800000u) return SQ_ERR_NONFINITE;

    const uint64_t G = c->group, width = sq_sparse_index_bytes(G);
    const uint64_t most = len < G ? len : G;
    const int dtype = (int)c->scale;
    void *work = malloc((size_t)most * (randk ? sizeof(uint64_t) : sizeof(uint32_t)));
    uint64_t *pick = malloc((size_t)(most < c->keep ? most : c->keep) * sizeof *pick);
    int rc = work && pick ? SQ_OK : SQ_ERR_NOMEM;
    for (uint64_t g0 = 0; g0 < len && rc == SQ_OK; g0 += G) {
        const uint64_t gl = len - g0 < G ? len - g0 : G;
        const uint64_t k = gl < c->keep ? gl : c->keep;
        const uint64_t slot0 = (start + g0) / G * c->keep;
        if (randk)
            select_random(key, start + g0, gl, k, work, pick);
        else
            select_top(val + g0, gl, k, work, pick);
        for (uint64_t t = 0; t < k; t++) {
            float v = val[g0 + pick[t]];
            sq_hd_put_index(q->codes, slot0 + t, width, pick[t]);
            sq_hd_store_meta(q->scales, slot0 + t, dtype, v);
            /* a value past its 16-bit dtype is a range error, never an Inf */
            if (sq_hd_nonfinite(sq_hd_load_meta(q->scales, slot0 + t, dtype))) rc = SQ_ERR_RANGE;
        }
    }
    free(work);
    free(pick);
    return rc;
}

int sq_sparse_decode_tile(const sq_codec *c, const sq_qbuf *q, uint64_t start, uint64_t len,
                          float *out)
{
    if (sq_kind_cast(c->kind)) return sq_cast_decode_tile(c, q, start, len, out);
    const uint64_t G = c->group, width = sq_sparse_index_bytes(G);
    const int dtype = (int)c->scale;
    int bad = 0;
    memset(out, 0, (size_t)len * sizeof *out);
    for (uint64_t g0 = 0; g0 < len; g0 += G) {
        const uint64_t gl = len - g0 < G ? len - g0 : G;
        const uint64_t k = gl < c->keep ? gl : c->keep;
        const uint64_t slot0 = (start + g0) / G * c->keep;
        for (uint64_t t = 0; t < k; t++) {
            uint64_t j = sq_hd_get_index(q->codes, slot0 + t, width);
            float v = sq_hd_load_meta(q->scales, slot0 + t, dtype);
            if (j >= gl) { /* a damaged buffer: nothing is written outside the group */
                bad = 1;
                continue;
            }
            out[g0 + j] = v;
            bad |= sq_hd_nonfinite(v);
        }
    }
    return bad;
}
