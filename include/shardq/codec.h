/*
** shardq -- the shardq codec core: one public header for the C reference.
**
** The core quantizes flat fp32 buffers the way the communication of sharded
** data-parallel training does (SDP4Bit, ZeRO++, QSDP): groups of consecutive
** elements share a scale, codes of 1 to 8 bits are packed into one dense bit
** stream, rounding is to nearest-even or stochastic (Philox), and an optional
** Hadamard transform spreads outliers before quantization.
**
** Every function here is pure C over host memory and depends on nothing but
** libc and the Random123 headers. The CUDA backend implements the same calls
** over device memory and produces the same bytes: the per-element arithmetic
** of both lives in "sq_hd.h". The conventions (what a code, a scale, a random
** number and a packed byte are) are documented in docs/conventions.md.
**
** Errors: functions that can fail return an sq_status; SQ_OK is zero and every
** failure is negative (see "Status codes and errors" below). On failure the
** contents of output buffers are unspecified.
*/
#ifndef SHARDQ_CODEC_H
#define SHARDQ_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Every public header wraps its declarations in SQ_BEGIN_DECLS and
** SQ_END_DECLS (C linkage for C++). libshardq.so exports what these headers
** name and nothing else (build-aux/api-symbols.sh). */
#ifdef __cplusplus
#define SQ_BEGIN_DECLS extern "C" {
#define SQ_END_DECLS }
#else
#define SQ_BEGIN_DECLS
#define SQ_END_DECLS
#endif

SQ_BEGIN_DECLS

/* The version, defined here only: configure (AC_INIT, shardq.pc) and the
** Python package (sq_version, pyproject's dynamic version) take it from
** this line. */
#define SHARDQ_VERSION_STRING "0.1.0"

/* SHARDQ_VERSION_STRING of the library as it was built (which a program
** compiled against another header may differ from). */
const char *sq_version(void);

/* ------------------------------------------------------------------------ */
/* Status codes and errors                                                  */
/* ------------------------------------------------------------------------ */
/*
** One convention holds across the whole library (core, backend, world,
** trace, store, replay, train, sweep, cost model, bench):
**
**   - every function that can fail returns an int: SQ_OK (zero) or a
**     negative sq_status that says what KIND of failure it was;
**   - a function that can say more than its kind (which file, tensor, field,
**     value, worker) writes a sentence into an sq_error: the caller's, passed
**     as the last argument (it may be NULL), or the one kept on a handle
**     (sq_world_error, sq_backend_error and sq_store_error give its sentence);
**   - the sentence speaks of the thing at fault, never of a command-line
**     option; sq_error_message() gives it (or sq_strerror() of the kind when
**     nothing more was said).
**
** The pure codec calls of this header fail only in the ways their kind
** names, so they return the kind alone. The shardq command maps kinds to
** exit statuses (SQ_ERR_BUSY: 75, any other: 1).
*/
typedef enum sq_status {
    SQ_OK = 0,
    SQ_ERR_ARG = -1,        /* a NULL pointer, a size that overflows, k = 0 ... */
    SQ_ERR_SPEC = -2,       /* a codec spec or a setting that is out of range */
    SQ_ERR_NONFINITE = -3,  /* the input holds NaN or +-Inf */
    SQ_ERR_RANGE = -4,      /* finite values whose result does not fit fp32 (or
                            ** a scale its 16-bit dtype), or decoded output that
                            ** is not finite */
    SQ_ERR_NOMEM = -5,      /* an allocation failed */
    SQ_ERR_UNSUPPORTED = -6, /* the operation is not available on this backend */
    SQ_ERR_DEVICE = -7,     /* a CUDA call failed (the message names the call) */
    SQ_ERR_IO = -8,         /* the system refused a read, write, open or rename
                            ** (the message names the file and the reason) */
    SQ_ERR_FORMAT = -9,     /* a file's content is malformed, truncated or lies
                            ** about itself (the message names file and field) */
    SQ_ERR_BUSY = -10,      /* another process holds the database, directory
                            ** or run: try again later */
    SQ_ERR_NOTFOUND = -11,  /* a named file, tensor, run or preset does not exist */
    SQ_ERR_CONFLICT = -12,  /* what is stored disagrees with what is asked (a
                            ** trace or run of another identity) */
    SQ_ERR_INTERRUPTED = -13 /* a signal asked the work to stop */
} sq_status;

const char *sq_strerror(int status);

#define SQ_ERROR_MSG 512

/* Where a failure is described: its kind and a sentence. A zeroed sq_error
** (or one passed to sq_error_clear) says SQ_OK. */
typedef struct sq_error {
    int status;
    char msg[SQ_ERROR_MSG];
} sq_error;

/* Records status and the printf-style sentence in e (which may be NULL) and
** returns status, so that a failure reads `return sq_error_set(e, ...)`. */
int sq_error_set(sq_error *e, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Prepends context to e's sentence ("reading FILE: " + sentence), keeping
** its kind, and returns that kind. */
int sq_error_prefix(sq_error *e, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void sq_error_clear(sq_error *e);
/* The sentence, or sq_strerror(e->status) when none was written. */
const char *sq_error_message(const sq_error *e);

/* ------------------------------------------------------------------------ */
/* Scalar dtypes                                                            */
/* ------------------------------------------------------------------------ */

/* fp32 -> bf16 and fp32 -> fp16 round to nearest, ties to even. NaN stays a
** (quiet) NaN with its sign; values beyond the target's range become +-Inf;
** fp16 subnormals are produced exactly. The reverse conversions are exact. */
uint16_t sq_f32_to_bf16(float x);
float    sq_bf16_to_f32(uint16_t h);
uint16_t sq_f32_to_f16(float x);
float    sq_f16_to_f32(uint16_t h);

void sq_f32_to_bf16_n(const float *x, uint16_t *out, size_t n);
void sq_bf16_to_f32_n(const uint16_t *h, float *out, size_t n);
void sq_f32_to_f16_n(const float *x, uint16_t *out, size_t n);
void sq_f16_to_f32_n(const uint16_t *h, float *out, size_t n);

/* Index of the first NaN or +-Inf in x[0..n), or n when all are finite. */
size_t sq_find_nonfinite(const float *x, size_t n);

/* ------------------------------------------------------------------------ */
/* Random numbers: Philox4x32-10                                            */
/* ------------------------------------------------------------------------ */

/* Where in the training step a quantization happens. The site is part of the
** Philox counter, so two quantization points never share random bits. Values
** up to 255 are allowed; these are the ones shardq itself uses. */
enum sq_site {
    SQ_SITE_WEIGHT = 0,     /* weight (or weight-difference) all-gather */
    SQ_SITE_GRAD_INTRA = 1, /* first hop of a two-level reduce-scatter */
    SQ_SITE_GRAD_INTER = 2, /* second hop of a two-level reduce-scatter */
    SQ_SITE_GRAD_SINGLE = 3 /* a single-level gradient collective */
};

/* Everything a random bit depends on besides the element index. */
typedef struct sq_rng_key {
    uint64_t seed;   /* the run's seed: key = { low 32 bits, high 32 bits } */
    uint32_t step;   /* training step (counter word 2) */
    uint32_t worker; /* emulated worker, < 2^24 (counter word 3, bits 8..31) */
    uint32_t site;   /* an sq_site, < 256 (counter word 3, bits 0..7) */
} sq_rng_key;

/* The raw generator: out = Philox4x32-10(ctr, key), as Random123 defines it. */
void sq_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* The uniform in (0, 1) that element i of a buffer uses for stochastic
** rounding: counter = { i/8 low 32 bits, i/8 high 32 bits, step,
** (worker << 8) | site }; of the four output words read as eight 16-bit
** halves, most significant first, element i takes half h number i % 8 (word
** (i % 8) / 2, high half for even i), and u = (h + 1/2) * 2^-16. Rounding up
** iff u < v - floor(v) has an expected code within 2^-17 of a step of v. */
float sq_uniform(const sq_rng_key *key, uint64_t i);

/* u[j] = sq_uniform(key, first + j) for j < n, many blocks at a time (this
** is what stochastic rounding uses, and what bounds its speed). */
void sq_uniform_n(const sq_rng_key *key, uint64_t first, uint64_t n, float *u);

/* The 24-bit uniform in [0, 1) of element i, for synthetic data and
** initialisation (normals need the finer grid), not stochastic rounding:
** counter = { i/4 low 32 bits, i/4 high 32 bits, step, (worker << 8) | site },
** output word i % 4, u = (word >> 8) * 2^-24. */
float sq_uniform24(const sq_rng_key *key, uint64_t i);

/* u[j] = sq_uniform24(key, first + j) for j < n. */
void sq_uniform24_n(const sq_rng_key *key, uint64_t first, uint64_t n, float *u);

/* ------------------------------------------------------------------------ */
/* Codec specs                                                              */
/* ------------------------------------------------------------------------ */

typedef enum sq_kind {
    SQ_KIND_SYM = 0,     /* absmax groups (SDP4Bit, ZeRO++) */
    SQ_KIND_MINMAX = 1,  /* min-max groups */
    SQ_KIND_QSGD = 2,    /* QSGD: s = 2^(b-1) - 1 levels of the group's L2 norm */
    SQ_KIND_SIGN = 3,    /* scaled sign (signSGD, EF-SignSGD): 1 bit, scale = mean |x| */
    SQ_KIND_FP8E4M3 = 4, /* FP8 E4M3 (OCP e4m3fn) codes, one scale per group */
    SQ_KIND_FP8E5M2 = 5, /* FP8 E5M2 codes, one scale per group */
    SQ_KIND_TOPK = 6,    /* the keep largest |x| of each group: indices and values */
    SQ_KIND_RANDK = 7,   /* keep random elements of each group (Philox): indices and values */
    SQ_KIND_BF16 = 8,    /* a bf16 cast: 16-bit codes, no scales */
    SQ_KIND_FP16 = 9,    /* an fp16 cast: 16-bit codes, no scales */
    SQ_KIND_PLUGIN = 10  /* a codec registered at run time (shardq/plugin.h) */
} sq_kind;
typedef enum sq_round { SQ_ROUND_RTN = 0, SQ_ROUND_SR = 1 } sq_round;
/* Level conventions of symmetric quantization:
**   SDP4BIT:   m = (2^(b-1) - 1) / absmax, q in [-(2^(b-1) - 1), 2^(b-1) - 1]
**   DEEPSPEED: m = 2^(b-1) / absmax,       q in [-2^(b-1), 2^(b-1) - 1]     */
typedef enum sq_levels { SQ_LEVELS_SDP4BIT = 0, SQ_LEVELS_DEEPSPEED = 1 } sq_levels;
/* The dtype in which scales (and min-max offsets) travel. */
typedef enum sq_scale_dtype { SQ_SCALE_FP32 = 0, SQ_SCALE_BF16 = 1, SQ_SCALE_FP16 = 2 } sq_scale_dtype;

/* A codec: how one flat buffer is turned into codes and metadata.
**
** The sparse kinds (topk, randk) keep `keep` elements of each group and
** send their indices as codes (8 bits a code for groups of up to 256
** elements, 16 up to 65536, else 32) and their values, in the scale dtype,
** as the scales array; decoding scatters the values into zeros. The casts
** (bf16, fp16) send every value as a 16-bit code and no scales. Fields a
** kind does not use are ignored: the text form (sq_codec_format) prints
** them at the kind's fixed values (topk/randk: bits = the index width,
** round rtn for topk and sr for randk, whose selection is random; casts:
** bits 16, group 1, round rtn, scale fp32), and sq_codec_parse refuses
** any other value for them. docs/conventions.md, gives the rules. */
typedef struct sq_codec {
    sq_kind kind;         /* sym (absmax), minmax (asymmetric), or a compressor (sq_kind) */
    int bits;             /* 1..8; sym with sdp4bit levels needs >= 2; qsgd 2..8,
                          ** sign 1, fp8e4m3 and fp8e5m2 8 */
    uint64_t group;       /* elements per scale, >= 1; the last group may be short */
    sq_round round;       /* rtn (half to even) or sr (stochastic) */
    int hadamard;         /* 0 (off) or the transform size, a power of two 2..1024 */
    sq_levels levels;     /* sym only; minmax specs always carry sdp4bit */
    sq_scale_dtype scale; /* dtype of scales and offsets (topk/randk: of the values) */
    uint64_t keep;        /* topk, randk: elements kept per group, 1..group (else 0) */
    int plugin;           /* kind=plugin: the registry id (shardq/plugin.h), else 0 */
} sq_codec;

#define SQ_GROUP_MAX ((uint64_t)1 << 40)
#define SQ_HADAMARD_MAX 1024

/* The defaults: kind=sym,bits=4,group=128,round=sr,hadamard=0,levels=sdp4bit,scale=fp32
** (keep 0) */
sq_codec sq_codec_default(void);

/* SQ_OK if c is a valid codec, else SQ_ERR_SPEC. */
int sq_codec_validate(const sq_codec *c);

/* The name specs give kind (an sq_kind) -- "sym", "minmax", ... "plugin"
** -- or NULL past the last kind. The one list of the names: the library's
** parser and printer and the Python package read it. */
const char *sq_codec_kind_name(int kind);

/* Parses "key=value,key=value" into *out, starting from the defaults; every
** key is optional (so "" is the default codec; topk and randk need keep=)
** and may appear once; a kind with a single width takes it when bits is
** not given (kind=sign: 1, and round=rtn unless round is given;
** kind=fp8e4m3, fp8e5m2: 8). On
** failure returns SQ_ERR_SPEC (unknown key, value out of range, a repeated
** key, an invalid combination such as kind=minmax,levels=deepspeed) with a
** sentence naming the key or value at fault in err (which may be NULL).
** text == NULL or out == NULL gives SQ_ERR_ARG.
** "kind=plugin:NAME" is the plug-in codec registered as NAME
** (shardq/plugin.h): it takes the key group (its own group, in any order)
** and no other, and an unregistered NAME is SQ_ERR_SPEC. */
int sq_codec_parse_v2(const char *text, sq_codec *out, sq_error *err);

/* Deprecated: sq_codec_parse_v2 with the sentence written into
** err[0..errlen) (when err is not NULL and the parse fails), the error
** convention of releases before the sq_error one. Kept, as a thin wrapper,
** for the callers that still pass a buffer; new code calls
** sq_codec_parse_v2. */
int sq_codec_parse(const char *text, sq_codec *out, char *err, size_t errlen);

/* Writes the canonical form (every key, fixed order) into buf and returns the
** length it needs, like snprintf. 128 bytes always suffice. */
int sq_codec_format(const sq_codec *c, char *buf, size_t len);
#define SQ_CODEC_STRLEN 128

/* Exact sizes for n elements. Codes form one dense stream of n * bits bits
** padded to a byte; metadata is one scale per group (sym, qsgd, sign, fp8)
** or one offset and one scale per group (minmax), each 4 (fp32) or 2 (bf16,
** fp16) bytes.
** topk, randk: kept = floor(n / group) * keep + min(keep, n mod group)
** indices of 1, 2 or 4 bytes as codes and kept values as scales; a cast: 2n
** code bytes, no scales (groups = n). A plug-in codec's sizes are its own
** (shardq/plugin.h). For every kind, the sizes of a prefix of e elements, e a
** multiple of the group and of 8, are the byte offsets of element e's data in
** each array. */
uint64_t sq_codec_groups(const sq_codec *c, uint64_t n);
uint64_t sq_codec_code_bytes(const sq_codec *c, uint64_t n);
uint64_t sq_codec_scale_bytes(const sq_codec *c, uint64_t n);  /* scales alone */
uint64_t sq_codec_offset_bytes(const sq_codec *c, uint64_t n); /* 0 for sym */
uint64_t sq_codec_bytes(const sq_codec *c, uint64_t n);        /* everything */
double   sq_codec_bits_per_element(const sq_codec *c, uint64_t n); /* 0 for n = 0 */

/* ------------------------------------------------------------------------ */
/* Quantized buffers                                                        */
/* ------------------------------------------------------------------------ */

/* One quantized buffer of n elements under a codec. scales and offsets hold
** sq_codec_groups() values of the codec's scale dtype (float or uint16_t bit
** patterns, little-endian in memory on the machines we support). offsets is
** used by minmax only (the group minima) and may be NULL for sym. */
typedef struct sq_qbuf {
    uint8_t *codes;
    void *scales;
    void *offsets;
} sq_qbuf;

/* Allocates the three arrays for n elements (zeroed; sizes from the codec);
** sq_qbuf_free releases them and is safe on a zeroed struct. */
int  sq_qbuf_alloc(const sq_codec *c, uint64_t n, sq_qbuf *q);
void sq_qbuf_free(sq_qbuf *q);

/* ------------------------------------------------------------------------ */
/* Packing                                                                  */
/* ------------------------------------------------------------------------ */

/* Packs n codes of b bits (b = 1..8) into one MSB-first bit stream: element 0
** takes the top b bits of byte 0, the next element the bits below, crossing
** byte boundaries when b does not divide 8; the last byte is padded with zero
** bits. Signed codes are stored as b-bit two's complement; only the low b bits
** of each input byte are used. out holds ceil(n * b / 8) bytes. */
void sq_pack(const uint8_t *codes, uint64_t n, int bits, uint8_t *out);
/* Unpacks to unsigned fields (0 .. 2^b - 1) or sign-extended ones. */
void sq_unpack_unsigned(const uint8_t *in, uint64_t n, int bits, uint8_t *codes);
void sq_unpack_signed(const uint8_t *in, uint64_t n, int bits, int8_t *codes);

/* ------------------------------------------------------------------------ */
/* Hadamard transform                                                       */
/* ------------------------------------------------------------------------ */

/* In place, over the consecutive aligned blocks of h elements of x[0..n)
** (h a power of two, 2..1024; a final partial block is left as it is):
** the unnormalised Sylvester transform, butterfly stages of stride 1, 2, ...,
** h/2, each (a, b) -> (a + b, a - b). The inverse is the same transform
** followed by a multiplication by 1/h. Any other h gives SQ_ERR_ARG. */
int sq_hadamard(float *x, uint64_t n, int h);
int sq_hadamard_inverse(float *x, uint64_t n, int h);

/* ------------------------------------------------------------------------ */
/* Fused codec operations                                                   */
/* ------------------------------------------------------------------------ */
/*
** Each works over a flat buffer of n elements and runs in parallel over
** groups (OpenMP); the bytes never depend on the thread count. key is used by
** stochastic rounding and by randk's selection only and may be NULL for RTN
** codecs, topk and the casts; an SR codec or randk with key NULL, or a key
** with worker >= 2^24 or site > 255, gives SQ_ERR_ARG.
**
** Non-finite values are never quantized and never produced silently:
**   - NaN or +-Inf in x (or ref) gives SQ_ERR_NONFINITE;
**   - finite input whose result leaves fp32 gives SQ_ERR_RANGE: x - ref or the
**     Hadamard transform overflows, a min-max range hi - lo overflows, a scale
**     or offset overflows its 16-bit dtype, or a group near FLT_MAX whose
**     rounded scale would decode its extreme code to +-Inf;
**   - the decoding operations write every value and then give SQ_ERR_RANGE if
**     any is not finite (metadata from a damaged file, a sum past fp32).
** A scale that underflows to 0 in fp16 is not an error: its group decodes to
** zeros. An all-zero group has scale 1 (the scaled sign: its mean
** magnitude, 0) and decodes to zeros; a min-max
** group with max = min has scale 1 and decodes to its offset (exactly, with
** fp32 offsets), as does one whose offset, rounded to a 16-bit dtype, lies
** above its maximum.
**
** Hadamard: when c->hadamard is set, quantize and quantize_diff transform the
** values before quantizing, dequantize, dequantize_add and dequant_sum apply
** the inverse after decoding, and dequant_sum_requant stays in the transformed
** domain (the middle hop of a two-level reduce-scatter: the transform commutes
** with the sum, so it is applied at the first quantization and undone after
** the last reduction only).
*/

/* The dtype of the values an operation reads and writes: fp32, or bf16
** values held in fp32 (the bf16 weight reconstruction below), or, for the
** sums' arithmetic of DeepSpeed's qgZ, fp16. */
typedef enum sq_dtype { SQ_DTYPE_FP32 = 0, SQ_DTYPE_BF16 = 1, SQ_DTYPE_FP16 = 2 } sq_dtype;

/* The quantizing and decoding operations, as one pair whose arguments
** choose the variant (the backend layer, shardq/backend.h, has the same
** pair with a backend: sq_backend_encode and sq_backend_decode):
**
**   sq_encode: q = Q(x) with ref NULL, else Q(x - ref);
**   sq_decode: out = D(q) with ref NULL, else ref + D(q) (out may equal ref);
**
** in dtype SQ_DTYPE_FP32, or SQ_DTYPE_BF16 for the bf16 weight
** reconstruction; any other dtype is SQ_ERR_ARG. The eight named functions
** that follow are these calls under the names of earlier releases, kept
** for their callers (the Python package, the tests, the world): with the
** difference that sq_quantize_diff and sq_dequantize_add refuse a NULL ref
** (SQ_ERR_ARG) where sq_encode and sq_decode read it as "no reference". */
int sq_encode(const sq_codec *c, sq_dtype dtype, const float *x, const float *ref, uint64_t n,
              const sq_rng_key *key, sq_qbuf *q);
int sq_decode(const sq_codec *c, sq_dtype dtype, const sq_qbuf *q, const float *ref, uint64_t n,
              float *out);

/* q = Q(x) */
int sq_quantize(const sq_codec *c, const float *x, uint64_t n,
                const sq_rng_key *key, sq_qbuf *q);

/* out = D(q) */
int sq_dequantize(const sq_codec *c, const sq_qbuf *q, uint64_t n, float *out);

/* q = Q(x - ref), the difference taken in fp32 (SDP4Bit qWD sender). */
int sq_quantize_diff(const sq_codec *c, const float *x, const float *ref, uint64_t n,
                     const sq_rng_key *key, sq_qbuf *q);

/* out = ref + D(q), the sum taken in fp32 (qWD receiver). out may equal ref. */
int sq_dequantize_add(const sq_codec *c, const sq_qbuf *q, const float *ref,
                      uint64_t n, float *out);

/* The bf16 weight reconstruction (scheme knob weight.recon=bf16,
** docs/schemes.md): the model weights w-hat are bf16 numbers (held as
** fp32 values), as in Megatron's distributed optimizer and DeepSpeed.
** Rounding is to nearest, ties to even (sq_f32_to_bf16). A finite input
** that bf16 rounding takes to +-Inf is SQ_ERR_RANGE, as is an output past
** bf16's range; otherwise the contracts above hold. */

/* q = Q(bf16(x)): the bf16 param buffer quantized (qW, ZeRO++ qwZ sender). */
int sq_quantize_bf16(const sq_codec *c, const float *x, uint64_t n,
                     const sq_rng_key *key, sq_qbuf *q);

/* q = Q(bf16(bf16(x) - bf16(ref))): the difference of the bf16 param buffer
** and the bf16 model weights, taken as a bf16 subtraction (SDP4Bit qWD
** sender). */
int sq_quantize_diff_bf16(const sq_codec *c, const float *x, const float *ref, uint64_t n,
                          const sq_rng_key *key, sq_qbuf *q);

/* out = bf16(D(q)): decoded (and inverse transformed) in fp32, then cast to
** the 16-bit model dtype (qW receiver). */
int sq_dequantize_bf16(const sq_codec *c, const sq_qbuf *q, uint64_t n, float *out);

/* out = bf16(bf16(D(q)) + bf16(ref)): the decoded difference cast to bf16
** and added to the bf16 weights in bf16 (qWD receiver). out may equal ref. */
int sq_dequantize_add_bf16(const sq_codec *c, const sq_qbuf *q, const float *ref,
                           uint64_t n, float *out);

/* out = Q_out(D(chunks[0]) + D(chunks[1]) + ... + D(chunks[k-1])): each
** chunk is a quantized buffer of n elements under c_in; the sum runs in fp32
** in chunk order. The Hadamard fields of both codecs are ignored here. */
int sq_dequant_sum_requant(const sq_codec *c_in, const sq_qbuf *chunks, int k,
                           uint64_t n, const sq_codec *c_out,
                           const sq_rng_key *key, sq_qbuf *out);

/* out = D(chunks[0]) + ... + D(chunks[k-1]), in fp32 in chunk order, followed
** by the inverse Hadamard when c->hadamard is set (last hop). */
int sq_dequant_sum(const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n,
                   float *out);

/* The four sums below as one call whose arguments choose the variant:
** the k chunks of c_in decoded and summed in acc -- SQ_DTYPE_FP32, or
** SQ_DTYPE_FP16 for the arithmetic of qgZ -- then, with c_out, requantized
** into qout (sq_dequant_sum_requant, key as for quantize; out unused), or,
** with c_out NULL, written to out (sq_dequant_sum; qout and key unused).
** Any other acc is SQ_ERR_ARG. (sq_backend_reduce is the same on a
** backend.) */
int sq_reduce(const sq_codec *c_in, sq_dtype acc, const sq_qbuf *chunks, int k, uint64_t n,
              const sq_codec *c_out, const sq_rng_key *key, sq_qbuf *qout, float *out);

/* The fp16 arithmetic of DeepSpeed's qgZ: as the two above, but every
** decoded value is rounded to fp16 and the sum runs in fp16 from +0 in
** chunk order (each partial sum rounded to fp16), so out (or the values
** requantized) are fp16 values held in fp32. A sum past fp16's range is an
** infinity: SQ_ERR_RANGE. The Hadamard fields must be 0, and the kinds
** quantizing ones (not topk, randk or a cast), else SQ_ERR_SPEC. */
int sq_dequant_sum_requant_f16(const sq_codec *c_in, const sq_qbuf *chunks, int k,
                               uint64_t n, const sq_codec *c_out,
                               const sq_rng_key *key, sq_qbuf *out);
int sq_dequant_sum_f16(const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n,
                       float *out);

/* ------------------------------------------------------------------------ */
/* Time                                                                     */
/* ------------------------------------------------------------------------ */

/* Seconds on the monotonic clock, the one clock every timing of shardq
** uses: only differences mean anything. (Stored timestamps are wall-clock
** time, not this.) */
double sq_clock_s(void);

/* ------------------------------------------------------------------------ */
/* Threads                                                                  */
/* ------------------------------------------------------------------------ */

/* Threads the fused operations use (OpenMP); n <= 0 restores the default.
** Returns the number in force. Without OpenMP it is always 1, and so is
** sq_get_threads() called inside a parallel region: an operation started
** from a thread of a team (the trainer's lanes) runs on that thread. */
int sq_set_threads(int n);
int sq_get_threads(void);

/* What c makes of n elements, as `shardq codec info` prints it: aligned
** text, or one JSON object (json nonzero), on f (codec_info.c). */
void sq_codec_info_print(FILE *f, const sq_codec *c, uint64_t n, int json);

SQ_END_DECLS
#endif /* SHARDQ_CODEC_H */
