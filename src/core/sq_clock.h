/*
** sq_clock.h -- the one clock that every part of shardq times work with.
**
** The core may depend on libc only, so the clock lives here where the
** backend, the trainer, the replay and the command line all can reach it.
*/
#ifndef SQ_CLOCK_H
#define SQ_CLOCK_H

/* Seconds on the monotonic clock: only differences mean anything. Wall-clock
** timestamps (what a stored run records) are CLOCK_REALTIME, not this. */
double sq_clock_s(void);

#endif
