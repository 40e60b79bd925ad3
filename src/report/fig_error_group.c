/*
** fig_error_group.c -- the data of analysis/error-group.gp: per path, the
** lines (a scheme and a bit width) replayed at two group sizes or more, and
** every point of them: the mean error at a group size with the 95% interval
** of that mean and the bits per real parameter the hop cost.
*/
#include "report/figdata.h"

#include <stdio.h>

/* Path p's lines (arrays p, p_bits, p_scheme in the order of the lines)
** and their points (tsv(p)), its bit widths (b) and schemes (k) for the
** key. */
static int path(fig_data *f, const char *p, int which, const char *b, const char *k)
{
    const sq_figure_knobs kn = {.path = which};
    char bits[32], scheme[32];
    snprintf(bits, sizeof bits, "%s_bits", p);
    snprintf(scheme, sizeof scheme, "%s_scheme", p);
    if (fig_texts(f, p, SQ_FIG_ERROR_GROUP_LINES, &kn) ||
        fig_texts(f, bits, SQ_FIG_ERROR_GROUP_LINE_BITS, &kn) ||
        fig_texts(f, scheme, SQ_FIG_ERROR_GROUP_LINE_SCHEMES, &kn) ||
        fig_texts(f, b, SQ_FIG_ERROR_GROUP_BITS, &kn) ||
        fig_texts(f, k, SQ_FIG_ERROR_GROUP_SCHEMES, &kn))
        return -1;
    return fig_table(f, p, SQ_FIG_ERROR_GROUP_POINTS, &kn) < 0 ? -1 : 0;
}

int figdata_error_group(fig_data *f)
{
    if (path(f, "grad", SQ_FIG_GRAD, "gb", "gk") || path(f, "weight", SQ_FIG_WEIGHT, "wb", "wk"))
        return -1;
    return fig_ranges(f, "drawn", SQ_FIG_ERROR_GROUP_DRAWN, NULL);
}
