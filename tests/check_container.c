/*
** check_container.c -- the shardq.codec/1 container (trace/container.h).
**
** Round trips of sym and min-max codecs (every field and every byte of the
** encoding comes back); then files that are truncated, that are not
** safetensors, or whose header lies (format, codec, n, shape, a tensor
** missing, extra or of the wrong size or dtype, a NaN scale): each must give
** its kind (SQ_ERR_FORMAT, SQ_ERR_NONFINITE) with the file and the field in
** the message. A missing file is SQ_ERR_NOTFOUND.
*/
#include "check_util.h"
#include "shardq/codec.h"
#include "shardq/trace.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The failure has the kind, and its sentence names the file and each of
** what[]. */
#define EXPECT_KIND(rc, kind, e, path, ...)                                                        \
    do {                                                                                           \
        const char *what_[] = {__VA_ARGS__};                                                       \
        ck_assert_msg((rc) == (kind), "%s: kind %d (%s), expected %d: %s", path, (rc),             \
                      sq_strerror(rc), (kind), sq_error_message(&(e)));                            \
        ck_assert_int_eq((e).status, (kind));                                                      \
        ck_assert_msg(strstr(sq_error_message(&(e)), path) != NULL,                                \
                      "message lacks the file name: %s", sq_error_message(&(e)));                  \
        for (size_t i_ = 0; i_ < sizeof what_ / sizeof *what_; i_++)                               \
            ck_assert_msg(strstr(sq_error_message(&(e)), what_[i_]) != NULL,                       \
                          "message lacks '%s': %s", what_[i_], sq_error_message(&(e)));            \
    } while (0)

/* An encoding of n values of shape under spec, key (seed 5, step 6, worker
** 7, site 8). */
static void make(const char *spec, const uint64_t *shape, int ndim, sq_container *c, float *x)
{
    memset(c, 0, sizeof *c);
    char e[256];
    ck_assert_msg(sq_codec_parse(spec, &c->codec, e, sizeof e) == SQ_OK, "%s", e);
    c->ndim = ndim;
    c->n = 1;
    for (int d = 0; d < ndim; d++) {
        c->shape[d] = shape[d];
        c->n *= shape[d];
    }
    c->key = (sq_rng_key){5, 6, 7, 8};
    sqt_gen_input(11, (size_t)c->n, -30, x);
    ck_assert_int_eq(sq_qbuf_alloc(&c->codec, c->n, &c->q), SQ_OK);
    ck_assert_int_eq(sq_quantize(&c->codec, x, c->n, &c->key, &c->q), SQ_OK);
}

static size_t meta_bytes(const sq_codec *c, uint64_t n)
{
    return (size_t)sq_codec_groups(c, n) * (c->scale == SQ_SCALE_FP32 ? 4 : 2);
}

START_TEST(test_roundtrip)
{
    static const char *const specs[] = {
        "kind=sym,bits=4,group=128,round=sr",
        "kind=minmax,bits=8,group=64,round=rtn,scale=bf16,levels=sdp4bit",
        "kind=sym,bits=3,group=32,scale=fp16,hadamard=8",
    };
    static float x[3 * 5 * 64];
    const uint64_t shape[3] = {3, 5, 64};
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
        sq_container c, r;
        make(specs[k], shape, 3, &c, x);
        const char *p = sqt_tpath("rt.st");
        sq_error e = {0};
        ck_assert_msg(sq_container_write(p, &c, &e) == SQ_OK, "%s", sq_error_message(&e));
        ck_assert_msg(sq_container_read(p, &r, &e) == SQ_OK, "%s", sq_error_message(&e));
        char a[SQ_CODEC_STRLEN], b[SQ_CODEC_STRLEN];
        sq_codec_format(&c.codec, a, sizeof a);
        sq_codec_format(&r.codec, b, sizeof b);
        ck_assert_str_eq(a, b);
        ck_assert_uint_eq(r.n, c.n);
        ck_assert_int_eq(r.ndim, 3);
        for (int d = 0; d < 3; d++) ck_assert_uint_eq(r.shape[d], shape[d]);
        ck_assert_uint_eq(r.key.seed, 5);
        ck_assert_uint_eq(r.key.step, 6);
        ck_assert_uint_eq(r.key.worker, 7);
        ck_assert_uint_eq(r.key.site, 8);
        ck_assert_int_eq(memcmp(r.q.codes, c.q.codes, (size_t)sq_codec_code_bytes(&c.codec, c.n)),
                         0);
        ck_assert_int_eq(memcmp(r.q.scales, c.q.scales, meta_bytes(&c.codec, c.n)), 0);
        if (c.codec.kind == SQ_KIND_MINMAX)
            ck_assert_int_eq(memcmp(r.q.offsets, c.q.offsets, meta_bytes(&c.codec, c.n)), 0);
        sq_container_free(&r);
        sq_container_free(&c);
        ck_assert_ptr_null(c.q.codes);
    }
    /* a scalar and an empty array */
    sq_container c, r;
    const uint64_t zero[2] = {4, 0};
    make("", zero, 2, &c, x);
    const char *p = sqt_tpath("empty.st");
    sq_error e = {0};
    ck_assert_int_eq(sq_container_write(p, &c, &e), SQ_OK);
    ck_assert_msg(sq_container_read(p, &r, &e) == SQ_OK, "%s", sq_error_message(&e));
    ck_assert_uint_eq(r.n, 0);
    ck_assert_int_eq(r.ndim, 2);
    sq_container_free(&r);
    sq_container_free(&c);
    make("", NULL, 0, &c, x);
    ck_assert_int_eq(sq_container_write(p, &c, &e), SQ_OK);
    ck_assert_int_eq(sq_container_read(p, &r, &e), SQ_OK);
    ck_assert_uint_eq(r.n, 1);
    ck_assert_int_eq(r.ndim, 0);
    sq_container_free(&r);
    sq_container_free(&c);
}
END_TEST

/* Writes a container of 4096 values under the default codec, with the
** metadata and tensors changed as the test says: key `mkey` gets `mval`
** (NULL: left out), and tensor `drop` is left out. */
static void write_lying(const char *p, const char *mkey, const char *mval, const char *drop,
                        int extra, uint64_t codes_len, int nan_scale)
{
    sq_codec c = sq_codec_default();
    uint64_t n = 4096, groups = sq_codec_groups(&c, n);
    static uint8_t codes[4096];
    static float scales[64];
    for (uint64_t g = 0; g < groups; g++) scales[g] = 1.0f;
    if (nan_scale) scales[5] = NAN;
    sq_st_tensor t[3];
    memset(t, 0, sizeof t);
    size_t nt = 0;
    if (!drop || strcmp(drop, "codes")) {
        t[nt].name = "codes";
        t[nt].dtype = SQ_ST_U8;
        t[nt].ndim = 1;
        t[nt].shape[0] = codes_len ? codes_len : sq_codec_code_bytes(&c, n);
        t[nt++].data = codes;
    }
    if (!drop || strcmp(drop, "scales")) {
        t[nt].name = "scales";
        t[nt].dtype = SQ_ST_F32;
        t[nt].ndim = 1;
        t[nt].shape[0] = groups;
        t[nt++].data = scales;
    }
    if (extra) {
        t[nt].name = "offsets";
        t[nt].dtype = SQ_ST_F32;
        t[nt].ndim = 1;
        t[nt].shape[0] = groups;
        t[nt++].data = scales;
    }
    char spec[SQ_CODEC_STRLEN];
    sq_codec_format(&c, spec, sizeof spec);
    sq_st_kv m[4] = {
        {"format", SQ_CONTAINER_FORMAT}, {"codec", spec}, {"n", "4096"}, {"shape", "[64, 64]"}};
    size_t nm = 0;
    sq_st_kv out[4];
    for (size_t i = 0; i < 4; i++) {
        if (mkey && !strcmp(m[i].key, mkey)) {
            if (!mval) continue;
            m[i].value = mval;
        }
        out[nm++] = m[i];
    }
    sq_error e = {0};
    ck_assert_msg(sq_st_write(p, t, nt, out, nm, &e) == SQ_OK, "%s", sq_error_message(&e));
}

START_TEST(test_lying_header)
{
    sq_container r;
    sq_error e = {0};
    int rc;
    const char *p = sqt_tpath("ok.st");
    write_lying(p, NULL, NULL, NULL, 0, 0, 0);
    rc = sq_container_read(p, &r, &e);
    ck_assert_msg(rc == SQ_OK, "%s", sq_error_message(&e));
    sq_container_free(&r);

    p = sqt_tpath("fmt.st");
    write_lying(p, "format", "shardq.codec/9", NULL, 0, 0, 0);
    rc = sq_container_read(p, &r, &e);
    EXPECT_KIND(rc, SQ_ERR_FORMAT, e, p, "__metadata__ 'format'", "shardq.codec/9");
    ck_assert_ptr_null(r.q.codes);

    p = sqt_tpath("nofmt.st");
    write_lying(p, "format", NULL, NULL, 0, 0, 0);
    rc = sq_container_read(p, &r, &e);
    EXPECT_KIND(rc, SQ_ERR_FORMAT, e, p, "__metadata__ 'format': missing");

    p = sqt_tpath("spec.st");
    write_lying(p, "codec", "kind=sym,bits=9", NULL, 0, 0, 0);
    rc = sq_container_read(p, &r, &e);
    EXPECT_KIND(rc, SQ_ERR_FORMAT, e, p, "__metadata__ 'codec'", "bits");

    p = sqt_tpath("n.st");
    write_lying(p, "n", "4096x", NULL, 0, 0, 0);
    rc = sq_container_read(p, &r, &e);
    EXPECT_KIND(rc, SQ_ERR_FORMAT, e, p, "__metadata__ 'n'", "4096x");

    p = sqt_tpath("n0.st");
    write_lying(p, "n", "04096", NULL, 0, 0, 0);
    rc = sq_container_read(p, &r, &e);
    EXPECT_KIND(rc, SQ_ERR_FORMAT, e, p, "__metadata__ 'n'");

    p = sqt_tpath("shape.st");
    write_lying(p, "shape", "[64, 65]", NULL, 0, 0, 0);
    rc = sq_container_read(p, &r, &e);
    EXPECT_KIND(rc, SQ_ERR_FORMAT, e, p, "__metadata__ 'shape'", "4160", "'n' says 4096");

    p = sqt_tpath("shape2.st");
    write_lying(p, "shape", "(64, 64)", NULL, 0, 0, 0);
    rc = sq_container_read(p, &r, &e);
    EXPECT_KIND(rc, SQ_ERR_FORMAT, e, p, "__metadata__ 'shape'", "not a list");

    p = sqt_tpath("shape3.st");
    write_lying(p, "shape", "[18446744073709551615, 2]", NULL, 0, 0, 0);
    rc = sq_container_read(p, &r, &e);
    EXPECT_KIND(rc, SQ_ERR_FORMAT, e, p, "__metadata__ 'shape'", "more than 2^64");

    p = sqt_tpath("miss.st");
    write_lying(p, NULL, NULL, "scales", 0, 0, 0);
    rc = sq_container_read(p, &r, &e);
    EXPECT_KIND(rc, SQ_ERR_FORMAT, e, p, "tensor 'scales': missing");

    p = sqt_tpath("extra.st");
    write_lying(p, NULL, NULL, NULL, 1, 0, 0);
    rc = sq_container_read(p, &r, &e);
    EXPECT_KIND(rc, SQ_ERR_FORMAT, e, p, "tensor 'offsets': unexpected");

    p = sqt_tpath("short.st");
    write_lying(p, NULL, NULL, NULL, 0, 2047, 0);
    rc = sq_container_read(p, &r, &e);
    EXPECT_KIND(rc, SQ_ERR_FORMAT, e, p, "tensor 'codes': 2047 values", "needs 2048");

    p = sqt_tpath("nan.st");
    write_lying(p, NULL, NULL, NULL, 0, 0, 1);
    rc = sq_container_read(p, &r, &e);
    EXPECT_KIND(rc, SQ_ERR_NONFINITE, e, p, "tensor 'scales': group 5 is NaN");
}
END_TEST

START_TEST(test_broken_file)
{
    sq_container c, r;
    static float x[4096];
    const uint64_t shape[1] = {4096};
    make("kind=minmax,bits=4", shape, 1, &c, x);
    const char *p = sqt_tpath("good.st");
    sq_error e = {0};
    ck_assert_int_eq(sq_container_write(p, &c, &e), SQ_OK);
    sq_container_free(&c);
    FILE *f = fopen(p, "rb");
    ck_assert_ptr_nonnull(f);
    static unsigned char img[1 << 16];
    size_t len = fread(img, 1, sizeof img, f);
    fclose(f);
    ck_assert_uint_gt(len, 100);

    /* cut short: the data section no longer holds what the header says */
    const char *q = sqt_tpath("trunc.st");
    f = fopen(q, "wb");
    ck_assert_uint_eq(fwrite(img, 1, len - 7, f), len - 7);
    fclose(f);
    int rc = sq_container_read(q, &r, &e);
    EXPECT_KIND(rc, SQ_ERR_FORMAT, e, q, "field 'data_offsets'");

    /* cut in the header length */
    f = fopen(q, "wb");
    ck_assert_uint_eq(fwrite(img, 1, 5, f), 5);
    fclose(f);
    rc = sq_container_read(q, &r, &e);
    EXPECT_KIND(rc, SQ_ERR_FORMAT, e, q, "header length");

    /* wrong magic: a .npy file is no safetensors file */
    const char *npy = sqt_tpath("x.npy");
    static const char npy_img[] =
        "\x93NUMPY\x01\x00\x46\x00{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }";
    f = fopen(npy, "wb");
    ck_assert_uint_eq(fwrite(npy_img, 1, sizeof npy_img - 1, f), sizeof npy_img - 1);
    fclose(f);
    rc = sq_container_read(npy, &r, &e);
    EXPECT_KIND(rc, SQ_ERR_FORMAT, e, npy, "this is a NumPy .npy file, not safetensors");

    /* a header length that lies: more than the file */
    img[0] = 0xff, img[1] = 0xff;
    f = fopen(q, "wb");
    ck_assert_uint_eq(fwrite(img, 1, len, f), len);
    fclose(f);
    rc = sq_container_read(q, &r, &e);
    EXPECT_KIND(rc, SQ_ERR_FORMAT, e, q, "header length", "beyond the end");

    /* no such file; a directory */
    const char *none = sqt_tpath("absent.st");
    rc = sq_container_read(none, &r, &e);
    EXPECT_KIND(rc, SQ_ERR_NOTFOUND, e, none, "cannot open");
    rc = sq_container_read(sqt_tmpdir, &r, &e);
    EXPECT_KIND(rc, SQ_ERR_IO, e, sqt_tmpdir, "is a directory");

    /* a write that cannot be done is SQ_ERR_IO */
    make("", shape, 1, &c, x);
    const char *bad = sqt_tpath("no/such/dir/out.st");
    rc = sq_container_write(bad, &c, &e);
    EXPECT_KIND(rc, SQ_ERR_IO, e, bad, "cannot create");
    sq_container_free(&c);
}
END_TEST

int main(void)
{
    if (sqt_scratch_begin("check_container")) return 99;
    Suite *s = suite_create("container");
    TCase *tc = tcase_create("container");
    tcase_add_test(tc, test_roundtrip);
    tcase_add_test(tc, test_lying_header);
    tcase_add_test(tc, test_broken_file);
    suite_add_tcase(s, tc);
    return sqt_run_scratch(s);
}
