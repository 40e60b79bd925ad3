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

SQ_END_DECLS
#endif /* SHARDQ_MPI_H */
