/*
** sq_plugin.h -- the plug-in codecs inside the core: the registry's
** internals (plugin.c) and the codec operations of kind=plugin
** (codec_plugin.c), which codec.c, spec.c, qbuf.c and sq_check.h hand
** over to with one line each.
*/
#ifndef SQ_PLUGIN_INTERNAL_H
#define SQ_PLUGIN_INTERNAL_H

#include "shardq/codec.h"
#include "shardq/plugin.h"

#include <stddef.h>
#include <stdint.h>

/* The descriptor of a kind=plugin codec, NULL when its id is not registered. */
const sq_plugin_codec *sq_plugin_of(const sq_codec *c);

/* spec.c: the checks of validate and parse for kind=plugin (c->kind is
** SQ_KIND_PLUGIN), with a sentence; SQ_OK or SQ_ERR_SPEC. */
int sq_plugin_check(const sq_codec *c, char *err, size_t errlen);
/* spec.c: "kind=plugin:NAME" -> c (kind, id, the plug-in's group and the
** fields it ignores at their defaults); SQ_ERR_SPEC naming NAME. */
int sq_plugin_parse_kind(const char *name, sq_codec *c, char *err, size_t errlen);
/* spec.c: the canonical text "kind=plugin:NAME,group=G". */
int sq_plugin_format(const sq_codec *c, char *buf, size_t len);
/* spec.c: bytes of part 0 (codes), 1 (scales) or 2 (offsets) of n elements. */
uint64_t sq_plugin_bytes(const sq_codec *c, uint64_t n, int part);

/* sq_check.h: a quantized buffer that holds every part the codec uses. */
int sq_plugin_check_qbuf(const sq_codec *c, const sq_qbuf *q, uint64_t n);
/* sq_check.h: a stochastic plug-in needs a key. */
int sq_plugin_needs_key(const sq_codec *c);

/* codec.c: the operations, after the arguments were checked. diff: x - ref;
** bf16: the bf16 weight reconstruction (codec.h). */
int sq_plugin_quantize(const sq_codec *c, const float *x, const float *ref, int diff, uint64_t n,
                       const sq_rng_key *key, sq_qbuf *q, int bf16);
int sq_plugin_dequantize(const sq_codec *c, const sq_qbuf *q, const float *ref, int add,
                         uint64_t n, float *out, int bf16);
/* Either codec (or both) a plug-in; f16 is refused. */
int sq_plugin_sum_requant(const sq_codec *c_in, const sq_qbuf *chunks, int k, uint64_t n,
                          const sq_codec *c_out, const sq_rng_key *key, sq_qbuf *out, int f16);
int sq_plugin_sum(const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n, float *out,
                  int f16);

#endif
