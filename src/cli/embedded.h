/*
** embedded.h -- text files built into the shardq binary (build-aux/embed.sh):
** the platform and model files of the cost model and the report's gnuplot
** scripts, so that `shardq model --platform a100-slingshot10` and `shardq
** report` work wherever the binary runs.
*/
#ifndef SQ_CLI_EMBEDDED_H
#define SQ_CLI_EMBEDDED_H

typedef struct cli_embedded {
    const char *name; /* the path in the source tree, e.g. "experiments/models/gpt-1.3b.ini" */
    const char *text;
} cli_embedded;

/* experiments/{platforms,models,validation}/ *.ini, ended by {0, 0}. */
extern const cli_embedded cli_model_files[];
/* analysis/ *.gp, the scripts of `shardq report`, ended by {0, 0}. */
extern const cli_embedded cli_report_scripts[];

/* The embedded file whose base name without ".ini" is `name` and whose path
** starts with `dir` ("experiments/platforms/"); NULL when none. */
const cli_embedded *cli_embedded_find(const cli_embedded *files, const char *dir, const char *name);

#endif
