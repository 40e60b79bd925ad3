/*
** info.c -- what `shardq trace info` says of a trace: its steps, workers,
** weights, dtypes and tensors as aligned text or one JSON object, written
** to a stream, and the check that every value of every file reads as
** replay reads it (shardq/trace.h, "info").
*/
#include "shardq/trace.h"
#include "sq_json.h"
#include "trace/input.h"

#include <stdio.h>
#include <stdlib.h>

static const char *kind_name(sq_trace_kind k)
{
    return k == SQ_TRACE_DIR ? "directory" : k == SQ_TRACE_NPY ? "npy" : "safetensors";
}

static void dtype_list(unsigned mask, char *buf, size_t len)
{
    buf[0] = '\0';
    size_t used = 0;
    for (int d = 0; d < SQ_ST_NDTYPES; d++)
        if (mask & (1u << d))
            used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s%s",
                                     used ? "," : "", sq_st_dtype_name((sq_st_dtype)d));
}

/* Reads every value of every file of t, step by step (so memory stays one
** step's mapping and the largest tensor): replay's own loader, so what it
** accepts replay accepts. *files gets the number of files read. */
int sq_trace_check_values(const sq_trace *t, size_t *files, sq_error *err)
{
    uint64_t max = sq_trace_max_param(t);
    float *buf = malloc((max ? max : 1) * sizeof *buf);
    if (!buf) return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", t->path);
    int rc = 0;
    *files = 0;
    for (size_t i = 0; i < t->nsteps && rc == 0; i++) {
        sq_trace_step s;
        if ((rc = sq_trace_step_open(t, i, 1, t->workers, &s, err)) != 0) break;
        int first = s.has_weights ? -1 : 0, last = t->kind == SQ_TRACE_NPY ? 1 : s.ngrads;
        for (int w = first; w < last && rc == 0; w++) {
            for (size_t p = 0; p < t->nparams && rc == 0; p++)
                rc = sq_trace_load(&s, w, p, buf, NULL, err);
            ++*files;
        }
        sq_trace_step_close(&s);
    }
    free(buf);
    return rc;
}

void sq_trace_print_info(FILE *f, const sq_trace *t, int json, long long checked)
{
    char dt[128];
    dtype_list(t->dtypes, dt, sizeof dt);
    int consecutive = 1;
    for (size_t s = 1; s < t->nsteps; s++)
        if (t->steps[s] != t->steps[s - 1] + 1) consecutive = 0;
    if (json) {
        fprintf(f, "{\"path\":");
        sq_json_str(f, t->path);
        fprintf(f, ",\"kind\":\"%s\",\"steps\":[", kind_name(t->kind));
        for (size_t s = 0; s < t->nsteps; s++) fprintf(f, "%s%u", s ? "," : "", (unsigned)t->steps[s]);
        fprintf(f, "],");
        if (checked >= 0) fprintf(f, "\"values_checked\":%lld,", checked);
        fprintf(f, "\"consecutive\":%s,\"workers\":%d,\"weights\":%s,\"weight_steps\":[",
               consecutive ? "true" : "false", t->workers, t->has_weights ? "true" : "false");
        for (size_t s = 0, k = 0; s < t->nsteps; s++)
            if (sq_trace_step_has_weights(t, s)) fprintf(f, "%s%u", k++ ? "," : "", t->steps[s]);
        fprintf(f, "],\"id\":");
        if (t->id[0]) sq_json_str(f, t->id);
        else fprintf(f, "null");
        fprintf(f, ",\"topology\":");
        if (t->topo[0]) sq_json_str(f, t->topo);
        else fprintf(f, "null");
        fprintf(f, ",\"model\":%s,\"dtypes\":\"%s\",\"elements\":%llu,\"bytes\":%llu,"
               "\"ignored\":%zu,\"tensors\":[",
               t->model ? t->model : "null", dt, (unsigned long long)t->elements,
               (unsigned long long)t->bytes, t->nignored);
        for (size_t p = 0; p < t->nparams; p++) {
            fprintf(f, "%s{\"name\":", p ? "," : "");
            sq_json_str(f, t->params[p].name);
            fprintf(f, ",\"shape\":[");
            for (int d = 0; d < t->params[p].ndim; d++)
                fprintf(f, "%s%llu", d ? "," : "", (unsigned long long)t->params[p].shape[d]);
            fprintf(f, "],\"elements\":%llu}", (unsigned long long)t->params[p].n);
        }
        fprintf(f, "]}\n");
    } else {
        fprintf(f, "trace      %s (%s)\n", t->path, kind_name(t->kind));
        fprintf(f, "steps      %zu:", t->nsteps);
        for (size_t s = 0; s < t->nsteps && s < 12; s++) fprintf(f, " %u", (unsigned)t->steps[s]);
        fprintf(f, "%s%s\n", t->nsteps > 12 ? " ..." : "",
               consecutive ? "" : "  (not consecutive)");
        fprintf(f, "workers    %d gradient file%s per step%s%s\n", t->workers,
               t->workers == 1 ? "" : "s", t->topo[0] ? ", captured on " : "", t->topo);
        if (t->nweights == t->nsteps || !t->has_weights) {
            fprintf(f, "weights    %s\n", t->has_weights ? "yes" : "no");
        } else {
            /* a cadence of their own: which steps have them */
            fprintf(f, "weights    at %zu of %zu steps:", t->nweights, t->nsteps);
            for (size_t s = 0, k = 0; s < t->nsteps && k < 12; s++)
                if (sq_trace_step_has_weights(t, s)) fprintf(f, " %u", t->steps[s]), k++;
            fprintf(f, "%s\n", t->nweights > 12 ? " ..." : "");
        }
        if (t->id[0]) fprintf(f, "id         %s\n", t->id);
        if (t->model) fprintf(f, "model      %s\n", t->model);
        fprintf(f, "dtypes     %s\n", dt);
        fprintf(f, "elements   %llu per file\n", (unsigned long long)t->elements);
        fprintf(f, "data       %llu bytes (%.3f GB)\n", (unsigned long long)t->bytes,
               (double)t->bytes / 1e9);
        if (t->nignored) fprintf(f, "ignored    %zu tensor%s that %s not parameters (buffers: docs/traces.md)\n",
                   t->nignored, t->nignored == 1 ? "" : "s", t->nignored == 1 ? "is" : "are");
        if (checked >= 0)
            fprintf(f, "values     all finite and within their dtypes' range (%lld files read)\n",
                    checked);
        fprintf(f, "tensors    %zu:\n", t->nparams);
        for (size_t p = 0; p < t->nparams; p++) {
            char sh[256];
            sq_npy_shape_str(t->params[p].shape, t->params[p].ndim, sh, sizeof sh);
            fprintf(f, "  %-32s %-20s %llu\n", t->params[p].name, sh,
                   (unsigned long long)t->params[p].n);
        }
    }
}
