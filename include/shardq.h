/*
** shardq.h -- every public header of libshardq (pkg-config --cflags --libs shardq).
*/
#ifndef SHARDQ_H
#define SHARDQ_H

#include "shardq/codec.h"
#include "shardq/plugin.h"
#include "shardq/backend.h"
#include "shardq/world.h"
#include "shardq/layout.h"
#include "shardq/plan.h"
#include "shardq/metrics.h"
#include "shardq/trace.h"
#include "shardq/store.h"
#include "shardq/store_rows.h"
#include "shardq/replay.h"
#include "shardq/train.h"
#include "shardq/sweep.h"
#include "shardq/cost.h"
#include "shardq/bench.h"
#include "shardq/synth.h"

#endif /* SHARDQ_H */
