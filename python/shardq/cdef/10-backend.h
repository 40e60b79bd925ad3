/* shardq/backend.h: backends (the CPU, a CUDA device) and their codec calls. */
typedef struct sq_backend sq_backend;
typedef enum sq_backend_kind { SQ_BACKEND_CPU = 0, SQ_BACKEND_CUDA = 1 } sq_backend_kind;
int sq_backend_open(const char *name, sq_backend **out, sq_error *err);
void sq_backend_close(sq_backend *be);
sq_backend_kind sq_backend_kind_of(const sq_backend *be);
int sq_backend_device(const sq_backend *be);
const char *sq_backend_name(const sq_backend *be);
const char *sq_backend_description(const sq_backend *be);
const char *sq_backend_error(const sq_backend *be);
int sq_backend_alloc(sq_backend *be, size_t bytes, void **p);
void sq_backend_free(sq_backend *be, void *p);
int sq_backend_put(sq_backend *be, void *dst, const void *host_src, size_t bytes);
int sq_backend_get(sq_backend *be, void *host_dst, const void *src, size_t bytes);
int sq_backend_quantize(sq_backend *be, const sq_codec *c, const float *x, uint64_t n,
                        const sq_rng_key *key, sq_qbuf *q);
int sq_backend_dequantize(sq_backend *be, const sq_codec *c, const sq_qbuf *q, uint64_t n,
                          float *out);
int sq_backend_quantize_diff(sq_backend *be, const sq_codec *c, const float *x,
                             const float *ref, uint64_t n, const sq_rng_key *key, sq_qbuf *q);
int sq_backend_dequantize_add(sq_backend *be, const sq_codec *c, const sq_qbuf *q,
                              const float *ref, uint64_t n, float *out);
int sq_backend_quantize_bf16(sq_backend *be, const sq_codec *c, const float *x, uint64_t n,
                             const sq_rng_key *key, sq_qbuf *q);
int sq_backend_quantize_diff_bf16(sq_backend *be, const sq_codec *c, const float *x,
                                  const float *ref, uint64_t n, const sq_rng_key *key, sq_qbuf *q);
int sq_backend_dequantize_bf16(sq_backend *be, const sq_codec *c, const sq_qbuf *q, uint64_t n,
                               float *out);
int sq_backend_dequantize_add_bf16(sq_backend *be, const sq_codec *c, const sq_qbuf *q,
                                   const float *ref, uint64_t n, float *out);
int sq_backend_dequant_sum_requant(sq_backend *be, const sq_codec *c_in, const sq_qbuf *chunks,
                                   int k, uint64_t n, const sq_codec *c_out,
                                   const sq_rng_key *key, sq_qbuf *out);
int sq_backend_dequant_sum(sq_backend *be, const sq_codec *c, const sq_qbuf *chunks, int k,
                           uint64_t n, float *out);
int sq_backend_set_deferred(sq_backend *be, int on);
int sq_backend_sync(sq_backend *be);
