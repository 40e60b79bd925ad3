/*
** ranks.c -- `--transport mpi`: a command's world on real ranks. The
** command's code is the same on every rank (the world keeps the ranks in
** step, world.h); this file starts MPI, opens the transport, quiets the
** ranks that do not print, and ends the job as a whole when one rank fails.
*/
#include "ranks.h"
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef SHARDQ_HAVE_MPI
#include "shardq/mpi.h"
#endif

int cli_transport_parse(const char *cmd, const char *text, int *kind)
{
    if (!strcmp(text, "inproc")) *kind = CLI_TRANSPORT_INPROC;
    else if (!strcmp(text, "mpi")) *kind = CLI_TRANSPORT_MPI;
    else if (!strcmp(text, "auto")) *kind = CLI_TRANSPORT_AUTO;
    else {
        fprintf(stderr, "shardq %s: --transport: '%s': expected inproc, mpi or auto\n", cmd, text);
        return CLI_USAGE;
    }
    return CLI_OK;
}

int cli_launched_many(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL};
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        if (v && atoi(v) > 1) return 1;
    }
    return 0;
}

int cli_ranks_begin(const char *cmd, int kind, sq_topo *topo, int has_topo, cli_ranks *R)
{
    memset(R, 0, sizeof *R);
    R->t0 = sq_clock_s();
    if (kind == CLI_TRANSPORT_AUTO) kind = cli_launched_many() ? CLI_TRANSPORT_MPI : CLI_TRANSPORT_INPROC;
    if (kind == CLI_TRANSPORT_INPROC) return CLI_OK;
#ifndef SHARDQ_HAVE_MPI
    (void)topo, (void)has_topo;
    fprintf(stderr, "shardq %s: --transport mpi: this shardq was built without MPI (install the "
            "Debian packages openmpi-bin and libopenmpi-dev, or run ./bootstrap --deps, then "
            "./configure and make again)\n", cmd);
    return CLI_USAGE;
#else
    sq_error err = {0};
    if (sq_mpi_init(NULL, NULL, &R->rank, &R->size, &err)) {
        fprintf(stderr, "shardq %s: %s\n", cmd, sq_error_message(&err));
        return CLI_RUNTIME;
    }
    R->on = 1;
    gethostname(R->host, sizeof R->host - 1);
    sq_topo t = has_topo ? *topo : (sq_topo){0, 0};
    sq_mpi *m;
    if (sq_mpi_open(NULL, &t, &m, &err)) {
        if (R->rank == 0) fprintf(stderr, "shardq %s: %s\n", cmd, sq_error_message(&err));
        sq_mpi_finalize();
        R->on = 0;
        return CLI_USAGE;
    }
    *topo = t;
    R->mpi = m;
    R->tr = sq_mpi_transport(m);
    /* one rank prints; the others' stdout would repeat it N times */
    if (R->rank != 0 && !freopen("/dev/null", "w", stdout)) {
        fprintf(stderr, "shardq %s: rank %d: cannot silence stdout\n", cmd, R->rank);
        return CLI_RUNTIME;
    }
    return CLI_OK;
#endif
}

int cli_ranks_end(const char *cmd, cli_ranks *R, int rc)
{
    if (!R->on) return rc;
#ifdef SHARDQ_HAVE_MPI
    if (rc != CLI_OK) {
        fprintf(stderr, "shardq %s: rank %d of %d on host %s failed (exit status %d) after %.1f s; "
                "ending every rank of the job\n", cmd, R->rank, R->size, R->host, rc,
                sq_clock_s() - R->t0);
        fflush(stdout);
        fflush(stderr);
        sq_mpi_abort(rc);
    }
    fflush(stdout);
    sq_mpi_close(R->mpi);
    sq_mpi_finalize();
#else
    (void)cmd;
#endif
    R->on = 0;
    return rc;
}
