/*
** main.c -- the `shardq` command: dispatch to subcommands, help, version,
** and the option helpers the subcommands share (cli.h).
*/
#include "cli.h"
#include "trace/wfile.h"
#include "backend/device.h"
#include "shardq/codec.h"
#include "shardq/plugin.h"
#include "progress.h"
#include "shardq/store.h"
#include "shardq/sweep.h"
#include "shardq/world.h"


#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage_text[] =
    "usage: shardq COMMAND [ARGS...]\n"
    "\n"
    "Communication quantization for sharded data-parallel training: the codecs\n"
    "on files, their speed on the CPU or a GPU, and the schemes (SDP4Bit, ZeRO++,\n"
    "QSDP) run between K x G emulated workers with exact byte accounting.\n"
    "\n"
    "commands:\n"
    "  demo             the main job: train, capture, sweep, compare, model and\n"
    "                   report, on built-in defaults, in a few minutes\n"
    "  codec encode     quantize a .npy (or raw float32) file into a safetensors file\n"
    "  codec decode     dequantize such a safetensors file back into a .npy file\n"
    "  codec stats      quantization error of a codec on a .npy file\n"
    "  codec info       sizes of a codec for n elements\n"
    "  bench            throughput of the codec operations beside the copy bandwidth\n"
    "  world            bytes (and, with --run, errors) of a scheme on K x G workers\n"
    "  schemes          the scheme presets and their knobs\n"
    "  trace info       steps, workers, tensors, shapes and dtypes of a trace\n"
    "  trace synth      write a synthetic trace (for tests and benchmarks)\n"
    "  replay           run a scheme over a trace; results go to the database\n"
    "  sweep            run a grid of replays from an INI recipe, in parallel\n"
    "  train            train a byte-level GPT under a scheme; capture a trace\n"
    "  model            cost model: iteration time and speedup of each scheme at\n"
    "                   cluster scale\n"
    "  netbench         under mpirun: bus bandwidth and latency of MPI's all-gather,\n"
    "                   reduce-scatter and all-to-all per size and link level; a\n"
    "                   platform file for model\n"
    "  db               list, show and export the runs in the database\n"
    "  report           figures (PNG, SVG) and tables of the database, as a directory\n"
    "  help [COMMAND]   this text, or the help of a command\n"
    "\n"
    "options:\n"
    "  -h, --help       this text\n"
    "  --version        version and build facts\n"
    "  --plugin FILE.so load the plug-in codecs of a shared object, named\n"
    "                   kind=plugin:NAME in codec specs and scheme knobs; before or\n"
    "                   after the command, repeatable, for codec, bench, world,\n"
    "                   schemes, replay, sweep, train and model (also\n"
    "                   SHARDQ_PLUGINS=FILE.so:FILE.so)\n"
    "\n"
    "'shardq COMMAND --help' shows the options of a command. Exit status: 0 on\n"
    "success, 1 on a runtime error (unreadable or malformed input, failed write),\n"
    "2 on a usage error (unknown command or option, malformed value).\n";

typedef struct command {
    const char *name;
    int (*fn)(int, char **);
} command;

static const command commands[] = {
    {"demo", cmd_demo},
    {"codec", cmd_codec},
    {"bench", cmd_bench},
    {"world", cmd_world},
    {"schemes", cmd_schemes},
    {"trace", cmd_trace},
    {"replay", cmd_replay},
    {"sweep", cmd_sweep},
    {"train", cmd_train},
    {"model", cmd_model},
    {"netbench", cmd_netbench},
    {"db", cmd_db},
    {"report", cmd_report},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])
static const char *const command_names[] = {"demo",  "codec", "bench", "world", "schemes", "trace",
                                            "replay", "sweep", "train", "model", "netbench", "db",
                                            "report", "help"};

/* ------------------------------------------------------------------------ */
/* Helpers shared by the subcommands                                        */
/* ------------------------------------------------------------------------ */

int cli_option_error(const char *cmd, int ch, char **argv, const char *const *longnames)
{
    if (ch == ':') {
        fprintf(stderr, "shardq %s: option '%s' needs a value\nTry 'shardq %s --help'.\n", cmd,
                argv[optind - 1], cmd);
    } else if (optopt) {
        char s[3] = {'-', (char)optopt, '\0'};
        cli_unknown_option(cmd, s, longnames);
    } else {
        cli_unknown_option(cmd, argv[optind - 1], longnames);
    }
    return CLI_USAGE;
}

int cli_check_positional(const char *cmd, char **pos, int npos, int min, int max,
                         const char *desc)
{
    if (npos >= min && npos <= max) return 0;
    if (npos > max)
        fprintf(stderr, "shardq %s: unexpected argument '%s'", cmd, pos[max]);
    else
        fprintf(stderr, "shardq %s: missing argument", cmd);
    fprintf(stderr, " (expected %s)\nTry 'shardq %s --help'.\n", desc, cmd);
    return -1;
}

int cli_check_device(const char *cmd, const char *text)
{
    const char *p = text + 5;
    int ok = !strcmp(text, "cpu") || !strcmp(text, "cuda");
    if (!ok && !strncmp(text, "cuda:", 5) && *p) {
        ok = 1;
        for (; *p; p++)
            if (!(*p >= '0' && *p <= '9') && !(*p == ',' && p[1] && p[-1] != ',' && p[-1] != ':'))
                ok = 0;
    }
    if (!ok)
        fprintf(stderr, "shardq %s: --device: '%s': expected cpu, cuda or cuda:N[,N...]\n", cmd,
                text);
    return ok ? 0 : -1;
}

int cli_device_present(const char *cmd, const char *text)
{
    if (!text || !strcmp(text, "cpu")) return 0;
    int count = sq_device_count();
    if (count == 0) {
        fprintf(stderr, "shardq %s: --device %s: no CUDA device: %s\n", cmd, text,
                sq_device_unavailable_reason());
        return -1;
    }
    /* "cuda" is every device there is; "cuda:N,M" names them (syntax
    ** checked by cli_check_device) */
    for (const char *p = strchr(text, ':'); p; p = strchr(p + 1, ',')) {
        long d = strtol(p + 1, NULL, 10);
        if (d >= count) {
            fprintf(stderr, "shardq %s: --device %s: no device cuda:%ld, %d visible (cuda:0 to "
                    "cuda:%d)\n", cmd, text, d, count, count - 1);
            return -1;
        }
    }
    return 0;
}

int cli_scheme(const char *cmd, const char *preset, const char *const *sets, int nsets,
               sq_scheme *out)
{
    sq_error err;
    if (sq_scheme_preset(preset, out, &err)) {
        fprintf(stderr, "shardq %s: --scheme: %s\nTry 'shardq schemes'.\n", cmd, sq_error_message(&err));
        return -1;
    }
    for (int i = 0; i < nsets; i++)
        if (sq_scheme_set(out, sets[i], &err)) {
            fprintf(stderr, "shardq %s: --set: %s\n", cmd, sq_error_message(&err));
            return -1;
        }
    if (sq_scheme_validate(out, &err)) {
        fprintf(stderr, "shardq %s: scheme %s: %s\n", cmd, preset, sq_error_message(&err));
        return -1;
    }
    return 0;
}

int cli_write_file(const char *cmd, const char *path, const void *data, size_t len)
{
    sq_wfile w;
    sq_error err = {0};
    if (sq_wfile_open(&w, path, &err) == 0) {
        sq_wfile_write(&w, data, len);
        if (sq_wfile_commit(&w, &err) == 0) return 0;
    }
    fprintf(stderr, "shardq %s: %s\n", cmd, sq_error_message(&err));
    return -1;
}

void cli_json_str(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", stdout);
        else if (*p == '\t')
            fputs("\\t", stdout);
        else if (*p < 0x20)
            printf("\\u%04x", *p);
        else
            putchar(*p);
    }
    putchar('"');
}

void cli_json_num(double v)
{
    if (!isfinite(v)) {
        fputs("null", stdout);
        return;
    }
    /* The shortest of %.15g .. %.17g that reads back as v. */
    char buf[32];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    fputs(buf, stdout);
}

int cli_parse_double(const char *cmd, const char *opt, const char *text, double min, double max,
                     double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || errno == ERANGE || !isfinite(v)) {
        fprintf(stderr, "shardq %s: %s: '%s' is not a number\n", cmd, opt, text);
        return -1;
    }
    if (v < min || v > max) {
        fprintf(stderr, "shardq %s: %s: '%s' is out of range [%g, %g]\n", cmd, opt, text, min,
                max);
        return -1;
    }
    *out = v;
    return 0;
}

static void job_start(void *ctx, uint64_t total)
{
    cli_job *j = ctx;
    /* said even when quiet: a run was left behind by a process that died */
    if (j->out && j->out->notice[0]) fprintf(stderr, "shardq %s: %s\n", j->cmd, j->out->notice);
    j->bar = j->quiet ? NULL : sq_progress_start(j->cmd, (size_t)total);
}

static void job_progress(void *ctx, uint64_t done, uint64_t total)
{
    cli_job *j = ctx;
    (void)total;
    sq_progress_update(j->bar, (size_t)done);
}

static void job_train_step(void *ctx, const sq_train_row *row)
{
    cli_job *j = ctx;
    if (!j->lines || isnan(row->val_loss)) return;
    sq_progress_pause(j->bar);
    printf("step %6llu  loss %.4f  val %.4f  lr %.3g  norm %.3g  %.0f tokens/s\n",
           (unsigned long long)row->step, row->loss, row->val_loss, row->lr, row->grad_norm,
           row->seconds > 0 ? (double)row->tokens / row->seconds : 0.0);
    fflush(stdout);
}

void cli_job_hooks(cli_job *j, sq_sweep_hooks *h)
{
    *h = (sq_sweep_hooks){.ctx = j, .start = job_start, .progress = job_progress,
                          .train_step = job_train_step};
}

int cli_job_end(cli_job *j, int rc, const sq_error *e, const char *db)
{
    sq_progress_finish(j->bar);
    j->bar = NULL;
    const sq_sweep_outcome *out = j->out;
    if (out->status == SQ_SWEEP_HELD) {
        if (!j->quiet) fprintf(stderr, "shardq %s: %s\n", j->cmd, sq_error_message(e));
        return CLI_BUSY;
    }
    if (out->status == SQ_SWEEP_ALREADY_DONE && !j->quiet)
        printf("already done: run %lld in %s\n", (long long)out->run, db);
    if (rc) {
        fprintf(stderr, "shardq %s: %s\n", j->cmd, sq_error_message(e));
        if (out->end_error[0]) fprintf(stderr, "shardq %s: %s\n", j->cmd, out->end_error);
        return CLI_RUNTIME;
    }
    return out->status == SQ_SWEEP_ALREADY_DONE ? CLI_OK : -1;
}

const char *cli_bits_text(double bits, char *buf, size_t len)
{
    if (isfinite(bits))
        snprintf(buf, len, bits < 10000 ? "%.4f" : "%.0f", bits); /* fits a 10-wide column */
    else
        snprintf(buf, len, "-");
    return buf;
}

void cli_json_padding(uint64_t elements, uint64_t padded)
{
    printf(",\"padded\":%llu,\"padding_overhead\":", (unsigned long long)padded);
    cli_json_num(elements ? (double)padded / (double)elements : NAN);
}

void cli_print_bytes(const sq_bytes_row *rows)
{
    for (int c = 0; c < SQ_NCOLL; c++)
        for (int l = 0; l < SQ_NLINK; l++) {
            const sq_bytes_row *b = &rows[c * SQ_NLINK + l];
            if (!b->sent_elems) continue;
            char bp[32];
            const uint64_t sent = b->sent_codes + b->sent_meta;
            printf("  %-19s %-6s %14llu bytes  %.4f bits/elem  %s bits/param\n", b->collective,
                   b->link, (unsigned long long)sent, sq_bits_per(sent, b->sent_elems),
                   cli_bits_text(sq_bits_per(sent, b->sent_params), bp, sizeof bp));
        }
}

void cli_json_bytes(const sq_bytes_row *rows)
{
    printf("{");
    for (int c = 0; c < SQ_NCOLL; c++) {
        printf("%s\"%s\":{", c ? "," : "", sq_coll_name(c));
        for (int l = 0; l < SQ_NLINK; l++) {
            const sq_bytes_row *b = &rows[c * SQ_NLINK + l];
            printf("%s\"%s\":{\"sent_codes\":%llu,\"sent_meta\":%llu,\"recv_bytes\":%llu,"
                   "\"elements\":%llu,\"messages\":%llu,\"bits_per_element\":",
                   l ? "," : "", sq_link_name(l), (unsigned long long)b->sent_codes,
                   (unsigned long long)b->sent_meta,
                   (unsigned long long)(b->recv_codes + b->recv_meta),
                   (unsigned long long)b->sent_elems, (unsigned long long)b->messages);
            cli_json_num(sq_bits_per(b->sent_codes + b->sent_meta, b->sent_elems));
            /* beside them: the model's elements among those sent, and the cost per one */
            printf(",\"real_elements\":%llu,\"bits_per_param\":",
                   (unsigned long long)b->sent_params);
            cli_json_num(sq_bits_per(b->sent_codes + b->sent_meta, b->sent_params));
            printf(",\"padding_overhead\":");
            cli_json_num(b->sent_params ? (double)b->sent_elems / (double)b->sent_params : NAN);
            printf("}");
        }
        printf("}");
    }
    printf("}");
}

const char *cli_default_db(void)
{
    const char *e = getenv("SHARDQ_DB");
    return e && *e ? e : "shardq.db";
}

int cli_parse_u64(const char *cmd, const char *opt, const char *text, uint64_t max,
                  uint64_t *out)
{
    const char *digits = text;
    int base = 10;
    if (text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
        digits = text + 2;
        base = 16;
    }
    /* strtoull accepts leading blanks and a sign; we want digits only. */
    int ok = (base == 10 ? (*digits >= '0' && *digits <= '9')
                         : ((*digits >= '0' && *digits <= '9') ||
                            (*digits >= 'a' && *digits <= 'f') ||
                            (*digits >= 'A' && *digits <= 'F')));
    char *end = NULL;
    errno = 0;
    unsigned long long v = ok ? strtoull(digits, &end, base) : 0;
    if (!ok || *end != '\0') {
        fprintf(stderr, "shardq %s: %s: '%s' is not an unsigned integer\n", cmd, opt, text);
        return -1;
    }
    if (errno == ERANGE || v > max) {
        fprintf(stderr, "shardq %s: %s: '%s' is larger than %llu\n", cmd, opt, text,
                (unsigned long long)max);
        return -1;
    }
    *out = v;
    return 0;
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 99;
    size_t row[64];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *cli_suggest(const char *word, const char *const *choices, size_t n)
{
    const char *best = NULL;
    size_t bestd = 3, wl = strlen(word);
    if (wl == 0) return NULL;
    for (size_t i = 0; i < n; i++)
        if (strncmp(choices[i], word, wl) == 0) return choices[i];
    for (size_t i = 0; i < n; i++) {
        size_t d = edit_distance(word, choices[i]);
        if (d < bestd && d < wl) {
            bestd = d;
            best = choices[i];
        }
    }
    return best;
}

void cli_unknown_option(const char *cmd, const char *opt, const char *const *longnames)
{
    char name[64];
    /* "--sed=5" -> "sed" */
    const char *o = opt;
    while (*o == '-') o++;
    size_t k = strcspn(o, "=");
    if (k >= sizeof name) k = sizeof name - 1;
    memcpy(name, o, k);
    name[k] = '\0';
    size_t n = 0;
    while (longnames && longnames[n]) n++;
    const char *s = opt[0] == '-' && opt[1] == '-' ? cli_suggest(name, longnames, n) : NULL;
    const char *sp = *cmd ? " " : "";
    size_t matches = 0;
    for (size_t i = 0; i < n && opt[0] == '-' && opt[1] == '-' && k; i++)
        matches += strncmp(longnames[i], name, k) == 0;
    if (matches > 1) {
        /* getopt_long accepts unique prefixes; this one is not unique. */
        fprintf(stderr, "shardq%s%s: ambiguous option '--%s' (could be", sp, cmd, name);
        for (size_t i = 0, j = 0; i < n; i++)
            if (strncmp(longnames[i], name, k) == 0)
                fprintf(stderr, "%s --%s", j++ ? "," : "", longnames[i]);
        fprintf(stderr, ")\n");
    } else if (s)
        fprintf(stderr, "shardq%s%s: unknown option '%.*s' (did you mean '--%s'?)\n", sp, cmd,
                (int)strcspn(opt, "="), opt, s);
    else
        fprintf(stderr, "shardq%s%s: unknown option '%.*s'\n", sp, cmd, (int)strcspn(opt, "="),
                opt);
    fprintf(stderr, "Try 'shardq%s%s --help'.\n", sp, cmd);
}

/* ------------------------------------------------------------------------ */
/* Version                                                                  */
/* ------------------------------------------------------------------------ */

static int print_version(void)
{
    printf("shardq %s\n", SHARDQ_VERSION_STRING);
    int threads = sq_get_threads();
#ifdef _OPENMP
    printf("build: OpenMP yes (%d thread%s available); ", threads, threads == 1 ? "" : "s");
#else
    (void)threads;
    printf("build: OpenMP no (1 thread); ");
#endif
#ifdef SHARDQ_HAVE_MPI
    printf("MPI yes; ");
#else
    printf("MPI no; ");
#endif
#ifdef SHARDQ_HAVE_CUDA
    int dev = sq_device_count();
    if (dev > 0)
        printf("CUDA yes (%d device%s)\n", dev, dev == 1 ? "" : "s");
    else
        printf("CUDA yes (0 devices: %s)\n", sq_device_unavailable_reason());
#else
    printf("CUDA no (%s)\n", sq_device_unavailable_reason());
#endif
    return CLI_OK;
}

/* ------------------------------------------------------------------------ */
/* Dispatch                                                                 */
/* ------------------------------------------------------------------------ */

static const command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

static int unknown_command(const char *name)
{
    const char *s = cli_suggest(name, command_names, sizeof command_names / sizeof *command_names);
    if (s)
        fprintf(stderr, "shardq: unknown command '%s' (did you mean '%s'?)\n", name, s);
    else {
        fprintf(stderr, "shardq: unknown command '%s' (commands:", name);
        for (size_t i = 0; i < sizeof command_names / sizeof *command_names; i++)
            fprintf(stderr, "%s %s", i ? "," : "", command_names[i]);
        fprintf(stderr, ")\n");
    }
    fputs("Try 'shardq --help'.\n", stderr);
    return CLI_USAGE;
}

/* ------------------------------------------------------------------------ */
/* Plug-in codecs: --plugin FILE.so and SHARDQ_PLUGINS                      */
/* ------------------------------------------------------------------------ */

/* The commands that take codec specs or scheme knobs, and so plug-ins. */
static const char *const plugin_commands[] = {"codec", "bench", "world", "schemes", "replay",
                                              "sweep", "train", "model", NULL};

static const char plugin_help[] =
    "\n"
    "global options (before or after the command):\n"
    "  --plugin FILE.so load the plug-in codecs of a shared object (repeatable; also\n"
    "                   SHARDQ_PLUGINS=FILE.so:FILE.so): kind=plugin:NAME in codec\n"
    "                   specs and scheme knobs (README, \"Plug-in codecs\")\n";

static int takes_plugins(const char *cmd)
{
    for (const char *const *c = plugin_commands; *c; c++)
        if (!strcmp(cmd, *c)) return 1;
    return 0;
}

/* "--plugin FILE" or "--plugin=FILE" at argv[i]: the file (NULL when i is
** no such option; "" when its value is missing), *used the words taken. */
static const char *plugin_option(int argc, char **argv, int i, int *used)
{
    if (!strcmp(argv[i], "--plugin")) {
        *used = i + 1 < argc ? 2 : 1;
        return i + 1 < argc ? argv[i + 1] : "";
    }
    if (!strncmp(argv[i], "--plugin=", 9)) {
        *used = 1;
        return argv[i] + 9;
    }
    return NULL;
}

/* Takes every --plugin out of argv (those before the command, and those
** after it up to a "--"), loads SHARDQ_PLUGINS and then each file, and
** returns the new argc; -1 with the error printed (*status its exit
** status). argv[0] is the program. */
static int load_plugins(int argc, char **argv, int *status)
{
    const char *files[256];
    int nfiles = 0, out = 1, cmd = 0;
    for (int i = 1; i < argc;) {
        if (!strcmp(argv[i], "--") && cmd) {
            /* the rest are operands: copied as they are */
            while (i < argc) argv[out++] = argv[i++];
            break;
        }
        int used = 0;
        const char *f = plugin_option(argc, argv, i, &used);
        if (f) {
            if (!*f || nfiles == (int)(sizeof files / sizeof *files)) {
                fprintf(stderr, "shardq: --plugin: %s\n",
                        *f ? "more than 256 files" : "needs a file (--plugin FILE.so)");
                *status = CLI_USAGE;
                return -1;
            }
            files[nfiles++] = f;
            i += used;
            continue;
        }
        if (!cmd && argv[i][0] != '-') cmd = out;
        argv[out++] = argv[i++];
    }
    argv[out] = NULL;
    const char *name = cmd ? argv[cmd] : "";
    if (nfiles && cmd && !takes_plugins(name)) {
        fprintf(stderr, "shardq %s: --plugin: this command takes no codec specs\n", name);
        *status = CLI_USAGE;
        return -1;
    }
    if (!cmd || !takes_plugins(name)) return out;
    sq_error err;
    const char *env = getenv("SHARDQ_PLUGINS");
    if (env && *env && sq_plugin_load_list(env, &err) < 0) {
        fprintf(stderr, "shardq %s: SHARDQ_PLUGINS: %s\n", name, sq_error_message(&err));
        *status = CLI_RUNTIME;
        return -1;
    }
    for (int i = 0; i < nfiles; i++)
        if (sq_plugin_load(files[i], &err) < 0) {
            fprintf(stderr, "shardq %s: --plugin: %s\n", name, sq_error_message(&err));
            *status = CLI_RUNTIME;
            return -1;
        }
    return out;
}

/* Whether a command's args ask for help: -h or --help (up to a "--"), or
** its "help" subcommand. */
static int asks_help(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "help")) return 1;
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return 1;
    return 0;
}

/* help of a command that takes plug-ins: main adds the global options */
static int help_for_plugins;

/* shardq help [COMMAND [SUBCOMMAND]]: runs COMMAND [SUBCOMMAND] --help. */
static int help(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_text, stdout);
        return CLI_OK;
    }
    if (strcmp(argv[1], "help") == 0 && argc == 2) {
        fputs(usage_text, stdout);
        return CLI_OK;
    }
    const command *c = find_command(argv[1]);
    if (!c) return unknown_command(argv[1]);
    if (takes_plugins(argv[1])) help_for_plugins = 1;
    if (argc > 3) {
        fprintf(stderr, "shardq help: too many arguments\nTry 'shardq --help'.\n");
        return CLI_USAGE;
    }
    char help_opt[] = "--help";
    char *args[4] = {argv[1], argc == 3 ? argv[2] : help_opt, argc == 3 ? help_opt : NULL, NULL};
    return c->fn(argc == 3 ? 3 : 2, args);
}

/* OpenMP's threads spin between parallel regions unless told otherwise,
** which makes a lone run crawl on a busy machine (12x on a loaded 2-core
** one): replay, train, world and sweep run with OMP_WAIT_POLICY=passive
** unless the user set a policy (OMP_WAIT_POLICY or GOMP_SPINCOUNT). libgomp
** reads its environment when it is loaded, before main: so the program
** sets it and runs itself again, once (the variable is then set). It execs
** its file's own path, not /proc/self/exe, whose name ("exe") would become
** the process's name in ps, pgrep and the like. If that exec fails, the run
** goes on with the spinning policy. */
static void passive_wait(char **argv)
{
    static const char *const cmds[] = {"replay", "train", "world", "sweep", NULL};
    int match = 0;
    for (const char *const *c = cmds; *c; c++) match |= strcmp(argv[1], *c) == 0;
    if (!match || getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
    fflush(NULL);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        execv(self, argv);   /* fails if the file was replaced or removed */
    }
    execv("/proc/self/exe", argv);
}

int main(int argc, char **argv)
{
    if (argc >= 2) passive_wait(argv);
    int status = CLI_OK;
    if ((argc = load_plugins(argc, argv, &status)) < 0) return status;
    if (argc < 2) {
        fputs(usage_text, stderr);
        return CLI_USAGE;
    }
    const char *a = argv[1];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
        fputs(usage_text, stdout);
        return CLI_OK;
    }
    if (strcmp(a, "--version") == 0) {
        if (argc > 2) {
            fprintf(stderr, "shardq: --version takes no arguments\n");
            return CLI_USAGE;
        }
        return print_version();
    }
    if (strcmp(a, "help") == 0) {
        status = help(argc - 1, argv + 1);
        if (status == CLI_OK && help_for_plugins) fputs(plugin_help, stdout);
        return status;
    }
    if (a[0] == '-') {
        static const char *const top[] = {"help", "version", NULL};
        cli_unknown_option("", a, top);
        return CLI_USAGE;
    }
    const command *c = find_command(a);
    if (!c) return unknown_command(a);
    status = c->fn(argc - 1, argv + 1);
    if (status == CLI_OK && takes_plugins(a) && asks_help(argc - 1, argv + 1))
        fputs(plugin_help, stdout);
    return status;
}
