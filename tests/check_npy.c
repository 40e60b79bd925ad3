/*
** check_npy.c -- the .npy and safetensors readers and writers.
**
** Round trips for many shapes (0-d and zero-size included), .npy headers of
** versions 2.0 and 3.0 and dtypes <f8 / <f2 written by hand, and every kind
** of malformed file, each of which must fail with a message that names the
** file and the field at fault.
*/
#include "check_util.h"
#include "shardq/codec.h"
#include "shardq/trace.h"

#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A .npy file: magic, version major.0, the dict padded with spaces and a
** newline to a multiple of 64 (pad = 0: no padding, no newline), data. */
static void write_npy(const char *path, int major, const char *dict, int pad, const void *data,
                      size_t len)
{
    size_t n;
    unsigned char *b = sqt_npy_image(major, dict, pad, data, len, &n);
    sqt_write_bytes(path, b, n);
    free(b);
}

static void npy_fails(const char *name, int major, const char *dict, int pad, const void *data,
                      size_t len, const char *w1, const char *w2)
{
    const char *p = sqt_tpath(name);
    write_npy(p, major, dict, pad, data, len);
    sq_npy a;
    sq_error err_ = {0};
    char *err = err_.msg;
    int rc = sq_npy_read(p, &a, &err_);
    SQT_EXPECT_ERR(rc, err, p, w1, w2);
    ck_assert_ptr_null(a.data);
}

/* ------------------------------------------------------------------------ */
/* .npy                                                                     */
/* ------------------------------------------------------------------------ */

START_TEST(test_npy_roundtrip)
{
    static const uint64_t shapes[][4] = {{0}, {0}, {5}, {3, 4}, {2, 0, 3}, {2, 3, 4, 5}, {1, 1, 1, 7}};
    static const int ndims[] = {0, 1, 1, 2, 3, 4, 4};
    for (size_t s = 0; s < sizeof ndims / sizeof *ndims; s++) {
        uint64_t n = 1;
        for (int d = 0; d < ndims[s]; d++) n *= shapes[s][d];
        float *x = malloc((n ? n : 1) * sizeof *x);
        for (uint64_t i = 0; i < n; i++) x[i] = (float)i * 0.37f - 3.0f;
        if (n > 2) x[1] = -0.0f;
        const char *p = sqt_tpath("rt.npy");
        sq_error err_ = {0};
        char *err = err_.msg;
        ck_assert_msg(sq_npy_write_f32(p, x, shapes[s], ndims[s], &err_) == 0, "%s",
                      err);
        size_t len;
        unsigned char *b = sqt_read_bytes(p, &len);
        size_t hl = (size_t)(b[8] | b[9] << 8);
        ck_assert_int_eq(b[6], 1);
        ck_assert_int_eq(b[7], 0);
        ck_assert_uint_eq((10 + hl) % 64, 0);
        ck_assert_int_eq(b[10 + hl - 1], '\n');
        ck_assert_uint_eq(len, 10 + hl + 4 * n);
        free(b);
        sq_npy a;
        ck_assert_msg(sq_npy_read(p, &a, &err_) == 0, "%s", err);
        ck_assert_int_eq(a.ndim, ndims[s]);
        ck_assert_uint_eq(a.n, n);
        ck_assert_int_eq(a.version, 1);
        ck_assert_int_eq(a.dtype, SQ_NPY_F4);
        ck_assert_ptr_nonnull(a.data);
        for (int d = 0; d < ndims[s]; d++) ck_assert_uint_eq(a.shape[d], shapes[s][d]);
        ck_assert_int_eq(memcmp(a.data, x, n * sizeof *x), 0);
        sq_npy_free(&a);
        free(x);
    }
    /* The exact header NumPy writes for a 1-d shape. */
    float v[3] = {1, 2, 3};
    uint64_t sh = 3;
    sq_error err_ = {0};
    const char *p = sqt_tpath("exact.npy");
    ck_assert_int_eq(sq_npy_write_f32(p, v, &sh, 1, &err_), 0);
    size_t len;
    unsigned char *b = sqt_read_bytes(p, &len);
    const char *want = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
    ck_assert_int_eq(memcmp(b + 10, want, strlen(want)), 0);
    free(b);
    /* No temporary file is left behind. */
    DIR *d = opendir(sqt_tmpdir);
    struct dirent *e;
    while ((e = readdir(d)))
        ck_assert_msg(strstr(e->d_name, ".tmp") == NULL, "left over: %s", e->d_name);
    closedir(d);
}
END_TEST

START_TEST(test_npy_versions)
{
    float v[6] = {1.5f, -2, 3, 4, 5, 6.25f};
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    for (int major = 1; major <= 3; major++) {
        const char *p = sqt_tpath("v.npy");
        write_npy(p, major, dict, 1, v, sizeof v);
        sq_npy a;
        sq_error err_ = {0};
        char *err = err_.msg;
        ck_assert_msg(sq_npy_read(p, &a, &err_) == 0, "v%d: %s", major, err);
        ck_assert_int_eq(a.version, major);
        ck_assert_uint_eq(a.n, 6);
        ck_assert_int_eq(memcmp(a.data, v, sizeof v), 0);
        sq_npy_free(&a);
    }
    /* Unpadded header without newline, double quotes, no trailing comma,
    ** whitespace everywhere, a Python 2 long: all still a valid dict. */
    const char *odd = " { \"shape\" : ( 2 , 3L ) ,\n'fortran_order':False,'descr':'<f4'}  ";
    const char *p = sqt_tpath("odd.npy");
    write_npy(p, 2, odd, 0, v, sizeof v);
    sq_npy a;
    sq_error err_ = {0};
    char *err = err_.msg;
    ck_assert_msg(sq_npy_read(p, &a, &err_) == 0, "%s", err);
    ck_assert_int_eq(a.ndim, 2);
    ck_assert_uint_eq(a.shape[1], 3);
    sq_npy_free(&a);
}
END_TEST

START_TEST(test_npy_dtypes)
{
    double d[5] = {0.1, -1e39, 1e39, 3.0, NAN};
    const char *p = sqt_tpath("f8.npy");
    write_npy(p, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (5,), }", 1, d, sizeof d);
    sq_npy a;
    sq_error err_ = {0};
    char *err = err_.msg;
    ck_assert_msg(sq_npy_read(p, &a, &err_) == 0, "%s", err);
    ck_assert_int_eq(a.dtype, SQ_NPY_F8);
    ck_assert(a.data[0] == (float)0.1);
    ck_assert(isinf(a.data[1]) && a.data[1] < 0);
    ck_assert(isinf(a.data[2]) && a.data[2] > 0);
    ck_assert(a.data[3] == 3.0f);
    ck_assert(isnan(a.data[4]));
    sq_npy_free(&a);
    /* Just below the rounding threshold to infinity: FLT_MAX. */
    double edge[2] = {0x1.fffffefffffffp+127, 0x1.ffffffp+127};
    write_npy(p, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 1, edge,
              sizeof edge);
    ck_assert_int_eq(sq_npy_read(p, &a, &err_), 0);
    ck_assert(a.data[0] == 0x1.fffffep+127f);
    ck_assert(isinf(a.data[1]));
    sq_npy_free(&a);

    uint16_t h[5] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x7c00};
    p = sqt_tpath("f2.npy");
    write_npy(p, 3, "{'descr': '<f2', 'fortran_order': False, 'shape': (5,), }", 1, h, sizeof h);
    ck_assert_msg(sq_npy_read(p, &a, &err_) == 0, "%s", err);
    ck_assert_int_eq(a.dtype, SQ_NPY_F2);
    ck_assert(a.data[0] == 1.0f);
    ck_assert(a.data[1] == -2.0f);
    ck_assert(a.data[2] == 65504.0f);
    ck_assert(a.data[3] == 0x1p-24f);
    ck_assert(isinf(a.data[4]));
    sq_npy_free(&a);
}
END_TEST

START_TEST(test_npy_malformed)
{
    float v[4] = {1, 2, 3, 4};
    const char *good = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }";
    sq_error err_ = {0};
    char *err = err_.msg;
    sq_npy a;
    int rc;

    /* Bad magic, empty file, unsupported version. */
    const char *p = sqt_tpath("magic.npy");
    sqt_write_bytes(p, "\x93NUMPX\x01\x00", 8);
    rc = sq_npy_read(p, &a, &err_);
    SQT_EXPECT_ERR(rc, err, p, "magic");
    p = sqt_tpath("empty.npy");
    sqt_write_bytes(p, "", 0);
    rc = sq_npy_read(p, &a, &err_);
    SQT_EXPECT_ERR(rc, err, p, "empty");
    p = sqt_tpath("ver.npy");
    write_npy(p, 4, good, 1, v, sizeof v);
    rc = sq_npy_read(p, &a, &err_);
    SQT_EXPECT_ERR(rc, err, p, "version", "4.0");

    /* Truncated header: in the length field, and in the dict. */
    p = sqt_tpath("trunc1.npy");
    sqt_write_bytes(p, "\x93NUMPY\x01\x00\x40", 9);
    rc = sq_npy_read(p, &a, &err_);
    SQT_EXPECT_ERR(rc, err, p, "truncated header");
    p = sqt_tpath("trunc2.npy");
    sqt_write_bytes(p, "\x93NUMPY", 6);
    rc = sq_npy_read(p, &a, &err_);
    SQT_EXPECT_ERR(rc, err, p, "truncated header");

    /* Header length beyond the file. */
    p = sqt_tpath("hlen.npy");
    sqt_write_bytes(p, "\x93NUMPY\x01\x00\x00\x10{'descr'", 18);
    rc = sq_npy_read(p, &a, &err_);
    SQT_EXPECT_ERR(rc, err, p, "header_len", "beyond the end");
    p = sqt_tpath("hlen2.npy");
    sqt_write_bytes(p, "\x93NUMPY\x02\x00\x00\x00\x00\x80{", 13);
    rc = sq_npy_read(p, &a, &err_);
    SQT_EXPECT_ERR(rc, err, p, "header_len");

    /* Bad dictionaries. */
    npy_fails("d1.npy", 1, "'descr': '<f4', 'fortran_order': False, 'shape': (4,)", 1, v,
              sizeof v, "header", "dictionary");
    npy_fails("d2.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'x': 1}", 1,
              v, sizeof v, "unknown key 'x'", "header");
    npy_fails("d3.npy", 1, "{'descr': '<f4', 'shape': (4,)}", 1, v, sizeof v,
              "header field 'fortran_order'", "missing");
    npy_fails("d4.npy", 1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (4,)}",
              1, v, sizeof v, "header field 'descr'", "twice");
    npy_fails("d5.npy", 1, "{'descr': '<f4', 'fortran_order': false, 'shape': (4,)}", 1, v,
              sizeof v, "header field 'fortran_order'", "True or False");
    npy_fails("d6.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': [4]}", 1, v,
              sizeof v, "header field 'shape'", "tuple");
    npy_fails("d7.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4)}", 1, v,
              sizeof v, "header field 'shape'", "not a tuple");
    npy_fails("d8.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-4,)}", 1, v,
              sizeof v, "header field 'shape'", "negative");
    npy_fails("d9.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,)} x", 1, v,
              sizeof v, "header", "after the dictionary");
    npy_fails("d10.npy", 1, "{'descr': '<f4' 'fortran_order': False, 'shape': (4,)}", 1, v,
              sizeof v, "header field 'descr'", "expected ','");
    npy_fails("d11.npy", 1, "{'descr' '<f4', 'fortran_order': False, 'shape': (4,)}", 1, v,
              sizeof v, "header field 'descr'", "expected ':'");
    npy_fails("d12.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,", 1, v,
              sizeof v, "header field 'shape'", "unterminated");
    npy_fails("d13.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4, x)}", 1, v,
              sizeof v, "header field 'shape'", "expected an integer");

    /* Fortran order, unsupported dtypes. */
    npy_fails("fo.npy", 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (4,), }", 1, v,
              sizeof v, "header field 'fortran_order'", "True");
    npy_fails("i4.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }", 1, v,
              sizeof v, "header field 'descr'", "'<i4'");
    npy_fails("be.npy", 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", 1, v,
              sizeof v, "header field 'descr'", "'>f4'");
    npy_fails("pipe.npy", 1, "{'descr': '|f4', 'fortran_order': False, 'shape': (4,), }", 1, v,
              sizeof v, "header field 'descr'", "'|f4'");
    npy_fails("list.npy", 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }",
              1, v, sizeof v, "header field 'descr'", "quoted string");

    /* Data: truncated, trailing. */
    npy_fails("short.npy", 1, good, 1, v, sizeof v - 2, "data truncated",
              "promises 16 bytes of <f4, file has 14");
}
END_TEST

START_TEST(test_npy_data_and_shape)
{
    float v[5] = {1, 2, 3, 4, 5};
    const char *good = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }";
    npy_fails("long.npy", 1, good, 1, v, sizeof v, "4 bytes of trailing data", "<f4");
    npy_fails("short.npy", 2, good, 1, v, 3, "data truncated", "file has 3");
    npy_fails("ovf.npy", 1,
              "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 1,
              v, 0, "header field 'shape'", "product overflows");
    npy_fails("ovf2.npy", 1,
              "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 1,
              v, 0, "header field 'shape'", "64 bits");
    npy_fails("ovf3.npy", 1,
              "{'descr': '<f8', 'fortran_order': False, 'shape': (3000000000, 1000000000), }", 1,
              v, 0, "header field 'shape'", "product overflows");
    /* A zero dimension makes any other dimension harmless. */
    const char *p = sqt_tpath("zero.npy");
    write_npy(p, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 18446744073709551615), }",
              1, v, 0);
    sq_npy a;
    sq_error err_ = {0};
    char *err = err_.msg;
    ck_assert_msg(sq_npy_read(p, &a, &err_) == 0, "%s", err);
    ck_assert_uint_eq(a.n, 0);
    sq_npy_free(&a);
    /* A scalar holds one element. */
    npy_fails("scalar.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 1, v,
              8, "trailing", "<f4");
    p = sqt_tpath("missing.npy");
    int rc = sq_npy_read(p, &a, &err_);
    SQT_EXPECT_ERR(rc, err, p, "cannot open");
    rc = sq_npy_read(sqt_tmpdir, &a, &err_);
    SQT_EXPECT_ERR(rc, err, sqt_tmpdir, "directory");
}
END_TEST

START_TEST(test_raw)
{
    float v[3] = {1, -2, 3.5f};
    const char *p = sqt_tpath("x.f32");
    sqt_write_bytes(p, v, sizeof v);
    sq_npy a;
    sq_error err_ = {0};
    char *err = err_.msg;
    ck_assert_msg(sq_npy_read_raw(p, &a, &err_) == 0, "%s", err);
    ck_assert_uint_eq(a.n, 3);
    ck_assert_int_eq(a.ndim, 1);
    ck_assert_int_eq(a.dtype, SQ_NPY_RAW_F4);
    ck_assert_int_eq(memcmp(a.data, v, sizeof v), 0);
    sq_npy_free(&a);
    sqt_write_bytes(p, v, 0);
    ck_assert_int_eq(sq_npy_read_raw(p, &a, &err_), 0);
    ck_assert_uint_eq(a.n, 0);
    sq_npy_free(&a);
    sqt_write_bytes(p, v, 7);
    int rc = sq_npy_read_raw(p, &a, &err_);
    SQT_EXPECT_ERR(rc, err, p, "multiple of 4");
}
END_TEST

START_TEST(test_write_errors)
{
    float v[2] = {1, 2};
    uint64_t sh = 2;
    sq_error err_ = {0};
    char *err = err_.msg;
    const char *p = sqt_tpath("no-such-dir/x.npy");
    int rc = sq_npy_write_f32(p, v, &sh, 1, &err_);
    SQT_EXPECT_ERR(rc, err, p, "cannot create");
    /* A write that fails leaves the existing file as it was. */
    p = sqt_tpath("keep.npy");
    ck_assert_int_eq(sq_npy_write_f32(p, v, &sh, 1, &err_), 0);
    uint64_t big[2] = {UINT64_MAX, 3};
    rc = sq_npy_write_f32(p, v, big, 2, &err_);
    SQT_EXPECT_ERR(rc, err, p, "shape", "overflows");
    sq_npy a;
    ck_assert_int_eq(sq_npy_read(p, &a, &err_), 0);
    ck_assert_uint_eq(a.n, 2);
    sq_npy_free(&a);
    /* A symbolic link stays one: the file it points to is rewritten. */
    const char *target = sqt_tpath("target.npy"), *lnk = sqt_tpath("link.npy");
    ck_assert_int_eq(sq_npy_write_f32(target, v, &sh, 1, &err_), 0);
    ck_assert_int_eq(symlink("target.npy", lnk), 0);
    float w[3] = {7, 8, 9};
    uint64_t sh3 = 3;
    ck_assert_msg(sq_npy_write_f32(lnk, w, &sh3, 1, &err_) == 0, "%s", err);
    struct stat st;
    ck_assert_int_eq(lstat(lnk, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_int_eq(sq_npy_read(target, &a, &err_), 0);
    ck_assert_uint_eq(a.n, 3);
    ck_assert(a.data[2] == 9.0f);
    sq_npy_free(&a);
    /* A device that is full: every write error is seen. */
    if (access("/dev/full", W_OK) == 0) {
        float *x = calloc(1 << 16, sizeof *x);
        uint64_t n = 1 << 16;
        rc = sq_npy_write_f32("/dev/full", x, &n, 1, &err_);
        SQT_EXPECT_ERR(rc, err, "/dev/full", "write failed");
        sq_st_tensor t = {"t", SQ_ST_F32, 1, {n}, x};
        rc = sq_st_write("/dev/full", &t, 1, NULL, 0, &err_);
        SQT_EXPECT_ERR(rc, err, "/dev/full", "write failed");
        free(x);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* safetensors                                                              */
/* ------------------------------------------------------------------------ */

/* A file with the given JSON header (N = its length) and data. */
static void write_st(const char *path, const char *json, const void *data, size_t len)
{
    size_t n = strlen(json);
    unsigned char *b = malloc(8 + n + len);
    for (int k = 0; k < 8; k++) b[k] = (unsigned char)((uint64_t)n >> (8 * k));
    memcpy(b + 8, json, n);
    if (len) memcpy(b + 8 + n, data, len);
    sqt_write_bytes(path, b, 8 + n + len);
    free(b);
}

static void st_fails(const char *name, const char *json, size_t datalen, const char *w1,
                     const char *w2)
{
    unsigned char data[256] = {0};
    const char *p = sqt_tpath(name);
    write_st(p, json, data, datalen);
    sq_st_file f;
    sq_error err_ = {0};
    char *err = err_.msg;
    int rc = sq_st_read(p, &f, &err_);
    SQT_EXPECT_ERR(rc, err, p, w1, w2);
    ck_assert_ptr_null(f.tensors);
}

START_TEST(test_st_roundtrip)
{
    uint8_t codes[5] = {1, 2, 3, 250, 0};
    float scales[3] = {0.5f, -1.0f, 3.25f};
    uint16_t half[2] = {0x3c00, 0x4000};
    double one = 1.0;
    sq_st_tensor t[5];
    memset(t, 0, sizeof t);
    t[0] = (sq_st_tensor){.name = "codes", .dtype = SQ_ST_U8, .ndim = 1, .shape = {5}, .data = codes};
    t[1] = (sq_st_tensor){.name = "scales", .dtype = SQ_ST_F32, .ndim = 2, .shape = {3, 1}, .data = scales};
    t[2] = (sq_st_tensor){.name = "empty", .dtype = SQ_ST_F32, .ndim = 2, .shape = {0, 7}, .data = NULL};
    t[3] = (sq_st_tensor){.name = "half \"q\"", .dtype = SQ_ST_BF16, .ndim = 1, .shape = {2}, .data = half};
    t[4] = (sq_st_tensor){.name = "scalar", .dtype = SQ_ST_F64, .ndim = 0, .data = &one};
    sq_st_kv m[2] = {{"format", "test/1"}, {"note", "tab\there \\ \"quoted\""}};
    const char *p = sqt_tpath("rt.safetensors");
    sq_error err_ = {0};
    char *err = err_.msg;
    ck_assert_msg(sq_st_write(p, t, 5, m, 2, &err_) == 0, "%s", err);
    size_t len;
    unsigned char *b = sqt_read_bytes(p, &len);
    uint64_t n = 0;
    for (int k = 0; k < 8; k++) n |= (uint64_t)b[k] << (8 * k);
    ck_assert_uint_eq(n % 8, 0);
    ck_assert_uint_eq(len, 8 + n + 5 + 12 + 0 + 4 + 8);
    free(b);

    sq_st_file f;
    ck_assert_msg(sq_st_read(p, &f, &err_) == 0, "%s", err);
    ck_assert_uint_eq(f.ntensors, 5);
    ck_assert_uint_eq(f.nmeta, 2);
    ck_assert_str_eq(sq_st_meta_get(&f, "note"), "tab\there \\ \"quoted\"");
    ck_assert_ptr_null(sq_st_meta_get(&f, "nope"));
    const sq_st_entry *e = sq_st_find(&f, "codes");
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->dtype, SQ_ST_U8);
    ck_assert_uint_eq(e->begin, 0);
    ck_assert_uint_eq(e->end, 5);
    ck_assert_int_eq(memcmp(e->data, codes, 5), 0);
    e = sq_st_find(&f, "scales");
    ck_assert_int_eq(e->ndim, 2);
    ck_assert_uint_eq(e->shape[0], 3);
    ck_assert_uint_eq(e->nelem, 3);
    ck_assert_uint_eq(e->begin, 5); /* in the order given */
    ck_assert_int_eq(memcmp(e->data, scales, sizeof scales), 0);
    e = sq_st_find(&f, "empty");
    ck_assert_uint_eq(e->nelem, 0);
    ck_assert_uint_eq(e->begin, e->end);
    e = sq_st_find(&f, "half \"q\"");
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->dtype, SQ_ST_BF16);
    ck_assert_int_eq(memcmp(e->data, half, 4), 0);
    e = sq_st_find(&f, "scalar");
    ck_assert_int_eq(e->ndim, 0);
    ck_assert_uint_eq(e->nelem, 1);
    ck_assert_int_eq(memcmp(e->data, &one, 8), 0);
    sq_st_free(&f);

    /* No tensors, no metadata. */
    ck_assert_int_eq(sq_st_write(p, NULL, 0, NULL, 0, &err_), 0);
    ck_assert_msg(sq_st_read(p, &f, &err_) == 0, "%s", err);
    ck_assert_uint_eq(f.ntensors, 0);
    sq_st_free(&f);

    /* The writer refuses duplicate and reserved names. */
    t[1].name = "codes";
    ck_assert_int_ne(sq_st_write(p, t, 2, NULL, 0, &err_), 0);
    ck_assert_ptr_nonnull(strstr(err, "codes"));
    t[1].name = "__metadata__";
    ck_assert_int_ne(sq_st_write(p, t, 2, NULL, 0, &err_), 0);

    /* Dtype names. */
    for (int d = 0; d < SQ_ST_NDTYPES; d++)
        ck_assert_int_eq(sq_st_dtype_parse(sq_st_dtype_name((sq_st_dtype)d)), d);
    ck_assert_int_eq(sq_st_dtype_parse("F33"), -1);
    ck_assert_uint_eq(sq_st_dtype_size(SQ_ST_BF16), 2);
    ck_assert_uint_eq(sq_st_dtype_size(SQ_ST_I64), 8);
}
END_TEST

START_TEST(test_st_foreign)
{
    /* Written by another tool: tensors out of offset order, padding, no
    ** metadata. */
    const char *json = "{\"b\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[4,8]},"
                       "\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}   ";
    unsigned char data[8] = {0, 0x3c, 0, 0x40, 7, 0, 0, 0};
    const char *p = sqt_tpath("foreign.safetensors");
    write_st(p, json, data, 8);
    sq_st_file f;
    sq_error err_ = {0};
    char *err = err_.msg;
    ck_assert_msg(sq_st_read(p, &f, &err_) == 0, "%s", err);
    ck_assert_str_eq(f.tensors[0].name, "a");
    ck_assert_int_eq(sq_st_find(&f, "b")->data[0], 7);
    sq_st_free(&f);
}
END_TEST

START_TEST(test_st_malformed)
{
    sq_st_file f;
    sq_error err_ = {0};
    char *err = err_.msg;
    /* Header length beyond the file, and too short a file. */
    const char *p = sqt_tpath("hl.safetensors");
    sqt_write_bytes(p, "\x00\x01\x00\x00\x00\x00\x00\x00{}", 10);
    int rc = sq_st_read(p, &f, &err_);
    SQT_EXPECT_ERR(rc, err, p, "header length", "beyond the end");
    p = sqt_tpath("short.safetensors");
    sqt_write_bytes(p, "\x02\x00\x00", 3);
    rc = sq_st_read(p, &f, &err_);
    SQT_EXPECT_ERR(rc, err, p, "too short");

    st_fails("json.safetensors", "{\"a\":{\"dtype\":\"U8\",", 0, "header", "invalid JSON");
    st_fails("json2.safetensors", "{\"a\":1} x", 0, "header", "invalid JSON");
    st_fails("notobj.safetensors", "[1, 2]  ", 0, "header", "'{'");
    st_fails("range.safetensors",
             "{\"t\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}}", 4,
             "tensor 't'", "field 'data_offsets': end 8 beyond the data section (4 bytes)");
    st_fails("overlap.safetensors",
             "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
             "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}",
             6, "tensor 'b'", "overlaps tensor 'a'");
    st_fails("gap.safetensors",
             "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
             "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[6,10]}}",
             10, "data section", "[4, 6) belong to no tensor");
    st_fails("tail.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
             9, "data section", "[4, 9)");
    st_fails("size.safetensors",
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
             "tensor 'a'", "field 'shape': [3] of F32 is 12 bytes");
    st_fails("dtype.safetensors",
             "{\"a\":{\"dtype\":\"F33\",\"shape\":[3],\"data_offsets\":[0,3]}}", 3, "tensor 'a'",
             "field 'dtype': unknown dtype 'F33'");
    st_fails("dtype2.safetensors",
             "{\"a\":{\"dtype\":7,\"shape\":[3],\"data_offsets\":[0,3]}}", 3, "tensor 'a'",
             "field 'dtype'");
    st_fails("neg.safetensors",
             "{\"a\":{\"dtype\":\"U8\",\"shape\":[-3],\"data_offsets\":[0,3]}}", 3, "tensor 'a'",
             "field 'shape': entry 0 is not a non-negative integer");
    st_fails("frac.safetensors",
             "{\"a\":{\"dtype\":\"U8\",\"shape\":[1.5],\"data_offsets\":[0,3]}}", 3, "tensor 'a'",
             "field 'shape'");
    st_fails("ovf.safetensors",
             "{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,3]}}",
             3, "tensor 'a'", "product overflows");
    st_fails("offs.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0]}}",
             3, "tensor 'a'", "field 'data_offsets'");
    st_fails("back.safetensors",
             "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[3,0]}}", 3, "tensor 'a'",
             "begin 3 > end 0");
    st_fails("field.safetensors",
             "{\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3],\"x\":1}}", 3,
             "tensor 'a'", "unknown field 'x'");
    st_fails("miss.safetensors", "{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,3]}}", 3,
             "tensor 'a'", "field 'shape': missing");
    st_fails("dup.safetensors",
             "{\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]},"
             "\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[3,6]}}",
             6, "tensor 'a'", "given twice");
    st_fails("meta.safetensors", "{\"__metadata__\":{\"k\":1}}", 0, "__metadata__ 'k'",
             "not a string");
    st_fails("meta2.safetensors", "{\"__metadata__\":[]}", 0, "__metadata__", "object");
    st_fails("notens.safetensors", "{\"a\":[1]}", 0, "tensor 'a'", "expected an object");
    p = sqt_tpath("nul.safetensors");
    sqt_write_bytes(p, "\x04\x00\x00\x00\x00\x00\x00\x00{}\x00 ", 12);
    rc = sq_st_read(p, &f, &err_);
    SQT_EXPECT_ERR(rc, err, p, "NUL");
    p = sqt_tpath("missing.safetensors");
    rc = sq_st_read(p, &f, &err_);
    SQT_EXPECT_ERR(rc, err, p, "cannot open");
}
END_TEST

/* ------------------------------------------------------------------------ */

int main(void)
{
    if (sqt_scratch_begin("check_npy")) return 99;
    Suite *s = suite_create("npy");
    TCase *tc = tcase_create("npy");
    tcase_add_test(tc, test_npy_roundtrip);
    tcase_add_test(tc, test_npy_versions);
    tcase_add_test(tc, test_npy_dtypes);
    tcase_add_test(tc, test_npy_malformed);
    tcase_add_test(tc, test_npy_data_and_shape);
    tcase_add_test(tc, test_raw);
    tcase_add_test(tc, test_write_errors);
    suite_add_tcase(s, tc);
    TCase *ts = tcase_create("safetensors");
    tcase_add_test(ts, test_st_roundtrip);
    tcase_add_test(ts, test_st_foreign);
    tcase_add_test(ts, test_st_malformed);
    suite_add_tcase(s, ts);
    return sqt_run_scratch(s);
}
