/*
** check_pack.c -- the MSB-first bit stream of b-bit codes.
**
** Expected bytes come from layouts worked out by hand and from a reference
** written here bit by bit (bit k of the stream is bit 7 - k % 8 of byte
** k / 8), which shares nothing with the library's word-at-a-time packer.
*/
#include "shardq/codec.h"
#include "check_util.h"

/* ------------------------------------------------------------------------ */
/* Reference                                                                */
/* ------------------------------------------------------------------------ */

/* A b-bit two's complement field as an int. */
static int sext(uint32_t v, int bits) { return v >= (1u << (bits - 1)) ? (int)v - (1 << bits) : (int)v; }

static uint64_t packed_size(uint64_t n, int bits) { return (n * (uint64_t)bits + 7) / 8; }

/* Field i (its low b bits) goes to stream bits [i*b, i*b + b), most
** significant bit first. out must be zeroed. */
static void ref_pack(const uint8_t *codes, uint64_t n, int bits, uint8_t *out)
{
    for (uint64_t i = 0; i < n; i++)
        for (int j = 0; j < bits; j++) {
            int bit = (codes[i] >> (bits - 1 - j)) & 1;
            uint64_t k = i * (uint64_t)bits + (uint64_t)j;
            if (bit) out[k / 8] |= (uint8_t)(0x80u >> (k % 8));
        }
}

/* Buffers of exactly the needed size, followed by guard bytes; ASan builds
** catch any access past the end, other builds the guard check below. */
#define GUARD 8
static uint8_t *alloc_guarded(uint64_t size)
{
    uint8_t *p = malloc(size + GUARD);
    ck_assert_ptr_nonnull(p);
    memset(p + size, 0xa5, GUARD);
    return p;
}

static void check_guard(const uint8_t *p, uint64_t size, const char *what)
{
    for (int i = 0; i < GUARD; i++)
        ck_assert_msg(p[size + i] == 0xa5, "%s wrote past its %llu bytes", what,
                      (unsigned long long)size);
}

/* ------------------------------------------------------------------------ */
/* Hand-computed layouts                                                    */
/* ------------------------------------------------------------------------ */

static const struct {
    int bits;
    int n;
    int8_t codes[12];
    int nbytes;
    uint8_t bytes[8];
} layouts[] = {
    /* b=4: element 2i in the high nibble, 2i+1 low; -2 = 0xE, -8 = 0x8 */
    {4, 4, {1, -2, 3, -8}, 2, {0x1E, 0x38}},
    {4, 1, {5}, 1, {0x50}},                       /* odd n: low nibble padded with 0 */
    {4, 3, {-1, 7, -7}, 2, {0xF7, 0x90}},
    /* b=3: 001 010 011 100 | 101 110 111 000 crosses bytes */
    {3, 8, {1, 2, 3, -4, -3, -2, -1, 0}, 3, {0x29, 0xCB, 0xB8}},
    {3, 3, {1, 2, 3}, 2, {0x29, 0x80}},           /* 9 bits, 7 bits of padding */
    /* b=5: 11111 00001 10000 + 1 pad bit */
    {5, 3, {-1, 1, -16}, 2, {0xF8, 0x60}},
    /* b=5, eight fields = 5 bytes: 10101 01010 00000 11111 00001 10000 01111 10001 */
    {5, 8, {-11, 10, 0, -1, 1, -16, 15, -15}, 5, {0xAA, 0x81, 0xF0, 0xC1, 0xF1}},
    {1, 9, {-1, 0, -1, -1, 0, 0, 0, -1, -1}, 2, {0xB1, 0x80}},
    {2, 4, {-2, -1, 0, 1}, 1, {0xB1}},
    {6, 4, {-1, 0, -22, 21}, 3, {0xFC, 0x0A, 0x95}},  /* 111111 000000 101010 010101 */
    {7, 3, {-1, 0, -43}, 3, {0xFE, 0x02, 0xA8}},      /* 1111111 0000000 1010101 */
    {8, 3, {-128, 127, -1}, 3, {0x80, 0x7F, 0xFF}},
};

START_TEST(test_layout)
{
    int b = layouts[_i].bits, n = layouts[_i].n, nb = layouts[_i].nbytes;
    ck_assert_uint_eq(packed_size((uint64_t)n, b), (uint64_t)nb);
    uint8_t codes[12];
    for (int i = 0; i < n; i++) codes[i] = (uint8_t)layouts[_i].codes[i];
    uint8_t *out = alloc_guarded((uint64_t)nb);
    memset(out, 0xff, (size_t)nb); /* padding must be written as zeros, not left */
    sq_pack(codes, (uint64_t)n, b, out);
    check_guard(out, (uint64_t)nb, "sq_pack");
    char what[64];
    snprintf(what, sizeof what, "layout %d (bits %d, n %d)", _i, b, n);
    SQT_ASSERT_BYTES(out, layouts[_i].bytes, (size_t)nb, what);

    int8_t back[12];
    sq_unpack_signed(out, (uint64_t)n, b, back);
    for (int i = 0; i < n; i++) ck_assert_int_eq(back[i], layouts[_i].codes[i]);
    uint8_t ub[12];
    sq_unpack_unsigned(out, (uint64_t)n, b, ub);
    for (int i = 0; i < n; i++)
        ck_assert_uint_eq(ub[i], (uint8_t)layouts[_i].codes[i] & ((1u << b) - 1u));
    free(out);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Every width, many lengths                                                */
/* ------------------------------------------------------------------------ */

static const uint64_t lengths[] = {0,  1,  2,  3,  4,  5,  6,  7,  8,   9,   10,  11,  12,
                                   13, 15, 16, 17, 23, 24, 25, 31, 33,  63,  64,  65,  127,
                                   129, 255, 1000, 1001, 1003, 4096, 4097};

/* For each b and n: random codes (unsigned in [0, 2^b), signed in
** [-2^(b-1), 2^(b-1))) pack to the reference bytes, padding bits are zero,
** nothing past ceil(n*b/8) is written, and both unpackers give back the
** codes. */
START_TEST(test_roundtrip_all_widths)
{
    int b = _i;
    sqt_rng r = {1000u + (uint64_t)b};
    for (size_t t = 0; t < sizeof lengths / sizeof lengths[0]; t++) {
        uint64_t n = lengths[t], size = packed_size(n, b);
        uint8_t *codes = malloc(n + 1), *want = calloc(size + 1, 1), *back = malloc(n + 1);
        int8_t *sback = malloc(n + 1);
        ck_assert(codes && want && back && sback);
        for (int sign = 0; sign < 2; sign++) {
            for (uint64_t i = 0; i < n; i++) {
                uint32_t v = (uint32_t)(sqt_next(&r) & ((1u << b) - 1u));
                codes[i] = sign ? (uint8_t)sext(v, b) : (uint8_t)v;
            }
            memset(want, 0, size + 1);
            ref_pack(codes, n, b, want);
            uint8_t *out = alloc_guarded(size);
            memset(out, 0xff, size);
            sq_pack(codes, n, b, out);
            check_guard(out, size, "sq_pack");
            char what[64];
            snprintf(what, sizeof what, "bits %d n %llu", b, (unsigned long long)n);
            SQT_ASSERT_BYTES(out, want, size, what);
            if (sign) {
                sq_unpack_signed(out, n, b, sback);
                for (uint64_t i = 0; i < n; i++)
                    SQT_CHECK(sback[i] == (int8_t)codes[i], "%s: signed element %llu: %d vs %d",
                              what, (unsigned long long)i, sback[i], (int8_t)codes[i]);
            } else {
                sq_unpack_unsigned(out, n, b, back);
                for (uint64_t i = 0; i < n; i++)
                    SQT_CHECK(back[i] == codes[i], "%s: element %llu: %u vs %u", what,
                              (unsigned long long)i, back[i], codes[i]);
            }
            free(out);
        }
        free(codes);
        free(want);
        free(back);
        free(sback);
    }
}
END_TEST

/* Only the low b bits of each input byte count: high garbage bits change
** nothing. */
START_TEST(test_high_bits_ignored)
{
    int b = _i;
    enum { N = 77 };
    uint8_t clean[N], dirty[N], p1[N], p2[N];
    sqt_rng r = {77u + (uint64_t)b};
    for (int i = 0; i < N; i++) {
        uint8_t v = (uint8_t)sqt_next(&r);
        clean[i] = (uint8_t)(v & ((1u << b) - 1u));
        dirty[i] = (uint8_t)(clean[i] | ~((1u << b) - 1u)); /* every high bit set */
    }
    memset(p1, 0, sizeof p1);
    memset(p2, 0, sizeof p2);
    sq_pack(clean, N, b, p1);
    sq_pack(dirty, N, b, p2);
    SQT_ASSERT_BYTES(p2, p1, packed_size(N, b), "high bits of the inputs leak into the stream");
}
END_TEST

/* Any 8 fields fill exactly b bytes: packing 8k elements in pieces of 8m
** and concatenating equals packing them at once (what parallel packing
** relies on). And any byte string of b*k bytes is the packing of its own
** unpacking. */
START_TEST(test_byte_alignment)
{
    int b = _i;
    enum { N = 8 * 37 };
    uint8_t codes[N], whole[N], pieces[N], rnd[N], fields[N], again[N];
    sqt_rng r = {55u + (uint64_t)b};
    for (int i = 0; i < N; i++) codes[i] = (uint8_t)(sqt_next(&r) & ((1u << b) - 1u));
    sq_pack(codes, N, b, whole);
    for (int i = 0; i < N; i += 8 * 5) {
        int len = N - i < 40 ? N - i : 40;
        sq_pack(codes + i, (uint64_t)len, b, pieces + i / 8 * b);
    }
    SQT_ASSERT_BYTES(pieces, whole, (size_t)(N / 8 * b), "packing in pieces of 40");

    for (int i = 0; i < N / 8 * b; i++) rnd[i] = (uint8_t)sqt_next(&r);
    sq_unpack_unsigned(rnd, N, b, fields);
    sq_pack(fields, N, b, again);
    SQT_ASSERT_BYTES(again, rnd, (size_t)(N / 8 * b), "pack(unpack(bytes))");
}
END_TEST

/* Sign extension of every field value for every width. */
START_TEST(test_sign_extension)
{
    for (int b = 1; b <= 8; b++)
        for (uint32_t v = 0; v < (1u << b); v++) {
            uint8_t in = (uint8_t)v, packed[1] = {0};
            sq_pack(&in, 1, b, packed);
            int8_t s;
            sq_unpack_signed(packed, 1, b, &s);
            int want = v >= (1u << (b - 1)) ? (int)v - (1 << b) : (int)v;
            SQT_CHECK(s == want, "bits %d field %u -> %d, want %d", b, v, s, want);
            ck_assert_uint_eq(packed[0], (uint8_t)(v << (8 - b)));
        }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pack");
    TCase *tc = tcase_create("pack");
    tcase_add_loop_test(tc, test_layout, 0, (int)(sizeof layouts / sizeof layouts[0]));
    tcase_add_loop_test(tc, test_roundtrip_all_widths, 1, 9);
    tcase_add_loop_test(tc, test_high_bits_ignored, 1, 9);
    tcase_add_loop_test(tc, test_byte_alignment, 1, 9);
    tcase_add_test(tc, test_sign_extension);
    suite_add_tcase(s, tc);
    return sqt_run(s);
}
