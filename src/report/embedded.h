/*
** embedded.h -- text files built into the shardq binary (build-aux/embed.sh):
** the report's gnuplot scripts, so that `shardq report` works wherever the
** binary runs. (The cost model's files are built into the library:
** src/cost/embedded.h.)
*/
#ifndef SQ_REPORT_EMBEDDED_H
#define SQ_REPORT_EMBEDDED_H

typedef struct report_embedded {
    const char *name; /* the path in the source tree, e.g. "analysis/bench.gp" */
    const char *text;
} report_embedded;

/* analysis/ *.gp, the scripts of `shardq report`, ended by {0, 0}. */
extern const report_embedded report_scripts[];

#endif
