/*
** check_util.h -- helpers shared by the Check suites of the codec core.
**
** Header-only (every function static inline) so that each tests/check_*.c
** stays one standalone program. Nothing here calls the library except where
** a helper says so: inputs and reports must not depend on the code under
** test.
*/
#ifndef SHARDQ_CHECK_UTIL_H
#define SHARDQ_CHECK_UTIL_H

#include <check.h>
#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Bits                                                                     */
/* ------------------------------------------------------------------------ */

static inline uint32_t sqt_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static inline float sqt_float(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* ------------------------------------------------------------------------ */
/* Deterministic inputs                                                     */
/* ------------------------------------------------------------------------ */

/* The golden input recipe, identical to gen_input() in
** tests/golden/make_golden.py: x[i] = k_i * 2^exp, k_i a 24-bit signed
** integer from the top of a 64-bit LCG (Knuth's MMIX constants); i % 97 == 5
** is an outlier k_i * 16; i % 53 == 11 is an exact zero. Every value has at
** most 24 significant bits, so (float)k and ldexpf are exact. */
static inline void sqt_gen_input(uint64_t seed, size_t n, int exp, float *x)
{
    uint64_t state = seed;
    for (size_t i = 0; i < n; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        int64_t k = (int64_t)(state >> 40) - ((int64_t)1 << 23);
        if (i % 97 == 5) k *= 16;
        if (i % 53 == 11) k = 0;
        x[i] = ldexpf((float)k, exp);
    }
}

/* The golden "ties" recipe (gen_ties in make_golden.py): half-integers
** k/2 with k = (37 i + 11) mod 29 - 14, +7 at i % 64 == 0, -7 at
** i % 64 == 1; all exact in float32. */
static inline void sqt_gen_ties(size_t n, float *x)
{
    for (size_t i = 0; i < n; i++) {
        float v = (float)((int)((i * 37 + 11) % 29) - 14) * 0.5f;
        if (i % 64 == 0) v = 7.0f;
        if (i % 64 == 1) v = -7.0f;
        x[i] = v;
    }
}

/* A small fast generator for test data (splitmix64): not the golden recipe,
** just reproducible noise. */
typedef struct sqt_rng {
    uint64_t s;
} sqt_rng;

static inline uint64_t sqt_next(sqt_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 24 bits. */
static inline float sqt_unit(sqt_rng *r) { return (float)(sqt_next(r) >> 40) * 0x1p-24f; }

/* Uniform in [-1, 1). */
static inline float sqt_sym(sqt_rng *r) { return 2.0f * sqt_unit(r) - 1.0f; }

/* Roughly bell-shaped (sum of four uniforms), times a per-call magnitude. */
static inline float sqt_bell(sqt_rng *r, float mag)
{
    return mag * 0.5f * (sqt_sym(r) + sqt_sym(r) + sqt_sym(r) + sqt_sym(r));
}

/* Test data with structure: the magnitude changes every 100 elements (so
** groups see very different scales) and about one element in 200 is a 20x
** outlier. */
static inline void sqt_fill(float *x, size_t n, uint64_t seed)
{
    sqt_rng r = {seed};
    float mag = 1.0f;
    for (size_t i = 0; i < n; i++) {
        if (i % 100 == 0) mag = ldexpf(1.0f + sqt_unit(&r), (int)(sqt_next(&r) % 21) - 10);
        float v = sqt_bell(&r, mag);
        if (sqt_next(&r) % 200 == 0) v *= 20.0f;
        x[i] = v;
    }
}

/* ------------------------------------------------------------------------ */
/* Assertions in loops                                                      */
/* ------------------------------------------------------------------------ */

/* Check's ck_assert records every passing assertion (a write to its message
** pipe), which costs a system call each: in loops over millions of values use
** this, which only reports failures. */
#define SQT_CHECK(cond, ...)                 \
    do {                                     \
        if (!(cond)) ck_abort_msg(__VA_ARGS__); \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Hex                                                                      */
/* ------------------------------------------------------------------------ */

/* Decodes hex text (no separators) into a new buffer; *len gets the byte
** count. Returns NULL on a malformed string. "-" is the empty buffer. */
static inline uint8_t *sqt_hex_decode(const char *s, size_t *len)
{
    size_t n = strlen(s);
    if (strcmp(s, "-") == 0) n = 0;
    if (n % 2) return NULL;
    uint8_t *out = malloc(n / 2 + 1);
    if (!out) return NULL;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        char two[3] = {s[2 * i], s[2 * i + 1], 0};
        char *end;
        v = (unsigned)strtoul(two, &end, 16);
        if (*end || !isxdigit((unsigned char)two[0]) || !isxdigit((unsigned char)two[1])) {
            free(out);
            return NULL;
        }
        out[i] = (uint8_t)v;
    }
    *len = n / 2;
    return out;
}

/* Writes up to `count` bytes of p starting at `from` as hex into buf. */
static inline void sqt_hex_window(const uint8_t *p, size_t len, size_t from, size_t count,
                                  char *buf, size_t buflen)
{
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = from; i < len && i < from + count && o + 3 < buflen; i++)
        o += (size_t)snprintf(buf + o, buflen - o, "%02x", p[i]);
}

/* Compares two byte arrays. On a mismatch writes, into msg, the first
** differing byte index and up to 16 bytes of both from there, in hex; returns
** 0. Returns 1 when equal (msg untouched). */
static inline int sqt_bytes_equal(const void *got, const void *want, size_t n, char *msg,
                                  size_t msglen)
{
    const uint8_t *g = got, *w = want;
    for (size_t i = 0; i < n; i++) {
        if (g[i] != w[i]) {
            char hg[40], hw[40];
            sqt_hex_window(g, n, i, 16, hg, sizeof hg);
            sqt_hex_window(w, n, i, 16, hw, sizeof hw);
            snprintf(msg, msglen, "first mismatch at byte %zu of %zu: got %s.., want %s..", i, n,
                     hg, hw);
            return 0;
        }
    }
    return 1;
}

/* ck_assert on byte equality with the hex-diff report. `what` names the
** compared things (it is printed). */
#define SQT_ASSERT_BYTES(got, want, n, what)                                            \
    do {                                                                                \
        char sqt_msg_[256];                                                             \
        int sqt_eq_ = sqt_bytes_equal((got), (want), (n), sqt_msg_, sizeof sqt_msg_);   \
        ck_assert_msg(sqt_eq_, "%s: %s", (what), sqt_eq_ ? "" : sqt_msg_);              \
    } while (0)

/* Float arrays compared as bit patterns (so -0 != +0 and NaN == same NaN),
** reporting the first differing element with both values. */
#define SQT_ASSERT_FLOATS_BITS(got, want, n, what)                                        \
    do {                                                                                  \
        const float *sqt_g_ = (got), *sqt_w_ = (want);                                    \
        for (size_t sqt_i_ = 0; sqt_i_ < (size_t)(n); sqt_i_++)                           \
            if (sqt_bits(sqt_g_[sqt_i_]) != sqt_bits(sqt_w_[sqt_i_]))                     \
                ck_abort_msg("%s: first mismatch at element %zu of %zu: got %a (0x%08x), " \
                             "want %a (0x%08x)",                                          \
                             (what), sqt_i_, (size_t)(n), (double)sqt_g_[sqt_i_],         \
                             sqt_bits(sqt_g_[sqt_i_]), (double)sqt_w_[sqt_i_],            \
                             sqt_bits(sqt_w_[sqt_i_]));                                   \
    } while (0)

/* ------------------------------------------------------------------------ */
/* A straight-line reference quantizer                                      */
/* ------------------------------------------------------------------------ */
/*
** The conventions as the plainest code: one group at a time, libm rintf and
** floorf, sq_uniform for the random numbers (checked on its own against the
** Random123 known answers in check_philox) and the scalar dtype conversions
** (checked in check_dtype). Works on values already transformed: the
** codec's hadamard field is ignored here. Only available where shardq/codec.h is
** included first.
*/
#ifdef SHARDQ_CODEC_H

typedef struct sqt_levels {
    float qm;  /* multiplier numerator: qmax, 2^(b-1) or 2^b - 1 */
    float qlo; /* smallest code */
    float qhi; /* largest code */
} sqt_levels;

/* Straight from the table of level conventions (docs/conventions.md),
** independently of sq_hd_code_range (which the code under test uses). */
static inline sqt_levels sqt_levels_of(const sq_codec *c)
{
    const double p = ldexp(1.0, c->bits - 1); /* 2^(b-1) */
    if (c->kind == SQ_KIND_MINMAX) return (sqt_levels){(float)(2 * p - 1), 0.0f, (float)(2 * p - 1)};
    if (c->levels == SQ_LEVELS_DEEPSPEED) return (sqt_levels){(float)p, (float)-p, (float)(p - 1)};
    return (sqt_levels){(float)(p - 1), (float)(1 - p), (float)(p - 1)};
}

/* v rounded (nearest even) to the scale dtype, back as a float. */
static inline float sqt_round_dtype(float v, sq_scale_dtype dt)
{
    if (dt == SQ_SCALE_BF16) return sq_bf16_to_f32(sq_f32_to_bf16(v));
    if (dt == SQ_SCALE_FP16) return sq_f16_to_f32(sq_f32_to_f16(v));
    return v;
}

/* Reads metadata entry g (scale or offset) as a float. */
static inline float sqt_meta(const void *arr, uint64_t g, sq_scale_dtype dt)
{
    if (dt == SQ_SCALE_FP32) {
        float v;
        memcpy(&v, (const uint8_t *)arr + 4 * g, 4);
        return v;
    }
    uint16_t h;
    memcpy(&h, (const uint8_t *)arr + 2 * g, 2);
    return dt == SQ_SCALE_BF16 ? sq_bf16_to_f32(h) : sq_f16_to_f32(h);
}

/* Quantizes x[0..n) by the conventions: codes[i] (as ints), scales[g] and,
** for min-max, offsets[g] (the stored values, after rounding to the dtype).
** Returns SQ_OK, SQ_ERR_NONFINITE or SQ_ERR_RANGE. */
static inline int sqt_ref_quantize(const sq_codec *c, const float *x, uint64_t n,
                                   const sq_rng_key *key, int *codes, float *scales,
                                   float *offsets)
{
    const sqt_levels lv = sqt_levels_of(c);
    int status = SQ_OK;
    for (uint64_t g0 = 0, gi = 0; g0 < n; g0 += c->group, gi++) {
        uint64_t len = n - g0 < c->group ? n - g0 : c->group;
        const float *gx = x + g0;
        for (uint64_t j = 0; j < len; j++)
            if (!isfinite(gx[j])) return SQ_ERR_NONFINITE;
        float m, s, lo = 0.0f, lift = 1.0f;
        if (c->kind == SQ_KIND_SYM) {
            float a = 0.0f;
            for (uint64_t j = 0; j < len; j++) a = fabsf(gx[j]) > a ? fabsf(gx[j]) : a;
            if (a == 0.0f) {
                m = 1.0f;
                s = 1.0f;
            } else {
                if (a < 0x1p-64f) lift = 0x1p64f; /* the tiny-group extension */
                m = lv.qm / (a * lift);
                s = sqt_round_dtype(a / lv.qm, c->scale);
            }
        } else {
            float mn = gx[0], hi = gx[0];
            for (uint64_t j = 1; j < len; j++) {
                /* the minimum in IEEE totalOrder: -0 counts as below +0 */
                if (gx[j] < mn || (gx[j] == mn && signbit(gx[j]) && !signbit(mn))) mn = gx[j];
                if (gx[j] > hi) hi = gx[j];
            }
            lo = sqt_round_dtype(mn, c->scale);
            float r = hi - lo;
            if (!isfinite(r)) return SQ_ERR_RANGE;
            if (r <= 0.0f) { /* r = 0, or lo rounded above hi: one level */
                m = 1.0f;
                s = 1.0f;
            } else {
                if (r < 0x1p-64f) lift = 0x1p64f;
                m = lv.qm / (r * lift);
                s = sqt_round_dtype(r / lv.qm, c->scale);
            }
            if (offsets) offsets[gi] = lo;
        }
        if (!isfinite(s)) status = SQ_ERR_RANGE;
        if (scales) scales[gi] = s;
        for (uint64_t j = 0; j < len; j++) {
            float v = ((gx[j] - lo) * lift) * m;
            float q;
            if (c->round == SQ_ROUND_RTN) {
                q = rintf(v);
            } else {
                float f = floorf(v);
                q = f + (sq_uniform(key, g0 + j) < v - f ? 1.0f : 0.0f);
            }
            q = q < lv.qlo ? lv.qlo : q;
            q = q > lv.qhi ? lv.qhi : q;
            codes[g0 + j] = (int)q;
        }
    }
    return status;
}

/* Decodes a quantized buffer without the library's decoder: unpack, then
** q * s (sym) or lo + q * s (min-max) per element, in the quantized domain
** (no inverse Hadamard). codes (optional) receives the unpacked codes. */
static inline void sqt_decode(const sq_codec *c, const sq_qbuf *q, uint64_t n, float *out,
                              int *codes)
{
    uint8_t *u = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(u);
    if (c->kind == SQ_KIND_SYM) sq_unpack_signed(q->codes, n, c->bits, (int8_t *)u);
    else sq_unpack_unsigned(q->codes, n, c->bits, u);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t g = i / c->group;
        int code = c->kind == SQ_KIND_SYM ? (int)(int8_t)u[i] : (int)u[i];
        float s = sqt_meta(q->scales, g, c->scale);
        if (c->kind == SQ_KIND_SYM) out[i] = (float)code * s;
        else out[i] = sqt_meta(q->offsets, g, c->scale) + (float)code * s;
        if (codes) codes[i] = code;
    }
    free(u);
}

#endif /* SHARDQ_CODEC_H */

/* ------------------------------------------------------------------------ */
/* Scratch directories                                                      */
/* ------------------------------------------------------------------------ */

/* A fresh directory $TMPDIR/NAME.XXXXXX (/tmp when TMPDIR is unset) into
** buf; 0 on success. */
static inline int sqt_mkdtemp(char *buf, size_t len, const char *name)
{
    const char *t = getenv("TMPDIR");
    snprintf(buf, len, "%s/%s.XXXXXX", t && *t ? t : "/tmp", name);
    return mkdtemp(buf) ? 0 : -1;
}

/* The suite's scratch directory (one per program: sqt_scratch_begin makes
** it, sqt_run_scratch removes it after the suite). */
static char sqt_tmpdir[512];

/* sqt_tmpdir/NAME, in one of eight rotating buffers: a call may take a few
** paths at once (a source and a destination) without copying them. */
static inline const char *sqt_tpath(const char *name)
{
    static char buf[8][1024];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", sqt_tmpdir, name);
    return buf[k];
}

/* Makes the scratch directory $TMPDIR/NAME.XXXXXX; 0 on success, else says
** why on stderr and returns 99 (automake's hard error) for main to return. */
static inline int sqt_scratch_begin(const char *name)
{
    if (sqt_mkdtemp(sqt_tmpdir, sizeof sqt_tmpdir, name) == 0) return 0;
    perror("mkdtemp");
    return 99;
}

/* Writes len bytes of data to path, failing the test if it cannot. */
static inline void sqt_write_bytes(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    if (len) ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/* The whole of path in a new buffer (one byte more, for a terminator the
** caller may add); *len gets its size. */
static inline unsigned char *sqt_read_bytes(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = (unsigned char *)malloc((size_t)sz + 1);
    ck_assert_uint_eq(fread(b, 1, (size_t)sz, f), (size_t)sz);
    fclose(f);
    *len = (size_t)sz;
    return b;
}

/* Removes path and everything below it. Directories are made writable
** first: a test may have taken that away to provoke an error. */
static inline void sqt_rm_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (!S_ISDIR(st.st_mode)) {
        unlink(path);
        return;
    }
    chmod(path, 0700);
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            size_t len = strlen(path) + strlen(e->d_name) + 2;
            char *p = (char *)malloc(len);
            if (!p) break;
            snprintf(p, len, "%s/%s", path, e->d_name);
            sqt_rm_tree(p);
            free(p);
        }
        closedir(d);
    }
    rmdir(path);
}

/* ------------------------------------------------------------------------ */
/* Files                                                                    */
/* ------------------------------------------------------------------------ */

/* The call failed (rc != 0), and the message err names the file path and
** holds each of the strings that follow. */
#define SQT_EXPECT_ERR(rc, err, path, ...)                                                \
    do {                                                                                  \
        const char *what_[] = {__VA_ARGS__};                                              \
        ck_assert_msg((rc) != 0, "expected a failure for %s", path);                      \
        ck_assert_msg(strstr(err, path) != NULL, "message lacks the file name: %s", err); \
        for (size_t i_ = 0; i_ < sizeof what_ / sizeof *what_; i_++)                      \
            ck_assert_msg(strstr(err, what_[i_]) != NULL, "message lacks '%s': %s",       \
                          what_[i_], err);                                                \
    } while (0)

/* A .npy image: magic, version major.0, the dict padded with spaces and a
** newline to a multiple of 64 (pad = 0: neither), then dlen bytes of data;
** exactly *len bytes allocated, so that a sanitizer sees a read past them. */
static inline unsigned char *sqt_npy_image(int major, const char *dict, int pad, const void *data,
                                           size_t dlen, size_t *len)
{
    size_t lenbytes = major == 1 ? 2 : 4, pre = 8 + lenbytes;
    size_t hl = strlen(dict);
    if (pad) hl = ((pre + hl + 1 + 63) / 64) * 64 - pre;
    *len = pre + hl + dlen;
    unsigned char *b = (unsigned char *)malloc(*len ? *len : 1);
    ck_assert_ptr_nonnull(b);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = 0;
    for (size_t i = 0; i < lenbytes; i++) b[8 + i] = (unsigned char)(hl >> (8 * i));
    memset(b + pre, ' ', hl);
    memcpy(b + pre, dict, strlen(dict));
    if (pad) b[pre + hl - 1] = '\n';
    if (dlen) memcpy(b + pre + hl, data, dlen);
    return b;
}

/* ------------------------------------------------------------------------ */
/* Running a suite                                                          */
/* ------------------------------------------------------------------------ */

/* Runs the suite (CK_FORK unless CK_FORK=no says otherwise) and returns the
** process exit status. */
static inline int sqt_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* sqt_run, then the scratch directory removed. */
static inline int sqt_run_scratch(Suite *s)
{
    int rc = sqt_run(s);
    sqt_rm_tree(sqt_tmpdir);
    return rc;
}

/* The GPU suites run in one process: a CUDA context does not survive
** fork(). */
static inline int sqt_run_nofork(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* GPU suites (where backend/device.h is included first)                    */
/* ------------------------------------------------------------------------ */
#ifdef SQ_BACKEND_DEVICE_H

/* The number of visible CUDA devices; without one, says why and ends the
** program with 77 (automake's SKIP). */
static inline int sqt_devices_or_skip(void)
{
    int n = sq_device_count();
    if (n <= 0) {
        printf("SKIP: no CUDA device (shardq built without CUDA / no GPU visible): %s\n",
               sq_device_unavailable_reason());
        exit(77);
    }
    return n;
}

#endif /* SQ_BACKEND_DEVICE_H */

#endif /* SHARDQ_CHECK_UTIL_H */
