/*
** files.c -- reading the cost model's platform, model and validation files
** (cost.h), from a path or from the copies built into the library. Every
** key is known and every number checked, so a typo in a platform file is an
** error naming the file, the key and the line rather than a silently
** default-valued cluster.
*/
#include "shardq/cost.h"

#include "cost/embedded.h"
#include "shardq/codec.h"
#include "trace/input.h"

#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where the built-in files of each kind sit in the source tree (and so in
** the embedded names), and what a message calls them. */
static const char *const kind_dir[] = {"experiments/platforms/", "experiments/models/",
                                       "experiments/validation/"};
static const char *const kind_noun[] = {"platform", "model", "validation table"};

/* The embedded file whose path is dir + name + ".ini"; NULL when none. */
static const sq_cost_embedded *find_builtin(const char *dir, const char *name)
{
    size_t nd = strlen(dir), nn = strlen(name);
    for (const sq_cost_embedded *f = sq_cost_embedded_files; f->name; f++)
        if (!strncmp(f->name, dir, nd) && !strncmp(f->name + nd, name, nn) &&
            !strcmp(f->name + nd + nn, ".ini"))
            return f;
    return NULL;
}

int sq_cost_builtin_name(sq_cost_file_kind kind, size_t i, char *name, size_t len)
{
    if ((unsigned)kind > SQ_COST_VALIDATION || !name || !len) return SQ_ERR_ARG;
    size_t nd = strlen(kind_dir[kind]);
    for (const sq_cost_embedded *f = sq_cost_embedded_files; f->name; f++) {
        size_t n = strlen(f->name);
        if (strncmp(f->name, kind_dir[kind], nd) || n < nd + 4 || i--) continue;
        if (n - nd - 4 >= len) return SQ_ERR_RANGE;
        snprintf(name, len, "%.*s", (int)(n - nd - 4), f->name + nd);
        return SQ_OK;
    }
    return SQ_ERR_NOTFOUND;
}

/* A platform file is a page: anything near a megabyte is not one. */
#define MAX_FILE (1u << 20)

/* The text of `what` (a path, or a built-in name of the kind): *text is
** malloc'd, *shown the name to put in messages. */
static int load_text(const char *what, sq_cost_file_kind kind, char **text, const char **shown,
                     sq_error *err)
{
    size_t n = strlen(what);
    int is_path = strchr(what, '/') || (n > 4 && !strcmp(what + n - 4, ".ini"));
    *text = NULL;
    if (!is_path) {
        const sq_cost_embedded *f = find_builtin(kind_dir[kind], what);
        if (!f) return sq_error_set(err, SQ_ERR_NOTFOUND, "no built-in %s '%s'", kind_noun[kind],
                                    what);
        *shown = f->name;
        if (!(*text = strdup(f->text))) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
        return SQ_OK;
    }
    *shown = what;
    sq_input in; /* a regular file: a FIFO would block the open */
    sq_error e = {0};
    FILE *fp = sq_input_fopen(what, 0, &in, &e);
    if (!fp) return sq_error_set(err, e.status, "%s", sq_error_message(&e));
    char *buf = malloc(MAX_FILE + 1);
    size_t len = buf ? fread(buf, 1, MAX_FILE + 1, fp) : 0;
    int rc = !buf ? sq_error_set(err, SQ_ERR_NOMEM, "out of memory")
             : ferror(fp) ? sq_error_set(err, SQ_ERR_IO, "%s: cannot read: %s", what,
                                         strerror(errno))
             : len > MAX_FILE ? sq_error_set(err, SQ_ERR_FORMAT, "%s: larger than 1 MB", what)
             : memchr(buf, 0, len) ? sq_error_set(err, SQ_ERR_FORMAT, "%s: not a text file", what)
             : SQ_OK;
    fclose(fp);
    if (rc != SQ_OK) {
        free(buf);
        return rc;
    }
    buf[len] = '\0';
    *text = buf;
    return SQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Parsing: inih over the text, counting lines for the messages             */
/* ------------------------------------------------------------------------ */

typedef enum { V_INT, V_NUM, V_NUM0, V_STR, V_BOOL } vkind;

typedef struct key_spec {
    const char *section, *key;
    vkind kind;
    double scale;  /* a number is stored times this (GB/s -> B/s, us -> s) */
    size_t offset; /* into the target struct */
    size_t size;   /* of a string field */
} key_spec;

#define MAX_KEYS 16

typedef struct parse_ctx {
    const char *file;
    const char *next; /* the text not yet read */
    int line;         /* of the text inih handles now */
    const key_spec *keys;
    size_t nkeys;
    void *target;
    int seen[MAX_KEYS]; /* the line where each key was set; 0: not yet */
    sq_error *err;
    int failed; /* the line of the first failure the handler met; 0: none */
} parse_ctx;

static int fail(parse_ctx *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* inih's reader: the next line of the text, counted so that the handler
** knows where it is. A line longer than inih's buffer (num - 1 bytes with
** its newline) is refused here, with its number: inih would cut it and read
** the rest as a line of its own, and the error would name the wrong line. */
static char *read_line(char *str, int num, void *stream)
{
    parse_ctx *c = stream;
    if (c->failed || !*c->next || num < 3) return NULL;
    int i = 0;
    while (i < num - 1 && c->next[i]) {
        str[i] = c->next[i];
        if (c->next[i++] == '\n') break;
    }
    str[i] = '\0';
    c->next += i;
    c->line++;
    if (i == num - 1 && str[i - 1] == '\r' && *c->next == '\n') {
        c->next++; /* a CRLF line that fills the buffer: inih strips the '\r' */
    } else if (i == num - 1 && str[i - 1] != '\n' && *c->next) {
        fail(c, "%s: line %d: longer than %d characters, the most a line may hold", c->file,
             c->line, num - 2);
        return NULL;
    }
    return str;
}

/* Records the first failure; inih goes on to the end of the text, and
** every later call of the handler returns at once. */
static int fail(parse_ctx *c, const char *fmt, ...)
{
    char msg[SQ_ERROR_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->failed = c->line;
    sq_error_set(c->err, SQ_ERR_FORMAT, "%s", msg);
    return 0;
}

static int set_value(parse_ctx *c, const key_spec *k, const char *section, const char *value,
                     void *target)
{
    char *end;
    unsigned char *at = (unsigned char *)target + k->offset;
    if (k->kind == V_STR) {
        if (!*value || strlen(value) >= k->size)
            return fail(c, "%s: [%s] %s: '%s' is empty or too long (line %d)", c->file, section,
                        k->key, value, c->line);
        memcpy(at, value, strlen(value) + 1);
        return 1;
    }
    if (k->kind == V_BOOL) {
        int v = !strcmp(value, "1") || !strcmp(value, "on") || !strcmp(value, "yes") ||
                !strcmp(value, "true");
        if (!v && strcmp(value, "0") && strcmp(value, "off") && strcmp(value, "no") &&
            strcmp(value, "false"))
            return fail(c, "%s: [%s] %s: '%s' is not on or off (line %d)", c->file, section,
                        k->key, value, c->line);
        memcpy(at, &v, sizeof v);
        return 1;
    }
    errno = 0;
    double v = strtod(value, &end);
    if (end == value || *end || errno || !isfinite(v))
        return fail(c, "%s: [%s] %s: '%s' is not a number (line %d)", c->file, section, k->key,
                    value, c->line);
    if (k->kind == V_INT) {
        if (v != floor(v) || v < 1 || v > 1e9)
            return fail(c, "%s: [%s] %s: '%s' is not a positive integer (line %d)", c->file,
                        section, k->key, value, c->line);
        int iv = (int)v;
        memcpy(at, &iv, sizeof iv);
        return 1;
    }
    if (v < 0 || (k->kind == V_NUM && v == 0))
        return fail(c, "%s: [%s] %s: '%s' must be %s (line %d)", c->file, section, k->key, value,
                    k->kind == V_NUM ? "positive" : "zero or positive", c->line);
    v *= k->scale;
    memcpy(at, &v, sizeof v);
    return 1;
}

/* One key of keys[0..n) into target; seen[] keeps where each was set. */
static int take_key(parse_ctx *c, const key_spec *keys, size_t n, int *seen, void *target,
                    const char *section, const char *name, const char *value)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(keys[i].key, name)) {
            if (seen[i])
                return fail(c, "%s: [%s] %s: given twice (lines %d and %d)", c->file, section,
                            name, seen[i], c->line);
            seen[i] = c->line;
            return set_value(c, &keys[i], section, value, target);
        }
    return fail(c, "%s: [%s] %s: unknown key (line %d)", c->file, section, name, c->line);
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
    parse_ctx *c = user;
    if (c->failed) return 0;
    /* the keys of one section are consecutive in the table */
    size_t first = 0;
    while (first < c->nkeys && strcmp(c->keys[first].section, section)) first++;
    size_t last = first;
    while (last < c->nkeys && !strcmp(c->keys[last].section, section)) last++;
    if (first == c->nkeys)
        return fail(c, "%s: [%s] %s: unknown key (line %d)", c->file, section, name, c->line);
    return take_key(c, c->keys + first, last - first, c->seen + first, c->target, section, name,
                    value);
}

/* Runs inih over text with handler; SQ_OK or SQ_ERR_FORMAT. */
static int parse_text(parse_ctx *c, const char *text, ini_handler handler)
{
    c->next = text;
    c->line = 0;
    int line = ini_parse_stream(read_line, c, handler, c);
    /* inih reads on after a line it cannot parse: the first failure counts */
    if (c->failed && (!line || c->failed <= line)) return SQ_ERR_FORMAT;
    if (line)
        return sq_error_set(c->err, SQ_ERR_FORMAT,
                            "%s: line %d: not 'key = value', '[section]' or a comment", c->file,
                            line);
    return SQ_OK;
}

/* Every key of c->keys but the booleans (off when absent) must be there. */
static int check_missing(parse_ctx *c)
{
    for (size_t i = 0; i < c->nkeys; i++)
        if (!c->seen[i] && c->keys[i].kind != V_BOOL)
            return sq_error_set(c->err, SQ_ERR_FORMAT, "%s: [%s] %s: missing", c->file,
                                c->keys[i].section, c->keys[i].key);
    return SQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Platforms and models                                                     */
/* ------------------------------------------------------------------------ */

#define PF(field) offsetof(sq_cost_platform, field)
static const key_spec platform_keys[] = {
    {"platform", "name", V_STR, 1, PF(name), sizeof(((sq_cost_platform *)0)->name)},
    {"platform", "nodes", V_INT, 1, PF(nodes), 0},
    {"platform", "gpus_per_node", V_INT, 1, PF(gpus_per_node), 0},
    {"platform", "achieved_tflops", V_NUM, 1e12, PF(achieved_flops), 0},
    {"platform", "hbm_gb_s", V_NUM, 1e9, PF(hbm_bw), 0},
    {"platform", "quant_gb_s", V_NUM, 1e9, PF(quant_bw), 0},
    {"intra", "bandwidth_gb_s", V_NUM, 1e9, PF(intra_bw), 0},
    {"intra", "latency_us", V_NUM0, 1e-6, PF(intra_latency), 0},
    {"inter", "nics_per_node", V_INT, 1, PF(nics_per_node), 0},
    {"inter", "nic_gb_s", V_NUM, 1e9, PF(nic_bw), 0},
    {"inter", "efficiency", V_NUM, 1, PF(net_efficiency), 0},
    {"inter", "communicator_gb_s", V_NUM0, 1e9, PF(communicator_bw), 0},
    {"inter", "latency_us", V_NUM0, 1e-6, PF(inter_latency), 0},
};
#define N_PLATFORM_KEYS (sizeof platform_keys / sizeof *platform_keys)
enum { PLATFORM_EFFICIENCY = 10 }; /* its index above */

/* The figures' keys, in sq_cost_figure order: section.key as the file
** spells them, the [platform] ones bare. */
static const char *const figure_keys[SQ_COST_NFIGURES] = {
    "achieved_tflops", "hbm_gb_s", "quant_gb_s", "intra.bandwidth_gb_s", "intra.latency_us",
    "inter.nics_per_node", "inter.nic_gb_s", "inter.efficiency", "inter.communicator_gb_s",
    "inter.latency_us"};

const char *sq_cost_figure_key(sq_cost_figure f)
{
    return (unsigned)f < SQ_COST_NFIGURES ? figure_keys[f] : NULL;
}

int sq_cost_fitted_to(const sq_cost_platform *p, sq_cost_figure f, const char *table,
                      const char *label)
{
    if (!p || (unsigned)f >= SQ_COST_NFIGURES || !table) return 0;
    const sq_cost_source *src = &p->source[f];
    if (src->kind != SQ_COST_SRC_FITTED || strcmp(src->fitted_to, table)) return 0;
    if (!src->rows[0]) return 1; /* the whole table */
    size_t n = label ? strlen(label) : 0;
    for (const char *r = src->rows; *r;) {
        const char *end = strchr(r, ',');
        size_t len = end ? (size_t)(end - r) : strlen(r);
        if (label && len == n && !strncmp(r, label, n)) return 1;
        r += len + (end != NULL);
    }
    return 0;
}

#define MF(field) offsetof(sq_cost_model_shape, field)
static const key_spec model_keys[] = {
    {"model", "name", V_STR, 1, MF(name), sizeof(((sq_cost_model_shape *)0)->name)},
    {"model", "layers", V_INT, 1, MF(layers), 0},
    {"model", "hidden", V_INT, 1, MF(hidden), 0},
    {"model", "heads", V_INT, 1, MF(heads), 0},
    {"model", "vocab", V_INT, 1, MF(vocab), 0},
    {"model", "seq", V_INT, 1, MF(seq), 0},
};

/* A file whose values parse but do not make a cluster or a model is the
** file's fault: the validator's sentence, after the file's name. */
static int as_format(int rc, sq_error *err, const char *file)
{
    if (rc == SQ_OK) return SQ_OK;
    if (err) err->status = SQ_ERR_FORMAT;
    sq_error_prefix(err, "%s: ", file);
    return SQ_ERR_FORMAT;
}

/* One "[sources]" line: "KIND: note" or "fitted TABLE [ROW,ROW...]: note",
** KIND one of datasheet, measured, assumed, fitted. */
typedef struct pctx {
    parse_ctx base;
    int source_seen[SQ_COST_NFIGURES];
} pctx;

static int take_source(parse_ctx *c, int *seen, sq_cost_platform *p, const char *name,
                       const char *value)
{
    int f = 0;
    while (f < SQ_COST_NFIGURES && strcmp(figure_keys[f], name)) f++;
    if (f == SQ_COST_NFIGURES)
        return fail(c, "%s: [sources] %s: not a figure of the platform (line %d; the figures: "
                    "achieved_tflops, hbm_gb_s, quant_gb_s, intra.bandwidth_gb_s, "
                    "intra.latency_us, inter.nics_per_node, inter.nic_gb_s, inter.efficiency, "
                    "inter.communicator_gb_s, inter.latency_us)", c->file, name, c->line);
    if (seen[f])
        return fail(c, "%s: [sources] %s: given twice (lines %d and %d)", c->file, name, seen[f],
                    c->line);
    seen[f] = c->line;
    sq_cost_source *src = &p->source[f];
    memset(src, 0, sizeof *src);
    const char *colon = strchr(value, ':');
    char head[512];
    size_t hn = colon ? (size_t)(colon - value) : strlen(value);
    if (hn >= sizeof head) hn = sizeof head - 1;
    memcpy(head, value, hn);
    head[hn] = '\0';
    if (colon) {
        const char *note = colon + 1;
        while (*note == ' ' || *note == '\t') note++;
        snprintf(src->note, sizeof src->note, "%s", note);
    }
    char *save, *kind = strtok_r(head, " \t", &save);
    char *table = kind ? strtok_r(NULL, " \t", &save) : NULL;
    char *rows = table ? strtok_r(NULL, " \t", &save) : NULL;
    char *extra = rows ? strtok_r(NULL, " \t", &save) : NULL;
    static const char *const kinds[] = {"", "datasheet", "measured", "assumed", "fitted"};
    int k = 1;
    while (kind && k <= SQ_COST_SRC_FITTED && strcmp(kinds[k], kind)) k++;
    if (!kind || k > SQ_COST_SRC_FITTED)
        return fail(c, "%s: [sources] %s: '%s' does not begin with datasheet, measured, assumed "
                    "or fitted (line %d)", c->file, name, value, c->line);
    if (k != SQ_COST_SRC_FITTED && table)
        return fail(c, "%s: [sources] %s: '%s': only 'fitted' takes a table and rows before "
                    "the ':' (line %d)", c->file, name, value, c->line);
    if (k == SQ_COST_SRC_FITTED && (!table || extra || strlen(table) >= sizeof src->fitted_to ||
                                    (rows && strlen(rows) >= sizeof src->rows)))
        return fail(c, "%s: [sources] %s: '%s': write 'fitted TABLE: how' or 'fitted TABLE "
                    "ROW,ROW: how' (line %d)", c->file, name, value, c->line);
    src->kind = (sq_cost_source_kind)k;
    if (table) snprintf(src->fitted_to, sizeof src->fitted_to, "%s", table);
    if (rows) snprintf(src->rows, sizeof src->rows, "%s", rows);
    return 1;
}

static int on_platform_key(void *user, const char *section, const char *name, const char *value)
{
    pctx *pc = user;
    if (pc->base.failed) return 0;
    if (!strcmp(section, "sources"))
        return take_source(&pc->base, pc->source_seen, pc->base.target, name, value);
    return on_key(user, section, name, value);
}

int sq_cost_platform_read(const char *what, sq_cost_platform *p, sq_error *err)
{
    char *text;
    const char *shown;
    if (!what || !p) return sq_error_set(err, SQ_ERR_ARG, "no platform file or no platform");
    memset(p, 0, sizeof *p);
    int rc = load_text(what, SQ_COST_PLATFORM, &text, &shown, err);
    if (rc != SQ_OK) return rc;
    pctx pc = {.base = {.file = shown, .keys = platform_keys, .nkeys = N_PLATFORM_KEYS,
                        .target = p, .err = err}};
    rc = parse_text(&pc.base, text, on_platform_key);
    free(text);
    if (rc == SQ_OK) rc = check_missing(&pc.base);
    if (rc == SQ_OK && p->net_efficiency > 1)
        rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: [inter] efficiency: %g is more than 1 (line %d)",
                          shown, p->net_efficiency, pc.base.seen[PLATFORM_EFFICIENCY]);
    if (rc == SQ_OK) rc = as_format(sq_cost_platform_validate(p, err), err, shown);
    return rc;
}

int sq_cost_model_read(const char *what, sq_cost_model_shape *m, sq_error *err)
{
    char *text;
    const char *shown;
    if (!what || !m) return sq_error_set(err, SQ_ERR_ARG, "no model file or no model");
    memset(m, 0, sizeof *m);
    int rc = load_text(what, SQ_COST_MODEL, &text, &shown, err);
    if (rc != SQ_OK) return rc;
    parse_ctx c = {.file = shown, .keys = model_keys,
                   .nkeys = sizeof model_keys / sizeof *model_keys, .target = m, .err = err};
    rc = parse_text(&c, text, on_key);
    free(text);
    if (rc == SQ_OK) rc = check_missing(&c);
    if (rc == SQ_OK) rc = as_format(sq_cost_model_shape_validate(m, err), err, shown);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Validation tables                                                        */
/* ------------------------------------------------------------------------ */

#define VF(field) offsetof(sq_cost_validation, field)
static const key_spec validate_keys[] = {
    {"validate", "platform", V_STR, 1, VF(platform), sizeof(((sq_cost_validation *)0)->platform)},
    {"validate", "scheme", V_STR, 1, VF(scheme), sizeof(((sq_cost_validation *)0)->scheme)},
    {"validate", "gpus", V_INT, 1, VF(gpus), 0},
    {"validate", "micro_batch", V_INT, 1, VF(micro_batch), 0},
    {"validate", "accum", V_INT, 1, VF(accum), 0},
    {"validate", "overlap", V_BOOL, 1, VF(overlap), 0},
    {"validate", "tolerance", V_NUM, 1, VF(tolerance), 0},
};

/* The keys of a "[row LABEL]" section; model, tp, pp and speedup are
** required, the published TFLOP/s optional. */
#define RF(field) offsetof(sq_cost_validation_row, field)
static const key_spec row_keys[] = {
    {"", "model", V_STR, 1, RF(model), sizeof(((sq_cost_validation_row *)0)->model)},
    {"", "tp", V_INT, 1, RF(tp), 0},
    {"", "pp", V_INT, 1, RF(pp), 0},
    {"", "baseline_tflops", V_NUM, 1, RF(baseline_tflops), 0},
    {"", "scheme_tflops", V_NUM, 1, RF(scheme_tflops), 0},
    {"", "speedup", V_NUM, 1, RF(speedup), 0},
};
#define NROWKEYS (sizeof row_keys / sizeof *row_keys)

typedef struct vctx {
    parse_ctx base;
    sq_cost_validation *val;
    int row_seen[SQ_COST_VALIDATION_MAX_ROWS][NROWKEYS];
} vctx;

static int on_validate_key(void *user, const char *section, const char *name, const char *value)
{
    vctx *v = user;
    parse_ctx *c = &v->base;
    if (c->failed) return 0;
    if (strncmp(section, "row ", 4)) return on_key(user, section, name, value);
    sq_cost_validation *val = v->val;
    int r = 0;
    while (r < val->nrows && strcmp(val->rows[r].label, section + 4)) r++;
    if (r == val->nrows) {
        if (r == SQ_COST_VALIDATION_MAX_ROWS || strlen(section + 4) >= sizeof val->rows[r].label ||
            !section[4])
            return fail(c, "%s: [%s]: too many rows, or a label that is empty or longer than 63 "
                        "characters (line %d)", c->file, section, c->line);
        sq_cost_validation_row *row = &val->rows[val->nrows++];
        memset(row, 0, sizeof *row);
        strcpy(row->label, section + 4);
        row->baseline_tflops = row->scheme_tflops = row->speedup = NAN;
    }
    return take_key(c, row_keys, NROWKEYS, v->row_seen[r], &val->rows[r], section, name, value);
}

int sq_cost_validation_read(const char *what, sq_cost_validation *v, sq_error *err)
{
    char *text;
    const char *shown;
    if (!what || !v) return sq_error_set(err, SQ_ERR_ARG, "no validation file or no table");
    memset(v, 0, sizeof *v);
    int rc = load_text(what, SQ_COST_VALIDATION, &text, &shown, err);
    if (rc != SQ_OK) return rc;
    vctx *c = calloc(1, sizeof *c);
    if (!c) {
        free(text);
        return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    }
    c->base = (parse_ctx){.file = shown, .keys = validate_keys,
                          .nkeys = sizeof validate_keys / sizeof *validate_keys, .target = v,
                          .err = err};
    c->val = v;
    rc = parse_text(&c->base, text, on_validate_key);
    free(text);
    if (rc == SQ_OK) rc = check_missing(&c->base);
    for (int r = 0; rc == SQ_OK && r < v->nrows; r++) {
        const int *seen = c->row_seen[r];
        const char *miss = !seen[0] ? "model" : !seen[1] ? "tp" : !seen[2] ? "pp"
                           : !seen[5] ? "speedup" : NULL;
        if (miss)
            rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: [row %s] %s: missing", shown,
                              v->rows[r].label, miss);
    }
    if (rc == SQ_OK && v->nrows == 0)
        rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: no [row LABEL] sections", shown);
    free(c);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Measurements (calibration input)                                         */
/* ------------------------------------------------------------------------ */

#define MR(field) offsetof(sq_cost_measured, field)
static const key_spec measured_keys[] = {
    {"", "model", V_STR, 1, MR(model), sizeof(((sq_cost_measured *)0)->model)},
    {"", "tp", V_INT, 1, MR(tp), 0},
    {"", "pp", V_INT, 1, MR(pp), 0},
    {"", "gpus", V_INT, 1, MR(gpus), 0},
    {"", "micro_batch", V_INT, 1, MR(micro_batch), 0},
    {"", "global_batch", V_INT, 1, MR(global_batch), 0},
    {"", "iteration_ms", V_NUM, 1e-3, MR(iteration_s), 0},
    {"", "tflops", V_NUM, 1, MR(tflops), 0},
    {"", "overlap", V_BOOL, 1, MR(overlap), 0},
};
#define NMKEYS (sizeof measured_keys / sizeof *measured_keys)

static const key_spec measurements_keys[] = {
    {"measurements", "table", V_STR, 1, offsetof(sq_cost_measurements, table),
     sizeof(((sq_cost_measurements *)0)->table)},
};

typedef struct mctx {
    parse_ctx base;
    sq_cost_measurements *ms;
    int row_seen[SQ_COST_VALIDATION_MAX_ROWS][NMKEYS];
} mctx;

static int on_measured_key(void *user, const char *section, const char *name, const char *value)
{
    mctx *v = user;
    parse_ctx *c = &v->base;
    if (c->failed) return 0;
    if (strncmp(section, "row ", 4)) return on_key(user, section, name, value);
    sq_cost_measurements *ms = v->ms;
    int r = 0;
    while (r < ms->nrows && strcmp(ms->rows[r].label, section + 4)) r++;
    if (r == ms->nrows) {
        if (r == SQ_COST_VALIDATION_MAX_ROWS || strlen(section + 4) >= sizeof ms->rows[r].label ||
            !section[4] || strpbrk(section + 4, " ,:\t"))
            return fail(c, "%s: [%s]: too many rows, or a label that is empty, longer than 63 "
                        "characters or holds a space, a comma or a colon (line %d)", c->file,
                        section, c->line);
        sq_cost_measured *row = &ms->rows[ms->nrows++];
        memset(row, 0, sizeof *row);
        strcpy(row->label, section + 4);
        row->iteration_s = row->tflops = NAN;
    }
    return take_key(c, measured_keys, NMKEYS, v->row_seen[r], &ms->rows[r], section, name, value);
}

int sq_cost_measurements_read(const char *path, sq_cost_measurements *m, sq_error *err)
{
    char *text;
    const char *shown;
    if (!path || !m) return sq_error_set(err, SQ_ERR_ARG, "no measurements file or no table");
    memset(m, 0, sizeof *m);
    /* always a file: a bare name is one in the current directory */
    int rc = strchr(path, '/') || (strlen(path) > 4 && !strcmp(path + strlen(path) - 4, ".ini"))
                 ? load_text(path, SQ_COST_VALIDATION, &text, &shown, err)
                 : sq_error_set(err, SQ_ERR_ARG, "%s: name the measurements file by a path "
                                "(./%s) or with .ini at its end", path, path);
    if (rc != SQ_OK) return rc;
    mctx *c = calloc(1, sizeof *c);
    if (!c) {
        free(text);
        return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    }
    c->base = (parse_ctx){.file = shown, .keys = measurements_keys, .nkeys = 1, .target = m,
                          .err = err};
    c->ms = m;
    rc = parse_text(&c->base, text, on_measured_key);
    free(text);
    for (int r = 0; rc == SQ_OK && r < m->nrows; r++) {
        const int *seen = c->row_seen[r];
        const sq_cost_measured *row = &m->rows[r];
        const char *miss = NULL;
        for (size_t k = 0; k < 6 && !miss; k++)
            if (!seen[k]) miss = measured_keys[k].key;
        if (miss)
            rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: [row %s] %s: missing", shown, row->label,
                              miss);
        else if (!seen[6] == !seen[7])
            rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: [row %s] iteration_ms, tflops: give "
                              "exactly one (the measured time of one iteration, or Megatron's "
                              "TFLOP/s per GPU)", shown, row->label);
        else if (row->gpus % (row->tp * row->pp))
            rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: [row %s] gpus: %d is not a multiple of "
                              "tp x pp = %d", shown, row->label, row->gpus, row->tp * row->pp);
        else {
            int dp = row->gpus / (row->tp * row->pp);
            if (row->global_batch % ((long long)row->micro_batch * dp))
                rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: [row %s] global_batch: %d is not a "
                                  "multiple of micro_batch x data-parallel degree = %d x %d",
                                  shown, row->label, row->global_batch, row->micro_batch, dp);
        }
    }
    if (rc == SQ_OK && m->nrows == 0)
        rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: no [row LABEL] sections", shown);
    free(c);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Writing a platform                                                       */
/* ------------------------------------------------------------------------ */

/* inih's line buffer (INI_MAX_LINE, 200 by default) less the newline */
#define INI_LINE 199

typedef struct tbuf {
    char *s;
    size_t len, cap;
    int nomem;
} tbuf;

static void tput(tbuf *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void tput(tbuf *t, const char *fmt, ...)
{
    if (t->nomem) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->nomem = 1;
            return;
        }
        if (t->s && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = (t->cap + (size_t)n + 1) * 2;
        char *s = realloc(t->s, cap);
        if (!s) {
            t->nomem = 1;
            return;
        }
        t->s = s, t->cap = cap;
    }
}

int sq_cost_platform_format(const sq_cost_platform *p, const char *comment, char **text,
                            sq_error *err)
{
    *text = NULL;
    int rc = sq_cost_platform_validate(p, err);
    if (rc != SQ_OK) return rc;
    tbuf t = {0};
    for (const char *c = comment; c && *c;) {
        const char *nl = strchr(c, '\n');
        int n = nl ? (int)(nl - c) : (int)strlen(c);
        tput(&t, "# %.*s\n", n, c);
        c += n + (nl != NULL);
    }
    /* %.10g keeps what a fit found to far better than its error */
    tput(&t, "\n[platform]\nname = %s\nnodes = %d\ngpus_per_node = %d\nachieved_tflops = %.10g\n"
             "hbm_gb_s = %.10g\nquant_gb_s = %.10g\n\n[intra]\nbandwidth_gb_s = %.10g\n"
             "latency_us = %.10g\n\n[inter]\nnics_per_node = %d\nnic_gb_s = %.10g\n"
             "efficiency = %.10g\ncommunicator_gb_s = %.10g\nlatency_us = %.10g\n",
         p->name, p->nodes, p->gpus_per_node, p->achieved_flops / 1e12, p->hbm_bw / 1e9,
         p->quant_bw / 1e9, p->intra_bw / 1e9, p->intra_latency * 1e6, p->nics_per_node,
         p->nic_bw / 1e9, p->net_efficiency, p->communicator_bw / 1e9, p->inter_latency * 1e6);
    static const char *const kinds[] = {"", "datasheet", "measured", "assumed", "fitted"};
    int any = 0;
    for (int f = 0; f < SQ_COST_NFIGURES; f++) {
        const sq_cost_source *src = &p->source[f];
        if (src->kind == SQ_COST_SRC_UNSTATED) continue;
        if (!any++) tput(&t, "\n[sources]\n");
        /* the INI reader takes lines of INI_LINE - 1 bytes: a note that does
        ** not fit is cut, the kind, table and rows must fit */
        char line[INI_LINE];
        int n = snprintf(line, sizeof line, "%s = %s", figure_keys[f], kinds[src->kind]);
        if (src->kind == SQ_COST_SRC_FITTED)
            n += snprintf(line + n, sizeof line - (size_t)n, " %s%s%s", src->fitted_to,
                          src->rows[0] ? " " : "", src->rows);
        if (n >= (int)sizeof line - 1) {
            free(t.s);
            return sq_error_set(err, SQ_ERR_ARG, "[sources] %s: the table and rows it was fitted "
                                "to do not fit on one line of %d characters", figure_keys[f],
                                INI_LINE - 2);
        }
        if (src->note[0]) snprintf(line + n, sizeof line - (size_t)n, ": %s", src->note);
        tput(&t, "%s\n", line);
    }
    if (t.nomem) {
        free(t.s);
        return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    }
    *text = t.s;
    return SQ_OK;
}
