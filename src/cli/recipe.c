/*
** recipe.c -- reading and expanding sweep recipes (recipe.h). The INI
** syntax is inih's; this file only gives the keys their meaning.
*/
#define _DEFAULT_SOURCE /* realpath */
#include "recipe.h"
#include "trace/wfile.h"

#include <ini.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RUNS 1000000
#define MAX_VALUES 100000

enum { K_TRACE, K_WORKERS, K_SEEDS, K_PRESETS, K_DEVICE, K_PATHS, K_STEPS, K_CORPUS, K_TRAIN,
       K_KNOB };

typedef struct entry {
    char *key, *value;
    int line; /* where it was given */
} entry;

typedef struct section {
    char *name;
    entry *e;
    size_t n;
    int line; /* its [header] */
} section;

/* What the reader and the handler below share while inih parses a file. */
typedef struct parse_state {
    const char *path;
    FILE *f;
    section *s;
    size_t n;
    int oom;
    int line;         /* the line inih is at */
    int cont;         /* that line continues the value before it (it is indented) */
    int after_key;    /* a key was given since the last [header]: inih continues it */
    const entry *last; /* the entry the last line gave or continued */
    char err[1024];   /* the first refusal, naming the file and line; "" when none */
} parse_state;

static char *xstrdup(const char *s) { return s ? strdup(s) : NULL; }

static int key_kind(const char *k);

static section *find_section(parse_state *ps, const char *name)
{
    for (size_t i = 0; i < ps->n; i++)
        if (!strcmp(ps->s[i].name, name)) return &ps->s[i];
    return NULL;
}

/* A [header]: a section of its own, even if no key follows (inih says
** nothing of those), and given once. */
static void on_section(parse_state *ps, const char *name, size_t len)
{
    char *n = strndup(name, len);
    if (!n) {
        ps->oom = 1;
        return;
    }
    section *old = find_section(ps, n);
    if (old) {
        sq_set_err(ps->err, sizeof ps->err, "%s: line %d: [%s] given twice (first at line %d)",
                   ps->path, ps->line, n, old->line);
        free(n);
        return;
    }
    section *p = realloc(ps->s, (ps->n + 1) * sizeof *p);
    if (!p) {
        free(n);
        ps->oom = 1;
        return;
    }
    ps->s = p;
    ps->s[ps->n++] = (section){.name = n, .line = ps->line};
}

/* inih reads the file through this, which counts the lines and sees what
** inih hides: a line longer than its buffer (inih would cut it and read the
** rest as a line of its own), a NUL byte, the [headers] of sections without
** keys, and whether a line continues the value before it. It stops the
** parse (returns NULL, the end of the file) after a refusal. */
static char *read_line(char *str, int num, void *user)
{
    parse_state *ps = user;
    if (ps->err[0] || ps->oom) return NULL;
    int max = num - 3; /* inih's own rule: room for "\r\n" and the NUL */
    int c, n = 0, nul = 0;
    while ((c = getc(ps->f)) != EOF && c != '\n') {
        if (n < num - 2) str[n] = (char)c;
        nul |= c == '\0';
        n++;
    }
    if (c == EOF && n == 0) return NULL;
    ps->line++;
    int len = n > 0 && n <= num - 2 && str[n - 1] == '\r' ? n - 1 : n;
    if (len > max) {
        sq_set_err(ps->err, sizeof ps->err, "%s: line %d: longer than %d characters, the most a "
                   "recipe line may hold (a list may go on over the indented lines that follow)",
                   ps->path, ps->line, max);
        return NULL;
    }
    if (nul) {
        sq_set_err(ps->err, sizeof ps->err, "%s: line %d: holds a NUL byte (not a text file?)",
                   ps->path, ps->line);
        return NULL;
    }
    str[n] = '\n';
    str[n + 1] = '\0';
    /* the same reading of the line as inih's, for what it does not report */
    const char *p = str + strspn(str, " \t");
    int indented = p > str;
    ps->cont = 0;
    if (*p == ';' || *p == '#' || *p == '\r' || *p == '\n') {
        /* a comment or a blank line */
    } else if (indented && ps->after_key) {
        ps->cont = 1;
    } else if (*p == '[') {
        size_t k = strcspn(p + 1, "]");
        if (p[1 + k] == ']') on_section(ps, p + 1, k);
        ps->after_key = 0;
    }
    return str;
}

/* inih calls this per key. A key continued on indented lines adds their
** items to its list; a key given twice in a section (or under two of its
** names, seed and seeds) is refused, as are an empty value and a path or
** name that starts with '-' (a child would read it as an option). */
static int on_key(void *user, const char *sec, const char *key, const char *value)
{
    parse_state *ps = user;
    ps->after_key = 1;
    section *s = find_section(ps, sec);
    if (!s) { /* keys before any [header]: inih's section "" */
        on_section(ps, sec, strlen(sec));
        if (!(s = find_section(ps, sec))) return 0;
    }
    for (size_t i = 0; i < s->n; i++) {
        entry *e = &s->e[i];
        if (ps->cont && e == ps->last) {
            /* "a, b," then "c": one list; the comma may end the line or not */
            size_t k = strlen(e->value), len = k + strlen(value) + 3;
            while (k && (e->value[k - 1] == ' ' || e->value[k - 1] == '\t')) k--;
            int comma = k && e->value[k - 1] == ',';
            char *v = malloc(len);
            if (!v) return ps->oom = 1, 0;
            snprintf(v, len, "%.*s%s%s", (int)k, e->value, comma ? "" : ",", value);
            free(e->value);
            e->value = v;
            return 1;
        }
        int kind = key_kind(key), same = !strcmp(e->key, key);
        int alias = !same && kind != K_KNOB && kind != K_TRAIN && key_kind(e->key) == kind;
        if (same || alias) {
            sq_set_err(ps->err, sizeof ps->err, "%s: line %d: [%s] %s: given twice (first%s%s%s at "
                       "line %d)", ps->path, ps->line, sec, key, alias ? " as '" : "",
                       alias ? e->key : "", alias ? "'" : "", e->line);
            return 0;
        }
    }
    if (!*value) {
        sq_set_err(ps->err, sizeof ps->err, "%s: line %d: [%s] %s: no value", ps->path, ps->line,
                   sec, key);
        return 0;
    }
    int kind = key_kind(key);
    if (kind == K_TRACE || kind == K_CORPUS || kind == K_PRESETS || kind == K_DEVICE ||
        !strcmp(key, "name")) {
        for (const char *v = value; v; v = strchr(v, ','), v = v ? v + 1 : NULL) {
            const char *item = v + strspn(v, " \t");
            if (*item == '-') {
                sq_set_err(ps->err, sizeof ps->err, "%s: line %d: [%s] %s: '%.*s' starts with "
                           "'-'%s", ps->path, ps->line, sec, key, (int)strcspn(item, ","), item,
                           kind == K_TRACE || kind == K_CORPUS ? " (for a path, write ./-...)"
                                                               : "");
                return 0;
            }
        }
    }
    entry *p = realloc(s->e, (s->n + 1) * sizeof *p);
    if (!p) return ps->oom = 1, 0;
    s->e = p;
    s->e[s->n] = (entry){.key = xstrdup(key), .value = xstrdup(value), .line = ps->line};
    if (!s->e[s->n].key || !s->e[s->n].value) {
        free(s->e[s->n].key), free(s->e[s->n].value);
        return ps->oom = 1, 0;
    }
    ps->last = &s->e[s->n++];
    return 1;
}

static void free_sections(parse_state *ps)
{
    for (size_t i = 0; i < ps->n; i++) {
        for (size_t j = 0; j < ps->s[i].n; j++) free(ps->s[i].e[j].key), free(ps->s[i].e[j].value);
        free(ps->s[i].e);
        free(ps->s[i].name);
    }
    free(ps->s);
}

/* A list of values: the comma-separated items of text, A..B expanded. */
typedef struct vlist {
    char **v;
    size_t n;
} vlist;

static void vlist_free(vlist *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

static int vlist_push(vlist *l, const char *s, size_t len)
{
    if (l->n == MAX_VALUES) return -1;
    char **p = realloc(l->v, (l->n + 1) * sizeof *p);
    if (!p) return -1;
    l->v = p;
    l->v[l->n] = strndup(s, len);
    if (!l->v[l->n]) return -1;
    l->n++;
    return 0;
}

static int all_digits(const char *s, size_t len)
{
    if (!len || len > 18) return 0;
    for (size_t i = 0; i < len; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

static int split_values(const char *file, const char *sec, const char *key, const char *text,
                        vlist *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const char *p = text;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
        if (!len) {
            sq_set_err(err, errlen, "%s: [%s] %s: empty item in '%s'", file, sec, key, text);
            goto fail;
        }
        const char *dots = NULL;
        for (size_t i = 0; i + 1 < len; i++)
            if (p[i] == '.' && p[i + 1] == '.') dots = p + i;
        if (dots && all_digits(p, (size_t)(dots - p)) &&
            all_digits(dots + 2, len - (size_t)(dots + 2 - p))) {
            unsigned long long a = strtoull(p, NULL, 10), b = strtoull(dots + 2, NULL, 10);
            if (a > b || b - a >= MAX_VALUES) {
                sq_set_err(err, errlen, "%s: [%s] %s: range %llu..%llu is empty or too long",
                           file, sec, key, a, b);
                goto fail;
            }
            for (unsigned long long v = a; v <= b; v++) {
                char buf[32];
                int k = snprintf(buf, sizeof buf, "%llu", v);
                if (vlist_push(out, buf, (size_t)k)) goto oom;
            }
        } else if (vlist_push(out, p, len)) {
            goto oom;
        }
        if (!end) break;
        p = end + 1;
    }
    return 0;
oom:
    sq_set_err(err, errlen, "%s: [%s] %s: too many values", file, sec, key);
fail:
    vlist_free(out);
    return -1;
}

void recipe_free(recipe *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->nruns; i++) {
        recipe_run *x = &r->runs[i];
        free(x->grid), free(x->preset), free(x->trace), free(x->workers), free(x->device);
        free(x->paths), free(x->key), free(x->label), free(x->corpus);
        for (int k = 0; k < x->nsets; k++) free(x->sets[k]);
        for (int k = 0; k < x->nopts; k++) free(x->opts[k]);
        free(x->sets), free(x->opts);
    }
    free(r->runs), free(r->path), free(r->name), free(r->first_invalid);
    memset(r, 0, sizeof *r);
}

/* The options of `shardq train` a recipe may set (passed as --KEY=VALUE,
** checked by the run itself). */
static const char *const train_keys[] = {
    "layers", "channels", "heads", "context", "seq", "batch", "lr", "min-lr", "warmup",
    "beta1", "beta2", "eps", "weight-decay", "clip", "eval-every", "eval-seqs"};

static int key_kind(const char *k)
{
    if (!strcmp(k, "corpus")) return K_CORPUS;
    for (size_t i = 0; i < sizeof train_keys / sizeof *train_keys; i++)
        if (!strcmp(k, train_keys[i])) return K_TRAIN;
    if (!strcmp(k, "trace") || !strcmp(k, "traces")) return K_TRACE;
    if (!strcmp(k, "workers")) return K_WORKERS;
    if (!strcmp(k, "seed") || !strcmp(k, "seeds")) return K_SEEDS;
    if (!strcmp(k, "preset") || !strcmp(k, "presets")) return K_PRESETS;
    if (!strcmp(k, "device")) return K_DEVICE;
    if (!strcmp(k, "paths")) return K_PATHS;
    if (!strcmp(k, "steps")) return K_STEPS;
    return K_KNOB;
}

/* One dimension of a grid. */
typedef struct dim {
    const char *key;
    int kind;
    vlist values;
} dim;

/* The directory part of path, with a trailing slash ("" when none). */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return strndup(path, slash ? (size_t)(slash - path + 1) : 0);
}

/* path relative to the recipe's directory dir, unless absolute or given
** on the command line (verbatim). */
static char *resolve(const char *dir, const char *path, int verbatim)
{
    if (path[0] == '/' || verbatim) return strdup(path);
    size_t len = strlen(dir) + strlen(path) + 1;
    char *p = malloc(len);
    if (p) snprintf(p, len, "%s%s", dir, path);
    return p;
}

static int add_run(recipe *r, recipe_run *x)
{
    if (r->nruns == MAX_RUNS) return -1;
    if ((r->nruns & (r->nruns - 1)) == 0) {
        recipe_run *p = realloc(r->runs, (r->nruns ? 2 * r->nruns : 1) * sizeof *p);
        if (!p) return -1;
        r->runs = p;
    }
    r->runs[r->nruns++] = *x;
    return 0;
}

/* Builds the run of one combination (idx[d] picks a value of dims[d]). */
static int make_run(recipe *r, const char *grid, const dim *dims, size_t nd, const size_t *idx,
                    const char *dir, const char *trace_override, char *err, size_t errlen)
{
    recipe_run x;
    memset(&x, 0, sizeof x);
    x.grid = strdup(grid);
    x.preset = strdup("sdp4bit");
    x.device = strdup("cpu");
    x.paths = strdup("grad,weight");
    x.seed = 1;
    x.sets = calloc(nd ? nd : 1, sizeof *x.sets);
    x.opts = calloc(nd ? nd : 1, sizeof *x.opts);
    const char *trace = trace_override, *corpus = NULL;
    int rc = -1;
    if (!x.grid || !x.preset || !x.device || !x.paths || !x.sets || !x.opts) goto oom;
    for (size_t d = 0; d < nd; d++) {
        const char *v = dims[d].values.v[idx[d]];
        char **slot = NULL;
        int kind = dims[d].kind;
        if (r->train ? kind == K_TRACE || kind == K_PATHS : kind == K_CORPUS || kind == K_TRAIN) {
            sq_set_err(err, errlen, "%s: [%s] %s: not a key of a %s sweep%s", r->path, grid,
                       dims[d].key, r->train ? "train" : "replay",
                       r->train ? "" : " (command = train makes one)");
            goto fail;
        }
        switch (kind) {
        case K_CORPUS: corpus = v; break;
        case K_TRAIN: {
            size_t len = strlen(dims[d].key) + strlen(v) + 4;
            x.opts[x.nopts] = malloc(len);
            if (!x.opts[x.nopts]) goto oom;
            snprintf(x.opts[x.nopts++], len, "--%s=%s", dims[d].key, v);
            break;
        }
        case K_TRACE: if (!trace_override) trace = v; break;
        case K_WORKERS: {
            sq_topo t;
            sq_error e2;
            if (sq_topo_parse(v, &t, &e2)) {
                sq_set_err(err, errlen, "%s: [%s] workers: %s", r->path, grid, sq_error_message(&e2));
                goto fail;
            }
            slot = &x.workers;
            break;
        }
        case K_SEEDS: {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (*v < '0' || *v > '9' || *end || errno || s > INT64_MAX) {
                sq_set_err(err, errlen, "%s: [%s] seeds: '%s' is not an integer below 2^63",
                           r->path, grid, v);
                goto fail;
            }
            x.seed = s;
            break;
        }
        case K_PRESETS: slot = &x.preset; break;
        case K_DEVICE: slot = &x.device; break;
        case K_PATHS:
            if (strcmp(v, "grad") && strcmp(v, "weight") && strcmp(v, "both")) {
                sq_set_err(err, errlen, "%s: [%s] paths: '%s': expected grad, weight or both",
                           r->path, grid, v);
                goto fail;
            }
            free(x.paths);
            x.paths = strdup(strcmp(v, "both") ? v : "grad,weight");
            if (!x.paths) goto oom;
            break;
        case K_STEPS: {
            char *end;
            unsigned long long s = strtoull(v, &end, 10);
            if (*v < '0' || *v > '9' || *end || s > UINT32_MAX) {
                sq_set_err(err, errlen, "%s: [%s] steps: '%s' is not a step count", r->path,
                           grid, v);
                goto fail;
            }
            x.steps = s;
            break;
        }
        default: {
            size_t len = strlen(dims[d].key) + strlen(v) + 2;
            x.sets[x.nsets] = malloc(len);
            if (!x.sets[x.nsets]) goto oom;
            snprintf(x.sets[x.nsets++], len, "%s=%s", dims[d].key, v);
        }
        }
        if (slot) {
            free(*slot);
            *slot = strdup(v);
            if (!*slot) goto oom;
        }
    }
    if (r->train) trace = NULL;
    if (!trace && !r->train) {
        sq_set_err(err, errlen, "%s: [%s]: no trace (give trace = PATH, or --trace)", r->path,
                   grid);
        goto fail;
    }
    /* a relative trace or corpus is relative to the recipe, not to the
    ** current directory */
    if (trace && !(x.trace = resolve(dir, trace, trace == trace_override))) goto oom;
    if (corpus && !(x.corpus = resolve(dir, corpus, 0))) goto oom;
    /* the scheme: an unknown preset or knob is the recipe's error; a
    ** combination the world cannot run is left out and counted */
    sq_scheme sc;
    sq_error e2;
    if (sq_scheme_preset(x.preset, &sc, &e2)) {
        sq_set_err(err, errlen, "%s: [%s] presets: %s", r->path, grid, sq_error_message(&e2));
        goto fail;
    }
    for (int k = 0; k < x.nsets; k++)
        if (sq_scheme_set(&sc, x.sets[k], &e2)) {
            sq_set_err(err, errlen, "%s: [%s] %s", r->path, grid, sq_error_message(&e2));
            goto fail;
        }
    if (sq_scheme_validate(&sc, &e2)) {
        if (!r->first_invalid) {
            char buf[1024];
            snprintf(buf, sizeof buf, "%s", sq_error_message(&e2));
            r->first_invalid = strdup(buf);
        }
        r->ninvalid++;
        rc = 0;
        goto fail;
    }
    char canon[SQ_SCHEME_STRLEN];
    sq_scheme_format(&sc, canon, sizeof canon);
    const char *input = r->train ? x.corpus : x.trace;
    char *real = input ? realpath(input, NULL) : NULL;
    size_t klen = strlen(r->name) + strlen(x.preset) + strlen(canon) + 4096 +
                  strlen(real ? real : input ? input : "default");
    for (int k = 0; k < x.nopts; k++) klen += strlen(x.opts[k]) + 1;
    x.key = malloc(klen);
    x.label = malloc(1024);
    if (!x.key || !x.label) {
        free(real);
        goto oom;
    }
    int kl = snprintf(x.key, klen, "sweep=%s;%spreset=%s;scheme=%s;%s=%s;workers=%s;seed=%llu;"
                      "device=%s;paths=%s;steps=%llu",
                      r->name, r->train ? "command=train;" : "", x.preset, canon,
                      r->train ? "corpus" : "trace", real ? real : input ? input : "default",
                      x.workers ? x.workers : "default", (unsigned long long)x.seed, x.device,
                      r->train ? "-" : x.paths, (unsigned long long)x.steps);
    for (int k = 0; k < x.nopts; k++)
        kl += snprintf(x.key + kl, klen - (size_t)kl, ";%s", x.opts[k] + 2);
    free(real);
    int used = snprintf(x.label, 1024, "%s %s", grid, x.preset);
    for (int k = 0; k < x.nsets && used < 1000; k++)
        used += snprintf(x.label + used, (size_t)(1024 - used), " %s", x.sets[k]);
    if (used < 1000) snprintf(x.label + used, (size_t)(1024 - used), " seed=%llu",
                              (unsigned long long)x.seed);
    if (add_run(r, &x)) {
        sq_set_err(err, errlen, "%s: more than %d runs", r->path, MAX_RUNS);
        goto fail;
    }
    return 0;
oom:
    sq_set_err(err, errlen, "%s: out of memory", r->path);
fail:
    free(x.grid), free(x.preset), free(x.trace), free(x.workers), free(x.device), free(x.paths);
    free(x.key), free(x.label), free(x.corpus);
    for (int k = 0; k < x.nsets; k++) free(x.sets[k]);
    for (int k = 0; k < x.nopts; k++) free(x.opts[k]);
    free(x.sets), free(x.opts);
    return rc;
}

/* Refuses a grid whose lists multiply to more runs than a sweep may have
** (with the runs of the grids before it), naming the count. */
static int grid_too_big(const recipe *r, const dim *dims, size_t nd, const section *g, char *err,
                        size_t errlen)
{
    uint64_t n = 1;
    int overflow = 0;
    for (size_t d = 0; d < nd; d++) {
        uint64_t k = dims[d].values.n;
        if (k && n > UINT64_MAX / k) overflow = 1;
        n *= k;
    }
    if (!overflow && n <= (uint64_t)(MAX_RUNS - r->nruns)) return 0;
    char count[64];
    if (overflow)
        snprintf(count, sizeof count, "more than 2^64");
    else
        snprintf(count, sizeof count, "%llu", (unsigned long long)n);
    if (r->nruns)
        sq_set_err(err, errlen, "%s: line %d: [%s]: %s configurations, which with the %zu of the "
                   "grids before it are more than the %d a sweep may run", r->path, g->line,
                   g->name, count, r->nruns, MAX_RUNS);
    else
        sq_set_err(err, errlen, "%s: line %d: [%s]: %s configurations, more than the %d a sweep "
                   "may run", r->path, g->line, g->name, count, MAX_RUNS);
    return -1;
}

/* Expands one grid: the [sweep] defaults overridden by the grid's keys. */
static int expand_grid(recipe *r, const section *defaults, const section *grid, const char *gname,
                       const char *dir, const char *trace_override, char *err, size_t errlen)
{
    size_t cap = (defaults ? defaults->n : 0) + (grid ? grid->n : 0);
    dim *dims = calloc(cap ? cap : 1, sizeof *dims);
    size_t *idx = calloc(cap ? cap : 1, sizeof *idx);
    size_t nd = 0;
    int rc = -1;
    if (!dims || !idx) {
        sq_set_err(err, errlen, "%s: out of memory", r->path);
        goto done;
    }
    for (int pass = 0; pass < 2; pass++) {
        const section *s = pass ? grid : defaults;
        if (!s) continue;
        for (size_t i = 0; i < s->n; i++) {
            const char *k = s->e[i].key;
            if (!strcmp(k, "name") || !strcmp(k, "jobs") || !strcmp(k, "command")) {
                if (pass) {
                    sq_set_err(err, errlen, "%s: [%s] %s: belongs in [sweep]", r->path, s->name,
                               k);
                    goto done;
                }
                continue;
            }
            int kind = key_kind(k);
            size_t at = nd;
            /* a grid's key replaces the default of the same meaning */
            for (size_t d = 0; d < nd; d++)
                if (kind == K_KNOB || kind == K_TRAIN ? !strcmp(dims[d].key, k)
                                                      : dims[d].kind == kind)
                    at = d;
            if (at < nd) vlist_free(&dims[at].values);
            else nd++;
            dims[at].key = k;
            dims[at].kind = kind;
            if (split_values(r->path, s->name, k, s->e[i].value, &dims[at].values, err, errlen))
                goto done;
            /* counted before anything is expanded, and as the lists come: a
            ** grid of 10^10 must not take the memory of 10^6 first */
            if (grid_too_big(r, dims, nd, grid ? grid : defaults, err, errlen)) goto done;
        }
    }
    size_t before = r->nruns, invalid = r->ninvalid;
    for (;;) {
        if (make_run(r, gname, dims, nd, idx, dir, trace_override, err, errlen)) goto done;
        size_t d = nd;
        while (d > 0) {
            d--;
            if (++idx[d] < dims[d].values.n) break;
            idx[d] = 0;
            if (d == 0) {
                d = SIZE_MAX;
                break;
            }
        }
        if (nd == 0 || d == SIZE_MAX) break;
    }
    if (grid && r->nruns == before) {
        /* a grid of which nothing runs is a mistake that the count of the
        ** combinations left out would hide among the other grids' */
        int mine = invalid == 0 && r->first_invalid; /* the example is this grid's */
        size_t n = r->ninvalid - invalid;
        sq_set_err(err, errlen, "%s: line %d: [%s]: none of its %zu combination%s is a valid "
                   "scheme%s%s%s", r->path, grid->line, grid->name, n, n == 1 ? "" : "s",
                   mine ? " (e.g. " : "", mine ? r->first_invalid : "", mine ? ")" : "");
        goto done;
    }
    rc = 0;
done:
    for (size_t d = 0; d < nd; d++) vlist_free(&dims[d].values);
    free(dims);
    free(idx);
    return rc;
}

int recipe_load(const char *path, const char *trace_override, recipe *r, char *err,
                size_t errlen)
{
    memset(r, 0, sizeof *r);
    parse_state ps = {.path = path};
    FILE *f = fopen(path, "r");
    if (!f) {
        sq_set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    ps.f = f;
    int line = ini_parse_stream(read_line, &ps, on_key, &ps);
    int rerr = ferror(f);
    fclose(f);
    char *dir = NULL;
    int rc = -1;
    r->path = strdup(path);
    if (!r->path || ps.oom) {
        sq_set_err(err, errlen, "%s: out of memory", path);
        goto done;
    }
    if (ps.err[0]) {
        sq_set_err(err, errlen, "%s", ps.err);
        goto done;
    }
    if (rerr) {
        sq_set_err(err, errlen, "%s: cannot read: %s", path, strerror(errno ? errno : EIO));
        goto done;
    }
    if (line) {
        sq_set_err(err, errlen, "%s: line %d: not 'key = value', '[section]' or a comment "
                   "(lines of at most %d characters)", path, line, INI_MAX_LINE);
        goto done;
    }
    const section *sweep = NULL;
    size_t ngrids = 0;
    for (size_t i = 0; i < ps.n; i++) {
        if (!strcmp(ps.s[i].name, "sweep")) sweep = &ps.s[i];
        else if (!strncmp(ps.s[i].name, "grid ", 5) && ps.s[i].name[5]) {
            ngrids++;
            if (ps.s[i].n == 0) {
                sq_set_err(err, errlen, "%s: line %d: [%s]: no keys (a grid is the product "
                           "of its lists: give one at least)", path, ps.s[i].line, ps.s[i].name);
                goto done;
            }
        } else {
            sq_set_err(err, errlen, "%s: [%s]: unknown section (expected [sweep] or "
                       "[grid NAME])", path, ps.s[i].name);
            goto done;
        }
    }
    if (!sweep) {
        sq_set_err(err, errlen, "%s: no [sweep] section", path);
        goto done;
    }
    const char *name = NULL;
    for (size_t i = 0; i < sweep->n; i++) {
        if (!strcmp(sweep->e[i].key, "name")) name = sweep->e[i].value;
        if (!strcmp(sweep->e[i].key, "command")) {
            const char *v = sweep->e[i].value;
            if (strcmp(v, "train") && strcmp(v, "replay")) {
                sq_set_err(err, errlen, "%s: [sweep] command: '%s': expected replay or train",
                           path, v);
                goto done;
            }
            r->train = !strcmp(v, "train");
        }
        if (!strcmp(sweep->e[i].key, "jobs")) {
            char *end;
            long j = strtol(sweep->e[i].value, &end, 10);
            if (*end || j < 0 || j > 1024) {
                sq_set_err(err, errlen, "%s: [sweep] jobs: '%s' is not from 0 to 1024", path,
                           sweep->e[i].value);
                goto done;
            }
            r->jobs = (int)j;
        }
    }
    if (!name || !*name || strchr(name, ',')) {
        sq_set_err(err, errlen, "%s: [sweep] name: missing (every sweep has a name, which its "
                   "runs are stored under)", path);
        goto done;
    }
    r->name = strdup(name);
    dir = dir_of(path);
    if (!r->name || !dir) {
        sq_set_err(err, errlen, "%s: out of memory", path);
        goto done;
    }
    if (ngrids == 0) {
        if (expand_grid(r, sweep, NULL, "sweep", dir, trace_override, err, errlen)) goto done;
    } else {
        for (size_t i = 0; i < ps.n; i++)
            if (&ps.s[i] != sweep &&
                expand_grid(r, sweep, &ps.s[i], ps.s[i].name + 5, dir, trace_override, err,
                            errlen))
                goto done;
    }
    if (r->nruns == 0) {
        sq_set_err(err, errlen, "%s: no valid configuration (%zu left out: %s)", path,
                   r->ninvalid, r->first_invalid ? r->first_invalid : "none");
        goto done;
    }
    rc = 0;
done:
    free(dir);
    free_sections(&ps);
    if (rc) recipe_free(r);
    return rc;
}
