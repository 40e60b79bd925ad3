/*
** transport.c -- the plan's transport over MPI (shardq/mpi.h).
**
** Only bytes move here: what to send, to whom and in which order is the
** plan's (world/plan.c), so the bytes equal the in-process world's by
** construction, and this file is about MPI alone -- communicators per link
** level, counts that fit an int, and errors that name the peer and host.
**
** Every message of a phase is posted without blocking (MPI_Isend and
** MPI_Irecv) and the phase ends when all of them have completed
** (phase_end). With blocking calls a ring round was a chain: the one rank
** of a cycle that sends first passes its message on, and every other rank
** can send only once its own receive has completed, so a round of m ranks
** took m transfers one after another instead of one, each ring step of a
** collective m times too long for messages past MPI's eager limit. Posted
** together, the round's transfers run at once, as they do inside MPI's
** and NCCL's own collectives. The plan's phase rule (plan.h: no op of a
** phase reads what a message of that phase brings, no region a SEND of it
** reads is written in it) is what makes this change no byte.
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
    MPI_Request *pending; /* the phase's posted sends and receives */
    size_t npending, cap;
    int pending_peer;     /* for messages: the peer of the last one posted */
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

/* Keeps a posted request until the phase ends. */
static int keep(sq_mpi *m, MPI_Request r)
{
    if (m->npending == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 64;
        MPI_Request *p = realloc(m->pending, cap * sizeof *p);
        if (!p) {
            MPI_Cancel(&r);
            MPI_Request_free(&r);
            return MPI_ERR_NO_MEM;
        }
        m->pending = p, m->cap = cap;
    }
    m->pending[m->npending++] = r;
    return MPI_SUCCESS;
}

/* Posts n bytes in pieces MPI's int counts can hold; the pieces of one
** message keep their order (MPI's non-overtaking rule). */
static int post_bytes(sq_mpi *m, int sending, MPI_Comm c, int peer, int tag, void *p, uint64_t n)
{
    char *b = p;
    for (uint64_t off = 0; off < n; off += CHUNK) {
        int count = (int)(n - off < CHUNK ? n - off : CHUNK);
        MPI_Request r;
        int rc = sending ? MPI_Isend(b + off, count, MPI_BYTE, peer, tag, c, &r)
                         : MPI_Irecv(b + off, count, MPI_BYTE, peer, tag, c, &r);
        if (rc == MPI_SUCCESS) rc = keep(m, r);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

/* Posts the three parts of one message (codes, scales, offsets). */
static int post(sq_mpi *m, int sending, const sq_plan_msg *msg, void *const part[3], sq_error *err)
{
    int peer, other = sending ? msg->dst : msg->src;
    MPI_Comm c = link_comm(m, msg->link, other, &peer);
    const uint64_t len[3] = {msg->code_bytes, msg->scale_bytes, msg->offset_bytes};
    for (int i = 0; i < 3; i++) {
        if (!len[i]) continue;
        int rc = post_bytes(m, sending, c, peer, i, part[i], len[i]);
        if (rc != MPI_SUCCESS)
            return mpi_fail(err, rc, sending ? "MPI_Isend of the %s to rank %d (%s)"
                                             : "MPI_Irecv of the %s from rank %d (%s)",
                            i == 0 ? "codes" : i == 1 ? "scales" : "offsets", other, m);
    }
    m->pending_peer = other;
    return SQ_OK;
}

static int mpi_send(void *ctx, const sq_plan_msg *msg, const sq_qbuf *from, sq_error *err)
{
    if (!from) return SQ_OK; /* a dry rank: sizes only */
    void *const part[3] = {from->codes, from->scales, from->offsets};
    return post(ctx, 1, msg, part, err);
}

static int mpi_recv(void *ctx, const sq_plan_msg *msg, sq_qbuf *to, sq_error *err)
{
    if (!to) return SQ_OK;
    void *const part[3] = {to->codes, to->scales, to->offsets};
    return post(ctx, 0, msg, part, err);
}

/* Completes every message the phase posted. */
static int mpi_phase_end(void *ctx, int coll, int phase, sq_error *err)
{
    sq_mpi *m = ctx;
    (void)coll, (void)phase;
    if (!m->npending) return SQ_OK;
    int rc = MPI_Waitall((int)m->npending, m->pending, MPI_STATUSES_IGNORE);
    m->npending = 0;
    return rc == MPI_SUCCESS ? SQ_OK
                             : mpi_fail(err, rc, "MPI_Waitall of the %s (last peer rank %d, %s)",
                                        "phase's messages", m->pending_peer, m);
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
    m->tr = (sq_transport){m, mpi_send, mpi_recv, mpi_phase_end, mpi_share, mpi_gather_all,
                           m->size, m->rank};
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
        /* a phase that failed part-way leaves requests behind */
        for (size_t i = 0; i < m->npending; i++) {
            MPI_Cancel(&m->pending[i]);
            MPI_Request_free(&m->pending[i]);
        }
        if (m->node != MPI_COMM_NULL) MPI_Comm_free(&m->node);
        if (m->world != MPI_COMM_NULL) MPI_Comm_free(&m->world);
    }
    free(m->pending);
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
