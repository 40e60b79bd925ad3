/*
** where.h -- knob filters, `--where KEY=VALUE`, shared by `shardq report`,
** `db list` and `db export` (where.c).
**
** A filter is turned into one SQL condition on the runs table, so that the
** three commands select by the same rule:
**   - KEY a column of runs (id, kind, status, sweep, grid, preset, scheme,
**     topo, device, trace, seed, host, version): that column equals VALUE;
**     scheme=NAME without '=' in NAME matches the preset the scheme started
**     from (scheme=sdp4bit), scheme=TEXT with knobs the canonical text;
**   - KEY a param a run stored (every scheme knob, grad.inter.bits, ...;
**     trace.*, model.*, train.*, paths): that param equals VALUE;
**   - KEY a shorthand A.B of params A.X.B (grad.bits for grad.intra.bits
**     and grad.inter.bits, as a recipe writes it): every one of them
**     equals VALUE.
** Numbers compare as numbers (grad.bits=4 matches "4" and "4.0"), other
** values as exact text. Several filters must all hold.
*/
#ifndef SQ_CLI_WHERE_H
#define SQ_CLI_WHERE_H

#include <stddef.h>

struct sqlite3;

/* The condition of the filters f[0..n) as SQL text (malloc'd) whose run
** columns are prefixed with col (e.g. "r." or ""); "1" when n = 0. A KEY
** that is neither a column, a stored param nor a shorthand of stored
** params, or an item without '=', is refused: the message ("shardq CMD:
** --where: ...") goes to stderr and NULL is returned with *usage = 1
** (0: out of memory or a failed read, also said). */
char *cli_where_sql(struct sqlite3 *db, const char *cmd, const char *const *f, int n,
                    const char *col, int *usage);

#endif
