/*
** cli.h -- the `shardq` command: subcommand entry points and the helpers
** they share (common.c).
**
** A subcommand gets the arguments from its own name on: argv[0] is "codec"
** or "bench", ready for getopt_long with optind = 1. It returns the exit
** status: CLI_OK (0) success, CLI_RUNTIME (1) runtime error (a bad file, a
** failed write), CLI_USAGE (2) usage error (an unknown option, a malformed
** value), CLI_BUSY (75) a locked database. Messages go to stderr and start
** with "shardq CMD: ".
*/
#ifndef SQ_CLI_H
#define SQ_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "help.h" /* every command prints its --help from there */

#define CLI_OK 0
#define CLI_RUNTIME 1
#define CLI_USAGE 2

int cmd_codec(int argc, char **argv);  /* cmd_codec.c */
int cmd_bench(int argc, char **argv);  /* cmd_bench.c */
int cmd_world(int argc, char **argv);  /* cmd_world.c */
int cmd_schemes(int argc, char **argv); /* cmd_world.c */
int cmd_trace(int argc, char **argv);  /* cmd_trace.c */
int cmd_replay(int argc, char **argv); /* cmd_replay.c */
int cmd_sweep(int argc, char **argv);  /* cmd_sweep.c */
int cmd_db(int argc, char **argv);     /* cmd_db.c */
int cmd_train(int argc, char **argv);  /* cmd_train.c */
int cmd_model(int argc, char **argv);  /* cmd_model.c */
int cmd_demo(int argc, char **argv);   /* cmd_demo.c */
int cmd_report(int argc, char **argv); /* cmd_report.c */
int cmd_netbench(int argc, char **argv); /* cmd_netbench.c */

/* Parses text as an unsigned decimal integer (or 0x-prefixed hexadecimal)
** no larger than max, consuming all of it. On failure prints
** "shardq CMD: OPT: 'TEXT' is not an unsigned integer" (or "... is larger
** than MAX") and returns -1. */
int cli_parse_u64(const char *cmd, const char *opt, const char *text, uint64_t max,
                  uint64_t *out);

/* Parses text as a finite number in [min, max]; on failure prints
** "shardq CMD: OPT: 'TEXT' is not a number" (or "... is out of range
** [MIN, MAX]") and returns -1. */
int cli_parse_double(const char *cmd, const char *opt, const char *text, double min, double max,
                     double *out);

/* The choice closest to word (a prefix of it, or within two edits), to offer
** as "did you mean ...?"; NULL when none is close. */
const char *cli_suggest(const char *word, const char *const *choices, size_t n);

/* Prints "shardq CMD: unknown option 'OPT'" with a suggestion from the long
** options (NULL-terminated names) and "Try 'shardq CMD --help'.". */
void cli_unknown_option(const char *cmd, const char *opt, const char *const *longnames);

/* What getopt_long reported with opterr = 0 and a leading ':' in the short
** options: ch ':' (a missing value) or '?' (an unknown option, named with a
** suggestion). Prints the message and returns CLI_USAGE. */
int cli_option_error(const char *cmd, int ch, char **argv, const char *const *longnames);

/* Checks that npos positional arguments pos[] are between min and max;
** otherwise prints "shardq CMD: unexpected argument 'X'" or "missing
** argument", with "(expected DESC)", and returns -1. */
int cli_check_positional(const char *cmd, char **pos, int npos, int min, int max,
                         const char *desc);

/* Checks a --device value: cpu, cuda or cuda:N[,N...]; prints the error
** ("shardq CMD: --device: ...") and returns -1 when malformed. */
int cli_check_device(const char *cmd, const char *text);

/* Checks that the GPUs of a well-formed --device value are there (cpu or
** NULL always is); prints "shardq CMD: --device DEV: no CUDA device: WHY"
** (or which ordinal is missing) and returns -1 (a runtime error) when not:
** before anything is read or built, so that the failure is not blamed on
** the first tensor or bucket that would have been placed there. */
int cli_device_present(const char *cmd, const char *text);

/* The scheme of a preset with --set overrides, validated; prints the error
** and returns -1 (a usage error) on failure. */
struct sq_scheme;
int cli_scheme(const char *cmd, const char *preset, const char *const *sets, int nsets,
               struct sq_scheme *out);

/* Writes len bytes to path through the trace writer's safe file (a temporary
** renamed into place, so a failed write leaves no half file; a database the
** process has open, or its -wal, -shm or -journal, refused); prints
** "shardq CMD: ..." naming the file and returns -1 on failure. */
int cli_write_file(const char *cmd, const char *path, const void *data, size_t len);

/* JSON output on stdout: a string literal with escapes; a number in the
** shortest form that reads back exactly, or null when it is NaN or +-Inf
** (which JSON cannot say). */
void cli_json_str(const char *s);
void cli_json_num(double v);

/* Bytes per collective and link level (SQ_NCOLL x SQ_NLINK rows): bits per
** element sent and per real parameter (sq_bits_per: NaN when none), the
** summary lines of the links that carried something, and a JSON object
** {collective: {link: {...}}}. */
struct sq_bytes_row;
/* "bits/param" as the text output writes it: the number, or "-" (NaN). */
const char *cli_bits_text(double bits, char *buf, size_t len);
/* The model's real elements and what its worlds pad them to: the JSON
** members ,"padded":P,"padding_overhead":P/n (n = 0: null). */
void cli_json_padding(uint64_t elements, uint64_t padded);
void cli_print_bytes(const struct sq_bytes_row *rows);
void cli_json_bytes(const struct sq_bytes_row *rows);

/* The database a command uses when --db is not given: $SHARDQ_DB, else
** shardq.db in the current directory. */
const char *cli_default_db(void);

/* Exit status of a run whose --key another live process is running. */
#define CLI_BUSY 75

/* The exit status of a library status (sq_status), the one table of the
** command: SQ_OK 0; SQ_ERR_SPEC, a setting or filter the user gave that the
** library refused, 2 (CLI_USAGE); SQ_ERR_BUSY, a file another process
** holds, 75 (CLI_BUSY); any other failure 1 (CLI_RUNTIME). */
int cli_exit_status(int status);

/* A job of the sweep library (sweep.h) run from a command: its progress
** bar on stderr, its notices, and the exit status of how it ended. */
struct sq_sweep_outcome;
struct sq_sweep_hooks;
struct sq_error;
struct sq_progress;
struct sq_train_row;
typedef struct cli_job {
    const char *cmd;                     /* "replay", "train" */
    int quiet;
    int lines;                           /* train: a line at each evaluation */
    const struct sq_sweep_outcome *out;  /* where the job's notice shows */
    struct sq_progress *bar;
} cli_job;
/* The hooks that draw j's progress (and its lines) and say its notice. */
void cli_job_hooks(cli_job *j, struct sq_sweep_hooks *h);
/* After sq_sweep_job_run returned rc: ends the bar, says what ended the job
** ("already done: run N in DB" on stdout unless quiet; a key another live
** process holds, unless quiet; an error) and returns its exit status:
** CLI_OK, CLI_BUSY, CLI_RUNTIME; -1 when the job ran and its summary is
** still to print. */
int cli_job_end(cli_job *j, int rc, const struct sq_error *e, const char *db);

/* A sweep's pool as `shardq sweep` prints it (cmd_sweep.c): the counts
** first and last, a line per finished configuration (or the progress bar
** on a terminal), a failure's log, the waits and takeovers; quiet leaves
** the counts and progress out. cli_sweep_print is the pool's event hook
** (ctx a cli_sweep_printer); cli_sweep_run runs sw through the pool with
** it (o's db, jobs and waits) and returns the exit status: CLI_OK when
** every configuration is done. `shardq demo` runs its sweeps with it. */
struct sq_sweep;
struct sq_sweep_pool_event;
struct sq_sweep_pool_opts;
typedef struct cli_sweep_printer {
    int quiet;
    struct sq_progress *bar;
    double t0;
} cli_sweep_printer;
void cli_sweep_print(void *ctx, const struct sq_sweep *sw, const struct sq_sweep_pool_event *e);
int cli_sweep_run(const struct sq_sweep *sw, const struct sq_sweep_pool_opts *o,
                  cli_sweep_printer *p);

/* Runs the training cfg (cmd_train.c) as `shardq train` does once its
** options are read -- into db (NULL: nothing stored) under key and sweep,
** capturing a trace into capture when not NULL -- and prints what it prints:
** the run is the application layer's (sq_app_train_run), the printing
** cli_train_end's. Returns the exit status. */
struct sq_sweep_config;
struct sq_transport;
int cli_train_job(const struct sq_sweep_config *cfg, const char *db, const char *key,
                  const char *sweep, int busy_ms, const char *capture, uint32_t capture_every,
                  int quiet, int json, const struct sq_transport *transport);
/* What cli_train_job prints once the run (sq_app_train_run, whose outcome
** is j->out) returned bad with e: the summary, or why it ended; returns
** the exit status. The demo's capture ends with it in its child. */
struct sq_app_train;
int cli_train_end(cli_job *j, const struct sq_app_train *t, int bad, const struct sq_error *e,
                  int json);

#endif
