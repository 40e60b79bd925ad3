/*
** mpi_internal.h -- what the NCCL transport (nccl.c) needs of an sq_mpi
** beyond the public header: its communicator. Not installed.
*/
#ifndef SQ_MPI_INTERNAL_H
#define SQ_MPI_INTERNAL_H

#include "shardq/mpi.h"

#include <mpi.h>

/* The transport's duplicate of the caller's communicator (rank r = worker r). */
MPI_Comm sq_mpi_internal_comm(const sq_mpi *m);

#endif
