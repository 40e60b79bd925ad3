/*
** fig_error_bits.c -- the data of analysis/error-bits.gp: per path, the
** schemes (a preset and the knobs other than bits and group that vary
** between its runs), every configuration of a scheme (its mean error over
** its seeds at its bits per real parameter, with the 95% interval of that
** mean) and the front of those no other configuration of the scheme beats
** with as few bits or fewer.
*/
#include "report/figdata.h"

/* The series of path p (arrays p[1..p_n]) and, in tsv(every) and
** tsv(front), the points of all of them, each row its label first. */
static int path(fig_data *f, const char *p, int which, const char *every, const char *front)
{
    const sq_figure_knobs k = {.path = which};
    if (fig_texts(f, p, SQ_FIG_ERROR_BITS_SERIES, &k) ||
        fig_table(f, every, SQ_FIG_ERROR_BITS_EVERY, &k) < 0)
        return -1;
    return fig_table(f, front, SQ_FIG_ERROR_BITS_FRONT, &k) < 0 ? -1 : 0;
}

int figdata_error_bits(fig_data *f)
{
    if (path(f, "grad", SQ_FIG_GRAD, "gevery", "gfront") ||
        path(f, "weight", SQ_FIG_WEIGHT, "wevery", "wfront"))
        return -1;
    /* drawn: the runs drawn; old: those stored before bits_per_param */
    return fig_ranges(f, "drawn", SQ_FIG_ERROR_BITS_DRAWN, NULL) ||
                   fig_ranges(f, "old", SQ_FIG_ERROR_BITS_OLD, NULL)
               ? -1
               : 0;
}
