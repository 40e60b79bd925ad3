/*
** readtiles.h -- the pieces in which a trace is read when it is read tile
** by tile: the replay's gradient staging (replay.c) and the reader alone
** that bounds it (readbound.c) read alike.
*/
#ifndef SQ_TRACE_READTILES_H
#define SQ_TRACE_READTILES_H

/* Elements of a tile (the staging rounds it to whole groups): a tile's
** values of every worker and their fp64 sum stay in L2. */
#define SQ_READ_TILE 16384u

/* Elements of the trace a thread reads before it drops their pages again,
** so that the files' resident pages stay a few MB. */
#define SQ_READ_RELEASE (16 * SQ_READ_TILE)

#endif
