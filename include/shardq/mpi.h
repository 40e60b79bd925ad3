/*
** shardq/mpi.h -- real ranks: the plan's transport over MPI, one worker per process.
**
** Part of the public API of libshardq_mpi (built when configure finds MPI;
** link -lshardq_mpi -lshardq and the MPI library). The header needs no
** <mpi.h>: a communicator is passed by address.
*/
#ifndef SHARDQ_MPI_H
#define SHARDQ_MPI_H

#include "shardq/cost.h"
#include "shardq/plan.h"
#include "shardq/sweep.h"

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

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
** empty ones are not sent), tagged by part, posted without blocking
** (MPI_Isend, MPI_Irecv) in the plan's order and completed together at the
** end of their phase (phase_end, MPI_Waitall), so the transfers of a round
** run at once as in MPI's own collectives; a runner must call phase_end
** after each phase (the world does; plan.h's phase rule makes it change no
** byte). An
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

/*
** nccl -- the same transport over NCCL (built when configure finds CUDA,
** MPI and NCCL >= 2.7: SHARDQ_HAVE_NCCL; link -lnccl -lcudart too). The
** header needs neither <nccl.h> nor <cuda_runtime.h>.
**
** Ranks (sq_nccl_open): rank r of an sq_mpi is worker r, as above, on one
** GPU of its own: its world holds the worker's buffers on that device
** (sq_world_config.device "cuda:D"), and SEND and RECV move the message's
** codes, scales and offsets between the GPUs with ncclSend / ncclRecv on
** one communicator (ncclCommInitRank; rank 0's ncclGetUniqueId travels by
** MPI). NCCL picks its own route per pair of GPUs (NVLink, PCIe, shared
** memory within a host, the network between hosts): the two link levels
** of the plan share the communicator, and intra / inter stay what the plan
** counts. share() and gather_all() go through the sq_mpi, on host memory.
**
** Deferred messages. send() and recv() only note the message; phase_end()
** posts every message of the phase in one ncclGroupStart / ncclGroupEnd and
** waits for the transport's stream, so a phase is one fused exchange, like
** NCCL's all-to-all. That is correct because no op of a phase reads what a
** RECV of the same phase writes, nor writes what a SEND of it reads (plan.h,
** "Phases"; tests/check_plan.c runs every plan with messages delivered only
** at the end of their phase), and because the world's backends run their
** operations synchronously: what a SEND reads is in place when send() is
** called. A runner must therefore call phase_end after each phase (the
** world does). SQ_NCCL_BLOCKING instead completes each message inside
** send() and recv() (one group per message, then a stream synchronisation):
** the plan's round order keeps that deadlock-free, as with MPI_Send.
**
** One process (sq_nccl_open_local): an in-process transport (share and
** gather_all NULL; sq_world_config.transport, world.h) for a world whose
** workers sit on several GPUs of this process: at phase_end every message
** of the phase goes, in one group, from the sender's GPU to the receiver's
** by ncclSend / ncclRecv on a communicator of ncclCommInitAll, or by a
** device-to-device copy when both workers share a GPU (SQ_NCCL_SELF: by
** NCCL there too).
**
** Errors: the NCCL or CUDA call, its sentence (ncclGetErrorString and the
** communicator's last error, cudaGetErrorString) and the peer rank, as
** SQ_ERR_DEVICE; a world on host memory is SQ_ERR_ARG.
*/
typedef struct sq_nccl sq_nccl;

/* Flags of sq_nccl_open and sq_nccl_open_local. */
enum {
    SQ_NCCL_BLOCKING = 1, /* ranks: each message completes in send() and recv() */
    SQ_NCCL_SELF = 2      /* one process: two workers of one GPU exchange by ncclSend /
                          ** ncclRecv to the GPU's own rank too, not by a device copy
                          ** (NCCL's path where there is one GPU: tests) */
};

/* The GPU rank m's process should use: its index among the ranks of its
** host (MPI_Comm_split_type, MPI_COMM_TYPE_SHARED) modulo the CUDA
** devices it sees, or, with devices != NULL, the entry of devices[0 ..
** ndev - 1] at that index modulo ndev. *local and *per_host (may be NULL)
** get that index and the number of ranks on the host. Collective over m.
** SQ_ERR_UNSUPPORTED "no CUDA device: the NCCL transport needs one GPU per
** rank (...)" without a GPU, and when a host runs more ranks than it has
** GPUs to give (NCCL takes one rank per GPU). */
int sq_nccl_pick_device(const sq_mpi *m, const int *devices, int ndev, int *device, int *local,
                        int *per_host, sq_error *err);
/* Opens the NCCL transport over the ranks of m, this rank on CUDA device
** `device`; flags: SQ_NCCL_*. m must outlive it. Collective over m: every
** rank fails when one does. */
int sq_nccl_open(sq_mpi *m, int device, unsigned flags, sq_nccl **out, sq_error *err);
/* One process: a communicator over devices[0 .. ndev - 1] (distinct CUDA
** ordinals; those a world's --device names). */
int sq_nccl_open_local(const int *devices, int ndev, unsigned flags, sq_nccl **out,
                       sq_error *err);
void sq_nccl_close(sq_nccl *n);
/* The transport to put in sq_world_config.transport. */
const sq_transport *sq_nccl_transport(const sq_nccl *n);
/* The CUDA device of this rank (sq_nccl_open), of the first GPU (local). */
int sq_nccl_device(const sq_nccl *n);
/* "NCCL 2.28.9": the library loaded at run time (ncclGetVersion). */
const char *sq_nccl_library(void);

/*
** netbench -- what MPI's collectives reach on each link level of an sq_mpi,
** measured and reported the way nccl-tests reports NCCL's (its
** doc/PERFORMANCE.md), so that the figures compare with theirs and with a
** platform file's (cost.h).
**
** Levels. intra: the node communicators (the G ranks of each node), all K
** timed at once, as every node runs its intra-node step together; inter:
** the rail communicators (the K ranks of one local index, one per node),
** all G timed at once, as the rails of a two-level all-to-all run; all: the
** whole communicator. A level whose communicators hold one rank (intra
** with G = 1, inter with K = 1) has nothing to measure and gives no rows.
**
** Collectives: MPI_Allgather, MPI_Reduce_scatter_block (MPI_SUM) and
** MPI_Alltoall, all on floats. A size is nccl-tests' "size": the whole
** buffer of one rank (what an all-gather receives, what a reduce-scatter or
** an all-to-all sends), n x count x 4 bytes for n ranks and count floats per
** rank's block; sizes run over min_bytes x 2^k up to max_bytes, each rounded
** down to a multiple of 4n (up to one float per block), and a size that
** rounds to the one before it is not measured twice.
**
** Method, per level, collective and size: one untimed call, whose time (the
** slowest rank's) sets how many calls fit the budget; up to warmup - 1
** more untimed calls (within half the budget); a barrier over every rank;
** then `iters` calls timed together (fewer when the budget would be passed,
** never fewer than one), their mean on each rank, and the maximum of those
** means over every rank of the level. algbw = size / time and busbw = algbw
** x (n - 1) / n, nccl-tests' factor for these three collectives: what each
** rank's link carries, comparable across rank counts and with a link's rate.
** Every rank gets every result.
**
** Errors: SQ_ERR_ARG for a bad configuration (the field named), SQ_ERR_NOMEM
** when the buffers (2 x max_bytes per rank) cannot be had, SQ_ERR_IO with
** MPI's sentence for a failed call.
*/
enum {
    SQ_NETBENCH_ALLGATHER = 0,
    SQ_NETBENCH_REDUCESCATTER = 1,
    SQ_NETBENCH_ALLTOALL = 2,
    SQ_NETBENCH_NOPS = 3
};
/* Levels: intra (every node's ranks, all nodes at once), inter (the rails:
** the ranks of one local index, one per node, all rails at once), all (the
** whole job as one communicator) and rail (one rail alone, the ranks of
** local index 0, while the others wait: the most one communicator reaches
** with the network to itself). */
enum {
    SQ_NETBENCH_INTRA = 0,
    SQ_NETBENCH_INTER = 1,
    SQ_NETBENCH_ALL = 2,
    SQ_NETBENCH_RAIL = 3,
    SQ_NETBENCH_NLEVELS = 4
};

/* One collective on one level at one size. */
typedef struct sq_netbench_result {
    int op, level;  /* SQ_NETBENCH_* */
    int ranks;      /* n: ranks of one communicator of the level */
    int comms;      /* communicators of the level timed at once */
    uint64_t bytes; /* the size: the whole buffer of one rank, n x count x 4 */
    uint64_t count; /* floats of one rank's block: the count given to MPI */
    int iters;      /* calls timed */
    double seconds; /* mean time of one call, the slowest rank's */
    double algbw;   /* bytes / seconds, in bytes/s */
    double busbw;   /* algbw x (n - 1) / n, in bytes/s */
} sq_netbench_result;

typedef struct sq_netbench_config {
    uint64_t min_bytes, max_bytes; /* 0: 8 B and 64 MiB; max_bytes at most 1 GiB */
    int warmup;      /* untimed calls per size, at least one (0: 5) */
    int iters;       /* timed calls per size, at most (0: 20) */
    double seconds;  /* the budget of one size's timed calls (0: 1 s) */
    unsigned ops;    /* bits 1 << SQ_NETBENCH_ALLGATHER ... (0: all three) */
    unsigned levels; /* bits 1 << SQ_NETBENCH_INTRA ... (0: intra and inter) */
    /* called on every rank with each result as it is measured (may be NULL) */
    void (*progress)(void *user, const sq_netbench_result *r);
    void *user;
} sq_netbench_config;

/* "allgather", "reducescatter", "alltoall"; "intra", "inter", "all"; NULL
** out of range. The parsers return the index, or -1 for an unknown name. */
const char *sq_netbench_op_name(int op);
const char *sq_netbench_level_name(int level);
int sq_netbench_op_parse(const char *name);
int sq_netbench_level_parse(const char *name);

/* Fills cfg's defaults (the zeros above) and checks it: SQ_OK, or
** SQ_ERR_ARG naming the field at fault. */
int sq_netbench_config_check(sq_netbench_config *cfg, sq_error *err);

/* The communicators of level on m: *ranks in each (1: nothing to measure)
** and *comms of them side by side. */
void sq_netbench_level_shape(const sq_mpi *m, int level, int *ranks, int *comms);

/* Measures cfg (checked here) on m: *out (malloc'd, free() it) gets *n
** results, level by level, collective by collective, size by size; the
** same on every rank. Collective over m's communicator. */
int sq_netbench_run(const sq_mpi *m, const sq_netbench_config *cfg, sq_netbench_result **out,
                    size_t *n, sq_error *err);

/* What one level's results say about its link, in the cost model's terms
** (docs/cost-model.md): busbw, the plateau -- for each collective,
** the mean busbw of its two largest sizes; then the mean over the
** collectives; latency, seconds per step -- the shortest time of a
** collective at its smallest size, over its n - 1 steps, so that the
** model's ring time (n - 1) x latency equals that measured time.
** measured = 0 (and every figure 0) when r holds no row of the level. */
typedef struct sq_netbench_fit {
    int measured;
    int ranks, comms;                   /* of the level */
    double busbw;                       /* bytes/s */
    double op_busbw[SQ_NETBENCH_NOPS];  /* each collective's plateau; 0: not measured */
    double latency;                     /* seconds per step */
    double small_seconds;               /* the time it comes from */
    uint64_t small_bytes;               /* at this size */
    uint64_t plateau_bytes;             /* the smallest size in the plateau */
} sq_netbench_fit;
void sq_netbench_fit_level(const sq_netbench_result *r, size_t n, int level,
                           sq_netbench_fit *fit);

/* A platform file (cost.h, sq_cost_platform_read) from results r of a
** K x G job: [intra] from the intra level, [inter] from the inter level,
** [platform] nodes and gpus_per_node from the topology; what netbench
** cannot measure -- the compute rates, and a level it did not measure --
** from `assumed`, each figure with its source in a comment. */
typedef struct sq_netbench_platform_info {
    const char *name;     /* [platform] name */
    const char *date;     /* when measured, e.g. "2026-01-31" */
    const char *hosts;    /* where, e.g. "h1,h2" */
    const char *library;  /* the MPI library (sq_mpi_library) */
    int nodes, per_node;  /* K x G */
    const sq_cost_platform *assumed;
    /* the source of each assumed figure, for its comment: */
    const char *flops_from, *hbm_from, *quant_from, *links_from;
} sq_netbench_platform_info;

/* *out gets the platform, *text (malloc'd, free() it; may be NULL) the
** file; the text reads back as *out. SQ_ERR_ARG when the platform would not
** validate (the sentence says which figure). */
int sq_netbench_platform(const sq_netbench_result *r, size_t n,
                         const sq_netbench_platform_info *info, sq_cost_platform *out,
                         char **text, sq_error *err);

/* Around the measuring (src/mpi/netbench_run.c). Why a level gives no rows
** on this job (too few ranks at that level), or NULL when it gives some. */
const char *sq_netbench_skip_reason(const sq_mpi *m, int level);
/* The distinct hosts of the job, comma-separated, in rank order. */
void sq_netbench_hosts(const sq_mpi *m, char *buf, size_t len);
/* The default platform name: netbench-HOST, with what a name cannot hold
** made '-'. */
void sq_netbench_default_name(const char *host, char *buf, size_t len);

/* Opens db and begins the run of kind 'netbench' (its config and
** parameters from cfg, the topology and the hosts): SQ_OK with *s open,
** else the store's failure (SQ_ERR_BUSY for a locked database), or
** SQ_ERR_CONFLICT for a run found done before it began. */
struct sq_store;
int sq_netbench_store_begin(const char *db, int busy_ms, const sq_mpi *m,
                            const sq_netbench_config *cfg, const sq_topo *t, const char *hosts,
                            const char *platform_out, struct sq_store **s, int64_t *run,
                            sq_error *err);
/* Every result as a netbench_results row, in one transaction, and the
** run's end: 'failed' with `failure` (no rows) when it is not NULL, else
** 'done'. SQ_OK, or the store's failure. */
int sq_netbench_store_end(struct sq_store *s, int64_t run, const sq_netbench_result *r, size_t n,
                          const char *failure, sq_error *err);

/* The figures netbench cannot measure: the platform `assume` (a built-in
** name or a file), with tflops, hbm_gbs or quant_gbs (NaN: the platform's)
** replacing one of them; each figure's source for the file's comments. */
typedef struct sq_netbench_assumed {
    sq_cost_platform p;
    char flops[160], hbm[160], quant[160], links[160];
} sq_netbench_assumed;
int sq_netbench_assumed_read(const char *assume, double tflops, double hbm_gbs, double quant_gbs,
                             sq_netbench_assumed *a, sq_error *err);
/* The platform file's description of the job (for sq_netbench_platform):
** its name, date, hosts and topology, and the assumed figures of a. */
sq_netbench_platform_info sq_netbench_info(const sq_netbench_assumed *a, const sq_topo *t,
                                           const char *hosts, const char *name, const char *date);

/* ------------------------------------------------------------------------ */
/* A sweep across ranks                                                     */
/* ------------------------------------------------------------------------ */

/*
** sq_mpi_schedule -- the configurations of a sweep (sweep.h) handed out to the
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
    SQ_MPI_SCHEDULE_GO = 0,   /* hand it out */
    SQ_MPI_SCHEDULE_WAIT = 1, /* another live process runs its key: ask again later */
    SQ_MPI_SCHEDULE_SKIP = 2  /* the database holds it as done now: skip it */
};

/* What happened to a configuration, as rank 0 tells its event hook. */
enum {
    SQ_MPI_SCHEDULE_SENT = 0,      /* handed out to e->rank */
    SQ_MPI_SCHEDULE_DONE = 1,      /* ran and stored 'done' (e->id) */
    SQ_MPI_SCHEDULE_FAILED = 2,    /* ran and failed: stored 'failed' (e->id), or not stored
                                ** (e->id 0: it failed before its run began, or could not be
                                ** stored); e->error says why */
    SQ_MPI_SCHEDULE_ELSEWHERE = 3, /* another process stored it done meanwhile: skipped */
    SQ_MPI_SCHEDULE_HELD = 4       /* another live process runs its key: waits */
};

typedef struct sq_mpi_schedule_event {
    int what;          /* SQ_MPI_SCHEDULE_SENT ... */
    size_t run;        /* index into sw->runs */
    int rank;          /* the rank that ran it (-1: none) */
    const char *host;  /* that rank's host ("" when none) */
    double seconds;    /* the job's wall time on its rank (0 when none) */
    int64_t id;        /* the run's id in the database (0: none) */
    const char *error; /* FAILED: the job's sentence, or the store's; else "" */
} sq_mpi_schedule_event;

typedef struct sq_mpi_schedule_opts {
    const char *db;   /* rank 0: the database file (created or migrated beforehand:
                      ** sq_sweep_load_done); no other rank opens it */
    unsigned char *done; /* rank 0: sw->nruns flags: in, the runs to skip (done
                      ** before); out, also those done now or meanwhile */
    int threads;      /* a worker's OpenMP and BLAS threads; 0: the CPUs it may run on
                      ** divided by the workers on its host, unless OMP_NUM_THREADS is
                      ** set (then left alone); < 0: left alone */
    void *ctx;        /* rank 0's hooks' argument; every hook may be NULL */
    int (*ready)(void *ctx, size_t run); /* before a handout: SQ_MPI_SCHEDULE_GO, ... */
    void (*event)(void *ctx, const sq_mpi_schedule_event *e);
} sq_mpi_schedule_opts;

typedef struct sq_mpi_schedule_counts {
    size_t before;    /* done before the sweep began: skipped */
    size_t done;      /* run and stored done */
    size_t failed;    /* run and failed */
    size_t elsewhere; /* stored done by another process meanwhile: skipped */
    int workers;      /* ranks that ran jobs */
    /* on failure, on every rank: */
    int together;     /* every rank failed at once (a check they all made), so each may
                      ** end normally (sq_mpi_finalize) instead of ending the job */
    int echo;         /* err repeats what another rank says: no need to say it here */
} sq_mpi_schedule_counts;

/* Runs sw across the ranks of *comm (an MPI_Comm; NULL: MPI_COMM_WORLD);
** collective: every rank calls it with the sweep it loaded. On rank 0,
** *counts (may be NULL) says what happened. SQ_OK once every configuration
** ran or was skipped, failed ones included (rank 0's counts tell); a
** negative kind when the sweep could not go on (an MPI failure, recipes
** that differ between ranks, the database unusable), with err naming the
** rank, its host and the file or field at fault: the caller then ends
** every rank (sq_mpi_abort), since the others may wait for it -- unless
** counts->together says that every rank returned. */
int sq_mpi_schedule(const void *comm, const sq_sweep *sw, const sq_mpi_schedule_opts *o,
                 sq_mpi_schedule_counts *counts, sq_error *err);

/* 1 on every rank when ok is nonzero on every rank of *comm (NULL:
** MPI_COMM_WORLD), else 0 on every rank; collective. For a start that
** every rank must agree on (each loaded the recipe). A failed call is
** SQ_ERR_IO, *all 0. */
int sq_mpi_all_ok(const void *comm, int ok, int *all, sq_error *err);

/* ---- netbench: printing (netbench_print.c) ----------------------------
** What `shardq netbench` prints, to a stream: nccl-tests' table as the
** results come, a summary per level, or the whole run as one JSON object. */

/* The table being printed: give sq_netbench_print_result as the config's
** progress and a printer as its user ({out, json, leader, -1, -1}); only a
** leader's text is printed, nothing with json. */
typedef struct sq_netbench_printer {
    FILE *out;
    int json, leader;
    int op, level; /* of the block being printed; -1: none yet */
    double busbw_sum;
    int rows;
} sq_netbench_printer;

/* One result (user: a sq_netbench_printer): a header at each new level and
** collective, then its row. */
void sq_netbench_print_result(void *user, const sq_netbench_result *r);
/* The average bus bandwidth of the block printed last, if any. */
void sq_netbench_print_block_end(sq_netbench_printer *p);
/* The table's header: ranks, hosts, sizes, and the levels skipped. */
void sq_netbench_print_header(FILE *f, const sq_mpi *m, const sq_netbench_config *cfg,
                              int ranks, const sq_topo *topo, const char *hosts);
/* The plateau busbw and latency per level (json: as a ",\"levels\":[...]"
** member). */
void sq_netbench_print_summary(FILE *f, const sq_mpi *m, const sq_netbench_config *cfg,
                               const sq_netbench_result *r, size_t n, int json);
/* When no level has ranks to measure between: why, and how to launch it. */
void sq_netbench_print_nothing(FILE *f, const sq_mpi *m, const sq_netbench_config *cfg,
                               int ranks, const sq_topo *topo, int json);
/* The whole run as one JSON object: db and platform_file may be NULL (null),
** run -1 when not stored. */
void sq_netbench_print_json(FILE *f, const sq_mpi *m, const sq_netbench_config *cfg, int ranks,
                            const sq_topo *topo, const char *hosts, const sq_netbench_result *res,
                            size_t n, const char *db, int64_t run, const char *platform_file);

SQ_END_DECLS
#endif /* SHARDQ_MPI_H */
