/* shardq/backend.h, what shardq.codec adds: lending the CUDA backend the
** caller's stream (PyTorch's current one), the fp16 sums and the bf16
** conversions. */
int sq_backend_set_stream(sq_backend *be, void *cuda_stream);
int sq_backend_dequant_sum_requant_f16(sq_backend *be, const sq_codec *c_in,
                                       const sq_qbuf *chunks, int k, uint64_t n,
                                       const sq_codec *c_out, const sq_rng_key *key,
                                       sq_qbuf *out);
int sq_backend_dequant_sum_f16(sq_backend *be, const sq_codec *c, const sq_qbuf *chunks, int k,
                               uint64_t n, float *out);
int sq_backend_to_bf16(sq_backend *be, const float *x, uint64_t n, uint16_t *out);
int sq_backend_from_bf16(sq_backend *be, const uint16_t *h, uint64_t n, float *out);
