/*
** nccl.c -- the plan's transport over NCCL (shardq/mpi.h, "nccl").
**
** As in transport.c only bytes move here: what goes where, and in which
** order, is the plan's (world/plan.c). What is NCCL's own: both ends hold
** GPU memory, the messages go on a stream of the transport's, and they are
** posted in groups -- by default every message of a phase in one group at
** phase_end. plan.h's phase rule (no op of a phase reads what a RECV of it
** writes, none writes what a SEND of it reads) makes that equal to the
** in-process world, which copies each message when it is sent; the world's
** backends finish every operation before they return, so what a SEND reads
** is in place when it is noted (mpi.h, "Deferred messages").
**
** Ranks: one communicator of ncclCommInitRank, rank r = worker r = MPI rank
** r; share and gather_all are the sq_mpi's. One process: a communicator of
** ncclCommInitAll over the GPUs that hold the workers, the notes of both
** ends of every message in this process, paired at phase_end.
*/
#include "shardq/mpi.h"
#include "mpi/mpi_internal.h"

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPART 3
static const char *const part_name[NPART] = {"codes", "scales", "offsets"};

/* ncclInProgress (non-blocking communicators, 2.14) is not an error; older
** headers lack the name, and their calls never return it. */
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
#define NCCL_OK(r) ((r) == ncclSuccess || (r) == ncclInProgress)
#else
#define NCCL_OK(r) ((r) == ncclSuccess)
#endif

/* One end of one message, noted by send() or recv() and posted at phase_end. */
typedef struct note {
    int send;             /* 1: the sending end, 0: the receiving end */
    int src, dst;         /* workers (= ranks) */
    uint64_t seq;         /* the order of noting: pairs in one process match in it */
    void *p[NPART];       /* codes, scales, offsets at this end */
    uint64_t len[NPART];
    int at;               /* the communicator of this end's GPU (index into comm[]) */
} note;

struct sq_nccl {
    sq_mpi *mpi;          /* ranks: the MPI transport (share, gather_all); NULL in one process */
    int ncomm;            /* 1 with ranks; one per GPU in one process */
    ncclComm_t *comm;
    int *dev;             /* comm[i]'s CUDA device */
    cudaStream_t *stream; /* comm[i]'s stream */
    unsigned flags;
    int rank, size;
    int broken;           /* a failure left NCCL work behind: abort, never destroy */
    note *q;              /* the phase's notes */
    size_t nq, cap;
    uint64_t seq;
    int coll, phase;      /* the phase of the notes, for messages */
    sq_transport tr;
};

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */
/* ------------------------------------------------------------------------ */

static int nccl_fail(sq_error *err, ncclResult_t r, ncclComm_t c, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int nccl_fail(sq_error *err, ncclResult_t r, ncclComm_t c, const char *fmt, ...)
{
    char head[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    const char *last = "";
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
    last = c ? ncclGetLastError(c) : "";
#else
    (void)c;
#endif
    return sq_error_set(err, SQ_ERR_DEVICE, "%s: %s%s%s%s", head, ncclGetErrorString(r),
                        last && *last ? " (" : "", last ? last : "", last && *last ? ")" : "");
}

static int cuda_fail(sq_error *err, cudaError_t e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int cuda_fail(sq_error *err, cudaError_t e, const char *fmt, ...)
{
    char head[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    (void)cudaGetLastError(); /* a sticky error would fail the next call too */
    return sq_error_set(err, SQ_ERR_DEVICE, "%s: %s", head, cudaGetErrorString(e));
}

/* Collective: the status of the first rank that failed, and its sentence, on
** every rank (so that every rank stops, and rank 0 can say why). */
static int agree(const sq_mpi *m, int rc, const sq_error *mine, sq_error *err)
{
    MPI_Comm c = sq_mpi_world_comm(m);
    const int size = sq_mpi_size(m), me = sq_mpi_rank(m);
    int bad = rc != SQ_OK ? me : size, first = size;
    if (MPI_Allreduce(&bad, &first, 1, MPI_INT, MPI_MIN, c) != MPI_SUCCESS)
        return sq_error_set(err, SQ_ERR_IO, "MPI_Allreduce (agreeing on the NCCL set-up) failed");
    if (first == size) return SQ_OK;
    struct {
        int status;
        char msg[SQ_ERROR_MSG];
    } e;
    memset(&e, 0, sizeof e);
    if (me == first) {
        e.status = rc;
        snprintf(e.msg, sizeof e.msg, "%s", sq_error_message(mine));
    }
    if (MPI_Bcast(&e, (int)sizeof e, MPI_BYTE, first, c) != MPI_SUCCESS)
        return sq_error_set(err, SQ_ERR_IO, "MPI_Bcast (the NCCL set-up's failure) failed");
    return sq_error_set(err, e.status, "rank %d (%s): %s", first, sq_mpi_host(m, first), e.msg);
}

/* "phase 1 of grad_reducescatter (6 messages: to ranks 1 2 3, from ranks 3 2 1)" */
static void describe(const sq_nccl *n, char *buf, size_t len)
{
    size_t k = (size_t)snprintf(buf, len, "phase %d of %s (%zu message%s", n->phase,
                                sq_coll_name(n->coll), n->nq, n->nq == 1 ? "" : "s");
    for (int send = 1; send >= 0 && k < len; send--) {
        int listed = 0;
        for (size_t i = 0; i < n->nq && k < len; i++) {
            const note *x = &n->q[i];
            if (x->send != send) continue;
            int peer = send ? x->dst : x->src, seen = 0;
            for (size_t j = 0; j < i && !seen; j++)
                seen = n->q[j].send == send && (send ? n->q[j].dst : n->q[j].src) == peer;
            if (seen) continue;
            if (listed == 8) {
                k += (size_t)snprintf(buf + k, len - k, " ...");
                break;
            }
            k += (size_t)snprintf(buf + k, len - k, "%s%s %d", listed ? "" : send ? ": to " : ", from ",
                                  listed ? "" : n->mpi ? "ranks" : "workers", peer);
            listed++;
        }
    }
    if (k < len) snprintf(buf + k, len - k, ")");
}

/* ------------------------------------------------------------------------ */
/* Noting and posting messages                                              */
/* ------------------------------------------------------------------------ */

/* The communicator whose GPU holds p (worker w's part), or -1 with err set:
** NCCL moves GPU memory, and a world opened on the CPU must say so plainly. */
static int comm_of(const sq_nccl *n, const void *p, int w, const char *part, sq_error *err)
{
    struct cudaPointerAttributes a;
    memset(&a, 0, sizeof a);
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) (void)cudaGetLastError(); /* old runtimes: host memory is an error */
    if (e != cudaSuccess || (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)) {
        sq_error_set(err, SQ_ERR_ARG, "worker %d's %s are in host memory: the NCCL transport "
                     "moves GPU memory (open the world on the transport's GPU, cuda:%d)",
                     w, part, n->dev[0]);
        return -1;
    }
    for (int i = 0; i < n->ncomm; i++)
        if (n->dev[i] == a.device) return i;
    sq_error_set(err, SQ_ERR_ARG, "worker %d's %s are on cuda:%d, a GPU the NCCL transport does "
                 "not join (%s cuda:%d)", w, part, a.device,
                 n->ncomm == 1 ? "this rank's is" : "its first is", n->dev[0]);
    return -1;
}

static int flush(sq_nccl *n, sq_error *err);

static int note_msg(sq_nccl *n, int send, const sq_plan_msg *m, const sq_qbuf *b, sq_error *err)
{
    if (!b) return SQ_OK; /* a dry rank: sizes only */
    if (n->nq && (n->coll != m->coll || n->phase != m->phase)) {
        /* notes of an earlier phase: its phase_end never came (the runner
        ** failed in it, or does not call phase_end); they are dropped */
        int coll = n->coll, phase = n->phase;
        n->nq = 0;
        return sq_error_set(err, SQ_ERR_ARG, "the messages of phase %d of %s were never posted: "
                            "a runner must call phase_end after each phase", phase,
                            sq_coll_name(coll));
    }
    if (n->nq == n->cap) {
        size_t cap = n->cap ? 2 * n->cap : 64;
        note *q = realloc(n->q, cap * sizeof *q);
        if (!q) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory (the NCCL transport's notes)");
        n->q = q, n->cap = cap;
    }
    note *x = &n->q[n->nq];
    memset(x, 0, sizeof *x);
    x->send = send, x->src = m->src, x->dst = m->dst, x->seq = n->seq++, x->at = -1;
    void *p[NPART] = {b->codes, b->scales, b->offsets};
    const uint64_t len[NPART] = {m->code_bytes, m->scale_bytes, m->offset_bytes};
    for (int i = 0; i < NPART; i++) {
        x->p[i] = p[i], x->len[i] = len[i];
        if (!len[i]) continue;
        int at = comm_of(n, p[i], send ? m->src : m->dst, part_name[i], err);
        if (at < 0) return err ? err->status : SQ_ERR_ARG;
        if (x->at >= 0 && at != x->at)
            return sq_error_set(err, SQ_ERR_ARG, "worker %d's message parts lie on two GPUs",
                                send ? m->src : m->dst);
        x->at = at;
    }
    n->coll = m->coll, n->phase = m->phase;
    n->nq++;
    /* one process pairs both ends of a message, which arrive one rank at a
    ** time: only at phase_end are they all there */
    if ((n->flags & SQ_NCCL_BLOCKING) && n->mpi) return flush(n, err);
    return SQ_OK;
}

static int tr_send(void *ctx, const sq_plan_msg *m, const sq_qbuf *from, sq_error *err)
{
    return note_msg(ctx, 1, m, from, err);
}

static int tr_recv(void *ctx, const sq_plan_msg *m, sq_qbuf *to, sq_error *err)
{
    return note_msg(ctx, 0, m, to, err);
}

/* Waits for every stream, watching the communicators for the asynchronous
** errors (a peer gone, the network down) that would otherwise hang it. */
static int wait_streams(sq_nccl *n, sq_error *err)
{
    for (int i = 0; i < n->ncomm; i++)
        for (;;) {
            cudaError_t e = cudaStreamQuery(n->stream[i]);
            if (e == cudaSuccess) break;
            if (e != cudaErrorNotReady) {
                char what[160];
                describe(n, what, sizeof what);
                n->broken = 1;
                return cuda_fail(err, e, "waiting for %s on cuda:%d", what, n->dev[i]);
            }
            ncclResult_t a = ncclSuccess, r = ncclCommGetAsyncError(n->comm[i], &a);
            if (r != ncclSuccess) a = r;
            if (!NCCL_OK(a)) {
                char what[160];
                describe(n, what, sizeof what);
                n->broken = 1;
                return nccl_fail(err, a, n->comm[i], "NCCL failed during %s on cuda:%d", what,
                                 n->dev[i]);
            }
            sched_yield();
        }
    return SQ_OK;
}

/* Ranks: this rank's notes, in its plan's order, as one group. NCCL runs the
** calls of a group to one peer in order, so the k-th message between two
** ranks meets the k-th, as plan.h asks. */
static int post_ranks(sq_nccl *n, sq_error *err)
{
    int rc = SQ_OK;
    cudaError_t ce = cudaSetDevice(n->dev[0]);
    if (ce != cudaSuccess) return cuda_fail(err, ce, "cudaSetDevice(%d)", n->dev[0]);
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return nccl_fail(err, r, n->comm[0], "ncclGroupStart");
    for (size_t k = 0; k < n->nq && rc == SQ_OK; k++) {
        const note *x = &n->q[k];
        for (int i = 0; i < NPART && rc == SQ_OK; i++) {
            if (!x->len[i]) continue;
            r = x->send ? ncclSend(x->p[i], (size_t)x->len[i], ncclUint8, x->dst, n->comm[0], n->stream[0])
                        : ncclRecv(x->p[i], (size_t)x->len[i], ncclUint8, x->src, n->comm[0], n->stream[0]);
            if (r != ncclSuccess)
                rc = nccl_fail(err, r, n->comm[0], "%s of the %s %s rank %d (phase %d of %s)",
                               x->send ? "ncclSend" : "ncclRecv", part_name[i],
                               x->send ? "to" : "from", x->send ? x->dst : x->src, n->phase,
                               sq_coll_name(n->coll));
        }
    }
    r = ncclGroupEnd(); /* always: a group left open would swallow every later call */
    if (rc == SQ_OK && !NCCL_OK(r)) {
        char what[160];
        describe(n, what, sizeof what);
        rc = nccl_fail(err, r, n->comm[0], "ncclGroupEnd of %s", what);
    }
    return rc;
}

static int note_cmp(const void *a, const void *b)
{
    const note *x = *(const note *const *)a, *y = *(const note *const *)b;
    if (x->src != y->src) return x->src < y->src ? -1 : 1;
    if (x->dst != y->dst) return x->dst < y->dst ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* One process: both ends of every message are noted. Sorted by (sender,
** receiver, order), the k-th send of a pair meets the k-th receive (the
** plan's matching rule); each pair is then one ncclSend on the sender's
** GPU and one ncclRecv on the receiver's, posted one after the other, so
** the calls between two GPUs pair up in the same order on both; two
** workers on one GPU need no NCCL, a device-to-device copy does (unless
** SQ_NCCL_SELF: then a send to the GPU's own rank, which NCCL allows). */
static int post_local(sq_nccl *n, sq_error *err)
{
    note **s = malloc(2 * n->nq * sizeof *s);
    if (!s) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory (pairing the messages of a phase)");
    note **v = s + n->nq;
    size_t ns = 0, nv = 0;
    for (size_t k = 0; k < n->nq; k++) {
        if (n->q[k].send) s[ns++] = &n->q[k];
        else v[nv++] = &n->q[k];
    }
    qsort(s, ns, sizeof *s, note_cmp);
    qsort(v, nv, sizeof *v, note_cmp);
    int rc = SQ_OK;
    for (size_t k = 0; k < ns || k < nv; k++) {
        const note *a = k < ns ? s[k] : NULL, *b = k < nv ? v[k] : NULL;
        if (!a || !b || a->src != b->src || a->dst != b->dst ||
            memcmp(a->len, b->len, sizeof a->len) != 0) {
            const note *x = a ? a : b;
            rc = sq_error_set(err, SQ_ERR_ARG, "phase %d of %s: the message of worker %d to "
                              "worker %d has no matching %s", n->phase, sq_coll_name(n->coll),
                              x->src, x->dst, a ? "receive" : "send");
            break;
        }
    }
    if (rc) {
        free(s);
        return rc;
    }
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) {
        free(s);
        return nccl_fail(err, r, NULL, "ncclGroupStart");
    }
    for (size_t k = 0; k < ns && rc == SQ_OK; k++) {
        const note *a = s[k], *b = v[k];
        for (int i = 0; i < NPART && rc == SQ_OK; i++) {
            if (!a->len[i]) continue;
            if (a->at == b->at && !(n->flags & SQ_NCCL_SELF)) {
                cudaError_t e = cudaSetDevice(n->dev[a->at]);
                if (e == cudaSuccess)
                    e = cudaMemcpyAsync(b->p[i], a->p[i], (size_t)a->len[i],
                                        cudaMemcpyDeviceToDevice, n->stream[a->at]);
                if (e != cudaSuccess)
                    rc = cuda_fail(err, e, "cudaMemcpyAsync of the %s of worker %d to worker %d "
                                   "(cuda:%d)", part_name[i], a->src, a->dst, n->dev[a->at]);
                continue;
            }
            r = ncclSend(a->p[i], (size_t)a->len[i], ncclUint8, b->at, n->comm[a->at], n->stream[a->at]);
            if (r == ncclSuccess)
                r = ncclRecv(b->p[i], (size_t)a->len[i], ncclUint8, a->at, n->comm[b->at],
                             n->stream[b->at]);
            if (r != ncclSuccess)
                rc = nccl_fail(err, r, n->comm[a->at], "ncclSend/ncclRecv of the %s of worker %d "
                               "(cuda:%d) to worker %d (cuda:%d)", part_name[i], a->src,
                               n->dev[a->at], a->dst, n->dev[b->at]);
        }
    }
    r = ncclGroupEnd();
    if (rc == SQ_OK && !NCCL_OK(r)) {
        char what[160];
        describe(n, what, sizeof what);
        rc = nccl_fail(err, r, NULL, "ncclGroupEnd of %s", what);
    }
    free(s);
    return rc;
}

static int flush(sq_nccl *n, sq_error *err)
{
    if (n->nq == 0) return SQ_OK;
    int rc = n->mpi ? post_ranks(n, err) : post_local(n, err);
    if (rc == SQ_OK) rc = wait_streams(n, err);
    else n->broken = 1;
    n->nq = 0;
    return rc;
}

static int tr_phase_end(void *ctx, int coll, int phase, sq_error *err)
{
    sq_nccl *n = ctx;
    n->coll = coll, n->phase = phase;
    return flush(n, err);
}

/* The world's own exchanges (a worker's data, the records after each
** collective) are small and in host memory: MPI carries them. */
static int tr_share(void *ctx, int owner, void *buf, size_t bytes, sq_error *err)
{
    const sq_transport *t = sq_mpi_transport(((sq_nccl *)ctx)->mpi);
    return t->share(t->ctx, owner, buf, bytes, err);
}

static int tr_gather_all(void *ctx, const void *mine, void *all, size_t bytes, sq_error *err)
{
    const sq_transport *t = sq_mpi_transport(((sq_nccl *)ctx)->mpi);
    return t->gather_all(t->ctx, mine, all, bytes, err);
}

/* ------------------------------------------------------------------------ */
/* Opening                                                                  */
/* ------------------------------------------------------------------------ */

const char *sq_nccl_library(void)
{
    static char text[48];
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) return "NCCL (version unknown)";
    /* NCCL_VERSION: X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z from 2.9 */
    int major = v >= 10000 ? v / 10000 : v / 1000, minor = v >= 10000 ? v % 10000 / 100 : v % 1000 / 100;
    snprintf(text, sizeof text, "NCCL %d.%d.%d", major, minor, v % 100);
    return text;
}

static int visible_devices(int *count, sq_error *err)
{
    *count = 0;
    cudaError_t e = cudaGetDeviceCount(count);
    if (e != cudaSuccess || *count == 0) {
        const char *why = e != cudaSuccess ? cudaGetErrorString(e) : "none visible";
        (void)cudaGetLastError();
        *count = 0;
        return sq_error_set(err, SQ_ERR_UNSUPPORTED,
                            "no CUDA device: the NCCL transport needs one GPU per rank (%s)", why);
    }
    return SQ_OK;
}

static int pick(const sq_mpi *m, const int *devices, int ndev, int *device, int *local,
                int *per_host, sq_error *err)
{
    MPI_Comm shm;
    if (MPI_Comm_split_type(sq_mpi_world_comm(m), MPI_COMM_TYPE_SHARED, sq_mpi_rank(m),
                            MPI_INFO_NULL, &shm) != MPI_SUCCESS)
        return sq_error_set(err, SQ_ERR_IO, "MPI_Comm_split_type (the ranks of this host) failed");
    int l = 0, g = 1, count = 0;
    MPI_Comm_rank(shm, &l);
    MPI_Comm_size(shm, &g);
    MPI_Comm_free(&shm);
    if (local) *local = l;
    if (per_host) *per_host = g;
    int rc = visible_devices(&count, err);
    if (rc) return rc;
    if (devices) {
        if (ndev < 1) return sq_error_set(err, SQ_ERR_ARG, "an empty list of GPUs");
        for (int i = 0; i < ndev; i++)
            if (devices[i] < 0 || devices[i] >= count)
                return sq_error_set(err, SQ_ERR_ARG, "cuda:%d: no such device, %d visible",
                                    devices[i], count);
    }
    int avail = devices ? ndev : count;
    if (g > avail)
        return sq_error_set(err, SQ_ERR_UNSUPPORTED, "this host runs %d ranks but has %d GPU%s "
                            "for them: the NCCL transport needs one GPU per rank (NCCL takes no "
                            "two ranks on one GPU)", g, avail, avail == 1 ? "" : "s");
    *device = devices ? devices[l % ndev] : l % count;
    return SQ_OK;
}

int sq_nccl_pick_device(const sq_mpi *m, const int *devices, int ndev, int *device, int *local,
                        int *per_host, sq_error *err)
{
    if (!m || !device) return sq_error_set(err, SQ_ERR_ARG, "sq_nccl_pick_device: NULL argument");
    sq_error mine = {0};
    int rc = pick(m, devices, ndev, device, local, per_host, &mine);
    return agree(m, rc, &mine, err);
}

static sq_nccl *alloc_nccl(int ncomm)
{
    sq_nccl *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->ncomm = ncomm;
    n->comm = calloc((size_t)ncomm, sizeof *n->comm);
    n->dev = calloc((size_t)ncomm, sizeof *n->dev);
    n->stream = calloc((size_t)ncomm, sizeof *n->stream);
    if (!n->comm || !n->dev || !n->stream) {
        free(n->comm), free(n->dev), free(n->stream), free(n);
        return NULL;
    }
    return n;
}

/* The GPUs' streams, after checking the devices and the library. */
static int set_up(sq_nccl *n, sq_error *err)
{
    int v = 0, count = 0;
    if (ncclGetVersion(&v) != ncclSuccess || v < NCCL_VERSION(2, 7, 0))
        return sq_error_set(err, SQ_ERR_UNSUPPORTED, "%s: the NCCL transport needs 2.7 or newer "
                            "(ncclSend, ncclRecv)", sq_nccl_library());
    int rc = visible_devices(&count, err);
    if (rc) return rc;
    for (int i = 0; i < n->ncomm; i++) {
        if (n->dev[i] < 0 || n->dev[i] >= count)
            return sq_error_set(err, SQ_ERR_ARG, "cuda:%d: no such device, %d visible", n->dev[i],
                                count);
        for (int j = 0; j < i; j++)
            if (n->dev[j] == n->dev[i])
                return sq_error_set(err, SQ_ERR_ARG, "cuda:%d is named twice: NCCL takes one "
                                    "rank per GPU", n->dev[i]);
        cudaError_t e = cudaSetDevice(n->dev[i]);
        if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&n->stream[i], cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            n->stream[i] = NULL;
            return cuda_fail(err, e, "creating a stream on cuda:%d", n->dev[i]);
        }
    }
    return SQ_OK;
}

static void finish_open(sq_nccl *n, unsigned flags, int nranks, int rank)
{
    n->flags = flags;
    n->rank = rank, n->size = nranks;
    /* ranks: one rank per process, share and gather_all by MPI; one process:
    ** an in-process transport (world.h), which leaves both NULL */
    n->tr = (sq_transport){n,
                           tr_send,
                           tr_recv,
                           tr_phase_end,
                           n->mpi ? tr_share : NULL,
                           n->mpi ? tr_gather_all : NULL,
                           nranks,
                           rank};
}

int sq_nccl_open(sq_mpi *m, int device, unsigned flags, sq_nccl **out, sq_error *err)
{
    if (!out) return sq_error_set(err, SQ_ERR_ARG, "sq_nccl_open: NULL argument");
    *out = NULL;
    if (!m) return sq_error_set(err, SQ_ERR_ARG, "sq_nccl_open: no MPI transport (sq_mpi_open)");
    MPI_Comm c = sq_mpi_world_comm(m);
    const int rank = sq_mpi_rank(m), size = sq_mpi_size(m);
    sq_nccl *n = alloc_nccl(1);
    if (!n) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    n->mpi = m;
    n->dev[0] = device;
    sq_error mine = {0};
    /* every rank checks its GPU before ncclCommInitRank, which would wait
    ** for ever for a rank that never comes */
    int rc = agree(m, set_up(n, &mine), &mine, err);
    if (rc) goto fail;
    struct {
        int status;
        char msg[SQ_ERROR_MSG];
        ncclUniqueId id;
    } u;
    memset(&u, 0, sizeof u);
    if (rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&u.id);
        if (r != ncclSuccess) {
            sq_error e = {0};
            u.status = nccl_fail(&e, r, NULL, "ncclGetUniqueId on rank 0");
            snprintf(u.msg, sizeof u.msg, "%s", e.msg);
        }
    }
    if (MPI_Bcast(&u, (int)sizeof u, MPI_BYTE, 0, c) != MPI_SUCCESS) {
        rc = sq_error_set(err, SQ_ERR_IO, "MPI_Bcast of NCCL's unique id failed");
        goto fail;
    }
    if (u.status) {
        rc = sq_error_set(err, u.status, "%s", u.msg);
        goto fail;
    }
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) rc = cuda_fail(&mine, e, "cudaSetDevice(%d)", device);
    else {
        ncclResult_t r = ncclCommInitRank(&n->comm[0], size, u.id, rank);
        if (r != ncclSuccess) {
            n->comm[0] = NULL;
            rc = nccl_fail(&mine, r, NULL, "ncclCommInitRank (rank %d of %d on cuda:%d)", rank,
                           size, device);
        }
    }
    if ((rc = agree(m, rc, &mine, err)) != SQ_OK) {
        n->broken = 1; /* the ranks that joined abort their half-made communicator */
        goto fail;
    }
    finish_open(n, flags, size, rank);
    *out = n;
    return SQ_OK;
fail:
    sq_nccl_close(n);
    return rc;
}

int sq_nccl_open_local(const int *devices, int ndev, unsigned flags, sq_nccl **out, sq_error *err)
{
    if (!out) return sq_error_set(err, SQ_ERR_ARG, "sq_nccl_open_local: NULL argument");
    *out = NULL;
    if (!devices || ndev < 1)
        return sq_error_set(err, SQ_ERR_ARG, "sq_nccl_open_local: no GPUs named");
    sq_nccl *n = alloc_nccl(ndev);
    if (!n) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    memcpy(n->dev, devices, (size_t)ndev * sizeof *devices);
    int rc = set_up(n, err);
    if (rc == SQ_OK) {
        ncclResult_t r = ncclCommInitAll(n->comm, ndev, n->dev);
        if (r != ncclSuccess) {
            memset(n->comm, 0, (size_t)ndev * sizeof *n->comm);
            rc = nccl_fail(err, r, NULL, "ncclCommInitAll over %d GPU%s (cuda:%d first)", ndev,
                           ndev == 1 ? "" : "s", n->dev[0]);
        }
    }
    if (rc) {
        sq_nccl_close(n);
        return rc;
    }
    finish_open(n, flags, 1, 0);
    *out = n;
    return SQ_OK;
}

void sq_nccl_close(sq_nccl *n)
{
    if (!n) return;
    for (int i = 0; i < n->ncomm; i++) {
        if (n->comm[i]) {
            if (n->broken) (void)ncclCommAbort(n->comm[i]);
            else (void)ncclCommDestroy(n->comm[i]);
        }
        if (n->stream[i]) {
            (void)cudaSetDevice(n->dev[i]);
            (void)cudaStreamDestroy(n->stream[i]);
        }
    }
    free(n->comm), free(n->dev), free(n->stream), free(n->q);
    free(n);
}

const sq_transport *sq_nccl_transport(const sq_nccl *n) { return &n->tr; }
int sq_nccl_device(const sq_nccl *n) { return n->dev[0]; }
