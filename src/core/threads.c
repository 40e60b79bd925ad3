/*
** threads.c -- how many OpenMP threads the fused operations use.
*/
#include "shardq/codec.h"
#ifdef _OPENMP
#include <omp.h>
#endif

static int sq_threads_wanted; /* 0: OpenMP's default */

int sq_set_threads(int n)
{
    sq_threads_wanted = n > 0 ? n : 0;
    return sq_get_threads();
}

/* Inside a parallel region of several threads (the trainer's workers side
** by side, a codec tile's Hadamard), a call runs on the calling thread: its
** loops were split at the outer level already. Inside a region of one
** thread (an outer count of 1, or an `if` that was false) it is the count
** wanted, as outside: that is why every region asks for num_threads(this),
** since a region that does not gets OpenMP's default as a nested team. */
int sq_get_threads(void)
{
#ifdef _OPENMP
    if (omp_in_parallel()) return 1;
    return sq_threads_wanted > 0 ? sq_threads_wanted : omp_get_max_threads();
#else
    return 1;
#endif
}
