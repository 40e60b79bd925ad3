/*
** fig_loss.c -- the data of analysis/loss.gp: the training runs with steps,
** each named by its label (and its seed where its label has several), and
** their curves: the training loss as a moving mean, the validation loss.
*/
#include "report/figdata.h"

int figdata_loss(fig_data *f)
{
    /* the runs in preset order: id, name, preset */
    static const char *const runs[] = {"ids", "names", "presetof"};
    double max;
    if (fig_ranges(f, "drawn", SQ_FIG_LOSS_DRAWN, NULL) ||
        fig_columns(f, runs, 3, SQ_FIG_LOSS_RUNS, NULL) ||
        fig_number(f, "maxstep", SQ_FIG_LOSS_MAX_STEP, NULL, &max))
        return -1;
    /* the moving mean's window, and the first fifth of a long run left out
    ** (a multiple of 10 steps from 100 on) */
    long long maxstep = (long long)max;
    long long win = maxstep >= 40 ? maxstep / 10 : 1;
    long long from = maxstep >= 40 ? (maxstep >= 100 ? 10 * (maxstep / 50) : maxstep / 5) : 0;
    fig_set_number(f, "win", (double)win);
    fig_set_number(f, "from", (double)from);
    const sq_figure_knobs k = {.window = win, .from = from};
    if (fig_table(f, "train", SQ_FIG_LOSS_TRAIN, &k) < 0) return -1;
    return fig_table(f, "val", SQ_FIG_LOSS_VAL, &k) < 0 ? -1 : 0;
}
