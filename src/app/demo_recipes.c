/*
** demo_recipes.c -- the recipes of `shardq demo` (experiments/demo/, built
** into the binary): the one of this configuration filled in, written into
** the output directory, where the user finds what ran, and loaded.
**
** A recipe is a file a user can copy and edit. Four names in it stand for
** what only the demo knows: @TRACE@ (the trace its capture wrote), @CORPUS@
** (its copy of the corpus), @STEPS@ and @EVERY@; lines that begin with ";;"
** say so, and are left out of the copy written. Phases 2 and 3 run them
** through the sweep's process pool.
*/
#define _DEFAULT_SOURCE /* PATH_MAX */
#include "app/demo_files.h"
#include "app/demo_internal.h"
#include "shardq/store.h"
#include "store/summary_queries.h"

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

/* ------------------------------------------------------------------------ */
/* Phases 2 and 3: the sweeps                                               */
/* ------------------------------------------------------------------------ */

/* The done runs of every configuration of sw, into *ids (and d->all): a
** phase is done only when all of them are. */
static int recipe_runs(sq_app_demo *d, const sq_sweep *sw, sq_app_ids *ids, sq_error *err)
{
    sq_store *s;
    int rc = sq_store_open(d->db, SQ_STORE_BUSY_MS, 0, &s, err);
    if (rc) return rc;
    size_t missing = 0;
    for (size_t i = 0; i < sw->nruns && !rc; i++) {
        int64_t id;
        rc = sq_store_done_run_by_key(s, sw->runs[i].key, &id, err);
        if (!rc && id <= 0) missing++;
        else if (!rc) rc = sq_app_demo_keep(d, ids, id, err);
    }
    sq_store_close(s);
    if (!rc && missing)
        rc = sq_error_set(err, SQ_ERR_NOTFOUND, "%s: %zu of its %zu runs are not done in %s",
                          sw->path, missing, sw->nruns, d->db);
    return rc;
}

/* Recipe name, written into OUT as file, run through the sweep's pool
** (in this process: the demo's sweeps are its own, even under an MPI
** launcher), its runs added to ids. */
static int run_recipe(sq_app_demo *d, const char *name, const char *file, sq_app_ids *ids,
                      sq_error *err)
{
    sq_sweep sw;
    int rc = sq_app_demo_recipe(d, name, file, &sw, err);
    if (rc) return rc;
    fflush(stdout);
    sq_sweep_pool_opts o = {.db = d->db, .stale_after = -1, .ctx = d->ui ? d->ui->ctx : NULL,
                            .event = d->ui ? d->ui->pool : NULL};
    sq_sweep_pool_counts n;
    rc = sq_sweep_pool_run(&sw, &o, &n, err);
    /* the failures were said as they came (ui->pool) */
    if (!rc && n.done < sw.nruns) rc = sq_error_set(err, SQ_ERR_IO, "%s", "");
    if (!rc) rc = recipe_runs(d, &sw, ids, err);
    sq_sweep_free(&sw);
    return rc;
}

int sq_app_demo_replays(sq_app_demo *d, sq_error *err)
{
    sq_app_demo_phase(d, 2, "sweeping bits x group sizes x Hadamard, and every preset over 3 "
                            "seeds, on the trace");
    return run_recipe(d, "replays", "demo-replay.ini", &d->replays, err);
}

/* The main presets, then the baseline and sdp4bit again under seeds 2 and
** 3, so that the convergence line compares their difference with the
** spread of seeds (seed 1 is the capture run and the main sweep's). Two
** presets, not all: each run is a whole training, the demo's largest cost. */
int sq_app_demo_training(sq_app_demo *d, sq_error *err)
{
    sq_app_demo_phase(d, 3, "training the same model under the main presets (same data, same "
                            "seed)");
    int rc = run_recipe(d, "train", "demo-train.ini", &d->trains, err);
    if (rc) return rc;
    sq_app_demo_say(d, SQ_APP_SAY_OUT,
                    "\nthe baseline and sdp4bit under seeds 2 and 3, for the seeds' spread:");
    return run_recipe(d, "seeds", "demo-seeds.ini", &d->trains, err);
}
