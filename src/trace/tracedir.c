/*
** tracedir.c -- reading traces, and the names both directions share
** (tracedir.h; tracewrite.c writes them).
*/
#include "shardq/trace.h"
#include "trace/tracedir_internal.h"
#include "trace/input.h"
#include "trace/wfile.h"
#include "shardq/codec.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Names                                                                    */
/* ------------------------------------------------------------------------ */

/* dir/step-NNNNNN/FILE into a malloc'd string; worker < 0 is the weights. */
char *sq_trace_step_file(const char *dir, uint32_t step, int worker)
{
    char name[64];
    if (worker < 0)
        snprintf(name, sizeof name, "step-%06u/weights.safetensors", (unsigned)step);
    else
        snprintf(name, sizeof name, "step-%06u/grads-w%02d.safetensors", (unsigned)step, worker);
    size_t len = strlen(dir) + strlen(name) + 2;
    char *p = malloc(len);
    if (p) snprintf(p, len, "%s/%s", dir, name);
    return p;
}

char *sq_trace_join(const char *dir, const char *name)
{
    size_t len = strlen(dir) + strlen(name) + 2;
    char *p = malloc(len);
    if (p) snprintf(p, len, "%s/%s", dir, name);
    return p;
}

static int shape_equal(const uint64_t *a, int na, const uint64_t *b, int nb)
{
    if (na != nb) return 0;
    for (int d = 0; d < na; d++)
        if (a[d] != b[d]) return 0;
    return 1;
}

/* product of shape, or SQ_ERR_RANGE on overflow */
int sq_trace_shape_product(const uint64_t *shape, int ndim, uint64_t *n)
{
    uint64_t p = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0) {
            *n = 0;
            return 0;
        }
    }
    for (int d = 0; d < ndim; d++) {
        if (p > UINT64_MAX / shape[d]) return SQ_ERR_RANGE;
        p *= shape[d];
    }
    *n = p;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Opening                                                                  */
/* ------------------------------------------------------------------------ */

void sq_trace_close(sq_trace *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->nparams; i++) free(t->params[i].name);
    free(t->params);
    free(t->byname);
    free(t->steps);
    free(t->weighted);
    free(t->model);
    free(t->path);
    memset(t, 0, sizeof *t);
}

int sq_trace_param_index(const sq_trace *t, const char *name)
{
    if (!t->byname) { /* not opened by sq_trace_open */
        for (size_t i = 0; i < t->nparams; i++)
            if (strcmp(t->params[i].name, name) == 0) return (int)i;
        return SQ_TRACE_NO_PARAM;
    }
    size_t lo = 0, hi = t->nparams;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(t->byname[mid]->name, name);
        if (c == 0) return (int)(t->byname[mid] - t->params);
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return SQ_TRACE_NO_PARAM;
}

static int cmp_param_names(const void *a, const void *b)
{
    const sq_trace_param *const *x = a, *const *y = b;
    int c = strcmp((*x)->name, (*y)->name);
    return c ? c : *x < *y ? -1 : *x > *y; /* equal names in list order */
}

/* Sorts the params into t->byname. A name listed twice: the one whose
** second listing comes first into *dup, and 1. Sorting keeps this n log n
** for the 100k params of a large model, where comparing every pair took
** over a minute. SQ_ERR_NOMEM when out of memory. */
static int index_params(sq_trace *t, const char **dup)
{
    *dup = NULL;
    t->byname = malloc((t->nparams ? t->nparams : 1) * sizeof *t->byname);
    if (!t->byname) return SQ_ERR_NOMEM;
    for (size_t i = 0; i < t->nparams; i++) t->byname[i] = &t->params[i];
    qsort(t->byname, t->nparams, sizeof *t->byname, cmp_param_names);
    const sq_trace_param *second = NULL;
    for (size_t i = 1; i < t->nparams; i++)
        if (strcmp(t->byname[i]->name, t->byname[i - 1]->name) == 0 &&
            (!second || t->byname[i] < second))
            second = t->byname[i];
    if (second) *dup = second->name;
    return second != NULL;
}

uint64_t sq_trace_max_param(const sq_trace *t)
{
    uint64_t m = 0;
    for (size_t i = 0; i < t->nparams; i++)
        if (t->params[i].n > m) m = t->params[i].n;
    return m;
}

/* A JSON number that is an integer in [0, max]. */
static int json_uint(const cJSON *v, uint64_t max, uint64_t *out)
{
    if (!cJSON_IsNumber(v)) return SQ_ERR_FORMAT;
    double d = v->valuedouble;
    if (!(d >= 0.0 && d <= 9007199254740992.0) || d != floor(d) || (uint64_t)d > max)
        return SQ_ERR_FORMAT;
    *out = (uint64_t)d;
    return 0;
}

/* Reads a text file of at most `limit` bytes into *text (malloc'd). */
static int read_small_file(const char *path, size_t limit, char **text, sq_error *err)
{
    *text = NULL;
    sq_input in;
    int rc = sq_input_open(path, 0, &in, err);
    if (rc) return rc;
    FILE *f = fdopen(in.fd, "rb");
    if (!f) {
        rc = sq_error_set(err, SQ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        close(in.fd);
        return rc;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - len - 1, f);
        if (len < cap - 1) break;
        if (cap > limit) {
            free(buf);
            fclose(f);
            return sq_error_set(err, SQ_ERR_FORMAT, "%s: larger than %zu bytes: not a manifest",
                                path, limit);
        }
        char *p = realloc(buf, cap * 2);
        if (!p) free(buf);
        buf = p;
        cap *= 2;
    }
    if (!buf) {
        fclose(f);
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
    }
    if (ferror(f)) {
        rc = sq_error_set(err, SQ_ERR_IO, "%s: read error: %s", path, strerror(errno));
        free(buf);
        fclose(f);
        return rc;
    }
    fclose(f);
    buf[len] = '\0';
    if (strlen(buf) != len) {
        rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: NUL byte at byte %zu: not JSON", path,
                          strlen(buf));
        free(buf);
        return rc;
    }
    *text = buf;
    return SQ_OK;
}

/* The keys a manifest and its params entries may have: a misspelt one
** ("weight": false) would otherwise be ignored without a word. */
static const char *const top_keys[] = {"format", "version", "workers", "steps", "params",
                                       "weights", "topology", "dtype", "model", "id", "owner",
                                       NULL};
static const char *const param_keys[] = {"name", "shape", NULL};

/* The first key of object o that is not in known[], or NULL. */
static const char *unknown_key(const cJSON *o, const char *const *known)
{
    for (const cJSON *c = o->child; c; c = c->next) {
        size_t k = 0;
        while (known[k] && strcmp(known[k], c->string) != 0) k++;
        if (!known[k]) return c->string;
    }
    return NULL;
}

/* The manifest's "weights" (v, NULL when absent: true), after its steps:
** true (every step has weights.safetensors), false (none), or the list of
** the steps that have it, strictly increasing, each one of "steps" (a
** weight cadence of its own: docs/traces.md). Fills t->has_weights,
** t->weighted and t->nweights. */
static int parse_weights(const char *mpath, const cJSON *v, sq_trace *t, sq_error *err)
{
    int all = !v || cJSON_IsTrue(v);
    if (v && !cJSON_IsBool(v) && !cJSON_IsArray(v)) {
        return sq_error_set(err, SQ_ERR_FORMAT,
                            "%s: field 'weights': expected true, false or a list of steps",
                            mpath);
    }
    if (cJSON_IsFalse(v) || (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 0)) return 0;
    t->weighted = calloc(t->nsteps, 1);
    if (!t->weighted) return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", mpath);
    t->has_weights = 1;
    if (all) {
        memset(t->weighted, 1, t->nsteps);
        t->nweights = t->nsteps;
        return 0;
    }
    /* both lists increase: one pass matches them */
    size_t i = 0, k = 0;
    uint64_t u, prev = 0;
    for (const cJSON *s = v->child; s; s = s->next, k++) {
        if (json_uint(s, UINT32_MAX, &u)) {
            return sq_error_set(err, SQ_ERR_FORMAT,
                                "%s: field 'weights': entry %zu is not an integer from 0 to %u",
                                mpath, k, UINT32_MAX);
        }
        if (k && u <= prev) {
            return sq_error_set(err, SQ_ERR_FORMAT,
                                "%s: field 'weights': entry %zu (%llu) does not increase", mpath,
                                k, (unsigned long long)u);
        }
        prev = u;
        while (i < t->nsteps && t->steps[i] < u) i++;
        if (i == t->nsteps || t->steps[i] != u) {
            return sq_error_set(err, SQ_ERR_FORMAT,
                                "%s: field 'weights': entry %zu: step %llu is not in 'steps' "
                                "(every step has its gradients; weights come at some of them)",
                                mpath, k, (unsigned long long)u);
        }
        t->weighted[i] = 1;
        t->nweights++;
    }
    return 0;
}

int sq_trace_step_has_weights(const sq_trace *t, size_t index)
{
    return t->weighted && index < t->nsteps && t->weighted[index];
}

/* Parses manifest.json of dir into t (the params, steps, workers). */
static int parse_manifest(const char *dir, sq_trace *t, sq_error *err)
{
    char *mpath = sq_trace_join(dir, "manifest.json");
    if (!mpath) {
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", dir);
    }
    struct stat st;
    int rc;
    if (stat(mpath, &st) != 0) {
        free(mpath);
        return sq_error_set(err, SQ_ERR_NOTFOUND,
                            "%s: no manifest.json: not a trace directory "
                            "(or its writer did not finish)",
                            dir);
    }
    char *text;
    if ((rc = read_small_file(mpath, (size_t)256 << 20, &text, err)) != 0) {
        free(mpath);
        return rc;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: invalid JSON near byte %zu", mpath,
                          end && end >= text ? (size_t)(end - text) : (size_t)0);
        goto done;
    }
    if (!cJSON_IsObject(root)) {
        rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: not a JSON object", mpath);
        goto done;
    }
    /* cJSON keeps both of a key given twice and finds the first: `steps`
    ** twice would silently drop steps */
    const char *dup;
    char where[256];
    int d = sq_json_dup_key(root, &dup, where, sizeof where);
    if (d) {
        if (d < 0)
            rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", mpath);
        else
            rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: key '%s' given twice in %s", mpath, dup,
                              where);
        goto done;
    }
    const char *unknown = unknown_key(root, top_keys);
    if (unknown) {
        rc = sq_error_set(
            err, SQ_ERR_FORMAT, "%s: field '%s': unknown (a manifest has %s)", mpath, unknown,
            "format, version, workers, steps, params, weights, topology, dtype, model, id, "
            "owner");
        goto done;
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(v) || strcmp(v->valuestring, SQ_TRACE_FORMAT) != 0) {
        rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: field 'format': expected \"%s\"", mpath,
                          SQ_TRACE_FORMAT);
        goto done;
    }
    uint64_t u;
    v = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (json_uint(v, UINT32_MAX, &u)) {
        rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: field 'version': missing or not an integer",
                          mpath);
        goto done;
    }
    if (u != SQ_TRACE_VERSION) {
        rc = sq_error_set(err, SQ_ERR_FORMAT,
                          "%s: field 'version': %llu is not a version this shardq reads (%d)",
                          mpath, (unsigned long long)u, SQ_TRACE_VERSION);
        goto done;
    }
    v = cJSON_GetObjectItemCaseSensitive(root, "workers");
    if (json_uint(v, SQ_TRACE_MAX_WORKERS, &u) || u == 0) {
        rc = sq_error_set(err, SQ_ERR_FORMAT,
                          "%s: field 'workers': expected an integer from 1 to %d", mpath,
                          SQ_TRACE_MAX_WORKERS);
        goto done;
    }
    t->workers = (int)u;
    v = cJSON_GetObjectItemCaseSensitive(root, "topology");
    if (v && !cJSON_IsNull(v)) {
        int k = 0, g = 0, used = 0;
        if (!cJSON_IsString(v) || strlen(v->valuestring) >= sizeof t->topo ||
            sscanf(v->valuestring, "%dx%d%n", &k, &g, &used) != 2 ||
            v->valuestring[used] != '\0' || k < 1 || g < 1 || (long)k * g != t->workers) {
            rc = sq_error_set(err, SQ_ERR_FORMAT,
                              "%s: field 'topology': expected \"KxG\" with K * G = workers (%d)",
                              mpath, t->workers);
            goto done;
        }
        snprintf(t->topo, sizeof t->topo, "%s", v->valuestring);
    }
    /* the trace's id, which every file of it carries (tracewrite.c) */
    v = cJSON_GetObjectItemCaseSensitive(root, "id");
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsString(v) || !v->valuestring[0] ||
            strlen(v->valuestring) >= sizeof t->id) {
            rc = sq_error_set(err, SQ_ERR_FORMAT,
                              "%s: field 'id': expected a string of 1 to %zu characters", mpath,
                              sizeof t->id - 1);
            goto done;
        }
        snprintf(t->id, sizeof t->id, "%s", v->valuestring);
    }
    v = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (v && !cJSON_IsNull(v)) {
        t->model = cJSON_PrintUnformatted(v);
        if (!t->model) {
            rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", mpath);
            goto done;
        }
    }
    /* steps */
    v = cJSON_GetObjectItemCaseSensitive(root, "steps");
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0) {
        rc = sq_error_set(err, SQ_ERR_FORMAT,
                          "%s: field 'steps': expected a non-empty array of step numbers", mpath);
        goto done;
    }
    t->nsteps = (size_t)cJSON_GetArraySize(v);
    t->steps = malloc(t->nsteps * sizeof *t->steps);
    if (!t->steps) {
        rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", mpath);
        goto done;
    }
    size_t i = 0;
    for (const cJSON *s = v->child; s; s = s->next, i++) {
        if (json_uint(s, UINT32_MAX, &u)) {
            rc = sq_error_set(err, SQ_ERR_FORMAT,
                              "%s: field 'steps': entry %zu is not an integer from 0 to %u", mpath,
                              i, UINT32_MAX);
            goto done;
        }
        if (i && u <= t->steps[i - 1]) {
            rc = sq_error_set(err, SQ_ERR_FORMAT,
                              "%s: field 'steps': entry %zu (%llu) does not increase", mpath, i,
                              (unsigned long long)u);
            goto done;
        }
        t->steps[i] = (uint32_t)u;
    }
    if ((rc = parse_weights(mpath, cJSON_GetObjectItemCaseSensitive(root, "weights"), t, err)))
        goto done;
    /* params */
    v = cJSON_GetObjectItemCaseSensitive(root, "params");
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0) {
        rc = sq_error_set(err, SQ_ERR_FORMAT,
                          "%s: field 'params': expected a non-empty array of "
                          "{\"name\": ..., \"shape\": [...]}",
                          mpath);
        goto done;
    }
    size_t np = (size_t)cJSON_GetArraySize(v);
    t->params = calloc(np, sizeof *t->params);
    if (!t->params) {
        rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", mpath);
        goto done;
    }
    i = 0;
    for (const cJSON *p = v->child; p; p = p->next, i++) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(p, "name");
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(p, "shape");
        unknown = cJSON_IsObject(p) ? unknown_key(p, param_keys) : NULL;
        if (unknown) {
            rc = sq_error_set(err, SQ_ERR_FORMAT,
                              "%s: field 'params': entry %zu: '%s' is unknown (an entry "
                              "has name and shape)",
                              mpath, i, unknown);
            goto done;
        }
        if (!cJSON_IsString(name) || !name->valuestring[0]) {
            rc = sq_error_set(err, SQ_ERR_FORMAT,
                              "%s: field 'params': entry %zu: 'name' missing or empty", mpath, i);
            goto done;
        }
        /* a name is also a tensor's in the step files and a row's in the
        ** database: text, so UTF-8 (cJSON keeps any byte) */
        size_t nlen = strlen(name->valuestring), bad = sq_utf8_invalid(name->valuestring, nlen);
        if (bad < nlen) {
            char shown[256];
            rc = sq_error_set(err, SQ_ERR_FORMAT,
                              "%s: field 'params': entry %zu: name '%s': not UTF-8 (byte %zu of "
                              "the name)", mpath, i,
                              sq_escape_bytes(name->valuestring, shown, sizeof shown), bad);
            goto done;
        }
        sq_trace_param *q = &t->params[t->nparams];
        q->name = strdup(name->valuestring);
        if (!q->name) {
            rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", mpath);
            goto done;
        }
        t->nparams++;
        if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > SQ_ST_MAXDIM) {
            rc = sq_error_set(err, SQ_ERR_FORMAT,
                              "%s: param '%s': field 'shape': expected an array of at most "
                              "%d integers",
                              mpath, q->name, SQ_ST_MAXDIM);
            goto done;
        }
        int nd = 0;
        for (const cJSON *d = shape->child; d; d = d->next, nd++) {
            if (json_uint(d, UINT64_MAX, &q->shape[nd])) {
                rc = sq_error_set(
                    err, SQ_ERR_FORMAT,
                    "%s: param '%s': field 'shape': entry %d is not a non-negative integer", mpath,
                    q->name, nd);
                goto done;
            }
        }
        q->ndim = nd;
        if (sq_trace_shape_product(q->shape, nd, &q->n) || q->n > UINT64_MAX - t->elements) {
            rc = sq_error_set(err, SQ_ERR_FORMAT,
                              "%s: param '%s': field 'shape': product overflows", mpath, q->name);
            goto done;
        }
        t->elements += q->n;
    }
    d = index_params(t, &dup);
    if (d) {
        if (d < 0)
            rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", mpath);
        else
            rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: field 'params': '%s' listed twice", mpath,
                              dup);
        goto done;
    }
    /* the rest (id, model, owner) is printed by `trace info` too: JSON is
    ** UTF-8 throughout */
    size_t tlen = strlen(text), bad = sq_utf8_invalid(text, tlen);
    if (bad < tlen) {
        rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: byte %zu is not UTF-8 (JSON is UTF-8 text)",
                          mpath, bad);
        goto done;
    }
    rc = 0;
done:
    cJSON_Delete(root);
    free(text);
    free(mpath);
    return rc;
}

/* Checks that file f holds the params of t, as floats. */
static int check_file(sq_trace *t, const char *fname, const sq_st_file *f, sq_error *err)
{
    for (size_t i = 0; i < t->nparams; i++) {
        const sq_trace_param *p = &t->params[i];
        const sq_st_entry *e = sq_st_find(f, p->name);
        if (!e) {
            return sq_error_set(err, SQ_ERR_NOTFOUND,
                                "%s: tensor '%s': missing (the manifest lists it)", fname, p->name);
        }
        if (!sq_st_dtype_is_float(e->dtype)) {
            return sq_error_set(err, SQ_ERR_FORMAT,
                                "%s: tensor '%s': field 'dtype': %s is not a floating-point dtype "
                                "(F32, F16, BF16, F64)",
                                fname, p->name, sq_st_dtype_name(e->dtype));
        }
        if (!shape_equal(e->shape, e->ndim, p->shape, p->ndim)) {
            char a[128], b[128];
            sq_npy_shape_str(e->shape, e->ndim, a, sizeof a);
            sq_npy_shape_str(p->shape, p->ndim, b, sizeof b);
            return sq_error_set(err, SQ_ERR_FORMAT,
                                "%s: tensor '%s': field 'shape': %s, but the manifest says %s",
                                fname, p->name, a, b);
        }
    }
    /* Tensors beyond the manifest's are buffers (a state_dict's running
    ** statistics, step counters): skipped, as in a single file, and counted
    ** (docs/traces.md: one rule for both). */
    if (f->ntensors > t->nparams && f->ntensors - t->nparams > t->nignored)
        t->nignored = f->ntensors - t->nparams;
    return 0;
}

static int open_dir(const char *dir, sq_trace *t, sq_error *err)
{
    int rc = parse_manifest(dir, t, err);
    if (rc) return rc;
    for (size_t s = 0; s < t->nsteps; s++) {
        for (int w = sq_trace_step_has_weights(t, s) ? -1 : 0; w < t->workers; w++) {
            char *fname = sq_trace_step_file(dir, t->steps[s], w);
            if (!fname) {
                return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", dir);
            }
            struct stat st;
            if (stat(fname, &st) != 0) {
                rc = sq_error_set(err, errno == ENOENT ? SQ_ERR_NOTFOUND : SQ_ERR_IO,
                                  "%s: missing (step %u is in the manifest)%s", fname,
                                  (unsigned)t->steps[s], errno == ENOENT ? "" : ": cannot stat");
                free(fname);
                return rc;
            }
            sq_st_file f;
            rc = sq_st_open(fname, &f, err);
            if (rc == 0) {
                rc = check_file(t, fname, &f, err);
                /* a file of another trace (two writers, a copied file); a file
                ** without an id was written by another tool, and is let be */
                const char *id = sq_st_meta_get(&f, "trace_id");
                if (rc == 0 && t->id[0] && id && strcmp(id, t->id)) {
                    rc = sq_error_set(err, SQ_ERR_CONFLICT,
                                      "%s: field 'trace_id': '%s', but "
                                      "the manifest's id is '%s': a file of another trace",
                                      fname, id, t->id);
                }
                for (size_t i = 0; i < f.ntensors; i++) t->dtypes |= 1u << f.tensors[i].dtype;
                t->bytes += f.data_len;
                sq_st_free(&f);
            }
            free(fname);
            if (rc) return rc;
        }
    }
    return 0;
}

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

static int open_safetensors(const char *path, sq_trace *t, sq_error *err)
{
    sq_st_file f;
    int rc = sq_st_open(path, &f, err);
    if (rc) return rc;
    t->params = calloc(f.ntensors ? f.ntensors : 1, sizeof *t->params);
    t->steps = malloc(sizeof *t->steps);
    if (!t->params || !t->steps) {
        rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    for (size_t i = 0; i < f.ntensors; i++) {
        const sq_st_entry *e = &f.tensors[i];
        t->dtypes |= 1u << e->dtype;
        if (!sq_st_dtype_is_float(e->dtype)) {
            t->nignored++;
            continue;
        }
        sq_trace_param *q = &t->params[t->nparams];
        q->name = strdup(e->name);
        if (!q->name) {
            rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
            goto done;
        }
        t->nparams++;
        q->ndim = e->ndim;
        memcpy(q->shape, e->shape, sizeof q->shape);
        q->n = e->nelem;
        t->elements += q->n;
        t->bytes += e->end - e->begin;
    }
    if (t->nparams == 0) {
        rc = sq_error_set(err, SQ_ERR_NOTFOUND,
                          "%s: no floating-point tensor (F32, F16, BF16, F64) to replay", path);
        goto done;
    }
    rc = 0;
done:
    sq_st_free(&f);
    return rc;
}

static int open_npy(const char *path, sq_trace *t, sq_error *err)
{
    sq_npy a;
    int rc = sq_npy_read(path, &a, err);
    if (rc) return rc;
    t->params = calloc(1, sizeof *t->params);
    t->steps = malloc(sizeof *t->steps);
    const char *b = base_name(path);
    size_t len = strlen(b);
    if (len > 4 && strcmp(b + len - 4, ".npy") == 0) len -= 4;
    char *name = t->params ? strndup(b, len) : NULL;
    if (!t->steps || !name) {
        free(name);
        sq_npy_free(&a);
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
    }
    /* the tensor is named after the file, and names are text (UTF-8), as
    ** a safetensors header's are */
    size_t bad = sq_utf8_invalid(name, len);
    if (bad < len) {
        char shown[256];
        rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: tensor '%s' (the file's name): not UTF-8 "
                          "(byte %zu of the name)", path, sq_escape_bytes(name, shown, sizeof shown),
                          bad);
        free(name);
        sq_npy_free(&a);
        return rc;
    }
    t->params[0].name = name;
    t->params[0].ndim = a.ndim;
    memcpy(t->params[0].shape, a.shape, sizeof a.shape[0] * (size_t)a.ndim);
    t->params[0].n = a.n;
    t->nparams = 1;
    t->elements = a.n;
    t->bytes = a.n * (a.dtype == SQ_NPY_F8 ? 8 : a.dtype == SQ_NPY_F2 ? 2 : 4);
    t->dtypes = 1u << (a.dtype == SQ_NPY_F8 ? SQ_ST_F64 : a.dtype == SQ_NPY_F2 ? SQ_ST_F16
                                                                                : SQ_ST_F32);
    sq_npy_free(&a);
    return 0;
}

int sq_trace_open(const char *path, sq_trace *t, sq_error *err)
{
    memset(t, 0, sizeof *t);
    if (!path || !*path) {
        return sq_error_set(err, SQ_ERR_ARG, "(empty): no trace given");
    }
    t->path = strdup(path);
    if (!t->path) {
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
    }
    struct stat st;
    int rc;
    if (stat(path, &st) != 0) {
        rc = sq_error_set(err, errno == ENOENT ? SQ_ERR_NOTFOUND : SQ_ERR_IO, "%s: cannot open: %s",
                          path, strerror(errno));
        sq_trace_close(t);
        return rc;
    }
    if (S_ISDIR(st.st_mode)) {
        t->kind = SQ_TRACE_DIR;
        rc = open_dir(path, t, err);
    } else {
        /* A .npy file starts with its magic; everything else is read as
        ** safetensors. Both are read again for each step, so a pipe (read
        ** once) cannot be a trace: only a regular file. */
        unsigned char magic[6] = {0};
        sq_input in;
        if ((rc = sq_input_open(path, 0, &in, err)) != 0) {
            sq_trace_close(t);
            return rc;
        }
        ssize_t got = read(in.fd, magic, sizeof magic);
        close(in.fd);
        t->workers = 1;
        t->has_weights = 0;
        t->nsteps = 1;
        if (got == 6 && memcmp(magic, "\x93NUMPY", 6) == 0) {
            t->kind = SQ_TRACE_NPY;
            rc = open_npy(path, t, err);
        } else {
            t->kind = SQ_TRACE_SAFETENSORS;
            rc = open_safetensors(path, t, err);
        }
        if (rc == 0) t->steps[0] = 0;
        const char *dup; /* names from one file are unique already */
        if (rc == 0 && index_params(t, &dup) < 0) {
            rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
        }
    }
    if (rc) sq_trace_close(t);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Steps                                                                    */
/* ------------------------------------------------------------------------ */

void sq_trace_step_close(sq_trace_step *s)
{
    if (!s || !s->trace) return;
    sq_st_free(&s->weights);
    if (s->grads)
        for (int w = 0; w < s->ngrads; w++) sq_st_free(&s->grads[w]);
    free(s->grads);
    free(s->wentry);
    free(s->gentry);
    if (s->npy) {
        sq_npy_free(s->npy);
        free(s->npy);
    }
    memset(s, 0, sizeof *s);
}

/* Maps one file of the step and finds the params' entries in it. */
static int open_step_file(sq_trace_step *s, int worker, sq_error *err)
{
    const sq_trace *t = s->trace;
    sq_st_file *f = worker < 0 ? &s->weights : &s->grads[worker];
    const sq_st_entry **ent = worker < 0 ? s->wentry : s->gentry + (size_t)worker * t->nparams;
    char *fname = t->kind == SQ_TRACE_DIR ? sq_trace_step_file(t->path, s->step, worker) : strdup(t->path);
    if (!fname) {
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", t->path);
    }
    int rc = sq_st_open(fname, f, err);
    free(fname);
    if (rc) return rc;
    /* sq_trace_open checked every file; this catches one changed since */
    for (size_t p = 0; p < t->nparams; p++) {
        ent[p] = sq_st_find(f, t->params[p].name);
        if (!ent[p] || !sq_st_dtype_is_float(ent[p]->dtype) || ent[p]->nelem != t->params[p].n) {
            return sq_error_set(err, SQ_ERR_FORMAT,
                                "%s: tensor '%s': changed since the trace was opened",
                                sq_trace_file_name(s, worker), t->params[p].name);
        }
    }
    return 0;
}

int sq_trace_step_open(const sq_trace *t, size_t index, int weights, int ngrads, sq_trace_step *s,
                       sq_error *err)
{
    memset(s, 0, sizeof *s);
    int rc;
    if (index >= t->nsteps) {
        return sq_error_set(err, SQ_ERR_NOTFOUND, "%s: step index %zu: the trace has %zu steps",
                            t->path, index, t->nsteps);
    }
    s->trace = t;
    s->index = index;
    s->step = t->steps[index];
    if (t->kind == SQ_TRACE_NPY) {
        s->npy = calloc(1, sizeof *s->npy);
        if (!s->npy) {
            return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", t->path);
        }
        if ((rc = sq_npy_read(t->path, s->npy, err)) != 0) goto fail;
        if (s->npy->n != t->params[0].n) {
            rc =
                sq_error_set(err, SQ_ERR_FORMAT, "%s: changed since the trace was opened", t->path);
            goto fail;
        }
        return 0;
    }
    s->grads = calloc((size_t)t->workers, sizeof *s->grads);
    s->gentry = calloc((size_t)t->workers * t->nparams, sizeof *s->gentry);
    s->wentry = calloc(t->nparams, sizeof *s->wentry);
    if (!s->grads || !s->gentry || !s->wentry) {
        rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", t->path);
        goto fail;
    }
    s->ngrads = ngrads < t->workers ? ngrads : t->workers;
    s->has_weights = weights && sq_trace_step_has_weights(t, index);
    for (int w = s->has_weights ? -1 : 0; w < s->ngrads; w++)
        if ((rc = open_step_file(s, w, err)) != 0) goto fail;
    return 0;
fail:
    sq_trace_step_close(s);
    return rc;
}

const char *sq_trace_file_name(const sq_trace_step *s, int worker)
{
    /* Rebuilt on demand into a static buffer: only for messages. */
    static _Thread_local char buf[4096];
    const sq_trace *t = s->trace;
    if (t->kind != SQ_TRACE_DIR) return t->path;
    char *p = sq_trace_step_file(t->path, s->step, worker);
    snprintf(buf, sizeof buf, "%s", p ? p : t->path);
    free(p);
    return buf;
}

/* Whether the step opened param p of that file (worker < 0: the weights). */
static int step_opened(const sq_trace_step *s, int worker, size_t p)
{
    int opened = s->npy ? worker == 0 : worker < 0 ? s->has_weights : worker < s->ngrads;
    return opened && p < s->trace->nparams;
}

static const sq_st_entry *step_entry(const sq_trace_step *s, int worker, size_t p)
{
    return worker < 0 ? s->wentry[p] : s->gentry[(size_t)worker * s->trace->nparams + p];
}

uint64_t sq_trace_tensor_bytes(const sq_trace_step *s, int worker, size_t p)
{
    if (s->npy) return s->trace->params[p].n * 4;
    const sq_st_entry *e = step_entry(s, worker, p);
    return e->end - e->begin;
}

int sq_trace_load_part(sq_trace_step *s, int worker, size_t p, uint64_t first, uint64_t len,
                       float *out32)
{
    if (s->npy) return SQ_ERR_UNSUPPORTED;
    if (!step_opened(s, worker, p)) return SQ_ERR_ARG;
    const sq_st_file *f = worker < 0 ? &s->weights : &s->grads[worker];
    return sq_st_to_f32_part(f, step_entry(s, worker, p), first, len, out32);
}

void sq_trace_release(sq_trace_step *s, int worker, size_t p)
{
    if (s->npy || !step_opened(s, worker, p)) return;
    sq_st_release(worker < 0 ? &s->weights : &s->grads[worker], step_entry(s, worker, p));
}

void sq_trace_release_part(sq_trace_step *s, int worker, size_t p, uint64_t first, uint64_t len)
{
    if (s->npy || !step_opened(s, worker, p)) return;
    sq_st_release_part(worker < 0 ? &s->weights : &s->grads[worker], step_entry(s, worker, p),
                       first, len);
}

int sq_trace_load(sq_trace_step *s, int worker, size_t p, float *out32, double *out64,
                  sq_error *err)
{
    const sq_trace *t = s->trace;
    if (!step_opened(s, worker, p)) {
        return sq_error_set(err, SQ_ERR_ARG, "%s: step %u: no %s%d of param %zu was opened",
                            t->path, (unsigned)s->step,
                            worker < 0 ? "weights" : "gradient of worker ", worker < 0 ? 0 : worker,
                            p);
    }
    int rc;
    if (s->npy) {
        if ((rc = sq_npy_check_finite(t->path, s->npy, err)) != 0) return rc;
        uint64_t n = s->npy->n;
        if (out32) memcpy(out32, s->npy->data, n * sizeof *out32);
        if (out64)
            for (uint64_t i = 0; i < n; i++) out64[i] = s->npy->data[i];
        return 0;
    }
    const sq_st_file *f = worker < 0 ? &s->weights : &s->grads[worker];
    const sq_st_entry *e = step_entry(s, worker, p);
    if (out64) {
        /* one pass over the file: every fp32 value is the fp64 one rounded
        ** (exact but for F64, rounded to nearest as sq_st_to_f32 does) */
        rc = sq_st_to_f64(f, e, out64, err);
        if (rc == 0 && out32) {
            const uint64_t n = e->nelem;
#pragma omp parallel for simd num_threads(sq_get_threads()) schedule(static) if (n > 65536)
            for (uint64_t i = 0; i < n; i++) out32[i] = (float)out64[i];
        }
    } else {
        rc = out32 ? sq_st_to_f32(f, e, out32, err) : 0;
    }
    sq_st_release(f, e);
    return rc;
}
