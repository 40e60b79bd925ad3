/*
** fig_hadamard.c -- the data of analysis/hadamard.gp: every gradient
** configuration (bits per hop, group size, rounding) replayed both without
** and with a Hadamard transform, its mean relative L2 error each way with
** a 95% interval and, past 16 configurations, the change it brings per
** series (bits and rounding) against the group size.
*/
#include "report/figdata.h"

/* Up to this many configurations are bars side by side; more are the
** change alone, one line per series. */
#define MAX_BARS 16

int figdata_hadamard(fig_data *f)
{
    double ncfg;
    if (fig_ranges(f, "drawn", SQ_FIG_HADAMARD_DRAWN, NULL) ||
        fig_text(f, "sizes", SQ_FIG_HADAMARD_SIZES, NULL) ||
        fig_number(f, "ncfg", SQ_FIG_HADAMARD_CONFIGS, NULL, &ncfg) ||
        fig_table(f, "table", SQ_FIG_HADAMARD_TABLE, NULL) < 0)
        return -1;
    int many = ncfg > MAX_BARS;
    fig_set_number(f, "many", many);
    if (!many) return 0;
    if (fig_table(f, "change", SQ_FIG_HADAMARD_CHANGE, NULL) < 0) return -1;
    return fig_texts(f, "series", SQ_FIG_HADAMARD_SERIES, NULL);
}
