/*
** validate.c -- the cost model against published results (cost.h,
** sq_cost_validate): each row of a validation table predicted on a platform,
** its speedup set beside the published one, and the rows that used a figure
** fitted to themselves kept apart from those truly predicted; `shardq model
** --validate` prints the comparison.
*/
#include "shardq/cost.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void sq_cost_table_name(const char *table, char *out, size_t len)
{
    const char *base = strrchr(table, '/');
    base = base ? base + 1 : table;
    size_t n = strlen(base);
    if (n > 4 && !strcmp(base + n - 4, ".ini")) n -= 4;
    snprintf(out, len, "%.*s", (int)n, base);
}

static void tally_add(sq_cost_tally *t, double e, int bad)
{
    t->rows++, t->out += bad;
    if (fabs(e) > t->worst) t->worst = fabs(e);
}

/* The figures of p fitted to this very row, comma-separated. */
static void fitted_figures(const sq_cost_platform *p, const char *tname, const char *label,
                           char *out, size_t len)
{
    out[0] = 0;
    for (int f = 0; f < SQ_COST_NFIGURES; f++)
        if (sq_cost_fitted_to(p, (sq_cost_figure)f, tname, label)) {
            size_t n = strlen(out);
            snprintf(out + n, len - n, "%s%s", n ? ", " : "",
                     sq_cost_figure_key((sq_cost_figure)f));
        }
}

int sq_cost_validate(const sq_cost_validation *v, const char *table, const sq_cost_platform *p,
                     const sq_scheme *baseline, const sq_scheme *s,
                     sq_cost_validation_report *rep, sq_error *err)
{
    if (!v || !table || !p || !baseline || !s || !rep)
        return sq_error_set(err, SQ_ERR_ARG, "sq_cost_validate: a NULL argument");
    memset(rep, 0, sizeof *rep);
    sq_cost_table_name(table, rep->table_name, sizeof rep->table_name);
    for (int r = 0; r < v->nrows; r++) {
        const sq_cost_validation_row *row = &v->rows[r];
        sq_cost_validated_row *out = &rep->rows[r];
        sq_cost_parallel par = {.gpus = v->gpus, .tp = row->tp, .pp = row->pp,
                                .micro_batch = v->micro_batch, .accum = v->accum,
                                .overlap = v->overlap};
        sq_cost_model_shape m;
        int rc = sq_cost_model_read(row->model, &m, err);
        if (rc == SQ_OK) rc = sq_cost_iteration(p, &m, &par, baseline, &out->base, err);
        if (rc == SQ_OK) rc = sq_cost_iteration(p, &m, &par, s, &out->scheme, err);
        if (rc != SQ_OK) return rc; /* rep->nrows rows are done */
        fitted_figures(p, rep->table_name, row->label, out->fitted, sizeof out->fitted);
        out->speedup = out->base.iteration / out->scheme.iteration;
        out->error = out->speedup / row->speedup - 1;
        out->out_of_tolerance = fabs(out->error) > v->tolerance;
        /* rows that used a figure fitted to themselves match by
        ** construction: they are counted apart */
        tally_add(out->fitted[0] ? &rep->self : &rep->predicted, out->error,
                  out->out_of_tolerance);
        rep->nrows = r + 1;
    }
    return SQ_OK;
}
