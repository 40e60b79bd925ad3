/*
** owner.c -- the owner text of a synthetic trace: every option that decides
** its bytes, as the command line that writes it (shardq/synth.h), so that
** the same command run again (after a kill) takes up its unfinished trace.
*/
#include "shardq/synth.h"

#include <stdio.h>

void sq_synth_trace_owner(const sq_synth_trace *st, const char *params, char *buf, size_t len)
{
    /* only a cadence other than every step is named: the owners (and ids)
    ** of the traces written before it existed stay what they were */
    char every_text[48] = "";
    if (st->weights > 1)
        snprintf(every_text, sizeof every_text, " --weights-every %llu",
                 (unsigned long long)st->weights);
    snprintf(buf, len,
             "trace synth --params %s --steps %llu --first %llu "
             "--workers %llu --topology %s --dtype %s --data %s%s%s --lr %.17g --seed %llu",
             params, (unsigned long long)st->steps, (unsigned long long)st->first,
             (unsigned long long)st->workers, st->topo ? st->topo : "-",
             sq_st_dtype_name(st->dtype), sq_synth_kind_name(st->kind),
             st->weights ? "" : " --no-weights", every_text, st->lr,
             (unsigned long long)st->seed);
}
