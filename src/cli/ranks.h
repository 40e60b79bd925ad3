/*
** ranks.h -- `--transport`: the commands that run a world (world, replay,
** train) in one process, or one worker per MPI rank.
*/
#ifndef SQ_CLI_RANKS_H
#define SQ_CLI_RANKS_H

#include "shardq/plan.h"

enum {
    CLI_TRANSPORT_AUTO = 0,
    CLI_TRANSPORT_INPROC = 1,
    CLI_TRANSPORT_MPI = 2,
    CLI_TRANSPORT_NCCL = 3,        /* one worker per MPI rank, one GPU each, NCCL between */
    CLI_TRANSPORT_NCCL_INPROC = 4  /* every worker here, over the GPUs, NCCL between them */
};

typedef struct cli_ranks {
    int on;                 /* 1: one worker per rank */
    int kind;               /* CLI_TRANSPORT_*, AUTO resolved */
    int rank, size;
    void *mpi;              /* sq_mpi * */
    void *nccl;             /* sq_nccl * (nccl, nccl-inproc) */
    const sq_transport *tr; /* for sq_world_config.transport; NULL in process */
    char host[256];
    char device[24];        /* nccl: this rank's GPU, "cuda:D" */
    double t0;
} cli_ranks;

/* More than one rank, as an MPI launcher tells it in the environment
** (before MPI is initialised). */
int cli_launched_many(void);
/* "inproc", "mpi", "nccl", "nccl-inproc" or "auto" into *kind; CLI_USAGE
** with a message if none. */
int cli_transport_parse(const char *cmd, const char *text, int *kind);
/* The name of R's transport, as --transport spells it. */
const char *cli_ranks_kind_name(const cli_ranks *R);
/* Starts the ranks for kind (AUTO resolved here): MPI initialised, the
** transport opened for *topo (has_topo 0: the node level from the hosts,
** written into *topo). *device is the command's --device (NULL when not
** given) and becomes where the world must live: "cpu" by default; for
** nccl this rank's GPU, "cuda:D"; for nccl-inproc the GPUs given (default
** "cuda"). On ranks other than 0 stdout goes to /dev/null. CLI_OK, or
** CLI_USAGE / CLI_RUNTIME with the message printed. */
int cli_ranks_begin(const char *cmd, int kind, sq_topo *topo, int has_topo, const char **device,
                    cli_ranks *R);
/* Ends the ranks with the command's status: rc == CLI_OK finalises MPI;
** any other rc names this rank and its host on stderr and ends every rank
** of the job (MPI_Abort), so that no rank waits for a failed one. Returns
** rc (in process, or when MPI could not abort). */
int cli_ranks_end(const char *cmd, cli_ranks *R, int rc);
/* The collectives' measured wall time (sq_world_times summed over a run's
** worlds) as a text line beside the run's total seconds, and as a JSON
** member "collectives":{...} (printed after a comma). */
void cli_print_colls(const sq_coll_time coll[SQ_NCOLL], double total, const cli_ranks *R);
void cli_json_colls(const sq_coll_time coll[SQ_NCOLL], double total, const cli_ranks *R);

/* 1 on the rank that prints and writes the store (rank 0, or in process). */
static inline int cli_ranks_leader(const cli_ranks *R) { return !R->on || R->rank == 0; }

#endif
