/*
** old.c -- a plug-in file of the deprecated version 1 of the interface
** (SQ_PLUGIN_ABI_V1) for tests/check_plugin.c: its shardq_plugin_init,
** configure and register_codec take a char buffer for the sentence, as
** files built before version 2 do. This release still loads it. It
** registers "oldabi", one byte a value (the value's integer part, clamped),
** after configure reads its params ("group=N"); and with params "bad" its
** configure refuses, which the loader must report.
*/
#define SQ_PLUGIN_BUILD_V1 /* the prototype of version 1 */
#include "shardq/plugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const uint32_t shardq_plugin_abi = SQ_PLUGIN_ABI_V1;

static void old_sizes(void *ctx, uint64_t n, uint64_t b[3])
{
    (void)ctx;
    b[0] = n, b[1] = b[2] = 0;
}

static int old_encode(void *ctx, const float *x, uint64_t n, const sq_rng_key *key,
                      const float *u, uint8_t *codes, void *scales, void *offsets)
{
    (void)ctx, (void)key, (void)u, (void)scales, (void)offsets;
    for (uint64_t i = 0; i < n; i++)
        codes[i] = (uint8_t)(int8_t)(x[i] > 127 ? 127 : x[i] < -127 ? -127 : (int)x[i]);
    return 0;
}

static int old_decode(void *ctx, const uint8_t *codes, const void *scales, const void *offsets,
                      uint64_t n, float *out)
{
    (void)ctx, (void)scales, (void)offsets;
    for (uint64_t i = 0; i < n; i++) out[i] = (float)(int8_t)codes[i];
    return 0;
}

static int old_configure(sq_plugin_codec *self, const char *params, char *err, size_t errlen)
{
    if (params && !strncmp(params, "group=", 6)) {
        self->group = strtoull(params + 6, NULL, 10);
        return 0;
    }
    snprintf(err, errlen, "oldabi: params '%s': expected group=N", params ? params : "");
    return SQ_ERR_SPEC;
}

int shardq_plugin_init(const sq_plugin_host *host, char *err, size_t errlen)
{
    if (host->abi != SQ_PLUGIN_ABI_V1) {
        snprintf(err, errlen, "oldabi: handed interface version %u", (unsigned)host->abi);
        return SQ_ERR_SPEC;
    }
    const char *params = getenv("SHARDQ_OLDABI_PARAMS");
    sq_plugin_codec c = {.abi = SQ_PLUGIN_ABI_V1, .name = "oldabi", .group = 1,
                         .params = params ? params : "group=8", .configure_v1 = old_configure,
                         .sizes = old_sizes, .encode = old_encode, .decode = old_decode};
    int id = host->register_codec_v1(host, &c, err, errlen);
    return id < 0 ? id : 1;
}
