/*
** mpi_internal.h -- what the files of src/mpi share beyond shardq/mpi.h:
** the communicators of an sq_mpi, which the public header cannot name
** (it compiles without <mpi.h>).
*/
#ifndef SQ_MPI_INTERNAL_H
#define SQ_MPI_INTERNAL_H

#include "shardq/mpi.h"

#include <mpi.h>

/* The duplicate of the caller's communicator (every rank: the inter-node
** link, share, gather) and this rank's node communicator (the G ranks of
** its node, rank r at r mod G). Owned by m: never freed by the caller. */
MPI_Comm sq_mpi_world_comm(const sq_mpi *m);
MPI_Comm sq_mpi_node_comm(const sq_mpi *m);
/* G: ranks per node of m's topology (its nodes are size / G). */
int sq_mpi_per_node(const sq_mpi *m);

#endif
