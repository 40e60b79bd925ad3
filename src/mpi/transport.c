/*
** transport.c -- the plan's transport over MPI (shardq/mpi.h).
**
** Only bytes move here: what to send, to whom and in which order is the
** plan's (world/plan.c), so the bytes equal the in-process world's by
** construction, and this file is about MPI alone -- communicators per link
** level, counts that fit an int, and errors that name the peer and host.
*/
#include "shardq/mpi.h"
#include "mpi/mpi_internal.h"

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MPI counts are ints: larger buffers go in pieces of 1 GiB. */
#define CHUNK ((size_t)1 << 30)

struct sq_mpi {
    MPI_Comm world;  /* a duplicate of the caller's: the inter-node link, share, gather */
    MPI_Comm node;   /* the ranks of this rank's node: the intra-node link */
    int rank, size, G;
    char (*hosts)[MPI_MAX_PROCESSOR_NAME];
    int nhosts;
    sq_transport tr;
};

static int we_initialised;

static int mpi_fail(sq_error *err, int code, const char *fmt, const char *what, int peer,
                    const sq_mpi *m)
{
    char why[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(code, why, &len);
    char head[256];
    snprintf(head, sizeof head, fmt, what, peer, m ? sq_mpi_host(m, peer) : "?");
    return sq_error_set(err, SQ_ERR_IO, "%s: %s", head, why);
}

int sq_mpi_init(int *argc, char ***argv, int *rank, int *size, sq_error *err)
{
    int on = 0, provided = 0;
    MPI_Initialized(&on);
    if (!on) {
        if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return sq_error_set(err, SQ_ERR_IO, "MPI_Init_thread failed");
        we_initialised = 1;
    }
    if (rank) MPI_Comm_rank(MPI_COMM_WORLD, rank);
    if (size) MPI_Comm_size(MPI_COMM_WORLD, size);
    return SQ_OK;
}

void sq_mpi_finalize(void)
{
    int on = 0, off = 0;
    MPI_Initialized(&on);
    MPI_Finalized(&off);
    if (we_initialised && on && !off) MPI_Finalize();
}

void sq_mpi_abort(int code)
{
    int on = 0, off = 0;
    MPI_Initialized(&on);
    MPI_Finalized(&off);
    if (on && !off) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

const char *sq_mpi_library(void)
{
    static char text[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(text, &len);
    text[strcspn(text, "\n,")] = '\0';
    return text;
}

/* ------------------------------------------------------------------------ */
/* Moving bytes                                                             */
/* ------------------------------------------------------------------------ */

/* The communicator of a message's link, and the peer's rank in it. */
static MPI_Comm link_comm(const sq_mpi *m, int link, int peer, int *rank_in)
{
    if (link == SQ_LINK_INTRA) {
        *rank_in = peer % m->G;
        return m->node;
    }
    *rank_in = peer;
    return m->world;
}

static int send_bytes(MPI_Comm c, int to, int tag, const void *p, uint64_t n)
{
    const char *b = p;
    for (uint64_t off = 0; off < n; off += CHUNK) {
        int count = (int)(n - off < CHUNK ? n - off : CHUNK);
        int rc = MPI_Send(b + off, count, MPI_BYTE, to, tag, c);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

static int recv_bytes(MPI_Comm c, int from, int tag, void *p, uint64_t n)
{
    char *b = p;
    for (uint64_t off = 0; off < n; off += CHUNK) {
        int count = (int)(n - off < CHUNK ? n - off : CHUNK);
        int rc = MPI_Recv(b + off, count, MPI_BYTE, from, tag, c, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

static int mpi_send(void *ctx, const sq_plan_msg *msg, const sq_qbuf *from, sq_error *err)
{
    const sq_mpi *m = ctx;
    if (!from) return SQ_OK; /* a dry rank: sizes only */
    int peer;
    MPI_Comm c = link_comm(m, msg->link, msg->dst, &peer);
    const void *part[3] = {from->codes, from->scales, from->offsets};
    const uint64_t len[3] = {msg->code_bytes, msg->scale_bytes, msg->offset_bytes};
    for (int i = 0; i < 3; i++) {
        if (!len[i]) continue;
        int rc = send_bytes(c, peer, i, part[i], len[i]);
        if (rc != MPI_SUCCESS)
            return mpi_fail(err, rc, "MPI_Send of the %s to rank %d (%s)",
                            i == 0 ? "codes" : i == 1 ? "scales" : "offsets", msg->dst, m);
    }
    return SQ_OK;
}

static int mpi_recv(void *ctx, const sq_plan_msg *msg, sq_qbuf *to, sq_error *err)
{
    const sq_mpi *m = ctx;
    if (!to) return SQ_OK;
    int peer;
    MPI_Comm c = link_comm(m, msg->link, msg->src, &peer);
    void *part[3] = {to->codes, to->scales, to->offsets};
    const uint64_t len[3] = {msg->code_bytes, msg->scale_bytes, msg->offset_bytes};
    for (int i = 0; i < 3; i++) {
        if (!len[i]) continue;
        int rc = recv_bytes(c, peer, i, part[i], len[i]);
        if (rc != MPI_SUCCESS)
            return mpi_fail(err, rc, "MPI_Recv of the %s from rank %d (%s)",
                            i == 0 ? "codes" : i == 1 ? "scales" : "offsets", msg->src, m);
    }
    return SQ_OK;
}

static int mpi_share(void *ctx, int owner, void *buf, size_t bytes, sq_error *err)
{
    const sq_mpi *m = ctx;
    char *b = buf;
    for (size_t off = 0; off < bytes; off += CHUNK) {
        int count = (int)(bytes - off < CHUNK ? bytes - off : CHUNK);
        int rc = MPI_Bcast(b + off, count, MPI_BYTE, owner, m->world);
        if (rc != MPI_SUCCESS) return mpi_fail(err, rc, "MPI_Bcast of %s from rank %d (%s)",
                                               "a worker's data", owner, m);
    }
    return SQ_OK;
}

static int mpi_gather_all(void *ctx, const void *mine, void *all, size_t bytes, sq_error *err)
{
    const sq_mpi *m = ctx;
    if (bytes > (size_t)INT32_MAX)
        return sq_error_set(err, SQ_ERR_ARG, "an all-gather of %zu bytes per rank: at most 2^31",
                            bytes);
    int rc = MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, m->world);
    return rc == MPI_SUCCESS ? SQ_OK
                             : mpi_fail(err, rc, "MPI_Allgather of %s (rank %d, %s)", "records",
                                        m->rank, m);
}

/* ------------------------------------------------------------------------ */
/* Opening                                                                  */
/* ------------------------------------------------------------------------ */

int sq_mpi_open(const void *comm, sq_topo *topo, sq_mpi **out, sq_error *err)
{
    *out = NULL;
    int on = 0;
    MPI_Initialized(&on);
    if (!on) return sq_error_set(err, SQ_ERR_ARG, "MPI is not initialised (sq_mpi_init)");
    MPI_Comm base = comm ? *(const MPI_Comm *)comm : MPI_COMM_WORLD;
    sq_mpi *m = calloc(1, sizeof *m);
    if (!m) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    m->world = m->node = MPI_COMM_NULL;
    int rc = MPI_Comm_dup(base, &m->world);
    if (rc != MPI_SUCCESS) {
        free(m);
        return mpi_fail(err, rc, "MPI_Comm_dup (%s, rank %d, %s)", "the communicator", 0, NULL);
    }
    MPI_Comm_set_errhandler(m->world, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m->world, &m->rank);
    MPI_Comm_size(m->world, &m->size);

    /* every rank's host, for messages and the node level */
    m->hosts = calloc((size_t)m->size, sizeof *m->hosts);
    char me[MPI_MAX_PROCESSOR_NAME] = "";
    int len = 0;
    MPI_Get_processor_name(me, &len);
    if (!m->hosts) goto oom;
    MPI_Allgather(me, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, m->hosts, MPI_MAX_PROCESSOR_NAME,
                  MPI_CHAR, m->world);
    m->nhosts = 0;
    for (int r = 0; r < m->size; r++) {
        int seen = 0;
        for (int q = 0; q < r && !seen; q++) seen = !strcmp(m->hosts[q], m->hosts[r]);
        m->nhosts += !seen;
    }

    if (topo->nodes == 0) {
        /* the node level of the hosts: each shared-memory domain a node */
        MPI_Comm shm;
        MPI_Comm_split_type(m->world, MPI_COMM_TYPE_SHARED, m->rank, MPI_INFO_NULL, &shm);
        int g = 0, first = 0;
        MPI_Comm_size(shm, &g);
        MPI_Allreduce(&m->rank, &first, 1, MPI_INT, MPI_MIN, shm);
        MPI_Comm_free(&shm);
        int lo = g, hi = g, blocks = first % g == 0 && first / g == m->rank / g, allblocks = 0;
        MPI_Allreduce(&g, &lo, 1, MPI_INT, MPI_MIN, m->world);
        MPI_Allreduce(&g, &hi, 1, MPI_INT, MPI_MAX, m->world);
        MPI_Allreduce(&blocks, &allblocks, 1, MPI_INT, MPI_MIN, m->world);
        if (lo != hi) {
            sq_mpi_close(m);
            return sq_error_set(err, SQ_ERR_ARG, "the hosts run between %d and %d ranks each: a "
                                "K x G world needs G on every host (or give the topology, "
                                "--workers KxG)", lo, hi);
        }
        if (!allblocks) {
            sq_mpi_close(m);
            return sq_error_set(err, SQ_ERR_ARG, "the ranks of a host are not consecutive "
                                "(node k must hold ranks k*%d .. k*%d+%d): place them in blocks "
                                "(mpirun --map-by slot) or give the topology, --workers KxG",
                                g, g, g - 1);
        }
        topo->per_node = g;
        topo->nodes = m->size / g;
    }
    if (topo->nodes * topo->per_node != m->size) {
        int size = m->size;
        sq_mpi_close(m);
        return sq_error_set(err, SQ_ERR_ARG, "topology %dx%d has %d workers, the job %d ranks: "
                            "run one rank per worker (mpirun -np %d)", topo->nodes,
                            topo->per_node, topo->nodes * topo->per_node, size,
                            topo->nodes * topo->per_node);
    }
    m->G = topo->per_node;
    rc = MPI_Comm_split(m->world, m->rank / m->G, m->rank, &m->node);
    if (rc != MPI_SUCCESS) {
        sq_mpi_close(m);
        return mpi_fail(err, rc, "MPI_Comm_split (%s, rank %d, %s)", "the node communicators", 0,
                        NULL);
    }
    MPI_Comm_set_errhandler(m->node, MPI_ERRORS_RETURN);
    m->tr = (sq_transport){m, mpi_send, mpi_recv, NULL, mpi_share, mpi_gather_all, m->size, m->rank};
    *out = m;
    return SQ_OK;
oom:
    sq_mpi_close(m);
    return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
}

void sq_mpi_close(sq_mpi *m)
{
    if (!m) return;
    int off = 0;
    MPI_Finalized(&off);
    if (!off) {
        if (m->node != MPI_COMM_NULL) MPI_Comm_free(&m->node);
        if (m->world != MPI_COMM_NULL) MPI_Comm_free(&m->world);
    }
    free(m->hosts);
    free(m);
}

const sq_transport *sq_mpi_transport(const sq_mpi *m) { return &m->tr; }
int sq_mpi_rank(const sq_mpi *m) { return m->rank; }
int sq_mpi_size(const sq_mpi *m) { return m->size; }
int sq_mpi_hosts(const sq_mpi *m) { return m->nhosts; }

const char *sq_mpi_host(const sq_mpi *m, int r)
{
    return m && m->hosts && r >= 0 && r < m->size ? m->hosts[r] : "?";
}

int sq_mpi_barrier(const sq_mpi *m, sq_error *err)
{
    int rc = MPI_Barrier(m->world);
    return rc == MPI_SUCCESS ? SQ_OK
                             : mpi_fail(err, rc, "MPI_Barrier (%s, rank %d, %s)", "all ranks",
                                        m->rank, m);
}

/* For the other files of src/mpi (mpi_internal.h). */
MPI_Comm sq_mpi_world_comm(const sq_mpi *m) { return m->world; }
MPI_Comm sq_mpi_node_comm(const sq_mpi *m) { return m->node; }
int sq_mpi_per_node(const sq_mpi *m) { return m->G; }
