/*
** fig_bench.c -- the data of analysis/bench.gp: the latest bench run within
** the selection, at the largest thread count it measured: each codec
** operation's throughput against the input size, and the plain copy's.
*/
#include "report/figdata.h"

#include <string.h>

/* sql into b with {sel} as the selected bench runs, {run} as the latest of
** them with results and {threads} as its largest thread count, the last two
** as subqueries (the script wrote their values in: no value of the
** database is written into SQL). */
static void expand(report_buf *b, const char *sql)
{
    while (*sql) {
        if (!strncmp(sql, "{sel}", 5)) {
            fig_sel(b, "bench");
            sql += 5;
        } else if (!strncmp(sql, "{run}", 5)) {
            expand(b, "(SELECT max(id) FROM ({sel}) WHERE id IN (SELECT run_id FROM "
                      "bench_results))");
            sql += 5;
        } else if (!strncmp(sql, "{threads}", 9)) {
            report_printf(b, "(SELECT max(threads) FROM bench_results WHERE run_id = ");
            expand(b, "{run})");
            sql += 9;
        } else {
            size_t k = strcspn(sql + 1, "{") + 1;
            report_printf(b, "%.*s", (int)k, sql);
            sql += k;
        }
    }
}

/* A figure under half of the same op and size's 1-thread figure on more than
** 1 thread (SQ_BENCH_SLOW). */
#define SLOW                                                                                   \
    "(b.threads > 1 AND b.gb_per_s < 0.5 * (SELECT o.gb_per_s FROM bench_results o WHERE "     \
    "o.run_id = b.run_id AND o.op = b.op AND o.elements = b.elements AND o.threads = 1))"

int figdata_bench(fig_data *f)
{
    report_buf q = {0};
    double nbench;
    expand(&q, "SELECT count(*) FROM ({sel}) WHERE id IN (SELECT run_id FROM bench_results)");
    if (fig_number(f, "nbench", &q, &nbench)) return -1;
    expand(&q, "SELECT {run}");
    if (fig_text(f, "run", &q)) return -1;
    if (nbench == 0) return 0; /* the script says why it draws nothing */
    expand(&q, "SELECT {threads}");
    if (fig_number(f, "threads", &q, NULL)) return -1;
    expand(&q, "SELECT coalesce(CASE WHEN json_valid(config) THEN json_extract(config, "
               "'$.description') END, device, '') FROM runs WHERE id = {run}");
    if (fig_text(f, "where", &q)) return -1;
    expand(&q, "SELECT op FROM bench_results WHERE run_id = {run} AND threads = {threads} AND "
               "op <> 'copy' GROUP BY op ORDER BY max(gb_per_s) DESC");
    if (fig_texts(f, "ops", &q)) return -1;
    expand(&q, "SELECT op, elements * 4.0 / 1048576, gb_per_s, coalesce(gb_per_s_std, 0), "
               "coalesce(" SLOW ", 0) FROM bench_results b WHERE run_id = {run} AND threads = "
               "{threads} ORDER BY op, elements");
    if (fig_table(f, "rows", &q) < 0) return -1;
    expand(&q, "SELECT count(*) FROM bench_results b WHERE run_id = {run} AND threads = "
               "{threads} AND (gb_per_s_std > 0.25 * gb_per_s OR " SLOW ")");
    if (fig_number(f, "nnoisy", &q, NULL)) return -1;
    expand(&q, "SELECT elements * 4.0 / 1048576, copy_gb_per_s FROM bench_results WHERE run_id = "
               "{run} AND threads = {threads} AND op = (SELECT min(op) FROM bench_results WHERE "
               "run_id = {run}) ORDER BY elements");
    return fig_table(f, "copy", &q) < 0 ? -1 : 0;
}
