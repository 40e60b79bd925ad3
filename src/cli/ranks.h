/*
** ranks.h -- `--transport`: the commands that run a world (world, replay,
** train) in one process, or one worker per MPI rank.
*/
#ifndef SQ_CLI_RANKS_H
#define SQ_CLI_RANKS_H

#include "shardq/plan.h"

enum { CLI_TRANSPORT_AUTO = 0, CLI_TRANSPORT_INPROC = 1, CLI_TRANSPORT_MPI = 2 };

typedef struct cli_ranks {
    int on;                 /* 1: one worker per rank */
    int rank, size;
    void *mpi;              /* sq_mpi * */
    const sq_transport *tr; /* for sq_world_config.transport; NULL in process */
    char host[256];
    double t0;
} cli_ranks;

/* More than one rank, as an MPI launcher tells it in the environment
** (before MPI is initialised). */
int cli_launched_many(void);
/* "inproc", "mpi" or "auto" into *kind; CLI_USAGE with a message if neither. */
int cli_transport_parse(const char *cmd, const char *text, int *kind);
/* The help text of --transport, for the usage of every command that takes it. */
#define CLI_TRANSPORT_HELP \
    "  --transport T     inproc: every worker in this process; mpi: one worker\n" \
    "                    per rank, under mpirun -np K*G (rank 0 prints and\n" \
    "                    writes the database); auto (default): mpi when started\n" \
    "                    by an MPI launcher with more than one rank\n"
/* Starts the ranks for kind (AUTO resolved here): MPI initialised, the
** transport opened for *topo (has_topo 0: the node level from the hosts,
** written into *topo). On ranks other than 0 stdout goes to /dev/null.
** CLI_OK, or CLI_USAGE / CLI_RUNTIME with the message printed. */
int cli_ranks_begin(const char *cmd, int kind, sq_topo *topo, int has_topo, cli_ranks *R);
/* Ends the ranks with the command's status: rc == CLI_OK finalises MPI;
** any other rc names this rank and its host on stderr and ends every rank
** of the job (MPI_Abort), so that no rank waits for a failed one. Returns
** rc (in process, or when MPI could not abort). */
int cli_ranks_end(const char *cmd, cli_ranks *R, int rc);
/* 1 on the rank that prints and writes the store (rank 0, or in process). */
static inline int cli_ranks_leader(const cli_ranks *R) { return !R->on || R->rank == 0; }

#endif
