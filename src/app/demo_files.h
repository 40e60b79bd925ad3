/*
** demo_files.h -- the demo's recipes built into the binary (build-aux/
** embed.sh generates src/app/demo_files.c from experiments/demo/), so that
** `shardq demo` runs wherever it is installed. Internal to src/app.
*/
#ifndef SQ_APP_DEMO_FILES_H
#define SQ_APP_DEMO_FILES_H

typedef struct sq_app_demo_file {
    const char *name; /* the path in the source tree: "experiments/demo/replays.ini" */
    const char *text;
} sq_app_demo_file;

/* Every file, in the order of the build, ended by {0, 0}. */
extern const sq_app_demo_file sq_app_demo_files[];

#endif
