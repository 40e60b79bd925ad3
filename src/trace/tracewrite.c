/*
** tracewrite.c -- writing traces (tracedir.h): each file streamed tensor by
** tensor through the safe writer, manifest.json last.
*/
#include "trace/tracedir.h"
#include "trace/tracedir_internal.h"
#include "trace/wfile.h"
#include "shardq.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Writing                                                                  */
/* ------------------------------------------------------------------------ */

struct sq_trace_writer {
    char *dir;
    int workers;
    sq_trace_param *params;
    size_t nparams;
    sq_st_dtype dtype;
    char *topo, *model;
    /* steps finished (every file written) */
    uint32_t *steps;
    size_t nsteps, capsteps;
    int weights_seen;    /* -1 unknown, 0 no step has weights, 1 every step has */
    /* the step being written */
    int cur_open;        /* a step is under way */
    uint32_t cur_step;
    int cur_weights;     /* its weights file was written */
    int cur_next_worker; /* gradient files come in worker order */
    /* the file being written */
    sq_st_writer *file;
    int file_worker;
    size_t next_param;
    void *conv;          /* conversion buffer */
};

#define CONV_CHUNK ((size_t)1 << 20)

/* Creates the directories above path that are missing, like mkdir -p; a
** failure shows when path itself cannot be created. */
static void make_parents(const char *path)
{
    char *p = strdup(path);
    if (!p) return;
    for (char *slash = strchr(p + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        mkdir(p, 0777);
        *slash = '/';
    }
    free(p);
}

int sq_trace_writer_open(sq_trace_writer **out, const char *dir, int workers,
                         const sq_trace_param *p, size_t np, sq_st_dtype dtype,
                         const char *topo, const char *model, char *err, size_t errlen)
{
    *out = NULL;
    if (workers < 1 || workers > SQ_TRACE_MAX_WORKERS) {
        sq_set_err(err, errlen, "%s: workers: %d is not from 1 to %d", dir, workers,
                   SQ_TRACE_MAX_WORKERS);
        return -1;
    }
    if (np == 0) {
        sq_set_err(err, errlen, "%s: no params to write", dir);
        return -1;
    }
    if (topo) {
        int k = 0, g = 0, used = 0;
        if (sscanf(topo, "%dx%d%n", &k, &g, &used) != 2 || topo[used] || k < 1 || g < 1 ||
            (long)k * g != workers || strlen(topo) >= sizeof ((sq_trace *)0)->topo) {
            sq_set_err(err, errlen, "%s: field 'topology': '%s' is not \"KxG\" with K * G = "
                       "workers (%d)", dir, topo, workers);
            return -1;
        }
    }
    if (!sq_st_dtype_is_float(dtype)) {
        sq_set_err(err, errlen, "%s: dtype %s: a trace holds F32, F16, BF16 or F64", dir,
                   sq_st_dtype_name(dtype) ? sq_st_dtype_name(dtype) : "?");
        return -1;
    }
    for (size_t i = 0; i < np; i++) {
        uint64_t n;
        if (!p[i].name || !*p[i].name || p[i].ndim < 0 || p[i].ndim > SQ_ST_MAXDIM ||
            sq_trace_shape_product(p[i].shape, p[i].ndim, &n)) {
            sq_set_err(err, errlen, "%s: param %zu: invalid name or shape", dir, i);
            return -1;
        }
        for (size_t j = 0; j < i; j++)
            if (strcmp(p[i].name, p[j].name) == 0) {
                sq_set_err(err, errlen, "%s: param '%s' given twice", dir, p[i].name);
                return -1;
            }
    }
    make_parents(dir);
    if (mkdir(dir, 0777) != 0) {
        int empty = 0;
        if (errno == EEXIST) {
            /* An existing empty directory is fine. */
            if (rmdir(dir) == 0 && mkdir(dir, 0777) == 0) empty = 1;
        }
        if (!empty) {
            sq_set_err(err, errlen, "%s: cannot create the trace directory: %s", dir,
                       errno == EEXIST || errno == ENOTEMPTY ? "it exists and is not empty"
                                                             : strerror(errno));
            return -1;
        }
    }
    sq_trace_writer *w = calloc(1, sizeof *w);
    if (!w) goto oom;
    w->dir = strdup(dir);
    w->workers = workers;
    w->dtype = dtype;
    w->params = calloc(np, sizeof *w->params);
    w->nparams = np;
    w->topo = topo ? strdup(topo) : NULL;
    w->model = model ? strdup(model) : NULL;
    w->conv = malloc(CONV_CHUNK * sizeof(double));
    w->weights_seen = -1;
    if (!w->dir || !w->params || !w->conv || (topo && !w->topo) || (model && !w->model)) goto oom;
    for (size_t i = 0; i < np; i++) {
        w->params[i] = p[i];
        w->params[i].name = strdup(p[i].name);
        if (!w->params[i].name) goto oom;
        sq_trace_shape_product(p[i].shape, p[i].ndim, &w->params[i].n);
    }
    *out = w;
    return 0;
oom:
    sq_trace_writer_abort(w);
    sq_set_err(err, errlen, "%s: out of memory", dir);
    return -1;
}

void sq_trace_writer_abort(sq_trace_writer *w)
{
    if (!w) return;
    if (w->file) sq_st_writer_abort(w->file);
    if (w->params)
        for (size_t i = 0; i < w->nparams; i++) free(w->params[i].name);
    free(w->params);
    free(w->dir);
    free(w->topo);
    free(w->model);
    free(w->steps);
    free(w->conv);
    free(w);
}

/* The step under way is complete: every gradient file, and the weights
** file if the steps have one. */
static int finish_step(sq_trace_writer *w, char *err, size_t errlen)
{
    if (!w->cur_open) return 0;
    if (w->cur_next_worker != w->workers) {
        sq_set_err(err, errlen, "%s: step %u: grads-w%02d.safetensors was not written", w->dir,
                   (unsigned)w->cur_step, w->cur_next_worker);
        return -1;
    }
    if (w->weights_seen >= 0 && w->weights_seen != w->cur_weights) {
        sq_set_err(err, errlen, "%s: step %u: %s weights.safetensors, unlike the steps before",
                   w->dir, (unsigned)w->cur_step, w->cur_weights ? "has" : "lacks");
        return -1;
    }
    w->weights_seen = w->cur_weights;
    if (w->nsteps == w->capsteps) {
        size_t cap = w->capsteps ? 2 * w->capsteps : 16;
        uint32_t *p = realloc(w->steps, cap * sizeof *p);
        if (!p) {
            sq_set_err(err, errlen, "%s: out of memory", w->dir);
            return -1;
        }
        w->steps = p;
        w->capsteps = cap;
    }
    w->steps[w->nsteps++] = w->cur_step;
    w->cur_open = 0;
    return 0;
}

int sq_trace_file_begin(sq_trace_writer *w, uint32_t step, int worker, char *err, size_t errlen)
{
    if (w->file) {
        sq_set_err(err, errlen, "%s: a file is still being written", w->dir);
        return -1;
    }
    if (worker < -1 || worker >= w->workers) {
        sq_set_err(err, errlen, "%s: worker %d: the trace has %d", w->dir, worker, w->workers);
        return -1;
    }
    if (!w->cur_open || step != w->cur_step) {
        if (w->cur_open && step < w->cur_step) {
            sq_set_err(err, errlen, "%s: step %u after step %u: steps must increase", w->dir,
                       (unsigned)step, (unsigned)w->cur_step);
            return -1;
        }
        if (finish_step(w, err, errlen)) return -1;
        if (w->nsteps && step <= w->steps[w->nsteps - 1]) {
            sq_set_err(err, errlen, "%s: step %u after step %u: steps must increase", w->dir,
                       (unsigned)step, (unsigned)w->steps[w->nsteps - 1]);
            return -1;
        }
        char sdir[64];
        snprintf(sdir, sizeof sdir, "step-%06u", (unsigned)step);
        char *path = sq_trace_join(w->dir, sdir);
        if (!path || (mkdir(path, 0777) != 0 && errno != EEXIST)) {
            sq_set_err(err, errlen, "%s: cannot create: %s", path ? path : w->dir,
                       strerror(errno));
            free(path);
            return -1;
        }
        free(path);
        w->cur_open = 1;
        w->cur_step = step;
        w->cur_weights = 0;
        w->cur_next_worker = 0;
    }
    if (worker < 0 ? (w->cur_weights || w->cur_next_worker > 0) : worker != w->cur_next_worker) {
        sq_set_err(err, errlen, "%s: step %u: files must come as weights, then grads-w00, w01, "
                   "... (got %s%d)", w->dir, (unsigned)step, worker < 0 ? "weights" : "worker ",
                   worker < 0 ? 0 : worker);
        return -1;
    }
    char *fname = sq_trace_step_file(w->dir, step, worker);
    sq_st_tensor *t = calloc(w->nparams, sizeof *t);
    if (!fname || !t) {
        free(fname);
        free(t);
        sq_set_err(err, errlen, "%s: out of memory", w->dir);
        return -1;
    }
    for (size_t i = 0; i < w->nparams; i++) {
        t[i].name = w->params[i].name;
        t[i].dtype = w->dtype;
        t[i].ndim = w->params[i].ndim;
        memcpy(t[i].shape, w->params[i].shape, sizeof t[i].shape);
    }
    char step_text[16];
    snprintf(step_text, sizeof step_text, "%u", (unsigned)step);
    sq_st_kv meta[2] = {{"format", SQ_TRACE_FORMAT}, {"step", step_text}};
    int rc = sq_st_writer_open(&w->file, fname, t, w->nparams, meta, 2, err, errlen);
    free(fname);
    free(t);
    if (rc) {
        w->file = NULL;
        return -1;
    }
    w->file_worker = worker;
    w->next_param = 0;
    return 0;
}

int sq_trace_file_put(sq_trace_writer *w, const float *x, char *err, size_t errlen)
{
    if (!w->file || w->next_param >= w->nparams) {
        sq_set_err(err, errlen, "%s: no tensor is expected now", w->dir);
        return -1;
    }
    uint64_t n = w->params[w->next_param].n;
    size_t isz = sq_st_dtype_size(w->dtype);
    for (uint64_t i = 0; i < n; i += CONV_CHUNK) {
        size_t m = (size_t)(n - i < CONV_CHUNK ? n - i : CONV_CHUNK);
        const void *src = x + i;
        switch (w->dtype) {
        case SQ_ST_F16: sq_f32_to_f16_n(x + i, w->conv, m); src = w->conv; break;
        case SQ_ST_BF16: sq_f32_to_bf16_n(x + i, w->conv, m); src = w->conv; break;
        case SQ_ST_F64:
            for (size_t j = 0; j < m; j++) ((double *)w->conv)[j] = x[i + j];
            src = w->conv;
            break;
        default: break;
        }
        if (sq_st_writer_put(w->file, src, (uint64_t)m * isz, err, errlen)) return -1;
    }
    w->next_param++;
    return 0;
}

int sq_trace_file_end(sq_trace_writer *w, char *err, size_t errlen)
{
    if (!w->file) {
        sq_set_err(err, errlen, "%s: no file is being written", w->dir);
        return -1;
    }
    sq_st_writer *f = w->file;
    w->file = NULL;
    if (w->next_param != w->nparams) {
        sq_st_writer_abort(f);
        sq_set_err(err, errlen, "%s: step %u: %zu of %zu params written", w->dir,
                   (unsigned)w->cur_step, w->next_param, w->nparams);
        return -1;
    }
    if (sq_st_writer_commit(f, err, errlen)) return -1;
    if (w->file_worker < 0)
        w->cur_weights = 1;
    else
        w->cur_next_worker++;
    return 0;
}

int sq_trace_writer_close(sq_trace_writer *w, char *err, size_t errlen)
{
    int rc = -1;
    char *text = NULL, *mpath = NULL;
    cJSON *root = NULL;
    if (w->file) {
        sq_set_err(err, errlen, "%s: a file is still being written", w->dir);
        goto done;
    }
    if (finish_step(w, err, errlen)) goto done;
    if (w->nsteps == 0) {
        sq_set_err(err, errlen, "%s: no step was written", w->dir);
        goto done;
    }
    root = cJSON_CreateObject();
    cJSON *steps = cJSON_CreateArray(), *params = cJSON_CreateArray();
    cJSON_AddStringToObject(root, "format", SQ_TRACE_FORMAT);
    cJSON_AddNumberToObject(root, "version", SQ_TRACE_VERSION);
    cJSON_AddNumberToObject(root, "workers", w->workers);
    cJSON_AddBoolToObject(root, "weights", w->weights_seen == 1);
    cJSON_AddStringToObject(root, "dtype", sq_st_dtype_name(w->dtype));
    if (w->topo) cJSON_AddStringToObject(root, "topology", w->topo);
    if (w->model) {
        cJSON *m = cJSON_Parse(w->model);
        if (!m) m = cJSON_CreateString(w->model);
        cJSON_AddItemToObject(root, "model", m);
    }
    cJSON_AddItemToObject(root, "steps", steps);
    cJSON_AddItemToObject(root, "params", params);
    for (size_t i = 0; i < w->nsteps; i++)
        cJSON_AddItemToArray(steps, cJSON_CreateNumber(w->steps[i]));
    for (size_t i = 0; i < w->nparams; i++) {
        cJSON *p = cJSON_CreateObject(), *shape = cJSON_CreateArray();
        cJSON_AddStringToObject(p, "name", w->params[i].name);
        for (int d = 0; d < w->params[i].ndim; d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)w->params[i].shape[d]));
        cJSON_AddItemToObject(p, "shape", shape);
        cJSON_AddItemToArray(params, p);
    }
    text = cJSON_Print(root);
    mpath = sq_trace_join(w->dir, "manifest.json");
    if (!text || !mpath) {
        sq_set_err(err, errlen, "%s: out of memory", w->dir);
        goto done;
    }
    sq_wfile f;
    if (sq_wfile_open(&f, mpath, err, errlen)) goto done;
    sq_wfile_write(&f, text, strlen(text));
    sq_wfile_write(&f, "\n", 1);
    rc = sq_wfile_commit(&f, err, errlen);
done:
    cJSON_Delete(root);
    free(text);
    free(mpath);
    sq_trace_writer_abort(w);
    return rc;
}
