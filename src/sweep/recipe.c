/*
** recipe.c -- reading and expanding sweep recipes (sweep.h) into
** structured configurations. The INI syntax is inih's; this file only gives
** the keys their meaning.
*/
#define _DEFAULT_SOURCE /* realpath */
#include "shardq/plugin.h"
#include "shardq/sweep.h"
#include "trace/input.h"

#include <stdarg.h>


#include <ini.h>

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A configuration holds its key and label (some 7 KB expanded: 70000 of
** them took 480 MB), so 10^6 would take gigabytes before the first ran. */
#define MAX_RUNS 100000
#define MAX_VALUES 100000

enum { K_TRACE, K_WORKERS, K_SEEDS, K_PRESETS, K_DEVICE, K_PATHS, K_STEPS, K_CORPUS, K_TRAIN,
       K_REUSE, K_KNOB };

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
    int kind;         /* its kind */
} parse_state;

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void set_parse_err(parse_state *ps, int kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->err, sizeof ps->err, fmt, ap);
    va_end(ap);
    ps->kind = kind;
}

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
        set_parse_err(ps, SQ_ERR_FORMAT, "%s: line %d: [%s] given twice (first at line %d)",
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
    int c = 0, n = 0, nul = 0;
    /* no further than one byte past what a line may hold: a file without
    ** newlines (gigabytes of one line) is refused at once, not read to its
    ** end */
    while (n < num - 1 && (c = getc(ps->f)) != EOF && c != '\n') {
        if (n < num - 2) str[n] = (char)c;
        nul |= c == '\0';
        n++;
    }
    if (n == num - 1) c = 0; /* stopped at the limit, not at an end */
    if (c == EOF && n == 0) return NULL;
    ps->line++;
    int len = n > 0 && n <= num - 2 && str[n - 1] == '\r' ? n - 1 : n;
    if (len > max) {
        set_parse_err(ps, SQ_ERR_FORMAT, "%s: line %d: longer than %d characters, the most a "
                   "recipe line may hold (a list may go on over the indented lines that follow)",
                   ps->path, ps->line, max);
        return NULL;
    }
    if (nul) {
        set_parse_err(ps, SQ_ERR_FORMAT, "%s: line %d: holds a NUL byte (not a text file?)",
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
            set_parse_err(ps, SQ_ERR_FORMAT, "%s: line %d: [%s] %s: given twice (first%s%s%s at "
                       "line %d)", ps->path, ps->line, sec, key, alias ? " as '" : "",
                       alias ? e->key : "", alias ? "'" : "", e->line);
            return 0;
        }
    }
    if (!*value) {
        set_parse_err(ps, SQ_ERR_FORMAT, "%s: line %d: [%s] %s: no value", ps->path, ps->line,
                   sec, key);
        return 0;
    }
    int kind = key_kind(key);
    if (kind == K_TRACE || kind == K_CORPUS || kind == K_PRESETS || kind == K_DEVICE ||
        !strcmp(key, "name")) {
        for (const char *v = value; v; v = strchr(v, ','), v = v ? v + 1 : NULL) {
            const char *item = v + strspn(v, " \t");
            if (*item == '-') {
                set_parse_err(ps, SQ_ERR_SPEC, "%s: line %d: [%s] %s: '%.*s' starts with "
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
    size_t n, cap;
} vlist;

static void vlist_free(vlist *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

static int vlist_push(vlist *l, const char *s, size_t len)
{
    if (l->n == MAX_VALUES) return SQ_ERR_SPEC;
    if (l->n == l->cap) { /* doubling: a range of 10^5 values is read in linear time */
        size_t cap = l->cap ? 2 * l->cap : 8;
        char **p = realloc(l->v, cap * sizeof *p);
        if (!p) return SQ_ERR_NOMEM;
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n] = strndup(s, len);
    if (!l->v[l->n]) return SQ_ERR_NOMEM;
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
                        vlist *out, sq_error *err)
{
    memset(out, 0, sizeof *out);
    const char *p = text;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
        if (!len) {
            sq_error_set(err, SQ_ERR_SPEC, "%s: [%s] %s: empty item in '%s'", file, sec, key, text);
            goto fail;
        }
        const char *dots = NULL;
        for (size_t i = 0; i + 1 < len; i++)
            if (p[i] == '.' && p[i + 1] == '.') dots = p + i;
        if (dots && all_digits(p, (size_t)(dots - p)) &&
            all_digits(dots + 2, len - (size_t)(dots + 2 - p))) {
            unsigned long long a = strtoull(p, NULL, 10), b = strtoull(dots + 2, NULL, 10);
            if (a > b || b - a >= MAX_VALUES) {
                sq_error_set(err, SQ_ERR_SPEC, "%s: [%s] %s: range %llu..%llu is empty or too long",
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
    sq_error_set(err, SQ_ERR_SPEC, "%s: [%s] %s: too many values", file, sec, key);
fail:
    vlist_free(out);
    return err->status;
}

void sq_sweep_config_clear(sq_sweep_config *x)
{
    if (!x) return;
    free(x->grid), free(x->preset), free(x->trace), free(x->device), free(x->corpus);
    free(x->key), free(x->label);
    for (int k = 0; k < x->nsets; k++) free(x->sets[k]);
    for (int k = 0; k < x->noptions; k++) free(x->options[k]);
    free(x->sets), free(x->options);
    x->grid = x->preset = x->trace = x->device = x->corpus = x->key = x->label = NULL;
    x->sets = x->options = NULL;
    x->nsets = x->noptions = 0;
}

void sq_sweep_free(sq_sweep *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->nruns; i++) sq_sweep_config_clear(&r->runs[i]);
    free(r->runs), free(r->path), free(r->name), free(r->first_invalid), free(r->text);
    free(r->first_duplicate);
    memset(r, 0, sizeof *r);
}

void sq_sweep_config_defaults(sq_sweep_config *c, int command)
{
    memset(c, 0, sizeof *c);
    c->command = command;
    c->seed = 1;
    c->paths = SQ_REPLAY_GRAD | SQ_REPLAY_WEIGHT;
    sq_train_defaults(&c->train);
}

const char *sq_sweep_paths_name(int paths)
{
    return paths == (SQ_REPLAY_GRAD | SQ_REPLAY_WEIGHT) ? "grad,weight"
           : paths == SQ_REPLAY_GRAD                    ? "grad"
                                                        : "weight";
}

/* ------------------------------------------------------------------------ */
/* The training options a recipe may set                                    */
/* ------------------------------------------------------------------------ */

/* Each is read into its field of the training configuration when the
** recipe is loaded, within the bounds `shardq train` takes. */
enum { T_INT, T_U32, T_FLOAT };
typedef struct train_key {
    const char *name;
    int type;
    double min, max;
    size_t offset; /* in sq_train_config */
} train_key;

#define TK(name, type, min, max, field) {name, type, min, max, offsetof(sq_train_config, field)}
static const train_key train_keys[] = {
    TK("layers", T_INT, 1, 1024, model.layers),
    TK("channels", T_INT, 1, 1 << 16, model.channels),
    TK("heads", T_INT, 1, 1 << 16, model.heads),
    TK("context", T_INT, 1, 1 << 20, model.context),
    TK("seq", T_INT, 1, 1 << 20, seq),
    TK("batch", T_INT, 1, 65536, batch),
    TK("lr", T_FLOAT, 1e-12, 10, lr.lr),
    TK("min-lr", T_FLOAT, 0, 10, lr.min_lr),
    TK("warmup", T_U32, 0, 100000000, lr.warmup),
    TK("beta1", T_FLOAT, 0, 0.999999, adamw.beta1),
    TK("beta2", T_FLOAT, 0, 0.999999, adamw.beta2),
    TK("eps", T_FLOAT, 1e-30, 1, adamw.eps),
    TK("weight-decay", T_FLOAT, 0, 10, adamw.weight_decay),
    TK("clip", T_FLOAT, 0, 1e30, clip),
    TK("eval-every", T_U32, 0, UINT32_MAX, eval_every),
    TK("eval-seqs", T_INT, 1, 1 << 20, eval_seqs),
};
#define NTRAIN_KEYS (sizeof train_keys / sizeof train_keys[0])

static const train_key *find_train_key(const char *k)
{
    for (size_t i = 0; i < NTRAIN_KEYS; i++)
        if (!strcmp(k, train_keys[i].name)) return &train_keys[i];
    return NULL;
}

/* An unsigned decimal (or 0x hexadecimal) integer, digits only. */
static int parse_u64(const char *text, uint64_t *out)
{
    const char *digits = text;
    int base = 10;
    if (text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) digits = text + 2, base = 16;
    int ok = base == 10 ? (*digits >= '0' && *digits <= '9') : isxdigit((unsigned char)*digits);
    char *end = NULL;
    errno = 0;
    unsigned long long v = ok ? strtoull(digits, &end, base) : 0;
    if (!ok || *end) return SQ_ERR_SPEC;
    if (errno == ERANGE) return SQ_ERR_RANGE;
    *out = v;
    return SQ_OK;
}

/* Sets option k of c to text; the sentence names the file, grid and key. */
static int set_train_key(sq_train_config *c, const train_key *k, const char *text,
                         const char *file, const char *grid, sq_error *err)
{
    char *field = (char *)c + k->offset;
    if (k->type == T_FLOAT) {
        char *end;
        errno = 0;
        double v = strtod(text, &end);
        if (end == text || *end || errno == ERANGE || !isfinite(v))
            return sq_error_set(err, SQ_ERR_SPEC, "%s: [%s] %s: '%s' is not a number", file,
                                grid, k->name, text);
        if (v < k->min || v > k->max)
            return sq_error_set(err, SQ_ERR_SPEC, "%s: [%s] %s: '%s' is out of range [%g, %g]",
                                file, grid, k->name, text, k->min, k->max);
        float f = (float)v;
        memcpy(field, &f, sizeof f);
        return SQ_OK;
    }
    uint64_t v = 0;
    int rc = parse_u64(text, &v);
    if (rc == SQ_ERR_SPEC)
        return sq_error_set(err, SQ_ERR_SPEC, "%s: [%s] %s: '%s' is not an unsigned integer",
                            file, grid, k->name, text);
    if (rc || v > (uint64_t)k->max)
        return sq_error_set(err, SQ_ERR_SPEC, "%s: [%s] %s: '%s' is larger than %llu", file, grid,
                            k->name, text, (unsigned long long)k->max);
    if ((double)v < k->min)
        return sq_error_set(err, SQ_ERR_SPEC, "%s: [%s] %s: '%s' is below %g", file, grid,
                            k->name, text, k->min);
    if (k->type == T_INT) {
        int i = (int)v;
        memcpy(field, &i, sizeof i);
    } else {
        uint32_t u = (uint32_t)v;
        memcpy(field, &u, sizeof u);
    }
    return SQ_OK;
}

static int key_kind(const char *k)
{
    if (!strcmp(k, "corpus")) return K_CORPUS;
    if (find_train_key(k)) return K_TRAIN;
    if (!strcmp(k, "trace") || !strcmp(k, "traces")) return K_TRACE;
    if (!strcmp(k, "workers")) return K_WORKERS;
    if (!strcmp(k, "seed") || !strcmp(k, "seeds")) return K_SEEDS;
    if (!strcmp(k, "preset") || !strcmp(k, "presets")) return K_PRESETS;
    if (!strcmp(k, "device")) return K_DEVICE;
    if (!strcmp(k, "paths")) return K_PATHS;
    if (!strcmp(k, "steps")) return K_STEPS;
    if (!strcmp(k, "reuse_workers")) return K_REUSE;
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

static int add_run(sq_sweep *r, sq_sweep_config *x)
{
    if (r->nruns == MAX_RUNS) return SQ_ERR_SPEC;
    if ((r->nruns & (r->nruns - 1)) == 0) {
        sq_sweep_config *p = realloc(r->runs, (r->nruns ? 2 * r->nruns : 1) * sizeof *p);
        if (!p) return SQ_ERR_NOMEM;
        r->runs = p;
    }
    r->runs[r->nruns++] = *x;
    return 0;
}

/* The key: the sweep's name and every setting of x, the scheme canonical
** (so that two spellings of one scheme are one key) and the input by its
** real path. The training options follow in the order of train_keys, not
** the recipe's: the same settings written in another order are the same
** run. */
static char *make_key(const sq_sweep *r, const sq_sweep_config *x)
{
    char canon[SQ_SCHEME_STRLEN];
    sq_scheme_format(&x->scheme, canon, sizeof canon);
    int train = r->command == SQ_SWEEP_TRAIN;
    const char *input = train ? x->corpus : x->trace;
    char *real = input ? realpath(input, NULL) : NULL;
    char workers[32] = "default";
    if (x->has_topo) snprintf(workers, sizeof workers, "%dx%d", x->topo.nodes, x->topo.per_node);
    size_t klen = strlen(r->name) + strlen(x->preset) + strlen(canon) + 4096 +
                  strlen(real ? real : input ? input : "default");
    for (int k = 0; k < x->noptions; k++) klen += strlen(x->options[k]) + 1;
    char *key = malloc(klen);
    if (!key) {
        free(real);
        return NULL;
    }
    int kl = snprintf(key, klen, "sweep=%s;%spreset=%s;scheme=%s;%s=%s;workers=%s;seed=%llu;"
                      "device=%s;paths=%s;steps=%llu",
                      r->name, train ? "command=train;" : "", x->preset, canon,
                      train ? "corpus" : "trace", real ? real : input ? input : "default", workers,
                      (unsigned long long)x->seed, x->device,
                      train ? "-" : sq_sweep_paths_name(x->paths), (unsigned long long)x->steps);
    for (size_t t = 0; t < NTRAIN_KEYS; t++) {
        size_t len = strlen(train_keys[t].name);
        for (int k = 0; k < x->noptions; k++)
            if (!strncmp(x->options[k], train_keys[t].name, len) && x->options[k][len] == '=')
                kl += snprintf(key + kl, klen - (size_t)kl, ";%s", x->options[k]);
    }
    /* only when set, so that the keys of runs stored before it stay theirs */
    if (x->reuse_workers) kl += snprintf(key + kl, klen - (size_t)kl, ";reuse_workers=1");
    free(real);
    return key;
}

/* Builds the run of one combination (idx[d] picks a value of dims[d]).
** Returns SQ_OK also for a combination left out (its scheme does not
** validate: counted in r). */
static int make_run(sq_sweep *r, const char *grid, const dim *dims, size_t nd, const size_t *idx,
                    const char *dir, const char *trace_override, sq_error *err)
{
    int train = r->command == SQ_SWEEP_TRAIN;
    sq_sweep_config x;
    sq_sweep_config_defaults(&x, r->command);
    x.grid = strdup(grid);
    x.preset = strdup("sdp4bit");
    x.device = strdup("cpu");
    x.sets = calloc(nd ? nd : 1, sizeof *x.sets);
    x.options = calloc(nd ? nd : 1, sizeof *x.options);
    const char *trace = trace_override, *corpus = NULL;
    int rc = SQ_ERR_SPEC, min_lr_given = 0, warmup_given = 0;
    if (!x.grid || !x.preset || !x.device || !x.sets || !x.options) goto oom;
    for (size_t d = 0; d < nd; d++) {
        const char *v = dims[d].values.v[idx[d]];
        char **slot = NULL;
        int kind = dims[d].kind;
        if (train ? kind == K_TRACE || kind == K_PATHS || kind == K_REUSE
                  : kind == K_CORPUS || kind == K_TRAIN) {
            sq_error_set(err, SQ_ERR_SPEC, "%s: [%s] %s: not a key of a %s sweep%s", r->path,
                         grid, dims[d].key, train ? "train" : "replay",
                         train ? "" : " (command = train makes one)");
            goto fail;
        }
        switch (kind) {
        case K_CORPUS: corpus = v; break;
        case K_TRAIN: {
            const train_key *k = find_train_key(dims[d].key);
            if (set_train_key(&x.train, k, v, r->path, grid, err)) goto fail;
            min_lr_given |= !strcmp(k->name, "min-lr");
            warmup_given |= !strcmp(k->name, "warmup");
            size_t len = strlen(dims[d].key) + strlen(v) + 2;
            x.options[x.noptions] = malloc(len);
            if (!x.options[x.noptions]) goto oom;
            snprintf(x.options[x.noptions++], len, "%s=%s", dims[d].key, v);
            break;
        }
        case K_TRACE: if (!trace_override) trace = v; break;
        case K_WORKERS: {
            sq_error e2;
            if (sq_topo_parse(v, &x.topo, &e2)) {
                sq_error_set(err, SQ_ERR_SPEC, "%s: [%s] workers: %s", r->path, grid, sq_error_message(&e2));
                goto fail;
            }
            x.has_topo = 1;
            break;
        }
        case K_SEEDS: {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (*v < '0' || *v > '9' || *end || errno || s > INT64_MAX) {
                sq_error_set(err, SQ_ERR_SPEC, "%s: [%s] seeds: '%s' is not an integer below 2^63",
                             r->path, grid, v);
                goto fail;
            }
            x.seed = s;
            break;
        }
        case K_PRESETS: slot = &x.preset; break;
        case K_DEVICE: slot = &x.device; break;
        case K_PATHS:
            if (!strcmp(v, "grad")) x.paths = SQ_REPLAY_GRAD;
            else if (!strcmp(v, "weight")) x.paths = SQ_REPLAY_WEIGHT;
            else if (!strcmp(v, "both")) x.paths = SQ_REPLAY_GRAD | SQ_REPLAY_WEIGHT;
            else {
                sq_error_set(err, SQ_ERR_SPEC, "%s: [%s] paths: '%s': expected grad, weight or both",
                             r->path, grid, v);
                goto fail;
            }
            break;
        case K_REUSE:
            if (strcmp(v, "0") && strcmp(v, "1")) {
                sq_error_set(err, SQ_ERR_SPEC, "%s: [%s] reuse_workers: '%s': expected 0 or 1",
                             r->path, grid, v);
                goto fail;
            }
            x.reuse_workers = v[0] == '1';
            break;
        case K_STEPS: {
            char *end;
            unsigned long long s = strtoull(v, &end, 10);
            /* a training run takes at most 10^8 steps */
            if (*v < '0' || *v > '9' || *end || s > (train ? 100000000u : UINT32_MAX)) {
                sq_error_set(err, SQ_ERR_SPEC, "%s: [%s] steps: '%s' is not a step count", r->path,
                             grid, v);
                goto fail;
            }
            /* 0 is the configuration's "not given" (every step of the trace,
            ** train's default): written out, it would silently mean that */
            if (s == 0) {
                sq_error_set(err, SQ_ERR_SPEC, "%s: [%s] steps: 0: %s at least one step (leave "
                             "steps out for %s)", r->path, grid, train ? "train" : "replay",
                             train ? "train's default" : "every step of the trace");
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
    if (train) trace = NULL;
    if (!trace && !train) {
        sq_error_set(err, SQ_ERR_SPEC, "%s: [%s]: no trace (give trace = PATH)",
                     r->path, grid);
        goto fail;
    }
    /* a relative trace or corpus is relative to the recipe, not to the
    ** current directory */
    if (trace && !(x.trace = resolve(dir, trace, trace == trace_override))) goto oom;
    if (corpus && !(x.corpus = resolve(dir, corpus, 0))) goto oom;
    if (train) {
        /* steps 0: the trainer's default; then the defaults that follow
        ** from the options (as `shardq train` resolves them) */
        if (x.steps) x.train.steps = (uint32_t)x.steps;
        if (!min_lr_given) x.train.lr.min_lr = x.train.lr.lr / 10;
        if (!warmup_given) x.train.lr.warmup = x.train.steps / 10;
        x.train.seed = x.seed;
    }
    /* the scheme: an unknown preset or knob is the recipe's error; a
    ** combination the world cannot run is left out and counted */
    sq_error e2;
    if (sq_scheme_preset(x.preset, &x.scheme, &e2)) {
        sq_error_set(err, SQ_ERR_SPEC, "%s: [%s] presets: %s", r->path, grid, sq_error_message(&e2));
        goto fail;
    }
    for (int k = 0; k < x.nsets; k++)
        if (sq_scheme_set(&x.scheme, x.sets[k], &e2)) {
            sq_error_set(err, SQ_ERR_SPEC, "%s: [%s] %s", r->path, grid, sq_error_message(&e2));
            goto fail;
        }
    if (sq_scheme_validate(&x.scheme, &e2)) {
        if (!r->first_invalid) {
            char buf[1024];
            snprintf(buf, sizeof buf, "%s", sq_error_message(&e2));
            r->first_invalid = strdup(buf);
        }
        r->ninvalid++;
        rc = SQ_OK;
        goto fail;
    }
    x.key = make_key(r, &x);
    x.label = malloc(1024);
    if (!x.key || !x.label) goto oom;
    int used = snprintf(x.label, 1024, "%s %s", grid, x.preset);
    for (int k = 0; k < x.nsets && used < 1000; k++)
        used += snprintf(x.label + used, (size_t)(1024 - used), " %s", x.sets[k]);
    if (used < 1000) snprintf(x.label + used, (size_t)(1024 - used), " seed=%llu",
                              (unsigned long long)x.seed);
    if (add_run(r, &x)) {
        sq_error_set(err, SQ_ERR_SPEC, "%s: more than %d runs", r->path, MAX_RUNS);
        goto fail;
    }
    return SQ_OK;
oom:
    rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", r->path);
fail:
    sq_sweep_config_clear(&x);
    return rc == SQ_OK ? SQ_OK : err->status;
}

typedef struct keyed {
    const char *key;
    size_t i;
} keyed;

static int cmp_keyed(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->i > y->i) - (x->i < y->i); /* the earliest of equal keys first */
}

/* Leaves out the configurations whose key an earlier one has: the store
** holds one run per key, so running them again would only find it done,
** and counting them as runs made progress say "378 of 378" of a sweep
** that stores 366. They are counted in r->nduplicate instead, and the
** order of the others is kept. n log n, as sweeps may be large. */
static int drop_duplicates(sq_sweep *r)
{
    if (r->nruns < 2) return 0;
    keyed *ix = malloc(r->nruns * sizeof *ix);
    unsigned char *drop = calloc(r->nruns, 1);
    if (!ix || !drop) {
        free(ix), free(drop);
        return -1;
    }
    for (size_t i = 0; i < r->nruns; i++) ix[i] = (keyed){r->runs[i].key, i};
    qsort(ix, r->nruns, sizeof *ix, cmp_keyed);
    size_t first = SIZE_MAX, kept = 0, head = 0; /* head: the earliest of equal keys */
    for (size_t k = 1; k < r->nruns; k++) {
        if (strcmp(ix[k].key, ix[head].key)) {
            head = k;
            continue;
        }
        drop[ix[k].i] = 1;
        if (ix[k].i < first) first = ix[k].i, kept = ix[head].i;
    }
    if (first != SIZE_MAX) {
        size_t len = strlen(r->runs[first].label) + strlen(r->runs[kept].label) + 8;
        if ((r->first_duplicate = malloc(len)) != NULL)
            snprintf(r->first_duplicate, len, "%s = %s", r->runs[first].label,
                     r->runs[kept].label);
    }
    size_t out = 0;
    for (size_t i = 0; i < r->nruns; i++) {
        if (drop[i]) {
            sq_sweep_config_clear(&r->runs[i]);
            r->nduplicate++;
        } else
            r->runs[out++] = r->runs[i];
    }
    r->nruns = out;
    free(ix), free(drop);
    return 0;
}

/* Refuses a grid whose lists multiply to more runs than a sweep may have
** (with the runs of the grids before it), naming the count. */
static int grid_too_big(const sq_sweep *r, const dim *dims, size_t nd, const section *g, sq_error *err)
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
        sq_error_set(err, SQ_ERR_SPEC, "%s: line %d: [%s]: %s configurations, which with the %zu of the "
                   "grids before it are more than the %d a sweep may run", r->path, g->line,
                   g->name, count, r->nruns, MAX_RUNS);
    else
        sq_error_set(err, SQ_ERR_SPEC, "%s: line %d: [%s]: %s configurations, more than the %d a sweep "
                   "may run", r->path, g->line, g->name, count, MAX_RUNS);
    return SQ_ERR_SPEC;
}

/* Expands one grid: the [sweep] defaults overridden by the grid's keys. */
static int expand_grid(sq_sweep *r, const section *defaults, const section *grid, const char *gname,
                       const char *dir, const char *trace_override, sq_error *err)
{
    size_t cap = (defaults ? defaults->n : 0) + (grid ? grid->n : 0);
    dim *dims = calloc(cap ? cap : 1, sizeof *dims);
    size_t *idx = calloc(cap ? cap : 1, sizeof *idx);
    size_t nd = 0;
    int rc = SQ_ERR_SPEC;
    if (!dims || !idx) {
        sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", r->path);
        goto done;
    }
    for (int pass = 0; pass < 2; pass++) {
        const section *s = pass ? grid : defaults;
        if (!s) continue;
        for (size_t i = 0; i < s->n; i++) {
            const char *k = s->e[i].key;
            if (!strcmp(k, "name") || !strcmp(k, "jobs") || !strcmp(k, "command") ||
                !strcmp(k, "plugins")) {
                if (pass) {
                    sq_error_set(err, SQ_ERR_SPEC, "%s: [%s] %s: belongs in [sweep]", r->path, s->name,
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
            if (split_values(r->path, s->name, k, s->e[i].value, &dims[at].values, err))
                goto done;
            /* counted before anything is expanded, and as the lists come: a
            ** grid of 10^10 must not take the memory of 10^6 first */
            if (grid_too_big(r, dims, nd, grid ? grid : defaults, err)) goto done;
        }
    }
    size_t before = r->nruns, invalid = r->ninvalid;
    for (;;) {
        if (make_run(r, gname, dims, nd, idx, dir, trace_override, err)) goto done;
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
        sq_error_set(err, SQ_ERR_SPEC, "%s: line %d: [%s]: none of its %zu combination%s is a valid "
                   "scheme%s%s%s", r->path, grid->line, grid->name, n, n == 1 ? "" : "s",
                   mine ? " (e.g. " : "", mine ? r->first_invalid : "", mine ? ")" : "");
        goto done;
    }
    rc = SQ_OK;
done:
    for (size_t d = 0; d < nd; d++) vlist_free(&dims[d].values);
    free(dims);
    free(idx);
    return rc == SQ_OK ? SQ_OK : err->status;
}

/* [sweep] plugins = FILE.so, ...: the plug-in codecs its knobs may name
** (kind=plugin:NAME), loaded before any scheme is read; paths relative to
** the recipe's directory. */
static int load_plugins(const char *path, const section *sweep, const char *dir, sq_error *err)
{
    for (size_t i = 0; i < sweep->n; i++) {
        if (strcmp(sweep->e[i].key, "plugins")) continue;
        vlist files = {0};
        if (split_values(path, "sweep", "plugins", sweep->e[i].value, &files, err))
            return err->status;
        int rc = SQ_OK;
        for (size_t f = 0; f < files.n && rc == SQ_OK; f++) {
            char *file = resolve(dir, files.v[f], 0);
            if (!file) {
                rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
                break;
            }
            if (sq_plugin_load(file, err) < 0) rc = sq_error_prefix(err, "%s: [sweep] plugins: ", path);
            free(file);
        }
        vlist_free(&files);
        return rc;
    }
    return SQ_OK;
}

/* The recipe file's text, stored with every run of the sweep (how it was
** asked for); NULL when it cannot be read again or is over 1 MiB, which
** loses that record only. */
static char *read_text(const char *path)
{
    sq_input in;
    FILE *f = sq_input_fopen(path, 0, &in, NULL);
    if (!f) return NULL;
    enum { MAX_TEXT = 1 << 20 };
    char *t = malloc(MAX_TEXT + 1);
    size_t n = t ? fread(t, 1, MAX_TEXT + 1, f) : 0;
    int bad = !t || ferror(f) || n > MAX_TEXT;
    fclose(f);
    if (bad) {
        free(t);
        return NULL;
    }
    t[n] = '\0';
    char *s = realloc(t, n + 1);
    return s ? s : t;
}

/* The recipe read from f (path names it; text is its text, or NULL), parsed
** and expanded into r; f is closed. */
static int load_stream(const char *path, FILE *f, char *text, const char *trace_override,
                       sq_sweep *r, sq_error *err)
{
    parse_state ps = {.path = path};
    ps.f = f;
    int line = ini_parse_stream(read_line, &ps, on_key, &ps);
    int rerr = ferror(f);
    fclose(f);
    char *dir = NULL;
    int rc = SQ_ERR_SPEC;
    r->path = strdup(path);
    r->text = text;
    if (!r->path || ps.oom) {
        sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    if (ps.err[0]) {
        sq_error_set(err, ps.kind, "%s", ps.err);
        goto done;
    }
    if (rerr) {
        sq_error_set(err, SQ_ERR_IO, "%s: cannot read: %s", path, strerror(errno ? errno : EIO));
        goto done;
    }
    if (line) {
        sq_error_set(err, SQ_ERR_FORMAT, "%s: line %d: not 'key = value', '[section]' or a comment "
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
                sq_error_set(err, SQ_ERR_SPEC, "%s: line %d: [%s]: no keys (a grid is the product "
                           "of its lists: give one at least)", path, ps.s[i].line, ps.s[i].name);
                goto done;
            }
        } else {
            sq_error_set(err, SQ_ERR_SPEC, "%s: [%s]: unknown section (expected [sweep] or "
                       "[grid NAME])", path, ps.s[i].name);
            goto done;
        }
    }
    if (!sweep) {
        sq_error_set(err, SQ_ERR_SPEC, "%s: no [sweep] section", path);
        goto done;
    }
    const char *name = NULL;
    for (size_t i = 0; i < sweep->n; i++) {
        if (!strcmp(sweep->e[i].key, "name")) name = sweep->e[i].value;
        if (!strcmp(sweep->e[i].key, "command")) {
            const char *v = sweep->e[i].value;
            if (strcmp(v, "train") && strcmp(v, "replay")) {
                sq_error_set(err, SQ_ERR_SPEC, "%s: [sweep] command: '%s': expected replay or train",
                           path, v);
                goto done;
            }
            r->command = !strcmp(v, "train") ? SQ_SWEEP_TRAIN : SQ_SWEEP_REPLAY;
        }
        if (!strcmp(sweep->e[i].key, "jobs")) {
            char *end;
            long j = strtol(sweep->e[i].value, &end, 10);
            if (*end || j < 0 || j > 1024) {
                sq_error_set(err, SQ_ERR_SPEC, "%s: [sweep] jobs: '%s' is not from 0 to 1024", path,
                           sweep->e[i].value);
                goto done;
            }
            r->jobs = (int)j;
        }
    }
    if (!name || !*name || strchr(name, ',')) {
        sq_error_set(err, SQ_ERR_SPEC, "%s: [sweep] name: missing (every sweep has a name, which its "
                   "runs are stored under)", path);
        goto done;
    }
    r->name = strdup(name);
    dir = dir_of(path);
    if (!r->name || !dir) {
        sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    if (load_plugins(path, sweep, dir, err)) goto done;
    if (ngrids == 0) {
        if (expand_grid(r, sweep, NULL, "sweep", dir, trace_override, err)) goto done;
    } else {
        for (size_t i = 0; i < ps.n; i++)
            if (&ps.s[i] != sweep &&
                expand_grid(r, sweep, &ps.s[i], ps.s[i].name + 5, dir, trace_override, err))
                goto done;
    }
    if (drop_duplicates(r)) {
        sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    if (r->nruns == 0) {
        sq_error_set(err, SQ_ERR_SPEC, "%s: no valid configuration (%zu left out: %s)", path,
                   r->ninvalid, r->first_invalid ? r->first_invalid : "none");
        goto done;
    }
    rc = SQ_OK;
done:
    free(dir);
    free_sections(&ps);
    if (rc) sq_sweep_free(r);
    return rc == SQ_OK ? SQ_OK : err->status;
}

int sq_sweep_load(const char *path, const char *trace_override, sq_sweep *r, sq_error *e)
{
    sq_error mine = {0};
    sq_error *err = e ? e : &mine;
    memset(r, 0, sizeof *r);
    /* a regular file only, opened without blocking: a FIFO would wait for
    ** a writer, /dev/zero never ends, a directory reads as an error later */
    sq_input in;
    FILE *f = sq_input_fopen(path, 0, &in, err);
    if (!f) return err->status = SQ_ERR_IO; /* a missing recipe too, as it always was */
    return load_stream(path, f, read_text(path), trace_override, r, err);
}

int sq_sweep_load_text(const char *path, const char *text, size_t len,
                       const char *trace_override, sq_sweep *r, sq_error *e)
{
    sq_error mine = {0};
    sq_error *err = e ? e : &mine;
    memset(r, 0, sizeof *r);
    char *copy = malloc(len + 1);
    FILE *f = NULL;
    if (copy) {
        memcpy(copy, text, len);
        copy[len] = '\0';
        /* fmemopen refuses a buffer of no bytes: an empty recipe reads as one */
        f = len ? fmemopen(copy, len, "r") : fopen("/dev/null", "r");
    }
    if (!f) {
        free(copy);
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
    }
    /* the stream reads the copy, which becomes the recipe's text */
    return load_stream(path, f, copy, trace_override, r, err);
}
