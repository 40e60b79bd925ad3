/*
** check_codec_paths.c -- the codec's fast paths against its plain ones.
**
** The C reference runs a tile in L1-sized pieces with its output kept aside
** until the tile succeeds, transforms with AVX-512 where the machine has
** it, and decodes 8-bit codes in place, adding each decoded chunk into a
** sum as it goes (sq_codec_fast, src/core/sq_internal.h). With those
** turned off it runs each tile whole, in the order that defines the
** results. This suite runs every fused operation both ways and demands the
** same bytes and the same status: codes, scales and offsets (including
** what a failing call leaves in its output), decoded values, for many
** codecs (group sizes that are not multiples of 32 or 8, short last groups
** and tiles, 1 to 8 bits, sym and minmax, every scale dtype, both level
** conventions, every Hadamard size), inputs with zero, denormal and huge
** groups, NaN and Inf, and 1 and 2 threads. On a machine without AVX-512
** it still compares the pieces and the fused decoding.
*/
#include "shardq/codec.h"
#include "sq_internal.h"
#include "check_util.h"

/* ------------------------------------------------------------------------ */
/* Inputs                                                                   */
/* ------------------------------------------------------------------------ */

enum input {
    IN_PLAIN,     /* noise of mixed magnitudes */
    IN_ZEROS,     /* every third group all zeros (and -0) */
    IN_TINY,      /* groups below 2^-64 (lifted) and denormals */
    IN_HUGE,      /* near FLT_MAX: transforms and ranges overflow */
    IN_NAN,       /* one NaN */
    IN_INF,       /* one -Inf */
    IN_CONST,     /* constant runs (minmax: hi = lo) */
    N_INPUTS
};

static void make_input(float *x, uint64_t n, int kind, uint64_t group, uint64_t seed)
{
    sqt_rng r = {seed * 0x9E3779B97F4A7C15ull + 1};
    for (uint64_t i = 0; i < n; i++) x[i] = sqt_sym(&r) * ldexpf(1.0f, (int)(i / 64 % 24) - 12);
    switch (kind) {
    case IN_ZEROS:
        for (uint64_t i = 0; i < n; i++)
            if (i / group % 3 == 1) x[i] = (i & 1) ? -0.0f : 0.0f;
        break;
    case IN_TINY:
        for (uint64_t i = 0; i < n; i++) x[i] *= (i / group % 2) ? 1e-40f : 1e-22f;
        break;
    case IN_HUGE:
        for (uint64_t i = 0; i < n; i++)
            x[i] = (i % 5 == 2) ? 1.0f : (x[i] > 0.0f ? 3.0e38f : -2.5e38f);
        break;
    case IN_NAN:
        if (n) x[sqt_next(&r) % n] = NAN;
        break;
    case IN_INF:
        if (n) x[sqt_next(&r) % n] = -INFINITY;
        break;
    case IN_CONST:
        for (uint64_t i = 0; i < n; i++) x[i] = (i / 40 % 2) ? 0.75f : -1.5f;
        break;
    }
}

/* ------------------------------------------------------------------------ */
/* Running every operation both ways                                        */
/* ------------------------------------------------------------------------ */

/* The output of one operation: status and bytes. */
typedef struct result {
    int rc;
    uint8_t *bytes;
    size_t len;
} result;

/* Everything the operations of one case produce, one result each. */
#define N_RESULTS 20

static void keep(result *r, int rc, const void *a, size_t na, const void *b, size_t nb,
                 const void *c, size_t nc)
{
    r->rc = rc;
    r->len = na + nb + nc;
    r->bytes = malloc(r->len + 1);
    ck_assert_ptr_nonnull(r->bytes);
    if (na) memcpy(r->bytes, a, na);
    if (nb) memcpy(r->bytes + na, b, nb);
    if (nc) memcpy(r->bytes + na + nb, c, nc);
}

static void keep_q(result *r, int rc, const sq_codec *c, uint64_t n, const sq_qbuf *q)
{
    keep(r, rc, q->codes, sq_codec_code_bytes(c, n), q->scales, sq_codec_scale_bytes(c, n),
         q->offsets, sq_codec_offset_bytes(c, n));
}

/* Output buffers start from the same non-zero pattern, so that what an
** operation leaves unwritten is compared too. */
static void fill_q(const sq_codec *c, uint64_t n, sq_qbuf *q)
{
    memset(q->codes, 0xa5, sq_codec_code_bytes(c, n));
    memset(q->scales, 0x3c, sq_codec_scale_bytes(c, n));
    if (q->offsets) memset(q->offsets, 0x3c, sq_codec_offset_bytes(c, n));
}

static void run_all(const sq_codec *c, const sq_codec *c8, uint64_t n, int input, int threads,
                    result res[N_RESULTS])
{
    sq_set_threads(threads);
    float *x = malloc((n + 1) * sizeof(float)), *ref = malloc((n + 1) * sizeof(float));
    float *out = malloc((n + 1) * sizeof(float));
    ck_assert(x && ref && out);
    make_input(x, n, input, c->group, n + (uint64_t)input);
    make_input(ref, n, IN_PLAIN, c->group, 7 * n + 1);
    const size_t fb = n * sizeof(float);
    sq_rng_key key = {0x0123456789abcdefull ^ n, 11, 5, 2};
    /* RTN codecs get no key, as their callers may give them */
    const sq_rng_key *kp = c->round == SQ_ROUND_RTN && c->kind != SQ_KIND_RANDK ? NULL : &key;
    sq_qbuf q, q2, chunks[4], chunks8[4];
    ck_assert_int_eq(sq_qbuf_alloc(c, n, &q), SQ_OK);
    ck_assert_int_eq(sq_qbuf_alloc(c, n, &q2), SQ_OK);
    int k = 0;

    fill_q(c, n, &q);
    keep_q(&res[k++], sq_quantize(c, x, n, kp, &q), c, n, &q);
    fill_q(c, n, &q2);
    keep_q(&res[k++], sq_quantize_diff(c, x, ref, n, kp, &q2), c, n, &q2);
    fill_q(c, n, &q2);
    keep_q(&res[k++], sq_quantize_bf16(c, x, n, kp, &q2), c, n, &q2);
    fill_q(c, n, &q2);
    keep_q(&res[k++], sq_quantize_diff_bf16(c, x, ref, n, kp, &q2), c, n, &q2);

    /* decoding what quantize left (after a failure: the fill pattern) */
    memset(out, 0x5a, fb);
    keep(&res[k++], sq_dequantize(c, &q, n, out), out, fb, NULL, 0, NULL, 0);
    keep(&res[k++], sq_dequantize_add(c, &q, ref, n, out), out, fb, NULL, 0, NULL, 0);
    keep(&res[k++], sq_dequantize_bf16(c, &q, n, out), out, fb, NULL, 0, NULL, 0);
    keep(&res[k++], sq_dequantize_add_bf16(c, &q, ref, n, out), out, fb, NULL, 0, NULL, 0);

    /* the sums: four chunks of c, and four 8-bit ones requantized to c
    ** (sums of 1 to 4 chunks: they are decoded two at a time) */
    for (int i = 0; i < 4; i++) {
        sq_rng_key ki = key;
        ki.step += (uint32_t)i;
        for (uint64_t j = 0; j < n; j++) ref[j] = x[j] * (1.0f + 0.25f * (float)i);
        ck_assert_int_eq(sq_qbuf_alloc(c, n, &chunks[i]), SQ_OK);
        ck_assert_int_eq(sq_qbuf_alloc(c8, n, &chunks8[i]), SQ_OK);
        fill_q(c, n, &chunks[i]);
        fill_q(c8, n, &chunks8[i]);
        (void)sq_quantize(c, ref, n, &ki, &chunks[i]);
        (void)sq_quantize(c8, ref, n, &ki, &chunks8[i]);
    }
    memset(out, 0x5a, fb);
    keep(&res[k++], sq_dequant_sum(c, chunks, 3, n, out), out, fb, NULL, 0, NULL, 0);
    keep(&res[k++], sq_dequant_sum_f16(c, chunks, 3, n, out), out, fb, NULL, 0, NULL, 0);
    fill_q(c, n, &q2);
    keep_q(&res[k++], sq_dequant_sum_requant(c, chunks, 3, n, c, kp, &q2), c, n, &q2);
    fill_q(c, n, &q2);
    keep_q(&res[k++], sq_dequant_sum_requant(c8, chunks8, 3, n, c, kp, &q2), c, n, &q2);
    fill_q(c, n, &q2);
    keep_q(&res[k++], sq_dequant_sum_requant_f16(c8, chunks8, 3, n, c, kp, &q2), c, n, &q2);
    for (int nc = 1; nc <= 4; nc++) {
        memset(out, 0x5a, fb);
        keep(&res[k++], sq_dequant_sum(c8, chunks8, nc, n, out), out, fb, NULL, 0, NULL, 0);
    }
    fill_q(c, n, &q2);
    keep_q(&res[k++], sq_dequant_sum_requant(c8, chunks8, 4, n, c, kp, &q2), c, n, &q2);
    ck_assert_int_le(k, N_RESULTS);
    for (; k < N_RESULTS; k++) keep(&res[k], 0, NULL, 0, NULL, 0, NULL, 0);

    for (int i = 0; i < 4; i++) {
        sq_qbuf_free(&chunks[i]);
        sq_qbuf_free(&chunks8[i]);
    }
    sq_qbuf_free(&q);
    sq_qbuf_free(&q2);
    free(x);
    free(ref);
    free(out);
    sq_set_threads(0);
}

static const char *const op_names[N_RESULTS] = {
    "quantize", "quantize_diff", "quantize_bf16", "quantize_diff_bf16", "dequantize",
    "dequantize_add", "dequantize_bf16", "dequantize_add_bf16", "dequant_sum",
    "dequant_sum_f16", "dequant_sum_requant", "dequant_sum_requant (8-bit in)",
    "dequant_sum_requant_f16 (8-bit in)", "dequant_sum (one 8-bit chunk)",
    "dequant_sum (two 8-bit chunks)", "dequant_sum (three 8-bit chunks)",
    "dequant_sum (four 8-bit chunks)", "dequant_sum_requant (four 8-bit chunks)", "-"};

/* One case: fast and plain, compared result by result. */
static void compare_case(const char *spec, uint64_t n, int input, int threads)
{
    sq_codec c, c8;
    char err[256];
    ck_assert_msg(sq_codec_parse(spec, &c, err, sizeof err) == SQ_OK, "%s: %s", spec, err);
    c8 = c;
    if (c8.kind == SQ_KIND_SYM || c8.kind == SQ_KIND_MINMAX) c8.bits = 8;
    result fast[N_RESULTS], plain[N_RESULTS];
    sq_codec_fast = SQ_FAST_ALL;
    run_all(&c, &c8, n, input, threads, fast);
    sq_codec_fast = 0;
    run_all(&c, &c8, n, input, threads, plain);
    sq_codec_fast = SQ_FAST_ALL;
    for (int k = 0; k < N_RESULTS; k++) {
        ck_assert_msg(fast[k].rc == plain[k].rc, "%s n=%llu input %d threads %d, %s: status %d, "
                      "plain %d", spec, (unsigned long long)n, input, threads, op_names[k],
                      fast[k].rc, plain[k].rc);
        ck_assert_uint_eq(fast[k].len, plain[k].len);
        char msg[512];
        ck_assert_msg(sqt_bytes_equal(fast[k].bytes, plain[k].bytes, fast[k].len, msg, sizeof msg),
                      "%s n=%llu input %d threads %d, %s: %s", spec, (unsigned long long)n,
                      input, threads, op_names[k], msg);
        free(fast[k].bytes);
        free(plain[k].bytes);
    }
}

/* ------------------------------------------------------------------------ */
/* The cases                                                                */
/* ------------------------------------------------------------------------ */

static const char *const specs[] = {
    /* the benchmarked codecs */
    "kind=sym,bits=4,group=128,round=sr,hadamard=32",
    "kind=sym,bits=4,group=128,round=rtn",
    "kind=sym,bits=8,group=128,round=sr,hadamard=32",
    "kind=sym,bits=4,group=1024,round=sr,hadamard=1024",
    "kind=sym,bits=4,group=2048,round=sr",
    /* groups that are not multiples of 32 or of 8, short last groups */
    "kind=sym,bits=4,group=100,round=sr,hadamard=4",
    "kind=sym,bits=3,group=33,round=rtn,scale=bf16",
    "kind=sym,bits=5,group=7,round=sr,scale=fp16",
    "kind=sym,bits=2,group=1,round=sr",
    "kind=sym,bits=6,group=96,round=sr,hadamard=32,levels=deepspeed",
    "kind=sym,bits=7,group=130,round=rtn,hadamard=2,scale=fp16",
    "kind=sym,bits=8,group=3,round=sr,hadamard=8,levels=deepspeed,scale=bf16",
    "kind=sym,bits=1,group=64,round=sr,levels=deepspeed",
    /* every Hadamard size of the AVX-512 transforms */
    "kind=sym,bits=4,group=64,round=sr,hadamard=64",
    "kind=sym,bits=4,group=384,round=rtn,hadamard=128,scale=bf16",
    "kind=sym,bits=8,group=256,round=sr,hadamard=256",
    "kind=sym,bits=4,group=1536,round=sr,hadamard=512,scale=fp16",
    "kind=sym,bits=3,group=40,round=sr,hadamard=16",
    /* min-max */
    "kind=minmax,bits=4,group=128,round=sr,hadamard=32",
    "kind=minmax,bits=8,group=128,round=rtn,scale=bf16",
    "kind=minmax,bits=1,group=17,round=sr,scale=fp16",
    "kind=minmax,bits=3,group=1000,round=sr,hadamard=1024",
    "kind=minmax,bits=6,group=2,round=rtn,hadamard=64",
    /* kinds that keep the plain quantizing path (their decoding is split) */
    "kind=qsgd,bits=4,group=128,round=sr,hadamard=32",
    "kind=fp8e4m3,group=64,round=rtn",
    "kind=sign,group=100",
    "kind=topk,group=100,keep=10",
};
#define N_SPECS (int)(sizeof specs / sizeof specs[0])

/* Sizes around the pieces (1024 elements and up) and the tiles (16384 and
** up), with short last groups and bytes. */
static const uint64_t sizes[] = {0, 1, 37, 1023, 1031, 4100, 16384, 16391, 40005};
#define N_SIZES (int)(sizeof sizes / sizeof sizes[0])

START_TEST(test_fast_equals_plain)
{
    const int si = _i;
    for (int ni = 0; ni < N_SIZES; ni++)
        for (int in = 0; in < N_INPUTS; in++) {
            /* every size with every input would take long: each size takes
            ** the plain input and two others, changing with the codec */
            if (in != IN_PLAIN && (in + ni + si) % 3 != 0) continue;
            compare_case(specs[si], sizes[ni], in, 1 + (ni + in) % 2);
        }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("codec_paths");
    TCase *tc = tcase_create("fast_vs_plain");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_fast_equals_plain, 0, N_SPECS);
    suite_add_tcase(s, tc);
    return sqt_run(s);
}
