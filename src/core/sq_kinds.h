/*
** sq_kinds.h -- the table of codec kinds that are dispatched through
** operations rather than built into codec.c and spec.c.
**
** The built-in kinds (sym, minmax, the dense compressors, the sparse kinds
** and the casts) are the code of codec.c, spec.c and their helpers. A kind
** whose entry is filled here is not: spec.c, the argument checks and the
** fused operations of codec.c look its operations up and call them, and
** never call the code that implements them. The plug-in registry fills the
** entry of SQ_KIND_PLUGIN when it registers the first codec
** (codec_plugin.c), so the core below the registry knows nothing of it.
*/
#ifndef SQ_KINDS_H
#define SQ_KINDS_H

#include "shardq/codec.h"

#include <stddef.h>
#include <stdint.h>

/* What the core asks of a kind of the table. c->kind is the entry's kind;
** every codec, buffer and key handed to the operations has passed the
** checks below. */
typedef struct sq_kind_ops {
    /* spec.c: validation, SQ_OK or SQ_ERR_SPEC with a sentence */
    int (*check)(const sq_codec *c, sq_error *err);
    /* spec.c: "kind=NAME:SUFFIX" -> c (kind, id and the kind's fields) */
    int (*parse_name)(const char *suffix, sq_codec *c, sq_error *err);
    /* spec.c, after every key was read: refuses the keys the kind does
    ** not take (seen: a bit per key, in the parser's order) */
    int (*settle)(sq_codec *c, unsigned seen, sq_error *err);
    /* spec.c: the canonical text, as snprintf */
    int (*format)(const sq_codec *c, char *buf, size_t len);
    /* spec.c: bytes of part 0 (codes), 1 (scales) or 2 (offsets) */
    uint64_t (*bytes)(const sq_codec *c, uint64_t n, int part);
    /* check.c: whether a stochastic codec needs a key */
    int (*needs_key)(const sq_codec *c);

    /* codec.c: the operations with the generic rule of shardq/plugin.h:
    ** q = Q(x) or Q(x - ref) (diff), the bf16 variants (bf16) ... */
    int (*quantize)(const sq_codec *c, const float *x, const float *ref, int diff, uint64_t n,
                    const sq_rng_key *key, sq_qbuf *q, int bf16);
    int (*dequantize)(const sq_codec *c, const sq_qbuf *q, const float *ref, int add,
                      uint64_t n, float *out, int bf16);
    /* ... and the two halves the sums compose: encode finite values,
    ** decode without checking what was decoded */
    int (*encode)(const sq_codec *c, const float *val, uint64_t n, const sq_rng_key *key,
                  sq_qbuf *q);
    int (*decode)(const sq_codec *c, const sq_qbuf *q, uint64_t n, float *out);
    /* The sum of k chunks of c_in requantized as c_out, in the packed
    ** domain, when the kind can (SQ_ERR_UNSUPPORTED when it cannot: the
    ** sum is then decoded, added in fp32 and encoded). */
    int (*combine)(const sq_codec *c_in, const sq_qbuf *chunks, int k, uint64_t n,
                   const sq_codec *c_out, const sq_rng_key *key, sq_qbuf *out);
} sq_kind_ops;

/* The operations of kind, or NULL for a built-in kind (and for a kind of
** the table whose entry is not filled yet). Lock-free: an entry is
** published whole. */
const sq_kind_ops *sq_kind_ops_of(int kind);

/* Fills (or refills with the same) the entry of kind. */
void sq_kind_ops_set(int kind, const sq_kind_ops *ops);

/* The names of the kinds are kinds.c's list, read through
** sq_codec_kind_name (shardq/codec.h) by spec.c, codec_sparse.c,
** codec_dense.c and the Python package. */

#endif
