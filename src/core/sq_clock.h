/*
** sq_clock.h -- the one clock that every part of shardq times work with:
** sq_clock_s(), declared with the public codec API (shardq/codec.h).
*/
#ifndef SQ_CLOCK_H
#define SQ_CLOCK_H

#include "shardq/codec.h"

#endif
