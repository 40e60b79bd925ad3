/*
** report_sql.h -- what the report's queries in the store are built from
** (report_sql.c, cursor.c): SQL text grown piece by piece, the pieces the
** tables and the figures share, and a cursor over a finished text.
**
** Private to src/store. Every piece is the store's own text: the names it
** takes (a path, a kind) come from the fixed tables of the files that
** build the queries, and every value is a bound parameter.
*/
#ifndef SQ_STORE_REPORT_SQL_H
#define SQ_STORE_REPORT_SQL_H

#include "store/store_query.h"

#include <stddef.h>

/* SQL text being built; an allocation that failed is remembered (oom) and
** reported once, when the text is prepared. */
typedef struct sq_sql {
    char *p;
    size_t n, cap;
    int oom;
} sq_sql;
void sq_sql_add(sq_sql *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sq_sql_free(sq_sql *b);

/* A cursor over sql (freed here) with ids bound to ?1 (NULL: every run)
** and ints[0 .. nints) to ?2, ?3, ... */
int sq_store_cursor_prepare_sql(sq_store *s, sq_sql *sql, const char *ids, const int64_t *ints, int nints,
                      sq_store_cursor **out, sq_error *err);

/* A condition on runs.id: within the selected runs bound to ?1. */
#define SQ_WITHIN "(?1 IS NULL OR runs.id IN (SELECT value FROM json_each(?1)))"

/* An ORDER BY expression for a column of preset names: the order of
** 'shardq schemes' (analysis/NAME.gp, presets), others last. */
#define SQ_PRESET_ORDER(col)                                                               \
    "instr(' baseline qw qwd ulq tlq tlqhs sdp4bit zeropp zeropp8 qsdp ' || " col " || ' ', ' ' || " \
    col " || ' ')"

/* SQL of the 0.975 quantile of Student's t with df (a column) degrees of
** freedom: exact to df 9, then 1.96 + 2.5/df (within 1%). */
#define SQ_T975                                                                                 \
    "CASE WHEN df = 1 THEN 12.71 WHEN df = 2 THEN 4.303 WHEN df = 3 THEN 3.182 WHEN df = 4"     \
    " THEN 2.776 WHEN df = 5 THEN 2.571 WHEN df = 6 THEN 2.447 WHEN df = 7 THEN 2.365 WHEN"    \
    " df = 8 THEN 2.306 WHEN df = 9 THEN 2.262 ELSE 1.96 + 2.5 / df END"

/* The common table expressions that label each run as the figures do
** (analysis/NAME.gp, labels()): its preset, then the knobs matching cond
** whose values vary between the selected runs of that preset and kind.
** Needs a CTE r of run ids before it; defines lab(id, preset, label). */
void sq_sql_labels(sq_sql *b, const char *cond);

/* The name of a path (SQ_FIG_GRAD, SQ_FIG_WEIGHT) and of its collective
** as the bytes table names it. */
const char *sq_fig_path(int path);
const char *sq_fig_collective(int path);

/* "SELECT id FROM runs WHERE status = 'done' AND (cond) AND SQ_WITHIN":
** the done runs a figure may draw; sq_fig_sel the same for one kind (a
** literal of the store's). */
void sq_fig_selwhere(sq_sql *b, const char *cond);
void sq_fig_sel(sq_sql *b, const char *kind);
/* "WITH r AS (the selected replay runs), lk AS (id, link, hops), ": per
** run, the link level path's collective was measured on (inter when its
** inter-node hop sent anything, else intra) and how many hops sent. */
void sq_fig_replay_hops(sq_sql *b, int path);
/* sq_sql_labels over the knobs of path other than bits and group size
** (the figures that draw against those): needs r, defines lab. */
void sq_fig_labels_but_size(sq_sql *b, int path);

/* The SQL of a replay figure's query (error-bits, error-group, hadamard,
** bias: figure_replay.c) into b; 0 when q is none of theirs. */
int sq_fig_replay_sql(sq_sql *b, sq_figure_query q, const sq_figure_knobs *k);

#endif /* SQ_STORE_REPORT_SQL_H */
