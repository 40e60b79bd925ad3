/*
** help.c -- looking up the built-in --help texts (help.h).
*/
#include "help.h"

#include <string.h>

#define HELP_DIR "src/cli/help/"

const char *cli_help(const char *page)
{
    size_t n = strlen(page), dir = sizeof HELP_DIR - 1;
    for (const cli_help_file *h = cli_help_files; h->name; h++) {
        const char *name = h->name;
        if (!strncmp(name, HELP_DIR, dir) && !strncmp(name + dir, page, n) &&
            !strcmp(name + dir + n, ".txt"))
            return h->text;
    }
    fprintf(stderr, "shardq: no help text %s is built in\n", page);
    return "";
}

void cli_help_print(const char *page, const char *mark, const char *value, FILE *f)
{
    const char *text = cli_help(page), *hit;
    size_t m = strlen(mark);
    while ((hit = strstr(text, mark))) {
        fwrite(text, 1, (size_t)(hit - text), f);
        fputs(value, f);
        text = hit + m;
    }
    fputs(text, f);
}
