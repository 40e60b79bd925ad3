/*
** sq_plugin.h -- the plug-in codecs inside the core: the registry
** (plugin.c) and the kind=plugin operations (codec_plugin.c), which fill
** the entry of SQ_KIND_PLUGIN in the table of kinds (sq_kinds.h). Nothing
** below them calls these: spec.c, check.c and codec.c look the operations
** up in the table.
*/
#ifndef SQ_PLUGIN_INTERNAL_H
#define SQ_PLUGIN_INTERNAL_H

#include "shardq/codec.h"
#include "shardq/plugin.h"

#include <stddef.h>
#include <stdint.h>

/* plugin.c: adds a copy of codec to the registry (what
** sq_plugin_register_from does before it fills the table): its id or a
** negative sq_status with a sentence. */
int sq_plugin_add(const sq_plugin_codec *codec, const char *source, sq_error *err);

/* The descriptor of a kind=plugin codec, NULL when its id is not registered. */
const sq_plugin_codec *sq_plugin_of(const sq_codec *c);

/* The operations of the table that need the registry's entries (for
** spec.c): validation; "kind=plugin:NAME" -> c (kind, id, the plug-in's
** group and the fields it ignores at their defaults); the keys given
** besides kind; the canonical text "kind=plugin:NAME,group=G"; the bytes
** of part 0 (codes), 1 (scales) or 2 (offsets) of n elements. */
int sq_plugin_check(const sq_codec *c, sq_error *err);
int sq_plugin_parse_kind(const char *name, sq_codec *c, sq_error *err);
int sq_plugin_settle(sq_codec *c, unsigned seen, sq_error *err);
int sq_plugin_format(const sq_codec *c, char *buf, size_t len);
uint64_t sq_plugin_bytes(const sq_codec *c, uint64_t n, int part);

#endif
