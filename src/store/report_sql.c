/*
** report_sql.c -- the pieces of the report's queries (report_sql.h): SQL
** text grown piece by piece, the labels every table and figure gives a
** run, and the selections the figures start from.
*/
#include "store/report_sql.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sq_sql_add(sq_sql *b, const char *fmt, ...)
{
    while (!b->oom) {
        /* format into the room left; grow and try again when it did not fit */
        size_t room = b->cap - b->n;
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(room ? b->p + b->n : NULL, room, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
        } else if ((size_t)k < room) {
            b->n += (size_t)k;
            return;
        } else {
            size_t cap = b->cap ? 2 * b->cap : 8192;
            while (cap <= b->n + (size_t)k) cap *= 2;
            char *p = realloc(b->p, cap);
            if (p) {
                b->p = p;
                b->cap = cap;
            } else {
                b->oom = 1;
            }
        }
    }
}

void sq_sql_free(sq_sql *b)
{
    free(b->p);
    *b = (sq_sql){0};
}

/* The same SQL as labels() in analysis/NAME.gp: change both together. The
** knobs of a label come in the order of their names, so that the same run
** gets the same label in every query (group_concat alone has no order). vv
** is MATERIALIZED: built once, not again for every run whose label reads it. */
void sq_sql_labels(sq_sql *b, const char *cond)
{
    sq_sql_add(
        b,
        "kv AS (SELECT p.run_id AS id, u.kind, u.preset, p.key, p.value, replace("
        "replace(replace(p.key, 'grad.intra.', ''), 'grad.inter.', ''), 'grad.', '') AS k FROM"
        " params p JOIN runs u ON u.id = p.run_id WHERE p.run_id IN r AND (%s)), vk AS"
        " (SELECT kind, preset, key FROM kv GROUP BY kind, preset, key HAVING count(DISTINCT"
        " value) > 1), vv AS MATERIALIZED (SELECT kv.id, min(kv.key) AS o, CASE WHEN count(DISTINCT kv.value)"
        " = 1 AND (count(*) > 1 OR min(kv.key) NOT LIKE 'grad.int%%') THEN kv.k || '=' ||"
        " min(kv.value) ELSE trim(coalesce('intra.' || kv.k || '=' || max(CASE WHEN kv.key LIKE"
        " 'grad.intra.%%' THEN kv.value END), '') || ' ' || coalesce('inter.' || kv.k || '=' ||"
        " max(CASE WHEN kv.key LIKE 'grad.inter.%%' THEN kv.value END), '')) END AS t FROM kv JOIN"
        " vk ON vk.kind = kv.kind AND vk.preset = kv.preset AND vk.key = kv.key GROUP BY kv.id,"
        " kv.k), ex AS (SELECT kind, preset, count(DISTINCT coalesce(sweep, '')) AS ns,"
        " count(DISTINCT coalesce(sweep, '') || '/' || coalesce(grid, '')) AS ng FROM runs WHERE"
        " id IN r GROUP BY kind, preset), lab AS (SELECT u.id, u.preset, u.preset || CASE WHEN"
        " ex.ng > 1 THEN ' [' || CASE WHEN ex.ns > 1 THEN coalesce(u.sweep, 'no sweep') ||"
        " coalesce('/' || nullif(u.grid, 'sweep'), '') ELSE coalesce(u.grid, 'no grid') END ||"
        " ']' ELSE '' END || coalesce(' ' || (SELECT group_concat(t, ' ') FROM (SELECT t FROM vv"
        " WHERE vv.id = u.id ORDER BY o)), '') AS label FROM runs u JOIN ex ON ex.kind = u.kind"
        " AND ex.preset IS u.preset WHERE u.id IN r)",
        cond);
}

const char *sq_fig_path(int path) { return path == SQ_FIG_WEIGHT ? "weight" : "grad"; }

const char *sq_fig_collective(int path)
{
    return path == SQ_FIG_WEIGHT ? "weight_allgather" : "grad_reducescatter";
}

void sq_fig_selwhere(sq_sql *b, const char *cond)
{
    sq_sql_add(b, "SELECT id FROM runs WHERE status = 'done' AND (%s) AND " SQ_WITHIN, cond);
}

void sq_fig_sel(sq_sql *b, const char *kind)
{
    sq_sql_add(b, "SELECT id FROM runs WHERE status = 'done' AND kind = '%s' AND " SQ_WITHIN, kind);
}

void sq_fig_replay_hops(sq_sql *b, int path)
{
    sq_sql_add(b, "WITH r AS (");
    sq_fig_sel(b, "replay");
    sq_sql_add(b, "), lk AS (SELECT run_id AS id, coalesce(max(CASE WHEN link = 'inter' AND "
                  "sent_elems > 0 THEN 'inter' END), 'intra') AS link, sum(sent_elems > 0) "
                  "AS hops FROM bytes WHERE run_id IN r AND collective = '%s' GROUP BY "
                  "run_id), ",
               sq_fig_collective(path));
}

void sq_fig_labels_but_size(sq_sql *b, int path)
{
    char cond[160];
    snprintf(cond, sizeof cond,
             "p.key LIKE '%s.%%' AND p.key NOT LIKE '%%.bits' AND p.key NOT LIKE '%%.group'",
             sq_fig_path(path));
    sq_sql_labels(b, cond);
}
