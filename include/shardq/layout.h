/*
** shardq/layout.h -- how a model's parameters are laid out in the buffers
** that the collectives move: flat buckets, or one buffer per parameter.
**
** Part of the public API of libshardq (docs/library.md); every
** declaration below is exported, everything else in the library is hidden.
*/
#ifndef SHARDQ_LAYOUT_H
#define SHARDQ_LAYOUT_H

#include "shardq/world.h"

#include <stddef.h>
#include <stdint.h>

SQ_BEGIN_DECLS

/*
** layout -- which world each parameter travels in, and where.
**
** A sharded-data-parallel system either packs the parameters into flat
** buffers and shards those (Megatron's distributed optimizer, which
** SDP4Bit extends), or shards every parameter on its own (ZeRO-3, FSDP's
** per-parameter mode, DeepSpeed's ZeRO++). The difference is not
** cosmetic: quantization groups run across parameter boundaries in a flat
** buffer, and padding to whole groups per worker is paid once per bucket
** instead of once per parameter (docs/schemes.md).
**
** SQ_LAYOUT_BUCKET follows Megatron-LM's grad buffer (core 0.4, as SDP4Bit
** ships it): the parameters are taken in REVERSE order (the order in which
** backpropagation produces their gradients), packed back to back, and a
** bucket is closed as soon as it holds at least `bucket` elements and more
** than one parameter; the rest forms the last bucket. bucket = 0 means one
** bucket for the whole model (Megatron without --overlap-grad-reduce). Each
** bucket is one world: its padding (sq_world_padded) sits at its end only.
**
** SQ_LAYOUT_PARAM gives every parameter a world of its own, in parameter
** order.
**
** Parameters of 0 elements are placed nowhere (they have nothing to move).
** The world of unit u draws its random numbers from Philox seed
** seed ^ (key << 40), key = u for buckets and the parameter's own index for
** per-parameter worlds, so that both layouts of a one-parameter model use
** the seed itself.
*/

typedef enum sq_layout_kind { SQ_LAYOUT_BUCKET = 0, SQ_LAYOUT_PARAM = 1 } sq_layout_kind;

/* Megatron-LM's default bucket size with --overlap-grad-reduce (elements),
** which SDP4Bit's training scripts use. */
#define SQ_LAYOUT_BUCKET_DEFAULT 40000000ull

/* One parameter's place: elements [offset, offset + n) of its unit. */
typedef struct sq_layout_slot {
    size_t param;   /* index into the caller's parameter list */
    uint64_t offset;
    uint64_t n;
} sq_layout_slot;

/* One unit (a bucket, or a parameter's own buffer): one world. */
typedef struct sq_layout_unit {
    uint64_t n;        /* elements of the model in it (before padding) */
    size_t first;      /* its slots are slots[first .. first + count) */
    size_t count;
    uint64_t seed_key; /* the world's seed is seed ^ (seed_key << 40) */
} sq_layout_unit;

typedef struct sq_layout {
    sq_layout_kind kind;
    uint64_t bucket;       /* the bucket size it was built with (buckets only) */
    size_t nparams;
    size_t nunits, nslots;
    sq_layout_unit *units;
    sq_layout_slot *slots; /* unit by unit, in buffer order */
    size_t *unit_of;       /* per parameter: its unit, SIZE_MAX for 0 elements */
    size_t *slot_of;       /* per parameter: its slot, SIZE_MAX for 0 elements */
} sq_layout;

/* Lays out nparams parameters of sizes[p] elements. SQ_ERR_ARG for a
** bucket layout whose sum of sizes overflows, SQ_ERR_NOMEM. */
int sq_layout_build(sq_layout_kind kind, uint64_t bucket, const uint64_t *sizes, size_t nparams,
                    sq_layout *out, sq_error *err);
void sq_layout_free(sq_layout *l);

/* The layout a scheme asks for (its `layout` and `layout.bucket` knobs). */
int sq_layout_for_scheme(const sq_scheme *s, const uint64_t *sizes, size_t nparams,
                         sq_layout *out, sq_error *err);

/* The configuration of unit u's world: cfg with its elements and seed. */
sq_world_config sq_layout_world_config(const sq_layout *l, size_t u, const sq_world_config *cfg);

/* Opens unit u's world. A unit of one param is that tensor, of the given
** shape: per-tensor rules (DeepSpeed's qgZ, qwZ) are resolved for it; a
** bucket of several params has no shape, and the world refuses such a
** rule (SQ_ERR_SPEC). */
int sq_layout_open_world(const sq_layout *l, size_t u, const sq_world_config *cfg,
                         const uint64_t *shape, int ndim, sq_world **out, sq_error *err);

/* Unit u as messages name it, given its first param's name: "param 'x'",
** or "bucket of 12 params from 'x'". */
void sq_layout_unit_label(const sq_layout *l, size_t u, const char *first, char *buf, size_t len);

const char *sq_layout_name(sq_layout_kind kind); /* "bucket", "param" */

SQ_END_DECLS
#endif /* SHARDQ_LAYOUT_H */
