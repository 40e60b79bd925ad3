/*
** shardq/sweep.h -- sweeps: recipes into configurations, run keys, the job
** runner, and the process pool that runs a whole sweep.
**
** Part of the public API of libshardq (docs/library.md); every
** declaration below is exported, everything else in the library is hidden.
*/
#ifndef SHARDQ_SWEEP_H
#define SHARDQ_SWEEP_H

#include "shardq/codec.h"
#include "shardq/replay.h"
#include "shardq/store.h"
#include "shardq/train.h"
#include "shardq/world.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

SQ_BEGIN_DECLS

/*
** sweep -- sweeps as a library: the INI recipes (docs/replay.md) read
** and expanded into structured configurations, the job runner that runs
** one configuration -- a replay or a training run -- into the store, and
** the process pool that runs every configuration of a sweep in children of
** its own (across MPI ranks, mpi.h's scheduler does: sq_mpi_schedule).
**
**   [sweep]                  name, jobs, and defaults for every grid
**   name = grad-bits
**   trace = traces/run1      relative to the recipe's directory
**   seeds = 1..3
**
**   [grid gradients]         one grid: the product of every list in it
**   presets = sdp4bit
**   paths = grad
**   grad.bits = 2..8
**   grad.group = 32, 128, 512
**
** Keys: trace, workers, seeds, presets, device, paths (grad, weight or
** both), steps, and any scheme knob; a value is a comma-separated list, and
** A..B is the integers from A to B.
**
** With `command = train` in [sweep], each configuration is a training run
** instead: no trace nor paths, but corpus and every training option
** (layers, channels, heads, context, seq, batch, lr, min-lr, warmup, beta1,
** beta2, eps, weight-decay, clip, eval-every, eval-seqs) as keys, read into
** the training configuration when the recipe is loaded. A grid's keys
** override the [sweep] section's. Without [grid] sections the [sweep]
** section is the one grid. The runs come out in a fixed order: grid by
** grid, keys in file order, the last key varying fastest. A list may go on
** over indented lines.
**
** Refused with the file and line, where inih would let them pass: a line
** longer than inih's buffer (which it would cut), a key given twice in a
** section (or under both its names, seed and seeds), a [section] given
** twice, a grid without keys or without one valid combination, an empty
** value, a trace, corpus, preset, device or name that starts with '-', and
** a grid of more than a million configurations, counted before anything is
** expanded. Every error names the recipe file, and the section and key at
** fault; its kind is SQ_ERR_SPEC (a value or combination the recipe may not
** hold), SQ_ERR_FORMAT (what is not INI), SQ_ERR_IO (the file cannot be
** read) or SQ_ERR_NOMEM.
**
** A configuration's key is its identity in the store: the sweep's name and
** every setting (the canonical scheme, the trace's or corpus's real path,
** the workers, seed, device, paths, steps and every training option), so
** that a sweep run again skips what is done, two configurations that differ
** in any setting never share a key, and the same settings written in
** another order give the same key.
*/
enum { SQ_SWEEP_REPLAY = 0, SQ_SWEEP_TRAIN = 1 };

/* One configuration: everything one replay or one training run needs. */
typedef struct sq_sweep_config {
    int command;      /* SQ_SWEEP_REPLAY or SQ_SWEEP_TRAIN */
    char *grid;       /* the [grid NAME] it came from ("sweep": the [sweep] section) */
    char *preset;     /* the preset the scheme starts from */
    char **sets;      /* the knobs set on it, "knob=value" as written (labels, lists) */
    int nsets;
    sq_scheme scheme; /* the preset with every knob applied, validated */
    int has_topo;     /* 0: the trace's topology (replay) or 2x4 (train) */
    sq_topo topo;
    uint64_t seed;
    char *device;     /* "cpu", "cuda", "cuda:0,1" */
    int paths;        /* replay: SQ_REPLAY_GRAD | SQ_REPLAY_WEIGHT */
    uint64_t steps;   /* replay: 0 is every step; train: already in train.steps */
    int reuse_workers; /* replay: accept a topology that reuses or drops gradient files */
    char *trace;      /* replay: resolved against the recipe's directory */
    char *corpus;     /* train: resolved likewise; NULL: $SHARDQ_CORPUS or the default */
    sq_train_config train; /* train: every option, defaults resolved (min_lr, warmup) */
    char **options;   /* train: the options the recipe set, "key=value" as written */
    int noptions;
    char *key;        /* identity in the store */
    char *label;      /* short text for progress lines */
} sq_sweep_config;

typedef struct sq_sweep {
    char *path;
    char *name;
    int jobs;            /* 0: one per core (replay), 1 (train) */
    int command;         /* SQ_SWEEP_REPLAY or SQ_SWEEP_TRAIN */
    sq_sweep_config *runs;
    size_t nruns;
    size_t ninvalid;     /* combinations whose scheme does not validate, left out */
    char *first_invalid; /* the first of them, with the reason */
    char *text;          /* the recipe file as read (stored with every run), or NULL */
    size_t nduplicate;   /* configurations with the key of an earlier one (the same
                            settings, from another grid or a repeated value): one run,
                            left out of runs */
    char *first_duplicate; /* the first of them: "LABEL = LABEL of the one kept" */
} sq_sweep;

/* Reads and expands the recipe at path; trace_override, when not NULL,
** replaces every trace (verbatim: it is not resolved against the recipe's
** directory). On failure *sw is empty and err says why. */
int sq_sweep_load(const char *path, const char *trace_override, sq_sweep *sw, sq_error *err);
/* The same for a recipe held in memory (text[0 .. len), no NUL needed):
** path names it in messages and its directory is where relative traces and
** corpora are found, as if the text were the file at path. */
int sq_sweep_load_text(const char *path, const char *text, size_t len,
                       const char *trace_override, sq_sweep *sw, sq_error *err);
void sq_sweep_free(sq_sweep *sw);

/* The "paths" text of a replay: "grad", "weight" or "grad,weight". */
const char *sq_sweep_paths_name(int paths);

/* Fills c with the defaults of a single run (sdp4bit on cpu, seed 1, both
** paths, the trainer's defaults) for the command; strings are NULL. */
void sq_sweep_config_defaults(sq_sweep_config *c, int command);
/* Frees the strings of c (those of a loaded sweep: sq_sweep_free does). */
void sq_sweep_config_clear(sq_sweep_config *c);

/* ------------------------------------------------------------------------ */
/* Running one configuration                                                */
/* ------------------------------------------------------------------------ */

/* How a job ended besides an error. */
enum {
    SQ_SWEEP_RAN = 0,         /* it ran, and is stored (when a database was given) */
    SQ_SWEEP_ALREADY_DONE = 1, /* a run with its key is done: out->run is that run */
    SQ_SWEEP_HELD = 2         /* a live process (or one on another host) runs the key: the
                              ** job returns SQ_ERR_BUSY and out->run is that run */
};

/* What the caller sees while a job runs; every callback may be NULL. */
typedef struct sq_sweep_hooks {
    void *ctx;
    /* the run is begun (or there is no database): total units of progress */
    void (*start)(void *ctx, uint64_t total);
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    /* train: after every optimizer step */
    void (*train_step)(void *ctx, const sq_train_row *row);
} sq_sweep_hooks;

/* One configuration and where it goes. */
typedef struct sq_sweep_job {
    const sq_sweep_config *cfg;
    const char *db;      /* the store; NULL: store nothing */
    const char *key;     /* the run's key, NULL: none (a sweep passes cfg->key) */
    const char *sweep;   /* the sweep's name, or NULL */
    int busy_ms;         /* how long to wait for a locked database (0: the default) */
    int tensor_rows;     /* replay: per-tensor rows too */
    const char *capture; /* train: write a trace of the run here, or NULL */
    uint32_t capture_every; /* train: 0 is every step */
    int sgemm;           /* train: measure the sgemm rate beside which GFLOP/s are read */
    /* NULL: every worker in this process; else the job runs on real ranks,
    ** one per process (world.h), every process calling this with the same
    ** job, and only one of them (the one that prints) giving a db */
    const struct sq_transport *transport;
    sq_sweep_hooks hooks;
    const char *recipe;  /* the recipe's text, stored with the run (NULL: none) */
} sq_sweep_job;

typedef struct sq_sweep_outcome {
    int status;          /* SQ_SWEEP_RAN, SQ_SWEEP_ALREADY_DONE, SQ_SWEEP_HELD */
    int64_t run;         /* the stored run; 0: none */
    char notice[1024];   /* a run left 'running' by a process that is gone, replaced; "" */
    char end_error[SQ_ERROR_MSG]; /* a failed run that could not be marked so: why; "" */
    char topo[32];       /* "KxG" */
    char scheme[SQ_SCHEME_STRLEN]; /* canonical */
    char corpus[4096];   /* train: the corpus path that was read */
    sq_replay_result replay;
    sq_train_result train;
    double sgemm;        /* train, when asked: GFLOP/s */
    sq_train_field field; /* train: the setting refused (CORPUS: or unreadable), or NONE */
} sq_sweep_outcome;

/* Begins a run in the store at db (opened into *store, busy_ms the busy
** timeout): info, and as its params the extra ones, then every knob of
** scheme (none when scheme is NULL: a benchmark). SQ_OK with *status
** SQ_SWEEP_RAN and *store open when the run began (sq_store_notice says
** what it replaced); SQ_OK with *status SQ_SWEEP_ALREADY_DONE and *store
** NULL when a run with info->key is done (*run is that run); SQ_ERR_BUSY
** with *status SQ_SWEEP_HELD when a live process runs that key (*run its
** run, the sentence its pid, host and start); another kind on a failure
** (a locked database is SQ_ERR_BUSY with *status SQ_SWEEP_RAN). */
int sq_sweep_run_begin(const char *db, int busy_ms, const sq_run_info *info,
                       const sq_scheme *scheme, const sq_store_kv *extra, size_t nextra,
                       sq_store **store, int64_t *run, int *status, sq_error *err);

/* Runs job: opens the trace (replay) or reads the corpus (train); begins
** the run in the store (a key already done: SQ_SWEEP_ALREADY_DONE and
** SQ_OK; a key held by a live process: SQ_SWEEP_HELD and SQ_ERR_BUSY, and a
** locked database is SQ_ERR_BUSY with status SQ_SWEEP_RAN); runs it with its
** rows going to the store as they come; ends the run 'done', or 'failed'
** with the error's sentence. The kind of a failure is the callee's. With a
** capture of a key that is done, the trace must be there, complete and of
** that key (else SQ_ERR_NOTFOUND, ..., with status SQ_SWEEP_ALREADY_DONE). */
int sq_sweep_job_run(const sq_sweep_job *job, sq_sweep_outcome *out, sq_error *err);

/* ------------------------------------------------------------------------ */
/* Jobs in child processes                                                  */
/* ------------------------------------------------------------------------ */

/* The exit statuses of a job's process. */
enum { SQ_SWEEP_EXIT_OK = 0, SQ_SWEEP_EXIT_FAILED = 1, SQ_SWEEP_EXIT_HELD = 75 };

/* In a child forked to run a job without exec: closes every descriptor the
** parent marked close-on-exec but keep, as an exec would. The parent's
** locks (flock is shared with a child's copy of the descriptor: a demo's
** output directory, a trace writer's), its database connections and its
** temporary files then end with the parent, not with the child. */
void sq_sweep_child_close_fds(int keep);

/* Forks a process that runs job with `threads` threads (0: as many as the
** parent would) and exits with SQ_SWEEP_EXIT_*: it dies with its parent
** (PR_SET_PDEATHSIG), its stdin and stdout are /dev/null when quiet, its
** stderr goes to log_fd when >= 0, it holds nothing the parent marked
** close-on-exec (sq_sweep_child_close_fds), and a failure is said there as
** "shardq CMD: SENTENCE" (CMD "replay" or "train"). Returns the pid, or a
** negative kind (err says why).
**
** The calling process must not have run an OpenMP parallel region before:
** libgomp is not fork-safe (its thread pool does not survive into the
** child, whose first parallel region would hang). */
pid_t sq_sweep_spawn(const sq_sweep_job *job, int threads, int quiet, int log_fd,
                     sq_error *err);

/* ------------------------------------------------------------------------ */
/* What a database holds of a sweep                                         */
/* ------------------------------------------------------------------------ */

/* Sets done[i] for every run i of sw that the database at db holds as done
** (opened for writing: this creates or migrates the file once, up front). */
int sq_sweep_load_done(const char *db, const sq_sweep *sw, unsigned char *done, sq_error *err);

/* A run of the sweep that a process that is gone left 'running'. */
typedef struct sq_sweep_stale {
    int64_t id, pid;
    char host[256];
    char started[40];
} sq_sweep_stale;
/* Up to max of them into out[]; returns how many there are (maybe more
** than max), or a negative kind. */
long sq_sweep_left_running(const char *db, const sq_sweep *sw, sq_sweep_stale *out, size_t max,
                           sq_error *err);

/* ------------------------------------------------------------------------ */
/* The process pool: every configuration of a sweep, several at a time      */
/* ------------------------------------------------------------------------ */

/*
** sq_sweep_pool_run runs every configuration of a sweep that the database
** does not hold as done, each in a child of its own (sq_sweep_spawn),
** `jobs` at a time. A configuration whose key another live process holds
** (the child's SQ_SWEEP_EXIT_HELD) is waited for once every other one has
** started, and started again as soon as its key is free; a run on another
** host, which cannot be checked from here, is taken over only when asked
** (takeover, or no write for stale_after seconds). The children's stderr
** goes to files without a name, so that no kill of the pool leaves one
** behind; a failed child's first bytes of it come with its event. A
** killed pool's children die with it, and the next pool replaces the runs
** they left 'running'.
**
** The pool prints nothing: it says what happens through the event hook,
** in this order: LEFT_RUNNING (when some are), BEGIN, then FINISHED,
** WAITING, TAKEOVER and NOTE as they come, and END.
*/
enum {
    SQ_SWEEP_POOL_LEFT_RUNNING = 0, /* e->stale[0 .. e->nstale): runs of the sweep that a
                                    ** process that is gone left 'running' (they run
                                    ** again); e->count of them in all */
    SQ_SWEEP_POOL_BEGIN = 1,        /* e->jobs at a time; e->already done, e->todo to run */
    SQ_SWEEP_POOL_FINISHED = 2,     /* run e->run ended: e->code 0 (done) or its exit
                                    ** status; e->seconds; e->log what it said (failed) */
    SQ_SWEEP_POOL_WAITING = 3,      /* run e->run waits for e->holder (e->again: said
                                    ** before, at most every SQ_SWEEP_SAY_EVERY_S) */
    SQ_SWEEP_POOL_TAKEOVER = 4,     /* run e->run takes over e->holder's run (e->takeover:
                                    ** by takeover, else by stale_after) */
    SQ_SWEEP_POOL_NOTE = 5,         /* e->message: a fault the pool carries on after */
    SQ_SWEEP_POOL_END = 6           /* e->counts: how it ended */
};

/* Seconds between two WAITING events about one configuration. */
#define SQ_SWEEP_SAY_EVERY_S 60.0

typedef struct sq_sweep_pool_counts {
    size_t already;  /* done before the pool began */
    size_t todo;     /* to run when it began */
    size_t finished; /* ended since (done or failed) */
    size_t failed;
    size_t done;     /* done now, before included */
} sq_sweep_pool_counts;

typedef struct sq_sweep_pool_event {
    int what;                     /* SQ_SWEEP_POOL_* */
    size_t run;                   /* index into the sweep's runs */
    int code;                     /* FINISHED: 0 done, else the child's exit status */
    double seconds;               /* FINISHED: the child's wall time */
    const char *log;              /* FINISHED, failed: the start of its stderr ("" none) */
    const sq_run_holder *holder;  /* WAITING, TAKEOVER */
    int again;                    /* WAITING: said before */
    int takeover;                 /* TAKEOVER: by takeover (1) or stale_after (0) */
    const sq_sweep_stale *stale;  /* LEFT_RUNNING */
    size_t nstale;
    long count;
    const char *message;          /* NOTE */
    int jobs;                     /* BEGIN */
    const sq_sweep_pool_counts *counts; /* BEGIN, FINISHED, END */
} sq_sweep_pool_event;

typedef struct sq_sweep_pool_opts {
    const char *db;
    int jobs;           /* 0: the recipe's jobs, else 1 for training, one per core for replays */
    int takeover;       /* take over a run on another host that a key waits for */
    double stale_after; /* the same once it has not written for so many seconds; < 0: never */
    void *ctx;
    void (*event)(void *ctx, const sq_sweep *sw, const sq_sweep_pool_event *e); /* or NULL */
} sq_sweep_pool_opts;

/* Runs sw as above. SQ_OK when every configuration ran (counts say how many
** failed: counts->done < sw->nruns); a negative kind when the pool could
** not go on (the database, a fork, a wait, memory), its children ended. */
int sq_sweep_pool_run(const sq_sweep *sw, const sq_sweep_pool_opts *o,
                      sq_sweep_pool_counts *counts, sq_error *err);

/* Whether run i of sw, whose key another process held, may start again:
** its key is free now (done, failed, or its process gone), or its run was
** on another host and is taken over as o asks. Otherwise says WAITING (at
** once, then every SQ_SWEEP_SAY_EVERY_S, *said the last time) and returns
** 0. s NULL (no database): 1. A scheduler across ranks asks it too. */
int sq_sweep_pool_may_retry(sq_store *s, const sq_sweep *sw, size_t i,
                            const sq_sweep_pool_opts *o, double *said);

/* The LEFT_RUNNING event of sw, when there are such runs (at most ten
** named). */
void sq_sweep_pool_left_running(const sq_sweep *sw, const sq_sweep_pool_opts *o);

SQ_END_DECLS
#endif /* SHARDQ_SWEEP_H */
