/*
** check_readers.c -- the safetensors reader on a mapping, a pipe and a
** buffer; its validation, conversions, streaming writer and page release;
** and the .npy reader on a buffer.
**
** Every malformed input must fail with a message naming the file and the
** field at fault, the same message whether it was mapped or parsed from
** memory. The conversions are checked against values computed by hand.
** Scratch files live in a directory under TMPDIR, removed at the end.
*/
#include "shardq/codec.h"
#include "check_util.h"
#include "shardq/trace.h"
#include "trace/input.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* No temporary file of a writer is left in the scratch directory. */
static void assert_no_tmp(void)
{
    DIR *d = opendir(sqt_tmpdir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d)))
        ck_assert_msg(strstr(e->d_name, ".tmp.") == NULL, "left over: %s", e->d_name);
    closedir(d);
}

/* ------------------------------------------------------------------------ */
/* safetensors images                                                       */
/* ------------------------------------------------------------------------ */

/* A file image: N = strlen(json) as 8 bytes little-endian, the JSON, the
** data. Exactly that many bytes are allocated, so that a sanitizer sees any
** read past the end. */
static unsigned char *st_image(const char *json, const void *data, size_t len, size_t *total)
{
    size_t n = strlen(json);
    *total = 8 + n + len;
    unsigned char *b = malloc(*total);
    ck_assert_ptr_nonnull(b);
    for (int k = 0; k < 8; k++) b[k] = (unsigned char)((uint64_t)n >> (8 * k));
    memcpy(b + 8, json, n);
    if (len) memcpy(b + 8 + n, data, len);
    return b;
}

/* The image fails both as a mapped file and as a buffer, with one message
** naming the file and containing w1 and w2. */
static void st_bad_image(const char *name, const unsigned char *img, size_t len, const char *w1,
                         const char *w2)
{
    const char *p = sqt_tpath(name);
    sqt_write_bytes(p, img, len);
    sq_st_file f;
    sq_error err_ = {0}, err2_ = {0};
    char *err = err_.msg, *err2 = err2_.msg;
    int rc = sq_st_open(p, &f, &err_);
    SQT_EXPECT_ERR(rc, err, p, w1, w2);
    ck_assert_int_eq(rc, SQ_ERR_FORMAT); /* a malformed file, by its kind */
    ck_assert_int_eq(err_.status, SQ_ERR_FORMAT);
    ck_assert_ptr_null(f.tensors);
    ck_assert_ptr_null(f.map);
    unsigned char *copy = malloc(len ? len : 1);
    if (len) memcpy(copy, img, len);
    rc = sq_st_parse(p, copy, len, &f, &err2_);
    ck_assert_int_ne(rc, 0);
    ck_assert_int_eq(rc, SQ_ERR_FORMAT);
    ck_assert_str_eq(err2, err);
    ck_assert_ptr_null(f.tensors);
    free(copy);
}

static void st_bad(const char *name, const char *json, size_t datalen, const char *w1,
                   const char *w2)
{
    unsigned char data[512] = {0};
    ck_assert_uint_le(datalen, sizeof data);
    size_t len;
    unsigned char *img = st_image(json, data, datalen, &len);
    st_bad_image(name, img, len, w1, w2);
    free(img);
}

/* Parses json + data from memory and expects success. */
static void st_good(const char *json, const void *data, size_t datalen, sq_st_file *f,
                    unsigned char **img)
{
    size_t len;
    *img = st_image(json, data, datalen, &len);
    sq_error err_ = {0};
    char *err = err_.msg;
    ck_assert_msg(sq_st_parse("good.st", *img, len, f, &err_) == 0, "%s", err);
}

/* A multi-tensor file of several dtypes with metadata; *len its size. */
static unsigned char *sample_file(const char *path, size_t *len)
{
    static uint8_t codes[7] = {1, 2, 3, 4, 5, 6, 250};
    static float w[6] = {0.5f, -1.0f, 3.25f, 0.0f, -0.0f, 1e-40f};
    static uint16_t h[3] = {0x3c00, 0xc000, 0x0001};
    static double d[2] = {0.1, -2.5};
    sq_st_tensor t[5] = {
        {.name = "codes", .dtype = SQ_ST_U8, .ndim = 1, .shape = {7}, .data = codes},
        {.name = "w", .dtype = SQ_ST_F32, .ndim = 2, .shape = {2, 3}, .data = w},
        {.name = "empty", .dtype = SQ_ST_BF16, .ndim = 2, .shape = {0, 4}, .data = NULL},
        {.name = "h", .dtype = SQ_ST_F16, .ndim = 1, .shape = {3}, .data = h},
        {.name = "d", .dtype = SQ_ST_F64, .ndim = 1, .shape = {2}, .data = d},
    };
    sq_st_kv m[2] = {{"format", "test/1"}, {"note", "a \"quoted\" value"}};
    sq_error err_ = {0};
    char *err = err_.msg;
    ck_assert_msg(sq_st_write(path, t, 5, m, 2, &err_) == 0, "%s", err);
    return sqt_read_bytes(path, len);
}

/* Two parsed files describe the same tensors, metadata and data. */
static void assert_same_file(const sq_st_file *a, const sq_st_file *b)
{
    ck_assert_uint_eq(a->ntensors, b->ntensors);
    ck_assert_uint_eq(a->nmeta, b->nmeta);
    ck_assert_uint_eq(a->header_len, b->header_len);
    ck_assert_uint_eq(a->data_len, b->data_len);
    if (a->data_len) ck_assert_int_eq(memcmp(a->data, b->data, (size_t)a->data_len), 0);
    for (size_t i = 0; i < a->ntensors; i++) {
        const sq_st_entry *x = &a->tensors[i], *y = &b->tensors[i];
        ck_assert_str_eq(x->name, y->name);
        ck_assert_int_eq(x->dtype, y->dtype);
        ck_assert_int_eq(x->ndim, y->ndim);
        for (int k = 0; k < x->ndim; k++) ck_assert_uint_eq(x->shape[k], y->shape[k]);
        ck_assert_uint_eq(x->nelem, y->nelem);
        ck_assert_uint_eq(x->begin, y->begin);
        ck_assert_uint_eq(x->end, y->end);
        ck_assert_ptr_eq(x->data, a->data + x->begin);
        ck_assert_ptr_eq(y->data, b->data + y->begin);
    }
    for (size_t i = 0; i < a->nmeta; i++)
        ck_assert_str_eq(sq_st_meta_get(b, a->meta[i].key), a->meta[i].value);
}

/* ------------------------------------------------------------------------ */
/* Standard input as a pipe                                                 */
/* ------------------------------------------------------------------------ */

typedef struct piped {
    pid_t pid;
    int saved; /* the test's own standard input */
} piped;

/* Makes standard input a pipe that a child fills with img[0..len), in
** small pieces so that the reader sees short reads, then closes, or, when
** endless, follows with zeros until the reader closes it. */
static void stdin_pipe(piped *p, const unsigned char *img, size_t len, int endless)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    p->saved = dup(0);
    ck_assert_int_ge(p->saved, 0);
    p->pid = fork();
    ck_assert_int_ge(p->pid, 0);
    if (p->pid == 0) {
        close(fds[0]);
        signal(SIGPIPE, SIG_DFL);
        for (size_t i = 0; i < len; i += 13)
            if (write(fds[1], img + i, len - i < 13 ? len - i : 13) < 0) _exit(1);
        static const unsigned char zeros[65536];
        while (endless)
            if (write(fds[1], zeros, sizeof zeros) < 0) _exit(0);
        _exit(close(fds[1]) == 0 ? 0 : 1);
    }
    close(fds[1]);
    ck_assert_int_eq(dup2(fds[0], 0), 0);
    close(fds[0]);
}

/* Gives the test its standard input back and reaps the child: its exit
** status (an endless writer ends when the pipe breaks). */
static int stdin_restore(piped *p)
{
    ck_assert_int_eq(dup2(p->saved, 0), 0);
    close(p->saved);
    int status;
    ck_assert_int_eq(waitpid(p->pid, &status, 0), p->pid);
    if (WIFSIGNALED(status)) return WTERMSIG(status) == SIGPIPE ? 0 : 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

/* ------------------------------------------------------------------------ */
/* Mapping, pipes, buffers                                                  */
/* ------------------------------------------------------------------------ */

START_TEST(test_st_map_pipe_buffer)
{
    const char *p = sqt_tpath("sample.st");
    size_t len;
    unsigned char *img = sample_file(p, &len);
    sq_error err_ = {0};
    char *err = err_.msg;

    sq_st_file fm, fp, fb;
    ck_assert_msg(sq_st_open(p, &fm, &err_) == 0, "%s", err);
    ck_assert_ptr_nonnull(fm.map); /* mapped, not copied */
    ck_assert_ptr_null(fm.copy);
    ck_assert_ptr_eq(fm.data, (const unsigned char *)fm.map + 8 + fm.header_len);
    ck_assert_uint_eq(fm.ntensors, 5);
    ck_assert_str_eq(sq_st_meta_get(&fm, "note"), "a \"quoted\" value");
    ck_assert_str_eq(fm.name, p);

    /* The same bytes through a pipe on standard input: read into memory. */
    piped in;
    stdin_pipe(&in, img, len, 0);
    int rc = sq_st_open("-", &fp, &err_);
    ck_assert_int_eq(stdin_restore(&in), 0);
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_ptr_null(fp.map);
    ck_assert_ptr_nonnull(fp.copy);
    assert_same_file(&fm, &fp);

    /* And parsed in place from a buffer: the data point into it. */
    ck_assert_msg(sq_st_parse("buf.st", img, len, &fb, &err_) == 0, "%s", err);
    ck_assert_ptr_null(fb.map);
    ck_assert_ptr_null(fb.copy);
    ck_assert_ptr_eq(fb.data, img + 8 + fb.header_len);
    ck_assert_str_eq(fb.name, "buf.st");
    assert_same_file(&fm, &fb);
    sq_st_release(&fb, &fb.tensors[0]); /* a no-op on a buffer */
    sq_st_release(&fp, NULL);
    ck_assert_int_eq(fb.tensors[0].data[0], 1);

    /* sq_st_read is sq_st_open. */
    sq_st_file fr;
    ck_assert_int_eq(sq_st_read(p, &fr, &err_), 0);
    ck_assert_ptr_nonnull(fr.map);
    assert_same_file(&fm, &fr);

    sq_st_free(&fm);
    sq_st_free(&fp);
    sq_st_free(&fb);
    sq_st_free(&fr);
    sq_st_free(&fr); /* twice: a zeroed struct */
    ck_assert_ptr_null(fr.tensors);
    free(img);

    /* A buffer without a name, and without bytes. */
    rc = sq_st_parse(NULL, NULL, 0, &fb, &err_);
    SQT_EXPECT_ERR(rc, err, "(memory)", "too short");
    rc = sq_st_parse("x.st", NULL, 5, &fb, &err_);
    SQT_EXPECT_ERR(rc, err, "x.st", "no buffer");
}
END_TEST

START_TEST(test_st_open_errors)
{
    sq_st_file f;
    sq_error err_ = {0};
    char *err = err_.msg;
    const char *p = sqt_tpath("missing.st");
    int rc = sq_st_open(p, &f, &err_);
    SQT_EXPECT_ERR(rc, err, p, "cannot open");
    rc = sq_st_open(sqt_tmpdir, &f, &err_);
    SQT_EXPECT_ERR(rc, err, sqt_tmpdir, "is a directory");
    /* An empty file cannot be mapped (length 0): it fails as too short. */
    p = sqt_tpath("empty.st");
    sqt_write_bytes(p, "", 0);
    rc = sq_st_open(p, &f, &err_);
    SQT_EXPECT_ERR(rc, err, p, "0 bytes", "too short");
    ck_assert_ptr_null(f.tensors);
    rc = sq_st_open(NULL, &f, &err_);
    SQT_EXPECT_ERR(rc, err, "(null)", "no file name");

    /* A zero-length data section: no tensors, or only empty ones. */
    const char *jsons[] = {
        "{}",
        "{\"__metadata__\":{\"k\":\"v\"}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
        "\"b\":{\"dtype\":\"F64\",\"shape\":[3,0,5],\"data_offsets\":[0,0]}}",
    };
    for (size_t i = 0; i < sizeof jsons / sizeof *jsons; i++) {
        size_t len;
        unsigned char *img = st_image(jsons[i], NULL, 0, &len);
        p = sqt_tpath("nodata.st");
        sqt_write_bytes(p, img, len);
        ck_assert_msg(sq_st_open(p, &f, &err_) == 0, "%s: %s", jsons[i], err);
        ck_assert_uint_eq(f.data_len, 0);
        for (size_t k = 0; k < f.ntensors; k++) {
            ck_assert_uint_eq(f.tensors[k].nelem, 0);
            ck_assert_int_eq(sq_st_to_f32(&f, &f.tensors[k], NULL, &err_), 0);
            ck_assert_int_eq(sq_st_to_f64(&f, &f.tensors[k], NULL, &err_), 0);
            sq_st_release(&f, &f.tensors[k]);
        }
        sq_st_release(&f, NULL);
        sq_st_free(&f);
        free(img);
    }
}
END_TEST

/* Every proper prefix of a valid file fails cleanly, mapped and in memory;
** so does the file with one byte more. */
START_TEST(test_st_every_prefix)
{
    const char *p = sqt_tpath("full.st");
    size_t len;
    unsigned char *img = sample_file(p, &len);
    const char *cut = sqt_tpath("cut.st");
    sq_error err_ = {0}, err2_ = {0};
    char *err = err_.msg, *err2 = err2_.msg;
    for (size_t n = 0; n < len; n++) {
        sq_st_file f;
        unsigned char *b = malloc(n ? n : 1);
        memcpy(b, img, n);
        err[0] = '\0';
        int rc = sq_st_parse(cut, b, n, &f, &err_);
        ck_assert_msg(rc != 0, "a prefix of %zu of %zu bytes was accepted", n, len);
        ck_assert_msg(strstr(err, cut) != NULL, "cut %zu: message lacks the file name: %s", n,
                      err);
        ck_assert_ptr_null(f.tensors);
        sqt_write_bytes(cut, b, n);
        err2[0] = '\0';
        rc = sq_st_open(cut, &f, &err2_);
        ck_assert_msg(rc != 0, "a file of %zu of %zu bytes was accepted", n, len);
        ck_assert_str_eq(err2, err);
        free(b);
    }
    unsigned char *longer = malloc(len + 1);
    memcpy(longer, img, len);
    longer[len] = 0;
    sq_st_file f;
    int rc = sq_st_parse(cut, longer, len + 1, &f, &err_);
    SQT_EXPECT_ERR(rc, err, cut, "data section", "belong to no tensor");
    /* The whole file itself is fine. */
    ck_assert_msg(sq_st_parse(cut, longer, len, &f, &err_) == 0, "%s", err);
    sq_st_free(&f);
    free(longer);
    free(img);
}
END_TEST

START_TEST(test_st_header_length)
{
    sq_error err_ = {0};
    char *err = err_.msg;
    sq_st_file f;
    /* N one byte beyond the file, and absurdly large. */
    unsigned char b[18] = {9, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
    st_bad_image("hl1.st", b, 16, "header length 9 goes beyond the end of the file",
                 "(16 bytes)");
    for (int k = 0; k < 8; k++) b[k] = 0xff;
    st_bad_image("hl2.st", b, 16, "header length 18446744073709551615", "beyond the end");
    memset(b, 0, 8);
    b[7] = 0x80;
    st_bad_image("hl3.st", b, 16, "header length 9223372036854775808", "beyond the end");
    /* Too short for "{}". */
    memset(b, 0, 8);
    b[0] = 1;
    st_bad_image("hl4.st", b, 16, "header length 1", "too short for a JSON object");
    b[0] = 0;
    st_bad_image("hl5.st", b, 8, "header length 0", "too short");
    st_bad_image("hl6.st", b, 7, "7 bytes", "too short for the header length");
    /* A header that does not start with '{', and one with a NUL. */
    st_bad("nobrace.st", " {}", 0, "header", "does not start with '{'");
    memcpy(b, "\x04\0\0\0\0\0\0\0{\0} ", 12);
    st_bad_image("nul.st", b, 12, "header", "NUL byte at byte 1");
    /* Over the limit, in a sparse file that really is that long (the
    ** mapping costs no memory). */
    const char *p = sqt_tpath("huge.st");
    FILE *fp = fopen(p, "wb");
    ck_assert_ptr_nonnull(fp);
    uint64_t n = SQ_ST_HEADER_MAX + 1;
    for (int k = 0; k < 8; k++) fputc((int)((n >> (8 * k)) & 0xff), fp);
    fputc('{', fp);
    ck_assert_int_eq(fclose(fp), 0);
    ck_assert_int_eq(truncate(p, (off_t)(8 + n + 16)), 0);
    int rc = sq_st_open(p, &f, &err_);
    SQT_EXPECT_ERR(rc, err, p, "header length 100000001 exceeds the limit of 100000000 bytes");
    unlink(p);
}
END_TEST

START_TEST(test_st_offsets)
{
    st_bad("end.st", "{\"t\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}}", 4,
           "tensor 't'", "field 'data_offsets': end 8 beyond the data section (4 bytes)");
    st_bad("far.st",
           "{\"t\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[1000000,1000004]}}", 4,
           "tensor 't'", "end 1000004 beyond the data section");
    st_bad("back.st", "{\"t\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[3,0]}}", 3,
           "tensor 't'", "begin 3 > end 0");
    st_bad("one.st", "{\"t\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0]}}", 3,
           "tensor 't'", "field 'data_offsets': expected [begin, end]");
    st_bad("three.st", "{\"t\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3,3]}}", 3,
           "tensor 't'", "field 'data_offsets'");
    st_bad("negoff.st", "{\"t\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[-1,2]}}", 3,
           "tensor 't'", "field 'data_offsets'");
    st_bad("stroff.st", "{\"t\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[\"0\",3]}}",
           3, "tensor 't'", "field 'data_offsets'");
    st_bad("bigoff.st",
           "{\"t\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[18446744073709551613,"
           "18446744073709551616]}}",
           3, "tensor 't'", "field 'data_offsets'");
    /* The shape and the span must agree. */
    st_bad("span.st", "{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
           "tensor 't'", "field 'shape': [3] of F32 is 12 bytes, but data_offsets [0, 8] span 8");
}
END_TEST

START_TEST(test_st_overlap_gap)
{
    st_bad("overlap.st",
           "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
           "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}",
           6, "tensor 'b'", "[2, 6] overlaps tensor 'a' [0, 4]");
    st_bad("same.st",
           "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
           "\"b\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
           4, "field 'data_offsets'", "overlaps tensor");
    /* An empty tensor inside another one is an overlap too. */
    st_bad("inside.st",
           "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
           "\"z\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,4]}}",
           8, "tensor 'z'", "overlaps tensor 'a'");
    st_bad("gap.st",
           "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
           "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[6,10]}}",
           10, "data section", "bytes [4, 6) belong to no tensor (before tensor 'b')");
    st_bad("lead.st", "{\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}", 6,
           "data section", "bytes [0, 2) belong to no tensor");
    st_bad("tail.st", "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 9,
           "data section", "bytes [4, 9) at its end belong to no tensor");
    st_bad("orphan.st", "{}", 3, "data section", "bytes [0, 3)");

    /* Empty tensors at the same offset, and out of order: fine. */
    sq_st_file f;
    unsigned char *img, data[6] = {1, 2, 3, 4, 5, 6};
    st_good("{\"c\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]},"
            "\"z1\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
            "\"z2\":{\"dtype\":\"F16\",\"shape\":[0,9],\"data_offsets\":[4,4]},"
            "\"a\":{\"dtype\":\"U8\",\"shape\":[2,2],\"data_offsets\":[0,4]}}",
            data, 6, &f, &img);
    ck_assert_uint_eq(f.ntensors, 4);
    ck_assert_str_eq(f.tensors[0].name, "a");
    ck_assert_int_eq(sq_st_find(&f, "c")->data[1], 6);
    ck_assert_uint_eq(sq_st_find(&f, "z2")->nelem, 0);
    sq_st_free(&f);
    free(img);
}
END_TEST

START_TEST(test_st_dtypes_fields)
{
    st_bad("dt1.st", "{\"a\":{\"dtype\":\"F33\",\"shape\":[3],\"data_offsets\":[0,3]}}", 3,
           "tensor 'a'", "field 'dtype': unknown dtype 'F33'");
    st_bad("dt2.st", "{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
           "tensor 'a'", "unknown dtype 'f32'");
    st_bad("dt3.st", "{\"a\":{\"dtype\":7,\"shape\":[3],\"data_offsets\":[0,3]}}", 3,
           "tensor 'a'", "field 'dtype': unknown dtype (not a string)");
    st_bad("dt4.st", "{\"a\":{\"shape\":[3],\"data_offsets\":[0,3]}}", 3, "tensor 'a'",
           "field 'dtype': missing");
    st_bad("f1.st", "{\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3],\"x\":1}}",
           3, "tensor 'a'", "unknown field 'x'");
    st_bad("f2.st", "{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]}}",
           3, "tensor 'a'", "field 'dtype': given twice");
    st_bad("f3.st",
           "{\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"shape\":[3],\"data_offsets\":[0,3]}}", 3,
           "tensor 'a'", "field 'shape': given twice");
    st_bad("f4.st", "{\"a\":{\"dtype\":\"U8\",\"shape\":[3]}}", 3, "tensor 'a'",
           "field 'data_offsets': missing");
    st_bad("f5.st", "{\"a\":[1]}", 0, "tensor 'a'", "expected an object");
    st_bad("dup.st",
           "{\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]},"
           "\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[3,6]}}",
           6, "tensor 'a'", "given twice");
    st_bad("m1.st", "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, "__metadata__ 'k'",
           "given twice");
    st_bad("m2.st", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, "__metadata__",
           "given twice");
    st_bad("m3.st", "{\"__metadata__\":{\"k\":1}}", 0, "__metadata__ 'k'", "not a string");
    st_bad("m4.st", "{\"__metadata__\":\"x\"}", 0, "__metadata__", "expected an object");
    st_bad("j1.st", "{\"a\":{\"dtype\":\"U8\",", 0, "header", "invalid JSON");
    st_bad("j2.st", "{\"a\":1} x", 0, "header", "invalid JSON");
    st_bad("j3.st", "{}[]", 0, "header", "invalid JSON");

    /* Every dtype is accepted, with its size; only four are floats. */
    int nfloat = 0;
    for (int d = 0; d < SQ_ST_NDTYPES; d++) {
        char json[160];
        size_t isz = sq_st_dtype_size((sq_st_dtype)d);
        snprintf(json, sizeof json, "{\"t\":{\"dtype\":\"%s\",\"shape\":[2],\"data_offsets\":[0,%zu]}}",
                 sq_st_dtype_name((sq_st_dtype)d), 2 * isz);
        unsigned char data[16] = {0}, *img;
        sq_st_file f;
        st_good(json, data, 2 * isz, &f, &img);
        ck_assert_int_eq(f.tensors[0].dtype, d);
        sq_st_free(&f);
        free(img);
        nfloat += sq_st_dtype_is_float((sq_st_dtype)d);
    }
    ck_assert_int_eq(nfloat, 4);
    ck_assert(sq_st_dtype_is_float(SQ_ST_F32) && sq_st_dtype_is_float(SQ_ST_F16) &&
              sq_st_dtype_is_float(SQ_ST_BF16) && sq_st_dtype_is_float(SQ_ST_F64));
    ck_assert(!sq_st_dtype_is_float(SQ_ST_F8_E4M3) && !sq_st_dtype_is_float(SQ_ST_NDTYPES));
}
END_TEST

START_TEST(test_st_shapes)
{
    st_bad("ovf.st",
           "{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,3]}}",
           3, "tensor 'a'", "field 'shape': product overflows");
    /* The product fits, times the item size it does not. */
    st_bad("ovf2.st",
           "{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,536870912],\"data_offsets\":[0,3]}}",
           3, "tensor 'a'", "product overflows");
    st_bad("neg.st", "{\"a\":{\"dtype\":\"U8\",\"shape\":[-3],\"data_offsets\":[0,3]}}", 3,
           "tensor 'a'", "field 'shape': entry 0 is not a non-negative integer");
    st_bad("frac.st", "{\"a\":{\"dtype\":\"U8\",\"shape\":[3,1.5],\"data_offsets\":[0,3]}}", 3,
           "tensor 'a'", "field 'shape': entry 1 is not a non-negative integer");
    st_bad("inf.st", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1e400],\"data_offsets\":[0,3]}}", 3,
           "tensor 'a'", "field 'shape': entry 0");
    st_bad("str.st", "{\"a\":{\"dtype\":\"U8\",\"shape\":[\"3\"],\"data_offsets\":[0,3]}}", 3,
           "tensor 'a'", "field 'shape': entry 0");
    st_bad("obj.st", "{\"a\":{\"dtype\":\"U8\",\"shape\":3,\"data_offsets\":[0,3]}}", 3,
           "tensor 'a'", "field 'shape': expected an array of integers");
    /* 64 dimensions are fine, 65 are not. */
    for (int nd = 64; nd <= 65; nd++) {
        char json[600];
        int k = snprintf(json, sizeof json, "{\"a\":{\"dtype\":\"U8\",\"shape\":[");
        for (int d = 0; d < nd; d++) k += snprintf(json + k, sizeof json - (size_t)k, "%s1", d ? "," : "");
        snprintf(json + k, sizeof json - (size_t)k, "],\"data_offsets\":[0,1]}}");
        if (nd == 65) {
            st_bad("dims.st", json, 1, "tensor 'a'", "field 'shape': more than 64 dimensions");
        } else {
            sq_st_file f;
            unsigned char one = 7, *img;
            st_good(json, &one, 1, &f, &img);
            ck_assert_int_eq(f.tensors[0].ndim, 64);
            ck_assert_uint_eq(f.tensors[0].nelem, 1);
            sq_st_free(&f);
            free(img);
        }
    }
    /* A zero dimension makes the others harmless; a scalar has one element. */
    sq_st_file f;
    unsigned char *img, data[8] = {0, 0, 0, 0, 0, 0, 0xf0, 0x3f};
    st_good("{\"z\":{\"dtype\":\"F32\",\"shape\":[0,4294967296,4294967296],\"data_offsets\":[0,0]},"
            "\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]}}",
            data, 8, &f, &img);
    ck_assert_uint_eq(sq_st_find(&f, "z")->nelem, 0);
    const sq_st_entry *s = sq_st_find(&f, "s");
    ck_assert_int_eq(s->ndim, 0);
    ck_assert_uint_eq(s->nelem, 1);
    float v = 0;
    double dv = 0;
    sq_error err_ = {0};
    ck_assert_int_eq(sq_st_to_f32(&f, s, &v, &err_), 0);
    ck_assert_int_eq(sq_st_to_f64(&f, s, &dv, &err_), 0);
    ck_assert(v == 1.0f && dv == 1.0);
    sq_st_free(&f);
    free(img);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Conversions                                                              */
/* ------------------------------------------------------------------------ */

/* One tensor of dtype dt and n elements from raw little-endian bytes,
** placed after a 1-byte tensor so that its data are not aligned. */
static void one_tensor(const char *dt, const void *raw, size_t n, size_t isz, sq_st_file *f,
                       unsigned char **img)
{
    char json[256];
    int k = snprintf(json, sizeof json,
                     "{\"pad\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                     "\"t\":{\"dtype\":\"%s\",\"shape\":[%zu],\"data_offsets\":[1,%zu]}}",
                     dt, n, 1 + n * isz);
    if (k % 2) strcat(json, " "); /* an even header: the data start at an odd address */
    unsigned char *data = malloc(1 + n * isz);
    data[0] = 0xAA;
    memcpy(data + 1, raw, n * isz);
    st_good(json, data, 1 + n * isz, f, img);
    free(data);
}

/* Converts tensor 't' both ways and compares with the expected floats (as
** bits) and doubles (exactly, as bits). */
static void expect_values(const char *dt, const void *raw, size_t n, size_t isz,
                          const float *want32, const double *want64)
{
    sq_st_file f;
    unsigned char *img;
    one_tensor(dt, raw, n, isz, &f, &img);
    const sq_st_entry *e = sq_st_find(&f, "t");
    ck_assert((uintptr_t)e->data % 2 == 1);
    float *o32 = malloc(n * sizeof *o32);
    double *o64 = malloc(n * sizeof *o64);
    sq_error err_ = {0};
    char *err = err_.msg;
    ck_assert_msg(sq_st_to_f32(&f, e, o32, &err_) == 0, "%s: %s", dt, err);
    ck_assert_msg(sq_st_to_f64(&f, e, o64, &err_) == 0, "%s: %s", dt, err);
    char what[32];
    snprintf(what, sizeof what, "%s to fp32", dt);
    SQT_ASSERT_FLOATS_BITS(o32, want32, n, what);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(memcmp(&o64[i], &want64[i], 8) == 0, "%s to fp64: element %zu: got %a, want %a",
                      dt, i, o64[i], want64[i]);
    /* every piece [first, first + len) alone (sq_st_to_f32_part) */
    for (size_t first = 0; first < n; first++)
        for (size_t len = 0; first + len <= n; len++) {
            memset(o32, 0xff, n * sizeof *o32);
            ck_assert_int_eq(sq_st_to_f32_part(&f, e, first, len, o32), SQ_OK);
            snprintf(what, sizeof what, "%s [%zu, +%zu)", dt, first, len);
            SQT_ASSERT_FLOATS_BITS(o32, want32 + first, len, what);
        }
    ck_assert_int_eq(sq_st_to_f32_part(&f, e, n, 1, o32), SQ_ERR_ARG);
    ck_assert_int_eq(sq_st_to_f32_part(&f, e, 1, n, o32), SQ_ERR_ARG);
    ck_assert_int_eq(sq_st_to_f32_part(&f, e, 0, UINT64_MAX, o32), SQ_ERR_ARG);
    free(o32);
    free(o64);
    sq_st_free(&f);
    free(img);
}

START_TEST(test_convert_values)
{
    /* F16: normals, the largest, subnormals (smallest, largest), -0. */
    const uint16_t h[8] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x03ff, 0x8001, 0x3555, 0x8000};
    const float h32[8] = {1.0f, -2.0f, 65504.0f, 0x1p-24f, 0x3ffp-24f, -0x1p-24f,
                          0.333251953125f, -0.0f};
    double h64[8];
    for (int i = 0; i < 8; i++) h64[i] = h32[i];
    expect_values("F16", h, 8, 2, h32, h64);

    /* BF16: subnormals 2^-133 and 127 * 2^-133, the smallest normal, the
    ** largest, a plain value, -0. */
    const uint16_t b[7] = {0x3f80, 0x0001, 0x007f, 0x0080, 0x7f7f, 0xc2f7, 0x8000};
    const float b32[7] = {1.0f, 0x1p-133f, 0x7fp-133f, 0x1p-126f, 0x1.fep+127f, -123.5f, -0.0f};
    double b64[7];
    for (int i = 0; i < 7; i++) b64[i] = b32[i];
    expect_values("BF16", b, 7, 2, b32, b64);

    /* F32: copied bit for bit, subnormals and -0 included. */
    const float f32[6] = {0x1p-149f, FLT_MAX, -0.0f, 0.1f, -3.0e-39f, 1.0f};
    double f64w[6];
    for (int i = 0; i < 6; i++) f64w[i] = f32[i];
    expect_values("F32", f32, 6, 4, f32, f64w);

    /* F64 to fp32 rounds to nearest, ties to even; just below the overflow
    ** threshold is FLT_MAX; tiny values go to (signed) zero or the smallest
    ** subnormal. fp64 is exact. */
    const double d[12] = {0.1,
                          1.0 + 0x1p-24,          /* tie: to even, 1 */
                          1.0 + 0x3p-24,          /* tie: to even, 1 + 2^-22 */
                          1.0 + 0x1p-24 + 0x1p-52, /* above the tie: 1 + 2^-23 */
                          0x1.fffffefffffffp+127,
                          -0x1.fffffefffffffp+127,
                          1e-50,
                          -1e-50,
                          0x1p-149,
                          0x1p-150,               /* tie: to even, 0 */
                          0x3p-151,               /* 0.75 of 2^-149: up */
                          -2.5};
    const float d32[12] = {0x1.99999ap-4f, 1.0f, 1.0f + 0x1p-22f, 1.0f + 0x1p-23f, FLT_MAX,
                           -FLT_MAX, 0.0f, -0.0f, 0x1p-149f, 0.0f, 0x1p-149f, -2.5f};
    expect_values("F64", d, 12, 8, d32, d);
}
END_TEST

/* The conversion of tensor 't' fails both ways with a message naming the
** file, the tensor and the rest given. */
static void expect_bad(const char *dt, const void *raw, size_t n, size_t isz, const char *what)
{
    sq_st_file f;
    unsigned char *img;
    one_tensor(dt, raw, n, isz, &f, &img);
    const sq_st_entry *e = sq_st_find(&f, "t");
    float *o32 = malloc(n * sizeof *o32);
    double *o64 = malloc(n * sizeof *o64);
    sq_error err_ = {0};
    char *err = err_.msg;
    char want[256];
    snprintf(want, sizeof want, "good.st: tensor 't': %s", what);
    /* the kind: NaN and Inf are non-finite, a finite F64 beyond fp32 out of
    ** range, an integer dtype a format error */
    int kind = strstr(what, "overflows") ? SQ_ERR_RANGE
               : strstr(what, "dtype")   ? SQ_ERR_FORMAT
                                         : SQ_ERR_NONFINITE;
    int rc = sq_st_to_f32(&f, e, o32, &err_);
    ck_assert_msg(rc != 0, "%s to fp32: no error for %s", dt, what);
    ck_assert_str_eq(err, want);
    ck_assert_msg(rc == kind, "%s to fp32, %s: kind %d, expected %d", dt, what, rc, kind);
    err[0] = '\0';
    rc = sq_st_to_f64(&f, e, o64, &err_);
    ck_assert_msg(rc != 0, "%s to fp64: no error for %s", dt, what);
    ck_assert_str_eq(err, want);
    ck_assert_msg(rc == kind, "%s to fp64, %s: kind %d, expected %d", dt, what, rc, kind);
    /* the whole tensor as one piece: the same kind, no message (a
    ** dtype that is not a float is no tensor it converts) */
    rc = sq_st_to_f32_part(&f, e, 0, n, o32);
    ck_assert_msg(rc == (kind == SQ_ERR_FORMAT ? SQ_ERR_ARG : kind), "%s piece, %s: kind %d", dt,
                  what, rc);
    free(o32);
    free(o64);
    sq_st_free(&f);
    free(img);
}

START_TEST(test_convert_errors)
{
    const float fa[3] = {0.0f, NAN, INFINITY}, fb[2] = {-INFINITY, 1.0f};
    expect_bad("F32", fa, 3, 4, "element 1 is NaN");
    expect_bad("F32", fb, 2, 4, "element 0 is -Inf");
    const uint16_t ha[4] = {0x3c00, 0x3c00, 0x7c00, 0x7e00}, hb[2] = {0xfc00, 0},
                   hc[1] = {0xfe01};
    expect_bad("F16", ha, 4, 2, "element 2 is +Inf");
    expect_bad("F16", hb, 2, 2, "element 0 is -Inf");
    expect_bad("F16", hc, 1, 2, "element 0 is NaN");
    const uint16_t ba[3] = {0, 0x7f80, 0x7fc0}, bb[2] = {0x3f80, 0xff81};
    expect_bad("BF16", ba, 3, 2, "element 1 is +Inf");
    expect_bad("BF16", bb, 2, 2, "element 1 is NaN");
    const double da[6] = {1, 2, 3, 4, 5, 1e300}, db[2] = {-1e300, NAN},
                 dc[3] = {0, -INFINITY, NAN}, dd[2] = {1, 0x1.ffffffp+127},
                 de[1] = {-3.5e38};
    expect_bad("F64", da, 6, 8, "element 5: 1e+300 overflows fp32");
    expect_bad("F64", db, 2, 8, "element 0: -1e+300 overflows fp32");
    expect_bad("F64", dc, 3, 8, "element 1 is -Inf");
    /* Exactly FLT_MAX + half an ulp: rounds to infinity. */
    expect_bad("F64", dd, 2, 8, "element 1: 3.4028235677973366e+38 overflows fp32");
    expect_bad("F64", de, 1, 8, "element 0: -3.5e+38 overflows fp32");

    /* The first bad element of a long tensor, over many chunks, whatever
    ** the thread count. */
    size_t n = 1000003;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)i;
    x[n - 1] = INFINITY;
    x[700001] = NAN;
    x[200005] = -INFINITY;
    expect_bad("F32", x, n, 4, "element 200005 is -Inf");
    x[200005] = 1.0f;
    expect_bad("F32", x, n, 4, "element 700001 is NaN");
    free(x);

    /* Not a float. */
    const char *ints[] = {"I32", "U8", "BOOL", "F8_E4M3", "I64"};
    for (size_t k = 0; k < sizeof ints / sizeof *ints; k++) {
        unsigned char raw[16] = {0};
        char want[160];
        int dt = sq_st_dtype_parse(ints[k]);
        snprintf(want, sizeof want,
                 "field 'dtype': %s is not a floating-point dtype (F32, F16, BF16, F64)", ints[k]);
        expect_bad(ints[k], raw, 2, sq_st_dtype_size((sq_st_dtype)dt), want);
    }
}
END_TEST

/* A million elements of each float dtype converted in parallel chunks,
** against the library's scalar conversions element by element. */
START_TEST(test_convert_large)
{
    size_t n = (1u << 20) + 77;
    uint16_t *h = malloc(n * 2);
    sqt_rng r = {42};
    for (size_t i = 0; i < n; i++) {
        uint16_t v = (uint16_t)sqt_next(&r);
        if ((v & 0x7c00) == 0x7c00) v &= 0xbfff; /* keep it finite as fp16 */
        h[i] = v;
    }
    const char *dts[2] = {"F16", "BF16"};
    for (int k = 0; k < 2; k++) {
        sq_st_file f;
        unsigned char *img;
        if (k == 1)
            for (size_t i = 0; i < n; i++)
                if ((h[i] & 0x7f80) == 0x7f80) h[i] &= 0xbfff; /* finite as bf16 */
        one_tensor(dts[k], h, n, 2, &f, &img);
        const sq_st_entry *e = sq_st_find(&f, "t");
        float *o = malloc(n * sizeof *o);
        double *o64 = malloc(n * sizeof *o64);
        sq_error err_ = {0};
        char *err = err_.msg;
        ck_assert_msg(sq_st_to_f32(&f, e, o, &err_) == 0, "%s", err);
        ck_assert_msg(sq_st_to_f64(&f, e, o64, &err_) == 0, "%s", err);
        for (size_t i = 0; i < n; i++) {
            float want = k == 0 ? sq_f16_to_f32(h[i]) : sq_bf16_to_f32(h[i]);
            SQT_CHECK(sqt_bits(o[i]) == sqt_bits(want) && o64[i] == (double)want &&
                          !signbit(o64[i]) == !signbit(want),
                      "%s element %zu (0x%04x): got %a / %a, want %a", dts[k], i, h[i],
                      (double)o[i], o64[i], (double)want);
        }
        free(o);
        free(o64);
        sq_st_free(&f);
        free(img);
    }
    free(h);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The streaming writer                                                     */
/* ------------------------------------------------------------------------ */

static void fill_tensors(sq_st_tensor *t, uint8_t *buf, size_t *total)
{
    static const uint64_t sizes[4] = {1000, 1, 0, 4097};
    size_t off = 0;
    for (int i = 0; i < 4; i++) {
        static const char *names[4] = {"alpha", "b", "empty", "delta"};
        memset(&t[i], 0, sizeof t[i]);
        t[i].name = names[i];
        t[i].dtype = i == 3 ? SQ_ST_F32 : SQ_ST_U8;
        t[i].ndim = 1;
        t[i].shape[0] = sizes[i];
        t[i].data = buf + off;
        off += sizes[i] * (i == 3 ? 4 : 1);
    }
    for (size_t i = 0; i < off; i++) buf[i] = (uint8_t)(i * 7 + 3);
    *total = off;
}

START_TEST(test_writer_roundtrip)
{
    sq_st_tensor t[4];
    static uint8_t buf[1000 + 1 + 4 * 4097];
    size_t total;
    fill_tensors(t, buf, &total);
    sq_st_kv m[1] = {{"k", "v"}};
    sq_error err_ = {0};
    char *err = err_.msg;
    const char *whole = sqt_tpath("whole.st"), *streamed = sqt_tpath("streamed.st");
    ck_assert_msg(sq_st_write(whole, t, 4, m, 1, &err_) == 0, "%s", err);
    /* Pieces of odd sizes that straddle the tensors, and empty puts. */
    sq_st_writer *w;
    ck_assert_msg(sq_st_writer_open(&w, streamed, t, 4, m, 1, &err_) == 0, "%s", err);
    ck_assert_ptr_nonnull(w);
    struct stat st;
    ck_assert_int_ne(stat(streamed, &st), 0); /* nothing in place before commit */
    for (size_t off = 0, k = 1; off < total; k = k * 3 % 1009) {
        size_t piece = total - off < k ? total - off : k;
        ck_assert_msg(sq_st_writer_put(w, buf + off, piece, &err_) == 0, "%s", err);
        ck_assert_int_eq(sq_st_writer_put(w, NULL, 0, &err_), 0);
        off += piece;
    }
    ck_assert_msg(sq_st_writer_commit(w, &err_) == 0, "%s", err);
    size_t la, lb;
    unsigned char *a = sqt_read_bytes(whole, &la), *b = sqt_read_bytes(streamed, &lb);
    ck_assert_uint_eq(la, lb);
    SQT_ASSERT_BYTES(b, a, la, "streamed file against sq_st_write's");
    free(a);
    free(b);
    sq_st_file f;
    ck_assert_msg(sq_st_open(streamed, &f, &err_) == 0, "%s", err);
    ck_assert_uint_eq(f.ntensors, 4);
    const sq_st_entry *e = sq_st_find(&f, "delta");
    ck_assert_uint_eq(e->nelem, 4097);
    ck_assert_int_eq(memcmp(e->data, t[3].data, 4 * 4097), 0);
    sq_st_free(&f);
    assert_no_tmp();

    /* No tensors at all. */
    ck_assert_int_eq(sq_st_writer_open(&w, streamed, NULL, 0, NULL, 0, &err_), 0);
    ck_assert_msg(sq_st_writer_commit(w, &err_) == 0, "%s", err);
    ck_assert_msg(sq_st_open(streamed, &f, &err_) == 0, "%s", err);
    ck_assert_uint_eq(f.ntensors, 0);
    ck_assert_uint_eq(f.data_len, 0);
    sq_st_free(&f);
}
END_TEST

/* path holds exactly bytes[0..len). */
static void assert_file_is(const char *path, const unsigned char *bytes, size_t len)
{
    size_t l;
    unsigned char *b = sqt_read_bytes(path, &l);
    ck_assert_uint_eq(l, len);
    SQT_ASSERT_BYTES(b, bytes, len, path);
    free(b);
}

START_TEST(test_writer_errors)
{
    sq_st_tensor t[4];
    static uint8_t buf[1000 + 1 + 4 * 4097];
    size_t total;
    fill_tensors(t, buf, &total);
    sq_error err_ = {0};
    char *err = err_.msg;
    const char *keep = sqt_tpath("keep.st");
    ck_assert_int_eq(sq_st_write(keep, t, 2, NULL, 0, &err_), 0);
    size_t klen;
    unsigned char *kept = sqt_read_bytes(keep, &klen);

    /* Too few bytes: commit fails naming the tensor, the old file stays. */
    sq_st_writer *w;
    ck_assert_int_eq(sq_st_writer_open(&w, keep, t, 4, NULL, 0, &err_), 0);
    ck_assert_int_eq(sq_st_writer_put(w, buf, 1001 + 100, &err_), 0);
    int rc = sq_st_writer_commit(w, &err_);
    SQT_EXPECT_ERR(rc, err, keep, "tensor 'delta'", "100 of its 16388 bytes put",
               "17389 bytes in all, 1101 were put");
    assert_file_is(keep, kept, klen);
    assert_no_tmp();

    /* Too many: the put fails, and so does commit after it. */
    ck_assert_int_eq(sq_st_writer_open(&w, keep, t, 4, NULL, 0, &err_), 0);
    ck_assert_int_eq(sq_st_writer_put(w, buf, total - 1, &err_), 0);
    rc = sq_st_writer_put(w, buf, 2, &err_);
    SQT_EXPECT_ERR(rc, err, keep, "2 bytes put at data offset 17388",
               "beyond the 17389 bytes the header promises", "'delta'");
    char first[512];
    snprintf(first, sizeof first, "%s", err);
    rc = sq_st_writer_put(w, buf, 1, &err_); /* would fit, but too late */
    ck_assert_int_ne(rc, 0);
    ck_assert_str_eq(err, first);
    rc = sq_st_writer_commit(w, &err_);
    ck_assert_int_ne(rc, 0);
    ck_assert_str_eq(err, first);
    assert_file_is(keep, kept, klen);

    /* Abort, and a writer that refuses its tensors: nothing changes. */
    ck_assert_int_eq(sq_st_writer_open(&w, keep, t, 4, NULL, 0, &err_), 0);
    ck_assert_int_eq(sq_st_writer_put(w, buf, total, &err_), 0);
    sq_st_writer_abort(w);
    assert_file_is(keep, kept, klen);
    sq_st_tensor dup[2] = {t[0], t[1]};
    dup[1].name = "alpha";
    w = (sq_st_writer *)&dup; /* must be reset to NULL */
    rc = sq_st_writer_open(&w, keep, dup, 2, NULL, 0, &err_);
    SQT_EXPECT_ERR(rc, err, keep, "tensor 'alpha'", "given twice");
    ck_assert_ptr_null(w);
    rc = sq_st_write(keep, dup, 2, NULL, 0, &err_);
    SQT_EXPECT_ERR(rc, err, keep, "given twice");
    sq_st_tensor nodata = t[0];
    nodata.data = NULL;
    rc = sq_st_write(keep, &nodata, 1, NULL, 0, &err_);
    SQT_EXPECT_ERR(rc, err, keep, "tensor 'alpha'", "no data");
    assert_file_is(keep, kept, klen);
    assert_no_tmp();
    free(kept);

    /* A missing directory: a clear error, nothing created. */
    const char *nodir = sqt_tpath("no-such-dir/x.st");
    rc = sq_st_writer_open(&w, nodir, t, 4, NULL, 0, &err_);
    SQT_EXPECT_ERR(rc, err, nodir, "cannot create", "No such file or directory");
    ck_assert_ptr_null(w);
    struct stat st;
    ck_assert_int_ne(stat(sqt_tpath("no-such-dir"), &st), 0);
    rc = sq_st_write(nodir, t, 4, NULL, 0, &err_);
    SQT_EXPECT_ERR(rc, err, nodir, "cannot create");

    /* A full disk: the put or the commit says so. */
    if (access("/dev/full", W_OK) == 0) {
        sq_st_tensor big = {.name = "big", .dtype = SQ_ST_U8, .ndim = 1, .shape = {1 << 20}};
        unsigned char *z = calloc(1, 1 << 20);
        ck_assert_int_eq(sq_st_writer_open(&w, "/dev/full", &big, 1, NULL, 0, &err_), 0);
        rc = sq_st_writer_put(w, z, 1 << 20, &err_);
        SQT_EXPECT_ERR(rc, err, "/dev/full", "write failed", strerror(ENOSPC));
        rc = sq_st_writer_commit(w, &err_);
        SQT_EXPECT_ERR(rc, err, "/dev/full", "write failed");
        /* A small file fails only when flushed, at commit. */
        sq_st_tensor small = {.name = "s", .dtype = SQ_ST_U8, .ndim = 1, .shape = {3}};
        ck_assert_int_eq(sq_st_writer_open(&w, "/dev/full", &small, 1, NULL, 0, &err_), 0);
        ck_assert_int_eq(sq_st_writer_put(w, z, 3, &err_), 0);
        rc = sq_st_writer_commit(w, &err_);
        SQT_EXPECT_ERR(rc, err, "/dev/full", "write failed", strerror(ENOSPC));
        big.data = z;
        rc = sq_st_write("/dev/full", &big, 1, NULL, 0, &err_);
        SQT_EXPECT_ERR(rc, err, "/dev/full", "write failed");
        free(z);
    }
    /* NULL writer. */
    ck_assert_int_ne(sq_st_writer_put(NULL, buf, 1, &err_), 0);
    ck_assert_int_ne(sq_st_writer_commit(NULL, &err_), 0);
    sq_st_writer_abort(NULL);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Releasing pages                                                          */
/* ------------------------------------------------------------------------ */

/* The resident file-backed memory of this process in kB, from
** /proc/self/status: RssFile plus RssShmem (a file on tmpfs is shared
** memory). -1 where the kernel does not say. */
static long rss_file_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long file = -1, shmem = 0, v;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "RssFile: %ld", &v) == 1) file = v;
        if (sscanf(line, "RssShmem: %ld", &v) == 1) shmem = v;
    }
    fclose(f);
    return file < 0 ? -1 : file + shmem;
}

START_TEST(test_release_rss)
{
    if (rss_file_kb() < 0) {
        fprintf(stderr, "test_release_rss: no RssFile in /proc/self/status, skipped\n");
        return;
    }
    /* 64 MiB in four tensors, streamed out in 1 MiB pieces. */
    enum { NT = 4, PER = 16 << 20, PIECE = 1 << 20 };
    sq_st_tensor t[NT];
    static const char *names[NT] = {"t0", "t1", "t2", "t3"};
    for (int i = 0; i < NT; i++)
        t[i] = (sq_st_tensor){.name = names[i], .dtype = SQ_ST_U8, .ndim = 1, .shape = {PER}};
    unsigned char *piece = malloc(PIECE);
    const char *p = sqt_tpath("big.st");
    sq_error err_ = {0};
    char *err = err_.msg;
    sq_st_writer *w;
    ck_assert_msg(sq_st_writer_open(&w, p, t, NT, NULL, 0, &err_) == 0, "%s", err);
    uint64_t sum = 0;
    for (uint64_t off = 0; off < (uint64_t)NT * PER; off += PIECE) {
        for (size_t i = 0; i < PIECE; i++) piece[i] = (unsigned char)((off + i) * 2654435761u >> 13);
        for (size_t i = 0; i < PIECE; i += 4096) sum += piece[i];
        ck_assert_msg(sq_st_writer_put(w, piece, PIECE, &err_) == 0, "%s", err);
    }
    ck_assert_msg(sq_st_writer_commit(w, &err_) == 0, "%s", err);
    free(piece);

    sq_st_file f;
    ck_assert_msg(sq_st_open(p, &f, &err_) == 0, "%s", err);
    ck_assert_ptr_nonnull(f.map);
    /* Touch every page, then give them back tensor by tensor. */
    long before = rss_file_kb();
    uint64_t got = 0;
    for (uint64_t i = 0; i < f.data_len; i += 4096) got += ((volatile const unsigned char *)f.data)[i];
    long touched = rss_file_kb();
    ck_assert_uint_eq(got, sum);
    ck_assert_msg(touched - before >= 48 * 1024,
                  "touching 64 MiB of the mapping raised RssFile+RssShmem by %ld kB only",
                  touched - before);
    for (size_t i = 0; i < f.ntensors; i++) sq_st_release(&f, &f.tensors[i]);
    long after = rss_file_kb();
    ck_assert_msg(touched - after >= 48 * 1024,
                  "releasing the tensors lowered RssFile+RssShmem by %ld kB only (%ld -> %ld)",
                  touched - after, touched, after);
    /* The data are still there: read back from the file. */
    got = 0;
    for (uint64_t i = 0; i < f.data_len; i += 4096) got += ((volatile const unsigned char *)f.data)[i];
    ck_assert_uint_eq(got, sum);
    /* The whole file at once. */
    ck_assert_int_ge(rss_file_kb() - after, 48 * 1024);
    sq_st_release(&f, NULL);
    ck_assert_int_ge(touched - rss_file_kb(), 48 * 1024);
    sq_st_free(&f);
    unlink(p);
}
END_TEST

/* Whether the page holding address a is in this process's page table
** (/proc/self/pagemap, bit 63: present; -1 when it cannot be read). After
** MADV_DONTNEED the page is gone from the table, whatever the page cache
** still holds (which mincore would report). */
static int page_present(const void *a)
{
    const long pg = sysconf(_SC_PAGESIZE);
    int fd = open("/proc/self/pagemap", O_RDONLY);
    if (fd < 0) return -1;
    uint64_t e = 0;
    off_t at = (off_t)((uintptr_t)a / (uintptr_t)pg * sizeof e);
    ssize_t k = pread(fd, &e, sizeof e, at);
    close(fd);
    return k == (ssize_t)sizeof e ? (int)(e >> 63) : -1;
}

/* sq_st_release_part drops the pages wholly inside a piece of a tensor
** and keeps the ones it shares with the elements around it; the values
** read back the same; a piece outside the tensor drops nothing. */
START_TEST(test_release_part_pages)
{
    enum { N = 40000 };
    static float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = (float)i * 0.25f - 7.0f;
    sq_st_tensor t = {.name = "w", .dtype = SQ_ST_F32, .ndim = 1, .shape = {N}, .data = x};
    const char *p = sqt_tpath("part.st");
    sq_error err_ = {0};
    ck_assert_msg(sq_st_write(p, &t, 1, NULL, 0, &err_) == 0, "%s", err_.msg);
    sq_st_file f;
    ck_assert_msg(sq_st_open(p, &f, &err_) == 0, "%s", err_.msg);
    ck_assert_ptr_nonnull(f.map);
    const sq_st_entry *e = sq_st_find(&f, "w");
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    volatile unsigned char sink = 0;
    for (uint64_t i = 0; i < f.data_len; i += 64) sink ^= f.data[i];
    (void)sink;
    if (page_present(e->data) < 0) {
        fprintf(stderr, "test_release_part_pages: no /proc/self/pagemap, skipped\n");
        sq_st_free(&f);
        return;
    }
    /* outside the tensor: nothing goes */
    sq_st_release_part(&f, e, N, 1);
    sq_st_release_part(&f, e, 1, N);
    for (uint64_t i = 0; i < 4ull * N; i += pg) ck_assert_int_eq(page_present(e->data + i), 1);
    /* elements [1000, 21000): bytes [4000, 84000) of the data, which begin
    ** inside a page (the header's length is not a multiple of the page) */
    const uintptr_t lo = (uintptr_t)e->data + 4000, hi = (uintptr_t)e->data + 84000;
    sq_st_release_part(&f, e, 1000, 20000);
    int dropped = 0;
    for (uintptr_t a = ((uintptr_t)e->data) & ~(pg - 1); a < (uintptr_t)e->data + 4 * N; a += pg) {
        const int inside = a >= lo && a + pg <= hi;
        ck_assert_msg(page_present((const void *)a) == !inside,
                      "page at data %+ld: present %d, wholly inside the piece %d",
                      (long)(a - (uintptr_t)e->data), page_present((const void *)a), inside);
        dropped += inside;
    }
    ck_assert_int_ge(dropped, 18);
    /* read back from the file, the same values */
    ck_assert_int_eq(sq_st_to_f32_part(&f, e, 0, N, y), SQ_OK);
    ck_assert(memcmp(x, y, sizeof x) == 0);
    sq_st_free(&f);
    unlink(p);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* .npy from memory                                                         */
/* ------------------------------------------------------------------------ */

/* A .npy image, its dict padded (sqt_npy_image). */
static unsigned char *npy_image(int major, const char *dict, const void *data, size_t dlen,
                                size_t *len)
{
    return sqt_npy_image(major, dict, 1, data, dlen, len);
}

START_TEST(test_npy_parse)
{
    const float v[6] = {1.5f, -2, NAN, 4, 5, 6.25f};
    const double dv[3] = {0.1, -1e39, 2};
    const uint16_t hv[2] = {0x3c00, 0x0001};
    sq_error err_ = {0}, err2_ = {0};
    char *err = err_.msg, *err2 = err2_.msg;
    for (int major = 1; major <= 3; major++) {
        size_t len;
        unsigned char *b = npy_image(major, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                                     v, sizeof v, &len);
        sq_npy a, r;
        ck_assert_msg(sq_npy_parse("mem.npy", b, len, &a, &err_) == 0, "v%d: %s",
                      major, err);
        ck_assert_int_eq(a.version, major);
        ck_assert_int_eq(a.ndim, 2);
        ck_assert_uint_eq(a.shape[1], 3);
        ck_assert_uint_eq(a.n, 6);
        ck_assert_int_eq(memcmp(a.data, v, sizeof v), 0); /* NaN left alone */
        /* The same as reading the file. */
        const char *p = sqt_tpath("mem.npy");
        sqt_write_bytes(p, b, len);
        ck_assert_int_eq(sq_npy_read(p, &r, &err_), 0);
        ck_assert_uint_eq(r.n, a.n);
        ck_assert_int_eq(r.version, a.version);
        ck_assert_int_eq(memcmp(r.data, a.data, sizeof v), 0);
        sq_npy_free(&r);
        sq_npy_free(&a);
        /* Every prefix fails, with the message of the file reader. */
        for (size_t n = 0; n < len; n++) {
            unsigned char *c = malloc(n ? n : 1);
            memcpy(c, b, n);
            int rc = sq_npy_parse(p, c, n, &a, &err_);
            ck_assert_msg(rc != 0, "v%d: a prefix of %zu of %zu bytes was accepted", major, n, len);
            ck_assert_ptr_null(a.data);
            sqt_write_bytes(p, c, n);
            rc = sq_npy_read(p, &r, &err2_);
            ck_assert_int_ne(rc, 0);
            ck_assert_str_eq(err, err2);
            ck_assert_ptr_nonnull(strstr(err, p));
            free(c);
        }
        free(b);
    }
    /* <f8 and <f2 from memory; one byte too many. */
    size_t len;
    unsigned char *b = npy_image(2, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }",
                                 dv, sizeof dv, &len);
    sq_npy a;
    ck_assert_msg(sq_npy_parse("d.npy", b, len, &a, &err_) == 0, "%s", err);
    ck_assert(a.data[0] == (float)0.1 && isinf(a.data[1]) && a.data[2] == 2.0f);
    sq_npy_free(&a);
    free(b);
    b = npy_image(3, "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", hv, sizeof hv,
                  &len);
    ck_assert_msg(sq_npy_parse("h.npy", b, len, &a, &err_) == 0, "%s", err);
    ck_assert(a.data[0] == 1.0f && a.data[1] == 0x1p-24f);
    sq_npy_free(&a);
    unsigned char *more = malloc(len + 1);
    memcpy(more, b, len);
    more[len] = 0;
    int rc = sq_npy_parse("h.npy", more, len + 1, &a, &err_);
    SQT_EXPECT_ERR(rc, err, "h.npy", "1 bytes of trailing data");
    free(more);
    free(b);
    rc = sq_npy_parse(NULL, "\x93NUMPX", 6, &a, &err_);
    SQT_EXPECT_ERR(rc, err, "(memory)", "bad magic");
    rc = sq_npy_parse("z.npy", NULL, 3, &a, &err_);
    SQT_EXPECT_ERR(rc, err, "z.npy", "no buffer");
    rc = sq_npy_parse("z.npy", "", 0, &a, &err_);
    SQT_EXPECT_ERR(rc, err, "z.npy", "empty");
}
END_TEST

START_TEST(test_npy_check_finite)
{
    float x[40];
    for (int i = 0; i < 40; i++) x[i] = (float)i - 20.0f;
    sq_npy a = {.data = x, .n = 40, .ndim = 1, .shape = {40}};
    sq_error err_ = {0};
    char *err = err_.msg;
    ck_assert_msg(sq_npy_check_finite("x.npy", &a, &err_) == 0, "%s", err);
    x[17] = NAN;
    x[30] = INFINITY;
    int rc = sq_npy_check_finite("x.npy", &a, &err_);
    ck_assert_int_ne(rc, 0);
    ck_assert_str_eq(err, "x.npy: element 17 is NaN");
    x[17] = 0;
    rc = sq_npy_check_finite("x.npy", &a, &err_);
    ck_assert_str_eq(err, "x.npy: element 30 is +Inf");
    x[30] = -INFINITY;
    rc = sq_npy_check_finite("x.npy", &a, &err_);
    ck_assert_str_eq(err, "x.npy: element 30 is -Inf");
    /* Past the first block of the scan, and n = 0. */
    size_t n = 100000;
    float *y = calloc(n, sizeof *y);
    y[n - 1] = NAN;
    sq_npy b = {.data = y, .n = n, .ndim = 1, .shape = {n}};
    rc = sq_npy_check_finite("y.npy", &b, &err_);
    ck_assert_int_ne(rc, 0);
    ck_assert_str_eq(err, "y.npy: element 99999 is NaN");
    b.n = 0;
    ck_assert_int_eq(sq_npy_check_finite("y.npy", &b, &err_), 0);
    free(y);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Inputs that are not regular files (issue 15)                             */
/* ------------------------------------------------------------------------ */

/* err, less its leading file name: what two readers of one image must say
** alike whatever the image was called. */
static const char *after_name(const char *err, const char *name)
{
    ck_assert_msg(strncmp(err, name, strlen(name)) == 0, "'%s' does not start with %s", err, name);
    return err + strlen(name);
}

/* A FIFO without a writer and a device are refused by name before a byte
** is read: neither open() nor a read may block or run on (a FIFO once hung
** the reader, /dev/zero filled memory). Standard input may be a pipe; what
** a pipe carries is bounded by the header before it is read. */
START_TEST(test_inputs)
{
    sq_error err_ = {0}, err2_ = {0};
    char *err = err_.msg, *err2 = err2_.msg;
    sq_st_file f;
    sq_npy a;
    const char *fifo = sqt_tpath("nowriter.fifo");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    const char *paths[2] = {fifo, "/dev/zero"};
    const char *kinds[2] = {"not a regular file (a FIFO)", "not a regular file (a character device)"};
    for (int i = 0; i < 2; i++) {
        int rc = sq_st_open(paths[i], &f, &err_);
        SQT_EXPECT_ERR(rc, err, paths[i], kinds[i]);
        ck_assert_ptr_null(f.tensors);
        rc = sq_npy_read(paths[i], &a, &err_);
        SQT_EXPECT_ERR(rc, err, paths[i], kinds[i]);
        ck_assert_ptr_null(a.data);
        rc = sq_npy_read_raw(paths[i], &a, &err_);
        SQT_EXPECT_ERR(rc, err, paths[i], kinds[i]);
    }

    /* Standard input that is a device, then a regular file (mapped). */
    int saved = dup(0), fd = open("/dev/zero", O_RDONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(dup2(fd, 0), 0);
    close(fd);
    int rc = sq_npy_read_raw("-", &a, &err_);
    SQT_EXPECT_ERR(rc, err, "-", "not a regular file (a character device)", "standard input");
    rc = sq_st_open("/dev/stdin", &f, &err_);
    SQT_EXPECT_ERR(rc, err, "/dev/stdin", "not a regular file (a character device)");
    size_t len;
    const char *sp = sqt_tpath("inputs.st");
    unsigned char *img = sample_file(sp, &len);
    fd = open(sp, O_RDONLY);
    ck_assert_int_eq(dup2(fd, 0), 0);
    close(fd);
    ck_assert_msg(sq_st_open("-", &f, &err_) == 0, "%s", err);
    ck_assert_ptr_nonnull(f.map);
    ck_assert_uint_eq(f.ntensors, 5);
    char trailing[96];
    snprintf(trailing, sizeof trailing, "data section: bytes from %llu on belong to no tensor",
             (unsigned long long)f.data_len);
    sq_st_free(&f);
    ck_assert_int_eq(dup2(saved, 0), 0);
    close(saved);

    /* A pipe that goes on past the data is not read to its end. */
    piped in;
    stdin_pipe(&in, img, len, 1);
    rc = sq_st_open("-", &f, &err_);
    ck_assert_int_eq(stdin_restore(&in), 0);
    SQT_EXPECT_ERR(rc, err, "-", trailing);
    /* A header that promises more than a pipe may carry: refused unread. */
    size_t blen;
    unsigned char *big = st_image("{\"t\":{\"dtype\":\"F32\",\"shape\":[2147483648],"
                                  "\"data_offsets\":[0,8589934592]}}", NULL, 0, &blen);
    stdin_pipe(&in, big, blen, 1);
    rc = sq_st_open("-", &f, &err_);
    ck_assert_int_eq(stdin_restore(&in), 0);
    SQT_EXPECT_ERR(rc, err, "-", "promises 8589934592 bytes", "give the file by name");
    free(big);
    unsigned char hl[8] = {0, 0, 0, 0, 0, 0, 0, 1}; /* 2^56 bytes of header */
    stdin_pipe(&in, hl, 8, 1);
    rc = sq_st_open("-", &f, &err_);
    ck_assert_int_eq(stdin_restore(&in), 0);
    SQT_EXPECT_ERR(rc, err, "-", "exceeds the limit");
    /* A pipe cut short fails as the file cut short does. */
    for (size_t cut = 0; cut < len; cut += len / 7 + 1) {
        const char *cp = sqt_tpath("cut.st");
        sqt_write_bytes(cp, img, cut);
        ck_assert_int_ne(sq_st_open(cp, &f, &err_), 0);
        stdin_pipe(&in, img, cut, 0);
        rc = sq_st_open("-", &f, &err2_);
        ck_assert_int_eq(stdin_restore(&in), 0);
        ck_assert_int_ne(rc, 0);
        ck_assert_str_eq(after_name(err2, "-"), after_name(err, cp));
    }
    free(img);

    /* .npy and raw float32 on a pipe */
    const float v[3] = {1.5f, -2, 4};
    unsigned char *b = npy_image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
                                 v, sizeof v, &len);
    stdin_pipe(&in, b, len, 0);
    rc = sq_npy_read("-", &a, &err_);
    ck_assert_int_eq(stdin_restore(&in), 0);
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_int_eq(memcmp(a.data, v, sizeof v), 0);
    sq_npy_free(&a);
    stdin_pipe(&in, b, len, 1);
    rc = sq_npy_read("-", &a, &err_);
    ck_assert_int_eq(stdin_restore(&in), 0);
    SQT_EXPECT_ERR(rc, err, "-", "more than 1048576 bytes of trailing data");
    free(b);
    b = npy_image(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2147483648,), }", NULL,
                  0, &len);
    stdin_pipe(&in, b, len, 1);
    rc = sq_npy_read("-", &a, &err_);
    ck_assert_int_eq(stdin_restore(&in), 0);
    SQT_EXPECT_ERR(rc, err, "-", "promises 17179869184 bytes", "give the file by name");
    ck_assert_ptr_null(a.data);
    free(b);
    stdin_pipe(&in, (const unsigned char *)v, sizeof v, 0);
    rc = sq_npy_read_raw("-", &a, &err_);
    ck_assert_int_eq(stdin_restore(&in), 0);
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_uint_eq(a.n, 3);
    sq_npy_free(&a);
}
END_TEST

/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* The kind of each failure                                                 */
/* ------------------------------------------------------------------------ */

/* Each class of bad input gives its kind (shardq.h), besides its sentence:
** a file that is not there NOTFOUND, one that cannot be read as a file IO,
** a malformed one FORMAT, NaN or Inf NONFINITE, a write refused IO, a call
** with nothing to work on ARG, a writer's tensors that do not add up ARG. */
START_TEST(test_kinds)
{
    sq_error e = {0};
    sq_st_file f;
    sq_npy a;
    /* missing files */
    const char *none = sqt_tpath("absent.bin");
    ck_assert_int_eq(sq_st_open(none, &f, &e), SQ_ERR_NOTFOUND);
    ck_assert_int_eq(e.status, SQ_ERR_NOTFOUND);
    ck_assert_int_eq(sq_npy_read(none, &a, &e), SQ_ERR_NOTFOUND);
    ck_assert_int_eq(sq_npy_read_raw(none, &a, &e), SQ_ERR_NOTFOUND);
    /* a directory and a FIFO are refused as files */
    ck_assert_int_eq(sq_st_open(sqt_tmpdir, &f, &e), SQ_ERR_IO);
    ck_assert_int_eq(sq_npy_read(sqt_tmpdir, &a, &e), SQ_ERR_IO);
    const char *fifo = sqt_tpath("kinds.fifo");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(sq_st_open(fifo, &f, &e), SQ_ERR_IO);
    ck_assert_int_eq(sq_npy_read(fifo, &a, &e), SQ_ERR_IO);
    unlink(fifo);
    /* malformed: truncated, wrong magic, a lying header */
    ck_assert_int_eq(sq_npy_parse("m.npy", "\x93NUMPY\x01", 7, &a, &e), SQ_ERR_FORMAT);
    ck_assert_int_eq(sq_npy_parse("m.npy", "PK\x03\x04xxxxxxxx", 12, &a, &e), SQ_ERR_FORMAT);
    size_t len;
    const float v[2] = {1, 2};
    unsigned char *b = npy_image(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
                                 v, sizeof v, &len);
    ck_assert_int_eq(sq_npy_parse("m.npy", b, len, &a, &e), SQ_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(e.msg, "data truncated"));
    free(b);
    b = npy_image(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", v, sizeof v,
                  &len);
    ck_assert_int_eq(sq_npy_parse("m.npy", b, len, &a, &e), SQ_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(e.msg, "field 'descr'"));
    free(b);
    const char *rawp = sqt_tpath("odd.raw");
    sqt_write_bytes(rawp, "abcdef", 6);
    ck_assert_int_eq(sq_npy_read_raw(rawp, &a, &e), SQ_ERR_FORMAT);
    ck_assert_int_eq(sq_st_parse("s.st", "\x02\0\0\0\0\0\0\0{}", 10, &f, &e), SQ_OK);
    sq_st_free(&f);
    ck_assert_int_eq(sq_st_parse("s.st", "\x09\0\0\0\0\0\0\0{}", 10, &f, &e), SQ_ERR_FORMAT);
    ck_assert_int_eq(sq_st_parse("s.st", "\x02\0\0", 3, &f, &e), SQ_ERR_FORMAT);
    /* non-finite data */
    float x[3] = {0, INFINITY, 1};
    sq_npy arr = {.data = x, .n = 3, .ndim = 1, .shape = {3}};
    ck_assert_int_eq(sq_npy_check_finite("x.npy", &arr, &e), SQ_ERR_NONFINITE);
    ck_assert_int_eq(e.status, SQ_ERR_NONFINITE);
    /* nothing to work on */
    ck_assert_int_eq(sq_npy_parse("z.npy", NULL, 3, &a, &e), SQ_ERR_ARG);
    ck_assert_int_eq(sq_st_parse("z.st", NULL, 3, &f, &e), SQ_ERR_ARG);
    ck_assert_int_eq(sq_npy_check_finite("z.npy", NULL, &e), SQ_ERR_ARG);
    ck_assert_int_eq(sq_st_to_f32(NULL, NULL, x, &e), SQ_ERR_ARG);
    /* writers: a write refused is IO; tensors that do not add up are ARG */
    uint64_t sh = 3;
    ck_assert_int_eq(sq_npy_write_f32(sqt_tpath("no/dir/x.npy"), v, &sh, 1, &e), SQ_ERR_IO);
    if (access("/dev/full", W_OK) == 0)
        ck_assert_int_eq(sq_npy_write_f32("/dev/full", x, &sh, 1, &e), SQ_ERR_IO);
    sq_st_tensor t = {.name = "t", .dtype = SQ_ST_F32, .ndim = 1, .shape = {2}, .data = v};
    sq_st_writer *w;
    ck_assert_int_eq(sq_st_writer_open(&w, sqt_tpath("w.st"), &t, 1, NULL, 0, &e), SQ_OK);
    ck_assert_int_eq(sq_st_writer_put(w, v, 12, &e), SQ_ERR_ARG);
    ck_assert_int_eq(sq_st_writer_commit(w, &e), SQ_ERR_ARG); /* the put's failure again */
    ck_assert_int_eq(sq_st_writer_open(&w, sqt_tpath("w.st"), &t, 1, NULL, 0, &e), SQ_OK);
    ck_assert_int_eq(sq_st_writer_put(w, v, 4, &e), SQ_OK);
    ck_assert_int_eq(sq_st_writer_commit(w, &e), SQ_ERR_ARG); /* 4 of 8 bytes put */
    sq_st_tensor twice[2] = {t, t};
    ck_assert_int_eq(sq_st_write(sqt_tpath("w.st"), twice, 2, NULL, 0, &e), SQ_ERR_ARG);
    ck_assert_int_eq(sq_st_write(sqt_tpath("no/dir/w.st"), &t, 1, NULL, 0, &e), SQ_ERR_IO);
}
END_TEST

/* Names and metadata are text: UTF-8 that is not, overlong, a surrogate or
** above U+10FFFF is refused, naming the file, the tensor or key (escaped)
** and the offset of the bad sequence's first byte in the name, as Python's
** decoder gives it. */
START_TEST(test_utf8_names)
{
    static const struct {
        const char *s;
        size_t bad; /* SIZE_MAX: valid */
    } cases[] = {
        {"plain.name", SIZE_MAX},
        {"\xc3\xa9t\xc3\xa9", SIZE_MAX},     /* U+00E9 */
        {"\xe2\x82\xac", SIZE_MAX},           /* U+20AC */
        {"\xf0\x9f\x98\x80", SIZE_MAX},       /* U+1F600 */
        {"\xf4\x8f\xbf\xbf", SIZE_MAX},       /* U+10FFFF, the last */
        {"\xed\x9f\xbf", SIZE_MAX},           /* U+D7FF, before the surrogates */
        {"w\xff", 1},
        {"ab\x80", 2},                        /* a continuation byte alone */
        {"k\xc0\x80", 1},                     /* overlong NUL */
        {"\xc1\xbf", 0},                      /* overlong U+007F */
        {"x\xe0\x80\xaf", 1},                 /* overlong '/' in 3 bytes */
        {"\xf0\x8f\xbf\xbf", 0},              /* overlong U+FFFF in 4 bytes */
        {"ab\xed\xa0\x80", 2},                 /* U+D800, a surrogate */
        {"\xed\xbf\xbf", 0},                  /* U+DFFF */
        {"\xc3\xa9t\xf4\x90\x80\x80", 3},     /* U+110000 */
        {"\xf5\x80\x80\x80", 0},
        {"cut\xe2\x82", 3},                   /* a sequence cut short */
        {"cut\xc3", 3},
        {"\xc3(", 0},                          /* a lead byte without its continuation */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t len = strlen(cases[i].s);
        size_t want = cases[i].bad == SIZE_MAX ? len : cases[i].bad;
        ck_assert_msg(sq_utf8_invalid(cases[i].s, len) == want, "case %zu: %zu, expected %zu", i,
                      sq_utf8_invalid(cases[i].s, len), want);
    }
    char buf[32];
    ck_assert_str_eq(sq_escape_bytes("w\xff\n", buf, sizeof buf), "w\\xff\\x0a");
    ck_assert_str_eq(sq_escape_bytes("abcdef\xff", buf, 8), "abcdef"); /* cut, never split */

    st_bad("u1.st", "{\"w\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
           "tensor 'w\\xff'", "not UTF-8 (byte 1 of the name)");
    st_bad("u2.st", "{\"ok\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
           "\"ab\xed\xa0\x80\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2,
           "tensor 'ab\\xed\\xa0\\x80'", "not UTF-8 (byte 2 of the name)");
    st_bad("u3.st", "{\"\xf4\x90\x80\x80\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
           1, "tensor '\\xf4\\x90\\x80\\x80'", "byte 0 of the name");
    st_bad("u4.st", "{\"__metadata__\":{\"k\xc0\x80\":\"v\"}}", 0, "__metadata__ key 'k\\xc0\\x80'",
           "not UTF-8 (byte 1 of the key)");
    st_bad("u5.st", "{\"__metadata__\":{\"k\":\"val\xe2\x82\"}}", 0, "__metadata__ 'k'",
           "the value is not UTF-8 (byte 3 of the value");
    /* valid names of every length pass, and keep their bytes */
    sq_st_file f;
    unsigned char *img, data[4] = {0};
    st_good("{\"\xc3\xa9t\xf0\x9f\x98\x80\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
            "\"__metadata__\":{\"cl\xc3\xa9\":\"\xe2\x82\xac\"}}", data, 4, &f, &img);
    ck_assert_str_eq(f.tensors[0].name, "\xc3\xa9t\xf0\x9f\x98\x80");
    ck_assert_str_eq(f.meta[0].value, "\xe2\x82\xac");
    sq_st_free(&f);
    free(img);
}
END_TEST

int main(void)
{
    if (sqt_scratch_begin("check_readers")) return 99;
    Suite *s = suite_create("readers");
    TCase *tr = tcase_create("safetensors reader");
    tcase_add_test(tr, test_st_map_pipe_buffer);
    tcase_add_test(tr, test_st_open_errors);
    tcase_add_test(tr, test_st_every_prefix);
    tcase_add_test(tr, test_st_header_length);
    tcase_add_test(tr, test_st_offsets);
    tcase_add_test(tr, test_st_overlap_gap);
    tcase_add_test(tr, test_st_dtypes_fields);
    tcase_add_test(tr, test_st_shapes);
    tcase_add_test(tr, test_utf8_names);
    tcase_add_test(tr, test_release_rss);
    tcase_add_test(tr, test_release_part_pages);
    suite_add_tcase(s, tr);
    TCase *tc = tcase_create("conversions");
    tcase_add_test(tc, test_convert_values);
    tcase_add_test(tc, test_convert_errors);
    tcase_add_test(tc, test_convert_large);
    suite_add_tcase(s, tc);
    TCase *tw = tcase_create("writer");
    tcase_add_test(tw, test_writer_roundtrip);
    tcase_add_test(tw, test_writer_errors);
    suite_add_tcase(s, tw);
    TCase *tn = tcase_create("npy");
    tcase_add_test(tn, test_npy_parse);
    tcase_add_test(tn, test_npy_check_finite);
    suite_add_tcase(s, tn);
    TCase *ti = tcase_create("inputs");
    tcase_add_test(ti, test_inputs);
    tcase_add_test(ti, test_kinds);
    suite_add_tcase(s, ti);
    return sqt_run_scratch(s);
}
