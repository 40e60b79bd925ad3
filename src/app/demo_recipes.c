/*
** demo_recipes.c -- the recipes of `shardq demo` (experiments/demo/, built
** into the binary): the one of this configuration filled in, written into
** the output directory, where the user finds what ran, and loaded.
**
** A recipe is a file a user can copy and edit. Four names in it stand for
** what only the demo knows: @TRACE@ (the trace its capture wrote), @CORPUS@
** (its copy of the corpus), @STEPS@ and @EVERY@; lines that begin with ";;"
** say so, and are left out of the copy written.
*/
#define _DEFAULT_SOURCE /* PATH_MAX */
#include "app/demo_files.h"
#include "app/demo_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The built-in text of experiments/demo/NAME.ini (or NAME-tiny.ini). */
static const char *recipe_text(const char *name, int tiny)
{
    char path[128];
    snprintf(path, sizeof path, "experiments/demo/%s%s.ini", name, tiny ? "-tiny" : "");
    for (const sq_app_demo_file *f = sq_app_demo_files; f->name; f++)
        if (!strcmp(f->name, path)) return f->text;
    return NULL;
}

/* What @NAME@ at p stands for (its length into *n), or NULL. */
static const char *value_at(const sq_app_demo *d, const char *p, size_t *n)
{
    static const char *const names[] = {"@TRACE@", "@CORPUS@", "@STEPS@", "@EVERY@"};
    static char steps[32];
    snprintf(steps, sizeof steps, "%d", d->steps);
    const char *values[] = {d->trace_name, d->corpus_name, steps, d->every};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++)
        if (!strncmp(p, names[k], *n = strlen(names[k]))) return values[k];
    return NULL;
}

/* text with its ";;" lines left out and its names filled in (malloc'd,
** *len bytes). The values are the demo's own names and numbers: none
** holds what the recipe reader would take for a comment or a line break. */
static char *fill_in(const sq_app_demo *d, const char *text, size_t *len)
{
    size_t cap = strlen(text) + 4 * sizeof d->corpus_name + 1, at = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    for (const char *line = text; *line;) {
        size_t n = strcspn(line, "\n");
        const char *end = line + n + (line[n] == '\n');
        if (strncmp(line, ";;", 2) != 0)
            for (const char *p = line; p < end;) {
                size_t k;
                const char *v = *p == '@' ? value_at(d, p, &k) : NULL;
                if (v && at + strlen(v) < cap) {
                    at += (size_t)sprintf(out + at, "%s", v);
                    p += k;
                } else if (at + 1 < cap) {
                    out[at++] = *p++;
                } else {
                    p++;
                }
            }
        line = end;
    }
    out[at] = '\0';
    *len = at;
    return out;
}

int sq_app_demo_recipe(const sq_app_demo *d, const char *name, const char *file, sq_sweep *sw,
                       sq_error *err)
{
    const char *text = recipe_text(name, d->tiny);
    if (!text)
        return sq_error_set(err, SQ_ERR_NOTFOUND, "experiments/demo/%s%s.ini: not built into "
                            "this shardq", name, d->tiny ? "-tiny" : "");
    char path[PATH_MAX + 32];
    size_t len;
    snprintf(path, sizeof path, "%s/%s", d->out, file);
    char *filled = fill_in(d, text, &len);
    if (!filled) return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
    /* written first, so that DIR says what ran even when it fails; read
    ** from memory as if it were that file (its trace and corpus lie beside) */
    int rc = sq_app_demo_write(path, filled, len, err);
    if (!rc) rc = sq_sweep_load_text(path, filled, len, NULL, sw, err);
    free(filled);
    return rc;
}
