/*
** summary_queries.h -- the store's queries behind `shardq demo`'s summary
** (summary_queries.c): which done run a phase can reuse, and the figures
** of its three lines and of the report's Setup, over a set of run ids.
**
** Every function returns SQ_OK or a negative kind with err naming the
** database and what was asked; a figure the runs do not hold (no row, or
** a NULL) is NaN, not a failure. A set of runs is ids[0 .. n), bound as
** one JSON array: no value is ever written into the SQL text.
*/
#ifndef SQ_STORE_SUMMARY_QUERIES_H
#define SQ_STORE_SUMMARY_QUERIES_H

#include "shardq/store.h"

#include <stddef.h>
#include <stdint.h>

SQ_BEGIN_DECLS

/* The done run with this key into *id; 0 when there is none. */
int sq_store_done_run_by_key(sq_store *s, const char *key, int64_t *id, sq_error *err);

/* The newest done bench run of the C reference on the cpu with these
** sizes (a JSON array of MB, as stored: "[1,4]"), operations (a JSON array
** of names) and minimum time, with figures; steady: only one none of
** whose figures stayed noisy (SQ_BENCH_NOISY: the spread over a quarter of
** the median, or SQ_BENCH_SLOW: more than 1 thread under half of 1
** thread's). *id 0: none. */
int sq_store_find_bench_run(sq_store *s, const char *sizes_json, const char *ops_json,
                            double min_time, int steady, int64_t *id, sq_error *err);

/* The newest done cost-model run of model on platform that predicted
** more than one GPU count for every scheme of schemes[0 .. n). *id 0:
** none. */
int sq_store_find_model_run(sq_store *s, const char *platform, const char *model,
                            const char *const *schemes, size_t n, int64_t *id, sq_error *err);

/* The mean relative L2 error on path ("grad", "weight") of the replays
** of preset among ids that ran both paths. */
int sq_store_summary_replay_error(sq_store *s, const int64_t *ids, size_t n, const char *preset,
                                  const char *path, double *v, sq_error *err);

/* What collective (e.g. "grad_reducescatter") of the same replays sent
** per real parameter on link ("intra", "inter"): bits, the padding paid
** for (the bytes table's bits_per_param). */
int sq_store_summary_replay_bits(sq_store *s, const int64_t *ids, size_t n, const char *preset,
                                 const char *collective, const char *link, double *v,
                                 sq_error *err);

/* The last validation loss of the training runs of preset among ids: the
** latest step of any of them (final_val), and that of each run, into
** vals[0 .. *count) (at most max; *count may say more). */
int sq_store_summary_final_val(sq_store *s, const int64_t *ids, size_t n, const char *preset,
                               double *v, sq_error *err);
int sq_store_summary_final_vals(sq_store *s, const int64_t *ids, size_t n, const char *preset,
                                double *vals, size_t max, size_t *count, sq_error *err);

/* The predicted speedup of scheme in model run `run` at gpus GPUs (0: the
** most it predicted), and that most. */
int sq_store_summary_speedup(sq_store *s, int64_t run, const char *scheme, int gpus, double *v,
                             sq_error *err);
int sq_store_summary_max_gpus(sq_store *s, int64_t run, int *gpus, sq_error *err);

/* Run run's param key, its host, and the distinct seeds of ids ("1, 2,
** 3"), into buf; "?" when there is none. */
int sq_store_run_param_text(sq_store *s, int64_t run, const char *key, char *buf, size_t len,
                            sq_error *err);
int sq_store_run_host(sq_store *s, int64_t run, char *buf, size_t len, sq_error *err);
int sq_store_summary_seeds(sq_store *s, const int64_t *ids, size_t n, char *buf, size_t len,
                           sq_error *err);

SQ_END_DECLS
#endif /* SQ_STORE_SUMMARY_QUERIES_H */
