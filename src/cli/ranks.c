/*
** ranks.c -- `--transport mpi` and `nccl`: a command's world on real
** ranks, and `nccl-inproc`: every worker in this process, NCCL between
** its GPUs. The command's code is the same on every rank (the world keeps
** the ranks in step, world.h); this file starts MPI, opens the transport,
** picks each rank's GPU, quiets the ranks that do not print, and ends the
** job as a whole when one rank fails.
*/
#include "ranks.h"
#include "cli.h"
#include "backend/device.h"

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
    else if (!strcmp(text, "nccl")) *kind = CLI_TRANSPORT_NCCL;
    else if (!strcmp(text, "nccl-inproc")) *kind = CLI_TRANSPORT_NCCL_INPROC;
    else if (!strcmp(text, "auto")) *kind = CLI_TRANSPORT_AUTO;
    else {
        fprintf(stderr, "shardq %s: --transport: '%s': expected inproc, mpi, nccl, nccl-inproc or "
                "auto\n", cmd, text);
        return CLI_USAGE;
    }
    return CLI_OK;
}

const char *cli_ranks_kind_name(const cli_ranks *R)
{
    switch (R->kind) {
    case CLI_TRANSPORT_MPI: return "mpi";
    case CLI_TRANSPORT_NCCL: return "nccl";
    case CLI_TRANSPORT_NCCL_INPROC: return "nccl-inproc";
    default: return "inproc";
    }
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

#ifdef SHARDQ_HAVE_NCCL
/* The GPUs of --device for NCCL: NULL (every visible one) for "cuda" or no
** --device, else the list of "cuda:N,M,..." (checked by cli_check_device);
** --device cpu is refused: NCCL moves GPU memory. */
static int nccl_devices(const char *cmd, const char *device, int *list, int *n)
{
    *n = 0;
    if (!device || !strcmp(device, "cuda")) return CLI_OK;
    if (strncmp(device, "cuda:", 5) != 0) {
        fprintf(stderr, "shardq %s: --transport nccl moves GPU memory: --device %s cannot be used "
                "with it (leave --device out, or give cuda or cuda:N[,N...])\n", cmd, device);
        return CLI_USAGE;
    }
    for (const char *p = device + 5; *p;) {
        char *end;
        long d = strtol(p, &end, 10);
        if (*n == 64 || d > 4096) {
            fprintf(stderr, "shardq %s: --device %s: at most 64 GPUs, numbered below 4096\n", cmd,
                    device);
            return CLI_USAGE;
        }
        list[(*n)++] = (int)d;
        p = *end == ',' ? end + 1 : end;
    }
    return CLI_OK;
}

static int env_on(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

/* SHARDQ_NCCL_BLOCKING=1: each message of the ranks complete in send / recv;
** SHARDQ_NCCL_SELF=1: in one process, NCCL between workers of one GPU too. */
static unsigned nccl_flags(void)
{
    return (env_on("SHARDQ_NCCL_BLOCKING") ? SQ_NCCL_BLOCKING : 0u) |
           (env_on("SHARDQ_NCCL_SELF") ? SQ_NCCL_SELF : 0u);
}

static int no_gpu(const char *cmd)
{
    if (sq_device_count() > 0) return 0;
    fprintf(stderr, "shardq %s: no CUDA device: the NCCL transport needs the GPUs it moves data "
            "between (%s)\n", cmd, sq_device_unavailable_reason());
    return 1;
}

/* nccl-inproc: no MPI; a communicator over the GPUs the world is placed on. */
static int begin_nccl_inproc(const char *cmd, const char **device, cli_ranks *R)
{
    int list[64], n = 0;
    if (nccl_devices(cmd, *device, list, &n)) return CLI_USAGE;
    if (no_gpu(cmd)) return CLI_RUNTIME;
    if (n == 0) { /* "cuda": every visible GPU, as the world's placement takes them */
        n = sq_device_count();
        if (n > 64) n = 64;
        for (int i = 0; i < n; i++) list[i] = i;
    }
    sq_error err = {0};
    sq_nccl *nc;
    if (sq_nccl_open_local(list, n, nccl_flags(), &nc, &err)) {
        fprintf(stderr, "shardq %s: %s\n", cmd, sq_error_message(&err));
        return CLI_RUNTIME;
    }
    R->nccl = nc;
    R->tr = sq_nccl_transport(nc);
    if (!*device) *device = "cuda";
    return CLI_OK;
}
#endif

int cli_ranks_begin(const char *cmd, int kind, sq_topo *topo, int has_topo, const char **device,
                    cli_ranks *R)
{
    memset(R, 0, sizeof *R);
    R->t0 = sq_clock_s();
    if (kind == CLI_TRANSPORT_AUTO) kind = cli_launched_many() ? CLI_TRANSPORT_MPI : CLI_TRANSPORT_INPROC;
    R->kind = kind;
    if (kind == CLI_TRANSPORT_INPROC) {
        if (!*device) *device = "cpu";
        return CLI_OK;
    }
    if (kind == CLI_TRANSPORT_NCCL || kind == CLI_TRANSPORT_NCCL_INPROC) {
#ifndef SHARDQ_HAVE_NCCL
        (void)topo, (void)has_topo, (void)device;
        fprintf(stderr, "shardq %s: --transport %s: this shardq was built without NCCL (configure "
                "builds it when it finds CUDA, MPI and nccl.h of NCCL 2.7 or newer; ./configure "
                "says why not on its NCCL line)\n", cmd, cli_ranks_kind_name(R));
        return CLI_USAGE;
#else
        if (kind == CLI_TRANSPORT_NCCL_INPROC) return begin_nccl_inproc(cmd, device, R);
#endif
    }
#ifndef SHARDQ_HAVE_MPI
    (void)topo, (void)has_topo;
    fprintf(stderr, "shardq %s: --transport mpi: this shardq was built without MPI (install the "
            "Debian packages openmpi-bin and libopenmpi-dev, or run ./bootstrap --deps, then "
            "./configure and make again)\n", cmd);
    return CLI_USAGE;
#else
    sq_error err = {0};
#ifdef SHARDQ_HAVE_NCCL
    int list[64], nlist = 0;
    if (kind == CLI_TRANSPORT_NCCL && nccl_devices(cmd, *device, list, &nlist)) return CLI_USAGE;
#endif
    if (!*device) *device = "cpu";
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
#ifdef SHARDQ_HAVE_NCCL
    if (kind == CLI_TRANSPORT_NCCL) {
        /* the GPU of the node-local rank; every rank agrees on a failure,
        ** so they all stop here and rank 0 says why */
        int dev = -1;
        sq_nccl *nc = NULL;
        int rc = sq_nccl_pick_device(m, nlist ? list : NULL, nlist, &dev, NULL, NULL, &err);
        if (rc == SQ_OK) rc = sq_nccl_open(m, dev, nccl_flags(), &nc, &err);
        if (rc) {
            if (R->rank == 0) fprintf(stderr, "shardq %s: %s\n", cmd, sq_error_message(&err));
            sq_mpi_close(m);
            sq_mpi_finalize();
            R->on = 0, R->mpi = NULL, R->tr = NULL;
            return rc == SQ_ERR_ARG ? CLI_USAGE : CLI_RUNTIME;
        }
        R->nccl = nc;
        R->tr = sq_nccl_transport(nc);
        snprintf(R->device, sizeof R->device, "cuda:%d", dev);
        *device = R->device;
    }
#endif
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
#ifdef SHARDQ_HAVE_NCCL
    if (!R->on && R->nccl) { /* nccl-inproc */
        sq_nccl_close(R->nccl);
        R->nccl = NULL;
    }
#endif
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
#ifdef SHARDQ_HAVE_NCCL
    if (R->nccl) sq_nccl_close(R->nccl);
    R->nccl = NULL;
#endif
    sq_mpi_close(R->mpi);
    sq_mpi_finalize();
#else
    (void)cmd;
#endif
    R->on = 0;
    return rc;
}

void cli_print_colls(const sq_coll_time coll[SQ_NCOLL], double total, const cli_ranks *R)
{
    const sq_coll_time *g = &coll[SQ_COLL_GRAD], *w = &coll[SQ_COLL_WEIGHT];
    double both = g->seconds + w->seconds;
    printf("  collectives %s: reduce-scatter %.3f s (in the transport: intra %.3f, inter %.3f),\n"
           "              all-gather %.3f s (intra %.3f, inter %.3f): %.1f%% of %.3f s\n",
           R->on ? "measured on the ranks" : "emulated in process",
           g->seconds, g->link_seconds[SQ_LINK_INTRA], g->link_seconds[SQ_LINK_INTER], w->seconds,
           w->link_seconds[SQ_LINK_INTRA], w->link_seconds[SQ_LINK_INTER],
           total > 0 ? 100 * both / total : 0.0, total);
}

void cli_json_colls(const sq_coll_time coll[SQ_NCOLL], double total, const cli_ranks *R)
{
    printf("\"collectives\":{\"transport\":\"%s\",\"ranks\":%d", R->on ? "mpi" : "inproc",
           R->on ? R->size : 1);
    for (int c = 0; c < SQ_NCOLL; c++)
        printf(",\"%s\":{\"calls\":%llu,\"seconds\":%.6f,\"intra_seconds\":%.6f,"
               "\"inter_seconds\":%.6f}", sq_coll_name(c), (unsigned long long)coll[c].calls,
               coll[c].seconds, coll[c].link_seconds[SQ_LINK_INTRA],
               coll[c].link_seconds[SQ_LINK_INTER]);
    double both = coll[0].seconds + coll[1].seconds;
    printf(",\"share\":%.6f}", total > 0 ? both / total : 0.0);
}
