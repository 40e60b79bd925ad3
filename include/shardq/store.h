/*
** shardq/store.h -- the SQLite store of runs and their rows.
**
** Part of the public API of libshardq (docs/library.md); every
** declaration below is exported, everything else in the library is hidden.
*/
#ifndef SHARDQ_STORE_H
#define SHARDQ_STORE_H

#include "shardq/codec.h"
#include "shardq/metrics.h"

#include <stddef.h>
#include <stdint.h>

SQ_BEGIN_DECLS

/*
** store -- every run of shardq in one SQLite file (default shardq.db).
**
** The schema (docs/reports.md) lives in STRICT tables; its version is
** PRAGMA user_version, and opening an older file migrates it forward one
** version at a time, each step in its own transaction. The file is in WAL
** mode with a busy timeout, so several processes (the workers of a sweep,
** two sweeps at once) can write to it together; every write below is one
** transaction, so a process killed at any moment leaves the file consistent.
**
** A run is written in three stages: sq_store_run_begin inserts it with
** status 'running' (and its params), sq_store_add_* add its rows as they
** come (one transaction per call), sq_store_run_end marks it 'done' or
** 'failed'. A run killed in between stays 'running' with the host, pid,
** start time and boot of its process; sq_store_run_begin with the same key
** later finds it stale (that process is gone, even if its pid was given to
** another since) and deletes it with all its rows before starting afresh --
** which is how a sweep resumes without duplicates or partial rows. Every
** sq_store_run_begin also marks 'failed' ("interrupted: ...") the other runs
** that dead processes of this host left 'running', so that a killed run
** without a key (a benchmark) does not stay 'running' for ever.
**
** Every write of a run's rows also sets its heartbeat (the time of its last
** write): of a process on another host, that is all one can know.
**
** Errors (shardq.h, "Status codes and errors"): functions return SQ_OK or
** a negative kind, and sq_store_error(s) gives the sentence, which names the
** database file and what failed, e.g.
**   "shardq.db: cannot write: attempt to write a readonly database" (IO)
**   "shardq.db: database is locked (busy for more than 5000 ms)" (BUSY)
** SQ_ERR_BUSY: the database is locked, or a run key is held by a live
** process; SQ_ERR_IO: a failed read or write, a full disk, a read-only
** file; SQ_ERR_FORMAT: a file that is not a database, or not shardq's, or
** of a newer schema; SQ_ERR_NOTFOUND: a missing file or run; SQ_ERR_NOMEM;
** SQ_ERR_INTERRUPTED: a statement stopped by sq_store_limit_queries.
** sq_store_open, which has no handle yet, writes the caller's sq_error.
*/
/* The schema version this build writes (PRAGMA user_version). */
#define SQ_STORE_VERSION 8
/* The busy timeout when none is given: how long a writer waits for another. */
#define SQ_STORE_BUSY_MS 10000

typedef struct sq_store sq_store;

/* Opens path, creating it when absent, and migrates it to SQ_STORE_VERSION.
** A file whose user_version is newer than this build is refused (naming both
** versions). So is, SQ_ERR_FORMAT, a file whose schema is not exactly the
** one shardq creates at its user_version -- a trigger, a view, an index or a
** table of its own, a table whose CREATE text differs, one of shardq's
** missing (ANALYZE's sqlite_stat tables aside) -- naming the entry, e.g.
**   "s.db: the schema holds a trigger 'x' that shardq did not create:
**    refused (...)"
** checked before anything is written (and again after a migration): a
** trigger could change or delete the rows shardq writes or reads. A file
** at version 0 must hold nothing (a new store). Every connection has
** extension loading off (the SQL function load_extension fails), so that
** SQL a user gives may read but never run a library. readonly = 1 opens an
** existing file without writing anything (no migration: an older file is
** read as it is, if its version is known). While the store is open no
** output file of the process replaces its file or its -wal, -shm and
** -journal: the library's file writers refuse those paths. */
int sq_store_open(const char *path, int busy_ms, int readonly, sq_store **out, sq_error *err);
void sq_store_close(sq_store *s);
/* The sentence of the last failure of a call on s. */
const char *sq_store_error(const sq_store *s);
/* The kind of that failure (SQ_OK when none yet). */
int sq_store_status(const sq_store *s);
const char *sq_store_path(const sq_store *s);
/* The underlying connection, for the store's readers (store_rows.h) and
** the queries that have not moved into src/store yet. */
struct sqlite3 *sq_store_db(sq_store *s);
/* The file's schema version (PRAGMA user_version) once opened: always
** SQ_STORE_VERSION unless readonly, where an older file stays as it is and
** 0 means no shardq schema at all (an empty file, another program's). */
int sq_store_version(const sq_store *s);

/* Puts the statements of s's connection under a time limit, for SQL that a
** user gives (`shardq db export QUERY`, `report --runs`): a recursive CTE
** never ends on its own. From this call on, a statement's clock (monotonic,
** wall time) starts at its first sqlite3_step after a prepare or a reset
** and stops when it ends: a step that returns SQLITE_DONE or an error, a
** sqlite3_reset, a sqlite3_finalize. The time between its steps counts
** (the caller writing the rows out). Once it has run for more than seconds,
** the step under way returns SQLITE_INTERRUPT, and sqlite3_errcode of
** sq_store_db(s) says SQLITE_INTERRUPT ("interrupted"), which is how a
** caller tells the limit from another failure and says so; the statement
** must then be reset or finalized. A statement that begins while another
** is still under the clock (not yet ended) shares that one's deadline. A
** statement already begun when this is called is not timed. seconds <= 0
** (or NaN) removes the limit. The limit takes the connection's progress
** handler and trace callback (sqlite3_progress_handler,
** sqlite3_trace_v2): a caller must not set its own. SQ_OK, or SQ_ERR_ARG
** for s NULL. */
int sq_store_limit_queries(sq_store *s, double seconds);

/* The tables of the schema (SQ_STORE_VERSION), in the order they were
** created, with the columns of each primary key: the order in which an
** export lists its rows. *n gets the count. */
typedef struct sq_store_table {
    const char *name;
    const char *order; /* "run_id, step, path" */
} sq_store_table;
const sq_store_table *sq_store_tables(size_t *n);

/* ------------------------------------------------------------------------ */
/* Writing a run                                                            */
/* ------------------------------------------------------------------------ */

typedef struct sq_store_kv {
    const char *key;
    const char *value;
} sq_store_kv;

/* What identifies a run (the runs table). Strings may be NULL (stored NULL). */
typedef struct sq_run_info {
    const char *kind;    /* "replay", "train", ... (not NULL) */
    const char *key;     /* identity of a sweep configuration, for resuming; NULL: none */
    const char *sweep;   /* the sweep's name, or NULL */
    const char *config;  /* the whole configuration as JSON text (not NULL) */
    const char *preset;  /* the preset the scheme started from */
    const char *scheme;  /* the canonical scheme text (sq_scheme_format) */
    const char *topo;    /* "KxG" */
    const char *device;  /* "cpu", "cuda:0" */
    const char *trace;   /* the trace path, or NULL */
    uint64_t seed;
    const char *grid;    /* the recipe's [grid NAME] of a sweep's run, or NULL */
    const char *recipe;  /* the text of that recipe file, or NULL */
} sq_run_info;

/* sq_store_run_begin's outcomes besides a negative kind. SQ_ERR_BUSY with
** *run_id > 0: a process that is alive, or on another host (which cannot
** be checked), is running this key, *run_id is its run and the sentence
** names its pid, host and start; with *run_id = 0 the database was locked. */
enum {
    SQ_STORE_STARTED = 0, /* *run_id is the new run, status 'running' */
    SQ_STORE_DONE = 1     /* a run with this key is already 'done': *run_id is that run */
};

/* In one transaction: when info->key is not NULL, looks for a run with that
** key (done: returns SQ_STORE_DONE; running in a live process of this host,
** or on another host: SQ_ERR_BUSY; otherwise stale or failed: deletes it
** and all its rows); marks 'failed' the runs left 'running' by processes of
** this host that are gone; then inserts the run ('running', this build's
** version, host name, pid, the process's start time and boot id, start
** time in UTC ISO 8601) and its params p[0..np). */
int sq_store_run_begin(sq_store *s, const sq_run_info *info, const sq_store_kv *p, size_t np,
                       int64_t *run_id);
/* After a sq_store_run_begin that started a run in place of one left
** 'running' by a process that is gone: a sentence naming that run, its
** pid, host and start ("run 12 was left 'running' by pid 345 on h1 (since
** ...), a process that is gone: it starts afresh"); NULL otherwise. */
const char *sq_store_notice(const sq_store *s);

/* ------------------------------------------------------------------------ */
/* The processes behind 'running' rows                                      */
/* ------------------------------------------------------------------------ */

enum {
    SQ_PROC_GONE = 0,     /* on this host, and no longer running */
    SQ_PROC_ALIVE = 1,    /* on this host, and running */
    SQ_PROC_ELSEWHERE = 2 /* on another host: cannot be checked from here */
};
/* The state of the process of a 'running' row: host, pid, pid_start (clock
** ticks after boot; < 0: unknown) and boot_id (NULL or "": unknown). Alive
** only when all that is known matches a live process here: a pid that now
** belongs to a process started at another time, or a row from another boot
** of this host, is gone, and so is a process that has ended but is not yet
** waited for (a zombie: a job killed with its parent, not reaped yet). */
int sq_store_proc_state(const char *host, int64_t pid, int64_t start, const char *boot);

/* The run that holds a key, for a caller that waits for it. */
typedef struct sq_run_holder {
    int64_t id;            /* 0: no run has the key */
    char status[16];       /* running, done, failed */
    char host[256];
    int64_t pid;
    char started[40];      /* UTC ISO 8601 */
    char heartbeat[40];    /* its last write (its start when none) */
    double idle_s;         /* seconds since then (NaN when unknown) */
    int state;             /* SQ_PROC_* of a running run; SQ_PROC_GONE otherwise */
} sq_run_holder;
int sq_store_key_holder(sq_store *s, const char *key, sq_run_holder *h);
/* Takes over h's run: marks it 'failed' with the error why, provided it is
** still 'running' under the same host and pid, so that the next
** sq_store_run_begin of its key starts afresh. For a run whose process
** cannot be checked (another host): the caller knows that process is gone,
** or has waited long enough. Returns 0 when taken, 1 when the run had
** changed meanwhile (it ended, or was taken already), a negative kind on
** error. */
int sq_store_run_takeover(sq_store *s, const sq_run_holder *h, const char *why);

/* Error statistics of one (step, path, tensor): tensor NULL means the whole
** step (the step_metrics table), otherwise one tensor (tensor_stats). */
typedef struct sq_stat_row {
    uint64_t step;
    const char *path;    /* "grad" or "weight" */
    const char *tensor;  /* NULL for the step as a whole */
    sq_errstats st;      /* st.n is the element count */
    double frac_clipped; /* NaN when not measured (stored NULL) */
    double seconds;      /* wall time of that step or tensor; NaN: not measured */
    double ef_residual;  /* error feedback's residual relative to the gradient after the
                         ** step (sq_world_residual_rel, its unit's for a tensor); NaN
                         ** without error feedback (stored NULL) */
} sq_stat_row;

int sq_store_add_stats(sq_store *s, int64_t run, const sq_stat_row *rows, size_t n);

/* One optimizer step of a training run (the train_steps table). */
typedef struct sq_train_row {
    uint64_t step;
    uint64_t tokens;   /* tokens seen up to and including this step */
    double loss;       /* training loss of the step's global batch */
    double val_loss;   /* NaN when the step did not evaluate (stored NULL) */
    double lr;
    double grad_norm;  /* of the reduced gradient, before clipping */
    double seconds;    /* wall time since the run started */
    double ef_residual; /* error feedback's residual relative to the gradient after the
                        ** step's reduce, over every param; NaN without it (stored NULL) */
} sq_train_row;

int sq_store_add_train(sq_store *s, int64_t run, const sq_train_row *rows, size_t n);

/* One figure of `shardq bench` (the bench_results table). */
typedef struct sq_bench_row {
    const char *op;        /* "quantize", "dequantize-8", "copy", ... */
    int threads;           /* CPU threads; 0 on a GPU */
    uint64_t elements;     /* fp32 input elements of one call */
    uint64_t bytes;        /* bytes read + written by one call, metadata included */
    double gb_per_s;       /* mean over the timed repetitions */
    double gb_per_s_std;   /* NaN when not measured (stored NULL) */
    double copy_gb_per_s;  /* a plain copy of the same size, same device, same run */
} sq_bench_row;
int sq_store_add_bench(sq_store *s, int64_t run, const sq_bench_row *rows, size_t n);

/* One prediction of `shardq model`: one scheme at one GPU count (the
** model_results table). Times are seconds of one training iteration. */
typedef struct sq_model_row {
    const char *scheme;      /* preset name */
    int gpus;
    double compute_s;        /* forward + backward at the achieved FLOP/s */
    double tp_s;             /* tensor-parallel all-reduces inside it */
    double bubble_s;         /* pipeline bubble */
    double weight_s;         /* weight all-gather (exposed part) */
    double grad_s;           /* gradient reduce-scatter (exposed part) */
    double quant_s;          /* quantization kernels */
    double optimizer_s;      /* the optimizer step on the shard */
    double iteration_s;      /* the whole iteration */
    double tflops;           /* model TFLOP/s per GPU (Megatron's metric) */
    double speedup;          /* over the baseline preset; NaN when none (NULL) */
    uint64_t inter_bytes_per_node; /* both collectives, sent per node */
} sq_model_row;
int sq_store_add_model(sq_store *s, int64_t run, const sq_model_row *rows, size_t n);

/* One figure of `shardq netbench` (the netbench_results table): one MPI
** collective on one link level at one size, as nccl-tests reports it. A
** NaN time or bandwidth is refused (the columns are NOT NULL). */
typedef struct sq_netbench_row {
    const char *op;     /* "allgather", "reducescatter", "alltoall" */
    const char *level;  /* "intra", "inter", "all" */
    uint64_t bytes;     /* nccl-tests' size: the whole buffer of one rank */
    uint64_t count;     /* elements of one rank's block: the count given to MPI */
    int ranks;          /* n: ranks of one communicator of the level */
    int comms;          /* communicators of the level timed at once */
    int iters;          /* timed calls */
    double seconds;     /* mean time of one call, the slowest rank's */
    double algbw_gb_s;  /* bytes / seconds / 1e9 */
    double busbw_gb_s;  /* algbw x (n - 1) / n */
} sq_netbench_row;
int sq_store_add_netbench(sq_store *s, int64_t run, const sq_netbench_row *rows, size_t n);

/* Bytes of one collective on one link level, summed over workers, steps and
** tensors (the bytes table). sent_elems counts padding too, sent_params the
** model's elements alone (sq_link_traffic in world.h): the table keeps
** bits_per_elem (per element on the wire) and bits_per_param (per real
** parameter, the cost) beside them. */
typedef struct sq_bytes_row {
    const char *collective; /* sq_coll_name: "weight_allgather", "grad_reducescatter" */
    const char *link;       /* sq_link_name: "intra", "inter" */
    uint64_t sent_codes, sent_meta, recv_codes, recv_meta, sent_elems, messages;
    uint64_t sent_params;   /* the model's elements among sent_elems */
} sq_bytes_row;

/* The rows of a traffic total, collective by collective, link by link. */
struct sq_traffic;
void sq_bytes_rows(const struct sq_traffic *sum, sq_bytes_row *rows /* SQ_NCOLL * SQ_NLINK */);

/* Time spent in one operation (the timings table). */
typedef struct sq_timing_row {
    const char *op;  /* "grad_reducescatter", "weight_allgather", "read", ... */
    uint64_t calls;
    double seconds;  /* total wall time */
    uint64_t bytes;  /* bytes it processed (what GB/s is computed from), 0: none */
} sq_timing_row;

/* In one transaction: the bytes and timing rows, then status ('done' or
** 'failed'), the error text (NULL when none) and the end time. */
int sq_store_run_end(sq_store *s, int64_t run, const char *status, const char *error,
                     const sq_bytes_row *bytes, size_t nbytes, const sq_timing_row *timings,
                     size_t ntimings);

/* Deletes a run and every row that refers to it (one transaction). */
int sq_store_run_delete(sq_store *s, int64_t run);

/* ------------------------------------------------------------------------ */
/* Copying a run from another database                                      */
/* ------------------------------------------------------------------------ */

/* Imports run `run` of the database file `from` -- typically a job's
** private store, written by another process or on another host (`shardq
** sweep` across MPI ranks) -- into s, in one transaction: its runs row
** under a new id (*new_id) and its rows of every table (sq_store_tables)
** with run_id remapped; every column as the file holds it (status, error,
** host, pid, times). So a killed importer leaves the run whole or absent.
**
** The run must have ended ('done' or 'failed': a 'running' one may miss
** rows), and `from` must be of this build's schema (SQ_STORE_VERSION).
** A key is settled as sq_store_run_begin settles it, in the same
** transaction: a run of s with that key that is done wins (nothing is
** written; returns SQ_STORE_DONE with *new_id that run); one that a live
** process (or one on another host) runs is SQ_ERR_BUSY with *new_id that
** run; a failed one, or one left 'running' by a process that is gone, is
** deleted with its rows first (sq_store_notice says so for the latter).
** Returns SQ_STORE_STARTED (0) once imported, else a negative kind whose
** sentence names the file at fault: SQ_ERR_NOTFOUND (no such file or
** run), SQ_ERR_FORMAT (not a shardq database, another schema version, a
** run that has not ended), SQ_ERR_BUSY with *new_id = 0 (s is locked),
** SQ_ERR_IO. The file is only read; it is attached to s's connection for
** the call (ATTACH) and detached before it returns. */
int sq_store_import_run(sq_store *s, const char *from, int64_t run, int64_t *new_id);

SQ_END_DECLS
#endif /* SHARDQ_STORE_H */
