/*
** fig_bytes.c -- the data of analysis/bytes.gp: per scheme (a preset and
** the knobs that change the bytes and vary between its runs), the bits each
** worker sent per parameter per iteration, by collective and link level,
** mean over the scheme's replay and training runs.
*/
#include "report/figdata.h"

int figdata_bytes(fig_data *f)
{
    /* modal: the schemes drawn at their most-run configuration; a bar per
    ** scheme: its label, then weight and gradient on intra-node links, then
    ** on inter-node links */
    if (fig_ranges(f, "drawn", SQ_FIG_BYTES_DRAWN, NULL) ||
        fig_number(f, "modal", SQ_FIG_BYTES_MODAL, NULL, NULL) ||
        fig_number(f, "ncat", SQ_FIG_BYTES_BARS, NULL, NULL))
        return -1;
    return fig_table(f, "table", SQ_FIG_BYTES_TABLE, NULL) < 0 ? -1 : 0;
}
