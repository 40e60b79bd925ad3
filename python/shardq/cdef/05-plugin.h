/* shardq/plugin.h: plug-in codecs -- the registry, shared objects, and the
** callbacks of a codec written in Python (cffi's extern "Python"). */
#define SQ_PLUGIN_ABI 2
#define SQ_PLUGIN_ABI_V1 1
#define SQ_PLUGIN_NAME_MAX 31
#define SQ_PLUGIN_MAX 64
typedef struct sq_plugin_codec sq_plugin_codec;
struct sq_plugin_codec {
    uint32_t abi;
    const char *name;
    const char *about;
    uint64_t group;
    int stochastic;
    int sum_composes;
    const char *params;
    void *ctx;
    union {
        int (*configure)(sq_plugin_codec *self, const char *params, sq_error *err);
        int (*configure_v1)(sq_plugin_codec *self, const char *params, char *err, size_t errlen);
    };
    void (*sizes)(void *ctx, uint64_t n, uint64_t bytes[3]);
    int (*encode)(void *ctx, const float *x, uint64_t n, const sq_rng_key *key, const float *u,
                  uint8_t *codes, void *scales, void *offsets);
    int (*decode)(void *ctx, const uint8_t *codes, const void *scales, const void *offsets,
                  uint64_t n, float *out);
    int (*combine)(void *ctx, const sq_qbuf *chunks, int k, uint64_t n, const sq_rng_key *key,
                   const float *u, sq_qbuf *out);
};
int sq_plugin_register(const sq_plugin_codec *codec, sq_error *err);
int sq_plugin_register_from(const sq_plugin_codec *codec, const char *source, sq_error *err);
int sq_plugin_find(const char *name);
int sq_plugin_count(void);
const sq_plugin_codec *sq_plugin_get(int id);
const char *sq_plugin_source(int id);
int sq_codec_from_plugin(int id, sq_codec *out);
int sq_plugin_load(const char *path, sq_error *err);
int sq_plugin_load_list(const char *list, sq_error *err);

extern "Python" void _sq_py_sizes(void *ctx, uint64_t n, uint64_t bytes[3]);
extern "Python" int _sq_py_encode(void *ctx, const float *x, uint64_t n, const sq_rng_key *key,
                                  const float *u, uint8_t *codes, void *scales, void *offsets);
extern "Python" int _sq_py_decode(void *ctx, const uint8_t *codes, const void *scales,
                                  const void *offsets, uint64_t n, float *out);
