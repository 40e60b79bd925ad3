/*
** progress.h -- a progress bar on stderr for long work.
**
** It draws only when stderr is a terminal, no more than ten times a second,
** and not before the work has run for half a second (so quick commands stay
** silent): label, bar, percentage, count, rate and ETA on one line, redrawn
** in place. When stderr is not a terminal (a log file, CI) it prints nothing,
** and SHARDQ_PROGRESS=0 turns it off on a terminal too.
**
** Every function accepts NULL (sq_progress_start returns NULL when there is
** nothing to draw on), so callers never test for it.
*/
#ifndef SQ_PROGRESS_H
#define SQ_PROGRESS_H

#include <stddef.h>

typedef struct sq_progress sq_progress;

/* Starts a bar for total units of work (total 0: no percentage nor ETA). */
sq_progress *sq_progress_start(const char *label, size_t total);
/* done units of total are finished; draws when it is time to. */
void sq_progress_update(sq_progress *p, size_t done);
/* Erases the bar, so that output can be printed; the next update redraws it. */
void sq_progress_pause(sq_progress *p);
/* Erases the bar and frees p. */
void sq_progress_finish(sq_progress *p);

#endif
