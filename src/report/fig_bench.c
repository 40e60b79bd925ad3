/* fig_bench.c -- placeholder until converted */
#include "report/figdata.h"

#include <stdio.h>

int figdata_bench(fig_data *f)
{
    fprintf(stderr, "shardq report: %s: not converted\n", f->name);
    f->failed = 1;
    return -1;
}
