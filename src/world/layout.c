/*
** layout.c -- parameters into buckets, or each into its own world
** (layout.h).
*/
#include "shardq/layout.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *sq_layout_name(sq_layout_kind kind)
{
    return kind == SQ_LAYOUT_PARAM ? "param" : "bucket";
}

void sq_layout_free(sq_layout *l)
{
    if (!l) return;
    free(l->units), free(l->slots), free(l->unit_of), free(l->slot_of);
    memset(l, 0, sizeof *l);
}

static void close_unit(sq_layout *l, size_t first, uint64_t n, uint64_t key)
{
    sq_layout_unit *u = &l->units[l->nunits++];
    u->first = first;
    u->count = l->nslots - first;
    u->n = n;
    u->seed_key = key;
}

static void place(sq_layout *l, size_t p, uint64_t offset, uint64_t n)
{
    l->unit_of[p] = l->nunits;
    l->slot_of[p] = l->nslots;
    l->slots[l->nslots++] = (sq_layout_slot){.param = p, .offset = offset, .n = n};
}

int sq_layout_build(sq_layout_kind kind, uint64_t bucket, const uint64_t *sizes, size_t nparams,
                    sq_layout *out, sq_error *err)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->bucket = kind == SQ_LAYOUT_BUCKET ? bucket : 0;
    out->nparams = nparams;
    size_t cap = nparams ? nparams : 1;
    out->units = calloc(cap, sizeof *out->units);
    out->slots = calloc(cap, sizeof *out->slots);
    out->unit_of = malloc(cap * sizeof *out->unit_of);
    out->slot_of = malloc(cap * sizeof *out->slot_of);
    if (!out->units || !out->slots || !out->unit_of || !out->slot_of) {
        sq_layout_free(out);
        return sq_error_set(err, SQ_ERR_NOMEM, "out of memory for the layout of %zu parameters",
                            nparams);
    }
    for (size_t p = 0; p < nparams; p++) out->unit_of[p] = out->slot_of[p] = SIZE_MAX;
    if (kind == SQ_LAYOUT_PARAM) {
        for (size_t p = 0; p < nparams; p++) {
            if (!sizes[p]) continue;
            size_t first = out->nslots;
            place(out, p, 0, sizes[p]);
            close_unit(out, first, sizes[p], (uint64_t)p);
        }
        return SQ_OK;
    }
    /* Megatron's GradBuffer: reverse order, a bucket closes once it holds
    ** `bucket` elements and more than one parameter (a bucket of the output
    ** head alone once broke its all-gather wait, hence the second rule) */
    size_t first = 0;
    uint64_t n = 0;
    for (size_t i = nparams; i-- > 0;) {
        if (!sizes[i]) continue;
        if (n + sizes[i] < n)
            return sq_layout_free(out),
                   sq_error_set(err, SQ_ERR_ARG, "the parameters' sizes overflow 64 bits");
        place(out, i, n, sizes[i]);
        n += sizes[i];
        if (bucket && n >= bucket && out->nslots - first > 1) {
            close_unit(out, first, n, (uint64_t)out->nunits);
            first = out->nslots;
            n = 0;
        }
    }
    if (out->nslots > first) close_unit(out, first, n, (uint64_t)out->nunits);
    return SQ_OK;
}

int sq_layout_for_scheme(const sq_scheme *s, const uint64_t *sizes, size_t nparams,
                         sq_layout *out, sq_error *err)
{
    return sq_layout_build(s->layout == SQ_LAYOUT_PARAM ? SQ_LAYOUT_PARAM : SQ_LAYOUT_BUCKET,
                           s->bucket, sizes, nparams, out, err);
}

sq_world_config sq_layout_world_config(const sq_layout *l, size_t u, const sq_world_config *cfg)
{
    sq_world_config c = *cfg;
    c.elements = l->units[u].n;
    c.seed = cfg->seed ^ (l->units[u].seed_key << 40);
    return c;
}

int sq_layout_open_world(const sq_layout *l, size_t u, const sq_world_config *cfg,
                         const uint64_t *shape, int ndim, sq_world **out, sq_error *err)
{
    sq_world_config c = sq_layout_world_config(l, u, cfg);
    int rc = l->units[u].count == 1
                 ? sq_scheme_for_tensor(&cfg->scheme, &cfg->topo, shape, ndim, &c.scheme, err)
                 : SQ_OK;
    return rc ? rc : sq_world_open(&c, out, err);
}

void sq_layout_unit_label(const sq_layout *l, size_t u, const char *first, char *buf, size_t len)
{
    if (l->units[u].count == 1)
        snprintf(buf, len, "param '%s'", first);
    else
        snprintf(buf, len, "bucket of %zu params from '%s'", l->units[u].count, first);
}
