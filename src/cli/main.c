/*
** main.c -- the `shardq` command: dispatch to subcommands, help, version
** and plug-ins (the helpers the subcommands share are common.c's).
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

#define usage_text cli_help("shardq")

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

#define plugin_help cli_help("shardq-plugin-options")

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
