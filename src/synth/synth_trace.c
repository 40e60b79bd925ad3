/*
** synth_trace.c -- a synthetic trace: Philox gradients and the weights of
** SGD on their mean, written through the trace writer (synth.h).
*/
#include "shardq/synth.h"

#include <stdlib.h>
#include <string.h>

int sq_synth_trace_write(const char *dir, const sq_synth_trace *s, const char *owner,
                         sq_synth_progress progress, void *ctx, sq_error *err)
{
    if (!s || !s->params || !s->nparams || s->workers < 1)
        return sq_error_set(err, SQ_ERR_ARG, "%s: no tensors or no workers to write",
                            dir ? dir : "(null)");
    const sq_trace_param *params = s->params;
    const size_t np = s->nparams;
    const int workers = s->workers;
    /* the weights of the current step and the next, for every tensor */
    uint64_t total = 0, maxn = 1;
    for (size_t p = 0; p < np; p++) {
        total += params[p].n;
        if (params[p].n > maxn) maxn = params[p].n;
    }
    float *w = malloc((size_t)(total ? total : 1) * sizeof *w);
    float *next = malloc((size_t)(total ? total : 1) * sizeof *next);
    float *g = malloc((size_t)maxn * sizeof *g), *tmp = malloc((size_t)maxn * sizeof *tmp);
    float *u = malloc((size_t)maxn * 3 * sizeof *u);
    sq_trace_writer *tw = NULL;
    int rc;
    if (!w || !next || !g || !tmp || !u) {
        rc = sq_error_set(err, SQ_ERR_NOMEM, "out of memory for %llu elements",
                          (unsigned long long)total);
        goto done;
    }
    rc = sq_trace_writer_open_as(&tw, dir, owner, workers, params, np, s->dtype, s->topo,
                                 "{\"synthetic\":true}", err);
    if (rc) goto done;
    for (size_t p = 0, off = 0; p < np; off += params[p].n, p++)
        sq_synth_weights(s->seed ^ ((uint64_t)p << 40), w + off, params[p].n, u);
    size_t files = 0;
    for (uint64_t k = 0; k < s->steps; k++) {
        uint32_t step = (uint32_t)(s->first + k);
        if (s->weights > 0 && k % (uint64_t)s->weights == 0) {
            if ((rc = sq_trace_file_begin(tw, step, -1, err)) != 0) goto done;
            for (size_t p = 0, off = 0; p < np; off += params[p].n, p++)
                if ((rc = sq_trace_file_put(tw, w + off, err)) != 0) goto done;
            if ((rc = sq_trace_file_end(tw, err)) != 0) goto done;
            if (progress) progress(ctx, ++files);
        }
        memcpy(next, w, (size_t)total * sizeof *w);
        for (int r = 0; r < workers; r++) {
            if ((rc = sq_trace_file_begin(tw, step, r, err)) != 0) goto done;
            for (size_t p = 0, off = 0; p < np; off += params[p].n, p++) {
                sq_synth_grad_stream(s->seed, (uint32_t)p, step, r, s->kind, params[p].n, g, tmp,
                                     u);
                if ((rc = sq_trace_file_put(tw, g, err)) != 0) goto done;
                float a = (float)(s->lr / (double)workers);
                for (uint64_t i = 0; i < params[p].n; i++) next[off + i] -= a * g[i];
            }
            if ((rc = sq_trace_file_end(tw, err)) != 0) goto done;
            if (progress) progress(ctx, ++files);
        }
        float *x = w;
        w = next;
        next = x;
    }
    {
        sq_trace_writer *x = tw;
        tw = NULL;
        rc = sq_trace_writer_close(x, err);
    }
done:
    sq_trace_writer_abort(tw);
    free(w), free(next), free(g), free(tmp), free(u);
    return rc;
}
