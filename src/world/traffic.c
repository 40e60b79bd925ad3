/*
** traffic.c -- what a world's traffic counters add up to (world.h): one
** collective's bytes at one link level over every worker, the bits each
** element or parameter cost on the wire, and the digests of what each
** worker ended with, for `shardq world` and anything else that reports a
** world's iteration.
*/
#include "shardq/world.h"

#include "shardq/trace.h"

#include <math.h>
#include <stdlib.h>

sq_level_traffic sq_world_level_traffic(const sq_world *w, int coll, int link)
{
    sq_level_traffic s = {0, 0, 0, 0, 0, 0, 0};
    for (int r = 0; r < sq_world_workers(w); r++) {
        const sq_link_traffic *t = &sq_world_traffic(w, r)->t[coll][link];
        s.codes += t->sent_codes;
        s.meta += t->sent_meta;
        s.recv += t->recv_codes + t->recv_meta;
        s.elems += t->sent_elems;
        s.params += t->sent_params;
        s.messages += t->messages;
        if (t->sent_codes + t->sent_meta > s.max_sent) s.max_sent = t->sent_codes + t->sent_meta;
    }
    return s;
}

double sq_bits_per(uint64_t bytes, uint64_t n)
{
    return n ? 8.0 * (double)bytes / (double)n : NAN;
}

double sq_level_bits_per_elem(const sq_level_traffic *s)
{
    return s->elems ? sq_bits_per(s->codes + s->meta, s->elems) : 0.0;
}

/* A link that carried padding alone has no cost per parameter to give. */
double sq_level_bits_per_param(const sq_level_traffic *s)
{
    return s->params ? sq_bits_per(s->codes + s->meta, s->params) : s->elems ? NAN : 0.0;
}

double sq_level_padding_overhead(const sq_level_traffic *s)
{
    return s->params ? (double)s->elems / (double)s->params : s->elems ? NAN : 0.0;
}

int sq_world_output_digests(sq_world *w, sq_output_digest *d, sq_error *err)
{
    const uint64_t n = sq_world_elements(w), S = sq_world_shard(w);
    float *x = malloc((n > S ? n : S) * sizeof *x);
    if (!x) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    int rc = SQ_OK;
    for (int r = 0; r < sq_world_workers(w) && !rc; r++) {
        if (!(rc = sq_world_get_grad_shard(w, r, x)))
            d[r].grad = sq_fnv1a64(x, S * sizeof *x, SQ_FNV1A64_BASIS);
        if (!rc && !(rc = sq_world_get_weights(w, r, x)))
            d[r].weight = sq_fnv1a64(x, n * sizeof *x, SQ_FNV1A64_BASIS);
    }
    free(x);
    if (rc) return sq_error_set(err, rc, "%s", sq_world_error(w));
    return SQ_OK;
}
