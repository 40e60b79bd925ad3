/*
** fig_bias.c -- the data of analysis/bias.gp: per path, the schemes (a
** preset and the knobs that vary between its runs) and every replay run's
** mean signed error and mean squared error over its steps.
*/
#include "report/figdata.h"

#include <stdio.h>

/* Path p's series and runs: pooled (the runs of a preset that differ only
** in bits and group size as one) when the panel has too many. */
static int path(fig_data *f, const char *p, int which)
{
    char var[32];
    snprintf(var, sizeof var, "%s_pool", p);
    double pool;
    sq_figure_knobs k = {.path = which};
    if (fig_number(f, var, SQ_FIG_BIAS_POOL, &k, &pool)) return -1;
    k.pool = pool != 0;
    if (fig_texts(f, p, SQ_FIG_BIAS_SERIES, &k)) return -1;
    return fig_table(f, p, SQ_FIG_BIAS_ROWS, &k) < 0 ? -1 : 0;
}

int figdata_bias(fig_data *f)
{
    if (path(f, "grad", SQ_FIG_GRAD) || path(f, "weight", SQ_FIG_WEIGHT)) return -1;
    return fig_ranges(f, "drawn", SQ_FIG_BIAS_DRAWN, NULL);
}
