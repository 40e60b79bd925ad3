/*
** cli.h -- the `shardq` command: subcommand entry points and the helpers
** they share (main.c).
**
** A subcommand gets the arguments from its own name on: argv[0] is "codec"
** or "bench", ready for getopt_long with optind = 1. It returns the exit
** status: 0 success, 1 runtime error (a bad file, a failed write), 2 usage
** error (an unknown option, a malformed value). Messages go to stderr and
** start with "shardq CMD: ".
*/
#ifndef SQ_CLI_H
#define SQ_CLI_H

#include <stddef.h>
#include <stdint.h>

#define CLI_OK 0
#define CLI_RUNTIME 1
#define CLI_USAGE 2

int cmd_codec(int argc, char **argv);  /* cmd_codec.c */
int cmd_bench(int argc, char **argv);  /* cmd_bench.c */
int cmd_world(int argc, char **argv);  /* cmd_world.c */
int cmd_schemes(int argc, char **argv); /* cmd_world.c */

/* Parses text as an unsigned decimal integer (or 0x-prefixed hexadecimal)
** no larger than max, consuming all of it. On failure prints
** "shardq CMD: OPT: 'TEXT' is not an unsigned integer" (or "... is larger
** than MAX") and returns -1. */
int cli_parse_u64(const char *cmd, const char *opt, const char *text, uint64_t max,
                  uint64_t *out);

/* The choice closest to word (a prefix of it, or within two edits), to offer
** as "did you mean ...?"; NULL when none is close. */
const char *cli_suggest(const char *word, const char *const *choices, size_t n);

/* Prints "shardq CMD: unknown option 'OPT'" with a suggestion from the long
** options (NULL-terminated names) and "Try 'shardq CMD --help'.". */
void cli_unknown_option(const char *cmd, const char *opt, const char *const *longnames);

#endif
