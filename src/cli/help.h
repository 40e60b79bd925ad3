/*
** help.h -- the commands' --help texts (help.c).
**
** Each text is a file of src/cli/help/ (shardq-CMD.txt, shardq-CMD-SUB.txt),
** built into the binary by build-aux/embed.sh (help_texts.c), so that the
** text a user reads after --help is a file the manual can be written from
** and checked against, not a C string spread over a command's source.
*/
#ifndef SQ_CLI_HELP_H
#define SQ_CLI_HELP_H

#include <stdio.h>

typedef struct cli_help_file {
    const char *name; /* "src/cli/help/shardq-replay.txt" */
    const char *text;
} cli_help_file;

/* The texts, ended by {NULL, NULL} (help_texts.c, generated). */
extern const cli_help_file cli_help_files[];

/* The text of page ("shardq-replay"); a page that is not built in is a
** bug of the build, said on stderr, and gives "". */
const char *cli_help(const char *page);

/* Writes page's text to f with every mark replaced by value (a build
** setting the text names, such as the Python it runs). */
void cli_help_print(const char *page, const char *mark, const char *value, FILE *f);

#endif
