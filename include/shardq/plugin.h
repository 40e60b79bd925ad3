/*
** shardq/plugin.h -- codecs from outside the library: the interface of a new
** wire codec, registered at run time.
**
** Part of the public API of libshardq (docs/plugins.md). A plug-in
** codec is a descriptor (sq_plugin_codec) of callbacks that turn n fp32
** values into the three byte arrays of an sq_qbuf -- codes, scales, offsets,
** whatever the codec keeps in each -- and back. Registered, it has an id and
** a name, and the spec "kind=plugin:NAME" (sq_codec_parse) makes an sq_codec
** of it that every codec consumer takes: the fused operations of codec.h,
** the world's wires and scheme knobs (grad.inter.kind=plugin:NAME), replay,
** training, sweeps, the store and the `shardq codec` files.
**
** Three ways in:
**   - a program registers a descriptor itself (sq_plugin_register);
**   - a shared object is loaded (sq_plugin_load, `shardq --plugin FILE.so`,
**     SHARDQ_PLUGINS): it exports shardq_plugin_abi and shardq_plugin_init,
**     which registers its codecs through the host table it is handed, so
**     that the file links nothing of libshardq;
**   - Python registers callables (shardq.codec.register).
**
** What the library does around the callbacks (the "generic rule"):
**   - input is checked first: NaN or +-Inf never reaches encode
**     (SQ_ERR_NONFINITE); quantize_diff and the bf16 variants stage x - ref
**     (or the bf16 values) in fp32 and check those (a finite input whose
**     staging overflows: SQ_ERR_RANGE);
**   - decode writes every value; any that is not finite makes the call
**     SQ_ERR_RANGE, as for the built-in kinds;
**   - dequantize_add is decode, then ref + value in fp32; dequant_sum decodes
**     each chunk and sums in fp32 in chunk order; dequant_sum_requant does
**     the same and encodes the sum with the output codec -- unless both
**     codecs are the same plug-in, it says sum_composes and gives combine:
**     then combine gets the packed chunks and writes the packed sum itself
**     (what "composes with summation" changes, and all it changes);
**   - the _f16 sums refuse plug-in kinds (SQ_ERR_SPEC); so does the CUDA
**     backend (SQ_ERR_UNSUPPORTED): plug-ins run on the CPU only;
**   - a stochastic codec gets the uniforms of docs/conventions.md:
**     u[i] = sq_uniform(key, i) for each element i of the buffer, the ones
**     stochastic rounding of the built-in kinds draws; the key is there too
**     for a codec that wants other draws (from sq_uniform / Philox only,
**     index = element index, so that its bytes stay reproducible).
**
** Every callback is called on whole buffers from the calling thread, and
** may be called from several threads at once on different buffers.
*/
#ifndef SHARDQ_PLUGIN_H
#define SHARDQ_PLUGIN_H

#include "shardq/codec.h"

#include <stddef.h>
#include <stdint.h>

SQ_BEGIN_DECLS

/* The version of this interface. A descriptor or a file of another version
** is refused (the message names both). Any change to the structs below
** raises it.
**
** Version 2 reports failures the way the rest of the library does: a
** callback that can fail returns a negative sq_status and writes its
** sentence into an sq_error (shardq/codec.h), where version 1 wrote it into
** a char buffer of a given length. The structs are laid out alike in both
** (only the types of configure, register_codec and shardq_plugin_init
** differ), and this release still loads descriptors and files of version 1
** (SQ_PLUGIN_ABI_V1), calling them the old way. Deprecated: the next
** release refuses version 1. */
#define SQ_PLUGIN_ABI 2
#define SQ_PLUGIN_ABI_V1 1

/* Names: 1 to 31 of [a-z0-9_], starting with a letter. */
#define SQ_PLUGIN_NAME_MAX 31
/* Codecs one process may register. */
#define SQ_PLUGIN_MAX 64

typedef struct sq_plugin_codec sq_plugin_codec;

/* A codec. The registry keeps its own copy (the strings too), so the
** caller's descriptor may be a temporary; ctx is the caller's and must
** live as long as the process. */
struct sq_plugin_codec {
    uint32_t abi;         /* SQ_PLUGIN_ABI (or SQ_PLUGIN_ABI_V1, deprecated) */
    const char *name;     /* kind=plugin:NAME */
    const char *about;    /* one line for listings, or NULL */
    /* Elements per group, 1 to 2^40: the unit a world aligns shards to
    ** (with 8, as for the built-in kinds). Sizes must be additive over
    ** whole units of lcm(group, 8) elements (checked at registration):
    ** sizes(a + b) = sizes(a) + sizes(b) when a is such a multiple,
    ** because a world addresses the regions of one packed buffer by the
    ** sizes of their prefixes (src/world/wire.c). */
    uint64_t group;
    int stochastic;       /* 1: encode draws random numbers and needs a key */
    int sum_composes;     /* 1: combine (below) sums packed chunks itself */
    /* A parameter string handed to configure at registration, or NULL. */
    const char *params;
    void *ctx;            /* handed to every callback */

    /* Optional: called once, on the registry's copy, before it is checked:
    ** parses params and may set group, stochastic, sum_composes and ctx.
    ** Returns 0, or a negative sq_status with a sentence in err
    ** (sq_error_set; the library's sq_error_set need not be linked: write
    ** err->status and err->msg). A descriptor of version 1 sets
    ** configure_v1 instead, which writes its sentence into err[0..errlen). */
    union {
        int (*configure)(sq_plugin_codec *self, const char *params, sq_error *err);
        int (*configure_v1)(sq_plugin_codec *self, const char *params, char *err, size_t errlen);
    };

    /* Exact bytes of the codes (bytes[0]), scales (bytes[1]) and offsets
    ** (bytes[2]) of n elements; 0 for an array the codec does not use. */
    void (*sizes)(void *ctx, uint64_t n, uint64_t bytes[3]);

    /* Encodes x[0..n) (finite values) into the three arrays, zeroed and
    ** of sizes(n) bytes each. key and u are NULL unless stochastic; then
    ** u[i] = sq_uniform(key, i). Returns 0, or a negative sq_status
    ** (anything else reads as SQ_ERR_RANGE). */
    int (*encode)(void *ctx, const float *x, uint64_t n, const sq_rng_key *key, const float *u,
                  uint8_t *codes, void *scales, void *offsets);

    /* Decodes n values into out[0..n). Returns 0 or a negative sq_status. */
    int (*decode)(void *ctx, const uint8_t *codes, const void *scales, const void *offsets,
                  uint64_t n, float *out);

    /* With sum_composes: out = the encoding of the sum of the k chunks
    ** (each n elements of this codec), written from the packed chunks
    ** directly. key and u as for encode. NULL otherwise. */
    int (*combine)(void *ctx, const sq_qbuf *chunks, int k, uint64_t n, const sq_rng_key *key,
                   const float *u, sq_qbuf *out);
};

/* Registers a copy of codec: checks the ABI version, the name (unique),
** the callbacks, calls configure, then checks the group and the sizes'
** additivity. Returns the codec's id (1 or more) or a negative sq_status:
** SQ_ERR_SPEC (a bad descriptor, another ABI version), SQ_ERR_CONFLICT
** (the name is taken), SQ_ERR_NOMEM (the registry is full), each with a
** sentence naming the codec in err. Codecs stay registered until the
** process ends. */
int sq_plugin_register(const sq_plugin_codec *codec, sq_error *err);
/* The same, recording where the codec came from (sq_plugin_source). */
int sq_plugin_register_from(const sq_plugin_codec *codec, const char *source, sq_error *err);

/* The id of the codec named name, or SQ_ERR_NOTFOUND. */
int sq_plugin_find(const char *name);

/* Codecs registered; their ids are 1 to this. */
int sq_plugin_count(void);

/* The registry's copy of codec id, or NULL for no such id. */
const sq_plugin_codec *sq_plugin_get(int id);

/* Where codec id came from: the real path of its shared object, "python"
** for the Python package, what sq_plugin_register_from was given, or NULL
** (sq_plugin_register). */
const char *sq_plugin_source(int id);

/* *out = the codec of plug-in id ("kind=plugin:NAME"). SQ_ERR_NOTFOUND for
** no such id. */
int sq_codec_from_plugin(int id, sq_codec *out);

/* ------------------------------------------------------------------------ */
/* Shared objects                                                           */
/* ------------------------------------------------------------------------ */

/* What a loader hands a plug-in file's shardq_plugin_init: the way to
** register codecs, and the random numbers of the library, so that the file
** needs nothing of libshardq at link time. */
typedef struct sq_plugin_host {
    uint32_t abi;         /* the version the loader speaks to this file: the file's */
    const char *path;     /* the file being loaded, as given */
    /* sq_plugin_register, the codec's source set to path: an id or a
    ** negative sq_status with a sentence in err. A file of version 1 is
    ** handed register_codec_v1, which writes the sentence into
    ** err[0..errlen). */
    union {
        int (*register_codec)(const struct sq_plugin_host *host, const sq_plugin_codec *codec,
                              sq_error *err);
        int (*register_codec_v1)(const struct sq_plugin_host *host, const sq_plugin_codec *codec,
                                 char *err, size_t errlen);
    };
    float (*uniform)(const sq_rng_key *key, uint64_t i);                          /* sq_uniform */
    void (*uniform_n)(const sq_rng_key *key, uint64_t first, uint64_t n, float *u); /* sq_uniform_n */
    void *loader;         /* the loader's own */
} sq_plugin_host;

/* What a plug-in file exports (C linkage, default visibility):
**
**   const uint32_t shardq_plugin_abi = SQ_PLUGIN_ABI;
**   int shardq_plugin_init(const sq_plugin_host *host, sq_error *err)
**   { ... host->register_codec(host, &my_codec, err) ... }
**
** init returns the number of codecs it registered, or a negative sq_status
** with a sentence in err. A file of version 1 (deprecated, loaded by this
** release only) exports shardq_plugin_abi = 1 and
** int shardq_plugin_init(const sq_plugin_host *, char *err, size_t errlen);
** its source still compiles with SQ_PLUGIN_BUILD_V1 defined before this
** header is included. */
extern const uint32_t shardq_plugin_abi;
#ifdef SQ_PLUGIN_BUILD_V1
int shardq_plugin_init(const sq_plugin_host *host, char *err, size_t errlen);
#else
int shardq_plugin_init(const sq_plugin_host *host, sq_error *err);
#endif

/* Loads the shared object at path (dlopen, RTLD_NOW | RTLD_LOCAL) and
** calls its shardq_plugin_init. Returns the number of codecs it registered,
** or a negative sq_status with a sentence naming the file in err:
** SQ_ERR_IO (dlopen failed: dlerror's reason), SQ_ERR_FORMAT (a symbol is
** missing), SQ_ERR_SPEC (another ABI version: both named; a codec it
** registers is refused), or what init returned. A file already loaded
** (the same inode) is not loaded again: 0. The file stays loaded. */
int sq_plugin_load(const char *path, sq_error *err);

/* Loads each file of a colon-separated list (SHARDQ_PLUGINS), empty items
** skipped, stopping at the first failure. Returns the codecs registered. */
int sq_plugin_load_list(const char *list, sq_error *err);

SQ_END_DECLS
#endif /* SHARDQ_PLUGIN_H */
