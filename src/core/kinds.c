/*
** kinds.c -- the codec kinds: their names, and the table of the kinds
** dispatched through operations (sq_kinds.h).
*/
#include "sq_kinds.h"

#include <stdatomic.h>

/* In enum order (shardq/codec.h); a plug-in is written kind=plugin:NAME. */
static const char *const kind_names[] = {"sym",     "minmax",  "qsgd", "sign",
                                         "fp8e4m3", "fp8e5m2", "topk", "randk",
                                         "bf16",    "fp16",    "plugin"};
#define NKINDS ((int)(sizeof kind_names / sizeof kind_names[0]))

static const sq_kind_ops *_Atomic table[NKINDS];

const char *sq_codec_kind_name(int kind)
{
    return kind >= 0 && kind < NKINDS ? kind_names[kind] : NULL;
}

const sq_kind_ops *sq_kind_ops_of(int kind)
{
    if (kind < 0 || kind >= NKINDS) return NULL;
    return atomic_load_explicit(&table[kind], memory_order_acquire);
}

void sq_kind_ops_set(int kind, const sq_kind_ops *ops)
{
    if (kind >= 0 && kind < NKINDS) atomic_store_explicit(&table[kind], ops, memory_order_release);
}
