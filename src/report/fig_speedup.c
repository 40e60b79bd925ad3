/*
** fig_speedup.c -- the data of analysis/speedup.gp: the latest model run
** within the selection with speedups, its schemes, each scheme's predicted
** speedup against the GPU count, and the model and platform predicted.
*/
#include "report/figdata.h"

int figdata_speedup(fig_data *f)
{
    double nmodel;
    if (fig_number(f, "nmodel", SQ_FIG_SPEEDUP_COUNT, NULL, &nmodel) ||
        fig_text(f, "run", SQ_FIG_SPEEDUP_RUN, NULL))
        return -1;
    if (nmodel == 0) return 0; /* the script says why it draws nothing */
    if (fig_texts(f, "schemes", SQ_FIG_SPEEDUP_SCHEMES, NULL) ||
        fig_table(f, "rows", SQ_FIG_SPEEDUP_ROWS, NULL) < 0 ||
        fig_text(f, "mname", SQ_FIG_SPEEDUP_MODEL, NULL))
        return -1;
    return fig_text(f, "mplat", SQ_FIG_SPEEDUP_PLATFORM, NULL);
}
