/*
** fig_speedup.c -- the data of analysis/speedup.gp: the latest model run
** within the selection with speedups, its schemes, each scheme's predicted
** speedup against the GPU count, and the model and platform predicted.
*/
#include "report/figdata.h"

#include <string.h>

/* sql into b with {sel} as the selected model runs and {run} as the latest
** of them with speedups, as a subquery (the script wrote its value in: no
** value of the database is written into SQL). */
static void expand(report_buf *b, const char *sql)
{
    while (*sql) {
        if (!strncmp(sql, "{sel}", 5)) {
            fig_sel(b, "model");
            sql += 5;
        } else if (!strncmp(sql, "{run}", 5)) {
            expand(b, "(SELECT max(id) FROM ({sel}) WHERE id IN (SELECT run_id FROM "
                      "model_results WHERE speedup IS NOT NULL))");
            sql += 5;
        } else {
            size_t k = strcspn(sql + 1, "{") + 1;
            report_printf(b, "%.*s", (int)k, sql);
            sql += k;
        }
    }
}

int figdata_speedup(fig_data *f)
{
    report_buf q = {0};
    double nmodel;
    expand(&q, "SELECT count(*) FROM ({sel}) WHERE id IN (SELECT run_id FROM model_results "
               "WHERE speedup IS NOT NULL)");
    if (fig_number(f, "nmodel", &q, &nmodel)) return -1;
    expand(&q, "SELECT {run}");
    if (fig_text(f, "run", &q)) return -1;
    if (nmodel == 0) return 0; /* the script says why it draws nothing */
    expand(&q, "SELECT preset FROM (SELECT DISTINCT scheme AS preset FROM model_results WHERE "
               "run_id = {run} AND speedup IS NOT NULL) ORDER BY " REPORT_ORDER("preset")
               ", preset");
    if (fig_texts(f, "schemes", &q)) return -1;
    expand(&q, "SELECT scheme, gpus, speedup FROM model_results WHERE run_id = {run} AND "
               "speedup IS NOT NULL ORDER BY scheme, gpus");
    if (fig_table(f, "rows", &q) < 0) return -1;
    /* json_valid: a config that is not JSON gave the script '' (sqlite3's
    ** error went to stderr and the figure was drawn); here it would fail the
    ** query and the figure */
    expand(&q, "SELECT coalesce(CASE WHEN json_valid(config) THEN json_extract(config, "
               "'$.model') END, '') FROM runs WHERE id = {run}");
    if (fig_text(f, "mname", &q)) return -1;
    expand(&q, "SELECT coalesce(CASE WHEN json_valid(config) THEN json_extract(config, "
               "'$.platform') END, '') FROM runs WHERE id = {run}");
    return fig_text(f, "mplat", &q);
}
