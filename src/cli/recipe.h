/*
** recipe.h -- the INI recipes of `shardq sweep` (README, "Sweeps").
**
**   [sweep]                  name, jobs, and defaults for every grid
**   name = grad-bits
**   trace = traces/run1      relative to the recipe's directory
**   seeds = 1..3
**
**   [grid gradients]         one grid: the product of every list in it
**   presets = sdp4bit
**   paths = grad
**   grad.bits = 2..8
**   grad.group = 32, 128, 512
**
** Keys: trace, workers, seeds, presets, device, paths (grad, weight or
** both), steps, and any scheme knob; a value is a comma-separated list, and
** A..B is the integers from A to B.
**
** With `command = train` in [sweep], each configuration is a `shardq train`
** instead: no trace nor paths, but corpus and every training option of
** `shardq train --help` (layers, channels, lr, eval-every, ...) as keys. A grid's keys override the [sweep]
** section's. Without [grid] sections the [sweep] section is the one grid.
** The runs come out in a fixed order: grid by grid, keys in file order,
** the last key varying fastest. A list may go on over indented lines.
**
** Refused with the file and line, where inih would let them pass: a line
** longer than inih's buffer (which it would cut), a key given twice in a
** section (or under both its names, seed and seeds), a [section] given
** twice, a grid without keys or without one valid combination, an empty
** value, a trace, corpus, preset, device or name that starts with '-' (a
** child would read it as an option), and a grid of more than a million
** configurations, counted before anything is expanded.
*/
#ifndef SQ_RECIPE_H
#define SQ_RECIPE_H

#include "world/world.h"

#include <stddef.h>
#include <stdint.h>

/* One configuration of the grid: a `shardq replay` (or `shardq train`)
** invocation. */
typedef struct recipe_run {
    char *grid;     /* the [grid NAME] it came from */
    char *preset;
    char **sets;    /* "knob=value" */
    int nsets;
    char *trace;    /* resolved against the recipe's directory */
    char *workers;  /* "KxG", or NULL: the trace's default */
    uint64_t seed;
    char *device;
    char *paths;    /* "grad", "weight" or "grad,weight" */
    uint64_t steps; /* 0: all (replay), the default (train) */
    char *corpus;   /* train: resolved against the recipe's directory; NULL: default */
    char **opts;    /* train: "--option=value" */
    int nopts;
    char *key;      /* identity in the database: sweep name + every setting */
    char *label;    /* short text for progress lines */
} recipe_run;

typedef struct recipe {
    char *path;
    char *name;
    int jobs;            /* 0: one per core (replay), 1 (train) */
    int train;           /* command = train */
    recipe_run *runs;
    size_t nruns;
    size_t ninvalid;     /* combinations whose scheme does not validate, left out */
    char *first_invalid; /* the first of them, with the reason */
} recipe;

/* Reads and expands the recipe at path; trace_override, when not NULL,
** replaces every trace. Errors name the file, the section and the key. */
int recipe_load(const char *path, const char *trace_override, recipe *r, char *err,
                size_t errlen);
void recipe_free(recipe *r);

#endif
