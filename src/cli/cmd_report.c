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

#define report_usage cli_help("shardq-report")

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
    return cli_exit_status(rc);
}
