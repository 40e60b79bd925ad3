/*
** bad.c -- two broken plug-in files for tests/check_plugin.c, built from
** this one source: with BAD_ABI it claims interface version 999; with
** NO_INIT it has the version but no shardq_plugin_init. Neither may
** register anything.
*/
#include "shardq/plugin.h"

#ifdef BAD_ABI
const uint32_t shardq_plugin_abi = 999;
#else
const uint32_t shardq_plugin_abi = SQ_PLUGIN_ABI;
#endif

#ifndef NO_INIT
int shardq_plugin_init(const sq_plugin_host *host, sq_error *err)
{
    (void)host, (void)err;
    return SQ_ERR_SPEC; /* never called: the version is checked first */
}
#endif
