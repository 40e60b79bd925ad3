/*
** modelfile.c -- reading the cost model's platform, model and validation
** files (modelfile.h). Every key is known and every number checked, so a
** typo in a platform file is an error naming the file and the key rather
** than a silently default-valued cluster.
*/
#include "modelfile.h"

#include "embedded.h"
#include "shardq.h"
#include "trace/input.h"
#include "trace/wfile.h"

#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const cli_embedded *cli_embedded_find(const cli_embedded *files, const char *dir, const char *name)
{
    size_t nd = strlen(dir), nn = strlen(name);
    for (const cli_embedded *f = files; f->name; f++)
        if (!strncmp(f->name, dir, nd) && !strncmp(f->name + nd, name, nn) &&
            !strcmp(f->name + nd + nn, ".ini"))
            return f;
    return NULL;
}

/* The text of `what` (a path, or a built-in name under dir): *text is
** malloc'd for a file, *shown the name to put in messages. */
static int load_text(const char *what, const char *dir, const char *kind, char **text,
                     const char **shown, char *err, size_t errlen)
{
    size_t n = strlen(what);
    int is_path = strchr(what, '/') || (n > 4 && !strcmp(what + n - 4, ".ini"));
    if (!is_path) {
        const cli_embedded *f = cli_embedded_find(cli_model_files, dir, what);
        if (!f) {
            sq_set_err(err, errlen, "no built-in %s '%s' (shardq model --list shows them; a "
                       "file is named by a path such as ./%s.ini)", kind, what, what);
            return -1;
        }
        *text = strdup(f->text);
        *shown = f->name;
    } else {
        sq_input in; /* a regular file: a FIFO would block the open */
        sq_error te = {0};
        FILE *fp = sq_input_fopen(what, 0, &in, &te);
        if (!fp) sq_set_err(err, errlen, "%s", sq_error_message(&te));
        if (!fp) return -1;
        size_t cap = 4096, len = 0;
        char *buf = malloc(cap);
        for (;;) {
            if (!buf) break;
            if (len + 1024 > cap) {
                if (cap > (1u << 20)) break; /* a platform file is a page, not a megabyte */
                char *nb = realloc(buf, cap *= 2);
                if (!nb) { free(buf); buf = NULL; break; }
                buf = nb;
            }
            size_t got = fread(buf + len, 1, cap - len - 1, fp);
            len += got;
            if (got == 0) break;
        }
        int bad = ferror(fp) || !buf || len + 1024 > cap;
        fclose(fp);
        if (bad) {
            free(buf);
            sq_set_err(err, errlen, "%s: cannot read (or larger than 1 MB)", what);
            return -1;
        }
        buf[len] = 0;
        if (memchr(buf, 0, len)) {
            free(buf);
            sq_set_err(err, errlen, "%s: not a text file", what);
            return -1;
        }
        *text = buf;
        *shown = what;
    }
    if (!*text) {
        sq_set_err(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Keys                                                                     */
/* ------------------------------------------------------------------------ */

typedef enum { V_INT, V_NUM, V_NUM0, V_STR, V_BOOL } vkind;

typedef struct key_spec {
    const char *section, *key;
    vkind kind;
    double scale;  /* a number is stored times this (GB/s -> B/s, us -> s) */
    size_t offset; /* into the target struct */
    size_t size;   /* of a string field */
} key_spec;

typedef struct parse_ctx {
    const char *file;
    const key_spec *keys;
    size_t nkeys;
    void *target;
    unsigned char seen[64];
    char err[512];
    /* validation tables: rows are sections "row LABEL" */
    modelfile_validation *val;
} parse_ctx;

static int set_value(parse_ctx *c, const key_spec *k, const char *section, const char *value,
                     void *target)
{
    char *end;
    unsigned char *at = (unsigned char *)target + k->offset;
    if (k->kind == V_STR) {
        if (!*value || strlen(value) >= k->size) {
            snprintf(c->err, sizeof c->err, "%s: [%s] %s: '%s' is empty or too long", c->file,
                     section, k->key, value);
            return 0;
        }
        memcpy(at, value, strlen(value) + 1);
        return 1;
    }
    if (k->kind == V_BOOL) {
        int v = !strcmp(value, "1") || !strcmp(value, "on") || !strcmp(value, "yes") ||
                !strcmp(value, "true");
        if (!v && strcmp(value, "0") && strcmp(value, "off") && strcmp(value, "no") &&
            strcmp(value, "false")) {
            snprintf(c->err, sizeof c->err, "%s: [%s] %s: '%s' is not on or off", c->file,
                     section, k->key, value);
            return 0;
        }
        memcpy(at, &v, sizeof v);
        return 1;
    }
    errno = 0;
    double v = strtod(value, &end);
    if (end == value || *end || errno || !isfinite(v)) {
        snprintf(c->err, sizeof c->err, "%s: [%s] %s: '%s' is not a number", c->file, section,
                 k->key, value);
        return 0;
    }
    if (k->kind == V_INT) {
        if (v != floor(v) || v < 1 || v > 1e9) {
            snprintf(c->err, sizeof c->err, "%s: [%s] %s: '%s' is not a positive integer",
                     c->file, section, k->key, value);
            return 0;
        }
        int iv = (int)v;
        memcpy(at, &iv, sizeof iv);
        return 1;
    }
    if (v < 0 || (k->kind == V_NUM && v == 0)) {
        snprintf(c->err, sizeof c->err, "%s: [%s] %s: '%s' must be %s", c->file, section,
                 k->key, value, k->kind == V_NUM ? "positive" : "zero or positive");
        return 0;
    }
    v *= k->scale;
    memcpy(at, &v, sizeof v);
    return 1;
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
    parse_ctx *c = user;
    if (c->err[0]) return 0;
    for (size_t i = 0; i < c->nkeys; i++)
        if (!strcmp(c->keys[i].section, section) && !strcmp(c->keys[i].key, name)) {
            if (c->seen[i]) {
                snprintf(c->err, sizeof c->err, "%s: [%s] %s: given twice", c->file, section,
                         name);
                return 0;
            }
            c->seen[i] = 1;
            return set_value(c, &c->keys[i], section, value, c->target);
        }
    snprintf(c->err, sizeof c->err, "%s: [%s] %s: unknown key", c->file, section, name);
    return 0;
}

static int parse(parse_ctx *c, const char *text, char *err, size_t errlen)
{
    int line = ini_parse_string(text, on_key, c);
    if (c->err[0]) {
        sq_set_err(err, errlen, "%s", c->err);
        return -1;
    }
    if (line) {
        sq_set_err(err, errlen, "%s: line %d: not 'key = value', '[section]' or a comment", c->file,
                   line);
        return -1;
    }
    for (size_t i = 0; i < c->nkeys; i++)
        if (!c->seen[i] && c->keys[i].kind != V_BOOL) {
            sq_set_err(err, errlen, "%s: [%s] %s: missing", c->file, c->keys[i].section,
                       c->keys[i].key);
            return -1;
        }
    return 0;
}

#define PF(field) offsetof(sq_platform, field)
static const key_spec platform_keys[] = {
    {"platform", "name", V_STR, 1, PF(name), sizeof(((sq_platform *)0)->name)},
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

#define MF(field) offsetof(sq_model_shape, field)
static const key_spec model_keys[] = {
    {"model", "name", V_STR, 1, MF(name), sizeof(((sq_model_shape *)0)->name)},
    {"model", "layers", V_INT, 1, MF(layers), 0},
    {"model", "hidden", V_INT, 1, MF(hidden), 0},
    {"model", "heads", V_INT, 1, MF(heads), 0},
    {"model", "vocab", V_INT, 1, MF(vocab), 0},
    {"model", "seq", V_INT, 1, MF(seq), 0},
};

int modelfile_platform(const char *what, sq_platform *p, char *err, size_t errlen)
{
    char *text;
    const char *shown;
    memset(p, 0, sizeof *p);
    if (load_text(what, "experiments/platforms/", "platform", &text, &shown, err, errlen))
        return -1;
    parse_ctx c = {.file = shown, .keys = platform_keys,
                   .nkeys = sizeof platform_keys / sizeof *platform_keys, .target = p};
    int rc = parse(&c, text, err, errlen);
    free(text);
    if (rc == 0 && p->net_efficiency > 1) {
        sq_set_err(err, errlen, "%s: [inter] efficiency: %g is more than 1", shown,
                   p->net_efficiency);
        rc = -1;
    }
    if (rc == 0 && sq_platform_validate(p, err, errlen)) rc = -1;
    return rc;
}

int modelfile_model(const char *what, sq_model_shape *m, char *err, size_t errlen)
{
    char *text;
    const char *shown;
    memset(m, 0, sizeof *m);
    if (load_text(what, "experiments/models/", "model", &text, &shown, err, errlen)) return -1;
    parse_ctx c = {.file = shown, .keys = model_keys,
                   .nkeys = sizeof model_keys / sizeof *model_keys, .target = m};
    int rc = parse(&c, text, err, errlen);
    free(text);
    if (rc == 0 && sq_model_shape_validate(m, err, errlen)) rc = -1;
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Validation tables                                                        */
/* ------------------------------------------------------------------------ */

#define VF(field) offsetof(modelfile_validation, field)
static const key_spec validate_keys[] = {
    {"validate", "platform", V_STR, 1, VF(platform), sizeof(((modelfile_validation *)0)->platform)},
    {"validate", "scheme", V_STR, 1, VF(scheme), sizeof(((modelfile_validation *)0)->scheme)},
    {"validate", "gpus", V_INT, 1, VF(gpus), 0},
    {"validate", "micro_batch", V_INT, 1, VF(micro_batch), 0},
    {"validate", "accum", V_INT, 1, VF(accum), 0},
    {"validate", "overlap", V_BOOL, 1, VF(overlap), 0},
    {"validate", "tolerance", V_NUM, 1, VF(tolerance), 0},
};

#define RF(field) offsetof(modelfile_row, field)
static const key_spec row_keys[] = {
    {"", "model", V_STR, 1, RF(model), sizeof(((modelfile_row *)0)->model)},
    {"", "tp", V_INT, 1, RF(tp), 0},
    {"", "pp", V_INT, 1, RF(pp), 0},
    {"", "baseline_tflops", V_NUM, 1, RF(baseline_tflops), 0},
    {"", "scheme_tflops", V_NUM, 1, RF(scheme_tflops), 0},
    {"", "speedup", V_NUM, 1, RF(speedup), 0},
};
#define NROWKEYS (sizeof row_keys / sizeof *row_keys)

typedef struct vctx {
    parse_ctx base;
    unsigned char row_seen[MODELFILE_MAX_ROWS][NROWKEYS];
} vctx;

static int on_validate_key(void *user, const char *section, const char *name, const char *value)
{
    vctx *v = user;
    parse_ctx *c = &v->base;
    if (c->err[0]) return 0;
    if (strncmp(section, "row ", 4)) return on_key(user, section, name, value);
    modelfile_validation *val = c->val;
    int r = 0;
    while (r < val->nrows && strcmp(val->rows[r].label, section + 4)) r++;
    if (r == val->nrows) {
        if (r == MODELFILE_MAX_ROWS || strlen(section + 4) >= sizeof val->rows[r].label ||
            !section[4]) {
            snprintf(c->err, sizeof c->err, "%s: [%s]: too many rows, or a label that is empty "
                     "or longer than 63 characters", c->file, section);
            return 0;
        }
        modelfile_row *row = &val->rows[val->nrows++];
        memset(row, 0, sizeof *row);
        strcpy(row->label, section + 4);
        row->baseline_tflops = row->scheme_tflops = row->speedup = NAN;
    }
    for (size_t i = 0; i < NROWKEYS; i++)
        if (!strcmp(row_keys[i].key, name)) {
            if (v->row_seen[r][i]++) {
                snprintf(c->err, sizeof c->err, "%s: [%s] %s: given twice", c->file, section, name);
                return 0;
            }
            return set_value(c, &row_keys[i], section, value, &val->rows[r]);
        }
    snprintf(c->err, sizeof c->err, "%s: [%s] %s: unknown key", c->file, section, name);
    return 0;
}

int modelfile_validation_read(const char *path, modelfile_validation *v, char *err, size_t errlen)
{
    char *text;
    const char *shown;
    memset(v, 0, sizeof *v);
    if (load_text(path, "experiments/validation/", "validation table", &text, &shown, err, errlen))
        return -1;
    vctx *c = calloc(1, sizeof *c);
    if (!c) {
        free(text);
        sq_set_err(err, errlen, "out of memory");
        return -1;
    }
    c->base = (parse_ctx){.file = shown, .keys = validate_keys,
                          .nkeys = sizeof validate_keys / sizeof *validate_keys, .target = v,
                          .val = v};
    int line = ini_parse_string(text, on_validate_key, c);
    free(text);
    int rc = 0;
    if (c->base.err[0]) {
        sq_set_err(err, errlen, "%s", c->base.err);
        rc = -1;
    } else if (line) {
        sq_set_err(err, errlen, "%s: line %d: not 'key = value', '[section]' or a comment", shown,
                   line);
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < c->base.nkeys; i++)
        if (!c->base.seen[i] && validate_keys[i].kind != V_BOOL) {
            sq_set_err(err, errlen, "%s: [validate] %s: missing", shown, validate_keys[i].key);
            rc = -1;
        }
    for (int r = 0; rc == 0 && r < v->nrows; r++) {
        const modelfile_row *row = &v->rows[r];
        const char *miss = !c->row_seen[r][0] ? "model" : !c->row_seen[r][1] ? "tp"
                           : !c->row_seen[r][2] ? "pp" : !c->row_seen[r][5] ? "speedup" : NULL;
        if (miss) {
            sq_set_err(err, errlen, "%s: [row %s] %s: missing", shown, row->label, miss);
            rc = -1;
        }
    }
    if (rc == 0 && v->nrows == 0) {
        sq_set_err(err, errlen, "%s: no [row LABEL] sections", shown);
        rc = -1;
    }
    free(c);
    return rc;
}

void modelfile_list(void)
{
    static const char *const dirs[] = {"experiments/platforms/", "experiments/models/"};
    for (int d = 0; d < 2; d++) {
        printf("%s\n", d == 0 ? "platforms:" : "models:");
        size_t nd = strlen(dirs[d]);
        for (const cli_embedded *f = cli_model_files; f->name; f++) {
            if (strncmp(f->name, dirs[d], nd)) continue;
            char err[256], name[128];
            snprintf(name, sizeof name, "%.*s", (int)(strlen(f->name) - nd - 4), f->name + nd);
            sq_platform p;
            sq_model_shape m;
            if (d == 0 && modelfile_platform(name, &p, err, sizeof err) == 0)
                printf("  %-20s %d GPUs per node, %d nodes; %g TFLOP/s achieved; NVLink "
                       "%g GB/s; %d x %g GB/s network per node\n", name, p.gpus_per_node,
                       p.nodes, p.achieved_flops / 1e12, p.intra_bw / 1e9, p.nics_per_node,
                       p.nic_bw / 1e9);
            else if (d == 1 && modelfile_model(name, &m, err, sizeof err) == 0)
                printf("  %-20s %-9s %d layers, hidden %d, %d heads, vocabulary %d, sequence "
                       "%d (%.3g parameters)\n", name, m.name, m.layers, m.hidden, m.heads,
                       m.vocab, m.seq, (double)sq_model_params(&m, 1));
        }
    }
}
