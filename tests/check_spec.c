/*
** check_spec.c -- codec specs (defaults, parsing, the canonical text form,
** validation) and the exact sizes of quantized buffers.
*/
#include "shardq/codec.h"
#include "check_util.h"

#define DEFAULT_TEXT "kind=sym,bits=4,group=128,round=sr,hadamard=0,levels=sdp4bit,scale=fp32"

static int codec_eq(const sq_codec *a, const sq_codec *b)
{
    return a->kind == b->kind && a->bits == b->bits && a->group == b->group &&
           a->round == b->round && a->hadamard == b->hadamard && a->levels == b->levels &&
           a->scale == b->scale;
}

static sq_codec parse_ok(const char *text)
{
    sq_codec c;
    char err[256] = "";
    int rc = sq_codec_parse(text, &c, err, sizeof err);
    ck_assert_msg(rc == SQ_OK, "'%s' rejected (%d): %s", text, rc, err);
    return c;
}

/* ------------------------------------------------------------------------ */
/* Defaults and keys                                                        */
/* ------------------------------------------------------------------------ */

START_TEST(test_defaults)
{
    sq_codec d = sq_codec_default();
    ck_assert_int_eq(d.kind, SQ_KIND_SYM);
    ck_assert_int_eq(d.bits, 4);
    ck_assert_uint_eq(d.group, 128);
    ck_assert_int_eq(d.round, SQ_ROUND_SR);
    ck_assert_int_eq(d.hadamard, 0);
    ck_assert_int_eq(d.levels, SQ_LEVELS_SDP4BIT);
    ck_assert_int_eq(d.scale, SQ_SCALE_FP32);
    ck_assert_int_eq(sq_codec_validate(&d), SQ_OK);

    sq_codec e = parse_ok(""); /* every key is optional */
    ck_assert(codec_eq(&d, &e));

    char buf[SQ_CODEC_STRLEN];
    ck_assert_int_eq(sq_codec_format(&d, buf, sizeof buf), (int)strlen(DEFAULT_TEXT));
    ck_assert_str_eq(buf, DEFAULT_TEXT);
}
END_TEST

START_TEST(test_each_key)
{
    sq_codec c;
    c = parse_ok("kind=minmax");
    ck_assert_int_eq(c.kind, SQ_KIND_MINMAX);
    c = parse_ok("kind=sym");
    ck_assert_int_eq(c.kind, SQ_KIND_SYM);
    for (int b = 2; b <= 8; b++) {
        char t[32];
        snprintf(t, sizeof t, "bits=%d", b);
        c = parse_ok(t);
        ck_assert_int_eq(c.bits, b);
    }
    c = parse_ok("kind=minmax,bits=1");
    ck_assert_int_eq(c.bits, 1);
    c = parse_ok("bits=1,levels=deepspeed");
    ck_assert_int_eq(c.bits, 1);
    ck_assert_int_eq(c.levels, SQ_LEVELS_DEEPSPEED);
    c = parse_ok("group=1");
    ck_assert_uint_eq(c.group, 1);
    c = parse_ok("group=4096");
    ck_assert_uint_eq(c.group, 4096);
    c = parse_ok("group=1099511627776"); /* SQ_GROUP_MAX = 2^40 */
    ck_assert_uint_eq(c.group, SQ_GROUP_MAX);
    c = parse_ok("round=rtn");
    ck_assert_int_eq(c.round, SQ_ROUND_RTN);
    c = parse_ok("round=sr");
    ck_assert_int_eq(c.round, SQ_ROUND_SR);
    c = parse_ok("hadamard=0");
    ck_assert_int_eq(c.hadamard, 0);
    for (int h = 2; h <= 1024; h *= 2) {
        char t[32];
        snprintf(t, sizeof t, "hadamard=%d", h);
        c = parse_ok(t);
        ck_assert_int_eq(c.hadamard, h);
    }
    c = parse_ok("levels=sdp4bit");
    ck_assert_int_eq(c.levels, SQ_LEVELS_SDP4BIT);
    c = parse_ok("levels=deepspeed");
    ck_assert_int_eq(c.levels, SQ_LEVELS_DEEPSPEED);
    c = parse_ok("scale=fp32");
    ck_assert_int_eq(c.scale, SQ_SCALE_FP32);
    c = parse_ok("scale=bf16");
    ck_assert_int_eq(c.scale, SQ_SCALE_BF16);
    c = parse_ok("scale=fp16");
    ck_assert_int_eq(c.scale, SQ_SCALE_FP16);
    /* a key given alone leaves every other at its default */
    c = parse_ok("scale=fp16");
    sq_codec d = sq_codec_default();
    d.scale = SQ_SCALE_FP16;
    ck_assert(codec_eq(&c, &d));
}
END_TEST

/* Keys in any order print back in the fixed order. */
START_TEST(test_canonical_order)
{
    static const struct { const char *in, *out; } cases[] = {
        {"scale=bf16,kind=minmax", "kind=minmax,bits=4,group=128,round=sr,hadamard=0,levels=sdp4bit,scale=bf16"},
        {"hadamard=64,round=rtn,group=32,bits=3", "kind=sym,bits=3,group=32,round=rtn,hadamard=64,levels=sdp4bit,scale=fp32"},
        {"levels=deepspeed,scale=fp16,hadamard=1024,round=sr,group=7,bits=8,kind=sym",
         "kind=sym,bits=8,group=7,round=sr,hadamard=1024,levels=deepspeed,scale=fp16"},
        {DEFAULT_TEXT, DEFAULT_TEXT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sq_codec c = parse_ok(cases[i].in);
        char buf[SQ_CODEC_STRLEN];
        sq_codec_format(&c, buf, sizeof buf);
        ck_assert_str_eq(buf, cases[i].out);
    }
}
END_TEST

/* Every valid codec over a grid of values: format, parse back, same codec
** and same string. */
START_TEST(test_roundtrip_grid)
{
    static const uint64_t groups[] = {1, 2, 7, 64, 128, 4096, 1000003, SQ_GROUP_MAX};
    static const int hads[] = {0, 2, 4, 32, 1024};
    int count = 0;
    for (int kind = 0; kind < 2; kind++)
        for (int bits = 1; bits <= 8; bits++)
            for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
                for (int rnd = 0; rnd < 2; rnd++)
                    for (size_t h = 0; h < sizeof hads / sizeof hads[0]; h++)
                        for (int lv = 0; lv < 2; lv++)
                            for (int sc = 0; sc < 3; sc++) {
                                sq_codec c = {(sq_kind)kind, bits, groups[g], (sq_round)rnd,
                                              hads[h], (sq_levels)lv, (sq_scale_dtype)sc, 0, 0};
                                int valid = !(kind == SQ_KIND_MINMAX && lv == SQ_LEVELS_DEEPSPEED) &&
                                            !(kind == SQ_KIND_SYM && lv == SQ_LEVELS_SDP4BIT && bits < 2);
                                SQT_CHECK((sq_codec_validate(&c) == SQ_OK) == valid,
                                          "validate kind %d bits %d levels %d", kind, bits, lv);
                                if (!valid) continue;
                                char buf[SQ_CODEC_STRLEN], buf2[SQ_CODEC_STRLEN];
                                int len = sq_codec_format(&c, buf, sizeof buf);
                                SQT_CHECK(len > 0 && len < SQ_CODEC_STRLEN && (size_t)len == strlen(buf),
                                          "format length %d for '%s'", len, buf);
                                sq_codec back;
                                char err[256] = "";
                                SQT_CHECK(sq_codec_parse(buf, &back, err, sizeof err) == SQ_OK,
                                          "'%s' does not parse back: %s", buf, err);
                                SQT_CHECK(codec_eq(&c, &back), "'%s' parses to another codec", buf);
                                sq_codec_format(&back, buf2, sizeof buf2);
                                SQT_CHECK(strcmp(buf, buf2) == 0, "'%s' vs '%s'", buf, buf2);
                                count++;
                            }
    ck_assert_int_gt(count, 2000);
}
END_TEST

/* sq_codec_format behaves like snprintf: returns the length it needs and
** truncates (NUL-terminated) when the buffer is short. */
START_TEST(test_format_snprintf)
{
    sq_codec c = parse_ok("group=1099511627776,levels=deepspeed,hadamard=1024,kind=sym,bits=8");
    char full[SQ_CODEC_STRLEN];
    int len = sq_codec_format(&c, full, sizeof full);
    ck_assert_int_eq(len, (int)strlen(full));
    ck_assert_str_eq(full, "kind=sym,bits=8,group=1099511627776,round=sr,hadamard=1024,levels=deepspeed,scale=fp32");
    ck_assert_int_eq(sq_codec_format(&c, NULL, 0), len);
    char small[11];
    memset(small, 'x', sizeof small);
    ck_assert_int_eq(sq_codec_format(&c, small, 10), len);
    ck_assert_str_eq(small, "kind=sym,");
    ck_assert_int_eq(small[10], 'x');
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Malformed specs                                                          */
/* ------------------------------------------------------------------------ */

/* Each must fail with SQ_ERR_SPEC and an error sentence containing `names`
** (the key or item at fault). */
static const struct {
    const char *text, *names;
} bad[] = {
    {"foo=1", "foo"},
    {"bits=4,color=red", "color"},
    {"bits4", "bits4"},               /* missing '=' */
    {"kind", "kind"},
    {"bits=", "bits"},                /* empty value */
    {"=4", "key"},                    /* empty key: an (empty) unknown key */
    {"bits=0", "bits"},
    {"bits=9", "bits"},
    {"bits=-1", "bits"},
    {"bits=+4", "bits"},
    {"bits=4x", "bits"},
    {"bits=04x", "bits"},
    {"bits=0x4", "bits"},
    {"bits=4.0", "bits"},
    {"bits=1", "bits"},               /* sym with sdp4bit levels needs >= 2 */
    {"group=0", "group"},
    {"group=-5", "group"},
    {"group=1099511627777", "group"}, /* 2^40 + 1 */
    {"group=99999999999999999999999", "group"}, /* beyond uint64 */
    {"group=1e3", "group"},
    {"hadamard=1", "hadamard"},
    {"hadamard=3", "hadamard"},
    {"hadamard=6", "hadamard"},
    {"hadamard=2048", "hadamard"},
    {"hadamard=-2", "hadamard"},
    {"round=up", "round"},
    {"round=RTN", "round"},           /* values are case-sensitive, like the canonical form */
    {"kind=asym", "kind"},
    {"kind=SYM", "kind"},
    {"levels=ds", "levels"},
    {"scale=fp64", "scale"},
    {"scale=f16", "scale"},
    {"kind=minmax,levels=deepspeed", "levels"}, /* deepspeed levels are sym only */
    {"levels=deepspeed,kind=minmax", "levels"},
    {"bits=4,bits=4", "bits"},        /* duplicate key: rejected (spec.c) */
    {"bits=4,group=64,bits=8", "bits"},
    {"bits=4,", ","},                 /* trailing comma */
    {",bits=4", ","},                 /* leading comma */
    {"bits=4,,group=8", ","},         /* empty item */
    {",", ","},
    {" bits=4", "bits"},              /* no whitespace anywhere */
    {"bits=4 ", "bits"},
    {"bits = 4", "bits"},
    {"bits=4, group=8", "group"},
    {"BITS=4", "BITS"},
};

START_TEST(test_malformed)
{
    sq_codec c = sq_codec_default();
    char err[256];
    strcpy(err, "untouched");
    int rc = sq_codec_parse(bad[_i].text, &c, err, sizeof err);
    ck_assert_msg(rc == SQ_ERR_SPEC, "'%s' gave %d, want SQ_ERR_SPEC", bad[_i].text, rc);
    ck_assert_msg(strcmp(err, "untouched") != 0 && strlen(err) > 0, "'%s': no error text",
                  bad[_i].text);
    ck_assert_msg(strstr(err, bad[_i].names) != NULL, "'%s': error text '%s' does not name '%s'",
                  bad[_i].text, err, bad[_i].names);
    /* err = NULL is allowed and gives the same status */
    ck_assert_int_eq(sq_codec_parse(bad[_i].text, &c, NULL, 0), SQ_ERR_SPEC);
    /* a short err buffer is truncated and terminated, never overrun */
    char small[6];
    memset(small, 'x', sizeof small);
    ck_assert_int_eq(sq_codec_parse(bad[_i].text, &c, small, 5), SQ_ERR_SPEC);
    ck_assert_msg(memchr(small, '\0', 5) != NULL, "err not terminated");
    ck_assert_int_eq(small[5], 'x');
}
END_TEST

/* sq_codec_parse_v2 says the same in an sq_error: the status, and the
** sentence the deprecated buffer form writes. */
START_TEST(test_malformed_v2)
{
    sq_codec c = sq_codec_default();
    sq_error e;
    char err[SQ_ERROR_MSG];
    ck_assert_int_eq(sq_codec_parse_v2(bad[_i].text, &c, &e), SQ_ERR_SPEC);
    ck_assert_int_eq(e.status, SQ_ERR_SPEC);
    ck_assert_int_eq(sq_codec_parse(bad[_i].text, &c, err, sizeof err), SQ_ERR_SPEC);
    ck_assert_str_eq(e.msg, err);
    ck_assert_int_eq(sq_codec_parse_v2(bad[_i].text, &c, NULL), SQ_ERR_SPEC);
    /* success clears it */
    ck_assert_int_eq(sq_codec_parse_v2("bits=4", &c, &e), SQ_OK);
    ck_assert_int_eq(e.status, SQ_OK);
}
END_TEST

/* The one list of kind names: the parser takes each, the printer prints
** it; past the last is NULL. */
START_TEST(test_kind_names)
{
    ck_assert_str_eq(sq_codec_kind_name(SQ_KIND_SYM), "sym");
    ck_assert_str_eq(sq_codec_kind_name(SQ_KIND_PLUGIN), "plugin");
    ck_assert_ptr_null(sq_codec_kind_name(SQ_KIND_PLUGIN + 1));
    ck_assert_ptr_null(sq_codec_kind_name(-1));
    for (int k = 0; k < SQ_KIND_PLUGIN; k++) {
        char text[64], buf[SQ_CODEC_STRLEN];
        snprintf(text, sizeof text, "kind=%s%s", sq_codec_kind_name(k),
                 k == SQ_KIND_TOPK || k == SQ_KIND_RANDK ? ",keep=2" : "");
        sq_codec c;
        sq_error e;
        ck_assert_msg(sq_codec_parse_v2(text, &c, &e) == SQ_OK, "%s: %s", text, e.msg);
        ck_assert_int_eq(c.kind, k);
        sq_codec_format(&c, buf, sizeof buf);
        snprintf(text, sizeof text, "kind=%s,", sq_codec_kind_name(k));
        ck_assert_msg(!strncmp(buf, text, strlen(text)), "%s", buf);
    }
    ck_assert_str_eq(sq_version(), SHARDQ_VERSION_STRING);
}
END_TEST

START_TEST(test_parse_null)
{
    sq_codec c;
    char err[64];
    ck_assert_int_eq(sq_codec_parse(NULL, &c, err, sizeof err), SQ_ERR_ARG);
    ck_assert_int_eq(sq_codec_parse("bits=4", NULL, err, sizeof err), SQ_ERR_ARG);
    ck_assert_int_eq(sq_codec_validate(NULL), SQ_ERR_ARG);
}
END_TEST

/* sq_codec_validate on structs filled by hand: each field out of range. */
START_TEST(test_validate_fields)
{
    sq_codec d = sq_codec_default(), c;
    ck_assert_int_eq(sq_codec_validate(&d), SQ_OK);
    c = d; c.kind = (sq_kind)99;            ck_assert_int_eq(sq_codec_validate(&c), SQ_ERR_SPEC);
    c = d; c.bits = 0;                      ck_assert_int_eq(sq_codec_validate(&c), SQ_ERR_SPEC);
    c = d; c.bits = 9;                      ck_assert_int_eq(sq_codec_validate(&c), SQ_ERR_SPEC);
    c = d; c.bits = 1;                      ck_assert_int_eq(sq_codec_validate(&c), SQ_ERR_SPEC);
    c = d; c.group = 0;                     ck_assert_int_eq(sq_codec_validate(&c), SQ_ERR_SPEC);
    c = d; c.group = SQ_GROUP_MAX + 1;      ck_assert_int_eq(sq_codec_validate(&c), SQ_ERR_SPEC);
    c = d; c.round = (sq_round)2;           ck_assert_int_eq(sq_codec_validate(&c), SQ_ERR_SPEC);
    c = d; c.hadamard = 1;                  ck_assert_int_eq(sq_codec_validate(&c), SQ_ERR_SPEC);
    c = d; c.hadamard = 12;                 ck_assert_int_eq(sq_codec_validate(&c), SQ_ERR_SPEC);
    c = d; c.hadamard = 2048;               ck_assert_int_eq(sq_codec_validate(&c), SQ_ERR_SPEC);
    c = d; c.hadamard = -4;                 ck_assert_int_eq(sq_codec_validate(&c), SQ_ERR_SPEC);
    c = d; c.levels = (sq_levels)2;         ck_assert_int_eq(sq_codec_validate(&c), SQ_ERR_SPEC);
    c = d; c.scale = (sq_scale_dtype)3;     ck_assert_int_eq(sq_codec_validate(&c), SQ_ERR_SPEC);
    c = d; c.kind = SQ_KIND_MINMAX; c.levels = SQ_LEVELS_DEEPSPEED;
    ck_assert_int_eq(sq_codec_validate(&c), SQ_ERR_SPEC);
    c = d; c.kind = SQ_KIND_MINMAX; c.bits = 1; ck_assert_int_eq(sq_codec_validate(&c), SQ_OK);
    c = d; c.levels = SQ_LEVELS_DEEPSPEED; c.bits = 1; ck_assert_int_eq(sq_codec_validate(&c), SQ_OK);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Sizes                                                                    */
/* ------------------------------------------------------------------------ */

/* Hand-computed sizes. */
static const struct {
    const char *spec;
    uint64_t n, groups, code, scale, offset;
} sizes[] = {
    {"", 0, 0, 0, 0, 0},
    {"", 1, 1, 1, 4, 0},                         /* 4 bits pad to a byte */
    {"", 128, 1, 64, 4, 0},
    {"", 129, 2, 65, 8, 0},                      /* 516 bits = 64.5 bytes -> 65 */
    {"bits=3,group=64", 300, 5, 113, 20, 0},     /* 900 bits -> 113 bytes */
    {"kind=minmax,bits=3,group=64", 300, 5, 113, 20, 20},
    {"kind=minmax,bits=3,group=64,scale=bf16", 300, 5, 113, 10, 10},
    {"bits=5,group=7,scale=fp16", 10, 2, 7, 4, 0}, /* 50 bits -> 7 bytes */
    {"bits=8,group=1", 5, 5, 5, 20, 0},
    {"kind=minmax,bits=1,group=3", 17, 6, 3, 24, 24}, /* 17 bits -> 3 bytes */
    {"bits=7,group=4096", 1, 1, 1, 4, 0},        /* group larger than n */
    {"bits=6,group=4096", 4097, 2, 3073, 8, 0},  /* 24582 bits -> 3072.75 -> 3073 */
    {"bits=2,hadamard=32,group=16", 33, 3, 9, 12, 0}, /* the transform changes no size */
};

START_TEST(test_sizes_table)
{
    sq_codec c = parse_ok(sizes[_i].spec);
    uint64_t n = sizes[_i].n;
    ck_assert_uint_eq(sq_codec_groups(&c, n), sizes[_i].groups);
    ck_assert_uint_eq(sq_codec_code_bytes(&c, n), sizes[_i].code);
    ck_assert_uint_eq(sq_codec_scale_bytes(&c, n), sizes[_i].scale);
    ck_assert_uint_eq(sq_codec_offset_bytes(&c, n), sizes[_i].offset);
    uint64_t total = sizes[_i].code + sizes[_i].scale + sizes[_i].offset;
    ck_assert_uint_eq(sq_codec_bytes(&c, n), total);
    double bpe = n ? 8.0 * (double)total / (double)n : 0.0;
    ck_assert_msg(sq_codec_bits_per_element(&c, n) == bpe, "bits/element %g, want %g",
                  sq_codec_bits_per_element(&c, n), bpe);
}
END_TEST

/* ceil(n * bits / 8) without overflow: 128-bit integers where the compiler
** has them (GCC, Clang), else only for n small enough for 64 bits. Returns
** 0 when it cannot tell. */
#ifdef __SIZEOF_INT128__
__extension__ typedef unsigned __int128 u128;
static int exact_code_bytes(uint64_t n, int bits, uint64_t *out)
{
    u128 nb = (u128)n * (unsigned)bits;
    *out = (uint64_t)((nb + 7) / 8);
    return 1;
}
#else
static int exact_code_bytes(uint64_t n, int bits, uint64_t *out)
{
    if (n > (UINT64_MAX - 7) / 8) return 0;
    *out = (n * (uint64_t)bits + 7) / 8;
    return 1;
}
#endif

/* The formulas over a grid, including n near 2^64 (where n * bits
** overflows 64 bits). */
START_TEST(test_sizes_formula)
{
    static const uint64_t ns[] = {0, 1, 2, 7, 8, 9, 63, 64, 65, 1000, 4095, 4096, 4097,
                                  (1ull << 40) + 3, (1ull << 61) + 5, UINT64_MAX - 7, UINT64_MAX};
    static const uint64_t groups[] = {1, 3, 64, 128, 4096, SQ_GROUP_MAX};
    for (int kind = 0; kind < 2; kind++)
        for (int bits = 2; bits <= 8; bits++)
            for (int sc = 0; sc < 3; sc++)
                for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
                    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
                        sq_codec c = sq_codec_default();
                        c.kind = (sq_kind)kind;
                        c.bits = bits;
                        c.scale = (sq_scale_dtype)sc;
                        c.group = groups[g];
                        uint64_t n = ns[t];
                        uint64_t code = 0;
                        int known = exact_code_bytes(n, bits, &code);
                        uint64_t grp = n / c.group + (n % c.group != 0);
                        uint64_t ss = sc == 0 ? 4 : 2;
                        SQT_CHECK(sq_codec_groups(&c, n) == grp, "groups n=%llu", (unsigned long long)n);
                        SQT_CHECK(!known || sq_codec_code_bytes(&c, n) == code,
                                  "code bytes n=%llu bits=%d", (unsigned long long)n, bits);
                        if (grp <= UINT64_MAX / 4) {
                            SQT_CHECK(sq_codec_scale_bytes(&c, n) == grp * ss, "scale bytes");
                            SQT_CHECK(sq_codec_offset_bytes(&c, n) == (kind ? grp * ss : 0), "offset bytes");
                        }
                    }
}
END_TEST

/* bits per element for the common SDP4Bit setting: 4 + 32/128 = 4.25. */
START_TEST(test_bits_per_element)
{
    sq_codec c = sq_codec_default();
    ck_assert(sq_codec_bits_per_element(&c, 128 * 100) == 4.25);
    c.scale = SQ_SCALE_BF16;
    ck_assert(sq_codec_bits_per_element(&c, 128 * 100) == 4.125);
    c.kind = SQ_KIND_MINMAX;
    ck_assert(sq_codec_bits_per_element(&c, 128 * 100) == 4.25);
    ck_assert(sq_codec_bits_per_element(&c, 0) == 0.0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("spec");
    TCase *tp = tcase_create("parse");
    tcase_add_test(tp, test_defaults);
    tcase_add_test(tp, test_each_key);
    tcase_add_test(tp, test_canonical_order);
    tcase_add_test(tp, test_roundtrip_grid);
    tcase_add_test(tp, test_format_snprintf);
    tcase_add_loop_test(tp, test_malformed, 0, (int)(sizeof bad / sizeof bad[0]));
    tcase_add_loop_test(tp, test_malformed_v2, 0, (int)(sizeof bad / sizeof bad[0]));
    tcase_add_test(tp, test_kind_names);
    tcase_add_test(tp, test_parse_null);
    tcase_add_test(tp, test_validate_fields);
    suite_add_tcase(s, tp);
    TCase *ts = tcase_create("sizes");
    tcase_add_loop_test(ts, test_sizes_table, 0, (int)(sizeof sizes / sizeof sizes[0]));
    tcase_add_test(ts, test_sizes_formula);
    tcase_add_test(ts, test_bits_per_element);
    suite_add_tcase(s, ts);
    return sqt_run(s);
}
