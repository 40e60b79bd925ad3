/*
** cmd_report.c -- `shardq report`: the options; the report itself is
** src/report (write.c), an application module beside the command, whose
** status becomes the exit status here.
*/
#include "cli.h"
#include "report/report.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char report_usage[] =
    "usage: shardq report [--db FILE] [--out DIR] [--runs FILTER]\n"
    "                     [--where KEY=VALUE]... [--format LIST] [--style FILE]\n"
    "                     [--query-timeout SECONDS] [-q]\n"
    "\n"
    "Draws the figures of the runs in the database and writes them, with their\n"
    "tables, into a directory: NAME.png and NAME.svg per figure, report.md, a\n"
    "static index.html that links them, in data/ the values each figure is drawn\n"
    "from (shardq runs every query itself) and in scripts/ the gnuplot script of\n"
    "every figure, which reads only data/ and runs no program: in DIR,\n"
    "gnuplot scripts/NAME.gp draws NAME again.\n"
    "\n"
    "figures (a figure without data is left out, and the report says why):\n"
    "  error-bits     quantization error against bits per element sent (replay)\n"
    "  error-group    quantization error against group size (replay sweeps)\n"
    "  hadamard       gradient error without and with a Hadamard (replay)\n"
    "  bias           mean signed error over seeds, 95% intervals (replay)\n"
    "  loss           training and validation loss (train)\n"
    "  bytes          bits per parameter on each link level (replay, train)\n"
    "  bench          kernel throughput against size beside a copy (bench --db)\n"
    "  speedup        predicted speedup against GPU count (model)\n"
    "\n"
    "options:\n"
    "  --db FILE        the database (default $SHARDQ_DB, else shardq.db)\n"
    "  --out DIR        where to write (default report; created if missing)\n"
    "  --runs FILTER    only the runs for which this SQL condition on the runs\n"
    "                   table holds, e.g. \"sweep = 'demo'\" or \"id > 40\"\n"
    "                   (default: every run that is done)\n"
    "  --where KEY=VALUE  only the runs where KEY equals VALUE (repeatable: all\n"
    "                   must hold, and --runs too). KEY is a knob or param a run\n"
    "                   stored (grad.inter.bits, weight.mode, train.lr; grad.bits:\n"
    "                   both hops), or a column of runs (id, kind, status, sweep,\n"
    "                   grid, preset, scheme, topo, device, trace, seed, host,\n"
    "                   version; scheme=NAME matches the preset). Numbers compare\n"
    "                   as numbers (4 matches 4.0)\n"
    "  --format LIST    the files of each figure, a comma-separated list of png,\n"
    "                   svg and pdf (default png,svg)\n"
    "  --style FILE     a gnuplot file loaded after the paper style of every\n"
    "                   script (README, \"Reports\": font, width, height, lwscale,\n"
    "                   pcolors), to restyle the figures without editing them;\n"
    "                   a regular file of at most 256 KiB, copied to\n"
    "                   scripts/style.gp (it is gnuplot code: load only a file\n"
    "                   you trust, as you would run a script)\n"
    "  --query-timeout SECONDS  stop a --runs or --where query that runs longer\n"
    "                   (default 10; 0: no limit)\n"
    "  -q, --quiet      print nothing on success\n"
    "  -h, --help       this text\n"
    "\n"
    "It needs gnuplot (with its cairo terminals: Debian's gnuplot-nox);\n"
    "./bootstrap --deps installs it.\n"
    "\n"
    "Exit status: 0 written (figures without data included), 1 error (a missing\n"
    "database, a directory that cannot be written, gnuplot missing or failing),\n"
    "2 usage (an unknown option, a FILTER that is not one SQL condition).\n";

int cmd_report(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"db", required_argument, NULL, 'd'},   {"out", required_argument, NULL, 'o'},
        {"runs", required_argument, NULL, 'r'}, {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},       {"where", required_argument, NULL, 'w'},
        {"format", required_argument, NULL, 'f'}, {"style", required_argument, NULL, 's'},
        {"query-timeout", required_argument, NULL, 't'}, {NULL, 0, NULL, 0}};
    static const char *const names[] = {"db",     "out",   "runs",          "quiet", "help",
                                        "where",  "format", "style", "query-timeout", NULL};
    const char *db = cli_default_db(), *out = "report", *filter = NULL;
    const char *where[64];
    report_options o = {.where = where, .query_timeout = REPORT_QUERY_TIMEOUT};
    int quiet = 0, ch;
    opterr = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, ":hq", longopts, NULL)) != -1) {
        switch (ch) {
        case 'd': db = optarg; break;
        case 'o': out = optarg; break;
        case 'r': filter = optarg; break;
        case 'q': quiet = 1; break;
        case 'w':
            if (o.nwhere == 64) {
                fprintf(stderr, "shardq report: --where: more than 64 filters\n");
                return CLI_USAGE;
            }
            where[o.nwhere++] = optarg;
            break;
        case 'f': o.formats = optarg; break;
        case 's': o.style = optarg; break;
        case 't':
            if (cli_parse_double("report", "--query-timeout", optarg, 0, 86400, &o.query_timeout))
                return CLI_USAGE;
            break;
        case 'h': fputs(report_usage, stdout); return CLI_OK;
        default: return cli_option_error("report", ch, argv, names);
        }
    }
    if (cli_check_positional("report", argv + optind, argc - optind, 0, 0, "no arguments"))
        return CLI_USAGE;
    if (!*db || !*out) {
        fprintf(stderr, "shardq report: --%s: the name is empty\n", *db ? "out" : "db");
        return CLI_USAGE;
    }
    if (filter && strspn(filter, " \t\r\n") == strlen(filter)) {
        fprintf(stderr, "shardq report: --runs: the condition is empty\n");
        return CLI_USAGE;
    }
    o.filter = filter;
    o.quiet = quiet;
    sq_error err = {0};
    int rc = report_write_opts(db, out, &o, &err);
    if (rc == SQ_OK) return CLI_OK;
    /* an empty sentence: the report said what failed as it went */
    if (err.msg[0]) fprintf(stderr, "shardq report: %s\n", err.msg);
    /* an option it could not use (--runs, --where, --format, --style) */
    return rc == SQ_ERR_SPEC ? CLI_USAGE : CLI_RUNTIME;
}
