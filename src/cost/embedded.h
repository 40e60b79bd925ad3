/*
** embedded.h -- the cost model's files built into the library (build-aux/
** embed.sh generates src/cost/embedded_files.c from experiments/platforms,
** experiments/models and experiments/validation), so that a platform such as
** "a100-slingshot10" loads by name wherever the library runs. Internal to
** src/cost: users name the files through cost.h.
*/
#ifndef SQ_COST_EMBEDDED_H
#define SQ_COST_EMBEDDED_H

typedef struct sq_cost_embedded {
    const char *name; /* the path in the source tree: "experiments/models/gpt-1.3b.ini" */
    const char *text;
} sq_cost_embedded;

/* Every file, in the order of the build, ended by {0, 0}. */
extern const sq_cost_embedded sq_cost_embedded_files[];

#endif
