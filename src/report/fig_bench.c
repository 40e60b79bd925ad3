/*
** fig_bench.c -- the data of analysis/bench.gp: the latest bench run within
** the selection, at the largest thread count it measured: each codec
** operation's throughput against the input size, and the plain copy's.
*/
#include "report/figdata.h"

int figdata_bench(fig_data *f)
{
    double nbench;
    if (fig_number(f, "nbench", SQ_FIG_BENCH_COUNT, NULL, &nbench) ||
        fig_text(f, "run", SQ_FIG_BENCH_RUN, NULL))
        return -1;
    if (nbench == 0) return 0; /* the script says why it draws nothing */
    if (fig_number(f, "threads", SQ_FIG_BENCH_THREADS, NULL, NULL) ||
        fig_text(f, "where", SQ_FIG_BENCH_WHERE, NULL) ||
        fig_texts(f, "ops", SQ_FIG_BENCH_OPS, NULL) ||
        fig_table(f, "rows", SQ_FIG_BENCH_ROWS, NULL) < 0 ||
        fig_number(f, "nnoisy", SQ_FIG_BENCH_NOISY, NULL, NULL))
        return -1;
    return fig_table(f, "copy", SQ_FIG_BENCH_COPY, NULL) < 0 ? -1 : 0;
}
