/*
** shardq/mpi.h -- real ranks: the plan's transport over MPI, one worker per process.
**
** Part of the public API of libshardq_mpi (built when configure finds MPI;
** link -lshardq_mpi -lshardq and the MPI library). The header needs no
** <mpi.h>: a communicator is passed by address.
*/
#ifndef SHARDQ_MPI_H
#define SHARDQ_MPI_H

#include "shardq/plan.h"
#include "shardq/sweep.h"

#include <stddef.h>
#include <stdint.h>

SQ_BEGIN_DECLS

/*
** mpi -- the transport of plan.h over MPI: rank r of the communicator is
** worker r of a K x G world, and a rank runs its own plan (sq_world_config
** .transport), so the bytes it sends, the gradient partition it reduces
** and the weights it rebuilds equal worker r's in the in-process world.
**
** Messages. An intra-node message (both workers on one node) goes through
** the node's communicator (the ranks of node k: k G .. k G + G - 1), an
** inter-node one through a duplicate of the whole communicator: the two
** link levels are two communicators, so an MPI library can route them
** apart (shared memory within a host, the network between hosts). A
** message is up to three point-to-point sends (codes, scales, offsets; the
** empty ones are not sent), tagged by part, in the plan's order, whose
** rounds make blocking sends deadlock-free (plan.h, "Message order"). An
** all-to-all is the plan's rounds of pairwise exchanges, the algorithm MPI
** libraries use for large all-to-alls. share() is MPI_Bcast and
** gather_all() MPI_Allgather on the whole communicator.
**
** Nodes. A topology given with nodes > 0 must have K x G ranks, and rank r
** sits on node r / G whatever the hosts; nodes = 0 asks for the node level
** of the hosts: MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) gives each host's
** ranks, which must be G per host and in blocks (mpirun's default
** --map-by slot places them so).
**
** Memory: the transport moves host memory (the CPU backend); a world whose
** workers live on a GPU needs a CUDA-aware MPI, which is not assumed.
**
** Errors: the communicators return errors (MPI_ERRORS_RETURN); a failed
** call is SQ_ERR_IO with MPI's sentence, the peer rank and its host.
*/
typedef struct sq_mpi sq_mpi;

/* MPI_Init_thread (funneled) unless MPI is initialised already; rank and
** size of MPI_COMM_WORLD into *rank and *size (may be NULL). */
int sq_mpi_init(int *argc, char ***argv, int *rank, int *size, sq_error *err);
/* MPI_Finalize, if this library initialised MPI and it is not finalised. */
void sq_mpi_finalize(void);
/* Ends every rank of MPI_COMM_WORLD with exit status code (MPI_Abort). */
void sq_mpi_abort(int code);
/* 1 when the process runs under an MPI launcher (mpirun, srun, hydra):
** looked up in the environment, before MPI is initialised. */
int sq_mpi_launched(void);

/* Opens the transport over *comm (an MPI_Comm; NULL: MPI_COMM_WORLD) for
** topology *topo; topo->nodes == 0 fills it from the hosts (above).
** Collective over the communicator. */
int sq_mpi_open(const void *comm, sq_topo *topo, sq_mpi **out, sq_error *err);
void sq_mpi_close(sq_mpi *m);
/* The transport to put in sq_world_config.transport. */
const sq_transport *sq_mpi_transport(const sq_mpi *m);
int sq_mpi_rank(const sq_mpi *m);
int sq_mpi_size(const sq_mpi *m);
/* Host name of rank r (MPI_Get_processor_name), "?" out of range. */
const char *sq_mpi_host(const sq_mpi *m, int r);
/* Number of distinct hosts among the ranks. */
int sq_mpi_hosts(const sq_mpi *m);
/* MPI's library version text (MPI_Get_library_version), first line. */
const char *sq_mpi_library(void);
/* A barrier over the transport's communicator. */
int sq_mpi_barrier(const sq_mpi *m, sq_error *err);

/* ------------------------------------------------------------------------ */
/* A sweep across ranks                                                     */
/* ------------------------------------------------------------------------ */

/*
** sq_mpi_sweep -- the configurations of a sweep (sweep.h) handed out to the
** ranks of a communicator: `mpirun -np R shardq sweep RECIPE`.
**
** Rank 0 coordinates and runs no job itself (with R > 1): it owns the
** database -- no other rank opens it --, hands the configurations that are
** not done out one at a time to the ranks that ask for one (a dynamic
** queue: a rank asks again as soon as its job ended, so long and short
** runs balance), and stores each result as it arrives, in one transaction
** (sq_store_import_run). Every other rank is a worker: it runs the
** configuration in its own process -- an in-process world, not the MPI
** transport -- with the job runner of a local sweep (sq_sweep_job_run, with
** per-tensor rows) into a private database file in a temporary directory,
** sends the file's bytes to rank 0 and removes it. So a run is stored with
** the same rows and marks as a local sweep stores it ('done', or 'failed'
** with the error), under the worker's host and pid, and the database never
** holds a half-imported run: a sweep killed at any moment (a rank, or
** mpirun) leaves every run whole or absent, and the same command completes
** it. With one rank, rank 0 runs the jobs itself, one at a time, the same
** way.
**
** Every rank loads the same recipe and passes its sweep; rank 0 sends a
** configuration's index with its key, and a worker that holds another key
** there (another recipe, or a trace at another path on its host) ends the
** sweep with an error naming both.
**
** A job that fails is stored as failed (or, when it failed before its run
** began -- a trace that cannot be read --, not stored), said through the
** event hook, and the sweep goes on. A configuration that another live
** process runs meanwhile (sq_store_import_run says busy) is handed out
** again once the ready hook says so; one that another process stored as
** done meanwhile is skipped. A rank that dies ends the job (the launcher
** does that); a temporary file is removed on SIGTERM, SIGINT and SIGHUP
** too (handlers installed for the call, then restored).
**
** The messages are MPI point-to-point on a duplicate of the communicator:
** a header of 64-bit integers, a text, and the file's bytes in pieces of
** at most 1 GiB (an SQLite file is the same on every architecture). A
** rank waiting for a message polls (MPI_Iprobe) with sleeps of up to 10 ms
** in between, so that a coordinator or an idle worker takes no core from
** the jobs.
*/

/* What rank 0's ready hook says of a configuration before handing it out. */
enum {
    SQ_MPI_SWEEP_GO = 0,   /* hand it out */
    SQ_MPI_SWEEP_WAIT = 1, /* another live process runs its key: ask again later */
    SQ_MPI_SWEEP_SKIP = 2  /* the database holds it as done now: skip it */
};

/* What happened to a configuration, as rank 0 tells its event hook. */
enum {
    SQ_MPI_SWEEP_SENT = 0,      /* handed out to e->rank */
    SQ_MPI_SWEEP_DONE = 1,      /* ran and stored 'done' (e->id) */
    SQ_MPI_SWEEP_FAILED = 2,    /* ran and failed: stored 'failed' (e->id), or not stored
                                ** (e->id 0: it failed before its run began, or could not be
                                ** stored); e->error says why */
    SQ_MPI_SWEEP_ELSEWHERE = 3, /* another process stored it done meanwhile: skipped */
    SQ_MPI_SWEEP_HELD = 4       /* another live process runs its key: waits */
};

typedef struct sq_mpi_sweep_event {
    int what;          /* SQ_MPI_SWEEP_SENT ... */
    size_t run;        /* index into sw->runs */
    int rank;          /* the rank that ran it (-1: none) */
    const char *host;  /* that rank's host ("" when none) */
    double seconds;    /* the job's wall time on its rank (0 when none) */
    int64_t id;        /* the run's id in the database (0: none) */
    const char *error; /* FAILED: the job's sentence, or the store's; else "" */
} sq_mpi_sweep_event;

typedef struct sq_mpi_sweep_opts {
    const char *db;   /* rank 0: the database file (created or migrated beforehand:
                      ** sq_sweep_load_done); no other rank opens it */
    unsigned char *done; /* rank 0: sw->nruns flags: in, the runs to skip (done
                      ** before); out, also those done now or meanwhile */
    int threads;      /* a worker's OpenMP and BLAS threads; 0: the CPUs it may run on
                      ** divided by the workers on its host, unless OMP_NUM_THREADS is
                      ** set (then left alone); < 0: left alone */
    void *ctx;        /* rank 0's hooks' argument; every hook may be NULL */
    int (*ready)(void *ctx, size_t run); /* before a handout: SQ_MPI_SWEEP_GO, ... */
    void (*event)(void *ctx, const sq_mpi_sweep_event *e);
} sq_mpi_sweep_opts;

typedef struct sq_mpi_sweep_counts {
    size_t before;    /* done before the sweep began: skipped */
    size_t done;      /* run and stored done */
    size_t failed;    /* run and failed */
    size_t elsewhere; /* stored done by another process meanwhile: skipped */
    int workers;      /* ranks that ran jobs */
    /* on failure, on every rank: */
    int together;     /* every rank failed at once (a check they all made), so each may
                      ** end normally (sq_mpi_finalize) instead of ending the job */
    int echo;         /* err repeats what another rank says: no need to say it here */
} sq_mpi_sweep_counts;

/* Runs sw across the ranks of *comm (an MPI_Comm; NULL: MPI_COMM_WORLD);
** collective: every rank calls it with the sweep it loaded. On rank 0,
** *counts (may be NULL) says what happened. SQ_OK once every configuration
** ran or was skipped, failed ones included (rank 0's counts tell); a
** negative kind when the sweep could not go on (an MPI failure, recipes
** that differ between ranks, the database unusable), with err naming the
** rank, its host and the file or field at fault: the caller then ends
** every rank (sq_mpi_abort), since the others may wait for it -- unless
** counts->together says that every rank returned. */
int sq_mpi_sweep(const void *comm, const sq_sweep *sw, const sq_mpi_sweep_opts *o,
                 sq_mpi_sweep_counts *counts, sq_error *err);

/* 1 on every rank when ok is nonzero on every rank of *comm (NULL:
** MPI_COMM_WORLD), else 0 on every rank; collective. For a start that
** every rank must agree on (each loaded the recipe). A failed call is
** SQ_ERR_IO, *all 0. */
int sq_mpi_all_ok(const void *comm, int ok, int *all, sq_error *err);

SQ_END_DECLS
#endif /* SHARDQ_MPI_H */
