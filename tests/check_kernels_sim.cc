/*
** check_kernels_sim.cc -- the CUDA kernels, run on the CPU, against the C
** reference.
**
** The kernel sources of kernels/ are compiled here a second time, by the
** C++ compiler with the emulation of tests/sim/cuda_sim.h, and their
** launchers are called on host memory exactly as the CUDA backend calls
** them on device memory. So every machine, GPU or not, checks that the
** kernels' thread layout, reductions, Hadamard stages, packing and
** two-pass paths give the reference's bytes, and the elementwise kernels
** the CPU backend's. Sizes are kept to what an emulation can run in
** seconds; tests/check_gpu_codec.c runs the full sizes on a GPU.
*/
#define SQK_SIM 1
#include "../kernels/quantize.cu"
#include "../kernels/dequantize.cu"
#include "../kernels/elementwise.cu"
#include "../kernels/cast.cu"
#include "../kernels/sparse.cu"

#include "shardq/backend.h"
#include "equiv.h"

#include <check.h>

#include <vector>

/* ------------------------------------------------------------------------ */
/* The emulated device: host memory, a host flags word, scratch on demand   */
/* ------------------------------------------------------------------------ */

namespace {

struct SimDevice {
    uint32_t flags = 0;
    std::vector<unsigned char> scratch;
    sqk_env env() {
        sqk_env e = {};
        e.stream = nullptr;
        e.sms = 2; /* a small grid, so that grid-stride loops run several times */
        e.flags = &flags;
        e.scratch = scratch.empty() ? nullptr : scratch.data();
        return e;
    }
    void reserve(uint64_t bytes) {
        /* filled with garbage: the kernels must initialise what they use */
        scratch.assign((size_t)bytes, 0xa5);
    }
};

int finish(SimDevice &d, sqk_env &e, int rc)
{
    if (rc != SQ_OK) {
        fprintf(stderr, "launch of %s failed\n", e.failed ? e.failed : "?");
        return rc;
    }
    return sqk_status(d.flags);
}

/* When set, every buffer the kernels see is shifted off its alignment (4
** bytes for floats and fp32 scales, 2 for 16-bit ones, 1 for codes), so
** that the vector loads and stores fall back to their narrow forms. */
bool g_misalign = false;

/* Host memory at a shifted address, holding a copy of src; freed with the
** Staging that made it. */
struct Staging {
    std::vector<std::vector<unsigned char>> blocks;
    template <class T> T *put(const T *src, uint64_t bytes, size_t shift)
    {
        if (!g_misalign) return const_cast<T *>(src);
        std::vector<unsigned char> &block = blocks.emplace_back((size_t)bytes + 16);
        unsigned char *p = block.data() + shift;
        const size_t room = block.size() - shift;
        if (src) memcpy(p, src, (size_t)bytes < room ? (size_t)bytes : room);
        return reinterpret_cast<T *>(p);
    }
    template <class T> void back(T *dst, const T *staged, uint64_t bytes)
    {
        if (g_misalign && bytes) memcpy(dst, staged, (size_t)bytes);
    }
    sq_qbuf qbuf(const sq_codec *c, const sq_qbuf *q, uint64_t n)
    {
        size_t su = c->scale == SQ_SCALE_FP32 ? 4 : 2;
        sq_qbuf s;
        s.codes = put(q->codes, sq_codec_code_bytes(c, n), 1);
        s.scales = put(static_cast<unsigned char *>(q->scales), sq_codec_scale_bytes(c, n), su);
        s.offsets = q->offsets ? put(static_cast<unsigned char *>(q->offsets),
                                     sq_codec_offset_bytes(c, n), su)
                               : nullptr;
        return s;
    }
    void qbuf_back(const sq_codec *c, sq_qbuf *q, const sq_qbuf *s, uint64_t n)
    {
        back(q->codes, s->codes, sq_codec_code_bytes(c, n));
        back(static_cast<unsigned char *>(q->scales), static_cast<unsigned char *>(s->scales),
             sq_codec_scale_bytes(c, n));
        if (q->offsets)
            back(static_cast<unsigned char *>(q->offsets),
                 static_cast<unsigned char *>(s->offsets), sq_codec_offset_bytes(c, n));
    }
};

int sim_quantize(const sq_codec *c, const float *x, const float *ref, uint64_t n,
                 const sq_rng_key *key, sq_qbuf *q, int bf16 = 0)
{
    SimDevice d;
    Staging st;
    d.reserve(sqk_quantize_scratch(c, n));
    sqk_env e = d.env();
    sq_qbuf sq = st.qbuf(c, q, n);
    int rc = finish(d, e, sqk_quantize(&e, c, st.put(x, n * 4, 4), ref ? st.put(ref, n * 4, 4) : ref,
                                       n, key, &sq, bf16));
    st.qbuf_back(c, q, &sq, n);
    return rc;
}

int sim_dequantize(const sq_codec *c, const sq_qbuf *q, const float *ref, uint64_t n, float *out,
                   int bf16 = 0)
{
    SimDevice d;
    Staging st;
    d.reserve(sqk_decode_scratch(c, n));
    sqk_env e = d.env();
    sq_qbuf sq = st.qbuf(c, q, n);
    float *so = st.put(out, n * 4, 4);
    int rc = finish(d, e, sqk_dequantize(&e, c, &sq, ref ? st.put(ref, n * 4, 4) : ref, n, so, bf16));
    st.back(out, so, n * 4);
    return rc;
}

int sim_sum_requant(const sq_codec *c_in, const sq_qbuf *chunks, int k, uint64_t n,
                    const sq_codec *c_out, const sq_rng_key *key, sq_qbuf *out)
{
    SimDevice d;
    Staging st;
    d.reserve(sqk_sum_requant_scratch(c_in, k, n, c_out));
    sqk_env e = d.env();
    std::vector<sq_qbuf> sc((size_t)k);
    for (int i = 0; i < k; i++) sc[(size_t)i] = st.qbuf(c_in, &chunks[i], n);
    sq_qbuf so = st.qbuf(c_out, out, n);
    int rc = finish(d, e, sqk_sum_requant(&e, c_in, sc.data(), k, n, c_out, key, &so));
    st.qbuf_back(c_out, out, &so, n);
    return rc;
}

int sim_sum(const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n, float *out)
{
    SimDevice d;
    Staging st;
    d.reserve(sqk_decode_scratch(c, n));
    sqk_env e = d.env();
    std::vector<sq_qbuf> sc((size_t)k);
    for (int i = 0; i < k; i++) sc[(size_t)i] = st.qbuf(c, &chunks[i], n);
    float *so = st.put(out, n * 4, 4);
    int rc = finish(d, e, sqk_sum(&e, c, sc.data(), k, n, so));
    st.back(out, so, n * 4);
    return rc;
}

const eq_backend sim = {"cuda-sim", sim_quantize, sim_dequantize, sim_sum_requant, sim_sum};

sq_codec codec(const char *spec)
{
    sq_codec c;
    char err[256];
    if (sq_codec_parse(spec, &c, err, sizeof err) != SQ_OK) {
        fprintf(stderr, "bad spec in the test: %s: %s\n", spec, err);
        abort();
    }
    return c;
}

int run(eq_op op, const char *spec, uint64_t n, eq_dist dist, uint64_t seed, int k = 1,
        const char *spec_out = nullptr)
{
    return eq_run_spec(&sim, op, spec, n, dist, seed, k, spec_out);
}

} /* namespace */

/* ------------------------------------------------------------------------ */
/* The matrix: bits 1..8 x groups x Hadamard x rounding x levels, per op    */
/* ------------------------------------------------------------------------ */

/* 4099 elements: not a multiple of any group but 1, a partial Hadamard
** block for every size, a partial last byte for odd bit widths. */
static const uint64_t MATRIX_N = 4099;

START_TEST(test_matrix)
{
    eq_op op = (eq_op)_i;
    int k = op == EQ_SUM ? 3 : 2;
    int failures = eq_run_matrix(&sim, op, MATRIX_N, k, 1000u * (unsigned)_i);
    ck_assert_msg(failures == 0, "%s: %d cases differ (see stderr)", eq_op_names[op], failures);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Sizes                                                                    */
/* ------------------------------------------------------------------------ */

static const uint64_t sizes[] = {1, 2, 7, 8, 9, 31, 1001, 2048, 2049, 65537};

START_TEST(test_sizes)
{
    const char *specs[] = {
        "bits=4,group=128,round=sr,hadamard=32",            /* TLq-HS first hop */
        "bits=8,group=128,round=sr",                         /* TLq intra */
        "bits=4,group=2048,round=sr",                        /* qWD */
        "bits=4,group=128,round=rtn,levels=deepspeed",       /* ZeRO++ */
        "bits=3,group=7,round=sr,hadamard=1024",             /* irregular everything */
        "kind=minmax,bits=8,group=4096,round=sr,scale=bf16", /* QSDP-like */
    };
    int failures = 0;
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            for (int op = 0; op < EQ_NOPS; op++)
                failures += run((eq_op)op, specs[s], sizes[i], (eq_dist)((s + i) % EQ_NDIST),
                                s * 100 + i, op == EQ_SUM ? 4 : 2,
                                op == EQ_SUM_REQUANT ? "bits=4,group=128,round=sr" : nullptr);
    ck_assert_int_eq(failures, 0);
}
END_TEST

/* Several grid strides and the first tile boundary of the large groups. */
START_TEST(test_larger)
{
    int failures = 0;
    failures += run(EQ_QUANTIZE, "bits=4,group=128,round=sr,hadamard=32", 300007, EQ_GRADIENT, 1);
    failures += run(EQ_QUANTIZE_DIFF, "bits=4,group=2048,round=sr", 200003, EQ_NORMAL, 2);
    failures += run(EQ_DEQUANTIZE, "bits=4,group=128,round=sr,hadamard=1024", 300007,
                    EQ_OUTLIERS, 3);
    failures += run(EQ_SUM_REQUANT, "bits=8,group=128,round=sr", 150001, EQ_HEAVY, 4, 4,
                    "bits=4,group=128,round=sr");
    failures += run(EQ_SUM, "bits=4,group=128,round=sr,hadamard=32", 150001, EQ_GRADIENT, 5, 4);
    /* the bf16 weight reconstruction of qW / qWD (SDP4Bit's shapes) */
    failures += run(EQ_QUANTIZE_BF16, "bits=4,group=2048,round=sr", 200003, EQ_NORMAL, 6);
    failures += run(EQ_QUANTIZE_DIFF_BF16, "bits=4,group=2048,round=sr", 200003, EQ_NORMAL, 7);
    failures += run(EQ_DEQUANTIZE_BF16, "bits=4,group=2048,round=sr", 200003, EQ_HEAVY, 8);
    failures += run(EQ_DEQUANTIZE_ADD_BF16, "bits=4,group=2048,round=sr", 200003, EQ_OUTLIERS, 9);
    ck_assert_int_eq(failures, 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Kinds, scale dtypes, group shapes of every reduction path               */
/* ------------------------------------------------------------------------ */

START_TEST(test_kinds_and_scales)
{
    const char *kinds[] = {"kind=sym", "kind=sym,levels=deepspeed", "kind=minmax"};
    const char *scales[] = {"fp32", "bf16", "fp16"};
    int failures = 0, i = 0;
    for (const char *kind : kinds)
        for (const char *scale : scales)
            for (int bits : {1, 2, 4, 5, 8})
                for (const char *round : {"rtn", "sr"}) {
                    char spec[160];
                    snprintf(spec, sizeof spec, "%s,bits=%d,group=64,round=%s,scale=%s,hadamard=%d",
                             kind, bits, round, scale, i % 3 ? 0 : 128);
                    sq_codec c;
                    if (sq_codec_parse(spec, &c, nullptr, 0) != SQ_OK) continue;
                    for (int op = 0; op < EQ_NOPS; op++)
                        failures += run((eq_op)op, spec, 3001, (eq_dist)(i % EQ_NDIST), 50 + i, 3);
                    i++;
                }
    ck_assert_int_eq(failures, 0);
}
END_TEST

/* Groups that take each way of reducing keys: 8 (one thread), 16..256
** (shuffles), 512 and 8192 (a warp, then shared memory), 24 and 1000
** (shared slots; 1000 takes the two-pass path), 2^20 (two passes, groups
** spanning many blocks), 1 and 3 (many groups per thread). */
START_TEST(test_group_paths)
{
    const uint64_t groups[] = {1, 3, 8, 16, 24, 64, 256, 512, 1000, 8192, 12288, 1u << 20};
    int failures = 0;
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
        for (const char *kind : {"sym", "minmax"})
            for (int h : {0, 512}) {
                char spec[128];
                snprintf(spec, sizeof spec, "kind=%s,bits=6,group=%llu,round=sr,hadamard=%d", kind,
                         (unsigned long long)groups[g], h);
                uint64_t n = groups[g] >= 8192 ? 3 * groups[g] / 2 + 5 : 20011;
                if (n > 300000) n = 300011;
                failures += run(EQ_QUANTIZE, spec, n, (eq_dist)(g % EQ_NDIST), 70 + g);
                failures += run(EQ_QUANTIZE_DIFF, spec, n, (eq_dist)(g % EQ_NDIST), 80 + g);
                failures += run(EQ_SUM_REQUANT, "bits=8,group=32,round=sr", n,
                                (eq_dist)(g % EQ_NDIST), 90 + g, 2, spec);
            }
    ck_assert_int_eq(failures, 0);
}
END_TEST

/* Input and output groups that differ, and more chunks than one kernel
** takes (SQK_MAX_CHUNKS), which go in batches. */
START_TEST(test_chunks)
{
    int failures = 0;
    failures += run(EQ_SUM_REQUANT, "bits=8,group=7,round=sr", 5003, EQ_NORMAL, 1, 3,
                    "bits=4,group=32,round=sr");
    failures += run(EQ_SUM_REQUANT, "kind=minmax,bits=5,group=4096,round=rtn", 9001, EQ_HEAVY, 2,
                    5, "bits=3,group=1,round=sr,levels=deepspeed");
    failures += run(EQ_SUM_REQUANT, "bits=8,group=128,round=sr", 3001, EQ_GRADIENT, 3,
                    SQK_MAX_CHUNKS + 7, "bits=4,group=128,round=sr");
    failures += run(EQ_SUM, "bits=4,group=128,round=sr,hadamard=1024", 5001, EQ_OUTLIERS, 4,
                    2 * SQK_MAX_CHUNKS + 1);
    failures += run(EQ_SUM, "bits=4,group=128,round=sr", 1001, EQ_NORMAL, 5, 1);
    ck_assert_int_eq(failures, 0);
}
END_TEST

/* Buffers off their natural alignment take the scalar paths. */
START_TEST(test_misaligned)
{
    g_misalign = true;
    int failures = 0;
    for (int op = 0; op < EQ_NOPS; op++) {
        failures += run((eq_op)op, "bits=4,group=128,round=sr,hadamard=32", 20011, EQ_GRADIENT, 1,
                        3);
        failures += run((eq_op)op, "bits=8,group=2048,round=rtn,scale=bf16", 20011, EQ_NORMAL, 2,
                        3);
        failures += run((eq_op)op, "kind=minmax,bits=8,group=64,round=sr,scale=fp16", 4099,
                        EQ_HEAVY, 3, 2);
    }
    g_misalign = false;
    ck_assert_int_eq(failures, 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The compressors: QSGD, scaled sign, FP8                                  */
/* ------------------------------------------------------------------------ */

/* Every kind under every scale dtype and rounding, groups of each shape,
** with and without a Hadamard, through every operation; the sums requantize
** into another compressor (a QSGD hop feeding a sign or FP8 hop). */
START_TEST(test_dense_kinds)
{
    const char *kinds[] = {"kind=qsgd,bits=2", "kind=qsgd,bits=4", "kind=qsgd,bits=5",
                           "kind=qsgd,bits=8", "kind=sign",        "kind=fp8e4m3",
                           "kind=fp8e5m2"};
    const char *outs[] = {"kind=sign,group=32", "kind=fp8e4m3,group=64,round=sr",
                          "kind=qsgd,bits=3,group=7,round=sr", "kind=fp8e5m2,group=100,round=rtn"};
    const uint64_t groups[] = {1, 7, 32, 128, 1000, 33};
    int failures = 0, i = 0;
    for (const char *kind : kinds)
        for (const char *scale : {"fp32", "bf16", "fp16"})
            for (const char *round : {"rtn", "sr"}) {
                if (!strcmp(kind, "kind=sign") && !strcmp(round, "sr")) continue;
                char spec[160];
                snprintf(spec, sizeof spec, "%s,group=%llu,round=%s,scale=%s,hadamard=%d", kind,
                         (unsigned long long)groups[i % 6], round, scale, i % 3 ? 0 : 128);
                for (int op = 0; op < EQ_NOPS; op++)
                    failures += run((eq_op)op, spec, 3001, (eq_dist)(i % EQ_NDIST), 300 + i, 3,
                                    op == EQ_SUM_REQUANT ? outs[i % 4] : nullptr);
                /* and as the output of a TLq-like middle hop */
                failures += run(EQ_SUM_REQUANT, "bits=8,group=128,round=sr", 3001,
                                (eq_dist)((i + 1) % EQ_NDIST), 400 + i, 2, spec);
                i++;
            }
    ck_assert_int_eq(failures, 0);
}
END_TEST

/* QSGD and the sign reduce a warp per group: groups of one element, of a
** warp's width and either side of it, large ones that take many rounds of
** every lane, more groups than the grid has warps, groups spanning many
** tiles; FP8 takes every key-reduction path of the fused kernel. */
START_TEST(test_dense_paths)
{
    const uint64_t groups[] = {1, 3, 31, 32, 33, 64, 256, 512, 1000, 8192, 12288, 1u << 17};
    int failures = 0;
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
        for (const char *kind : {"kind=qsgd,bits=6,round=sr", "kind=sign", "kind=fp8e4m3,round=sr"})
            for (int h : {0, 512}) {
                char spec[128];
                snprintf(spec, sizeof spec, "%s,group=%llu,hadamard=%d", kind,
                         (unsigned long long)groups[g], h);
                uint64_t n = groups[g] >= 8192 ? 2 * groups[g] + 5 : 20011;
                failures += run(EQ_QUANTIZE, spec, n, (eq_dist)(g % EQ_NDIST), 170 + g);
                failures += run(EQ_QUANTIZE_DIFF, spec, n, (eq_dist)(g % EQ_NDIST), 180 + g);
                failures += run(EQ_SUM_REQUANT, "bits=8,group=32,round=sr", n,
                                (eq_dist)(g % EQ_NDIST), 190 + g, 2, spec);
            }
    /* more chunks than one kernel takes: summed first, then quantized */
    failures += run(EQ_SUM_REQUANT, "kind=qsgd,bits=8,group=128,round=sr", 3001, EQ_GRADIENT, 3,
                    SQK_MAX_CHUNKS + 7, "kind=qsgd,bits=4,group=128,round=sr");
    failures += run(EQ_SUM, "kind=sign,group=128,hadamard=1024", 5001, EQ_OUTLIERS, 4,
                    SQK_MAX_CHUNKS + 3);
    /* several grid strides */
    failures += run(EQ_QUANTIZE, "kind=qsgd,bits=4,group=128,round=sr,hadamard=32", 300007,
                    EQ_GRADIENT, 5);
    failures += run(EQ_QUANTIZE, "kind=fp8e5m2,group=128,round=sr", 300007, EQ_HEAVY, 6);
    failures += run(EQ_DEQUANTIZE, "kind=sign,group=2048", 300007, EQ_NORMAL, 7);
    /* off their alignment */
    g_misalign = true;
    for (int op = 0; op < EQ_NOPS; op++) {
        failures += run((eq_op)op, "kind=qsgd,bits=3,group=100,round=sr,scale=bf16", 4099,
                        EQ_NORMAL, 8, 2);
        failures += run((eq_op)op, "kind=sign,group=64,scale=fp16", 4099, EQ_HEAVY, 9, 2);
        failures += run((eq_op)op, "kind=fp8e4m3,group=64,round=rtn,scale=fp16", 4099,
                        EQ_OUTLIERS, 10, 2);
    }
    g_misalign = false;
    ck_assert_int_eq(failures, 0);
}
END_TEST

/* Non-finite input, results past fp32 or a scale past its dtype: the same
** status from the kernels as from the reference. */
START_TEST(test_dense_status)
{
    const uint64_t n = 5000;
    std::vector<float> x(n), ref(n), out(n);
    const sq_rng_key key = eq_key(1, 0);
    const char *specs[] = {"kind=qsgd,bits=4,group=100,round=sr",
                           "kind=qsgd,bits=4,group=128,round=sr,hadamard=32",
                           "kind=sign,group=100", "kind=sign,group=128,hadamard=32",
                           "kind=fp8e4m3,group=100,round=sr", "kind=fp8e5m2,group=128,hadamard=32"};
    for (const char *spec : specs) {
        sq_codec c = codec(spec);
        sq_qbuf q;
        sq_qbuf_alloc(&c, n, &q);
        for (int bad = 0; bad < 6; bad++) {
            eq_fill(x.data(), n, EQ_NORMAL, 20 + (uint64_t)bad);
            eq_fill(ref.data(), n, EQ_NORMAL, 30 + (uint64_t)bad);
            const float *r = nullptr;
            int want;
            switch (bad) {
            case 0: x[4321] = NAN; want = SQ_ERR_NONFINITE; break;
            case 1: x[17] = -INFINITY; want = SQ_ERR_NONFINITE; break;
            case 2: /* a difference past fp32 */
                x[17] = 3e38f; ref[17] = -3e38f; r = ref.data(); want = SQ_ERR_RANGE; break;
            case 3: /* NaN in ref */
                ref[99] = NAN; r = ref.data(); want = SQ_ERR_NONFINITE; break;
            case 4: /* a group near FLT_MAX: QSGD's norm passes fp32 (its grid
                    ** does), the Hadamard overflows, the sign's mean and
                    ** FP8's grid (3.4e38 / 448 * 448) stay finite */
                for (int j = 0; j < 32; j++) x[2048 + j] = 3.4e38f;
                want = c.hadamard || c.kind == SQ_KIND_QSGD ? SQ_ERR_RANGE : SQ_OK;
                break;
            default: /* everything fine */
                want = SQ_OK; break;
            }
            int rc_ref = r ? sq_quantize_diff(&c, x.data(), r, n, &key, &q)
                           : sq_quantize(&c, x.data(), n, &key, &q);
            int rc_sim = sim_quantize(&c, x.data(), r, n, &key, &q);
            ck_assert_msg(rc_ref == want && rc_sim == want, "%s case %d: %d from the reference, "
                          "%d from the kernels, %d wanted", spec, bad, rc_ref, rc_sim, want);
        }
        /* damaged codes or scales decode to non-finite values: RANGE */
        eq_fill(x.data(), n, EQ_NORMAL, 12);
        ck_assert_int_eq(sq_quantize(&c, x.data(), n, &key, &q), SQ_OK);
        ((float *)q.scales)[3] = INFINITY;
        ck_assert_int_eq(sq_dequantize(&c, &q, n, out.data()), SQ_ERR_RANGE);
        ck_assert_int_eq(sim_dequantize(&c, &q, nullptr, n, out.data()), SQ_ERR_RANGE);
        if (c.kind == SQ_KIND_FP8E4M3) {
            ((float *)q.scales)[3] = 1.0f;
            q.codes[1000] = 0x7f; /* e4m3fn's NaN */
            ck_assert_int_eq(sq_dequantize(&c, &q, n, out.data()), SQ_ERR_RANGE);
            ck_assert_int_eq(sim_dequantize(&c, &q, nullptr, n, out.data()), SQ_ERR_RANGE);
        }
        sq_qbuf_free(&q);
    }
    /* a 16-bit scale past its range */
    sq_codec c = codec("kind=fp8e4m3,group=64,scale=fp16,round=rtn");
    sq_qbuf q;
    sq_qbuf_alloc(&c, n, &q);
    eq_fill(x.data(), n, EQ_NORMAL, 13);
    x[700] = 1e9f; /* scale 1e9 / 448 > 65504 */
    ck_assert_int_eq(sq_quantize(&c, x.data(), n, &key, &q), SQ_ERR_RANGE);
    ck_assert_int_eq(sim_quantize(&c, x.data(), nullptr, n, &key, &q), SQ_ERR_RANGE);
    sq_qbuf_free(&q);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The fp16 sums of qgZ                                                     */
/* ------------------------------------------------------------------------ */

/* k chunks of n elements quantized by the C reference under spec (values of
** magnitude mag), then summed in fp16 by the reference and by the kernels:
** the same status and, on success, the same bytes. With spec_out, the sum
** is requantized. Returns the number of differences. */
static int f16_case(const char *spec, const char *spec_out, uint64_t n, int k, float mag,
                    uint64_t seed)
{
    const sq_codec c = codec(spec);
    const sq_codec co = spec_out ? codec(spec_out) : c;
    std::vector<sq_qbuf> chunks((size_t)k);
    std::vector<float> x(n);
    uint64_t st = seed * 0x9e3779b97f4a7c15ull + 1;
    const sq_rng_key key = {seed, 7, 3, 2};
    for (int i = 0; i < k; i++) {
        for (uint64_t j = 0; j < n; j++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            float u = (float)(st >> 40) * 0x1p-24f - 0.5f;
            x[j] = u * mag * (j % 13 == 0 ? 64.0f : 1.0f) * (j % 7 == 3 ? 1e-6f : 1.0f);
        }
        sq_qbuf_alloc(&c, n, &chunks[(size_t)i]);
        if (sq_quantize(&c, x.data(), n, &key, &chunks[(size_t)i]) != SQ_OK) abort();
    }
    int bad = 0;
    if (!spec_out) {
        std::vector<float> want(n), got(n);
        int rc_ref = sq_dequant_sum_f16(&c, chunks.data(), k, n, want.data());
        SimDevice d;
        sqk_env e = d.env();
        int rc_sim = finish(d, e, sqk_sum_f16(&e, &c, chunks.data(), k, n, got.data()));
        if (rc_ref != rc_sim) {
            fprintf(stderr, "f16 sum %s k %d: status %d vs %d\n", spec, k, rc_ref, rc_sim);
            bad++;
        } else if (rc_ref == SQ_OK && memcmp(want.data(), got.data(), n * 4) != 0) {
            fprintf(stderr, "f16 sum %s k %d: bytes differ\n", spec, k);
            bad++;
        }
        for (uint64_t j = 0; rc_ref == SQ_OK && j < n; j++)
            if (sq_f16_to_f32(sq_f32_to_f16(want[j])) != want[j]) {
                fprintf(stderr, "f16 sum %s: element %llu is not an fp16 value\n", spec,
                        (unsigned long long)j);
                bad++;
                break;
            }
    } else {
        sq_qbuf want, got;
        sq_qbuf_alloc(&co, n, &want);
        sq_qbuf_alloc(&co, n, &got);
        int rc_ref = sq_dequant_sum_requant_f16(&c, chunks.data(), k, n, &co, &key, &want);
        SimDevice d;
        d.reserve(sqk_sum_requant_scratch(&c, k, n, &co));
        sqk_env e = d.env();
        int rc_sim = finish(d, e, sqk_sum_requant_f16(&e, &c, chunks.data(), k, n, &co, &key, &got));
        if (rc_ref != rc_sim) {
            fprintf(stderr, "f16 sum-requant %s k %d: status %d vs %d\n", spec, k, rc_ref, rc_sim);
            bad++;
        } else if (rc_ref == SQ_OK &&
                   (memcmp(want.codes, got.codes, sq_codec_code_bytes(&co, n)) != 0 ||
                    memcmp(want.scales, got.scales, sq_codec_scale_bytes(&co, n)) != 0)) {
            fprintf(stderr, "f16 sum-requant %s k %d: bytes differ\n", spec, k);
            bad++;
        }
        sq_qbuf_free(&want);
        sq_qbuf_free(&got);
    }
    for (int i = 0; i < k; i++) sq_qbuf_free(&chunks[(size_t)i]);
    return bad;
}

START_TEST(test_f16_sums)
{
    int failures = 0;
    const char *ds = "bits=4,group=768,round=rtn,levels=deepspeed";
    failures += f16_case(ds, nullptr, 6144, 2, 1.0f, 1);
    failures += f16_case(ds, ds, 6144, 4, 1.0f, 2);
    failures += f16_case("bits=4,group=7,round=rtn,levels=deepspeed", nullptr, 2051, 3, 3.0f, 3);
    failures += f16_case("bits=4,group=12,round=rtn,levels=deepspeed",
                         "bits=4,group=12,round=rtn,levels=deepspeed", 1201, 5, 0.01f, 4);
    failures += f16_case("bits=8,group=128,round=sr,scale=fp16", "bits=4,group=32,round=sr", 4099,
                         3, 1.0f, 5);
    /* more chunks than one kernel argument holds: batches continue in fp16 */
    failures += f16_case(ds, nullptr, 1536, SQK_MAX_CHUNKS + 5, 1.0f, 6);
    failures += f16_case(ds, ds, 1536, SQK_MAX_CHUNKS + 5, 1.0f, 7);
    /* sums past fp16's range: an infinity, SQ_ERR_RANGE on both */
    failures += f16_case(ds, nullptr, 1024, 4, 60000.0f, 8);
    failures += f16_case(ds, ds, 1024, 4, 60000.0f, 9);
    /* the compressors in and out of the fp16 sums */
    failures += f16_case("kind=qsgd,bits=4,group=64,round=sr", "kind=sign,group=32", 2051, 3,
                         1.0f, 10);
    failures += f16_case("kind=fp8e4m3,group=128,round=sr", "kind=qsgd,bits=8,group=100,round=sr",
                         4099, 4, 1.0f, 11);
    failures += f16_case("kind=sign,group=7", nullptr, 2051, 5, 1.0f, 12);
    ck_assert_int_eq(failures, 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Statuses                                                                 */
/* ------------------------------------------------------------------------ */

START_TEST(test_status)
{
    const uint64_t n = 5000;
    std::vector<float> x(n), ref(n), out(n);
    eq_fill(x.data(), n, EQ_NORMAL, 9);
    sq_codec c = codec("bits=4,group=128,round=sr,hadamard=32");
    sq_rng_key key = eq_key(1, 0);
    sq_qbuf q;
    sq_qbuf_alloc(&c, n, &q);

    x[4321] = NAN; /* non-finite input */
    ck_assert_int_eq(sim_quantize(&c, x.data(), nullptr, n, &key, &q), SQ_ERR_NONFINITE);
    ck_assert_int_eq(sq_quantize(&c, x.data(), n, &key, &q), SQ_ERR_NONFINITE);
    x[4321] = -INFINITY;
    ck_assert_int_eq(sim_quantize(&c, x.data(), nullptr, n, &key, &q), SQ_ERR_NONFINITE);

    /* finite values the transform takes past fp32 */
    for (int j = 0; j < 32; j++) x[64 + j] = 3e38f;
    x[4321] = 1.0f;
    ck_assert_int_eq(sq_quantize(&c, x.data(), n, &key, &q), SQ_ERR_RANGE);
    ck_assert_int_eq(sim_quantize(&c, x.data(), nullptr, n, &key, &q), SQ_ERR_RANGE);

    /* a difference that overflows */
    sq_codec d = codec("bits=4,group=2048,round=sr");
    sq_qbuf qd;
    sq_qbuf_alloc(&d, n, &qd);
    eq_fill(x.data(), n, EQ_NORMAL, 10);
    eq_fill(ref.data(), n, EQ_NORMAL, 11);
    x[17] = 3e38f;
    ref[17] = -3e38f;
    ck_assert_int_eq(sq_quantize_diff(&d, x.data(), ref.data(), n, &key, &qd), SQ_ERR_RANGE);
    ck_assert_int_eq(sim_quantize(&d, x.data(), ref.data(), n, &key, &qd), SQ_ERR_RANGE);
    ref[17] = NAN;
    ck_assert_int_eq(sim_quantize(&d, x.data(), ref.data(), n, &key, &qd), SQ_ERR_NONFINITE);

    /* bf16 weights: a finite master that rounds past bf16's range, and a
    ** bf16 difference past fp32 (the fp32 path takes neither) */
    eq_fill(x.data(), n, EQ_NORMAL, 13);
    eq_fill(ref.data(), n, EQ_NORMAL, 14);
    x[29] = 3.4e38f;
    ck_assert_int_eq(sq_quantize(&d, x.data(), n, &key, &qd), SQ_OK);
    ck_assert_int_eq(sq_quantize_bf16(&d, x.data(), n, &key, &qd), SQ_ERR_RANGE);
    ck_assert_int_eq(sim_quantize(&d, x.data(), nullptr, n, &key, &qd, 1), SQ_ERR_RANGE);
    ck_assert_int_eq(sq_quantize_diff_bf16(&d, x.data(), ref.data(), n, &key, &qd), SQ_ERR_RANGE);
    ck_assert_int_eq(sim_quantize(&d, x.data(), ref.data(), n, &key, &qd, 1), SQ_ERR_RANGE);
    x[29] = 3.3e38f;
    ref[29] = -3.3e38f;
    ck_assert_int_eq(sq_quantize_diff_bf16(&d, x.data(), ref.data(), n, &key, &qd), SQ_ERR_RANGE);
    ck_assert_int_eq(sim_quantize(&d, x.data(), ref.data(), n, &key, &qd, 1), SQ_ERR_RANGE);
    ref[29] = INFINITY;
    ck_assert_int_eq(sq_quantize_diff_bf16(&d, x.data(), ref.data(), n, &key, &qd),
                     SQ_ERR_NONFINITE);
    ck_assert_int_eq(sim_quantize(&d, x.data(), ref.data(), n, &key, &qd, 1), SQ_ERR_NONFINITE);

    /* a grid past fp32 (docs/conventions.md: sym bits=6 on {FLT_MAX, 1}) */
    sq_codec g = codec("bits=6,group=2,round=rtn");
    sq_qbuf qg;
    sq_qbuf_alloc(&g, 2, &qg);
    float big[2] = {3.4028234663852886e38f, 1.0f};
    ck_assert_int_eq(sq_quantize(&g, big, 2, nullptr, &qg), SQ_ERR_RANGE);
    ck_assert_int_eq(sim_quantize(&g, big, nullptr, 2, nullptr, &qg), SQ_ERR_RANGE);

    /* damaged metadata decodes to Inf: every value written, then RANGE */
    eq_fill(x.data(), n, EQ_NORMAL, 12);
    ck_assert_int_eq(sq_quantize(&c, x.data(), n, &key, &q), SQ_OK);
    ((float *)q.scales)[3] = INFINITY;
    ck_assert_int_eq(sim_dequantize(&c, &q, nullptr, n, out.data()), SQ_ERR_RANGE);
    ck_assert_int_eq(sq_dequantize(&c, &q, n, out.data()), SQ_ERR_RANGE);

    sq_qbuf_free(&q);
    sq_qbuf_free(&qd);
    sq_qbuf_free(&qg);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The casts as codecs (kind=bf16, kind=fp16, cast.cu)                      */
/* ------------------------------------------------------------------------ */

/* Every operation, sizes around the thread and tile boundaries; fp16 takes
** no heavy-tailed input (values past its range are the status test's). */
START_TEST(test_casts)
{
    static const uint64_t cast_sizes[] = {1, 7, 8, 9, 2049, 65537};
    static const eq_dist dists[] = {EQ_NORMAL, EQ_OUTLIERS, EQ_GRADIENT};
    int failures = 0, i = 0;
    for (const char *spec : {"kind=fp16", "kind=bf16"})
        for (uint64_t n : cast_sizes)
            for (int op = 0; op < EQ_NOPS; op++, i++)
                failures += run((eq_op)op, spec, n, dists[i % 3], 50 + (uint64_t)i,
                                op == EQ_SUM ? 3 : 2,
                                op == EQ_SUM_REQUANT && i % 2 ? "kind=bf16" : nullptr);
    /* a cast on one side of a requantization, the other a quantizing codec
    ** (whose transform the middle hop ignores) */
    failures +=
        run(EQ_SUM_REQUANT, "kind=fp16", 4099, EQ_NORMAL, 60, 3, "bits=4,group=128,round=sr");
    failures += run(EQ_SUM_REQUANT, "bits=8,group=128,round=sr,hadamard=32", 4099, EQ_GRADIENT,
                    61, 3, "kind=fp16");
    failures += run(EQ_SUM_REQUANT, "kind=minmax,bits=8,group=4096,round=sr", 20011, EQ_OUTLIERS,
                    62, 2, "kind=bf16");
    /* more chunks than one kernel argument holds */
    failures += run(EQ_SUM_REQUANT, "kind=bf16", 3001, EQ_NORMAL, 63, SQK_MAX_CHUNKS + 7,
                    "kind=fp16");
    failures += run(EQ_SUM_REQUANT, "kind=fp16", 3001, EQ_NORMAL, 64, SQK_MAX_CHUNKS + 7,
                    "bits=4,group=128,round=sr");
    failures += run(EQ_SUM, "kind=fp16", 3001, EQ_GRADIENT, 65, 2 * SQK_MAX_CHUNKS + 1);
    /* codes at odd addresses: the byte-wise stores */
    g_misalign = true;
    for (int op = 0; op < EQ_NOPS; op++)
        failures += run((eq_op)op, "kind=fp16", 4099, EQ_NORMAL, 70 + (uint64_t)op, 3);
    g_misalign = false;
    ck_assert_int_eq(failures, 0);
}
END_TEST

/* top-k and random-k (sparse.cu): every operation, group sizes with 1-,
** 2- and 4-byte indices, short last groups, keep = 1 and keep = group,
** the three value dtypes; a sparse codec on either side of a
** requantization. (No hadamard=: the CUDA backend refuses it for them.) */
START_TEST(test_sparse)
{
    static const char *const specs[] = {
        "kind=topk,group=8,keep=3",         "kind=randk,group=8,keep=3",
        "kind=topk,group=256,keep=1",       "kind=randk,group=256,keep=256",
        "kind=topk,group=300,keep=300",     "kind=randk,group=300,keep=17,scale=bf16",
        "kind=topk,group=1000,keep=99,scale=fp16", "kind=randk,group=1000,keep=1,scale=fp16",
        "kind=topk,group=70000,keep=500,scale=bf16", "kind=randk,group=70000,keep=333"};
    static const eq_dist dists[] = {EQ_NORMAL, EQ_OUTLIERS, EQ_GRADIENT};
    int failures = 0, i = 0;
    for (const char *spec : specs) {
        const uint64_t n = strstr(spec, "70000") ? 150001 : 4099;
        for (int op = 0; op < EQ_NOPS; op++, i++)
            failures += run((eq_op)op, spec, n, dists[i % 3], 80 + (uint64_t)i,
                            op == EQ_SUM ? 3 : 2,
                            op == EQ_SUM_REQUANT && i % 2 ? "kind=randk,group=64,keep=5" : nullptr);
    }
    failures += run(EQ_SUM_REQUANT, "bits=4,group=128,round=sr,hadamard=32", 4099, EQ_NORMAL, 90,
                    3, "kind=topk,group=128,keep=9");
    failures += run(EQ_SUM_REQUANT, "kind=topk,group=128,keep=9", 4099, EQ_GRADIENT, 91, 3,
                    "kind=bf16");
    failures += run(EQ_SUM_REQUANT, "kind=fp16", 4099, EQ_GRADIENT, 92, 3,
                    "kind=randk,group=50,keep=7");
    ck_assert_int_eq(failures, 0);
}
END_TEST

/* Ties (many equal magnitudes, +0 against -0) choose as the reference. */
START_TEST(test_sparse_ties)
{
    const uint64_t n = 1037;
    std::vector<float> x(n), outc(n), outs(n);
    for (uint64_t i = 0; i < n; i++) x[i] = (float)((int)(i * 7 % 5) - 2) * (i % 3 ? 1.0f : -1.0f);
    for (uint64_t i = 0; i < n; i += 11) x[i] = i % 2 ? -0.0f : 0.0f;
    for (const char *spec : {"kind=topk,group=64,keep=10", "kind=topk,group=300,keep=150",
                             "kind=topk,group=5,keep=1"}) {
        sq_codec c = codec(spec);
        sq_qbuf qc, qs;
        ck_assert_int_eq(sq_qbuf_alloc(&c, n, &qc), SQ_OK);
        ck_assert_int_eq(sq_qbuf_alloc(&c, n, &qs), SQ_OK);
        ck_assert_int_eq(sq_quantize(&c, x.data(), n, nullptr, &qc), SQ_OK);
        ck_assert_int_eq(sim_quantize(&c, x.data(), nullptr, n, nullptr, &qs), SQ_OK);
        ck_assert(memcmp(qc.codes, qs.codes, sq_codec_code_bytes(&c, n)) == 0);
        ck_assert(memcmp(qc.scales, qs.scales, sq_codec_scale_bytes(&c, n)) == 0);
        ck_assert_int_eq(sq_dequantize(&c, &qc, n, outc.data()), SQ_OK);
        ck_assert_int_eq(sim_dequantize(&c, &qs, nullptr, n, outs.data()), SQ_OK);
        ck_assert(memcmp(outc.data(), outs.data(), n * 4) == 0);
        sq_qbuf_free(&qc);
        sq_qbuf_free(&qs);
    }
}
END_TEST

START_TEST(test_cast_status)
{
    const uint64_t n = 5000;
    std::vector<float> x(n), ref(n), out(n);
    sq_codec f = codec("kind=fp16"), b = codec("kind=bf16");
    sq_qbuf q;
    sq_qbuf_alloc(&f, n, &q);
    eq_fill(x.data(), n, EQ_NORMAL, 1);
    eq_fill(ref.data(), n, EQ_NORMAL, 2);
    /* past fp16's range: a range error, never an Inf code */
    x[4000] = 65520.0f;
    ck_assert_int_eq(sq_quantize(&f, x.data(), n, nullptr, &q), SQ_ERR_RANGE);
    ck_assert_int_eq(sim_quantize(&f, x.data(), nullptr, n, nullptr, &q), SQ_ERR_RANGE);
    x[4000] = 65519.0f; /* rounds to 65504, the largest fp16 */
    ck_assert_int_eq(sq_quantize(&f, x.data(), n, nullptr, &q), SQ_OK);
    ck_assert_int_eq(sim_quantize(&f, x.data(), nullptr, n, nullptr, &q), SQ_OK);
    /* bf16: only near FLT_MAX */
    x[4000] = 3.4028234663852886e38f;
    ck_assert_int_eq(sq_quantize(&b, x.data(), n, nullptr, &q), SQ_ERR_RANGE);
    ck_assert_int_eq(sim_quantize(&b, x.data(), nullptr, n, nullptr, &q), SQ_ERR_RANGE);
    x[4000] = NAN;
    ck_assert_int_eq(sq_quantize(&f, x.data(), n, nullptr, &q), SQ_ERR_NONFINITE);
    ck_assert_int_eq(sim_quantize(&f, x.data(), nullptr, n, nullptr, &q), SQ_ERR_NONFINITE);
    ck_assert_int_eq(sq_quantize_diff(&f, x.data(), ref.data(), n, nullptr, &q), SQ_ERR_NONFINITE);
    ck_assert_int_eq(sim_quantize(&f, x.data(), ref.data(), n, nullptr, &q), SQ_ERR_NONFINITE);
    /* a difference past fp32 */
    x[4000] = 3e38f;
    ref[4000] = -3e38f;
    ck_assert_int_eq(sq_quantize_diff(&b, x.data(), ref.data(), n, nullptr, &q), SQ_ERR_RANGE);
    ck_assert_int_eq(sim_quantize(&b, x.data(), ref.data(), n, nullptr, &q), SQ_ERR_RANGE);
    /* damaged codes decode to Inf: every value written, then RANGE */
    eq_fill(x.data(), n, EQ_NORMAL, 3);
    ck_assert_int_eq(sq_quantize(&f, x.data(), n, nullptr, &q), SQ_OK);
    q.codes[2 * 777] = 0x00;
    q.codes[2 * 777 + 1] = 0x7c; /* +Inf */
    ck_assert_int_eq(sq_dequantize(&f, &q, n, out.data()), SQ_ERR_RANGE);
    ck_assert_int_eq(sim_dequantize(&f, &q, nullptr, n, out.data()), SQ_ERR_RANGE);
    /* a sum past fp16's range requantized to fp16 */
    eq_fill(x.data(), n, EQ_NORMAL, 4);
    x[10] = 60000.0f;
    sq_qbuf two[2];
    sq_qbuf_alloc(&f, n, &two[0]);
    sq_qbuf_alloc(&f, n, &two[1]);
    ck_assert_int_eq(sq_quantize(&f, x.data(), n, nullptr, &two[0]), SQ_OK);
    ck_assert_int_eq(sq_quantize(&f, x.data(), n, nullptr, &two[1]), SQ_OK);
    ck_assert_int_eq(sq_dequant_sum_requant(&f, two, 2, n, &f, nullptr, &q), SQ_ERR_RANGE);
    ck_assert_int_eq(sim_sum_requant(&f, two, 2, n, &f, nullptr, &q), SQ_ERR_RANGE);
    ck_assert_int_eq(sq_dequant_sum(&f, two, 2, n, out.data()), SQ_OK);
    ck_assert_int_eq(sim_sum(&f, two, 2, n, out.data()), SQ_OK);
    sq_qbuf_free(&two[0]);
    sq_qbuf_free(&two[1]);
    sq_qbuf_free(&q);
}
END_TEST

/* n = 0 launches nothing and touches nothing. */
START_TEST(test_empty)
{
    sq_codec c = codec("bits=4,group=128");
    sq_qbuf none = {nullptr, nullptr, nullptr};
    sq_rng_key key = eq_key(1, 0);
    ck_assert_int_eq(sim_quantize(&c, nullptr, nullptr, 0, &key, &none), SQ_OK);
    ck_assert_int_eq(sim_dequantize(&c, &none, nullptr, 0, nullptr), SQ_OK);
    ck_assert_int_eq(sim_quantize(&c, nullptr, nullptr, 0, &key, &none, 1), SQ_OK);
    ck_assert_int_eq(sim_dequantize(&c, &none, nullptr, 0, nullptr, 1), SQ_OK);
    ck_assert_int_eq(sim_sum(&c, &none, 1, 0, nullptr), SQ_OK);
    ck_assert_int_eq(sim_sum_requant(&c, &none, 1, 0, &c, &key, &none), SQ_OK);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The elementwise operations against the CPU backend                       */
/* ------------------------------------------------------------------------ */

namespace {

/* Host memory for the emulated device: one element more than n (a guard
** that must keep its pattern), shifted off the 16-byte alignment by one
** element when misaligned, so that the vector loads and stores are not
** taken. */
template <class T> struct SimBuf {
    std::vector<T> v;
    T *p;
    SimBuf(uint64_t n, bool misalign, const T *src)
        : v((size_t)n + 2)
    {
        memset(v.data(), EQ_PATTERN, v.size() * sizeof(T));
        p = v.data() + (misalign ? 1 : 0);
        if (src && n) memcpy(p, src, (size_t)n * sizeof(T));
    }
};

/* Compares the bytes of n elements and the guard after them, and the
** status, printing the first difference. Returns 0 or 1. */
int ew_compare(const char *what, const void *want, const void *got, uint64_t bytes, int rw,
               int rg)
{
    int64_t at = eq_first_diff(want, got, bytes);
    if (at < 0 && rw == rg) return 0;
    fprintf(stderr, "MISMATCH %s: ", what);
    if (at >= 0)
        fprintf(stderr, "byte %lld: 0x%02x from the CPU, 0x%02x from the kernel; ", (long long)at,
                ((const unsigned char *)want)[at], ((const unsigned char *)got)[at]);
    fprintf(stderr, "status %d (%s) from the CPU, %d (%s) from the kernel\n", rw, sq_strerror(rw),
            rg, sq_strerror(rg));
    return 1;
}

/* The four operations on one input, through the CPU backend and the
** kernels; out is a (for add, sub and to_bf16's input, x) when aliased. Also
** checks the CPU's statuses against the rule of backend.h. Returns the
** number of differences. */
int ew_case(sq_backend *cpu, uint64_t n, eq_ew_kind kind, bool misalign, bool alias,
            uint64_t seed)
{
    std::vector<float> a((size_t)n + 1), b((size_t)n + 1);
    std::vector<uint16_t> h((size_t)n + 1);
    eq_ew_fill(a.data(), b.data(), h.data(), n, kind, seed);
    int want[3];
    eq_ew_want(kind, want);
    if (n == 0) want[0] = want[1] = want[2] = SQ_OK;
    char what[160];
    int failures = 0;

    /* add: out = a + b, or a = a + b */
    {
        SimBuf<float> ca(n, false, a.data()), co(n, false, nullptr);
        float *cout = alias ? ca.p : co.p;
        int rw = sq_backend_add(cpu, ca.p, b.data(), n, cout);
        SimBuf<float> sa(n, misalign, a.data()), sb(n, misalign, b.data());
        SimBuf<float> so(n, misalign, nullptr);
        float *sout = alias ? sa.p : so.p;
        SimDevice d;
        sqk_env e = d.env();
        int rg = finish(d, e, sqk_add(&e, sa.p, sb.p, n, sout));
        snprintf(what, sizeof what, "add, n=%llu, %s%s%s", (unsigned long long)n,
                 eq_ew_kind_names[kind], misalign ? ", misaligned" : "", alias ? ", out = a" : "");
        failures += ew_compare(what, cout, sout, (n + 1) * 4, rw, rg);
        if (rw != want[0]) {
            fprintf(stderr, "%s: status %d from the CPU, %d wanted\n", what, rw, want[0]);
            failures++;
        }
    }

    /* sub: out = a - (-b), or a = a - (-b): the kernel against the CPU, and
    ** both against add's bytes (a - (-b) is a + b exactly) */
    {
        std::vector<float> nb((size_t)n + 1);
        for (uint64_t i = 0; i < n; i++) nb[(size_t)i] = -b[(size_t)i];
        SimBuf<float> ca(n, false, a.data()), co(n, false, nullptr);
        SimBuf<float> aa(n, false, a.data()), ao(n, false, nullptr);
        float *cout = alias ? ca.p : co.p, *aout = alias ? aa.p : ao.p;
        int rw = sq_backend_sub(cpu, ca.p, nb.data(), n, cout);
        int ra = sq_backend_add(cpu, aa.p, b.data(), n, aout);
        SimBuf<float> sa(n, misalign, a.data()), sb(n, misalign, nb.data());
        SimBuf<float> so(n, misalign, nullptr);
        float *sout = alias ? sa.p : so.p;
        SimDevice d;
        sqk_env e = d.env();
        int rg = finish(d, e, sqk_sub(&e, sa.p, sb.p, n, sout));
        snprintf(what, sizeof what, "sub, n=%llu, %s%s%s", (unsigned long long)n,
                 eq_ew_kind_names[kind], misalign ? ", misaligned" : "", alias ? ", out = a" : "");
        failures += ew_compare(what, cout, sout, (n + 1) * 4, rw, rg);
        snprintf(what, sizeof what, "sub against add, n=%llu, %s%s", (unsigned long long)n,
                 eq_ew_kind_names[kind], alias ? ", out = a" : "");
        failures += ew_compare(what, aout, cout, (n + 1) * 4, ra, rw);
    }

    /* to_bf16 (aliasing x and out is no contract: different types) */
    {
        SimBuf<uint16_t> co(n, false, nullptr);
        int rw = sq_backend_to_bf16(cpu, a.data(), n, co.p);
        SimBuf<float> sx(n, misalign, a.data());
        SimBuf<uint16_t> so(n, misalign, nullptr);
        SimDevice d;
        sqk_env e = d.env();
        int rg = finish(d, e, sqk_to_bf16(&e, sx.p, n, so.p));
        snprintf(what, sizeof what, "to_bf16, n=%llu, %s%s", (unsigned long long)n,
                 eq_ew_kind_names[kind], misalign ? ", misaligned" : "");
        failures += ew_compare(what, co.p, so.p, (n + 1) * 2, rw, rg);
        if (rw != want[1]) {
            fprintf(stderr, "%s: status %d from the CPU, %d wanted\n", what, rw, want[1]);
            failures++;
        }
        /* and every value is sq_f32_to_bf16's */
        for (uint64_t i = 0; i < n; i++)
            if (co.p[i] != sq_f32_to_bf16(a[(size_t)i])) {
                fprintf(stderr, "%s: element %llu is not sq_f32_to_bf16's\n", what,
                        (unsigned long long)i);
                failures++;
                break;
            }
    }

    /* from_bf16 */
    {
        SimBuf<float> co(n, false, nullptr);
        int rw = sq_backend_from_bf16(cpu, h.data(), n, co.p);
        SimBuf<uint16_t> sh(n, misalign, h.data());
        SimBuf<float> so(n, misalign, nullptr);
        SimDevice d;
        sqk_env e = d.env();
        int rg = finish(d, e, sqk_from_bf16(&e, sh.p, n, so.p));
        snprintf(what, sizeof what, "from_bf16, n=%llu, %s%s", (unsigned long long)n,
                 eq_ew_kind_names[kind], misalign ? ", misaligned" : "");
        failures += ew_compare(what, co.p, so.p, (n + 1) * 4, rw, rg);
        if (rw != want[2]) {
            fprintf(stderr, "%s: status %d from the CPU, %d wanted\n", what, rw, want[2]);
            failures++;
        }
    }
    return failures;
}

} /* namespace */

/* 0; 1; odd; a partial tile; past one grid stride (2 SMs x 8 blocks x 2048)
** with a partial last vector */
static const uint64_t ew_sizes[] = {0, 1, 7, 4099, 65537 + 3};

START_TEST(test_elementwise)
{
    sq_backend *cpu = nullptr;
    sq_error err = {};
    ck_assert_msg(sq_backend_open("cpu", &cpu, &err) == SQ_OK, "%s", err.msg);
    int failures = 0;
    uint64_t seed = 1;
    for (uint64_t n : ew_sizes)
        for (int kind = 0; kind < EQ_EW_NKINDS; kind++)
            for (bool misalign : {false, true})
                for (bool alias : {false, true})
                    failures += ew_case(cpu, n, (eq_ew_kind)kind, misalign, alias, seed++);
    sq_backend_close(cpu);
    ck_assert_int_eq(failures, 0);
}
END_TEST

/* n = 0 launches nothing and touches nothing, NULL pointers included. */
START_TEST(test_elementwise_empty)
{
    SimDevice d;
    sqk_env e = d.env();
    ck_assert_int_eq(finish(d, e, sqk_add(&e, nullptr, nullptr, 0, nullptr)), SQ_OK);
    ck_assert_int_eq(finish(d, e, sqk_sub(&e, nullptr, nullptr, 0, nullptr)), SQ_OK);
    ck_assert_int_eq(finish(d, e, sqk_to_bf16(&e, nullptr, 0, nullptr)), SQ_OK);
    ck_assert_int_eq(finish(d, e, sqk_from_bf16(&e, nullptr, 0, nullptr)), SQ_OK);
    ck_assert_uint_eq(d.flags, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kernels_sim");
    TCase *tm = tcase_create("matrix");
    tcase_add_loop_test(tm, test_matrix, 0, EQ_NOPS);
    suite_add_tcase(s, tm);
    TCase *tc = tcase_create("shapes");
    tcase_add_test(tc, test_sizes);
    tcase_add_test(tc, test_larger);
    tcase_add_test(tc, test_kinds_and_scales);
    tcase_add_test(tc, test_group_paths);
    tcase_add_test(tc, test_chunks);
    tcase_add_test(tc, test_misaligned);
    tcase_add_test(tc, test_f16_sums);
    tcase_add_test(tc, test_status);
    tcase_add_test(tc, test_empty);
    tcase_add_test(tc, test_casts);
    tcase_add_test(tc, test_cast_status);
    tcase_add_test(tc, test_sparse);
    tcase_add_test(tc, test_sparse_ties);
    suite_add_tcase(s, tc);
    TCase *td = tcase_create("compressors");
    tcase_add_test(td, test_dense_kinds);
    tcase_add_test(td, test_dense_paths);
    tcase_add_test(td, test_dense_status);
    suite_add_tcase(s, td);
    TCase *te = tcase_create("elementwise");
    tcase_add_test(te, test_elementwise);
    tcase_add_test(te, test_elementwise_empty);
    suite_add_tcase(s, te);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
