/* shardq/trace.h: the shardq.codec/1 container (one quantized array in a
** safetensors file), as `shardq codec encode` writes it. */
typedef struct sq_container {
    sq_codec codec;
    uint64_t n;
    int ndim;
    uint64_t shape[...];
    sq_rng_key key;
    sq_qbuf q;
} sq_container;
int sq_container_write(const char *path, const sq_container *c, sq_error *err);
int sq_container_read(const char *path, sq_container *out, sq_error *err);
void sq_container_free(sq_container *c);
