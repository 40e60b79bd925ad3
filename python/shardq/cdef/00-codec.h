/* shardq/codec.h: errors, dtypes, Philox, codec specs, quantized buffers
** and the fused codec operations. */
typedef enum sq_status {
    SQ_OK = 0, SQ_ERR_ARG = -1, SQ_ERR_SPEC = -2, SQ_ERR_NONFINITE = -3,
    SQ_ERR_RANGE = -4, SQ_ERR_NOMEM = -5, SQ_ERR_UNSUPPORTED = -6,
    SQ_ERR_DEVICE = -7, SQ_ERR_IO = -8, SQ_ERR_FORMAT = -9, SQ_ERR_BUSY = -10,
    SQ_ERR_NOTFOUND = -11, SQ_ERR_CONFLICT = -12, SQ_ERR_INTERRUPTED = -13
} sq_status;
const char *sq_strerror(int status);
#define SQ_ERROR_MSG 512
typedef struct sq_error { int status; char msg[512]; } sq_error;
void sq_error_clear(sq_error *e);
const char *sq_error_message(const sq_error *e);

uint16_t sq_f32_to_bf16(float x);
float    sq_bf16_to_f32(uint16_t h);
uint16_t sq_f32_to_f16(float x);
float    sq_f16_to_f32(uint16_t h);
void sq_f32_to_bf16_n(const float *x, uint16_t *out, size_t n);
void sq_bf16_to_f32_n(const uint16_t *h, float *out, size_t n);
void sq_f32_to_f16_n(const float *x, uint16_t *out, size_t n);
void sq_f16_to_f32_n(const uint16_t *h, float *out, size_t n);
size_t sq_find_nonfinite(const float *x, size_t n);

enum sq_site { SQ_SITE_WEIGHT = 0, SQ_SITE_GRAD_INTRA = 1, SQ_SITE_GRAD_INTER = 2,
               SQ_SITE_GRAD_SINGLE = 3 };
typedef struct sq_rng_key { uint64_t seed; uint32_t step; uint32_t worker; uint32_t site; } sq_rng_key;
void sq_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
float sq_uniform(const sq_rng_key *key, uint64_t i);
void sq_uniform_n(const sq_rng_key *key, uint64_t first, uint64_t n, float *u);

typedef enum sq_kind {
    SQ_KIND_SYM = 0, SQ_KIND_MINMAX = 1, SQ_KIND_QSGD = 2, SQ_KIND_SIGN = 3,
    SQ_KIND_FP8E4M3 = 4, SQ_KIND_FP8E5M2 = 5, SQ_KIND_TOPK = 6, SQ_KIND_RANDK = 7,
    SQ_KIND_BF16 = 8, SQ_KIND_FP16 = 9, SQ_KIND_PLUGIN = 10
} sq_kind;
typedef enum sq_round { SQ_ROUND_RTN = 0, SQ_ROUND_SR = 1 } sq_round;
typedef enum sq_levels { SQ_LEVELS_SDP4BIT = 0, SQ_LEVELS_DEEPSPEED = 1 } sq_levels;
typedef enum sq_scale_dtype { SQ_SCALE_FP32 = 0, SQ_SCALE_BF16 = 1, SQ_SCALE_FP16 = 2 } sq_scale_dtype;
typedef struct sq_codec {
    sq_kind kind; int bits; uint64_t group; sq_round round; int hadamard;
    sq_levels levels; sq_scale_dtype scale; uint64_t keep;
    int plugin;
} sq_codec;
sq_codec sq_codec_default(void);
int sq_codec_validate(const sq_codec *c);
const char *sq_codec_kind_name(int kind);
const char *sq_version(void);
int sq_codec_parse_v2(const char *text, sq_codec *out, sq_error *err);
int sq_codec_parse(const char *text, sq_codec *out, char *err, size_t errlen);
int sq_codec_format(const sq_codec *c, char *buf, size_t len);
#define SQ_CODEC_STRLEN 128
uint64_t sq_codec_groups(const sq_codec *c, uint64_t n);
uint64_t sq_codec_code_bytes(const sq_codec *c, uint64_t n);
uint64_t sq_codec_scale_bytes(const sq_codec *c, uint64_t n);
uint64_t sq_codec_offset_bytes(const sq_codec *c, uint64_t n);
uint64_t sq_codec_bytes(const sq_codec *c, uint64_t n);
double   sq_codec_bits_per_element(const sq_codec *c, uint64_t n);

typedef struct sq_qbuf { uint8_t *codes; void *scales; void *offsets; } sq_qbuf;
void sq_pack(const uint8_t *codes, uint64_t n, int bits, uint8_t *out);
void sq_unpack_unsigned(const uint8_t *in, uint64_t n, int bits, uint8_t *codes);
void sq_unpack_signed(const uint8_t *in, uint64_t n, int bits, int8_t *codes);
int sq_hadamard(float *x, uint64_t n, int h);
int sq_hadamard_inverse(float *x, uint64_t n, int h);

int sq_quantize(const sq_codec *c, const float *x, uint64_t n, const sq_rng_key *key, sq_qbuf *q);
int sq_dequantize(const sq_codec *c, const sq_qbuf *q, uint64_t n, float *out);
int sq_quantize_diff(const sq_codec *c, const float *x, const float *ref, uint64_t n,
                     const sq_rng_key *key, sq_qbuf *q);
int sq_dequantize_add(const sq_codec *c, const sq_qbuf *q, const float *ref, uint64_t n, float *out);
int sq_quantize_bf16(const sq_codec *c, const float *x, uint64_t n, const sq_rng_key *key, sq_qbuf *q);
int sq_quantize_diff_bf16(const sq_codec *c, const float *x, const float *ref, uint64_t n,
                          const sq_rng_key *key, sq_qbuf *q);
int sq_dequantize_bf16(const sq_codec *c, const sq_qbuf *q, uint64_t n, float *out);
int sq_dequantize_add_bf16(const sq_codec *c, const sq_qbuf *q, const float *ref, uint64_t n, float *out);
int sq_dequant_sum_requant(const sq_codec *c_in, const sq_qbuf *chunks, int k, uint64_t n,
                           const sq_codec *c_out, const sq_rng_key *key, sq_qbuf *out);
int sq_dequant_sum(const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n, float *out);
int sq_dequant_sum_requant_f16(const sq_codec *c_in, const sq_qbuf *chunks, int k, uint64_t n,
                               const sq_codec *c_out, const sq_rng_key *key, sq_qbuf *out);
int sq_dequant_sum_f16(const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n, float *out);
double sq_clock_s(void);
int sq_set_threads(int n);
int sq_get_threads(void);
